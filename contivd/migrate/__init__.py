"""contivd.migrate: moving a running Contiv installation into contivd (`contivd import-contiv`).

`source` reads Contiv's etcd v2 tree (read-only GETs) into a `ContivTree`; `plan` turns it into
the contivd store contents by replaying every configuration object through the netmaster on
an in-memory store and then laying Contiv's allocations over the result (addresses, tags, EPG
ids, endpoints), so contivd's own serialisation writes every value; `commit` is the leader
side: one guarded transaction, refused on a non-empty store unless forced; `verify` compares
the source with what contivd then answers through its REST API.
"""

# The submodules are imported by name (commit by every node's API, the rest by `contivd import-contiv`):
# re-exporting them here would load the whole importer, and httpx, on every node.

"""contivd.migrate: moving a running Contiv installation into contivd (`contivd import-contiv`).

`source` reads Contiv's etcd v2 tree (read-only GETs) into a `ContivTree`; `plan` turns it into
the contivd store contents by replaying every configuration object through the netmaster on
an in-memory store and then laying Contiv's allocations over the result (addresses, tags, EPG
ids, endpoints), so contivd's own serialisation writes every value; `commit` is the leader
side: one guarded transaction, refused on a non-empty store unless forced; `verify` compares
the source with what contivd then answers through its REST API.
"""

from .client import submit_import as submit_import
from .commit import IMPORT_PATH as IMPORT_PATH
from .commit import ImportContext as ImportContext
from .commit import register_import_route as register_import_route
from .plan import ImportPlan as ImportPlan
from .plan import plan_import as plan_import
from .source import ContivTree as ContivTree
from .source import MigrationError as MigrationError
from .source import read_contiv_values as read_contiv_values
from .verify import verification_plan as verification_plan
from .verify import verify_import as verify_import

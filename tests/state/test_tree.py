"""The import's view of the store as a whole (contivd.state.tree): what makes a store not
empty, the one transaction that replaces the owned tree, and the planned tree addressed by object."""

from __future__ import annotations

from contivd.state.tree import OwnedTree, PlannedTree, network_states
from raftstore import Delete, MemoryStore, Put, mod_revision_is


async def _store() -> MemoryStore:
    store = MemoryStore()
    for key, value in [
        ("/contiv.io/obj/modeldb/global/global", {"name": "global"}),
        ("/contiv.io/obj/modeldb/tenant/default", {"tenantName": "default"}),
        ("/contiv.io/obj/modeldb/network/default:n1", {"networkName": "n1"}),
        ("/contiv.io/state/nets/n1.default", {"id": "n1.default"}),
        ("/contiv.io/state/eps/n1.default-e1", {"id": "n1.default-e1"}),
        ("/contiv.io/nodes/node1", {"name": "node1"}),
        ("/contiv.io/k8s/services/shop/web", {"name": "web"}),
        ("/contiv.io/obj/version", 4),
    ]:
        await store.put(key, value)
    return store


async def test_the_owned_tree_names_what_the_user_made_and_is_replaced_in_one_guarded_transaction() -> None:
    store = await _store()
    owned = OwnedTree.read_nowait(store)
    assert owned.user_content() == ["network/default:n1", "/contiv.io/state/eps/n1.default-e1"]
    guards, ops = owned.replacement({"/contiv.io/obj/modeldb/tenant/default": {"tenantName": "default"}, "/contiv.io/state/global/global": {}})
    version, network = store.get_nowait("/contiv.io/obj/version"), store.get_nowait("/contiv.io/state/nets/n1.default")
    assert version is not None and network is not None
    assert guards == [
        mod_revision_is("/contiv.io/obj/version", version.mod_revision),
        mod_revision_is("/contiv.io/state/nets/n1.default", network.mod_revision),
    ]
    assert ops == [
        Delete("/contiv.io/obj/modeldb/global/global"),
        Delete("/contiv.io/obj/modeldb/network/default:n1"),
        Delete("/contiv.io/state/eps/n1.default-e1"),
        Delete("/contiv.io/state/nets/n1.default"),
        Put("/contiv.io/obj/modeldb/tenant/default", {"tenantName": "default"}),
        Put("/contiv.io/state/global/global", {}),
        Put("/contiv.io/obj/version", 5),
    ], "nodes and Kubernetes records are not the import's"
    empty = OwnedTree.read_nowait(MemoryStore())
    assert empty.user_content() == [] and empty.replacement({})[1] == [Put("/contiv.io/obj/version", 1)]


async def test_the_planned_tree_addresses_its_entries_by_object() -> None:
    store = await _store()
    await store.put("/contiv.io/state/tags/global", {"vlan": ""})
    await store.put("/contiv.io/state/endpointGroups/g1:default", {"groupName": "g1"})
    planned = PlannedTree.read_nowait(store)
    assert "/contiv.io/obj/version" not in planned.entries and "/contiv.io/nodes/node1" in planned.entries
    assert planned.tags() == {"vlan": ""} and planned.group("default", "g1") == {"groupName": "g1"}
    planned.network("default", "n1")["epCount"] = 1  # mutated in place, as the overlay does
    planned.set_object("network", "default:n2", {"networkName": "n2"})
    planned.set_endpoint("n1.default-e2", {"id": "n1.default-e2"})
    assert planned.entries["/contiv.io/state/nets/n1.default"] == {"id": "n1.default", "epCount": 1}
    assert planned.entries["/contiv.io/obj/modeldb/network/default:n2"] == {"networkName": "n2"}
    assert planned.entries["/contiv.io/state/eps/n1.default-e2"] == {"id": "n1.default-e2"}
    assert Put("/contiv.io/state/eps/n1.default-e2", {"id": "n1.default-e2"}) in planned.puts()
    assert network_states(planned.entries) == [{"id": "n1.default", "epCount": 1}]

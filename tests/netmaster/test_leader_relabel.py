"""Moving a running endpoint between groups and replacing its labels (the leader's pod watch)."""

from __future__ import annotations

from typing import Any

import pytest

from contivd.model import NotFoundError, ValidationError
from contivd.netmaster.service import Netmaster
from contivd.state import keys as layout
from raftstore import MemoryStore
from tests.netmaster.helpers import TENANT, create, endpoint_request, network, state


def group(name: str, network_name: str, **extra: Any) -> dict[str, Any]:
    return {"tenantName": TENANT, "groupName": name, "networkName": network_name, **extra}


def relabel(endpoint: str, group: str, labels: dict[str, str], network: str = "n") -> dict[str, Any]:
    return {"Tenant": TENANT, "Network": network, "EndpointID": endpoint, "Group": group, "Labels": labels}


def epg(store: MemoryStore, name: str) -> Any:
    return state(store, layout.epg_state(TENANT, name))


def endpoint(store: MemoryStore, name: str, network: str = "n") -> Any:
    return state(store, layout.ep_state(layout.ep_id(TENANT, network, name)))


@pytest.fixture
async def groups(netmaster: Netmaster) -> Netmaster:
    await netmaster.put_object("networks", "default:n", network("n", "198.18.40.0/24", "198.18.40.254"))
    await netmaster.put_object("networks", "default:m", network("m", "198.18.41.0/24", "198.18.41.254"))
    for name, net in (("web", "n"), ("db", "n"), ("other", "m")):
        await netmaster.put_object("endpointGroups", f"default:{name}", group(name, net))
    await netmaster.put_object("endpointGroups", "default:pooled", group("pooled", "n", ipPool="198.18.40.100-198.18.40.109"))
    return netmaster


async def test_a_move_changes_group_counts_and_labels_in_one_commit_and_keeps_the_address(groups: Netmaster, store: MemoryStore) -> None:
    created = await create(groups, "p", "n", group="web")
    assert (epg(store, "web")["epCount"], epg(store, "db")["epCount"]) == (1, 0)
    txns = store.proposals["txn"]
    moved = await groups.relabel_endpoint(relabel("p", "db", {"io.contiv.net-group": "db", "app": "x"}))
    assert store.proposals["txn"] == txns + 1
    assert (epg(store, "web")["epCount"], epg(store, "db")["epCount"]) == (0, 1)
    assert moved == endpoint(store, "p")
    assert (moved["serviceName"], moved["endpointGroupId"], moved["endpointGroupKey"]) == ("db", epg(store, "db")["endpointGroupId"], "db:default")
    assert moved["labels"] == {"io.contiv.net-group": "db", "app": "x"}, "replaced, not merged"
    assert (moved["ipAddress"], moved["macAddress"]) == (created["ipAddress"], created["macAddress"])
    # again: nothing to write
    assert await groups.relabel_endpoint(relabel("p", "db", {"io.contiv.net-group": "db", "app": "x"})) == moved
    assert store.proposals["txn"] == txns + 1
    # out of every group
    await groups.relabel_endpoint(relabel("p", "", {}))
    assert (endpoint(store, "p")["serviceName"], endpoint(store, "p")["endpointGroupId"], endpoint(store, "p")["labels"]) == ("", 0, {})
    assert epg(store, "db")["epCount"] == 0


async def test_refused_moves_write_nothing(groups: Netmaster, store: MemoryStore) -> None:
    await create(groups, "p", "n", group="web")
    before = endpoint(store, "p"), epg(store, "web")
    txns = store.proposals["txn"]
    with pytest.raises(NotFoundError, match="endpointGroup default:nosuch not found"):
        await groups.relabel_endpoint(relabel("p", "nosuch", {"app": "x"}))
    with pytest.raises(ValidationError, match="belongs to network m"):
        await groups.relabel_endpoint(relabel("p", "other", {}))
    with pytest.raises(ValidationError, match="ipPool 198.18.40.100-198.18.40.109: moving default-n.default-p|ipPool"):
        await groups.relabel_endpoint(relabel("p", "pooled", {}))
    with pytest.raises(NotFoundError, match="endpoint n.default-ghost not found"):
        await groups.relabel_endpoint(relabel("ghost", "db", {}))
    with pytest.raises(ValidationError, match="Labels must map strings to strings"):
        await groups.relabel_endpoint({**relabel("p", "db", {}), "Labels": {"a": 1}})
    assert (endpoint(store, "p"), epg(store, "web")) == before and store.proposals["txn"] == txns


async def test_service_providers_follow_replaced_labels(groups: Netmaster, store: MemoryStore) -> None:
    service = {"tenantName": TENANT, "serviceName": "svc", "networkName": "n", "selectors": ["app=web"], "ports": ["80:8080:TCP"]}
    await groups.put_object("serviceLBs", "default:svc", service)
    await groups.create_endpoint(endpoint_request("p", "n"))
    await groups.update_endpoint({"Tenant": TENANT, "Network": "n", "EndpointID": "p", "Event": "start", "Labels": {"app": "web"}})
    provider_key = f"{layout.PROVIDER_PREFIX}svc:default"
    address = endpoint(store, "p")["ipAddress"]
    assert state(store, provider_key)["Providers"] == [address]
    await groups.relabel_endpoint(relabel("p", "", {"app": "db"}))
    assert state(store, provider_key)["Providers"] == []

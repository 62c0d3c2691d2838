"""The endpoint inspect shape, built from the master's endpoint state (§1.2, §6)."""

from __future__ import annotations

from contivd.model import EndpointOper, go_map_string

STATE = {
    "id": "net1.default-c0ffee",
    "netID": "net1.default",
    "endpointID": "c0ffee",
    "serviceName": "web",
    "endpointGroupId": 3,
    "endpointGroupKey": "web:default",
    "ipAddress": "198.18.1.1",
    "ipv6Address": "",
    "macAddress": "02:02:c6:12:01:01",
    "homingHost": "node1",
    "intfName": "",
    "vtepIP": "",
    "labels": {"tier": "1", "app": "web"},
    "containerId": "c0ffee",
    "epCommonName": "pod-a",
}


def test_inspect_json() -> None:
    oper = EndpointOper.from_state(STATE, key="c0ffee", port_name="port3")
    assert oper.to_json() == {
        "key": "c0ffee",
        "containerID": "c0ffee",
        "containerName": "pod-a",
        "endpointGroupId": 3,
        "endpointGroupKey": "web:default",
        "endpointID": "c0ffee",
        "homingHost": "node1",
        "ipAddress": ["198.18.1.1", ""],
        "labels": "map[app:web tier:1]",
        "macAddress": "02:02:c6:12:01:01",
        "network": "net1.default",
        "serviceName": "web",
        "virtualPort": "vport3",
    }


def test_embedded_form_has_no_key_and_always_two_addresses() -> None:
    oper = EndpointOper.from_state({"netID": "n.t", "labels": None})
    assert oper.to_json() == {"ipAddress": ["", ""], "labels": "map[]", "network": "n.t"}
    assert go_map_string({}) == "map[]"

"""The test API server answers the official `kubernetes` client as a real one would: lists with
resource versions, watches with bookmarks, 410 after compaction, 401 on a bad token, Events."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from kubernetes import client, config, watch
from kubernetes.client.exceptions import ApiException

from tests.support.k8s_apiserver import TOKEN, KubeApiServer, RemoteKubeApi, kubeconfig_text, parse_path, pod
from tests.support.waiting import free_ports, wait_for

ROOT = Path(__file__).resolve().parents[2]


def service(name: str, namespace: str = "shop", cluster_ip: str = "198.19.112.10") -> dict[str, Any]:
    return {
        "kind": "Service",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"clusterIP": cluster_ip, "ports": [{"name": "http", "port": 80, "protocol": "TCP", "targetPort": 8080}]},
    }


def endpoint_slice(name: str, service_name: str, namespace: str = "shop") -> dict[str, Any]:
    return {
        "kind": "EndpointSlice",
        "metadata": {"name": name, "namespace": namespace, "labels": {"kubernetes.io/service-name": service_name}},
        "addressType": "IPv4",
        "endpoints": [{"addresses": ["198.18.0.5"], "conditions": {"ready": True}}],
        "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
    }


@pytest.fixture
def api() -> Iterator[KubeApiServer]:
    with KubeApiServer(bookmark_seconds=0.2).start() as server:
        yield server


def core(server: KubeApiServer, tmp_path: Path, token: str | None = None) -> Any:
    """A CoreV1Api (typed Any: the tests read optional model fields they know are there)."""
    api_client = config.new_client_from_config(config_file=str(server.kubeconfig(tmp_path / "kubeconfig", token)))  # type: ignore[no-untyped-call]
    return client.CoreV1Api(api_client)


def stream(func: Any, *args: Any, **kwargs: Any) -> Iterator[dict[str, Any]]:
    """The official client's watch helper (untyped)."""
    events: Iterator[dict[str, Any]] = watch.Watch().stream(func, *args, **kwargs)  # type: ignore[no-untyped-call]
    return events


def test_paths_parse() -> None:
    route = parse_path("/api/v1/namespaces/shop/services/web")
    assert route is not None and (route.resource.plural, route.namespace, route.name) == ("services", "shop", "web")
    route = parse_path("/apis/discovery.k8s.io/v1/endpointslices")
    assert route is not None and (route.resource.kind, route.namespace, route.name) == ("EndpointSlice", None, None)
    route = parse_path("/api/v1/namespaces/shop")
    assert route is not None and (route.resource.plural, route.namespace, route.name) == ("namespaces", None, "shop")
    assert parse_path("/api/v1/endpointslices") is None
    assert parse_path("/api/v1/namespaces/shop/namespaces") is None


def test_lists_carry_resource_versions_from_one_counter(api: KubeApiServer, tmp_path: Path) -> None:
    api.apply(service("web"))
    api.apply(service("db", namespace="data"))
    api.apply(pod("shop", "web-0", {"app": "web"}))
    v1 = core(api, tmp_path)
    everywhere = v1.list_service_for_all_namespaces()
    assert sorted(s.metadata.name for s in everywhere.items) == ["db", "web"]
    versions = sorted(int(s.metadata.resource_version) for s in everywhere.items)
    assert len(set(versions)) == 2 and int(everywhere.metadata.resource_version) > max(versions)
    assert [s.metadata.name for s in v1.list_namespaced_service("shop").items] == ["web"]
    assert v1.read_namespaced_pod("web-0", "shop").metadata.labels == {"app": "web"}
    with pytest.raises(ApiException) as missing:
        v1.read_namespaced_pod("nope", "shop")
    assert missing.value.status == 404
    slices: Any = client.DiscoveryV1Api(v1.api_client)
    api.apply(endpoint_slice("web-abc", "web"))
    listed = slices.list_endpoint_slice_for_all_namespaces()
    assert [s.metadata.labels["kubernetes.io/service-name"] for s in listed.items] == ["web"]
    assert [n.metadata.name for n in v1.list_namespace().items] == []


def test_watch_streams_changes_after_a_resource_version_and_bookmarks(api: KubeApiServer, tmp_path: Path) -> None:
    api.apply(service("web"))
    v1 = core(api, tmp_path)
    since = v1.list_service_for_all_namespaces().metadata.resource_version
    api.apply(service("web", cluster_ip="198.19.112.11"))
    api.apply(service("other", namespace="elsewhere"))
    api.delete("Service", "shop", "web")
    api.apply(pod("shop", "not-a-service"))
    seen: list[tuple[str, str]] = []
    for event in stream(v1.list_service_for_all_namespaces, resource_version=since, allow_watch_bookmarks=True, timeout_seconds=5):
        if event["type"] == "BOOKMARK":
            assert int(event["raw_object"]["metadata"]["resourceVersion"]) >= api.revision - 1
            break
        seen.append((event["type"], event["object"].metadata.name))
    assert seen == [("MODIFIED", "web"), ("ADDED", "other"), ("DELETED", "web")]
    namespaced = [e["object"].metadata.name for e in stream(v1.list_namespaced_service, "elsewhere", resource_version=since, timeout_seconds=1)]
    assert namespaced == ["other"]


def test_a_watch_from_a_compacted_version_gets_410_expired(api: KubeApiServer, tmp_path: Path) -> None:
    v1 = core(api, tmp_path)
    since = v1.list_service_for_all_namespaces().metadata.resource_version
    api.apply(service("web"))
    api.compact()
    with pytest.raises(ApiException) as expired:
        for _ in stream(v1.list_service_for_all_namespaces, resource_version=since, timeout_seconds=5):
            pass
    assert expired.value.status == 410 and "Expired" in str(expired.value.reason)
    with pytest.raises(ApiException) as gone:
        v1.list_service_for_all_namespaces(resource_version=since, resource_version_match="Exact")
    assert gone.value.status == 410


def test_a_restart_cuts_watches_and_may_lose_history(api: KubeApiServer, tmp_path: Path) -> None:
    v1 = core(api, tmp_path)
    since = v1.list_service_for_all_namespaces().metadata.resource_version
    live = stream(v1.list_service_for_all_namespaces, resource_version=since, timeout_seconds=30)
    api.apply(service("web"))
    assert next(live)["type"] == "ADDED"
    api.stop()
    with pytest.raises(Exception):  # noqa: B017, PT011 - the cut connection surfaces as urllib3's error or a short read
        for _ in live:
            pass
    api.start(keep_history=False)
    assert [s.metadata.name for s in v1.list_service_for_all_namespaces().items] == ["web"]
    with pytest.raises(ApiException) as expired:
        for _ in stream(v1.list_service_for_all_namespaces, resource_version=since, timeout_seconds=5):
            pass
    assert expired.value.status == 410


def test_a_bad_or_missing_token_is_401_with_a_status(api: KubeApiServer, tmp_path: Path) -> None:
    with pytest.raises(ApiException) as refused:
        core(api, tmp_path, token="wrong").list_service_for_all_namespaces()
    assert refused.value.status == 401
    assert json.loads(str(refused.value.body))["kind"] == "Status"


def test_posted_events_are_recorded(api: KubeApiServer, tmp_path: Path) -> None:
    v1 = core(api, tmp_path)
    body = client.CoreV1Event(
        metadata=client.V1ObjectMeta(generate_name="web."),
        involved_object=client.V1ObjectReference(kind="Service", namespace="shop", name="web"),
        reason="Skipped",
        message="SCTP",
        type="Warning",
    )
    v1.create_namespaced_event("shop", body)
    assert [(e["involvedObject"]["name"], e["reason"]) for e in api.posted_events] == [("web", "Skipped")]


def test_a_server_process_is_driven_through_its_test_controls(tmp_path: Path) -> None:
    """The process form (`python -m tests.support.k8s_apiserver`), as tests run it inside a node's namespace."""
    (port,) = free_ports(1)
    objects = tmp_path / "objects.json"
    objects.write_text(json.dumps([pod("shop", "web-0", {"app": "web"})]))
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.support.k8s_apiserver", str(port), str(objects)], stdout=subprocess.PIPE, text=True, cwd=ROOT
    )
    try:
        assert process.stdout is not None and process.stdout.readline().strip() == "ready"
        remote = RemoteKubeApi(f"http://127.0.0.1:{port}")
        kubeconfig = tmp_path / "kubeconfig"
        kubeconfig.write_text(kubeconfig_text(remote.url, TOKEN))
        v1: Any = client.CoreV1Api(config.new_client_from_config(config_file=str(kubeconfig)))  # type: ignore[no-untyped-call]
        assert v1.read_namespaced_pod("web-0", "shop").metadata.labels == {"app": "web"}
        remote.apply(service("web"))
        since = v1.list_service_for_all_namespaces().metadata.resource_version
        remote.delete("Service", "shop", "web")
        remote.compact()
        with pytest.raises(ApiException) as expired:
            for _ in stream(v1.list_service_for_all_namespaces, resource_version=since, timeout_seconds=5):
                pass
        assert expired.value.status == 410
        remote.set_token("rotated")
        with pytest.raises(ApiException) as refused:
            v1.list_service_for_all_namespaces()
        assert refused.value.status == 401
        remote.restart()

        def answers() -> bool:
            try:
                return httpx.get(f"{remote.url}/_test/events", timeout=2).status_code == 200
            except httpx.HTTPError:
                return False

        assert wait_for(answers, 10, "the restarted server")
        assert remote.posted_events() == []
    finally:
        process.kill()
        process.wait()

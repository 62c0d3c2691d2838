"""Logs: `--log-format json` is one JSON object per line; the cluster secret never appears,
whatever the log level and even when a client sends it or a wrong one."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from contivd import logs
from tests.support.contivd_nodes import ContivdProcess
from tests.support.waiting import free_ports, wait_for

SECRET = "s3cret-that-must-not-leak"


@pytest.fixture
def debug_node(tmp_path: Path) -> ContivdProcess:
    raft, api = free_ports(2)
    node = ContivdProcess("logger", tmp_path, f"127.0.0.1:{raft}", api, [], secret=SECRET)
    node.extra = ("--log-level", "debug", "--log-format", "json")
    return node


def test_json_lines_and_no_secret_in_the_log(debug_node: ContivdProcess) -> None:
    node = debug_node.start()
    try:
        wait_for(node.ready, 30, "the node to be ready", interval=0.2)
        token = node.mint_token("logs-admin")
        assert node.get("/version", headers={"Authorization": f"Bearer {token}"}).status_code == 200
        assert node.get("/version", headers={"Authorization": f"Bearer {SECRET}"}).status_code == 401, "the secret is refused, and not logged"
        assert node.get("/version", headers={"Authorization": f"Bearer {SECRET}x"}).status_code == 401
        network = {"tenantName": "default", "networkName": "logs", "encap": "vxlan", "subnet": "198.18.5.0/24"}
        assert node.post("/api/v1/networks/default:logs/", network, headers={"Authorization": f"Bearer {token}"}).status_code == 200
        assert node.post("/api/v1/networks/default:bad/", {"subnet": SECRET}).status_code == 400
        assert node.stop() == 0
    finally:
        node.kill()
    text = (node.data_dir / "contivd.log").read_text()
    assert SECRET not in text
    events = [json.loads(line) for line in text.splitlines() if line.strip()]  # every line is one JSON object
    assert events and all({"time", "level", "logger", "message"} <= set(e) for e in events)
    assert any(e["level"] == "debug" for e in events), "debug level applies"
    assert any("contivd stopped" in e["message"] for e in events)


def test_redaction_and_extra_fields(capsys: pytest.CaptureFixture[str]) -> None:
    root = logging.getLogger()
    saved = (list(root.handlers), root.level)
    try:
        logs.configure("INFO", "json", secrets=[SECRET, None])
        logging.getLogger("contivd.test").info("token is %s", SECRET, extra={"endpoint": "ep1"})
        event = json.loads(capsys.readouterr().err)
        assert event["message"] == f"token is {logs.MASK}" and event["endpoint"] == "ep1" and event["logger"] == "contivd.test"
        logs.configure("INFO", "text", secrets=[SECRET])
        try:
            raise ValueError(f"bad {SECRET}")
        except ValueError:
            logging.getLogger("contivd.test").exception("failed")
        line = capsys.readouterr().err
        assert SECRET not in line and line.count("\n") == 1 and "ValueError" in line
    finally:
        root.handlers[:] = saved[0]
        root.setLevel(saved[1])


def test_bad_log_format_is_refused(tmp_path: Path) -> None:
    from contivd.config import ConfigError, load

    with pytest.raises(ConfigError, match="--log-format: 'xml' must be one of text, json"):
        load({"log_format": "xml"}, None, {})

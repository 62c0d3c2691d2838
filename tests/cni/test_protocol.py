"""The plugin's side of CNI: environment and config validation, error objects, the exchange."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from cni.plugin import environment, run
from cni.protocol import (
    CniError,
    Request,
    answer_line,
    decode_json,
    encode_json,
    parse_answer,
    parse_cni_args,
    request_from_environment,
    request_from_line,
)

ROOT = Path(__file__).resolve().parents[2]
ENV = {"CNI_COMMAND": "ADD", "CNI_CONTAINERID": "abc123", "CNI_NETNS": "/var/run/netns/x", "CNI_IFNAME": "eth0", "CNI_ARGS": "A=1;B=two"}
CONFIG = b'{"cniVersion": "1.0.0", "name": "contiv", "type": "contiv"}'


def code_of(environ: dict[str, str], stdin: bytes = CONFIG) -> int:
    with pytest.raises(CniError) as caught:
        request_from_environment(environ, stdin)
    assert caught.value.msg
    return caught.value.code


def test_a_full_add_becomes_a_request_and_survives_the_wire() -> None:
    request = request_from_environment(ENV, CONFIG)
    assert request == Request("ADD", json.loads(CONFIG), "abc123", "/var/run/netns/x", "eth0", {"A": "1", "B": "two"})
    assert request_from_line(request.to_line()) == request


@pytest.mark.parametrize(
    ("environ", "stdin", "code"),
    [
        ({**ENV, "CNI_COMMAND": ""}, CONFIG, 4),
        ({k: v for k, v in ENV.items() if k != "CNI_IFNAME"}, CONFIG, 4),
        ({**ENV, "CNI_CONTAINERID": "has/slash"}, CONFIG, 4),
        ({**ENV, "CNI_CONTAINERID": ".starts-with-a-dot"}, CONFIG, 4),
        ({**ENV, "CNI_CONTAINERID": "é-not-ascii"}, CONFIG, 4),
        ({**ENV, "CNI_IFNAME": "a" * 16}, CONFIG, 4),
        ({**ENV, "CNI_IFNAME": "bad:name"}, CONFIG, 4),
        ({**ENV, "CNI_ARGS": "novalue"}, CONFIG, 4),
        (ENV, b"", 6),
        (ENV, b"\xff\xfe", 6),
        (ENV, b'"just a string"', 6),
        (ENV, b'{"name": "contiv"}', 7),
        (ENV, b'{"cniVersion": "0.3.1", "name": "contiv"}', 1),
        (ENV, b'{"cniVersion": "1.0.0", "name": "contiv", "socket": 5}', 7),
    ],
)
def test_bad_environment_or_config_gets_the_right_code(environ: dict[str, str], stdin: bytes, code: int) -> None:
    assert code_of(environ, stdin) == code


def test_del_needs_no_netns_and_gc_needs_no_container() -> None:
    assert request_from_environment({**ENV, "CNI_COMMAND": "DEL", "CNI_NETNS": ""}, CONFIG).netns == ""
    assert request_from_environment({"CNI_COMMAND": "GC"}, CONFIG).container_id == ""


def test_cni_args_tolerate_empty_pairs_and_values() -> None:
    assert parse_cni_args("IgnoreUnknown=1;;K8S_POD_NAME=web-0;io.contiv.net-group=") == {
        "IgnoreUnknown": "1",
        "K8S_POD_NAME": "web-0",
        "io.contiv.net-group": "",
    }


def test_a_request_line_with_another_protocol_version_is_refused() -> None:
    with pytest.raises(CniError) as caught:
        request_from_line(b'{"protocol": 99, "command": "ADD"}')
    assert caught.value.code == 1


def test_answers_round_trip_results_and_errors() -> None:
    assert parse_answer(answer_line({"cniVersion": "1.0.0", "ips": []})) == {"cniVersion": "1.0.0", "ips": []}
    with pytest.raises(CniError) as caught:
        parse_answer(answer_line(error=CniError(101, "exhausted", "pool 198.18.0.0/30"), cni_version="1.0.0"))
    assert (caught.value.code, caught.value.msg, caught.value.details) == (101, "exhausted", "pool 198.18.0.0/30")


def test_plugin_prints_the_error_object_when_contivd_is_absent(tmp_path: Path) -> None:
    config = json.dumps({"cniVersion": "1.0.0", "name": "contiv", "socket": str(tmp_path / "none.sock")}).encode()
    status, output = run(ENV, config)
    assert status == 1 and json.loads(output) == {
        "cniVersion": "1.0.0",
        "code": 11,
        "msg": f"contivd is not running: cannot connect to {tmp_path / 'none.sock'}",
        "details": "No such file or directory",
    }


def test_plugin_relays_one_exchange_over_the_socket(tmp_path: Path) -> None:
    path = tmp_path / "cni.sock"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen(1)
    seen: list[Request] = []

    def answer_once() -> None:
        conn, _ = server.accept()
        with conn:
            data = b""
            while not data.endswith(b"\n"):
                data += conn.recv(65536)
            seen.append(request_from_line(data))
            conn.sendall(answer_line({"cniVersion": "1.0.0", "ips": [{"address": "198.18.0.5/24"}]}))

    thread = threading.Thread(target=answer_once)
    thread.start()
    config = json.dumps({"cniVersion": "1.0.0", "name": "contiv", "socket": str(path)}).encode()
    status, output = run(ENV, config)
    thread.join()
    server.close()
    assert status == 0 and json.loads(output)["ips"] == [{"address": "198.18.0.5/24"}]
    assert seen[0].container_id == "abc123" and seen[0].args == {"A": "1", "B": "two"}


SAMPLES = [
    {"cniVersion": "1.0.0", "ips": [{"address": "198.18.0.5/24", "interface": 1}], "dns": {}},
    ["é", "\u2603", "tab\tand\nnewline", 'quote " and \\', ""],
    [0, -1, 2**70, 1.5, -2.25e-300, True, False, None],
    "just a string",
]


@pytest.mark.parametrize("value", SAMPLES)
def test_the_codec_reads_and_writes_what_json_does(value: object) -> None:
    text = json.dumps(value, separators=(",", ":"))
    assert encode_json(value) == text
    assert decode_json(text) == value and decode_json(f" \n{text}\t ".encode()) == value
    assert decode_json(json.dumps(value, indent=2)) == value


@pytest.mark.parametrize("raw", [b"", b"  ", b'{"a" 1}', b'{"a": 1,}', b'"unterminated', b"[1, 2] extra", b'"\x01 control"', b"\xff\xfe"])
def test_the_codec_refuses_what_json_refuses(raw: bytes) -> None:
    with pytest.raises(ValueError):
        json.loads(raw)
    with pytest.raises(ValueError):
        decode_json(raw)


def test_the_codec_refuses_values_json_cannot_write() -> None:
    with pytest.raises(TypeError, match="set"):
        encode_json({"a": {1, 2}})


def test_malformed_input_gets_jsons_error_where_json_was_not_imported() -> None:
    """Python 3.11's C scanner raises SystemError for most syntax errors when json is not loaded."""
    probe = (
        "import sys; from cni.protocol import decode_json\n"
        "assert decode_json(b'{\"a\": [1]}') == {'a': [1]} and 'json' not in sys.modules\n"
        "try:\n    decode_json(b'{\"a\" 1}')\nexcept ValueError as exc:\n    print(exc)"
    )
    done = subprocess.run([sys.executable, "-S", "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "Expecting ':' delimiter: line 1 column 6 (char 5)"


def test_the_environment_is_decoded_as_os_environ_does() -> None:
    assert environment({b"CNI_COMMAND": b"ADD", b"ODD": b"\xff"}) == {"CNI_COMMAND": "ADD", "ODD": "\udcff"}


def test_the_plugin_imports_only_the_standard_library() -> None:
    probe = "import json, sys, cni.plugin; print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))"
    loaded = set(json.loads(subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout))
    assert not loaded & {"trio", "httpx", "contivd", "pyroute2", "raftstore", "kubernetes"}, loaded


def test_the_installed_plugin_loads_nothing_slow(tmp_path: Path) -> None:
    """Its start is `python3 -I -S` plus these modules (json, re, os, socket, typing would add ms)."""
    plugin = tmp_path / "contiv"
    subprocess.run(["bash", str(ROOT / "packaging" / "build-cni-plugin.sh"), str(plugin), str(tmp_path / "lib"), sys.executable], check=True)
    probe = "import sys; print(' '.join(sorted(sys.modules)))"
    bare = set(subprocess.run([sys.executable, "-I", "-S", "-c", probe], capture_output=True, text=True, check=True).stdout.split())
    script = plugin.read_text().replace("sys.exit(main())", "status = main(); " + probe.replace("import sys; ", ""))
    env = {"CNI_COMMAND": "VERSION"}
    done = subprocess.run([sys.executable, "-I", "-S", "-c", script], env=env, input=b'{"cniVersion": "1.0.0"}', capture_output=True, check=True)
    answer, modules = done.stdout.decode().splitlines()
    assert json.loads(answer) == {"cniVersion": "1.0.0", "supportedVersions": ["1.0.0", "1.1.0"]}
    assert set(modules.split()) - bare == {"__future__", "_json", "_socket", "cni", "cni.plugin", "cni.protocol"}

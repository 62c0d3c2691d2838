"""Flow-mod and bundle encoding: byte-identical to os-ken, C identical to the twin."""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import TypeVar

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from os_ken.ofproto import ofproto_parser

from fastpath import (
    Backend,
    BundleCtrl,
    Command,
    FlowSpec,
    Output,
    SetField,
    bundle_ctrl,
    encode_bundle,
    encode_flow_mods,
    port_range_masks,
    split_messages,
)
from tests.fastpath.helpers import PY, C, outcome
from tests.support import osken_oracle as osken

T = TypeVar("T")
U16, U32, U64 = 0xFFFF, 0xFFFFFFFF, (1 << 64) - 1


def u(limit: int) -> st.SearchStrategy[int]:
    """Unsigned ints biased towards the edges."""
    return st.one_of(st.sampled_from([0, 1, limit]), st.integers(0, limit))


def masks(limit: int) -> st.SearchStrategy[int]:
    return st.one_of(st.sampled_from([0, limit]), u(limit))


@st.composite
def port_ranges(draw: st.DrawFn) -> tuple[int, int]:
    lo = draw(u(U16))
    hi = draw(st.one_of(st.integers(lo, min(U16, lo + 40)), st.integers(lo, U16)))
    return lo, hi


SET_FIELD_LIMITS = {
    "eth_dst": 2**48 - 1,
    "eth_src": 2**48 - 1,
    "vlan_vid": 0xFFF,
    "ipv4_src": U32,
    "ipv4_dst": U32,
    "tunnel_id": U64,
}
ACTIONS = st.one_of(
    st.builds(Output, u(U32), u(U16)),
    st.sampled_from(sorted(SET_FIELD_LIMITS)).flatmap(lambda f: st.builds(SetField, st.just(f), u(SET_FIELD_LIMITS[f]))),
)


@st.composite
def flow_specs(draw: st.DrawFn, ranges: bool = True) -> FlowSpec:
    """Valid FlowSpecs covering every field; prerequisites are honoured by construction."""

    def opt(strategy: st.SearchStrategy[T]) -> T | None:
        return draw(st.one_of(st.none(), strategy))

    table = draw(st.integers(0, 254))
    eth_type = opt(st.one_of(st.just(0x0800), u(U16)))
    ipv4 = eth_type == 0x0800
    ip_proto = opt(st.one_of(st.sampled_from([6, 17, 132]), u(0xFF))) if ipv4 else None
    l4 = ip_proto in (6, 17, 132)
    ports = port_ranges() if ranges else u(U16).map(lambda p: (p, p))
    return FlowSpec(
        table=table,
        priority=draw(u(U16)),
        cookie=draw(u(U64)),
        in_port=opt(u(U32)),
        metadata=opt(st.tuples(u(U64), masks(U64))),
        eth_type=eth_type,
        vlan_vid=opt(u(0xFFF)),
        ipv4_src=opt(st.tuples(u(U32), st.integers(0, 32))) if ipv4 else None,
        ipv4_dst=opt(st.tuples(u(U32), st.integers(0, 32))) if ipv4 else None,
        ip_proto=ip_proto,
        tp_src=opt(ports) if l4 else None,
        tp_dst=opt(ports) if l4 else None,
        tcp_flags=opt(st.tuples(u(U16), masks(U16))) if ip_proto == 6 else None,
        apply=tuple(draw(st.lists(ACTIONS, max_size=4))),
        write_metadata=opt(st.tuples(u(U64), u(U64))),
        goto_table=opt(st.integers(table + 1, 254)) if table < 254 else None,
        idle_timeout=draw(u(U16)),
        hard_timeout=draw(u(U16)),
        flags=draw(u(U16)),
    )


def small_batches() -> st.SearchStrategy[list[FlowSpec]]:
    # Mostly narrow port ranges so one spec does not expand into hundreds of os-ken objects.
    return st.lists(st.one_of(flow_specs(ranges=False), flow_specs()), min_size=0, max_size=4)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(small_batches(), st.sampled_from(list(Command)), u(U32))
def test_flow_mods_match_osken(specs: list[FlowSpec], command: Command, xid: int) -> None:
    expected = osken.flow_mod_bytes(specs, command, xid)
    for backend in (C, PY):
        got = encode_flow_mods(specs, command, xid, backend=backend)
        assert got.data == expected
        assert got.count == len(split_messages(expected))


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(small_batches(), st.sampled_from(list(Command)), u(U32), u(U32), u(U16))
def test_bundles_match_osken(specs: list[FlowSpec], command: Command, xid: int, bundle_id: int, flags: int) -> None:
    expected = osken.bundle_bytes(specs, command, bundle_id, xid, flags)
    for backend in (C, PY):
        got = encode_bundle(specs, command, bundle_id=bundle_id, xid=xid, flags=flags, backend=backend)
        assert got.data == expected
        assert got.count == len(split_messages(expected))


def test_osken_parses_what_we_encode() -> None:
    spec = FlowSpec(
        table=2, priority=300, cookie=0xC0FFEE, in_port=4, eth_type=0x0800, ip_proto=17,
        ipv4_dst=(0xC6120000, 16), tp_dst=(53, 53), apply=(SetField("tunnel_id", 5001), Output(9)),
        goto_table=7,
    )  # fmt: skip
    (msg,) = encode_flow_mods([spec], xid=42).split()
    version, msg_type, length, xid = struct.unpack_from("!BBHI", msg)
    parsed = ofproto_parser.msg(osken.DATAPATH, version, msg_type, length, xid, msg)
    assert (parsed.xid, parsed.table_id, parsed.priority, parsed.cookie) == (42, 2, 300, 0xC0FFEE)
    assert dict(parsed.match.items()) == {
        "in_port": 4, "eth_type": 0x0800, "ip_proto": 17,
        "ipv4_dst": ("198.18.0.0", "255.255.0.0"), "udp_dst": 53,
    }  # fmt: skip
    assert [type(i).__name__ for i in parsed.instructions] == [
        "OFPInstructionActions",
        "OFPInstructionGotoTable",
    ]


def test_port_range_expansion_is_a_cartesian_product() -> None:
    spec = FlowSpec(table=0, priority=1, eth_type=0x0800, ip_proto=6, tp_src=(1, 3), tp_dst=(8, 15))
    msgs = encode_flow_mods([spec], xid=U32).split()
    assert len(msgs) == 2 * 1  # src 1-3 = {1/ffff, 2/fffe}, dst 8-15 = {8/fff8}
    assert [struct.unpack_from("!I", m, 4)[0] for m in msgs] == [U32, 0]  # xids wrap


def minimal_cover(lo: int, hi: int, base: int = 0, size: int = 1 << 16) -> list[tuple[int, int]]:
    """Independent reference: walk the binary trie, keep nodes wholly inside [lo, hi]."""
    if base > hi or base + size - 1 < lo:
        return []
    if lo <= base and base + size - 1 <= hi:
        return [(base, ~(size - 1) & U16)]
    half = size // 2
    return minimal_cover(lo, hi, base, half) + minimal_cover(lo, hi, base + half, half)


@settings(max_examples=500, deadline=None)
@given(port_ranges())
def test_port_masks_are_the_minimal_cover(ports: tuple[int, int]) -> None:
    expected = minimal_cover(*ports)
    assert port_range_masks(*ports, backend=C) == expected
    assert port_range_masks(*ports, backend=PY) == expected
    assert len(expected) <= 30


@pytest.mark.parametrize(
    ("lo", "hi", "message"),
    [
        (5, 4, "range start is after its end"),
        (0, 65536, "port must be 0..65535"),
        (-1, 3, "port must be"),
        (0, 2**64, "port must be"),
    ],
)
def test_port_mask_errors(backend: Backend, lo: int, hi: int, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        port_range_masks(lo, hi, backend=backend)


IP = {"eth_type": 0x0800}
TCP = {"eth_type": 0x0800, "ip_proto": 6}


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"table": 255}, r"table=255: must be an integer 0\.\.254"),
        ({"priority": 70000}, "priority=70000"),
        ({"cookie": -1}, "cookie=-1"),
        ({**IP, "ipv4_src": (0xC6120000, 33)}, r"ipv4_src\[1\]=33: must be an integer 0\.\.32"),
        ({**TCP, "tp_dst": (80, 70000)}, r"tp_dst\[1\]=70000: must be an integer 0\.\.65535"),
        ({**TCP, "tp_src": (90, 80)}, "port range is reversed"),
        ({"ipv4_dst": (1, 32)}, "need eth_type 0x0800"),
        ({**IP, "tp_dst": (80, 80)}, "need ip_proto 6, 17 or 132"),
        ({**IP, "ip_proto": 17, "tcp_flags": (2, 2)}, "tcp_flags: needs ip_proto 6"),
        ({"vlan_vid": 4096}, "vlan_vid=4096"),
        ({"goto_table": 0}, "must be after table 0"),
        ({"metadata": (1,)}, "expected a"),
        ({"apply": (Output(2**32),)}, r"Output.port=4294967296"),
        ({"apply": (SetField("eth_type", 1),)}, "SetField.field='eth_type'"),
        ({"apply": (SetField("vlan_vid", 4096),)}, r"SetField\(vlan_vid\).value=4096"),
        ({"apply": ("drop",)}, "expected Output or SetField"),
        ({"apply": (Output(1),) * 65}, "at most 64 actions"),
    ],
)
def test_invalid_specs_are_rejected(fields: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        FlowSpec(**{"table": 0, "priority": 1, **fields})  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "call",
    [
        lambda b: encode_flow_mods([], 1, backend=b),  # type: ignore[arg-type]
        lambda b: encode_flow_mods([], xid=-1, backend=b),
        lambda b: encode_flow_mods([], xid=2**32, backend=b),
        lambda b: encode_flow_mods([], xid=2**70, backend=b),
        lambda b: encode_bundle([], bundle_id=-1, backend=b),
        lambda b: encode_bundle([], bundle_id=2**32, backend=b),
        lambda b: bundle_ctrl(BundleCtrl.OPEN_REQUEST, 1, flags=2**16, backend=b),
    ],
)
def test_invalid_arguments_identical_errors(call: Callable[[Backend], object]) -> None:
    got_c = outcome(call, C)
    assert got_c[0] == "error"
    assert got_c == outcome(call, PY)


@st.composite
def mangled_records(draw: st.DrawFn) -> bytes:
    """Valid records with random byte flips and truncation: the C must reject, never crash."""
    specs = draw(st.lists(flow_specs(ranges=False), min_size=1, max_size=3))
    data = bytearray(b"".join(s.record for s in specs))
    for _ in range(draw(st.integers(0, 4))):
        data[draw(st.integers(0, len(data) - 1))] = draw(st.integers(0, 255))
    return bytes(data[: draw(st.integers(0, len(data)))])


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mangled_records(), st.sampled_from([-1, 7]))
def test_malformed_records_identical_outcomes(records: bytes, bundle_id: int) -> None:
    from fastpath.flowmod import _encode

    got_c = outcome(_encode, C, records, Command.ADD, 0, bundle_id, 0)
    got_py = outcome(_encode, PY, records, Command.ADD, 0, bundle_id, 0)
    assert got_c == got_py

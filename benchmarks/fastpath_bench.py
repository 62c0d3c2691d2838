"""Benchmark fastpath: bitset next-clear allocation and OpenFlow flow-mod encoding.

Compares the C backend, the pure-Python twin and (for flow-mods) os-ken's own
object serialisation, on one thread.  Prints one human-readable line per
measurement and, as the very last line, one JSON object with every figure.
Each figure is the median of several timed runs; setup is never timed.

* ``next_clear_per_s_{c,py}_{16,8}_{empty,half,99pct}``: allocations/s of
  ``Bitset.alloc(k)``, one call that finds and sets the next k clear bits
  (in C: next-clear by count-trailing-zeros word scans, then set), on a /16
  or /8 whose bits are set at random to 0 %, 50 % or ~99 %.  k is 10 % of
  the free bits (capped for the twin), so fullness barely moves.
* ``next_clear_single_per_s_*``: one ``Bitset.next_clear(cursor, wrap=True)``
  call from Python per result, the cursor moving past each hit and nothing
  set; this is dominated by the per-call Python + FFI cost.
* ``flowmods_per_s_*``: 10 000 policy-like rules (some with port ranges, so
  more messages than rules) to wire bytes.  ``c``/``py``: ``encode_flow_mods``
  on prebuilt FlowSpecs; ``osken``: ``serialize()`` on the equivalent prebuilt
  OFPFlowMod objects; ``*_build`` also constructs the specs/objects;
  ``c_bundle`` wraps everything in one ONF bundle.

Usage: python benchmarks/fastpath_bench.py [--quick]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import struct
import sys
import time
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repository root: tests.support

import fastpath  # noqa: E402
from fastpath import Backend, Bitset, FlowSpec, Output, SetField, encode_bundle, encode_flow_mods  # noqa: E402
from fastpath.bitset import FORMAT_VERSION, MAGIC  # noqa: E402
from tests.support import osken_oracle as osken  # noqa: E402

if fastpath.C is None:
    sys.exit("fastpath._native is not built; run `pip install -e .` first")
C: Backend = fastpath.C
PY: Backend = fastpath.PYTHON

RULES = 10_000
FULLNESS = {"empty": 0, "half": 1, "99pct": 7}  # number of random bit streams OR-ed together
SUBNETS = {"16": 1 << 16, "8": 1 << 24}  # label -> bits


def median_time(fn: Callable[[Any], object], repeats: int, setup: Callable[[], Any] = lambda: None) -> float:
    """Return the median seconds of ``repeats`` runs of fn(setup()); setup is not timed."""
    times = []
    for _ in range(repeats):
        arg = setup()
        start = time.perf_counter()
        fn(arg)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def random_bitset(nbits: int, streams: int, rng: random.Random) -> Bitset:
    """A C bitset whose bits are each set with probability 1 - 2^-streams (0 streams: empty)."""
    value = 0
    for _ in range(streams):
        value |= rng.getrandbits(nbits)
    # Loaded through the documented v1 raw encoding: 2^24 set() calls would dominate the run.
    body = struct.pack("<4sBBHII", MAGIC, FORMAT_VERSION, 0, 0, nbits, nbits // 8)
    body += value.to_bytes(nbits // 8, "little")
    return Bitset.from_bytes(body + struct.pack("<I", zlib.crc32(body)), backend=C)


def alloc_rate(base: Bitset, k: int, runs: int) -> float:
    """Allocations/s of one alloc(k) call on a fresh copy of ``base``."""
    return k / median_time(lambda bits: bits.alloc(k, 0, True), runs, setup=base.copy)


def single_call_rate(bits: Bitset, calls: int, repeats: int) -> float:
    """next_clear() calls/s from Python, walking the cursor through the free bits."""
    next_clear = bits.next_clear

    def walk(_unused: None) -> None:
        pos = 0
        for _ in range(calls):
            # start == nbits is valid, so the cursor wraps through next_clear itself.
            found = next_clear(pos, True)
            assert found is not None  # every benchmarked set has free bits
            pos = found + 1

    return calls / median_time(walk, repeats)


def bench_next_clear(quick: bool, results: dict[str, Any]) -> None:
    rng = random.Random(20240601)
    repeats = 5 if quick else 11
    for label, nbits in SUBNETS.items():
        for fill, streams in FULLNESS.items():
            base_c = random_bitset(nbits, streams, rng)
            free = nbits - base_c.count()
            for name, base in (("c", base_c), ("py", Bitset.from_bytes(base_c.to_bytes(), backend=PY))):
                if name == "c":
                    k = max(1, free // 10)
                    # Many runs when k is tiny (a 99 %-full /16 has ~500 free bits) so timing is stable.
                    runs, calls = max(repeats, min(2000, 100_000 // k)), 20_000 if quick else 200_000
                else:
                    k = max(1, min(free // 10, 20_000 if quick else 100_000))
                    runs, calls = repeats, 5_000 if quick else 20_000
                batch, single = alloc_rate(base, k, runs), single_call_rate(base, calls, repeats)
                results[f"next_clear_per_s_{name}_{label}_{fill}"] = round(batch)
                results[f"next_clear_single_per_s_{name}_{label}_{fill}"] = round(single)
                full = 100 * (nbits - free) / nbits
                print(
                    f"next-clear /{label:<2} {fill:>6} ({full:5.1f}% full) {name:>2}: "
                    f"alloc batch {batch / 1e6:8.2f} M/s   single calls {single / 1e6:6.2f} M/s"
                )
            ratio = results[f"next_clear_per_s_c_{label}_{fill}"] / results[f"next_clear_per_s_py_{label}_{fill}"]
            results[f"ratio_next_clear_c_vs_py_{label}_{fill}"] = round(ratio, 1)


def make_rules(n: int, rng: random.Random) -> list[FlowSpec]:
    """A policy-like mix: exact and ranged TCP/UDP rules, tcp_flags, L2 forwarding with rewrites."""
    rules = []
    for i in range(n):
        kind = i % 10
        epg = rng.randrange(1, 4096)
        common: dict[str, Any] = {"cookie": (1 << 56) | i, "metadata": (epg << 1, 0xFFFE)}
        if kind < 4:
            port = rng.randrange(1, 65535)
            rules.append(FlowSpec(
                table=5, priority=100 + kind, eth_type=0x0800, ip_proto=6,
                ipv4_src=(rng.getrandbits(32), 32), ipv4_dst=(rng.getrandbits(24) << 8, 24),
                tp_dst=(port, port), goto_table=6, **common,
            ))  # fmt: skip
        elif kind < 6:
            rules.append(FlowSpec(
                table=5, priority=90, eth_type=0x0800, ip_proto=17,
                ipv4_dst=(rng.getrandbits(32), 32), tp_dst=(53, 53), goto_table=6, **common,
            ))  # fmt: skip
        elif kind < 8:
            apply = (SetField("eth_dst", rng.getrandbits(48)), SetField("tunnel_id", epg), Output(epg % 64))
            rules.append(FlowSpec(
                table=2, priority=200, in_port=rng.randrange(1, 1000), vlan_vid=epg, apply=apply,
                write_metadata=(epg << 1, 0xFFFE), cookie=i,
            ))  # fmt: skip
        elif kind == 8:
            lo = rng.randrange(1024, 60000)
            rules.append(FlowSpec(
                table=5, priority=80, eth_type=0x0800, ip_proto=6, ipv4_src=(rng.getrandbits(16) << 16, 16),
                tp_dst=(lo, lo + rng.randrange(1, 100)), goto_table=6, **common,
            ))  # fmt: skip
        else:
            rules.append(FlowSpec(
                table=7, priority=50, eth_type=0x0800, ip_proto=6, tcp_flags=(0x02, 0x12), **common,
            ))  # fmt: skip
    return rules


def bench_flowmods(quick: bool, results: dict[str, Any]) -> None:
    repeats = 3 if quick else 7
    specs = make_rules(RULES, random.Random(7))
    encoded = encode_flow_mods(specs, backend=C)
    assert encode_flow_mods(specs, backend=PY) == encoded
    assert osken.flow_mod_bytes(specs) == encoded.data
    count = encoded.count
    objects = [m for s in specs for m in osken.flow_mods(s)]
    fields = [{k: getattr(s, k) for k in FlowSpec.__dataclass_fields__ if k != "record"} for s in specs]

    def osken_serialize(_: None) -> None:
        for m in objects:
            m.serialize()

    def osken_build_and_serialize(_: None) -> None:
        for s in specs:
            for m in osken.flow_mods(s):
                m.serialize()

    timings: dict[str, tuple[str, Callable[[Any], object], int]] = {
        "c": ("C, prebuilt specs", lambda _: encode_flow_mods(specs, backend=C), repeats * 3),
        "c_build": (
            "C, incl. FlowSpec build",
            lambda _: encode_flow_mods([FlowSpec(**f) for f in fields], backend=C),
            repeats,
        ),
        "c_bundle": ("C, as one bundle", lambda _: encode_bundle(specs, bundle_id=1, backend=C), repeats * 3),
        "py": ("Python twin, prebuilt specs", lambda _: encode_flow_mods(specs, backend=PY), repeats),
        "osken": ("os-ken serialize(), prebuilt objects", osken_serialize, repeats),
        "osken_build": ("os-ken, incl. object build", osken_build_and_serialize, 1 if quick else 3),
    }
    print(f"flow-mods: {RULES} rules -> {count} messages, {len(encoded.data)} bytes, identical in all three")
    rates = {}
    for key, (label, fn, runs) in timings.items():
        rates[key] = count / median_time(fn, runs)
        results[f"flowmods_per_s_{key}"] = round(rates[key])
        print(f"flow-mods {label:<38} {rates[key] / 1e3:10.1f} k/s")
    results["flowmod_messages"] = count
    results["ratio_flowmods_c_vs_osken"] = round(rates["c"] / rates["osken"], 1)
    results["ratio_flowmods_c_vs_py"] = round(rates["c"] / rates["py"], 1)
    results["ratio_flowmods_c_build_vs_osken_build"] = round(rates["c_build"] / rates["osken_build"], 1)
    print(
        f"ratios: C/os-ken {results['ratio_flowmods_c_vs_osken']}x, "
        f"C/twin {results['ratio_flowmods_c_vs_py']}x, "
        f"both incl. build {results['ratio_flowmods_c_build_vs_osken_build']}x"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats and smaller twin runs (< 60 s)")
    args = parser.parse_args()
    results: dict[str, Any] = {"quick": args.quick, "python": sys.version.split()[0]}
    start = time.perf_counter()
    bench_next_clear(args.quick, results)
    bench_flowmods(args.quick, results)
    results["elapsed_s"] = round(time.perf_counter() - start, 1)
    print(json.dumps(results, sort_keys=True))


if __name__ == "__main__":
    main()

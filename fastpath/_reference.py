"""Pure-Python twin of the C library in csrc/, function for function.

Each ``fp_*`` function has the signature and return codes of its C namesake
so the public wrappers (bitset.py, addr.py, flowmod.py) run unchanged on
either; C pointers become mutable Python containers: ``uint64_t *words`` is a
``list[int]`` of 64-bit words, ``uint8_t *out`` a ``bytearray``,
``uint16_t *``/``uint32_t *`` outputs are ``list[int]``.  It is the
reference in tests and the fallback selected with ``CONTIVD_FASTPATH=python``.

It deliberately mirrors the C algorithms (word scans with count-trailing-
zeros, the same validation order) rather than being idiomatic Python, so that
a divergence found by the property tests points at one line in each.
Standard library only.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

FP_MAX_BITS = 1 << 24
FP_REC_HEADER_SIZE = 88
FP_REC_ACTION_SIZE = 16
FP_REC_MAX_ACTIONS = 64

FP_NOT_FOUND = -1
FP_ERR_INDEX = -2
FP_ERR_ORDER = -3
FP_ERR_SIZE = -4
FP_ERR_FORMAT = -5
FP_ERR_SPACE = -6
FP_ERR_PREFIX = -7
FP_ERR_SUBNET = -8
FP_ERR_PORT = -9
FP_ERR_RECORD = -10
FP_ERR_COMMAND = -11
FP_ERR_ARG = -12

FP_HAS_IN_PORT = 1
FP_HAS_METADATA = 2
FP_HAS_ETH_TYPE = 4
FP_HAS_VLAN = 8
FP_HAS_IPV4_SRC = 16
FP_HAS_IPV4_DST = 32
FP_HAS_IP_PROTO = 64
FP_HAS_TP_SRC = 128
FP_HAS_TP_DST = 256
FP_HAS_TCP_FLAGS = 512
FP_HAS_GOTO = 1024
FP_HAS_WRITE_METADATA = 2048

FP_ACT_OUTPUT = 1
FP_ACT_SET_FIELD = 2

_WORD = 64
_ONES = (1 << 64) - 1
_U32 = (1 << 32) - 1


def _ctz(w: int) -> int:
    """Count trailing zeros of a non-zero word."""
    return (w & -w).bit_length() - 1


def _valid_size(nbits: int) -> bool:
    return 1 <= nbits <= FP_MAX_BITS


def _nwords(nbits: int) -> int:
    return (nbits + _WORD - 1) // _WORD


def _tail_pad(nbits: int) -> int:
    used = nbits % _WORD
    return 0 if used == 0 else _ONES & ~((1 << used) - 1)


def _span_mask(lo: int, hi: int) -> int:
    return ((1 << hi) - 1) & ~((1 << lo) - 1)


# ---- bitsets -----------------------------------------------------------------


def _check_index(nbits: int, index: int) -> int:
    if not _valid_size(nbits):
        return FP_ERR_SIZE
    if index < 0 or index >= nbits:
        return FP_ERR_INDEX
    return 0


def fp_bs_test(words: list[int], nbits: int, index: int) -> int:
    rc = _check_index(nbits, index)
    if rc < 0:
        return rc
    return (words[index // _WORD] >> (index % _WORD)) & 1


def fp_bs_set(words: list[int], nbits: int, index: int) -> int:
    rc = _check_index(nbits, index)
    if rc < 0:
        return rc
    wi, bit = divmod(index, _WORD)
    previous = (words[wi] >> bit) & 1
    words[wi] |= 1 << bit
    return previous


def fp_bs_clear(words: list[int], nbits: int, index: int) -> int:
    rc = _check_index(nbits, index)
    if rc < 0:
        return rc
    wi, bit = divmod(index, _WORD)
    previous = (words[wi] >> bit) & 1
    words[wi] &= ~(1 << bit)
    return previous


def _check_range(nbits: int, start: int, stop: int) -> int:
    if not _valid_size(nbits):
        return FP_ERR_SIZE
    if start < 0 or stop > nbits or start > nbits or stop < 0:
        return FP_ERR_INDEX
    if start > stop:
        return FP_ERR_ORDER
    return 0


def _fill_range(words: list[int], start: int, stop: int, value: int) -> None:
    while start < stop:
        wi, lo = divmod(start, _WORD)
        hi = min(stop - wi * _WORD, _WORD)
        m = _span_mask(lo, hi)
        if value:
            words[wi] |= m
        else:
            words[wi] &= ~m
        start = wi * _WORD + hi


def fp_bs_set_range(words: list[int], nbits: int, start: int, stop: int) -> int:
    rc = _check_range(nbits, start, stop)
    if rc < 0:
        return rc
    _fill_range(words, start, stop, 1)
    return 0


def fp_bs_clear_range(words: list[int], nbits: int, start: int, stop: int) -> int:
    rc = _check_range(nbits, start, stop)
    if rc < 0:
        return rc
    _fill_range(words, start, stop, 0)
    return 0


def _scan_clear(words: list[int], nbits: int, start: int, stop: int) -> int:
    if start >= stop:
        return FP_NOT_FOUND
    last = _nwords(nbits) - 1
    wi = start // _WORD
    w = words[wi] | ((1 << (start % _WORD)) - 1)
    while True:
        if wi == last:
            w |= _tail_pad(nbits)
        if w != _ONES:
            bit = wi * _WORD + _ctz(~w & _ONES)
            return bit if bit < stop else FP_NOT_FOUND
        wi += 1
        if wi > last or wi * _WORD >= stop:
            return FP_NOT_FOUND
        w = words[wi]


def _scan_set(words: list[int], nbits: int, start: int) -> int:
    if start >= nbits:
        return FP_NOT_FOUND
    last = _nwords(nbits) - 1
    wi = start // _WORD
    w = words[wi] & ~((1 << (start % _WORD)) - 1)
    while True:
        if w:
            return wi * _WORD + _ctz(w)
        wi += 1
        if wi > last:
            return FP_NOT_FOUND
        w = words[wi]


def fp_bs_next_clear(words: list[int], nbits: int, start: int, wrap: int) -> int:
    if not _valid_size(nbits):
        return FP_ERR_SIZE
    if start < 0 or start > nbits:
        return FP_ERR_INDEX
    found = _scan_clear(words, nbits, start, nbits)
    if found == FP_NOT_FOUND and wrap:
        found = _scan_clear(words, nbits, 0, start)
    return found


def fp_bs_next_set(words: list[int], nbits: int, start: int) -> int:
    if not _valid_size(nbits):
        return FP_ERR_SIZE
    if start < 0 or start > nbits:
        return FP_ERR_INDEX
    return _scan_set(words, nbits, start)


def fp_bs_alloc(words: list[int], nbits: int, start: int, wrap: int, count: int, out: list[int]) -> int:
    cursor = fp_bs_next_clear(words, nbits, start, wrap)
    if cursor < FP_NOT_FOUND:
        return cursor
    if count < 0 or count > FP_MAX_BITS:
        return FP_ERR_ARG
    done = 0
    while done < count and cursor >= 0:
        words[cursor // _WORD] |= 1 << (cursor % _WORD)
        out[done] = cursor
        done += 1
        cursor = fp_bs_next_clear(words, nbits, cursor + 1, wrap)
    return done


def fp_bs_count(words: list[int], nbits: int) -> int:
    if not _valid_size(nbits):
        return FP_ERR_SIZE
    return sum(w.bit_count() for w in words[: _nwords(nbits)])


def fp_bs_first_set(words: list[int], nbits: int) -> int:
    if not _valid_size(nbits):
        return FP_ERR_SIZE
    return _scan_set(words, nbits, 0)


def fp_bs_last_set(words: list[int], nbits: int) -> int:
    if not _valid_size(nbits):
        return FP_ERR_SIZE
    for wi in range(_nwords(nbits) - 1, -1, -1):
        if words[wi]:
            return wi * _WORD + words[wi].bit_length() - 1
    return FP_NOT_FOUND


def fp_bs_encode_raw(words: list[int], nbits: int, out: bytearray, cap: int) -> int:
    if not _valid_size(nbits):
        return FP_ERR_SIZE
    length = (nbits + 7) // 8
    if cap < length:
        return FP_ERR_SPACE
    out[:length] = b"".join(w.to_bytes(8, "little") for w in words[: _nwords(nbits)])[:length]
    return length


def fp_bs_decode_raw(words: list[int], nbits: int, data: bytes, length: int) -> int:
    if not _valid_size(nbits):
        return FP_ERR_SIZE
    if length != (nbits + 7) // 8:
        return FP_ERR_FORMAT
    if nbits % 8 and data[length - 1] >> (nbits % 8):
        return FP_ERR_FORMAT
    padded = bytes(data[:length]) + bytes(-length % 8)
    words[: _nwords(nbits)] = [w for (w,) in struct.iter_unpack("<Q", padded)]
    return 0


def _put_varint(out: bytearray, cap: int, pos: int, value: int) -> int:
    """Append a LEB128 varint at pos; return the new pos or FP_ERR_SPACE."""
    while True:
        if pos >= cap:
            return FP_ERR_SPACE
        byte = value & 0x7F
        value >>= 7
        out[pos] = byte | (0x80 if value else 0)
        pos += 1
        if not value:
            return pos


def fp_bs_encode_runs(words: list[int], nbits: int, out: bytearray, cap: int) -> int:
    if not _valid_size(nbits):
        return FP_ERR_SIZE
    pos = 0
    prev_end = 0
    run_start = _scan_set(words, nbits, 0)
    while run_start >= 0:
        run_end = _scan_clear(words, nbits, run_start, nbits)
        if run_end < 0:
            run_end = nbits
        pos = _put_varint(out, cap, pos, run_start - prev_end)
        if pos < 0:
            return FP_ERR_SPACE
        pos = _put_varint(out, cap, pos, run_end - run_start)
        if pos < 0:
            return FP_ERR_SPACE
        prev_end = run_end
        run_start = _scan_set(words, nbits, prev_end)
    return pos


def _get_varint(data: bytes, length: int, pos: int) -> tuple[int, int]:
    """Read a varint of at most 4 bytes; return (value, new pos) or (FP_ERR_FORMAT, pos)."""
    value = 0
    for shift in range(0, 28, 7):
        if pos >= length:
            return FP_ERR_FORMAT, pos
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
    return FP_ERR_FORMAT, pos


def fp_bs_decode_runs(words: list[int], nbits: int, data: bytes, length: int) -> int:
    if not _valid_size(nbits):
        return FP_ERR_SIZE
    for pass_ in (0, 1):
        pos = 0
        bit = 0
        while pos < length:
            gap, pos = _get_varint(data, length, pos)
            if gap < 0:
                return FP_ERR_FORMAT
            run, pos = _get_varint(data, length, pos)
            if run < 0:
                return FP_ERR_FORMAT
            if run == 0 or (gap == 0 and bit != 0) or bit + gap + run > nbits:
                return FP_ERR_FORMAT
            bit += gap
            if pass_ == 1:
                _fill_range(words, bit, bit + run, 1)
            bit += run
        if pass_ == 0:
            words[: _nwords(nbits)] = [0] * _nwords(nbits)
    return 0


# ---- IPv4 subnet helpers -----------------------------------------------------

_MIN_PREFIX = 8


def _check_subnet(network: int, prefix: int) -> int:
    if prefix < _MIN_PREFIX or prefix > 32:
        return FP_ERR_PREFIX
    if network < 0 or network > _U32:
        return FP_ERR_SUBNET
    if network & ((1 << (32 - prefix)) - 1):
        return FP_ERR_SUBNET
    return 0


def fp_addr_host_to_ip(network: int, prefix: int, index: int) -> int:
    rc = _check_subnet(network, prefix)
    if rc < 0:
        return rc
    if index < 0 or index >= 1 << (32 - prefix):
        return FP_ERR_INDEX
    return network + index


def fp_addr_ip_to_host(network: int, prefix: int, ip: int) -> int:
    rc = _check_subnet(network, prefix)
    if rc < 0:
        return rc
    if ip < network or ip >= network + (1 << (32 - prefix)):
        return FP_ERR_SUBNET
    return ip - network


def _check_pool_bitset(nbits: int, network: int, prefix: int) -> int:
    rc = _check_subnet(network, prefix)
    if rc < 0:
        return rc
    return 0 if nbits == 1 << (32 - prefix) else FP_ERR_SIZE


def fp_addr_apply_pool(words: list[int], nbits: int, network: int, prefix: int, first_ip: int, last_ip: int) -> int:
    rc = _check_pool_bitset(nbits, network, prefix)
    if rc < 0:
        return rc
    first = fp_addr_ip_to_host(network, prefix, first_ip)
    if first < 0:
        return first
    last = fp_addr_ip_to_host(network, prefix, last_ip)
    if last < 0:
        return last
    if first > last:
        return FP_ERR_ORDER
    fp_bs_set_range(words, nbits, 0, first)
    fp_bs_set_range(words, nbits, last + 1, nbits)
    return 0


def fp_addr_reserve(words: list[int], nbits: int, network: int, prefix: int, has_gateway: int, gateway_ip: int) -> int:
    rc = _check_pool_bitset(nbits, network, prefix)
    if rc < 0:
        return rc
    gateway = -1
    if has_gateway:
        gateway = fp_addr_ip_to_host(network, prefix, gateway_ip)
        if gateway < 0:
            return gateway
    if prefix <= 30:
        fp_bs_set(words, nbits, 0)
        fp_bs_set(words, nbits, nbits - 1)
    if gateway >= 0:
        fp_bs_set(words, nbits, gateway)
    return 0


# ---- OpenFlow 1.3 ------------------------------------------------------------

_OFP_VERSION = 0x04
_OFPT_EXPERIMENTER = 4
_OFPT_FLOW_MOD = 14
_OFPFC_ADD = 0
_OFPFC_MODIFY_STRICT = 2
_OFPFC_DELETE_STRICT = 4
_OFPIT_GOTO_TABLE = 1
_OFPIT_WRITE_METADATA = 2
_OFPIT_APPLY_ACTIONS = 4
_OFPAT_OUTPUT = 0
_OFPAT_SET_FIELD = 25
_OFPMT_OXM = 1
_OFP_NO_BUFFER = 0xFFFFFFFF
_OFPP_ANY = 0xFFFFFFFF
_OFPG_ANY = 0xFFFFFFFF
_OFPVID_PRESENT = 0x1000
_OFPXMC_OPENFLOW_BASIC = 0x8000
_OFPXMC_EXPERIMENTER = 0xFFFF
_ONF_EXPERIMENTER_ID = 0x4F4E4600
_ONF_ET_BUNDLE_CONTROL = 2300
_ONF_ET_BUNDLE_ADD_MESSAGE = 2301
_ONF_OXM_TCP_FLAGS = 42
_MAX_PORT_MASKS = 30
_TABLE_MAX = 254
_KNOWN_PRESENT_BITS = 0xFFF

_OXM_IN_PORT = 0
_OXM_METADATA = 2
_OXM_ETH_TYPE = 5
_OXM_VLAN_VID = 6
_OXM_IP_PROTO = 10
_OXM_IPV4_SRC = 11
_OXM_IPV4_DST = 12
_SET_FIELD_WIDTH = {3: 6, 4: 6, 6: 2, 11: 4, 12: 4, 38: 8}  # eth_dst/src, vlan, ipv4, tunnel_id
_L4_BASE = {6: 13, 17: 15, 132: 17}  # tcp_src, udp_src, sctp_src; dst is base + 1

_REC_HEADER = struct.Struct("<5Q4I12H6BH")
_REC_ACTION = struct.Struct("<BBHIQ")


def _port_masks(lo: int, hi: int) -> list[tuple[int, int]]:
    """Minimal aligned (value, mask) blocks covering [lo, hi]."""
    out = []
    while True:
        size = 0x10000 if lo == 0 else lo & -lo
        while size > hi - lo + 1:
            size >>= 1
        out.append((lo, ~(size - 1) & 0xFFFF))
        if lo + size > hi:
            return out
        lo += size


def fp_of_port_masks(lo: int, hi: int, values: list[int], masks: list[int], cap: int) -> int:
    if lo < 0 or hi > 0xFFFF or lo > 0xFFFF or hi < 0:
        return FP_ERR_PORT
    if lo > hi:
        return FP_ERR_ORDER
    if cap < _MAX_PORT_MASKS:
        return FP_ERR_SPACE
    pairs = _port_masks(lo, hi)
    for i, (v, m) in enumerate(pairs):
        values[i] = v
        masks[i] = m
    return len(pairs)


class _Record(NamedTuple):
    """The fixed header of one packed flow record (layout: fastpath/flowmod.py docstring)."""

    cookie: int
    metadata: int
    metadata_mask: int
    write_metadata: int
    write_metadata_mask: int
    in_port: int
    ipv4_src: int
    ipv4_dst: int
    present: int
    priority: int
    eth_type: int
    vlan_vid: int
    src_lo: int
    src_hi: int
    dst_lo: int
    dst_hi: int
    tcp_flags: int
    tcp_flags_mask: int
    idle_timeout: int
    hard_timeout: int
    flags: int
    table_id: int
    src_prefix: int
    dst_prefix: int
    ip_proto: int
    goto_table: int
    n_actions: int
    reserved: int


_Action = tuple[int, int, int, int, int]  # kind, field, max_len, port, value


def _check_action(kind: int, field: int, max_len: int, port: int, value: int) -> int:
    if kind == FP_ACT_OUTPUT:
        return 0 if field == 0 and value == 0 else FP_ERR_RECORD
    if kind != FP_ACT_SET_FIELD or max_len != 0 or port != 0:
        return FP_ERR_RECORD
    width = _SET_FIELD_WIDTH.get(field, 0)
    if width == 0:
        return FP_ERR_RECORD
    limit = 0xFFF if field == _OXM_VLAN_VID else (1 << (8 * width)) - 1
    return 0 if value <= limit else FP_ERR_RECORD


def _parse_record(data: bytes, length: int, pos: int) -> tuple[int, _Record, list[_Action], int]:
    """Decode and validate the record at pos; return (status, header, actions, new pos)."""
    if length - pos < FP_REC_HEADER_SIZE:
        return FP_ERR_RECORD, _NO_RECORD, [], pos
    r = _Record._make(_REC_HEADER.unpack_from(data, pos))
    p = r.present
    if p & ~_KNOWN_PRESENT_BITS or r.reserved != 0:
        return FP_ERR_RECORD, r, [], pos
    if r.n_actions > FP_REC_MAX_ACTIONS:
        return FP_ERR_RECORD, r, [], pos
    actions_len = r.n_actions * FP_REC_ACTION_SIZE
    if length - pos - FP_REC_HEADER_SIZE < actions_len:
        return FP_ERR_RECORD, r, [], pos
    if r.table_id > _TABLE_MAX:
        return FP_ERR_RECORD, r, [], pos
    if p & FP_HAS_GOTO and (r.goto_table <= r.table_id or r.goto_table > _TABLE_MAX):
        return FP_ERR_RECORD, r, [], pos
    if p & FP_HAS_VLAN and r.vlan_vid > 0xFFF:
        return FP_ERR_RECORD, r, [], pos
    if (p & FP_HAS_IPV4_SRC and r.src_prefix > 32) or (p & FP_HAS_IPV4_DST and r.dst_prefix > 32):
        return FP_ERR_PREFIX, r, [], pos
    if (p & FP_HAS_TP_SRC and r.src_lo > r.src_hi) or (p & FP_HAS_TP_DST and r.dst_lo > r.dst_hi):
        return FP_ERR_ORDER, r, [], pos
    if p & (FP_HAS_TP_SRC | FP_HAS_TP_DST) and (not p & FP_HAS_IP_PROTO or r.ip_proto not in _L4_BASE):
        return FP_ERR_RECORD, r, [], pos
    start = pos + FP_REC_HEADER_SIZE
    actions: list[_Action] = [_REC_ACTION.unpack_from(data, start + i * FP_REC_ACTION_SIZE) for i in range(r.n_actions)]
    for action in actions:
        if _check_action(*action) < 0:
            return FP_ERR_RECORD, r, [], pos
    return 0, r, actions, start + actions_len


_NO_RECORD = _Record._make([0] * len(_Record._fields))


def _oxm_header(out: bytearray, cls: int, field: int, hasmask: int, length: int) -> None:
    out += struct.pack("!I", (cls << 16) | (field << 9) | (hasmask << 8) | length)


def _oxm_masked(out: bytearray, field: int, width: int, value: int, mask: int) -> None:
    """os-ken's normalisation: zero mask omits, full mask is exact, else value & mask."""
    full = (1 << (8 * width)) - 1
    if mask == 0:
        return
    if mask == full:
        _oxm_exact(out, field, width, value)
        return
    _oxm_header(out, _OFPXMC_OPENFLOW_BASIC, field, 1, 2 * width)
    out += (value & mask).to_bytes(width, "big") + mask.to_bytes(width, "big")


def _oxm_exact(out: bytearray, field: int, width: int, value: int) -> None:
    _oxm_header(out, _OFPXMC_OPENFLOW_BASIC, field, 0, width)
    out += value.to_bytes(width, "big")


def _prefix_mask(prefix: int) -> int:
    return 0 if prefix == 0 else (_U32 << (32 - prefix)) & _U32


def _pad8(out: bytearray, start: int) -> None:
    out += bytes(-(len(out) - start) % 8)


def _match(r: _Record, src: tuple[int, int] | None, dst: tuple[int, int] | None) -> bytes:
    out = bytearray(struct.pack("!HH", _OFPMT_OXM, 0))
    p = r.present
    if p & FP_HAS_IN_PORT:
        _oxm_exact(out, _OXM_IN_PORT, 4, r.in_port)
    if p & FP_HAS_METADATA:
        _oxm_masked(out, _OXM_METADATA, 8, r.metadata, r.metadata_mask)
    if p & FP_HAS_ETH_TYPE:
        _oxm_exact(out, _OXM_ETH_TYPE, 2, r.eth_type)
    if p & FP_HAS_VLAN:
        _oxm_exact(out, _OXM_VLAN_VID, 2, _OFPVID_PRESENT | r.vlan_vid)
    if p & FP_HAS_IP_PROTO:
        _oxm_exact(out, _OXM_IP_PROTO, 1, r.ip_proto)
    if p & FP_HAS_IPV4_SRC:
        _oxm_masked(out, _OXM_IPV4_SRC, 4, r.ipv4_src, _prefix_mask(r.src_prefix))
    if p & FP_HAS_IPV4_DST:
        _oxm_masked(out, _OXM_IPV4_DST, 4, r.ipv4_dst, _prefix_mask(r.dst_prefix))
    if src is not None:
        _oxm_masked(out, _L4_BASE[r.ip_proto], 2, *src)
    if dst is not None:
        _oxm_masked(out, _L4_BASE[r.ip_proto] + 1, 2, *dst)
    if p & FP_HAS_TCP_FLAGS and r.tcp_flags_mask != 0:
        masked = int(r.tcp_flags_mask != 0xFFFF)
        _oxm_header(out, _OFPXMC_EXPERIMENTER, _ONF_OXM_TCP_FLAGS, masked, 8 if masked else 6)
        out += struct.pack("!IH", _ONF_EXPERIMENTER_ID, r.tcp_flags & r.tcp_flags_mask)
        if masked:
            out += struct.pack("!H", r.tcp_flags_mask)
    struct.pack_into("!H", out, 2, len(out))
    _pad8(out, 0)
    return bytes(out)


def _instructions(r: _Record, actions: list[_Action]) -> bytes:
    out = bytearray()
    if actions:
        encoded = bytearray()
        for kind, field, max_len, port, value in actions:
            if kind == FP_ACT_OUTPUT:
                encoded += struct.pack("!HHIH6x", _OFPAT_OUTPUT, 16, port, max_len)
            else:
                width = _SET_FIELD_WIDTH[field]
                if field == _OXM_VLAN_VID:
                    value |= _OFPVID_PRESENT
                start = len(encoded)
                encoded += struct.pack("!HH", _OFPAT_SET_FIELD, (8 + width + 7) // 8 * 8)
                _oxm_exact(encoded, field, width, value)
                _pad8(encoded, start)
        out += struct.pack("!HH4x", _OFPIT_APPLY_ACTIONS, 8 + len(encoded)) + encoded
    if r.present & FP_HAS_WRITE_METADATA:
        out += struct.pack("!HH4xQQ", _OFPIT_WRITE_METADATA, 24, r.write_metadata, r.write_metadata_mask)
    if r.present & FP_HAS_GOTO:
        out += struct.pack("!HHB3x", _OFPIT_GOTO_TABLE, 8, r.goto_table)
    return bytes(out)


def _flow_mod(r: _Record, command: int, xid: int, match: bytes, instructions: bytes) -> bytes:
    body = struct.pack(
        "!QQBBHHHIIIH2x",
        r.cookie, 0, r.table_id, command, r.idle_timeout, r.hard_timeout, r.priority,
        _OFP_NO_BUFFER, _OFPP_ANY, _OFPG_ANY, r.flags,
    )  # fmt: skip
    length = 8 + len(body) + len(match) + len(instructions)
    return struct.pack("!BBHI", _OFP_VERSION, _OFPT_FLOW_MOD, length, xid) + body + match + instructions


def fp_of_encode(
    records: bytes,
    length: int,
    command: int,
    xid: int,
    bundle_id: int,
    bundle_flags: int,
    out: bytearray | None,
    cap: int,
    count: list[int],
) -> int:
    if command not in (_OFPFC_ADD, _OFPFC_MODIFY_STRICT, _OFPFC_DELETE_STRICT):
        return FP_ERR_COMMAND
    if xid < 0 or xid > _U32 or bundle_id > _U32 or bundle_flags < 0 or bundle_flags > 0xFFFF:
        return FP_ERR_ARG
    msgs = bytearray()
    n = 0
    pos = 0
    index = 0
    while pos < length:
        rc, r, actions, pos = _parse_record(records, length, pos)
        if rc < 0:
            count[0] = index
            return rc
        src_list: list[tuple[int, int] | None] = [None]
        dst_list: list[tuple[int, int] | None] = [None]
        if r.present & FP_HAS_TP_SRC:
            src_list = list(_port_masks(r.src_lo, r.src_hi))
        if r.present & FP_HAS_TP_DST:
            dst_list = list(_port_masks(r.dst_lo, r.dst_hi))
        instructions = b"" if command == _OFPFC_DELETE_STRICT else _instructions(r, actions)
        for src in src_list:
            for dst in dst_list:
                msg_xid = (xid + n) & _U32
                n += 1
                msg = _flow_mod(r, command, msg_xid, _match(r, src, dst), instructions)
                if bundle_id >= 0:
                    msgs += struct.pack(
                        "!BBHIIIIxxH",
                        _OFP_VERSION, _OFPT_EXPERIMENTER, 24 + len(msg), msg_xid,
                        _ONF_EXPERIMENTER_ID, _ONF_ET_BUNDLE_ADD_MESSAGE, bundle_id, bundle_flags,
                    )  # fmt: skip
                msgs += msg
        if out is not None and len(msgs) > cap:
            return FP_ERR_SPACE
        index += 1
    if out is not None:
        out[: len(msgs)] = msgs
    count[0] = n
    return len(msgs)


def fp_of_bundle_ctrl(xid: int, bundle_id: int, type_: int, flags: int, out: bytearray | None, cap: int) -> int:
    if (
        xid < 0 or xid > _U32 or bundle_id < 0 or bundle_id > _U32
        or type_ < 0 or type_ > 0xFFFF or flags < 0 or flags > 0xFFFF
    ):  # fmt: skip
        return FP_ERR_ARG
    msg = struct.pack(
        "!BBHIIIIHH",
        _OFP_VERSION, _OFPT_EXPERIMENTER, 24, xid,
        _ONF_EXPERIMENTER_ID, _ONF_ET_BUNDLE_CONTROL, bundle_id, type_, flags,
    )  # fmt: skip
    if out is None or cap < len(msg):
        return FP_ERR_SPACE
    out[: len(msg)] = msg
    return len(msg)

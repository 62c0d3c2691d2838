/*
 * fastpath: bitsets, IPv4 pool helpers and OpenFlow 1.3 flow-mod encoding.
 *
 * The library owns no memory: every buffer is passed in by the caller with
 * its size, and every function validates its arguments and returns a
 * negative FP_ERR_* code instead of touching memory it was not given.  It
 * does no I/O and holds no global state, so calls are thread-safe as long
 * as callers do not share a bitset between threads.
 *
 * Bitsets are arrays of little-endian-numbered 64-bit words: bit i lives in
 * words[i / 64] at position i % 64.  Bits at and above nbits in the last
 * word are always zero; every mutating function preserves that.
 *
 * The block between the cdef markers is read verbatim by fastpath/_build.py
 * as the cffi declaration, so it must stay plain C declarations only.
 */
#ifndef FASTPATH_H
#define FASTPATH_H

#include <stddef.h>
#include <stdint.h>

/* cdef-begin */
#define FP_MAX_BITS 16777216          /* 2^24 bits: a /8 IPv4 pool */
#define FP_REC_HEADER_SIZE 88         /* bytes in one packed flow record */
#define FP_REC_ACTION_SIZE 16         /* bytes per packed action */
#define FP_REC_MAX_ACTIONS 64

enum fp_status {
    FP_NOT_FOUND = -1,   /* search found nothing (not an error) */
    FP_ERR_INDEX = -2,   /* bit or host index outside the set or subnet */
    FP_ERR_ORDER = -3,   /* range start after range end */
    FP_ERR_SIZE = -4,    /* bitset size not in 1..FP_MAX_BITS */
    FP_ERR_FORMAT = -5,  /* malformed serialised bitset payload */
    FP_ERR_SPACE = -6,   /* caller's output buffer too small */
    FP_ERR_PREFIX = -7,  /* prefix length out of range */
    FP_ERR_SUBNET = -8,  /* address outside subnet, or host bits in network */
    FP_ERR_PORT = -9,    /* L4 port or port range invalid */
    FP_ERR_RECORD = -10, /* malformed packed flow record */
    FP_ERR_COMMAND = -11, /* unsupported flow-mod command */
    FP_ERR_ARG = -12     /* scalar argument out of range (bundle id, xid) */
};

/* Presence bits of a packed flow record (fp_rec.present). */
#define FP_HAS_IN_PORT 1
#define FP_HAS_METADATA 2
#define FP_HAS_ETH_TYPE 4
#define FP_HAS_VLAN 8
#define FP_HAS_IPV4_SRC 16
#define FP_HAS_IPV4_DST 32
#define FP_HAS_IP_PROTO 64
#define FP_HAS_TP_SRC 128
#define FP_HAS_TP_DST 256
#define FP_HAS_TCP_FLAGS 512
#define FP_HAS_GOTO 1024
#define FP_HAS_WRITE_METADATA 2048

#define FP_ACT_OUTPUT 1
#define FP_ACT_SET_FIELD 2

/*
 * Scalars that come from Python callers are int64_t so that out-of-range
 * values reach the range checks here instead of failing in the conversion.
 */

/* ---- bitsets ---------------------------------------------------------- */
int fp_bs_test(const uint64_t *words, uint32_t nbits, int64_t index);
int fp_bs_set(uint64_t *words, uint32_t nbits, int64_t index);
int fp_bs_clear(uint64_t *words, uint32_t nbits, int64_t index);
int fp_bs_set_range(uint64_t *words, uint32_t nbits, int64_t start, int64_t stop);
int fp_bs_clear_range(uint64_t *words, uint32_t nbits, int64_t start, int64_t stop);
int64_t fp_bs_next_clear(const uint64_t *words, uint32_t nbits, int64_t start, int wrap);
int64_t fp_bs_next_set(const uint64_t *words, uint32_t nbits, int64_t start);
int64_t fp_bs_alloc(uint64_t *words, uint32_t nbits, int64_t start, int wrap,
                    int64_t count, uint32_t *out);
int64_t fp_bs_count(const uint64_t *words, uint32_t nbits);
int64_t fp_bs_first_set(const uint64_t *words, uint32_t nbits);
int64_t fp_bs_last_set(const uint64_t *words, uint32_t nbits);
int64_t fp_bs_encode_raw(const uint64_t *words, uint32_t nbits, uint8_t *out, size_t cap);
int fp_bs_decode_raw(uint64_t *words, uint32_t nbits, const uint8_t *in, size_t len);
int64_t fp_bs_encode_runs(const uint64_t *words, uint32_t nbits, uint8_t *out, size_t cap);
int fp_bs_decode_runs(uint64_t *words, uint32_t nbits, const uint8_t *in, size_t len);

/* ---- IPv4 subnet helpers ---------------------------------------------- */
int64_t fp_addr_host_to_ip(int64_t network, int64_t prefix, int64_t index);
int64_t fp_addr_ip_to_host(int64_t network, int64_t prefix, int64_t ip);
int fp_addr_apply_pool(uint64_t *words, uint32_t nbits, int64_t network, int64_t prefix,
                       int64_t first_ip, int64_t last_ip);
int fp_addr_reserve(uint64_t *words, uint32_t nbits, int64_t network, int64_t prefix,
                    int has_gateway, int64_t gateway_ip);

/* ---- OpenFlow 1.3 ----------------------------------------------------- */
int fp_of_port_masks(int64_t lo, int64_t hi, uint16_t *values, uint16_t *masks, size_t cap);
int64_t fp_of_encode(const uint8_t *records, size_t len, int64_t command, int64_t xid,
                     int64_t bundle_id, int64_t bundle_flags,
                     uint8_t *out, size_t cap, uint32_t *count);
int64_t fp_of_bundle_ctrl(int64_t xid, int64_t bundle_id, int64_t type, int64_t flags,
                          uint8_t *out, size_t cap);
/* cdef-end */

#endif /* FASTPATH_H */

/*
 * Edge-case driver for the fastpath C library, meant to run under
 * -fsanitize=address,undefined (see tests/fastpath/test_c_asan.py).
 *
 * Every buffer handed to the library is heap-allocated at exactly the size
 * the API promises to respect, so any read or write past it is reported by
 * AddressSanitizer.  Exit status is 0 only if every CHECK held.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fastpath.h"

static int failures;

#define CHECK(cond)                                                              \
    do {                                                                         \
        if (!(cond)) {                                                           \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
            failures++;                                                          \
        }                                                                        \
    } while (0)

static uint64_t rng_state = 0x9e3779b97f4a7c15u;

static uint64_t rng(void)
{
    /* xorshift64*: deterministic, so a failure reproduces. */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545f4914f6cdd1du;
}

static uint64_t *new_words(uint32_t nbits)
{
    return calloc((nbits + 63) / 64, sizeof(uint64_t));
}

/* Copy into an exact-size heap block so overreads are caught. */
static uint8_t *exact_copy(const uint8_t *src, size_t len)
{
    uint8_t *p = malloc(len ? len : 1);
    if (len)
        memcpy(p, src, len);
    return p;
}

static void test_bitset_bounds(void)
{
    static const uint32_t sizes[] = {1, 2, 63, 64, 65, 127, 128, 129, 1000, 65536, FP_MAX_BITS};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        uint32_t n = sizes[k];
        uint64_t *w = new_words(n);
        CHECK(fp_bs_test(w, n, -1) == FP_ERR_INDEX);
        CHECK(fp_bs_test(w, n, n) == FP_ERR_INDEX);
        CHECK(fp_bs_set(w, n, n) == FP_ERR_INDEX);
        CHECK(fp_bs_clear(w, n, INT64_MIN) == FP_ERR_INDEX);
        CHECK(fp_bs_set_range(w, n, 0, (int64_t)n + 1) == FP_ERR_INDEX);
        CHECK(fp_bs_set_range(w, n, -1, 1) == FP_ERR_INDEX);
        CHECK(fp_bs_set_range(w, n, n, n) == 0);
        if (n > 1)
            CHECK(fp_bs_set_range(w, n, 1, 0) == FP_ERR_ORDER);
        CHECK(fp_bs_next_clear(w, n, (int64_t)n + 1, 1) == FP_ERR_INDEX);
        CHECK(fp_bs_next_clear(w, n, n, 0) == FP_NOT_FOUND);
        CHECK(fp_bs_next_clear(w, n, n, 1) == 0);
        CHECK(fp_bs_first_set(w, n) == FP_NOT_FOUND);
        CHECK(fp_bs_last_set(w, n) == FP_NOT_FOUND);
        CHECK(fp_bs_next_set(w, n, n) == FP_NOT_FOUND);
        CHECK(fp_bs_next_set(w, n, (int64_t)n + 1) == FP_ERR_INDEX);
        CHECK(fp_bs_next_set(w, n, -1) == FP_ERR_INDEX);

        CHECK(fp_bs_set(w, n, n - 1) == 0);
        CHECK(fp_bs_set(w, n, n - 1) == 1);
        CHECK(fp_bs_last_set(w, n) == (int64_t)n - 1);
        CHECK(fp_bs_first_set(w, n) == (int64_t)n - 1);
        CHECK(fp_bs_next_set(w, n, 0) == (int64_t)n - 1);
        CHECK(fp_bs_next_set(w, n, n) == FP_NOT_FOUND);
        CHECK(fp_bs_next_clear(w, n, n - 1, 0) == FP_NOT_FOUND);
        CHECK(fp_bs_set_range(w, n, 0, n) == 0);
        CHECK(fp_bs_count(w, n) == n);
        CHECK(fp_bs_next_clear(w, n, 0, 1) == FP_NOT_FOUND);
        /* Padding bits beyond nbits must stay zero. */
        if (n % 64)
            CHECK((w[(n - 1) / 64] >> (n % 64)) == 0);
        CHECK(fp_bs_clear(w, n, 0) == 1);
        CHECK(fp_bs_next_clear(w, n, n, 1) == 0);
        CHECK(fp_bs_next_clear(w, n, 1, 0) == FP_NOT_FOUND);
        CHECK(fp_bs_clear_range(w, n, 0, n) == 0);
        CHECK(fp_bs_count(w, n) == 0);
        free(w);
    }
    uint64_t word = 0;
    CHECK(fp_bs_set(&word, 0, 0) == FP_ERR_SIZE);
    CHECK(fp_bs_count(&word, FP_MAX_BITS + 1) == FP_ERR_SIZE);
    CHECK(fp_bs_next_clear(&word, 0, 0, 0) == FP_ERR_SIZE);
}

static void test_alloc(void)
{
    uint32_t n = 200;
    uint64_t *w = new_words(n);
    uint32_t *out = malloc(n * sizeof *out);
    CHECK(fp_bs_set_range(w, n, 0, 100) == 0);
    CHECK(fp_bs_alloc(w, n, 150, 1, n, out) == 100);
    CHECK(out[0] == 150 && out[49] == 199 && out[50] == 100 && out[99] == 149);
    CHECK(fp_bs_alloc(w, n, 0, 1, n, out) == 0);
    CHECK(fp_bs_alloc(w, n, 0, 1, -1, out) == FP_ERR_ARG);
    CHECK(fp_bs_alloc(w, n, -1, 1, 1, out) == FP_ERR_INDEX);
    free(out);
    free(w);
}

static void roundtrip(uint64_t *w, uint32_t n)
{
    size_t raw_len = (n + 7) / 8;
    uint8_t *raw = malloc(raw_len);
    CHECK(fp_bs_encode_raw(w, n, raw, raw_len - 1) == FP_ERR_SPACE);
    CHECK(fp_bs_encode_raw(w, n, raw, raw_len) == (int64_t)raw_len);
    uint64_t *back = new_words(n);
    CHECK(fp_bs_decode_raw(back, n, raw, raw_len) == 0);
    CHECK(memcmp(back, w, (n + 63) / 64 * 8) == 0);
    CHECK(fp_bs_decode_raw(back, n, raw, raw_len - 1) == FP_ERR_FORMAT);

    /* Runs: find the exact size, then check every smaller cap is refused in bounds. */
    size_t cap = 2 * (size_t)n + 16;
    uint8_t *runs = malloc(cap);
    int64_t len = fp_bs_encode_runs(w, n, runs, cap);
    CHECK(len >= 0);
    for (size_t c = 0; len > 0 && c < (size_t)len; c += 1 + c / 4) {
        uint8_t *tight = malloc(c ? c : 1);
        CHECK(fp_bs_encode_runs(w, n, tight, c) == FP_ERR_SPACE);
        free(tight);
    }
    uint8_t *exact = exact_copy(runs, (size_t)len);
    memset(back, 0xff, (n + 63) / 64 * 8);
    CHECK(fp_bs_decode_runs(back, n, exact, (size_t)len) == 0);
    CHECK(memcmp(back, w, (n + 63) / 64 * 8) == 0);
    /* Every truncation is rejected or decodes to something valid, never overreads. */
    for (size_t t = 0; t < (size_t)len; t += 1 + t / 8) {
        uint8_t *cut = exact_copy(runs, t);
        int rc = fp_bs_decode_runs(back, n, cut, t);
        CHECK(rc == 0 || rc == FP_ERR_FORMAT);
        free(cut);
    }
    free(exact);
    free(runs);
    free(back);
    free(raw);
}

static void test_serialisation(void)
{
    static const uint32_t sizes[] = {1, 7, 8, 9, 64, 65, 1000, 4096};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        uint32_t n = sizes[k];
        uint64_t *w = new_words(n);
        roundtrip(w, n);
        for (uint32_t i = 0; i < n; i++)
            if (rng() % 3 == 0)
                fp_bs_set(w, n, i);
        roundtrip(w, n);
        fp_bs_set_range(w, n, 0, n);
        roundtrip(w, n);
        free(w);
    }
    uint32_t n = FP_MAX_BITS;
    uint64_t *w = new_words(n);
    fp_bs_set_range(w, n, 5, 1000000);
    fp_bs_set(w, n, n - 1);
    roundtrip(w, n);
    free(w);

    /* Raw payload with a bit set beyond nbits is malformed. */
    uint8_t bad = 0x80;
    uint64_t word = 0;
    CHECK(fp_bs_decode_raw(&word, 7, &bad, 1) == FP_ERR_FORMAT);
    /* Random payloads never crash and leave the set unchanged when rejected. */
    for (int round = 0; round < 20000; round++) {
        size_t len = rng() % 12;
        uint8_t *buf = malloc(len ? len : 1);
        for (size_t i = 0; i < len; i++)
            buf[i] = (uint8_t)rng();
        uint32_t bits = 1 + (uint32_t)(rng() % 300);
        uint64_t *dst = new_words(bits);
        dst[0] = 1;
        int rc = fp_bs_decode_runs(dst, bits, buf, len);
        CHECK(rc == 0 || (rc == FP_ERR_FORMAT && dst[0] == 1));
        free(dst);
        free(buf);
    }
}

static void test_addr(void)
{
    uint32_t net = 0xc6120000; /* 198.18.0.0/16 */
    CHECK(fp_addr_host_to_ip(net, 16, 0) == net);
    CHECK(fp_addr_host_to_ip(net, 16, 65535) == net + 65535);
    CHECK(fp_addr_host_to_ip(net, 16, 65536) == FP_ERR_INDEX);
    CHECK(fp_addr_host_to_ip(net, 16, -1) == FP_ERR_INDEX);
    CHECK(fp_addr_host_to_ip(net, 33, 0) == FP_ERR_PREFIX);
    CHECK(fp_addr_host_to_ip(net, 7, 0) == FP_ERR_PREFIX);
    CHECK(fp_addr_host_to_ip(net + 1, 16, 0) == FP_ERR_SUBNET);
    CHECK(fp_addr_host_to_ip(-1, 32, 0) == FP_ERR_SUBNET);
    CHECK(fp_addr_host_to_ip(INT64_C(0x100000000), 32, 0) == FP_ERR_SUBNET);
    CHECK(fp_addr_host_to_ip(0xffffffff, 32, 0) == 0xffffffff);
    CHECK(fp_addr_ip_to_host(net, 16, net + 5) == 5);
    CHECK(fp_addr_ip_to_host(net, 16, net + 65536) == FP_ERR_SUBNET);

    uint32_t n = 65536;
    uint64_t *w = new_words(n);
    CHECK(fp_addr_apply_pool(w, n, net, 16, net + 10, net + 9) == FP_ERR_ORDER);
    CHECK(fp_addr_apply_pool(w, n, net, 16, net - 1, net + 9) == FP_ERR_SUBNET);
    CHECK(fp_addr_apply_pool(w, n, net, 24, net, net) == FP_ERR_SIZE);
    CHECK(fp_bs_count(w, n) == 0); /* rejected calls change nothing */
    CHECK(fp_addr_apply_pool(w, n, net, 16, net + 10, net + 19) == 0);
    CHECK(fp_bs_count(w, n) == n - 10);
    CHECK(fp_bs_next_clear(w, n, 0, 0) == 10);
    CHECK(fp_addr_reserve(w, n, net, 16, 1, net + 65536) == FP_ERR_SUBNET);
    CHECK(fp_addr_reserve(w, n, net, 16, 1, net + 10) == 0);
    CHECK(fp_bs_next_clear(w, n, 0, 0) == 11);
    free(w);

    uint64_t one = 0;
    CHECK(fp_addr_reserve(&one, 1, 0xc6120001, 32, 0, 0) == 0);
    CHECK(one == 0); /* /32: no network or broadcast */
    CHECK(fp_addr_reserve(&one, 2, 0xc6120000, 31, 0, 0) == 0);
    CHECK(one == 0);
    CHECK(fp_addr_reserve(&one, 4, 0xc6120000, 30, 0, 0) == 0);
    CHECK(one == 9);
}

static void test_port_masks(void)
{
    uint16_t *v = malloc(30 * sizeof *v), *m = malloc(30 * sizeof *m);
    CHECK(fp_of_port_masks(1, 65534, v, m, 30) == 30);
    CHECK(fp_of_port_masks(0, 65535, v, m, 30) == 1 && m[0] == 0);
    CHECK(fp_of_port_masks(0, 65535, v, m, 29) == FP_ERR_SPACE);
    CHECK(fp_of_port_masks(0, 65536, v, m, 30) == FP_ERR_PORT);
    CHECK(fp_of_port_masks(-1, 5, v, m, 30) == FP_ERR_PORT);
    CHECK(fp_of_port_masks(6, 5, v, m, 30) == FP_ERR_ORDER);
    for (int round = 0; round < 20000; round++) {
        int64_t lo = (int64_t)(rng() % 65536), hi = (int64_t)(rng() % 65536);
        if (round % 4 == 0)
            hi = lo + (int64_t)(rng() % 64);
        if (hi > 65535)
            hi = 65535;
        if (lo > hi) {
            int64_t t = lo;
            lo = hi;
            hi = t;
        }
        int count = fp_of_port_masks(lo, hi, v, m, 30);
        CHECK(count >= 1 && count <= 30);
        /* Blocks are contiguous, aligned, and exactly tile [lo, hi]. */
        int64_t next = lo;
        for (int i = 0; i < count; i++) {
            int64_t size = 65536 - m[i];
            CHECK(v[i] == next && (v[i] & ~m[i] & 0xffff) == 0);
            next += size;
        }
        CHECK(next == hi + 1);
    }
    free(v);
    free(m);
}

/* A valid record: every match field, both port ranges, all action kinds. */
static size_t make_record(uint8_t *p, int n_actions)
{
    memset(p, 0, FP_REC_HEADER_SIZE + (size_t)n_actions * FP_REC_ACTION_SIZE);
    uint32_t present = 0xfff;
    memcpy(p + 52, &present, 4); /* little-endian host assumed by this test only */
    p[58] = 0x00, p[59] = 0x08;  /* eth_type 0x0800 */
    p[62] = 1, p[64] = 0xfe, p[65] = 0xff; /* tp_src 1-65534: 30 blocks */
    p[66] = 1, p[68] = 0xfe, p[69] = 0xff;
    p[72] = 0x12; /* tcp_flags mask */
    p[80] = 3, p[81] = 24, p[82] = 32, p[83] = 6, p[84] = 9;
    p[85] = (uint8_t)n_actions;
    for (int i = 0; i < n_actions; i++) {
        uint8_t *a = p + FP_REC_HEADER_SIZE + i * FP_REC_ACTION_SIZE;
        if (i % 2) {
            a[0] = FP_ACT_SET_FIELD, a[1] = 38, a[8] = 0xff; /* tunnel_id */
        } else {
            a[0] = FP_ACT_OUTPUT, a[4] = 7;
        }
    }
    return FP_REC_HEADER_SIZE + (size_t)n_actions * FP_REC_ACTION_SIZE;
}

static void test_flow_encode(void)
{
    uint8_t rec[FP_REC_HEADER_SIZE + FP_REC_MAX_ACTIONS * FP_REC_ACTION_SIZE];
    size_t len = make_record(rec, FP_REC_MAX_ACTIONS);
    uint8_t *in = exact_copy(rec, len);
    uint32_t count = 0;
    int64_t size = fp_of_encode(in, len, 0, 1, -1, 0, NULL, 0, &count);
    CHECK(size > 0 && count == 900);
    uint8_t *out = malloc((size_t)size);
    CHECK(fp_of_encode(in, len, 0, 1, -1, 0, out, (size_t)size, &count) == size);
    CHECK(out[0] == 4 && out[1] == 14);
    for (int64_t cap = 0; cap < size; cap += 1 + cap / 3) {
        uint8_t *tight = malloc(cap ? (size_t)cap : 1);
        CHECK(fp_of_encode(in, len, 0, 1, 5, 3, tight, (size_t)cap, &count) == FP_ERR_SPACE);
        free(tight);
    }
    free(out);

    CHECK(fp_of_encode(in, len, 1, 0, -1, 0, NULL, 0, &count) == FP_ERR_COMMAND);
    CHECK(fp_of_encode(in, len, 0, -1, -1, 0, NULL, 0, &count) == FP_ERR_ARG);
    CHECK(fp_of_encode(in, len, 0, INT64_C(0x100000000), -1, 0, NULL, 0, &count) == FP_ERR_ARG);
    CHECK(fp_of_encode(in, len, 0, 0, INT64_C(0x100000000), 0, NULL, 0, &count) == FP_ERR_ARG);
    CHECK(fp_of_encode(in, len, 0, 0, 1, 0x10000, NULL, 0, &count) == FP_ERR_ARG);
    free(in);

    /* Every truncation of a record is refused without reading past it. */
    for (size_t t = 1; t < len; t++) {
        uint8_t *cut = exact_copy(rec, t);
        CHECK(fp_of_encode(cut, t, 0, 0, -1, 0, NULL, 0, &count) == FP_ERR_RECORD);
        free(cut);
    }

    /* Specific rejections. */
    size_t one = make_record(rec, 1);
    rec[81] = 33;
    CHECK(fp_of_encode(rec, one, 0, 0, -1, 0, NULL, 0, &count) == FP_ERR_PREFIX);
    make_record(rec, 1);
    rec[62] = 9, rec[64] = 8, rec[65] = 0; /* tp_src 9-8 */
    CHECK(fp_of_encode(rec, one, 0, 0, -1, 0, NULL, 0, &count) == FP_ERR_ORDER);
    make_record(rec, 1);
    rec[84] = 3; /* goto its own table */
    CHECK(fp_of_encode(rec, one, 0, 0, -1, 0, NULL, 0, &count) == FP_ERR_RECORD);
    make_record(rec, 1);
    rec[83] = 1; /* ports with ICMP */
    CHECK(fp_of_encode(rec, one, 0, 0, -1, 0, NULL, 0, &count) == FP_ERR_RECORD);
    make_record(rec, 1);
    rec[85] = FP_REC_MAX_ACTIONS + 1;
    CHECK(fp_of_encode(rec, one, 0, 0, -1, 0, NULL, 0, &count) == FP_ERR_RECORD);

    /* Random mutations of a valid two-record batch: never crash, never overrun. */
    uint8_t batch[2 * (FP_REC_HEADER_SIZE + 4 * FP_REC_ACTION_SIZE)];
    size_t half = make_record(batch, 4);
    memcpy(batch + half, batch, half);
    for (int round = 0; round < 3000; round++) {
        uint8_t *m = exact_copy(batch, 2 * half);
        for (int k = 0; k < 3; k++)
            m[rng() % (2 * half)] = (uint8_t)rng();
        size_t mlen = 2 * half - (round % 7 == 0 ? rng() % half : 0);
        int64_t need = fp_of_encode(m, mlen, 0, 0, round % 2 ? 1 : -1, 0, NULL, 0, &count);
        if (need >= 0) {
            uint8_t *o = malloc(need ? (size_t)need : 1);
            CHECK(fp_of_encode(m, mlen, 0, 0, round % 2 ? 1 : -1, 0, o, (size_t)need, &count) == need);
            free(o);
        }
        free(m);
    }

    uint8_t *ctrl = malloc(24);
    CHECK(fp_of_bundle_ctrl(1, 2, 0, 3, ctrl, 24) == 24);
    CHECK(fp_of_bundle_ctrl(1, 2, 0, 3, ctrl, 23) == FP_ERR_SPACE);
    CHECK(fp_of_bundle_ctrl(1, 2, 0, 3, NULL, 0) == FP_ERR_SPACE);
    CHECK(fp_of_bundle_ctrl(1, -1, 0, 3, ctrl, 24) == FP_ERR_ARG);
    free(ctrl);
}

int main(void)
{
    test_bitset_bounds();
    test_alloc();
    test_serialisation();
    test_addr();
    test_port_masks();
    test_flow_encode();
    if (failures) {
        fprintf(stderr, "%d check(s) failed\n", failures);
        return 1;
    }
    puts("fastpath C tests passed");
    return 0;
}

/*
 * Bitset primitives over caller-owned uint64_t word arrays.
 *
 * Searches work a 64-bit word at a time with count-trailing-zeros, so a
 * next-clear on a half-full set touches one or two words instead of
 * looping over bits.  Every entry point validates nbits and indices before
 * touching memory; the caller guarantees that `words` holds
 * (nbits + 63) / 64 elements.
 */
#include "fastpath.h"

#define WORD_BITS 64

static int valid_size(uint32_t nbits)
{
    return nbits >= 1 && nbits <= FP_MAX_BITS;
}

static uint32_t nwords(uint32_t nbits)
{
    return (nbits + WORD_BITS - 1) / WORD_BITS;
}

/* Bits of the last word that lie beyond nbits (all ones if none). */
static uint64_t tail_pad(uint32_t nbits)
{
    uint32_t used = nbits % WORD_BITS;
    return used == 0 ? 0 : ~((UINT64_C(1) << used) - 1);
}

/* Mask of bits [lo, hi) inside one word, 0 <= lo < hi <= 64. */
static uint64_t span_mask(uint32_t lo, uint32_t hi)
{
    uint64_t upper = hi == WORD_BITS ? ~UINT64_C(0) : (UINT64_C(1) << hi) - 1;
    return upper & ~((UINT64_C(1) << lo) - 1);
}

static int check_index(uint32_t nbits, int64_t index)
{
    if (!valid_size(nbits))
        return FP_ERR_SIZE;
    if (index < 0 || index >= (int64_t)nbits)
        return FP_ERR_INDEX;
    return 0;
}

int fp_bs_test(const uint64_t *words, uint32_t nbits, int64_t index)
{
    int rc = check_index(nbits, index);
    if (rc < 0)
        return rc;
    return (int)((words[index / WORD_BITS] >> (index % WORD_BITS)) & 1);
}

int fp_bs_set(uint64_t *words, uint32_t nbits, int64_t index)
{
    int rc = check_index(nbits, index);
    if (rc < 0)
        return rc;
    uint64_t bit = UINT64_C(1) << (index % WORD_BITS);
    uint64_t *w = &words[index / WORD_BITS];
    int previous = (*w & bit) != 0;
    *w |= bit;
    return previous;
}

int fp_bs_clear(uint64_t *words, uint32_t nbits, int64_t index)
{
    int rc = check_index(nbits, index);
    if (rc < 0)
        return rc;
    uint64_t bit = UINT64_C(1) << (index % WORD_BITS);
    uint64_t *w = &words[index / WORD_BITS];
    int previous = (*w & bit) != 0;
    *w &= ~bit;
    return previous;
}

static int check_range(uint32_t nbits, int64_t start, int64_t stop)
{
    if (!valid_size(nbits))
        return FP_ERR_SIZE;
    if (start < 0 || stop > (int64_t)nbits || start > (int64_t)nbits || stop < 0)
        return FP_ERR_INDEX;
    if (start > stop)
        return FP_ERR_ORDER;
    return 0;
}

/* Set (value=1) or clear (value=0) bits [start, stop); arguments checked. */
static void fill_range(uint64_t *words, uint32_t start, uint32_t stop, int value)
{
    while (start < stop) {
        uint32_t wi = start / WORD_BITS;
        uint32_t lo = start % WORD_BITS;
        uint32_t hi = stop - wi * WORD_BITS;
        if (hi > WORD_BITS)
            hi = WORD_BITS;
        uint64_t m = span_mask(lo, hi);
        if (value)
            words[wi] |= m;
        else
            words[wi] &= ~m;
        start = wi * WORD_BITS + hi;
    }
}

int fp_bs_set_range(uint64_t *words, uint32_t nbits, int64_t start, int64_t stop)
{
    int rc = check_range(nbits, start, stop);
    if (rc < 0)
        return rc;
    fill_range(words, (uint32_t)start, (uint32_t)stop, 1);
    return 0;
}

int fp_bs_clear_range(uint64_t *words, uint32_t nbits, int64_t start, int64_t stop)
{
    int rc = check_range(nbits, start, stop);
    if (rc < 0)
        return rc;
    fill_range(words, (uint32_t)start, (uint32_t)stop, 0);
    return 0;
}

/*
 * First clear bit in [start, stop) or FP_NOT_FOUND; stop <= nbits.
 * Padding bits past nbits are treated as set so they are never returned.
 */
static int64_t scan_clear(const uint64_t *words, uint32_t nbits, uint32_t start, uint32_t stop)
{
    if (start >= stop)
        return FP_NOT_FOUND;
    uint32_t last = nwords(nbits) - 1;
    uint32_t wi = start / WORD_BITS;
    /* Pretend the bits below start are set so the first word starts there. */
    uint64_t w = words[wi] | ((UINT64_C(1) << (start % WORD_BITS)) - 1);
    for (;;) {
        if (wi == last)
            w |= tail_pad(nbits);
        if (w != ~UINT64_C(0)) {
            uint32_t bit = wi * WORD_BITS + (uint32_t)__builtin_ctzll(~w);
            return bit < stop ? (int64_t)bit : FP_NOT_FOUND;
        }
        if (++wi > last || wi * WORD_BITS >= stop)
            return FP_NOT_FOUND;
        w = words[wi];
    }
}

/* Like scan_clear, for set bits; padding bits are always zero. */
static int64_t scan_set(const uint64_t *words, uint32_t nbits, uint32_t start)
{
    if (start >= nbits)
        return FP_NOT_FOUND;
    uint32_t last = nwords(nbits) - 1;
    uint32_t wi = start / WORD_BITS;
    uint64_t w = words[wi] & ~((UINT64_C(1) << (start % WORD_BITS)) - 1);
    for (;;) {
        if (w != 0)
            return (int64_t)(wi * WORD_BITS + (uint32_t)__builtin_ctzll(w));
        if (++wi > last)
            return FP_NOT_FOUND;
        w = words[wi];
    }
}

int64_t fp_bs_next_clear(const uint64_t *words, uint32_t nbits, int64_t start, int wrap)
{
    if (!valid_size(nbits))
        return FP_ERR_SIZE;
    /* start == nbits is allowed so a cursor "last allocated + 1" needs no special case. */
    if (start < 0 || start > (int64_t)nbits)
        return FP_ERR_INDEX;
    int64_t found = scan_clear(words, nbits, (uint32_t)start, nbits);
    if (found == FP_NOT_FOUND && wrap)
        found = scan_clear(words, nbits, 0, (uint32_t)start);
    return found;
}

int64_t fp_bs_next_set(const uint64_t *words, uint32_t nbits, int64_t start)
{
    if (!valid_size(nbits))
        return FP_ERR_SIZE;
    if (start < 0 || start > (int64_t)nbits)
        return FP_ERR_INDEX;
    return scan_set(words, nbits, (uint32_t)start);
}

int64_t fp_bs_alloc(uint64_t *words, uint32_t nbits, int64_t start, int wrap,
                    int64_t count, uint32_t *out)
{
    int64_t cursor = fp_bs_next_clear(words, nbits, start, wrap);
    if (cursor < FP_NOT_FOUND)
        return cursor;
    if (count < 0 || count > FP_MAX_BITS)
        return FP_ERR_ARG;
    int64_t done = 0;
    while (done < count && cursor >= 0) {
        words[cursor / WORD_BITS] |= UINT64_C(1) << (cursor % WORD_BITS);
        out[done++] = (uint32_t)cursor;
        cursor = fp_bs_next_clear(words, nbits, cursor + 1, wrap);
    }
    return done;
}

int64_t fp_bs_count(const uint64_t *words, uint32_t nbits)
{
    if (!valid_size(nbits))
        return FP_ERR_SIZE;
    int64_t total = 0;
    for (uint32_t i = 0, n = nwords(nbits); i < n; i++)
        total += __builtin_popcountll(words[i]);
    return total;
}

int64_t fp_bs_first_set(const uint64_t *words, uint32_t nbits)
{
    if (!valid_size(nbits))
        return FP_ERR_SIZE;
    return scan_set(words, nbits, 0);
}

int64_t fp_bs_last_set(const uint64_t *words, uint32_t nbits)
{
    if (!valid_size(nbits))
        return FP_ERR_SIZE;
    for (uint32_t wi = nwords(nbits); wi-- > 0;) {
        if (words[wi] != 0)
            return (int64_t)(wi * WORD_BITS + 63 - (uint32_t)__builtin_clzll(words[wi]));
    }
    return FP_NOT_FOUND;
}

/* ---- serialisation payloads ------------------------------------------ */

int64_t fp_bs_encode_raw(const uint64_t *words, uint32_t nbits, uint8_t *out, size_t cap)
{
    if (!valid_size(nbits))
        return FP_ERR_SIZE;
    size_t len = (nbits + 7) / 8;
    if (cap < len)
        return FP_ERR_SPACE;
    for (size_t i = 0; i < len; i++)
        out[i] = (uint8_t)(words[i / 8] >> (8 * (i % 8)));
    return (int64_t)len;
}

int fp_bs_decode_raw(uint64_t *words, uint32_t nbits, const uint8_t *in, size_t len)
{
    if (!valid_size(nbits))
        return FP_ERR_SIZE;
    if (len != (nbits + 7) / 8)
        return FP_ERR_FORMAT;
    if (nbits % 8 != 0 && (in[len - 1] >> (nbits % 8)) != 0)
        return FP_ERR_FORMAT; /* bits beyond nbits must be zero */
    uint32_t n = nwords(nbits);
    for (uint32_t i = 0; i < n; i++)
        words[i] = 0;
    for (size_t i = 0; i < len; i++)
        words[i / 8] |= (uint64_t)in[i] << (8 * (i % 8));
    return 0;
}

/* Append an unsigned LEB128 varint; FP_ERR_SPACE if it would pass cap. */
static int put_varint(uint8_t *out, size_t cap, size_t *pos, uint32_t value)
{
    do {
        if (*pos >= cap)
            return FP_ERR_SPACE;
        uint8_t byte = value & 0x7f;
        value >>= 7;
        out[(*pos)++] = byte | (value ? 0x80 : 0);
    } while (value);
    return 0;
}

/*
 * Runs payload: (gap, length) varint pairs for each run of set bits, where
 * gap counts clear bits since the previous run (or since bit 0).
 */
int64_t fp_bs_encode_runs(const uint64_t *words, uint32_t nbits, uint8_t *out, size_t cap)
{
    if (!valid_size(nbits))
        return FP_ERR_SIZE;
    size_t pos = 0;
    uint32_t prev_end = 0;
    int64_t run_start = scan_set(words, nbits, 0);
    while (run_start >= 0) {
        int64_t run_end = scan_clear(words, nbits, (uint32_t)run_start, nbits);
        if (run_end < 0)
            run_end = nbits;
        if (put_varint(out, cap, &pos, (uint32_t)run_start - prev_end) < 0 ||
            put_varint(out, cap, &pos, (uint32_t)(run_end - run_start)) < 0)
            return FP_ERR_SPACE;
        prev_end = (uint32_t)run_end;
        run_start = scan_set(words, nbits, prev_end);
    }
    return (int64_t)pos;
}

/* Read a varint of at most 4 bytes (values < 2^28 cover any bit count). */
static int get_varint(const uint8_t *in, size_t len, size_t *pos, uint32_t *value)
{
    uint32_t v = 0;
    for (int shift = 0; shift < 28; shift += 7) {
        if (*pos >= len)
            return FP_ERR_FORMAT;
        uint8_t byte = in[(*pos)++];
        v |= (uint32_t)(byte & 0x7f) << shift;
        if (!(byte & 0x80)) {
            *value = v;
            return 0;
        }
    }
    return FP_ERR_FORMAT;
}

int fp_bs_decode_runs(uint64_t *words, uint32_t nbits, const uint8_t *in, size_t len)
{
    if (!valid_size(nbits))
        return FP_ERR_SIZE;
    /* Validate fully before writing so a bad payload leaves words untouched. */
    for (int pass = 0; pass < 2; pass++) {
        size_t pos = 0;
        uint64_t bit = 0;
        while (pos < len) {
            uint32_t gap, run;
            if (get_varint(in, len, &pos, &gap) < 0 || get_varint(in, len, &pos, &run) < 0)
                return FP_ERR_FORMAT;
            /* Canonical form: runs are non-empty and separated by clear bits. */
            if (run == 0 || (gap == 0 && bit != 0) || bit + gap + run > nbits)
                return FP_ERR_FORMAT;
            bit += gap;
            if (pass == 1)
                fill_range(words, (uint32_t)bit, (uint32_t)(bit + run), 1);
            bit += run;
        }
        if (pass == 0) {
            for (uint32_t i = 0, n = nwords(nbits); i < n; i++)
                words[i] = 0;
        }
    }
    return 0;
}

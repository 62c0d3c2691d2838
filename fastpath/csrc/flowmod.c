/*
 * OpenFlow 1.3 OFPT_FLOW_MOD and ONF EXT-230 bundle encoding.
 *
 * Input is a batch of packed flow records (layout in the fastpath/flowmod.py
 * docstring); output is the wire messages back to back, laid out
 * exactly as os-ken's ofproto_v1_3_parser serialises the same flow:
 * OXM fields sorted by field number, experimenter OXMs (tcp_flags) last,
 * masked values pre-ANDed with their mask, instructions in the order
 * apply-actions, write-metadata, goto-table.
 *
 * A port range in a record expands into the minimal list of value/mask
 * matches; a record with both ranges yields their cartesian product
 * (source outer, destination inner), one flow-mod each.
 *
 * Writing goes through a bounded cursor: with a NULL buffer it only counts,
 * so the caller can size the buffer exactly, and it never stores past cap.
 */
#include <string.h>

#include "fastpath.h"

#define OFP_VERSION 0x04
#define OFPT_EXPERIMENTER 4
#define OFPT_FLOW_MOD 14
#define OFPFC_ADD 0
#define OFPFC_MODIFY_STRICT 2
#define OFPFC_DELETE_STRICT 4
#define OFPIT_GOTO_TABLE 1
#define OFPIT_WRITE_METADATA 2
#define OFPIT_APPLY_ACTIONS 4
#define OFPAT_OUTPUT 0
#define OFPAT_SET_FIELD 25
#define OFPMT_OXM 1
#define OFP_NO_BUFFER UINT32_C(0xffffffff)
#define OFPP_ANY UINT32_C(0xffffffff)
#define OFPG_ANY UINT32_C(0xffffffff)
#define OFPVID_PRESENT 0x1000
#define OFPXMC_OPENFLOW_BASIC 0x8000
#define OFPXMC_EXPERIMENTER 0xffff
#define ONF_EXPERIMENTER_ID UINT32_C(0x4f4e4600)
#define ONF_ET_BUNDLE_CONTROL 2300
#define ONF_ET_BUNDLE_ADD_MESSAGE 2301
#define ONF_OXM_TCP_FLAGS 42
#define BUNDLE_HEADER_SIZE 24 /* ofp_header + experimenter + exp_type + bundle fields */
#define MAX_PORT_MASKS 30     /* worst case for a 16-bit range, e.g. 1-65534 */
#define TABLE_MAX 254         /* 255 is OFPTT_ALL */

#define OXM_IN_PORT 0
#define OXM_METADATA 2
#define OXM_ETH_DST 3
#define OXM_ETH_SRC 4
#define OXM_ETH_TYPE 5
#define OXM_VLAN_VID 6
#define OXM_IP_PROTO 10
#define OXM_IPV4_SRC 11
#define OXM_IPV4_DST 12
#define OXM_TCP_SRC 13
#define OXM_UDP_SRC 15
#define OXM_SCTP_SRC 17
#define OXM_TUNNEL_ID 38

#define KNOWN_PRESENT_BITS 0xfff

/* ---- bounded big-endian writer ---------------------------------------- */

struct sink {
    uint8_t *buf; /* NULL: count only */
    size_t cap;
    size_t pos;
    int overflow;
};

static uint8_t *reserve(struct sink *s, size_t n)
{
    size_t at = s->pos;
    s->pos += n;
    if (s->buf == NULL)
        return NULL;
    if (s->pos > s->cap) {
        s->overflow = 1;
        return NULL;
    }
    return s->buf + at;
}

static void put_be(struct sink *s, uint64_t v, int nbytes)
{
    uint8_t *p = reserve(s, (size_t)nbytes);
    if (p == NULL)
        return;
    for (int i = nbytes - 1; i >= 0; i--) {
        p[i] = (uint8_t)v;
        v >>= 8;
    }
}

static void put_zeros(struct sink *s, size_t n)
{
    uint8_t *p = reserve(s, n);
    if (p != NULL)
        memset(p, 0, n);
}

/* Overwrite a 16-bit length field written earlier at `at`. */
static void patch_u16(struct sink *s, size_t at, size_t v)
{
    if (s->buf != NULL && !s->overflow && at + 2 <= s->cap) {
        s->buf[at] = (uint8_t)(v >> 8);
        s->buf[at + 1] = (uint8_t)v;
    }
}

static void pad8(struct sink *s, size_t start)
{
    size_t len = s->pos - start;
    put_zeros(s, (8 - len % 8) % 8);
}

/* ---- packed record access --------------------------------------------- */

struct record {
    uint64_t cookie, metadata, metadata_mask, write_metadata, write_metadata_mask;
    uint32_t in_port, ipv4_src, ipv4_dst, present;
    uint16_t priority, eth_type, vlan_vid, src_lo, src_hi, dst_lo, dst_hi;
    uint16_t tcp_flags, tcp_flags_mask, idle_timeout, hard_timeout, flags;
    uint8_t table_id, src_prefix, dst_prefix, ip_proto, goto_table, n_actions;
    const uint8_t *actions;
};

static uint64_t get_le(const uint8_t *p, int nbytes)
{
    uint64_t v = 0;
    for (int i = nbytes - 1; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

struct action {
    uint8_t kind, field;
    uint16_t max_len;
    uint32_t port;
    uint64_t value;
};

static struct action get_action(const uint8_t *p)
{
    struct action a;
    a.kind = p[0];
    a.field = p[1];
    a.max_len = (uint16_t)get_le(p + 2, 2);
    a.port = (uint32_t)get_le(p + 4, 4);
    a.value = get_le(p + 8, 8);
    return a;
}

/* OXM payload width of a settable field, or 0 if it cannot be set. */
static int set_field_width(uint8_t field)
{
    switch (field) {
    case OXM_ETH_DST:
    case OXM_ETH_SRC:
        return 6;
    case OXM_VLAN_VID:
        return 2;
    case OXM_IPV4_SRC:
    case OXM_IPV4_DST:
        return 4;
    case OXM_TUNNEL_ID:
        return 8;
    default:
        return 0;
    }
}

static int check_action(const struct action *a)
{
    if (a->kind == FP_ACT_OUTPUT)
        return a->field == 0 && a->value == 0 ? 0 : FP_ERR_RECORD;
    if (a->kind != FP_ACT_SET_FIELD || a->max_len != 0 || a->port != 0)
        return FP_ERR_RECORD;
    int width = set_field_width(a->field);
    if (width == 0)
        return FP_ERR_RECORD;
    uint64_t limit = a->field == OXM_VLAN_VID ? 0xfff : width == 8 ? UINT64_MAX : (UINT64_C(1) << (8 * width)) - 1;
    return a->value <= limit ? 0 : FP_ERR_RECORD;
}

static int l4_base(uint8_t ip_proto)
{
    switch (ip_proto) {
    case 6:
        return OXM_TCP_SRC;
    case 17:
        return OXM_UDP_SRC;
    case 132:
        return OXM_SCTP_SRC;
    default:
        return -1;
    }
}

/* Decode and validate the record at in[*pos]; advances *pos past it. */
static int parse_record(const uint8_t *in, size_t len, size_t *pos, struct record *r)
{
    if (len - *pos < FP_REC_HEADER_SIZE)
        return FP_ERR_RECORD;
    const uint8_t *p = in + *pos;
    r->cookie = get_le(p + 0, 8);
    r->metadata = get_le(p + 8, 8);
    r->metadata_mask = get_le(p + 16, 8);
    r->write_metadata = get_le(p + 24, 8);
    r->write_metadata_mask = get_le(p + 32, 8);
    r->in_port = (uint32_t)get_le(p + 40, 4);
    r->ipv4_src = (uint32_t)get_le(p + 44, 4);
    r->ipv4_dst = (uint32_t)get_le(p + 48, 4);
    r->present = (uint32_t)get_le(p + 52, 4);
    r->priority = (uint16_t)get_le(p + 56, 2);
    r->eth_type = (uint16_t)get_le(p + 58, 2);
    r->vlan_vid = (uint16_t)get_le(p + 60, 2);
    r->src_lo = (uint16_t)get_le(p + 62, 2);
    r->src_hi = (uint16_t)get_le(p + 64, 2);
    r->dst_lo = (uint16_t)get_le(p + 66, 2);
    r->dst_hi = (uint16_t)get_le(p + 68, 2);
    r->tcp_flags = (uint16_t)get_le(p + 70, 2);
    r->tcp_flags_mask = (uint16_t)get_le(p + 72, 2);
    r->idle_timeout = (uint16_t)get_le(p + 74, 2);
    r->hard_timeout = (uint16_t)get_le(p + 76, 2);
    r->flags = (uint16_t)get_le(p + 78, 2);
    r->table_id = p[80];
    r->src_prefix = p[81];
    r->dst_prefix = p[82];
    r->ip_proto = p[83];
    r->goto_table = p[84];
    r->n_actions = p[85];
    uint16_t reserved = (uint16_t)get_le(p + 86, 2);

    if ((r->present & ~(uint32_t)KNOWN_PRESENT_BITS) || reserved != 0)
        return FP_ERR_RECORD;
    if (r->n_actions > FP_REC_MAX_ACTIONS)
        return FP_ERR_RECORD;
    size_t actions_len = (size_t)r->n_actions * FP_REC_ACTION_SIZE;
    if (len - *pos - FP_REC_HEADER_SIZE < actions_len)
        return FP_ERR_RECORD;
    if (r->table_id > TABLE_MAX)
        return FP_ERR_RECORD;
    if ((r->present & FP_HAS_GOTO) && (r->goto_table <= r->table_id || r->goto_table > TABLE_MAX))
        return FP_ERR_RECORD;
    if ((r->present & FP_HAS_VLAN) && r->vlan_vid > 0xfff)
        return FP_ERR_RECORD;
    if (((r->present & FP_HAS_IPV4_SRC) && r->src_prefix > 32) ||
        ((r->present & FP_HAS_IPV4_DST) && r->dst_prefix > 32))
        return FP_ERR_PREFIX;
    if (((r->present & FP_HAS_TP_SRC) && r->src_lo > r->src_hi) ||
        ((r->present & FP_HAS_TP_DST) && r->dst_lo > r->dst_hi))
        return FP_ERR_ORDER;
    if ((r->present & (FP_HAS_TP_SRC | FP_HAS_TP_DST)) &&
        (!(r->present & FP_HAS_IP_PROTO) || l4_base(r->ip_proto) < 0))
        return FP_ERR_RECORD;
    r->actions = p + FP_REC_HEADER_SIZE;
    for (unsigned i = 0; i < r->n_actions; i++) {
        struct action a = get_action(r->actions + i * FP_REC_ACTION_SIZE);
        if (check_action(&a) < 0)
            return FP_ERR_RECORD;
    }
    *pos += FP_REC_HEADER_SIZE + actions_len;
    return 0;
}

/* ---- port ranges ------------------------------------------------------ */

/* Minimal aligned blocks covering [lo, hi]; returns the count written. */
static int port_masks(uint32_t lo, uint32_t hi, uint16_t *values, uint16_t *masks)
{
    int n = 0;
    for (;;) {
        /* Largest power-of-two block aligned at lo that stays within hi. */
        uint32_t size = lo == 0 ? 0x10000 : lo & (~lo + 1);
        while (size > hi - lo + 1)
            size >>= 1;
        values[n] = (uint16_t)lo;
        masks[n] = (uint16_t)~(size - 1);
        n++;
        if (lo + size > hi)
            return n;
        lo += size;
    }
}

int fp_of_port_masks(int64_t lo, int64_t hi, uint16_t *values, uint16_t *masks, size_t cap)
{
    if (lo < 0 || hi > 0xffff || lo > 0xffff || hi < 0)
        return FP_ERR_PORT;
    if (lo > hi)
        return FP_ERR_ORDER;
    if (cap < MAX_PORT_MASKS)
        return FP_ERR_SPACE;
    return port_masks((uint32_t)lo, (uint32_t)hi, values, masks);
}

/* ---- OXM match -------------------------------------------------------- */

static void oxm_header(struct sink *s, uint32_t cls, uint32_t field, int hasmask, uint32_t len)
{
    put_be(s, (cls << 16) | (field << 9) | ((uint32_t)hasmask << 8) | len, 4);
}

/*
 * Basic OXM with os-ken's normalisation: a zero mask omits the field,
 * a full mask emits it unmasked, anything else is value & mask + mask.
 */
static void oxm_masked(struct sink *s, uint32_t field, int width, uint64_t value, uint64_t mask)
{
    uint64_t full = width == 8 ? UINT64_MAX : (UINT64_C(1) << (8 * width)) - 1;
    if (mask == 0)
        return;
    if (mask == full) {
        oxm_header(s, OFPXMC_OPENFLOW_BASIC, field, 0, (uint32_t)width);
        put_be(s, value, width);
        return;
    }
    oxm_header(s, OFPXMC_OPENFLOW_BASIC, field, 1, (uint32_t)(2 * width));
    put_be(s, value & mask, width);
    put_be(s, mask, width);
}

static void oxm_exact(struct sink *s, uint32_t field, int width, uint64_t value)
{
    oxm_header(s, OFPXMC_OPENFLOW_BASIC, field, 0, (uint32_t)width);
    put_be(s, value, width);
}

static uint64_t prefix_mask(uint8_t prefix)
{
    return prefix == 0 ? 0 : (UINT32_MAX << (32 - prefix)) & UINT32_MAX;
}

static void put_match(struct sink *s, const struct record *r, int src_i, const uint16_t *sv,
                      const uint16_t *sm, int dst_i, const uint16_t *dv, const uint16_t *dm)
{
    size_t start = s->pos;
    put_be(s, OFPMT_OXM, 2);
    put_be(s, 0, 2); /* length, patched below */
    if (r->present & FP_HAS_IN_PORT)
        oxm_exact(s, OXM_IN_PORT, 4, r->in_port);
    if (r->present & FP_HAS_METADATA)
        oxm_masked(s, OXM_METADATA, 8, r->metadata, r->metadata_mask);
    if (r->present & FP_HAS_ETH_TYPE)
        oxm_exact(s, OXM_ETH_TYPE, 2, r->eth_type);
    if (r->present & FP_HAS_VLAN)
        oxm_exact(s, OXM_VLAN_VID, 2, OFPVID_PRESENT | r->vlan_vid);
    if (r->present & FP_HAS_IP_PROTO)
        oxm_exact(s, OXM_IP_PROTO, 1, r->ip_proto);
    if (r->present & FP_HAS_IPV4_SRC)
        oxm_masked(s, OXM_IPV4_SRC, 4, r->ipv4_src, prefix_mask(r->src_prefix));
    if (r->present & FP_HAS_IPV4_DST)
        oxm_masked(s, OXM_IPV4_DST, 4, r->ipv4_dst, prefix_mask(r->dst_prefix));
    if (src_i >= 0)
        oxm_masked(s, (uint32_t)l4_base(r->ip_proto), 2, sv[src_i], sm[src_i]);
    if (dst_i >= 0)
        oxm_masked(s, (uint32_t)l4_base(r->ip_proto) + 1, 2, dv[dst_i], dm[dst_i]);
    if ((r->present & FP_HAS_TCP_FLAGS) && r->tcp_flags_mask != 0) {
        int masked = r->tcp_flags_mask != 0xffff;
        oxm_header(s, OFPXMC_EXPERIMENTER, ONF_OXM_TCP_FLAGS, masked, masked ? 8 : 6);
        put_be(s, ONF_EXPERIMENTER_ID, 4);
        put_be(s, r->tcp_flags & r->tcp_flags_mask, 2);
        if (masked)
            put_be(s, r->tcp_flags_mask, 2);
    }
    patch_u16(s, start + 2, s->pos - start);
    pad8(s, start);
}

/* ---- instructions ----------------------------------------------------- */

static void put_actions(struct sink *s, const struct record *r)
{
    size_t start = s->pos;
    put_be(s, OFPIT_APPLY_ACTIONS, 2);
    put_be(s, 0, 2); /* length, patched below */
    put_zeros(s, 4);
    for (unsigned i = 0; i < r->n_actions; i++) {
        struct action a = get_action(r->actions + i * FP_REC_ACTION_SIZE);
        if (a.kind == FP_ACT_OUTPUT) {
            put_be(s, OFPAT_OUTPUT, 2);
            put_be(s, 16, 2);
            put_be(s, a.port, 4);
            put_be(s, a.max_len, 2);
            put_zeros(s, 6);
        } else {
            size_t at = s->pos;
            int width = set_field_width(a.field);
            uint64_t value = a.field == OXM_VLAN_VID ? (OFPVID_PRESENT | a.value) : a.value;
            size_t len = (4 + 4 + (size_t)width + 7) / 8 * 8;
            put_be(s, OFPAT_SET_FIELD, 2);
            put_be(s, len, 2);
            oxm_exact(s, a.field, width, value);
            pad8(s, at);
        }
    }
    patch_u16(s, start + 2, s->pos - start);
}

static void put_instructions(struct sink *s, const struct record *r)
{
    if (r->n_actions > 0)
        put_actions(s, r);
    if (r->present & FP_HAS_WRITE_METADATA) {
        put_be(s, OFPIT_WRITE_METADATA, 2);
        put_be(s, 24, 2);
        put_zeros(s, 4);
        put_be(s, r->write_metadata, 8);
        put_be(s, r->write_metadata_mask, 8);
    }
    if (r->present & FP_HAS_GOTO) {
        put_be(s, OFPIT_GOTO_TABLE, 2);
        put_be(s, 8, 2);
        put_be(s, r->goto_table, 1);
        put_zeros(s, 3);
    }
}

/* ---- messages --------------------------------------------------------- */

struct batch {
    int command;
    uint32_t xid;
    int64_t bundle_id; /* < 0: bare flow-mods */
    uint16_t bundle_flags;
    uint32_t count;
};

static void put_ofp_header(struct sink *s, uint8_t type, uint32_t xid)
{
    put_be(s, OFP_VERSION, 1);
    put_be(s, type, 1);
    put_be(s, 0, 2); /* length, patched by the caller */
    put_be(s, xid, 4);
}

static void put_flow_mod(struct sink *s, struct batch *b, const struct record *r, int src_i,
                         const uint16_t *sv, const uint16_t *sm, int dst_i, const uint16_t *dv,
                         const uint16_t *dm)
{
    uint32_t xid = b->xid + b->count++; /* wraps modulo 2^32 by design */
    size_t outer = s->pos;
    if (b->bundle_id >= 0) {
        /* The inner message carries the outer xid (EXT-230 section 3.3). */
        put_ofp_header(s, OFPT_EXPERIMENTER, xid);
        put_be(s, ONF_EXPERIMENTER_ID, 4);
        put_be(s, ONF_ET_BUNDLE_ADD_MESSAGE, 4);
        put_be(s, (uint64_t)b->bundle_id, 4);
        put_zeros(s, 2);
        put_be(s, b->bundle_flags, 2);
    }
    size_t start = s->pos;
    put_ofp_header(s, OFPT_FLOW_MOD, xid);
    put_be(s, r->cookie, 8);
    put_be(s, 0, 8); /* cookie_mask: strict commands match on match+priority */
    put_be(s, r->table_id, 1);
    put_be(s, (uint64_t)b->command, 1);
    put_be(s, r->idle_timeout, 2);
    put_be(s, r->hard_timeout, 2);
    put_be(s, r->priority, 2);
    put_be(s, OFP_NO_BUFFER, 4);
    put_be(s, OFPP_ANY, 4);
    put_be(s, OFPG_ANY, 4);
    put_be(s, r->flags, 2);
    put_zeros(s, 2);
    put_match(s, r, src_i, sv, sm, dst_i, dv, dm);
    /* The switch ignores instructions on deletes, so they are not sent. */
    if (b->command != OFPFC_DELETE_STRICT)
        put_instructions(s, r);
    patch_u16(s, start + 2, s->pos - start);
    if (b->bundle_id >= 0)
        patch_u16(s, outer + 2, s->pos - outer);
}

static void put_record(struct sink *s, struct batch *b, const struct record *r)
{
    uint16_t sv[MAX_PORT_MASKS], sm[MAX_PORT_MASKS], dv[MAX_PORT_MASKS], dm[MAX_PORT_MASKS];
    int ns = 1, nd = 1;
    int has_src = (r->present & FP_HAS_TP_SRC) != 0;
    int has_dst = (r->present & FP_HAS_TP_DST) != 0;
    if (has_src)
        ns = port_masks(r->src_lo, r->src_hi, sv, sm);
    if (has_dst)
        nd = port_masks(r->dst_lo, r->dst_hi, dv, dm);
    for (int i = 0; i < ns; i++)
        for (int j = 0; j < nd; j++)
            put_flow_mod(s, b, r, has_src ? i : -1, sv, sm, has_dst ? j : -1, dv, dm);
}

int64_t fp_of_encode(const uint8_t *records, size_t len, int64_t command, int64_t xid,
                     int64_t bundle_id, int64_t bundle_flags,
                     uint8_t *out, size_t cap, uint32_t *count)
{
    if (command != OFPFC_ADD && command != OFPFC_MODIFY_STRICT && command != OFPFC_DELETE_STRICT)
        return FP_ERR_COMMAND;
    if (xid < 0 || xid > UINT32_MAX || bundle_id > UINT32_MAX || bundle_flags < 0 ||
        bundle_flags > 0xffff)
        return FP_ERR_ARG;
    struct batch b = {(int)command, (uint32_t)xid, bundle_id < 0 ? -1 : bundle_id,
                      (uint16_t)bundle_flags, 0};
    struct sink s = {out, out == NULL ? 0 : cap, 0, 0};
    size_t pos = 0;
    uint32_t index = 0;
    while (pos < len) {
        struct record r;
        int rc = parse_record(records, len, &pos, &r);
        if (rc < 0) {
            *count = index; /* tells the caller which record was rejected */
            return rc;
        }
        put_record(&s, &b, &r);
        if (s.overflow)
            return FP_ERR_SPACE;
        index++;
    }
    *count = b.count;
    return (int64_t)s.pos;
}

int64_t fp_of_bundle_ctrl(int64_t xid, int64_t bundle_id, int64_t type, int64_t flags,
                          uint8_t *out, size_t cap)
{
    if (xid < 0 || xid > UINT32_MAX || bundle_id < 0 || bundle_id > UINT32_MAX || type < 0 ||
        type > 0xffff || flags < 0 || flags > 0xffff)
        return FP_ERR_ARG;
    struct sink s = {out, cap, 0, 0};
    put_ofp_header(&s, OFPT_EXPERIMENTER, (uint32_t)xid);
    put_be(&s, ONF_EXPERIMENTER_ID, 4);
    put_be(&s, ONF_ET_BUNDLE_CONTROL, 4);
    put_be(&s, (uint64_t)bundle_id, 4);
    put_be(&s, (uint64_t)type, 2);
    put_be(&s, (uint64_t)flags, 2);
    if (s.overflow || out == NULL)
        return FP_ERR_SPACE;
    patch_u16(&s, 2, s.pos);
    return (int64_t)s.pos;
}

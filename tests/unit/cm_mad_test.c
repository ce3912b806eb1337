/* cm_mad_test.c: the CM MAD codec (src/cm/mad.c) against byte layouts
 * written here from the IBTA tables, independently of the encoder: each
 * message is a table of (field, Byte[Bit] offset, width) as IBA Vol 1
 * 12.6 gives them (offsets from the end of the 24-byte MAD header; bit 0
 * is a byte's most significant bit, a field wider than its first byte
 * continues big-endian). For each message the expected 256 bytes are
 * built from the table, then encode must produce them and decode must give
 * every field back: once with a pattern in every field, once with every
 * field all ones, and once per field with that field alone all ones (so
 * that a field bleeding into its neighbour shows). Then the MADs decode
 * must refuse, and the RDMA IP CM header of Annex A11.2.1. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "scm_mad.h"
#include "sr_err.h"
#include "sr_test.h"

/* One field of a message table: where the spec puts it and where struct
 * scm_mad keeps it. */
struct fld {
    const char *name;
    uint16_t byte;
    uint8_t bit, width;
    size_t moff;
    uint8_t msize;
};
#define F(nm, by, bi, wi, member)                                                                  \
    {                                                                                              \
        nm, by, bi, wi, offsetof(struct scm_mad, member), sizeof(((struct scm_mad *)0)->member)    \
    }

struct msg {
    const char *name;
    uint16_t attr;
    const struct fld *f;
    size_t n;
    uint16_t priv_off, priv_len;
};

/* IBA Vol 1 12.6.5, REQ Message Contents (Table 99 in release 1.2.1, 106
 * in 1.3 and later) */
static const struct fld req_f[] = {
    F("Local Communication ID", 0, 0, 32, local_comm_id),
    F("ServiceID", 8, 0, 64, service_id),
    F("Local CA GUID", 16, 0, 64, ca_guid),
    F("Local Q_Key", 28, 0, 32, qkey),
    F("Local QPN", 32, 0, 24, qpn),
    F("Responder Resources", 35, 0, 8, resp_res),
    F("Initiator Depth", 39, 0, 8, init_depth),
    F("Remote CM Response Timeout", 43, 0, 5, remote_cm_timeout),
    F("Transport Service Type", 43, 5, 2, transport),
    F("End-to-End Flow Control", 43, 7, 1, flow_ctl),
    F("Starting PSN", 44, 0, 24, starting_psn),
    F("Local CM Response Timeout", 47, 0, 5, local_cm_timeout),
    F("Retry Count", 47, 5, 3, retry_cnt),
    F("Partition Key", 48, 0, 16, pkey),
    F("Path Packet Payload MTU", 50, 0, 4, mtu),
    F("RNR Retry Count", 50, 5, 3, rnr_retry),
    F("Max CM Retries", 51, 0, 4, max_cm_retries),
    F("SRQ", 51, 4, 1, srq),
    F("Primary Local Port LID", 52, 0, 16, local_lid),
    F("Primary Remote Port LID", 54, 0, 16, remote_lid),
    F("Primary Flow Label", 88, 0, 20, flow_label),
    F("Primary Packet Rate", 91, 2, 6, packet_rate),
    F("Primary Traffic Class", 92, 0, 8, traffic_class),
    F("Primary Hop Limit", 93, 0, 8, hop_limit),
    F("Primary SL", 94, 0, 4, sl),
    F("Primary Subnet Local", 94, 4, 1, subnet_local),
    F("Primary Local ACK Timeout", 95, 0, 5, ack_timeout),
};
/* 12.6.6, MRA */
static const struct fld mra_f[] = {
    F("Local Communication ID", 0, 0, 32, local_comm_id),
    F("Remote Communication ID", 4, 0, 32, remote_comm_id),
    F("Message MRAed", 8, 0, 2, msg_kind),
    F("Service Timeout", 9, 0, 5, service_timeout),
};
/* 12.6.7, REJ (its ARI: below) */
static const struct fld rej_f[] = {
    F("Local Communication ID", 0, 0, 32, local_comm_id),
    F("Remote Communication ID", 4, 0, 32, remote_comm_id),
    F("Message Rejected", 8, 0, 2, msg_kind),
    F("Reject Reason", 10, 0, 16, reason),
};
/* 12.6.8, REP */
static const struct fld rep_f[] = {
    F("Local Communication ID", 0, 0, 32, local_comm_id),
    F("Remote Communication ID", 4, 0, 32, remote_comm_id),
    F("Local Q_Key", 8, 0, 32, qkey),
    F("Local QPN", 12, 0, 24, qpn),
    F("Starting PSN", 20, 0, 24, starting_psn),
    F("Responder Resources", 24, 0, 8, resp_res),
    F("Initiator Depth", 25, 0, 8, init_depth),
    F("Target ACK Delay", 26, 0, 5, target_ack_delay),
    F("Failover Accepted", 26, 5, 2, failover),
    F("End-to-End Flow Control", 26, 7, 1, flow_ctl),
    F("RNR Retry Count", 27, 0, 3, rnr_retry),
    F("SRQ", 27, 3, 1, srq),
    F("Local CA GUID", 28, 0, 64, ca_guid),
};
/* 12.6.9 RTU, 12.6.11 DREP */
static const struct fld rtu_f[] = {
    F("Local Communication ID", 0, 0, 32, local_comm_id),
    F("Remote Communication ID", 4, 0, 32, remote_comm_id),
};
/* 12.6.10, DREQ */
static const struct fld dreq_f[] = {
    F("Local Communication ID", 0, 0, 32, local_comm_id),
    F("Remote Communication ID", 4, 0, 32, remote_comm_id),
    F("Remote QPN/EECN", 8, 0, 24, qpn),
};
/* 12.11.1, SIDR_REQ */
static const struct fld sidr_req_f[] = {
    F("RequestID", 0, 0, 32, local_comm_id),
    F("Partition Key", 4, 0, 16, pkey),
    F("ServiceID", 8, 0, 64, service_id),
};
/* 12.11.2, SIDR_REP (its additional information: below) */
static const struct fld sidr_rep_f[] = {
    F("RequestID", 0, 0, 32, local_comm_id), F("Status", 4, 0, 8, status), F("QPN", 8, 0, 24, qpn),
    F("ServiceID", 12, 0, 64, service_id),   F("Q_Key", 20, 0, 32, qkey),
};

#define N(a) (sizeof(a) / sizeof((a)[0]))
static const struct msg msgs[] = {
    {"REQ", 0x0010, req_f, N(req_f), 140, 92},
    {"MRA", 0x0011, mra_f, N(mra_f), 10, 222},
    {"REJ", 0x0012, rej_f, N(rej_f), 84, 148},
    {"REP", 0x0013, rep_f, N(rep_f), 36, 196},
    {"RTU", 0x0014, rtu_f, N(rtu_f), 8, 224},
    {"DREQ", 0x0015, dreq_f, N(dreq_f), 12, 220},
    {"DREP", 0x0016, rtu_f, N(rtu_f), 8, 224},
    {"SIDR_REQ", 0x0017, sidr_req_f, N(sidr_req_f), 16, 216},
    {"SIDR_REP", 0x0018, sidr_rep_f, N(sidr_rep_f), 96, 136},
};

/* Write value into a Byte[Bit] field: bit 0 is the MSB of buf[byte]. */
static void put_bits(uint8_t *buf, unsigned byte, unsigned bit, unsigned width, uint64_t v)
{
    for (unsigned i = 0; i < width; i++) {
        unsigned pos = byte * 8 + bit + i; /* i-th bit of the field, MSB first */
        unsigned b = (v >> (width - 1 - i)) & 1;
        uint8_t mask = (uint8_t)(0x80 >> (pos % 8));
        if (b)
            buf[pos / 8] |= mask;
        else
            buf[pos / 8] &= (uint8_t)~mask;
    }
}

static uint64_t get_member(const struct scm_mad *m, const struct fld *f)
{
    const uint8_t *p = (const uint8_t *)m + f->moff;
    switch (f->msize) {
    case 1:
        return *p;
    case 2: {
        uint16_t v;
        memcpy(&v, p, 2);
        return v;
    }
    case 4: {
        uint32_t v;
        memcpy(&v, p, 4);
        return v;
    }
    default: {
        uint64_t v;
        memcpy(&v, p, 8);
        return v;
    }
    }
}

static void set_member(struct scm_mad *m, const struct fld *f, uint64_t v)
{
    uint8_t *p = (uint8_t *)m + f->moff;
    switch (f->msize) {
    case 1:
        *p = (uint8_t)v;
        break;
    case 2: {
        uint16_t x = (uint16_t)v;
        memcpy(p, &x, 2);
        break;
    }
    case 4: {
        uint32_t x = (uint32_t)v;
        memcpy(p, &x, 4);
        break;
    }
    default:
        memcpy(p, &v, 8);
    }
}

static uint64_t mask_of(unsigned width)
{
    return width >= 64 ? ~0ull : (1ull << width) - 1;
}

enum fill { FILL_PATTERN, FILL_ONES, FILL_ONE_FIELD };

/* Build message mt both ways: as the struct to encode and as the bytes the
 * spec says it is. only: the field set alone in FILL_ONE_FIELD. */
static void build(const struct msg *mt, enum fill fill, size_t only, struct scm_mad *m,
                  uint8_t want[SCM_MAD_LEN])
{
    memset(m, 0, sizeof(*m));
    memset(want, 0, SCM_MAD_LEN);
    m->attr_id = mt->attr;
    m->tid = 0x0123456789abcdefull;
    /* IBA 13.4.2, Table 145 (common MAD header): BaseVersion, MgmtClass,
     * ClassVersion, R|Method, Status, ClassSpecific, TransactionID,
     * AttributeID, Reserved, AttributeModifier */
    want[0] = 1;
    want[1] = 0x07;
    want[2] = 2;
    want[3] = 0x03;
    put_bits(want, 8, 0, 64, m->tid);
    put_bits(want, 16, 0, 16, mt->attr);
    uint8_t *d = want + 24;
    for (size_t i = 0; i < mt->n; i++) {
        const struct fld *f = &mt->f[i];
        uint64_t v;
        if (fill == FILL_ONES)
            v = mask_of(f->width);
        else if (fill == FILL_ONE_FIELD)
            v = i == only ? mask_of(f->width) : 0;
        else
            v = (0x9e3779b97f4a7c15ull * (i + 1)) & mask_of(f->width);
        set_member(m, f, v);
        put_bits(d, f->byte, f->bit, f->width, v);
    }
    if (fill == FILL_ONE_FIELD)
        return;
    uint8_t fillb = fill == FILL_ONES ? 0xff : 0;
    if (mt->attr == SCM_ATTR_REQ) { /* Primary Local/Remote Port GID: 56, 72 */
        for (int i = 0; i < 16; i++) {
            m->local_gid[i] = fillb ? fillb : (uint8_t)(0x10 + i);
            m->remote_gid[i] = fillb ? fillb : (uint8_t)(0x30 + i);
        }
        memcpy(d + 56, m->local_gid, 16);
        memcpy(d + 72, m->remote_gid, 16);
    }
    if (mt->attr == SCM_ATTR_REJ) { /* ARI Length 9[0..6], ARI at 12 (72 bytes) */
        m->ari_len = fill == FILL_ONES ? 72 : 9;
        for (int i = 0; i < m->ari_len; i++)
            m->ari[i] = fillb ? fillb : (uint8_t)(0xa0 + i);
        put_bits(d, 9, 0, 7, m->ari_len);
        memcpy(d + 12, m->ari, m->ari_len);
    }
    if (mt->attr == SCM_ATTR_SIDR_REP) { /* Additional Information Length 5, at 24 */
        m->ari_len = fill == FILL_ONES ? 72 : 5;
        for (int i = 0; i < m->ari_len; i++)
            m->ari[i] = fillb ? fillb : (uint8_t)(0xc0 + i);
        put_bits(d, 5, 0, 8, m->ari_len);
        memcpy(d + 24, m->ari, m->ari_len);
    }
    m->priv_len = (uint8_t)mt->priv_len;
    for (int i = 0; i < mt->priv_len; i++)
        m->priv[i] = fillb ? fillb : (uint8_t)(i * 7 + 1);
    memcpy(d + mt->priv_off, m->priv, mt->priv_len);
}

static void check_one(const struct msg *mt, enum fill fill, size_t only)
{
    struct scm_mad m, got;
    uint8_t want[SCM_MAD_LEN], enc[SCM_MAD_LEN];
    build(mt, fill, only, &m, want);
    memset(enc, 0x5a, sizeof(enc));
    SR_CHECK_EQ(scm_mad_encode(&m, enc), 0);
    SR_CHECK_MEM(enc, want, SCM_MAD_LEN); /* MAD data byte = byte - 24 */
    SR_CHECK_EQ(scm_mad_decode(want, SCM_MAD_LEN, &got), 0);
    SR_CHECK_EQ(got.attr_id, mt->attr);
    SR_CHECK_EQ(got.tid, m.tid);
    SR_CHECK_EQ(got.method, SCM_METHOD_SEND);
    for (size_t i = 0; i < mt->n; i++) {
        const struct fld *f = &mt->f[i];
        const char *outer = sr_test_ctx;
        char ctx[128];
        snprintf(ctx, sizeof(ctx), "%s: decode %s", outer, f->name);
        sr_test_ctx = ctx;
        SR_CHECK_EQ(get_member(&got, f), get_member(&m, f));
        sr_test_ctx = outer;
    }
    if (fill == FILL_ONE_FIELD)
        return;
    SR_CHECK_EQ(got.priv_len, mt->priv_len);
    SR_CHECK_MEM(got.priv, m.priv, mt->priv_len);
    SR_CHECK_EQ(got.ari_len, m.ari_len);
    SR_CHECK_MEM(got.ari, m.ari, m.ari_len);
    SR_CHECK_MEM(got.local_gid, m.local_gid, 16);
    SR_CHECK_MEM(got.remote_gid, m.remote_gid, 16);
    SR_CHECK_EQ(scm_mad_priv_len(mt->attr), mt->priv_len);
}

static void test_messages(void)
{
    char ctx[96];
    for (size_t k = 0; k < N(msgs); k++) {
        snprintf(ctx, sizeof(ctx), "%s pattern", msgs[k].name);
        sr_test_ctx = ctx;
        check_one(&msgs[k], FILL_PATTERN, 0);
        snprintf(ctx, sizeof(ctx), "%s all ones", msgs[k].name);
        check_one(&msgs[k], FILL_ONES, 0);
        for (size_t i = 0; i < msgs[k].n; i++) {
            snprintf(ctx, sizeof(ctx), "%s %s alone", msgs[k].name, msgs[k].f[i].name);
            check_one(&msgs[k], FILL_ONE_FIELD, i);
        }
        /* a message's private data has a fixed size: one byte more is refused */
        struct scm_mad m = {.attr_id = msgs[k].attr};
        uint8_t out[SCM_MAD_LEN];
        m.priv_len = (uint8_t)(msgs[k].priv_len + 1);
        if (msgs[k].priv_len < 224) {
            snprintf(ctx, sizeof(ctx), "%s private data too long", msgs[k].name);
            SR_CHECK_EQ(scm_mad_encode(&m, out), SR_ERR_NOSPACE);
        }
    }
    sr_test_ctx = "";
}

/* A valid RTU to corrupt. */
static void good_rtu(uint8_t b[SCM_MAD_LEN])
{
    memset(b, 0, SCM_MAD_LEN);
    b[0] = 1, b[1] = 0x07, b[2] = 2, b[3] = 0x03;
    b[17] = 0x14;
}

static void test_rejects(void)
{
    uint8_t b[SCM_MAD_LEN + 8];
    struct scm_mad m;
    sr_test_ctx = "rejects";
    good_rtu(b);
    SR_CHECK_EQ(scm_mad_decode(b, SCM_MAD_LEN, &m), 0);
    static const size_t short_lens[] = {0, 1, 23, 24, 32, 255};
    for (size_t i = 0; i < N(short_lens); i++)
        SR_CHECK_EQ(scm_mad_decode(b, short_lens[i], &m), SR_ERR_WIRE_SHORT);
    SR_CHECK_EQ(scm_mad_decode(b, SCM_MAD_LEN + 1, &m), SR_ERR_RANGE);
    SR_CHECK_EQ(scm_mad_decode(b, SCM_MAD_LEN + 8, &m), SR_ERR_RANGE);
    /* byte, bad value: base version, management class, class version, method */
    static const struct {
        int byte;
        uint8_t v;
    } bad[] = {
        {0, 0}, {0, 2}, {0, 0xff}, {1, 0x01}, {1, 0x03}, {1, 0x04}, {1, 0x81}, {1, 0x09}, {2, 0},
        {2, 1}, {2, 3}, {3, 0x01}, {3, 0x02}, {3, 0x81}, {3, 0x83}, {3, 0x07}, {3, 0x13},
    };
    for (size_t i = 0; i < N(bad); i++) {
        good_rtu(b);
        b[bad[i].byte] = bad[i].v;
        char ctx[64];
        snprintf(ctx, sizeof(ctx), "rejects byte %d = 0x%02x", bad[i].byte, bad[i].v);
        sr_test_ctx = ctx;
        SR_CHECK_EQ(scm_mad_decode(b, SCM_MAD_LEN, &m), SR_ERR_WIRE_FIELD);
        sr_test_ctx = "rejects";
    }
    /* attributes the CM does not speak (LAP/APR: no alternate paths on RoCE) */
    static const uint16_t attrs[] = {0x0000, 0x0002, 0x000f, 0x0019, 0x001a,
                                     0x001b, 0x00ff, 0x1014, 0xff14, 0xffff};
    for (size_t i = 0; i < N(attrs); i++) {
        good_rtu(b);
        b[16] = (uint8_t)(attrs[i] >> 8), b[17] = (uint8_t)attrs[i];
        SR_CHECK_EQ(scm_mad_decode(b, SCM_MAD_LEN, &m), SR_ERR_WIRE_OPCODE);
    }
    /* REJ: ARI Length is 7 bits, the ARI field 72 bytes */
    good_rtu(b);
    b[17] = 0x12;
    b[24 + 9] = 72 << 1;
    SR_CHECK_EQ(scm_mad_decode(b, SCM_MAD_LEN, &m), 0);
    b[24 + 9] = 73 << 1;
    SR_CHECK_EQ(scm_mad_decode(b, SCM_MAD_LEN, &m), SR_ERR_WIRE_FIELD);
    b[24 + 9] = 0xfe;
    SR_CHECK_EQ(scm_mad_decode(b, SCM_MAD_LEN, &m), SR_ERR_WIRE_FIELD);
    /* SIDR_REP: an 8-bit length for the same 72 bytes */
    good_rtu(b);
    b[17] = 0x18;
    b[24 + 5] = 73;
    SR_CHECK_EQ(scm_mad_decode(b, SCM_MAD_LEN, &m), SR_ERR_WIRE_FIELD);
    b[24 + 5] = 0xff;
    SR_CHECK_EQ(scm_mad_decode(b, SCM_MAD_LEN, &m), SR_ERR_WIRE_FIELD);
    /* encode refuses what it cannot say */
    struct scm_mad e = {.attr_id = 0x0019};
    SR_CHECK_EQ(scm_mad_encode(&e, b), SR_ERR_INVAL);
    e = (struct scm_mad){.attr_id = SCM_ATTR_REJ, .ari_len = 73};
    SR_CHECK_EQ(scm_mad_encode(&e, b), SR_ERR_NOSPACE);
    e = (struct scm_mad){.attr_id = SCM_ATTR_CLASS_PORT_INFO, .method = SCM_METHOD_SEND};
    SR_CHECK_EQ(scm_mad_encode(&e, b), SR_ERR_INVAL);
    sr_test_ctx = "";
}

/* IBA 13.4.8.1: Get(ClassPortInfo) and its GetResp, the CM's liveness probe */
static void test_class_port_info(void)
{
    sr_test_ctx = "ClassPortInfo";
    uint8_t want[SCM_MAD_LEN] = {1, 0x07, 2, 0x01}, enc[SCM_MAD_LEN];
    put_bits(want, 8, 0, 64, 0xfeedfacecafebeefull);
    put_bits(want, 16, 0, 16, 0x0001);
    struct scm_mad m = {.attr_id = SCM_ATTR_CLASS_PORT_INFO,
                        .method = SCM_METHOD_GET,
                        .tid = 0xfeedfacecafebeefull};
    SR_CHECK_EQ(scm_mad_encode(&m, enc), 0);
    SR_CHECK_MEM(enc, want, SCM_MAD_LEN);
    struct scm_mad got;
    SR_CHECK_EQ(scm_mad_decode(want, SCM_MAD_LEN, &got), 0);
    SR_CHECK_EQ(got.method, SCM_METHOD_GET);
    SR_CHECK_EQ(got.tid, 0xfeedfacecafebeefull);
    /* GetResp: BaseVersion 1, ClassVersion 2 at data bytes 0 and 1,
     * RespTimeValue the low 5 bits of the word at 4 (Table 147) */
    want[3] = 0x81;
    want[24] = 1;
    want[25] = 2;
    put_bits(want + 24, 4, 27, 5, 20);
    m.method = SCM_METHOD_GET_RESP;
    m.resp_time = 20;
    SR_CHECK_EQ(scm_mad_encode(&m, enc), 0);
    SR_CHECK_MEM(enc, want, SCM_MAD_LEN);
    SR_CHECK_EQ(scm_mad_decode(want, SCM_MAD_LEN, &got), 0);
    SR_CHECK_EQ(got.method, SCM_METHOD_GET_RESP);
    SR_CHECK_EQ(got.resp_time, 20);
    want[3] = 0x03; /* ClassPortInfo is not sent with Send */
    SR_CHECK_EQ(scm_mad_decode(want, SCM_MAD_LEN, &got), SR_ERR_WIRE_FIELD);
    sr_test_ctx = "";
}

/* Annex A11.2.1, the RDMA IP CM service's private-data header: MajV.MinV
 * (4+4 bits, 0.0), IPV in the high nibble of byte 1, Source Port at 2,
 * Source IP at 4, Destination IP at 20 (an IPv4 address in the last 4
 * bytes of its 16, the 12 before zero). */
static void test_iphdr(void)
{
    sr_test_ctx = "A11 IPv4";
    struct scm_iphdr h = {.ip_ver = 4, .src_port = 0xbeef}, g;
    /* what the encoder is given: IPv4-mapped, as the CM keeps addresses */
    uint8_t s4[16] = {[10] = 0xff, [11] = 0xff, 10, 231, 0, 2};
    uint8_t d4[16] = {[10] = 0xff, [11] = 0xff, 10, 231, 0, 1};
    memcpy(h.src, s4, 16), memcpy(h.dst, d4, 16);
    uint8_t want[SCM_IPHDR_LEN] = {0x00, 0x40, 0xbe, 0xef};
    want[16] = 10, want[17] = 231, want[18] = 0, want[19] = 2;
    want[32] = 10, want[33] = 231, want[34] = 0, want[35] = 1;
    uint8_t enc[SCM_IPHDR_LEN];
    memset(enc, 0x77, sizeof(enc));
    scm_iphdr_encode(&h, enc);
    SR_CHECK_MEM(enc, want, SCM_IPHDR_LEN);
    SR_CHECK_EQ(scm_iphdr_decode(want, SCM_IPHDR_LEN, &g), 0);
    SR_CHECK_EQ(g.ip_ver, 4);
    SR_CHECK_EQ(g.src_port, 0xbeef);
    SR_CHECK_MEM(g.src + 12, want + 16, 4);
    SR_CHECK_MEM(g.dst + 12, want + 32, 4);
    /* REQ private data is 92 bytes: the header then the consumer's 56 */
    uint8_t priv[92] = {0};
    memcpy(priv, want, SCM_IPHDR_LEN);
    SR_CHECK_EQ(scm_iphdr_decode(priv, sizeof(priv), &g), 0);

    sr_test_ctx = "A11 IPv6";
    struct scm_iphdr h6 = {.ip_ver = 6, .src_port = 4791};
    uint8_t want6[SCM_IPHDR_LEN] = {0x00, 0x60, 0x12, 0xb7};
    for (int i = 0; i < 16; i++) {
        h6.src[i] = (uint8_t)(0xfd - i);
        h6.dst[i] = (uint8_t)(0x20 + i);
        want6[4 + i] = h6.src[i];
        want6[20 + i] = h6.dst[i];
    }
    scm_iphdr_encode(&h6, enc);
    SR_CHECK_MEM(enc, want6, SCM_IPHDR_LEN);
    SR_CHECK_EQ(scm_iphdr_decode(want6, SCM_IPHDR_LEN, &g), 0);
    SR_CHECK_EQ(g.ip_ver, 6);
    SR_CHECK_EQ(g.src_port, 4791);
    SR_CHECK_MEM(g.src, h6.src, 16);
    SR_CHECK_MEM(g.dst, h6.dst, 16);

    sr_test_ctx = "A11 rejects";
    SR_CHECK_EQ(scm_iphdr_decode(want, SCM_IPHDR_LEN - 1, &g), SR_ERR_WIRE_SHORT);
    SR_CHECK_EQ(scm_iphdr_decode(want, 0, &g), SR_ERR_WIRE_SHORT);
    static const uint8_t bad0[] = {0x10, 0x01, 0xff}; /* MajV/MinV not 0.0 */
    for (size_t i = 0; i < N(bad0); i++) {
        uint8_t b[SCM_IPHDR_LEN];
        memcpy(b, want, sizeof(b));
        b[0] = bad0[i];
        SR_CHECK_EQ(scm_iphdr_decode(b, sizeof(b), &g), SR_ERR_WIRE_FIELD);
    }
    static const uint8_t bad1[] = {0x00, 0x50, 0x70, 0xf0, 0x04};
    for (size_t i = 0; i < N(bad1); i++) {
        uint8_t b[SCM_IPHDR_LEN];
        memcpy(b, want, sizeof(b));
        b[1] = bad1[i];
        SR_CHECK_EQ(scm_iphdr_decode(b, sizeof(b), &g), SR_ERR_WIRE_FIELD);
    }
    /* A11.2.2: the service ID of port space TCP (0x106), port 7174 */
    SR_CHECK_EQ(scm_service_id(0x0106, 7174), 0x0000000001061c06ull);
    sr_test_ctx = "";
}

int main(void)
{
    SR_RUN(test_messages);
    SR_RUN(test_rejects);
    SR_RUN(test_class_port_info);
    SR_RUN(test_iphdr);
    return SR_TEST_RESULT();
}

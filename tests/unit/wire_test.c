/* wire_test.c: table-driven tests of src/wire: opcode table, encode/decode
 * round trips of every opcode with every field checked, hand-built golden
 * byte layouts, every malformed-input class, PSN arithmetic across the 2^24
 * wrap. ICRC vectors are in icrc_test.c. */
#include "sr_test.h"
#include "sr_util.h"
#include "sr_wire.h"

#include <stdlib.h>

/* Every opcode softrdma speaks, with the header length the IBTA layout gives
 * (BTH 12, RETH 16, AETH 4, AtomicETH 28, AtomicAckETH 8, ImmDt 4, IETH 4,
 * DETH 8, CNP pad 16), written out by hand rather than derived. */
static const struct {
    uint8_t op;
    uint8_t hdr_len;
    bool payload;
} op_rows[] = {
    {0x00, 12, true},
    {0x01, 12, true},
    {0x02, 12, true},
    {0x03, 16, true},
    {0x04, 12, true},
    {0x05, 16, true},
    {0x06, 28, true},
    {0x07, 12, true},
    {0x08, 12, true},
    {0x09, 16, true},
    {0x0a, 28, true},
    {0x0b, 32, true},
    {0x0c, 28, false},
    {0x0d, 16, true},
    {0x0e, 12, true},
    {0x0f, 16, true},
    {0x10, 16, true},
    {0x11, 16, false},
    {0x12, 24, false},
    {0x13, 40, false},
    {0x14, 40, false},
    {0x16, 16, true},
    {0x17, 16, true},
    {0x1d, 28, true}, /* ATOMIC WRITE (IBA 1.5): RETH + 8-byte payload */
    {0x20, 12, true},
    {0x21, 12, true},
    {0x22, 12, true},
    {0x23, 16, true},
    {0x24, 12, true},
    {0x25, 16, true},
    {0x26, 28, true},
    {0x27, 12, true},
    {0x28, 12, true},
    {0x29, 16, true},
    {0x2a, 28, true},
    {0x2b, 32, true},
    {0x64, 20, true},
    {0x65, 24, true},
    {0x81, 28, false},
    /* XRC: RC's layout plus a 4-byte XRCETH on requests only */
    {0xa0, 16, true},
    {0xa1, 16, true},
    {0xa2, 16, true},
    {0xa3, 20, true},
    {0xa4, 16, true},
    {0xa5, 20, true},
    {0xa6, 32, true},
    {0xa7, 16, true},
    {0xa8, 16, true},
    {0xa9, 20, true},
    {0xaa, 32, true},
    {0xab, 36, true},
    {0xac, 32, false},
    {0xad, 16, true},
    {0xae, 12, true},
    {0xaf, 16, true},
    {0xb0, 16, true},
    {0xb1, 16, false},
    {0xb2, 24, false},
    {0xb3, 44, false},
    {0xb4, 44, false},
    {0xb6, 20, true},
    {0xb7, 20, true},
    {0xf0, 24, true}, /* softrdma's SACK (docs/WIRE.md) */
};

static void test_opcode_table(void)
{
    int known = 0;
    for (unsigned op = 0; op < 256; op++)
        known += sr_opcode_info((uint8_t)op) != NULL;
    SR_CHECK_EQ(known, SR_ARRAY_SIZE(op_rows));
    for (size_t i = 0; i < SR_ARRAY_SIZE(op_rows); i++) {
        const struct sr_opcode_info *info = sr_opcode_info(op_rows[i].op);
        SR_CHECK(info != NULL);
        if (!info)
            continue;
        sr_test_ctx = info->name;
        SR_CHECK_EQ(info->hdr_len, op_rows[i].hdr_len);
        SR_CHECK_EQ(!!(info->flags & SR_OPF_PAYLOAD), op_rows[i].payload);
    }
    SR_CHECK(sr_opcode_info(0x15) == NULL); /* RC reserved */
    SR_CHECK(sr_opcode_info(0x3d) == NULL); /* ATOMIC WRITE is RC only */
    SR_CHECK(strcmp(sr_opcode_name(0x1d), "RC_ATOMIC_WRITE") == 0);
    SR_CHECK_EQ(sr_opcode_info(0x1d)->off[SR_HDR_RETH], 12);
    SR_CHECK(sr_opcode_info(0x40) == NULL); /* RD: not supported */
    SR_CHECK(sr_opcode_info(0x60) == NULL); /* UD SEND_FIRST does not exist */
    SR_CHECK(strcmp(sr_opcode_name(0x0b), "RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE") == 0);
    SR_CHECK(strcmp(sr_opcode_name(0xff), "UNKNOWN") == 0);
    /* Offsets follow IBA 9.2 order. */
    const struct sr_opcode_info *w = sr_opcode_info(0x0b);
    SR_CHECK_EQ(w->off[SR_HDR_RETH], 12);
    SR_CHECK_EQ(w->off[SR_HDR_IMMDT], 28);
    const struct sr_opcode_info *aa = sr_opcode_info(0x12);
    SR_CHECK_EQ(aa->off[SR_HDR_AETH], 12);
    SR_CHECK_EQ(aa->off[SR_HDR_ATOMIC_ACK_ETH], 16);
    const struct sr_opcode_info *x = sr_opcode_info(0xab);
    SR_CHECK_EQ(x->off[SR_HDR_XRCETH], 12);
    SR_CHECK_EQ(x->off[SR_HDR_RETH], 16);
    SR_CHECK_EQ(x->off[SR_HDR_IMMDT], 32);
    const struct sr_opcode_info *ud = sr_opcode_info(0x65);
    SR_CHECK_EQ(ud->off[SR_HDR_DETH], 12);
    SR_CHECK_EQ(ud->off[SR_HDR_IMMDT], 20);
}

/* A packet with every field set to a distinctive value; headers the opcode
 * does not carry are set too, to prove they are neither encoded nor decoded. */
static void fill_pkt(struct sr_pkt *p, uint8_t op, uint32_t payload_len, const uint8_t *payload,
                     unsigned seed)
{
    memset(p, 0, sizeof(*p));
    p->bth.opcode = op;
    p->bth.se = seed & 1;
    p->bth.migreq = seed & 2;
    p->bth.pkey = (uint16_t)(0xffff - seed);
    p->bth.fecn = seed & 4;
    p->bth.becn = seed & 8;
    p->bth.dest_qp = (0xabcdef + seed * 7919u) & SR_PSN_MASK;
    p->bth.ack_req = (seed & 16) && !(sr_opcode_info(op)->flags & SR_OPF_RESPONSE);
    p->bth.psn = (0xfffff0u + seed * 3u) & SR_PSN_MASK;
    p->hdrs = 0xff;
    p->reth.va = 0x0123456789abcdefull + seed;
    p->reth.rkey = 0xdeadbeef ^ seed;
    p->reth.dma_len = 0x10000u + seed;
    p->aeth.syndrome = (uint8_t)(SR_AETH_ACK | (seed & 0x1f));
    p->aeth.msn = (0x7654321u + seed) & SR_PSN_MASK;
    p->atomic.va = 0xfedcba9876543210ull - seed * 8;
    p->atomic.rkey = 0x11223344u + seed;
    p->atomic.swap_add = 0xa5a5a5a5a5a5a5a5ull ^ seed;
    p->atomic.compare = 0x5a5a5a5a5a5a5a5aull + seed;
    p->atomic_orig = 0x0f0f0f0f0f0f0f0full * (seed + 1);
    p->imm = 0xc0ffee00u | seed;
    p->ieth_rkey = 0xbadc0de0u | (seed & 0xf);
    p->deth.qkey = 0x11111111u + seed;
    p->deth.src_qp = (0x123456u + seed) & SR_PSN_MASK;
    p->xrc_srqn = (0x00abcdu * (seed + 1)) & SR_PSN_MASK;
    p->payload = payload;
    p->payload_len = payload_len;
}

static void check_same(const struct sr_pkt *in, const struct sr_pkt *out, uint32_t hdrs)
{
    SR_CHECK_EQ(out->bth.opcode, in->bth.opcode);
    SR_CHECK_EQ(out->bth.se, in->bth.se);
    SR_CHECK_EQ(out->bth.migreq, in->bth.migreq);
    SR_CHECK_EQ(out->bth.pad_cnt, sr_wire_pad_len(in->payload_len));
    SR_CHECK_EQ(out->bth.tver, 0);
    SR_CHECK_EQ(out->bth.pkey, in->bth.pkey);
    SR_CHECK_EQ(out->bth.fecn, in->bth.fecn);
    SR_CHECK_EQ(out->bth.becn, in->bth.becn);
    SR_CHECK_EQ(out->bth.dest_qp, in->bth.dest_qp);
    SR_CHECK_EQ(out->bth.ack_req, in->bth.ack_req);
    SR_CHECK_EQ(out->bth.psn, in->bth.psn);
    SR_CHECK_EQ(out->hdrs, hdrs);
#define HAS(h) (hdrs & SR_HDR_BIT(SR_HDR_##h))
    SR_CHECK_EQ(out->reth.va, HAS(RETH) ? in->reth.va : 0);
    SR_CHECK_EQ(out->reth.rkey, HAS(RETH) ? in->reth.rkey : 0);
    SR_CHECK_EQ(out->reth.dma_len, HAS(RETH) ? in->reth.dma_len : 0);
    SR_CHECK_EQ(out->aeth.syndrome, HAS(AETH) ? in->aeth.syndrome : 0);
    SR_CHECK_EQ(out->aeth.msn, HAS(AETH) ? in->aeth.msn : 0);
    SR_CHECK_EQ(out->atomic.va, HAS(ATOMIC_ETH) ? in->atomic.va : 0);
    SR_CHECK_EQ(out->atomic.rkey, HAS(ATOMIC_ETH) ? in->atomic.rkey : 0);
    SR_CHECK_EQ(out->atomic.swap_add, HAS(ATOMIC_ETH) ? in->atomic.swap_add : 0);
    SR_CHECK_EQ(out->atomic.compare, HAS(ATOMIC_ETH) ? in->atomic.compare : 0);
    SR_CHECK_EQ(out->atomic_orig, HAS(ATOMIC_ACK_ETH) ? in->atomic_orig : 0);
    SR_CHECK_EQ(out->imm, HAS(IMMDT) ? in->imm : 0);
    SR_CHECK_EQ(out->ieth_rkey, HAS(IETH) ? in->ieth_rkey : 0);
    SR_CHECK_EQ(out->deth.qkey, HAS(DETH) ? in->deth.qkey : 0);
    SR_CHECK_EQ(out->deth.src_qp, HAS(DETH) ? in->deth.src_qp : 0);
    SR_CHECK_EQ(out->xrc_srqn, HAS(XRCETH) ? in->xrc_srqn : 0);
#undef HAS
    SR_CHECK_EQ(out->payload_len, in->payload_len);
    if (in->payload_len && out->payload_len == in->payload_len)
        SR_CHECK_MEM(out->payload, in->payload, in->payload_len);
}

static void test_round_trip(void)
{
    enum { PMTU = 1024 };
    static uint8_t payload[SR_MAX_PMTU];
    static uint8_t buf[SR_MAX_HDR_LEN + SR_MAX_PMTU + 8];
    for (size_t i = 0; i < sizeof(payload); i++)
        payload[i] = (uint8_t)(i * 31 + 7);

    for (size_t i = 0; i < SR_ARRAY_SIZE(op_rows); i++) {
        const struct sr_opcode_info *info = sr_opcode_info(op_rows[i].op);
        sr_test_ctx = info->name;
        /* Payload sizes the opcode allows: whole PMTU for FIRST/MIDDLE; 0, 1,
         * 2, 3 (every pad count), odd and PMTU for LAST/ONLY; none else. */
        static const uint32_t any_sizes[] = {0, 1, 2, 3, 5, 77, PMTU - 1, PMTU};
        static const uint32_t pmtu_only[] = {PMTU};
        static const uint32_t none[] = {0};
        const uint32_t *sizes = none;
        size_t nsizes = 1;
        if (info->flags & (SR_OPF_FIRST | SR_OPF_MIDDLE) && info->flags & SR_OPF_PAYLOAD) {
            sizes = pmtu_only;
        } else if (info->flags & SR_OPF_PAYLOAD) {
            sizes = any_sizes;
            nsizes = SR_ARRAY_SIZE(any_sizes);
        }
        for (size_t s = 0; s < nsizes; s++) {
            for (unsigned seed = 0; seed < 32; seed += 5) {
                struct sr_pkt in, out;
                fill_pkt(&in, op_rows[i].op, sizes[s], payload, seed);
                int len = sr_wire_encode(&in, buf, sizeof(buf));
                SR_CHECK_EQ(len, sr_wire_pkt_len(in.bth.opcode, sizes[s]));
                SR_CHECK_EQ(len % 4, 0);
                if (len < 0)
                    continue;
                int hl = sr_wire_decode(buf, (size_t)len, PMTU, &out);
                SR_CHECK_EQ(hl, op_rows[i].hdr_len);
                check_same(&in, &out, info->hdrs);
                /* Pad and ICRC slot are zero. */
                for (int k = hl + (int)sizes[s]; k < len; k++)
                    SR_CHECK_EQ(buf[k], 0);
                /* Header-only encoding writes the same bytes. */
                uint8_t hdr[SR_MAX_HDR_LEN];
                SR_CHECK_EQ(sr_wire_encode_hdr(&in, hdr, sizeof(hdr)), hl);
                SR_CHECK_MEM(hdr, buf, (size_t)hl);
            }
        }
    }
}

/* Golden layouts written byte by byte from IBA 9.2, independent of the
 * encoder: RC RDMA WRITE ONLY with immediate, UD SEND ONLY, ATOMIC ACK. */
/* docs/WIRE.md, byte for byte: the SACK, and a request advertising it in
 * the BTH's Resv7. */
static void test_sack_bytes(void)
{
    uint8_t buf[64];
    static const uint8_t bm[8] = {0x05, 0, 0, 0, 0, 0, 0, 0x80};
    struct sr_pkt p = {0};
    p.bth = (struct sr_bth){.opcode = SR_OP_SACK, .pkey = 0xffff, .dest_qp = 0x12, .psn = 0xfffffe};
    p.aeth = (struct sr_aeth){.syndrome = 0x1f, .msn = 7};
    p.sack.flags = SR_SACK_F_ECE;
    p.sack.base_psn = 0;
    p.payload = bm;
    p.payload_len = 8;
    static const uint8_t want[] = {
        0xf0, 0x00, 0xff, 0xff, 0x00, 0x00, 0x00, 0x12, 0x00, 0xff, 0xff, 0xfe, /* BTH */
        0x1f, 0x00, 0x00, 0x07,                                                 /* AETH */
        0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, /* SACKETH: ECE, base 0 */
        0x05, 0,    0,    0,    0,    0,    0,    0x80, /* bitmap */
        0,    0,    0,    0,                            /* ICRC */
    };
    sr_test_ctx = "sack";
    SR_CHECK_EQ(sr_wire_encode(&p, buf, sizeof(buf)), sizeof(want));
    SR_CHECK_MEM(buf, want, sizeof(want));
    struct sr_pkt d;
    SR_CHECK_EQ(sr_wire_decode(buf, sizeof(want), 1024, &d), 24);
    SR_CHECK_EQ(d.sack.flags, SR_SACK_F_ECE);
    SR_CHECK_EQ(d.sack.base_psn, 0u);
    SR_CHECK_EQ(d.payload_len, 8u);
    SR_CHECK_EQ(d.aeth.msn, 7u);
    /* a NAK syndrome is not a SACK's */
    buf[12] = 0x60;
    SR_CHECK(sr_wire_decode(buf, sizeof(want), 1024, &d) < 0);

    /* D-SACK: flag 0x02, the duplicate's PSN in SACKETH bytes 2..4 */
    sr_test_ctx = "d-sack";
    p.bth = (struct sr_bth){.opcode = SR_OP_SACK, .pkey = 0xffff, .dest_qp = 0x12, .psn = 0xfffffe};
    p.aeth = (struct sr_aeth){.syndrome = 0x1f, .msn = 7};
    p.sack.flags = SR_SACK_F_DSACK;
    p.sack.base_psn = 0;
    p.sack.dsack_psn = 0xabcdef;
    static const uint8_t zero[8];
    p.payload = zero;
    SR_CHECK_EQ(sr_wire_encode(&p, buf, sizeof(buf)), sizeof(want));
    static const uint8_t dsacketh[8] = {0x02, 0x00, 0xab, 0xcd, 0xef, 0x00, 0x00, 0x00};
    SR_CHECK_MEM(buf + 16, dsacketh, 8);
    SR_CHECK_EQ(sr_wire_decode(buf, sizeof(want), 1024, &d), 24);
    SR_CHECK_EQ(d.sack.flags, SR_SACK_F_DSACK);
    SR_CHECK_EQ(d.sack.dsack_psn, 0xabcdefu);
    SR_CHECK_EQ(d.sack.base_psn, 0u);
    /* without the flag those bytes stay reserved (0) */
    p.sack.flags = 0;
    SR_CHECK_EQ(sr_wire_encode(&p, buf, sizeof(buf)), sizeof(want));
    SR_CHECK_EQ(buf[18] | buf[19] | buf[20], 0);

    memset(&p, 0, sizeof(p));
    p.bth = (struct sr_bth){.opcode = 0x04,
                            .pkey = 0xffff,
                            .dest_qp = 0x12,
                            .ack_req = true,
                            .resv7 = SR_BTH_RESV7_SACK,
                            .psn = 3};
    sr_test_ctx = "resv7";
    SR_CHECK_EQ(sr_wire_encode(&p, buf, sizeof(buf)), 16);
    SR_CHECK_EQ(buf[8], 0x80 | 0x40);
    SR_CHECK_EQ(sr_wire_decode(buf, 16, 1024, &d), 12);
    SR_CHECK_EQ(d.bth.resv7, SR_BTH_RESV7_SACK);
    SR_CHECK(d.bth.ack_req);
}

/* The RPETH (docs/WIRE.md): 8 bytes after the opcode's headers of an RC
 * SEND with Resv7 bit 5, the payload after it; on any other opcode the
 * bit means nothing to the layout. */
static void test_rph_bytes(void)
{
    uint8_t buf[64];
    static const uint8_t pl[6] = {1, 2, 3, 4, 5, 6};
    struct sr_pkt p = {0}, d;
    p.bth = (struct sr_bth){.opcode = SR_OP_RC | SR_OP_SEND_LAST_IMM,
                            .pkey = 0xffff,
                            .dest_qp = 0x12,
                            .ack_req = true,
                            .resv7 = SR_BTH_RESV7_SACK | SR_BTH_RESV7_RPH,
                            .psn = 9};
    p.imm = 0xa1b2c3d4;
    p.rph.msg = 0x01020304;
    p.rph.off = 0x00012000;
    p.payload = pl;
    p.payload_len = sizeof(pl);
    static const uint8_t want[] = {
        0x03, 0x20, 0xff, 0xff, 0x00, 0x00, 0x00, 0x12, 0xe0, 0x00, 0x00, 0x09, /* BTH, pad 2 */
        0xa1, 0xb2, 0xc3, 0xd4,                                                 /* ImmDt */
        0x01, 0x02, 0x03, 0x04, 0x00, 0x01, 0x20, 0x00,                         /* RPETH */
        1,    2,    3,    4,    5,    6,    0,    0,                            /* payload, pad */
        0,    0,    0,    0,                                                    /* ICRC */
    };
    sr_test_ctx = "rpeth";
    SR_CHECK_EQ(sr_wire_encode(&p, buf, sizeof(buf)), sizeof(want));
    SR_CHECK_MEM(buf, want, sizeof(want));
    SR_CHECK_EQ(sr_wire_decode(buf, sizeof(want), 1024, &d), 24);
    SR_CHECK(d.hdrs & SR_HDR_BIT(SR_HDR_RPETH));
    SR_CHECK_EQ(d.rph.msg, 0x01020304u);
    SR_CHECK_EQ(d.rph.off, 0x00012000u);
    SR_CHECK_EQ(d.imm, 0xa1b2c3d4u);
    SR_CHECK_EQ(d.payload_len, sizeof(pl));
    SR_CHECK_MEM(d.payload, pl, sizeof(pl));
    /* the header length the encoder reports is the decoder's */
    SR_CHECK_EQ(sr_wire_encode_hdr(&p, buf, sizeof(buf)), 24);
    /* cut inside the RPETH: short, not a payload */
    SR_CHECK_EQ(sr_wire_decode(want, 16 + 4 + SR_ICRC_LEN, 1024, &d), SR_ERR_WIRE_SHORT);

    /* A MIDDLE with an RPETH still carries exactly one PMTU of payload */
    static uint8_t big[256];
    p.bth.opcode = SR_OP_RC | SR_OP_SEND_MIDDLE;
    p.payload = big;
    p.payload_len = 256;
    uint8_t mbuf[12 + 8 + 256 + 4];
    SR_CHECK_EQ(sr_wire_encode(&p, mbuf, sizeof(mbuf)), sizeof(mbuf));
    SR_CHECK_EQ(sr_wire_decode(mbuf, sizeof(mbuf), 256, &d), 20);
    SR_CHECK_EQ(d.payload_len, 256u);

    /* the bit on a WRITE, a UC or a UD SEND: no RPETH */
    static const uint8_t others[] = {SR_OP_RC | SR_OP_WRITE_ONLY, SR_OP_UC | SR_OP_SEND_ONLY,
                                     SR_OP_UD | SR_OP_SEND_ONLY, SR_OP_RC | SR_OP_ACK};
    for (unsigned i = 0; i < SR_ARRAY_SIZE(others); i++)
        SR_CHECK(!sr_wire_has_rph(others[i], SR_BTH_RESV7_RPH));
    static const uint8_t sends[] = {SR_OP_SEND_FIRST,    SR_OP_SEND_MIDDLE,  SR_OP_SEND_LAST,
                                    SR_OP_SEND_LAST_IMM, SR_OP_SEND_ONLY,    SR_OP_SEND_ONLY_IMM,
                                    SR_OP_SEND_LAST_INV, SR_OP_SEND_ONLY_INV};
    for (unsigned i = 0; i < SR_ARRAY_SIZE(sends); i++) {
        SR_CHECK(sr_wire_has_rph(SR_OP_RC | sends[i], SR_BTH_RESV7_RPH));
        SR_CHECK(!sr_wire_has_rph(SR_OP_RC | sends[i], SR_BTH_RESV7_SACK));
    }
}

static void test_golden_bytes(void)
{
    uint8_t buf[128];
    struct sr_pkt p = {0};
    static const uint8_t data[5] = {1, 2, 3, 4, 5};
    p.bth = (struct sr_bth){.opcode = 0x0b,
                            .se = true,
                            .pkey = 0xffff,
                            .dest_qp = 0x000123,
                            .ack_req = true,
                            .psn = 0xabcdef};
    p.reth = (struct sr_reth){.va = 0x1122334455667788ull, .rkey = 0x99aabbcc, .dma_len = 5};
    p.imm = 0xdeadbeef;
    p.payload = data;
    p.payload_len = 5;
    static const uint8_t want_write[] = {
        0x0b, 0x80 | 0x30, 0xff, 0xff, 0x00, 0x00, 0x01, 0x23, 0x80, 0xab, 0xcd, 0xef, /* BTH */
        0x11, 0x22,        0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb, 0xcc, /* RETH */
        0x00, 0x00,        0x00, 0x05,                                                 /* len */
        0xde, 0xad,        0xbe, 0xef,                                                 /* ImmDt */
        1,    2,           3,    4,    5,    0,    0,    0, /* data+pad */
        0,    0,           0,    0,                         /* ICRC */
    };
    sr_test_ctx = "write_only_imm";
    SR_CHECK_EQ(sr_wire_encode(&p, buf, sizeof(buf)), sizeof(want_write));
    SR_CHECK_MEM(buf, want_write, sizeof(want_write));

    memset(&p, 0, sizeof(p));
    p.bth = (struct sr_bth){
        .opcode = 0x64, .pkey = 0x8001, .dest_qp = 0xfffffe, .psn = 1, .becn = true};
    p.deth = (struct sr_deth){.qkey = 0x11111111, .src_qp = 0x00beef};
    static const uint8_t want_ud[] = {
        0x64, 0x00, 0x80, 0x01, 0x40, 0xff, 0xff, 0xfe, 0x00, 0x00, 0x00, 0x01, /* BTH */
        0x11, 0x11, 0x11, 0x11, 0x00, 0x00, 0xbe, 0xef,                         /* DETH */
        0,    0,    0,    0,
    };
    sr_test_ctx = "ud_send_only";
    SR_CHECK_EQ(sr_wire_encode(&p, buf, sizeof(buf)), sizeof(want_ud));
    SR_CHECK_MEM(buf, want_ud, sizeof(want_ud));

    memset(&p, 0, sizeof(p));
    p.bth = (struct sr_bth){.opcode = 0x12, .dest_qp = 7, .psn = 0x000100};
    p.aeth = (struct sr_aeth){.syndrome = 0x1f, .msn = 0x000042};
    p.atomic_orig = 0x0102030405060708ull;
    static const uint8_t want_aack[] = {
        0x12, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x07, 0x00, 0x00, 0x01, 0x00, /* BTH */
        0x1f, 0x00, 0x00, 0x42,                                                 /* AETH */
        0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08,                         /* AtomicAck */
        0,    0,    0,    0,
    };
    sr_test_ctx = "atomic_ack";
    SR_CHECK_EQ(sr_wire_encode(&p, buf, sizeof(buf)), sizeof(want_aack));
    SR_CHECK_MEM(buf, want_aack, sizeof(want_aack));

    struct sr_pkt d;
    SR_CHECK_EQ(sr_wire_decode(want_aack, sizeof(want_aack), 0, &d), 24);
    SR_CHECK_EQ(d.atomic_orig, 0x0102030405060708ull);
    SR_CHECK_EQ(d.aeth.msn, 0x42);
}

/* Build a valid packet of opcode op, then let the row corrupt it. */
static int make(uint8_t op, uint32_t payload_len, uint8_t *buf, size_t cap)
{
    static uint8_t payload[SR_MAX_PMTU + 64];
    struct sr_pkt p;
    if (payload_len > sizeof(payload))
        return SR_ERR_RANGE;
    fill_pkt(&p, op, payload_len, payload, 0);
    return sr_wire_encode(&p, buf, cap);
}

static void test_malformed(void)
{
    uint8_t buf[SR_MAX_HDR_LEN + SR_MAX_PMTU + 64];
    struct sr_pkt out;
    int len;

    sr_test_ctx = "too short";
    len = make(0x0a, 4, buf, sizeof(buf)); /* WRITE_ONLY: 28 + 4 + 4 */
    /* Anything shorter than BTH + RETH + ICRC. (A longer truncation that
     * keeps the headers looks like a shorter payload: the ICRC catches it.) */
    for (int l = 0; l < 28 + 4; l++)
        SR_CHECK_EQ(sr_wire_decode(buf, (size_t)l, 256, &out), SR_ERR_WIRE_SHORT);
    SR_CHECK_EQ(sr_wire_decode(buf, (size_t)len, 256, &out), 28);

    sr_test_ctx = "unknown opcode";
    static const uint8_t unknown[] = {0x15, 0x18, 0x19, 0x1f, 0x40, 0x4a, 0x60, 0x66, 0x80, 0xff};
    for (size_t i = 0; i < sizeof(unknown); i++) {
        len = make(0x04, 0, buf, sizeof(buf));
        buf[0] = unknown[i];
        SR_CHECK_EQ(sr_wire_decode(buf, (size_t)len, 256, &out), SR_ERR_WIRE_OPCODE);
    }

    sr_test_ctx = "tver";
    for (uint8_t v = 1; v < 16; v++) {
        len = make(0x04, 8, buf, sizeof(buf));
        buf[1] = (uint8_t)((buf[1] & 0xf0) | v);
        SR_CHECK_EQ(sr_wire_decode(buf, (size_t)len, 256, &out), SR_ERR_WIRE_TVER);
    }

    sr_test_ctx = "pad: unaligned payload";
    len = make(0x04, 8, buf, sizeof(buf));
    SR_CHECK_EQ(sr_wire_decode(buf, (size_t)len + 1, 256, &out), SR_ERR_WIRE_PAD);
    SR_CHECK_EQ(sr_wire_decode(buf, (size_t)len + 2, 256, &out), SR_ERR_WIRE_PAD);
    sr_test_ctx = "pad: pad larger than payload";
    len = make(0x04, 0, buf, sizeof(buf));
    buf[1] |= 0x30; /* 3 pad bytes, 0 payload bytes */
    SR_CHECK_EQ(sr_wire_decode(buf, (size_t)len, 256, &out), SR_ERR_WIRE_PAD);
    sr_test_ctx = "pad: on first/middle";
    len = make(0x06, 256, buf, sizeof(buf));
    buf[1] |= 0x10;
    SR_CHECK_EQ(sr_wire_decode(buf, (size_t)len, 256, &out), SR_ERR_WIRE_PAD);
    sr_test_ctx = "pad: on an opcode without payload";
    len = make(0x11, 0, buf, sizeof(buf));
    buf[1] |= 0x20;
    SR_CHECK_EQ(sr_wire_decode(buf, (size_t)len, 256, &out), SR_ERR_WIRE_PAD);

    sr_test_ctx = "payload where none is allowed";
    static const uint8_t nopay[] = {0x0c, 0x11, 0x12, 0x13, 0x14, 0x81};
    for (size_t i = 0; i < sizeof(nopay); i++) {
        len = make(nopay[i], 0, buf, sizeof(buf));
        SR_CHECK_EQ(sr_wire_decode(buf, (size_t)len + 4, 256, &out), SR_ERR_WIRE_PAYLOAD);
    }

    sr_test_ctx = "payload larger than PMTU";
    len = make(0x04, 260, buf, sizeof(buf));
    SR_CHECK_EQ(sr_wire_decode(buf, (size_t)len, 256, &out), SR_ERR_WIRE_MTU);
    SR_CHECK_EQ(out.payload_len, 260); /* fully decoded for the NAK */
    SR_CHECK_EQ(sr_wire_decode(buf, (size_t)len, 512, &out), 12);
    len = make(0x10, 4096 + 4, buf, sizeof(buf));
    SR_CHECK_EQ(sr_wire_decode(buf, (size_t)len, 4096, &out), SR_ERR_WIRE_MTU);
    SR_CHECK_EQ(sr_wire_decode(buf, (size_t)len, 0, &out), 16); /* pmtu 0: unchecked */

    sr_test_ctx = "first/middle not one PMTU";
    len = make(0x00, 252, buf, sizeof(buf));
    SR_CHECK_EQ(sr_wire_decode(buf, (size_t)len, 256, &out), SR_ERR_WIRE_SEGMENT);
    len = make(0x27, 1024, buf, sizeof(buf));
    SR_CHECK_EQ(sr_wire_decode(buf, (size_t)len, 2048, &out), SR_ERR_WIRE_SEGMENT);
    SR_CHECK_EQ(sr_wire_decode(buf, (size_t)len, 1024, &out), 12);

    sr_test_ctx = "forbidden fields";
    len = make(0x11, 0, buf, sizeof(buf));
    buf[8] |= 0x80; /* AckReq on an ACK */
    SR_CHECK_EQ(sr_wire_decode(buf, (size_t)len, 256, &out), SR_ERR_WIRE_FIELD);
    len = make(0x10, 16, buf, sizeof(buf));
    buf[8] |= 0x80; /* AckReq on a READ response */
    SR_CHECK_EQ(sr_wire_decode(buf, (size_t)len, 256, &out), SR_ERR_WIRE_FIELD);
    static const uint8_t bad_syn[] = {0x40, 0x5f, 0x65, 0x7f}; /* reserved type; NAK codes 5, 31 */
    for (size_t i = 0; i < sizeof(bad_syn); i++) {
        len = make(0x11, 0, buf, sizeof(buf));
        buf[12] = bad_syn[i];
        SR_CHECK_EQ(sr_wire_decode(buf, (size_t)len, 256, &out), SR_ERR_WIRE_FIELD);
    }
    static const uint8_t good_syn[] = {0x00, 0x1f, 0x20, 0x3f, 0x60, 0x61, 0x62, 0x63, 0x64};
    for (size_t i = 0; i < sizeof(good_syn); i++) {
        len = make(0x11, 0, buf, sizeof(buf));
        buf[12] = good_syn[i];
        SR_CHECK_EQ(sr_wire_decode(buf, (size_t)len, 256, &out), 16);
        SR_CHECK_EQ(out.aeth.syndrome, good_syn[i]);
    }
    len = make(0x0d, 256, buf, sizeof(buf));
    buf[12] = 0x61; /* NAK in a READ RESPONSE FIRST */
    SR_CHECK_EQ(sr_wire_decode(buf, (size_t)len, 256, &out), SR_ERR_WIRE_FIELD);
    len = make(0x12, 0, buf, sizeof(buf));
    buf[12] = 0x20; /* RNR NAK in an ATOMIC ACK */
    SR_CHECK_EQ(sr_wire_decode(buf, (size_t)len, 256, &out), SR_ERR_WIRE_FIELD);

    sr_test_ctx = "encode errors";
    struct sr_pkt p = {0};
    p.bth.opcode = 0x15;
    SR_CHECK_EQ(sr_wire_encode(&p, buf, sizeof(buf)), SR_ERR_WIRE_OPCODE);
    p.bth.opcode = 0x04;
    p.bth.psn = 0x1000000;
    SR_CHECK_EQ(sr_wire_encode(&p, buf, sizeof(buf)), SR_ERR_RANGE);
    p.bth.psn = 0;
    SR_CHECK_EQ(sr_wire_encode(&p, buf, 15), SR_ERR_NOSPACE);
    SR_CHECK_EQ(sr_wire_encode(&p, buf, 16), 16);
    p.bth.opcode = 0x11;
    p.payload_len = 4;
    p.payload = buf;
    SR_CHECK_EQ(sr_wire_encode(&p, buf + 64, 64), SR_ERR_RANGE);
    sr_test_ctx = "error names";
    SR_CHECK(strcmp(sr_err_name(SR_ERR_WIRE_PAD), "SR_ERR_WIRE_PAD") == 0);
    SR_CHECK(strcmp(sr_err_name(12345), "SR_ERR_UNKNOWN") == 0);
}

/* Every malformed class gets its own code. */
static void test_errors_distinct(void)
{
    static const int codes[] = {SR_ERR_WIRE_SHORT, SR_ERR_WIRE_OPCODE,  SR_ERR_WIRE_TVER,
                                SR_ERR_WIRE_PAD,   SR_ERR_WIRE_PAYLOAD, SR_ERR_WIRE_FIELD,
                                SR_ERR_WIRE_MTU,   SR_ERR_WIRE_SEGMENT, SR_ERR_WIRE_ICRC,
                                SR_ERR_WIRE_L3};
    for (size_t i = 0; i < SR_ARRAY_SIZE(codes); i++) {
        SR_CHECK(codes[i] < 0);
        for (size_t j = i + 1; j < SR_ARRAY_SIZE(codes); j++)
            SR_CHECK(codes[i] != codes[j]);
        SR_CHECK(strcmp(sr_err_name(codes[i]), "SR_ERR_UNKNOWN") != 0);
    }
}

static void test_psn(void)
{
    static const struct {
        uint32_t a, b;
        int32_t diff;
    } rows[] = {
        {0, 0, 0},
        {5, 3, 2},
        {3, 5, -2},
        {0, 0xffffff, 1}, /* across the wrap */
        {0xffffff, 0, -1},
        {2, 0xfffffe, 4},
        {0xfffffe, 2, -4},
        {0x7fffff, 0, 0x7fffff},  /* largest forward distance */
        {0x800000, 0, -0x800000}, /* half the circle counts as behind */
        {0, 0x800000, -0x800000},
        {0x800001, 0x000001, -0x800000},
        {0x123456, 0x923455, -0x7fffff},
    };
    for (size_t i = 0; i < SR_ARRAY_SIZE(rows); i++) {
        SR_CHECK_EQ((int64_t)sr_psn_diff(rows[i].a, rows[i].b), (int64_t)rows[i].diff);
        SR_CHECK_EQ(sr_psn_lt(rows[i].a, rows[i].b), rows[i].diff < 0);
        SR_CHECK_EQ(sr_psn_le(rows[i].a, rows[i].b), rows[i].diff <= 0);
    }
    SR_CHECK_EQ(sr_psn_add(0xffffff, 1), 0);
    SR_CHECK_EQ(sr_psn_add(0xfffff0, 0x20), 0x10);
    SR_CHECK_EQ(sr_psn_add(5, 0), 5);
    /* A window of 2^23 - 1 in flight stays ordered across the wrap. */
    for (uint32_t base = 0xfff000; base != 0x001000; base = sr_psn_add(base, 0x100)) {
        SR_CHECK(sr_psn_lt(base, sr_psn_add(base, 1)));
        SR_CHECK(sr_psn_lt(base, sr_psn_add(base, 0x7fffff)));
        /* exactly half the circle is ambiguous and reads as behind both ways */
        SR_CHECK_EQ((int64_t)sr_psn_diff(base, sr_psn_add(base, 0x800000)), -0x800000);
        /* more than half ahead reads as behind */
        SR_CHECK(sr_psn_lt(sr_psn_add(base, 0x800001), base));
    }
}

int main(void)
{
    SR_RUN(test_opcode_table);
    SR_RUN(test_round_trip);
    SR_RUN(test_golden_bytes);
    SR_RUN(test_sack_bytes);
    SR_RUN(test_rph_bytes);
    SR_RUN(test_malformed);
    SR_RUN(test_errors_distinct);
    SR_RUN(test_psn);
    return SR_TEST_RESULT();
}

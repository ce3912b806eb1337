/* engine_rows_test.c: the packet-and-answer rows of hostile.forged_packets
 * (tests/hostile/attack_rows.h), in process. One engine is set up as the
 * hostile test's victim (hostile.h's memory layout and QPs); each row's
 * packet is built with pkt_builder.h and handed to sr_engine_rx, and the
 * test checks what the engine sent back (opcode, destination QP, PSN, AETH
 * syndrome and MSN, READ payload, atomic original value), which drop
 * counter moved, the victim's memory (only granted writes change it), and
 * the completions and QP states that follow. No sockets, no second
 * process: the same rows as the cross-process attack, deterministic.
 *
 * Rows that test the UDP driver's checks of the ICRC and the datagram
 * (the ICRC mutations below) cannot be expressed: sr_engine_rx receives
 * packets whose ICRC the driver has already verified. */
#include "attack_rows.h"
#include "pkt_builder.h"
#include "sr_engine.h"
#include "sr_test.h"
#include "sr_util.h"

#include <stdlib.h>

enum {
    /* the driver's checks: the ICRC over the datagram's addresses and ports */
    MU_DRIVER =
        MU_ICRC_FLIP | MU_BODY_FLIP | MU_IPID | MU_IPID_GSO | MU_WRONG_DST | MU_SPORT | MU_SPOOF,
    OUT_MAX = 16,
    OUT_LEN = SR_MAX_HDR_LEN + 4096 + 8,
    TIMEOUT_67MS = 14,
    LEGIT_QPN = 0x6000,
};

static const uint8_t gid_victim[16] = {[10] = 0xff, [11] = 0xff, 127, 0, 0, 1};
static const uint8_t gid_a[16] = {[10] = 0xff, [11] = 0xff, 127, 200, 0, 1};
static const uint8_t gid_b[16] = {[10] = 0xff, [11] = 0xff, 127, 200, 0, 2};
static const uint8_t gid_legit[16] = {[10] = 0xff, [11] = 0xff, 127, 0, 0, 9};

struct out_pkt {
    uint8_t buf[OUT_LEN];
    uint32_t len;
    uint8_t dgid[16];
};

/* The victim: one engine, hostile.h's memory and QPs, and what the test
 * knows of their PSNs and message counts. */
struct victim {
    struct sr_engine *e;
    struct sr_pd *pd;
    struct sr_cq *scq, *rcq[HX_TARGETS], *ud_cq, *uc_cq;
    uint8_t *region, *rbuf, *udbuf, *lbuf, *legit_mem;
    struct sr_mr *mr_a, *mr_b, *mr_rbuf, *mr_udbuf, *mr_lbuf, *mr_legit;
    struct sr_qp *t[HX_TARGETS], *ud, *uc, *legit, *init;
    uint32_t dead_qpn;
    uint32_t epsn[HX_TARGETS], sq_psn[HX_TARGETS], msn[HX_TARGETS], uc_epsn;
    struct {
        uint32_t psn;
        uint64_t orig;
    } saved[4];
    uint32_t ud_delivered;
    uint64_t now;
    struct out_pkt out[OUT_MAX];
    int nout;
    int events[32];
    void *event_obj;
};

static int v_tx(void *ctx, const struct sr_tx_pkt *t)
{
    struct victim *v = ctx;
    if (v->nout == OUT_MAX) {
        SR_CHECK(!"more packets out than any row causes");
        return 0;
    }
    struct out_pkt *o = &v->out[v->nout++];
    uint32_t n = 0;
    memcpy(o->buf, t->hdr, t->hdr_len);
    n += t->hdr_len;
    for (uint32_t i = 0; i < t->iov_cnt; i++) {
        memcpy(o->buf + n, t->iov[i].base, t->iov[i].len);
        n += t->iov[i].len;
    }
    memset(o->buf + n, 0, t->pad_len + SR_ICRC_LEN);
    o->len = n + t->pad_len + SR_ICRC_LEN;
    memcpy(o->dgid, t->dgid, 16);
    return 0;
}

static void v_async(void *ctx, enum sr_event_type type, void *obj)
{
    struct victim *v = ctx;
    v->events[type & 31]++;
    v->event_obj = obj;
}

static uint8_t *page_alloc(size_t len, uint32_t canary_seed)
{
    uint8_t *p = aligned_alloc(HX_PAGE, len);
    if (p)
        for (size_t i = 0; i < len; i++)
            p[i] = hx_pat(canary_seed, i);
    return p;
}

static struct sr_qp *qp_new(struct victim *v, enum sr_qp_type type, struct sr_cq *rcq)
{
    struct sr_qp_init_attr ia = {
        .qp_type = type,
        .send_cq = v->scq,
        .recv_cq = rcq ? rcq : v->scq,
        .cap = {.max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1},
    };
    struct sr_qp *qp = NULL;
    SR_CHECK_EQ(sr_qp_create(v->pd, &ia, &qp), 0);
    return qp;
}

static void qp_to_init(struct sr_qp *qp, uint32_t access)
{
    struct sr_qp_attr a = {.qp_state = SR_QPS_INIT, .port_num = 1, .qp_access_flags = access};
    SR_CHECK_EQ(
        sr_qp_modify(qp, &a, SR_QP_STATE | SR_QP_PKEY_INDEX | SR_QP_PORT | SR_QP_ACCESS_FLAGS, 0),
        0);
}

/* INIT -> RTR -> RTS facing dgid's QP dqpn, as hx_qp_connect does. */
static void qp_connect(struct sr_qp *qp, bool rc, uint32_t access, const uint8_t *dgid,
                       uint32_t dqpn, uint32_t rq_psn, uint32_t sq_psn, uint8_t timeout)
{
    qp_to_init(qp, access);
    struct sr_qp_attr a = {.qp_state = SR_QPS_RTR,
                           .path_mtu = HX_PATH_MTU,
                           .dest_qp_num = dqpn,
                           .rq_psn = rq_psn,
                           .max_dest_rd_atomic = HX_RD_ATOMIC,
                           .min_rnr_timer = HX_RNR_TIMER};
    memcpy(a.dgid, dgid, 16);
    uint32_t m = SR_QP_STATE | SR_QP_AV | SR_QP_PATH_MTU | SR_QP_DEST_QPN | SR_QP_RQ_PSN;
    if (rc)
        m |= SR_QP_MAX_DEST_RD_ATOMIC | SR_QP_MIN_RNR_TIMER;
    SR_CHECK_EQ(sr_qp_modify(qp, &a, m, 0), 0);
    a.qp_state = SR_QPS_RTS;
    a.sq_psn = sq_psn;
    a.timeout = timeout;
    a.retry_cnt = 7;
    a.rnr_retry = 7;
    a.max_rd_atomic = HX_RD_ATOMIC;
    m = SR_QP_STATE | SR_QP_SQ_PSN;
    if (rc)
        m |= SR_QP_TIMEOUT | SR_QP_RETRY_CNT | SR_QP_RNR_RETRY | SR_QP_MAX_QP_RD_ATOMIC;
    SR_CHECK_EQ(sr_qp_modify(qp, &a, m, 0), 0);
}

static void post_recv(struct sr_qp *qp, uint64_t id, uint8_t *addr, uint32_t len, struct sr_mr *mr)
{
    struct sr_sge sg = {(uintptr_t)addr, len, sr_mr_lkey(mr)};
    struct sr_recv_wr wr = {.wr_id = id, .sg_list = &sg, .num_sge = 1};
    SR_CHECK_EQ(sr_qp_post_recv(qp, &wr), 0);
}

/* victim.c's set-up, on the engine directly. */
static void victim_open(struct victim *v)
{
    memset(v, 0, sizeof(*v));
    struct sr_engine_cfg cfg = {.ops = {.tx = v_tx, .async_event = v_async}, .ops_ctx = v};
    memcpy(cfg.gid, gid_victim, 16);
    SR_CHECK_EQ(sr_engine_create(&cfg, &v->e), 0);
    SR_CHECK_EQ(sr_pd_alloc(v->e, &v->pd), 0);
    SR_CHECK_EQ(sr_cq_create(v->e, 64, &v->scq), 0);
    SR_CHECK_EQ(sr_cq_create(v->e, 16, &v->ud_cq), 0);
    SR_CHECK_EQ(sr_cq_create(v->e, 16, &v->uc_cq), 0);
    v->region = page_alloc(HX_REGION_LEN, HX_SEED_REGION);
    v->rbuf = page_alloc(HX_PAGE, HX_SEED_RBUF);
    v->udbuf = page_alloc(HX_PAGE, HX_SEED_UDBUF);
    v->lbuf = page_alloc(HX_PAGE, HX_SEED_LBUF);
    v->legit_mem = page_alloc(HX_PAGE, 0);
    const uint32_t all = SR_ACCESS_LOCAL_WRITE | SR_ACCESS_REMOTE_WRITE | SR_ACCESS_REMOTE_READ |
                         SR_ACCESS_REMOTE_ATOMIC;
    SR_CHECK_EQ(sr_mr_reg(v->pd, v->region + HX_A_OFF, HX_A_LEN, (uintptr_t)v->region + HX_A_OFF,
                          all, &v->mr_a),
                0);
    SR_CHECK_EQ(sr_mr_reg(v->pd, v->region + HX_B_OFF, HX_B_LEN, (uintptr_t)v->region + HX_B_OFF,
                          SR_ACCESS_REMOTE_READ, &v->mr_b),
                0);
    SR_CHECK_EQ(
        sr_mr_reg(v->pd, v->rbuf, HX_PAGE, (uintptr_t)v->rbuf, SR_ACCESS_LOCAL_WRITE, &v->mr_rbuf),
        0);
    SR_CHECK_EQ(sr_mr_reg(v->pd, v->udbuf, HX_PAGE, (uintptr_t)v->udbuf, SR_ACCESS_LOCAL_WRITE,
                          &v->mr_udbuf),
                0);
    SR_CHECK_EQ(
        sr_mr_reg(v->pd, v->lbuf, HX_PAGE, (uintptr_t)v->lbuf, SR_ACCESS_LOCAL_WRITE, &v->mr_lbuf),
        0);
    SR_CHECK_EQ(sr_mr_reg(v->pd, v->legit_mem, HX_PAGE, (uintptr_t)v->legit_mem, all, &v->mr_legit),
                0);
    for (int i = 0; i < HX_TARGETS; i++) {
        SR_CHECK_EQ(sr_cq_create(v->e, 8, &v->rcq[i]), 0);
        v->t[i] = qp_new(v, SR_QPT_RC, v->rcq[i]);
        v->epsn[i] = (0xfffffc + (uint32_t)i * 0x10101u) & SR_PSN_MASK;
        v->sq_psn[i] = (0x123456 + (uint32_t)i * 0x1111u) & SR_PSN_MASK;
        qp_connect(v->t[i], true, i == HX_T_NOWRITE ? SR_ACCESS_REMOTE_READ : all, gid_a,
                   FAKE_QPN_BASE + (uint32_t)i, v->epsn[i], v->sq_psn[i],
                   i == HX_T_SPARE ? HX_REQ_TIMEOUT : TIMEOUT_67MS);
        if (i != HX_T_SEQ) /* SEQ answers SENDs with RNR NAKs */
            post_recv(v->t[i], (uint64_t)i, v->rbuf + i * HX_RECV_SLOT, HX_RECV_LEN, v->mr_rbuf);
    }
    v->ud = qp_new(v, SR_QPT_UD, v->ud_cq);
    struct sr_qp_attr a = {.qp_state = SR_QPS_INIT, .port_num = 1, .qkey = HX_UD_QKEY};
    SR_CHECK_EQ(
        sr_qp_modify(v->ud, &a, SR_QP_STATE | SR_QP_PKEY_INDEX | SR_QP_PORT | SR_QP_QKEY, 0), 0);
    a.qp_state = SR_QPS_RTR;
    SR_CHECK_EQ(sr_qp_modify(v->ud, &a, SR_QP_STATE, 0), 0);
    a.qp_state = SR_QPS_RTS;
    a.sq_psn = 1;
    SR_CHECK_EQ(sr_qp_modify(v->ud, &a, SR_QP_STATE | SR_QP_SQ_PSN, 0), 0);
    for (uint32_t k = 0; k < HX_UD_RECVS; k++)
        post_recv(v->ud, k, v->udbuf + k * HX_UD_SLOT, HX_UD_RECV_LEN, v->mr_udbuf);
    v->uc = qp_new(v, SR_QPT_UC, v->uc_cq);
    v->uc_epsn = 0x00fff0;
    qp_connect(v->uc, false, SR_ACCESS_LOCAL_WRITE | SR_ACCESS_REMOTE_WRITE, gid_a,
               FAKE_QPN_BASE + HX_TARGETS, v->uc_epsn, 7, 0);
    v->legit = qp_new(v, SR_QPT_RC, NULL);
    qp_connect(v->legit, true, all, gid_legit, LEGIT_QPN, 0x424242, 0x111111, TIMEOUT_67MS);
    struct sr_qp *gone = qp_new(v, SR_QPT_RC, NULL);
    v->dead_qpn = sr_qp_num(gone);
    SR_CHECK_EQ(sr_qp_destroy(gone), 0);
    v->init = qp_new(v, SR_QPT_RC, NULL);
    qp_to_init(v->init, all);
}

static void victim_close(struct victim *v)
{
    sr_engine_destroy(v->e); /* with every QP, CQ, MR and PD in it */
    free(v->region);
    free(v->rbuf);
    free(v->udbuf);
    free(v->lbuf);
    free(v->legit_mem);
}

static bool is_target(const struct row *r)
{
    return r->dst >= 0 && r->dst < HX_TARGETS;
}

static uint32_t row_qpn(const struct victim *v, const struct row *r)
{
    switch (r->dst) {
    case D_UD:
        return sr_qp_num(v->ud);
    case D_UC:
        return sr_qp_num(v->uc);
    case D_LEGIT:
        return sr_qp_num(v->legit);
    case D_DEAD:
        return v->dead_qpn;
    case D_INIT:
        return sr_qp_num(v->init);
    case D_QPN:
        return r->qpn;
    default:
        return sr_qp_num(v->t[r->dst]);
    }
}

static uint64_t region_u64(const struct victim *v, int64_t off)
{
    uint64_t x = 0;
    if (off >= 0 && off + 8 <= HX_REGION_LEN)
        memcpy(&x, v->region + off, 8);
    return x;
}

static void fill_pat(uint8_t *p, uint32_t len, uint32_t seed, uint64_t pos)
{
    for (uint32_t i = 0; i < len; i++)
        p[i] = hx_pat(seed, pos + i);
}

/* A row's packet, as attack.c's build_row makes it: into buf, its length
 * (or a negative SR_ERR_*); *psn the PSN it carries. */
static int build(const struct victim *v, const struct row *r, uint8_t *buf, size_t cap,
                 uint8_t *payload, uint32_t *psn)
{
    const struct sr_opcode_info *info = sr_opcode_info(r->op);
    if (!info)
        return SR_ERR_WIRE_OPCODE;
    bool resp = info->flags & SR_OPF_RESPONSE;
    uint32_t base = 0;
    if (is_target(r))
        base = resp ? v->sq_psn[r->dst] : v->epsn[r->dst];
    else if (r->dst == D_LEGIT)
        base = 0x424242;
    else if (r->dst == D_UC)
        base = v->uc_epsn;
    *psn = r->fx & FX_REPLAY ? v->saved[r->slot].psn : sr_psn_add(base, (uint32_t)r->psn);
    uint64_t va = r->va == VA_REGION  ? (uintptr_t)v->region + (uint64_t)r->off
                  : r->va == VA_ABS   ? (uint64_t)r->off
                  : r->va == VA_LEGIT ? (uintptr_t)v->legit_mem + (uint64_t)r->off
                                      : 0;
    uint32_t rkey_a = sr_mr_rkey(v->mr_a);
    uint32_t key = r->key == KEY_A       ? rkey_a
                   : r->key == KEY_B     ? sr_mr_rkey(v->mr_b)
                   : r->key == KEY_BAD   ? rkey_a ^ 0xff /* same slot, wrong tag */
                   : r->key == KEY_LEGIT ? sr_mr_rkey(v->mr_legit)
                                         : 0;
    struct pb_pkt p = {.opcode = r->op,
                       .dest_qp = row_qpn(v, r),
                       .psn = *psn,
                       .ack_req = !resp && SR_OPCODE_TRANSPORT(r->op) == SR_OP_RC,
                       .va = va,
                       .rkey = key,
                       .dma_len = r->dma,
                       .swap_add = r->add,
                       .compare = r->cmp == CMP_MODEL   ? region_u64(v, r->off)
                                  : r->cmp == CMP_OTHER ? ~region_u64(v, r->off)
                                                        : 0,
                       .syndrome = r->syn,
                       .imm = UD_IMM,
                       .qkey = r->mut & MU_QKEY ? HX_UD_QKEY ^ 0x1000 : HX_UD_QKEY,
                       .src_qp = UD_FAKE_QPN,
                       .xrc_srqn = 1,
                       .src_gid = r->mut & MU_FROM_B ? gid_b : gid_a,
                       .dst_gid = gid_victim};
    if (SR_OPCODE_OP(r->op) == SR_OP_ATOMIC_ACK) {
        uint8_t orig[8];
        fill_pat(orig, 8, r->seed, HX_REQ_ATOMIC_OFF);
        memcpy(&p.atomic_orig, orig, 8);
    }
    if (r->len && (info->flags & SR_OPF_PAYLOAD)) {
        uint64_t pos = info->flags & SR_OPF_SEND ? 0 : (uint64_t)r->off;
        fill_pat(payload, r->len, r->seed, pos);
        p.payload = payload;
        p.payload_len = r->len;
    }
    int n = pb_build(&p, buf, cap);
    if (n < 0)
        return n;
    SR_CHECK(pb_icrc_ok(&p, buf, (size_t)n));
    size_t len = (size_t)n;
    uint32_t m = r->mut;
    if (m & MU_EXTRA) { /* payload where the opcode has none: before the ICRC slot */
        memset(buf + len - SR_ICRC_LEN, 0xab, r->arg);
        len += r->arg;
    }
    if (m & MU_TRUNC)
        len = r->arg;
    if (m & MU_OPCODE)
        buf[0] = (uint8_t)r->arg;
    if (m & MU_TVER)
        buf[1] |= 1;
    if (m & MU_PAD)
        buf[1] = (uint8_t)((buf[1] & ~0x30) | (r->arg << 4));
    if (m & MU_ACKREQ)
        buf[8] |= 0x80;
    if (len >= SR_BTH_LEN + SR_ICRC_LEN && pb_icrc_fill(&p, buf, len))
        return SR_ERR_INVAL;
    return (int)len;
}

/* The one packet the engine sent, decoded; false (a failed check) if it
 * sent none or more. */
static bool one_answer(struct victim *v, struct sr_pkt *p)
{
    SR_CHECK_EQ(v->nout, 1);
    if (v->nout != 1)
        return false;
    SR_CHECK_MEM(v->out[0].dgid, gid_a, 16);
    int n = sr_wire_decode(v->out[0].buf, v->out[0].len, 0, p);
    SR_CHECK(n >= 0);
    return n >= 0;
}

static void check_ack(struct victim *v, uint32_t fq, uint8_t syn_or_type, bool exact, uint32_t psn,
                      uint32_t msn)
{
    struct sr_pkt p;
    if (!one_answer(v, &p))
        return;
    SR_CHECK_EQ(p.bth.opcode, SR_OP_RC | SR_OP_ACK);
    SR_CHECK_EQ(p.bth.dest_qp, fq);
    SR_CHECK_EQ(p.bth.psn, psn);
    if (exact)
        SR_CHECK_EQ(p.aeth.syndrome, syn_or_type);
    else
        SR_CHECK_EQ(SR_AETH_TYPE(p.aeth.syndrome), syn_or_type);
    SR_CHECK_EQ(p.aeth.msn, msn);
}

static uint64_t stat_of(const struct sr_engine_stats *s, int exp)
{
    switch (exp) {
    case X_MALFORMED:
        return s->rx_drop_malformed;
    case X_NO_QP:
        return s->rx_drop_no_qp;
    case X_BAD_PEER:
        return s->rx_drop_bad_peer;
    case X_QKEY:
        return s->rx_drop_qkey;
    case X_OTHER:
        return s->rx_drop_other;
    default:
        return 0;
    }
}

/* the rows whose mutation is the driver's to catch, in the order met */
static const char *skipped[16];
static int nskipped;

/* Hands r's packet to the engine and checks what it must cause. */
static void run_row(struct victim *v, const struct row *r)
{
    sr_test_ctx = r->name;
    if (r->mut & MU_DRIVER) {
        if (nskipped < (int)SR_ARRAY_SIZE(skipped))
            skipped[nskipped++] = r->name;
        return;
    }
    static uint8_t buf[2 * 4096 + 256], payload[2 * 4096 + 256];
    static uint8_t before[HX_REGION_LEN], want[HX_REGION_LEN];
    uint32_t psn;
    int len = build(v, r, buf, sizeof(buf), payload, &psn);
    SR_CHECK(len >= 0);
    if (len < 0)
        return;
    const struct sr_opcode_info *info = sr_opcode_info(r->op);
    memcpy(before, v->region, HX_REGION_LEN);
    memcpy(want, v->region, HX_REGION_LEN);
    struct sr_engine_stats s0, s1;
    sr_engine_stats(v->e, &s0);
    v->nout = 0;
    v->now += 1000;
    sr_engine_rx(v->e, buf, (size_t)len, r->mut & MU_FROM_B ? gid_b : gid_a, v->now);
    if (sr_engine_next_deadline(v->e) <= v->now)
        sr_engine_advance(v->e, v->now);
    sr_engine_stats(v->e, &s1);

    int t = is_target(r) ? r->dst : -1;
    uint32_t fq = FAKE_QPN_BASE + (uint32_t)t;
    if (r->dst == D_UC)
        v->uc_epsn = sr_psn_add(psn, 1);
    switch (r->exp) {
    case X_ACK:
        SR_CHECK(t >= 0);
        if (t < 0)
            break;
        check_ack(v, fq, SR_AETH_ACK, false, psn, ++v->msn[t]);
        v->epsn[t] = sr_psn_add(psn, 1);
        if (r->len && (info->flags & SR_OPF_WRITE))
            memcpy(want + r->off, payload, r->len);
        if (r->len && (info->flags & SR_OPF_SEND)) {
            struct sr_wc wc;
            SR_CHECK_EQ(sr_cq_poll(v->rcq[t], 1, &wc), 1);
            SR_CHECK_EQ(wc.status, SR_WC_SUCCESS);
            SR_CHECK_EQ(wc.byte_len, r->len);
            SR_CHECK_MEM(v->rbuf + t * HX_RECV_SLOT, payload, r->len);
        }
        break;
    case X_NAK:
    case X_RNR:
        SR_CHECK(t >= 0);
        if (t < 0)
            break;
        /* IBA 9.7.5.1.2: a PSN sequence NAK names the PSN expected; the
         * others the PSN of the packet refused. Neither completes a
         * message, so the MSN stays. */
        check_ack(v, fq, r->syn, true, r->syn == 0x60 ? v->epsn[t] : psn, v->msn[t]);
        if (r->exp == X_RNR)
            SR_CHECK_EQ(s1.rnr_naks_sent - s0.rnr_naks_sent, 1);
        else if (r->syn == 0x60)
            SR_CHECK_EQ(s1.seq_naks_sent - s0.seq_naks_sent, 1);
        else
            SR_CHECK_EQ(s1.err_naks_sent - s0.err_naks_sent, 1);
        break;
    case X_READ: {
        SR_CHECK(t >= 0);
        if (t < 0)
            break;
        uint32_t npkts = r->dma ? (r->dma + HX_PATH_MTU - 1) / HX_PATH_MTU : 1;
        SR_CHECK_EQ(v->nout, npkts);
        bool replay = r->fx & FX_REPLAY;
        if (!replay)
            v->msn[t]++;
        for (uint32_t k = 0; k < npkts && k < (uint32_t)v->nout; k++) {
            struct sr_pkt p;
            SR_CHECK(sr_wire_decode(v->out[k].buf, v->out[k].len, 0, &p) >= 0);
            uint32_t chunk = r->dma ? SR_MIN(HX_PATH_MTU, r->dma - k * HX_PATH_MTU) : 0;
            uint8_t op = npkts == 1       ? SR_OP_READ_RESP_ONLY
                         : k == 0         ? SR_OP_READ_RESP_FIRST
                         : k == npkts - 1 ? SR_OP_READ_RESP_LAST
                                          : SR_OP_READ_RESP_MIDDLE;
            SR_CHECK_EQ(p.bth.opcode, SR_OP_RC | op);
            SR_CHECK_EQ(p.bth.dest_qp, fq);
            SR_CHECK_EQ(p.bth.psn, sr_psn_add(psn, k));
            SR_CHECK_EQ(p.payload_len, chunk);
            if (chunk && p.payload_len == chunk)
                SR_CHECK_MEM(p.payload, v->region + r->off + (int64_t)k * HX_PATH_MTU, chunk);
            if (op != SR_OP_READ_RESP_MIDDLE) {
                SR_CHECK_EQ(SR_AETH_TYPE(p.aeth.syndrome), SR_AETH_ACK);
                if (!replay)
                    SR_CHECK_EQ(p.aeth.msn, v->msn[t]);
            }
        }
        if (!replay)
            v->epsn[t] = sr_psn_add(psn, npkts);
        if (r->fx & FX_SAVE)
            v->saved[r->slot].psn = psn;
        break;
    }
    case X_ATOMIC: {
        SR_CHECK(t >= 0);
        if (t < 0)
            break;
        bool replay = r->fx & FX_REPLAY;
        uint64_t cur;
        memcpy(&cur, before + r->off, 8);
        struct sr_pkt p;
        if (one_answer(v, &p)) {
            SR_CHECK_EQ(p.bth.opcode, SR_OP_RC | SR_OP_ATOMIC_ACK);
            SR_CHECK_EQ(p.bth.dest_qp, fq);
            SR_CHECK_EQ(p.bth.psn, psn);
            SR_CHECK_EQ(SR_AETH_TYPE(p.aeth.syndrome), SR_AETH_ACK);
            /* IBA 9.7.5.1.4: a duplicate is answered from the saved result */
            SR_CHECK_EQ(p.atomic_orig, replay ? v->saved[r->slot].orig : cur);
            if (!replay)
                SR_CHECK_EQ(p.aeth.msn, v->msn[t] + 1);
        }
        if (replay)
            break;
        v->msn[t]++;
        v->epsn[t] = sr_psn_add(psn, 1);
        uint64_t next = cur;
        if (SR_OPCODE_OP(r->op) == SR_OP_FETCH_ADD)
            next = cur + r->add;
        else if (r->cmp == CMP_MODEL)
            next = r->add;
        memcpy(want + r->off, &next, 8);
        if (r->fx & FX_SAVE) {
            v->saved[r->slot].psn = psn;
            v->saved[r->slot].orig = cur;
        }
        break;
    }
    case X_DUP_ACK:
        SR_CHECK(t >= 0);
        if (t >= 0)
            check_ack(v, fq, SR_AETH_ACK, false, sr_psn_add(v->epsn[t], SR_PSN_MASK), v->msn[t]);
        break;
    case X_SILENT:
        SR_CHECK_EQ(v->nout, 0);
        if (r->dst == D_UC && r->len && (info->flags & SR_OPF_WRITE))
            memcpy(want + r->off, payload, r->len);
        if (r->dst == D_UD) {
            struct sr_wc wc;
            SR_CHECK_EQ(sr_cq_poll(v->ud_cq, 1, &wc), 1);
            SR_CHECK_EQ(wc.status, SR_WC_SUCCESS);
            SR_CHECK_EQ(wc.byte_len, 40 + r->len); /* the GRH first */
            SR_CHECK_EQ(wc.src_qp, UD_FAKE_QPN);
            SR_CHECK_EQ(!!(wc.wc_flags & SR_WC_WITH_IMM), !!(info->flags & SR_OPF_IMM));
            SR_CHECK_MEM(v->udbuf + v->ud_delivered * HX_UD_SLOT + 40, payload, r->len);
            v->ud_delivered++;
        }
        break;
    default: { /* dropped: exactly the row's counter moves */
        SR_CHECK_EQ(v->nout, 0);
        int counter = r->exp == X_UNCOUNTED ? X_OTHER : r->exp;
        for (int x = X_MALFORMED; x <= X_OTHER; x++)
            SR_CHECK_EQ(stat_of(&s1, x) - stat_of(&s0, x), x == counter);
        break;
    }
    }
    if (r->exp < X_MALFORMED)
        for (int x = X_MALFORMED; x <= X_OTHER; x++)
            SR_CHECK_EQ(stat_of(&s1, x), stat_of(&s0, x));
    SR_CHECK_EQ(s1.sack_bad - s0.sack_bad, r->exp == X_SACK_BAD);
    SR_CHECK_EQ(s1.sacks_rcvd, s0.sacks_rcvd); /* no forged SACK is ever taken */
    SR_CHECK_EQ(s1.rx_duplicate - s0.rx_duplicate, !!(r->fx & FX_DUP));
    SR_CHECK_EQ(s1.err_naks_rcvd - s0.err_naks_rcvd, !!(r->fx & FX_ERR_RCVD));
    SR_CHECK_EQ(s1.rnr_naks_rcvd - s0.rnr_naks_rcvd, !!(r->fx & FX_RNR_RCVD));
    /* only the writes the row was granted changed the victim's memory */
    SR_CHECK_MEM(v->region, want, HX_REGION_LEN);
}

static void run_rows(struct victim *v, const struct row *rows, size_t n)
{
    for (size_t i = 0; i < n; i++)
        run_row(v, &rows[i]);
}

static enum sr_qp_state qp_state(struct sr_qp *qp)
{
    struct sr_qp_attr a;
    sr_qp_query(qp, &a, NULL);
    return a.qp_state;
}

static void test_good_rows(void)
{
    struct victim v;
    victim_open(&v);
    run_rows(&v, good_rows, SR_ARRAY_SIZE(good_rows));
    sr_test_ctx = "good rows: after";
    SR_CHECK_EQ(qp_state(v.t[HX_T_GOOD]), SR_QPS_RTS);
    victim_close(&v);
}

static void test_seq_rows(void)
{
    struct victim v;
    victim_open(&v);
    run_rows(&v, seq_rows, SR_ARRAY_SIZE(seq_rows));
    sr_test_ctx = "seq rows: after";
    /* RNR NAKs, sequence NAKs and forged responses leave the QP usable */
    SR_CHECK_EQ(qp_state(v.t[HX_T_SEQ]), SR_QPS_RTS);
    struct sr_wc wc;
    SR_CHECK_EQ(sr_cq_poll(v.scq, 1, &wc), 0); /* nothing completed on its idle send queue */
    victim_close(&v);
}

/* One error class per fresh QP: a valid request first (so the NAK is the
 * defect's doing), the row, then a valid request that the QP, now in
 * Error, drops. */
static void test_fatal_rows(void)
{
    struct victim v;
    victim_open(&v);
    for (size_t i = 0; i < SR_ARRAY_SIZE(fatal_rows); i++) {
        struct row pre;
        struct row r = fatal_row(i, &pre);
        run_row(&v, &pre);
        int before = v.events[SR_EVENT_QP_ACCESS_ERR] + v.events[SR_EVENT_QP_REQ_ERR];
        run_row(&v, &r);
        sr_test_ctx = r.name;
        SR_CHECK_EQ(qp_state(v.t[r.dst]), SR_QPS_ERR);
        /* IBA 11.6.3.1: the responder's error is an affiliated async event */
        enum sr_event_type ev = r.syn == 0x62 ? SR_EVENT_QP_ACCESS_ERR : SR_EVENT_QP_REQ_ERR;
        SR_CHECK_EQ(v.events[SR_EVENT_QP_ACCESS_ERR] + v.events[SR_EVENT_QP_REQ_ERR], before + 1);
        SR_CHECK(v.events[ev] > 0 && v.event_obj == v.t[r.dst]);
        /* its receive: failed with a length error, or flushed */
        struct sr_wc wc;
        SR_CHECK_EQ(sr_cq_poll(v.rcq[r.dst], 1, &wc), 1);
        SR_CHECK_EQ(wc.status,
                    SR_OPCODE_OP(r.op) == SR_OP_SEND_ONLY ? SR_WC_LOC_LEN_ERR : SR_WC_WR_FLUSH_ERR);
        struct row after = {"valid_write_after_error_nak",
                            r.dst,
                            RC(WRITE_ONLY),
                            0,
                            VA_ABS,
                            0,
                            KEY_BAD,
                            0,
                            0,
                            .exp = X_NO_QP};
        run_row(&v, &after);
    }
    victim_close(&v);
}

static void test_malformed_and_noqp_rows(void)
{
    struct victim v;
    victim_open(&v);
    run_rows(&v, malformed_rows, SR_ARRAY_SIZE(malformed_rows));
    run_rows(&v, noqp_rows, SR_ARRAY_SIZE(noqp_rows));
    uint8_t legit_before[HX_PAGE];
    memcpy(legit_before, v.legit_mem, HX_PAGE);
    run_rows(&v, legit_rows, SR_ARRAY_SIZE(legit_rows));
    sr_test_ctx = "malformed rows: after";
    SR_CHECK_MEM(v.legit_mem, legit_before, HX_PAGE); /* IBA 9.6.1.5: not from its peer */
    SR_CHECK_EQ(qp_state(v.t[HX_T_PING]), SR_QPS_RTS);
    SR_CHECK_EQ(qp_state(v.legit), SR_QPS_RTS);
    victim_close(&v);
}

static void test_ud_uc_rows(void)
{
    struct victim v;
    victim_open(&v);
    run_rows(&v, ud_rows, SR_ARRAY_SIZE(ud_rows));
    run_rows(&v, uc_rows, SR_ARRAY_SIZE(uc_rows));
    sr_test_ctx = "ud/uc rows: after";
    SR_CHECK_EQ(v.ud_delivered, HX_UD_RECVS);
    SR_CHECK_EQ(qp_state(v.ud), SR_QPS_RTS);
    SR_CHECK_EQ(qp_state(v.uc), SR_QPS_RTS); /* UC errors drop, the QP stays up */
    victim_close(&v);
}

/* The victim as requester: its READ and FETCH_ADD on HX_T_SPARE leave as
 * posted; responses that do not fit what it asked for change nothing; the
 * right ones complete both with the bytes they carry. */
static void test_requester_rows(void)
{
    struct victim v;
    victim_open(&v);
    sr_test_ctx = "victim_requests";
    struct sr_qp *qp = v.t[HX_T_SPARE];
    struct sr_sge rs = {(uintptr_t)v.lbuf, HX_REQ_READ_LEN, sr_mr_lkey(v.mr_lbuf)};
    struct sr_sge as = {(uintptr_t)v.lbuf + HX_REQ_ATOMIC_OFF, 8, sr_mr_lkey(v.mr_lbuf)};
    struct sr_send_wr rd = {.wr_id = 1,
                            .sg_list = &rs,
                            .num_sge = 1,
                            .opcode = SR_WR_RDMA_READ,
                            .send_flags = SR_SEND_SIGNALED,
                            .remote_addr = HX_REQ_VA,
                            .rkey = HX_REQ_RKEY};
    struct sr_send_wr fa = {.wr_id = 2,
                            .sg_list = &as,
                            .num_sge = 1,
                            .opcode = SR_WR_ATOMIC_FETCH_AND_ADD,
                            .send_flags = SR_SEND_SIGNALED,
                            .compare_add = HX_REQ_ADD,
                            .remote_addr = HX_REQ_VA + HX_PAGE,
                            .rkey = HX_REQ_RKEY};
    v.nout = 0;
    SR_CHECK_EQ(sr_qp_post_send(qp, &rd, v.now), 0);
    SR_CHECK_EQ(sr_qp_post_send(qp, &fa, v.now), 0);
    SR_CHECK_EQ(v.nout, 2);
    uint32_t s = v.sq_psn[HX_T_SPARE];
    struct sr_pkt p;
    if (v.nout == 2 && sr_wire_decode(v.out[0].buf, v.out[0].len, 0, &p) >= 0) {
        SR_CHECK_EQ(p.bth.opcode, RC(READ_REQ));
        SR_CHECK_EQ(p.bth.dest_qp, FAKE_QPN_BASE + HX_T_SPARE);
        SR_CHECK_EQ(p.bth.psn, s);
        SR_CHECK_EQ(p.reth.va, HX_REQ_VA);
        SR_CHECK_EQ(p.reth.rkey, HX_REQ_RKEY);
        SR_CHECK_EQ(p.reth.dma_len, HX_REQ_READ_LEN);
    }
    if (v.nout == 2 && sr_wire_decode(v.out[1].buf, v.out[1].len, 0, &p) >= 0) {
        SR_CHECK_EQ(p.bth.opcode, RC(FETCH_ADD));
        SR_CHECK_EQ(p.bth.psn, sr_psn_add(s, 1));
        SR_CHECK_EQ(p.atomic.va, HX_REQ_VA + HX_PAGE);
        SR_CHECK_EQ(p.atomic.rkey, HX_REQ_RKEY);
        SR_CHECK_EQ(p.atomic.swap_add, HX_REQ_ADD);
    }
    uint8_t lbuf_before[HX_PAGE];
    memcpy(lbuf_before, v.lbuf, HX_PAGE);
    for (size_t i = 0; i < SR_ARRAY_SIZE(requester_rows); i++) {
        const struct row *r = &requester_rows[i];
        run_row(&v, r);
        if (r->exp == X_SILENT && SR_OPCODE_OP(r->op) == SR_OP_ATOMIC_ACK)
            fill_pat(lbuf_before + HX_REQ_ATOMIC_OFF, 8, r->seed, HX_REQ_ATOMIC_OFF);
        else if (r->exp == X_SILENT)
            fill_pat(lbuf_before, r->len, r->seed, 0);
        /* the local buffer holds what the accepted responses carried, no more */
        SR_CHECK_MEM(v.lbuf, lbuf_before, HX_PAGE);
    }
    sr_test_ctx = "victim_requests: completions";
    struct sr_wc wc[2];
    SR_CHECK_EQ(sr_cq_poll(v.scq, 2, wc), 2);
    SR_CHECK_EQ(wc[0].wr_id, 1);
    SR_CHECK_EQ(wc[0].status, SR_WC_SUCCESS);
    SR_CHECK_EQ(wc[1].wr_id, 2);
    SR_CHECK_EQ(wc[1].status, SR_WC_SUCCESS);
    SR_CHECK_EQ(qp_state(qp), SR_QPS_RTS);
    victim_close(&v);
}

/* The builder itself: every header the opcode carries, at the wire's
 * offsets, and an ICRC that a changed byte no longer matches. */
static void test_builder(void)
{
    static const uint8_t data[12] = "abcdefghijk";
    struct pb_pkt p = {.opcode = SR_OP_RC | SR_OP_SEND_ONLY_IMM,
                       .dest_qp = 0x123456,
                       .psn = 0xfffffe,
                       .ack_req = true,
                       .imm = 0x01020304,
                       .payload = data,
                       .payload_len = 11,
                       .src_gid = gid_a,
                       .dst_gid = gid_victim};
    uint8_t buf[128];
    int n = pb_build(&p, buf, sizeof(buf));
    SR_CHECK_EQ(n, SR_BTH_LEN + 4 + 12 + SR_ICRC_LEN); /* ImmDt, 11 bytes padded to 12 */
    struct sr_pkt d;
    SR_CHECK(sr_wire_decode(buf, (size_t)n, 1024, &d) >= 0);
    SR_CHECK_EQ(d.bth.opcode, p.opcode);
    SR_CHECK_EQ(d.bth.dest_qp, 0x123456);
    SR_CHECK_EQ(d.bth.psn, 0xfffffe);
    SR_CHECK_EQ(d.bth.pad_cnt, 1);
    SR_CHECK_EQ(d.bth.pkey, 0xffff);
    SR_CHECK(d.bth.ack_req);
    SR_CHECK_EQ(d.imm, 0x01020304);
    SR_CHECK_EQ(d.payload_len, 11);
    SR_CHECK_MEM(d.payload, data, 11);
    SR_CHECK(pb_icrc_ok(&p, buf, (size_t)n));
    buf[SR_BTH_LEN + 5] ^= 1;
    SR_CHECK(!pb_icrc_ok(&p, buf, (size_t)n));
    struct pb_pkt other = p;
    other.src_gid = gid_b; /* the ICRC covers the IP addresses (IBA A17.3.3) */
    buf[SR_BTH_LEN + 5] ^= 1;
    SR_CHECK(!pb_icrc_ok(&other, buf, (size_t)n));

    struct pb_pkt a = {.opcode = SR_OP_RC | SR_OP_CMP_SWAP,
                       .dest_qp = 7,
                       .psn = 9,
                       .va = 0x1122334455667788ull,
                       .rkey = 0xabcdef01,
                       .swap_add = 5,
                       .compare = 6,
                       .src_gid = gid_a,
                       .dst_gid = gid_victim};
    n = pb_build(&a, buf, sizeof(buf));
    SR_CHECK_EQ(n, SR_BTH_LEN + SR_ATOMIC_ETH_LEN + SR_ICRC_LEN);
    SR_CHECK(sr_wire_decode(buf, (size_t)n, 0, &d) >= 0);
    SR_CHECK_EQ(d.atomic.va, a.va);
    SR_CHECK_EQ(d.atomic.rkey, a.rkey);
    SR_CHECK_EQ(d.atomic.swap_add, 5);
    SR_CHECK_EQ(d.atomic.compare, 6);

    struct pb_pkt k = {.opcode = SR_OP_RC | SR_OP_ACK,
                       .psn = 3,
                       .syndrome = 0x62,
                       .msn = 0xabcdef,
                       .src_gid = gid_a,
                       .dst_gid = gid_victim};
    n = pb_build(&k, buf, sizeof(buf));
    SR_CHECK(sr_wire_decode(buf, (size_t)n, 0, &d) >= 0);
    SR_CHECK_EQ(d.aeth.syndrome, 0x62);
    SR_CHECK_EQ(d.aeth.msn, 0xabcdef);
    /* a payload on an opcode without one is the encoder's error */
    k.payload = data;
    k.payload_len = 4;
    SR_CHECK(pb_build(&k, buf, sizeof(buf)) < 0);
}

int main(void)
{
    SR_RUN(test_builder);
    SR_RUN(test_good_rows);
    SR_RUN(test_seq_rows);
    SR_RUN(test_fatal_rows);
    SR_RUN(test_malformed_and_noqp_rows);
    SR_RUN(test_ud_uc_rows);
    SR_RUN(test_requester_rows);
    printf("rows left to the driver (ICRC and datagram checks):");
    for (int i = 0; i < nskipped; i++)
        printf(" %s", skipped[i]);
    printf("\n");
    return SR_TEST_RESULT();
}

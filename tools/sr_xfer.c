/* sr_xfer.c: the verified two-node transfer runner (see sr_xfer.h).
 *
 * Memory: each side has one buffer of nslots slots, one per message in
 * flight (message i uses slot i % nslots), each slot `len` bytes of data
 * followed by a canary up to the next 64-byte boundary (at least 64 bytes).
 * A slot is reused only after its message has retired: every completion it
 * produces has been checked and its destination verified. Duplicates and
 * retransmissions that arrive after that must not touch it, which the
 * final re-verification after the drain checks.
 *
 * Flow: post the first nslots messages, then sr_sim_run with a stop
 * callback (xfer_step) that, after every simulator event, polls the
 * requester's send CQ and the responder's receive CQ, retires what is
 * complete and posts more. Once the last message retires the simulator
 * drains until idle and the end state is checked.
 */
#include "sr_xfer.h"
#include "sr_util.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

enum {
    XFER_CANARY = 64,
    XFER_ALIGN = 64,
    XFER_POLL = 32,
};

/* wr_ids carry a tag per queue so a completion from the wrong queue, or a
 * zeroed wr_id, cannot pass for a real one. */
#define XFER_WRID_SEND 0x5e00000000000000ull
#define XFER_WRID_RECV 0x7e00000000000000ull

/* Where the buffers appear to the peer: far from their host addresses, so
 * a confusion of iova and address shows up as an access error. */
#define XFER_IOVA_REQ  0x0000100000000000ull
#define XFER_IOVA_RESP 0x0000200000000000ull

struct xfer {
    const struct sr_xfer_cfg *cfg;
    struct sr_xfer_result *res;
    struct sr_xfer_pair pair;
    uint8_t *buf[2];
    size_t buf_len;
    struct sr_mr *mr[2];
    uint64_t iova[2];
    uint32_t len;          /* data bytes per slot: size, or 8 for atomics */
    size_t stride;         /* slot pitch: len + canary, 64-byte aligned */
    uint64_t nslots;       /* messages in flight at most */
    uint64_t *expect_orig; /* atomics: per slot, the original value due */
    uint64_t model;        /* atomics: the target's value after all posted */
    uint64_t posted, send_done, recv_done, retired;
    uint64_t t_start, t_last;
    bool recv;     /* every message consumes a receive WQE */
    bool atomic;   /* CAS or FAA */
    bool deferred; /* UC WRITE: nothing tells when data lands; verify at the end */
    bool done, failed;
};

/* ---- small helpers ---- */

static const char *const op_names[SR_XFER_OP_CNT] = {
    [SR_XFER_SEND] = "send",   [SR_XFER_SEND_IMM] = "send_imm",
    [SR_XFER_WRITE] = "write", [SR_XFER_WRITE_IMM] = "write_imm",
    [SR_XFER_READ] = "read",   [SR_XFER_CAS] = "cas",
    [SR_XFER_FAA] = "faa",
};

const char *sr_xfer_op_name(enum sr_xfer_op op)
{
    return (unsigned)op < SR_XFER_OP_CNT ? op_names[op] : "?";
}

int sr_xfer_op_parse(const char *name, enum sr_xfer_op *out)
{
    for (int i = 0; i < SR_XFER_OP_CNT; i++) {
        if (!strcmp(name, op_names[i])) {
            *out = (enum sr_xfer_op)i;
            return 0;
        }
    }
    return SR_ERR_INVAL;
}

void sr_xfer_cfg_init(struct sr_xfer_cfg *cfg)
{
    memset(cfg, 0, sizeof(*cfg));
    cfg->op = SR_XFER_SEND;
    cfg->qp_type = SR_QPT_RC;
    cfg->size = 4096;
    cfg->count = 100;
    cfg->depth = 16;
    cfg->mtu = 4096;
    cfg->link.rate_bps = 10000000000ull;
    cfg->link.delay_ns = 2000;
    cfg->link.queue_bytes = 16u << 20;
    cfg->seed = 1;
    /* 4.2 ms: a tail loss costs one timer, so lossy runs should not sit in
     * the 16.8 ms verbs default for every one of them. */
    cfg->timeout = 10;
    cfg->retry_cnt = 7;
    cfg->rnr_retry = 7;
    cfg->min_rnr_timer = 1;
    cfg->start_psn = 0xfffff0; /* runs cross the 2^24 wrap within 16 packets */
}

static uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Key of message i: its data pattern, immediate and atomic operands. */
static uint64_t msg_key(const struct xfer *x, uint64_t i)
{
    return mix64(mix64(x->cfg->seed ^ 0x5eed5eed5eed5eedull) + mix64(i + 0x9e3779b97f4a7c15ull));
}

/* A bijection of i (mod 2^32) offset by the seed: distinct per message. */
static uint32_t msg_imm(const struct xfer *x, uint64_t i)
{
    return (uint32_t)mix64(x->cfg->seed) ^ ((uint32_t)i * 0x9e3779b1u);
}

/* The pattern of a key, 8 bytes per step; `invert` gives its complement, the
 * poison a destination holds until the message lands, so a write that
 * never happened cannot pass even for a 1-byte message. */
static void pattern_fill(uint8_t *p, size_t n, uint64_t key, bool invert)
{
    uint64_t s = key;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        s += 0x9e3779b97f4a7c15ull;
        uint64_t v = mix64(s);
        if (invert)
            v = ~v;
        memcpy(p + i, &v, 8);
    }
    if (i < n) {
        s += 0x9e3779b97f4a7c15ull;
        uint64_t v = mix64(s);
        if (invert)
            v = ~v;
        memcpy(p + i, &v, n - i);
    }
}

/* Offset of the first byte that differs from the pattern, or n. */
static size_t pattern_check(const uint8_t *p, size_t n, uint64_t key, uint8_t *want)
{
    uint64_t s = key;
    for (size_t i = 0; i < n; i += 8) {
        s += 0x9e3779b97f4a7c15ull;
        uint64_t v = mix64(s);
        uint8_t b[8];
        memcpy(b, &v, 8);
        size_t m = SR_MIN((size_t)8, n - i);
        if (memcmp(p + i, b, m)) {
            for (size_t k = 0; k < m; k++) {
                if (p[i + k] != b[k]) {
                    *want = b[k];
                    return i + k;
                }
            }
        }
    }
    return n;
}

static uint8_t canary_byte(int side, uint64_t slot, size_t k)
{
    return (uint8_t)(0xa5 ^ (slot * 7 + k * 13 + (size_t)side * 101));
}

static uint8_t *slot_ptr(const struct xfer *x, int side, uint64_t slot)
{
    return x->buf[side] + slot * x->stride;
}

static void canary_fill(struct xfer *x, int side, uint64_t slot)
{
    uint8_t *p = slot_ptr(x, side, slot);
    for (size_t k = x->len; k < x->stride; k++)
        p[k] = canary_byte(side, slot, k);
}

static uint64_t now(const struct xfer *x)
{
    return sr_sim_now(x->pair.sim);
}

static bool fail(struct xfer *x, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static bool fail(struct xfer *x, const char *fmt, ...)
{
    if (x->failed)
        return false;
    x->failed = true;
    int n = snprintf(x->res->error, sizeof(x->res->error), "t=%.6f ms: ", (double)now(x) / 1e6);
    if (n < 0 || (size_t)n >= sizeof(x->res->error))
        n = 0;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(x->res->error + n, sizeof(x->res->error) - (size_t)n, fmt, ap);
    va_end(ap);
    return false;
}

static bool canary_check(struct xfer *x, int side, uint64_t slot, uint64_t msg)
{
    const uint8_t *p = slot_ptr(x, side, slot);
    for (size_t k = x->len; k < x->stride; k++) {
        if (p[k] != canary_byte(side, slot, k))
            return fail(x,
                        "msg %" PRIu64 ": canary after %s slot %" PRIu64
                        " overwritten at +%zu (0x%02x, expected 0x%02x)",
                        msg, side ? "responder" : "requester", slot, k - x->len, p[k],
                        canary_byte(side, slot, k));
    }
    return true;
}

/* ---- the connected pair ---- */

static void pair_addr(uint8_t addr[16], bool ipv6, int node)
{
    if (ipv6) {
        memset(addr, 0, 16);
        addr[0] = 0xfd;
        addr[15] = (uint8_t)(node + 1);
    } else {
        const uint8_t v4[4] = {10, 0, 0, (uint8_t)(node + 1)};
        sr_sim_addr_v4(addr, v4);
    }
}

static int pair_qp_connect(const struct sr_xfer_cfg *cfg, struct sr_xfer_pair *p, int i)
{
    struct sr_qp *qp = p->qp[i];
    bool rc = cfg->qp_type == SR_QPT_RC;
    struct sr_qp_attr a = {
        .qp_state = SR_QPS_INIT,
        .port_num = 1,
        .qp_access_flags = rc ? SR_ACCESS_LOCAL_WRITE | SR_ACCESS_REMOTE_WRITE |
                                    SR_ACCESS_REMOTE_READ | SR_ACCESS_REMOTE_ATOMIC
                              : SR_ACCESS_LOCAL_WRITE | SR_ACCESS_REMOTE_WRITE,
    };
    int err =
        sr_qp_modify(qp, &a, SR_QP_STATE | SR_QP_PKEY_INDEX | SR_QP_PORT | SR_QP_ACCESS_FLAGS, 0);
    if (err)
        return err;
    /* Requester PSNs start at start_psn, the responder's own send PSNs a
     * little later, so each direction's numbering is distinct. */
    uint32_t psn[2] = {cfg->start_psn & SR_PSN_MASK, sr_psn_add(cfg->start_psn, 8)};
    a.qp_state = SR_QPS_RTR;
    a.path_mtu = cfg->mtu;
    a.dest_qp_num = sr_qp_num(p->qp[1 - i]);
    a.rq_psn = psn[1 - i];
    a.max_dest_rd_atomic = SR_MAX_RD_ATOMIC;
    a.min_rnr_timer = cfg->min_rnr_timer;
    memcpy(a.dgid, sr_engine_gid(p->eng[1 - i]), 16);
    uint32_t m = SR_QP_STATE | SR_QP_AV | SR_QP_PATH_MTU | SR_QP_DEST_QPN | SR_QP_RQ_PSN;
    if (rc)
        m |= SR_QP_MAX_DEST_RD_ATOMIC | SR_QP_MIN_RNR_TIMER;
    err = sr_qp_modify(qp, &a, m, 0);
    if (err)
        return err;
    a.qp_state = SR_QPS_RTS;
    a.sq_psn = psn[i];
    a.timeout = cfg->timeout;
    a.retry_cnt = cfg->retry_cnt;
    a.rnr_retry = cfg->rnr_retry;
    a.max_rd_atomic = (uint8_t)SR_MIN(SR_MAX(cfg->depth, 1u), (uint32_t)SR_MAX_RD_ATOMIC);
    m = SR_QP_STATE | SR_QP_SQ_PSN;
    if (rc)
        m |= SR_QP_TIMEOUT | SR_QP_RETRY_CNT | SR_QP_RNR_RETRY | SR_QP_MAX_QP_RD_ATOMIC;
    return sr_qp_modify(qp, &a, m, 0);
}

int sr_xfer_pair_create(const struct sr_xfer_cfg *cfg, struct sr_xfer_pair *p)
{
    memset(p, 0, sizeof(*p));
    int err = SR_ERR_NOMEM;
    p->sim = sr_sim_create(cfg->seed);
    if (!p->sim)
        goto err;
    uint32_t wr = SR_MAX(cfg->depth, 1u);
    for (int i = 0; i < 2; i++) {
        uint8_t addr[16];
        pair_addr(addr, cfg->ipv6, i);
        struct sr_engine_cfg ec = {.window_pkts = cfg->window_pkts,
                                   .cc = cfg->cc,
                                   .sack = cfg->sack,
                                   .qdelay_ns = cfg->qdelay_ns};
        err = sr_sim_node_create(p->sim, addr, &ec, &p->node[i]);
        if (err)
            goto err;
        p->eng[i] = sr_sim_node_engine(p->node[i]);
    }
    err =
        sr_sim_connect(p->sim, sr_sim_node_id(p->node[0]), sr_sim_node_id(p->node[1]), &cfg->link);
    if (err)
        goto err;
    for (int i = 0; i < 2; i++) {
        /* Room for every completion of a full queue on both sides, plus
         * flushes: polling is per event, so this never fills. */
        if ((err = sr_pd_alloc(p->eng[i], &p->pd[i])) ||
            (err = sr_cq_create(p->eng[i], 2 * wr + 16, &p->scq[i])) ||
            (err = sr_cq_create(p->eng[i], 2 * wr + 16, &p->rcq[i])))
            goto err;
        struct sr_qp_init_attr ia = {
            .qp_type = cfg->qp_type,
            .send_cq = p->scq[i],
            .recv_cq = p->rcq[i],
            .cap = {.max_send_wr = wr, .max_recv_wr = wr, .max_send_sge = 1, .max_recv_sge = 1},
        };
        err = sr_qp_create(p->pd[i], &ia, &p->qp[i]);
        if (err)
            goto err;
    }
    for (int i = 0; i < 2; i++) {
        err = pair_qp_connect(cfg, p, i);
        if (err)
            goto err;
    }
    return 0;

err:
    sr_xfer_pair_destroy(p);
    return err;
}

void sr_xfer_pair_destroy(struct sr_xfer_pair *p)
{
    sr_sim_destroy(p->sim);
    for (int i = 0; i < 2; i++)
        sr_sim_node_destroy(p->node[i]); /* the engine frees its QPs, CQs, MRs, PD */
    memset(p, 0, sizeof(*p));
}

/* ---- posting ---- */

static enum sr_wr_opcode wr_opcode(enum sr_xfer_op op)
{
    switch (op) {
    case SR_XFER_SEND:
        return SR_WR_SEND;
    case SR_XFER_SEND_IMM:
        return SR_WR_SEND_WITH_IMM;
    case SR_XFER_WRITE:
        return SR_WR_RDMA_WRITE;
    case SR_XFER_WRITE_IMM:
        return SR_WR_RDMA_WRITE_WITH_IMM;
    case SR_XFER_READ:
        return SR_WR_RDMA_READ;
    case SR_XFER_CAS:
        return SR_WR_ATOMIC_CMP_AND_SWP;
    default:
        return SR_WR_ATOMIC_FETCH_AND_ADD;
    }
}

static enum sr_wc_opcode wc_send_opcode(enum sr_xfer_op op)
{
    switch (op) {
    case SR_XFER_WRITE:
    case SR_XFER_WRITE_IMM:
        return SR_WC_RDMA_WRITE;
    case SR_XFER_READ:
        return SR_WC_RDMA_READ;
    case SR_XFER_CAS:
        return SR_WC_COMP_SWAP;
    case SR_XFER_FAA:
        return SR_WC_FETCH_ADD;
    default:
        return SR_WC_SEND;
    }
}

static bool has_imm(enum sr_xfer_op op)
{
    return op == SR_XFER_SEND_IMM || op == SR_XFER_WRITE_IMM;
}

static bool post_msg(struct xfer *x, uint64_t i)
{
    const struct sr_xfer_cfg *cfg = x->cfg;
    uint64_t s = i % x->nslots;
    uint64_t key = msg_key(x, i);
    if (x->recv) {
        /* The receive buffer is the slot and its canary: a message longer
         * than size is then accepted by the engine and caught here (by
         * byte_len and the canary) rather than hidden by a length error. */
        struct sr_sge rs = {x->iova[1] + s * x->stride, (uint32_t)x->stride, sr_mr_lkey(x->mr[1])};
        bool data = cfg->op != SR_XFER_WRITE_IMM; /* WRITE w/ imm only takes the WQE */
        struct sr_recv_wr rwr = {
            .wr_id = XFER_WRID_RECV | i, .sg_list = &rs, .num_sge = data ? 1 : 0};
        int err = sr_qp_post_recv(x->pair.qp[1], &rwr);
        if (err)
            return fail(x, "msg %" PRIu64 ": post_recv: %s", i, sr_strerror(err));
    }
    struct sr_sge sg = {x->iova[0] + s * x->stride, x->len, sr_mr_lkey(x->mr[0])};
    struct sr_send_wr wr = {
        .wr_id = XFER_WRID_SEND | i,
        .sg_list = &sg,
        .num_sge = x->len ? 1 : 0,
        .opcode = wr_opcode(cfg->op),
        .send_flags = SR_SEND_SIGNALED,
        .imm = msg_imm(x, i),
        .remote_addr = x->iova[1] + s * x->stride,
        .rkey = sr_mr_rkey(x->mr[1]),
    };
    if (x->atomic) {
        /* One target (slot 0 of the responder); the original value comes
         * back into the requester's slot s. */
        wr.remote_addr = x->iova[1];
        uint64_t orig = x->model;
        if (cfg->op == SR_XFER_CAS) {
            wr.compare_add = x->model;
            wr.swap = key;
            x->model = key;
        } else {
            wr.compare_add = key;
            x->model += key;
        }
        x->expect_orig[s] = orig;
        uint64_t poison = ~orig;
        memcpy(slot_ptr(x, 0, s), &poison, 8);
    } else if (cfg->op == SR_XFER_READ) {
        pattern_fill(slot_ptr(x, 1, s), x->len, key, false);
        pattern_fill(slot_ptr(x, 0, s), x->len, key, true);
    } else {
        pattern_fill(slot_ptr(x, 0, s), x->len, key, false);
        pattern_fill(slot_ptr(x, 1, s), x->len, key, true);
    }
    int err = sr_qp_post_send(x->pair.qp[0], &wr, now(x));
    if (err)
        return fail(x, "msg %" PRIu64 ": post_send: %s", i, sr_strerror(err));
    return true;
}

/* ---- checking ---- */

static bool verify_msg(struct xfer *x, uint64_t i)
{
    const struct sr_xfer_cfg *cfg = x->cfg;
    uint64_t s = i % x->nslots;
    if (x->atomic) {
        uint8_t *p = slot_ptr(x, 0, s);
        if (cfg->before_verify)
            cfg->before_verify(cfg->hook_arg, i, p, 8);
        uint64_t got;
        memcpy(&got, p, 8);
        if (got != x->expect_orig[s])
            return fail(
                x, "msg %" PRIu64 ": %s returned original 0x%016" PRIx64 ", expected 0x%016" PRIx64,
                i, sr_xfer_op_name(cfg->op), got, x->expect_orig[s]);
        return canary_check(x, 0, s, i) && canary_check(x, 1, 0, i);
    }
    int dst = cfg->op == SR_XFER_READ ? 0 : 1;
    uint8_t *p = slot_ptr(x, dst, s);
    if (cfg->before_verify)
        cfg->before_verify(cfg->hook_arg, i, p, x->len);
    uint8_t want = 0;
    size_t off = pattern_check(p, x->len, msg_key(x, i), &want);
    if (off != x->len)
        return fail(x, "msg %" PRIu64 ": %s destination byte %zu of %u is 0x%02x, expected 0x%02x",
                    i, sr_xfer_op_name(cfg->op), off, x->len, p[off], want);
    return canary_check(x, 0, s, i) && canary_check(x, 1, s, i);
}

static bool check_send_wc(struct xfer *x, const struct sr_wc *wc)
{
    const struct sr_xfer_cfg *cfg = x->cfg;
    uint64_t i = x->send_done;
    if (i >= x->posted)
        return fail(x, "send completion wr_id 0x%" PRIx64 " with nothing outstanding", wc->wr_id);
    if (wc->wr_id != (XFER_WRID_SEND | i))
        return fail(x, "send completion out of order: wr_id 0x%" PRIx64 ", expected msg %" PRIu64,
                    wc->wr_id, i);
    if (wc->status != SR_WC_SUCCESS)
        return fail(x, "msg %" PRIu64 ": send completion %s (vendor_err %u)", i,
                    sr_wc_status_name(wc->status), wc->vendor_err);
    if (wc->opcode != wc_send_opcode(cfg->op))
        return fail(x, "msg %" PRIu64 ": send completion opcode %d, expected %d", i, wc->opcode,
                    wc_send_opcode(cfg->op));
    if (wc->qp_num != sr_qp_num(x->pair.qp[0]))
        return fail(x, "msg %" PRIu64 ": send completion for QP 0x%x", i, wc->qp_num);
    /* byte_len is defined for READ and atomics (verbs); others leave it. */
    if ((cfg->op == SR_XFER_READ || x->atomic) && wc->byte_len != x->len)
        return fail(x, "msg %" PRIu64 ": send completion byte_len %u, expected %u", i, wc->byte_len,
                    x->len);
    x->send_done++;
    return true;
}

static bool check_recv_wc(struct xfer *x, const struct sr_wc *wc)
{
    const struct sr_xfer_cfg *cfg = x->cfg;
    uint64_t i = x->recv_done;
    if (!x->recv || i >= x->posted)
        return fail(x, "unexpected receive completion wr_id 0x%" PRIx64 " status %s", wc->wr_id,
                    sr_wc_status_name(wc->status));
    if (wc->wr_id != (XFER_WRID_RECV | i))
        return fail(x,
                    "receive completion out of order: wr_id 0x%" PRIx64 ", expected msg %" PRIu64,
                    wc->wr_id, i);
    if (wc->status != SR_WC_SUCCESS)
        return fail(x, "msg %" PRIu64 ": receive completion %s", i, sr_wc_status_name(wc->status));
    enum sr_wc_opcode op = cfg->op == SR_XFER_WRITE_IMM ? SR_WC_RECV_RDMA_WITH_IMM : SR_WC_RECV;
    if (wc->opcode != op)
        return fail(x, "msg %" PRIu64 ": receive completion opcode %d, expected %d", i, wc->opcode,
                    op);
    if (wc->byte_len != x->len)
        return fail(x, "msg %" PRIu64 ": receive byte_len %u, expected %u", i, wc->byte_len,
                    x->len);
    uint32_t flags = has_imm(cfg->op) ? SR_WC_WITH_IMM : 0;
    if (wc->wc_flags != flags)
        return fail(x, "msg %" PRIu64 ": receive wc_flags 0x%x, expected 0x%x", i, wc->wc_flags,
                    flags);
    if (flags && wc->imm != msg_imm(x, i))
        return fail(x, "msg %" PRIu64 ": immediate 0x%08x, expected 0x%08x", i, wc->imm,
                    msg_imm(x, i));
    if (wc->qp_num != sr_qp_num(x->pair.qp[1]))
        return fail(x, "msg %" PRIu64 ": receive completion for QP 0x%x", i, wc->qp_num);
    x->recv_done++;
    return true;
}

/* The stop callback: runs after every simulator event. Returns true to
 * stop (all done, or the first failure). */
static bool xfer_step(void *arg)
{
    struct xfer *x = arg;
    if (x->done || x->failed)
        return true;
    struct sr_wc wc[XFER_POLL];
    int n;
    while (!x->failed && (n = sr_cq_poll(x->pair.scq[0], XFER_POLL, wc)) > 0)
        for (int k = 0; k < n && check_send_wc(x, &wc[k]); k++)
            ;
    while (!x->failed && (n = sr_cq_poll(x->pair.rcq[1], XFER_POLL, wc)) > 0)
        for (int k = 0; k < n && check_recv_wc(x, &wc[k]); k++)
            ;
    uint64_t ready = x->recv ? SR_MIN(x->send_done, x->recv_done) : x->send_done;
    while (!x->failed && x->retired < ready) {
        if (!x->deferred && !verify_msg(x, x->retired))
            break;
        x->retired++;
        x->t_last = now(x);
    }
    while (!x->failed && x->posted < x->cfg->count && x->posted - x->retired < x->nslots)
        if (post_msg(x, x->posted))
            x->posted++;
    if (x->retired == x->cfg->count)
        x->done = true;
    return x->done || x->failed;
}

/* ---- setup, run, end checks ---- */

static uint64_t sat_add(uint64_t a, uint64_t b)
{
    return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

static uint64_t auto_time_limit(const struct sr_xfer_cfg *cfg, uint32_t len)
{
    /* The ideal time: serialization plus one round trip per window of
     * messages. Then room for go-back-N under loss and for full retry
     * budgets, so only a stuck run reaches it. */
    double bits = (double)len * 8.0 * (double)cfg->count;
    double ideal = cfg->link.rate_bps ? bits * 1e9 / (double)cfg->link.rate_bps : 0;
    ideal += ((double)cfg->count / SR_MAX(cfg->depth, 1u) + 1) * 2.0 * (double)cfg->link.delay_ns;
    double t = 1e9 + 1000.0 * ideal;
    uint64_t to = sr_timeout_ns(cfg->timeout);
    if (to != UINT64_MAX)
        t += 8.0 * (cfg->retry_cnt + 1) * (double)to;
    return t >= 9e18 ? UINT64_MAX / 2 : (uint64_t)t;
}

static int check_cfg(const struct sr_xfer_cfg *cfg, struct sr_xfer_result *res)
{
    const char *why = NULL;
    bool uc_ok = cfg->op == SR_XFER_SEND || cfg->op == SR_XFER_SEND_IMM ||
                 cfg->op == SR_XFER_WRITE || cfg->op == SR_XFER_WRITE_IMM;
    const struct sr_sim_link_cfg *l = &cfg->link;
    if ((unsigned)cfg->op >= SR_XFER_OP_CNT)
        why = "unknown operation";
    else if (cfg->qp_type != SR_QPT_RC && cfg->qp_type != SR_QPT_UC)
        why = "qp type must be RC or UC";
    else if (cfg->qp_type == SR_QPT_UC && !uc_ok)
        why = "UC carries only SEND and WRITE (with or without immediate)";
    else if (cfg->count == 0)
        why = "count must be at least 1";
    else if (cfg->depth == 0 || cfg->depth > (1u << 15))
        why = "depth must be 1 .. 32768";
    else if (cfg->size > SR_MAX_MSG_LEN)
        why = "size exceeds the 2^31-byte message limit";
    else if (cfg->mtu != 256 && cfg->mtu != 512 && cfg->mtu != 1024 && cfg->mtu != 2048 &&
             cfg->mtu != 4096)
        why = "mtu must be 256, 512, 1024, 2048 or 4096";
    else if (!(l->loss >= 0 && l->loss <= 1 && l->dup >= 0 && l->dup <= 1 && l->reorder >= 0 &&
               l->reorder <= 1 && l->corrupt >= 0 && l->corrupt <= 1))
        why = "fault probabilities must lie in [0, 1]";
    else if (cfg->retry_cnt > 7 || cfg->rnr_retry > 7)
        why = "retry_cnt and rnr_retry must be 0 .. 7";
    else if (cfg->timeout > 31 || cfg->min_rnr_timer > 31)
        why = "timeout and min_rnr_timer must be 0 .. 31";
    if (!why)
        return 0;
    snprintf(res->error, sizeof(res->error), "invalid config: %s", why);
    return SR_ERR_INVAL;
}

static int setup(struct xfer *x)
{
    const struct sr_xfer_cfg *cfg = x->cfg;
    x->atomic = cfg->op == SR_XFER_CAS || cfg->op == SR_XFER_FAA;
    x->recv =
        cfg->op == SR_XFER_SEND || cfg->op == SR_XFER_SEND_IMM || cfg->op == SR_XFER_WRITE_IMM;
    x->deferred = cfg->qp_type == SR_QPT_UC && cfg->op == SR_XFER_WRITE;
    x->len = x->atomic ? 8 : cfg->size;
    x->stride = ((size_t)x->len + XFER_CANARY + XFER_ALIGN - 1) / XFER_ALIGN * XFER_ALIGN;
    x->nslots = x->deferred ? cfg->count : SR_MIN((uint64_t)cfg->depth, cfg->count);
    if (x->nslots > SIZE_MAX / x->stride / 2 || x->nslots * x->stride > ((size_t)1 << 40)) {
        snprintf(x->res->error, sizeof(x->res->error),
                 "invalid config: %" PRIu64 " slots of %zu bytes is too much memory", x->nslots,
                 x->stride);
        return SR_ERR_INVAL;
    }
    x->buf_len = x->nslots * x->stride;
    int err = sr_xfer_pair_create(cfg, &x->pair);
    if (err) {
        snprintf(x->res->error, sizeof(x->res->error), "setup: %s", sr_strerror(err));
        return err;
    }
    x->iova[0] = XFER_IOVA_REQ;
    x->iova[1] = XFER_IOVA_RESP;
    x->expect_orig = calloc(x->nslots, sizeof(*x->expect_orig));
    for (int side = 0; side < 2; side++)
        x->buf[side] = aligned_alloc(XFER_ALIGN, x->buf_len);
    if (!x->expect_orig || !x->buf[0] || !x->buf[1]) {
        snprintf(x->res->error, sizeof(x->res->error), "out of memory for %zu-byte buffers",
                 x->buf_len);
        return SR_ERR_NOMEM;
    }
    uint32_t access = SR_ACCESS_LOCAL_WRITE | SR_ACCESS_REMOTE_WRITE | SR_ACCESS_REMOTE_READ |
                      SR_ACCESS_REMOTE_ATOMIC;
    for (int side = 0; side < 2; side++) {
        memset(x->buf[side], 0, x->buf_len);
        for (uint64_t s = 0; s < x->nslots; s++)
            canary_fill(x, side, s);
        err = sr_mr_reg(x->pair.pd[side], x->buf[side], x->buf_len, x->iova[side], access,
                        &x->mr[side]);
        if (err) {
            snprintf(x->res->error, sizeof(x->res->error), "mr_reg: %s", sr_strerror(err));
            return err;
        }
    }
    if (x->atomic) {
        x->model = mix64(cfg->seed + 0xa7a7a7a7ull);
        memcpy(x->buf[1], &x->model, 8);
    }
    return 0;
}

static void teardown(struct xfer *x)
{
    sr_xfer_pair_destroy(&x->pair);
    free(x->buf[0]);
    free(x->buf[1]);
    free(x->expect_orig);
}

/* After the last completion: let duplicates, stale retransmissions and the
 * last timer play out, then check nothing else happened. */
static void drain_and_check(struct xfer *x)
{
    const struct sr_xfer_cfg *cfg = x->cfg;
    uint64_t budget = 1000000000ull;
    uint64_t to = sr_timeout_ns(cfg->timeout);
    if (to != UINT64_MAX)
        budget = sat_add(budget, 2 * to);
    if (cfg->link.rate_bps && cfg->link.queue_bytes)
        budget = sat_add(
            budget, (uint64_t)((double)cfg->link.queue_bytes * 8e9 / (double)cfg->link.rate_bps));
    int rc = sr_sim_run(x->pair.sim, sat_add(now(x), budget), NULL, NULL);
    if (rc != SR_SIM_IDLE) {
        fail(x, "still busy %.3f ms after the last completion (run result %d)", budget / 1e6, rc);
        return;
    }
    struct sr_cq *cqs[4] = {x->pair.scq[0], x->pair.rcq[0], x->pair.scq[1], x->pair.rcq[1]};
    static const char *const cq_names[4] = {"requester send", "requester receive", "responder send",
                                            "responder receive"};
    for (int c = 0; c < 4; c++) {
        struct sr_wc wc;
        if (sr_cq_poll(cqs[c], 1, &wc) == 1) {
            fail(x,
                 "extra completion on the %s CQ after the last message: wr_id 0x%" PRIx64
                 " status %s",
                 cq_names[c], wc.wr_id, sr_wc_status_name(wc.status));
            return;
        }
    }
    for (int i = 0; i < 2; i++) {
        struct sr_qp_attr qa;
        sr_qp_query(x->pair.qp[i], &qa, NULL);
        if (qa.qp_state != SR_QPS_RTS) {
            fail(x, "%s QP ended in %s", i ? "responder" : "requester",
                 sr_qp_state_name(qa.qp_state));
            return;
        }
    }
    /* Late duplicates must not have touched finished messages: verify the
     * last message of every slot again (UC WRITE: for the first time). */
    uint64_t first = cfg->count - SR_MIN(x->nslots, cfg->count);
    for (uint64_t i = first; i < cfg->count; i++)
        if (!verify_msg(x, i))
            return;
    for (uint64_t s = 0; s < x->nslots; s++)
        if (!canary_check(x, 0, s, cfg->count) || !canary_check(x, 1, s, cfg->count))
            return;
    struct sr_engine_stats st;
    sr_engine_stats(x->pair.eng[1], &st);
    if (x->atomic) {
        uint64_t v;
        memcpy(&v, x->buf[1], 8);
        if (v != x->model) {
            fail(x, "atomic target is 0x%016" PRIx64 ", expected 0x%016" PRIx64, v, x->model);
            return;
        }
    }
    uint64_t want = x->atomic ? cfg->count : 0;
    if (st.atomics_executed != want)
        fail(x, "responder executed %" PRIu64 " atomics, expected %" PRIu64, st.atomics_executed,
             want);
}

static void collect(struct xfer *x)
{
    struct sr_xfer_result *r = x->res;
    for (int i = 0; i < 2; i++) {
        if (x->pair.eng[i])
            sr_engine_stats(x->pair.eng[i], &r->eng[i]);
        if (x->pair.node[i])
            sr_sim_node_stats(x->pair.node[i], &r->node[i]);
    }
    if (x->pair.sim) {
        int a = sr_sim_node_id(x->pair.node[0]), b = sr_sim_node_id(x->pair.node[1]);
        sr_sim_link_stats(x->pair.sim, a, b, &r->link[0]);
        sr_sim_link_stats(x->pair.sim, b, a, &r->link[1]);
        r->end_ns = now(x);
    }
    r->msgs_done = x->retired;
    r->payload_bytes = x->retired * x->len;
    r->sim_ns = x->t_last - x->t_start;
    if (r->sim_ns)
        r->goodput_bps = (double)r->payload_bytes * 8e9 / (double)r->sim_ns;
    r->ok = !x->failed;
}

int sr_xfer_run(const struct sr_xfer_cfg *cfg, struct sr_xfer_result *res)
{
    memset(res, 0, sizeof(*res));
    int err = check_cfg(cfg, res);
    if (err)
        return err;
    struct xfer x = {.cfg = cfg, .res = res};
    err = setup(&x);
    if (err) {
        teardown(&x);
        return err;
    }
    uint64_t limit = cfg->time_limit_ns ? cfg->time_limit_ns : auto_time_limit(cfg, x.len);
    x.t_start = x.t_last = now(&x);
    uint64_t until = sat_add(x.t_start, limit);
    while (!xfer_step(&x)) {
        int rc = sr_sim_run(x.pair.sim, until, xfer_step, &x);
        if (rc == SR_SIM_STOPPED)
            continue;
        if (xfer_step(&x))
            break;
        if (rc == SR_SIM_UNTIL)
            fail(&x,
                 "time limit (%.3f ms simulated) reached with %" PRIu64 " of %" PRIu64
                 " messages done",
                 limit / 1e6, x.retired, cfg->count);
        else if (rc == SR_SIM_IDLE)
            fail(&x, "network idle with %" PRIu64 " of %" PRIu64 " messages done", x.retired,
                 cfg->count);
        else
            fail(&x, "sr_sim_run: %s", sr_strerror(rc));
    }
    if (x.done && !x.failed)
        drain_and_check(&x);
    collect(&x);
    teardown(&x);
    return 0;
}

/* engine_harness.h: two (or more) engines joined by an in-memory wire with
 * explicit time, for deterministic engine tests. Every packet is serialised
 * into bytes (headers, payload, pad, a zero ICRC slot) exactly as a driver
 * would, queued with a fixed one-way delay, and may be dropped, duplicated
 * or held back by a per-test filter. No threads, no clock. */
#ifndef ENGINE_HARNESS_H
#define ENGINE_HARNESS_H

#include "sr_engine.h"
#include "sr_test.h"
#include "sr_util.h"

#include <stddef.h>
#include <stdlib.h>

enum { H_NODES = 2, H_QCAP = 1 << 16, H_DELAY_NS = 1000 };

struct h_pkt {
    uint64_t at;
    int to, from;
    uint32_t len;
    uint8_t data[SR_MAX_HDR_LEN + SR_MAX_PMTU + 8];
};

struct harness;
/* Return 0 to deliver, 1 to drop, 2 to deliver twice, 3 to delay by 50 us. */
typedef int (*h_filter_fn)(struct harness *h, const struct h_pkt *p, uint64_t seq);

/* How h_init_cfg builds the engines and the wire. */
struct h_cfg {
    uint32_t window;       /* sr_engine_cfg.window_pkts (0: the default) */
    uint64_t ack_delay_ns; /* sr_engine_cfg.ack_delay_ns */
    /* The wire behaves like a batching driver with sr_engine_ops.tx_fence:
     * packets are queued with their payload still in the sender's memory,
     * read when the engine fences or when h_run ends a delivery step (a
     * driver's flush at the end of its pass). */
    bool defer;
    /* sr_engine_cfg.trains: the peers are reached by trains, so long RC
     * WRITEs go as WRITE ONLY packets. */
    bool trains;
    bool (*trains_to)(void *ctx, const uint8_t *dgid);          /* sr_engine_cfg.trains_to */
    bool whole_writes;                                          /* sr_engine_cfg.whole_writes */
    bool (*mem_ok)(const void *addr, uint64_t len, bool write); /* sr_engine_cfg.mem_ok */
    const struct sr_cc_cfg *cc;                                 /* sr_engine_cfg.cc */
    bool sack[H_NODES];                                         /* sr_engine_cfg.sack per node */
};

struct h_node_ctx {
    struct harness *h;
    int id;
};

enum { H_DEFER_MAX = 256, H_DEFER_IOV = 4 };
/* A packet a deferring wire holds: its header copied, its payload not. */
struct h_deferred {
    int from;
    uint8_t hdr[SR_MAX_HDR_LEN];
    uint32_t hdr_len, iov_cnt, tail;
    struct sr_iov iov[H_DEFER_IOV];
    uint8_t dgid[16];
};

struct harness {
    struct sr_engine *eng[H_NODES];
    struct h_node_ctx ctx[H_NODES]; /* the engines' ops_ctx */
    struct h_pkt **q;               /* ring of pointers, ordered by delivery time */
    uint32_t qhead, qcount;
    uint64_t now;
    uint64_t seq;
    h_filter_fn filter;
    void *filter_arg;
    uint64_t sent, dropped;
    bool defer; /* h_cfg.defer when created */
    struct h_deferred deferred[H_DEFER_MAX];
    uint32_t ndeferred;
    int async_events[32];
    void *async_obj;
};

static int h_tx_now(struct h_node_ctx *nc, const struct sr_tx_pkt *t);

static void h_enqueue(struct harness *h, const struct h_pkt *p)
{
    if (h->qcount == H_QCAP)
        return; /* wire full: lost */
    struct h_pkt *c = malloc(offsetof(struct h_pkt, data) + p->len);
    if (!c)
        return;
    memcpy(c, p, offsetof(struct h_pkt, data) + p->len);
    /* insertion from the tail keeps the ring ordered by delivery time */
    uint32_t i = h->qcount;
    while (i > 0 && h->q[(h->qhead + i - 1) % H_QCAP]->at > c->at) {
        h->q[(h->qhead + i) % H_QCAP] = h->q[(h->qhead + i - 1) % H_QCAP];
        i--;
    }
    h->q[(h->qhead + i) % H_QCAP] = c;
    h->qcount++;
}

static void h_flush(struct harness *h)
{
    for (uint32_t i = 0; i < h->ndeferred; i++) {
        struct h_deferred *d = &h->deferred[i];
        struct sr_tx_pkt t = {.hdr = d->hdr,
                              .hdr_len = d->hdr_len,
                              .iov = d->iov,
                              .iov_cnt = d->iov_cnt,
                              .pad_len = d->tail,
                              .dgid = d->dgid};
        for (uint32_t k = 0; k < d->iov_cnt; k++)
            t.payload_len += d->iov[k].len;
        h_tx_now(&h->ctx[d->from], &t);
    }
    h->ndeferred = 0;
}

static void h_fence(void *ctx)
{
    struct h_node_ctx *nc = ctx;
    h_flush(nc->h);
}

static int h_tx(void *ctx, const struct sr_tx_pkt *t)
{
    struct h_node_ctx *nc = ctx;
    if (!nc->h->defer)
        return h_tx_now(nc, t);
    struct harness *h = nc->h;
    if (h->ndeferred == H_DEFER_MAX || t->iov_cnt > H_DEFER_IOV) {
        h_flush(h);
        if (t->iov_cnt > H_DEFER_IOV)
            return h_tx_now(nc, t); /* in order, just not deferred */
    }
    struct h_deferred *d = &h->deferred[h->ndeferred++];
    d->from = nc->id;
    memcpy(d->hdr, t->hdr, t->hdr_len);
    d->hdr_len = t->hdr_len;
    d->iov_cnt = t->iov_cnt;
    if (t->iov_cnt)
        memcpy(d->iov, t->iov, sizeof(*t->iov) * t->iov_cnt);
    d->tail = t->pad_len;
    memcpy(d->dgid, t->dgid, 16);
    if (t->flush)
        h_flush(h);
    return 0;
}

static int h_tx_now(struct h_node_ctx *nc, const struct sr_tx_pkt *t)
{
    struct harness *h = nc->h;
    static struct h_pkt p;
    p.from = nc->id;
    p.to = -1;
    for (int i = 0; i < H_NODES; i++)
        if (h->eng[i] && !memcmp(sr_engine_gid(h->eng[i]), t->dgid, 16))
            p.to = i;
    if (p.to < 0)
        return -1;
    uint32_t n = 0;
    memcpy(p.data, t->hdr, t->hdr_len);
    n += t->hdr_len;
    for (uint32_t i = 0; i < t->iov_cnt; i++) {
        memcpy(p.data + n, t->iov[i].base, t->iov[i].len);
        n += t->iov[i].len;
    }
    memset(p.data + n, 0, t->pad_len + SR_ICRC_LEN);
    n += t->pad_len + SR_ICRC_LEN;
    p.len = n;
    p.at = h->now + H_DELAY_NS;
    h->sent++;
    int verdict = h->filter ? h->filter(h, &p, h->seq++) : 0;
    if (verdict == 1) {
        h->dropped++;
        return 0;
    }
    if (verdict == 3)
        p.at += 50000;
    h_enqueue(h, &p);
    if (verdict == 2)
        h_enqueue(h, &p);
    return 0;
}

static void h_async(void *ctx, enum sr_event_type type, void *obj)
{
    struct h_node_ctx *nc = ctx;
    nc->h->async_events[type & 31]++;
    nc->h->async_obj = obj;
}

static void h_gid(uint8_t gid[16], int node)
{
    memset(gid, 0, 16);
    gid[10] = gid[11] = 0xff;
    gid[12] = 127;
    gid[15] = (uint8_t)(node + 1);
}

static void h_init_cfg(struct harness *h, const struct h_cfg *c)
{
    memset(h, 0, sizeof(*h));
    h->defer = c->defer;
    h->q = calloc(H_QCAP, sizeof(*h->q));
    for (int i = 0; i < H_NODES; i++) {
        h->ctx[i].h = h;
        h->ctx[i].id = i;
        struct sr_engine_cfg cfg = {
            .ops = {.tx = h_tx, .tx_fence = c->defer ? h_fence : NULL, .async_event = h_async},
            .ops_ctx = &h->ctx[i],
            .trains = c->trains,
            .trains_to = c->trains_to,
            .whole_writes = c->whole_writes,
            .window_pkts = c->window,
            .ack_delay_ns = c->ack_delay_ns,
            .mem_ok = c->mem_ok,
            .cc = c->cc,
            .sack = c->sack[i]};
        h_gid(cfg.gid, i);
        SR_CHECK_EQ(sr_engine_create(&cfg, &h->eng[i]), 0);
    }
}

static inline void h_init(struct harness *h, uint32_t window)
{
    h_init_cfg(h, &(struct h_cfg){.window = window});
}

static void h_fini(struct harness *h)
{
    h->ndeferred = 0;
    for (int i = 0; i < H_NODES; i++)
        sr_engine_destroy(h->eng[i]);
    while (h->qcount) {
        free(h->q[h->qhead]);
        h->qhead = (h->qhead + 1) % H_QCAP;
        h->qcount--;
    }
    free(h->q);
}

/* Run until done(arg) or max_ns of simulated time pass. Returns true if
 * done() held. */
static bool h_run(struct harness *h, bool (*done)(void *), void *arg, uint64_t max_ns)
{
    uint64_t end = h->now + max_ns;
    for (;;) {
        h_flush(h); /* what the engines queued since (posts, timers) */
        if (done && done(arg))
            return true;
        uint64_t next = UINT64_MAX;
        if (h->qcount)
            next = h->q[h->qhead]->at;
        for (int i = 0; i < H_NODES; i++) {
            uint64_t d = sr_engine_next_deadline(h->eng[i]);
            if (d < next)
                next = d;
        }
        if (next == UINT64_MAX || next > end) {
            h->now = end;
            return done ? done(arg) : false;
        }
        if (next > h->now)
            h->now = next;
        while (h->qcount && h->q[h->qhead]->at <= h->now) {
            struct h_pkt *p = h->q[h->qhead];
            h->qhead = (h->qhead + 1) % H_QCAP;
            h->qcount--;
            uint8_t src[16];
            h_gid(src, p->from);
            sr_engine_rx(h->eng[p->to], p->data, p->len, src, h->now);
            free(p);
        }
        h_flush(h); /* the driver's flush at the end of its pass */
        for (int i = 0; i < H_NODES; i++)
            if (sr_engine_next_deadline(h->eng[i]) <= h->now)
                sr_engine_advance(h->eng[i], h->now);
    }
}

/* A connected RC/UC pair, or two UD QPs, each with its own PD/CQs. */
struct h_pair {
    struct sr_pd *pd[2];
    struct sr_cq *scq[2], *rcq[2];
    struct sr_qp *qp[2];
};

struct h_qp_opts {
    enum sr_qp_type type;
    uint32_t mtu;
    uint8_t timeout, retry_cnt, rnr_retry, min_rnr_timer;
    uint32_t access;
    uint32_t max_wr;
    uint32_t cqe;
    uint32_t max_inline;
    uint8_t max_rd_atomic;
    struct sr_pd *pd[2]; /* the pair's PDs; NULL: new ones */
};

static void h_connect(struct harness *h, struct h_pair *pr, const struct h_qp_opts *o)
{
    for (int i = 0; i < 2; i++) {
        pr->pd[i] = o->pd[i];
        if (!pr->pd[i])
            SR_CHECK_EQ(sr_pd_alloc(h->eng[i], &pr->pd[i]), 0);
        SR_CHECK_EQ(sr_cq_create(h->eng[i], o->cqe ? o->cqe : 4096, &pr->scq[i]), 0);
        SR_CHECK_EQ(sr_cq_create(h->eng[i], o->cqe ? o->cqe : 4096, &pr->rcq[i]), 0);
        struct sr_qp_init_attr ia = {
            .qp_type = o->type,
            .send_cq = pr->scq[i],
            .recv_cq = pr->rcq[i],
            .cap = {.max_send_wr = o->max_wr ? o->max_wr : 256,
                    .max_recv_wr = o->max_wr ? o->max_wr : 256,
                    .max_send_sge = 4,
                    .max_recv_sge = 4,
                    .max_inline_data = o->max_inline},
        };
        SR_CHECK_EQ(sr_qp_create(pr->pd[i], &ia, &pr->qp[i]), 0);
    }
    for (int i = 0; i < 2; i++) {
        struct sr_qp *qp = pr->qp[i];
        struct sr_qp_attr a = {.qp_state = SR_QPS_INIT,
                               .port_num = 1,
                               .qkey = 0x11111111,
                               .qp_access_flags = o->access};
        uint32_t m = SR_QP_STATE | SR_QP_PKEY_INDEX | SR_QP_PORT |
                     (o->type == SR_QPT_UD ? SR_QP_QKEY : SR_QP_ACCESS_FLAGS);
        SR_CHECK_EQ(sr_qp_modify(qp, &a, m, h->now), 0);
        a.qp_state = SR_QPS_RTR;
        a.path_mtu = o->mtu ? o->mtu : 1024;
        a.dest_qp_num = sr_qp_num(pr->qp[1 - i]);
        a.rq_psn = 0xfffff0 + 3 * (uint32_t)(1 - i); /* PSNs cross the 2^24 wrap */
        a.max_dest_rd_atomic = SR_MAX_RD_ATOMIC;
        a.min_rnr_timer = o->min_rnr_timer ? o->min_rnr_timer : 1;
        h_gid(a.dgid, 1 - i);
        m = SR_QP_STATE;
        if (o->type == SR_QPT_RC)
            m |= SR_QP_AV | SR_QP_PATH_MTU | SR_QP_DEST_QPN | SR_QP_RQ_PSN |
                 SR_QP_MAX_DEST_RD_ATOMIC | SR_QP_MIN_RNR_TIMER;
        else if (o->type == SR_QPT_UC)
            m |= SR_QP_AV | SR_QP_PATH_MTU | SR_QP_DEST_QPN | SR_QP_RQ_PSN;
        SR_CHECK_EQ(sr_qp_modify(qp, &a, m, h->now), 0);
        a.qp_state = SR_QPS_RTS;
        a.sq_psn = 0xfffff0 + 3 * (uint32_t)i;
        a.timeout = o->timeout ? o->timeout : 8; /* ~1 ms */
        a.retry_cnt = o->retry_cnt;
        a.rnr_retry = o->rnr_retry;
        a.max_rd_atomic = o->max_rd_atomic ? o->max_rd_atomic : 16;
        m = SR_QP_STATE | SR_QP_SQ_PSN;
        if (o->type == SR_QPT_RC)
            m |= SR_QP_TIMEOUT | SR_QP_RETRY_CNT | SR_QP_RNR_RETRY | SR_QP_MAX_QP_RD_ATOMIC;
        SR_CHECK_EQ(sr_qp_modify(qp, &a, m, h->now), 0);
    }
}

#endif

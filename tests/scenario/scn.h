/* scn.h: two real engines joined by a simulated wire, for the loss-recovery
 * scenarios of loss_scenarios.c. The wire has a rate and a one-way delay
 * per direction, so packets of a burst are spaced as on a link and a delay
 * of k packet times reorders by k positions. Each packet passes first a
 * per-test filter, which sees its opcode and PSN and may drop, delay or
 * duplicate it (a hole at an exact PSN, a lost ATOMIC ACKNOWLEDGE), then
 * seeded random loss, reordering and duplication. Time is simulated and
 * advanced by scn_run only; no clock, no thread, no global state: each
 * scenario owns its struct scn.
 *
 * Packets are carried as the engine hands them to a driver (transport
 * headers, payload, pad, an ICRC slot the engine does not check), so the
 * BTH sits at offset 0: opcode in byte 0, PSN in bytes 9..11 (IBA 9.2). */
#ifndef SCN_H
#define SCN_H

#include "sr_engine.h"
#include "sr_test.h"
#include "sr_util.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* IBA Table 38 opcodes (RC) the filters look for. */
enum {
    SCN_OP_SEND_FIRST = 0x00,
    SCN_OP_SEND_ONLY = 0x04,
    SCN_OP_WRITE_ONLY = 0x0a,
    SCN_OP_READ_REQ = 0x0c,
    SCN_OP_READ_RESP_FIRST = 0x0d,
    SCN_OP_READ_RESP_LAST = 0x0f,
    SCN_OP_READ_RESP_ONLY = 0x10,
    SCN_OP_ACK = 0x11,
    SCN_OP_ATOMIC_ACK = 0x12,
    SCN_OP_CMP_SWAP = 0x13,
    SCN_OP_FETCH_ADD = 0x14,
};

struct scn_pkt_info {
    int from;         /* 0 requester, 1 responder */
    uint8_t opcode;   /* BTH opcode */
    uint32_t psn;     /* BTH PSN */
    uint8_t syndrome; /* AETH syndrome of ACK and ATOMIC ACKNOWLEDGE, else 0 */
    uint32_t len;
    uint32_t nth;  /* how many packets with this (from, opcode, psn) came before */
    uint8_t *data; /* the packet (BTH first); a filter may change it (no ICRC is checked) */
};

/* What the wire does with one packet after the filter. */
struct scn_verdict {
    bool drop;
    uint64_t delay_ns;     /* held back this long on top of the link */
    bool dup;              /* a second copy ... */
    uint64_t dup_delay_ns; /* ... this much later than the first */
};

struct scn;
typedef void (*scn_filter_fn)(struct scn *s, const struct scn_pkt_info *pi, struct scn_verdict *v);

struct scn_cfg {
    uint64_t seed;
    double loss, reorder, dup; /* random faults, both directions */
    uint64_t reorder_max_ns;   /* a reordered packet is delayed 1..this; 0: 20 us */
    uint64_t dup_max_ns;       /* a duplicate trails its original by 0..this; 0: 0 */
    uint64_t rate_bps;         /* 0: 10 Gb/s */
    uint64_t delay_ns;         /* one-way; 0: 2 us */
    uint32_t window_pkts;      /* 0: the engine's default */
    /* the QP pair */
    uint32_t mtu;          /* 0: 1024 */
    uint32_t psn[2];       /* each side's first send PSN */
    uint8_t timeout;       /* 0: 10 (4.2 ms) */
    uint8_t retry_cnt;     /* used as given */
    uint8_t rnr_retry;     /* used as given */
    uint8_t min_rnr_timer; /* 0: 1 (0.01 ms) */
    uint8_t max_rd_atomic; /* 0: 16 */
    scn_filter_fn filter;  /* optional */
    void *filter_arg;
    bool sack[2]; /* each node's sr_engine_cfg.sack: selective recovery */
    /* sr_engine_cfg.ack_delay_ns of both nodes, held as for an application
     * that replies (sr_engine_hold_acks), as the verbs device runs; 0: none */
    uint64_t ack_delay_ns;
    bool trains; /* sr_engine_cfg.trains: RDMA WRITEs go as WRITE ONLY pieces */
    /* sr_engine_cfg.ooo_bytes of both nodes; 0: the default */
    uint64_t ooo_bytes;
};

struct scn_pkt {
    uint64_t at, seq;
    int to;
    uint32_t len;
    uint8_t data[];
};

enum { SCN_MEM = 4 << 20, SCN_NTH = 1 << 16 };

struct scn {
    struct scn_cfg cfg;
    struct sr_engine *eng[2];
    int ctx_id[2]; /* ops_ctx points here: which node sent */
    struct sr_pd *pd[2];
    struct sr_cq *scq[2], *rcq[2];
    struct sr_qp *qp[2];
    uint8_t *mem[2]; /* SCN_MEM bytes each, one MR with every access */
    struct sr_mr *mr[2];
    uint64_t now;
    uint64_t busy_until[2]; /* when each direction's serialiser is free */
    uint64_t rng[2];        /* xorshift128+ */
    /* a min-heap of packets on the wire by (at, seq) */
    struct scn_pkt **heap;
    size_t heap_len, heap_cap;
    uint64_t seq;
    uint16_t *nth[2]; /* per direction, by (opcode, psn) hashed: first sight or not */
    /* what the wire did */
    uint64_t sent[2], dropped[2], delayed[2], duplicated[2];
    /* scratch: the packet being sent, and SGEs for posts (copied by the
     * engine at post) */
    uint8_t tx_buf[SR_MAX_HDR_LEN + SR_MAX_PMTU + 8];
    struct sr_sge sge[16];
    unsigned sge_at;
};

static inline uint64_t scn_rand(struct scn *s)
{
    uint64_t a = s->rng[0], b = s->rng[1];
    s->rng[0] = b;
    a ^= a << 23;
    s->rng[1] = a ^ b ^ (a >> 17) ^ (b >> 26);
    return s->rng[1] + b;
}

static inline double scn_unit(struct scn *s)
{
    return (double)(scn_rand(s) >> 11) / 9007199254740992.0;
}

static void scn_push(struct scn *s, struct scn_pkt *p)
{
    if (s->heap_len == s->heap_cap) {
        s->heap_cap = s->heap_cap ? 2 * s->heap_cap : 1024;
        s->heap = realloc(s->heap, s->heap_cap * sizeof(*s->heap));
        SR_CHECK(s->heap != NULL);
    }
    size_t i = s->heap_len++;
    while (i > 0) {
        size_t up = (i - 1) / 2;
        struct scn_pkt *q = s->heap[up];
        if (q->at < p->at || (q->at == p->at && q->seq < p->seq))
            break;
        s->heap[i] = q;
        i = up;
    }
    s->heap[i] = p;
}

static struct scn_pkt *scn_pop(struct scn *s)
{
    struct scn_pkt *top = s->heap[0], *last = s->heap[--s->heap_len];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= s->heap_len)
            break;
        if (c + 1 < s->heap_len &&
            (s->heap[c + 1]->at < s->heap[c]->at ||
             (s->heap[c + 1]->at == s->heap[c]->at && s->heap[c + 1]->seq < s->heap[c]->seq)))
            c++;
        if (last->at < s->heap[c]->at ||
            (last->at == s->heap[c]->at && last->seq < s->heap[c]->seq))
            break;
        s->heap[i] = s->heap[c];
        i = c;
    }
    if (s->heap_len)
        s->heap[i] = last;
    return top;
}

static void scn_queue(struct scn *s, int to, const uint8_t *data, uint32_t len, uint64_t at)
{
    struct scn_pkt *p = malloc(sizeof(*p) + len);
    SR_CHECK(p != NULL);
    p->at = at;
    p->seq = s->seq++;
    p->to = to;
    p->len = len;
    memcpy(p->data, data, len);
    scn_push(s, p);
}

static int scn_tx(void *ctx, const struct sr_tx_pkt *t)
{
    /* ops_ctx is &s->ctx_id[from]: the sender, and through it the scn */
    int from = *(const int *)ctx;
    struct scn *s =
        (struct scn *)((char *)ctx - offsetof(struct scn, ctx_id) - (size_t)from * sizeof(int));
    uint8_t *buf = s->tx_buf;
    uint32_t n = 0;
    memcpy(buf, t->hdr, t->hdr_len);
    n += t->hdr_len;
    for (uint32_t i = 0; i < t->iov_cnt; i++) {
        memcpy(buf + n, t->iov[i].base, t->iov[i].len);
        n += t->iov[i].len;
    }
    memset(buf + n, 0, t->pad_len + SR_ICRC_LEN);
    n += t->pad_len + SR_ICRC_LEN;

    struct scn_pkt_info pi = {.from = from,
                              .opcode = buf[0],
                              .psn = (uint32_t)buf[9] << 16 | (uint32_t)buf[10] << 8 | buf[11],
                              .len = n,
                              .data = buf};
    if (pi.opcode == SCN_OP_ACK || pi.opcode == SCN_OP_ATOMIC_ACK ||
        (pi.opcode >= SCN_OP_READ_RESP_FIRST && pi.opcode <= SCN_OP_READ_RESP_ONLY &&
         pi.opcode != SCN_OP_READ_RESP_FIRST + 1))
        pi.syndrome = buf[12]; /* AETH follows the BTH */
    uint32_t slot = (pi.psn * 31u + pi.opcode) % SCN_NTH;
    pi.nth = s->nth[from][slot];
    if (s->nth[from][slot] < UINT16_MAX)
        s->nth[from][slot]++;
    s->sent[from]++;

    struct scn_verdict v = {0};
    if (s->cfg.filter)
        s->cfg.filter(s, &pi, &v);
    if (!v.drop && s->cfg.loss > 0 && scn_unit(s) < s->cfg.loss)
        v.drop = true;
    if (v.drop) {
        s->dropped[from]++;
        return 0;
    }
    if (s->cfg.reorder > 0 && scn_unit(s) < s->cfg.reorder)
        v.delay_ns += 1 + scn_rand(s) % (s->cfg.reorder_max_ns ? s->cfg.reorder_max_ns : 20000);
    if (!v.dup && s->cfg.dup > 0 && scn_unit(s) < s->cfg.dup) {
        v.dup = true;
        v.dup_delay_ns = s->cfg.dup_max_ns ? scn_rand(s) % s->cfg.dup_max_ns : 0;
    }
    uint64_t rate = s->cfg.rate_bps ? s->cfg.rate_bps : 10000000000ull;
    uint64_t start = s->busy_until[from] > s->now ? s->busy_until[from] : s->now;
    s->busy_until[from] = start + (uint64_t)n * 8 * 1000000000ull / rate;
    uint64_t at = s->busy_until[from] + (s->cfg.delay_ns ? s->cfg.delay_ns : 2000) + v.delay_ns;
    if (v.delay_ns)
        s->delayed[from]++;
    scn_queue(s, 1 - from, buf, n, at);
    if (v.dup) {
        s->duplicated[from]++;
        scn_queue(s, 1 - from, buf, n, at + v.dup_delay_ns);
    }
    return 0;
}

static void scn_gid(uint8_t gid[16], int node)
{
    memset(gid, 0, 16);
    gid[10] = gid[11] = 0xff;
    gid[12] = 10;
    gid[15] = (uint8_t)(node + 1);
}

static void scn_fill(uint8_t *p, size_t len, uint64_t seed)
{
    uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
    for (size_t i = 0; i < len; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        p[i] = (uint8_t)(x >> 24);
    }
}

/* Two engines, one RC QP each, connected, a registered SCN_MEM buffer on
 * each side (node i filled with pattern i + 1). */
static void scn_init(struct scn *s, const struct scn_cfg *c)
{
    memset(s, 0, sizeof(*s));
    s->cfg = *c;
    s->rng[0] = c->seed * 0x9e3779b97f4a7c15ull + 0x1234567;
    s->rng[1] = c->seed ^ 0xdeadbeefcafef00dull;
    for (int k = 0; k < 16; k++)
        scn_rand(s);
    for (int i = 0; i < 2; i++) {
        s->ctx_id[i] = i;
        s->nth[i] = calloc(SCN_NTH, sizeof(uint16_t));
        struct sr_engine_cfg ec = {.ops = {.tx = scn_tx},
                                   .ops_ctx = &s->ctx_id[i],
                                   .window_pkts = c->window_pkts,
                                   .ack_delay_ns = c->ack_delay_ns,
                                   .sack = c->sack[i],
                                   .ooo_bytes = c->ooo_bytes,
                                   .trains = c->trains};
        scn_gid(ec.gid, i);
        SR_CHECK_EQ(sr_engine_create(&ec, &s->eng[i]), 0);
        if (c->ack_delay_ns)
            sr_engine_hold_acks(s->eng[i], true);
        SR_CHECK_EQ(sr_pd_alloc(s->eng[i], &s->pd[i]), 0);
        SR_CHECK_EQ(sr_cq_create(s->eng[i], 4096, &s->scq[i]), 0);
        SR_CHECK_EQ(sr_cq_create(s->eng[i], 4096, &s->rcq[i]), 0);
        struct sr_qp_init_attr ia = {
            .qp_type = SR_QPT_RC,
            .send_cq = s->scq[i],
            .recv_cq = s->rcq[i],
            .cap = {
                .max_send_wr = 1024, .max_recv_wr = 1024, .max_send_sge = 2, .max_recv_sge = 2}};
        SR_CHECK_EQ(sr_qp_create(s->pd[i], &ia, &s->qp[i]), 0);
        s->mem[i] = malloc(SCN_MEM);
        scn_fill(s->mem[i], SCN_MEM, (uint64_t)i + 1);
        SR_CHECK_EQ(sr_mr_reg(s->pd[i], s->mem[i], SCN_MEM, (uintptr_t)s->mem[i],
                              SR_ACCESS_LOCAL_WRITE | SR_ACCESS_REMOTE_WRITE |
                                  SR_ACCESS_REMOTE_READ | SR_ACCESS_REMOTE_ATOMIC,
                              &s->mr[i]),
                    0);
    }
    for (int i = 0; i < 2; i++) {
        struct sr_qp_attr a = {.qp_state = SR_QPS_INIT,
                               .port_num = 1,
                               .qp_access_flags = SR_ACCESS_REMOTE_WRITE | SR_ACCESS_REMOTE_READ |
                                                  SR_ACCESS_REMOTE_ATOMIC};
        SR_CHECK_EQ(sr_qp_modify(s->qp[i], &a,
                                 SR_QP_STATE | SR_QP_PKEY_INDEX | SR_QP_PORT | SR_QP_ACCESS_FLAGS,
                                 0),
                    0);
        a.qp_state = SR_QPS_RTR;
        a.path_mtu = c->mtu ? c->mtu : 1024;
        a.dest_qp_num = sr_qp_num(s->qp[1 - i]);
        a.rq_psn = c->psn[1 - i] & 0xffffff;
        a.max_dest_rd_atomic = SR_MAX_RD_ATOMIC;
        a.min_rnr_timer = c->min_rnr_timer ? c->min_rnr_timer : 1;
        scn_gid(a.dgid, 1 - i);
        SR_CHECK_EQ(sr_qp_modify(s->qp[i], &a,
                                 SR_QP_STATE | SR_QP_AV | SR_QP_PATH_MTU | SR_QP_DEST_QPN |
                                     SR_QP_RQ_PSN | SR_QP_MAX_DEST_RD_ATOMIC | SR_QP_MIN_RNR_TIMER,
                                 0),
                    0);
        a.qp_state = SR_QPS_RTS;
        a.sq_psn = c->psn[i] & 0xffffff;
        a.timeout = c->timeout ? c->timeout : 10;
        a.retry_cnt = c->retry_cnt;
        a.rnr_retry = c->rnr_retry;
        a.max_rd_atomic = c->max_rd_atomic ? c->max_rd_atomic : 16;
        SR_CHECK_EQ(sr_qp_modify(s->qp[i], &a,
                                 SR_QP_STATE | SR_QP_SQ_PSN | SR_QP_TIMEOUT | SR_QP_RETRY_CNT |
                                     SR_QP_RNR_RETRY | SR_QP_MAX_QP_RD_ATOMIC,
                                 0),
                    0);
    }
}

static void scn_fini(struct scn *s)
{
    for (int i = 0; i < 2; i++) {
        sr_engine_destroy(s->eng[i]);
        free(s->mem[i]);
        free(s->nth[i]);
    }
    while (s->heap_len)
        free(scn_pop(s));
    free(s->heap);
}

/* Run until done(arg) holds or max_ns of simulated time pass; true if
 * done() held. done may be NULL: run out the time (or until idle). */
static bool scn_run(struct scn *s, bool (*done)(void *), void *arg, uint64_t max_ns)
{
    uint64_t end = s->now + max_ns;
    for (;;) {
        if (done && done(arg))
            return true;
        uint64_t next = s->heap_len ? s->heap[0]->at : UINT64_MAX;
        for (int i = 0; i < 2; i++) {
            uint64_t d = sr_engine_next_deadline(s->eng[i]);
            if (d < next)
                next = d;
        }
        if (next == UINT64_MAX || next > end) {
            if (next != UINT64_MAX)
                s->now = end;
            return done ? done(arg) : false;
        }
        if (next > s->now)
            s->now = next;
        while (s->heap_len && s->heap[0]->at <= s->now) {
            struct scn_pkt *p = scn_pop(s);
            uint8_t src[16];
            scn_gid(src, 1 - p->to);
            sr_engine_rx(s->eng[p->to], p->data, p->len, src, s->now);
            free(p);
        }
        for (int i = 0; i < 2; i++)
            if (sr_engine_next_deadline(s->eng[i]) <= s->now)
                sr_engine_advance(s->eng[i], s->now);
    }
}

/* Completions collected from one CQ. */
struct scn_wait {
    struct sr_cq *cq;
    struct sr_wc wc[1024];
    int got, want;
};

static bool scn_wait_done(void *arg)
{
    struct scn_wait *w = arg;
    while (w->got < w->want && sr_cq_poll(w->cq, 1, &w->wc[w->got]) == 1)
        w->got++;
    return w->got >= w->want;
}

/* Collect `more` completions from cq into w, within max_ns simulated;
 * returns how many w holds. */
static int scn_collect(struct scn *s, struct scn_wait *w, struct sr_cq *cq, int more,
                       uint64_t max_ns)
{
    w->cq = cq;
    w->want = w->got + more;
    SR_CHECK(w->want <= (int)SR_ARRAY_SIZE(w->wc));
    scn_run(s, scn_wait_done, w, max_ns);
    return w->got;
}

static struct sr_sge *scn_sge(struct scn *s, int node, uint64_t off, uint32_t len)
{
    struct sr_sge *g = &s->sge[s->sge_at++ % SR_ARRAY_SIZE(s->sge)];
    *g = (struct sr_sge){(uintptr_t)s->mem[node] + off, len, sr_mr_lkey(s->mr[node])};
    return g;
}

/* Node 0 posts one signalled work request; local buffer at off, remote
 * (node 1) at roff. */
static int scn_post(struct scn *s, enum sr_wr_opcode op, uint64_t id, uint64_t off, uint64_t roff,
                    uint32_t len, uint64_t compare_add, uint64_t swap)
{
    struct sr_send_wr wr = {.wr_id = id,
                            .sg_list = scn_sge(s, 0, off, len),
                            .num_sge = 1,
                            .opcode = op,
                            .send_flags = SR_SEND_SIGNALED,
                            .remote_addr = (uintptr_t)s->mem[1] + roff,
                            .rkey = sr_mr_rkey(s->mr[1]),
                            .compare_add = compare_add,
                            .swap = swap};
    return sr_qp_post_send(s->qp[0], &wr, s->now);
}

/* The pairing a scenario program runs, from its first argument: "std"
 * (both nodes go-back-N), "sack", "sack-std" or "std-sack" (selective
 * recovery on node 0, node 1 or both); -1 for anything else. */
static inline int scn_pairing(const char *mode, bool sack[2])
{
    sack[0] = !strcmp(mode, "sack") || !strcmp(mode, "sack-std");
    sack[1] = !strcmp(mode, "sack") || !strcmp(mode, "std-sack");
    return sack[0] || sack[1] || !strcmp(mode, "std") ? 0 : -1;
}

/* Node 0 posts n READs of len bytes: the i-th (wr_id i) from node 1's
 * roff + i*len into node 0's i*len. */
static inline void scn_post_reads(struct scn *s, int n, uint32_t len, uint64_t roff)
{
    for (int i = 0; i < n; i++)
        SR_CHECK_EQ(scn_post(s, SR_WR_RDMA_READ, (uint64_t)i, (uint64_t)i * len,
                             roff + (uint64_t)i * len, len, 0, 0),
                    0);
}

/* Node 0 posts n WRITEs of len bytes: the i-th (wr_id i) from its i*len
 * to node 1's same offset. */
static inline void scn_post_writes(struct scn *s, int n, uint32_t len)
{
    for (int i = 0; i < n; i++)
        SR_CHECK_EQ(scn_post(s, SR_WR_RDMA_WRITE, (uint64_t)i, (uint64_t)i * len, (uint64_t)i * len,
                             len, 0, 0),
                    0);
}

/* A copy of node's whole buffer (the caller frees it), to check afterwards
 * that nothing outside the range an operation owns changed. */
static inline uint8_t *scn_snapshot(const struct scn *s, int node)
{
    uint8_t *c = malloc(SCN_MEM);
    SR_CHECK(c != NULL);
    memcpy(c, s->mem[node], SCN_MEM);
    return c;
}

static int scn_post_recv(struct scn *s, uint64_t id, uint64_t off, uint32_t len)
{
    struct sr_recv_wr wr = {.wr_id = id, .sg_list = scn_sge(s, 1, off, len), .num_sge = 1};
    return sr_qp_post_recv(s->qp[1], &wr);
}

static void scn_stats(const struct scn *s, int node, struct sr_engine_stats *st)
{
    sr_engine_stats(s->eng[node], st);
}

#endif

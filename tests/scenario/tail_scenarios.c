/* tail_scenarios.c: how fast selective recovery repairs what nothing
 * follows, and what it resends needlessly, on two real engines over the
 * simulated wire of scn.h (simulated time: no host, no load).
 *
 *   - ibv_rc_pingpong's exchange (4 KiB SENDs of 4 packets each way in
 *     turn, ACKs held for a reply as the verbs device holds them, IBA
 *     timeout 14 and retry_cnt 7): one exact loss in one iteration (the
 *     last packet, the ACK, the reply's last packet, the last packet and
 *     its probe, a whole message) costs that iteration a few lossless
 *     iterations, and no transport timer expires (the retry budget, IBA
 *     9.7.6.1.3, stays untouched);
 *   - reordering: a stream of WRITEs whose packets arrive late now and
 *     then resends them at first, the responder reports the duplicates
 *     (D-SACK, docs/WIRE.md), the reordering window grows (RFC 8985 6.2)
 *     and later reordering draws no resend;
 *   - the D-SACK on the wire, and a requester that ignores it.
 *
 *   tail_scenarios [sack|std]   (both nodes selective, or both standard) */
/* scn.h's helpers are static; this file uses some of them */
#pragma GCC diagnostic ignored "-Wunused-function"
#include "scn.h"

#include <inttypes.h>
#include <stdio.h>

enum { KIB = 1024, US = 1000, MS = 1000000 };

static bool sack_mode = true;

/* ---- the ping-pong ---- */

enum { PP_ITERS_MAX = 400, PP_FAULT_IT = 40, PP_RX = 1 << 20 };
/* iterations of a run (60 but in test_pingpong_random) */
static int pp_iters = 60;
/* each message's length (4 KiB but in test_pingpong_every_message) */
static uint32_t pp_len = 4 * KIB;

/* Which packets of iteration PP_FAULT_IT the wire loses. */
enum pp_fault {
    PP_NONE,
    PP_LAST,       /* node 0's last packet */
    PP_ACK,        /* node 1's ACK of node 0's message */
    PP_REPLY_LAST, /* node 1's last packet */
    PP_LAST_PROBE, /* node 0's last packet, and again its first resend */
    PP_WHOLE,      /* every packet of node 0's message, once each */
    PP_EVERY_MSG,  /* the third packet of every message node 0 sends, and its first resend */
    PP_RANDOM,     /* SOFTRDMA_FAULT's loss=0.1,reorder=0.01,dup=0.005 on every packet */
};

struct pp {
    struct scn *s;
    enum pp_fault fault;
    int it[2];             /* each node's sends posted */
    int recvd[2], sent[2]; /* completions seen */
    bool armed;
    int drops;           /* packets of the fault still to drop */
    uint32_t sends_seen; /* node 0's first transmissions (PP_EVERY_MSG) */
    uint32_t again;      /* ... the PSN dropped last, whose first resend goes too */
    bool again_armed;
    uint64_t seed; /* PP_RANDOM's */
    uint64_t done_at[PP_ITERS_MAX + 1];
    int iters_done;
    /* both nodes' probes, resends and timeouts when iteration
     * PP_FAULT_IT began and when it ended */
    uint64_t probes[2], resends[2], timeouts[2];
};

static void pp_snap(struct pp *p, int k)
{
    p->probes[k] = p->resends[k] = p->timeouts[k] = 0;
    for (int n = 0; n < 2; n++) {
        struct sr_engine_stats st;
        scn_stats(p->s, n, &st);
        p->probes[k] += st.probes;
        p->resends[k] += st.retransmits;
        p->timeouts[k] += st.timeouts;
    }
}

static bool pp_is_send(uint8_t op)
{
    return op <= SCN_OP_SEND_ONLY; /* SEND FIRST, MIDDLE, LAST, LAST_IMM, ONLY */
}

static void pp_filter(struct scn *s, const struct scn_pkt_info *pi, struct scn_verdict *v)
{
    struct pp *p = s->cfg.filter_arg;
    if (p->fault == PP_RANDOM) {
        /* the UDP driver's injector holds a reordered datagram 200 us
         * (src/drivers/udp/fault.c); loss and duplication are scn's */
        if (scn_unit(s) < 0.01)
            v->delay_ns = 200 * US;
        return;
    }
    if (p->fault == PP_EVERY_MSG) {
        if (pi->from == 0 && pp_is_send(pi->opcode) && pi->nth == 0 &&
            p->sends_seen++ % (pp_len / 1024) == 2) {
            v->drop = true;
            p->again = pi->psn;
            p->again_armed = true;
        } else if (pi->from == 0 && p->again_armed && pi->psn == p->again && pi->nth == 1) {
            v->drop = true; /* its first resend too */
            p->again_armed = false;
        }
        return;
    }
    if (!p->armed || p->drops <= 0)
        return;
    bool hit = false;
    switch (p->fault) {
    case PP_LAST:
    case PP_LAST_PROBE:
        hit = pi->from == 0 && pi->opcode == 0x02; /* SEND LAST */
        break;
    case PP_ACK:
        hit = pi->from == 1 && pi->opcode == SCN_OP_ACK;
        break;
    case PP_REPLY_LAST:
        hit = pi->from == 1 && pi->opcode == 0x02;
        break;
    case PP_WHOLE:
        hit = pi->from == 0 && pp_is_send(pi->opcode) && pi->nth == 0;
        break;
    case PP_NONE:
    case PP_EVERY_MSG:
    case PP_RANDOM:
        break;
    }
    if (hit) {
        v->drop = true;
        p->drops--;
    }
}

static int pp_post(struct scn *s, int node, int it)
{
    s->mem[node][0] = (uint8_t)it;
    s->mem[node][1] = (uint8_t)node;
    struct sr_sge g = {(uintptr_t)s->mem[node], pp_len, sr_mr_lkey(s->mr[node])};
    struct sr_send_wr wr = {.wr_id = (uint64_t)it,
                            .sg_list = &g,
                            .num_sge = 1,
                            .opcode = SR_WR_SEND,
                            .send_flags = SR_SEND_SIGNALED};
    return sr_qp_post_send(s->qp[node], &wr, s->now);
}

static int pp_post_recv(struct scn *s, int node, int it)
{
    struct sr_sge g = {(uintptr_t)s->mem[node] + PP_RX, pp_len, sr_mr_lkey(s->mr[node])};
    struct sr_recv_wr wr = {.wr_id = (uint64_t)it, .sg_list = &g, .num_sge = 1};
    return sr_qp_post_recv(s->qp[node], &wr);
}

/* Both nodes as ibv_rc_pingpong runs them: a node posts its next send once
 * its previous one completed and the peer's message arrived (node 0 starts). */
static bool pp_step(void *arg)
{
    struct pp *p = arg;
    struct scn *s = p->s;
    for (int n = 0; n < 2; n++) {
        struct sr_wc wc;
        while (sr_cq_poll(s->rcq[n], 1, &wc) == 1) {
            SR_CHECK_EQ(wc.status, SR_WC_SUCCESS);
            SR_CHECK_EQ(wc.byte_len, pp_len);
            SR_CHECK_EQ(s->mem[n][PP_RX], (uint8_t)p->recvd[n]);
            SR_CHECK_EQ(s->mem[n][PP_RX + 1], (uint8_t)(1 - n));
            SR_CHECK_MEM(s->mem[n] + PP_RX + 2, s->mem[1 - n] + 2, pp_len - 2);
            p->recvd[n]++;
            SR_CHECK_EQ(pp_post_recv(s, n, p->recvd[n]), 0);
        }
        while (sr_cq_poll(s->scq[n], 1, &wc) == 1) {
            SR_CHECK_EQ(wc.status, SR_WC_SUCCESS);
            SR_CHECK_EQ(wc.wr_id, (uint64_t)p->sent[n]);
            p->sent[n]++;
        }
    }
    /* node 0 finished iteration k: its send k and the reply k are in */
    while (p->iters_done < pp_iters && p->sent[0] > p->iters_done && p->recvd[0] > p->iters_done) {
        p->done_at[++p->iters_done] = s->now;
        p->armed = p->iters_done == PP_FAULT_IT;
        if (p->iters_done == PP_FAULT_IT || p->iters_done == PP_FAULT_IT + 1)
            pp_snap(p, p->iters_done - PP_FAULT_IT);
    }
    if (p->it[0] < pp_iters && p->it[0] == p->sent[0] && p->it[0] == p->recvd[0]) {
        SR_CHECK_EQ(pp_post(s, 0, p->it[0]), 0);
        p->it[0]++;
    }
    if (p->it[1] < pp_iters && p->it[1] == p->sent[1] && p->it[1] < p->recvd[1]) {
        SR_CHECK_EQ(pp_post(s, 1, p->it[1]), 0);
        p->it[1]++;
    }
    return p->iters_done == pp_iters && p->sent[1] == pp_iters;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

struct pp_result {
    uint64_t base_ns, fault_ns; /* median lossless iteration, the faulted one */
    uint64_t probes, resends;   /* in the faulted iteration */
    uint64_t timeouts;          /* in the whole run */
};

/* ibv_rc_pingpong's wire: its default MTU, the default ACK hold, 14 and 7
 * for timeout and retry_cnt, PSNs across the wrap; the filter sees p. */
static void pp_scn_init(struct scn *s, struct pp *p)
{
    bool rnd = p->fault == PP_RANDOM;
    scn_init(s, &(struct scn_cfg){.seed = rnd ? p->seed : 1,
                                  .loss = rnd ? 0.1 : 0,
                                  .dup = rnd ? 0.005 : 0,
                                  .mtu = 1024, /* ibv_rc_pingpong's default */
                                  .delay_ns = 15 * US,
                                  .ack_delay_ns = 20 * US, /* SOFTRDMA_ACK_DELAY_US's default */
                                  .timeout = 14,
                                  .retry_cnt = 7,
                                  .rnr_retry = 7,
                                  .min_rnr_timer = 12,
                                  .filter = pp_filter,
                                  .filter_arg = p,
                                  .sack = {sack_mode, sack_mode},
                                  .psn = {0xfffff0, 77}});
}

static struct pp_result pp_run(enum pp_fault fault, int drops)
{
    struct scn s;
    struct pp p = {.s = &s, .fault = fault, .drops = drops};
    pp_scn_init(&s, &p);
    for (int n = 0; n < 2; n++)
        SR_CHECK_EQ(pp_post_recv(&s, n, 0), 0);
    p.done_at[0] = s.now;
    SR_CHECK(scn_run(&s, pp_step, &p, 2000ull * MS));
    SR_CHECK_EQ(p.iters_done, pp_iters);
    struct pp_result r = {0};
    uint64_t d[PP_ITERS_MAX];
    int nd = 0;
    /* the first iterations take the first RTT samples */
    for (int i = 10; i < PP_FAULT_IT; i++)
        d[nd++] = p.done_at[i + 1] - p.done_at[i];
    qsort(d, (size_t)nd, sizeof(d[0]), cmp_u64);
    r.base_ns = d[nd / 2];
    r.fault_ns = p.done_at[PP_FAULT_IT + 1] - p.done_at[PP_FAULT_IT];
    /* what the faulted iteration cost; the whole run: no timer */
    r.probes = p.probes[1] - p.probes[0];
    r.resends = p.resends[1] - p.resends[0];
    pp_snap(&p, 0);
    r.timeouts = p.timeouts[0];
    SR_CHECK_EQ(s.dropped[0] + s.dropped[1], (uint64_t)(drops - p.drops));
    SR_CHECK_EQ(p.drops, 0); /* the fault happened */
    scn_fini(&s);
    return r;
}

/* A lost packet that nothing follows is repaired by the probe (RFC 8985
 * 7.3) within a few round trips, never by the 67 ms transport timer. */
static void test_pingpong_tail(void)
{
    static const struct {
        const char *name;
        enum pp_fault fault;
        int drops;
        /* the faulted iteration's cost, in lossless iterations: a SACK
         * pair's probe timeout has a 50 us floor, a go-back-N pair's 200 us
         * (rtt.h) */
        unsigned max_iters, std_max_iters;
        unsigned sack_resends; /* what a SACK pair resends for it: the lost ones only */
    } rows[] = {
        {"last packet", PP_LAST, 1, 5, 8, 1},
        {"ACK", PP_ACK, 1, 5, 8, 1},
        {"reply's last packet", PP_REPLY_LAST, 1, 5, 8, 1},
        {"last packet and its probe", PP_LAST_PROBE, 2, 9, 20, 2},
        {"whole message", PP_WHOLE, 4, 6, 9, 4},
    };
    struct pp_result none = pp_run(PP_NONE, 0);
    sr_test_ctx = "ping-pong lossless";
    SR_CHECK_EQ(none.timeouts, 0);
    SR_CHECK_EQ(none.resends, 0);
    SR_CHECK_EQ(none.probes, 0); /* nothing spurious on a clean wire */
    SR_CHECK(none.fault_ns < 2 * none.base_ns);
    for (size_t i = 0; i < SR_ARRAY_SIZE(rows); i++) {
        sr_test_ctx = rows[i].name;
        struct pp_result r = pp_run(rows[i].fault, rows[i].drops);
        printf("ping-pong %-26s (%s): lossless iteration %6.1f us, with the loss %7.1f us (%.1fx), "
               "%" PRIu64 " probes, %" PRIu64 " resends, %" PRIu64 " timeouts\n",
               rows[i].name, sack_mode ? "sack" : "std", r.base_ns / 1e3, r.fault_ns / 1e3,
               (double)r.fault_ns / (double)r.base_ns, r.probes, r.resends, r.timeouts);
        SR_CHECK_EQ(r.timeouts, 0); /* retry_cnt untouched */
        SR_CHECK(r.fault_ns < (sack_mode ? rows[i].max_iters : rows[i].std_max_iters) * r.base_ns);
        if (sack_mode)
            SR_CHECK_EQ(r.resends, rows[i].sack_resends);
    }
}

/* ibv_rc_pingpong's 64 KiB shape at 10% loss: every message loses a
 * packet and, now and then, its resend. Every message then has a resend
 * ahead of its timed last packet, and the round trip must still be
 * measured (from the SACK that reports that packet: Karn's rule bars
 * only a resend of the timed packet itself), or the probe that repairs
 * a lost resend keeps its no-sample timeout, an eighth of the 67 ms
 * timer, and each iteration waits 8 ms for it. */
static void test_pingpong_every_message(void)
{
    pp_len = 64 * KIB;
    struct scn s;
    struct pp p = {.s = &s, .fault = PP_EVERY_MSG, .drops = 1 << 30};
    for (int lossy = 0; lossy < 2; lossy++) {
        sr_test_ctx = lossy ? "every message loses a packet and its resend" : "lossless";
        p = (struct pp){.s = &s, .fault = lossy ? PP_EVERY_MSG : PP_NONE, .drops = 1 << 30};
        pp_scn_init(&s, &p);
        for (int n = 0; n < 2; n++)
            SR_CHECK_EQ(pp_post_recv(&s, n, 0), 0);
        p.done_at[0] = s.now;
        SR_CHECK(scn_run(&s, pp_step, &p, 20000ull * MS));
        SR_CHECK_EQ(p.iters_done, pp_iters);
        uint64_t total = p.done_at[pp_iters] - p.done_at[10];
        printf("ping-pong 64 KiB (%s), %s: %.1f us per iteration, %" PRIu64 " dropped\n",
               sack_mode ? "sack" : "std", sr_test_ctx, total / 1e3 / (pp_iters - 10),
               s.dropped[0]);
        static uint64_t clean;
        if (!lossy) {
            clean = total;
        } else {
            SR_CHECK(s.dropped[0] >= 2 * (uint64_t)pp_iters);
            /* repaired in round trips: far below the 8 ms per iteration
             * that waiting on the no-sample probe timeout costs */
            if (sack_mode)
                SR_CHECK(total < 6 * clean);
        }
        scn_fini(&s);
    }
    pp_len = 4 * KIB;
    sr_test_ctx = "";
}

/* ibv_rc_pingpong -s 65536 (64 packets of 1 KiB each way) under
 * bench/loss.sh's 10% profile: random loss of every packet in both
 * directions (SENDs, resends, ACKs, SACKs, probes), 1% held 200 us,
 * 0.5% duplicated. Issue #22's target is the mean iteration within 10x
 * the lossless one; on the UDP path that mean is set by the tail, so
 * the slowest iterations are what this bounds. */
static void test_pingpong_random(void)
{
    enum { SEEDS = 4, ITERS = 200 };
    pp_len = 64 * KIB;
    pp_iters = ITERS;
    struct scn s;
    struct pp p;
    uint64_t clean = 0;
    for (int seed = 0; seed <= SEEDS; seed++) {
        bool lossy = seed > 0;
        sr_test_ctx = lossy ? "64 KiB at 10% random loss" : "64 KiB lossless";
        p = (struct pp){.s = &s, .fault = lossy ? PP_RANDOM : PP_NONE, .seed = (uint64_t)seed};
        pp_scn_init(&s, &p);
        for (int n = 0; n < 2; n++)
            SR_CHECK_EQ(pp_post_recv(&s, n, 0), 0);
        p.done_at[0] = s.now;
        SR_CHECK(scn_run(&s, pp_step, &p, 60000ull * MS));
        SR_CHECK_EQ(p.iters_done, pp_iters);
        uint64_t d[PP_ITERS_MAX];
        for (int i = 0; i < pp_iters; i++)
            d[i] = p.done_at[i + 1] - p.done_at[i];
        qsort(d + 10, (size_t)(pp_iters - 10), sizeof(d[0]), cmp_u64);
        uint64_t total = p.done_at[pp_iters] - p.done_at[10];
        uint64_t mean = total / (uint64_t)(pp_iters - 10);
        pp_snap(&p, 0);
        if (!lossy)
            clean = mean;
        printf("ping-pong 64 KiB (%s), %s, seed %d: mean %.1f us (%.1fx), median %.1f, p90 %.1f, "
               "max %.1f us; %" PRIu64 " probes, %" PRIu64 " resends, %" PRIu64
               " timeouts, %" PRIu64 " dropped\n",
               sack_mode ? "sack" : "std", sr_test_ctx, seed, mean / 1e3,
               (double)mean / (double)clean, d[10 + (pp_iters - 10) / 2] / 1e3,
               d[10 + (pp_iters - 10) * 9 / 10] / 1e3, d[pp_iters - 1] / 1e3, p.probes[0],
               p.resends[0], p.timeouts[0], s.dropped[0] + s.dropped[1]);
        SR_CHECK_EQ(p.timeouts[0], 0); /* retry_cnt untouched (IBA 9.7.6.1.3) */
        if (lossy && sack_mode) {
            /* Issue #22's 10x with room for the host; the reordering
             * window grown past SRTT by the 200 us holds made it 9 to 11
             * here, and its slowest iterations 25 to 54 lossless ones.
             * The slowest few are set by chance: a last packet whose
             * probes are lost in a row waits 2 SRTT, then 4, 8, 16 (the
             * backoff, rtt.h): in seed 2, two iterations lost a last
             * packet and its next four copies, at 53x. So the 95th
             * percentile is bounded tightly and the slowest by that
             * backoff. */
            SR_CHECK(mean < 5 * clean);
            SR_CHECK(d[10 + (pp_iters - 10) * 95 / 100] < 10 * clean);
            SR_CHECK(d[pp_iters - 1] < 64 * clean);
        }
        scn_fini(&s);
    }
    pp_len = 4 * KIB;
    pp_iters = 60;
    sr_test_ctx = "";
}

/* ---- reordering: the window adapts, D-SACKs on the wire ---- */

enum {
    RO_BATCH = 1000,
    RO_BATCHES = 3,
    RO_N = RO_BATCH * RO_BATCHES,
    RO_LEN = 1024,
    RO_EVERY = 50
};
static const uint64_t RO_LATE_NS = 40 * US;

struct ro {
    uint64_t delay_ns; /* how late every RO_EVERY-th request packet arrives */
    bool strip;        /* the wire clears the D-SACK flag: a requester that ignores it */
    uint32_t late[RO_N / RO_EVERY + 1]; /* the PSNs held back */
    uint32_t nlate;
    uint64_t dsacks_seen, dsacks_stray; /* on the wire; naming a PSN never held back */
    uint64_t data_pkts;                 /* first sights of node 0's requests */
    uint64_t drop_at;                   /* this first sight is lost (0: none) */
};

static uint32_t be24(const uint8_t *p)
{
    return (uint32_t)p[0] << 16 | (uint32_t)p[1] << 8 | p[2];
}

static void ro_filter(struct scn *s, const struct scn_pkt_info *pi, struct scn_verdict *v)
{
    struct ro *r = s->cfg.filter_arg;
    if (pi->from == 0 && pi->opcode == SCN_OP_WRITE_ONLY && pi->nth == 0) {
        if (++r->data_pkts == r->drop_at) {
            v->drop = true;
            return;
        }
        if (r->data_pkts % RO_EVERY == 0 && r->nlate < SR_ARRAY_SIZE(r->late)) {
            r->late[r->nlate++] = pi->psn;
            v->delay_ns = r->delay_ns;
        }
        return;
    }
    /* docs/WIRE.md: BTH (12), AETH (4), SACKETH: flags, reserved, the
     * D-SACK PSN (3), base PSN (3) */
    if (pi->from == 1 && pi->opcode == 0xf0 && pi->len >= 24 && (pi->data[16] & 0x02)) {
        r->dsacks_seen++;
        uint32_t psn = be24(pi->data + 18);
        bool known = false;
        for (uint32_t i = 0; i < r->nlate; i++)
            known |= r->late[i] == psn;
        r->dsacks_stray += !known;
        if (r->strip)
            pi->data[16] &= (uint8_t)~0x02;
    }
}

struct ro_result {
    uint64_t resends[RO_BATCHES]; /* node 0's, in each batch of the stream */
    struct sr_engine_stats st[2];
};

/* RO_N one-packet WRITEs, 64 in flight, every RO_EVERY-th packet delayed:
 * every byte and completion, and node 0's resends in each half. */
static struct ro_result ro_run(struct ro *r)
{
    struct scn s;
    scn_init(&s, &(struct scn_cfg){.seed = 3,
                                   .mtu = RO_LEN,
                                   .delay_ns = 20 * US,
                                   .window_pkts = 64,
                                   .timeout = 14,
                                   .retry_cnt = 7,
                                   .rnr_retry = 7,
                                   .filter = ro_filter,
                                   .filter_arg = r,
                                   .sack = {true, true}});
    struct ro_result res = {0};
    static struct scn_wait w;
    memset(&w, 0, sizeof(w));
    for (int b = 0; b < RO_BATCHES; b++) {
        struct sr_engine_stats before, after;
        scn_stats(&s, 0, &before);
        for (int i = b * RO_BATCH; i < (b + 1) * RO_BATCH; i++)
            SR_CHECK_EQ(scn_post(&s, SR_WR_RDMA_WRITE, (uint64_t)i, (uint64_t)i * RO_LEN,
                                 (uint64_t)i * RO_LEN, RO_LEN, 0, 0),
                        0);
        w.got = 0;
        SR_CHECK_EQ(scn_collect(&s, &w, s.scq[0], RO_BATCH, 1000ull * MS), RO_BATCH);
        for (int i = 0; i < w.got; i++) {
            SR_CHECK_EQ(w.wc[i].status, SR_WC_SUCCESS);
            SR_CHECK_EQ(w.wc[i].wr_id, (uint64_t)(b * RO_BATCH + i));
        }
        scn_stats(&s, 0, &after);
        res.resends[b] = after.retransmits - before.retransmits;
    }
    SR_CHECK_MEM(s.mem[1], s.mem[0], (size_t)RO_N * RO_LEN);
    for (int n = 0; n < 2; n++)
        scn_stats(&s, n, &res.st[n]);
    scn_fini(&s);
    return res;
}

/* Packets 40 us late (SRTT is about 41 us here: more than a quarter of it,
 * less than SRTT less the way back) are resent at first; the D-SACKs grow
 * the window (RFC 8985 6.2) and the last batch of the stream, reordered
 * alike, draws no resend. */
static void test_reorder_adapts(void)
{
    sr_test_ctx = "reordering: the window adapts";
    struct ro r = {.delay_ns = RO_LATE_NS};
    struct ro_result res = ro_run(&r);
    printf("reordering %u of %u packets by %" PRIu64 " us: resends per batch %" PRIu64 ", %" PRIu64
           ", %" PRIu64 "; D-SACKs %" PRIu64 " (%" PRIu64 " proved resends spurious)\n",
           r.nlate, RO_N, RO_LATE_NS / US, res.resends[0], res.resends[1], res.resends[2],
           res.st[1].dsacks_sent, res.st[0].sack_spurious);
    SR_CHECK(res.resends[0] > 0);   /* the window started too small: the test bites */
    SR_CHECK_EQ(res.resends[2], 0); /* and then it fits */
    SR_CHECK(res.st[0].sack_spurious > 0);
    SR_CHECK_EQ(res.st[1].dsacks_sent, res.st[0].dsacks_rcvd);
    /* on the wire: flag 0x02 and a PSN that was held back, each resend's */
    SR_CHECK(r.dsacks_seen > 0);
    SR_CHECK_EQ(r.dsacks_seen, res.st[1].dsacks_sent);
    SR_CHECK_EQ(r.dsacks_stray, 0);
    SR_CHECK_EQ(res.st[0].sack_bad, 0);
    SR_CHECK_EQ(res.st[0].timeouts, 0);
    SR_CHECK_EQ(res.st[0].probes, 0); /* a reordering deadline is no probe */
}

/* Packets three round trips late (120 us against an SRTT of about
 * 41 us): RFC 8985 6.2's window, at most SRTT, can never wait for them,
 * but the lateness the D-SACKs of the first spurious resends show can
 * (sack.c). Once learnt, the stream's last batch, reordered alike, draws
 * at most a few resends; a real loss in it is still repaired, with no
 * transport timeout. */
static void test_reorder_beyond_srtt(void)
{
    sr_test_ctx = "reordering by 3 x SRTT: the window learns the lateness";
    struct ro r = {.delay_ns = 3 * RO_LATE_NS, .drop_at = 2 * RO_BATCH + RO_BATCH / 2 + 7};
    struct ro_result res = ro_run(&r);
    printf("reordering %u of %u packets by %" PRIu64 " us, one lost in the last batch: resends per "
           "batch %" PRIu64 ", %" PRIu64 ", %" PRIu64 "; %" PRIu64 " spurious\n",
           r.nlate, RO_N, 3 * RO_LATE_NS / US, res.resends[0], res.resends[1], res.resends[2],
           res.st[0].sack_spurious);
    SR_CHECK(res.resends[0] > 0);  /* the window started too small: the test bites */
    SR_CHECK(res.resends[2] >= 1); /* the lost packet */
    SR_CHECK(res.resends[2] <= 3); /* and hardly any of the 20 late ones */
    SR_CHECK_EQ(res.st[0].timeouts, 0);
    /* a late packet at a batch's tail has no 3 marks after it: the probe
     * timeout, shorter than its lateness, asks for it */
    SR_CHECK(res.st[0].probes <= RO_BATCHES);
    SR_CHECK_EQ(res.st[0].sack_bad, 0);
    SR_CHECK_EQ(r.dsacks_stray, 0);
}

/* The same wire, with the D-SACK flag cleared on the way: the requester
 * sees SACKs of an empty bitmap, as an older softrdma peer's parser sees
 * the flag (unknown SACKETH flags and reserved bytes are ignored), and
 * must complete the same transfer intact; its window then never grows. */
static void test_dsack_ignored(void)
{
    sr_test_ctx = "a requester that ignores D-SACKs";
    struct ro r = {.delay_ns = RO_LATE_NS, .strip = true};
    struct ro_result res = ro_run(&r);
    printf("D-SACK flag stripped: resends per batch %" PRIu64 ", %" PRIu64 ", %" PRIu64 "\n",
           res.resends[0], res.resends[1], res.resends[2]);
    SR_CHECK(r.dsacks_seen > 0);
    SR_CHECK_EQ(res.st[0].dsacks_rcvd, 0);
    SR_CHECK_EQ(res.st[0].sack_spurious, 0);
    SR_CHECK(res.resends[2] > 0); /* no adaptation without the report */
    SR_CHECK_EQ(res.st[0].sack_bad, 0);
    SR_CHECK_EQ(res.st[0].timeouts, 0);
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "sack";
    if (!strcmp(mode, "std")) {
        sack_mode = false;
    } else if (strcmp(mode, "sack")) {
        fprintf(stderr, "usage: tail_scenarios [sack|std]\n");
        return 2;
    }
    SR_RUN(test_pingpong_tail);
    SR_RUN(test_pingpong_every_message);
    SR_RUN(test_pingpong_random);
    if (sack_mode) {
        SR_RUN(test_reorder_adapts);
        SR_RUN(test_reorder_beyond_srtt);
        SR_RUN(test_dsack_ignored);
    }
    return SR_TEST_RESULT();
}

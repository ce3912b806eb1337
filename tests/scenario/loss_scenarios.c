/* loss_scenarios.c: loss-recovery scenarios on two real engines over the
 * simulated wire of scn.h. Each holds for any correct RC recovery, go-back-N
 * or selective: they assert what the application sees (every byte, every
 * completion's status, opcode, order and count, atomics executed exactly
 * once), never how many packets the repair took.
 *
 *   - reordering within the window and far beyond it (late originals of
 *     packets already repaired and acknowledged);
 *   - holes at the first and at the last packet of the window;
 *   - PSN wrap-around (first PSNs just below 2^24) under loss;
 *   - lost READ responses;
 *   - lost ATOMIC ACKNOWLEDGEs: the responder's replay (IBA 9.7.5.1.4),
 *     never a second execution;
 *   - duplicates of packets already acknowledged;
 *   - RNR NAKs in the middle of lossy SENDs;
 *   - every operation at once, at random sizes, windows and MTUs;
 *   - ibv_rc_pingpong's exchange, where tail losses wait for the timer.
 *
 * Seeded, simulated time only; nothing depends on the wall clock.
 * LOSS_SCN_SEEDS=k runs k times the seeds.
 *
 *   loss_scenarios [std|sack|sack-std|std-sack]
 * runs every scenario with both nodes standard go-back-N RoCEv2 devices
 * (std, the default), both with selective recovery (sack), or one of each
 * (node 0, the first named, sends the bulk of the requests). Mixed pairs
 * must never exchange a SACK; sack pairs must have used them. */
#include "scn.h"

#include <inttypes.h>
#include <stdio.h>

enum { KIB = 1024, MS = 1000000 };
static const uint64_t MAX_NS = 2000ull * MS; /* 2 s simulated: dozens of retry budgets */

/* LOSS_SCN_SEEDS=k runs every scenario with k times as many seeds (a
 * sweep by hand; ctest runs k = 1). */
static uint64_t seed_mult = 1;

/* Each node's selective recovery (argv[1]), for every row. */
static bool sack_mode[2];
static struct {
    uint64_t sacks, stored, resends, placed;
} sack_tot;

static void lscn_init(struct scn *s, const struct scn_cfg *c)
{
    struct scn_cfg cc = *c;
    cc.sack[0] = sack_mode[0];
    cc.sack[1] = sack_mode[1];
    scn_init(s, &cc);
}
#define scn_init lscn_init

/* What the wires did over all rows, printed at the end and checked per
 * scenario: a scenario whose faults never fired proves nothing. */
static struct {
    uint64_t rows, sent, dropped, delayed, duplicated;
} tot, mark;

/* Ends a row: adds what its wire did to the totals. */
static void row_done(struct scn *s)
{
    uint64_t sent = s->sent[0] + s->sent[1], dropped = s->dropped[0] + s->dropped[1];
    tot.rows++;
    tot.sent += sent;
    tot.dropped += dropped;
    tot.delayed += s->delayed[0] + s->delayed[1];
    tot.duplicated += s->duplicated[0] + s->duplicated[1];
    for (int i = 0; i < 2; i++) {
        struct sr_engine_stats st;
        scn_stats(s, i, &st);
        sack_tot.sacks += st.sacks_sent;
        sack_tot.stored += st.ooo_stored;
        sack_tot.resends += st.sack_resends;
        sack_tot.placed += st.ooo_placed;
        if (!sack_mode[0] || !sack_mode[1]) {
            /* a standard peer never gets a SACK, nor keeps out of order */
            SR_CHECK_EQ(st.sacks_sent, 0);
            SR_CHECK_EQ(st.sacks_rcvd, 0);
            SR_CHECK_EQ(st.ooo_stored, 0);
            SR_CHECK_EQ(st.ooo_placed, 0);
        }
        SR_CHECK_EQ(st.sack_bad, 0); /* a softrdma peer's SACKs are all well-formed */
    }
    scn_fini(s);
}

/* Faults the rows of one scenario injected since its start. */
static void check_injected(bool dropped, bool delayed, bool duplicated)
{
    SR_CHECK_EQ(tot.dropped > mark.dropped, dropped);
    SR_CHECK_EQ(tot.delayed > mark.delayed, delayed);
    SR_CHECK_EQ(tot.duplicated > mark.duplicated, duplicated);
    mark = tot;
}

static char ctx_buf[160];
static void set_ctx(const char *name, uint64_t seed, double loss)
{
    snprintf(ctx_buf, sizeof(ctx_buf), "%s seed=%" PRIu64 " loss=%.3f", name, seed, loss);
    sr_test_ctx = ctx_buf;
}

/* The requester's completions: `n` in wr_id order 0..n-1, all with status
 * `st` and (op >= 0) opcode `op`. */
static void check_wcs(const struct scn_wait *w, int n, enum sr_wc_status st, int op)
{
    SR_CHECK_EQ(w->got, n);
    for (int i = 0; i < w->got && i < n; i++) {
        SR_CHECK_EQ(w->wc[i].wr_id, (uint64_t)i);
        SR_CHECK_EQ(w->wc[i].status, st);
        if (st == SR_WC_SUCCESS && op >= 0)
            SR_CHECK_EQ(w->wc[i].opcode, (enum sr_wc_opcode)op);
    }
}

/* No more completions than expected turn up, even after every timer ran
 * out: a duplicate never completes twice. */
static void check_quiet(struct scn *s, struct sr_cq *cq)
{
    scn_run(s, NULL, NULL, 50ull * MS);
    struct sr_wc wc;
    SR_CHECK_EQ(sr_cq_poll(cq, 1, &wc), 0);
}

/* ---- WRITEs under reordering ---- */

/* `n` WRITEs of `len` bytes from node 0's offset i*len to node 1's same
 * offset; then the data, every byte up to the end of the buffer (nothing
 * beyond the written range may change) and the completions. */
static void writes_row(struct scn *s, int n, uint32_t len)
{
    uint8_t *orig = scn_snapshot(s, 1);
    scn_post_writes(s, n, len);
    struct scn_wait w = {0};
    scn_collect(s, &w, s->scq[0], n, MAX_NS);
    check_wcs(&w, n, SR_WC_SUCCESS, SR_WC_RDMA_WRITE);
    size_t done = (size_t)n * len;
    SR_CHECK_MEM(s->mem[1], s->mem[0], done);
    SR_CHECK_MEM(s->mem[1] + done, orig + done, SCN_MEM - done);
    check_quiet(s, s->scq[0]);
    free(orig);
}

static const double losses[] = {0, 0.01, 0.05, 0.10};

/* Packets (requests and ACKs) held back by up to 16 packet times at MTU
 * 1024 and 10 Gb/s, inside a 64-packet window: the responder sees PSNs out
 * of order and must NAK or buffer, never place a packet at the wrong
 * offset or complete a message twice. */
static void test_reorder_within_window(void)
{
    for (size_t li = 0; li < SR_ARRAY_SIZE(losses); li++)
        for (uint64_t seed = 1; seed <= 6 * seed_mult; seed++) {
            set_ctx("reorder within window", seed, losses[li]);
            struct scn s;
            scn_init(&s, &(struct scn_cfg){.seed = seed,
                                           .loss = losses[li],
                                           .reorder = 0.05,
                                           .reorder_max_ns = 14000,
                                           .window_pkts = 64,
                                           .retry_cnt = 7,
                                           .psn = {100, 5000}});
            writes_row(&s, 24, 16 * KIB);
            row_done(&s);
        }
    sr_test_ctx = "test_reorder_within_window: faults injected";
    check_injected(true, true, false);
}

/* Packets held back 0.3..1.3 ms, hundreds of packet times past an 8-packet
 * window: they arrive after their PSN was resent and acknowledged and the
 * window moved on, as duplicates (IBA 9.7.5.1.4: acknowledged again, not
 * executed again). The second phase rewrites one region from a different
 * source each time: a stale copy executed late would leave an older
 * message's bytes there. */
static void test_reorder_beyond_window(void)
{
    uint64_t dups = 0;
    for (size_t li = 0; li < SR_ARRAY_SIZE(losses); li++)
        for (uint64_t seed = 1; seed <= 4 * seed_mult; seed++) {
            set_ctx("reorder beyond window", seed, losses[li]);
            struct scn s;
            struct scn_cfg c = {.seed = seed,
                                .loss = losses[li],
                                .reorder = 0.05,
                                .reorder_max_ns = 1000000,
                                .window_pkts = 8,
                                .retry_cnt = 7,
                                .psn = {7, 70000}};
            scn_init(&s, &c);
            writes_row(&s, 16, 8 * KIB);
            /* phase 2: message i writes node 0's block i into node 1's
             * block 0; the last one must win */
            enum { N2 = 24, L2 = 4 * KIB };
            for (int i = 0; i < N2; i++)
                SR_CHECK_EQ(
                    scn_post(&s, SR_WR_RDMA_WRITE, (uint64_t)i, (uint64_t)i * L2, 0, L2, 0, 0), 0);
            struct scn_wait w = {0};
            scn_collect(&s, &w, s.scq[0], N2, MAX_NS);
            check_wcs(&w, N2, SR_WC_SUCCESS, SR_WC_RDMA_WRITE);
            /* let every late copy land before looking */
            scn_run(&s, NULL, NULL, 20ull * MS);
            SR_CHECK_MEM(s.mem[1], s.mem[0] + (size_t)(N2 - 1) * L2, L2);
            struct sr_engine_stats st;
            scn_stats(&s, 1, &st);
            dups += st.rx_duplicate;
            row_done(&s);
        }
    /* the rows did deliver packets after their PSN was done */
    sr_test_ctx = "reorder beyond window: duplicates seen";
    SR_CHECK(dups > 0);
    sr_test_ctx = "test_reorder_beyond_window: faults injected";
    check_injected(true, true, false);
}

/* ---- holes at exact PSNs ---- */

struct holes {
    uint32_t psn[4];
    int cnt;
    int hit;
};

/* Drops the first transmission of each listed request PSN. */
static void drop_listed(struct scn *s, const struct scn_pkt_info *pi, struct scn_verdict *v)
{
    struct holes *h = s->cfg.filter_arg;
    if (pi->from != 0 || pi->nth != 0)
        return;
    for (int i = 0; i < h->cnt; i++)
        if (pi->psn == (h->psn[i] & 0xffffff)) {
            v->drop = true;
            h->hit++;
        }
}

/* A 16-packet window and four 16-packet WRITEs, so each message fills the
 * window exactly. A hole at the window's first packet is seen by every
 * packet after it; one at the window's last packet, or the transfer's, has
 * nothing behind it and is found by the timer (or a probe) alone. */
static void test_window_edges(void)
{
    enum { W = 16, P0 = 1000 };
    static const struct {
        const char *name;
        uint32_t off[4];
        int cnt;
    } rows[] = {
        {"hole at the window's first packet", {0}, 1},
        {"hole at the window's last packet", {W - 1}, 1},
        {"holes at both ends of one window", {W, 2 * W - 1}, 2},
        {"hole at the transfer's last packet", {4 * W - 1}, 1},
        {"holes at every window boundary", {W - 1, W, 2 * W - 1, 3 * W}, 4},
    };
    for (size_t r = 0; r < SR_ARRAY_SIZE(rows); r++)
        for (int lossy = 0; lossy < 2; lossy++) {
            set_ctx(rows[r].name, 3 + (uint64_t)r, lossy ? 0.02 : 0);
            struct holes h = {.cnt = rows[r].cnt};
            for (int i = 0; i < h.cnt; i++)
                h.psn[i] = P0 + rows[r].off[i];
            struct scn s;
            scn_init(&s, &(struct scn_cfg){.seed = 3 + r,
                                           .loss = lossy ? 0.02 : 0,
                                           .window_pkts = W,
                                           .retry_cnt = 7,
                                           .psn = {P0, 9},
                                           .filter = drop_listed,
                                           .filter_arg = &h});
            writes_row(&s, 4, W * KIB);
            SR_CHECK_EQ(h.hit, h.cnt);
            struct sr_engine_stats st;
            scn_stats(&s, 0, &st);
            SR_CHECK(st.retransmits >= (uint64_t)h.cnt);
            row_done(&s);
        }
    sr_test_ctx = "test_window_edges: faults injected";
    check_injected(true, false, false);
}

/* ---- PSN wrap-around ---- */

/* First PSNs a few packets below 2^24: the transfers cross 0xffffff -> 0
 * while packets are lost, including the two PSNs on either side of the
 * wrap; SENDs, WRITEs and READs, all checked. */
static void test_psn_wrap(void)
{
    for (size_t li = 0; li < SR_ARRAY_SIZE(losses); li++)
        for (uint64_t seed = 1; seed <= 4 * seed_mult; seed++) {
            set_ctx("psn wrap", seed, losses[li]);
            struct holes h = {.psn = {0xffffff, 0}, .cnt = 2};
            struct scn s;
            scn_init(&s, &(struct scn_cfg){.seed = seed,
                                           .loss = losses[li],
                                           .reorder = 0.01,
                                           .window_pkts = 32,
                                           .retry_cnt = 7,
                                           .psn = {0xffffff - 20, 0xfffffe},
                                           .filter = drop_listed,
                                           .filter_arg = &h});
            enum { N = 12, L = 6 * KIB, RBASE = 1 << 20 };
            /* SENDs land in receives on node 1 at RBASE */
            for (int i = 0; i < N; i++)
                SR_CHECK_EQ(scn_post_recv(&s, (uint64_t)i, RBASE + (uint64_t)i * L, L), 0);
            for (int i = 0; i < N; i++) {
                /* i % 3: SEND, WRITE to node 1's block i, READ into node
                 * 0's block 64 + i from node 1's block 32 + i */
                uint64_t off = (uint64_t)i * L;
                enum sr_wr_opcode op = i % 3 == 0   ? SR_WR_SEND
                                       : i % 3 == 1 ? SR_WR_RDMA_WRITE
                                                    : SR_WR_RDMA_READ;
                if (op == SR_WR_RDMA_READ)
                    SR_CHECK_EQ(scn_post(&s, op, (uint64_t)i, off + 64 * L, off + 32 * L, L, 0, 0),
                                0);
                else
                    SR_CHECK_EQ(scn_post(&s, op, (uint64_t)i, off, off, L, 0, 0), 0);
            }
            struct scn_wait w = {0};
            scn_collect(&s, &w, s.scq[0], N, MAX_NS);
            SR_CHECK_EQ(w.got, N);
            for (int i = 0; i < w.got; i++) {
                static const enum sr_wc_opcode ops[] = {SR_WC_SEND, SR_WC_RDMA_WRITE,
                                                        SR_WC_RDMA_READ};
                SR_CHECK_EQ(w.wc[i].wr_id, (uint64_t)i);
                SR_CHECK_EQ(w.wc[i].status, SR_WC_SUCCESS);
                SR_CHECK_EQ(w.wc[i].opcode, ops[i % 3]);
            }
            struct scn_wait rw = {0};
            scn_collect(&s, &rw, s.rcq[1], N / 3, MAX_NS);
            SR_CHECK_EQ(rw.got, N / 3);
            for (int k = 0; k < rw.got; k++) {
                int i = 3 * k; /* the k-th SEND */
                SR_CHECK_EQ(rw.wc[k].wr_id, (uint64_t)k);
                SR_CHECK_EQ(rw.wc[k].status, SR_WC_SUCCESS);
                SR_CHECK_EQ(rw.wc[k].opcode, SR_WC_RECV);
                SR_CHECK_EQ(rw.wc[k].byte_len, L);
                SR_CHECK_MEM(s.mem[1] + RBASE + (size_t)k * L, s.mem[0] + (size_t)i * L, L);
            }
            for (int i = 1; i < N; i += 3)
                SR_CHECK_MEM(s.mem[1] + (size_t)i * L, s.mem[0] + (size_t)i * L, L);
            for (int i = 2; i < N; i += 3)
                SR_CHECK_MEM(s.mem[0] + (size_t)(64 + i) * L, s.mem[1] + (size_t)(32 + i) * L, L);
            SR_CHECK_EQ(h.hit, 2); /* both PSNs beside the wrap were lost once */
            check_quiet(&s, s.rcq[1]);
            row_done(&s);
        }
    sr_test_ctx = "test_psn_wrap: faults injected";
    check_injected(true, true, false);
}

/* ---- lost READ responses ---- */

struct resp_loss {
    double p;   /* random loss of READ response packets */
    bool edges; /* also lose once each READ's FIRST and LAST and every 16th MIDDLE */
};

static void drop_read_resp(struct scn *s, const struct scn_pkt_info *pi, struct scn_verdict *v)
{
    const struct resp_loss *r = s->cfg.filter_arg;
    if (pi->from != 1 || pi->opcode < SCN_OP_READ_RESP_FIRST || pi->opcode > SCN_OP_READ_RESP_ONLY)
        return;
    if (r->edges && pi->nth == 0 && (pi->opcode != SCN_OP_READ_RESP_FIRST + 1 || pi->psn % 16 == 7))
        v->drop = true;
    if (scn_unit(s) < r->p)
        v->drop = true;
}

/* 64 KiB READs at MTU 1024 (64 responses each), four in flight; responses
 * lost at random up to 10% and, in some rows, each READ's FIRST and LAST
 * and every 16th MIDDLE lost once. The requester must ask again from the first
 * missing response (IBA 9.7.4) and end with the responder's bytes. */
static void test_lost_read_responses(void)
{
    enum { N = 10, L = 64 * KIB, SRC = 1 << 20 };
    for (size_t li = 0; li < SR_ARRAY_SIZE(losses); li++)
        for (int edges = 0; edges < 2; edges++)
            for (uint64_t seed = 1; seed <= 3 * seed_mult; seed++) {
                set_ctx(edges ? "lost read responses, edges too" : "lost read responses", seed,
                        losses[li]);
                struct resp_loss rl = {.p = losses[li], .edges = edges};
                struct scn s;
                scn_init(&s, &(struct scn_cfg){.seed = seed,
                                               .loss = losses[li] / 2,
                                               .window_pkts = 256,
                                               .retry_cnt = 7,
                                               .max_rd_atomic = 4,
                                               .psn = {0xfffff0, 31},
                                               .filter = drop_read_resp,
                                               .filter_arg = &rl});
                uint8_t *before = scn_snapshot(&s, 0);
                scn_post_reads(&s, N, L, SRC);
                struct scn_wait w = {0};
                scn_collect(&s, &w, s.scq[0], N, MAX_NS);
                check_wcs(&w, N, SR_WC_SUCCESS, SR_WC_RDMA_READ);
                for (int i = 0; i < w.got; i++)
                    SR_CHECK_EQ(w.wc[i].byte_len, L);
                SR_CHECK_MEM(s.mem[0], s.mem[1] + SRC, (size_t)N * L);
                SR_CHECK_MEM(s.mem[0] + (size_t)N * L, before + (size_t)N * L,
                             SCN_MEM - (size_t)N * L);
                check_quiet(&s, s.scq[0]);
                free(before);
                row_done(&s);
            }
    sr_test_ctx = "test_lost_read_responses: faults injected";
    check_injected(true, false, false);
}

/* ---- atomics: executed exactly once ---- */

struct atomic_loss {
    double p;           /* random loss of ATOMIC ACKNOWLEDGEs */
    uint32_t first_psn; /* the first atomic's PSN */
    uint32_t every;     /* lose once the ATOMIC ACK of every `every`-th atomic (0: none) */
};

static void drop_atomic_ack(struct scn *s, const struct scn_pkt_info *pi, struct scn_verdict *v)
{
    const struct atomic_loss *a = s->cfg.filter_arg;
    if (pi->from != 1 || pi->opcode != SCN_OP_ATOMIC_ACK)
        return;
    if (a->every && pi->nth == 0 && ((pi->psn - a->first_psn) & 0xffffff) % a->every == 0)
        v->drop = true;
    if (scn_unit(s) < a->p)
        v->drop = true;
}

static uint64_t ld64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

/* 240 FETCH_ADDs then 240 CMP_SWAPs on one 8-byte target, up to 16 in
 * flight, with ATOMIC ACKNOWLEDGEs lost at random up to 10% (and every
 * fifth one lost once in some rows) and requests and ACKs lost besides.
 * A lost ATOMIC ACKNOWLEDGE makes the requester resend the request; the
 * responder must answer it from the value it saved and not execute it
 * again (IBA 9.7.5.1.4: the atomic replay), even when later
 * atomics already executed. Checked: the target's final value, every
 * returned original (RC executes atomics in PSN order, so each has one
 * right answer), every CMP_SWAP succeeded, and the responder executed
 * exactly 480 atomics. */
static void test_lost_atomic_acks(void)
{
    enum { N = 240, DEPTH = 16, T = 2 << 20 };
    uint64_t replays = 0;
    for (size_t li = 0; li < SR_ARRAY_SIZE(losses); li++)
        for (int every = 0; every < 2; every++)
            for (uint64_t seed = 1; seed <= 3 * seed_mult; seed++) {
                set_ctx(every ? "lost atomic acks, every fifth too" : "lost atomic acks", seed,
                        losses[li]);
                const uint32_t p0 = 0xffffff - 100; /* the wrap, too */
                struct atomic_loss al = {.p = losses[li], .first_psn = p0, .every = every ? 5 : 0};
                struct scn s;
                scn_init(&s, &(struct scn_cfg){.seed = seed,
                                               .loss = losses[li] / 2,
                                               .retry_cnt = 7,
                                               .max_rd_atomic = DEPTH,
                                               .psn = {p0, 500},
                                               .filter = drop_atomic_ack,
                                               .filter_arg = &al});
                uint64_t v = ld64(s.mem[1] + T), v0 = v;
                struct scn_wait w = {0};
                int posted = 0;
                /* FETCH_ADD i adds i * 3 + 1; the original it returns goes
                 * to node 0's slot i */
                for (int phase = 0; phase < 2; phase++) {
                    uint64_t cur = v;
                    for (int i = 0; i < N; i++) {
                        int id = phase * N + i;
                        while (posted - w.got >= DEPTH)
                            if (scn_collect(&s, &w, s.scq[0], 1, MAX_NS) < posted - DEPTH + 1)
                                break;
                        if (posted - w.got >= DEPTH)
                            break; /* stuck: reported below */
                        uint64_t add = (uint64_t)id * 3 + 1;
                        uint64_t next = cur * 6364136223846793005ull + 1442695040888963407ull;
                        int err = phase == 0
                                      ? scn_post(&s, SR_WR_ATOMIC_FETCH_AND_ADD, (uint64_t)id,
                                                 (uint64_t)id * 8, T, 8, add, 0)
                                      : scn_post(&s, SR_WR_ATOMIC_CMP_AND_SWP, (uint64_t)id,
                                                 (uint64_t)id * 8, T, 8, cur, next);
                        SR_CHECK_EQ(err, 0);
                        posted++;
                        cur = phase == 0 ? cur + add : next;
                    }
                    v = cur;
                }
                scn_collect(&s, &w, s.scq[0], posted - w.got, MAX_NS);
                SR_CHECK_EQ(posted, 2 * N);
                check_wcs(&w, 2 * N, SR_WC_SUCCESS, -1);
                for (int i = 0; i < w.got; i++)
                    SR_CHECK_EQ(w.wc[i].opcode, i < N ? SR_WC_FETCH_ADD : SR_WC_COMP_SWAP);
                /* every original, replayed or not */
                uint64_t want = v0;
                for (int id = 0; id < 2 * N; id++) {
                    SR_CHECK_EQ(ld64(s.mem[0] + (size_t)id * 8), want);
                    want = id < N ? want + (uint64_t)id * 3 + 1
                                  : want * 6364136223846793005ull + 1442695040888963407ull;
                }
                SR_CHECK_EQ(ld64(s.mem[1] + T), v);
                SR_CHECK_EQ(want, v);
                struct sr_engine_stats st;
                scn_stats(&s, 1, &st);
                SR_CHECK_EQ(st.atomics_executed, 2 * N);
                check_quiet(&s, s.scq[0]);
                scn_stats(&s, 1, &st);
                SR_CHECK_EQ(st.atomics_executed, 2 * N);
                if (losses[li] > 0 || every)
                    replays += st.rx_duplicate;
                row_done(&s);
            }
    sr_test_ctx = "lost atomic acks: replays seen";
    SR_CHECK(replays > 0);
    sr_test_ctx = "test_lost_atomic_acks: faults injected";
    check_injected(true, false, false);
}

/* ---- duplicates of acknowledged packets ---- */

/* Every packet, both ways, duplicated with probability 20%, the copy
 * trailing by up to 400 us: most copies of requests arrive after the
 * request was acknowledged, copies of ACKs and READ responses after the
 * completion. SENDs must consume one receive each (spare receives stay
 * posted), WRITEs land once, FETCH_ADDs execute once, the requester
 * completes each WQE once. A late READ request is executed again (IBA
 * 9.7.5.1.4), after the test has changed the source: the requester must
 * drop those responses, its completed destination keeps what it read. */
static void test_acked_duplicates(void)
{
    enum { N = 32, L = 5000, SPARE = 6, RBASE = 1 << 20, RD = 2 << 20, T = 3 << 20 };
    uint8_t *src_copy = malloc((size_t)N * 8 * KIB);
    for (size_t li = 0; li < SR_ARRAY_SIZE(losses); li++)
        for (uint64_t seed = 1; seed <= 3 * seed_mult; seed++) {
            set_ctx("duplicates of acknowledged packets", seed, losses[li]);
            struct scn s;
            scn_init(&s, &(struct scn_cfg){.seed = seed,
                                           .loss = losses[li],
                                           .dup = 0.2,
                                           .dup_max_ns = 400000,
                                           .retry_cnt = 7,
                                           .psn = {0xffffff - 3, 12}});
            for (int i = 0; i < N + SPARE; i++)
                SR_CHECK_EQ(scn_post_recv(&s, (uint64_t)i, RBASE + (uint64_t)i * 8 * KIB, L), 0);
            memcpy(src_copy, s.mem[1], (size_t)N * 8 * KIB);
            uint64_t v0 = ld64(s.mem[1] + T), sum = 0;
            for (int i = 0; i < N; i++) {
                uint64_t off = (uint64_t)i * 8 * KIB;
                int err = 0;
                switch (i % 4) { /* SEND, WRITE, FETCH_ADD, READ in turn */
                case 0:
                    err = scn_post(&s, SR_WR_SEND, (uint64_t)i, off, 0, L, 0, 0);
                    break;
                case 1:
                    err = scn_post(&s, SR_WR_RDMA_WRITE, (uint64_t)i, off, off, L, 0, 0);
                    break;
                case 2:
                    err = scn_post(&s, SR_WR_ATOMIC_FETCH_AND_ADD, (uint64_t)i, off, T, 8,
                                   (uint64_t)i, 0);
                    sum += (uint64_t)i;
                    break;
                default:
                    err = scn_post(&s, SR_WR_RDMA_READ, (uint64_t)i, RD + off, off, L, 0, 0);
                    break;
                }
                SR_CHECK_EQ(err, 0);
            }
            struct scn_wait w = {0};
            scn_collect(&s, &w, s.scq[0], N, MAX_NS);
            SR_CHECK_EQ(w.got, N);
            for (int i = 0; i < w.got; i++) {
                static const enum sr_wc_opcode ops[] = {SR_WC_SEND, SR_WC_RDMA_WRITE,
                                                        SR_WC_FETCH_ADD, SR_WC_RDMA_READ};
                SR_CHECK_EQ(w.wc[i].wr_id, (uint64_t)i);
                SR_CHECK_EQ(w.wc[i].status, SR_WC_SUCCESS);
                SR_CHECK_EQ(w.wc[i].opcode, ops[i % 4]);
            }
            /* every READ completed: change its source, then let every
             * trailing copy arrive */
            for (int i = 3; i < N; i += 4)
                for (int k = 0; k < L; k++)
                    s.mem[1][(size_t)i * 8 * KIB + (size_t)k] ^= 0xa5;
            scn_run(&s, NULL, NULL, 50ull * MS);
            for (int i = 3; i < N; i += 4)
                SR_CHECK_MEM(s.mem[0] + RD + (size_t)i * 8 * KIB, src_copy + (size_t)i * 8 * KIB,
                             L);
            struct scn_wait rw = {0};
            scn_collect(&s, &rw, s.rcq[1], N / 4, MS);
            SR_CHECK_EQ(rw.got, N / 4);
            for (int k = 0; k < rw.got; k++) {
                SR_CHECK_EQ(rw.wc[k].wr_id, (uint64_t)k);
                SR_CHECK_EQ(rw.wc[k].status, SR_WC_SUCCESS);
                SR_CHECK_EQ(rw.wc[k].byte_len, L);
                SR_CHECK_MEM(s.mem[1] + RBASE + (size_t)k * 8 * KIB,
                             s.mem[0] + (size_t)(4 * k) * 8 * KIB, L);
            }
            struct sr_wc extra;
            SR_CHECK_EQ(sr_cq_poll(s.rcq[1], 1, &extra), 0); /* spares untouched */
            SR_CHECK_EQ(sr_cq_poll(s.scq[0], 1, &extra), 0);
            for (int i = 1; i < N; i += 4)
                SR_CHECK_MEM(s.mem[1] + (size_t)i * 8 * KIB, s.mem[0] + (size_t)i * 8 * KIB, L);
            SR_CHECK_EQ(ld64(s.mem[1] + T), v0 + sum);
            struct sr_engine_stats st;
            scn_stats(&s, 1, &st);
            SR_CHECK_EQ(st.atomics_executed, N / 4);
            SR_CHECK(st.rx_duplicate > 0);
            /* the spare receives still work: one more SEND takes the next */
            SR_CHECK_EQ(scn_post(&s, SR_WR_SEND, 99, 0, 0, 100, 0, 0), 0);
            scn_collect(&s, &w, s.scq[0], 1, MAX_NS);
            scn_collect(&s, &rw, s.rcq[1], 1, MAX_NS);
            SR_CHECK_EQ(rw.got, N / 4 + 1);
            if (rw.got == N / 4 + 1)
                SR_CHECK_EQ(rw.wc[N / 4].wr_id, (uint64_t)(N / 4));
            row_done(&s);
        }
    free(src_copy);
    sr_test_ctx = "test_acked_duplicates: faults injected";
    check_injected(true, false, true);
}

/* ---- RNR in the middle of lossy SENDs ---- */

/* 40 three-packet SENDs; node 1 has receives for the first 10 only. With
 * rnr_retry 7 (retry forever, IBA 9.7.5.2.8) the 11th waits on RNR NAKs,
 * some of them lost, until the rest of the receives are posted 5 ms later;
 * with rnr_retry 1 it fails RNR_RETRY_EXC_ERR, the QP enters Error and the
 * rest flush, and the receives that were posted hold exactly the first 10
 * messages. */
static void test_rnr_mid_lossy_sends(void)
{
    enum { N = 40, K = 10, L = 3000, RBASE = 1 << 20 };
    for (size_t li = 0; li < SR_ARRAY_SIZE(losses); li++)
        for (int rescue = 0; rescue < 2; rescue++)
            for (uint64_t seed = 1; seed <= 3 * seed_mult; seed++) {
                set_ctx(rescue ? "rnr mid lossy sends, rescued" : "rnr mid lossy sends, exhausted",
                        seed, losses[li]);
                struct scn s;
                scn_init(&s, &(struct scn_cfg){.seed = seed,
                                               .loss = losses[li],
                                               .reorder = 0.01,
                                               .retry_cnt = 7,
                                               .rnr_retry = rescue ? 7 : 1,
                                               .min_rnr_timer = 10, /* 0.24 ms */
                                               .psn = {0xfffffa, 0xfffff0}});
                for (int i = 0; i < K; i++)
                    SR_CHECK_EQ(scn_post_recv(&s, (uint64_t)i, RBASE + (uint64_t)i * 4 * KIB, L),
                                0);
                for (int i = 0; i < N; i++)
                    SR_CHECK_EQ(
                        scn_post(&s, SR_WR_SEND, (uint64_t)i, (uint64_t)i * 4 * KIB, 0, L, 0, 0),
                        0);
                struct scn_wait w = {0}, rw = {0};
                struct sr_engine_stats st;
                if (rescue) {
                    /* the first K complete (some after timer expiries), and
                     * no more while nothing else is posted */
                    scn_collect(&s, &w, s.scq[0], K, MAX_NS);
                    SR_CHECK_EQ(w.got, K);
                    scn_run(&s, NULL, NULL, 5ull * MS);
                    struct sr_wc early;
                    SR_CHECK_EQ(sr_cq_poll(s.scq[0], 1, &early), 0);
                    scn_stats(&s, 1, &st);
                    SR_CHECK(st.rnr_naks_sent > 0);
                    for (int i = K; i < N; i++)
                        SR_CHECK_EQ(
                            scn_post_recv(&s, (uint64_t)i, RBASE + (uint64_t)i * 4 * KIB, L), 0);
                    scn_collect(&s, &w, s.scq[0], N - K, MAX_NS);
                    check_wcs(&w, N, SR_WC_SUCCESS, SR_WC_SEND);
                    scn_collect(&s, &rw, s.rcq[1], N, MAX_NS);
                    SR_CHECK_EQ(rw.got, N);
                } else {
                    scn_collect(&s, &w, s.scq[0], N, MAX_NS);
                    SR_CHECK_EQ(w.got, N);
                    for (int i = 0; i < w.got; i++) {
                        SR_CHECK_EQ(w.wc[i].wr_id, (uint64_t)i);
                        SR_CHECK_EQ(w.wc[i].status, i < K    ? SR_WC_SUCCESS
                                                    : i == K ? SR_WC_RNR_RETRY_EXC_ERR
                                                             : SR_WC_WR_FLUSH_ERR);
                    }
                    struct sr_qp_attr qa;
                    SR_CHECK_EQ(sr_qp_query(s.qp[0], &qa, NULL), 0);
                    SR_CHECK_EQ(qa.qp_state, SR_QPS_ERR);
                    scn_collect(&s, &rw, s.rcq[1], K, MAX_NS);
                    SR_CHECK_EQ(rw.got, K);
                    scn_stats(&s, 0, &st);
                    SR_CHECK(st.rnr_naks_rcvd >= 2); /* the first and the one retry */
                }
                for (int k = 0; k < rw.got; k++) {
                    SR_CHECK_EQ(rw.wc[k].wr_id, (uint64_t)k);
                    SR_CHECK_EQ(rw.wc[k].status, SR_WC_SUCCESS);
                    SR_CHECK_EQ(rw.wc[k].byte_len, L);
                    SR_CHECK_MEM(s.mem[1] + RBASE + (size_t)k * 4 * KIB,
                                 s.mem[0] + (size_t)k * 4 * KIB, L);
                }
                check_quiet(&s, s.rcq[1]);
                row_done(&s);
            }
    sr_test_ctx = "test_rnr_mid_lossy_sends: faults injected";
    check_injected(true, true, false);
}

/* ---- a ping-pong under loss ---- */

static int post_send_from(struct scn *s, int node, uint64_t id, uint64_t off, uint32_t len)
{
    struct sr_sge g = {(uintptr_t)s->mem[node] + off, len, sr_mr_lkey(s->mr[node])};
    struct sr_send_wr wr = {.wr_id = id,
                            .sg_list = &g,
                            .num_sge = 1,
                            .opcode = SR_WR_SEND,
                            .send_flags = SR_SEND_SIGNALED};
    return sr_qp_post_send(s->qp[node], &wr, s->now);
}

static int post_recv_at(struct scn *s, int node, uint64_t id, uint64_t off, uint32_t len)
{
    struct sr_sge g = {(uintptr_t)s->mem[node] + off, len, sr_mr_lkey(s->mr[node])};
    struct sr_recv_wr wr = {.wr_id = id, .sg_list = &g, .num_sge = 1};
    return sr_qp_post_recv(s->qp[node], &wr);
}

/* One completion from one CQ. */
struct one {
    struct sr_cq *cq;
    struct sr_wc wc;
    bool got;
};

static bool one_done(void *arg)
{
    struct one *o = arg;
    if (!o->got && sr_cq_poll(o->cq, 1, &o->wc) == 1)
        o->got = true;
    return o->got;
}

/* ibv_rc_pingpong's shape: one 64 KiB SEND each way in turn, each side
 * with its next receive posted, the transport timer at 2^14 x 4.096 us
 * (67 ms) and retry_cnt 7 as the Debian program sets them, under 10% loss.
 * A lost last packet, ACK or reply is found by the timer alone; a retry
 * that gets anything through starts the retry count over (IBA 9.7.6.1.3),
 * so 8 timer expiries in a row without progress are needed to fail, which
 * 10% loss makes vanishingly rare: every exchange must succeed. */
static void test_pingpong_under_loss(void)
{
    enum { ITERS = 100, L = 64 * KIB, RX = 1 << 20 };
    uint64_t repairs = 0;
    for (uint64_t seed = 1; seed <= 4 * seed_mult; seed++) {
        set_ctx("ping-pong under loss", seed, 0.1);
        struct scn s;
        scn_init(&s, &(struct scn_cfg){.seed = seed,
                                       .loss = 0.1,
                                       .reorder = 0.01,
                                       .dup = 0.005,
                                       .mtu = 4096,
                                       .timeout = 14,
                                       .retry_cnt = 7,
                                       .rnr_retry = 7,
                                       .min_rnr_timer = 12,
                                       .psn = {0xfffff0 + (uint32_t)seed, 77}});
        struct scn_wait sw[2] = {{0}};
        int ok = 0;
        for (int n = 0; n < 2; n++)
            SR_CHECK_EQ(post_recv_at(&s, n, 0, RX, L), 0);
        for (int it = 0; it < ITERS && ok == it; it++) {
            int legs = 0;
            for (int dir = 0; dir < 2; dir++) {
                int from = dir, to = 1 - dir;
                /* the payload names the iteration, so a stale one shows */
                s.mem[from][0] = (uint8_t)it;
                s.mem[from][1] = (uint8_t)dir;
                SR_CHECK_EQ(post_send_from(&s, from, (uint64_t)it, 0, L), 0);
                struct one o = {.cq = s.rcq[to]};
                if (!scn_run(&s, one_done, &o, 10000ull * MS))
                    break;
                SR_CHECK_EQ(o.wc.wr_id, (uint64_t)it);
                SR_CHECK_EQ(o.wc.status, SR_WC_SUCCESS);
                SR_CHECK_EQ(o.wc.byte_len, L);
                SR_CHECK_MEM(s.mem[to] + RX, s.mem[from], L);
                SR_CHECK_EQ(post_recv_at(&s, to, (uint64_t)it + 1, RX, L), 0);
                legs++;
            }
            ok += legs == 2;
        }
        SR_CHECK_EQ(ok, ITERS);
        for (int n = 0; n < 2; n++) {
            scn_collect(&s, &sw[n], s.scq[n], ITERS, 10000ull * MS);
            SR_CHECK_EQ(sw[n].got, ITERS);
            for (int i = 0; i < sw[n].got; i++) {
                if (sw[n].wc[i].status != SR_WC_SUCCESS)
                    fprintf(stderr, "[%s] node %d send %d: %s\n", ctx_buf, n, i,
                            sr_wc_status_name(sw[n].wc[i].status));
                SR_CHECK_EQ(sw[n].wc[i].status, SR_WC_SUCCESS);
            }
            struct sr_engine_stats st;
            scn_stats(&s, n, &st);
            repairs += st.timeouts + st.probes;
        }
        row_done(&s);
    }
    /* a lost last packet or ACK is reported by no NAK (IBA 9.7.5.1.2): a
     * tail-loss probe or the transport timer repaired it */
    sr_test_ctx = "test_pingpong_under_loss: probes or the timer repaired tail losses";
    SR_CHECK(repairs > 0);
    sr_test_ctx = "test_pingpong_under_loss: faults injected";
    check_injected(true, true, true);
}

/* ---- everything at once ---- */

/* SEND, WRITE, READ, FETCH_ADD and CMP_SWAP in a seeded random order and
 * random sizes (0..20 KiB), across the PSN wrap, with windows from 1 to 64
 * packets and MTUs from 256 to 4096, under 10% loss, 5% reordering (up to
 * 100 us) and 5% duplication (up to 200 us late). Every destination, every
 * completion and both atomic targets are checked. */
static void test_mixed_storm(void)
{
    /* N slots of SLOT bytes from 0 (sources, WRITE destinations, READ
     * sources), from RD on node 0 (READ destinations, atomic originals),
     * from RBASE on node 1 (receives); the atomic targets above them */
    enum { N = 60, SLOT = 24 * KIB, RBASE = 3 << 19, RD = 3 << 19, T1 = 7 << 19, T2 = T1 + 8 };
    _Static_assert(RD >= N * SLOT && RBASE + N * SLOT <= T1 && T2 + 8 <= SCN_MEM, "layout");
    static const uint32_t windows[] = {1, 2, 8, 64};
    static const uint32_t mtus[] = {256, 1024, 4096};
    for (uint64_t seed = 1; seed <= 8 * seed_mult; seed++) {
        set_ctx("mixed storm", seed, 0.1);
        struct scn s;
        scn_init(&s, &(struct scn_cfg){.seed = seed,
                                       .loss = 0.1,
                                       .reorder = 0.05,
                                       .reorder_max_ns = 100000,
                                       .dup = 0.05,
                                       .dup_max_ns = 200000,
                                       .window_pkts = windows[seed % 4],
                                       .mtu = mtus[seed % 3],
                                       .retry_cnt = 7,
                                       .psn = {0xffffff - (uint32_t)seed * 7, 0xfffff0}});
        uint8_t *src1 = scn_snapshot(&s, 1);
        uint8_t kind[N];
        uint32_t len[N];
        uint64_t faa = ld64(s.mem[1] + T1), cas = ld64(s.mem[1] + T2), faa0 = faa, cas0 = cas;
        int sends = 0;
        for (int i = 0; i < N; i++) {
            uint64_t off = (uint64_t)i * SLOT;
            kind[i] = (uint8_t)(scn_rand(&s) % 5);
            len[i] = (uint32_t)(scn_rand(&s) % (20 * KIB + 1));
            int err = 0;
            switch (kind[i]) {
            case 0:
                SR_CHECK_EQ(
                    scn_post_recv(&s, (uint64_t)sends, RBASE + (uint64_t)sends * SLOT, SLOT), 0);
                sends++;
                err = scn_post(&s, SR_WR_SEND, (uint64_t)i, off, 0, len[i], 0, 0);
                break;
            case 1:
                err = scn_post(&s, SR_WR_RDMA_WRITE, (uint64_t)i, off, off, len[i], 0, 0);
                break;
            case 2:
                err = scn_post(&s, SR_WR_RDMA_READ, (uint64_t)i, RD + off, off, len[i], 0, 0);
                break;
            case 3:
                err = scn_post(&s, SR_WR_ATOMIC_FETCH_AND_ADD, (uint64_t)i, RD + off, T1, 8,
                               (uint64_t)i + 1, 0);
                break;
            default: {
                uint64_t next = cas * 2862933555777941757ull + 3037000493ull;
                err =
                    scn_post(&s, SR_WR_ATOMIC_CMP_AND_SWP, (uint64_t)i, RD + off, T2, 8, cas, next);
                break;
            }
            }
            SR_CHECK_EQ(err, 0);
            /* what each atomic must return, in PSN order */
            if (kind[i] == 3) {
                memcpy(src1 + RD + off, &faa, 8); /* expected original, kept beside */
                faa += (uint64_t)i + 1;
            } else if (kind[i] == 4) {
                memcpy(src1 + RD + off, &cas, 8);
                cas = cas * 2862933555777941757ull + 3037000493ull;
            }
        }
        struct scn_wait w = {0};
        scn_collect(&s, &w, s.scq[0], N, 4 * MAX_NS);
        static const enum sr_wc_opcode ops[] = {SR_WC_SEND, SR_WC_RDMA_WRITE, SR_WC_RDMA_READ,
                                                SR_WC_FETCH_ADD, SR_WC_COMP_SWAP};
        check_wcs(&w, N, SR_WC_SUCCESS, -1);
        for (int i = 0; i < w.got; i++)
            SR_CHECK_EQ(w.wc[i].opcode, ops[kind[i]]);
        scn_run(&s, NULL, NULL, 50ull * MS);
        struct scn_wait rw = {0};
        scn_collect(&s, &rw, s.rcq[1], sends, MS);
        SR_CHECK_EQ(rw.got, sends);
        int k = 0;
        for (int i = 0; i < N; i++) {
            size_t off = (size_t)i * SLOT;
            switch (kind[i]) {
            case 0:
                if (k < rw.got) {
                    SR_CHECK_EQ(rw.wc[k].wr_id, (uint64_t)k);
                    SR_CHECK_EQ(rw.wc[k].status, SR_WC_SUCCESS);
                    SR_CHECK_EQ(rw.wc[k].byte_len, len[i]);
                    SR_CHECK_MEM(s.mem[1] + RBASE + (size_t)k * SLOT, s.mem[0] + off, len[i]);
                }
                k++;
                break;
            case 1:
                SR_CHECK_MEM(s.mem[1] + off, s.mem[0] + off, len[i]);
                break;
            case 2:
                SR_CHECK_MEM(s.mem[0] + RD + off, src1 + off, len[i]);
                break;
            default:
                SR_CHECK_MEM(s.mem[0] + RD + off, src1 + RD + off, 8);
                break;
            }
        }
        SR_CHECK_EQ(ld64(s.mem[1] + T1), faa);
        SR_CHECK_EQ(ld64(s.mem[1] + T2), cas);
        struct sr_engine_stats st;
        scn_stats(&s, 1, &st);
        int atomics = 0;
        for (int i = 0; i < N; i++)
            atomics += kind[i] >= 3;
        SR_CHECK_EQ(st.atomics_executed, (uint64_t)atomics);
        SR_CHECK(faa != faa0 && cas != cas0); /* both kinds ran */
        free(src1);
        row_done(&s);
    }
    sr_test_ctx = "test_mixed_storm: faults injected";
    check_injected(true, true, true);
}

/* ---- forged SACKs ---- */

/* The last cumulative PSN node 1 acknowledged, as the wire saw it. */
static uint32_t forge_cum;
static bool forge_seen;
static void see_acks(struct scn *s, const struct scn_pkt_info *pi, struct scn_verdict *v)
{
    (void)s;
    (void)v;
    if (pi->from == 1 && (pi->opcode == SCN_OP_ACK || pi->opcode == SR_OP_SACK)) {
        /* a NAK (AETH type 01 or 11, IBA 9.7.5.2.8) acknowledges what
         * precedes its PSN only */
        forge_cum = pi->syndrome & 0x60 ? sr_psn_add(pi->psn, SR_PSN_MASK) : pi->psn;
        forge_seen = true;
    }
}

/* A SACK from node 1's address to node 0's QP, encoded as a peer would:
 * kind 0 claims every PSN in flight arrived (a lie), 1 has a bitmap that
 * is no whole 64-bit word, 2 a base PSN far outside the window, 3 a
 * cumulative PSN never sent. Marked as a softrdma responder's answers are
 * (SR_BTH_RESV7_SACK) when lie is set, else unmarked. */
static void forge_sack(struct scn *s, int kind, bool marked)
{
    static uint8_t bm[2048 / 8]; /* the longest bitmap docs/WIRE.md allows */
    memset(bm, 0xff, sizeof(bm));
    struct sr_pkt p = {0};
    p.bth.opcode = SR_OP_SACK;
    p.bth.pkey = 0xffff;
    p.bth.dest_qp = sr_qp_num(s->qp[0]);
    p.bth.psn = kind == 3 ? sr_psn_add(forge_cum, 100000) : forge_cum;
    p.bth.resv7 = marked ? SR_BTH_RESV7_SACK : 0;
    p.aeth.syndrome = SR_AETH_ACK | SR_AETH_NO_CREDIT_LIMIT;
    p.sack.base_psn = sr_psn_add(forge_cum, kind == 2 ? 1u << 22 : 2);
    p.payload = bm;
    p.payload_len = kind == 1 ? 12 : sizeof(bm);
    uint8_t buf[SR_MAX_HDR_LEN + sizeof(bm) + 16];
    int n = sr_wire_encode(&p, buf, sizeof(buf));
    SR_CHECK(n > 0);
    uint8_t src[16];
    scn_gid(src, 1);
    if (n > 0)
        sr_engine_rx(s->eng[0], buf, (size_t)n, src, s->now);
}

/* SACKs that lie or are malformed, mixed into a lossy transfer of WRITEs
 * and READs: every byte still lands, every completion is a success in
 * order, nothing completes twice, and the bad ones are counted. A lie can
 * only delay: the marks are advisory, and the second timeout without
 * progress discards them. To a standard requester, any SACK is dropped. */
static void test_forged_sacks(void)
{
    enum { N = 24, L = 12 * KIB, RD = 2 << 20 };
    for (uint64_t seed = 1; seed <= 3 * seed_mult; seed++) {
        set_ctx("forged sacks", seed, 0.05);
        struct scn s;
        forge_seen = false;
        scn_init(&s, &(struct scn_cfg){.seed = seed,
                                       .loss = 0.05,
                                       .retry_cnt = 7,
                                       .psn = {0xffffff - 40, 9},
                                       .filter = see_acks});
        uint8_t *orig = scn_snapshot(&s, 1);
        for (int i = 0; i < N; i++) {
            uint64_t off = (uint64_t)i * L;
            SR_CHECK_EQ(i % 3 == 2
                            ? scn_post(&s, SR_WR_RDMA_READ, (uint64_t)i, RD + off, off, L, 0, 0)
                            : scn_post(&s, SR_WR_RDMA_WRITE, (uint64_t)i, off, off, L, 0, 0),
                        0);
        }
        struct scn_wait w = {0};
        int kind = 0;
        for (int round = 0; round < 20000 && w.got < N; round++) {
            scn_collect(&s, &w, s.scq[0], N - w.got, 50000);
            if (forge_seen) {
                forge_sack(&s, kind % 4, (kind / 4) % 2);
                kind++;
            }
        }
        check_wcs(&w, N, SR_WC_SUCCESS, -1);
        for (int i = 0; i < N; i++) {
            uint64_t off = (uint64_t)i * L;
            if (i % 3 == 2)
                SR_CHECK_MEM(s.mem[0] + RD + off, orig + off, L);
            else
                SR_CHECK_MEM(s.mem[1] + off, s.mem[0] + off, L);
        }
        SR_CHECK_MEM(s.mem[1] + (size_t)N * L, orig + (size_t)N * L, SCN_MEM - (size_t)N * L);
        check_quiet(&s, s.scq[0]);
        struct sr_engine_stats st;
        scn_stats(&s, 0, &st);
        SR_CHECK(kind >= 4);
        SR_CHECK(st.sack_bad > 0);
        free(orig);
        scn_fini(&s);
    }
}

/* ---- the checks can fail ---- */

/* The byte and completion checks above are live: a run that passes them,
 * with one byte of the responder's memory then damaged, fails the same
 * comparison. */
static void test_checks_can_fail(void)
{
    sr_test_ctx = "checks can fail";
    struct scn s;
    scn_init(&s, &(struct scn_cfg){.seed = 1, .retry_cnt = 7});
    int before = sr_test_failures;
    writes_row(&s, 4, 8 * KIB);
    SR_CHECK_EQ(sr_test_failures, before);
    /* damage one byte the responder wrote: the same check must now fail */
    s.mem[1][5000] ^= 0x40;
    fprintf(stderr, "checks can fail: the next failure report is expected\n");
    int f0 = sr_test_failures;
    SR_CHECK_MEM(s.mem[1], s.mem[0], 4 * 8 * KIB);
    int caught = sr_test_failures - f0;
    sr_test_failures = f0; /* an expected failure */
    sr_test_ctx = "checks can fail";
    SR_CHECK_EQ(caught, 1);
    scn_fini(&s);
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "std";
    if (scn_pairing(mode, sack_mode)) {
        fprintf(stderr, "usage: loss_scenarios [std|sack|sack-std|std-sack]\n");
        return 2;
    }
    const char *k = getenv("LOSS_SCN_SEEDS");
    if (k && strtoull(k, NULL, 10) > 0)
        seed_mult = strtoull(k, NULL, 10);
    /* LOSS_SCN_ONLY=name runs the scenarios whose function name has it */
    const char *only = getenv("LOSS_SCN_ONLY");
#undef SR_RUN
#define SR_RUN(fn)                                                                                 \
    do {                                                                                           \
        if (only && !strstr(#fn, only))                                                            \
            break;                                                                                 \
        int sr_before_ = sr_test_failures;                                                         \
        sr_test_ctx = #fn;                                                                         \
        fn();                                                                                      \
        printf("%-40s %s\n", #fn, sr_test_failures == sr_before_ ? "ok" : "FAILED");               \
    } while (0)
    SR_RUN(test_checks_can_fail);
    SR_RUN(test_reorder_within_window);
    SR_RUN(test_reorder_beyond_window);
    SR_RUN(test_window_edges);
    SR_RUN(test_psn_wrap);
    SR_RUN(test_lost_read_responses);
    SR_RUN(test_lost_atomic_acks);
    SR_RUN(test_acked_duplicates);
    SR_RUN(test_rnr_mid_lossy_sends);
    SR_RUN(test_mixed_storm);
    SR_RUN(test_pingpong_under_loss);
    SR_RUN(test_forged_sacks);
    printf("wire: %" PRIu64 " rows, %" PRIu64 " packets, %" PRIu64 " dropped, %" PRIu64
           " delayed, %" PRIu64 " duplicated\n",
           tot.rows, tot.sent, tot.dropped, tot.delayed, tot.duplicated);
    printf("selective recovery (%s): %" PRIu64 " SACKs, %" PRIu64
           " requests kept out of order as copies, %" PRIu64 " placed, %" PRIu64
           " selective resends\n",
           mode, sack_tot.sacks, sack_tot.stored, sack_tot.placed, sack_tot.resends);
    if (sack_mode[0] && sack_mode[1] && !only) {
        sr_test_ctx = "sack pairs used selective recovery";
        SR_CHECK(sack_tot.sacks > 0 && sack_tot.stored > 0 && sack_tot.resends > 0);
    }
    return SR_TEST_RESULT();
}

/* readsel_scenarios.c: selective READ recovery (src/engine/readsel.h) on
 * two real engines over the simulated wire of scn.h. Every row asserts
 * what the application sees (every byte read, byte_len, the memory beside
 * each sink untouched, completions in order, atomics executed once) and,
 * when the requester does selective recovery, that the repair was
 * selective: each lost response asked for again about once
 * (read_rereq_psns against the responses the wire dropped), and the
 * responder sending little more than one copy of each response.
 *
 *   - several holes in one READ, with reordering, at MTU 1024;
 *   - responses held far longer than DupThresh packet times yet within
 *     the round trip: asked for again only until the window learns;
 *   - hole requests lost, asked for again once a later one is answered;
 *   - holes on both sides of the PSN wrap;
 *   - READs interleaved with WRITEs and FETCH_ADDs;
 *   - late copies of responses after their WQE completed and the
 *     application reused the sink;
 *   - responses still on the wire when the QP is flushed;
 *   - a re-requested range answered twice.
 *
 *   readsel_scenarios [std|sack|sack-std|std-sack]
 * as loss_scenarios: node 0 (the reader) and node 1 (the responder) each
 * standard go-back-N or selective; a standard requester must behave as
 * before (no response placed out of order, no hole request). */
#include "scn.h"

#include <inttypes.h>
#include <stdio.h>

enum { KIB = 1024, MS = 1000000 };
static const uint64_t MAX_NS = 2000ull * MS;

static bool sack_mode[2];
/* responses seen, by PSN modulo 2^16 (rows use far fewer PSNs); cleared
 * by rscn_init */
static uint8_t resp_seen[1 << 16];

static void rscn_init(struct scn *s, const struct scn_cfg *c)
{
    memset(resp_seen, 0, sizeof(resp_seen));
    struct scn_cfg cc = *c;
    cc.sack[0] = sack_mode[0];
    cc.sack[1] = sack_mode[1];
    scn_init(s, &cc);
}

static char ctx_buf[160];
static void set_ctx(const char *name, uint64_t seed)
{
    snprintf(ctx_buf, sizeof(ctx_buf), "%s seed=%" PRIu64, name, seed);
    sr_test_ctx = ctx_buf;
}

/* What the filter does to READ responses (node 1 to node 0) and READ
 * requests (node 0 to node 1), and what it saw. */
struct rfilt {
    uint32_t mod, rem; /* the first response for a psn % mod == rem is lost */
    uint32_t mod2, rem2;
    double reorder; /* a response held back 1..reorder_ns */
    uint64_t reorder_ns;
    bool dup_late;  /* every response copied, the copy 2 ms later */
    bool dup_rereq; /* every READ request after the first orig_reqs is duplicated */
    uint32_t
        lose_rereq; /* every lose_rereq-th hole request (a READ request inside a READ) is lost */
    uint32_t psn0, per; /* set by reads_row: the first READ's PSN, PSNs per READ */
    uint64_t rereq_sent;
    uint64_t orig_reqs;
    uint32_t wrap_lo, wrap_hi; /* first copies with psn in [lo, hi) (mod 2^24) lost too */
    /* check: at most this share of the held responses asked for; 0: all */
    double held_share;
    /* seen */
    uint64_t resp_sent, resp_dropped, resp_delayed, req_sent, rereq_lost;
};

static bool in_range(uint32_t psn, uint32_t lo, uint32_t hi)
{
    return lo != hi && !sr_psn_lt(psn, lo) && sr_psn_lt(psn, hi);
}

static void filt(struct scn *s, const struct scn_pkt_info *pi, struct scn_verdict *v)
{
    struct rfilt *f = s->cfg.filter_arg;
    bool resp = pi->opcode >= SCN_OP_READ_RESP_FIRST && pi->opcode <= SCN_OP_READ_RESP_ONLY;
    if (pi->from == 0 && pi->opcode == SCN_OP_READ_REQ) {
        f->req_sent++;
        if (f->dup_rereq && f->req_sent > f->orig_reqs) {
            v->dup = true;
            v->dup_delay_ns = 3000;
        }
        if (f->lose_rereq && f->per && (uint32_t)sr_psn_diff(pi->psn, f->psn0) % f->per != 0 &&
            ++f->rereq_sent % f->lose_rereq == 0) {
            v->drop = true;
            f->rereq_lost++;
        }
        return;
    }
    if (pi->from != 1 || !resp)
        return;
    f->resp_sent++;
    /* first sight of the PSN, whichever opcode answers it (a hole asked
     * for alone comes back as FIRST, LAST or ONLY where MIDDLE was) */
    bool first = !resp_seen[pi->psn & 0xffff];
    resp_seen[pi->psn & 0xffff] = 1;
    if (first &&
        ((f->mod && pi->psn % f->mod == f->rem) || (f->mod2 && pi->psn % f->mod2 == f->rem2) ||
         in_range(pi->psn, f->wrap_lo, f->wrap_hi))) {
        v->drop = true;
        f->resp_dropped++;
        return;
    }
    if (f->reorder > 0 && scn_unit(s) < f->reorder) {
        v->delay_ns = 1 + scn_rand(s) % f->reorder_ns;
        f->resp_delayed++;
    }
    if (f->dup_late) {
        v->dup = true;
        v->dup_delay_ns = 2 * MS;
    }
}

static void check_wcs(const struct scn_wait *w, int n, const enum sr_wc_opcode *ops,
                      const uint32_t *lens)
{
    SR_CHECK_EQ(w->got, n);
    for (int i = 0; i < w->got && i < n; i++) {
        SR_CHECK_EQ(w->wc[i].wr_id, (uint64_t)i);
        SR_CHECK_EQ(w->wc[i].status, SR_WC_SUCCESS);
        SR_CHECK_EQ(w->wc[i].opcode, ops[i]);
        if (ops[i] == SR_WC_RDMA_READ)
            SR_CHECK_EQ(w->wc[i].byte_len, lens[i]);
    }
}

static void check_quiet(struct scn *s)
{
    scn_run(s, NULL, NULL, 50ull * MS);
    struct sr_wc wc;
    SR_CHECK_EQ(sr_cq_poll(s->scq[0], 1, &wc), 0);
}

/* Selective when node 0 does selective recovery: every lost response
 * asked for again at least once and at most twice, plus at most once
 * each response the wire held back (asked for too early); the responder
 * sends at most three extra copies per loss and two per late one (go-back-N
 * would resend the rest of the READ from each hole). A standard node 0
 * never places out of order. */
static void check_selective(struct scn *s, const struct rfilt *f, uint64_t resp_pkts)
{
    struct sr_engine_stats st;
    scn_stats(s, 0, &st);
    if (!sack_mode[0]) {
        SR_CHECK_EQ(st.read_ooo_placed, 0);
        SR_CHECK_EQ(st.read_rereqs, 0);
        return;
    }
    if (getenv("READSEL_SCN_VERBOSE"))
        fprintf(stderr,
                "placed %llu rereqs %llu psns %llu dropped %llu sent %llu base %llu delayed %llu "
                "probes %llu timeouts %llu late %llu lost-again %llu\n",
                (unsigned long long)st.read_ooo_placed, (unsigned long long)st.read_rereqs,
                (unsigned long long)st.read_rereq_psns, (unsigned long long)f->resp_dropped,
                (unsigned long long)f->resp_sent, (unsigned long long)resp_pkts,
                (unsigned long long)f->resp_delayed, (unsigned long long)st.probes,
                (unsigned long long)st.timeouts, (unsigned long long)st.read_late,
                (unsigned long long)st.read_rereq_lost);
    if (getenv("READSEL_SCN_VERBOSE") && f->lose_rereq)
        fprintf(stderr, "hole requests lost on the wire %llu\n", (unsigned long long)f->rereq_lost);
    SR_CHECK(f->resp_dropped > 0);
    SR_CHECK(st.read_ooo_placed > 0);
    SR_CHECK(st.read_rereq_psns >= f->resp_dropped);
    double share = f->held_share > 0 ? f->held_share : 1;
    SR_CHECK(st.read_rereq_psns <=
             2 * f->resp_dropped + (uint64_t)(share * (double)f->resp_delayed) + 2 * f->rereq_lost);
    SR_CHECK(f->resp_sent <= resp_pkts + 3 * f->resp_dropped + 2 * f->resp_delayed);
    if (f->lose_rereq) {
        /* a lost hole request is asked for again once a later one is
         * answered (the responder answers in order), not after a probe
         * timeout */
        SR_CHECK(f->rereq_lost > 0);
        SR_CHECK(st.probes * 8 <= f->rereq_lost);
        SR_CHECK_EQ(st.timeouts, 0);
    }
}

/* n READs of len bytes each, node 1's SRC + i*len into node 0's i*len,
 * with the wire's faults of f; then data, byte_len, the memory beside,
 * the completions, selectivity. */
static void reads_row(const char *name, uint64_t seed, uint32_t n, uint32_t len, uint32_t psn,
                      struct rfilt *f)
{
    enum { SRC = 2 << 20 };
    set_ctx(name, seed);
    struct scn s;
    rscn_init(&s, &(struct scn_cfg){.seed = seed,
                                    .window_pkts = 512,
                                    .retry_cnt = 7,
                                    .max_rd_atomic = 8,
                                    .psn = {psn, 77},
                                    .filter = filt,
                                    .filter_arg = f});
    f->orig_reqs = n;
    f->psn0 = psn;
    f->per = (len + 1023) / 1024;
    uint8_t *before = scn_snapshot(&s, 0);
    enum sr_wc_opcode ops[64];
    uint32_t lens[64];
    for (uint32_t i = 0; i < n; i++) {
        ops[i] = SR_WC_RDMA_READ;
        lens[i] = len;
        SR_CHECK_EQ(
            scn_post(&s, SR_WR_RDMA_READ, i, (uint64_t)i * len, SRC + (uint64_t)i * len, len, 0, 0),
            0);
    }
    struct scn_wait w = {0};
    scn_collect(&s, &w, s.scq[0], (int)n, MAX_NS);
    check_wcs(&w, (int)n, ops, lens);
    size_t done = (size_t)n * len;
    SR_CHECK_MEM(s.mem[0], s.mem[1] + SRC, done);
    SR_CHECK_MEM(s.mem[0] + done, before + done, SCN_MEM - done);
    uint32_t per = (len + 1023) / 1024;
    check_selective(&s, f, (uint64_t)n * per);
    check_quiet(&s);
    free(before);
    scn_fini(&s);
}

/* Several holes in each 64-packet READ, responses reordered by up to 8
 * packet times: each hole asked for alone. */
static void test_holes_reordered(void)
{
    for (uint64_t seed = 1; seed <= 4; seed++) {
        struct rfilt f = {
            .mod = 13, .rem = 5, .mod2 = 29, .rem2 = 11, .reorder = 0.05, .reorder_ns = 7000};
        reads_row("several holes, reordered", seed, 8, 64 * KIB, 1000, &f);
    }
}

/* Responses held up to 100 us, a quarter of the round trip that eight
 * 64 KiB READs in flight make at 10 Gb/s (about 400 us), so that up to
 * 120 later ones pass each: every such hole counts lost by DupThresh, but
 * the reordering window, once late originals have shown how late they
 * run, keeps most of them from being asked for (RFC 8985 6.2). Without
 * it, nearly every held response was asked for again. */
static void test_held_within_rtt(void)
{
    for (uint64_t seed = 1; seed <= 3; seed++) {
        struct rfilt f = {
            .mod = 101, .rem = 7, .reorder = 0.03, .reorder_ns = 100000, .held_share = 0.3};
        reads_row("responses held within the round trip", seed, 32, 64 * KIB, 3000, &f);
    }
}

/* Every third hole request lost on the wire: the responder answers
 * requests in order, so an answer to a later one shows it lost (RFC 8985
 * 6.3), and it is asked for again then, not at a probe timeout. */
static void test_hole_requests_lost(void)
{
    for (uint64_t seed = 1; seed <= 3; seed++) {
        struct rfilt f = {.mod = 37, .rem = 5, .lose_rereq = 3};
        reads_row("hole requests lost", seed, 32, 64 * KIB, 9000, &f);
    }
}

/* Holes just before and just after the PSN wrap, inside one READ. */
static void test_holes_across_wrap(void)
{
    for (uint64_t seed = 1; seed <= 3; seed++) {
        /* READ 0 spans 0xffffe0 .. 0x00001f: lose 0xfffff8..0xfffffb and 0x2..0x4 */
        struct rfilt f = {
            .mod = 0, .wrap_lo = 0xfffff8, .wrap_hi = 0xfffffc, .mod2 = 1u << 24, .rem2 = 3};
        reads_row("holes across the PSN wrap", seed, 4, 64 * KIB, 0xffffe0, &f);
        struct rfilt g = {
            .wrap_lo = 0xfffffe, .wrap_hi = 0x000003, .reorder = 0.1, .reorder_ns = 5000};
        reads_row("hole over the PSN wrap", seed, 4, 64 * KIB, 0xffffe0, &g);
    }
}

/* A re-requested range answered twice: every second request for a hole
 * arrives twice, so the responder sends the hole's responses twice; the
 * second copies find the PSNs placed (or the WQE done) and are dropped. */
static void test_rerequest_answered_twice(void)
{
    for (uint64_t seed = 1; seed <= 3; seed++) {
        struct rfilt f = {.mod = 17, .rem = 3, .dup_rereq = true};
        reads_row("re-requested range answered twice", seed, 6, 32 * KIB, 500, &f);
    }
}

static uint64_t ld64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

/* READ, WRITE, FETCH_ADD in turn, READ responses lost: WRITEs land,
 * atomics execute once, completions stay in order, READs end with the
 * responder's bytes. */
static void test_reads_with_writes_and_atomics(void)
{
    enum { N = 24, L = 24 * KIB, SRC = 1 << 20, T = 3 << 20, RD = 2 << 20 };
    for (uint64_t seed = 1; seed <= 4; seed++) {
        set_ctx("READs among WRITEs and atomics", seed);
        struct rfilt f = {.mod = 11, .rem = 4, .reorder = 0.03, .reorder_ns = 6000};
        struct scn s;
        rscn_init(&s, &(struct scn_cfg){.seed = seed,
                                        .loss = seed > 2 ? 0.01 : 0,
                                        .retry_cnt = 7,
                                        .max_rd_atomic = 8,
                                        .psn = {0xffff00, 9},
                                        .filter = filt,
                                        .filter_arg = &f});
        uint8_t *before = scn_snapshot(&s, 0);
        uint64_t v0 = ld64(s.mem[1] + T), sum = 0;
        enum sr_wc_opcode ops[N];
        uint32_t lens[N];
        for (int i = 0; i < N; i++) {
            uint64_t off = (uint64_t)i * L;
            lens[i] = L;
            int err;
            switch (i % 3) {
            case 0:
                ops[i] = SR_WC_RDMA_READ;
                err = scn_post(&s, SR_WR_RDMA_READ, (uint64_t)i, RD + off, SRC + off, L, 0, 0);
                break;
            case 1:
                ops[i] = SR_WC_RDMA_WRITE;
                err = scn_post(&s, SR_WR_RDMA_WRITE, (uint64_t)i, off, off, L, 0, 0);
                break;
            default:
                ops[i] = SR_WC_FETCH_ADD;
                err = scn_post(&s, SR_WR_ATOMIC_FETCH_AND_ADD, (uint64_t)i, off, T, 8, (uint64_t)i,
                               0);
                sum += (uint64_t)i;
                break;
            }
            SR_CHECK_EQ(err, 0);
        }
        struct scn_wait w = {0};
        scn_collect(&s, &w, s.scq[0], N, MAX_NS);
        check_wcs(&w, N, ops, lens);
        SR_CHECK_EQ(ld64(s.mem[1] + T), v0 + sum); /* each atomic executed once */
        for (int i = 0; i < N; i++) {
            uint64_t off = (uint64_t)i * L;
            if (i % 3 == 0)
                SR_CHECK_MEM(s.mem[0] + RD + off, s.mem[1] + SRC + off, L);
            else if (i % 3 == 1)
                SR_CHECK_MEM(s.mem[1] + off, s.mem[0] + off, L);
        }
        /* beside the READ sinks: nothing written */
        SR_CHECK_MEM(s.mem[0] + RD + (size_t)N * L, before + RD + (size_t)N * L,
                     SCN_MEM - RD - (size_t)N * L);
        struct sr_engine_stats st;
        scn_stats(&s, 0, &st);
        if (sack_mode[0])
            SR_CHECK(st.read_ooo_placed > 0 && st.read_rereqs > 0);
        else
            SR_CHECK_EQ(st.read_rereqs, 0);
        check_quiet(&s);
        free(before);
        scn_fini(&s);
    }
}

/* Every response also arrives a second time 2 ms later, long after its
 * READ completed; the application has reused each sink by then (filled
 * it with 0x5a): no late copy may write there. */
static void test_late_copies_after_completion(void)
{
    enum { N = 8, L = 16 * KIB, SRC = 1 << 20 };
    for (uint64_t seed = 1; seed <= 3; seed++) {
        set_ctx("late copies after completion", seed);
        struct rfilt f = {.mod = 7, .rem = 2, .dup_late = true};
        struct scn s;
        rscn_init(
            &s,
            &(struct scn_cfg){
                .seed = seed, .retry_cnt = 7, .psn = {300, 9}, .filter = filt, .filter_arg = &f});
        scn_post_reads(&s, N, L, SRC);
        struct scn_wait w = {0};
        scn_collect(&s, &w, s.scq[0], N, MAX_NS);
        enum sr_wc_opcode ops[N];
        uint32_t lens[N];
        for (int i = 0; i < N; i++) {
            ops[i] = SR_WC_RDMA_READ;
            lens[i] = L;
        }
        check_wcs(&w, N, ops, lens);
        SR_CHECK_MEM(s.mem[0], s.mem[1] + SRC, (size_t)N * L);
        SR_CHECK(s.now < 2 * MS); /* the late copies are still on the wire */
        memset(s.mem[0], 0x5a, (size_t)N * L);
        /* more READs use the QP meanwhile, into other memory */
        for (int i = 0; i < N; i++)
            SR_CHECK_EQ(scn_post(&s, SR_WR_RDMA_READ, (uint64_t)(N + i),
                                 (2u << 20) + (uint64_t)i * L, SRC + (uint64_t)i * L, L, 0, 0),
                        0);
        struct scn_wait w2 = {0};
        scn_collect(&s, &w2, s.scq[0], N, MAX_NS);
        SR_CHECK_EQ(w2.got, N);
        scn_run(&s, NULL, NULL, 10ull * MS);
        for (size_t k = 0; k < (size_t)N * L; k++)
            if (s.mem[0][k] != 0x5a) {
                SR_CHECK_EQ(s.mem[0][k], 0x5a);
                break;
            }
        SR_CHECK_MEM(s.mem[0] + (2u << 20), s.mem[1] + SRC, (size_t)N * L);
        check_quiet(&s);
        scn_fini(&s);
    }
}

/* Responses held back on the wire while the QP is moved to Error: the
 * READs flush, and what arrives afterwards (placed out of order or not)
 * never reaches the sinks, which the application refilled. */
static void test_responses_after_flush(void)
{
    enum { N = 6, L = 32 * KIB, SRC = 1 << 20 };
    for (uint64_t seed = 1; seed <= 3; seed++) {
        set_ctx("responses after the flush", seed);
        struct rfilt f = {.mod = 5, .rem = 1, .reorder = 0.5, .reorder_ns = 400000};
        struct scn s;
        rscn_init(&s, &(struct scn_cfg){.seed = seed,
                                        .retry_cnt = 7,
                                        .psn = {0xfffff0, 9},
                                        .filter = filt,
                                        .filter_arg = &f});
        uint8_t *before = scn_snapshot(&s, 0);
        scn_post_reads(&s, N, L, SRC);
        scn_run(&s, NULL, NULL, 60000); /* some responses in, many held back */
        struct sr_qp_attr a = {.qp_state = SR_QPS_ERR};
        SR_CHECK_EQ(sr_qp_modify(s.qp[0], &a, SR_QP_STATE, s.now), 0);
        struct scn_wait w = {0};
        scn_collect(&s, &w, s.scq[0], N, 10ull * MS);
        SR_CHECK_EQ(w.got, N);
        int flushed = 0;
        for (int i = 0; i < w.got; i++) {
            SR_CHECK_EQ(w.wc[i].wr_id, (uint64_t)i);
            flushed += w.wc[i].status == SR_WC_WR_FLUSH_ERR;
            if (w.wc[i].status == SR_WC_SUCCESS)
                SR_CHECK_MEM(s.mem[0] + (size_t)i * L, s.mem[1] + SRC + (size_t)i * L, L);
        }
        SR_CHECK(flushed > 0);
        memset(s.mem[0], 0xa5, (size_t)N * L);
        scn_run(&s, NULL, NULL, 5ull * MS); /* every held-back response arrives */
        for (size_t k = 0; k < (size_t)N * L; k++)
            if (s.mem[0][k] != 0xa5) {
                SR_CHECK_EQ(s.mem[0][k], 0xa5);
                break;
            }
        SR_CHECK_MEM(s.mem[0] + (size_t)N * L, before + (size_t)N * L, SCN_MEM - (size_t)N * L);
        free(before);
        scn_fini(&s);
    }
}

int main(int argc, char **argv)
{
    (void)scn_post_recv; /* scn.h's, for other scenario files */
    const char *mode = argc > 1 ? argv[1] : "std";
    if (scn_pairing(mode, sack_mode)) {
        fprintf(stderr, "usage: readsel_scenarios [std|sack|sack-std|std-sack]\n");
        return 2;
    }
    SR_RUN(test_holes_reordered);
    SR_RUN(test_held_within_rtt);
    SR_RUN(test_hole_requests_lost);
    SR_RUN(test_holes_across_wrap);
    SR_RUN(test_rerequest_answered_twice);
    SR_RUN(test_reads_with_writes_and_atomics);
    SR_RUN(test_late_copies_after_completion);
    SR_RUN(test_responses_after_flush);
    return SR_TEST_RESULT();
}

/* place_scenarios.c: direct placement of out-of-order RDMA WRITE pieces
 * and of SEND pieces that carry an RPETH (src/engine/place.c) and the SACKs of the out-of-order
 * store (ooo.c), on two real engines with selective recovery over the simulated wire of scn.h. Each
 * row states what the application must see (every byte of the target and around it, every
 * completion's status, opcode and order) and what placement must have done (pieces placed, not
 * copied; the store small; a piece whose target is unknown or invalid kept and handled in
 * sequence), and bounds the SACKs per hole.
 *
 * Seeded, simulated time only. */
#include "scn.h"

#include <inttypes.h>
#include <stdio.h>

enum { KIB = 1024, MS = 1000000 };
static const uint64_t MAX_NS = 2000ull * MS;

static char ctx_buf[160];
static void set_ctx(const char *name, uint64_t seed)
{
    snprintf(ctx_buf, sizeof(ctx_buf), "%s seed=%" PRIu64, name, seed);
    sr_test_ctx = ctx_buf;
}

static void sack_init(struct scn *s, struct scn_cfg c)
{
    c.sack[0] = c.sack[1] = true;
    scn_init(s, &c);
}

/* Drops the first copy of each request PSN listed (offsets from the first
 * PSN), and nothing else. */
struct drops {
    uint32_t base;
    const uint32_t *off;
    int n;
};

static void drop_listed(struct scn *s, const struct scn_pkt_info *pi, struct scn_verdict *v)
{
    const struct drops *d = s->cfg.filter_arg;
    if (pi->from != 0 || pi->nth != 0)
        return;
    for (int i = 0; i < d->n; i++)
        if (pi->psn == ((d->base + d->off[i]) & 0xffffff))
            v->drop = true;
}

static void check_wcs(const struct scn_wait *w, int n, enum sr_wc_status st)
{
    SR_CHECK_EQ(w->got, n);
    for (int i = 0; i < w->got && i < n; i++) {
        SR_CHECK_EQ(w->wc[i].wr_id, (uint64_t)i);
        SR_CHECK_EQ(w->wc[i].status, st);
    }
}

static void stats1(struct scn *s, struct sr_engine_stats *st)
{
    scn_stats(s, 1, st);
}

/* n WRITEs of len bytes from node 0's offset i*len to node 1's; every byte
 * of node 1's buffer checked. */
static void writes(struct scn *s, int n, uint32_t len)
{
    uint8_t *orig = scn_snapshot(s, 1);
    scn_post_writes(s, n, len);
    struct scn_wait w = {0};
    scn_collect(s, &w, s->scq[0], n, MAX_NS);
    check_wcs(&w, n, SR_WC_SUCCESS);
    size_t done = (size_t)n * len;
    SR_CHECK_MEM(s->mem[1], s->mem[0], done);
    SR_CHECK_MEM(s->mem[1] + done, orig + done, SCN_MEM - done);
    free(orig);
}

/* Holes inside messages (their FIRST executed in order), at a FIRST (its
 * MIDDLEs have no known target: copied, never placed), at a LAST, and
 * across the PSN wrap. */
static void test_holes(void)
{
    /* 16 KiB at MTU 1024: 16 packets a message, PSN 16 m + k */
    static const uint32_t off[] = {3, 16 * 2 + 5, 16 * 4, 16 * 6 + 15, 16 * 9 + 1, 16 * 11 + 8};
    static const uint32_t firsts[] = {20, 0xfffff0, 0xffffff - 16 * 3 - 2};
    for (unsigned f = 0; f < SR_ARRAY_SIZE(firsts); f++) {
        set_ctx("holes", firsts[f]);
        struct drops d = {firsts[f], off, (int)SR_ARRAY_SIZE(off)};
        struct scn s;
        sack_init(&s, (struct scn_cfg){.seed = f + 1,
                                       .retry_cnt = 7,
                                       .psn = {firsts[f], 100},
                                       .filter = drop_listed,
                                       .filter_arg = &d});
        writes(&s, 16, 16 * KIB);
        struct sr_engine_stats st;
        stats1(&s, &st);
        SR_CHECK_EQ(s.dropped[0], SR_ARRAY_SIZE(off));
        /* most pieces behind the holes were placed, not copied: the
         * copies are the LASTs and the MIDDLEs of the message whose FIRST
         * was lost (16 * 4), at most 15 of them, plus LASTs */
        SR_CHECK(st.ooo_placed > 2 * st.ooo_stored);
        SR_CHECK(st.ooo_stored >= 15); /* message 4's MIDDLEs and LAST were kept as copies */
        /* the store held headers, not the payload of what it placed */
        printf("holes: %" PRIu64 " placed, %" PRIu64 " copied, store peak %" PRIu64 " bytes\n",
               st.ooo_placed, st.ooo_stored, st.ooo_peak_bytes);
        SR_CHECK(st.ooo_peak_bytes < st.ooo_placed * (uint64_t)KIB / 2);
        SR_CHECK_EQ(st.ooo_drained, st.ooo_placed + st.ooo_stored);
        scn_fini(&s);
    }
}

/* WRITE WITH IMMEDIATE: middles placed, each message's receive consumed
 * and completed in order, with its immediate and length. */
static void test_write_imm(void)
{
    for (uint64_t seed = 1; seed <= 3; seed++) {
        set_ctx("write_imm", seed);
        static const uint32_t off[] = {2, 8 + 4, 8 * 3 + 1, 8 * 5 + 6, 8 * 7};
        struct drops d = {500, off, (int)SR_ARRAY_SIZE(off)};
        struct scn s;
        sack_init(&s, (struct scn_cfg){.seed = seed,
                                       .loss = 0.02 * (double)(seed - 1),
                                       .retry_cnt = 7,
                                       .psn = {500, 9},
                                       .filter = drop_listed,
                                       .filter_arg = &d});
        enum { N = 12, LEN = 8 * KIB };
        for (int i = 0; i < N; i++)
            SR_CHECK_EQ(scn_post_recv(&s, 1000 + (uint64_t)i, 0, 0), 0);
        for (int i = 0; i < N; i++) {
            struct sr_send_wr wr = {.wr_id = (uint64_t)i,
                                    .sg_list = scn_sge(&s, 0, (uint64_t)i * LEN, LEN),
                                    .num_sge = 1,
                                    .opcode = SR_WR_RDMA_WRITE_WITH_IMM,
                                    .send_flags = SR_SEND_SIGNALED,
                                    .imm = 0xabc000 + (uint32_t)i,
                                    .remote_addr = (uintptr_t)s.mem[1] + (uint64_t)i * LEN,
                                    .rkey = sr_mr_rkey(s.mr[1])};
            SR_CHECK_EQ(sr_qp_post_send(s.qp[0], &wr, s.now), 0);
        }
        struct scn_wait w = {0}, r = {0};
        scn_collect(&s, &w, s.scq[0], N, MAX_NS);
        check_wcs(&w, N, SR_WC_SUCCESS);
        scn_collect(&s, &r, s.rcq[1], N, MAX_NS);
        SR_CHECK_EQ(r.got, N);
        for (int i = 0; i < r.got; i++) {
            SR_CHECK_EQ(r.wc[i].wr_id, 1000 + (uint64_t)i);
            SR_CHECK_EQ(r.wc[i].status, SR_WC_SUCCESS);
            SR_CHECK_EQ(r.wc[i].opcode, SR_WC_RECV_RDMA_WITH_IMM);
            SR_CHECK_EQ(r.wc[i].imm, 0xabc000 + (uint32_t)i);
            SR_CHECK_EQ(r.wc[i].byte_len, LEN);
        }
        SR_CHECK_MEM(s.mem[1], s.mem[0], (size_t)N * LEN);
        struct sr_engine_stats st;
        stats1(&s, &st);
        SR_CHECK(st.ooo_placed > 0);
        scn_fini(&s);
    }
}

/* A WRITE past a hole that fails the R_Key check (out of its region's
 * bounds, or a wrong key) is not placed: it gets the Remote Access Error
 * NAK in sequence, after the WRITE before it completed, and nothing is
 * written outside what its key grants. */
static void test_bad_rkey(void)
{
    for (int kind = 0; kind < 4; kind++) {
        set_ctx(kind & 1 ? "bad rkey: wrong key" : "bad rkey: out of bounds", (uint64_t)kind);
        static const uint32_t off[] = {1};
        struct drops d = {7, off, 1};
        struct scn s;
        sack_init(&s, (struct scn_cfg){.seed = 1,
                                       .retry_cnt = 7,
                                       .psn = {7, 3},
                                       .trains = kind >= 2,
                                       .filter = drop_listed,
                                       .filter_arg = &d});
        /* a small region inside node 1's buffer, at 1 MiB, 4 KiB long */
        struct sr_mr *small;
        SR_CHECK_EQ(sr_mr_reg(s.pd[1], s.mem[1] + (1 << 20), 4 * KIB,
                              (uintptr_t)s.mem[1] + (1 << 20),
                              SR_ACCESS_LOCAL_WRITE | SR_ACCESS_REMOTE_WRITE, &small),
                    0);
        uint8_t *orig = scn_snapshot(&s, 1);
        uint32_t rkey = kind & 1 ? sr_mr_rkey(small) ^ 0x5a00 : sr_mr_rkey(small);
        uint32_t len = kind & 1 ? 4 * KIB : 8 * KIB; /* out of bounds: 8 KiB into 4 */
        struct sr_send_wr wr[3] = {
            {.wr_id = 0,
             .sg_list = scn_sge(&s, 0, 0, 16 * KIB),
             .num_sge = 1,
             .opcode = SR_WR_RDMA_WRITE,
             .send_flags = SR_SEND_SIGNALED,
             .remote_addr = (uintptr_t)s.mem[1],
             .rkey = sr_mr_rkey(s.mr[1])},
            {.wr_id = 1,
             .sg_list = scn_sge(&s, 0, 64 * KIB, len),
             .num_sge = 1,
             .opcode = SR_WR_RDMA_WRITE,
             .send_flags = SR_SEND_SIGNALED,
             .remote_addr = (uintptr_t)s.mem[1] + (1 << 20),
             .rkey = rkey},
            {.wr_id = 2,
             .sg_list = scn_sge(&s, 0, 128 * KIB, 16 * KIB),
             .num_sge = 1,
             .opcode = SR_WR_RDMA_WRITE,
             .send_flags = SR_SEND_SIGNALED,
             .remote_addr = (uintptr_t)s.mem[1] + 256 * KIB,
             .rkey = sr_mr_rkey(s.mr[1])},
        };
        for (int i = 0; i < 3; i++)
            SR_CHECK_EQ(sr_qp_post_send(s.qp[0], &wr[i], s.now), 0);
        struct scn_wait w = {0};
        scn_collect(&s, &w, s.scq[0], 3, MAX_NS);
        SR_CHECK_EQ(w.got, 3);
        SR_CHECK_EQ(w.wc[0].status, SR_WC_SUCCESS);
        SR_CHECK_EQ(w.wc[1].status, SR_WC_REM_ACCESS_ERR);
        SR_CHECK_EQ(w.wc[2].status, SR_WC_WR_FLUSH_ERR);
        SR_CHECK_MEM(s.mem[1], s.mem[0], 16 * KIB);
        /* The refused WRITE wrote nothing past its region, nor inside it
         * when refused at its first packet; split into WRITE ONLY pieces
         * (trains), each with its own RETH, the piece inside the region
         * is a valid WRITE of its own (docs/WIRE.md). */
        size_t keep = kind == 2 ? 4 * KIB : 0;
        SR_CHECK_MEM(s.mem[1] + (1 << 20) + keep, orig + (1 << 20) + keep, 16 * KIB - keep);
        struct sr_engine_stats st;
        stats1(&s, &st);
        SR_CHECK_EQ(st.err_naks_sent, 1);
        SR_CHECK(st.ooo_placed > 0); /* the first WRITE's pieces behind the hole */
        free(orig);
        scn_fini(&s);
    }
}

/* The target region is deregistered while a hole is open, after the
 * first piece behind the hole was placed: later pieces are not placed
 * (their R_Key check fails; kept as copies), the WRITE fails with Remote
 * Access Error in sequence, and no byte after the placed piece is
 * written. */
static bool placed_one(void *arg)
{
    struct scn *s = arg;
    struct sr_engine_stats st;
    scn_stats(s, 1, &st);
    return st.ooo_placed >= 1;
}

static void test_dereg_mid_hole(void)
{
    set_ctx("dereg mid hole", 1);
    static const uint32_t off[] = {3};
    struct drops d = {40, off, 1};
    struct scn s;
    sack_init(
        &s,
        (struct scn_cfg){
            .seed = 1, .retry_cnt = 7, .psn = {40, 2}, .filter = drop_listed, .filter_arg = &d});
    struct sr_mr *mr;
    SR_CHECK_EQ(sr_mr_reg(s.pd[1], s.mem[1] + (1 << 20), 64 * KIB, (uintptr_t)s.mem[1] + (1 << 20),
                          SR_ACCESS_LOCAL_WRITE | SR_ACCESS_REMOTE_WRITE, &mr),
                0);
    uint8_t *orig = scn_snapshot(&s, 1);
    struct sr_send_wr wr = {.wr_id = 0,
                            .sg_list = scn_sge(&s, 0, 0, 16 * KIB),
                            .num_sge = 1,
                            .opcode = SR_WR_RDMA_WRITE,
                            .send_flags = SR_SEND_SIGNALED,
                            .remote_addr = (uintptr_t)s.mem[1] + (1 << 20),
                            .rkey = sr_mr_rkey(mr)};
    SR_CHECK_EQ(sr_qp_post_send(s.qp[0], &wr, s.now), 0);
    SR_CHECK(scn_run(&s, placed_one, &s, MAX_NS));
    SR_CHECK_EQ(sr_mr_dereg(mr), 0);
    struct scn_wait w = {0};
    scn_collect(&s, &w, s.scq[0], 1, MAX_NS);
    SR_CHECK_EQ(w.got, 1);
    SR_CHECK_EQ(w.wc[0].status, SR_WC_REM_ACCESS_ERR);
    /* PSNs 40..42 in order and 44 placed while the region lived */
    SR_CHECK_MEM(s.mem[1] + (1 << 20), s.mem[0], 3 * KIB);
    SR_CHECK_MEM(s.mem[1] + (1 << 20) + 3 * KIB, orig + (1 << 20) + 3 * KIB, KIB);
    SR_CHECK_MEM(s.mem[1] + (1 << 20) + 4 * KIB, s.mem[0] + 4 * KIB, KIB);
    SR_CHECK_MEM(s.mem[1] + (1 << 20) + 5 * KIB, orig + (1 << 20) + 5 * KIB, 59 * KIB);
    struct sr_engine_stats st;
    stats1(&s, &st);
    SR_CHECK_EQ(st.ooo_placed, 1);
    SR_CHECK(st.ooo_stored > 0);
    SR_CHECK_EQ(st.err_naks_sent, 1);
    free(orig);
    scn_fini(&s);
}

/* One region written again and again (each time other data), under loss,
 * reordering and duplicates up to 400 us late: pieces of later WRITEs
 * placed ahead of a hole in an earlier one stay, and late copies of
 * placed pieces are not written again: the region ends with the last
 * WRITE's data. */
static void test_rewrites(void)
{
    for (uint64_t seed = 1; seed <= 8; seed++) {
        set_ctx("rewrites", seed);
        struct scn s;
        sack_init(&s, (struct scn_cfg){.seed = seed,
                                       .loss = 0.03,
                                       .reorder = 0.03,
                                       .dup = 0.2,
                                       .dup_max_ns = 400000,
                                       .retry_cnt = 7,
                                       .psn = {0xffffff - 40, 1},
                                       .trains = seed & 1});
        enum { N = 24, LEN = 8 * KIB };
        uint8_t *orig = scn_snapshot(&s, 1);
        for (int i = 0; i < N; i++)
            SR_CHECK_EQ(
                scn_post(&s, SR_WR_RDMA_WRITE, (uint64_t)i, (uint64_t)i * LEN, 0, LEN, 0, 0), 0);
        struct scn_wait w = {0};
        scn_collect(&s, &w, s.scq[0], N, MAX_NS);
        check_wcs(&w, N, SR_WC_SUCCESS);
        scn_run(&s, NULL, NULL, 50ull * MS); /* every late copy arrives */
        SR_CHECK_MEM(s.mem[1], s.mem[0] + (size_t)(N - 1) * LEN, LEN);
        SR_CHECK_MEM(s.mem[1] + LEN, orig + LEN, SCN_MEM - LEN);
        struct sr_engine_stats st;
        stats1(&s, &st);
        SR_CHECK(st.ooo_placed > 0);
        free(orig);
        scn_fini(&s);
    }
}

/* SACKs per hole, on a long path (50 us each way: a hole keeps a round
 * trip of requests, about 80 at MTU 4096): the store SACKs when it opens,
 * when DupThresh requests follow the hole, for AckReq and every 4th
 * request kept, never for each. */
static void test_sacks_per_hole(void)
{
    for (int trains = 0; trains < 2; trains++) {
        set_ctx("sacks per hole", (uint64_t)trains);
        static uint32_t off[12];
        for (int i = 0; i < 12; i++)
            off[i] = 37 + 80 * (uint32_t)i;
        struct drops d = {1000, off, 12};
        struct scn s;
        sack_init(&s, (struct scn_cfg){.seed = 1,
                                       .retry_cnt = 7,
                                       .mtu = 4096,
                                       .delay_ns = 50000,
                                       .psn = {1000, 1},
                                       .trains = trains,
                                       .filter = drop_listed,
                                       .filter_arg = &d});
        writes(&s, 64, 64 * KIB); /* 1024 packets */
        struct sr_engine_stats st;
        stats1(&s, &st);
        SR_CHECK_EQ(s.dropped[0], 12);
        uint64_t kept = st.ooo_stored + st.ooo_placed;
        printf("sacks per hole (trains %d): %" PRIu64 " SACKs, %" PRIu64 " kept (%" PRIu64
               " placed), 12 holes\n",
               trains, st.sacks_sent, kept, st.ooo_placed);
        SR_CHECK(kept >= 12 * 20); /* the holes did keep a round trip each */
        /* four per hole (opened, DupThresh, a new hole, the drain's),
         * and one per 4 kept for the rest: never one per request kept */
        SR_CHECK(st.sacks_sent <= 12 * 4 + kept / 4);
        scn_fini(&s);
    }
}

/* RNR in the middle of kept SENDs: 64 SENDs of three packets, receives
 * for the first 10 only, one packet of the third SEND lost. Its resend
 * lets the drain run SENDs 2 to 9 from the store, and SEND 10 finds no
 * receive WQE: an RNR NAK (IBA 9.7.5.2.8) while the responder still holds
 * SENDs 11 to 63. The requester resends only what the responder does not
 * hold, on each RNR retry, not the window behind the NAKed PSN; once the
 * rest of the receives are posted every SEND completes, in order, the
 * bytes intact. */
static void test_rnr_mid_kept_sends(void)
{
    enum { N = 64, K = 10, L = 3000, RBASE = 1 << 20 };
    set_ctx("rnr mid kept sends", 1);
    static const uint32_t off[] = {7}; /* the third SEND's MIDDLE */
    struct drops d = {1000, off, 1};
    struct scn s;
    sack_init(&s, (struct scn_cfg){.seed = 1,
                                   .retry_cnt = 7,
                                   .rnr_retry = 7,
                                   .min_rnr_timer = 10, /* 0.24 ms */
                                   .psn = {1000, 1},
                                   .filter = drop_listed,
                                   .filter_arg = &d});
    for (int i = 0; i < K; i++)
        SR_CHECK_EQ(scn_post_recv(&s, (uint64_t)i, RBASE + (uint64_t)i * 4 * KIB, L), 0);
    for (int i = 0; i < N; i++)
        SR_CHECK_EQ(scn_post(&s, SR_WR_SEND, (uint64_t)i, (uint64_t)i * 4 * KIB, 0, L, 0, 0), 0);
    struct scn_wait w = {0}, rw = {0};
    scn_collect(&s, &w, s.scq[0], K, MAX_NS);
    SR_CHECK_EQ(w.got, K);
    scn_run(&s, NULL, NULL, 2ull * MS);
    for (int i = K; i < N; i++)
        SR_CHECK_EQ(scn_post_recv(&s, (uint64_t)i, RBASE + (uint64_t)i * 4 * KIB, L), 0);
    scn_collect(&s, &w, s.scq[0], N - K, MAX_NS);
    check_wcs(&w, N, SR_WC_SUCCESS);
    scn_collect(&s, &rw, s.rcq[1], N, MAX_NS);
    SR_CHECK_EQ(rw.got, N);
    for (int k = 0; k < rw.got; k++) {
        SR_CHECK_EQ(rw.wc[k].wr_id, (uint64_t)k);
        SR_CHECK_EQ(rw.wc[k].status, SR_WC_SUCCESS);
        SR_CHECK_EQ(rw.wc[k].byte_len, L);
        SR_CHECK_MEM(s.mem[1] + RBASE + (size_t)k * 4 * KIB, s.mem[0] + (size_t)k * 4 * KIB, L);
    }
    struct sr_engine_stats st0, st1;
    scn_stats(&s, 0, &st0);
    stats1(&s, &st1);
    printf("rnr mid kept sends: %" PRIu64 " RNR NAKs, %" PRIu64 " resent, %" PRIu64
           " duplicates of kept requests\n",
           st0.rnr_naks_rcvd, st0.retransmits, st1.ooo_dup);
    SR_CHECK(st0.rnr_naks_rcvd > 0);
    SR_CHECK(st1.ooo_placed + st1.ooo_stored > 100); /* SENDs 11 to 63 were kept */
    /* the lost MIDDLE, and one request per RNR retry (a go-back-N would
     * resend the 162 packets after the NAKed one each time) */
    SR_CHECK(st0.retransmits <= 1 + 2 * st0.rnr_naks_rcvd);
    SR_CHECK(st1.ooo_dup <= 2);
    scn_fini(&s);
}

/* The store's slots come from a per-device pool (ooo.c). Two bursts of
 * 64 WRITEs of 64 KiB, 12 holes in each (a burst's resends queue behind
 * the rest of it, so a burst's kept requests are all held at once): the
 * second burst takes no slot from the allocator, reusing the first's.
 * And a budget of two payload slots (cfg.ooo_bytes) bounds what is kept,
 * the rest falling back to sequence NAKs, the data intact. */
static void test_pool(void)
{
    static uint32_t off[24];
    for (int i = 0; i < 24; i++)
        off[i] = 37 + 80 * (uint32_t)(i % 12) + 1024 * (uint32_t)(i / 12);
    for (int budget = 0; budget < 2; budget++) {
        set_ctx("pool", (uint64_t)budget);
        struct drops d = {1000, off, 24};
        uint64_t cap = budget ? 2 * (4 * KIB + 512) : 0;
        struct scn s;
        sack_init(&s, (struct scn_cfg){.seed = 1,
                                       .retry_cnt = 7,
                                       .mtu = 4096,
                                       .delay_ns = 50000,
                                       .psn = {1000, 1},
                                       .ooo_bytes = cap,
                                       .filter = drop_listed,
                                       .filter_arg = &d});
        struct sr_engine_stats st1, st;
        writes(&s, 64, 64 * KIB); /* 1024 packets, data and completions checked */
        stats1(&s, &st1);
        writes(&s, 64, 64 * KIB);
        stats1(&s, &st);
        uint64_t kept1 = st1.ooo_stored + st1.ooo_placed, kept = st.ooo_stored + st.ooo_placed;
        printf("pool (budget %" PRIu64 "): kept %" PRIu64 " then %" PRIu64 " (%" PRIu64
               " copies), slots allocated %" PRIu64 " then %" PRIu64 ", peak %" PRIu64
               " bytes, %" PRIu64 " not kept\n",
               cap, kept1, kept - kept1, st.ooo_stored, st1.ooo_slot_allocs, st.ooo_slot_allocs,
               st.ooo_peak_bytes, st.ooo_overflow);
        SR_CHECK_EQ(s.dropped[0], 24);
        SR_CHECK_EQ(st.ooo_drained, kept);
        if (!budget) {
            SR_CHECK(kept1 >= 12 * 20 && kept - kept1 >= 12 * 20);
            SR_CHECK_EQ(st.ooo_overflow, 0);
            SR_CHECK(st1.ooo_slot_allocs <= kept1);
            SR_CHECK_EQ(st.ooo_slot_allocs, st1.ooo_slot_allocs); /* reused, none new */
        } else {
            SR_CHECK(st.ooo_overflow > 0);
            SR_CHECK(st.ooo_stored > 0);
            SR_CHECK(st.ooo_peak_bytes <= cap);
        }
        scn_fini(&s);
    }
}

/* ---- SENDs placed by their RPETH (docs/WIRE.md, place.c) ---- */

enum { SP_RBASE = 1 << 20, SP_RSTRIDE = 32 * KIB, SP_RLEN = 20 * KIB, SP_WBASE = 3 << 20 };

/* Node 0's i-th message: SEND, WRITE WITH IMMEDIATE or SEND WITH
 * IMMEDIATE in turn, each taking node 1's i-th receive in order; a SEND
 * with immediate is one packet (300 bytes), the others 16 KiB. */
static enum sr_wr_opcode sp_op(int i)
{
    static const enum sr_wr_opcode ops[] = {SR_WR_SEND, SR_WR_RDMA_WRITE_WITH_IMM, SR_WR_SEND,
                                            SR_WR_SEND_WITH_IMM};
    return ops[i % 4];
}

static uint32_t sp_len(int i)
{
    return sp_op(i) == SR_WR_SEND_WITH_IMM ? 300 : 16 * KIB;
}

static void sp_post(struct scn *s, int from, int to)
{
    for (int i = from; i < to; i++)
        SR_CHECK_EQ(scn_post(s, sp_op(i), (uint64_t)i, (uint64_t)i * 16 * KIB,
                             SP_WBASE + (uint64_t)i * 16 * KIB, sp_len(i), 0, 0),
                    0);
}

/* n messages, receives posted first; every receive completion in order
 * (opcode, length, data) and every byte of node 1's buffer beside what
 * the messages own checked. The first SP_WARM go alone: a requester
 * builds its packets when it sends them, and adds RPETHs only once a
 * SACK said the responder places (docs/WIRE.md), so the rest carry them. */
enum { SP_WARM = 4 };
static void sp_run(struct scn *s, int n, enum sr_wc_status want_st, int *sent_ok)
{
    uint8_t *orig = scn_snapshot(s, 1);
    for (int i = 0; i < n; i++)
        SR_CHECK_EQ(scn_post_recv(s, (uint64_t)i, SP_RBASE + (uint64_t)i * SP_RSTRIDE, SP_RLEN), 0);
    struct scn_wait w = {0}, rw = {0};
    sp_post(s, 0, SP_WARM);
    scn_collect(s, &w, s->scq[0], SP_WARM, MAX_NS);
    sp_post(s, SP_WARM, n);
    scn_collect(s, &w, s->scq[0], n - SP_WARM, MAX_NS);
    SR_CHECK_EQ(w.got, n);
    int ok = 0;
    while (ok < w.got && w.wc[ok].status == SR_WC_SUCCESS)
        ok++;
    if (want_st == SR_WC_SUCCESS)
        check_wcs(&w, n, SR_WC_SUCCESS);
    *sent_ok = ok;
    scn_collect(s, &rw, s->rcq[1], n, MAX_NS);
    SR_CHECK_EQ(rw.got, n);
    for (int i = 0; i < rw.got && i < ok; i++) {
        SR_CHECK_EQ(rw.wc[i].wr_id, (uint64_t)i);
        SR_CHECK_EQ(rw.wc[i].status, SR_WC_SUCCESS);
        SR_CHECK_EQ(rw.wc[i].byte_len, sp_len(i));
        SR_CHECK_EQ(rw.wc[i].opcode,
                    sp_op(i) == SR_WR_RDMA_WRITE_WITH_IMM ? SR_WC_RECV_RDMA_WITH_IMM : SR_WC_RECV);
        SR_CHECK_EQ(!!(rw.wc[i].wc_flags & SR_WC_WITH_IMM), sp_op(i) != SR_WR_SEND);
        const uint8_t *src = s->mem[0] + (size_t)i * 16 * KIB;
        size_t r = SP_RBASE + (size_t)i * SP_RSTRIDE, wt = SP_WBASE + (size_t)i * 16 * KIB;
        if (sp_op(i) == SR_WR_RDMA_WRITE_WITH_IMM) {
            SR_CHECK_MEM(s->mem[1] + wt, src, sp_len(i));
            SR_CHECK_MEM(s->mem[1] + r, orig + r, SP_RSTRIDE); /* its receive holds nothing */
        } else {
            SR_CHECK_MEM(s->mem[1] + r, src, sp_len(i));
            /* nothing past the message in its buffer, nor between buffers */
            SR_CHECK_MEM(s->mem[1] + r + sp_len(i), orig + r + sp_len(i), SP_RSTRIDE - sp_len(i));
            SR_CHECK_MEM(s->mem[1] + wt, orig + wt, 16 * KIB);
        }
    }
    /* below the receive buffers and above the WRITE targets: untouched */
    SR_CHECK_MEM(s->mem[1], orig, SP_RBASE);
    size_t top = SP_WBASE + (size_t)n * 16 * KIB;
    SR_CHECK_MEM(s->mem[1] + top, orig + top, SCN_MEM - top);
    free(orig);
}

/* SENDs, SENDs with immediate and WRITEs with immediate under loss and
 * reordering: the SEND pieces behind holes are scattered into their
 * receives at once (not kept as copies), and every receive completes in
 * order with its own data. */
static void test_sends_placed(void)
{
    static const uint32_t off[] = {3}; /* a hole in the first message: a SACK */
    for (uint64_t seed = 1; seed <= 3; seed++) {
        set_ctx("sends placed", seed);
        struct drops d = {0xffffff - 200, off, 1};
        struct scn s;
        sack_init(&s, (struct scn_cfg){.seed = seed,
                                       .retry_cnt = 7,
                                       .psn = {0xffffff - 200, 7}, /* across the wrap */
                                       .filter = drop_listed,
                                       .filter_arg = &d,
                                       .loss = 0.02,
                                       .reorder = 0.05,
                                       .dup = 0.01,
                                       .dup_max_ns = 50000});
        int ok;
        sp_run(&s, 48, SR_WC_SUCCESS, &ok);
        struct sr_engine_stats st;
        stats1(&s, &st);
        printf("sends placed: %" PRIu64 " SEND pieces placed, %" PRIu64 " copied, %" PRIu64
               " WRITE pieces placed\n",
               st.ooo_send_placed, st.ooo_stored, st.ooo_placed);
        SR_CHECK(st.ooo_send_placed > 0);
        /* the copies are mostly the first messages' pieces, sent before
         * the first SACK */
        SR_CHECK(st.ooo_send_placed > 4 * st.ooo_stored);
        SR_CHECK_EQ(st.rph_bad, 0);
        scn_fini(&s);
    }
}

/* A responder that does not say it places SENDs (SR_SACK_F_RPH cleared
 * on the wire) never receives an RPETH: every SEND keeps its standard
 * layout, and the data arrives intact, the kept SENDs copied. */
static int sp_rph_seen;
static void strip_rph(struct scn *s, const struct scn_pkt_info *pi, struct scn_verdict *v)
{
    (void)v;
    if (pi->from == 1 && pi->opcode == SR_OP_SACK)
        pi->data[SR_BTH_LEN + SR_AETH_LEN] &= (uint8_t)~SR_SACK_F_RPH;
    if (pi->from == 0 && (pi->data[8] & SR_BTH_RESV7_RPH))
        sp_rph_seen++;
    /* a few holes, so that SACKs flow */
    if (pi->from == 0 && pi->nth == 0 && pi->psn % 37 == 5)
        v->drop = true;
    (void)s;
}

static void test_sends_rph_not_agreed(void)
{
    set_ctx("rph not agreed", 1);
    sp_rph_seen = 0;
    struct scn s;
    sack_init(&s,
              (struct scn_cfg){.seed = 1, .retry_cnt = 7, .psn = {100, 7}, .filter = strip_rph});
    int ok;
    sp_run(&s, 24, SR_WC_SUCCESS, &ok);
    struct sr_engine_stats st;
    stats1(&s, &st);
    SR_CHECK(st.sacks_sent > 0);
    SR_CHECK_EQ(sp_rph_seen, 0);
    SR_CHECK_EQ(st.ooo_send_placed, 0);
    SR_CHECK(st.ooo_stored > 0);
    scn_fini(&s);
}

/* An RPETH that lies about its message (a forged or corrupted one that
 * passed the ICRC): the SEND is refused with NAK Invalid Request when it
 * comes in order (IBA 9.7.5.2.2), whether or not it was placed into the
 * wrong receive first; the requester's WQE fails with
 * IBV_WC_REM_INV_REQ_ERR, the receives before it hold their data, and no
 * byte outside the receives and targets changed. */
static int sp_forged;
static void forge_rph(struct scn *s, const struct scn_pkt_info *pi, struct scn_verdict *v)
{
    (void)s;
    if (pi->from != 0 || pi->nth != 0)
        return;
    /* a hole in the first message (a SACK tells node 0 to send RPETHs),
     * and one in message 8 (PSNs 198..213), so that its MIDDLE at 205
     * arrives out of order and claims the next message's receive */
    if (pi->psn == 103 || pi->psn == 200)
        v->drop = true;
    if (pi->psn == 205 && (pi->data[8] & SR_BTH_RESV7_RPH) && pi->opcode == SR_OP_SEND_MIDDLE) {
        uint8_t *msg = pi->data + SR_BTH_LEN; /* the RPETH's message number */
        sr_put_be32(msg, sr_get_be32(msg) + 1);
        sp_forged++;
    }
}

static void test_sends_rph_forged(void)
{
    set_ctx("rph forged", 1);
    sp_forged = 0;
    struct scn s;
    sack_init(&s,
              (struct scn_cfg){.seed = 1, .retry_cnt = 7, .psn = {100, 7}, .filter = forge_rph});
    int ok;
    sp_run(&s, 16, SR_WC_REM_INV_REQ_ERR, &ok);
    struct sr_engine_stats st;
    stats1(&s, &st);
    SR_CHECK_EQ(sp_forged, 1);
    SR_CHECK_EQ(st.rph_bad, 1);
    SR_CHECK_EQ(ok, 8); /* messages 0..7 completed, 8 was refused */
    scn_fini(&s);
}

int main(void)
{
    SR_RUN(test_holes);
    SR_RUN(test_write_imm);
    SR_RUN(test_bad_rkey);
    SR_RUN(test_dereg_mid_hole);
    SR_RUN(test_rewrites);
    SR_RUN(test_sacks_per_hole);
    SR_RUN(test_rnr_mid_kept_sends);
    SR_RUN(test_pool);
    SR_RUN(test_sends_placed);
    SR_RUN(test_sends_rph_not_agreed);
    SR_RUN(test_sends_rph_forged);
    return SR_TEST_RESULT();
}

/* engine_mr_test.c: memory regions and completion queues of the engine:
 * MR key slots (next fit, tags, full tables), implicit on-demand MRs and
 * memory the engine may not touch, MR registration rules, CQ overflow and
 * a full send queue, completion timestamps; on engine_fixture.h. */
#include "engine_fixture.h"

/* What the MRs of test_mr_slots cover: they are never accessed. */
static uint8_t slot_buf[64];

/* Registers a 64-byte MR in pd and checks it took slot (key >> 8). */
static void reg_at(struct sr_pd *pd, struct sr_mr **m, uint32_t slot)
{
    SR_CHECK_EQ(sr_mr_reg(pd, slot_buf, 64, 0, 0, m), 0);
    if (*m)
        SR_CHECK_EQ(sr_mr_lkey(*m) >> 8, slot);
}

static int tx_none(void *ctx, const struct sr_tx_pkt *pkt)
{
    (void)ctx;
    (void)pkt;
    SR_CHECK(!"no packet expected");
    return 0;
}

/* MR slots are taken next fit: the search starts after the last slot
 * taken and wraps past the end, so a freed slot (a key the application
 * may still hold) comes back when the search reaches it, not at the next
 * registration; slot 0 (key 0) is never used, and a full table says so.
 * Keys are the slot << 8 | a tag. */
static void test_mr_slots(void)
{
    enum { MAX = 8 };
    struct sr_engine_cfg cfg = {.ops = {.tx = tx_none}, .max_mr = MAX};
    h_gid(cfg.gid, 0);
    struct sr_engine *e = NULL;
    struct sr_pd *pd = NULL;
    SR_CHECK_EQ(sr_engine_create(&cfg, &e), 0);
    if (!e)
        return;
    SR_CHECK_EQ(sr_pd_alloc(e, &pd), 0);
    struct sr_mr *m[MAX] = {0}, *extra = NULL;
    for (int i = 1; i < MAX; i++)
        reg_at(pd, &m[i], (uint32_t)i);
    SR_CHECK_EQ(sr_mr_reg(pd, slot_buf, 64, 0, 0, &extra), SR_ERR_LIMIT);
    /* free 5, then 3: the search, back at 1 after the last slot, finds 3,
     * then 5 */
    uint32_t stale5 = sr_mr_lkey(m[5]);
    sr_mr_dereg(m[5]);
    sr_mr_dereg(m[3]);
    reg_at(pd, &m[3], 3);
    reg_at(pd, &m[5], 5);
    SR_CHECK(sr_mr_lkey(m[5]) != stale5); /* a new tag */
    SR_CHECK_EQ(sr_mr_reg(pd, slot_buf, 64, 0, 0, &extra), SR_ERR_LIMIT);
    /* the search goes on from 6: with 2 and 6 free it takes 6, then 2
     * (lowest first would take 2 at once) */
    sr_mr_dereg(m[2]);
    sr_mr_dereg(m[6]);
    reg_at(pd, &m[6], 6);
    reg_at(pd, &m[2], 2);
    for (int i = 1; i < MAX; i++)
        sr_mr_dereg(m[i]);
    SR_CHECK_EQ(sr_pd_free(pd), 0);
    sr_engine_destroy(e);
    /* the smallest tables: 1 holds none (slot 0 only), 2 holds slot 1 */
    for (uint32_t max = 1; max <= 2; max++) {
        cfg.max_mr = max;
        e = NULL;
        SR_CHECK_EQ(sr_engine_create(&cfg, &e), 0);
        if (!e)
            continue;
        SR_CHECK_EQ(sr_pd_alloc(e, &pd), 0);
        struct sr_mr *one = NULL;
        for (int round = 0; round < 3; round++) {
            SR_CHECK_EQ(sr_mr_reg(pd, slot_buf, 64, 0, 0, &one), max == 1 ? SR_ERR_LIMIT : 0);
            if (max == 2) {
                SR_CHECK_EQ(sr_mr_lkey(one) >> 8, 1u);
                SR_CHECK_EQ(sr_mr_reg(pd, slot_buf, 64, 0, 0, &extra), SR_ERR_LIMIT);
                sr_mr_dereg(one);
            }
        }
        SR_CHECK_EQ(sr_pd_free(pd), 0);
        sr_engine_destroy(e);
    }
}

/* On-demand MRs: an implicit one (address 0, the whole address space)
 * reaches any memory the engine's mem_ok allows; memory it refuses (not
 * mapped) makes a remote access error, not a fault, and is not touched. */
static const uint8_t *odp_hole; /* a 4 KiB range mem_ok calls unmapped */
static bool odp_mem_ok(const void *addr, uint64_t len, bool write)
{
    (void)write;
    const uint8_t *p = addr;
    return p + len <= odp_hole || p >= odp_hole + 4096;
}

static void test_odp_implicit(void)
{
    struct eng_fix f;
    struct h_qp_opts o = {
        .type = SR_QPT_RC, .mtu = 1024, .retry_cnt = 3, .rnr_retry = 3, .access = 15};
    fix_open(&f, &(struct fix_opts){.wire = {.mem_ok = odp_mem_ok}, .qp = o});
    struct sr_mr *odp;
    /* only an on-demand MR may start at address 0 */
    SR_CHECK_EQ(sr_mr_reg(f.pr.pd[1], NULL, SIZE_MAX, 0, 15, &odp), SR_ERR_INVAL);
    SR_CHECK_EQ(sr_mr_reg(f.pr.pd[1], NULL, SIZE_MAX, 0, 15 | SR_ACCESS_ON_DEMAND, &odp), 0);
    odp_hole = f.mem[1] + 65536;
    pattern(f.mem[0], 8192, 3);
    struct sr_sge sg = {(uintptr_t)f.mem[0], 3000, sr_mr_lkey(f.mr[0])};
    struct sr_send_wr w = signaled_wr(&f, 1, &sg, SR_WR_RDMA_WRITE, (uintptr_t)f.mem[1] + 100);
    w.rkey = sr_mr_rkey(odp);
    SR_CHECK_EQ(sr_qp_post_send(f.pr.qp[0], &w, f.h.now), 0);
    struct sr_wc wc[2];
    SR_CHECK_EQ(wait_wc(&f.h, f.pr.scq[0], 1, wc, 1000000000ull), 1);
    SR_CHECK_EQ(wc[0].status, SR_WC_SUCCESS);
    SR_CHECK_MEM(f.mem[1] + 100, f.mem[0], 3000);
    /* a READ through the same key reads it back */
    struct sr_sge back = {(uintptr_t)f.mem[0] + 4096, 3000, sr_mr_lkey(f.mr[0])};
    w = signaled_wr(&f, 2, &back, SR_WR_RDMA_READ, (uintptr_t)f.mem[1] + 100);
    w.rkey = sr_mr_rkey(odp);
    SR_CHECK_EQ(sr_qp_post_send(f.pr.qp[0], &w, f.h.now), 0);
    SR_CHECK_EQ(wait_wc(&f.h, f.pr.scq[0], 1, wc, 1000000000ull), 1);
    SR_CHECK_EQ(wc[0].status, SR_WC_SUCCESS);
    SR_CHECK_MEM(f.mem[0] + 4096, f.mem[0], 3000);
    /* a WRITE that ends in the hole */
    memset(f.mem[1] + 65536 - 4096, 0, 8192);
    w = signaled_wr(&f, 3, &sg, SR_WR_RDMA_WRITE, (uintptr_t)odp_hole - 1000);
    w.rkey = sr_mr_rkey(odp);
    SR_CHECK_EQ(sr_qp_post_send(f.pr.qp[0], &w, f.h.now), 0);
    SR_CHECK_EQ(wait_wc(&f.h, f.pr.scq[0], 1, wc, 1000000000ull), 1);
    SR_CHECK_EQ(wc[0].status, SR_WC_REM_ACCESS_ERR);
    static const uint8_t zero[8192];
    SR_CHECK_MEM(f.mem[1] + 65536 - 4096, zero, sizeof(zero));
    sr_mr_dereg(odp);
    fix_close(&f);
}

static void test_cq_overflow_and_limits(void)
{
    sr_test_ctx = "cq overflow, queue full";
    struct eng_fix f;
    struct h_qp_opts o = {.type = SR_QPT_RC, .retry_cnt = 7, .access = 15, .cqe = 2, .max_wr = 4};
    fix_open(&f, &(struct fix_opts){.qp = o});
    struct sr_sge sg = {(uintptr_t)f.mem[0], 8, sr_mr_lkey(f.mr[0])};
    struct sr_send_wr wr = {.sg_list = &sg,
                            .num_sge = 1,
                            .opcode = SR_WR_RDMA_WRITE,
                            .send_flags = SR_SEND_SIGNALED,
                            .remote_addr = (uintptr_t)f.mem[1],
                            .rkey = sr_mr_rkey(f.mr[1])};
    for (int i = 0; i < 4; i++)
        SR_CHECK_EQ(sr_qp_post_send(f.pr.qp[0], &wr, f.h.now), 0);
    SR_CHECK_EQ(sr_qp_post_send(f.pr.qp[0], &wr, f.h.now), SR_ERR_NOMEM); /* send queue full */
    h_run(&f.h, NULL, NULL, 1000000ull);
    SR_CHECK_EQ(f.h.async_events[SR_EVENT_CQ_ERR], 1);
    struct sr_wc wc[4];
    SR_CHECK_EQ(sr_cq_poll(f.pr.scq[0], 4, wc), 2);
    /* the zero-key MR never validates, nor does a stale key */
    uint32_t stale = sr_mr_lkey(f.mr[1]);
    sr_mr_dereg(f.mr[1]);
    f.mr[1] = NULL;
    struct sr_mr *again;
    SR_CHECK_EQ(sr_mr_reg(f.pr.pd[1], f.mem[1], 64, (uintptr_t)f.mem[1], 15, &again), 0);
    SR_CHECK(sr_mr_lkey(again) != stale);
    SR_CHECK_EQ(sr_mr_reg(f.pr.pd[1], f.mem[1], 64, 0, SR_ACCESS_REMOTE_WRITE, &again),
                SR_ERR_INVAL); /* remote write needs local write */
    fix_close(&f);
}

/* Completions carry the time the engine generated them: the now_ns of the
 * call that did (ibv_cq_ex timestamps are this). */
static void test_wc_timestamps(void)
{
    sr_test_ctx = "completion timestamps";
    struct eng_fix f;
    struct h_qp_opts o = {.type = SR_QPT_RC, .access = 15};
    fix_open(&f, &(struct fix_opts){.qp = o});
    h_run(&f.h, NULL, NULL, 123457); /* a start time that is not 0 */
    uint64_t t0 = f.h.now;
    struct sr_sge rsg = {(uintptr_t)f.mem[1], 100, sr_mr_lkey(f.mr[1])};
    struct sr_recv_wr rwr = {.wr_id = 7, .sg_list = &rsg, .num_sge = 1};
    SR_CHECK_EQ(sr_qp_post_recv(f.pr.qp[1], &rwr), 0);
    struct sr_sge sg = {(uintptr_t)f.mem[0], 100, sr_mr_lkey(f.mr[0])};
    struct sr_send_wr wr = signaled_wr(&f, 1, &sg, SR_WR_SEND, 0);
    SR_CHECK_EQ(sr_qp_post_send(f.pr.qp[0], &wr, f.h.now), 0);
    struct sr_wc wc[2];
    SR_CHECK_EQ(wait_wc(&f.h, f.pr.scq[0], 1, wc, 1000000), 1);
    SR_CHECK_EQ(wait_wc(&f.h, f.pr.rcq[1], 1, wc + 1, 1000000), 1);
    /* the SEND arrives one wire delay after it was posted, its ACK one later */
    SR_CHECK_EQ(wc[1].ts_ns, t0 + H_DELAY_NS);
    SR_CHECK_EQ(wc[0].ts_ns, t0 + 2 * H_DELAY_NS);
    /* a completion made by a timer has the timer's time */
    f.h.filter = f_all;
    h_run(&f.h, NULL, NULL, 1000);
    uint64_t t1 = f.h.now;
    SR_CHECK_EQ(sr_qp_post_send(f.pr.qp[0], &wr, f.h.now), 0);
    SR_CHECK_EQ(wait_wc(&f.h, f.pr.scq[0], 1, wc, 100000000000ull), 1);
    SR_CHECK_EQ(wc[0].status, SR_WC_RETRY_EXC_ERR);
    SR_CHECK(wc[0].ts_ns > t1 && wc[0].ts_ns <= f.h.now);
    fix_close(&f);
}

int main(void)
{
    SR_RUN(test_mr_slots);
    SR_RUN(test_odp_implicit);
    SR_RUN(test_cq_overflow_and_limits);
    SR_RUN(test_wc_timestamps);
    return SR_TEST_RESULT();
}

/* engine_comp_test.c: the completer and the error paths of the engine:
 * a failing RC work request of every protection and length class (the
 * requester's status, the responder's state, the flushed rest, memory
 * untouched), RNR NAKs recovered and exhausted, transport retries
 * exhausted against a dead peer; on engine_fixture.h. */
#include "engine_fixture.h"

/* Post n RC WQEs where the second fails in the given way; check the
 * requester and responder completions. */
struct err_case {
    const char *name;
    enum sr_wr_opcode op;
    int kind;
    enum sr_wc_status req_status;
    enum sr_qp_state resp_state;
};
enum {
    K_BAD_RKEY,
    K_OOB,
    K_NO_ACCESS,
    K_UNALIGNED,
    K_RECV_SMALL,
    K_BAD_LKEY,
    K_QP_ACCESS,
    K_RECV_BAD_LKEY,
    K_OTHER_PD,
    K_READ_NO_LOCAL_WRITE,
    K_QP_NO_WRITE,
};

static void test_errors(void)
{
    static const struct err_case cases[] = {
        {"write bad rkey", SR_WR_RDMA_WRITE, K_BAD_RKEY, SR_WC_REM_ACCESS_ERR, SR_QPS_ERR},
        {"read out of bounds", SR_WR_RDMA_READ, K_OOB, SR_WC_REM_ACCESS_ERR, SR_QPS_ERR},
        {"write region without remote write", SR_WR_RDMA_WRITE, K_NO_ACCESS, SR_WC_REM_ACCESS_ERR,
         SR_QPS_ERR},
        {"atomic unaligned", SR_WR_ATOMIC_FETCH_AND_ADD, K_UNALIGNED, SR_WC_REM_INV_REQ_ERR,
         SR_QPS_ERR},
        {"atomic bad rkey", SR_WR_ATOMIC_CMP_AND_SWP, K_BAD_RKEY, SR_WC_REM_ACCESS_ERR, SR_QPS_ERR},
        {"send larger than receive", SR_WR_SEND, K_RECV_SMALL, SR_WC_REM_INV_REQ_ERR, SR_QPS_ERR},
        {"send bad lkey", SR_WR_SEND, K_BAD_LKEY, SR_WC_LOC_PROT_ERR, SR_QPS_RTS},
        {"read without QP remote read", SR_WR_RDMA_READ, K_QP_ACCESS, SR_WC_REM_ACCESS_ERR,
         SR_QPS_ERR},
        /* the responder cannot write its own receive buffer: remote
         * operational error at the requester, local protection error at the
         * responder, whose receive completes in error (IBA 9.9.3.1) */
        {"send into a receive with a bad lkey", SR_WR_SEND, K_RECV_BAD_LKEY, SR_WC_REM_OP_ERR,
         SR_QPS_ERR},
        {"write with an rkey of another PD", SR_WR_RDMA_WRITE, K_OTHER_PD, SR_WC_REM_ACCESS_ERR,
         SR_QPS_ERR},
        {"read into memory without local write", SR_WR_RDMA_READ, K_READ_NO_LOCAL_WRITE,
         SR_WC_LOC_PROT_ERR, SR_QPS_RTS},
        /* ATOMIC WRITE (IBA 1.5): aligned, in bounds, remote write access */
        {"atomic write unaligned", SR_WR_ATOMIC_WRITE, K_UNALIGNED, SR_WC_REM_INV_REQ_ERR,
         SR_QPS_ERR},
        {"atomic write out of bounds", SR_WR_ATOMIC_WRITE, K_OOB, SR_WC_REM_ACCESS_ERR, SR_QPS_ERR},
        {"atomic write bad rkey", SR_WR_ATOMIC_WRITE, K_BAD_RKEY, SR_WC_REM_ACCESS_ERR, SR_QPS_ERR},
        {"atomic write region without remote write", SR_WR_ATOMIC_WRITE, K_NO_ACCESS,
         SR_WC_REM_ACCESS_ERR, SR_QPS_ERR},
        {"atomic write without QP remote write", SR_WR_ATOMIC_WRITE, K_QP_NO_WRITE,
         SR_WC_REM_ACCESS_ERR, SR_QPS_ERR},
    };
    for (size_t ci = 0; ci < SR_ARRAY_SIZE(cases); ci++) {
        const struct err_case *c = &cases[ci];
        sr_test_ctx = c->name;
        struct eng_fix f;
        struct h_qp_opts o = {.type = SR_QPT_RC,
                              .mtu = 1024,
                              .retry_cnt = 3,
                              .rnr_retry = 3,
                              .access = c->kind == K_QP_ACCESS     ? SR_ACCESS_REMOTE_WRITE
                                        : c->kind == K_QP_NO_WRITE ? 15 & ~SR_ACCESS_REMOTE_WRITE
                                                                   : 15};
        uint32_t mr_access =
            c->kind == K_NO_ACCESS ? SR_ACCESS_LOCAL_WRITE | SR_ACCESS_REMOTE_READ : FIX_ALL_ACCESS;
        fix_open(&f, &(struct fix_opts){.qp = o, .mr_access = mr_access});
        pattern(f.mem[1], FIX_MEM, 5);
        uint8_t before[4096];
        memcpy(before, f.mem[1], sizeof(before));
        struct sr_sge rs = {(uintptr_t)f.mem[1] + 8192, c->kind == K_RECV_SMALL ? 100 : 4096,
                            c->kind == K_RECV_BAD_LKEY ? 0xdead00 : sr_mr_lkey(f.mr[1])};
        struct sr_pd *other_pd = NULL;
        struct sr_mr *extra = NULL;
        if (c->kind == K_OTHER_PD) {
            SR_CHECK_EQ(sr_pd_alloc(f.h.eng[1], &other_pd), 0);
            SR_CHECK_EQ(sr_mr_reg(other_pd, f.mem[1], FIX_MEM, (uintptr_t)f.mem[1], 15, &extra), 0);
        } else if (c->kind == K_READ_NO_LOCAL_WRITE) {
            SR_CHECK_EQ(sr_mr_reg(f.pr.pd[0], f.mem[0], 4096, (uintptr_t)f.mem[0],
                                  SR_ACCESS_REMOTE_READ, &extra),
                        0);
        }
        struct sr_recv_wr rwr = {.wr_id = 5, .sg_list = &rs, .num_sge = 1};
        sr_qp_post_recv(f.pr.qp[1], &rwr);
        rwr.wr_id = 6;
        sr_qp_post_recv(f.pr.qp[1], &rwr);

        struct sr_sge sg = {(uintptr_t)f.mem[0], 200, sr_mr_lkey(f.mr[0])};
        struct sr_send_wr ok =
            signaled_wr(&f, 1, &sg, SR_WR_RDMA_WRITE, (uintptr_t)f.mem[1] + 100000);
        int first = c->kind != K_QP_ACCESS && c->kind != K_NO_ACCESS && c->kind != K_QP_NO_WRITE;
        if (first)
            SR_CHECK_EQ(sr_qp_post_send(f.pr.qp[0], &ok, f.h.now), 0);
        struct sr_send_wr bad = ok;
        bad.wr_id = 2;
        bad.opcode = c->op;
        bad.remote_addr = (uintptr_t)f.mem[1];
        if (c->op == SR_WR_ATOMIC_CMP_AND_SWP || c->op == SR_WR_ATOMIC_FETCH_AND_ADD)
            sg.length = 8;
        if (c->op == SR_WR_ATOMIC_WRITE) {
            bad.num_sge = 0;
            bad.compare_add = 0x5a5a5a5a5a5a5a5aull;
        }
        switch (c->kind) {
        case K_BAD_RKEY:
            bad.rkey ^= 0x100;
            break;
        case K_OOB:
            /* an ATOMIC WRITE's target must stay aligned to be out of bounds */
            bad.remote_addr =
                (uintptr_t)f.mem[1] + FIX_MEM - (c->op == SR_WR_ATOMIC_WRITE ? 0 : 100);
            break;
        case K_UNALIGNED:
            bad.remote_addr += 4;
            break;
        case K_BAD_LKEY:
            sg.lkey = 0xdead00;
            break;
        case K_OTHER_PD:
            bad.rkey = sr_mr_rkey(extra);
            break;
        case K_READ_NO_LOCAL_WRITE:
            sg.lkey = sr_mr_lkey(extra);
            break;
        default:
            break;
        }
        SR_CHECK_EQ(sr_qp_post_send(f.pr.qp[0], &bad, f.h.now), 0);
        struct sr_send_wr later = ok;
        later.wr_id = 3;
        later.send_flags = 0; /* unsignaled, but flushed in error: completes anyway */
        sg.lkey = sr_mr_lkey(f.mr[0]);
        SR_CHECK_EQ(sr_qp_post_send(f.pr.qp[0], &later, f.h.now), 0);

        struct sr_wc wc[8];
        int n = wait_wc(&f.h, f.pr.scq[0], first + 2, wc, 1000000000ull);
        SR_CHECK_EQ(n, first + 2);
        if (first) {
            SR_CHECK_EQ(wc[0].wr_id, 1);
            SR_CHECK_EQ(wc[0].status, SR_WC_SUCCESS);
        }
        SR_CHECK_EQ(wc[first].wr_id, 2);
        SR_CHECK_EQ(wc[first].status, c->req_status);
        SR_CHECK_EQ(wc[first + 1].wr_id, 3);
        SR_CHECK_EQ(wc[first + 1].status, SR_WC_WR_FLUSH_ERR);
        struct sr_qp_attr qa;
        sr_qp_query(f.pr.qp[0], &qa, NULL);
        SR_CHECK_EQ(qa.qp_state, SR_QPS_ERR);
        h_run(&f.h, NULL, NULL, 10000000ull);
        sr_qp_query(f.pr.qp[1], &qa, NULL);
        SR_CHECK_EQ(qa.qp_state, c->resp_state);
        if (c->kind == K_RECV_SMALL || c->kind == K_RECV_BAD_LKEY) {
            SR_CHECK_EQ(wait_wc(&f.h, f.pr.rcq[1], 2, wc, 1000000ull), 2);
            SR_CHECK_EQ(wc[0].status,
                        c->kind == K_RECV_SMALL ? SR_WC_LOC_LEN_ERR : SR_WC_LOC_PROT_ERR);
            SR_CHECK_EQ(wc[1].status, SR_WC_WR_FLUSH_ERR);
        }
        if (extra)
            sr_mr_dereg(extra);
        if (other_pd)
            sr_pd_free(other_pd);
        /* memory outside what was granted is untouched */
        SR_CHECK_MEM(f.mem[1], before, sizeof(before));
        /* posting to a QP in error flushes at once */
        SR_CHECK_EQ(sr_qp_post_send(f.pr.qp[0], &ok, f.h.now), 0);
        SR_CHECK_EQ(sr_cq_poll(f.pr.scq[0], 1, wc), 1);
        SR_CHECK_EQ(wc[0].status, SR_WC_WR_FLUSH_ERR);
        fix_close(&f);
    }
}

static void test_rnr(void)
{
    for (int exhaust = 0; exhaust < 2; exhaust++) {
        sr_test_ctx = exhaust ? "rnr exhausted" : "rnr recovers";
        struct eng_fix f;
        struct h_qp_opts o = {.type = SR_QPT_RC,
                              .retry_cnt = 2,
                              .rnr_retry = exhaust ? 2 : 7,
                              .access = 15,
                              .min_rnr_timer = 14 /* 1.28 ms */};
        fix_open(&f, &(struct fix_opts){.qp = o});
        struct sr_sge sg = {(uintptr_t)f.mem[0], 64, sr_mr_lkey(f.mr[0])};
        struct sr_send_wr wr = {.wr_id = 9,
                                .sg_list = &sg,
                                .num_sge = 1,
                                .opcode = SR_WR_SEND,
                                .send_flags = SR_SEND_SIGNALED};
        pattern(f.mem[0], 64, 3);
        SR_CHECK_EQ(sr_qp_post_send(f.pr.qp[0], &wr, f.h.now), 0);
        struct sr_wc wc[2];
        if (exhaust) {
            uint64_t t0 = f.h.now;
            SR_CHECK_EQ(wait_wc(&f.h, f.pr.scq[0], 1, wc, 100000000ull), 1);
            SR_CHECK_EQ(wc[0].status, SR_WC_RNR_RETRY_EXC_ERR);
            /* three RNR NAKs, two waits of 1.28 ms in between */
            SR_CHECK(f.h.now - t0 >= 2 * 1280000ull && f.h.now - t0 < 4 * 1280000ull);
            struct sr_engine_stats st;
            sr_engine_stats(f.h.eng[0], &st);
            SR_CHECK_EQ(st.rnr_naks_rcvd, 3);
        } else {
            SR_CHECK_EQ(wait_wc(&f.h, f.pr.scq[0], 1, wc, 30000000ull), 0); /* still waiting */
            struct sr_sge rs = {(uintptr_t)f.mem[1], 64, sr_mr_lkey(f.mr[1])};
            struct sr_recv_wr rwr = {.wr_id = 4, .sg_list = &rs, .num_sge = 1};
            SR_CHECK_EQ(sr_qp_post_recv(f.pr.qp[1], &rwr), 0);
            SR_CHECK_EQ(wait_wc(&f.h, f.pr.scq[0], 1, wc, 100000000ull), 1);
            SR_CHECK_EQ(wc[0].status, SR_WC_SUCCESS);
            SR_CHECK_MEM(f.mem[1], f.mem[0], 64);
        }
        fix_close(&f);
    }
}

static void test_retry_exceeded(void)
{
    sr_test_ctx = "dead peer";
    struct eng_fix f;
    struct h_qp_opts o = {
        .type = SR_QPT_RC, .timeout = 10 /* 4.19 ms */, .retry_cnt = 3, .access = 15};
    fix_open(&f, &(struct fix_opts){.qp = o, .filter = f_all});
    struct sr_sge sg = {(uintptr_t)f.mem[0], 5000, sr_mr_lkey(f.mr[0])};
    struct sr_send_wr wr = signaled_wr(&f, 1, &sg, SR_WR_RDMA_WRITE, (uintptr_t)f.mem[1]);
    SR_CHECK_EQ(sr_qp_post_send(f.pr.qp[0], &wr, f.h.now), 0);
    wr.wr_id = 2;
    wr.opcode = SR_WR_RDMA_READ;
    SR_CHECK_EQ(sr_qp_post_send(f.pr.qp[0], &wr, f.h.now), 0);
    uint64_t t0 = f.h.now;
    struct sr_wc wc[2];
    SR_CHECK_EQ(wait_wc(&f.h, f.pr.scq[0], 2, wc, 10000000000ull), 2);
    SR_CHECK_EQ(wc[0].status, SR_WC_RETRY_EXC_ERR);
    SR_CHECK_EQ(wc[1].status, SR_WC_WR_FLUSH_ERR);
    uint64_t t = sr_timeout_ns(10);
    /* retry_cnt + 1 timer expiries */
    SR_CHECK(f.h.now - t0 >= 4 * t && f.h.now - t0 < 5 * t);
    SR_CHECK_EQ(sr_engine_next_deadline(f.h.eng[0]), UINT64_MAX); /* nothing left running */
    fix_close(&f);
}

int main(void)
{
    SR_RUN(test_errors);
    SR_RUN(test_rnr);
    SR_RUN(test_retry_exceeded);
    return SR_TEST_RESULT();
}

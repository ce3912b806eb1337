/* engine_qp_test.c: the QP state machine of the engine (IBA 10.3.1):
 * which transitions and attribute masks sr_qp_modify takes, what a move to
 * RESET takes out of the CQs, SQD draining a partly sent WQE, and a
 * destroyed QP's linger (TIME_WAIT), on the fixture of engine_fixture.h. */
#include "engine_fixture.h"

static void test_qp_state(void)
{
    sr_test_ctx = "qp state machine";
    struct eng_fix f;
    fix_open(&f, &(struct fix_opts){0}); /* engines only */
    struct sr_pd *pd;
    struct sr_cq *cq;
    struct sr_qp *qp;
    SR_CHECK_EQ(sr_pd_alloc(f.h.eng[0], &pd), 0);
    SR_CHECK_EQ(sr_cq_create(f.h.eng[0], 16, &cq), 0);
    struct sr_qp_init_attr ia = {.qp_type = SR_QPT_RC,
                                 .send_cq = cq,
                                 .recv_cq = cq,
                                 .cap = {.max_send_wr = 4, .max_recv_wr = 4}};
    SR_CHECK_EQ(sr_qp_create(pd, &ia, &qp), 0);
    struct sr_qp_attr a = {.qp_state = SR_QPS_RTR, .path_mtu = 1024, .port_num = 1};
    uint32_t rtr = SR_QP_STATE | SR_QP_AV | SR_QP_PATH_MTU | SR_QP_DEST_QPN | SR_QP_RQ_PSN |
                   SR_QP_MAX_DEST_RD_ATOMIC | SR_QP_MIN_RNR_TIMER;
    SR_CHECK_EQ(sr_qp_modify(qp, &a, rtr, 0), SR_ERR_INVAL); /* RESET -> RTR */
    a.qp_state = SR_QPS_INIT;
    SR_CHECK_EQ(sr_qp_modify(qp, &a, SR_QP_STATE | SR_QP_PORT, 0), SR_ERR_INVAL); /* missing */
    SR_CHECK_EQ(sr_qp_modify(qp, &a,
                             SR_QP_STATE | SR_QP_PORT | SR_QP_PKEY_INDEX | SR_QP_ACCESS_FLAGS |
                                 SR_QP_TIMEOUT,
                             0),
                SR_ERR_INVAL); /* extra attribute not allowed here */
    SR_CHECK_EQ(
        sr_qp_modify(qp, &a, SR_QP_STATE | SR_QP_PORT | SR_QP_PKEY_INDEX | SR_QP_ACCESS_FLAGS, 0),
        0);
    struct sr_sge sg = {0, 0, 0};
    struct sr_send_wr wr = {.sg_list = &sg, .opcode = SR_WR_SEND};
    SR_CHECK_EQ(sr_qp_post_send(qp, &wr, 0), SR_ERR_INVAL); /* not RTS */
    a.qp_state = SR_QPS_RTR;
    a.path_mtu = 1000;
    SR_CHECK_EQ(sr_qp_modify(qp, &a, rtr, 0), SR_ERR_INVAL); /* bad MTU */
    a.path_mtu = 2048;
    SR_CHECK_EQ(sr_qp_modify(qp, &a, rtr & ~(uint32_t)SR_QP_MIN_RNR_TIMER, 0), SR_ERR_INVAL);
    SR_CHECK_EQ(sr_qp_modify(qp, &a, rtr, 0), 0);
    a.qp_state = SR_QPS_RTS;
    uint32_t rts = SR_QP_STATE | SR_QP_SQ_PSN | SR_QP_TIMEOUT | SR_QP_RETRY_CNT | SR_QP_RNR_RETRY |
                   SR_QP_MAX_QP_RD_ATOMIC;
    a.retry_cnt = 8;
    SR_CHECK_EQ(sr_qp_modify(qp, &a, rts, 0), SR_ERR_INVAL); /* retry_cnt > 7 */
    a.retry_cnt = 7;
    a.cur_qp_state = SR_QPS_INIT;
    SR_CHECK_EQ(sr_qp_modify(qp, &a, rts | SR_QP_CUR_STATE, 0), SR_ERR_INVAL);
    SR_CHECK_EQ(sr_qp_modify(qp, &a, rts, 0), 0);
    struct sr_qp_attr q;
    sr_qp_query(qp, &q, NULL);
    SR_CHECK_EQ(q.qp_state, SR_QPS_RTS);
    SR_CHECK_EQ(q.path_mtu, 2048);
    a.qp_state = SR_QPS_SQE;
    SR_CHECK_EQ(sr_qp_modify(qp, &a, SR_QP_STATE, 0), SR_ERR_INVAL); /* RTS -> SQE by hand */
    a.qp_state = SR_QPS_SQD;
    SR_CHECK_EQ(sr_qp_modify(qp, &a, SR_QP_STATE | SR_QP_EN_SQD_ASYNC_NOTIFY, 0), 0);
    SR_CHECK_EQ(f.h.async_events[SR_EVENT_SQ_DRAINED], 1); /* nothing outstanding */
    a.qp_state = SR_QPS_RTS;
    SR_CHECK_EQ(sr_qp_modify(qp, &a, SR_QP_STATE, 0), 0);
    a.qp_state = SR_QPS_ERR;
    SR_CHECK_EQ(sr_qp_modify(qp, &a, SR_QP_STATE, 0), 0);
    a.qp_state = SR_QPS_RTS;
    SR_CHECK_EQ(sr_qp_modify(qp, &a, SR_QP_STATE, 0), SR_ERR_INVAL); /* ERR -> RTS */
    a.qp_state = SR_QPS_RESET;
    SR_CHECK_EQ(sr_qp_modify(qp, &a, SR_QP_STATE, 0), 0);
    SR_CHECK_EQ(sr_cq_destroy(cq), SR_ERR_BUSY);
    SR_CHECK_EQ(sr_pd_free(pd), SR_ERR_BUSY);
    SR_CHECK_EQ(sr_qp_destroy(qp), 0);
    SR_CHECK_EQ(sr_cq_destroy(cq), 0);
    SR_CHECK_EQ(sr_pd_free(pd), 0);
    fix_close(&f);
}

/* A QP moved to RESET takes its completions out of its CQs (the flushed
 * receives of its error state here), as the verbs providers do. */
static void test_reset_cleans_cq(void)
{
    struct eng_fix f;
    struct h_qp_opts o = {
        .type = SR_QPT_RC, .mtu = 1024, .retry_cnt = 3, .rnr_retry = 3, .access = 15};
    fix_open(&f, &(struct fix_opts){.qp = o});
    struct sr_sge rs = {(uintptr_t)f.mem[1], 64, sr_mr_lkey(f.mr[1])};
    struct sr_recv_wr rwr = {.wr_id = 7, .sg_list = &rs, .num_sge = 1};
    SR_CHECK_EQ(sr_qp_post_recv(f.pr.qp[1], &rwr), 0);
    SR_CHECK_EQ(sr_qp_post_recv(f.pr.qp[1], &rwr), 0);
    struct sr_qp_attr a = {.qp_state = SR_QPS_ERR};
    SR_CHECK_EQ(sr_qp_modify(f.pr.qp[1], &a, SR_QP_STATE, f.h.now), 0);
    a.qp_state = SR_QPS_RESET;
    SR_CHECK_EQ(sr_qp_modify(f.pr.qp[1], &a, SR_QP_STATE, f.h.now), 0);
    struct sr_wc wc[4];
    SR_CHECK_EQ(sr_cq_poll(f.pr.rcq[1], 4, wc), 0);
    fix_close(&f);
}

/* SQD drains what has started: a WRITE cut short by the window, whose
 * first packet is lost, is sent again from its start (the sequence NAK's
 * rewind) and completes. Treated as a new WQE then, it stayed stopped
 * until its retries ran out. */
static int sqd_drops;
static int f_drop_first(struct harness *h, const struct h_pkt *p, uint64_t seq)
{
    (void)h, (void)seq;
    return p->from == 0 && sqd_drops++ == 0;
}

static void test_sqd_rewind(void)
{
    sr_test_ctx = "SQD: a partly sent WQE rewound to its start drains";
    struct eng_fix f;
    struct h_qp_opts o = {.type = SR_QPT_RC, .mtu = 1024, .retry_cnt = 3, .access = 15};
    fix_open(&f, &(struct fix_opts){.wire = {.window = 4}, .qp = o, .filter = f_drop_first});
    sqd_drops = 0;
    pattern(f.mem[0], 8192, 3);
    struct sr_sge sg = {(uintptr_t)f.mem[0], 8192, sr_mr_lkey(f.mr[0])};
    struct sr_send_wr wr = signaled_wr(&f, 5, &sg, SR_WR_RDMA_WRITE, (uintptr_t)f.mem[1]);
    SR_CHECK_EQ(sr_qp_post_send(f.pr.qp[0], &wr, f.h.now), 0); /* 4 of its 8 packets go */
    struct sr_qp_attr a = {.qp_state = SR_QPS_SQD};
    SR_CHECK_EQ(sr_qp_modify(f.pr.qp[0], &a, SR_QP_STATE | SR_QP_EN_SQD_ASYNC_NOTIFY, f.h.now), 0);
    struct sr_wc wc[1];
    SR_CHECK_EQ(wait_wc(&f.h, f.pr.scq[0], 1, wc, 100000000ull), 1);
    SR_CHECK_EQ(wc[0].status, SR_WC_SUCCESS);
    SR_CHECK_MEM(f.mem[1], f.mem[0], 8192);
    h_run(&f.h, NULL, NULL, 1000000);
    SR_CHECK_EQ(f.h.async_events[SR_EVENT_SQ_DRAINED], 1);
    fix_close(&f);
}

/* TIME_WAIT: the responder acknowledges the last SEND, the ACK is lost, the
 * responder's QP is destroyed with a linger: the requester's retransmission
 * is still acknowledged, so its send succeeds. Without a linger it fails. */
static int ack_drops;
static int f_drop_acks(struct harness *h, const struct h_pkt *p, uint64_t seq)
{
    (void)h, (void)seq;
    if (p->from == 1 && (p->data[0] & 0x1f) == SR_OP_ACK && ack_drops > 0) {
        ack_drops--;
        return 1;
    }
    return 0;
}

static void test_linger(void)
{
    for (int linger = 0; linger < 2; linger++) {
        sr_test_ctx = linger ? "destroyed with linger" : "destroyed without linger";
        struct eng_fix f;
        struct h_qp_opts o = {.type = SR_QPT_RC, .timeout = 10, .retry_cnt = 3, .access = 15};
        fix_open(&f, &(struct fix_opts){.qp = o, .filter = f_drop_acks});
        ack_drops = 1;
        struct sr_sge rs = {(uintptr_t)f.mem[1], 64, sr_mr_lkey(f.mr[1])};
        struct sr_recv_wr rwr = {.wr_id = 1, .sg_list = &rs, .num_sge = 1};
        SR_CHECK_EQ(sr_qp_post_recv(f.pr.qp[1], &rwr), 0);
        struct sr_sge sg = {(uintptr_t)f.mem[0], 64, sr_mr_lkey(f.mr[0])};
        struct sr_send_wr wr = {.wr_id = 2,
                                .sg_list = &sg,
                                .num_sge = 1,
                                .opcode = SR_WR_SEND,
                                .send_flags = SR_SEND_SIGNALED};
        SR_CHECK_EQ(sr_qp_post_send(f.pr.qp[0], &wr, f.h.now), 0);
        struct sr_wc wc[2];
        SR_CHECK_EQ(wait_wc(&f.h, f.pr.rcq[1], 1, wc, 1000000ull), 1); /* delivered; ACK lost */
        uint64_t t = sr_timeout_ns(10);
        SR_CHECK_EQ(sr_qp_destroy_linger(f.pr.qp[1], f.h.now, linger ? 5 * t : 0), 0);
        SR_CHECK_EQ(sr_engine_zombies(f.h.eng[1]), (uint32_t)linger);
        /* the CQ and PD are free to go at once */
        SR_CHECK_EQ(sr_mr_dereg(f.mr[1]), 0);
        f.mr[1] = NULL;
        SR_CHECK_EQ(wait_wc(&f.h, f.pr.scq[0], 1, wc, 10 * t), 1);
        SR_CHECK_EQ(wc[0].status, linger ? SR_WC_SUCCESS : SR_WC_RETRY_EXC_ERR);
        h_run(&f.h, NULL, NULL, 10 * t);
        SR_CHECK_EQ(sr_engine_zombies(f.h.eng[1]), 0); /* the linger ended */
        fix_close(&f);
    }
}

int main(void)
{
    SR_RUN(test_qp_state);
    SR_RUN(test_reset_cleans_cq);
    SR_RUN(test_sqd_rewind);
    SR_RUN(test_linger);
    return SR_TEST_RESULT();
}

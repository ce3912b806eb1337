/* engine_ud_test.c: the engine's unreliable and extended transports: UD
 * (Q_Keys, the GRH in the receive buffer, inline data, the port MTU), UC
 * (a message that lost a packet is dropped whole), XRC (the SRQ
 * an XRCETH names, another domain's SRQ refused); on engine_fixture.h. */
#include "engine_fixture.h"

static void test_ud(void)
{
    sr_test_ctx = "ud";
    struct eng_fix f;
    struct h_qp_opts o = {.type = SR_QPT_UD, .mtu = 1024, .max_inline = 64};
    fix_open(&f, &(struct fix_opts){.qp = o});
    pattern(f.mem[0], 2048, 8);
    struct sr_sge rs = {(uintptr_t)f.mem[1], 40 + 1024, sr_mr_lkey(f.mr[1])};
    struct sr_recv_wr rwr = {.wr_id = 1, .sg_list = &rs, .num_sge = 1};
    for (int i = 0; i < 3; i++)
        SR_CHECK_EQ(sr_qp_post_recv(f.pr.qp[1], &rwr), 0);
    struct sr_sge sg = {(uintptr_t)f.mem[0], 1000, sr_mr_lkey(f.mr[0])};
    struct sr_send_wr wr = {.wr_id = 2,
                            .sg_list = &sg,
                            .num_sge = 1,
                            .opcode = SR_WR_SEND_WITH_IMM,
                            .imm = 0x55667788,
                            .send_flags = SR_SEND_SIGNALED,
                            .ah = {.dest_qpn = sr_qp_num(f.pr.qp[1]), .qkey = 0x11111111}};
    h_gid(wr.ah.dgid, 1);
    SR_CHECK_EQ(sr_qp_post_send(f.pr.qp[0], &wr, f.h.now), 0);
    wr.ah.qkey = 0x22222222; /* wrong Q_Key: dropped silently at the receiver */
    SR_CHECK_EQ(sr_qp_post_send(f.pr.qp[0], &wr, f.h.now), 0);
    wr.ah.qkey = 0x80000000; /* high bit: use the QP's Q_Key */
    wr.send_flags |= SR_SEND_INLINE;
    sg.length = 60;
    SR_CHECK_EQ(sr_qp_post_send(f.pr.qp[0], &wr, f.h.now), 0);
    memset(f.mem[0], 0, 60); /* inline data was captured at post */
    struct sr_wc wc[4];
    SR_CHECK_EQ(wait_wc(&f.h, f.pr.scq[0], 3, wc, 1000000ull), 3);
    SR_CHECK_EQ(wait_wc(&f.h, f.pr.rcq[1], 2, wc, 1000000ull), 2);
    SR_CHECK_EQ(wc[0].status, SR_WC_SUCCESS);
    SR_CHECK_EQ(wc[0].byte_len, 40 + 1000);
    SR_CHECK_EQ(wc[0].wc_flags, SR_WC_GRH | SR_WC_WITH_IMM);
    SR_CHECK_EQ(wc[0].imm, 0x55667788);
    SR_CHECK_EQ(wc[0].src_qp, sr_qp_num(f.pr.qp[0]));
    SR_CHECK_EQ(wc[1].byte_len, 40 + 60);
    /* GRH: IPv4 header in bytes 20..39 with the sender's address */
    SR_CHECK_EQ(f.mem[1][20], 0x45);
    SR_CHECK_EQ(f.mem[1][28 + 4], 127);
    SR_CHECK_EQ(f.mem[1][28 + 7], 1);
    struct sr_engine_stats st;
    sr_engine_stats(f.h.eng[1], &st);
    SR_CHECK_EQ(st.rx_drop_qkey, 1);
    /* too large for the MTU: local length error, QP to SQE */
    sg.length = 4097; /* UD QPs use the port MTU (4096 here) */
    wr.send_flags = SR_SEND_SIGNALED;
    SR_CHECK_EQ(sr_qp_post_send(f.pr.qp[0], &wr, f.h.now), 0);
    SR_CHECK_EQ(sr_cq_poll(f.pr.scq[0], 1, wc), 1);
    SR_CHECK_EQ(wc[0].status, SR_WC_LOC_LEN_ERR);
    struct sr_qp_attr qa;
    sr_qp_query(f.pr.qp[0], &qa, NULL);
    SR_CHECK_EQ(qa.qp_state, SR_QPS_SQE);
    fix_close(&f);
}

static void test_uc(void)
{
    sr_test_ctx = "uc";
    struct eng_fix f;
    struct h_qp_opts o = {.type = SR_QPT_UC, .mtu = 256, .access = 15};
    fix_open(&f, &(struct fix_opts){.qp = o, .filter = f_drop7});
    pattern(f.mem[0], 65536, 9);
    /* 20 writes of 3 packets each: those that lost a packet are dropped
     * whole by the receiver, the others land intact. */
    for (int i = 0; i < 20; i++) {
        struct sr_sge sg = {(uintptr_t)f.mem[0] + (uint64_t)i * 1000, 700, sr_mr_lkey(f.mr[0])};
        struct sr_send_wr wr = signaled_wr(&f, (uint64_t)i, &sg, SR_WR_RDMA_WRITE,
                                           (uintptr_t)f.mem[1] + (uint64_t)i * 1000);
        SR_CHECK_EQ(sr_qp_post_send(f.pr.qp[0], &wr, f.h.now), 0);
    }
    struct sr_wc wc[20];
    SR_CHECK_EQ(wait_wc(&f.h, f.pr.scq[0], 20, wc, 1000000ull), 20);
    h_run(&f.h, NULL, NULL, 100000ull);
    int intact = 0, partial = 0;
    for (int i = 0; i < 20; i++) {
        SR_CHECK_EQ(wc[i].status, SR_WC_SUCCESS);
        bool same = !memcmp(f.mem[1] + i * 1000, f.mem[0] + i * 1000, 700);
        intact += same;
        /* a dropped message may have written its leading packets, never a
         * packet after a gap */
        if (!same)
            partial++;
    }
    SR_CHECK(intact > 0 && partial > 0);
    fix_close(&f);
}

/* XRC: an initiator on node 0 sends to two XRC SRQs behind one target QP
 * on node 1; each message lands in the SRQ its XRCETH names, completes on
 * that SRQ's CQ with the target QP's number; an SRQ of another domain is
 * refused with an invalid request. RDMA WRITE goes through too, checked
 * against the named SRQ's PD. */
static void xrc_modify(struct harness *h, struct sr_qp *qp, bool target, uint32_t dest)
{
    struct sr_qp_attr a = {.qp_state = SR_QPS_INIT, .port_num = 1, .qp_access_flags = 15};
    SR_CHECK_EQ(sr_qp_modify(qp, &a,
                             SR_QP_STATE | SR_QP_PKEY_INDEX | SR_QP_PORT | SR_QP_ACCESS_FLAGS,
                             h->now),
                0);
    a.qp_state = SR_QPS_RTR;
    a.path_mtu = 1024;
    a.dest_qp_num = dest;
    a.rq_psn = 0x123;
    a.max_dest_rd_atomic = 4;
    a.min_rnr_timer = 1;
    h_gid(a.dgid, target ? 0 : 1);
    uint32_t m = SR_QP_STATE | SR_QP_AV | SR_QP_PATH_MTU | SR_QP_DEST_QPN | SR_QP_RQ_PSN;
    if (target)
        m |= SR_QP_MAX_DEST_RD_ATOMIC | SR_QP_MIN_RNR_TIMER;
    SR_CHECK_EQ(sr_qp_modify(qp, &a, m, h->now), 0);
    a.qp_state = SR_QPS_RTS;
    a.sq_psn = 0x123;
    a.timeout = 8;
    a.retry_cnt = 7;
    a.rnr_retry = 7;
    a.max_rd_atomic = 4;
    m = SR_QP_STATE | SR_QP_SQ_PSN | SR_QP_TIMEOUT;
    if (!target)
        m |= SR_QP_RETRY_CNT | SR_QP_RNR_RETRY | SR_QP_MAX_QP_RD_ATOMIC;
    SR_CHECK_EQ(sr_qp_modify(qp, &a, m, h->now), 0);
}

static void test_xrc(void)
{
    sr_test_ctx = "xrc";
    struct eng_fix f;
    fix_open(&f, &(struct fix_opts){0}); /* engines only: the XRC objects are made here */
    struct sr_pd *pd0, *pd1;
    struct sr_cq *scq, *cqa, *cqb;
    struct sr_xrcd *xrcd, *other;
    struct sr_srq *srqa, *srqb, *srqx;
    struct sr_qp *ini, *tgt;
    SR_CHECK_EQ(sr_pd_alloc(f.h.eng[0], &pd0), 0);
    SR_CHECK_EQ(sr_pd_alloc(f.h.eng[1], &pd1), 0);
    SR_CHECK_EQ(sr_cq_create(f.h.eng[0], 64, &scq), 0);
    SR_CHECK_EQ(sr_cq_create(f.h.eng[1], 64, &cqa), 0);
    SR_CHECK_EQ(sr_cq_create(f.h.eng[1], 64, &cqb), 0);
    SR_CHECK_EQ(sr_xrcd_alloc(f.h.eng[1], &xrcd), 0);
    SR_CHECK_EQ(sr_xrcd_alloc(f.h.eng[1], &other), 0);
    SR_CHECK_EQ(sr_srq_create_xrc(pd1, xrcd, cqa, 16, 2, &srqa), 0);
    SR_CHECK_EQ(sr_srq_create_xrc(pd1, xrcd, cqb, 16, 2, &srqb), 0);
    SR_CHECK_EQ(sr_srq_create_xrc(pd1, other, cqb, 16, 2, &srqx), 0);
    SR_CHECK(sr_srq_num(srqa) != sr_srq_num(srqb));
    struct sr_qp_init_attr ti = {.qp_type = SR_QPT_XRC_RECV, .xrcd = xrcd};
    SR_CHECK_EQ(sr_qp_create(NULL, &ti, &tgt), 0);
    struct sr_qp_init_attr ii = {
        .qp_type = SR_QPT_XRC_SEND, .send_cq = scq, .cap = {.max_send_wr = 16, .max_send_sge = 2}};
    SR_CHECK_EQ(sr_qp_create(pd0, &ii, &ini), 0);
    xrc_modify(&f.h, tgt, true, sr_qp_num(ini));
    xrc_modify(&f.h, ini, false, sr_qp_num(tgt));
    SR_CHECK_EQ(sr_xrcd_free(xrcd), SR_ERR_BUSY);
    struct sr_recv_wr bad_rwr = {0};
    SR_CHECK_EQ(sr_qp_post_recv(tgt, &bad_rwr), SR_ERR_INVAL); /* no receive queue */

    SR_CHECK_EQ(sr_mr_reg(pd0, f.mem[0], 65536, (uintptr_t)f.mem[0], 15, &f.mr[0]), 0);
    SR_CHECK_EQ(sr_mr_reg(pd1, f.mem[1], 65536, (uintptr_t)f.mem[1], 15, &f.mr[1]), 0);
    pattern(f.mem[0], 8192, 77);
    struct sr_sge ra = {(uintptr_t)f.mem[1], 4096, sr_mr_lkey(f.mr[1])};
    struct sr_sge rb = {(uintptr_t)f.mem[1] + 4096, 4096, sr_mr_lkey(f.mr[1])};
    struct sr_recv_wr wa = {.wr_id = 0xa, .sg_list = &ra, .num_sge = 1};
    struct sr_recv_wr wb = {.wr_id = 0xb, .sg_list = &rb, .num_sge = 1};
    SR_CHECK_EQ(sr_srq_post_recv(srqa, &wa), 0);
    SR_CHECK_EQ(sr_srq_post_recv(srqb, &wb), 0);

    struct sr_sge s1 = {(uintptr_t)f.mem[0], 3000, sr_mr_lkey(f.mr[0])};
    struct sr_sge s2 = {(uintptr_t)f.mem[0] + 4096, 2000, sr_mr_lkey(f.mr[0])};
    struct sr_send_wr to_b = {.wr_id = 1,
                              .sg_list = &s2,
                              .num_sge = 1,
                              .opcode = SR_WR_SEND,
                              .send_flags = SR_SEND_SIGNALED,
                              .xrc_remote_srqn = sr_srq_num(srqb)};
    struct sr_send_wr to_a = {.wr_id = 2,
                              .sg_list = &s1,
                              .num_sge = 1,
                              .opcode = SR_WR_SEND_WITH_IMM,
                              .imm = 0x1234,
                              .send_flags = SR_SEND_SIGNALED,
                              .xrc_remote_srqn = sr_srq_num(srqa)};
    struct sr_send_wr wr3 = {.wr_id = 3,
                             .sg_list = &s1,
                             .num_sge = 1,
                             .opcode = SR_WR_RDMA_WRITE,
                             .send_flags = SR_SEND_SIGNALED,
                             .remote_addr = (uintptr_t)f.mem[1] + 16384,
                             .rkey = sr_mr_rkey(f.mr[1]),
                             .xrc_remote_srqn = sr_srq_num(srqa)};
    SR_CHECK_EQ(sr_qp_post_send(ini, &to_b, f.h.now), 0);
    SR_CHECK_EQ(sr_qp_post_send(ini, &to_a, f.h.now), 0);
    SR_CHECK_EQ(sr_qp_post_send(ini, &wr3, f.h.now), 0);
    struct sr_wc wc[4];
    SR_CHECK_EQ(wait_wc(&f.h, scq, 3, wc, 100000000ull), 3);
    for (int i = 0; i < 3; i++)
        SR_CHECK_EQ(wc[i].status, SR_WC_SUCCESS);
    SR_CHECK_EQ(wait_wc(&f.h, cqa, 1, wc, 1000000ull), 1);
    SR_CHECK_EQ(wc[0].wr_id, 0xa);
    SR_CHECK_EQ(wc[0].byte_len, 3000);
    SR_CHECK_EQ(wc[0].imm, 0x1234);
    SR_CHECK_EQ(wc[0].qp_num, sr_qp_num(tgt));
    SR_CHECK_EQ(wait_wc(&f.h, cqb, 1, wc, 1000000ull), 1);
    SR_CHECK_EQ(wc[0].wr_id, 0xb);
    SR_CHECK_EQ(wc[0].byte_len, 2000);
    SR_CHECK_MEM(f.mem[1], f.mem[0], 3000);
    SR_CHECK_MEM(f.mem[1] + 4096, f.mem[0] + 4096, 2000);
    SR_CHECK_MEM(f.mem[1] + 16384, f.mem[0], 3000);

    /* an SRQ of another domain: invalid request, both sides in error */
    struct sr_send_wr to_x = to_b;
    to_x.wr_id = 4;
    to_x.xrc_remote_srqn = sr_srq_num(srqx);
    SR_CHECK_EQ(sr_qp_post_send(ini, &to_x, f.h.now), 0);
    SR_CHECK_EQ(wait_wc(&f.h, scq, 1, wc, 100000000ull), 1);
    SR_CHECK_EQ(wc[0].status, SR_WC_REM_INV_REQ_ERR);
    struct sr_qp_attr qa;
    sr_qp_query(tgt, &qa, NULL);
    SR_CHECK_EQ(qa.qp_state, SR_QPS_ERR);

    SR_CHECK_EQ(sr_qp_destroy(tgt), 0);
    SR_CHECK_EQ(sr_qp_destroy(ini), 0);
    SR_CHECK_EQ(sr_srq_destroy(srqa), 0);
    SR_CHECK_EQ(sr_srq_destroy(srqb), 0);
    SR_CHECK_EQ(sr_srq_destroy(srqx), 0);
    SR_CHECK_EQ(sr_xrcd_free(xrcd), 0);
    SR_CHECK_EQ(sr_xrcd_free(other), 0);
    fix_close(&f);
}

int main(void)
{
    SR_RUN(test_ud);
    SR_RUN(test_uc);
    SR_RUN(test_xrc);
    return SR_TEST_RESULT();
}

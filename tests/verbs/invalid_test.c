/* invalid_test.c: invalid verbs calls answered with the errno the verbs
 * documentation gives (ibv_modify_qp(3), ibv_post_send(3), ibv_reg_mr(3),
 * ibv_create_cq(3), ibv_query_gid(3): positive errno returned, or NULL
 * with errno set, or -1), and calls softrdma does not support answered
 * with EOPNOTSUPP (directly or through the header's inline fallback),
 * never a crash. Each rejected call must leave its object unchanged. The
 * peer is the vt agent. */
#include "vt.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- ibv_modify_qp: transitions, masks, values ---- */
enum {
    M_INIT = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS,
    M_RTR = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
            IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER,
    M_RTS = IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
            IBV_QP_MAX_QP_RD_ATOMIC,
};

struct mod_row {
    const char *name;
    enum ibv_qp_state from, to;
    int drop, add; /* mask bits taken from / added to the transition's full mask */
    int mtu;       /* RTR path_mtu: 0 = the port's active MTU, -1 = one above it */
    uint8_t port;  /* INIT port_num: 0 = 1 */
    int want;      /* errno */
};

static const struct mod_row mod_rows[] = {
    {"RESET->RTR", IBV_QPS_RESET, IBV_QPS_RTR, 0, 0, 0, 0, EINVAL},
    {"RESET->RTS", IBV_QPS_RESET, IBV_QPS_RTS, 0, 0, 0, 0, EINVAL},
    {"INIT->RTS", IBV_QPS_INIT, IBV_QPS_RTS, 0, 0, 0, 0, EINVAL},
    {"INIT without ACCESS_FLAGS", IBV_QPS_RESET, IBV_QPS_INIT, IBV_QP_ACCESS_FLAGS, 0, 0, 0,
     EINVAL},
    {"INIT without PORT", IBV_QPS_RESET, IBV_QPS_INIT, IBV_QP_PORT, 0, 0, 0, EINVAL},
    {"INIT without PKEY_INDEX", IBV_QPS_RESET, IBV_QPS_INIT, IBV_QP_PKEY_INDEX, 0, 0, 0, EINVAL},
    {"INIT with SQ_PSN", IBV_QPS_RESET, IBV_QPS_INIT, 0, IBV_QP_SQ_PSN, 0, 0, EINVAL},
    {"INIT port_num 2", IBV_QPS_RESET, IBV_QPS_INIT, 0, 0, 0, 2, EINVAL},
    {"RTR without AV", IBV_QPS_INIT, IBV_QPS_RTR, IBV_QP_AV, 0, 0, 0, EINVAL},
    {"RTR without PATH_MTU", IBV_QPS_INIT, IBV_QPS_RTR, IBV_QP_PATH_MTU, 0, 0, 0, EINVAL},
    {"RTR without DEST_QPN", IBV_QPS_INIT, IBV_QPS_RTR, IBV_QP_DEST_QPN, 0, 0, 0, EINVAL},
    {"RTR without RQ_PSN", IBV_QPS_INIT, IBV_QPS_RTR, IBV_QP_RQ_PSN, 0, 0, 0, EINVAL},
    {"RTR without MAX_DEST_RD_ATOMIC", IBV_QPS_INIT, IBV_QPS_RTR, IBV_QP_MAX_DEST_RD_ATOMIC, 0, 0,
     0, EINVAL},
    {"RTR without MIN_RNR_TIMER", IBV_QPS_INIT, IBV_QPS_RTR, IBV_QP_MIN_RNR_TIMER, 0, 0, 0, EINVAL},
    {"RTR with SQ_PSN", IBV_QPS_INIT, IBV_QPS_RTR, 0, IBV_QP_SQ_PSN, 0, 0, EINVAL},
    {"RTR path_mtu above the port's", IBV_QPS_INIT, IBV_QPS_RTR, 0, 0, -1, 0, EINVAL},
    {"RTR path_mtu 0", IBV_QPS_INIT, IBV_QPS_RTR, 0, 0, 0x100, 0, EINVAL},
    {"RTR path_mtu 6", IBV_QPS_INIT, IBV_QPS_RTR, 0, 0, 6, 0, EINVAL},
    {"RTS without SQ_PSN", IBV_QPS_RTR, IBV_QPS_RTS, IBV_QP_SQ_PSN, 0, 0, 0, EINVAL},
    {"RTS without TIMEOUT", IBV_QPS_RTR, IBV_QPS_RTS, IBV_QP_TIMEOUT, 0, 0, 0, EINVAL},
    {"RTS without RETRY_CNT", IBV_QPS_RTR, IBV_QPS_RTS, IBV_QP_RETRY_CNT, 0, 0, 0, EINVAL},
    {"RTS without RNR_RETRY", IBV_QPS_RTR, IBV_QPS_RTS, IBV_QP_RNR_RETRY, 0, 0, 0, EINVAL},
    {"RTS with a wrong CUR_STATE", IBV_QPS_RTR, IBV_QPS_RTS, 0, IBV_QP_CUR_STATE, 0, 0, EINVAL},
    {"RTS without MAX_QP_RD_ATOMIC", IBV_QPS_RTR, IBV_QPS_RTS, IBV_QP_MAX_QP_RD_ATOMIC, 0, 0, 0,
     EINVAL},
    /* the control: the full masks and valid values are accepted */
    {"RTS, valid", IBV_QPS_RTR, IBV_QPS_RTS, 0, 0, 0, 0, 0},
};

static int modify_to(struct vt_dev *d, struct ibv_qp *qp, enum ibv_qp_state to, int drop, int add,
                     int mtu, uint8_t port)
{
    struct ibv_qp_attr a;
    memset(&a, 0, sizeof(a));
    a.qp_state = to;
    a.cur_qp_state = IBV_QPS_SQD; /* wrong for every row: used only when the mask has it */
    /* every attribute valid, so only the mask or the value under test is wrong */
    a.pkey_index = 0;
    a.port_num = port ? port : 1;
    a.qp_access_flags = VT_ACCESS_ALL;
    a.path_mtu = mtu == 0       ? d->port.active_mtu
                 : mtu == -1    ? (enum ibv_mtu)(d->port.active_mtu + 1)
                 : mtu == 0x100 ? (enum ibv_mtu)0
                                : (enum ibv_mtu)mtu;
    a.dest_qp_num = 0x123;
    a.rq_psn = 0x10;
    a.sq_psn = 0x20;
    a.max_dest_rd_atomic = 1;
    a.max_rd_atomic = 1;
    a.min_rnr_timer = 1;
    a.timeout = 14;
    a.retry_cnt = 7;
    a.rnr_retry = 7;
    a.ah_attr.is_global = 1;
    a.ah_attr.grh.dgid = d->gid;
    a.ah_attr.grh.hop_limit = 64;
    a.ah_attr.port_num = 1;
    int mask = to == IBV_QPS_INIT ? M_INIT : to == IBV_QPS_RTR ? M_RTR : M_RTS;
    return ibv_modify_qp(qp, &a, (mask & ~drop) | add);
}

static void case_modify_qp(int fd, const void *arg)
{
    (void)fd, (void)arg;
    struct vt_dev d;
    vt_dev_open(&d);
    struct vt_qp_caps caps;
    vt_caps_default(&caps);
    /* main() set SOFTRDMA_MTU=1024, so there is an MTU above the port's */
    VT_EQ(d.port.active_mtu, IBV_MTU_1024);
    for (size_t i = 0; i < sizeof(mod_rows) / sizeof(mod_rows[0]); i++) {
        const struct mod_row *m = &mod_rows[i];
        vt_ctx = m->name;
        struct vt_qp q;
        vt_qp_create(&d, &q, &caps, NULL, NULL, NULL);
        /* walk to the starting state the valid way */
        for (enum ibv_qp_state s = IBV_QPS_INIT; s <= m->from; s++)
            VT_REQUIRE(modify_to(&d, q.qp, s, 0, 0, 0, 0) == 0);
        VT_EQ(vt_qp_state(q.qp), m->from);
        VT_EQ(modify_to(&d, q.qp, m->to, m->drop, m->add, m->mtu, m->port), m->want);
        VT_EQ(vt_qp_state(q.qp), m->want ? m->from : m->to);
        vt_qp_destroy(&q);
    }
    vt_ctx = "";
    vt_dev_close(&d);
}

/* ---- posting in the wrong state, too many SGEs, too much inline ---- */
static void fill_send(struct ibv_send_wr *wr, struct ibv_sge *sge, int n, uint64_t base)
{
    memset(wr, 0, sizeof(*wr) * (size_t)n);
    for (int i = 0; i < n; i++) {
        wr[i].wr_id = base + (uint64_t)i;
        wr[i].sg_list = sge;
        wr[i].num_sge = 1;
        wr[i].opcode = IBV_WR_SEND;
        wr[i].send_flags = IBV_SEND_SIGNALED;
        wr[i].next = i + 1 < n ? &wr[i + 1] : NULL;
    }
}

static void case_post_state(int fd, const void *arg)
{
    (void)fd, (void)arg;
    struct vt_dev d;
    struct vt_buf l;
    vt_dev_open(&d);
    vt_buf_alloc(&d, &l, 4096, VT_ACCESS_ALL);
    struct vt_qp q;
    struct vt_qp_caps caps;
    vt_caps_default(&caps);
    vt_qp_create(&d, &q, &caps, NULL, NULL, NULL);
    struct ibv_sge sge = {.addr = (uintptr_t)l.p, .length = 64, .lkey = l.mr->lkey};
    struct ibv_send_wr wr[2], *bad;
    for (enum ibv_qp_state s = IBV_QPS_RESET; s <= IBV_QPS_INIT; s++) {
        vt_ctx = s == IBV_QPS_RESET ? "RESET" : "INIT";
        if (s == IBV_QPS_INIT)
            VT_REQUIRE(modify_to(&d, q.qp, IBV_QPS_INIT, 0, 0, 0, 0) == 0);
        fill_send(wr, &sge, 2, 0x10);
        bad = NULL;
        VT_EQ(ibv_post_send(q.qp, wr, &bad), EINVAL);
        VT_CHECK(bad == &wr[0]);
        VT_EQ(vt_poll_none(q.scq, 20), 0);
    }
    /* the receive queue, unlike the send queue, takes work from INIT on */
    struct ibv_recv_wr rwr = {.wr_id = 0x20, .sg_list = &sge, .num_sge = 1}, *rbad = NULL;
    VT_EQ(ibv_post_recv(q.qp, &rwr, &rbad), 0);
    vt_ctx = "";
    vt_qp_destroy(&q);
    vt_buf_free(&l);
    vt_dev_close(&d);
}

static void case_post_limits(int fd, const void *arg)
{
    (void)arg;
    struct vt_dev d;
    struct vt_buf l;
    struct vt_remote_mr r;
    vt_dev_open(&d);
    vt_buf_alloc(&d, &l, 64 << 10, VT_ACCESS_ALL);
    vt_agent_hello(fd, &r);
    struct vt_qp q;
    struct vt_qp_caps caps;
    vt_caps_default(&caps);
    caps.max_send_sge = 2;
    caps.max_recv_sge = 2;
    caps.max_inline = 64;
    vt_qp_create(&d, &q, &caps, NULL, NULL, NULL);
    vt_agent_pair(fd, &d, &q, 0, NULL, NULL, NULL, NULL);
    struct ibv_qp_attr qa;
    struct ibv_qp_init_attr qia;
    VT_REQUIRE(ibv_query_qp(q.qp, &qa, IBV_QP_CAP, &qia) == 0);
    const uint32_t max_sge = qia.cap.max_send_sge, max_rsge = qia.cap.max_recv_sge;
    const uint32_t max_inline = qia.cap.max_inline_data;
    VT_CHECK(max_sge >= 2 && max_rsge >= 2 && max_inline >= 64);
    VT_REQUIRE(max_sge < 64 && max_rsge < 64 && max_inline < 4096);
    struct ibv_sge sge[64];
    for (int i = 0; i < 64; i++)
        sge[i] = (struct ibv_sge){
            .addr = (uintptr_t)l.p + 64 * (uint64_t)i, .length = 8, .lkey = l.mr->lkey};

    /* a valid WR, then one with max_send_sge + 1: the first is posted */
    vt_ctx = "num_sge > max_send_sge";
    struct ibv_send_wr wr[2], *bad = NULL;
    memset(wr, 0, sizeof(wr));
    wr[0] = (struct ibv_send_wr){.wr_id = 1,
                                 .next = &wr[1],
                                 .sg_list = sge,
                                 .num_sge = 1,
                                 .opcode = IBV_WR_RDMA_WRITE,
                                 .send_flags = IBV_SEND_SIGNALED};
    wr[0].wr.rdma.remote_addr = r.addr;
    wr[0].wr.rdma.rkey = r.rkey;
    wr[1] = wr[0];
    wr[1].wr_id = 2;
    wr[1].next = NULL;
    wr[1].num_sge = (int)max_sge + 1;
    VT_EQ(ibv_post_send(q.qp, wr, &bad), EINVAL);
    VT_CHECK(bad == &wr[1]);
    vt_expect_wc(q.scq, 1, IBV_WC_SUCCESS, NULL);
    VT_EQ(vt_poll_none(q.scq, 20), 0);

    vt_ctx = "unknown opcode";
    wr[0].wr_id = 6;
    wr[0].next = NULL;
    wr[0].opcode = (enum ibv_wr_opcode)0x7f;
    bad = NULL;
    VT_EQ(ibv_post_send(q.qp, wr, &bad), EINVAL);
    VT_CHECK(bad == &wr[0]);
    VT_EQ(vt_poll_none(q.scq, 20), 0);

    vt_ctx = "num_sge > max_recv_sge";
    struct ibv_recv_wr rwr[2], *rbad = NULL;
    memset(rwr, 0, sizeof(rwr));
    rwr[0] = (struct ibv_recv_wr){.wr_id = 3, .next = &rwr[1], .sg_list = sge, .num_sge = 1};
    rwr[1] = (struct ibv_recv_wr){.wr_id = 4, .sg_list = sge, .num_sge = (int)max_rsge + 1};
    VT_EQ(ibv_post_recv(q.qp, rwr, &rbad), EINVAL);
    VT_CHECK(rbad == &rwr[1]);

    vt_ctx = "inline above max_inline_data";
    uint8_t *big = calloc(1, max_inline + 1);
    VT_REQUIRE(big);
    struct ibv_sge isge = {.addr = (uintptr_t)big, .length = max_inline + 1, .lkey = 0};
    struct ibv_send_wr iwr = {.wr_id = 5,
                              .sg_list = &isge,
                              .num_sge = 1,
                              .opcode = IBV_WR_SEND,
                              .send_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE};
    bad = NULL;
    VT_EQ(ibv_post_send(q.qp, &iwr, &bad), EINVAL);
    VT_CHECK(bad == &iwr);
    VT_EQ(vt_poll_none(q.scq, 20), 0);
    free(big);
    /* the QP is still fine */
    VT_EQ(vt_qp_state(q.qp), IBV_QPS_RTS);
    vt_ctx = "";
    vt_qp_destroy(&q);
    vt_buf_free(&l);
    vt_dev_close(&d);
}

/* ibv_wr_post(3): the setters report nothing; "if a failure is detected
 * during operation, for instance due to an invalid argument, then
 * ibv_wr_complete() will return failure and the entire posting will be
 * aborted". A batch whose second WR is invalid must post nothing. */
enum { BATCH_N = 100, INLINE_N = 20 }; /* 20 x 256 bytes of inline data */

static void case_wr_batch(int fd, const void *arg)
{
    (void)arg;
    struct vt_dev d;
    struct vt_buf l;
    struct vt_remote_mr r;
    vt_dev_open(&d);
    vt_buf_alloc(&d, &l, 64 << 10, VT_ACCESS_ALL);
    vt_agent_hello(fd, &r);
    struct vt_qp q;
    struct vt_qp_caps caps;
    vt_caps_default(&caps);
    caps.max_send_sge = 2;
    caps.qp_ex = true;
    vt_qp_create(&d, &q, &caps, NULL, NULL, NULL);
    vt_agent_pair(fd, &d, &q, 0, NULL, NULL, NULL, NULL);
    struct ibv_qp_attr qa;
    struct ibv_qp_init_attr qia;
    VT_REQUIRE(ibv_query_qp(q.qp, &qa, IBV_QP_CAP, &qia) == 0);
    const uint32_t max_sge = qia.cap.max_send_sge;
    VT_REQUIRE(max_sge >= 2 && max_sge < 16);
    struct ibv_sge sge[16];
    for (int i = 0; i < 16; i++)
        sge[i] = (struct ibv_sge){
            .addr = (uintptr_t)l.p + 64 * (uint64_t)i, .length = 8, .lkey = l.mr->lkey};
    vt_pat_fill(l.p, 4096, 0x33, 0);
    vt_agent_fill(fd, 0, 0, 4096, 0x34, 0);

    /* a valid WRITE, then a SEND with one SGE too many */
    struct ibv_qp_ex *x = q.qpx;
    ibv_wr_start(x);
    x->wr_id = 1;
    x->wr_flags = IBV_SEND_SIGNALED;
    ibv_wr_rdma_write(x, r.rkey, r.addr);
    ibv_wr_set_sge(x, l.mr->lkey, (uintptr_t)l.p, 4096);
    x->wr_id = 2;
    ibv_wr_send(x);
    ibv_wr_set_sge_list(x, max_sge + 1, sge);
    int ret = ibv_wr_complete(x);
    VT_CHECKF(ret != 0, "ibv_wr_complete accepted a WR with num_sge > max_send_sge");
    int seen = vt_poll_none(q.scq, 100);
    long long diff = vt_agent_diff(fd, 0, 0, 4096, 0x34, 0);
    if (ret != 0 && (seen != 0 || diff >= 0))
        vt_known_bug("WR_BATCH_PARTIAL",
                     "ibv_wr_complete returned %d but posted the batch's first WR "
                     "(%d completion(s), remote memory %s)",
                     ret, seen, diff >= 0 ? "written" : "untouched");
    else {
        VT_EQ(seen, 0);
        VT_CHECKF(diff < 0, "remote memory written by an aborted batch");
    }

    /* the QP still takes a valid batch */
    ibv_wr_start(x);
    x->wr_id = 3;
    x->wr_flags = IBV_SEND_SIGNALED;
    ibv_wr_rdma_write(x, r.rkey, r.addr + 8192);
    ibv_wr_set_sge_list(x, max_sge, sge);
    VT_EQ(ibv_wr_complete(x), 0);
    vt_expect_wc(q.scq, 3, IBV_WC_SUCCESS, NULL);
    vt_qp_destroy(&q);

    /* valid batches are bounded by the send queue alone: one as deep as
     * the queue, and one carrying 20 x 256 bytes of inline data */
    caps.max_send_wr = BATCH_N;
    caps.max_inline = 256;
    vt_qp_create(&d, &q, &caps, NULL, NULL, NULL);
    vt_agent_pair(fd, &d, &q, 1, NULL, NULL, NULL, NULL);
    x = q.qpx;
    for (int inl = 0; inl < 2; inl++) {
        vt_ctx = inl ? "inline batch" : "deep batch";
        const uint32_t len = inl ? 256 : 64, seed = 0x35 + (uint32_t)inl;
        const uint32_t n = inl ? INLINE_N : BATCH_N;
        vt_pat_fill(l.p, n * len, seed, 0);
        vt_agent_fill(fd, 0, 0, n * len, 0x37, 0);
        ibv_wr_start(x);
        for (uint32_t i = 0; i < n; i++) {
            x->wr_id = 0x100 + i;
            x->wr_flags = i + 1 == n ? IBV_SEND_SIGNALED : 0;
            ibv_wr_rdma_write(x, r.rkey, r.addr + i * len);
            if (inl)
                ibv_wr_set_inline_data(x, l.p + i * len, len);
            else
                ibv_wr_set_sge(x, l.mr->lkey, (uintptr_t)l.p + i * len, len);
        }
        ret = ibv_wr_complete(x);
        if (ret == ENOMEM) {
            vt_known_bug(inl ? "WR_BATCH_INLINE_LIMIT" : "WR_BATCH_DEPTH_LIMIT",
                         "ibv_wr_complete: ENOMEM for a valid batch of %u WRITEs of %u bytes%s "
                         "on a QP with max_send_wr %u",
                         n, len, inl ? " inline" : "", BATCH_N);
            continue;
        }
        if (VT_EQ(ret, 0)) {
            vt_expect_wc(q.scq, 0x100 + n - 1, IBV_WC_SUCCESS, NULL);
            VT_CHECK(vt_agent_diff(fd, 0, 0, n * len, seed, 0) < 0);
        }
    }
    vt_ctx = "";
    vt_qp_destroy(&q);
    vt_buf_free(&l);
    vt_dev_close(&d);
}

/* Queue full: the peer QP is gone, so nothing sent is ever acknowledged. */
static void case_queue_full(int fd, const void *arg)
{
    (void)arg;
    struct vt_dev d;
    struct vt_buf l;
    struct vt_remote_mr r;
    vt_dev_open(&d);
    vt_buf_alloc(&d, &l, 4096, VT_ACCESS_ALL);
    vt_agent_hello(fd, &r);
    struct vt_qp q;
    struct vt_qp_caps caps;
    vt_caps_default(&caps);
    caps.max_send_wr = 4;
    caps.max_recv_wr = 4;
    vt_qp_create(&d, &q, &caps, NULL, NULL, NULL);
    struct vt_conn c;
    vt_conn_default(&d, &c);
    c.timeout = 20; /* 4.3 s: no retry exhaustion during the test */
    vt_agent_pair(fd, &d, &q, 0, NULL, &c, NULL, NULL);
    vt_agent_qp_destroy(fd, 0);
    struct ibv_qp_attr qa;
    struct ibv_qp_init_attr qia;
    VT_REQUIRE(ibv_query_qp(q.qp, &qa, IBV_QP_CAP, &qia) == 0);
    const uint32_t sq = qia.cap.max_send_wr, rq = qia.cap.max_recv_wr;
    VT_REQUIRE(sq >= 4 && sq < 1024 && rq >= 4 && rq < 1024);

    vt_ctx = "send queue";
    struct ibv_sge sge = {.addr = (uintptr_t)l.p, .length = 64, .lkey = l.mr->lkey};
    struct ibv_send_wr wr[2], *bad;
    for (uint32_t i = 0; i < sq; i++) {
        fill_send(wr, &sge, 1, 0x100 + i);
        VT_EQ(ibv_post_send(q.qp, wr, &bad), 0);
    }
    fill_send(wr, &sge, 1, 0x100 + sq);
    bad = NULL;
    VT_EQ(ibv_post_send(q.qp, wr, &bad), ENOMEM);
    VT_CHECK(bad == &wr[0]);
    fill_send(wr, &sge, 2, 0x200);
    bad = NULL;
    VT_EQ(ibv_post_send(q.qp, wr, &bad), ENOMEM);
    VT_CHECK(bad == &wr[0]);

    vt_ctx = "receive queue";
    struct ibv_recv_wr rwr, *rbad;
    for (uint32_t i = 0; i <= rq; i++) {
        rwr = (struct ibv_recv_wr){.wr_id = 0x300 + i, .sg_list = &sge, .num_sge = 1};
        rbad = NULL;
        VT_EQ(ibv_post_recv(q.qp, &rwr, &rbad), i < rq ? 0 : ENOMEM);
        if (i == rq)
            VT_CHECK(rbad == &rwr);
    }
    VT_EQ(vt_poll_none(q.scq, 20), 0);
    vt_ctx = "";
    vt_qp_destroy(&q);
    vt_buf_free(&l);
    vt_dev_close(&d);
}

/* ---- ibv_reg_mr access flags ---- */
static const struct {
    const char *name;
    int access;
    int want; /* 0: registered, else errno */
} mr_rows[] = {
    {"REMOTE_WRITE without LOCAL_WRITE", IBV_ACCESS_REMOTE_WRITE, EINVAL},
    {"REMOTE_ATOMIC without LOCAL_WRITE", IBV_ACCESS_REMOTE_ATOMIC, EINVAL},
    {"REMOTE_WRITE|REMOTE_READ", IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ, EINVAL},
    {"local read only", 0, 0},
    {"REMOTE_READ", IBV_ACCESS_REMOTE_READ, 0},
    {"LOCAL_WRITE|REMOTE_WRITE", IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE, 0},
    {"all", VT_ACCESS_ALL, 0},
    /* an optional-range bit: a hint the library may ignore, never a failure */
    {"all|RELAXED_ORDERING", VT_ACCESS_ALL | IBV_ACCESS_RELAXED_ORDERING, 0},
};

static void case_reg_mr(int fd, const void *arg)
{
    (void)fd, (void)arg;
    struct vt_dev d;
    vt_dev_open(&d);
    static uint8_t mem[8192];
    for (size_t i = 0; i < sizeof(mr_rows) / sizeof(mr_rows[0]); i++) {
        vt_ctx = mr_rows[i].name;
        errno = 0;
        struct ibv_mr *mr = ibv_reg_mr(d.pd, mem + 100, 5000, mr_rows[i].access);
        if (mr_rows[i].want) {
            VT_CHECKF(!mr && errno == mr_rows[i].want, "mr %p errno %d (%s), want NULL and %s",
                      (void *)mr, errno, strerror(errno), strerror(mr_rows[i].want));
        } else if (VT_CHECKF(mr, "errno %d (%s)", errno, strerror(errno))) {
            VT_CHECK(mr->addr == mem + 100);
            VT_EQ(mr->length, 5000);
            VT_CHECK(mr->pd == d.pd && mr->context == d.ctx);
        }
        if (mr)
            VT_EQ(ibv_dereg_mr(mr), 0);
    }
    vt_ctx = "";
    vt_dev_close(&d);
}

/* Relaxed ordering is accepted, and the MR works for real transfers. */
static void case_relaxed_ordering(int fd, const void *arg)
{
    (void)arg;
    struct vt_dev d;
    struct vt_remote_mr r;
    vt_dev_open(&d);
    vt_agent_hello(fd, &r);
    void *p = NULL;
    VT_REQUIRE(posix_memalign(&p, 4096, 8192) == 0);
    struct ibv_mr *mr = ibv_reg_mr(d.pd, p, 8192, VT_ACCESS_ALL | IBV_ACCESS_RELAXED_ORDERING);
    VT_REQUIRE(mr);
    struct vt_qp q;
    struct vt_qp_caps caps;
    vt_caps_default(&caps);
    vt_qp_create(&d, &q, &caps, NULL, NULL, NULL);
    vt_agent_pair(fd, &d, &q, 0, NULL, NULL, NULL, NULL);

    vt_pat_fill(p, 4096, 0x31, 0);
    struct ibv_sge sge = {.addr = (uintptr_t)p, .length = 4096, .lkey = mr->lkey};
    struct ibv_send_wr wr = {.wr_id = 1,
                             .sg_list = &sge,
                             .num_sge = 1,
                             .opcode = IBV_WR_RDMA_WRITE,
                             .send_flags = IBV_SEND_SIGNALED},
                       *bad = NULL;
    wr.wr.rdma.remote_addr = r.addr;
    wr.wr.rdma.rkey = r.rkey;
    VT_EQ(ibv_post_send(q.qp, &wr, &bad), 0);
    vt_expect_wc(q.scq, 1, IBV_WC_SUCCESS, NULL);
    VT_CHECK(vt_agent_diff(fd, 0, 0, 4096, 0x31, 0) < 0);

    vt_agent_fill(fd, 0, 4096, 4096, 0x32, 0);
    sge.addr = (uintptr_t)p + 4096;
    wr.wr_id = 2;
    wr.opcode = IBV_WR_RDMA_READ;
    wr.wr.rdma.remote_addr = r.addr + 4096;
    VT_EQ(ibv_post_send(q.qp, &wr, &bad), 0);
    vt_expect_wc(q.scq, 2, IBV_WC_SUCCESS, NULL);
    VT_CHECK(vt_pat_diff((uint8_t *)p + 4096, 4096, 0x32, 0) < 0);

    /* on-demand paging is not optional: without it the registration fails */
    struct ibv_device_attr_ex ax;
    memset(&ax, 0, sizeof(ax));
    VT_EQ(ibv_query_device_ex(d.ctx, NULL, &ax), 0);
    if (!(ax.odp_caps.general_caps & IBV_ODP_SUPPORT)) {
        errno = 0;
        struct ibv_mr *odp =
            ibv_reg_mr(d.pd, p, 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_ON_DEMAND);
        VT_CHECKF(!odp && (errno == EOPNOTSUPP || errno == EINVAL),
                  "ON_DEMAND without ODP support: mr %p errno %d", (void *)odp, errno);
        if (odp)
            ibv_dereg_mr(odp);
    }
    vt_qp_destroy(&q);
    VT_EQ(ibv_dereg_mr(mr), 0);
    free(p);
    vt_dev_close(&d);
}

/* ---- ibv_create_cq / ibv_resize_cq ---- */
static void case_create_cq(int fd, const void *arg)
{
    (void)fd, (void)arg;
    struct vt_dev d;
    vt_dev_open(&d);
    const struct {
        const char *name;
        int cqe, vector;
    } rows[] = {
        {"cqe 0", 0, 0},
        {"cqe -1", -1, 0},
        {"cqe above max_cqe", d.attr.max_cqe + 1, 0},
        {"comp_vector = num_comp_vectors", 4, d.ctx->num_comp_vectors},
        {"comp_vector -1", 4, -1},
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        vt_ctx = rows[i].name;
        errno = 0;
        struct ibv_cq *cq = ibv_create_cq(d.ctx, rows[i].cqe, NULL, NULL, rows[i].vector);
        VT_CHECKF(!cq && errno == EINVAL, "cq %p errno %d (%s), want NULL and EINVAL", (void *)cq,
                  errno, strerror(errno));
        if (cq)
            ibv_destroy_cq(cq);
    }
    vt_ctx = "cqe 1, resize";
    struct ibv_cq *cq = ibv_create_cq(d.ctx, 1, NULL, NULL, 0);
    if (VT_CHECK(cq)) {
        VT_CHECK(cq->cqe >= 1);
        VT_EQ(ibv_resize_cq(cq, 0), EINVAL);
        VT_CHECK(cq->cqe >= 1);
        VT_EQ(ibv_resize_cq(cq, 64), 0);
        VT_CHECK(cq->cqe >= 64);
        VT_EQ(ibv_destroy_cq(cq), 0);
    }
    vt_ctx = "";
    vt_dev_close(&d);
}

/* ---- GID, port and P_Key queries out of range ---- */
static void case_query(int fd, const void *arg)
{
    (void)fd, (void)arg;
    struct vt_dev d;
    vt_dev_open(&d);
    union ibv_gid gid;
    VT_EQ(ibv_query_gid(d.ctx, 1, 0, &gid), 0);
    /* RoCE v2 over IPv4 loopback: ::ffff:127.x.y.z */
    static const uint8_t v4[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    VT_CHECK(memcmp(gid.raw, v4, 12) == 0 && gid.raw[12] == 127);
    VT_EQ(ibv_query_gid(d.ctx, 1, d.port.gid_tbl_len, &gid), -1);
    VT_EQ(ibv_query_gid(d.ctx, 1, -1, &gid), -1);
    VT_EQ(ibv_query_gid(d.ctx, 2, 0, &gid), -1);
    struct ibv_port_attr pa;
    VT_CHECK(ibv_query_port(d.ctx, 2, &pa) != 0);
    __be16 pkey;
    VT_EQ(ibv_query_pkey(d.ctx, 1, 0, &pkey), 0);
    VT_CHECK(ibv_query_pkey(d.ctx, 1, d.port.pkey_tbl_len, &pkey) != 0);
    vt_dev_close(&d);
}

/* ---- what softrdma does not implement ---- */
static void unsup_null(const void *p, const char *what)
{
    int e = errno;
    VT_CHECKF(!p && e == EOPNOTSUPP, "%s: %p, errno %d (%s); want NULL and EOPNOTSUPP", what, p, e,
              strerror(e));
}

static void unsup_ret(int r, const char *what)
{
    VT_CHECKF(r == EOPNOTSUPP, "%s: returned %d (%s); want EOPNOTSUPP", what, r, strerror(r));
}

static void case_unsupported(int fd, const void *arg)
{
    (void)fd, (void)arg;
    struct vt_dev d;
    vt_dev_open(&d);
    struct vt_qp q;
    struct vt_qp_caps caps;
    vt_caps_default(&caps);
    vt_qp_create(&d, &q, &caps, NULL, NULL, NULL);
    static uint8_t mem[4096];
    struct ibv_mr *mr = ibv_reg_mr(d.pd, mem, sizeof(mem), IBV_ACCESS_LOCAL_WRITE);
    VT_REQUIRE(mr);

    /* XRC and the extended CQ: softrdma may grow them; then they must work */
    errno = 0;
    struct ibv_xrcd_init_attr xa = {.comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS,
                                    .fd = -1,
                                    .oflags = O_CREAT};
    struct ibv_xrcd *xrcd = ibv_open_xrcd(d.ctx, &xa);
    if (xrcd) {
        vt_note("ibv_open_xrcd is supported: checking it closes");
        VT_EQ(ibv_close_xrcd(xrcd), 0);
    } else {
        unsup_null(xrcd, "ibv_open_xrcd");
        errno = 0;
        struct ibv_qp_open_attr oa = {.comp_mask = IBV_QP_OPEN_ATTR_NUM | IBV_QP_OPEN_ATTR_TYPE,
                                      .qp_num = q.qp->qp_num,
                                      .qp_type = IBV_QPT_XRC_RECV};
        unsup_null(ibv_open_qp(d.ctx, &oa), "ibv_open_qp");
    }
    errno = 0;
    struct ibv_cq_init_attr_ex cax = {.cqe = 16, .wc_flags = IBV_WC_EX_WITH_BYTE_LEN};
    struct ibv_cq_ex *cqx = ibv_create_cq_ex(d.ctx, &cax);
    if (cqx) {
        vt_note("ibv_create_cq_ex is supported: checking it destroys");
        VT_EQ(ibv_destroy_cq(ibv_cq_ex_to_cq(cqx)), 0);
    } else {
        unsup_null(cqx, "ibv_create_cq_ex");
    }

    /* memory windows are supported (tests/verbs/mw_test.c) */
    struct ibv_mw *mw = ibv_alloc_mw(d.pd, IBV_MW_TYPE_1);
    VT_CHECK(mw != NULL);
    if (mw)
        VT_EQ(ibv_dealloc_mw(mw), 0);
    errno = 0;
    struct ibv_flow_attr fa = {.type = IBV_FLOW_ATTR_NORMAL, .size = sizeof(fa), .port = 1};
    unsup_null(ibv_create_flow(q.qp, &fa), "ibv_create_flow");
    errno = 0;
    struct ibv_wq_init_attr wa = {
        .wq_type = IBV_WQT_RQ, .max_wr = 4, .max_sge = 1, .pd = d.pd, .cq = q.rcq};
    unsup_null(ibv_create_wq(d.ctx, &wa), "ibv_create_wq");
    errno = 0;
    struct ibv_rwq_ind_table_init_attr ria = {.log_ind_tbl_size = 0};
    unsup_null(ibv_create_rwq_ind_table(d.ctx, &ria), "ibv_create_rwq_ind_table");
    /* thread and parent domains are supported (tests/verbs/domains_test.c) */
    struct ibv_td_init_attr ta = {0};
    struct ibv_td *td = ibv_alloc_td(d.ctx, &ta);
    if (VT_CHECK(td))
        VT_EQ(ibv_dealloc_td(td), 0);
    struct ibv_parent_domain_init_attr pda = {.pd = d.pd};
    struct ibv_pd *pdom = ibv_alloc_parent_domain(d.ctx, &pda);
    if (VT_CHECK(pdom))
        VT_EQ(ibv_dealloc_pd(pdom), 0);
    errno = 0;
    struct ibv_counters_init_attr cia = {0};
    unsup_null(ibv_create_counters(d.ctx, &cia), "ibv_create_counters");
    errno = 0;
    unsup_null(ibv_alloc_null_mr(d.pd), "ibv_alloc_null_mr");
    errno = 0;
    unsup_null(ibv_reg_dmabuf_mr(d.pd, 0, 4096, 0, -1, IBV_ACCESS_LOCAL_WRITE),
               "ibv_reg_dmabuf_mr");
    errno = 0;
    /* a descriptor that is no context's cmd_fd (another process's, say) */
    int nfd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    unsup_null(ibv_import_device(nfd), "ibv_import_device");
    close(nfd);
    errno = 0;
    struct ibv_qp_init_attr raw = {
        .send_cq = q.scq,
        .recv_cq = q.rcq,
        .cap = {.max_send_wr = 1, .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1},
        .qp_type = IBV_QPT_RAW_PACKET};
    unsup_null(ibv_create_qp(d.pd, &raw), "ibv_create_qp(IBV_QPT_RAW_PACKET)");

    /* the device clock is readable (tests/verbs/domains_test.c); nothing else */
    struct ibv_values_ex v = {.comp_mask = IBV_VALUES_MASK_RAW_CLOCK | IBV_VALUES_MASK_RESERVED};
    VT_EQ(ibv_query_rt_values_ex(d.ctx, &v), EINVAL);
    struct ibv_qp_rate_limit_attr rl = {.rate_limit = 1000};
    unsup_ret(ibv_modify_qp_rate_limit(q.qp, &rl), "ibv_modify_qp_rate_limit");
    struct ibv_modify_cq_attr mca = {.attr_mask = IBV_CQ_ATTR_MODERATE,
                                     .moderate = {.cq_count = 1, .cq_period = 1}};
    unsup_ret(ibv_modify_cq(q.scq, &mca), "ibv_modify_cq");
    struct ibv_ece ece;
    memset(&ece, 0, sizeof(ece));
    unsup_ret(ibv_query_ece(q.qp, &ece), "ibv_query_ece");
    unsup_ret(ibv_set_ece(q.qp, &ece), "ibv_set_ece");
    /* multicast is for UD: an RC QP can never join */
    union ibv_gid mgid = {.raw = {0xff, 0x0e}};
    VT_CHECK(ibv_attach_mcast(q.qp, &mgid, 0) != 0);

    /* the device is unharmed */
    struct ibv_cq *cq = ibv_create_cq(d.ctx, 4, NULL, NULL, 0);
    if (VT_CHECK(cq))
        VT_EQ(ibv_destroy_cq(cq), 0);
    VT_EQ(ibv_dereg_mr(mr), 0);
    vt_qp_destroy(&q);
    vt_dev_close(&d);
}

static const struct vt_case cases[] = {
    {"modify_qp", case_modify_qp, NULL, NULL},
    {"post_state", case_post_state, NULL, NULL},
    {"post_limits", case_post_limits, NULL, NULL},
    {"wr_batch", case_wr_batch, NULL, NULL},
    {"queue_full", case_queue_full, NULL, NULL},
    {"reg_mr", case_reg_mr, NULL, NULL},
    {"relaxed_ordering", case_relaxed_ordering, NULL, NULL},
    {"create_cq", case_create_cq, NULL, NULL},
    {"query", case_query, NULL, NULL},
    {"unsupported", case_unsupported, NULL, NULL},
};

int main(int argc, char **argv)
{
    /* a port MTU below 4096, so that "path_mtu above the port's" exists;
     * read once by the library when the device list is first built */
    setenv("SOFTRDMA_MTU", "1024", 1);
    return vt_main(argc, argv, cases, sizeof(cases) / sizeof(cases[0]));
}

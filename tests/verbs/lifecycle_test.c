/* lifecycle_test.c: tearing down with work outstanding, and the EBUSY
 * answers for objects still in use. Destroying must neither crash nor hang
 * nor leave completions behind for the destroyed QP; moving a QP to ERR
 * flushes everything it holds, in order; a QP reset to RESET can be used
 * again. The peer is the vt agent. */
#include "vt.h"

#include <errno.h>
#include <string.h>

enum { NWR = 8, MIB = 1 << 20 };

static void post_sends(struct vt_qp *q, struct vt_buf *l, uint64_t base, int n, bool alt_unsig)
{
    struct ibv_sge sge = {.addr = (uintptr_t)l->p, .length = 64, .lkey = l->mr->lkey};
    for (int i = 0; i < n; i++) {
        struct ibv_send_wr wr, *bad = NULL;
        memset(&wr, 0, sizeof(wr));
        wr.wr_id = base + (uint64_t)i;
        wr.sg_list = &sge;
        wr.num_sge = 1;
        wr.opcode = IBV_WR_SEND;
        /* error completions are generated whether a WR was signaled or not */
        wr.send_flags = alt_unsig && (i & 1) ? 0 : IBV_SEND_SIGNALED;
        VT_EQ(ibv_post_send(q->qp, &wr, &bad), 0);
    }
}

static void post_recvs(struct vt_qp *q, struct vt_buf *l, uint64_t base, int n)
{
    for (int i = 0; i < n; i++) {
        struct ibv_sge sge = {
            .addr = (uintptr_t)(l->p + 4096 + 256 * i), .length = 256, .lkey = l->mr->lkey};
        struct ibv_recv_wr wr = {.wr_id = base + (uint64_t)i, .sg_list = &sge, .num_sge = 1},
                           *bad = NULL;
        VT_EQ(ibv_post_recv(q->qp, &wr, &bad), 0);
    }
}

/* A QP whose peer QP was destroyed: what it sends is never acknowledged.
 * The long transport timeout keeps its work outstanding for the test. */
static void silent_pair(int fd, struct vt_dev *d, struct vt_qp *q, uint32_t slot)
{
    struct vt_qp_caps caps;
    vt_caps_default(&caps);
    vt_qp_create(d, q, &caps, NULL, NULL, NULL);
    struct vt_conn c;
    vt_conn_default(d, &c);
    c.timeout = 20; /* 4.3 s */
    vt_agent_pair(fd, d, q, slot, NULL, &c, NULL, NULL);
    vt_agent_qp_destroy(fd, slot);
}

/* One signaled RDMA WRITE of sge to raddr; the ibv_post_send result. */
static int post_write(struct vt_qp *q, struct ibv_sge *sge, uint64_t wr_id, unsigned int flags,
                      uint64_t raddr, uint32_t rkey)
{
    struct ibv_send_wr wr, *bad = NULL;
    memset(&wr, 0, sizeof(wr));
    wr.wr_id = wr_id;
    wr.sg_list = sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_RDMA_WRITE;
    wr.send_flags = IBV_SEND_SIGNALED | flags;
    wr.wr.rdma.remote_addr = raddr;
    wr.wr.rdma.rkey = rkey;
    return ibv_post_send(q->qp, &wr, &bad);
}

static void write_ok(struct vt_qp *q, struct vt_buf *l, const struct vt_remote_mr *r,
                     uint64_t wr_id)
{
    struct ibv_sge sge = {.addr = (uintptr_t)l->p, .length = 4096, .lkey = l->mr->lkey};
    if (VT_EQ(post_write(q, &sge, wr_id, 0, r->addr, r->rkey), 0))
        vt_expect_wc(q->scq, wr_id, IBV_WC_SUCCESS, NULL);
}

static void case_destroy_outstanding(int fd, const void *arg)
{
    (void)arg;
    struct vt_dev d;
    struct vt_buf l;
    struct vt_remote_mr r;
    vt_dev_open(&d);
    vt_buf_alloc(&d, &l, 2 * MIB, VT_ACCESS_ALL);
    vt_agent_hello(fd, &r);

    /* A: posted receives and unacknowledged sends */
    vt_ctx = "unacked";
    struct vt_qp a;
    silent_pair(fd, &d, &a, 0);
    post_recvs(&a, &l, 0x100, NWR);
    post_sends(&a, &l, 0x200, NWR, false);
    VT_EQ(vt_poll_none(a.scq, 50), 0); /* still outstanding */
    struct ibv_cq *ascq = a.scq, *arcq = a.rcq;
    uint64_t t0 = vt_now_ms();
    VT_EQ(ibv_destroy_qp(a.qp), 0);
    VT_CHECKF(vt_now_ms() - t0 < 2000, "ibv_destroy_qp took %llu ms",
              (unsigned long long)(vt_now_ms() - t0));
    /* the destroyed QP's work leaves no completions behind */
    VT_EQ(vt_poll_none(ascq, 50), 0);
    VT_EQ(vt_poll_none(arcq, 10), 0);
    VT_EQ(ibv_destroy_cq(ascq), 0);
    VT_EQ(ibv_destroy_cq(arcq), 0);

    /* B: destroyed in the middle of megabyte WRITEs to a live peer */
    vt_ctx = "in flight";
    struct vt_qp b;
    struct vt_qp_caps caps;
    vt_caps_default(&caps);
    vt_qp_create(&d, &b, &caps, NULL, NULL, NULL);
    vt_agent_pair(fd, &d, &b, 1, NULL, NULL, NULL, NULL);
    struct ibv_sge sge = {.addr = (uintptr_t)l.p, .length = MIB, .lkey = l.mr->lkey};
    for (int i = 0; i < 4; i++)
        VT_EQ(post_write(&b, &sge, 0x300 + (uint64_t)i, 0, r.addr, r.rkey), 0);
    post_recvs(&b, &l, 0x400, NWR);
    t0 = vt_now_ms();
    vt_qp_destroy(&b); /* QP, then its CQs */
    VT_CHECKF(vt_now_ms() - t0 < 2000, "teardown took %llu ms",
              (unsigned long long)(vt_now_ms() - t0));

    /* the device, and the peer, still work */
    vt_ctx = "after";
    struct vt_qp c;
    vt_qp_create(&d, &c, &caps, NULL, NULL, NULL);
    vt_agent_pair(fd, &d, &c, 2, NULL, NULL, NULL, NULL);
    write_ok(&c, &l, &r, 0x500);
    vt_qp_destroy(&c);

    t0 = vt_now_ms();
    vt_buf_free(&l);
    vt_dev_close(&d);
    VT_CHECKF(vt_now_ms() - t0 < 2000, "closing took %llu ms",
              (unsigned long long)(vt_now_ms() - t0));
    vt_ctx = "";
}

/* Modify to ERR: every outstanding WR completes with WR_FLUSH_ERR, in
 * posting order, signaled or not; then RESET makes the QP new. */
static void case_flush_and_reuse(int fd, const void *arg)
{
    (void)arg;
    struct vt_dev d;
    struct vt_buf l;
    struct vt_remote_mr r;
    vt_dev_open(&d);
    vt_buf_alloc(&d, &l, 64 << 10, VT_ACCESS_ALL);
    vt_agent_hello(fd, &r);
    struct vt_qp q;
    silent_pair(fd, &d, &q, 0);
    post_recvs(&q, &l, 0x100, 4);
    post_sends(&q, &l, 0x200, 6, true);
    VT_EQ(vt_poll_none(q.scq, 20), 0);

    struct ibv_qp_attr a = {.qp_state = IBV_QPS_ERR};
    VT_EQ(ibv_modify_qp(q.qp, &a, IBV_QP_STATE), 0);
    VT_EQ(vt_qp_state(q.qp), IBV_QPS_ERR);
    struct ibv_wc wc[6];
    if (VT_EQ(vt_poll(q.scq, 6, wc, VT_POLL_MS), 6))
        for (int i = 0; i < 6; i++) {
            VT_EQX(wc[i].wr_id, 0x200 + (uint64_t)i);
            VT_EQ(wc[i].status, IBV_WC_WR_FLUSH_ERR);
            VT_EQ(wc[i].qp_num, q.qp->qp_num);
        }
    if (VT_EQ(vt_poll(q.rcq, 4, wc, VT_POLL_MS), 4))
        for (int i = 0; i < 4; i++) {
            VT_EQX(wc[i].wr_id, 0x100 + (uint64_t)i);
            VT_EQ(wc[i].status, IBV_WC_WR_FLUSH_ERR);
            VT_EQ(wc[i].qp_num, q.qp->qp_num);
        }
    VT_EQ(vt_poll_none(q.scq, 20), 0);
    VT_EQ(vt_poll_none(q.rcq, 1), 0);

    /* RESET, then a new connection on the same QP */
    a.qp_state = IBV_QPS_RESET;
    VT_EQ(ibv_modify_qp(q.qp, &a, IBV_QP_STATE), 0);
    VT_EQ(vt_qp_state(q.qp), IBV_QPS_RESET);
    struct vt_qp_info li, ri;
    vt_agent_qp_create(fd, 1, NULL, &ri);
    q.psn = (q.psn + 0x1000) & 0xffffff;
    vt_qp_info(&d, &q, &li);
    VT_REQUIRE(vt_agent_qp_connect(fd, 1, &li, NULL) == 0);
    struct vt_conn c;
    vt_conn_default(&d, &c);
    VT_EQ(vt_qp_connect(&q, &ri, &c), 0);
    write_ok(&q, &l, &r, 0x600);
    VT_EQ(vt_poll_none(q.rcq, 1), 0);

    vt_qp_destroy(&q);
    vt_buf_free(&l);
    vt_dev_close(&d);
}

/* ibv_query_qp reports what ibv_create_qp and ibv_modify_qp set. */
static void case_query_qp(int fd, const void *arg)
{
    (void)arg;
    struct vt_dev d;
    vt_dev_open(&d);
    struct vt_qp q;
    struct vt_qp_caps caps;
    vt_caps_default(&caps);
    caps.max_send_wr = 33;
    caps.max_recv_wr = 17;
    caps.max_send_sge = 3;
    caps.max_recv_sge = 5;
    caps.max_inline = 100;
    caps.sq_sig_all = 1;
    vt_qp_create(&d, &q, &caps, NULL, NULL, NULL);
    struct ibv_qp_attr a;
    struct ibv_qp_init_attr ia;
    memset(&a, 0, sizeof(a));
    VT_EQ(ibv_query_qp(q.qp, &a, IBV_QP_STATE | IBV_QP_CAP, &ia), 0);
    VT_EQ(a.qp_state, IBV_QPS_RESET);
    VT_EQ(q.qp->state, IBV_QPS_RESET);
    VT_CHECK(ia.send_cq == q.scq && ia.recv_cq == q.rcq && !ia.srq);
    VT_EQ(ia.qp_type, IBV_QPT_RC);
    VT_EQ(ia.sq_sig_all, 1);
    VT_CHECKF(ia.cap.max_send_wr >= 33 && ia.cap.max_recv_wr >= 17 && ia.cap.max_send_sge >= 3 &&
                  ia.cap.max_recv_sge >= 5 && ia.cap.max_inline_data >= 100,
              "cap %u %u %u %u %u", ia.cap.max_send_wr, ia.cap.max_recv_wr, ia.cap.max_send_sge,
              ia.cap.max_recv_sge, ia.cap.max_inline_data);

    struct vt_qp_info ri;
    vt_agent_qp_create(fd, 0, NULL, &ri);
    struct vt_conn c;
    vt_conn_default(&d, &c);
    c.access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ;
    c.mtu = IBV_MTU_1024;
    c.timeout = 17;
    c.retry_cnt = 5;
    c.rnr_retry = 3;
    c.min_rnr_timer = 12;
    c.max_rd_atomic = 1;
    q.psn = 0x123456;
    VT_EQ(vt_qp_connect(&q, &ri, &c), 0);
    memset(&a, 0, sizeof(a));
    int all = IBV_QP_STATE | IBV_QP_ACCESS_FLAGS | IBV_QP_PORT | IBV_QP_AV | IBV_QP_PATH_MTU |
              IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_RQ_PSN |
              IBV_QP_MAX_QP_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER | IBV_QP_SQ_PSN |
              IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_DEST_QPN | IBV_QP_CAP;
    VT_EQ(ibv_query_qp(q.qp, &a, all, &ia), 0);
    VT_EQ(a.qp_state, IBV_QPS_RTS);
    VT_EQ(q.qp->state, IBV_QPS_RTS);
    VT_EQ(a.qp_access_flags, c.access);
    VT_EQ(a.port_num, 1);
    VT_EQ(a.path_mtu, IBV_MTU_1024);
    VT_EQ(a.timeout, 17);
    VT_EQ(a.retry_cnt, 5);
    VT_EQ(a.rnr_retry, 3);
    VT_EQ(a.min_rnr_timer, 12);
    VT_EQ(a.max_rd_atomic, 1);
    VT_EQ(a.max_dest_rd_atomic, 1);
    VT_EQX(a.sq_psn, 0x123456);
    VT_EQX(a.rq_psn, ri.psn);
    VT_EQX(a.dest_qp_num, ri.qpn);
    VT_EQ(a.ah_attr.is_global, 1);
    VT_CHECK(memcmp(a.ah_attr.grh.dgid.raw, ri.gid, 16) == 0);
    VT_EQ(ia.sq_sig_all, 1);
    vt_qp_destroy(&q);
    vt_dev_close(&d);
}

/* Objects in use answer EBUSY and stay usable. */
static void case_busy(int fd, const void *arg)
{
    (void)fd, (void)arg;
    struct vt_dev d;
    vt_dev_open(&d);
    struct ibv_pd *pd = ibv_alloc_pd(d.ctx);
    VT_REQUIRE(pd);
    static uint8_t mem[4096];
    struct ibv_mr *mr = ibv_reg_mr(pd, mem, sizeof(mem), IBV_ACCESS_LOCAL_WRITE);
    VT_REQUIRE(mr);
    VT_EQ(ibv_dealloc_pd(pd), EBUSY); /* MR on it */

    struct ibv_cq *cq = ibv_create_cq(d.ctx, 16, NULL, NULL, 0);
    VT_REQUIRE(cq);
    struct ibv_qp_init_attr qa = {
        .send_cq = cq,
        .recv_cq = cq,
        .cap = {.max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1},
        .qp_type = IBV_QPT_RC};
    struct ibv_qp *qp = ibv_create_qp(pd, &qa);
    VT_REQUIRE(qp);
    VT_EQ(ibv_destroy_cq(cq), EBUSY); /* QP attached */
    struct ibv_wc wc;
    VT_EQ(ibv_poll_cq(cq, 1, &wc), 0); /* still a CQ */

    struct ibv_srq_init_attr sa = {.attr = {.max_wr = 4, .max_sge = 1}};
    struct ibv_srq *srq = ibv_create_srq(pd, &sa);
    VT_REQUIRE(srq);
    qa.srq = srq;
    struct ibv_qp *sqp = ibv_create_qp(pd, &qa);
    VT_REQUIRE(sqp);
    VT_EQ(ibv_destroy_srq(srq), EBUSY); /* QP attached */

    struct ibv_comp_channel *ch = ibv_create_comp_channel(d.ctx);
    VT_REQUIRE(ch);
    struct ibv_cq *ccq = ibv_create_cq(d.ctx, 4, NULL, ch, 0);
    VT_REQUIRE(ccq);
    VT_EQ(ibv_destroy_comp_channel(ch), EBUSY); /* CQ attached */

    /* in dependency order everything goes */
    VT_EQ(ibv_destroy_qp(qp), 0);
    VT_EQ(ibv_destroy_cq(cq), EBUSY); /* the SRQ QP still uses it */
    VT_EQ(ibv_dealloc_pd(pd), EBUSY);
    VT_EQ(ibv_destroy_qp(sqp), 0);
    VT_EQ(ibv_destroy_srq(srq), 0);
    VT_EQ(ibv_destroy_cq(cq), 0);
    VT_EQ(ibv_dealloc_pd(pd), EBUSY); /* the MR remains */
    VT_EQ(ibv_dereg_mr(mr), 0);
    VT_EQ(ibv_dealloc_pd(pd), 0);
    VT_EQ(ibv_destroy_cq(ccq), 0);
    VT_EQ(ibv_destroy_comp_channel(ch), 0);
    vt_dev_close(&d);
}

/* Posts behind an unanswered one (doorbell batching holds their packets
 * until the answer's progress pass): they still reach the peer while the
 * application makes no verbs call at all, inline data is the data at post
 * time, and a QP destroyed with such posts pending is torn down cleanly
 * (no use of its freed send queue: the ASan build checks). */
static void case_batched_doorbell(int fd, const void *arg)
{
    (void)arg;
    enum { SMALL = 32, N = 8 };
    struct vt_dev d;
    struct vt_buf l;
    struct vt_remote_mr r;
    vt_dev_open(&d);
    vt_buf_alloc(&d, &l, 2 * MIB, VT_ACCESS_ALL);
    vt_agent_hello(fd, &r);
    struct vt_qp_caps caps;
    vt_caps_default(&caps);
    caps.max_inline = SMALL;

    for (int round = 0; round < 2; round++) {
        vt_ctx = round == 0 ? "no verbs calls" : "destroyed";
        struct vt_qp q;
        vt_qp_create(&d, &q, &caps, NULL, NULL, NULL);
        vt_agent_pair(fd, &d, &q, (uint32_t)round, NULL, NULL, NULL, NULL);
        uint32_t seed = 0x60 + (uint32_t)round * 16;
        vt_pat_fill(l.p, MIB, seed, 0);
        vt_agent_fill(fd, 0, 0, MIB + N * SMALL, 0x5a, 0);
        /* one megabyte WRITE, unanswered when the small ones are posted */
        struct ibv_sge big = {.addr = (uintptr_t)l.p, .length = MIB, .lkey = l.mr->lkey};
        VT_EQ(post_write(&q, &big, 0x700, 0, r.addr, r.rkey), 0);
        /* small inline WRITEs from a buffer overwritten right after each post */
        uint8_t src[SMALL];
        for (int i = 0; i < N; i++) {
            vt_pat_fill(src, SMALL, seed + 1, (uint64_t)i * SMALL);
            struct ibv_sge sge = {.addr = (uintptr_t)src, .length = SMALL};
            VT_EQ(post_write(&q, &sge, 0x701 + (uint64_t)i, IBV_SEND_INLINE,
                             r.addr + MIB + (uint64_t)i * SMALL, r.rkey),
                  0);
            memset(src, 0xee, sizeof(src));
        }
        if (round == 1) {
            uint64_t t0 = vt_now_ms();
            VT_EQ(ibv_destroy_qp(q.qp), 0);
            VT_CHECKF(vt_now_ms() - t0 < 2000, "ibv_destroy_qp took %llu ms",
                      (unsigned long long)(vt_now_ms() - t0));
            VT_EQ(ibv_destroy_cq(q.scq), 0);
            VT_EQ(ibv_destroy_cq(q.rcq), 0);
            break;
        }
        /* no verbs call here: the NIC thread answers and sends */
        long long diff = -2;
        for (uint64_t t0 = vt_now_ms(); vt_now_ms() - t0 < 5000;) {
            diff = vt_agent_diff(fd, 0, MIB, N * SMALL, seed + 1, 0);
            if (diff < 0)
                break;
            vt_sleep_ms(20);
        }
        VT_EQ(diff, -1);
        VT_EQ(vt_agent_diff(fd, 0, 0, MIB, seed, 0), -1);
        struct ibv_wc wc[N + 1];
        VT_EQ(vt_poll(q.scq, N + 1, wc, VT_POLL_MS), N + 1);
        for (int i = 0; i < N + 1; i++) {
            VT_EQ(wc[i].status, IBV_WC_SUCCESS);
            VT_EQX(wc[i].wr_id, 0x700 + (uint64_t)i); /* in posting order */
        }
        vt_qp_destroy(&q);
    }
    /* the device still works */
    vt_ctx = "after";
    struct vt_qp c;
    vt_qp_create(&d, &c, &caps, NULL, NULL, NULL);
    vt_agent_pair(fd, &d, &c, 2, NULL, NULL, NULL, NULL);
    write_ok(&c, &l, &r, 0x800);
    vt_qp_destroy(&c);
    vt_buf_free(&l);
    vt_dev_close(&d);
    vt_ctx = "";
}

static const struct vt_case cases[] = {
    {"destroy_outstanding", case_destroy_outstanding, NULL, NULL},
    {"flush_and_reuse", case_flush_and_reuse, NULL, NULL},
    {"query_qp", case_query_qp, NULL, NULL},
    {"busy", case_busy, NULL, NULL},
    {"batched_doorbell", case_batched_doorbell, NULL, NULL},
};

int main(int argc, char **argv)
{
    return vt_main(argc, argv, cases, sizeof(cases) / sizeof(cases[0]));
}

/* mw_test.c: memory windows through the verbs API, two processes. The
 * child (the target) registers a buffer with local rights and
 * IBV_ACCESS_MW_BIND only, opens a window onto part of it and hands the
 * window's R_Key to the parent, which reads and writes through it over
 * RoCEv2; then the window is closed (SEND with Invalidate, LOCAL_INV,
 * ibv_dealloc_mw) and the same key must fail with IBV_WC_REM_ACCESS_ERR,
 * the child's memory untouched. */
#include "vt.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

enum {
    BUF_LEN = 1 << 20,
    WIN_OFF = 64 << 10,
    WIN_LEN = 256 << 10,
    RIGHTS = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC,
};

enum how {
    H_TYPE1,      /* ibv_bind_mw; closed by ibv_dealloc_mw */
    H_TYPE2_INV,  /* IBV_WR_BIND_MW by ibv_post_send; closed by the parent's SEND_WITH_INV */
    H_TYPE2_WRAPI /* ibv_wr_bind_mw; closed by ibv_wr_local_inv */
};

struct side {
    struct vt_dev d;
    struct vt_buf b;
    struct vt_qp q;
};

struct win {
    uint64_t addr;
    uint32_t rkey;
};

static void side_open(int fd, struct side *s, bool parent, int access, bool qp_ex)
{
    vt_dev_open(&s->d);
    vt_buf_alloc(&s->d, &s->b, BUF_LEN, access);
    struct vt_qp_caps caps;
    vt_caps_default(&caps);
    caps.qp_ex = qp_ex;
    vt_qp_create(&s->d, &s->q, &caps, NULL, NULL, NULL);
    struct vt_qp_info li, ri;
    vt_qp_info(&s->d, &s->q, &li);
    if (parent) {
        vt_send(fd, &li, sizeof(li));
        vt_recv(fd, &ri, sizeof(ri), VT_OOB_MS);
    } else {
        vt_recv(fd, &ri, sizeof(ri), VT_OOB_MS);
        vt_send(fd, &li, sizeof(li));
    }
    struct vt_conn c;
    vt_conn_default(&s->d, &c);
    VT_REQUIRE(vt_qp_connect(&s->q, &ri, &c) == 0);
}

static void side_close(struct side *s)
{
    vt_qp_destroy(&s->q);
    vt_buf_free(&s->b);
    vt_dev_close(&s->d);
}

/* Parent: one signaled RDMA op of len bytes between its buffer at loff and
 * the window at roff. */
static bool rdma(struct side *s, enum ibv_wr_opcode op, const struct win *w, uint64_t loff,
                 uint64_t roff, uint32_t len, enum ibv_wc_status want)
{
    static uint64_t id = 100;
    struct ibv_sge sge = {.addr = (uintptr_t)s->b.p + loff, .length = len, .lkey = s->b.mr->lkey};
    struct ibv_send_wr wr = {.wr_id = ++id,
                             .sg_list = &sge,
                             .num_sge = 1,
                             .opcode = op,
                             .send_flags = IBV_SEND_SIGNALED},
                       *bad = NULL;
    wr.wr.rdma.remote_addr = w->addr + roff;
    wr.wr.rdma.rkey = w->rkey;
    VT_EQ(ibv_post_send(s->q.qp, &wr, &bad), 0);
    struct ibv_wc wc;
    return vt_expect_wc(s->q.scq, id, want, &wc);
}

static void parent(int fd, const void *arg)
{
    enum how how = (enum how)(uintptr_t)arg;
    struct side s;
    side_open(fd, &s, true, VT_ACCESS_ALL, false);
    struct win w;
    vt_recv(fd, &w, sizeof(w), VT_OOB_MS);

    /* READ the whole window (the child filled it with stream 1), then
     * WRITE its second half (stream 2) */
    VT_CHECK(rdma(&s, IBV_WR_RDMA_READ, &w, 0, 0, WIN_LEN, IBV_WC_SUCCESS));
    VT_EQ(vt_pat_diff(s.b.p, WIN_LEN, 1, WIN_OFF), -1);
    vt_pat_fill(s.b.p + WIN_LEN, WIN_LEN / 2, 2, 0);
    VT_CHECK(rdma(&s, IBV_WR_RDMA_WRITE, &w, WIN_LEN, WIN_LEN / 2, WIN_LEN / 2, IBV_WC_SUCCESS));
    /* one byte past the window: refused, nothing written (type 1 only:
     * the refusal ends both QPs, which the type 2 cases still need) */
    if (how == H_TYPE1)
        VT_CHECK(rdma(&s, IBV_WR_RDMA_WRITE, &w, 0, WIN_LEN - 63, 64, IBV_WC_REM_ACCESS_ERR));
    vt_sync(fd); /* the child checks its memory, then closes the window */

    if (how == H_TYPE1) {
        /* the QP went to Error with the refused WRITE: a new one */
        vt_qp_destroy(&s.q);
        struct vt_qp_caps caps;
        vt_caps_default(&caps);
        vt_qp_create(&s.d, &s.q, &caps, NULL, NULL, NULL);
        struct vt_qp_info li, ri;
        vt_qp_info(&s.d, &s.q, &li);
        vt_send(fd, &li, sizeof(li));
        vt_recv(fd, &ri, sizeof(ri), VT_OOB_MS);
        struct vt_conn c;
        vt_conn_default(&s.d, &c);
        VT_REQUIRE(vt_qp_connect(&s.q, &ri, &c) == 0);
    }
    if (how == H_TYPE2_INV) {
        vt_pat_fill(s.b.p, 64, 3, 0);
        struct ibv_sge sge = {.addr = (uintptr_t)s.b.p, .length = 64, .lkey = s.b.mr->lkey};
        struct ibv_send_wr wr = {.wr_id = 7,
                                 .sg_list = &sge,
                                 .num_sge = 1,
                                 .opcode = IBV_WR_SEND_WITH_INV,
                                 .send_flags = IBV_SEND_SIGNALED},
                           *bad = NULL;
        wr.invalidate_rkey = w.rkey;
        VT_EQ(ibv_post_send(s.q.qp, &wr, &bad), 0);
        struct ibv_wc wc;
        VT_CHECK(vt_expect_wc(s.q.scq, 7, IBV_WC_SUCCESS, &wc));
        VT_EQ(wc.opcode, IBV_WC_SEND);
    }
    vt_sync(fd); /* the window is closed */
    /* the same key now fails, and writes nothing */
    vt_pat_fill(s.b.p, 4096, 4, 0);
    VT_CHECK(rdma(&s, IBV_WR_RDMA_WRITE, &w, 0, 0, 4096, IBV_WC_REM_ACCESS_ERR));
    vt_sync(fd);
    side_close(&s);
}

static void child(int fd, const void *arg)
{
    enum how how = (enum how)(uintptr_t)arg;
    struct side s;
    side_open(fd, &s, false, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND, how == H_TYPE2_WRAPI);
    VT_CHECK(s.d.attr.device_cap_flags & IBV_DEVICE_MEM_WINDOW);
    VT_CHECK(s.d.attr.device_cap_flags & IBV_DEVICE_MEM_WINDOW_TYPE_2B);
    VT_CHECK(s.d.attr.max_mw > 0);
    errno = 0;
    VT_CHECK(!ibv_alloc_mw(s.d.pd, (enum ibv_mw_type)7) && errno == EINVAL);

    vt_pat_fill(s.b.p + WIN_OFF, WIN_LEN, 1, WIN_OFF);
    struct ibv_mw *mw = ibv_alloc_mw(s.d.pd, how == H_TYPE1 ? IBV_MW_TYPE_1 : IBV_MW_TYPE_2);
    VT_REQUIRE(mw);
    VT_EQ(mw->type, how == H_TYPE1 ? IBV_MW_TYPE_1 : IBV_MW_TYPE_2);
    uint32_t key0 = mw->rkey;
    struct ibv_mw_bind_info info = {.mr = s.b.mr,
                                    .addr = (uintptr_t)s.b.p + WIN_OFF,
                                    .length = WIN_LEN,
                                    .mw_access_flags = RIGHTS};
    uint32_t rkey = ibv_inc_rkey(key0);
    if (how == H_TYPE1) {
        /* type 2 windows are not bound by ibv_bind_mw */
        struct ibv_mw_bind b = {.wr_id = 40, .send_flags = IBV_SEND_SIGNALED, .bind_info = info};
        VT_EQ(ibv_bind_mw(s.q.qp, mw, &b), 0);
        VT_EQX(mw->rkey, rkey);
    } else if (how == H_TYPE2_INV) {
        struct ibv_send_wr wr = {.wr_id = 40,
                                 .opcode = IBV_WR_BIND_MW,
                                 .send_flags = IBV_SEND_SIGNALED},
                           *bad = NULL;
        wr.bind_mw.mw = mw;
        wr.bind_mw.rkey = rkey;
        wr.bind_mw.bind_info = info;
        VT_EQ(ibv_post_send(s.q.qp, &wr, &bad), 0);
    } else {
        ibv_wr_start(s.q.qpx);
        s.q.qpx->wr_id = 40;
        s.q.qpx->wr_flags = IBV_SEND_SIGNALED;
        ibv_wr_bind_mw(s.q.qpx, mw, rkey, &info);
        VT_EQ(ibv_wr_complete(s.q.qpx), 0);
    }
    struct ibv_wc wc;
    VT_CHECK(vt_expect_wc(s.q.scq, 40, IBV_WC_SUCCESS, &wc));
    VT_EQ(wc.opcode, IBV_WC_BIND_MW);
    VT_CHECK(rkey != key0);
    /* as rxe: a region with a bound window is not deregistered */
    VT_EQ(ibv_dereg_mr(s.b.mr), EINVAL);
    if (how == H_TYPE2_INV) {
        struct ibv_sge sge = {.addr = (uintptr_t)s.b.p, .length = 4096, .lkey = s.b.mr->lkey};
        struct ibv_recv_wr rw = {.wr_id = 41, .sg_list = &sge, .num_sge = 1}, *bad = NULL;
        VT_EQ(ibv_post_recv(s.q.qp, &rw, &bad), 0);
    }
    struct win w = {(uintptr_t)s.b.p + WIN_OFF, rkey};
    vt_send(fd, &w, sizeof(w));
    vt_sync(fd);
    /* the parent's WRITE landed in the window's second half; the rest and
     * the bytes after the window are as they were */
    VT_EQ(vt_pat_diff(s.b.p + WIN_OFF, WIN_LEN / 2, 1, WIN_OFF), -1);
    VT_EQ(vt_pat_diff(s.b.p + WIN_OFF + WIN_LEN / 2, WIN_LEN / 2, 2, 0), -1);
    VT_EQ(s.b.p[WIN_OFF + WIN_LEN], 0);

    if (how == H_TYPE1) {
        /* our QP went to Error with the peer's refused WRITE: a new one */
        VT_EQ(ibv_dealloc_mw(mw), 0);
        mw = NULL;
        vt_qp_destroy(&s.q);
        struct vt_qp_caps caps;
        vt_caps_default(&caps);
        vt_qp_create(&s.d, &s.q, &caps, NULL, NULL, NULL);
        struct vt_qp_info li, ri;
        vt_qp_info(&s.d, &s.q, &li);
        vt_recv(fd, &ri, sizeof(ri), VT_OOB_MS);
        vt_send(fd, &li, sizeof(li));
        struct vt_conn c;
        vt_conn_default(&s.d, &c);
        VT_REQUIRE(vt_qp_connect(&s.q, &ri, &c) == 0);
    } else if (how == H_TYPE2_INV) {
        struct ibv_wc rwc;
        VT_CHECK(vt_expect_wc(s.q.rcq, 41, IBV_WC_SUCCESS, &rwc));
        VT_EQ(rwc.opcode, IBV_WC_RECV);
        VT_EQ(rwc.byte_len, 64);
        VT_CHECK(rwc.wc_flags & IBV_WC_WITH_INV);
        VT_EQX(rwc.invalidated_rkey, rkey);
        VT_EQ(vt_pat_diff(s.b.p, 64, 3, 0), -1);
    } else {
        ibv_wr_start(s.q.qpx);
        s.q.qpx->wr_id = 42;
        s.q.qpx->wr_flags = IBV_SEND_SIGNALED;
        ibv_wr_local_inv(s.q.qpx, rkey);
        VT_EQ(ibv_wr_complete(s.q.qpx), 0);
        VT_CHECK(vt_expect_wc(s.q.scq, 42, IBV_WC_SUCCESS, &wc));
        VT_EQ(wc.opcode, IBV_WC_LOCAL_INV);
    }
    vt_pat_fill(s.b.p + WIN_OFF, WIN_LEN, 5, 0);
    vt_sync(fd);
    vt_sync(fd); /* the parent's WRITE with the dead key was refused */
    VT_EQ(vt_pat_diff(s.b.p + WIN_OFF, WIN_LEN, 5, 0), -1);
    if (mw)
        VT_EQ(ibv_dealloc_mw(mw), 0);
    side_close(&s); /* the region goes once no window is bound to it */
}

/* A bind onto a region registered without IBV_ACCESS_MW_BIND fails with
 * IBV_WC_MW_BIND_ERR (IBA C10-73). */
static void bind_err_parent(int fd, const void *arg)
{
    (void)arg;
    struct side s;
    side_open(fd, &s, true, VT_ACCESS_ALL, false);
    vt_sync(fd);
    side_close(&s);
}

static void bind_err_child(int fd, const void *arg)
{
    (void)arg;
    struct side s;
    side_open(fd, &s, false, VT_ACCESS_ALL, false);
    struct ibv_mw *mw = ibv_alloc_mw(s.d.pd, IBV_MW_TYPE_2);
    VT_REQUIRE(mw);
    struct ibv_send_wr wr = {.wr_id = 50,
                             .opcode = IBV_WR_BIND_MW,
                             .send_flags = IBV_SEND_SIGNALED},
                       *bad = NULL;
    wr.bind_mw.mw = mw;
    wr.bind_mw.rkey = ibv_inc_rkey(mw->rkey);
    wr.bind_mw.bind_info = (struct ibv_mw_bind_info){
        .mr = s.b.mr, .addr = (uintptr_t)s.b.p, .length = 4096, .mw_access_flags = RIGHTS};
    VT_EQ(ibv_post_send(s.q.qp, &wr, &bad), 0);
    struct ibv_wc wc;
    VT_CHECK(vt_expect_wc(s.q.scq, 50, IBV_WC_MW_BIND_ERR, &wc));
    VT_EQ(vt_qp_state(s.q.qp), IBV_QPS_ERR);
    VT_EQ(ibv_dealloc_mw(mw), 0);
    vt_sync(fd);
    side_close(&s);
}

static const struct vt_case cases[] = {
    {"type1", parent, child, (const void *)(uintptr_t)H_TYPE1},
    {"type2_send_inv", parent, child, (const void *)(uintptr_t)H_TYPE2_INV},
    {"type2_wr_api", parent, child, (const void *)(uintptr_t)H_TYPE2_WRAPI},
    {"bind_err", bind_err_parent, bind_err_child, NULL},
};

int main(int argc, char **argv)
{
    return vt_main(argc, argv, cases, sizeof(cases) / sizeof(cases[0]));
}

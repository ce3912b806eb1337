/* domains_test.c: extended CQs (ibv_create_cq_ex, the start/next/end poll
 * iterator and its accessors, completion timestamps in the device clock,
 * ibv_query_rt_values_ex), parent domains with the application's
 * allocators, and thread domains. The peer is the vt agent. */
#include "vt.h"

#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

static uint64_t dev_clock(struct ibv_context *ctx)
{
    struct ibv_values_ex v = {.comp_mask = IBV_VALUES_MASK_RAW_CLOCK};
    VT_EQ(ibv_query_rt_values_ex(ctx, &v), 0);
    VT_EQ(v.comp_mask, IBV_VALUES_MASK_RAW_CLOCK);
    return (uint64_t)v.raw_clock.tv_sec * 1000000000ull + (uint64_t)v.raw_clock.tv_nsec;
}

static uint64_t wall_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

/* Waits for one completion through the iterator (ibv_end_poll after a
 * successful start); 0, or ENOENT at the deadline. */
static int poll_ex(struct ibv_cq_ex *cq, int timeout_ms)
{
    struct ibv_poll_cq_attr pa = {0};
    uint64_t end = vt_now_ms() + (uint64_t)timeout_ms;
    int r;
    while ((r = ibv_start_poll(cq, &pa)) == ENOENT && vt_now_ms() < end)
        ;
    return r;
}

static void case_cq_ex(int fd, const void *arg)
{
    (void)arg;
    struct vt_dev d;
    vt_dev_open(&d);
    struct vt_remote_mr r0;
    vt_agent_hello(fd, &r0);

    struct ibv_device_attr_ex ax;
    VT_EQ(ibv_query_device_ex(d.ctx, NULL, &ax), 0);
    VT_EQ(ax.hca_core_clock, 1000000); /* kHz: nanoseconds */
    VT_CHECK(ax.completion_timestamp_mask != 0);

    /* what it cannot fill is refused, as rxe does */
    uint64_t refused[] = {IBV_WC_EX_WITH_CVLAN, IBV_WC_EX_WITH_FLOW_TAG, IBV_WC_EX_WITH_TM_INFO};
    for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
        struct ibv_cq_init_attr_ex a = {.cqe = 4, .wc_flags = refused[i]};
        errno = 0;
        VT_CHECK(!ibv_create_cq_ex(d.ctx, &a) && errno == EOPNOTSUPP);
    }
    struct ibv_cq_init_attr_ex bad = {
        .cqe = 4, .comp_mask = IBV_CQ_INIT_ATTR_MASK_PD, .parent_domain = d.pd};
    errno = 0;
    VT_CHECK(!ibv_create_cq_ex(d.ctx, &bad) && errno == EINVAL); /* a PD, not a parent domain */

    struct ibv_comp_channel *ch = ibv_create_comp_channel(d.ctx);
    VT_REQUIRE(ch);
    int cookie;
    struct ibv_cq_init_attr_ex a = {
        .cqe = 16,
        .cq_context = &cookie,
        .channel = ch,
        .wc_flags = IBV_WC_STANDARD_FLAGS | IBV_WC_EX_WITH_COMPLETION_TIMESTAMP |
                    IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK,
        .comp_mask = IBV_CQ_INIT_ATTR_MASK_FLAGS,
        .flags = IBV_CREATE_CQ_ATTR_SINGLE_THREADED,
    };
    struct ibv_cq_ex *cqx = ibv_create_cq_ex(d.ctx, &a);
    VT_REQUIRE(cqx);
    struct ibv_cq *cq = ibv_cq_ex_to_cq(cqx);
    VT_CHECK(cq->context == d.ctx && cq->cq_context == &cookie && cq->channel == ch);

    struct vt_qp q;
    struct vt_qp_caps caps;
    vt_caps_default(&caps);
    vt_qp_create(&d, &q, &caps, cq, cq, NULL);
    vt_agent_pair(fd, &d, &q, 0, NULL, NULL, NULL, NULL);
    struct vt_buf b;
    vt_buf_alloc(&d, &b, 4096, IBV_ACCESS_LOCAL_WRITE);

    /* nothing yet: ENOENT, and ending a poll that found nothing is harmless */
    struct ibv_poll_cq_attr pa = {0};
    VT_EQ(ibv_start_poll(cqx, &pa), ENOENT);
    VT_EQ(ibv_next_poll(cqx), ENOENT);
    pa.comp_mask = 1;
    VT_EQ(ibv_start_poll(cqx, &pa), EINVAL);

    /* a receive with immediate, timestamped between two clock reads */
    struct ibv_sge sg = {.addr = (uintptr_t)b.p, .length = 4096, .lkey = b.mr->lkey};
    struct ibv_recv_wr rw = {.wr_id = 0x77, .sg_list = &sg, .num_sge = 1}, *bad_rw;
    VT_EQ(ibv_post_recv(q.qp, &rw, &bad_rw), 0);
    VT_EQ(ibv_req_notify_cq(cq, 0), 0);
    uint64_t t0 = dev_clock(d.ctx), w0 = wall_ns();
    struct vt_send_req s = {.opcode = IBV_WR_SEND_WITH_IMM,
                            .imm_data = htonl(0xabcdef01),
                            .nsge = 1,
                            .sge = {{.mr = 0, .len = 300, .off = 0}}};
    struct ibv_wc swc;
    VT_EQ(vt_agent_post_send(fd, 0, &s, &swc), 0);
    VT_EQ(swc.status, IBV_WC_SUCCESS);
    /* the comp channel fires for a cq_ex as for any CQ */
    struct pollfd pf = {.fd = ch->fd, .events = POLLIN};
    VT_EQ(poll(&pf, 1, VT_POLL_MS), 1);
    struct ibv_cq *ecq;
    void *ectx;
    VT_EQ(ibv_get_cq_event(ch, &ecq, &ectx), 0);
    VT_CHECK(ecq == cq && ectx == &cookie);
    ibv_ack_cq_events(cq, 1);
    VT_EQ(poll_ex(cqx, VT_POLL_MS), 0);
    uint64_t t1 = dev_clock(d.ctx), w1 = wall_ns();
    VT_EQ(cqx->status, IBV_WC_SUCCESS);
    VT_EQX(cqx->wr_id, 0x77);
    VT_EQ(ibv_wc_read_opcode(cqx), IBV_WC_RECV);
    VT_EQ(ibv_wc_read_byte_len(cqx), 300);
    VT_EQX(ntohl(ibv_wc_read_imm_data(cqx)), 0xabcdef01);
    VT_CHECK(ibv_wc_read_wc_flags(cqx) & IBV_WC_WITH_IMM);
    VT_EQ(ibv_wc_read_qp_num(cqx), q.qp->qp_num);
    VT_EQ(ibv_wc_read_slid(cqx), 0);
    VT_EQ(ibv_wc_read_dlid_path_bits(cqx), 0);
    VT_EQ(ibv_wc_read_vendor_err(cqx), 0);
    uint64_t ts = ibv_wc_read_completion_ts(cqx);
    VT_CHECKF(ts >= t0 && ts <= t1, "ts %llu not in [%llu, %llu]", (unsigned long long)ts,
              (unsigned long long)t0, (unsigned long long)t1);
    uint64_t wc_ns = ibv_wc_read_completion_wallclock_ns(cqx);
    VT_CHECKF(wc_ns + 1000000 >= w0 && wc_ns <= w1 + 1000000, "wallclock %llu not in [%llu, %llu]",
              (unsigned long long)wc_ns, (unsigned long long)w0, (unsigned long long)w1);
    VT_EQ(ibv_next_poll(cqx), ENOENT);
    ibv_end_poll(cqx);

    /* two sends: one start/next batch, in order, later stamps later */
    for (int i = 0; i < 2; i++) {
        struct ibv_send_wr sw = {.wr_id = 100 + (uint64_t)i,
                                 .sg_list = &sg,
                                 .num_sge = 1,
                                 .opcode = IBV_WR_SEND,
                                 .send_flags = IBV_SEND_SIGNALED};
        struct ibv_send_wr *bad_sw;
        VT_EQ(vt_agent_post_recv(fd, 0, 1 + (uint64_t)i, 1,
                                 &(struct vt_sge){.mr = 0, .len = 4096, .off = 0}),
              0);
        VT_EQ(ibv_post_send(q.qp, &sw, &bad_sw), 0);
        struct ibv_wc rwc;
        VT_CHECK(vt_agent_poll_recv(fd, 0, VT_POLL_MS, &rwc));
    }
    VT_EQ(poll_ex(cqx, VT_POLL_MS), 0);
    VT_EQX(cqx->wr_id, 100);
    VT_EQ(ibv_wc_read_opcode(cqx), IBV_WC_SEND);
    uint64_t ts0 = ibv_wc_read_completion_ts(cqx);
    uint64_t end = vt_now_ms() + VT_POLL_MS;
    int r;
    while ((r = ibv_next_poll(cqx)) == ENOENT && vt_now_ms() < end)
        ;
    VT_EQ(r, 0);
    VT_EQX(cqx->wr_id, 101);
    VT_CHECK(ibv_wc_read_completion_ts(cqx) >= ts0);
    ibv_end_poll(cqx);

    /* the legacy poll reaches the same CQ */
    struct ibv_send_wr sw = {.wr_id = 200,
                             .sg_list = &sg,
                             .num_sge = 1,
                             .opcode = IBV_WR_SEND,
                             .send_flags = IBV_SEND_SIGNALED};
    struct ibv_send_wr *bad_sw;
    VT_EQ(vt_agent_post_recv(fd, 0, 3, 1, &(struct vt_sge){.mr = 0, .len = 4096, .off = 0}), 0);
    VT_EQ(ibv_post_send(q.qp, &sw, &bad_sw), 0);
    struct ibv_wc wc;
    VT_CHECK(vt_expect_wc(cq, 200, IBV_WC_SUCCESS, &wc));

    vt_qp_destroy(&q);
    vt_buf_free(&b);
    VT_EQ(ibv_destroy_cq(cq), 0);
    VT_EQ(ibv_destroy_comp_channel(ch), 0);
    vt_dev_close(&d);
}

/* ---- parent domains ---- */
struct pd_log {
    int allocs, frees, defaults;
    bool use_default;
    bool bad_pd;
    void *pd_ctx_seen;
};
static struct ibv_pd *pd_expected;

static void *log_alloc(struct ibv_pd *pd, void *pd_context, size_t size, size_t alignment,
                       uint64_t resource_type)
{
    (void)resource_type;
    struct pd_log *l = pd_context;
    l->pd_ctx_seen = pd_context;
    if (pd != pd_expected)
        l->bad_pd = true;
    if (l->use_default) {
        l->defaults++;
        return IBV_ALLOCATOR_USE_DEFAULT;
    }
    void *p = NULL;
    if (posix_memalign(&p, alignment < sizeof(void *) ? sizeof(void *) : alignment, size))
        return NULL;
    memset(p, 0xa5, size); /* the provider must not rely on zeroed memory */
    l->allocs++;
    return p;
}

static void log_free(struct ibv_pd *pd, void *pd_context, void *ptr, uint64_t resource_type)
{
    (void)resource_type;
    struct pd_log *l = pd_context;
    if (pd != pd_expected)
        l->bad_pd = true;
    l->frees++;
    free(ptr);
}

/* One SEND from the agent into q and one back, through a QP whose rings
 * come from the parent domain. */
static void pd_traffic(int fd, struct vt_dev *d, struct ibv_pd *pd, struct vt_qp *q)
{
    struct vt_buf b;
    uint8_t *m = aligned_alloc(4096, 4096);
    VT_REQUIRE(m);
    b.p = m;
    b.len = 4096;
    b.mr = ibv_reg_mr(pd, m, 4096, IBV_ACCESS_LOCAL_WRITE); /* an MR on the parent domain */
    VT_REQUIRE(b.mr);
    VT_CHECK(b.mr->pd == pd);
    struct ibv_sge sg = {.addr = (uintptr_t)m, .length = 4096, .lkey = b.mr->lkey};
    struct ibv_recv_wr rw = {.wr_id = 5, .sg_list = &sg, .num_sge = 1}, *bad_rw;
    VT_EQ(ibv_post_recv(q->qp, &rw, &bad_rw), 0);
    vt_agent_fill(fd, 0, 0, 4096, 21, 0);
    struct vt_send_req s = {
        .opcode = IBV_WR_SEND, .nsge = 1, .sge = {{.mr = 0, .len = 4096, .off = 0}}};
    struct ibv_wc wc;
    VT_EQ(vt_agent_post_send(fd, 0, &s, &wc), 0);
    VT_EQ(wc.status, IBV_WC_SUCCESS);
    VT_CHECK(vt_expect_wc(q->rcq, 5, IBV_WC_SUCCESS, &wc));
    VT_CHECK(vt_pat_diff(m, 4096, 21, 0) < 0);
    (void)d;
    VT_EQ(ibv_dereg_mr(b.mr), 0);
    free(m);
}

static void case_parent_domain(int fd, const void *arg)
{
    (void)arg;
    struct vt_dev d;
    vt_dev_open(&d);
    struct vt_remote_mr r0;
    vt_agent_hello(fd, &r0);

    struct ibv_td_init_attr ta = {0};
    struct ibv_td *td = ibv_alloc_td(d.ctx, &ta);
    VT_REQUIRE(td);
    VT_CHECK(td->context == d.ctx);

    struct pd_log log = {0};
    struct ibv_parent_domain_init_attr pa = {
        .pd = d.pd,
        .td = td,
        .comp_mask =
            IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS | IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT,
        .alloc = log_alloc,
        .free = log_free,
        .pd_context = &log,
    };
    struct ibv_pd *pdom = ibv_alloc_parent_domain(d.ctx, &pa);
    VT_REQUIRE(pdom);
    pd_expected = pdom;
    VT_CHECK(pdom->context == d.ctx);
    /* a parent domain over a parent domain is refused */
    struct ibv_parent_domain_init_attr pa2 = {.pd = pdom};
    errno = 0;
    VT_CHECK(!ibv_alloc_parent_domain(d.ctx, &pa2) && errno == EINVAL);
    /* in use: the PD under it, the TD it carries */
    VT_EQ(ibv_dealloc_pd(d.pd), EBUSY);
    VT_EQ(ibv_dealloc_td(td), EBUSY);

    /* a CQ on the parent domain and a QP on it: their rings come from it */
    struct ibv_cq_init_attr_ex ca = {.cqe = 64,
                                     .wc_flags = IBV_WC_STANDARD_FLAGS,
                                     .comp_mask = IBV_CQ_INIT_ATTR_MASK_PD,
                                     .parent_domain = pdom};
    struct ibv_cq_ex *cqx = ibv_create_cq_ex(d.ctx, &ca);
    VT_REQUIRE(cqx);
    VT_EQ(log.allocs, 1);
    struct ibv_cq *cq = ibv_cq_ex_to_cq(cqx);
    struct vt_dev dd = d;
    dd.pd = pdom;
    struct vt_qp q;
    struct vt_qp_caps caps;
    vt_caps_default(&caps);
    vt_qp_create(&dd, &q, &caps, cq, cq, NULL);
    VT_CHECK(q.qp->pd == pdom);
    VT_EQ(log.allocs, 3); /* + the send ring and the receive ring */
    VT_CHECK(log.pd_ctx_seen == &log && !log.bad_pd);
    vt_agent_pair(fd, &dd, &q, 0, NULL, NULL, NULL, NULL);
    pd_traffic(fd, &dd, pdom, &q);
    /* an SRQ on it too */
    struct ibv_srq_init_attr sa = {.attr = {.max_wr = 8, .max_sge = 1}};
    struct ibv_srq *srq = ibv_create_srq(pdom, &sa);
    VT_REQUIRE(srq);
    VT_EQ(log.allocs, 4);
    /* its memory is out: the parent domain stays */
    VT_EQ(ibv_dealloc_pd(pdom), EBUSY);
    VT_EQ(ibv_destroy_srq(srq), 0);
    vt_qp_destroy(&q);
    VT_EQ(ibv_destroy_cq(cq), 0);
    VT_EQ(log.frees, log.allocs);
    VT_CHECK(!log.bad_pd);

    /* USE_DEFAULT: the library allocates, and frees, on its own */
    log.use_default = true;
    vt_qp_create(&dd, &q, &caps, NULL, NULL, NULL);
    VT_CHECK(log.defaults >= 2);
    int frees = log.frees;
    vt_qp_destroy(&q);
    VT_EQ(log.frees, frees);

    VT_EQ(ibv_dealloc_pd(pdom), 0);
    VT_EQ(ibv_dealloc_td(td), 0);

    /* without allocators: objects on it are objects on its PD */
    struct ibv_parent_domain_init_attr pa3 = {.pd = d.pd};
    pdom = ibv_alloc_parent_domain(d.ctx, &pa3);
    VT_REQUIRE(pdom);
    dd.pd = pdom;
    vt_agent_qp_destroy(fd, 0);
    vt_qp_create(&dd, &q, &caps, NULL, NULL, NULL);
    vt_agent_pair(fd, &dd, &q, 0, NULL, NULL, NULL, NULL);
    pd_traffic(fd, &dd, pdom, &q);
    vt_qp_destroy(&q);
    VT_EQ(ibv_dealloc_pd(pdom), 0);
    vt_dev_close(&d);
}

/* IBV_ACCESS_HUGETLB is accepted (the memory is hugetlbfs-backed; nothing
 * here is pinned), and an MR over a 2 MiB huge page, when the host has
 * one free, takes a remote WRITE. */
static void case_hugetlb(int fd, const void *arg)
{
    (void)arg;
    struct vt_dev d;
    vt_dev_open(&d);
    struct vt_remote_mr r0;
    vt_agent_hello(fd, &r0);
    int acc = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_HUGETLB;
    size_t len = 2u << 20;
    uint8_t *m =
        mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB, -1, 0);
    bool huge = m != MAP_FAILED;
    if (!huge) {
        vt_note("no 2 MiB huge page free: the MR is over ordinary pages");
        m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        VT_REQUIRE(m != MAP_FAILED);
    }
    struct ibv_mr *mr = ibv_reg_mr(d.pd, m, len, acc);
    VT_REQUIRE(mr);
    struct vt_qp q;
    struct vt_qp_caps caps;
    vt_caps_default(&caps);
    vt_qp_create(&d, &q, &caps, NULL, NULL, NULL);
    vt_agent_pair(fd, &d, &q, 0, NULL, NULL, NULL, NULL);
    vt_agent_fill(fd, 0, 0, 65536, 31, 0);
    struct vt_send_req w = {.opcode = IBV_WR_RDMA_WRITE,
                            .remote_addr = (uintptr_t)m + len - 65536,
                            .rkey = mr->rkey,
                            .nsge = 1,
                            .sge = {{.mr = 0, .len = 65536, .off = 0}}};
    struct ibv_wc wc;
    VT_EQ(vt_agent_post_send(fd, 0, &w, &wc), 0);
    VT_EQ(wc.status, IBV_WC_SUCCESS);
    VT_CHECK(vt_pat_diff(m + len - 65536, 65536, 31, 0) < 0);
    vt_qp_destroy(&q);
    VT_EQ(ibv_dereg_mr(mr), 0);
    munmap(m, len);
    vt_dev_close(&d);
}

static const struct vt_case cases[] = {
    {"cq_ex", case_cq_ex, NULL, NULL},
    {"parent_domain", case_parent_domain, NULL, NULL},
    {"hugetlb", case_hugetlb, NULL, NULL},
};

int main(int argc, char **argv)
{
    return vt_main(argc, argv, cases, sizeof(cases) / sizeof(cases[0]));
}

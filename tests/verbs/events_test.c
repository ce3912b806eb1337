/* events_test.c: events applications wait for: the CQ overflow async event,
 * completion channels (one-shot arming, solicited-only notification) and
 * shared receive queues (two QPs on one SRQ told apart by wc.qp_num; the
 * SRQ limit event firing once). The peer is the vt agent. */
#include "vt.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

enum { POLL_NAP_MS = 400 }; /* poll_naps: how long the application polls */

static void set_nonblock(int fd)
{
    int fl = fcntl(fd, F_GETFL);
    VT_REQUIRE(fl >= 0 && fcntl(fd, F_SETFL, fl | O_NONBLOCK) == 0);
}

/* 1 if fd became readable within ms, 0 if not. */
static int wait_readable(int fd, int ms)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    uint64_t end = vt_now_ms() + (uint64_t)ms;
    for (;;) {
        int r = poll(&p, 1, ms);
        if (r > 0)
            return 1;
        uint64_t now = vt_now_ms();
        if (r == 0 || now >= end)
            return 0;
        ms = (int)(end - now); /* EINTR */
    }
}

static void post_write(struct vt_qp *q, struct vt_buf *l, const struct vt_remote_mr *r,
                       uint64_t wr_id, uint32_t len)
{
    struct ibv_sge sge = {.addr = (uintptr_t)l->p, .length = len, .lkey = l->mr->lkey};
    struct ibv_send_wr wr, *bad = NULL;
    memset(&wr, 0, sizeof(wr));
    wr.wr_id = wr_id;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_RDMA_WRITE;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.wr.rdma.remote_addr = r->addr;
    wr.wr.rdma.rkey = r->rkey;
    VT_EQ(ibv_post_send(q->qp, &wr, &bad), 0);
}

/* What most cases start with: the device, a 4 KiB buffer, the agent's
 * buffer in *r. */
static void agent_open(int fd, struct vt_dev *d, struct vt_buf *l, struct vt_remote_mr *r)
{
    vt_dev_open(d);
    vt_buf_alloc(d, l, 4096, VT_ACCESS_ALL);
    vt_agent_hello(fd, r);
}

/* An RC QP with the default caps on scq/rcq, paired with the agent's QP
 * number agent_qp. */
static void agent_qp(int fd, struct vt_dev *d, struct vt_qp *q, struct ibv_cq *scq,
                     struct ibv_cq *rcq, int agent_qp)
{
    struct vt_qp_caps caps;
    vt_caps_default(&caps);
    vt_qp_create(d, q, &caps, scq, rcq, NULL);
    vt_agent_pair(fd, d, q, agent_qp, NULL, NULL, NULL, NULL);
}

/* ---- CQ overflow -> IBV_EVENT_CQ_ERR ---- */
static void case_cq_overflow(int fd, const void *arg)
{
    (void)arg;
    struct vt_dev d;
    struct vt_buf l;
    struct vt_remote_mr r;
    agent_open(fd, &d, &l, &r);
    set_nonblock(d.ctx->async_fd);
    struct ibv_async_event ev;
    /* nothing pending yet, and a non-blocking fd does not block */
    VT_EQ(ibv_get_async_event(d.ctx, &ev), -1);

    struct ibv_cq *scq = ibv_create_cq(d.ctx, 2, NULL, NULL, 0);
    VT_REQUIRE(scq);
    VT_CHECKF(scq->cqe >= 2, "cqe %d", scq->cqe);
    struct vt_qp q;
    agent_qp(fd, &d, &q, scq, NULL, 0);

    /* two more completions than the CQ holds, none polled */
    int n = scq->cqe + 2;
    for (int i = 0; i < n; i++)
        post_write(&q, &l, &r, (uint64_t)i + 1, 64);
    if (VT_CHECKF(wait_readable(d.ctx->async_fd, VT_POLL_MS), "no async event within %d ms",
                  VT_POLL_MS) &&
        VT_EQ(ibv_get_async_event(d.ctx, &ev), 0)) {
        VT_CHECKF(ev.event_type == IBV_EVENT_CQ_ERR, "event %s (%d), want CQ error",
                  ibv_event_type_str(ev.event_type), (int)ev.event_type);
        if (ev.event_type == IBV_EVENT_CQ_ERR)
            VT_CHECK(ev.element.cq == scq);
        ibv_ack_async_event(&ev);
    }
    vt_qp_destroy(&q);
    VT_EQ(ibv_destroy_cq(scq), 0);
    vt_buf_free(&l);
    vt_dev_close(&d);
}

/* ---- completion channel: one event per arming ---- */
static void get_event(struct ibv_comp_channel *ch, struct ibv_cq *want_cq, void *want_ctx)
{
    if (!VT_CHECKF(wait_readable(ch->fd, VT_POLL_MS), "no completion event within %d ms",
                   VT_POLL_MS))
        return;
    struct ibv_cq *cq = NULL;
    void *cq_ctx = NULL;
    if (VT_EQ(ibv_get_cq_event(ch, &cq, &cq_ctx), 0)) {
        VT_CHECK(cq == want_cq);
        VT_CHECK(cq_ctx == want_ctx);
        ibv_ack_cq_events(cq, 1);
    }
}

static void case_comp_channel(int fd, const void *arg)
{
    (void)arg;
    struct vt_dev d;
    struct vt_buf l;
    struct vt_remote_mr r;
    agent_open(fd, &d, &l, &r);
    struct ibv_comp_channel *ch = ibv_create_comp_channel(d.ctx);
    VT_REQUIRE(ch);
    static int cookie;
    struct ibv_cq *scq = ibv_create_cq(d.ctx, 16, &cookie, ch, 0);
    VT_REQUIRE(scq);
    VT_CHECK(scq->channel == ch);
    VT_CHECK(scq->cq_context == &cookie);
    struct vt_qp q;
    agent_qp(fd, &d, &q, scq, NULL, 0);

    /* armed: the completion raises an event naming the CQ and its context */
    VT_EQ(ibv_req_notify_cq(scq, 0), 0);
    post_write(&q, &l, &r, 1, 64);
    get_event(ch, scq, &cookie);
    vt_expect_wc(scq, 1, IBV_WC_SUCCESS, NULL);

    /* not armed again: completions come, events do not */
    post_write(&q, &l, &r, 2, 64);
    vt_expect_wc(scq, 2, IBV_WC_SUCCESS, NULL);
    VT_CHECKF(!wait_readable(ch->fd, 100), "event without ibv_req_notify_cq");

    /* armed again */
    VT_EQ(ibv_req_notify_cq(scq, 0), 0);
    post_write(&q, &l, &r, 3, 64);
    get_event(ch, scq, &cookie);
    vt_expect_wc(scq, 3, IBV_WC_SUCCESS, NULL);

    vt_qp_destroy(&q);
    VT_EQ(ibv_destroy_cq(scq), 0);
    VT_EQ(ibv_destroy_comp_channel(ch), 0);
    vt_buf_free(&l);
    vt_dev_close(&d);
}

/* ---- solicited-only notification on the receive CQ ---- */
static void agent_send(int fd, uint32_t slot, uint64_t off, uint32_t len, unsigned int flags)
{
    struct vt_send_req s = {.opcode = IBV_WR_SEND, .send_flags = flags, .nsge = 1};
    s.sge[0] = (struct vt_sge){.mr = 0, .len = len, .off = off};
    struct ibv_wc wc;
    if (VT_EQ(vt_agent_post_send(fd, slot, &s, &wc), 0))
        VT_CHECKF(wc.status == IBV_WC_SUCCESS, "agent SEND status %s",
                  ibv_wc_status_str(wc.status));
}

static void case_solicited(int fd, const void *arg)
{
    (void)arg;
    struct vt_dev d;
    struct vt_buf l;
    struct vt_remote_mr r;
    agent_open(fd, &d, &l, &r);
    struct ibv_comp_channel *ch = ibv_create_comp_channel(d.ctx);
    VT_REQUIRE(ch);
    struct ibv_cq *rcq = ibv_create_cq(d.ctx, 16, NULL, ch, 0);
    VT_REQUIRE(rcq);
    struct vt_qp q;
    agent_qp(fd, &d, &q, NULL, rcq, 0);
    for (int i = 0; i < 8; i++) {
        struct ibv_sge sge = {
            .addr = (uintptr_t)(l.p + 256 * i), .length = 256, .lkey = l.mr->lkey};
        struct ibv_recv_wr wr = {.wr_id = 10 + (uint64_t)i, .sg_list = &sge, .num_sge = 1},
                           *bad = NULL;
        VT_EQ(ibv_post_recv(q.qp, &wr, &bad), 0);
    }

    VT_EQ(ibv_req_notify_cq(rcq, 1), 0);
    /* the agent's SEND completes only once acknowledged, so the receive
     * completion exists by then: no event may follow for an unsolicited SEND */
    agent_send(fd, 0, 0, 32, 0);
    VT_CHECKF(!wait_readable(ch->fd, 200), "solicited-only CQ notified an unsolicited SEND");
    agent_send(fd, 0, 0, 33, IBV_SEND_SOLICITED);
    get_event(ch, rcq, NULL);

    /* armed for any completion: the unsolicited SEND notifies */
    VT_EQ(ibv_req_notify_cq(rcq, 0), 0);
    agent_send(fd, 0, 0, 34, 0);
    get_event(ch, rcq, NULL);

    /* RDMA WRITE with immediate carries the solicited bit too */
    VT_EQ(ibv_req_notify_cq(rcq, 1), 0);
    struct vt_send_req w = {.opcode = IBV_WR_RDMA_WRITE_WITH_IMM,
                            .imm_data = 0x01020304,
                            .remote_addr = (uintptr_t)(l.p + 3072),
                            .rkey = l.mr->rkey,
                            .nsge = 1,
                            .sge = {{.mr = 0, .len = 35, .off = 0}}};
    struct ibv_wc awc;
    if (VT_EQ(vt_agent_post_send(fd, 0, &w, &awc), 0))
        VT_EQ(awc.status, IBV_WC_SUCCESS);
    VT_CHECKF(!wait_readable(ch->fd, 200), "solicited-only CQ notified an unsolicited WRITE_IMM");
    w.send_flags = IBV_SEND_SOLICITED;
    w.sge[0].len = 36;
    if (VT_EQ(vt_agent_post_send(fd, 0, &w, &awc), 0))
        VT_EQ(awc.status, IBV_WC_SUCCESS);
    get_event(ch, rcq, NULL);

    struct ibv_wc wc[5];
    if (VT_EQ(vt_poll(rcq, 5, wc, VT_POLL_MS), 5))
        for (int i = 0; i < 5; i++) {
            VT_EQX(wc[i].wr_id, 10 + (uint64_t)i);
            VT_EQ(wc[i].status, IBV_WC_SUCCESS);
            VT_EQ(wc[i].byte_len, 32 + i);
            VT_EQ(wc[i].opcode, i < 3 ? IBV_WC_RECV : IBV_WC_RECV_RDMA_WITH_IMM);
        }

    /* ibv_req_notify_cq(3): an unsuccessful completion counts as solicited */
    VT_EQ(ibv_req_notify_cq(rcq, 1), 0);
    struct ibv_qp_attr qa = {.qp_state = IBV_QPS_ERR};
    VT_EQ(ibv_modify_qp(q.qp, &qa, IBV_QP_STATE), 0);
    get_event(ch, rcq, NULL);
    if (VT_EQ(vt_poll(rcq, 3, wc, VT_POLL_MS), 3))
        for (int i = 0; i < 3; i++) {
            VT_EQX(wc[i].wr_id, 15 + (uint64_t)i);
            VT_EQ(wc[i].status, IBV_WC_WR_FLUSH_ERR);
        }

    vt_qp_destroy(&q);
    VT_EQ(ibv_destroy_cq(rcq), 0);
    VT_EQ(ibv_destroy_comp_channel(ch), 0);
    vt_buf_free(&l);
    vt_dev_close(&d);
}

/* ---- SRQ shared by two QPs; the limit event ---- */
enum { SRQ_POSTED = 8, SRQ_LIMIT = 4, SRQ_BUF = 256, MSG = 64 };

/* Polls n receive completions and checks each against its sender: agent
 * slot s sends stream 0x80 + s, so the data tells which QP it came through. */
static void srq_expect(struct ibv_cq *rcq, struct vt_buf *l, struct vt_qp *q, int n,
                       uint64_t *next_id, int *per_qp)
{
    struct ibv_wc wc[SRQ_POSTED];
    int got = vt_poll(rcq, n, wc, VT_POLL_MS);
    VT_EQ(got, n);
    for (int i = 0; i < got; i++) {
        /* SRQ WQEs are consumed in posting order, whichever QP takes them */
        VT_EQX(wc[i].wr_id, (*next_id)++);
        if (!VT_EQ(wc[i].status, IBV_WC_SUCCESS))
            continue;
        VT_EQ(wc[i].byte_len, MSG);
        int s = wc[i].qp_num == q[0].qp->qp_num ? 0 : wc[i].qp_num == q[1].qp->qp_num ? 1 : -1;
        if (!VT_CHECKF(s >= 0, "wc.qp_num %u is neither QP", wc[i].qp_num))
            continue;
        per_qp[s]++;
        const uint8_t *buf = l->p + (wc[i].wr_id - 100) * SRQ_BUF;
        VT_CHECKF(vt_pat_diff(buf, MSG, 0x80 + (uint32_t)s, 0) < 0,
                  "data in wr_id %llu did not come from the QP wc.qp_num names",
                  (unsigned long long)wc[i].wr_id);
    }
}

static void case_srq(int fd, const void *arg)
{
    (void)arg;
    struct vt_dev d;
    struct vt_buf l;
    struct vt_remote_mr r;
    vt_dev_open(&d);
    vt_buf_alloc(&d, &l, SRQ_POSTED * SRQ_BUF, VT_ACCESS_ALL);
    vt_agent_hello(fd, &r);
    set_nonblock(d.ctx->async_fd);
    for (uint32_t s = 0; s < 2; s++)
        vt_agent_fill(fd, 0, 4096 * s, MSG, 0x80 + s, 0);

    /* ibv_create_srq(3): srq_limit is "irrelevant for ibv_create_srq": it
     * must not arm the limit event */
    struct ibv_srq_init_attr sa = {.attr = {.max_wr = 16, .max_sge = 1, .srq_limit = 6}};
    struct ibv_srq *srq = ibv_create_srq(d.pd, &sa);
    VT_REQUIRE(srq);
    struct ibv_cq *rcq = ibv_create_cq(d.ctx, 64, NULL, NULL, 0);
    VT_REQUIRE(rcq);
    struct vt_qp q[2];
    struct vt_qp_caps caps;
    vt_caps_default(&caps);
    for (uint32_t s = 0; s < 2; s++) {
        vt_qp_create(&d, &q[s], &caps, NULL, rcq, srq);
        vt_agent_pair(fd, &d, &q[s], s, NULL, NULL, NULL, NULL);
    }
    VT_CHECK(q[0].qp->qp_num != q[1].qp->qp_num);

    struct ibv_sge sge[SRQ_POSTED];
    struct ibv_recv_wr wr[SRQ_POSTED], *bad = NULL;
    for (int i = 0; i < SRQ_POSTED; i++) {
        sge[i] = (struct ibv_sge){
            .addr = (uintptr_t)(l.p + SRQ_BUF * i), .length = SRQ_BUF, .lkey = l.mr->lkey};
        wr[i] = (struct ibv_recv_wr){.wr_id = 100 + (uint64_t)i,
                                     .next = i + 1 < SRQ_POSTED ? &wr[i + 1] : NULL,
                                     .sg_list = &sge[i],
                                     .num_sge = 1};
    }
    VT_EQ(ibv_post_srq_recv(srq, wr, &bad), 0);

    uint64_t next_id = 100;
    int per_qp[2] = {0, 0};
    struct ibv_async_event ev;
    /* 8 -> 5 posted, below the create-time value 6, never armed */
    for (uint32_t i = 0; i < 3; i++)
        agent_send(fd, i & 1, 4096 * (i & 1), MSG, 0);
    srq_expect(rcq, &l, q, 3, &next_id, per_qp);
    if (wait_readable(d.ctx->async_fd, 100)) {
        VT_EQ(ibv_get_async_event(d.ctx, &ev), 0);
        if (ev.event_type == IBV_EVENT_SRQ_LIMIT_REACHED)
            vt_known_bug("SRQ_CREATE_LIMIT_ARMS",
                         "ibv_create_srq armed the limit with attr.srq_limit 6; the event "
                         "fired with 5 WQEs left though ibv_modify_srq was never called");
        else
            VT_CHECKF(false, "unexpected async event %s", ibv_event_type_str(ev.event_type));
        ibv_ack_async_event(&ev);
    }

    struct ibv_srq_attr attr = {.srq_limit = SRQ_LIMIT};
    VT_EQ(ibv_modify_srq(srq, &attr, IBV_SRQ_LIMIT), 0);
    memset(&attr, 0, sizeof(attr));
    if (VT_EQ(ibv_query_srq(srq, &attr), 0)) {
        VT_EQ(attr.srq_limit, SRQ_LIMIT);
        VT_CHECKF(attr.max_wr >= 16, "max_wr %u", attr.max_wr);
    }
    /* 5 -> 4 posted: not below the limit yet */
    agent_send(fd, 1, 4096, MSG, 0);
    srq_expect(rcq, &l, q, 1, &next_id, per_qp);
    VT_CHECKF(!wait_readable(d.ctx->async_fd, 100), "async event before the SRQ limit");
    /* 3 < 4: the event, once */
    agent_send(fd, 1, 4096, MSG, 0);
    if (VT_CHECKF(wait_readable(d.ctx->async_fd, VT_POLL_MS), "no SRQ limit event") &&
        VT_EQ(ibv_get_async_event(d.ctx, &ev), 0)) {
        VT_CHECKF(ev.event_type == IBV_EVENT_SRQ_LIMIT_REACHED, "event %s (%d)",
                  ibv_event_type_str(ev.event_type), (int)ev.event_type);
        if (ev.event_type == IBV_EVENT_SRQ_LIMIT_REACHED)
            VT_CHECK(ev.element.srq == srq);
        ibv_ack_async_event(&ev);
    }
    agent_send(fd, 0, 0, MSG, 0);
    agent_send(fd, 0, 0, MSG, 0);
    srq_expect(rcq, &l, q, 3, &next_id, per_qp);
    VT_CHECKF(!wait_readable(d.ctx->async_fd, 200), "a second SRQ limit event");
    VT_EQ(per_qp[0], 4);
    VT_EQ(per_qp[1], 3);

    /* a QP of an SRQ entering ERR: IBV_EVENT_QP_LAST_WQE_REACHED; the
     * SRQ's WQEs stay with the SRQ for the other QP */
    struct ibv_qp_attr qa = {.qp_state = IBV_QPS_ERR};
    VT_EQ(ibv_modify_qp(q[0].qp, &qa, IBV_QP_STATE), 0);
    if (VT_CHECKF(wait_readable(d.ctx->async_fd, VT_POLL_MS), "no last-WQE event") &&
        VT_EQ(ibv_get_async_event(d.ctx, &ev), 0)) {
        VT_CHECKF(ev.event_type == IBV_EVENT_QP_LAST_WQE_REACHED, "event %s (%d)",
                  ibv_event_type_str(ev.event_type), (int)ev.event_type);
        if (ev.event_type == IBV_EVENT_QP_LAST_WQE_REACHED)
            VT_CHECK(ev.element.qp == q[0].qp);
        ibv_ack_async_event(&ev);
    }
    VT_EQ(vt_poll_none(rcq, 20), 0); /* nothing flushed from the SRQ */
    agent_send(fd, 1, 4096, MSG, 0);
    srq_expect(rcq, &l, q, 1, &next_id, per_qp);
    VT_EQ(per_qp[1], 4);

    /* a device that advertises IBV_DEVICE_SRQ_RESIZE resizes with IBV_SRQ_MAX_WR */
    if (d.attr.device_cap_flags & IBV_DEVICE_SRQ_RESIZE) {
        attr = (struct ibv_srq_attr){.max_wr = 32};
        int rr = ibv_modify_srq(srq, &attr, IBV_SRQ_MAX_WR);
        if (rr == EOPNOTSUPP) {
            vt_known_bug("SRQ_RESIZE_ADVERTISED",
                         "device_cap_flags has IBV_DEVICE_SRQ_RESIZE but ibv_modify_srq("
                         "IBV_SRQ_MAX_WR) returns EOPNOTSUPP");
        } else if (VT_EQ(rr, 0) && VT_EQ(ibv_query_srq(srq, &attr), 0)) {
            VT_CHECKF(attr.max_wr >= 32, "max_wr %u after resizing to 32", attr.max_wr);
        }
    }

    for (int s = 0; s < 2; s++)
        vt_qp_destroy(&q[s]);
    VT_EQ(ibv_destroy_srq(srq), 0);
    VT_EQ(ibv_destroy_cq(rcq), 0);
    vt_buf_free(&l);
    vt_dev_close(&d);
}

/* ---- events of destroyed objects ----
 * ibv_get_async_event(3): destroying an object waits for its events to be
 * acknowledged, which "avoids an application retrieving an affiliated
 * event after the corresponding object has already been destroyed"; the
 * same holds for completion events (rdma-core drops a destroyed CQ's
 * pending events from its channel). An event still unread when its object
 * is destroyed must therefore never be delivered: it would carry a
 * dangling pointer. */
static void case_stale_cq_event(int fd, const void *arg)
{
    (void)arg;
    struct vt_dev d;
    struct vt_buf l;
    struct vt_remote_mr r;
    agent_open(fd, &d, &l, &r);
    struct ibv_comp_channel *ch = ibv_create_comp_channel(d.ctx);
    VT_REQUIRE(ch);
    struct vt_qp_caps caps;
    vt_caps_default(&caps);

    struct ibv_cq *a = ibv_create_cq(d.ctx, 16, NULL, ch, 0);
    VT_REQUIRE(a);
    struct vt_qp q;
    vt_qp_create(&d, &q, &caps, a, NULL, NULL);
    vt_agent_pair(fd, &d, &q, 0, NULL, NULL, NULL, NULL);
    VT_EQ(ibv_req_notify_cq(a, 0), 0);
    post_write(&q, &l, &r, 1, 64);
    vt_expect_wc(a, 1, IBV_WC_SUCCESS, NULL);
    VT_REQUIRE(wait_readable(ch->fd, VT_POLL_MS)); /* the event, left unread */
    vt_qp_destroy(&q);
    VT_EQ(ibv_destroy_cq(a), 0);

    bool stale = wait_readable(ch->fd, 100);
    if (stale) {
        /* ibv_get_cq_event would hand out (and itself read) the freed CQ */
        vt_known_bug("CQ_EVENT_AFTER_DESTROY",
                     "the completion channel still holds an event of a destroyed CQ; "
                     "ibv_get_cq_event would return the freed ibv_cq");
    } else {
        /* the channel goes on serving live CQs */
        static int cookie;
        struct ibv_cq *b = ibv_create_cq(d.ctx, 16, &cookie, ch, 0);
        VT_REQUIRE(b);
        vt_qp_create(&d, &q, &caps, b, NULL, NULL);
        vt_agent_pair(fd, &d, &q, 1, NULL, NULL, NULL, NULL);
        VT_EQ(ibv_req_notify_cq(b, 0), 0);
        post_write(&q, &l, &r, 2, 64);
        get_event(ch, b, &cookie);
        vt_expect_wc(b, 2, IBV_WC_SUCCESS, NULL);
        vt_qp_destroy(&q);
        VT_EQ(ibv_destroy_cq(b), 0);
    }
    VT_EQ(ibv_destroy_comp_channel(ch), 0);
    vt_buf_free(&l);
    vt_dev_close(&d);
}

static void case_stale_async_event(int fd, const void *arg)
{
    (void)arg;
    struct vt_dev d;
    vt_dev_open(&d);
    set_nonblock(d.ctx->async_fd);
    struct ibv_srq_init_attr sa = {.attr = {.max_wr = 4, .max_sge = 1}};
    struct ibv_srq *srq = ibv_create_srq(d.pd, &sa);
    VT_REQUIRE(srq);
    struct vt_qp q;
    struct vt_qp_caps caps;
    vt_caps_default(&caps);
    vt_qp_create(&d, &q, &caps, NULL, NULL, srq);
    vt_agent_pair(fd, &d, &q, 0, NULL, NULL, NULL, NULL);
    /* an SRQ QP entering ERR raises IBV_EVENT_QP_LAST_WQE_REACHED: left unread */
    struct ibv_qp_attr qa = {.qp_state = IBV_QPS_ERR};
    VT_EQ(ibv_modify_qp(q.qp, &qa, IBV_QP_STATE), 0);
    VT_REQUIRE(wait_readable(d.ctx->async_fd, VT_POLL_MS));
    uintptr_t gone = (uintptr_t)q.qp;
    vt_qp_destroy(&q);

    struct ibv_async_event ev;
    if (wait_readable(d.ctx->async_fd, 100) && VT_EQ(ibv_get_async_event(d.ctx, &ev), 0)) {
        if ((uintptr_t)ev.element.qp == gone)
            vt_known_bug("ASYNC_EVENT_AFTER_DESTROY",
                         "ibv_get_async_event returned %s for a QP destroyed before the event "
                         "was read (dangling element.qp)",
                         ibv_event_type_str(ev.event_type));
        else
            VT_CHECKF(false, "unexpected async event %s", ibv_event_type_str(ev.event_type));
        ibv_ack_async_event(&ev);
    }
    VT_EQ(ibv_destroy_srq(srq), 0);
    vt_dev_close(&d);
}

/* ---- a peer that sleeps on its CQ, or polls it, acknowledges at once ----
 * The writer WRITEs and waits for the completion, then tells the peer with
 * a SEND WITH IMMEDIATE; the peer only waits for that SEND (asleep on its
 * completion channel, or polling), and never sends. An ACK held back for a
 * reply (SOFTRDMA_ACK_DELAY_US, 10 ms here) would make every round wait
 * until it fell due: a side whose application sleeps, or polls with
 * nothing to do, must not hold ACKs long. */
enum { SLEEPER_ROUNDS = 20 };

struct sleeper_setup {
    struct vt_dev d;
    struct vt_buf l;
    struct ibv_comp_channel *ch;
    struct ibv_cq *cq;
    struct vt_qp q;
    struct vt_remote_mr r; /* the peer's buffer */
};

/* depth: CQ entries and send queue depth; len: the buffer's bytes */
static void sleeper_open_buf(int fd, struct sleeper_setup *s, const char *env, const char *val,
                             int depth, size_t len)
{
    VT_REQUIRE(setenv(env, val, 1) == 0); /* read at device open */
    vt_dev_open(&s->d);
    vt_buf_alloc(&s->d, &s->l, len, VT_ACCESS_ALL);
    VT_REQUIRE((s->ch = ibv_create_comp_channel(s->d.ctx)) != NULL);
    VT_REQUIRE((s->cq = ibv_create_cq(s->d.ctx, depth, NULL, s->ch, 0)) != NULL);
    struct vt_qp_caps caps;
    vt_caps_default(&caps);
    caps.max_send_wr = (uint32_t)depth;
    vt_qp_create(&s->d, &s->q, &caps, s->cq, s->cq, NULL);
    struct vt_qp_info mine, theirs;
    vt_qp_info(&s->d, &s->q, &mine);
    vt_send(fd, &mine, sizeof(mine));
    vt_recv(fd, &theirs, sizeof(theirs), VT_OOB_MS);
    struct vt_conn c;
    vt_conn_default(&s->d, &c);
    VT_REQUIRE(vt_qp_connect(&s->q, &theirs, &c) == 0);
    for (int i = 0; i < SLEEPER_ROUNDS; i++) {
        struct ibv_recv_wr rw = {.wr_id = 1000 + (uint64_t)i}, *bad = NULL;
        VT_REQUIRE(ibv_post_recv(s->q.qp, &rw, &bad) == 0);
    }
    struct vt_remote_mr r = {.addr = (uintptr_t)s->l.p, .rkey = s->l.mr->rkey, .len = s->l.len};
    vt_send(fd, &r, sizeof(r));
    vt_recv(fd, &s->r, sizeof(s->r), VT_OOB_MS);
    vt_sync(fd);
}

static void sleeper_open_depth(int fd, struct sleeper_setup *s, const char *env, const char *val,
                               int depth)
{
    sleeper_open_buf(fd, s, env, val, depth, 4096);
}

static void sleeper_open(int fd, struct sleeper_setup *s, const char *env, const char *val)
{
    sleeper_open_depth(fd, s, env, val, 64);
}

static void sleeper_close(int fd, struct sleeper_setup *s)
{
    vt_sync(fd);
    vt_qp_destroy(&s->q);
    VT_EQ(ibv_destroy_cq(s->cq), 0);
    VT_EQ(ibv_destroy_comp_channel(s->ch), 0);
    vt_buf_free(&s->l);
    vt_dev_close(&s->d);
}

/* One completion, waited for as applications usually do: poll, arm, poll
 * once more, sleep on the channel. */
static void sleep_for_wc(struct sleeper_setup *s, struct ibv_wc *wc)
{
    for (;;) {
        int n = ibv_poll_cq(s->cq, 1, wc);
        if (n == 0) {
            VT_REQUIRE(ibv_req_notify_cq(s->cq, 0) == 0);
            n = ibv_poll_cq(s->cq, 1, wc);
        }
        VT_REQUIRE(n >= 0);
        if (n == 1)
            return;
        VT_REQUIRE(wait_readable(s->ch->fd, VT_POLL_MS));
        struct ibv_cq *cq;
        void *ctx;
        VT_REQUIRE(ibv_get_cq_event(s->ch, &cq, &ctx) == 0);
        ibv_ack_cq_events(cq, 1);
    }
}

static void case_sleeper_writer(int fd, const void *arg)
{
    (void)arg;
    struct sleeper_setup s;
    sleeper_open(fd, &s, "SOFTRDMA_ACK_DELAY_US", "10000");
    uint64_t start = vt_now_ms();
    for (int i = 0; i < SLEEPER_ROUNDS && !vt_failures; i++) {
        struct ibv_send_wr tell = {.wr_id = 100 + (uint64_t)i,
                                   .opcode = IBV_WR_SEND_WITH_IMM,
                                   .send_flags = IBV_SEND_SIGNALED,
                                   .imm_data = htonl((uint32_t)i)};
        struct ibv_send_wr *bad = NULL;
        struct ibv_wc wc;
        post_write(&s.q, &s.l, &s.r, (uint64_t)i, 64);
        if (i > 0) { /* last round's SEND completes first */
            sleep_for_wc(&s, &wc);
            VT_EQ(wc.status, IBV_WC_SUCCESS);
            VT_EQ(wc.wr_id, 100 + (uint64_t)i - 1);
        }
        sleep_for_wc(&s, &wc);
        VT_EQ(wc.status, IBV_WC_SUCCESS);
        VT_EQ(wc.wr_id, (uint64_t)i);
        VT_REQUIRE(ibv_post_send(s.q.qp, &tell, &bad) == 0);
    }
    struct ibv_wc wc;
    sleep_for_wc(&s, &wc);
    VT_EQ(wc.wr_id, 100 + SLEEPER_ROUNDS - 1);
    uint64_t ms = vt_now_ms() - start;
    vt_note("%d rounds in %llu ms", SLEEPER_ROUNDS, (unsigned long long)ms);
    VT_CHECKF(ms < SLEEPER_ROUNDS * 10 / 2, "%d rounds took %llu ms: ACKs held by a sleeper",
              SLEEPER_ROUNDS, (unsigned long long)ms);
    sleeper_close(fd, &s);
}

/* The sleeper (arg NULL), or a peer that polls its CQ without pause and
 * never sends either (arg non-NULL): its NIC must not hold ACKs for a reply
 * that is not coming either. */
static void case_sleeper(int fd, const void *arg)
{
    struct sleeper_setup s;
    sleeper_open(fd, &s, "SOFTRDMA_ACK_DELAY_US", "10000");
    for (int i = 0; i < SLEEPER_ROUNDS && !vt_failures; i++) {
        struct ibv_wc wc;
        if (arg) {
            uint64_t end = vt_now_ms() + VT_POLL_MS;
            int n;
            while ((n = ibv_poll_cq(s.cq, 1, &wc)) == 0 && vt_now_ms() < end)
                ;
            VT_REQUIRE(n == 1);
        } else
            sleep_for_wc(&s, &wc);
        VT_EQ(wc.status, IBV_WC_SUCCESS);
        VT_EQ(wc.opcode, IBV_WC_RECV);
        VT_EQ(ntohl(wc.imm_data), (uint32_t)i);
    }
    sleeper_close(fd, &s);
}

/* ---- an application that polls its CQ once, then spins on memory ----
 * Its NIC thread leaves the socket to it after the poll (the hand-off, 10 ms
 * here), but the application does not come back: the peer's WRITE would
 * wait in the socket until the hand-off ran out, round after round. The
 * thread shortens the hand-off when it finds packets left waiting. */
enum { SPIN_ROUNDS = 30 };

static void case_spin_writer(int fd, const void *arg)
{
    (void)arg;
    struct sleeper_setup s;
    sleeper_open(fd, &s, "SOFTRDMA_HANDOFF_US", "10000");
    uint64_t start = vt_now_ms();
    for (int i = 1; i <= SPIN_ROUNDS && !vt_failures; i++) {
        char ready;
        vt_recv(fd, &ready, 1, VT_OOB_MS); /* it polled, and spins now */
        usleep(200);
        s.l.p[0] = (uint8_t)i;
        post_write(&s.q, &s.l, &s.r, (uint64_t)i, 1);
        char seen;
        vt_recv(fd, &seen, 1, VT_OOB_MS);
        vt_expect_wc(s.cq, (uint64_t)i, IBV_WC_SUCCESS, NULL);
    }
    uint64_t ms = vt_now_ms() - start;
    vt_note("%d rounds in %llu ms", SPIN_ROUNDS, (unsigned long long)ms);
    /* without the shortening every round waits ~9.8 ms: ~300 ms */
    VT_CHECKF(ms < 150, "%d rounds took %llu ms: WRITEs waited for the hand-off", SPIN_ROUNDS,
              (unsigned long long)ms);
    sleeper_close(fd, &s);
}

static void case_spinner(int fd, const void *arg)
{
    (void)arg;
    struct sleeper_setup s;
    sleeper_open(fd, &s, "SOFTRDMA_HANDOFF_US", "10000");
    volatile uint8_t *flag = s.l.p;
    for (int i = 1; i <= SPIN_ROUNDS && !vt_failures; i++) {
        struct ibv_wc wc;
        VT_EQ(ibv_poll_cq(s.cq, 1, &wc), 0); /* nothing: the hand-off starts */
        vt_send(fd, "r", 1);
        uint64_t end = vt_now_ms() + VT_POLL_MS;
        while (*flag != (uint8_t)i && vt_now_ms() < end)
            ;
        VT_REQUIRE(*flag == (uint8_t)i);
        vt_send(fd, "s", 1);
    }
    sleeper_close(fd, &s);
}

/* ---- a ping-pong of large WRITEs, as ib_write_lat runs it ----
 * Each side WRITEs 1 MiB into the other's buffer, polls its send CQ until
 * the WRITE completes, then spins on the last byte of its own buffer
 * until the peer's WRITE has landed, and WRITEs back. The ACK that
 * completes a WRITE must leave behind the reply: the peer's poll loop then
 * places the reply before it sees its completion. An ACK sent alone
 * completes the peer early, the peer spins on memory, and the reply sits
 * in its socket until its NIC thread's hand-off ends (up to 4 ms a round).
 * Counted on both sides: the rounds in which the peer's next WRITE was in
 * place when the completion was polled. Over UDP: messages of 256
 * packets, an ACK requested every 32, and GRO batches of a megabyte per
 * receive call. */
enum { BIG_ROUNDS = 30, BIG_ATTEMPTS = 3, BIG_LEN = 1 << 20 };

/* One batch of BIG_ROUNDS rounds, numbered from base + 1; returns the
 * rounds in which the peer's next WRITE was in place at this side's
 * completion. */
static int big_batch(struct sleeper_setup *s, struct vt_buf *src, bool first, int base)
{
    volatile uint8_t *mine = s->l.p + BIG_LEN - 1;
    int ahead = 0;
    for (int i = base + 1; i <= base + BIG_ROUNDS && !vt_failures; i++) {
        if (!first) {
            uint64_t end = vt_now_ms() + VT_POLL_MS;
            while (*mine != (uint8_t)i && vt_now_ms() < end)
                ;
            VT_REQUIRE(*mine == (uint8_t)i);
        }
        src->p[BIG_LEN - 1] = (uint8_t)i;
        post_write(&s->q, src, &s->r, (uint64_t)i, BIG_LEN);
        vt_expect_wc(s->cq, (uint64_t)i, IBV_WC_SUCCESS, NULL);
        /* the peer's next WRITE came before the ACK (the ponger's last
         * completion of a batch has none to wait for) */
        uint8_t next = (uint8_t)(first ? i : i + 1);
        ahead += *mine == next;
        if (first) {
            uint64_t end = vt_now_ms() + VT_POLL_MS;
            while (*mine != next && vt_now_ms() < end)
                ;
            VT_REQUIRE(*mine == next);
        }
    }
    return ahead;
}

/* ACKs ahead of the reply give 0..3 of 30 on a side (one side's 0..10 in
 * 3 runs of 4 when only bulk naps sent them early), in every batch; behind
 * it, 28..30 on a quiet machine, 9..19 of a batch on a loaded one. A
 * batch passes at a third on both sides, and up to BIG_ATTEMPTS batches
 * are run, so that a loaded machine's unlucky batch is not a failure and
 * the early ACK still fails every one. */
static void big_pingpong(int fd, bool first)
{
    VT_REQUIRE(setenv("SOFTRDMA_SHM", "0", 1) == 0);
    struct sleeper_setup s;
    sleeper_open_buf(fd, &s, "SOFTRDMA_HANDOFF_US", "1000", 64, 2 * BIG_LEN);
    /* the first half is written by the peer, the second is the source */
    struct vt_buf src = {.p = s.l.p + BIG_LEN, .len = BIG_LEN, .mr = s.l.mr};
    char pass = 0;
    for (int a = 0; a < BIG_ATTEMPTS && !pass && !vt_failures; a++) {
        uint64_t start = vt_now_ms();
        int ahead = big_batch(&s, &src, first, a * BIG_ROUNDS);
        if (first) {
            uint64_t ms = vt_now_ms() - start;
            int theirs;
            vt_recv(fd, &theirs, sizeof(theirs), VT_OOB_MS);
            pass = 3 * ahead >= BIG_ROUNDS && 3 * theirs >= BIG_ROUNDS - 1;
            vt_note("batch %d: %d rounds of 1 MiB in %llu ms; the next WRITE was in place "
                    "at %d and %d completions",
                    a + 1, BIG_ROUNDS, (unsigned long long)ms, ahead, theirs);
            vt_send(fd, &pass, 1);
        } else {
            vt_send(fd, &ahead, sizeof(ahead));
            vt_recv(fd, &pass, 1, VT_OOB_MS);
        }
    }
    if (first)
        VT_CHECKF(pass,
                  "the next WRITE was in place at under a third of the completions in "
                  "each of %d batches",
                  BIG_ATTEMPTS);
    sleeper_close(fd, &s);
}

static void case_big_pinger(int fd, const void *arg)
{
    (void)arg;
    big_pingpong(fd, true);
}

static void case_big_ponger(int fd, const void *arg)
{
    (void)arg;
    big_pingpong(fd, false);
}

/* ---- a polling application is left alone by its NIC thread ---- */
/* Voluntary context switches (sleeps) of this process's threads other
 * than the caller's: the NIC thread's naps. */
static long other_threads_sleeps(void)
{
    DIR *dir = opendir("/proc/self/task");
    VT_REQUIRE(dir);
    long sum = 0;
    pid_t self = (pid_t)syscall(SYS_gettid);
    for (struct dirent *e; (e = readdir(dir)) != NULL;) {
        if (e->d_name[0] == '.' || atoi(e->d_name) == self)
            continue;
        char path[300], line[128];
        snprintf(path, sizeof(path), "/proc/self/task/%s/status", e->d_name);
        FILE *f = fopen(path, "r");
        if (!f)
            continue; /* the thread is gone */
        while (fgets(line, sizeof(line), f))
            if (strncmp(line, "voluntary_ctxt_switches:", 24) == 0)
                sum += atol(line + 24);
        fclose(f);
    }
    closedir(dir);
    return sum;
}

/* Each time a hand-off runs out while the application still polls, the
 * NIC thread wakes up, which preempts a polling thread on a busy machine;
 * the hand-off grows to 4 x SOFTRDMA_HANDOFF_US so that happens a quarter
 * as often. */
static void case_poll_naps(int fd, const void *arg)
{
    (void)arg;
    VT_REQUIRE(setenv("SOFTRDMA_HANDOFF_US", "1000", 1) == 0); /* read at device open */
    struct vt_dev d;
    struct vt_buf l;
    struct vt_remote_mr r;
    agent_open(fd, &d, &l, &r);
    struct ibv_cq *cq = ibv_create_cq(d.ctx, 16, NULL, NULL, 0);
    VT_REQUIRE(cq);
    struct vt_qp q;
    agent_qp(fd, &d, &q, cq, NULL, 0);
    struct ibv_wc wc;
    VT_EQ(ibv_poll_cq(cq, 1, &wc), 0); /* the hand-off starts */
    /* the WRITE's timer wakes the NIC thread, which finds the hand-off */
    post_write(&q, &l, &r, 1, 64);
    long before = other_threads_sleeps();
    uint64_t start = vt_now_ms();
    int got = 0;
    while (vt_now_ms() - start < POLL_NAP_MS) {
        int n = ibv_poll_cq(cq, 1, &wc);
        VT_REQUIRE(n >= 0);
        if (n && VT_EQ(wc.status, IBV_WC_SUCCESS))
            got++;
    }
    long naps = other_threads_sleeps() - before;
    VT_EQ(got, 1);
    vt_note("the NIC thread slept %ld times in %d ms of polling", naps, POLL_NAP_MS);
    /* a nap per 1 ms hand-off: ~400; grown to 4 ms: ~100 */
    VT_CHECKF(naps < POLL_NAP_MS / 2, "%ld naps in %d ms: the hand-off did not grow", naps,
              POLL_NAP_MS);
    vt_qp_destroy(&q);
    VT_EQ(ibv_destroy_cq(cq), 0);
    vt_buf_free(&l);
    vt_dev_close(&d);
}

/* A thread that keeps polling a CQ that never runs dry runs no inline
 * pass, and leaves the NIC thread napping through one hand-off after
 * another: the NIC thread takes a pass itself once no inline pass ran for
 * 4 x SOFTRDMA_HANDOFF_US, however long the hand-off has grown. */
enum { BUSY_WRITES = 400, BUSY_GAP_US = 100, BUSY_FLAG_OFF = 1024 };

static uint64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static void case_busy_poller(int fd, const void *arg)
{
    (void)arg;
    struct sleeper_setup s;
    sleeper_open_depth(fd, &s, "SOFTRDMA_HANDOFF_US", "1000", 2 * BUSY_WRITES);
    struct ibv_cq *idle = ibv_create_cq(s.d.ctx, 4, NULL, NULL, 0);
    VT_REQUIRE(idle);
    volatile uint8_t *flag = s.l.p + BUSY_FLAG_OFF;
    for (int i = 0; i < BUSY_WRITES; i++)
        post_write(&s.q, &s.l, &s.r, (uint64_t)i, 8);
    usleep(100 * 1000); /* their completions pile up in the CQ */
    struct ibv_wc wc;
    VT_EQ(ibv_poll_cq(idle, 1, &wc), 0); /* an inline pass, the last one */
    vt_send(fd, "g", 1);                 /* the peer WRITEs the flag now */
    uint64_t start = vt_now_ms(), seen = 0;
    int got = 0, dry = 0;
    while (got < BUSY_WRITES && !seen) {
        int n = ibv_poll_cq(s.cq, 1, &wc);
        VT_REQUIRE(n >= 0);
        if (n && VT_EQ(wc.status, IBV_WC_SUCCESS))
            got++;
        dry += n == 0;
        uint64_t until = now_us() + BUSY_GAP_US;
        while (now_us() < until && !seen)
            if (*flag)
                seen = vt_now_ms() - start;
    }
    vt_note("the flag landed after %llu ms, %d completions polled, %d dry polls",
            (unsigned long long)seen, got, dry);
    VT_EQ(dry, 0); /* the CQ never ran dry: no inline pass placed it */
    /* 4 ms and a pass; without the bound, only after the CQ runs dry
     * (BUSY_WRITES x BUSY_GAP_US = 40 ms) */
    VT_CHECKF(seen > 0 && seen < 25,
              "the peer's WRITE landed after %llu ms (0: not within %d polls)",
              (unsigned long long)seen, got);
    while (got < BUSY_WRITES && vt_now_ms() - start < VT_POLL_MS) {
        int n = ibv_poll_cq(s.cq, 1, &wc);
        if (n > 0 && VT_EQ(wc.status, IBV_WC_SUCCESS))
            got++;
    }
    VT_EQ(got, BUSY_WRITES);
    VT_EQ(ibv_destroy_cq(idle), 0);
    sleeper_close(fd, &s);
}

static void case_flag_writer(int fd, const void *arg)
{
    (void)arg;
    struct sleeper_setup s;
    sleeper_open(fd, &s, "SOFTRDMA_HANDOFF_US", "1000");
    char go;
    vt_recv(fd, &go, 1, VT_OOB_MS);
    s.l.p[0] = 1;
    struct vt_remote_mr r = s.r;
    r.addr += BUSY_FLAG_OFF;
    post_write(&s.q, &s.l, &r, 1, 1);
    vt_expect_wc(s.cq, 1, IBV_WC_SUCCESS, NULL);
    sleeper_close(fd, &s);
}

static const struct vt_case cases[] = {
    {"cq_overflow", case_cq_overflow, NULL, NULL},
    {"comp_channel", case_comp_channel, NULL, NULL},
    {"solicited", case_solicited, NULL, NULL},
    {"srq", case_srq, NULL, NULL},
    {"stale_cq_event", case_stale_cq_event, NULL, NULL},
    {"stale_async_event", case_stale_async_event, NULL, NULL},
    {"sleeper_acks", case_sleeper_writer, case_sleeper, NULL},
    {"poller_acks", case_sleeper_writer, case_sleeper, "poll"},
    {"poll_then_spin", case_spin_writer, case_spinner, NULL},
    {"poll_naps", case_poll_naps, NULL, NULL},
    {"big_pingpong", case_big_pinger, case_big_ponger, NULL},
    {"busy_poller", case_busy_poller, case_flag_writer, NULL},
};

int main(int argc, char **argv)
{
    return vt_main(argc, argv, cases, sizeof(cases) / sizeof(cases[0]));
}

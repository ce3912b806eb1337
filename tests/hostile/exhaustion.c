/* exhaustion.c: hostile.exhaustion, on the public verbs API (plus the
 * srdma-flood tool for part 3). Each part runs in a process of its own
 * (verbs objects never cross a fork), under a deadline:
 *
 *   limits  PDs, CQs, MRs, QPs and SRQs are created until the device says
 *           no: exactly the count ibv_query_device reports must succeed,
 *           the next fails with NULL and errno ENOMEM (as mlx5 answers;
 *           rxe says EINVAL), and a freed slot is usable again. Caps past
 *           the device's limits fail with EINVAL. A CQ that overflows
 *           raises IBV_EVENT_CQ_ERR; post_send on a full send queue and
 *           post_recv on a full receive queue return ENOMEM with bad_wr at
 *           the first WR not taken.
 *   qps10k  10,000 RC QPs on one device: 5,000 pairs connected to each
 *           other over loopback, each pair moves one SEND whose bytes are
 *           checked, then all are destroyed; the time of each phase is
 *           printed. Right after, the device's whole max_qp must be
 *           creatable again (ibv_destroy_qp releases what it held).
 *   flood   srdma-flood sends 200,000 valid-looking packets (valid ICRC)
 *           at a live device: to a real QP with PSNs ahead of and behind
 *           the expected one, duplicate READs, unknown QPNs. The device's
 *           RssAnon is sampled throughout: it must not grow by more than
 *           FLOOD_RSS_KB, and a legitimate pair keeps exchanging checked
 *           messages during the flood.
 *
 * Usage: hostile_exhaustion <path of srdma-flood> [limits|qps10k|flood] */
#include "hx_verbs.h"

#include <errno.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum {
    PART_MS = 100000, /* one part; ctest's TIMEOUT is 120 s for the three */
    TOTAL_MS = 115000,
    POLL_MS = 10000,
    OVERSHOOT = 64, /* attempts past the advertised maximum */
    PAIRS = 5000,   /* 10,000 QPs */
    BATCH = 500,    /* pairs in flight at once */
    MSG = 64,
    FLOOD_PKTS = 200000,
    FLOOD_WARMUP = 20000,
    FLOOD_RSS_KB = 4096, /* "a few MiB" */
    FLOOD_MS = 80000,
};

static unsigned failures, known_bugs;
static const char *part = "main";

__attribute__((format(printf, 1, 2))) static void fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    printf("[%s] FAIL: ", part);
    vprintf(fmt, ap);
    putchar('\n');
    va_end(ap);
    failures++;
}

__attribute__((format(printf, 1, 2))) static void note(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    printf("[%s] ", part);
    vprintf(fmt, ap);
    putchar('\n');
    va_end(ap);
}

__attribute__((format(printf, 2, 3))) static void known_bug(const char *id, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    printf("[%s] KNOWN_BUG_%s: check skipped: ", part, id);
    vprintf(fmt, ap);
    putchar('\n');
    va_end(ap);
    known_bugs++;
}

__attribute__((noreturn, format(printf, 1, 2))) static void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    printf("[%s] FATAL: ", part);
    vprintf(fmt, ap);
    printf(" (errno %d %s)\n", errno, strerror(errno));
    va_end(ap);
    exit(1);
}

static uint64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

static uint64_t now_ms(void)
{
    return now_us() / 1000;
}

static uint8_t pat(uint32_t seed, uint32_t pos)
{
    uint32_t x = (pos + 1) * 2654435761u;
    return (uint8_t)((x >> 24) + seed);
}

/* ---- verbs helpers ---- */
struct dev {
    struct ibv_context *ctx;
    struct ibv_pd *pd;
    struct ibv_device_attr attr;
    union ibv_gid gid;
};

static void dev_open(struct dev *d)
{
    int n = 0;
    struct ibv_device **list = ibv_get_device_list(&n);
    if (!list || n < 1)
        die("no verbs device");
    d->ctx = ibv_open_device(list[0]);
    ibv_free_device_list(list);
    if (!d->ctx || ibv_query_device(d->ctx, &d->attr) || ibv_query_gid(d->ctx, 1, 0, &d->gid))
        die("open/query device");
    d->pd = ibv_alloc_pd(d->ctx);
    if (!d->pd)
        die("ibv_alloc_pd");
}

static struct ibv_qp *rc_qp(struct dev *d, struct ibv_cq *scq, struct ibv_cq *rcq, uint32_t wr)
{
    struct ibv_qp_init_attr ia = {
        .send_cq = scq,
        .recv_cq = rcq,
        .cap = {.max_send_wr = wr, .max_recv_wr = wr, .max_send_sge = 1, .max_recv_sge = 1},
        .qp_type = IBV_QPT_RC,
    };
    return ibv_create_qp(d->pd, &ia);
}

/* RESET -> INIT -> RTR -> RTS towards dqpn on the same device (loopback). */
static int connect_qp(struct dev *d, struct ibv_qp *qp, uint32_t dqpn, uint8_t timeout)
{
    struct hx_conn c = {.access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE,
                        .mtu = IBV_MTU_1024,
                        .dgid = d->gid.raw,
                        .dqpn = dqpn,
                        .rq_psn = dqpn * 7 & 0xffffff,
                        .sq_psn = qp->qp_num * 7 & 0xffffff, /* what the partner's rq_psn says */
                        .timeout = timeout,
                        .rd_atomic = 1,
                        .rnr_timer = 1};
    return hx_qp_connect(qp, &c);
}

static int post_recv(struct ibv_qp *qp, uint64_t id, void *p, uint32_t len, uint32_t lkey)
{
    struct ibv_sge s = {.addr = (uintptr_t)p, .length = len, .lkey = lkey};
    struct ibv_recv_wr wr = {.wr_id = id, .sg_list = &s, .num_sge = 1}, *bad;
    return ibv_post_recv(qp, &wr, &bad);
}

static int post_send(struct ibv_qp *qp, uint64_t id, enum ibv_wr_opcode op, void *p, uint32_t len,
                     uint32_t lkey, uint64_t raddr, uint32_t rkey)
{
    struct ibv_sge s = {.addr = (uintptr_t)p, .length = len, .lkey = lkey};
    struct ibv_send_wr wr = {
        .wr_id = id,
        .sg_list = &s,
        .num_sge = 1,
        .opcode = op,
        .send_flags = IBV_SEND_SIGNALED,
        .wr = {.rdma = {.remote_addr = raddr, .rkey = rkey}},
    };
    struct ibv_send_wr *bad;
    return ibv_post_send(qp, &wr, &bad);
}

/* Poll until n completions (each checked by the caller) or the deadline. */
static int poll_n(struct ibv_cq *cq, int n, struct ibv_wc *wc, int timeout_ms)
{
    int got = 0;
    uint64_t end = now_ms() + (uint64_t)timeout_ms;
    while (got < n && now_ms() < end) {
        int r = ibv_poll_cq(cq, n - got, wc + got);
        if (r < 0)
            return got;
        got += r;
        if (r == 0) {
            struct timespec ts = {0, 20000};
            nanosleep(&ts, NULL);
        }
    }
    return got;
}

/* ---- part 1: limits ---- */
/* Objects were created until the device refused: the advertised count
 * must have succeeded and the next failed with ENOMEM. */
static void limit_check(const char *what, int count, int advertised, int err, uint64_t us)
{
    if (count == advertised && err == ENOMEM)
        note("%-4s: %d created (device max %d), next one: NULL, errno ENOMEM (%.1f ms)", what,
             count, advertised, us / 1000.0);
    else if (count > advertised && err == ENOMEM)
        known_bug("LIMIT_ABOVE_ADVERTISED",
                  "%s: %d created before ENOMEM, but ibv_query_device advertises %d", what, count,
                  advertised);
    else
        fail("%s: %d created, the failure had errno %d (%s); want %d, then ENOMEM", what, count,
             err, strerror(err), advertised);
}

static void limits_pd(struct dev *d)
{
    int max = d->attr.max_pd, n = 0;
    struct ibv_pd **pd = calloc((size_t)max + OVERSHOOT, sizeof(*pd));
    uint64_t t0 = now_us();
    /* dev_open holds one PD already */
    pd[n++] = d->pd;
    errno = 0;
    while (n < max + OVERSHOOT && (pd[n] = ibv_alloc_pd(d->ctx)))
        n++;
    int err = errno;
    limit_check("PDs", n, max, err, now_us() - t0);
    if (n > 1) {
        ibv_dealloc_pd(pd[n - 1]);
        if (!(pd[n - 1] = ibv_alloc_pd(d->ctx)))
            fail("PDs: a freed slot cannot be used again (errno %d)", errno);
    }
    for (int i = 1; i < n; i++)
        if (pd[i] && ibv_dealloc_pd(pd[i]))
            fail("ibv_dealloc_pd %d", i);
    free(pd);
}

static void limits_cq(struct dev *d)
{
    int max = d->attr.max_cq, n = 0;
    struct ibv_cq **cq = calloc((size_t)max + OVERSHOOT, sizeof(*cq));
    uint64_t t0 = now_us();
    errno = 0;
    while (n < max + OVERSHOOT && (cq[n] = ibv_create_cq(d->ctx, 1, NULL, NULL, 0)))
        n++;
    int err = errno;
    limit_check("CQs", n, max, err, now_us() - t0);
    for (int i = 0; i < n; i++)
        if (ibv_destroy_cq(cq[i]))
            fail("ibv_destroy_cq %d", i);
    free(cq);
    errno = 0;
    struct ibv_cq *big = ibv_create_cq(d->ctx, d->attr.max_cqe + 1, NULL, NULL, 0);
    if (big || errno != EINVAL)
        fail("CQ of max_cqe + 1 entries: %p errno %d, want NULL and EINVAL", (void *)big, errno);
    if (big)
        ibv_destroy_cq(big);
}

static void limits_mr(struct dev *d)
{
    int max = d->attr.max_mr, n = 0;
    struct ibv_mr **mr = calloc((size_t)max + OVERSHOOT, sizeof(*mr));
    static uint8_t buf[4096];
    uint64_t t0 = now_us();
    errno = 0;
    while (n < max + OVERSHOOT &&
           (mr[n] = ibv_reg_mr(d->pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE)))
        n++;
    int err = errno;
    uint64_t us = now_us() - t0;
    limit_check("MRs", n, max, err, us);
    if (n > 0) {
        ibv_dereg_mr(mr[n / 2]);
        if (!(mr[n / 2] = ibv_reg_mr(d->pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE)))
            fail("MRs: a freed slot cannot be used again (errno %d)", errno);
    }
    t0 = now_us();
    for (int i = 0; i < n; i++)
        if (mr[i] && ibv_dereg_mr(mr[i]))
            fail("ibv_dereg_mr %d", i);
    note("MRs: %d registrations took %.0f ms (%.2f us each), deregistration %.0f ms", n,
         us / 1000.0, (double)us / (n ? n : 1), (now_us() - t0) / 1000.0);
    free(mr);
}

static void limits_qp(struct dev *d)
{
    struct ibv_cq *cq = ibv_create_cq(d->ctx, 16, NULL, NULL, 0);
    if (!cq)
        die("CQ");
    int max = d->attr.max_qp, n = 0;
    struct ibv_qp **qp = calloc((size_t)max + OVERSHOOT, sizeof(*qp));
    uint64_t t0 = now_us();
    errno = 0;
    while (n < max + OVERSHOOT && (qp[n] = rc_qp(d, cq, cq, 1)))
        n++;
    int err = errno;
    limit_check("QPs", n, max, err, now_us() - t0);
    for (int i = 0; i < n; i++)
        if (ibv_destroy_qp(qp[i]))
            fail("ibv_destroy_qp %d", i);
    free(qp);

    /* caps past the device's limits */
    struct {
        const char *what;
        struct ibv_qp_cap cap;
    } caps[] = {
        {"max_send_wr = max_qp_wr + 1", {.max_send_wr = (uint32_t)d->attr.max_qp_wr + 1}},
        {"max_recv_wr = max_qp_wr + 1", {.max_recv_wr = (uint32_t)d->attr.max_qp_wr + 1}},
        {"max_send_sge = max_sge + 1",
         {.max_send_wr = 1, .max_send_sge = (uint32_t)d->attr.max_sge + 1}},
        {"max_inline_data = 1 MiB", {.max_send_wr = 1, .max_inline_data = 1 << 20}},
    };
    for (size_t i = 0; i < sizeof(caps) / sizeof(caps[0]); i++) {
        struct ibv_qp_init_attr ia = {
            .send_cq = cq, .recv_cq = cq, .cap = caps[i].cap, .qp_type = IBV_QPT_RC};
        errno = 0;
        struct ibv_qp *q = ibv_create_qp(d->pd, &ia);
        if (q || errno != EINVAL)
            fail("QP with %s: %p errno %d, want NULL and EINVAL", caps[i].what, (void *)q, errno);
        else
            note("QP with %s: NULL, errno EINVAL", caps[i].what);
        if (q)
            ibv_destroy_qp(q);
    }
    ibv_destroy_cq(cq);
}

static void limits_srq(struct dev *d)
{
    int max = d->attr.max_srq, n = 0;
    struct ibv_srq **srq = calloc((size_t)max + OVERSHOOT, sizeof(*srq));
    uint64_t t0 = now_us();
    errno = 0;
    while (n < max + OVERSHOOT) {
        struct ibv_srq_init_attr ia = {.attr = {.max_wr = 1, .max_sge = 1}};
        if (!(srq[n] = ibv_create_srq(d->pd, &ia)))
            break;
        n++;
    }
    int err = errno;
    limit_check("SRQs", n, max, err, now_us() - t0);
    for (int i = 0; i < n; i++)
        if (ibv_destroy_srq(srq[i]))
            fail("ibv_destroy_srq %d", i);
    free(srq);
}

/* Two QPs of this device connected to each other, with a shared MR. */
struct pair {
    struct ibv_cq *cq_a, *cq_b;
    struct ibv_qp *a, *b;
    uint8_t *mem;
    struct ibv_mr *mr;
};

static void pair_open(struct dev *d, struct pair *p, int cqe_a, uint32_t wr)
{
    p->cq_a = ibv_create_cq(d->ctx, cqe_a, NULL, NULL, 0);
    p->cq_b = ibv_create_cq(d->ctx, 64, NULL, NULL, 0);
    p->mem = calloc(1, 1 << 16);
    if (!p->cq_a || !p->cq_b || !p->mem)
        die("pair CQs");
    p->mr = ibv_reg_mr(d->pd, p->mem, 1 << 16, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    p->a = rc_qp(d, p->cq_a, p->cq_a, wr);
    p->b = rc_qp(d, p->cq_b, p->cq_b, wr);
    if (!p->mr || !p->a || !p->b || connect_qp(d, p->a, p->b->qp_num, 14) ||
        connect_qp(d, p->b, p->a->qp_num, 14))
        die("pair");
}

static void pair_close(struct pair *p)
{
    ibv_destroy_qp(p->a);
    ibv_destroy_qp(p->b);
    ibv_destroy_cq(p->cq_a);
    ibv_destroy_cq(p->cq_b);
    ibv_dereg_mr(p->mr);
    free(p->mem);
}

static void cq_overflow(struct dev *d)
{
    /* IBA 11.4.2.1: more completions than a CQ holds is an error, reported
     * as an affiliated asynchronous event on the CQ. */
    struct pair p;
    pair_open(d, &p, 2, 8);
    for (int i = 0; i < 4; i++)
        if (post_send(p.a, (uint64_t)i, IBV_WR_RDMA_WRITE, p.mem, 8, p.mr->lkey,
                      (uintptr_t)p.mem + 4096, p.mr->rkey))
            fail("CQ overflow: post_send %d", i);
    struct pollfd pf = {.fd = d->ctx->async_fd, .events = POLLIN};
    struct ibv_async_event ev;
    if (poll(&pf, 1, POLL_MS) != 1 || ibv_get_async_event(d->ctx, &ev)) {
        fail("CQ overflow: no async event within %d ms", POLL_MS);
    } else {
        if (ev.event_type != IBV_EVENT_CQ_ERR || ev.element.cq != p.cq_a)
            fail("CQ overflow: event %s (%d) on %p, want CQ error on %p",
                 ibv_event_type_str(ev.event_type), ev.event_type, (void *)ev.element.cq,
                 (void *)p.cq_a);
        else
            note("CQ of 2 entries, 4 signaled WRITEs: IBV_EVENT_CQ_ERR on that CQ");
        ibv_ack_async_event(&ev);
    }
    pair_close(&p);
}

static void queue_full(struct dev *d)
{
    /* The send queue fills because nothing answers: the QP's peer is a QP
     * left in INIT, which drops every packet. */
    struct ibv_cq *cq = ibv_create_cq(d->ctx, 64, NULL, NULL, 0);
    struct ibv_qp *q = cq ? rc_qp(d, cq, cq, 4) : NULL;
    struct ibv_qp *deaf = cq ? rc_qp(d, cq, cq, 1) : NULL;
    static uint8_t buf[64];
    struct ibv_mr *mr = ibv_reg_mr(d->pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
    struct ibv_qp_attr init = {.qp_state = IBV_QPS_INIT, .port_num = 1};
    if (!q || !deaf || !mr ||
        ibv_modify_qp(deaf, &init,
                      IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) ||
        connect_qp(d, q, deaf->qp_num, 20 /* 4 s: no retry during the test */))
        die("queue_full setup");
    uint32_t cap = 0;
    {
        struct ibv_qp_attr a;
        struct ibv_qp_init_attr ia;
        ibv_query_qp(q, &a, IBV_QP_CAP, &ia);
        cap = a.cap.max_send_wr;
    }
    struct ibv_sge s = {.addr = (uintptr_t)buf, .length = 8, .lkey = mr->lkey};
    struct ibv_send_wr wr[8], *bad = NULL;
    memset(wr, 0, sizeof(wr));
    for (int i = 0; i < 8; i++) {
        wr[i].wr_id = (uint64_t)i;
        wr[i].sg_list = &s;
        wr[i].num_sge = 1;
        wr[i].opcode = IBV_WR_SEND;
        wr[i].send_flags = IBV_SEND_SIGNALED;
    }
    uint32_t ok = 0;
    int err = 0;
    for (; ok < cap + 1; ok++)
        if ((err = ibv_post_send(q, &wr[ok], &bad)))
            break;
    if (ok != cap || err != ENOMEM || bad != &wr[ok])
        fail("send queue of %u: %u posted, then %d (%s), bad_wr %s; want ENOMEM at WR %u", cap, ok,
             err, strerror(err), bad == &wr[ok] ? "right" : "wrong", cap);
    else
        note("send queue of %u WRs: WR %u returns ENOMEM, bad_wr points at it", cap, cap);
    /* a chained list on a full queue: nothing taken, bad_wr = the first */
    wr[5].next = &wr[6];
    bad = NULL;
    err = ibv_post_send(q, &wr[5], &bad);
    if (err != ENOMEM || bad != &wr[5])
        fail("list on a full send queue: %d, bad_wr %s", err, bad == &wr[5] ? "first" : "other");
    /* and the receive queue */
    uint32_t rok = 0;
    for (; rok < 5; rok++)
        if ((err = post_recv(q, rok, buf, 8, mr->lkey)))
            break;
    if (rok != 4 || err != ENOMEM)
        fail("receive queue of 4: %u posted, then %d (%s); want ENOMEM", rok, err, strerror(err));
    else
        note("receive queue of 4 WRs: WR 4 returns ENOMEM");
    ibv_destroy_qp(q);
    ibv_destroy_qp(deaf);
    ibv_destroy_cq(cq);
    ibv_dereg_mr(mr);
}

static void part_limits(void)
{
    struct dev d;
    dev_open(&d);
    note("device: max_pd %d max_cq %d max_mr %d max_qp %d max_srq %d max_cqe %d max_qp_wr %d "
         "max_sge %d",
         d.attr.max_pd, d.attr.max_cq, d.attr.max_mr, d.attr.max_qp, d.attr.max_srq, d.attr.max_cqe,
         d.attr.max_qp_wr, d.attr.max_sge);
    limits_pd(&d);
    limits_cq(&d);
    limits_mr(&d);
    limits_qp(&d);
    limits_srq(&d);
    /* after all that the device still works */
    cq_overflow(&d);
    queue_full(&d);
    ibv_dealloc_pd(d.pd);
    ibv_close_device(d.ctx);
}

/* ---- part 2: 10,000 QPs ---- */
static void part_qps10k(void)
{
    struct dev d;
    dev_open(&d);
    const int nq = 2 * PAIRS;
    struct ibv_cq *scq = ibv_create_cq(d.ctx, PAIRS, NULL, NULL, 0);
    struct ibv_cq *rcq = ibv_create_cq(d.ctx, PAIRS, NULL, NULL, 0);
    uint8_t *mem = calloc((size_t)nq, MSG);
    struct ibv_mr *mr =
        mem ? ibv_reg_mr(d.pd, mem, (size_t)nq * MSG, IBV_ACCESS_LOCAL_WRITE) : NULL;
    struct ibv_qp **qp = calloc((size_t)nq, sizeof(*qp));
    struct ibv_wc *wc = calloc(BATCH, sizeof(*wc));
    if (!scq || !rcq || !mr || !qp || !wc)
        die("setup");

    uint64_t t0 = now_us();
    for (int i = 0; i < nq; i++)
        if (!(qp[i] = rc_qp(&d, scq, rcq, 1)))
            die("create QP %d of %d", i, nq);
    uint64_t t1 = now_us();
    for (int i = 0; i < nq; i++)
        if (connect_qp(&d, qp[i], qp[i ^ 1]->qp_num, 14))
            die("connect QP %d", i);
    uint64_t t2 = now_us();

    /* pair p: qp[2p] sends slot 2p (pattern p) into qp[2p+1]'s slot 2p+1 */
    int bad = 0, done = 0;
    for (int base = 0; base < PAIRS; base += BATCH) {
        int n = PAIRS - base < BATCH ? PAIRS - base : BATCH;
        for (int k = 0; k < n; k++) {
            int p = base + k;
            uint8_t *src = mem + (size_t)(2 * p) * MSG, *dst = src + MSG;
            for (int j = 0; j < MSG; j++)
                src[j] = pat((uint32_t)p, (uint32_t)j);
            memset(dst, 0, MSG);
            if (post_recv(qp[2 * p + 1], (uint64_t)p, dst, MSG, mr->lkey) ||
                post_send(qp[2 * p], (uint64_t)p, IBV_WR_SEND, src, MSG, mr->lkey, 0, 0))
                die("post pair %d", p);
        }
        int s = poll_n(scq, n, wc, POLL_MS);
        for (int k = 0; k < s; k++)
            if (wc[k].status != IBV_WC_SUCCESS)
                bad++;
        int r = poll_n(rcq, n, wc, POLL_MS);
        for (int k = 0; k < r; k++) {
            uint64_t p = wc[k].wr_id;
            const uint8_t *dst = mem + (size_t)(2 * p + 1) * MSG;
            bool ok = wc[k].status == IBV_WC_SUCCESS && wc[k].byte_len == MSG &&
                      wc[k].qp_num == qp[2 * p + 1]->qp_num;
            for (int j = 0; ok && j < MSG; j++)
                ok = dst[j] == pat((uint32_t)p, (uint32_t)j);
            if (!ok)
                bad++;
            else
                done++;
        }
        if (s != n || r != n)
            fail("pairs %d..%d: %d send and %d receive completions of %d", base, base + n - 1, s, r,
                 n);
    }
    uint64_t t3 = now_us();
    if (bad || done != PAIRS)
        fail("%d of %d pairs moved their message intact, %d completions wrong", done, PAIRS, bad);
    for (int i = 0; i < nq; i++)
        if (ibv_destroy_qp(qp[i]))
            fail("destroy QP %d", i);
    uint64_t t4 = now_us();
    note("%d RC QPs on one device: create %.0f ms, connect (INIT/RTR/RTS) %.0f ms, %d pairs x "
         "1 checked SEND %.0f ms, destroy %.0f ms; total %.2f s",
         nq, (t1 - t0) / 1e3, (t2 - t1) / 1e3, done, (t3 - t2) / 1e3, (t4 - t3) / 1e3,
         (t4 - t0) / 1e6);

    /* ibv_destroy_qp(3): the QP's resources are released when it returns,
     * so the device's whole max_qp is available again at once. */
    int max = d.attr.max_qp, n = 0, later = 0;
    struct ibv_qp **again = calloc((size_t)max, sizeof(*again));
    if (!again)
        die("calloc");
    while (n < max && (again[n] = rc_qp(&d, scq, rcq, 1)))
        n++;
    int err = errno;
    for (int i = 0; i < n; i++)
        ibv_destroy_qp(again[i]);
    if (n == max) {
        note("right after that, all max_qp = %d QPs could be created again", max);
    } else {
        struct timespec ts = {1, 200000000}; /* past the longest linger (1 s) */
        nanosleep(&ts, NULL);
        while (later < max && (again[later] = rc_qp(&d, scq, rcq, 1)))
            later++;
        for (int i = 0; i < later; i++)
            ibv_destroy_qp(again[i]);
        if (later == max)
            known_bug("DESTROYED_QPS_HOLD_SLOTS",
                      "right after destroying %d QPs only %d of max_qp %d could be created "
                      "(errno %d): each destroyed QP that had received a request lingers to "
                      "re-acknowledge retransmissions (sr_qp_destroy_linger), keeping its QPN "
                      "and its place in max_qp for up to 1 s; 1.2 s later all %d could",
                      nq, n, max, err, later);
        else
            fail("max_qp = %d, but only %d QPs can be created right after destroying %d, and "
                 "%d 1.2 s later",
                 max, n, nq, later);
    }
    free(again);
    if (ibv_destroy_cq(scq) || ibv_destroy_cq(rcq) || ibv_dereg_mr(mr))
        fail("teardown");
    ibv_dealloc_pd(d.pd);
    ibv_close_device(d.ctx);
    free(mem);
    free(qp);
    free(wc);
}

/* ---- part 3: memory under a flood ---- */
/* Resident private memory (RssAnon) of this process: what a flood could
 * make the device allocate. File and shared pages are left out: the
 * legitimate pair's shared-memory ring (a sparse mailbox file) gains
 * resident pages as its messages first reach them, a bounded growth
 * proportional to how many it exchanged, whatever the flood does. The
 * file stays open and is read into a stack buffer: sampling must not
 * allocate, or under ASan (whose quarantine keeps freed blocks) the
 * sampler itself would look like growth. */
static long rss_kb(void)
{
    static int fd = -1;
    if (fd < 0)
        fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
    char buf[4096];
    ssize_t n = fd < 0 ? -1 : pread(fd, buf, sizeof(buf) - 1, 0);
    if (n <= 0)
        return -1;
    buf[n] = 0;
    const char *p = strstr(buf, "RssAnon:");
    return p ? atol(p + 8) : -1;
}

struct flooder {
    pid_t pid;
    int in, out; /* its stdin, its stdout */
    char buf[512];
    size_t len;
};

static void flooder_start(struct flooder *f, const char *path)
{
    int to[2], from[2];
    if (pipe2(to, O_CLOEXEC) || pipe2(from, O_CLOEXEC))
        die("pipe");
    f->pid = fork();
    if (f->pid < 0)
        die("fork");
    if (f->pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        dup2(to[0], 0);
        dup2(from[1], 1);
        execl(path, path, (char *)NULL);
        _exit(127);
    }
    close(to[0]);
    close(from[1]);
    f->in = to[1];
    f->out = from[0];
    f->len = 0;
}

/* One line from the flooder, or NULL by the deadline (timeout 0: poll). */
static char *flooder_line(struct flooder *f, int timeout_ms)
{
    uint64_t end = now_ms() + (uint64_t)timeout_ms;
    for (;;) {
        char *nl = memchr(f->buf, '\n', f->len);
        if (nl) {
            static char line[512];
            size_t n = (size_t)(nl - f->buf);
            memcpy(line, f->buf, n);
            line[n] = 0;
            memmove(f->buf, nl + 1, f->len - n - 1);
            f->len -= n + 1;
            return line;
        }
        uint64_t now = now_ms();
        int left = now >= end ? 0 : (int)(end - now);
        struct pollfd pf = {.fd = f->out, .events = POLLIN};
        if (poll(&pf, 1, left) != 1)
            return NULL;
        ssize_t r = read(f->out, f->buf + f->len, sizeof(f->buf) - 1 - f->len);
        if (r <= 0)
            return NULL;
        f->len += (size_t)r;
    }
}

/* One checked message of the legitimate pair; false when it failed. */
static bool live_exchange(struct pair *p, uint32_t i)
{
    uint8_t *src = p->mem, *dst = p->mem + 4096;
    for (int j = 0; j < 256; j++)
        src[j] = pat(i, (uint32_t)j);
    memset(dst, 0, 256);
    struct ibv_wc wc;
    if (post_recv(p->b, i, dst, 256, p->mr->lkey) ||
        post_send(p->a, i, IBV_WR_SEND, src, 256, p->mr->lkey, 0, 0) ||
        poll_n(p->cq_a, 1, &wc, POLL_MS) != 1 || wc.status != IBV_WC_SUCCESS ||
        poll_n(p->cq_b, 1, &wc, POLL_MS) != 1 || wc.status != IBV_WC_SUCCESS || wc.byte_len != 256)
        return false;
    for (int j = 0; j < 256; j++)
        if (dst[j] != pat(i, (uint32_t)j))
            return false;
    return true;
}

static void part_flood(const char *flood_path)
{
    struct flooder f;
    flooder_start(&f, flood_path); /* before the device: no threads to fork yet */
    struct dev d;
    dev_open(&d);
    char *line = flooder_line(&f, POLL_MS);
    char addr[64];
    if (!line || sscanf(line, "addr %63s", addr) != 1)
        die("no address from srdma-flood");
    union ibv_gid fgid = {.raw = {0}};
    fgid.raw[10] = fgid.raw[11] = 0xff;
    unsigned b0, b1, b2, b3;
    if (sscanf(addr, "%u.%u.%u.%u", &b0, &b1, &b2, &b3) != 4)
        die("bad address %s", addr);
    fgid.raw[12] = (uint8_t)b0;
    fgid.raw[13] = (uint8_t)b1;
    fgid.raw[14] = (uint8_t)b2;
    fgid.raw[15] = (uint8_t)b3;

    /* the flooded QP: connected to the flooder, as a peer that went mad */
    struct ibv_cq *cq = ibv_create_cq(d.ctx, 16, NULL, NULL, 0);
    uint8_t *target = calloc(1, 4096);
    struct ibv_mr *mr =
        ibv_reg_mr(d.pd, target, 4096,
                   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
    struct ibv_qp *q = cq && mr ? rc_qp(&d, cq, cq, 4) : NULL;
    if (!q)
        die("flood target");
    struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT,
                            .port_num = 1,
                            .qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ};
    if (ibv_modify_qp(q, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
        die("INIT");
    const uint32_t epsn = 0x1000;
    memset(&a, 0, sizeof(a));
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = IBV_MTU_1024;
    a.dest_qp_num = 0x123;
    a.rq_psn = epsn;
    a.max_dest_rd_atomic = 4;
    a.min_rnr_timer = 1;
    a.ah_attr.is_global = 1;
    a.ah_attr.port_num = 1;
    a.ah_attr.grh.dgid = fgid;
    if (ibv_modify_qp(q, &a,
                      IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                          IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
        die("RTR");

    struct pair p;
    pair_open(&d, &p, 64, 8);
    uint32_t msgs = 0;
    for (; msgs < 200; msgs++) /* warm up the pair's path */
        if (!live_exchange(&p, msgs))
            die("legitimate pair before the flood");

    /* A warm-up flood first: receive buffers, ACK paths and caches are
     * touched once, so what follows measures growth, not first use. */
    char go[256], vaddr[32];
    snprintf(vaddr, sizeof(vaddr), "%u.%u.%u.%u", d.gid.raw[12], d.gid.raw[13], d.gid.raw[14],
             d.gid.raw[15]);
    int rounds[2] = {FLOOD_WARMUP, FLOOD_PKTS};
    long base = 0, peak = 0, after = 0;
    uint32_t live_during = 0, live_bad = 0;
    uint64_t flood_ms = 0;
    for (int r = 0; r < 2; r++) {
        snprintf(go, sizeof(go), "go %s %u %u %u %llu %d\n", vaddr, q->qp_num, epsn, mr->rkey,
                 (unsigned long long)(uintptr_t)target, rounds[r]);
        if (r == 1) {
            base = peak = rss_kb();
        }
        uint64_t t0 = now_ms();
        if (write(f.in, go, strlen(go)) != (ssize_t)strlen(go))
            die("write to srdma-flood");
        char *done = NULL;
        while (!done && now_ms() - t0 < FLOOD_MS) {
            done = flooder_line(&f, 0);
            if (r == 1) {
                long kb = rss_kb();
                if (kb > peak)
                    peak = kb;
                if (live_exchange(&p, msgs++))
                    live_during++;
                else
                    live_bad++;
            } else if (!done) {
                done = flooder_line(&f, 10);
            }
        }
        if (!done)
            die("srdma-flood did not finish round %d within %d ms", r, FLOOD_MS);
        if (r == 1) {
            flood_ms = now_ms() - t0;
            note("srdma-flood: %s", done);
        }
    }
    /* what is still queued is processed now */
    for (int i = 0; i < 50; i++) {
        if (!live_exchange(&p, msgs++))
            live_bad++;
        long kb = rss_kb();
        if (kb > peak)
            peak = kb;
    }
    after = rss_kb();
    note("%d packets in %.1f s: RssAnon %ld kB before, peak %ld kB, after %ld kB: growth %ld kB "
         "(limit %d kB); the legitimate pair exchanged %u checked messages meanwhile",
         FLOOD_PKTS, flood_ms / 1e3, base, peak, after, peak - base, FLOOD_RSS_KB, live_during);
    if (base <= 0 || peak - base > FLOOD_RSS_KB)
        fail("RssAnon grew by %ld kB under the flood (limit %d kB)", peak - base, FLOOD_RSS_KB);
    if (live_bad || live_during == 0)
        fail("legitimate pair: %u messages failed, %u succeeded during the flood", live_bad,
             live_during);
    struct ibv_qp_init_attr ia;
    if (ibv_query_qp(q, &a, IBV_QP_STATE, &ia) || a.qp_state != IBV_QPS_RTR)
        fail("the flooded QP is in state %d, want RTR (nothing it received was fatal)", a.qp_state);
    close(f.in); /* EOF: the flooder exits */
    int st = 0;
    for (int i = 0; i < 500 && waitpid(f.pid, &st, WNOHANG) == 0; i++) {
        struct timespec ts = {0, 10000000};
        nanosleep(&ts, NULL);
    }
    if (!WIFEXITED(st) || WEXITSTATUS(st))
        fail("srdma-flood exited with status 0x%x", st);
    pair_close(&p);
    ibv_destroy_qp(q);
    ibv_destroy_cq(cq);
    ibv_dereg_mr(mr);
    free(target);
    ibv_dealloc_pd(d.pd);
    ibv_close_device(d.ctx); /* SOFTRDMA_STATS=1 prints what the device dropped */
}

/* ---- main: one process per part ---- */
static int run_part(const char *name, void (*fn)(const char *), const char *arg)
{
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0)
        die("fork");
    if (pid == 0) {
        part = name;
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        uint64_t t0 = now_ms();
        fn(arg);
        note("%s (%.1f s, %u known bugs)", failures ? "FAIL" : "PASS", (now_ms() - t0) / 1e3,
             known_bugs);
        fflush(stdout);
        exit(failures ? 1 : 0); /* not _exit: LeakSanitizer checks at exit */
    }
    int st = 0;
    uint64_t end = now_ms() + PART_MS;
    while (waitpid(pid, &st, WNOHANG) == 0) {
        if (now_ms() > end) {
            printf("[%s] FAIL: no end within %d ms: killed\n", name, PART_MS);
            kill(pid, SIGKILL);
            waitpid(pid, &st, 0);
            return 1;
        }
        struct timespec ts = {0, 5000000};
        nanosleep(&ts, NULL);
    }
    if (WIFSIGNALED(st)) {
        printf("[%s] FAIL: died of signal %d\n", name, WTERMSIG(st));
        return 1;
    }
    return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : 1;
}

static void limits_fn(const char *arg)
{
    (void)arg;
    part_limits();
}
static void qps_fn(const char *arg)
{
    (void)arg;
    part_qps10k();
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s <srdma-flood> [limits|qps10k|flood]\n", argv[0]);
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    setenv("SOFTRDMA_STATS", "1", 1);
    unsetenv("SOFTRDMA_FAULT");
    const char *only = argc > 2 ? argv[2] : NULL;
    uint64_t t0 = now_ms();
    int bad = 0;
    if (!only || !strcmp(only, "limits"))
        bad += run_part("limits", limits_fn, NULL);
    if (!only || !strcmp(only, "qps10k"))
        bad += run_part("qps10k", qps_fn, NULL);
    if (!only || !strcmp(only, "flood"))
        bad += run_part("flood", part_flood, argv[1]);
    printf("hostile.exhaustion: %s in %.1f s\n", bad ? "FAIL" : "PASS", (now_ms() - t0) / 1e3);
    if (now_ms() - t0 > TOTAL_MS)
        printf("hostile.exhaustion: slower than %d ms: ctest may time out\n", TOTAL_MS);
    return bad ? 1 : 0;
}

/* victim.c: the victim of hostile.forged_packets, on the public verbs API
 * only (it is what any application on softrdma would be).
 *
 * Spawned by the attacker (attacker.c) with `--oob <fd>`, a stream socket
 * carrying the messages of hostile.h. Before touching verbs it forks the
 * peer, the other end of a legitimate RC pair: the peer RDMA-WRITEs a
 * pattern into the victim, READs it back and compares, then SENDs a
 * message the victim checks and echoes; this runs for the whole attack and
 * must finish with every byte right.
 *
 * The victim owns the guarded region of hostile.h, HX_TARGETS RC QPs whose
 * peer is the attacker's address, a UD QP, a destroyed QP and one left in
 * INIT (their QPNs are bait). When the attacker is done it says which
 * writes it was allowed to make and what state each target QP must be in;
 * the victim checks every canary, its QPs, its completions and its async
 * events, closes the device (SOFTRDMA_STATS=1 prints the counters the
 * attacker compares) and reports. Exit status 0 when every check passed. */
#include "hostile.h"
#include "hx_verbs.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum {
    OOB_MS = 100000, /* the attacker's next message (its attack included) */
    PEER_SETUP_MS = 30000,
    COMPLETION_MS = 10000,
    LEGIT_MS = 105000, /* the legitimate pair gives up after this */
};

/* A test program's failure count, reported at the end (vt.c does the same). */
static unsigned failures, known_bugs;
static const char *role = "victim";

__attribute__((format(printf, 1, 2))) static void fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "hx %s: FAIL: ", role);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    failures++;
}

__attribute__((format(printf, 1, 2))) static void note(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "hx %s: ", role);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

__attribute__((noreturn, format(printf, 1, 2))) static void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "hx %s: FATAL: ", role);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, " (errno %d %s)\n", errno, strerror(errno));
    va_end(ap);
    exit(1);
}

static void nap_us(long us)
{
    struct timespec ts = {0, us * 1000};
    nanosleep(&ts, NULL);
}

/* ---- out of band ---- */
static void oob_send(int fd, const void *p, size_t len)
{
    const uint8_t *b = p;
    while (len) {
        ssize_t n = write(fd, b, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            die("out-of-band write");
        b += n;
        len -= (size_t)n;
    }
}

/* ---- verbs helpers ---- */
struct dev {
    struct ibv_context *ctx;
    struct ibv_pd *pd;
    uint8_t gid[16];
};

static void dev_open(struct dev *d)
{
    int n = 0;
    struct ibv_device **list = ibv_get_device_list(&n);
    if (!list || n < 1)
        die("no verbs device");
    d->ctx = ibv_open_device(list[0]);
    ibv_free_device_list(list);
    if (!d->ctx)
        die("ibv_open_device");
    d->pd = ibv_alloc_pd(d->ctx);
    union ibv_gid g;
    if (!d->pd || ibv_query_gid(d->ctx, 1, 0, &g))
        die("pd / gid");
    memcpy(d->gid, g.raw, 16);
}

static struct ibv_qp *rc_qp(struct dev *d, struct ibv_cq *scq, struct ibv_cq *rcq, uint32_t wr)
{
    struct ibv_qp_init_attr ia = {
        .send_cq = scq,
        .recv_cq = rcq,
        .cap = {.max_send_wr = wr, .max_recv_wr = wr, .max_send_sge = 1, .max_recv_sge = 1},
        .qp_type = IBV_QPT_RC,
    };
    struct ibv_qp *qp = ibv_create_qp(d->pd, &ia);
    if (!qp)
        die("ibv_create_qp");
    return qp;
}

/* RESET/INIT -> RTR -> RTS with the victim's limits. 0 or the failing
 * modify's error: under fuzz a packet may move the QP to Error between two
 * steps. */
static int qp_connect_err(struct ibv_qp *qp, int access, enum ibv_mtu mtu, const uint8_t *dgid,
                          uint32_t dqpn, uint32_t rq_psn, uint32_t sq_psn, uint8_t timeout)
{
    struct hx_conn c = {.access = access,
                        .mtu = mtu,
                        .dgid = dgid,
                        .dqpn = dqpn,
                        .rq_psn = rq_psn,
                        .sq_psn = sq_psn,
                        .timeout = timeout,
                        .rd_atomic = HX_RD_ATOMIC,
                        .rnr_timer = HX_RNR_TIMER};
    return hx_qp_connect(qp, &c);
}

enum { TIMEOUT_67MS = 14 };

static void qp_connect(struct ibv_qp *qp, int access, enum ibv_mtu mtu, const uint8_t *dgid,
                       uint32_t dqpn, uint32_t rq_psn, uint32_t sq_psn, uint8_t timeout)
{
    int err = qp_connect_err(qp, access, mtu, dgid, dqpn, rq_psn, sq_psn, timeout);
    if (err) {
        errno = err;
        die("connect QP 0x%x", qp->qp_num);
    }
}

static void post_recv(struct ibv_qp *qp, uint64_t wr_id, void *addr, uint32_t len, uint32_t lkey)
{
    struct ibv_sge s = {.addr = (uintptr_t)addr, .length = len, .lkey = lkey};
    struct ibv_recv_wr wr = {.wr_id = wr_id, .sg_list = &s, .num_sge = 1}, *bad;
    if (ibv_post_recv(qp, &wr, &bad))
        die("ibv_post_recv");
}

/* One RC operation of the legitimate pair, waited for. */
static bool rc_op(struct ibv_qp *qp, struct ibv_cq *cq, enum ibv_wr_opcode op, void *addr,
                  uint32_t len, uint32_t lkey, uint64_t raddr, uint32_t rkey)
{
    struct ibv_sge s = {.addr = (uintptr_t)addr, .length = len, .lkey = lkey};
    struct ibv_send_wr wr = {
        .wr_id = op,
        .sg_list = &s,
        .num_sge = 1,
        .opcode = op,
        .send_flags = IBV_SEND_SIGNALED,
        .wr = {.rdma = {.remote_addr = raddr, .rkey = rkey}},
    };
    struct ibv_send_wr *bad;
    if (ibv_post_send(qp, &wr, &bad)) {
        fail("legit: post_send opcode %d", op);
        return false;
    }
    uint64_t end = hx_now_ms() + COMPLETION_MS;
    while (hx_now_ms() < end) {
        struct ibv_wc wc;
        int n = ibv_poll_cq(cq, 1, &wc);
        if (n < 0)
            break;
        if (n == 0) {
            nap_us(20);
            continue;
        }
        if (wc.status != IBV_WC_SUCCESS) {
            fail("legit: opcode %d completed with %s", op, ibv_wc_status_str(wc.status));
            return false;
        }
        return true;
    }
    fail("legit: opcode %d: no completion within %d ms", op, COMPLETION_MS);
    return false;
}

static bool wait_recv(struct ibv_cq *cq, struct ibv_wc *wc, uint64_t end, _Atomic bool *stop)
{
    while (hx_now_ms() < end && !(stop && atomic_load(stop))) {
        int n = ibv_poll_cq(cq, 1, wc);
        if (n < 0)
            return false;
        if (n == 1)
            return true;
        nap_us(20);
    }
    return false;
}

static long first_diff(const uint8_t *p, size_t len, uint32_t seed, uint64_t pos)
{
    for (size_t i = 0; i < len; i++)
        if (p[i] != hx_pat(seed, pos + i))
            return (long)i;
    return -1;
}

/* ---- the legitimate pair ---- */
struct legit {
    struct dev *d;
    struct ibv_qp *qp;
    struct ibv_cq *scq, *rcq;
    uint8_t *mem; /* slots | receive buffers | send buffer (| read-back on the peer) */
    struct ibv_mr *mr;
    _Atomic uint32_t iters;
    _Atomic bool stop; /* the peer is gone: stop waiting for its messages */
    uint32_t errors;
    bool finished;
};

enum {
    LEGIT_RECV_OFF = HX_LEGIT_SLOTS * HX_LEGIT_SLOT,
    LEGIT_SEND_OFF = LEGIT_RECV_OFF + HX_LEGIT_RECVS * HX_LEGIT_MSG,
    LEGIT_BACK_OFF = LEGIT_SEND_OFF + HX_LEGIT_MSG,
    LEGIT_MEM = (LEGIT_BACK_OFF + HX_LEGIT_SLOTS * HX_LEGIT_SLOT + HX_PAGE - 1) / HX_PAGE * HX_PAGE,
};

static void legit_setup(struct legit *l, struct dev *d)
{
    memset(l, 0, sizeof(*l));
    l->d = d;
    l->mem = aligned_alloc(HX_PAGE, LEGIT_MEM);
    if (!l->mem)
        die("legit memory");
    memset(l->mem, 0, LEGIT_MEM);
    l->mr = ibv_reg_mr(d->pd, l->mem, LEGIT_MEM,
                       IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
    l->scq = ibv_create_cq(d->ctx, 16, NULL, NULL, 0);
    l->rcq = ibv_create_cq(d->ctx, HX_LEGIT_RECVS, NULL, NULL, 0);
    if (!l->mr || !l->scq || !l->rcq)
        die("legit MR / CQs");
    l->qp = rc_qp(d, l->scq, l->rcq, HX_LEGIT_RECVS);
}

static void legit_teardown(struct legit *l)
{
    if (ibv_destroy_qp(l->qp) || ibv_destroy_cq(l->scq) || ibv_destroy_cq(l->rcq) ||
        ibv_dereg_mr(l->mr))
        fail("legit: teardown");
    free(l->mem);
}

static void legit_info(const struct legit *l, uint32_t psn, struct hx_legit *out)
{
    memset(out, 0, sizeof(*out));
    out->qpn = l->qp->qp_num;
    out->psn = psn;
    out->rkey = l->mr->rkey;
    out->va = (uintptr_t)l->mem;
    memcpy(out->gid, l->d->gid, 16);
}

static void legit_connect(struct legit *l, uint32_t my_psn, const struct hx_legit *peer)
{
    qp_connect(l->qp, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ,
               IBV_MTU_4096, peer->gid, peer->qpn, peer->psn, my_psn, TIMEOUT_67MS);
    for (uint32_t i = 0; i < HX_LEGIT_RECVS; i++)
        post_recv(l->qp, i, l->mem + LEGIT_RECV_OFF + i * HX_LEGIT_MSG, HX_LEGIT_MSG, l->mr->lkey);
}

/* Victim side: check each SEND and the slot the peer wrote before it (RC
 * ordering: the WRITE and its READ-back completed first), then echo. */
static void *legit_victim_thread(void *arg)
{
    struct legit *l = arg;
    uint64_t end = hx_now_ms() + LEGIT_MS;
    for (uint32_t expect = 0; hx_now_ms() < end; expect++) {
        struct ibv_wc wc;
        if (!wait_recv(l->rcq, &wc, end, &l->stop)) {
            fail("legit: no message %u", expect);
            l->errors++;
            break;
        }
        uint8_t *m = l->mem + LEGIT_RECV_OFF + wc.wr_id * HX_LEGIT_MSG;
        uint32_t hdr[2];
        memcpy(hdr, m, sizeof(hdr));
        if (wc.status != IBV_WC_SUCCESS || wc.byte_len != HX_LEGIT_MSG || hdr[0] != expect) {
            fail("legit: message %u: status %s len %u iter %u", expect,
                 ibv_wc_status_str(wc.status), wc.byte_len, hdr[0]);
            l->errors++;
            break;
        }
        long at = first_diff(m + 8, HX_LEGIT_MSG - 8, 2000 + expect, 8);
        if (at >= 0) {
            fail("legit: message %u differs at byte %ld", expect, at + 8);
            l->errors++;
        }
        uint32_t slot = expect % HX_LEGIT_SLOTS;
        at = first_diff(l->mem + slot * HX_LEGIT_SLOT, HX_LEGIT_SLOT, 1000 + expect, 0);
        if (at >= 0) {
            fail("legit: RDMA WRITE %u differs at byte %ld", expect, at);
            l->errors++;
        }
        uint8_t *s = l->mem + LEGIT_SEND_OFF;
        memcpy(s, hdr, sizeof(hdr));
        for (uint32_t i = 8; i < HX_LEGIT_MSG; i++)
            s[i] = hx_pat(3000 + expect, i);
        post_recv(l->qp, wc.wr_id, m, HX_LEGIT_MSG, l->mr->lkey);
        if (!rc_op(l->qp, l->scq, IBV_WR_SEND, s, HX_LEGIT_MSG, l->mr->lkey, 0, 0)) {
            l->errors++;
            break;
        }
        atomic_store(&l->iters, expect + 1);
        if (hdr[1]) {
            l->finished = true;
            break;
        }
    }
    return NULL;
}

/* The peer process: drives the pair until the victim says stop. */
static int peer_main(int sp)
{
    role = "peer";
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    struct dev d;
    dev_open(&d);
    struct legit l;
    legit_setup(&l, &d);
    struct hx_legit mine, theirs;
    legit_info(&l, 0x777777, &mine);
    oob_send(sp, &mine, sizeof(mine));
    if (!hx_read_full(sp, &theirs, sizeof(theirs), hx_now_ms() + PEER_SETUP_MS))
        die("no legit info from the victim");
    legit_connect(&l, mine.psn, &theirs);
    char go;
    if (!hx_read_full(sp, &go, 1, hx_now_ms() + PEER_SETUP_MS))
        die("no go from the victim");

    uint64_t end = hx_now_ms() + LEGIT_MS;
    uint32_t i = 0;
    bool last = false;
    for (; !last && hx_now_ms() < end; i++) {
        uint32_t slot = i % HX_LEGIT_SLOTS;
        uint8_t *src = l.mem + slot * HX_LEGIT_SLOT;
        uint8_t *back = l.mem + LEGIT_BACK_OFF + slot * HX_LEGIT_SLOT;
        for (uint32_t k = 0; k < HX_LEGIT_SLOT; k++)
            src[k] = hx_pat(1000 + i, k);
        uint64_t raddr = theirs.va + slot * HX_LEGIT_SLOT;
        if (!rc_op(l.qp, l.scq, IBV_WR_RDMA_WRITE, src, HX_LEGIT_SLOT, l.mr->lkey, raddr,
                   theirs.rkey))
            break;
        memset(back, 0, HX_LEGIT_SLOT);
        if (!rc_op(l.qp, l.scq, IBV_WR_RDMA_READ, back, HX_LEGIT_SLOT, l.mr->lkey, raddr,
                   theirs.rkey))
            break;
        long at = first_diff(back, HX_LEGIT_SLOT, 1000 + i, 0);
        if (at >= 0)
            fail("legit: READ back %u differs at byte %ld", i, at);
        struct pollfd pf = {.fd = sp, .events = POLLIN};
        char stop;
        if (poll(&pf, 1, 0) == 1 && read(sp, &stop, 1) == 1)
            last = true;
        uint8_t *s = l.mem + LEGIT_SEND_OFF;
        uint32_t hdr[2] = {i, last};
        memcpy(s, hdr, sizeof(hdr));
        for (uint32_t k = 8; k < HX_LEGIT_MSG; k++)
            s[k] = hx_pat(2000 + i, k);
        if (!rc_op(l.qp, l.scq, IBV_WR_SEND, s, HX_LEGIT_MSG, l.mr->lkey, 0, 0))
            break;
        struct ibv_wc wc;
        if (!wait_recv(l.rcq, &wc, hx_now_ms() + COMPLETION_MS, NULL)) {
            fail("legit: no echo %u", i);
            break;
        }
        uint8_t *m = l.mem + LEGIT_RECV_OFF + wc.wr_id * HX_LEGIT_MSG;
        memcpy(hdr, m, sizeof(hdr));
        if (wc.status != IBV_WC_SUCCESS || wc.byte_len != HX_LEGIT_MSG || hdr[0] != i ||
            first_diff(m + 8, HX_LEGIT_MSG - 8, 3000 + i, 8) >= 0)
            fail("legit: echo %u wrong (status %s len %u iter %u)", i, ibv_wc_status_str(wc.status),
                 wc.byte_len, hdr[0]);
        post_recv(l.qp, wc.wr_id, m, HX_LEGIT_MSG, l.mr->lkey);
        if (i == 0)
            oob_send(sp, "R", 1);
    }
    if (!last)
        fail("legit: stopped after %u iterations without being told to", i);
    struct hx_peer_report r = {.iters = i, .errors = failures};
    oob_send(sp, &r, sizeof(r));
    /* The victim waits for this process to exit before closing its own
     * device, so the peer's stats line comes first on the shared stderr. */
    legit_teardown(&l);
    if (ibv_dealloc_pd(d.pd))
        fail("dealloc_pd");
    note("closing device");
    ibv_close_device(d.ctx);
    return failures ? 1 : 0;
}

/* ---- the victim ---- */
static uint8_t *guarded_alloc(size_t len)
{
    uint8_t *m =
        mmap(NULL, len + 2 * HX_PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
        die("mmap");
    /* Guard pages: any access outside [m + PAGE, m + PAGE + len) kills us. */
    if (mprotect(m, HX_PAGE, PROT_NONE) || mprotect(m + HX_PAGE + len, HX_PAGE, PROT_NONE))
        die("mprotect");
    return m + HX_PAGE;
}

static void canary_fill(uint8_t *p, size_t len, uint32_t seed)
{
    for (size_t i = 0; i < len; i++)
        p[i] = hx_pat(seed, i);
}

/* Compare an area with its canaries plus what the attacker declared. */
static void check_area(const char *name, uint32_t area, const uint8_t *mem, size_t len,
                       uint32_t seed, const struct hx_done *d)
{
    uint8_t *want = malloc(len), *any = calloc(len, 1);
    if (!want || !any)
        die("malloc");
    canary_fill(want, len, seed);
    for (uint32_t i = 0; i < d->n_decl && i < HX_MAX_DECL; i++) {
        const struct hx_decl *w = &d->decl[i];
        if (w->area != area)
            continue;
        if (w->off > len || w->len > len - w->off) {
            fail("%s: declared write [%u, +%u) outside the area", name, w->off, w->len);
            continue;
        }
        for (uint32_t k = 0; k < w->len; k++) {
            if (w->seed == HX_SEED_ANY)
                any[w->off + k] = 1;
            else
                want[w->off + k] = hx_pat(w->seed, w->off + k);
        }
    }
    if (area == HX_AREA_REGION)
        for (uint32_t i = 0; i < d->n_atomic && i < HX_MAX_ATOMIC; i++)
            if (d->atomic[i].off <= len - 8)
                memcpy(want + d->atomic[i].off, &d->atomic[i].value, 8);
    size_t bad = 0, first = 0, last = 0;
    for (size_t i = 0; i < len; i++) {
        if (any[i] || mem[i] == want[i])
            continue;
        if (!bad++)
            first = i;
        last = i;
    }
    if (bad)
        fail("%s: %zu bytes differ from canaries + granted writes, offsets %zu..%zu "
             "(page %zu..%zu): got 0x%02x want 0x%02x at %zu",
             name, bad, first, last, first / HX_PAGE, last / HX_PAGE, mem[first], want[first],
             first);
    else
        note("%s: all %zu bytes as expected (canaries intact outside granted writes)", name, len);
    free(want);
    free(any);
}

enum {
    TARGET_ACCESS = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                    IBV_ACCESS_REMOTE_ATOMIC,
};

struct victim {
    struct dev d;
    uint8_t *region, *rbuf, *udbuf, *lbuf;
    struct ibv_mr *mr_a, *mr_b, *mr_rbuf, *mr_udbuf, *mr_lbuf;
    struct ibv_cq *tcq, *trcq, *udcq;
    struct ibv_qp *t[HX_TARGETS], *ud, *uc, *init;
    struct legit l;
};

static void setup_targets(struct victim *v, const struct hx_hello *h, struct hx_info *info)
{
    struct dev *d = &v->d;
    v->tcq = ibv_create_cq(d->ctx, 64, NULL, NULL, 0);
    v->trcq = ibv_create_cq(d->ctx, 64, NULL, NULL, 0);
    if (!v->tcq || !v->trcq)
        die("target CQs");
    const int all = TARGET_ACCESS;
    for (uint32_t i = 0; i < HX_TARGETS; i++) {
        v->t[i] = rc_qp(d, v->tcq, v->trcq, 4);
        /* PSNs close to the 2^24 wrap for some QPs: the attacker's windows
         * wrap with them. */
        info->rq_psn[i] = (0xfffffc + i * 0x10101u) & 0xffffff;
        info->sq_psn[i] = (0x123456 + i * 0x1111u) & 0xffffff;
        info->qpn[i] = v->t[i]->qp_num;
        int access = i == HX_T_NOWRITE ? IBV_ACCESS_REMOTE_READ : all;
        /* HX_T_SPARE waits for our hostile responder: no retransmission meanwhile */
        qp_connect(v->t[i], access, IBV_MTU_1024, h->gid_a, h->fake_qpn_base + i, info->rq_psn[i],
                   info->sq_psn[i], i == HX_T_SPARE ? HX_REQ_TIMEOUT : TIMEOUT_67MS);
        if (i != HX_T_SEQ) /* SEQ answers SENDs with RNR NAKs */
            post_recv(v->t[i], i, v->rbuf + i * HX_RECV_SLOT, HX_RECV_LEN, v->mr_rbuf->lkey);
    }

    /* UD: any sender may reach it, but only with the Q_Key. */
    v->udcq = ibv_create_cq(d->ctx, 16, NULL, NULL, 0);
    struct ibv_qp_init_attr ia = {
        .send_cq = v->udcq,
        .recv_cq = v->udcq,
        .cap = {.max_send_wr = 1, .max_recv_wr = HX_UD_RECVS, .max_send_sge = 1, .max_recv_sge = 1},
        .qp_type = IBV_QPT_UD,
    };
    v->ud = v->udcq ? ibv_create_qp(d->pd, &ia) : NULL;
    if (!v->ud)
        die("UD QP");
    struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT, .port_num = 1, .qkey = HX_UD_QKEY};
    if (ibv_modify_qp(v->ud, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY))
        die("UD INIT");
    a.qp_state = IBV_QPS_RTR;
    if (ibv_modify_qp(v->ud, &a, IBV_QP_STATE))
        die("UD RTR");
    a.qp_state = IBV_QPS_RTS;
    a.sq_psn = 1;
    if (ibv_modify_qp(v->ud, &a, IBV_QP_STATE | IBV_QP_SQ_PSN))
        die("UD RTS");
    for (uint32_t k = 0; k < HX_UD_RECVS; k++)
        post_recv(v->ud, k, v->udbuf + k * HX_UD_SLOT, HX_UD_RECV_LEN, v->mr_udbuf->lkey);
    info->ud_qpn = v->ud->qp_num;

    /* UC (IBA 9.8.?): no ACKs, errors drop silently, the QP stays up. */
    ia.qp_type = IBV_QPT_UC;
    ia.send_cq = ia.recv_cq = v->tcq;
    ia.cap.max_send_wr = ia.cap.max_recv_wr = 1;
    v->uc = ibv_create_qp(d->pd, &ia);
    if (!v->uc || hx_qp_init(v->uc, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE))
        die("UC QP");
    info->uc_qpn = v->uc->qp_num;
    info->uc_rq_psn = 0x00fff0;
    struct ibv_qp_attr ua = {
        .qp_state = IBV_QPS_RTR,
        .path_mtu = IBV_MTU_1024,
        .dest_qp_num = h->fake_qpn_base + HX_TARGETS,
        .rq_psn = info->uc_rq_psn,
        .ah_attr = {.is_global = 1, .port_num = 1, .grh = {.hop_limit = 64}},
    };
    memcpy(ua.ah_attr.grh.dgid.raw, h->gid_a, 16);
    if (ibv_modify_qp(v->uc, &ua,
                      IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN))
        die("UC RTR");
    memset(&ua, 0, sizeof(ua));
    ua.qp_state = IBV_QPS_RTS;
    ua.sq_psn = 7;
    if (ibv_modify_qp(v->uc, &ua, IBV_QP_STATE | IBV_QP_SQ_PSN))
        die("UC RTS");

    /* Bait: the QPN of a destroyed QP, and of one that never got past INIT. */
    struct ibv_qp *gone = rc_qp(d, v->tcq, v->trcq, 1);
    info->dead_qpn = gone->qp_num;
    if (ibv_destroy_qp(gone))
        die("destroy");
    v->init = rc_qp(d, v->tcq, v->trcq, 1);
    if (hx_qp_init(v->init, all))
        die("INIT");
    info->init_qpn = v->init->qp_num;
}

/* The victim as requester towards the attacker: a READ and a FETCH_ADD
 * whose answers must land in lbuf and nowhere else. */
static void post_requests(struct victim *v)
{
    struct ibv_qp *qp = v->t[HX_T_SPARE];
    struct ibv_sge s[2] = {
        {.addr = (uintptr_t)v->lbuf, .length = HX_REQ_READ_LEN, .lkey = v->mr_lbuf->lkey},
        {.addr = (uintptr_t)v->lbuf + HX_REQ_ATOMIC_OFF, .length = 8, .lkey = v->mr_lbuf->lkey},
    };
    struct ibv_send_wr wr[2] = {
        {.wr_id = 0,
         .next = &wr[1],
         .sg_list = &s[0],
         .num_sge = 1,
         .opcode = IBV_WR_RDMA_READ,
         .send_flags = IBV_SEND_SIGNALED,
         .wr = {.rdma = {.remote_addr = HX_REQ_VA, .rkey = HX_REQ_RKEY}}},
        {.wr_id = 1,
         .sg_list = &s[1],
         .num_sge = 1,
         .opcode = IBV_WR_ATOMIC_FETCH_AND_ADD,
         .send_flags = IBV_SEND_SIGNALED,
         .wr = {.atomic = {.remote_addr = HX_REQ_VA + HX_PAGE,
                           .compare_add = HX_REQ_ADD,
                           .rkey = HX_REQ_RKEY}}},
    };
    struct ibv_send_wr *bad;
    if (ibv_post_send(qp, wr, &bad))
        die("post the READ and the atomic");
}

static void check_requests(struct victim *v, const struct hx_done *dn)
{
    if (dn->req_status[0] < 0 && dn->req_status[1] < 0)
        return; /* none posted (fuzz) */
    int got[2] = {0, 0}, status[2] = {-1, -1};
    for (int round = 0; round < 200 && got[0] + got[1] < 2; round++) {
        struct ibv_wc wc;
        int n = ibv_poll_cq(v->tcq, 1, &wc);
        if (n <= 0) {
            nap_us(1000);
            continue;
        }
        if (wc.wr_id > 1) {
            fail("send completion with wr_id %llu", (unsigned long long)wc.wr_id);
            continue;
        }
        got[wc.wr_id]++;
        status[wc.wr_id] = wc.status;
    }
    static const char *const what[2] = {"RDMA READ", "FETCH_ADD"};
    for (int i = 0; i < 2; i++) {
        if (dn->req_status[i] < 0)
            continue;
        if (got[i] != 1 || status[i] != dn->req_status[i])
            fail("the victim's own %s: %d completions, status %s; want %s", what[i], got[i],
                 status[i] < 0 ? "-" : ibv_wc_status_str(status[i]),
                 ibv_wc_status_str(dn->req_status[i]));
        else
            note("the victim's own %s completed with %s", what[i], ibv_wc_status_str(status[i]));
    }
}

/* Fuzz mode, while the attack runs: target QPs an error NAK killed are
 * reset and connected again, consumed receives are posted again, so the
 * fuzz keeps meeting live QPs (and QP reuse runs under fire too). */
static unsigned revive(struct victim *v, const struct hx_hello *h, const struct hx_info *info)
{
    bool consumed[HX_TARGETS] = {false};
    struct ibv_wc wc[16];
    int n;
    while ((n = ibv_poll_cq(v->trcq, 16, wc)) > 0)
        for (int k = 0; k < n; k++)
            if (wc[k].wr_id < HX_TARGETS)
                consumed[wc[k].wr_id] = true;
    while ((n = ibv_poll_cq(v->udcq, 16, wc)) > 0)
        for (int k = 0; k < n; k++)
            if (wc[k].opcode == IBV_WC_RECV && wc[k].wr_id < HX_UD_RECVS)
                post_recv(v->ud, wc[k].wr_id, v->udbuf + wc[k].wr_id * HX_UD_SLOT, HX_UD_RECV_LEN,
                          v->mr_udbuf->lkey);
    unsigned revived = 0;
    for (uint32_t i = 0; i < HX_TARGETS; i++) {
        if (i == HX_T_PING)
            continue;
        struct ibv_qp_attr a;
        struct ibv_qp_init_attr ia;
        if (ibv_query_qp(v->t[i], &a, IBV_QP_STATE, &ia))
            die("query_qp");
        if (a.qp_state == IBV_QPS_ERR) {
            struct ibv_qp_attr r = {.qp_state = IBV_QPS_RESET};
            if (ibv_modify_qp(v->t[i], &r, IBV_QP_STATE))
                die("modify to RESET");
            /* A fuzz packet may kill it again in RTR: the next round retries. */
            if (qp_connect_err(v->t[i], i == HX_T_NOWRITE ? IBV_ACCESS_REMOTE_READ : TARGET_ACCESS,
                               IBV_MTU_1024, h->gid_a, h->fake_qpn_base + i, info->rq_psn[i],
                               info->sq_psn[i], TIMEOUT_67MS))
                continue;
            consumed[i] = true;
            revived++;
        }
        if (consumed[i] && i != HX_T_SEQ)
            post_recv(v->t[i], i, v->rbuf + i * HX_RECV_SLOT, HX_RECV_LEN, v->mr_rbuf->lkey);
    }
    return revived;
}

static void check_qps(struct victim *v, const struct hx_done *dn)
{
    for (uint32_t i = 0; i < HX_TARGETS; i++) {
        struct ibv_qp_attr a;
        struct ibv_qp_init_attr ia;
        if (ibv_query_qp(v->t[i], &a, IBV_QP_STATE, &ia)) {
            fail("query target %u", i);
            continue;
        }
        if (dn->state[i] >= 0 && (int)a.qp_state != dn->state[i])
            fail("target %u (QPN 0x%x): state %d, want %d", i, v->t[i]->qp_num, a.qp_state,
                 dn->state[i]);
    }

    struct ibv_qp_attr ua;
    struct ibv_qp_init_attr uia;
    if (ibv_query_qp(v->uc, &ua, IBV_QP_STATE, &uia) ||
        (dn->uc_state >= 0 && (int)ua.qp_state != dn->uc_state))
        fail("UC QP: state %d, want %d", ua.qp_state, dn->uc_state);

    /* Receive completions: the target index is the wr_id. */
    int got[HX_TARGETS], status[HX_TARGETS];
    uint32_t len[HX_TARGETS];
    memset(got, 0, sizeof(got));
    for (int round = 0; round < 200; round++) {
        struct ibv_wc wc[16];
        int n = ibv_poll_cq(v->trcq, 16, wc);
        for (int k = 0; k < n; k++) {
            uint64_t i = wc[k].wr_id;
            if (i >= HX_TARGETS) {
                fail("receive completion with wr_id %llu", (unsigned long long)i);
                continue;
            }
            got[i]++;
            status[i] = wc[k].status;
            len[i] = wc[k].byte_len;
        }
        if (n <= 0)
            nap_us(200);
    }
    for (uint32_t i = 0; i < HX_TARGETS; i++) {
        int want = dn->recv_status[i];
        if (want == -2)
            continue;
        if (want == -1 && got[i])
            fail("target %u: unexpected receive completion (%s)", i, ibv_wc_status_str(status[i]));
        if (want >= 0 && got[i] != 1)
            fail("target %u: %d receive completions, want 1 (%s)", i, got[i],
                 ibv_wc_status_str(want));
        if (want >= 0 && got[i] == 1 && status[i] != want)
            fail("target %u: receive completed with %s, want %s", i, ibv_wc_status_str(status[i]),
                 ibv_wc_status_str(want));
        if (want == IBV_WC_SUCCESS && got[i] == 1 && len[i] != dn->recv_len[i])
            fail("target %u: receive byte_len %u, want %u", i, len[i], dn->recv_len[i]);
    }

    /* UD: the two datagrams the attacker sent with the right Q_Key. */
    int ud_ok = 0;
    for (int round = 0; round < 20; round++) {
        struct ibv_wc wc;
        int n = ibv_poll_cq(v->udcq, 1, &wc);
        if (n <= 0) {
            nap_us(1000);
            continue;
        }
        if (wc.status != IBV_WC_SUCCESS || wc.opcode != IBV_WC_RECV) {
            fail("UD completion: %s opcode %d", ibv_wc_status_str(wc.status), wc.opcode);
            continue;
        }
        ud_ok++;
        if ((dn->ud_src_qpn != 0xffffffffu && wc.src_qp != dn->ud_src_qpn) ||
            !(wc.wc_flags & IBV_WC_GRH))
            fail("UD completion: src_qp 0x%x flags 0x%x", wc.src_qp, wc.wc_flags);
    }
    if (dn->ud_recvs >= 0 && ud_ok != dn->ud_recvs)
        fail("UD: %d successful receives, want %d", ud_ok, dn->ud_recvs);

    /* IBA 11.6.3.1: a responder that NAKs a request as invalid or as an
     * access violation reports an affiliated asynchronous error on its QP
     * (IBV_EVENT_QP_REQ_ERR / IBV_EVENT_QP_ACCESS_ERR). */
    int ev[HX_TARGETS];
    for (uint32_t i = 0; i < HX_TARGETS; i++)
        ev[i] = -1;
    int flags = fcntl(v->d.ctx->async_fd, F_GETFL);
    fcntl(v->d.ctx->async_fd, F_SETFL, flags | O_NONBLOCK);
    for (int k = 0; k < 256; k++) {
        struct ibv_async_event e;
        if (ibv_get_async_event(v->d.ctx, &e))
            break;
        for (uint32_t i = 0; i < HX_TARGETS; i++)
            if (e.element.qp == v->t[i] && ev[i] < 0)
                ev[i] = e.event_type;
        ibv_ack_async_event(&e);
    }
    int want_events = 0, missing = 0, wrong = 0;
    for (uint32_t i = 0; i < HX_TARGETS; i++) {
        if (dn->event[i] == -2)
            continue;
        if (dn->event[i] >= 0)
            want_events++;
        if (dn->event[i] >= 0 && ev[i] < 0)
            missing++;
        else if (dn->event[i] != ev[i]) {
            wrong++;
            fail("target %u: async event %d, want %d", i, ev[i], dn->event[i]);
        }
    }
    if (missing && missing == want_events && !wrong) {
        known_bugs++;
        printf("[victim] KNOWN_BUG_NO_RESPONDER_ASYNC_EVENT: check skipped: none of the %d "
               "target QPs a NAK moved to Error got IBV_EVENT_QP_ACCESS_ERR / "
               "IBV_EVENT_QP_REQ_ERR (IBA 11.6.3.1); the application learns of it only by "
               "querying the QP\n",
               want_events);
        fflush(stdout);
    } else if (missing) {
        fail("%d of %d expected async events missing", missing, want_events);
    }
}

int main(int argc, char **argv)
{
    int oob = -1;
    if (argc == 3 && !strcmp(argv[1], "--oob"))
        oob = atoi(argv[2]);
    if (oob < 0) {
        fprintf(stderr, "usage: %s --oob <fd> (spawned by hostile_attacker)\n", argv[0]);
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    struct hx_hello h;
    if (!hx_read_full(oob, &h, sizeof(h), hx_now_ms() + OOB_MS) || h.magic != HX_MAGIC)
        die("no hello from the attacker");

    /* The peer first: verbs objects never cross a fork. */
    int sp[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp))
        die("socketpair");
    pid_t peer = fork();
    if (peer < 0)
        die("fork");
    if (peer == 0) {
        close(sp[0]);
        close(oob);
        _exit(peer_main(sp[1]));
    }
    close(sp[1]);

    struct victim v;
    memset(&v, 0, sizeof(v));
    dev_open(&v.d);
    v.region = guarded_alloc(HX_REGION_LEN);
    v.rbuf = guarded_alloc(HX_PAGE);
    v.udbuf = guarded_alloc(HX_PAGE);
    v.lbuf = guarded_alloc(HX_PAGE);
    canary_fill(v.region, HX_REGION_LEN, HX_SEED_REGION);
    canary_fill(v.rbuf, HX_PAGE, HX_SEED_RBUF);
    canary_fill(v.udbuf, HX_PAGE, HX_SEED_UDBUF);
    canary_fill(v.lbuf, HX_PAGE, HX_SEED_LBUF);
    struct ibv_pd *pd = v.d.pd;
    v.mr_a = ibv_reg_mr(pd, v.region + HX_A_OFF, HX_A_LEN,
                        IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                            IBV_ACCESS_REMOTE_ATOMIC);
    v.mr_b = ibv_reg_mr(pd, v.region + HX_B_OFF, HX_B_LEN, IBV_ACCESS_REMOTE_READ);
    v.mr_rbuf = ibv_reg_mr(pd, v.rbuf, HX_PAGE, IBV_ACCESS_LOCAL_WRITE);
    v.mr_udbuf = ibv_reg_mr(pd, v.udbuf, HX_PAGE, IBV_ACCESS_LOCAL_WRITE);
    v.mr_lbuf = ibv_reg_mr(pd, v.lbuf, HX_PAGE, IBV_ACCESS_LOCAL_WRITE);
    if (!v.mr_a || !v.mr_b || !v.mr_rbuf || !v.mr_udbuf || !v.mr_lbuf)
        die("ibv_reg_mr");

    struct hx_info info;
    memset(&info, 0, sizeof(info));
    info.magic = HX_MAGIC;
    memcpy(info.gid, v.d.gid, 16);
    info.region = (uintptr_t)v.region;
    info.rkey_a = v.mr_a->rkey;
    info.rkey_b = v.mr_b->rkey;
    setup_targets(&v, &h, &info);
    if (h.mode == HX_MODE_CLASSES)
        post_requests(&v);

    /* The legitimate pair, running before the attack starts. */
    legit_setup(&v.l, &v.d);
    struct hx_legit mine, theirs;
    legit_info(&v.l, 0x424242, &mine);
    if (!hx_read_full(sp[0], &theirs, sizeof(theirs), hx_now_ms() + PEER_SETUP_MS))
        die("no legit info from the peer");
    oob_send(sp[0], &mine, sizeof(mine));
    legit_connect(&v.l, mine.psn, &theirs);
    pthread_t thr;
    if (pthread_create(&thr, NULL, legit_victim_thread, &v.l))
        die("pthread_create");
    oob_send(sp[0], "G", 1);
    char r;
    if (!hx_read_full(sp[0], &r, 1, hx_now_ms() + PEER_SETUP_MS))
        die("the legitimate pair did not complete its first iteration");
    info.legit_qpn = v.l.qp->qp_num;
    info.legit_rkey = v.l.mr->rkey;
    info.legit_va = (uintptr_t)v.l.mem;
    char gid[INET6_ADDRSTRLEN];
    inet_ntop(AF_INET6, v.d.gid, gid, sizeof(gid));
    note("ready: %s, %u targets from QPN 0x%x, UD 0x%x, legit 0x%x", gid, HX_TARGETS, info.qpn[0],
         info.ud_qpn, info.legit_qpn);
    oob_send(oob, &info, sizeof(info));

    /* The attack runs now. */
    uint32_t before = atomic_load(&v.l.iters);
    struct hx_done *dn = calloc(1, sizeof(*dn));
    if (!dn)
        die("calloc");
    unsigned revived = 0;
    for (uint64_t end = hx_now_ms() + OOB_MS; hx_now_ms() < end;) {
        struct pollfd pf = {.fd = oob, .events = POLLIN};
        if (poll(&pf, 1, 2) == 1)
            break;
        if (h.mode == HX_MODE_FUZZ)
            revived += revive(&v, &h, &info);
    }
    if (!hx_read_full(oob, dn, sizeof(*dn), hx_now_ms() + OOB_MS) || dn->magic != HX_MAGIC)
        die("no done from the attacker");
    if (h.mode == HX_MODE_FUZZ) {
        revived += revive(&v, &h, &info);
        note("fuzz: %u target QPs killed by error NAKs were reset and connected again", revived);
    }
    uint32_t during = atomic_load(&v.l.iters) - before;

    /* The peer reports after the echo of its last message: by then the
     * thread has checked everything it will get. */
    oob_send(sp[0], "S", 1);
    struct hx_peer_report pr = {0, 1};
    if (!hx_read_full(sp[0], &pr, sizeof(pr), hx_now_ms() + PEER_SETUP_MS))
        fail("no report from the peer");
    atomic_store(&v.l.stop, true);
    pthread_join(thr, NULL);
    int st = 0;
    uint64_t end = hx_now_ms() + PEER_SETUP_MS;
    while (waitpid(peer, &st, WNOHANG) == 0 && hx_now_ms() < end)
        nap_us(1000);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        fail("peer exited with status 0x%x", st);
    uint32_t iters = atomic_load(&v.l.iters);
    if (!v.l.finished || v.l.errors || pr.errors || pr.iters != iters)
        fail("legitimate pair: victim %u iterations (finished %d, %u errors), peer %u (%u errors)",
             iters, v.l.finished, v.l.errors, pr.iters, pr.errors);
    else
        note("legitimate pair: %u iterations, every byte right (%u while the attack ran)", iters,
             during);

    check_area("region (MR A, MR B, unregistered page)", HX_AREA_REGION, v.region, HX_REGION_LEN,
               HX_SEED_REGION, dn);
    check_area("receive buffers", HX_AREA_RBUF, v.rbuf, HX_PAGE, HX_SEED_RBUF, dn);
    check_area("UD receive buffers", HX_AREA_UDBUF, v.udbuf, HX_PAGE, HX_SEED_UDBUF, dn);
    check_area("READ/atomic destination", HX_AREA_LBUF, v.lbuf, HX_PAGE, HX_SEED_LBUF, dn);
    check_qps(&v, dn);
    check_requests(&v, dn);

    /* Everything is destroyed the ordinary way, QPs in Error included. */
    for (uint32_t i = 0; i < HX_TARGETS; i++)
        if (ibv_destroy_qp(v.t[i]))
            fail("destroy target %u", i);
    if (ibv_destroy_qp(v.ud) || ibv_destroy_qp(v.uc) || ibv_destroy_qp(v.init) ||
        ibv_destroy_cq(v.tcq) || ibv_destroy_cq(v.trcq) || ibv_destroy_cq(v.udcq) ||
        ibv_dereg_mr(v.mr_a) || ibv_dereg_mr(v.mr_b) || ibv_dereg_mr(v.mr_rbuf) ||
        ibv_dereg_mr(v.mr_udbuf) || ibv_dereg_mr(v.mr_lbuf))
        fail("teardown");
    legit_teardown(&v.l);
    if (ibv_dealloc_pd(v.d.pd))
        fail("dealloc_pd");
    note("closing device");
    ibv_close_device(v.d.ctx);
    struct hx_report rep = {
        .magic = HX_MAGIC,
        .failures = failures,
        .known_bugs = known_bugs,
        .legit_iters = iters,
        .legit_during = during,
        .legit_errors = v.l.errors + pr.errors,
    };
    oob_send(oob, &rep, sizeof(rep));
    free(dn);
    return failures ? 1 : 0;
}

/* vt.c: the verbs test harness (see vt.h): supervisor and case processes,
 * checks, out-of-band exchange, device/QP helpers and the agent peer. */
#include "vt.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

int vt_failures;
const char *vt_role = "supervisor";
const char *vt_ctx = "";

static pid_t vt_child = -1; /* the peer of the case process, until reaped */
static bool vt_child_ok;

/* ---- time ---- */
uint64_t vt_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

void vt_sleep_ms(int ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) && errno == EINTR)
        ;
}

static void sleep_us(long us)
{
    struct timespec ts = {.tv_sec = 0, .tv_nsec = us * 1000L};
    nanosleep(&ts, NULL);
}

/* ---- checks ---- */
static void vprint(const char *kind, const char *file, int line, const char *fmt, va_list ap)
{
    char msg[1024];
    vsnprintf(msg, sizeof(msg), fmt, ap);
    if (file)
        printf("[%s%s%s] %s %s:%d: %s\n", vt_role, *vt_ctx ? ":" : "", vt_ctx, kind, file, line,
               msg);
    else
        printf("[%s%s%s] %s%s\n", vt_role, *vt_ctx ? ":" : "", vt_ctx, kind, msg);
    fflush(stdout);
}

bool vt_check(bool ok, const char *file, int line, const char *fmt, ...)
{
    if (ok)
        return true;
    vt_failures++;
    va_list ap;
    va_start(ap, fmt);
    vprint("FAIL", file, line, fmt, ap);
    va_end(ap);
    return false;
}

bool vt_check_eq(long long got, long long want, const char *file, int line, const char *got_s,
                 const char *want_s)
{
    return vt_check(got == want, file, line, "%s == %s: got %lld, want %lld", got_s, want_s, got,
                    want);
}

bool vt_check_eqx(uint64_t got, uint64_t want, const char *file, int line, const char *got_s,
                  const char *want_s)
{
    return vt_check(got == want, file, line, "%s == %s: got 0x%llx, want 0x%llx", got_s, want_s,
                    (unsigned long long)got, (unsigned long long)want);
}

_Noreturn void vt_fatal(const char *file, int line, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vprint("FATAL", file, line, fmt, ap);
    va_end(ap);
    if (vt_child > 0)
        kill(vt_child, SIGKILL);
    fflush(stdout);
    /* _exit: no leak report or atexit work from a process already failing */
    _exit(1);
}

void vt_note(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vprint("note: ", NULL, 0, fmt, ap);
    va_end(ap);
}

void vt_known_bug(const char *id, const char *fmt, ...)
{
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    printf("[%s%s%s] KNOWN_BUG_%s: check skipped: %s\n", vt_role, *vt_ctx ? ":" : "", vt_ctx, id,
           msg);
    fflush(stdout);
}

/* ---- processes ---- */
static bool status_ok(int st)
{
    return WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

static void describe_status(const char *who, int st)
{
    if (WIFEXITED(st))
        printf("[%s] %s exited with status %d\n", vt_role, who, WEXITSTATUS(st));
    else if (WIFSIGNALED(st))
        printf("[%s] %s killed by signal %d\n", vt_role, who, WTERMSIG(st));
    fflush(stdout);
}

/* Waits for pid until timeout_ms; -1 on timeout (the process is left). */
static int wait_deadline(pid_t pid, int timeout_ms, int *st)
{
    uint64_t end = vt_now_ms() + (uint64_t)timeout_ms;
    for (;;) {
        pid_t r = waitpid(pid, st, WNOHANG);
        if (r == pid)
            return 0;
        if (r < 0 && errno != EINTR)
            return -1;
        if (vt_now_ms() >= end)
            return -1;
        vt_sleep_ms(5);
    }
}

bool vt_wait_child(int timeout_ms)
{
    if (vt_child <= 0)
        return vt_child_ok;
    int st = 0;
    if (wait_deadline(vt_child, timeout_ms, &st) < 0) {
        VT_CHECKF(false, "child did not exit within %d ms: killed", timeout_ms);
        kill(vt_child, SIGKILL);
        waitpid(vt_child, &st, 0);
        vt_child = -1;
        vt_child_ok = false;
        return false;
    }
    vt_child = -1;
    vt_child_ok = status_ok(st);
    if (!vt_child_ok)
        describe_status("child", st);
    return vt_child_ok;
}

/* The case process: parent side of one case, with its peer. */
static int run_case(const struct vt_case *c)
{
    vt_role = "parent";
    int sv[2];
    VT_REQUIRE(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
    fflush(stdout);
    pid_t pid = fork();
    VT_REQUIRE(pid >= 0);
    if (pid == 0) {
        vt_role = "child";
        close(sv[0]);
        if (c->child)
            c->child(sv[1], c->arg);
        else
            vt_agent_serve(sv[1], c->arg);
        close(sv[1]);
        fflush(stdout);
        exit(vt_failures ? 1 : 0);
    }
    close(sv[1]);
    vt_child = pid;
    vt_child_ok = false;
    c->parent(sv[0], c->arg);
    /* EOF tells an agent that the case is over */
    close(sv[0]);
    bool child_ok = vt_wait_child(VT_OOB_MS);
    VT_CHECKF(child_ok, "child process reported failure");
    fflush(stdout);
    return vt_failures ? 1 : 0;
}

static bool run_supervised(const struct vt_case *c)
{
    uint64_t t0 = vt_now_ms();
    printf("=== %s\n", c->name);
    fflush(stdout);
    pid_t pid = fork();
    VT_REQUIRE(pid >= 0);
    if (pid == 0) {
        /* own process group: a hung case is killed with its peer */
        setpgid(0, 0);
        exit(run_case(c));
    }
    setpgid(pid, pid);
    int st = 0;
    bool ok;
    if (wait_deadline(pid, VT_CASE_S * 1000, &st) < 0) {
        printf("[supervisor] %s: TIMEOUT after %d s: killing the case's processes\n", c->name,
               VT_CASE_S);
        kill(-pid, SIGKILL);
        waitpid(pid, &st, 0);
        ok = false;
    } else {
        ok = status_ok(st);
        if (!ok)
            describe_status(c->name, st);
    }
    printf("--- %s %s (%llu ms)\n", ok ? "PASS" : "FAIL", c->name,
           (unsigned long long)(vt_now_ms() - t0));
    fflush(stdout);
    return ok;
}

int vt_main(int argc, char **argv, const struct vt_case *cases, size_t n_cases)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    /* a peer that went away must fail a write, not kill the writer */
    signal(SIGPIPE, SIG_IGN);
    const char *want = argc > 1 ? argv[1] : NULL;
    int ran = 0, failed = 0;
    for (size_t i = 0; i < n_cases; i++) {
        if (want && strcmp(want, cases[i].name) != 0)
            continue;
        ran++;
        if (!run_supervised(&cases[i]))
            failed++;
    }
    if (!ran) {
        printf("no case named %s\n", want ? want : "(none)");
        return 2;
    }
    printf("%d case(s), %d failed\n", ran, failed);
    return failed ? 1 : 0;
}

/* ---- out of band ---- */
void vt_send(int fd, const void *p, size_t len)
{
    const uint8_t *b = p;
    while (len) {
        ssize_t n = send(fd, b, len, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            vt_fatal(__FILE__, __LINE__, "out-of-band send: %s", strerror(errno));
        b += n;
        len -= (size_t)n;
    }
}

/* 1 on success, 0 on EOF before the first byte, fatal otherwise. */
static int recv_some(int fd, void *p, size_t len, int timeout_ms, bool eof_ok)
{
    uint8_t *b = p;
    size_t got = 0;
    uint64_t end = vt_now_ms() + (uint64_t)timeout_ms;
    while (got < len) {
        uint64_t now = vt_now_ms();
        if (now >= end)
            vt_fatal(__FILE__, __LINE__, "out-of-band reply: nothing within %d ms", timeout_ms);
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        int r = poll(&pfd, 1, (int)(end - now));
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            continue;
        ssize_t n = recv(fd, b + got, len - got, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n == 0 && got == 0 && eof_ok)
            return 0;
        if (n <= 0)
            vt_fatal(__FILE__, __LINE__, "out-of-band receive: %s",
                     n == 0 ? "peer closed the connection" : strerror(errno));
        got += (size_t)n;
    }
    return 1;
}

void vt_recv(int fd, void *p, size_t len, int timeout_ms)
{
    recv_some(fd, p, len, timeout_ms, false);
}

void vt_sync(int fd)
{
    uint8_t b = 0x5a;
    vt_send(fd, &b, 1);
    vt_recv(fd, &b, 1, VT_OOB_MS);
    VT_REQUIRE(b == 0x5a);
}

/* ---- patterns ---- */
uint8_t vt_pat(uint32_t seed, uint64_t pos)
{
    /* splitmix64 finaliser: no short period, so a shifted copy shows */
    uint64_t x = pos + 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    x ^= x >> 31;
    return (uint8_t)(x + seed);
}

void vt_pat_fill(void *p, size_t len, uint32_t seed, uint64_t pos)
{
    uint8_t *b = p;
    for (size_t i = 0; i < len; i++)
        b[i] = vt_pat(seed, pos + i);
}

long long vt_pat_diff(const void *p, size_t len, uint32_t seed, uint64_t pos)
{
    const uint8_t *b = p;
    for (size_t i = 0; i < len; i++)
        if (b[i] != vt_pat(seed, pos + i))
            return (long long)i;
    return -1;
}

/* ---- device and memory ---- */
void vt_dev_open(struct vt_dev *d)
{
    memset(d, 0, sizeof(*d));
    int n = 0;
    struct ibv_device **list = ibv_get_device_list(&n);
    VT_REQUIRE(list && n >= 1);
    /* the tests are about softrdma: refuse to run on another libibverbs */
    VT_REQUIRE(strcmp(ibv_get_device_name(list[0]), "srdma0") == 0);
    d->ctx = ibv_open_device(list[0]);
    ibv_free_device_list(list);
    VT_REQUIRE(d->ctx);
    VT_REQUIRE(ibv_query_device(d->ctx, &d->attr) == 0);
    VT_REQUIRE(ibv_query_port(d->ctx, 1, &d->port) == 0);
    VT_REQUIRE(ibv_query_gid(d->ctx, 1, 0, &d->gid) == 0);
    d->pd = ibv_alloc_pd(d->ctx);
    VT_REQUIRE(d->pd);
}

void vt_dev_close(struct vt_dev *d)
{
    if (d->pd)
        VT_EQ(ibv_dealloc_pd(d->pd), 0);
    if (d->ctx)
        VT_EQ(ibv_close_device(d->ctx), 0);
    d->pd = NULL;
    d->ctx = NULL;
}

void vt_buf_alloc(struct vt_dev *d, struct vt_buf *b, size_t len, int access)
{
    void *p = NULL;
    VT_REQUIRE(posix_memalign(&p, 4096, len ? len : 1) == 0);
    memset(p, 0, len);
    b->p = p;
    b->len = len;
    b->mr = ibv_reg_mr(d->pd, p, len, access);
    VT_REQUIRE(b->mr);
}

void vt_buf_free(struct vt_buf *b)
{
    if (b->mr)
        VT_EQ(ibv_dereg_mr(b->mr), 0);
    free(b->p);
    memset(b, 0, sizeof(*b));
}

/* ---- queue pairs ---- */
void vt_caps_default(struct vt_qp_caps *c)
{
    memset(c, 0, sizeof(*c));
    c->max_send_wr = 64;
    c->max_recv_wr = 64;
    c->max_send_sge = 4;
    c->max_recv_sge = 4;
    c->cqe = 256;
}

void vt_qp_create(struct vt_dev *d, struct vt_qp *q, const struct vt_qp_caps *c, struct ibv_cq *scq,
                  struct ibv_cq *rcq, struct ibv_srq *srq)
{
    static uint32_t counter;
    memset(q, 0, sizeof(*q));
    if (!scq) {
        scq = ibv_create_cq(d->ctx, c->cqe, NULL, NULL, 0);
        VT_REQUIRE(scq);
        q->own_scq = true;
    }
    if (!rcq && c->share_cq) {
        rcq = scq;
    } else if (!rcq) {
        rcq = ibv_create_cq(d->ctx, c->cqe, NULL, NULL, 0);
        VT_REQUIRE(rcq);
        q->own_rcq = true;
    }
    q->scq = scq;
    q->rcq = rcq;
    struct ibv_qp_cap cap = {
        .max_send_wr = c->max_send_wr,
        .max_recv_wr = srq ? 0 : c->max_recv_wr,
        .max_send_sge = c->max_send_sge,
        .max_recv_sge = c->max_recv_sge,
        .max_inline_data = c->max_inline,
    };
    if (c->qp_ex) {
        struct ibv_qp_init_attr_ex a = {
            .send_cq = scq,
            .recv_cq = rcq,
            .srq = srq,
            .cap = cap,
            .qp_type = IBV_QPT_RC,
            .sq_sig_all = c->sq_sig_all,
            .comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
            .pd = d->pd,
            .send_ops_flags = IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM |
                              IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM |
                              IBV_QP_EX_WITH_RDMA_READ | IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP |
                              IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD,
        };
        q->qp = ibv_create_qp_ex(d->ctx, &a);
        VT_REQUIRE(q->qp);
        q->qpx = ibv_qp_to_qp_ex(q->qp);
        VT_REQUIRE(q->qpx);
    } else {
        struct ibv_qp_init_attr a = {
            .send_cq = scq,
            .recv_cq = rcq,
            .srq = srq,
            .cap = cap,
            .qp_type = IBV_QPT_RC,
            .sq_sig_all = c->sq_sig_all,
        };
        q->qp = ibv_create_qp(d->pd, &a);
        VT_REQUIRE(q->qp);
    }
    /* a PSN per QP, differing between processes and QPs */
    q->psn = ((uint32_t)getpid() * 2654435761u + ++counter * 40503u) & 0xffffffu;
}

void vt_qp_destroy(struct vt_qp *q)
{
    if (q->qp)
        VT_EQ(ibv_destroy_qp(q->qp), 0);
    if (q->own_scq)
        VT_EQ(ibv_destroy_cq(q->scq), 0);
    if (q->own_rcq)
        VT_EQ(ibv_destroy_cq(q->rcq), 0);
    memset(q, 0, sizeof(*q));
}

void vt_qp_info(const struct vt_dev *d, const struct vt_qp *q, struct vt_qp_info *out)
{
    memset(out, 0, sizeof(*out));
    out->qpn = q->qp->qp_num;
    out->psn = q->psn;
    memcpy(out->gid, d->gid.raw, 16);
}

void vt_conn_default(const struct vt_dev *d, struct vt_conn *c)
{
    memset(c, 0, sizeof(*c));
    c->access = VT_ACCESS_ALL;
    c->mtu = d->port.active_mtu;
    c->timeout = 14; /* 4.096 us * 2^14 = 67 ms */
    c->retry_cnt = 7;
    c->rnr_retry = 7; /* forever: a late receive is waited for, within the poll deadline */
    c->min_rnr_timer = 1;
    int rd = d->attr.max_qp_rd_atom;
    c->max_rd_atomic = (uint8_t)(rd > 16 ? 16 : rd < 1 ? 1 : rd);
}

int vt_qp_connect(struct vt_qp *q, const struct vt_qp_info *remote, const struct vt_conn *c)
{
    struct ibv_qp_attr a;
    memset(&a, 0, sizeof(a));
    a.qp_state = IBV_QPS_INIT;
    a.pkey_index = 0;
    a.port_num = 1;
    a.qp_access_flags = (unsigned int)c->access;
    int r = ibv_modify_qp(q->qp, &a,
                          IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
    if (r)
        return r;
    memset(&a, 0, sizeof(a));
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = c->mtu;
    a.dest_qp_num = remote->qpn;
    a.rq_psn = remote->psn;
    a.max_dest_rd_atomic = c->max_rd_atomic;
    a.min_rnr_timer = c->min_rnr_timer;
    a.ah_attr.is_global = 1;
    memcpy(a.ah_attr.grh.dgid.raw, remote->gid, 16);
    a.ah_attr.grh.sgid_index = 0;
    a.ah_attr.grh.hop_limit = 64;
    a.ah_attr.port_num = 1;
    r = ibv_modify_qp(q->qp, &a,
                      IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                          IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
    if (r)
        return r;
    memset(&a, 0, sizeof(a));
    a.qp_state = IBV_QPS_RTS;
    a.sq_psn = q->psn;
    a.timeout = c->timeout;
    a.retry_cnt = c->retry_cnt;
    a.rnr_retry = c->rnr_retry;
    a.max_rd_atomic = c->max_rd_atomic;
    return ibv_modify_qp(q->qp, &a,
                         IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                             IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
}

enum ibv_qp_state vt_qp_state(struct ibv_qp *qp)
{
    struct ibv_qp_attr a;
    struct ibv_qp_init_attr ia;
    memset(&a, 0, sizeof(a));
    if (!VT_EQ(ibv_query_qp(qp, &a, IBV_QP_STATE, &ia), 0))
        return (enum ibv_qp_state) - 1;
    return a.qp_state;
}

/* ---- completions ---- */
int vt_poll(struct ibv_cq *cq, int n, struct ibv_wc *wc, int timeout_ms)
{
    uint64_t end = vt_now_ms() + (uint64_t)timeout_ms;
    int got = 0;
    while (got < n) {
        int r = ibv_poll_cq(cq, n - got, wc + got);
        if (!VT_CHECKF(r >= 0, "ibv_poll_cq returned %d", r))
            break;
        got += r;
        if (got == n || vt_now_ms() >= end)
            break;
        if (r == 0)
            sleep_us(20);
    }
    return got;
}

int vt_poll_none(struct ibv_cq *cq, int ms)
{
    uint64_t end = vt_now_ms() + (uint64_t)ms;
    int seen = 0;
    do {
        struct ibv_wc wc;
        int r = ibv_poll_cq(cq, 1, &wc);
        if (r > 0) {
            seen++;
            vt_note("completion: wr_id 0x%llx status %s opcode %d", (unsigned long long)wc.wr_id,
                    ibv_wc_status_str(wc.status), (int)wc.opcode);
        } else {
            sleep_us(200);
        }
    } while (vt_now_ms() < end);
    return seen;
}

bool vt_expect_wc(struct ibv_cq *cq, uint64_t wr_id, enum ibv_wc_status status, struct ibv_wc *out)
{
    struct ibv_wc wc;
    memset(&wc, 0, sizeof(wc));
    int n = vt_poll(cq, 1, &wc, VT_POLL_MS);
    if (out)
        *out = wc;
    if (!VT_CHECKF(n == 1, "no completion for wr_id 0x%llx within %d ms", (unsigned long long)wr_id,
                   VT_POLL_MS))
        return false;
    bool ok = VT_EQX(wc.wr_id, wr_id);
    ok &= VT_CHECKF(wc.status == status, "wr_id 0x%llx: status %s (%d), want %s (%d)",
                    (unsigned long long)wc.wr_id, ibv_wc_status_str(wc.status), (int)wc.status,
                    ibv_wc_status_str(status), (int)status);
    return ok;
}

/* ---- the agent ---- */
enum agent_cmd {
    A_HELLO = 1,
    A_QP_CREATE,
    A_QP_CONNECT,
    A_QP_DESTROY,
    A_QP_STATE,
    A_MR_REG,
    A_MR_DEREG,
    A_FILL,
    A_DIFF,
    A_GET_U64,
    A_SET_U64,
    A_POST_RECV,
    A_POLL_RECV,
    A_POST_SEND,
    A_EXIT,
};

struct agent_req {
    uint32_t cmd, slot, mr, seed;
    uint64_t off, len, pos, value, wr_id;
    int32_t access, timeout_ms;
    bool default_conn;
    uint32_t nsge;
    struct vt_sge sge[VT_MAX_SGE];
    struct vt_send_req send;
    struct vt_qp_caps caps;
    struct vt_qp_info remote;
    struct vt_conn conn;
};

struct agent_rep {
    int32_t status;
    uint64_t value;
    long long diff;
    struct vt_qp_info info;
    struct vt_remote_mr mr;
    struct ibv_wc wc;
};

struct agent {
    struct vt_dev d;
    struct vt_buf mr[VT_AGENT_MRS];
    struct vt_qp qp[VT_AGENT_QPS];
    uint64_t send_id;
};

static struct vt_qp *agent_qp(struct agent *a, uint32_t slot)
{
    VT_REQUIRE(slot < VT_AGENT_QPS && a->qp[slot].qp);
    return &a->qp[slot];
}

static uint8_t *agent_mem(struct agent *a, uint32_t mr, uint64_t off, uint64_t len)
{
    VT_REQUIRE(mr < VT_AGENT_MRS && a->mr[mr].mr);
    VT_REQUIRE(off <= a->mr[mr].len && len <= a->mr[mr].len - off);
    return a->mr[mr].p + off;
}

static void agent_sges(struct agent *a, uint32_t n, const struct vt_sge *in, struct ibv_sge *out)
{
    VT_REQUIRE(n <= VT_MAX_SGE);
    for (uint32_t i = 0; i < n; i++) {
        out[i].addr = (uintptr_t)agent_mem(a, in[i].mr, in[i].off, in[i].len);
        out[i].length = in[i].len;
        out[i].lkey = a->mr[in[i].mr].mr->lkey;
    }
}

static void agent_close(struct agent *a)
{
    for (int i = 0; i < VT_AGENT_QPS; i++)
        if (a->qp[i].qp)
            vt_qp_destroy(&a->qp[i]);
    for (int i = 0; i < VT_AGENT_MRS; i++)
        if (a->mr[i].mr)
            vt_buf_free(&a->mr[i]);
    vt_dev_close(&a->d);
}

static void agent_post_send(struct agent *a, const struct agent_req *q, struct agent_rep *r)
{
    struct vt_qp *qp = agent_qp(a, q->slot);
    struct ibv_sge sge[VT_MAX_SGE];
    agent_sges(a, q->send.nsge, q->send.sge, sge);
    struct ibv_send_wr wr, *bad = NULL;
    memset(&wr, 0, sizeof(wr));
    wr.wr_id = 0xa9e0000000000000ull | ++a->send_id;
    wr.sg_list = sge;
    wr.num_sge = (int)q->send.nsge;
    wr.opcode = q->send.opcode;
    wr.send_flags = q->send.send_flags | IBV_SEND_SIGNALED;
    wr.imm_data = q->send.imm_data;
    wr.wr.rdma.remote_addr = q->send.remote_addr;
    wr.wr.rdma.rkey = q->send.rkey;
    r->status = ibv_post_send(qp->qp, &wr, &bad);
    if (r->status)
        return;
    if (vt_poll(qp->scq, 1, &r->wc, VT_POLL_MS) != 1) {
        memset(&r->wc, 0, sizeof(r->wc));
        r->wc.status = IBV_WC_GENERAL_ERR;
    }
}

void vt_agent_serve(int fd, const void *arg)
{
    (void)arg;
    static struct agent a; /* large; one per child process */
    memset(&a, 0, sizeof(a));
    vt_dev_open(&a.d);
    vt_buf_alloc(&a.d, &a.mr[0], VT_AGENT_MR_LEN, VT_ACCESS_ALL);
    for (;;) {
        struct agent_req q;
        /* the driving side may be busy for long: wait up to a whole case */
        if (!recv_some(fd, &q, sizeof(q), VT_CASE_S * 1000, true))
            break; /* EOF: the case is over */
        struct agent_rep r;
        memset(&r, 0, sizeof(r));
        switch (q.cmd) {
        case A_HELLO:
            r.mr = (struct vt_remote_mr){.addr = (uintptr_t)a.mr[0].p,
                                         .rkey = a.mr[0].mr->rkey,
                                         .slot = 0,
                                         .len = a.mr[0].len};
            break;
        case A_QP_CREATE:
            VT_REQUIRE(q.slot < VT_AGENT_QPS && !a.qp[q.slot].qp);
            vt_qp_create(&a.d, &a.qp[q.slot], &q.caps, NULL, NULL, NULL);
            vt_qp_info(&a.d, &a.qp[q.slot], &r.info);
            break;
        case A_QP_CONNECT: {
            struct vt_conn c = q.conn;
            if (q.default_conn)
                vt_conn_default(&a.d, &c);
            r.status = vt_qp_connect(agent_qp(&a, q.slot), &q.remote, &c);
            break;
        }
        case A_QP_DESTROY:
            vt_qp_destroy(agent_qp(&a, q.slot));
            break;
        case A_QP_STATE:
            r.value = (uint64_t)vt_qp_state(agent_qp(&a, q.slot)->qp);
            break;
        case A_MR_REG: {
            uint32_t s = 1;
            while (s < VT_AGENT_MRS && a.mr[s].p)
                s++;
            VT_REQUIRE(s < VT_AGENT_MRS);
            void *p = NULL;
            VT_REQUIRE(posix_memalign(&p, 4096, q.len) == 0);
            memset(p, 0, q.len);
            struct ibv_mr *mr = ibv_reg_mr(a.d.pd, p, q.len, q.access);
            if (!mr) {
                r.status = errno;
                free(p);
                break;
            }
            a.mr[s] = (struct vt_buf){.p = p, .len = q.len, .mr = mr};
            r.mr = (struct vt_remote_mr){
                .addr = (uintptr_t)p, .rkey = mr->rkey, .slot = s, .len = q.len};
            break;
        }
        case A_MR_DEREG:
            VT_REQUIRE(q.mr > 0 && q.mr < VT_AGENT_MRS && a.mr[q.mr].mr);
            vt_buf_free(&a.mr[q.mr]);
            break;
        case A_FILL:
            vt_pat_fill(agent_mem(&a, q.mr, q.off, q.len), q.len, q.seed, q.pos);
            break;
        case A_DIFF:
            r.diff = vt_pat_diff(agent_mem(&a, q.mr, q.off, q.len), q.len, q.seed, q.pos);
            break;
        case A_GET_U64:
            memcpy(&r.value, agent_mem(&a, q.mr, q.off, 8), 8);
            break;
        case A_SET_U64:
            memcpy(agent_mem(&a, q.mr, q.off, 8), &q.value, 8);
            break;
        case A_POST_RECV: {
            struct ibv_sge sge[VT_MAX_SGE];
            agent_sges(&a, q.nsge, q.sge, sge);
            struct ibv_recv_wr wr = {.wr_id = q.wr_id, .sg_list = sge, .num_sge = (int)q.nsge},
                               *bad = NULL;
            r.status = ibv_post_recv(agent_qp(&a, q.slot)->qp, &wr, &bad);
            break;
        }
        case A_POLL_RECV:
            r.status =
                vt_poll(agent_qp(&a, q.slot)->rcq, 1, &r.wc, q.timeout_ms) == 1 ? 0 : ETIMEDOUT;
            break;
        case A_POST_SEND:
            agent_post_send(&a, &q, &r);
            break;
        case A_EXIT:
            agent_close(&a);
            vt_send(fd, &r, sizeof(r));
            close(fd);
            fflush(stdout);
            exit(vt_failures ? 1 : 0);
        default:
            vt_fatal(__FILE__, __LINE__, "agent: unknown request %u", q.cmd);
        }
        vt_send(fd, &r, sizeof(r));
    }
    agent_close(&a);
}

static void agent_call(int fd, struct agent_req *q, struct agent_rep *r)
{
    vt_send(fd, q, sizeof(*q));
    vt_recv(fd, r, sizeof(*r), VT_OOB_MS);
}

static struct agent_req req(uint32_t cmd)
{
    struct agent_req q;
    memset(&q, 0, sizeof(q));
    q.cmd = cmd;
    return q;
}

void vt_agent_hello(int fd, struct vt_remote_mr *mr0)
{
    struct agent_req q = req(A_HELLO);
    struct agent_rep r;
    agent_call(fd, &q, &r);
    *mr0 = r.mr;
}

void vt_agent_qp_create(int fd, uint32_t slot, const struct vt_qp_caps *c, struct vt_qp_info *out)
{
    struct agent_req q = req(A_QP_CREATE);
    q.slot = slot;
    if (c)
        q.caps = *c;
    else
        vt_caps_default(&q.caps);
    struct agent_rep r;
    agent_call(fd, &q, &r);
    *out = r.info;
}

int vt_agent_qp_connect(int fd, uint32_t slot, const struct vt_qp_info *remote,
                        const struct vt_conn *c)
{
    struct agent_req q = req(A_QP_CONNECT);
    q.slot = slot;
    q.remote = *remote;
    if (c)
        q.conn = *c;
    else
        q.default_conn = true;
    struct agent_rep r;
    agent_call(fd, &q, &r);
    return r.status;
}

void vt_agent_qp_destroy(int fd, uint32_t slot)
{
    struct agent_req q = req(A_QP_DESTROY);
    q.slot = slot;
    struct agent_rep r;
    agent_call(fd, &q, &r);
}

enum ibv_qp_state vt_agent_qp_state(int fd, uint32_t slot)
{
    struct agent_req q = req(A_QP_STATE);
    q.slot = slot;
    struct agent_rep r;
    agent_call(fd, &q, &r);
    return (enum ibv_qp_state)r.value;
}

int vt_agent_mr_reg(int fd, uint64_t len, int access, struct vt_remote_mr *out)
{
    struct agent_req q = req(A_MR_REG);
    q.len = len;
    q.access = access;
    struct agent_rep r;
    agent_call(fd, &q, &r);
    *out = r.mr;
    return r.status;
}

void vt_agent_mr_dereg(int fd, uint32_t slot)
{
    struct agent_req q = req(A_MR_DEREG);
    q.mr = slot;
    struct agent_rep r;
    agent_call(fd, &q, &r);
}

void vt_agent_fill(int fd, uint32_t mr, uint64_t off, uint64_t len, uint32_t seed, uint64_t pos)
{
    struct agent_req q = req(A_FILL);
    q.mr = mr;
    q.off = off;
    q.len = len;
    q.seed = seed;
    q.pos = pos;
    struct agent_rep r;
    agent_call(fd, &q, &r);
}

long long vt_agent_diff(int fd, uint32_t mr, uint64_t off, uint64_t len, uint32_t seed,
                        uint64_t pos)
{
    struct agent_req q = req(A_DIFF);
    q.mr = mr;
    q.off = off;
    q.len = len;
    q.seed = seed;
    q.pos = pos;
    struct agent_rep r;
    agent_call(fd, &q, &r);
    return r.diff;
}

uint64_t vt_agent_get_u64(int fd, uint32_t mr, uint64_t off)
{
    struct agent_req q = req(A_GET_U64);
    q.mr = mr;
    q.off = off;
    struct agent_rep r;
    agent_call(fd, &q, &r);
    return r.value;
}

void vt_agent_set_u64(int fd, uint32_t mr, uint64_t off, uint64_t v)
{
    struct agent_req q = req(A_SET_U64);
    q.mr = mr;
    q.off = off;
    q.value = v;
    struct agent_rep r;
    agent_call(fd, &q, &r);
}

int vt_agent_post_recv(int fd, uint32_t slot, uint64_t wr_id, uint32_t nsge,
                       const struct vt_sge *sge)
{
    struct agent_req q = req(A_POST_RECV);
    VT_REQUIRE(nsge <= VT_MAX_SGE);
    q.slot = slot;
    q.wr_id = wr_id;
    q.nsge = nsge;
    if (nsge)
        memcpy(q.sge, sge, nsge * sizeof(*sge));
    struct agent_rep r;
    agent_call(fd, &q, &r);
    return r.status;
}

bool vt_agent_poll_recv(int fd, uint32_t slot, int timeout_ms, struct ibv_wc *wc)
{
    struct agent_req q = req(A_POLL_RECV);
    q.slot = slot;
    q.timeout_ms = timeout_ms;
    struct agent_rep r;
    agent_call(fd, &q, &r);
    *wc = r.wc;
    return r.status == 0;
}

int vt_agent_post_send(int fd, uint32_t slot, const struct vt_send_req *s, struct ibv_wc *wc)
{
    struct agent_req q = req(A_POST_SEND);
    q.slot = slot;
    q.send = *s;
    struct agent_rep r;
    agent_call(fd, &q, &r);
    if (!r.status)
        *wc = r.wc;
    return r.status;
}

void vt_agent_exit(int fd)
{
    struct agent_req q = req(A_EXIT);
    struct agent_rep r;
    agent_call(fd, &q, &r);
    VT_CHECKF(vt_wait_child(VT_OOB_MS), "agent exit status");
}

void vt_agent_pair(int fd, struct vt_dev *d, struct vt_qp *q, uint32_t slot,
                   const struct vt_qp_caps *rcaps, const struct vt_conn *lconn,
                   const struct vt_conn *rconn, struct vt_qp_info *rinfo)
{
    struct vt_qp_info li, ri;
    vt_agent_qp_create(fd, slot, rcaps, &ri);
    vt_qp_info(d, q, &li);
    VT_REQUIRE(vt_agent_qp_connect(fd, slot, &li, rconn) == 0);
    struct vt_conn c;
    if (lconn)
        c = *lconn;
    else
        vt_conn_default(d, &c);
    VT_REQUIRE(vt_qp_connect(q, &ri, &c) == 0);
    if (rinfo)
        *rinfo = ri;
}

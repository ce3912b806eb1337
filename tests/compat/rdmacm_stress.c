/* rdmacm_stress.c: the rdma_cm API (<rdma/rdma_cma.h>) under repetition,
 * a dead peer and a flood; public calls only, so it runs on any librdmacm.
 *   rdmacm_stress cycle N PORT    N connect/accept/SEND/disconnect/destroy
 *       cycles in one process (server thread, client in main) over
 *       127.0.0.1; the fd count, RSS and the device's QP table are the same
 *       after as after the first 20 (RSS within 4 MB), in a bounded time.
 *   rdmacm_stress idle PORT       a forked client connects and is SIGKILLed
 *       while neither side has anything in flight: the server's id must see
 *       DISCONNECTED within 5 s (softrdma: the CM's liveness probes).
 *   rdmacm_stress flood N PORT    a listener (backlog 8) that reads no event
 *       while a forked second CM sends N REQs: at most 8 CONNECT_REQUESTs
 *       wait, RSS grows under 4 MB, and once the flooder is gone the
 *       listener accepts a legitimate client and a SEND goes through.
 *   rdmacm_stress exit PORT       a forked client connects and returns from
 *       main with its connection open: the server's id must see
 *       DISCONNECTED within 3 s (the DREQ the exiting process's CM sends,
 *       as the kernel's does), with liveness probes off.
 *   rdmacm_stress late-server HOST PORT MS / late-client HOST PORT
 *       the server calls rdma_listen on HOST only MS ms after it starts,
 *       the client connects to HOST at once (run in two network
 *       namespaces, its REQ arrives before the listener): the connection
 *       is still made, a SEND arrives intact, and both sides see
 *       DISCONNECTED after the client's rdma_disconnect.
 *   rdmacm_stress rnr PORT        a forked client (RNR Retry Count 1) sends
 *       while the server's receive is posted only 100 ms after ESTABLISHED:
 *       the SEND completes and arrives intact, as the RNR NAK timer the
 *       CM gives a QP (the kernel's, 655.36 ms) allows.
 * Exit 0 on success, 1 with a message on failure. Every wait is bounded. */

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <rdma/rdma_cma.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "FAIL: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, " (errno %d %s)\n", errno, strerror(errno));
    va_end(ap);
    exit(1);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int fd_count(void)
{
    DIR *d = opendir("/proc/self/fd");
    int n = 0;
    if (!d)
        return -1;
    while (readdir(d))
        n++;
    closedir(d);
    return n - 3; /* ".", "..", and opendir's own */
}

/* Under ASan the quarantine keeps freed blocks resident, so RSS grows
 * with every cycle's frees; there LeakSanitizer checks for leaks instead. */
#ifndef __has_feature
#define __has_feature(x) 0
#endif
#if __has_feature(address_sanitizer) || defined(__SANITIZE_ADDRESS__)
#define RSS_CHECKED 0
#else
#define RSS_CHECKED 1
#endif

static long rss_kb(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kb = -1;
    while (f && fgets(line, sizeof(line), f))
        if (!strncmp(line, "VmRSS:", 6))
            kb = strtol(line + 6, NULL, 10);
    if (f)
        fclose(f);
    return kb;
}

/* The next event on ch within ms, or NULL. */
static struct rdma_cm_event *next_event(struct rdma_event_channel *ch, int ms)
{
    struct pollfd pf = {.fd = ch->fd, .events = POLLIN};
    struct rdma_cm_event *e;
    double end = now_s() + ms / 1000.0;
    for (;;) {
        int left = (int)((end - now_s()) * 1000);
        if (left < 0)
            return NULL;
        if (poll(&pf, 1, left) < 0 && errno != EINTR)
            die("poll");
        if (!(pf.revents & POLLIN))
            continue;
        if (!rdma_get_cm_event(ch, &e))
            return e;
        if (errno != EAGAIN)
            die("rdma_get_cm_event");
    }
}

static struct rdma_cm_event *expect(struct rdma_event_channel *ch, enum rdma_cm_event_type t,
                                    int ms, const char *what)
{
    struct rdma_cm_event *e = next_event(ch, ms);
    if (!e)
        die("%s: no %s within %d ms", what, rdma_event_str(t), ms);
    if (e->event != t)
        die("%s: %s (status %d), expected %s", what, rdma_event_str(e->event), e->status,
            rdma_event_str(t));
    return e;
}

static void nonblock(struct rdma_event_channel *ch)
{
    fcntl(ch->fd, F_SETFL, fcntl(ch->fd, F_GETFL) | O_NONBLOCK);
}

/* the address every mode connects to and listens on: 127.0.0.1, or the
 * late modes' HOST */
static const char *host = "127.0.0.1";
/* the RNR Retry Count every connect and accept asks for (7: no limit);
 * whether a new QP's receive is posted at once (the rnr mode's server
 * posts it late) */
static uint8_t rnr_retry = 7;
static bool recv_at_once = true;

static struct sockaddr_in addr_of(int port)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    if (inet_pton(AF_INET, host, &a.sin_addr) != 1)
        die("not an IPv4 address: %s", host);
    return a;
}

/* A QP with one receive posted into buf (its MR on the id's PD). */
struct conn {
    struct rdma_cm_id *id;
    struct ibv_pd *pd;
    struct ibv_cq *cq;
    struct ibv_mr *mr;
    char buf[64];
};

static void post_one_recv(struct conn *c);

static void conn_qp(struct conn *c)
{
    c->pd = ibv_alloc_pd(c->id->verbs);
    c->cq = c->pd ? ibv_create_cq(c->id->verbs, 8, NULL, NULL, 0) : NULL;
    c->mr = c->cq ? ibv_reg_mr(c->pd, c->buf, sizeof(c->buf), IBV_ACCESS_LOCAL_WRITE) : NULL;
    if (!c->mr)
        die("pd/cq/mr");
    struct ibv_qp_init_attr qa = {
        .send_cq = c->cq,
        .recv_cq = c->cq,
        .qp_type = IBV_QPT_RC,
        .cap = {.max_send_wr = 2, .max_recv_wr = 2, .max_send_sge = 1, .max_recv_sge = 1}};
    if (rdma_create_qp(c->id, c->pd, &qa))
        die("rdma_create_qp");
    if (recv_at_once)
        post_one_recv(c);
}

static void post_one_recv(struct conn *c)
{
    struct ibv_sge sge = {.addr = (uintptr_t)c->buf, .length = sizeof(c->buf), .lkey = c->mr->lkey};
    struct ibv_recv_wr wr = {.sg_list = &sge, .num_sge = 1}, *bad;
    if (ibv_post_recv(c->id->qp, &wr, &bad))
        die("ibv_post_recv");
}

static void conn_free(struct conn *c)
{
    rdma_destroy_qp(c->id);
    ibv_dereg_mr(c->mr);
    ibv_destroy_cq(c->cq);
    ibv_dealloc_pd(c->pd);
    rdma_destroy_id(c->id);
    c->id = NULL;
}

static void wait_wc(struct conn *c, enum ibv_wc_opcode op, const char *what)
{
    struct ibv_wc wc;
    double end = now_s() + 5;
    while (now_s() < end) {
        int n = ibv_poll_cq(c->cq, 1, &wc);
        if (n < 0)
            die("%s: ibv_poll_cq", what);
        if (n == 0)
            continue;
        if (wc.status != IBV_WC_SUCCESS)
            die("%s: completion status %d", what, wc.status);
        if (wc.opcode == op)
            return;
    }
    die("%s: no completion within 5 s", what);
}

static void send_one(struct conn *c, const char *msg)
{
    strcpy(c->buf, msg);
    struct ibv_sge sge = {.addr = (uintptr_t)c->buf, .length = sizeof(c->buf), .lkey = c->mr->lkey};
    struct ibv_send_wr wr = {.sg_list = &sge,
                             .num_sge = 1,
                             .opcode = IBV_WR_SEND,
                             .send_flags = IBV_SEND_SIGNALED},
                       *bad;
    if (ibv_post_send(c->id->qp, &wr, &bad))
        die("ibv_post_send");
    wait_wc(c, IBV_WC_SEND, "send");
}

/* Client side of one connection: resolve, QP, connect, ESTABLISHED. */
static void client_connect(struct rdma_event_channel *ch, struct conn *c, int port,
                           const char *what)
{
    memset(c, 0, sizeof(*c));
    struct sockaddr_in a = addr_of(port);
    if (rdma_create_id(ch, &c->id, NULL, RDMA_PS_TCP))
        die("rdma_create_id");
    if (rdma_resolve_addr(c->id, NULL, (struct sockaddr *)&a, 2000))
        die("rdma_resolve_addr");
    rdma_ack_cm_event(expect(ch, RDMA_CM_EVENT_ADDR_RESOLVED, 5000, what));
    if (rdma_resolve_route(c->id, 2000))
        die("rdma_resolve_route");
    rdma_ack_cm_event(expect(ch, RDMA_CM_EVENT_ROUTE_RESOLVED, 5000, what));
    conn_qp(c);
    struct rdma_conn_param p = {.retry_count = 7, .rnr_retry_count = rnr_retry};
    if (rdma_connect(c->id, &p))
        die("rdma_connect");
    rdma_ack_cm_event(expect(ch, RDMA_CM_EVENT_ESTABLISHED, 10000, what));
}

/* Server side: the next request on lch accepted, ESTABLISHED on cch. */
static void server_accept(struct rdma_event_channel *lch, struct conn *c, const char *what)
{
    memset(c, 0, sizeof(*c));
    struct rdma_cm_event *e = expect(lch, RDMA_CM_EVENT_CONNECT_REQUEST, 10000, what);
    c->id = e->id;
    rdma_ack_cm_event(e);
    conn_qp(c);
    struct rdma_conn_param p = {.retry_count = 7, .rnr_retry_count = rnr_retry};
    if (rdma_accept(c->id, &p))
        die("rdma_accept");
    rdma_ack_cm_event(expect(lch, RDMA_CM_EVENT_ESTABLISHED, 10000, what));
}

static struct rdma_cm_id *listen_on(struct rdma_event_channel *ch, int port, int backlog)
{
    struct rdma_cm_id *l;
    struct sockaddr_in a = addr_of(port);
    if (rdma_create_id(ch, &l, NULL, RDMA_PS_TCP))
        die("rdma_create_id");
    if (rdma_bind_addr(l, (struct sockaddr *)&a))
        die("rdma_bind_addr port %d", port);
    if (rdma_listen(l, backlog))
        die("rdma_listen");
    return l;
}

/* ---- cycle ---- */
struct srv {
    struct rdma_event_channel *ch;
    int n;
};

static void *cycle_server(void *arg)
{
    struct srv *s = arg;
    for (int i = 0; i < s->n; i++) {
        struct conn c;
        server_accept(s->ch, &c, "server");
        wait_wc(&c, IBV_WC_RECV, "server recv");
        struct rdma_cm_event *e = expect(s->ch, RDMA_CM_EVENT_DISCONNECTED, 10000, "server");
        rdma_ack_cm_event(e);
        rdma_disconnect(c.id);
        conn_free(&c);
    }
    return NULL;
}

/* How many QPs the device still gives: a leaked QP table slot shows here. */
static int qps_left(struct ibv_context *ctx)
{
    struct ibv_pd *pd = ibv_alloc_pd(ctx);
    struct ibv_cq *cq = pd ? ibv_create_cq(ctx, 1, NULL, NULL, 0) : NULL;
    if (!cq)
        die("pd/cq for the QP count");
    struct ibv_device_attr da;
    if (ibv_query_device(ctx, &da))
        die("ibv_query_device");
    struct ibv_qp **qps = calloc((size_t)da.max_qp + 1, sizeof(*qps));
    int n = 0;
    struct ibv_qp_init_attr qa = {
        .send_cq = cq,
        .recv_cq = cq,
        .qp_type = IBV_QPT_RC,
        .cap = {.max_send_wr = 1, .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1}};
    while (n <= da.max_qp && (qps[n] = ibv_create_qp(pd, &qa)))
        n++;
    for (int i = 0; i < n; i++)
        ibv_destroy_qp(qps[i]);
    free(qps);
    ibv_destroy_cq(cq);
    ibv_dealloc_pd(pd);
    return n;
}

static int run_cycle(int n, int port)
{
    enum { WARM = 20 };
    struct rdma_event_channel *lch = rdma_create_event_channel();
    struct rdma_event_channel *cch = rdma_create_event_channel();
    if (!lch || !cch)
        die("rdma_create_event_channel");
    struct rdma_cm_id *l = listen_on(lch, port, 16);
    struct srv s = {.ch = lch, .n = n};
    pthread_t t;
    if (pthread_create(&t, NULL, cycle_server, &s))
        die("pthread_create");
    int fd0 = 0, qp0 = 0;
    long rss0 = 0;
    double t0 = now_s();
    for (int i = 0; i < n; i++) {
        if (i == WARM) {
            qp0 = qps_left(l->verbs); /* first: its 16k QPs leave malloc's heap grown */
            fd0 = fd_count();
            rss0 = rss_kb();
            t0 = now_s();
        }
        struct conn c;
        client_connect(cch, &c, port, "client");
        send_one(&c, "ping");
        if (rdma_disconnect(c.id))
            die("rdma_disconnect");
        rdma_ack_cm_event(expect(cch, RDMA_CM_EVENT_DISCONNECTED, 10000, "client"));
        conn_free(&c);
    }
    pthread_join(t, NULL);
    double dt = now_s() - t0;
    int fd1 = fd_count();
    long rss1 = rss_kb();
    int qp1 = qps_left(l->verbs);
    printf("%d cycles (%d after warm-up in %.2f s, %.2f ms each): fds %d -> %d, RSS %ld -> %ld kB, "
           "QPs the device still gives %d -> %d\n",
           n, n - WARM, dt, dt * 1000 / (n - WARM), fd0, fd1, rss0, rss1, qp0, qp1);
    rdma_destroy_id(l);
    rdma_destroy_event_channel(cch);
    rdma_destroy_event_channel(lch);
    if (fd1 != fd0)
        die("fd count %d -> %d", fd0, fd1);
    if (RSS_CHECKED && rss1 - rss0 > 4096)
        die("RSS grew %ld kB", rss1 - rss0);
    if (qp1 != qp0)
        die("QP table: %d -> %d free", qp0, qp1);
    return 0;
}

/* Runs this program again as MODE's child for port: a new process, so
 * that its CM service is its own. Returns the child's pid. */
static pid_t spawn_child(const char *mode, int port)
{
    pid_t pid = fork();
    if (pid < 0)
        die("fork");
    if (pid == 0) {
        char p[16];
        snprintf(p, sizeof(p), "%d", port);
        execl("/proc/self/exe", "rdmacm_stress", mode, p, (char *)NULL);
        _exit(127);
    }
    return pid;
}

/* ---- idle: the peer dies with nothing in flight ---- */
static void client_and_wait(int port)
{
    struct rdma_event_channel *ch = rdma_create_event_channel();
    if (!ch)
        die("child: channel");
    struct conn c;
    client_connect(ch, &c, port, "child");
    printf("child: connected, now idle\n");
    fflush(stdout);
    pause();
    exit(0);
}

static int run_idle(int port)
{
    struct rdma_event_channel *lch = rdma_create_event_channel();
    if (!lch)
        die("channel");
    listen_on(lch, port, 4);
    pid_t pid = spawn_child("idle-child", port);
    struct conn c;
    server_accept(lch, &c, "server");
    usleep(200000); /* the child answers the first liveness probe */
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    double t0 = now_s();
    struct rdma_cm_event *e = next_event(lch, 5000);
    double dt = now_s() - t0;
    if (!e)
        die("no event within 5 s of the peer's death");
    printf("server: %s (status %d) %.2f s after the peer was killed\n", rdma_event_str(e->event),
           e->status, dt);
    if (e->event != RDMA_CM_EVENT_DISCONNECTED)
        die("expected DISCONNECTED");
    rdma_ack_cm_event(e);
    conn_free(&c);
    return 0;
}

/* ---- exit: the peer's process ends with its connection open ---- */
static int exit_child(int port)
{
    struct rdma_event_channel *ch = rdma_create_event_channel();
    if (!ch)
        die("child: channel");
    struct conn c;
    client_connect(ch, &c, port, "child");
    send_one(&c, "bye");
    printf("child: connected, returning from main\n");
    return 0; /* no rdma_disconnect, no rdma_destroy_id: the process's exit */
}

static int run_exit(int port)
{
    struct rdma_event_channel *lch = rdma_create_event_channel();
    if (!lch)
        die("channel");
    listen_on(lch, port, 4);
    pid_t pid = spawn_child("exit-child", port);
    struct conn c;
    server_accept(lch, &c, "server");
    wait_wc(&c, IBV_WC_RECV, "server recv");
    if (strcmp(c.buf, "bye"))
        die("server received \"%.8s\", not \"bye\"", c.buf);
    int st;
    if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st))
        die("the client did not exit 0 (status %#x)", st);
    double t0 = now_s();
    struct rdma_cm_event *e = next_event(lch, 3000);
    if (!e)
        die("no event within 3 s of the peer's exit");
    printf("server: %s (status %d) %.3f s after the peer exited\n", rdma_event_str(e->event),
           e->status, now_s() - t0);
    if (e->event != RDMA_CM_EVENT_DISCONNECTED)
        die("expected DISCONNECTED");
    rdma_ack_cm_event(e);
    conn_free(&c);
    return 0;
}

/* ---- rnr: a receive posted after the peer's SEND arrives ---- */
static int rnr_child(int port)
{
    rnr_retry = 1;
    struct rdma_event_channel *ch = rdma_create_event_channel();
    if (!ch)
        die("child: channel");
    struct conn c;
    client_connect(ch, &c, port, "child");
    send_one(&c, "posted late"); /* dies on RNR retry exceeded */
    printf("child: SEND completed\n");
    if (rdma_disconnect(c.id))
        die("rdma_disconnect");
    rdma_ack_cm_event(expect(ch, RDMA_CM_EVENT_DISCONNECTED, 10000, "child"));
    conn_free(&c);
    rdma_destroy_event_channel(ch);
    return 0;
}

static int run_rnr(int port)
{
    struct rdma_event_channel *lch = rdma_create_event_channel();
    if (!lch)
        die("channel");
    listen_on(lch, port, 4);
    pid_t pid = spawn_child("rnr-child", port);
    struct conn c;
    recv_at_once = false;
    server_accept(lch, &c, "server");
    usleep(100000);
    post_one_recv(&c);
    wait_wc(&c, IBV_WC_RECV, "server recv");
    if (strcmp(c.buf, "posted late"))
        die("server received \"%.16s\", not \"posted late\"", c.buf);
    int st;
    if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st))
        die("the client did not exit 0 (status %#x)", st);
    printf("server: the late receive got the message\n");
    rdma_ack_cm_event(expect(lch, RDMA_CM_EVENT_DISCONNECTED, 10000, "server"));
    conn_free(&c);
    return 0;
}

/* ---- late: a REQ that comes before its listener ---- */
static int late_server(int port, int ms)
{
    struct rdma_event_channel *lch = rdma_create_event_channel();
    if (!lch)
        die("channel");
    /* the CM runs from the first id on, as a perftest server's does from
     * its control connection: the REQ finds a CM, but no listener */
    struct rdma_cm_id *l;
    struct sockaddr_in a = addr_of(port);
    if (rdma_create_id(lch, &l, NULL, RDMA_PS_TCP) || rdma_bind_addr(l, (struct sockaddr *)&a))
        die("rdma_create_id/rdma_bind_addr");
    usleep((useconds_t)ms * 1000);
    if (rdma_listen(l, 4))
        die("rdma_listen");
    printf("server: listening on %s:%d\n", host, port);
    fflush(stdout);
    struct conn c;
    server_accept(lch, &c, "server");
    wait_wc(&c, IBV_WC_RECV, "server recv");
    if (strcmp(c.buf, "hello across"))
        die("server received \"%.16s\", not \"hello across\"", c.buf);
    rdma_ack_cm_event(expect(lch, RDMA_CM_EVENT_DISCONNECTED, 10000, "server"));
    printf("server: message intact, disconnected\n");
    conn_free(&c);
    return 0;
}

static int late_client(int port)
{
    struct rdma_event_channel *ch = rdma_create_event_channel();
    if (!ch)
        die("channel");
    struct conn c;
    double t0 = now_s();
    client_connect(ch, &c, port, "client");
    printf("client: established after %.2f s\n", now_s() - t0);
    send_one(&c, "hello across");
    if (rdma_disconnect(c.id))
        die("rdma_disconnect");
    rdma_ack_cm_event(expect(ch, RDMA_CM_EVENT_DISCONNECTED, 10000, "client"));
    conn_free(&c);
    rdma_destroy_event_channel(ch);
    return 0;
}

/* ---- flood ---- */
static void flooder(int n, int port)
{
    struct rdma_event_channel *ch = rdma_create_event_channel();
    if (!ch)
        die("flooder: channel");
    nonblock(ch);
    struct sockaddr_in a = addr_of(port);
    for (int i = 0; i < n; i++) {
        struct rdma_cm_id *id;
        struct rdma_cm_event *e;
        if (rdma_create_id(ch, &id, NULL, RDMA_PS_TCP) ||
            rdma_resolve_addr(id, NULL, (struct sockaddr *)&a, 2000))
            die("flooder: id %d", i);
        while (rdma_get_cm_event(ch, &e) == 0)
            rdma_ack_cm_event(e);
        if (rdma_resolve_route(id, 2000))
            die("flooder: route %d", i);
        while (rdma_get_cm_event(ch, &e) == 0)
            rdma_ack_cm_event(e);
        struct rdma_conn_param p = {.qp_num = 0x100 + (uint32_t)i, .retry_count = 7};
        if (rdma_connect(id, &p))
            die("flooder: connect %d", i);
    }
    printf("flooder: %d REQs sent\n", n);
    fflush(stdout);
    pause();
    exit(0);
}

static int run_flood(int n, int port)
{
    enum { BACKLOG = 8 };
    struct rdma_event_channel *lch = rdma_create_event_channel();
    if (!lch)
        die("channel");
    struct rdma_cm_id *l = listen_on(lch, port, BACKLOG);
    long rss0 = rss_kb();
    int fd0 = fd_count();
    int pfd[2];
    if (pipe(pfd))
        die("pipe");
    pid_t pid = fork();
    if (pid < 0)
        die("fork");
    if (pid == 0) {
        char ns[16], ps[16];
        dup2(pfd[1], 1);
        snprintf(ns, sizeof(ns), "%d", n);
        snprintf(ps, sizeof(ps), "%d", port);
        execl("/proc/self/exe", "rdmacm_stress", "flood-child", ns, ps, (char *)NULL);
        _exit(127);
    }
    close(pfd[1]);
    /* the listener reads nothing until the flooder says it is done */
    char line[128] = "";
    struct pollfd pf = {.fd = pfd[0], .events = POLLIN};
    if (poll(&pf, 1, 30000) <= 0 || read(pfd[0], line, sizeof(line) - 1) <= 0)
        die("the flooder did not finish within 30 s");
    printf("%s", line);
    usleep(300000); /* the last REQs arrive */
    long rss1 = rss_kb();
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    nonblock(lch);
    int reqs = 0, other = 0;
    struct rdma_cm_event *e;
    while (rdma_get_cm_event(lch, &e) == 0) {
        if (e->event == RDMA_CM_EVENT_CONNECT_REQUEST) {
            reqs++;
            struct rdma_cm_id *id = e->id;
            rdma_ack_cm_event(e);
            rdma_reject(id, NULL, 0);
            rdma_destroy_id(id);
        } else {
            other++;
            rdma_ack_cm_event(e);
        }
    }
    printf("listener: %d REQs sent, %d CONNECT_REQUESTs waited (backlog %d), %d other events; "
           "RSS %ld -> %ld kB\n",
           n, reqs, BACKLOG, other, rss0, rss1);
    if (reqs < 1 || reqs > BACKLOG)
        die("%d requests waited, backlog %d", reqs, BACKLOG);
    if (RSS_CHECKED && rss1 - rss0 > 4096)
        die("RSS grew %ld kB under the flood", rss1 - rss0);
    fcntl(lch->fd, F_SETFL, fcntl(lch->fd, F_GETFL) & ~O_NONBLOCK);
    /* a legitimate client now */
    struct rdma_event_channel *cch = rdma_create_event_channel();
    struct srv s = {.ch = lch, .n = 1};
    pthread_t t;
    if (!cch)
        die("rdma_create_event_channel");
    if (pthread_create(&t, NULL, cycle_server, &s))
        die("pthread_create");
    struct conn c;
    client_connect(cch, &c, port, "legitimate client");
    send_one(&c, "ping");
    rdma_disconnect(c.id);
    rdma_ack_cm_event(expect(cch, RDMA_CM_EVENT_DISCONNECTED, 10000, "legitimate client"));
    conn_free(&c);
    pthread_join(t, NULL);
    printf("listener: a legitimate client connected and its SEND arrived after the flood\n");
    rdma_destroy_event_channel(cch);
    rdma_destroy_id(l);
    rdma_destroy_event_channel(lch);
    close(pfd[0]);
    (void)fd0;
    return 0;
}

int main(int argc, char **argv)
{
    signal(SIGPIPE, SIG_IGN);
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc == 4 && !strcmp(argv[1], "cycle"))
        return run_cycle(atoi(argv[2]), atoi(argv[3]));
    if (argc == 3 && !strcmp(argv[1], "idle"))
        return run_idle(atoi(argv[2]));
    if (argc == 3 && !strcmp(argv[1], "idle-child"))
        client_and_wait(atoi(argv[2]));
    if (argc == 5 && !strcmp(argv[1], "late-server")) {
        host = argv[2];
        return late_server(atoi(argv[3]), atoi(argv[4]));
    }
    if (argc == 4 && !strcmp(argv[1], "late-client")) {
        host = argv[2];
        return late_client(atoi(argv[3]));
    }
    if (argc == 3 && !strcmp(argv[1], "rnr"))
        return run_rnr(atoi(argv[2]));
    if (argc == 3 && !strcmp(argv[1], "rnr-child"))
        return rnr_child(atoi(argv[2]));
    if (argc == 3 && !strcmp(argv[1], "exit"))
        return run_exit(atoi(argv[2]));
    if (argc == 3 && !strcmp(argv[1], "exit-child"))
        return exit_child(atoi(argv[2]));
    if (argc == 4 && !strcmp(argv[1], "flood"))
        return run_flood(atoi(argv[2]), atoi(argv[3]));
    if (argc == 4 && !strcmp(argv[1], "flood-child"))
        flooder(atoi(argv[2]), atoi(argv[3]));
    fprintf(stderr,
            "usage: %s cycle N PORT | idle PORT | exit PORT | rnr PORT | flood N PORT | "
            "late-server HOST "
            "PORT MS | late-client HOST PORT\n",
            argv[0]);
    return 2;
}

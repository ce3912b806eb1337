/* mp_xfer.c: a verified RC transfer between two network namespaces, for
 * the multipath test (multipath.sh). Public verbs only.
 *
 *   mp_xfer NS_B ADDR_A ADDR_B MIB MSG_KIB
 *
 * Run inside namespace A. It forks; the child enters namespace NS_B
 * (/run/netns/NS_B) and is the target, the parent the initiator, each
 * with SOFTRDMA_ADDR set to its address before its first verb. The two
 * exchange QPN, PSN, GID, R_Key and address over a socketpair made before
 * the fork (an AF_UNIX pair crosses namespaces, and keeps the links' packet
 * counters to softrdma's own traffic). The initiator RDMA WRITEs MIB MiB
 * of a pattern in MSG_KIB messages (16 in flight), SENDs "done", then
 * READs everything back; the target checks every byte it received, and
 * the initiator every byte it read. Exit 0 only if both saw every byte
 * right; every wait is bounded. */
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum { DEPTH = 16, POLL_MS = 20000 };

struct info {
    uint32_t qpn, psn, rkey;
    uint64_t addr;
    union ibv_gid gid;
};

static uint64_t now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000 + (uint64_t)t.tv_nsec / 1000000;
}

static uint8_t pat(size_t i)
{
    uint64_t x = (i / 8 + 1) * 0x9e3779b97f4a7c15ull;
    return (uint8_t)(x >> (8 * (i % 8)));
}

#define DIE(...)                                                                                   \
    do {                                                                                           \
        fprintf(stderr, "mp_xfer %s: ", role);                                                     \
        fprintf(stderr, __VA_ARGS__);                                                              \
        fprintf(stderr, "\n");                                                                     \
        exit(2);                                                                                   \
    } while (0)

static const char *role = "initiator";

static void xwrite(int fd, const void *p, size_t n)
{
    if (write(fd, p, n) != (ssize_t)n)
        DIE("oob write");
}

static void xread(int fd, void *p, size_t n)
{
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, (char *)p + got, n - got);
        if (r <= 0)
            DIE("oob read: peer gone");
        got += (size_t)r;
    }
}

struct side {
    struct ibv_context *ctx;
    struct ibv_pd *pd;
    struct ibv_cq *cq;
    struct ibv_qp *qp;
    struct ibv_mr *mr;
    uint8_t *buf;
    size_t len;
    enum ibv_mtu mtu;
};

static void open_side(struct side *s, size_t len)
{
    int n = 0;
    struct ibv_device **l = ibv_get_device_list(&n);
    if (!l || n < 1)
        DIE("no device");
    s->ctx = ibv_open_device(l[0]);
    ibv_free_device_list(l);
    if (!s->ctx)
        DIE("open device");
    struct ibv_port_attr pa;
    if (ibv_query_port(s->ctx, 1, &pa))
        DIE("query port");
    s->mtu = pa.active_mtu;
    s->pd = ibv_alloc_pd(s->ctx);
    s->cq = ibv_create_cq(s->ctx, 4 * DEPTH, NULL, NULL, 0);
    s->len = len;
    s->buf = aligned_alloc(4096, len);
    if (!s->pd || !s->cq || !s->buf)
        DIE("pd/cq/buffer");
    memset(s->buf, 0, len);
    s->mr = ibv_reg_mr(s->pd, s->buf, len,
                       IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
    struct ibv_qp_init_attr ia = {
        .send_cq = s->cq,
        .recv_cq = s->cq,
        .qp_type = IBV_QPT_RC,
        .cap = {.max_send_wr = 2 * DEPTH, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1}};
    s->qp = ibv_create_qp(s->pd, &ia);
    if (!s->mr || !s->qp)
        DIE("mr/qp");
}

static void connect_side(struct side *s, const struct info *peer, uint32_t my_psn)
{
    struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT,
                            .port_num = 1,
                            .qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ};
    if (ibv_modify_qp(s->qp, &a,
                      IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
        DIE("INIT");
    memset(&a, 0, sizeof(a));
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = s->mtu;
    a.dest_qp_num = peer->qpn;
    a.rq_psn = peer->psn;
    a.max_dest_rd_atomic = 16;
    a.min_rnr_timer = 12;
    a.ah_attr.is_global = 1;
    a.ah_attr.grh.dgid = peer->gid;
    a.ah_attr.grh.hop_limit = 64;
    a.ah_attr.port_num = 1;
    if (ibv_modify_qp(s->qp, &a,
                      IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                          IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
        DIE("RTR");
    memset(&a, 0, sizeof(a));
    a.qp_state = IBV_QPS_RTS;
    a.sq_psn = my_psn;
    a.timeout = 14;
    a.retry_cnt = 7;
    a.rnr_retry = 7;
    a.max_rd_atomic = 16;
    if (ibv_modify_qp(s->qp, &a,
                      IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                          IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC))
        DIE("RTS");
}

static void exchange(int fd, struct side *s, uint32_t psn, struct info *peer)
{
    struct info me = {
        .qpn = s->qp->qp_num, .psn = psn, .rkey = s->mr->rkey, .addr = (uintptr_t)s->buf};
    if (ibv_query_gid(s->ctx, 1, 0, &me.gid))
        DIE("gid");
    xwrite(fd, &me, sizeof(me));
    xread(fd, peer, sizeof(*peer));
}

/* One completion, successful, within POLL_MS. */
static struct ibv_wc poll1(struct side *s)
{
    struct ibv_wc wc;
    uint64_t end = now_ms() + POLL_MS;
    for (;;) {
        int n = ibv_poll_cq(s->cq, 1, &wc);
        if (n < 0)
            DIE("poll_cq");
        if (n == 1)
            break;
        if (now_ms() > end)
            DIE("no completion in %d ms", POLL_MS);
    }
    if (wc.status != IBV_WC_SUCCESS)
        DIE("completion %s (wr_id %llu)", ibv_wc_status_str(wc.status),
            (unsigned long long)wc.wr_id);
    return wc;
}

static size_t bad_bytes(const uint8_t *b, size_t len, size_t *first)
{
    size_t bad = 0;
    for (size_t i = 0; i < len; i++)
        if (b[i] != pat(i) && bad++ == 0)
            *first = i;
    return bad;
}

static int target(int fd, size_t len)
{
    role = "target";
    struct side s;
    open_side(&s, len);
    struct info peer;
    exchange(fd, &s, 0x123456, &peer);
    connect_side(&s, &peer, 0x123456);
    struct ibv_sge sg = {(uintptr_t)s.buf, 0, s.mr->lkey};
    struct ibv_recv_wr rwr = {.wr_id = 1, .sg_list = &sg, .num_sge = 1}, *bad;
    if (ibv_post_recv(s.qp, &rwr, &bad))
        DIE("post_recv");
    char go = 1;
    xwrite(fd, &go, 1);
    poll1(&s); /* the initiator's SEND: every WRITE before it has landed */
    size_t first = 0, nbad = bad_bytes(s.buf, len, &first);
    if (nbad)
        fprintf(stderr, "mp_xfer target: %zu bad bytes, first at %zu\n", nbad, first);
    else
        printf("mp_xfer target: %zu bytes written, all correct\n", len);
    uint64_t v = nbad;
    xwrite(fd, &v, sizeof(v));
    xread(fd, &go, 1); /* the initiator has read everything back */
    ibv_destroy_qp(s.qp);
    ibv_dereg_mr(s.mr);
    ibv_destroy_cq(s.cq);
    ibv_dealloc_pd(s.pd);
    ibv_close_device(s.ctx);
    free(s.buf);
    return nbad ? 1 : 0;
}

static int initiator(int fd, size_t len, size_t msg)
{
    struct side s;
    open_side(&s, len);
    for (size_t i = 0; i < len; i++)
        s.buf[i] = pat(i);
    struct info peer;
    exchange(fd, &s, 0xfffff0, &peer);
    connect_side(&s, &peer, 0xfffff0);
    char go;
    xread(fd, &go, 1);
    uint64_t t0 = now_ms();
    size_t nmsg = (len + msg - 1) / msg, posted = 0, done = 0;
    struct ibv_send_wr *bad;
    while (done < nmsg) {
        while (posted < nmsg && posted - done < DEPTH) {
            size_t off = posted * msg, n = len - off < msg ? len - off : msg;
            struct ibv_sge sg = {(uintptr_t)s.buf + off, (uint32_t)n, s.mr->lkey};
            struct ibv_send_wr wr = {.wr_id = posted,
                                     .sg_list = &sg,
                                     .num_sge = 1,
                                     .opcode = IBV_WR_RDMA_WRITE,
                                     .send_flags = IBV_SEND_SIGNALED,
                                     .wr.rdma = {peer.addr + off, peer.rkey}};
            if (ibv_post_send(s.qp, &wr, &bad))
                DIE("post WRITE");
            posted++;
        }
        poll1(&s);
        done++;
    }
    struct ibv_send_wr swr = {
        .wr_id = 1u << 30, .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED};
    if (ibv_post_send(s.qp, &swr, &bad))
        DIE("post SEND");
    poll1(&s);
    uint64_t t1 = now_ms();
    uint64_t tbad;
    xread(fd, &tbad, sizeof(tbad));
    /* Read it all back over the same QP, into a cleared buffer. */
    memset(s.buf, 0, len);
    posted = done = 0;
    while (done < nmsg) {
        while (posted < nmsg && posted - done < DEPTH) {
            size_t off = posted * msg, n = len - off < msg ? len - off : msg;
            struct ibv_sge sg = {(uintptr_t)s.buf + off, (uint32_t)n, s.mr->lkey};
            struct ibv_send_wr wr = {.wr_id = posted,
                                     .sg_list = &sg,
                                     .num_sge = 1,
                                     .opcode = IBV_WR_RDMA_READ,
                                     .send_flags = IBV_SEND_SIGNALED,
                                     .wr.rdma = {peer.addr + off, peer.rkey}};
            if (ibv_post_send(s.qp, &wr, &bad))
                DIE("post READ");
            posted++;
        }
        poll1(&s);
        done++;
    }
    size_t first = 0, rbad = bad_bytes(s.buf, len, &first);
    xwrite(fd, &go, 1);
    printf("mp_xfer initiator: wrote %zu bytes in %llu ms (%.1f MB/s), target found %llu bad; "
           "read back %zu bad\n",
           len, (unsigned long long)(t1 - t0),
           t1 > t0 ? (double)len / 1000.0 / (double)(t1 - t0) : 0.0, (unsigned long long)tbad,
           rbad);
    if (rbad)
        fprintf(stderr, "mp_xfer initiator: read back %zu bad bytes, first at %zu\n", rbad, first);
    ibv_destroy_qp(s.qp);
    ibv_dereg_mr(s.mr);
    ibv_destroy_cq(s.cq);
    ibv_dealloc_pd(s.pd);
    ibv_close_device(s.ctx);
    free(s.buf);
    return tbad || rbad ? 1 : 0;
}

int main(int argc, char **argv)
{
    if (argc != 6) {
        fprintf(stderr, "usage: mp_xfer NS_B ADDR_A ADDR_B MIB MSG_KIB\n");
        return 2;
    }
    long mib = strtol(argv[4], NULL, 10), kib = strtol(argv[5], NULL, 10);
    if (mib < 1 || mib > 1024 || kib < 1 || kib > 65536) {
        fprintf(stderr, "mp_xfer: MIB 1..1024, MSG_KIB 1..65536\n");
        return 2;
    }
    size_t len = (size_t)mib << 20, msg = (size_t)kib << 10;
    int sp[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp))
        DIE("socketpair");
    pid_t pid = fork();
    if (pid < 0)
        DIE("fork");
    if (pid == 0) {
        role = "target";
        close(sp[0]);
        char path[256];
        snprintf(path, sizeof(path), "/run/netns/%s", argv[1]);
        int ns = open(path, O_RDONLY | O_CLOEXEC);
        if (ns < 0 || setns(ns, CLONE_NEWNET))
            DIE("cannot enter %s", path);
        close(ns);
        alarm(120); /* never outlive a broken run */
        setenv("SOFTRDMA_ADDR", argv[3], 1);
        int trc = target(sp[1], len);
        fflush(stdout);
        _exit(trc);
    }
    close(sp[1]);
    alarm(120);
    setenv("SOFTRDMA_ADDR", argv[2], 1);
    int rc = initiator(sp[0], len, msg);
    int st = 0;
    if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
        rc = 1;
    return rc;
}

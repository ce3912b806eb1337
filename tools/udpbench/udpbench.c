/* udpbench.c: this machine's raw loopback UDP limits between two processes,
 * the yardstick bench/run.sh holds softrdma against. A benchmark, never a
 * test: every figure depends on the machine and on its load.
 *
 *   srdma-udpbench [-m plain|gso|pingpong|pingack|pingackrx|memcpy|shmpingpong|cma|all] [-t
 * SECONDS]
 *                  [-a 127.x.y.z]
 *                  [-n ITERS] [-s BYTES] [-S SEGMENT] [-g SEGMENTS]
 *
 *   plain     goodput of SEGMENT-byte datagrams (default 4096), sendmmsg and
 *             recvmmsg batches; the sender sends as fast as it can for
 *             SECONDS, the receiver counts what it gets.
 *   gso       the same with UDP GSO on send (UDP_SEGMENT: super-datagrams of
 *             SEGMENTS segments, default 15, i.e. 60 KiB, the most that fits
 *             in one 64 KiB IP datagram) and UDP_GRO on receive.
 *   pingpong  round trip of a BYTES-byte datagram (default 32), both sides
 *             busy-polling a non-blocking socket; median over ITERS (default
 *             100000) round trips, or as many as fit in SECONDS.
 *   pingack   the same ping-pong shaped like a reliable connection's: each
 *             message goes out with a 20-byte acknowledgement of the one
 *             before it (a RoCEv2 ACK) in one UDP GSO send of two segments,
 *             received with UDP_GRO; how softrdma's RC ping-pong must send
 *             when every message needs its ACK before the next.
 *   pingackrx pingack received the way a RoCEv2 device must receive, as
 *             softrdma's UDP driver does: recvmmsg, each message with the
 *             source address (the ICRC covers it) and room for the UDP_GRO
 *             control message (the segment size of a train), one message
 *             per call after a call that found nothing, else up to 16.
 *             The floor of softrdma's ib_write_lat over UDP before any
 *             transport work: the ICRC, the engine and the verbs.
 *   memcpy    the same-host limits of softrdma's shared-memory path: one
 *             core's copy rate of 4 KiB pieces of a 64 KiB buffer into a
 *             4 MiB ring (what each side of a transfer through shared memory
 *             does once per byte) for SECONDS;
 *   shmpingpong  round trip of a cache line between two processes spinning
 *             on shared memory, median over ITERS.
 *   cma       what a same-host transport can do with memory the peer did not
 *             share (perftest's malloc'd buffers): process_vm_writev and
 *             process_vm_readv of 64 KiB and 1 MiB into and out of a forked
 *             child's private buffer, the same buffers every call as
 *             ib_write_bw reuses its own; beside them memcpy of the same
 *             sizes into a region both processes map (what UCX's posix and
 *             sysv transports do with memory UCX allocated itself), and the
 *             cost of one 2-byte process_vm_writev (the floor of a one-sided
 *             small write into unshared memory). SECONDS are split between
 *             the figures; each is the median of 5 timed batches.
 *
 * The receiving / echoing side is a forked child, so that the two ends are
 * two processes like two softrdma devices. Both sockets are bound before the
 * fork, to ephemeral ports on the -a address (127.0.0.0/8 only).
 *
 * Output: one "name value" line per figure, e.g. "udp_gso_gro_4k_gbps 31.2"
 * (Gbit/s are 10^9 bits of UDP payload per second). Exit status 0 when every
 * measurement ran, 1 otherwise.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum {
    BATCH = 64,                 /* datagrams per sendmmsg / recvmmsg */
    GSO_BATCH = 8,              /* super-datagrams per sendmmsg */
    MAX_DGRAM = 65536,          /* receive buffer per datagram */
    SOCK_BUF = 16 << 20,        /* requested socket buffers */
    IDLE_MS = 300,              /* receiver stops after this much silence */
    PING_TIMEOUT_NS = 50000000, /* a lost ping is given up after 50 ms */
    WARMUP_ROUNDS = 1000,       /* round trips not sampled */
    PP_STOP = 0xff,             /* first byte of the ping that ends the echo loop */
    CHILD_GRACE_S = 5,          /* the child outlives the planned run by this much at most */
    POLL_CLOCK_EVERY = 1024,    /* empty polls between two clock reads */
    PP_BUF = 2048,              /* ping-pong receive buffer (-s is at most 1400) */
    PP_ACK_LEN = 20,            /* pingack: a RoCEv2 ACK (BTH, AETH, ICRC) */
};

struct opts {
    const char *mode;
    double seconds;
    struct in_addr addr;
    int iters;
    size_t small_len;
    size_t seg_len;
    int gso_segs;
    enum pp_shape {
        PP_PLAIN,         /* pingpong */
        PP_ACK,           /* pingack: each message carries an acknowledgement */
        PP_ACK_DEVICE_RX, /* pingackrx: pingack received as softrdma receives */
    } shape;
};

/* What the receiving child reports through the pipe. */
struct rx_report {
    uint64_t bytes, segs; /* payload bytes and 'seg_len' segments received */
    uint64_t timed_bytes; /* bytes received after the first batch */
    uint64_t first_ns;    /* end of the first batch */
    uint64_t last_ns;     /* end of the last batch */
    int err;              /* errno of a failed call, 0 */
};

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void set_bufs(int fd)
{
    int sz = SOCK_BUF;
    /* The FORCE variants pass net.core.[rw]mem_max as root; otherwise the
     * kernel clamps the plain request to the maximum. */
    if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &sz, sizeof(sz)))
        (void)setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &sz, sizeof(sz));
    if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &sz, sizeof(sz)))
        (void)setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sz, sizeof(sz));
}

/* A UDP socket bound to addr:ephemeral; its address in *sa. -1 on error. */
static int open_bound(struct in_addr addr, struct sockaddr_in *sa)
{
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    set_bufs(fd);
    *sa = (struct sockaddr_in){.sin_family = AF_INET, .sin_addr = addr};
    socklen_t len = sizeof(*sa);
    if (bind(fd, (struct sockaddr *)sa, sizeof(*sa)) ||
        getsockname(fd, (struct sockaddr *)sa, &len)) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Two sockets bound on the loopback address, each connected to the other. */
static int open_pair(struct in_addr addr, int fds[2])
{
    struct sockaddr_in sa[2];
    fds[0] = open_bound(addr, &sa[0]);
    fds[1] = fds[0] < 0 ? -1 : open_bound(addr, &sa[1]);
    if (fds[1] < 0 || connect(fds[0], (struct sockaddr *)&sa[1], sizeof(sa[1])) ||
        connect(fds[1], (struct sockaddr *)&sa[0], sizeof(sa[0]))) {
        int e = errno;
        if (fds[0] >= 0)
            close(fds[0]);
        if (fds[1] >= 0)
            close(fds[1]);
        errno = e;
        return -1;
    }
    return 0;
}

static int write_all(int fd, const void *buf, size_t len)
{
    const char *p = buf;
    while (len) {
        ssize_t r = write(fd, p, len);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return -1;
        p += r;
        len -= (size_t)r;
    }
    return 0;
}

/* Read exactly len bytes, waiting at most timeout_ms in all. */
static int read_all(int fd, void *buf, size_t len, int timeout_ms)
{
    char *p = buf;
    uint64_t end = now_ns() + (uint64_t)timeout_ms * 1000000ull;
    while (len) {
        uint64_t now = now_ns();
        if (now >= end)
            return -1;
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        int k = poll(&pfd, 1, (int)((end - now) / 1000000ull) + 1);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return -1;
        ssize_t r = read(fd, p, len);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return -1;
        p += r;
        len -= (size_t)r;
    }
    return 0;
}

static void reap(pid_t pid)
{
    /* The child ends on its own deadline; this bounds the wait anyway. */
    for (int i = 0; i < 100 * CHILD_GRACE_S; i++) {
        if (waitpid(pid, NULL, WNOHANG) == pid)
            return;
        usleep(10000);
    }
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
}

/* ---- goodput ------------------------------------------------------------ */

/* Child side: receive until IDLE_MS of silence after the first datagram, or
 * until hard_end_ns. Segments of a GRO datagram are counted from its
 * UDP_GRO control message. */
static void rx_loop(int fd, bool gro, uint64_t hard_end_ns, struct rx_report *rep)
{
    enum { CTRL_LEN = CMSG_SPACE(sizeof(int)) };
    struct mmsghdr msgs[BATCH];
    struct iovec iov[BATCH];
    struct timeval tv = {.tv_sec = 0, .tv_usec = IDLE_MS * 1000};
    memset(rep, 0, sizeof(*rep));
    char *bufs = malloc((size_t)BATCH * MAX_DGRAM);
    char *ctrl = malloc((size_t)BATCH * CTRL_LEN);
    if (!bufs || !ctrl || setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv))) {
        rep->err = bufs && ctrl ? errno : ENOMEM;
        free(bufs);
        free(ctrl);
        return;
    }
    while (now_ns() < hard_end_ns) {
        for (int i = 0; i < BATCH; i++) {
            iov[i] = (struct iovec){.iov_base = bufs + (size_t)i * MAX_DGRAM, .iov_len = MAX_DGRAM};
            msgs[i].msg_hdr = (struct msghdr){
                .msg_iov = &iov[i],
                .msg_iovlen = 1,
                .msg_control = gro ? ctrl + (size_t)i * CTRL_LEN : NULL,
                .msg_controllen = gro ? CTRL_LEN : 0,
            };
        }
        int n = recvmmsg(fd, msgs, BATCH, MSG_WAITFORONE, NULL);
        uint64_t now = now_ns();
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) {
                if (rep->first_ns)
                    break; /* the sender has stopped */
                continue;
            }
            rep->err = errno;
            break;
        }
        uint64_t bytes = 0, segs = 0;
        for (int i = 0; i < n; i++) {
            size_t len = msgs[i].msg_len;
            size_t seg = len;
            for (struct cmsghdr *c = CMSG_FIRSTHDR(&msgs[i].msg_hdr); gro && c;
                 c = CMSG_NXTHDR(&msgs[i].msg_hdr, c)) {
                if (c->cmsg_level == SOL_UDP && c->cmsg_type == UDP_GRO) {
                    int g;
                    memcpy(&g, CMSG_DATA(c), sizeof(g));
                    seg = (size_t)g;
                }
            }
            bytes += len;
            segs += seg ? (len + seg - 1) / seg : 1;
        }
        if (!rep->first_ns)
            rep->first_ns = now;
        else
            rep->timed_bytes += bytes;
        rep->bytes += bytes;
        rep->segs += segs;
        rep->last_ns = now;
    }
    free(bufs);
    free(ctrl);
}

/* Parent side: send for `seconds`. Returns 0 or -1 with errno. */
static int tx_loop(int fd, bool gso, const struct opts *o, uint64_t *segs_out, uint64_t *ns_out)
{
    size_t dgram = gso ? o->seg_len * (size_t)o->gso_segs : o->seg_len;
    int batch = gso ? GSO_BATCH : BATCH;
    char *buf = calloc(1, dgram);
    if (!buf)
        return -1;
    struct mmsghdr msgs[BATCH];
    struct iovec iov = {.iov_base = buf, .iov_len = dgram};
    for (int i = 0; i < batch; i++)
        msgs[i].msg_hdr = (struct msghdr){.msg_iov = &iov, .msg_iovlen = 1};
    if (gso) {
        int seg = (int)o->seg_len;
        if (setsockopt(fd, SOL_UDP, UDP_SEGMENT, &seg, sizeof(seg))) {
            free(buf);
            return -1;
        }
    }
    uint64_t start = now_ns();
    uint64_t end = start + (uint64_t)(o->seconds * 1e9);
    uint64_t sent = 0, now = start;
    int rc = 0;
    while ((now = now_ns()) < end) {
        int n = sendmmsg(fd, msgs, (unsigned)batch, 0);
        if (n < 0) {
            /* A full queue on a loaded machine: try again; the figure is
             * what the receiver gets. */
            if (errno == EINTR || errno == EAGAIN || errno == ENOBUFS)
                continue;
            rc = -1;
            break;
        }
        sent += (uint64_t)n;
    }
    *segs_out = sent * (uint64_t)(gso ? o->gso_segs : 1);
    *ns_out = now - start;
    free(buf);
    return rc;
}

static int run_goodput(const struct opts *o, bool gso)
{
    const char *name = gso ? "udp_gso_gro" : "udp_plain";
    char sz[32];
    if (o->seg_len % 1024 == 0)
        snprintf(sz, sizeof(sz), "%zuk", o->seg_len / 1024);
    else
        snprintf(sz, sizeof(sz), "%zub", o->seg_len);

    int fds[2], pfd[2];
    if (open_pair(o->addr, fds)) {
        fprintf(stderr, "udpbench: sockets: %s\n", strerror(errno));
        return -1;
    }
    if (gso) {
        int one = 1;
        if (setsockopt(fds[1], SOL_UDP, UDP_GRO, &one, sizeof(one))) {
            fprintf(stderr, "udpbench: UDP_GRO: %s\n", strerror(errno));
            close(fds[0]);
            close(fds[1]);
            return -1;
        }
    }
    if (pipe(pfd)) {
        close(fds[0]);
        close(fds[1]);
        return -1;
    }
    uint64_t hard_end = now_ns() + (uint64_t)((o->seconds + CHILD_GRACE_S) * 1e9);
    pid_t pid = fork();
    if (pid < 0) {
        close(fds[0]);
        close(fds[1]);
        close(pfd[0]);
        close(pfd[1]);
        return -1;
    }
    if (pid == 0) {
        close(fds[0]);
        close(pfd[0]);
        struct rx_report rep;
        char ready = 'R';
        if (write_all(pfd[1], &ready, 1))
            _exit(1);
        rx_loop(fds[1], gso, hard_end, &rep);
        _exit(write_all(pfd[1], &rep, sizeof(rep)) ? 1 : 0);
    }
    close(fds[1]);
    close(pfd[1]);

    int rc = -1;
    char ready;
    uint64_t tx_segs = 0, tx_ns = 0;
    struct rx_report rep;
    int wait_ms = (int)((o->seconds + CHILD_GRACE_S) * 1000);
    if (read_all(pfd[0], &ready, 1, wait_ms)) {
        fprintf(stderr, "udpbench: receiver did not start\n");
    } else if (tx_loop(fds[0], gso, o, &tx_segs, &tx_ns)) {
        fprintf(stderr, "udpbench: %s send: %s\n", name, strerror(errno));
    } else if (read_all(pfd[0], &rep, sizeof(rep), wait_ms)) {
        fprintf(stderr, "udpbench: no report from the receiver\n");
    } else if (rep.err) {
        fprintf(stderr, "udpbench: %s receive: %s\n", name, strerror(rep.err));
    } else if (rep.last_ns <= rep.first_ns) {
        fprintf(stderr, "udpbench: %s: too little received to time\n", name);
    } else {
        double rx_s = (double)(rep.last_ns - rep.first_ns) / 1e9;
        double tx_bytes = (double)tx_segs * (double)o->seg_len;
        double loss = tx_segs ? 100.0 * (1.0 - (double)rep.segs / (double)tx_segs) : 0;
        printf("%s_%s_gbps %.2f\n", name, sz, (double)rep.timed_bytes * 8 / rx_s / 1e9);
        printf("%s_%s_tx_gbps %.2f\n", name, sz, tx_bytes * 8 / ((double)tx_ns / 1e9) / 1e9);
        printf("%s_%s_loss_pct %.1f\n", name, sz, loss < 0 ? 0 : loss);
        printf("%s_%s_rx_segments %llu\n", name, sz, (unsigned long long)rep.segs);
        rc = 0;
    }
    close(fds[0]);
    close(pfd[0]);
    reap(pid);
    return rc;
}

/* ---- ping-pong ---------------------------------------------------------- */

/* Sends len bytes; in the shapes with an acknowledgement, as one GSO send
 * of a len-byte message and the PP_ACK_LEN-byte acknowledgement after it
 * (buf holds both). */
static ssize_t pp_send(int fd, const char *buf, size_t len, enum pp_shape shape)
{
    if (shape == PP_PLAIN)
        return send(fd, buf, len, 0);
    struct iovec iov = {.iov_base = (void *)buf, .iov_len = len + PP_ACK_LEN};
    union {
        char buf[CMSG_SPACE(sizeof(uint16_t))];
        struct cmsghdr align;
    } ctl;
    memset(&ctl, 0, sizeof(ctl));
    struct msghdr mh = {.msg_iov = &iov,
                        .msg_iovlen = 1,
                        .msg_control = ctl.buf,
                        .msg_controllen = sizeof(ctl.buf)};
    struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
    cm->cmsg_level = SOL_UDP;
    cm->cmsg_type = UDP_SEGMENT;
    cm->cmsg_len = CMSG_LEN(sizeof(uint16_t));
    uint16_t seg = (uint16_t)len;
    memcpy(CMSG_DATA(cm), &seg, sizeof(seg));
    ssize_t r = sendmsg(fd, &mh, 0);
    return r == (ssize_t)(len + PP_ACK_LEN) ? (ssize_t)len : r;
}

/* The message length a received datagram of r bytes stands for (see
 * pp_recv). */
static ssize_t pp_len(ssize_t r, size_t len, bool ack)
{
    if (ack && (size_t)r == len + PP_ACK_LEN)
        return (ssize_t)len;
    if (ack && r == PP_ACK_LEN)
        return 0;
    return r;
}

/* pp_recv's call when receiving like a RoCEv2 device (pingackrx), as
 * softrdma's sr_udp_poll does: a batch with source addresses and GRO
 * control messages, of one message after a call that found nothing;
 * message 0 lands in buf. */
static ssize_t pp_recv_device(int fd, char *buf, size_t cap, size_t len)
{
    enum { VLEN = 16, SLOT = PP_BUF };
    static bool idle;
    static char slot[VLEN][SLOT];
    static struct sockaddr_in6 name[VLEN];
    static union {
        char buf[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } ctl[VLEN];
    struct iovec iov[VLEN];
    struct mmsghdr m[VLEN];
    for (int i = 0; i < VLEN; i++) {
        iov[i] = (struct iovec){.iov_base = i ? slot[i] : buf, .iov_len = i ? SLOT : cap};
        m[i].msg_hdr = (struct msghdr){.msg_name = &name[i],
                                       .msg_namelen = sizeof(name[i]),
                                       .msg_iov = &iov[i],
                                       .msg_iovlen = 1,
                                       .msg_control = ctl[i].buf,
                                       .msg_controllen = sizeof(ctl[i].buf)};
    }
    int n = recvmmsg(fd, m, idle ? 1 : VLEN, MSG_DONTWAIT, NULL);
    idle = n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
    if (n < 0)
        return idle ? 0 : -1;
    for (int i = 0; i < n; i++) {
        ssize_t l = pp_len((ssize_t)m[i].msg_len, len, true);
        if (l > 0) {
            if (i)
                memcpy(buf, slot[i], (size_t)l);
            return l;
        }
    }
    return 0; /* acknowledgements only */
}

/* Receives what one pp_send sent: the len-byte message, with its
 * acknowledgement (GRO hands the two over as one) or without (a socket may
 * also get them one by one; a lone acknowledgement counts as nothing).
 * The message's length, 0 when nothing came, -1 on error. */
static ssize_t pp_recv(int fd, char *buf, size_t cap, size_t len, enum pp_shape shape)
{
    if (shape == PP_ACK_DEVICE_RX)
        return pp_recv_device(fd, buf, cap, len);
    ssize_t r = recv(fd, buf, cap, MSG_DONTWAIT);
    if (r < 0)
        return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -1;
    return pp_len(r, len, shape != PP_PLAIN);
}

/* Child side: echo every message until the stop byte or end_ns. */
static void pong_loop(int fd, uint64_t end_ns, size_t len, enum pp_shape shape)
{
    char buf[PP_BUF];
    for (unsigned spins = 0;; spins++) {
        ssize_t r = pp_recv(fd, buf, sizeof(buf), len, shape);
        if (r > 0) {
            if ((unsigned char)buf[0] == PP_STOP)
                return;
            (void)pp_send(fd, buf, (size_t)r, shape);
            continue;
        }
        if (r < 0 && errno != EINTR && errno != ECONNREFUSED)
            return;
        if (spins % POLL_CLOCK_EVERY == 0 && now_ns() >= end_ns)
            return;
    }
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* One round trip; its duration in ns, or 0 when the reply did not come. */
static uint64_t ping_once(int fd, char *buf, size_t len, uint32_t seq, enum pp_shape shape)
{
    char in[PP_BUF];
    buf[0] = 0;
    memcpy(buf + 1, &seq, sizeof(seq));
    uint64_t t0 = now_ns();
    if (pp_send(fd, buf, len, shape) != (ssize_t)len)
        return 0;
    for (;;) {
        ssize_t r = pp_recv(fd, in, sizeof(in), len, shape);
        uint64_t t1 = now_ns();
        if (r == (ssize_t)len && memcmp(in + 1, &seq, sizeof(seq)) == 0)
            return t1 - t0 ? t1 - t0 : 1;
        /* anything else is a late reply to a ping already given up, or a
         * lone acknowledgement segment */
        if (t1 - t0 > PING_TIMEOUT_NS)
            return 0;
    }
}

static int run_pingpong(const struct opts *o)
{
    size_t len = o->small_len < 5 ? 5 : o->small_len; /* stop/normal byte + sequence number */
    bool ack = o->shape != PP_PLAIN;
    if (ack && len <= PP_ACK_LEN)
        len = PP_ACK_LEN + 1; /* the message is the GSO segment size: the longer one */
    int fds[2];
    if (open_pair(o->addr, fds)) {
        fprintf(stderr, "udpbench: sockets: %s\n", strerror(errno));
        return -1;
    }
    int one = 1;
    if (ack && (setsockopt(fds[0], SOL_UDP, UDP_GRO, &one, sizeof(one)) ||
                setsockopt(fds[1], SOL_UDP, UDP_GRO, &one, sizeof(one)))) {
        fprintf(stderr, "udpbench: UDP_GRO: %s\n", strerror(errno));
        close(fds[0]);
        close(fds[1]);
        return -1;
    }
    uint64_t *samples = calloc((size_t)o->iters, sizeof(*samples));
    char *buf = calloc(1, len + PP_ACK_LEN);
    if (!samples || !buf) {
        free(samples);
        free(buf);
        close(fds[0]);
        close(fds[1]);
        return -1;
    }
    uint64_t start = now_ns();
    uint64_t end = start + (uint64_t)(o->seconds * 1e9);
    pid_t pid = fork();
    if (pid < 0) {
        free(samples);
        free(buf);
        close(fds[0]);
        close(fds[1]);
        return -1;
    }
    if (pid == 0) {
        close(fds[0]);
        pong_loop(fds[1], end + (uint64_t)CHILD_GRACE_S * 1000000000ull, len, o->shape);
        _exit(0);
    }
    close(fds[1]);

    uint32_t seq = 0;
    int n = 0, lost = 0;
    for (int i = 0; i < WARMUP_ROUNDS && now_ns() < end; i++)
        (void)ping_once(fds[0], buf, len, ++seq, o->shape);
    while (n < o->iters && now_ns() < end) {
        uint64_t rtt = ping_once(fds[0], buf, len, ++seq, o->shape);
        if (rtt)
            samples[n++] = rtt;
        else
            lost++;
    }
    buf[0] = (char)PP_STOP;
    (void)pp_send(fds[0], buf, len, o->shape);

    static const char *const names[] = {"pingpong", "pingack", "pingackrx"};
    const char *name = names[o->shape];
    int rc = -1;
    if (n > 0) {
        qsort(samples, (size_t)n, sizeof(*samples), cmp_u64);
        double med = (double)samples[n / 2] / 1e3;
        static const char *const halves[] = {"", "ack_", "ackrx_"};
        printf("udp_%s_%zub_rtt_us %.2f\n", name, len, med);
        printf("udp_%s_%zub_rtt_min_us %.2f\n", name, len, (double)samples[0] / 1e3);
        printf("udp_%s_%zub_rtt_p99_us %.2f\n", name, len,
               (double)samples[(size_t)n * 99 / 100] / 1e3);
        printf("udp_%shalf_rtt_us %.2f\n", halves[o->shape], med / 2);
        printf("udp_%s_samples %d\n", name, n);
        printf("udp_%s_lost %d\n", name, lost);
        rc = 0;
    } else {
        fprintf(stderr, "udpbench: %s: no round trip completed\n", name);
    }
    close(fds[0]);
    reap(pid);
    free(samples);
    free(buf);
    return rc;
}

/* ---- shared-memory limits ------------------------------------------------ */

static int run_memcpy(const struct opts *o)
{
    enum { SRC = 65536, RING = 4 << 20, PIECE = 4096 };
    uint8_t *src = malloc(SRC), *ring = malloc(RING);
    if (!src || !ring) {
        free(src);
        free(ring);
        return -1;
    }
    memset(src, 0x5a, SRC);
    memset(ring, 0, RING);
    uint64_t start = now_ns(), end = start + (uint64_t)(o->seconds * 1e9), bytes = 0, t = start;
    size_t r = 0;
    while (t < end) {
        for (int i = 0; i < 256; i++) {
            memcpy(ring + r, src + (r % SRC), PIECE);
            r = (r + PIECE) % RING;
        }
        bytes += 256 * PIECE;
        t = now_ns();
    }
    volatile uint8_t sink = ring[r];
    (void)sink;
    printf("memcpy_4k_gbps %.2f\n", (double)bytes * 8 / (double)(t - start));
    free(src);
    free(ring);
    return 0;
}

/* Spins until *v == want; false when deadline (CLOCK_MONOTONIC ns) passes. */
static bool spin_until(volatile uint64_t *v, uint64_t want, uint64_t deadline)
{
    for (unsigned k = 0; *v != want; k++)
        if (k % POLL_CLOCK_EVERY == 0 && now_ns() > deadline)
            return false;
    return true;
}

static int run_shm_pingpong(const struct opts *o)
{
    struct line {
        _Alignas(64) volatile uint64_t v;
    };
    enum { SHM_PP_STOP = 0 }; /* on line 0: the echo loop ends */
    struct line *l = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (l == MAP_FAILED)
        return -1;
    l[0].v = l[1].v = SHM_PP_STOP + 1;
    uint64_t rounds = (uint64_t)o->iters + WARMUP_ROUNDS;
    uint64_t budget = (uint64_t)(o->seconds * 1e9) + (uint64_t)CHILD_GRACE_S * 1000000000ull;
    uint64_t stop = now_ns() + budget; /* neither side spins past this */
    pid_t pid = fork();
    if (pid == 0) { /* echo each value from line 0 on line 1 */
        for (uint64_t seq = 2;; seq++) {
            for (unsigned k = 0; l[0].v != seq; k++) {
                if (l[0].v == SHM_PP_STOP)
                    _exit(0);
                if (k % POLL_CLOCK_EVERY == 0 && now_ns() > stop)
                    _exit(1);
            }
            l[1].v = seq;
        }
    }
    if (pid < 0)
        return -1;
    uint64_t *samples = malloc(sizeof(*samples) * (size_t)o->iters);
    int n = 0;
    uint64_t end = now_ns() + (uint64_t)(o->seconds * 1e9);
    for (uint64_t seq = 2; samples && seq < rounds + 2 && now_ns() < end; seq++) {
        uint64_t t0 = now_ns();
        l[0].v = seq;
        if (!spin_until(&l[1].v, seq, stop))
            break;
        if (seq >= WARMUP_ROUNDS + 2)
            samples[n++] = now_ns() - t0;
    }
    l[0].v = SHM_PP_STOP;
    reap(pid);
    int rc = -1;
    if (n > 0) {
        qsort(samples, (size_t)n, sizeof(*samples), cmp_u64);
        double med = (double)samples[n / 2] / 1e3;
        printf("shm_pingpong_rtt_us %.3f\n", med);
        printf("shm_half_rtt_us %.3f\n", med / 2);
        rc = 0;
    }
    free(samples);
    munmap(l, 4096);
    return rc;
}

/* ---- copies into memory the peer did not share ------------------------- */

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

enum { CMA_BATCHES = 5 };

/* Gb/s of one copy kind of len bytes, median of CMA_BATCHES batches of
 * budget_ns / CMA_BATCHES each; 0 on a failed call. kind 0: memcpy from
 * local to shared, 1: process_vm_writev, 2: process_vm_readv. */
static double copy_rate(int kind, size_t len, pid_t peer, uint8_t *local, uint8_t *shared,
                        uintptr_t remote, uint64_t budget_ns)
{
    double v[CMA_BATCHES];
    struct iovec l = {local, len}, r = {(void *)remote, len};
    for (int b = 0; b < CMA_BATCHES; b++) {
        uint64_t t0 = now_ns(), end = t0 + budget_ns / CMA_BATCHES, t = t0, bytes = 0;
        while (t < end) {
            for (int i = 0; i < 8; i++) {
                ssize_t got = (ssize_t)len;
                if (kind == 0)
                    memcpy(shared, local, len);
                else if (kind == 1)
                    got = process_vm_writev(peer, &l, 1, &r, 1, 0);
                else
                    got = process_vm_readv(peer, &l, 1, &r, 1, 0);
                if (got != (ssize_t)len) {
                    fprintf(stderr, "udpbench: process_vm_%s: %s\n", kind == 1 ? "writev" : "readv",
                            strerror(errno));
                    return 0;
                }
                bytes += len;
            }
            t = now_ns();
        }
        v[b] = (double)bytes * 8 / (double)(t - t0);
    }
    qsort(v, CMA_BATCHES, sizeof(v[0]), cmp_double);
    return v[CMA_BATCHES / 2];
}

static int run_cma(const struct opts *o)
{
    enum { MAXLEN = 1 << 20 };
    struct ctl {
        uintptr_t buf;
        volatile int ready;
    };
    struct ctl *c = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    uint8_t *shared = mmap(NULL, MAXLEN, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (c == MAP_FAILED || shared == MAP_FAILED)
        return -1;
    memset(shared, 1, MAXLEN);
    c->ready = 0;
    pid_t pid = fork();
    if (pid == 0) { /* a passive peer: its private buffer, then wait to be killed */
        uint8_t *own = malloc(MAXLEN);
        if (!own)
            _exit(1);
        memset(own, 2, MAXLEN);
        c->buf = (uintptr_t)own;
        __atomic_store_n(&c->ready, 1, __ATOMIC_RELEASE);
        uint64_t stop = now_ns() + (uint64_t)((o->seconds + CHILD_GRACE_S) * 1e9);
        while (now_ns() < stop)
            usleep(10000);
        _exit(0);
    }
    if (pid < 0)
        return -1;
    uint8_t *mine = malloc(MAXLEN);
    uint64_t wait_end = now_ns() + 2000000000ull;
    while (!__atomic_load_n(&c->ready, __ATOMIC_ACQUIRE) && now_ns() < wait_end)
        usleep(100);
    int rc = -1;
    if (mine && c->ready) {
        memset(mine, 3, MAXLEN);
        uint64_t slice = (uint64_t)(o->seconds * 1e9) / 7;
        static const size_t lens[] = {65536, MAXLEN};
        static const char *names[] = {"64k", "1m"};
        rc = 0;
        for (int i = 0; i < 2; i++) {
            double m = copy_rate(0, lens[i], pid, mine, shared, c->buf, slice);
            double w = copy_rate(1, lens[i], pid, mine, shared, c->buf, slice);
            double r = copy_rate(2, lens[i], pid, mine, shared, c->buf, slice);
            printf("shared_memcpy_%s_gbps %.2f\n", names[i], m);
            printf("cma_write_%s_gbps %.2f\n", names[i], w);
            printf("cma_read_%s_gbps %.2f\n", names[i], r);
            rc |= w > 0 && r > 0 ? 0 : -1;
        }
        /* one 2-byte write: calls per slice, median of CMA_BATCHES */
        double v[CMA_BATCHES];
        struct iovec l = {mine, 2}, r = {(void *)c->buf, 2};
        for (int b = 0; b < CMA_BATCHES && rc == 0; b++) {
            uint64_t t0 = now_ns(), end = t0 + slice / CMA_BATCHES, t = t0, calls = 0;
            while (t < end) {
                for (int i = 0; i < 64; i++)
                    if (process_vm_writev(pid, &l, 1, &r, 1, 0) != 2)
                        rc = -1;
                calls += 64;
                t = now_ns();
            }
            v[b] = (double)(t - t0) / 1e3 / (double)calls;
        }
        if (rc == 0) {
            qsort(v, CMA_BATCHES, sizeof(v[0]), cmp_double);
            printf("cma_write_2b_us %.3f\n", v[CMA_BATCHES / 2]);
        }
    }
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    free(mine);
    munmap(shared, MAXLEN);
    munmap(c, 4096);
    return rc;
}

/* ---- main --------------------------------------------------------------- */

static void usage(void)
{
    fprintf(stderr,
            "usage: srdma-udpbench [-m "
            "plain|gso|pingpong|pingack|pingackrx|memcpy|shmpingpong|cma|all] "
            "[-t SECONDS] [-a 127.x.y.z] [-n ITERS] [-s BYTES] [-S SEGMENT] [-g SEGMENTS]\n");
}

int main(int argc, char **argv)
{
    struct opts o = {
        .mode = "all",
        .seconds = 2,
        .iters = 100000,
        .small_len = 32,
        .seg_len = 4096,
        .gso_segs = 15,
    };
    inet_pton(AF_INET, "127.0.0.1", &o.addr);
    int c;
    while ((c = getopt(argc, argv, "m:t:a:n:s:S:g:h")) != -1) {
        switch (c) {
        case 'm':
            o.mode = optarg;
            break;
        case 't':
            o.seconds = atof(optarg);
            break;
        case 'a':
            if (inet_pton(AF_INET, optarg, &o.addr) != 1 || (ntohl(o.addr.s_addr) >> 24) != 127) {
                fprintf(stderr, "udpbench: -a takes an address in 127.0.0.0/8\n");
                return 2;
            }
            break;
        case 'n':
            o.iters = atoi(optarg);
            break;
        case 's':
            o.small_len = (size_t)atol(optarg);
            break;
        case 'S':
            o.seg_len = (size_t)atol(optarg);
            break;
        case 'g':
            o.gso_segs = atoi(optarg);
            break;
        default:
            usage();
            return 2;
        }
    }
    if (o.seconds <= 0 || o.seconds > 60 || o.iters <= 0 || o.small_len > 1400 || o.seg_len < 64 ||
        o.seg_len > 8192 || o.gso_segs < 1 || o.seg_len * (size_t)o.gso_segs > 65507) {
        fprintf(stderr, "udpbench: out of range: -t 0..60, -s <= 1400, -S 64..8192, "
                        "-S x -g <= 65507\n");
        return 2;
    }
    bool all = strcmp(o.mode, "all") == 0;
    if (!all && strcmp(o.mode, "plain") && strcmp(o.mode, "gso") && strcmp(o.mode, "pingpong") &&
        strcmp(o.mode, "pingack") && strcmp(o.mode, "pingackrx") && strcmp(o.mode, "memcpy") &&
        strcmp(o.mode, "shmpingpong") && strcmp(o.mode, "cma")) {
        usage();
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    setvbuf(stdout, NULL, _IOLBF, 0);
    int fails = 0;
    if (all || !strcmp(o.mode, "plain"))
        fails += run_goodput(&o, false) != 0;
    if (all || !strcmp(o.mode, "gso"))
        fails += run_goodput(&o, true) != 0;
    if (all || !strcmp(o.mode, "pingpong"))
        fails += run_pingpong(&o) != 0;
    if (all || !strcmp(o.mode, "pingack")) {
        o.shape = PP_ACK;
        fails += run_pingpong(&o) != 0;
    }
    if (all || !strcmp(o.mode, "pingackrx")) {
        o.shape = PP_ACK_DEVICE_RX;
        fails += run_pingpong(&o) != 0;
    }
    if (all || !strcmp(o.mode, "memcpy"))
        fails += run_memcpy(&o) != 0;
    if (all || !strcmp(o.mode, "shmpingpong"))
        fails += run_shm_pingpong(&o) != 0;
    if (all || !strcmp(o.mode, "cma"))
        fails += run_cma(&o) != 0;
    return fails ? 1 : 0;
}

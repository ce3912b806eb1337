/* bootstrap.c: the TCP rendezvous. The root (the process holding the
 * listening socket named by the unique id) collects one fixed-size record
 * from every rank and sends the whole table back; the same sockets then
 * carry a barrier (so that no rank sends before every QP is ready) and are
 * closed. IPv4 only. Every read, write and connect has the deadline. */
#include "sc_int.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define SC_ID_MAGIC   0x73724964u /* "srId" */
#define SC_BOOT_MAGIC 0x7372426fu /* "srBo" */

struct boot_hello {
    uint32_t magic;
    int32_t rank, nranks;
    uint32_t rec_len;
    uint64_t nonce;
};

struct boot_reply {
    int32_t status; /* srcclResult_t */
    char msg[252];
};

static int remaining_ms(uint64_t deadline)
{
    uint64_t now = sc_now_ns();
    if (now >= deadline)
        return 0;
    uint64_t ms = (deadline - now + 999999) / 1000000;
    return ms > 1000000 ? 1000000 : (int)ms;
}

/* 0, or -1 with errno (ETIMEDOUT, EPIPE for a closed peer, ...). */
static int io_all(int fd, void *buf, size_t len, bool out, uint64_t deadline)
{
    uint8_t *p = buf;
    while (len) {
        struct pollfd pfd = {.fd = fd, .events = out ? POLLOUT : POLLIN};
        int ms = remaining_ms(deadline);
        if (ms == 0) {
            errno = ETIMEDOUT;
            return -1;
        }
        int pr = poll(&pfd, 1, ms);
        if (pr < 0 && errno == EINTR)
            continue;
        if (pr < 0)
            return -1;
        if (pr == 0)
            continue;
        ssize_t n =
            out ? send(fd, p, len, MSG_NOSIGNAL | MSG_DONTWAIT) : recv(fd, p, len, MSG_DONTWAIT);
        if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK))
            continue;
        if (n < 0)
            return -1;
        if (n == 0) {
            errno = EPIPE; /* the peer closed: it failed or gave up */
            return -1;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

static int resolve(const char *host, uint32_t *addr)
{
    struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM}, *res;
    if (getaddrinfo(host, NULL, &hints, &res))
        return -1;
    *addr = ((struct sockaddr_in *)res->ai_addr)->sin_addr.s_addr;
    freeaddrinfo(res);
    return 0;
}

srcclResult_t sc_boot_make_id(struct sc_id *id, const char *host, uint16_t port, uint64_t nonce,
                              char *err, size_t err_len)
{
    memset(id, 0, sizeof(*id));
    id->magic = SC_ID_MAGIC;
    id->nonce = nonce;
    id->listen_fd = -1;
    id->port = htons(port);
    if (resolve(host, &id->addr))
        return sc_msg(err, err_len, srcclSystemError, "rendezvous: cannot resolve \"%s\" (IPv4)",
                      host);
    return srcclSuccess;
}

srcclResult_t sc_boot_listen(struct sc_id *id, char *err, size_t err_len)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return sc_msg(err, err_len, srcclSystemError, "rendezvous: socket: %s", strerror(errno));
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    struct sockaddr_in sa = {
        .sin_family = AF_INET, .sin_port = id->port, .sin_addr.s_addr = id->addr};
    int rc = bind(fd, (struct sockaddr *)&sa, sizeof(sa));
    if (rc && errno == EADDRNOTAVAIL) {
        /* The advertised address is not ours (NAT, a name for the host):
         * listen everywhere. */
        sa.sin_addr.s_addr = htonl(INADDR_ANY);
        rc = bind(fd, (struct sockaddr *)&sa, sizeof(sa));
    }
    if (rc || listen(fd, 1024))
        goto err;
    socklen_t l = sizeof(sa);
    if (getsockname(fd, (struct sockaddr *)&sa, &l))
        goto err;
    id->port = sa.sin_port;
    id->listen_fd = fd;
    id->pid = (uint32_t)getpid();
    return srcclSuccess;
err:;
    int e = errno;
    close(fd);
    char a[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, &id->addr, a, sizeof(a));
    return sc_msg(err, err_len, srcclSystemError, "rendezvous: cannot listen on %s:%u: %s", a,
                  ntohs(id->port), strerror(e));
}

SC_EXPORT srcclResult_t srcclGetUniqueId(srcclUniqueId *out)
{
    _Static_assert(sizeof(struct sc_id) <= sizeof(srcclUniqueId), "unique id too small");
    if (!out) {
        sc_set_thread_error("srcclGetUniqueId: id is NULL");
        return srcclInvalidArgument;
    }
    /* SRCCL_ROOT_ADDR's host (127.0.0.1 by default), an ephemeral port. */
    char host[256] = "127.0.0.1";
    const char *addr = getenv("SRCCL_ROOT_ADDR");
    if (addr && *addr) {
        snprintf(host, sizeof(host), "%s", addr);
        char *colon = strrchr(host, ':');
        if (colon)
            *colon = 0;
    }
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t nonce =
        ((uint64_t)ts.tv_nsec << 20) ^ (uint64_t)ts.tv_sec ^ ((uint64_t)getpid() << 40);
    int ufd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (ufd >= 0) {
        uint64_t rnd;
        if (read(ufd, &rnd, sizeof(rnd)) == (ssize_t)sizeof(rnd))
            nonce ^= rnd;
        close(ufd);
    }
    char err[256];
    struct sc_id id;
    srcclResult_t r = sc_boot_make_id(&id, host, 0, nonce, err, sizeof(err));
    if (!r)
        r = sc_boot_listen(&id, err, sizeof(err));
    if (r) {
        sc_set_thread_error("srcclGetUniqueId: %s", err);
        return r;
    }
    memset(out, 0, sizeof(*out));
    memcpy(out->internal, &id, sizeof(id));
    return srcclSuccess;
}

static srcclResult_t client_connect(const struct sc_id *id, uint64_t deadline, int *out, char *err,
                                    size_t err_len)
{
    struct sockaddr_in sa = {
        .sin_family = AF_INET, .sin_port = id->port, .sin_addr.s_addr = id->addr};
    char a[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, &id->addr, a, sizeof(a));
    int last = 0;
    for (;;) {
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
            return sc_msg(err, err_len, srcclSystemError, "rendezvous: socket: %s",
                          strerror(errno));
        if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0) {
            int one = 1;
            setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
            *out = fd;
            return srcclSuccess;
        }
        last = errno;
        close(fd);
        if (sc_now_ns() >= deadline)
            break;
        /* The root may not be listening yet. */
        struct timespec ts = {0, 20 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    return sc_msg(err, err_len, srcclTimeout, "rendezvous: cannot reach the root at %s:%u: %s", a,
                  ntohs(id->port), strerror(last));
}

static void reply_all(struct sc_boot *b, const struct boot_reply *rep, const void *all,
                      size_t all_len, uint64_t deadline)
{
    for (int i = 0; i < b->nranks; i++) {
        if (b->fds[i] < 0)
            continue;
        if (io_all(b->fds[i], (void *)rep, sizeof(*rep), true, deadline) ||
            (rep->status == srcclSuccess &&
             io_all(b->fds[i], (void *)all, all_len, true, deadline))) {
            close(b->fds[i]);
            b->fds[i] = -1;
        }
    }
}

static srcclResult_t root_exchange(struct sc_boot *b, const struct sc_id *id, const void *rec,
                                   size_t rec_len, uint8_t *all, uint64_t deadline, char *err,
                                   size_t err_len)
{
    int n = b->nranks, got = 1;
    memcpy(all + (size_t)b->rank * rec_len, rec, rec_len);
    srcclResult_t r = srcclSuccess;
    struct boot_reply rep = {0};
    while (got < n) {
        struct pollfd pfd = {.fd = b->listen_fd, .events = POLLIN};
        int ms = remaining_ms(deadline);
        int pr = ms ? poll(&pfd, 1, ms) : 0;
        if (pr < 0 && errno == EINTR)
            continue;
        if (pr <= 0) {
            char missing[128] = "";
            size_t off = 0;
            for (int i = 0; i < n && off < sizeof(missing) - 12; i++)
                if (i != b->rank && b->fds[i] < 0)
                    off += (size_t)snprintf(missing + off, sizeof(missing) - off, " %d", i);
            r = sc_msg(err, err_len, srcclTimeout,
                       "rendezvous: only %d of %d ranks arrived in time (missing:%s)", got, n,
                       missing);
            break;
        }
        int fd = accept4(b->listen_fd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0)
            continue;
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        struct boot_hello h;
        if (io_all(fd, &h, sizeof(h), false, deadline) || h.magic != SC_BOOT_MAGIC ||
            h.nonce != id->nonce) {
            close(fd); /* a stray connection, or another job's rank */
            continue;
        }
        bool taken = h.rank == b->rank || (h.rank >= 0 && h.rank < n && b->fds[h.rank] >= 0);
        if (h.nranks != n || h.rec_len != rec_len || h.rank < 0 || h.rank >= n || taken) {
            r = sc_msg(err, err_len, srcclInvalidUsage,
                       "rendezvous: rank %d says nranks %d (root: rank %d, nranks %d)%s", h.rank,
                       h.nranks, b->rank, n,
                       taken                  ? ": that rank is taken twice"
                       : h.rec_len != rec_len ? ": different srccl versions"
                                              : "");
            close(fd);
            break;
        }
        if (io_all(fd, all + (size_t)h.rank * rec_len, rec_len, false, deadline)) {
            close(fd);
            continue;
        }
        b->fds[h.rank] = fd;
        got++;
    }
    rep.status = r;
    if (r)
        snprintf(rep.msg, sizeof(rep.msg), "%s", err);
    reply_all(b, &rep, all, (size_t)n * rec_len, deadline);
    if (!r)
        for (int i = 0; i < n; i++)
            if (i != b->rank && b->fds[i] < 0)
                r = sc_msg(err, err_len, srcclRemoteError,
                           "rendezvous: rank %d went away during the exchange", i);
    return r;
}

srcclResult_t sc_boot_exchange(struct sc_boot *b, const struct sc_id *id, int rank, int nranks,
                               const void *rec, size_t rec_len, void *all, uint64_t timeout_ns,
                               char *err, size_t err_len)
{
    uint64_t deadline = sc_now_ns() + timeout_ns;
    memset(b, 0, sizeof(*b));
    b->listen_fd = -1;
    b->rank = rank;
    b->nranks = nranks;
    if (id->magic != SC_ID_MAGIC)
        return sc_msg(err, err_len, srcclInvalidArgument,
                      "the unique id is not one from srcclGetUniqueId");
    b->is_root = id->pid == (uint32_t)getpid() && id->listen_fd >= 0;
    b->fds = malloc(sizeof(int) * (size_t)nranks);
    if (!b->fds)
        return sc_msg(err, err_len, srcclSystemError, "out of memory");
    for (int i = 0; i < nranks; i++)
        b->fds[i] = -1;
    if (b->is_root) {
        b->listen_fd = id->listen_fd;
        return root_exchange(b, id, rec, rec_len, all, deadline, err, err_len);
    }
    srcclResult_t r = client_connect(id, deadline, &b->fds[0], err, err_len);
    if (r)
        return r;
    struct boot_hello h = {.magic = SC_BOOT_MAGIC,
                           .rank = rank,
                           .nranks = nranks,
                           .rec_len = (uint32_t)rec_len,
                           .nonce = id->nonce};
    struct boot_reply rep;
    if (io_all(b->fds[0], &h, sizeof(h), true, deadline) ||
        io_all(b->fds[0], (void *)rec, rec_len, true, deadline) ||
        io_all(b->fds[0], &rep, sizeof(rep), false, deadline))
        return sc_msg(err, err_len, errno == ETIMEDOUT ? srcclTimeout : srcclRemoteError,
                      "rendezvous: no answer from the root: %s", strerror(errno));
    if (rep.status != srcclSuccess) {
        rep.msg[sizeof(rep.msg) - 1] = 0;
        return sc_msg(err, err_len, (srcclResult_t)rep.status, "the root failed: %s", rep.msg);
    }
    if (io_all(b->fds[0], all, (size_t)nranks * rec_len, false, deadline))
        return sc_msg(err, err_len, errno == ETIMEDOUT ? srcclTimeout : srcclRemoteError,
                      "rendezvous: reading the table from the root: %s", strerror(errno));
    return srcclSuccess;
}

srcclResult_t sc_boot_barrier(struct sc_boot *b, uint64_t timeout_ns, char *err, size_t err_len)
{
    uint64_t deadline = sc_now_ns() + timeout_ns;
    uint8_t tok = 1;
    if (!b->is_root) {
        if (io_all(b->fds[0], &tok, 1, true, deadline) ||
            io_all(b->fds[0], &tok, 1, false, deadline))
            return sc_msg(err, err_len, errno == ETIMEDOUT ? srcclTimeout : srcclRemoteError,
                          "bootstrap barrier: %s", strerror(errno));
        return srcclSuccess;
    }
    for (int i = 0; i < b->nranks; i++)
        if (b->fds[i] >= 0 && io_all(b->fds[i], &tok, 1, false, deadline))
            return sc_msg(err, err_len, errno == ETIMEDOUT ? srcclTimeout : srcclRemoteError,
                          "bootstrap barrier: rank %d: %s", i, strerror(errno));
    for (int i = 0; i < b->nranks; i++)
        if (b->fds[i] >= 0 && io_all(b->fds[i], &tok, 1, true, deadline))
            return sc_msg(err, err_len, srcclRemoteError, "bootstrap barrier: rank %d: %s", i,
                          strerror(errno));
    return srcclSuccess;
}

void sc_boot_close(struct sc_boot *b)
{
    if (b->fds)
        for (int i = 0; i < b->nranks; i++)
            if (b->fds[i] >= 0)
                close(b->fds[i]);
    free(b->fds);
    b->fds = NULL;
    if (b->listen_fd >= 0)
        close(b->listen_fd);
    b->listen_fd = -1;
}

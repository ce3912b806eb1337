/* rsocket_errors.c: the rsocket calls' answers to bad input and to a
 * connection's end, in one process on loopback: errno values, EOF after
 * the peer's shutdown, MSG_PEEK, nonblocking EAGAIN, a refused connect.
 * Usage: rsocket_errors PORT (PORT and PORT+1 must be free). */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <rdma/rsocket.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>

static int failures;

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "FAIL %s:%d: %s (errno %d %s)\n", __FILE__, __LINE__, #cond, errno,    \
                    strerror(errno));                                                              \
            failures++;                                                                            \
        }                                                                                          \
    } while (0)

static struct sockaddr_in lo(int port)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return a;
}

/* waits (bounded: 200 x 50 ms) for EVENTS on fd */
static short wait_for(int fd, short events)
{
    for (int i = 0; i < 200; i++) {
        struct pollfd p = {.fd = fd, .events = events};
        int n = rpoll(&p, 1, 50);
        if (n < 0)
            return -1;
        if (n > 0)
            return p.revents;
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 2)
        return 2;
    int port = atoi(argv[1]);
    char buf[64];

    /* what is no stream socket, and numbers that are no rsocket */
    errno = 0;
    CHECK(rsocket(AF_UNIX, SOCK_STREAM, 0) < 0 && errno == EAFNOSUPPORT);
    CHECK(rsocket(AF_INET, SOCK_DGRAM, 0) < 0 && errno == ESOCKTNOSUPPORT);
    CHECK(rrecv(0, buf, sizeof(buf), 0) < 0 && errno == EBADF);
    CHECK(rsend(-1, buf, 1, 0) < 0 && errno == EBADF);
    CHECK(rclose(12345) < 0 && errno == EBADF);

    /* an unconnected socket */
    int s = rsocket(AF_INET, SOCK_STREAM, 0);
    CHECK(s >= 0);
    CHECK(rrecv(s, buf, sizeof(buf), 0) < 0 && errno == ENOTCONN);
    CHECK(rsend(s, "x", 1, 0) < 0 && errno == ENOTCONN);
    CHECK(rshutdown(s, SHUT_WR) < 0 && errno == ENOTCONN);
    CHECK(rconnect(s, NULL, 0) < 0 && errno == EFAULT);
    int v = 0;
    CHECK(rsetsockopt(s, SOL_SOCKET, SO_BROADCAST, &v, sizeof(v)) < 0 && errno == ENOPROTOOPT);
    CHECK(riomap(s, buf, sizeof(buf), PROT_WRITE, 0, -1) < 0 && errno == ENOSYS);

    /* a refused connect, blocking and nonblocking (nobody on port+1) */
    struct sockaddr_in none = lo(port + 1);
    CHECK(rconnect(s, (struct sockaddr *)&none, sizeof(none)) < 0 && errno == ECONNREFUSED);
    rclose(s);
    s = rsocket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    CHECK(s >= 0);
    CHECK(rconnect(s, (struct sockaddr *)&none, sizeof(none)) < 0 && errno == EINPROGRESS);
    CHECK(wait_for(s, POLLOUT) & POLLERR);
    socklen_t len = sizeof(v);
    CHECK(!rgetsockopt(s, SOL_SOCKET, SO_ERROR, &v, &len) && v == ECONNREFUSED);
    rclose(s);

    /* a connection to ourselves */
    int l = rsocket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in at = lo(port);
    CHECK(l >= 0 && !rbind(l, (struct sockaddr *)&at, sizeof(at)) && !rlisten(l, 4));
    CHECK(rfcntl(l, F_SETFL, O_NONBLOCK) == 0 && (rfcntl(l, F_GETFL) & O_NONBLOCK));
    CHECK(raccept(l, NULL, NULL) < 0 && errno == EAGAIN);
    int c = rsocket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    CHECK(c >= 0);
    CHECK(rconnect(c, (struct sockaddr *)&at, sizeof(at)) < 0 && errno == EINPROGRESS);
    CHECK(wait_for(l, POLLIN) & POLLIN);
    int a = raccept(l, NULL, NULL);
    CHECK(a >= 0);
    CHECK(wait_for(c, POLLOUT) == POLLOUT);
    CHECK(!rgetsockopt(c, SOL_SOCKET, SO_ERROR, &v, &len) && v == 0);
    CHECK(rrecv(a, buf, sizeof(buf), MSG_DONTWAIT) < 0 && errno == EAGAIN);

    CHECK(rsend(c, "hello", 5, 0) == 5);
    CHECK(wait_for(a, POLLIN) & POLLIN);
    memset(buf, 0, sizeof(buf));
    CHECK(rrecv(a, buf, 3, MSG_PEEK) == 3 && !memcmp(buf, "hel", 3));
    CHECK(rrecv(a, buf, sizeof(buf), MSG_WAITALL | MSG_DONTWAIT) == 5 && !memcmp(buf, "hello", 5));

    /* the writer's shutdown: the reader gets end of file, then again */
    CHECK(!rshutdown(c, SHUT_WR));
    CHECK(rsend(c, "x", 1, 0) < 0 && errno == EPIPE);
    CHECK(wait_for(a, POLLIN) & POLLIN);
    CHECK(rrecv(a, buf, sizeof(buf), 0) == 0);
    CHECK(rrecv(a, buf, sizeof(buf), 0) == 0);
    /* the other direction still carries data */
    CHECK(rsend(a, "back", 4, 0) == 4);
    CHECK(wait_for(c, POLLIN) & POLLIN);
    CHECK(rrecv(c, buf, sizeof(buf), 0) == 4 && !memcmp(buf, "back", 4));
    CHECK(!rclose(a));
    CHECK(wait_for(c, POLLIN) & POLLIN);
    CHECK(rrecv(c, buf, sizeof(buf), 0) == 0);
    CHECK(!rclose(c));
    CHECK(!rclose(l));
    CHECK(rrecv(c, buf, sizeof(buf), 0) < 0 && errno == EBADF);

    if (failures)
        return 1;
    printf("PASS\n");
    return 0;
}

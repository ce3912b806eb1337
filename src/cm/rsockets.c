/* rsockets.c: the rsocket API (<rdma/rsocket.h>) is exported so that its
 * clients load, and every call fails with ENOSYS until rsockets are built
 * (docs/CM.md). */
#include <errno.h>
#include <rdma/rsocket.h>

#define SCM_EXPORT __attribute__((visibility("default")))

SCM_EXPORT int rsocket(int domain, int type, int protocol)
{
    errno = ENOSYS;
    return -1;
}

SCM_EXPORT int rbind(int socket, const struct sockaddr *addr, socklen_t addrlen)
{
    errno = ENOSYS;
    return -1;
}

SCM_EXPORT int rlisten(int socket, int backlog)
{
    errno = ENOSYS;
    return -1;
}

SCM_EXPORT int raccept(int socket, struct sockaddr *addr, socklen_t *addrlen)
{
    errno = ENOSYS;
    return -1;
}

SCM_EXPORT int rconnect(int socket, const struct sockaddr *addr, socklen_t addrlen)
{
    errno = ENOSYS;
    return -1;
}

SCM_EXPORT int rshutdown(int socket, int how)
{
    errno = ENOSYS;
    return -1;
}

SCM_EXPORT int rclose(int socket)
{
    errno = ENOSYS;
    return -1;
}

SCM_EXPORT ssize_t rrecv(int socket, void *buf, size_t len, int flags)
{
    errno = ENOSYS;
    return -1;
}

SCM_EXPORT ssize_t rrecvfrom(int socket, void *buf, size_t len, int flags,
                             struct sockaddr *src_addr, socklen_t *addrlen)
{
    errno = ENOSYS;
    return -1;
}

SCM_EXPORT ssize_t rrecvmsg(int socket, struct msghdr *msg, int flags)
{
    errno = ENOSYS;
    return -1;
}

SCM_EXPORT ssize_t rsend(int socket, const void *buf, size_t len, int flags)
{
    errno = ENOSYS;
    return -1;
}

SCM_EXPORT ssize_t rsendto(int socket, const void *buf, size_t len, int flags,
                           const struct sockaddr *dest_addr, socklen_t addrlen)
{
    errno = ENOSYS;
    return -1;
}

SCM_EXPORT ssize_t rsendmsg(int socket, const struct msghdr *msg, int flags)
{
    errno = ENOSYS;
    return -1;
}

SCM_EXPORT ssize_t rread(int socket, void *buf, size_t count)
{
    errno = ENOSYS;
    return -1;
}

SCM_EXPORT ssize_t rreadv(int socket, const struct iovec *iov, int iovcnt)
{
    errno = ENOSYS;
    return -1;
}

SCM_EXPORT ssize_t rwrite(int socket, const void *buf, size_t count)
{
    errno = ENOSYS;
    return -1;
}

SCM_EXPORT ssize_t rwritev(int socket, const struct iovec *iov, int iovcnt)
{
    errno = ENOSYS;
    return -1;
}

SCM_EXPORT int rpoll(struct pollfd *fds, nfds_t nfds, int timeout)
{
    errno = ENOSYS;
    return -1;
}

SCM_EXPORT int rselect(int nfds, fd_set *readfds, fd_set *writefds, fd_set *exceptfds,
                       struct timeval *timeout)
{
    errno = ENOSYS;
    return -1;
}

SCM_EXPORT int rgetpeername(int socket, struct sockaddr *addr, socklen_t *addrlen)
{
    errno = ENOSYS;
    return -1;
}

SCM_EXPORT int rgetsockname(int socket, struct sockaddr *addr, socklen_t *addrlen)
{
    errno = ENOSYS;
    return -1;
}

SCM_EXPORT int rsetsockopt(int socket, int level, int optname, const void *optval, socklen_t optlen)
{
    errno = ENOSYS;
    return -1;
}

SCM_EXPORT int rgetsockopt(int socket, int level, int optname, void *optval, socklen_t *optlen)
{
    errno = ENOSYS;
    return -1;
}

SCM_EXPORT int rfcntl(int socket, int cmd, ...)
{
    errno = ENOSYS;
    return -1;
}

SCM_EXPORT off_t riomap(int socket, void *buf, size_t len, int prot, int flags, off_t offset)
{
    errno = ENOSYS;
    return -1;
}

SCM_EXPORT int riounmap(int socket, void *buf, size_t len)
{
    errno = ENOSYS;
    return -1;
}

SCM_EXPORT size_t riowrite(int socket, const void *buf, size_t count, off_t offset, int flags)
{
    errno = ENOSYS;
    return (size_t)-1;
}

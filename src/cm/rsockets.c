/* rsockets.c: the rsocket API (<rdma/rsocket.h>): stream sockets over an RC
 * QP that an rdma_cm id (RDMA_PS_TCP) connects (docs/CM.md, "rsockets").
 *
 * An rsocket's number is its own event channel's fd, so it never collides
 * with a file descriptor of the process and rpoll tells rsockets from
 * other fds by a table lookup. Each connected rsocket owns a PD, a CQ with
 * a completion channel, an RC QP and one registered region of RS_BUF_CNT
 * receive and RS_BUF_CNT send buffers of RS_BUF_LEN bytes.
 *
 * Wire format (softrdma's own, not rdma-core's rsocket protocol): every
 * message is a SEND with immediate data; the immediate is
 * type << 24 | credits returned. DATA carries 1..RS_BUF_LEN bytes of the
 * stream, CREDIT and FIN none. A credit is one receive buffer the peer has
 * posted again; every message returns the credits its sender has gathered.
 * Data is sent only while more than RS_CTRL_RESERVE credits remain, so a
 * reader that stops reading stops the writer and never loses a byte;
 * CREDIT and FIN are sent regardless, with RNR retry 7 (which means retry
 * forever) covering the moment the peer has not reposted yet. FIN
 * follows the data on the same QP, whose order IBA 9.5 guarantees, so the
 * reader sees every byte before end of file. */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <rdma/rdma_cma.h>
#include <rdma/rsocket.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define SCM_EXPORT __attribute__((visibility("default")))

enum {
    RS_BUF_LEN = 32 * 1024,
    RS_BUF_CNT = 32,
    RS_CTRL_RESERVE = 4,              /* credits that only CREDIT and FIN may use */
    RS_CREDIT_BATCH = RS_BUF_CNT / 4, /* gathered credits worth a CREDIT message */
    RS_SQ_DEPTH = RS_BUF_CNT + 32,
    RS_CQ_DEPTH = RS_SQ_DEPTH + RS_BUF_CNT,
    RS_RESOLVE_MS = 2000,
    RS_ACCEPT_MS = 10000, /* raccept waits this long for the RTU */
    RS_LINGER_MS = 5000,  /* rclose waits this long for its sends to complete */
    RS_ACK_TIMEOUT = 18,
};

enum rs_msg { RS_MSG_DATA = 1, RS_MSG_CREDIT = 2, RS_MSG_FIN = 3 };
#define RS_WR_CTRL UINT64_MAX /* wr_id of a send that holds no buffer */

enum rs_state {
    RS_IDLE,       /* created or bound */
    RS_LISTENING,  /* rlisten done */
    RS_RESOLVING,  /* rconnect: address, then route */
    RS_CONNECTING, /* REQ sent */
    RS_CONNECTED,
    RS_FAILED, /* connect failed or the connection broke: err tells */
};

struct rs_pending {
    struct rdma_cm_id *id;
    struct rs_pending *next;
};

struct rs_recvd {
    uint32_t idx, len;
};

struct rsock {
    int fd; /* the channel's fd: the rsocket's number */
    pthread_mutex_t lock;
    struct rdma_event_channel *ch;
    struct rdma_cm_id *id;
    enum rs_state state;
    int so_error;   /* SO_ERROR of a nonblocking connect, read once */
    int conn_error; /* errno for I/O after the connection broke */
    bool nonblock;
    bool rd_shut, wr_shut; /* local shutdown(2) halves */
    bool fin_sent, peer_fin, peer_gone;
    /* listener: CONNECT_REQUESTs not yet accepted */
    struct rs_pending *pend_head, **pend_tail;
    /* verbs resources of a connection */
    struct ibv_pd *pd;
    struct ibv_comp_channel *cc;
    struct ibv_cq *cq;
    struct ibv_qp *qp;
    struct ibv_mr *mr;
    uint8_t *mem; /* RS_BUF_CNT receive buffers, then RS_BUF_CNT send buffers */
    /* receive side: completed DATA buffers in arrival order */
    struct rs_recvd rq[RS_BUF_CNT];
    uint32_t rq_head, rq_cnt, rq_off;
    uint32_t credits_gathered; /* reposted buffers not yet told to the peer */
    /* send side */
    int credits;              /* receive buffers the peer has posted for us */
    uint32_t sb_head, sb_cnt; /* send buffers in flight, in post order */
    uint32_t sq_posted;       /* sends not yet completed */
    /* options kept for getsockopt */
    int opt_reuseaddr, opt_keepalive, opt_nodelay, opt_keepidle, opt_sndbuf, opt_rcvbuf;
    int opt_sqsize, opt_rqsize, opt_inline;
    struct linger opt_linger;
};

/* The rsocket numbers of the process: an index from fd to rsocket, as
 * the API itself is process-wide (its numbers are the process's fds). */
static pthread_mutex_t rs_tab_lock = PTHREAD_MUTEX_INITIALIZER;
static struct rsock **rs_tab;
static int rs_tab_len;

static int rs_fail(int e)
{
    errno = e;
    return -1;
}

static uint64_t rs_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static int rs_tab_put(struct rsock *rs)
{
    pthread_mutex_lock(&rs_tab_lock);
    if (rs->fd >= rs_tab_len) {
        int n = rs_tab_len ? rs_tab_len : 64;
        while (n <= rs->fd)
            n *= 2;
        struct rsock **t = realloc(rs_tab, sizeof(*t) * (size_t)n);
        if (!t) {
            pthread_mutex_unlock(&rs_tab_lock);
            return rs_fail(ENOMEM);
        }
        memset(t + rs_tab_len, 0, sizeof(*t) * (size_t)(n - rs_tab_len));
        rs_tab = t;
        rs_tab_len = n;
    }
    rs_tab[rs->fd] = rs;
    pthread_mutex_unlock(&rs_tab_lock);
    return 0;
}

static struct rsock *rs_lookup(int fd)
{
    struct rsock *rs = NULL;
    pthread_mutex_lock(&rs_tab_lock);
    if (fd >= 0 && fd < rs_tab_len)
        rs = rs_tab[fd];
    pthread_mutex_unlock(&rs_tab_lock);
    return rs;
}

static void rs_tab_drop(struct rsock *rs)
{
    pthread_mutex_lock(&rs_tab_lock);
    if (rs->fd >= 0 && rs->fd < rs_tab_len && rs_tab[rs->fd] == rs)
        rs_tab[rs->fd] = NULL;
    pthread_mutex_unlock(&rs_tab_lock);
}

/* Looks an rsocket up and locks it; EBADF (ENOTSOCK would say the fd is
 * open, which we do not know) for a number that is none. */
static struct rsock *rs_get(int fd)
{
    struct rsock *rs = rs_lookup(fd);
    if (!rs) {
        errno = EBADF;
        return NULL;
    }
    pthread_mutex_lock(&rs->lock);
    return rs;
}

static void rs_put(struct rsock *rs)
{
    pthread_mutex_unlock(&rs->lock);
}

static struct rsock *rs_alloc(struct rdma_event_channel *ch)
{
    struct rsock *rs = calloc(1, sizeof(*rs));
    if (!rs)
        return NULL;
    pthread_mutex_init(&rs->lock, NULL);
    rs->ch = ch;
    rs->fd = ch->fd;
    rs->pend_tail = &rs->pend_head;
    rs->opt_sndbuf = rs->opt_rcvbuf = RS_BUF_LEN * RS_BUF_CNT;
    rs->opt_sqsize = rs->opt_rqsize = RS_BUF_CNT;
    /* the channel is read without blocking: every wait is a poll(2) */
    int fl = fcntl(ch->fd, F_GETFL);
    fcntl(ch->fd, F_SETFL, (fl < 0 ? 0 : fl) | O_NONBLOCK);
    return rs;
}

/* ---- verbs resources and posting ---- */

static uint8_t *rs_rbuf(struct rsock *rs, uint32_t idx)
{
    return rs->mem + (size_t)idx * RS_BUF_LEN;
}

static uint8_t *rs_sbuf(struct rsock *rs, uint32_t idx)
{
    return rs->mem + (size_t)(RS_BUF_CNT + idx) * RS_BUF_LEN;
}

static int rs_post_recv(struct rsock *rs, uint32_t idx)
{
    struct ibv_sge sge = {
        .addr = (uintptr_t)rs_rbuf(rs, idx), .length = RS_BUF_LEN, .lkey = rs->mr->lkey};
    struct ibv_recv_wr wr = {.wr_id = idx, .sg_list = &sge, .num_sge = 1}, *bad;
    return ibv_post_recv(rs->qp, &wr, &bad);
}

static void rs_free_res(struct rsock *rs)
{
    if (rs->qp)
        rdma_destroy_qp(rs->id);
    rs->qp = NULL;
    if (rs->mr)
        ibv_dereg_mr(rs->mr);
    rs->mr = NULL;
    free(rs->mem);
    rs->mem = NULL;
    if (rs->cq)
        ibv_destroy_cq(rs->cq);
    rs->cq = NULL;
    if (rs->cc)
        ibv_destroy_comp_channel(rs->cc);
    rs->cc = NULL;
    if (rs->pd)
        ibv_dealloc_pd(rs->pd);
    rs->pd = NULL;
}

/* The connection's PD, CQ, QP and buffers, every receive buffer posted, on
 * an id whose route is known (active) or that a request brought (passive). */
static int rs_create_res(struct rsock *rs)
{
    struct ibv_context *vctx = rs->id->verbs;
    if (!vctx)
        return rs_fail(ENODEV);
    rs->pd = ibv_alloc_pd(vctx);
    rs->cc = rs->pd ? ibv_create_comp_channel(vctx) : NULL;
    rs->cq = rs->cc ? ibv_create_cq(vctx, RS_CQ_DEPTH, rs, rs->cc, 0) : NULL;
    if (!rs->cq)
        goto err;
    int fl = fcntl(rs->cc->fd, F_GETFL);
    fcntl(rs->cc->fd, F_SETFL, (fl < 0 ? 0 : fl) | O_NONBLOCK);
    rs->mem = aligned_alloc(4096, (size_t)2 * RS_BUF_CNT * RS_BUF_LEN);
    if (!rs->mem)
        goto err;
    rs->mr =
        ibv_reg_mr(rs->pd, rs->mem, (size_t)2 * RS_BUF_CNT * RS_BUF_LEN, IBV_ACCESS_LOCAL_WRITE);
    if (!rs->mr)
        goto err;
    struct ibv_qp_init_attr qa = {
        .send_cq = rs->cq,
        .recv_cq = rs->cq,
        .qp_type = IBV_QPT_RC,
        .sq_sig_all = 1,
        .cap = {.max_send_wr = RS_SQ_DEPTH,
                .max_recv_wr = RS_BUF_CNT,
                .max_send_sge = 1,
                .max_recv_sge = 1},
    };
    if (rdma_create_qp(rs->id, rs->pd, &qa))
        goto err;
    rs->qp = rs->id->qp;
    for (uint32_t i = 0; i < RS_BUF_CNT; i++)
        if (rs_post_recv(rs, i))
            goto err;
    /* the peer posts as many buffers as we do before it connects */
    rs->credits = RS_BUF_CNT;
    return 0;
err:;
    int e = errno ? errno : ENOMEM;
    rs_free_res(rs);
    return rs_fail(e);
}

static bool rs_sq_room(const struct rsock *rs)
{
    return rs->sq_posted < RS_SQ_DEPTH;
}

static bool rs_can_send_data(const struct rsock *rs)
{
    return rs->sb_cnt < RS_BUF_CNT && rs->credits > RS_CTRL_RESERVE && rs_sq_room(rs);
}

static int rs_post_msg(struct rsock *rs, enum rs_msg type, uint64_t wr_id, void *data, uint32_t len)
{
    struct ibv_sge sge = {.addr = (uintptr_t)data, .length = len, .lkey = rs->mr->lkey};
    struct ibv_send_wr wr = {
        .wr_id = wr_id,
        .sg_list = len ? &sge : NULL,
        .num_sge = len ? 1 : 0,
        .opcode = IBV_WR_SEND_WITH_IMM,
        .send_flags = IBV_SEND_SIGNALED,
        .imm_data = htonl((uint32_t)type << 24 | (rs->credits_gathered & 0xffffff)),
    };
    struct ibv_send_wr *bad;
    if (ibv_post_send(rs->qp, &wr, &bad))
        return -1;
    rs->credits_gathered = 0;
    rs->credits--;
    rs->sq_posted++;
    return 0;
}

/* CREDIT once enough buffers have been reposted, FIN once shut down for
 * writing; a full send queue defers both to the next progress. */
static void rs_send_ctrl(struct rsock *rs)
{
    if (rs->state != RS_CONNECTED || rs->peer_gone)
        return;
    if (rs->wr_shut && !rs->fin_sent && rs_sq_room(rs)) {
        if (!rs_post_msg(rs, RS_MSG_FIN, RS_WR_CTRL, NULL, 0))
            rs->fin_sent = true;
    }
    if (rs->credits_gathered >= RS_CREDIT_BATCH && rs_sq_room(rs))
        rs_post_msg(rs, RS_MSG_CREDIT, RS_WR_CTRL, NULL, 0);
}

static void rs_broken(struct rsock *rs, int e)
{
    if (!rs->conn_error)
        rs->conn_error = e;
    rs->peer_gone = true;
}

/* Takes every completion the CQ holds; answers how many. */
static int rs_poll_cq(struct rsock *rs)
{
    if (!rs->cq)
        return 0;
    struct ibv_wc wc[16];
    int n, total = 0;
    while ((n = ibv_poll_cq(rs->cq, 16, wc)) > 0) {
        total += n;
        for (int i = 0; i < n; i++) {
            struct ibv_wc *w = &wc[i];
            if (!(w->opcode & IBV_WC_RECV)) {
                rs->sq_posted--;
                if (w->wr_id != RS_WR_CTRL && rs->sb_cnt) {
                    rs->sb_head = (rs->sb_head + 1) % RS_BUF_CNT;
                    rs->sb_cnt--;
                }
                if (w->status != IBV_WC_SUCCESS)
                    rs_broken(rs, ECONNRESET);
                continue;
            }
            if (w->status != IBV_WC_SUCCESS) {
                rs_broken(rs, ECONNRESET);
                continue;
            }
            uint32_t imm = ntohl(w->imm_data);
            uint32_t idx = (uint32_t)w->wr_id;
            rs->credits += (int)(imm & 0xffffff);
            switch (imm >> 24) {
            case RS_MSG_DATA:
                if (w->byte_len && !rs->rd_shut && rs->rq_cnt < RS_BUF_CNT) {
                    rs->rq[(rs->rq_head + rs->rq_cnt) % RS_BUF_CNT] =
                        (struct rs_recvd){.idx = idx, .len = w->byte_len};
                    rs->rq_cnt++;
                    continue;
                }
                break; /* empty, or shut for reading: dropped as TCP drops it */
            case RS_MSG_FIN:
                rs->peer_fin = true;
                break;
            default:
                break;
            }
            if (!rs_post_recv(rs, idx))
                rs->credits_gathered++;
        }
    }
    if (n < 0)
        rs_broken(rs, EIO);
    return total;
}

static int rs_connect_step(struct rsock *rs, struct rdma_cm_event *ev);

/* Takes every CM event waiting on the rsocket's channel. */
static void rs_poll_cm(struct rsock *rs)
{
    struct rdma_cm_event *ev;
    while (!rdma_get_cm_event(rs->ch, &ev)) {
        switch (ev->event) {
        case RDMA_CM_EVENT_CONNECT_REQUEST:
            if (rs->state == RS_LISTENING) {
                struct rs_pending *p = calloc(1, sizeof(*p));
                if (p) {
                    p->id = ev->id;
                    *rs->pend_tail = p;
                    rs->pend_tail = &p->next;
                } else {
                    rdma_reject(ev->id, NULL, 0);
                    rdma_destroy_id(ev->id);
                }
            }
            break;
        case RDMA_CM_EVENT_DISCONNECTED:
        case RDMA_CM_EVENT_DEVICE_REMOVAL:
            if (rs->state == RS_CONNECTED) {
                /* the peer's FIN, if it sent one, is in the CQ before this */
                rs_poll_cq(rs);
                rs->peer_gone = true;
                if (!rs->peer_fin && !rs->conn_error)
                    rs->conn_error = ECONNRESET;
            }
            break;
        default:
            if (rs->state == RS_RESOLVING || rs->state == RS_CONNECTING)
                rs_connect_step(rs, ev);
            break;
        }
        rdma_ack_cm_event(ev);
    }
}

static void rs_progress(struct rsock *rs)
{
    rs_poll_cm(rs);
    rs_poll_cq(rs);
    rs_send_ctrl(rs);
}

/* Sleeps until the CQ or the CM channel has news or timeout_ms passes
 * (-1: no limit). The CQ is armed and polled again first, so a completion
 * that came in between is not slept through. */
static void rs_wait(struct rsock *rs, int timeout_ms)
{
    struct pollfd pf[2] = {{.fd = rs->fd, .events = POLLIN}, {.fd = -1, .events = POLLIN}};
    if (rs->cq) {
        ibv_req_notify_cq(rs->cq, 0);
        if (rs_poll_cq(rs) || rs->peer_gone)
            return;
        pf[1].fd = rs->cc->fd;
    }
    pthread_mutex_unlock(&rs->lock);
    poll(pf, 2, timeout_ms);
    pthread_mutex_lock(&rs->lock);
    if (rs->cc && (pf[1].revents & POLLIN)) {
        struct ibv_cq *cq;
        void *ctx;
        /* the channel is nonblocking: this takes the event if it is there */
        while (!ibv_get_cq_event(rs->cc, &cq, &ctx))
            ibv_ack_cq_events(cq, 1);
    }
}

/* ---- connection setup ---- */

static int rs_errno_of_event(const struct rdma_cm_event *ev)
{
    switch (ev->event) {
    case RDMA_CM_EVENT_REJECTED:
        return ECONNREFUSED;
    case RDMA_CM_EVENT_UNREACHABLE:
        return ev->status == -ETIMEDOUT ? ETIMEDOUT : EHOSTUNREACH;
    case RDMA_CM_EVENT_ADDR_ERROR:
    case RDMA_CM_EVENT_ROUTE_ERROR:
        return EHOSTUNREACH;
    default:
        return ECONNREFUSED;
    }
}

static void rs_connect_fail(struct rsock *rs, int e)
{
    rs_free_res(rs);
    rs->state = RS_FAILED;
    rs->so_error = e;
    rs->conn_error = e;
}

static int rs_connect_step(struct rsock *rs, struct rdma_cm_event *ev)
{
    switch (ev->event) {
    case RDMA_CM_EVENT_ADDR_RESOLVED:
        if (rdma_resolve_route(rs->id, RS_RESOLVE_MS))
            rs_connect_fail(rs, errno);
        return 0;
    case RDMA_CM_EVENT_ROUTE_RESOLVED: {
        if (rs_create_res(rs)) {
            rs_connect_fail(rs, errno);
            return 0;
        }
        struct rdma_conn_param cp = {.retry_count = 7, .rnr_retry_count = 7};
        if (rdma_connect(rs->id, &cp)) {
            rs_connect_fail(rs, errno);
            return 0;
        }
        rs->state = RS_CONNECTING;
        return 0;
    }
    case RDMA_CM_EVENT_ESTABLISHED:
        if (rs->state == RS_CONNECTING)
            rs->state = RS_CONNECTED;
        return 0;
    case RDMA_CM_EVENT_ADDR_ERROR:
    case RDMA_CM_EVENT_ROUTE_ERROR:
    case RDMA_CM_EVENT_CONNECT_ERROR:
    case RDMA_CM_EVENT_UNREACHABLE:
    case RDMA_CM_EVENT_REJECTED:
        rs_connect_fail(rs, rs_errno_of_event(ev));
        return 0;
    default:
        return 0;
    }
}

SCM_EXPORT int rsocket(int domain, int type, int protocol)
{
    /* only stream sockets: the preload library falls back to the kernel's
     * socket for anything this refuses */
    if (domain != AF_INET && domain != AF_INET6)
        return rs_fail(EAFNOSUPPORT);
    if ((type & ~(SOCK_NONBLOCK | SOCK_CLOEXEC)) != SOCK_STREAM)
        return rs_fail(ESOCKTNOSUPPORT);
    if (protocol && protocol != IPPROTO_TCP)
        return rs_fail(EPROTONOSUPPORT);
    struct rdma_event_channel *ch = rdma_create_event_channel();
    if (!ch)
        return -1;
    struct rsock *rs = rs_alloc(ch);
    if (!rs)
        goto err_ch;
    if (rdma_create_id(ch, &rs->id, rs, RDMA_PS_TCP))
        goto err_rs;
    rs->nonblock = (type & SOCK_NONBLOCK) != 0;
    /* Local ACK Timeout 2^18 x 4.096 us (1.07 s), which the REQ gives the
     * passive side too: with 7 retries a connection outlives seconds of a
     * peer starved of CPU, as a TCP connection would */
    uint8_t ack_timeout = RS_ACK_TIMEOUT;
    rdma_set_option(rs->id, RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT, &ack_timeout,
                    sizeof(ack_timeout));
    if (rs_tab_put(rs))
        goto err_id;
    return rs->fd;
err_id:
    rdma_destroy_id(rs->id);
err_rs:
    free(rs);
err_ch:;
    int e = errno;
    rdma_destroy_event_channel(ch);
    return rs_fail(e ? e : ENOMEM);
}

static socklen_t rs_addr_len(const struct sockaddr *sa)
{
    return sa->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
}

static int rs_check_addr(const struct sockaddr *addr, socklen_t addrlen)
{
    if (!addr)
        return rs_fail(EFAULT);
    if (addrlen < sizeof(sa_family_t))
        return rs_fail(EINVAL);
    if (addr->sa_family != AF_INET && addr->sa_family != AF_INET6)
        return rs_fail(EAFNOSUPPORT);
    if (addrlen < rs_addr_len(addr))
        return rs_fail(EINVAL);
    return 0;
}

SCM_EXPORT int rbind(int socket, const struct sockaddr *addr, socklen_t addrlen)
{
    if (rs_check_addr(addr, addrlen))
        return -1;
    struct rsock *rs = rs_get(socket);
    if (!rs)
        return -1;
    int r =
        rs->state == RS_IDLE ? rdma_bind_addr(rs->id, (struct sockaddr *)addr) : rs_fail(EINVAL);
    rs_put(rs);
    return r;
}

SCM_EXPORT int rlisten(int socket, int backlog)
{
    struct rsock *rs = rs_get(socket);
    if (!rs)
        return -1;
    int r = 0;
    if (rs->state == RS_LISTENING)
        goto out;
    if (rs->state != RS_IDLE) {
        r = rs_fail(EINVAL);
        goto out;
    }
    r = rdma_listen(rs->id, backlog > 0 ? backlog : 1);
    if (!r)
        rs->state = RS_LISTENING;
out:
    rs_put(rs);
    return r;
}

static int rs_copy_addr(struct sockaddr *addr, socklen_t *addrlen, const struct sockaddr *sa)
{
    if (!addr || !addrlen)
        return 0;
    socklen_t n = sa ? rs_addr_len(sa) : 0;
    if (sa)
        memcpy(addr, sa, *addrlen < n ? *addrlen : n);
    *addrlen = n;
    return 0;
}

/* Waits on a new connection's own channel for ESTABLISHED, the RTU
 * (IBA 12.6), so the passive side sends only on an RTS QP. */
static int rs_wait_established(struct rsock *rs)
{
    uint64_t end = rs_now_ms() + RS_ACCEPT_MS;
    for (;;) {
        struct rdma_cm_event *ev;
        if (!rdma_get_cm_event(rs->ch, &ev)) {
            enum rdma_cm_event_type t = ev->event;
            rdma_ack_cm_event(ev);
            if (t == RDMA_CM_EVENT_ESTABLISHED)
                return 0;
            if (t == RDMA_CM_EVENT_DISCONNECTED || t == RDMA_CM_EVENT_CONNECT_ERROR ||
                t == RDMA_CM_EVENT_UNREACHABLE || t == RDMA_CM_EVENT_REJECTED)
                return rs_fail(ECONNABORTED);
            continue;
        }
        uint64_t now = rs_now_ms();
        if (now >= end)
            return rs_fail(ETIMEDOUT);
        struct pollfd pf = {.fd = rs->fd, .events = POLLIN};
        poll(&pf, 1, (int)(end - now));
    }
}

/* Makes an rsocket of a CONNECT_REQUEST's id: its own channel, QP and
 * buffers, then REP and the wait for RTU. */
static int rs_accept_one(struct rdma_cm_id *id)
{
    struct rdma_event_channel *ch = rdma_create_event_channel();
    if (!ch) {
        rdma_reject(id, NULL, 0);
        rdma_destroy_id(id);
        return -1;
    }
    struct rsock *rs = rs_alloc(ch);
    if (!rs)
        goto err_ch;
    rs->id = id;
    if (rdma_migrate_id(id, ch))
        goto err_rs;
    id->context = rs;
    if (rs_create_res(rs))
        goto err_rs;
    struct rdma_conn_param cp = {.retry_count = 7, .rnr_retry_count = 7};
    if (rdma_accept(id, &cp))
        goto err_res;
    if (rs_wait_established(rs))
        goto err_res;
    rs->state = RS_CONNECTED;
    if (rs_tab_put(rs))
        goto err_res;
    return rs->fd;
err_res:
    rs_free_res(rs);
err_rs:
    free(rs);
err_ch:;
    int e = errno ? errno : ENOMEM;
    rdma_reject(id, NULL, 0);
    rdma_destroy_id(id);
    rdma_destroy_event_channel(ch);
    return rs_fail(e);
}

SCM_EXPORT int raccept(int socket, struct sockaddr *addr, socklen_t *addrlen)
{
    struct rsock *rs = rs_get(socket);
    if (!rs)
        return -1;
    if (rs->state != RS_LISTENING) {
        rs_put(rs);
        return rs_fail(EINVAL);
    }
    struct rs_pending *p;
    for (;;) {
        rs_poll_cm(rs);
        if ((p = rs->pend_head))
            break;
        if (rs->nonblock) {
            rs_put(rs);
            return rs_fail(EAGAIN);
        }
        rs_wait(rs, -1);
    }
    rs->pend_head = p->next;
    if (!rs->pend_head)
        rs->pend_tail = &rs->pend_head;
    rs_put(rs);
    struct rdma_cm_id *id = p->id;
    free(p);
    int fd = rs_accept_one(id);
    if (fd >= 0) {
        struct rsock *n = rs_lookup(fd);
        rs_copy_addr(addr, addrlen, rdma_get_peer_addr(n->id));
    }
    return fd;
}

SCM_EXPORT int rconnect(int socket, const struct sockaddr *addr, socklen_t addrlen)
{
    if (rs_check_addr(addr, addrlen))
        return -1;
    struct rsock *rs = rs_get(socket);
    if (!rs)
        return -1;
    int r = 0;
    switch (rs->state) {
    case RS_IDLE:
        if (rdma_resolve_addr(rs->id, NULL, (struct sockaddr *)addr, RS_RESOLVE_MS)) {
            r = -1;
            goto out;
        }
        rs->state = RS_RESOLVING;
        break;
    case RS_RESOLVING:
    case RS_CONNECTING:
        if (rs->nonblock) {
            r = rs_fail(EALREADY);
            goto out;
        }
        break;
    case RS_CONNECTED:
        r = rs_fail(EISCONN);
        goto out;
    default:
        r = rs_fail(rs->state == RS_FAILED ? rs->conn_error : EINVAL);
        goto out;
    }
    for (;;) {
        rs_poll_cm(rs);
        if (rs->state == RS_CONNECTED)
            break;
        if (rs->state == RS_FAILED) {
            rs->so_error = 0;
            r = rs_fail(rs->conn_error);
            break;
        }
        if (rs->nonblock) {
            r = rs_fail(EINPROGRESS);
            break;
        }
        rs_wait(rs, -1);
    }
out:
    rs_put(rs);
    return r;
}

/* ---- data ---- */

/* Before I/O: 0 once connected, else -1 with errno, or 1 to wait for a
 * connect under way. */
static int rs_io_ready(struct rsock *rs)
{
    switch (rs->state) {
    case RS_CONNECTED:
        return 0;
    case RS_RESOLVING:
    case RS_CONNECTING:
        return 1;
    case RS_FAILED:
        return rs_fail(rs->conn_error ? rs->conn_error : ENOTCONN);
    default:
        return rs_fail(ENOTCONN);
    }
}

static ssize_t rs_recv_locked(struct rsock *rs, const struct iovec *iov, int iovcnt, int flags)
{
    bool dontwait = rs->nonblock || (flags & MSG_DONTWAIT);
    size_t want = 0;
    for (int i = 0; i < iovcnt; i++)
        want += iov[i].iov_len;
    size_t got = 0;
    int vi = 0;
    size_t voff = 0;
    for (;;) {
        rs_progress(rs);
        int st = rs_io_ready(rs);
        if (st < 0)
            return -1;
        if (st == 0) {
            uint32_t h = rs->rq_head, cnt = rs->rq_cnt, off = rs->rq_off;
            while (got < want && cnt) {
                struct rs_recvd *e = &rs->rq[h];
                while (vi < iovcnt && voff == iov[vi].iov_len)
                    vi++, voff = 0;
                size_t n = e->len - off;
                if (n > iov[vi].iov_len - voff)
                    n = iov[vi].iov_len - voff;
                memcpy((uint8_t *)iov[vi].iov_base + voff, rs_rbuf(rs, e->idx) + off, n);
                voff += n;
                got += n;
                off += (uint32_t)n;
                if (off == e->len) {
                    if (!(flags & MSG_PEEK) && !rs_post_recv(rs, e->idx))
                        rs->credits_gathered++;
                    h = (h + 1) % RS_BUF_CNT;
                    cnt--;
                    off = 0;
                }
            }
            if (!(flags & MSG_PEEK)) {
                rs->rq_head = h, rs->rq_cnt = cnt, rs->rq_off = off;
                rs_send_ctrl(rs);
            }
            if (got == want || (got && !(flags & MSG_WAITALL)) || (flags & MSG_PEEK && got))
                return (ssize_t)got;
            if (rs->peer_fin || rs->rd_shut)
                return (ssize_t)got; /* end of file */
            if (rs->peer_gone) {
                if (got)
                    return (ssize_t)got;
                return rs_fail(rs->conn_error ? rs->conn_error : ECONNRESET);
            }
            if (!want)
                return 0;
        }
        if (dontwait) {
            if (got)
                return (ssize_t)got;
            return rs_fail(EAGAIN);
        }
        rs_wait(rs, -1);
    }
}

static ssize_t rs_send_locked(struct rsock *rs, const struct iovec *iov, int iovcnt, int flags)
{
    bool dontwait = rs->nonblock || (flags & MSG_DONTWAIT);
    size_t want = 0;
    for (int i = 0; i < iovcnt; i++)
        want += iov[i].iov_len;
    size_t sent = 0;
    int vi = 0;
    size_t voff = 0;
    for (;;) {
        rs_progress(rs);
        int st = rs_io_ready(rs);
        if (st < 0)
            return -1;
        if (st == 0) {
            if (rs->wr_shut || rs->peer_gone) {
                if (sent)
                    return (ssize_t)sent;
                return rs_fail(rs->wr_shut ? EPIPE : rs->conn_error ? rs->conn_error : EPIPE);
            }
            while (sent < want && rs_can_send_data(rs)) {
                uint32_t slot = (rs->sb_head + rs->sb_cnt) % RS_BUF_CNT;
                uint8_t *b = rs_sbuf(rs, slot);
                uint32_t len = 0;
                while (len < RS_BUF_LEN && vi < iovcnt) {
                    size_t n = iov[vi].iov_len - voff;
                    if (n > RS_BUF_LEN - len)
                        n = RS_BUF_LEN - len;
                    memcpy(b + len, (const uint8_t *)iov[vi].iov_base + voff, n);
                    len += (uint32_t)n;
                    voff += n;
                    if (voff == iov[vi].iov_len)
                        vi++, voff = 0;
                }
                if (rs_post_msg(rs, RS_MSG_DATA, slot, b, len)) {
                    rs_broken(rs, errno ? errno : EIO);
                    break;
                }
                rs->sb_cnt++;
                sent += len;
            }
            if (sent == want)
                return (ssize_t)sent;
        }
        if (dontwait) {
            if (sent)
                return (ssize_t)sent;
            return rs_fail(EAGAIN);
        }
        rs_wait(rs, -1);
    }
}

static ssize_t rs_recvv(int socket, const struct iovec *iov, int iovcnt, int flags)
{
    if (iovcnt < 0 || (iovcnt && !iov))
        return rs_fail(EINVAL);
    struct rsock *rs = rs_get(socket);
    if (!rs)
        return -1;
    ssize_t r = rs_recv_locked(rs, iov, iovcnt, flags);
    rs_put(rs);
    return r;
}

static ssize_t rs_sendv(int socket, const struct iovec *iov, int iovcnt, int flags)
{
    if (iovcnt < 0 || (iovcnt && !iov))
        return rs_fail(EINVAL);
    struct rsock *rs = rs_get(socket);
    if (!rs)
        return -1;
    ssize_t r = rs_send_locked(rs, iov, iovcnt, flags);
    rs_put(rs);
    return r;
}

SCM_EXPORT ssize_t rrecv(int socket, void *buf, size_t len, int flags)
{
    struct iovec v = {.iov_base = buf, .iov_len = len};
    return rs_recvv(socket, &v, 1, flags);
}

SCM_EXPORT ssize_t rrecvfrom(int socket, void *buf, size_t len, int flags,
                             struct sockaddr *src_addr, socklen_t *addrlen)
{
    ssize_t r = rrecv(socket, buf, len, flags);
    if (r >= 0 && src_addr && addrlen)
        rgetpeername(socket, src_addr, addrlen);
    return r;
}

SCM_EXPORT ssize_t rrecvmsg(int socket, struct msghdr *msg, int flags)
{
    if (!msg)
        return rs_fail(EFAULT);
    msg->msg_controllen = 0;
    msg->msg_flags = 0;
    return rs_recvv(socket, msg->msg_iov, (int)msg->msg_iovlen, flags);
}

SCM_EXPORT ssize_t rsend(int socket, const void *buf, size_t len, int flags)
{
    struct iovec v = {.iov_base = (void *)buf, .iov_len = len};
    return rs_sendv(socket, &v, 1, flags);
}

SCM_EXPORT ssize_t rsendto(int socket, const void *buf, size_t len, int flags,
                           const struct sockaddr *dest_addr, socklen_t addrlen)
{
    /* a connected stream socket ignores the address, as TCP does */
    return rsend(socket, buf, len, flags);
}

SCM_EXPORT ssize_t rsendmsg(int socket, const struct msghdr *msg, int flags)
{
    if (!msg)
        return rs_fail(EFAULT);
    return rs_sendv(socket, msg->msg_iov, (int)msg->msg_iovlen, flags);
}

SCM_EXPORT ssize_t rread(int socket, void *buf, size_t count)
{
    return rrecv(socket, buf, count, 0);
}

SCM_EXPORT ssize_t rreadv(int socket, const struct iovec *iov, int iovcnt)
{
    return rs_recvv(socket, iov, iovcnt, 0);
}

SCM_EXPORT ssize_t rwrite(int socket, const void *buf, size_t count)
{
    return rsend(socket, buf, count, 0);
}

SCM_EXPORT ssize_t rwritev(int socket, const struct iovec *iov, int iovcnt)
{
    return rs_sendv(socket, iov, iovcnt, 0);
}

/* ---- shutdown and close ---- */

SCM_EXPORT int rshutdown(int socket, int how)
{
    if (how != SHUT_RD && how != SHUT_WR && how != SHUT_RDWR)
        return rs_fail(EINVAL);
    struct rsock *rs = rs_get(socket);
    if (!rs)
        return -1;
    int r = 0;
    if (rs->state != RS_CONNECTED) {
        r = rs_fail(ENOTCONN);
        goto out;
    }
    if (how != SHUT_WR)
        rs->rd_shut = true;
    if (how != SHUT_RD)
        rs->wr_shut = true;
    rs_progress(rs);
out:
    rs_put(rs);
    return r;
}

/* Lets the sends already posted (data, then FIN) complete before the QP
 * goes, as close(2) lets TCP deliver what was written; bounded. */
static void rs_linger(struct rsock *rs)
{
    if (rs->state != RS_CONNECTED)
        return;
    rs->wr_shut = true;
    uint64_t end = rs_now_ms() + RS_LINGER_MS;
    for (;;) {
        rs_progress(rs);
        if (rs->peer_gone || (rs->fin_sent && !rs->sq_posted))
            return;
        uint64_t now = rs_now_ms();
        if (now >= end)
            return;
        rs_wait(rs, (int)(end - now));
    }
}

SCM_EXPORT int rclose(int socket)
{
    struct rsock *rs = rs_get(socket);
    if (!rs)
        return -1;
    rs_tab_drop(rs);
    rs_linger(rs);
    if (rs->state == RS_CONNECTED || rs->state == RS_CONNECTING)
        rdma_disconnect(rs->id);
    struct rs_pending *p;
    while ((p = rs->pend_head)) {
        rs->pend_head = p->next;
        rdma_reject(p->id, NULL, 0);
        rdma_destroy_id(p->id);
        free(p);
    }
    rs_free_res(rs);
    /* events still queued for the id are acknowledged before it goes */
    struct rdma_cm_event *ev;
    while (!rdma_get_cm_event(rs->ch, &ev))
        rdma_ack_cm_event(ev);
    rdma_destroy_id(rs->id);
    rdma_destroy_event_channel(rs->ch);
    rs_put(rs);
    pthread_mutex_destroy(&rs->lock);
    free(rs);
    return 0;
}

/* ---- poll and select ---- */

/* The poll(2) events an rsocket has now. */
static short rs_events(struct rsock *rs)
{
    switch (rs->state) {
    case RS_LISTENING:
        return rs->pend_head ? POLLIN : 0;
    case RS_RESOLVING:
    case RS_CONNECTING:
        return 0;
    case RS_FAILED:
        return POLLOUT | POLLERR | POLLHUP;
    case RS_IDLE:
        return POLLOUT | POLLHUP; /* what Linux answers for an unconnected socket */
    case RS_CONNECTED:
        break;
    }
    short ev = 0;
    if (rs->rq_cnt || rs->peer_fin || rs->peer_gone || rs->rd_shut)
        ev |= POLLIN;
    if (rs_can_send_data(rs) || rs->wr_shut || rs->peer_gone)
        ev |= POLLOUT;
    if (rs->peer_gone && !rs->peer_fin)
        ev |= POLLERR;
    /* as TCP: the peer's FIN alone is POLLIN and POLLRDHUP (its disconnect
     * after FIN too, data may wait behind it); hang-up is both halves shut
     * or a connection lost without FIN */
    if ((rs->peer_gone && !rs->peer_fin) || (rs->peer_fin && rs->wr_shut))
        ev |= POLLHUP;
    if (rs->peer_fin)
        ev |= POLLRDHUP;
    return ev;
}

/* One look at every entry: rsockets after their progress, other fds by a
 * poll(2) that does not wait. */
static int rs_poll_once(struct pollfd *fds, nfds_t nfds, struct pollfd *os)
{
    int cnt = 0;
    nfds_t no = 0;
    for (nfds_t i = 0; i < nfds; i++) {
        fds[i].revents = 0;
        struct rsock *rs = rs_get(fds[i].fd);
        if (!rs) {
            os[no++] = (struct pollfd){.fd = fds[i].fd, .events = fds[i].events};
            continue;
        }
        rs_progress(rs);
        fds[i].revents = rs_events(rs) & (fds[i].events | POLLERR | POLLHUP);
        rs_put(rs);
    }
    if (no && poll(os, no, 0) < 0)
        return -1;
    no = 0;
    for (nfds_t i = 0; i < nfds; i++) {
        if (!rs_lookup(fds[i].fd))
            fds[i].revents = os[no++].revents;
        if (fds[i].revents)
            cnt++;
    }
    return cnt;
}

SCM_EXPORT int rpoll(struct pollfd *fds, nfds_t nfds, int timeout)
{
    if (nfds && !fds)
        return rs_fail(EFAULT);
    /* os: the other fds for rs_poll_once; ws: the set slept on, every
     * rsocket contributing its CM channel and its completion channel */
    struct pollfd *os = calloc(nfds ? nfds : 1, sizeof(*os));
    struct pollfd *ws = calloc(2 * nfds + 1, sizeof(*ws));
    if (!os || !ws) {
        free(os);
        free(ws);
        return rs_fail(ENOMEM);
    }
    uint64_t end = timeout > 0 ? rs_now_ms() + (uint64_t)timeout : 0;
    int r;
    for (;;) {
        r = rs_poll_once(fds, nfds, os);
        if (r != 0 || timeout == 0)
            break;
        int left = -1;
        if (timeout > 0) {
            uint64_t now = rs_now_ms();
            if (now >= end)
                break;
            left = (int)(end - now);
        }
        nfds_t nw = 0;
        bool ready = false;
        for (nfds_t i = 0; i < nfds && !ready; i++) {
            struct rsock *rs = rs_get(fds[i].fd);
            if (!rs) {
                ws[nw++] = (struct pollfd){.fd = fds[i].fd, .events = fds[i].events};
                continue;
            }
            ws[nw++] = (struct pollfd){.fd = rs->fd, .events = POLLIN};
            if (rs->cq) {
                ibv_req_notify_cq(rs->cq, 0);
                /* a completion that came before the arm raises no event */
                rs_poll_cq(rs);
                rs_send_ctrl(rs);
                if (rs_events(rs) & (fds[i].events | POLLERR | POLLHUP))
                    ready = true;
                ws[nw++] = (struct pollfd){.fd = rs->cc->fd, .events = POLLIN};
            }
            rs_put(rs);
        }
        if (ready)
            continue;
        int n = poll(ws, nw, left);
        if (n < 0) {
            r = -1;
            break;
        }
        /* take the completion events that woke us, re-arming comes next */
        for (nfds_t i = 0; i < nfds; i++) {
            struct rsock *rs = rs_get(fds[i].fd);
            if (!rs)
                continue;
            if (rs->cc) {
                struct ibv_cq *cq;
                void *ctx;
                while (!ibv_get_cq_event(rs->cc, &cq, &ctx))
                    ibv_ack_cq_events(cq, 1);
            }
            rs_put(rs);
        }
    }
    free(os);
    free(ws);
    return r;
}

SCM_EXPORT int rselect(int nfds, fd_set *readfds, fd_set *writefds, fd_set *exceptfds,
                       struct timeval *timeout)
{
    if (nfds < 0 || nfds > FD_SETSIZE)
        return rs_fail(EINVAL);
    struct pollfd *fds = calloc(nfds ? (size_t)nfds : 1, sizeof(*fds));
    if (!fds)
        return rs_fail(ENOMEM);
    nfds_t n = 0;
    for (int fd = 0; fd < nfds; fd++) {
        short ev = 0;
        if (readfds && FD_ISSET(fd, readfds))
            ev |= POLLIN;
        if (writefds && FD_ISSET(fd, writefds))
            ev |= POLLOUT;
        if (ev || (exceptfds && FD_ISSET(fd, exceptfds)))
            fds[n++] = (struct pollfd){.fd = fd, .events = ev};
    }
    int to = timeout ? (int)(timeout->tv_sec * 1000 + timeout->tv_usec / 1000) : -1;
    int r = rpoll(fds, n, to);
    if (r >= 0) {
        if (readfds)
            FD_ZERO(readfds);
        if (writefds)
            FD_ZERO(writefds);
        if (exceptfds)
            FD_ZERO(exceptfds);
        r = 0;
        for (nfds_t i = 0; i < n; i++) {
            short re = fds[i].revents;
            if (readfds && (re & (POLLIN | POLLHUP | POLLERR)) && (fds[i].events & POLLIN))
                FD_SET(fds[i].fd, readfds), r++;
            if (writefds && (re & (POLLOUT | POLLERR)) && (fds[i].events & POLLOUT))
                FD_SET(fds[i].fd, writefds), r++;
            if (exceptfds && (re & POLLPRI))
                FD_SET(fds[i].fd, exceptfds), r++;
        }
    }
    free(fds);
    return r;
}

/* ---- names, options, fcntl ---- */

SCM_EXPORT int rgetpeername(int socket, struct sockaddr *addr, socklen_t *addrlen)
{
    if (!addr || !addrlen)
        return rs_fail(EFAULT);
    struct rsock *rs = rs_get(socket);
    if (!rs)
        return -1;
    int r = 0;
    if (rs->state != RS_CONNECTED)
        r = rs_fail(ENOTCONN);
    else
        rs_copy_addr(addr, addrlen, rdma_get_peer_addr(rs->id));
    rs_put(rs);
    return r;
}

SCM_EXPORT int rgetsockname(int socket, struct sockaddr *addr, socklen_t *addrlen)
{
    if (!addr || !addrlen)
        return rs_fail(EFAULT);
    struct rsock *rs = rs_get(socket);
    if (!rs)
        return -1;
    struct sockaddr *sa = rdma_get_local_addr(rs->id);
    if (sa->sa_family == AF_INET || sa->sa_family == AF_INET6) {
        rs_copy_addr(addr, addrlen, sa);
    } else {
        /* unbound: the wildcard of no family yet, port 0, as TCP's */
        struct sockaddr_in any = {.sin_family = AF_INET};
        rs_copy_addr(addr, addrlen, (struct sockaddr *)&any);
    }
    rs_put(rs);
    return 0;
}

static int *rs_int_opt(struct rsock *rs, int level, int optname)
{
    switch (level) {
    case SOL_SOCKET:
        switch (optname) {
        case SO_REUSEADDR:
            return &rs->opt_reuseaddr;
        case SO_KEEPALIVE:
            return &rs->opt_keepalive;
        case SO_SNDBUF:
            return &rs->opt_sndbuf;
        case SO_RCVBUF:
            return &rs->opt_rcvbuf;
        }
        break;
    case IPPROTO_TCP:
        switch (optname) {
        case TCP_NODELAY:
            return &rs->opt_nodelay;
        case TCP_KEEPIDLE:
            return &rs->opt_keepidle;
        }
        break;
    case SOL_RDMA:
        switch (optname) {
        case RDMA_SQSIZE:
            return &rs->opt_sqsize;
        case RDMA_RQSIZE:
            return &rs->opt_rqsize;
        case RDMA_INLINE:
            return &rs->opt_inline;
        }
        break;
    }
    return NULL;
}

SCM_EXPORT int rsetsockopt(int socket, int level, int optname, const void *optval, socklen_t optlen)
{
    if (!optval && optlen)
        return rs_fail(EFAULT);
    struct rsock *rs = rs_get(socket);
    if (!rs)
        return -1;
    int r = 0;
    int *slot = rs_int_opt(rs, level, optname);
    if (slot) {
        /* sizes and inline data are the connection's fixed ones; the
         * value is kept for getsockopt */
        if (optlen < sizeof(int))
            r = rs_fail(EINVAL);
        else
            *slot = *(const int *)optval;
        if (!r && level == SOL_SOCKET && optname == SO_REUSEADDR) {
            int v = *slot != 0;
            rdma_set_option(rs->id, RDMA_OPTION_ID, RDMA_OPTION_ID_REUSEADDR, &v, sizeof(v));
        }
    } else if (level == SOL_SOCKET && optname == SO_LINGER) {
        if (optlen < sizeof(struct linger))
            r = rs_fail(EINVAL);
        else
            rs->opt_linger = *(const struct linger *)optval;
    } else if ((level == SOL_RDMA && optname == RDMA_ROUTE) ||
               (level == IPPROTO_TCP && (optname == TCP_KEEPINTVL || optname == TCP_KEEPCNT)) ||
               (level == SOL_SOCKET && optname == SO_REUSEPORT)) {
        /* the CM resolves the route itself; keepalive timing is the CM's */
    } else {
        r = rs_fail(ENOPROTOOPT);
    }
    rs_put(rs);
    return r;
}

SCM_EXPORT int rgetsockopt(int socket, int level, int optname, void *optval, socklen_t *optlen)
{
    if (!optval || !optlen)
        return rs_fail(EFAULT);
    struct rsock *rs = rs_get(socket);
    if (!rs)
        return -1;
    int v = 0, r = 0;
    const void *src = &v;
    socklen_t n = sizeof(int);
    int *slot = rs_int_opt(rs, level, optname);
    if (slot) {
        v = *slot;
    } else if (level == SOL_SOCKET && optname == SO_ERROR) {
        rs_progress(rs);
        v = rs->so_error;
        rs->so_error = 0;
    } else if (level == SOL_SOCKET && optname == SO_TYPE) {
        v = SOCK_STREAM;
    } else if (level == SOL_SOCKET && optname == SO_ACCEPTCONN) {
        v = rs->state == RS_LISTENING;
    } else if (level == SOL_SOCKET && optname == SO_LINGER) {
        src = &rs->opt_linger;
        n = sizeof(rs->opt_linger);
    } else if (level == IPPROTO_TCP && optname == TCP_MAXSEG) {
        v = RS_BUF_LEN;
    } else {
        r = rs_fail(ENOPROTOOPT);
    }
    if (!r) {
        if (*optlen < n)
            n = *optlen;
        memcpy(optval, src, n);
        *optlen = n;
    }
    rs_put(rs);
    return r;
}

SCM_EXPORT int rfcntl(int socket, int cmd, ...)
{
    va_list ap;
    va_start(ap, cmd);
    int arg = 0;
    if (cmd == F_SETFL || cmd == F_SETFD)
        arg = va_arg(ap, int);
    va_end(ap);
    struct rsock *rs = rs_get(socket);
    if (!rs)
        return -1;
    int r;
    switch (cmd) {
    case F_GETFL:
        r = O_RDWR | (rs->nonblock ? O_NONBLOCK : 0);
        break;
    case F_SETFL:
        rs->nonblock = (arg & O_NONBLOCK) != 0;
        r = 0;
        break;
    case F_GETFD:
        r = fcntl(rs->fd, F_GETFD);
        break;
    case F_SETFD:
        r = fcntl(rs->fd, F_SETFD, arg);
        break;
    default:
        r = rs_fail(EINVAL);
        break;
    }
    rs_put(rs);
    return r;
}

/* ---- direct placement: not offered ---- */

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

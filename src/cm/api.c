/* api.c: the rdma_cm entry points: event channels, ids, addresses, QPs and
 * the consumer's side of connection setup and teardown. Errors follow
 * librdmacm: -1 with errno set. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "scm_int.h"

static socklen_t sa_len(const struct sockaddr *sa)
{
    return sa->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
}

static void set_port(struct sockaddr *sa, uint16_t port)
{
    if (sa->sa_family == AF_INET)
        ((struct sockaddr_in *)(void *)sa)->sin_port = htons(port);
    else if (sa->sa_family == AF_INET6)
        ((struct sockaddr_in6 *)(void *)sa)->sin6_port = htons(port);
}

/* ---- event channels ---- */
static struct scm_channel *chan_new(void)
{
    struct scm_channel *c = calloc(1, sizeof(*c));
    int p[2];
    if (!c || pipe2(p, O_CLOEXEC)) {
        free(c);
        return NULL;
    }
    c->ch.fd = p[0];
    c->wfd = p[1];
    return c;
}

static void chan_free(struct scm_channel *c)
{
    struct scm_event *e;
    while ((e = scm_chan_pop(c)))
        free(e);
    close(c->ch.fd);
    close(c->wfd);
    free(c);
}

SCM_EXPORT struct rdma_event_channel *rdma_create_event_channel(void)
{
    LOCK();
    int err = scm_svc_up();
    UNLOCK();
    if (err) {
        errno = err;
        return NULL;
    }
    struct scm_channel *c = chan_new();
    if (!c) {
        errno = ENOMEM;
        return NULL;
    }
    return &c->ch;
}

SCM_EXPORT void rdma_destroy_event_channel(struct rdma_event_channel *channel)
{
    if (!channel)
        return;
    LOCK();
    chan_free(sr_container_of(channel, struct scm_channel, ch));
    UNLOCK();
}

SCM_EXPORT int rdma_get_cm_event(struct rdma_event_channel *channel, struct rdma_cm_event **event)
{
    if (!channel || !event)
        return fail(EINVAL);
    struct scm_channel *c = sr_container_of(channel, struct scm_channel, ch);
    for (;;) {
        LOCK();
        struct scm_event *e = scm_chan_pop(c);
        UNLOCK();
        if (e) {
            *event = &e->ev;
            return 0;
        }
        int fl = fcntl(channel->fd, F_GETFL);
        if (fl >= 0 && (fl & O_NONBLOCK))
            return fail(EAGAIN);
        struct pollfd pf = {.fd = channel->fd, .events = POLLIN};
        if (poll(&pf, 1, -1) < 0 && errno != EINTR)
            return -1;
    }
}

SCM_EXPORT int rdma_ack_cm_event(struct rdma_cm_event *event)
{
    if (!event)
        return fail(EINVAL);
    free(sr_container_of(event, struct scm_event, ev));
    return 0;
}

SCM_EXPORT const char *rdma_event_str(enum rdma_cm_event_type event)
{
    static const char *const names[] = {
        "RDMA_CM_EVENT_ADDR_RESOLVED",   "RDMA_CM_EVENT_ADDR_ERROR",
        "RDMA_CM_EVENT_ROUTE_RESOLVED",  "RDMA_CM_EVENT_ROUTE_ERROR",
        "RDMA_CM_EVENT_CONNECT_REQUEST", "RDMA_CM_EVENT_CONNECT_RESPONSE",
        "RDMA_CM_EVENT_CONNECT_ERROR",   "RDMA_CM_EVENT_UNREACHABLE",
        "RDMA_CM_EVENT_REJECTED",        "RDMA_CM_EVENT_ESTABLISHED",
        "RDMA_CM_EVENT_DISCONNECTED",    "RDMA_CM_EVENT_DEVICE_REMOVAL",
        "RDMA_CM_EVENT_MULTICAST_JOIN",  "RDMA_CM_EVENT_MULTICAST_ERROR",
        "RDMA_CM_EVENT_ADDR_CHANGE",     "RDMA_CM_EVENT_TIMEWAIT_EXIT"};
    if ((unsigned)event < sizeof(names) / sizeof(names[0]))
        return names[event];
    return "UNKNOWN EVENT";
}

/* A synchronous id's call waits for its event and keeps it in id->event
 * (as librdmacm's does), acknowledging the one before. */
int scm_sync_wait(struct scm_id *id, enum rdma_cm_event_type want)
{
    struct rdma_cm_event *ev;
    if (rdma_get_cm_event(id->id.channel, &ev))
        return -1;
    if (id->id.event)
        rdma_ack_cm_event(id->id.event);
    id->id.event = ev;
    if (ev->event != want || ev->status)
        return fail(ev->status < 0 ? -ev->status : ev->status ? ECONNREFUSED : EINVAL);
    return 0;
}

/* ---- ids ---- */
struct scm_id *scm_id_new(struct rdma_event_channel *ch, void *ctx, enum rdma_port_space ps,
                          enum ibv_qp_type qpt)
{
    struct scm_id *i = calloc(1, sizeof(*i));
    if (!i)
        return NULL;
    if (!ch) {
        i->own = chan_new();
        if (!i->own) {
            free(i);
            return NULL;
        }
        i->sync = true;
        ch = &i->own->ch;
    }
    i->id.channel = ch;
    i->id.context = ctx;
    i->id.ps = ps;
    i->id.qp_type = qpt;
    i->id.verbs = scm_svc.verbs;
    /* librdmacm gives every id its device's PD (rdma_reg_msgs uses it) */
    i->id.pd = scm_svc.pd;
    i->id.port_num = 1;
    i->local_comm_id = scm_svc.next_comm_id++;
    if (!i->local_comm_id)
        i->local_comm_id = scm_svc.next_comm_id++;
    /* chosen now: a consumer moving its own QP to RTS (rdma_init_qp_attr)
     * before rdma_accept must get the PSN the REP announces */
    i->local_psn = (i->local_comm_id * 2654435761u) & 0xffffff;
    i->resp_res = i->init_depth = 0;
    i->retry_cnt = 7;
    i->rnr_retry = 7;
    i->ack_timeout = 14;
    i->timeout_exp = scm_svc.cm_timeout;
    i->max_retries = scm_svc.cm_retries;
    i->next = scm_svc.ids;
    scm_svc.ids = i;
    return i;
}

SCM_EXPORT int rdma_create_id(struct rdma_event_channel *channel, struct rdma_cm_id **id,
                              void *context, enum rdma_port_space ps)
{
    if (!id)
        return fail(EINVAL);
    enum ibv_qp_type qpt;
    switch (ps) {
    case RDMA_PS_TCP:
        qpt = IBV_QPT_RC;
        break;
    case RDMA_PS_UDP:
    case RDMA_PS_IPOIB:
        qpt = IBV_QPT_UD;
        break;
    case RDMA_PS_IB:
        qpt = IBV_QPT_RC;
        break;
    default:
        return fail(EINVAL);
    }
    LOCK();
    int err = scm_svc_up();
    struct scm_id *i = err ? NULL : scm_id_new(channel, context, ps, qpt);
    UNLOCK();
    if (err)
        return fail(err);
    if (!i)
        return fail(ENOMEM);
    *id = &i->id;
    return 0;
}

SCM_EXPORT int rdma_destroy_id(struct rdma_cm_id *id)
{
    if (!id)
        return fail(EINVAL);
    struct scm_id *i = sid(id);
    LOCK();
    scm_cm_leave(i);
    scm_dir_unpublish(i);
    for (struct scm_id **pp = &scm_svc.ids; *pp; pp = &(*pp)->next)
        if (*pp == i) {
            *pp = i->next;
            break;
        }
    for (struct scm_id *o = scm_svc.ids; o; o = o->next)
        if (o->listener == i)
            o->listener = NULL;
    if (id->channel)
        scm_chan_purge(sr_container_of(id->channel, struct scm_channel, ch), i);
    if (id->event)
        free(sr_container_of(id->event, struct scm_event, ev));
    if (i->own)
        chan_free(i->own);
    UNLOCK();
    free(i);
    return 0;
}

SCM_EXPORT int rdma_migrate_id(struct rdma_cm_id *id, struct rdma_event_channel *channel)
{
    if (!id || !channel)
        return fail(EINVAL);
    struct scm_id *i = sid(id);
    LOCK();
    struct scm_channel *old = sr_container_of(id->channel, struct scm_channel, ch);
    struct scm_channel *nc = sr_container_of(channel, struct scm_channel, ch);
    /* its waiting events move with it */
    struct scm_event **pp = &old->head, *keep = NULL, **kt = &keep;
    while (*pp) {
        struct scm_event *e = *pp;
        *pp = e->next;
        if (e->ev.id == id) {
            scm_chan_post(nc, e);
        } else {
            e->next = NULL;
            *kt = e;
            kt = &e->next;
        }
    }
    struct scm_event *k;
    old->tail = NULL;
    old->head = NULL;
    if (old->signaled) {
        char b;
        if (read(old->ch.fd, &b, 1) == 1)
            old->signaled = false;
    }
    while ((k = keep)) {
        keep = k->next;
        scm_chan_post(old, k);
    }
    id->channel = channel;
    if (i->own && &i->own->ch != channel) {
        chan_free(i->own);
        i->own = NULL;
        i->sync = false;
    }
    UNLOCK();
    return 0;
}

/* ---- addresses ---- */
static uint16_t pick_port(uint16_t ps)
{
    for (int n = 0; n < 28000; n++) {
        uint16_t p = scm_svc.next_port++;
        if (scm_svc.next_port < 32768)
            scm_svc.next_port = 32768;
        if (!scm_port_in_use(ps, p))
            return p;
    }
    return 0;
}

SCM_EXPORT int rdma_bind_addr(struct rdma_cm_id *id, struct sockaddr *addr)
{
    if (!id || !addr)
        return fail(EINVAL);
    struct scm_id *i = sid(id);
    uint8_t ip[16];
    uint16_t port;
    int err = scm_sa_ip(addr, ip, &port);
    if (err)
        return fail(err);
    LOCK();
    if (i->state != SCM_IDLE) {
        UNLOCK();
        return fail(EINVAL);
    }
    static const uint8_t z[16];
    i->bound_any = !memcmp(ip, z, 16) || (scm_ip_is_v4(ip) && !memcmp(ip + 12, z, 4));
    if (port && scm_port_in_use((uint16_t)id->ps, port) && !i->reuseaddr) {
        UNLOCK();
        return fail(EADDRINUSE);
    }
    if (!port)
        port = pick_port((uint16_t)id->ps);
    memcpy(&id->route.addr.src_storage, addr, sa_len(addr));
    set_port(&id->route.addr.src_addr, port);
    id->verbs = scm_svc.verbs;
    i->state = SCM_ADDR_BOUND;
    UNLOCK();
    return 0;
}

SCM_EXPORT int rdma_listen(struct rdma_cm_id *id, int backlog)
{
    if (!id)
        return fail(EINVAL);
    struct scm_id *i = sid(id);
    LOCK();
    /* as the kernel's ucma: 1..max_backlog, anything else the maximum */
    i->backlog = backlog > 0 && backlog < scm_svc.max_backlog ? backlog : scm_svc.max_backlog;
    if (i->state == SCM_IDLE) {
        UNLOCK();
        struct sockaddr_in any = {.sin_family = AF_INET};
        if (rdma_bind_addr(id, (struct sockaddr *)&any))
            return -1;
        LOCK();
    }
    if (i->state != SCM_ADDR_BOUND) {
        UNLOCK();
        return fail(EINVAL);
    }
    uint8_t ip[16];
    uint16_t port = 0;
    scm_sa_ip(&id->route.addr.src_addr, ip, &port);
    if (i->bound_any) {
        memset(ip, 0, 16);
        if (id->route.addr.src_addr.sa_family == AF_INET)
            ip[10] = ip[11] = 0xff;
    }
    int err = scm_dir_publish(i, port, ip);
    if (!err) {
        i->state = SCM_LISTEN;
        scm_cm_listened(scm_now_ns());
    }
    UNLOCK();
    return err ? fail(err) : 0;
}

SCM_EXPORT int rdma_resolve_addr(struct rdma_cm_id *id, struct sockaddr *src_addr,
                                 struct sockaddr *dst_addr, int timeout_ms)
{
    (void)timeout_ms;
    if (!id || !dst_addr)
        return fail(EINVAL);
    struct scm_id *i = sid(id);
    uint8_t dip[16], sip[16];
    uint16_t dport, sport = 0;
    int err = scm_sa_ip(dst_addr, dip, &dport);
    if (err)
        return fail(err);
    LOCK();
    if (i->state != SCM_IDLE && i->state != SCM_ADDR_BOUND) {
        UNLOCK();
        return fail(EINVAL);
    }
    if (src_addr && i->state == SCM_IDLE) {
        if (scm_sa_ip(src_addr, sip, &sport)) {
            UNLOCK();
            return fail(EINVAL);
        }
        memcpy(&id->route.addr.src_storage, src_addr, sa_len(src_addr));
    }
    if (i->state == SCM_IDLE) {
        if (!src_addr) {
            /* our device's own address, of the destination's family */
            scm_ip_sa(scm_svc.gid, 0, &id->route.addr.src_storage);
        }
        if (!sport)
            set_port(&id->route.addr.src_addr, pick_port((uint16_t)id->ps));
    }
    memcpy(&id->route.addr.dst_storage, dst_addr, sa_len(dst_addr));
    /* Which device: a listener's directory entry for this address and port,
     * else the address itself is a device's GID, as on any RoCE port. */
    if (!scm_dir_lookup((uint16_t)id->ps, dport, dip, i->peer_gid))
        memcpy(i->peer_gid, dip, 16);
    /* No listener in this namespace's directory for a loopback address:
     * nobody listens there. The REQ goes to our own CM, which rejects it
     * "invalid service ID" as the kernel's does for a port nobody listens on. */
    if (scm_ip_is_loopback(dip) && !memcmp(i->peer_gid, dip, 16))
        memcpy(i->peer_gid, scm_svc.gid, 16);
    id->verbs = scm_svc.verbs;
    i->state = SCM_ADDR_RESOLVED;
    scm_post(i, RDMA_CM_EVENT_ADDR_RESOLVED, 0);
    bool sync = i->sync;
    UNLOCK();
    return sync ? scm_sync_wait(i, RDMA_CM_EVENT_ADDR_RESOLVED) : 0;
}

/* Where a connect goes, looked up again when it is sent: the listener may
 * have come since rdma_resolve_addr. false: the address is a loopback
 * one and no listener of this namespace holds it. Lock held. */
bool scm_peer_refresh(struct scm_id *i)
{
    uint8_t dip[16];
    uint16_t dport;
    if (scm_sa_ip(&i->id.route.addr.dst_addr, dip, &dport))
        return true;
    if (scm_dir_lookup((uint16_t)i->id.ps, dport, dip, i->peer_gid))
        return true;
    static const uint8_t lo6[16] = {[15] = 1};
    bool lo = (scm_ip_is_v4(dip) && dip[12] == 127) || !memcmp(dip, lo6, 16);
    return !lo;
}

enum { AWAIT_POLL_NS = 10000000 }; /* how often a held connect looks again */
/* How long a connect to a loopback address waits for its listener: a
 * listener on its way (perftest's -R server) appears within milliseconds;
 * a port nobody listens on should be refused about as soon as the host's
 * CM would refuse it. */
#define AWAIT_LISTENER_NS 2000000000ull

static void connect_go(struct scm_id *i, uint64_t now_ns)
{
    /* the REQ names the port it is for (IBA 12.6.5, Primary Remote Port GID) */
    if (i->last[16] == (SCM_ATTR_REQ >> 8) && i->last[17] == (SCM_ATTR_REQ & 0xff))
        memcpy(i->last + SCM_MAD_HDR_LEN + 72, i->peer_gid, 16);
    scm_send_mad(i->peer_gid, i->last);
    scm_cm_arm(i, now_ns);
}

/* A connect to a loopback address no listener holds yet waits for one for
 * a CM response timeout: the listener may be on its way (perftest's -R
 * server listens only after telling its client to go). Then the answer
 * is the one the host's CM gives: a REJ for an invalid Service ID
 * (IBA 12.6.7.2), or a SIDR REP "Service ID not supported". */
void scm_connect_send(struct scm_id *i, uint64_t now_ns)
{
    if (scm_peer_refresh(i)) {
        i->await_listener = false;
        connect_go(i, now_ns);
        return;
    }
    i->await_listener = true;
    i->await_until_ns = now_ns + AWAIT_LISTENER_NS;
    i->deadline_ns = now_ns + AWAIT_POLL_NS;
}

void scm_await_listener(struct scm_id *i, uint64_t now_ns)
{
    if (scm_peer_refresh(i)) {
        i->await_listener = false;
        connect_go(i, now_ns);
    } else if (now_ns >= i->await_until_ns) {
        i->await_listener = false;
        i->deadline_ns = 0;
        bool sidr = i->state == SCM_SIDR_REQ_SENT;
        i->state = SCM_CLOSED;
        if (sidr)
            scm_post(i, RDMA_CM_EVENT_UNREACHABLE, SCM_SIDR_UNSUPPORTED);
        else
            scm_post(i, RDMA_CM_EVENT_REJECTED, SCM_REJ_INVALID_SERVICE_ID);
    } else {
        i->deadline_ns = now_ns + AWAIT_POLL_NS;
    }
}

SCM_EXPORT int rdma_resolve_route(struct rdma_cm_id *id, int timeout_ms)
{
    (void)timeout_ms;
    if (!id)
        return fail(EINVAL);
    struct scm_id *i = sid(id);
    LOCK();
    if (i->state != SCM_ADDR_RESOLVED) {
        UNLOCK();
        return fail(EINVAL);
    }
    struct ibv_port_attr pa;
    i->mtu = ibv_query_port(scm_svc.verbs, 1, &pa) ? IBV_MTU_1024 : pa.active_mtu;
    memset(&i->path, 0, sizeof(i->path));
    memcpy(i->path.dgid.raw, i->peer_gid, 16);
    memcpy(i->path.sgid.raw, scm_svc.gid, 16);
    i->path.mtu = (enum ibv_mtu)i->mtu;
    i->path.hop_limit = 64;
    i->path.pkey = htons(0xffff);
    i->path.traffic_class = i->tos;
    i->path.reversible = 1;
    i->path.numb_path = 1;
    id->route.path_rec = &i->path;
    id->route.num_paths = 1;
    i->state = SCM_ROUTE_RESOLVED;
    scm_post(i, RDMA_CM_EVENT_ROUTE_RESOLVED, 0);
    bool sync = i->sync;
    UNLOCK();
    return sync ? scm_sync_wait(i, RDMA_CM_EVENT_ROUTE_RESOLVED) : 0;
}

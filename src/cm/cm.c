/* cm.c: the rdma_cm API (<rdma/rdma_cma.h>) over the CM service, and the
 * connection state machine of IBA 12.9 driven by MADs and timers. */
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

/* Defaults as the kernel's rdma_cm (drivers/infiniband/core/cma.c): CM
 * response timeout 2^20 x 4.096 us (~4.3 s), 15 Max CM Retries, a RoCE
 * packet lifetime of 2^16 x 4.096 us (~268 ms). A MAD awaiting a reply is
 * resent after 2 x packet lifetime + the peer's response timeout (IBA
 * 12.7.31), at most Max CM Retries times (12.7.32): a REQ to a silent peer
 * gives UNREACHABLE after 16 x ~4.83 s, ~77 s, as on Linux. */
enum {
    CM_RESP_TIMEOUT = 20,
    CM_MAX_RETRIES = 15, /* IBA 12.6.5: a 4-bit field */
    CM_PACKET_LIFETIME = 16,
    CM_KEEPALIVE_MS = 2000,
    CM_KEEPALIVE_MISSES = 3,
    CM_MAX_BACKLOG = 1024, /* the kernel's net.rdma_ucm.max_backlog */
    UDP_QKEY = 0x01234567,
};
static const uint64_t TIMEWAIT_NS =
    2000000000ull; /* twice a packet lifetime, generously (IBA 12.9.7) */
/* How long a REQ that finds no listener waits for one (see rx_req) */
static const uint64_t HOLD_NS = 2000000000ull;

/* ---- addresses ---- */
int scm_sa_ip(const struct sockaddr *sa, uint8_t ip[16], uint16_t *port)
{
    memset(ip, 0, 16);
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *s4 = (const void *)sa;
        ip[10] = ip[11] = 0xff;
        memcpy(ip + 12, &s4->sin_addr, 4);
        *port = ntohs(s4->sin_port);
        return 0;
    }
    if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *s6 = (const void *)sa;
        memcpy(ip, &s6->sin6_addr, 16);
        *port = ntohs(s6->sin6_port);
        return 0;
    }
    if (sa->sa_family == AF_IB)
        return EAFNOSUPPORT;
    return EINVAL;
}

void scm_ip_sa(const uint8_t ip[16], uint16_t port, struct sockaddr_storage *ss)
{
    memset(ss, 0, sizeof(*ss));
    if (scm_ip_is_v4(ip)) {
        struct sockaddr_in *s4 = (void *)ss;
        s4->sin_family = AF_INET;
        s4->sin_port = htons(port);
        memcpy(&s4->sin_addr, ip + 12, 4);
    } else {
        struct sockaddr_in6 *s6 = (void *)ss;
        s6->sin6_family = AF_INET6;
        s6->sin6_port = htons(port);
        memcpy(&s6->sin6_addr, ip, 16);
    }
}

bool scm_ip_is_loopback(const uint8_t ip[16])
{
    static const uint8_t lo6[16] = {[15] = 1};
    return (scm_ip_is_v4(ip) && ip[12] == 127) || !memcmp(ip, lo6, 16);
}

uint16_t scm_id_port(const struct scm_id *id, bool src)
{
    uint8_t ip[16];
    uint16_t port = 0;
    const struct sockaddr *sa = src ? &id->id.route.addr.src_addr : &id->id.route.addr.dst_addr;
    if (sa->sa_family)
        scm_sa_ip(sa, ip, &port);
    return port;
}

static void src_ip(const struct scm_id *id, uint8_t ip[16])
{
    uint16_t port;
    if (!id->id.route.addr.src_addr.sa_family || scm_sa_ip(&id->id.route.addr.src_addr, ip, &port))
        memcpy(ip, scm_svc.gid, 16);
}

/* ---- configuration ---- */
static long env_num(const char *name, long def, long lo, long hi)
{
    const char *v = getenv(name);
    if (!v || !*v)
        return def;
    char *end;
    long n = strtol(v, &end, 0);
    if (*end || n < lo || n > hi) {
        fprintf(stderr, "softrdma cm: %s=%s is not in %ld..%ld, using %ld\n", name, v, lo, hi, def);
        return def;
    }
    return n;
}

void scm_cm_config(void)
{
    scm_svc.cm_timeout = (uint8_t)env_num("SOFTRDMA_CM_TIMEOUT", CM_RESP_TIMEOUT, 0, 31);
    scm_svc.cm_retries = (uint8_t)env_num("SOFTRDMA_CM_RETRIES", CM_MAX_RETRIES, 0, 15);
    scm_svc.keepalive_ns =
        (uint64_t)env_num("SOFTRDMA_CM_KEEPALIVE_MS", CM_KEEPALIVE_MS, 0, 3600000) * 1000000ull;
    scm_svc.max_backlog = (int)env_num("SOFTRDMA_CM_MAX_BACKLOG", CM_MAX_BACKLOG, 1, 1 << 20);
}

/* ---- the state machine's helpers ---- */
static struct scm_id *id_by_local(uint32_t comm_id)
{
    for (struct scm_id *i = scm_svc.ids; i; i = i->next)
        if (i->local_comm_id == comm_id && i->state != SCM_IDLE)
            return i;
    return NULL;
}

static uint64_t cm_timeout_ns(uint8_t exp)
{
    return 4096ull << (exp > 31 ? 31 : exp); /* 4.096 us * 2^exp (IBA 12.7.31) */
}

/* how long a MAD waits for its reply before it is resent (IBA 12.7.31) */
static uint64_t retry_ns(const struct scm_id *id)
{
    return 2 * cm_timeout_ns(CM_PACKET_LIFETIME) + cm_timeout_ns(id->timeout_exp);
}

void scm_cm_arm(struct scm_id *id, uint64_t now_ns)
{
    id->retries_left = id->max_retries;
    id->deadline_ns = now_ns + retry_ns(id);
}

/* Repeat the MAD an id last sent, if it is the one a duplicate asks for:
 * an id's kept MAD may be of another step (a passive side keeps its REP,
 * not an RTU) or none at all yet. */
static void resend_last(struct scm_id *id, uint16_t attr)
{
    if ((uint16_t)(id->last[16] << 8 | id->last[17]) == attr && id->last[0] == 1)
        scm_send_mad(id->peer_gid, id->last);
}

/* Send a MAD, keep it for the retry timer when a reply is due. */
static void send_kept(struct scm_id *id, const struct scm_mad *m, bool await, uint64_t now_ns)
{
    if (scm_mad_encode(m, id->last))
        return;
    scm_send_mad(id->peer_gid, id->last);
    if (await)
        scm_cm_arm(id, now_ns);
    else
        id->deadline_ns = 0;
}

static void send_rej(const uint8_t gid[16], uint32_t local, uint32_t remote, uint8_t kind,
                     uint16_t reason, const void *priv, uint8_t priv_len)
{
    struct scm_mad m = {.attr_id = SCM_ATTR_REJ,
                        .tid = ((uint64_t)remote << 32) | local,
                        .local_comm_id = local,
                        .remote_comm_id = remote,
                        .msg_kind = kind,
                        .reason = reason};
    m.priv_len = priv_len;
    if (priv_len)
        memcpy(m.priv, priv, priv_len);
    uint8_t buf[SCM_MAD_LEN];
    if (!scm_mad_encode(&m, buf))
        scm_send_mad(gid, buf);
}

static int qp_to(struct scm_id *id, enum ibv_qp_state st)
{
    struct ibv_qp_attr a;
    int mask;
    if (!id->id.qp)
        return 0;
    int err = rdma_init_qp_attr(&id->id, (a.qp_state = st, &a), &mask);
    if (err)
        return errno;
    return ibv_modify_qp(id->id.qp, &a, mask);
}

static void qp_err(struct scm_id *id)
{
    if (id->id.qp) {
        struct ibv_qp_attr a = {.qp_state = IBV_QPS_ERR};
        ibv_modify_qp(id->id.qp, &a, IBV_QP_STATE);
    }
}

static struct scm_event *ev_priv(struct scm_id *id, enum rdma_cm_event_type t, int status,
                                 const struct scm_mad *m, size_t skip)
{
    struct scm_event *e = scm_event_new(id, t, status);
    if (!e)
        return NULL;
    if (m && m->priv_len > skip) {
        memcpy(e->priv, m->priv + skip, m->priv_len - skip);
        e->ev.param.conn.private_data = e->priv;
        e->ev.param.conn.private_data_len = (uint8_t)(m->priv_len - skip);
    }
    return e;
}

static void deliver_established(struct scm_id *id)
{
    struct scm_event *e = scm_event_new(id, RDMA_CM_EVENT_ESTABLISHED, 0);
    if (e) {
        e->ev.param.conn.responder_resources = id->resp_res;
        e->ev.param.conn.initiator_depth = id->init_depth;
        scm_event_send(id, e);
    }
}

/* ---- receive side (IBA 12.9.6) ---- */
struct scm_id *scm_find_listener(uint64_t service_id, const uint8_t dst[16])
{
    for (struct scm_id *i = scm_svc.ids; i; i = i->next) {
        if (i->state != SCM_LISTEN)
            continue;
        if (scm_service_id((uint16_t)i->id.ps, scm_id_port(i, true)) != service_id)
            continue;
        uint8_t ip[16];
        src_ip(i, ip);
        if (i->bound_any || !memcmp(ip, dst, 16) || scm_ip_is_loopback(ip))
            return i;
    }
    return NULL;
}

/* Connection requests a listener has not read yet (its backlog). */
static int pending_reqs(struct scm_id *l)
{
    int n = 0;
    if (l->sync) {
        for (struct scm_id *i = scm_svc.ids; i; i = i->next)
            n += i->listener == l && i->state == SCM_REQ_RCVD;
        return n;
    }
    struct scm_channel *c = sr_container_of(l->id.channel, struct scm_channel, ch);
    for (struct scm_event *e = c->head; e && n < l->backlog; e = e->next)
        n += e->ev.event == RDMA_CM_EVENT_CONNECT_REQUEST && e->ev.listen_id == &l->id;
    return n;
}

/* A REQ for a service nobody listens on yet is held up to HOLD_NS before
 * its REJ "invalid service ID": rdma_cm consumers tell their peer to
 * connect just before they call rdma_listen (perftest's -R server, for the
 * measured QPs), and between hosts that REQ can arrive first. The
 * requester resends only after 2 x packet lifetime + our response timeout
 * (IBA 12.7.31, 4.8 s by default), so the hold stays inside the time it
 * allows us; a listener that appears meanwhile takes the REQ (scm_cm_listened).
 * A loopback connect waits for the listener directory instead (api.c), so
 * a REQ from our own GID, the end of that wait, is answered at once.
 * Returns false when it is not held: no room, or from our own GID. */
static bool hold_req(const uint8_t sgid[16], const uint8_t *buf, size_t len,
                     const struct scm_mad *m, uint64_t now_ns)
{
    if (!memcmp(sgid, scm_svc.gid, 16) || len > SCM_MAD_LEN)
        return false;
    struct scm_held *free_slot = NULL;
    for (int k = 0; k < SCM_HELD_MAX; k++) {
        struct scm_held *h = &scm_svc.held[k];
        if (!h->until_ns) {
            if (!free_slot)
                free_slot = h;
            continue;
        }
        /* a resend of a held REQ: it is held already */
        struct scm_mad o;
        if (!memcmp(h->sgid, sgid, 16) && !scm_mad_decode(h->mad, h->len, &o) &&
            o.local_comm_id == m->local_comm_id)
            return true;
    }
    if (!free_slot)
        return false;
    free_slot->until_ns = now_ns + HOLD_NS;
    memcpy(free_slot->sgid, sgid, 16);
    memcpy(free_slot->mad, buf, len);
    free_slot->len = (uint32_t)len;
    return true;
}

static void rx_req(const uint8_t sgid[16], const struct scm_mad *m, const uint8_t *buf, size_t len,
                   uint64_t now_ns)
{
    /* a duplicate REQ (IBA 12.9.6.2): repeat the REP, or stay silent */
    for (struct scm_id *i = scm_svc.ids; i; i = i->next)
        if (i->remote_comm_id == m->local_comm_id && !memcmp(i->peer_gid, sgid, 16) &&
            i->listener) {
            if (i->state == SCM_REP_SENT)
                resend_last(i, SCM_ATTR_REP);
            return;
        }
    struct scm_iphdr h;
    if (scm_iphdr_decode(m->priv, m->priv_len, &h)) {
        send_rej(sgid, 0, m->local_comm_id, 0, SCM_REJ_INVALID_SERVICE_ID, NULL, 0);
        return;
    }
    uint8_t dst[16], src[16];
    memcpy(dst, h.dst, 16), memcpy(src, h.src, 16);
    if (h.ip_ver == 4) {
        memset(dst, 0, 12), memset(src, 0, 12);
        dst[10] = dst[11] = src[10] = src[11] = 0xff;
    }
    struct scm_id *l = scm_find_listener(m->service_id, dst);
    if (!l && buf && hold_req(sgid, buf, len, m, now_ns))
        return;
    /* a listener takes the transport its id was made for */
    uint8_t want = l && l->id.qp_type == IBV_QPT_XRC_RECV ? SCM_TS_XRC : SCM_TS_RC;
    if (!l || m->transport != want || l->id.qp_type == IBV_QPT_UD) {
        send_rej(sgid, 0, m->local_comm_id, 0,
                 l ? SCM_REJ_INVALID_SERVICE_ID + 1 : SCM_REJ_INVALID_SERVICE_ID, NULL, 0);
        return;
    }
    /* A listener with its backlog of unread requests full: the REQ is
     * dropped, unanswered, so that the requester's resend may find room
     * (the kernel's ucma and cm_destroy_id on -ENOMEM do the same). */
    if (pending_reqs(l) >= l->backlog)
        return;
    struct scm_id *n =
        scm_id_new(l->sync ? NULL : l->id.channel, l->id.context, l->id.ps, l->id.qp_type);
    if (!n) {
        send_rej(sgid, 0, m->local_comm_id, 0, 3 /* no resources */, NULL, 0);
        return;
    }
    n->listener = l;
    n->passive = true;
    n->id.pd = l->id.pd;
    n->state = SCM_REQ_RCVD;
    memcpy(n->peer_gid, sgid, 16);
    n->remote_comm_id = m->local_comm_id;
    n->remote_qpn = m->qpn;
    n->remote_psn = m->starting_psn;
    /* our reads are bounded by its responder resources, and the reverse */
    n->resp_res = m->init_depth;
    n->init_depth = m->resp_res;
    n->retry_cnt = m->retry_cnt;
    n->rnr_retry = m->rnr_retry;
    n->mtu = m->mtu;
    /* the REP waits for the RTU as long as the requester says it may take
     * (Local CM Response Timeout, IBA 12.6.5), resent Max CM Retries times */
    n->timeout_exp = m->local_cm_timeout;
    n->max_retries = m->max_cm_retries;
    n->ack_timeout = m->ack_timeout;
    scm_ip_sa(dst, (uint16_t)(m->service_id & 0xffff), &n->id.route.addr.src_storage);
    scm_ip_sa(src, h.src_port, &n->id.route.addr.dst_storage);
    n->path.mtu = (enum ibv_mtu)n->mtu;
    memcpy(n->path.dgid.raw, sgid, 16);
    memcpy(n->path.sgid.raw, scm_svc.gid, 16);
    n->id.route.path_rec = &n->path;
    n->id.route.num_paths = 1;
    struct scm_event *e = ev_priv(n, RDMA_CM_EVENT_CONNECT_REQUEST, 0, m, SCM_IPHDR_LEN);
    if (!e)
        return;
    e->ev.listen_id = &l->id;
    e->ev.param.conn.responder_resources = n->resp_res;
    e->ev.param.conn.initiator_depth = n->init_depth;
    e->ev.param.conn.flow_control = m->flow_ctl;
    e->ev.param.conn.retry_count = m->retry_cnt;
    e->ev.param.conn.rnr_retry_count = m->rnr_retry;
    e->ev.param.conn.srq = m->srq;
    e->ev.param.conn.qp_num = m->qpn;
    /* the request reaches the listener's channel; a synchronous
     * listener's requests have channels of their own afterwards */
    struct scm_channel *c = sr_container_of(l->id.channel, struct scm_channel, ch);
    scm_chan_post(c, e);
}

static void rx_rep(const struct scm_mad *m, uint64_t now_ns)
{
    struct scm_id *id = id_by_local(m->remote_comm_id);
    if (!id)
        return;
    if (id->state == SCM_ESTABLISHED && id->remote_comm_id == m->local_comm_id) {
        /* our RTU was lost: repeat it (IBA 12.9.6.3) */
        resend_last(id, SCM_ATTR_RTU);
        return;
    }
    if (id->state != SCM_REQ_SENT)
        return;
    id->remote_comm_id = m->local_comm_id;
    id->remote_qpn = m->qpn;
    id->remote_psn = m->starting_psn;
    id->resp_res = m->init_depth < id->resp_res ? m->init_depth : id->resp_res;
    id->init_depth = m->resp_res < id->init_depth ? m->resp_res : id->init_depth;
    id->deadline_ns = 0;
    if (!id->id.qp) {
        id->state = SCM_REP_RCVD;
        struct scm_event *e = ev_priv(id, RDMA_CM_EVENT_CONNECT_RESPONSE, 0, m, 0);
        if (e) {
            e->ev.param.conn.responder_resources = m->resp_res;
            e->ev.param.conn.initiator_depth = m->init_depth;
            e->ev.param.conn.qp_num = m->qpn;
            e->ev.param.conn.srq = m->srq;
            scm_event_send(id, e);
        }
        return;
    }
    if (qp_to(id, IBV_QPS_RTR) || qp_to(id, IBV_QPS_RTS)) {
        send_rej(id->peer_gid, id->local_comm_id, id->remote_comm_id, 1, 3, NULL, 0);
        id->state = SCM_CLOSED;
        scm_post(id, RDMA_CM_EVENT_CONNECT_ERROR, -EIO);
        return;
    }
    struct scm_mad rtu = {.attr_id = SCM_ATTR_RTU,
                          .tid = m->tid,
                          .local_comm_id = id->local_comm_id,
                          .remote_comm_id = id->remote_comm_id};
    send_kept(id, &rtu, false, now_ns);
    id->state = SCM_ESTABLISHED;
    struct scm_event *e = ev_priv(id, RDMA_CM_EVENT_ESTABLISHED, 0, m, 0);
    if (e) {
        e->ev.param.conn.responder_resources = id->resp_res;
        e->ev.param.conn.initiator_depth = id->init_depth;
        scm_event_send(id, e);
    }
}

static void rx_rtu(const struct scm_mad *m)
{
    struct scm_id *id = id_by_local(m->remote_comm_id);
    if (!id || id->state != SCM_REP_SENT || id->remote_comm_id != m->local_comm_id)
        return;
    id->deadline_ns = 0;
    id->state = SCM_ESTABLISHED;
    deliver_established(id);
}

static void rx_rej(const struct scm_mad *m)
{
    struct scm_id *id = id_by_local(m->remote_comm_id);
    if (!id)
        return;
    if (id->state != SCM_REQ_SENT && id->state != SCM_REP_SENT && id->state != SCM_REP_RCVD)
        return;
    id->deadline_ns = 0;
    id->state = SCM_CLOSED;
    qp_err(id);
    /* IBA 12.6.7.2: a REJ for "timeout" is what a peer that gave up sends */
    enum rdma_cm_event_type t =
        m->reason == SCM_REJ_TIMEOUT ? RDMA_CM_EVENT_UNREACHABLE : RDMA_CM_EVENT_REJECTED;
    struct scm_event *e = ev_priv(id, t, m->reason, m, 0);
    if (e)
        scm_event_send(id, e);
}

/* An id that goes away while its connection is open, by rdma_destroy_id
 * or with its process's exit: the peer hears a DREQ for an established
 * connection (IBA 12.9.6.8) and a REJ for a request nobody will accept,
 * as the kernel's CM does for the ids of a process that closes them. The
 * id is left in DREQ_SENT, so a DREQ crossing ours still gets its DREP
 * (12.9.6.9) while the process remains; nothing is resent. */
void scm_cm_leave(struct scm_id *id)
{
    if (id->id.qp_type == IBV_QPT_UD)
        return;
    if (id->state == SCM_ESTABLISHED || id->state == SCM_REP_SENT) {
        struct scm_mad m = {.attr_id = SCM_ATTR_DREQ,
                            .tid = ((uint64_t)id->local_comm_id << 32) | 2,
                            .local_comm_id = id->local_comm_id,
                            .remote_comm_id = id->remote_comm_id,
                            .qpn = id->remote_qpn};
        send_kept(id, &m, false, 0);
        id->state = SCM_DREQ_SENT;
        id->ka_next_ns = 0;
    } else if (id->state == SCM_REQ_RCVD) {
        send_rej(id->peer_gid, id->local_comm_id, id->remote_comm_id, 0, SCM_REJ_CONSUMER, NULL, 0);
        id->state = SCM_CLOSED;
    }
}

static void send_drep(struct scm_id *id, uint64_t now_ns)
{
    struct scm_mad r = {.attr_id = SCM_ATTR_DREP,
                        .tid = ((uint64_t)id->local_comm_id << 32) | id->remote_comm_id,
                        .local_comm_id = id->local_comm_id,
                        .remote_comm_id = id->remote_comm_id};
    send_kept(id, &r, false, now_ns);
}

static void enter_timewait(struct scm_id *id, uint64_t now_ns)
{
    id->state = SCM_TIMEWAIT;
    id->deadline_ns = now_ns + TIMEWAIT_NS;
}

static void rx_dreq(const uint8_t sgid[16], const struct scm_mad *m, uint64_t now_ns)
{
    struct scm_id *id = id_by_local(m->remote_comm_id);
    if (!id || id->remote_comm_id != m->local_comm_id) {
        /* IBA 12.9.6.9: a DREQ for no connection is still answered */
        struct scm_mad r = {.attr_id = SCM_ATTR_DREP,
                            .tid = m->tid,
                            .local_comm_id = m->remote_comm_id,
                            .remote_comm_id = m->local_comm_id};
        uint8_t buf[SCM_MAD_LEN];
        if (!scm_mad_encode(&r, buf))
            scm_send_mad(sgid, buf);
        return;
    }
    switch (id->state) {
    case SCM_REP_SENT: /* the RTU was lost, the DREQ implies it (IBA 12.9.6.4) */
    case SCM_ESTABLISHED:
        /* The QP stays as it is: the consumer still drains its CQ and
         * moves it to Error with rdma_disconnect, as with the kernel's
         * rdma_cm, which leaves the QP alone on a DREQ. */
        send_drep(id, now_ns);
        enter_timewait(id, now_ns);
        scm_post(id, RDMA_CM_EVENT_DISCONNECTED, 0);
        break;
    case SCM_DREQ_SENT: /* both sides disconnect at once */
        send_drep(id, now_ns);
        enter_timewait(id, now_ns);
        scm_post(id, RDMA_CM_EVENT_DISCONNECTED, 0);
        break;
    case SCM_TIMEWAIT:
        send_drep(id, now_ns);
        id->deadline_ns = now_ns + TIMEWAIT_NS;
        break;
    default:
        break;
    }
}

static void rx_drep(const struct scm_mad *m, uint64_t now_ns)
{
    struct scm_id *id = id_by_local(m->remote_comm_id);
    if (!id || id->state != SCM_DREQ_SENT || id->remote_comm_id != m->local_comm_id)
        return;
    enter_timewait(id, now_ns);
    scm_post(id, RDMA_CM_EVENT_DISCONNECTED, 0);
}

static void rx_mra(const struct scm_mad *m, uint64_t now_ns)
{
    struct scm_id *id = id_by_local(m->remote_comm_id);
    if (!id || (id->state != SCM_REQ_SENT && id->state != SCM_REP_SENT))
        return;
    /* IBA 12.6.6: the peer needs its service timeout more before it answers */
    id->deadline_ns = now_ns + cm_timeout_ns(m->service_timeout) + retry_ns(id);
}

/* Get(ClassPortInfo): every management class answers it (IBA 13.4.8.1);
 * it is also what our liveness probe asks. GetResp: the CM at sgid is
 * alive, and so are our connections' peers there. */
static void rx_class_port_info(const uint8_t sgid[16], const struct scm_mad *m)
{
    if (m->method == SCM_METHOD_GET) {
        struct scm_mad r = {.attr_id = SCM_ATTR_CLASS_PORT_INFO,
                            .method = SCM_METHOD_GET_RESP,
                            .tid = m->tid,
                            .resp_time = scm_svc.cm_timeout};
        uint8_t buf[SCM_MAD_LEN];
        if (!scm_mad_encode(&r, buf))
            scm_send_mad(sgid, buf);
        return;
    }
    for (struct scm_id *i = scm_svc.ids; i; i = i->next)
        if (!memcmp(i->peer_gid, sgid, 16)) {
            i->ka_missed = 0;
            i->ka_seen = true;
        }
}

/* A connection's liveness (softrdma's, docs/CM.md): a process that dies
 * cannot send its DREQ, as the kernel does for a process that exits, so
 * an established id asks the peer's CM for its ClassPortInfo every
 * keepalive interval. A peer that has answered once and then misses
 * CM_KEEPALIVE_MISSES probes in a row is gone: the QP goes to the error
 * state and the consumer sees DISCONNECTED, as after a DREQ (IBA 12.9.6.9).
 * A peer that never answers (a CM without ClassPortInfo), or dies before
 * its first answer, is never judged: only its RC QP's retries can tell. */
static void keepalive(struct scm_id *i, uint64_t now_ns)
{
    if (i->state != SCM_ESTABLISHED || !scm_svc.keepalive_ns) {
        i->ka_next_ns = 0;
        return;
    }
    /* the first probe goes at once: the sooner the peer has answered one,
     * the sooner its silence counts */
    if (i->ka_next_ns > now_ns)
        return;
    if (i->ka_seen && i->ka_missed >= CM_KEEPALIVE_MISSES) {
        qp_err(i);
        /* should it be alive after all, it hears the connection end */
        struct scm_mad d = {.attr_id = SCM_ATTR_DREQ,
                            .tid = ((uint64_t)i->local_comm_id << 32) | 2,
                            .local_comm_id = i->local_comm_id,
                            .remote_comm_id = i->remote_comm_id,
                            .qpn = i->remote_qpn};
        uint8_t buf[SCM_MAD_LEN];
        if (!scm_mad_encode(&d, buf))
            scm_send_mad(i->peer_gid, buf);
        i->ka_next_ns = 0;
        enter_timewait(i, now_ns);
        scm_post(i, RDMA_CM_EVENT_DISCONNECTED, 0);
        return;
    }
    struct scm_mad g = {.attr_id = SCM_ATTR_CLASS_PORT_INFO,
                        .method = SCM_METHOD_GET,
                        .tid = ((uint64_t)i->local_comm_id << 32) | 0x4b41};
    uint8_t buf[SCM_MAD_LEN];
    if (!scm_mad_encode(&g, buf))
        scm_send_mad(i->peer_gid, buf);
    if (i->ka_missed < 255)
        i->ka_missed++;
    i->ka_next_ns = now_ns + scm_svc.keepalive_ns;
}

void scm_cm_rx(const uint8_t sgid[16], const uint8_t *buf, size_t len, uint64_t now_ns)
{
    struct scm_mad m;
    if (scm_mad_decode(buf, len, &m))
        return; /* not a CM MAD we speak: dropped (IBA 13.5.3.2) */
    switch (m.attr_id) {
    case SCM_ATTR_CLASS_PORT_INFO:
        rx_class_port_info(sgid, &m);
        break;
    case SCM_ATTR_REQ:
        rx_req(sgid, &m, buf, len, now_ns);
        break;
    case SCM_ATTR_REP:
        rx_rep(&m, now_ns);
        break;
    case SCM_ATTR_RTU:
        rx_rtu(&m);
        break;
    case SCM_ATTR_REJ:
        rx_rej(&m);
        break;
    case SCM_ATTR_MRA:
        rx_mra(&m, now_ns);
        break;
    case SCM_ATTR_DREQ:
        rx_dreq(sgid, &m, now_ns);
        break;
    case SCM_ATTR_DREP:
        rx_drep(&m, now_ns);
        break;
    case SCM_ATTR_SIDR_REQ:
        scm_sidr_rx_req(sgid, &m);
        break;
    case SCM_ATTR_SIDR_REP:
        scm_sidr_rx_rep(&m);
        break;
    default:
        break;
    }
}

/* A listener has appeared: the held REQs it serves are its requests now,
 * in the order they came. */
void scm_cm_listened(uint64_t now_ns)
{
    for (int k = 0; k < SCM_HELD_MAX; k++) {
        struct scm_held *h = &scm_svc.held[k];
        struct scm_mad m;
        struct scm_iphdr ih;
        if (!h->until_ns || scm_mad_decode(h->mad, h->len, &m) ||
            scm_iphdr_decode(m.priv, m.priv_len, &ih))
            continue;
        uint8_t dst[16];
        memcpy(dst, ih.dst, 16);
        if (ih.ip_ver == 4) {
            memset(dst, 0, 10);
            dst[10] = dst[11] = 0xff;
        }
        if (!scm_find_listener(m.service_id, dst))
            continue;
        h->until_ns = 0;
        rx_req(h->sgid, &m, NULL, 0, now_ns);
    }
}

/* Held REQs whose time is up get the REJ they were spared (IBA 12.6.7.2,
 * reason 8); returns the earliest deadline left, 0 for none. */
static uint64_t held_timers(uint64_t now_ns)
{
    uint64_t next = 0;
    for (int k = 0; k < SCM_HELD_MAX; k++) {
        struct scm_held *h = &scm_svc.held[k];
        if (!h->until_ns)
            continue;
        struct scm_mad m;
        if (h->until_ns <= now_ns) {
            h->until_ns = 0;
            if (!scm_mad_decode(h->mad, h->len, &m))
                send_rej(h->sgid, 0, m.local_comm_id, 0, SCM_REJ_INVALID_SERVICE_ID, NULL, 0);
        } else if (!next || h->until_ns < next) {
            next = h->until_ns;
        }
    }
    return next;
}

uint64_t scm_cm_timers(uint64_t now_ns)
{
    uint64_t next = held_timers(now_ns);
    for (struct scm_id *i = scm_svc.ids; i; i = i->next) {
        if (i->deadline_ns && i->deadline_ns <= now_ns) {
            i->deadline_ns = 0;
            if (i->await_listener) {
                scm_await_listener(i, now_ns);
            } else if (i->state == SCM_TIMEWAIT) {
                i->state = SCM_CLOSED;
                scm_post(i, RDMA_CM_EVENT_TIMEWAIT_EXIT, 0);
            } else if (i->retries_left) {
                /* IBA 12.7.32: resend up to Max CM Retries times */
                i->retries_left--;
                resend_last(i, i->state == SCM_REQ_SENT   ? SCM_ATTR_REQ
                               : i->state == SCM_REP_SENT ? SCM_ATTR_REP
                                                          : SCM_ATTR_DREQ);
                i->deadline_ns = now_ns + retry_ns(i);
            } else if (i->state == SCM_REQ_SENT || i->state == SCM_REP_SENT) {
                send_rej(i->peer_gid, i->local_comm_id, i->remote_comm_id,
                         i->state == SCM_REQ_SENT ? 0 : 1, SCM_REJ_TIMEOUT, NULL, 0);
                i->state = SCM_CLOSED;
                qp_err(i);
                scm_post(i, RDMA_CM_EVENT_UNREACHABLE, -ETIMEDOUT);
            } else if (i->state == SCM_SIDR_REQ_SENT) {
                i->state = SCM_CLOSED;
                scm_post(i, RDMA_CM_EVENT_UNREACHABLE, -ETIMEDOUT);
            } else if (i->state == SCM_DREQ_SENT) {
                enter_timewait(i, now_ns);
                scm_post(i, RDMA_CM_EVENT_DISCONNECTED, 0);
            }
        }
        keepalive(i, now_ns);
        if (i->deadline_ns && (!next || i->deadline_ns < next))
            next = i->deadline_ns;
        if (i->ka_next_ns && (!next || i->ka_next_ns < next))
            next = i->ka_next_ns;
    }
    return next;
}

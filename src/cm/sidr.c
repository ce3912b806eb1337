/* sidr.c: UD ids on RDMA_PS_UDP and RDMA_PS_IPOIB: Service ID Resolution
 * (IBA 12.11). rdma_connect sends a SIDR REQ carrying the RDMA IP CM
 * header (Annex A11.2.1); the listener's consumer sees CONNECT_REQUEST and
 * answers with rdma_accept (SIDR REP, status OK, its QPN and Q_Key) or
 * rdma_reject; the requester's ESTABLISHED event carries the peer's QPN,
 * Q_Key and an address handle's attributes in param.ud. No connection
 * exists afterwards: nothing to disconnect, no timewait. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "scm_int.h"

enum {
    SIDR_REQ_PRIV = 216,    /* IBA 12.6.9, Table 119 */
    SIDR_REP_PRIV = 136,    /* IBA 12.6.10, Table 120 */
    SIDR_RESP_TIMEOUT = 18, /* as the connected CM's (IBA 12.7.31) */
};

static uint32_t qkey_of(const struct scm_id *i)
{
    return i->id.ps == RDMA_PS_IPOIB ? 0 : RDMA_UDP_QKEY;
}

/* The address handle attributes of the peer's port, as a RoCE path
 * resolves them: GRH always, GID index 0. */
static void peer_ah(const struct scm_id *i, struct ibv_ah_attr *ah)
{
    memset(ah, 0, sizeof(*ah));
    ah->is_global = 1;
    ah->port_num = 1;
    ah->grh.sgid_index = 0;
    ah->grh.hop_limit = 64;
    ah->grh.traffic_class = i->tos;
    memcpy(ah->grh.dgid.raw, i->peer_gid, 16);
}

static struct scm_event *ud_event(struct scm_id *i, enum rdma_cm_event_type t, int status,
                                  const struct scm_mad *m, size_t skip)
{
    struct scm_event *e = scm_event_new(i, t, status);
    if (!e)
        return NULL;
    if (m && m->priv_len > skip) {
        memcpy(e->priv, m->priv + skip, m->priv_len - skip);
        e->ev.param.ud.private_data = e->priv;
        e->ev.param.ud.private_data_len = (uint8_t)(m->priv_len - skip);
    }
    peer_ah(i, &e->ev.param.ud.ah_attr);
    return e;
}

static void send_rep(const uint8_t gid[16], uint32_t req_id, uint64_t service_id, uint8_t status,
                     uint32_t qpn, uint32_t qkey, const void *priv, uint8_t priv_len,
                     uint8_t keep[SCM_MAD_LEN])
{
    struct scm_mad m = {.attr_id = SCM_ATTR_SIDR_REP,
                        .tid = ((uint64_t)req_id << 32) | 3,
                        .local_comm_id = req_id,
                        .status = status,
                        .qpn = qpn,
                        .service_id = service_id,
                        .qkey = qkey,
                        .priv_len = priv_len};
    if (priv_len)
        memcpy(m.priv, priv, priv_len);
    uint8_t buf[SCM_MAD_LEN], *out = keep ? keep : buf;
    if (!scm_mad_encode(&m, out))
        scm_send_mad(gid, out);
}

int scm_sidr_connect(struct scm_id *i, const struct rdma_conn_param *p)
{
    if (p && p->private_data_len > SIDR_REQ_PRIV - SCM_IPHDR_LEN)
        return fail(EINVAL);
    LOCK();
    if (i->state != SCM_ROUTE_RESOLVED && i->state != SCM_ADDR_RESOLVED) {
        UNLOCK();
        return fail(EINVAL);
    }
    struct rdma_cm_id *id = &i->id;
    struct scm_mad m = {.attr_id = SCM_ATTR_SIDR_REQ,
                        .tid = ((uint64_t)i->local_comm_id << 32) | 3,
                        .local_comm_id = i->local_comm_id,
                        .pkey = 0xffff,
                        .service_id = scm_service_id((uint16_t)id->ps, scm_id_port(i, false))};
    scm_req_priv(i, p, &m);
    if (scm_mad_encode(&m, i->last)) {
        UNLOCK();
        return fail(EINVAL);
    }
    i->timeout_exp = SIDR_RESP_TIMEOUT;
    /* IBA 12.11.1: an unanswered SIDR REQ is repeated, then given up */
    scm_connect_send(i, scm_now_ns());
    i->state = SCM_SIDR_REQ_SENT;
    bool sync = i->sync;
    scm_svc_kick();
    UNLOCK();
    return sync ? scm_sync_wait(i, RDMA_CM_EVENT_ESTABLISHED) : 0;
}

int scm_sidr_accept(struct scm_id *i, const struct rdma_conn_param *p)
{
    if (p && p->private_data_len > SIDR_REP_PRIV)
        return fail(EINVAL);
    LOCK();
    if (i->state != SCM_SIDR_REQ_RCVD) {
        UNLOCK();
        return fail(EINVAL);
    }
    uint32_t qpn = i->id.qp ? i->id.qp->qp_num : (p ? p->qp_num : 0);
    uint32_t qkey = qkey_of(i);
    send_rep(i->peer_gid, i->sidr_req_id, scm_service_id((uint16_t)i->id.ps, scm_id_port(i, true)),
             SCM_SIDR_OK, qpn, qkey, p ? p->private_data : NULL, p ? p->private_data_len : 0,
             i->last);
    i->state = SCM_ESTABLISHED;
    /* a synchronous id's request event is done with (librdmacm) */
    if (i->sync && i->id.event) {
        free(sr_container_of(i->id.event, struct scm_event, ev));
        i->id.event = NULL;
    }
    UNLOCK();
    return 0;
}

int scm_sidr_reject(struct scm_id *i, const void *priv, uint8_t priv_len)
{
    if (priv_len > SIDR_REP_PRIV)
        return fail(EINVAL);
    LOCK();
    if (i->state != SCM_SIDR_REQ_RCVD) {
        UNLOCK();
        return fail(EINVAL);
    }
    send_rep(i->peer_gid, i->sidr_req_id, scm_service_id((uint16_t)i->id.ps, scm_id_port(i, true)),
             SCM_SIDR_REJECT, 0, 0, priv, priv_len, i->last);
    i->state = SCM_CLOSED;
    UNLOCK();
    return 0;
}

void scm_sidr_rx_req(const uint8_t sgid[16], const struct scm_mad *m)
{
    /* A repeated SIDR REQ (its REP was lost): answer again if answered;
     * one the consumer still holds stays unanswered (IBA 12.11.1). */
    for (struct scm_id *i = scm_svc.ids; i; i = i->next)
        if (i->passive && i->id.qp_type == IBV_QPT_UD && i->sidr_req_id == m->local_comm_id &&
            !memcmp(i->peer_gid, sgid, 16)) {
            if (i->state == SCM_ESTABLISHED || i->state == SCM_CLOSED)
                scm_send_mad(i->peer_gid, i->last);
            return;
        }
    struct scm_iphdr h;
    if (scm_iphdr_decode(m->priv, m->priv_len, &h)) {
        send_rep(sgid, m->local_comm_id, m->service_id, SCM_SIDR_UNSUPPORTED, 0, 0, NULL, 0, NULL);
        return;
    }
    uint8_t dst[16], src[16];
    memcpy(dst, h.dst, 16), memcpy(src, h.src, 16);
    if (h.ip_ver == 4) {
        memset(dst, 0, 12), memset(src, 0, 12);
        dst[10] = dst[11] = src[10] = src[11] = 0xff;
    }
    struct scm_id *l = scm_find_listener(m->service_id, dst);
    if (!l || l->id.qp_type != IBV_QPT_UD) {
        send_rep(sgid, m->local_comm_id, m->service_id, SCM_SIDR_UNSUPPORTED, 0, 0, NULL, 0, NULL);
        return;
    }
    struct scm_id *n =
        scm_id_new(l->sync ? NULL : l->id.channel, l->id.context, l->id.ps, IBV_QPT_UD);
    if (!n) {
        send_rep(sgid, m->local_comm_id, m->service_id, SCM_SIDR_NO_QP, 0, 0, NULL, 0, NULL);
        return;
    }
    n->listener = l;
    n->passive = true;
    n->id.pd = l->id.pd;
    n->sidr_req_id = m->local_comm_id;
    n->state = SCM_SIDR_REQ_RCVD;
    memcpy(n->peer_gid, sgid, 16);
    scm_ip_sa(dst, (uint16_t)(m->service_id & 0xffff), &n->id.route.addr.src_storage);
    scm_ip_sa(src, h.src_port, &n->id.route.addr.dst_storage);
    struct ibv_port_attr pa;
    n->mtu = ibv_query_port(scm_svc.verbs, 1, &pa) ? IBV_MTU_1024 : pa.active_mtu;
    n->path.mtu = (enum ibv_mtu)n->mtu;
    memcpy(n->path.dgid.raw, sgid, 16);
    memcpy(n->path.sgid.raw, scm_svc.gid, 16);
    n->path.hop_limit = 64;
    n->path.pkey = 0xffff;
    n->id.route.path_rec = &n->path;
    n->id.route.num_paths = 1;
    struct scm_event *e = ud_event(n, RDMA_CM_EVENT_CONNECT_REQUEST, 0, m, SCM_IPHDR_LEN);
    if (!e)
        return;
    e->ev.listen_id = &l->id;
    /* the request reaches the listener's channel; a synchronous
     * listener's requests have channels of their own afterwards */
    struct scm_channel *c = sr_container_of(l->id.channel, struct scm_channel, ch);
    scm_chan_post(c, e);
}

void scm_sidr_rx_rep(const struct scm_mad *m)
{
    struct scm_id *i = NULL;
    for (struct scm_id *o = scm_svc.ids; o; o = o->next)
        if (o->state == SCM_SIDR_REQ_SENT && o->local_comm_id == m->local_comm_id) {
            i = o;
            break;
        }
    if (!i)
        return; /* a late or repeated REP */
    i->deadline_ns = 0;
    if (m->status != SCM_SIDR_OK) {
        i->state = SCM_CLOSED;
        /* as the kernel's rdma_cm: the SIDR status in the event */
        struct scm_event *e = ud_event(i, RDMA_CM_EVENT_UNREACHABLE, m->status, m, 0);
        if (e)
            scm_event_send(i, e);
        return;
    }
    i->remote_qpn = m->qpn;
    i->remote_qkey = m->qkey;
    i->state = SCM_ESTABLISHED;
    struct scm_event *e = ud_event(i, RDMA_CM_EVENT_ESTABLISHED, 0, m, 0);
    if (!e)
        return;
    e->ev.param.ud.qp_num = m->qpn;
    e->ev.param.ud.qkey = m->qkey;
    scm_event_send(i, e);
}

/* conn.c: the consumer's side of a connection: QPs on ids, connect,
 * accept, reject, disconnect, and the QP attributes rdma_cm chooses. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

#include "scm_int.h"

static uint32_t qkey_of(const struct scm_id *i)
{
    return i->id.ps == RDMA_PS_IPOIB ? 0 : 0x01234567; /* RDMA_UDP_QKEY */
}

SCM_EXPORT int rdma_init_qp_attr(struct rdma_cm_id *id, struct ibv_qp_attr *a, int *mask)
{
    if (!id || !a || !mask)
        return fail(EINVAL);
    struct scm_id *i = sid(id);
    enum ibv_qp_state st = a->qp_state;
    memset(a, 0, sizeof(*a));
    a->qp_state = st;
    switch (st) {
    case IBV_QPS_INIT:
        a->pkey_index = 0;
        a->port_num = 1;
        if (id->qp_type == IBV_QPT_UD) {
            a->qkey = i->remote_qkey ? i->remote_qkey : qkey_of(i);
            *mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY;
        } else {
            a->qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                                 IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
            *mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
        }
        return 0;
    case IBV_QPS_RTR:
        if (id->qp_type == IBV_QPT_UD) {
            *mask = IBV_QP_STATE;
            return 0;
        }
        if (i->state < SCM_REQ_SENT && i->state != SCM_ROUTE_RESOLVED)
            return fail(EINVAL);
        a->path_mtu = (enum ibv_mtu)(i->mtu ? i->mtu : IBV_MTU_1024);
        a->dest_qp_num = i->remote_qpn;
        a->rq_psn = i->remote_psn;
        a->max_dest_rd_atomic = i->init_depth ? i->init_depth : 1;
        /* RNR NAK timer code 0, 655.36 ms (IBA 9.7.5.2.8, Table 45), as
         * the kernel's CM sets it: with the RNR Retry Count of a connect
         * (often 5 or less) a peer that posts its receive a few ms late,
         * as a descheduled process does, must not fail the sender */
        a->min_rnr_timer = 0;
        a->ah_attr.is_global = 1;
        a->ah_attr.port_num = 1;
        a->ah_attr.grh.sgid_index = 0;
        a->ah_attr.grh.hop_limit = 64;
        a->ah_attr.grh.traffic_class = i->tos;
        memcpy(a->ah_attr.grh.dgid.raw, i->peer_gid, 16);
        *mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
        /* an XRC initiator has no responder side (XRC annex, as UC) */
        if (id->qp_type != IBV_QPT_XRC_SEND)
            *mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
        return 0;
    case IBV_QPS_RTS:
        if (id->qp_type == IBV_QPT_UD) {
            a->sq_psn = i->local_psn;
            *mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
            return 0;
        }
        a->sq_psn = i->local_psn;
        a->timeout = i->ack_timeout;
        if (id->qp_type == IBV_QPT_XRC_RECV) {
            /* an XRC target only responds: no requester attributes */
            *mask = IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT;
            return 0;
        }
        a->retry_cnt = i->retry_cnt;
        a->rnr_retry = i->rnr_retry;
        a->max_rd_atomic = i->resp_res ? i->resp_res : 1;
        *mask = IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
        return 0;
    default:
        return fail(EINVAL);
    }
}

static int modify_to(struct rdma_cm_id *id, enum ibv_qp_state st)
{
    struct ibv_qp_attr a = {.qp_state = st};
    int mask;
    if (rdma_init_qp_attr(id, &a, &mask))
        return errno;
    return ibv_modify_qp(id->qp, &a, mask);
}

/* The domain XRC targets and XRC SRQs of the process share, as
 * librdmacm keeps one per device. Lock held. */
static struct ibv_xrcd *svc_xrcd(void)
{
    if (!scm_svc.xrcd) {
        struct ibv_xrcd_init_attr xa = {.comp_mask =
                                            IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS,
                                        .fd = -1,
                                        .oflags = O_CREAT};
        scm_svc.xrcd = ibv_open_xrcd(scm_svc.verbs, &xa);
    }
    return scm_svc.xrcd;
}

/* The CQs librdmacm makes for an id that brings none: one for sends and
 * one for receives, each with its own channel, as rdma_get_send_comp and
 * rdma_get_recv_comp (<rdma/rdma_verbs.h>) wait on them apart. */
void scm_destroy_cqs(struct rdma_cm_id *id)
{
    if (id->send_cq && id->send_cq != id->recv_cq)
        ibv_destroy_cq(id->send_cq);
    if (id->recv_cq)
        ibv_destroy_cq(id->recv_cq);
    if (id->send_cq_channel && id->send_cq_channel != id->recv_cq_channel)
        ibv_destroy_comp_channel(id->send_cq_channel);
    if (id->recv_cq_channel)
        ibv_destroy_comp_channel(id->recv_cq_channel);
    id->send_cq = id->recv_cq = NULL;
    id->send_cq_channel = id->recv_cq_channel = NULL;
}

static int make_cq(struct rdma_cm_id *id, uint32_t n, struct ibv_cq **cq,
                   struct ibv_comp_channel **ch)
{
    *ch = ibv_create_comp_channel(id->verbs);
    *cq = *ch ? ibv_create_cq(id->verbs, (int)n, id, *ch, 0) : NULL;
    return *cq ? 0 : -1;
}

int scm_make_cqs(struct rdma_cm_id *id, uint32_t send_n, uint32_t recv_n)
{
    if ((recv_n && make_cq(id, recv_n, &id->recv_cq, &id->recv_cq_channel)) ||
        (send_n && make_cq(id, send_n, &id->send_cq, &id->send_cq_channel))) {
        scm_destroy_cqs(id);
        return -1;
    }
    return 0;
}

SCM_EXPORT int rdma_create_qp_ex(struct rdma_cm_id *id, struct ibv_qp_init_attr_ex *attr)
{
    if (!id || !attr || id->qp)
        return fail(EINVAL);
    if (!id->verbs)
        id->verbs = scm_svc.verbs;
    if (!(attr->comp_mask & IBV_QP_INIT_ATTR_PD) || !attr->pd) {
        attr->comp_mask |= IBV_QP_INIT_ATTR_PD;
        attr->pd = id->pd ? id->pd : scm_svc.pd;
    } else if (attr->pd->context != id->verbs) {
        return fail(EINVAL);
    }
    if ((id->recv_cq && attr->recv_cq && id->recv_cq != attr->recv_cq) ||
        (id->send_cq && attr->send_cq && id->send_cq != attr->send_cq))
        return fail(EINVAL);
    if (id->qp_type == IBV_QPT_XRC_RECV &&
        (!(attr->comp_mask & IBV_QP_INIT_ATTR_XRCD) || !attr->xrcd)) {
        LOCK();
        attr->xrcd = svc_xrcd();
        UNLOCK();
        if (!attr->xrcd)
            return -1;
        attr->comp_mask |= IBV_QP_INIT_ATTR_XRCD;
    }
    bool xrc_tgt = attr->qp_type == IBV_QPT_XRC_RECV;
    bool made = false;
    if (!xrc_tgt) {
        uint32_t sn = attr->send_cq || id->send_cq ? 0 : attr->cap.max_send_wr;
        uint32_t rn = attr->recv_cq || id->recv_cq || attr->qp_type == IBV_QPT_XRC_SEND
                          ? 0
                          : attr->cap.max_recv_wr;
        if ((sn || rn) && scm_make_cqs(id, sn, rn))
            return -1;
        made = sn || rn;
        if (!attr->send_cq)
            attr->send_cq = id->send_cq;
        if (!attr->recv_cq)
            attr->recv_cq = id->recv_cq;
    }
    if (id->srq && !attr->srq)
        attr->srq = id->srq;
    struct ibv_qp *qp = ibv_create_qp_ex(id->verbs, attr);
    if (!qp)
        goto err;
    id->qp = qp;
    int err = modify_to(id, IBV_QPS_INIT);
    if (!err && id->qp_type == IBV_QPT_UD) {
        err = modify_to(id, IBV_QPS_RTR);
        if (!err)
            err = modify_to(id, IBV_QPS_RTS);
    }
    if (err) {
        ibv_destroy_qp(qp);
        id->qp = NULL;
        errno = err;
        goto err;
    }
    id->pd = qp->pd ? qp->pd : id->pd;
    return 0;
err:
    if (made) {
        int e = errno;
        scm_destroy_cqs(id);
        errno = e;
    }
    return -1;
}

SCM_EXPORT int rdma_create_qp(struct rdma_cm_id *id, struct ibv_pd *pd,
                              struct ibv_qp_init_attr *qp_init_attr)
{
    if (!id || !qp_init_attr)
        return fail(EINVAL);
    struct ibv_qp_init_attr_ex ax = {.qp_context = qp_init_attr->qp_context,
                                     .send_cq = qp_init_attr->send_cq,
                                     .recv_cq = qp_init_attr->recv_cq,
                                     .srq = qp_init_attr->srq,
                                     .cap = qp_init_attr->cap,
                                     .qp_type = qp_init_attr->qp_type,
                                     .sq_sig_all = qp_init_attr->sq_sig_all,
                                     .comp_mask = IBV_QP_INIT_ATTR_PD,
                                     .pd = pd ? pd : id->pd};
    int r = rdma_create_qp_ex(id, &ax);
    qp_init_attr->cap = ax.cap;
    qp_init_attr->send_cq = ax.send_cq;
    qp_init_attr->recv_cq = ax.recv_cq;
    qp_init_attr->srq = ax.srq;
    return r;
}

SCM_EXPORT void rdma_destroy_qp(struct rdma_cm_id *id)
{
    if (!id)
        return;
    if (id->qp)
        ibv_destroy_qp(id->qp);
    id->qp = NULL;
    /* an XRC target's CQ belongs to its SRQ (rdma_destroy_srq) */
    if (id->qp_type != IBV_QPT_XRC_RECV || !id->srq)
        scm_destroy_cqs(id);
}

/* RDMA_MAX_RESP_RES and RDMA_MAX_INIT_DEPTH ask for the device's
 * limits; a larger explicit value is refused, as librdmacm does. */
static int rd_limit(uint8_t want, uint8_t max_code, uint8_t dev_max, uint8_t *out)
{
    if (want == max_code) {
        *out = dev_max;
        return 0;
    }
    if (want > dev_max)
        return EINVAL;
    *out = want;
    return 0;
}

static int conn_limits(const struct rdma_conn_param *p, uint8_t *resp, uint8_t *init)
{
    return rd_limit(p->responder_resources, RDMA_MAX_RESP_RES, scm_svc.max_resp_res, resp) ||
                   rd_limit(p->initiator_depth, RDMA_MAX_INIT_DEPTH, scm_svc.max_init_depth, init)
               ? EINVAL
               : 0;
}

static void fill_conn(struct scm_id *i, const struct rdma_conn_param *p)
{
    if (!p)
        return;
    conn_limits(p, &i->resp_res, &i->init_depth);
    if (p->retry_count)
        i->retry_cnt = p->retry_count > 7 ? 7 : p->retry_count;
    i->rnr_retry = p->rnr_retry_count > 7 ? 7 : p->rnr_retry_count;
}

/* A REQ's or SIDR REQ's private data: the RDMA IP CM header (IBA Annex A11)
 * for the id's addresses, then the consumer's. */
void scm_req_priv(struct scm_id *i, const struct rdma_conn_param *p, struct scm_mad *m)
{
    const struct rdma_cm_id *id = &i->id;
    struct scm_iphdr h = {.src_port = scm_id_port(i, true)};
    const struct sockaddr *s = &id->route.addr.src_addr, *d = &id->route.addr.dst_addr;
    h.ip_ver = d->sa_family == AF_INET6 ? 6 : 4;
    if (h.ip_ver == 4) {
        memcpy(h.src + 12, &((const struct sockaddr_in *)(const void *)s)->sin_addr, 4);
        memcpy(h.dst + 12, &((const struct sockaddr_in *)(const void *)d)->sin_addr, 4);
    } else {
        memcpy(h.src, &((const struct sockaddr_in6 *)(const void *)s)->sin6_addr, 16);
        memcpy(h.dst, &((const struct sockaddr_in6 *)(const void *)d)->sin6_addr, 16);
    }
    scm_iphdr_encode(&h, m->priv);
    m->priv_len = SCM_IPHDR_LEN;
    if (p && p->private_data_len) {
        memcpy(m->priv + SCM_IPHDR_LEN, p->private_data, p->private_data_len);
        m->priv_len += p->private_data_len;
    }
}

SCM_EXPORT int rdma_connect(struct rdma_cm_id *id, struct rdma_conn_param *p)
{
    if (!id)
        return fail(EINVAL);
    struct scm_id *i = sid(id);
    if (id->qp_type == IBV_QPT_UD)
        return scm_sidr_connect(i, p);
    uint8_t rr, id_;
    if (p && (p->private_data_len > 92 - SCM_IPHDR_LEN || conn_limits(p, &rr, &id_)))
        return fail(EINVAL);
    LOCK();
    if (i->state != SCM_ROUTE_RESOLVED ||
        (id->qp_type != IBV_QPT_RC && id->qp_type != IBV_QPT_XRC_SEND)) {
        UNLOCK();
        return fail(EINVAL);
    }
    fill_conn(i, p);
    scm_peer_refresh(i);
    struct scm_mad m = {.attr_id = SCM_ATTR_REQ,
                        .tid = ((uint64_t)i->local_comm_id << 32) | 1,
                        .local_comm_id = i->local_comm_id,
                        .service_id = scm_service_id((uint16_t)id->ps, scm_id_port(i, false)),
                        .ca_guid = scm_svc.guid,
                        .qpn = id->qp ? id->qp->qp_num : (p ? p->qp_num : 0),
                        .resp_res = i->resp_res,
                        .init_depth = i->init_depth,
                        .remote_cm_timeout = i->timeout_exp,
                        .transport = id->qp_type == IBV_QPT_XRC_SEND ? SCM_TS_XRC : SCM_TS_RC,
                        .flow_ctl = p ? p->flow_control : 1,
                        .starting_psn = i->local_psn,
                        .local_cm_timeout = i->timeout_exp,
                        .retry_cnt = i->retry_cnt,
                        .pkey = 0xffff,
                        .mtu = i->mtu,
                        .rnr_retry = i->rnr_retry,
                        .max_cm_retries = i->max_retries,
                        .srq = id->qp ? id->qp->srq != NULL : (p ? p->srq : 0),
                        /* RoCE: no LIDs, the permissive LID (IBA A16.4) */
                        .local_lid = 0xffff,
                        .remote_lid = 0xffff,
                        .traffic_class = i->tos,
                        .hop_limit = 64,
                        .ack_timeout = i->ack_timeout};
    memcpy(m.local_gid, scm_svc.gid, 16);
    memcpy(m.remote_gid, i->peer_gid, 16);
    scm_req_priv(i, p, &m);
    if (scm_mad_encode(&m, i->last)) {
        UNLOCK();
        return fail(EINVAL);
    }
    scm_connect_send(i, scm_now_ns());
    i->state = SCM_REQ_SENT;
    bool sync = i->sync;
    scm_svc_kick();
    UNLOCK();
    return sync ? scm_sync_wait(i, RDMA_CM_EVENT_ESTABLISHED) : 0;
}

SCM_EXPORT int rdma_accept(struct rdma_cm_id *id, struct rdma_conn_param *p)
{
    if (!id)
        return fail(EINVAL);
    struct scm_id *i = sid(id);
    if (id->qp_type == IBV_QPT_UD)
        return scm_sidr_accept(i, p);
    if (p && p->private_data_len > 196)
        return fail(EINVAL);
    LOCK();
    if (i->state != SCM_REQ_RCVD) {
        UNLOCK();
        return fail(EINVAL);
    }
    if (p) {
        uint8_t rr, id_;
        if (conn_limits(p, &rr, &id_)) {
            UNLOCK();
            return fail(EINVAL);
        }
        /* no more than the requester offered (IBA 12.6.8) */
        if (rr < i->init_depth)
            i->init_depth = rr;
        if (id_ < i->resp_res)
            i->resp_res = id_;
        if (!id->qp) {
            i->rnr_retry = p->rnr_retry_count > 7 ? 7 : p->rnr_retry_count;
        }
    }
    struct ibv_port_attr pa;
    if (!ibv_query_port(scm_svc.verbs, 1, &pa) && pa.active_mtu < i->mtu)
        i->mtu = pa.active_mtu;
    if (id->qp) {
        int err = modify_to(id, IBV_QPS_RTR);
        if (!err)
            err = modify_to(id, IBV_QPS_RTS);
        if (err) {
            UNLOCK();
            return fail(err);
        }
    }
    struct scm_mad m = {.attr_id = SCM_ATTR_REP,
                        .tid = ((uint64_t)i->remote_comm_id << 32) | 1,
                        .local_comm_id = i->local_comm_id,
                        .remote_comm_id = i->remote_comm_id,
                        .qpn = id->qp ? id->qp->qp_num : (p ? p->qp_num : 0),
                        .starting_psn = i->local_psn,
                        .resp_res = i->init_depth,
                        .init_depth = i->resp_res,
                        .target_ack_delay = 15,
                        .flow_ctl = 1,
                        .rnr_retry = i->rnr_retry,
                        .srq = id->qp ? id->qp->srq != NULL : (p ? p->srq : 0),
                        .ca_guid = scm_svc.guid};
    if (p && p->private_data_len) {
        memcpy(m.priv, p->private_data, p->private_data_len);
        m.priv_len = p->private_data_len;
    }
    if (scm_mad_encode(&m, i->last)) {
        UNLOCK();
        return fail(EINVAL);
    }
    scm_send_mad(i->peer_gid, i->last);
    scm_cm_arm(i, scm_now_ns());
    i->state = SCM_REP_SENT;
    bool sync = i->sync;
    scm_svc_kick();
    UNLOCK();
    return sync ? scm_sync_wait(i, RDMA_CM_EVENT_ESTABLISHED) : 0;
}

SCM_EXPORT int rdma_reject(struct rdma_cm_id *id, const void *private_data,
                           uint8_t private_data_len)
{
    if (!id || private_data_len > 148)
        return fail(EINVAL);
    struct scm_id *i = sid(id);
    if (id->qp_type == IBV_QPT_UD)
        return scm_sidr_reject(i, private_data, private_data_len);
    LOCK();
    if (i->state != SCM_REQ_RCVD && i->state != SCM_REP_RCVD) {
        UNLOCK();
        return fail(EINVAL);
    }
    struct scm_mad m = {.attr_id = SCM_ATTR_REJ,
                        .local_comm_id = i->local_comm_id,
                        .remote_comm_id = i->remote_comm_id,
                        .msg_kind = i->state == SCM_REQ_RCVD ? 0 : 1,
                        .reason = SCM_REJ_CONSUMER,
                        .priv_len = private_data_len};
    if (private_data_len)
        memcpy(m.priv, private_data, private_data_len);
    uint8_t buf[SCM_MAD_LEN];
    if (!scm_mad_encode(&m, buf))
        scm_send_mad(i->peer_gid, buf);
    i->state = SCM_CLOSED;
    UNLOCK();
    return 0;
}

SCM_EXPORT int rdma_establish(struct rdma_cm_id *id)
{
    if (!id)
        return fail(EINVAL);
    struct scm_id *i = sid(id);
    LOCK();
    if (i->state != SCM_REP_RCVD) {
        UNLOCK();
        return fail(EINVAL);
    }
    struct scm_mad m = {.attr_id = SCM_ATTR_RTU,
                        .local_comm_id = i->local_comm_id,
                        .remote_comm_id = i->remote_comm_id};
    if (!scm_mad_encode(&m, i->last))
        scm_send_mad(i->peer_gid, i->last);
    i->state = SCM_ESTABLISHED;
    UNLOCK();
    return 0;
}

SCM_EXPORT int rdma_notify(struct rdma_cm_id *id, enum ibv_event_type event)
{
    if (!id)
        return fail(EINVAL);
    struct scm_id *i = sid(id);
    LOCK();
    /* a first packet on the QP stands for the RTU (IBA 12.9.6.5) */
    if (event == IBV_EVENT_COMM_EST && i->state == SCM_REP_SENT) {
        i->deadline_ns = 0;
        i->state = SCM_ESTABLISHED;
        struct scm_event *e = scm_event_new(i, RDMA_CM_EVENT_ESTABLISHED, 0);
        if (e)
            scm_event_send(i, e);
    }
    UNLOCK();
    return 0;
}

SCM_EXPORT int rdma_disconnect(struct rdma_cm_id *id)
{
    if (!id)
        return fail(EINVAL);
    struct scm_id *i = sid(id);
    LOCK();
    if (id->qp) {
        struct ibv_qp_attr a = {.qp_state = IBV_QPS_ERR};
        ibv_modify_qp(id->qp, &a, IBV_QP_STATE);
    }
    if (id->qp_type == IBV_QPT_UD) {
        /* SIDR leaves no connection to take down (IBA 12.11) */
        UNLOCK();
        return 0;
    }
    if (i->state != SCM_ESTABLISHED && i->state != SCM_REP_SENT) {
        int ok = i->state == SCM_TIMEWAIT || i->state == SCM_DREQ_SENT || i->state == SCM_CLOSED;
        UNLOCK();
        return ok ? 0 : fail(EINVAL);
    }
    struct scm_mad m = {.attr_id = SCM_ATTR_DREQ,
                        .tid = ((uint64_t)i->local_comm_id << 32) | 2,
                        .local_comm_id = i->local_comm_id,
                        .remote_comm_id = i->remote_comm_id,
                        .qpn = i->remote_qpn};
    if (!scm_mad_encode(&m, i->last))
        scm_send_mad(i->peer_gid, i->last);
    scm_cm_arm(i, scm_now_ns());
    i->state = SCM_DREQ_SENT;
    scm_svc_kick();
    UNLOCK();
    return 0;
}

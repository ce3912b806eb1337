/* misc.c: options, ports, devices, rdma_getaddrinfo, the endpoint helpers
 * (rdma_create_ep, rdma_get_request) and what softrdma does not offer yet:
 * multicast, ECE and rsockets, which fail cleanly with an errno. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <rdma/rdma_verbs.h>
#include <rdma/rsocket.h>
#include <stdlib.h>
#include <string.h>

#include "scm_int.h"

SCM_EXPORT int rdma_set_option(struct rdma_cm_id *id, int level, int optname, void *optval,
                               size_t optlen)
{
    if (!id || !optval)
        return fail(EINVAL);
    struct scm_id *i = sid(id);
    if (level == RDMA_OPTION_ID) {
        switch (optname) {
        case RDMA_OPTION_ID_TOS:
            if (optlen != sizeof(uint8_t))
                return fail(EINVAL);
            i->tos = *(uint8_t *)optval, i->tos_set = true;
            return 0;
        case RDMA_OPTION_ID_REUSEADDR:
            if (optlen != sizeof(int))
                return fail(EINVAL);
            i->reuseaddr = *(int *)optval != 0;
            return 0;
        case RDMA_OPTION_ID_AFONLY:
            if (optlen != sizeof(int))
                return fail(EINVAL);
            i->afonly = *(int *)optval != 0;
            return 0;
        case RDMA_OPTION_ID_ACK_TIMEOUT:
            if (optlen != sizeof(uint8_t))
                return fail(EINVAL);
            i->ack_timeout = *(uint8_t *)optval;
            return 0;
        }
        return fail(ENOSYS);
    }
    return fail(level == RDMA_OPTION_IB ? ENOSYS : EINVAL);
}

SCM_EXPORT __be16 rdma_get_src_port(struct rdma_cm_id *id)
{
    return id ? htons(scm_id_port(sid(id), true)) : 0;
}

SCM_EXPORT __be16 rdma_get_dst_port(struct rdma_cm_id *id)
{
    return id ? htons(scm_id_port(sid(id), false)) : 0;
}

SCM_EXPORT struct ibv_context **rdma_get_devices(int *num_devices)
{
    LOCK();
    int err = scm_svc_up();
    UNLOCK();
    struct ibv_context **l = calloc(2, sizeof(*l));
    if (!l) {
        errno = ENOMEM;
        return NULL;
    }
    if (!err)
        l[0] = scm_svc.verbs;
    if (num_devices)
        *num_devices = err ? 0 : 1;
    return l;
}

SCM_EXPORT void rdma_free_devices(struct ibv_context **list)
{
    free(list);
}

static int copy_sa(struct sockaddr **dst, socklen_t *dst_len, const struct sockaddr *src,
                   socklen_t len)
{
    *dst = malloc(len);
    if (!*dst)
        return ENOMEM;
    memcpy(*dst, src, len);
    *dst_len = len;
    return 0;
}

/* As librdmacm: a node or service goes through getaddrinfo(3); without
 * either, the hints' own addresses are the answer (libfabric's verbs
 * provider asks that way), and the hints' source address is kept. */
SCM_EXPORT int rdma_getaddrinfo(const char *node, const char *service,
                                const struct rdma_addrinfo *hints, struct rdma_addrinfo **res)
{
    static const struct rdma_addrinfo none;
    if (!res || (!node && !service && !hints))
        return fail(EINVAL);
    if (!hints)
        hints = &none;
    if (hints->ai_family == AF_IB)
        return fail(EAFNOSUPPORT);
    int ps = hints->ai_port_space;
    int qpt = hints->ai_qp_type;
    if (!ps)
        ps = qpt == IBV_QPT_UD ? RDMA_PS_UDP : RDMA_PS_TCP;
    if (!qpt)
        qpt = ps == RDMA_PS_UDP || ps == RDMA_PS_IPOIB ? IBV_QPT_UD : IBV_QPT_RC;
    struct rdma_addrinfo *ra = calloc(1, sizeof(*ra));
    if (!ra)
        return fail(ENOMEM);
    ra->ai_flags = hints->ai_flags;
    ra->ai_family = hints->ai_family;
    ra->ai_qp_type = qpt;
    ra->ai_port_space = ps;
    int err = 0;
    if (node || service) {
        struct addrinfo h = {.ai_family = hints->ai_family,
                             .ai_socktype = qpt == IBV_QPT_UD ? SOCK_DGRAM : SOCK_STREAM},
                        *ai;
        if (hints->ai_flags & RAI_PASSIVE)
            h.ai_flags |= AI_PASSIVE;
        if (hints->ai_flags & RAI_NUMERICHOST)
            h.ai_flags |= AI_NUMERICHOST;
        int r = getaddrinfo(node, service, &h, &ai);
        if (r) {
            free(ra);
            return r == EAI_SYSTEM ? -1 : fail(r == EAI_NONAME ? ENOENT : EINVAL);
        }
        ra->ai_family = ai->ai_family;
        if (hints->ai_flags & RAI_PASSIVE)
            err = copy_sa(&ra->ai_src_addr, &ra->ai_src_len, ai->ai_addr, ai->ai_addrlen);
        else
            err = copy_sa(&ra->ai_dst_addr, &ra->ai_dst_len, ai->ai_addr, ai->ai_addrlen);
        freeaddrinfo(ai);
    } else if (hints->ai_dst_len && hints->ai_dst_addr) {
        err = copy_sa(&ra->ai_dst_addr, &ra->ai_dst_len, hints->ai_dst_addr, hints->ai_dst_len);
        if (!ra->ai_family)
            ra->ai_family = hints->ai_dst_addr->sa_family;
    }
    if (!err && !ra->ai_src_len && hints->ai_src_len && hints->ai_src_addr) {
        err = copy_sa(&ra->ai_src_addr, &ra->ai_src_len, hints->ai_src_addr, hints->ai_src_len);
        if (!ra->ai_family)
            ra->ai_family = hints->ai_src_addr->sa_family;
    }
    if (err) {
        rdma_freeaddrinfo(ra);
        return fail(err);
    }
    *res = ra;
    return 0;
}

SCM_EXPORT void rdma_freeaddrinfo(struct rdma_addrinfo *res)
{
    while (res) {
        struct rdma_addrinfo *n = res->ai_next;
        free(res->ai_src_addr);
        free(res->ai_dst_addr);
        free(res->ai_src_canonname);
        free(res->ai_dst_canonname);
        free(res->ai_route);
        free(res->ai_connect);
        free(res);
        res = n;
    }
}

SCM_EXPORT int rdma_create_ep(struct rdma_cm_id **id, struct rdma_addrinfo *res, struct ibv_pd *pd,
                              struct ibv_qp_init_attr *qp_init_attr)
{
    if (!id || !res)
        return fail(EINVAL);
    struct rdma_cm_id *c;
    if (rdma_create_id(NULL, &c, NULL, (enum rdma_port_space)res->ai_port_space))
        return -1;
    /* the id's QP type is the address's: XRC ids live in RDMA_PS_IB */
    if (res->ai_qp_type)
        c->qp_type = (enum ibv_qp_type)res->ai_qp_type;
    int r;
    if (res->ai_flags & RAI_PASSIVE)
        r = rdma_bind_addr(c, res->ai_src_addr);
    else
        r = rdma_resolve_addr(c, res->ai_src_addr, res->ai_dst_addr, 2000) ||
            rdma_resolve_route(c, 2000);
    if (r)
        goto err;
    if (pd)
        c->pd = pd;
    if (qp_init_attr) {
        qp_init_attr->qp_type = c->qp_type;
        /* a listener's QP attributes go to each request (rdma_get_request) */
        if (res->ai_flags & RAI_PASSIVE) {
            struct ibv_qp_init_attr *keep = malloc(sizeof(*keep));
            if (!keep)
                goto err;
            *keep = *qp_init_attr;
            sid(c)->qp_attr = keep;
        } else if (rdma_create_qp(c, pd, qp_init_attr)) {
            goto err;
        }
    }
    *id = c;
    return 0;
err : {
    int e = errno;
    rdma_destroy_ep(c);
    errno = e;
}
    return -1;
}

SCM_EXPORT void rdma_destroy_ep(struct rdma_cm_id *id)
{
    if (!id)
        return;
    if (id->qp)
        rdma_destroy_qp(id);
    if (id->srq)
        rdma_destroy_srq(id);
    free(sid(id)->qp_attr);
    sid(id)->qp_attr = NULL;
    rdma_destroy_id(id);
}

SCM_EXPORT int rdma_get_request(struct rdma_cm_id *listen, struct rdma_cm_id **id)
{
    if (!listen || !id)
        return fail(EINVAL);
    struct scm_id *l = sid(listen);
    if (!l->sync)
        return fail(EINVAL);
    if (listen->event) {
        rdma_ack_cm_event(listen->event);
        listen->event = NULL;
    }
    struct rdma_cm_event *ev;
    if (rdma_get_cm_event(listen->channel, &ev))
        return -1;
    int err = ev->event == RDMA_CM_EVENT_REJECTED          ? ECONNREFUSED
              : ev->status                                 ? (ev->status < 0 ? -ev->status : EIO)
              : ev->event != RDMA_CM_EVENT_CONNECT_REQUEST ? EINVAL
                                                           : 0;
    if (err) {
        listen->event = ev;
        return fail(err);
    }
    struct rdma_cm_id *c = ev->id;
    if (l->qp_attr) {
        struct ibv_qp_init_attr a = *l->qp_attr;
        if (rdma_create_qp(c, listen->pd, &a)) {
            listen->event = ev;
            return -1;
        }
    }
    c->event = ev;
    *id = c;
    return 0;
}

SCM_EXPORT int rdma_create_srq_ex(struct rdma_cm_id *id, struct ibv_srq_init_attr_ex *attr)
{
    if (!id || !attr)
        return fail(EINVAL);
    if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_TYPE))
        return fail(EINVAL);
    if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_PD) || !attr->pd) {
        attr->pd = id->pd ? id->pd : scm_svc.pd;
        attr->comp_mask |= IBV_SRQ_INIT_ATTR_PD;
    }
    bool made = false;
    if (attr->srq_type == IBV_SRQT_XRC) {
        if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_XRCD) || !attr->xrcd) {
            LOCK();
            if (!scm_svc.xrcd) {
                struct ibv_xrcd_init_attr xa = {.comp_mask = IBV_XRCD_INIT_ATTR_FD |
                                                             IBV_XRCD_INIT_ATTR_OFLAGS,
                                                .fd = -1,
                                                .oflags = O_CREAT};
                scm_svc.xrcd = ibv_open_xrcd(scm_svc.verbs, &xa);
            }
            attr->xrcd = scm_svc.xrcd;
            UNLOCK();
            if (!attr->xrcd)
                return -1;
        }
        /* an XRC SRQ completes on a CQ of its own: the id's receive CQ */
        if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_CQ) || !attr->cq) {
            if (scm_make_cqs(id, 0, attr->attr.max_wr))
                return -1;
            made = true;
            attr->cq = id->recv_cq;
        }
        attr->comp_mask |= IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ;
    }
    struct ibv_srq *srq = ibv_create_srq_ex(id->verbs ? id->verbs : scm_svc.verbs, attr);
    if (!srq) {
        if (made) {
            int e = errno;
            scm_destroy_cqs(id);
            errno = e;
        }
        return -1;
    }
    if (!id->pd)
        id->pd = attr->pd;
    id->srq = srq;
    return 0;
}

SCM_EXPORT int rdma_create_srq(struct rdma_cm_id *id, struct ibv_pd *pd,
                               struct ibv_srq_init_attr *attr)
{
    if (!id || !attr)
        return fail(EINVAL);
    struct ibv_srq_init_attr_ex ax = {.srq_context = attr->srq_context,
                                      .attr = attr->attr,
                                      .comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD,
                                      .srq_type = id->qp_type == IBV_QPT_XRC_RECV ? IBV_SRQT_XRC
                                                                                  : IBV_SRQT_BASIC,
                                      .pd = pd};
    int r = rdma_create_srq_ex(id, &ax);
    attr->attr = ax.attr;
    return r;
}

SCM_EXPORT void rdma_destroy_srq(struct rdma_cm_id *id)
{
    if (!id)
        return;
    if (id->srq)
        ibv_destroy_srq(id->srq);
    id->srq = NULL;
    scm_destroy_cqs(id);
}

/* ---- not offered: clean failures ---- */
SCM_EXPORT int rdma_join_multicast(struct rdma_cm_id *id, struct sockaddr *addr, void *context)
{
    (void)id, (void)addr, (void)context;
    return fail(ENOSYS);
}
SCM_EXPORT int rdma_join_multicast_ex(struct rdma_cm_id *id, struct rdma_cm_join_mc_attr_ex *mc,
                                      void *context)
{
    (void)id, (void)mc, (void)context;
    return fail(ENOSYS);
}
SCM_EXPORT int rdma_leave_multicast(struct rdma_cm_id *id, struct sockaddr *addr)
{
    (void)id, (void)addr;
    return fail(EADDRNOTAVAIL);
}
SCM_EXPORT int rdma_set_local_ece(struct rdma_cm_id *id, struct ibv_ece *ece)
{
    (void)id, (void)ece;
    return fail(EOPNOTSUPP);
}
SCM_EXPORT int rdma_get_remote_ece(struct rdma_cm_id *id, struct ibv_ece *ece)
{
    (void)id, (void)ece;
    return fail(EOPNOTSUPP);
}
SCM_EXPORT int rdma_reject_ece(struct rdma_cm_id *id, const void *private_data,
                               uint8_t private_data_len)
{
    return rdma_reject(id, private_data, private_data_len);
}

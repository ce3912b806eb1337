/* misc.c: the rest of libibverbs' exported surface: kernel-structure
 * copies that librdmacm imports, PD and MR import (within one process),
 * ECE, and the IBVERBS_PRIVATE_34 symbols that clients import.
 * Unsupported calls fail with EOPNOTSUPP. */
#include "sv.h"

#include <errno.h>
#include <infiniband/sa.h>
#include <rdma/ib_user_sa.h>
#include <rdma/ib_user_verbs.h>
#include <stdlib.h>

static void ah_from_kern(struct ibv_ah_attr *dst, const struct ib_uverbs_ah_attr *src)
{
    memcpy(dst->grh.dgid.raw, src->grh.dgid, sizeof(dst->grh.dgid));
    dst->grh.flow_label = src->grh.flow_label;
    dst->grh.sgid_index = src->grh.sgid_index;
    dst->grh.hop_limit = src->grh.hop_limit;
    dst->grh.traffic_class = src->grh.traffic_class;
    dst->dlid = src->dlid;
    dst->sl = src->sl;
    dst->src_path_bits = src->src_path_bits;
    dst->static_rate = src->static_rate;
    dst->is_global = src->is_global;
    dst->port_num = src->port_num;
}

SV_EXPORT void ibv_copy_ah_attr_from_kern(struct ibv_ah_attr *dst, struct ib_uverbs_ah_attr *src);
void ibv_copy_ah_attr_from_kern(struct ibv_ah_attr *dst, struct ib_uverbs_ah_attr *src)
{
    if (!dst || !src)
        return;
    ah_from_kern(dst, src);
}

SV_EXPORT void ibv_copy_qp_attr_from_kern(struct ibv_qp_attr *dst, struct ib_uverbs_qp_attr *src);
void ibv_copy_qp_attr_from_kern(struct ibv_qp_attr *dst, struct ib_uverbs_qp_attr *src)
{
    if (!dst || !src)
        return;
    dst->cur_qp_state = src->cur_qp_state;
    dst->path_mtu = src->path_mtu;
    dst->path_mig_state = src->path_mig_state;
    dst->qkey = src->qkey;
    dst->rq_psn = src->rq_psn;
    dst->sq_psn = src->sq_psn;
    dst->dest_qp_num = src->dest_qp_num;
    dst->qp_access_flags = src->qp_access_flags;
    dst->cap.max_send_wr = src->max_send_wr;
    dst->cap.max_recv_wr = src->max_recv_wr;
    dst->cap.max_send_sge = src->max_send_sge;
    dst->cap.max_recv_sge = src->max_recv_sge;
    dst->cap.max_inline_data = src->max_inline_data;
    ah_from_kern(&dst->ah_attr, &src->ah_attr);
    ah_from_kern(&dst->alt_ah_attr, &src->alt_ah_attr);
    dst->pkey_index = src->pkey_index;
    dst->alt_pkey_index = src->alt_pkey_index;
    dst->en_sqd_async_notify = src->en_sqd_async_notify;
    dst->sq_draining = src->sq_draining;
    dst->max_rd_atomic = src->max_rd_atomic;
    dst->max_dest_rd_atomic = src->max_dest_rd_atomic;
    dst->min_rnr_timer = src->min_rnr_timer;
    dst->port_num = src->port_num;
    dst->timeout = src->timeout;
    dst->retry_cnt = src->retry_cnt;
    dst->rnr_retry = src->rnr_retry;
    dst->alt_port_num = src->alt_port_num;
    dst->alt_timeout = src->alt_timeout;
}

SV_EXPORT void ibv_copy_path_rec_from_kern(struct ibv_sa_path_rec *dst,
                                           struct ib_user_path_rec *src);
void ibv_copy_path_rec_from_kern(struct ibv_sa_path_rec *dst, struct ib_user_path_rec *src)
{
    if (!dst || !src)
        return;
    memcpy(dst->dgid.raw, src->dgid, sizeof(dst->dgid));
    memcpy(dst->sgid.raw, src->sgid, sizeof(dst->sgid));
    dst->dlid = src->dlid;
    dst->slid = src->slid;
    dst->raw_traffic = (int)src->raw_traffic;
    dst->flow_label = src->flow_label;
    dst->hop_limit = src->hop_limit;
    dst->traffic_class = src->traffic_class;
    dst->reversible = (int)src->reversible;
    dst->numb_path = src->numb_path;
    dst->pkey = src->pkey;
    dst->sl = src->sl;
    dst->mtu_selector = src->mtu_selector;
    dst->mtu = (uint8_t)src->mtu;
    dst->rate_selector = src->rate_selector;
    dst->rate = src->rate;
    dst->packet_life_time_selector = src->packet_life_time_selector;
    dst->packet_life_time = src->packet_life_time;
    dst->preference = src->preference;
}

SV_EXPORT void ibv_copy_path_rec_to_kern(struct ib_user_path_rec *dst, struct ibv_sa_path_rec *src);
void ibv_copy_path_rec_to_kern(struct ib_user_path_rec *dst, struct ibv_sa_path_rec *src)
{
    if (!dst || !src)
        return;
    memcpy(dst->dgid, src->dgid.raw, sizeof(src->dgid));
    memcpy(dst->sgid, src->sgid.raw, sizeof(src->sgid));
    dst->dlid = src->dlid;
    dst->slid = src->slid;
    dst->raw_traffic = (uint32_t)src->raw_traffic;
    dst->flow_label = src->flow_label;
    dst->hop_limit = src->hop_limit;
    dst->traffic_class = src->traffic_class;
    dst->reversible = (uint32_t)src->reversible;
    dst->numb_path = src->numb_path;
    dst->pkey = src->pkey;
    dst->sl = src->sl;
    dst->mtu_selector = src->mtu_selector;
    dst->mtu = src->mtu;
    dst->rate_selector = src->rate_selector;
    dst->rate = src->rate;
    dst->packet_life_time_selector = src->packet_life_time_selector;
    dst->packet_life_time = src->packet_life_time;
    dst->preference = src->preference;
}

/* ---- importing PDs and MRs (ibv_import_pd(3), ibv_import_mr(3)) ----
 * Within one process, into a context made by ibv_import_device from the
 * original's cmd_fd: an import is a wrapper around the original's engine
 * object. Unimporting (or destroying the import) frees only the wrapper;
 * the original's destroy stays the owner of the engine object. */
struct pd_key {
    const struct ibv_context *ctx;
    uint32_t handle;
};
static bool pd_match(const void *obj, const void *arg)
{
    const struct ibv_pd *pd = obj;
    const struct pd_key *k = arg;
    const struct sv_pd *p = sv_pd((struct ibv_pd *)pd);
    return pd->handle == k->handle && !p->imported && !p->parent_of &&
           sv_ctx_shares(pd->context, k->ctx);
}

SV_EXPORT struct ibv_pd *ibv_import_pd(struct ibv_context *context, uint32_t pd_handle)
{
    if (!sv_live_is(context, SV_K_CTX)) {
        errno = EINVAL;
        return NULL;
    }
    struct pd_key k = {context, pd_handle};
    struct ibv_pd *orig = sv_live_find(SV_K_PD, pd_match, &k);
    if (!orig) {
        errno = ENOENT;
        return NULL;
    }
    struct sv_pd *p = calloc(1, sizeof(*p));
    if (!p) {
        errno = ENOMEM;
        return NULL;
    }
    p->pd = sv_pd(orig)->pd;
    p->imported = true;
    p->ibpd.context = context;
    p->ibpd.handle = pd_handle;
    sv_live_add(&p->ibpd, SV_K_PD);
    return &p->ibpd;
}

SV_EXPORT void ibv_unimport_pd(struct ibv_pd *pd)
{
    if (!sv_live_is(pd, SV_K_PD) || !sv_pd(pd)->imported)
        return;
    sv_live_del(pd);
    free(sv_pd(pd));
}

struct mr_key {
    const struct sr_pd *pd;
    uint32_t handle;
};
static bool mr_match(const void *obj, const void *arg)
{
    const struct sv_mr *m = sr_container_of(obj, struct sv_mr, ibmr);
    const struct mr_key *k = arg;
    return m->ibmr.handle == k->handle && !m->imported && sv_pd(m->ibmr.pd)->pd == k->pd;
}

SV_EXPORT struct ibv_mr *ibv_import_mr(struct ibv_pd *pd, uint32_t mr_handle)
{
    if (!sv_live_is(pd, SV_K_PD)) {
        errno = EINVAL;
        return NULL;
    }
    /* an MR of the PD this one is, or imports */
    struct mr_key k = {sv_pd(pd)->pd, mr_handle};
    const struct ibv_mr *orig = sv_live_find(SV_K_MR, mr_match, &k);
    if (!orig) {
        errno = ENOENT;
        return NULL;
    }
    struct sv_mr *m = calloc(1, sizeof(*m));
    if (!m) {
        errno = ENOMEM;
        return NULL;
    }
    const struct sv_mr *o = sr_container_of(orig, struct sv_mr, ibmr);
    m->ibmr = o->ibmr;
    m->ibmr.context = pd->context;
    m->ibmr.pd = pd;
    m->mr = o->mr;
    m->access = o->access;
    m->iova = o->iova;
    m->imported = true;
    sv_live_add(&m->ibmr, SV_K_MR);
    return &m->ibmr;
}

SV_EXPORT void ibv_unimport_mr(struct ibv_mr *mr)
{
    if (!sv_live_is(mr, SV_K_MR))
        return;
    struct sv_mr *m = sr_container_of(mr, struct sv_mr, ibmr);
    if (!m->imported)
        return;
    sv_live_del(mr);
    free(m);
}

SV_EXPORT int ibv_query_ece(struct ibv_qp *qp, struct ibv_ece *ece)
{
    (void)qp, (void)ece;
    return EOPNOTSUPP;
}
SV_EXPORT int ibv_set_ece(struct ibv_qp *qp, struct ibv_ece *ece)
{
    (void)qp, (void)ece;
    return EOPNOTSUPP;
}

/* Data lands in order: the responder writes packets in PSN order. */
SV_EXPORT int ibv_query_qp_data_in_order(struct ibv_qp *qp, enum ibv_wr_opcode op, uint32_t flags)
{
    (void)qp, (void)op, (void)flags;
    return 1;
}

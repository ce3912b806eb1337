/* misc.c: the rest of libibverbs' exported surface: kernel-structure
 * copies that librdmacm imports, device/object import (not applicable
 * without a kernel device), ECE, and the IBVERBS_PRIVATE_34 symbols that
 * clients import. Unsupported calls fail with EOPNOTSUPP. */
#include "sv.h"

#include <errno.h>
#include <infiniband/sa.h>
#include <rdma/ib_user_sa.h>
#include <rdma/ib_user_verbs.h>

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

/* Import/export of kernel objects between processes needs a kernel device. */
SV_EXPORT struct ibv_context *ibv_import_device(int cmd_fd)
{
    (void)cmd_fd;
    errno = EOPNOTSUPP;
    return NULL;
}
SV_EXPORT struct ibv_pd *ibv_import_pd(struct ibv_context *context, uint32_t pd_handle)
{
    (void)context, (void)pd_handle;
    errno = EOPNOTSUPP;
    return NULL;
}
SV_EXPORT void ibv_unimport_pd(struct ibv_pd *pd)
{
    (void)pd;
}
SV_EXPORT struct ibv_mr *ibv_import_mr(struct ibv_pd *pd, uint32_t mr_handle)
{
    (void)pd, (void)mr_handle;
    errno = EOPNOTSUPP;
    return NULL;
}
SV_EXPORT void ibv_unimport_mr(struct ibv_mr *mr)
{
    (void)mr;
}
SV_EXPORT struct ibv_dm *ibv_import_dm(struct ibv_context *context, uint32_t dm_handle)
{
    (void)context, (void)dm_handle;
    errno = EOPNOTSUPP;
    return NULL;
}
SV_EXPORT void ibv_unimport_dm(struct ibv_dm *dm)
{
    (void)dm;
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

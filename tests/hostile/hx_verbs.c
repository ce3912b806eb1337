/* hx_verbs.c: see hx_verbs.h. */
#include "hx_verbs.h"

#include <string.h>

int hx_qp_init(struct ibv_qp *qp, int access)
{
    struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT, .port_num = 1, .qp_access_flags = access};
    return ibv_modify_qp(qp, &a,
                         IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
}

int hx_qp_connect(struct ibv_qp *qp, const struct hx_conn *c)
{
    int err = hx_qp_init(qp, c->access);
    if (err)
        return err;
    struct ibv_qp_attr a = {
        .qp_state = IBV_QPS_RTR,
        .path_mtu = c->mtu,
        .dest_qp_num = c->dqpn,
        .rq_psn = c->rq_psn,
        .max_dest_rd_atomic = c->rd_atomic,
        .min_rnr_timer = c->rnr_timer,
        .ah_attr = {.is_global = 1, .port_num = 1, .grh = {.hop_limit = 64}},
    };
    memcpy(a.ah_attr.grh.dgid.raw, c->dgid, 16);
    err = ibv_modify_qp(qp, &a,
                        IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                            IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
    if (err)
        return err;
    memset(&a, 0, sizeof(a));
    a.qp_state = IBV_QPS_RTS;
    a.timeout = c->timeout;
    a.retry_cnt = 7;
    a.rnr_retry = 7;
    a.sq_psn = c->sq_psn;
    a.max_rd_atomic = c->rd_atomic;
    return ibv_modify_qp(qp, &a,
                         IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                             IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
}

/* efa_stubs.c: the stand-in libefa.so.1. Every function Debian 12's
 * libefa.so.1 (rdma-core 44) exports, each answering as rdma-core's does
 * for a device that is not an EFA one (EOPNOTSUPP). libfabric links it
 * directly (its efa provider) and perftest for -c SRD. Versions come from
 * libefa.map. */
#include <infiniband/efadv.h>

#include "sv_stub.h"

SV_STUB_NULL(struct efadv_cq *, efadv_cq_from_ibv_cq_ex, struct ibv_cq_ex *ibvcqx)
SV_STUB_NULL(struct ibv_cq_ex *, efadv_create_cq, struct ibv_context *ibvctx,
             struct ibv_cq_init_attr_ex *attr_ex, struct efadv_cq_init_attr *efa_attr,
             uint32_t inlen)
SV_STUB_NULL(struct ibv_qp *, efadv_create_driver_qp, struct ibv_pd *ibvpd,
             struct ibv_qp_init_attr *attr, uint32_t driver_qp_type)
SV_STUB_NULL(struct ibv_qp *, efadv_create_qp_ex, struct ibv_context *ibvctx,
             struct ibv_qp_init_attr_ex *attr_ex, struct efadv_qp_init_attr *efa_attr,
             uint32_t inlen)
SV_STUB_ERR(int, efadv_query_ah, struct ibv_ah *ibvah, struct efadv_ah_attr *attr, uint32_t inlen)
SV_STUB_ERR(int, efadv_query_device, struct ibv_context *ibvctx, struct efadv_device_attr *attr,
            uint32_t inlen)

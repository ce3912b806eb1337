/* priv.c: the private interface softrdma's librdmacm uses (version node
 * SOFTRDMA_PRIVATE_1). No public verbs program can reach a QP with QPN 1,
 * yet the communication manager's MADs go to and from QP1 (IBA 12.11, 13.5.1):
 * this turns a UD QP the CM created through ordinary verbs into that QP. */
#include <errno.h>

#include "softrdma_priv.h"
#include "sv.h"

SV_EXPORT int softrdma_priv_make_gsi_qp(struct ibv_qp *qp)
{
    if (!qp || qp->qp_type != IBV_QPT_UD || qp->state != IBV_QPS_RESET)
        return EINVAL;
    struct sr_nic *nic = sv_ctx(qp->context)->nic;
    sr_nic_lock(nic);
    int err = sr_qp_make_gsi(sv_qp(qp)->qp);
    if (!err)
        qp->qp_num = sr_qp_num(sv_qp(qp)->qp);
    sr_nic_unlock(nic);
    return err ? sv_errno(err) : 0;
}

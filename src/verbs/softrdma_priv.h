/* softrdma_priv.h: libibverbs' private interface to softrdma's own
 * librdmacm (version node SOFTRDMA_PRIVATE_1, defined in priv.c). One
 * header for the definition and its caller, so the compiler holds both to
 * one prototype. No other program may rely on it. */
#ifndef SOFTRDMA_PRIV_H
#define SOFTRDMA_PRIV_H

#include <infiniband/verbs.h>

/* qp: a UD QP in RESET on a softrdma context; it becomes the device's GSI
 * QP (QPN 1). Returns 0 or a positive errno (EINVAL: not such a QP;
 * EBUSY: the device has its GSI QP already). */
int softrdma_priv_make_gsi_qp(struct ibv_qp *qp);

#endif

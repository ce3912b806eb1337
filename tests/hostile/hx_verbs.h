/* hx_verbs.h: the QP set-up the hostile tests' verbs programs share
 * (victim.c, exhaustion.c), on the public verbs API. */
#ifndef HX_VERBS_H
#define HX_VERBS_H

#include <infiniband/verbs.h>
#include <stdint.h>

/* RESET -> INIT with port 1 and these access flags. */
int hx_qp_init(struct ibv_qp *qp, int access);

struct hx_conn {
    int access;
    enum ibv_mtu mtu;
    const uint8_t *dgid; /* 16 bytes */
    uint32_t dqpn, rq_psn, sq_psn;
    uint8_t timeout, rd_atomic, rnr_timer; /* retry_cnt and rnr_retry are 7 */
};
/* RESET or INIT -> RTR -> RTS as c says. 0, or the failing modify's error
 * (a packet may move the QP to Error between two steps). */
int hx_qp_connect(struct ibv_qp *qp, const struct hx_conn *c);

#endif

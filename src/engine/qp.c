/* qp.c: queue pairs: creation, the state machine of IBA 10.3.1 with the
 * attribute masks verbs' modify_qp requires per transition, posting work,
 * completing it in order and flushing it when the QP enters Error. */
#include "engine_int.h"

#include <stdlib.h>

int sr_rq_post(struct sr_rq *rq, const struct sr_recv_wr *wr);
void sr_engine_deactivate(struct sr_engine *e, struct sr_qp *qp);

static const char *const qp_state_names[] = {"RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR"};

const char *sr_qp_state_name(enum sr_qp_state s)
{
    return (unsigned)s < SR_ARRAY_SIZE(qp_state_names) ? qp_state_names[s] : "?";
}

const char *sr_wc_status_name(enum sr_wc_status s)
{
    switch (s) {
    case SR_WC_SUCCESS:
        return "SUCCESS";
    case SR_WC_LOC_LEN_ERR:
        return "LOC_LEN_ERR";
    case SR_WC_LOC_QP_OP_ERR:
        return "LOC_QP_OP_ERR";
    case SR_WC_LOC_PROT_ERR:
        return "LOC_PROT_ERR";
    case SR_WC_WR_FLUSH_ERR:
        return "WR_FLUSH_ERR";
    case SR_WC_MW_BIND_ERR:
        return "MW_BIND_ERR";
    case SR_WC_BAD_RESP_ERR:
        return "BAD_RESP_ERR";
    case SR_WC_LOC_ACCESS_ERR:
        return "LOC_ACCESS_ERR";
    case SR_WC_REM_INV_REQ_ERR:
        return "REM_INV_REQ_ERR";
    case SR_WC_REM_ACCESS_ERR:
        return "REM_ACCESS_ERR";
    case SR_WC_REM_OP_ERR:
        return "REM_OP_ERR";
    case SR_WC_RETRY_EXC_ERR:
        return "RETRY_EXC_ERR";
    case SR_WC_RNR_RETRY_EXC_ERR:
        return "RNR_RETRY_EXC_ERR";
    case SR_WC_FATAL_ERR:
        return "FATAL_ERR";
    case SR_WC_GENERAL_ERR:
        return "GENERAL_ERR";
    }
    return "?";
}

struct sr_qp *sr_qp_lookup(struct sr_engine *e, uint32_t qpn)
{
    if (qpn == SR_QPN_GSI)
        return e->gsi;
    if (qpn < SR_QPN_BASE || qpn - SR_QPN_BASE >= e->cfg.max_qp)
        return NULL;
    return e->qps[qpn - SR_QPN_BASE];
}

struct sr_swqe *sr_sq_at(struct sr_qp *qp, uint32_t idx)
{
    return &qp->sq[idx % qp->sq_cap];
}
uint32_t sr_qp_num(const struct sr_qp *qp)
{
    return qp->qpn;
}
void sr_qp_set_user(struct sr_qp *qp, void *user)
{
    qp->user = user;
}
void *sr_qp_user(const struct sr_qp *qp)
{
    return qp->user;
}

uint32_t sr_qp_pmtu(const struct sr_qp *qp)
{
    return qp->attr.path_mtu ? qp->attr.path_mtu : SR_MAX_PMTU;
}

bool sr_qp_can_send(const struct sr_qp *qp)
{
    return qp->attr.qp_state == SR_QPS_RTS;
}

static void qp_free_bufs(struct sr_qp *qp)
{
    sr_ooo_free(qp);
    sr_sack_free(qp);
    sr_readsel_free(qp);
    free(qp->resp.rwqe_buf);
    sr_paths_qp_free(qp);
    sr_rq_fini(&qp->rq);
    free(qp->sq_inline);
    free(qp->sq_sge);
    sr_ring_free(&qp->alloc, qp->sq, SR_ALLOC_QP, qp->sq_custom);
    qp->resp.rwqe_buf = NULL;
    qp->sq_inline = NULL;
    qp->sq_sge = NULL;
    qp->sq = NULL;
}

int sr_qp_create(struct sr_pd *pd, const struct sr_qp_init_attr *ia, struct sr_qp **out)
{
    const struct sr_qp_cap *cap = &ia->cap;
    bool xrc_recv = ia->qp_type == SR_QPT_XRC_RECV;
    bool xrc_send = ia->qp_type == SR_QPT_XRC_SEND;
    if (ia->qp_type != SR_QPT_RC && ia->qp_type != SR_QPT_UC && ia->qp_type != SR_QPT_UD &&
        !xrc_recv && !xrc_send)
        return SR_ERR_NOTSUP;
    /* An XRC target has no PD, CQs or queues of its own: its domain's
     * SRQs receive, and their PDs and CQs apply. */
    if (xrc_recv ? !ia->xrcd : !pd)
        return SR_ERR_INVAL;
    struct sr_engine *e = xrc_recv ? ia->xrcd->eng : pd->eng;
    if (!xrc_recv && (!ia->send_cq || (!ia->recv_cq && !ia->srq && !xrc_send)))
        return SR_ERR_INVAL;
    if (cap->max_send_wr > e->cfg.max_qp_wr || cap->max_recv_wr > e->cfg.max_qp_wr ||
        cap->max_send_sge > SR_MAX_SGE || cap->max_recv_sge > SR_MAX_SGE ||
        cap->max_inline_data > SR_MAX_INLINE)
        return SR_ERR_INVAL;
    if (ia->srq && (ia->srq->pd->eng != e || ia->srq->xrcd || xrc_send || xrc_recv))
        return SR_ERR_INVAL;
    if (e->qp_cnt >= e->cfg.max_qp && e->zombies) {
        /* a lingering QP gives its slot up to a live one */
        for (uint32_t i = 0; i < e->cfg.max_qp; i++)
            if (e->qps[i] && e->qps[i]->zombie) {
                sr_qp_destroy(e->qps[i]);
                break;
            }
    }
    if (e->qp_cnt >= e->cfg.max_qp)
        return SR_ERR_LIMIT;

    struct sr_qp *qp = calloc(1, sizeof(*qp));
    if (!qp)
        return SR_ERR_NOMEM;
    qp->eng = e;
    qp->pd = pd;
    qp->type = ia->qp_type;
    qp->send_cq = xrc_recv ? NULL : ia->send_cq;
    qp->recv_cq = xrc_recv ? NULL : ia->recv_cq ? ia->recv_cq : ia->send_cq;
    qp->srq = ia->srq;
    qp->xrcd = xrc_recv ? ia->xrcd : NULL;
    qp->sq_sig_all = ia->sq_sig_all;
    qp->attr.cap = *cap;
    if (qp->attr.cap.max_send_sge == 0)
        qp->attr.cap.max_send_sge = 1;
    /* Inline data may fill the room a WQE's gather list takes (16 bytes an
     * SGE), as rxe reports it: a QP asked for no inline data still takes
     * a small inline send (librdmacm's rdma_xclient relies on it). */
    uint32_t sge_room = qp->attr.cap.max_send_sge * 16u;
    if (!xrc_recv && qp->attr.cap.max_inline_data < sge_room)
        qp->attr.cap.max_inline_data = sge_room < SR_MAX_INLINE ? sge_room : SR_MAX_INLINE;
    cap = &qp->attr.cap;
    if (qp->attr.cap.max_recv_sge == 0)
        qp->attr.cap.max_recv_sge = 1;
    qp->attr.qp_state = SR_QPS_RESET;
    qp->attr.path_mtu = e->cfg.port_mtu;
    qp->attr.port_num = 1;

    qp->sq_cap = cap->max_send_wr ? cap->max_send_wr : 1;
    if (ia->alloc)
        qp->alloc = *ia->alloc;
    qp->sq = sr_ring_alloc(&qp->alloc, qp->sq_cap * sizeof(*qp->sq), SR_ALLOC_QP, &qp->sq_custom);
    qp->sq_sge = calloc((size_t)qp->sq_cap * qp->attr.cap.max_send_sge, sizeof(*qp->sq_sge));
    if (cap->max_inline_data)
        qp->sq_inline = malloc((size_t)qp->sq_cap * cap->max_inline_data);
    if (!qp->sq || !qp->sq_sge || (cap->max_inline_data && !qp->sq_inline))
        goto err_free;
    for (uint32_t i = 0; i < qp->sq_cap; i++) {
        qp->sq[i].sge = qp->sq_sge + (size_t)i * qp->attr.cap.max_send_sge;
        qp->sq[i].inline_buf =
            qp->sq_inline ? qp->sq_inline + (size_t)i * cap->max_inline_data : NULL;
    }
    if (!qp->srq && !xrc_recv && !xrc_send &&
        sr_rq_init(&qp->rq, cap->max_recv_wr, qp->attr.cap.max_recv_sge, &qp->alloc, SR_ALLOC_QP))
        goto err_free;
    /* XRC targets fill WQEs of whichever SRQ a message names */
    uint32_t rq_sge = xrc_recv  ? SR_MAX_SGE
                      : qp->srq ? qp->srq->rq.max_sge
                                : qp->attr.cap.max_recv_sge;
    qp->resp.rwqe_buf = calloc(1, sizeof(struct sr_rwqe) + rq_sge * sizeof(struct sr_sge));
    if (!qp->resp.rwqe_buf)
        goto err_free;

    /* QPN: the first free slot from a rotating hint, so a destroyed QP's
     * number is not reused at once (late packets miss). */
    uint32_t idx = e->qp_hint;
    for (uint32_t n = 0; n < e->cfg.max_qp && e->qps[idx]; n++)
        idx = (idx + 1) % e->cfg.max_qp;
    e->qps[idx] = qp;
    e->qp_hint = (idx + 1) % e->cfg.max_qp;
    e->qp_cnt++;
    qp->qpn = SR_QPN_BASE + idx;
    qp->src_port = (uint16_t)(0xc000 | (qp->qpn & 0x3fff));
    qp->comp.deadline = SR_NO_DEADLINE;
    sr_cong_init(qp, e->now_ns);
    if (pd)
        pd->refcnt++;
    if (qp->send_cq) {
        qp->send_cq->refcnt++;
        qp->recv_cq->refcnt++;
    }
    if (qp->srq)
        qp->srq->refcnt++;
    if (qp->xrcd)
        qp->xrcd->refcnt++;
    *out = qp;
    return 0;

err_free:
    qp_free_bufs(qp);
    free(qp);
    return SR_ERR_NOMEM;
}

/* Drop every reference the QP holds on other objects. */
static void qp_release_refs(struct sr_qp *qp)
{
    if (qp->mw_cnt)
        sr_mw_qp_gone(qp); /* its type 2 windows can never be used again */
    if (qp->pd)
        qp->pd->refcnt--;
    if (qp->send_cq) {
        qp->send_cq->refcnt--;
        qp->recv_cq->refcnt--;
    }
    if (qp->srq)
        qp->srq->refcnt--;
    if (qp->xrcd)
        qp->xrcd->refcnt--;
    qp->pd = NULL;
    qp->send_cq = qp->recv_cq = NULL;
    qp->srq = NULL;
    qp->xrcd = NULL;
}

int sr_qp_make_gsi(struct sr_qp *qp)
{
    struct sr_engine *e = qp->eng;
    if (qp->type != SR_QPT_UD || qp->attr.qp_state != SR_QPS_RESET || qp->qpn == SR_QPN_GSI)
        return SR_ERR_INVAL;
    if (e->gsi)
        return SR_ERR_BUSY;
    e->qps[qp->qpn - SR_QPN_BASE] = NULL;
    qp->qpn = SR_QPN_GSI;
    qp->src_port = (uint16_t)(0xc000 | SR_QPN_GSI);
    e->gsi = qp;
    return 0;
}

int sr_qp_destroy_linger(struct sr_qp *qp, uint64_t now_ns, uint64_t linger_ns)
{
    qp->eng->now_ns = now_ns;
    enum sr_qp_state s = qp->attr.qp_state;
    bool heard = qp->resp.epsn != qp->attr.rq_psn; /* it has acknowledged something */
    if (!linger_ns || qp->zombie || !sr_qp_reliable(qp) || s < SR_QPS_RTR || s == SR_QPS_ERR ||
        !heard)
        return sr_qp_destroy(qp);
    struct sr_engine *e = qp->eng;
    sr_resp_ack_first(qp, SR_ACK_EV_RESPONSE, now_ns);
    qp_release_refs(qp);
    /* nothing of the requester survives: no completions, no sends */
    qp->sq_head = qp->sq_tail = qp->req.cur = 0;
    /* Rings from the application's allocator go back now, while whoever
     * lent them (a parent domain) still exists; a lingering QP only
     * re-acknowledges, it needs neither. */
    if (qp->sq_custom || qp->rq.custom) {
        sr_ring_free(&qp->alloc, qp->sq, SR_ALLOC_QP, qp->sq_custom);
        qp->sq = NULL;
        qp->sq_custom = false;
        sr_rq_fini(&qp->rq);
    }
    qp->req.rnr_wait = false;
    qp->comp.deadline = SR_NO_DEADLINE;
    qp->comp.probe_at = 0;
    qp->resp.have_rwqe = false;
    qp->resp.msg = 0;
    sr_ooo_free(qp); /* a lingering QP only re-acknowledges */
    qp->user = NULL;
    qp->zombie = true;
    qp->zombie_until = now_ns + linger_ns;
    e->zombies++;
    sr_engine_activate(e, qp);
    return 0;
}

uint32_t sr_engine_zombies(const struct sr_engine *e)
{
    return e->zombies;
}

int sr_qp_destroy(struct sr_qp *qp)
{
    struct sr_engine *e = qp->eng;
    sr_engine_deactivate(e, qp);
    if (qp->qpn == SR_QPN_GSI)
        e->gsi = NULL;
    else
        e->qps[qp->qpn - SR_QPN_BASE] = NULL;
    e->qp_cnt--;
    if (qp->zombie)
        e->zombies--;
    qp_release_refs(qp);
    qp_free_bufs(qp);
    free(qp);
    return 0;
}

/* ---- state machine (IBA 10.3.1, Table 91-style masks per QP type) ---- */
enum { T_RC, T_UC, T_UD, T_XI, T_XT, T_NUM }; /* XI: XRC initiator, XT: XRC target */

struct transition {
    uint32_t req[T_NUM];
    uint32_t opt[T_NUM];
    bool valid;
};

#define M(x) SR_QP_##x
/* Per-transport rows. XRC initiators connect like UC (no responder
 * resources) and run like RC; XRC targets connect like RC and need only a
 * PSN and timeout to reach RTS (IB kernel verbs' qp_state_table). */
#define RC_RTS_OPT                                                                                 \
    (M(CUR_STATE) | M(ALT_PATH) | M(ACCESS_FLAGS) | M(MIN_RNR_TIMER) | M(PATH_MIG_STATE))
#define UC_RTS_OPT (M(CUR_STATE) | M(ALT_PATH) | M(ACCESS_FLAGS) | M(PATH_MIG_STATE))
#define INIT_ATTRS (M(PKEY_INDEX) | M(PORT) | M(ACCESS_FLAGS))
#define CONNECT    (M(AV) | M(PATH_MTU) | M(DEST_QPN) | M(RQ_PSN))
#define RESPONDER  (M(MAX_DEST_RD_ATOMIC) | M(MIN_RNR_TIMER))
#define REQUESTER  (M(TIMEOUT) | M(RETRY_CNT) | M(RNR_RETRY) | M(MAX_QP_RD_ATOMIC))
static const struct transition transitions[7][7] =
    {
        [SR_QPS_RESET][SR_QPS_INIT] =
            {
                .valid = true,
                .req = {[T_RC] = INIT_ATTRS,
                        [T_UC] = INIT_ATTRS,
                        [T_XI] = INIT_ATTRS,
                        [T_XT] = INIT_ATTRS,
                        [T_UD] = M(PKEY_INDEX) | M(PORT) | M(QKEY)},
            },
        [SR_QPS_INIT][SR_QPS_INIT] =
            {
                .valid = true,
                .opt = {[T_RC] = INIT_ATTRS,
                        [T_UC] = INIT_ATTRS,
                        [T_XI] = INIT_ATTRS,
                        [T_XT] = INIT_ATTRS,
                        [T_UD] = M(PKEY_INDEX) | M(PORT) | M(QKEY)},
            },
        [SR_QPS_INIT][SR_QPS_RTR] =
            {
                .valid = true,
                .req = {[T_RC] = CONNECT | RESPONDER,
                        [T_UC] = CONNECT,
                        [T_XI] = CONNECT,
                        [T_XT] = CONNECT | RESPONDER},
                .opt = {[T_RC] = M(ALT_PATH) | M(ACCESS_FLAGS) | M(PKEY_INDEX),
                        [T_UC] = M(ALT_PATH) | M(ACCESS_FLAGS) | M(PKEY_INDEX),
                        [T_XI] = M(ALT_PATH) | M(ACCESS_FLAGS) | M(PKEY_INDEX),
                        [T_XT] = M(ALT_PATH) | M(ACCESS_FLAGS) | M(PKEY_INDEX),
                        [T_UD] = M(PKEY_INDEX) | M(QKEY)},
            },
        [SR_QPS_RTR][SR_QPS_RTS] =
            {
                .valid = true,
                .req = {[T_RC] = M(SQ_PSN) | REQUESTER,
                        [T_UC] = M(SQ_PSN),
                        [T_UD] = M(SQ_PSN),
                        [T_XI] = M(SQ_PSN) | REQUESTER,
                        [T_XT] = M(SQ_PSN) | M(TIMEOUT)},
                .opt = {[T_RC] = RC_RTS_OPT,
                        [T_UC] = UC_RTS_OPT,
                        [T_UD] = M(CUR_STATE) | M(QKEY),
                        [T_XI] = RC_RTS_OPT,
                        [T_XT] = RC_RTS_OPT},
            },
        [SR_QPS_RTS][SR_QPS_RTS] =
            {
                .valid = true,
                .opt = {[T_RC] = RC_RTS_OPT,
                        [T_UC] = UC_RTS_OPT,
                        [T_UD] = M(CUR_STATE) | M(QKEY),
                        [T_XI] = RC_RTS_OPT,
                        [T_XT] = RC_RTS_OPT},
            },
        [SR_QPS_RTS][SR_QPS_SQD] =
            {
                .valid = true,
                .opt = {[T_RC] = M(EN_SQD_ASYNC_NOTIFY),
                        [T_UC] = M(EN_SQD_ASYNC_NOTIFY),
                        [T_UD] = M(EN_SQD_ASYNC_NOTIFY),
                        [T_XI] = M(EN_SQD_ASYNC_NOTIFY),
                        [T_XT] = M(EN_SQD_ASYNC_NOTIFY)},
            },
        [SR_QPS_SQD][SR_QPS_RTS] =
            {
                .valid = true,
                .opt = {[T_RC] = RC_RTS_OPT,
                        [T_UC] = UC_RTS_OPT,
                        [T_UD] = M(CUR_STATE) | M(QKEY),
                        [T_XI] = RC_RTS_OPT,
                        [T_XT] = RC_RTS_OPT},
            },
        [SR_QPS_SQD][SR_QPS_SQD] =
            {
                .valid = true,
                .opt = {[T_RC] = M(PKEY_INDEX) | M(QKEY) | M(AV) | M(ALT_PATH) | M(ACCESS_FLAGS) |
                                 REQUESTER | RESPONDER | M(PATH_MIG_STATE),
                        [T_XI] = M(PKEY_INDEX) | M(AV) | M(ALT_PATH) | M(ACCESS_FLAGS) | REQUESTER |
                                 M(PATH_MIG_STATE),
                        [T_XT] = M(PKEY_INDEX) | M(AV) | M(ALT_PATH) | M(ACCESS_FLAGS) |
                                 M(TIMEOUT) | RESPONDER | M(PATH_MIG_STATE),
                        [T_UC] = M(PKEY_INDEX) | M(AV) | M(ALT_PATH) | M(ACCESS_FLAGS) |
                                 M(PATH_MIG_STATE),
                        [T_UD] = M(PKEY_INDEX) | M(QKEY)},
            },
        [SR_QPS_SQE][SR_QPS_RTS] =
            {
                .valid = true, /* UC and UD only: see modify */
                .opt = {[T_UC] = M(CUR_STATE) | M(ACCESS_FLAGS), [T_UD] = M(CUR_STATE) | M(QKEY)},
            },
};
#undef M

static int type_index(enum sr_qp_type t)
{
    switch (t) {
    case SR_QPT_RC:
        return T_RC;
    case SR_QPT_UC:
        return T_UC;
    case SR_QPT_XRC_SEND:
        return T_XI;
    case SR_QPT_XRC_RECV:
        return T_XT;
    default:
        return T_UD;
    }
}

static bool valid_mtu(uint32_t mtu)
{
    return mtu == 256 || mtu == 512 || mtu == 1024 || mtu == 2048 || mtu == 4096;
}

static void flush_rq(struct sr_qp *qp)
{
    if (qp->srq || !qp->rq.buf)
        return; /* SRQ WQEs belong to the SRQ; XRC QPs have no receive queue */
    struct sr_rwqe *w;
    while ((w = sr_rq_peek(&qp->rq))) {
        struct sr_wc wc = {.wr_id = w->wr_id,
                           .status = SR_WC_WR_FLUSH_ERR,
                           .opcode = SR_WC_RECV,
                           .qp_num = qp->qpn};
        sr_cq_push(qp->recv_cq, &wc, false);
        sr_rq_pop(&qp->rq);
    }
}

static enum sr_wc_opcode wc_opcode(enum sr_wr_opcode op)
{
    switch (op) {
    case SR_WR_RDMA_WRITE:
    case SR_WR_RDMA_WRITE_WITH_IMM:
        return SR_WC_RDMA_WRITE;
    case SR_WR_RDMA_READ:
        return SR_WC_RDMA_READ;
    case SR_WR_ATOMIC_CMP_AND_SWP:
        return SR_WC_COMP_SWAP;
    case SR_WR_ATOMIC_FETCH_AND_ADD:
        return SR_WC_FETCH_ADD;
    case SR_WR_BIND_MW:
        return SR_WC_BIND_MW;
    case SR_WR_LOCAL_INV:
        return SR_WC_LOCAL_INV;
    case SR_WR_ATOMIC_WRITE:
        return SR_WC_ATOMIC_WRITE;
    default:
        return SR_WC_SEND;
    }
}

static void complete_swqe(struct sr_qp *qp, struct sr_swqe *w)
{
    if (!w->signaled && w->status == SR_WC_SUCCESS)
        return;
    struct sr_wc wc = {
        .wr_id = w->wr.wr_id,
        .status = w->status,
        .opcode = wc_opcode(w->wr.opcode),
        .qp_num = qp->qpn,
        .byte_len = w->status == SR_WC_SUCCESS ? w->total_len : 0,
    };
    if (w->wr.opcode == SR_WR_ATOMIC_CMP_AND_SWP || w->wr.opcode == SR_WR_ATOMIC_FETCH_AND_ADD)
        wc.byte_len = w->status == SR_WC_SUCCESS ? 8 : 0;
    sr_cq_push(qp->send_cq, &wc, false);
}

void sr_qp_retire(struct sr_qp *qp)
{
    while (qp->sq_head != qp->sq_tail) {
        struct sr_swqe *w = sr_sq_at(qp, qp->sq_head);
        if (w->state != SWQE_DONE)
            break;
        complete_swqe(qp, w);
        qp->sq_head++;
    }
    /* SQD: the drain completes when nothing is outstanding (IBA 10.3.1.5). */
    if (qp->attr.qp_state == SR_QPS_SQD && qp->attr.sq_draining && qp->req.cur == qp->sq_head) {
        qp->attr.sq_draining = false;
        struct sr_engine *e = qp->eng;
        if (e->cfg.ops.async_event)
            e->cfg.ops.async_event(e->cfg.ops_ctx, SR_EVENT_SQ_DRAINED, qp);
    }
}

/* IBA 10.3.1.7 / 11.6.2: entering Error completes every outstanding work
 * request, those not already failed with WR_FLUSH_ERR. */
void sr_qp_to_error(struct sr_qp *qp)
{
    /* An ACK held back for coalescing covers messages already received
     * and completed here: it is owed before the QP goes quiet, or the
     * requester retries them until its retry count runs out. */
    if (qp->attr.qp_state == SR_QPS_RTS || qp->attr.qp_state == SR_QPS_RTR ||
        qp->attr.qp_state == SR_QPS_SQD)
        sr_resp_ack_first(qp, SR_ACK_EV_RESPONSE, qp->eng->now_ns);
    qp->attr.qp_state = SR_QPS_ERR;
    sr_resp_ack(qp, SR_ACK_EV_DROP, qp->eng->now_ns, 0); /* an errored QP sends nothing */
    while (qp->sq_head != qp->sq_tail) {
        struct sr_swqe *w = sr_sq_at(qp, qp->sq_head);
        if (w->state != SWQE_DONE || w->status == SR_WC_SUCCESS) {
            if (w->state != SWQE_DONE)
                w->status = SR_WC_WR_FLUSH_ERR;
            w->state = SWQE_DONE;
        }
        complete_swqe(qp, w);
        qp->sq_head++;
    }
    qp->req.cur = qp->sq_head;
    qp->req.rd_atomic = 0;
    qp->comp.deadline = SR_NO_DEADLINE;
    qp->comp.probe_at = 0;
    qp->req.rnr_wait = false;
    sr_ooo_free(qp);
    sr_sack_discard(qp);
    sr_readsel_free(qp); /* nothing is placed for a flushed WQE */
    flush_rq(qp);
    if (qp->srq) {
        struct sr_engine *e = qp->eng;
        if (e->cfg.ops.async_event) /* IBA 11.6.3.1: last WQE reached on an SRQ QP */
            e->cfg.ops.async_event(e->cfg.ops_ctx, SR_EVENT_QP_LAST_WQE_REACHED, qp);
    }
}

static void reset_qp(struct sr_qp *qp)
{
    sr_engine_deactivate(qp->eng, qp);
    /* A QP back in RESET starts afresh: its completions still queued
     * (flushed ones after an error, above all) leave its CQs, as
     * mlx5 and rdma-core's other providers clean them, so the next user of
     * the QP does not poll the previous life's. */
    if (qp->send_cq)
        sr_cq_clean(qp->send_cq, qp->qpn);
    if (qp->recv_cq && qp->recv_cq != qp->send_cq)
        sr_cq_clean(qp->recv_cq, qp->qpn);
    qp->sq_head = qp->sq_tail = 0;
    if (!qp->srq)
        qp->rq.head = qp->rq.count = 0;
    sr_ooo_free(qp);
    sr_sack_free(qp);
    sr_readsel_free(qp);
    memset(&qp->req, 0, sizeof(qp->req));
    memset(&qp->comp, 0, sizeof(qp->comp));
    qp->comp.deadline = SR_NO_DEADLINE;
    sr_cong_init(qp, qp->eng->now_ns);
    uint8_t *rbuf = qp->resp.rwqe_buf;
    memset(&qp->resp, 0, sizeof(qp->resp));
    qp->resp.rwqe_buf = rbuf;
    sr_paths_qp_free(qp); /* its PSNs and peer start over */
}

int sr_qp_modify(struct sr_qp *qp, const struct sr_qp_attr *a, uint32_t mask, uint64_t now_ns)
{
    qp->eng->now_ns = now_ns;
    enum sr_qp_state cur = qp->attr.qp_state;
    if ((mask & SR_QP_CUR_STATE) && a->cur_qp_state != cur)
        return SR_ERR_INVAL;
    enum sr_qp_state next = (mask & SR_QP_STATE) ? a->qp_state : cur;
    if ((unsigned)next > SR_QPS_ERR)
        return SR_ERR_INVAL;
    int t = type_index(qp->type);

    uint32_t req = 0, opt = 0;
    if (next == SR_QPS_RESET || next == SR_QPS_ERR) {
        /* any state -> RESET or ERR with the state alone */
        opt = SR_QP_CUR_STATE;
    } else {
        const struct transition *tr = &transitions[cur][next];
        if (!tr->valid || (cur == SR_QPS_SQE && sr_qp_reliable(qp)))
            return SR_ERR_INVAL;
        req = tr->req[t];
        opt = tr->opt[t];
    }
    uint32_t attrs = mask & ~(uint32_t)SR_QP_STATE;
    if ((attrs & req) != req || (attrs & ~(req | opt)))
        return SR_ERR_INVAL;

    /* Values. */
    if ((mask & SR_QP_PATH_MTU) && !valid_mtu(a->path_mtu))
        return SR_ERR_INVAL;
    if ((mask & SR_QP_PORT) && a->port_num != 1)
        return SR_ERR_INVAL;
    if ((mask & SR_QP_PKEY_INDEX) && a->pkey_index != 0)
        return SR_ERR_INVAL;
    if ((mask & SR_QP_RETRY_CNT) && a->retry_cnt > 7)
        return SR_ERR_INVAL;
    if ((mask & SR_QP_RNR_RETRY) && a->rnr_retry > 7)
        return SR_ERR_INVAL;
    if ((mask & SR_QP_MIN_RNR_TIMER) && a->min_rnr_timer > 31)
        return SR_ERR_INVAL;
    if ((mask & SR_QP_TIMEOUT) && a->timeout > 31)
        return SR_ERR_INVAL;
    if ((mask & SR_QP_MAX_QP_RD_ATOMIC) && a->max_rd_atomic > SR_MAX_RD_ATOMIC)
        return SR_ERR_INVAL;
    if ((mask & SR_QP_MAX_DEST_RD_ATOMIC) && a->max_dest_rd_atomic > SR_MAX_RD_ATOMIC)
        return SR_ERR_INVAL;
    if ((mask & SR_QP_DEST_QPN) && a->dest_qp_num > SR_PSN_MASK)
        return SR_ERR_INVAL;
    if ((mask & SR_QP_ACCESS_FLAGS) &&
        (a->qp_access_flags & ~(uint32_t)(SR_ACCESS_LOCAL_WRITE | SR_ACCESS_REMOTE_WRITE |
                                          SR_ACCESS_REMOTE_READ | SR_ACCESS_REMOTE_ATOMIC)))
        return SR_ERR_INVAL;

    struct sr_qp_attr *q = &qp->attr;
    if (mask & SR_QP_ACCESS_FLAGS)
        q->qp_access_flags = a->qp_access_flags;
    if (mask & SR_QP_PKEY_INDEX)
        q->pkey_index = a->pkey_index;
    if (mask & SR_QP_PORT)
        q->port_num = a->port_num;
    if (mask & SR_QP_QKEY)
        q->qkey = a->qkey;
    if (mask & SR_QP_AV)
        memcpy(q->dgid, a->dgid, 16);
    if (mask & SR_QP_PATH_MTU)
        q->path_mtu = a->path_mtu;
    if (mask & SR_QP_TIMEOUT)
        q->timeout = a->timeout;
    if (mask & SR_QP_RETRY_CNT)
        q->retry_cnt = a->retry_cnt;
    if (mask & SR_QP_RNR_RETRY)
        q->rnr_retry = a->rnr_retry;
    if (mask & SR_QP_RQ_PSN) {
        q->rq_psn = a->rq_psn & SR_PSN_MASK;
        qp->resp.epsn = q->rq_psn;
    }
    if (mask & SR_QP_SQ_PSN) {
        q->sq_psn = a->sq_psn & SR_PSN_MASK;
        qp->req.next_psn = qp->req.cur_psn = qp->req.max_sent = q->sq_psn;
        qp->comp.psn = q->sq_psn;
    }
    if (mask & SR_QP_MAX_QP_RD_ATOMIC)
        q->max_rd_atomic = a->max_rd_atomic;
    if (mask & SR_QP_MAX_DEST_RD_ATOMIC)
        q->max_dest_rd_atomic = a->max_dest_rd_atomic;
    if (mask & SR_QP_MIN_RNR_TIMER)
        q->min_rnr_timer = a->min_rnr_timer;
    if (mask & SR_QP_DEST_QPN)
        q->dest_qp_num = a->dest_qp_num;
    if (mask & SR_QP_EN_SQD_ASYNC_NOTIFY)
        q->sq_draining = true;

    if (next != cur || (mask & SR_QP_STATE)) {
        if (next == SR_QPS_RESET) {
            reset_qp(qp);
        } else if (next == SR_QPS_ERR && cur != SR_QPS_ERR) {
            sr_qp_to_error(qp);
        } else if (next == SR_QPS_RTS && cur == SR_QPS_RTR) {
            qp->comp.retry_left = q->retry_cnt;
            qp->comp.rnr_left = q->rnr_retry;
        }
        q->qp_state = next;
        if (next == SR_QPS_SQD)
            sr_qp_retire(qp); /* may complete the drain at once */
        if (next == SR_QPS_RTS && (cur == SR_QPS_SQD || cur == SR_QPS_SQE))
            sr_req_run(qp, now_ns);
    }
    return 0;
}

int sr_qp_query(const struct sr_qp *qp, struct sr_qp_attr *attr, struct sr_qp_init_attr *init)
{
    if (attr) {
        *attr = qp->attr;
        attr->cur_qp_state = qp->attr.qp_state;
    }
    if (init) {
        memset(init, 0, sizeof(*init));
        init->qp_type = qp->type;
        init->send_cq = qp->send_cq;
        init->recv_cq = qp->recv_cq;
        init->srq = qp->srq;
        init->cap = qp->attr.cap;
        init->sq_sig_all = qp->sq_sig_all;
    }
    return 0;
}

/* ---- posting ---- */
static bool opcode_allowed(enum sr_qp_type t, enum sr_wr_opcode op)
{
    switch (op) {
    case SR_WR_SEND:
    case SR_WR_SEND_WITH_IMM:
        return true;
    case SR_WR_RDMA_WRITE:
    case SR_WR_RDMA_WRITE_WITH_IMM:
        return t != SR_QPT_UD;
    case SR_WR_RDMA_READ:
    case SR_WR_ATOMIC_CMP_AND_SWP:
    case SR_WR_ATOMIC_FETCH_AND_ADD:
    case SR_WR_SEND_WITH_INV:
        return t == SR_QPT_RC || t == SR_QPT_XRC_SEND;
    case SR_WR_ATOMIC_WRITE:
        return t == SR_QPT_RC; /* IBA 1.5: an RC opcode only */
    case SR_WR_BIND_MW:
    case SR_WR_LOCAL_INV:
        /* windows open memory to RDMA, which UD does not carry */
        return t != SR_QPT_UD;
    default:
        return false;
    }
}

static bool wr_is_inline(const struct sr_send_wr *wr)
{
    return (wr->send_flags & SR_SEND_INLINE) && wr->opcode != SR_WR_RDMA_READ &&
           wr->opcode != SR_WR_ATOMIC_CMP_AND_SWP && wr->opcode != SR_WR_ATOMIC_FETCH_AND_ADD &&
           wr->opcode != SR_WR_ATOMIC_WRITE;
}

int sr_qp_send_check(const struct sr_qp *qp, const struct sr_send_wr *wr)
{
    enum sr_qp_state s = qp->attr.qp_state;
    /* verbs: posting needs RTS (or SQD/SQE/ERR, where work waits or flushes) */
    if (s < SR_QPS_RTS || qp->type == SR_QPT_XRC_RECV)
        return SR_ERR_INVAL;
    if (!opcode_allowed(qp->type, wr->opcode) || wr->num_sge > qp->attr.cap.max_send_sge ||
        (wr->num_sge && !wr->sg_list) || (wr->send_flags & ~(uint32_t)SR_SEND_KNOWN))
        return SR_ERR_INVAL;
    uint64_t total = 0;
    for (uint32_t i = 0; i < wr->num_sge; i++)
        total += wr->sg_list[i].length;
    if (wr_is_inline(wr) && total > qp->attr.cap.max_inline_data)
        return SR_ERR_INVAL;
    return 0;
}

uint32_t sr_qp_sq_free(const struct sr_qp *qp)
{
    return qp->sq_cap - (qp->sq_tail - qp->sq_head);
}

bool sr_qp_answer_due(const struct sr_qp *qp)
{
    return sr_qp_reliable(qp) &&
           (qp->attr.qp_state == SR_QPS_RTS || qp->attr.qp_state == SR_QPS_SQD) &&
           qp->comp.psn != qp->req.max_sent;
}

int sr_qp_post_send(struct sr_qp *qp, const struct sr_send_wr *wr, uint64_t now_ns)
{
    qp->eng->now_ns = now_ns;
    int err = sr_qp_send_check(qp, wr);
    if (err)
        return err;
    enum sr_qp_state s = qp->attr.qp_state;
    uint64_t total = 0;
    for (uint32_t i = 0; i < wr->num_sge; i++)
        total += wr->sg_list[i].length;
    if (wr->opcode == SR_WR_ATOMIC_WRITE)
        total = 8; /* its data is in the WR itself */
    bool is_inline = wr_is_inline(wr);
    if (qp->sq_tail - qp->sq_head == qp->sq_cap)
        return SR_ERR_NOMEM; /* verbs: ENOMEM when the send queue is full */

    struct sr_swqe *w = sr_sq_at(qp, qp->sq_tail);
    struct sr_sge *sge = w->sge;
    uint8_t *ibuf = w->inline_buf;
    w->wr = *wr;
    w->sge = sge;
    w->inline_buf = ibuf;
    if (wr->num_sge) /* a zero-length WR may carry no list at all */
        memcpy(sge, wr->sg_list, wr->num_sge * sizeof(*sge));
    w->wr.sg_list = sge;
    w->status = SR_WC_SUCCESS;
    w->state = SWQE_POSTED;
    w->shaped = w->write_only = false;
    w->signaled = qp->sq_sig_all || (wr->send_flags & SR_SEND_SIGNALED);
    w->total_len = total > UINT32_MAX ? UINT32_MAX : (uint32_t)total;
    if (is_inline) {
        /* IBA 11.4.1.1: inline data is captured at post time; the buffer
         * may be reused as soon as post returns. No lkey is involved. */
        uint32_t off = 0;
        for (uint32_t i = 0; i < wr->num_sge; i++) {
            memcpy(ibuf + off, (const void *)(uintptr_t)wr->sg_list[i].addr, wr->sg_list[i].length);
            off += wr->sg_list[i].length;
        }
    } else {
        w->wr.send_flags &= ~(uint32_t)SR_SEND_INLINE;
    }

    if (s == SR_QPS_ERR) {
        /* verbs: work posted to a QP in Error completes with a flush error */
        w->status = SR_WC_WR_FLUSH_ERR;
        w->state = SWQE_DONE;
        qp->sq_tail++;
        sr_qp_retire(qp);
        return 0;
    }
    w->first_psn = qp->req.next_psn;
    w->rq_msg = qp->req.rq_msgs;
    if (wr->opcode == SR_WR_SEND || wr->opcode == SR_WR_SEND_WITH_IMM ||
        wr->opcode == SR_WR_SEND_WITH_INV || wr->opcode == SR_WR_RDMA_WRITE_WITH_IMM)
        qp->req.rq_msgs++; /* each takes a receive WQE at the responder, in order */
    w->npkts = sr_swqe_npkts(qp, &w->wr, w->total_len);
    sr_bulk_shape(qp, w);
    qp->req.next_psn = sr_psn_add(qp->req.next_psn, w->npkts);
    qp->sq_tail++;
    if (s == SR_QPS_RTS)
        sr_req_run(qp, now_ns);
    return 0;
}

int sr_qp_post_recv(struct sr_qp *qp, const struct sr_recv_wr *wr)
{
    if (qp->srq || !qp->rq.buf)
        return SR_ERR_INVAL; /* receives go to the SRQ; XRC QPs have no receive queue */
    if (qp->attr.qp_state == SR_QPS_RESET)
        return SR_ERR_INVAL;
    if (wr->num_sge && !wr->sg_list)
        return SR_ERR_INVAL;
    int err = sr_rq_post(&qp->rq, wr);
    if (err)
        return err;
    if (qp->attr.qp_state == SR_QPS_ERR)
        flush_rq(qp);
    return 0;
}

void sr_qp_recv_complete(struct sr_qp *qp, struct sr_cq *cq, const struct sr_rwqe *rwqe,
                         enum sr_wc_status status, enum sr_wc_opcode op, uint32_t byte_len,
                         uint32_t imm, uint32_t flags, uint32_t src_qp, uint8_t sl, bool solicited)
{
    struct sr_wc wc = {
        .wr_id = rwqe->wr_id,
        .status = status,
        .opcode = op,
        .byte_len = status == SR_WC_SUCCESS ? byte_len : 0,
        .imm = imm,
        .qp_num = qp->qpn,
        .src_qp = src_qp,
        .wc_flags = flags,
        .sl = sl,
    };
    sr_cq_push(cq, &wc, solicited);
}

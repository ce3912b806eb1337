/* resp.c: the responder. Each incoming request packet walks an explicit
 * state machine (IBA 9.7.5.1 responder checks, in the spec's order): PSN,
 * duplicate handling, opcode sequence, QP access, receive resources (RNR),
 * length, R_Key, execution, acknowledgement; each failure is a state that
 * becomes the IBA NAK (RC) or a silent drop (UC, UD). UD and UC reuse the
 * same execution steps. */
#include "engine_int.h"

enum resp_state {
    RS_CHECK_PSN,
    RS_DUPLICATE,
    RS_CHECK_OP_SEQ,
    RS_CHECK_OP_VALID,
    RS_CHECK_RESOURCE,
    RS_CHECK_LENGTH,
    RS_CHECK_RKEY,
    RS_EXECUTE,
    RS_ACKNOWLEDGE,
    RS_DONE,
    RS_NAK_SEQ,
    RS_NAK_RNR,
    RS_ERR_INV_REQ,
    RS_ERR_ACCESS,
    RS_ERR_OP,
    RS_DROP,
};

static const char *const resp_state_names[] __attribute__((unused)) = {
    [RS_CHECK_PSN] = "CHECK_PSN",
    [RS_DUPLICATE] = "DUPLICATE",
    [RS_CHECK_OP_SEQ] = "CHECK_OP_SEQ",
    [RS_CHECK_OP_VALID] = "CHECK_OP_VALID",
    [RS_CHECK_RESOURCE] = "CHECK_RESOURCE",
    [RS_CHECK_LENGTH] = "CHECK_LENGTH",
    [RS_CHECK_RKEY] = "CHECK_RKEY",
    [RS_EXECUTE] = "EXECUTE",
    [RS_ACKNOWLEDGE] = "ACKNOWLEDGE",
    [RS_DONE] = "DONE",
    [RS_NAK_SEQ] = "NAK_SEQ",
    [RS_NAK_RNR] = "NAK_RNR",
    [RS_ERR_INV_REQ] = "ERR_INV_REQ",
    [RS_ERR_ACCESS] = "ERR_ACCESS",
    [RS_ERR_OP] = "ERR_OP",
    [RS_DROP] = "DROP",
};

struct resp_ctx {
    struct sr_qp *qp;
    const struct sr_pkt *pkt;
    const struct sr_opcode_info *info;
    int decode_err;
    const uint8_t *src_gid;
    uint64_t now;
    uint8_t *target;               /* host memory of the R_Key check */
    enum sr_wc_status rwqe_status; /* responder-side completion on error */
    struct sr_pd *pd;              /* protection domain of this request's memory */
    struct sr_srq *xsrq;           /* XRC target: the SRQ the XRCETH names */
};

static struct sr_srq *rwqe_srq(const struct resp_ctx *c)
{
    return c->xsrq ? c->xsrq : c->qp->srq;
}
static struct sr_rwqe *cur_rwqe(struct sr_qp *qp)
{
    return (struct sr_rwqe *)qp->resp.rwqe_buf;
}

/* ---- output ---- */
/* Responses travel on the requester's transport: RC, or XRC for targets. */
static uint8_t resp_base(const struct sr_qp *qp)
{
    return qp->type == SR_QPT_XRC_RECV ? SR_OP_XRC : SR_OP_RC;
}

static void emit_aeth(struct sr_qp *qp, uint8_t opcode, uint32_t psn, uint8_t syndrome,
                      uint64_t orig, uint32_t msn)
{
    struct sr_pkt p = {0};
    p.bth.opcode = opcode;
    p.bth.pkey = 0xffff;
    p.bth.dest_qp = qp->attr.dest_qp_num;
    p.bth.psn = psn;
    p.aeth.syndrome = syndrome;
    p.aeth.msn = msn & SR_PSN_MASK;
    p.atomic_orig = orig;
    sr_engine_tx(qp->eng, qp, &p, NULL, 0, qp->attr.dgid);
}

static void emit_ack(struct sr_qp *qp, uint32_t psn, uint32_t msn)
{
    if (sr_ooo_sack_due(qp)) {
        sr_ooo_ack_owed(qp); /* requests are kept past a hole: a SACK says which */
        return;
    }
    emit_aeth(qp, resp_base(qp) | SR_OP_ACK, psn, SR_AETH_ACK | SR_AETH_NO_CREDIT_LIMIT, 0, msn);
}

static void send_aeth(struct sr_qp *qp, uint8_t opcode, uint32_t psn, uint8_t syndrome,
                      uint64_t orig)
{
    /* a held ACK goes first: responses stay in PSN order */
    sr_resp_ack_first(qp, SR_ACK_EV_RESPONSE, qp->eng->now_ns);
    emit_aeth(qp, opcode, psn, syndrome, orig, qp->resp.msn);
}

static void send_ack(struct sr_qp *qp, uint32_t psn)
{
    sr_resp_ack_first(qp, SR_ACK_EV_RESPONSE, qp->eng->now_ns);
    emit_ack(qp, psn, qp->resp.msn);
}

enum sr_ack_verdict sr_resp_ack(struct sr_qp *qp, enum sr_ack_event ev, uint64_t now_ns,
                                uint64_t held_since)
{
    struct sr_ack_in in = {.ev = ev, .now_ns = now_ns, .held_since = held_since};
    struct sr_ack_out out;
    enum sr_ack_verdict v = sr_ack_decide(&qp->resp.ack, &qp->eng->ack, &in, &out);
    if (v == SR_ACK_SEND_NOW || v == SR_ACK_RIDE)
        emit_ack(qp, out.psn, out.msn);
    return v;
}

/* The acknowledgement an AckReq asks for: at once, or held back so that
 * it can travel with the reply the application is about to post (ack.c). */
static void acknowledge(struct resp_ctx *c)
{
    struct sr_qp *qp = c->qp;
    struct sr_ack_in in = {.ev = SR_ACK_EV_ACKREQ,
                           .now_ns = c->now,
                           .timeout_ns = sr_timeout_ns(qp->attr.timeout),
                           .psn = c->pkt->bth.psn,
                           .msn = qp->resp.msn,
                           .end = c->info->flags & (SR_OPF_LAST | SR_OPF_ONLY)};
    struct sr_ack_out out;
    switch (sr_ack_decide(&qp->resp.ack, &qp->eng->ack, &in, &out)) {
    case SR_ACK_SEND_NOW:
    case SR_ACK_RIDE:
        emit_ack(qp, out.psn, out.msn);
        break;
    case SR_ACK_HOLD:
        sr_engine_activate(qp->eng, qp); /* its deadline: sr_qp_deadline */
        break;
    case SR_ACK_NONE:
        break;
    }
}

static void send_nak(struct sr_qp *qp, uint32_t psn, uint8_t code)
{
    send_aeth(qp, resp_base(qp) | SR_OP_ACK, psn, SR_AETH_NAK | code, 0);
}

/* READ responses for [va, va+len) starting at psn (IBA 9.7.5.1.6):
 * FIRST/LAST/ONLY carry an AETH, payload comes straight from memory. */
static void send_read_responses(struct sr_qp *qp, const uint8_t *src, uint32_t len, uint32_t psn)
{
    if (sr_unlikely(qp->eng->bulk.rx) && sr_bulk_read_respond(qp, src, len, psn))
        return; /* pushed into the requester's sink (sr_bulk.h) */
    uint32_t pmtu = sr_qp_pmtu(qp);
    uint32_t n = len ? (len + pmtu - 1) / pmtu : 1;
    sr_resp_ack_first(qp, SR_ACK_EV_RESPONSE, qp->eng->now_ns);
    for (uint32_t i = 0; i < n; i++) {
        struct sr_pkt p = {0};
        uint8_t op = n == 1       ? SR_OP_READ_RESP_ONLY
                     : i == 0     ? SR_OP_READ_RESP_FIRST
                     : i == n - 1 ? SR_OP_READ_RESP_LAST
                                  : SR_OP_READ_RESP_MIDDLE;
        p.bth.opcode = resp_base(qp) | op;
        p.bth.pkey = 0xffff;
        p.bth.dest_qp = qp->attr.dest_qp_num;
        p.bth.psn = sr_psn_add(psn, i);
        p.aeth.syndrome = SR_AETH_ACK | SR_AETH_NO_CREDIT_LIMIT;
        p.aeth.msn = qp->resp.msn & SR_PSN_MASK;
        uint32_t chunk = SR_MIN(pmtu, len - i * pmtu);
        p.payload_len = len ? chunk : 0;
        struct sr_iov iov = {.base = src ? src + (size_t)i * pmtu : NULL, .len = p.payload_len};
        /* The last response of a READ goes out with everything queued
         * before it: a later request in the same batch may write this
         * memory (IBA ordering: the READ sees the data before it). */
        if (i == n - 1)
            sr_engine_tx_flush(qp->eng, qp, &p, &iov, p.payload_len ? 1 : 0, qp->attr.dgid);
        else
            sr_engine_tx(qp->eng, qp, &p, &iov, p.payload_len ? 1 : 0, qp->attr.dgid);
    }
}

static struct sr_replay *replay_find(struct sr_qp *qp, uint32_t psn, bool atomic)
{
    for (int i = 0; i < SR_REPLAY_SLOTS; i++) {
        struct sr_replay *r = &qp->resp.replay[i];
        if (!r->valid || r->atomic != atomic)
            continue;
        if (atomic ? r->psn == psn
                   : !sr_psn_lt(psn, r->psn) && sr_psn_lt(psn, sr_psn_add(r->psn, r->npkts)))
            return r;
    }
    return NULL;
}

static struct sr_replay *replay_new(struct sr_qp *qp)
{
    struct sr_replay *r = &qp->resp.replay[qp->resp.replay_next];
    qp->resp.replay_next = (qp->resp.replay_next + 1) % SR_REPLAY_SLOTS;
    memset(r, 0, sizeof(*r));
    r->valid = true;
    return r;
}

/* ---- helpers shared by RC, UC and UD ---- */
static bool op_is(const struct resp_ctx *c, uint32_t flag)
{
    return c->info->flags & flag;
}

static bool needs_rwqe(const struct resp_ctx *c)
{
    if (op_is(c, SR_OPF_SEND))
        return op_is(c, SR_OPF_FIRST | SR_OPF_ONLY);
    /* WRITE with immediate consumes a receive WQE at its last packet. */
    return op_is(c, SR_OPF_WRITE) && op_is(c, SR_OPF_IMM) && !c->qp->resp.have_rwqe;
}

static bool take_rwqe(struct resp_ctx *c)
{
    struct sr_qp *qp = c->qp;
    struct sr_srq *srq = rwqe_srq(c);
    struct sr_rq *rq = srq ? &srq->rq : &qp->rq;
    struct sr_rwqe *w = sr_rq_peek(rq);
    if (!w)
        return false;
    memcpy(qp->resp.rwqe_buf, w, sizeof(*w) + w->num_sge * sizeof(struct sr_sge));
    sr_rq_pop(rq);
    qp->resp.rq_msgs++; /* the RPETH numbering (place.c) */
    qp->resp.have_rwqe = true;
    /* an XRC SRQ completes on its own CQ (XRC targets have none) */
    qp->resp.rwqe_cq = srq && srq->cq ? srq->cq : qp->recv_cq;
    qp->resp.recv_off = 0;
    if (srq)
        sr_srq_check_limit(srq);
    return true;
}

static void complete_rwqe_sl(struct sr_qp *qp, enum sr_wc_status st, enum sr_wc_opcode op,
                             uint32_t byte_len, uint32_t imm, uint32_t flags, uint32_t src_qp,
                             uint8_t sl, bool solicited)
{
    if (!qp->resp.have_rwqe)
        return;
    sr_qp_recv_complete(qp, qp->resp.rwqe_cq, cur_rwqe(qp), st, op, byte_len, imm, flags, src_qp,
                        sl, solicited);
    qp->resp.have_rwqe = false;
    qp->resp.recv_off = 0;
}

static void complete_rwqe(struct sr_qp *qp, enum sr_wc_status st, enum sr_wc_opcode op,
                          uint32_t byte_len, uint32_t imm, uint32_t flags, uint32_t src_qp,
                          bool solicited)
{
    complete_rwqe_sl(qp, st, op, byte_len, imm, flags, src_qp, 0, solicited);
}

static void end_message(struct sr_qp *qp)
{
    qp->resp.msg = 0;
    qp->resp.msn = (qp->resp.msn + 1) & SR_PSN_MASK;
}

/* ---- RC state machine steps ---- */
static enum resp_state check_psn(struct resp_ctx *c)
{
    int32_t d = sr_psn_diff(c->pkt->bth.psn, c->qp->resp.epsn);
    if (d == 0) {
        c->qp->resp.nak_sent = false;
        return RS_CHECK_OP_SEQ;
    }
    return d > 0 ? RS_NAK_SEQ : RS_DUPLICATE;
}

static enum resp_state duplicate(struct resp_ctx *c)
{
    struct sr_qp *qp = c->qp;
    const struct sr_pkt *pkt = c->pkt;
    qp->eng->stats.rx_duplicate++;
    if (op_is(c, SR_OPF_READ_REQ)) {
        /* IBA 9.7.5.1.4: a duplicate READ is executed again, from
         * the PSN it carries, if it lies in a READ we answered. */
        struct sr_replay *r = replay_find(qp, pkt->bth.psn, false);
        if (!r)
            return RS_DROP;
        uint32_t pmtu = sr_qp_pmtu(qp);
        uint32_t room = (uint32_t)sr_psn_diff(sr_psn_add(r->psn, r->npkts), pkt->bth.psn);
        uint32_t n = pkt->reth.dma_len && !sr_bulk_rx_read(&qp->eng->bulk)
                         ? (pkt->reth.dma_len + pmtu - 1) / pmtu
                         : 1;
        if (n > room)
            return RS_DROP;
        const uint8_t *src = NULL;
        if (pkt->reth.dma_len) {
            src = sr_rkey_check(qp->eng, qp, c->pd, pkt->reth.rkey, pkt->reth.va, pkt->reth.dma_len,
                                SR_ACCESS_REMOTE_READ);
            if (!src)
                return RS_DROP;
        }
        send_read_responses(qp, src, pkt->reth.dma_len, pkt->bth.psn);
        return RS_DONE;
    }
    if (op_is(c, SR_OPF_ATOMIC)) {
        /* Never executed twice: answer from the saved result. */
        struct sr_replay *r = replay_find(qp, pkt->bth.psn, true);
        if (!r)
            return RS_DROP;
        send_aeth(qp, resp_base(qp) | SR_OP_ATOMIC_ACK, r->psn,
                  SR_AETH_ACK | SR_AETH_NO_CREDIT_LIMIT, r->orig);
        return RS_DONE;
    }
    /* SEND/WRITE: re-acknowledge everything received so far; to a SACK
     * requester with a D-SACK naming the duplicate (dsack.c). */
    if (!sr_dsack_send(qp, pkt->bth.psn))
        send_ack(qp, sr_psn_add(qp->resp.epsn, SR_PSN_MASK));
    return RS_DONE;
}

static enum resp_state check_op_seq(struct resp_ctx *c)
{
    uint8_t msg = c->qp->resp.msg;
    bool cont = op_is(c, SR_OPF_MIDDLE | SR_OPF_LAST);
    if (msg) {
        /* IBA 9.7.5.1.3: inside a message only its MIDDLE/LAST may come. */
        if (!cont || !op_is(c, msg))
            return RS_ERR_INV_REQ;
    } else if (cont) {
        return RS_ERR_INV_REQ;
    }
    return RS_CHECK_OP_VALID;
}

static enum resp_state check_op_valid(struct resp_ctx *c)
{
    uint32_t acc = c->qp->attr.qp_access_flags;
    if (c->decode_err)
        return RS_ERR_INV_REQ; /* payload over PMTU, or FIRST/MIDDLE not one PMTU */
    /* XRC: the XRCETH must name an XRC SRQ of the target's domain; its PD
     * guards memory and it supplies receive WQEs (IBA Annex A14, XRC). */
    if (c->qp->type == SR_QPT_XRC_RECV) {
        if (!c->xsrq)
            return RS_ERR_INV_REQ;
        c->pd = c->xsrq->pd;
    }
    /* The QP must be enabled for the remote operation (its remote access
     * flags, a Modify QP attribute: IBA 11.2.5), else the request gets a
     * Remote Access Error NAK (IBA 9.7.5.1). ATOMIC WRITE needs remote
     * write access, as rxe checks it. */
    if (op_is(c, SR_OPF_WRITE | SR_OPF_ATOMIC_WRITE) && !(acc & SR_ACCESS_REMOTE_WRITE))
        return RS_ERR_ACCESS;
    if (op_is(c, SR_OPF_READ_REQ) && !(acc & SR_ACCESS_REMOTE_READ))
        return RS_ERR_ACCESS;
    if (op_is(c, SR_OPF_ATOMIC) && !(acc & SR_ACCESS_REMOTE_ATOMIC))
        return RS_ERR_ACCESS;
    if (op_is(c, SR_OPF_READ_REQ | SR_OPF_ATOMIC) && c->qp->attr.max_dest_rd_atomic == 0)
        return RS_ERR_INV_REQ;
    return RS_CHECK_RESOURCE;
}

static enum resp_state check_resource(struct resp_ctx *c)
{
    if (!needs_rwqe(c))
        return RS_CHECK_LENGTH;
    if (op_is(c, SR_OPF_WRITE) && !op_is(c, SR_OPF_LAST | SR_OPF_ONLY))
        return RS_CHECK_LENGTH; /* WRITE w/ imm takes its WQE at the end */
    if (!take_rwqe(c))
        return RS_NAK_RNR;
    return RS_CHECK_LENGTH;
}

static enum resp_state check_length(struct resp_ctx *c)
{
    struct sr_qp *qp = c->qp;
    const struct sr_pkt *pkt = c->pkt;
    if (op_is(c, SR_OPF_SEND)) {
        if ((uint64_t)qp->resp.recv_off + pkt->payload_len > cur_rwqe(qp)->total_len) {
            c->rwqe_status = SR_WC_LOC_LEN_ERR;
            return RS_ERR_INV_REQ;
        }
        /* An RPETH names where the payload goes, and a piece kept out of
         * order was placed there (place.c): one that disagrees with the
         * message and offset in order is a malformed request (IBA
         * 9.7.5.2.2), never data skipped or put in the wrong buffer. */
        if ((pkt->hdrs & SR_HDR_BIT(SR_HDR_RPETH)) &&
            (pkt->rph.msg != qp->resp.rq_msgs - 1 || pkt->rph.off != qp->resp.recv_off)) {
            qp->eng->stats.rph_bad++;
            return RS_ERR_INV_REQ;
        }
    } else if (op_is(c, SR_OPF_WRITE)) {
        if (op_is(c, SR_OPF_FIRST | SR_OPF_ONLY)) {
            uint32_t dma = pkt->reth.dma_len;
            if (dma > SR_MAX_MSG_LEN)
                return RS_ERR_INV_REQ;
            if (op_is(c, SR_OPF_ONLY) ? pkt->payload_len != dma : dma <= pkt->payload_len)
                return RS_ERR_INV_REQ;
        } else if (op_is(c, SR_OPF_LAST) ? pkt->payload_len != qp->resp.write_left
                                         : pkt->payload_len >= qp->resp.write_left) {
            return RS_ERR_INV_REQ; /* IBA 9.7.5.1: length must match the RETH */
        }
    } else if (op_is(c, SR_OPF_READ_REQ)) {
        if (pkt->reth.dma_len > SR_MAX_MSG_LEN)
            return RS_ERR_INV_REQ;
    } else if (op_is(c, SR_OPF_ATOMIC_WRITE)) {
        /* IBA 1.5 (ATOMIC WRITE): exactly 8 bytes, and the RETH says so */
        if (pkt->payload_len != 8 || pkt->reth.dma_len != 8)
            return RS_ERR_INV_REQ;
    }
    return RS_CHECK_RKEY;
}

static enum resp_state check_rkey(struct resp_ctx *c)
{
    struct sr_qp *qp = c->qp;
    const struct sr_pkt *pkt = c->pkt;
    c->target = NULL;
    if (op_is(c, SR_OPF_WRITE)) {
        uint64_t va;
        uint32_t rkey, len;
        if (op_is(c, SR_OPF_FIRST | SR_OPF_ONLY)) {
            /* The whole message's range is checked at its first packet. */
            va = pkt->reth.va;
            rkey = pkt->reth.rkey;
            len = pkt->reth.dma_len;
            if (len && !sr_rkey_check(qp->eng, qp, c->pd, rkey, va, len, SR_ACCESS_REMOTE_WRITE))
                return RS_ERR_ACCESS;
            qp->resp.write_va = va;
            qp->resp.write_rkey = rkey;
            qp->resp.write_left = len;
        }
        if (pkt->payload_len) {
            /* Re-resolved per packet: the MR may be gone by now. */
            c->target = sr_rkey_check(qp->eng, qp, c->pd, qp->resp.write_rkey, qp->resp.write_va,
                                      pkt->payload_len, SR_ACCESS_REMOTE_WRITE);
            if (!c->target)
                return RS_ERR_ACCESS;
        }
    } else if (op_is(c, SR_OPF_READ_REQ)) {
        if (pkt->reth.dma_len) {
            c->target = sr_rkey_check(qp->eng, qp, c->pd, pkt->reth.rkey, pkt->reth.va,
                                      pkt->reth.dma_len, SR_ACCESS_REMOTE_READ);
            if (!c->target)
                return RS_ERR_ACCESS;
        }
    } else if (op_is(c, SR_OPF_ATOMIC)) {
        if (pkt->atomic.va & 7) /* IBA 9.4.5: atomics are 8-byte aligned */
            return RS_ERR_INV_REQ;
        c->target = sr_rkey_check(qp->eng, qp, c->pd, pkt->atomic.rkey, pkt->atomic.va, 8,
                                  SR_ACCESS_REMOTE_ATOMIC);
        if (!c->target)
            return RS_ERR_ACCESS;
    } else if (op_is(c, SR_OPF_ATOMIC_WRITE)) {
        /* IBA 1.5 (ATOMIC WRITE): the target is 8-byte aligned, as for the
         * other atomics (IBA 9.4.5); else Invalid Request. */
        if (pkt->reth.va & 7)
            return RS_ERR_INV_REQ;
        c->target = sr_rkey_check(qp->eng, qp, c->pd, pkt->reth.rkey, pkt->reth.va, 8,
                                  SR_ACCESS_REMOTE_WRITE);
        if (!c->target)
            return RS_ERR_ACCESS;
    } else if (op_is(c, SR_OPF_INV)) {
        /* SEND with Invalidate (IBA 10.6.7.2): the IETH's R_Key must
         * name a window this QP may invalidate; else Invalid Request, and
         * the receive completes in error. Checked before the last packet
         * lands, so a refused message invalidates nothing. */
        if (!sr_mw_inv_target(qp->eng, qp, c->pd, pkt->ieth_rkey, true))
            return RS_ERR_INV_REQ;
    }
    return RS_EXECUTE;
}

static uint64_t do_atomic(uint8_t *target, const struct sr_pkt *pkt)
{
    bool cas = SR_OPCODE_OP(pkt->bth.opcode) == SR_OP_CMP_SWAP;
    if (((uintptr_t)target & 7) == 0) {
        /* The target application may touch this word concurrently. */
        uint64_t *w = (uint64_t *)(void *)target;
        if (!cas)
            return __atomic_fetch_add(w, pkt->atomic.swap_add, __ATOMIC_SEQ_CST);
        uint64_t expected = pkt->atomic.compare;
        __atomic_compare_exchange_n(w, &expected, pkt->atomic.swap_add, false, __ATOMIC_SEQ_CST,
                                    __ATOMIC_SEQ_CST);
        return expected;
    }
    /* The remote VA is aligned but the host mapping is not (an MR whose
     * iova and address differ in alignment): no host atomicity possible. */
    uint64_t v;
    memcpy(&v, target, 8);
    uint64_t n =
        cas ? (v == pkt->atomic.compare ? pkt->atomic.swap_add : v) : v + pkt->atomic.swap_add;
    memcpy(target, &n, 8);
    return v;
}

static enum resp_state execute(struct resp_ctx *c)
{
    struct sr_qp *qp = c->qp;
    const struct sr_pkt *pkt = c->pkt;
    bool end = op_is(c, SR_OPF_LAST | SR_OPF_ONLY);

    if (op_is(c, SR_OPF_SEND)) {
        struct sr_rwqe *w = cur_rwqe(qp);
        uint32_t off = qp->resp.recv_off;
        if (qp->type == SR_QPT_UD)
            off += SR_GRH_LEN;
        bool prot = true;
        /* a piece placed when it arrived out of order (sr_place_send) is
         * in the buffer already */
        bool copied =
            qp->resp.placed_run ||
            (sr_unlikely(qp->eng->bulk.rx) ? sr_bulk_pull_sge(qp->eng, c->pd, w->sge, w->num_sge,
                                                              off, pkt->payload_len, &prot)
                                           : sr_sge_scatter(qp->eng, c->pd, w->sge, w->num_sge, off,
                                                            pkt->payload, pkt->payload_len));
        if (!copied) {
            /* a copy that failed: not placed (IBA 9.7.5.2.4) */
            c->rwqe_status = prot ? SR_WC_LOC_PROT_ERR : SR_WC_GENERAL_ERR;
            return RS_ERR_OP;
        }
        qp->resp.recv_off += pkt->payload_len;
        if (!end) {
            qp->resp.msg = SR_OPF_SEND;
        } else {
            uint32_t flags = 0, imm = 0;
            if (op_is(c, SR_OPF_IMM)) {
                flags |= SR_WC_WITH_IMM;
                imm = pkt->imm;
            } else if (op_is(c, SR_OPF_INV)) {
                /* invalidated before the receive completes (checked in
                 * check_rkey), so the consumer sees the key already dead */
                struct sr_mw *mw = sr_mw_inv_target(qp->eng, qp, c->pd, pkt->ieth_rkey, true);
                if (mw)
                    sr_mw_invalidate(mw);
                flags |= SR_WC_WITH_INV;
                imm = pkt->ieth_rkey;
            }
            uint32_t byte_len = qp->resp.recv_off;
            uint32_t src_qp = 0;
            uint8_t sl = 0;
            if (qp->type == SR_QPT_UD) {
                flags |= SR_WC_GRH;
                byte_len += SR_GRH_LEN;
                src_qp = pkt->deth.src_qp;
                sl = sr_resp_ud_sl(c->src_gid, qp->eng->cfg.gid);
            }
            complete_rwqe_sl(qp, SR_WC_SUCCESS, SR_WC_RECV, byte_len, imm, flags, src_qp, sl,
                             pkt->bth.se);
            end_message(qp);
        }
    } else if (op_is(c, SR_OPF_WRITE)) {
        if (sr_unlikely(qp->eng->bulk.rx)) {
            /* the requester's data is not copied in: the responder could
             * not complete it (IBA 9.7.5.2.4, Remote Operational Error) */
            c->rwqe_status = SR_WC_GENERAL_ERR;
            if (!sr_bulk_pull(qp->eng, c->target, pkt->payload_len))
                return RS_ERR_OP;
            c->rwqe_status = SR_WC_SUCCESS;
        } else if (pkt->payload_len && !qp->resp.placed_run) {
            sr_engine_fence(qp->eng);
            SR_DMA_BEGIN();
            sr_ooo_write(qp, pkt->bth.psn, c->target, pkt->payload, pkt->payload_len);
            SR_DMA_END();
        }
        if (op_is(c, SR_OPF_FIRST | SR_OPF_ONLY))
            qp->resp.write_total = pkt->reth.dma_len;
        qp->resp.write_va += pkt->payload_len;
        qp->resp.write_left -= pkt->payload_len;
        if (!end) {
            qp->resp.msg = SR_OPF_WRITE;
        } else {
            if (op_is(c, SR_OPF_IMM)) {
                complete_rwqe(qp, SR_WC_SUCCESS, SR_WC_RECV_RDMA_WITH_IMM, qp->resp.write_total,
                              pkt->imm, SR_WC_WITH_IMM, 0, pkt->bth.se);
            }
            end_message(qp);
        }
    } else if (op_is(c, SR_OPF_READ_REQ)) {
        uint32_t pmtu = sr_qp_pmtu(qp);
        struct sr_replay *r = replay_new(qp);
        r->psn = pkt->bth.psn;
        r->npkts = pkt->reth.dma_len && !sr_bulk_rx_read(&qp->eng->bulk)
                       ? (pkt->reth.dma_len + pmtu - 1) / pmtu
                       : 1;
        end_message(qp);
        send_read_responses(qp, c->target, pkt->reth.dma_len, pkt->bth.psn);
        qp->resp.epsn = sr_psn_add(pkt->bth.psn, r->npkts);
        return RS_DONE;
    } else if (op_is(c, SR_OPF_ATOMIC)) {
        struct sr_replay *r = replay_new(qp);
        r->atomic = true;
        r->psn = pkt->bth.psn;
        r->npkts = 1;
        sr_engine_fence(qp->eng);
        SR_DMA_BEGIN();
        r->orig = do_atomic(c->target, pkt);
        SR_DMA_END();
        qp->eng->stats.atomics_executed++;
        end_message(qp);
        send_aeth(qp, resp_base(qp) | SR_OP_ATOMIC_ACK, pkt->bth.psn,
                  SR_AETH_ACK | SR_AETH_NO_CREDIT_LIMIT, r->orig);
        qp->resp.epsn = sr_psn_add(pkt->bth.psn, 1);
        return RS_DONE;
    } else if (op_is(c, SR_OPF_ATOMIC_WRITE)) {
        /* One 64-bit store, so a reader of the word sees the old value or
         * the new one, never a mix. A duplicate is re-acknowledged, not
         * re-executed (duplicate()), as for a WRITE. */
        uint64_t v;
        memcpy(&v, pkt->payload, 8);
        sr_engine_fence(qp->eng);
        SR_DMA_BEGIN();
        if (((uintptr_t)c->target & 7) == 0)
            __atomic_store_n((uint64_t *)(void *)c->target, v, __ATOMIC_SEQ_CST);
        else /* aligned VA, unaligned host mapping (see do_atomic) */
            memcpy(c->target, &v, 8);
        SR_DMA_END();
        end_message(qp);
    }
    qp->resp.epsn = sr_psn_add(pkt->bth.psn, 1);
    return RS_ACKNOWLEDGE;
}

/* Class B/C/D errors (IBA 9.9.3.1): NAK, complete the receive WQE held
 * (if any) in error, and the responder QP enters Error. */
static void responder_error(struct resp_ctx *c, uint8_t nak, enum sr_wc_status rwqe_status)
{
    struct sr_qp *qp = c->qp;
    qp->eng->stats.err_naks_sent++;
    send_nak(qp, c->pkt->bth.psn, nak);
    complete_rwqe(qp, rwqe_status, SR_WC_RECV, 0, 0, 0, 0, false);
    sr_qp_to_error(qp);
    /* IBA 11.6.3.1: the responder's QP error is an affiliated async event */
    struct sr_engine *e = qp->eng;
    if (e->cfg.ops.async_event)
        e->cfg.ops.async_event(e->cfg.ops_ctx,
                               nak == SR_NAK_REMOTE_ACCESS ? SR_EVENT_QP_ACCESS_ERR
                               : nak == SR_NAK_INVALID_REQ ? SR_EVENT_QP_REQ_ERR
                                                           : SR_EVENT_QP_FATAL,
                               qp);
}

static void rc_rx(struct resp_ctx *c)
{
    struct sr_qp *qp = c->qp;
    if (qp->type == SR_QPT_XRC_RECV) {
        struct sr_srq *s = sr_srq_lookup(qp->eng, c->pkt->xrc_srqn);
        c->xsrq = s && s->xrcd == qp->xrcd ? s : NULL;
        c->pd = c->xsrq ? c->xsrq->pd : NULL;
    }
    enum resp_state s = RS_CHECK_PSN;
    for (;;) {
        switch (s) {
        case RS_CHECK_PSN:
            s = check_psn(c);
            break;
        case RS_DUPLICATE:
            s = duplicate(c);
            break;
        case RS_CHECK_OP_SEQ:
            s = check_op_seq(c);
            break;
        case RS_CHECK_OP_VALID:
            s = check_op_valid(c);
            break;
        case RS_CHECK_RESOURCE:
            s = check_resource(c);
            break;
        case RS_CHECK_LENGTH:
            s = check_length(c);
            break;
        case RS_CHECK_RKEY:
            s = check_rkey(c);
            break;
        case RS_EXECUTE:
            s = execute(c);
            break;
        case RS_ACKNOWLEDGE:
            if (c->pkt->bth.ack_req)
                acknowledge(c);
            return;
        case RS_NAK_SEQ:
            if (sr_ooo_store(qp, c->pkt, c->decode_err))
                return; /* kept and SACKed (ooo.c) */
            /* IBA 9.7.5.1.2: one sequence NAK until the expected PSN shows up. */
            if (!qp->resp.nak_sent) {
                qp->resp.nak_sent = true;
                qp->eng->stats.seq_naks_sent++;
                send_nak(qp, qp->resp.epsn, SR_NAK_PSN_SEQ);
            } else {
                qp->eng->stats.rx_drop_other++; /* already NAKed: dropped silently */
            }
            return;
        case RS_NAK_RNR:
            qp->eng->stats.rnr_naks_sent++;
            send_aeth(qp, resp_base(qp) | SR_OP_ACK, c->pkt->bth.psn,
                      SR_AETH_RNR_NAK | (qp->attr.min_rnr_timer & 31), 0);
            return;
        case RS_ERR_INV_REQ:
            responder_error(c, SR_NAK_INVALID_REQ,
                            c->rwqe_status ? c->rwqe_status : SR_WC_REM_INV_REQ_ERR);
            return;
        case RS_ERR_ACCESS:
            responder_error(c, SR_NAK_REMOTE_ACCESS, SR_WC_REM_ACCESS_ERR);
            return;
        case RS_ERR_OP:
            responder_error(c, SR_NAK_REMOTE_OP,
                            c->rwqe_status ? c->rwqe_status : SR_WC_REM_OP_ERR);
            return;
        case RS_DROP:
            qp->eng->stats.rx_drop_other++;
            return;
        case RS_DONE:
            return;
        }
    }
}

/* UC (IBA 9.8): no acknowledgements; a gap or any error drops the rest
 * of the message silently, and the next FIRST/ONLY starts afresh. */
static void uc_abandon(struct sr_qp *qp)
{
    /* A receive WQE already taken stays with the QP for the next message. */
    qp->resp.recv_off = 0;
    qp->resp.msg = 0;
}

static void uc_rx(struct resp_ctx *c)
{
    struct sr_qp *qp = c->qp;
    const struct sr_pkt *pkt = c->pkt;
    if (pkt->bth.psn != qp->resp.epsn && qp->resp.msg)
        uc_abandon(qp);
    qp->resp.epsn = sr_psn_add(pkt->bth.psn, 1);
    enum resp_state s = check_op_seq(c);
    if (s == RS_CHECK_OP_VALID)
        s = check_op_valid(c);
    if (s == RS_CHECK_RESOURCE) {
        if (needs_rwqe(c) && !qp->resp.have_rwqe && !take_rwqe(c))
            s = RS_DROP;
        else
            s = RS_CHECK_LENGTH;
    }
    if (s == RS_CHECK_LENGTH)
        s = check_length(c);
    if (s == RS_CHECK_RKEY)
        s = check_rkey(c);
    if (s == RS_EXECUTE)
        s = execute(c);
    if (s != RS_ACKNOWLEDGE && s != RS_DONE) {
        qp->eng->stats.rx_drop_other++;
        uc_abandon(qp);
    }
}

static bool gid_is_v4mapped(const uint8_t *gid)
{
    static const uint8_t v4map[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    return !memcmp(gid, v4map, 12);
}

/* What a RoCE NIC reports in a UD receive completion's SL field: the
 * received frame's network header type (bit 3: a UDP header follows it,
 * RoCEv2; bits 2:0: 1 IPv6, 2 IPv4), per RoCEv2 (IBA Annex A17.4.5.1) the
 * remote address information a UD CQE carries. UCX's ud_verbs reads it to
 * know where the destination address sits in the 40-byte area. */
uint8_t sr_resp_ud_sl(const uint8_t *sgid, const uint8_t *dgid)
{
    return 0x8 | (gid_is_v4mapped(sgid) && gid_is_v4mapped(dgid) ? 0x2 : 0x1);
}

/* The 40 bytes a UD receive starts with (IBA 11.4.1.2), holding the IP
 * header of the RoCEv2 frame as it arrived (Annex A17.4.5.2): an IPv6
 * header in all 40, or an IPv4 header in the last 20 (the first 20 zero).
 * transport_len counts BTH through ICRC, the UDP payload. */
static void build_grh(uint8_t grh[SR_GRH_LEN], const uint8_t *sgid, const uint8_t *dgid,
                      uint32_t transport_len)
{
    uint32_t udp_len = 8 + transport_len;
    memset(grh, 0, SR_GRH_LEN);
    if (sr_resp_ud_sl(sgid, dgid) & 0x2) {
        uint8_t *ip = grh + 20;
        ip[0] = 0x45;
        sr_put_be16(ip + 2, (uint16_t)(20 + udp_len));
        ip[6] = 0x40; /* DF */
        ip[8] = 64;
        ip[9] = 17; /* UDP */
        memcpy(ip + 12, sgid + 12, 4);
        memcpy(ip + 16, dgid + 12, 4);
        sr_put_be16(ip + 10, sr_inet_csum(ip, 20, 0));
        return;
    }
    sr_put_be32(grh, 6u << 28);
    sr_put_be16(grh + 4, (uint16_t)udp_len);
    grh[6] = 17; /* next header: UDP */
    grh[7] = 64;
    memcpy(grh + 8, sgid, 16);
    memcpy(grh + 24, dgid, 16);
}

static void ud_rx(struct resp_ctx *c)
{
    struct sr_qp *qp = c->qp;
    const struct sr_pkt *pkt = c->pkt;
    struct sr_engine *e = qp->eng;
    if (c->decode_err) {
        e->stats.rx_drop_malformed++;
        return;
    }
    /* IBA 10.2.4: a Q_Key mismatch drops the packet silently. */
    if (pkt->deth.qkey != qp->attr.qkey) {
        e->stats.rx_drop_qkey++;
        return;
    }
    if (!take_rwqe(c)) {
        e->stats.rx_drop_other++; /* UD has no RNR: the datagram is lost */
        return;
    }
    struct sr_rwqe *w = cur_rwqe(qp);
    if ((uint64_t)SR_GRH_LEN + pkt->payload_len > w->total_len) {
        complete_rwqe(qp, SR_WC_LOC_LEN_ERR, SR_WC_RECV, 0, 0, 0, pkt->deth.src_qp, false);
        return;
    }
    uint8_t grh[SR_GRH_LEN];
    build_grh(grh, c->src_gid, e->cfg.gid,
              (uint32_t)c->info->hdr_len + pkt->payload_len + pkt->bth.pad_cnt + SR_ICRC_LEN);
    if (!sr_sge_scatter(e, c->pd, w->sge, w->num_sge, 0, grh, SR_GRH_LEN)) {
        complete_rwqe(qp, SR_WC_LOC_PROT_ERR, SR_WC_RECV, 0, 0, 0, pkt->deth.src_qp, false);
        return;
    }
    if (execute(c) == RS_ERR_OP)
        complete_rwqe(qp, c->rwqe_status, SR_WC_RECV, 0, 0, 0, pkt->deth.src_qp, false);
}

/* A lingering (destroyed) QP answers duplicates of what it acknowledged
 * and nothing else; it owns no memory any more (pd is NULL, so a duplicate
 * READ finds no region and is dropped). */
void sr_resp_zombie_rx(struct sr_qp *qp, const struct sr_pkt *pkt, const uint8_t *src_gid,
                       uint64_t now_ns)
{
    struct resp_ctx c = {
        .qp = qp,
        .pkt = pkt,
        .info = sr_opcode_info(pkt->bth.opcode),
        .src_gid = src_gid,
        .now = now_ns,
    };
    if (sr_psn_diff(pkt->bth.psn, qp->resp.epsn) < 0 && duplicate(&c) != RS_DROP)
        return;
    qp->eng->stats.rx_drop_other++;
}

void sr_resp_rx(struct sr_qp *qp, const struct sr_pkt *pkt, int decode_err, const uint8_t *src_gid,
                uint64_t now_ns)
{
    struct resp_ctx c = {
        .qp = qp,
        .pkt = pkt,
        .info = sr_opcode_info(pkt->bth.opcode),
        .decode_err = decode_err,
        .src_gid = src_gid,
        .now = now_ns,
        .pd = qp->pd,
    };
    switch (qp->type) {
    case SR_QPT_RC:
    case SR_QPT_XRC_RECV:
        qp->resp.peer_sack = qp->eng->cfg.sack && (pkt->bth.resv7 & SR_BTH_RESV7_SACK);
        rc_rx(&c);
        if (qp->resp.ooo)
            sr_ooo_drain(qp, src_gid, now_ns);
        break;
    case SR_QPT_XRC_SEND: /* an initiator takes no requests (filtered earlier) */
        break;
    case SR_QPT_UC:
        uc_rx(&c);
        break;
    case SR_QPT_UD:
        ud_rx(&c);
        break;
    }
}

/* comp.c: the completer. Consumes ACKs, NAKs, READ responses and ATOMIC
 * acknowledgements; completes WQEs in order; runs the transport timer
 * (4.096 us * 2^timeout, retry_cnt) and the RNR timer (rnr_retry, 7 =
 * infinite); orders go-back-N rewinds (IBA 9.7.5.2, 9.9.2).
 *
 * comp.psn is the oldest PSN not yet acknowledged: everything before it is
 * done. Responses outside [comp.psn, req.max_sent) are stale or forged and
 * are dropped.
 *
 * The completer never runs the requester itself: what the requester must
 * do next (rewind, resume, error the QP, restart the timer) is returned
 * as a struct sr_comp_next, which the engine applies once
 * (sr_comp_apply).
 *
 * Beside the transport timer runs a tail-loss probe (rtt.h): when nothing
 * was acknowledged for a probe timeout, the last packet is sent again
 * with AckReq; a responder answers it with an ACK, a sequence NAK, or
 * (already NAKed, IBA 9.7.5.1.2) not at all, and a second probe then goes
 * back to comp.psn with a small window. Probes are plain retransmissions
 * (IBA 9.7.5.1.3 answers duplicates), never counted against retry_cnt:
 * only expiries of the transport timer are (IBA 9.7.6.1.3), and probes do
 * not restart it, so a dead peer fails in the time timeout and retry_cnt
 * imply. */
#include "engine_int.h"

uint64_t sr_qp_deadline(const struct sr_qp *qp)
{
    if (qp->zombie)
        return qp->zombie_until;
    uint64_t d = qp->req.rnr_wait ? qp->req.rnr_until : qp->comp.deadline;
    if (!qp->req.rnr_wait && qp->comp.probe_at && qp->comp.probe_at < d)
        d = qp->comp.probe_at;
    d = SR_MIN(d, sr_cong_deadline(qp));
    d = SR_MIN(d, sr_ooo_deadline(qp));
    return SR_MIN(d, sr_ack_deadline(&qp->resp.ack));
}

/* Packets a timeout or a probe lets the requester resend before an ACK:
 * TCP's loss window is one segment (RFC 5681 3.1); a few here, since an
 * ACK costs the responder a packet of its own per round. */
enum { SR_REC_WND_INIT = 4 };

static bool outstanding(const struct sr_qp *qp)
{
    return qp->comp.psn != qp->req.max_sent || qp->req.rd_atomic;
}

void sr_comp_arm(struct sr_qp *qp, uint64_t now_ns)
{
    uint64_t t = sr_timeout_ns(qp->attr.timeout);
    if (!outstanding(qp) || t == SR_NO_DEADLINE) {
        qp->comp.deadline = SR_NO_DEADLINE;
        return;
    }
    qp->comp.deadline = now_ns + t;
    sr_engine_activate(qp->eng, qp);
}

void sr_comp_probe_arm(struct sr_qp *qp, uint64_t now_ns)
{
    uint64_t t = sr_timeout_ns(qp->attr.timeout);
    /* The hold beyond the samples is the ordinary one: an ACK held for a
     * reply (a ping-pong's) leaves with that reply, whose time the RTT
     * samples already hold (rtt.h). */
    sr_rtt_set_peer(&qp->comp.rtt, qp->eng->cfg.sack && qp->comp.peer_sack);
    uint64_t pto = sr_rtt_pto(&qp->comp.rtt, qp->comp.probes, qp->eng->ack.cfg_delay_ns, t);
    if (!outstanding(qp) || pto == UINT64_MAX) {
        qp->comp.probe_at = 0;
        return;
    }
    /* A packet the pacer holds is not a lost tail: the probe waits from
     * its departure (congestion.c), or every paced gap longer than the
     * probe timeout would send one needlessly (RFC 8985 7.2 arms it on
     * the last transmission). */
    qp->comp.probe_at = SR_MAX(now_ns, sr_cong_paced_until(qp)) + pto;
    /* A hole counted lost and waiting out its reordering window (sack.c)
     * keeps that earlier time: re-arming the probe for newer sends must
     * not push its resend back to a probe timeout. */
    uint64_t rack = sr_sack_lost_deadline(qp);
    if (rack && rack < qp->comp.probe_at)
        qp->comp.probe_at = rack;
    uint64_t rd = sr_readsel_lost_deadline(qp);
    if (rd && rd < qp->comp.probe_at)
        qp->comp.probe_at = rd;
    sr_engine_activate(qp->eng, qp);
}

void sr_comp_probe_by(struct sr_qp *qp, uint64_t at)
{
    if (!qp->comp.probe_at || at < qp->comp.probe_at) {
        qp->comp.probe_at = at;
        sr_engine_activate(qp->eng, qp);
    }
}

void sr_comp_delivered(struct sr_qp *qp, uint64_t now_ns)
{
    /* RFC 8985 7.2: deliveries rearm the probe timeout; a probe then
     * fires only when nothing at all gets through, never in the middle
     * of a recovery that SACKs or placed READ responses drive (it would
     * ask for holes still inside their reordering window), and never
     * pushed past the transport timer, which runs on untouched. */
    uint64_t was_at = qp->comp.probe_at;
    uint8_t was_probes = qp->comp.probes;
    qp->comp.probes = 0;
    sr_comp_probe_arm(qp, now_ns);
    if (was_at && (!qp->comp.probe_at || qp->comp.probe_at >= qp->comp.deadline)) {
        /* later than the transport timer, whose expiry consumes a retry:
         * the probe keeps its deadline (RFC 8985 7.2 caps the PTO at the
         * RTO) */
        qp->comp.probe_at = was_at;
        qp->comp.probes = was_probes;
    }
}

void sr_comp_rtt_start(struct sr_qp *qp, uint32_t psn, uint64_t now_ns)
{
    if (qp->comp.rtt_timing)
        return;
    qp->comp.rtt_timing = true;
    qp->comp.rtt_behind = false;
    qp->comp.rtt_psn = psn;
    qp->comp.rtt_sent_ns = now_ns;
}

/* The first WQE that is not done yet; NULL if none. */
static struct sr_swqe *first_pending(struct sr_qp *qp)
{
    for (uint32_t i = qp->sq_head; i != qp->sq_tail; i++) {
        struct sr_swqe *w = sr_sq_at(qp, i);
        if (w->state != SWQE_DONE)
            return w;
    }
    return NULL;
}

static struct sr_swqe *wqe_of_psn(struct sr_qp *qp, uint32_t psn)
{
    for (uint32_t i = qp->sq_head; i != qp->sq_tail; i++) {
        struct sr_swqe *w = sr_sq_at(qp, i);
        if (w->state == SWQE_POSTED && w->first_psn == qp->req.next_psn)
            break;
        if (!sr_psn_lt(psn, w->first_psn) && sr_psn_lt(psn, sr_psn_add(w->first_psn, w->npkts)))
            return w;
    }
    return NULL;
}

static void wqe_done(struct sr_qp *qp, struct sr_swqe *w, enum sr_wc_status st)
{
    w->status = (uint8_t)st;
    w->state = SWQE_DONE;
    if (sr_wr_is_rd_atomic(w->wr.opcode) && qp->req.rd_atomic)
        qp->req.rd_atomic--;
}

static void want_rewind(struct sr_comp_next *n, uint32_t psn)
{
    n->act |= SR_COMP_REWIND; /* sr_req_rewind ends RTT timing: Karn */
    n->rewind_psn = psn;      /* a later rewind replaces an earlier one */
}

/* A WQE failed: it completes with st, the QP enters Error and the rest
 * flushes (IBA 10.3.1.7, 11.6.2). */
static void fail_wqe(struct sr_qp *qp, struct sr_swqe *w, enum sr_wc_status st,
                     struct sr_comp_next *n)
{
    /* Everything before w was acknowledged by the failing response. */
    for (uint32_t i = qp->sq_head; i != qp->sq_tail; i++) {
        struct sr_swqe *o = sr_sq_at(qp, i);
        if (o == w)
            break;
        if (o->state != SWQE_DONE)
            wqe_done(qp, o, SR_WC_SUCCESS);
    }
    wqe_done(qp, w, st);
    sr_qp_retire(qp);
    n->act |= SR_COMP_ERROR;
}

/* Progress made: the retry counters start over (IBA 9.7.6.1.3) and the
 * timer restarts from now. */
static void progress(struct sr_qp *qp, uint64_t now_ns, uint32_t old_psn)
{
    qp->comp.retry_left = qp->attr.retry_cnt;
    qp->comp.rnr_left = qp->attr.rnr_retry;
    sr_paths_qp_acked(qp, old_psn, now_ns);
    uint64_t rtt_ns = 0;
    if (qp->comp.rtt_timing && sr_psn_lt(qp->comp.rtt_psn, qp->comp.psn)) {
        qp->comp.rtt_timing = false;
        if (!qp->comp.rtt_behind) {
            rtt_ns = now_ns - qp->comp.rtt_sent_ns;
            sr_rtt_sample(&qp->comp.rtt, rtt_ns);
        }
    }
    sr_cong_acked(qp, (uint32_t)sr_psn_diff(qp->comp.psn, old_psn), rtt_ns, now_ns);
    /* The recovery window grows by what was acknowledged (slow start,
     * RFC 5681 3.1) until it no longer limits. */
    if (qp->req.rec_wnd) {
        uint32_t acked = (uint32_t)sr_psn_diff(qp->comp.psn, old_psn);
        qp->req.rec_wnd += acked;
        if (qp->req.rec_wnd >= qp->eng->cfg.window_pkts)
            qp->req.rec_wnd = 0;
    }
    qp->comp.probes = 0;
    sr_qp_retire(qp);
    sr_comp_arm(qp, now_ns);
    sr_comp_probe_arm(qp, now_ns);
}

/* Acknowledge every PSN up to and including psn (coalesced ACK). Stops at a
 * READ or atomic that has not been answered: an ACK beyond it means its
 * responses were lost, so it is asked for again. Returns true on progress. */
static bool ack_through(struct sr_qp *qp, uint32_t psn, struct sr_comp_next *n)
{
    bool moved = false;
    for (uint32_t i = qp->sq_head; i != qp->sq_tail; i++) {
        struct sr_swqe *w = sr_sq_at(qp, i);
        if (w->state == SWQE_DONE)
            continue;
        if (sr_psn_lt(psn, w->first_psn))
            break;
        uint32_t end = sr_psn_add(w->first_psn, w->npkts);
        if (sr_wr_is_rd_atomic(w->wr.opcode)) {
            /* the READ's holes alone are asked for again (readsel.c) */
            if (sr_readsel_beyond(qp, w, sr_psn_add(psn, 1), n))
                break;
            if (!qp->comp.read_retry || qp->comp.read_retry_psn != qp->comp.psn) {
                qp->comp.read_retry = true;
                qp->comp.read_retry_psn = qp->comp.psn;
                want_rewind(n, qp->comp.psn);
            }
            break;
        }
        if (sr_psn_lt(psn, sr_psn_add(end, -1u & SR_PSN_MASK))) {
            /* part of a multi-packet message */
            if (sr_psn_lt(qp->comp.psn, sr_psn_add(psn, 1))) {
                qp->comp.psn = sr_psn_add(psn, 1);
                moved = true;
            }
            break;
        }
        if (w->state != SWQE_SENT)
            break; /* cannot ack what was not completely sent */
        wqe_done(qp, w, SR_WC_SUCCESS);
        qp->comp.psn = end;
        moved = true;
    }
    return moved;
}

/* comp.psn reached responses placed out of order (readsel.c): move over
 * them, completing each READ whose last one is in, then acknowledge what
 * an ACK held up behind the READ had acknowledged already. Each round
 * moves comp.psn forward or ends the loop; the bound is for safety. */
static void advance_placed(struct sr_qp *qp, struct sr_comp_next *n)
{
    for (int round = 0; round < 64; round++) {
        while (sr_readsel_has(qp, qp->comp.psn)) {
            struct sr_swqe *w = wqe_of_psn(qp, qp->comp.psn);
            if (!w || w->wr.opcode != SR_WR_RDMA_READ || w->state == SWQE_DONE)
                return;
            qp->comp.psn = sr_psn_add(qp->comp.psn, 1);
            if (qp->comp.psn == sr_psn_add(w->first_psn, w->npkts))
                wqe_done(qp, w, SR_WC_SUCCESS);
        }
        uint32_t acked;
        if (!sr_readsel_acked(qp, &acked) || !sr_psn_lt(qp->comp.psn, acked) ||
            !ack_through(qp, sr_psn_add(acked, SR_PSN_MASK), n))
            return;
    }
}

/* Whatever moved comp.psn (an ACK, an atomic's answer, a READ response)
 * may have brought it to responses placed already. */
static void placed_progress(struct sr_qp *qp, uint64_t now_ns, struct sr_comp_next *n)
{
    if (!(n->act & SR_COMP_ERROR) && sr_readsel_has(qp, qp->comp.psn)) {
        uint32_t old_psn = qp->comp.psn;
        advance_placed(qp, n);
        progress(qp, now_ns, old_psn);
        n->act |= SR_COMP_RESUME;
    }
}

static void handle_read_resp(struct sr_qp *qp, const struct sr_pkt *pkt, uint64_t now_ns,
                             struct sr_comp_next *n)
{
    struct sr_engine *e = qp->eng;
    uint32_t psn = pkt->bth.psn;
    struct sr_swqe *w = wqe_of_psn(qp, psn);
    if (!w || w->wr.opcode != SR_WR_RDMA_READ || w->state == SWQE_DONE) {
        e->stats.rx_drop_other++;
        return;
    }
    sr_readsel_seen(qp, w, pkt);
    /* A response implicitly acknowledges everything sent before its
     * request (IBA 9.7.5.1.5). */
    bool moved = false;
    uint32_t old_psn = qp->comp.psn;
    if (sr_psn_lt(qp->comp.psn, w->first_psn))
        moved = ack_through(qp, sr_psn_add(w->first_psn, SR_PSN_MASK), n);
    if (psn != qp->comp.psn && sr_readsel_on(qp) && sr_psn_lt(qp->comp.psn, psn)) {
        /* Earlier responses are missing: this one is placed at its
         * offset, and the holes asked for alone (readsel.c). */
        sr_readsel_rx(qp, w, pkt, n);
        if (moved) {
            advance_placed(qp, n);
            progress(qp, now_ns, old_psn);
            n->act |= SR_COMP_RESUME;
        }
        return;
    }
    if (psn != qp->comp.psn) {
        /* Earlier responses of this READ are missing: ask again from the
         * first missing one, once per gap. */
        if (sr_psn_lt(qp->comp.psn, psn) && !sr_psn_lt(qp->comp.psn, w->first_psn) &&
            (!qp->comp.read_retry || qp->comp.read_retry_psn != qp->comp.psn)) {
            qp->comp.read_retry = true;
            qp->comp.read_retry_psn = qp->comp.psn;
            want_rewind(n, qp->comp.psn);
            n->act |= SR_COMP_RESUME;
        }
        e->stats.rx_drop_other++;
        if (moved) {
            progress(qp, now_ns, old_psn);
            n->act |= SR_COMP_RESUME;
        }
        return;
    }
    uint32_t pmtu = sr_qp_pmtu(qp);
    uint32_t idx = (uint32_t)sr_psn_diff(psn, w->first_psn);
    uint32_t off = idx * pmtu;
    uint32_t want = SR_MIN(pmtu, w->total_len - off);
    uint32_t op = SR_OPCODE_OP(pkt->bth.opcode);
    /* A re-requested READ is answered from the retry point on (readsel.h) */
    if (!sr_readsel_op_ok(w, idx, op, sr_readsel_on(qp))) {
        e->stats.rx_drop_other++;
        return;
    }
    /* sent by reference: the responder wrote the sink itself (sr_bulk.h) */
    bool landed = sr_unlikely(w->bulk) && sr_bulk_read_landed(e, pkt);
    if (!landed && (w->bulk || pkt->payload_len != want)) {
        e->stats.rx_drop_other++;
        return;
    }
    if (!landed && !sr_sge_scatter(e, qp->pd, w->wr.sg_list, w->wr.num_sge, off, pkt->payload,
                                   pkt->payload_len)) {
        fail_wqe(qp, w, SR_WC_LOC_PROT_ERR, n);
        return;
    }
    qp->comp.psn = sr_psn_add(psn, 1);
    qp->comp.read_retry = false;
    if (idx == w->npkts - 1)
        wqe_done(qp, w, SR_WC_SUCCESS);
    advance_placed(qp, n);
    progress(qp, now_ns, old_psn);
    n->act |= SR_COMP_RESUME;
}

static void handle_atomic_ack(struct sr_qp *qp, const struct sr_pkt *pkt, uint64_t now_ns,
                              struct sr_comp_next *n)
{
    struct sr_engine *e = qp->eng;
    uint32_t psn = pkt->bth.psn;
    struct sr_swqe *w = wqe_of_psn(qp, psn);
    if (!w ||
        (w->wr.opcode != SR_WR_ATOMIC_CMP_AND_SWP && w->wr.opcode != SR_WR_ATOMIC_FETCH_AND_ADD) ||
        w->state == SWQE_DONE) {
        e->stats.rx_drop_other++;
        return;
    }
    uint32_t old_psn = qp->comp.psn;
    if (sr_psn_lt(qp->comp.psn, w->first_psn))
        ack_through(qp, sr_psn_add(w->first_psn, SR_PSN_MASK), n);
    if (qp->comp.psn != psn) {
        e->stats.rx_drop_other++;
        return;
    }
    uint8_t orig[8];
    memcpy(orig, &pkt->atomic_orig, 8); /* host order, as the local buffer holds it */
    if (!sr_sge_scatter(e, qp->pd, w->wr.sg_list, 1, 0, orig, 8)) {
        fail_wqe(qp, w, SR_WC_LOC_PROT_ERR, n);
        return;
    }
    qp->comp.psn = sr_psn_add(psn, 1);
    qp->comp.read_retry = false;
    wqe_done(qp, w, SR_WC_SUCCESS);
    progress(qp, now_ns, old_psn);
    n->act |= SR_COMP_RESUME;
}

static enum sr_wc_status nak_status(uint8_t code)
{
    switch (code) {
    case SR_NAK_REMOTE_ACCESS:
        return SR_WC_REM_ACCESS_ERR;
    case SR_NAK_REMOTE_OP:
        return SR_WC_REM_OP_ERR;
    default:
        return SR_WC_REM_INV_REQ_ERR;
    }
}

static void handle_ack(struct sr_qp *qp, const struct sr_pkt *pkt, uint64_t now_ns,
                       struct sr_comp_next *n)
{
    struct sr_engine *e = qp->eng;
    uint32_t psn = pkt->bth.psn;
    uint8_t syn = pkt->aeth.syndrome;
    uint32_t old_psn = qp->comp.psn;
    switch (SR_AETH_TYPE(syn)) {
    case SR_AETH_ACK:
        if (ack_through(qp, psn, n))
            progress(qp, now_ns, old_psn);
        n->act |= SR_COMP_RESUME;
        return;
    case SR_AETH_RNR_NAK: {
        e->stats.rnr_naks_rcvd++;
        /* The NAK acknowledges everything before its PSN (IBA 9.7.5.2.8). */
        ack_through(qp, sr_psn_add(psn, SR_PSN_MASK), n);
        sr_qp_retire(qp);
        struct sr_swqe *w = wqe_of_psn(qp, psn);
        if (!w)
            return;
        if (qp->comp.rnr_left == 0) {
            fail_wqe(qp, w, SR_WC_RNR_RETRY_EXC_ERR, n);
            return;
        }
        if (qp->comp.rnr_left != 7) /* 7 = retry forever */
            qp->comp.rnr_left--;
        qp->req.rnr_wait = true;
        qp->req.rnr_until = now_ns + sr_rnr_timer_ns(SR_AETH_VALUE(syn));
        /* A responder that SACKed requests past psn keeps them (ooo.c):
         * the RNR timer resends the holes only (sack.c), not the window
         * behind psn, whose copies would all arrive as duplicates. */
        if (!sr_sack_rnr(qp, psn))
            want_rewind(n, psn); /* resumed by the RNR timer (sr_comp_timer) */
        qp->comp.deadline = SR_NO_DEADLINE;
        sr_engine_activate(e, qp);
        return;
    }
    case SR_AETH_NAK:
        break;
    default:
        e->stats.rx_drop_other++;
        return;
    }

    uint8_t code = SR_AETH_VALUE(syn);
    if (code == SR_NAK_PSN_SEQ) {
        /* The peer is alive and told us where to resume: go back to psn.
         * Only timer expiries consume retry_cnt (a NAK proves progress is
         * possible; counting NAKs would fail long transfers under loss). */
        e->stats.seq_naks_rcvd++;
        if (ack_through(qp, sr_psn_add(psn, SR_PSN_MASK), n))
            progress(qp, now_ns, old_psn);
        want_rewind(n, psn);
        sr_paths_qp_lost(qp, psn, now_ns);
        qp->comp.rtt_resent_ok = true;
        /* What was sent beyond the hole is dropped by the responder and
         * goes again: halve what may be outstanding (RFC 5681 3.2's
         * multiplicative decrease), so the next hole wastes less. */
        uint32_t flight = (uint32_t)sr_psn_diff(qp->req.max_sent, psn);
        uint32_t w = SR_MAX(flight / 2, (uint32_t)SR_REC_WND_INIT);
        if (!qp->req.rec_wnd || w < qp->req.rec_wnd)
            qp->req.rec_wnd = w;
        n->act |= SR_COMP_RESUME;
        return;
    }
    e->stats.err_naks_rcvd++;
    ack_through(qp, sr_psn_add(psn, SR_PSN_MASK), n);
    struct sr_swqe *w = wqe_of_psn(qp, psn);
    if (!w)
        w = first_pending(qp);
    if (w)
        fail_wqe(qp, w, nak_status(code), n);
}

struct sr_comp_next sr_comp_rx(struct sr_qp *qp, const struct sr_pkt *pkt, uint64_t now_ns)
{
    struct sr_engine *e = qp->eng;
    struct sr_comp_next n = {0};
    if (qp->type != SR_QPT_RC && qp->type != SR_QPT_XRC_SEND) {
        e->stats.rx_drop_other++;
        return n;
    }
    if (qp->attr.qp_state < SR_QPS_RTS) {
        e->stats.rx_drop_other++;
        return n;
    }
    /* Only responses to PSNs we sent and have not seen answered count. An
     * ACK may repeat the last acknowledged PSN (comp.psn - 1). */
    uint32_t psn = pkt->bth.psn;
    int32_t ahead = sr_psn_diff(psn, qp->comp.psn);
    qp->comp.peer_sack = pkt->bth.resv7 & SR_BTH_RESV7_SACK;
    if (!qp->comp.peer_sack)
        qp->comp.peer_rph = false; /* it no longer SACKs: no more RPETHs */
    if (pkt->bth.opcode == SR_OP_SACK) {
        /* docs/WIRE.md: taken only by a requester that advertised it, and
         * marked as every response of a responder that SACKs is; its
         * cumulative PSN is an ACK's, its bitmap advisory (sack.c). */
        if (!e->cfg.sack || !qp->comp.peer_sack) {
            e->stats.sack_bad++; /* never agreed: not ours to parse */
            return n;
        }
        if (ahead < -1 || !sr_psn_lt(psn, qp->req.max_sent)) {
            e->stats.rx_drop_other++; /* stale (overtaken) or forged, as for an ACK */
            return n;
        }
        e->stats.sacks_rcvd++;
        if (ahead >= 0)
            handle_ack(qp, pkt, now_ns, &n);
        if (qp->attr.qp_state == SR_QPS_RTS || qp->attr.qp_state == SR_QPS_SQD)
            sr_sack_rx(qp, pkt, &n);
        placed_progress(qp, now_ns, &n);
        n.act |= SR_COMP_RESUME;
        return n;
    }
    if (ahead < -1 || !sr_psn_lt(psn, qp->req.max_sent) ||
        (ahead == -1 && SR_OPCODE_OP(pkt->bth.opcode) != SR_OP_ACK)) {
        e->stats.rx_drop_other++;
        return n;
    }
    switch (SR_OPCODE_OP(pkt->bth.opcode)) {
    case SR_OP_ACK:
        if (ahead == -1 && SR_AETH_TYPE(pkt->aeth.syndrome) == SR_AETH_ACK) {
            e->stats.rx_drop_other++; /* duplicate ACK: nothing new */
            return n;
        }
        handle_ack(qp, pkt, now_ns, &n);
        break;
    case SR_OP_ATOMIC_ACK:
        handle_atomic_ack(qp, pkt, now_ns, &n);
        break;
    default:
        handle_read_resp(qp, pkt, now_ns, &n);
        break;
    }
    sr_sack_acked(qp, now_ns);
    placed_progress(qp, now_ns, &n);
    return n;
}

/* The probe timeout passed with nothing acknowledged. The first probe
 * resends the last packet with AckReq (RFC 8985 7.3): a lost tail, or a
 * lost ACK, is answered in one round trip. If that brings no progress
 * either, the responder has NAKed a hole already and drops the rest
 * silently until it comes (IBA 9.7.5.1.2): the next probe goes back to
 * comp.psn, a few packets per round trip (rec_wnd). Neither consumes
 * retry_cnt, nor restarts the transport timer. */
static void probe(struct sr_qp *qp, struct sr_comp_next *n)
{
    qp->comp.probe_at = 0;
    if (!outstanding(qp) || qp->attr.qp_state < SR_QPS_RTS || qp->attr.qp_state == SR_QPS_ERR)
        return;
    bool sack_due = sr_sack_lost_pending(qp), read_due = sr_readsel_lost_pending(qp);
    if (sack_due || read_due) {
        /* not a probe: the reordering window of a lost hole ran out */
        n->act |= (sack_due ? SR_COMP_SACK : 0) | (read_due ? SR_COMP_READSEL : 0);
        return;
    }
    uint64_t rd = sr_readsel_lost_deadline(qp);
    if (rd && qp->eng->now_ns < rd) {
        /* READ holes wait out a reordering window that grew since the
         * timer was set: a probe now would ask for responses still on
         * their way. The window's end asks for them (readsel.c). */
        sr_comp_probe_by(qp, rd);
        return;
    }
    qp->eng->stats.probes++;
    if (qp->comp.probes < 255)
        qp->comp.probes++;
    if (sr_readsel_probe_holes(qp)) {
        /* READ responses placed past holes: ask for the holes (readsel.c) */
        n->act |= SR_COMP_READSEL | SR_COMP_SACK_ALL;
        return;
    }
    if (sr_sack_probe_holes(qp)) {
        /* SACKs showed what arrived: resend every hole instead (RFC 8985
         * 7.3 probes with new data or the last; the holes are what the
         * responder waits for). */
        n->act |= SR_COMP_SACK | SR_COMP_SACK_ALL;
        return;
    }
    /* A SACK responder keeps what arrives past a hole and answers a
     * probe with a SACK, so every probe to one resends the last packet
     * again (RFC 8985 7.3) rather than the flight: the answer names the
     * holes (sack.c). */
    if (qp->comp.probes == 1 || (qp->eng->cfg.sack && qp->comp.peer_sack)) {
        sr_sack_probe_sent(qp); /* its D-SACK would show it needless */
        n->act |= SR_COMP_PROBE;
        return;
    }
    qp->comp.read_retry = false;
    qp->req.rec_wnd = SR_REC_WND_INIT;
    qp->comp.rtt_resent_ok = false;
    want_rewind(n, qp->comp.psn);
    sr_paths_qp_lost(qp, qp->comp.psn, qp->eng->now_ns);
    n->act |= SR_COMP_RESUME;
}

struct sr_comp_next sr_comp_timer(struct sr_qp *qp, uint64_t now_ns)
{
    struct sr_engine *e = qp->eng;
    struct sr_comp_next n = {0};
    if (qp->req.rnr_wait) {
        if (now_ns < qp->req.rnr_until)
            return n;
        qp->req.rnr_wait = false;
        n.act = SR_COMP_RESUME | SR_COMP_ARM;
        /* the NAKed request among the holes: a SACK sent before the NAK
         * and delayed past it may have marked it again. Not when the NAK
         * went back to it (no SACK had shown anything kept then): the
         * resume resends it, and a second copy would draw a second RNR
         * NAK, a retry spent without its wait (IBA 9.7.5.2.8). */
        if (qp->req.cur_psn != qp->comp.psn && sr_sack_rnr(qp, qp->comp.psn))
            n.act |= SR_COMP_SACK | SR_COMP_SACK_ALL;
        return n;
    }
    if (qp->comp.deadline > now_ns) {
        if (qp->comp.probe_at && qp->comp.probe_at <= now_ns)
            probe(qp, &n);
        return n;
    }
    qp->comp.probe_at = 0;
    if (!outstanding(qp)) {
        qp->comp.deadline = SR_NO_DEADLINE;
        return n;
    }
    e->stats.timeouts++;
    if (qp->comp.retry_left == 0) {
        struct sr_swqe *w = first_pending(qp);
        qp->comp.deadline = SR_NO_DEADLINE;
        if (w)
            fail_wqe(qp, w, SR_WC_RETRY_EXC_ERR, &n);
        return n;
    }
    qp->comp.retry_left--;
    if (sr_sack_timeout_holes(qp)) {
        n.act |= SR_COMP_SACK | SR_COMP_SACK_ALL | SR_COMP_RESUME;
        qp->comp.deadline = now_ns + sr_timeout_ns(qp->attr.timeout);
        return n;
    }
    qp->comp.read_retry = false;
    want_rewind(&n, qp->comp.psn);
    sr_paths_qp_lost(qp, qp->comp.psn, now_ns);
    n.act |= SR_COMP_RESUME;
    qp->req.rec_wnd = SR_REC_WND_INIT;
    qp->comp.rtt_resent_ok = false; /* the first copies may still be answered */
    qp->comp.deadline = now_ns + sr_timeout_ns(qp->attr.timeout);
    return n;
}

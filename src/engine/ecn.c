/* ecn.c: the ECN echo and the hold report between SACK peers (ecn.h,
 * docs/WIRE.md). Kept out of the responder, completer and congestion
 * modules: each calls in at one point, so both can be read (and removed)
 * in one place. */
#include "engine_int.h"

void sr_ecn_ce_rx(struct sr_qp *qp)
{
    /* "Since the last acknowledgement": one flag, cleared by the next
     * response, whichever PSN it acknowledges. */
    qp->resp.ce_pending = true;
}

uint8_t sr_ecn_hold_code(uint64_t hold_ns)
{
    /* 3-bit exponent e, 2-bit mantissa m: m us for e = 0, else
     * (4 + m) << (e - 1) us, 1 us to 448 us. Rounded down and saturated:
     * a report is never longer than the hold, so the requester never
     * takes off more than the responder's own time. */
    uint64_t us = hold_ns / 1000;
    if (us < 4)
        return (uint8_t)us;
    if (us >= 448)
        return SR_ECN_HOLD_MASK;
    unsigned e = 1;
    while ((us >> (e - 1)) >= 8)
        e++;
    return (uint8_t)(e << 2 | ((us >> (e - 1)) - 4));
}

uint64_t sr_ecn_hold_ns(uint8_t code)
{
    unsigned e = (code & SR_ECN_HOLD_MASK) >> 2, m = code & 3;
    uint64_t us = e ? (uint64_t)(4 + m) << (e - 1) : m;
    return us * 1000;
}

void sr_ecn_echo_tx(struct sr_qp *qp, const struct sr_pkt *pkt, uint8_t *hdr)
{
    /* The hold report: on a positive ACK (the one a held ACK leaves as),
     * Resv7 bits 4..0, beside the agreement bit. */
    if ((pkt->bth.opcode & 0x1f) == SR_OP_ACK && SR_AETH_TYPE(pkt->aeth.syndrome) == SR_AETH_ACK) {
        uint8_t code = sr_ecn_hold_code(qp->resp.ack.hold_ns);
        if (code)
            qp->eng->stats.ack_holds_sent++;
        hdr[8] |= code;
    }
    qp->resp.ack.hold_ns = 0;
    if (!qp->resp.ce_pending)
        return;
    qp->resp.ce_pending = false;
    qp->eng->stats.ece_sent++;
    if (pkt->bth.opcode == SR_OP_SACK) {
        /* SACKETH byte 0 (docs/WIRE.md): the flags */
        hdr[sr_opcode_info(SR_OP_SACK)->off[SR_HDR_SACKETH]] |= SR_SACK_F_ECE;
        return;
    }
    hdr[8] |= SR_BTH_RESV7_ECE; /* Resv7, covered by the ICRC (IBA 9.2) */
}

void sr_ecn_echo_rx(struct sr_qp *qp, const struct sr_pkt *pkt)
{
    /* Only from a responder that agreed, to a requester that did: a
     * standard responder's reserved bits mean nothing (IBA 9.2: ignored on
     * receipt). */
    bool agreed = qp->eng->cfg.sack && (pkt->bth.resv7 & SR_BTH_RESV7_SACK);
    bool ece = pkt->bth.opcode == SR_OP_SACK ? pkt->sack.flags & SR_SACK_F_ECE
                                             : pkt->bth.resv7 & SR_BTH_RESV7_ECE;
    qp->comp.ece = agreed && ece;
    if (qp->comp.ece)
        qp->eng->stats.ece_rcvd++;
    qp->comp.peer_hold_ns = 0;
    if (agreed && (pkt->bth.opcode & 0x1f) == SR_OP_ACK &&
        SR_AETH_TYPE(pkt->aeth.syndrome) == SR_AETH_ACK)
        qp->comp.peer_hold_ns = sr_ecn_hold_ns(pkt->bth.resv7 & SR_ECN_HOLD_MASK);
    if (qp->comp.peer_hold_ns)
        qp->eng->stats.ack_holds_rcvd++;
}

uint64_t sr_ecn_take_hold(struct sr_qp *qp)
{
    uint64_t h = qp->comp.peer_hold_ns;
    qp->comp.peer_hold_ns = 0;
    return h;
}

bool sr_ecn_take(struct sr_qp *qp)
{
    bool ece = qp->comp.ece;
    qp->comp.ece = false;
    return ece;
}

void sr_ecn_echo_done(struct sr_qp *qp, uint64_t now_ns)
{
    qp->comp.peer_hold_ns = 0;
    if (!sr_ecn_take(qp) || !qp->cong.on)
        return;
    enum sr_qp_state s = qp->attr.qp_state;
    if (s != SR_QPS_RTS && s != SR_QPS_SQD)
        return;
    /* A SACK that moved nothing cumulatively, a duplicate ACK: the mark
     * still tells of a queue. No bytes and no RTT sample. */
    sr_cc_on_ack(&qp->cong.cc, 0, 0, true, now_ns);
    if (sr_cc_next_deadline(&qp->cong.cc) != SR_CC_NO_DEADLINE)
        sr_engine_activate(qp->eng, qp);
}

uint64_t sr_ecn_hold_taken_ns(const struct sr_qp *qp)
{
    return qp->cong.on ? sr_cc_nscc_hold_sub_ns(&qp->cong.cc) : 0;
}

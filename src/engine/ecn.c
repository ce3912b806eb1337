/* ecn.c: the ECN echo between SACK peers (ecn.h, docs/WIRE.md). Kept out
 * of the responder, completer and congestion modules: each calls in at one
 * point, so the echo can be read (and removed) in one place. */
#include "engine_int.h"

void sr_ecn_ce_rx(struct sr_qp *qp)
{
    /* "Since the last acknowledgement": one flag, cleared by the next
     * response, whichever PSN it acknowledges. */
    qp->resp.ce_pending = true;
}

void sr_ecn_echo_tx(struct sr_qp *qp, const struct sr_pkt *pkt, uint8_t *hdr)
{
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
}

bool sr_ecn_take(struct sr_qp *qp)
{
    bool ece = qp->comp.ece;
    qp->comp.ece = false;
    return ece;
}

void sr_ecn_echo_done(struct sr_qp *qp, uint64_t now_ns)
{
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

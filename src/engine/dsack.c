/* dsack.c: the responder's D-SACK (RFC 2883; docs/WIRE.md). A request
 * that arrives again after the responder received it (executed already,
 * or kept out of order) is reported to a SACK requester with a SACK whose
 * D-SACK flag is set and whose SACKETH names that PSN. The requester
 * learns that its resend was not needed and widens its reordering window
 * (sack.c, RFC 8985 6.2).
 *
 * The report is a SACK of its own: the cumulative PSN an ACK would carry
 * and one word of empty bitmap. Marks are only ever added from a bitmap
 * (sr_sack_sb_mark), so an empty one takes nothing from what the
 * responder's other SACKs said, and a requester that does not know the
 * flag (SACKETH flags and reserved bytes are ignored on receipt) sees a
 * cumulative acknowledgement and nothing else. Only to a requester that
 * advertised SACKs. */
#include "engine_int.h"

bool sr_dsack_send(struct sr_qp *qp, uint32_t psn)
{
    static const uint8_t empty[8];
    struct sr_engine *e = qp->eng;
    if (!e->cfg.sack || !qp->resp.peer_sack)
        return false;
    /* a held ACK goes first, so acknowledgements stay in order (ack.h) */
    sr_resp_ack_first(qp, SR_ACK_EV_RESPONSE, e->now_ns);
    struct sr_pkt p = {0};
    p.bth.opcode = SR_OP_SACK;
    p.bth.pkey = 0xffff;
    p.bth.dest_qp = qp->attr.dest_qp_num;
    p.bth.psn = sr_psn_add(qp->resp.epsn, SR_PSN_MASK); /* cumulative, as an ACK's */
    p.aeth.syndrome = SR_AETH_ACK | SR_AETH_NO_CREDIT_LIMIT;
    p.aeth.msn = qp->resp.msn & SR_PSN_MASK;
    p.sack.flags = SR_SACK_F_DSACK | SR_SACK_F_RPH;
    p.sack.base_psn = sr_psn_add(qp->resp.epsn, 1); /* as any softrdma SACK's */
    p.sack.dsack_psn = psn & SR_PSN_MASK;
    p.payload_len = sizeof(empty);
    struct sr_iov iov = {.base = empty, .len = sizeof(empty)};
    e->stats.dsacks_sent++;
    sr_engine_tx(e, qp, &p, &iov, 1, qp->attr.dgid);
    return true;
}

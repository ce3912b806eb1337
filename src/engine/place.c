/* place.c: which out-of-order RDMA WRITE pieces the responder writes to
 * memory at once (place.h), and where.
 *
 * IBA 9.7.5.1 checks a request when it is the expected one. A piece past
 * a hole is placed only when every check that applies to it can be made
 * already and passes, the same ones in-order processing makes (IBA
 * 9.7.5.1: the QP's remote write access, the RETH's length and the
 * R_Key, bounds and access of the range, re-resolved per piece as in
 * resp.c's check_rkey). Everything else is kept as a copy and checked in
 * order, so that its NAK, if any, comes in sequence. A piece whose target
 * is not known (a MIDDLE whose FIRST has not been seen) is never placed by
 * guesswork. As in IRN (Mittal et al., SIGCOMM 2018, section 5), each
 * piece locates itself: a FIRST or ONLY by its RETH, a MIDDLE by its
 * message's RETH plus (PSN - FIRST's PSN) x PMTU (a FIRST and a MIDDLE
 * carry exactly one PMTU; the decoder refuses others, which are kept and
 * NAKed in order).
 *
 * A SEND piece from a requester that names its receive WQE and offset
 * (the RPETH, docs/WIRE.md) is scattered into that WQE at once
 * (sr_place_send): receive WQEs are taken in order, one per SEND or WRITE
 * with immediate, so the WQE the RPETH's message number names is the
 * posted one that many places behind the head of the receive queue, or the
 * one being filled. Its completion and byte count still come in order, and
 * in-order processing checks that the RPETH agrees (resp.c check_length).
 *
 * What is not placed, and why:
 * - a LAST, and an ONLY that asks for an acknowledgement (a softrdma
 *   requester's last piece of a WRITE split into ONLYs, docs/WIRE.md):
 *   the last byte of a WRITE is written after the bytes before it, so an
 *   application that polls it sees the whole message;
 * - SENDs without an RPETH, to a shared receive queue (its WQEs are
 *   taken by whichever QP comes first) or beyond the receives posted (RNR
 *   in order);
 * - READ requests and atomics (executed in order, once: IBA 9.7.5.1.4),
 *   XRC (its PD comes from the XRCETH's SRQ, looked up in order) and
 *   same-host references (ooo.c keeps none).
 * The bytes a placed piece holds are kept by later writes in PSN order
 * only for RDMA WRITEs (sr_ooo_write): a SEND scattered into a receive
 * buffer that a later placed WRITE targets overwrites it (docs/WIRE.md). */
#include "engine_int.h"
#include "place.h"

static bool write_ok(const struct sr_qp *qp)
{
    /* the QP's remote write enable (IBA 11.2.5), as check_op_valid */
    return qp->type == SR_QPT_RC && (qp->attr.qp_access_flags & SR_ACCESS_REMOTE_WRITE);
}

static uint8_t *piece(struct sr_qp *qp, uint32_t rkey, uint64_t va, uint32_t len)
{
    return sr_rkey_check(qp->eng, qp, qp->pd, rkey, va, len, SR_ACCESS_REMOTE_WRITE);
}

/* A MIDDLE at psn of the message whose FIRST is at first_psn, with the
 * RETH (va, len): its address, if it lies strictly inside the message
 * (a MIDDLE is never the message's last packet). */
static bool middle_at(uint32_t first_psn, uint64_t va, uint32_t len, uint32_t psn, uint32_t pmtu,
                      uint32_t payload_len, uint64_t *out)
{
    int32_t k = sr_psn_diff(psn, first_psn);
    if (k <= 0)
        return false;
    uint64_t off = (uint64_t)k * pmtu;
    if (off + payload_len >= len)
        return false;
    *out = va + off;
    return true;
}

uint8_t *sr_place_target(struct sr_qp *qp, const struct sr_pkt *pkt,
                         struct sr_place_first firsts[SR_PLACE_FIRSTS])
{
    const struct sr_opcode_info *info = sr_opcode_info(pkt->bth.opcode);
    if (!info || !(info->flags & SR_OPF_WRITE) || !pkt->payload_len || !write_ok(qp))
        return NULL;
    uint32_t pmtu = sr_qp_pmtu(qp);
    if (info->flags & SR_OPF_ONLY) {
        /* check_length: an ONLY carries exactly its RETH's length */
        if (pkt->bth.ack_req || pkt->payload_len != pkt->reth.dma_len)
            return NULL;
        return piece(qp, pkt->reth.rkey, pkt->reth.va, pkt->payload_len);
    }
    if (info->flags & SR_OPF_FIRST) {
        uint32_t dma = pkt->reth.dma_len;
        if (dma > SR_MAX_MSG_LEN || dma <= pkt->payload_len)
            return NULL;
        /* the whole message's range is checked at its FIRST, as in order */
        if (!piece(qp, pkt->reth.rkey, pkt->reth.va, dma))
            return NULL;
        uint8_t *t = piece(qp, pkt->reth.rkey, pkt->reth.va, pkt->payload_len);
        if (!t)
            return NULL;
        /* the oldest entry makes room (the window rarely holds more than
         * one message's FIRST ahead of the hole) */
        uint32_t slot = 0;
        for (uint32_t i = 0; i < SR_PLACE_FIRSTS; i++) {
            if (!firsts[i].valid) {
                slot = i;
                break;
            }
            if (sr_psn_lt(firsts[i].psn, firsts[slot].psn))
                slot = i;
        }
        firsts[slot] = (struct sr_place_first){.valid = true,
                                               .psn = pkt->bth.psn,
                                               .rkey = pkt->reth.rkey,
                                               .va = pkt->reth.va,
                                               .len = dma};
        return t;
    }
    if (!(info->flags & SR_OPF_MIDDLE))
        return NULL; /* a LAST: the message's last byte is written in order */
    uint64_t va;
    /* The message under way in order (its FIRST executed, resp.c keeps
     * where the expected PSN writes), */
    if (qp->resp.msg == SR_OPF_WRITE &&
        middle_at(qp->resp.epsn, qp->resp.write_va, qp->resp.write_left, pkt->bth.psn, pmtu,
                  pkt->payload_len, &va))
        return piece(qp, qp->resp.write_rkey, va, pkt->payload_len);
    /* or a FIRST seen out of order, still ahead of the expected PSN. */
    for (uint32_t i = 0; i < SR_PLACE_FIRSTS; i++) {
        const struct sr_place_first *f = &firsts[i];
        if (f->valid && sr_psn_lt(qp->resp.epsn, f->psn) &&
            middle_at(f->psn, f->va, f->len, pkt->bth.psn, pmtu, pkt->payload_len, &va))
            return piece(qp, f->rkey, va, pkt->payload_len);
    }
    return NULL;
}

bool sr_place_send(struct sr_qp *qp, const struct sr_pkt *pkt)
{
    if (!(pkt->hdrs & SR_HDR_BIT(SR_HDR_RPETH)) || !pkt->payload_len || qp->type != SR_QPT_RC ||
        qp->srq)
        return false;
    /* messages between the one in order and this one's: each takes the
     * next receive WQE */
    int32_t d = (int32_t)(pkt->rph.msg - qp->resp.rq_msgs);
    const struct sr_rwqe *w;
    if (d == -1 && qp->resp.have_rwqe && qp->resp.msg == SR_OPF_SEND)
        w = (const struct sr_rwqe *)qp->resp.rwqe_buf; /* the SEND being received */
    else if (d >= 0 && (uint32_t)d < qp->rq.count)
        w = sr_rq_at(&qp->rq, (uint32_t)d);
    else
        return false;
    /* a piece that would not fit is left to check_length's error, in order */
    if ((uint64_t)pkt->rph.off + pkt->payload_len > w->total_len)
        return false;
    /* the WQE's own keys, as in order (resp.c execute); one that fails
     * leaves the piece to fail there too */
    if (!sr_sge_scatter(qp->eng, qp->pd, w->sge, w->num_sge, pkt->rph.off, pkt->payload,
                        pkt->payload_len))
        return false;
    qp->eng->stats.ooo_send_placed++;
    return true;
}

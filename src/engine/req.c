/* req.c: the requester. Turns send work requests into request packets:
 * segmentation at the path MTU, RETH/ImmDt/IETH/AtomicETH/DETH per opcode,
 * the send window, max_rd_atomic and fences (IBA 9.7.4, 10.8.3.3), local
 * protection checks, and go-back-N rewinds ordered by the completer.
 *
 * Per WQE the state machine is POSTED -> SENT -> DONE (DONE is set by the
 * completer, or here for UC/UD, which are complete once sent). */
#include "engine_int.h"

static bool is_atomic(enum sr_wr_opcode op)
{
    return op == SR_WR_ATOMIC_CMP_AND_SWP || op == SR_WR_ATOMIC_FETCH_AND_ADD;
}

uint32_t sr_swqe_npkts(const struct sr_qp *qp, const struct sr_send_wr *wr, uint32_t len)
{
    if (sr_wr_is_local(wr->opcode))
        return 0; /* nothing goes on the wire */
    if (qp->type == SR_QPT_UD || is_atomic(wr->opcode) || wr->opcode == SR_WR_ATOMIC_WRITE)
        return 1;
    uint32_t pmtu = sr_qp_pmtu(qp);
    return len ? (len + pmtu - 1) / pmtu : 1;
}

void sr_req_rewind(struct sr_qp *qp, uint32_t psn)
{
    /* Karn: an ACK after a resend may answer either copy, so the packet
     * being timed gives no sample. */
    qp->comp.rtt_timing = false;
    for (uint32_t i = qp->sq_head; i != qp->sq_tail; i++) {
        struct sr_swqe *w = sr_sq_at(qp, i);
        if (sr_psn_lt(psn, sr_psn_add(w->first_psn, w->npkts))) {
            qp->req.cur = i;
            qp->req.cur_psn = sr_psn_lt(psn, w->first_psn) ? w->first_psn : psn;
            return;
        }
    }
    qp->req.cur = qp->sq_tail;
    qp->req.cur_psn = qp->req.next_psn;
}

/* UC/UD requester errors move the QP to SQE (IBA 10.3.1.6): this WQE
 * completes with its error, later ones flush, receives keep working. */
static void send_queue_error(struct sr_qp *qp, struct sr_swqe *w, enum sr_wc_status status)
{
    w->status = (uint8_t)status;
    w->state = SWQE_DONE;
    if (sr_qp_reliable(qp)) {
        sr_qp_to_error(qp);
        return;
    }
    for (uint32_t i = qp->req.cur + 1; i != qp->sq_tail; i++) {
        struct sr_swqe *o = sr_sq_at(qp, i);
        o->status = SR_WC_WR_FLUSH_ERR;
        o->state = SWQE_DONE;
    }
    qp->req.cur = qp->sq_tail;
    qp->attr.qp_state = SR_QPS_SQE;
    sr_qp_retire(qp);
}

/* Local checks done once, when a WQE is first transmitted (IBA 10.8.3:
 * local protection and length errors complete the WQE in error). */
static enum sr_wc_status check_local(struct sr_qp *qp, struct sr_swqe *w)
{
    struct sr_engine *e = qp->eng;
    const struct sr_send_wr *wr = &w->wr;
    uint64_t total = 0;
    for (uint32_t i = 0; i < wr->num_sge; i++)
        total += wr->sg_list[i].length;
    if (total > SR_MAX_MSG_LEN)
        return SR_WC_LOC_LEN_ERR;
    if (qp->type == SR_QPT_UD && total > sr_qp_pmtu(qp))
        return SR_WC_LOC_LEN_ERR;
    if (is_atomic(wr->opcode) && (wr->num_sge != 1 || wr->sg_list[0].length != 8))
        return SR_WC_LOC_LEN_ERR;
    if (wr->opcode == SR_WR_ATOMIC_WRITE && wr->num_sge)
        return SR_WC_LOC_LEN_ERR; /* its 8 bytes are the WR's, never an SGE's */
    if (sr_wr_is_rd_atomic(wr->opcode) && qp->attr.max_rd_atomic == 0)
        return SR_WC_LOC_QP_OP_ERR;
    if (wr->send_flags & SR_SEND_INLINE)
        return SR_WC_SUCCESS;
    uint32_t need = sr_wr_is_rd_atomic(wr->opcode) ? SR_ACCESS_LOCAL_WRITE : 0;
    for (uint32_t i = 0; i < wr->num_sge; i++) {
        const struct sr_sge *s = &wr->sg_list[i];
        if (s->length && !sr_mr_check(e, qp->pd, s->lkey, s->addr, s->length, need))
            return SR_WC_LOC_PROT_ERR;
    }
    return SR_WC_SUCCESS;
}

/* Gather [off, off+len) of the WQE's data into iov; false if an SGE no
 * longer passes its protection check. */
static bool gather(struct sr_qp *qp, const struct sr_swqe *w, uint32_t off, uint32_t len,
                   struct sr_iov *iov, uint32_t *cnt)
{
    *cnt = 0;
    if (!len)
        return true;
    if (w->wr.send_flags & SR_SEND_INLINE) {
        iov[0].base = w->inline_buf + off;
        iov[0].len = len;
        *cnt = 1;
        return true;
    }
    for (uint32_t i = 0; i < w->wr.num_sge && len; i++) {
        const struct sr_sge *s = &w->wr.sg_list[i];
        if (off >= s->length) {
            off -= s->length;
            continue;
        }
        uint32_t n = SR_MIN(len, s->length - off);
        const uint8_t *p = sr_mr_check(qp->eng, qp->pd, s->lkey, s->addr + off, n, 0);
        if (!p)
            return false;
        iov[*cnt].base = p;
        iov[*cnt].len = n;
        (*cnt)++;
        len -= n;
        off = 0;
    }
    return len == 0;
}

static uint8_t seg_opcode(uint8_t first, uint8_t middle, uint8_t last, uint8_t only, uint32_t idx,
                          uint32_t npkts)
{
    if (npkts == 1)
        return only;
    if (idx == 0)
        return first;
    return idx == npkts - 1 ? last : middle;
}

/* Build and send the packet of w at qp->req.cur_psn. Returns the number of
 * PSNs it consumed (a READ request consumes its responses' PSNs), or 0 when
 * the WQE failed. */
static uint32_t send_one(struct sr_qp *qp, struct sr_swqe *w, uint32_t window, uint64_t now_ns,
                         bool probe)
{
    const struct sr_send_wr *wr = &w->wr;
    uint32_t pmtu = sr_qp_pmtu(qp);
    uint32_t idx = (uint32_t)sr_psn_diff(qp->req.cur_psn, w->first_psn);
    uint32_t off = idx * pmtu;
    uint8_t tbase = qp->type == SR_QPT_RC         ? SR_OP_RC
                    : qp->type == SR_QPT_UC       ? SR_OP_UC
                    : qp->type == SR_QPT_XRC_SEND ? SR_OP_XRC
                                                  : SR_OP_UD;
    struct sr_pkt p = {0};
    p.bth.pkey = 0xffff;
    p.bth.dest_qp = qp->attr.dest_qp_num;
    p.bth.psn = qp->req.cur_psn;
    p.xrc_srqn = wr->xrc_remote_srqn & SR_PSN_MASK; /* encoded only on XRC requests */
    if (qp->eng->cfg.sack && sr_qp_reliable(qp))
        p.bth.resv7 = SR_BTH_RESV7_SACK; /* this requester takes SACKs (docs/WIRE.md) */
    const uint8_t *dgid = qp->attr.dgid;
    uint32_t consumed = 1;
    uint32_t len = 0;
    bool last = idx == w->npkts - 1;

    switch (wr->opcode) {
    case SR_WR_SEND:
    case SR_WR_SEND_WITH_IMM:
    case SR_WR_SEND_WITH_INV: {
        uint8_t l = SR_OP_SEND_LAST, o = SR_OP_SEND_ONLY;
        if (wr->opcode == SR_WR_SEND_WITH_IMM) {
            l = SR_OP_SEND_LAST_IMM;
            o = SR_OP_SEND_ONLY_IMM;
            p.imm = wr->imm;
        } else if (wr->opcode == SR_WR_SEND_WITH_INV) {
            l = SR_OP_SEND_LAST_INV;
            o = SR_OP_SEND_ONLY_INV;
            p.ieth_rkey = wr->invalidate_rkey;
        }
        p.bth.opcode = tbase | seg_opcode(SR_OP_SEND_FIRST, SR_OP_SEND_MIDDLE, l, o, idx, w->npkts);
        len = SR_MIN(pmtu, w->total_len - off);
        if (qp->type == SR_QPT_RC && qp->comp.peer_rph && qp->eng->cfg.sack && !w->bulk) {
            /* where the responder may place it before the packets ahead
             * of it arrive (docs/WIRE.md, the RPETH) */
            p.bth.resv7 |= SR_BTH_RESV7_RPH;
            p.rph.msg = w->rq_msg;
            p.rph.off = off;
        }
        if (qp->type == SR_QPT_UD) {
            /* IBA 10.2.4: a Q_Key with the high bit set means "use the QP's". */
            p.deth.qkey = (wr->ah.qkey & 0x80000000u) ? qp->attr.qkey : wr->ah.qkey;
            p.deth.src_qp = qp->qpn;
            p.bth.dest_qp = wr->ah.dest_qpn;
            dgid = wr->ah.dgid;
        }
        break;
    }
    case SR_WR_RDMA_WRITE:
    case SR_WR_RDMA_WRITE_WITH_IMM: {
        uint8_t l = SR_OP_WRITE_LAST, o = SR_OP_WRITE_ONLY;
        if (wr->opcode == SR_WR_RDMA_WRITE_WITH_IMM) {
            l = SR_OP_WRITE_LAST_IMM;
            o = SR_OP_WRITE_ONLY_IMM;
            p.imm = wr->imm;
        }
        len = SR_MIN(pmtu, w->total_len - off);
        if (w->write_only) {
            /* each packet a WRITE of its own piece (shape_wqe) */
            p.bth.opcode = tbase | SR_OP_WRITE_ONLY;
            p.reth =
                (struct sr_reth){.va = wr->remote_addr + off, .rkey = wr->rkey, .dma_len = len};
            break;
        }
        p.bth.opcode =
            tbase | seg_opcode(SR_OP_WRITE_FIRST, SR_OP_WRITE_MIDDLE, l, o, idx, w->npkts);
        p.reth = (struct sr_reth){.va = wr->remote_addr, .rkey = wr->rkey, .dma_len = w->total_len};
        break;
    }
    case SR_WR_RDMA_READ:
        /* Responses placed out of order already: only the holes after
         * cur_psn are asked for (readsel.c). */
        consumed = sr_readsel_rerequest(qp, w, qp->req.cur_psn);
        if (consumed)
            return consumed;
        /* A re-request after lost responses asks for the rest only
         * (IBA 9.7.4: it restarts at the first missing PSN). */
        p.bth.opcode = tbase | SR_OP_READ_REQ;
        p.reth = (struct sr_reth){
            .va = wr->remote_addr + off, .rkey = wr->rkey, .dma_len = w->total_len - off};
        consumed = w->npkts - idx;
        last = true;
        break;
    case SR_WR_ATOMIC_CMP_AND_SWP:
    case SR_WR_ATOMIC_FETCH_AND_ADD:
        p.bth.opcode =
            tbase | (wr->opcode == SR_WR_ATOMIC_CMP_AND_SWP ? SR_OP_CMP_SWAP : SR_OP_FETCH_ADD);
        p.atomic = (struct sr_atomic_eth){
            .va = wr->remote_addr,
            .rkey = wr->rkey,
            .swap_add = wr->opcode == SR_WR_ATOMIC_CMP_AND_SWP ? wr->swap : wr->compare_add,
            .compare = wr->opcode == SR_WR_ATOMIC_CMP_AND_SWP ? wr->compare_add : 0};
        break;
    case SR_WR_ATOMIC_WRITE:
        p.bth.opcode = tbase | SR_OP_ATOMIC_WRITE;
        p.reth = (struct sr_reth){.va = wr->remote_addr, .rkey = wr->rkey, .dma_len = 8};
        len = 8;
        break;
    default:
        return 0;
    }

    const struct sr_opcode_info *info = sr_opcode_info(p.bth.opcode);
    if (last && (info->flags & SR_OPF_SOLICIT) && (wr->send_flags & SR_SEND_SOLICITED))
        p.bth.se = true;
    /* Ask for an ACK at the end of each message and every w->ack_every
     * packets of a WQE (shape_wqe), so ACKs are coalesced but the window
     * keeps moving (IBA 9.7.5.1.1); more often when the pacer spaces the
     * packets out (sr_cong_ack_every), so the transport timer does not
     * count the pacer's gaps. */
    /* Also on the packet that fills the window (a recovery window is
     * small: the responder must answer it for the window to open), and on
     * a probe. */
    uint32_t span = (uint32_t)sr_psn_diff(sr_psn_add(p.bth.psn, consumed), qp->comp.psn);
    bool fills = span >= window || sr_qcap_fills(qp, span, w->ack_every);
    if (sr_qp_reliable(qp) && (info->flags & (SR_OPF_SEND | SR_OPF_WRITE | SR_OPF_ATOMIC_WRITE)) &&
        (last || (idx + 1) % sr_cong_ack_every(qp, w->ack_every) == 0 || fills || probe))
        p.bth.ack_req = true;

    struct sr_iov iov[SR_MAX_SGE];
    uint8_t ref[SR_MAX_SGE * SR_BULK_SEG_LEN];
    uint32_t iov_cnt = 0;
    if (w->bulk)
        len = w->total_len; /* the whole message, named by reference (bulk.c) */
    if (wr->opcode == SR_WR_ATOMIC_WRITE) {
        iov[0] = (struct sr_iov){.base = &wr->compare_add, .len = 8};
        iov_cnt = 1;
    } else if (!gather(qp, w, off, len, iov, &iov_cnt)) {
        send_queue_error(qp, w, SR_WC_LOC_PROT_ERR);
        return 0;
    }
    if (w->bulk)
        len = sr_bulk_payload_len(wr->opcode, sr_bulk_encode(iov, &iov_cnt, ref));
    p.payload_len = len;
    bool fresh = !sr_psn_lt(p.bth.psn, qp->req.max_sent);
    if (fresh)
        qp->req.max_sent = sr_psn_add(p.bth.psn, consumed);
    else
        qp->eng->stats.retransmits++;
    if (sr_qp_reliable(qp) && (fresh || (qp->comp.rtt_resent_ok && !probe)) &&
        (p.bth.ack_req || sr_wr_is_rd_atomic(wr->opcode)))
        sr_comp_rtt_start(qp, sr_psn_add(p.bth.psn, consumed - 1), now_ns);
    qp->eng->bulk.tx = w->bulk;
    sr_engine_tx(qp->eng, qp, &p, iov, iov_cnt, dgid);
    return consumed;
}

/* Decided once per WQE, when it starts (a rewind keeps it).
 *
 * Both follow the transport option sr_engine_cfg.trains (sr_engine.h).
 *
 * How often it asks for an ACK: sr_ack_req_every (ack.h), more rarely to
 * a peer reached by trains (UDP with GSO, not a shared-memory peer).
 * There, one ACK request per 256 packets rather than per 32 takes a fifth
 * off a 1 MiB ping-pong (ib_write_lat and ib_send_lat typical;
 * ib_write_lat's 99th percentile 0.4 ms against 2.3) at the same
 * bandwidth; through shared memory it would cost ib_send_bw 1 MiB 3..9%.
 *
 * Whether it goes as one WRITE ONLY per packet: an RC (or XRC) RDMA WRITE
 * of 2..ack_every packets to a peer reached by trains, whose FIRST would be
 * 16 bytes longer than its MIDDLEs and end a train. No more packets than
 * that: a responder takes every piece for a message's end, and an ACK
 * asked for at an earlier piece would be held from there and could leave
 * ahead of a ping-pong's reply; longer WRITEs keep FIRST/MIDDLE/LAST,
 * their ACK requests on MIDDLEs. Only a WRITE without immediate: the
 * responder of a WRITE with immediate reports the message's length in its
 * receive completion, and would see only the last piece. UC keeps whole
 * messages: a lost packet there drops its message, and pieces would land
 * around the hole. Each piece's RETH covers that piece: the responder
 * checks the R_Key per piece, and a range that goes bad partway writes the
 * pieces before it (an errored WRITE leaves its target undefined). */
static void shape_wqe(const struct sr_qp *qp, struct sr_swqe *w)
{
    const struct sr_engine_cfg *cfg = &qp->eng->cfg;
    enum sr_wr_opcode op = w->wr.opcode;
    bool trains = cfg->trains && w->npkts > 1 && sr_qp_reliable(qp) && !sr_wr_is_rd_atomic(op) &&
                  (!cfg->trains_to || cfg->trains_to(cfg->ops_ctx, qp->attr.dgid));
    /* With a congestion window the ACK requests follow it (congestion.c):
     * one per window would stall the QP a round trip per window. */
    w->ack_every = sr_ack_req_every(trains, sr_timeout_ns(qp->attr.timeout),
                                    sr_cong_window(qp, cfg->window_pkts));
    w->write_only =
        trains && op == SR_WR_RDMA_WRITE && w->npkts <= w->ack_every && !cfg->whole_writes;
    w->shaped = true;
}

void sr_req_run(struct sr_qp *qp, uint64_t now_ns)
{
    enum sr_qp_state s = qp->attr.qp_state;
    if ((s != SR_QPS_RTS && s != SR_QPS_SQD) || qp->req.rnr_wait)
        return;
    /* Acknowledgements (e.g. implied by READ responses after a rewind) may
     * have overtaken the send pointer: never resend what is acknowledged,
     * and never let a stale pointer read as a full window. */
    if (sr_qp_reliable(qp) && sr_psn_lt(qp->req.cur_psn, qp->comp.psn))
        sr_req_rewind(qp, qp->comp.psn);
    uint32_t window = qp->eng->cfg.window_pkts;
    if (qp->req.rec_wnd && qp->req.rec_wnd < window)
        window = qp->req.rec_wnd;
    window = sr_cong_window(qp, window);
    if (sr_qp_reliable(qp))
        sr_qcap_update(qp, now_ns);
    bool sent = false, local_done = false;
    while (qp->req.cur != qp->sq_tail && qp->attr.qp_state == s) {
        struct sr_swqe *w = sr_sq_at(qp, qp->req.cur);
        if (sr_wr_is_local(w->wr.opcode)) {
            /* Bind and local invalidate act when the send queue reaches
             * them, in order, and take no PSN; they complete in order
             * behind earlier WQEs (sr_qp_retire). A rewind that passes
             * one again finds it done. */
            if (w->state != SWQE_DONE) {
                if (s == SR_QPS_SQD)
                    break;
                if ((w->wr.send_flags & SR_SEND_FENCE) && qp->req.rd_atomic)
                    break; /* IBA 10.8.3.3 */
                enum sr_wc_status st = sr_mw_local_op(qp, &w->wr);
                if (st != SR_WC_SUCCESS) {
                    if (qp->sq_head != qp->req.cur && sr_qp_reliable(qp))
                        break; /* as check_local's errors: after earlier WQEs */
                    send_queue_error(qp, w, st);
                    return;
                }
                w->state = SWQE_DONE;
                local_done = true;
            }
            qp->req.cur++;
            if (qp->req.cur != qp->sq_tail)
                qp->req.cur_psn = sr_sq_at(qp, qp->req.cur)->first_psn;
            continue;
        }
        /* not yet started (a rewind to the start of a WQE that was partly
         * sent does not start it again: under SQD it would stay stopped) */
        bool fresh = w->state == SWQE_POSTED && !w->shaped && qp->req.cur_psn == w->first_psn;
        if (sr_qp_reliable(qp)) {
            uint32_t span = (uint32_t)sr_psn_diff(qp->req.cur_psn, qp->comp.psn);
            if (span >= window) {
                qp->qcap.limited = true;
                break;
            }
            if (sr_qcap_blocks(qp, span))
                break; /* the queue it builds is at its cap (qcap.h) */
        }
        if (fresh) {
            /* SQD: nothing new starts while draining (IBA 10.3.1.5). */
            if (s == SR_QPS_SQD)
                break;
            /* IBA 10.8.3.3: a fenced WQE waits for earlier READs/atomics. */
            if ((w->wr.send_flags & SR_SEND_FENCE) && qp->req.rd_atomic)
                break;
            if (sr_wr_is_rd_atomic(w->wr.opcode) && qp->req.rd_atomic >= qp->attr.max_rd_atomic &&
                qp->attr.max_rd_atomic)
                break;
            enum sr_wc_status st = check_local(qp, w);
            if (st != SR_WC_SUCCESS) {
                /* Completions are in order: the error waits until every
                 * earlier WQE has completed (the completer runs us again). */
                if (qp->sq_head != qp->req.cur && sr_qp_reliable(qp))
                    break;
                send_queue_error(qp, w, st);
                return;
            }
            shape_wqe(qp, w);
        }
        if (sr_cong_gate(qp, w, now_ns))
            break; /* paced: resumes at its deadline (congestion.c) */
        uint32_t used = send_one(qp, w, window, now_ns, false);
        if (!used)
            return; /* the WQE failed; the QP left RTS */
        sr_cong_sent(qp, now_ns);
        sent = true;
        qp->req.cur_psn = sr_psn_add(qp->req.cur_psn, used);
        if (qp->req.cur_psn == sr_psn_add(w->first_psn, w->npkts)) {
            if (w->state == SWQE_POSTED) {
                w->state = SWQE_SENT;
                if (sr_wr_is_rd_atomic(w->wr.opcode))
                    qp->req.rd_atomic++;
            }
            if (!sr_qp_reliable(qp)) {
                /* UC and UD complete once sent (IBA 9.8: no acknowledgement). */
                w->state = SWQE_DONE;
            }
            qp->req.cur++;
            if (qp->req.cur != qp->sq_tail)
                qp->req.cur_psn = sr_sq_at(qp, qp->req.cur)->first_psn;
        }
    }
    if (!sr_qp_reliable(qp) || local_done)
        sr_qp_retire(qp);
    if (!sr_qp_reliable(qp))
        return;
    if (sent)
        sr_resp_ack_first(qp, SR_ACK_EV_REQUEST, now_ns); /* a held ACK travels with them */
    if (sent && qp->comp.deadline == SR_NO_DEADLINE)
        sr_comp_arm(qp, now_ns);
    if (sent)
        sr_comp_probe_arm(qp, now_ns);
}

void sr_req_probe(struct sr_qp *qp, uint64_t now_ns)
{
    enum sr_qp_state s = qp->attr.qp_state;
    if ((s != SR_QPS_RTS && s != SR_QPS_SQD) || qp->req.rnr_wait || !sr_qp_reliable(qp) ||
        qp->comp.psn == qp->req.max_sent)
        return;
    uint32_t cur = qp->req.cur, cur_psn = qp->req.cur_psn;
    sr_req_rewind(qp, sr_psn_add(qp->req.max_sent, SR_PSN_MASK));
    if (qp->req.cur == qp->sq_tail)
        return;
    struct sr_swqe *w = sr_sq_at(qp, qp->req.cur);
    if (sr_wr_is_local(w->wr.opcode) || !send_one(qp, w, qp->eng->cfg.window_pkts, now_ns, true))
        return; /* the WQE failed: the QP left RTS and its pointers with it */
    qp->req.cur = cur;
    qp->req.cur_psn = cur_psn;
    sr_resp_ack_first(qp, SR_ACK_EV_REQUEST, now_ns);
    sr_comp_probe_arm(qp, now_ns);
}

uint32_t sr_req_resend(struct sr_qp *qp, uint32_t psn, uint64_t now_ns, bool *sent)
{
    *sent = false;
    if (!sr_qp_reliable(qp) || sr_psn_lt(psn, qp->comp.psn) || !sr_psn_lt(psn, qp->req.max_sent))
        return 0;
    uint32_t cur = qp->req.cur, cur_psn = qp->req.cur_psn;
    /* Karn's rule concerns the timed packet alone: resending an earlier
     * hole leaves its answer unambiguous (a SACK reports its delivery,
     * sack.c), so the sample survives unless this resend is of it. */
    bool timing = qp->comp.rtt_timing;
    sr_req_rewind(qp, psn);
    uint32_t used = 0;
    if (qp->req.cur != qp->sq_tail) {
        struct sr_swqe *w = sr_sq_at(qp, qp->req.cur);
        uint32_t end = sr_psn_add(w->first_psn, w->npkts);
        if (sr_wr_is_local(w->wr.opcode) || qp->req.cur_psn != psn) {
            used = 0;
        } else if (sr_wr_is_rd_atomic(w->wr.opcode) && psn != w->first_psn) {
            /* inside a READ's responses: the completer re-requests
             * those itself (handle_read_resp); skip them */
            used = (uint32_t)sr_psn_diff(end, psn);
        } else {
            used = send_one(qp, w, qp->eng->cfg.window_pkts, now_ns, true);
            if (!used)
                return 0; /* the WQE failed: the QP left RTS and its pointers with it */
            *sent = true;
        }
    }
    qp->req.cur = cur;
    qp->req.cur_psn = cur_psn;
    if (timing && (!used || sr_psn_lt(qp->comp.rtt_psn, psn) ||
                   !sr_psn_lt(qp->comp.rtt_psn, sr_psn_add(psn, used)))) {
        qp->comp.rtt_timing = true;
        if (used && sr_psn_lt(psn, qp->comp.rtt_psn))
            qp->comp.rtt_behind = true;
    }
    if (used)
        sr_resp_ack_first(qp, SR_ACK_EV_REQUEST, now_ns);
    return used;
}

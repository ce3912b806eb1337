/* bulk.c: same-host bulk data by reference (sr_bulk.h): which WQEs go as
 * one packet naming their source, the reference's format and its checks,
 * and placing a referenced message through the copy hook. */
#include "engine_int.h"

static bool bulk_opcode(const struct sr_engine_cfg *cfg, enum sr_wr_opcode op)
{
    return op == SR_WR_SEND || op == SR_WR_SEND_WITH_IMM || op == SR_WR_SEND_WITH_INV ||
           op == SR_WR_RDMA_WRITE || op == SR_WR_RDMA_WRITE_WITH_IMM ||
           (op == SR_WR_RDMA_READ && cfg->bulk_read);
}

void sr_bulk_shape(struct sr_qp *qp, struct sr_swqe *w)
{
    const struct sr_engine_cfg *cfg = &qp->eng->cfg;
    w->bulk = false;
    /* RC only: UC has no acknowledgement, so the requester could not know
     * when its source may change (IBA 9.8), and UD is one packet anyway.
     * Inline data lives in the engine's copy, which is not the
     * application's registered memory. */
    if (!cfg->bulk_to || !cfg->bulk_copy || qp->type != SR_QPT_RC || w->npkts < 2 ||
        (w->wr.send_flags & SR_SEND_INLINE) || !bulk_opcode(cfg, w->wr.opcode))
        return;
    uint32_t min = cfg->bulk_to(cfg->ops_ctx, qp->attr.dgid);
    if (!min || w->total_len < min)
        return;
    w->bulk = true;
    w->npkts = 1; /* one ONLY packet (a READ: one response): one PSN */
    qp->eng->bulk.stats.tx_msgs++;
    qp->eng->bulk.stats.tx_bytes += w->total_len;
}

uint32_t sr_bulk_encode(struct sr_iov *iov, uint32_t *cnt, uint8_t *ref)
{
    uint32_t n = *cnt;
    for (uint32_t i = 0; i < n; i++) {
        uint64_t addr = (uint64_t)(uintptr_t)iov[i].base;
        uint32_t len = iov[i].len, zero = 0;
        memcpy(ref + i * SR_BULK_SEG_LEN, &addr, 8);
        memcpy(ref + i * SR_BULK_SEG_LEN + 8, &len, 4);
        memcpy(ref + i * SR_BULK_SEG_LEN + 12, &zero, 4);
    }
    iov[0] = (struct sr_iov){.base = ref, .len = n * SR_BULK_SEG_LEN};
    *cnt = 1;
    return n * SR_BULK_SEG_LEN;
}

/* Reads the reference in p[0..len) into b->seg; its total, or 0 when it is
 * not one. */
static uint64_t parse_ref(struct sr_bulk_state *b, const uint8_t *p, uint32_t len)
{
    uint32_t n = len / SR_BULK_SEG_LEN;
    if (len % SR_BULK_SEG_LEN || n == 0 || n > SR_MAX_SGE)
        return 0;
    uint64_t total = 0;
    for (uint32_t i = 0; i < n; i++) {
        const uint8_t *r = p + i * SR_BULK_SEG_LEN;
        uint64_t addr;
        uint32_t l, zero;
        memcpy(&addr, r, 8);
        memcpy(&l, r + 8, 4);
        memcpy(&zero, r + 12, 4);
        if (!l || zero || addr + l < addr)
            return 0;
        b->seg[i] = (struct sr_bulk_seg){.addr = addr, .len = l};
        total += l;
    }
    b->seg_cnt = n;
    return total;
}

void sr_bulk_tx_fix(struct sr_tx_pkt *t)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < t->iov_cnt; i++)
        n += t->iov[i].len;
    t->payload_len = n;
    t->pad_len = sr_wire_pad_len(n);
}

bool sr_bulk_rx_prepare(struct sr_engine *e, struct sr_pkt *pkt, int decode_err)
{
    struct sr_bulk_state *b = &e->bulk;
    uint8_t op = pkt->bth.opcode;
    /* A READ request's reference (its sink) came beside the headers
     * (sr_engine_rx_bulk); a READ RESPONSE ONLY without payload says the
     * data was written into our sink (sr_bulk_read_respond). */
    if (op == (SR_OP_RC | SR_OP_READ_REQ)) {
        if (decode_err < 0 || !b->seg_cnt || b->sink_total != pkt->reth.dma_len)
            goto refuse;
        return true;
    }
    if (op == (SR_OP_RC | SR_OP_READ_RESP_ONLY)) {
        if (decode_err < 0 || pkt->payload_len)
            goto refuse;
        return true;
    }
    bool write = op == (SR_OP_RC | SR_OP_WRITE_ONLY) || op == (SR_OP_RC | SR_OP_WRITE_ONLY_IMM);
    bool send = op == (SR_OP_RC | SR_OP_SEND_ONLY) || op == (SR_OP_RC | SR_OP_SEND_ONLY_IMM) ||
                op == (SR_OP_RC | SR_OP_SEND_ONLY_INV);
    if (decode_err < 0 || !(write || send))
        goto refuse;
    uint64_t total = parse_ref(b, pkt->payload, pkt->payload_len);
    if (!total)
        goto refuse;
    /* The message it stands for must be what the headers say: a WRITE
     * ONLY's payload is its RETH's DMA length (IBA 9.7.5.1, checked again
     * by the responder as for any packet). */
    if (total > SR_MAX_MSG_LEN || (write && total != pkt->reth.dma_len))
        goto refuse;
    pkt->payload = NULL;
    pkt->payload_len = (uint32_t)total;
    return true;
refuse:
    b->stats.rx_refused++;
    e->stats.rx_drop_malformed++;
    return false;
}

void sr_engine_rx_bulk(struct sr_engine *e, const uint8_t *buf, size_t len, const uint8_t *src_gid,
                       uint64_t peer, uint64_t now_ns)
{
    if (!e->cfg.bulk_copy) { /* nobody here can copy it: it is nothing */
        e->bulk.stats.rx_refused++;
        return;
    }
    e->bulk.rx = true;
    e->bulk.peer = peer;
    e->bulk.seg_cnt = 0;
    e->bulk.sink_total = 0;
    enum { READ_HDR = SR_BTH_LEN + SR_RETH_LEN };
    if (len > READ_HDR + SR_ICRC_LEN && buf[0] == (SR_OP_RC | SR_OP_READ_REQ)) {
        /* A READ request carries no payload on the wire (IBA 9.4.3): its
         * reference rides after the headers here and is taken off before
         * the packet is decoded as the plain request it is. */
        uint8_t hdr[READ_HDR + SR_ICRC_LEN] = {0};
        memcpy(hdr, buf, READ_HDR);
        hdr[1] &= 0xcf; /* the pad count of the reference, not of the request */
        e->bulk.sink_total =
            parse_ref(&e->bulk, buf + READ_HDR, (uint32_t)(len - READ_HDR - SR_ICRC_LEN));
        if (!e->bulk.sink_total)
            e->bulk.seg_cnt = 0;
        sr_engine_rx(e, hdr, sizeof(hdr), src_gid, now_ns);
    } else {
        sr_engine_rx(e, buf, len, src_gid, now_ns);
    }
    e->bulk.rx = false;
    e->bulk.seg_cnt = 0;
}

bool sr_bulk_read_respond(struct sr_qp *qp, const uint8_t *src, uint32_t len, uint32_t psn)
{
    struct sr_engine *e = qp->eng;
    struct sr_bulk_state *b = &e->bulk;
    if (!b->seg_cnt || b->sink_total != len || !len)
        return false; /* a duplicate READ that came as a plain request: ignored */
    struct sr_bulk_seg local = {.addr = (uint64_t)(uintptr_t)src, .len = len};
    /* The responder checked the R_Key of its source (check_rkey) and does
     * the copy itself, into the sink the requester checked against its
     * own L_Key and holds for this WQE: nobody but us touches our memory. */
    SR_DMA_BEGIN();
    int r = e->cfg.bulk_copy(e->cfg.ops_ctx, b->peer, true, &local, 1, b->seg, b->seg_cnt);
    SR_DMA_END();
    if (r) {
        /* no response: the requester retries, and fails its READ when its
         * retries run out (a dead requester needs nothing) */
        b->stats.copy_errs++;
        return true;
    }
    b->stats.rx_msgs++;
    b->stats.rx_bytes += len;
    sr_resp_ack_first(qp, SR_ACK_EV_RESPONSE, e->now_ns);
    struct sr_pkt p = {0};
    p.bth.opcode = SR_OP_RC | SR_OP_READ_RESP_ONLY;
    p.bth.pkey = 0xffff;
    p.bth.dest_qp = qp->attr.dest_qp_num;
    p.bth.psn = psn;
    p.aeth.syndrome = SR_AETH_ACK | SR_AETH_NO_CREDIT_LIMIT;
    p.aeth.msn = qp->resp.msn & SR_PSN_MASK;
    e->bulk.tx = true; /* only a driver that delivers references may take it */
    sr_engine_tx(e, qp, &p, NULL, 0, qp->attr.dgid);
    return true;
}

bool sr_bulk_read_landed(const struct sr_engine *e, const struct sr_pkt *pkt)
{
    return e->bulk.rx && SR_OPCODE_OP(pkt->bth.opcode) == SR_OP_READ_RESP_ONLY && !pkt->payload_len;
}

static bool bulk_copy_in(struct sr_engine *e, const struct sr_bulk_seg *local, uint32_t local_cnt,
                         uint64_t len)
{
    struct sr_bulk_state *b = &e->bulk;
    sr_engine_fence(e); /* queued READ responses leave before memory changes */
    SR_DMA_BEGIN();
    int r = e->cfg.bulk_copy(e->cfg.ops_ctx, b->peer, false, local, local_cnt, b->seg, b->seg_cnt);
    SR_DMA_END();
    if (r) {
        b->stats.copy_errs++;
        return false;
    }
    b->stats.rx_msgs++;
    b->stats.rx_bytes += len;
    return true;
}

bool sr_bulk_pull(struct sr_engine *e, uint8_t *dst, uint32_t len)
{
    struct sr_bulk_seg local = {.addr = (uint64_t)(uintptr_t)dst, .len = len};
    return bulk_copy_in(e, &local, 1, len);
}

bool sr_bulk_pull_sge(struct sr_engine *e, struct sr_pd *pd, const struct sr_sge *sge,
                      uint32_t num_sge, uint32_t off, uint32_t len, bool *prot)
{
    struct sr_bulk_seg local[SR_MAX_SGE];
    uint32_t cnt = 0, want = len;
    *prot = false;
    /* as sr_sge_scatter: every SGE the data reaches passes its L_Key check
     * with Local Write before anything is copied */
    for (uint32_t i = 0; i < num_sge && len && cnt < SR_MAX_SGE; i++) {
        if (off >= sge[i].length) {
            off -= sge[i].length;
            continue;
        }
        uint32_t n = SR_MIN(len, sge[i].length - off);
        uint8_t *dst = sr_mr_check(e, pd, sge[i].lkey, sge[i].addr + off, n, SR_ACCESS_LOCAL_WRITE);
        if (!dst) {
            *prot = true;
            return false;
        }
        local[cnt++] = (struct sr_bulk_seg){.addr = (uint64_t)(uintptr_t)dst, .len = n};
        len -= n;
        off = 0;
    }
    if (len) {
        *prot = true; /* longer than the WQE: check_length let nothing such through */
        return false;
    }
    return bulk_copy_in(e, local, cnt, want);
}

void sr_engine_bulk_stats(const struct sr_engine *e, struct sr_bulk_stats *out)
{
    *out = e->bulk.stats;
}

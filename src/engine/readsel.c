/* readsel.c: selective READ recovery at the requester (readsel.h): READ
 * responses placed by their PSN's offset when they arrive past a missing
 * one, a bitmap of the PSNs placed, loss detection over it, and one READ
 * request per lost hole, without moving the send pointer.
 *
 * Unlike SACK marks (sack.c), which report the peer's state and are
 * advisory, these marks record what this requester wrote into its own
 * memory: they stay valid across rewinds and timeouts, and completion
 * follows them. Every placement is checked against the live WQE (posted,
 * not DONE, its PSN range, its scatter list checked again with
 * LOCAL_WRITE), so a response for a completed or flushed WQE never
 * reaches memory the application may have reused. */
#include "engine_int.h"

#include <stdlib.h>

/* ---- the bitmap ---- */
static uint32_t map_bit(const struct sr_readsel_map *m, uint32_t psn)
{
    return psn & (m->cap - 1);
}

static bool map_test(const struct sr_readsel_map *m, uint32_t psn)
{
    uint32_t b = map_bit(m, psn);
    return m->bits[b >> 6] >> (b & 63) & 1;
}

static void map_reset(struct sr_readsel_map *m, uint32_t psn)
{
    memset(m->bits, 0, m->cap / 8);
    m->lo = m->hi = m->resent = psn & SR_PSN_MASK;
    m->cnt = 0;
    m->evid_set = false;
}

struct sr_readsel_map *sr_readsel_map_new(uint32_t cap, uint32_t psn)
{
    uint32_t c = 1024;
    while (c < cap && c < (1u << 20))
        c <<= 1;
    struct sr_readsel_map *m = calloc(1, sizeof(*m) + c / 8);
    if (!m)
        return NULL;
    m->cap = c;
    m->dupthresh = SR_READSEL_DUPTHRESH;
    map_reset(m, psn);
    return m;
}

void sr_readsel_map_ack(struct sr_readsel_map *m, uint32_t psn)
{
    if (!sr_psn_lt(m->lo, psn))
        return;
    if (m->evid_set && !sr_psn_lt(psn, m->evid))
        m->evid_set = false;
    if (!sr_psn_lt(psn, m->hi)) {
        /* everything marked is behind the cumulative point now */
        bool evid = m->evid_set;
        uint32_t ev = m->evid;
        if (m->cnt)
            map_reset(m, psn);
        m->lo = m->hi = psn;
        if (sr_psn_lt(m->resent, psn))
            m->resent = psn;
        m->evid_set = evid;
        m->evid = ev;
        return;
    }
    for (uint32_t p = m->lo; p != psn; p = sr_psn_add(p, 1)) {
        uint32_t b = map_bit(m, p);
        if (m->bits[b >> 6] >> (b & 63) & 1) {
            m->bits[b >> 6] &= ~(1ull << (b & 63));
            m->cnt--;
        }
    }
    m->lo = psn;
    if (sr_psn_lt(m->resent, psn))
        m->resent = psn;
}

bool sr_readsel_map_mark(struct sr_readsel_map *m, uint32_t psn)
{
    if (sr_psn_lt(psn, m->lo) || (uint32_t)sr_psn_diff(psn, m->lo) >= m->cap || map_test(m, psn))
        return false;
    uint32_t b = map_bit(m, psn);
    m->bits[b >> 6] |= 1ull << (b & 63);
    m->cnt++;
    if (!sr_psn_lt(psn, m->hi))
        m->hi = sr_psn_add(psn, 1);
    return true;
}

bool sr_readsel_map_has(const struct sr_readsel_map *m, uint32_t psn)
{
    return !sr_psn_lt(psn, m->lo) && sr_psn_lt(psn, m->hi) && map_test(m, psn);
}

uint32_t sr_readsel_map_lost_limit(const struct sr_readsel_map *m, uint32_t dupthresh)
{
    uint32_t limit = m->lo;
    if (m->cnt) {
        uint32_t seen = 0;
        for (uint32_t p = sr_psn_add(m->hi, SR_PSN_MASK);; p = sr_psn_add(p, SR_PSN_MASK)) {
            if (map_test(m, p) && ++seen == dupthresh) {
                limit = p;
                break;
            }
            if (p == m->lo)
                break;
        }
    }
    if (m->evid_set && sr_psn_lt(limit, m->evid))
        limit = m->evid;
    return limit;
}

/* ---- on a QP ---- */
bool sr_readsel_on(const struct sr_qp *qp)
{
    return qp->eng->cfg.sack;
}

static struct sr_readsel_map *qp_map(struct sr_qp *qp, bool create)
{
    struct sr_readsel_map *m = qp->comp.rs;
    if (!m && create) {
        /* room for the window and a READ's responses beyond it, as the
         * SACK scoreboard (a READ request consumes its responses' PSNs) */
        m = sr_readsel_map_new(4 * qp->eng->cfg.window_pkts, qp->comp.psn);
        qp->comp.rs = m;
    }
    if (m) {
        if ((uint32_t)sr_psn_diff(qp->comp.psn, m->lo) >= m->cap)
            map_reset(m, qp->comp.psn); /* moved on by more than it tracks */
        else
            sr_readsel_map_ack(m, qp->comp.psn);
    }
    return m;
}

bool sr_readsel_op_ok(const struct sr_swqe *w, uint32_t idx, uint32_t op, bool sel)
{
    bool end = idx == w->npkts - 1;
    if (idx == 0 && w->npkts == 1)
        return op == SR_OP_READ_RESP_ONLY;
    if (idx == 0)
        return op == SR_OP_READ_RESP_FIRST || (sel && op == SR_OP_READ_RESP_ONLY);
    /* A READ asked for again from idx is answered from there, starting
     * with FIRST (or ONLY for one packet): this responder and rxe's do so
     * (IBA 9.7.5.1.4 re-executes it as a new READ of the part asked). */
    if (end)
        return op == SR_OP_READ_RESP_LAST || op == SR_OP_READ_RESP_ONLY;
    if (op == SR_OP_READ_RESP_MIDDLE || op == SR_OP_READ_RESP_FIRST)
        return true;
    return sel && (op == SR_OP_READ_RESP_LAST || op == SR_OP_READ_RESP_ONLY);
}

void sr_readsel_rx(struct sr_qp *qp, struct sr_swqe *w, const struct sr_pkt *pkt,
                   struct sr_comp_next *n)
{
    struct sr_engine *e = qp->eng;
    uint32_t psn = pkt->bth.psn;
    uint32_t idx = (uint32_t)sr_psn_diff(psn, w->first_psn);
    uint32_t pmtu = sr_qp_pmtu(qp);
    uint32_t off = idx * pmtu;
    /* The checks an in-order response passes (comp.c): an opcode that
     * fits its place, and a payload of exactly PMTU except the READ's
     * last, which carries the remainder (IBA 9.7.5.1.6: one response
     * per PMTU of the READ, in PSN order). By reference (bulk) a READ
     * is one packet: it is never out of order. */
    if (w->bulk || !sr_readsel_op_ok(w, idx, SR_OPCODE_OP(pkt->bth.opcode), true) ||
        pkt->payload_len != SR_MIN(pmtu, w->total_len - off)) {
        e->stats.rx_drop_other++;
        return;
    }
    struct sr_readsel_map *m = qp_map(qp, true);
    if (!m || (uint32_t)sr_psn_diff(psn, m->lo) >= m->cap) {
        e->stats.rx_drop_other++; /* past what is tracked: asked for again later */
        return;
    }
    if (sr_readsel_map_has(m, psn)) {
        /* A second copy of a response asked for again: the first was
         * late, not lost. Wait for one more later PSN before counting a
         * hole lost (RFC 8985 6.2 widens its reordering window on such
         * evidence, as RFC 4653 raises DupThresh). */
        if (sr_psn_lt(psn, m->resent) && m->dupthresh < SR_READSEL_DUPTHRESH_MAX)
            m->dupthresh++;
        e->stats.rx_drop_other++;
        return;
    }
    /* A scatter that fails here leaves the PSN unmarked: it is asked for
     * again and fails the WQE in order, as an in-order one does. */
    if (!sr_sge_scatter(e, qp->pd, w->wr.sg_list, w->wr.num_sge, off, pkt->payload,
                        pkt->payload_len)) {
        e->stats.rx_drop_other++;
        return;
    }
    sr_readsel_map_mark(m, psn);
    e->stats.read_ooo_placed++;
    if (sr_psn_lt(m->resent, sr_readsel_map_lost_limit(m, m->dupthresh)))
        n->act |= SR_COMP_READSEL;
}

bool sr_readsel_has(struct sr_qp *qp, uint32_t psn)
{
    struct sr_readsel_map *m = qp_map(qp, false);
    return m && m->cnt && sr_readsel_map_has(m, psn);
}

bool sr_readsel_beyond(struct sr_qp *qp, const struct sr_swqe *w, uint32_t acked,
                       struct sr_comp_next *n)
{
    if (!sr_readsel_on(qp) || w->wr.opcode != SR_WR_RDMA_READ || w->state != SWQE_SENT || w->bulk)
        return false;
    struct sr_readsel_map *m = qp_map(qp, true);
    if (!m)
        return false;
    if (!m->evid_set || sr_psn_lt(m->evid, acked)) {
        m->evid = acked;
        m->evid_set = true;
    }
    if (sr_psn_lt(m->resent, acked))
        n->act |= SR_COMP_READSEL;
    return true;
}

bool sr_readsel_acked(struct sr_qp *qp, uint32_t *psn)
{
    struct sr_readsel_map *m = qp_map(qp, false);
    if (!m || !m->evid_set)
        return false;
    *psn = m->evid;
    return true;
}

/* One READ request for [psn, psn + cnt) of w: the hole's first PSN, and
 * the VA and length of its part of the READ (IBA 9.7.4: a READ resumed
 * at a PSN asks for the data from that PSN's offset). */
static void send_hole(struct sr_qp *qp, const struct sr_swqe *w, uint32_t psn, uint32_t cnt)
{
    struct sr_engine *e = qp->eng;
    uint32_t pmtu = sr_qp_pmtu(qp);
    uint32_t idx = (uint32_t)sr_psn_diff(psn, w->first_psn);
    uint32_t off = idx * pmtu;
    uint32_t len = SR_MIN((uint64_t)cnt * pmtu, (uint64_t)(w->total_len - off));
    struct sr_pkt p = {0};
    p.bth.opcode = (qp->type == SR_QPT_XRC_SEND ? SR_OP_XRC : SR_OP_RC) | SR_OP_READ_REQ;
    p.bth.pkey = 0xffff;
    p.bth.dest_qp = qp->attr.dest_qp_num;
    p.bth.psn = psn;
    p.xrc_srqn = w->wr.xrc_remote_srqn & SR_PSN_MASK;
    if (e->cfg.sack)
        p.bth.resv7 = SR_BTH_RESV7_SACK; /* as every request of this requester (req.c) */
    p.reth = (struct sr_reth){.va = w->wr.remote_addr + off, .rkey = w->wr.rkey, .dma_len = len};
    /* Karn: the READ being timed may now be answered by either request */
    qp->comp.rtt_timing = false;
    e->stats.retransmits++;
    e->stats.read_rereqs++;
    e->stats.read_rereq_psns += cnt;
    sr_engine_tx(e, qp, &p, NULL, 0, qp->attr.dgid);
}

/* Asks for every hole of w in [from, limit); stops after *budget
 * requests. Returns where it stopped. */
static uint32_t holes_of(struct sr_qp *qp, const struct sr_readsel_map *m, const struct sr_swqe *w,
                         uint32_t from, uint32_t limit, int *budget, bool dry)
{
    uint32_t end = sr_psn_add(w->first_psn, w->npkts);
    if (sr_psn_lt(from, w->first_psn))
        from = w->first_psn;
    if (sr_psn_lt(end, limit))
        limit = end;
    /* beyond the bitmap nothing can be placed: it waits its turn */
    uint32_t top = sr_psn_add(m->lo, m->cap);
    if (sr_psn_lt(top, limit))
        limit = top;
    uint32_t p = from;
    while (sr_psn_lt(p, limit) && *budget > 0) {
        if (sr_readsel_map_has(m, p)) {
            p = sr_psn_add(p, 1);
            continue;
        }
        uint32_t h = p;
        while (sr_psn_lt(p, limit) && !sr_readsel_map_has(m, p))
            p = sr_psn_add(p, 1);
        if (!dry)
            send_hole(qp, w, h, (uint32_t)sr_psn_diff(p, h));
        (*budget)--;
    }
    return p;
}

/* Walks the READs sent with PSNs in [from, limit) and asks for their
 * holes (dry: only counts them). Returns how many requests it made. */
static int walk(struct sr_qp *qp, struct sr_readsel_map *m, uint32_t from, uint32_t limit, bool dry)
{
    int budget = SR_READSEL_REQ_MAX;
    for (uint32_t i = qp->sq_head; i != qp->sq_tail && budget > 0; i++) {
        const struct sr_swqe *w = sr_sq_at(qp, i);
        if (w->state == SWQE_POSTED)
            break; /* its request never left: the requester sends it */
        uint32_t end = sr_psn_add(w->first_psn, w->npkts);
        if (w->state == SWQE_DONE || w->wr.opcode != SR_WR_RDMA_READ || w->bulk ||
            !sr_psn_lt(from, end))
            continue;
        if (!sr_psn_lt(w->first_psn, limit))
            break;
        from = holes_of(qp, m, w, from, limit, &budget, dry);
    }
    if (!dry && sr_psn_lt(m->resent, from))
        m->resent = from;
    return SR_READSEL_REQ_MAX - budget;
}

/* Where a probe's holes end: the READs the responder is known to have
 * executed, those before the acknowledged PSN and the one whose
 * responses arrive last; a READ beyond them may never have arrived, and
 * the requester's own probe and timer resend it as a whole. */
static uint32_t all_limit(struct sr_qp *qp, const struct sr_readsel_map *m)
{
    uint32_t limit = m->evid_set && sr_psn_lt(m->hi, m->evid) ? m->evid : m->hi;
    if (!m->cnt)
        return limit;
    uint32_t last = sr_psn_add(m->hi, SR_PSN_MASK);
    for (uint32_t i = qp->sq_head; i != qp->sq_tail; i++) {
        const struct sr_swqe *w = sr_sq_at(qp, i);
        uint32_t end = sr_psn_add(w->first_psn, w->npkts);
        if (!sr_psn_lt(last, w->first_psn) && sr_psn_lt(last, end))
            return sr_psn_lt(limit, end) ? end : limit;
    }
    return limit;
}

void sr_readsel_resend(struct sr_qp *qp, uint64_t now_ns, bool all)
{
    enum sr_qp_state s = qp->attr.qp_state;
    if ((s != SR_QPS_RTS && s != SR_QPS_SQD) || qp->req.rnr_wait)
        return;
    struct sr_readsel_map *m = qp_map(qp, false);
    if (!m)
        return;
    uint32_t limit = all ? all_limit(qp, m) : sr_readsel_map_lost_limit(m, m->dupthresh);
    uint32_t from = all ? m->lo : m->resent;
    if (!sr_psn_lt(from, limit))
        return;
    if (walk(qp, m, from, limit, false)) {
        sr_resp_ack_first(qp, SR_ACK_EV_REQUEST, now_ns); /* a held ACK travels with them */
        sr_comp_probe_arm(qp, now_ns);
    }
}

bool sr_readsel_probe_holes(struct sr_qp *qp)
{
    if (!sr_readsel_on(qp))
        return false;
    struct sr_readsel_map *m = qp_map(qp, false);
    return m && (m->cnt || m->evid_set) && walk(qp, m, m->lo, all_limit(qp, m), true);
}

uint32_t sr_readsel_rerequest(struct sr_qp *qp, const struct sr_swqe *w, uint32_t psn)
{
    if (!sr_readsel_on(qp) || w->bulk)
        return 0;
    struct sr_readsel_map *m = qp_map(qp, false);
    uint32_t end = sr_psn_add(w->first_psn, w->npkts);
    if (!m || !sr_psn_lt(psn, qp->req.max_sent) || !sr_psn_lt(m->lo, end))
        return 0; /* a first request, or no response placed out of order yet */
    int budget = INT32_MAX;
    uint32_t p = holes_of(qp, m, w, psn, end, &budget, false);
    if (sr_psn_lt(p, end))
        send_hole(qp, w, p, (uint32_t)sr_psn_diff(end, p)); /* past the bitmap: all of it */
    return (uint32_t)sr_psn_diff(end, psn);
}

void sr_readsel_free(struct sr_qp *qp)
{
    free(qp->comp.rs);
    qp->comp.rs = NULL;
}

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

/* The second half of bits[]: the PSNs asked for again since they were
 * first sent, so that sr_readsel_seen knows when a copy may answer an
 * earlier request. */
static uint64_t *asked_words(struct sr_readsel_map *m)
{
    return m->bits + m->cap / 64;
}

static bool asked_test(struct sr_readsel_map *m, uint32_t psn)
{
    uint32_t b = map_bit(m, psn);
    return asked_words(m)[b >> 6] >> (b & 63) & 1;
}

static void asked_set(struct sr_readsel_map *m, uint32_t psn)
{
    uint32_t b = map_bit(m, psn);
    asked_words(m)[b >> 6] |= 1ull << (b & 63);
}

/* Forgets the requests for [from, to). */
static void asked_clear(struct sr_readsel_map *m, uint32_t from, uint32_t to)
{
    if ((uint32_t)sr_psn_diff(to, from) >= m->cap) {
        memset(asked_words(m), 0, m->cap / 8);
        return;
    }
    for (uint32_t p = from; p != to; p = sr_psn_add(p, 1)) {
        uint32_t b = map_bit(m, p);
        asked_words(m)[b >> 6] &= ~(1ull << (b & 63));
    }
}

static void map_reset(struct sr_readsel_map *m, uint32_t psn)
{
    memset(m->bits, 0, m->cap / 4);
    m->lo = m->hi = m->resent = psn & SR_PSN_MASK;
    m->cnt = 0;
    m->evid_set = false;
    m->ep_n = 0;
}

struct sr_readsel_map *sr_readsel_map_new(uint32_t cap, uint32_t psn)
{
    uint32_t c = 1024;
    while (c < cap && c < (1u << 20))
        c <<= 1;
    struct sr_readsel_map *m = calloc(1, sizeof(*m) + c / 4);
    if (!m)
        return NULL;
    m->cap = c;
    m->dupthresh = SR_READSEL_DUPTHRESH;
    m->reo_mult = 1;
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
        else
            asked_clear(m, m->lo, psn);
        m->lo = m->hi = psn;
        if (sr_psn_lt(m->resent, psn))
            m->resent = psn;
        m->evid_set = evid;
        m->evid = ev;
        return;
    }
    asked_clear(m, m->lo, psn);
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

/* The opcode of the response at index idx of n, for a READ (or the part
 * of one asked for again) answered from its start: IBA 9.7.5.1.6. */
static uint32_t resp_op(uint32_t idx, uint32_t n)
{
    if (n == 1)
        return SR_OP_READ_RESP_ONLY;
    if (idx == 0)
        return SR_OP_READ_RESP_FIRST;
    return idx == n - 1 ? SR_OP_READ_RESP_LAST : SR_OP_READ_RESP_MIDDLE;
}

static int walk(struct sr_qp *qp, struct sr_readsel_map *m, uint32_t from, uint32_t limit, bool dry,
                uint64_t lost_at, bool advance);
static uint64_t reo_wnd(const struct sr_qp *qp, const struct sr_readsel_map *m);

/* Hole requests made before a, whose answer came, with holes still
 * open: the responder answers requests in order, so their requests or
 * answers were lost (RFC 8985 6.3 resends a lost retransmission once a
 * later one is shown delivered). Asked for again now rather than at a
 * probe, which the deliveries of everything else keep pushing back. */
static void lost_before(struct sr_qp *qp, struct sr_readsel_map *m, const struct sr_readsel_rr *a)
{
    struct sr_readsel_rr lost[SR_READSEL_RR];
    uint32_t n = 0;
    /* RFC 8985 6.3: lost once sent a reordering window before a request
     * answered; the window at least a quarter of that answer's round
     * trip (6.2's min_rtt / 4, the answer standing in for a sample that
     * Karn's rule withholds here) */
    uint64_t wnd = SR_MAX(reo_wnd(qp, m), (qp->eng->now_ns - a->req_at) / 4);
    for (uint32_t k = 0; k < SR_READSEL_RR; k++) {
        struct sr_readsel_rr *r = &m->rr[k];
        if (r->cnt && (int32_t)(r->seq - a->seq) < 0 && r->req_at + wnd < a->req_at) {
            lost[n++] = *r;
            r->cnt = 0;
        }
    }
    for (uint32_t k = 0; k < n; k++) {
        uint32_t from = lost[k].psn;
        if (sr_psn_lt(from, m->lo))
            from = m->lo;
        uint32_t end = sr_psn_add(lost[k].psn, lost[k].cnt);
        if (!sr_psn_lt(from, end))
            continue;
        int made = walk(qp, m, from, end, false, qp->eng->now_ns, false);
        qp->eng->stats.read_rereq_lost += (uint64_t)made;
    }
}

/* A response for a hole asked for again: the original, which was late
 * rather than lost, or the answer. The opcode tells them apart where they
 * differ, as the responder answers the part asked for as a READ of its
 * own (a lone PSN with ONLY where the original was FIRST, MIDDLE or LAST;
 * a hole's first with FIRST where it was MIDDLE). For an original, the
 * time since its hole counted lost is how late responses run, and the
 * reordering window covers it from now on (RFC 8985 6.2 widens its
 * window on such evidence; sack.c learns the same from D-SACKs); timing
 * alone could not tell them apart, as an answer queues behind every
 * response sent before it, from a minimum round trip to a window of
 * READs' worth. An answer shows every earlier request answered
 * (lost_before). Only the first response in a hole's range counts. */
void sr_readsel_seen(struct sr_qp *qp, const struct sr_swqe *w, const struct sr_pkt *pkt)
{
    struct sr_readsel_map *m = qp->comp.rs; /* only with selective recovery on */
    if (!m || w->bulk)
        return;
    uint32_t psn = pkt->bth.psn, op = SR_OPCODE_OP(pkt->bth.opcode);
    if (sr_psn_lt(psn, m->lo) || (uint32_t)sr_psn_diff(psn, m->lo) >= m->cap || !asked_test(m, psn))
        return; /* never asked for again: the common case, one bit */
    for (uint32_t k = 0; k < SR_READSEL_RR; k++) {
        struct sr_readsel_rr *r = &m->rr[k];
        uint32_t j = (uint32_t)sr_psn_diff(psn, r->psn);
        if (!r->cnt || j >= r->cnt)
            continue;
        uint32_t orig = resp_op((uint32_t)sr_psn_diff(psn, w->first_psn), w->npkts);
        uint32_t ans = resp_op(j, r->cnt);
        struct sr_readsel_rr a = *r;
        r->cnt = 0;
        if (orig == ans)
            return; /* either: no evidence */
        if (op == orig && a.timed) {
            /* RFC 8985 6.2 bounds the window by SRTT: a copy later than
             * that is a request the responder saw twice and executed
             * again, not the network's reordering */
            uint64_t late = qp->eng->now_ns - r->lost_at;
            if (qp->comp.rtt.valid && late > qp->comp.rtt.srtt_ns)
                late = qp->comp.rtt.srtt_ns;
            if (late > m->reo_late_ns)
                m->reo_late_ns = late;
            qp->eng->stats.read_late++;
        } else if (op == ans && j == 0) {
            lost_before(qp, m, &a);
        }
        return;
    }
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
         * late, not lost. Wait for one more later PSN and a quarter
         * minimum RTT longer before counting a hole lost (RFC 8985 6.2
         * widens its reordering window on such evidence, as RFC 4653
         * raises DupThresh). */
        if (sr_psn_lt(psn, m->resent)) {
            if (m->dupthresh < SR_READSEL_DUPTHRESH_MAX)
                m->dupthresh++;
            /* once per round trip: one late burst is one piece of evidence */
            if (m->reo_mult < SR_READSEL_REO_MULT_MAX &&
                (!m->reo_grown_at || e->now_ns - m->reo_grown_at >= qp->comp.rtt.srtt_ns)) {
                m->reo_mult++;
                m->reo_grown_at = e->now_ns;
            }
        }
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
    sr_comp_delivered(qp, e->now_ns);
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
static void send_hole(struct sr_qp *qp, struct sr_readsel_map *m, const struct sr_swqe *w,
                      uint32_t psn, uint32_t cnt, uint64_t lost_at)
{
    struct sr_engine *e = qp->eng;
    /* A hole any of whose PSNs were asked for before is not timed: a
     * copy may answer the earlier request, which is forgotten (its answer
     * would no longer show the requests before it answered). */
    for (uint32_t k = 0; k < SR_READSEL_RR; k++) {
        struct sr_readsel_rr *o = &m->rr[k];
        if (o->cnt && sr_psn_lt(o->psn, sr_psn_add(psn, cnt)) &&
            sr_psn_lt(psn, sr_psn_add(o->psn, o->cnt)))
            o->cnt = 0;
    }
    bool again = false;
    for (uint32_t k = 0; k < cnt; k++) {
        uint32_t q = sr_psn_add(psn, k);
        if ((uint32_t)sr_psn_diff(q, m->lo) >= m->cap)
            break;
        again |= asked_test(m, q);
        asked_set(m, q);
    }
    struct sr_readsel_rr *r = &m->rr[m->rr_next++ % SR_READSEL_RR];
    *r = (struct sr_readsel_rr){.psn = psn,
                                .cnt = cnt,
                                .seq = ++m->rr_seq,
                                .lost_at = lost_at,
                                .req_at = e->now_ns,
                                .timed = !again};
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
    /* Karn: the READ being timed may now be answered by either request.
     * Any hole request ends the sample, not only one of the timed READ:
     * a READ timed while holes are repaired measures their queue (a
     * window of READs, a millisecond at 20 Gb/s), and a probe timeout
     * of twice that leaves lost repairs waiting, which at high loss
     * costs READ goodput (docs/RELIABILITY.md). */
    qp->comp.rtt_timing = false;
    e->stats.retransmits++;
    e->stats.read_rereqs++;
    e->stats.read_rereq_psns += cnt;
    sr_engine_tx(e, qp, &p, NULL, 0, qp->attr.dgid);
}

/* Asks for every hole of w in [from, limit); stops after *budget
 * requests. Returns where it stopped. */
static uint32_t holes_of(struct sr_qp *qp, struct sr_readsel_map *m, const struct sr_swqe *w,
                         uint32_t from, uint32_t limit, int *budget, bool dry, uint64_t lost_at)
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
            send_hole(qp, m, w, h, (uint32_t)sr_psn_diff(p, h), lost_at);
        (*budget)--;
    }
    return p;
}

/* Walks the READs sent with PSNs in [from, limit) and asks for their
 * holes (dry: only counts them). Returns how many requests it made. */
static int walk(struct sr_qp *qp, struct sr_readsel_map *m, uint32_t from, uint32_t limit, bool dry,
                uint64_t lost_at, bool advance)
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
        from = holes_of(qp, m, w, from, limit, &budget, dry, lost_at);
    }
    if (!dry && advance && sr_psn_lt(m->resent, from))
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

/* The reordering window: a hole counted lost by DupThresh or by an
 * acknowledgement beyond it may only be late, as a response held in a
 * queue is passed by every response sent meanwhile (hundreds at tens of
 * Gb/s). RFC 8985 6.2's window, reo_mult quarters of the minimum round
 * trip, at most SRTT, or the lateness learnt (sr_readsel_seen) and a
 * quarter more. Not quarters of SRTT: SRTT carries the READs' own queue (a
 * window of 64 KiB READs at 20 Gb/s is a millisecond), which is no
 * measure of how late one response runs, and a hole waits out its
 * window with every READ behind it. Within a sixteenth of the transport
 * timer, and within SRTT once every WQE has left, for the reasons
 * sack.c gives. Before the first RTT sample, the lateness learnt alone. */
static uint64_t reo_wnd(const struct sr_qp *qp, const struct sr_readsel_map *m)
{
    uint64_t wnd = 0, cap = sr_timeout_ns(qp->attr.timeout) / 16;
    if (qp->comp.rtt.valid) {
        uint64_t srtt = qp->comp.rtt.srtt_ns;
        uint64_t base = qp->comp.rtt.min_ns ? qp->comp.rtt.min_ns : srtt;
        wnd = SR_MIN(m->reo_mult * (base / 4), srtt);
        cap = SR_MAX(srtt / 4, cap);
        if (qp->req.cur == qp->sq_tail)
            cap = SR_MIN(cap, srtt);
    }
    /* the lateness learnt, with a quarter to spare */
    if (m->reo_late_ns)
        wnd = SR_MAX(wnd, m->reo_late_ns + m->reo_late_ns / 4);
    return SR_MIN(wnd, cap);
}

/* Holes before limit count lost from now on: a new epoch, or, when every
 * slot is taken, the newest one grows and is timed from now (its older
 * holes wait a little longer, rather than the new ones too little). now
 * | 1 so that 0 means none. */
static void note_lost(struct sr_readsel_map *m, uint32_t limit, uint64_t now_ns)
{
    if (m->ep_n && !sr_psn_lt(m->ep_lim[m->ep_n - 1], limit))
        return;
    if (m->ep_n == SR_READSEL_EPOCHS) {
        m->ep_lim[m->ep_n - 1] = limit;
        m->ep_at[m->ep_n - 1] = now_ns | 1;
        return;
    }
    m->ep_lim[m->ep_n] = limit;
    m->ep_at[m->ep_n] = now_ns | 1;
    m->ep_n++;
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
    uint32_t due = 0;
    uint64_t lost_at = now_ns;
    if (all) {
        m->ep_n = 0; /* a probe asks for every hole now */
    } else {
        if (!sr_psn_lt(from, limit)) {
            /* the holes filled: the probe timer no longer waits for a
             * window */
            if (m->ep_n) {
                m->ep_n = 0;
                sr_comp_probe_arm(qp, now_ns);
            }
            return;
        }
        note_lost(m, limit, now_ns);
        uint64_t wnd = reo_wnd(qp, m);
        while (due < m->ep_n && (!wnd || now_ns >= m->ep_at[due] + wnd))
            due++;
        if (!due) {
            sr_comp_probe_by(qp, m->ep_at[0] + wnd);
            return;
        }
        limit = m->ep_lim[due - 1];
        lost_at = m->ep_at[due - 1]; /* the latest: a late sample errs short */
        m->ep_n -= due;
        memmove(m->ep_lim, m->ep_lim + due, m->ep_n * sizeof(m->ep_lim[0]));
        memmove(m->ep_at, m->ep_at + due, m->ep_n * sizeof(m->ep_at[0]));
    }
    bool sent = sr_psn_lt(from, limit) && walk(qp, m, from, limit, false, lost_at, true);
    if (sent)
        sr_resp_ack_first(qp, SR_ACK_EV_REQUEST, now_ns); /* a held ACK travels with them */
    if (sent || !qp->comp.probe_at)
        sr_comp_probe_arm(qp, now_ns); /* also after the timer fired for a window */
    if (m->ep_n)
        sr_comp_probe_by(qp, m->ep_at[0] + reo_wnd(qp, m));
}

bool sr_readsel_lost_pending(struct sr_qp *qp)
{
    struct sr_readsel_map *m = qp_map(qp, false);
    return m && m->ep_n && qp->eng->now_ns >= m->ep_at[0] + reo_wnd(qp, m);
}

uint64_t sr_readsel_lost_deadline(const struct sr_qp *qp)
{
    const struct sr_readsel_map *m = qp->comp.rs;
    return m && m->ep_n ? m->ep_at[0] + reo_wnd(qp, m) : 0;
}

bool sr_readsel_probe_holes(struct sr_qp *qp)
{
    if (!sr_readsel_on(qp))
        return false;
    struct sr_readsel_map *m = qp_map(qp, false);
    return m && (m->cnt || m->evid_set) && walk(qp, m, m->lo, all_limit(qp, m), true, 0, false);
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
    uint64_t now = qp->eng->now_ns;
    uint32_t p = holes_of(qp, m, w, psn, end, &budget, false, now);
    if (sr_psn_lt(p, end))
        send_hole(qp, m, w, p, (uint32_t)sr_psn_diff(end, p), now); /* past the bitmap: all of it */
    return (uint32_t)sr_psn_diff(end, psn);
}

void sr_readsel_free(struct sr_qp *qp)
{
    free(qp->comp.rs);
    qp->comp.rs = NULL;
}

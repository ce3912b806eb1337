/* sack.c: the requester's side of selective recovery (sack.h,
 * docs/WIRE.md): a scoreboard of the PSNs in flight that SACKs showed
 * received, loss detection over it (RFC 6675's DupThresh, and the tail
 * rule: marks up to the last PSN sent leave nothing to wait for), a
 * reordering window that D-SACKs widen (RFC 8985 6.2, RFC 2883), and
 * resends of the lost holes only, without moving the send pointer.
 *
 * The scoreboard is advisory (RFC 2018 section 8): completions still come
 * from cumulative acknowledgements only, and a timeout, NAK or other
 * rewind discards it and recovery falls back to go-back-N from comp.psn.
 * A lying SACK can therefore delay a transfer but neither complete nor
 * corrupt anything. */
#include "engine_int.h"

#include <stdlib.h>

static uint32_t sb_bit(const struct sr_sack_sb *sb, uint32_t psn)
{
    return psn & (sb->cap - 1);
}

static bool sb_test(const struct sr_sack_sb *sb, uint32_t psn)
{
    uint32_t b = sb_bit(sb, psn);
    return sb->bits[b >> 6] >> (b & 63) & 1;
}

/* The scoreboard is a ring of cap bits (a multiple of 64), read and
 * written 64 PSNs at a time: a SACK's 2048-bit bitmap is 32 word
 * operations, not 2048 bit tests (the requester spent a tenth of its
 * cycles marking bit by bit at 1% loss with reordering). */
static uint64_t low_bits(uint32_t n)
{
    return n >= 64 ? ~0ull : (1ull << n) - 1;
}

/* n (1..64) marks from psn on, the mark of psn in bit 0. */
static uint64_t sb_get(const struct sr_sack_sb *sb, uint32_t psn, uint32_t n)
{
    uint32_t b = sb_bit(sb, psn), w = b >> 6, sh = b & 63;
    uint64_t v = sb->bits[w] >> sh;
    if (sh && sh + n > 64)
        v |= sb->bits[(w + 1) & (sb->cap / 64 - 1)] << (64 - sh);
    return v & low_bits(n);
}

/* Sets (set) or clears the marks of v's bits, bit 0 at psn; returns the
 * bits whose mark changed. */
static uint64_t sb_put(struct sr_sack_sb *sb, uint32_t psn, uint64_t v, bool set)
{
    uint32_t b = sb_bit(sb, psn), w = b >> 6, sh = b & 63;
    uint64_t *lo = &sb->bits[w];
    uint64_t part = v << sh;
    uint64_t chg = (set ? part & ~*lo : part & *lo);
    *lo = set ? *lo | part : *lo & ~part;
    uint64_t out = chg >> sh;
    if (sh && v >> (64 - sh)) {
        uint64_t *hi = &sb->bits[(w + 1) & (sb->cap / 64 - 1)];
        part = v >> (64 - sh);
        chg = set ? part & ~*hi : part & *hi;
        *hi = set ? *hi | part : *hi & ~part;
        out |= chg << (64 - sh);
    }
    return out;
}

/* n (1..64) bits of a SACK bitmap from bit i, bit i in bit 0 (LSB first
 * in each byte, docs/WIRE.md); reads none of the nbytes bytes past it. */
static uint64_t bm_get(const uint8_t *bm, uint32_t nbytes, uint32_t i, uint32_t n)
{
    uint32_t at = i >> 3, sh = i & 7;
    uint64_t v = 0;
    if (at + 8 <= nbytes) {
        uint8_t b[8];
        memcpy(b, bm + at, 8);
        for (int k = 7; k >= 0; k--)
            v = v << 8 | b[k];
        v >>= sh;
        if (sh && at + 8 < nbytes)
            v |= (uint64_t)bm[at + 8] << (64 - sh);
    } else {
        for (uint32_t k = 0; k < 8 && at + k < nbytes; k++)
            v |= (uint64_t)bm[at + k] << (8 * k);
        v >>= sh;
    }
    return v & low_bits(n);
}

static uint32_t bm_count(const uint8_t *bm, uint32_t nbytes, uint32_t i, uint32_t end)
{
    uint32_t c = 0;
    for (; i < end; i += 64)
        c += (uint32_t)__builtin_popcountll(bm_get(bm, nbytes, i, SR_MIN(64u, end - i)));
    return c;
}

struct sr_sack_sb *sr_sack_sb_new(uint32_t window_pkts, uint32_t psn)
{
    /* READ requests consume many PSNs: room for twice the window */
    uint32_t cap = 1024;
    while (cap < 2 * window_pkts && cap < (1u << 22))
        cap <<= 1;
    struct sr_sack_sb *sb = calloc(1, sizeof(*sb) + cap / 8);
    if (!sb)
        return NULL;
    sb->cap = cap;
    sb->reo_mult = 1;
    sr_sack_sb_reset(sb, psn);
    return sb;
}

void sr_sack_sb_reset(struct sr_sack_sb *sb, uint32_t psn)
{
    memset(sb->bits, 0, sb->cap / 8);
    sb->lo = sb->hi = sb->resent = psn & SR_PSN_MASK;
    sb->cnt = 0;
    sb->timed_out = false;
    sb->ep_n = 0;
    sb->lr_n = 0;
    sb->lr_next_at = 0;
}

void sr_sack_sb_ack(struct sr_sack_sb *sb, uint32_t psn)
{
    if (!sr_psn_lt(sb->lo, psn))
        return;
    if (!sr_psn_lt(psn, sb->hi)) {
        /* everything marked is acknowledged now */
        if (sb->cnt)
            sr_sack_sb_reset(sb, psn);
        sb->lo = sb->hi = psn;
        sb->timed_out = false;
        if (sr_psn_lt(sb->resent, psn))
            sb->resent = psn;
        return;
    }
    uint32_t len = (psn - sb->lo) & SR_PSN_MASK;
    for (uint32_t j = 0; j < len; j += 64) {
        uint32_t n = SR_MIN(64u, len - j);
        uint64_t gone = sb_put(sb, sr_psn_add(sb->lo, j), low_bits(n), false);
        sb->cnt -= (uint32_t)__builtin_popcountll(gone);
    }
    sb->lo = psn;
    sb->timed_out = false;
    /* the hole whose window was running may be acknowledged now: the
     * next SACK starts a window for what is still missing, and the probe
     * timer is not left at a deadline nothing waits for (comp.c) */
    sb->ep_n = 0;
    if (sr_psn_lt(sb->resent, psn))
        sb->resent = psn;
}

/* Offsets x from lo (mod 2^24): x in [2^23, 2^24) is before lo; the PSNs
 * a SACK may mark are an interval [*vlo, *vhi) of x within [0, cap): sent
 * (before max_sent) and tracked. */
static void sb_valid(const struct sr_sack_sb *sb, uint32_t max_sent, uint32_t *vlo, uint32_t *vhi)
{
    uint32_t m = (max_sent - sb->lo) & SR_PSN_MASK;
    if (m <= 0x800000u) {
        *vlo = 0;
        *vhi = SR_MIN(m, sb->cap);
    } else {
        /* max_sent is "before" lo: only x with x - m wrapping to the
         * lower half is before it */
        *vlo = SR_MIN(m - 0x800000u, sb->cap);
        *vhi = sb->cap;
    }
}

uint32_t sr_sack_sb_mark(struct sr_sack_sb *sb, uint32_t base, const uint8_t *bitmap,
                         uint32_t nbits, uint32_t max_sent, uint32_t *ignored)
{
    uint32_t nbytes = (uint32_t)(((uint64_t)nbits + 7) / 8);
    uint32_t vlo, vhi;
    sb_valid(sb, max_sent, &vlo, &vhi);
    uint32_t added = 0, top = 0; /* top: one past the highest valid mark, as an offset */
    /* segments of the bitmap whose offsets do not wrap at 2^24; in each,
     * [vlo, vhi) is marked, [0, vlo) and [vhi, 2^23) are lies */
    for (uint32_t i = 0; i < nbits;) {
        uint32_t x = (base + i - sb->lo) & SR_PSN_MASK;
        uint32_t seg = (uint32_t)SR_MIN((uint64_t)nbits - i, 0x1000000u - (uint64_t)x);
        uint32_t xend = x + seg;
        const uint32_t bad[2][2] = {{0, vlo}, {vhi, 0x800000u}};
        for (int k = 0; k < 2; k++) {
            uint32_t a = SR_MAX(x, bad[k][0]), b = SR_MIN(xend, bad[k][1]);
            if (a < b)
                *ignored += bm_count(bitmap, nbytes, i + (a - x), i + (b - x));
        }
        uint32_t a = SR_MAX(x, vlo), b = SR_MIN(xend, vhi);
        for (uint32_t j = a; j < b; j += 64) {
            uint32_t n = SR_MIN(64u, b - j);
            uint64_t v = bm_get(bitmap, nbytes, i + (j - x), n);
            if (!v)
                continue;
            uint64_t fresh = sb_put(sb, sr_psn_add(sb->lo, j), v, true);
            added += (uint32_t)__builtin_popcountll(fresh);
            top = SR_MAX(top, j + 64 - (uint32_t)__builtin_clzll(v));
        }
        i += seg;
    }
    sb->cnt += added;
    if (top > ((sb->hi - sb->lo) & SR_PSN_MASK))
        sb->hi = sr_psn_add(sb->lo, top);
    return added;
}

bool sr_sack_sb_has(const struct sr_sack_sb *sb, uint32_t psn)
{
    return !sr_psn_lt(psn, sb->lo) && sr_psn_lt(psn, sb->hi) && sb_test(sb, psn);
}

uint32_t sr_sack_sb_lost_limit(const struct sr_sack_sb *sb, uint32_t max_sent, bool all,
                               uint32_t dupthresh)
{
    if (!sb->cnt)
        return sb->lo;
    if (all || sb->hi == max_sent)
        return sb->hi;
    /* the dupthresh-th mark from the top, 64 PSNs at a time downwards */
    uint32_t seen = 0;
    for (uint32_t end = (sb->hi - sb->lo) & SR_PSN_MASK; end > 0 && dupthresh;) {
        uint32_t n = SR_MIN(64u, end), start = end - n;
        uint64_t v = sb_get(sb, sr_psn_add(sb->lo, start), n);
        uint32_t c = (uint32_t)__builtin_popcountll(v);
        if (seen + c >= dupthresh) {
            for (uint32_t r = dupthresh - seen; --r;)
                v &= ~(1ull << (63 - __builtin_clzll(v)));
            return sr_psn_add(sb->lo, start + 63 - (uint32_t)__builtin_clzll(v));
        }
        seen += c;
        end = start;
    }
    return sb->lo;
}

bool sr_sack_sb_next_hole(const struct sr_sack_sb *sb, uint32_t from, uint32_t limit, uint32_t *psn)
{
    if (sr_psn_lt(from, sb->lo))
        from = sb->lo;
    if (!sr_psn_lt(from, limit))
        return false;
    /* past cap PSNs the ring repeats itself: no hole in the first cap, none at all */
    uint32_t len = SR_MIN((uint32_t)sr_psn_diff(limit, from), sb->cap);
    for (uint32_t j = 0; j < len; j += 64) {
        uint32_t n = SR_MIN(64u, len - j);
        uint64_t holes = ~sb_get(sb, sr_psn_add(from, j), n) & low_bits(n);
        if (holes) {
            *psn = sr_psn_add(from, j + (uint32_t)__builtin_ctzll(holes));
            return true;
        }
    }
    return false;
}

/* RFC 8985 6.2: a D-SACK for a resend shows the original was only late;
 * the window grows by a quarter of SRTT, once per round trip (the
 * D-SACKs of one burst of reordering count once), and stays grown for
 * SR_SACK_REO_PERSIST recoveries. A D-SACK for anything else (a probe, a
 * go-back-N resend, a copy the network made) says nothing about
 * reordering. */
void sr_sack_sb_resent(struct sr_sack_sb *sb, uint32_t psn, uint64_t lost_at_ns)
{
    sb->rs_psn[sb->rs_at] = psn & SR_PSN_MASK;
    sb->rs_lost_at[sb->rs_at] = lost_at_ns;
    sb->rs_seen_at[sb->rs_at] = 0;
    sb->rs_at = (sb->rs_at + 1) % SR_SACK_RS_RING;
    if (sb->rs_cnt < SR_SACK_RS_RING)
        sb->rs_cnt++;
    if (sb->reo_persist && !--sb->reo_persist) {
        sb->reo_mult = 1;
        sb->reo_late_ns = 0;
    }
}

/* The remembered resend at ring index i is forgotten: the oldest takes
 * its place. */
static void rs_forget(struct sr_sack_sb *sb, uint32_t i)
{
    uint32_t last = (sb->rs_at + SR_SACK_RS_RING - sb->rs_cnt) % SR_SACK_RS_RING;
    sb->rs_psn[i] = sb->rs_psn[last];
    sb->rs_lost_at[i] = sb->rs_lost_at[last];
    sb->rs_seen_at[i] = sb->rs_seen_at[last];
    sb->rs_cnt--;
}

/* Acknowledged cumulatively or marked. */
static bool sb_delivered(const struct sr_sack_sb *sb, uint32_t psn)
{
    return sr_psn_lt(psn, sb->lo) || sr_sack_sb_has(sb, psn);
}

void sr_sack_sb_resent_again(struct sr_sack_sb *sb, uint32_t psn)
{
    psn &= SR_PSN_MASK;
    for (uint32_t k = 0; k < sb->rs_cnt; k++) {
        uint32_t i = (sb->rs_at + SR_SACK_RS_RING - 1 - k) % SR_SACK_RS_RING;
        if (sb->rs_psn[i] != psn)
            continue;
        rs_forget(sb, i);
        return;
    }
}

void sr_sack_sb_seen(struct sr_sack_sb *sb, uint64_t now_ns)
{
    for (uint32_t k = 0; k < sb->rs_cnt; k++) {
        uint32_t i = (sb->rs_at + SR_SACK_RS_RING - 1 - k) % SR_SACK_RS_RING;
        if (!sb->rs_seen_at[i] && sb_delivered(sb, sb->rs_psn[i]))
            sb->rs_seen_at[i] = now_ns | 1; /* 0 means not yet */
    }
}

void sr_sack_sb_track(struct sr_sack_sb *sb, uint32_t psn, uint32_t after, uint64_t now_ns)
{
    if (sb->lr_n == SR_SACK_LR_MAX) {
        /* the oldest is left to the probe */
        sb->lr_n--;
        memmove(sb->lr, sb->lr + 1, sb->lr_n * sizeof(sb->lr[0]));
    }
    sb->lr[sb->lr_n++] =
        (struct sr_sack_lr){.psn = psn & SR_PSN_MASK, .after = after & SR_PSN_MASK, .at = now_ns};
}

uint32_t sr_sack_sb_lost_resends(struct sr_sack_sb *sb, uint64_t now_ns, uint64_t wnd_ns,
                                 uint32_t *out, uint32_t max, uint64_t *next_at)
{
    /* The newest followed resend shown delivered: every missing one sent
     * before it was overtaken. */
    uint32_t overtaken = 0, n = 0, kept = 0;
    for (uint32_t k = 0; k < sb->lr_n; k++)
        if (sb_delivered(sb, sb->lr[k].psn))
            overtaken = k + 1;
    *next_at = 0;
    for (uint32_t k = 0; k < sb->lr_n; k++) {
        struct sr_sack_lr r = sb->lr[k];
        if (sb_delivered(sb, r.psn))
            continue; /* delivered: forgotten */
        /* kept once learnt: the later one shown delivered is forgotten */
        r.passed = r.passed || k < overtaken || sr_psn_lt(r.after, sb->hi);
        uint64_t at = r.at + wnd_ns;
        if (r.passed && now_ns >= at && n < max) {
            out[n++] = r.psn;
            continue;
        }
        if (r.passed && (!*next_at || at < *next_at))
            *next_at = at;
        sb->lr[kept++] = r;
    }
    sb->lr_n = kept;
    return n;
}

bool sr_sack_sb_dsack(struct sr_sack_sb *sb, uint32_t psn, uint64_t now_ns, uint64_t srtt_ns)
{
    psn &= SR_PSN_MASK;
    for (uint32_t k = 0; k < sb->rs_cnt; k++) {
        uint32_t i = (sb->rs_at + SR_SACK_RS_RING - 1 - k) % SR_SACK_RS_RING;
        if (sb->rs_psn[i] != psn)
            continue;
        /* One copy arrived twice. When the original came first, the
         * first answer that showed the PSN delivered (seen) dates it; this
         * D-SACK, the resend's, comes a round trip after the resend, and
         * dating by it would count the window already waited and that
         * round trip (the sender's queue in it) as lateness, raising the
         * window at every spurious resend. When the resend came first,
         * its answer is the first to show the PSN and the original was
         * later still: the lateness is underestimated by at most what the
         * window lacked, and the next spurious resend raises it again. */
        uint64_t lost_at = sb->rs_lost_at[i];
        uint64_t at = sb->rs_seen_at[i] ? sb->rs_seen_at[i] : now_ns;
        if (lost_at && at > lost_at && at - lost_at > sb->reo_late_ns)
            sb->reo_late_ns = at - lost_at;
        /* forget it: a second D-SACK of the same PSN is the network's copy */
        rs_forget(sb, i);
        /* reo_persist is 0 before the first growth, and again once the
         * window fell back */
        if (!sb->reo_persist || now_ns - sb->reo_grown_at >= srtt_ns) {
            if (sb->reo_mult < SR_SACK_REO_MULT_MAX)
                sb->reo_mult++;
            sb->reo_grown_at = now_ns;
        }
        sb->reo_persist = SR_SACK_REO_PERSIST;
        return true;
    }
    return false;
}

uint64_t sr_sack_sb_reo_wnd(const struct sr_sack_sb *sb, uint64_t srtt_ns)
{
    /* the lateness learnt, with a quarter SRTT to spare: it dates the
     * answer that showed the original, and the next late one may come a
     * little later still */
    uint64_t late = sb->reo_late_ns ? sb->reo_late_ns + srtt_ns / 4 : 0;
    return SR_MAX(SR_MIN(sb->reo_mult * (srtt_ns / 4), srtt_ns), late);
}

/* ---- on a QP ---- */
/* A QP sprayed over several paths (paths.h) sees its packets overtake
 * each other by the difference of the paths' queues, every round trip,
 * not by rare reordering: before it counts a hole lost it waits for one
 * later PSN per path (at least RFC 6675's DupThresh) and for a whole SRTT,
 * RFC 8985 6.2's upper bound on the reordering window (a quarter of SRTT
 * otherwise). In the fabric simulator this cuts a sprayed permutation's
 * resends by 3 to 5 times (docs/FABRIC.md). */
static uint32_t qp_paths_n(const struct sr_qp *qp)
{
    const struct sr_paths *p = sr_qp_paths(qp);
    return p ? p->n : 1;
}

static uint32_t dupthresh(const struct sr_qp *qp)
{
    return SR_MAX(qp_paths_n(qp), (uint32_t)SR_SACK_DUPTHRESH);
}

static uint64_t reo_wnd(const struct sr_qp *qp)
{
    if (!qp->comp.rtt.valid)
        return 0;
    uint64_t srtt = qp->comp.rtt.srtt_ns;
    if (qp_paths_n(qp) > 1)
        return srtt;
    if (!qp->comp.sb)
        return srtt / 4;
    /* Grown, it stays within a sixteenth of the transport timer: on a
     * host so loaded that SRTT nears the timer (tens of ms against
     * ibv_rc_pingpong's 67 ms), waiting out a whole SRTT before the
     * resend and another round trip for its answer would let the timer
     * expire first and consume a retry (IBA 9.7.6.1.3). */
    uint64_t wnd = sr_sack_sb_reo_wnd(qp->comp.sb, srtt);
    uint64_t cap = SR_MAX(srtt / 4, sr_timeout_ns(qp->attr.timeout) / 16);
    /* A requester with nothing new to send (every posted WQE has left: a
     * ping-pong's message, a stream's last batch) gains no goodput from
     * waiting past SRTT: the link is idle, so a spurious resend delays
     * nothing, while each hole's wait delays the message's completion.
     * It keeps RFC 8985 6.2's bound of SRTT; the lateness learnt beyond
     * it serves again once there is new data to protect. */
    if (qp->req.cur == qp->sq_tail)
        cap = SR_MIN(cap, srtt);
    return SR_MIN(wnd, cap);
}

static struct sr_sack_sb *qp_sb(struct sr_qp *qp, bool create)
{
    if (!qp->comp.sb && create)
        qp->comp.sb = sr_sack_sb_new(qp->eng->cfg.window_pkts, qp->comp.psn);
    if (qp->comp.sb)
        sr_sack_sb_ack(qp->comp.sb, qp->comp.psn);
    return qp->comp.sb;
}

void sr_sack_rx(struct sr_qp *qp, const struct sr_pkt *pkt, struct sr_comp_next *n)
{
    struct sr_engine *e = qp->eng;
    uint32_t len = pkt->payload_len;
    /* the bitmap: whole 64-bit words, at most SR_SACK_MAX_BITS */
    if (len == 0 || len % 8 || len * 8 > SR_SACK_MAX_BITS) {
        e->stats.sack_bad++;
        return;
    }
    struct sr_sack_sb *sb = qp_sb(qp, true);
    if (!sb)
        return;
    /* The base lies right after the cumulative PSN for a softrdma
     * responder; anything outside the tracked range is not believed. */
    int32_t d = sr_psn_diff(pkt->sack.base_psn, qp->comp.psn);
    if (d < -(int32_t)SR_SACK_MAX_BITS || d >= (int32_t)sb->cap) {
        e->stats.sack_bad++;
        return;
    }
    uint32_t ignored = 0;
    uint32_t added =
        sr_sack_sb_mark(sb, pkt->sack.base_psn, pkt->payload, len * 8, qp->req.max_sent, &ignored);
    if (ignored)
        e->stats.sack_bad++;
    sr_sack_sb_seen(sb, e->now_ns); /* before this SACK's own D-SACK */
    if (pkt->sack.flags & SR_SACK_F_RPH)
        qp->comp.peer_rph = true; /* RC SENDs carry an RPETH from now on (req.c) */
    if (added && qp->comp.rtt_timing && sr_sack_sb_has(sb, qp->comp.rtt_psn)) {
        /* The timed packet arrived behind a hole and this SACK is its
         * answer; its cumulative ACK waits for the hole's repair, which a
         * sample taken then would time too (RFC 8985 2: RTT from each
         * packet's delivery). */
        qp->comp.rtt_timing = false;
        sr_rtt_sample(&qp->comp.rtt, e->now_ns - qp->comp.rtt_sent_ns);
    }
    if (pkt->sack.flags & SR_SACK_F_DSACK) {
        /* docs/WIRE.md: a request that reached the responder twice */
        e->stats.dsacks_rcvd++;
        if (sr_sack_sb_dsack(sb, pkt->sack.dsack_psn, e->now_ns, qp->comp.rtt.srtt_ns)) {
            e->stats.sack_spurious++;
        } else if (sb->probe_out && pkt->sack.dsack_psn == sb->probe_psn) {
            /* the original of the probed packet had arrived */
            sb->probe_out = false;
            sr_rtt_probe_spurious(&qp->comp.rtt);
            e->stats.sack_spurious++;
        }
    }
    if (added) {
        sr_comp_delivered(qp, e->now_ns); /* newly SACKed packets are deliveries */
        n->act |= SR_COMP_SACK;
    }
}

/* Resends that were lost again go once more, as soon as a packet sent
 * after them is shown delivered (RFC 8985 6.3), rather than when the
 * probe timeout, which every SACK of new deliveries pushes back, finally
 * fires after the SACKs stop. False when the QP left RTS. */
static bool resend_lost_resends(struct sr_qp *qp, struct sr_sack_sb *sb, uint64_t now_ns)
{
    enum sr_qp_state s = qp->attr.qp_state;
    uint32_t lost[SR_SACK_LR_MAX];
    uint64_t next_at = 0;
    uint32_t n = sr_sack_sb_lost_resends(sb, now_ns, reo_wnd(qp), lost, SR_SACK_LR_MAX, &next_at);
    bool sent = false;
    for (uint32_t k = 0; k < n; k++) {
        bool one = false;
        uint32_t used = sr_req_resend(qp, lost[k], now_ns, &one);
        if (qp->attr.qp_state != s)
            return false; /* the WQE failed: the QP left RTS */
        if (!used)
            continue; /* acknowledged meanwhile, or nothing left to send */
        if (one) {
            qp->eng->stats.sack_resends++;
            qp->eng->stats.sack_lost_resends++;
            sent = true;
            sr_sack_sb_resent_again(sb, lost[k]);
            sr_sack_sb_track(sb, lost[k], qp->req.max_sent, now_ns);
        }
    }
    sb->lr_next_at = next_at;
    if (sent || !qp->comp.probe_at)
        sr_comp_probe_arm(qp, now_ns); /* also after the timer fired for one */
    if (next_at)
        sr_comp_probe_by(qp, next_at);
    return true;
}

void sr_sack_resend(struct sr_qp *qp, uint64_t now_ns, bool all)
{
    enum sr_qp_state s = qp->attr.qp_state;
    if ((s != SR_QPS_RTS && s != SR_QPS_SQD) || qp->req.rnr_wait)
        return;
    struct sr_sack_sb *sb = qp_sb(qp, false);
    if (!sb || !sb->cnt)
        return;
    if (!all && (sb->lr_n || sb->lr_next_at) && !resend_lost_resends(qp, sb, now_ns))
        return; /* the WQE failed: the QP left RTS */
    uint32_t limit = sr_sack_sb_lost_limit(sb, qp->req.max_sent, all, dupthresh(qp));
    uint32_t from = all ? sb->lo : sb->resent;
    uint32_t h, due = 0;
    if (!all) {
        /* A hole counted lost may only be late (reordered, RFC 8985 2.2):
         * resend once it has been counted lost for the reordering window
         * (6.2), each hole timed from the SACK that first counted it lost,
         * so that a hole counted lost just now does not go with an older
         * one whose window ran out; the probe comes due at the oldest
         * deadline, so a hole no later SACK reports still goes in time. */
        if (!sr_sack_sb_next_hole(sb, from, limit, &h)) {
            if (sb->ep_n) {
                /* the holes came after all: the probe timer no longer
                 * waits for a window (sr_comp_probe_arm took its end) */
                sb->ep_n = 0;
                sr_comp_probe_arm(qp, now_ns);
            }
            return;
        }
        if (!sb->ep_n || sr_psn_lt(sb->ep_lim[sb->ep_n - 1], limit)) {
            if (sb->ep_n == SR_SACK_EPOCHS) {
                sb->ep_lim[sb->ep_n - 1] = limit; /* full: the newest epoch grows */
            } else {
                /* now | 1 (0 means none): compared as a deadline, never
                 * as a difference, which would wrap for an even now */
                sb->ep_lim[sb->ep_n] = limit;
                sb->ep_at[sb->ep_n] = now_ns | 1;
                sb->ep_n++;
            }
        }
        uint64_t wnd = reo_wnd(qp);
        while (due < sb->ep_n && (!wnd || now_ns >= sb->ep_at[due] + wnd))
            due++;
        if (!due) {
            sr_comp_probe_by(qp, sb->ep_at[0] + wnd);
            return;
        }
        limit = sb->ep_lim[due - 1];
    }
    int budget = SR_SACK_RESEND_MAX;
    bool sent = false;
    uint32_t k = 0;
    while (budget-- > 0 && sr_sack_sb_next_hole(sb, from, limit, &h)) {
        bool one = false;
        uint32_t used = sr_req_resend(qp, h, now_ns, &one);
        if (qp->attr.qp_state != s)
            return; /* the WQE failed: the QP left RTS */
        if (!used)
            break;
        if (one) {
            qp->eng->stats.sack_resends++;
            sent = true;
            if (all)
                sr_sack_sb_resent_again(sb, h);
            else {
                while (k + 1 < due && !sr_psn_lt(h, sb->ep_lim[k]))
                    k++;
                sr_sack_sb_resent(sb, h, sb->ep_at[k]);
                sr_sack_sb_track(sb, h, qp->req.max_sent, now_ns);
            }
        }
        from = sr_psn_add(h, used);
        if (sr_psn_lt(sb->resent, from))
            sb->resent = from;
    }
    if (all) {
        sb->ep_n = 0;
    } else {
        /* The epochs that came due are resent; later ones wait on. Holes
         * a full budget left over, or that had nothing to resend, wait
         * for a window that a later SACK starts, as a deadline already
         * passed would bring the probe timer back at once. */
        sb->ep_n -= due;
        memmove(sb->ep_lim, sb->ep_lim + due, sb->ep_n * sizeof(sb->ep_lim[0]));
        memmove(sb->ep_at, sb->ep_at + due, sb->ep_n * sizeof(sb->ep_at[0]));
    }
    if (sent || !qp->comp.probe_at)
        sr_comp_probe_arm(qp, now_ns);
    if (sb->ep_n)
        sr_comp_probe_by(qp, sb->ep_at[0] + reo_wnd(qp));
}

void sr_sack_acked(struct sr_qp *qp, uint64_t now_ns)
{
    struct sr_sack_sb *sb = qp->comp.sb;
    if (sb && sb->rs_cnt) {
        sr_sack_sb_ack(sb, qp->comp.psn);
        sr_sack_sb_seen(sb, now_ns);
    }
}

bool sr_sack_lost_pending(struct sr_qp *qp)
{
    struct sr_sack_sb *sb = qp_sb(qp, false);
    return sb && sb->cnt && (sb->ep_n || (sb->lr_next_at && qp->eng->now_ns >= sb->lr_next_at));
}

uint64_t sr_sack_lost_deadline(const struct sr_qp *qp)
{
    const struct sr_sack_sb *sb = qp->comp.sb;
    if (!sb || !sb->cnt || (!sb->ep_n && !sb->lr_next_at))
        return 0;
    uint64_t at = sb->ep_n ? sb->ep_at[0] + reo_wnd(qp) : 0;
    if (sb->lr_next_at && (!at || sb->lr_next_at < at))
        at = sb->lr_next_at;
    return at;
}

bool sr_sack_probe_holes(struct sr_qp *qp)
{
    /* Marks with no hole below them (the cumulative ACK that covered
     * them was lost) leave nothing to resend: the ordinary probe then
     * asks for a fresh acknowledgement. */
    struct sr_sack_sb *sb = qp_sb(qp, false);
    uint32_t h;
    return sb && sb->cnt && sr_sack_sb_next_hole(sb, sb->lo, sb->hi, &h);
}

/* A timeout with SACKed PSNs beyond a hole means the peer holds them but
 * the hole's resend or its answer was lost, or sits behind a long queue
 * (the round trip outgrew the timer). Resending the holes keeps what the
 * peer holds; the next expiry without progress still goes back to
 * comp.psn and discards the marks (RFC 2018 section 8: the receiver may
 * have reneged). Each expiry consumes retry_cnt as before, so a peer that
 * lies fails the QP in the same time a silent one does. */
bool sr_sack_timeout_holes(struct sr_qp *qp)
{
    struct sr_sack_sb *sb = qp_sb(qp, false);
    uint32_t h;
    if (!sb || !sb->cnt || sb->timed_out || !sr_sack_sb_next_hole(sb, sb->lo, sb->hi, &h))
        return false;
    sb->timed_out = true;
    return true;
}

void sr_sack_probe_sent(struct sr_qp *qp)
{
    if (!qp->eng->cfg.sack || !qp->comp.peer_sack)
        return;
    struct sr_sack_sb *sb = qp_sb(qp, true);
    if (!sb)
        return;
    sb->probe_psn = sr_psn_add(qp->req.max_sent, SR_PSN_MASK);
    sb->probe_out = true;
}

bool sr_sack_rnr(struct sr_qp *qp, uint32_t psn)
{
    struct sr_sack_sb *sb = qp_sb(qp, false);
    if (!sb || !qp->eng->cfg.sack || !qp->comp.peer_sack)
        return false;
    /* The NAKed request is not held, even if a SACK showed it kept: the
     * responder's drain met the missing receive WQE and dropped it. At
     * the cumulative PSN a mark is never a delivery (the responder would
     * have run the request), so clearing it costs at most one resend. */
    if (sr_sack_sb_has(sb, psn)) {
        sb_put(sb, psn, 1, false);
        sb->cnt--;
    }
    return sb->cnt != 0;
}

void sr_sack_discard(struct sr_qp *qp)
{
    if (qp->comp.sb) {
        sr_sack_sb_reset(qp->comp.sb, qp->comp.psn);
        /* going back N resends every one of them: a D-SACK from now on
         * may be that copy's, and proves no resend spurious */
        qp->comp.sb->rs_cnt = 0;
    }
}

void sr_sack_free(struct sr_qp *qp)
{
    free(qp->comp.sb);
    qp->comp.sb = NULL;
}

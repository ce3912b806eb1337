/* dcqcn.c: DCQCN (Zhu et al., "Congestion Control for Large-Scale RDMA
 * Deployments", SIGCOMM 2015): the reaction point's rate machine on the
 * sender, and the notification point's CNP decision on the receiver.
 *
 * Reaction point, per the paper's RP algorithm (sec. 3):
 *   CNP:        Rt = Rc; Rc = Rc (1 - alpha/2); alpha = (1 - g) alpha + g;
 *               timer, byte counter and both stage counts start over.
 *   every K with no CNP:   alpha = (1 - g) alpha.
 *   increase event (timer T expired, or B bytes sent):
 *       both counts <= F:  fast recovery    Rc = (Rt + Rc) / 2
 *       both counts >  F:  hyper increase   Rt += i R_HAI, i = min(counts) - F
 *       otherwise:         additive increase Rt += R_AI
 *       and after AI/HAI:  Rc = (Rt + Rc) / 2
 * Rates are capped at the line rate and floored at the minimum rate. Until
 * the first CNP the QP runs at line rate and no timer runs, as in hardware,
 * whose rate limiter is attached at the first CNP; when the rate is back at
 * line rate the limiter is released and the timers stop, so an idle or
 * uncongested QP has no deadline. Alpha's decay over that quiet time is
 * applied at the next CNP.
 *
 * Window: without PFC a rate alone lets a QP put its whole engine window
 * (2048 packets) in flight before the first CNP can return, and a shallow
 * buffer overflows in that round trip. As IRN (Mittal et al., SIGCOMM 2018,
 * sec. 3.2) the QP also caps what is unacknowledged at a BDP: here
 * bdp_mult x Rc x base RTT, the base RTT being the smallest sample seen
 * (HPCC's W = B x T, sec. 3.2, with the current rate for B, so a cut rate
 * also shrinks the window and a late pacer cannot release more than that).
 * Before any sample the window is init_wnd, sized to fit a shallow buffer.
 * A configured base RTT (IRN and UET configure theirs) replaces the
 * smallest sample: on a loaded host a lucky sample can be a fifth of the
 * typical unloaded round trip, and would shrink the window below it.
 * With bdp_srtt the window's RTT is the smoothed RTT (RFC 6298), floored
 * at the configured base RTT: through srdma-switch a loaded host's round
 * trip is milliseconds, and a window from the base RTT alone caps the QP
 * at W / RTT, far below its rate and the link. The smoothed RTT carries
 * the queue the QP builds, though, so the window then follows the queue
 * instead of bounding it (measured there: a full buffer and drops), hence
 * off by default (docs/CONGESTION.md, "Measured").
 * With wnd_ss the window also opens by at most the bytes acknowledged
 * (slow start, RFC 5681 3.1), from init_wnd, up to that cap: a cap sized
 * for the hosts' long round trips (a large base RTT) is then reached in
 * round trips of ACKs, not at once, so N QPs starting or recovering
 * together do not put N caps into a shallow buffer before the first CNP.
 */
#include <string.h>

#include "sr_cc.h"

static struct sr_cc_dcqcn *dq(struct sr_cc *cc)
{
    return &cc->u.dcqcn;
}
static const struct sr_cc_dcqcn *cdq(const struct sr_cc *cc)
{
    return &cc->u.dcqcn;
}

static uint64_t clamp_rate(const struct sr_cc_dcqcn *d, uint64_t r)
{
    if (r > d->line_rate_bps)
        r = d->line_rate_bps;
    if (r < d->p.min_rate_bps)
        r = d->p.min_rate_bps;
    return r;
}

static void apply_rate(struct sr_cc *cc)
{
    sr_cc_pacer_set_rate(&cc->pacer, dq(cc)->rc_bps);
}

static int dcqcn_init(struct sr_cc *cc, const struct sr_cc_cfg *cfg, uint64_t now_ns)
{
    struct sr_cc_dcqcn *d = dq(cc);
    (void)now_ns;
    if (!cfg->line_rate_bps)
        return SR_ERR_INVAL;
    memset(d, 0, sizeof(*d));
    d->p = sr_cc_dcqcn_effective(cfg);
    if (!d->p.alpha_timer_ns || !d->p.rate_timer_ns || !d->p.byte_counter)
        return SR_ERR_INVAL;
    d->line_rate_bps = cfg->line_rate_bps;
    d->rc_bps = d->rt_bps = cfg->line_rate_bps;
    d->alpha = d->p.alpha_init;
    d->alpha_deadline_ns = d->rate_deadline_ns = SR_CC_NO_DEADLINE;
    d->cwnd = d->p.init_wnd;
    apply_rate(cc);
    return 0;
}

static void dcqcn_fini(struct sr_cc *cc)
{
    memset(dq(cc), 0, sizeof(*dq(cc)));
}

static void increase(struct sr_cc *cc)
{
    struct sr_cc_dcqcn *d = dq(cc);
    uint32_t f = d->p.fast_recovery_steps;
    uint32_t lo = d->t_cnt < d->bc_cnt ? d->t_cnt : d->bc_cnt;
    uint32_t hi = d->t_cnt < d->bc_cnt ? d->bc_cnt : d->t_cnt;
    if (hi > f) {
        if (lo > f)
            d->rt_bps += (uint64_t)(lo - f) * d->p.rhai_bps;
        else
            d->rt_bps += d->p.rai_bps;
        d->rt_bps = clamp_rate(d, d->rt_bps);
    }
    /* Rounded up: Rt >= Rc here, and a floor would leave Rc one bit per
     * second short of the line rate for ever. */
    d->rc_bps = clamp_rate(d, d->rt_bps / 2 + d->rc_bps / 2 + ((d->rt_bps | d->rc_bps) & 1));
    if (d->rc_bps == d->line_rate_bps && d->rt_bps == d->line_rate_bps) {
        d->limited = false;
        d->alpha_resume_ns = d->alpha_deadline_ns;
        d->alpha_deadline_ns = d->rate_deadline_ns = SR_CC_NO_DEADLINE;
    }
    apply_rate(cc);
}

static uint64_t cap_bytes(const struct sr_cc_dcqcn *d);

static void dcqcn_on_sent(struct sr_cc *cc, uint32_t bytes, uint64_t now_ns)
{
    struct sr_cc_dcqcn *d = dq(cc);
    (void)now_ns;
    if (!d->limited)
        return;
    d->bytes_since_event += bytes;
    /* One increase event per B bytes; a jumbo send can complete several. */
    while (d->limited && d->bytes_since_event >= d->p.byte_counter) {
        d->bytes_since_event -= d->p.byte_counter;
        d->bc_cnt++;
        increase(cc);
    }
}

static void dcqcn_on_ack(struct sr_cc *cc, uint64_t acked_bytes, uint64_t rtt_ns, bool ecn_echo,
                         uint64_t now_ns)
{
    /* DCQCN's rate reacts to CNPs only; an ACK's RTT sample only feeds the
     * window's base RTT. */
    struct sr_cc_dcqcn *d = dq(cc);
    if (rtt_ns && (!d->min_rtt_ns || rtt_ns < d->min_rtt_ns))
        d->min_rtt_ns = rtt_ns;
    /* RFC 6298 2.2-2.3: the first sample is the estimate, then
     * srtt += (sample - srtt) / 8. */
    if (rtt_ns)
        d->srtt_ns = d->srtt_ns ? d->srtt_ns - d->srtt_ns / 8 + rtt_ns / 8 : rtt_ns;
    if (d->p.wnd_ss) {
        /* Slow start's rule (RFC 5681 3.1): each acknowledged byte opens
         * the window by one, so it at most doubles per round trip, up to
         * the cap; kept at the cap, so a cut's smaller cap is where it
         * grows from again. */
        uint64_t cap = cap_bytes(d), w = d->cwnd + acked_bytes;
        d->cwnd = cap && w > cap ? cap : w;
        if (d->cwnd < d->p.min_wnd)
            d->cwnd = d->p.min_wnd;
    }
    (void)ecn_echo;
    (void)now_ns;
}

/* A stopped timer (SR_CC_NO_DEADLINE) is never due, even at the end of time. */
static bool due(uint64_t deadline_ns, uint64_t now_ns)
{
    return deadline_ns != SR_CC_NO_DEADLINE && deadline_ns <= now_ns;
}

static void dcqcn_on_timer(struct sr_cc *cc, uint64_t now_ns)
{
    struct sr_cc_dcqcn *d = dq(cc);
    /* Catch up period by period, so that a late call gives the same state
     * as timely ones; events are ordered by their due time. */
    while (due(d->alpha_deadline_ns, now_ns) || due(d->rate_deadline_ns, now_ns)) {
        if (d->alpha_deadline_ns <= d->rate_deadline_ns) {
            d->alpha = (1 - d->p.g) * d->alpha;
            d->alpha_deadline_ns += d->p.alpha_timer_ns;
        } else {
            d->t_cnt++;
            d->rate_deadline_ns += d->p.rate_timer_ns;
            increase(cc);
        }
    }
}

static void dcqcn_on_cnp(struct sr_cc *cc, uint64_t now_ns)
{
    struct sr_cc_dcqcn *d = dq(cc);
    /* Timers due at this instant come first: they belong to the past. */
    dcqcn_on_timer(cc, now_ns);
    if (d->cut_once && now_ns - d->last_cut_ns < d->p.decrease_interval_ns)
        return;
    if (d->cut_once && !d->limited) {
        /* The decay periods that passed while released, until alpha is
         * negligible (so a long quiet time costs a bounded loop). */
        while (d->p.g > 0 && d->alpha > 1e-9 && d->alpha_resume_ns <= now_ns) {
            d->alpha = (1 - d->p.g) * d->alpha;
            d->alpha_resume_ns += d->p.alpha_timer_ns;
        }
    }
    d->rt_bps = d->rc_bps;
    d->rc_bps = clamp_rate(d, (uint64_t)((double)d->rc_bps * (1.0 - d->alpha / 2)));
    d->alpha = (1 - d->p.g) * d->alpha + d->p.g;
    d->cut_once = true;
    d->limited = true;
    d->last_cut_ns = now_ns;
    d->t_cnt = d->bc_cnt = 0;
    d->bytes_since_event = 0;
    if (d->p.wnd_ss && cap_bytes(d) && d->cwnd > cap_bytes(d))
        d->cwnd = cap_bytes(d) > d->p.min_wnd ? cap_bytes(d) : d->p.min_wnd;
    /* The alpha decay waits a full K without feedback; the increase timer
     * starts over from the cut (paper, RP algorithm). */
    d->alpha_deadline_ns = now_ns + d->p.alpha_timer_ns;
    d->rate_deadline_ns = now_ns + d->p.rate_timer_ns;
    apply_rate(cc);
}

static uint64_t dcqcn_deadline(const struct sr_cc *cc)
{
    const struct sr_cc_dcqcn *d = cdq(cc);
    return d->alpha_deadline_ns < d->rate_deadline_ns ? d->alpha_deadline_ns : d->rate_deadline_ns;
}

static uint64_t bdp_bytes(const struct sr_cc_dcqcn *d, uint64_t rtt_ns)
{
    double w = d->p.bdp_mult * (double)d->rc_bps * (double)rtt_ns / 8e9;
    return w > (double)d->p.min_wnd ? (uint64_t)w : d->p.min_wnd;
}

/* The BDP cap: bdp_mult x Rc x the window's RTT (0: no window). */
static uint64_t cap_bytes(const struct sr_cc_dcqcn *d)
{
    if (d->p.bdp_mult <= 0)
        return 0; /* rate only: the engine's fixed window */
    uint64_t rtt = d->p.base_rtt_ns ? d->p.base_rtt_ns : d->min_rtt_ns;
    if (d->p.bdp_srtt) {
        /* The round trip the QP sees, never below a configured base RTT
         * (sized to the buffer): only a longer round trip opens it. */
        if (!d->srtt_ns)
            return d->p.base_rtt_ns ? bdp_bytes(d, d->p.base_rtt_ns) : d->p.init_wnd;
        rtt = d->srtt_ns > d->p.base_rtt_ns ? d->srtt_ns : d->p.base_rtt_ns;
    }
    if (!rtt)
        return d->p.init_wnd;
    return bdp_bytes(d, rtt);
}

static uint64_t dcqcn_window(const struct sr_cc *cc)
{
    const struct sr_cc_dcqcn *d = cdq(cc);
    uint64_t cap = cap_bytes(d);
    if (!cap || !d->p.wnd_ss)
        return cap;
    return d->cwnd < cap ? d->cwnd : cap;
}

static uint64_t dcqcn_rate(const struct sr_cc *cc)
{
    return cdq(cc)->rc_bps;
}

const struct sr_cc_ops sr_cc_dcqcn_ops = {
    .name = "dcqcn",
    .init = dcqcn_init,
    .fini = dcqcn_fini,
    .on_sent = dcqcn_on_sent,
    .on_ack = dcqcn_on_ack,
    .on_cnp = dcqcn_on_cnp,
    .on_timer = dcqcn_on_timer,
    .next_deadline = dcqcn_deadline,
    .window_bytes = dcqcn_window,
    .rate_bps = dcqcn_rate,
};

double sr_cc_dcqcn_alpha(const struct sr_cc *cc)
{
    return cc->ops == &sr_cc_dcqcn_ops ? cdq(cc)->alpha : 0;
}

uint64_t sr_cc_dcqcn_target_bps(const struct sr_cc *cc)
{
    return cc->ops == &sr_cc_dcqcn_ops ? cdq(cc)->rt_bps : 0;
}

uint64_t sr_cc_dcqcn_base_rtt_ns(const struct sr_cc *cc)
{
    return cc->ops == &sr_cc_dcqcn_ops ? cdq(cc)->min_rtt_ns : 0;
}

uint64_t sr_cc_dcqcn_srtt_ns(const struct sr_cc *cc)
{
    return cc->ops == &sr_cc_dcqcn_ops ? cdq(cc)->srtt_ns : 0;
}

/* ---- notification point ---- */

bool sr_cc_np_on_ce(struct sr_cc_np *np, const struct sr_cc_np_params *p, uint64_t now_ns)
{
    /* Paper, NP algorithm: at most one CNP per N (50 us) per flow; softrdma's
     * flow is the QP. The CNP itself is IBA Annex A17.9's (BTH opcode 0x81,
     * 16 reserved bytes), encoded by sr_wire. */
    if (np->sent && now_ns - np->last_cnp_ns < p->cnp_interval_ns)
        return false;
    np->sent = true;
    np->last_cnp_ns = now_ns;
    return true;
}

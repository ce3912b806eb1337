/* nscc.c: a delay- and ECN-driven window controller in the manner of the
 * Ultra Ethernet Transport's NSCC (UET 1.0 specification, congestion
 * management), with Swift's multiplicative decrease (Kumar et al.,
 * SIGCOMM 2020, Alg. 1). For softrdma-to-softrdma QPs, where every ACK
 * brings an RTT sample and the ECN echo of the data it acknowledges.
 *
 * The queueing delay is RTT - base RTT. Per ACK, by the two signals:
 *   delay >  target:          multiplicative decrease, at most once per RTT:
 *                             cwnd *= max(1 - beta (delay - target) / delay,
 *                                         1 - md_max)
 *   delay <= target, ECN:     fair increase only (a queue is building
 *                             somewhere; do not grow in proportion)
 *   delay <= target, no ECN:  proportional increase
 *                             cwnd += gain acked (target - delay) / target,
 *                             plus the fair increase
 * Fair increase is additive: fi_bytes per window acknowledged, the same for
 * every flow, which is what converges competing flows to a fair share.
 * An ECN echo before any RTT sample is congestion of unknown size: the
 * largest cut (md_max). The window stays within [min_wnd, max_wnd]; the
 * pacing rate is cwnd / srtt.
 */
#include <string.h>

#include "sr_cc.h"

static struct sr_cc_nscc *ns(struct sr_cc *cc)
{
    return &cc->u.nscc;
}
static const struct sr_cc_nscc *cns(const struct sr_cc *cc)
{
    return &cc->u.nscc;
}

static void clamp_and_pace(struct sr_cc *cc)
{
    struct sr_cc_nscc *n = ns(cc);
    if (n->cwnd < n->p.min_wnd)
        n->cwnd = n->p.min_wnd;
    if (n->cwnd > n->p.max_wnd)
        n->cwnd = n->p.max_wnd;
    uint64_t rate = 0;
    if (n->p.pace && n->srtt_ns) {
        rate = (uint64_t)((unsigned __int128)n->cwnd * 8u * 1000000000u / n->srtt_ns);
        /* No faster than the line; 0 would mean "not paced". */
        if (n->line_rate_bps && rate > n->line_rate_bps)
            rate = n->line_rate_bps;
        if (!rate)
            rate = 1;
    }
    sr_cc_pacer_set_rate(&cc->pacer, rate);
}

static int nscc_init(struct sr_cc *cc, const struct sr_cc_cfg *cfg, uint64_t now_ns)
{
    struct sr_cc_nscc *n = ns(cc);
    (void)now_ns;
    memset(n, 0, sizeof(*n));
    n->p = sr_cc_nscc_effective(cfg);
    if (!n->p.target_qdelay_ns || n->p.min_wnd > n->p.max_wnd)
        return SR_ERR_INVAL;
    n->line_rate_bps = cfg->line_rate_bps;
    n->cwnd = n->p.init_wnd;
    clamp_and_pace(cc);
    return 0;
}

static void nscc_fini(struct sr_cc *cc)
{
    memset(ns(cc), 0, sizeof(*ns(cc)));
}

static void nscc_on_sent(struct sr_cc *cc, uint32_t bytes, uint64_t now_ns)
{
    (void)cc;
    (void)bytes;
    (void)now_ns;
}

static void decrease(struct sr_cc_nscc *n, double factor, uint64_t now_ns)
{
    /* Once per RTT: the ACKs of one window all carry the same congestion. */
    if (n->decreased && now_ns - n->last_decrease_ns < n->srtt_ns)
        return;
    n->cwnd = (uint64_t)((double)n->cwnd * (1.0 - factor));
    n->decreased = true;
    n->last_decrease_ns = now_ns;
}

static void nscc_on_ack(struct sr_cc *cc, uint64_t acked_bytes, uint64_t rtt_ns, bool ecn_echo,
                        uint64_t now_ns)
{
    struct sr_cc_nscc *n = ns(cc);
    if (rtt_ns) {
        /* srtt as RFC 6298 (gain 1/8); the first sample sets it. */
        n->srtt_ns = n->srtt_ns ? n->srtt_ns - n->srtt_ns / 8 + rtt_ns / 8 : rtt_ns;
        if (!n->min_rtt_ns || rtt_ns < n->min_rtt_ns)
            n->min_rtt_ns = rtt_ns;
    }
    uint64_t delay_ns = rtt_ns ? rtt_ns : n->srtt_ns;
    if (!delay_ns) {
        if (ecn_echo)
            decrease(n, n->p.md_max, now_ns);
        clamp_and_pace(cc);
        return;
    }
    uint64_t base = n->p.base_rtt_ns ? n->p.base_rtt_ns : n->min_rtt_ns;
    uint64_t q = delay_ns > base ? delay_ns - base : 0;
    uint64_t target = n->p.target_qdelay_ns;
    if (q > target) {
        double f = n->p.md_beta * (double)(q - target) / (double)q;
        decrease(n, f < n->p.md_max ? f : n->p.md_max, now_ns);
    } else {
        if (!ecn_echo)
            n->cwnd += (uint64_t)(n->p.pi_gain * (double)acked_bytes * (double)(target - q) /
                                  (double)target);
        n->cwnd +=
            (uint64_t)((unsigned __int128)n->p.fi_bytes * acked_bytes / (n->cwnd ? n->cwnd : 1));
    }
    clamp_and_pace(cc);
}

static void nscc_on_cnp(struct sr_cc *cc, uint64_t now_ns)
{
    /* A CNP is an ECN echo without a delay sample. */
    nscc_on_ack(cc, 0, 0, true, now_ns);
}

static void nscc_on_timer(struct sr_cc *cc, uint64_t now_ns)
{
    (void)cc;
    (void)now_ns;
}

static uint64_t nscc_deadline(const struct sr_cc *cc)
{
    (void)cc;
    return SR_CC_NO_DEADLINE;
}

static uint64_t nscc_window(const struct sr_cc *cc)
{
    return cns(cc)->cwnd;
}

static uint64_t nscc_rate(const struct sr_cc *cc)
{
    return cc->pacer.rate_bps;
}

const struct sr_cc_ops sr_cc_nscc_ops = {
    .name = "nscc",
    .init = nscc_init,
    .fini = nscc_fini,
    .on_sent = nscc_on_sent,
    .on_ack = nscc_on_ack,
    .on_cnp = nscc_on_cnp,
    .on_timer = nscc_on_timer,
    .next_deadline = nscc_deadline,
    .window_bytes = nscc_window,
    .rate_bps = nscc_rate,
};

/* nscc.c: a delay- and ECN-driven window controller in the manner of the
 * Ultra Ethernet Transport's NSCC (UET 1.0 specification, congestion
 * management: NSCC; the UEC's htsim reference model, uec.cpp's NSCC
 * update), with Swift's multiplicative decrease (Kumar et al., SIGCOMM
 * 2020, Alg. 1). For softrdma-to-softrdma QPs, where every ACK brings an
 * RTT sample and the ECN echo of the data it acknowledges.
 *
 * The queueing delay is the RTT sample, less the responder's ACK hold
 * when the responder reported it (docs/WIRE.md), less the base RTT. The
 * two signals make four cases (NSCC's quadrants), per ACK:
 *   ECN, delay >= target:     the queue is in the fabric and above target:
 *                             multiplicative decrease, at most once per RTT,
 *                             cwnd *= max(1 - beta (delay - target) / delay,
 *                                         1 - md_max)
 *   ECN, delay < target:      a transient (a queue that is already small):
 *                             no change
 *   no ECN, delay >= target:  the delay is not a marked queue (the hosts'
 *                             scheduling, a held ACK, another path): the
 *                             fair increase only
 *   no ECN, delay < target:   proportional increase,
 *                             cwnd += gain acked (target - delay) / target,
 *                             plus the fair increase
 * Delay alone never cuts: on a software host it is mostly the hosts.
 * Until the first mark (ECN echo or CNP) the two unmarked cases are slow
 * start instead, cwnd += acked (RFC 5681 3.1; an ECN echo ends it as a
 * loss would, RFC 3168 6.1.2): with nothing marked a host's delay is no
 * reason to grow by a packet per round trip, and on a path without ECN
 * the window then reaches max_wnd within a few round trips. Fair
 * increase is additive, fi_bytes per window acknowledged, the same for
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
    n->slow_start = n->p.slow_start;
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
    /* Once per RTT (Swift Alg. 1's "can_decrease"): the ACKs of one window
     * all carry the same congestion, and a cut shows in the delay only a
     * round trip later. */
    if (n->decreased && now_ns - n->last_decrease_ns < n->srtt_ns)
        return;
    n->cwnd = (uint64_t)((double)n->cwnd * (1.0 - factor));
    n->decreased = true;
    n->last_decrease_ns = now_ns;
    n->md_cnt++;
}

/* The sample the delay is read from: the RTT less the responder's ACK
 * hold, which is the responder's time, not the path's. The hold counts
 * from the newest AckReq the ACK answers (RFC 9000 13.2.5's ack_delay),
 * which arrived no earlier than the timed request, so an honest report
 * never takes off more than the ACK waited. QUIC also keeps the adjusted
 * sample above its min_rtt (RFC 9000 5.3); here every ACK of a stream
 * may be held, so the smallest sample carries a hold too and that floor
 * would keep most of the correction out: the only floor is that a report
 * must be shorter than the sample. */
static uint64_t path_rtt(struct sr_cc_nscc *n, uint64_t rtt_ns, uint64_t hold_ns)
{
    if (!n->min_raw_rtt_ns || rtt_ns < n->min_raw_rtt_ns)
        n->min_raw_rtt_ns = rtt_ns;
    if (hold_ns && hold_ns < rtt_ns) {
        n->hold_sub_ns += hold_ns;
        return rtt_ns - hold_ns;
    }
    return rtt_ns;
}

static void nscc_on_ack(struct sr_cc *cc, uint64_t acked_bytes, uint64_t rtt_ns, bool ecn_echo,
                        uint64_t now_ns)
{
    struct sr_cc_nscc *n = ns(cc);
    if (rtt_ns) {
        /* srtt as RFC 6298 (gain 1/8) of the whole round trip, the hold
         * included: it spaces the cuts and sets the pacing rate, and the
         * window's ACKs take that long. */
        n->srtt_ns = n->srtt_ns ? n->srtt_ns - n->srtt_ns / 8 + rtt_ns / 8 : rtt_ns;
        uint64_t path = path_rtt(n, rtt_ns, cc->ack_hold_ns);
        if (!n->min_rtt_ns || path < n->min_rtt_ns)
            n->min_rtt_ns = path;
        uint64_t base = n->p.base_rtt_ns ? n->p.base_rtt_ns : n->min_rtt_ns;
        n->qdelay_ns = path > base ? path - base : 0;
        n->sampled = true;
    }
    if (ecn_echo)
        n->slow_start = false;
    if (!n->sampled) {
        if (ecn_echo)
            decrease(n, n->p.md_max, now_ns);
        clamp_and_pace(cc);
        return;
    }
    /* An ACK without a sample of its own reads the latest one. */
    uint64_t q = n->qdelay_ns;
    uint64_t target = n->p.target_qdelay_ns;
    bool fair = false;
    if (ecn_echo && q >= target) {
        double f = n->p.md_beta * (double)(q - target) / (double)(q ? q : 1);
        decrease(n, f < n->p.md_max ? f : n->p.md_max, now_ns);
    } else if (ecn_echo) {
        /* below target: no change */
    } else if (n->slow_start) {
        n->cwnd += acked_bytes;
    } else if (q >= target) {
        fair = true;
    } else {
        n->cwnd +=
            (uint64_t)(n->p.pi_gain * (double)acked_bytes * (double)(target - q) / (double)target);
        fair = true;
    }
    if (fair)
        n->cwnd +=
            (uint64_t)((unsigned __int128)n->p.fi_bytes * acked_bytes / (n->cwnd ? n->cwnd : 1));
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

uint64_t sr_cc_nscc_qdelay_ns(const struct sr_cc *cc)
{
    return cc->ops == &sr_cc_nscc_ops ? cns(cc)->qdelay_ns : 0;
}

uint64_t sr_cc_nscc_hold_sub_ns(const struct sr_cc *cc)
{
    return cc->ops == &sr_cc_nscc_ops ? cns(cc)->hold_sub_ns : 0;
}

uint64_t sr_cc_nscc_md_cnt(const struct sr_cc *cc)
{
    return cc->ops == &sr_cc_nscc_ops ? cns(cc)->md_cnt : 0;
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

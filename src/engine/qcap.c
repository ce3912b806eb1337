/* qcap.c: the requester's cap on the queue it builds (see qcap.h). */
#include "qcap.h"
#include "engine_int.h"
#include "sack.h"

bool sr_qcap_on(const struct sr_qp *qp)
{
    const struct sr_engine *e = qp->eng;
    if (!e->cfg.qdelay_ns || !e->cfg.sack || qp->type != SR_QPT_RC)
        return false;
    /* Before the first acknowledgement the peer is taken for a SACK peer
     * (the floor then holds the first flight); a standard one's first
     * ACK ends the cap. */
    return qp->comp.peer_sack || (qp->qcap.started && qp->comp.psn == qp->qcap.start_psn);
}

uint32_t sr_qcap_cap(uint64_t rate_pps, uint64_t min_rtt_ns, uint64_t qdelay_ns)
{
    unsigned __int128 p = (unsigned __int128)rate_pps * (min_rtt_ns + qdelay_ns) / 1000000000u;
    if (p < SR_QCAP_FLOOR)
        return SR_QCAP_FLOOR;
    return p > UINT32_MAX ? UINT32_MAX : (uint32_t)p;
}

static uint32_t sacked(const struct sr_qp *qp)
{
    return qp->comp.sb ? qp->comp.sb->cnt : 0;
}

/* The queueing delay allowed: the configured one, but at most a sixteenth
 * of the transport timer, so that a repair (two queue times and a round
 * trip) and two doubled probes still come before it. */
static uint64_t qdelay(const struct sr_qp *qp)
{
    uint64_t q = qp->eng->cfg.qdelay_ns;
    uint64_t t = sr_timeout_ns(qp->attr.timeout);
    if (t != SR_NO_DEADLINE && t / 16 < q)
        q = t / 16;
    return q;
}

void sr_qcap_update(struct sr_qp *qp, uint64_t now_ns)
{
    struct sr_qcap *q = &qp->qcap;
    if (q->started && !sr_qcap_on(qp)) {
        q->cap = 0;
        return;
    }
    uint32_t cnt = sacked(qp);
    if (!q->started) {
        /* Until a rate is measured, the floor: a window sent at once
         * into a slow path is the queue this cap is for (BBR starts from
         * a small window too, and doubles it per round trip; the rate
         * measured after the first interval does more). */
        q->started = true;
        q->t0 = now_ns;
        q->d0 = q->delivered;
        q->last_psn = q->start_psn = qp->comp.psn;
        q->cap = SR_QCAP_FLOOR;
        return;
    }
    /* delivered = cumulatively acknowledged + SACKed: a cumulative ACK
     * over SACKed PSNs moves the first up and the second down by them.
     * A scoreboard reset (after a timeout) lowers the sum, and the
     * cumulative ACK then counts those PSNs again: it never goes down,
     * and grows only past its highest. */
    int32_t adv = sr_psn_diff(qp->comp.psn, q->last_psn);
    if (adv > 0)
        q->cum += (uint64_t)adv;
    q->last_psn = qp->comp.psn;
    if (q->cum + cnt > q->delivered)
        q->delivered = q->cum + cnt;

    uint64_t min_rtt = qp->comp.rtt.min_ns;
    uint64_t span = 4 * min_rtt > SR_QCAP_INTERVAL_NS ? 4 * min_rtt : SR_QCAP_INTERVAL_NS;
    if (now_ns - q->t0 < span)
        return;
    uint64_t rate =
        (uint64_t)((unsigned __int128)(q->delivered - q->d0) * 1000000000u / (now_ns - q->t0));
    uint64_t max = 0;
    for (unsigned i = 0; i < SR_QCAP_SAMPLES; i++)
        max = q->rate[i] > max ? q->rate[i] : max;
    /* An interval in which the sender ran out of work says less about the
     * path than it can carry: kept only when it is the highest (BBR's
     * application-limited samples). */
    if (q->limited || rate > max) {
        q->rate[q->rate_at++ % SR_QCAP_SAMPLES] = rate;
        if (rate > max)
            max = rate;
        else {
            max = 0;
            for (unsigned i = 0; i < SR_QCAP_SAMPLES; i++)
                max = q->rate[i] > max ? q->rate[i] : max;
        }
    }
    q->t0 = now_ns;
    q->d0 = q->delivered;
    q->limited = false;
    if (max)
        q->cap = sr_qcap_cap(max, min_rtt, qdelay(qp));
}

uint32_t sr_qcap_pipe(const struct sr_qp *qp, uint32_t span)
{
    uint32_t s = sacked(qp);
    return span > s ? span - s : 0;
}

bool sr_qcap_blocks(struct sr_qp *qp, uint32_t span)
{
    struct sr_qcap *q = &qp->qcap;
    if (!q->cap || !sr_qcap_on(qp) || sr_qcap_pipe(qp, span) < q->cap)
        return false;
    q->limited = true;
    return true;
}

bool sr_qcap_fills(const struct sr_qp *qp, uint32_t span, uint32_t ack_every)
{
    uint32_t c = qp->qcap.cap;
    return c && c < ack_every && sr_qcap_pipe(qp, span) >= c && sr_qcap_on(qp);
}

/* rtt.c: round-trip estimator and probe timeout (see rtt.h). */
#include "rtt.h"

void sr_rtt_sample(struct sr_rtt *r, uint64_t rtt_ns)
{
    if (rtt_ns && (!r->min_ns || rtt_ns < r->min_ns))
        r->min_ns = rtt_ns;
    if (!r->valid) {
        /* RFC 6298 2.2: the first measurement */
        r->srtt_ns = rtt_ns;
        r->rttvar_ns = rtt_ns / 2;
        r->valid = true;
        return;
    }
    /* RFC 6298 2.3: RTTVAR first, with the old SRTT */
    uint64_t err = rtt_ns > r->srtt_ns ? rtt_ns - r->srtt_ns : r->srtt_ns - rtt_ns;
    r->rttvar_ns = r->rttvar_ns - r->rttvar_ns / 4 + err / 4;
    r->srtt_ns = r->srtt_ns - r->srtt_ns / 8 + rtt_ns / 8;
}

uint64_t sr_rtt_pto(const struct sr_rtt *r, unsigned backoff, uint64_t ack_hold_ns,
                    uint64_t timeout_ns)
{
    if (backoff > 20)
        return UINT64_MAX;
    if (!r->valid) {
        /* No round trip measured yet: an eighth of the transport timer,
         * so that two probes still come before it. */
        uint64_t pto = (timeout_ns / 8 + ack_hold_ns) << backoff;
        return pto < timeout_ns ? pto : UINT64_MAX;
    }
    /* RFC 8985 7.2: twice SRTT, not RFC 6298's SRTT + 4 * RTTVAR: a
     * spurious probe costs one packet, a late one a round of the transport
     * timer; and with a variance as large as SRTT (a busy host's), the
     * second probe would no longer fit before that timer. */
    uint64_t pto = 2 * r->srtt_ns;
    uint64_t floor = r->pto_floor_ns ? r->pto_floor_ns : SR_RTT_PTO_FLOOR_NS;
    if (pto < floor)
        pto = floor;
    pto += ack_hold_ns;
    /* RFC 8985 7.2 arms the RTO instead of a PTO that would come later;
     * but this RTO is the IBA transport timer, which costs retry_cnt and
     * resends the window: one probe still goes at half of it, so that a
     * round trip that grew with a queue (a slow peer's socket buffer)
     * does not leave every lost resend to the timer. */
    if (pto > timeout_ns / 2)
        pto = timeout_ns / 2;
    pto <<= backoff;
    return pto < timeout_ns ? pto : UINT64_MAX;
}

void sr_rtt_set_peer(struct sr_rtt *r, bool sack)
{
    if (!sack)
        r->pto_floor_ns = 0;
    else if (!r->pto_floor_ns)
        r->pto_floor_ns = SR_RTT_PTO_FLOOR_SACK_NS;
}

void sr_rtt_probe_spurious(struct sr_rtt *r)
{
    if (r->pto_floor_ns && r->pto_floor_ns < SR_RTT_PTO_FLOOR_NS)
        r->pto_floor_ns =
            2 * r->pto_floor_ns < SR_RTT_PTO_FLOOR_NS ? 2 * r->pto_floor_ns : SR_RTT_PTO_FLOOR_NS;
}

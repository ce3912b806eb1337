/* rtt.h: the requester's round-trip estimator and the timing of its
 * tail-loss probe, in one place. It owns
 *   - the smoothed round-trip time of one QP (struct sr_rtt): SRTT and
 *     RTTVAR as RFC 6298 2.2/2.3 computes them, from samples the
 *     completer takes on ACKs of packets sent once (Karn's rule);
 *   - the probe timeout derived from it (RFC 8985 7.2: PTO = 2 * SRTT,
 *     never below a floor, plus the
 *     longest a responder may hold the ACK back, RFC 8985's
 *     max_ack_delay).
 * The probe is the requester's own repair, not the IBA transport timer:
 * the local ACK timeout (4.096 us * 2^timeout) and retry_cnt
 * (IBA 9.7.6.1.3) run beside it unchanged. Pure functions of their
 * arguments, tested by hand (tests/unit/rtt_test.c). */
#ifndef SR_RTT_H
#define SR_RTT_H

#include <stdbool.h>
#include <stdint.h>

/* A probe never fires sooner than this after the last send or progress.
 * A sample of a few microseconds (the simulator's, shared memory's) is
 * real, but a host that is descheduled for tens of microseconds is
 * ordinary; a spurious probe costs one packet, which a SACK peer answers
 * with a D-SACK (docs/WIRE.md), not a go-back-N. */
#define SR_RTT_PTO_FLOOR_NS 50000ull

struct sr_rtt {
    uint64_t srtt_ns, rttvar_ns;
    bool valid; /* at least one sample */
};

/* Fold in one round-trip sample (RFC 6298 2.2, 2.3: alpha 1/8, beta 1/4). */
void sr_rtt_sample(struct sr_rtt *r, uint64_t rtt_ns);
/* The probe timeout after `backoff` probes without progress (doubled per
 * probe), for a peer that may hold an ACK up to ack_hold_ns beyond the
 * round trips measured (RFC 8985 7.2's max_ack_delay; without a sample,
 * an eighth of timeout_ns stands for the round trip); UINT64_MAX when it
 * would not come before timeout_ns, the transport timer, which then
 * repairs alone. */
uint64_t sr_rtt_pto(const struct sr_rtt *r, unsigned backoff, uint64_t ack_hold_ns,
                    uint64_t timeout_ns);

#endif

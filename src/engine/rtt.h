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

/* A probe never fires sooner than this after the last send or progress:
 * a sample of a few microseconds (the simulator's, shared memory's) is
 * real, but a host descheduled for longer is ordinary, and to a go-back-N
 * peer the second probe resends the flight (comp.c). */
#define SR_RTT_PTO_FLOOR_NS 200000ull
/* To a SACK peer a spurious probe costs one packet, and the peer says so
 * (D-SACK, docs/WIRE.md): the floor starts here and doubles, up to
 * SR_RTT_PTO_FLOOR_NS, for each probe a D-SACK proves spurious. */
#define SR_RTT_PTO_FLOOR_SACK_NS 50000ull

struct sr_rtt {
    uint64_t srtt_ns, rttvar_ns;
    bool valid;            /* at least one sample */
    uint64_t pto_floor_ns; /* the probe timeout's floor; 0: SR_RTT_PTO_FLOOR_NS */
    uint64_t min_ns;       /* the smallest sample (qcap.h); 0: none */
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
/* The peer takes SACKs (sack true) or not: the floor that applies. Called
 * for every probe timeout armed; a floor already raised by
 * sr_rtt_probe_spurious stays. */
void sr_rtt_set_peer(struct sr_rtt *r, bool sack);
/* A D-SACK showed the last probe needless: the floor doubles, up to
 * SR_RTT_PTO_FLOOR_NS. */
void sr_rtt_probe_spurious(struct sr_rtt *r);

#endif

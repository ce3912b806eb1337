/* qcap.h: the requester's cap on the queue it builds, between SACK peers.
 *
 * A fixed window of 2,048 packets (8 MiB at a 4 KiB MTU) is what a fast
 * path needs in flight, but whatever the path cannot carry at once waits
 * in a queue: a switch's, or the peer's socket buffer when the peer's CPU
 * is the slower end. With the whole window queued, each repair waits
 * behind it twice (the packets that reveal the hole, then the resend), a
 * probe timeout of 2 SRTT carries the queue, and a responder draining at
 * 1 Gb/s holds 67 ms, the transport timer of timeout 14: QPs whose peer
 * is alive time out. IRN (Mittal et al., SIGCOMM 2018, 3.2) caps the
 * packets in flight at the path's BDP for the same reason.
 *
 * Here the BDP is measured: the cap is
 *     max(SR_QCAP_FLOOR, delivery rate x (min RTT + qdelay))
 * packets, where the delivery rate is the highest of the recent ones (PSNs
 * acknowledged cumulatively or selectively per interval, BBR's max filter,
 * Cardwell et al., ACM Queue 2016) and qdelay the queueing delay allowed
 * (sr_engine_cfg.qdelay_ns, at most a sixteenth of the transport timer).
 * It limits the pipe (RFC 6675 2: packets sent and neither acknowledged
 * nor SACKed), not the span from the oldest unacknowledged PSN, which
 * stays within the window the responder's store holds: holes being
 * repaired do not stop new data.
 *
 * Only on a reliable QP to a SACK peer (docs/WIRE.md); a standard RoCEv2
 * peer sees today's window. Pure bookkeeping on the QP: no clock of its
 * own (the engine's now), unit-tested through sr_qcap_* alone. */
#ifndef SR_QCAP_H
#define SR_QCAP_H

#include <stdbool.h>
#include <stdint.h>

struct sr_qp;

/* The cap never closes below this many packets. */
enum { SR_QCAP_FLOOR = 64 };
/* Delivery-rate samples kept for the max filter, and the shortest
 * interval one covers (longer with a longer min RTT: 4 of them). 8 x 2 ms
 * outlasts a loaded host's scheduling stalls, which intervals of 500 us
 * read as a slower path; in srdma-sim both give the same goodput
 * (bench/sack_sim.sh). */
enum { SR_QCAP_SAMPLES = 8 };
#define SR_QCAP_INTERVAL_NS 2000000ull

struct sr_qcap {
    bool started;                   /* the QP has called sr_qcap_update */
    uint64_t t0;                    /* the running interval's start */
    uint64_t d0;                    /* delivered at t0 */
    uint64_t delivered;             /* PSNs delivered (cumulative + SACKed), monotonic */
    uint64_t cum;                   /* PSNs acknowledged cumulatively */
    uint32_t last_psn;              /* comp.psn when cum was last brought up to date */
    uint32_t start_psn;             /* comp.psn when the QP first sent */
    bool limited;                   /* the window or the cap stopped the sender this interval */
    uint64_t rate[SR_QCAP_SAMPLES]; /* packets per second */
    uint32_t rate_at;
    uint32_t cap; /* packets; 0: no cap (off) */
};

/* Whether the cap applies to this QP now. */
bool sr_qcap_on(const struct sr_qp *qp);
/* Brings the delivery count and the rate samples up to date (after
 * acknowledgements; sr_req_run calls it) and recomputes the cap. */
void sr_qcap_update(struct sr_qp *qp, uint64_t now_ns);
/* The pipe with span PSNs between comp.psn and the send pointer. */
uint32_t sr_qcap_pipe(const struct sr_qp *qp, uint32_t span);
/* True when the cap stops a new packet with span PSNs already out (and
 * records that the sender was limited). */
bool sr_qcap_blocks(struct sr_qp *qp, uint32_t span);
/* True when the packet that makes the pipe span PSNs fills the cap and the
 * ACK requests every ack_every packets (req.c shape_wqe) are too sparse to
 * fall inside it: that packet then asks for the ACK that reopens it. A cap
 * of at least ack_every always holds one (every message's last packet
 * asks too), and SACKs answer a pipe with holes. */
bool sr_qcap_fills(const struct sr_qp *qp, uint32_t span, uint32_t ack_every);

/* ---- pure parts, for the unit test ---- */
/* The cap for a rate in packets per second, a min RTT and a queueing
 * delay, in packets (at least SR_QCAP_FLOOR). */
uint32_t sr_qcap_cap(uint64_t rate_pps, uint64_t min_rtt_ns, uint64_t qdelay_ns);

#endif

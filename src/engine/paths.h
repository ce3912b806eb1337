/* paths.h: per-packet entropy policies (multipath), pure and with explicit
 * time.
 *
 * A RoCEv2 packet's UDP source port is its flow entropy (IBA Vol 1 Annex
 * A17.4.3.1): ECMP switches and Linux multipath routes hash it with the
 * addresses, so packets of one QP with different source ports may take
 * different paths. Nothing else on the wire changes; the destination port
 * stays 4791 and a receiver does not look at the source port.
 *
 * One struct sr_paths per QP holds N entropy values derived from the QP's
 * own port (value 0 is that port), their state, and a bounded record of
 * which value each recent PSN left on, so that feedback about a PSN (an
 * ACK, a loss, an ECN mark, a round trip) reaches the value that carried
 * it. Policies:
 *  - SINGLE: value 0 for every packet (standard RoCEv2: one port per QP).
 *  - SPRAY: oblivious round robin over the N values.
 *  - ADAPTIVE: recycle values that came back good, avoid those that came
 *    back marked, lost or slow, explore otherwise (after UET's REPS,
 *    "Recycled Entropy Packet Spraying", Bonato et al. 2024, and AWS SRD,
 *    Shalev et al., IEEE Micro 2020). The rule:
 *      1. a value whose avoidance has just ended is tried once (a probe;
 *         its ACK brings it back into the recycling);
 *      2. else a value that is not avoided and has not been used for 4 x N
 *         packets (recycling alone would keep only the values that
 *         happened to be in flight);
 *      3. else the oldest recycled value that is not avoided: every packet
 *         acknowledged without a bad mark since it was sent returns its
 *         value to a FIFO, so good paths carry what they just carried;
 *      4. else a seeded random value among those not avoided (explore);
 *         if every value is avoided, the one whose avoidance ends first.
 *    A mark avoids a value for 8 round trips (the QP's smallest RTT seen,
 *    100 us before any sample), a loss for 32, a slow round trip (more
 *    than twice the QP's smoothed RTT over all its values, plus 50 us)
 *    for 4. An ACK for a packet sent
 *    before the last bad mark does not bring the value back.
 * Every policy sends a retransmission on another value than the one the
 * lost copy used, when there is another (SRD resends on a different path).
 *
 * The congestion window or rate stays per QP across its paths (as UET's
 * NSCC does per connection): this module only chooses where each packet
 * goes; the feedback calls are the hooks congestion control also sees. */
#ifndef SR_PATHS_H
#define SR_PATHS_H

#include <stdbool.h>
#include <stdint.h>

enum sr_paths_policy {
    SR_PATHS_SINGLE = 0,
    SR_PATHS_SPRAY = 1,
    SR_PATHS_ADAPTIVE = 2,
};

enum {
    SR_PATHS_MAX = 16,  /* entropy values per QP */
    SR_PATHS_REC = 512, /* PSNs remembered (a power of two) */
    SR_PATHS_TOK = 256, /* recycled values kept (a power of two) */
};

/* Counters per value, for tests and tools. */
struct sr_path_stats {
    uint64_t sent, good, marked, lost, slow;
};

struct sr_path {
    uint16_t port;
    uint64_t avoid_until; /* 0: not avoided */
    uint64_t bad_at;      /* time of the last bad mark; 0: none */
    uint64_t srtt_ns;     /* smoothed round trip on this value (1/8 gain) */
    uint64_t last_seq;    /* sr_paths.seq when it was last chosen */
    struct sr_path_stats st;
};

struct sr_paths_rec {
    uint32_t psn;
    uint8_t path;
    bool valid;
    bool resent;
    uint64_t sent_ns;
};

struct sr_paths {
    uint8_t n;
    uint8_t policy;     /* enum sr_paths_policy */
    uint8_t rr;         /* SPRAY: the next value */
    uint8_t burst;      /* new packets per choice (1: every packet) */
    uint8_t burst_left; /* more new packets to send on cur */
    uint8_t cur;
    uint64_t rng;
    uint64_t seq;        /* choices made */
    uint64_t min_rtt_ns; /* 0: no sample yet */
    uint64_t srtt_ns;    /* smoothed round trip over every value (1/8 gain) */
    struct sr_path path[SR_PATHS_MAX];
    uint8_t tok[SR_PATHS_TOK];
    uint32_t tok_head, tok_cnt;
    struct sr_paths_rec rec[SR_PATHS_REC];
};

/* n values (clamped to 1..SR_PATHS_MAX; SINGLE forces 1) derived from
 * base_port, the QP's own port, which is value 0. seed makes the
 * ADAPTIVE policy's exploration reproducible. */
void sr_paths_init(struct sr_paths *p, enum sr_paths_policy policy, uint32_t n, uint16_t base_port,
                   uint64_t seed);
/* From now on, burst (1..255) consecutive new packets share one value
 * before the next choice: fewer, longer runs per path (a driver's
 * offload trains survive, a go-back-N receiver sees fewer reorderings);
 * retransmissions still choose each time. 0 or 1: every packet. */
void sr_paths_set_burst(struct sr_paths *p, uint32_t burst);
/* The UDP source port of value i (0xc000..0xffff, RFC 6335's dynamic
 * range; value 0 is base_port itself). */
uint16_t sr_paths_port(uint16_t base_port, uint32_t i);
/* The value for the packet with psn sent now; recorded. A PSN sent before
 * and not yet acknowledged is a retransmission and avoids the value its
 * last copy used. */
uint8_t sr_paths_choose(struct sr_paths *p, uint32_t psn, uint64_t now_ns);
/* Feedback. */
/* PSNs [from, to) were acknowledged (cumulatively: delivered); the ACK of
 * to - 1 also times its round trip if it was sent once (Karn). */
void sr_paths_acked(struct sr_paths *p, uint32_t from, uint32_t to, uint64_t now_ns);
/* psn was declared lost (a sequence NAK names it, or a timeout or probe
 * goes back to it). */
void sr_paths_lost(struct sr_paths *p, uint32_t psn, uint64_t now_ns);
/* psn came back ECN-marked (an ECN echo tied to a PSN, or a CNP
 * attributed to one). */
void sr_paths_marked(struct sr_paths *p, uint32_t psn, uint64_t now_ns);
/* A round trip of rtt_ns timed on value i. */
void sr_paths_rtt(struct sr_paths *p, uint8_t i, uint64_t rtt_ns, uint64_t now_ns);
/* Whether value i is avoided at now_ns. */
bool sr_paths_avoided(const struct sr_paths *p, uint8_t i, uint64_t now_ns);
/* The value psn was last sent on; -1 when it is not remembered. */
int sr_paths_of(const struct sr_paths *p, uint32_t psn);

/* ---- the engine's side (paths.c) ---- */
struct sr_qp;
struct sr_pkt;
/* Whether qp's peer takes packets out of order without a go-back-N
 * rewind, so that its requests may be sprayed: today only when the device
 * says to spray regardless (sr_engine_cfg.paths_reorder); with selective
 * acknowledgement, "the peer agreed to it". */
bool sr_qp_reorder_ok(const struct sr_qp *qp);
/* The UDP source port and path index of a packet qp sends now: requests
 * of a multipath QP spread, everything else keeps qp->src_port. */
uint16_t sr_paths_qp_tx(struct sr_qp *qp, const struct sr_pkt *pkt, uint8_t *path);
/* The completer's feedback: an ACK moved comp.psn on from old_psn; psn
 * was declared lost. */
void sr_paths_qp_acked(struct sr_qp *qp, uint32_t old_psn, uint64_t now_ns);
void sr_paths_qp_lost(struct sr_qp *qp, uint32_t psn, uint64_t now_ns);
/* A CNP for qp arrived: for congestion control's CNP handler to call. */
void sr_paths_qp_cnp(struct sr_qp *qp, uint64_t now_ns);
void sr_paths_qp_free(struct sr_qp *qp);
/* qp's multipath state; NULL while it uses one port. */
const struct sr_paths *sr_qp_paths(const struct sr_qp *qp);

#endif

/* sr_sim.h: the deterministic discrete-event network simulator, a driver
 * that only moves IP datagrams between nodes; it knows nothing about RDMA.
 * It owns simulated time, the pending-delivery heap, the nodes (an address
 * plus callbacks) and the point-to-point links between them (rate, delay,
 * tail-drop queue, ECN threshold, seeded faults).
 *
 * Determinism: there is no clock, no thread, no socket and no global. Time is
 * a uint64_t in nanoseconds that only sr_sim_run moves; every random choice
 * comes from xoshiro256** generators seeded (through splitmix64) from the
 * seed given to sr_sim_create. Each link has its own stream, derived from
 * (seed, from, to), so traffic on one link never changes the fate of packets
 * on another. The same seed and the same calls give exactly the same run.
 *
 * Ownership: sr_sim_send copies the packet; the caller keeps its buffer.
 * The buffer handed to rx() belongs to the simulator and is valid only during
 * the call. sr_sim_add_node copies the ops struct; ctx stays the caller's and
 * must outlive the simulator (or at least the last sr_sim_run).
 *
 * Re-entrancy: sr_sim_send, sr_sim_set_link, sr_sim_add_node, sr_sim_connect
 * and every getter may be called from inside rx/next_deadline/advance.
 * sr_sim_run may not (it returns SR_ERR_INVAL), and sr_sim_destroy must not
 * be called from a callback.
 */
#ifndef SR_SIM_H
#define SR_SIM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sr_err.h"

struct sr_sim;

/* A node's callbacks. rx may be NULL (packets are then consumed silently).
 * next_deadline and advance are both set or both NULL. */
struct sr_sim_node_ops {
    /* A packet arrives: a full IPv4 or IPv6 packet (IP header, UDP, payload);
     * the buffer is valid only during the call. */
    void (*rx)(void *ctx, const uint8_t *pkt, size_t len, uint64_t now_ns);
    /* Earliest time the node wants advance() called, UINT64_MAX for none. A
     * deadline already in the past counts as "now". advance() must move it
     * past now_ns, or the loop keeps calling advance() at the same time. */
    uint64_t (*next_deadline)(void *ctx);
    /* Time has reached now_ns: fire expired timers. */
    void (*advance)(void *ctx, uint64_t now_ns);
};

struct sr_sim_link_cfg {
    uint64_t rate_bps;                  /* serialization rate, at most 2^62; 0 = infinite */
    uint64_t delay_ns;                  /* propagation delay */
    uint64_t queue_bytes;               /* tail-drop limit of bytes waiting for serialization
                                           (the packet on the wire included); 0 = unlimited.
                                           An empty queue always takes one packet. */
    uint64_t ecn_bytes;                 /* mark ECN CE on ECT packets when the queue they join
                                           holds more than this many bytes; 0 = never */
    double loss, dup, reorder, corrupt; /* per-packet probabilities in [0, 1] */
    uint64_t reorder_ns;                /* extra delay of a reordered packet; 0 means
                                           3 * delay_ns + 1 us */
};

/* Per-direction counters. sent/bytes count what was offered to the link;
 * every offered packet ends as exactly one of queue_drops, lost, or a first
 * delivery, so once nothing is in flight:
 *     sent == queue_drops + lost + delivered - duplicated.
 * ecn_marked, corrupted, duplicated and reordered count packets that were not
 * lost. */
struct sr_sim_link_stats {
    uint64_t sent, delivered, bytes, queue_drops, lost, duplicated, reordered, corrupted,
        ecn_marked;
};

/* sr_sim_run's non-negative results. */
enum sr_sim_run_result {
    SR_SIM_STOPPED = 0, /* stop() returned true after a step */
    SR_SIM_UNTIL = 1,   /* until_ns reached; now == until_ns */
    SR_SIM_IDLE = 2,    /* nothing pending; time left where it was */
};

/* NULL when out of memory. */
struct sr_sim *sr_sim_create(uint64_t seed);
/* Frees every pending packet; never calls a callback. NULL is a no-op. */
void sr_sim_destroy(struct sr_sim *sim);

/* addr: 16-byte IPv6 address, IPv4 as IPv4-mapped (::ffff:a.b.c.d). Returns
 * the node id (>= 0, dense, in creation order) or SR_ERR_INVAL (NULL
 * argument, address already taken, unpaired deadline callbacks),
 * SR_ERR_RANGE (2^31 - 1 nodes) or SR_ERR_NOMEM. */
int sr_sim_add_node(struct sr_sim *sim, const uint8_t addr[16], const struct sr_sim_node_ops *ops,
                    void *ctx);
/* Two unidirectional links a->b and b->a with the same config. Returns 0,
 * SR_ERR_INVAL (bad id, a == b, already connected), SR_ERR_RANGE (a
 * probability outside [0, 1], rate above 2^62) or SR_ERR_NOMEM. */
int sr_sim_connect(struct sr_sim *sim, int a, int b, const struct sr_sim_link_cfg *cfg);
/* Change the config of the one direction from->to mid-run (e.g. loss = 1.0 to
 * cut it). Packets already accepted keep their fate and arrival time. Returns
 * 0, SR_ERR_INVAL (no such link) or SR_ERR_RANGE. */
int sr_sim_set_link(struct sr_sim *sim, int from, int to, const struct sr_sim_link_cfg *cfg);

/* Node `from` transmits a full IP packet: the sim copies it, routes it by the
 * destination address in the IP header to the link from->dst, and applies
 * queueing, serialization, delay and faults. A packet dropped by the queue
 * or lost still returns 0 (the counters say what happened). Returns 0,
 * SR_ERR_INVAL (bad node id, no node with that address, no link to it),
 * SR_ERR_WIRE_L3 (not IPv4/IPv6, or length fields disagree with len) or
 * SR_ERR_NOMEM. */
int sr_sim_send(struct sr_sim *sim, int from, const uint8_t *pkt, size_t len);

/* Run the event loop: repeatedly jump to the earliest of (next packet
 * delivery, any node's next_deadline) and deliver or advance, one event per
 * step. At equal times deliveries go first, in (time, sequence) order, then
 * node advances in node-id order. Ends when the next event lies after
 * until_ns (now becomes until_ns; SR_SIM_UNTIL), when stop(arg) returns true
 * after a step (SR_SIM_STOPPED; stop may be NULL), or when nothing at all is
 * pending (SR_SIM_IDLE, time unchanged). SR_ERR_INVAL when called from a
 * callback. */
int sr_sim_run(struct sr_sim *sim, uint64_t until_ns, bool (*stop)(void *arg), void *arg);

uint64_t sr_sim_now(const struct sr_sim *sim);
/* 0, or SR_ERR_INVAL when there is no link from->to. */
int sr_sim_link_stats(const struct sr_sim *sim, int from, int to, struct sr_sim_link_stats *out);
/* Node id owning addr, or SR_ERR_INVAL. */
int sr_sim_find_node(const struct sr_sim *sim, const uint8_t addr[16]);
size_t sr_sim_node_cnt(const struct sr_sim *sim);
/* Packet copies scheduled but not yet delivered. */
size_t sr_sim_pending(const struct sr_sim *sim);
/* A stream of the simulator's own seeded generator, separate from the links'
 * streams, for scenarios that need random workloads without a global. */
uint64_t sr_sim_rand(struct sr_sim *sim);

/* The IPv4-mapped form (::ffff:a.b.c.d) of a 4-byte address. */
static inline void sr_sim_addr_v4(uint8_t addr[16], const uint8_t v4[4])
{
    for (int i = 0; i < 10; i++)
        addr[i] = 0;
    addr[10] = addr[11] = 0xff;
    for (int i = 0; i < 4; i++)
        addr[12 + i] = v4[i];
}

#endif

/* sr_fabric.h: a multi-tier datacenter fabric in simulated time, with one
 * real softrdma engine per host. It owns the topology (two-tier leaf-spine
 * or three-tier k-ary fat-tree), the switches (ECMP on the 5-tuple, RED-like
 * ECN marking between Kmin and Kmax, drop-tail, optional packet trimming),
 * link failure and recovery with a routing detection delay, the hosts' RC
 * QPs, the workload (flows of RDMA WRITEs) and the metrics.
 *
 * It is separate from sr_sim (which connects nodes point to point by
 * address) because a fabric needs per-hop forwarding and must scale to
 * thousands of engines: the loop keeps host deadlines in an indexed heap
 * instead of scanning every node per step.
 *
 * Determinism: no clock, thread, socket or global. Every random choice (ECN
 * draws, ECMP salts, workload permutations) comes from streams seeded from
 * cfg.seed; the same configuration, flows and schedule give the same run
 * bit for bit (sr_fabric_digest summarises it).
 *
 * Payload modes:
 *  - SR_FABRIC_VERIFIED: packets carry their payload and ICRC, each host
 *    has its own source and destination memory, and every destination byte
 *    is compared with the source pattern when its flow completes.
 *  - SR_FABRIC_HEADER_ONLY: packets carry only their headers (the wire
 *    length is kept for timing and queues); all hosts' source MRs share one
 *    buffer and all destination MRs another, so memory does not grow with
 *    hosts times message size and the simulator copies no payload.
 */
#ifndef SR_FABRIC_H
#define SR_FABRIC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sr_err.h"

struct sr_fabric;

enum sr_fabric_topo {
    SR_FABRIC_LEAF_SPINE = 0,
    SR_FABRIC_FAT_TREE = 1,
};

enum sr_fabric_mode {
    SR_FABRIC_VERIFIED = 0,
    SR_FABRIC_HEADER_ONLY = 1,
};

enum sr_fabric_node_kind {
    SR_FABRIC_HOST = 0,
    SR_FABRIC_LEAF, /* leaf-spine leaf, or fat-tree edge */
    SR_FABRIC_SPINE,
    SR_FABRIC_AGG,
    SR_FABRIC_CORE,
};

struct sr_fabric_link_cfg {
    uint64_t rate_bps;     /* > 0 */
    uint64_t delay_ns;     /* propagation */
    uint64_t buffer_bytes; /* tail-drop limit of a switch port; 0 = unlimited. A
                              host's own uplink queue is never limited. */
};

struct sr_fabric_cfg {
    enum sr_fabric_topo topo;
    /* leaf-spine: leaves x hosts_per_leaf hosts, every leaf to every spine */
    uint32_t leaves, spines, hosts_per_leaf;
    /* fat-tree: k even, k^3/4 hosts, k pods of k/2 edge + k/2 agg, (k/2)^2 cores */
    uint32_t k;
    struct sr_fabric_link_cfg host_link;   /* host <-> leaf/edge */
    struct sr_fabric_link_cfg fabric_link; /* switch <-> switch */
    /* ECN (DCQCN's RED profile): queue <= kmin never marks, queue >= kmax
     * always marks, in between with probability rising linearly to pmax.
     * kmax == 0 disables marking. */
    uint64_t kmin_bytes, kmax_bytes;
    double pmax;
    /* Trimming: a packet the buffer cannot take leaves as its headers only
     * (payload cut) when the headers fit in trim_headroom bytes beyond the
     * buffer; the receiving host counts and discards it. */
    bool trim;
    uint64_t trim_headroom; /* 0 = 64 KiB */
    uint64_t detect_ns;     /* failure / recovery seen by routing after this long */
    uint64_t seed;
    enum sr_fabric_mode mode;
    uint32_t mtu;         /* path MTU, 256..4096; 0 = 4096 */
    uint32_t window_pkts; /* engine's unacknowledged-packet window; 0 = 64 */
    uint8_t timeout;      /* RC local ACK timeout code; 0 = 8 (about 1 ms) */
};

/* Run result. */
enum sr_fabric_run_result {
    SR_FABRIC_DONE = 0,  /* every flow completed */
    SR_FABRIC_UNTIL = 1, /* until_ns reached */
    SR_FABRIC_IDLE = 2,  /* nothing pending but some flow did not complete */
};

struct sr_fabric_link_stats {
    int from, to;         /* node ids */
    uint64_t rate_bps;    /* for utilisation */
    uint64_t tx_pkts;     /* accepted onto the link's queue */
    uint64_t tx_bytes;    /* wire bytes accepted (trimmed packets: headers only) */
    uint64_t arrived;     /* reached the far end */
    uint64_t drops;       /* buffer full (not trimmed) */
    uint64_t down_drops;  /* offered while the link was down */
    uint64_t wire_drops;  /* on the wire or queued when the link failed */
    uint64_t trimmed;     /* payload cut */
    uint64_t ecn_marked;  /* CE set here */
    uint64_t max_q_bytes; /* highest queue seen */
    uint64_t q_pkts;      /* still being serialized now */
};

/* Per switch: in == out + dropped + queued at all times, where out counts
 * packets fully serialized onto an out-link. */
struct sr_fabric_switch_stats {
    uint64_t in, out, dropped, queued;
    uint64_t noroute; /* part of dropped: no live next hop */
};

struct sr_fabric_flow_info {
    uint32_t src, dst;
    uint64_t bytes;
    uint64_t start_ns, end_ns; /* end_ns = UINT64_MAX while incomplete */
    bool done, ok;             /* ok: completed successfully (and verified) */
};

struct sr_fabric_summary {
    uint32_t flows, done, failed, verified_bad;
    uint64_t fct_p50_ns, fct_p99_ns, fct_max_ns;
    uint64_t end_ns; /* last completion */
    uint64_t events; /* packet-hop arrivals processed */
    uint64_t host_tx, host_rx, trimmed_rx, drops, ecn_marked, retransmits, timeouts;
    uint64_t max_q_bytes;
    double max_util, mean_util; /* over switch-to-switch links, to end_ns */
};

/* NULL with *err set (SR_ERR_INVAL for a bad configuration, SR_ERR_NOMEM). */
struct sr_fabric *sr_fabric_create(const struct sr_fabric_cfg *cfg, int *err);
void sr_fabric_destroy(struct sr_fabric *f);

uint32_t sr_fabric_host_cnt(const struct sr_fabric *f);
uint32_t sr_fabric_node_cnt(const struct sr_fabric *f); /* hosts first, then switches */
uint32_t sr_fabric_link_cnt(const struct sr_fabric *f); /* unidirectional */
enum sr_fabric_node_kind sr_fabric_node_kind(const struct sr_fabric *f, int node);
/* "h12", "leaf3", "spine0", "edge1.2" (pod.index), "agg0.1", "core5". */
void sr_fabric_node_name(const struct sr_fabric *f, int node, char *buf, size_t cap);
int sr_fabric_find_node(const struct sr_fabric *f, const char *name);
/* Link id from->to, or SR_ERR_INVAL when they are not neighbours. */
int sr_fabric_find_link(const struct sr_fabric *f, int from, int to);

/* A flow: one RC QP pair; src writes bytes (>= 1) into dst starting at
 * start_ns. Flows must be added before the first sr_fabric_run, in
 * non-decreasing start_ns. Returns the flow id or a negative error. */
int sr_fabric_add_flow(struct sr_fabric *f, uint32_t src, uint32_t dst, uint64_t bytes,
                       uint64_t start_ns);
/* Workloads from the fabric's seeded stream; all start at start_ns. */
int sr_fabric_permutation(struct sr_fabric *f, uint64_t bytes, uint64_t start_ns);
/* senders hosts (the first ones not equal to dst, in a seeded order) to dst. */
int sr_fabric_incast(struct sr_fabric *f, uint32_t dst, uint32_t senders, uint64_t bytes,
                     uint64_t start_ns);
int sr_fabric_all_to_all(struct sr_fabric *f, uint64_t bytes, uint64_t start_ns);

/* Cut (up = false) or restore the cable a<->b, both directions, at at_ns;
 * routing learns of it detect_ns later. Returns 0 or SR_ERR_INVAL. */
int sr_fabric_schedule_link(struct sr_fabric *f, int a, int b, uint64_t at_ns, bool up);

/* Run until every flow completes, until_ns passes, or nothing is pending.
 * Returns an sr_fabric_run_result or a negative error (QP setup). */
int sr_fabric_run(struct sr_fabric *f, uint64_t until_ns);
uint64_t sr_fabric_now(const struct sr_fabric *f);
/* Packets on a link (queued or propagating): every packet a host sent has
 * arrived at a host, been dropped somewhere, or is one of these. */
size_t sr_fabric_pending(const struct sr_fabric *f);

/* Getters bring the queues up to now first, hence not const. */
int sr_fabric_link_stats(struct sr_fabric *f, int link, struct sr_fabric_link_stats *out);
int sr_fabric_switch_stats(struct sr_fabric *f, int node, struct sr_fabric_switch_stats *out);
int sr_fabric_flow_info(const struct sr_fabric *f, int flow, struct sr_fabric_flow_info *out);
uint32_t sr_fabric_flow_cnt(const struct sr_fabric *f);
void sr_fabric_summary(struct sr_fabric *f, struct sr_fabric_summary *out);
/* A hash over every counter, flow time and the clock: equal across two
 * runs exactly when they behaved identically (up to hash collisions). */
uint64_t sr_fabric_digest(struct sr_fabric *f);

#endif

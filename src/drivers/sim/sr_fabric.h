/* sr_fabric.h: a multi-tier datacenter fabric in simulated time, with one
 * real softrdma engine per host. It owns the topology (two-tier leaf-spine
 * or three-tier k-ary fat-tree), the switches (ECMP on the 5-tuple, RED-like
 * ECN marking between Kmin and Kmax, drop-tail, optional packet trimming),
 * link failure and recovery with a routing detection delay, random loss,
 * the hosts' RC QPs, the workload (flows of RDMA WRITEs, and collectives
 * as steps of WRITEs with immediate that start on arrivals), a link tap
 * and the metrics.
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
#include <stdio.h>

#include "sr_err.h"

struct sr_fabric;
struct sr_engine_cfg;

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
    /* Random loss: every packet arriving over any link is lost with this
     * probability (0 = none), from a stream seeded by seed. */
    double loss;
    /* Delivered-throughput series: payload bytes the receiving engines
     * accepted, summed per interval of this length (0 = off); see
     * sr_fabric_series. */
    uint64_t sample_ns;
    /* With sample_ns: per host, the wire bytes it sent (first copies and
     * retransmissions, data and control) and the payload bytes receivers
     * accepted from it, per interval (sr_fabric_host_series). */
    bool host_series;
    /* Called for each host's engine configuration just before the engine
     * is created (after the simulator filled it in), so that a caller can
     * select engine options per host (path policy, congestion control).
     * It must leave gid, ops and ops_ctx alone: they connect the engine
     * to the fabric. */
    void (*engine_cfg)(void *ctx, uint32_t host, struct sr_engine_cfg *ec);
    void *engine_cfg_ctx;
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
    uint64_t loss_drops;  /* random loss (cfg.loss), at arrival */
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
    /* Collective steps: when the receiver's WRITE-with-immediate
     * completion arrived (UINT64_MAX before; plain flows: UINT64_MAX). */
    uint64_t arrive_ns;
    int after;     /* the flow whose arrival started this one, or -1 */
    uint32_t coll; /* collective id + 1, 0 for a plain flow */
    bool done, ok; /* ok: completed successfully (and verified) */
};

struct sr_fabric_coll_info {
    uint32_t flows, arrived;   /* WRITEs, and those whose data has arrived */
    uint64_t start_ns, end_ns; /* end: the last arrival; UINT64_MAX while incomplete */
};

struct sr_fabric_summary {
    uint32_t flows, done, failed, verified_bad;
    uint64_t fct_p50_ns, fct_p99_ns, fct_max_ns;
    uint64_t end_ns; /* last completion */
    uint64_t events; /* packet-hop arrivals processed */
    uint64_t host_tx, host_rx, trimmed_rx, drops, ecn_marked, retransmits, timeouts;
    uint64_t loss_drops; /* part of drops: random loss */
    uint64_t probes;     /* engines' tail-loss probes */
    uint64_t max_q_bytes;
    double max_util, mean_util; /* over switch-to-switch links, to end_ns */
    uint32_t colls, colls_done;
    uint64_t coll_max_ns; /* longest collective completion time (end - start) */
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
 * start_ns. Flows must be added before the first sr_fabric_run, those that
 * start by the clock (all but dependent steps) in non-decreasing start_ns.
 * Returns the flow id or a negative error. */
int sr_fabric_add_flow(struct sr_fabric *f, uint32_t src, uint32_t dst, uint64_t bytes,
                       uint64_t start_ns);
/* Workloads from the fabric's seeded stream; all start at start_ns. */
int sr_fabric_permutation(struct sr_fabric *f, uint64_t bytes, uint64_t start_ns);
/* senders hosts (the first ones not equal to dst, in a seeded order) to dst. */
int sr_fabric_incast(struct sr_fabric *f, uint32_t dst, uint32_t senders, uint64_t bytes,
                     uint64_t start_ns);
/* The same senders, the i-th starting at start_ns + i x step_ns (senders
 * joining one by one, as in the DCQCN paper's fairness experiments). */
int sr_fabric_incast_step(struct sr_fabric *f, uint32_t dst, uint32_t senders, uint64_t bytes,
                          uint64_t start_ns, uint64_t step_ns);
int sr_fabric_all_to_all(struct sr_fabric *f, uint64_t bytes, uint64_t start_ns);

/* Collectives as dependent steps. A step is a flow posted as an RDMA
 * WRITE with immediate; it starts when the flow `after` (whose destination
 * must be this step's source) has arrived, that is when its receive
 * completion reaches the receiver's CQ, or at start_ns when after < 0. All
 * steps of one collective between the same two hosts share one QP pair.
 * sr_fabric_coll_new returns a collective id for sr_fabric_add_step. */
int sr_fabric_coll_new(struct sr_fabric *f);
int sr_fabric_add_step(struct sr_fabric *f, int coll, uint32_t src, uint32_t dst, uint64_t bytes,
                       int after, uint64_t start_ns);
int sr_fabric_coll_info(const struct sr_fabric *f, int coll, struct sr_fabric_coll_info *out);
uint32_t sr_fabric_coll_cnt(const struct sr_fabric *f);

/* All-reduce of bytes per host across every host, as its WRITEs (the
 * reduction itself costs no time). Ring: 2 (n - 1) steps of bytes / n
 * to the next host (reduce-scatter, then all-gather), as NCCL's ring does.
 * Halving-doubling (hosts a power of two): log2 n steps of recursive
 * halving (partner at distance n/2, n/4, .. 1; bytes/2, bytes/4, ..) and
 * log2 n of recursive doubling back (Thakur, Rabenseifner and Gropp,
 * "Optimization of collective communication operations in MPICH", IJHPCA
 * 2005, the all-reduce section). Returns the collective id or a negative error. */
int sr_fabric_ring_allreduce(struct sr_fabric *f, uint64_t bytes, uint64_t start_ns);
int sr_fabric_hd_allreduce(struct sr_fabric *f, uint64_t bytes, uint64_t start_ns);
/* Background load: a permutation (one seeded cycle) among round(frac *
 * hosts) hosts chosen by the seeded stream, frac in (0, 1]. */
int sr_fabric_background(struct sr_fabric *f, double frac, uint64_t bytes, uint64_t start_ns);

/* Before the first run: link's propagation delay becomes delay_ns, and
 * with hold_ns > 0 every arrival over it waits further for the next
 * multiple of hold_ns of simulated time, as packets from a host wait for
 * that host's next wake-up: a deterministic model of a loaded software
 * host's feedback delay (its ACKs and CNPs released in batches up to
 * hold_ns late). A hold is allowed only on a link from a host (its uplink,
 * whose queue never drops or marks). Returns 0 or SR_ERR_INVAL. */
int sr_fabric_set_link_delay(struct sr_fabric *f, int link, uint64_t delay_ns, uint64_t hold_ns);

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
/* What a progress line needs, without the summary's sorting: flows done,
 * collectives done and packet-hop events so far. */
void sr_fabric_progress(const struct sr_fabric *f, uint32_t *flows_done, uint32_t *colls_done,
                        uint64_t *events);
/* The delivered-throughput series (cfg.sample_ns): *cnt intervals, entry i
 * the payload bytes accepted by receiving engines in [i, i+1) x sample_ns.
 * NULL when sampling is off. */
const uint64_t *sr_fabric_series(const struct sr_fabric *f, uint32_t *cnt);
/* cfg.host_series: host's wire bytes sent (delivered = false) or payload
 * bytes accepted from it by receiving engines (true) per interval; NULL
 * when off or for a bad host. */
const uint64_t *sr_fabric_host_series(const struct sr_fabric *f, uint32_t host, bool delivered,
                                      uint32_t *cnt);

/* The queue of one link sampled every cfg.sample_ns: entry k holds the
 * queue (bytes accepted and not yet serialized, as the drop-tail and ECN
 * decisions see it) at k x sample_ns exactly, and the largest queue, the
 * buffer drops and the ECN marks in [k, k + 1) x sample_ns. */
struct sr_fabric_qsample {
    uint64_t q_bytes, max_q_bytes;
    uint32_t drops, marks;
};
/* Watch link (one per fabric; before the first run; needs sample_ns).
 * Returns 0 or SR_ERR_INVAL. */
int sr_fabric_watch_link(struct sr_fabric *f, int link);
/* The samples up to now (brought up to date first, hence not const);
 * NULL when no link is watched. */
const struct sr_fabric_qsample *sr_fabric_queue_series(struct sr_fabric *f, uint32_t *cnt);

/* A tap on one link: fn sees every packet the link accepts (after ECN
 * marking and trimming), at the time its first bit goes on the wire.
 * data holds stored bytes (IPv4 onward; in header-only mode the headers
 * only), len is its length on the wire. One tap per fabric; link < 0
 * removes it. */
typedef void (*sr_fabric_tap_fn)(void *ctx, uint64_t ts_ns, const uint8_t *data, uint32_t stored,
                                 uint32_t len);
int sr_fabric_set_tap(struct sr_fabric *f, int link, sr_fabric_tap_fn fn, void *ctx);

/* fabric_pcap.c: a tap writing the link's packets to out as a pcap file of
 * Ethernet frames with nanosecond timestamps (simulated time). In
 * header-only mode the payload is written as zeros (with a matching ICRC). pc must
 * outlive the run; err is set when a write failed. Returns 0, SR_ERR_INVAL
 * or SR_ERR_NOSPACE (the file header could not be written). */
struct sr_fabric_pcap {
    FILE *out;
    uint8_t src_mac[6], dst_mac[6];
    uint64_t pkts;
    bool err;
    uint8_t buf[8192]; /* a header-only packet made whole */
};
int sr_fabric_pcap_start(struct sr_fabric *f, int link, FILE *out, struct sr_fabric_pcap *pc);

/* A hash over every counter, flow time and the clock: equal across two
 * runs exactly when they behaved identically (up to hash collisions). */
uint64_t sr_fabric_digest(struct sr_fabric *f);

#endif

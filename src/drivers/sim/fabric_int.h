/* fabric_int.h: what fabric.c shares with the other fabric files: the
 * simulator's structures (for fabric_metrics.c), the seeded stream and the
 * hash (for fabric_workload.c). Not installed; sr_fabric.h is the
 * interface. */
#ifndef SR_FABRIC_INT_H
#define SR_FABRIC_INT_H

#include "sr_fabric.h"
#include "sr_wire.h"

#define FAB_L3_LEN  (SR_IPV4_HDR_LEN + SR_UDP_HDR_LEN)
#define FAB_PKT_MAX (FAB_L3_LEN + SR_MAX_HDR_LEN + SR_MAX_PMTU + 8)

/* ---- structures ---- */

struct fab_link {
    int from, to;
    struct sr_fabric_link_cfg cfg;
    bool up;        /* physical: carries packets */
    bool route_up;  /* what routing believes, detect_ns behind up */
    uint32_t epoch; /* bumped on each failure: packets sent before it die */
    uint64_t busy_until_ns, busy_rem;
    /* sr_fabric_set_link_delay: arrivals wait for the next multiple of
     * this (0: none), as packets wait for a late host's next wake-up. */
    uint64_t hold_ns;
    /* Accepted and not yet arrived, in order: a ring of power-of-two
     * capacity indexed by mask. Its last q_cnt entries are still being
     * serialized (what the queue length counts, q_bytes): one ring serves
     * both, so a hop touches one array. */
    struct fab_ev *fly;
    uint32_t fly_head, fly_cnt, fly_cap;
    uint32_t q_cnt;
    uint64_t q_bytes;
    /* The counters every packet updates follow the fields above, so a hop
     * touches the link's first three cache lines; the ECN stream, used
     * only above kmin, comes last. */
    struct sr_fabric_link_stats st;
    uint64_t rng[4];
    struct fab_watch *watch; /* sampled queue (fabric_watch.c); NULL: not watched */
};

/* The sampled queue of the watched link: entry k is the queue at k x
 * step_ns and what happened in [k, k + 1) x step_ns. */
struct fab_watch {
    struct sr_fabric_qsample *s;
    size_t cnt, cap;
    uint64_t next_ns; /* the next boundary to record */
    uint64_t step_ns;
};

/* Bytes per sample interval, grown as time passes. */
struct fab_series {
    uint64_t *v;
    size_t cnt, cap;
};

/* A packet in the fabric: one allocation from the sending host to its
 * fate, moved from hop to hop. data holds stored bytes (the whole packet,
 * or in header-only mode its headers); len is the length on the wire. */
struct fab_pkt {
    uint32_t len, stored, hdr_len; /* hdr_len: IP + UDP + transport headers */
    uint32_t link;                 /* link it is crossing */
    uint32_t epoch;
    uint32_t dst;       /* destination host */
    uint64_t flow_hash; /* of the 5-tuple, salted per switch */
    bool trimmed;
    bool pooled; /* from the fabric's pool of small packets */
    uint8_t data[];
};

/* Header-only packets fit in one small block; blocks are recycled last in,
 * first out, so a new packet reuses memory that is still in cache instead
 * of going through malloc. */
#define FAB_SMALL_PKT 192
#define FAB_POOL_MAX  (1u << 16) /* blocks kept; the rest are freed */

struct fab_ev {
    uint64_t at_ns, seq;
    struct fab_pkt *pkt;
    uint32_t len; /* on the wire; serialized by at_ns - the link's delay */
};

struct fab_host {
    struct sr_fabric *f;
    uint32_t id;
    struct sr_engine *eng;
    struct sr_pd *pd;
    struct sr_cq *cq;
    struct sr_mr *src_mr, *dst_mr;
    uint8_t *src_buf, *dst_buf; /* verified mode: owned; else the shared ones */
    uint64_t dst_len;
    uint32_t hpos;                        /* position in the deadline heap */
    uint64_t key;                         /* deadline there */
    uint32_t flows_out, flows_in, imm_in; /* imm_in: steps it receives */
    uint32_t cqe;                         /* its CQ's size */
    uint64_t tx, rx, rx_trimmed, rx_bad;
    struct fab_series sent, got; /* cfg.host_series: wire bytes sent, payload delivered */
};

struct fab_flow {
    uint32_t src, dst;
    uint64_t bytes, start_ns, end_ns, dst_off, arrive_ns;
    uint32_t conn;      /* its QP pair */
    uint32_t coll;      /* collective id + 1; 0: a plain WRITE */
    int32_t after;      /* started by this flow's arrival; -1: at start_ns */
    int32_t succ;       /* first flow this one's arrival starts, -1: none */
    int32_t sib;        /* next flow started by the same arrival */
    int32_t qnext;      /* next step waiting on the same connection */
    bool done, ok, bad; /* bad: completed but the bytes differ */
};

/* One RC QP pair: a plain flow has its own; the steps of a collective
 * between the same two hosts share one, as a collective library keeps
 * one connection per peer. */
struct fab_conn {
    uint32_t src, dst, coll;
    uint32_t sends, recvs; /* WRITEs over it; of them with immediate */
    uint32_t sq_depth, outstanding, recv_posted;
    int32_t wait_head, wait_tail; /* steps waiting for room in the send queue */
    struct sr_qp *qp[2];
};

struct fab_coll {
    uint32_t flows, arrived;
    uint64_t start_ns, end_ns;
};

enum fab_ctl_kind { FAB_CTL_PHYS, FAB_CTL_ROUTE };

struct fab_ctl {
    uint64_t at_ns, seq;
    int a, b;
    uint8_t kind;
    bool up;
};

struct fab_node {
    enum sr_fabric_node_kind kind;
    uint32_t port_cnt;
    uint32_t *ports; /* out-link ids, in topology order (see the builders) */
    uint64_t salt;   /* ECMP hash salt, so tiers do not polarise */
    uint64_t in, dropped, noroute;
};

/* A heap entry carries its link's head key, so comparisons touch only the
 * heap array. */
struct fab_lkey {
    uint64_t at_ns, seq;
    struct fab_pkt *pkt; /* the head itself, to prefetch it early */
    uint32_t link;
};

struct sr_fabric {
    struct sr_fabric_cfg cfg;
    uint64_t now_ns, seq;
    uint64_t rng[4];
    bool started;
    uint32_t host_cnt, node_cnt, link_cnt;
    uint32_t half;        /* fat-tree k/2 */
    uint32_t routes_down; /* links routing believes down */
    struct fab_node *nodes;
    struct fab_link *links;
    struct fab_host *hosts;

    struct fab_lkey *heap; /* links with packets in flight, by their oldest */
    uint32_t heap_cnt;
    size_t pending;
    uint32_t *hheap; /* host ids by deadline */
    uint32_t hheap_cnt;

    struct fab_ctl *ctl;
    size_t ctl_cnt, ctl_cap, ctl_next;

    struct fab_flow *flows;
    uint32_t flow_cnt, flow_cap, flow_next, flows_done;
    uint64_t last_start; /* of the last flow that starts by the clock */
    struct fab_conn *conns;
    uint32_t conn_cnt;
    struct fab_coll *colls;
    size_t coll_cnt, coll_cap;

    uint64_t loss_rng[4];
    uint64_t *series; /* delivered payload bytes per sample_ns */
    struct fab_watch watch;
    size_t series_cnt, series_cap;
    int tap_link;
    sr_fabric_tap_fn tap_fn;
    void *tap_ctx;

    uint8_t *shared_src, *shared_dst;
    uint64_t max_bytes;
    uint64_t events;
    void *pool; /* free small blocks, linked through their first word */
    uint32_t pool_cnt;
    /* Header-only receive scratch: headers in front of a payload nobody
     * reads. Separate from anything tx touches, since the engine transmits
     * while it still reads the packet. */
    uint8_t rx_buf[FAB_PKT_MAX];
};

/* Brings link l's queue (q_cnt, q_bytes) up to now_ns (a watched link
 * records the boundaries it passes first). */
void fab_q_drain(struct fab_link *l, uint64_t now_ns);
/* fab_q_drain without the watch. */
void fab_q_drain_raw(struct fab_link *l, uint64_t now_ns);

/* fabric_watch.c: the watched link's samples, and the hosts' series. */
void fab_watch_catch_up(struct fab_link *l, uint64_t now_ns);
void fab_watch_enq(struct fab_link *l, bool marked);
void fab_watch_drop(struct fab_link *l);
void fab_series_add(struct sr_fabric *f, struct fab_series *s, uint64_t bytes);
void fab_watch_free(struct sr_fabric *f);

/* splitmix64's finaliser (Steele, Lea and Flood, "Fast splittable
 * pseudorandom number generators", OOPSLA 2014). */
static inline uint64_t fab_mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Uniform in [0, n) from a 64-bit draw (Lemire's multiply-shift). */
static inline uint32_t fab_below(uint64_t r, uint32_t n)
{
    return (uint32_t)(((r >> 32) * n) >> 32);
}

/* The next draw from the fabric's workload stream (seeded from cfg.seed). */
uint64_t fab_rand(struct sr_fabric *f);

#endif

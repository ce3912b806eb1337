/* sr_engine.h: the IBTA transport engine, sans-IO.
 *
 * One struct sr_engine is one soft RDMA device: its PDs, MRs, CQs, SRQs and
 * QPs (RC, UC, UD). Its whole surface is: post work (sr_qp_post_send/recv),
 * packet in (sr_engine_rx), packets out (the tx callback), deadline
 * (sr_engine_next_deadline) and time passes (sr_engine_advance). Time is
 * always an argument; the engine never reads a clock, opens a socket,
 * sleeps or starts a thread, and is not thread-safe: its caller (the
 * progress layer, the simulator) serialises calls.
 *
 * Enum values mirror <infiniband/verbs.h> numerically (the verbs layer
 * asserts it at compile time), so conversion at the boundary is a cast;
 * the engine itself does not depend on that header.
 *
 * Memory: registered memory is addressed directly (this engine runs in the
 * address space that owns it). An MR maps [iova, iova + length) onto host
 * memory at addr; every access is bounds- and key-checked first.
 */
#ifndef SR_ENGINE_H
#define SR_ENGINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sr_wire.h"

struct sr_engine;
struct sr_pd;
struct sr_mr;
struct sr_cq;
struct sr_qp;
struct sr_srq;
struct sr_xrcd;
struct sr_mw;
struct sr_bulk_seg; /* sr_bulk.h */
struct sr_cc_cfg;

/* ---- values shared with verbs (same numbers as IBV_*) ---- */
enum sr_qp_type {
    SR_QPT_RC = 2,
    SR_QPT_UC = 3,
    SR_QPT_UD = 4,
    SR_QPT_XRC_SEND = 9,  /* XRC initiator: RC requester, each WR names a remote XRC SRQ */
    SR_QPT_XRC_RECV = 10, /* XRC target: RC responder feeding the XRC SRQs of its domain */
};

enum sr_qp_state {
    SR_QPS_RESET,
    SR_QPS_INIT,
    SR_QPS_RTR,
    SR_QPS_RTS,
    SR_QPS_SQD,
    SR_QPS_SQE,
    SR_QPS_ERR,
};

enum sr_access {
    SR_ACCESS_LOCAL_WRITE = 1,
    SR_ACCESS_REMOTE_WRITE = 2,
    SR_ACCESS_REMOTE_READ = 4,
    SR_ACCESS_REMOTE_ATOMIC = 8,
    SR_ACCESS_MW_BIND = 16,
    SR_ACCESS_ZERO_BASED = 32,
    SR_ACCESS_ON_DEMAND = 64,
    SR_ACCESS_HUGETLB = 128,
};

enum sr_wr_opcode {
    SR_WR_RDMA_WRITE = 0,
    SR_WR_RDMA_WRITE_WITH_IMM = 1,
    SR_WR_SEND = 2,
    SR_WR_SEND_WITH_IMM = 3,
    SR_WR_RDMA_READ = 4,
    SR_WR_ATOMIC_CMP_AND_SWP = 5,
    SR_WR_ATOMIC_FETCH_AND_ADD = 6,
    SR_WR_LOCAL_INV = 7,
    SR_WR_BIND_MW = 8,
    SR_WR_SEND_WITH_INV = 9,
    SR_WR_ATOMIC_WRITE = 15, /* its 8 bytes travel in compare_add, no SGE */
};

enum sr_send_flags {
    SR_SEND_FENCE = 1,
    SR_SEND_SIGNALED = 2,
    SR_SEND_SOLICITED = 4,
    SR_SEND_INLINE = 8,
    SR_SEND_IP_CSUM = 16, /* a checksum offload hint: nothing to do */
    SR_SEND_KNOWN = 31,   /* any other bit is EINVAL */
};

enum sr_wc_status {
    SR_WC_SUCCESS = 0,
    SR_WC_LOC_LEN_ERR = 1,
    SR_WC_LOC_QP_OP_ERR = 2,
    SR_WC_LOC_PROT_ERR = 4,
    SR_WC_WR_FLUSH_ERR = 5,
    SR_WC_MW_BIND_ERR = 6,
    SR_WC_BAD_RESP_ERR = 7,
    SR_WC_LOC_ACCESS_ERR = 8,
    SR_WC_REM_INV_REQ_ERR = 9,
    SR_WC_REM_ACCESS_ERR = 10,
    SR_WC_REM_OP_ERR = 11,
    SR_WC_RETRY_EXC_ERR = 12,
    SR_WC_RNR_RETRY_EXC_ERR = 13,
    SR_WC_FATAL_ERR = 19,
    SR_WC_GENERAL_ERR = 21,
};

enum sr_wc_opcode {
    SR_WC_SEND = 0,
    SR_WC_RDMA_WRITE = 1,
    SR_WC_RDMA_READ = 2,
    SR_WC_COMP_SWAP = 3,
    SR_WC_FETCH_ADD = 4,
    SR_WC_BIND_MW = 5,
    SR_WC_LOCAL_INV = 6,
    SR_WC_ATOMIC_WRITE = 9,
    SR_WC_RECV = 128,
    SR_WC_RECV_RDMA_WITH_IMM = 129,
};

enum sr_wc_flags {
    SR_WC_GRH = 1,
    SR_WC_WITH_IMM = 2,
    SR_WC_WITH_INV = 8,
};

enum sr_qp_attr_mask {
    SR_QP_STATE = 1 << 0,
    SR_QP_CUR_STATE = 1 << 1,
    SR_QP_EN_SQD_ASYNC_NOTIFY = 1 << 2,
    SR_QP_ACCESS_FLAGS = 1 << 3,
    SR_QP_PKEY_INDEX = 1 << 4,
    SR_QP_PORT = 1 << 5,
    SR_QP_QKEY = 1 << 6,
    SR_QP_AV = 1 << 7,
    SR_QP_PATH_MTU = 1 << 8,
    SR_QP_TIMEOUT = 1 << 9,
    SR_QP_RETRY_CNT = 1 << 10,
    SR_QP_RNR_RETRY = 1 << 11,
    SR_QP_RQ_PSN = 1 << 12,
    SR_QP_MAX_QP_RD_ATOMIC = 1 << 13,
    SR_QP_ALT_PATH = 1 << 14,
    SR_QP_MIN_RNR_TIMER = 1 << 15,
    SR_QP_SQ_PSN = 1 << 16,
    SR_QP_MAX_DEST_RD_ATOMIC = 1 << 17,
    SR_QP_PATH_MIG_STATE = 1 << 18,
    SR_QP_CAP = 1 << 19,
    SR_QP_DEST_QPN = 1 << 20,
};

/* Async events (same numbers as enum ibv_event_type). */
enum sr_event_type {
    SR_EVENT_CQ_ERR = 0,
    SR_EVENT_QP_FATAL = 1,
    SR_EVENT_QP_REQ_ERR = 2,
    SR_EVENT_QP_ACCESS_ERR = 3,
    SR_EVENT_COMM_EST = 4,
    SR_EVENT_SQ_DRAINED = 5,
    SR_EVENT_SRQ_LIMIT_REACHED = 15,
    SR_EVENT_QP_LAST_WQE_REACHED = 16,
};

/* Memory window types (same numbers as enum ibv_mw_type). */
enum sr_mw_type {
    SR_MW_TYPE_1 = 1,
    SR_MW_TYPE_2 = 2,
};

/* ---- limits ---- */
enum {
    SR_MAX_SGE = 32,
    SR_MAX_INLINE = 512,
    SR_MAX_RD_ATOMIC = 64,     /* per QP, both directions */
    SR_MAX_MSG_LEN = 1u << 31, /* IBA: 2^31 bytes */
};

/* ---- objects' public parts ---- */
struct sr_sge {
    uint64_t addr;
    uint32_t length;
    uint32_t lkey;
};

/* Destination of a UD send: the peer's GID (its address), QPN and Q_Key. */
struct sr_ah {
    uint8_t dgid[16];
    uint32_t dest_qpn;
    uint32_t qkey;
};

/* SR_WR_BIND_MW: what to bind (IBA 10.6.7.2). */
struct sr_bind {
    uint32_t mw;      /* the window, by sr_mw_handle() */
    uint32_t rkey;    /* its new R_Key: the low 8 bits are the consumer's key */
    uint32_t mr_lkey; /* the region it opens onto; unused when length is 0 */
    uint32_t access;  /* SR_ACCESS_REMOTE_* and SR_ACCESS_ZERO_BASED */
    uint64_t addr;    /* start, as an iova of the region */
    uint64_t length;  /* 0: unbind (type 1 only) */
};

struct sr_send_wr {
    uint64_t wr_id;
    const struct sr_sge *sg_list;
    uint32_t num_sge;
    enum sr_wr_opcode opcode;
    uint32_t send_flags;
    uint32_t imm; /* ImmDt as the 32-bit value on the wire */
    uint32_t invalidate_rkey;
    uint64_t remote_addr; /* RDMA and atomics */
    uint32_t rkey;
    uint64_t compare_add; /* atomics; ATOMIC WRITE: its data (memory order) */
    uint64_t swap;
    struct sr_ah ah;          /* UD only */
    uint32_t xrc_remote_srqn; /* XRC_SEND only: the target XRC SRQ */
    struct sr_bind bind;      /* SR_WR_BIND_MW only */
};

struct sr_recv_wr {
    uint64_t wr_id;
    const struct sr_sge *sg_list;
    uint32_t num_sge;
};

struct sr_wc {
    uint64_t wr_id;
    enum sr_wc_status status;
    enum sr_wc_opcode opcode;
    uint32_t vendor_err;
    uint32_t byte_len;
    uint32_t imm; /* as on the wire; or the invalidated rkey */
    uint32_t qp_num;
    uint32_t src_qp;
    uint32_t wc_flags;
    uint16_t pkey_index;
    uint8_t sl; /* UD receive: the frame's network header type, as RoCE NICs report it */
    /* When the engine generated it: the now_ns of the call that did (a
     * flush by sr_qp_post_recv, which takes no time, has the latest time
     * the engine was given). Completion timestamps are this. */
    uint64_t ts_ns;
};

struct sr_qp_cap {
    uint32_t max_send_wr, max_recv_wr;
    uint32_t max_send_sge, max_recv_sge;
    uint32_t max_inline_data;
};

/* Where an object's queue rings live (the QP's send and receive rings, an
 * SRQ's, a CQ's): the application's allocator (verbs parent domains), or
 * the engine's calloc when alloc is NULL or declines. Memory from alloc
 * is zeroed by the engine and returned through free, with the same type,
 * when the object goes (or its ring is replaced). Called with whatever
 * lock the caller holds around the engine. */
enum sr_alloc_type {
    SR_ALLOC_QP = 1,
    SR_ALLOC_SRQ = 4,
    SR_ALLOC_CQ = 5,
};
struct sr_alloc {
    /* len bytes for a ring; NULL: out of memory; *declined = true: no
     * opinion, the engine allocates it itself */
    void *(*alloc)(void *ctx, size_t len, enum sr_alloc_type type, bool *declined);
    void (*free)(void *ctx, void *p, enum sr_alloc_type type);
    void *ctx;
};

struct sr_qp_init_attr {
    const struct sr_alloc *alloc; /* optional; copied */
    enum sr_qp_type qp_type;
    struct sr_cq *send_cq, *recv_cq;
    struct sr_srq *srq;
    struct sr_xrcd *xrcd; /* XRC_RECV: its domain */
    struct sr_qp_cap cap;
    bool sq_sig_all;
};

struct sr_qp_attr {
    enum sr_qp_state qp_state;
    enum sr_qp_state cur_qp_state;
    uint32_t path_mtu; /* bytes: 256, 512, 1024, 2048 or 4096 */
    uint32_t qkey;
    uint32_t rq_psn, sq_psn;
    uint32_t dest_qp_num;
    uint32_t qp_access_flags;
    uint16_t pkey_index;
    uint8_t port_num;
    uint8_t dgid[16];      /* primary path: the peer's address (RC/UC) */
    uint8_t timeout;       /* 4.096 us * 2^timeout; 0 = infinite */
    uint8_t retry_cnt;     /* 0..7 */
    uint8_t rnr_retry;     /* 0..7, 7 = infinite */
    uint8_t min_rnr_timer; /* IBA Table 45 code, 0..31 */
    uint8_t max_rd_atomic, max_dest_rd_atomic;
    bool sq_draining;
    struct sr_qp_cap cap;
};

/* One outgoing packet. The transport headers are in hdr; the payload is
 * gathered from iov (pointing straight into registered memory or into the
 * engine's inline copies) followed by pad_len zero bytes; the driver adds
 * the IP/UDP encapsulation and the ICRC. Valid only during the callback. */
struct sr_iov {
    const void *base;
    uint32_t len;
};
struct sr_tx_pkt {
    const uint8_t *hdr;
    uint32_t hdr_len;
    const struct sr_iov *iov;
    uint32_t iov_cnt;
    uint32_t payload_len;
    uint32_t pad_len;
    const uint8_t *dgid; /* destination address (GID) */
    uint16_t src_port;   /* UDP source port: flow entropy, per QP or per packet */
    /* Which of the QP's entropy values src_port is (0: the QP's own;
     * sr_engine_cfg.paths): a driver that cannot choose the source port
     * per packet sends path k from the k-th of its sockets. */
    uint8_t path;
    /* The payload is memory the engine may write by the next request it
     * processes (READ responses): a driver that defers sending must put
     * everything queued so far on the wire (or copy it) before returning. */
    bool flush;
    /* The payload is a reference to the sender's memory, not data
     * (sr_bulk.h): only a driver that delivers it as such (shared memory,
     * through sr_engine_rx_bulk) may take it; any other drops it. */
    bool bulk;
};

/* What the engine calls back. tx returns 0, or a negative value when the
 * driver could not take the packet (it is then treated as lost). */
struct sr_engine_ops {
    int (*tx)(void *ctx, const struct sr_tx_pkt *pkt);
    /* Optional: put every queued packet on the wire (or copy its payload)
     * now. With it, a flush-flagged packet may stay queued until the
     * engine is about to write memory (its next placement or atomic) or
     * the driver's own flush; without it, tx sees pkt->flush set. */
    void (*tx_fence)(void *ctx);
    /* a completion was added to cq (for completion channels); may be NULL */
    void (*cq_event)(void *ctx, struct sr_cq *cq, bool solicited);
    /* an affiliated or unaffiliated async event; obj is the QP, CQ or SRQ */
    void (*async_event)(void *ctx, enum sr_event_type type, void *obj);
};

struct sr_engine_cfg {
    uint8_t gid[16]; /* this device's address (IPv6 or IPv4-mapped) */
    /* Optional: whether [addr, addr+len) may be read (write false) or
     * written now without a fault. Asked before every access to an
     * on-demand MR (SR_ACCESS_ON_DEMAND), whose memory the application may
     * never have mapped (an implicit MR spans the address space); an
     * access it refuses fails its protection check. */
    bool (*mem_ok)(const void *addr, uint64_t len, bool write);
    uint32_t max_qp, max_cq, max_mr, max_pd, max_srq; /* 0 = defaults */
    uint32_t max_mw;                                  /* 0 = default */
    uint32_t max_cqe, max_qp_wr;
    uint32_t window_pkts; /* requester's cap on unacknowledged packets; 0 = default */
    uint32_t port_mtu;    /* the port's active MTU (256..4096; 0 = 4096): UD QPs use it as
                             their path MTU, and it is the initial path MTU of the others */
    /* How long an RC responder may hold an ACK back (0: send at once). A
     * held ACK leaves with the QP's next packet (a request the application
     * posts in reply, a response), or when due; meanwhile later ones
     * replace it (IBA 9.7.5.1.1: ACKs may be coalesced). A QP whose held
     * ACKs leave with replies holds them longer (sr_engine_hold_acks). */
    uint64_t ack_delay_ns;
    /* Transport option: packet trains. Whoever opens the engine sets it
     * when its driver sends a run of equal-length datagrams to one peer
     * as one train (UDP GSO), where a packet of another length ends the
     * train. The requester then shapes an RC (or XRC) SEND or WRITE WQE
     * of two or more packets for trains, decided once when it starts:
     *  - it asks for an ACK every 256 packets instead of 32 when the
     *    QP's timeout is 16 ms or more (IBA 9.7.5.1.1 lets the responder
     *    coalesce; the window still moves, see sr_ack_req_every);
     *  - an RDMA WRITE (without immediate) of 2..that many packets goes
     *    as one WRITE ONLY per packet, each with a RETH for its own piece
     *    and all of one length, instead of FIRST (16 bytes longer) +
     *    MIDDLE + LAST. The responder sees independent WRITEs; the
     *    requester completes the WQE when the last is acknowledged.
     * Off (the default), every WQE goes as IBA 9.4 segments it, with an
     * ACK requested every 32 packets. */
    bool trains;
    /* With trains: RDMA WRITEs keep FIRST/MIDDLE/LAST all the same. */
    bool whole_writes;
    /* With trains, optional: whether peer dgid is reached by trains now
     * (false for a peer reached another way, e.g. shared memory, or once
     * the path has turned trains off); NULL: every peer is. Asked with
     * ops_ctx once per WQE that could be shaped. */
    bool (*trains_to)(void *ctx, const uint8_t *dgid);
    /* Multipath (src/engine/paths.h): RC and XRC requests spread over
     * paths entropy values (UDP source ports) per QP, chosen per packet
     * by path_policy (1 spray, 2 adaptive). 0 or 1: one source port per
     * QP, standard RoCEv2. Spraying reorders, so it is used only with a
     * peer that takes packets out of order (sr_qp_reorder_ok), or when
     * paths_reorder says to spray regardless (experiments: a go-back-N
     * peer rewinds on every reordering). paths_seed: the adaptive
     * policy's exploration. path_burst: consecutive new packets that
     * share a value (0 or 1: each packet chooses). */
    uint8_t paths;
    uint8_t path_policy;
    uint8_t path_burst;
    bool paths_reorder;
    uint64_t paths_seed;
    /* Optional, both or neither: same-host bulk data by reference
     * (sr_bulk.h). bulk_to: the smallest RC SEND, RDMA WRITE or READ sent
     * to dgid as a reference to its memory (0: none); bulk_copy: the copy
     * between this process's memory and a peer's. */
    uint32_t (*bulk_to)(void *ctx, const uint8_t *dgid);
    /* RDMA READs by reference too (the responder pushes into the sink).
     * Off by default: a READ request still queued at the responder when
     * the requester's QP has flushed its WQE would be pushed into memory
     * the application may already have reused (sr_bulk.h). */
    bool bulk_read;
    int (*bulk_copy)(void *ctx, uint64_t peer, bool to_peer, const struct sr_bulk_seg *local,
                     uint32_t local_cnt, const struct sr_bulk_seg *remote, uint32_t remote_cnt);
    /* Optional, copied: congestion control of every QP (src/cc/sr_cc.h,
     * docs/CONGESTION.md): the algorithm, its parameters and the
     * notification point's CNP spacing. NULL: none. */
    const struct sr_cc_cfg *cc;
    /* Selective recovery between softrdma peers (docs/WIRE.md). On, the
     * requester marks its RC/XRC requests SR_BTH_RESV7_SACK and takes
     * SACKs; a responder keeps out-of-order requests from such a
     * requester (at most ooo_pkts PSNs past the expected one per QP, at
     * most ooo_bytes payload per device) and answers with SACKs. Off (the
     * default), the device is a standard go-back-N RoCEv2 device: it
     * neither marks nor sends SACKs and drops any it receives. */
    bool sack;
    /* Between SACK peers: the queueing delay the requester's packets in
     * flight may build beyond the measured round trip (qcap.h: the pipe is
     * capped at the delivery rate times min RTT plus this); 0: no cap, the
     * window alone. */
    uint64_t qdelay_ns;
    uint32_t ooo_pkts;  /* 0: 2048; rounded up to a power of two, at most 4096 */
    uint64_t ooo_bytes; /* 0: 64 MiB */
    struct sr_engine_ops ops;
    void *ops_ctx;
};

/* Counters, for tests and tools. */
struct sr_engine_stats {
    uint64_t tx_pkts, rx_pkts, tx_bytes, rx_bytes;
    uint64_t rx_drop_malformed; /* decode failed */
    uint64_t rx_drop_no_qp;     /* unknown or not-ready destination QP */
    uint64_t rx_drop_bad_peer;  /* RC/UC packet from an address other than the peer */
    uint64_t rx_drop_qkey;      /* UD Q_Key mismatch */
    uint64_t rx_drop_other;     /* dropped per IBA silently (stale responses, UC gaps ...) */
    uint64_t rx_duplicate;      /* duplicate requests answered */
    uint64_t retransmits;       /* packets sent again */
    uint64_t timeouts, seq_naks_sent, seq_naks_rcvd, rnr_naks_sent, rnr_naks_rcvd;
    uint64_t err_naks_sent, err_naks_rcvd;
    uint64_t atomics_executed;
    uint64_t probes; /* tail-loss probes (not transport timeouts; rtt.h) */
    /* congestion control: CE-marked requests received (sr_engine_rx_ecn),
     * CNPs sent for them, CNPs received */
    uint64_t rx_ce, cnps_sent, cnps_rcvd;
    /* selective recovery (cfg.sack) */
    uint64_t sacks_sent, sacks_rcvd;
    uint64_t sack_bad;          /* SACKs or bits ignored: malformed, out of window, unsent PSNs */
    uint64_t sack_resends;      /* packets resent because a SACK showed them lost */
    uint64_t sack_lost_resends; /* of those, resends shown lost again (RFC 8985 6.3) */
    uint64_t ooo_stored;        /* out-of-order requests kept by the responder as a copy */
    uint64_t ooo_drained;       /* ... and executed once the hole before them filled */
    uint64_t ooo_dup;           /* copies of requests already kept */
    uint64_t ooo_overflow;      /* not kept (window or memory full): sequence NAK as standard */
    uint64_t ooo_placed;      /* out-of-order WRITE pieces written at once, kept as headers only */
    uint64_t ooo_send_placed; /* out-of-order SEND pieces scattered at once by their RPETH */
    uint64_t rph_bad;         /* SENDs whose RPETH disagreed with the order: NAKed */
    uint64_t ooo_peak_bytes;  /* the most the device's stores held at once (payload and slots) */
    /* slots the device's out-of-order pool took from the allocator (ooo.c) */
    uint64_t ooo_slot_allocs;
    /* the ECN echo between SACK peers (docs/WIRE.md): responses sent with
     * ECE, and responses received with it */
    uint64_t ece_sent, ece_rcvd;
    /* the hold report beside it: positive ACKs sent and received with a hold */
    uint64_t ack_holds_sent, ack_holds_rcvd;
    /* selective READ recovery (readsel.h) */
    uint64_t read_ooo_placed; /* READ responses placed past a missing one */
    uint64_t read_rereqs;     /* READ requests for holes only */
    uint64_t read_rereq_psns; /* ... and the response PSNs they asked for */
    uint64_t read_late;       /* holes asked for whose original response came after all */
    uint64_t read_rereq_lost; /* hole requests made again: a later one was answered first */
    /* D-SACK (docs/WIRE.md): duplicates reported, reports received, and
     * the selective resends they proved spurious (each grows the
     * reordering window, sack.c) */
    uint64_t dsacks_sent, dsacks_rcvd, sack_spurious;
};

/* ---- device ---- */
int sr_engine_create(const struct sr_engine_cfg *cfg, struct sr_engine **out);
void sr_engine_destroy(struct sr_engine *e);
void sr_engine_stats(const struct sr_engine *e, struct sr_engine_stats *out);
const uint8_t *sr_engine_gid(const struct sr_engine *e);

/* A packet arrived from src_gid (ICRC already verified by the driver).
 * buf runs from the BTH through the ICRC. */
void sr_engine_rx(struct sr_engine *e, const uint8_t *buf, size_t len, const uint8_t *src_gid,
                  uint64_t now_ns);
/* The same, for a driver that knows the datagram's IP ECN field: ce when
 * it was Congestion Experienced (RFC 3168 5), which the notification point
 * may answer with a CNP (docs/CONGESTION.md). sr_engine_rx is this with
 * ce false. */
void sr_engine_rx_ecn(struct sr_engine *e, const uint8_t *buf, size_t len, const uint8_t *src_gid,
                      bool ce, uint64_t now_ns);
/* Congestion control state of a QP, for tests and tools: the pacing rate
 * (0: not paced) and window (0: the engine's) its controller decides. */
uint64_t sr_qp_cc_rate_bps(const struct sr_qp *qp);
uint64_t sr_qp_cc_window_bytes(const struct sr_qp *qp);
/* How long ACKs may be held from now on: cfg.ack_delay_ns (the default;
 * 10 x as long on a QP whose last held ACK left with a request, one that
 * answers, and at most a quarter of its retransmission timeout), or, while
 * nobody on this side is going to post a reply (a passive target), at
 * most 4 us: enough to coalesce a stream's ACKs, short for a peer that
 * waits for each completion. The policy and its constants live in
 * src/engine/ack.h. */
void sr_engine_hold_acks(struct sr_engine *e, bool hold);
/* Sends now the ACKs held back since held_since or earlier (UINT64_MAX:
 * all), when no reply is coming for them soon: the application is about
 * to block, or polls with nothing to do. True if any were sent. */
bool sr_engine_release_acks(struct sr_engine *e, uint64_t held_since);
/* Earliest time sr_engine_advance must be called; UINT64_MAX if none. */
uint64_t sr_engine_next_deadline(const struct sr_engine *e);
/* Fire timers due at now_ns and continue transmissions. */
void sr_engine_advance(struct sr_engine *e, uint64_t now_ns);

/* ---- protection domains and memory ---- */
int sr_pd_alloc(struct sr_engine *e, struct sr_pd **out);
int sr_pd_free(struct sr_pd *pd); /* SR_ERR_BUSY while objects use it */

/* Register [addr, addr+length) in host memory, visible to peers at iova. */
int sr_mr_reg(struct sr_pd *pd, void *addr, size_t length, uint64_t iova, uint32_t access,
              struct sr_mr **out);
/* SR_ERR_INVAL while memory windows are bound to it (as rxe: IBA
 * 10.6.7.2.6 lets a region go only once its windows are unbound). */
int sr_mr_dereg(struct sr_mr *mr);
/* Re-registration: new PD, translation and access, the keys unchanged
 * (ibv_rereg_mr). On an error nothing changed. */
int sr_mr_rereg(struct sr_mr *mr, struct sr_pd *pd, void *addr, size_t length, uint64_t iova,
                uint32_t access);
/* The host address of [va, va+len) under lkey in pd with access, or NULL
 * (what a work request's SGE is checked with; ibv_advise_mr). */
void *sr_mr_local(struct sr_pd *pd, uint32_t lkey, uint64_t va, uint64_t len, uint32_t access);
uint32_t sr_mr_lkey(const struct sr_mr *mr);
uint32_t sr_mr_rkey(const struct sr_mr *mr);

/* Memory windows (IBA 10.6.7): remote access to part of a region, bound
 * and unbound by work requests on a send queue (SR_WR_BIND_MW; type 2 also
 * SR_WR_LOCAL_INV and a peer's SEND with Invalidate). A type 1 window is
 * usable at once after a bind; a type 2 window is Free until bound, only
 * the QP that bound it may be targeted with its R_Key (type 2B), and
 * invalidation makes it Free again. Deallocation revokes the window. */
int sr_mw_alloc(struct sr_pd *pd, enum sr_mw_type type, struct sr_mw **out);
int sr_mw_dealloc(struct sr_mw *mw);
uint32_t sr_mw_rkey(const struct sr_mw *mw);   /* the current R_Key */
uint32_t sr_mw_handle(const struct sr_mw *mw); /* names it in sr_bind.mw */

/* ---- completion queues ---- */
int sr_cq_create(struct sr_engine *e, uint32_t cqe, struct sr_cq **out);
/* The same, its ring from alloc (optional; copied). */
int sr_cq_create_alloc(struct sr_engine *e, uint32_t cqe, const struct sr_alloc *alloc,
                       struct sr_cq **out);
int sr_cq_destroy(struct sr_cq *cq); /* SR_ERR_BUSY while QPs use it */
int sr_cq_resize(struct sr_cq *cq, uint32_t cqe);
/* From now on cq's ring lives in memory from alloc (copied); the ring is
 * moved there at once. */
int sr_cq_set_alloc(struct sr_cq *cq, const struct sr_alloc *alloc);
uint32_t sr_cq_capacity(const struct sr_cq *cq);
/* Up to n completions, oldest first; returns the count. */
int sr_cq_poll(struct sr_cq *cq, int n, struct sr_wc *wc);
/* Arm a one-shot notification: the next completion (solicited_only: the
 * next solicited or error completion) calls ops.cq_event. */
int sr_cq_req_notify(struct sr_cq *cq, bool solicited_only);
/* A notification is requested and has not fired yet. */
bool sr_cq_armed(const struct sr_cq *cq);
void sr_cq_set_user(struct sr_cq *cq, void *user);
void *sr_cq_user(const struct sr_cq *cq);

/* ---- XRC domains ---- */
int sr_xrcd_alloc(struct sr_engine *e, struct sr_xrcd **out);
int sr_xrcd_free(struct sr_xrcd *xrcd); /* SR_ERR_BUSY while SRQs or QPs use it */

/* ---- shared receive queues ---- */
/* An XRC SRQ: receives for the XRC_RECV QPs of xrcd, completions to cq,
 * memory checked against pd. */
int sr_srq_create_xrc(struct sr_pd *pd, struct sr_xrcd *xrcd, struct sr_cq *cq, uint32_t max_wr,
                      uint32_t max_sge, struct sr_srq **out);
/* The SRQ number peers put in the XRCETH. */
uint32_t sr_srq_num(const struct sr_srq *srq);
int sr_srq_create(struct sr_pd *pd, uint32_t max_wr, uint32_t max_sge, struct sr_srq **out);
/* The same, its ring from alloc (optional; copied). */
int sr_srq_create_alloc(struct sr_pd *pd, uint32_t max_wr, uint32_t max_sge,
                        const struct sr_alloc *alloc, struct sr_srq **out);
int sr_srq_destroy(struct sr_srq *srq);
int sr_srq_post_recv(struct sr_srq *srq, const struct sr_recv_wr *wr);
/* Arm the limit event: fires once when fewer than limit WQEs remain. */
int sr_srq_set_limit(struct sr_srq *srq, uint32_t limit);
void sr_srq_query(const struct sr_srq *srq, uint32_t *max_wr, uint32_t *max_sge, uint32_t *limit);
void sr_srq_set_user(struct sr_srq *srq, void *user);
void *sr_srq_user(const struct sr_srq *srq);

/* ---- queue pairs ---- */
int sr_qp_create(struct sr_pd *pd, const struct sr_qp_init_attr *attr, struct sr_qp **out);
int sr_qp_destroy(struct sr_qp *qp); /* outstanding work is dropped without completions */
/* Renumber a UD QP in RESET as the General Services Interface QP, QPN 1
 * (IBA 13.5.1), which the communication manager's MADs are addressed to;
 * one per engine. SR_ERR_BUSY if the engine has one already. */
int sr_qp_make_gsi(struct sr_qp *qp);
/* Destroy, but let a connected QP that has received requests linger for
 * linger_ns as a responder that only re-acknowledges duplicates: if its
 * last ACK was lost, the peer's retransmission still gets an answer
 * (TCP's TIME_WAIT). Every reference (PD, CQs, MRs) is released at once. */
int sr_qp_destroy_linger(struct sr_qp *qp, uint64_t now_ns, uint64_t linger_ns);
/* Lingering QPs not yet gone. */
uint32_t sr_engine_zombies(const struct sr_engine *e);
uint32_t sr_qp_num(const struct sr_qp *qp);
/* IBA 10.3 / verbs modify_qp: the transition and the attribute mask are
 * checked against the QP type's table; SR_ERR_INVAL when not allowed. */
int sr_qp_modify(struct sr_qp *qp, const struct sr_qp_attr *attr, uint32_t mask, uint64_t now_ns);
int sr_qp_query(const struct sr_qp *qp, struct sr_qp_attr *attr, struct sr_qp_init_attr *init);
/* Post one work request. SR_ERR_INVAL for a malformed request or a QP state
 * that forbids posting; SR_ERR_NOMEM when the queue is full. Transmission
 * starts at once when the QP can send. */
int sr_qp_post_send(struct sr_qp *qp, const struct sr_send_wr *wr, uint64_t now_ns);
int sr_qp_post_recv(struct sr_qp *qp, const struct sr_recv_wr *wr);
/* What sr_qp_post_send would say of wr, without posting it (for batches
 * that must be posted whole or not at all), and the free send slots. */
int sr_qp_send_check(const struct sr_qp *qp, const struct sr_send_wr *wr);
uint32_t sr_qp_sq_free(const struct sr_qp *qp);
/* A reliable QP has sent packets not yet acknowledged: an ACK, NAK or
 * response is on its way (or the retransmission timer will fire), and
 * the progress pass that handles it flushes whatever was queued meanwhile.
 * A driver may hold back new packets of such a QP until then (doorbell
 * batching). */
bool sr_qp_answer_due(const struct sr_qp *qp);
void sr_qp_set_user(struct sr_qp *qp, void *user);
void *sr_qp_user(const struct sr_qp *qp);

/* Names for traces. */
const char *sr_qp_state_name(enum sr_qp_state s);
const char *sr_wc_status_name(enum sr_wc_status s);

/* IBA Table 45: RNR timer code -> nanoseconds. */
uint64_t sr_rnr_timer_ns(uint8_t code);
/* IBA 9.7.6.1.3 transport timer: 4.096 us * 2^timeout; 0 -> infinite (UINT64_MAX). */
uint64_t sr_timeout_ns(uint8_t timeout);

#endif

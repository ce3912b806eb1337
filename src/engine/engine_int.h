/* engine_int.h: the engine's internal objects, shared by its modules:
 *   engine.c  device, PDs, MRs (key table, protection checks), CQs, SRQs,
 *             receive dispatch, timers, packet output, and carrying out
 *             the completer's next step (sr_comp_apply)
 *   qp.c      QP objects, the state machine (modify/query), posting,
 *             completion and flushing
 *   req.c     requester: work requests -> request packets
 *   resp.c    responder: request packets -> execution, ACK/NAK, responses
 *   comp.c    completer: ACK/NAK/responses -> completions, retry timers,
 *             and what the requester must do next (struct sr_comp_next)
 *   ack.c     acknowledgement policy: when the responder's ACKs leave,
 *             how often the requester asks for them (ack.h)
 *   rtt.c     the requester's round-trip estimate and the time of its
 *             tail-loss probe (rtt.h)
 *   paths.c   per-packet entropy (UDP source port) policies (paths.h)
 *   sack.c    selective recovery, requester: the SACK scoreboard (sack.h)
 *   ooo.c     selective recovery, responder: the out-of-order store
 *   readsel.c selective READ recovery, requester: responses placed by
 *             offset, holes asked for alone (readsel.h)
 * Nothing here is visible outside src/engine. */
#ifndef SR_ENGINE_INT_H
#define SR_ENGINE_INT_H

#include "ack.h"
#include "paths.h"
#include "bulk.h"
#include "congestion.h"
#include "ecn.h"
#include "rtt.h"
#include "readsel.h"
#include "place.h"
#include "qcap.h"
#include "sack.h"
#include "sr_engine.h"
#include "sr_util.h"

#define SR_NO_DEADLINE UINT64_MAX

/* Every object hangs on its engine's list, so destroying the engine frees
 * whatever the user left behind. */
struct sr_obj_link {
    void *next, *prev;
};

struct sr_pd {
    struct sr_engine *eng;
    uint32_t refcnt; /* MRs, QPs, SRQs using it */
    struct sr_obj_link link;
};

struct sr_mr {
    struct sr_pd *pd;
    uint8_t *addr; /* host address of iova */
    uint64_t iova;
    uint64_t length;
    uint32_t access;
    uint32_t key;    /* lkey == rkey: table index << 8 | tag */
    uint32_t mw_cnt; /* memory windows bound to it */
};

/* A memory window's R_Key has SR_MW_KEY_BIT set: the responder tells it
 * from a region's key by that bit, and a window's key never works as an
 * L_Key (IBA 10.6.7: windows grant remote access only). */
#define SR_MW_KEY_BIT 0x80000000u
#define SR_MW_IDX(k)  (((k) & ~SR_MW_KEY_BIT) >> 8)

struct sr_mw {
    struct sr_pd *pd;
    struct sr_mr *mr; /* bound to it; NULL: unbound (type 2: Free) */
    struct sr_qp *qp; /* type 2: the QP it was bound through */
    uint64_t addr, length;
    uint32_t access;
    uint32_t handle; /* SR_MW_KEY_BIT | index << 8 | tag, fixed at allocation */
    uint32_t rkey;   /* handle with the consumer's key in the low 8 bits */
    uint8_t type;
};

struct sr_cq {
    struct sr_engine *eng;
    struct sr_alloc alloc; /* alloc.alloc NULL: none */
    bool ring_custom;      /* ring came from alloc */
    struct sr_wc *ring;
    uint32_t cap, head, count;
    uint32_t refcnt;
    uint8_t notify; /* 0 none, 1 next completion, 2 next solicited */
    bool overflowed;
    void *user;
    struct sr_obj_link link;
};

/* A receive WQE as stored (SGEs inline, stride = rq->stride). */
struct sr_rwqe {
    uint64_t wr_id;
    uint32_t num_sge;
    uint32_t total_len;
    struct sr_sge sge[];
};

struct sr_rq {
    const struct sr_alloc *alloc; /* the owner's, or NULL */
    enum sr_alloc_type alloc_type;
    bool custom; /* buf came from alloc */
    uint8_t *buf;
    uint32_t stride, max_wr, max_sge;
    uint32_t head, count;
};

struct sr_xrcd {
    struct sr_engine *eng;
    uint32_t refcnt; /* XRC SRQs and XRC_RECV QPs */
    struct sr_obj_link link;
};

struct sr_srq {
    struct sr_pd *pd;
    struct sr_alloc alloc;
    struct sr_rq rq;
    uint32_t srqn;
    struct sr_xrcd *xrcd; /* XRC SRQs only */
    struct sr_cq *cq;     /* XRC SRQs only: where their completions go */
    uint32_t limit;       /* armed limit, 0 = disarmed */
    uint32_t refcnt;
    void *user;
    struct sr_obj_link link;
};

enum swqe_state {
    SWQE_POSTED, /* not fully transmitted yet */
    SWQE_SENT,   /* every packet sent at least once */
    SWQE_DONE,   /* acknowledged / answered; waits to retire in order */
};

struct sr_swqe {
    struct sr_send_wr wr; /* wr.sg_list points at sge below */
    struct sr_sge *sge;
    uint8_t *inline_buf; /* SR_SEND_INLINE: the data, copied at post */
    uint32_t total_len;
    uint32_t first_psn, npkts; /* PSNs [first_psn, first_psn + npkts) */
    uint8_t state;
    uint8_t status; /* enum sr_wc_status once DONE */
    bool signaled;
    bool shaped;        /* started: ack_every and write_only are decided (req.c) */
    bool write_only;    /* an RDMA WRITE sent as WRITE ONLY packets */
    uint16_t ack_every; /* ACK requested every that many packets, and on the last */
    bool bulk;          /* sent by reference, as one packet (bulk.c) */
    uint32_t rq_msg;    /* a SEND's RPETH message number (req.rq_msgs at post) */
};

/* Responder replay state for READ and atomic requests (IBA 9.7.5.1.4:
 * a duplicate READ is re-executed, a duplicate atomic is answered
 * from the saved result and never executed twice). */
struct sr_replay {
    bool valid;
    bool atomic;
    uint32_t psn, npkts;
    uint64_t orig; /* atomic: original remote value */
};

enum { SR_REPLAY_SLOTS = 2 * SR_MAX_RD_ATOMIC }; /* extra depth for late duplicates */

struct sr_qp {
    struct sr_engine *eng;
    struct sr_pd *pd;
    uint32_t qpn;
    enum sr_qp_type type;
    struct sr_qp_attr attr;
    struct sr_cq *send_cq, *recv_cq;
    struct sr_srq *srq;
    struct sr_xrcd *xrcd; /* XRC_RECV */
    bool sq_sig_all;
    void *user;
    uint16_t src_port;
    struct sr_paths *paths; /* multipath requests (paths.c); NULL: src_port only */
    bool paths_off;         /* decided: single path */
    uint32_t mw_cnt;        /* type 2 memory windows bound through it */

    struct sr_alloc alloc; /* the rings' allocator; alloc.alloc NULL: none */
    bool sq_custom;        /* sq came from alloc */
    /* send queue: ring of max_send_wr, absolute indices head..tail */
    struct sr_swqe *sq;
    struct sr_sge *sq_sge;
    uint8_t *sq_inline;
    uint32_t sq_cap, sq_head, sq_tail;
    struct sr_rq rq;

    struct {
        uint32_t next_psn;  /* PSN of the next new WQE */
        uint32_t cur;       /* WQE being transmitted (absolute index) */
        uint32_t cur_psn;   /* next PSN to send of that WQE */
        uint32_t max_sent;  /* highest PSN sent + 1: below it a send is a retransmit */
        uint32_t rd_atomic; /* READ/atomic WQEs sent and not answered */
        uint64_t rnr_until; /* paused by an RNR NAK until then */
        bool rnr_wait;
        /* After a timeout or a probe's rewind, the packets beyond comp.psn
         * it may have outstanding, grown by what each ACK acknowledges (a
         * congestion window after RTO, RFC 5681 3.1); 0: the configured
         * window alone. One hole then costs a few packets per round, not
         * the whole window. */
        uint32_t rec_wnd;
        /* Messages posted that take a receive WQE at the responder (SENDs
         * and RDMA WRITEs with immediate): the next one's RPETH number */
        uint32_t rq_msgs;
    } req;

    struct {
        uint32_t psn;      /* oldest unacknowledged PSN */
        uint64_t deadline; /* retransmission timer */
        uint8_t retry_left, rnr_left;
        uint32_t read_retry_psn; /* a READ re-request from here is in flight */
        bool read_retry;
        /* Round trips, timed on one packet at a time that asked for an
         * answer and was sent once (Karn), or resent after a sequence NAK:
         * the responder dropped every copy from the NAK's PSN on
         * (IBA 9.7.5.1.2), so only the resent one can be answered.
         * rtt_resent_ok: the last rewind was a NAK's. */
        struct sr_rtt rtt;
        uint32_t rtt_psn;
        uint64_t rtt_sent_ns;
        bool rtt_timing, rtt_resent_ok;
        /* An earlier PSN was resent while the timed packet was out: its
         * cumulative ACK may then have waited for that repair, and times
         * it (up to a transport timeout), not the path; only a SACK of the
         * timed packet itself still gives the sample (sack.c). */
        bool rtt_behind;
        /* Tail-loss probe (rtt.h): due when nothing was acknowledged for a
         * probe timeout; probes counts those since the last progress. */
        uint64_t probe_at;
        uint8_t probes;
        struct sr_sack_sb *sb; /* SACKed PSNs in flight (sack.c); NULL: none yet */
        bool peer_sack;        /* the last response carried SR_BTH_RESV7_SACK */
        bool peer_rph;         /* a SACK said SR_SACK_F_RPH: RC SENDs carry an RPETH */
        bool ece;              /* the response being processed carries the ECN echo (ecn.c) */
        uint64_t peer_hold_ns; /* and the responder's hold of it (ecn.c); 0: none reported */
        /* READ responses placed out of order (readsel.c); NULL: none yet */
        struct sr_readsel_map *rs;
    } comp;

    struct {
        uint32_t epsn, msn;
        bool nak_sent; /* one PSN sequence NAK per gap (IBA 9.7.5.1.2) */
        /* A coalesced ACK held back (sr_engine_cfg.ack_delay_ns): it
         * leaves with this QP's next request or response, or when due
         * (ack.c decides). */
        struct sr_ack ack;
        /* multi-packet message in progress */
        uint8_t msg; /* 0 none, SR_OPF_SEND or SR_OPF_WRITE */
        bool have_rwqe;
        struct sr_cq *rwqe_cq; /* where the held receive WQE completes */
        uint32_t recv_off;
        uint64_t write_va;
        uint32_t write_left;
        uint32_t write_rkey;
        uint32_t write_total; /* WRITE with immediate: byte_len of its completion */
        uint8_t *rwqe_buf;    /* copy of the receive WQE being filled */
        struct sr_replay replay[SR_REPLAY_SLOTS];
        uint32_t replay_next;
        bool peer_sack;     /* the last request advertised SR_BTH_RESV7_SACK */
        struct sr_ooo *ooo; /* requests kept past a hole (ooo.c); NULL: none */
        bool ce_pending;    /* a CE-marked request since the last response (ecn.c) */
        bool placed_run;    /* the request running was placed out of order (place.c) */
        uint32_t rq_msgs;   /* receive WQEs taken: the next message's RPETH number */
    } resp;

    struct sr_qp_cong cong; /* congestion control (congestion.h) */
    struct sr_qcap qcap;    /* the cap on the queue it builds (qcap.h) */

    struct sr_qp *active_next, *active_prev; /* on eng->active while timers may run */
    bool active;
    /* destroyed, lingering to re-acknowledge the peer's retransmissions (a
     * lost final ACK must not fail the peer's last send; TCP's TIME_WAIT) */
    bool zombie;
    uint64_t zombie_until;
};

struct sr_engine {
    struct sr_engine_cfg cfg;
    struct sr_engine_stats stats;
    struct sr_mr **mrs; /* index = key >> 8 */
    uint8_t *mr_tag;
    uint32_t mr_cnt;
    uint32_t mr_next;   /* where the search for a free slot starts */
    struct sr_mw **mws; /* index = SR_MW_IDX(key) */
    uint8_t *mw_tag;
    uint32_t mw_cnt, mw_next;
    struct sr_qp **qps; /* index = qpn - SR_QPN_BASE */
    struct sr_qp *gsi;  /* QPN 1, outside qps (sr_qp_make_gsi) */
    uint32_t qp_cnt;
    uint32_t qp_hint;
    uint32_t pd_cnt, cq_cnt, srq_cnt;
    struct sr_qp *active;
    struct sr_pd *pds;
    struct sr_cq *cqs;
    struct sr_srq *srqs;
    struct sr_xrcd *xrcds;
    struct sr_srq **srq_by_num; /* index = srqn - 1 */
    uint32_t zombies;
    bool fence_due;           /* queued READ response payload: fence before writing memory */
    struct sr_ack_policy ack; /* hold delays in force (sr_engine_hold_acks) */
    struct sr_cc_cfg cc;      /* cfg.cc's copy (all zero: none) */
    /* The now_ns of the public call being handled (the latest one for
     * calls that take none): what sr_cq_push stamps completions with, so
     * that the modules that generate them need no time argument. */
    uint64_t now_ns;
    struct sr_bulk_state bulk; /* same-host data by reference (bulk.c) */
    uint64_t ooo_bytes;        /* held by every QP's out-of-order store (ooo.c) */
    uint8_t *sack_ring;        /* SACK bitmaps in flight to the driver (ooo.c) */
    uint32_t sack_ring_at;     /* the next one to use */
    /* the out-of-order stores' slots, in use and free (ooo.c) */
    struct sr_ooo_pool *ooo_pool;
};

/* Before the engine writes registered memory: queued packets whose payload
 * is memory the write may change leave first (sr_engine_ops.tx_fence). */
static inline void sr_engine_fence(struct sr_engine *e)
{
    if (e->fence_due) {
        e->fence_due = false;
        e->cfg.ops.tx_fence(e->cfg.ops_ctx);
    }
}

enum { SR_QPN_BASE = 0x10, SR_QPN_GSI = 1 }; /* QPN 0 and 1 are the IB special QPs */

/* engine.c */
/* A zeroed ring of len bytes from a (optional) or calloc; *custom says
 * which, for sr_ring_free. */
void *sr_ring_alloc(const struct sr_alloc *a, size_t len, enum sr_alloc_type type, bool *custom);
void sr_ring_free(const struct sr_alloc *a, void *p, enum sr_alloc_type type, bool custom);
int sr_rq_init(struct sr_rq *rq, uint32_t max_wr, uint32_t max_sge, const struct sr_alloc *a,
               enum sr_alloc_type type);
void sr_rq_fini(struct sr_rq *rq);
struct sr_mr *sr_mr_lookup(struct sr_engine *e, uint32_t key);
/* Protection check of [va, va+len) under key for pd with the access bits
 * needed; returns the host pointer or NULL (IBA 9.7.5.1, 10.6.3). */
uint8_t *sr_mr_check(struct sr_engine *e, struct sr_pd *pd, uint32_t key, uint64_t va, uint64_t len,
                     uint32_t access);
/* The responder's R_Key check: rkey names a region (sr_mr_check), or a
 * window (IBA 10.6.7) valid for qp; returns the host pointer of
 * [va, va+len) or NULL. */
uint8_t *sr_rkey_check(struct sr_engine *e, const struct sr_qp *qp, struct sr_pd *pd, uint32_t rkey,
                       uint64_t va, uint64_t len, uint32_t access);
/* Scatter data into an SGE list at byte offset off, checking each SGE with
 * LOCAL_WRITE; false on a protection or length failure. */
bool sr_sge_scatter(struct sr_engine *e, struct sr_pd *pd, const struct sr_sge *sge,
                    uint32_t num_sge, uint32_t off, const void *data, uint32_t len);
bool sr_cq_push(struct sr_cq *cq, const struct sr_wc *wc, bool solicited);
/* Drop cq's completions of QP qp_num, keeping the others in order. */
void sr_cq_clean(struct sr_cq *cq, uint32_t qp_num);
void sr_engine_tx(struct sr_engine *e, struct sr_qp *qp, const struct sr_pkt *pkt,
                  const struct sr_iov *iov, uint32_t iov_cnt, const uint8_t *dgid);
void sr_engine_tx_flush(struct sr_engine *e, struct sr_qp *qp, const struct sr_pkt *pkt,
                        const struct sr_iov *iov, uint32_t iov_cnt, const uint8_t *dgid);
void sr_engine_activate(struct sr_engine *e, struct sr_qp *qp);
/* The WQE k places behind the head of the ring (k < max_wr); posted when
 * k < count. */
struct sr_rwqe *sr_rq_at(const struct sr_rq *rq, uint32_t k);
struct sr_rwqe *sr_rq_peek(struct sr_rq *rq);
void sr_rq_pop(struct sr_rq *rq);
void sr_srq_check_limit(struct sr_srq *srq);
struct sr_srq *sr_srq_lookup(struct sr_engine *e, uint32_t srqn);
/* Work requests that take a responder read/atomic resource (an entry of
 * max_rd_atomic on the requester, max_dest_rd_atomic on the responder). */
static inline bool sr_wr_is_rd_atomic(enum sr_wr_opcode op)
{
    return op == SR_WR_RDMA_READ || op == SR_WR_ATOMIC_CMP_AND_SWP ||
           op == SR_WR_ATOMIC_FETCH_AND_ADD;
}

/* RC, XRC_SEND and XRC_RECV: acknowledged, retransmitted transports. */
static inline bool sr_qp_reliable(const struct sr_qp *qp)
{
    return qp->type == SR_QPT_RC || qp->type == SR_QPT_XRC_SEND || qp->type == SR_QPT_XRC_RECV;
}

/* mw.c */
/* SR_WR_BIND_MW and SR_WR_LOCAL_INV, run when the requester reaches them. */
enum sr_wc_status sr_mw_local_op(struct sr_qp *qp, const struct sr_send_wr *wr);
/* The window a SEND with Invalidate arriving at qp may invalidate, or
 * NULL when the IETH's R_Key names none. */
struct sr_mw *sr_mw_inv_target(struct sr_engine *e, const struct sr_qp *qp, struct sr_pd *pd,
                               uint32_t rkey, bool remote);
void sr_mw_invalidate(struct sr_mw *mw);
/* The QP goes away: windows bound through it are unbound. */
void sr_mw_qp_gone(struct sr_qp *qp);
void sr_mw_free_all(struct sr_engine *e);
static inline bool sr_wr_is_local(enum sr_wr_opcode op)
{
    return op == SR_WR_BIND_MW || op == SR_WR_LOCAL_INV;
}

/* qp.c */
struct sr_qp *sr_qp_lookup(struct sr_engine *e, uint32_t qpn);
struct sr_swqe *sr_sq_at(struct sr_qp *qp, uint32_t idx);
void sr_qp_to_error(struct sr_qp *qp);
void sr_qp_retire(struct sr_qp *qp); /* complete DONE WQEs at the head, in order */
void sr_qp_recv_complete(struct sr_qp *qp, struct sr_cq *cq, const struct sr_rwqe *rwqe,
                         enum sr_wc_status status, enum sr_wc_opcode op, uint32_t byte_len,
                         uint32_t imm, uint32_t flags, uint32_t src_qp, uint8_t sl, bool solicited);
uint32_t sr_qp_pmtu(const struct sr_qp *qp);
bool sr_qp_can_send(const struct sr_qp *qp);

/* req.c */
void sr_req_run(struct sr_qp *qp, uint64_t now_ns);
/* Go back to psn (go-back-N): the next packet sent is psn's. */
void sr_req_rewind(struct sr_qp *qp, uint32_t psn);
/* Send again the last packet sent, asking for an ACK (the tail-loss
 * probe); the send pointer stays where it is. */
void sr_req_probe(struct sr_qp *qp, uint64_t now_ns);
/* Send psn's packet again, asking for an ACK, the send pointer unmoved
 * (a selective resend, sack.c). Returns the PSNs it covers (a READ
 * request's responses), 0 when it cannot; *sent: a packet left. */
uint32_t sr_req_resend(struct sr_qp *qp, uint32_t psn, uint64_t now_ns, bool *sent);
uint32_t sr_swqe_npkts(const struct sr_qp *qp, const struct sr_send_wr *wr, uint32_t len);

/* resp.c */
uint8_t sr_resp_ud_sl(const uint8_t *sgid, const uint8_t *dgid); /* wc.sl of a UD receive */
void sr_resp_zombie_rx(struct sr_qp *qp, const struct sr_pkt *pkt, const uint8_t *src_gid,
                       uint64_t now_ns);
void sr_resp_rx(struct sr_qp *qp, const struct sr_pkt *pkt, int decode_err, const uint8_t *src_gid,
                uint64_t now_ns);
/* Carries out the acknowledgement policy's verdict on ev (ack.h) for qp:
 * sends the ACK it says is owed now, if any. held_since: SR_ACK_EV_IDLE's. */
enum sr_ack_verdict sr_resp_ack(struct sr_qp *qp, enum sr_ack_event ev, uint64_t now_ns,
                                uint64_t held_since);
/* The same, for the events on a path taken per packet: nothing to do
 * unless an ACK is held. */
static inline void sr_resp_ack_first(struct sr_qp *qp, enum sr_ack_event ev, uint64_t now_ns)
{
    if (sr_ack_held(&qp->resp.ack))
        sr_resp_ack(qp, ev, now_ns, 0);
}

/* comp.c */
/* What the completer asks of the rest of the QP once it has consumed a
 * response or a timer expiry: the completer's event to the requester.
 * Applied by sr_comp_apply in this order: rewind, error, probe, sack, readsel,
 * resume, arm. */
enum sr_comp_act {
    SR_COMP_REWIND = 1 << 0,   /* go back to rewind_psn (go-back-N, IBA 9.7.5.2) */
    SR_COMP_ERROR = 1 << 1,    /* a WQE failed: the QP enters Error (IBA 10.3.1.7) */
    SR_COMP_RESUME = 1 << 2,   /* run the requester: the window opened, or it resends */
    SR_COMP_ARM = 1 << 3,      /* then restart the transport timer from now */
    SR_COMP_PROBE = 1 << 4,    /* resend the last packet sent with AckReq (sr_req_probe) */
    SR_COMP_SACK = 1 << 5,     /* resend the holes a SACK showed lost (sr_sack_resend) */
    SR_COMP_SACK_ALL = 1 << 6, /* with SR_COMP_SACK or _READSEL: every hole known (a probe) */
    SR_COMP_READSEL = 1 << 7,  /* ask again for lost READ holes (sr_readsel_resend) */
};
struct sr_comp_next {
    uint8_t act; /* enum sr_comp_act bits */
    uint32_t rewind_psn;
};
struct sr_comp_next sr_comp_rx(struct sr_qp *qp, const struct sr_pkt *pkt, uint64_t now_ns);
struct sr_comp_next sr_comp_timer(struct sr_qp *qp, uint64_t now_ns);
/* engine.c: the one place the completer's next step is carried out. */
void sr_comp_apply(struct sr_qp *qp, struct sr_comp_next n, uint64_t now_ns);
void sr_comp_arm(struct sr_qp *qp, uint64_t now_ns);
/* Something was sent: the probe is due a probe timeout from now. */
void sr_comp_probe_arm(struct sr_qp *qp, uint64_t now_ns);
/* The probe timer comes due no later than at: a lost hole's reordering
 * window ends then (sack.c, readsel.c), and probe() asks for its resend. */
void sr_comp_probe_by(struct sr_qp *qp, uint64_t at);
/* Packets past a hole were delivered (SACKed, or READ responses placed):
 * the probe timeout starts again, within the transport timer. */
void sr_comp_delivered(struct sr_qp *qp, uint64_t now_ns);
/* The requester sent psn for the first time and asked for an answer. */
void sr_comp_rtt_start(struct sr_qp *qp, uint32_t psn, uint64_t now_ns);
uint64_t sr_qp_deadline(const struct sr_qp *qp);

#endif

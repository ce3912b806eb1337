/* readsel.h: the requester's selective READ recovery (docs/WIRE.md,
 * docs/RELIABILITY.md "Loss recovery").
 *
 * A READ response's PSN says where its payload belongs: (PSN - the READ's
 * first PSN) x PMTU into the READ's scatter list (IBA 9.7.5.1.6, one
 * response per PMTU in PSN order). A response that arrives past a missing
 * one is therefore placed at once and its PSN marked in a per-QP bitmap;
 * comp.psn, the cumulative point, stays at the first missing PSN and
 * moves over the marks when the hole fills. A hole counted lost (DupThresh
 * marks after it, an acknowledgement of something after its READ, a
 * probe, a timeout) is asked for again alone: one READ request per
 * contiguous hole, its PSN the hole's first, its VA and length the
 * hole's part of the READ. To the responder that is a duplicate READ
 * whose PSN lies inside an earlier READ and whose VA and length are a
 * part of it, re-executed from that PSN (IBA 9.7.5.1.4; the requester
 * side of resuming a READ, 9.7.4), which any IBA responder answers: the
 * requester does this with any responder.
 *
 * On when the device does selective recovery (sr_engine_cfg.sack); off,
 * the requester is the standard one: responses past a gap are dropped
 * and the READ is asked for again from the gap (IBA 9.7.5.2). */
#ifndef SR_READSEL_H
#define SR_READSEL_H

#include <stdbool.h>
#include <stdint.h>

struct sr_qp;
struct sr_pkt;
struct sr_swqe;
struct sr_comp_next;

/* RFC 6675's DupThresh for READ responses (they travel on one path),
 * raised by one for each response that turns out late rather than lost,
 * up to the maximum. */
enum { SR_READSEL_DUPTHRESH = 3, SR_READSEL_DUPTHRESH_MAX = 32 };
/* Hole requests per call, so one response cannot make the requester
 * send a window's worth at once. */
enum { SR_READSEL_REQ_MAX = 64 };
/* Holes counted lost at different times, each waiting out its own
 * reordering window (as sack.h's epochs). */
enum { SR_READSEL_EPOCHS = 16 };
/* The reordering window: reo_mult quarters of the minimum round trip,
 * grown by one per round trip that shows a late response, up to a whole
 * SRTT (RFC 8985 6.2). */
enum { SR_READSEL_REO_MULT_MAX = 64 };
/* Hole requests remembered, to time a late original and to find a
 * request lost when a later one is answered first. */
enum { SR_READSEL_RR = 128 };

/* A hole asked for again: [psn, psn + cnt), counted lost at lost_at,
 * asked for at req_at, the seq-th request; timed: its PSNs asked for the
 * first time; cnt 0: a free slot. */
struct sr_readsel_rr {
    uint32_t psn, cnt, seq;
    uint64_t lost_at, req_at;
    bool timed;
};

/* ---- the bitmap, pure (PSN arithmetic only; unit-tested alone) ---- */
struct sr_readsel_map {
    uint32_t cap;       /* bits, a power of two: PSNs [lo, lo + cap) are tracked */
    uint32_t lo;        /* every PSN before it is acknowledged cumulatively */
    uint32_t hi;        /* one past the highest PSN marked; == lo: none */
    uint32_t cnt;       /* PSNs marked in [lo, hi) */
    uint32_t resent;    /* holes before it were asked for again in this round */
    uint32_t evid;      /* responses were sent for every PSN before it (evid_set) */
    uint32_t dupthresh; /* later marks that make a hole lost */
    bool evid_set;
    uint8_t reo_mult;      /* quarters of the minimum RTT in the reordering window, >= 1 */
    uint64_t reo_grown_at; /* when reo_mult last grew; 0: never */
    uint64_t reo_late_ns;  /* the latest a response asked for again turned up; 0: none */
    uint32_t rr_next;      /* the rr slot the next hole asked for takes */
    uint32_t rr_seq;       /* hole requests made */
    struct sr_readsel_rr rr[SR_READSEL_RR];
    uint32_t ep_n; /* epochs waiting: holes before ep_lim[i] counted lost at ep_at[i] */
    uint32_t ep_lim[SR_READSEL_EPOCHS];
    uint64_t ep_at[SR_READSEL_EPOCHS];
    uint64_t bits[]; /* cap bits of PSNs placed, then cap bits of PSNs asked for (readsel.c) */
};

struct sr_readsel_map *sr_readsel_map_new(uint32_t cap, uint32_t psn);
/* Cumulative progress: every PSN before psn is done and forgotten. */
void sr_readsel_map_ack(struct sr_readsel_map *m, uint32_t psn);
/* Marks psn; false if it is outside [lo, lo + cap) or marked already. */
bool sr_readsel_map_mark(struct sr_readsel_map *m, uint32_t psn);
bool sr_readsel_map_has(const struct sr_readsel_map *m, uint32_t psn);
/* Every unmarked PSN before the result counts as lost: the dupthresh-th
 * highest mark (RFC 6675 IsLost), or evid when later; lo when none. */
uint32_t sr_readsel_map_lost_limit(const struct sr_readsel_map *m, uint32_t dupthresh);

/* ---- on a QP (readsel.c) ---- */
/* The device places READ responses out of order (cfg.sack). */
bool sr_readsel_on(const struct sr_qp *qp);
/* op may answer index idx of READ w: FIRST (ONLY for one packet) at 0,
 * LAST or ONLY at the end, MIDDLE inside; inside also FIRST (a responder
 * resumes a READ with FIRST, as this one does) and, when sel, LAST and
 * ONLY at 0 or inside (the end of a hole asked for alone). */
bool sr_readsel_op_ok(const struct sr_swqe *w, uint32_t idx, uint32_t op, bool sel);
/* A response for w at a PSN after comp.psn: placed and marked when it
 * passes the checks in-order ones pass; holes that now count lost are
 * asked for (n: SR_COMP_READSEL). */
void sr_readsel_rx(struct sr_qp *qp, struct sr_swqe *w, const struct sr_pkt *pkt,
                   struct sr_comp_next *n);
/* Any response for READ w, before it is placed: times late originals and
 * finds hole requests lost (readsel.c). */
void sr_readsel_seen(struct sr_qp *qp, const struct sr_swqe *w, const struct sr_pkt *pkt);
/* The response at psn is placed already (comp.c moves comp.psn over it). */
bool sr_readsel_has(struct sr_qp *qp, uint32_t psn);
/* An acknowledgement shows that the responder executed every request
 * before acked, the READ w among them, so every response of w was sent:
 * its holes count lost, and what else lies before acked is acknowledged
 * once w completes (sr_readsel_acked). True when the READ is recovered
 * here (the caller does not rewind). */
bool sr_readsel_beyond(struct sr_qp *qp, const struct sr_swqe *w, uint32_t acked,
                       struct sr_comp_next *n);
/* The acknowledgement a READ with holes held up: every request before
 * *psn was executed by the responder. */
bool sr_readsel_acked(struct sr_qp *qp, uint32_t *psn);
/* Ask again for the holes that count as lost once they have counted
 * lost for the reordering window (all: every hole of a READ sent, a
 * probe's, at once); the send pointer stays where it is. */
void sr_readsel_resend(struct sr_qp *qp, uint64_t now_ns, bool all);
/* A hole's reordering window has run out (the probe timer came due for
 * it, sr_comp_probe_arm), or when it will: 0 when none waits. */
bool sr_readsel_lost_pending(struct sr_qp *qp);
uint64_t sr_readsel_lost_deadline(const struct sr_qp *qp);
/* The probe timeout passed: true when READ holes are known, which the
 * probe then asks for instead of resending the last packet. */
bool sr_readsel_probe_holes(struct sr_qp *qp);
/* The requester reached READ w at psn after a rewind: when some of its
 * responses are placed already, ask for the holes in [psn, end) only and
 * return the PSNs covered (the rest of w); 0: not handled here. */
uint32_t sr_readsel_rerequest(struct sr_qp *qp, const struct sr_swqe *w, uint32_t psn);
void sr_readsel_free(struct sr_qp *qp);

#endif

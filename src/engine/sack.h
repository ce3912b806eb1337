/* sack.h: selective recovery between softrdma peers (docs/WIRE.md).
 *   sack.c  the requester's scoreboard: which PSNs in flight a SACK showed
 *           received, which holes count as lost, and their resends
 *   ooo.c   the responder's out-of-order store: requests that arrived
 *           past a hole, kept, acknowledged selectively, and run through
 *           the responder in PSN order once the hole fills
 * Both are used only on a QP whose peer agreed (SR_BTH_RESV7_SACK on its
 * requests, sr_engine_cfg.sack on this device); SACK information is
 * advisory: only cumulative acknowledgements complete work requests. */
#ifndef SR_SACK_H
#define SR_SACK_H

#include <stdbool.h>
#include <stdint.h>

struct sr_qp;
struct sr_engine;
struct sr_pkt;
struct sr_comp_next;

/* RFC 6675 DupThresh: a hole with this many PSNs SACKed after it is lost. */
enum { SR_SACK_DUPTHRESH = 3 };
/* Holes resent per SACK or probe, so one SACK cannot make the requester
 * send a window's worth at once. */
enum { SR_SACK_RESEND_MAX = 64 };
/* The responder's window (PSNs past the expected one) and the longest
 * bitmap a SACK carries. */
enum { SR_OOO_DEF_PKTS = 2048, SR_OOO_MAX_PKTS = 4096, SR_SACK_MAX_BITS = 2048 };
/* SACK bitmaps waiting in the driver's queue (their payload is referenced
 * until the packet leaves, sr_engine_ops.tx): a ring per device. */
enum { SR_SACK_RING = 256 };
#define SR_OOO_DEF_BYTES (64ull << 20)
/* RFC 8985 6.2: the reordering window grows by a quarter of SRTT per
 * round trip in which a D-SACK proved a resend spurious, up to SRTT, and
 * falls back after this many loss recoveries without one. */
enum { SR_SACK_REO_PERSIST = 16, SR_SACK_REO_MULT_MAX = 4 };
/* Selective resends remembered, to tell a D-SACK of one (spurious) from
 * one of a duplicate the network made. */
enum { SR_SACK_RS_RING = 16 };
/* Detection times kept for the holes counted lost and not yet resent
 * (RFC 8985 6.2 times each packet's reordering window from its own
 * detection, not from the first hole's). */
enum { SR_SACK_EPOCHS = 8 };
/* Selective resends followed until the scoreboard shows them delivered,
 * to tell when one was lost again (RFC 8985 6.3). */
enum { SR_SACK_LR_MAX = 64 };

/* ---- the scoreboard, pure (PSN arithmetic only; unit-tested alone) ---- */
struct sr_sack_sb {
    uint32_t cap;    /* bits: a power of two; PSNs [lo, lo + cap) are tracked */
    uint32_t lo;     /* every PSN before it is acknowledged cumulatively */
    uint32_t hi;     /* one past the highest PSN marked; == lo: none */
    uint32_t cnt;    /* PSNs marked in [lo, hi) */
    uint32_t resent; /* holes before it were resent in this recovery */
    bool timed_out;  /* a transport timeout since lo last moved */
    /* holes counted lost, not yet resent: those before ep_lim[k] were
     * counted lost at ep_at[k] (both ascending); ep_n == 0: none */
    uint32_t ep_lim[SR_SACK_EPOCHS];
    uint64_t ep_at[SR_SACK_EPOCHS];
    uint32_t ep_n;
    /* the adaptive reordering window (RFC 8985 6.2), kept across resets */
    uint32_t reo_mult;                    /* the window is reo_mult quarters of SRTT */
    uint32_t reo_persist;                 /* recoveries left before reo_mult falls back to 1 */
    uint64_t reo_grown_at;                /* when reo_mult last grew (at most once per SRTT) */
    uint64_t reo_late_ns;                 /* the longest lateness a D-SACK showed */
    uint32_t rs_psn[SR_SACK_RS_RING];     /* recent selective resends, a ring, */
    uint64_t rs_lost_at[SR_SACK_RS_RING]; /* and when each was counted lost (0: unknown) */
    uint64_t rs_seen_at[SR_SACK_RS_RING]; /* when it first showed delivered (0: not yet) */
    uint32_t rs_at, rs_cnt;
    /* selective resends not yet shown delivered, oldest first: each one's
     * PSN, the send pointer when it left (every PSN from there on was sent
     * after it) and when it left */
    struct sr_sack_lr {
        uint32_t psn, after;
        uint64_t at;
        bool passed; /* something sent after it was delivered */
    } lr[SR_SACK_LR_MAX];
    uint32_t lr_n;
    uint64_t lr_next_at; /* when one more counts lost again; 0: none waits */
    uint32_t probe_psn;  /* the last probe's PSN, */
    bool probe_out;      /* while no D-SACK reported it */
    uint64_t bits[];
};

/* A scoreboard for a window of window_pkts PSNs starting at psn; NULL
 * when out of memory (SACKs are then ignored). */
struct sr_sack_sb *sr_sack_sb_new(uint32_t window_pkts, uint32_t psn);
/* Forget every mark (RFC 2018: after a timeout the receiver may have
 * reneged); tracking starts again at psn. */
void sr_sack_sb_reset(struct sr_sack_sb *sb, uint32_t psn);
/* Cumulative acknowledgement: every PSN before psn is done. */
void sr_sack_sb_ack(struct sr_sack_sb *sb, uint32_t psn);
/* Marks the PSNs whose bit is set in bitmap (bit i: base + i, LSB first in
 * each byte). Bits before lo are old news; bits at or past max_sent (never
 * sent) or beyond the tracked range are counted in *ignored. Returns how
 * many PSNs were newly marked. */
uint32_t sr_sack_sb_mark(struct sr_sack_sb *sb, uint32_t base, const uint8_t *bitmap,
                         uint32_t nbits, uint32_t max_sent, uint32_t *ignored);
bool sr_sack_sb_has(const struct sr_sack_sb *sb, uint32_t psn);
/* Every unmarked PSN before the result is lost: the dupthresh-th highest
 * mark (RFC 6675 IsLost; SR_SACK_DUPTHRESH, or more on a sprayed QP); or hi when the marks reach
 * max_sent (no later packet will come to tell) or when all is set (a probe: everything still
 * missing goes again). lo when nothing counts as lost. */
uint32_t sr_sack_sb_lost_limit(const struct sr_sack_sb *sb, uint32_t max_sent, bool all,
                               uint32_t dupthresh);
/* The first unmarked PSN in [from, limit), if any. */
bool sr_sack_sb_next_hole(const struct sr_sack_sb *sb, uint32_t from, uint32_t limit,
                          uint32_t *psn);
/* psn was resent because the board counted it lost at lost_at_ns (0:
 * unknown), not by a probe or the timer: remembered for a D-SACK; one
 * more loss recovery. */
void sr_sack_sb_resent(struct sr_sack_sb *sb, uint32_t psn, uint64_t lost_at_ns);
/* psn went once more (a probe's resend of every hole, a resend lost
 * again): if it was a remembered resend, it is forgotten, since a D-SACK
 * of it now may be one copy of ours meeting another, not a late
 * original (RFC 3708 2: only a single retransmission's duplicate shows it
 * spurious). */
void sr_sack_sb_resent_again(struct sr_sack_sb *sb, uint32_t psn);
/* Stamps now_ns on the remembered resends the board shows delivered
 * (acknowledged or marked) for the first time: a D-SACK of one then
 * dates the original's arrival by the first answer that showed the PSN,
 * not by the duplicate's, which came a round trip after the resend. */
void sr_sack_sb_seen(struct sr_sack_sb *sb, uint64_t now_ns);
/* psn was resent at now_ns with the send pointer at after: followed
 * until the board shows it delivered (the oldest is forgotten when full). */
void sr_sack_sb_track(struct sr_sack_sb *sb, uint32_t psn, uint32_t after, uint64_t now_ns);
/* Of the followed resends, those the board shows delivered are forgotten;
 * those still missing although something sent after them was delivered
 * (a PSN at or past their send pointer, or a later followed resend) are
 * lost again (RFC 8985 6.3: a packet is lost once one sent after it is
 * delivered and the reordering window wnd_ns has passed): up to max of
 * their PSNs go to out[], oldest first, and are forgotten. *next_at is set
 * to the earliest time one more would count lost, 0 if none waits. */
uint32_t sr_sack_sb_lost_resends(struct sr_sack_sb *sb, uint64_t now_ns, uint64_t wnd_ns,
                                 uint32_t *out, uint32_t max, uint64_t *next_at);
/* A D-SACK reported psn received twice at now_ns: true if it was one of
 * the remembered resends (spurious, forgotten now); the reordering window
 * then grows, once per srtt_ns, and covers at least the time from the
 * resend's detection to now (the original was at most that late). */
bool sr_sack_sb_dsack(struct sr_sack_sb *sb, uint32_t psn, uint64_t now_ns, uint64_t srtt_ns);
/* The reordering window for a round trip of srtt_ns: reo_mult quarters of
 * it, at most srtt_ns (RFC 8985 6.2), or the lateness D-SACKs showed if
 * that is longer. */
uint64_t sr_sack_sb_reo_wnd(const struct sr_sack_sb *sb, uint64_t srtt_ns);

/* ---- the requester (sack.c) ---- */
/* A SACK passed the completer's range checks and its cumulative part was
 * applied: marks its bitmap; if it showed something new, rearms the probe
 * timeout and asks for resends (SR_COMP_SACK); takes a D-SACK's report
 * (the reordering window, the probe floor). */
void sr_sack_rx(struct sr_qp *qp, const struct sr_pkt *pkt, struct sr_comp_next *n);
/* Resend the holes that count as lost (all: every hole below the highest
 * mark, for a probe); the send pointer stays where it is. */
void sr_sack_resend(struct sr_qp *qp, uint64_t now_ns, bool all);
/* The probe timeout passed: true if the scoreboard knows holes, which the
 * probe then resends instead of the last packet. */
bool sr_sack_probe_holes(struct sr_qp *qp);
/* The transport timer expired (a retry consumed): true when the holes
 * alone go again, the marks kept, for the first expiry since the last
 * cumulative progress; false for go-back-N (the marks are discarded). */
bool sr_sack_timeout_holes(struct sr_qp *qp);
/* A cumulative ACK (or a response) moved comp.psn: the resends it covers
 * are dated delivered (sr_sack_sb_seen). */
void sr_sack_acked(struct sr_qp *qp, uint64_t now_ns);
/* A hole counted lost waits out its reordering window (sr_sack_resend):
 * the probe timer fired for it. */
bool sr_sack_lost_pending(struct sr_qp *qp);
/* When the hole counted lost ends its reordering window; 0: none waits. */
uint64_t sr_sack_lost_deadline(const struct sr_qp *qp);
/* A probe of the last packet goes to a SACK peer: a D-SACK of it proves
 * the probe timeout too short (sr_rtt_probe_spurious). */
void sr_sack_probe_sent(struct sr_qp *qp);
/* A go-back-N rewind or timeout: the marks are discarded. */
/* An RNR NAK of psn (IBA 9.7.5.2.8), at the NAK and when its timer ends:
 * psn's mark cleared (it is a hole again); true when a peer that SACKs
 * still holds requests past it, whose holes alone then go again. */
bool sr_sack_rnr(struct sr_qp *qp, uint32_t psn);
void sr_sack_discard(struct sr_qp *qp);
void sr_sack_free(struct sr_qp *qp);

/* ---- the responder's D-SACK (dsack.c) ---- */
/* A request at psn arrived again after it was received (a duplicate, or a
 * copy of one kept): a SACK requester is told so with a D-SACK, which
 * also acknowledges cumulatively (true); false for any other requester,
 * which gets a standard ACK from the caller. */
bool sr_dsack_send(struct sr_qp *qp, uint32_t psn);

/* ---- the responder (ooo.c) ---- */
/* A request beyond the expected PSN: kept and SACKed when the peer agreed
 * and it fits (true), else the caller NAKs as standard (false). */
bool sr_ooo_store(struct sr_qp *qp, const struct sr_pkt *pkt, int decode_err);
/* After an in-order request: run the kept ones that now follow in order
 * through the responder, then acknowledge. */
void sr_ooo_drain(struct sr_qp *qp, const uint8_t *src_gid, uint64_t now_ns);
/* An acknowledgement is owed while requests are kept: it goes as a SACK. */
bool sr_ooo_sack_due(const struct sr_qp *qp);
void sr_ooo_send_sack(struct sr_qp *qp);
void sr_ooo_free(struct sr_qp *qp);
void sr_ooo_engine_fini(struct sr_engine *e);
/* A response to a requester that advertised SACKs carries the bit back
 * (docs/WIRE.md): true for pkt when this device takes part. */
bool sr_ooo_answers_sack(const struct sr_engine *e, const struct sr_pkt *pkt);

#endif

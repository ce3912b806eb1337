/* ack.h: the acknowledgement policy, in one place. It owns
 *   - the responder's coalescing state of one QP (struct sr_ack): an ACK
 *     held back so that it can leave with the QP's next packet;
 *   - the engine-wide hold delays in force (struct sr_ack_policy);
 *   - the requester's ACK request cadence (sr_ack_req_every);
 *   - and their constants.
 * Every decision takes explicit time and touches nothing but these
 * structs: the responder (resp.c) carries out what sr_ack_decide says, and
 * the tests drive it by hand (tests/unit/ack_test.c). Nothing here sends. */
#ifndef SR_ACK_H
#define SR_ACK_H

#include <stdbool.h>
#include <stdint.h>

enum {
    /* While nobody on this side is going to post a reply (a passive
     * target), ACKs are held at most this long: enough to coalesce a
     * stream's ACKs, short for a peer that waits for each completion. */
    SR_ACK_PASSIVE_DELAY_NS = 4000,
    /* A QP whose held ACKs leave with replies holds them this many times
     * the configured delay (at most a quarter of its transport timeout). */
    SR_ACK_REPLY_HOLD = 10,
    /* The requester asks for an ACK every this many packets of a WQE, */
    SR_ACK_EVERY = 32,
    /* or every this many to a peer reached by packet trains when the QP's
     * timeout is at least SR_ACK_LONG_TIMEOUT_NS. */
    SR_ACK_EVERY_TRAINS = 256,
};
/* IBA timeout 12 (16.8 ms) and up: long enough to cover SR_ACK_EVERY_TRAINS
 * packets and a held ACK before the requester's transport timer fires. */
#define SR_ACK_LONG_TIMEOUT_NS 16000000ull
/* The progress layer's inputs to the hold (sr_engine_hold_acks,
 * sr_engine_release_acks; applied by src/progress): an application that
 * polls and finds nothing is not about to reply to the ACKs held this
 * long, */
#define SR_ACK_IDLE_NS 4000ull
/* and one that called a verb this recently may post a reply that a held
 * ACK can ride with. */
#define SR_ACK_APP_REPLY_NS 10000000ull

/* The hold delays in force on an engine (sr_engine_hold_acks). */
struct sr_ack_policy {
    uint64_t cfg_delay_ns;   /* sr_engine_cfg.ack_delay_ns; 0: never hold */
    uint64_t delay_ns;       /* an ordinary QP's hold now */
    uint64_t reply_delay_ns; /* the hold of a QP whose ACKs ride with replies */
    bool held;               /* some QP may hold an ACK (cleared by SR_ACK_EV_IDLE sweeps) */
};

/* One QP's responder coalescing state. */
struct sr_ack {
    bool pending;   /* an ACK is held */
    bool rides;     /* the last held ACK left with a request: replies follow */
    bool end;       /* the hold began (or was restarted) at the end of a message */
    uint32_t psn;   /* the held ACK acknowledges up to this PSN, */
    uint32_t msn;   /* with this MSN */
    uint64_t since; /* when the hold began */
    uint64_t due;   /* when the held ACK leaves alone */
    /* The hold report (docs/WIRE.md): when the newest AckReq the held ACK
     * answers arrived, and, once an ACK leaves, how long after it that
     * was (0: it left at once). ecn.c puts it on the ACK and clears it. */
    uint64_t last_req_ns;
    uint64_t hold_ns;
};

/* What happens to the responder's acknowledgement state. */
enum sr_ack_event {
    /* A request with the AckReq bit executed (psn, msn, end: it was the
     * LAST or ONLY packet of its message). */
    SR_ACK_EV_ACKREQ,
    /* The QP's requester sends a request: a held ACK rides with it, and
     * the QP counts as one answered by replies. */
    SR_ACK_EV_REQUEST,
    /* The responder sends anything else (a response, a NAK, a duplicate's
     * ACK) or the QP stops: a held ACK goes first, so that what the peer
     * receives stays in PSN order. */
    SR_ACK_EV_RESPONSE,
    /* Time passes: a held ACK whose hold is over leaves alone. */
    SR_ACK_EV_TIMER,
    /* Nobody is going to reply soon (the application blocks or polls
     * idle): an ACK held since held_since or earlier leaves now. */
    SR_ACK_EV_IDLE,
    /* The QP entered Error: it sends nothing more, a held ACK is dropped. */
    SR_ACK_EV_DROP,
};

enum sr_ack_verdict {
    SR_ACK_NONE,     /* nothing to send now (and nothing held, or still held) */
    SR_ACK_SEND_NOW, /* send an ACK for (psn, msn) now, alone */
    SR_ACK_RIDE,     /* send it now, just ahead of the packet that prompted it */
    SR_ACK_HOLD,     /* held until `until` (or a packet it can ride with) */
};

struct sr_ack_in {
    enum sr_ack_event ev;
    uint64_t now_ns;
    uint64_t timeout_ns; /* the QP's transport timeout (sr_timeout_ns); UINT64_MAX: none */
    uint32_t psn, msn;   /* SR_ACK_EV_ACKREQ */
    bool end;            /* SR_ACK_EV_ACKREQ */
    uint64_t held_since; /* SR_ACK_EV_IDLE; UINT64_MAX: every held ACK */
};

struct sr_ack_out {
    enum sr_ack_verdict verdict;
    uint32_t psn, msn; /* SR_ACK_SEND_NOW, SR_ACK_RIDE: the ACK to send */
    uint64_t until;    /* SR_ACK_HOLD: when it falls due */
};

/* The hold delays for an engine configured with cfg_delay_ns; hold false:
 * nobody on this side is going to post a reply. */
void sr_ack_policy_set(struct sr_ack_policy *p, uint64_t cfg_delay_ns, bool hold);

/* The one decision: given event in, updates a (and p->held) and says what
 * to send now, if anything. */
enum sr_ack_verdict sr_ack_decide(struct sr_ack *a, struct sr_ack_policy *p,
                                  const struct sr_ack_in *in, struct sr_ack_out *out);

static inline bool sr_ack_held(const struct sr_ack *a)
{
    return a->pending;
}

/* When the held ACK falls due; UINT64_MAX if none is held. */
static inline uint64_t sr_ack_deadline(const struct sr_ack *a)
{
    return a->pending ? a->due : UINT64_MAX;
}

/* The requester's cadence: ask for an ACK every that many packets of a
 * WQE (and on its last). trains: the WQE goes to a peer reached by packet
 * trains; timeout_ns: the QP's transport timeout; window_pkts: the
 * requester's window, of which at most half goes unacknowledged. */
uint16_t sr_ack_req_every(bool trains, uint64_t timeout_ns, uint32_t window_pkts);

/* The longest a responder configured as p is may hold an ACK for a QP
 * whose transport timeout is timeout_ns: what a requester waits for beyond
 * the round trip before it probes (peers usually share the config). */
uint64_t sr_ack_max_hold(const struct sr_ack_policy *p, uint64_t timeout_ns);

#endif

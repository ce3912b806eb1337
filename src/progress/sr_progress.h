/* sr_progress.h: the progress policy. What a device's NIC thread does next
 * (stay off the socket, let an application thread in, run a pass with or
 * without holding ACKs, spin, nap, block, and until when) and what an
 * application thread's CQ poll means for it, as functions of explicit state
 * and time. No thread, socket or clock here: nic.c gathers the state, asks,
 * and carries the decision out; tests/unit/progress_test.c drives it by hand.
 *
 * The NIC thread's cycle is a small state machine (enum sr_progress_phase):
 *   TOP     -> HANDOFF (ask again later) | YIELD | LOCK
 *   YIELD   -> YIELD | LOCK
 *   LOCKED  -> PASS            (the caller now holds the device lock)
 *   PASSED  -> SPIN | NAP | BLOCK, back to TOP
 * Each call of sr_progress_next takes one step. */
#ifndef SR_PROGRESS_H
#define SR_PROGRESS_H

#include <stdbool.h>
#include <stdint.h>

/* An application thread that waits for the lock may be about to post the
 * reply a held ACK waits for: the NIC thread lets it in first, for up to
 * this long. */
#define SR_PROGRESS_APP_FIRST_NS 20000ull
/* The hand-off in force never shrinks below this (nor below handoff_ns). */
#define SR_PROGRESS_HANDOFF_MIN_NS 50000ull
/* ... and never grows past this many times handoff_ns, which also bounds
 * the time the thread waits for an inline pass. */
#define SR_PROGRESS_HANDOFF_GROW 4
/* The hand-off holds while the gaps between polls average this or less
 * (each gap counted up to SR_PROGRESS_DENSE_GAP_CAP_NS). */
#define SR_PROGRESS_DENSE_GAP_NS     50000ull
#define SR_PROGRESS_DENSE_GAP_CAP_NS (4 * SR_PROGRESS_DENSE_GAP_NS)
/* A pass that received this much is a bulk sender's burst. */
#define SR_PROGRESS_BULK_BYTES 262144u
/* How long a nap after such a burst lasts. */
#define SR_PROGRESS_BULK_NAP_NS 10000ull
/* The slack window: the thread has slack while it spent at least
 * SR_PROGRESS_SLACK_PCT % of the last window finding nothing. */
#define SR_PROGRESS_SLACK_WINDOW_NS 1000000ull
#define SR_PROGRESS_SLACK_PCT       15u
/* A verbs call this recent keeps the thread from spinning. */
#define SR_PROGRESS_APP_IDLE_NS 1000000ull

struct sr_progress_cfg {
    uint64_t spin_ns;    /* poll this long after traffic before blocking; 0: never spin */
    uint64_t handoff_ns; /* the hand-off after an application's poll; 0: none */
    /* The ACK policy's bounds (the engine's): ACKs are held for a reply
     * while an application called a verb within app_reply_ns; a poll that
     * found nothing releases those held idle_ack_ns or longer. */
    uint64_t app_reply_ns;
    uint64_t idle_ack_ns;
};

/* The application side as the NIC thread reads it. */
struct sr_progress_app {
    uint64_t last_poll_ns; /* its last CQ poll; 0: it handed the socket back */
    uint64_t last_pass_ns; /* its last inline pass */
    uint64_t poll_gap_ns;  /* moving average of the gaps between its polls */
    uint64_t calls;        /* verbs calls so far: only changes matter */
    bool waiting;          /* a thread waits for the device lock */
    bool asleep;           /* a thread is about to sleep and has not polled since */
};

/* What the NIC thread's pass did (phase PASSED). */
struct sr_progress_pass {
    int pkts;             /* packets received */
    uint64_t udp_bytes;   /* bytes received over UDP */
    uint64_t shm_bytes;   /* bytes received through shared memory */
    uint64_t deadline_ns; /* earliest timer, UINT64_MAX: none */
    bool shm_backlog;     /* packets wait for room in a peer's ring */
};

struct sr_progress_in {
    struct sr_progress_app app;
    struct sr_progress_pass pass;
};

enum sr_progress_action {
    SR_PROGRESS_HANDOFF, /* stay off the socket, woken only by the eventfd, until until_ns */
    SR_PROGRESS_YIELD,   /* give the CPU to the thread waiting for the lock, ask again */
    SR_PROGRESS_LOCK,    /* take the device lock, ask again */
    SR_PROGRESS_PASS,    /* run a pass (ACKs held for a reply: hold_acks), ask again */
    SR_PROGRESS_SPIN,    /* release the lock, start over at once */
    SR_PROGRESS_NAP,     /* release the lock, sleep until until_ns (not listening) */
    SR_PROGRESS_BLOCK,   /* release the lock, wait for any input until until_ns */
};

struct sr_progress_decision {
    enum sr_progress_action action;
    uint64_t until_ns; /* HANDOFF, NAP, BLOCK; UINT64_MAX: no bound */
    bool hold_acks;    /* PASS */
};

enum sr_progress_phase {
    SR_PROGRESS_PH_TOP,
    SR_PROGRESS_PH_YIELD,
    SR_PROGRESS_PH_LOCKED,
    SR_PROGRESS_PH_PASSED,
};

/* The policy's memory: one per NIC thread, zeroed by sr_progress_init. */
struct sr_progress {
    struct sr_progress_cfg cfg;
    enum sr_progress_phase phase;
    uint64_t handoff_cur_ns; /* the hand-off in force */
    bool napped;             /* the last look at the hand-off made the thread nap */
    bool expired;            /* this cycle: a hand-off ran out with no poll nor hand-back */
    uint64_t yield_since_ns;
    uint64_t seen_calls, app_seen_ns; /* when the verbs-call count last moved */
    uint64_t pass_start_ns, last_busy_ns;
    uint64_t win_start_ns, win_busy_ns, win_idle_ns; /* the slack window */
    bool slack;
    bool nap_pending; /* the last cycle ended in a nap, from nap_from_ns */
    bool nap_idle;    /* ... which counts as idle time */
    uint64_t nap_from_ns;
};

void sr_progress_init(struct sr_progress *p, const struct sr_progress_cfg *cfg);
/* One step of the NIC thread's cycle at now_ns (see the top of the file):
 * in->app always, in->pass in phase PASSED. */
struct sr_progress_decision sr_progress_next(struct sr_progress *p, const struct sr_progress_in *in,
                                             uint64_t now_ns);
/* Until when the hand-off keeps the NIC thread off the socket; 0: it does
 * not (the thread runs the NIC itself). */
uint64_t sr_progress_handoff_until(const struct sr_progress *p, const struct sr_progress_app *app,
                                   uint64_t now_ns);
const char *sr_progress_action_name(enum sr_progress_action a);

/* Whether an application thread's work (a post, an inline pass) must wake
 * the NIC thread that sleeps towards sleep_until (0: it is awake): the
 * engine's next deadline, or the UDP driver's next held datagram (an
 * injected delay or reordering that the inline pass received), comes
 * earlier. UINT64_MAX: none. */
bool sr_progress_kick(uint64_t sleep_until, uint64_t engine_deadline_ns, uint64_t held_deadline_ns);

/* An application thread's CQ poll, with the device lock held. */
struct sr_progress_poll {
    bool wanted; /* it asked for completions (num_entries > 0) */
    bool ran;    /* it found none and ran the NIC inline */
    bool found;  /* it took completions in the end */
    bool armed;  /* it found none on an armed CQ */
};

struct sr_progress_poll_decision {
    bool release; /* held ACKs leave: those held since held_since or earlier */
    uint64_t held_since;
    bool hands_back; /* it is about to block: the NIC thread takes the socket back */
    bool counts;     /* a poll the hand-off counts (sr_progress_poll_gap) */
};

struct sr_progress_poll_decision sr_progress_polled(const struct sr_progress_poll *poll,
                                                    uint64_t idle_ack_ns, uint64_t now_ns);
/* The moving average of the gaps between polls after one at now_ns. */
uint64_t sr_progress_poll_gap(uint64_t avg_ns, uint64_t prev_poll_ns, uint64_t now_ns);
/* After an inline pass that received rx_bytes over UDP while this side sent
 * tx_bytes since the last one: the application thread should nap
 * (SR_PROGRESS_BULK_NAP_NS, without the lock). */
bool sr_progress_app_bulk(uint64_t rx_bytes, uint64_t tx_bytes);

#endif

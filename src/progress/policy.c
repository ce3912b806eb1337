/* policy.c: the progress policy (sr_progress.h). Pure: state and time in,
 * a decision out. */
#include "sr_progress.h"
#include "sr_util.h"

#include <string.h>

void sr_progress_init(struct sr_progress *p, const struct sr_progress_cfg *cfg)
{
    memset(p, 0, sizeof(*p));
    p->cfg = *cfg;
    p->handoff_cur_ns = cfg->handoff_ns;
}

const char *sr_progress_action_name(enum sr_progress_action a)
{
    static const char *const names[] = {
        [SR_PROGRESS_HANDOFF] = "handoff", [SR_PROGRESS_YIELD] = "yield",
        [SR_PROGRESS_LOCK] = "lock",       [SR_PROGRESS_PASS] = "pass",
        [SR_PROGRESS_SPIN] = "spin",       [SR_PROGRESS_NAP] = "nap",
        [SR_PROGRESS_BLOCK] = "block",
    };
    return (unsigned)a < sizeof(names) / sizeof(names[0]) ? names[a] : "?";
}

/* A datagram held back by fault injection (SOFTRDMA_FAULT) is a deadline
 * like a timer: the NIC thread that blocked before an inline pass held it
 * would otherwise deliver it only when the next datagram wakes it, and if
 * the application stops polling (it waits for this very packet on a
 * completion channel, or exits) the peer's retransmission is the only
 * such datagram. */
bool sr_progress_kick(uint64_t sleep_until, uint64_t engine_deadline_ns, uint64_t held_deadline_ns)
{
    return sleep_until && SR_MIN(engine_deadline_ns, held_deadline_ns) < sleep_until;
}

/* The hand-off. While an application thread polls a CQ in a loop (each
 * empty poll runs the NIC inline), it picks packets up within a poll's
 * gap: the NIC thread stays off the socket for the hand-off after each
 * poll, with no wake-up per packet and no fight for the lock. It takes a
 * pass itself when no inline pass ran for HANDOFF_GROW x handoff_ns, so
 * that a thread polling a CQ that never runs dry cannot starve the rest.
 * An application that polls only now and then (a runtime's progress call
 * once a millisecond from a barrier, an async thread) would leave every
 * packet in the socket until its next poll, and a passive READ target
 * would answer one READ per poll: so the hand-off holds only while the
 * gaps between polls are dense (sr_progress_poll_gap). */
uint64_t sr_progress_handoff_until(const struct sr_progress *p, const struct sr_progress_app *app,
                                   uint64_t now_ns)
{
    uint64_t bound = SR_PROGRESS_HANDOFF_GROW * p->cfg.handoff_ns;
    uint64_t poll = app->last_poll_ns, pass = app->last_pass_ns;
    /* unsigned: a poll or pass stamped after now_ns counts as long ago */
    if (!poll || now_ns - poll >= p->handoff_cur_ns || now_ns - pass >= bound)
        return 0;
    if (app->poll_gap_ns > SR_PROGRESS_DENSE_GAP_NS)
        return 0;
    return SR_MIN(poll + p->handoff_cur_ns, pass + bound);
}

/* Each gap counts up to DENSE_GAP_CAP_NS, with weight 1/8: a loop that
 * polls and now and then waits on memory (a WRITE ping-pong) stays dense;
 * one that waits that long every other poll (polls two CQs, then sleeps)
 * does not. */
uint64_t sr_progress_poll_gap(uint64_t avg_ns, uint64_t prev_poll_ns, uint64_t now_ns)
{
    uint64_t gap = now_ns > prev_poll_ns ? now_ns - prev_poll_ns : 0;
    return (7 * avg_ns + SR_MIN(gap, SR_PROGRESS_DENSE_GAP_CAP_NS)) / 8;
}

static struct sr_progress_decision act(enum sr_progress_action a, uint64_t until_ns)
{
    return (struct sr_progress_decision){.action = a, .until_ns = until_ns};
}

/* The hand-off in force moves between HANDOFF_MIN_NS and HANDOFF_GROW x
 * handoff_ns. Each nap that ends with the application still polling
 * doubles it: every end of a nap is a wake-up, which on a busy machine
 * preempts the polling thread. */
static void handoff_grow(struct sr_progress *p)
{
    p->handoff_cur_ns = SR_MIN(SR_PROGRESS_HANDOFF_GROW * p->cfg.handoff_ns, 2 * p->handoff_cur_ns);
}

/* Each time the hand-off ran out with packets waiting (the application
 * polled its CQ, then waited elsewhere: on memory for an RDMA WRITE), it
 * halves, to handoff_ns at most: those packets waited for nobody. */
static void handoff_shrink(struct sr_progress *p)
{
    uint64_t h = p->cfg.handoff_ns;
    p->handoff_cur_ns =
        SR_MAX(SR_MIN(SR_PROGRESS_HANDOFF_MIN_NS, h), SR_MIN(h, p->handoff_cur_ns) / 2);
}

static struct sr_progress_decision step_top(struct sr_progress *p,
                                            const struct sr_progress_app *app, uint64_t now_ns)
{
    if (p->nap_pending && p->nap_idle)
        p->win_idle_ns += now_ns - p->nap_from_ns;
    p->nap_pending = false;
    p->expired = false;
    if (p->cfg.handoff_ns) {
        if (sr_progress_handoff_until(p, app, now_ns)) {
            if (p->napped) /* a nap ended and the application still polls */
                handoff_grow(p);
            p->napped = true;
            return act(SR_PROGRESS_HANDOFF, sr_progress_handoff_until(p, app, now_ns));
        }
        p->expired = p->napped && app->last_poll_ns;
        p->napped = false;
    }
    if (app->waiting) {
        p->phase = SR_PROGRESS_PH_YIELD;
        p->yield_since_ns = now_ns;
        return act(SR_PROGRESS_YIELD, 0);
    }
    p->phase = SR_PROGRESS_PH_LOCKED;
    return act(SR_PROGRESS_LOCK, 0);
}

/* The application first: a thread woken by the last unlock may post the
 * reply a held ACK waits for. Without the wait the NIC thread would take
 * the lock back, fire the hold and send the ACK alone. */
static struct sr_progress_decision step_yield(struct sr_progress *p,
                                              const struct sr_progress_app *app, uint64_t now_ns)
{
    if (app->waiting && now_ns - p->yield_since_ns < SR_PROGRESS_APP_FIRST_NS)
        return act(SR_PROGRESS_YIELD, 0);
    p->phase = SR_PROGRESS_PH_LOCKED;
    return act(SR_PROGRESS_LOCK, 0);
}

/* ACKs are held for a reply only while an application here calls verbs and
 * is not asleep waiting for a completion: a passive target's peers get
 * theirs at once, and so do a sleeper's, which may be waiting for the peer
 * that waits for this ACK. */
static struct sr_progress_decision step_locked(struct sr_progress *p,
                                               const struct sr_progress_app *app, uint64_t now_ns)
{
    if (app->calls != p->seen_calls) {
        p->seen_calls = app->calls;
        p->app_seen_ns = now_ns;
    }
    struct sr_progress_decision d = act(SR_PROGRESS_PASS, 0);
    d.hold_acks = p->app_seen_ns && now_ns - p->app_seen_ns < p->cfg.app_reply_ns && !app->asleep;
    p->pass_start_ns = now_ns;
    p->phase = SR_PROGRESS_PH_PASSED;
    return d;
}

/* After a pass: spin, nap or block.
 * Spin: after traffic the thread polls spin_ns before blocking, but only
 * while no application thread called a verb for APP_IDLE_NS: one that does
 * polls inline itself, and on few cores a spinning NIC thread takes its
 * CPU; a passive target or a thread asleep on a completion channel gets its
 * packets without a wake-up each.
 * Bulk nap: a passive NIC thread spinning between packets takes CPU from
 * the sending process on the same machine even when it has time to spare.
 * While the thread has slack, a pass that brought in BULK_BYTES or more
 * (the sender far ahead: bulk with a deep window) is followed by a nap
 * instead of more polls. Over UDP it naps after such a pass even without
 * slack: there the sender does the larger share of the work (the kernel's
 * copy and the ICRC against a copy and the ICRC), so a deeper socket costs
 * the receiver less than its spinning costs the sender. Through shared
 * memory each side copies once and only the slack rule applies. Held ACKs
 * stay held through the nap (their timers bound them): sent before it, a
 * ping-pong's ACK would leave ahead of the reply it was held for.
 * Shared-memory backlog: never block with packets unsent; after a pass
 * that found nothing, nap to give the receiver behind the CPU. */
static struct sr_progress_decision step_passed(struct sr_progress *p,
                                               const struct sr_progress_pass *pass, uint64_t now_ns)
{
    p->phase = SR_PROGRESS_PH_TOP;
    if (p->expired && pass->pkts > 0) /* they waited for the hand-off to run out */
        handoff_shrink(p);
    if (pass->pkts > 0) {
        p->last_busy_ns = now_ns;
        p->win_busy_ns += now_ns - p->pass_start_ns;
    } else {
        p->win_idle_ns += now_ns - p->pass_start_ns;
    }
    if (now_ns - p->win_start_ns >= SR_PROGRESS_SLACK_WINDOW_NS) {
        p->slack =
            p->win_idle_ns * 100 >= SR_PROGRESS_SLACK_PCT * (p->win_idle_ns + p->win_busy_ns);
        p->win_start_ns = now_ns;
        p->win_busy_ns = p->win_idle_ns = 0;
    }
    bool spin = now_ns - p->last_busy_ns < p->cfg.spin_ns &&
                now_ns - p->app_seen_ns > SR_PROGRESS_APP_IDLE_NS;
    bool slack_nap =
        spin && p->slack && pass->udp_bytes + pass->shm_bytes >= SR_PROGRESS_BULK_BYTES;
    bool udp_nap = !slack_nap && spin && pass->udp_bytes >= SR_PROGRESS_BULK_BYTES;
    bool nap = slack_nap || udp_nap;
    if (pass->shm_backlog) {
        spin = true;
        nap |= pass->pkts == 0;
    }
    if (nap) {
        /* a UDP nap is not idle time: it would make slack of the UDP naps
         * themselves, and shared-memory passes would nap too */
        p->nap_pending = true;
        p->nap_idle = !udp_nap;
        p->nap_from_ns = now_ns;
        return act(SR_PROGRESS_NAP, now_ns + SR_PROGRESS_BULK_NAP_NS);
    }
    if (spin)
        return act(SR_PROGRESS_SPIN, 0);
    return act(SR_PROGRESS_BLOCK, pass->deadline_ns);
}

struct sr_progress_decision sr_progress_next(struct sr_progress *p, const struct sr_progress_in *in,
                                             uint64_t now_ns)
{
    switch (p->phase) {
    case SR_PROGRESS_PH_TOP:
        return step_top(p, &in->app, now_ns);
    case SR_PROGRESS_PH_YIELD:
        return step_yield(p, &in->app, now_ns);
    case SR_PROGRESS_PH_LOCKED:
        return step_locked(p, &in->app, now_ns);
    case SR_PROGRESS_PH_PASSED:
        break;
    }
    return step_passed(p, &in->pass, now_ns);
}

/* A poll that found nothing on an armed CQ is the usual last look before
 * ibv_get_cq_event: the thread is about to block, so every held ACK
 * leaves (its peers may be waiting for them to send what would wake it)
 * and the NIC thread listens. Any other poll is followed by more; one that
 * ran the NIC and found nothing releases the ACKs held idle_ack_ns or
 * longer: a thread about to reply would have. */
struct sr_progress_poll_decision sr_progress_polled(const struct sr_progress_poll *poll,
                                                    uint64_t idle_ack_ns, uint64_t now_ns)
{
    struct sr_progress_poll_decision d = {0};
    if (!poll->found && poll->armed) {
        d.release = true;
        d.held_since = UINT64_MAX;
        d.hands_back = true;
    } else if (poll->wanted) {
        if (poll->ran && !poll->found && now_ns > idle_ack_ns) {
            d.release = true;
            d.held_since = now_ns - idle_ack_ns;
        }
        d.counts = true;
    }
    return d;
}

/* A receiver of bulk that sends little itself (a READ requester, a SEND
 * target) naps: on few CPUs the sending process needs the time more than
 * this one needs another poll. One that sends as much (a collective) does
 * not. */
bool sr_progress_app_bulk(uint64_t rx_bytes, uint64_t tx_bytes)
{
    return rx_bytes >= SR_PROGRESS_BULK_BYTES && tx_bytes < rx_bytes / 8;
}

/* progress_test.c: the progress policy (src/progress/policy.c) with
 * explicit state and time: no thread, no clock. One test per rule, each
 * feeding the NIC thread's cycle by hand and asserting its decision. */
#include "sr_progress.h"
#include "sr_test.h"

#define T0      1000000000ull /* an arbitrary start, far from 0 */
#define US      1000ull
#define MS      1000000ull
#define HANDOFF (1 * MS)
#define SPIN    (50 * US)

static const struct sr_progress_cfg base_cfg = {
    .spin_ns = SPIN,
    .handoff_ns = 0,
    .app_reply_ns = 10 * MS,
    .idle_ack_ns = 4 * US,
};

static struct sr_progress fresh(uint64_t spin_ns, uint64_t handoff_ns)
{
    struct sr_progress p;
    struct sr_progress_cfg c = base_cfg;
    c.spin_ns = spin_ns;
    c.handoff_ns = handoff_ns;
    sr_progress_init(&p, &c);
    return p;
}

/* d is evaluated once: it is often a step of the cycle */
#define CHECK_ACTION(d, a)                                                                         \
    do {                                                                                           \
        enum sr_progress_action got_ = (d).action, want_ = (a);                                    \
        if (got_ != want_)                                                                         \
            fprintf(stderr, "  got %s, want %s\n", sr_progress_action_name(got_),                  \
                    sr_progress_action_name(want_));                                               \
        SR_CHECK_EQ(got_, want_);                                                                  \
    } while (0)

/* One whole cycle with no hand-off and no waiter: TOP -> LOCK -> PASS at
 * t, then what follows a pass that took pass_ns. */
static struct sr_progress_decision cycle(struct sr_progress *p, const struct sr_progress_app *app,
                                         const struct sr_progress_pass *pass, uint64_t t,
                                         uint64_t pass_ns)
{
    struct sr_progress_in in = {.app = *app, .pass = *pass};
    CHECK_ACTION(sr_progress_next(p, &in, t), SR_PROGRESS_LOCK);
    CHECK_ACTION(sr_progress_next(p, &in, t), SR_PROGRESS_PASS);
    return sr_progress_next(p, &in, t + pass_ns);
}

static const struct sr_progress_app no_app = {0};
static const struct sr_progress_pass empty = {.deadline_ns = UINT64_MAX};
static const struct sr_progress_pass traffic = {.pkts = 4, .deadline_ns = UINT64_MAX};

/* After an application's poll the NIC thread stays off the socket until
 * the hand-off runs out; a sparse poller, one that handed back, or one
 * whose inline passes stopped gets a listening thread. */
static void test_handoff_after_poll(void)
{
    struct sr_progress p = fresh(SPIN, HANDOFF);
    uint64_t poll = T0 - 10 * US;
    struct sr_progress_in in = {
        .app = {.last_poll_ns = poll, .last_pass_ns = poll, .poll_gap_ns = 10 * US}};
    struct sr_progress_decision d = sr_progress_next(&p, &in, T0);
    CHECK_ACTION(d, SR_PROGRESS_HANDOFF);
    SR_CHECK_EQ(d.until_ns, poll + HANDOFF);
    /* a nap that ends with the application still polling doubles it */
    d = sr_progress_next(&p, &in, poll + HANDOFF / 2);
    CHECK_ACTION(d, SR_PROGRESS_HANDOFF);
    SR_CHECK_EQ(d.until_ns, poll + 2 * HANDOFF);
    SR_CHECK_EQ(sr_progress_handoff_until(&p, &in.app, T0), poll + 2 * HANDOFF);

    /* bounded by the last inline pass: none for 4 x handoff_ns */
    struct sr_progress_app a = in.app;
    a.last_pass_ns = T0 - 4 * HANDOFF + 100 * US;
    SR_CHECK_EQ(sr_progress_handoff_until(&p, &a, T0), T0 + 100 * US);
    a.last_pass_ns = T0 - 4 * HANDOFF;
    SR_CHECK_EQ(sr_progress_handoff_until(&p, &a, T0), 0);
    /* polls too far apart on average to pick packets up in time */
    a = in.app;
    a.poll_gap_ns = SR_PROGRESS_DENSE_GAP_NS + 1;
    SR_CHECK_EQ(sr_progress_handoff_until(&p, &a, T0), 0);
    a.poll_gap_ns = SR_PROGRESS_DENSE_GAP_NS;
    SR_CHECK(sr_progress_handoff_until(&p, &a, T0) != 0);
    /* handed back (about to block) */
    a = in.app;
    a.last_poll_ns = 0;
    SR_CHECK_EQ(sr_progress_handoff_until(&p, &a, T0), 0);

    /* It ran out with the application neither polling nor handing back:
     * the thread runs the NIC, and packets found then halve it. */
    uint64_t t = poll + 2 * HANDOFF;
    CHECK_ACTION(sr_progress_next(&p, &in, t), SR_PROGRESS_LOCK);
    CHECK_ACTION(sr_progress_next(&p, &in, t), SR_PROGRESS_PASS);
    in.pass = traffic;
    sr_progress_next(&p, &in, t + US);
    a = in.app;
    a.last_poll_ns = a.last_pass_ns = t + 2 * US;
    SR_CHECK_EQ(sr_progress_handoff_until(&p, &a, t + 3 * US), t + 2 * US + HANDOFF / 2);

    /* no hand-off configured: the thread always listens */
    struct sr_progress q = fresh(SPIN, 0);
    in.pass = empty;
    CHECK_ACTION(sr_progress_next(&q, &in, T0), SR_PROGRESS_LOCK);
}

/* The gap average: weight 1/8, each gap capped. */
static void test_poll_gap(void)
{
    SR_CHECK_EQ(sr_progress_poll_gap(0, T0, T0 + 8 * US), 1 * US);
    SR_CHECK_EQ(sr_progress_poll_gap(8 * US, T0, T0), 7 * US);
    SR_CHECK_EQ(sr_progress_poll_gap(0, T0, T0 + 1000 * MS), SR_PROGRESS_DENSE_GAP_CAP_NS / 8);
    /* a poll stamped before the previous one is no gap */
    SR_CHECK_EQ(sr_progress_poll_gap(0, T0, T0 - US), 0);
}

/* An application thread waiting for the lock goes first, for up to
 * APP_FIRST_NS. */
static void test_app_first_yield(void)
{
    struct sr_progress p = fresh(SPIN, 0);
    struct sr_progress_in in = {.app = {.waiting = true}};
    CHECK_ACTION(sr_progress_next(&p, &in, T0), SR_PROGRESS_YIELD);
    CHECK_ACTION(sr_progress_next(&p, &in, T0 + SR_PROGRESS_APP_FIRST_NS - 1), SR_PROGRESS_YIELD);
    CHECK_ACTION(sr_progress_next(&p, &in, T0 + SR_PROGRESS_APP_FIRST_NS), SR_PROGRESS_LOCK);
    CHECK_ACTION(sr_progress_next(&p, &in, T0 + SR_PROGRESS_APP_FIRST_NS), SR_PROGRESS_PASS);

    /* it got the lock: the thread stops yielding at once */
    struct sr_progress q = fresh(SPIN, 0);
    CHECK_ACTION(sr_progress_next(&q, &in, T0), SR_PROGRESS_YIELD);
    in.app.waiting = false;
    CHECK_ACTION(sr_progress_next(&q, &in, T0 + US), SR_PROGRESS_LOCK);
}

/* After traffic the thread spins spin_ns, then blocks; it never spins
 * while an application calls verbs. */
static void test_spin_then_block(void)
{
    struct sr_progress p = fresh(SPIN, 0);
    CHECK_ACTION(cycle(&p, &no_app, &traffic, T0, US), SR_PROGRESS_SPIN);
    CHECK_ACTION(cycle(&p, &no_app, &empty, T0 + 20 * US, US), SR_PROGRESS_SPIN);
    CHECK_ACTION(cycle(&p, &no_app, &empty, T0 + SPIN, US), SR_PROGRESS_BLOCK);

    /* an application called a verb within APP_IDLE_NS */
    struct sr_progress_app app = {.calls = 1};
    struct sr_progress q = fresh(SPIN, 0);
    CHECK_ACTION(cycle(&q, &app, &traffic, T0, US), SR_PROGRESS_BLOCK);
    CHECK_ACTION(cycle(&q, &app, &traffic, T0 + SR_PROGRESS_APP_IDLE_NS, US), SR_PROGRESS_SPIN);

    /* spin_ns 0: never */
    struct sr_progress r = fresh(0, 0);
    CHECK_ACTION(cycle(&r, &no_app, &traffic, T0, US), SR_PROGRESS_BLOCK);
}

/* A pass that received a bulk burst over UDP is followed by a nap, slack
 * or not; the same burst through shared memory only with slack. */
static void test_bulk_nap(void)
{
    struct sr_progress p = fresh(SPIN, 0);
    /* a first, busy window: no slack */
    CHECK_ACTION(cycle(&p, &no_app, &traffic, T0, 10 * US), SR_PROGRESS_SPIN);
    struct sr_progress_pass udp = traffic, shm = traffic;
    udp.udp_bytes = SR_PROGRESS_BULK_BYTES;
    shm.shm_bytes = SR_PROGRESS_BULK_BYTES;
    uint64_t t = T0 + 20 * US;
    struct sr_progress_decision d = cycle(&p, &no_app, &udp, t, US);
    CHECK_ACTION(d, SR_PROGRESS_NAP);
    SR_CHECK_EQ(d.until_ns, t + US + SR_PROGRESS_BULK_NAP_NS);
    CHECK_ACTION(cycle(&p, &no_app, &shm, t + 20 * US, US), SR_PROGRESS_SPIN);
    /* one byte short: no burst */
    udp.udp_bytes--;
    CHECK_ACTION(cycle(&p, &no_app, &udp, t + 40 * US, US), SR_PROGRESS_SPIN);
    /* not while the thread would not spin (an application calls verbs) */
    udp.udp_bytes++;
    struct sr_progress_app app = {.calls = 1};
    CHECK_ACTION(cycle(&p, &app, &udp, t + 60 * US, US), SR_PROGRESS_BLOCK);
}

/* Slack: at least SLACK_PCT % of the last window spent finding nothing
 * lets a shared-memory burst nap; less does not. */
static void test_slack_window(void)
{
    struct sr_progress_pass shm = traffic;
    shm.shm_bytes = SR_PROGRESS_BULK_BYTES;
    for (int idle_pct = 10; idle_pct <= 20; idle_pct += 10) {
        struct sr_progress p = fresh(SPIN, 0);
        /* the first pass closes the initial window, busy */
        uint64_t t = T0;
        cycle(&p, &no_app, &traffic, t, US);
        uint64_t win = t + US;
        /* the next window: idle_pct % idle, the rest busy, in 10 us passes */
        uint64_t idle = SR_PROGRESS_SLACK_WINDOW_NS * (uint64_t)idle_pct / 100;
        for (t = win; t < win + SR_PROGRESS_SLACK_WINDOW_NS; t += 10 * US)
            cycle(&p, &no_app, t - win < idle ? &empty : &traffic, t, 10 * US);
        struct sr_progress_decision d = cycle(&p, &no_app, &shm, t, US);
        sr_test_ctx = idle_pct >= (int)SR_PROGRESS_SLACK_PCT ? "with slack" : "without slack";
        CHECK_ACTION(d,
                     idle_pct >= (int)SR_PROGRESS_SLACK_PCT ? SR_PROGRESS_NAP : SR_PROGRESS_SPIN);
    }
    sr_test_ctx = "test_slack_window";
}

/* Time asleep in a slack nap counts as idle, so a thread that has slack
 * keeps it while it naps; time in a UDP bulk nap does not, so those naps
 * make no slack of their own. */
static void test_nap_time_in_window(void)
{
    struct sr_progress_pass udp = traffic, shm = traffic;
    udp.udp_bytes = SR_PROGRESS_BULK_BYTES;
    shm.shm_bytes = SR_PROGRESS_BULK_BYTES;
    struct sr_progress_decision d;

    /* a window of nothing but UDP bursts and their naps: no slack */
    struct sr_progress p = fresh(SPIN, 0);
    cycle(&p, &no_app, &traffic, T0, US);
    uint64_t t = T0 + US, end = t + SR_PROGRESS_SLACK_WINDOW_NS;
    for (; t <= end; t = d.until_ns) {
        d = cycle(&p, &no_app, &udp, t, US);
        CHECK_ACTION(d, SR_PROGRESS_NAP);
    }
    CHECK_ACTION(cycle(&p, &no_app, &shm, t, US), SR_PROGRESS_SPIN);

    /* slack from an idle window, then a window of shared-memory bursts
     * and their naps: the slack stays */
    struct sr_progress q = fresh(SPIN, 0);
    cycle(&q, &no_app, &empty, T0, US);
    t = T0 + US;
    end = t + SR_PROGRESS_SLACK_WINDOW_NS;
    for (; t <= end; t = d.until_ns) {
        d = cycle(&q, &no_app, &shm, t, US);
        CHECK_ACTION(d, SR_PROGRESS_NAP);
    }
    CHECK_ACTION(cycle(&q, &no_app, &shm, t, US), SR_PROGRESS_NAP);
}

/* Packets waiting for room in a peer's ring: never block, even with
 * spinning off; nap after a pass that found nothing. */
static void test_shm_backlog(void)
{
    struct sr_progress p = fresh(0, 0);
    struct sr_progress_pass busy = traffic, idle = empty;
    busy.shm_backlog = idle.shm_backlog = true;
    CHECK_ACTION(cycle(&p, &no_app, &busy, T0, US), SR_PROGRESS_SPIN);
    struct sr_progress_decision d = cycle(&p, &no_app, &idle, T0 + 10 * US, US);
    CHECK_ACTION(d, SR_PROGRESS_NAP);
    SR_CHECK_EQ(d.until_ns, T0 + 11 * US + SR_PROGRESS_BULK_NAP_NS);
    idle.shm_backlog = false;
    CHECK_ACTION(cycle(&p, &no_app, &idle, T0 + 30 * US, US), SR_PROGRESS_BLOCK);
}

/* Nothing to do: block until the next deadline, or with no bound. */
static void test_idle_block(void)
{
    struct sr_progress p = fresh(SPIN, HANDOFF);
    struct sr_progress_pass pass = empty;
    struct sr_progress_decision d = cycle(&p, &no_app, &pass, T0, US);
    CHECK_ACTION(d, SR_PROGRESS_BLOCK);
    SR_CHECK_EQ(d.until_ns, UINT64_MAX);
    pass.deadline_ns = T0 + 5 * MS;
    d = cycle(&p, &no_app, &pass, T0 + 10 * US, US);
    CHECK_ACTION(d, SR_PROGRESS_BLOCK);
    SR_CHECK_EQ(d.until_ns, T0 + 5 * MS);
}

static bool hold_at(struct sr_progress *p, const struct sr_progress_app *app, uint64_t t)
{
    struct sr_progress_in in = {.app = *app, .pass = empty};
    CHECK_ACTION(sr_progress_next(p, &in, t), SR_PROGRESS_LOCK);
    struct sr_progress_decision d = sr_progress_next(p, &in, t);
    CHECK_ACTION(d, SR_PROGRESS_PASS);
    sr_progress_next(p, &in, t + US);
    return d.hold_acks;
}

/* The NIC thread's pass holds ACKs for a reply only while an application
 * calls verbs and is not asleep. */
static void test_ack_hold(void)
{
    struct sr_progress p = fresh(SPIN, 0);
    struct sr_progress_app app = {0};
    SR_CHECK(!hold_at(&p, &app, T0)); /* no verbs call yet: a passive target */
    app.calls = 7;
    SR_CHECK(hold_at(&p, &app, T0 + MS));
    SR_CHECK(hold_at(&p, &app, T0 + MS + base_cfg.app_reply_ns - US));
    SR_CHECK(!hold_at(&p, &app, T0 + MS + base_cfg.app_reply_ns));
    app.calls++;
    SR_CHECK(hold_at(&p, &app, T0 + 20 * MS));
    app.asleep = true;
    SR_CHECK(!hold_at(&p, &app, T0 + 20 * MS + US));
}

/* What an application's poll means for held ACKs and the hand-off. */
static void test_ack_release_on_poll(void)
{
    uint64_t now = T0;
    uint64_t idle = base_cfg.idle_ack_ns;
    struct sr_progress_poll_decision d;
    /* armed and dry: about to block; every ACK leaves, the socket goes back */
    d = sr_progress_polled(&(struct sr_progress_poll){.wanted = true, .ran = true, .armed = true},
                           idle, now);
    SR_CHECK(d.release && d.held_since == UINT64_MAX && d.hands_back && !d.counts);
    /* ran the NIC and found nothing: those held idle_ack_ns or longer */
    d = sr_progress_polled(&(struct sr_progress_poll){.wanted = true, .ran = true}, idle, now);
    SR_CHECK(d.release && d.held_since == now - idle && !d.hands_back && d.counts);
    /* found completions: a reply may follow, ACKs stay */
    d = sr_progress_polled(&(struct sr_progress_poll){.wanted = true, .ran = true, .found = true},
                           idle, now);
    SR_CHECK(!d.release && !d.hands_back && d.counts);
    d = sr_progress_polled(&(struct sr_progress_poll){.wanted = true, .found = true}, idle, 0);
    SR_CHECK(!d.release && d.counts);
    /* asked for nothing (num_entries 0): no poll for the hand-off */
    d = sr_progress_polled(&(struct sr_progress_poll){.wanted = false}, idle, 0);
    SR_CHECK(!d.release && !d.hands_back && !d.counts);
}

/* An application's inline pass that received a burst while sending little
 * itself naps. */
static void test_app_bulk(void)
{
    uint64_t b = SR_PROGRESS_BULK_BYTES;
    SR_CHECK(sr_progress_app_bulk(b, 0));
    SR_CHECK(!sr_progress_app_bulk(b - 1, 0));
    SR_CHECK(sr_progress_app_bulk(b, b / 8 - 1));
    SR_CHECK(!sr_progress_app_bulk(b, b / 8));
}

/* An application thread's inline pass that the fault injector made hold
 * a datagram back (reordering: 200 us) must wake a NIC thread blocked
 * with no deadline or a later one: if the application then stops polling,
 * nothing else delivers that datagram before the peer retransmits. The
 * engine's deadline alone (the only input before) says no here. */
static void test_kick_held_datagram(void)
{
    uint64_t held = T0 + 200 * US, timer = T0 + 67 * MS;
    /* blocked with no deadline: no timer, the datagram is held */
    SR_CHECK(sr_progress_kick(UINT64_MAX, UINT64_MAX, held));
    /* blocked until the transport timer, the datagram is due earlier */
    SR_CHECK(sr_progress_kick(timer, timer, held));
    /* an earlier engine deadline wakes it as before */
    SR_CHECK(sr_progress_kick(timer, T0 + 1 * MS, UINT64_MAX));
    /* nothing earlier than what it sleeps towards: no wake-up */
    SR_CHECK(!sr_progress_kick(held, timer, held));
    SR_CHECK(!sr_progress_kick(T0 + 100 * US, timer, held));
    SR_CHECK(!sr_progress_kick(UINT64_MAX, UINT64_MAX, UINT64_MAX));
    /* awake (0): it looks at both by itself */
    SR_CHECK(!sr_progress_kick(0, T0, held));
}

int main(void)
{
    SR_RUN(test_handoff_after_poll);
    SR_RUN(test_poll_gap);
    SR_RUN(test_app_first_yield);
    SR_RUN(test_spin_then_block);
    SR_RUN(test_bulk_nap);
    SR_RUN(test_slack_window);
    SR_RUN(test_nap_time_in_window);
    SR_RUN(test_shm_backlog);
    SR_RUN(test_idle_block);
    SR_RUN(test_ack_hold);
    SR_RUN(test_ack_release_on_poll);
    SR_RUN(test_app_bulk);
    SR_RUN(test_kick_held_datagram);
    return SR_TEST_RESULT();
}

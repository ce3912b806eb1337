/* ack_test.c: the acknowledgement policy (src/engine/ack.c) alone, driven
 * by hand with explicit time: no engine, no packets, no clock. Each rule
 * of sr_ack_decide is a table of (event, time, expected verdict, expected
 * ACK or deadline) rows run against one coalescing state: coalescing of
 * AckReqs into one held ACK, the end-of-message rule, the hold deadline
 * and its longer form for a QP answered by replies, an ACK riding a
 * request, anything else the responder sends (a NAK, a duplicate's ACK,
 * a response) flushing the held ACK first, release on idle, and the
 * requester's ACK request cadence. */
#include "ack.h"
#include "sr_test.h"

enum { D = 1000 }; /* the configured hold, ns */
#define NONE UINT64_MAX

struct row {
    enum sr_ack_event ev;
    uint64_t now;
    uint32_t psn;          /* SR_ACK_EV_ACKREQ: its PSN (msn = psn + 100) */
    bool end;              /* SR_ACK_EV_ACKREQ: LAST or ONLY packet */
    uint64_t held_since;   /* SR_ACK_EV_IDLE */
    enum sr_ack_verdict v; /* expected */
    uint32_t out_psn;      /* expected ACK, SR_ACK_SEND_NOW or SR_ACK_RIDE */
    uint64_t until;        /* expected deadline, SR_ACK_HOLD */
};

static void run(struct sr_ack *a, struct sr_ack_policy *p, uint64_t timeout_ns, const struct row *r,
                size_t n)
{
    const char *fn = sr_test_ctx;
    static char ctx[96];
    for (size_t i = 0; i < n; i++) {
        snprintf(ctx, sizeof(ctx), "%s row %zu", fn, i);
        sr_test_ctx = ctx;
        struct sr_ack_in in = {.ev = r[i].ev,
                               .now_ns = r[i].now,
                               .timeout_ns = timeout_ns,
                               .psn = r[i].psn,
                               .msn = r[i].psn + 100,
                               .end = r[i].end,
                               .held_since = r[i].held_since};
        struct sr_ack_out out;
        enum sr_ack_verdict v = sr_ack_decide(a, p, &in, &out);
        SR_CHECK_EQ(v, r[i].v);
        SR_CHECK_EQ(out.verdict, v);
        if (v == SR_ACK_SEND_NOW || v == SR_ACK_RIDE) {
            SR_CHECK_EQ(out.psn, r[i].out_psn);
            SR_CHECK_EQ(out.msn, r[i].out_psn + 100);
        }
        if (v == SR_ACK_HOLD)
            SR_CHECK_EQ(out.until, r[i].until);
        SR_CHECK_EQ(sr_ack_held(a), v == SR_ACK_HOLD);
        SR_CHECK_EQ(sr_ack_deadline(a), v == SR_ACK_HOLD ? r[i].until : NONE);
    }
    sr_test_ctx = fn;
}

static void setup(struct sr_ack *a, struct sr_ack_policy *p, uint64_t cfg_delay, bool hold)
{
    *a = (struct sr_ack){0};
    *p = (struct sr_ack_policy){0};
    sr_ack_policy_set(p, cfg_delay, hold);
}

/* AckReqs inside a message are coalesced into one held ACK for the latest
 * PSN; the hold runs from the first, and falls due then, not later. */
static void test_coalesce(void)
{
    struct sr_ack a;
    struct sr_ack_policy p;
    setup(&a, &p, D, true);
    SR_CHECK(!p.held);
    static const struct row r[] = {
        {SR_ACK_EV_TIMER, 50, .v = SR_ACK_NONE}, /* nothing held */
        {SR_ACK_EV_ACKREQ, 100, 31, false, .v = SR_ACK_HOLD, .until = 100 + D},
        {SR_ACK_EV_ACKREQ, 300, 63, false, .v = SR_ACK_HOLD, .until = 100 + D},
        {SR_ACK_EV_ACKREQ, 700, 95, false, .v = SR_ACK_HOLD, .until = 100 + D},
        {SR_ACK_EV_TIMER, 100 + D - 1, .v = SR_ACK_HOLD, .until = 100 + D},
        {SR_ACK_EV_TIMER, 100 + D, .v = SR_ACK_SEND_NOW, .out_psn = 95},
        {SR_ACK_EV_TIMER, 100 + D + 1, .v = SR_ACK_NONE}, /* sent once */
    };
    run(&a, &p, 1000000, r, sizeof(r) / sizeof(r[0]));
    SR_CHECK(p.held); /* a hold began: the idle sweep has work */
}

/* A zero delay never holds: every AckReq is answered at once. */
static void test_no_delay(void)
{
    struct sr_ack a;
    struct sr_ack_policy p;
    setup(&a, &p, 0, true);
    static const struct row r[] = {
        {SR_ACK_EV_ACKREQ, 100, 7, true, .v = SR_ACK_SEND_NOW, .out_psn = 7},
        {SR_ACK_EV_ACKREQ, 101, 8, false, .v = SR_ACK_SEND_NOW, .out_psn = 8},
        {SR_ACK_EV_REQUEST, 102, .v = SR_ACK_NONE},
    };
    run(&a, &p, 1000000, r, sizeof(r) / sizeof(r[0]));
    SR_CHECK(!p.held);
}

/* The end of a message restarts the hold once (a reply can follow only
 * the end of a message), capped at a quarter of the transport timeout
 * after the hold began. */
static void test_end_of_message(void)
{
    struct sr_ack a;
    struct sr_ack_policy p;
    setup(&a, &p, D, true);
    static const struct row r[] = {
        {SR_ACK_EV_ACKREQ, 100, 31, false, .v = SR_ACK_HOLD, .until = 100 + D},
        {SR_ACK_EV_ACKREQ, 600, 40, true, .v = SR_ACK_HOLD, .until = 600 + D},
        /* a second end in the same hold moves nothing */
        {SR_ACK_EV_ACKREQ, 900, 41, true, .v = SR_ACK_HOLD, .until = 600 + D},
        {SR_ACK_EV_TIMER, 600 + D, .v = SR_ACK_SEND_NOW, .out_psn = 41},
        /* a hold that begins at an end is not restarted by a later end */
        {SR_ACK_EV_ACKREQ, 5000, 50, true, .v = SR_ACK_HOLD, .until = 5000 + D},
        {SR_ACK_EV_ACKREQ, 5500, 51, true, .v = SR_ACK_HOLD, .until = 5000 + D},
    };
    run(&a, &p, 1000000, r, sizeof(r) / sizeof(r[0]));

    /* Timeout 4 * 1.5 D: the restart may not pass since + 1.5 D. */
    setup(&a, &p, D, true);
    static const struct row capped[] = {
        {SR_ACK_EV_ACKREQ, 100, 31, false, .v = SR_ACK_HOLD, .until = 100 + D},
        {SR_ACK_EV_ACKREQ, 900, 40, true, .v = SR_ACK_HOLD, .until = 100 + D + D / 2},
    };
    run(&a, &p, 6 * D, capped, sizeof(capped) / sizeof(capped[0]));
}

/* A held ACK rides with the QP's next request; from then on the QP is one
 * answered by replies and holds 10 x as long, at most a quarter of its
 * timeout, until one ACK falls due alone. */
static void test_ride_and_reply_hold(void)
{
    struct sr_ack a;
    struct sr_ack_policy p;
    setup(&a, &p, D, true);
    static const struct row r[] = {
        {SR_ACK_EV_REQUEST, 50, .v = SR_ACK_NONE}, /* nothing to carry */
        {SR_ACK_EV_ACKREQ, 100, 1, true, .v = SR_ACK_HOLD, .until = 100 + D},
        {SR_ACK_EV_REQUEST, 200, .v = SR_ACK_RIDE, .out_psn = 1},
        {SR_ACK_EV_ACKREQ, 300, 2, true, .v = SR_ACK_HOLD, .until = 300 + SR_ACK_REPLY_HOLD * D},
        {SR_ACK_EV_REQUEST, 400, .v = SR_ACK_RIDE, .out_psn = 2},
        {SR_ACK_EV_ACKREQ, 500, 3, true, .v = SR_ACK_HOLD, .until = 500 + SR_ACK_REPLY_HOLD * D},
        /* no reply in time: it leaves alone, and the next hold is short */
        {SR_ACK_EV_TIMER, 500 + SR_ACK_REPLY_HOLD * D, .v = SR_ACK_SEND_NOW, .out_psn = 3},
        {SR_ACK_EV_ACKREQ, 20000, 4, true, .v = SR_ACK_HOLD, .until = 20000 + D},
    };
    run(&a, &p, 1000000, r, sizeof(r) / sizeof(r[0]));

    /* a timeout of 16 D caps the longer hold at 4 D */
    setup(&a, &p, D, true);
    static const struct row capped[] = {
        {SR_ACK_EV_ACKREQ, 100, 1, true, .v = SR_ACK_HOLD, .until = 100 + D},
        {SR_ACK_EV_REQUEST, 200, .v = SR_ACK_RIDE, .out_psn = 1},
        {SR_ACK_EV_ACKREQ, 300, 2, true, .v = SR_ACK_HOLD, .until = 300 + 4 * D},
    };
    run(&a, &p, 16 * D, capped, sizeof(capped) / sizeof(capped[0]));

    /* a passive target (hold false) holds every ACK at most 4 us */
    setup(&a, &p, 50000, false);
    static const struct row passive[] = {
        {SR_ACK_EV_ACKREQ, 100, 1, true, .v = SR_ACK_HOLD, .until = 100 + SR_ACK_PASSIVE_DELAY_NS},
        {SR_ACK_EV_REQUEST, 200, .v = SR_ACK_RIDE, .out_psn = 1},
        {SR_ACK_EV_ACKREQ, 300, 2, true, .v = SR_ACK_HOLD, .until = 300 + SR_ACK_PASSIVE_DELAY_NS},
    };
    run(&a, &p, 1000000, passive, sizeof(passive) / sizeof(passive[0]));
}

/* Anything else the responder sends (a PSN sequence or RNR NAK, the ACK of
 * a duplicate, a READ response) sends the held ACK first and at once, so
 * the requester sees PSNs in order (IBA 9.7.5.1.2, 9.7.5.1.3); it does not
 * count as a reply. */
static void test_response_flushes(void)
{
    struct sr_ack a;
    struct sr_ack_policy p;
    setup(&a, &p, D, true);
    static const struct row r[] = {
        {SR_ACK_EV_RESPONSE, 50, .v = SR_ACK_NONE},
        {SR_ACK_EV_ACKREQ, 100, 9, false, .v = SR_ACK_HOLD, .until = 100 + D},
        {SR_ACK_EV_RESPONSE, 150, .v = SR_ACK_RIDE, .out_psn = 9},
        {SR_ACK_EV_RESPONSE, 160, .v = SR_ACK_NONE},
        {SR_ACK_EV_TIMER, 100 + D, .v = SR_ACK_NONE},
        /* the next hold is an ordinary one: no request carried the last */
        {SR_ACK_EV_ACKREQ, 200, 10, true, .v = SR_ACK_HOLD, .until = 200 + D},
    };
    run(&a, &p, 1000000, r, sizeof(r) / sizeof(r[0]));
}

/* Release on idle: ACKs held since held_since or earlier leave now, later
 * ones stay held; UINT64_MAX releases every one. */
static void test_idle_release(void)
{
    struct sr_ack a, b;
    struct sr_ack_policy p;
    setup(&a, &p, D, true);
    b = (struct sr_ack){0};
    static const struct row ra[] = {
        {SR_ACK_EV_IDLE, 10, .held_since = NONE, .v = SR_ACK_NONE},
        {SR_ACK_EV_ACKREQ, 100, 1, true, .v = SR_ACK_HOLD, .until = 100 + D},
    };
    static const struct row rb[] = {
        {SR_ACK_EV_ACKREQ, 200, 2, true, .v = SR_ACK_HOLD, .until = 200 + D},
    };
    run(&a, &p, 1000000, ra, 2);
    run(&b, &p, 1000000, rb, 1);
    static const struct row sweep_a[] = {
        {SR_ACK_EV_IDLE, 300, .held_since = 150, .v = SR_ACK_SEND_NOW, .out_psn = 1},
    };
    static const struct row sweep_b[] = {
        {SR_ACK_EV_IDLE, 300, .held_since = 150, .v = SR_ACK_HOLD, .until = 200 + D},
        {SR_ACK_EV_IDLE, 300, .held_since = 200, .v = SR_ACK_SEND_NOW, .out_psn = 2},
    };
    run(&a, &p, 1000000, sweep_a, 1);
    run(&b, &p, 1000000, sweep_b, 2);
    /* UINT64_MAX: everything */
    static const struct row all[] = {
        {SR_ACK_EV_ACKREQ, 400, 3, true, .v = SR_ACK_HOLD, .until = 400 + D},
        {SR_ACK_EV_IDLE, 401, .held_since = NONE, .v = SR_ACK_SEND_NOW, .out_psn = 3},
    };
    run(&a, &p, 1000000, all, 2);
}

/* An errored QP sends nothing: its held ACK is dropped, not sent later. */
static void test_drop(void)
{
    struct sr_ack a;
    struct sr_ack_policy p;
    setup(&a, &p, D, true);
    static const struct row r[] = {
        {SR_ACK_EV_ACKREQ, 100, 1, true, .v = SR_ACK_HOLD, .until = 100 + D},
        {SR_ACK_EV_DROP, 120, .v = SR_ACK_NONE},
        {SR_ACK_EV_TIMER, 100 + D, .v = SR_ACK_NONE},
        {SR_ACK_EV_REQUEST, 100 + D, .v = SR_ACK_NONE},
    };
    run(&a, &p, 1000000, r, sizeof(r) / sizeof(r[0]));
}

/* The requester asks for an ACK every 32 packets, every 256 to a peer
 * reached by trains with a timeout of 16 ms or more (or none), and never
 * more than half a window apart (IBA 9.7.5.1.1 lets the responder
 * coalesce; the window must keep moving). */
static void test_req_every(void)
{
    static const struct {
        bool trains;
        uint64_t timeout_ns, window;
        uint16_t every;
    } t[] = {
        {false, 1000000, 1024, SR_ACK_EVERY},
        {false, NONE, 1024, SR_ACK_EVERY},
        {true, SR_ACK_LONG_TIMEOUT_NS - 1, 1024, SR_ACK_EVERY},
        {true, SR_ACK_LONG_TIMEOUT_NS, 1024, SR_ACK_EVERY_TRAINS},
        {true, NONE, 1024, SR_ACK_EVERY_TRAINS},
        {true, NONE, 128, 64},
        {false, 1000000, 16, 8},
        {false, 1000000, 1, 1},
        {true, NONE, 0, 1},
    };
    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
        char ctx[64];
        snprintf(ctx, sizeof(ctx), "test_req_every row %zu", i);
        sr_test_ctx = ctx;
        SR_CHECK_EQ(sr_ack_req_every(t[i].trains, t[i].timeout_ns, (uint32_t)t[i].window),
                    t[i].every);
    }
    sr_test_ctx = "test_req_every";
}

int main(void)
{
    SR_RUN(test_coalesce);
    SR_RUN(test_no_delay);
    SR_RUN(test_end_of_message);
    SR_RUN(test_ride_and_reply_hold);
    SR_RUN(test_response_flushes);
    SR_RUN(test_idle_release);
    SR_RUN(test_drop);
    SR_RUN(test_req_every);
    return SR_TEST_RESULT();
}

/* qcap_test.c: the requester's queue cap (src/engine/qcap.c) alone, with
 * explicit time and a QP of our own: the cap's arithmetic, the rate it
 * measures from cumulative and selective acknowledgements, a scoreboard
 * reset that must not read as a burst, the timer's bound on the queueing
 * delay, the floor before the first ACK, and a standard peer's first ACK
 * ending it. */
#include "engine_int.h"
#include "qcap.h"
#include "sr_test.h"

#include <stdlib.h>

static const uint64_t MS = 1000000;

static void test_cap(void)
{
    sr_test_ctx = "cap";
    /* 1 M packets/s x (100 us + 1 ms) */
    SR_CHECK_EQ(sr_qcap_cap(1000000, 100000, MS), 1100);
    SR_CHECK_EQ(sr_qcap_cap(1000, 100000, MS), SR_QCAP_FLOOR); /* the floor */
    SR_CHECK_EQ(sr_qcap_cap(UINT64_MAX / 2, 10 * MS, MS), UINT32_MAX);
}

struct rig {
    struct sr_engine e;
    struct sr_qp qp;
};

static struct rig *rig_new(uint8_t timeout)
{
    struct rig *r = calloc(1, sizeof(*r));
    if (!r)
        return NULL;
    r->e.cfg.sack = true;
    r->e.cfg.qdelay_ns = MS;
    r->qp.eng = &r->e;
    r->qp.type = SR_QPT_RC;
    r->qp.attr.timeout = timeout;
    r->qp.comp.psn = 100;
    r->qp.comp.rtt.min_ns = 100000; /* 100 us */
    return r;
}

/* A rig whose peer takes SACKs, its cap started at *now (1 ms). */
static struct rig *rig_started(uint8_t timeout, uint64_t *now)
{
    struct rig *r = rig_new(timeout);
    SR_CHECK(r != NULL);
    if (!r)
        return NULL;
    r->qp.comp.peer_sack = true;
    *now = MS;
    sr_qcap_update(&r->qp, *now);
    return r;
}

/* Deliver `pps` packets per second for `n` rate intervals, one update
 * per 100 us, the sender window-limited. */
static const unsigned STEPS = (unsigned)(SR_QCAP_INTERVAL_NS / 100000);
static void deliver(struct rig *r, uint64_t *now, uint64_t pps, unsigned n)
{
    for (unsigned i = 0; i < n * STEPS; i++) {
        *now += MS / 10;
        r->qp.comp.psn = sr_psn_add(r->qp.comp.psn, (uint32_t)(pps / 10000));
        r->qp.qcap.limited = true;
        sr_qcap_update(&r->qp, *now);
    }
}

static void test_rate(void)
{
    sr_test_ctx = "rate";
    struct rig *r = rig_new(14);
    SR_CHECK(r != NULL);
    if (!r)
        return;
    uint64_t now = 5 * MS;
    /* before any ACK: the peer may take SACKs, and the floor holds */
    sr_qcap_update(&r->qp, now);
    SR_CHECK(sr_qcap_on(&r->qp));
    SR_CHECK_EQ(r->qp.qcap.cap, SR_QCAP_FLOOR);
    SR_CHECK(sr_qcap_blocks(&r->qp, SR_QCAP_FLOOR));
    SR_CHECK(!sr_qcap_blocks(&r->qp, SR_QCAP_FLOOR - 1));
    /* the packet that fills the floor asks for an ACK when the WQE's own
     * requests are sparser than the cap, and only then */
    SR_CHECK(sr_qcap_fills(&r->qp, SR_QCAP_FLOOR, 256));
    SR_CHECK(!sr_qcap_fills(&r->qp, SR_QCAP_FLOOR - 1, 256));
    SR_CHECK(!sr_qcap_fills(&r->qp, SR_QCAP_FLOOR, 32));
    r->qp.comp.peer_sack = true;
    /* 200 k packets/s: 200 k x 1.1 ms = 220 packets */
    deliver(r, &now, 200000, 2);
    SR_CHECK_EQ(r->qp.qcap.cap, 220);
    /* SACKed packets leave the pipe */
    SR_CHECK(sr_qcap_blocks(&r->qp, 300));
    free(r);
}

static void test_max_filter(void)
{
    sr_test_ctx = "max filter";
    uint64_t now;
    struct rig *r = rig_started(14, &now);
    if (!r)
        return;
    deliver(r, &now, 1000000, 2);
    SR_CHECK_EQ(r->qp.qcap.cap, 1100);
    /* a stall, then a slower rate: the highest of the last SR_QCAP_SAMPLES
     * intervals holds for a while, then the new one */
    now += 2 * SR_QCAP_INTERVAL_NS;
    deliver(r, &now, 500000, SR_QCAP_SAMPLES - 2);
    SR_CHECK_EQ(r->qp.qcap.cap, 1100);
    deliver(r, &now, 500000, SR_QCAP_SAMPLES);
    SR_CHECK_EQ(r->qp.qcap.cap, 550);
    /* an application-limited interval lower than the max is not kept */
    for (unsigned i = 0; i < 4 * SR_QCAP_SAMPLES * STEPS; i++) {
        now += MS / 10;
        r->qp.comp.psn = sr_psn_add(r->qp.comp.psn, 1);
        sr_qcap_update(&r->qp, now);
    }
    SR_CHECK_EQ(r->qp.qcap.cap, 550);
    free(r);
}

static void test_reset(void)
{
    sr_test_ctx = "scoreboard reset";
    uint64_t now;
    struct rig *r = rig_started(14, &now);
    struct sr_sack_sb *sb = sr_sack_sb_new(2048, 100);
    SR_CHECK(sb != NULL);
    if (!r || !sb) {
        free(r);
        free(sb);
        return;
    }
    r->qp.comp.sb = sb;
    deliver(r, &now, 200000, 2);
    SR_CHECK_EQ(r->qp.qcap.cap, 220);
    /* PSNs SACKed over the next intervals (200 k/s), then the scoreboard
     * forgets them (a timeout) and one cumulative ACK covers them: counted
     * once, not twice */
    uint32_t base = r->qp.comp.psn;
    for (unsigned i = 0; i < 2 * STEPS; i++) {
        now += MS / 10;
        sb->cnt += 20;
        r->qp.qcap.limited = true;
        sr_qcap_update(&r->qp, now);
    }
    SR_CHECK_EQ(r->qp.qcap.cap, 220);
    sb->cnt = 0;
    now += MS / 10;
    sr_qcap_update(&r->qp, now);
    now += MS / 10;
    r->qp.comp.psn = sr_psn_add(base, 40 * STEPS);
    r->qp.qcap.limited = true;
    sr_qcap_update(&r->qp, now);
    deliver(r, &now, 200000, 1);
    SR_CHECK_EQ(r->qp.qcap.cap, 220);
    r->qp.comp.sb = NULL;
    free(sb);
    free(r);
}

static void test_bounds(void)
{
    sr_test_ctx = "timer bound and standard peers";
    /* timeout 10 (4.2 ms): at most 4.2 ms / 16 = 262 us of queue */
    uint64_t now;
    struct rig *r = rig_started(10, &now);
    if (!r)
        return;
    deliver(r, &now, 1000000, 2);
    SR_CHECK_EQ(r->qp.qcap.cap, sr_qcap_cap(1000000, 100000, sr_timeout_ns(10) / 16));
    free(r);
    /* a standard peer: its first ACK (without the SACK bit) ends the cap */
    r = rig_new(14);
    SR_CHECK(r != NULL);
    if (!r)
        return;
    sr_qcap_update(&r->qp, now);
    SR_CHECK(sr_qcap_blocks(&r->qp, SR_QCAP_FLOOR));
    r->qp.comp.psn = sr_psn_add(r->qp.comp.psn, 10);
    sr_qcap_update(&r->qp, now + 1000);
    SR_CHECK(!sr_qcap_on(&r->qp));
    SR_CHECK_EQ(r->qp.qcap.cap, 0);
    SR_CHECK(!sr_qcap_blocks(&r->qp, 2000));
    SR_CHECK(!sr_qcap_fills(&r->qp, 2000, 256));
    /* off on the device */
    r->e.cfg.qdelay_ns = 0;
    r->qp.comp.peer_sack = true;
    SR_CHECK(!sr_qcap_on(&r->qp));
    free(r);
}

int main(void)
{
    SR_RUN(test_cap);
    SR_RUN(test_rate);
    SR_RUN(test_max_filter);
    SR_RUN(test_reset);
    SR_RUN(test_bounds);
    return SR_TEST_RESULT();
}

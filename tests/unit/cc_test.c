/* cc_test.c: congestion control with explicit time: the DCQCN reaction
 * point (alpha, cuts, recovery stages, floor), the notification point's CNP
 * spacing, the NSCC-style window, pacing and the SOFTRDMA_CC parser. */
#include <math.h>
#include <stdlib.h>

#include "sr_cc.h"
#include "sr_test.h"
#include "sr_util.h"

#define US  1000ull
#define G40 40000000000ull

static const double g = 1.0 / 256;

static int close_to(double a, double b)
{
    return fabs(a - b) <= 1e-12 * (fabs(a) + fabs(b) + 1);
}

static void dcqcn_cfg(struct sr_cc_cfg *cfg)
{
    sr_cc_cfg_default(cfg, G40);
    cfg->algo = SR_CC_DCQCN;
}

/* ---- none ---- */

static void test_none(void)
{
    struct sr_cc_cfg cfg;
    struct sr_cc cc;
    sr_cc_cfg_default(&cfg, G40);
    SR_CHECK_EQ(sr_cc_init(&cc, &cfg, 0), 0);
    sr_cc_on_sent(&cc, 4096, 10);
    sr_cc_on_cnp(&cc, 20);
    sr_cc_on_ack(&cc, 4096, 5000, true, 30);
    SR_CHECK_EQ(sr_cc_send_allowed(&cc, 4096, 30), 0);
    SR_CHECK_EQ(sr_cc_window_bytes(&cc), 0);
    SR_CHECK_EQ(sr_cc_next_deadline(&cc), SR_CC_NO_DEADLINE);
    SR_CHECK_EQ(sr_cc_rate_bps(&cc), 0);
    sr_cc_fini(&cc);
}

static void test_init_rejects(void)
{
    struct sr_cc_cfg cfg;
    struct sr_cc cc;
    sr_cc_cfg_default(&cfg, G40);
    cfg.algo = (enum sr_cc_algo)7;
    SR_CHECK_EQ(sr_cc_init(&cc, &cfg, 0), SR_ERR_INVAL);
    sr_cc_cfg_default(&cfg, 0);
    cfg.algo = SR_CC_DCQCN; /* no line rate to start from */
    SR_CHECK_EQ(sr_cc_init(&cc, &cfg, 0), SR_ERR_INVAL);
    /* a failed init leaves a harmless "none" behind */
    SR_CHECK_EQ(sr_cc_send_allowed(&cc, 4096, 0), 0);
    SR_CHECK_EQ(sr_cc_window_bytes(&cc), 0);
    sr_cc_cfg_default(&cfg, G40);
    cfg.algo = SR_CC_NSCC;
    cfg.nscc.min_wnd = 1 << 20;
    cfg.nscc.max_wnd = 1 << 16;
    SR_CHECK_EQ(sr_cc_init(&cc, &cfg, 0), SR_ERR_INVAL);
    cfg.nscc.min_wnd = 0;
    cfg.nscc.max_wnd = 0;
    SR_CHECK_EQ(sr_cc_init(&cc, &cfg, 0), 0);
    SR_CHECK_EQ(sr_cc_window_bytes(&cc), 64 * 4096);
}

/* ---- DCQCN reaction point ---- */

static void test_dcqcn_alpha(void)
{
    struct sr_cc_cfg cfg;
    struct sr_cc cc;
    dcqcn_cfg(&cfg);
    cfg.dcqcn.alpha_init = 0.5;
    /* A slow rate timer keeps the limiter engaged over the whole test. */
    cfg.dcqcn.rate_timer_ns = 100000 * US;
    SR_CHECK_EQ(sr_cc_init(&cc, &cfg, 0), 0);
    SR_CHECK(close_to(sr_cc_dcqcn_alpha(&cc), 0.5));
    SR_CHECK_EQ(sr_cc_next_deadline(&cc), SR_CC_NO_DEADLINE); /* nothing runs before a CNP */

    /* CNP: alpha = (1 - g) alpha + g, and the decay waits a full K. */
    uint64_t t = 1000;
    sr_cc_on_cnp(&cc, t);
    double a = (1 - g) * 0.5 + g;
    SR_CHECK(close_to(sr_cc_dcqcn_alpha(&cc), a));
    SR_CHECK_EQ(sr_cc_next_deadline(&cc), t + 55 * US);
    sr_cc_on_timer(&cc, t + 55 * US - 1);
    SR_CHECK(close_to(sr_cc_dcqcn_alpha(&cc), a));

    /* Ten quiet periods: ten decays, each a factor (1 - g); a late call
     * catches up exactly as timely ones would. */
    sr_cc_on_timer(&cc, t + 55 * US);
    a *= 1 - g;
    SR_CHECK(close_to(sr_cc_dcqcn_alpha(&cc), a));
    SR_CHECK_EQ(sr_cc_next_deadline(&cc), t + 110 * US);
    sr_cc_on_timer(&cc, t + 550 * US + 10);
    for (int i = 0; i < 9; i++)
        a *= 1 - g;
    SR_CHECK(close_to(sr_cc_dcqcn_alpha(&cc), a));

    /* With a CNP in every period alpha climbs: each CNP adds g after the
     * decay that was due. */
    t += 600 * US;
    for (int i = 0; i < 8; i++, t += 60 * US) {
        sr_cc_on_cnp(&cc, t);
        a = (1 - g) * a + g;
        SR_CHECK(close_to(sr_cc_dcqcn_alpha(&cc), a));
        SR_CHECK_EQ(sr_cc_next_deadline(&cc), t + 55 * US);
        /* the period elapses without a CNP before the next one (at +60) */
        sr_cc_on_timer(&cc, t + 55 * US);
        a *= 1 - g;
        SR_CHECK(close_to(sr_cc_dcqcn_alpha(&cc), a));
    }
}

static void test_dcqcn_cut_once_per_interval(void)
{
    struct sr_cc_cfg cfg;
    struct sr_cc cc;
    dcqcn_cfg(&cfg);
    SR_CHECK_EQ(sr_cc_init(&cc, &cfg, 0), 0);
    SR_CHECK_EQ(sr_cc_rate_bps(&cc), G40);

    /* alpha = 1: Rc = Rc (1 - 1/2), Rt = old Rc. */
    sr_cc_on_cnp(&cc, 1000);
    SR_CHECK_EQ(sr_cc_rate_bps(&cc), G40 / 2);
    SR_CHECK_EQ(sr_cc_dcqcn_target_bps(&cc), G40);
    /* Within the 50 us decrease interval: nothing changes, not even alpha. */
    sr_cc_on_cnp(&cc, 1000 + 10 * US);
    sr_cc_on_cnp(&cc, 1000 + 50 * US - 1);
    SR_CHECK_EQ(sr_cc_rate_bps(&cc), G40 / 2);
    SR_CHECK_EQ(sr_cc_dcqcn_target_bps(&cc), G40);
    SR_CHECK(close_to(sr_cc_dcqcn_alpha(&cc), 1.0));
    /* At the interval: the next cut. */
    sr_cc_on_cnp(&cc, 1000 + 50 * US);
    SR_CHECK_EQ(sr_cc_rate_bps(&cc), G40 / 4);
    SR_CHECK_EQ(sr_cc_dcqcn_target_bps(&cc), G40 / 2);

    /* A shorter interval is honoured. */
    cfg.dcqcn.decrease_interval_ns = 4 * US;
    SR_CHECK_EQ(sr_cc_init(&cc, &cfg, 0), 0);
    sr_cc_on_cnp(&cc, 0);
    sr_cc_on_cnp(&cc, 4 * US);
    SR_CHECK_EQ(sr_cc_rate_bps(&cc), G40 / 4);
}

enum step { FR, AI, HAI1, HAI2 };

/* One increase event (a timer expiry when timer, else byte_counter bytes
 * sent) and the stage it must be, checked on Rt and Rc. */
static void expect_step(struct sr_cc *cc, bool timer, uint64_t *t, enum step kind, int row)
{
    uint64_t rt = sr_cc_dcqcn_target_bps(cc), rc = sr_cc_rate_bps(cc);
    if (timer) {
        SR_CHECK(sr_cc_next_deadline(cc) != SR_CC_NO_DEADLINE);
        if (sr_cc_next_deadline(cc) != SR_CC_NO_DEADLINE)
            *t = sr_cc_next_deadline(cc);
        sr_cc_on_timer(cc, *t);
    } else {
        sr_cc_on_sent(cc, 1000000, *t);
    }
    uint64_t want_rt = rt;
    if (kind == AI)
        want_rt = rt + G40 / 1000; /* R_AI: 40 Mb/s at 40 Gb/s */
    else if (kind == HAI1)
        want_rt = rt + 10 * (G40 / 1000); /* R_HAI = 10 R_AI */
    else if (kind == HAI2)
        want_rt = rt + 2 * 10 * (G40 / 1000);
    if (sr_cc_dcqcn_target_bps(cc) != want_rt || sr_cc_rate_bps(cc) != (want_rt + rc + 1) / 2)
        fprintf(stderr, "step row %d\n", row);
    SR_CHECK_EQ(sr_cc_dcqcn_target_bps(cc), want_rt);
    SR_CHECK_EQ(sr_cc_rate_bps(cc), (want_rt + rc + 1) / 2);
}

static void test_dcqcn_recovery_stages(void)
{
    struct sr_cc_cfg cfg;
    struct sr_cc cc;
    dcqcn_cfg(&cfg);
    cfg.dcqcn.byte_counter = 1000000;
    SR_CHECK_EQ(sr_cc_init(&cc, &cfg, 0), 0);
    /* Two cuts put Rt below the line, so additive steps show. */
    sr_cc_on_cnp(&cc, 0);
    sr_cc_on_cnp(&cc, 50 * US);
    SR_CHECK_EQ(sr_cc_dcqcn_target_bps(&cc), G40 / 2);
    SR_CHECK_EQ(sr_cc_rate_bps(&cc), G40 / 4);
    uint64_t t = 50 * US;
    SR_CHECK_EQ(sr_cc_next_deadline(&cc), t + 55 * US);

    /* Timer alone: F = 5 fast-recovery steps, then additive increase. */
    for (int i = 0; i < 5; i++)
        expect_step(&cc, true, &t, FR, i);
    expect_step(&cc, true, &t, AI, 5);
    SR_CHECK_EQ(t, 50 * US + 6 * 55 * US);
    /* Bytes now: the byte counter's own five stay additive (the timer is
     * past F); its sixth puts both past F: hyper, i = 1. */
    for (int i = 0; i < 5; i++)
        expect_step(&cc, false, &t, AI, 10 + i);
    expect_step(&cc, false, &t, HAI1, 15);
    /* T = 7, BC = 6: i = min - F = 1; then BC = 7: i = 2. */
    expect_step(&cc, true, &t, HAI1, 16);
    expect_step(&cc, false, &t, HAI2, 17);

    /* A CNP starts the stages over: fast recovery again. */
    t += 1;
    sr_cc_on_cnp(&cc, t);
    expect_step(&cc, false, &t, FR, 20);
    expect_step(&cc, true, &t, FR, 21);

    /* Bytes below the counter are no event. */
    uint64_t rc = sr_cc_rate_bps(&cc);
    sr_cc_on_sent(&cc, 999999, t);
    SR_CHECK_EQ(sr_cc_rate_bps(&cc), rc);
    sr_cc_on_sent(&cc, 1, t);
    SR_CHECK(sr_cc_rate_bps(&cc) > rc);
}

static void test_dcqcn_release_and_lazy_alpha(void)
{
    struct sr_cc_cfg cfg;
    struct sr_cc cc;
    dcqcn_cfg(&cfg);
    SR_CHECK_EQ(sr_cc_init(&cc, &cfg, 0), 0);
    sr_cc_on_cnp(&cc, 0); /* alpha 1 -> 1, Rc = 20G */
    /* Recovery back to the line rate releases the limiter: no deadline. */
    uint64_t t = 0;
    int events = 0;
    while (sr_cc_next_deadline(&cc) != SR_CC_NO_DEADLINE && events < 1000) {
        t = sr_cc_next_deadline(&cc);
        sr_cc_on_timer(&cc, t);
        events++;
    }
    SR_CHECK(events < 1000);
    SR_CHECK_EQ(sr_cc_rate_bps(&cc), G40);
    /* Stopped timers stay stopped, even at the last representable time. */
    sr_cc_on_timer(&cc, SR_CC_NO_DEADLINE);
    SR_CHECK_EQ(sr_cc_next_deadline(&cc), SR_CC_NO_DEADLINE);
    /* Alpha decayed once per 55 us up to the release, and keeps decaying
     * while released: a CNP at 100 alpha periods after the first cut cuts
     * with alpha (1 - g)^100. */
    double a = 1.0;
    for (int i = 0; i < 100; i++)
        a *= 1 - g;
    sr_cc_on_cnp(&cc, 100 * 55 * US);
    SR_CHECK_EQ(sr_cc_rate_bps(&cc), (uint64_t)((double)G40 * (1 - a / 2)));
}

static void test_dcqcn_min_rate(void)
{
    struct sr_cc_cfg cfg;
    struct sr_cc cc;
    dcqcn_cfg(&cfg);
    SR_CHECK_EQ(sr_cc_init(&cc, &cfg, 0), 0);
    /* Twelve halvings would reach 40G / 4096 < 40 Mb/s: the floor holds. */
    for (int i = 0; i < 12; i++)
        sr_cc_on_cnp(&cc, (uint64_t)i * 50 * US);
    SR_CHECK_EQ(sr_cc_rate_bps(&cc), G40 / 1000);
    /* and paces at it: 1000 bytes at 40 Mb/s take 200 us */
    uint64_t t = 12 * 50 * US;
    SR_CHECK_EQ(sr_cc_send_allowed(&cc, 1000, t), 0);
    sr_cc_on_sent(&cc, 1000, t);
    SR_CHECK_EQ(sr_cc_send_allowed(&cc, 1000, t), t + 200 * US);

    /* A configured floor */
    cfg.dcqcn.min_rate_bps = 5000000000ull;
    SR_CHECK_EQ(sr_cc_init(&cc, &cfg, 0), 0);
    for (int i = 0; i < 5; i++)
        sr_cc_on_cnp(&cc, (uint64_t)i * 50 * US);
    SR_CHECK_EQ(sr_cc_rate_bps(&cc), 5000000000ull);
}

/* ---- notification point ---- */

static void test_np_cnp_spacing(void)
{
    struct sr_cc_np_params p = {.cnp_interval_ns = 50 * US};
    struct sr_cc_np a = {0}, b = {0};
    SR_CHECK(sr_cc_np_on_ce(&a, &p, 0)); /* the first CE at time 0 counts */
    SR_CHECK(!sr_cc_np_on_ce(&a, &p, 10 * US));
    SR_CHECK(sr_cc_np_on_ce(&b, &p, 10 * US)); /* per QP */
    SR_CHECK(!sr_cc_np_on_ce(&a, &p, 50 * US - 1));
    SR_CHECK(sr_cc_np_on_ce(&a, &p, 50 * US));
    SR_CHECK(!sr_cc_np_on_ce(&b, &p, 59 * US));
    SR_CHECK(sr_cc_np_on_ce(&b, &p, 60 * US));
    SR_CHECK(!sr_cc_np_on_ce(&a, &p, 99 * US));
    SR_CHECK(sr_cc_np_on_ce(&a, &p, 1000 * US));
    /* Interval 0: a CNP for every CE. */
    struct sr_cc_np_params every = {.cnp_interval_ns = 0};
    struct sr_cc_np c = {0};
    SR_CHECK(sr_cc_np_on_ce(&c, &every, 5));
    SR_CHECK(sr_cc_np_on_ce(&c, &every, 5));
}

/* The window: init_wnd before any RTT sample, then bdp_mult x Rc x the
 * smallest sample, following the rate through a cut, never below min_wnd;
 * bdp_mult 0 leaves the engine's window. */
static void test_dcqcn_window(void)
{
    struct sr_cc_cfg cfg;
    struct sr_cc cc;
    dcqcn_cfg(&cfg);
    SR_CHECK_EQ(sr_cc_init(&cc, &cfg, 0), 0);
    SR_CHECK_EQ(sr_cc_window_bytes(&cc), 0); /* the default: no window */
    cfg.dcqcn.bdp_mult = 2;
    SR_CHECK_EQ(sr_cc_init(&cc, &cfg, 0), 0);
    SR_CHECK_EQ(sr_cc_window_bytes(&cc), 32 * 1024); /* no sample yet */
    SR_CHECK_EQ(sr_cc_dcqcn_base_rtt_ns(&cc), 0);
    sr_cc_on_ack(&cc, 4096, 0, false, 10 * US); /* no sample: unchanged */
    SR_CHECK_EQ(sr_cc_window_bytes(&cc), 32 * 1024);
    sr_cc_on_ack(&cc, 4096, 8 * US, false, 20 * US);
    /* 2 x 40 Gb/s x 8 us = 80,000 B */
    SR_CHECK_EQ(sr_cc_window_bytes(&cc), 80000);
    sr_cc_on_ack(&cc, 4096, 20 * US, false, 30 * US); /* larger: the base stays */
    SR_CHECK_EQ(sr_cc_window_bytes(&cc), 80000);
    sr_cc_on_ack(&cc, 4096, 5 * US, false, 40 * US);
    SR_CHECK_EQ(sr_cc_dcqcn_base_rtt_ns(&cc), 5 * US);
    SR_CHECK_EQ(sr_cc_window_bytes(&cc), 50000);
    /* A CNP halves Rc (alpha 1): the window halves with it. */
    sr_cc_on_cnp(&cc, 50 * US);
    SR_CHECK_EQ(sr_cc_rate_bps(&cc), G40 / 2);
    SR_CHECK_EQ(sr_cc_window_bytes(&cc), 25000);
    /* A tiny base RTT: the floor. */
    sr_cc_on_ack(&cc, 4096, 100, false, 60 * US);
    SR_CHECK_EQ(sr_cc_window_bytes(&cc), 8 * 1024);
    /* A configured base RTT replaces the samples, before and after one:
     * 2 x 20 Gb/s x 10 us. */
    struct sr_cc_cfg cb = cfg;
    cb.dcqcn.base_rtt_ns = 10 * US;
    struct sr_cc ccb;
    SR_CHECK_EQ(sr_cc_init(&ccb, &cb, 0), 0);
    SR_CHECK_EQ(sr_cc_window_bytes(&ccb), 100000);
    sr_cc_on_ack(&ccb, 4096, 2 * US, false, 10 * US);
    SR_CHECK_EQ(sr_cc_window_bytes(&ccb), 100000);
    /* bdp_mult 0: rate only, the engine's window */
    cfg.dcqcn.bdp_mult = 0;
    SR_CHECK_EQ(sr_cc_init(&cc, &cfg, 0), 0);
    sr_cc_on_ack(&cc, 4096, 8 * US, false, 20 * US);
    SR_CHECK_EQ(sr_cc_window_bytes(&cc), 0);
}

/* wnd_ss: the window opens by the bytes acknowledged (RFC 5681 3.1), from
 * init_wnd up to the cap (2 x Rc x base RTT, 100,000 B at 40 Gb/s and
 * 10 us); a cut brings it down to the smaller cap at once, and when the
 * rate recovers the cap leads and the window follows the ACKs. */
static void test_dcqcn_window_ss(void)
{
    struct sr_cc_cfg cfg;
    struct sr_cc cc;
    dcqcn_cfg(&cfg);
    cfg.dcqcn.bdp_mult = 2;
    cfg.dcqcn.base_rtt_ns = 10 * US;
    SR_CHECK_EQ(sr_cc_init(&cc, &cfg, 0), 0);
    SR_CHECK_EQ(sr_cc_window_bytes(&cc), 100000); /* without: the cap at once */
    cfg.dcqcn.wnd_ss = true;
    SR_CHECK_EQ(sr_cc_init(&cc, &cfg, 0), 0);
    SR_CHECK_EQ(sr_cc_window_bytes(&cc), 32 * 1024);
    sr_cc_on_ack(&cc, 16384, 0, false, 10 * US);
    SR_CHECK_EQ(sr_cc_window_bytes(&cc), 49152);
    sr_cc_on_ack(&cc, 40000, 9 * US, false, 20 * US);
    SR_CHECK_EQ(sr_cc_window_bytes(&cc), 89152);
    sr_cc_on_ack(&cc, 40000, 9 * US, false, 30 * US);
    SR_CHECK_EQ(sr_cc_window_bytes(&cc), 100000); /* the cap */
    /* A CNP halves Rc (alpha 1), the cap and the window with it. */
    sr_cc_on_cnp(&cc, 50 * US);
    SR_CHECK_EQ(sr_cc_window_bytes(&cc), 50000);
    sr_cc_on_ack(&cc, 4096, 0, false, 60 * US);
    SR_CHECK_EQ(sr_cc_window_bytes(&cc), 50000);
    /* Fast recovery after T (55 us): Rc 30 Gb/s, a cap of 75,000 B; the
     * window waits for ACKs. */
    sr_cc_on_timer(&cc, 105 * US);
    SR_CHECK_EQ(sr_cc_rate_bps(&cc), G40 / 4 * 3);
    SR_CHECK_EQ(sr_cc_window_bytes(&cc), 50000);
    sr_cc_on_ack(&cc, 10000, 0, false, 110 * US);
    SR_CHECK_EQ(sr_cc_window_bytes(&cc), 60000);
    /* SOFTRDMA_CC names it for dcqcn only */
    struct sr_cc_cfg e;
    char err[160];
    sr_cc_cfg_default(&e, G40);
    SR_CHECK_EQ(sr_cc_parse("dcqcn,wnd_ss=1", &e, err, sizeof(err)), 0);
    SR_CHECK(e.dcqcn.wnd_ss);
    SR_CHECK(sr_cc_parse("nscc,wnd_ss=1", &e, err, sizeof(err)) < 0);
    SR_CHECK(sr_cc_parse("dcqcn,wnd_ss=2", &e, err, sizeof(err)) < 0);
}

/* bdp_srtt: the window's RTT is the smoothed RTT (RFC 6298 2.2-2.3:
 * first sample, then 7/8 old + 1/8 new), floored at the configured base
 * RTT: a round trip longer than the base opens the window, a shorter one
 * does not close it below the base's. */
static void test_dcqcn_window_srtt(void)
{
    struct sr_cc_cfg cfg;
    struct sr_cc cc;
    dcqcn_cfg(&cfg);
    cfg.dcqcn.bdp_mult = 2;
    cfg.dcqcn.bdp_srtt = true;
    cfg.dcqcn.base_rtt_ns = 10 * US;
    SR_CHECK_EQ(sr_cc_init(&cc, &cfg, 0), 0);
    /* before a sample: the base's, 2 x 40 Gb/s x 10 us */
    SR_CHECK_EQ(sr_cc_window_bytes(&cc), 100000);
    sr_cc_on_ack(&cc, 4096, 80 * US, false, 100 * US);
    SR_CHECK_EQ(sr_cc_dcqcn_srtt_ns(&cc), 80 * US);
    SR_CHECK_EQ(sr_cc_window_bytes(&cc), 800000);
    sr_cc_on_ack(&cc, 4096, 16 * US, false, 200 * US); /* 80 - 10 + 2 */
    SR_CHECK_EQ(sr_cc_dcqcn_srtt_ns(&cc), 72 * US);
    SR_CHECK_EQ(sr_cc_window_bytes(&cc), 720000);
    for (int i = 0; i < 100; i++)
        sr_cc_on_ack(&cc, 4096, 2 * US, false, (300 + (uint64_t)i) * US);
    SR_CHECK(sr_cc_dcqcn_srtt_ns(&cc) < 3 * US);
    SR_CHECK_EQ(sr_cc_window_bytes(&cc), 100000); /* the base's floor */
    /* no base RTT: init_wnd before a sample, then the srtt alone */
    cfg.dcqcn.base_rtt_ns = 0;
    SR_CHECK_EQ(sr_cc_init(&cc, &cfg, 0), 0);
    SR_CHECK_EQ(sr_cc_window_bytes(&cc), 32 * 1024);
    sr_cc_on_ack(&cc, 4096, 40 * US, false, 100 * US);
    SR_CHECK_EQ(sr_cc_window_bytes(&cc), 400000);
    /* without bdp_srtt the same samples leave the smallest one's window */
    cfg.dcqcn.bdp_srtt = false;
    SR_CHECK_EQ(sr_cc_init(&cc, &cfg, 0), 0);
    sr_cc_on_ack(&cc, 4096, 40 * US, false, 100 * US);
    sr_cc_on_ack(&cc, 4096, 400 * US, false, 200 * US);
    SR_CHECK_EQ(sr_cc_window_bytes(&cc), 400000);
}

/* ---- NSCC-style window ---- */

static void nscc_cfg(struct sr_cc_cfg *cfg)
{
    sr_cc_cfg_default(cfg, G40);
    cfg->algo = SR_CC_NSCC;
    cfg->nscc.base_rtt_ns = 10 * US;
    cfg->nscc.slow_start = false; /* the rules one by one; test_nscc_slow_start */
}

/* Until the first mark the unmarked cases grow by what is acknowledged,
 * whatever the delay; the first ECN echo (or CNP) ends it for good. */
static void test_nscc_slow_start(void)
{
    struct sr_cc_cfg cfg;
    struct sr_cc cc;
    nscc_cfg(&cfg);
    cfg.nscc.slow_start = true;
    SR_CHECK_EQ(sr_cc_init(&cc, &cfg, 0), 0);
    uint64_t w = 64 * 4096;
    sr_cc_on_ack(&cc, 4096, 10 * US, false, 10 * US); /* no queue */
    w += 4096;
    SR_CHECK_EQ(sr_cc_window_bytes(&cc), w);
    sr_cc_on_ack(&cc, 8192, 500 * US, false, 20 * US); /* far above target */
    w += 8192;
    SR_CHECK_EQ(sr_cc_window_bytes(&cc), w);
    /* a mark below the target: no change, and slow start is over */
    sr_cc_on_ack(&cc, 4096, 12 * US, true, 30 * US);
    SR_CHECK_EQ(sr_cc_window_bytes(&cc), w);
    sr_cc_on_ack(&cc, 4096, 500 * US, false, 40 * US);
    w += 4096ull * 4096 / w; /* the fair increase, as in congestion avoidance */
    SR_CHECK_EQ(sr_cc_window_bytes(&cc), w);
    /* a CNP ends it too (no cut: the latest sample had no queue) */
    SR_CHECK_EQ(sr_cc_init(&cc, &cfg, 0), 0);
    sr_cc_on_ack(&cc, 0, 10 * US, false, 10 * US);
    sr_cc_on_cnp(&cc, 20 * US);
    w = 64 * 4096;
    SR_CHECK_EQ(sr_cc_window_bytes(&cc), w);
    sr_cc_on_ack(&cc, 4096, 10 * US, false, 200 * US);
    w += 1024;
    w += 4096ull * 4096 / w;
    SR_CHECK_EQ(sr_cc_window_bytes(&cc), w);
}

static void test_nscc_below_target(void)
{
    struct sr_cc_cfg cfg;
    struct sr_cc cc;
    nscc_cfg(&cfg);
    SR_CHECK_EQ(sr_cc_init(&cc, &cfg, 0), 0);
    uint64_t w = 64 * 4096;
    SR_CHECK_EQ(sr_cc_window_bytes(&cc), w);
    /* No ECN, no queueing: proportional increase, gain 1/4 of the ACK,
     * plus fair. */
    sr_cc_on_ack(&cc, 4096, 10 * US, false, 10 * US);
    w += 1024;
    w += 4096ull * 4096 / w;
    SR_CHECK_EQ(sr_cc_window_bytes(&cc), w);
    /* Half the target: half as much. */
    sr_cc_on_ack(&cc, 4096, 15 * US, false, 20 * US);
    w += 512;
    w += 4096ull * 4096 / w;
    SR_CHECK_EQ(sr_cc_window_bytes(&cc), w);
    /* ECN below the target: a transient, no change at all (NSCC's
     * quadrant of a mark with a small queue). */
    sr_cc_on_ack(&cc, 4096, 15 * US, true, 30 * US);
    SR_CHECK_EQ(sr_cc_window_bytes(&cc), w);
    SR_CHECK_EQ(sr_cc_nscc_md_cnt(&cc), 0);
    /* At exactly the target: no proportional part. */
    sr_cc_on_ack(&cc, 4096, 20 * US, false, 40 * US);
    w += 4096ull * 4096 / w;
    SR_CHECK_EQ(sr_cc_window_bytes(&cc), w);
    /* Growth stops at max_wnd. */
    for (int i = 0; i < 10000; i++)
        sr_cc_on_ack(&cc, 65536, 10 * US, false, 50 * US);
    SR_CHECK_EQ(sr_cc_window_bytes(&cc), 2048ull * 4096);
}

static void test_nscc_above_target(void)
{
    struct sr_cc_cfg cfg;
    struct sr_cc cc;
    nscc_cfg(&cfg);
    SR_CHECK_EQ(sr_cc_init(&cc, &cfg, 0), 0);
    uint64_t w = 64 * 4096;
    /* ECN and 30 us queueing, 10 us target: 0.8 x 20/30 = 0.53 is capped
     * at 0.5. */
    sr_cc_on_ack(&cc, 4096, 40 * US, true, 100 * US);
    w /= 2;
    SR_CHECK_EQ(sr_cc_window_bytes(&cc), w);
    SR_CHECK_EQ(sr_cc_nscc_qdelay_ns(&cc), 30 * US);
    /* Within one RTT (srtt 40 us): no second cut. */
    sr_cc_on_ack(&cc, 4096, 40 * US, true, 139 * US);
    SR_CHECK_EQ(sr_cc_window_bytes(&cc), w);
    /* Delay above the target without ECN is not the fabric's queue (the
     * hosts, a held ACK): the fair increase alone, no cut. */
    sr_cc_on_ack(&cc, 4096, 25 * US, false, 140 * US);
    w += 4096ull * 4096 / w;
    SR_CHECK_EQ(sr_cc_window_bytes(&cc), w);
    /* ECN with 15 us queueing, a round trip after the first cut (srtt is
     * 38.125 us now): 0.8 x 5/15. */
    sr_cc_on_ack(&cc, 4096, 25 * US, true, 180 * US);
    w = (uint64_t)((double)w * (1.0 - 0.8 * 5.0 / 15.0));
    SR_CHECK_EQ(sr_cc_window_bytes(&cc), w);
    SR_CHECK_EQ(sr_cc_nscc_md_cnt(&cc), 2);
    /* An ACK without a sample reads the latest one: ECN at 15 us, but
     * within the RTT of the last cut. */
    sr_cc_on_ack(&cc, 4096, 0, true, 181 * US);
    SR_CHECK_EQ(sr_cc_window_bytes(&cc), w);
    /* A millisecond of delay without ECN, ACK after ACK: never a cut. */
    for (int i = 0; i < 1000; i++) {
        uint64_t before = sr_cc_window_bytes(&cc);
        sr_cc_on_ack(&cc, 4096, 1000 * US, false, 200 * US + (uint64_t)i * 1000 * US);
        SR_CHECK(sr_cc_window_bytes(&cc) > before || before == 2048ull * 4096);
    }
    SR_CHECK_EQ(sr_cc_nscc_md_cnt(&cc), 2);
    /* With ECN the cuts go down to min_wnd (one MTU). */
    for (int i = 0; i < 100; i++)
        sr_cc_on_ack(&cc, 4096, 100 * US, true, 2000000 * US + (uint64_t)i * 1000000 * US);
    SR_CHECK_EQ(sr_cc_window_bytes(&cc), 4096);
}

static void test_nscc_ecn_without_rtt_and_base(void)
{
    struct sr_cc_cfg cfg;
    struct sr_cc cc;
    sr_cc_cfg_default(&cfg, G40);
    cfg.algo = SR_CC_NSCC; /* base RTT learnt from the samples */
    SR_CHECK_EQ(sr_cc_init(&cc, &cfg, 0), 0);
    /* A CNP before any RTT sample: the largest cut. */
    sr_cc_on_cnp(&cc, 5);
    SR_CHECK_EQ(sr_cc_window_bytes(&cc), 32 * 4096);
    /* First sample 8 us is the base: no queueing, the whole proportional step. */
    sr_cc_on_ack(&cc, 4096, 8 * US, false, 10 * US);
    uint64_t w = 32 * 4096 + 1024;
    w += 4096ull * 4096 / w;
    SR_CHECK_EQ(sr_cc_window_bytes(&cc), w);
    /* 8 + 30 us without ECN: above target against the learnt base, but
     * unmarked: the fair increase. */
    sr_cc_on_ack(&cc, 4096, 38 * US, false, 100 * US);
    w += 4096ull * 4096 / w;
    SR_CHECK_EQ(sr_cc_window_bytes(&cc), w);
    /* The same marked: a cut. */
    sr_cc_on_ack(&cc, 4096, 38 * US, true, 200 * US);
    SR_CHECK(sr_cc_window_bytes(&cc) < w);
}

/* The responder's reported ACK hold comes off the sample before the base
 * RTT does (as RFC 9000 5.3 adjusts by ack_delay), unless it is as long
 * as the sample. */
static void test_nscc_hold(void)
{
    struct sr_cc_cfg cfg;
    struct sr_cc cc;
    nscc_cfg(&cfg); /* base RTT 10 us, target 10 us */
    SR_CHECK_EQ(sr_cc_init(&cc, &cfg, 0), 0);
    uint64_t w = 64 * 4096;
    /* The first sample, 12 us, sets the smallest measured. */
    sr_cc_on_ack(&cc, 0, 12 * US, false, 10 * US);
    SR_CHECK_EQ(sr_cc_nscc_qdelay_ns(&cc), 2 * US);
    /* 52 us of which the responder held 40: 12 us of path, 2 us of queue,
     * so the proportional increase at 8/10 of the target, not the fair
     * increase of a 42 us queue. */
    sr_cc_on_ack_hold(&cc, 4096, 52 * US, 40 * US, false, 20 * US);
    SR_CHECK_EQ(sr_cc_nscc_qdelay_ns(&cc), 2 * US);
    SR_CHECK_EQ(sr_cc_nscc_hold_sub_ns(&cc), 40 * US);
    w += (uint64_t)(0.25 * 4096 * 8 / 10);
    w += 4096ull * 4096 / w;
    SR_CHECK_EQ(sr_cc_window_bytes(&cc), w);
    /* The same with ECN: a transient below the target, no cut; without
     * the hold it would read 42 us and halve. */
    sr_cc_on_ack_hold(&cc, 4096, 52 * US, 40 * US, true, 30 * US);
    SR_CHECK_EQ(sr_cc_window_bytes(&cc), w);
    struct sr_cc raw;
    SR_CHECK_EQ(sr_cc_init(&raw, &cfg, 0), 0);
    sr_cc_on_ack(&raw, 0, 12 * US, false, 10 * US);
    sr_cc_on_ack(&raw, 4096, 52 * US, true, 30 * US);
    SR_CHECK_EQ(sr_cc_window_bytes(&raw), 32 * 4096);
    /* A report as long as the sample is not taken off: 30 us of queueing. */
    sr_cc_on_ack_hold(&cc, 0, 40 * US, 40 * US, false, 40 * US);
    SR_CHECK_EQ(sr_cc_nscc_qdelay_ns(&cc), 30 * US);
    SR_CHECK_EQ(sr_cc_nscc_hold_sub_ns(&cc), 80 * US);
    /* The report lasts for one call: a plain ACK after it has none. */
    sr_cc_on_ack(&cc, 0, 52 * US, false, 50 * US);
    SR_CHECK_EQ(sr_cc_nscc_qdelay_ns(&cc), 42 * US);
    /* Every ACK held (a stream's are), the smallest sample too: the base
     * RTT learnt is the path's, 12 us, and a 40 us hold on a 52 us sample
     * reads as no queue. (QUIC's floor at the smallest raw sample, 32 us,
     * would keep this hold in: 52 < 32 + 40.) */
    struct sr_cc learnt;
    cfg.nscc.base_rtt_ns = 0;
    SR_CHECK_EQ(sr_cc_init(&learnt, &cfg, 0), 0);
    sr_cc_on_ack_hold(&learnt, 0, 32 * US, 20 * US, false, 10 * US);
    SR_CHECK_EQ(sr_cc_nscc_qdelay_ns(&learnt), 0);
    sr_cc_on_ack_hold(&learnt, 0, 52 * US, 40 * US, false, 20 * US);
    SR_CHECK_EQ(sr_cc_nscc_qdelay_ns(&learnt), 0);
    sr_cc_on_ack_hold(&learnt, 0, 52 * US, 20 * US, false, 30 * US);
    SR_CHECK_EQ(sr_cc_nscc_qdelay_ns(&learnt), 20 * US);
    /* The other algorithms ignore it. */
    struct sr_cc d;
    dcqcn_cfg(&cfg);
    SR_CHECK_EQ(sr_cc_init(&d, &cfg, 0), 0);
    sr_cc_on_ack_hold(&d, 4096, 52 * US, 40 * US, false, 10 * US);
    SR_CHECK_EQ(sr_cc_dcqcn_base_rtt_ns(&d), 52 * US);
}

static void test_nscc_pacing(void)
{
    struct sr_cc_cfg cfg;
    struct sr_cc cc;
    nscc_cfg(&cfg);
    SR_CHECK_EQ(sr_cc_init(&cc, &cfg, 0), 0);
    SR_CHECK_EQ(sr_cc_rate_bps(&cc), 0);     /* no srtt yet: not paced */
    sr_cc_on_ack(&cc, 0, 20 * US, false, 0); /* at target: window unchanged */
    uint64_t w = 64 * 4096;
    SR_CHECK_EQ(sr_cc_window_bytes(&cc), w);
    /* window / srtt: 262144 B per 20 us = 104.8576 Gb/s, above the line: 40G */
    SR_CHECK_EQ(sr_cc_rate_bps(&cc), G40);
    cfg.line_rate_bps = 200000000000ull;
    SR_CHECK_EQ(sr_cc_init(&cc, &cfg, 0), 0);
    sr_cc_on_ack(&cc, 0, 20 * US, false, 0);
    SR_CHECK_EQ(sr_cc_rate_bps(&cc), w * 8 * 1000000000 / (20 * US));
    /* One window leaves in one srtt. */
    uint64_t t = 1000;
    for (uint64_t sent = 0; sent < w; sent += 4096) {
        uint64_t at = sr_cc_send_allowed(&cc, 4096, t);
        if (at)
            t = at;
        SR_CHECK_EQ(sr_cc_send_allowed(&cc, 4096, t), 0);
        sr_cc_on_sent(&cc, 4096, t);
    }
    SR_CHECK_EQ(sr_cc_send_allowed(&cc, 4096, t), 1000 + 20 * US);
    cfg.nscc.pace = false;
    SR_CHECK_EQ(sr_cc_init(&cc, &cfg, 0), 0);
    sr_cc_on_ack(&cc, 0, 20 * US, false, 0);
    SR_CHECK_EQ(sr_cc_rate_bps(&cc), 0);
}

/* ---- closed loop: senders sharing one bottleneck ----
 *
 * Backlogged senders of 4096 B packets into a FIFO bottleneck of 10 Gb/s
 * that marks CE when more than mark_bytes wait (a step marker), 2 us of
 * propagation each way. Each receiver's NP turns marks into CNPs; ACKs
 * (one per packet) echo the mark and carry the RTT. Time advances in 100 ns
 * ticks; the bottleneck is exact (each packet's departure is computed). */

#define SIM_PKT    4096u
#define SIM_RATE   10000000000ull
#define SIM_PROP   (2 * US)
#define SIM_EVENTS 16384u
#define SIM_FLOWS  4

struct sim_ev {
    uint64_t at;
    uint64_t sent_at;
    bool ce;
};

struct sim_flow {
    struct sr_cc cc;
    uint64_t start_ns;
    struct sim_ev acks[SIM_EVENTS], cnps[SIM_EVENTS]; /* rings, in time order */
    unsigned ack_head, ack_tail, cnp_head, cnp_tail;
    struct sr_cc_np np;
    uint64_t inflight;
    uint64_t delivered; /* over the second half */
};

struct sim {
    uint64_t link_free_ns; /* when the bottleneck finishes its queue */
    uint64_t mark_bytes;
    /* Host delay on the way back, not in the bottleneck's queue (a
     * software host's scheduling): a triangle wave of this amplitude and
     * period (slope below 1, so the ACKs stay in order); 0: none. */
    uint64_t jitter_ns, jitter_period_ns;
    unsigned nflows;
    struct sim_flow f[SIM_FLOWS];
    /* measured over the second half */
    uint64_t delivered, max_queue, qdelay_sum, qdelay_cnt;
};

static uint64_t sim_tx_ns(uint64_t bytes)
{
    return bytes * 8 * 1000000000ull / SIM_RATE;
}

static uint64_t sim_jitter(const struct sim *s, uint64_t t)
{
    if (!s->jitter_ns)
        return 0;
    uint64_t half = s->jitter_period_ns / 2, ph = t % s->jitter_period_ns;
    return (ph < half ? ph : s->jitter_period_ns - ph) * s->jitter_ns / half;
}

static void sim_flow_step(struct sim *s, struct sim_flow *f, uint64_t t, bool measure)
{
    struct sr_cc *cc = &f->cc;
    struct sr_cc_np_params npp = {.cnp_interval_ns = 50 * US};
    if (t < f->start_ns)
        return;
    if (sr_cc_next_deadline(cc) <= t)
        sr_cc_on_timer(cc, t);
    while (f->cnp_head != f->cnp_tail && f->cnps[f->cnp_head % SIM_EVENTS].at <= t) {
        sr_cc_on_cnp(cc, t);
        f->cnp_head++;
    }
    while (f->ack_head != f->ack_tail && f->acks[f->ack_head % SIM_EVENTS].at <= t) {
        struct sim_ev *e = &f->acks[f->ack_head++ % SIM_EVENTS];
        f->inflight -= SIM_PKT;
        sr_cc_on_ack(cc, SIM_PKT, t - e->sent_at, e->ce, t);
    }
    uint64_t wnd = sr_cc_window_bytes(cc);
    while (sr_cc_send_allowed(cc, SIM_PKT, t) == 0 && (!wnd || f->inflight + SIM_PKT <= wnd) &&
           f->ack_tail - f->ack_head < SIM_EVENTS) {
        uint64_t queued =
            s->link_free_ns > t ? (s->link_free_ns - t) * SIM_RATE / 8000000000ull : 0;
        uint64_t start = s->link_free_ns > t ? s->link_free_ns : t;
        s->link_free_ns = start + sim_tx_ns(SIM_PKT);
        bool ce = queued > s->mark_bytes;
        uint64_t arrive = s->link_free_ns + SIM_PROP;
        if (measure) {
            s->delivered += SIM_PKT;
            f->delivered += SIM_PKT;
            s->max_queue = SR_MAX(s->max_queue, queued);
            s->qdelay_sum += start - t;
            s->qdelay_cnt++;
        }
        f->acks[f->ack_tail++ % SIM_EVENTS] = (struct sim_ev){
            .at = arrive + SIM_PROP + sim_jitter(s, arrive), .sent_at = t, .ce = ce};
        if (ce && sr_cc_np_on_ce(&f->np, &npp, arrive) && f->cnp_tail - f->cnp_head < SIM_EVENTS)
            f->cnps[f->cnp_tail++ % SIM_EVENTS] = (struct sim_ev){.at = arrive + SIM_PROP};
        f->inflight += SIM_PKT;
        sr_cc_on_sent(cc, SIM_PKT, t);
        wnd = sr_cc_window_bytes(cc);
    }
}

static void sim_run(struct sim *s, uint64_t end_ns)
{
    for (uint64_t t = 0; t < end_ns; t += 100)
        for (unsigned i = 0; i < s->nflows; i++) /* alternate who goes first */
            sim_flow_step(s, &s->f[(i + t / 100) % s->nflows], t, t >= end_ns / 2);
}

static double sim_util(const struct sim *s, uint64_t end_ns)
{
    return (double)s->delivered * 8 / ((double)(end_ns / 2) * 1e-9) / SIM_RATE;
}

static struct sim sim_state;

static void test_loop_dcqcn(void)
{
    struct sr_cc_cfg cfg;
    struct sim *s = &sim_state;
    dcqcn_cfg(&cfg); /* a 40 Gb/s sender into a 10 Gb/s bottleneck */
    /* the default: the paper's rate loop alone, no window */
    memset(s, 0, sizeof(*s));
    s->nflows = 1;
    SR_CHECK_EQ(sr_cc_init(&s->f[0].cc, &cfg, 0), 0);
    s->mark_bytes = 100 * 1024;
    uint64_t end = 40000 * US;
    sim_run(s, end);
    double util = sim_util(s, end);
    printf("  dcqcn: utilisation %.3f, max queue %llu B, rate %.2f Gb/s\n", util,
           (unsigned long long)s->max_queue, (double)sr_cc_rate_bps(&s->f[0].cc) / 1e9);
    SR_CHECK(util > 0.9 && util <= 1.0);
    /* marks start at 100 KiB; the CNP loop keeps the queue within 2.5 x that */
    SR_CHECK(s->max_queue < 256 * 1024);
}

/* Four DCQCN flows, each from a 40 Gb/s line, start together into the
 * 10 Gb/s bottleneck (marks at 100 KiB): with the window the first round
 * trip puts 4 x 32 KiB in flight, not four line-rate bursts, and the queue
 * never holds more than the four windows at line rate (2 x 40 Gb/s x the
 * base RTT each); the link stays full and the four share it. Without the
 * window (bdp_mult 0) the queue grows several times deeper. */
static void test_loop_dcqcn_window(void)
{
    struct sr_cc_cfg cfg;
    struct sim *s = &sim_state;
    uint64_t end = 40000 * US, maxq[2], wsum = 0;
    double util[2], jain[2];
    for (int k = 0; k < 2; k++) {
        dcqcn_cfg(&cfg);
        cfg.dcqcn.bdp_mult = k == 0 ? 2 : 0;
        memset(s, 0, sizeof(*s));
        s->nflows = 4;
        s->mark_bytes = 100 * 1024;
        for (unsigned i = 0; i < s->nflows; i++)
            SR_CHECK_EQ(sr_cc_init(&s->f[i].cc, &cfg, 0), 0);
        /* the queue over the whole run, the first round trip included */
        uint64_t mq = 0;
        for (uint64_t t = 0; t < end; t += 100) {
            for (unsigned i = 0; i < s->nflows; i++)
                sim_flow_step(s, &s->f[(i + t / 100) % s->nflows], t, t >= end / 2);
            uint64_t q = s->link_free_ns > t ? (s->link_free_ns - t) * SIM_RATE / 8000000000ull : 0;
            mq = SR_MAX(mq, q);
        }
        double sum = 0, sq = 0;
        for (unsigned i = 0; i < s->nflows; i++) {
            sum += (double)s->f[i].delivered;
            sq += (double)s->f[i].delivered * (double)s->f[i].delivered;
        }
        util[k] = sim_util(s, end);
        jain[k] = sum * sum / (s->nflows * sq);
        maxq[k] = mq;
        if (k == 0)
            for (unsigned i = 0; i < s->nflows; i++)
                wsum += 2 * G40 / 8 * sr_cc_dcqcn_base_rtt_ns(&s->f[i].cc) / 1000000000u;
    }
    printf("  dcqcn x4, window: utilisation %.3f, Jain %.3f, max queue %llu B (windows at line "
           "rate %llu B); without: max queue %llu B\n",
           util[0], jain[0], (unsigned long long)maxq[0], (unsigned long long)wsum,
           (unsigned long long)maxq[1]);
    SR_CHECK(util[0] > 0.9 && util[0] <= 1.001);
    SR_CHECK(jain[0] > 0.95);
    SR_CHECK(wsum > 0 && maxq[0] <= wsum);
    SR_CHECK(maxq[1] > 4 * maxq[0]);
}

/* nscc into the bottleneck with a step marker at its target's worth of
 * queue (10 us at 10 Gb/s, 12.5 KB): the marks with the delay hold the
 * queue near the target at full utilisation. */
static void test_loop_nscc(void)
{
    struct sr_cc_cfg cfg;
    struct sim *s = &sim_state;
    nscc_cfg(&cfg);
    cfg.nscc.base_rtt_ns = 0; /* learnt: 4 us + one packet's serialisation */
    cfg.nscc.slow_start = true;
    memset(s, 0, sizeof(*s));
    s->nflows = 1;
    SR_CHECK_EQ(sr_cc_init(&s->f[0].cc, &cfg, 0), 0);
    s->mark_bytes = 12500;
    uint64_t end = 20000 * US;
    sim_run(s, end);
    double util = sim_util(s, end);
    double qd = (double)s->qdelay_sum / (double)s->qdelay_cnt;
    printf("  nscc: utilisation %.3f, mean queueing %.0f ns, max queue %llu B, window %llu B\n",
           util, qd, (unsigned long long)s->max_queue,
           (unsigned long long)sr_cc_window_bytes(&s->f[0].cc));
    SR_CHECK(util > 0.95 && util <= 1.01);
    /* the queue sits near the 10 us target, not at the 8 MiB window limit */
    SR_CHECK(qd > 2 * US && qd < 20 * US);
    SR_CHECK(s->max_queue < 256 * 1024);
}

/* The same link, with host delay on the ACKs' way back: up to 100 us (ten
 * times the target) that no queue at the bottleneck explains, so no mark
 * comes with it. Delay without ECN does not cut: the link stays full and
 * the marks still bound the queue. A controller that cut on delay alone
 * would read the host's 100 us as queueing and empty the link. */
static void test_loop_nscc_host_delay(void)
{
    struct sr_cc_cfg cfg;
    struct sim *s = &sim_state;
    nscc_cfg(&cfg);
    cfg.nscc.base_rtt_ns = 0;
    cfg.nscc.slow_start = true;
    memset(s, 0, sizeof(*s));
    s->nflows = 1;
    SR_CHECK_EQ(sr_cc_init(&s->f[0].cc, &cfg, 0), 0);
    s->mark_bytes = 12500;
    s->jitter_ns = 100 * US;
    s->jitter_period_ns = 2000 * US;
    uint64_t end = 40000 * US;
    sim_run(s, end);
    double util = sim_util(s, end);
    double qd = (double)s->qdelay_sum / (double)s->qdelay_cnt;
    printf("  nscc, host delay to 100 us: utilisation %.3f, mean queueing %.0f ns, max queue %llu "
           "B, cuts %llu\n",
           util, qd, (unsigned long long)s->max_queue,
           (unsigned long long)sr_cc_nscc_md_cnt(&s->f[0].cc));
    SR_CHECK(util > 0.8 && util <= 1.01);
    SR_CHECK(s->max_queue < 1024 * 1024);
}

/* Two flows, the second joining a full link after 2 ms: the fair increase
 * (equal for both) and the marks' cuts (proportional to each window) bring
 * them to even shares. */
static void test_loop_nscc_fair(void)
{
    struct sr_cc_cfg cfg;
    struct sim *s = &sim_state;
    nscc_cfg(&cfg);
    cfg.nscc.base_rtt_ns = 0;
    cfg.nscc.slow_start = true;
    memset(s, 0, sizeof(*s));
    s->nflows = 2;
    s->mark_bytes = 12500;
    SR_CHECK_EQ(sr_cc_init(&s->f[0].cc, &cfg, 0), 0);
    SR_CHECK_EQ(sr_cc_init(&s->f[1].cc, &cfg, 0), 0);
    s->f[1].start_ns = 2000 * US; /* the second flow joins a full link */
    uint64_t end = 40000 * US;
    sim_run(s, end);
    double share = (double)s->f[1].delivered / (double)s->delivered;
    printf("  nscc, 2 flows: utilisation %.3f, second flow's share %.3f\n", sim_util(s, end),
           share);
    SR_CHECK(sim_util(s, end) > 0.95);
    SR_CHECK(share > 0.4 && share < 0.6);
}

/* ---- pacer ---- */

static void test_pacer(void)
{
    struct sr_cc_pacer pc = {0};
    SR_CHECK_EQ(sr_cc_pacer_allowed(&pc, 0), 0);
    sr_cc_pacer_sent(&pc, 4096, 0); /* unpaced: no gap */
    SR_CHECK_EQ(sr_cc_pacer_allowed(&pc, 0), 0);

    /* 4096 B at 10 Gb/s: 3276.8 ns apart, never rounded away. */
    sr_cc_pacer_set_rate(&pc, 10000000000ull);
    uint64_t t = 1000;
    sr_cc_pacer_sent(&pc, 4096, t);
    SR_CHECK_EQ(sr_cc_pacer_allowed(&pc, t), 4277); /* 4276.8 rounded up */
    SR_CHECK_EQ(sr_cc_pacer_allowed(&pc, 4276), 4277);
    SR_CHECK_EQ(sr_cc_pacer_allowed(&pc, 4277), 0);
    for (int i = 1; i < 1000; i++) {
        t = sr_cc_pacer_allowed(&pc, t);
        SR_CHECK(t != 0);
        sr_cc_pacer_sent(&pc, 4096, t);
    }
    /* 1000 packets: the next slot is 1000 x 3276.8 ns after the first. */
    SR_CHECK_EQ(sr_cc_pacer_allowed(&pc, t), 1000 + 3276800);

    /* Idle time earns no burst: after a pause the gap starts from now. */
    t = 10000000;
    SR_CHECK_EQ(sr_cc_pacer_allowed(&pc, t), 0);
    sr_cc_pacer_sent(&pc, 4096, t);
    SR_CHECK_EQ(sr_cc_pacer_allowed(&pc, t), t + 3277);
    /* A rate change applies from the next packet: 1 Gb/s, 32768 ns. */
    sr_cc_pacer_set_rate(&pc, 1000000000ull);
    t = sr_cc_pacer_allowed(&pc, t);
    sr_cc_pacer_sent(&pc, 4096, t);
    SR_CHECK_EQ(sr_cc_pacer_allowed(&pc, t), 10000000 + 3277 + 32768);

    /* A clock of 300 days of uptime (past 2^64 picoseconds): the same gaps. */
    struct sr_cc_pacer late = {0};
    sr_cc_pacer_set_rate(&late, 10000000000ull);
    uint64_t t0 = 300ull * 86400 * 1000000000ull;
    sr_cc_pacer_sent(&late, 4096, t0);
    SR_CHECK_EQ(sr_cc_pacer_allowed(&late, t0), t0 + 3277);
    SR_CHECK_EQ(sr_cc_pacer_allowed(&late, t0 + 3277), 0);
    t = t0;
    for (int i = 1; i < 1000; i++) {
        t = sr_cc_pacer_allowed(&late, t);
        SR_CHECK(t > t0);
        sr_cc_pacer_sent(&late, 4096, t);
    }
    SR_CHECK_EQ(sr_cc_pacer_allowed(&late, t), t0 + 3276800);

    /* A bucket of 16 KiB at 1 Gb/s (4096 B every 32768 ns): a sender 300 us
     * late to its slot (ten missed) keeps 16 KiB of them, so four packets
     * plus the one due now leave at once, and the next slot is one gap on. */
    struct sr_cc_pacer b = {.burst_bytes = 16384};
    sr_cc_pacer_set_rate(&b, 1000000000ull);
    sr_cc_pacer_sent(&b, 4096, 0);
    t = 32768 + 300000;
    int now_cnt = 0;
    while (sr_cc_pacer_allowed(&b, t) == 0 && now_cnt < 100) {
        sr_cc_pacer_sent(&b, 4096, t);
        now_cnt++;
    }
    SR_CHECK_EQ(now_cnt, 5);
    SR_CHECK_EQ(sr_cc_pacer_allowed(&b, t), t + 32768);
    /* late by less than the bucket (40 us): every missed slot is kept, the
     * schedule goes on from the slot (32768 and 65536 are due, 98304 not) */
    struct sr_cc_pacer c = {.burst_bytes = 16384};
    sr_cc_pacer_set_rate(&c, 1000000000ull);
    sr_cc_pacer_sent(&c, 4096, 0);
    t = 32768 + 40000;
    now_cnt = 0;
    while (sr_cc_pacer_allowed(&c, t) == 0 && now_cnt < 100) {
        sr_cc_pacer_sent(&c, 4096, t);
        now_cnt++;
    }
    SR_CHECK_EQ(now_cnt, 2);
    SR_CHECK_EQ(sr_cc_pacer_allowed(&c, t), 98304);
}

/* ---- parser ---- */

static void test_parse_valid(void)
{
    struct sr_cc_cfg cfg = {0};
    char err[160];
    SR_CHECK_EQ(sr_cc_parse("none", &cfg, err, sizeof(err)), 0);
    SR_CHECK_EQ(cfg.algo, SR_CC_NONE);
    SR_CHECK_EQ(cfg.line_rate_bps, 10000000000ull);

    memset(&cfg, 0, sizeof(cfg));
    cfg.line_rate_bps = G40;
    SR_CHECK_EQ(sr_cc_parse("dcqcn", &cfg, err, sizeof(err)), 0);
    SR_CHECK_EQ(cfg.algo, SR_CC_DCQCN);
    struct sr_cc_dcqcn_params p = sr_cc_dcqcn_effective(&cfg);
    SR_CHECK(close_to(p.g, 1.0 / 256));
    SR_CHECK_EQ(p.alpha_timer_ns, 55 * US);
    SR_CHECK_EQ(p.rate_timer_ns, 55 * US);
    SR_CHECK_EQ(p.byte_counter, 10u * 1024 * 1024);
    SR_CHECK_EQ(p.fast_recovery_steps, 5);
    SR_CHECK_EQ(p.rai_bps, 40000000);
    SR_CHECK_EQ(p.rhai_bps, 400000000);
    SR_CHECK_EQ(cfg.np.cnp_interval_ns, 50 * US);

    SR_CHECK_EQ(sr_cc_parse("dcqcn,g=1/16,rai_mbps=5,rhai_mbps=50,rate_timer_us=300,"
                            "byte_counter=150000,fast_recovery=3,min_rate_mbps=100,"
                            "line_rate_mbps=100000,cnp_interval_us=4,alpha_init=0.25",
                            &cfg, err, sizeof(err)),
                0);
    p = sr_cc_dcqcn_effective(&cfg);
    SR_CHECK(close_to(p.g, 1.0 / 16));
    SR_CHECK(close_to(p.alpha_init, 0.25));
    SR_CHECK_EQ(p.rai_bps, 5000000);
    SR_CHECK_EQ(p.rhai_bps, 50000000);
    SR_CHECK_EQ(p.rate_timer_ns, 300 * US);
    SR_CHECK_EQ(p.byte_counter, 150000);
    SR_CHECK_EQ(p.fast_recovery_steps, 3);
    SR_CHECK_EQ(p.min_rate_bps, 100000000);
    SR_CHECK_EQ(cfg.line_rate_bps, 100000000000ull);
    SR_CHECK_EQ(cfg.np.cnp_interval_ns, 4 * US);

    /* Derived rates follow a configured line rate, whatever the order. */
    SR_CHECK_EQ(sr_cc_parse("dcqcn,line_rate_mbps=100000", &cfg, err, sizeof(err)), 0);
    SR_CHECK_EQ(sr_cc_dcqcn_effective(&cfg).rai_bps, 100000000);

    SR_CHECK_EQ(sr_cc_parse("nscc,target_us=20,base_rtt_us=8,pace=0,md_beta=0.5,mtu=1024", &cfg,
                            err, sizeof(err)),
                0);
    SR_CHECK_EQ(cfg.algo, SR_CC_NSCC);
    SR_CHECK_EQ(cfg.nscc.target_qdelay_ns, 20 * US);
    SR_CHECK_EQ(cfg.nscc.base_rtt_ns, 8 * US);
    SR_CHECK(!cfg.nscc.pace);
    SR_CHECK(close_to(cfg.nscc.md_beta, 0.5));
    SR_CHECK_EQ(sr_cc_nscc_effective(&cfg).init_wnd, 64 * 1024);
    /* a name nscc and dcqcn share goes to the algorithm being parsed */
    struct sr_cc_cfg d = {.line_rate_bps = G40};
    SR_CHECK_EQ(sr_cc_parse("dcqcn,init_wnd=65536,min_wnd=2048,bdp_mult=3,pace_burst=8192,"
                            "base_rtt_us=7",
                            &d, err, sizeof(err)),
                0);
    SR_CHECK_EQ(d.dcqcn.init_wnd, 65536);
    SR_CHECK_EQ(d.dcqcn.min_wnd, 2048);
    SR_CHECK_EQ(d.dcqcn.base_rtt_ns, 7 * US);
    SR_CHECK_EQ(d.nscc.base_rtt_ns, 0);
    SR_CHECK(close_to(d.dcqcn.bdp_mult, 3));
    SR_CHECK_EQ(d.nscc.init_wnd, 0);
    SR_CHECK_EQ(d.pace_burst, 8192);
    SR_CHECK(!d.pace_line && !d.dcqcn.bdp_srtt);
    struct sr_cc_cfg e = {0};
    SR_CHECK_EQ(sr_cc_parse("dcqcn,pace_line=1,bdp_srtt=1", &e, err, sizeof(err)), 0);
    SR_CHECK(e.pace_line && e.dcqcn.bdp_srtt);
    SR_CHECK_EQ(sr_cc_parse("nscc,pace_line=1", &e, err, sizeof(err)), 0);
    SR_CHECK(e.pace_line);
    SR_CHECK(sr_cc_parse("dcqcn,pace_line=2", &e, err, sizeof(err)) < 0);
    SR_CHECK(sr_cc_parse("nscc,bdp_srtt=1", &e, err, sizeof(err)) < 0);
    struct sr_cc dc;
    SR_CHECK_EQ(sr_cc_init(&dc, &d, 0), 0);
    SR_CHECK_EQ(dc.pacer.burst_bytes, 8192);
    SR_CHECK_EQ(sr_cc_window_bytes(&dc), 105000); /* 3 x 40 Gb/s x 7 us */
    /* and the parsed configuration runs */
    struct sr_cc cc;
    SR_CHECK_EQ(sr_cc_init(&cc, &cfg, 0), 0);
    SR_CHECK_EQ(sr_cc_window_bytes(&cc), 64 * 1024);
}

static void test_parse_invalid(void)
{
    static const struct {
        const char *spec;
        const char *in_err; /* the message names the culprit */
    } rows[] = {
        {"", "unknown algorithm"},
        {"reno", "'reno'"},
        {"DCQCN", "'DCQCN'"},
        {"dcqcn,foo=1", "'foo'"},
        {"dcqcn,target_us=5", "is for nscc"},
        {"none,g=1/2", "is for dcqcn"},
        {"nscc,rai_mbps=5", "is for dcqcn"},
        {"dcqcn,g=2", "for g"},
        {"dcqcn,bdp_mult=65", "for bdp_mult"},
        {"dcqcn,g=1/0", "for g"},
        {"dcqcn,g=x", "for g"},
        {"dcqcn,rai_mbps=-1", "for rai_mbps"},
        {"dcqcn,rai_mbps=12x", "for rai_mbps"},
        {"dcqcn,rai_mbps=99999999999999999999", "for rai_mbps"},
        {"dcqcn,rai_mbps=99999999999999", "for rai_mbps"}, /* x 1e6 overflows */
        {"dcqcn,fast_recovery=4294967296", "for fast_recovery"},
        {"dcqcn,rai_mbps", "not param=value"},
        {"dcqcn,=3", "not param=value"},
        {"dcqcn,rai_mbps=", "not param=value"},
        {"nscc,pace=yes", "for pace"},
        {"dcqcn,rate_timer_us=0", "positive"},
        {"dcqcn,line_rate_mbps=0", "positive"},
        {"nscc,target_us=0", "positive"},
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        struct sr_cc_cfg cfg;
        sr_cc_cfg_default(&cfg, G40);
        cfg.algo = SR_CC_NSCC;
        char err[160] = "";
        sr_test_ctx = rows[i].spec;
        SR_CHECK_EQ(sr_cc_parse(rows[i].spec, &cfg, err, sizeof(err)), SR_ERR_INVAL);
        SR_CHECK(strstr(err, rows[i].in_err) != NULL);
        if (!strstr(err, rows[i].in_err))
            fprintf(stderr, "  message: %s\n", err);
        SR_CHECK_EQ(cfg.algo, SR_CC_NSCC); /* untouched on error */
        SR_CHECK_EQ(cfg.line_rate_bps, G40);
    }
    sr_test_ctx = "test_parse_invalid";
    struct sr_cc_cfg cfg;
    sr_cc_cfg_default(&cfg, G40);
    SR_CHECK_EQ(sr_cc_parse(NULL, &cfg, NULL, 0), SR_ERR_INVAL);
    char longspec[600];
    memset(longspec, 'a', sizeof(longspec) - 1);
    longspec[sizeof(longspec) - 1] = '\0';
    SR_CHECK_EQ(sr_cc_parse(longspec, &cfg, NULL, 0), SR_ERR_INVAL);
}

int main(void)
{
    SR_RUN(test_none);
    SR_RUN(test_init_rejects);
    SR_RUN(test_dcqcn_alpha);
    SR_RUN(test_dcqcn_cut_once_per_interval);
    SR_RUN(test_dcqcn_recovery_stages);
    SR_RUN(test_dcqcn_release_and_lazy_alpha);
    SR_RUN(test_dcqcn_min_rate);
    SR_RUN(test_dcqcn_window);
    SR_RUN(test_dcqcn_window_srtt);
    SR_RUN(test_dcqcn_window_ss);
    SR_RUN(test_np_cnp_spacing);
    SR_RUN(test_nscc_below_target);
    SR_RUN(test_nscc_above_target);
    SR_RUN(test_nscc_ecn_without_rtt_and_base);
    SR_RUN(test_nscc_hold);
    SR_RUN(test_nscc_slow_start);
    SR_RUN(test_nscc_pacing);
    SR_RUN(test_loop_dcqcn);
    SR_RUN(test_loop_dcqcn_window);
    SR_RUN(test_loop_nscc);
    SR_RUN(test_loop_nscc_host_delay);
    SR_RUN(test_loop_nscc_fair);
    SR_RUN(test_pacer);
    SR_RUN(test_parse_valid);
    SR_RUN(test_parse_invalid);
    return SR_TEST_RESULT();
}

/* rtt_test.c: the round-trip estimator and probe timeout (src/engine/rtt.c)
 * alone, with explicit numbers: SRTT/RTTVAR after known samples (RFC 6298
 * 2.2, 2.3), the probe timeout's floor, ACK hold, backoff and its limit,
 * the transport timer. */
#include "rtt.h"
#include "sr_test.h"
#include "sr_util.h"

struct row {
    uint64_t sample;       /* ns */
    uint64_t srtt, rttvar; /* expected after it */
};

static void test_estimator(void)
{
    sr_test_ctx = "RFC 6298 estimator";
    static const struct row rows[] = {
        {100000, 100000, 50000}, /* first: SRTT = R, RTTVAR = R / 2 */
        {200000, 112500, 62500}, /* RTTVAR = 3/4 * 50000 + 1/4 * 100000; SRTT += 1/8 * 100000 */
        {112500, 112500, 46875}, /* no error: the variance decays by a quarter */
        {12500, 100000, 60157},  /* a shorter sample: |err| = 100000 (46875 - 11718 + 25000) */
    };
    struct sr_rtt r = {0};
    for (size_t i = 0; i < SR_ARRAY_SIZE(rows); i++) {
        sr_rtt_sample(&r, rows[i].sample);
        SR_CHECK(r.valid);
        SR_CHECK_EQ(r.srtt_ns, rows[i].srtt);
        SR_CHECK_EQ(r.rttvar_ns, rows[i].rttvar);
    }
}

static void test_pto(void)
{
    sr_test_ctx = "probe timeout";
    const uint64_t T = 67108864; /* IBA timeout 14 */
    struct sr_rtt none = {0};
    /* no sample: an eighth of the transport timer, plus the ACK hold */
    SR_CHECK_EQ(sr_rtt_pto(&none, 0, 0, T), T / 8);
    SR_CHECK_EQ(sr_rtt_pto(&none, 0, 200000, T), T / 8 + 200000);
    SR_CHECK_EQ(sr_rtt_pto(&none, 1, 0, T), T / 4);
    SR_CHECK_EQ(sr_rtt_pto(&none, 3, 0, T), UINT64_MAX); /* would not precede the timer */
    struct sr_rtt r = {.srtt_ns = 150000, .rttvar_ns = 100000, .valid = true};
    SR_CHECK_EQ(sr_rtt_pto(&r, 0, 0, T), 300000);       /* 2 * SRTT */
    SR_CHECK_EQ(sr_rtt_pto(&r, 0, 200000, T), 500000);  /* + the peer's ACK hold */
    SR_CHECK_EQ(sr_rtt_pto(&r, 2, 200000, T), 2000000); /* doubled per probe */
    /* a round trip as long as the timer: one probe at half of it, and
     * none after it (the doubled one would not precede the timer) */
    SR_CHECK_EQ(sr_rtt_pto(&r, 0, 0, 300000), 150000);
    SR_CHECK_EQ(sr_rtt_pto(&r, 1, 0, 300000), UINT64_MAX);
    struct sr_rtt slow = {.srtt_ns = 50000000, .rttvar_ns = 90000000, .valid = true};
    SR_CHECK_EQ(sr_rtt_pto(&slow, 0, 0, T), T / 2);        /* SRTT 50 ms, timer 67 ms */
    SR_CHECK_EQ(sr_rtt_pto(&r, 0, 0, UINT64_MAX), 300000); /* timeout 0: no timer */
    struct sr_rtt fast = {.srtt_ns = 3000, .rttvar_ns = 1500, .valid = true};
    SR_CHECK_EQ(sr_rtt_pto(&fast, 0, 0, T), SR_RTT_PTO_FLOOR_NS); /* the floor */
    SR_CHECK_EQ(sr_rtt_pto(&fast, 21, 0, UINT64_MAX), UINT64_MAX);
}

/* The floor depends on the peer: 50 us to a SACK peer, doubled per probe
 * a D-SACK proved needless up to the 200 us of a go-back-N peer. */
static void test_floor(void)
{
    sr_test_ctx = "probe floor";
    const uint64_t T = 67108864;
    struct sr_rtt r = {.srtt_ns = 10000, .rttvar_ns = 5000, .valid = true};
    SR_CHECK_EQ(sr_rtt_pto(&r, 0, 20000, T), 200000 + 20000); /* go-back-N peer */
    sr_rtt_set_peer(&r, true);
    SR_CHECK_EQ(sr_rtt_pto(&r, 0, 20000, T), 50000 + 20000);
    SR_CHECK_EQ(sr_rtt_pto(&r, 1, 20000, T), 2 * (50000 + 20000));
    sr_rtt_probe_spurious(&r);
    SR_CHECK_EQ(sr_rtt_pto(&r, 0, 0, T), 100000);
    sr_rtt_set_peer(&r, true); /* re-armed: the raised floor stays */
    SR_CHECK_EQ(sr_rtt_pto(&r, 0, 0, T), 100000);
    sr_rtt_probe_spurious(&r);
    sr_rtt_probe_spurious(&r);
    SR_CHECK_EQ(sr_rtt_pto(&r, 0, 0, T), SR_RTT_PTO_FLOOR_NS); /* capped */
    /* a sample above the floor rules: 2 * SRTT */
    struct sr_rtt slow = {.srtt_ns = 300000, .valid = true};
    sr_rtt_set_peer(&slow, true);
    SR_CHECK_EQ(sr_rtt_pto(&slow, 0, 0, T), 600000);
    /* the peer stops taking SACKs: the go-back-N floor again */
    sr_rtt_set_peer(&r, false);
    r.pto_floor_ns = 0;
    SR_CHECK_EQ(sr_rtt_pto(&r, 0, 0, T), SR_RTT_PTO_FLOOR_NS);
    sr_rtt_probe_spurious(&r); /* nothing to raise */
    SR_CHECK_EQ(r.pto_floor_ns, 0u);
}

int main(void)
{
    SR_RUN(test_estimator);
    SR_RUN(test_pto);
    SR_RUN(test_floor);
    return SR_TEST_RESULT();
}

/* sack_test.c: the requester's SACK scoreboard (src/engine/sack.c) alone,
 * with explicit PSNs: marking a bitmap, what a cumulative ACK clears,
 * which holes count as lost (RFC 6675 DupThresh, the tail rule, a probe's
 * "all"), bits a lying peer sets for PSNs never sent or out of range, and
 * all of it across the 2^24 PSN wrap. */
#include "sack.h"
#include "sr_test.h"
#include "sr_util.h"
#include "sr_wire.h"

#include <stdlib.h>

/* A bitmap with the listed offsets from base set (LSB first per byte). */
static void bits(uint8_t *bm, size_t len, const int *off, int n)
{
    memset(bm, 0, len);
    for (int i = 0; i < n; i++)
        bm[off[i] >> 3] |= (uint8_t)(1u << (off[i] & 7));
}

static void run_basic(uint32_t lo)
{
    struct sr_sack_sb *sb = sr_sack_sb_new(64, lo);
    SR_CHECK(sb != NULL);
    if (!sb)
        return;
    uint32_t max_sent = sr_psn_add(lo, 20);
    uint8_t bm[8];
    uint32_t ign = 0;
    /* lo itself is the hole; lo+1, lo+2 arrived */
    bits(bm, sizeof(bm), (const int[]){0, 1}, 2);
    SR_CHECK_EQ(sr_sack_sb_mark(sb, sr_psn_add(lo, 1), bm, 64, max_sent, &ign), 2);
    SR_CHECK_EQ(ign, 0);
    SR_CHECK(sr_sack_sb_has(sb, sr_psn_add(lo, 1)) && !sr_sack_sb_has(sb, lo));
    /* two marks past the hole: not yet lost (DupThresh 3) */
    SR_CHECK_EQ(sr_sack_sb_lost_limit(sb, max_sent, false, SR_SACK_DUPTHRESH), lo);
    /* a probe resends every hole below the highest mark */
    SR_CHECK_EQ(sr_sack_sb_lost_limit(sb, max_sent, true, SR_SACK_DUPTHRESH), sr_psn_add(lo, 3));
    /* a third mark: the hole is lost; the same bits again add nothing */
    bits(bm, sizeof(bm), (const int[]){0, 1, 4}, 3);
    SR_CHECK_EQ(sr_sack_sb_mark(sb, sr_psn_add(lo, 1), bm, 64, max_sent, &ign), 1);
    uint32_t lim = sr_sack_sb_lost_limit(sb, max_sent, false, SR_SACK_DUPTHRESH);
    SR_CHECK_EQ(lim, sr_psn_add(lo, 1)); /* the third-highest mark */
    /* a QP sprayed over 4 paths waits for a fourth mark */
    SR_CHECK_EQ(sr_sack_sb_lost_limit(sb, max_sent, false, 4), lo);
    uint32_t h = 0;
    SR_CHECK(sr_sack_sb_next_hole(sb, lo, lim, &h) && h == lo);
    /* lo+3 and lo+4.. are holes too, but only lo has 3 marks past it */
    SR_CHECK(!sr_sack_sb_next_hole(sb, sr_psn_add(lo, 1), lim, &h));
    /* bits for PSNs never sent: ignored, counted */
    ign = 0;
    bits(bm, sizeof(bm), (const int[]){25, 63}, 2);
    SR_CHECK_EQ(sr_sack_sb_mark(sb, sr_psn_add(lo, 1), bm, 64, max_sent, &ign), 0);
    SR_CHECK_EQ(ign, 2);
    /* the cumulative ACK passes lo+2: lo..lo+2 leave the board */
    sr_sack_sb_ack(sb, sr_psn_add(lo, 3));
    SR_CHECK_EQ(sb->lo, sr_psn_add(lo, 3));
    SR_CHECK_EQ(sb->cnt, 1u); /* lo+5 */
    /* bits behind the cumulative ACK are old news, not lies */
    ign = 0;
    bits(bm, sizeof(bm), (const int[]){0}, 1);
    SR_CHECK_EQ(sr_sack_sb_mark(sb, lo, bm, 64, max_sent, &ign), 0);
    SR_CHECK_EQ(ign, 0);
    /* marks reaching the last PSN sent: every hole below is lost (nothing
     * later will come to count DupThresh) */
    bits(bm, sizeof(bm), (const int[]){19}, 1);
    sr_sack_sb_mark(sb, lo, bm, 64, max_sent, &ign);
    SR_CHECK_EQ(sb->hi, max_sent);
    SR_CHECK_EQ(sr_sack_sb_lost_limit(sb, max_sent, false, SR_SACK_DUPTHRESH), max_sent);
    /* an ACK past everything empties it; a reset forgets */
    sr_sack_sb_ack(sb, max_sent);
    SR_CHECK_EQ(sb->cnt, 0u);
    SR_CHECK_EQ(sr_sack_sb_lost_limit(sb, max_sent, true, SR_SACK_DUPTHRESH), max_sent);
    sr_sack_sb_mark(sb, max_sent, bm, 64, sr_psn_add(max_sent, 64), &ign);
    SR_CHECK_EQ(sb->cnt, 1u);
    sr_sack_sb_reset(sb, max_sent);
    SR_CHECK_EQ(sb->cnt, 0u);
    SR_CHECK(!sr_sack_sb_has(sb, sr_psn_add(max_sent, 19)));
    free(sb);
}

static void test_basic(void)
{
    sr_test_ctx = "scoreboard at psn 100";
    run_basic(100);
    sr_test_ctx = "scoreboard across the 2^24 wrap";
    run_basic(SR_PSN_MASK - 5);
}

/* A bitmap claiming PSNs beyond the tracked range (2 x the window, at
 * least 1024) is not believed: those bits are ignored and counted. */
static void test_range(void)
{
    sr_test_ctx = "tracked range";
    struct sr_sack_sb *sb = sr_sack_sb_new(64, 7);
    SR_CHECK(sb && sb->cap == 1024);
    if (!sb)
        return;
    uint8_t bm[SR_SACK_MAX_BITS / 8];
    memset(bm, 0xff, sizeof(bm));
    uint32_t ign = 0;
    uint32_t got = sr_sack_sb_mark(sb, 8, bm, SR_SACK_MAX_BITS, 7 + 5000, &ign);
    SR_CHECK_EQ(got, sb->cap - 1); /* 8 .. 7 + cap - 1 */
    SR_CHECK_EQ(ign, SR_SACK_MAX_BITS - (sb->cap - 1));
    free(sb);
}

/* RFC 8985 6.2 with D-SACKs (RFC 2883): only a D-SACK naming one of the
 * remembered selective resends grows the window, a quarter of SRTT at a
 * time, once per round trip, never past SRTT; 16 resends without one
 * bring it back to a quarter. */
static void test_reo_window(void)
{
    sr_test_ctx = "adaptive reordering window";
    const uint64_t SRTT = 40000;
    struct sr_sack_sb *sb = sr_sack_sb_new(64, SR_PSN_MASK - 2);
    SR_CHECK(sb != NULL);
    if (!sb)
        return;
    SR_CHECK_EQ(sr_sack_sb_reo_wnd(sb, SRTT), SRTT / 4);
    /* a D-SACK of something never resent (a copy the network made) */
    SR_CHECK(!sr_sack_sb_dsack(sb, 5, 1000, SRTT));
    SR_CHECK_EQ(sr_sack_sb_reo_wnd(sb, SRTT), SRTT / 4);
    /* resends across the wrap, then their D-SACKs */
    sr_sack_sb_resent(sb, SR_PSN_MASK);
    sr_sack_sb_resent(sb, 1);
    sr_sack_sb_resent(sb, 2);
    SR_CHECK(sr_sack_sb_dsack(sb, SR_PSN_MASK, 1000, SRTT));
    SR_CHECK_EQ(sr_sack_sb_reo_wnd(sb, SRTT), SRTT / 2);
    /* the same PSN again: the network's copy, no growth */
    SR_CHECK(!sr_sack_sb_dsack(sb, SR_PSN_MASK, 1000 + SRTT, SRTT));
    /* another spurious resend within the same round trip: counted once */
    SR_CHECK(sr_sack_sb_dsack(sb, 1, 1000 + SRTT / 2, SRTT));
    SR_CHECK_EQ(sr_sack_sb_reo_wnd(sb, SRTT), SRTT / 2);
    /* a round trip later it grows again, and SRTT caps it */
    SR_CHECK(sr_sack_sb_dsack(sb, 2, 1000 + SRTT, SRTT));
    SR_CHECK_EQ(sr_sack_sb_reo_wnd(sb, SRTT), 3 * SRTT / 4);
    for (uint32_t k = 0; k < 4; k++) {
        sr_sack_sb_resent(sb, 100 + k);
        SR_CHECK(sr_sack_sb_dsack(sb, 100 + k, 1000 + (2 + k) * SRTT, SRTT));
    }
    SR_CHECK_EQ(sr_sack_sb_reo_wnd(sb, SRTT), SRTT);
    /* a reset (timeout, rewind) keeps what was learnt */
    sr_sack_sb_reset(sb, 500);
    SR_CHECK_EQ(sr_sack_sb_reo_wnd(sb, SRTT), SRTT);
    /* SR_SACK_REO_PERSIST recoveries without a D-SACK: back to a quarter */
    for (uint32_t k = 0; k < SR_SACK_REO_PERSIST - 1; k++)
        sr_sack_sb_resent(sb, 600 + k);
    SR_CHECK_EQ(sr_sack_sb_reo_wnd(sb, SRTT), SRTT);
    sr_sack_sb_resent(sb, 700);
    SR_CHECK_EQ(sr_sack_sb_reo_wnd(sb, SRTT), SRTT / 4);
    /* only the last SR_SACK_RS_RING resends are remembered */
    for (uint32_t k = 0; k <= SR_SACK_RS_RING; k++)
        sr_sack_sb_resent(sb, 800 + k);
    SR_CHECK(!sr_sack_sb_dsack(sb, 800, 1000000, SRTT));
    SR_CHECK(sr_sack_sb_dsack(sb, 801, 1000000, SRTT));
    free(sb);
}

int main(void)
{
    SR_RUN(test_basic);
    SR_RUN(test_reo_window);
    SR_RUN(test_range);
    return SR_TEST_RESULT();
}

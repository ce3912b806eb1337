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
    sr_sack_sb_resent(sb, SR_PSN_MASK, 0);
    sr_sack_sb_resent(sb, 1, 0);
    sr_sack_sb_resent(sb, 2, 0);
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
        sr_sack_sb_resent(sb, 100 + k, 0);
        SR_CHECK(sr_sack_sb_dsack(sb, 100 + k, 1000 + (2 + k) * SRTT, SRTT));
    }
    SR_CHECK_EQ(sr_sack_sb_reo_wnd(sb, SRTT), SRTT);
    /* a reset (timeout, rewind) keeps what was learnt */
    sr_sack_sb_reset(sb, 500);
    SR_CHECK_EQ(sr_sack_sb_reo_wnd(sb, SRTT), SRTT);
    /* SR_SACK_REO_PERSIST recoveries without a D-SACK: back to a quarter */
    for (uint32_t k = 0; k < SR_SACK_REO_PERSIST - 1; k++)
        sr_sack_sb_resent(sb, 600 + k, 0);
    SR_CHECK_EQ(sr_sack_sb_reo_wnd(sb, SRTT), SRTT);
    sr_sack_sb_resent(sb, 700, 0);
    SR_CHECK_EQ(sr_sack_sb_reo_wnd(sb, SRTT), SRTT / 4);
    /* only the last SR_SACK_RS_RING resends are remembered */
    for (uint32_t k = 0; k <= SR_SACK_RS_RING; k++)
        sr_sack_sb_resent(sb, 800 + k, 0);
    SR_CHECK(!sr_sack_sb_dsack(sb, 800, 1000000, SRTT));
    SR_CHECK(sr_sack_sb_dsack(sb, 801, 1000000, SRTT));
    free(sb);
}

/* A PSN that went twice (its selective resend, then a probe's resend of
 * every hole or a resend taken for lost again) proves nothing when a
 * D-SACK names it: our two copies met at the responder. Counting it grew
 * the lateness by each such repair's whole wait, and a grown window made
 * the next repairs wait longer still. */
static void test_resent_again(void)
{
    sr_test_ctx = "resent again";
    const uint64_t SRTT = 50000;
    struct sr_sack_sb *sb = sr_sack_sb_new(64, 10);
    SR_CHECK(sb != NULL);
    if (!sb)
        return;
    sr_sack_sb_resent(sb, 20, 1000);
    sr_sack_sb_resent(sb, 21, 1000);
    sr_sack_sb_resent(sb, 22, 1000);
    sr_sack_sb_resent_again(sb, 21);
    sr_sack_sb_resent_again(sb, 99); /* never resent: nothing to forget */
    SR_CHECK(!sr_sack_sb_dsack(sb, 21, 900000, SRTT));
    SR_CHECK_EQ(sr_sack_sb_reo_wnd(sb, SRTT), SRTT / 4); /* nothing learnt */
    /* the others are still remembered, the oldest included */
    SR_CHECK(sr_sack_sb_dsack(sb, 20, 2000, SRTT));
    SR_CHECK_EQ(sr_sack_sb_reo_wnd(sb, SRTT), SRTT / 2);
    SR_CHECK(sr_sack_sb_dsack(sb, 22, 2000 + SRTT, SRTT));
    free(sb);
}

/* A D-SACK dates the original by the first answer that showed the PSN
 * delivered (sr_sack_sb_seen), not by its own arrival a round trip after
 * the resend: that counted the window waited and the resend's round trip
 * as lateness, and each spurious resend raised the window again. */
static void test_lateness_seen(void)
{
    sr_test_ctx = "lateness from the first answer";
    const uint64_t SRTT = 1000000;
    struct sr_sack_sb *sb = sr_sack_sb_new(64, 10);
    SR_CHECK(sb != NULL);
    if (!sb)
        return;
    uint8_t bm[8] = {0};
    uint32_t ign = 0;
    sr_sack_sb_resent(sb, 20, 1000);
    sr_sack_sb_seen(sb, 150000); /* not marked yet: nothing stamped */
    bm[1] = 1 << 1;              /* bit 9: PSN 20 from base 11 */
    sr_sack_sb_mark(sb, 11, bm, 64, 64, &ign);
    sr_sack_sb_seen(sb, 201000); /* the original showed 200 us after the loss */
    SR_CHECK(sr_sack_sb_dsack(sb, 20, 4000000, SRTT));
    SR_CHECK_EQ(sr_sack_sb_reo_wnd(sb, SRTT), SRTT / 2); /* 200 us + SRTT/4 is below mult 2 */
    SR_CHECK_EQ(sb->reo_late_ns, 200001);                /* the stamp is odd: 0 means none */
    /* acknowledged cumulatively first: stamped by the ACK */
    sr_sack_sb_resent(sb, 30, 2000000);
    sr_sack_sb_ack(sb, 31);
    sr_sack_sb_seen(sb, 2300001);
    SR_CHECK(sr_sack_sb_dsack(sb, 30, 9000000, SRTT));
    SR_CHECK_EQ(sb->reo_late_ns, 300001);
    /* never shown before its D-SACK: dated by the D-SACK */
    sr_sack_sb_resent(sb, 40, 3000000);
    SR_CHECK(sr_sack_sb_dsack(sb, 40, 3500000, SRTT));
    SR_CHECK_EQ(sb->reo_late_ns, 500000);
    free(sb);
}

/* ---- the word-at-a-time scoreboard against a bit-by-bit reference ----
 * The reference below is the plain reading of sack.h, one PSN at a time;
 * sack.c does the same 64 PSNs at a time. Both run the same random
 * operations on boards of their own and must agree on every result and
 * every bit: bases before, at and past lo, bitmaps reaching past the
 * tracked range and past max_sent (ignored, counted), max_sent before lo,
 * lengths that are not whole words or bytes, ACKs inside and past the
 * marks, DupThresh from 0 up past the marks, all across the 2^24 wrap. */
static bool ref_test(const struct sr_sack_sb *sb, uint32_t psn)
{
    uint32_t b = psn & (sb->cap - 1);
    return sb->bits[b >> 6] >> (b & 63) & 1;
}

static uint32_t ref_mark(struct sr_sack_sb *sb, uint32_t base, const uint8_t *bm, uint32_t nbits,
                         uint32_t max_sent, uint32_t *ignored)
{
    uint32_t added = 0;
    for (uint32_t i = 0; i < nbits; i++) {
        if (!(bm[i >> 3] >> (i & 7) & 1))
            continue;
        uint32_t p = sr_psn_add(base, i);
        if (sr_psn_lt(p, sb->lo))
            continue;
        if (!sr_psn_lt(p, max_sent) || (uint32_t)sr_psn_diff(p, sb->lo) >= sb->cap) {
            (*ignored)++;
            continue;
        }
        if (ref_test(sb, p))
            continue;
        uint32_t b = p & (sb->cap - 1);
        sb->bits[b >> 6] |= 1ull << (b & 63);
        sb->cnt++;
        added++;
        if (!sr_psn_lt(p, sb->hi))
            sb->hi = sr_psn_add(p, 1);
    }
    return added;
}

static void ref_ack(struct sr_sack_sb *sb, uint32_t psn)
{
    if (!sr_psn_lt(sb->lo, psn))
        return;
    if (!sr_psn_lt(psn, sb->hi)) {
        if (sb->cnt)
            sr_sack_sb_reset(sb, psn);
        sb->lo = sb->hi = psn;
        sb->timed_out = false;
        if (sr_psn_lt(sb->resent, psn))
            sb->resent = psn;
        return;
    }
    for (uint32_t p = sb->lo; p != psn; p = sr_psn_add(p, 1)) {
        uint32_t b = p & (sb->cap - 1);
        if (sb->bits[b >> 6] >> (b & 63) & 1) {
            sb->bits[b >> 6] &= ~(1ull << (b & 63));
            sb->cnt--;
        }
    }
    sb->lo = psn;
    sb->timed_out = false;
    sb->ep_n = 0;
    if (sr_psn_lt(sb->resent, psn))
        sb->resent = psn;
}

static uint32_t ref_lost_limit(const struct sr_sack_sb *sb, uint32_t max_sent, bool all,
                               uint32_t dupthresh)
{
    if (!sb->cnt)
        return sb->lo;
    if (all || sb->hi == max_sent)
        return sb->hi;
    uint32_t seen = 0;
    for (uint32_t p = sr_psn_add(sb->hi, SR_PSN_MASK);; p = sr_psn_add(p, SR_PSN_MASK)) {
        if (ref_test(sb, p) && ++seen == dupthresh)
            return p;
        if (p == sb->lo)
            return sb->lo;
    }
}

static bool ref_next_hole(const struct sr_sack_sb *sb, uint32_t from, uint32_t limit, uint32_t *psn)
{
    if (sr_psn_lt(from, sb->lo))
        from = sb->lo;
    for (uint32_t p = from; sr_psn_lt(p, limit); p = sr_psn_add(p, 1)) {
        if (!ref_test(sb, p)) {
            *psn = p;
            return true;
        }
    }
    return false;
}

static uint64_t rnd_state;
static uint32_t rnd(uint32_t n)
{
    rnd_state ^= rnd_state << 13;
    rnd_state ^= rnd_state >> 7;
    rnd_state ^= rnd_state << 17;
    return n ? (uint32_t)(rnd_state % n) : 0;
}

/* A PSN near lo: from just before it to just past the tracked range. */
static uint32_t rnd_near(const struct sr_sack_sb *sb, uint32_t before, uint32_t after)
{
    if (!rnd(50))
        return rnd(SR_PSN_MASK + 1); /* anywhere */
    return sr_psn_add(sb->lo, rnd(before + sb->cap + after) + SR_PSN_MASK + 1 - before);
}

static void rnd_bitmap(uint8_t *bm, uint32_t len)
{
    uint32_t kind = rnd(5);
    for (uint32_t i = 0; i < len; i++) {
        switch (kind) {
        case 0: /* sparse */
            bm[i] = rnd(8) ? 0 : (uint8_t)(1u << rnd(8));
            break;
        case 1: /* everything received */
            bm[i] = 0xff;
            break;
        case 2: /* runs of holes and of marks */
            bm[i] = (i / (1 + rnd(3))) % 2 ? 0xff : 0;
            break;
        default:
            bm[i] = (uint8_t)rnd(256);
        }
    }
}

static bool same_board(const struct sr_sack_sb *a, const struct sr_sack_sb *b)
{
    return a->lo == b->lo && a->hi == b->hi && a->cnt == b->cnt &&
           !memcmp(a->bits, b->bits, a->cap / 8);
}

static void run_words(uint32_t window, uint32_t lo0, uint32_t ops)
{
    struct sr_sack_sb *sb = sr_sack_sb_new(window, lo0), *ref = sr_sack_sb_new(window, lo0);
    SR_CHECK(sb && ref);
    if (!sb || !ref) {
        free(sb);
        free(ref);
        return;
    }
    uint8_t bm[SR_SACK_MAX_BITS / 8 + 1];
    uint32_t bad = 0;
    for (uint32_t k = 0; k < ops && bad < 5; k++) {
        uint32_t op = rnd(10);
        if (op < 5) {
            uint32_t nbits =
                rnd(4) ? 64 * (1 + rnd(SR_SACK_MAX_BITS / 64)) : 1 + rnd(SR_SACK_MAX_BITS + 8);
            uint32_t base = rnd_near(ref, SR_SACK_MAX_BITS + 64, 64);
            uint32_t max_sent = rnd_near(ref, 64, 64);
            if (rnd(2)) /* mostly: everything in the bitmap was sent */
                max_sent = sr_psn_add(base, nbits + rnd(4));
            rnd_bitmap(bm, (nbits + 7) / 8);
            uint32_t ig = 0, rig = 0;
            uint32_t got = sr_sack_sb_mark(sb, base, bm, nbits, max_sent, &ig);
            uint32_t want = ref_mark(ref, base, bm, nbits, max_sent, &rig);
            SR_CHECK_EQ(got, want);
            SR_CHECK_EQ(ig, rig);
        } else if (op < 7) {
            /* inside the marks mostly, sometimes past them */
            uint32_t span = (ref->hi - ref->lo) & SR_PSN_MASK;
            uint32_t psn = sr_psn_add(ref->lo, rnd(span + 8));
            if (!rnd(20))
                psn = sr_psn_add(ref->lo, SR_PSN_MASK + 1 - rnd(8)); /* behind lo */
            sr_sack_sb_ack(sb, psn);
            ref_ack(ref, psn);
        } else if (op < 8) {
            uint32_t psn = rnd_near(ref, 4, 4);
            if (!rnd(10)) {
                sr_sack_sb_reset(sb, psn);
                sr_sack_sb_reset(ref, psn);
            }
        }
        /* the questions asked after every step */
        uint32_t max_sent = rnd(3) ? ref->hi : rnd_near(ref, 8, 8);
        bool all = !rnd(4);
        uint32_t dt = rnd(3) ? 1 + rnd(8) : rnd(80);
        SR_CHECK_EQ(sr_sack_sb_lost_limit(sb, max_sent, all, dt),
                    ref_lost_limit(ref, max_sent, all, dt));
        for (int q = 0; q < 3; q++) {
            uint32_t from = rnd_near(ref, 8, 8), limit = rnd(2) ? ref->hi : rnd_near(ref, 8, 8);
            uint32_t h = 0, rh = 0;
            bool got = sr_sack_sb_next_hole(sb, from, limit, &h);
            bool want = ref_next_hole(ref, from, limit, &rh);
            SR_CHECK_EQ(got, want);
            if (got && want)
                SR_CHECK_EQ(h, rh);
        }
        bool same = same_board(sb, ref);
        SR_CHECK(same);
        if (!same)
            bad++;
    }
    free(sb);
    free(ref);
}

static void test_words(void)
{
    const struct {
        const char *ctx;
        uint32_t window, lo;
    } rows[] = {
        {"word marks, cap 1024 at psn 0", 64, 0},
        {"word marks, cap 1024 across the wrap", 64, SR_PSN_MASK - 700},
        {"word marks, cap 4096 across the wrap", 2048, SR_PSN_MASK - 3000},
        {"word marks, cap 2048 at an odd psn", 1000, 12345},
    };
    rnd_state = 0x9e3779b97f4a7c15ull;
    for (size_t r = 0; r < sizeof(rows) / sizeof(rows[0]); r++) {
        sr_test_ctx = rows[r].ctx;
        run_words(rows[r].window, rows[r].lo, 3000);
    }
}

/* RFC 8985 6.3 on the board: a followed resend counts lost again once a
 * packet sent after it (a PSN at or past its send pointer, or a later
 * followed resend) is shown delivered and the window has passed; one shown
 * delivered is forgotten; across the 2^24 wrap. */
static void run_lost_resends(uint32_t lo)
{
    struct sr_sack_sb *sb = sr_sack_sb_new(64, lo);
    SR_CHECK(sb != NULL);
    if (!sb)
        return;
    uint8_t bm[8];
    uint32_t ign = 0, out[SR_SACK_LR_MAX];
    uint64_t next = 0;
    uint32_t h1 = lo, h2 = sr_psn_add(lo, 5), sent = sr_psn_add(lo, 20);
    /* holes lo and lo+5; lo+1..4, lo+6..19 arrived */
    bits(bm, sizeof(bm),
         (const int[]){1, 2, 3, 4, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19}, 18);
    SR_CHECK_EQ(sr_sack_sb_mark(sb, lo, bm, 64, sent, &ign), 18);
    /* both resent at t=1000 with the send pointer at lo+20 */
    sr_sack_sb_track(sb, h1, sent, 1000);
    sr_sack_sb_track(sb, h2, sent, 1000);
    /* nothing sent after them delivered yet: neither counts lost */
    SR_CHECK_EQ(sr_sack_sb_lost_resends(sb, 5000, 100, out, SR_SACK_LR_MAX, &next), 0);
    SR_CHECK_EQ(next, 0);
    SR_CHECK_EQ(sb->lr_n, 2);
    /* the resend of lo+5 arrives (a later followed resend): lo's resend,
     * older and still missing, was overtaken, but only once the window
     * (100 ns from its send) has passed */
    bits(bm, sizeof(bm), (const int[]){5}, 1);
    SR_CHECK_EQ(sr_sack_sb_mark(sb, lo, bm, 64, sent, &ign), 1);
    SR_CHECK_EQ(sr_sack_sb_lost_resends(sb, 1050, 100, out, SR_SACK_LR_MAX, &next), 0);
    SR_CHECK_EQ(next, 1100);
    SR_CHECK_EQ(sb->lr_n, 1); /* lo+5 delivered: forgotten */
    SR_CHECK_EQ(sr_sack_sb_lost_resends(sb, 1100, 100, out, SR_SACK_LR_MAX, &next), 1);
    SR_CHECK_EQ(out[0], h1);
    SR_CHECK_EQ(sb->lr_n, 0);
    /* resent again at 2000 with the pointer at lo+24; new data lo+20..23
     * arrives first: nothing at or past lo+24 yet, so not lost */
    uint32_t sent2 = sr_psn_add(lo, 24);
    sr_sack_sb_track(sb, h1, sent2, 2000);
    bits(bm, sizeof(bm), (const int[]){20, 21, 22, 23}, 4);
    SR_CHECK_EQ(sr_sack_sb_mark(sb, lo, bm, 64, sent2, &ign), 4);
    SR_CHECK_EQ(sr_sack_sb_lost_resends(sb, 9000, 100, out, SR_SACK_LR_MAX, &next), 0);
    /* lo+24, sent after the resend, arrives: the resend is lost again */
    uint32_t sent3 = sr_psn_add(lo, 30);
    bits(bm, sizeof(bm), (const int[]){24}, 1);
    SR_CHECK_EQ(sr_sack_sb_mark(sb, lo, bm, 64, sent3, &ign), 1);
    SR_CHECK_EQ(sr_sack_sb_lost_resends(sb, 9000, 100, out, SR_SACK_LR_MAX, &next), 1);
    SR_CHECK_EQ(out[0], h1);
    /* a followed resend covered by the cumulative ACK is forgotten */
    sr_sack_sb_track(sb, h1, sent3, 9000);
    sr_sack_sb_ack(sb, sr_psn_add(lo, 25));
    SR_CHECK_EQ(sr_sack_sb_lost_resends(sb, 99000, 100, out, SR_SACK_LR_MAX, &next), 0);
    SR_CHECK_EQ(sb->lr_n, 0);
    /* full: the oldest is dropped, the newest kept; reset forgets all */
    for (uint32_t i = 0; i < SR_SACK_LR_MAX + 3; i++)
        sr_sack_sb_track(sb, sr_psn_add(lo, 30 + i % 8), sent3, i);
    SR_CHECK_EQ(sb->lr_n, SR_SACK_LR_MAX);
    SR_CHECK_EQ(sb->lr[0].at, 3);
    sr_sack_sb_reset(sb, sr_psn_add(lo, 40));
    SR_CHECK_EQ(sb->lr_n, 0);
    free(sb);
}

static void test_lost_resends(void)
{
    run_lost_resends(100);
    run_lost_resends(SR_PSN_MASK - 6); /* the holes and pointers wrap */
}

int main(void)
{
    SR_RUN(test_basic);
    SR_RUN(test_reo_window);
    SR_RUN(test_resent_again);
    SR_RUN(test_lateness_seen);
    SR_RUN(test_range);
    SR_RUN(test_words);
    SR_RUN(test_lost_resends);
    return SR_TEST_RESULT();
}

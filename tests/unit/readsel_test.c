/* readsel_test.c: the requester's bitmap of READ responses placed out of
 * order (src/engine/readsel.c) alone, with explicit PSNs: marks, copies
 * and PSNs outside the tracked range refused, what cumulative progress
 * clears, which holes count as lost (RFC 6675 DupThresh, and an
 * acknowledgement past the READ), all of it across the 2^24 PSN wrap. */
#include "readsel.h"
#include "sr_test.h"
#include "sr_util.h"
#include "sr_wire.h"

#include <stdlib.h>

static void run_basic(uint32_t lo)
{
    struct sr_readsel_map *m = sr_readsel_map_new(1024, lo);
    SR_CHECK(m != NULL);
    if (!m)
        return;
    SR_CHECK_EQ(m->cap, 1024);
    /* nothing marked: nothing lost */
    SR_CHECK_EQ(sr_readsel_map_lost_limit(m, 3), lo);
    /* lo is the hole; lo+1, lo+2 placed: two later marks are not three */
    SR_CHECK(sr_readsel_map_mark(m, sr_psn_add(lo, 1)));
    SR_CHECK(sr_readsel_map_mark(m, sr_psn_add(lo, 2)));
    SR_CHECK_EQ(sr_readsel_map_lost_limit(m, 3), lo);
    /* a copy is refused, and so are PSNs before lo or past the range */
    SR_CHECK(!sr_readsel_map_mark(m, sr_psn_add(lo, 2)));
    SR_CHECK(!sr_readsel_map_mark(m, sr_psn_add(lo, SR_PSN_MASK)));
    SR_CHECK(!sr_readsel_map_mark(m, sr_psn_add(lo, 1024)));
    SR_CHECK_EQ(m->cnt, 2);
    /* the third later mark makes lo lost: every unmarked PSN before the
     * third-highest mark (lo+1) is */
    SR_CHECK(sr_readsel_map_mark(m, sr_psn_add(lo, 5)));
    SR_CHECK_EQ(sr_readsel_map_lost_limit(m, 3), sr_psn_add(lo, 1));
    SR_CHECK(sr_readsel_map_mark(m, sr_psn_add(lo, 6)));
    /* lo+3, lo+4 are before the third-highest mark (lo+2) no longer: lo+2 */
    SR_CHECK_EQ(sr_readsel_map_lost_limit(m, 3), sr_psn_add(lo, 2));
    SR_CHECK(sr_readsel_map_mark(m, sr_psn_add(lo, 7)));
    SR_CHECK_EQ(sr_readsel_map_lost_limit(m, 3), sr_psn_add(lo, 5));
    /* a larger DupThresh waits for more */
    SR_CHECK_EQ(sr_readsel_map_lost_limit(m, 5), sr_psn_add(lo, 1));
    SR_CHECK_EQ(sr_readsel_map_lost_limit(m, 6), lo);
    /* an acknowledgement past the READ: everything before it is lost */
    m->evid = sr_psn_add(lo, 40);
    m->evid_set = true;
    SR_CHECK_EQ(sr_readsel_map_lost_limit(m, 3), sr_psn_add(lo, 40));
    SR_CHECK(sr_readsel_map_has(m, sr_psn_add(lo, 6)));
    SR_CHECK(!sr_readsel_map_has(m, sr_psn_add(lo, 3)));
    /* the hole at lo filled: progress to lo+3 clears lo+1, lo+2 */
    sr_readsel_map_ack(m, sr_psn_add(lo, 3));
    SR_CHECK_EQ(m->lo, sr_psn_add(lo, 3));
    SR_CHECK_EQ(m->cnt, 3);
    SR_CHECK(!sr_readsel_map_has(m, sr_psn_add(lo, 1)));
    SR_CHECK(m->evid_set);
    /* progress past every mark and the evidence: empty again */
    sr_readsel_map_ack(m, sr_psn_add(lo, 50));
    SR_CHECK_EQ(m->cnt, 0);
    SR_CHECK(!m->evid_set);
    SR_CHECK_EQ(sr_readsel_map_lost_limit(m, 3), sr_psn_add(lo, 50));
    /* the ring's slots are reused cleanly a whole range later */
    SR_CHECK(sr_readsel_map_mark(m, sr_psn_add(lo, 50 + 1023)));
    SR_CHECK(!sr_readsel_map_has(m, sr_psn_add(lo, 50 + 1022)));
    SR_CHECK_EQ(m->hi, sr_psn_add(lo, 50 + 1024));
    free(m);
}

static void test_basic(void)
{
    run_basic(100);
}

static void test_across_wrap(void)
{
    run_basic(0xfffffe);
    run_basic(SR_PSN_MASK);
    run_basic(0xffffff - 1030);
}

int main(void)
{
    SR_RUN(test_basic);
    SR_RUN(test_across_wrap);
    return SR_TEST_RESULT();
}

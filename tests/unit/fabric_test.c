/* fabric_test.c: the fabric simulator on small leaf-spine and fat-tree
 * fabrics with real engines: every byte delivered (verified mode), packet
 * conservation at every switch, link and host, ECMP balance, a failed link
 * carrying nothing, trimming under incast, and same seed, same run. */
#include "sr_fabric.h"
#include "sr_test.h"

#include <stdlib.h>

static struct sr_fabric_cfg base_cfg(enum sr_fabric_topo topo)
{
    struct sr_fabric_cfg c = {
        .topo = topo,
        .leaves = 4,
        .spines = 2,
        .hosts_per_leaf = 4,
        .k = 4,
        .host_link = {.rate_bps = 100000000000ull, .delay_ns = 500, .buffer_bytes = 512 * 1024},
        .fabric_link = {.rate_bps = 100000000000ull, .delay_ns = 1000, .buffer_bytes = 512 * 1024},
        .kmin_bytes = 64 * 1024,
        .kmax_bytes = 256 * 1024,
        .pmax = 0.2,
        .detect_ns = 10000,
        .seed = 7,
        .mode = SR_FABRIC_VERIFIED,
    };
    return c;
}

static struct sr_fabric *make(const struct sr_fabric_cfg *c)
{
    int err = 0;
    struct sr_fabric *f = sr_fabric_create(c, &err);
    SR_CHECK(f != NULL);
    SR_CHECK_EQ(err, 0);
    return f;
}

/* Every conservation law that holds at any instant. */
static void check_conservation(struct sr_fabric *f)
{
    uint64_t link_in_flight = 0;
    for (uint32_t n = sr_fabric_host_cnt(f); n < sr_fabric_node_cnt(f); n++) {
        struct sr_fabric_switch_stats s;
        SR_CHECK_EQ(sr_fabric_switch_stats(f, (int)n, &s), 0);
        SR_CHECK_EQ(s.in, s.out + s.dropped + s.queued);
    }
    for (uint32_t i = 0; i < sr_fabric_link_cnt(f); i++) {
        struct sr_fabric_link_stats l;
        SR_CHECK_EQ(sr_fabric_link_stats(f, (int)i, &l), 0);
        SR_CHECK(l.tx_pkts >= l.arrived + l.wire_drops);
        link_in_flight += l.tx_pkts - l.arrived - l.wire_drops;
    }
    SR_CHECK_EQ(link_in_flight, sr_fabric_pending(f));
    struct sr_fabric_summary sum;
    sr_fabric_summary(f, &sum);
    SR_CHECK_EQ(sum.host_tx, sum.host_rx + sum.drops + sr_fabric_pending(f));
}

/* Run in slices, checking the laws between them, until done. */
static int run_checked(struct sr_fabric *f, uint64_t slice_ns, uint64_t limit_ns)
{
    int r = SR_FABRIC_UNTIL;
    for (uint64_t t = slice_ns; r == SR_FABRIC_UNTIL && t <= limit_ns; t += slice_ns) {
        r = sr_fabric_run(f, t);
        check_conservation(f);
    }
    return r;
}

static void check_all_ok(struct sr_fabric *f)
{
    struct sr_fabric_summary s;
    sr_fabric_summary(f, &s);
    SR_CHECK_EQ(s.done, s.flows);
    SR_CHECK_EQ(s.failed, 0);
    SR_CHECK_EQ(s.verified_bad, 0);
    for (uint32_t i = 0; i < sr_fabric_flow_cnt(f); i++) {
        struct sr_fabric_flow_info fi;
        SR_CHECK_EQ(sr_fabric_flow_info(f, (int)i, &fi), 0);
        SR_CHECK(fi.done && fi.ok);
        SR_CHECK(fi.end_ns > fi.start_ns);
    }
}

static void test_leaf_spine_permutation(void)
{
    struct sr_fabric_cfg c = base_cfg(SR_FABRIC_LEAF_SPINE);
    struct sr_fabric *f = make(&c);
    SR_CHECK_EQ(sr_fabric_host_cnt(f), 16);
    SR_CHECK_EQ(sr_fabric_node_cnt(f), 22);
    SR_CHECK_EQ(sr_fabric_link_cnt(f), 2 * (16 + 8));
    SR_CHECK_EQ(sr_fabric_permutation(f, 300 * 1000 + 7, 0), 0);
    SR_CHECK_EQ(run_checked(f, 20000, 50000000), SR_FABRIC_DONE);
    check_all_ok(f);
    struct sr_fabric_summary s;
    sr_fabric_summary(f, &s);
    /* Two leaves' worth of uplink at 4:2 oversubscription: the spines
     * carried traffic and the queues built up far enough to mark. */
    SR_CHECK(s.max_util > 0.1);
    SR_CHECK(s.events > s.host_tx);
    sr_fabric_destroy(f);
}

static void test_fat_tree_all_to_all(void)
{
    struct sr_fabric_cfg c = base_cfg(SR_FABRIC_FAT_TREE);
    struct sr_fabric *f = make(&c);
    SR_CHECK_EQ(sr_fabric_host_cnt(f), 16);
    SR_CHECK_EQ(sr_fabric_node_cnt(f), 16 + 20);
    SR_CHECK_EQ(sr_fabric_all_to_all(f, 20000, 0), 0);
    SR_CHECK_EQ(sr_fabric_flow_cnt(f), 16 * 15);
    SR_CHECK_EQ(run_checked(f, 10000, 50000000), SR_FABRIC_DONE);
    check_all_ok(f);
    /* Core links carry the inter-pod share: 12 of each host's 15 peers. */
    uint64_t core_pkts = 0;
    for (uint32_t i = 0; i < sr_fabric_link_cnt(f); i++) {
        struct sr_fabric_link_stats l;
        sr_fabric_link_stats(f, (int)i, &l);
        if (sr_fabric_node_kind(f, l.to) == SR_FABRIC_CORE)
            core_pkts += l.tx_pkts;
    }
    SR_CHECK(core_pkts > 0);
    sr_fabric_destroy(f);
}

/* Many one-packet flows from leaf0 to leaf1: their uplink choices spread
 * evenly over the spines. */
static void test_ecmp_balance(void)
{
    struct sr_fabric_cfg c = base_cfg(SR_FABRIC_LEAF_SPINE);
    c.leaves = 2;
    c.hosts_per_leaf = 16;
    c.spines = 8;
    c.mode = SR_FABRIC_HEADER_ONLY;
    struct sr_fabric *f = make(&c);
    for (int rep = 0; rep < 4; rep++)
        for (uint32_t s = 0; s < 16; s++)
            for (uint32_t d = 16; d < 32; d++)
                SR_CHECK(sr_fabric_add_flow(f, s, d, 4096, 0) >= 0);
    SR_CHECK_EQ(sr_fabric_run(f, 100000000), SR_FABRIC_DONE);
    struct sr_fabric_summary sum;
    sr_fabric_summary(f, &sum);
    SR_CHECK_EQ(sum.done, 1024);
    SR_CHECK_EQ(sum.failed, 0);
    int leaf0 = sr_fabric_find_node(f, "leaf0");
    uint64_t total = 0, lo = UINT64_MAX, hi = 0;
    for (int s = 0; s < 8; s++) {
        char name[16];
        snprintf(name, sizeof(name), "spine%d", s);
        struct sr_fabric_link_stats l;
        SR_CHECK_EQ(sr_fabric_link_stats(
                        f, sr_fabric_find_link(f, leaf0, sr_fabric_find_node(f, name)), &l),
                    0);
        total += l.tx_pkts;
        lo = l.tx_pkts < lo ? l.tx_pkts : lo;
        hi = l.tx_pkts > hi ? l.tx_pkts : hi;
    }
    /* 1024 data packets (and no retransmissions at this load) over 8
     * spines: 128 each on average, a standard deviation near 11. */
    SR_CHECK(total >= 1024);
    SR_CHECK(hi * 8 <= total * 13 / 10);
    SR_CHECK(lo * 8 >= total * 7 / 10);
    check_conservation(f);
    sr_fabric_destroy(f);
}

static void test_link_failure(void)
{
    struct sr_fabric_cfg c = base_cfg(SR_FABRIC_LEAF_SPINE);
    c.leaves = 2;
    c.hosts_per_leaf = 8;
    c.spines = 4;
    struct sr_fabric *f = make(&c);
    for (uint32_t i = 0; i < 8; i++) {
        SR_CHECK(sr_fabric_add_flow(f, i, 8 + i, 1 << 20, 0) >= 0);
        SR_CHECK(sr_fabric_add_flow(f, 8 + i, i, 1 << 20, 0) >= 0);
    }
    int leaf0 = sr_fabric_find_node(f, "leaf0"), sp1 = sr_fabric_find_node(f, "spine1");
    int up = sr_fabric_find_link(f, leaf0, sp1), down = sr_fabric_find_link(f, sp1, leaf0);
    SR_CHECK(up >= 0 && down >= 0);
    const uint64_t t_fail = 20000, t_back = 200000;
    SR_CHECK_EQ(sr_fabric_schedule_link(f, leaf0, sp1, t_fail, false), 0);
    SR_CHECK_EQ(sr_fabric_schedule_link(f, sp1, leaf0, t_back, true), 0);
    SR_CHECK_EQ(sr_fabric_schedule_link(f, leaf0, sp1 + 100, t_back, true), SR_ERR_INVAL);

    SR_CHECK_EQ(sr_fabric_run(f, t_fail), SR_FABRIC_UNTIL);
    struct sr_fabric_link_stats u0, d0, u1, d1, u2, d2;
    sr_fabric_link_stats(f, up, &u0);
    sr_fabric_link_stats(f, down, &d0);
    SR_CHECK(u0.tx_pkts > 0 || d0.tx_pkts > 0); /* the hash used spine1 */
    SR_CHECK_EQ(sr_fabric_run(f, t_fail + c.detect_ns), SR_FABRIC_UNTIL);
    sr_fabric_link_stats(f, up, &u1);
    sr_fabric_link_stats(f, down, &d1);
    SR_CHECK_EQ(run_checked(f, 10000, t_back), SR_FABRIC_UNTIL);
    sr_fabric_link_stats(f, up, &u2);
    sr_fabric_link_stats(f, down, &d2);
    /* Nothing crossed it from the failure on; nothing was even offered to
     * it once routing knew. */
    SR_CHECK_EQ(u2.arrived, u0.arrived);
    SR_CHECK_EQ(d2.arrived, d0.arrived);
    SR_CHECK_EQ(u2.tx_pkts, u1.tx_pkts);
    SR_CHECK_EQ(d2.tx_pkts, d1.tx_pkts);
    SR_CHECK_EQ(u2.q_pkts + d2.q_pkts, 0);
    SR_CHECK_EQ(run_checked(f, 20000, 100000000), SR_FABRIC_DONE);
    check_all_ok(f);
    struct sr_fabric_summary s;
    sr_fabric_summary(f, &s);
    SR_CHECK(s.drops > 0);       /* the failure cost packets ... */
    SR_CHECK(s.retransmits > 0); /* ... which the engines resent */
    sr_fabric_destroy(f);
}

/* Incast into tiny buffers with trimming: headers of cut packets reach the
 * receiver, and the flows still complete. */
static void test_incast_trim(void)
{
    struct sr_fabric_cfg c = base_cfg(SR_FABRIC_FAT_TREE);
    c.host_link.buffer_bytes = 32 * 1024;
    c.fabric_link.buffer_bytes = 32 * 1024;
    c.trim = true;
    c.trim_headroom = 4096;
    c.kmin_bytes = 8 * 1024;
    c.kmax_bytes = 24 * 1024;
    struct sr_fabric *f = make(&c);
    SR_CHECK_EQ(sr_fabric_incast(f, 5, 12, 128 * 1024, 0), 0);
    SR_CHECK_EQ(sr_fabric_incast(f, 5, 16, 1, 0), SR_ERR_INVAL);
    SR_CHECK_EQ(run_checked(f, 20000, 200000000), SR_FABRIC_DONE);
    check_all_ok(f);
    struct sr_fabric_summary s;
    sr_fabric_summary(f, &s);
    SR_CHECK(s.trimmed_rx > 0);
    SR_CHECK(s.ecn_marked > 0);
    uint64_t trimmed = 0;
    for (uint32_t i = 0; i < sr_fabric_link_cnt(f); i++) {
        struct sr_fabric_link_stats l;
        sr_fabric_link_stats(f, (int)i, &l);
        trimmed += l.trimmed;
        SR_CHECK(l.max_q_bytes <= 32 * 1024 + 4096 || l.from < (int)sr_fabric_host_cnt(f));
    }
    SR_CHECK(trimmed >= s.trimmed_rx);
    sr_fabric_destroy(f);
}

static uint64_t digest_run(uint64_t seed, enum sr_fabric_mode mode)
{
    struct sr_fabric_cfg c = base_cfg(SR_FABRIC_FAT_TREE);
    c.seed = seed;
    c.mode = mode;
    c.fabric_link.buffer_bytes = 64 * 1024;
    struct sr_fabric *f = make(&c);
    SR_CHECK_EQ(sr_fabric_permutation(f, 200000, 0), 0);
    SR_CHECK_EQ(sr_fabric_incast(f, 3, 6, 50000, 1000), 0);
    SR_CHECK_EQ(sr_fabric_schedule_link(f, sr_fabric_find_node(f, "agg0.0"),
                                        sr_fabric_find_node(f, "core0"), 5000, false),
                0);
    SR_CHECK_EQ(sr_fabric_run(f, 100000000), SR_FABRIC_DONE);
    uint64_t d = sr_fabric_digest(f);
    sr_fabric_destroy(f);
    return d;
}

static void test_determinism(void)
{
    uint64_t a = digest_run(11, SR_FABRIC_VERIFIED), b = digest_run(11, SR_FABRIC_VERIFIED);
    SR_CHECK_EQ(a, b);
    /* Header-only changes memory, not behaviour. */
    SR_CHECK_EQ(digest_run(11, SR_FABRIC_HEADER_ONLY), a);
    SR_CHECK(digest_run(12, SR_FABRIC_VERIFIED) != a);
}

/* While every link is up, routing takes a shortcut past the per-path
 * checks; with one unused host link down the checks run for every packet.
 * Both must choose the same next hops. */
static uint64_t ecmp_run(bool cut_idle_host, enum sr_fabric_topo topo)
{
    struct sr_fabric_cfg c = base_cfg(topo);
    c.detect_ns = 0;
    struct sr_fabric *f = make(&c);
    for (uint32_t i = 0; i < 15; i++)
        SR_CHECK(sr_fabric_add_flow(f, i, (i + 5) % 15, 30000 + 1000 * i, 0) >= 0);
    if (cut_idle_host) {
        int h15 = sr_fabric_find_node(f, "h15"), sw = -1;
        for (uint32_t i = 0; i < sr_fabric_link_cnt(f); i++) {
            struct sr_fabric_link_stats l;
            sr_fabric_link_stats(f, (int)i, &l);
            if (l.from == h15)
                sw = l.to;
        }
        SR_CHECK_EQ(sr_fabric_schedule_link(f, h15, sw, 0, false), 0);
    }
    SR_CHECK_EQ(sr_fabric_run(f, 100000000), SR_FABRIC_DONE);
    check_all_ok(f);
    uint64_t d = sr_fabric_digest(f);
    sr_fabric_destroy(f);
    return d;
}

static void test_ecmp_shortcut(void)
{
    SR_CHECK_EQ(ecmp_run(false, SR_FABRIC_LEAF_SPINE), ecmp_run(true, SR_FABRIC_LEAF_SPINE));
    SR_CHECK_EQ(ecmp_run(false, SR_FABRIC_FAT_TREE), ecmp_run(true, SR_FABRIC_FAT_TREE));
}

static void test_errors(void)
{
    struct sr_fabric_cfg c = base_cfg(SR_FABRIC_FAT_TREE);
    int err = 0;
    c.k = 5;
    SR_CHECK(sr_fabric_create(&c, &err) == NULL);
    SR_CHECK_EQ(err, SR_ERR_INVAL);
    c.k = 4;
    c.host_link.rate_bps = 0;
    SR_CHECK(sr_fabric_create(&c, &err) == NULL);
    c = base_cfg(SR_FABRIC_FAT_TREE);
    struct sr_fabric *f = make(&c);
    SR_CHECK_EQ(sr_fabric_add_flow(f, 1, 1, 10, 0), SR_ERR_INVAL);
    SR_CHECK_EQ(sr_fabric_add_flow(f, 1, 16, 10, 0), SR_ERR_INVAL);
    SR_CHECK_EQ(sr_fabric_add_flow(f, 1, 2, 10, 100), 0);
    SR_CHECK_EQ(sr_fabric_add_flow(f, 1, 2, 10, 50), SR_ERR_INVAL);
    SR_CHECK_EQ(sr_fabric_find_link(f, 0, 1), SR_ERR_INVAL);
    char name[32];
    sr_fabric_node_name(f, 16, name, sizeof(name));
    SR_CHECK(!strcmp(name, "edge0.0"));
    sr_fabric_node_name(f, 35, name, sizeof(name));
    SR_CHECK(!strcmp(name, "core3"));
    SR_CHECK_EQ(sr_fabric_find_node(f, "agg3.1"), 16 + 8 + 7);
    SR_CHECK_EQ(sr_fabric_run(f, 10000000), SR_FABRIC_DONE);
    SR_CHECK_EQ(sr_fabric_add_flow(f, 1, 2, 10, 200), SR_ERR_INVAL);
    sr_fabric_destroy(f);
}

int main(void)
{
    SR_RUN(test_errors);
    SR_RUN(test_leaf_spine_permutation);
    SR_RUN(test_fat_tree_all_to_all);
    SR_RUN(test_ecmp_balance);
    SR_RUN(test_ecmp_shortcut);
    SR_RUN(test_link_failure);
    SR_RUN(test_incast_trim);
    SR_RUN(test_determinism);
    return SR_TEST_RESULT();
}

/* fabric_test.c: the fabric simulator on small leaf-spine and fat-tree
 * fabrics with real engines: every byte delivered (verified mode), packet
 * conservation at every switch, link and host, ECMP balance, a failed link
 * carrying nothing, trimming under incast, ring and halving-doubling
 * all-reduce as dependent steps, random loss, the delivered-bytes series,
 * the link tap, the engine-config hook, and same seed, same run. */
#include "sr_engine.h"
#include "sr_fabric.h"
#include "sr_test.h"

#include <stdio.h>
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
        SR_CHECK(l.tx_pkts >= l.arrived + l.wire_drops + l.loss_drops);
        link_in_flight += l.tx_pkts - l.arrived - l.wire_drops - l.loss_drops;
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

/* Every step started exactly when the step it waited for arrived, and
 * arrived (its data placed and verified) after it started. */
static void check_steps(struct sr_fabric *f, int coll, uint32_t want_flows)
{
    struct sr_fabric_coll_info ci;
    SR_CHECK_EQ(sr_fabric_coll_info(f, coll, &ci), 0);
    SR_CHECK_EQ(ci.flows, want_flows);
    SR_CHECK_EQ(ci.arrived, want_flows);
    uint64_t last = 0;
    uint32_t firsts = 0;
    for (uint32_t i = 0; i < sr_fabric_flow_cnt(f); i++) {
        struct sr_fabric_flow_info fi, pi;
        sr_fabric_flow_info(f, (int)i, &fi);
        if (fi.coll != (uint32_t)coll + 1)
            continue;
        SR_CHECK(fi.arrive_ns != UINT64_MAX && fi.arrive_ns > fi.start_ns);
        SR_CHECK(fi.arrive_ns <= fi.end_ns);
        last = fi.arrive_ns > last ? fi.arrive_ns : last;
        if (fi.after < 0) {
            firsts++;
            SR_CHECK_EQ(fi.start_ns, ci.start_ns);
            continue;
        }
        SR_CHECK_EQ(sr_fabric_flow_info(f, fi.after, &pi), 0);
        SR_CHECK_EQ(pi.dst, fi.src);
        SR_CHECK_EQ(fi.start_ns, pi.arrive_ns);
    }
    SR_CHECK_EQ(firsts, sr_fabric_host_cnt(f));
    SR_CHECK_EQ(ci.end_ns, last);
}

static void test_ring_allreduce(void)
{
    struct sr_fabric_cfg c = base_cfg(SR_FABRIC_LEAF_SPINE);
    struct sr_fabric *f = make(&c);
    const uint64_t bytes = 16 * 20000; /* 20,000 per chunk: 5 packets */
    int coll = sr_fabric_ring_allreduce(f, bytes, 1000);
    SR_CHECK_EQ(coll, 0);
    SR_CHECK_EQ(sr_fabric_flow_cnt(f), 16 * 30);
    SR_CHECK_EQ(run_checked(f, 20000, 100000000), SR_FABRIC_DONE);
    check_all_ok(f);
    check_steps(f, coll, 16 * 30);
    struct sr_fabric_summary s;
    sr_fabric_summary(f, &s);
    SR_CHECK_EQ(s.colls, 1);
    SR_CHECK_EQ(s.colls_done, 1);
    /* 30 dependent steps cannot take less than 30 one-way trips of at
     * least two host links (500 ns each) plus a chunk's serialization. */
    SR_CHECK(s.coll_max_ns > 30 * (2 * 500 + 20000 * 8 / 100));
    for (uint32_t i = 0; i < sr_fabric_flow_cnt(f); i++) {
        struct sr_fabric_flow_info fi;
        sr_fabric_flow_info(f, (int)i, &fi);
        SR_CHECK_EQ(fi.dst, (fi.src + 1) % 16);
        SR_CHECK_EQ(fi.bytes, 20000);
    }
    sr_fabric_destroy(f);
}

static void test_hd_allreduce(void)
{
    struct sr_fabric_cfg c = base_cfg(SR_FABRIC_FAT_TREE);
    struct sr_fabric *f = make(&c);
    const uint64_t bytes = 256 * 1024;
    int coll = sr_fabric_hd_allreduce(f, bytes, 0);
    SR_CHECK_EQ(coll, 0);
    SR_CHECK_EQ(sr_fabric_flow_cnt(f), 16 * 8);
    SR_CHECK_EQ(run_checked(f, 20000, 100000000), SR_FABRIC_DONE);
    check_all_ok(f);
    check_steps(f, coll, 16 * 8);
    /* Each host sends 2 (S - S/n) in all, to partners at distances 8, 4,
     * 2, 1 and back. */
    uint64_t sent[16] = {0};
    for (uint32_t i = 0; i < sr_fabric_flow_cnt(f); i++) {
        struct sr_fabric_flow_info fi;
        sr_fabric_flow_info(f, (int)i, &fi);
        uint32_t d = fi.src ^ fi.dst;
        SR_CHECK(d == 1 || d == 2 || d == 4 || d == 8);
        sent[fi.src] += fi.bytes;
    }
    for (int h = 0; h < 16; h++)
        SR_CHECK_EQ(sent[h], 2 * (bytes - bytes / 16));
    sr_fabric_destroy(f);
    /* 12 hosts: not a power of two. */
    c = base_cfg(SR_FABRIC_LEAF_SPINE);
    c.leaves = 3;
    f = make(&c);
    SR_CHECK_EQ(sr_fabric_hd_allreduce(f, bytes, 0), SR_ERR_INVAL);
    SR_CHECK_EQ(sr_fabric_ring_allreduce(f, 0, 0), SR_ERR_INVAL);
    sr_fabric_destroy(f);
}

static void test_step_errors(void)
{
    struct sr_fabric_cfg c = base_cfg(SR_FABRIC_LEAF_SPINE);
    struct sr_fabric *f = make(&c);
    int plain = sr_fabric_add_flow(f, 0, 1, 100, 0);
    SR_CHECK_EQ(plain, 0);
    SR_CHECK_EQ(sr_fabric_add_step(f, 0, 1, 2, 100, -1, 0), SR_ERR_INVAL); /* no collective */
    int coll = sr_fabric_coll_new(f);
    SR_CHECK_EQ(coll, 0);
    int a = sr_fabric_add_step(f, coll, 1, 2, 100, -1, 0);
    SR_CHECK(a > 0);
    SR_CHECK_EQ(sr_fabric_add_step(f, coll, 3, 4, 100, a, 0), SR_ERR_INVAL);     /* 2 != 3 */
    SR_CHECK_EQ(sr_fabric_add_step(f, coll, 1, 3, 100, plain, 0), SR_ERR_INVAL); /* plain */
    SR_CHECK_EQ(sr_fabric_add_step(f, coll, 2, 3, 100, a + 5, 0), SR_ERR_INVAL); /* unknown */
    SR_CHECK_EQ(sr_fabric_add_step(f, coll, 2, 2, 100, a, 0), SR_ERR_INVAL);
    /* A dependent step's start time does not order flows. */
    SR_CHECK(sr_fabric_add_step(f, coll, 2, 3, 100, a, 5) > a);
    SR_CHECK(sr_fabric_add_flow(f, 5, 6, 100, 0) >= 0);
    SR_CHECK_EQ(sr_fabric_background(f, 0.0, 100, 0), SR_ERR_INVAL);
    SR_CHECK_EQ(sr_fabric_background(f, 1.5, 100, 0), SR_ERR_INVAL);
    SR_CHECK_EQ(sr_fabric_set_tap(f, 1000, NULL, NULL), SR_ERR_INVAL);
    SR_CHECK_EQ(sr_fabric_run(f, 10000000), SR_FABRIC_DONE);
    check_all_ok(f);
    sr_fabric_destroy(f);
}

/* Random loss on every link: the drops are counted where they happen, go
 * back-N recovers them, every byte still arrives, and the delivered
 * series counts each payload byte exactly once. */
static void test_loss_and_series(void)
{
    struct sr_fabric_cfg c = base_cfg(SR_FABRIC_FAT_TREE);
    c.loss = 2e-3;
    c.sample_ns = 10000;
    c.timeout = 4; /* about 65 us: the tail loss of a chunk waits for it */
    struct sr_fabric *f = make(&c);
    SR_CHECK_EQ(sr_fabric_permutation(f, 200000, 0), 0);
    SR_CHECK_EQ(sr_fabric_ring_allreduce(f, 16 * 8192, 0), 0);
    SR_CHECK_EQ(run_checked(f, 20000, 1000000000), SR_FABRIC_DONE);
    check_all_ok(f);
    check_steps(f, 0, 16 * 30);
    uint64_t lost = 0;
    for (uint32_t i = 0; i < sr_fabric_link_cnt(f); i++) {
        struct sr_fabric_link_stats l;
        sr_fabric_link_stats(f, (int)i, &l);
        lost += l.loss_drops;
    }
    struct sr_fabric_summary s;
    sr_fabric_summary(f, &s);
    SR_CHECK(lost > 0);
    SR_CHECK(s.drops >= lost);
    SR_CHECK(s.retransmits > 0);
    uint32_t cnt = 0;
    const uint64_t *v = sr_fabric_series(f, &cnt);
    SR_CHECK(v != NULL);
    SR_CHECK(cnt >= s.end_ns / c.sample_ns);
    uint64_t sum = 0;
    for (uint32_t i = 0; v && i < cnt; i++)
        sum += v[i];
    SR_CHECK_EQ(sum, 16 * 200000 + 16 * 30 * 8192);
    sr_fabric_destroy(f);
}

/* The watched link's samples add up to its counters, and each host's
 * series to what its uplink carried and what its flow delivered; a
 * staggered incast starts each sender at its own time. */
static void test_watch_series(void)
{
    struct sr_fabric_cfg c = base_cfg(SR_FABRIC_LEAF_SPINE);
    c.leaves = 1;
    c.spines = 1;
    c.hosts_per_leaf = 9;
    c.host_link.buffer_bytes = 64 * 1024;
    c.kmin_bytes = 8 * 1024;
    c.kmax_bytes = 48 * 1024;
    c.sample_ns = 1000;
    c.host_series = true;
    c.timeout = 4;
    struct sr_fabric *f = make(&c);
    SR_CHECK_EQ(sr_fabric_incast_step(f, 0, 8, 256 * 1024, 0, 5000), 0);
    int in = sr_fabric_find_link(f, sr_fabric_find_node(f, "leaf0"), 0);
    SR_CHECK(in >= 0);
    SR_CHECK_EQ(sr_fabric_watch_link(f, -1), SR_ERR_INVAL);
    SR_CHECK_EQ(sr_fabric_watch_link(f, in), 0);
    SR_CHECK_EQ(run_checked(f, 7000, 1000000000), SR_FABRIC_DONE);
    check_all_ok(f);
    struct sr_fabric_link_stats l;
    sr_fabric_link_stats(f, in, &l);
    SR_CHECK(l.drops > 0);
    SR_CHECK(l.ecn_marked > 0);
    uint32_t cnt = 0;
    const struct sr_fabric_qsample *q = sr_fabric_queue_series(f, &cnt);
    SR_CHECK(q != NULL);
    SR_CHECK_EQ(cnt, sr_fabric_now(f) / c.sample_ns + 1);
    uint64_t drops = 0, marks = 0, maxq = 0;
    for (uint32_t i = 0; q && i < cnt; i++) {
        drops += q[i].drops;
        marks += q[i].marks;
        maxq = q[i].max_q_bytes > maxq ? q[i].max_q_bytes : maxq;
        SR_CHECK(q[i].q_bytes <= q[i].max_q_bytes);
        SR_CHECK(q[i].max_q_bytes <= 64 * 1024 + 4200);
    }
    SR_CHECK_EQ(q ? q[0].q_bytes : 1, 0);
    SR_CHECK_EQ(drops, l.drops);
    SR_CHECK_EQ(marks, l.ecn_marked);
    SR_CHECK_EQ(maxq, l.max_q_bytes);
    for (uint32_t i = 0; i < sr_fabric_flow_cnt(f); i++) {
        struct sr_fabric_flow_info fi;
        sr_fabric_flow_info(f, (int)i, &fi);
        SR_CHECK_EQ(fi.start_ns, (uint64_t)i * 5000);
        uint32_t ns = 0, nd = 0;
        const uint64_t *sv = sr_fabric_host_series(f, fi.src, false, &ns);
        const uint64_t *dv = sr_fabric_host_series(f, fi.src, true, &nd);
        SR_CHECK(sv != NULL && dv != NULL);
        uint64_t sent = 0, got = 0;
        uint32_t first = UINT32_MAX;
        for (uint32_t k = 0; sv && k < ns; k++) {
            sent += sv[k];
            if (sv[k] && first == UINT32_MAX)
                first = k;
        }
        for (uint32_t k = 0; dv && k < nd; k++)
            got += dv[k];
        SR_CHECK_EQ(first, fi.start_ns / c.sample_ns);
        struct sr_fabric_link_stats up;
        sr_fabric_link_stats(
            f, sr_fabric_find_link(f, (int)fi.src, sr_fabric_find_node(f, "leaf0")), &up);
        SR_CHECK_EQ(sent, up.tx_bytes);
        SR_CHECK_EQ(got, 256 * 1024);
    }
    SR_CHECK(sr_fabric_host_series(f, 0, true, &cnt) == NULL || cnt == 0);
    sr_fabric_destroy(f);
}

struct tap_count {
    uint64_t pkts, bytes, last_ts;
    bool ordered;
};

static void tap_fn(void *ctx, uint64_t ts_ns, const uint8_t *data, uint32_t stored, uint32_t len)
{
    struct tap_count *t = ctx;
    t->ordered &= ts_ns >= t->last_ts && stored <= len && (data[0] >> 4) == 4;
    t->last_ts = ts_ns;
    t->pkts++;
    t->bytes += len;
}

/* The tap sees exactly what the link accepted; the pcap file holds one
 * record per packet. */
static void test_tap_pcap(void)
{
    struct sr_fabric_cfg c = base_cfg(SR_FABRIC_LEAF_SPINE);
    c.mode = SR_FABRIC_HEADER_ONLY;
    struct sr_fabric *f = make(&c);
    SR_CHECK_EQ(sr_fabric_ring_allreduce(f, 16 * 10000, 0), 0);
    int link =
        sr_fabric_find_link(f, sr_fabric_find_node(f, "h3"), sr_fabric_find_node(f, "leaf0"));
    SR_CHECK(link >= 0);
    struct tap_count t = {.ordered = true};
    SR_CHECK_EQ(sr_fabric_set_tap(f, link, tap_fn, &t), 0);
    SR_CHECK_EQ(sr_fabric_run(f, 100000000), SR_FABRIC_DONE);
    struct sr_fabric_link_stats l;
    sr_fabric_link_stats(f, link, &l);
    SR_CHECK(t.pkts > 30);
    SR_CHECK_EQ(t.pkts, l.tx_pkts);
    SR_CHECK_EQ(t.bytes, l.tx_bytes);
    SR_CHECK(t.ordered);
    sr_fabric_destroy(f);

    f = make(&c);
    SR_CHECK_EQ(sr_fabric_ring_allreduce(f, 16 * 10000, 0), 0);
    FILE *out = tmpfile();
    SR_CHECK(out != NULL);
    static struct sr_fabric_pcap pc;
    SR_CHECK_EQ(sr_fabric_pcap_start(f, link, out, &pc), 0);
    SR_CHECK_EQ(sr_fabric_run(f, 100000000), SR_FABRIC_DONE);
    sr_fabric_link_stats(f, link, &l);
    fflush(out);
    /* Global header, then per packet a record header, Ethernet and the
     * whole packet (header-only payloads written out as zeros). */
    SR_CHECK_EQ(ftell(out), 24 + l.tx_pkts * (16 + 14) + l.tx_bytes);
    SR_CHECK_EQ(pc.pkts, l.tx_pkts);
    SR_CHECK(!pc.err);
    fclose(out);
    sr_fabric_destroy(f);
}

struct hook_seen {
    uint32_t calls, mask, bad;
    uint32_t set_window; /* 0: leave the configuration alone */
};

static void hook_fn(void *ctx, uint32_t host, struct sr_engine_cfg *ec)
{
    struct hook_seen *h = ctx;
    h->calls++;
    h->mask |= 1u << host;
    /* Filled in already: the host's address and the fabric's window. */
    if (ec->gid[15] != host || ec->gid[12] != 10 || ec->window_pkts != 64 || !ec->ops.tx)
        h->bad++;
    if (h->set_window)
        ec->window_pkts = h->set_window;
}

static uint64_t hook_run(struct hook_seen *seen)
{
    struct sr_fabric_cfg c = base_cfg(SR_FABRIC_LEAF_SPINE);
    if (seen) {
        c.engine_cfg = hook_fn;
        c.engine_cfg_ctx = seen;
    }
    struct sr_fabric *f = make(&c);
    SR_CHECK_EQ(sr_fabric_permutation(f, 100000, 0), 0);
    SR_CHECK_EQ(sr_fabric_run(f, 100000000), SR_FABRIC_DONE);
    check_all_ok(f);
    uint64_t d = sr_fabric_digest(f);
    sr_fabric_destroy(f);
    return d;
}

/* The hook sees every host's engine configuration once, filled in and
 * before the engine exists; what it changes takes effect, and leaving it
 * alone changes nothing. */
static void test_engine_cfg_hook(void)
{
    struct hook_seen seen = {0};
    uint64_t a = hook_run(&seen);
    SR_CHECK_EQ(seen.calls, 16);
    SR_CHECK_EQ(seen.mask, 0xffff);
    SR_CHECK_EQ(seen.bad, 0);
    SR_CHECK_EQ(hook_run(NULL), a);
    struct hook_seen narrow = {.set_window = 2};
    SR_CHECK(hook_run(&narrow) != a);
}

/* A collective across a cable that fails mid-run: nothing crosses the cable
 * from the failure on, nothing is offered to it once routing knows, and
 * every step still arrives and verifies. */
static void test_collective_link_failure(void)
{
    struct sr_fabric_cfg c = base_cfg(SR_FABRIC_LEAF_SPINE);
    struct sr_fabric *f = make(&c);
    int coll = sr_fabric_hd_allreduce(f, 512 * 1024, 0);
    SR_CHECK_EQ(coll, 0);
    int leaf0 = sr_fabric_find_node(f, "leaf0"), sp1 = sr_fabric_find_node(f, "spine1");
    int up = sr_fabric_find_link(f, leaf0, sp1), down = sr_fabric_find_link(f, sp1, leaf0);
    const uint64_t t_fail = 15000;
    SR_CHECK_EQ(sr_fabric_schedule_link(f, leaf0, sp1, t_fail, false), 0);
    SR_CHECK_EQ(sr_fabric_run(f, t_fail), SR_FABRIC_UNTIL);
    struct sr_fabric_link_stats u0, d0, u1, d1, u2, d2;
    sr_fabric_link_stats(f, up, &u0);
    sr_fabric_link_stats(f, down, &d0);
    SR_CHECK(u0.tx_pkts + d0.tx_pkts > 0); /* the collective used the cable */
    SR_CHECK_EQ(sr_fabric_run(f, t_fail + c.detect_ns), SR_FABRIC_UNTIL);
    sr_fabric_link_stats(f, up, &u1);
    sr_fabric_link_stats(f, down, &d1);
    SR_CHECK_EQ(run_checked(f, 20000, 200000000), SR_FABRIC_DONE);
    sr_fabric_link_stats(f, up, &u2);
    sr_fabric_link_stats(f, down, &d2);
    SR_CHECK_EQ(u2.arrived, u0.arrived);
    SR_CHECK_EQ(d2.arrived, d0.arrived);
    SR_CHECK_EQ(u2.tx_pkts, u1.tx_pkts);
    SR_CHECK_EQ(d2.tx_pkts, d1.tx_pkts);
    check_all_ok(f);
    check_steps(f, coll, 16 * 8);
    sr_fabric_destroy(f);
}

/* Selective recovery, one path per QP. */
static void sack_spray_fn_1(void *ctx, uint32_t host, struct sr_engine_cfg *ec)
{
    (void)ctx;
    (void)host;
    ec->sack = true;
}

/* Selective recovery and spraying over 4 paths on every host. */
static void sack_spray_fn(void *ctx, uint32_t host, struct sr_engine_cfg *ec)
{
    (void)ctx;
    ec->sack = true;
    ec->paths = 4;
    ec->path_policy = 1; /* spray */
    ec->paths_seed = host;
}

/* 16 entropy values per QP; every host takes part. */
static void spray16_fn(void *ctx, uint32_t host, struct sr_engine_cfg *ec)
{
    (void)ctx;
    ec->sack = true;
    ec->paths = 16;
    ec->path_policy = 1; /* spray */
    ec->paths_seed = host;
}

/* One QP from leaf0 to leaf1 over a 4-spine leaf-spine: sprayed, its data
 * crosses every spine; on one path, exactly one; every byte arrives. */
static void test_spray_uses_every_path(void)
{
    for (int spray = 0; spray < 2; spray++) {
        struct sr_fabric_cfg c = base_cfg(SR_FABRIC_LEAF_SPINE);
        c.spines = 4;
        if (spray)
            c.engine_cfg = spray16_fn;
        else
            c.engine_cfg = sack_spray_fn_1;
        struct sr_fabric *f = make(&c);
        SR_CHECK(sr_fabric_add_flow(f, 0, 4, 4 << 20, 0) >= 0); /* h0 on leaf0 to h4 on leaf1 */
        SR_CHECK_EQ(run_checked(f, 20000, 200000000), SR_FABRIC_DONE);
        check_all_ok(f);
        int leaf0 = sr_fabric_find_node(f, "leaf0");
        uint32_t used = 0;
        uint64_t least = UINT64_MAX, most = 0;
        for (int sp = 0; sp < 4; sp++) {
            char name[16];
            snprintf(name, sizeof(name), "spine%d", sp);
            struct sr_fabric_link_stats l;
            sr_fabric_link_stats(f, sr_fabric_find_link(f, leaf0, sr_fabric_find_node(f, name)),
                                 &l);
            used += l.tx_bytes > (1u << 20) / 8; /* more than ACKs: data */
            least = l.tx_bytes < least ? l.tx_bytes : least;
            most = l.tx_bytes > most ? l.tx_bytes : most;
        }
        if (spray) {
            /* 16 values hash unevenly onto 4 spines (ECMP is oblivious),
             * but each takes a share of the data */
            SR_CHECK_EQ(used, 4u);
            SR_CHECK(least > 0 && most < (4u << 20));
        } else {
            SR_CHECK_EQ(used, 1u);
        }
        sr_fabric_destroy(f);
    }
}

static uint64_t coll_digest(uint64_t seed, enum sr_fabric_mode mode, bool hd, bool sack)
{
    struct sr_fabric_cfg c = base_cfg(SR_FABRIC_FAT_TREE);
    if (sack)
        c.engine_cfg = sack_spray_fn;
    c.seed = seed;
    c.mode = mode;
    c.loss = 1e-3;
    c.sample_ns = 5000;
    c.timeout = 4;
    c.fabric_link.buffer_bytes = 64 * 1024;
    struct sr_fabric *f = make(&c);
    SR_CHECK(sr_fabric_background(f, 0.5, 100000, 0) == 0);
    SR_CHECK(hd ? sr_fabric_hd_allreduce(f, 128 * 1024, 0) >= 0
                : sr_fabric_ring_allreduce(f, 128 * 1024, 0) >= 0);
    SR_CHECK_EQ(sr_fabric_run(f, 1000000000), SR_FABRIC_DONE);
    check_all_ok(f);
    uint64_t d = sr_fabric_digest(f);
    sr_fabric_destroy(f);
    return d;
}

static void test_collective_determinism(void)
{
    /* With SACK on, header-only mode must still carry the SACKs' bitmaps
     * (control, not data): the run is then the same as the verified one. */
    for (int sack = 0; sack < 2; sack++)
        for (int hd = 0; hd < 2; hd++) {
            uint64_t a = coll_digest(21, SR_FABRIC_VERIFIED, hd, sack);
            SR_CHECK_EQ(coll_digest(21, SR_FABRIC_VERIFIED, hd, sack), a);
            SR_CHECK_EQ(coll_digest(21, SR_FABRIC_HEADER_ONLY, hd, sack), a);
            SR_CHECK(coll_digest(22, SR_FABRIC_HEADER_ONLY, hd, sack) != a);
        }
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
    SR_RUN(test_ring_allreduce);
    SR_RUN(test_hd_allreduce);
    SR_RUN(test_step_errors);
    SR_RUN(test_loss_and_series);
    SR_RUN(test_watch_series);
    SR_RUN(test_tap_pcap);
    SR_RUN(test_engine_cfg_hook);
    SR_RUN(test_collective_link_failure);
    SR_RUN(test_collective_determinism);
    SR_RUN(test_spray_uses_every_path);
    return SR_TEST_RESULT();
}

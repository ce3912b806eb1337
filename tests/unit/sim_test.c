/* sim_test.c: tests of src/drivers/sim: exact serialization and delay
 * timing, tail drop, every fault (loss, dup, reorder, corrupt) and ECN
 * marking, seed determinism, re-entrant sends, node deadlines, the run
 * loop's three results, argument errors, and a 2000-node ring. Packets are
 * built with sr_l3_encode; the simulator is observed only through its API
 * and what the nodes receive. */
#include "sr_sim.h"
#include "sr_test.h"
#include "sr_util.h"
#include "sr_wire.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>

/* ---- helpers: addresses, packets, recording nodes ---- */

/* Node i's address: fd00::i for IPv6 runs, ::ffff:10.a.b.c for IPv4 runs. */
static void addr_of(int i, bool v6, uint8_t addr[16])
{
    uint8_t v4[4] = {10, (uint8_t)(i >> 16), (uint8_t)(i >> 8), (uint8_t)i};
    if (!v6) {
        sr_sim_addr_v4(addr, v4);
        return;
    }
    memset(addr, 0, 16);
    addr[0] = 0xfd;
    sr_put_be32(addr + 12, (uint32_t)i);
}

/* An IP/UDP packet of ip_len bytes in total from node `from` to node `to`;
 * the UDP payload starts with the 32-bit tag, then a pattern derived from
 * it, so a packet can be rebuilt from its tag for comparison. */
static size_t mk_pkt(uint8_t *buf, bool v6, int from, int to, uint8_t tos, size_t ip_len,
                     uint32_t tag)
{
    struct sr_l3_addr a = {.ipv6 = v6,
                           .src_port = (uint16_t)(0xc000 | (tag & 0x3fff)),
                           .tos = tos,
                           .ttl = 64,
                           .ip_id = (uint16_t)tag};
    uint8_t src[16], dst[16];
    addr_of(from, v6, src);
    addr_of(to, v6, dst);
    memcpy(a.src, v6 ? src : src + 12, v6 ? 16 : 4);
    memcpy(a.dst, v6 ? dst : dst + 12, v6 ? 16 : 4);
    size_t hdr = v6 ? SR_IPV6_HDR_LEN + SR_UDP_HDR_LEN : SR_IPV4_HDR_LEN + SR_UDP_HDR_LEN;
    int h = sr_l3_encode(&a, ip_len - hdr, buf, ip_len);
    SR_CHECK_EQ(h, hdr);
    for (size_t i = hdr; i < ip_len; i++)
        buf[i] = (uint8_t)(tag * 131 + i * 7);
    sr_put_be32(buf + hdr, tag);
    return ip_len;
}

static uint32_t pkt_tag(const uint8_t *pkt)
{
    size_t hdr =
        (pkt[0] >> 4) == 6 ? SR_IPV6_HDR_LEN + SR_UDP_HDR_LEN : SR_IPV4_HDR_LEN + SR_UDP_HDR_LEN;
    return sr_get_be32(pkt + hdr);
}

static uint64_t fnv1a(const uint8_t *p, size_t len)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < len; i++)
        h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

/* One observed event: a delivery ('R') or an advance() call ('A'). */
struct trec {
    char kind;
    int node;
    uint64_t t;
    uint32_t len;
    uint64_t hash;
    uint8_t *data;
};

struct tlog {
    struct trec *r;
    size_t cnt, cap;
};

static void log_add(struct tlog *log, char kind, int node, uint64_t t, const uint8_t *p, size_t len)
{
    if (log->cnt == log->cap) {
        log->cap = log->cap ? log->cap * 2 : 64;
        log->r = realloc(log->r, log->cap * sizeof(*log->r));
        if (!log->r)
            abort();
    }
    struct trec *r = &log->r[log->cnt++];
    *r = (struct trec){.kind = kind, .node = node, .t = t, .len = (uint32_t)len};
    if (p) {
        r->hash = fnv1a(p, len);
        r->data = malloc(len);
        if (!r->data)
            abort();
        memcpy(r->data, p, len);
    }
}

static void log_free(struct tlog *log)
{
    for (size_t i = 0; i < log->cnt; i++)
        free(log->r[i].data);
    free(log->r);
    memset(log, 0, sizeof(*log));
}

/* A test node: records what it sees and, when configured, forwards, replies
 * or sends on a timer. */
struct tnode {
    struct sr_sim *sim;
    struct tlog *log;
    int id;
    bool v6;
    int fwd_to;       /* >= 0: on rx, send a same-size packet to this node */
    uint64_t *budget; /* forwards left, shared by all nodes of a run */
    bool reply;       /* on rx of a big packet, answer the sender with a small one */
    bool reenter;     /* on rx, call sr_sim_run (must be refused) */
    int reenter_rc;
    uint64_t dl[8]; /* one-shot deadlines, ascending */
    size_t dl_cnt, dl_idx;
    uint64_t tick_ns; /* periodic sender to a random peer among peer_cnt */
    uint64_t next_tick;
    int ticks_left, peer_cnt;
    uint32_t next_tag;
};

static void tnode_init(struct tnode *n, struct sr_sim *sim, struct tlog *log, int id, bool v6)
{
    memset(n, 0, sizeof(*n));
    n->sim = sim;
    n->log = log;
    n->id = id;
    n->v6 = v6;
    n->fwd_to = -1;
}

static void tnode_rx(void *ctx, const uint8_t *pkt, size_t len, uint64_t now_ns)
{
    struct tnode *n = ctx;
    uint8_t buf[2048];
    log_add(n->log, 'R', n->id, now_ns, pkt, len);
    if (n->fwd_to >= 0 && *n->budget > 0) {
        (*n->budget)--;
        size_t l = mk_pkt(buf, n->v6, n->id, n->fwd_to, 0, len, pkt_tag(pkt));
        SR_CHECK_EQ(sr_sim_send(n->sim, n->id, buf, l), 0);
    }
    if (n->reply && len > 200) {
        /* The sender may have been corrupted away: then there is no one to
         * answer, which is fine as long as both runs agree. */
        uint8_t src[16];
        if ((pkt[0] >> 4) == 6)
            memcpy(src, pkt + 8, 16);
        else
            sr_sim_addr_v4(src, pkt + 12);
        int peer = sr_sim_find_node(n->sim, src);
        if (peer >= 0 && peer != n->id) {
            size_t l = mk_pkt(buf, n->v6, n->id, peer, 0x02, 100, n->next_tag++);
            (void)sr_sim_send(n->sim, n->id, buf, l);
        }
    }
    if (n->reenter)
        n->reenter_rc = sr_sim_run(n->sim, UINT64_MAX, NULL, NULL);
}

static uint64_t tnode_next_deadline(void *ctx)
{
    struct tnode *n = ctx;
    uint64_t d = n->dl_idx < n->dl_cnt ? n->dl[n->dl_idx] : UINT64_MAX;
    if (n->ticks_left > 0)
        d = SR_MIN(d, n->next_tick);
    return d;
}

static void tnode_advance(void *ctx, uint64_t now_ns)
{
    struct tnode *n = ctx;
    log_add(n->log, 'A', n->id, now_ns, NULL, 0);
    while (n->dl_idx < n->dl_cnt && n->dl[n->dl_idx] <= now_ns)
        n->dl_idx++;
    if (n->ticks_left > 0 && n->next_tick <= now_ns) {
        uint8_t buf[1500];
        int peer = (int)(sr_sim_rand(n->sim) % (uint64_t)(n->peer_cnt - 1));
        peer += peer >= n->id; /* any node but this one */
        size_t len = 300 + sr_sim_rand(n->sim) % 1000;
        size_t l = mk_pkt(buf, n->v6, n->id, peer, 0x02, len, n->next_tag++);
        SR_CHECK_EQ(sr_sim_send(n->sim, n->id, buf, l), 0);
        n->ticks_left--;
        n->next_tick += n->tick_ns;
    }
}

static const struct sr_sim_node_ops rx_only_ops = {.rx = tnode_rx};
static const struct sr_sim_node_ops full_ops = {
    .rx = tnode_rx, .next_deadline = tnode_next_deadline, .advance = tnode_advance};

/* cnt nodes on one log; with `full` they also have (possibly empty) timers. */
static struct sr_sim *mk_net(uint64_t seed, struct tnode *nodes, int cnt, bool v6, struct tlog *log,
                             bool full)
{
    struct sr_sim *sim = sr_sim_create(seed);
    SR_CHECK(sim != NULL);
    if (!sim)
        abort();
    for (int i = 0; i < cnt; i++) {
        uint8_t addr[16];
        addr_of(i, v6, addr);
        tnode_init(&nodes[i], sim, log, i, v6);
        SR_CHECK_EQ(sr_sim_add_node(sim, addr, full ? &full_ops : &rx_only_ops, &nodes[i]), i);
    }
    return sim;
}

static int send_tag(struct sr_sim *sim, bool v6, int from, int to, uint8_t tos, size_t len,
                    uint32_t tag)
{
    uint8_t buf[2048];
    mk_pkt(buf, v6, from, to, tos, len, tag);
    return sr_sim_send(sim, from, buf, len);
}

/* Conservation of packets (see sr_sim_link_stats) once nothing is in flight. */
static void check_conserved(const struct sr_sim_link_stats *st)
{
    SR_CHECK_EQ(st->sent, st->queue_drops + st->lost + st->delivered - st->duplicated);
}

/* ---- timing ---- */

static void test_delivery_time(void)
{
    /* Expected arrival written out by hand: len * 8e9 / rate (rounded down)
     * + delay, counted from the send time. */
    static const struct {
        bool v6;
        size_t len;
        uint64_t rate_bps, delay_ns, start_ns, arrive_ns;
    } rows[] = {
        {false, 1000, 1000000000, 5000, 0, 13000},         /* 8000 ns on the wire */
        {true, 1000, 10000000000, 2000, 0, 2800},          /* 800 ns */
        {false, 1000, 0, 1234, 0, 1234},                   /* infinite rate */
        {true, 64, 0, 0, 0, 0},                            /* nothing at all */
        {false, 100, 3000000000, 0, 0, 266},               /* 266.67 ns */
        {true, 1500, 100000000000, 500, 1000000, 1000620}, /* 120 ns, late start */
        {false, 9000, 25000000000, 1000000, 7, 1002887},   /* jumbo: 2880 ns */
    };
    for (size_t i = 0; i < SR_ARRAY_SIZE(rows); i++) {
        struct tlog log = {0};
        struct tnode n[2];
        struct sr_sim *sim = mk_net(1, n, 2, rows[i].v6, &log, true);
        struct sr_sim_link_cfg cfg = {.rate_bps = rows[i].rate_bps, .delay_ns = rows[i].delay_ns};
        SR_CHECK_EQ(sr_sim_connect(sim, 0, 1, &cfg), 0);
        if (rows[i].start_ns) {
            /* Only a pending event moves time; a deadline brings it to start_ns. */
            n[0].dl[0] = rows[i].start_ns;
            n[0].dl_cnt = 1;
            SR_CHECK_EQ(sr_sim_run(sim, UINT64_MAX, NULL, NULL), SR_SIM_IDLE);
            SR_CHECK_EQ(sr_sim_now(sim), rows[i].start_ns);
            log_free(&log);
        }
        uint8_t buf[9000];
        size_t len = mk_pkt(buf, rows[i].v6, 0, 1, 0, rows[i].len, (uint32_t)i);
        SR_CHECK_EQ(sr_sim_send(sim, 0, buf, len), 0);
        SR_CHECK_EQ(sr_sim_pending(sim), 1);
        SR_CHECK_EQ(sr_sim_run(sim, UINT64_MAX, NULL, NULL), SR_SIM_IDLE);
        SR_CHECK_EQ(log.cnt, 1);
        if (log.cnt == 1) {
            SR_CHECK_EQ(log.r[0].t, rows[i].arrive_ns);
            SR_CHECK_EQ(log.r[0].node, 1);
            SR_CHECK_EQ(log.r[0].len, len);
            SR_CHECK_MEM(log.r[0].data, buf, len);
        }
        SR_CHECK_EQ(sr_sim_now(sim), rows[i].arrive_ns);
        struct sr_sim_link_stats st;
        SR_CHECK_EQ(sr_sim_link_stats(sim, 0, 1, &st), 0);
        SR_CHECK_EQ(st.sent, 1);
        SR_CHECK_EQ(st.delivered, 1);
        SR_CHECK_EQ(st.bytes, len);
        sr_sim_destroy(sim);
        log_free(&log);
    }
}

static void test_back_to_back(void)
{
    /* Six 1000-byte packets sent at once: the k-th leaves the wire at
     * k * 8000 / 3 ns at 3 Gb/s. Rounding each packet separately would
     * drift (8001 for the third); the carried remainder must not. */
    static const struct {
        uint64_t rate_bps;
        uint64_t arrive_ns[6];
    } rows[] = {
        {3000000000, {2766, 5433, 8100, 10766, 13433, 16100}},
        {1000000000, {8100, 16100, 24100, 32100, 40100, 48100}},
        {0, {100, 100, 100, 100, 100, 100}},
    };
    for (size_t r = 0; r < SR_ARRAY_SIZE(rows); r++) {
        struct tlog log = {0};
        struct tnode n[2];
        struct sr_sim *sim = mk_net(2, n, 2, false, &log, false);
        struct sr_sim_link_cfg cfg = {.rate_bps = rows[r].rate_bps, .delay_ns = 100};
        SR_CHECK_EQ(sr_sim_connect(sim, 0, 1, &cfg), 0);
        for (uint32_t k = 0; k < 6; k++)
            SR_CHECK_EQ(send_tag(sim, false, 0, 1, 0, 1000, k), 0);
        SR_CHECK_EQ(sr_sim_run(sim, UINT64_MAX, NULL, NULL), SR_SIM_IDLE);
        SR_CHECK_EQ(log.cnt, 6);
        for (size_t k = 0; k < 6 && k < log.cnt; k++) {
            SR_CHECK_EQ(log.r[k].t, rows[r].arrive_ns[k]);
            SR_CHECK_EQ(pkt_tag(log.r[k].data), k); /* FIFO */
        }
        /* After an idle gap the wire starts fresh from the send time. */
        uint64_t t0 = sr_sim_now(sim);
        SR_CHECK_EQ(send_tag(sim, false, 0, 1, 0, 1000, 6), 0);
        SR_CHECK_EQ(sr_sim_run(sim, UINT64_MAX, NULL, NULL), SR_SIM_IDLE);
        SR_CHECK_EQ(log.cnt, 7);
        if (log.cnt == 7)
            SR_CHECK_EQ(log.r[6].t, t0 + rows[r].arrive_ns[0]);
        sr_sim_destroy(sim);
        log_free(&log);
    }
}

static void test_tail_drop(void)
{
    struct tlog log = {0};
    struct tnode n[2];
    struct sr_sim *sim = mk_net(3, n, 2, true, &log, false);
    /* 1000-byte packets, 8000 ns each, room for three. */
    struct sr_sim_link_cfg cfg = {.rate_bps = 1000000000, .queue_bytes = 3000};
    SR_CHECK_EQ(sr_sim_connect(sim, 0, 1, &cfg), 0);
    struct sr_sim_link_stats st;
    for (uint32_t k = 0; k < 10; k++)
        SR_CHECK_EQ(send_tag(sim, true, 0, 1, 0, 1000, k), 0); /* a drop is not an error */
    SR_CHECK_EQ(sr_sim_link_stats(sim, 0, 1, &st), 0);
    SR_CHECK_EQ(st.queue_drops, 7);
    SR_CHECK_EQ(sr_sim_pending(sim), 3);

    /* At 8000 ns the first packet has left the wire: room for exactly one. */
    SR_CHECK_EQ(sr_sim_run(sim, 8000, NULL, NULL), SR_SIM_UNTIL);
    SR_CHECK_EQ(log.cnt, 1);
    SR_CHECK_EQ(send_tag(sim, true, 0, 1, 0, 1000, 10), 0);
    SR_CHECK_EQ(send_tag(sim, true, 0, 1, 0, 1000, 11), 0);
    SR_CHECK_EQ(sr_sim_link_stats(sim, 0, 1, &st), 0);
    SR_CHECK_EQ(st.queue_drops, 8);

    SR_CHECK_EQ(sr_sim_run(sim, UINT64_MAX, NULL, NULL), SR_SIM_IDLE);
    static const uint32_t want[] = {0, 1, 2, 10};
    SR_CHECK_EQ(log.cnt, SR_ARRAY_SIZE(want));
    for (size_t k = 0; k < log.cnt && k < SR_ARRAY_SIZE(want); k++) {
        SR_CHECK_EQ(pkt_tag(log.r[k].data), want[k]);
        SR_CHECK_EQ(log.r[k].t, 8000 * (k + 1));
    }
    SR_CHECK_EQ(sr_sim_link_stats(sim, 0, 1, &st), 0);
    SR_CHECK_EQ(st.sent, 12);
    SR_CHECK_EQ(st.bytes, 12000);
    SR_CHECK_EQ(st.delivered, 4);
    check_conserved(&st);

    /* queue_bytes 0: unlimited. */
    cfg.queue_bytes = 0;
    SR_CHECK_EQ(sr_sim_set_link(sim, 0, 1, &cfg), 0);
    for (uint32_t k = 0; k < 100; k++)
        SR_CHECK_EQ(send_tag(sim, true, 0, 1, 0, 1000, k), 0);
    SR_CHECK_EQ(sr_sim_pending(sim), 100);
    sr_sim_destroy(sim); /* frees the packets still in flight */
    log_free(&log);
}

/* ---- faults ---- */

static void test_loss(void)
{
    enum { N = 20000 };
    static const struct {
        double p;
        uint64_t lo, hi;
    } rows[] = {
        {0.0, 0, 0}, {0.01, 120, 300}, {0.1, 1700, 2300}, {0.5, 9500, 10500}, {1.0, N, N},
    };
    for (size_t r = 0; r < SR_ARRAY_SIZE(rows); r++) {
        struct tlog log = {0};
        struct tnode n[2];
        struct sr_sim *sim = mk_net(4 + r, n, 2, false, &log, false);
        struct sr_sim_link_cfg cfg = {.delay_ns = 10, .loss = rows[r].p};
        SR_CHECK_EQ(sr_sim_connect(sim, 0, 1, &cfg), 0);
        for (uint32_t k = 0; k < N; k++)
            SR_CHECK_EQ(send_tag(sim, false, 0, 1, 0, 64, k), 0);
        SR_CHECK_EQ(sr_sim_run(sim, UINT64_MAX, NULL, NULL), SR_SIM_IDLE);
        struct sr_sim_link_stats st;
        SR_CHECK_EQ(sr_sim_link_stats(sim, 0, 1, &st), 0);
        SR_CHECK(st.lost >= rows[r].lo && st.lost <= rows[r].hi);
        SR_CHECK_EQ(st.sent, N);
        SR_CHECK_EQ(st.delivered, log.cnt);
        check_conserved(&st);
        /* Survivors keep their order. */
        for (size_t k = 1; k < log.cnt; k++)
            SR_CHECK(pkt_tag(log.r[k].data) > pkt_tag(log.r[k - 1].data));
        /* The reverse direction is untouched by the forward link's draws. */
        SR_CHECK_EQ(sr_sim_link_stats(sim, 1, 0, &st), 0);
        SR_CHECK_EQ(st.sent, 0);
        sr_sim_destroy(sim);
        log_free(&log);
    }
}

static void test_dup(void)
{
    struct tlog log = {0};
    struct tnode n[2];
    struct sr_sim *sim = mk_net(5, n, 2, true, &log, false);
    struct sr_sim_link_cfg cfg = {.rate_bps = 1000000000, .delay_ns = 300, .dup = 1.0};
    SR_CHECK_EQ(sr_sim_connect(sim, 0, 1, &cfg), 0);
    for (uint32_t k = 0; k < 10; k++)
        SR_CHECK_EQ(send_tag(sim, true, 0, 1, 0, 200 + k, k), 0);
    SR_CHECK_EQ(sr_sim_run(sim, UINT64_MAX, NULL, NULL), SR_SIM_IDLE);
    SR_CHECK_EQ(log.cnt, 20);
    for (size_t k = 0; k + 1 < log.cnt; k += 2) {
        const struct trec *a = &log.r[k], *b = &log.r[k + 1];
        SR_CHECK_EQ(pkt_tag(a->data), k / 2);
        SR_CHECK_EQ(a->t, b->t); /* right after the first */
        SR_CHECK_EQ(a->len, b->len);
        SR_CHECK_EQ(a->hash, b->hash);
        SR_CHECK_MEM(a->data, b->data, a->len);
    }
    struct sr_sim_link_stats st;
    SR_CHECK_EQ(sr_sim_link_stats(sim, 0, 1, &st), 0);
    SR_CHECK_EQ(st.duplicated, 10);
    SR_CHECK_EQ(st.delivered, 20);
    check_conserved(&st);

    /* p = 0.5: roughly half, and the conservation law holds. */
    log_free(&log);
    cfg.dup = 0.5;
    SR_CHECK_EQ(sr_sim_set_link(sim, 0, 1, &cfg), 0);
    for (uint32_t k = 0; k < 2000; k++)
        SR_CHECK_EQ(send_tag(sim, true, 0, 1, 0, 100, k), 0);
    SR_CHECK_EQ(sr_sim_run(sim, UINT64_MAX, NULL, NULL), SR_SIM_IDLE);
    SR_CHECK_EQ(sr_sim_link_stats(sim, 0, 1, &st), 0);
    SR_CHECK(st.duplicated >= 10 + 850 && st.duplicated <= 10 + 1150);
    SR_CHECK_EQ(log.cnt, 2000 + st.duplicated - 10);
    check_conserved(&st);
    sr_sim_destroy(sim);
    log_free(&log);
}

static void test_reorder(void)
{
    /* One reordered packet, then two normal ones sent later that overtake
     * it. reorder_ns 0 means 3 * delay + 1 us. */
    static const struct {
        uint64_t reorder_ns, gap_ns, late_ns;
        uint64_t normal_ns; /* arrival of the two later packets */
    } rows[] = {
        {0, 0, 5000, 1000},   /* default: 3 * 1000 + 1000 extra */
        {50, 20, 1050, 1020}, /* a small extra still lets a packet sent 20 ns later win */
    };
    for (size_t r = 0; r < SR_ARRAY_SIZE(rows); r++) {
        struct tlog log = {0};
        struct tnode n[2];
        struct sr_sim *sim = mk_net(6, n, 2, false, &log, false);
        struct sr_sim_link_cfg cfg = {
            .delay_ns = 1000, .reorder = 1.0, .reorder_ns = rows[r].reorder_ns};
        SR_CHECK_EQ(sr_sim_connect(sim, 0, 1, &cfg), 0);
        SR_CHECK_EQ(send_tag(sim, false, 0, 1, 0, 100, 0), 0);
        cfg.reorder = 0.0;
        SR_CHECK_EQ(sr_sim_set_link(sim, 0, 1, &cfg), 0);
        if (rows[r].gap_ns)
            SR_CHECK_EQ(sr_sim_run(sim, rows[r].gap_ns, NULL, NULL), SR_SIM_UNTIL);
        SR_CHECK_EQ(send_tag(sim, false, 0, 1, 0, 100, 1), 0);
        SR_CHECK_EQ(send_tag(sim, false, 0, 1, 0, 100, 2), 0);
        SR_CHECK_EQ(sr_sim_run(sim, UINT64_MAX, NULL, NULL), SR_SIM_IDLE);
        static const uint32_t order[] = {1, 2, 0};
        SR_CHECK_EQ(log.cnt, 3);
        for (size_t k = 0; k < 3 && k < log.cnt; k++)
            SR_CHECK_EQ(pkt_tag(log.r[k].data), order[k]);
        if (log.cnt == 3) {
            SR_CHECK_EQ(log.r[0].t, rows[r].normal_ns);
            SR_CHECK_EQ(log.r[1].t, rows[r].normal_ns);
            SR_CHECK_EQ(log.r[2].t, rows[r].late_ns);
        }
        struct sr_sim_link_stats st;
        SR_CHECK_EQ(sr_sim_link_stats(sim, 0, 1, &st), 0);
        SR_CHECK_EQ(st.reordered, 1);
        sr_sim_destroy(sim);
        log_free(&log);
    }

    /* p = 0.3 on a rate-limited link: some packets are overtaken, and every
     * inversion comes from a reordered packet. */
    struct tlog log = {0};
    struct tnode n[2];
    struct sr_sim *sim = mk_net(7, n, 2, true, &log, false);
    struct sr_sim_link_cfg cfg = {.rate_bps = 1000000000, .delay_ns = 2000, .reorder = 0.3};
    SR_CHECK_EQ(sr_sim_connect(sim, 0, 1, &cfg), 0);
    for (uint32_t k = 0; k < 1000; k++)
        SR_CHECK_EQ(send_tag(sim, true, 0, 1, 0, 125, k), 0); /* 1000 ns each */
    SR_CHECK_EQ(sr_sim_run(sim, UINT64_MAX, NULL, NULL), SR_SIM_IDLE);
    struct sr_sim_link_stats st;
    SR_CHECK_EQ(sr_sim_link_stats(sim, 0, 1, &st), 0);
    SR_CHECK(st.reordered >= 220 && st.reordered <= 380);
    size_t inversions = 0;
    for (size_t k = 1; k < log.cnt; k++)
        inversions += pkt_tag(log.r[k].data) < pkt_tag(log.r[k - 1].data);
    SR_CHECK(inversions > 0 && inversions <= st.reordered);
    SR_CHECK_EQ(log.cnt, 1000);
    sr_sim_destroy(sim);
    log_free(&log);
}

static void test_set_link_fifo(void)
{
    /* Lowering delay_ns mid-run must not let a later packet overtake one
     * already in flight: without reorder the link stays FIFO. */
    struct tlog log = {0};
    struct tnode n[2];
    struct sr_sim *sim = mk_net(16, n, 2, false, &log, false);
    struct sr_sim_link_cfg cfg = {.delay_ns = 5000};
    SR_CHECK_EQ(sr_sim_connect(sim, 0, 1, &cfg), 0);
    SR_CHECK_EQ(send_tag(sim, false, 0, 1, 0, 100, 0), 0);
    cfg.delay_ns = 100;
    SR_CHECK_EQ(sr_sim_set_link(sim, 0, 1, &cfg), 0);
    SR_CHECK_EQ(send_tag(sim, false, 0, 1, 0, 100, 1), 0);
    SR_CHECK_EQ(sr_sim_run(sim, 6000, NULL, NULL), SR_SIM_IDLE);
    SR_CHECK_EQ(sr_sim_now(sim), 5000);
    SR_CHECK_EQ(send_tag(sim, false, 0, 1, 0, 100, 2), 0); /* the new delay applies */
    SR_CHECK_EQ(sr_sim_run(sim, UINT64_MAX, NULL, NULL), SR_SIM_IDLE);
    static const struct {
        uint32_t tag;
        uint64_t t;
    } want[] = {{0, 5000}, {1, 5000}, {2, 5100}};
    SR_CHECK_EQ(log.cnt, SR_ARRAY_SIZE(want));
    for (size_t k = 0; k < log.cnt && k < SR_ARRAY_SIZE(want); k++) {
        SR_CHECK_EQ(pkt_tag(log.r[k].data), want[k].tag);
        SR_CHECK_EQ(log.r[k].t, want[k].t);
    }
    sr_sim_destroy(sim);
    log_free(&log);
}

static unsigned popcount8(uint8_t x)
{
    unsigned c = 0;
    for (; x; x &= (uint8_t)(x - 1))
        c++;
    return c;
}

static void test_corrupt(void)
{
    static const struct {
        bool v6;
        double p;
        unsigned want_bits; /* flipped bits per packet */
    } rows[] = {{false, 1.0, 1}, {true, 1.0, 1}, {false, 0.0, 0}};
    for (size_t r = 0; r < SR_ARRAY_SIZE(rows); r++) {
        enum { N = 300, LEN = 100 };
        struct tlog log = {0};
        struct tnode n[2];
        struct sr_sim *sim = mk_net(8, n, 2, rows[r].v6, &log, false);
        struct sr_sim_link_cfg cfg = {.delay_ns = 1, .corrupt = rows[r].p};
        SR_CHECK_EQ(sr_sim_connect(sim, 0, 1, &cfg), 0);
        for (uint32_t k = 0; k < N; k++)
            SR_CHECK_EQ(send_tag(sim, rows[r].v6, 0, 1, 0, LEN, k), 0);
        SR_CHECK_EQ(sr_sim_run(sim, UINT64_MAX, NULL, NULL), SR_SIM_IDLE);
        SR_CHECK_EQ(log.cnt, N);
        bool hit[LEN] = {false};
        size_t positions = 0;
        for (size_t k = 0; k < log.cnt; k++) {
            uint8_t orig[LEN];
            mk_pkt(orig, rows[r].v6, 0, 1, 0, LEN, (uint32_t)k); /* FIFO: k-th is tag k */
            unsigned bits = 0;
            for (size_t i = 0; i < LEN; i++) {
                uint8_t x = orig[i] ^ log.r[k].data[i];
                bits += popcount8(x);
                if (x && !hit[i]) {
                    hit[i] = true;
                    positions++;
                }
            }
            SR_CHECK_EQ(bits, rows[r].want_bits);
        }
        /* Anywhere in the packet, not one favourite byte. */
        if (rows[r].want_bits)
            SR_CHECK(positions > LEN / 2);
        struct sr_sim_link_stats st;
        SR_CHECK_EQ(sr_sim_link_stats(sim, 0, 1, &st), 0);
        SR_CHECK_EQ(st.corrupted, rows[r].want_bits ? N : 0);
        sr_sim_destroy(sim);
        log_free(&log);
    }
}

static unsigned ecn_of(const uint8_t *ip)
{
    return (ip[0] >> 4) == 6 ? (ip[1] >> 4) & 3u : ip[1] & 3u;
}

static unsigned dscp_of(const uint8_t *ip)
{
    return (ip[0] >> 4) == 6 ? (unsigned)(sr_get_be16(ip) >> 6) & 0x3f : ip[1] >> 2;
}

static void test_ecn(void)
{
    /* Ten 1000-byte packets sent at once on a 1 Gb/s link: the k-th joins a
     * queue of k * 1000 bytes and is marked iff that is more than ecn_bytes
     * and it is ECT. */
    static const struct {
        bool v6;
        uint8_t tos;
        uint64_t ecn_bytes;
        bool bad_csum; /* sender's IPv4 checksum already wrong */
        unsigned marked;
    } rows[] = {
        {false, 0x02, 2500, false, 7},  /* ECT(0) */
        {false, 0xb9, 2000, false, 7},  /* EF + ECT(1); 2000 is not "more than" 2000 */
        {false, 0x00, 1, false, 0},     /* Not-ECT is never marked */
        {false, 0x03, 1, false, 0},     /* CE stays CE, not counted */
        {false, 0x02, 0, false, 0},     /* threshold 0: never */
        {false, 0x02, 20000, false, 0}, /* never reached */
        {false, 0x02, 2500, true, 7},   /* a wrong checksum stays wrong */
        {true, 0x02, 2500, false, 7},   {true, 0xb9, 2000, false, 7},
        {true, 0x00, 1, false, 0},      {true, 0x03, 1, false, 0},
    };
    for (size_t r = 0; r < SR_ARRAY_SIZE(rows); r++) {
        enum { N = 10, LEN = 1000 };
        struct tlog log = {0};
        struct tnode n[2];
        bool v6 = rows[r].v6;
        struct sr_sim *sim = mk_net(9, n, 2, v6, &log, false);
        struct sr_sim_link_cfg cfg = {.rate_bps = 1000000000, .ecn_bytes = rows[r].ecn_bytes};
        SR_CHECK_EQ(sr_sim_connect(sim, 0, 1, &cfg), 0);
        for (uint32_t k = 0; k < N; k++) {
            uint8_t buf[LEN];
            mk_pkt(buf, v6, 0, 1, rows[r].tos, LEN, k);
            if (rows[r].bad_csum)
                buf[10] ^= 0x12;
            SR_CHECK_EQ(sr_sim_send(sim, 0, buf, LEN), 0);
        }
        SR_CHECK_EQ(sr_sim_run(sim, UINT64_MAX, NULL, NULL), SR_SIM_IDLE);
        SR_CHECK_EQ(log.cnt, N);
        unsigned marked = 0;
        for (size_t k = 0; k < log.cnt; k++) {
            const uint8_t *got = log.r[k].data;
            uint8_t orig[LEN];
            mk_pkt(orig, v6, 0, 1, rows[r].tos, LEN, (uint32_t)k);
            if (rows[r].bad_csum)
                orig[10] ^= 0x12;
            bool want = rows[r].marked && k * LEN > rows[r].ecn_bytes;
            marked += ecn_of(got) != ecn_of(orig);
            SR_CHECK_EQ(ecn_of(got), want ? 3u : ecn_of(orig));
            SR_CHECK_EQ(dscp_of(got), dscp_of(orig));
            if (!v6)
                SR_CHECK_EQ(sr_inet_csum(got, SR_IPV4_HDR_LEN, 0) == 0, !rows[r].bad_csum);
            /* Nothing else changes: only the ECN byte and the IPv4 checksum. */
            size_t same_from = v6 ? 2 : 12;
            SR_CHECK_MEM(got + same_from, orig + same_from, LEN - same_from);
            SR_CHECK_EQ(got[0], orig[0]);
            if (!v6)
                SR_CHECK_MEM(got + 2, orig + 2, 8);
        }
        SR_CHECK_EQ(marked, rows[r].marked);
        struct sr_sim_link_stats st;
        SR_CHECK_EQ(sr_sim_link_stats(sim, 0, 1, &st), 0);
        SR_CHECK_EQ(st.ecn_marked, rows[r].marked);
        sr_sim_destroy(sim);
        log_free(&log);
    }
}

/* ---- determinism ---- */

/* Three nodes in a triangle, each sending 200 packets of random size to
 * random peers on a timer; big packets are answered. Every fault is on. */
static void run_trace(uint64_t seed, struct tlog *log)
{
    enum { N = 3 };
    struct tnode n[N];
    struct sr_sim *sim = mk_net(seed, n, N, false, log, true);
    struct sr_sim_link_cfg cfg = {.rate_bps = 1000000000,
                                  .delay_ns = 1000,
                                  .queue_bytes = 6000,
                                  .ecn_bytes = 3000,
                                  .loss = 0.2,
                                  .dup = 0.1,
                                  .reorder = 0.1,
                                  .corrupt = 0.05};
    SR_CHECK_EQ(sr_sim_connect(sim, 0, 1, &cfg), 0);
    SR_CHECK_EQ(sr_sim_connect(sim, 1, 2, &cfg), 0);
    SR_CHECK_EQ(sr_sim_connect(sim, 0, 2, &cfg), 0);
    for (int i = 0; i < N; i++) {
        n[i].reply = true;
        n[i].tick_ns = 2000 + 500 * (uint64_t)i;
        n[i].next_tick = (uint64_t)i * 100;
        n[i].ticks_left = 200;
        n[i].peer_cnt = N;
        n[i].next_tag = (uint32_t)i << 24;
    }
    SR_CHECK_EQ(sr_sim_run(sim, UINT64_MAX, NULL, NULL), SR_SIM_IDLE);
    struct sr_sim_link_stats st;
    for (int a = 0; a < N; a++)
        for (int b = 0; b < N; b++)
            if (a != b) {
                SR_CHECK_EQ(sr_sim_link_stats(sim, a, b, &st), 0);
                check_conserved(&st);
            }
    sr_sim_destroy(sim);
}

static bool same_trace(const struct tlog *x, const struct tlog *y)
{
    if (x->cnt != y->cnt)
        return false;
    for (size_t i = 0; i < x->cnt; i++) {
        const struct trec *a = &x->r[i], *b = &y->r[i];
        if (a->kind != b->kind || a->node != b->node || a->t != b->t || a->len != b->len ||
            a->hash != b->hash)
            return false;
    }
    return true;
}

static void test_determinism(void)
{
    struct tlog a = {0}, b = {0}, c = {0};
    run_trace(42, &a);
    run_trace(42, &b);
    run_trace(43, &c);
    size_t rx = 0;
    for (size_t i = 0; i < a.cnt; i++)
        rx += a.r[i].kind == 'R';
    SR_CHECK(rx > 300); /* the trace is not trivially empty */
    SR_CHECK(same_trace(&a, &b));
    SR_CHECK(!same_trace(&a, &c));
    log_free(&a);
    log_free(&b);
    log_free(&c);
}

/* ---- callbacks: re-entrant sends, deadlines ---- */

static void test_ping_pong(void)
{
    enum { ROUNDS = 1000 };
    struct tlog log = {0};
    struct tnode n[2];
    struct sr_sim *sim = mk_net(10, n, 2, true, &log, false);
    /* 500 bytes at 1 Gb/s = 4000 ns, + 6000 ns: 10 us per hop. */
    struct sr_sim_link_cfg cfg = {.rate_bps = 1000000000, .delay_ns = 6000};
    SR_CHECK_EQ(sr_sim_connect(sim, 0, 1, &cfg), 0);
    uint64_t budget = 2 * ROUNDS - 1; /* the first hop is the test's own send */
    n[0].fwd_to = 1;
    n[1].fwd_to = 0;
    n[0].budget = n[1].budget = &budget;
    SR_CHECK_EQ(send_tag(sim, true, 0, 1, 0, 500, 77), 0);
    SR_CHECK_EQ(sr_sim_run(sim, UINT64_MAX, NULL, NULL), SR_SIM_IDLE);
    SR_CHECK_EQ(log.cnt, 2 * ROUNDS);
    for (size_t k = 0; k < log.cnt; k++) {
        SR_CHECK_EQ(log.r[k].t, 10000 * (k + 1));
        SR_CHECK_EQ(log.r[k].node, (k + 1) % 2);
        SR_CHECK_EQ(pkt_tag(log.r[k].data), 77);
    }
    SR_CHECK_EQ(sr_sim_now(sim), 2 * ROUNDS * 10000ull);
    struct sr_sim_link_stats st;
    SR_CHECK_EQ(sr_sim_link_stats(sim, 1, 0, &st), 0);
    SR_CHECK_EQ(st.delivered, ROUNDS);
    sr_sim_destroy(sim);
    log_free(&log);
}

static void test_deadlines(void)
{
    /* One node's timers fire at exactly their simulated times. */
    struct tlog log = {0};
    struct tnode n[4];
    struct sr_sim *sim = mk_net(11, n, 1, false, &log, true);
    static const uint64_t dl[] = {100, 250, 250, 1000, 123456789};
    memcpy(n[0].dl, dl, sizeof(dl));
    n[0].dl_cnt = SR_ARRAY_SIZE(dl);
    SR_CHECK_EQ(sr_sim_run(sim, 1000, NULL, NULL), SR_SIM_UNTIL);
    static const uint64_t want[] = {100, 250, 1000};
    SR_CHECK_EQ(log.cnt, SR_ARRAY_SIZE(want));
    for (size_t k = 0; k < log.cnt && k < SR_ARRAY_SIZE(want); k++) {
        SR_CHECK_EQ(log.r[k].kind, 'A');
        SR_CHECK_EQ(log.r[k].t, want[k]);
    }
    SR_CHECK_EQ(sr_sim_run(sim, UINT64_MAX, NULL, NULL), SR_SIM_IDLE);
    SR_CHECK_EQ(log.cnt, 4);
    SR_CHECK_EQ(sr_sim_now(sim), 123456789);
    sr_sim_destroy(sim);
    log_free(&log);

    /* Same time: the delivery first, then advances in node-id order (node 2
     * is the receiver, yet node 1 advances before it). A deadline set in the
     * past fires at the current time, never earlier. */
    sim = mk_net(12, n, 4, true, &log, true);
    struct sr_sim_link_cfg cfg = {.delay_ns = 500};
    SR_CHECK_EQ(sr_sim_connect(sim, 0, 2, &cfg), 0);
    SR_CHECK_EQ(send_tag(sim, true, 0, 2, 0, 64, 1), 0);
    n[2].dl[0] = n[1].dl[0] = 500;
    n[2].dl_cnt = n[1].dl_cnt = 1;
    n[3].dl[0] = 600;
    n[3].dl_cnt = 1;
    SR_CHECK_EQ(sr_sim_run(sim, 550, NULL, NULL), SR_SIM_UNTIL);
    n[3].dl[0] = 10; /* set in the past: fires at the current time */
    n[3].dl[1] = 700;
    n[3].dl_cnt = 2;
    SR_CHECK_EQ(sr_sim_run(sim, UINT64_MAX, NULL, NULL), SR_SIM_IDLE);
    static const struct {
        char kind;
        int node;
        uint64_t t;
    } order[] = {{'R', 2, 500}, {'A', 1, 500}, {'A', 2, 500}, {'A', 3, 550}, {'A', 3, 700}};
    SR_CHECK_EQ(log.cnt, SR_ARRAY_SIZE(order));
    for (size_t k = 0; k < log.cnt && k < SR_ARRAY_SIZE(order); k++) {
        SR_CHECK_EQ(log.r[k].kind, order[k].kind);
        SR_CHECK_EQ(log.r[k].node, order[k].node);
        SR_CHECK_EQ(log.r[k].t, order[k].t);
    }
    sr_sim_destroy(sim);
    log_free(&log);
}

/* ---- the run loop ---- */

static bool stop_after_two(void *arg)
{
    return ((const struct tlog *)arg)->cnt >= 2;
}

static void test_run_results(void)
{
    struct tlog log = {0};
    struct tnode n[2];
    struct sr_sim *sim = mk_net(13, n, 2, false, &log, false);
    struct sr_sim_link_cfg cfg = {.rate_bps = 1000000000, .delay_ns = 4000};

    /* Nothing pending: idle, time unchanged, even with a far until. */
    SR_CHECK_EQ(sr_sim_run(sim, 1000, NULL, NULL), SR_SIM_IDLE);
    SR_CHECK_EQ(sr_sim_now(sim), 0);

    /* Packets at 5000, 6000, 7000, 8000, 9000 (125 bytes = 1000 ns). */
    SR_CHECK_EQ(sr_sim_connect(sim, 0, 1, &cfg), 0);
    for (uint32_t k = 0; k < 5; k++)
        SR_CHECK_EQ(send_tag(sim, false, 0, 1, 0, 125, k), 0);
    SR_CHECK_EQ(sr_sim_run(sim, 1000, NULL, NULL), SR_SIM_UNTIL);
    SR_CHECK_EQ(sr_sim_now(sim), 1000);
    SR_CHECK_EQ(log.cnt, 0);
    /* An event exactly at until_ns is processed. */
    SR_CHECK_EQ(sr_sim_run(sim, 5000, NULL, NULL), SR_SIM_UNTIL);
    SR_CHECK_EQ(log.cnt, 1);
    SR_CHECK_EQ(sr_sim_now(sim), 5000);
    /* until_ns in the past never moves time backwards. */
    SR_CHECK_EQ(sr_sim_run(sim, 10, NULL, NULL), SR_SIM_UNTIL);
    SR_CHECK_EQ(sr_sim_now(sim), 5000);
    /* stop() is asked after every step. */
    SR_CHECK_EQ(sr_sim_run(sim, UINT64_MAX, stop_after_two, &log), SR_SIM_STOPPED);
    SR_CHECK_EQ(log.cnt, 2);
    SR_CHECK_EQ(sr_sim_now(sim), 6000);
    SR_CHECK_EQ(sr_sim_pending(sim), 3);
    /* Idle at the last event, not at until_ns. */
    SR_CHECK_EQ(sr_sim_run(sim, 1000000, NULL, NULL), SR_SIM_IDLE);
    SR_CHECK_EQ(log.cnt, 5);
    SR_CHECK_EQ(sr_sim_now(sim), 9000);

    /* A callback may not run the loop itself. */
    n[1].reenter = true;
    n[1].reenter_rc = 1;
    SR_CHECK_EQ(send_tag(sim, false, 0, 1, 0, 125, 9), 0);
    SR_CHECK_EQ(sr_sim_run(sim, UINT64_MAX, NULL, NULL), SR_SIM_IDLE);
    SR_CHECK_EQ(n[1].reenter_rc, SR_ERR_INVAL);
    sr_sim_destroy(sim);
    log_free(&log);
}

/* ---- errors ---- */

static void test_errors(void)
{
    struct tlog log = {0};
    struct tnode n[3];
    struct sr_sim *sim = mk_net(14, n, 3, false, &log, false);
    struct sr_sim_link_cfg cfg = {.delay_ns = 1};
    SR_CHECK_EQ(sr_sim_connect(sim, 0, 1, &cfg), 0);
    uint8_t good4[100], good6[100];
    mk_pkt(good4, false, 0, 1, 0, sizeof(good4), 1);
    mk_pkt(good6, true, 0, 1, 0, sizeof(good6), 1);
    uint8_t v6addr[16];
    addr_of(1, true, v6addr);
    uint8_t v6node_ctx;
    SR_CHECK_EQ(sr_sim_add_node(sim, v6addr, &rx_only_ops, &v6node_ctx), 3);

    /* Malformed packets, each one field wrong. */
    static const struct {
        const char *name;
        bool v6;
        size_t len;
        int off;
        uint8_t val;
        int want;
    } rows[] = {
        {"no link", false, 100, -1, 0, SR_ERR_INVAL}, /* sent from node 2: 2 -> 1 absent */
        {"empty", false, 0, -1, 0, SR_ERR_WIRE_L3},
        {"version 5", false, 100, 0, 0x55, SR_ERR_WIRE_L3},
        {"version 0", true, 100, 0, 0x00, SR_ERR_WIRE_L3},
        {"v4 short", false, 19, -1, 0, SR_ERR_WIRE_L3},
        {"v4 ihl 4", false, 100, 0, 0x44, SR_ERR_WIRE_L3},
        {"v4 total length", false, 100, 3, 99, SR_ERR_WIRE_L3},
        {"v4 truncated", false, 90, -1, 0, SR_ERR_WIRE_L3},
        {"v6 short", true, 39, -1, 0, SR_ERR_WIRE_L3},
        {"v6 payload length", true, 100, 5, 61, SR_ERR_WIRE_L3},
        {"v6 truncated", true, 99, -1, 0, SR_ERR_WIRE_L3},
        {"v4 unknown dst", false, 100, 19, 200, SR_ERR_INVAL},
        {"v6 unknown dst", true, 100, 39, 200, SR_ERR_INVAL},
    };
    for (size_t i = 0; i < SR_ARRAY_SIZE(rows); i++) {
        sr_test_ctx = rows[i].name;
        uint8_t buf[100];
        memcpy(buf, rows[i].v6 ? good6 : good4, sizeof(buf));
        if (rows[i].off >= 0)
            buf[rows[i].off] = rows[i].val;
        int from = i == 0 ? 2 : 0;
        SR_CHECK_EQ(sr_sim_send(sim, from, buf, rows[i].len), rows[i].want);
    }
    sr_test_ctx = "test_errors";
    SR_CHECK_EQ(sr_sim_send(sim, 0, good4, sizeof(good4)), 0);
    SR_CHECK_EQ(sr_sim_send(sim, 0, good6, sizeof(good6)), SR_ERR_INVAL); /* node 3: no link */
    SR_CHECK_EQ(sr_sim_send(sim, -1, good4, sizeof(good4)), SR_ERR_INVAL);
    SR_CHECK_EQ(sr_sim_send(sim, 4, good4, sizeof(good4)), SR_ERR_INVAL);
    SR_CHECK_EQ(sr_sim_send(sim, 0, NULL, 100), SR_ERR_INVAL);

    /* Nodes. */
    uint8_t addr[16];
    addr_of(0, false, addr);
    SR_CHECK_EQ(sr_sim_add_node(sim, addr, &rx_only_ops, NULL), SR_ERR_INVAL); /* taken */
    addr_of(7, false, addr);
    SR_CHECK_EQ(sr_sim_add_node(sim, addr, NULL, NULL), SR_ERR_INVAL);
    struct sr_sim_node_ops half = {.rx = tnode_rx, .next_deadline = tnode_next_deadline};
    SR_CHECK_EQ(sr_sim_add_node(sim, addr, &half, NULL), SR_ERR_INVAL);
    SR_CHECK_EQ(sr_sim_node_cnt(sim), 4);
    SR_CHECK_EQ(sr_sim_find_node(sim, addr), SR_ERR_INVAL);
    SR_CHECK_EQ(sr_sim_find_node(sim, v6addr), 3);

    /* Links. */
    SR_CHECK_EQ(sr_sim_connect(sim, 0, 0, &cfg), SR_ERR_INVAL);
    SR_CHECK_EQ(sr_sim_connect(sim, 1, 0, &cfg), SR_ERR_INVAL); /* already connected */
    SR_CHECK_EQ(sr_sim_connect(sim, 0, 9, &cfg), SR_ERR_INVAL);
    SR_CHECK_EQ(sr_sim_connect(sim, -1, 1, &cfg), SR_ERR_INVAL);
    SR_CHECK_EQ(sr_sim_connect(sim, 0, 2, NULL), SR_ERR_INVAL);
    static const struct sr_sim_link_cfg bad[] = {
        {.loss = 1.5},
        {.dup = -0.1},
        {.reorder = NAN},
        {.corrupt = 2.0},
        {.rate_bps = (1ull << 62) + 1},
    };
    for (size_t i = 0; i < SR_ARRAY_SIZE(bad); i++) {
        SR_CHECK_EQ(sr_sim_connect(sim, 0, 2, &bad[i]), SR_ERR_RANGE);
        SR_CHECK_EQ(sr_sim_set_link(sim, 0, 1, &bad[i]), SR_ERR_RANGE);
    }
    SR_CHECK_EQ(sr_sim_set_link(sim, 0, 2, &cfg), SR_ERR_INVAL);
    struct sr_sim_link_stats st;
    SR_CHECK_EQ(sr_sim_link_stats(sim, 0, 2, &st), SR_ERR_INVAL);
    SR_CHECK_EQ(sr_sim_link_stats(sim, 0, 1, &st), 0);
    SR_CHECK_EQ(st.sent, 1); /* only the good packet; malformed ones never reach a link */

    /* Cutting a link mid-run: loss 1.0 loses everything, restoring heals. */
    struct sr_sim_link_cfg cut = cfg;
    cut.loss = 1.0;
    SR_CHECK_EQ(sr_sim_set_link(sim, 0, 1, &cut), 0);
    SR_CHECK_EQ(sr_sim_send(sim, 0, good4, sizeof(good4)), 0);
    SR_CHECK_EQ(sr_sim_set_link(sim, 0, 1, &cfg), 0);
    SR_CHECK_EQ(sr_sim_send(sim, 0, good4, sizeof(good4)), 0);
    SR_CHECK_EQ(sr_sim_run(sim, UINT64_MAX, NULL, NULL), SR_SIM_IDLE);
    SR_CHECK_EQ(sr_sim_link_stats(sim, 0, 1, &st), 0);
    SR_CHECK_EQ(st.lost, 1);
    SR_CHECK_EQ(st.delivered, 2);
    SR_CHECK_EQ(log.cnt, 2);
    sr_sim_destroy(sim);
    sr_sim_destroy(NULL);
    log_free(&log);
}

/* ---- scale ---- */

static void test_many_nodes(void)
{
    /* 2000 nodes in a ring, each with (empty) timers so the deadline scan
     * runs over all of them; a token goes round twice. */
    enum { N = 2000, LAPS = 2 };
    struct tlog log = {0};
    struct tnode *n = calloc(N, sizeof(*n));
    SR_CHECK(n != NULL);
    if (!n)
        return;
    struct sr_sim *sim = mk_net(15, n, N, true, &log, true);
    /* 200 bytes at 10 Gb/s = 160 ns, + 840 ns: 1 us per hop. */
    struct sr_sim_link_cfg cfg = {.rate_bps = 10000000000, .delay_ns = 840};
    uint64_t budget = (uint64_t)N * LAPS - 1;
    for (int i = 0; i < N; i++) {
        SR_CHECK_EQ(sr_sim_connect(sim, i, (i + 1) % N, &cfg), 0);
        n[i].fwd_to = (i + 1) % N;
        n[i].budget = &budget;
    }
    SR_CHECK_EQ(sr_sim_node_cnt(sim), N);
    SR_CHECK_EQ(send_tag(sim, true, 0, 1, 0, 200, 5), 0);
    SR_CHECK_EQ(sr_sim_run(sim, UINT64_MAX, NULL, NULL), SR_SIM_IDLE);
    SR_CHECK_EQ(log.cnt, (size_t)N * LAPS);
    SR_CHECK_EQ(sr_sim_now(sim), (uint64_t)N * LAPS * 1000);
    bool ok = true;
    for (size_t k = 0; k < log.cnt; k++)
        ok &= log.r[k].node == (int)((k + 1) % N) && log.r[k].t == 1000 * (k + 1);
    SR_CHECK(ok);
    for (int i = 0; i < N; i += 199) {
        struct sr_sim_link_stats st;
        SR_CHECK_EQ(sr_sim_link_stats(sim, i, (i + 1) % N, &st), 0);
        SR_CHECK_EQ(st.delivered, LAPS);
        SR_CHECK_EQ(sr_sim_link_stats(sim, (i + 1) % N, i, &st), 0);
        SR_CHECK_EQ(st.delivered, 0);
    }
    uint8_t addr[16];
    addr_of(N - 1, true, addr);
    SR_CHECK_EQ(sr_sim_find_node(sim, addr), N - 1);
    /* Not a neighbour: no route. */
    SR_CHECK_EQ(send_tag(sim, true, 0, N / 2, 0, 200, 6), SR_ERR_INVAL);
    sr_sim_destroy(sim);
    free(n);
    log_free(&log);
}

int main(void)
{
    SR_RUN(test_delivery_time);
    SR_RUN(test_back_to_back);
    SR_RUN(test_tail_drop);
    SR_RUN(test_loss);
    SR_RUN(test_dup);
    SR_RUN(test_reorder);
    SR_RUN(test_set_link_fifo);
    SR_RUN(test_corrupt);
    SR_RUN(test_ecn);
    SR_RUN(test_determinism);
    SR_RUN(test_ping_pong);
    SR_RUN(test_deadlines);
    SR_RUN(test_run_results);
    SR_RUN(test_errors);
    SR_RUN(test_many_nodes);
    return SR_TEST_RESULT();
}

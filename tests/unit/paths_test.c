/* paths_test.c: the per-packet entropy policies (src/engine/paths.h) by
 * hand, with explicit time: single, spray and adaptive choices, the
 * adaptive policy leaving a marked, lost or slow value and coming back
 * once it is good again, retransmissions on another value, determinism
 * with a seed, bad arguments; then through the engine on the in-memory
 * wire: single path is one source port per QP (today's value), spraying
 * happens only when the device says to spray regardless (no peer agrees
 * to reordering yet), every byte arrives, and the adaptive policy steers
 * a transfer away from a dead path. */
#include "engine_fixture.h"
#include "paths.h"

enum { US = 1000, BASE = 0xc012 };

static void t_single(void)
{
    struct sr_paths p;
    sr_paths_init(&p, SR_PATHS_SINGLE, 8, BASE, 1);
    SR_CHECK_EQ(p.n, 1);
    for (uint32_t psn = 0; psn < 100; psn++)
        SR_CHECK_EQ(sr_paths_choose(&p, psn, psn * US), 0);
    SR_CHECK_EQ(p.path[0].port, BASE);
    SR_CHECK_EQ(sr_paths_of(&p, 5), -1); /* nothing recorded: nothing to learn */
}

static void t_ports(void)
{
    /* value 0 is the QP's own port; the others distinct, in 0xc000.. */
    for (uint32_t base = 0xc000; base <= 0xffff; base += 0x3ff) {
        uint16_t seen[SR_PATHS_MAX];
        for (uint32_t i = 0; i < SR_PATHS_MAX; i++) {
            seen[i] = sr_paths_port((uint16_t)base, i);
            SR_CHECK(seen[i] >= 0xc000);
            for (uint32_t j = 0; j < i; j++)
                SR_CHECK(seen[j] != seen[i]);
        }
        SR_CHECK_EQ(seen[0], base);
    }
}

static void t_spray(void)
{
    struct sr_paths p;
    sr_paths_init(&p, SR_PATHS_SPRAY, 4, BASE, 1);
    SR_CHECK_EQ(p.n, 4);
    for (uint32_t psn = 0; psn < 40; psn++) {
        SR_CHECK_EQ(sr_paths_choose(&p, psn, 0), psn % 4);
        SR_CHECK_EQ(sr_paths_of(&p, psn), (int)(psn % 4));
    }
    /* The round robin is at value 0 again; psn 36 went on value 0, so its
     * retransmission takes value 1 instead. */
    SR_CHECK_EQ(sr_paths_choose(&p, 36, 10 * US), 1);
    SR_CHECK_EQ(sr_paths_choose(&p, 40, 10 * US), 2);
    /* Loss feedback counts but does not steer an oblivious spray. */
    sr_paths_lost(&p, 37, 11 * US);
    SR_CHECK_EQ(p.path[1].st.lost, 1);
    SR_CHECK(!sr_paths_avoided(&p, 1, 12 * US));
    SR_CHECK_EQ(sr_paths_choose(&p, 41, 12 * US), 3);
    SR_CHECK_EQ(sr_paths_choose(&p, 42, 12 * US), 0);
}

static void t_burst(void)
{
    struct sr_paths p;
    sr_paths_init(&p, SR_PATHS_SPRAY, 3, BASE, 1);
    sr_paths_set_burst(&p, 4);
    for (uint32_t psn = 0; psn < 24; psn++)
        SR_CHECK_EQ(sr_paths_choose(&p, psn, 0), (psn / 4) % 3);
    /* A resend mid-run takes another value and leaves the run alone. */
    SR_CHECK_EQ(sr_paths_choose(&p, 24, 0), 0);
    SR_CHECK_EQ(sr_paths_choose(&p, 25, 0), 0);
    SR_CHECK_EQ(sr_paths_choose(&p, 25, 0), 1);
    SR_CHECK_EQ(sr_paths_choose(&p, 26, 0), 0);
    SR_CHECK_EQ(sr_paths_choose(&p, 27, 0), 0);
    SR_CHECK_EQ(sr_paths_choose(&p, 28, 0), 2);
    /* Adaptive: a run ends when its value becomes avoided. */
    sr_paths_init(&p, SR_PATHS_ADAPTIVE, 4, BASE, 2);
    sr_paths_set_burst(&p, 8);
    uint8_t v = sr_paths_choose(&p, 100, 0);
    for (uint32_t psn = 101; psn < 104; psn++)
        SR_CHECK_EQ(sr_paths_choose(&p, psn, 0), v);
    sr_paths_lost(&p, 101, 1);
    for (uint32_t psn = 104; psn < 120; psn++)
        SR_CHECK(sr_paths_choose(&p, psn, 2) != v);
    sr_paths_set_burst(&p, 0);
    SR_CHECK_EQ(p.burst, 1);
    sr_paths_set_burst(&p, 1000);
    SR_CHECK_EQ(p.burst, 255);
}

/* Sends psns [*psn, *psn + cnt) at now and acknowledges them rtt later;
 * counts the values chosen into use[]. */
static void round_trip(struct sr_paths *p, uint32_t *psn, uint32_t cnt, uint64_t *now, uint64_t rtt,
                       uint32_t *use)
{
    uint32_t from = *psn;
    for (uint32_t k = 0; k < cnt; k++) {
        uint8_t i = sr_paths_choose(p, *psn, *now);
        SR_CHECK(i < p->n);
        if (use)
            use[i]++;
        *psn = (*psn + 1) & 0xffffff;
    }
    *now += rtt;
    sr_paths_acked(p, from, *psn, *now);
}

static uint32_t psn_on(const struct sr_paths *p, uint32_t from, uint32_t to, uint8_t v)
{
    for (uint32_t q = from; q != to; q = (q + 1) & 0xffffff)
        if (sr_paths_of(p, q) == v)
            return q;
    return UINT32_MAX;
}

static void t_adaptive_marked(void)
{
    struct sr_paths p;
    sr_paths_init(&p, SR_PATHS_ADAPTIVE, 4, BASE, 7);
    uint32_t psn = 0xfffff0, use[4] = {0};
    uint64_t now = 1000 * US;
    /* Unknown paths are explored; once ACKs come back, recycled. */
    for (int r = 0; r < 10; r++)
        round_trip(&p, &psn, 16, &now, 50 * US, use);
    for (int i = 0; i < 4; i++)
        SR_CHECK(use[i] > 10);
    SR_CHECK_EQ(p.min_rtt_ns, 50 * US);

    /* A packet on value 2 comes back marked: value 2 rests 8 RTTs. */
    uint32_t from = psn;
    for (int k = 0; k < 16; k++, psn = (psn + 1) & 0xffffff)
        sr_paths_choose(&p, psn, now);
    uint32_t m = psn_on(&p, from, psn, 2);
    SR_CHECK(m != UINT32_MAX);
    now += 10 * US;
    sr_paths_marked(&p, m, now);
    SR_CHECK_EQ(p.path[2].st.marked, 1);
    uint64_t marked_at = now;
    /* The ACK of the in-flight packets, value 2's among them, sent before
     * the mark, does not bring it back. */
    now += 40 * US;
    sr_paths_acked(&p, from, psn, now);
    SR_CHECK(sr_paths_avoided(&p, 2, now));
    memset(use, 0, sizeof(use));
    while (now < marked_at + 7 * 50 * US)
        round_trip(&p, &psn, 16, &now, 50 * US, use);
    SR_CHECK_EQ(use[2], 0);
    SR_CHECK(use[0] > 0 && use[1] > 0 && use[3] > 0);

    /* Its rest over, it is tried once, then recycled when that comes back
     * good. */
    now = marked_at + 8 * 50 * US;
    SR_CHECK(!sr_paths_avoided(&p, 2, now));
    from = psn;
    SR_CHECK_EQ(sr_paths_choose(&p, psn, now), 2);
    psn = (psn + 1) & 0xffffff;
    now += 50 * US;
    sr_paths_acked(&p, from, psn, now);
    memset(use, 0, sizeof(use));
    for (int r = 0; r < 20; r++)
        round_trip(&p, &psn, 16, &now, 50 * US, use);
    SR_CHECK(use[2] > 0);
}

static void t_adaptive_lost(void)
{
    struct sr_paths p;
    sr_paths_init(&p, SR_PATHS_ADAPTIVE, 4, BASE, 9);
    uint32_t psn = 100, use[4] = {0};
    uint64_t now = 0;
    for (int r = 0; r < 4; r++)
        round_trip(&p, &psn, 16, &now, 20 * US, use);
    uint32_t from = psn;
    for (int k = 0; k < 16; k++, psn++)
        sr_paths_choose(&p, psn, now);
    uint32_t l = psn_on(&p, from, psn, 1);
    SR_CHECK(l != UINT32_MAX);
    now += 20 * US;
    sr_paths_lost(&p, l, now);
    /* A loss rests longer than a mark: 32 RTTs of 20 us. */
    SR_CHECK(sr_paths_avoided(&p, 1, now + 30 * 20 * US));
    SR_CHECK(!sr_paths_avoided(&p, 1, now + 32 * 20 * US));
    /* The retransmission of the lost packet goes elsewhere. */
    uint8_t r = sr_paths_choose(&p, l, now);
    SR_CHECK(r != 1);
    /* ... and so would a retransmission whose value is still good. */
    uint32_t g = psn_on(&p, from, psn, 3);
    if (g != UINT32_MAX)
        SR_CHECK(sr_paths_choose(&p, g, now) != 3);
    memset(use, 0, sizeof(use));
    for (int k = 0; k < 20; k++)
        round_trip(&p, &psn, 16, &now, 20 * US, use);
    SR_CHECK_EQ(use[1], 0);
}

static void t_adaptive_slow(void)
{
    struct sr_paths p;
    sr_paths_init(&p, SR_PATHS_ADAPTIVE, 2, BASE, 3);
    sr_paths_rtt(&p, 0, 40 * US, 0);
    sr_paths_rtt(&p, 1, 100 * US, 0); /* within 2 x 40 + 50 us: fine */
    SR_CHECK(!sr_paths_avoided(&p, 1, 1));
    sr_paths_rtt(&p, 1, 500 * US, 10);
    SR_CHECK(sr_paths_avoided(&p, 1, 11));
    SR_CHECK_EQ(p.path[1].st.slow, 1);
    for (uint32_t psn = 0; psn < 50; psn++)
        SR_CHECK_EQ(sr_paths_choose(&p, psn, 20), 0);
    /* Delay that grows on every value alike (a queue they share) makes
     * none of them slow. */
    struct sr_paths q;
    sr_paths_init(&q, SR_PATHS_ADAPTIVE, 2, BASE, 3);
    uint64_t rtt = 40 * US;
    for (int k = 0; k < 60; k++, rtt = rtt * 105 / 100)
        sr_paths_rtt(&q, (uint8_t)(k % 2), rtt, (uint64_t)k);
    SR_CHECK(rtt > 500 * US);
    SR_CHECK_EQ(q.path[0].st.slow + q.path[1].st.slow, 0);
    /* every value avoided: the one whose rest ends first, not a hang */
    sr_paths_lost(&p, 49, 30);
    SR_CHECK(sr_paths_avoided(&p, 0, 31));
    SR_CHECK_EQ(sr_paths_choose(&p, 50, 31), 1);
}

static void t_seed(void)
{
    struct sr_paths a, b, c;
    sr_paths_init(&a, SR_PATHS_ADAPTIVE, 8, BASE, 42);
    sr_paths_init(&b, SR_PATHS_ADAPTIVE, 8, BASE, 42);
    sr_paths_init(&c, SR_PATHS_ADAPTIVE, 8, BASE, 43);
    int same_ab = 0, same_ac = 0;
    uint32_t use[8] = {0};
    for (uint32_t psn = 0; psn < 1000; psn++) {
        uint8_t x = sr_paths_choose(&a, psn, psn), y = sr_paths_choose(&b, psn, psn);
        uint8_t z = sr_paths_choose(&c, psn, psn);
        same_ab += x == y;
        same_ac += x == z;
        use[x]++;
        if (psn % 10 == 9) { /* the same feedback to all three */
            sr_paths_acked(&a, psn - 9, psn + 1, psn + 1);
            sr_paths_acked(&b, psn - 9, psn + 1, psn + 1);
            sr_paths_acked(&c, psn - 9, psn + 1, psn + 1);
        }
    }
    SR_CHECK_EQ(same_ab, 1000);
    SR_CHECK(same_ac < 1000);
    for (int i = 0; i < 8; i++)
        SR_CHECK(use[i] > 20);
}

static void t_bad_args(void)
{
    struct sr_paths p;
    sr_paths_init(&p, (enum sr_paths_policy)77, 4, BASE, 0);
    SR_CHECK_EQ(p.policy, SR_PATHS_SINGLE);
    SR_CHECK_EQ(p.n, 1);
    sr_paths_init(&p, SR_PATHS_SPRAY, 0, BASE, 0);
    SR_CHECK_EQ(p.n, 1);
    sr_paths_init(&p, SR_PATHS_SPRAY, 1000, BASE, 0);
    SR_CHECK_EQ(p.n, SR_PATHS_MAX);
    sr_paths_init(&p, SR_PATHS_ADAPTIVE, 4, BASE, 0);
    /* Unknown PSNs, backwards and huge ranges: no effect, no crash. */
    sr_paths_lost(&p, 123, 0);
    sr_paths_marked(&p, 123, 0);
    sr_paths_acked(&p, 10, 5, 0);
    sr_paths_acked(&p, 0, 0x7fffff, 0);
    sr_paths_rtt(&p, 200, 1, 0);
    for (uint8_t i = 0; i < 4; i++)
        SR_CHECK(!sr_paths_avoided(&p, i, 1));
    SR_CHECK(!sr_paths_avoided(&p, 200, 1));
    /* The record forgets beyond its size. */
    for (uint32_t psn = 0; psn < 2 * SR_PATHS_REC; psn++)
        sr_paths_choose(&p, psn, 0);
    SR_CHECK_EQ(sr_paths_of(&p, 0), -1);
    SR_CHECK(sr_paths_of(&p, 2 * SR_PATHS_REC - 1) >= 0);
}

/* Random feedback in any order, PSNs anywhere, time going back and
 * forth: every choice stays a valid value, nothing crashes (ASan). */
static void t_random(void)
{
    uint64_t x = 12345;
    for (int pol = SR_PATHS_SPRAY; pol <= SR_PATHS_ADAPTIVE; pol++) {
        struct sr_paths p;
        sr_paths_init(&p, (enum sr_paths_policy)pol, 7, BASE, 9);
        sr_paths_set_burst(&p, 3);
        int bad = 0;
        for (int k = 0; k < 200000; k++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            uint32_t psn = (uint32_t)(x >> 8) & 0xfff; /* collide often */
            uint64_t now = (x >> 20) & 0xfffffff;
            switch (x % 6) {
            case 0:
            case 1:
                bad += sr_paths_choose(&p, psn, now) >= p.n;
                break;
            case 2:
                sr_paths_acked(&p, psn, (psn + (uint32_t)(x >> 40) % 700) & 0xffffff, now);
                break;
            case 3:
                sr_paths_lost(&p, psn, now);
                break;
            case 4:
                sr_paths_marked(&p, psn, now);
                break;
            default:
                sr_paths_rtt(&p, (uint8_t)(x >> 50), (x >> 30) & 0xfffff, now);
                break;
            }
        }
        SR_CHECK_EQ(bad, 0);
        SR_CHECK(p.tok_cnt <= SR_PATHS_TOK);
    }
}

/* ---- through the engine ---- */

enum { MTU = 1024, XFER = 256 * 1024, MAXPKT = 8192 };

struct wire_log {
    uint32_t n;
    uint16_t port[MAXPKT];
    uint8_t path[MAXPKT], op[MAXPKT], node[MAXPKT];
    int dead_path; /* node 0's requests on this path vanish; -1: none */
    uint32_t dead_drops;
};
static struct wire_log wl;

static int p_tx(void *ctx, const struct sr_tx_pkt *t)
{
    const struct h_node_ctx *nc = ctx;
    if (wl.n < MAXPKT) {
        wl.port[wl.n] = t->src_port;
        wl.path[wl.n] = t->path;
        wl.op[wl.n] = t->hdr[0];
        wl.node[wl.n] = (uint8_t)nc->id;
        wl.n++;
    }
    if (nc->id == 0 && (int)t->path == wl.dead_path && wl.dead_path > 0) {
        wl.dead_drops++;
        return 0; /* gone, like a packet into a black hole */
    }
    return h_tx(ctx, t);
}

struct mp_opts {
    uint8_t paths, policy;
    bool reorder;
    int dead_path;
    uint32_t window;
};

static void mp_open(struct eng_fix *f, const struct mp_opts *m)
{
    memset(&wl, 0, sizeof(wl));
    wl.dead_path = m->dead_path;
    memset(&f->pr, 0, sizeof(f->pr));
    h_init_cfg(&f->h, &(struct h_cfg){0});
    for (int i = 0; i < 2; i++) {
        sr_engine_destroy(f->h.eng[i]);
        struct sr_engine_cfg cfg = {
            .ops = {.tx = p_tx, .async_event = h_async},
            .ops_ctx = &f->h.ctx[i],
            .paths = m->paths,
            .path_policy = m->policy,
            .paths_reorder = m->reorder,
            .paths_seed = 5,
            .window_pkts = m->window,
        };
        h_gid(cfg.gid, i);
        SR_CHECK_EQ(sr_engine_create(&cfg, &f->h.eng[i]), 0);
        f->mem[i] = calloc(1, FIX_MEM);
    }
    h_connect(
        &f->h, &f->pr,
        &(struct h_qp_opts){
            .type = SR_QPT_RC, .mtu = MTU, .access = FIX_ALL_ACCESS, .retry_cnt = 7, .timeout = 8});
    for (int i = 0; i < 2; i++)
        SR_CHECK_EQ(sr_mr_reg(f->pr.pd[i], f->mem[i], FIX_MEM, (uint64_t)(uintptr_t)f->mem[i],
                              FIX_ALL_ACCESS, &f->mr[i]),
                    0);
}

/* One RDMA WRITE of XFER bytes from node 0 and a SEND of 4 KiB; both
 * complete successfully and every byte lands. */
static void mp_xfer(struct eng_fix *f)
{
    pattern(f->mem[0], XFER + 4096, 11);
    struct sr_sge sg = {(uintptr_t)f->mem[0], XFER, sr_mr_lkey(f->mr[0])};
    struct sr_send_wr wr = signaled_wr(f, 1, &sg, SR_WR_RDMA_WRITE, (uintptr_t)f->mem[1]);
    struct sr_sge sg2 = {(uintptr_t)f->mem[0] + XFER, 4096, sr_mr_lkey(f->mr[0])};
    struct sr_send_wr wr2 = signaled_wr(f, 2, &sg2, SR_WR_SEND, 0);
    struct sr_sge rsg = {(uintptr_t)f->mem[1] + XFER, 4096, sr_mr_lkey(f->mr[1])};
    SR_CHECK_EQ(sr_qp_post_recv(f->pr.qp[1], &(struct sr_recv_wr){7, &rsg, 1}), 0);
    post2_ok(f, &wr, &wr2, 200ull * 1000 * 1000);
    SR_CHECK_MEM(f->mem[1], f->mem[0], XFER + 4096);
    struct sr_wc wc;
    SR_CHECK_EQ(wait_wc(&f->h, f->pr.rcq[1], 1, &wc, 1000 * US), 1);
    SR_CHECK_EQ(wc.status, SR_WC_SUCCESS);
}

/* Node 0's request packets per path and the distinct request ports. */
static uint32_t mp_count(uint32_t per_path[SR_PATHS_MAX], uint16_t qp_port, bool *acks_on_base)
{
    uint32_t req = 0;
    *acks_on_base = true;
    memset(per_path, 0, sizeof(uint32_t) * SR_PATHS_MAX);
    for (uint32_t k = 0; k < wl.n; k++) {
        uint8_t op = wl.op[k] & 0x1f;
        bool resp = op >= SR_OP_READ_RESP_FIRST && op <= SR_OP_ATOMIC_ACK;
        if (wl.node[k] == 1 && resp && (wl.port[k] & 0xc000) != 0xc000)
            *acks_on_base = false;
        if (wl.node[k] == 1 && resp && wl.path[k] != 0)
            *acks_on_base = false;
        if (wl.node[k] != 0 || resp)
            continue;
        req++;
        per_path[wl.path[k] % SR_PATHS_MAX]++;
        SR_CHECK_EQ(wl.port[k], sr_paths_port(qp_port, wl.path[k]));
    }
    return req;
}

static uint16_t todays_port(const struct sr_qp *qp)
{
    return (uint16_t)(0xc000 | (sr_qp_num(qp) & 0x3fff));
}

static void t_engine_single(void)
{
    /* Default, and also 4 paths asked for without a peer that takes
     * reordering: one port per QP, today's value. */
    const struct mp_opts rows[] = {
        {.paths = 0, .dead_path = -1},
        {.paths = 4, .policy = SR_PATHS_SPRAY, .reorder = false, .dead_path = -1},
        {.paths = 4, .policy = SR_PATHS_ADAPTIVE, .reorder = false, .dead_path = -1},
    };
    for (size_t r = 0; r < sizeof(rows) / sizeof(rows[0]); r++) {
        struct eng_fix f;
        mp_open(&f, &rows[r]);
        mp_xfer(&f);
        uint16_t port0 = todays_port(f.pr.qp[0]);
        for (uint32_t k = 0; k < wl.n; k++) {
            uint16_t want = wl.node[k] == 0 ? port0 : todays_port(f.pr.qp[1]);
            SR_CHECK_EQ(wl.port[k], want);
            SR_CHECK_EQ(wl.path[k], 0);
        }
        SR_CHECK(wl.n > XFER / MTU);
        SR_CHECK(sr_qp_paths(f.pr.qp[0]) == NULL);
        fix_close(&f);
    }
}

static void t_engine_spray(void)
{
    struct eng_fix f;
    mp_open(&f, &(struct mp_opts){
                    .paths = 4, .policy = SR_PATHS_SPRAY, .reorder = true, .dead_path = -1});
    mp_xfer(&f);
    uint32_t per[SR_PATHS_MAX];
    bool acks_base;
    uint32_t req = mp_count(per, todays_port(f.pr.qp[0]), &acks_base);
    SR_CHECK(req >= XFER / MTU + 4);
    for (int i = 0; i < 4; i++)
        SR_CHECK(per[i] >= req / 4 - 1 && per[i] <= req / 4 + 1);
    SR_CHECK(acks_base);
    struct sr_engine_stats st;
    sr_engine_stats(f.h.eng[0], &st);
    SR_CHECK_EQ(st.retransmits, 0); /* an in-order wire: nothing to repair */
    fix_close(&f);
}

static void t_engine_adaptive_dead_path(void)
{
    /* Value 2 is a black hole. Spraying over it costs a rewind per
     * quarter of the packets; the adaptive policy stops using it after
     * the first loss and every byte still arrives. */
    struct eng_fix f;
    mp_open(&f, &(struct mp_opts){.paths = 4,
                                  .policy = SR_PATHS_ADAPTIVE,
                                  .reorder = true,
                                  .dead_path = 2,
                                  .window = 32});
    mp_xfer(&f);
    uint32_t per[SR_PATHS_MAX];
    bool acks_base;
    uint32_t req = mp_count(per, todays_port(f.pr.qp[0]), &acks_base);
    SR_CHECK(wl.dead_drops >= 1);
    SR_CHECK(per[2] * 10 < req); /* under a tenth on the dead path */
    SR_CHECK(per[0] > 0 && per[1] > 0 && per[3] > 0);
    /* the completer's loss reports reached the dead value's record */
    const struct sr_paths *ps = sr_qp_paths(f.pr.qp[0]);
    SR_CHECK(ps != NULL);
    if (ps) {
        SR_CHECK(ps->path[2].st.lost >= 1);
        SR_CHECK(ps->path[0].st.good > 0 && ps->path[1].st.good > 0 && ps->path[3].st.good > 0);
        SR_CHECK_EQ(ps->path[2].st.good, 0);
    }
    uint32_t adaptive_drops = wl.dead_drops;
    uint64_t adaptive_ns = f.h.now;
    fix_close(&f);

    /* The oblivious spray over the same black hole loses far more. */
    mp_open(
        &f,
        &(struct mp_opts){
            .paths = 4, .policy = SR_PATHS_SPRAY, .reorder = true, .dead_path = 2, .window = 32});
    mp_xfer(&f);
    printf("  dead path: adaptive lost %u packets in %llu us, spray %u in %llu us\n",
           adaptive_drops, (unsigned long long)adaptive_ns / US, wl.dead_drops,
           (unsigned long long)f.h.now / US);
    SR_CHECK(adaptive_drops * 4 < wl.dead_drops);
    fix_close(&f);
}

static void t_engine_cnp(void)
{
    /* A CNP names no packet: the value of the oldest unacknowledged one
     * is marked (sr_paths_qp_cnp, for congestion control's CNP handler). */
    struct eng_fix f;
    mp_open(&f, &(struct mp_opts){
                    .paths = 4, .policy = SR_PATHS_ADAPTIVE, .reorder = true, .dead_path = -1});
    struct sr_sge sg = {(uintptr_t)f.mem[0], 8 * MTU, sr_mr_lkey(f.mr[0])};
    struct sr_send_wr wr = signaled_wr(&f, 1, &sg, SR_WR_RDMA_WRITE, (uintptr_t)f.mem[1]);
    SR_CHECK_EQ(sr_qp_post_send(f.pr.qp[0], &wr, f.h.now), 0);
    const struct sr_paths *ps = sr_qp_paths(f.pr.qp[0]);
    SR_CHECK(ps != NULL);
    if (ps) {
        int v = sr_paths_of(ps, 0xfffff0); /* node 0's first PSN (h_connect) */
        SR_CHECK(v >= 0 && v < 4);
        sr_paths_qp_cnp(f.pr.qp[0], f.h.now + 100);
        for (int i = 0; i < 4 && v >= 0; i++) {
            SR_CHECK_EQ(ps->path[i].st.marked, i == v);
            SR_CHECK_EQ(sr_paths_avoided(ps, (uint8_t)i, f.h.now + 200), i == v);
        }
    }
    struct sr_wc wc;
    SR_CHECK_EQ(wait_wc(&f.h, f.pr.scq[0], 1, &wc, 100000 * US), 1);
    SR_CHECK_EQ(wc.status, SR_WC_SUCCESS);
    /* nothing outstanding: a CNP marks nothing */
    uint64_t before = 0, after = 0;
    for (int i = 0; ps && i < 4; i++)
        before += ps->path[i].st.marked;
    sr_paths_qp_cnp(f.pr.qp[0], f.h.now);
    for (int i = 0; ps && i < 4; i++)
        after += ps->path[i].st.marked;
    SR_CHECK_EQ(after, before);
    fix_close(&f);
}

int main(void)
{
    SR_RUN(t_single);
    SR_RUN(t_ports);
    SR_RUN(t_spray);
    SR_RUN(t_burst);
    SR_RUN(t_adaptive_marked);
    SR_RUN(t_adaptive_lost);
    SR_RUN(t_adaptive_slow);
    SR_RUN(t_seed);
    SR_RUN(t_bad_args);
    SR_RUN(t_random);
    SR_RUN(t_engine_single);
    SR_RUN(t_engine_spray);
    SR_RUN(t_engine_adaptive_dead_path);
    SR_RUN(t_engine_cnp);
    return SR_TEST_RESULT();
}

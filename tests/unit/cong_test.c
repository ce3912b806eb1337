/* cong_test.c: congestion control inside the engine (src/engine/congestion.c),
 * with explicit time on engine_fixture.h's wire: the pacer's departures are
 * the deadlines it asks for, a CNP cuts the rate and the timers bring it
 * back through the engine's own deadlines, the notification point answers
 * CE-marked requests with CNPs of the RoCEv2 layout (IBA Annex A17.9.3) at
 * most once per interval, and the NSCC-style window shrinks with delay and
 * with CNPs. Data is compared byte for byte wherever some moves. */
#include "ecn.h"
#include "engine_fixture.h"
#include "sr_cc.h"

#define US 1000ull

/* ---- a tap on the wire and a run loop that marks CE ---- */

enum { TAP_MAX = 1 << 15 };
struct tap_rec {
    uint64_t at;
    int from;
    uint32_t len;
    uint8_t hdr[32];
};
static struct tap_rec tap[TAP_MAX];
static uint32_t tap_cnt;
static uint64_t ack_extra_ns; /* extra one-way delay of node 1's ACKs */

static int tap_filter(struct harness *h, const struct h_pkt *p, uint64_t seq)
{
    (void)seq;
    if (tap_cnt < TAP_MAX) {
        struct tap_rec *r = &tap[tap_cnt++];
        r->at = h->now;
        r->from = p->from;
        r->len = p->len;
        memcpy(r->hdr, p->data, SR_MIN(p->len, sizeof(r->hdr)));
    }
    return 0;
}

/* Which delivered packets arrive CE-marked: requests from node 0 while
 * ce_on (a switch whose queue is past its threshold). */
static bool ce_on;
static uint64_t ce_marked;

static bool is_request(const uint8_t *d)
{
    const struct sr_opcode_info *i = sr_opcode_info(d[0]);
    return i && (i->flags & SR_OPF_REQUEST);
}

/* h_run with sr_engine_rx_ecn and the ACK delay. */
static bool c_run(struct harness *h, bool (*done)(void *), void *arg, uint64_t max_ns)
{
    uint64_t end = h->now + max_ns;
    for (int steps = 0; steps < 10000000; steps++) {
        h_flush(h);
        if (done && done(arg))
            return true;
        uint64_t next = h->qcount ? h->q[h->qhead]->at : UINT64_MAX;
        for (int i = 0; i < H_NODES; i++)
            next = SR_MIN(next, sr_engine_next_deadline(h->eng[i]));
        if (next == UINT64_MAX || next > end) {
            h->now = end;
            return done ? done(arg) : false;
        }
        if (next > h->now)
            h->now = next;
        while (h->qcount && h->q[h->qhead]->at <= h->now) {
            struct h_pkt *p = h->q[h->qhead];
            h->qhead = (h->qhead + 1) % H_QCAP;
            h->qcount--;
            if (p->to >= H_NODES) {
                p->to -= H_NODES; /* delayed once already */
            } else if (ack_extra_ns && p->from == 1 && !is_request(p->data) &&
                       p->data[0] != SR_OP_CNP) {
                /* a queue on the way back: the ACK comes later */
                p->at += ack_extra_ns;
                p->to += H_NODES;
                h_enqueue(h, p);
                free(p);
                continue;
            }
            uint8_t src[16];
            h_gid(src, p->from);
            bool ce = ce_on && p->from == 0 && is_request(p->data);
            ce_marked += ce;
            sr_engine_rx_ecn(h->eng[p->to], p->data, p->len, src, ce, h->now);
            free(p);
        }
        h_flush(h);
        for (int i = 0; i < H_NODES; i++)
            if (sr_engine_next_deadline(h->eng[i]) <= h->now)
                sr_engine_advance(h->eng[i], h->now);
    }
    return false;
}

static void cc_spec(struct sr_cc_cfg *cfg, const char *spec)
{
    char err[160] = "";
    sr_cc_cfg_default(cfg, 10000000000ull);
    SR_CHECK_EQ(sr_cc_parse(spec, cfg, err, sizeof(err)), 0);
    if (err[0])
        fprintf(stderr, "%s\n", err);
}

static void open_pair(struct eng_fix *f, const struct sr_cc_cfg *cfg, uint32_t mtu)
{
    tap_cnt = 0;
    ce_on = false;
    ce_marked = 0;
    ack_extra_ns = 0;
    fix_open(f, &(struct fix_opts){.wire = {.cc = cfg},
                                   .qp = {.type = SR_QPT_RC,
                                          .mtu = mtu,
                                          .retry_cnt = 7,
                                          .rnr_retry = 7,
                                          .timeout = 14,
                                          .access = 15},
                                   .filter = tap_filter});
}

/* A CNP as IBA Annex A17.9.3 lays it out, built byte by byte here (not by
 * sr_wire): opcode 0x81, P_Key 0xffff, BECN, the destination QP, PSN 0,
 * 16 reserved bytes, a 4-byte ICRC slot (the harness's drivers check none). */
static void cnp_bytes(uint8_t b[32], uint32_t dest_qp)
{
    memset(b, 0, 32);
    b[0] = 0x81;
    b[2] = b[3] = 0xff;
    b[4] = 0x40; /* BECN */
    b[5] = (uint8_t)(dest_qp >> 16);
    b[6] = (uint8_t)(dest_qp >> 8);
    b[7] = (uint8_t)dest_qp;
}

static void send_cnp(struct eng_fix *f, int to, int from_node)
{
    uint8_t b[32], src[16];
    cnp_bytes(b, sr_qp_num(f->pr.qp[to]));
    h_gid(src, from_node);
    sr_engine_rx(f->h.eng[to], b, sizeof(b), src, f->h.now);
}

struct wait_wc {
    struct sr_cq *cq;
    int want, got;
    struct sr_wc wc[8];
};
static bool got_wcs(void *arg)
{
    struct wait_wc *w = arg;
    while (w->got < w->want && w->got < 8) {
        int n = sr_cq_poll(w->cq, 1, &w->wc[w->got]);
        if (n <= 0)
            break;
        w->got += n;
    }
    return w->got >= w->want;
}

/* One WRITE of len bytes from node 0 to node 1; true when it completed
 * successfully within max_ns and the bytes arrived intact. */
static bool write_through(struct eng_fix *f, uint32_t len, uint64_t max_ns, unsigned seed)
{
    pattern(f->mem[0], len, seed);
    memset(f->mem[1], 0, len);
    struct sr_sge sg = {(uintptr_t)f->mem[0], len, sr_mr_lkey(f->mr[0])};
    struct sr_send_wr wr = signaled_wr(f, 42, &sg, SR_WR_RDMA_WRITE, (uintptr_t)f->mem[1]);
    SR_CHECK_EQ(sr_qp_post_send(f->pr.qp[0], &wr, f->h.now), 0);
    struct wait_wc w = {.cq = f->pr.scq[0], .want = 1};
    bool ok = c_run(&f->h, got_wcs, &w, max_ns);
    SR_CHECK(ok);
    if (!ok)
        return false;
    SR_CHECK_EQ(w.wc[0].status, SR_WC_SUCCESS);
    SR_CHECK_MEM(f->mem[1], f->mem[0], len);
    return w.wc[0].status == SR_WC_SUCCESS && memcmp(f->mem[1], f->mem[0], len) == 0;
}

static bool is_data(const struct tap_rec *r)
{
    return r->from == 0 && is_request(r->hdr);
}

/* ---- pacing: packets leave at the deadlines the pacer asks for ---- */

static void test_pacing_deadlines(void)
{
    struct sr_cc_cfg cfg;
    /* timers and byte counter far away: the rate holds still */
    cc_spec(&cfg, "dcqcn,rate_timer_us=1000000,alpha_timer_us=1000000,byte_counter=1000000000000");
    struct eng_fix f;
    open_pair(&f, &cfg, 1024);
    SR_CHECK_EQ(sr_qp_cc_rate_bps(f.pr.qp[0]), 10000000000ull);
    f.h.now = 1000;
    send_cnp(&f, 0, 1);
    uint64_t rate = sr_qp_cc_rate_bps(f.pr.qp[0]);
    SR_CHECK_EQ(rate, 5000000000ull); /* alpha 1: Rc (1 - alpha / 2) */
    f.h.now = 5000;
    tap_cnt = 0;
    SR_CHECK(write_through(&f, 512 * 1024, 10000 * US, 1));
    /* Departure k is the first whole nanosecond at or after t0 plus the
     * serialisation of the packets before it at the rate: with the IPv4
     * and UDP headers (28 bytes) on top of what the engine hands out. */
    uint32_t n = 0;
    double slot_ps = 0;
    uint64_t t0 = 0, last = 0, max_err = 0;
    for (uint32_t i = 0; i < tap_cnt; i++) {
        const struct tap_rec *r = &tap[i];
        if (!is_data(r))
            continue;
        if (n == 0) {
            t0 = r->at;
        } else {
            uint64_t want = t0 + (uint64_t)((slot_ps + 999.0) / 1000.0);
            uint64_t e = r->at > want ? r->at - want : want - r->at;
            max_err = SR_MAX(max_err, e);
        }
        slot_ps += (double)(r->len + 28) * 8 * 1e12 / (double)rate;
        last = r->at;
        n++;
    }
    SR_CHECK_EQ(n, 512);
    SR_CHECK(max_err <= 1); /* every packet at its deadline, no drift */
    /* the rate over the whole message, first to last departure */
    double span_ns = (double)(last - t0);
    double bits = 0;
    uint32_t k = 0;
    for (uint32_t i = 0; i < tap_cnt && k < n - 1; i++)
        if (is_data(&tap[i])) {
            bits += (double)(tap[i].len + 28) * 8;
            k++;
        }
    double bps = bits / span_ns * 1e9;
    SR_CHECK(bps > 0.999 * 5e9 && bps < 1.001 * 5e9);
    fix_close(&f);
}

/* Without a CNP a DCQCN QP is not paced: its packets leave back to back
 * (the link is the limit), and it sets no deadline of its own. */
static void test_unpaced_at_line_rate(void)
{
    struct sr_cc_cfg cfg;
    cc_spec(&cfg, "dcqcn");
    struct eng_fix f;
    open_pair(&f, &cfg, 1024);
    f.h.now = 1000;
    SR_CHECK(write_through(&f, 64 * 1024, 1000 * US, 2));
    uint64_t first = UINT64_MAX, last = 0;
    for (uint32_t i = 0; i < tap_cnt; i++)
        if (is_data(&tap[i])) {
            first = SR_MIN(first, tap[i].at);
            last = SR_MAX(last, tap[i].at);
        }
    SR_CHECK_EQ(last, first); /* all 64 in one call */
    SR_CHECK_EQ(sr_engine_next_deadline(f.h.eng[0]), UINT64_MAX);
    fix_close(&f);
}

/* pace_line: the host's link is faster than line_rate (veths into
 * srdma-switch), so a QP at line rate is paced there too, as the NIC
 * port would serialise: 64 packets of 1 KiB at 10 Gb/s, each at its
 * slot (within 1 ns), the whole message at the line rate. */
static void test_pace_line(void)
{
    struct sr_cc_cfg cfg;
    cc_spec(&cfg, "dcqcn,pace_line=1");
    struct eng_fix f;
    open_pair(&f, &cfg, 1024);
    f.h.now = 1000;
    SR_CHECK_EQ(sr_qp_cc_rate_bps(f.pr.qp[0]), 10000000000ull);
    SR_CHECK(write_through(&f, 64 * 1024, 1000 * US, 2));
    uint32_t n = 0;
    double slot_ps = 0;
    uint64_t t0 = 0, last = 0, max_err = 0;
    for (uint32_t i = 0; i < tap_cnt; i++) {
        const struct tap_rec *r = &tap[i];
        if (!is_data(r))
            continue;
        if (n == 0) {
            t0 = r->at;
        } else {
            uint64_t want = t0 + (uint64_t)((slot_ps + 999.0) / 1000.0);
            max_err = SR_MAX(max_err, r->at > want ? r->at - want : want - r->at);
        }
        slot_ps += (double)(r->len + 28) * 8 * 1e12 / 1e10;
        last = r->at;
        n++;
    }
    SR_CHECK_EQ(n, 64);
    SR_CHECK(max_err <= 1);
    SR_CHECK(last - t0 > 63 * 1024 * 8 / 10); /* > 52 us: not back to back */
    fix_close(&f);
}

/* DCQCN's window in the engine: before any RTT sample a QP puts init_wnd
 * (32 KiB: 32 packets at a 1 KiB MTU) in flight, not the engine's 2048
 * packets, and asks for an ACK every half window (packets 16 and 32), so
 * the window keeps moving; every byte arrives; once samples came (2 us
 * round trips here) the window is 2 x 10 Gb/s x base RTT, under the
 * 8 KiB floor. */
static void test_dcqcn_window(void)
{
    struct sr_cc_cfg cfg;
    cc_spec(&cfg, "dcqcn,bdp_mult=2");
    struct eng_fix f;
    open_pair(&f, &cfg, 1024);
    f.h.now = 1000;
    SR_CHECK_EQ(sr_qp_cc_window_bytes(f.pr.qp[0]), 32 * 1024);
    SR_CHECK(write_through(&f, 256 * 1024, 100000 * US, 3));
    uint32_t first = 0, first_ackreq = 0, total = 0;
    for (uint32_t i = 0; i < tap_cnt; i++) {
        if (!is_data(&tap[i]))
            continue;
        total++;
        if (tap[i].at == 1000) {
            first++;
            first_ackreq += (tap[i].hdr[8] & 0x80) != 0; /* BTH byte 8: AckReq */
        }
    }
    SR_CHECK_EQ(total, 256);
    SR_CHECK_EQ(first, 32);
    SR_CHECK_EQ(first_ackreq, 2);
    SR_CHECK_EQ(sr_qp_cc_window_bytes(f.pr.qp[0]), 8 * 1024);
    fix_close(&f);
}

/* A paced QP's transport timer measures the responder's silence, not the
 * pacer's: at 10 Mb/s (the line rate, paced) a 4 KiB packet takes 3.3 ms,
 * so the 32 packets between two ordinary ACK requests take 106 ms, past
 * timeout 14's 67 ms, and a responder owes no ACK before the request
 * (IBA 9.7.5.1.1). The requester asks for an ACK often enough that one is
 * due within a quarter of the timer: the 128 KiB WRITE arrives intact with
 * no timeout, no resend and no probe, and asks for more ACKs than the
 * ordinary cadence (one per 32 packets and the last) would. */
static void test_paced_ack_requests(void)
{
    struct sr_cc_cfg cfg;
    cc_spec(&cfg, "dcqcn,line_rate_mbps=10,pace_line=1,rate_timer_us=1000000,"
                  "alpha_timer_us=1000000,byte_counter=1000000000000");
    struct eng_fix f;
    open_pair(&f, &cfg, 4096);
    f.h.now = 1000;
    SR_CHECK(write_through(&f, 128 * 1024, 2000000 * US, 4));
    struct sr_engine_stats st;
    sr_engine_stats(f.h.eng[0], &st);
    uint32_t data = 0, ackreq = 0;
    uint64_t first = 0, last = 0;
    for (uint32_t i = 0; i < tap_cnt; i++) {
        if (!is_data(&tap[i]))
            continue;
        if (!data)
            first = tap[i].at;
        last = tap[i].at;
        data++;
        ackreq += (tap[i].hdr[8] & 0x80) != 0;
    }
    SR_CHECK_EQ(data, 32);
    SR_CHECK(last - first > 100 * 1000 * US); /* paced: 31 gaps of 3.3 ms */
    SR_CHECK(ackreq > 2);
    SR_CHECK_EQ(st.timeouts, 0);
    SR_CHECK_EQ(st.retransmits, 0);
    SR_CHECK_EQ(st.probes, 0);
    fix_close(&f);
}

/* ---- the reaction point in the engine: cut, recovery, release ---- */

static void test_cnp_cut_and_recovery(void)
{
    struct sr_cc_cfg cfg;
    cc_spec(&cfg, "dcqcn"); /* T = K = 55 us, F = 5, 10 Gb/s line */
    struct eng_fix f;
    open_pair(&f, &cfg, 1024);
    struct sr_engine_stats s0, s1;
    sr_engine_stats(f.h.eng[0], &s0);
    /* from an address that is not the peer's: not this QP's CNP */
    f.h.now = 1000;
    uint8_t b[32], stranger[16];
    cnp_bytes(b, sr_qp_num(f.pr.qp[0]));
    h_gid(stranger, 7);
    sr_engine_rx(f.h.eng[0], b, sizeof(b), stranger, f.h.now);
    SR_CHECK_EQ(sr_qp_cc_rate_bps(f.pr.qp[0]), 10000000000ull);
    sr_engine_stats(f.h.eng[0], &s1);
    SR_CHECK_EQ(s1.rx_drop_bad_peer - s0.rx_drop_bad_peer, 1);
    SR_CHECK_EQ(s1.cnps_rcvd, 0);

    send_cnp(&f, 0, 1);
    uint64_t t_cut = f.h.now;
    SR_CHECK_EQ(sr_qp_cc_rate_bps(f.pr.qp[0]), 5000000000ull);
    sr_engine_stats(f.h.eng[0], &s1);
    SR_CHECK_EQ(s1.cnps_rcvd, 1);
    /* The rate timer is an engine deadline: idle, the QP still recovers. */
    SR_CHECK_EQ(sr_engine_next_deadline(f.h.eng[0]), t_cut + 55 * US);
    c_run(&f.h, NULL, NULL, 5 * 55 * US + 1 - (f.h.now - t_cut));
    /* five fast-recovery steps toward Rt = 10G: 7.5, 8.75, 9.375, 9.6875, 9.84375 */
    SR_CHECK_EQ(sr_qp_cc_rate_bps(f.pr.qp[0]), 9843750000ull);
    /* then additive increase until both rates are back at the line: released */
    c_run(&f.h, NULL, NULL, 20000 * US);
    SR_CHECK_EQ(sr_qp_cc_rate_bps(f.pr.qp[0]), 10000000000ull);
    SR_CHECK_EQ(sr_engine_next_deadline(f.h.eng[0]), UINT64_MAX);
    SR_CHECK(write_through(&f, 8192, 1000 * US, 3));
    fix_close(&f);
}

/* With congestion control off a CNP is counted and changes nothing. */
static void test_cnp_without_cc(void)
{
    struct eng_fix f;
    open_pair(&f, NULL, 1024);
    send_cnp(&f, 0, 1);
    struct sr_engine_stats s;
    sr_engine_stats(f.h.eng[0], &s);
    SR_CHECK_EQ(s.cnps_rcvd, 1);
    SR_CHECK_EQ(s.rx_drop_other + s.rx_drop_malformed, 0);
    SR_CHECK_EQ(sr_qp_cc_rate_bps(f.pr.qp[0]), 0);
    SR_CHECK_EQ(sr_engine_next_deadline(f.h.eng[0]), UINT64_MAX);
    fix_close(&f);
}

/* ---- the notification point ---- */

static void check_cnp_layout(const struct tap_rec *r, uint32_t dest_qp)
{
    static const uint8_t zero[20];
    SR_CHECK_EQ(r->len, SR_BTH_LEN + SR_CNP_PAD_LEN + SR_ICRC_LEN);
    SR_CHECK_EQ(r->hdr[0], 0x81);
    SR_CHECK_EQ(r->hdr[1], 0); /* SE, M, pad count, TVer */
    SR_CHECK_EQ(r->hdr[2], 0xff);
    SR_CHECK_EQ(r->hdr[3], 0xff);
    SR_CHECK_EQ(r->hdr[4], 0x40); /* BECN, FECN clear */
    SR_CHECK_EQ(sr_get_be24(r->hdr + 5), dest_qp);
    SR_CHECK_MEM(r->hdr + 8, zero, 4);   /* A, reserved, PSN 0 */
    SR_CHECK_MEM(r->hdr + 12, zero, 16); /* the reserved bytes */
}

static void test_np_spacing_and_loop(void)
{
    struct sr_cc_cfg cfg;
    /* CNPs at most every 50 us per QP (the default); a 1 Gb/s line */
    cc_spec(&cfg, "dcqcn,line_rate_mbps=1000,min_rate_mbps=100");
    struct eng_fix f;
    open_pair(&f, &cfg, 1024);
    f.h.now = 1000;
    send_cnp(&f, 0, 1); /* paced from the start (500 Mb/s), so marks spread out */
    ce_on = true;
    uint32_t len = 512 << 10;
    SR_CHECK(write_through(&f, len, 2000000 * US, 4));
    ce_on = false;
    struct sr_engine_stats s0, s1;
    sr_engine_stats(f.h.eng[0], &s0);
    sr_engine_stats(f.h.eng[1], &s1);
    uint32_t cnps = 0;
    uint64_t prev = 0, first_ce = UINT64_MAX, last_ce = 0, min_gap = UINT64_MAX;
    for (uint32_t i = 0; i < tap_cnt; i++) {
        const struct tap_rec *r = &tap[i];
        if (is_data(r)) {
            first_ce = SR_MIN(first_ce, r->at);
            last_ce = SR_MAX(last_ce, r->at);
        }
        if (r->from != 1 || r->hdr[0] != SR_OP_CNP)
            continue;
        check_cnp_layout(r, sr_qp_num(f.pr.qp[0]));
        if (cnps)
            min_gap = SR_MIN(min_gap, r->at - prev);
        prev = r->at;
        cnps++;
    }
    SR_CHECK_EQ(s1.rx_ce, ce_marked);
    SR_CHECK(ce_marked >= 512);
    SR_CHECK_EQ(s1.cnps_sent, cnps);
    SR_CHECK_EQ(s0.cnps_rcvd, cnps + 1); /* and the one sent by hand */
    SR_CHECK(cnps >= 2);
    SR_CHECK(min_gap >= 50 * US);
    /* at most one per interval: while marked packets came faster than one
     * per 50 us (the first milliseconds, at 500 Mb/s) some got none; once
     * the sender was down to 100 Mb/s (one packet per 84 us) each did */
    uint64_t span = last_ce - first_ce;
    fprintf(stderr, "np: %u CNPs over %llu us of marks, min gap %llu ns, %llu marks, rate %llu\n",
            cnps, (unsigned long long)(span / US), (unsigned long long)min_gap,
            (unsigned long long)ce_marked, (unsigned long long)sr_qp_cc_rate_bps(f.pr.qp[0]));
    SR_CHECK(cnps < ce_marked);
    SR_CHECK(cnps > ce_marked / 2);
    SR_CHECK(cnps <= span / (50 * US) + 1);
    /* The sender slowed toward the floor: 512 KiB at 500 Mb/s takes
     * 8.4 ms, at 100 Mb/s 42 ms. */
    SR_CHECK(span > 20000 * US);
    SR_CHECK(sr_qp_cc_rate_bps(f.pr.qp[0]) < 200000000ull);
    fix_close(&f);
}

static void test_np_interval_zero(void)
{
    struct sr_cc_cfg cfg;
    cc_spec(&cfg, "dcqcn,cnp_interval_us=0");
    struct eng_fix f;
    open_pair(&f, &cfg, 1024);
    f.h.now = 1000;
    ce_on = true;
    SR_CHECK(write_through(&f, 10 * 1024, 1000 * US, 5));
    uint32_t cnps = 0;
    for (uint32_t i = 0; i < tap_cnt; i++)
        cnps += tap[i].from == 1 && tap[i].hdr[0] == SR_OP_CNP;
    SR_CHECK_EQ(ce_marked, 10);
    SR_CHECK_EQ(cnps, 10); /* one for every marked packet */
    fix_close(&f);
}

/* UD: the CNP goes to the sender the DETH names, at its address, and a
 * UD QP takes a CNP from anyone (no path check for datagrams). */
static void test_np_ud(void)
{
    struct sr_cc_cfg cfg;
    cc_spec(&cfg, "dcqcn,cnp_interval_us=0,rate_timer_us=1000000,alpha_timer_us=1000000");
    struct eng_fix f;
    tap_cnt = 0;
    ce_marked = 0;
    ack_extra_ns = 0;
    fix_open(&f, &(struct fix_opts){.wire = {.cc = &cfg},
                                    .qp = {.type = SR_QPT_UD, .mtu = 1024},
                                    .filter = tap_filter});
    struct sr_sge rs = {(uintptr_t)f.mem[1], 40 + 1024, sr_mr_lkey(f.mr[1])};
    struct sr_recv_wr rwr = {.wr_id = 1, .sg_list = &rs, .num_sge = 1};
    SR_CHECK_EQ(sr_qp_post_recv(f.pr.qp[1], &rwr), 0);
    struct sr_sge sg = {(uintptr_t)f.mem[0], 100, sr_mr_lkey(f.mr[0])};
    struct sr_send_wr wr = {.wr_id = 2,
                            .sg_list = &sg,
                            .num_sge = 1,
                            .opcode = SR_WR_SEND,
                            .send_flags = SR_SEND_SIGNALED,
                            .ah = {.dest_qpn = sr_qp_num(f.pr.qp[1]), .qkey = 0x11111111}};
    h_gid(wr.ah.dgid, 1);
    f.h.now = 1000;
    ce_on = true;
    SR_CHECK_EQ(sr_qp_post_send(f.pr.qp[0], &wr, f.h.now), 0);
    struct wait_wc w = {.cq = f.pr.rcq[1], .want = 1};
    SR_CHECK(c_run(&f.h, got_wcs, &w, 1000 * US));
    c_run(&f.h, NULL, NULL, 10 * US); /* the CNP's way back */
    ce_on = false;
    uint32_t cnps = 0;
    for (uint32_t i = 0; i < tap_cnt; i++)
        if (tap[i].from == 1 && tap[i].hdr[0] == SR_OP_CNP) {
            check_cnp_layout(&tap[i], sr_qp_num(f.pr.qp[0]));
            cnps++;
        }
    SR_CHECK_EQ(ce_marked, 1);
    SR_CHECK_EQ(cnps, 1);
    SR_CHECK_EQ(sr_qp_cc_rate_bps(f.pr.qp[0]), 5000000000ull);
    /* from an address that is not the peer's: a UD QP still takes it */
    uint8_t b[32], stranger[16];
    cnp_bytes(b, sr_qp_num(f.pr.qp[0]));
    h_gid(stranger, 7);
    sr_engine_rx(f.h.eng[0], b, sizeof(b), stranger, f.h.now + 100 * US);
    struct sr_engine_stats s;
    sr_engine_stats(f.h.eng[0], &s);
    SR_CHECK_EQ(s.cnps_rcvd, 2);
    SR_CHECK(sr_qp_cc_rate_bps(f.pr.qp[0]) < 5000000000ull);
    fix_close(&f);
}

/* ---- the NSCC-style window: marks with delay shrink it, delay alone does not ---- */

static void test_nscc_window(void)
{
    struct sr_cc_cfg cfg;
    cc_spec(&cfg, "nscc,base_rtt_us=2,target_us=10,mtu=1024,init_wnd=65536");
    struct eng_fix f;
    open_pair(&f, &cfg, 1024);
    f.h.now = 1000;
    SR_CHECK_EQ(sr_qp_cc_window_bytes(f.pr.qp[0]), 65536);
    /* a CNP before any round-trip sample: the largest cut (md_max 0.5) */
    send_cnp(&f, 0, 1);
    SR_CHECK_EQ(sr_qp_cc_window_bytes(f.pr.qp[0]), 32768);
    /* no queue: the round trip is the base, the window opens */
    SR_CHECK(write_through(&f, 1 << 20, 100000 * US, 6));
    uint64_t open = sr_qp_cc_window_bytes(f.pr.qp[0]);
    SR_CHECK(open > 65536);
    /* the ACKs come 100 us late, far above the target, but nothing is
     * marked: not the fabric's queue (NSCC's quadrant of delay without
     * ECN), the window keeps growing by the fair increase */
    ack_extra_ns = 100 * US;
    SR_CHECK(write_through(&f, 1 << 20, 1000000 * US, 7));
    uint64_t late = sr_qp_cc_window_bytes(f.pr.qp[0]);
    SR_CHECK(late > open);
    /* late and marked (CNPs from the notification point): cut to within
     * a packet of the floor (one MTU; the fair increase between cuts) */
    ce_on = true;
    SR_CHECK(write_through(&f, 1 << 20, 1000000 * US, 9));
    ce_on = false;
    ack_extra_ns = 0;
    uint64_t shut = sr_qp_cc_window_bytes(f.pr.qp[0]);
    SR_CHECK(shut <= 2048 && shut < late / 16);
    /* the queue gone, it opens again */
    SR_CHECK(write_through(&f, 1 << 20, 100000 * US, 8));
    SR_CHECK(sr_qp_cc_window_bytes(f.pr.qp[0]) > 65536);
    fix_close(&f);
}

/* ---- the ECN echo between SACK peers (ecn.c, docs/WIRE.md) ---- */

/* The wire drops every CNP (so that only the echo can tell the requester
 * of the marks) and, once, the first request packet (so that the next
 * responses are SACKs that acknowledge nothing new). */
static bool drop_first;
static int echo_filter(struct harness *h, const struct h_pkt *p, uint64_t seq)
{
    tap_filter(h, p, seq);
    if (p->data[0] == SR_OP_CNP)
        return 1;
    if (drop_first && p->from == 0 && is_request(p->data)) {
        drop_first = false;
        return 1;
    }
    return 0;
}

static void open_echo(struct eng_fix *f, const struct sr_cc_cfg *cfg, bool sack0, bool sack1)
{
    tap_cnt = 0;
    ce_on = false;
    ce_marked = 0;
    ack_extra_ns = 0;
    fix_open(f, &(struct fix_opts){.wire = {.cc = cfg, .sack = {sack0, sack1}},
                                   .qp = {.type = SR_QPT_RC,
                                          .mtu = 1024,
                                          .retry_cnt = 7,
                                          .rnr_retry = 7,
                                          .timeout = 14,
                                          .access = 15},
                                   .filter = echo_filter});
}

/* Responses from node 1 in the tap: with the agreement bit, with ECE
 * (Resv7 bit 5 on an ACK, the SACKETH flag on a SACK). */
struct echo_seen {
    uint32_t resp, agreed, ece_ack, ece_sack, sacks;
};
static struct echo_seen echo_scan(void)
{
    struct echo_seen s = {0};
    for (uint32_t i = 0; i < tap_cnt; i++) {
        const struct tap_rec *r = &tap[i];
        if (r->from != 1 || r->hdr[0] == SR_OP_CNP || is_request(r->hdr))
            continue;
        s.resp++;
        s.agreed += (r->hdr[8] & SR_BTH_RESV7_SACK) != 0;
        if (r->hdr[0] == SR_OP_SACK) {
            s.sacks++;
            s.ece_sack += (r->hdr[SR_BTH_LEN + SR_AETH_LEN] & SR_SACK_F_ECE) != 0;
        } else {
            s.ece_ack += (r->hdr[8] & SR_BTH_RESV7_ECE) != 0;
        }
    }
    return s;
}

/* nscc hears of the marks only through the echo (the wire drops every
 * CNP). Before any round-trip sample (the first write loses its first
 * packet, so the only timed packet is resent: Karn), every echo is
 * congestion of unknown size and cuts the window by md_max: it falls to
 * the floor, while the unmarked twin keeps its initial window. With
 * samples (a second, clean write) and no queueing delay, an echo is a
 * transient below the target (NSCC's quadrant): no increase and no cut,
 * where the unmarked write grows the window. */
static void test_ecn_echo_nscc(void)
{
    struct sr_cc_cfg cfg;
    cc_spec(&cfg, "nscc,target_us=10,mtu=1024,init_wnd=65536");
    uint64_t grew[2] = {0, 0};
    for (int marked = 0; marked < 2; marked++) {
        sr_test_ctx = marked ? "CE-marked" : "unmarked";
        struct eng_fix f;
        open_echo(&f, &cfg, true, true);
        f.h.now = 1000;
        ce_on = marked;
        drop_first = true;
        SR_CHECK(write_through(&f, 64 * 1024, 100000 * US, 11));
        struct sr_engine_stats s0, s1;
        sr_engine_stats(f.h.eng[0], &s0);
        sr_engine_stats(f.h.eng[1], &s1);
        struct echo_seen e = echo_scan();
        uint64_t wnd = sr_qp_cc_window_bytes(f.pr.qp[0]);
        SR_CHECK(e.sacks > 0); /* the hole made SACKs that acknowledge nothing new */
        SR_CHECK_EQ(e.agreed, e.resp);
        SR_CHECK_EQ(s0.cnps_rcvd, 0); /* the wire took every CNP */
        if (marked) {
            SR_CHECK(ce_marked > 0);
            SR_CHECK(e.ece_sack > 0);
            SR_CHECK_EQ(s1.ece_sent, e.ece_sack + e.ece_ack);
            SR_CHECK_EQ(s0.ece_rcvd, s1.ece_sent);
            /* halved per echo down to min_wnd (how many echoes come
             * depends on how often the responder SACKs) */
            uint64_t want = s0.ece_rcvd >= 6 ? 1024 : 65536 >> s0.ece_rcvd;
            SR_CHECK(s0.ece_rcvd >= 3);
            SR_CHECK_EQ(wnd, want);
        } else {
            SR_CHECK_EQ(e.ece_sack + e.ece_ack, 0);
            SR_CHECK_EQ(s0.ece_rcvd + s1.ece_sent, 0);
            SR_CHECK_EQ(wnd, 65536);
        }
        fix_close(&f);

        /* with round-trip samples: a clean write first, then one marked or not */
        open_echo(&f, &cfg, true, true);
        f.h.now = 1000;
        SR_CHECK(write_through(&f, 64 * 1024, 100000 * US, 13));
        uint64_t w0 = sr_qp_cc_window_bytes(f.pr.qp[0]);
        tap_cnt = 0;
        ce_on = marked;
        SR_CHECK(write_through(&f, 64 * 1024, 100000 * US, 14));
        uint64_t w1 = sr_qp_cc_window_bytes(f.pr.qp[0]);
        e = echo_scan();
        SR_CHECK(marked ? w1 >= w0 : w1 > w0);
        grew[marked] = w1 - w0;
        SR_CHECK_EQ(e.sacks, 0);
        SR_CHECK_EQ(e.ece_ack > 0, marked); /* plain ACKs carry Resv7 bit 5 */
        fix_close(&f);
    }
    SR_CHECK(grew[1] * 4 < grew[0]);
    sr_test_ctx = "";
}

/* A standard peer (sr_engine_cfg.sack off, SOFTRDMA_SACK=0) on either
 * side: no agreement, so no response carries either echo bit, however
 * many requests arrive CE-marked. */
static void test_ecn_echo_standard_peer(void)
{
    struct sr_cc_cfg cfg;
    cc_spec(&cfg, "nscc,target_us=10,mtu=1024,init_wnd=65536");
    for (int side = 0; side < 2; side++) {
        sr_test_ctx = side ? "standard responder" : "standard requester";
        struct eng_fix f;
        open_echo(&f, &cfg, side == 1, side == 0);
        f.h.now = 1000;
        ce_on = true;
        drop_first = true;
        SR_CHECK(write_through(&f, 64 * 1024, 100000 * US, 12));
        struct echo_seen e = echo_scan();
        struct sr_engine_stats s0, s1;
        sr_engine_stats(f.h.eng[0], &s0);
        sr_engine_stats(f.h.eng[1], &s1);
        SR_CHECK(ce_marked > 0);
        SR_CHECK(e.resp > 0);
        SR_CHECK_EQ(e.agreed + e.sacks + e.ece_ack, 0);
        SR_CHECK_EQ(s1.ece_sent + s0.ece_rcvd, 0);
        SR_CHECK(s1.seq_naks_sent > 0); /* the hole went go-back-N, as standard */
        for (uint32_t i = 0; i < tap_cnt; i++)
            if (tap[i].from == 1 && tap[i].hdr[0] != SR_OP_CNP)
                SR_CHECK_EQ(tap[i].hdr[8] & 0x7f, 0);
        fix_close(&f);
    }
    sr_test_ctx = "";
}

/* The hold report (docs/WIRE.md): a responder that holds an ACK (here
 * 30 us, sr_engine_cfg.ack_delay_ns) says on it, in Resv7 bits 4..0, how
 * long after the AckReq it left; the requester counts it and its nscc
 * takes it off the RTT samples. A standard requester's ACKs carry no such bits
 * (test_ecn_echo_standard_peer checks all seven). */
static void test_hold_report(void)
{
    struct sr_cc_cfg cfg;
    cc_spec(&cfg, "nscc,target_us=10,mtu=1024,init_wnd=65536");
    for (int sack = 0; sack < 2; sack++) {
        sr_test_ctx = sack ? "SACK peers" : "standard requester";
        struct eng_fix f;
        tap_cnt = 0;
        ce_on = false;
        ack_extra_ns = 0;
        fix_open(&f, &(struct fix_opts){
                         .wire = {.cc = &cfg, .sack = {sack, true}, .ack_delay_ns = 30 * US},
                         .qp = {.type = SR_QPT_RC,
                                .mtu = 1024,
                                .retry_cnt = 7,
                                .rnr_retry = 7,
                                .timeout = 14,
                                .access = 15},
                         .filter = echo_filter});
        f.h.now = 1000;
        drop_first = false;
        for (int i = 0; i < 4; i++)
            SR_CHECK(write_through(&f, 4096, 100000 * US, 20 + (uint32_t)i));
        uint32_t acks = 0, coded = 0;
        uint8_t code = 0;
        for (uint32_t i = 0; i < tap_cnt; i++) {
            const struct tap_rec *r = &tap[i];
            if (r->from != 1 || (r->hdr[0] & 0x1f) != SR_OP_ACK)
                continue;
            acks++;
            if (r->hdr[8] & SR_ECN_HOLD_MASK) {
                coded++;
                code = r->hdr[8] & SR_ECN_HOLD_MASK;
            }
        }
        struct sr_engine_stats s0, s1;
        sr_engine_stats(f.h.eng[0], &s0);
        sr_engine_stats(f.h.eng[1], &s1);
        SR_CHECK(acks > 0);
        if (sack) {
            /* every ACK was held its 30 us (nobody replies): 30 us codes as
             * 28 us (rounded down) */
            SR_CHECK_EQ(coded, acks);
            SR_CHECK_EQ(sr_ecn_hold_ns(code), 28 * US);
            SR_CHECK_EQ(s1.ack_holds_sent, coded);
            SR_CHECK_EQ(s0.ack_holds_rcvd, coded);
            /* and the requester's nscc took them off its samples */
            SR_CHECK(sr_ecn_hold_taken_ns(f.pr.qp[0]) >= 28 * US);
        } else {
            SR_CHECK_EQ(coded, 0);
            SR_CHECK_EQ(s1.ack_holds_sent + s0.ack_holds_rcvd, 0);
            SR_CHECK_EQ(sr_ecn_hold_taken_ns(f.pr.qp[0]), 0);
        }
        fix_close(&f);
    }
    sr_test_ctx = "";
}

/* The code: rounded down, never longer than the hold, saturated. */
static void test_hold_code(void)
{
    static const struct {
        uint64_t ns, want;
    } rows[] = {
        {0, 0},           {999, 0},         {1000, 1000},     {3999, 3000},
        {4000, 4000},     {7900, 7000},     {20000, 20000},   {30000, 28000},
        {200000, 192000}, {447999, 384000}, {448000, 448000}, {10000000, 448000},
    };
    for (unsigned i = 0; i < SR_ARRAY_SIZE(rows); i++) {
        uint8_t c = sr_ecn_hold_code(rows[i].ns);
        SR_CHECK(c <= SR_ECN_HOLD_MASK);
        SR_CHECK_EQ(sr_ecn_hold_ns(c), rows[i].want);
        SR_CHECK(sr_ecn_hold_ns(c) <= rows[i].ns);
    }
    /* every code decodes to a value that codes back to itself */
    for (unsigned c = 0; c <= SR_ECN_HOLD_MASK; c++)
        SR_CHECK_EQ(sr_ecn_hold_code(sr_ecn_hold_ns((uint8_t)c)), c);
}

int main(void)
{
    SR_RUN(test_pacing_deadlines);
    SR_RUN(test_unpaced_at_line_rate);
    SR_RUN(test_pace_line);
    SR_RUN(test_dcqcn_window);
    SR_RUN(test_paced_ack_requests);
    SR_RUN(test_cnp_cut_and_recovery);
    SR_RUN(test_cnp_without_cc);
    SR_RUN(test_np_spacing_and_loop);
    SR_RUN(test_np_interval_zero);
    SR_RUN(test_np_ud);
    SR_RUN(test_nscc_window);
    SR_RUN(test_ecn_echo_nscc);
    SR_RUN(test_ecn_echo_standard_peer);
    SR_RUN(test_hold_report);
    SR_RUN(test_hold_code);
    return SR_TEST_RESULT();
}

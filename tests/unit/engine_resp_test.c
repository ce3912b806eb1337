/* engine_resp_test.c: the responder's acknowledgements: ACKs held back
 * (sr_engine_cfg.ack_delay_ns) leave with the reply, when due, ahead of a
 * READ response, as the QP enters Error, for a passive target after 4 us;
 * the longer hold of a QP that replies; the hold of a message's end; and
 * crossing messages released by idle polls; on engine_fixture.h. */
#include "engine_fixture.h"

/* ---- held ACKs (sr_engine_cfg.ack_delay_ns) ---- */
enum { LOG_MAX = 256, DELAY = 20000 };
struct log_ent {
    int from;
    uint8_t op;
    uint64_t at;
};
static struct log_ent plog[LOG_MAX];
static int nlog;
static int f_log(struct harness *h, const struct h_pkt *p, uint64_t seq)
{
    (void)seq;
    if (nlog < LOG_MAX)
        plog[nlog++] = (struct log_ent){p->from, (uint8_t)(p->data[0] & 0x1f), h->now};
    return 0;
}
static int log_find(int from, uint8_t op, int start)
{
    for (int i = start; i < nlog; i++)
        if (plog[i].from == from && plog[i].op == op)
            return i;
    return -1;
}

static void post_write(struct eng_fix *f, int from, uint64_t id, enum sr_wr_opcode op)
{
    struct sr_sge sg = {(uintptr_t)f->mem[from], 64, sr_mr_lkey(f->mr[from])};
    struct sr_send_wr wr = {.wr_id = id,
                            .sg_list = &sg,
                            .num_sge = 1,
                            .opcode = op,
                            .send_flags = SR_SEND_SIGNALED,
                            .remote_addr = (uintptr_t)f->mem[!from] + 4096,
                            .rkey = sr_mr_rkey(f->mr[!from])};
    SR_CHECK_EQ(sr_qp_post_send(f->pr.qp[from], &wr, f->h.now), 0);
}

/* A pair whose engines hold ACKs delay ns, every packet logged; path MTU
 * mtu (0: the harness's default). */
static void ack_setup_with(struct eng_fix *f, uint8_t timeout, uint64_t delay, uint32_t mtu)
{
    struct h_qp_opts o = {
        .type = SR_QPT_RC, .mtu = mtu, .timeout = timeout, .retry_cnt = 3, .access = 15};
    fix_open(f, &(struct fix_opts){.wire = {.ack_delay_ns = delay}, .qp = o, .filter = f_log});
    nlog = 0;
}

static void ack_setup(struct eng_fix *f, uint8_t timeout)
{
    ack_setup_with(f, timeout, DELAY, 0);
}

static void test_ack_delay(void)
{
    struct sr_wc wc[2];
    for (int c = 0; c < 5; c++) {
        static const char *names[] = {"held ACK leaves with the reply", "held ACK leaves when due",
                                      "held ACK precedes a READ response",
                                      "held ACK sent as the QP enters Error",
                                      "a passive target holds ACKs 4 us at most"};
        sr_test_ctx = names[c];
        struct eng_fix f;
        ack_setup(&f, 14);
        if (c == 4)
            sr_engine_hold_acks(f.h.eng[1], false);
        pattern(f.mem[0], 64, 3);
        post_write(&f, 0, 1, SR_WR_RDMA_WRITE);
        if (c == 2)
            post_write(&f, 0, 2, SR_WR_RDMA_READ);
        if (c == 4) {
            uint64_t sent = plog[log_find(0, SR_OP_WRITE_ONLY, 0)].at;
            SR_CHECK_EQ(wait_wc(&f.h, f.pr.scq[0], 1, wc, DELAY), 1);
            int a = log_find(1, SR_OP_ACK, 0);
            SR_CHECK(a >= 0);
            SR_CHECK_EQ(plog[a].at, sent + H_DELAY_NS + 4000);
            fix_close(&f);
            continue;
        }
        h_run(&f.h, NULL, NULL, DELAY / 2); /* delivered, executed, not yet acknowledged */
        SR_CHECK_MEM(f.mem[1] + 4096, f.mem[0], 64);
        switch (c) {
        case 0: {
            SR_CHECK_EQ(log_find(1, SR_OP_ACK, 0), -1);
            post_write(&f, 1, 9, SR_WR_RDMA_WRITE); /* the reply */
            int w = log_find(1, SR_OP_WRITE_ONLY, 0), a = log_find(1, SR_OP_ACK, 0);
            SR_CHECK(w >= 0 && a == w + 1); /* right behind the reply, at once */
            SR_CHECK_EQ(plog[a].at, plog[w].at);
            SR_CHECK_EQ(wait_wc(&f.h, f.pr.scq[0], 1, wc, DELAY / 4), 1);
            SR_CHECK_EQ(wc[0].status, SR_WC_SUCCESS);
            SR_CHECK_EQ(wait_wc(&f.h, f.pr.scq[1], 1, wc, 2 * DELAY + 10000), 1);
            SR_CHECK_EQ(wc[0].status, SR_WC_SUCCESS);
            break;
        }
        case 1: {
            uint64_t sent = plog[log_find(0, SR_OP_WRITE_ONLY, 0)].at;
            SR_CHECK_EQ(wait_wc(&f.h, f.pr.scq[0], 1, wc, 2 * DELAY), 1);
            SR_CHECK_EQ(wc[0].status, SR_WC_SUCCESS);
            int a = log_find(1, SR_OP_ACK, 0);
            SR_CHECK(a >= 0);
            SR_CHECK_EQ(plog[a].at, sent + H_DELAY_NS + DELAY); /* held for the delay, no more */
            SR_CHECK_EQ(log_find(1, SR_OP_ACK, a + 1), -1);
            break;
        }
        case 2: {
            int a = log_find(1, SR_OP_ACK, 0), r = log_find(1, SR_OP_READ_RESP_ONLY, 0);
            SR_CHECK(a >= 0 && r == a + 1); /* PSN order: the WRITE's ACK, then the READ's */
            SR_CHECK_EQ(wait_wc(&f.h, f.pr.scq[0], 2, wc, DELAY / 4), 2);
            SR_CHECK_EQ(wc[0].status, SR_WC_SUCCESS);
            SR_CHECK_EQ(wc[1].status, SR_WC_SUCCESS);
            break;
        }
        case 3: {
            /* the held ACK covers a message QP 1 completed: it leaves as the
             * QP enters Error, and nothing after it */
            struct sr_qp_attr a = {.qp_state = SR_QPS_ERR};
            uint64_t at = f.h.now;
            SR_CHECK_EQ(sr_qp_modify(f.pr.qp[1], &a, SR_QP_STATE, f.h.now), 0);
            h_run(&f.h, NULL, NULL, 2 * DELAY);
            int k = log_find(1, SR_OP_ACK, 0);
            SR_CHECK(k >= 0);
            SR_CHECK(k < 0 || plog[k].at <= at + 4000);
            SR_CHECK(k < 0 || log_find(1, SR_OP_ACK, k + 1) == -1);
            SR_CHECK_EQ(wait_wc(&f.h, f.pr.scq[0], 1, wc, DELAY), 1);
            SR_CHECK_EQ(wc[0].status, SR_WC_SUCCESS);
            break;
        }
        }
        fix_close(&f);
    }
}

/* The requester's probe (2 SRTT plus the ordinary hold, rtt.h) comes
 * before a reply's long hold ends and draws an ACK at once (a duplicate is
 * answered at once, IBA 9.7.5.1.3); the wire loses it here, so that what
 * is measured is the responder's hold alone. */
static uint32_t last_psn0 = UINT32_MAX;
static int f_log_no_probe(struct harness *h, const struct h_pkt *p, uint64_t seq)
{
    f_log(h, p, seq);
    if (p->from != 0 || (p->data[0] & 0x1f) != SR_OP_WRITE_ONLY)
        return 0;
    uint32_t psn = (uint32_t)p->data[9] << 16 | (uint32_t)p->data[10] << 8 | p->data[11];
    if (psn == last_psn0)
        return 1;
    last_psn0 = psn;
    return 0;
}

/* When the held ACK left with a reply, the QP holds the next one 10 x as
 * long (capped at a quarter of its timeout); one that falls due ends that. */
static void test_ack_reply_hold(void)
{
    sr_test_ctx = "a QP that replies holds ACKs longer";
    for (int c = 0; c < 2; c++) {
        static const uint8_t timeout[] = {14, 5}; /* 67 ms; 131 us */
        struct sr_wc wc[2];
        struct eng_fix f;
        ack_setup(&f, timeout[c]);
        f.h.filter = f_log_no_probe;
        last_psn0 = UINT32_MAX;
        /* a ping-pong round: QP 1's ACK rides with its reply */
        post_write(&f, 0, 1, SR_WR_RDMA_WRITE);
        h_run(&f.h, NULL, NULL, DELAY / 2);
        post_write(&f, 1, 2, SR_WR_RDMA_WRITE);
        SR_CHECK_EQ(wait_wc(&f.h, f.pr.scq[0], 1, wc, DELAY / 4), 1);
        SR_CHECK_EQ(wait_wc(&f.h, f.pr.scq[1], 1, wc, 2 * DELAY), 1);
        /* QP 1's next two holds: long, then (that one fell due) the delay */
        uint64_t want[] = {c == 0 ? 10 * DELAY : 131072 / 4, DELAY};
        for (int i = 0; i < 2; i++) {
            int from = nlog;
            post_write(&f, 0, 3 + (uint64_t)i, SR_WR_RDMA_WRITE);
            uint64_t sent = plog[log_find(0, SR_OP_WRITE_ONLY, from)].at;
            SR_CHECK_EQ(wait_wc(&f.h, f.pr.scq[0], 1, wc, 20 * DELAY), 1);
            SR_CHECK_EQ(wc[0].status, SR_WC_SUCCESS);
            int a = log_find(1, SR_OP_ACK, from);
            SR_CHECK(a >= 0);
            SR_CHECK_EQ(plog[a].at, sent + H_DELAY_NS + want[i]);
        }
        fix_close(&f);
    }
}

/* The ACK of a message's last packet is held from that packet's arrival,
 * not from the ACK request earlier in the message (one every 32 packets)
 * whose hold it joins: that hold may end before the application has seen
 * the message and posted the reply the ACK should ride with. Here 64
 * packets, the LAST 50 us behind the rest, holds of 100 us, and the reply
 * posted 75 us after the LAST: it carries the ACK. */
static int f_log_late_last(struct harness *h, const struct h_pkt *p, uint64_t seq)
{
    f_log(h, p, seq);
    return p->from == 0 && (p->data[0] & 0x1f) == SR_OP_WRITE_LAST ? 3 : 0;
}

static void ack_hold_from_end(uint8_t timeout)
{
    sr_test_ctx = timeout > 6 ? "the ACK of a message's end is held from its arrival"
                              : "... but within a quarter of a short timeout";
    enum { LEN = 64 * 256 };
    struct eng_fix f;
    struct sr_wc wc[2];
    ack_setup_with(&f, timeout, 100000, 256);
    f.h.filter = f_log_late_last;
    pattern(f.mem[0], LEN, 7);
    struct sr_sge sg = {(uintptr_t)f.mem[0], LEN, sr_mr_lkey(f.mr[0])};
    struct sr_send_wr wr = signaled_wr(&f, 1, &sg, SR_WR_RDMA_WRITE, (uintptr_t)f.mem[1] + 4096);
    uint64_t sent = f.h.now;
    SR_CHECK_EQ(sr_qp_post_send(f.pr.qp[0], &wr, f.h.now), 0);
    /* the rest arrives at sent + 1 us, the LAST at sent + 51 us */
    h_run(&f.h, NULL, NULL, H_DELAY_NS + 50000 + 75000);
    SR_CHECK_EQ(f.h.now, sent + H_DELAY_NS + 125000);
    SR_CHECK_MEM(f.mem[1] + 4096, f.mem[0], LEN);
    if (timeout > 6) {
        SR_CHECK_EQ(log_find(1, SR_OP_ACK, 0), -1); /* still held */
        post_write(&f, 1, 9, SR_WR_RDMA_WRITE);     /* the reply */
        int w = log_find(1, SR_OP_WRITE_ONLY, 0), a = log_find(1, SR_OP_ACK, 0);
        SR_CHECK(w >= 0 && a == w + 1); /* right behind the reply */
    } else {
        /* 262 us: a quarter is less than the hold, which is not extended */
        int a = log_find(1, SR_OP_ACK, 0);
        SR_CHECK(a >= 0);
        SR_CHECK_EQ(plog[a].at, sent + H_DELAY_NS + 100000);
    }
    SR_CHECK_EQ(wait_wc(&f.h, f.pr.scq[0], 1, wc, 10000), 1);
    SR_CHECK_EQ(wc[0].status, SR_WC_SUCCESS);
    fix_close(&f);
}

static void test_ack_hold_from_end(void)
{
    ack_hold_from_end(14); /* 67 ms */
    ack_hold_from_end(6);  /* 262 us */
}

/* Messages that cross (both sides post at once, then poll): each side's
 * poll that finds nothing sends the ACK it holds for the other's message
 * once it is 4 us old, and both complete in microseconds, not when the
 * holds fall due. */
static void test_ack_crossing(void)
{
    sr_test_ctx = "crossing messages complete at the first idle polls";
    struct eng_fix f;
    struct sr_wc wc[2];
    ack_setup(&f, 14);
    post_write(&f, 0, 1, SR_WR_RDMA_WRITE);
    post_write(&f, 1, 2, SR_WR_RDMA_WRITE);
    h_run(&f.h, NULL, NULL, 5500); /* both arrived at 1 us, both ACKs held */
    SR_CHECK_EQ(log_find(0, SR_OP_ACK, 0), -1);
    SR_CHECK_EQ(log_find(1, SR_OP_ACK, 0), -1);
    for (int i = 0; i < 2; i++) /* each application polls and finds nothing */
        SR_CHECK_EQ(sr_engine_release_acks(f.h.eng[i], f.h.now - 4000), true);
    SR_CHECK_EQ(wait_wc(&f.h, f.pr.scq[0], 1, wc, 2000), 1);
    SR_CHECK_EQ(wc[0].wr_id, 1);
    SR_CHECK_EQ(wait_wc(&f.h, f.pr.scq[1], 1, wc, 2000), 1);
    SR_CHECK_EQ(wc[0].wr_id, 2);
    SR_CHECK(f.h.now < 10000);
    fix_close(&f);
}

int main(void)
{
    SR_RUN(test_ack_delay);
    SR_RUN(test_ack_reply_hold);
    SR_RUN(test_ack_hold_from_end);
    SR_RUN(test_ack_crossing);
    return SR_TEST_RESULT();
}

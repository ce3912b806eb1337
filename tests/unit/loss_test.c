/* loss_test.c: loss recovery of the requester on the in-memory wire with
 * explicit time: the tail-loss probe (rtt.h) after a lost last packet, a
 * lost ACK, and a lost resend behind a sequence NAK, each at the time the
 * measured round trip implies and never counted against retry_cnt; and a
 * dead peer, which still fails with RETRY_EXC_ERR exactly when timeout and
 * retry_cnt say (IBA 9.7.6.1.3), however many probes went before. */
#include "engine_fixture.h"
#include "rtt.h"

enum { MTU = 1024, MSG = 4 * MTU, T14 = 4096 << 14 };

/* What the filter drops, and what it saw of node 0's packets. */
struct loss_plan {
    int drop_req_idx[2]; /* packet index in message 2 (0..3) to drop, each once; -1: none */
    int drop_req_cnt[2]; /* how many copies of it */
    bool drop_ack;       /* node 1's first ACK in message 2 */
    bool dead;           /* from message 2 on, nothing arrives either way */
    /* node 0's packets in message 2: time, PSN offset, AckReq */
    uint64_t at[64];
    uint32_t off[64];
    bool ackreq[64];
    int n;
};
static struct loss_plan plan;
static bool in_msg2;
static uint32_t msg2_psn;

static int f_plan(struct harness *h, const struct h_pkt *p, uint64_t seq)
{
    (void)seq;
    if (!in_msg2)
        return 0;
    if (plan.dead)
        return 1;
    uint32_t psn = sr_get_be24(p->data + 9);
    if (p->from == 0) {
        if (plan.n == 0)
            msg2_psn = psn; /* message 2's first packet */
        uint32_t off = (psn - msg2_psn) & 0xffffff;
        if (plan.n < 64) {
            plan.at[plan.n] = h->now;
            plan.off[plan.n] = off;
            plan.ackreq[plan.n] = p->data[8] & 0x80;
            plan.n++;
        }
        for (int i = 0; i < 2; i++)
            if (plan.drop_req_idx[i] == (int)off && plan.drop_req_cnt[i] > 0) {
                plan.drop_req_cnt[i]--;
                return 1;
            }
        return 0;
    }
    if (plan.drop_ack && (p->data[0] & 0x1f) == SR_OP_ACK) {
        plan.drop_ack = false;
        return 1;
    }
    return 0;
}

static void open_pair(struct eng_fix *f, uint8_t timeout, uint8_t retry_cnt)
{
    struct h_qp_opts o = {.type = SR_QPT_RC,
                          .mtu = MTU,
                          .timeout = timeout,
                          .retry_cnt = retry_cnt,
                          .access = FIX_ALL_ACCESS};
    fix_open(f, &(struct fix_opts){.qp = o, .filter = f_plan});
    in_msg2 = false;
}

/* The id-th 4-packet RDMA WRITE from node 0. */
static void post_msg(struct eng_fix *f, uint64_t id)
{
    static struct sr_sge sg;
    sg = (struct sr_sge){(uintptr_t)f->mem[0] + id * MSG, MSG, sr_mr_lkey(f->mr[0])};
    struct sr_send_wr wr =
        signaled_wr(f, id, &sg, SR_WR_RDMA_WRITE, (uintptr_t)f->mem[1] + id * MSG);
    SR_CHECK_EQ(sr_qp_post_send(f->pr.qp[0], &wr, f->h.now), 0);
}

/* Message 1 goes through cleanly: the QP has a round-trip sample (about
 * 2 * H_DELAY_NS), so its probe timeout is the floor. */
static void warm_up(struct eng_fix *f)
{
    pattern(f->mem[0], 2 * MSG, 5);
    post_msg(f, 0);
    struct sr_wc wc;
    SR_CHECK_EQ(wait_wc(&f->h, f->pr.scq[0], 1, &wc, 1000000), 1);
    SR_CHECK_EQ(wc.status, SR_WC_SUCCESS);
}

static void stats0(struct eng_fix *f, struct sr_engine_stats *s)
{
    sr_engine_stats(f->h.eng[0], s);
}

struct tail_row {
    const char *name;
    int drop_idx[2], drop_cnt[2];
    bool drop_ack;
    int probes;              /* expected */
    uint32_t probe_off[2];   /* PSN offset of each probe's first packet */
    uint64_t probe_after[2]; /* ns after message 2 was posted */
};

static void test_probes(void)
{
#define P SR_RTT_PTO_FLOOR_NS
    const struct tail_row rows[] = {
        /* the last packet is lost: the probe resends it with AckReq */
        {"lost last packet", {3, -1}, {1, 0}, false, 1, {3, 0}, {P, 0}},
        /* its ACK is lost: the probe is a duplicate, re-acknowledged */
        {"lost ACK", {-1, -1}, {0, 0}, true, 1, {3, 0}, {P, 0}},
        /* packet 1 and its resend after the NAK are lost: the responder
         * stays silent (IBA 9.7.5.1.2), so the first probe gets no answer
         * and the second, a probe timeout later and doubled, goes back to
         * the hole; both are timed from the NAK's go-back-N, which left
         * a round trip after the post */
        {"lost resend behind a NAK",
         {1, -1},
         {2, 0},
         false,
         2,
         {3, 1},
         {2 * H_DELAY_NS + P, 2 * H_DELAY_NS + 3 * P}},
    };
    for (size_t i = 0; i < SR_ARRAY_SIZE(rows); i++) {
        const struct tail_row *r = &rows[i];
        sr_test_ctx = r->name;
        struct eng_fix f;
        open_pair(&f, 14, 7);
        warm_up(&f);
        memset(&plan, 0, sizeof(plan));
        for (int k = 0; k < 2; k++) {
            plan.drop_req_idx[k] = r->drop_idx[k];
            plan.drop_req_cnt[k] = r->drop_cnt[k];
        }
        plan.drop_ack = r->drop_ack;
        struct sr_engine_stats before, after;
        stats0(&f, &before);
        uint64_t t0 = f.h.now;
        in_msg2 = true;
        post_msg(&f, 1);
        struct sr_wc wc;
        SR_CHECK_EQ(wait_wc(&f.h, f.pr.scq[0], 1, &wc, 10000000), 1);
        SR_CHECK_EQ(wc.status, SR_WC_SUCCESS);
        SR_CHECK_MEM(f.mem[1] + MSG, f.mem[0] + MSG, MSG);
        /* repaired in round trips: well before the 67 ms transport timer */
        SR_CHECK(f.h.now - t0 < 5 * P);
        stats0(&f, &after);
        SR_CHECK_EQ(after.timeouts, before.timeouts);
        SR_CHECK_EQ(after.probes - before.probes, (uint64_t)r->probes);
        /* each probe left at its time; the first is the last packet with
         * AckReq */
        for (int k = 0; k < r->probes; k++) {
            int j = 0;
            while (j < plan.n && plan.at[j] != t0 + r->probe_after[k])
                j++;
            SR_CHECK(j < plan.n);
            if (j < plan.n) {
                SR_CHECK_EQ(plan.off[j], r->probe_off[k]);
                if (k == 0)
                    SR_CHECK(plan.ackreq[j]);
            }
        }
        /* and nothing was resent before the first probe's time */
        for (int j = 0; j < plan.n; j++)
            if (plan.at[j] > t0 && plan.at[j] < t0 + P)
                SR_CHECK(r->drop_cnt[0] == 2); /* only the NAK's go-back-N */
        /* retry_cnt untouched: the QP still has all 7 retries */
        struct sr_qp_attr a;
        SR_CHECK_EQ(sr_qp_query(f.pr.qp[0], &a, NULL), 0);
        SR_CHECK_EQ(a.qp_state, SR_QPS_RTS);
        fix_close(&f);
    }
#undef P
}

/* The peer stops answering: probes go out (not counted), and the WQE
 * fails with RETRY_EXC_ERR at exactly (retry_cnt + 1) transport timeouts
 * after it was sent, after retry_cnt + 1 expiries. */
static void test_dead_peer(void)
{
    for (int retry = 0; retry <= 7; retry += 7) {
        sr_test_ctx = retry ? "dead peer, retry_cnt 7" : "dead peer, retry_cnt 0";
        struct eng_fix f;
        open_pair(&f, 10, (uint8_t)retry);
        warm_up(&f);
        memset(&plan, 0, sizeof(plan));
        plan.dead = true;
        in_msg2 = true;
        struct sr_engine_stats before, after;
        stats0(&f, &before);
        uint64_t t0 = f.h.now;
        post_msg(&f, 1);
        struct sr_wc wc;
        SR_CHECK_EQ(wait_wc(&f.h, f.pr.scq[0], 1, &wc, 10000000000ull), 1);
        SR_CHECK_EQ(wc.status, SR_WC_RETRY_EXC_ERR);
        uint64_t t = 4096ull << 10;
        SR_CHECK_EQ(f.h.now - t0, (uint64_t)(retry + 1) * t);
        stats0(&f, &after);
        SR_CHECK_EQ(after.timeouts - before.timeouts, (uint64_t)retry + 1);
        SR_CHECK(after.probes > before.probes);
        fix_close(&f);
    }
}

int main(void)
{
    SR_RUN(test_probes);
    SR_RUN(test_dead_peer);
    return SR_TEST_RESULT();
}

/* shape_test.c: the transport option sr_engine_cfg.trains (sr_engine.h)
 * and how the requester shapes an RC RDMA WRITE by it, two engines on the
 * in-memory wire of engine_harness.h. Each row sets the option (trains,
 * the per-peer trains_to answer, whole_writes) and checks the opcodes,
 * RETHs and ACK requests node 0 puts on the wire, and that the data
 * arrives whole. */
#include "engine_harness.h"

enum { MTU = 1024, MEM = 64 << 10, NLOG = 64 };

static struct {
    uint8_t op;
    bool ack_req;
    uint64_t va;
    uint32_t dma_len;
} sent[NLOG];
static int nsent;

static int log_node0(struct harness *h, const struct h_pkt *p, uint64_t seq)
{
    (void)h, (void)seq;
    if (p->from != 0 || nsent == NLOG)
        return 0;
    struct sr_pkt pk;
    SR_CHECK(sr_wire_decode(p->data, p->len, MTU, &pk) >= 0);
    sent[nsent].op = pk.bth.opcode & 0x1f;
    sent[nsent].ack_req = pk.bth.ack_req;
    sent[nsent].va = pk.reth.va;
    sent[nsent].dma_len = pk.reth.dma_len;
    nsent++;
    return 0;
}

/* trains_to: node 1's address is "reached another way"; records what it
 * was asked. */
static int asked;
static uint8_t asked_gid[16];
static void *asked_ctx;
static bool reach(void *ctx, const uint8_t *dgid, bool answer)
{
    asked++;
    asked_ctx = ctx;
    memcpy(asked_gid, dgid, 16);
    return answer;
}
static bool reach_yes(void *ctx, const uint8_t *dgid)
{
    return reach(ctx, dgid, true);
}
static bool reach_no(void *ctx, const uint8_t *dgid)
{
    return reach(ctx, dgid, false);
}

static struct sr_cq *wait_cq;
static bool polled(void *arg)
{
    return sr_cq_poll(wait_cq, 1, arg) == 1;
}

struct row {
    const char *name;
    bool trains;
    bool (*trains_to)(void *ctx, const uint8_t *dgid);
    bool whole_writes;
    int npkt;
    bool pieces;   /* expect WRITE ONLY per packet */
    int ack_every; /* expect ACK requests every that many packets, and on the last */
};

static void write_row(const struct row *r)
{
    sr_test_ctx = r->name;
    struct harness h;
    struct h_pair pr;
    struct h_cfg c = {
        .trains = r->trains, .trains_to = r->trains_to, .whole_writes = r->whole_writes};
    h_init_cfg(&h, &c);
    h.filter = log_node0;
    nsent = 0;
    asked = 0;
    /* timeout 14 (67 ms): long enough for the trains' cadence */
    struct h_qp_opts o = {
        .type = SR_QPT_RC, .mtu = MTU, .timeout = 14, .retry_cnt = 7, .rnr_retry = 7, .access = 15};
    h_connect(&h, &pr, &o);
    uint8_t *mem[2];
    struct sr_mr *mr[2];
    for (int i = 0; i < 2; i++) {
        mem[i] = calloc(1, MEM);
        SR_CHECK_EQ(sr_mr_reg(pr.pd[i], mem[i], MEM, (uintptr_t)mem[i], 15, &mr[i]), 0);
    }
    const uint32_t len = (uint32_t)(r->npkt - 1) * MTU + 100;
    for (uint32_t i = 0; i < len; i++)
        mem[0][i] = (uint8_t)(i * 7 + 3);
    uint64_t va = (uintptr_t)mem[1] + 4096;
    struct sr_sge sg = {(uintptr_t)mem[0], len, sr_mr_lkey(mr[0])};
    struct sr_send_wr wr = {.wr_id = 1,
                            .sg_list = &sg,
                            .num_sge = 1,
                            .opcode = SR_WR_RDMA_WRITE,
                            .send_flags = SR_SEND_SIGNALED,
                            .remote_addr = va,
                            .rkey = sr_mr_rkey(mr[1])};
    SR_CHECK_EQ(sr_qp_post_send(pr.qp[0], &wr, h.now), 0);
    struct sr_wc wc = {0};
    wait_cq = pr.scq[0];
    SR_CHECK(h_run(&h, polled, &wc, 100000000)); /* 100 ms of simulated time */
    SR_CHECK_EQ(wc.wr_id, 1);
    SR_CHECK_EQ(wc.status, SR_WC_SUCCESS);
    SR_CHECK_MEM(mem[1] + 4096, mem[0], len);
    SR_CHECK_EQ(nsent, r->npkt); /* no loss: each packet once */
    for (int k = 0; k < nsent && k < r->npkt; k++) {
        uint32_t piece = k == r->npkt - 1 ? len - (uint32_t)(r->npkt - 1) * MTU : MTU;
        SR_CHECK_EQ(sent[k].ack_req, k == r->npkt - 1 || (k + 1) % r->ack_every == 0);
        if (r->pieces) {
            SR_CHECK_EQ(sent[k].op, SR_OP_WRITE_ONLY);
            SR_CHECK_EQ(sent[k].va, va + (uint64_t)k * MTU);
            SR_CHECK_EQ(sent[k].dma_len, piece);
        } else {
            SR_CHECK_EQ(sent[k].op, k == 0             ? SR_OP_WRITE_FIRST
                                    : k == r->npkt - 1 ? SR_OP_WRITE_LAST
                                                       : SR_OP_WRITE_MIDDLE);
        }
    }
    if (r->trains && r->trains_to) {
        /* asked once, when the WQE started, about the QP's peer */
        uint8_t gid1[16];
        h_gid(gid1, 1);
        SR_CHECK_EQ(asked, 1);
        SR_CHECK_MEM(asked_gid, gid1, 16);
        SR_CHECK(asked_ctx == &h.ctx[0]);
    } else {
        SR_CHECK_EQ(asked, 0); /* the option off: nobody is asked */
    }
    for (int i = 0; i < 2; i++) {
        sr_mr_dereg(mr[i]);
        free(mem[i]);
    }
    h_fini(&h);
}

static void test_write_shapes(void)
{
    static const struct row rows[] = {
        {"off", false, NULL, false, 8, false, 32},
        {"off, 40 packets", false, NULL, false, 40, false, 32},
        {"off, trains_to ignored", false, reach_yes, false, 8, false, 32},
        {"trains", true, NULL, false, 8, true, 256},
        {"trains, peer reached", true, reach_yes, false, 8, true, 256},
        {"trains, peer not reached", true, reach_no, false, 8, false, 32},
        {"trains, peer not reached, 40", true, reach_no, false, 40, false, 32},
        {"trains, whole writes", true, NULL, true, 40, false, 256},
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
        write_row(&rows[i]);
    sr_test_ctx = "test_write_shapes";
}

int main(void)
{
    SR_RUN(test_write_shapes);
    return SR_TEST_RESULT();
}

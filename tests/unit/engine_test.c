/* engine_test.c: the transport engine through its public API, two engines
 * on the in-memory wire of engine_harness.h: every operation across sizes,
 * MTUs and fault filters with memory compared byte for byte; the error
 * paths (RNR, access, length, retry exhaustion, flush); the QP state
 * machine; UD and UC specifics. */
#include "engine_harness.h"

enum { MEM = (2 << 20) + 8192 };
static uint8_t *mem[2];
static struct sr_mr *mr[2];

static void pattern(uint8_t *p, size_t n, unsigned seed)
{
    uint32_t x = seed * 2654435761u + 1;
    for (size_t i = 0; i < n; i++) {
        x = x * 1103515245u + 12345u;
        p[i] = (uint8_t)(x >> 16);
    }
}

static void reg_mem(struct h_pair *pr, uint32_t access)
{
    for (int i = 0; i < 2; i++) {
        memset(mem[i], 0, MEM);
        SR_CHECK_EQ(sr_mr_reg(pr->pd[i], mem[i], MEM, (uint64_t)(uintptr_t)mem[i], access, &mr[i]),
                    0);
    }
}

/* A signaled one-SGE work request to remote (in node 1's MR, mr[1]). */
static struct sr_send_wr signaled_wr(uint64_t id, struct sr_sge *sg, enum sr_wr_opcode op,
                                     uint64_t remote)
{
    return (struct sr_send_wr){.wr_id = id,
                               .sg_list = sg,
                               .num_sge = 1,
                               .opcode = op,
                               .send_flags = SR_SEND_SIGNALED,
                               .remote_addr = remote,
                               .rkey = sr_mr_rkey(mr[1])};
}

struct wc_wait {
    struct sr_cq *cq;
    struct sr_wc wc[4 * SR_MAX_RD_ATOMIC];
    int want, got;
};

static bool wc_done(void *arg)
{
    struct wc_wait *w = arg;
    if (w->got < w->want)
        w->got += sr_cq_poll(w->cq, w->want - w->got, w->wc + w->got);
    return w->got >= w->want;
}

static int wait_wc(struct harness *h, struct sr_cq *cq, int n, struct sr_wc *out, uint64_t max_ns)
{
    struct wc_wait w = {.cq = cq, .want = n};
    h_run(h, wc_done, &w, max_ns);
    memcpy(out, w.wc, sizeof(struct sr_wc) * (size_t)w.got);
    return w.got;
}

/* Posts a then b on node 0's QP; both complete successfully within max_ns. */
static void post2_ok(struct harness *h, struct h_pair *pr, const struct sr_send_wr *a,
                     const struct sr_send_wr *b, uint64_t max_ns)
{
    SR_CHECK_EQ(sr_qp_post_send(pr->qp[0], a, h->now), 0);
    SR_CHECK_EQ(sr_qp_post_send(pr->qp[0], b, h->now), 0);
    struct sr_wc wc[2];
    SR_CHECK_EQ(wait_wc(h, pr->scq[0], 2, wc, max_ns), 2);
    SR_CHECK_EQ(wc[0].status, SR_WC_SUCCESS);
    SR_CHECK_EQ(wc[1].status, SR_WC_SUCCESS);
}

/* ---- fault filters (pseudo-random per packet, reproducible) ---- */
static uint32_t h_hash(uint64_t seq)
{
    uint64_t x = seq * 0x9e3779b97f4a7c15ull;
    x ^= x >> 31;
    x *= 0xbf58476d1ce4e5b9ull;
    return (uint32_t)(x >> 33);
}
static int f_drop7(struct harness *h, const struct h_pkt *p, uint64_t seq)
{
    (void)h, (void)p;
    return h_hash(seq) % 7 == 3; /* ~14% loss */
}
static int f_dup5(struct harness *h, const struct h_pkt *p, uint64_t seq)
{
    (void)h, (void)p;
    return h_hash(seq) % 5 == 2 ? 2 : 0;
}
static int f_delay11(struct harness *h, const struct h_pkt *p, uint64_t seq)
{
    (void)h, (void)p;
    return h_hash(seq) % 11 == 4 ? 3 : 0;
}
static int f_drop_resp(struct harness *h, const struct h_pkt *p, uint64_t seq)
{
    (void)h;
    /* responses (ACK, READ response, ATOMIC ACK) from node 1: a third
     * dropped, a third duplicated */
    uint8_t op = p->data[0] & 0x1f;
    if (p->from == 1 && op >= SR_OP_READ_RESP_FIRST && op <= SR_OP_ATOMIC_ACK)
        return (int)(h_hash(seq) % 3);
    return 0;
}
static int f_all(struct harness *h, const struct h_pkt *p, uint64_t seq)
{
    (void)h, (void)p, (void)seq;
    return 1;
}

static const struct {
    const char *name;
    h_filter_fn fn;
} profiles[] = {
    {"clean", NULL},
    {"drop1/7", f_drop7},
    {"dup1/5", f_dup5},
    {"reorder1/11", f_delay11},
    {"resp-drop-dup", f_drop_resp},
};

/* When set, test_ops runs its RDMA WRITEs and SENDs only. */
static bool ops_write_send_only;

static void test_ops(void)
{
    static const enum sr_wr_opcode ops[] = {SR_WR_SEND,
                                            SR_WR_SEND_WITH_IMM,
                                            SR_WR_RDMA_WRITE,
                                            SR_WR_RDMA_WRITE_WITH_IMM,
                                            SR_WR_RDMA_READ,
                                            SR_WR_ATOMIC_CMP_AND_SWP,
                                            SR_WR_ATOMIC_FETCH_AND_ADD,
                                            SR_WR_ATOMIC_WRITE};
    static const uint32_t sizes[] = {0, 1, 1023, 1024, 4097, 65536, 1 << 20};
    static const uint32_t mtus[] = {256, 1024, 4096};
    char ctx[160];
    unsigned seed = 1;
    for (size_t pi = 0; pi < SR_ARRAY_SIZE(profiles); pi++)
        for (size_t oi = 0; oi < SR_ARRAY_SIZE(ops); oi++)
            for (size_t si = 0; si < SR_ARRAY_SIZE(sizes); si++) {
                enum sr_wr_opcode op = ops[oi];
                if (ops_write_send_only && op != SR_WR_RDMA_WRITE && op != SR_WR_SEND)
                    continue;
                bool atomic = op == SR_WR_ATOMIC_CMP_AND_SWP || op == SR_WR_ATOMIC_FETCH_AND_ADD;
                bool awrite = op == SR_WR_ATOMIC_WRITE;
                if ((atomic || awrite) && si > 0)
                    continue;
                uint32_t size = atomic || awrite ? 8 : sizes[si];
                uint32_t mtu = mtus[(si + oi + pi) % 3];
                snprintf(ctx, sizeof(ctx), "%s op=%d size=%u mtu=%u", profiles[pi].name, op, size,
                         mtu);
                sr_test_ctx = ctx;

                struct harness h;
                struct h_pair pr;
                h_init(&h, 0);
                h.filter = profiles[pi].fn;
                struct h_qp_opts o = {
                    .type = SR_QPT_RC, .mtu = mtu, .retry_cnt = 7, .rnr_retry = 7, .access = 15};
                h_connect(&h, &pr, &o);
                reg_mem(&pr, 15);
                seed++;
                /* Three SGEs on the source side, two on the sink side. */
                uint8_t *src = mem[0], *dst = mem[1];
                pattern(src, MEM, seed);
                pattern(dst + size, 64, seed + 99); /* canary after the target */
                uint8_t canary[64];
                memcpy(canary, dst + size, 64);
                uint32_t a = size / 3, b = size / 3;
                struct sr_sge sg[3] = {
                    {(uintptr_t)src, a, sr_mr_lkey(mr[0])},
                    {(uintptr_t)src + a + 100, b, sr_mr_lkey(mr[0])},
                    {(uintptr_t)src + a + b + 300, size - a - b, sr_mr_lkey(mr[0])},
                };
                uint8_t expect[1 << 20];
                memcpy(expect, src, a);
                memcpy(expect + a, src + a + 100, b);
                memcpy(expect + a + b, src + a + b + 300, size - a - b);

                struct sr_send_wr wr = {.wr_id = 0x1234 + oi,
                                        .sg_list = sg,
                                        .num_sge = 3,
                                        .opcode = op,
                                        .send_flags = SR_SEND_SIGNALED,
                                        .imm = 0xabcd0000u + (uint32_t)si,
                                        .remote_addr = (uintptr_t)dst,
                                        .rkey = sr_mr_rkey(mr[1])};
                uint64_t old = 0x1111111111111111ull;
                if (atomic) {
                    memcpy(dst, &old, 8);
                    wr.num_sge = 1;
                    sg[0].length = 8;
                    wr.compare_add = op == SR_WR_ATOMIC_CMP_AND_SWP ? old : 5;
                    wr.swap = 0x2222222222222222ull;
                }
                const uint64_t aw = 0x0123456789abcdefull;
                if (awrite) {
                    memcpy(dst, &old, 8);
                    wr.num_sge = 0; /* the data is in the WR */
                    wr.compare_add = aw;
                }
                bool recv = op == SR_WR_SEND || op == SR_WR_SEND_WITH_IMM ||
                            op == SR_WR_RDMA_WRITE_WITH_IMM;
                if (recv) {
                    struct sr_sge rs[2] = {
                        {(uintptr_t)dst, size / 2, sr_mr_lkey(mr[1])},
                        {(uintptr_t)dst + size / 2, size - size / 2 + 64, sr_mr_lkey(mr[1])}};
                    struct sr_recv_wr rwr = {.wr_id = 77, .sg_list = rs, .num_sge = 2};
                    SR_CHECK_EQ(sr_qp_post_recv(pr.qp[1], &rwr), 0);
                }
                if (op == SR_WR_RDMA_READ) {
                    /* READ pulls dst (node 1) into the local SGEs. */
                    pattern(dst, size, seed + 7);
                    memcpy(expect, dst, size);
                    memcpy(canary, dst + size, 64);
                }
                SR_CHECK_EQ(sr_qp_post_send(pr.qp[0], &wr, h.now), 0);
                struct sr_wc wc[4];
                SR_CHECK_EQ(wait_wc(&h, pr.scq[0], 1, wc, 2000000000ull), 1);
                SR_CHECK_EQ(wc[0].status, SR_WC_SUCCESS);
                SR_CHECK_EQ(wc[0].wr_id, 0x1234 + oi);
                static const enum sr_wc_opcode wcop[] = {
                    [SR_WR_SEND] = SR_WC_SEND,
                    [SR_WR_SEND_WITH_IMM] = SR_WC_SEND,
                    [SR_WR_RDMA_WRITE] = SR_WC_RDMA_WRITE,
                    [SR_WR_RDMA_WRITE_WITH_IMM] = SR_WC_RDMA_WRITE,
                    [SR_WR_RDMA_READ] = SR_WC_RDMA_READ,
                    [SR_WR_ATOMIC_CMP_AND_SWP] = SR_WC_COMP_SWAP,
                    [SR_WR_ATOMIC_FETCH_AND_ADD] = SR_WC_FETCH_ADD,
                    [SR_WR_ATOMIC_WRITE] = SR_WC_ATOMIC_WRITE};
                SR_CHECK_EQ(wc[0].opcode, wcop[op]);
                if (recv) {
                    SR_CHECK_EQ(wait_wc(&h, pr.rcq[1], 1, wc, 1000000000ull), 1);
                    SR_CHECK_EQ(wc[0].status, SR_WC_SUCCESS);
                    SR_CHECK_EQ(wc[0].wr_id, 77);
                    SR_CHECK_EQ(wc[0].byte_len, size);
                    SR_CHECK_EQ(wc[0].opcode, op == SR_WR_RDMA_WRITE_WITH_IMM
                                                  ? SR_WC_RECV_RDMA_WITH_IMM
                                                  : SR_WC_RECV);
                    bool imm = op != SR_WR_SEND;
                    SR_CHECK_EQ(!!(wc[0].wc_flags & SR_WC_WITH_IMM), imm);
                    if (imm)
                        SR_CHECK_EQ(wc[0].imm, 0xabcd0000u + (uint32_t)si);
                    SR_CHECK_EQ(wc[0].qp_num, sr_qp_num(pr.qp[1]));
                }
                if (atomic) {
                    uint64_t now_val, got_old;
                    memcpy(&now_val, dst, 8);
                    memcpy(&got_old, src, 8);
                    SR_CHECK_EQ(got_old, old);
                    SR_CHECK_EQ(now_val, op == SR_WR_ATOMIC_CMP_AND_SWP ? wr.swap : old + 5);
                    struct sr_engine_stats st;
                    sr_engine_stats(h.eng[1], &st);
                    SR_CHECK_EQ(st.atomics_executed, 1); /* never twice */
                } else if (awrite) {
                    uint64_t now_val;
                    memcpy(&now_val, dst, 8);
                    SR_CHECK_EQ(now_val, aw);
                    SR_CHECK_MEM(dst + size, canary, 64);
                } else if (op == SR_WR_RDMA_READ) {
                    uint8_t got[1 << 20];
                    memcpy(got, src, a);
                    memcpy(got + a, src + a + 100, b);
                    memcpy(got + a + b, src + a + b + 300, size - a - b);
                    SR_CHECK(memcmp(got, expect, size) == 0);
                    SR_CHECK_MEM(dst + size, canary, 64);
                } else {
                    SR_CHECK(memcmp(dst, expect, size) == 0);
                    SR_CHECK_MEM(dst + size, canary, 64);
                }
                /* Nothing else completes, and no extra receive is consumed. */
                h_run(&h, NULL, NULL, 20000000ull);
                SR_CHECK_EQ(sr_cq_poll(pr.scq[0], 4, wc), 0);
                SR_CHECK_EQ(sr_cq_poll(pr.rcq[1], 4, wc), 0);
                sr_mr_dereg(mr[0]);
                sr_mr_dereg(mr[1]);
                h_fini(&h);
            }
}

/* Many messages of mixed kinds in flight at once, under loss. */
static void test_stream(void)
{
    for (size_t pi = 0; pi < SR_ARRAY_SIZE(profiles); pi++) {
        sr_test_ctx = profiles[pi].name;
        struct harness h;
        struct h_pair pr;
        h_init(&h, 64);
        h.filter = profiles[pi].fn;
        struct h_qp_opts o = {.type = SR_QPT_RC,
                              .mtu = 1024,
                              .retry_cnt = 7,
                              .rnr_retry = 7,
                              .access = 15,
                              .max_rd_atomic = 4};
        h_connect(&h, &pr, &o);
        reg_mem(&pr, 15);
        pattern(mem[0], 1000000, 42);
        /* source chunks at mem[0] + i*CH; receive buffers at mem[1] + i*CH;
         * WRITE targets at mem[1] + 500000 + i*CH; READ sources at
         * mem[1] + 1000000 + i*CH, landing at mem[0] + 1000000 + i*CH */
        enum { N = 48, CH = 10000 };
        for (int i = 0; i < N; i += 3) {
            struct sr_sge rs = {(uintptr_t)mem[1] + (uint64_t)i * CH, CH, sr_mr_lkey(mr[1])};
            struct sr_recv_wr rwr = {.wr_id = 1000 + (uint64_t)i, .sg_list = &rs, .num_sge = 1};
            SR_CHECK_EQ(sr_qp_post_recv(pr.qp[1], &rwr), 0);
        }
        pattern(mem[1] + 1000000, N * CH, 43);
        int sigs = 0;
        for (int i = 0; i < N; i++) {
            struct sr_sge sg = {(uintptr_t)mem[0] + (uint64_t)i * CH, CH - (uint32_t)i,
                                sr_mr_lkey(mr[0])};
            struct sr_send_wr wr = {.wr_id = (uint64_t)i,
                                    .sg_list = &sg,
                                    .num_sge = 1,
                                    .send_flags = (i % 4 == 3) ? SR_SEND_SIGNALED : 0,
                                    .rkey = sr_mr_rkey(mr[1])};
            switch (i % 3) {
            case 0: /* SEND into receive (i/3) */
                wr.opcode = SR_WR_SEND;
                break;
            case 1:
                wr.opcode = SR_WR_RDMA_WRITE;
                wr.remote_addr = (uintptr_t)mem[1] + 500000 + (uint64_t)i * CH;
                break;
            default:
                wr.opcode = SR_WR_RDMA_READ;
                sg.addr = (uintptr_t)mem[0] + 1000000 + (uint64_t)i * CH;
                wr.remote_addr = (uintptr_t)mem[1] + 1000000 + (uint64_t)i * CH;
                break;
            }
            sigs += i % 4 == 3;
            SR_CHECK_EQ(sr_qp_post_send(pr.qp[0], &wr, h.now), 0);
        }
        struct sr_wc wc[64];
        SR_CHECK_EQ(wait_wc(&h, pr.scq[0], sigs, wc, 5000000000ull), sigs);
        for (int i = 0; i < sigs; i++) {
            SR_CHECK_EQ(wc[i].status, SR_WC_SUCCESS);
            SR_CHECK_EQ(wc[i].wr_id, (uint64_t)(4 * i + 3)); /* in order, signaled only */
        }
        SR_CHECK_EQ(wait_wc(&h, pr.rcq[1], N / 3, wc, 1000000000ull), N / 3);
        for (int i = 0; i < N; i++) {
            uint32_t len = CH - (uint32_t)i;
            const uint8_t *s = mem[0] + (uint64_t)i * CH;
            if (i % 3 == 0) {
                SR_CHECK(memcmp(mem[1] + (uint64_t)i * CH, s, len) == 0);
                SR_CHECK_EQ(wc[i / 3].byte_len, len);
                SR_CHECK_EQ(wc[i / 3].wr_id, 1000 + (uint64_t)i);
            } else if (i % 3 == 1) {
                SR_CHECK(memcmp(mem[1] + 500000 + (uint64_t)i * CH, s, len) == 0);
            } else {
                SR_CHECK(memcmp(mem[0] + 1000000 + (uint64_t)i * CH,
                                mem[1] + 1000000 + (uint64_t)i * CH, len) == 0);
            }
        }
        sr_mr_dereg(mr[0]);
        sr_mr_dereg(mr[1]);
        h_fini(&h);
    }
}

/* Post n RC WQEs where the second fails in the given way; check the
 * requester and responder completions. */
struct err_case {
    const char *name;
    enum sr_wr_opcode op;
    int kind;
    enum sr_wc_status req_status;
    enum sr_qp_state resp_state;
};
enum {
    K_BAD_RKEY,
    K_OOB,
    K_NO_ACCESS,
    K_UNALIGNED,
    K_RECV_SMALL,
    K_BAD_LKEY,
    K_QP_ACCESS,
    K_RECV_BAD_LKEY,
    K_OTHER_PD,
    K_READ_NO_LOCAL_WRITE,
    K_QP_NO_WRITE,
};

static void test_errors(void)
{
    static const struct err_case cases[] = {
        {"write bad rkey", SR_WR_RDMA_WRITE, K_BAD_RKEY, SR_WC_REM_ACCESS_ERR, SR_QPS_ERR},
        {"read out of bounds", SR_WR_RDMA_READ, K_OOB, SR_WC_REM_ACCESS_ERR, SR_QPS_ERR},
        {"write region without remote write", SR_WR_RDMA_WRITE, K_NO_ACCESS, SR_WC_REM_ACCESS_ERR,
         SR_QPS_ERR},
        {"atomic unaligned", SR_WR_ATOMIC_FETCH_AND_ADD, K_UNALIGNED, SR_WC_REM_INV_REQ_ERR,
         SR_QPS_ERR},
        {"atomic bad rkey", SR_WR_ATOMIC_CMP_AND_SWP, K_BAD_RKEY, SR_WC_REM_ACCESS_ERR, SR_QPS_ERR},
        {"send larger than receive", SR_WR_SEND, K_RECV_SMALL, SR_WC_REM_INV_REQ_ERR, SR_QPS_ERR},
        {"send bad lkey", SR_WR_SEND, K_BAD_LKEY, SR_WC_LOC_PROT_ERR, SR_QPS_RTS},
        {"read without QP remote read", SR_WR_RDMA_READ, K_QP_ACCESS, SR_WC_REM_ACCESS_ERR,
         SR_QPS_ERR},
        /* the responder cannot write its own receive buffer: remote
         * operational error at the requester, local protection error at the
         * responder (IBA 9.7.5.2.?) */
        {"send into a receive with a bad lkey", SR_WR_SEND, K_RECV_BAD_LKEY, SR_WC_REM_OP_ERR,
         SR_QPS_ERR},
        {"write with an rkey of another PD", SR_WR_RDMA_WRITE, K_OTHER_PD, SR_WC_REM_ACCESS_ERR,
         SR_QPS_ERR},
        {"read into memory without local write", SR_WR_RDMA_READ, K_READ_NO_LOCAL_WRITE,
         SR_WC_LOC_PROT_ERR, SR_QPS_RTS},
        /* ATOMIC WRITE (IBA 1.5): aligned, in bounds, remote write access */
        {"atomic write unaligned", SR_WR_ATOMIC_WRITE, K_UNALIGNED, SR_WC_REM_INV_REQ_ERR,
         SR_QPS_ERR},
        {"atomic write out of bounds", SR_WR_ATOMIC_WRITE, K_OOB, SR_WC_REM_ACCESS_ERR, SR_QPS_ERR},
        {"atomic write bad rkey", SR_WR_ATOMIC_WRITE, K_BAD_RKEY, SR_WC_REM_ACCESS_ERR, SR_QPS_ERR},
        {"atomic write region without remote write", SR_WR_ATOMIC_WRITE, K_NO_ACCESS,
         SR_WC_REM_ACCESS_ERR, SR_QPS_ERR},
        {"atomic write without QP remote write", SR_WR_ATOMIC_WRITE, K_QP_NO_WRITE,
         SR_WC_REM_ACCESS_ERR, SR_QPS_ERR},
    };
    for (size_t ci = 0; ci < SR_ARRAY_SIZE(cases); ci++) {
        const struct err_case *c = &cases[ci];
        sr_test_ctx = c->name;
        struct harness h;
        struct h_pair pr;
        h_init(&h, 0);
        struct h_qp_opts o = {.type = SR_QPT_RC,
                              .mtu = 1024,
                              .retry_cnt = 3,
                              .rnr_retry = 3,
                              .access = c->kind == K_QP_ACCESS     ? SR_ACCESS_REMOTE_WRITE
                                        : c->kind == K_QP_NO_WRITE ? 15 & ~SR_ACCESS_REMOTE_WRITE
                                                                   : 15};
        h_connect(&h, &pr, &o);
        reg_mem(&pr, c->kind == K_NO_ACCESS ? SR_ACCESS_LOCAL_WRITE | SR_ACCESS_REMOTE_READ : 15);
        pattern(mem[1], MEM, 5);
        uint8_t before[4096];
        memcpy(before, mem[1], sizeof(before));
        struct sr_sge rs = {(uintptr_t)mem[1] + 8192, c->kind == K_RECV_SMALL ? 100 : 4096,
                            c->kind == K_RECV_BAD_LKEY ? 0xdead00 : sr_mr_lkey(mr[1])};
        struct sr_pd *other_pd = NULL;
        struct sr_mr *extra = NULL;
        if (c->kind == K_OTHER_PD) {
            SR_CHECK_EQ(sr_pd_alloc(h.eng[1], &other_pd), 0);
            SR_CHECK_EQ(sr_mr_reg(other_pd, mem[1], MEM, (uintptr_t)mem[1], 15, &extra), 0);
        } else if (c->kind == K_READ_NO_LOCAL_WRITE) {
            SR_CHECK_EQ(
                sr_mr_reg(pr.pd[0], mem[0], 4096, (uintptr_t)mem[0], SR_ACCESS_REMOTE_READ, &extra),
                0);
        }
        struct sr_recv_wr rwr = {.wr_id = 5, .sg_list = &rs, .num_sge = 1};
        sr_qp_post_recv(pr.qp[1], &rwr);
        rwr.wr_id = 6;
        sr_qp_post_recv(pr.qp[1], &rwr);

        struct sr_sge sg = {(uintptr_t)mem[0], 200, sr_mr_lkey(mr[0])};
        struct sr_send_wr ok = signaled_wr(1, &sg, SR_WR_RDMA_WRITE, (uintptr_t)mem[1] + 100000);
        int first = c->kind != K_QP_ACCESS && c->kind != K_NO_ACCESS && c->kind != K_QP_NO_WRITE;
        if (first)
            SR_CHECK_EQ(sr_qp_post_send(pr.qp[0], &ok, h.now), 0);
        struct sr_send_wr bad = ok;
        bad.wr_id = 2;
        bad.opcode = c->op;
        bad.remote_addr = (uintptr_t)mem[1];
        if (c->op == SR_WR_ATOMIC_CMP_AND_SWP || c->op == SR_WR_ATOMIC_FETCH_AND_ADD)
            sg.length = 8;
        if (c->op == SR_WR_ATOMIC_WRITE) {
            bad.num_sge = 0;
            bad.compare_add = 0x5a5a5a5a5a5a5a5aull;
        }
        switch (c->kind) {
        case K_BAD_RKEY:
            bad.rkey ^= 0x100;
            break;
        case K_OOB:
            /* an ATOMIC WRITE's target must stay aligned to be out of bounds */
            bad.remote_addr = (uintptr_t)mem[1] + MEM - (c->op == SR_WR_ATOMIC_WRITE ? 0 : 100);
            break;
        case K_UNALIGNED:
            bad.remote_addr += 4;
            break;
        case K_BAD_LKEY:
            sg.lkey = 0xdead00;
            break;
        case K_OTHER_PD:
            bad.rkey = sr_mr_rkey(extra);
            break;
        case K_READ_NO_LOCAL_WRITE:
            sg.lkey = sr_mr_lkey(extra);
            break;
        default:
            break;
        }
        SR_CHECK_EQ(sr_qp_post_send(pr.qp[0], &bad, h.now), 0);
        struct sr_send_wr later = ok;
        later.wr_id = 3;
        later.send_flags = 0; /* unsignaled, but flushed in error: completes anyway */
        sg.lkey = sr_mr_lkey(mr[0]);
        SR_CHECK_EQ(sr_qp_post_send(pr.qp[0], &later, h.now), 0);

        struct sr_wc wc[8];
        int n = wait_wc(&h, pr.scq[0], first + 2, wc, 1000000000ull);
        SR_CHECK_EQ(n, first + 2);
        if (first) {
            SR_CHECK_EQ(wc[0].wr_id, 1);
            SR_CHECK_EQ(wc[0].status, SR_WC_SUCCESS);
        }
        SR_CHECK_EQ(wc[first].wr_id, 2);
        SR_CHECK_EQ(wc[first].status, c->req_status);
        SR_CHECK_EQ(wc[first + 1].wr_id, 3);
        SR_CHECK_EQ(wc[first + 1].status, SR_WC_WR_FLUSH_ERR);
        struct sr_qp_attr qa;
        sr_qp_query(pr.qp[0], &qa, NULL);
        SR_CHECK_EQ(qa.qp_state, SR_QPS_ERR);
        h_run(&h, NULL, NULL, 10000000ull);
        sr_qp_query(pr.qp[1], &qa, NULL);
        SR_CHECK_EQ(qa.qp_state, c->resp_state);
        if (c->kind == K_RECV_SMALL || c->kind == K_RECV_BAD_LKEY) {
            SR_CHECK_EQ(wait_wc(&h, pr.rcq[1], 2, wc, 1000000ull), 2);
            SR_CHECK_EQ(wc[0].status,
                        c->kind == K_RECV_SMALL ? SR_WC_LOC_LEN_ERR : SR_WC_LOC_PROT_ERR);
            SR_CHECK_EQ(wc[1].status, SR_WC_WR_FLUSH_ERR);
        }
        if (extra)
            sr_mr_dereg(extra);
        if (other_pd)
            sr_pd_free(other_pd);
        /* memory outside what was granted is untouched */
        SR_CHECK_MEM(mem[1], before, sizeof(before));
        /* posting to a QP in error flushes at once */
        SR_CHECK_EQ(sr_qp_post_send(pr.qp[0], &ok, h.now), 0);
        SR_CHECK_EQ(sr_cq_poll(pr.scq[0], 1, wc), 1);
        SR_CHECK_EQ(wc[0].status, SR_WC_WR_FLUSH_ERR);
        sr_mr_dereg(mr[0]);
        sr_mr_dereg(mr[1]);
        h_fini(&h);
    }
}

/* On-demand MRs: an implicit one (address 0, the whole address space)
 * reaches any memory the engine's mem_ok allows; memory it refuses (not
 * mapped) makes a remote access error, not a fault, and is not touched. */
static const uint8_t *odp_hole; /* a 4 KiB range mem_ok calls unmapped */
static bool odp_mem_ok(const void *addr, uint64_t len, bool write)
{
    (void)write;
    const uint8_t *p = addr;
    return p + len <= odp_hole || p >= odp_hole + 4096;
}

static void test_odp_implicit(void)
{
    struct harness h;
    struct h_pair pr;
    h_mem_ok = odp_mem_ok;
    h_init(&h, 0);
    h_mem_ok = NULL;
    struct h_qp_opts o = {
        .type = SR_QPT_RC, .mtu = 1024, .retry_cnt = 3, .rnr_retry = 3, .access = 15};
    h_connect(&h, &pr, &o);
    reg_mem(&pr, 15);
    struct sr_mr *odp;
    /* only an on-demand MR may start at address 0 */
    SR_CHECK_EQ(sr_mr_reg(pr.pd[1], NULL, SIZE_MAX, 0, 15, &odp), SR_ERR_INVAL);
    SR_CHECK_EQ(sr_mr_reg(pr.pd[1], NULL, SIZE_MAX, 0, 15 | SR_ACCESS_ON_DEMAND, &odp), 0);
    odp_hole = mem[1] + 65536;
    pattern(mem[0], 8192, 3);
    struct sr_sge sg = {(uintptr_t)mem[0], 3000, sr_mr_lkey(mr[0])};
    struct sr_send_wr w = signaled_wr(1, &sg, SR_WR_RDMA_WRITE, (uintptr_t)mem[1] + 100);
    w.rkey = sr_mr_rkey(odp);
    SR_CHECK_EQ(sr_qp_post_send(pr.qp[0], &w, h.now), 0);
    struct sr_wc wc[2];
    SR_CHECK_EQ(wait_wc(&h, pr.scq[0], 1, wc, 1000000000ull), 1);
    SR_CHECK_EQ(wc[0].status, SR_WC_SUCCESS);
    SR_CHECK_MEM(mem[1] + 100, mem[0], 3000);
    /* a READ through the same key reads it back */
    struct sr_sge back = {(uintptr_t)mem[0] + 4096, 3000, sr_mr_lkey(mr[0])};
    w = signaled_wr(2, &back, SR_WR_RDMA_READ, (uintptr_t)mem[1] + 100);
    w.rkey = sr_mr_rkey(odp);
    SR_CHECK_EQ(sr_qp_post_send(pr.qp[0], &w, h.now), 0);
    SR_CHECK_EQ(wait_wc(&h, pr.scq[0], 1, wc, 1000000000ull), 1);
    SR_CHECK_EQ(wc[0].status, SR_WC_SUCCESS);
    SR_CHECK_MEM(mem[0] + 4096, mem[0], 3000);
    /* a WRITE that ends in the hole */
    memset(mem[1] + 65536 - 4096, 0, 8192);
    w = signaled_wr(3, &sg, SR_WR_RDMA_WRITE, (uintptr_t)odp_hole - 1000);
    w.rkey = sr_mr_rkey(odp);
    SR_CHECK_EQ(sr_qp_post_send(pr.qp[0], &w, h.now), 0);
    SR_CHECK_EQ(wait_wc(&h, pr.scq[0], 1, wc, 1000000000ull), 1);
    SR_CHECK_EQ(wc[0].status, SR_WC_REM_ACCESS_ERR);
    static const uint8_t zero[8192];
    SR_CHECK_MEM(mem[1] + 65536 - 4096, zero, sizeof(zero));
    sr_mr_dereg(odp);
    sr_mr_dereg(mr[0]);
    sr_mr_dereg(mr[1]);
    h_fini(&h);
}

/* A QP moved to RESET takes its completions out of its CQs (the flushed
 * receives of its error state here), as the verbs providers do. */
static void test_reset_cleans_cq(void)
{
    struct harness h;
    struct h_pair pr;
    h_init(&h, 0);
    struct h_qp_opts o = {
        .type = SR_QPT_RC, .mtu = 1024, .retry_cnt = 3, .rnr_retry = 3, .access = 15};
    h_connect(&h, &pr, &o);
    reg_mem(&pr, 15);
    struct sr_sge rs = {(uintptr_t)mem[1], 64, sr_mr_lkey(mr[1])};
    struct sr_recv_wr rwr = {.wr_id = 7, .sg_list = &rs, .num_sge = 1};
    SR_CHECK_EQ(sr_qp_post_recv(pr.qp[1], &rwr), 0);
    SR_CHECK_EQ(sr_qp_post_recv(pr.qp[1], &rwr), 0);
    struct sr_qp_attr a = {.qp_state = SR_QPS_ERR};
    SR_CHECK_EQ(sr_qp_modify(pr.qp[1], &a, SR_QP_STATE, h.now), 0);
    a.qp_state = SR_QPS_RESET;
    SR_CHECK_EQ(sr_qp_modify(pr.qp[1], &a, SR_QP_STATE, h.now), 0);
    struct sr_wc wc[4];
    SR_CHECK_EQ(sr_cq_poll(pr.rcq[1], 4, wc), 0);
    sr_mr_dereg(mr[0]);
    sr_mr_dereg(mr[1]);
    h_fini(&h);
}

/* IBA 10.8.3.3: a fenced WQE is not started until earlier READs and
 * atomics have completed. The filter notes, when node 0 first sends the
 * SEND, whether node 1 has already answered the READ. */
static bool fence_resp_seen;
static int fence_send_verdict; /* -1 not sent yet, else fence_resp_seen at the time */
static int f_fence(struct harness *h, const struct h_pkt *p, uint64_t seq)
{
    (void)h, (void)seq;
    uint8_t op = p->data[0] & 0x1f;
    if (p->from == 1 && (op == SR_OP_READ_RESP_ONLY || op == SR_OP_READ_RESP_LAST))
        fence_resp_seen = true;
    if (p->from == 0 && op == SR_OP_SEND_ONLY && fence_send_verdict < 0)
        fence_send_verdict = fence_resp_seen;
    return 0;
}

static void test_fence(void)
{
    for (int fenced = 0; fenced < 2; fenced++) {
        sr_test_ctx = fenced ? "fenced send" : "unfenced send";
        struct harness h;
        struct h_pair pr;
        h_init(&h, 0);
        h.filter = f_fence;
        fence_resp_seen = false;
        fence_send_verdict = -1;
        struct h_qp_opts o = {.type = SR_QPT_RC, .retry_cnt = 7, .access = 15};
        h_connect(&h, &pr, &o);
        reg_mem(&pr, 15);
        struct sr_sge rs = {(uintptr_t)mem[1] + 65536, 64, sr_mr_lkey(mr[1])};
        struct sr_recv_wr rwr = {.wr_id = 1, .sg_list = &rs, .num_sge = 1};
        SR_CHECK_EQ(sr_qp_post_recv(pr.qp[1], &rwr), 0);
        struct sr_sge sg = {(uintptr_t)mem[0], 512, sr_mr_lkey(mr[0])};
        struct sr_send_wr rd = signaled_wr(1, &sg, SR_WR_RDMA_READ, (uintptr_t)mem[1]);
        struct sr_sge sg2 = {(uintptr_t)mem[0] + 4096, 64, sr_mr_lkey(mr[0])};
        struct sr_send_wr snd = {.wr_id = 2,
                                 .sg_list = &sg2,
                                 .num_sge = 1,
                                 .opcode = SR_WR_SEND,
                                 .send_flags = SR_SEND_SIGNALED | (fenced ? SR_SEND_FENCE : 0)};
        post2_ok(&h, &pr, &rd, &snd, 100000000ull);
        SR_CHECK_EQ(fence_send_verdict, fenced); /* unfenced: sent before the response */
        sr_mr_dereg(mr[0]);
        sr_mr_dereg(mr[1]);
        h_fini(&h);
    }
}

/* IBA 9.4.4 / 10.8.3: at most max_rd_atomic READs and atomics in flight
 * from the initiator. The filter tracks requests sent and answered. */
static int rd_in_flight, rd_max_in_flight;
static int f_rd_count(struct harness *h, const struct h_pkt *p, uint64_t seq)
{
    (void)h, (void)seq;
    uint8_t op = p->data[0] & 0x1f;
    if (p->from == 0 && (op == SR_OP_READ_REQ || op == SR_OP_FETCH_ADD))
        rd_in_flight++;
    if (p->from == 1 && (op == SR_OP_READ_RESP_ONLY || op == SR_OP_ATOMIC_ACK))
        rd_in_flight--;
    if (rd_in_flight > rd_max_in_flight)
        rd_max_in_flight = rd_in_flight;
    return 0;
}

/* As f_rd_count, and loses every 9th atomic ACK and 11th READ response,
 * and doubles every 13th request: duplicates of requests up to
 * max_rd_atomic back must be answered from the replay state. */
static int f_rd_lossy(struct harness *h, const struct h_pkt *p, uint64_t seq)
{
    static unsigned acks, resps, reqs;
    f_rd_count(h, p, seq);
    uint8_t op = p->data[0] & 0x1f;
    if (p->from == 1 && op == SR_OP_ATOMIC_ACK && ++acks % 9 == 0)
        return 1;
    if (p->from == 1 && op == SR_OP_READ_RESP_ONLY && ++resps % 11 == 0)
        return 1;
    if (p->from == 0 && (op == SR_OP_READ_REQ || op == SR_OP_FETCH_ADD) && ++reqs % 13 == 0)
        return 2;
    return 0;
}

static void test_max_rd_atomic(void)
{
    for (int c = 0; c < 3; c++) {
        static const char *names[] = {"max_rd_atomic 2", "max_rd_atomic at the device limit",
                                      "max_rd_atomic at the limit, lossy"};
        static const uint8_t max[] = {2, SR_MAX_RD_ATOMIC, SR_MAX_RD_ATOMIC};
        enum { N = 4 * SR_MAX_RD_ATOMIC };
        sr_test_ctx = names[c];
        struct harness h;
        struct h_pair pr;
        h_init(&h, 0);
        h.filter = c == 2 ? f_rd_lossy : f_rd_count;
        rd_in_flight = rd_max_in_flight = 0;
        struct h_qp_opts o = {
            .type = SR_QPT_RC, .timeout = 8, .retry_cnt = 7, .access = 15, .max_rd_atomic = max[c]};
        h_connect(&h, &pr, &o);
        reg_mem(&pr, 15);
        int n = c ? N : 8;
        for (int i = 0; i < n; i++) {
            struct sr_sge sg = {(uintptr_t)mem[0] + (uint64_t)i * 64, 8, sr_mr_lkey(mr[0])};
            struct sr_send_wr wr = {.wr_id = (uint64_t)i,
                                    .sg_list = &sg,
                                    .num_sge = 1,
                                    .opcode =
                                        (i & 1) ? SR_WR_ATOMIC_FETCH_AND_ADD : SR_WR_RDMA_READ,
                                    .send_flags = SR_SEND_SIGNALED,
                                    .compare_add = 1,
                                    .remote_addr = (uintptr_t)mem[1] + 4096,
                                    .rkey = sr_mr_rkey(mr[1])};
            SR_CHECK_EQ(sr_qp_post_send(pr.qp[0], &wr, h.now), 0);
        }
        struct sr_wc wc[N];
        SR_CHECK_EQ(wait_wc(&h, pr.scq[0], n, wc, 1000000000ull), n);
        for (int i = 0; i < n; i++) {
            SR_CHECK_EQ(wc[i].wr_id, (uint64_t)i);
            SR_CHECK_EQ(wc[i].status, SR_WC_SUCCESS);
        }
        if (c < 2)
            SR_CHECK_EQ(rd_max_in_flight, max[c]);
        uint64_t sum;
        memcpy(&sum, mem[1] + 4096, sizeof(sum));
        SR_CHECK_EQ(sum, (uint64_t)n / 2); /* every atomic executed once */
        sr_mr_dereg(mr[0]);
        sr_mr_dereg(mr[1]);
        h_fini(&h);
    }
}

static void test_rnr(void)
{
    for (int exhaust = 0; exhaust < 2; exhaust++) {
        sr_test_ctx = exhaust ? "rnr exhausted" : "rnr recovers";
        struct harness h;
        struct h_pair pr;
        h_init(&h, 0);
        struct h_qp_opts o = {.type = SR_QPT_RC,
                              .retry_cnt = 2,
                              .rnr_retry = exhaust ? 2 : 7,
                              .access = 15,
                              .min_rnr_timer = 14 /* 1.28 ms */};
        h_connect(&h, &pr, &o);
        reg_mem(&pr, 15);
        struct sr_sge sg = {(uintptr_t)mem[0], 64, sr_mr_lkey(mr[0])};
        struct sr_send_wr wr = {.wr_id = 9,
                                .sg_list = &sg,
                                .num_sge = 1,
                                .opcode = SR_WR_SEND,
                                .send_flags = SR_SEND_SIGNALED};
        pattern(mem[0], 64, 3);
        SR_CHECK_EQ(sr_qp_post_send(pr.qp[0], &wr, h.now), 0);
        struct sr_wc wc[2];
        if (exhaust) {
            uint64_t t0 = h.now;
            SR_CHECK_EQ(wait_wc(&h, pr.scq[0], 1, wc, 100000000ull), 1);
            SR_CHECK_EQ(wc[0].status, SR_WC_RNR_RETRY_EXC_ERR);
            /* three RNR NAKs, two waits of 1.28 ms in between */
            SR_CHECK(h.now - t0 >= 2 * 1280000ull && h.now - t0 < 4 * 1280000ull);
            struct sr_engine_stats st;
            sr_engine_stats(h.eng[0], &st);
            SR_CHECK_EQ(st.rnr_naks_rcvd, 3);
        } else {
            SR_CHECK_EQ(wait_wc(&h, pr.scq[0], 1, wc, 30000000ull), 0); /* still waiting */
            struct sr_sge rs = {(uintptr_t)mem[1], 64, sr_mr_lkey(mr[1])};
            struct sr_recv_wr rwr = {.wr_id = 4, .sg_list = &rs, .num_sge = 1};
            SR_CHECK_EQ(sr_qp_post_recv(pr.qp[1], &rwr), 0);
            SR_CHECK_EQ(wait_wc(&h, pr.scq[0], 1, wc, 100000000ull), 1);
            SR_CHECK_EQ(wc[0].status, SR_WC_SUCCESS);
            SR_CHECK_MEM(mem[1], mem[0], 64);
        }
        sr_mr_dereg(mr[0]);
        sr_mr_dereg(mr[1]);
        h_fini(&h);
    }
}

static void test_retry_exceeded(void)
{
    sr_test_ctx = "dead peer";
    struct harness h;
    struct h_pair pr;
    h_init(&h, 0);
    struct h_qp_opts o = {
        .type = SR_QPT_RC, .timeout = 10 /* 4.19 ms */, .retry_cnt = 3, .access = 15};
    h_connect(&h, &pr, &o);
    reg_mem(&pr, 15);
    h.filter = f_all;
    struct sr_sge sg = {(uintptr_t)mem[0], 5000, sr_mr_lkey(mr[0])};
    struct sr_send_wr wr = signaled_wr(1, &sg, SR_WR_RDMA_WRITE, (uintptr_t)mem[1]);
    SR_CHECK_EQ(sr_qp_post_send(pr.qp[0], &wr, h.now), 0);
    wr.wr_id = 2;
    wr.opcode = SR_WR_RDMA_READ;
    SR_CHECK_EQ(sr_qp_post_send(pr.qp[0], &wr, h.now), 0);
    uint64_t t0 = h.now;
    struct sr_wc wc[2];
    SR_CHECK_EQ(wait_wc(&h, pr.scq[0], 2, wc, 10000000000ull), 2);
    SR_CHECK_EQ(wc[0].status, SR_WC_RETRY_EXC_ERR);
    SR_CHECK_EQ(wc[1].status, SR_WC_WR_FLUSH_ERR);
    uint64_t t = sr_timeout_ns(10);
    /* retry_cnt + 1 timer expiries */
    SR_CHECK(h.now - t0 >= 4 * t && h.now - t0 < 5 * t);
    SR_CHECK_EQ(sr_engine_next_deadline(h.eng[0]), UINT64_MAX); /* nothing left running */
    sr_mr_dereg(mr[0]);
    sr_mr_dereg(mr[1]);
    h_fini(&h);
}

/* Completions carry the time the engine generated them: the now_ns of the
 * call that did (ibv_cq_ex timestamps are this). */
static void test_wc_timestamps(void)
{
    sr_test_ctx = "completion timestamps";
    struct harness h;
    struct h_pair pr;
    h_init(&h, 0);
    struct h_qp_opts o = {.type = SR_QPT_RC, .access = 15};
    h_connect(&h, &pr, &o);
    reg_mem(&pr, 15);
    h_run(&h, NULL, NULL, 123457); /* a start time that is not 0 */
    uint64_t t0 = h.now;
    struct sr_sge rsg = {(uintptr_t)mem[1], 100, sr_mr_lkey(mr[1])};
    struct sr_recv_wr rwr = {.wr_id = 7, .sg_list = &rsg, .num_sge = 1};
    SR_CHECK_EQ(sr_qp_post_recv(pr.qp[1], &rwr), 0);
    struct sr_sge sg = {(uintptr_t)mem[0], 100, sr_mr_lkey(mr[0])};
    struct sr_send_wr wr = signaled_wr(1, &sg, SR_WR_SEND, 0);
    SR_CHECK_EQ(sr_qp_post_send(pr.qp[0], &wr, h.now), 0);
    struct sr_wc wc[2];
    SR_CHECK_EQ(wait_wc(&h, pr.scq[0], 1, wc, 1000000), 1);
    SR_CHECK_EQ(wait_wc(&h, pr.rcq[1], 1, wc + 1, 1000000), 1);
    /* the SEND arrives one wire delay after it was posted, its ACK one later */
    SR_CHECK_EQ(wc[1].ts_ns, t0 + H_DELAY_NS);
    SR_CHECK_EQ(wc[0].ts_ns, t0 + 2 * H_DELAY_NS);
    /* a completion made by a timer has the timer's time */
    h.filter = f_all;
    h_run(&h, NULL, NULL, 1000);
    uint64_t t1 = h.now;
    SR_CHECK_EQ(sr_qp_post_send(pr.qp[0], &wr, h.now), 0);
    SR_CHECK_EQ(wait_wc(&h, pr.scq[0], 1, wc, 100000000000ull), 1);
    SR_CHECK_EQ(wc[0].status, SR_WC_RETRY_EXC_ERR);
    SR_CHECK(wc[0].ts_ns > t1 && wc[0].ts_ns <= h.now);
    sr_mr_dereg(mr[0]);
    sr_mr_dereg(mr[1]);
    h_fini(&h);
}

static void test_ud(void)
{
    sr_test_ctx = "ud";
    struct harness h;
    struct h_pair pr;
    h_init(&h, 0);
    struct h_qp_opts o = {.type = SR_QPT_UD, .mtu = 1024, .max_inline = 64};
    h_connect(&h, &pr, &o);
    reg_mem(&pr, 15);
    pattern(mem[0], 2048, 8);
    struct sr_sge rs = {(uintptr_t)mem[1], 40 + 1024, sr_mr_lkey(mr[1])};
    struct sr_recv_wr rwr = {.wr_id = 1, .sg_list = &rs, .num_sge = 1};
    for (int i = 0; i < 3; i++)
        SR_CHECK_EQ(sr_qp_post_recv(pr.qp[1], &rwr), 0);
    struct sr_sge sg = {(uintptr_t)mem[0], 1000, sr_mr_lkey(mr[0])};
    struct sr_send_wr wr = {.wr_id = 2,
                            .sg_list = &sg,
                            .num_sge = 1,
                            .opcode = SR_WR_SEND_WITH_IMM,
                            .imm = 0x55667788,
                            .send_flags = SR_SEND_SIGNALED,
                            .ah = {.dest_qpn = sr_qp_num(pr.qp[1]), .qkey = 0x11111111}};
    h_gid(wr.ah.dgid, 1);
    SR_CHECK_EQ(sr_qp_post_send(pr.qp[0], &wr, h.now), 0);
    wr.ah.qkey = 0x22222222; /* wrong Q_Key: dropped silently at the receiver */
    SR_CHECK_EQ(sr_qp_post_send(pr.qp[0], &wr, h.now), 0);
    wr.ah.qkey = 0x80000000; /* high bit: use the QP's Q_Key */
    wr.send_flags |= SR_SEND_INLINE;
    sg.length = 60;
    SR_CHECK_EQ(sr_qp_post_send(pr.qp[0], &wr, h.now), 0);
    memset(mem[0], 0, 60); /* inline data was captured at post */
    struct sr_wc wc[4];
    SR_CHECK_EQ(wait_wc(&h, pr.scq[0], 3, wc, 1000000ull), 3);
    SR_CHECK_EQ(wait_wc(&h, pr.rcq[1], 2, wc, 1000000ull), 2);
    SR_CHECK_EQ(wc[0].status, SR_WC_SUCCESS);
    SR_CHECK_EQ(wc[0].byte_len, 40 + 1000);
    SR_CHECK_EQ(wc[0].wc_flags, SR_WC_GRH | SR_WC_WITH_IMM);
    SR_CHECK_EQ(wc[0].imm, 0x55667788);
    SR_CHECK_EQ(wc[0].src_qp, sr_qp_num(pr.qp[0]));
    SR_CHECK_EQ(wc[1].byte_len, 40 + 60);
    /* GRH: IPv4 header in bytes 20..39 with the sender's address */
    SR_CHECK_EQ(mem[1][20], 0x45);
    SR_CHECK_EQ(mem[1][28 + 4], 127);
    SR_CHECK_EQ(mem[1][28 + 7], 1);
    struct sr_engine_stats st;
    sr_engine_stats(h.eng[1], &st);
    SR_CHECK_EQ(st.rx_drop_qkey, 1);
    /* too large for the MTU: local length error, QP to SQE */
    sg.length = 4097; /* UD QPs use the port MTU (4096 here) */
    wr.send_flags = SR_SEND_SIGNALED;
    SR_CHECK_EQ(sr_qp_post_send(pr.qp[0], &wr, h.now), 0);
    SR_CHECK_EQ(sr_cq_poll(pr.scq[0], 1, wc), 1);
    SR_CHECK_EQ(wc[0].status, SR_WC_LOC_LEN_ERR);
    struct sr_qp_attr qa;
    sr_qp_query(pr.qp[0], &qa, NULL);
    SR_CHECK_EQ(qa.qp_state, SR_QPS_SQE);
    sr_mr_dereg(mr[0]);
    sr_mr_dereg(mr[1]);
    h_fini(&h);
}

static void test_uc(void)
{
    sr_test_ctx = "uc";
    struct harness h;
    struct h_pair pr;
    h_init(&h, 0);
    h.filter = f_drop7;
    struct h_qp_opts o = {.type = SR_QPT_UC, .mtu = 256, .access = 15};
    h_connect(&h, &pr, &o);
    reg_mem(&pr, 15);
    pattern(mem[0], 65536, 9);
    /* 20 writes of 3 packets each: those that lost a packet are dropped
     * whole by the receiver, the others land intact. */
    for (int i = 0; i < 20; i++) {
        struct sr_sge sg = {(uintptr_t)mem[0] + (uint64_t)i * 1000, 700, sr_mr_lkey(mr[0])};
        struct sr_send_wr wr =
            signaled_wr((uint64_t)i, &sg, SR_WR_RDMA_WRITE, (uintptr_t)mem[1] + (uint64_t)i * 1000);
        SR_CHECK_EQ(sr_qp_post_send(pr.qp[0], &wr, h.now), 0);
    }
    struct sr_wc wc[20];
    SR_CHECK_EQ(wait_wc(&h, pr.scq[0], 20, wc, 1000000ull), 20);
    h_run(&h, NULL, NULL, 100000ull);
    int intact = 0, partial = 0;
    for (int i = 0; i < 20; i++) {
        SR_CHECK_EQ(wc[i].status, SR_WC_SUCCESS);
        bool same = !memcmp(mem[1] + i * 1000, mem[0] + i * 1000, 700);
        intact += same;
        /* a dropped message may have written its leading packets, never a
         * packet after a gap */
        if (!same)
            partial++;
    }
    SR_CHECK(intact > 0 && partial > 0);
    sr_mr_dereg(mr[0]);
    sr_mr_dereg(mr[1]);
    h_fini(&h);
}

/* XRC: an initiator on node 0 sends to two XRC SRQs behind one target QP
 * on node 1; each message lands in the SRQ its XRCETH names, completes on
 * that SRQ's CQ with the target QP's number; an SRQ of another domain is
 * refused with an invalid request. RDMA WRITE goes through too, checked
 * against the named SRQ's PD. */
static void xrc_modify(struct harness *h, struct sr_qp *qp, bool target, uint32_t dest)
{
    struct sr_qp_attr a = {.qp_state = SR_QPS_INIT, .port_num = 1, .qp_access_flags = 15};
    SR_CHECK_EQ(sr_qp_modify(qp, &a,
                             SR_QP_STATE | SR_QP_PKEY_INDEX | SR_QP_PORT | SR_QP_ACCESS_FLAGS,
                             h->now),
                0);
    a.qp_state = SR_QPS_RTR;
    a.path_mtu = 1024;
    a.dest_qp_num = dest;
    a.rq_psn = 0x123;
    a.max_dest_rd_atomic = 4;
    a.min_rnr_timer = 1;
    h_gid(a.dgid, target ? 0 : 1);
    uint32_t m = SR_QP_STATE | SR_QP_AV | SR_QP_PATH_MTU | SR_QP_DEST_QPN | SR_QP_RQ_PSN;
    if (target)
        m |= SR_QP_MAX_DEST_RD_ATOMIC | SR_QP_MIN_RNR_TIMER;
    SR_CHECK_EQ(sr_qp_modify(qp, &a, m, h->now), 0);
    a.qp_state = SR_QPS_RTS;
    a.sq_psn = 0x123;
    a.timeout = 8;
    a.retry_cnt = 7;
    a.rnr_retry = 7;
    a.max_rd_atomic = 4;
    m = SR_QP_STATE | SR_QP_SQ_PSN | SR_QP_TIMEOUT;
    if (!target)
        m |= SR_QP_RETRY_CNT | SR_QP_RNR_RETRY | SR_QP_MAX_QP_RD_ATOMIC;
    SR_CHECK_EQ(sr_qp_modify(qp, &a, m, h->now), 0);
}

static void test_xrc(void)
{
    sr_test_ctx = "xrc";
    struct harness h;
    h_init(&h, 0);
    struct sr_pd *pd0, *pd1;
    struct sr_cq *scq, *cqa, *cqb;
    struct sr_xrcd *xrcd, *other;
    struct sr_srq *srqa, *srqb, *srqx;
    struct sr_qp *ini, *tgt;
    SR_CHECK_EQ(sr_pd_alloc(h.eng[0], &pd0), 0);
    SR_CHECK_EQ(sr_pd_alloc(h.eng[1], &pd1), 0);
    SR_CHECK_EQ(sr_cq_create(h.eng[0], 64, &scq), 0);
    SR_CHECK_EQ(sr_cq_create(h.eng[1], 64, &cqa), 0);
    SR_CHECK_EQ(sr_cq_create(h.eng[1], 64, &cqb), 0);
    SR_CHECK_EQ(sr_xrcd_alloc(h.eng[1], &xrcd), 0);
    SR_CHECK_EQ(sr_xrcd_alloc(h.eng[1], &other), 0);
    SR_CHECK_EQ(sr_srq_create_xrc(pd1, xrcd, cqa, 16, 2, &srqa), 0);
    SR_CHECK_EQ(sr_srq_create_xrc(pd1, xrcd, cqb, 16, 2, &srqb), 0);
    SR_CHECK_EQ(sr_srq_create_xrc(pd1, other, cqb, 16, 2, &srqx), 0);
    SR_CHECK(sr_srq_num(srqa) != sr_srq_num(srqb));
    struct sr_qp_init_attr ti = {.qp_type = SR_QPT_XRC_RECV, .xrcd = xrcd};
    SR_CHECK_EQ(sr_qp_create(NULL, &ti, &tgt), 0);
    struct sr_qp_init_attr ii = {
        .qp_type = SR_QPT_XRC_SEND, .send_cq = scq, .cap = {.max_send_wr = 16, .max_send_sge = 2}};
    SR_CHECK_EQ(sr_qp_create(pd0, &ii, &ini), 0);
    xrc_modify(&h, tgt, true, sr_qp_num(ini));
    xrc_modify(&h, ini, false, sr_qp_num(tgt));
    SR_CHECK_EQ(sr_xrcd_free(xrcd), SR_ERR_BUSY);
    struct sr_recv_wr bad_rwr = {0};
    SR_CHECK_EQ(sr_qp_post_recv(tgt, &bad_rwr), SR_ERR_INVAL); /* no receive queue */

    for (int i = 0; i < 2; i++)
        memset(mem[i], 0, 65536);
    SR_CHECK_EQ(sr_mr_reg(pd0, mem[0], 65536, (uintptr_t)mem[0], 15, &mr[0]), 0);
    SR_CHECK_EQ(sr_mr_reg(pd1, mem[1], 65536, (uintptr_t)mem[1], 15, &mr[1]), 0);
    pattern(mem[0], 8192, 77);
    struct sr_sge ra = {(uintptr_t)mem[1], 4096, sr_mr_lkey(mr[1])};
    struct sr_sge rb = {(uintptr_t)mem[1] + 4096, 4096, sr_mr_lkey(mr[1])};
    struct sr_recv_wr wa = {.wr_id = 0xa, .sg_list = &ra, .num_sge = 1};
    struct sr_recv_wr wb = {.wr_id = 0xb, .sg_list = &rb, .num_sge = 1};
    SR_CHECK_EQ(sr_srq_post_recv(srqa, &wa), 0);
    SR_CHECK_EQ(sr_srq_post_recv(srqb, &wb), 0);

    struct sr_sge s1 = {(uintptr_t)mem[0], 3000, sr_mr_lkey(mr[0])};
    struct sr_sge s2 = {(uintptr_t)mem[0] + 4096, 2000, sr_mr_lkey(mr[0])};
    struct sr_send_wr to_b = {.wr_id = 1,
                              .sg_list = &s2,
                              .num_sge = 1,
                              .opcode = SR_WR_SEND,
                              .send_flags = SR_SEND_SIGNALED,
                              .xrc_remote_srqn = sr_srq_num(srqb)};
    struct sr_send_wr to_a = {.wr_id = 2,
                              .sg_list = &s1,
                              .num_sge = 1,
                              .opcode = SR_WR_SEND_WITH_IMM,
                              .imm = 0x1234,
                              .send_flags = SR_SEND_SIGNALED,
                              .xrc_remote_srqn = sr_srq_num(srqa)};
    struct sr_send_wr wr3 = {.wr_id = 3,
                             .sg_list = &s1,
                             .num_sge = 1,
                             .opcode = SR_WR_RDMA_WRITE,
                             .send_flags = SR_SEND_SIGNALED,
                             .remote_addr = (uintptr_t)mem[1] + 16384,
                             .rkey = sr_mr_rkey(mr[1]),
                             .xrc_remote_srqn = sr_srq_num(srqa)};
    SR_CHECK_EQ(sr_qp_post_send(ini, &to_b, h.now), 0);
    SR_CHECK_EQ(sr_qp_post_send(ini, &to_a, h.now), 0);
    SR_CHECK_EQ(sr_qp_post_send(ini, &wr3, h.now), 0);
    struct sr_wc wc[4];
    SR_CHECK_EQ(wait_wc(&h, scq, 3, wc, 100000000ull), 3);
    for (int i = 0; i < 3; i++)
        SR_CHECK_EQ(wc[i].status, SR_WC_SUCCESS);
    SR_CHECK_EQ(wait_wc(&h, cqa, 1, wc, 1000000ull), 1);
    SR_CHECK_EQ(wc[0].wr_id, 0xa);
    SR_CHECK_EQ(wc[0].byte_len, 3000);
    SR_CHECK_EQ(wc[0].imm, 0x1234);
    SR_CHECK_EQ(wc[0].qp_num, sr_qp_num(tgt));
    SR_CHECK_EQ(wait_wc(&h, cqb, 1, wc, 1000000ull), 1);
    SR_CHECK_EQ(wc[0].wr_id, 0xb);
    SR_CHECK_EQ(wc[0].byte_len, 2000);
    SR_CHECK_MEM(mem[1], mem[0], 3000);
    SR_CHECK_MEM(mem[1] + 4096, mem[0] + 4096, 2000);
    SR_CHECK_MEM(mem[1] + 16384, mem[0], 3000);

    /* an SRQ of another domain: invalid request, both sides in error */
    struct sr_send_wr to_x = to_b;
    to_x.wr_id = 4;
    to_x.xrc_remote_srqn = sr_srq_num(srqx);
    SR_CHECK_EQ(sr_qp_post_send(ini, &to_x, h.now), 0);
    SR_CHECK_EQ(wait_wc(&h, scq, 1, wc, 100000000ull), 1);
    SR_CHECK_EQ(wc[0].status, SR_WC_REM_INV_REQ_ERR);
    struct sr_qp_attr qa;
    sr_qp_query(tgt, &qa, NULL);
    SR_CHECK_EQ(qa.qp_state, SR_QPS_ERR);

    SR_CHECK_EQ(sr_qp_destroy(tgt), 0);
    SR_CHECK_EQ(sr_qp_destroy(ini), 0);
    SR_CHECK_EQ(sr_srq_destroy(srqa), 0);
    SR_CHECK_EQ(sr_srq_destroy(srqb), 0);
    SR_CHECK_EQ(sr_srq_destroy(srqx), 0);
    SR_CHECK_EQ(sr_xrcd_free(xrcd), 0);
    SR_CHECK_EQ(sr_xrcd_free(other), 0);
    sr_mr_dereg(mr[0]);
    sr_mr_dereg(mr[1]);
    h_fini(&h);
}

/* TIME_WAIT: the responder acknowledges the last SEND, the ACK is lost, the
 * responder's QP is destroyed with a linger: the requester's retransmission
 * is still acknowledged, so its send succeeds. Without a linger it fails. */
static int ack_drops;
static int f_drop_acks(struct harness *h, const struct h_pkt *p, uint64_t seq)
{
    (void)h, (void)seq;
    if (p->from == 1 && (p->data[0] & 0x1f) == SR_OP_ACK && ack_drops > 0) {
        ack_drops--;
        return 1;
    }
    return 0;
}

static void test_linger(void)
{
    for (int linger = 0; linger < 2; linger++) {
        sr_test_ctx = linger ? "destroyed with linger" : "destroyed without linger";
        struct harness h;
        struct h_pair pr;
        h_init(&h, 0);
        h.filter = f_drop_acks;
        ack_drops = 1;
        struct h_qp_opts o = {.type = SR_QPT_RC, .timeout = 10, .retry_cnt = 3, .access = 15};
        h_connect(&h, &pr, &o);
        reg_mem(&pr, 15);
        struct sr_sge rs = {(uintptr_t)mem[1], 64, sr_mr_lkey(mr[1])};
        struct sr_recv_wr rwr = {.wr_id = 1, .sg_list = &rs, .num_sge = 1};
        SR_CHECK_EQ(sr_qp_post_recv(pr.qp[1], &rwr), 0);
        struct sr_sge sg = {(uintptr_t)mem[0], 64, sr_mr_lkey(mr[0])};
        struct sr_send_wr wr = {.wr_id = 2,
                                .sg_list = &sg,
                                .num_sge = 1,
                                .opcode = SR_WR_SEND,
                                .send_flags = SR_SEND_SIGNALED};
        SR_CHECK_EQ(sr_qp_post_send(pr.qp[0], &wr, h.now), 0);
        struct sr_wc wc[2];
        SR_CHECK_EQ(wait_wc(&h, pr.rcq[1], 1, wc, 1000000ull), 1); /* delivered; ACK lost */
        uint64_t t = sr_timeout_ns(10);
        SR_CHECK_EQ(sr_qp_destroy_linger(pr.qp[1], h.now, linger ? 5 * t : 0), 0);
        SR_CHECK_EQ(sr_engine_zombies(h.eng[1]), (uint32_t)linger);
        /* the CQ and PD are free to go at once */
        SR_CHECK_EQ(sr_mr_dereg(mr[1]), 0);
        SR_CHECK_EQ(wait_wc(&h, pr.scq[0], 1, wc, 10 * t), 1);
        SR_CHECK_EQ(wc[0].status, linger ? SR_WC_SUCCESS : SR_WC_RETRY_EXC_ERR);
        h_run(&h, NULL, NULL, 10 * t);
        SR_CHECK_EQ(sr_engine_zombies(h.eng[1]), 0); /* the linger ended */
        sr_mr_dereg(mr[0]);
        h_fini(&h);
    }
}

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

static void post_write(struct harness *h, struct h_pair *pr, int from, uint64_t id,
                       enum sr_wr_opcode op)
{
    struct sr_sge sg = {(uintptr_t)mem[from], 64, sr_mr_lkey(mr[from])};
    struct sr_send_wr wr = {.wr_id = id,
                            .sg_list = &sg,
                            .num_sge = 1,
                            .opcode = op,
                            .send_flags = SR_SEND_SIGNALED,
                            .remote_addr = (uintptr_t)mem[!from] + 4096,
                            .rkey = sr_mr_rkey(mr[!from])};
    SR_CHECK_EQ(sr_qp_post_send(pr->qp[from], &wr, h->now), 0);
}

/* A pair whose engines hold ACKs delay ns, every packet logged; path MTU
 * mtu (0: the harness's default). */
static void ack_setup_with(struct harness *h, struct h_pair *pr, uint8_t timeout, uint64_t delay,
                           uint32_t mtu)
{
    h_ack_delay_ns = delay;
    h_init(h, 0);
    h_ack_delay_ns = 0;
    h->filter = f_log;
    nlog = 0;
    struct h_qp_opts o = {
        .type = SR_QPT_RC, .mtu = mtu, .timeout = timeout, .retry_cnt = 3, .access = 15};
    h_connect(h, pr, &o);
    reg_mem(pr, 15);
}

static void ack_setup(struct harness *h, struct h_pair *pr, uint8_t timeout)
{
    ack_setup_with(h, pr, timeout, DELAY, 0);
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
        struct harness h;
        struct h_pair pr;
        ack_setup(&h, &pr, 14);
        if (c == 4)
            sr_engine_hold_acks(h.eng[1], false);
        pattern(mem[0], 64, 3);
        post_write(&h, &pr, 0, 1, SR_WR_RDMA_WRITE);
        if (c == 2)
            post_write(&h, &pr, 0, 2, SR_WR_RDMA_READ);
        if (c == 4) {
            uint64_t sent = plog[log_find(0, SR_OP_WRITE_ONLY, 0)].at;
            SR_CHECK_EQ(wait_wc(&h, pr.scq[0], 1, wc, DELAY), 1);
            int a = log_find(1, SR_OP_ACK, 0);
            SR_CHECK(a >= 0);
            SR_CHECK_EQ(plog[a].at, sent + H_DELAY_NS + 4000);
            sr_mr_dereg(mr[0]);
            sr_mr_dereg(mr[1]);
            h_fini(&h);
            continue;
        }
        h_run(&h, NULL, NULL, DELAY / 2); /* delivered, executed, not yet acknowledged */
        SR_CHECK(memcmp(mem[1] + 4096, mem[0], 64) == 0);
        switch (c) {
        case 0: {
            SR_CHECK_EQ(log_find(1, SR_OP_ACK, 0), -1);
            post_write(&h, &pr, 1, 9, SR_WR_RDMA_WRITE); /* the reply */
            int w = log_find(1, SR_OP_WRITE_ONLY, 0), a = log_find(1, SR_OP_ACK, 0);
            SR_CHECK(w >= 0 && a == w + 1); /* right behind the reply, at once */
            SR_CHECK_EQ(plog[a].at, plog[w].at);
            SR_CHECK_EQ(wait_wc(&h, pr.scq[0], 1, wc, DELAY / 4), 1);
            SR_CHECK_EQ(wc[0].status, SR_WC_SUCCESS);
            SR_CHECK_EQ(wait_wc(&h, pr.scq[1], 1, wc, 2 * DELAY + 10000), 1);
            SR_CHECK_EQ(wc[0].status, SR_WC_SUCCESS);
            break;
        }
        case 1: {
            uint64_t sent = plog[log_find(0, SR_OP_WRITE_ONLY, 0)].at;
            SR_CHECK_EQ(wait_wc(&h, pr.scq[0], 1, wc, 2 * DELAY), 1);
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
            SR_CHECK_EQ(wait_wc(&h, pr.scq[0], 2, wc, DELAY / 4), 2);
            SR_CHECK_EQ(wc[0].status, SR_WC_SUCCESS);
            SR_CHECK_EQ(wc[1].status, SR_WC_SUCCESS);
            break;
        }
        case 3: {
            /* the held ACK covers a message QP 1 completed: it leaves as the
             * QP enters Error, and nothing after it */
            struct sr_qp_attr a = {.qp_state = SR_QPS_ERR};
            uint64_t at = h.now;
            SR_CHECK_EQ(sr_qp_modify(pr.qp[1], &a, SR_QP_STATE, h.now), 0);
            h_run(&h, NULL, NULL, 2 * DELAY);
            int k = log_find(1, SR_OP_ACK, 0);
            SR_CHECK(k >= 0);
            SR_CHECK(k < 0 || plog[k].at <= at + 4000);
            SR_CHECK(k < 0 || log_find(1, SR_OP_ACK, k + 1) == -1);
            SR_CHECK_EQ(wait_wc(&h, pr.scq[0], 1, wc, DELAY), 1);
            SR_CHECK_EQ(wc[0].status, SR_WC_SUCCESS);
            break;
        }
        }
        sr_mr_dereg(mr[0]);
        sr_mr_dereg(mr[1]);
        h_fini(&h);
    }
}

/* When the held ACK left with a reply, the QP holds the next one 10 x as
 * long (capped at a quarter of its timeout); one that falls due ends that. */
static void test_ack_reply_hold(void)
{
    sr_test_ctx = "a QP that replies holds ACKs longer";
    for (int c = 0; c < 2; c++) {
        static const uint8_t timeout[] = {14, 5}; /* 67 ms; 131 us */
        struct sr_wc wc[2];
        struct harness h;
        struct h_pair pr;
        ack_setup(&h, &pr, timeout[c]);
        /* a ping-pong round: QP 1's ACK rides with its reply */
        post_write(&h, &pr, 0, 1, SR_WR_RDMA_WRITE);
        h_run(&h, NULL, NULL, DELAY / 2);
        post_write(&h, &pr, 1, 2, SR_WR_RDMA_WRITE);
        SR_CHECK_EQ(wait_wc(&h, pr.scq[0], 1, wc, DELAY / 4), 1);
        SR_CHECK_EQ(wait_wc(&h, pr.scq[1], 1, wc, 2 * DELAY), 1);
        /* QP 1's next two holds: long, then (that one fell due) the delay */
        uint64_t want[] = {c == 0 ? 10 * DELAY : 131072 / 4, DELAY};
        for (int i = 0; i < 2; i++) {
            int from = nlog;
            post_write(&h, &pr, 0, 3 + (uint64_t)i, SR_WR_RDMA_WRITE);
            uint64_t sent = plog[log_find(0, SR_OP_WRITE_ONLY, from)].at;
            SR_CHECK_EQ(wait_wc(&h, pr.scq[0], 1, wc, 20 * DELAY), 1);
            SR_CHECK_EQ(wc[0].status, SR_WC_SUCCESS);
            int a = log_find(1, SR_OP_ACK, from);
            SR_CHECK(a >= 0);
            SR_CHECK_EQ(plog[a].at, sent + H_DELAY_NS + want[i]);
        }
        sr_mr_dereg(mr[0]);
        sr_mr_dereg(mr[1]);
        h_fini(&h);
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
    struct harness h;
    struct h_pair pr;
    struct sr_wc wc[2];
    ack_setup_with(&h, &pr, timeout, 100000, 256);
    h.filter = f_log_late_last;
    pattern(mem[0], LEN, 7);
    struct sr_sge sg = {(uintptr_t)mem[0], LEN, sr_mr_lkey(mr[0])};
    struct sr_send_wr wr = signaled_wr(1, &sg, SR_WR_RDMA_WRITE, (uintptr_t)mem[1] + 4096);
    uint64_t sent = h.now;
    SR_CHECK_EQ(sr_qp_post_send(pr.qp[0], &wr, h.now), 0);
    /* the rest arrives at sent + 1 us, the LAST at sent + 51 us */
    h_run(&h, NULL, NULL, H_DELAY_NS + 50000 + 75000);
    SR_CHECK_EQ(h.now, sent + H_DELAY_NS + 125000);
    SR_CHECK(memcmp(mem[1] + 4096, mem[0], LEN) == 0);
    if (timeout > 6) {
        SR_CHECK_EQ(log_find(1, SR_OP_ACK, 0), -1);  /* still held */
        post_write(&h, &pr, 1, 9, SR_WR_RDMA_WRITE); /* the reply */
        int w = log_find(1, SR_OP_WRITE_ONLY, 0), a = log_find(1, SR_OP_ACK, 0);
        SR_CHECK(w >= 0 && a == w + 1); /* right behind the reply */
    } else {
        /* 262 us: a quarter is less than the hold, which is not extended */
        int a = log_find(1, SR_OP_ACK, 0);
        SR_CHECK(a >= 0);
        SR_CHECK_EQ(plog[a].at, sent + H_DELAY_NS + 100000);
    }
    SR_CHECK_EQ(wait_wc(&h, pr.scq[0], 1, wc, 10000), 1);
    SR_CHECK_EQ(wc[0].status, SR_WC_SUCCESS);
    sr_mr_dereg(mr[0]);
    sr_mr_dereg(mr[1]);
    h_fini(&h);
}

static void test_ack_hold_from_end(void)
{
    ack_hold_from_end(14); /* 67 ms */
    ack_hold_from_end(6);  /* 262 us */
}

/* Messages that cross (both sides post at once, then poll): each side's
 * poll that finds nothing sends the ACK it holds for the other's message
 * once it is 4 us old, and both complete in microseconds, not when the
 * holds fall due. (A session-7 draft kept the ACKs of QPs with requests
 * of their own in flight: 22 us here, 202 us after ping-pong rounds.) */
static void test_ack_crossing(void)
{
    sr_test_ctx = "crossing messages complete at the first idle polls";
    struct harness h;
    struct h_pair pr;
    struct sr_wc wc[2];
    ack_setup(&h, &pr, 14);
    post_write(&h, &pr, 0, 1, SR_WR_RDMA_WRITE);
    post_write(&h, &pr, 1, 2, SR_WR_RDMA_WRITE);
    h_run(&h, NULL, NULL, 5500); /* both arrived at 1 us, both ACKs held */
    SR_CHECK_EQ(log_find(0, SR_OP_ACK, 0), -1);
    SR_CHECK_EQ(log_find(1, SR_OP_ACK, 0), -1);
    for (int i = 0; i < 2; i++) /* each application polls and finds nothing */
        SR_CHECK_EQ(sr_engine_release_acks(h.eng[i], h.now - 4000), true);
    SR_CHECK_EQ(wait_wc(&h, pr.scq[0], 1, wc, 2000), 1);
    SR_CHECK_EQ(wc[0].wr_id, 1);
    SR_CHECK_EQ(wait_wc(&h, pr.scq[1], 1, wc, 2000), 1);
    SR_CHECK_EQ(wc[0].wr_id, 2);
    SR_CHECK(h.now < 10000);
    sr_mr_dereg(mr[0]);
    sr_mr_dereg(mr[1]);
    h_fini(&h);
}

/* A READ's responses may wait in a batching driver (tx_fence), but not past
 * a later request that writes the memory they come from: the READ returns
 * the bytes as they were before the WRITE behind it (IBA ordering). */
static void test_read_fence(void)
{
    enum { LEN = 65536 };
    h_defer = true;
    struct harness h;
    struct h_pair pr;
    h_init(&h, 0);
    h_defer = false;
    struct h_qp_opts o = {.type = SR_QPT_RC, .mtu = 4096, .retry_cnt = 3, .access = 15};
    h_connect(&h, &pr, &o);
    reg_mem(&pr, 15);
    uint8_t *x = mem[1], *got = mem[0], *newer = mem[0] + 2 * LEN;
    pattern(x, LEN, 21);
    pattern(newer, LEN, 22);
    uint8_t *before = malloc(LEN);
    memcpy(before, x, LEN);
    struct sr_sge rsg = {(uintptr_t)got, LEN, sr_mr_lkey(mr[0])};
    struct sr_sge wsg = {(uintptr_t)newer, LEN, sr_mr_lkey(mr[0])};
    struct sr_send_wr rd = signaled_wr(1, &rsg, SR_WR_RDMA_READ, (uintptr_t)x);
    struct sr_send_wr wr = rd;
    wr.wr_id = 2;
    wr.sg_list = &wsg;
    wr.opcode = SR_WR_RDMA_WRITE;
    post2_ok(&h, &pr, &rd, &wr, 1000000000ull);
    SR_CHECK(memcmp(got, before, LEN) == 0); /* the READ saw the old bytes */
    SR_CHECK(memcmp(x, newer, LEN) == 0);    /* and the WRITE landed after it */
    free(before);
    sr_mr_dereg(mr[0]);
    sr_mr_dereg(mr[1]);
    h_fini(&h);
}

/* Every operation, size and fault profile again with ACKs held back. */
static void test_ops_held_acks(void)
{
    h_ack_delay_ns = DELAY;
    test_ops();
    test_stream();
    h_ack_delay_ns = 0;
}

/* The WRITEs and SENDs again with the peers reached by trains: WRITEs of
 * up to 32 packets (the harness's 1 ms timeout) go as WRITE ONLY packets,
 * through loss, duplication and reordering (a rewind into the middle of a
 * WRITE resends its pieces as they were), alone and in a mixed stream. */
static void test_ops_trains(void)
{
    h_trains = true;
    ops_write_send_only = true;
    test_ops();
    ops_write_send_only = false;
    test_stream();
    h_trains = false;
}

/* What node 0 sends, decoded. */
enum { WLOG_MAX = 640 };
static struct {
    uint8_t op;
    bool ack_req;
    uint64_t va;
    uint32_t dma_len, payload;
} wlog[WLOG_MAX];
static int nwlog, wdrop_at = -1;
static int f_wlog(struct harness *h, const struct h_pkt *p, uint64_t seq)
{
    (void)h, (void)seq;
    if (p->from != 0 || nwlog == WLOG_MAX)
        return 0;
    struct sr_pkt pk;
    SR_CHECK(sr_wire_decode(p->data, p->len, 1024, &pk) >= 0); /* write_shape's MTU */
    wlog[nwlog].op = pk.bth.opcode & 0x1f;
    wlog[nwlog].ack_req = pk.bth.ack_req;
    wlog[nwlog].va = pk.reth.va;
    wlog[nwlog].dma_len = pk.reth.dma_len;
    wlog[nwlog].payload = pk.payload_len;
    return nwlog++ == wdrop_at; /* drop that one, the first time it goes */
}

/* With trains and a long timeout, an RC WRITE of 2..256 packets goes as
 * one WRITE ONLY per packet, each RETH covering its own piece; a lost
 * piece is sent again as the same piece. A WQE asks for ACKs on its last
 * packet and every ack_every packets: 256 with trains and a long timeout,
 * 32 otherwise, half the window at most, and never on UC. A longer WRITE
 * (its ACK requests then on MIDDLEs), a WRITE with immediate (its receive
 * completion reports the whole length), a UC WRITE and a WRITE without
 * trains keep FIRST/MIDDLE/LAST. */
static uint8_t ws_timeout = 14; /* write_shape's QP timeout (67 ms) */
static uint32_t ws_window;      /* and window (0: the default, 2048) */
static void write_shape(enum sr_qp_type type, enum sr_wr_opcode op, bool trains, int drop,
                        bool expect_pieces, int npkt, int ack_every)
{
    enum { MTU = 1024 };
    const uint32_t LEN = (uint32_t)(npkt - 1) * MTU + 100;
    struct harness h;
    struct h_pair pr;
    h_trains = trains;
    h_init(&h, ws_window);
    h_trains = false;
    h.filter = f_wlog;
    nwlog = 0;
    wdrop_at = drop;
    struct h_qp_opts o = {.type = type,
                          .mtu = MTU,
                          .timeout = ws_timeout,
                          .retry_cnt = 7,
                          .rnr_retry = 7,
                          .access = 15};
    h_connect(&h, &pr, &o);
    reg_mem(&pr, 15);
    pattern(mem[0], LEN, 5);
    uint64_t va = (uintptr_t)mem[1] + 8192;
    if (op == SR_WR_RDMA_WRITE_WITH_IMM) {
        struct sr_recv_wr rwr = {.wr_id = 9};
        SR_CHECK_EQ(sr_qp_post_recv(pr.qp[1], &rwr), 0);
    }
    struct sr_sge sg = {(uintptr_t)mem[0], LEN, sr_mr_lkey(mr[0])};
    struct sr_send_wr wr = {.wr_id = 1,
                            .sg_list = &sg,
                            .num_sge = 1,
                            .opcode = op,
                            .send_flags = SR_SEND_SIGNALED,
                            .imm = 77,
                            .remote_addr = va,
                            .rkey = sr_mr_rkey(mr[1])};
    SR_CHECK_EQ(sr_qp_post_send(pr.qp[0], &wr, h.now), 0);
    struct sr_wc wc[2];
    SR_CHECK_EQ(wait_wc(&h, pr.scq[0], 1, wc, 1000000000ull), 1);
    SR_CHECK_EQ(wc[0].status, SR_WC_SUCCESS);
    h_run(&h, NULL, NULL, 1000000); /* UC completes when sent */
    SR_CHECK_MEM(mem[1] + 8192, mem[0], LEN);
    if (op == SR_WR_RDMA_WRITE_WITH_IMM) {
        SR_CHECK_EQ(wait_wc(&h, pr.rcq[1], 1, wc, 1000000), 1);
        SR_CHECK_EQ(wc[0].byte_len, LEN);
        SR_CHECK_EQ(wc[0].imm, 77);
    }
    /* the first npkt packets, then (after a drop) the rewind's; nothing
     * sent twice without one */
    if (drop < 0)
        SR_CHECK_EQ(nwlog, npkt);
    else
        SR_CHECK(nwlog >= npkt + npkt - drop);
    for (int i = 0; i < nwlog; i++) {
        int k = i < npkt ? i : drop + (i - npkt); /* the piece this packet carries */
        if (k < 0 || k >= npkt)
            break;
        uint32_t piece = k == npkt - 1 ? LEN - (npkt - 1) * MTU : MTU;
        SR_CHECK_EQ(wlog[i].payload, piece);
        SR_CHECK_EQ(wlog[i].ack_req, ack_every && (k == npkt - 1 || (k + 1) % ack_every == 0));
        if (expect_pieces) {
            SR_CHECK_EQ(wlog[i].op, SR_OP_WRITE_ONLY);
            SR_CHECK_EQ(wlog[i].va, va + (uint64_t)k * MTU);
            SR_CHECK_EQ(wlog[i].dma_len, piece);
        } else {
            uint8_t last =
                op == SR_WR_RDMA_WRITE_WITH_IMM ? SR_OP_WRITE_LAST_IMM : SR_OP_WRITE_LAST;
            SR_CHECK_EQ(wlog[i].op, k == 0          ? SR_OP_WRITE_FIRST
                                    : k == npkt - 1 ? last
                                                    : SR_OP_WRITE_MIDDLE);
            if (k == 0) {
                SR_CHECK_EQ(wlog[i].va, va);
                SR_CHECK_EQ(wlog[i].dma_len, LEN);
            }
        }
    }
    sr_mr_dereg(mr[0]);
    sr_mr_dereg(mr[1]);
    h_fini(&h);
}

static void test_write_only(void)
{
    sr_test_ctx = "RC WRITE, trains: WRITE ONLY pieces";
    write_shape(SR_QPT_RC, SR_WR_RDMA_WRITE, true, -1, true, 4, 256);
    sr_test_ctx = "... the second piece lost: the same pieces again";
    write_shape(SR_QPT_RC, SR_WR_RDMA_WRITE, true, 1, true, 4, 256);
    sr_test_ctx = "... 256 pieces, one ACK request";
    write_shape(SR_QPT_RC, SR_WR_RDMA_WRITE, true, -1, true, 256, 256);
    sr_test_ctx = "RC WRITE of 300 packets, trains: FIRST/MIDDLE/LAST, ACKs every 256";
    write_shape(SR_QPT_RC, SR_WR_RDMA_WRITE, true, -1, false, 300, 256);
    sr_test_ctx = "RC WRITE of 40 packets without trains: ACKs every 32";
    write_shape(SR_QPT_RC, SR_WR_RDMA_WRITE, false, -1, false, 40, 32);
    sr_test_ctx = "RC WRITE with immediate, trains: FIRST/MIDDLE/LAST, ACKs every 256";
    write_shape(SR_QPT_RC, SR_WR_RDMA_WRITE_WITH_IMM, true, -1, false, 40, 256);
    sr_test_ctx = "UC WRITE, trains: FIRST/MIDDLE/LAST, no ACK requests";
    write_shape(SR_QPT_UC, SR_WR_RDMA_WRITE, true, -1, false, 4, 0);
    ws_timeout = 8; /* 1 ms: 256 packets and a held ACK might not fit */
    sr_test_ctx = "timeout 8, trains: 32 pieces, one ACK request";
    write_shape(SR_QPT_RC, SR_WR_RDMA_WRITE, true, -1, true, 32, 32);
    sr_test_ctx = "timeout 8, trains: 40 packets whole, ACKs every 32";
    write_shape(SR_QPT_RC, SR_WR_RDMA_WRITE, true, -1, false, 40, 32);
    ws_timeout = 14;
    ws_window = 16;
    sr_test_ctx = "window 16, trains: 8 pieces; 20 packets whole, ACKs every 8";
    write_shape(SR_QPT_RC, SR_WR_RDMA_WRITE, true, -1, true, 8, 8);
    write_shape(SR_QPT_RC, SR_WR_RDMA_WRITE, true, -1, false, 20, 8);
    ws_window = 0;
}

/* SQD drains what has started: a WRITE cut short by the window, whose
 * first packet is lost, is sent again from its start (the sequence NAK's
 * rewind) and completes. Treated as a new WQE then, it stayed stopped
 * until its retries ran out. */
static int sqd_drops;
static int f_drop_first(struct harness *h, const struct h_pkt *p, uint64_t seq)
{
    (void)h, (void)seq;
    return p->from == 0 && sqd_drops++ == 0;
}

static void test_sqd_rewind(void)
{
    sr_test_ctx = "SQD: a partly sent WQE rewound to its start drains";
    struct harness h;
    struct h_pair pr;
    h_init(&h, 4);
    sqd_drops = 0;
    h.filter = f_drop_first;
    struct h_qp_opts o = {.type = SR_QPT_RC, .mtu = 1024, .retry_cnt = 3, .access = 15};
    h_connect(&h, &pr, &o);
    reg_mem(&pr, 15);
    pattern(mem[0], 8192, 3);
    struct sr_sge sg = {(uintptr_t)mem[0], 8192, sr_mr_lkey(mr[0])};
    struct sr_send_wr wr = signaled_wr(5, &sg, SR_WR_RDMA_WRITE, (uintptr_t)mem[1]);
    SR_CHECK_EQ(sr_qp_post_send(pr.qp[0], &wr, h.now), 0); /* 4 of its 8 packets go */
    struct sr_qp_attr a = {.qp_state = SR_QPS_SQD};
    SR_CHECK_EQ(sr_qp_modify(pr.qp[0], &a, SR_QP_STATE | SR_QP_EN_SQD_ASYNC_NOTIFY, h.now), 0);
    struct sr_wc wc[1];
    SR_CHECK_EQ(wait_wc(&h, pr.scq[0], 1, wc, 100000000ull), 1);
    SR_CHECK_EQ(wc[0].status, SR_WC_SUCCESS);
    SR_CHECK_MEM(mem[1], mem[0], 8192);
    h_run(&h, NULL, NULL, 1000000);
    SR_CHECK_EQ(h.async_events[SR_EVENT_SQ_DRAINED], 1);
    sr_mr_dereg(mr[0]);
    sr_mr_dereg(mr[1]);
    h_fini(&h);
}

static void test_qp_state(void)
{
    sr_test_ctx = "qp state machine";
    struct harness h;
    h_init(&h, 0);
    struct sr_pd *pd;
    struct sr_cq *cq;
    struct sr_qp *qp;
    SR_CHECK_EQ(sr_pd_alloc(h.eng[0], &pd), 0);
    SR_CHECK_EQ(sr_cq_create(h.eng[0], 16, &cq), 0);
    struct sr_qp_init_attr ia = {.qp_type = SR_QPT_RC,
                                 .send_cq = cq,
                                 .recv_cq = cq,
                                 .cap = {.max_send_wr = 4, .max_recv_wr = 4}};
    SR_CHECK_EQ(sr_qp_create(pd, &ia, &qp), 0);
    struct sr_qp_attr a = {.qp_state = SR_QPS_RTR, .path_mtu = 1024, .port_num = 1};
    uint32_t rtr = SR_QP_STATE | SR_QP_AV | SR_QP_PATH_MTU | SR_QP_DEST_QPN | SR_QP_RQ_PSN |
                   SR_QP_MAX_DEST_RD_ATOMIC | SR_QP_MIN_RNR_TIMER;
    SR_CHECK_EQ(sr_qp_modify(qp, &a, rtr, 0), SR_ERR_INVAL); /* RESET -> RTR */
    a.qp_state = SR_QPS_INIT;
    SR_CHECK_EQ(sr_qp_modify(qp, &a, SR_QP_STATE | SR_QP_PORT, 0), SR_ERR_INVAL); /* missing */
    SR_CHECK_EQ(sr_qp_modify(qp, &a,
                             SR_QP_STATE | SR_QP_PORT | SR_QP_PKEY_INDEX | SR_QP_ACCESS_FLAGS |
                                 SR_QP_TIMEOUT,
                             0),
                SR_ERR_INVAL); /* extra attribute not allowed here */
    SR_CHECK_EQ(
        sr_qp_modify(qp, &a, SR_QP_STATE | SR_QP_PORT | SR_QP_PKEY_INDEX | SR_QP_ACCESS_FLAGS, 0),
        0);
    struct sr_sge sg = {0, 0, 0};
    struct sr_send_wr wr = {.sg_list = &sg, .opcode = SR_WR_SEND};
    SR_CHECK_EQ(sr_qp_post_send(qp, &wr, 0), SR_ERR_INVAL); /* not RTS */
    a.qp_state = SR_QPS_RTR;
    a.path_mtu = 1000;
    SR_CHECK_EQ(sr_qp_modify(qp, &a, rtr, 0), SR_ERR_INVAL); /* bad MTU */
    a.path_mtu = 2048;
    SR_CHECK_EQ(sr_qp_modify(qp, &a, rtr & ~(uint32_t)SR_QP_MIN_RNR_TIMER, 0), SR_ERR_INVAL);
    SR_CHECK_EQ(sr_qp_modify(qp, &a, rtr, 0), 0);
    a.qp_state = SR_QPS_RTS;
    uint32_t rts = SR_QP_STATE | SR_QP_SQ_PSN | SR_QP_TIMEOUT | SR_QP_RETRY_CNT | SR_QP_RNR_RETRY |
                   SR_QP_MAX_QP_RD_ATOMIC;
    a.retry_cnt = 8;
    SR_CHECK_EQ(sr_qp_modify(qp, &a, rts, 0), SR_ERR_INVAL); /* retry_cnt > 7 */
    a.retry_cnt = 7;
    a.cur_qp_state = SR_QPS_INIT;
    SR_CHECK_EQ(sr_qp_modify(qp, &a, rts | SR_QP_CUR_STATE, 0), SR_ERR_INVAL);
    SR_CHECK_EQ(sr_qp_modify(qp, &a, rts, 0), 0);
    struct sr_qp_attr q;
    sr_qp_query(qp, &q, NULL);
    SR_CHECK_EQ(q.qp_state, SR_QPS_RTS);
    SR_CHECK_EQ(q.path_mtu, 2048);
    a.qp_state = SR_QPS_SQE;
    SR_CHECK_EQ(sr_qp_modify(qp, &a, SR_QP_STATE, 0), SR_ERR_INVAL); /* RTS -> SQE by hand */
    a.qp_state = SR_QPS_SQD;
    SR_CHECK_EQ(sr_qp_modify(qp, &a, SR_QP_STATE | SR_QP_EN_SQD_ASYNC_NOTIFY, 0), 0);
    SR_CHECK_EQ(h.async_events[SR_EVENT_SQ_DRAINED], 1); /* nothing outstanding */
    a.qp_state = SR_QPS_RTS;
    SR_CHECK_EQ(sr_qp_modify(qp, &a, SR_QP_STATE, 0), 0);
    a.qp_state = SR_QPS_ERR;
    SR_CHECK_EQ(sr_qp_modify(qp, &a, SR_QP_STATE, 0), 0);
    a.qp_state = SR_QPS_RTS;
    SR_CHECK_EQ(sr_qp_modify(qp, &a, SR_QP_STATE, 0), SR_ERR_INVAL); /* ERR -> RTS */
    a.qp_state = SR_QPS_RESET;
    SR_CHECK_EQ(sr_qp_modify(qp, &a, SR_QP_STATE, 0), 0);
    SR_CHECK_EQ(sr_cq_destroy(cq), SR_ERR_BUSY);
    SR_CHECK_EQ(sr_pd_free(pd), SR_ERR_BUSY);
    SR_CHECK_EQ(sr_qp_destroy(qp), 0);
    SR_CHECK_EQ(sr_cq_destroy(cq), 0);
    SR_CHECK_EQ(sr_pd_free(pd), 0);
    h_fini(&h);
}

static void test_cq_overflow_and_limits(void)
{
    sr_test_ctx = "cq overflow, queue full";
    struct harness h;
    struct h_pair pr;
    h_init(&h, 0);
    struct h_qp_opts o = {.type = SR_QPT_RC, .retry_cnt = 7, .access = 15, .cqe = 2, .max_wr = 4};
    h_connect(&h, &pr, &o);
    reg_mem(&pr, 15);
    struct sr_sge sg = {(uintptr_t)mem[0], 8, sr_mr_lkey(mr[0])};
    struct sr_send_wr wr = {.sg_list = &sg,
                            .num_sge = 1,
                            .opcode = SR_WR_RDMA_WRITE,
                            .send_flags = SR_SEND_SIGNALED,
                            .remote_addr = (uintptr_t)mem[1],
                            .rkey = sr_mr_rkey(mr[1])};
    for (int i = 0; i < 4; i++)
        SR_CHECK_EQ(sr_qp_post_send(pr.qp[0], &wr, h.now), 0);
    SR_CHECK_EQ(sr_qp_post_send(pr.qp[0], &wr, h.now), SR_ERR_NOMEM); /* send queue full */
    h_run(&h, NULL, NULL, 1000000ull);
    SR_CHECK_EQ(h.async_events[SR_EVENT_CQ_ERR], 1);
    struct sr_wc wc[4];
    SR_CHECK_EQ(sr_cq_poll(pr.scq[0], 4, wc), 2);
    /* the zero-key MR never validates, nor does a stale key */
    uint32_t stale = sr_mr_lkey(mr[1]);
    sr_mr_dereg(mr[1]);
    struct sr_mr *again;
    SR_CHECK_EQ(sr_mr_reg(pr.pd[1], mem[1], 64, (uintptr_t)mem[1], 15, &again), 0);
    SR_CHECK(sr_mr_lkey(again) != stale);
    SR_CHECK_EQ(sr_mr_reg(pr.pd[1], mem[1], 64, 0, SR_ACCESS_REMOTE_WRITE, &again),
                SR_ERR_INVAL); /* remote write needs local write */
    sr_mr_dereg(mr[0]);
    h_fini(&h);
}

/* Registers a 64-byte MR in pd and checks it took slot (key >> 8). */
static void reg_at(struct sr_pd *pd, struct sr_mr **m, uint32_t slot)
{
    SR_CHECK_EQ(sr_mr_reg(pd, mem[0], 64, 0, 0, m), 0);
    if (*m)
        SR_CHECK_EQ(sr_mr_lkey(*m) >> 8, slot);
}

static int tx_none(void *ctx, const struct sr_tx_pkt *pkt)
{
    (void)ctx;
    (void)pkt;
    SR_CHECK(!"no packet expected");
    return 0;
}

/* MR slots are taken next fit: the search starts after the last slot
 * taken and wraps past the end, so a freed slot (a key the application
 * may still hold) comes back when the search reaches it, not at the next
 * registration; slot 0 (key 0) is never used, and a full table says so.
 * Keys are the slot << 8 | a tag. */
static void test_mr_slots(void)
{
    enum { MAX = 8 };
    struct sr_engine_cfg cfg = {.ops = {.tx = tx_none}, .max_mr = MAX};
    h_gid(cfg.gid, 0);
    struct sr_engine *e = NULL;
    struct sr_pd *pd = NULL;
    SR_CHECK_EQ(sr_engine_create(&cfg, &e), 0);
    if (!e)
        return;
    SR_CHECK_EQ(sr_pd_alloc(e, &pd), 0);
    struct sr_mr *m[MAX] = {0}, *extra = NULL;
    for (int i = 1; i < MAX; i++)
        reg_at(pd, &m[i], (uint32_t)i);
    SR_CHECK_EQ(sr_mr_reg(pd, mem[0], 64, 0, 0, &extra), SR_ERR_LIMIT);
    /* free 5, then 3: the search, back at 1 after the last slot, finds 3,
     * then 5 */
    uint32_t stale5 = sr_mr_lkey(m[5]);
    sr_mr_dereg(m[5]);
    sr_mr_dereg(m[3]);
    reg_at(pd, &m[3], 3);
    reg_at(pd, &m[5], 5);
    SR_CHECK(sr_mr_lkey(m[5]) != stale5); /* a new tag */
    SR_CHECK_EQ(sr_mr_reg(pd, mem[0], 64, 0, 0, &extra), SR_ERR_LIMIT);
    /* the search goes on from 6: with 2 and 6 free it takes 6, then 2
     * (lowest first would take 2 at once) */
    sr_mr_dereg(m[2]);
    sr_mr_dereg(m[6]);
    reg_at(pd, &m[6], 6);
    reg_at(pd, &m[2], 2);
    for (int i = 1; i < MAX; i++)
        sr_mr_dereg(m[i]);
    SR_CHECK_EQ(sr_pd_free(pd), 0);
    sr_engine_destroy(e);
    /* the smallest tables: 1 holds none (slot 0 only), 2 holds slot 1 */
    for (uint32_t max = 1; max <= 2; max++) {
        cfg.max_mr = max;
        e = NULL;
        SR_CHECK_EQ(sr_engine_create(&cfg, &e), 0);
        if (!e)
            continue;
        SR_CHECK_EQ(sr_pd_alloc(e, &pd), 0);
        struct sr_mr *one = NULL;
        for (int round = 0; round < 3; round++) {
            SR_CHECK_EQ(sr_mr_reg(pd, mem[0], 64, 0, 0, &one), max == 1 ? SR_ERR_LIMIT : 0);
            if (max == 2) {
                SR_CHECK_EQ(sr_mr_lkey(one) >> 8, 1u);
                SR_CHECK_EQ(sr_mr_reg(pd, mem[0], 64, 0, 0, &extra), SR_ERR_LIMIT);
                sr_mr_dereg(one);
            }
        }
        SR_CHECK_EQ(sr_pd_free(pd), 0);
        sr_engine_destroy(e);
    }
}

int main(void)
{
    mem[0] = malloc(MEM);
    mem[1] = malloc(MEM);
    SR_RUN(test_qp_state);
    SR_RUN(test_reset_cleans_cq);
    SR_RUN(test_mr_slots);
    SR_RUN(test_ops);
    SR_RUN(test_stream);
    SR_RUN(test_errors);
    SR_RUN(test_odp_implicit);
    SR_RUN(test_fence);
    SR_RUN(test_max_rd_atomic);
    SR_RUN(test_rnr);
    SR_RUN(test_retry_exceeded);
    SR_RUN(test_wc_timestamps);
    SR_RUN(test_ud);
    SR_RUN(test_uc);
    SR_RUN(test_xrc);
    SR_RUN(test_linger);
    SR_RUN(test_ack_delay);
    SR_RUN(test_ack_reply_hold);
    SR_RUN(test_ack_hold_from_end);
    SR_RUN(test_ack_crossing);
    SR_RUN(test_ops_held_acks);
    SR_RUN(test_ops_trains);
    SR_RUN(test_write_only);
    SR_RUN(test_sqd_rewind);
    SR_RUN(test_read_fence);
    SR_RUN(test_cq_overflow_and_limits);
    free(mem[0]);
    free(mem[1]);
    return SR_TEST_RESULT();
}

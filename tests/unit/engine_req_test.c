/* engine_req_test.c: the requester, end to end through the responder:
 * every operation across sizes, MTUs and fault profiles (plain, with ACKs
 * held, with trains) with memory compared byte for byte, a mixed stream in
 * flight, fences, the max_rd_atomic limit and the replay of duplicates,
 * READ-then-WRITE ordering through a batching driver, and the packet shape
 * of long WRITEs (WRITE ONLY pieces, ACK requests); on engine_fixture.h. */
#include "engine_fixture.h"

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

/* How ops_run and stream_run set up the wire. */
struct ops_mode {
    uint64_t ack_delay_ns; /* the engines hold ACKs this long */
    bool trains;           /* the peers are reached by trains */
    bool write_send_only;  /* ops_run: RDMA WRITEs and SENDs only */
};

static void ops_run(const struct ops_mode *m)
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
                if (m->write_send_only && op != SR_WR_RDMA_WRITE && op != SR_WR_SEND)
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

                struct eng_fix f;
                struct h_qp_opts o = {
                    .type = SR_QPT_RC, .mtu = mtu, .retry_cnt = 7, .rnr_retry = 7, .access = 15};
                fix_open(&f, &(struct fix_opts){
                                 .wire = {.ack_delay_ns = m->ack_delay_ns, .trains = m->trains},
                                 .qp = o,
                                 .filter = profiles[pi].fn});
                seed++;
                /* Three SGEs on the source side, two on the sink side. */
                uint8_t *src = f.mem[0], *dst = f.mem[1];
                pattern(src, FIX_MEM, seed);
                pattern(dst + size, 64, seed + 99); /* canary after the target */
                uint8_t canary[64];
                memcpy(canary, dst + size, 64);
                uint32_t a = size / 3, b = size / 3;
                struct sr_sge sg[3] = {
                    {(uintptr_t)src, a, sr_mr_lkey(f.mr[0])},
                    {(uintptr_t)src + a + 100, b, sr_mr_lkey(f.mr[0])},
                    {(uintptr_t)src + a + b + 300, size - a - b, sr_mr_lkey(f.mr[0])},
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
                                        .rkey = sr_mr_rkey(f.mr[1])};
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
                        {(uintptr_t)dst, size / 2, sr_mr_lkey(f.mr[1])},
                        {(uintptr_t)dst + size / 2, size - size / 2 + 64, sr_mr_lkey(f.mr[1])}};
                    struct sr_recv_wr rwr = {.wr_id = 77, .sg_list = rs, .num_sge = 2};
                    SR_CHECK_EQ(sr_qp_post_recv(f.pr.qp[1], &rwr), 0);
                }
                if (op == SR_WR_RDMA_READ) {
                    /* READ pulls dst (node 1) into the local SGEs. */
                    pattern(dst, size, seed + 7);
                    memcpy(expect, dst, size);
                    memcpy(canary, dst + size, 64);
                }
                SR_CHECK_EQ(sr_qp_post_send(f.pr.qp[0], &wr, f.h.now), 0);
                struct sr_wc wc[4];
                SR_CHECK_EQ(wait_wc(&f.h, f.pr.scq[0], 1, wc, 2000000000ull), 1);
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
                    SR_CHECK_EQ(wait_wc(&f.h, f.pr.rcq[1], 1, wc, 1000000000ull), 1);
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
                    SR_CHECK_EQ(wc[0].qp_num, sr_qp_num(f.pr.qp[1]));
                }
                if (atomic) {
                    uint64_t now_val, got_old;
                    memcpy(&now_val, dst, 8);
                    memcpy(&got_old, src, 8);
                    SR_CHECK_EQ(got_old, old);
                    SR_CHECK_EQ(now_val, op == SR_WR_ATOMIC_CMP_AND_SWP ? wr.swap : old + 5);
                    struct sr_engine_stats st;
                    sr_engine_stats(f.h.eng[1], &st);
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
                    SR_CHECK_MEM(got, expect, size);
                    SR_CHECK_MEM(dst + size, canary, 64);
                } else {
                    SR_CHECK_MEM(dst, expect, size);
                    SR_CHECK_MEM(dst + size, canary, 64);
                }
                /* Nothing else completes, and no extra receive is consumed. */
                h_run(&f.h, NULL, NULL, 20000000ull);
                SR_CHECK_EQ(sr_cq_poll(f.pr.scq[0], 4, wc), 0);
                SR_CHECK_EQ(sr_cq_poll(f.pr.rcq[1], 4, wc), 0);
                fix_close(&f);
            }
}

/* Many messages of mixed kinds in flight at once, under loss. */
static void stream_run(const struct ops_mode *m)
{
    for (size_t pi = 0; pi < SR_ARRAY_SIZE(profiles); pi++) {
        sr_test_ctx = profiles[pi].name;
        struct eng_fix f;
        struct h_qp_opts o = {.type = SR_QPT_RC,
                              .mtu = 1024,
                              .retry_cnt = 7,
                              .rnr_retry = 7,
                              .access = 15,
                              .max_rd_atomic = 4};
        fix_open(&f,
                 &(struct fix_opts){
                     .wire = {.window = 64, .ack_delay_ns = m->ack_delay_ns, .trains = m->trains},
                     .qp = o,
                     .filter = profiles[pi].fn});
        pattern(f.mem[0], 1000000, 42);
        /* source chunks at f.mem[0] + i*CH; receive buffers at f.mem[1] + i*CH;
         * WRITE targets at f.mem[1] + 500000 + i*CH; READ sources at
         * f.mem[1] + 1000000 + i*CH, landing at f.mem[0] + 1000000 + i*CH */
        enum { N = 48, CH = 10000 };
        for (int i = 0; i < N; i += 3) {
            struct sr_sge rs = {(uintptr_t)f.mem[1] + (uint64_t)i * CH, CH, sr_mr_lkey(f.mr[1])};
            struct sr_recv_wr rwr = {.wr_id = 1000 + (uint64_t)i, .sg_list = &rs, .num_sge = 1};
            SR_CHECK_EQ(sr_qp_post_recv(f.pr.qp[1], &rwr), 0);
        }
        pattern(f.mem[1] + 1000000, N * CH, 43);
        int sigs = 0;
        for (int i = 0; i < N; i++) {
            struct sr_sge sg = {(uintptr_t)f.mem[0] + (uint64_t)i * CH, CH - (uint32_t)i,
                                sr_mr_lkey(f.mr[0])};
            struct sr_send_wr wr = {.wr_id = (uint64_t)i,
                                    .sg_list = &sg,
                                    .num_sge = 1,
                                    .send_flags = (i % 4 == 3) ? SR_SEND_SIGNALED : 0,
                                    .rkey = sr_mr_rkey(f.mr[1])};
            switch (i % 3) {
            case 0: /* SEND into receive (i/3) */
                wr.opcode = SR_WR_SEND;
                break;
            case 1:
                wr.opcode = SR_WR_RDMA_WRITE;
                wr.remote_addr = (uintptr_t)f.mem[1] + 500000 + (uint64_t)i * CH;
                break;
            default:
                wr.opcode = SR_WR_RDMA_READ;
                sg.addr = (uintptr_t)f.mem[0] + 1000000 + (uint64_t)i * CH;
                wr.remote_addr = (uintptr_t)f.mem[1] + 1000000 + (uint64_t)i * CH;
                break;
            }
            sigs += i % 4 == 3;
            SR_CHECK_EQ(sr_qp_post_send(f.pr.qp[0], &wr, f.h.now), 0);
        }
        struct sr_wc wc[64];
        SR_CHECK_EQ(wait_wc(&f.h, f.pr.scq[0], sigs, wc, 5000000000ull), sigs);
        for (int i = 0; i < sigs; i++) {
            SR_CHECK_EQ(wc[i].status, SR_WC_SUCCESS);
            SR_CHECK_EQ(wc[i].wr_id, (uint64_t)(4 * i + 3)); /* in order, signaled only */
        }
        SR_CHECK_EQ(wait_wc(&f.h, f.pr.rcq[1], N / 3, wc, 1000000000ull), N / 3);
        for (int i = 0; i < N; i++) {
            uint32_t len = CH - (uint32_t)i;
            const uint8_t *s = f.mem[0] + (uint64_t)i * CH;
            if (i % 3 == 0) {
                SR_CHECK_MEM(f.mem[1] + (uint64_t)i * CH, s, len);
                SR_CHECK_EQ(wc[i / 3].byte_len, len);
                SR_CHECK_EQ(wc[i / 3].wr_id, 1000 + (uint64_t)i);
            } else if (i % 3 == 1) {
                SR_CHECK_MEM(f.mem[1] + 500000 + (uint64_t)i * CH, s, len);
            } else {
                SR_CHECK_MEM(f.mem[0] + 1000000 + (uint64_t)i * CH,
                             f.mem[1] + 1000000 + (uint64_t)i * CH, len);
            }
        }
        fix_close(&f);
    }
}

static void test_ops(void)
{
    ops_run(&(struct ops_mode){0});
}

static void test_stream(void)
{
    stream_run(&(struct ops_mode){0});
}

/* Every operation, size and fault profile again with ACKs held back 20 us. */
static void test_ops_held_acks(void)
{
    const struct ops_mode held = {.ack_delay_ns = 20000};
    ops_run(&held);
    stream_run(&held);
}

/* The WRITEs and SENDs again with the peers reached by trains: WRITEs of
 * up to 32 packets (the harness's 1 ms timeout) go as WRITE ONLY packets,
 * through loss, duplication and reordering (a rewind into the middle of a
 * WRITE resends its pieces as they were), alone and in a mixed stream. */
static void test_ops_trains(void)
{
    ops_run(&(struct ops_mode){.trains = true, .write_send_only = true});
    stream_run(&(struct ops_mode){.trains = true});
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
        struct eng_fix f;
        fence_resp_seen = false;
        fence_send_verdict = -1;
        struct h_qp_opts o = {.type = SR_QPT_RC, .retry_cnt = 7, .access = 15};
        fix_open(&f, &(struct fix_opts){.qp = o, .filter = f_fence});
        struct sr_sge rs = {(uintptr_t)f.mem[1] + 65536, 64, sr_mr_lkey(f.mr[1])};
        struct sr_recv_wr rwr = {.wr_id = 1, .sg_list = &rs, .num_sge = 1};
        SR_CHECK_EQ(sr_qp_post_recv(f.pr.qp[1], &rwr), 0);
        struct sr_sge sg = {(uintptr_t)f.mem[0], 512, sr_mr_lkey(f.mr[0])};
        struct sr_send_wr rd = signaled_wr(&f, 1, &sg, SR_WR_RDMA_READ, (uintptr_t)f.mem[1]);
        struct sr_sge sg2 = {(uintptr_t)f.mem[0] + 4096, 64, sr_mr_lkey(f.mr[0])};
        struct sr_send_wr snd = {.wr_id = 2,
                                 .sg_list = &sg2,
                                 .num_sge = 1,
                                 .opcode = SR_WR_SEND,
                                 .send_flags = SR_SEND_SIGNALED | (fenced ? SR_SEND_FENCE : 0)};
        post2_ok(&f, &rd, &snd, 100000000ull);
        SR_CHECK_EQ(fence_send_verdict, fenced); /* unfenced: sent before the response */
        fix_close(&f);
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
        struct eng_fix f;
        rd_in_flight = rd_max_in_flight = 0;
        struct h_qp_opts o = {
            .type = SR_QPT_RC, .timeout = 8, .retry_cnt = 7, .access = 15, .max_rd_atomic = max[c]};
        fix_open(&f, &(struct fix_opts){.qp = o, .filter = c == 2 ? f_rd_lossy : f_rd_count});
        int n = c ? N : 8;
        for (int i = 0; i < n; i++) {
            struct sr_sge sg = {(uintptr_t)f.mem[0] + (uint64_t)i * 64, 8, sr_mr_lkey(f.mr[0])};
            struct sr_send_wr wr = {.wr_id = (uint64_t)i,
                                    .sg_list = &sg,
                                    .num_sge = 1,
                                    .opcode =
                                        (i & 1) ? SR_WR_ATOMIC_FETCH_AND_ADD : SR_WR_RDMA_READ,
                                    .send_flags = SR_SEND_SIGNALED,
                                    .compare_add = 1,
                                    .remote_addr = (uintptr_t)f.mem[1] + 4096,
                                    .rkey = sr_mr_rkey(f.mr[1])};
            SR_CHECK_EQ(sr_qp_post_send(f.pr.qp[0], &wr, f.h.now), 0);
        }
        struct sr_wc wc[N];
        SR_CHECK_EQ(wait_wc(&f.h, f.pr.scq[0], n, wc, 1000000000ull), n);
        for (int i = 0; i < n; i++) {
            SR_CHECK_EQ(wc[i].wr_id, (uint64_t)i);
            SR_CHECK_EQ(wc[i].status, SR_WC_SUCCESS);
        }
        if (c < 2)
            SR_CHECK_EQ(rd_max_in_flight, max[c]);
        uint64_t sum;
        memcpy(&sum, f.mem[1] + 4096, sizeof(sum));
        SR_CHECK_EQ(sum, (uint64_t)n / 2); /* every atomic executed once */
        fix_close(&f);
    }
}

/* A READ's responses may wait in a batching driver (tx_fence), but not past
 * a later request that writes the memory they come from: the READ returns
 * the bytes as they were before the WRITE behind it (IBA ordering). */
static void test_read_fence(void)
{
    enum { LEN = 65536 };
    struct eng_fix f;
    struct h_qp_opts o = {.type = SR_QPT_RC, .mtu = 4096, .retry_cnt = 3, .access = 15};
    fix_open(&f, &(struct fix_opts){.wire = {.defer = true}, .qp = o});
    uint8_t *x = f.mem[1], *got = f.mem[0], *newer = f.mem[0] + 2 * LEN;
    pattern(x, LEN, 21);
    pattern(newer, LEN, 22);
    uint8_t *before = malloc(LEN);
    memcpy(before, x, LEN);
    struct sr_sge rsg = {(uintptr_t)got, LEN, sr_mr_lkey(f.mr[0])};
    struct sr_sge wsg = {(uintptr_t)newer, LEN, sr_mr_lkey(f.mr[0])};
    struct sr_send_wr rd = signaled_wr(&f, 1, &rsg, SR_WR_RDMA_READ, (uintptr_t)x);
    struct sr_send_wr wr = rd;
    wr.wr_id = 2;
    wr.sg_list = &wsg;
    wr.opcode = SR_WR_RDMA_WRITE;
    post2_ok(&f, &rd, &wr, 1000000000ull);
    SR_CHECK_MEM(got, before, LEN); /* the READ saw the old bytes */
    SR_CHECK_MEM(x, newer, LEN);    /* and the WRITE landed after it */
    free(before);
    fix_close(&f);
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
struct ws_row {
    const char *name;
    enum sr_qp_type type;
    enum sr_wr_opcode op;
    bool trains;
    int drop; /* the packet lost the first time it goes; -1: none */
    bool expect_pieces;
    int npkt, ack_every;
    uint8_t timeout; /* the QP's; 0: 14 (67 ms) */
    uint32_t window; /* the engines'; 0: the default, 2048 */
};

static void write_shape(const struct ws_row *r)
{
    enum { MTU = 1024 };
    const enum sr_wr_opcode op = r->op;
    const int npkt = r->npkt, drop = r->drop, ack_every = r->ack_every;
    const uint32_t LEN = (uint32_t)(npkt - 1) * MTU + 100;
    sr_test_ctx = r->name;
    struct eng_fix f;
    struct h_qp_opts o = {.type = r->type,
                          .mtu = MTU,
                          .timeout = r->timeout ? r->timeout : 14,
                          .retry_cnt = 7,
                          .rnr_retry = 7,
                          .access = 15};
    fix_open(&f, &(struct fix_opts){.wire = {.window = r->window, .trains = r->trains},
                                    .qp = o,
                                    .filter = f_wlog});
    nwlog = 0;
    wdrop_at = drop;
    pattern(f.mem[0], LEN, 5);
    uint64_t va = (uintptr_t)f.mem[1] + 8192;
    if (op == SR_WR_RDMA_WRITE_WITH_IMM) {
        struct sr_recv_wr rwr = {.wr_id = 9};
        SR_CHECK_EQ(sr_qp_post_recv(f.pr.qp[1], &rwr), 0);
    }
    struct sr_sge sg = {(uintptr_t)f.mem[0], LEN, sr_mr_lkey(f.mr[0])};
    struct sr_send_wr wr = {.wr_id = 1,
                            .sg_list = &sg,
                            .num_sge = 1,
                            .opcode = op,
                            .send_flags = SR_SEND_SIGNALED,
                            .imm = 77,
                            .remote_addr = va,
                            .rkey = sr_mr_rkey(f.mr[1])};
    SR_CHECK_EQ(sr_qp_post_send(f.pr.qp[0], &wr, f.h.now), 0);
    struct sr_wc wc[2];
    SR_CHECK_EQ(wait_wc(&f.h, f.pr.scq[0], 1, wc, 1000000000ull), 1);
    SR_CHECK_EQ(wc[0].status, SR_WC_SUCCESS);
    h_run(&f.h, NULL, NULL, 1000000); /* UC completes when sent */
    SR_CHECK_MEM(f.mem[1] + 8192, f.mem[0], LEN);
    if (op == SR_WR_RDMA_WRITE_WITH_IMM) {
        SR_CHECK_EQ(wait_wc(&f.h, f.pr.rcq[1], 1, wc, 1000000), 1);
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
        if (r->expect_pieces) {
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
    fix_close(&f);
}

static void test_write_only(void)
{
    static const struct ws_row rows[] = {
        {"RC WRITE, trains: WRITE ONLY pieces", SR_QPT_RC, SR_WR_RDMA_WRITE, true, -1, true, 4,
         256},
        {"... the second piece lost: the same pieces again", SR_QPT_RC, SR_WR_RDMA_WRITE, true, 1,
         true, 4, 256},
        {"... 256 pieces, one ACK request", SR_QPT_RC, SR_WR_RDMA_WRITE, true, -1, true, 256, 256},
        {"RC WRITE of 300 packets, trains: FIRST/MIDDLE/LAST, ACKs every 256", SR_QPT_RC,
         SR_WR_RDMA_WRITE, true, -1, false, 300, 256},
        {"RC WRITE of 40 packets without trains: ACKs every 32", SR_QPT_RC, SR_WR_RDMA_WRITE, false,
         -1, false, 40, 32},
        {"RC WRITE with immediate, trains: FIRST/MIDDLE/LAST, ACKs every 256", SR_QPT_RC,
         SR_WR_RDMA_WRITE_WITH_IMM, true, -1, false, 40, 256},
        {"UC WRITE, trains: FIRST/MIDDLE/LAST, no ACK requests", SR_QPT_UC, SR_WR_RDMA_WRITE, true,
         -1, false, 4, 0},
        /* timeout 8 (1 ms): 256 packets and a held ACK might not fit */
        {"timeout 8, trains: 32 pieces, one ACK request", SR_QPT_RC, SR_WR_RDMA_WRITE, true, -1,
         true, 32, 32, .timeout = 8},
        {"timeout 8, trains: 40 packets whole, ACKs every 32", SR_QPT_RC, SR_WR_RDMA_WRITE, true,
         -1, false, 40, 32, .timeout = 8},
        {"window 16, trains: 8 pieces", SR_QPT_RC, SR_WR_RDMA_WRITE, true, -1, true, 8, 8,
         .window = 16},
        {"window 16, trains: 20 packets whole, ACKs every 8", SR_QPT_RC, SR_WR_RDMA_WRITE, true, -1,
         false, 20, 8, .window = 16},
    };
    for (size_t i = 0; i < SR_ARRAY_SIZE(rows); i++)
        write_shape(&rows[i]);
}

int main(void)
{
    SR_RUN(test_ops);
    SR_RUN(test_stream);
    SR_RUN(test_ops_held_acks);
    SR_RUN(test_ops_trains);
    SR_RUN(test_fence);
    SR_RUN(test_max_rd_atomic);
    SR_RUN(test_read_fence);
    SR_RUN(test_write_only);
    return SR_TEST_RESULT();
}

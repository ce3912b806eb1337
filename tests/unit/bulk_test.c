/* bulk_test.c: same-host bulk data by reference (src/engine/bulk.c,
 * sr_bulk.h) between two engines in one process. The wire is a queue;
 * a packet the requester marks as a reference goes to sr_engine_rx_bulk
 * (as the shared-memory driver hands it) and the copy hook copies within
 * the process, counting what it was asked. Each region sits between
 * guard bytes that must never change.
 *
 * What must hold: data intact for WRITE, WRITE with immediate and SEND
 * (scattered over several SGEs on both sides); one packet per message;
 * the responder's checks before any copy (R_Key, bounds, access, a
 * deregistered region, the receive WQE's length) answered with the IBA
 * NAK and completion status and no copy at all; a failed copy a Remote
 * Operational Error, never success; READ by push (the responder writes
 * the requester's sink after its R_Key check), refused before any push; a reference that arrives as
 * an ordinary packet (from the wire) never followed; a malformed reference dropped; a duplicate
 * re-acknowledged, not copied again; messages below the threshold sent as packets. */
#include "sr_bulk.h"
#include "sr_engine.h"
#include "sr_test.h"

#include <stdlib.h>
#include <string.h>

enum {
    MEM = 2 << 20,
    GUARD = 4096,
    QCAP = 8192,
    PKT_MAX = 4096 + 128,
    PEER_TOKEN = 4242, /* what the "driver" says the reference came from */
    THRESHOLD = 32768,
    MTU = 1024,
};

struct qpkt {
    int from;
    bool bulk;
    uint32_t len;
    uint8_t data[PKT_MAX];
};

struct t {
    struct sr_engine *eng[2];
    int id[2];
    struct qpkt *q;
    uint32_t qh, qn;
    uint64_t now;
    /* the fake driver */
    bool refs_as_packets; /* deliver references through sr_engine_rx (a wire) */
    bool fail_copy;
    int drop_acks; /* ACKs from node 1 still to drop */
    void (*mutate)(struct qpkt *p);
    uint32_t copies, pushes;
    uint64_t copied;
    uint32_t data_pkts; /* request packets node 0 sent */
    /* per node */
    uint8_t *buf[2]; /* GUARD + MEM + GUARD */
    uint8_t *mem[2];
    struct sr_pd *pd[2];
    struct sr_mr *mr[2];
    struct sr_cq *cq[2];
    struct sr_qp *qp[2];
};

static struct t T;

static int t_tx(void *ctx, const struct sr_tx_pkt *p)
{
    int from = *(int *)ctx;
    if (T.qn == QCAP)
        return -1;
    uint32_t len = p->hdr_len + p->payload_len + p->pad_len + SR_ICRC_LEN;
    if (len > PKT_MAX)
        return -1;
    struct qpkt *q = &T.q[(T.qh + T.qn) % QCAP];
    q->from = from;
    q->bulk = p->bulk;
    memcpy(q->data, p->hdr, p->hdr_len);
    uint32_t n = p->hdr_len;
    for (uint32_t i = 0; i < p->iov_cnt; i++) {
        memcpy(q->data + n, p->iov[i].base, p->iov[i].len);
        n += p->iov[i].len;
    }
    memset(q->data + n, 0, p->pad_len + SR_ICRC_LEN);
    q->len = len;
    uint8_t op = q->data[0] & 0x1f;
    if (from == 1 && op == SR_OP_ACK && T.drop_acks > 0) {
        T.drop_acks--;
        return 0;
    }
    if (from == 0)
        T.data_pkts++;
    if (T.mutate && p->bulk)
        T.mutate(q);
    T.qn++;
    return 0;
}

static uint32_t t_bulk_to(void *ctx, const uint8_t *dgid)
{
    (void)ctx, (void)dgid;
    return THRESHOLD;
}

/* process_vm_readv within the process: the remote pieces are ours too */
static int t_copy(void *ctx, uint64_t peer, bool to_peer, const struct sr_bulk_seg *local,
                  uint32_t local_cnt, const struct sr_bulk_seg *remote, uint32_t remote_cnt)
{
    (void)ctx;
    SR_CHECK_EQ(peer, PEER_TOKEN);
    T.copies++;
    T.pushes += to_peer;
    if (T.fail_copy)
        return SR_ERR_INVAL;
    uint32_t li = 0, ri = 0;
    uint64_t lo = 0, ro = 0;
    while (li < local_cnt && ri < remote_cnt) {
        uint64_t n =
            local[li].len - lo < remote[ri].len - ro ? local[li].len - lo : remote[ri].len - ro;
        uint8_t *l = (uint8_t *)(uintptr_t)local[li].addr + lo;
        uint8_t *r = (uint8_t *)(uintptr_t)remote[ri].addr + ro;
        if (to_peer) /* process_vm_writev: a READ's push into the requester's sink */
            memcpy(r, l, n);
        else
            memcpy(l, r, n);
        T.copied += n;
        lo += n;
        ro += n;
        if (lo == local[li].len)
            li++, lo = 0;
        if (ro == remote[ri].len)
            ri++, ro = 0;
    }
    return li == local_cnt && ri == remote_cnt ? 0 : SR_ERR_INVAL;
}

static void gid_of(uint8_t g[16], int node)
{
    memset(g, 0, 16);
    g[10] = g[11] = 0xff;
    g[12] = 127;
    g[15] = (uint8_t)(node + 1);
}

/* Delivers packets and fires timers, at most steps times. */
static void run(int steps)
{
    for (int s = 0; s < steps; s++) {
        if (!T.qn) {
            uint64_t d = UINT64_MAX;
            for (int i = 0; i < 2; i++) {
                uint64_t x = sr_engine_next_deadline(T.eng[i]);
                d = x < d ? x : d;
            }
            if (d == UINT64_MAX)
                return;
            T.now = d > T.now ? d : T.now;
            for (int i = 0; i < 2; i++)
                if (sr_engine_next_deadline(T.eng[i]) <= T.now)
                    sr_engine_advance(T.eng[i], T.now);
            continue;
        }
        struct qpkt *p = &T.q[T.qh];
        T.qh = (T.qh + 1) % QCAP;
        T.qn--;
        T.now += 1000;
        uint8_t src[16];
        gid_of(src, p->from);
        struct sr_engine *to = T.eng[1 - p->from];
        if (p->bulk && !T.refs_as_packets)
            sr_engine_rx_bulk(to, p->data, p->len, src, PEER_TOKEN, T.now);
        else
            sr_engine_rx(to, p->data, p->len, src, T.now);
    }
}

static void setup(uint8_t retry_cnt)
{
    memset(&T, 0, sizeof(T));
    T.q = calloc(QCAP, sizeof(*T.q));
    for (int i = 0; i < 2; i++) {
        T.id[i] = i;
        struct sr_engine_cfg c = {.ops = {.tx = t_tx},
                                  .ops_ctx = &T.id[i],
                                  .bulk_to = t_bulk_to,
                                  .bulk_copy = t_copy,
                                  .bulk_read = true};
        gid_of(c.gid, i);
        SR_CHECK_EQ(sr_engine_create(&c, &T.eng[i]), 0);
        T.buf[i] = malloc(MEM + 2 * GUARD);
        memset(T.buf[i], 0xa5, MEM + 2 * GUARD);
        T.mem[i] = T.buf[i] + GUARD;
        memset(T.mem[i], 0, MEM);
        SR_CHECK_EQ(sr_pd_alloc(T.eng[i], &T.pd[i]), 0);
        SR_CHECK_EQ(sr_mr_reg(T.pd[i], T.mem[i], MEM, (uint64_t)(uintptr_t)T.mem[i], 15, &T.mr[i]),
                    0);
        SR_CHECK_EQ(sr_cq_create(T.eng[i], 256, &T.cq[i]), 0);
        struct sr_qp_init_attr ia = {
            .qp_type = SR_QPT_RC,
            .send_cq = T.cq[i],
            .recv_cq = T.cq[i],
            .cap = {.max_send_wr = 64, .max_recv_wr = 64, .max_send_sge = 4, .max_recv_sge = 4}};
        SR_CHECK_EQ(sr_qp_create(T.pd[i], &ia, &T.qp[i]), 0);
    }
    for (int i = 0; i < 2; i++) {
        struct sr_qp_attr a = {.qp_state = SR_QPS_INIT, .port_num = 1, .qp_access_flags = 15};
        SR_CHECK_EQ(sr_qp_modify(T.qp[i], &a,
                                 SR_QP_STATE | SR_QP_PKEY_INDEX | SR_QP_PORT | SR_QP_ACCESS_FLAGS,
                                 0),
                    0);
        a.qp_state = SR_QPS_RTR;
        a.path_mtu = MTU;
        a.dest_qp_num = sr_qp_num(T.qp[1 - i]);
        a.rq_psn = 0xfffffe; /* across the 2^24 wrap */
        a.max_dest_rd_atomic = 4;
        a.min_rnr_timer = 1;
        gid_of(a.dgid, 1 - i);
        SR_CHECK_EQ(sr_qp_modify(T.qp[i], &a,
                                 SR_QP_STATE | SR_QP_AV | SR_QP_PATH_MTU | SR_QP_DEST_QPN |
                                     SR_QP_RQ_PSN | SR_QP_MAX_DEST_RD_ATOMIC | SR_QP_MIN_RNR_TIMER,
                                 0),
                    0);
        a.qp_state = SR_QPS_RTS;
        a.sq_psn = 0xfffffe;
        a.timeout = 8;
        a.retry_cnt = retry_cnt;
        a.max_rd_atomic = 4;
        SR_CHECK_EQ(sr_qp_modify(T.qp[i], &a,
                                 SR_QP_STATE | SR_QP_SQ_PSN | SR_QP_TIMEOUT | SR_QP_RETRY_CNT |
                                     SR_QP_RNR_RETRY | SR_QP_MAX_QP_RD_ATOMIC,
                                 0),
                    0);
    }
}

static void guards_intact(void)
{
    for (int i = 0; i < 2; i++)
        for (uint32_t k = 0; k < GUARD; k++)
            if (T.buf[i][k] != 0xa5 || T.buf[i][GUARD + MEM + k] != 0xa5) {
                SR_CHECK(!"a guard byte changed");
                return;
            }
}

static void teardown(void)
{
    guards_intact();
    for (int i = 0; i < 2; i++) {
        if (T.mr[i])
            sr_mr_dereg(T.mr[i]);
        sr_engine_destroy(T.eng[i]);
        free(T.buf[i]);
    }
    free(T.q);
}

static void fill(uint8_t *p, size_t n, unsigned seed)
{
    uint32_t x = seed * 2654435761u + 7;
    for (size_t i = 0; i < n; i++) {
        x = x * 1103515245u + 12345u;
        p[i] = (uint8_t)(x >> 16);
    }
}

static bool all_zero(const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i])
            return false;
    return true;
}

/* The next completion on node's CQ, after running the wire. */
static bool poll1(int node, struct sr_wc *wc)
{
    for (int i = 0; i < 50; i++) {
        if (sr_cq_poll(T.cq[node], 1, wc) == 1)
            return true;
        run(2000);
    }
    return false;
}

/* A WRITE of len bytes from node 0's two SGEs to node 1 at off. */
static struct sr_send_wr write_wr(struct sr_sge sg[2], uint32_t len, uint64_t off, uint32_t rkey)
{
    uint32_t a = len / 3;
    sg[0] = (struct sr_sge){
        .addr = (uint64_t)(uintptr_t)T.mem[0] + 100, .length = a, .lkey = sr_mr_lkey(T.mr[0])};
    sg[1] = (struct sr_sge){.addr = (uint64_t)(uintptr_t)T.mem[0] + 100 + a + 4096,
                            .length = len - a,
                            .lkey = sr_mr_lkey(T.mr[0])};
    return (struct sr_send_wr){.wr_id = 7,
                               .sg_list = sg,
                               .num_sge = 2,
                               .opcode = SR_WR_RDMA_WRITE,
                               .send_flags = SR_SEND_SIGNALED,
                               .remote_addr = (uint64_t)(uintptr_t)T.mem[1] + off,
                               .rkey = rkey};
}

static void write_intact(void)
{
    setup(7);
    const uint32_t len = 1 << 20;
    fill(T.mem[0], MEM, 1);
    struct sr_sge sg[2];
    struct sr_send_wr wr = write_wr(sg, len, 333, sr_mr_rkey(T.mr[1]));
    SR_CHECK_EQ(sr_qp_post_send(T.qp[0], &wr, T.now), 0);
    struct sr_wc wc;
    SR_CHECK(poll1(0, &wc));
    SR_CHECK_EQ(wc.status, SR_WC_SUCCESS);
    SR_CHECK_EQ(wc.opcode, SR_WC_RDMA_WRITE);
    SR_CHECK_MEM(T.mem[1] + 333, (uint8_t *)(uintptr_t)sg[0].addr, sg[0].length);
    SR_CHECK_MEM(T.mem[1] + 333 + sg[0].length, (uint8_t *)(uintptr_t)sg[1].addr, sg[1].length);
    SR_CHECK(all_zero(T.mem[1], 333));
    SR_CHECK(all_zero(T.mem[1] + 333 + len, MEM - 333 - len));
    SR_CHECK_EQ(T.data_pkts, 1); /* one packet, not 1024 */
    SR_CHECK_EQ(T.copies, 1);
    SR_CHECK_EQ(T.copied, len);
    struct sr_bulk_stats bs;
    sr_engine_bulk_stats(T.eng[1], &bs);
    SR_CHECK_EQ(bs.rx_msgs, 1);
    SR_CHECK_EQ(bs.rx_bytes, len);
    sr_engine_bulk_stats(T.eng[0], &bs);
    SR_CHECK_EQ(bs.tx_msgs, 1);
    teardown();
}

/* READ by push: the responder checks its R_Key and writes the sink. */
static void read_intact(void)
{
    setup(7);
    const uint32_t len = 1 << 20;
    fill(T.mem[1], MEM, 8);
    struct sr_sge sg[2];
    struct sr_send_wr wr = write_wr(sg, len, 777, sr_mr_rkey(T.mr[1]));
    wr.opcode = SR_WR_RDMA_READ;
    SR_CHECK_EQ(sr_qp_post_send(T.qp[0], &wr, T.now), 0);
    struct sr_wc wc;
    SR_CHECK(poll1(0, &wc));
    SR_CHECK_EQ(wc.status, SR_WC_SUCCESS);
    SR_CHECK_EQ(wc.opcode, SR_WC_RDMA_READ);
    SR_CHECK_MEM((uint8_t *)(uintptr_t)sg[0].addr, T.mem[1] + 777, sg[0].length);
    SR_CHECK_MEM((uint8_t *)(uintptr_t)sg[1].addr, T.mem[1] + 777 + sg[0].length, sg[1].length);
    SR_CHECK(all_zero(T.mem[0], 100)); /* before the sink, and in the gap between its SGEs */
    SR_CHECK(all_zero(T.mem[0] + 100 + sg[0].length, 4096));
    SR_CHECK(all_zero(T.mem[0] + 100 + len + 4096, MEM - 100 - len - 4096));
    SR_CHECK_EQ(T.data_pkts, 1);
    SR_CHECK_EQ(T.pushes, 1);
    teardown();
}

/* A READ the responder refuses: nothing pushed. */
static void read_refused(void)
{
    setup(0);
    fill(T.mem[1], MEM, 9);
    struct sr_sge sg[2];
    struct sr_send_wr wr = write_wr(sg, 65536, MEM - 65536 + 1, sr_mr_rkey(T.mr[1]));
    wr.opcode = SR_WR_RDMA_READ;
    SR_CHECK_EQ(sr_qp_post_send(T.qp[0], &wr, T.now), 0);
    struct sr_wc wc;
    SR_CHECK(poll1(0, &wc));
    SR_CHECK_EQ(wc.status, SR_WC_REM_ACCESS_ERR);
    SR_CHECK_EQ(T.copies, 0);
    SR_CHECK(all_zero(T.mem[0], MEM));
    teardown();
    /* a READ request carrying a reference, from the wire: the codec
     * refuses a READ request with payload, so it is dropped, every time */
    setup(0);
    T.refs_as_packets = true;
    wr = write_wr(sg, 65536, 0, sr_mr_rkey(T.mr[1]));
    wr.opcode = SR_WR_RDMA_READ;
    SR_CHECK_EQ(sr_qp_post_send(T.qp[0], &wr, T.now), 0);
    SR_CHECK(poll1(0, &wc));
    SR_CHECK_EQ(wc.status, SR_WC_RETRY_EXC_ERR);
    SR_CHECK_EQ(T.copies, 0);
    teardown();
    /* the push fails (the requester's sink is gone): no response, and the
     * READ fails once its retries run out, never a success */
    setup(0);
    T.fail_copy = true;
    wr = write_wr(sg, 65536, 0, sr_mr_rkey(T.mr[1]));
    wr.opcode = SR_WR_RDMA_READ;
    SR_CHECK_EQ(sr_qp_post_send(T.qp[0], &wr, T.now), 0);
    SR_CHECK(poll1(0, &wc));
    SR_CHECK_EQ(wc.status, SR_WC_RETRY_EXC_ERR);
    SR_CHECK(T.copies >= 1);
    teardown();
}

static void post_recv3(uint32_t total, uint64_t id)
{
    uint32_t a = total / 4, b = total / 2;
    struct sr_sge rs[3] = {
        {.addr = (uint64_t)(uintptr_t)T.mem[1] + 64, .length = a, .lkey = sr_mr_lkey(T.mr[1])},
        {.addr = (uint64_t)(uintptr_t)T.mem[1] + 64 + a + 512,
         .length = b,
         .lkey = sr_mr_lkey(T.mr[1])},
        {.addr = (uint64_t)(uintptr_t)T.mem[1] + 64 + a + b + 1024,
         .length = total - a - b,
         .lkey = sr_mr_lkey(T.mr[1])}};
    struct sr_recv_wr rw = {.wr_id = id, .sg_list = rs, .num_sge = 3};
    SR_CHECK_EQ(sr_qp_post_recv(T.qp[1], &rw), 0);
}

static void send_intact(void)
{
    setup(7);
    const uint32_t len = 200000, rlen = 262144;
    fill(T.mem[0], MEM, 2);
    post_recv3(rlen, 99);
    struct sr_sge sg[2];
    struct sr_send_wr wr = write_wr(sg, len, 0, 0);
    wr.opcode = SR_WR_SEND_WITH_IMM;
    wr.imm = 0x01020304;
    SR_CHECK_EQ(sr_qp_post_send(T.qp[0], &wr, T.now), 0);
    struct sr_wc wc;
    SR_CHECK(poll1(1, &wc));
    SR_CHECK_EQ(wc.status, SR_WC_SUCCESS);
    SR_CHECK_EQ(wc.opcode, SR_WC_RECV);
    SR_CHECK_EQ(wc.byte_len, len);
    SR_CHECK_EQ(wc.imm, 0x01020304);
    SR_CHECK(wc.wc_flags & SR_WC_WITH_IMM);
    SR_CHECK(poll1(0, &wc));
    SR_CHECK_EQ(wc.status, SR_WC_SUCCESS);
    /* the message, rebuilt from the three receive SGEs, is the source */
    uint8_t *want = malloc(len), *got = malloc(len);
    memcpy(want, (uint8_t *)(uintptr_t)sg[0].addr, sg[0].length);
    memcpy(want + sg[0].length, (uint8_t *)(uintptr_t)sg[1].addr, sg[1].length);
    uint32_t a = rlen / 4, b = rlen / 2;
    memcpy(got, T.mem[1] + 64, a);
    memcpy(got + a, T.mem[1] + 64 + a + 512, b);
    memcpy(got + a + b, T.mem[1] + 64 + a + b + 1024, len - a - b);
    SR_CHECK_MEM(got, want, len);
    /* nothing past the message in the last SGE, nothing in the gaps */
    SR_CHECK(all_zero(T.mem[1] + 64 + a + b + 1024 + (len - a - b), rlen - len));
    SR_CHECK(all_zero(T.mem[1] + 64 + a, 512));
    SR_CHECK_EQ(T.data_pkts, 1);
    SR_CHECK_EQ(T.copies, 1);
    free(want);
    free(got);
    teardown();
}

static void write_imm(void)
{
    setup(7);
    const uint32_t len = 65536;
    fill(T.mem[0], MEM, 3);
    struct sr_recv_wr rw = {.wr_id = 5};
    SR_CHECK_EQ(sr_qp_post_recv(T.qp[1], &rw), 0);
    struct sr_sge sg[2];
    struct sr_send_wr wr = write_wr(sg, len, 4096, sr_mr_rkey(T.mr[1]));
    wr.opcode = SR_WR_RDMA_WRITE_WITH_IMM;
    wr.imm = 0xabcdef01;
    SR_CHECK_EQ(sr_qp_post_send(T.qp[0], &wr, T.now), 0);
    struct sr_wc wc;
    SR_CHECK(poll1(1, &wc));
    SR_CHECK_EQ(wc.status, SR_WC_SUCCESS);
    SR_CHECK_EQ(wc.opcode, SR_WC_RECV_RDMA_WITH_IMM);
    SR_CHECK_EQ(wc.byte_len, len);
    SR_CHECK_EQ(wc.imm, 0xabcdef01);
    SR_CHECK_MEM(T.mem[1] + 4096, (uint8_t *)(uintptr_t)sg[0].addr, sg[0].length);
    SR_CHECK_MEM(T.mem[1] + 4096 + sg[0].length, (uint8_t *)(uintptr_t)sg[1].addr, sg[1].length);
    SR_CHECK_EQ(T.copies, 1);
    teardown();
}

/* A WRITE the responder must refuse before copying anything. */
struct refuse_row {
    const char *name;
    int how; /* 0 bad R_Key, 1 one byte past the region, 2 region deregistered,
                3 region without remote write, 4 from the wire, 5 copy fails */
    enum sr_wc_status want;
    bool copy_tried;
};

static void refused(const struct refuse_row *r)
{
    sr_test_ctx = r->name;
    setup(7);
    const uint32_t len = 131072;
    fill(T.mem[0], MEM, 4);
    uint32_t rkey = sr_mr_rkey(T.mr[1]);
    uint64_t off = 0;
    if (r->how == 0)
        rkey ^= 0x40;
    if (r->how == 1)
        off = MEM - len + 1;
    if (r->how == 2) {
        SR_CHECK_EQ(sr_mr_dereg(T.mr[1]), 0);
        T.mr[1] = NULL;
    }
    if (r->how == 3) {
        SR_CHECK_EQ(sr_mr_dereg(T.mr[1]), 0);
        SR_CHECK_EQ(sr_mr_reg(T.pd[1], T.mem[1], MEM, (uint64_t)(uintptr_t)T.mem[1],
                              SR_ACCESS_LOCAL_WRITE | SR_ACCESS_REMOTE_READ, &T.mr[1]),
                    0);
        rkey = sr_mr_rkey(T.mr[1]);
    }
    T.refs_as_packets = r->how == 4;
    T.fail_copy = r->how == 5;
    struct sr_sge sg[2];
    struct sr_send_wr wr = write_wr(sg, len, off, rkey);
    SR_CHECK_EQ(sr_qp_post_send(T.qp[0], &wr, T.now), 0);
    struct sr_wc wc;
    SR_CHECK(poll1(0, &wc));
    SR_CHECK_EQ(wc.status, r->want);
    SR_CHECK_EQ(T.copies, r->copy_tried ? 1 : 0);
    if (r->how != 5)
        SR_CHECK(all_zero(T.mem[1], MEM)); /* not a byte written */
    struct sr_qp_attr qa;
    struct sr_qp_init_attr qi;
    SR_CHECK_EQ(sr_qp_query(T.qp[1], &qa, &qi), 0);
    SR_CHECK_EQ(qa.qp_state, SR_QPS_ERR); /* IBA 9.9.3.1: the responder's QP too */
    teardown();
}

static void refusals(void)
{
    static const struct refuse_row rows[] = {
        {"bad R_Key", 0, SR_WC_REM_ACCESS_ERR, false},
        {"one byte past the region", 1, SR_WC_REM_ACCESS_ERR, false},
        {"region deregistered", 2, SR_WC_REM_ACCESS_ERR, false},
        {"region without remote write", 3, SR_WC_REM_ACCESS_ERR, false},
        /* WRITE ONLY whose payload is not its DMA length (IBA 9.7.5.1) */
        {"reference arriving from the wire", 4, SR_WC_REM_INV_REQ_ERR, false},
        {"copy fails (peer gone)", 5, SR_WC_REM_OP_ERR, true},
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
        refused(&rows[i]);
}

static void small_recv(void)
{
    setup(7);
    fill(T.mem[0], MEM, 5);
    post_recv3(65536, 1);
    struct sr_sge sg[2];
    struct sr_send_wr wr = write_wr(sg, 131072, 0, 0);
    wr.opcode = SR_WR_SEND;
    SR_CHECK_EQ(sr_qp_post_send(T.qp[0], &wr, T.now), 0);
    struct sr_wc wc;
    SR_CHECK(poll1(1, &wc));
    SR_CHECK_EQ(wc.status, SR_WC_LOC_LEN_ERR);
    SR_CHECK(poll1(0, &wc));
    SR_CHECK_EQ(wc.status, SR_WC_REM_INV_REQ_ERR);
    SR_CHECK_EQ(T.copies, 0);
    SR_CHECK(all_zero(T.mem[1], MEM));
    teardown();
}

static void send_copy_fails(void)
{
    setup(7);
    post_recv3(262144, 1);
    T.fail_copy = true;
    struct sr_sge sg[2];
    struct sr_send_wr wr = write_wr(sg, 100000, 0, 0);
    wr.opcode = SR_WR_SEND;
    SR_CHECK_EQ(sr_qp_post_send(T.qp[0], &wr, T.now), 0);
    struct sr_wc wc;
    SR_CHECK(poll1(1, &wc));
    SR_CHECK(wc.status != SR_WC_SUCCESS); /* never a partial message as success */
    SR_CHECK(poll1(0, &wc));
    SR_CHECK_EQ(wc.status, SR_WC_REM_OP_ERR);
    teardown();
}

/* The reference's first piece one byte longer than the RETH says. */
static void grow_piece(struct qpkt *p)
{
    uint32_t l;
    uint32_t at = SR_BTH_LEN + SR_RETH_LEN + 8;
    memcpy(&l, p->data + at, 4);
    l++;
    memcpy(p->data + at, &l, 4);
}

static void malformed_ref(void)
{
    setup(0);
    T.mutate = grow_piece;
    struct sr_sge sg[2];
    struct sr_send_wr wr = write_wr(sg, 65536, 0, sr_mr_rkey(T.mr[1]));
    SR_CHECK_EQ(sr_qp_post_send(T.qp[0], &wr, T.now), 0);
    struct sr_wc wc;
    SR_CHECK(poll1(0, &wc));
    SR_CHECK_EQ(wc.status, SR_WC_RETRY_EXC_ERR); /* dropped, every time */
    SR_CHECK_EQ(T.copies, 0);
    struct sr_bulk_stats bs;
    sr_engine_bulk_stats(T.eng[1], &bs);
    SR_CHECK(bs.rx_refused >= 1);
    teardown();
}

static void duplicate_not_copied(void)
{
    setup(7);
    fill(T.mem[0], MEM, 6);
    T.drop_acks = 1;
    struct sr_sge sg[2];
    struct sr_send_wr wr = write_wr(sg, 65536, 0, sr_mr_rkey(T.mr[1]));
    SR_CHECK_EQ(sr_qp_post_send(T.qp[0], &wr, T.now), 0);
    struct sr_wc wc;
    SR_CHECK(poll1(0, &wc));
    SR_CHECK_EQ(wc.status, SR_WC_SUCCESS);
    SR_CHECK(T.data_pkts >= 2); /* sent again after the lost ACK */
    SR_CHECK_EQ(T.copies, 1);   /* IBA 9.7.5.1.4: a duplicate WRITE is only re-acknowledged */
    SR_CHECK_MEM(T.mem[1], (uint8_t *)(uintptr_t)sg[0].addr, sg[0].length);
    teardown();
}

static void below_threshold(void)
{
    setup(7);
    fill(T.mem[0], MEM, 7);
    struct sr_sge sg[2];
    struct sr_send_wr wr = write_wr(sg, THRESHOLD - 1, 0, sr_mr_rkey(T.mr[1]));
    SR_CHECK_EQ(sr_qp_post_send(T.qp[0], &wr, T.now), 0);
    struct sr_wc wc;
    SR_CHECK(poll1(0, &wc));
    SR_CHECK_EQ(wc.status, SR_WC_SUCCESS);
    SR_CHECK_EQ(T.copies, 0);
    SR_CHECK_EQ(T.data_pkts, (THRESHOLD - 1 + MTU - 1) / MTU);
    SR_CHECK_MEM(T.mem[1], (uint8_t *)(uintptr_t)sg[0].addr, sg[0].length);
    teardown();
}

int main(void)
{
    SR_RUN(write_intact);
    SR_RUN(send_intact);
    SR_RUN(write_imm);
    SR_RUN(read_intact);
    SR_RUN(read_refused);
    SR_RUN(refusals);
    SR_RUN(small_recv);
    SR_RUN(send_copy_fails);
    SR_RUN(malformed_ref);
    SR_RUN(duplicate_not_copied);
    SR_RUN(below_threshold);
    return SR_TEST_RESULT();
}

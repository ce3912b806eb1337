/* engine_rx_fuzz.c: libFuzzer harness for the engine's receive path: a
 * sequence of (possibly forged) packets against live RC, UC and UD QPs
 * with work posted in both directions.
 *
 * Input: records of [ctl:1][len:2 LE][bytes:len]. ctl bits 0-1 pick the
 * target QP (its QPN is written into the BTH so packets get past the QP
 * lookup), bit 2 makes the packet come from a stranger's address, bits 3-5
 * advance time (0..7 steps of 1 ms, firing retransmission and RNR timers),
 * bit 6 keeps the BTH QPN as fuzzed.
 *
 * Properties beyond "no crash, no sanitizer report": memory around the
 * registered region (guard bytes on both sides) never changes, and every
 * completion carries a valid status. */
#include "sr_engine.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

enum { REGION = 16384, GUARD = 4096 };

static int discard_tx(void *ctx, const struct sr_tx_pkt *pkt)
{
    /* Touch every byte the engine hands out, so ASan checks the gather. */
    volatile uint8_t sink = 0;
    for (uint32_t i = 0; i < pkt->hdr_len; i++)
        sink ^= pkt->hdr[i];
    for (uint32_t i = 0; i < pkt->iov_cnt; i++)
        for (uint32_t j = 0; j < pkt->iov[i].len; j++)
            sink ^= ((const uint8_t *)pkt->iov[i].base)[j];
    (void)ctx;
    (void)sink;
    return 0;
}

static const uint8_t peer_gid[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 2};
static const uint8_t stranger_gid[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 9};

static struct sr_qp *make_qp(struct sr_pd *pd, struct sr_cq *cq, enum sr_qp_type t)
{
    struct sr_qp_init_attr ia = {.qp_type = t,
                                 .send_cq = cq,
                                 .recv_cq = cq,
                                 .cap = {.max_send_wr = 16,
                                         .max_recv_wr = 16,
                                         .max_send_sge = 2,
                                         .max_recv_sge = 2,
                                         .max_inline_data = 64}};
    struct sr_qp *qp;
    if (sr_qp_create(pd, &ia, &qp))
        abort();
    struct sr_qp_attr a = {
        .qp_state = SR_QPS_INIT, .port_num = 1, .qkey = 0x11111111, .qp_access_flags = 15};
    uint32_t m = SR_QP_STATE | SR_QP_PKEY_INDEX | SR_QP_PORT |
                 (t == SR_QPT_UD ? SR_QP_QKEY : SR_QP_ACCESS_FLAGS);
    if (sr_qp_modify(qp, &a, m, 0))
        abort();
    a.qp_state = SR_QPS_RTR;
    a.path_mtu = 256;
    a.dest_qp_num = 0x77;
    a.rq_psn = 0x100;
    a.max_dest_rd_atomic = 4;
    a.min_rnr_timer = 1;
    memcpy(a.dgid, peer_gid, 16);
    m = SR_QP_STATE;
    if (t == SR_QPT_RC)
        m |= SR_QP_AV | SR_QP_PATH_MTU | SR_QP_DEST_QPN | SR_QP_RQ_PSN | SR_QP_MAX_DEST_RD_ATOMIC |
             SR_QP_MIN_RNR_TIMER;
    else if (t == SR_QPT_UC)
        m |= SR_QP_AV | SR_QP_PATH_MTU | SR_QP_DEST_QPN | SR_QP_RQ_PSN;
    if (sr_qp_modify(qp, &a, m, 0))
        abort();
    a.qp_state = SR_QPS_RTS;
    a.sq_psn = 0x200;
    a.timeout = 8;
    a.retry_cnt = 2;
    a.rnr_retry = 2;
    a.max_rd_atomic = 4;
    m = SR_QP_STATE | SR_QP_SQ_PSN;
    if (t == SR_QPT_RC)
        m |= SR_QP_TIMEOUT | SR_QP_RETRY_CNT | SR_QP_RNR_RETRY | SR_QP_MAX_QP_RD_ATOMIC;
    if (sr_qp_modify(qp, &a, m, 0))
        abort();
    return qp;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static uint8_t mem[GUARD + REGION + GUARD];
    memset(mem, 0xa5, sizeof(mem));
    uint8_t *region = mem + GUARD;
    memset(region, 0, REGION);

    struct sr_engine_cfg cfg = {
        .ops = {.tx = discard_tx}, .max_qp = 8, .max_mr = 8, .window_pkts = 64, .sack = true};
    cfg.gid[10] = cfg.gid[11] = 0xff;
    cfg.gid[12] = 10;
    cfg.gid[15] = 1;
    struct sr_engine *e;
    if (sr_engine_create(&cfg, &e))
        abort();
    struct sr_pd *pd;
    struct sr_cq *cq;
    struct sr_mr *mr;
    if (sr_pd_alloc(e, &pd) || sr_cq_create(e, 64, &cq) ||
        sr_mr_reg(pd, region, REGION, 0x10000, 15, &mr))
        abort();
    struct sr_qp *qps[3] = {make_qp(pd, cq, SR_QPT_RC), make_qp(pd, cq, SR_QPT_UC),
                            make_qp(pd, cq, SR_QPT_UD)};
    /* Receives on every QP; outstanding requests on the RC QP, so that
     * forged ACKs, NAKs and responses meet a completer with state. */
    for (int q = 0; q < 3; q++) {
        for (int i = 0; i < 4; i++) {
            struct sr_sge s = {0x10000 + (uint64_t)i * 2048, 2048, sr_mr_lkey(mr)};
            struct sr_recv_wr r = {.wr_id = (uint64_t)i, .sg_list = &s, .num_sge = 1};
            sr_qp_post_recv(qps[q], &r);
        }
    }
    struct sr_sge s = {0x10000 + 8192, 1000, sr_mr_lkey(mr)};
    struct sr_send_wr ops[] = {
        {.wr_id = 1,
         .sg_list = &s,
         .num_sge = 1,
         .opcode = SR_WR_RDMA_WRITE,
         .send_flags = SR_SEND_SIGNALED,
         .remote_addr = 0x5000,
         .rkey = 0x99},
        {.wr_id = 2,
         .sg_list = &s,
         .num_sge = 1,
         .opcode = SR_WR_RDMA_READ,
         .send_flags = SR_SEND_SIGNALED,
         .remote_addr = 0x5000,
         .rkey = 0x99},
        {.wr_id = 3, .sg_list = &s, .num_sge = 1, .opcode = SR_WR_SEND},
    };
    struct sr_sge a8 = {0x10000 + 12288, 8, sr_mr_lkey(mr)};
    struct sr_send_wr atomic = {.wr_id = 4,
                                .sg_list = &a8,
                                .num_sge = 1,
                                .opcode = SR_WR_ATOMIC_FETCH_AND_ADD,
                                .send_flags = SR_SEND_SIGNALED,
                                .remote_addr = 0x6000,
                                .rkey = 0x99,
                                .compare_add = 1};
    uint64_t now = 1000;
    for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++)
        sr_qp_post_send(qps[0], &ops[i], now);
    sr_qp_post_send(qps[0], &atomic, now);

    uint8_t pkt[SR_MAX_HDR_LEN + 4096 + 8];
    size_t off = 0;
    while (off + 3 <= size) {
        uint8_t ctl = data[off];
        size_t len = (size_t)data[off + 1] | (size_t)data[off + 2] << 8;
        off += 3;
        if (len > size - off)
            len = size - off;
        if (len > sizeof(pkt))
            len = sizeof(pkt);
        memcpy(pkt, data + off, len);
        off += len;
        struct sr_qp *target = qps[(ctl & 3) % 3];
        if (len >= SR_BTH_LEN && !(ctl & 0x40)) {
            uint32_t qpn = sr_qp_num(target);
            pkt[5] = (uint8_t)(qpn >> 16);
            pkt[6] = (uint8_t)(qpn >> 8);
            pkt[7] = (uint8_t)qpn;
        }
        now += (uint64_t)((ctl >> 3) & 7) * 1000000;
        sr_engine_rx(e, pkt, len, (ctl & 4) ? stranger_gid : peer_gid, now);
        if (sr_engine_next_deadline(e) <= now)
            sr_engine_advance(e, now);
        struct sr_wc wc[16];
        int n;
        while ((n = sr_cq_poll(cq, 16, wc)) > 0)
            for (int k = 0; k < n; k++)
                if ((unsigned)wc[k].status > SR_WC_GENERAL_ERR)
                    abort();
    }
    /* Nothing outside the registered region was written. */
    for (size_t i = 0; i < GUARD; i++)
        if (mem[i] != 0xa5 || mem[GUARD + REGION + i] != 0xa5)
            abort();
    sr_engine_destroy(e);
    return 0;
}

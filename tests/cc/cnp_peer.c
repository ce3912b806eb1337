/* cnp_peer.c: one softrdma NIC (src/progress: the UDP driver, the engine,
 * the NIC thread) with DCQCN on, an RC QP connected to a peer that is not
 * softrdma (cnp_interop.py, which builds its packets and ICRCs from the
 * specification), and a report on stdout of what the QP's congestion
 * control saw. For the interoperability test of the RoCEv2 CNP.
 *   cnp_peer ADDR PEER_ADDR PEER_QPN
 * Prints "qpn N rate R" once ready, then a line whenever its counters
 * change: "rx_ce= cnps_sent= cnps_rcvd= rate= recv=". Exits when stdin
 * closes, or after 20 s. */
#include "sr_cc.h"
#include "sr_nic.h"

#include <arpa/inet.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static void die(const char *what, int err)
{
    fprintf(stderr, "cnp_peer: %s: %d\n", what, err);
    exit(1);
}

static void gid_of(const char *a, uint8_t gid[16])
{
    struct in_addr v4;
    if (inet_pton(AF_INET, a, &v4) != 1)
        die("not an IPv4 address", 0);
    memset(gid, 0, 16);
    gid[10] = gid[11] = 0xff;
    memcpy(gid + 12, &v4, 4);
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: cnp_peer ADDR PEER_ADDR PEER_QPN\n");
        return 2;
    }
    struct sr_cc_cfg cc;
    char why[160];
    sr_cc_cfg_default(&cc, 0);
    /* one CNP for every CE-marked packet (the test counts them); the
     * rate holds still after a cut for the test to read it (timers of
     * 10 s, a byte counter no test reaches) */
    if (sr_cc_parse("dcqcn,cnp_interval_us=0,rate_timer_us=10000000,alpha_timer_us=10000000,"
                    "byte_counter=1000000000000",
                    &cc, why, sizeof(why)))
        die(why, 0);
    struct sr_nic_cfg cfg = {0};
    gid_of(argv[1], cfg.udp.addr);
    cfg.udp.ecn = true;
    cfg.udp.no_gso = true; /* one datagram per frame in the loopback capture */
    cfg.no_shm = true;
    cfg.engine.cc = &cc;
    struct sr_nic *nic;
    int err = sr_nic_open(&cfg, &nic);
    if (err)
        die("sr_nic_open", err);
    struct sr_engine *e = sr_nic_engine(nic);
    static uint8_t buf[4096];
    struct sr_pd *pd = NULL;
    struct sr_cq *cq = NULL;
    struct sr_mr *mr = NULL;
    struct sr_qp *qp = NULL;
    sr_nic_lock(nic);
    if ((err = sr_pd_alloc(e, &pd)) || (err = sr_cq_create(e, 64, &cq)) ||
        (err = sr_mr_reg(pd, buf, sizeof(buf), (uintptr_t)buf, 15, &mr)))
        die("objects", err);
    struct sr_qp_init_attr ia = {
        .qp_type = SR_QPT_RC,
        .send_cq = cq,
        .recv_cq = cq,
        .cap = {.max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 1, .max_recv_sge = 1}};
    if ((err = sr_qp_create(pd, &ia, &qp)))
        die("sr_qp_create", err);
    uint64_t now = sr_nic_now();
    struct sr_qp_attr a = {.qp_state = SR_QPS_INIT, .port_num = 1, .qp_access_flags = 15};
    if ((err = sr_qp_modify(qp, &a,
                            SR_QP_STATE | SR_QP_PKEY_INDEX | SR_QP_PORT | SR_QP_ACCESS_FLAGS, now)))
        die("INIT", err);
    a.qp_state = SR_QPS_RTR;
    a.path_mtu = 1024;
    a.dest_qp_num = (uint32_t)strtoul(argv[3], NULL, 0);
    a.rq_psn = 0;
    a.max_dest_rd_atomic = 1;
    a.min_rnr_timer = 1;
    gid_of(argv[2], a.dgid);
    if ((err = sr_qp_modify(qp, &a,
                            SR_QP_STATE | SR_QP_AV | SR_QP_PATH_MTU | SR_QP_DEST_QPN |
                                SR_QP_RQ_PSN | SR_QP_MAX_DEST_RD_ATOMIC | SR_QP_MIN_RNR_TIMER,
                            now)))
        die("RTR", err);
    a.qp_state = SR_QPS_RTS;
    a.sq_psn = 0;
    a.timeout = 14;
    a.retry_cnt = 7;
    a.rnr_retry = 7;
    a.max_rd_atomic = 1;
    if ((err = sr_qp_modify(qp, &a,
                            SR_QP_STATE | SR_QP_SQ_PSN | SR_QP_TIMEOUT | SR_QP_RETRY_CNT |
                                SR_QP_RNR_RETRY | SR_QP_MAX_QP_RD_ATOMIC,
                            now)))
        die("RTS", err);
    struct sr_sge sge = {(uintptr_t)buf, sizeof(buf), sr_mr_lkey(mr)};
    struct sr_recv_wr rwr = {.wr_id = 1, .sg_list = &sge, .num_sge = 1};
    if ((err = sr_qp_post_recv(qp, &rwr)))
        die("post_recv", err);
    printf("qpn %u rate %llu\n", sr_qp_num(qp), (unsigned long long)sr_qp_cc_rate_bps(qp));
    fflush(stdout);
    sr_nic_unlock(nic);

    struct sr_engine_stats last = {0};
    uint64_t last_rate = 0;
    int recvs = 0, printed_recvs = -1;
    for (int i = 0; i < 20000; i++) {
        struct pollfd in = {.fd = 0, .events = POLLIN};
        if (poll(&in, 1, 1) > 0) {
            char c;
            if (read(0, &c, 1) <= 0)
                break; /* the test is done with us */
        }
        sr_nic_lock(nic);
        struct sr_wc wc;
        while (sr_cq_poll(cq, 1, &wc) == 1)
            if (wc.opcode == SR_WC_RECV && wc.status == SR_WC_SUCCESS)
                recvs += (int)wc.byte_len;
        struct sr_engine_stats s;
        sr_engine_stats(e, &s);
        uint64_t rate = sr_qp_cc_rate_bps(qp);
        sr_nic_unlock(nic);
        if (s.rx_ce != last.rx_ce || s.cnps_sent != last.cnps_sent ||
            s.cnps_rcvd != last.cnps_rcvd || rate != last_rate || recvs != printed_recvs) {
            printf("rx_ce=%llu cnps_sent=%llu cnps_rcvd=%llu rate=%llu recv=%d\n",
                   (unsigned long long)s.rx_ce, (unsigned long long)s.cnps_sent,
                   (unsigned long long)s.cnps_rcvd, (unsigned long long)rate, recvs);
            fflush(stdout);
            last = s;
            last_rate = rate;
            printed_recvs = recvs;
        }
    }
    sr_nic_lock(nic);
    sr_qp_destroy(qp);
    sr_mr_dereg(mr);
    sr_cq_destroy(cq);
    sr_pd_free(pd);
    sr_nic_unlock(nic);
    sr_nic_close(nic);
    return 0;
}

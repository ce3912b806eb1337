/* compat_test.c: what middleware (UCX, Open MPI over UCX) relies on beyond
 * the pingpongs: the receive completion of a UD datagram as a RoCE NIC
 * fills it, and RDMA READs answered promptly by a target whose application
 * polls only now and then. */
#include "vt.h"

#include <arpa/inet.h>
#include <stdlib.h>
#include <string.h>
#include <sys/select.h>
#include <time.h>
#include <unistd.h>

/* ---- ud_wc: wc.sl, wc_flags and the 40-byte area of a UD receive ---- */
enum { UD_LEN = 64, UD_QKEY = 0x11111111, UD_SEED = 7 };

struct ud_side {
    struct vt_dev d;
    struct vt_buf b;
    struct ibv_cq *cq;
    struct ibv_qp *qp;
};

struct ud_info {
    uint32_t qpn;
    uint8_t gid[16];
};

static void ud_open(int fd, struct ud_side *s, struct ud_info *peer)
{
    vt_dev_open(&s->d);
    vt_buf_alloc(&s->d, &s->b, 4096, IBV_ACCESS_LOCAL_WRITE);
    VT_REQUIRE((s->cq = ibv_create_cq(s->d.ctx, 16, NULL, NULL, 0)) != NULL);
    struct ibv_qp_init_attr ia = {
        .send_cq = s->cq,
        .recv_cq = s->cq,
        .cap = {.max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1},
        .qp_type = IBV_QPT_UD};
    VT_REQUIRE((s->qp = ibv_create_qp(s->d.pd, &ia)) != NULL);
    struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT, .port_num = 1, .qkey = UD_QKEY};
    VT_REQUIRE(ibv_modify_qp(s->qp, &a,
                             IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY) == 0);
    a = (struct ibv_qp_attr){.qp_state = IBV_QPS_RTR};
    VT_REQUIRE(ibv_modify_qp(s->qp, &a, IBV_QP_STATE) == 0);
    a = (struct ibv_qp_attr){.qp_state = IBV_QPS_RTS, .sq_psn = 0};
    VT_REQUIRE(ibv_modify_qp(s->qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN) == 0);
    struct ud_info mine = {.qpn = s->qp->qp_num};
    memcpy(mine.gid, s->d.gid.raw, 16);
    vt_send(fd, &mine, sizeof(mine));
    vt_recv(fd, peer, sizeof(*peer), VT_OOB_MS);
}

static void ud_close(struct ud_side *s)
{
    VT_EQ(ibv_destroy_qp(s->qp), 0);
    VT_EQ(ibv_destroy_cq(s->cq), 0);
    vt_buf_free(&s->b);
    vt_dev_close(&s->d);
}

static uint16_t ip_csum(const uint8_t *p, size_t len)
{
    uint32_t sum = 0;
    for (size_t i = 0; i + 1 < len; i += 2)
        sum += (uint32_t)(p[i] << 8 | p[i + 1]);
    while (sum >> 16)
        sum = (sum & 0xffff) + (sum >> 16);
    return (uint16_t)~sum;
}

static void case_ud_sender(int fd, const void *arg)
{
    (void)arg;
    struct ud_side s;
    struct ud_info peer;
    ud_open(fd, &s, &peer);
    vt_sync(fd); /* the receive is posted */
    struct ibv_ah_attr aa = {.is_global = 1, .port_num = 1, .grh = {.hop_limit = 64}};
    memcpy(aa.grh.dgid.raw, peer.gid, 16);
    struct ibv_ah *ah = ibv_create_ah(s.d.pd, &aa);
    VT_REQUIRE(ah);
    vt_pat_fill(s.b.p, UD_LEN, UD_SEED, 0);
    struct ibv_sge sge = {.addr = (uintptr_t)s.b.p, .length = UD_LEN, .lkey = s.b.mr->lkey};
    struct ibv_send_wr wr = {.wr_id = 1,
                             .sg_list = &sge,
                             .num_sge = 1,
                             .opcode = IBV_WR_SEND,
                             .send_flags = IBV_SEND_SIGNALED},
                       *bad = NULL;
    wr.wr.ud.ah = ah;
    wr.wr.ud.remote_qpn = peer.qpn;
    wr.wr.ud.remote_qkey = UD_QKEY;
    VT_REQUIRE(ibv_post_send(s.qp, &wr, &bad) == 0);
    vt_expect_wc(s.cq, 1, IBV_WC_SUCCESS, NULL);
    vt_sync(fd); /* the receiver has checked */
    VT_EQ(ibv_destroy_ah(ah), 0);
    ud_close(&s);
}

static void case_ud_receiver(int fd, const void *arg)
{
    (void)arg;
    struct ud_side s;
    struct ud_info peer;
    ud_open(fd, &s, &peer);
    memset(s.b.p, 0xee, 40 + UD_LEN);
    struct ibv_sge sge = {.addr = (uintptr_t)s.b.p, .length = 40 + UD_LEN, .lkey = s.b.mr->lkey};
    struct ibv_recv_wr rw = {.wr_id = 9, .sg_list = &sge, .num_sge = 1}, *bad = NULL;
    VT_REQUIRE(ibv_post_recv(s.qp, &rw, &bad) == 0);
    vt_sync(fd);
    struct ibv_wc wc;
    if (vt_expect_wc(s.cq, 9, IBV_WC_SUCCESS, &wc)) {
        VT_EQ(wc.opcode, IBV_WC_RECV);
        VT_EQ(wc.byte_len, 40 + UD_LEN);
        VT_EQ(wc.src_qp, peer.qpn);
        VT_CHECKF(wc.wc_flags & IBV_WC_GRH, "wc_flags %#x: no IBV_WC_GRH", wc.wc_flags);
        /* RoCE NICs report the frame's network header type here: UDP
         * follows (bit 3), IPv4 (2); UCX's ud_verbs drops the datagram
         * when it reads the wrong one */
        VT_EQX(wc.sl, 0x8 | 0x2);
        const uint8_t *g = s.b.p;
        static const uint8_t zero[20];
        VT_CHECKF(!memcmp(g, zero, 20), "first 20 bytes of the GRH area not zero");
        const uint8_t *ip = g + 20; /* the IPv4 header of the RoCEv2 frame */
        VT_EQX(ip[0], 0x45);
        VT_EQ(ip[2] << 8 | ip[3], 20 + 8 + 12 + 8 + UD_LEN + 4); /* IP, UDP, BTH, DETH, ICRC */
        VT_EQ(ip[9], 17);
        VT_EQX(ip_csum(ip, 20), 0);
        VT_CHECKF(!memcmp(ip + 12, peer.gid + 12, 4), "IPv4 source is not the sender's address");
        VT_CHECKF(!memcmp(ip + 16, s.d.gid.raw + 12, 4), "IPv4 destination is not ours");
        VT_EQ(vt_pat_diff(g + 40, UD_LEN, UD_SEED, 0), -1);
    }
    vt_sync(fd);
    ud_close(&s);
}

/* ---- sparse_poller: READs against a target that polls once a millisecond ----
 * A process that ran ucp_worker_progress every millisecond or so from a
 * barrier while its peer read from it (UCX's ucp_get) left the READs in
 * its socket until its next poll: its NIC thread took each poll for a
 * polling loop and stayed off the socket. Like UCX's, each progress call
 * here polls an armed CQ (which hands the socket back to the NIC thread)
 * and then one that is not (which takes it again). */
enum { SP_READS = 200, SP_LEN = 64, SP_SEED = 3, SP_GAP_US = 500, SP_MEDIAN_US = 200 };

struct sp_setup {
    struct vt_dev d;
    struct vt_buf l;
    struct ibv_cq *cq;
    struct vt_qp q;
    struct vt_remote_mr r;
};

static void sp_open(int fd, struct sp_setup *s)
{
    VT_REQUIRE(setenv("SOFTRDMA_HANDOFF_US", "1000", 1) == 0); /* the default, read at open */
    vt_dev_open(&s->d);
    vt_buf_alloc(&s->d, &s->l, 4096, VT_ACCESS_ALL);
    VT_REQUIRE((s->cq = ibv_create_cq(s->d.ctx, 2 * SP_READS, NULL, NULL, 0)) != NULL);
    struct vt_qp_caps caps;
    vt_caps_default(&caps);
    vt_qp_create(&s->d, &s->q, &caps, s->cq, s->cq, NULL);
    struct vt_qp_info mine, theirs;
    vt_qp_info(&s->d, &s->q, &mine);
    vt_send(fd, &mine, sizeof(mine));
    vt_recv(fd, &theirs, sizeof(theirs), VT_OOB_MS);
    struct vt_conn c;
    vt_conn_default(&s->d, &c);
    VT_REQUIRE(vt_qp_connect(&s->q, &theirs, &c) == 0);
    struct vt_remote_mr r = {.addr = (uintptr_t)s->l.p, .rkey = s->l.mr->rkey, .len = s->l.len};
    vt_send(fd, &r, sizeof(r));
    vt_recv(fd, &s->r, sizeof(s->r), VT_OOB_MS);
}

static void sp_close(struct sp_setup *s)
{
    vt_qp_destroy(&s->q);
    VT_EQ(ibv_destroy_cq(s->cq), 0);
    vt_buf_free(&s->l);
    vt_dev_close(&s->d);
}

static uint64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static void case_sp_reader(int fd, const void *arg)
{
    (void)arg;
    struct sp_setup s;
    sp_open(fd, &s);
    vt_sync(fd); /* the target polls from here on */
    usleep(20 * 1000);
    static uint64_t us[SP_READS];
    int done = 0;
    for (int i = 0; i < SP_READS && !vt_failures; i++) {
        memset(s.l.p, 0, SP_LEN);
        struct ibv_sge sge = {.addr = (uintptr_t)s.l.p, .length = SP_LEN, .lkey = s.l.mr->lkey};
        struct ibv_send_wr wr = {.wr_id = (uint64_t)i,
                                 .sg_list = &sge,
                                 .num_sge = 1,
                                 .opcode = IBV_WR_RDMA_READ,
                                 .send_flags = IBV_SEND_SIGNALED},
                           *bad = NULL;
        wr.wr.rdma.remote_addr = s.r.addr;
        wr.wr.rdma.rkey = s.r.rkey;
        uint64_t t0 = now_us();
        VT_REQUIRE(ibv_post_send(s.q.qp, &wr, &bad) == 0);
        if (!vt_expect_wc(s.cq, (uint64_t)i, IBV_WC_SUCCESS, NULL))
            break;
        us[done++] = now_us() - t0;
        VT_EQ(vt_pat_diff(s.l.p, SP_LEN, SP_SEED, 0), -1);
    }
    vt_send(fd, &done, sizeof(done)); /* the target stops polling */
    VT_EQ(done, SP_READS);
    if (done) {
        qsort(us, (size_t)done, sizeof(us[0]), cmp_u64);
        uint64_t med = us[done / 2];
        vt_note("READ %d B from a target polling every 1 ms: median %llu us, 90%% %llu us", SP_LEN,
                (unsigned long long)med, (unsigned long long)us[done * 9 / 10]);
        VT_CHECKF(med < SP_MEDIAN_US, "median READ %llu us: the target's NIC waited for its polls",
                  (unsigned long long)med);
    }
    vt_sync(fd);
    sp_close(&s);
}

static void case_sp_target(int fd, const void *arg)
{
    (void)arg;
    struct sp_setup s;
    sp_open(fd, &s);
    vt_pat_fill(s.l.p, SP_LEN, SP_SEED, 0);
    vt_sync(fd);
    /* a poll (which finds nothing: READs complete nothing here) about
     * once a millisecond until the reader is done, bounded in time */
    struct ibv_cq *armed = ibv_create_cq(s.d.ctx, 4, NULL, NULL, 0);
    VT_REQUIRE(armed);
    VT_EQ(ibv_req_notify_cq(armed, 0), 0);
    uint64_t end = vt_now_ms() + VT_POLL_MS * 3;
    int done = -1;
    while (vt_now_ms() < end) {
        struct ibv_wc wc;
        VT_EQ(ibv_poll_cq(armed, 1, &wc), 0);
        VT_EQ(ibv_poll_cq(s.cq, 1, &wc), 0);
        fd_set rf;
        FD_ZERO(&rf);
        FD_SET(fd, &rf);
        struct timeval tv = {.tv_usec = SP_GAP_US};
        if (select(fd + 1, &rf, NULL, NULL, &tv) > 0) {
            vt_recv(fd, &done, sizeof(done), VT_OOB_MS);
            break;
        }
    }
    VT_CHECKF(done >= 0, "the reader did not finish in time");
    vt_sync(fd);
    VT_EQ(ibv_destroy_cq(armed), 0);
    sp_close(&s);
}

static const struct vt_case cases[] = {
    {"ud_wc", case_ud_sender, case_ud_receiver, NULL},
    {"sparse_poller", case_sp_reader, case_sp_target, NULL},
};

int main(int argc, char **argv)
{
    return vt_main(argc, argv, cases, sizeof(cases) / sizeof(cases[0]));
}

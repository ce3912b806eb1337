/* errors_test.c: error completions as applications see them. Each row sets
 * up a fresh RC pair with the agent, provokes one error and checks: the
 * requester's completion status, that the targeted memory is untouched,
 * the state of both QPs afterwards, what became of a receive the peer had
 * posted, and that later work on the failed QP completes with
 * IBV_WC_WR_FLUSH_ERR. A last case has the peer process exit before a
 * WRITE: transport retries run out within a bounded time. */
#include "vt.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>

enum {
    LEN = 64 << 10, /* 16 packets: the error hits a multi-packet message */
    ROFF = 64 << 10,
    LOFF = 8192,
    RECV_OFF = 1 << 20,
    GUARD = 64,
    SEED_OLD = 0x21,
    SEED_NEW = 0x42,
    PEER_RECV_ID = 0x77,
};

enum kind {
    K_BAD_RKEY,   /* a key no MR has */
    K_STALE_RKEY, /* the key of a deregistered MR */
    K_WRITE_OOB,  /* WRITE running past the end of the MR */
    K_READ_OOB,   /* READ running past the end of the MR */
    K_READ_LOW,   /* READ starting below the MR */
    K_MR_NO_RW,   /* MR without IBV_ACCESS_REMOTE_WRITE */
    K_MR_NO_RR,   /* MR without IBV_ACCESS_REMOTE_READ */
    K_QP_NO_RW,   /* peer QP's qp_access_flags without remote write */
    K_BAD_LKEY,   /* the requester's own SGE has a bad lkey */
    K_SMALL_RECV, /* SEND larger than the receive buffer */
    K_RNR,        /* no receive posted, rnr_retry 1 */
    K_RNR_TIMED,  /* the same with the peer's min_rnr_timer 5.12 ms, rnr_retry 3 */
    K_ATOMIC_MISALIGNED,
};

/* what the peer's pre-posted receive becomes */
enum peer_recv { PR_NONE, PR_PENDING, PR_FLUSHED, PR_LEN_ERR };

struct err_row {
    enum kind kind;
    enum ibv_wr_opcode opcode;
    enum ibv_wc_status want;
    enum ibv_qp_state peer_state;
    enum peer_recv peer_recv;
    unsigned min_ms; /* the error may not come sooner */
};

static const struct err_row rows[] = {
    [K_BAD_RKEY] = {K_BAD_RKEY, IBV_WR_RDMA_WRITE, IBV_WC_REM_ACCESS_ERR, IBV_QPS_ERR, PR_FLUSHED},
    [K_STALE_RKEY] = {K_STALE_RKEY, IBV_WR_RDMA_WRITE, IBV_WC_REM_ACCESS_ERR, IBV_QPS_ERR,
                      PR_FLUSHED},
    [K_WRITE_OOB] = {K_WRITE_OOB, IBV_WR_RDMA_WRITE, IBV_WC_REM_ACCESS_ERR, IBV_QPS_ERR,
                     PR_FLUSHED},
    [K_READ_OOB] = {K_READ_OOB, IBV_WR_RDMA_READ, IBV_WC_REM_ACCESS_ERR, IBV_QPS_ERR, PR_FLUSHED},
    [K_READ_LOW] = {K_READ_LOW, IBV_WR_RDMA_READ, IBV_WC_REM_ACCESS_ERR, IBV_QPS_ERR, PR_FLUSHED},
    [K_MR_NO_RW] = {K_MR_NO_RW, IBV_WR_RDMA_WRITE, IBV_WC_REM_ACCESS_ERR, IBV_QPS_ERR, PR_FLUSHED},
    [K_MR_NO_RR] = {K_MR_NO_RR, IBV_WR_RDMA_READ, IBV_WC_REM_ACCESS_ERR, IBV_QPS_ERR, PR_FLUSHED},
    [K_QP_NO_RW] = {K_QP_NO_RW, IBV_WR_RDMA_WRITE, IBV_WC_REM_ACCESS_ERR, IBV_QPS_ERR, PR_FLUSHED},
    [K_BAD_LKEY] = {K_BAD_LKEY, IBV_WR_SEND, IBV_WC_LOC_PROT_ERR, IBV_QPS_RTS, PR_PENDING},
    [K_SMALL_RECV] = {K_SMALL_RECV, IBV_WR_SEND, IBV_WC_REM_INV_REQ_ERR, IBV_QPS_ERR, PR_LEN_ERR},
    [K_RNR] = {K_RNR, IBV_WR_SEND, IBV_WC_RNR_RETRY_EXC_ERR, IBV_QPS_RTS, PR_NONE},
    /* IBA 9.7.5.2.8: the requester waits the responder's RNR timer before each retry */
    [K_RNR_TIMED] = {K_RNR_TIMED, IBV_WR_SEND, IBV_WC_RNR_RETRY_EXC_ERR, IBV_QPS_RTS, PR_NONE, 15},
    /* IBA 9.4.5: an atomic's VA must be 8-byte aligned, else NAK invalid request */
    [K_ATOMIC_MISALIGNED] = {K_ATOMIC_MISALIGNED, IBV_WR_ATOMIC_FETCH_AND_ADD,
                             IBV_WC_REM_INV_REQ_ERR, IBV_QPS_ERR, PR_FLUSHED},
};

static const char *state_name(enum ibv_qp_state s)
{
    static const char *const n[] = {"RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR"};
    return (unsigned)s < sizeof(n) / sizeof(n[0]) ? n[s] : "?";
}

/* After an error: the QP is in ERR, and new work is flushed, in order. */
static void check_flushed_after(struct vt_qp *q, struct vt_buf *l)
{
    enum ibv_qp_state s = vt_qp_state(q->qp);
    VT_CHECKF(s == IBV_QPS_ERR, "requester QP state %s, want ERR", state_name(s));

    struct ibv_sge sge = {.addr = (uintptr_t)l->p, .length = 64, .lkey = l->mr->lkey};
    struct ibv_send_wr wr[2], *bad = NULL;
    memset(wr, 0, sizeof(wr));
    for (int i = 0; i < 2; i++) {
        wr[i].wr_id = 0xf100 + (uint64_t)i;
        wr[i].sg_list = &sge;
        wr[i].num_sge = 1;
        wr[i].opcode = IBV_WR_SEND;
        wr[i].send_flags = IBV_SEND_SIGNALED;
    }
    wr[0].next = &wr[1];
    if (VT_EQ(ibv_post_send(q->qp, wr, &bad), 0)) {
        vt_expect_wc(q->scq, 0xf100, IBV_WC_WR_FLUSH_ERR, NULL);
        vt_expect_wc(q->scq, 0xf101, IBV_WC_WR_FLUSH_ERR, NULL);
    }
    struct ibv_recv_wr rwr = {.wr_id = 0xf200, .sg_list = &sge, .num_sge = 1}, *rbad = NULL;
    struct ibv_wc wc;
    if (VT_EQ(ibv_post_recv(q->qp, &rwr, &rbad), 0) &&
        vt_expect_wc(q->rcq, 0xf200, IBV_WC_WR_FLUSH_ERR, &wc))
        VT_EQ(wc.qp_num, q->qp->qp_num);
    VT_EQ(vt_poll_none(q->scq, 20), 0);
}

static void case_error(int fd, const void *arg)
{
    const struct err_row *row = arg;
    struct vt_dev d;
    struct vt_buf l;
    struct vt_remote_mr r0, mr;
    vt_dev_open(&d);
    vt_buf_alloc(&d, &l, 1 << 20, VT_ACCESS_ALL);
    vt_agent_hello(fd, &r0);

    struct vt_conn lc, rc;
    vt_conn_default(&d, &lc);
    vt_conn_default(&d, &rc); /* the agent's device has the same port attributes */
    if (row->kind == K_QP_NO_RW)
        rc.access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
    if (row->kind == K_RNR) {
        lc.rnr_retry = 1;
        rc.min_rnr_timer = 1; /* 0.01 ms */
    }
    if (row->kind == K_RNR_TIMED) {
        lc.rnr_retry = 3;
        rc.min_rnr_timer = 18; /* IBA Table 45: 5.12 ms; 3 retries wait 15.36 ms */
    }
    struct vt_qp q;
    struct vt_qp_caps caps;
    vt_caps_default(&caps);
    vt_qp_create(&d, &q, &caps, NULL, NULL, NULL);
    struct vt_qp_info rinfo;
    vt_agent_pair(fd, &d, &q, 0, NULL, &lc, &rc, &rinfo);

    /* the target: which agent MR, where, with which key */
    uint32_t tmr = 0;
    uint64_t toff = ROFF, taddr = r0.addr + ROFF;
    uint32_t rkey = r0.rkey;
    switch (row->kind) {
    case K_BAD_RKEY:
        rkey = ~r0.rkey;
        break;
    case K_STALE_RKEY:
        VT_REQUIRE(vt_agent_mr_reg(fd, LEN, VT_ACCESS_ALL, &mr) == 0);
        vt_agent_mr_dereg(fd, mr.slot);
        rkey = mr.rkey;
        taddr = mr.addr;
        break;
    case K_WRITE_OOB:
    case K_READ_OOB:
        toff = r0.len - LEN / 2;
        taddr = r0.addr + toff;
        break;
    case K_READ_LOW:
        toff = 0;
        taddr = r0.addr - 1;
        break;
    case K_ATOMIC_MISALIGNED:
        toff = ROFF + 4;
        taddr = r0.addr + toff;
        break;
    case K_MR_NO_RW:
    case K_MR_NO_RR:
        VT_REQUIRE(vt_agent_mr_reg(fd, 2 * LEN,
                                   row->kind == K_MR_NO_RW
                                       ? IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ
                                       : IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE,
                                   &mr) == 0);
        tmr = mr.slot;
        toff = LEN / 2;
        taddr = mr.addr + toff;
        rkey = mr.rkey;
        break;
    default:
        break;
    }
    bool remote_target = row->kind != K_STALE_RKEY && row->kind != K_READ_LOW &&
                         (row->opcode == IBV_WR_RDMA_WRITE || row->kind == K_ATOMIC_MISALIGNED);
    uint64_t fill_len = row->kind == K_WRITE_OOB ? LEN / 2 : LEN;
    if (remote_target)
        vt_agent_fill(fd, tmr, toff - GUARD, fill_len + GUARD, SEED_OLD, toff - GUARD);
    if (row->kind == K_SMALL_RECV) {
        /* the send's target: must not be written past its 16 bytes */
        vt_agent_fill(fd, 0, RECV_OFF, LEN, SEED_OLD, RECV_OFF);
    }
    if (row->peer_recv != PR_NONE) {
        struct vt_sge s = {.mr = 0, .off = RECV_OFF, .len = row->kind == K_SMALL_RECV ? 16 : 64};
        VT_EQ(vt_agent_post_recv(fd, 0, PEER_RECV_ID, 1, &s), 0);
    }

    vt_pat_fill(l.p + LOFF - GUARD, LEN + 2 * GUARD, SEED_NEW, 0);
    struct ibv_sge sge = {.addr = (uintptr_t)(l.p + LOFF), .length = LEN, .lkey = l.mr->lkey};
    if (row->kind == K_ATOMIC_MISALIGNED)
        sge.length = 8;
    if (row->kind == K_BAD_LKEY)
        sge.lkey = ~l.mr->lkey;
    struct ibv_send_wr wr, *bad = NULL;
    memset(&wr, 0, sizeof(wr));
    wr.wr_id = 0xe000;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = row->opcode;
    wr.send_flags = IBV_SEND_SIGNALED;
    if (row->kind == K_ATOMIC_MISALIGNED) {
        wr.wr.atomic.remote_addr = taddr;
        wr.wr.atomic.rkey = rkey;
        wr.wr.atomic.compare_add = 1;
    } else {
        wr.wr.rdma.remote_addr = taddr;
        wr.wr.rdma.rkey = rkey;
    }
    uint64_t t0 = vt_now_ms();
    VT_REQUIRE(ibv_post_send(q.qp, &wr, &bad) == 0);
    struct ibv_wc wc;
    if (vt_expect_wc(q.scq, 0xe000, row->want, &wc))
        VT_EQ(wc.qp_num, q.qp->qp_num);
    uint64_t ms = vt_now_ms() - t0;
    vt_note("error completion after %llu ms", (unsigned long long)ms);
    VT_CHECKF(ms >= row->min_ms, "error after %llu ms, expected no sooner than %u ms",
              (unsigned long long)ms, row->min_ms);
    VT_CHECKF(ms < 5000, "error after %llu ms", (unsigned long long)ms);
    VT_EQ(vt_poll_none(q.scq, 20), 0); /* exactly one completion */

    /* memory the failed operation aimed at is untouched */
    if (remote_target) {
        long long diff =
            vt_agent_diff(fd, tmr, toff - GUARD, fill_len + GUARD, SEED_OLD, toff - GUARD);
        VT_CHECKF(diff < 0, "target memory changed at byte %lld", diff);
    }
    if (row->opcode != IBV_WR_SEND && row->opcode != IBV_WR_RDMA_WRITE)
        VT_CHECKF(vt_pat_diff(l.p + LOFF - GUARD, LEN + 2 * GUARD, SEED_NEW, 0) < 0,
                  "local READ/atomic destination changed");
    if (row->kind == K_SMALL_RECV)
        VT_CHECKF(vt_agent_diff(fd, 0, RECV_OFF + 16, LEN - 16, SEED_OLD, RECV_OFF + 16) < 0,
                  "SEND wrote past the receive buffer");

    /* the peer */
    enum ibv_qp_state ps = vt_agent_qp_state(fd, 0);
    VT_CHECKF(ps == row->peer_state, "peer QP state %s, want %s", state_name(ps),
              state_name(row->peer_state));
    struct ibv_wc rwc;
    bool expect = row->peer_recv == PR_FLUSHED || row->peer_recv == PR_LEN_ERR;
    bool got = vt_agent_poll_recv(fd, 0, expect ? VT_POLL_MS : 100, &rwc);
    switch (row->peer_recv) {
    case PR_NONE:
    case PR_PENDING:
        VT_CHECKF(!got, "unexpected receive completion at the peer (status %s)",
                  ibv_wc_status_str(rwc.status));
        break;
    case PR_FLUSHED:
    case PR_LEN_ERR:
        if (VT_CHECKF(got, "the peer's receive did not complete")) {
            enum ibv_wc_status want =
                row->peer_recv == PR_FLUSHED ? IBV_WC_WR_FLUSH_ERR : IBV_WC_LOC_LEN_ERR;
            VT_EQX(rwc.wr_id, PEER_RECV_ID);
            VT_CHECKF(rwc.status == want, "peer receive status %s, want %s",
                      ibv_wc_status_str(rwc.status), ibv_wc_status_str(want));
            VT_EQ(rwc.qp_num, rinfo.qpn);
        }
        break;
    }

    check_flushed_after(&q, &l);
    vt_qp_destroy(&q);
    vt_buf_free(&l);
    vt_dev_close(&d);
}

/* Not an error: with rnr_retry 7 the requester waits out the RNR NAKs,
 * and the SEND lands once the receive is posted late. */
static void case_rnr_recovers(int fd, const void *arg)
{
    (void)arg;
    struct vt_dev d;
    struct vt_buf l;
    struct vt_remote_mr r0;
    vt_dev_open(&d);
    vt_buf_alloc(&d, &l, 1 << 16, VT_ACCESS_ALL);
    vt_agent_hello(fd, &r0);
    struct vt_qp q;
    struct vt_qp_caps caps;
    vt_caps_default(&caps);
    vt_qp_create(&d, &q, &caps, NULL, NULL, NULL);
    struct vt_conn lc;
    vt_conn_default(&d, &lc);
    lc.rnr_retry = 7; /* forever */
    vt_agent_pair(fd, &d, &q, 0, NULL, &lc, NULL, NULL);
    vt_pat_fill(l.p, 8192, SEED_NEW, 0);
    struct ibv_sge sge = {.addr = (uintptr_t)l.p, .length = 8192, .lkey = l.mr->lkey};
    struct ibv_send_wr wr = {.wr_id = 5,
                             .sg_list = &sge,
                             .num_sge = 1,
                             .opcode = IBV_WR_SEND,
                             .send_flags = IBV_SEND_SIGNALED},
                       *bad = NULL;
    VT_REQUIRE(ibv_post_send(q.qp, &wr, &bad) == 0);
    VT_EQ(vt_poll_none(q.scq, 100), 0); /* waiting, not failing */
    vt_agent_fill(fd, 0, RECV_OFF, 8192 + GUARD, SEED_OLD, RECV_OFF);
    struct vt_sge s = {.mr = 0, .off = RECV_OFF, .len = 8192};
    VT_EQ(vt_agent_post_recv(fd, 0, PEER_RECV_ID, 1, &s), 0);
    vt_expect_wc(q.scq, 5, IBV_WC_SUCCESS, NULL);
    struct ibv_wc rwc;
    if (VT_CHECK(vt_agent_poll_recv(fd, 0, VT_POLL_MS, &rwc))) {
        VT_EQ(rwc.status, IBV_WC_SUCCESS);
        VT_EQ(rwc.byte_len, 8192);
    }
    VT_CHECK(vt_agent_diff(fd, 0, RECV_OFF, 8192, SEED_NEW, 0) < 0);
    VT_CHECK(vt_agent_diff(fd, 0, RECV_OFF + 8192, GUARD, SEED_OLD, RECV_OFF + 8192) < 0);
    VT_EQ(vt_qp_state(q.qp), IBV_QPS_RTS);
    VT_EQ(vt_agent_qp_state(fd, 0), IBV_QPS_RTS);
    vt_qp_destroy(&q);
    vt_buf_free(&l);
    vt_dev_close(&d);
}

/* The peer process is gone before the WRITE: no ACK ever comes, the
 * transport timer (timeout 14: 67.1 ms) fires retry_cnt + 1 times. The
 * timer is long enough that a live peer the machine stalls (a sanitizer
 * build beside other tests) still answers the first WRITE in time. */
static void case_peer_gone(int fd, const void *arg)
{
    (void)arg;
    struct vt_dev d;
    struct vt_buf l;
    struct vt_remote_mr r0;
    vt_dev_open(&d);
    vt_buf_alloc(&d, &l, 1 << 16, VT_ACCESS_ALL);
    vt_agent_hello(fd, &r0);
    struct vt_conn lc;
    vt_conn_default(&d, &lc);
    lc.timeout = 14;
    lc.retry_cnt = 2;
    struct vt_qp q;
    struct vt_qp_caps caps;
    vt_caps_default(&caps);
    vt_qp_create(&d, &q, &caps, NULL, NULL, NULL);
    vt_agent_pair(fd, &d, &q, 0, NULL, &lc, NULL, NULL);

    struct ibv_sge sge = {.addr = (uintptr_t)l.p, .length = 4096, .lkey = l.mr->lkey};
    struct ibv_send_wr wr, *bad = NULL;
    memset(&wr, 0, sizeof(wr));
    wr.wr_id = 1;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_RDMA_WRITE;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.wr.rdma.remote_addr = r0.addr;
    wr.wr.rdma.rkey = r0.rkey;
    /* the path works while the peer lives */
    VT_REQUIRE(ibv_post_send(q.qp, &wr, &bad) == 0);
    VT_REQUIRE(vt_expect_wc(q.scq, 1, IBV_WC_SUCCESS, NULL));

    vt_agent_exit(fd); /* returns once the peer process is reaped */
    wr.wr_id = 2;
    uint64_t t0 = vt_now_ms();
    VT_REQUIRE(ibv_post_send(q.qp, &wr, &bad) == 0);
    struct ibv_wc wc;
    vt_expect_wc(q.scq, 2, IBV_WC_RETRY_EXC_ERR, &wc);
    uint64_t ms = vt_now_ms() - t0;
    vt_note("IBV_WC_RETRY_EXC_ERR after %llu ms", (unsigned long long)ms);
    /* 3 x 67.1 ms at the least (IBA 9.7.6.1.3), and bounded */
    VT_CHECKF(ms >= 201, "retries exhausted after %llu ms: faster than 3 transport timeouts",
              (unsigned long long)ms);
    VT_CHECKF(ms <= 3000, "retries exhausted after %llu ms", (unsigned long long)ms);
    check_flushed_after(&q, &l);
    vt_qp_destroy(&q);
    vt_buf_free(&l);
    vt_dev_close(&d);
}

#define ROW(k, name)                                                                               \
    {                                                                                              \
        name, case_error, NULL, &rows[k]                                                           \
    }
static const struct vt_case cases[] = {
    ROW(K_BAD_RKEY, "bad_rkey"),
    ROW(K_STALE_RKEY, "stale_rkey"),
    ROW(K_WRITE_OOB, "write_oob"),
    ROW(K_READ_OOB, "read_oob"),
    ROW(K_READ_LOW, "read_low"),
    ROW(K_MR_NO_RW, "mr_no_remote_write"),
    ROW(K_MR_NO_RR, "mr_no_remote_read"),
    ROW(K_QP_NO_RW, "qp_no_remote_write"),
    ROW(K_BAD_LKEY, "bad_lkey"),
    ROW(K_SMALL_RECV, "small_recv"),
    ROW(K_RNR, "rnr"),
    ROW(K_RNR_TIMED, "rnr_timer"),
    ROW(K_ATOMIC_MISALIGNED, "atomic_misaligned"),
    {"rnr_recovers", case_rnr_recovers, NULL, NULL},
    {"peer_gone", case_peer_gone, NULL, NULL},
};
#undef ROW
_Static_assert(sizeof(rows) / sizeof(rows[0]) == K_ATOMIC_MISALIGNED + 1, "a row per kind");

int main(int argc, char **argv)
{
    return vt_main(argc, argv, cases, sizeof(cases) / sizeof(cases[0]));
}

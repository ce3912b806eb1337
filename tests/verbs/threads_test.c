/* threads_test.c: one context used from three threads at once. Two
 * threads post SENDs on two QPs of the same context while a third polls
 * both send CQs; the peer process receives every message. Checks that every
 * WR completes exactly once, successfully, in order per QP, and that every
 * message arrives once, intact, in order, on the QP it was sent on. */
#include "vt.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <string.h>

enum {
    NQP = 2,
    PER_QP = 5000, /* 10k messages in all */
    DEPTH = 128,   /* outstanding WRs per QP: the application keeps CQ room */
    MSG = 64,
    CQE = 2 * DEPTH,
    RUN_MS = 60000,
};

struct msg {
    uint32_t qp, seq;
    uint8_t fill[MSG - 8];
};

struct shared {
    struct vt_qp q[NQP];
    struct vt_buf l; /* NQP rings of DEPTH message slots */
    atomic_uint completed[NQP];
    atomic_bool stop;
    uint64_t deadline;
    int errors[NQP + 1]; /* per poster thread, and the poller's; read after join */
};

struct poster_arg {
    struct shared *s;
    uint32_t qp;
};

static void *poster(void *p)
{
    struct poster_arg *a = p;
    struct shared *s = a->s;
    struct vt_qp *q = &s->q[a->qp];
    for (uint32_t seq = 0; seq < PER_QP && !atomic_load(&s->stop); seq++) {
        /* a ring slot is free once its previous WR completed */
        while (seq - atomic_load_explicit(&s->completed[a->qp], memory_order_acquire) >= DEPTH) {
            if (vt_now_ms() > s->deadline || atomic_load(&s->stop)) {
                s->errors[a->qp]++;
                return NULL;
            }
            sched_yield();
        }
        uint8_t *slot = s->l.p + ((size_t)a->qp * DEPTH + seq % DEPTH) * MSG;
        struct msg m = {.qp = a->qp, .seq = seq};
        vt_pat_fill(m.fill, sizeof(m.fill), a->qp + 1, seq);
        memcpy(slot, &m, sizeof(m));
        struct ibv_sge sge = {.addr = (uintptr_t)slot, .length = MSG, .lkey = s->l.mr->lkey};
        struct ibv_send_wr wr = {.wr_id = (uint64_t)a->qp << 32 | seq,
                                 .sg_list = &sge,
                                 .num_sge = 1,
                                 .opcode = IBV_WR_SEND,
                                 .send_flags = IBV_SEND_SIGNALED},
                           *bad = NULL;
        int r = ibv_post_send(q->qp, &wr, &bad);
        if (r) {
            s->errors[a->qp]++;
            vt_note("qp %u seq %u: ibv_post_send %d", a->qp, seq, r);
            return NULL;
        }
    }
    return NULL;
}

static void *poller(void *p)
{
    struct shared *s = p;
    uint32_t next[NQP] = {0};
    int *err = &s->errors[NQP];
    while (!atomic_load(&s->stop)) {
        bool idle = true;
        for (uint32_t i = 0; i < NQP; i++) {
            struct ibv_wc wc[16];
            int n = ibv_poll_cq(s->q[i].scq, 16, wc);
            if (n < 0) {
                (*err)++;
                continue;
            }
            for (int k = 0; k < n; k++) {
                idle = false;
                uint32_t qp = (uint32_t)(wc[k].wr_id >> 32), seq = (uint32_t)wc[k].wr_id;
                if (wc[k].status != IBV_WC_SUCCESS || qp != i || seq != next[i] ||
                    wc[k].qp_num != s->q[i].qp->qp_num || wc[k].opcode != IBV_WC_SEND) {
                    if ((*err)++ < 5)
                        vt_note("cq %u: wr_id 0x%llx status %s qp_num %u, want seq %u", i,
                                (unsigned long long)wc[k].wr_id, ibv_wc_status_str(wc[k].status),
                                wc[k].qp_num, next[i]);
                }
                next[i]++;
                atomic_fetch_add_explicit(&s->completed[i], 1, memory_order_release);
            }
        }
        if (atomic_load(&s->completed[0]) >= PER_QP && atomic_load(&s->completed[1]) >= PER_QP)
            break;
        if (vt_now_ms() > s->deadline) {
            (*err)++;
            break;
        }
        if (idle)
            sched_yield();
    }
    atomic_store(&s->stop, true);
    return NULL;
}

static void parent(int fd, const void *arg)
{
    (void)arg;
    static struct shared s;
    struct vt_dev d;
    vt_dev_open(&d);
    vt_buf_alloc(&d, &s.l, (size_t)NQP * DEPTH * MSG, VT_ACCESS_ALL);
    struct vt_qp_caps caps;
    vt_caps_default(&caps);
    caps.max_send_wr = DEPTH;
    caps.cqe = CQE;
    struct vt_qp_info li[NQP], ri[NQP];
    for (int i = 0; i < NQP; i++) {
        vt_qp_create(&d, &s.q[i], &caps, NULL, NULL, NULL);
        vt_qp_info(&d, &s.q[i], &li[i]);
    }
    vt_send(fd, li, sizeof(li));
    vt_recv(fd, ri, sizeof(ri), VT_OOB_MS);
    struct vt_conn c;
    vt_conn_default(&d, &c);
    for (int i = 0; i < NQP; i++)
        VT_REQUIRE(vt_qp_connect(&s.q[i], &ri[i], &c) == 0);
    vt_sync(fd); /* the peer has posted every receive */

    uint64_t t0 = vt_now_ms();
    s.deadline = t0 + RUN_MS;
    pthread_t th[NQP + 1];
    struct poster_arg pa[NQP];
    VT_REQUIRE(pthread_create(&th[NQP], NULL, poller, &s) == 0);
    for (uint32_t i = 0; i < NQP; i++) {
        pa[i] = (struct poster_arg){.s = &s, .qp = i};
        VT_REQUIRE(pthread_create(&th[i], NULL, poster, &pa[i]) == 0);
    }
    for (int i = 0; i <= NQP; i++)
        pthread_join(th[i], NULL);
    vt_note("%d messages sent and completed in %llu ms", NQP * PER_QP,
            (unsigned long long)(vt_now_ms() - t0));
    for (int i = 0; i <= NQP; i++)
        VT_CHECKF(s.errors[i] == 0, "%s %d: %d errors", i < NQP ? "poster" : "poller", i,
                  s.errors[i]);
    for (int i = 0; i < NQP; i++) {
        VT_EQ(atomic_load(&s.completed[i]), PER_QP);
        VT_EQ(vt_poll_none(s.q[i].scq, 20), 0);
    }
    int peer_errors = -1;
    vt_recv(fd, &peer_errors, sizeof(peer_errors), VT_OOB_MS + RUN_MS);
    VT_EQ(peer_errors, 0);
    vt_sync(fd);
    for (int i = 0; i < NQP; i++)
        vt_qp_destroy(&s.q[i]);
    vt_buf_free(&s.l);
    vt_dev_close(&d);
}

static void child(int fd, const void *arg)
{
    (void)arg;
    struct vt_dev d;
    struct vt_buf l;
    vt_dev_open(&d);
    vt_buf_alloc(&d, &l, (size_t)NQP * PER_QP * MSG, VT_ACCESS_ALL);
    struct ibv_cq *rcq = ibv_create_cq(d.ctx, NQP * PER_QP, NULL, NULL, 0);
    VT_REQUIRE(rcq);
    struct vt_qp_caps caps;
    vt_caps_default(&caps);
    caps.max_recv_wr = PER_QP;
    struct vt_qp q[NQP];
    struct vt_qp_info li[NQP], ri[NQP];
    for (int i = 0; i < NQP; i++) {
        vt_qp_create(&d, &q[i], &caps, NULL, rcq, NULL);
        vt_qp_info(&d, &q[i], &li[i]);
    }
    vt_recv(fd, ri, sizeof(ri), VT_OOB_MS);
    vt_send(fd, li, sizeof(li));
    struct vt_conn c;
    vt_conn_default(&d, &c);
    for (int i = 0; i < NQP; i++) {
        VT_REQUIRE(vt_qp_connect(&q[i], &ri[i], &c) == 0);
        for (uint32_t k = 0; k < PER_QP; k++) {
            struct ibv_sge sge = {.addr = (uintptr_t)(l.p + ((size_t)i * PER_QP + k) * MSG),
                                  .length = MSG,
                                  .lkey = l.mr->lkey};
            struct ibv_recv_wr wr = {.wr_id = (uint64_t)i << 32 | k, .sg_list = &sge, .num_sge = 1},
                               *bad = NULL;
            VT_REQUIRE(ibv_post_recv(q[i].qp, &wr, &bad) == 0);
        }
    }
    vt_sync(fd);

    uint32_t next[NQP] = {0};
    int errors = 0, got = 0;
    uint64_t end = vt_now_ms() + RUN_MS;
    while (got < NQP * PER_QP && vt_now_ms() < end) {
        struct ibv_wc wc[32];
        int n = vt_poll(rcq, 32, wc, 1);
        for (int k = 0; k < n; k++, got++) {
            int i = wc[k].qp_num == q[0].qp->qp_num ? 0 : wc[k].qp_num == q[1].qp->qp_num ? 1 : -1;
            if (i < 0 || wc[k].status != IBV_WC_SUCCESS || wc[k].byte_len != MSG ||
                wc[k].wr_id != ((uint64_t)i << 32 | next[i])) {
                if (errors++ < 5)
                    vt_note("receive: qp_num %u status %s byte_len %u wr_id 0x%llx", wc[k].qp_num,
                            ibv_wc_status_str(wc[k].status), wc[k].byte_len,
                            (unsigned long long)wc[k].wr_id);
                continue;
            }
            /* RC delivers in order: the k-th receive of a QP holds its k-th message */
            struct msg m;
            memcpy(&m, l.p + ((size_t)i * PER_QP + next[i]) * MSG, sizeof(m));
            if (m.qp != (uint32_t)i || m.seq != next[i] ||
                vt_pat_diff(m.fill, sizeof(m.fill), (uint32_t)i + 1, next[i]) >= 0) {
                if (errors++ < 5)
                    vt_note("qp %d message %u holds qp %u seq %u", i, next[i], m.qp, m.seq);
            }
            next[i]++;
        }
    }
    VT_EQ(got, NQP * PER_QP);
    VT_EQ(vt_poll_none(rcq, 20), 0);
    errors += got != NQP * PER_QP;
    vt_send(fd, &errors, sizeof(errors));
    vt_sync(fd);
    for (int i = 0; i < NQP; i++)
        vt_qp_destroy(&q[i]);
    VT_EQ(ibv_destroy_cq(rcq), 0);
    vt_buf_free(&l);
    vt_dev_close(&d);
}

static const struct vt_case cases[] = {
    {"three_threads", parent, child, NULL},
};

int main(int argc, char **argv)
{
    return vt_main(argc, argv, cases, sizeof(cases) / sizeof(cases[0]));
}

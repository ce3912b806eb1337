/* mw_test.c: memory windows (IBA 10.6.7) in the engine, two engines on the
 * in-memory wire of engine_harness.h. Node 1 owns a region registered with
 * only local rights and MW_BIND, and opens windows onto it by posting bind
 * work requests on its QP; node 0 reads, writes and does atomics through
 * the windows' keys. Checked: what a window grants (bounds, rights, the QP
 * of a type 2 window), what it refuses (remote access NAK, memory
 * untouched), every bind check (MW_BIND_ERR), local invalidation, SEND
 * with Invalidate, deallocation and deregistration. */
#include "engine_harness.h"

enum {
    MEM = 64 << 10,
    WIN_OFF = 4096, /* the window opens [WIN_OFF, WIN_OFF + WIN_LEN) of node 1's region */
    WIN_LEN = 8192,
    RIGHTS = SR_ACCESS_REMOTE_WRITE | SR_ACCESS_REMOTE_READ | SR_ACCESS_REMOTE_ATOMIC,
};

struct fx {
    struct harness h;
    struct h_pair pr;
    uint8_t *mem[2];
    struct sr_mr *mr[2];
};

static void pattern(uint8_t *p, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (uint8_t)(seed + i * 7 + (i >> 8));
}

/* Node 1's region has the rights mr1_access; node 0's has every right. */
static void fx_init(struct fx *f, uint32_t mr1_access)
{
    h_init(&f->h, 0);
    struct h_qp_opts o = {
        .type = SR_QPT_RC, .mtu = 1024, .retry_cnt = 3, .rnr_retry = 3, .access = RIGHTS};
    h_connect(&f->h, &f->pr, &o);
    for (int i = 0; i < 2; i++) {
        f->mem[i] = calloc(1, MEM);
        uint32_t acc = i ? mr1_access : (SR_ACCESS_LOCAL_WRITE | RIGHTS);
        SR_CHECK_EQ(sr_mr_reg(f->pr.pd[i], f->mem[i], MEM, (uintptr_t)f->mem[i], acc, &f->mr[i]),
                    0);
    }
    pattern(f->mem[0], MEM, 1);
    pattern(f->mem[1], MEM, 2);
}

static void fx_fini(struct fx *f)
{
    h_fini(&f->h);
    free(f->mem[0]);
    free(f->mem[1]);
}

static uint64_t win_va(const struct fx *f)
{
    return (uintptr_t)f->mem[1] + WIN_OFF;
}

struct wc_wait {
    struct sr_cq *cq;
    struct sr_wc wc;
};
static bool got_wc(void *arg)
{
    struct wc_wait *w = arg;
    return sr_cq_poll(w->cq, 1, &w->wc) == 1;
}
/* One completion from cq; status GENERAL_ERR if none came. */
static struct sr_wc wait_wc(struct fx *f, struct sr_cq *cq)
{
    struct wc_wait w = {.cq = cq, .wc = {.status = SR_WC_GENERAL_ERR}};
    if (!h_run(&f->h, got_wc, &w, 50000000))
        w.wc.status = SR_WC_GENERAL_ERR;
    return w.wc;
}

/* Posts a bind of mw on qp (of node 1), whose send CQ is cq; returns the
 * completion. */
static struct sr_wc bind_on(struct fx *f, struct sr_qp *qp, struct sr_cq *cq, struct sr_mw *mw,
                            uint32_t rkey, struct sr_mr *mr, uint64_t addr, uint64_t len,
                            uint32_t access)
{
    struct sr_send_wr wr = {.wr_id = 77,
                            .opcode = SR_WR_BIND_MW,
                            .send_flags = SR_SEND_SIGNALED,
                            .bind = {.mw = sr_mw_handle(mw),
                                     .rkey = rkey,
                                     .mr_lkey = mr ? sr_mr_lkey(mr) : 0,
                                     .addr = addr,
                                     .length = len,
                                     .access = access}};
    SR_CHECK_EQ(sr_qp_post_send(qp, &wr, f->h.now), 0);
    struct sr_wc wc = wait_wc(f, cq);
    SR_CHECK_EQ(wc.wr_id, 77);
    SR_CHECK_EQ(wc.opcode, SR_WC_BIND_MW);
    return wc;
}

static uint32_t next_key(uint32_t rkey)
{
    return (rkey & ~0xffu) | ((rkey + 1) & 0xff);
}

/* Binds the window [WIN_OFF, +WIN_LEN) with access; checks success. */
static uint32_t bind_ok(struct fx *f, struct sr_mw *mw, uint32_t access)
{
    uint32_t key = next_key(sr_mw_rkey(mw));
    struct sr_wc wc =
        bind_on(f, f->pr.qp[1], f->pr.scq[1], mw, key, f->mr[1], win_va(f), WIN_LEN, access);
    SR_CHECK_EQ(wc.status, SR_WC_SUCCESS);
    SR_CHECK_EQ(sr_mw_rkey(mw), key);
    return key;
}

/* Node 0 does op of len bytes at remote va with rkey, through qp (default
 * the pair's); returns the completion status. Local data at offset 0. */
static enum sr_wc_status remote_op_on(struct fx *f, struct sr_qp *qp, struct sr_cq *cq,
                                      enum sr_wr_opcode op, uint32_t rkey, uint64_t va,
                                      uint32_t len)
{
    struct sr_sge sg = {(uintptr_t)f->mem[0], len, sr_mr_lkey(f->mr[0])};
    struct sr_send_wr wr = {.wr_id = 5,
                            .sg_list = &sg,
                            .num_sge = 1,
                            .opcode = op,
                            .send_flags = SR_SEND_SIGNALED,
                            .remote_addr = va,
                            .rkey = rkey,
                            .compare_add = 3};
    SR_CHECK_EQ(sr_qp_post_send(qp, &wr, f->h.now), 0);
    struct sr_wc wc = wait_wc(f, cq);
    SR_CHECK_EQ(wc.wr_id, 5);
    return wc.status;
}
static enum sr_wc_status remote_op(struct fx *f, enum sr_wr_opcode op, uint32_t rkey, uint64_t va,
                                   uint32_t len)
{
    return remote_op_on(f, f->pr.qp[0], f->pr.scq[0], op, rkey, va, len);
}

/* ---- a window grants what it was bound with ---- */
static void test_use(void)
{
    static const struct {
        const char *name;
        enum sr_mw_type type;
        enum sr_wr_opcode op;
        uint32_t len;
    } rows[] = {
        {"type 1 write, whole window, 8 packets", SR_MW_TYPE_1, SR_WR_RDMA_WRITE, WIN_LEN},
        {"type 1 read, whole window", SR_MW_TYPE_1, SR_WR_RDMA_READ, WIN_LEN},
        {"type 2 write", SR_MW_TYPE_2, SR_WR_RDMA_WRITE, 3000},
        {"type 2 read", SR_MW_TYPE_2, SR_WR_RDMA_READ, 100},
        {"type 2 fetch and add", SR_MW_TYPE_2, SR_WR_ATOMIC_FETCH_AND_ADD, 8},
    };
    for (size_t i = 0; i < SR_ARRAY_SIZE(rows); i++) {
        sr_test_ctx = rows[i].name;
        struct fx f;
        fx_init(&f, SR_ACCESS_LOCAL_WRITE | SR_ACCESS_MW_BIND);
        struct sr_mw *mw;
        SR_CHECK_EQ(sr_mw_alloc(f.pr.pd[1], rows[i].type, &mw), 0);
        uint32_t key = bind_ok(&f, mw, RIGHTS);
        /* the region itself grants nothing remote */
        SR_CHECK(key != sr_mr_rkey(f.mr[1]));
        uint8_t want0[MEM], want1[MEM];
        memcpy(want0, f.mem[0], MEM);
        memcpy(want1, f.mem[1], MEM);
        uint64_t last = win_va(&f) + WIN_LEN - rows[i].len; /* ends at the window's end */
        SR_CHECK_EQ(remote_op(&f, rows[i].op, key, last, rows[i].len), SR_WC_SUCCESS);
        size_t at = WIN_OFF + WIN_LEN - rows[i].len;
        if (rows[i].op == SR_WR_RDMA_WRITE) {
            memcpy(want1 + at, f.mem[0], rows[i].len);
        } else if (rows[i].op == SR_WR_RDMA_READ) {
            memcpy(want0, f.mem[1] + at, rows[i].len);
        } else {
            uint64_t v;
            memcpy(&v, want1 + at, 8);
            memcpy(want0, &v, 8); /* the original value comes back */
            v += 3;
            memcpy(want1 + at, &v, 8);
        }
        SR_CHECK_MEM(f.mem[0], want0, MEM);
        SR_CHECK_MEM(f.mem[1], want1, MEM);
        SR_CHECK_EQ(sr_mw_dealloc(mw), 0);
        fx_fini(&f);
    }
}

/* A zero-based type 2 window is addressed from 0. */
static void test_zero_based(void)
{
    struct fx f;
    fx_init(&f, SR_ACCESS_LOCAL_WRITE | SR_ACCESS_MW_BIND);
    struct sr_mw *mw;
    SR_CHECK_EQ(sr_mw_alloc(f.pr.pd[1], SR_MW_TYPE_2, &mw), 0);
    uint32_t key = bind_ok(&f, mw, SR_ACCESS_REMOTE_WRITE | SR_ACCESS_ZERO_BASED);
    SR_CHECK_EQ(remote_op(&f, SR_WR_RDMA_WRITE, key, 16, 64), SR_WC_SUCCESS);
    SR_CHECK_MEM(f.mem[1] + WIN_OFF + 16, f.mem[0], 64);
    /* the window's length bounds it from 0 too */
    SR_CHECK_EQ(remote_op(&f, SR_WR_RDMA_WRITE, key, WIN_LEN - 8, 16), SR_WC_REM_ACCESS_ERR);
    fx_fini(&f);
}

/* ---- and refuses everything else, touching nothing ---- */
enum deny {
    D_PAST_END,     /* one byte past the window, inside the region */
    D_BEFORE,       /* one byte before the window */
    D_READ_ONLY,    /* write to a window bound for read */
    D_NO_ATOMIC,    /* atomic on a window bound for write and read */
    D_OLD_KEY,      /* the key before a rebind (type 1) */
    D_UNBOUND,      /* type 1 after a zero-length bind */
    D_REGION_KEY,   /* the region's own key: it has no remote rights */
    D_WRONG_QP,     /* type 2 window through another QP of the same PD */
    D_DEALLOCATED,  /* the window was deallocated */
    D_LOCAL_INV,    /* type 2 after LOCAL_INV */
    D_QP_DESTROYED, /* type 2 whose QP was destroyed */
};

static void test_deny(void)
{
    static const struct {
        const char *name;
        enum deny kind;
        enum sr_mw_type type;
        enum sr_wr_opcode op;
    } rows[] = {
        {"write past the window's end", D_PAST_END, SR_MW_TYPE_1, SR_WR_RDMA_WRITE},
        {"read past the window's end", D_PAST_END, SR_MW_TYPE_2, SR_WR_RDMA_READ},
        {"write before the window", D_BEFORE, SR_MW_TYPE_2, SR_WR_RDMA_WRITE},
        {"write to a read-only window", D_READ_ONLY, SR_MW_TYPE_1, SR_WR_RDMA_WRITE},
        {"atomic without atomic rights", D_NO_ATOMIC, SR_MW_TYPE_2, SR_WR_ATOMIC_CMP_AND_SWP},
        {"type 1: the key before a rebind", D_OLD_KEY, SR_MW_TYPE_1, SR_WR_RDMA_WRITE},
        {"type 1: unbound by a zero-length bind", D_UNBOUND, SR_MW_TYPE_1, SR_WR_RDMA_READ},
        {"the region's own key", D_REGION_KEY, SR_MW_TYPE_1, SR_WR_RDMA_WRITE},
        {"type 2 through another QP", D_WRONG_QP, SR_MW_TYPE_2, SR_WR_RDMA_WRITE},
        {"type 1 deallocated", D_DEALLOCATED, SR_MW_TYPE_1, SR_WR_RDMA_WRITE},
        {"type 2 deallocated", D_DEALLOCATED, SR_MW_TYPE_2, SR_WR_RDMA_READ},
        {"type 2 after LOCAL_INV", D_LOCAL_INV, SR_MW_TYPE_2, SR_WR_RDMA_WRITE},
        {"type 2 whose QP is gone", D_QP_DESTROYED, SR_MW_TYPE_2, SR_WR_RDMA_WRITE},
    };
    for (size_t i = 0; i < SR_ARRAY_SIZE(rows); i++) {
        sr_test_ctx = rows[i].name;
        enum deny k = rows[i].kind;
        struct fx f;
        fx_init(&f, SR_ACCESS_LOCAL_WRITE | SR_ACCESS_MW_BIND);
        /* a second pair on the same PDs, for D_WRONG_QP and D_QP_DESTROYED */
        struct h_pair p2;
        struct h_qp_opts o = {.type = SR_QPT_RC,
                              .mtu = 1024,
                              .retry_cnt = 3,
                              .access = RIGHTS,
                              .pd = {f.pr.pd[0], f.pr.pd[1]}};
        h_connect(&f.h, &p2, &o);
        struct sr_mw *mw;
        SR_CHECK_EQ(sr_mw_alloc(f.pr.pd[1], rows[i].type, &mw), 0);
        uint32_t rights = k == D_READ_ONLY   ? SR_ACCESS_REMOTE_READ
                          : k == D_NO_ATOMIC ? SR_ACCESS_REMOTE_READ | SR_ACCESS_REMOTE_WRITE
                                             : RIGHTS;
        uint32_t key = bind_ok(&f, mw, rights);
        uint64_t va = win_va(&f);
        uint32_t len = 8;
        struct sr_qp *via = f.pr.qp[0];
        struct sr_cq *cq = f.pr.scq[0];
        switch (k) {
        case D_PAST_END:
            va += WIN_LEN - 7;
            break;
        case D_BEFORE:
            va -= 1;
            break;
        case D_OLD_KEY:
            bind_ok(&f, mw, RIGHTS);
            break;
        case D_UNBOUND: {
            struct sr_wc wc =
                bind_on(&f, f.pr.qp[1], f.pr.scq[1], mw, next_key(key), NULL, 0, 0, 0);
            SR_CHECK_EQ(wc.status, SR_WC_SUCCESS);
            key = sr_mw_rkey(mw);
            break;
        }
        case D_REGION_KEY:
            key = sr_mr_rkey(f.mr[1]);
            break;
        case D_WRONG_QP:
            via = p2.qp[0];
            cq = p2.scq[0];
            break;
        case D_DEALLOCATED:
            SR_CHECK_EQ(sr_mw_dealloc(mw), 0);
            mw = NULL;
            break;
        case D_LOCAL_INV: {
            struct sr_send_wr inv = {.wr_id = 9,
                                     .opcode = SR_WR_LOCAL_INV,
                                     .send_flags = SR_SEND_SIGNALED,
                                     .invalidate_rkey = key};
            SR_CHECK_EQ(sr_qp_post_send(f.pr.qp[1], &inv, f.h.now), 0);
            struct sr_wc wc = wait_wc(&f, f.pr.scq[1]);
            SR_CHECK_EQ(wc.status, SR_WC_SUCCESS);
            SR_CHECK_EQ(wc.opcode, SR_WC_LOCAL_INV);
            /* Free again: a bind with a new key works */
            break;
        }
        case D_QP_DESTROYED:
            SR_CHECK_EQ(sr_qp_destroy(f.pr.qp[1]), 0);
            f.pr.qp[1] = NULL;
            via = p2.qp[0]; /* the peer's QP of the same PD */
            cq = p2.scq[0];
            /* the region is free to go: no window is bound to it now */
            break;
        default:
            break;
        }
        uint8_t before[MEM];
        memcpy(before, f.mem[1], MEM);
        enum sr_wc_status st = remote_op_on(&f, via, cq, rows[i].op, key, va, len);
        SR_CHECK_EQ(st, SR_WC_REM_ACCESS_ERR);
        SR_CHECK_MEM(f.mem[1], before, MEM);
        if (k == D_QP_DESTROYED)
            SR_CHECK_EQ(sr_mr_dereg(f.mr[1]), 0);
        if (mw)
            SR_CHECK_EQ(sr_mw_dealloc(mw), 0);
        fx_fini(&f);
    }
}

/* After LOCAL_INV, a type 2 window binds again under a new key, which
 * works; the invalidated key stays dead. */
static void test_rebind_after_invalidate(void)
{
    struct fx f;
    fx_init(&f, SR_ACCESS_LOCAL_WRITE | SR_ACCESS_MW_BIND);
    struct sr_mw *mw;
    SR_CHECK_EQ(sr_mw_alloc(f.pr.pd[1], SR_MW_TYPE_2, &mw), 0);
    uint32_t k1 = bind_ok(&f, mw, RIGHTS);
    struct sr_send_wr inv = {.wr_id = 9, .opcode = SR_WR_LOCAL_INV, .invalidate_rkey = k1};
    SR_CHECK_EQ(sr_qp_post_send(f.pr.qp[1], &inv, f.h.now), 0); /* unsignaled */
    uint32_t k2 = bind_ok(&f, mw, RIGHTS);
    SR_CHECK(k1 != k2);
    SR_CHECK_EQ(remote_op(&f, SR_WR_RDMA_WRITE, k2, win_va(&f), 32), SR_WC_SUCCESS);
    SR_CHECK_MEM(f.mem[1] + WIN_OFF, f.mem[0], 32);
    SR_CHECK_EQ(remote_op(&f, SR_WR_RDMA_WRITE, k1, win_va(&f), 32), SR_WC_REM_ACCESS_ERR);
    fx_fini(&f);
}

/* ---- SEND with Invalidate ---- */
static void post_recv1(struct fx *f)
{
    struct sr_sge rs = {(uintptr_t)f->mem[1], 256, sr_mr_lkey(f->mr[1])};
    struct sr_recv_wr rw = {.wr_id = 31, .sg_list = &rs, .num_sge = 1};
    SR_CHECK_EQ(sr_qp_post_recv(f->pr.qp[1], &rw), 0);
}

static enum sr_wc_status send_inv(struct fx *f, uint32_t key, struct sr_wc *recv)
{
    post_recv1(f);
    struct sr_sge sg = {(uintptr_t)f->mem[0], 100, sr_mr_lkey(f->mr[0])};
    struct sr_send_wr wr = {.wr_id = 6,
                            .sg_list = &sg,
                            .num_sge = 1,
                            .opcode = SR_WR_SEND_WITH_INV,
                            .send_flags = SR_SEND_SIGNALED,
                            .invalidate_rkey = key};
    SR_CHECK_EQ(sr_qp_post_send(f->pr.qp[0], &wr, f->h.now), 0);
    struct sr_wc wc = wait_wc(f, f->pr.scq[0]);
    SR_CHECK_EQ(wc.wr_id, 6);
    SR_CHECK_EQ(wc.opcode, SR_WC_SEND);
    *recv = wait_wc(f, f->pr.rcq[1]);
    SR_CHECK_EQ(recv->wr_id, 31);
    return wc.status;
}

static void test_send_with_inv(void)
{
    sr_test_ctx = "invalidates the window";
    struct fx f;
    fx_init(&f, SR_ACCESS_LOCAL_WRITE | SR_ACCESS_MW_BIND);
    struct sr_mw *mw;
    SR_CHECK_EQ(sr_mw_alloc(f.pr.pd[1], SR_MW_TYPE_2, &mw), 0);
    uint32_t key = bind_ok(&f, mw, RIGHTS);
    struct sr_wc rwc;
    SR_CHECK_EQ(send_inv(&f, key, &rwc), SR_WC_SUCCESS);
    SR_CHECK_EQ(rwc.status, SR_WC_SUCCESS);
    SR_CHECK_EQ(rwc.opcode, SR_WC_RECV);
    SR_CHECK_EQ(rwc.byte_len, 100);
    SR_CHECK(rwc.wc_flags & SR_WC_WITH_INV);
    SR_CHECK_EQ(rwc.imm, key); /* wc.invalidated_rkey */
    SR_CHECK_MEM(f.mem[1], f.mem[0], 100);
    SR_CHECK_EQ(remote_op(&f, SR_WR_RDMA_READ, key, win_va(&f), 8), SR_WC_REM_ACCESS_ERR);
    SR_CHECK_EQ(sr_mw_dealloc(mw), 0);
    fx_fini(&f);

    static const struct {
        const char *name;
        int kind; /* 0 region key, 1 type 1 window, 2 unknown window key, 3 other QP's window */
    } bad[] = {
        {"a region's key is refused", 0},
        {"a type 1 window is refused", 1},
        {"an unknown window key is refused", 2},
        {"a window of another QP is refused", 3},
    };
    for (size_t i = 0; i < SR_ARRAY_SIZE(bad); i++) {
        sr_test_ctx = bad[i].name;
        fx_init(&f, SR_ACCESS_LOCAL_WRITE | SR_ACCESS_MW_BIND | SR_ACCESS_REMOTE_READ);
        struct h_pair p2;
        struct h_qp_opts o = {
            .type = SR_QPT_RC, .mtu = 1024, .access = RIGHTS, .pd = {f.pr.pd[0], f.pr.pd[1]}};
        h_connect(&f.h, &p2, &o);
        SR_CHECK_EQ(sr_mw_alloc(f.pr.pd[1], bad[i].kind == 1 ? SR_MW_TYPE_1 : SR_MW_TYPE_2, &mw),
                    0);
        uint32_t k = sr_mr_rkey(f.mr[1]);
        if (bad[i].kind == 3) {
            /* bound through p2's QP on node 1 */
            k = next_key(sr_mw_rkey(mw));
            struct sr_wc wc =
                bind_on(&f, p2.qp[1], p2.scq[1], mw, k, f.mr[1], win_va(&f), WIN_LEN, RIGHTS);
            SR_CHECK_EQ(wc.status, SR_WC_SUCCESS);
        } else if (bad[i].kind) {
            k = bind_ok(&f, mw, RIGHTS);
            if (bad[i].kind == 2)
                k ^= 0x100;
        }
        SR_CHECK_EQ(send_inv(&f, k, &rwc), SR_WC_REM_INV_REQ_ERR);
        SR_CHECK_EQ(rwc.status, SR_WC_REM_INV_REQ_ERR);
        /* the region and a bound window still work (through another QP) */
        if (bad[i].kind == 0)
            SR_CHECK_EQ(remote_op_on(&f, p2.qp[0], p2.scq[0], SR_WR_RDMA_READ, k, win_va(&f), 8),
                        SR_WC_SUCCESS);
        if (bad[i].kind == 3)
            SR_CHECK_EQ(remote_op_on(&f, p2.qp[0], p2.scq[0], SR_WR_RDMA_READ, k, win_va(&f), 8),
                        SR_WC_SUCCESS);
        SR_CHECK_EQ(sr_mw_dealloc(mw), 0);
        fx_fini(&f);
    }
}

/* ---- LOCAL_INV errors ---- */
static void test_local_inv_errors(void)
{
    static const struct {
        const char *name;
        int kind; /* 0 region key, 1 type 1 window, 2 unbound type 2 */
    } rows[] = {
        {"LOCAL_INV of a region's key", 0},
        {"LOCAL_INV of a type 1 window", 1},
        {"LOCAL_INV of a Free type 2 window", 2},
    };
    for (size_t i = 0; i < SR_ARRAY_SIZE(rows); i++) {
        sr_test_ctx = rows[i].name;
        struct fx f;
        fx_init(&f, SR_ACCESS_LOCAL_WRITE | SR_ACCESS_MW_BIND);
        struct sr_mw *mw;
        SR_CHECK_EQ(sr_mw_alloc(f.pr.pd[1], rows[i].kind == 1 ? SR_MW_TYPE_1 : SR_MW_TYPE_2, &mw),
                    0);
        uint32_t k = rows[i].kind == 0   ? sr_mr_rkey(f.mr[1])
                     : rows[i].kind == 1 ? bind_ok(&f, mw, RIGHTS)
                                         : sr_mw_rkey(mw);
        struct sr_send_wr inv = {.wr_id = 9,
                                 .opcode = SR_WR_LOCAL_INV,
                                 .send_flags = SR_SEND_SIGNALED,
                                 .invalidate_rkey = k};
        SR_CHECK_EQ(sr_qp_post_send(f.pr.qp[1], &inv, f.h.now), 0);
        struct sr_wc wc = wait_wc(&f, f.pr.scq[1]);
        SR_CHECK_EQ(wc.status, SR_WC_LOC_QP_OP_ERR);
        struct sr_qp_attr a;
        sr_qp_query(f.pr.qp[1], &a, NULL);
        SR_CHECK_EQ(a.qp_state, SR_QPS_ERR);
        SR_CHECK_EQ(sr_mw_dealloc(mw), 0);
        fx_fini(&f);
    }
}

/* ---- bind checks: each fails the bind WR with MW_BIND_ERR ---- */
enum bind_err {
    B_NO_MW_BIND,   /* region without MW_BIND (C10-73) */
    B_PAST_REGION,  /* window beyond the region (C10-75) */
    B_BEFORE,       /* window starting before the region */
    B_TYPE2_BOUND,  /* type 2 bound twice without invalidation (o10-37.2.30) */
    B_TYPE2_EMPTY,  /* type 2 with zero length (o10-37.2.40) */
    B_TYPE1_ZB,     /* zero-based type 1 (o10-36.2.2) */
    B_WRITE_NO_LW,  /* write rights onto a region without local write (C10-74) */
    B_MW_OTHER_PD,  /* window of another PD than the QP's (C10-72) */
    B_MR_OTHER_PD,  /* region of another PD than the window's */
    B_SAME_KEY,     /* the key's low byte unchanged */
    B_OTHER_INDEX,  /* the key names another window's index */
    B_STALE_HANDLE, /* the window was deallocated */
    B_BAD_LKEY,     /* no such region */
};

static void test_bind_errors(void)
{
    static const struct {
        const char *name;
        enum bind_err kind;
        enum sr_mw_type type;
    } rows[] = {
        {"region without MW_BIND", B_NO_MW_BIND, SR_MW_TYPE_1},
        {"window past the region's end", B_PAST_REGION, SR_MW_TYPE_2},
        {"window before the region", B_BEFORE, SR_MW_TYPE_1},
        {"type 2 already bound", B_TYPE2_BOUND, SR_MW_TYPE_2},
        {"type 2 with zero length", B_TYPE2_EMPTY, SR_MW_TYPE_2},
        {"zero-based type 1", B_TYPE1_ZB, SR_MW_TYPE_1},
        {"write window on a region without local write", B_WRITE_NO_LW, SR_MW_TYPE_2},
        {"window of another PD", B_MW_OTHER_PD, SR_MW_TYPE_2},
        {"type 1 window of another PD", B_MW_OTHER_PD, SR_MW_TYPE_1},
        {"region of another PD", B_MR_OTHER_PD, SR_MW_TYPE_1},
        {"same key", B_SAME_KEY, SR_MW_TYPE_2},
        {"key of another index", B_OTHER_INDEX, SR_MW_TYPE_2},
        {"deallocated window", B_STALE_HANDLE, SR_MW_TYPE_2},
        {"unknown region", B_BAD_LKEY, SR_MW_TYPE_1},
    };
    for (size_t i = 0; i < SR_ARRAY_SIZE(rows); i++) {
        sr_test_ctx = rows[i].name;
        enum bind_err k = rows[i].kind;
        struct fx f;
        uint32_t acc = SR_ACCESS_LOCAL_WRITE | SR_ACCESS_MW_BIND;
        if (k == B_NO_MW_BIND)
            acc = SR_ACCESS_LOCAL_WRITE | RIGHTS;
        if (k == B_WRITE_NO_LW)
            acc = SR_ACCESS_MW_BIND | SR_ACCESS_REMOTE_READ;
        fx_init(&f, acc);
        struct sr_pd *other;
        SR_CHECK_EQ(sr_pd_alloc(f.h.eng[1], &other), 0);
        struct sr_mw *mw;
        SR_CHECK_EQ(sr_mw_alloc(k == B_MW_OTHER_PD ? other : f.pr.pd[1], rows[i].type, &mw), 0);
        struct sr_mr *mr = f.mr[1], *omr = NULL;
        if (k == B_MR_OTHER_PD) {
            SR_CHECK_EQ(sr_mr_reg(other, f.mem[1], MEM, (uintptr_t)f.mem[1],
                                  SR_ACCESS_LOCAL_WRITE | SR_ACCESS_MW_BIND, &omr),
                        0);
            mr = omr;
        }
        uint32_t key = next_key(sr_mw_rkey(mw));
        uint64_t addr = win_va(&f), len = WIN_LEN;
        uint32_t rights = RIGHTS;
        struct sr_mw *mw2 = NULL;
        switch (k) {
        case B_PAST_REGION:
            addr = (uintptr_t)f.mem[1] + MEM - WIN_LEN + 1;
            break;
        case B_BEFORE:
            addr = (uintptr_t)f.mem[1] - 1;
            break;
        case B_TYPE2_BOUND:
            key = next_key(bind_ok(&f, mw, RIGHTS));
            break;
        case B_TYPE2_EMPTY:
            len = 0;
            break;
        case B_TYPE1_ZB:
            rights |= SR_ACCESS_ZERO_BASED;
            break;
        case B_WRITE_NO_LW:
            rights = SR_ACCESS_REMOTE_WRITE;
            break;
        case B_SAME_KEY:
            key = sr_mw_rkey(mw);
            break;
        case B_OTHER_INDEX:
            SR_CHECK_EQ(sr_mw_alloc(f.pr.pd[1], SR_MW_TYPE_2, &mw2), 0);
            key = next_key(sr_mw_rkey(mw2));
            break;
        default:
            break;
        }
        struct sr_send_wr wr = {.wr_id = 78,
                                .opcode = SR_WR_BIND_MW,
                                .send_flags = SR_SEND_SIGNALED,
                                .bind = {.mw = sr_mw_handle(mw),
                                         .rkey = key,
                                         .mr_lkey = k == B_BAD_LKEY ? 0x7fff00 : sr_mr_lkey(mr),
                                         .addr = addr,
                                         .length = len,
                                         .access = rights}};
        if (k == B_STALE_HANDLE) {
            SR_CHECK_EQ(sr_mw_dealloc(mw), 0);
            mw = NULL;
        }
        uint32_t key_before = mw ? sr_mw_rkey(mw) : 0;
        SR_CHECK_EQ(sr_qp_post_send(f.pr.qp[1], &wr, f.h.now), 0);
        struct sr_wc wc = wait_wc(&f, f.pr.scq[1]);
        SR_CHECK_EQ(wc.wr_id, 78);
        SR_CHECK_EQ(wc.status, SR_WC_MW_BIND_ERR);
        if (mw) {
            SR_CHECK_EQ(sr_mw_rkey(mw), key_before); /* nothing changed */
            SR_CHECK_EQ(sr_mw_dealloc(mw), 0);
        }
        if (mw2)
            SR_CHECK_EQ(sr_mw_dealloc(mw2), 0);
        if (omr)
            SR_CHECK_EQ(sr_mr_dereg(omr), 0);
        SR_CHECK_EQ(sr_pd_free(other), 0);
        fx_fini(&f);
    }
}

/* ---- lifetimes ---- */
static void test_lifetimes(void)
{
    struct fx f;
    fx_init(&f, SR_ACCESS_LOCAL_WRITE | SR_ACCESS_MW_BIND);
    struct sr_mw *mw;
    SR_CHECK_EQ(sr_mw_alloc(f.pr.pd[1], SR_MW_TYPE_1, &mw), 0);
    SR_CHECK_EQ(sr_mw_alloc(f.pr.pd[1], 3, &(struct sr_mw *){NULL}), SR_ERR_INVAL);
    bind_ok(&f, mw, RIGHTS);
    /* as rxe: a region with bound windows stays (EINVAL at the verbs) */
    SR_CHECK_EQ(sr_mr_dereg(f.mr[1]), SR_ERR_INVAL);
    /* and a PD with windows is busy */
    SR_CHECK_EQ(sr_pd_free(f.pr.pd[1]), SR_ERR_BUSY);
    /* a window key is no L_Key: a send gathering through it fails locally */
    struct sr_sge sg = {win_va(&f), 16, sr_mw_rkey(mw)};
    struct sr_send_wr wr = {.wr_id = 4,
                            .sg_list = &sg,
                            .num_sge = 1,
                            .opcode = SR_WR_SEND,
                            .send_flags = SR_SEND_SIGNALED};
    SR_CHECK_EQ(sr_qp_post_send(f.pr.qp[1], &wr, f.h.now), 0);
    struct sr_wc wc = wait_wc(&f, f.pr.scq[1]);
    SR_CHECK_EQ(wc.status, SR_WC_LOC_PROT_ERR);
    SR_CHECK_EQ(sr_mw_dealloc(mw), 0);
    SR_CHECK_EQ(sr_mr_dereg(f.mr[1]), 0);
    fx_fini(&f);
}

/* A bind behind an unacknowledged SEND completes after it, in order. */
static void test_order(void)
{
    struct fx f;
    fx_init(&f, SR_ACCESS_LOCAL_WRITE | SR_ACCESS_MW_BIND);
    struct sr_mw *mw;
    SR_CHECK_EQ(sr_mw_alloc(f.pr.pd[1], SR_MW_TYPE_2, &mw), 0);
    struct sr_sge rs = {(uintptr_t)f.mem[0], 256, sr_mr_lkey(f.mr[0])};
    struct sr_recv_wr rw = {.wr_id = 1, .sg_list = &rs, .num_sge = 1};
    SR_CHECK_EQ(sr_qp_post_recv(f.pr.qp[0], &rw), 0);
    struct sr_sge sg = {(uintptr_t)f.mem[1], 64, sr_mr_lkey(f.mr[1])};
    struct sr_send_wr send = {.wr_id = 2,
                              .sg_list = &sg,
                              .num_sge = 1,
                              .opcode = SR_WR_SEND,
                              .send_flags = SR_SEND_SIGNALED};
    uint32_t key = next_key(sr_mw_rkey(mw));
    struct sr_send_wr b = {.wr_id = 3,
                           .opcode = SR_WR_BIND_MW,
                           .send_flags = SR_SEND_SIGNALED,
                           .bind = {.mw = sr_mw_handle(mw),
                                    .rkey = key,
                                    .mr_lkey = sr_mr_lkey(f.mr[1]),
                                    .addr = win_va(&f),
                                    .length = WIN_LEN,
                                    .access = RIGHTS}};
    SR_CHECK_EQ(sr_qp_post_send(f.pr.qp[1], &send, f.h.now), 0);
    SR_CHECK_EQ(sr_qp_post_send(f.pr.qp[1], &b, f.h.now), 0);
    struct sr_wc w1 = wait_wc(&f, f.pr.scq[1]), w2 = wait_wc(&f, f.pr.scq[1]);
    SR_CHECK_EQ(w1.wr_id, 2);
    SR_CHECK_EQ(w1.status, SR_WC_SUCCESS);
    SR_CHECK_EQ(w2.wr_id, 3);
    SR_CHECK_EQ(w2.status, SR_WC_SUCCESS);
    SR_CHECK_EQ(w2.opcode, SR_WC_BIND_MW);
    SR_CHECK_EQ(w2.byte_len, 0);
    SR_CHECK_EQ(remote_op(&f, SR_WR_RDMA_WRITE, key, win_va(&f), 64), SR_WC_SUCCESS);
    fx_fini(&f);
}

int main(void)
{
    SR_RUN(test_use);
    SR_RUN(test_zero_based);
    SR_RUN(test_deny);
    SR_RUN(test_rebind_after_invalidate);
    SR_RUN(test_send_with_inv);
    SR_RUN(test_local_inv_errors);
    SR_RUN(test_bind_errors);
    SR_RUN(test_lifetimes);
    SR_RUN(test_order);
    return SR_TEST_RESULT();
}

/* ops_test.c: data operations between two RC QPs in two processes, memory
 * compared byte for byte on the side that did not post: RDMA WRITE (with
 * and without immediate), READ, SEND (with and without immediate), atomics,
 * multi-SGE gather/scatter, inline data and unsignaled work requests, each
 * through ibv_post_send and, where the extended API has the operation,
 * through ibv_wr_*. The peer is the vt agent. */
#include "vt.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum api { API_POST, API_WR };
static const char *const api_name[] = {"post_send", "wr_api"};

enum {
    LBUF_LEN = (4 << 20) + (64 << 10),
    ROFF = 8192 + 5, /* odd offsets: address translation must be exact */
    LOFF = 4096 + 3,
    RECV_AREA = 3 << 20, /* agent MR 0: receive buffers for WRITE_IMM rows */
    GUARD = 64,
    SEED_OLD = 0x10,  /* remote content before an operation */
    SEED_LOLD = 0x30, /* local content before a READ */
    MIB = 1 << 20,
};

struct ops {
    struct vt_dev d;
    struct vt_buf l;
    struct vt_remote_mr r;
    struct vt_qp qp[2]; /* [API_POST] classic, [API_WR] created with ibv_create_qp_ex */
    struct vt_qp_info rinfo[2];
};

/* One work request in a form both APIs can post. */
struct op {
    enum ibv_wr_opcode opcode;
    uint64_t wr_id;
    unsigned int flags;
    uint32_t imm; /* network order */
    uint64_t raddr;
    uint32_t rkey;
    uint64_t compare_add, swap;
    int nsge;
    struct ibv_sge sge[VT_MAX_SGE];
};

static int post(struct ops *o, enum api api, const struct op *w)
{
    struct vt_qp *q = &o->qp[api];
    if (api == API_POST) {
        struct ibv_send_wr wr, *bad = NULL;
        memset(&wr, 0, sizeof(wr));
        wr.wr_id = w->wr_id;
        wr.sg_list = (struct ibv_sge *)w->sge;
        wr.num_sge = w->nsge;
        wr.opcode = w->opcode;
        wr.send_flags = w->flags;
        wr.imm_data = w->imm;
        if (w->opcode == IBV_WR_ATOMIC_CMP_AND_SWP || w->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD) {
            wr.wr.atomic.remote_addr = w->raddr;
            wr.wr.atomic.rkey = w->rkey;
            wr.wr.atomic.compare_add = w->compare_add;
            wr.wr.atomic.swap = w->swap;
        } else {
            wr.wr.rdma.remote_addr = w->raddr;
            wr.wr.rdma.rkey = w->rkey;
        }
        int r = ibv_post_send(q->qp, &wr, &bad);
        if (r)
            VT_CHECK(bad == &wr);
        return r;
    }
    struct ibv_qp_ex *x = q->qpx;
    ibv_wr_start(x);
    x->wr_id = w->wr_id;
    /* inline is chosen by the data setter, not by a flag, in this API */
    x->wr_flags = w->flags & ~(unsigned int)IBV_SEND_INLINE;
    switch (w->opcode) {
    case IBV_WR_RDMA_WRITE:
        ibv_wr_rdma_write(x, w->rkey, w->raddr);
        break;
    case IBV_WR_RDMA_WRITE_WITH_IMM:
        ibv_wr_rdma_write_imm(x, w->rkey, w->raddr, w->imm);
        break;
    case IBV_WR_SEND:
        ibv_wr_send(x);
        break;
    case IBV_WR_SEND_WITH_IMM:
        ibv_wr_send_imm(x, w->imm);
        break;
    case IBV_WR_RDMA_READ:
        ibv_wr_rdma_read(x, w->rkey, w->raddr);
        break;
    case IBV_WR_ATOMIC_CMP_AND_SWP:
        ibv_wr_atomic_cmp_swp(x, w->rkey, w->raddr, w->compare_add, w->swap);
        break;
    case IBV_WR_ATOMIC_FETCH_AND_ADD:
        ibv_wr_atomic_fetch_add(x, w->rkey, w->raddr, w->compare_add);
        break;
    default:
        VT_CHECKF(false, "opcode %d not in the extended API table", (int)w->opcode);
        ibv_wr_abort(x);
        return -1;
    }
    if (w->flags & IBV_SEND_INLINE) {
        struct ibv_data_buf b[VT_MAX_SGE];
        for (int i = 0; i < w->nsge; i++)
            b[i] = (struct ibv_data_buf){.addr = (void *)(uintptr_t)w->sge[i].addr,
                                         .length = w->sge[i].length};
        ibv_wr_set_inline_data_list(x, (size_t)w->nsge, b);
    } else if (w->nsge == 1) {
        ibv_wr_set_sge(x, w->sge[0].lkey, w->sge[0].addr, w->sge[0].length);
    } else {
        ibv_wr_set_sge_list(x, (size_t)w->nsge, w->sge);
    }
    return ibv_wr_complete(x);
}

static struct ibv_sge lsge(struct ops *o, uint64_t off, uint32_t len)
{
    VT_REQUIRE(off + len <= o->l.len);
    return (struct ibv_sge){
        .addr = (uintptr_t)(o->l.p + off), .length = len, .lkey = o->l.mr->lkey};
}

static void setup(int fd, struct ops *o, uint32_t max_inline)
{
    memset(o, 0, sizeof(*o));
    vt_dev_open(&o->d);
    vt_buf_alloc(&o->d, &o->l, LBUF_LEN, VT_ACCESS_ALL);
    vt_agent_hello(fd, &o->r);
    struct vt_qp_caps lc, rc;
    vt_caps_default(&rc);
    rc.max_recv_sge = VT_MAX_SGE;
    for (int api = 0; api < 2; api++) {
        vt_caps_default(&lc);
        lc.max_inline = max_inline;
        lc.qp_ex = api == API_WR;
        vt_qp_create(&o->d, &o->qp[api], &lc, NULL, NULL, NULL);
        /* start just below 2^24 so a 1 MiB message (256 packets) wraps the PSN */
        if (api == API_POST)
            o->qp[api].psn = 0xffff80;
        vt_agent_pair(fd, &o->d, &o->qp[api], (uint32_t)api, &rc, NULL, NULL, &o->rinfo[api]);
    }
}

static void teardown(struct ops *o)
{
    for (int api = 0; api < 2; api++)
        vt_qp_destroy(&o->qp[api]);
    vt_buf_free(&o->l);
    vt_dev_close(&o->d);
}

/* The remote region [off, off+len) holds stream (seed, pos), and the guard
 * bytes either side still hold the old content. */
static void check_remote(int fd, uint64_t off, uint64_t len, uint32_t seed, uint64_t pos)
{
    long long d = vt_agent_diff(fd, 0, off, len, seed, pos);
    VT_CHECKF(d < 0, "remote data differs at byte %lld of %llu", d, (unsigned long long)len);
    d = vt_agent_diff(fd, 0, off - GUARD, GUARD, SEED_OLD, off - GUARD);
    VT_CHECKF(d < 0, "remote guard before the data changed at byte %lld", d);
    d = vt_agent_diff(fd, 0, off + len, GUARD, SEED_OLD, off + len);
    VT_CHECKF(d < 0, "remote guard after the data changed at byte %lld", d);
}

/* ---- WRITE, WRITE_WITH_IMM, READ, SEND, SEND_WITH_IMM at several sizes ---- */
struct xfer_row {
    enum api api;
    enum ibv_wr_opcode opcode;
    uint32_t len;
};

static const char *opname(enum ibv_wr_opcode op)
{
    switch (op) {
    case IBV_WR_RDMA_WRITE:
        return "WRITE";
    case IBV_WR_RDMA_WRITE_WITH_IMM:
        return "WRITE_IMM";
    case IBV_WR_SEND:
        return "SEND";
    case IBV_WR_SEND_WITH_IMM:
        return "SEND_IMM";
    case IBV_WR_RDMA_READ:
        return "READ";
    case IBV_WR_ATOMIC_CMP_AND_SWP:
        return "CMP_SWP";
    case IBV_WR_ATOMIC_FETCH_AND_ADD:
        return "FETCH_ADD";
    default:
        return "?";
    }
}

static void xfer_row(int fd, struct ops *o, const struct xfer_row *x, uint32_t idx)
{
    const uint32_t seed = 0x40 + idx; /* != SEED_OLD, != SEED_LOLD for idx < 0x80 */
    const uint32_t imm = 0xdead0000u | idx;
    const uint32_t slot = (uint32_t)x->api;
    const bool is_send = x->opcode == IBV_WR_SEND || x->opcode == IBV_WR_SEND_WITH_IMM;
    const bool has_imm =
        x->opcode == IBV_WR_SEND_WITH_IMM || x->opcode == IBV_WR_RDMA_WRITE_WITH_IMM;
    const bool is_read = x->opcode == IBV_WR_RDMA_READ;
    struct op w = {
        .opcode = x->opcode,
        .wr_id = 0x1000 + idx,
        .flags = IBV_SEND_SIGNALED,
        .imm = htonl(imm),
        .raddr = o->r.addr + ROFF,
        .rkey = o->r.rkey,
        .nsge = 1,
        .sge = {lsge(o, LOFF, x->len)},
    };
    if (is_read) {
        vt_agent_fill(fd, 0, ROFF, x->len, seed, ROFF);
        vt_pat_fill(o->l.p + LOFF - GUARD, x->len + 2 * GUARD, SEED_LOLD, LOFF - GUARD);
    } else {
        vt_agent_fill(fd, 0, ROFF - GUARD, x->len + 2 * GUARD, SEED_OLD, ROFF - GUARD);
        vt_pat_fill(o->l.p + LOFF, x->len, seed, ROFF);
    }
    if (is_send) {
        struct vt_sge s = {.mr = 0, .off = ROFF, .len = x->len};
        VT_EQ(vt_agent_post_recv(fd, slot, 0x2000 + idx, 1, &s), 0);
    } else if (has_imm) {
        /* the receive consumed by WRITE_WITH_IMM: its buffer must stay untouched */
        vt_agent_fill(fd, 0, RECV_AREA, 256, SEED_OLD, RECV_AREA);
        struct vt_sge s = {.mr = 0, .off = RECV_AREA, .len = 256};
        VT_EQ(vt_agent_post_recv(fd, slot, 0x2000 + idx, 1, &s), 0);
    }

    if (!VT_EQ(post(o, x->api, &w), 0))
        return;
    struct ibv_wc wc;
    if (vt_expect_wc(o->qp[x->api].scq, w.wr_id, IBV_WC_SUCCESS, &wc)) {
        enum ibv_wc_opcode want = is_read   ? IBV_WC_RDMA_READ
                                  : is_send ? IBV_WC_SEND
                                            : IBV_WC_RDMA_WRITE;
        VT_EQ(wc.opcode, want);
        VT_EQ(wc.qp_num, o->qp[x->api].qp->qp_num);
        if (is_read) /* byte_len is defined for READ at the requester */
            VT_EQ(wc.byte_len, x->len);
    }

    if (is_read) {
        long long d = vt_pat_diff(o->l.p + LOFF, x->len, seed, ROFF);
        VT_CHECKF(d < 0, "READ data differs at byte %lld", d);
        VT_CHECK(vt_pat_diff(o->l.p + LOFF - GUARD, GUARD, SEED_LOLD, LOFF - GUARD) < 0);
        VT_CHECK(vt_pat_diff(o->l.p + LOFF + x->len, GUARD, SEED_LOLD, LOFF + x->len) < 0);
        return;
    }
    check_remote(fd, ROFF, x->len, seed, ROFF);
    if (is_send || has_imm) {
        struct ibv_wc rwc;
        if (VT_CHECKF(vt_agent_poll_recv(fd, slot, VT_POLL_MS, &rwc), "no receive completion")) {
            VT_EQX(rwc.wr_id, 0x2000 + idx);
            VT_CHECKF(rwc.status == IBV_WC_SUCCESS, "receive status %s",
                      ibv_wc_status_str(rwc.status));
            VT_EQ(rwc.opcode, is_send ? IBV_WC_RECV : IBV_WC_RECV_RDMA_WITH_IMM);
            VT_EQ(rwc.byte_len, x->len);
            VT_EQ(rwc.qp_num, o->rinfo[slot].qpn);
            VT_EQ(!!(rwc.wc_flags & IBV_WC_WITH_IMM), has_imm);
            if (has_imm) /* imm_data arrives as sent: network order */
                VT_EQX(rwc.imm_data, htonl(imm));
        }
        if (has_imm && !is_send)
            VT_CHECKF(vt_agent_diff(fd, 0, RECV_AREA, 256, SEED_OLD, RECV_AREA) < 0,
                      "WRITE_WITH_IMM wrote into the receive buffer");
    }
}

static const struct xfer_row xfer_rows[] = {
#define SIZES(api, op)                                                                             \
    {api, op, 1}, {api, op, 4096}, {api, op, 4097},                                                \
    {                                                                                              \
        api, op, MIB                                                                               \
    }
    SIZES(API_POST, IBV_WR_RDMA_WRITE),        SIZES(API_POST, IBV_WR_RDMA_WRITE_WITH_IMM),
    SIZES(API_POST, IBV_WR_RDMA_READ),         SIZES(API_POST, IBV_WR_SEND),
    SIZES(API_POST, IBV_WR_SEND_WITH_IMM),     SIZES(API_WR, IBV_WR_RDMA_WRITE),
    SIZES(API_WR, IBV_WR_RDMA_WRITE_WITH_IMM), SIZES(API_WR, IBV_WR_RDMA_READ),
    SIZES(API_WR, IBV_WR_SEND_WITH_IMM),
#undef SIZES
};

static void case_xfer(int fd, const void *arg)
{
    (void)arg;
    struct ops o;
    setup(fd, &o, 0);
    char ctx[96];
    for (uint32_t i = 0; i < sizeof(xfer_rows) / sizeof(xfer_rows[0]); i++) {
        const struct xfer_row *x = &xfer_rows[i];
        snprintf(ctx, sizeof(ctx), "%s %s %u B", api_name[x->api], opname(x->opcode), x->len);
        vt_ctx = ctx;
        int before = vt_failures;
        xfer_row(fd, &o, x, i);
        if (vt_failures != before)
            vt_note("row failed");
    }
    vt_ctx = "";
    teardown(&o);
}

/* ---- atomics: returned original value and final remote value ---- */
static uint64_t local_u64(struct ops *o, uint64_t off)
{
    uint64_t v;
    memcpy(&v, o->l.p + off, 8);
    return v;
}

static void atomic_op(int fd, struct ops *o, enum api api, enum ibv_wr_opcode op, uint64_t roff,
                      uint64_t compare_add, uint64_t swap, uint64_t want_orig, uint64_t want_final,
                      uint64_t wr_id)
{
    const uint64_t loff = 64; /* 8-byte aligned result buffer */
    const uint64_t sentinel = 0x5eadbeef5eadbeefull;
    memcpy(o->l.p + loff, &sentinel, 8);
    struct op w = {
        .opcode = op,
        .wr_id = wr_id,
        .flags = IBV_SEND_SIGNALED,
        .raddr = o->r.addr + roff,
        .rkey = o->r.rkey,
        .compare_add = compare_add,
        .swap = swap,
        .nsge = 1,
        .sge = {lsge(o, loff, 8)},
    };
    if (!VT_EQ(post(o, api, &w), 0))
        return;
    struct ibv_wc wc;
    if (vt_expect_wc(o->qp[api].scq, wr_id, IBV_WC_SUCCESS, &wc)) {
        VT_EQ(wc.opcode, op == IBV_WR_ATOMIC_CMP_AND_SWP ? IBV_WC_COMP_SWAP : IBV_WC_FETCH_ADD);
        VT_EQ(wc.byte_len, 8);
    }
    VT_EQX(local_u64(o, loff), want_orig);
    VT_EQX(vt_agent_get_u64(fd, 0, roff), want_final);
}

static void case_atomic(int fd, const void *arg)
{
    (void)arg;
    struct ops o;
    setup(fd, &o, 0);
    for (int api = 0; api < 2; api++) {
        vt_ctx = api_name[api];
        const uint64_t roff = 3 * 4096 + 8 * (uint64_t)api; /* 8-byte aligned */
        const uint64_t v1 = 0x1122334455667788ull, v2 = 0x0123456789abcdefull;
        vt_agent_set_u64(fd, 0, roff, v1);
        /* compare matches: swapped, original returned */
        atomic_op(fd, &o, (enum api)api, IBV_WR_ATOMIC_CMP_AND_SWP, roff, v1, v2, v1, v2, 1);
        /* compare no longer matches: unchanged, current value returned */
        atomic_op(fd, &o, (enum api)api, IBV_WR_ATOMIC_CMP_AND_SWP, roff, v1, 0x77, v2, v2, 2);
        /* 64-bit add: the carry crosses the 32-bit boundary */
        vt_agent_set_u64(fd, 0, roff, 0xffffffffull);
        atomic_op(fd, &o, (enum api)api, IBV_WR_ATOMIC_FETCH_AND_ADD, roff, 1, 0, 0xffffffffull,
                  0x100000000ull, 3);
        /* modulo 2^64 */
        atomic_op(fd, &o, (enum api)api, IBV_WR_ATOMIC_FETCH_AND_ADD, roff, UINT64_MAX, 0,
                  0x100000000ull, 0xffffffffull, 4);
    }
    vt_ctx = "";
    teardown(&o);
}

/* ---- several SGEs on both sides ---- */
static const struct {
    uint64_t off;
    uint32_t len;
} l_sges[] = {{100, 100}, {70000, 3000}, {200003, 5000}}; /* 8100 bytes */
enum { SGE_TOTAL = 8100, R_SGE_BASE = MIB + 1 };
static const struct vt_sge r_sges[] = {
    /* boundaries unlike the sender's; 9065 bytes of room, the last one partly used */
    {0, 1000, R_SGE_BASE},
    {0, 2048, R_SGE_BASE + 20000},
    {0, 17, R_SGE_BASE + 30001},
    {0, 6000, R_SGE_BASE + 40000},
};

static int fill_local_sges(struct ops *o, struct op *w, uint32_t seed)
{
    uint64_t pos = 0;
    w->nsge = 3;
    for (int i = 0; i < 3; i++) {
        w->sge[i] = lsge(o, l_sges[i].off, l_sges[i].len);
        if (seed)
            vt_pat_fill(o->l.p + l_sges[i].off, l_sges[i].len, seed, pos);
        pos += l_sges[i].len;
    }
    return (int)pos;
}

static void case_sge(int fd, const void *arg)
{
    (void)arg;
    struct ops o;
    setup(fd, &o, 0);
    for (int api = 0; api < 2; api++) {
        char ctx[64];
        const uint32_t slot = (uint32_t)api;
        struct ibv_wc wc;

        /* SEND: 3 gather SGEs into 4 scatter SGEs */
        snprintf(ctx, sizeof(ctx), "%s SEND 3->4 SGEs", api_name[api]);
        vt_ctx = ctx;
        const uint32_t seed = 0x50 + (uint32_t)api;
        for (int i = 0; i < 4; i++)
            vt_agent_fill(fd, 0, r_sges[i].off, r_sges[i].len, SEED_OLD, r_sges[i].off);
        VT_EQ(vt_agent_post_recv(fd, slot, 0x3000, 4, r_sges), 0);
        struct op w = {.opcode = IBV_WR_SEND, .wr_id = 0x3001, .flags = IBV_SEND_SIGNALED};
        VT_EQ(fill_local_sges(&o, &w, seed), SGE_TOTAL);
        VT_EQ(post(&o, (enum api)api, &w), 0);
        vt_expect_wc(o.qp[api].scq, 0x3001, IBV_WC_SUCCESS, NULL);
        if (VT_CHECK(vt_agent_poll_recv(fd, slot, VT_POLL_MS, &wc))) {
            VT_EQ(wc.status, IBV_WC_SUCCESS);
            VT_EQ(wc.byte_len, SGE_TOTAL);
        }
        uint64_t pos = 0;
        for (int i = 0; i < 4; i++) {
            uint32_t used = r_sges[i].len;
            if (pos + used > SGE_TOTAL)
                used = (uint32_t)(SGE_TOTAL - pos);
            long long d = vt_agent_diff(fd, 0, r_sges[i].off, used, seed, pos);
            VT_CHECKF(d < 0, "receive SGE %d differs at byte %lld", i, d);
            d = vt_agent_diff(fd, 0, r_sges[i].off + used, r_sges[i].len - used, SEED_OLD,
                              r_sges[i].off + used);
            VT_CHECKF(d < 0, "receive SGE %d: bytes past the message changed (%lld)", i, d);
            pos += used;
        }

        /* WRITE gathering 3 SGEs into one remote range */
        snprintf(ctx, sizeof(ctx), "%s WRITE 3 SGEs", api_name[api]);
        vt_agent_fill(fd, 0, ROFF - GUARD, SGE_TOTAL + 2 * GUARD, SEED_OLD, ROFF - GUARD);
        w = (struct op){.opcode = IBV_WR_RDMA_WRITE,
                        .wr_id = 0x3002,
                        .flags = IBV_SEND_SIGNALED,
                        .raddr = o.r.addr + ROFF,
                        .rkey = o.r.rkey};
        fill_local_sges(&o, &w, seed + 2);
        VT_EQ(post(&o, (enum api)api, &w), 0);
        vt_expect_wc(o.qp[api].scq, 0x3002, IBV_WC_SUCCESS, NULL);
        check_remote(fd, ROFF, SGE_TOTAL, seed + 2, 0);

        /* READ scattering one remote range into 3 SGEs */
        snprintf(ctx, sizeof(ctx), "%s READ 3 SGEs", api_name[api]);
        vt_agent_fill(fd, 0, ROFF, SGE_TOTAL, seed + 4, 0);
        w = (struct op){.opcode = IBV_WR_RDMA_READ,
                        .wr_id = 0x3003,
                        .flags = IBV_SEND_SIGNALED,
                        .raddr = o.r.addr + ROFF,
                        .rkey = o.r.rkey};
        fill_local_sges(&o, &w, SEED_LOLD);
        VT_EQ(post(&o, (enum api)api, &w), 0);
        if (vt_expect_wc(o.qp[api].scq, 0x3003, IBV_WC_SUCCESS, &wc))
            VT_EQ(wc.byte_len, SGE_TOTAL);
        pos = 0;
        for (int i = 0; i < 3; i++) {
            long long d = vt_pat_diff(o.l.p + l_sges[i].off, l_sges[i].len, seed + 4, pos);
            VT_CHECKF(d < 0, "READ SGE %d differs at byte %lld", i, d);
            pos += l_sges[i].len;
        }
    }
    vt_ctx = "";
    teardown(&o);
}

/* ---- inline data: captured when post returns ---- */
enum { INLINE_MAX = 256 };

struct inline_row {
    const char *name;
    enum api api;
    enum ibv_wr_opcode opcode;
    int nsge;
    uint32_t len[3];
};

static const struct inline_row inline_rows[] = {
    {"SEND 1 B", API_POST, IBV_WR_SEND, 1, {1}},
    {"SEND 200 B in 3 SGEs", API_POST, IBV_WR_SEND, 3, {7, 93, 100}},
    {"SEND_IMM max_inline", API_POST, IBV_WR_SEND_WITH_IMM, 1, {INLINE_MAX}},
    {"WRITE max_inline in 2 SGEs", API_POST, IBV_WR_RDMA_WRITE, 2, {128, 128}},
    {"wr_api SEND 2 bufs", API_WR, IBV_WR_SEND, 2, {60, 140}},
    {"wr_api WRITE_IMM", API_WR, IBV_WR_RDMA_WRITE_WITH_IMM, 1, {INLINE_MAX}},
};

static void case_inline(int fd, const void *arg)
{
    (void)arg;
    struct ops o;
    setup(fd, &o, INLINE_MAX);
    struct ibv_qp_attr qa;
    struct ibv_qp_init_attr qia;
    if (VT_EQ(ibv_query_qp(o.qp[API_POST].qp, &qa, IBV_QP_CAP, &qia), 0))
        VT_CHECKF(qia.cap.max_inline_data >= INLINE_MAX, "max_inline_data %u",
                  qia.cap.max_inline_data);
    for (uint32_t i = 0; i < sizeof(inline_rows) / sizeof(inline_rows[0]); i++) {
        const struct inline_row *x = &inline_rows[i];
        vt_ctx = x->name;
        const uint32_t seed = 0x60 + i, slot = (uint32_t)x->api;
        const bool is_send = x->opcode == IBV_WR_SEND || x->opcode == IBV_WR_SEND_WITH_IMM;
        /* unregistered memory (lkey 0): inline data needs no MR */
        uint8_t *src[3] = {NULL};
        struct op w = {.opcode = x->opcode,
                       .wr_id = 0x4000 + i,
                       .flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE,
                       .imm = htonl(0xabc00000u | i),
                       .raddr = o.r.addr + ROFF,
                       .rkey = o.r.rkey,
                       .nsge = x->nsge};
        uint32_t total = 0;
        for (int s = 0; s < x->nsge; s++) {
            src[s] = malloc(x->len[s]);
            VT_REQUIRE(src[s]);
            vt_pat_fill(src[s], x->len[s], seed, ROFF + total);
            w.sge[s] = (struct ibv_sge){.addr = (uintptr_t)src[s], .length = x->len[s], .lkey = 0};
            total += x->len[s];
        }
        vt_agent_fill(fd, 0, ROFF - GUARD, total + 2 * GUARD, SEED_OLD, ROFF - GUARD);
        if (is_send || x->opcode == IBV_WR_RDMA_WRITE_WITH_IMM) {
            struct vt_sge s = {.mr = 0, .off = is_send ? ROFF : RECV_AREA, .len = total};
            VT_EQ(vt_agent_post_recv(fd, slot, 0x4100 + i, 1, &s), 0);
        }
        int r = post(&o, x->api, &w);
        /* the buffers are reused at once: the data sent must be the old one */
        for (int s = 0; s < x->nsge; s++)
            memset(src[s], 0xa5, x->len[s]);
        if (VT_EQ(r, 0)) {
            vt_expect_wc(o.qp[x->api].scq, w.wr_id, IBV_WC_SUCCESS, NULL);
            check_remote(fd, ROFF, total, seed, ROFF);
            if (w.opcode != IBV_WR_RDMA_WRITE) {
                struct ibv_wc wc;
                if (VT_CHECK(vt_agent_poll_recv(fd, slot, VT_POLL_MS, &wc))) {
                    VT_EQ(wc.status, IBV_WC_SUCCESS);
                    VT_EQ(wc.byte_len, total);
                }
            }
        }
        for (int s = 0; s < x->nsge; s++)
            free(src[s]);
    }
    vt_ctx = "";
    teardown(&o);
}

/* ---- unsignaled WRs: only the signaled one completes ---- */
enum { UNSIG_N = 16, UNSIG_LEN = 4096, UNSIG_BASE = 2 * MIB };

static void unsig_prepare(int fd, struct ops *o, struct ibv_send_wr *wr, struct ibv_sge *sge,
                          uint32_t seed, uint64_t id_base)
{
    vt_agent_fill(fd, 0, UNSIG_BASE - GUARD, UNSIG_N * UNSIG_LEN + 2 * GUARD, SEED_OLD,
                  UNSIG_BASE - GUARD);
    for (int i = 0; i < UNSIG_N; i++) {
        uint64_t off = UNSIG_BASE + (uint64_t)i * UNSIG_LEN;
        vt_pat_fill(o->l.p + off, UNSIG_LEN, seed, off);
        sge[i] = lsge(o, off, UNSIG_LEN);
        memset(&wr[i], 0, sizeof(wr[i]));
        wr[i].wr_id = id_base + (uint64_t)i;
        wr[i].sg_list = &sge[i];
        wr[i].num_sge = 1;
        wr[i].opcode = IBV_WR_RDMA_WRITE;
        wr[i].wr.rdma.remote_addr = o->r.addr + off;
        wr[i].wr.rdma.rkey = o->r.rkey;
        wr[i].next = i + 1 < UNSIG_N ? &wr[i + 1] : NULL;
    }
}

static void case_unsignaled(int fd, const void *arg)
{
    (void)arg;
    struct ops o;
    setup(fd, &o, 0);
    struct ibv_send_wr wr[UNSIG_N], *bad = NULL;
    struct ibv_sge sge[UNSIG_N];
    struct vt_qp *q = &o.qp[API_POST];

    for (int mode = 0; mode < 2; mode++) {
        vt_ctx = mode == 0 ? "one list" : "separate posts";
        const uint32_t seed = 0x70 + (uint32_t)mode;
        const uint64_t base = 0x5000 + 0x100 * (uint64_t)mode;
        unsig_prepare(fd, &o, wr, sge, seed, base);
        wr[UNSIG_N - 1].send_flags = IBV_SEND_SIGNALED;
        if (mode == 0) {
            VT_EQ(ibv_post_send(q->qp, &wr[0], &bad), 0);
        } else {
            for (int i = 0; i < UNSIG_N; i++) {
                wr[i].next = NULL;
                VT_EQ(ibv_post_send(q->qp, &wr[i], &bad), 0);
            }
        }
        vt_expect_wc(q->scq, base + UNSIG_N - 1, IBV_WC_SUCCESS, NULL);
        VT_EQ(vt_poll_none(q->scq, 100), 0);
        check_remote(fd, UNSIG_BASE, UNSIG_N * UNSIG_LEN, seed, UNSIG_BASE);
    }

    /* sq_sig_all: every WR completes, flagged or not */
    vt_ctx = "sq_sig_all";
    struct vt_qp all;
    struct vt_qp_caps c;
    vt_caps_default(&c);
    c.sq_sig_all = 1;
    vt_qp_create(&o.d, &all, &c, NULL, NULL, NULL);
    vt_agent_pair(fd, &o.d, &all, 2, NULL, NULL, NULL, NULL);
    unsig_prepare(fd, &o, wr, sge, 0x72, 0x5200);
    wr[3].next = NULL;
    VT_EQ(ibv_post_send(all.qp, &wr[0], &bad), 0);
    struct ibv_wc wc[4];
    if (VT_EQ(vt_poll(all.scq, 4, wc, VT_POLL_MS), 4))
        for (int i = 0; i < 4; i++) {
            VT_EQX(wc[i].wr_id, 0x5200 + (uint64_t)i);
            VT_EQ(wc[i].status, IBV_WC_SUCCESS);
        }
    VT_EQ(vt_poll_none(all.scq, 50), 0);
    check_remote(fd, UNSIG_BASE, 4 * UNSIG_LEN, 0x72, UNSIG_BASE);
    vt_qp_destroy(&all);
    vt_ctx = "";
    teardown(&o);
}

/* ---- zero-length messages: no SGE at all ---- */
static const struct {
    enum api api;
    enum ibv_wr_opcode opcode;
} zero_rows[] = {
    {API_POST, IBV_WR_RDMA_WRITE},  {API_POST, IBV_WR_RDMA_WRITE_WITH_IMM},
    {API_POST, IBV_WR_SEND},        {API_POST, IBV_WR_SEND_WITH_IMM},
    {API_POST, IBV_WR_RDMA_READ},   {API_WR, IBV_WR_RDMA_WRITE_WITH_IMM},
    {API_WR, IBV_WR_SEND_WITH_IMM},
};

static void case_zero_len(int fd, const void *arg)
{
    (void)arg;
    struct ops o;
    setup(fd, &o, 0);
    char ctx[64];
    for (uint32_t i = 0; i < sizeof(zero_rows) / sizeof(zero_rows[0]); i++) {
        const enum api api = zero_rows[i].api;
        const enum ibv_wr_opcode op = zero_rows[i].opcode;
        const uint32_t slot = (uint32_t)api;
        const bool is_send = op == IBV_WR_SEND || op == IBV_WR_SEND_WITH_IMM;
        const bool has_imm = op == IBV_WR_SEND_WITH_IMM || op == IBV_WR_RDMA_WRITE_WITH_IMM;
        snprintf(ctx, sizeof(ctx), "%s %s 0 B", api_name[api], opname(op));
        vt_ctx = ctx;
        vt_agent_fill(fd, 0, ROFF - GUARD, 2 * GUARD, SEED_OLD, ROFF - GUARD);
        vt_pat_fill(o.l.p + LOFF - GUARD, 2 * GUARD, SEED_LOLD, LOFF - GUARD);
        if (is_send || has_imm) {
            struct vt_sge s = {.mr = 0, .off = ROFF, .len = GUARD};
            VT_EQ(vt_agent_post_recv(fd, slot, 0x6000 + i, 1, &s), 0);
        }
        struct op w = {.opcode = op,
                       .wr_id = 0x6100 + i,
                       .flags = IBV_SEND_SIGNALED,
                       .imm = htonl(0x0e0e0000u | i),
                       .raddr = o.r.addr + ROFF,
                       .rkey = o.r.rkey,
                       .nsge = 0};
        if (!VT_EQ(post(&o, api, &w), 0))
            continue;
        struct ibv_wc wc;
        if (vt_expect_wc(o.qp[api].scq, w.wr_id, IBV_WC_SUCCESS, &wc) && op == IBV_WR_RDMA_READ)
            VT_EQ(wc.byte_len, 0);
        if (is_send || has_imm) {
            if (VT_CHECK(vt_agent_poll_recv(fd, slot, VT_POLL_MS, &wc))) {
                VT_EQX(wc.wr_id, 0x6000 + i);
                VT_EQ(wc.status, IBV_WC_SUCCESS);
                VT_EQ(wc.opcode, is_send ? IBV_WC_RECV : IBV_WC_RECV_RDMA_WITH_IMM);
                VT_EQ(wc.byte_len, 0);
                VT_EQ(!!(wc.wc_flags & IBV_WC_WITH_IMM), has_imm);
                if (has_imm)
                    VT_EQX(wc.imm_data, htonl(0x0e0e0000u | i));
            }
        }
        VT_CHECKF(vt_agent_diff(fd, 0, ROFF - GUARD, 2 * GUARD, SEED_OLD, ROFF - GUARD) < 0,
                  "remote memory changed");
        VT_CHECKF(vt_pat_diff(o.l.p + LOFF - GUARD, 2 * GUARD, SEED_LOLD, LOFF - GUARD) < 0,
                  "local memory changed");
    }
    vt_ctx = "";
    teardown(&o);
}

/* ---- more READs and atomics outstanding than max_rd_atomic ---- */
enum { RD_N = 30, RD_LEN = 4096, RD_BASE = MIB, RD_CTR = 512 };

static void case_rd_atomic(int fd, const void *arg)
{
    (void)arg;
    struct ops o;
    setup(fd, &o, 0);
    struct ibv_qp_attr qa;
    struct ibv_qp_init_attr qia;
    if (VT_EQ(ibv_query_qp(o.qp[API_POST].qp, &qa, IBV_QP_MAX_QP_RD_ATOMIC, &qia), 0))
        VT_CHECKF(qa.max_rd_atomic < RD_N, "max_rd_atomic %u: the test needs fewer",
                  qa.max_rd_atomic);
    vt_agent_set_u64(fd, 0, RD_CTR, 0);
    vt_agent_fill(fd, 0, RD_BASE, RD_N * RD_LEN, 0x55, 0);
    memset(o.l.p + RD_BASE, 0, RD_N * RD_LEN);
    /* READ, FETCH_ADD, READ, FETCH_ADD ... in one list */
    static struct ibv_send_wr wr[2 * RD_N];
    static struct ibv_sge sge[2 * RD_N];
    struct ibv_send_wr *bad = NULL;
    memset(wr, 0, sizeof(wr));
    for (int i = 0; i < RD_N; i++) {
        struct ibv_send_wr *r = &wr[2 * i], *a = &wr[2 * i + 1];
        sge[2 * i] = lsge(&o, RD_BASE + (uint64_t)i * RD_LEN, RD_LEN);
        sge[2 * i + 1] = lsge(&o, 64 + 8 * (uint64_t)i, 8);
        r->wr_id = 2 * (uint64_t)i;
        r->sg_list = &sge[2 * i];
        r->num_sge = 1;
        r->opcode = IBV_WR_RDMA_READ;
        r->send_flags = IBV_SEND_SIGNALED;
        r->wr.rdma.remote_addr = o.r.addr + RD_BASE + (uint64_t)i * RD_LEN;
        r->wr.rdma.rkey = o.r.rkey;
        r->next = a;
        a->wr_id = 2 * (uint64_t)i + 1;
        a->sg_list = &sge[2 * i + 1];
        a->num_sge = 1;
        a->opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
        a->send_flags = IBV_SEND_SIGNALED;
        a->wr.atomic.remote_addr = o.r.addr + RD_CTR;
        a->wr.atomic.rkey = o.r.rkey;
        a->wr.atomic.compare_add = 1;
        a->next = i + 1 < RD_N ? &wr[2 * i + 2] : NULL;
    }
    VT_EQ(ibv_post_send(o.qp[API_POST].qp, wr, &bad), 0);
    static struct ibv_wc wc[2 * RD_N];
    int n = vt_poll(o.qp[API_POST].scq, 2 * RD_N, wc, VT_POLL_MS);
    VT_EQ(n, 2 * RD_N);
    for (int i = 0; i < n; i++) {
        VT_EQX(wc[i].wr_id, (uint64_t)i);
        VT_EQ(wc[i].status, IBV_WC_SUCCESS);
    }
    /* every atomic ran once, in posting order: they returned 0, 1, 2 ... */
    for (int i = 0; i < RD_N; i++)
        VT_EQX(local_u64(&o, 64 + 8 * (uint64_t)i), (uint64_t)i);
    VT_EQX(vt_agent_get_u64(fd, 0, RD_CTR), RD_N);
    long long d = vt_pat_diff(o.l.p + RD_BASE, RD_N * RD_LEN, 0x55, 0);
    VT_CHECKF(d < 0, "READ data differs at byte %lld", d);
    teardown(&o);
}

static const struct vt_case cases[] = {
    {"xfer", case_xfer, NULL, NULL},
    {"atomic", case_atomic, NULL, NULL},
    {"sge", case_sge, NULL, NULL},
    {"inline", case_inline, NULL, NULL},
    {"unsignaled", case_unsignaled, NULL, NULL},
    {"zero_len", case_zero_len, NULL, NULL},
    {"rd_atomic", case_rd_atomic, NULL, NULL},
};

int main(int argc, char **argv)
{
    return vt_main(argc, argv, cases, sizeof(cases) / sizeof(cases[0]));
}

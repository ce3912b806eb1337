/* engine_fixture.h: the fixture the engine_*_test programs share. Two
 * engines on the in-memory wire of engine_harness.h, an RC/UC pair or two
 * UD QPs between them, and a region per node registered in the pair's PDs:
 * opened from one options struct (fix_open) and torn down by one function
 * (fix_close). Also what those programs share to drive it: byte patterns,
 * waiting for completions, the reproducible fault filters.
 *
 * Header-only like engine_harness.h: sr_test.h keeps its check counters in
 * each program's own statics, so the fixture's checks must be compiled into
 * the program that reports them. */
#ifndef ENGINE_FIXTURE_H
#define ENGINE_FIXTURE_H

#include "engine_harness.h"

enum {
    FIX_MEM = (2 << 20) + 8192, /* bytes of each node's region */
    FIX_ALL_ACCESS = 15,        /* local write, remote write, read and atomic */
};

struct fix_opts {
    struct h_cfg wire;   /* the engines and the wire */
    struct h_qp_opts qp; /* the pair; .type 0: engines only, no pair, no MRs */
    uint32_t mr_access;  /* both regions' rights; 0: FIX_ALL_ACCESS */
    h_filter_fn filter;  /* the wire's, from the start */
};

struct eng_fix {
    struct harness h;
    struct h_pair pr;
    uint8_t *mem[2];     /* FIX_MEM zeroed bytes per node */
    struct sr_mr *mr[2]; /* mem[i] in pr.pd[i]; a test that deregisters one sets it NULL */
};

static inline void fix_open(struct eng_fix *f, const struct fix_opts *o)
{
    memset(&f->pr, 0, sizeof(f->pr));
    h_init_cfg(&f->h, &o->wire);
    f->h.filter = o->filter;
    for (int i = 0; i < 2; i++) {
        f->mem[i] = calloc(1, FIX_MEM);
        f->mr[i] = NULL;
    }
    if (!o->qp.type)
        return;
    h_connect(&f->h, &f->pr, &o->qp);
    uint32_t access = o->mr_access ? o->mr_access : FIX_ALL_ACCESS;
    for (int i = 0; i < 2; i++)
        SR_CHECK_EQ(sr_mr_reg(f->pr.pd[i], f->mem[i], FIX_MEM, (uint64_t)(uintptr_t)f->mem[i],
                              access, &f->mr[i]),
                    0);
}

/* The regions' MRs, then the engines (with every QP, CQ and PD in them),
 * the wire's queue and the memory. */
static inline void fix_close(struct eng_fix *f)
{
    for (int i = 0; i < 2; i++)
        if (f->mr[i])
            sr_mr_dereg(f->mr[i]);
    h_fini(&f->h);
    free(f->mem[0]);
    free(f->mem[1]);
}

static inline void pattern(uint8_t *p, size_t n, unsigned seed)
{
    uint32_t x = seed * 2654435761u + 1;
    for (size_t i = 0; i < n; i++) {
        x = x * 1103515245u + 12345u;
        p[i] = (uint8_t)(x >> 16);
    }
}

/* A signaled one-SGE work request to remote (in node 1's MR). */
static inline struct sr_send_wr signaled_wr(const struct eng_fix *f, uint64_t id, struct sr_sge *sg,
                                            enum sr_wr_opcode op, uint64_t remote)
{
    return (struct sr_send_wr){.wr_id = id,
                               .sg_list = sg,
                               .num_sge = 1,
                               .opcode = op,
                               .send_flags = SR_SEND_SIGNALED,
                               .remote_addr = remote,
                               .rkey = sr_mr_rkey(f->mr[1])};
}

struct wc_wait {
    struct sr_cq *cq;
    struct sr_wc wc[4 * SR_MAX_RD_ATOMIC];
    int want, got;
};

static inline bool wc_done(void *arg)
{
    struct wc_wait *w = arg;
    if (w->got < w->want)
        w->got += sr_cq_poll(w->cq, w->want - w->got, w->wc + w->got);
    return w->got >= w->want;
}

/* Runs the wire until n completions came on cq or max_ns passed; returns
 * how many came, copied to out. */
static inline int wait_wc(struct harness *h, struct sr_cq *cq, int n, struct sr_wc *out,
                          uint64_t max_ns)
{
    struct wc_wait w = {.cq = cq, .want = n};
    h_run(h, wc_done, &w, max_ns);
    memcpy(out, w.wc, sizeof(struct sr_wc) * (size_t)w.got);
    return w.got;
}

/* Posts a then b on node 0's QP; both complete successfully within max_ns. */
static inline void post2_ok(struct eng_fix *f, const struct sr_send_wr *a,
                            const struct sr_send_wr *b, uint64_t max_ns)
{
    SR_CHECK_EQ(sr_qp_post_send(f->pr.qp[0], a, f->h.now), 0);
    SR_CHECK_EQ(sr_qp_post_send(f->pr.qp[0], b, f->h.now), 0);
    struct sr_wc wc[2];
    SR_CHECK_EQ(wait_wc(&f->h, f->pr.scq[0], 2, wc, max_ns), 2);
    SR_CHECK_EQ(wc[0].status, SR_WC_SUCCESS);
    SR_CHECK_EQ(wc[1].status, SR_WC_SUCCESS);
}

/* ---- fault filters (pseudo-random per packet, reproducible) ---- */
static inline uint32_t h_hash(uint64_t seq)
{
    uint64_t x = seq * 0x9e3779b97f4a7c15ull;
    x ^= x >> 31;
    x *= 0xbf58476d1ce4e5b9ull;
    return (uint32_t)(x >> 33);
}
static inline int f_drop7(struct harness *h, const struct h_pkt *p, uint64_t seq)
{
    (void)h, (void)p;
    return h_hash(seq) % 7 == 3; /* ~14% loss */
}
static inline int f_dup5(struct harness *h, const struct h_pkt *p, uint64_t seq)
{
    (void)h, (void)p;
    return h_hash(seq) % 5 == 2 ? 2 : 0;
}
static inline int f_delay11(struct harness *h, const struct h_pkt *p, uint64_t seq)
{
    (void)h, (void)p;
    return h_hash(seq) % 11 == 4 ? 3 : 0;
}
static inline int f_drop_resp(struct harness *h, const struct h_pkt *p, uint64_t seq)
{
    (void)h;
    /* responses (ACK, READ response, ATOMIC ACK) from node 1: a third
     * dropped, a third duplicated */
    uint8_t op = p->data[0] & 0x1f;
    if (p->from == 1 && op >= SR_OP_READ_RESP_FIRST && op <= SR_OP_ATOMIC_ACK)
        return (int)(h_hash(seq) % 3);
    return 0;
}
static inline int f_all(struct harness *h, const struct h_pkt *p, uint64_t seq)
{
    (void)h, (void)p, (void)seq;
    return 1;
}

#endif

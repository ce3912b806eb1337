/* qp_ex.c: the extended send API (ibv_qp_to_qp_ex, ibv_wr_*): work
 * requests are staged between wr_start and wr_complete and posted as one
 * batch under the NIC lock, as the verbs documentation describes. */
#include "sv.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>

static struct sv_qp *qx(struct ibv_qp_ex *qp)
{
    return sr_container_of(qp, struct sv_qp, qpex);
}

/* Start a new staged WR of the given opcode; later setters fill it. */
static struct sr_send_wr *stage(struct ibv_qp_ex *qp, enum sr_wr_opcode op)
{
    struct sv_qp *q = qx(qp);
    if (q->wr_err)
        return NULL;
    if (q->nwr == q->wr_cap) {
        q->wr_err = ENOMEM; /* more than the send queue can ever hold */
        return NULL;
    }
    struct sr_send_wr *w = &q->wr[q->nwr++];
    memset(w, 0, sizeof(*w));
    w->wr_id = qp->wr_id;
    w->send_flags = qp->wr_flags;
    w->opcode = op;
    w->sg_list = q->sge + (size_t)(q->nwr - 1) * SR_MAX_SGE;
    return w;
}

static struct sr_send_wr *current(struct ibv_qp_ex *qp)
{
    struct sv_qp *q = qx(qp);
    if (!q->nwr) {
        q->wr_err = EINVAL;
        return NULL;
    }
    return &q->wr[q->nwr - 1];
}

static void wr_send(struct ibv_qp_ex *qp)
{
    stage(qp, SR_WR_SEND);
}

static void wr_send_imm(struct ibv_qp_ex *qp, __be32 imm)
{
    struct sr_send_wr *w = stage(qp, SR_WR_SEND_WITH_IMM);
    if (w)
        w->imm = ntohl(imm);
}

static void wr_send_inv(struct ibv_qp_ex *qp, uint32_t rkey)
{
    struct sr_send_wr *w = stage(qp, SR_WR_SEND_WITH_INV);
    if (w)
        w->invalidate_rkey = rkey;
}

static void wr_rdma_write(struct ibv_qp_ex *qp, uint32_t rkey, uint64_t addr)
{
    struct sr_send_wr *w = stage(qp, SR_WR_RDMA_WRITE);
    if (w) {
        w->rkey = rkey;
        w->remote_addr = addr;
    }
}

static void wr_rdma_write_imm(struct ibv_qp_ex *qp, uint32_t rkey, uint64_t addr, __be32 imm)
{
    struct sr_send_wr *w = stage(qp, SR_WR_RDMA_WRITE_WITH_IMM);
    if (w) {
        w->rkey = rkey;
        w->remote_addr = addr;
        w->imm = ntohl(imm);
    }
}

static void wr_rdma_read(struct ibv_qp_ex *qp, uint32_t rkey, uint64_t addr)
{
    struct sr_send_wr *w = stage(qp, SR_WR_RDMA_READ);
    if (w) {
        w->rkey = rkey;
        w->remote_addr = addr;
    }
}

static void wr_atomic_cmp_swp(struct ibv_qp_ex *qp, uint32_t rkey, uint64_t addr, uint64_t compare,
                              uint64_t swap)
{
    struct sr_send_wr *w = stage(qp, SR_WR_ATOMIC_CMP_AND_SWP);
    if (w) {
        w->rkey = rkey;
        w->remote_addr = addr;
        w->compare_add = compare;
        w->swap = swap;
    }
}

static void wr_atomic_fetch_add(struct ibv_qp_ex *qp, uint32_t rkey, uint64_t addr, uint64_t add)
{
    struct sr_send_wr *w = stage(qp, SR_WR_ATOMIC_FETCH_AND_ADD);
    if (w) {
        w->rkey = rkey;
        w->remote_addr = addr;
        w->compare_add = add;
    }
}

static void wr_set_sge(struct ibv_qp_ex *qp, uint32_t lkey, uint64_t addr, uint32_t length)
{
    struct sr_send_wr *w = current(qp);
    if (!w)
        return;
    struct sr_sge *s = (struct sr_sge *)w->sg_list;
    s[0] = (struct sr_sge){.addr = addr, .length = length, .lkey = lkey};
    w->num_sge = 1;
}

static void wr_set_sge_list(struct ibv_qp_ex *qp, size_t n, const struct ibv_sge *list)
{
    struct sr_send_wr *w = current(qp);
    if (!w)
        return;
    if (n > SR_MAX_SGE) {
        qx(qp)->wr_err = EINVAL;
        return;
    }
    memcpy((void *)w->sg_list, list, n * sizeof(*list));
    w->num_sge = (uint32_t)n;
}

/* Inline data is copied now (the caller may reuse its buffer at once). */
static void wr_set_inline_data_list(struct ibv_qp_ex *qp, size_t n, const struct ibv_data_buf *bufs)
{
    struct sv_qp *q = qx(qp);
    struct sr_send_wr *w = current(qp);
    if (!w)
        return;
    size_t total = 0;
    for (size_t i = 0; i < n; i++)
        total += bufs[i].length;
    if (total > q->inline_cap - q->inline_used) {
        q->wr_err = ENOMEM;
        return;
    }
    uint8_t *dst = q->inline_stage + q->inline_used;
    size_t off = 0;
    for (size_t i = 0; i < n; i++) {
        memcpy(dst + off, bufs[i].addr, bufs[i].length);
        off += bufs[i].length;
    }
    q->inline_used += (uint32_t)total;
    struct sr_sge *s = (struct sr_sge *)w->sg_list;
    s[0] = (struct sr_sge){.addr = (uintptr_t)dst, .length = (uint32_t)total, .lkey = 0};
    w->num_sge = 1;
    w->send_flags |= SR_SEND_INLINE;
}

static void wr_set_inline_data(struct ibv_qp_ex *qp, void *addr, size_t length)
{
    struct ibv_data_buf b = {.addr = addr, .length = length};
    wr_set_inline_data_list(qp, 1, &b);
}

static void wr_set_ud_addr(struct ibv_qp_ex *qp, struct ibv_ah *ah, uint32_t remote_qpn,
                           uint32_t remote_qkey)
{
    struct sr_send_wr *w = current(qp);
    if (!w)
        return;
    struct sv_ah *a = sr_container_of(ah, struct sv_ah, ibah);
    memcpy(w->ah.dgid, a->dgid, 16);
    w->ah.dest_qpn = remote_qpn;
    w->ah.qkey = remote_qkey;
}

static void wr_start(struct ibv_qp_ex *qp)
{
    struct sv_qp *q = qx(qp);
    q->nwr = 0;
    q->inline_used = 0;
    q->wr_err = 0;
    if (!q->wr) {
        struct ibv_qp_attr a;
        struct ibv_qp_init_attr ia;
        ibv_query_qp(&qp->qp_base, &a, 0, &ia);
        uint32_t cap = a.cap.max_send_wr ? a.cap.max_send_wr : 1;
        q->wr = calloc(cap, sizeof(*q->wr));
        q->sge = calloc((size_t)cap * SR_MAX_SGE, sizeof(*q->sge));
        q->inline_cap = cap * a.cap.max_inline_data;
        q->inline_stage = q->inline_cap ? malloc(q->inline_cap) : NULL;
        if (!q->wr || !q->sge || (q->inline_cap && !q->inline_stage)) {
            sv_qp_ex_free(q);
            q->wr_err = ENOMEM;
            return;
        }
        q->wr_cap = cap;
    }
}

void sv_qp_ex_free(struct sv_qp *q)
{
    free(q->wr);
    free(q->sge);
    free(q->inline_stage);
    q->wr = NULL;
    q->sge = NULL;
    q->inline_stage = NULL;
    q->wr_cap = q->inline_cap = 0;
}

static int wr_complete(struct ibv_qp_ex *qp)
{
    struct sv_qp *q = qx(qp);
    int err = q->wr_err;
    if (!err && q->nwr) {
        struct sr_nic *nic = sv_ctx(qp->qp_base.context)->nic;
        sr_nic_lock(nic);
        /* ibv_wr_complete(3): on error the entire batch is aborted, so
         * every WR is checked before the first is posted. */
        if (sr_qp_sq_free(q->qp) < q->nwr)
            err = ENOMEM;
        for (uint32_t i = 0; i < q->nwr && !err; i++)
            err = sv_errno(sr_qp_send_check(q->qp, &q->wr[i]));
        for (uint32_t i = 0; i < q->nwr && !err; i++)
            err = sv_post_send_one(q, &q->wr[i]);
        sr_nic_posted(nic, true);
        sr_nic_unlock(nic);
    }
    q->nwr = 0;
    q->inline_used = 0;
    q->wr_err = 0;
    return err;
}

static void wr_abort(struct ibv_qp_ex *qp)
{
    struct sv_qp *q = qx(qp);
    q->nwr = 0;
    q->inline_used = 0;
    q->wr_err = 0;
}

/* Operations softrdma does not implement: the batch fails at wr_complete. */
static void wr_unsupported(struct ibv_qp_ex *qp)
{
    qx(qp)->wr_err = EOPNOTSUPP;
}
static void wr_bind_mw(struct ibv_qp_ex *qp, struct ibv_mw *mw, uint32_t rkey,
                       const struct ibv_mw_bind_info *info)
{
    struct sr_send_wr *w = stage(qp, SR_WR_BIND_MW);
    if (w) {
        int err = sv_mw_bind_wr(mw, rkey, info, w);
        if (err)
            qx(qp)->wr_err = err;
    }
}
static void wr_local_inv(struct ibv_qp_ex *qp, uint32_t rkey)
{
    struct sr_send_wr *w = stage(qp, SR_WR_LOCAL_INV);
    if (w)
        w->invalidate_rkey = rkey;
}
static void wr_send_tso(struct ibv_qp_ex *qp, void *hdr, uint16_t hdr_sz, uint16_t mss)
{
    (void)hdr, (void)hdr_sz, (void)mss;
    wr_unsupported(qp);
}
static void wr_set_xrc_srqn(struct ibv_qp_ex *qp, uint32_t srqn)
{
    struct sr_send_wr *w = current(qp);
    if (w)
        w->xrc_remote_srqn = srqn;
}
/* ibv_wr_atomic_write(3): the 8 bytes at atomic_wr are taken now, so the
 * buffer is free when the call returns; no SGE follows. */
static void wr_atomic_write(struct ibv_qp_ex *qp, uint32_t rkey, uint64_t addr,
                            const void *atomic_wr)
{
    struct sr_send_wr *w = stage(qp, SR_WR_ATOMIC_WRITE);
    if (!w)
        return;
    if (!atomic_wr) {
        qx(qp)->wr_err = EINVAL;
        return;
    }
    w->rkey = rkey;
    w->remote_addr = addr;
    memcpy(&w->compare_add, atomic_wr, 8);
}

void sv_qp_ex_init(struct sv_qp *q, uint64_t send_ops_flags)
{
    struct ibv_qp_ex *x = &q->qpex;
    (void)send_ops_flags; /* every supported op is always available */
    x->wr_send = wr_send;
    x->wr_send_imm = wr_send_imm;
    x->wr_send_inv = wr_send_inv;
    x->wr_rdma_write = wr_rdma_write;
    x->wr_rdma_write_imm = wr_rdma_write_imm;
    x->wr_rdma_read = wr_rdma_read;
    x->wr_atomic_cmp_swp = wr_atomic_cmp_swp;
    x->wr_atomic_fetch_add = wr_atomic_fetch_add;
    x->wr_set_sge = wr_set_sge;
    x->wr_set_sge_list = wr_set_sge_list;
    x->wr_set_inline_data = wr_set_inline_data;
    x->wr_set_inline_data_list = wr_set_inline_data_list;
    x->wr_set_ud_addr = wr_set_ud_addr;
    x->wr_start = wr_start;
    x->wr_complete = wr_complete;
    x->wr_abort = wr_abort;
    x->wr_bind_mw = wr_bind_mw;
    x->wr_local_inv = wr_local_inv;
    x->wr_send_tso = wr_send_tso;
    x->wr_set_xrc_srqn = wr_set_xrc_srqn;
    x->wr_atomic_write = wr_atomic_write;
}

SV_EXPORT struct ibv_qp_ex *ibv_qp_to_qp_ex(struct ibv_qp *qp)
{
    if (!sv_live_is(qp, SV_K_QP)) {
        errno = EINVAL;
        return NULL;
    }
    return &sv_qp(qp)->qpex;
}

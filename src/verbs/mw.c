/* mw.c: memory windows at the verbs boundary: ibv_alloc_mw, ibv_dealloc_mw
 * and ibv_bind_mw (reached through ctx->ops by rdma-core's inline verbs),
 * and the conversion of a bind work request (IBV_WR_BIND_MW,
 * ibv_wr_bind_mw) into the engine's. The engine owns the windows' state;
 * an ibv_mw only mirrors the R_Key the consumer was given. */
#include "sv.h"

#include <errno.h>
#include <stdlib.h>

_Static_assert((int)IBV_MW_TYPE_1 == (int)SR_MW_TYPE_1, "mw types");
_Static_assert((int)IBV_MW_TYPE_2 == (int)SR_MW_TYPE_2, "mw types");
_Static_assert((int)IBV_WC_MW_BIND_ERR == (int)SR_WC_MW_BIND_ERR, "wc status values");
_Static_assert((int)IBV_WC_BIND_MW == (int)SR_WC_BIND_MW, "wc opcodes");
_Static_assert((int)IBV_WC_LOCAL_INV == (int)SR_WC_LOCAL_INV, "wc opcodes");
_Static_assert((int)IBV_WR_BIND_MW == (int)SR_WR_BIND_MW, "wr opcodes");
_Static_assert((int)IBV_WR_LOCAL_INV == (int)SR_WR_LOCAL_INV, "wr opcodes");
_Static_assert((int)IBV_ACCESS_ZERO_BASED == (int)SR_ACCESS_ZERO_BASED, "access flags");

struct sv_mw {
    struct ibv_mw ibmw;
    struct sr_mw *mw;
};

static struct sv_mw *sv_mw(struct ibv_mw *m)
{
    return sr_container_of(m, struct sv_mw, ibmw);
}

static struct sr_nic *nic_of(struct ibv_context *c)
{
    return sv_ctx(c)->nic;
}

static struct ibv_mw *sv_alloc_mw(struct ibv_pd *pd, enum ibv_mw_type type)
{
    if (!sv_live_is(pd, SV_K_PD) || (type != IBV_MW_TYPE_1 && type != IBV_MW_TYPE_2)) {
        errno = EINVAL;
        return NULL;
    }
    struct sv_mw *m = calloc(1, sizeof(*m));
    if (!m) {
        errno = ENOMEM;
        return NULL;
    }
    struct sr_nic *nic = nic_of(pd->context);
    sr_nic_lock(nic);
    int err = sr_mw_alloc(sv_pd(pd)->pd, (enum sr_mw_type)type, &m->mw);
    if (!err)
        m->ibmw.rkey = sr_mw_rkey(m->mw);
    sr_nic_unlock(nic);
    if (err) {
        free(m);
        errno = err == SR_ERR_LIMIT ? ENOMEM : sv_errno(err);
        return NULL;
    }
    m->ibmw.context = pd->context;
    m->ibmw.pd = pd;
    m->ibmw.handle = sr_mw_handle(m->mw);
    m->ibmw.type = type;
    sv_live_add(&m->ibmw, SV_K_MW);
    return &m->ibmw;
}

static int sv_dealloc_mw(struct ibv_mw *mw)
{
    if (!sv_live_is(mw, SV_K_MW))
        return EINVAL;
    struct sv_mw *m = sv_mw(mw);
    struct sr_nic *nic = nic_of(mw->context);
    sr_nic_lock(nic);
    int err = sr_mw_dealloc(m->mw);
    sr_nic_unlock(nic);
    if (err)
        return sv_errno(err);
    sv_live_del(mw);
    free(m);
    return 0;
}

int sv_mw_bind_wr(struct ibv_mw *mw, uint32_t rkey, const struct ibv_mw_bind_info *info,
                  struct sr_send_wr *s)
{
    if (!mw || !info || (!info->mr && info->length))
        return EINVAL;
    s->num_sge = 0; /* a bind moves no data */
    s->bind = (struct sr_bind){
        .mw = sr_mw_handle(sv_mw(mw)->mw),
        .rkey = rkey,
        .mr_lkey = info->mr ? info->mr->lkey : 0,
        .access = info->mw_access_flags,
        .addr = info->addr,
        .length = info->length,
    };
    return 0;
}

/* ibv_bind_mw(3): a type 1 bind posted on qp's send queue. rdma-core's
 * inline wrapper has checked the type, the region and its PD. The new key
 * is the old one with its low byte stepped, and mw->rkey holds it as soon
 * as the bind is posted (the consumer sends it to peers while the bind
 * completes; a failed bind leaves the window unusable, its completion
 * says so). */
static int sv_bind_mw(struct ibv_qp *qp, struct ibv_mw *mw, struct ibv_mw_bind *b)
{
    if (!sv_live_is(qp, SV_K_QP) || !sv_live_is(mw, SV_K_MW))
        return EINVAL; /* the header read mw and b already */
    if (b->bind_info.mw_access_flags & IBV_ACCESS_ZERO_BASED)
        return EINVAL; /* IBA o10-36.2.2: type 1 windows are not zero based */
    struct sr_send_wr s = {
        .wr_id = b->wr_id,
        .opcode = SR_WR_BIND_MW,
        .send_flags = b->send_flags,
    };
    uint32_t rkey = ibv_inc_rkey(mw->rkey);
    int err = sv_mw_bind_wr(mw, rkey, &b->bind_info, &s);
    if (err)
        return err;
    struct sr_nic *nic = nic_of(qp->context);
    sr_nic_lock(nic);
    err = sv_post_send_one(sv_qp(qp), &s);
    sr_nic_posted(nic, true);
    sr_nic_unlock(nic);
    if (!err)
        mw->rkey = rkey;
    return err;
}

void sv_mw_init_ops(struct sv_context *ctx)
{
    struct ibv_context_ops *o = &ctx->vctx.context.ops;
    o->alloc_mw = sv_alloc_mw;
    o->dealloc_mw = sv_dealloc_mw;
    o->bind_mw = sv_bind_mw;
}

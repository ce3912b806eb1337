/* mw.c: memory windows (IBA 10.6.7): allocation, the bind and local
 * invalidate work requests, invalidation by a peer's SEND with Invalidate,
 * and the R_Key check of remote accesses through a window.
 *
 * Windows live in their own key table; their keys carry SR_MW_KEY_BIT, so
 * the responder knows which table an R_Key names. Type 1 and type 2B are
 * supported, as rxe and mlx5 do: a type 2 window is tied to the QP that
 * bound it and to its PD, and may be targeted only through that QP. */
#include "engine_int.h"

#include <stdlib.h>

#define MW_RIGHTS (SR_ACCESS_REMOTE_WRITE | SR_ACCESS_REMOTE_READ | SR_ACCESS_REMOTE_ATOMIC)

static int mw_tables(struct sr_engine *e)
{
    if (e->mws)
        return 0; /* allocated at the first window: most engines have none */
    e->mws = calloc(e->cfg.max_mw, sizeof(*e->mws));
    e->mw_tag = calloc(e->cfg.max_mw, 1);
    if (!e->mws || !e->mw_tag) {
        free(e->mws);
        free(e->mw_tag);
        e->mws = NULL;
        e->mw_tag = NULL;
        return SR_ERR_NOMEM;
    }
    return 0;
}

int sr_mw_alloc(struct sr_pd *pd, enum sr_mw_type type, struct sr_mw **out)
{
    struct sr_engine *e = pd->eng;
    if (type != SR_MW_TYPE_1 && type != SR_MW_TYPE_2)
        return SR_ERR_INVAL;
    int err = mw_tables(e);
    if (err)
        return err;
    if (e->mw_cnt + 1 >= e->cfg.max_mw)
        return SR_ERR_LIMIT; /* slot 0 is never used */
    /* Next fit, as for regions: a freed slot (whose key a peer may still
     * hold) comes back as late as possible. */
    uint32_t idx = e->mw_next;
    for (uint32_t n = 0; n < e->cfg.max_mw && (idx == 0 || e->mws[idx]); n++)
        idx = idx + 1 < e->cfg.max_mw ? idx + 1 : 0;
    if (idx == 0 || e->mws[idx])
        return SR_ERR_LIMIT;
    struct sr_mw *mw = calloc(1, sizeof(*mw));
    if (!mw)
        return SR_ERR_NOMEM;
    e->mw_next = idx + 1 < e->cfg.max_mw ? idx + 1 : 1;
    e->mw_tag[idx]++;
    mw->pd = pd;
    mw->type = (uint8_t)type;
    mw->handle = SR_MW_KEY_BIT | idx << 8 | e->mw_tag[idx];
    mw->rkey = mw->handle;
    e->mws[idx] = mw;
    e->mw_cnt++;
    pd->refcnt++;
    *out = mw;
    return 0;
}

static void unbind(struct sr_mw *mw)
{
    if (mw->mr)
        mw->mr->mw_cnt--;
    if (mw->qp)
        mw->qp->mw_cnt--;
    mw->mr = NULL;
    mw->qp = NULL;
    mw->addr = mw->length = 0;
    mw->access = 0;
}

int sr_mw_dealloc(struct sr_mw *mw)
{
    struct sr_engine *e = mw->pd->eng;
    /* the window's key stops working now, bound or not */
    unbind(mw);
    e->mws[SR_MW_IDX(mw->handle)] = NULL;
    e->mw_cnt--;
    mw->pd->refcnt--;
    free(mw);
    return 0;
}

uint32_t sr_mw_rkey(const struct sr_mw *mw)
{
    return mw->rkey;
}
uint32_t sr_mw_handle(const struct sr_mw *mw)
{
    return mw->handle;
}

static struct sr_mw *mw_slot(struct sr_engine *e, uint32_t key)
{
    if (!(key & SR_MW_KEY_BIT) || !e->mws)
        return NULL;
    uint32_t idx = SR_MW_IDX(key);
    return idx < e->cfg.max_mw ? e->mws[idx] : NULL;
}

void sr_mw_free_all(struct sr_engine *e)
{
    if (e->mws)
        for (uint32_t i = 0; i < e->cfg.max_mw; i++)
            free(e->mws[i]);
    free(e->mws);
    free(e->mw_tag);
    e->mws = NULL;
    e->mw_tag = NULL;
}

void sr_mw_qp_gone(struct sr_qp *qp)
{
    struct sr_engine *e = qp->eng;
    for (uint32_t i = 0; qp->mw_cnt && e->mws && i < e->cfg.max_mw; i++)
        if (e->mws[i] && e->mws[i]->qp == qp)
            unbind(e->mws[i]);
}

uint8_t *sr_rkey_check(struct sr_engine *e, const struct sr_qp *qp, struct sr_pd *pd, uint32_t rkey,
                       uint64_t va, uint64_t len, uint32_t access)
{
    if (!(rkey & SR_MW_KEY_BIT))
        return sr_mr_check(e, pd, rkey, va, len, access);
    struct sr_mw *mw = mw_slot(e, rkey);
    /* A window is usable when bound (type 2: Valid), through its PD and,
     * for type 2, only through the QP it was bound through (IBA 10.6.7.2:
     * a type 2B window is associated with a QP and a PD). */
    if (!mw || mw->rkey != rkey || !mw->mr || mw->pd != pd)
        return NULL;
    if (mw->type == SR_MW_TYPE_2 && mw->qp != qp)
        return NULL;
    if ((mw->access & access) != access)
        return NULL;
    /* A zero-based window is addressed from 0; else by the region's iova. */
    uint64_t off = (mw->access & SR_ACCESS_ZERO_BASED) ? va : va - mw->addr;
    if (!(mw->access & SR_ACCESS_ZERO_BASED) && va < mw->addr)
        return NULL;
    if (off > mw->length || len > mw->length - off)
        return NULL;
    /* The bind checked the window lies inside the region, which cannot be
     * deregistered while the window is bound. */
    return mw->mr->addr + (mw->addr - mw->mr->iova) + off;
}

static enum sr_wc_status bind(struct sr_qp *qp, const struct sr_bind *b)
{
    struct sr_engine *e = qp->eng;
    struct sr_mw *mw = mw_slot(e, b->mw);
    if (!mw || mw->handle != b->mw)
        return SR_WC_MW_BIND_ERR;
    uint32_t acc = b->access & (MW_RIGHTS | SR_ACCESS_ZERO_BASED);
    /* C10-72: the QP that binds a type 2 window has the window's PD; a
     * type 1 window too (ibv_bind_mw posts on a QP of the window's PD). */
    if (mw->pd != qp->pd)
        return SR_WC_MW_BIND_ERR;
    if (mw->type == SR_MW_TYPE_1) {
        if (acc & SR_ACCESS_ZERO_BASED) /* o10-36.2.2: type 1 is never zero based */
            return SR_WC_MW_BIND_ERR;
    } else {
        if (mw->mr) /* o10-37.2.30: a type 2 window is bound only when Free */
            return SR_WC_MW_BIND_ERR;
        if (!b->length) /* o10-37.2.40: type 2 windows are invalidated, not bound empty */
            return SR_WC_MW_BIND_ERR;
    }
    /* The new key keeps the window's index and changes its low 8 bits, so
     * whoever holds the previous key loses access (IBA 10.6.7: the
     * consumer owns the key's low byte). */
    if ((b->rkey & ~0xffu) != (mw->rkey & ~0xffu) || (b->rkey & 0xff) == (mw->rkey & 0xff))
        return SR_WC_MW_BIND_ERR;
    struct sr_mr *mr = NULL;
    if (b->length) {
        mr = sr_mr_lookup(e, b->mr_lkey);
        if (!mr || mr->pd != mw->pd)
            return SR_WC_MW_BIND_ERR;
        if (mr->access & SR_ACCESS_ZERO_BASED)
            return SR_WC_MW_BIND_ERR;
        if (!(mr->access & SR_ACCESS_MW_BIND)) /* C10-73 */
            return SR_WC_MW_BIND_ERR;
        /* C10-74: remote write or atomic rights need a locally writable region */
        if ((acc & (SR_ACCESS_REMOTE_WRITE | SR_ACCESS_REMOTE_ATOMIC)) &&
            !(mr->access & SR_ACCESS_LOCAL_WRITE))
            return SR_WC_MW_BIND_ERR;
        /* C10-75: the window lies inside the region */
        if (b->addr < mr->iova || b->addr - mr->iova > mr->length ||
            b->length > mr->length - (b->addr - mr->iova))
            return SR_WC_MW_BIND_ERR;
    }
    unbind(mw);
    mw->rkey = (mw->rkey & ~0xffu) | (b->rkey & 0xff);
    if (!mr)
        return SR_WC_SUCCESS; /* type 1 unbound: its new key opens nothing */
    mw->mr = mr;
    mr->mw_cnt++;
    mw->addr = b->addr;
    mw->length = b->length;
    mw->access = acc;
    if (mw->type == SR_MW_TYPE_2) {
        mw->qp = qp;
        qp->mw_cnt++;
    }
    return SR_WC_SUCCESS;
}

struct sr_mw *sr_mw_inv_target(struct sr_engine *e, const struct sr_qp *qp, struct sr_pd *pd,
                               uint32_t rkey, bool remote)
{
    /* Only windows: a region from sr_mr_reg is not invalidated by a work
     * request (rxe invalidates only fast-registration regions, which the
     * verbs API does not give applications; such a key fails). */
    struct sr_mw *mw = mw_slot(e, rkey);
    if (!mw || mw->rkey != rkey || !mw->mr || mw->pd != pd)
        return NULL;
    /* o10-37.2.26: type 1 windows are not invalidated by work requests */
    if (mw->type != SR_MW_TYPE_2)
        return NULL;
    /* a peer may invalidate only a window it could use: one bound
     * through the QP its SEND arrives on */
    if (remote && mw->qp != qp)
        return NULL;
    return mw;
}

void sr_mw_invalidate(struct sr_mw *mw)
{
    unbind(mw); /* Free again: the next bind must change the key */
}

enum sr_wc_status sr_mw_local_op(struct sr_qp *qp, const struct sr_send_wr *wr)
{
    if (wr->opcode == SR_WR_BIND_MW)
        return bind(qp, &wr->bind);
    struct sr_mw *mw = sr_mw_inv_target(qp->eng, qp, qp->pd, wr->invalidate_rkey, false);
    if (!mw)
        return SR_WC_LOC_QP_OP_ERR; /* as rxe for a key it cannot invalidate */
    sr_mw_invalidate(mw);
    return SR_WC_SUCCESS;
}

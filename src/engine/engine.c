/* engine.c: the soft device: PDs, the MR key table and protection checks,
 * CQs, SRQs, receive dispatch to the responder or completer, the timer
 * list and packet output. */
#include "engine_int.h"

#include <stdlib.h>

enum {
    DEF_MAX_QP = 16384,
    DEF_MAX_CQ = 16384,
    DEF_MAX_MR = 65536,
    DEF_MAX_MW = 65536,
    DEF_MAX_PD = 4096,
    DEF_MAX_SRQ = 4096,
    DEF_MAX_CQE = 1 << 22,
    DEF_MAX_QP_WR = 1 << 15,
    DEF_WINDOW = 2048, /* packets: 8 MiB at a 4 KiB MTU, what perftest keeps in flight */
};

#define DEF(v, d) ((v) ? (v) : (d))

/* Intrusive list helpers for the PD, CQ and SRQ lists. */
#define LIST_ADD(head, obj)                                                                        \
    do {                                                                                           \
        (obj)->link.prev = NULL;                                                                   \
        (obj)->link.next = (head);                                                                 \
        if (head)                                                                                  \
            (head)->link.prev = (obj);                                                             \
        (head) = (obj);                                                                            \
    } while (0)
#define LIST_DEL(head, obj, type)                                                                  \
    do {                                                                                           \
        type *p_ = (obj)->link.prev, *n_ = (obj)->link.next;                                       \
        if (p_)                                                                                    \
            p_->link.next = n_;                                                                    \
        else                                                                                       \
            (head) = n_;                                                                           \
        if (n_)                                                                                    \
            n_->link.prev = p_;                                                                    \
    } while (0)

int sr_engine_create(const struct sr_engine_cfg *cfg, struct sr_engine **out)
{
    if (!cfg || !cfg->ops.tx || !out)
        return SR_ERR_INVAL;
    struct sr_engine *e = calloc(1, sizeof(*e));
    if (!e)
        return SR_ERR_NOMEM;
    e->cfg = *cfg;
    if (cfg->cc)
        e->cc = *cfg->cc;
    e->cfg.cc = NULL; /* the copy is e->cc */
    sr_engine_hold_acks(e, true);
    e->cfg.max_qp = DEF(cfg->max_qp, DEF_MAX_QP);
    e->cfg.max_cq = DEF(cfg->max_cq, DEF_MAX_CQ);
    e->cfg.max_mr = DEF(cfg->max_mr, DEF_MAX_MR);
    e->cfg.max_mw = DEF(cfg->max_mw, DEF_MAX_MW);
    e->cfg.max_pd = DEF(cfg->max_pd, DEF_MAX_PD);
    e->cfg.max_srq = DEF(cfg->max_srq, DEF_MAX_SRQ);
    e->cfg.max_cqe = DEF(cfg->max_cqe, DEF_MAX_CQE);
    e->cfg.max_qp_wr = DEF(cfg->max_qp_wr, DEF_MAX_QP_WR);
    e->cfg.window_pkts = DEF(cfg->window_pkts, DEF_WINDOW);
    e->cfg.port_mtu = DEF(cfg->port_mtu, SR_MAX_PMTU);
    if (e->cfg.port_mtu < SR_MIN_PMTU || e->cfg.port_mtu > SR_MAX_PMTU ||
        (e->cfg.port_mtu & (e->cfg.port_mtu - 1)))
        goto err_free;
    /* region and window keys: 23 bits of index, SR_MW_KEY_BIT, 8 of tag */
    if (e->cfg.max_qp > (SR_PSN_MASK - SR_QPN_BASE) || e->cfg.max_mr > (1u << 23) ||
        e->cfg.max_mw > (1u << 23))
        goto err_free;
    e->mrs = calloc(e->cfg.max_mr, sizeof(*e->mrs));
    e->mr_tag = calloc(e->cfg.max_mr, 1);
    e->qps = calloc(e->cfg.max_qp, sizeof(*e->qps));
    e->srq_by_num = calloc(e->cfg.max_srq, sizeof(*e->srq_by_num));
    if (!e->mrs || !e->mr_tag || !e->qps || !e->srq_by_num)
        goto err_free;
    *out = e;
    return 0;

err_free:
    free(e->mrs);
    free(e->mr_tag);
    free(e->qps);
    free(e->srq_by_num);
    free(e);
    return SR_ERR_NOMEM;
}

void sr_engine_destroy(struct sr_engine *e)
{
    if (!e)
        return;
    /* Objects still alive are the caller's leak; free what the tables hold
     * so the engine itself never leaks. */
    for (uint32_t i = 0; i < e->cfg.max_qp; i++)
        if (e->qps[i])
            sr_qp_destroy(e->qps[i]);
    sr_mw_free_all(e);
    sr_ooo_engine_fini(e);
    if (e->gsi)
        sr_qp_destroy(e->gsi);
    for (uint32_t i = 0; i < e->cfg.max_mr; i++)
        free(e->mrs[i]);
    while (e->srqs) {
        e->srqs->refcnt = 0;
        sr_srq_destroy(e->srqs);
    }
    while (e->xrcds) {
        e->xrcds->refcnt = 0;
        sr_xrcd_free(e->xrcds);
    }
    while (e->cqs) {
        e->cqs->refcnt = 0;
        sr_cq_destroy(e->cqs);
    }
    while (e->pds) {
        e->pds->refcnt = 0;
        sr_pd_free(e->pds);
    }
    free(e->mrs);
    free(e->mr_tag);
    free(e->qps);
    free(e->srq_by_num);
    free(e);
}

void sr_engine_stats(const struct sr_engine *e, struct sr_engine_stats *out)
{
    *out = e->stats;
}
const uint8_t *sr_engine_gid(const struct sr_engine *e)
{
    return e->cfg.gid;
}

/* ---- PD ---- */
int sr_pd_alloc(struct sr_engine *e, struct sr_pd **out)
{
    if (e->pd_cnt >= e->cfg.max_pd)
        return SR_ERR_LIMIT;
    struct sr_pd *pd = calloc(1, sizeof(*pd));
    if (!pd)
        return SR_ERR_NOMEM;
    pd->eng = e;
    e->pd_cnt++;
    LIST_ADD(e->pds, pd);
    *out = pd;
    return 0;
}

int sr_pd_free(struct sr_pd *pd)
{
    if (pd->refcnt)
        return SR_ERR_BUSY;
    pd->eng->pd_cnt--;
    LIST_DEL(pd->eng->pds, pd, struct sr_pd);
    free(pd);
    return 0;
}

/* ---- MR ---- */
int sr_mr_reg(struct sr_pd *pd, void *addr, size_t length, uint64_t iova, uint32_t access,
              struct sr_mr **out)
{
    struct sr_engine *e = pd->eng;
    /* IBA 10.6.3.1: remote write or atomic access requires local write. */
    if ((access & (SR_ACCESS_REMOTE_WRITE | SR_ACCESS_REMOTE_ATOMIC)) &&
        !(access & SR_ACCESS_LOCAL_WRITE))
        return SR_ERR_INVAL;
    /* An implicit on-demand MR (address 0, the whole address space) is the
     * one that may start at NULL. */
    if (!addr && length && !(access & SR_ACCESS_ON_DEMAND))
        return SR_ERR_INVAL;
    if (iova + length < iova)
        return SR_ERR_RANGE;
    if (e->mr_cnt + 1 >= e->cfg.max_mr)
        return SR_ERR_LIMIT; /* slot 0 is never used: max_mr - 1 fit */
    /* The first free slot from where the last registration stopped,
     * wrapping (next fit): registering N regions costs O(N), not O(N^2),
     * and a freed slot (a key an application may still hold) comes back
     * when the search next reaches it, usually a lap later, rather than
     * at the next registration. Slot 0 is never used, so key 0 is never
     * valid. */
    uint32_t idx = e->mr_next;
    for (uint32_t tries = 0; tries < e->cfg.max_mr && (idx == 0 || e->mrs[idx]); tries++)
        idx = idx + 1 < e->cfg.max_mr ? idx + 1 : 0;
    if (idx == 0 || e->mrs[idx])
        return SR_ERR_LIMIT;
    e->mr_next = idx + 1 < e->cfg.max_mr ? idx + 1 : 1;
    struct sr_mr *mr = calloc(1, sizeof(*mr));
    if (!mr)
        return SR_ERR_NOMEM;
    mr->pd = pd;
    mr->addr = addr;
    mr->iova = iova;
    mr->length = length;
    mr->access = access;
    /* A fresh 8-bit tag per reuse of the slot, so a stale key misses. */
    e->mr_tag[idx]++;
    mr->key = idx << 8 | e->mr_tag[idx];
    e->mrs[idx] = mr;
    e->mr_cnt++;
    pd->refcnt++;
    *out = mr;
    return 0;
}

int sr_mr_rereg(struct sr_mr *mr, struct sr_pd *pd, void *addr, size_t length, uint64_t iova,
                uint32_t access)
{
    /* the same rules as a registration (IBA 10.6.3.1, 11.2.8), checked
     * before anything changes: a refused rereg leaves the MR as it was */
    if ((access & (SR_ACCESS_REMOTE_WRITE | SR_ACCESS_REMOTE_ATOMIC)) &&
        !(access & SR_ACCESS_LOCAL_WRITE))
        return SR_ERR_INVAL;
    if (!addr && length && !(access & SR_ACCESS_ON_DEMAND))
        return SR_ERR_INVAL;
    if (iova + length < iova)
        return SR_ERR_RANGE;
    if (pd->eng != mr->pd->eng)
        return SR_ERR_INVAL;
    mr->pd->refcnt--;
    pd->refcnt++;
    mr->pd = pd;
    mr->addr = addr;
    mr->length = length;
    mr->iova = iova;
    mr->access = access;
    return 0;
}

int sr_mr_dereg(struct sr_mr *mr)
{
    struct sr_engine *e = mr->pd->eng;
    if (mr->mw_cnt)
        return SR_ERR_INVAL; /* IBA 10.6.7.2.6, and rxe's EINVAL */
    e->mrs[mr->key >> 8] = NULL;
    e->mr_cnt--;
    mr->pd->refcnt--;
    free(mr);
    return 0;
}

uint32_t sr_mr_lkey(const struct sr_mr *mr)
{
    return mr->key;
}
uint32_t sr_mr_rkey(const struct sr_mr *mr)
{
    return mr->key;
}

struct sr_mr *sr_mr_lookup(struct sr_engine *e, uint32_t key)
{
    uint32_t idx = key >> 8;
    if (idx >= e->cfg.max_mr)
        return NULL;
    struct sr_mr *mr = e->mrs[idx];
    return mr && mr->key == key ? mr : NULL;
}

uint8_t *sr_mr_check(struct sr_engine *e, struct sr_pd *pd, uint32_t key, uint64_t va, uint64_t len,
                     uint32_t access)
{
    struct sr_mr *mr = sr_mr_lookup(e, key);
    if (!mr || mr->pd != pd)
        return NULL;
    if ((mr->access & access) != access)
        return NULL;
    /* bounds without overflow: iova <= va and va + len <= iova + length */
    if (va < mr->iova || va - mr->iova > mr->length || len > mr->length - (va - mr->iova))
        return NULL;
    uint8_t *p = (uint8_t *)((uintptr_t)mr->addr + (uintptr_t)(va - mr->iova));
    const uint32_t writes =
        SR_ACCESS_LOCAL_WRITE | SR_ACCESS_REMOTE_WRITE | SR_ACCESS_REMOTE_ATOMIC;
    if ((mr->access & SR_ACCESS_ON_DEMAND) && e->cfg.mem_ok &&
        !e->cfg.mem_ok(p, len, (access & writes) != 0))
        return NULL;
    return p;
}

void *sr_mr_local(struct sr_pd *pd, uint32_t lkey, uint64_t va, uint64_t len, uint32_t access)
{
    return sr_mr_check(pd->eng, pd, lkey, va, len, access);
}

bool sr_sge_scatter(struct sr_engine *e, struct sr_pd *pd, const struct sr_sge *sge,
                    uint32_t num_sge, uint32_t off, const void *data, uint32_t len)
{
    const uint8_t *src = data;
    sr_engine_fence(e);
    for (uint32_t i = 0; i < num_sge && len; i++) {
        if (off >= sge[i].length) {
            off -= sge[i].length;
            continue;
        }
        uint32_t n = SR_MIN(len, sge[i].length - off);
        uint8_t *dst = sr_mr_check(e, pd, sge[i].lkey, sge[i].addr + off, n, SR_ACCESS_LOCAL_WRITE);
        if (!dst)
            return false;
        SR_DMA_BEGIN();
        memcpy(dst, src, n);
        SR_DMA_END();
        src += n;
        len -= n;
        off = 0;
    }
    return len == 0;
}

/* ---- queue rings ---- */
void *sr_ring_alloc(const struct sr_alloc *a, size_t len, enum sr_alloc_type type, bool *custom)
{
    *custom = false;
    if (a && a->alloc) {
        bool declined = false;
        void *p = a->alloc(a->ctx, len, type, &declined);
        if (!declined) {
            if (p) {
                memset(p, 0, len);
                *custom = true;
            }
            return p;
        }
    }
    return calloc(1, len);
}

void sr_ring_free(const struct sr_alloc *a, void *p, enum sr_alloc_type type, bool custom)
{
    if (custom)
        a->free(a->ctx, p, type);
    else
        free(p);
}

/* ---- CQ ---- */
int sr_cq_create(struct sr_engine *e, uint32_t cqe, struct sr_cq **out)
{
    return sr_cq_create_alloc(e, cqe, NULL, out);
}

int sr_cq_create_alloc(struct sr_engine *e, uint32_t cqe, const struct sr_alloc *alloc,
                       struct sr_cq **out)
{
    if (cqe == 0 || cqe > e->cfg.max_cqe)
        return SR_ERR_INVAL;
    if (e->cq_cnt >= e->cfg.max_cq)
        return SR_ERR_LIMIT;
    struct sr_cq *cq = calloc(1, sizeof(*cq));
    if (!cq)
        return SR_ERR_NOMEM;
    if (alloc)
        cq->alloc = *alloc;
    cq->ring =
        sr_ring_alloc(&cq->alloc, (size_t)cqe * sizeof(*cq->ring), SR_ALLOC_CQ, &cq->ring_custom);
    if (!cq->ring) {
        free(cq);
        return SR_ERR_NOMEM;
    }
    cq->eng = e;
    cq->cap = cqe;
    e->cq_cnt++;
    LIST_ADD(e->cqs, cq);
    *out = cq;
    return 0;
}

int sr_cq_destroy(struct sr_cq *cq)
{
    if (cq->refcnt)
        return SR_ERR_BUSY;
    cq->eng->cq_cnt--;
    LIST_DEL(cq->eng->cqs, cq, struct sr_cq);
    sr_ring_free(&cq->alloc, cq->ring, SR_ALLOC_CQ, cq->ring_custom);
    free(cq);
    return 0;
}

int sr_cq_resize(struct sr_cq *cq, uint32_t cqe)
{
    if (cqe == 0 || cqe > cq->eng->cfg.max_cqe || cqe < cq->count)
        return SR_ERR_INVAL;
    bool custom;
    struct sr_wc *ring =
        sr_ring_alloc(&cq->alloc, (size_t)cqe * sizeof(*ring), SR_ALLOC_CQ, &custom);
    if (!ring)
        return SR_ERR_NOMEM;
    for (uint32_t i = 0; i < cq->count; i++)
        ring[i] = cq->ring[(cq->head + i) % cq->cap];
    sr_ring_free(&cq->alloc, cq->ring, SR_ALLOC_CQ, cq->ring_custom);
    cq->ring = ring;
    cq->ring_custom = custom;
    cq->cap = cqe;
    cq->head = 0;
    return 0;
}

int sr_cq_set_alloc(struct sr_cq *cq, const struct sr_alloc *alloc)
{
    struct sr_alloc old = cq->alloc;
    bool old_custom = cq->ring_custom;
    bool custom;
    struct sr_wc *ring =
        sr_ring_alloc(alloc, (size_t)cq->cap * sizeof(*ring), SR_ALLOC_CQ, &custom);
    if (!ring)
        return SR_ERR_NOMEM;
    for (uint32_t i = 0; i < cq->count; i++)
        ring[i] = cq->ring[(cq->head + i) % cq->cap];
    sr_ring_free(&old, cq->ring, SR_ALLOC_CQ, old_custom);
    cq->alloc = *alloc;
    cq->ring = ring;
    cq->ring_custom = custom;
    cq->head = 0;
    return 0;
}

uint32_t sr_cq_capacity(const struct sr_cq *cq)
{
    return cq->cap;
}
void sr_cq_set_user(struct sr_cq *cq, void *user)
{
    cq->user = user;
}
void *sr_cq_user(const struct sr_cq *cq)
{
    return cq->user;
}

bool sr_cq_push(struct sr_cq *cq, const struct sr_wc *wc, bool solicited)
{
    struct sr_engine *e = cq->eng;
    if (cq->count == cq->cap) {
        /* IBA 11.4.2.1: CQ overrun is an affiliated asynchronous error. */
        if (!cq->overflowed && e->cfg.ops.async_event)
            e->cfg.ops.async_event(e->cfg.ops_ctx, SR_EVENT_CQ_ERR, cq);
        cq->overflowed = true;
        return false;
    }
    struct sr_wc *slot = &cq->ring[(cq->head + cq->count) % cq->cap];
    *slot = *wc;
    slot->ts_ns = e->now_ns;
    cq->count++;
    bool fire = cq->notify == 1 || (cq->notify == 2 && (solicited || wc->status != SR_WC_SUCCESS));
    if (fire) {
        cq->notify = 0;
        if (e->cfg.ops.cq_event)
            e->cfg.ops.cq_event(e->cfg.ops_ctx, cq, solicited);
    }
    return true;
}

void sr_cq_clean(struct sr_cq *cq, uint32_t qp_num)
{
    uint32_t kept = 0;
    for (uint32_t i = 0; i < cq->count; i++) {
        const struct sr_wc *w = &cq->ring[(cq->head + i) % cq->cap];
        if (w->qp_num != qp_num)
            cq->ring[(cq->head + kept++) % cq->cap] = *w;
    }
    cq->count = kept;
}

int sr_cq_poll(struct sr_cq *cq, int n, struct sr_wc *wc)
{
    int got = 0;
    while (got < n && cq->count) {
        wc[got++] = cq->ring[cq->head];
        cq->head = (cq->head + 1) % cq->cap;
        cq->count--;
    }
    return got;
}

int sr_cq_req_notify(struct sr_cq *cq, bool solicited_only)
{
    /* An armed "any" request is not narrowed by a later solicited one. */
    if (cq->notify != 1)
        cq->notify = solicited_only ? 2 : 1;
    return 0;
}

void sr_engine_hold_acks(struct sr_engine *e, bool hold)
{
    sr_ack_policy_set(&e->ack, e->cfg.ack_delay_ns, hold);
}

bool sr_engine_release_acks(struct sr_engine *e, uint64_t held_since)
{
    if (!e->ack.held)
        return false;
    bool sent = false, left = false;
    for (struct sr_qp *qp = e->active; qp; qp = qp->active_next) {
        enum sr_ack_verdict v = sr_resp_ack(qp, SR_ACK_EV_IDLE, e->now_ns, held_since);
        sent |= v == SR_ACK_SEND_NOW;
        left |= v == SR_ACK_HOLD;
    }
    e->ack.held = left; /* the next held ACK sets it again */
    return sent;
}

bool sr_cq_armed(const struct sr_cq *cq)
{
    return cq->notify != 0;
}

/* ---- receive queues (QP-owned or shared) ---- */
int sr_rq_init(struct sr_rq *rq, uint32_t max_wr, uint32_t max_sge, const struct sr_alloc *a,
               enum sr_alloc_type type)
{
    rq->alloc = a;
    rq->alloc_type = type;
    rq->max_wr = max_wr;
    rq->max_sge = max_sge;
    rq->stride = (uint32_t)(sizeof(struct sr_rwqe) + max_sge * sizeof(struct sr_sge));
    rq->head = rq->count = 0;
    rq->buf = max_wr ? sr_ring_alloc(a, (size_t)max_wr * rq->stride, type, &rq->custom) : NULL;
    return max_wr && !rq->buf ? SR_ERR_NOMEM : 0;
}

struct sr_rwqe *sr_rq_at(const struct sr_rq *rq, uint32_t k)
{
    return (struct sr_rwqe *)(rq->buf + (size_t)((rq->head + k) % rq->max_wr) * rq->stride);
}

struct sr_rwqe *sr_rq_peek(struct sr_rq *rq)
{
    return rq->count ? sr_rq_at(rq, 0) : NULL;
}

void sr_rq_pop(struct sr_rq *rq)
{
    rq->head = (rq->head + 1) % rq->max_wr;
    rq->count--;
}

int sr_rq_post(struct sr_rq *rq, const struct sr_recv_wr *wr);
int sr_rq_post(struct sr_rq *rq, const struct sr_recv_wr *wr)
{
    if (wr->num_sge > rq->max_sge)
        return SR_ERR_INVAL;
    if (rq->count == rq->max_wr)
        return SR_ERR_NOMEM;
    struct sr_rwqe *w = sr_rq_at(rq, rq->count);
    w->wr_id = wr->wr_id;
    w->num_sge = wr->num_sge;
    uint64_t total = 0;
    for (uint32_t i = 0; i < wr->num_sge; i++) {
        w->sge[i] = wr->sg_list[i];
        total += wr->sg_list[i].length;
    }
    w->total_len = total > UINT32_MAX ? UINT32_MAX : (uint32_t)total;
    rq->count++;
    return 0;
}

/* Idempotent: a lingering QP gives its ring back early (sr_qp_destroy_linger)
 * and is finished later, when whoever lent the ring may be gone. */
void sr_rq_fini(struct sr_rq *rq)
{
    sr_ring_free(rq->alloc, rq->buf, rq->alloc_type, rq->custom);
    rq->buf = NULL;
    rq->custom = false;
}

int sr_srq_create(struct sr_pd *pd, uint32_t max_wr, uint32_t max_sge, struct sr_srq **out)
{
    return sr_srq_create_alloc(pd, max_wr, max_sge, NULL, out);
}

int sr_srq_create_alloc(struct sr_pd *pd, uint32_t max_wr, uint32_t max_sge,
                        const struct sr_alloc *alloc, struct sr_srq **out)
{
    struct sr_engine *e = pd->eng;
    if (!max_wr || max_wr > e->cfg.max_qp_wr || max_sge > SR_MAX_SGE)
        return SR_ERR_INVAL;
    if (e->srq_cnt >= e->cfg.max_srq)
        return SR_ERR_LIMIT;
    uint32_t slot = 0;
    while (slot < e->cfg.max_srq && e->srq_by_num[slot])
        slot++;
    if (slot == e->cfg.max_srq)
        return SR_ERR_LIMIT;
    struct sr_srq *srq = calloc(1, sizeof(*srq));
    if (!srq)
        return SR_ERR_NOMEM;
    if (alloc)
        srq->alloc = *alloc;
    if (sr_rq_init(&srq->rq, max_wr, max_sge ? max_sge : 1, &srq->alloc, SR_ALLOC_SRQ)) {
        free(srq);
        return SR_ERR_NOMEM;
    }
    srq->srqn = slot + 1;
    e->srq_by_num[slot] = srq;
    srq->pd = pd;
    pd->refcnt++;
    e->srq_cnt++;
    LIST_ADD(e->srqs, srq);
    *out = srq;
    return 0;
}

int sr_srq_destroy(struct sr_srq *srq)
{
    if (srq->refcnt)
        return SR_ERR_BUSY;
    srq->pd->eng->srq_by_num[srq->srqn - 1] = NULL;
    if (srq->xrcd) {
        srq->xrcd->refcnt--;
        srq->cq->refcnt--;
    }
    srq->pd->refcnt--;
    srq->pd->eng->srq_cnt--;
    LIST_DEL(srq->pd->eng->srqs, srq, struct sr_srq);
    sr_rq_fini(&srq->rq);
    free(srq);
    return 0;
}

int sr_srq_post_recv(struct sr_srq *srq, const struct sr_recv_wr *wr)
{
    return sr_rq_post(&srq->rq, wr);
}

int sr_srq_set_limit(struct sr_srq *srq, uint32_t limit)
{
    if (limit > srq->rq.max_wr)
        return SR_ERR_INVAL;
    srq->limit = limit;
    return 0;
}

void sr_srq_query(const struct sr_srq *srq, uint32_t *max_wr, uint32_t *max_sge, uint32_t *limit)
{
    *max_wr = srq->rq.max_wr;
    *max_sge = srq->rq.max_sge;
    *limit = srq->limit;
}

uint32_t sr_srq_num(const struct sr_srq *srq)
{
    return srq->srqn;
}

struct sr_srq *sr_srq_lookup(struct sr_engine *e, uint32_t srqn)
{
    return srqn >= 1 && srqn <= e->cfg.max_srq ? e->srq_by_num[srqn - 1] : NULL;
}

int sr_srq_create_xrc(struct sr_pd *pd, struct sr_xrcd *xrcd, struct sr_cq *cq, uint32_t max_wr,
                      uint32_t max_sge, struct sr_srq **out)
{
    if (!xrcd || !cq || xrcd->eng != pd->eng || cq->eng != pd->eng)
        return SR_ERR_INVAL;
    int err = sr_srq_create(pd, max_wr, max_sge, out);
    if (err)
        return err;
    (*out)->xrcd = xrcd;
    (*out)->cq = cq;
    xrcd->refcnt++;
    cq->refcnt++;
    return 0;
}

/* ---- XRC domains ---- */
int sr_xrcd_alloc(struct sr_engine *e, struct sr_xrcd **out)
{
    struct sr_xrcd *x = calloc(1, sizeof(*x));
    if (!x)
        return SR_ERR_NOMEM;
    x->eng = e;
    LIST_ADD(e->xrcds, x);
    *out = x;
    return 0;
}

int sr_xrcd_free(struct sr_xrcd *x)
{
    if (x->refcnt)
        return SR_ERR_BUSY;
    LIST_DEL(x->eng->xrcds, x, struct sr_xrcd);
    free(x);
    return 0;
}

void sr_srq_set_user(struct sr_srq *srq, void *user)
{
    srq->user = user;
}
void *sr_srq_user(const struct sr_srq *srq)
{
    return srq->user;
}

void sr_srq_check_limit(struct sr_srq *srq)
{
    /* IBA 10.2.9: the limit event fires once, then the limit disarms. */
    if (srq->limit && srq->rq.count < srq->limit) {
        srq->limit = 0;
        struct sr_engine *e = srq->pd->eng;
        if (e->cfg.ops.async_event)
            e->cfg.ops.async_event(e->cfg.ops_ctx, SR_EVENT_SRQ_LIMIT_REACHED, srq);
    }
}

/* ---- output ---- */
static void engine_tx(struct sr_engine *e, struct sr_qp *qp, const struct sr_pkt *pkt,
                      const struct sr_iov *iov, uint32_t iov_cnt, const uint8_t *dgid, bool flush)
{
    uint8_t hdr[SR_MAX_HDR_LEN];
    int hl = sr_wire_encode_hdr(pkt, hdr, sizeof(hdr));
    if (hl < 0)
        return; /* cannot happen for packets the engine builds; never send garbage */
    if (qp->resp.peer_sack && sr_ooo_answers_sack(e, pkt)) {
        hdr[8] |= SR_BTH_RESV7_SACK; /* this responder SACKs (docs/WIRE.md) */
        sr_ecn_echo_tx(qp, pkt, hdr);
    }
    uint8_t path;
    uint16_t src_port = sr_paths_qp_tx(qp, pkt, &path);
    struct sr_tx_pkt t = {
        .hdr = hdr,
        .hdr_len = (uint32_t)hl,
        .iov = iov,
        .iov_cnt = iov_cnt,
        .payload_len = pkt->payload_len,
        .pad_len = sr_wire_pad_len(pkt->payload_len),
        .dgid = dgid,
        .src_port = src_port,
        .path = path,
        .flush = flush && !e->cfg.ops.tx_fence,
        .bulk = e->bulk.tx,
    };
    if (sr_unlikely(e->bulk.tx))
        sr_bulk_tx_fix(&t); /* a READ's reference rides beside its headers */
    e->bulk.tx = false;
    if (flush && e->cfg.ops.tx_fence)
        e->fence_due = true;
    e->stats.tx_pkts++;
    e->stats.tx_bytes += (uint64_t)hl + pkt->payload_len;
    (void)e->cfg.ops.tx(e->cfg.ops_ctx, &t);
}

void sr_engine_tx(struct sr_engine *e, struct sr_qp *qp, const struct sr_pkt *pkt,
                  const struct sr_iov *iov, uint32_t iov_cnt, const uint8_t *dgid)
{
    engine_tx(e, qp, pkt, iov, iov_cnt, dgid, false);
}

void sr_engine_tx_flush(struct sr_engine *e, struct sr_qp *qp, const struct sr_pkt *pkt,
                        const struct sr_iov *iov, uint32_t iov_cnt, const uint8_t *dgid)
{
    engine_tx(e, qp, pkt, iov, iov_cnt, dgid, true);
}

/* ---- timers ---- */
void sr_engine_activate(struct sr_engine *e, struct sr_qp *qp)
{
    if (qp->active)
        return;
    qp->active = true;
    qp->active_prev = NULL;
    qp->active_next = e->active;
    if (e->active)
        e->active->active_prev = qp;
    e->active = qp;
}

static void deactivate(struct sr_engine *e, struct sr_qp *qp)
{
    if (!qp->active)
        return;
    if (qp->active_prev)
        qp->active_prev->active_next = qp->active_next;
    else
        e->active = qp->active_next;
    if (qp->active_next)
        qp->active_next->active_prev = qp->active_prev;
    qp->active = false;
}

void sr_engine_deactivate(struct sr_engine *e, struct sr_qp *qp);
void sr_engine_deactivate(struct sr_engine *e, struct sr_qp *qp)
{
    deactivate(e, qp);
}

/* The active list holds QPs that may have a timer; a timer wheel would
 * replace the scan when thousands of QPs are busy at once. */
uint64_t sr_engine_next_deadline(const struct sr_engine *e)
{
    uint64_t d = SR_NO_DEADLINE;
    for (const struct sr_qp *qp = e->active; qp; qp = qp->active_next) {
        uint64_t q = sr_qp_deadline(qp);
        if (q < d)
            d = q;
    }
    return d;
}

void sr_engine_advance(struct sr_engine *e, uint64_t now_ns)
{
    e->now_ns = now_ns;
    struct sr_qp *next;
    for (struct sr_qp *qp = e->active; qp; qp = next) {
        next = qp->active_next;
        uint64_t d = sr_qp_deadline(qp);
        if (qp->zombie) {
            if (d <= now_ns)
                sr_qp_destroy(qp); /* its linger is over */
            continue;
        }
        if (d <= now_ns) {
            sr_cong_advance(qp, now_ns);
            sr_resp_ack_first(qp, SR_ACK_EV_TIMER, now_ns);
            sr_ooo_advance(qp, now_ns); /* the SACK of the pass (ooo.c) */
            sr_comp_apply(qp, sr_comp_timer(qp, now_ns), now_ns);
        }
        if (sr_qp_deadline(qp) == SR_NO_DEADLINE)
            deactivate(e, qp);
    }
}

void sr_comp_apply(struct sr_qp *qp, struct sr_comp_next n, uint64_t now_ns)
{
    if (n.act & SR_COMP_REWIND) {
        sr_sack_discard(qp); /* go-back-N: the SACK marks are not trusted further */
        sr_req_rewind(qp, n.rewind_psn);
    }
    if (n.act & SR_COMP_ERROR) {
        sr_qp_to_error(qp);
        return; /* nothing more is sent; the timer goes with the QP */
    }
    if (n.act & SR_COMP_PROBE)
        sr_req_probe(qp, now_ns);
    if (n.act & SR_COMP_SACK)
        sr_sack_resend(qp, now_ns, n.act & SR_COMP_SACK_ALL);
    if (n.act & SR_COMP_READSEL)
        sr_readsel_resend(qp, now_ns, n.act & SR_COMP_SACK_ALL);
    if (n.act & SR_COMP_RESUME)
        sr_req_run(qp, now_ns);
    if (n.act & SR_COMP_ARM)
        sr_comp_arm(qp, now_ns);
}

/* ---- receive dispatch ---- */
void sr_engine_rx(struct sr_engine *e, const uint8_t *buf, size_t len, const uint8_t *src_gid,
                  uint64_t now_ns)
{
    sr_engine_rx_ecn(e, buf, len, src_gid, false, now_ns);
}

void sr_engine_rx_ecn(struct sr_engine *e, const uint8_t *buf, size_t len, const uint8_t *src_gid,
                      bool ce, uint64_t now_ns)
{
    e->now_ns = now_ns;
    e->stats.rx_pkts++;
    e->stats.rx_bytes += len;
    if (len < SR_BTH_LEN + SR_ICRC_LEN) {
        e->stats.rx_drop_malformed++;
        return;
    }
    struct sr_qp *qp = sr_qp_lookup(e, sr_get_be24(buf + 5));
    if (!qp || qp->attr.qp_state < SR_QPS_RTR || qp->attr.qp_state == SR_QPS_ERR) {
        /* IBA 9.6: packets to a nonexistent or not-ready QP are dropped. */
        e->stats.rx_drop_no_qp++;
        return;
    }
    struct sr_pkt pkt;
    int err = sr_wire_decode(buf, len, sr_qp_pmtu(qp), &pkt);
    /* Length errors leave pkt decoded: the responder NAKs them. */
    if (err < 0 && err != SR_ERR_WIRE_MTU && err != SR_ERR_WIRE_SEGMENT) {
        e->stats.rx_drop_malformed++;
        return;
    }
    if (pkt.bth.opcode == SR_OP_CNP) { /* RoCEv2 CNP, Annex A17.9: congestion.c */
        sr_cong_cnp_rx(qp, src_gid, now_ns);
        return;
    }
    uint8_t transport = SR_OPCODE_TRANSPORT(pkt.bth.opcode);
    const struct sr_opcode_info *ti = sr_opcode_info(pkt.bth.opcode);
    bool is_resp = ti->flags & SR_OPF_RESPONSE;
    bool type_ok =
        (qp->type == SR_QPT_RC && transport == SR_OP_RC) ||
        (qp->type == SR_QPT_UC && transport == SR_OP_UC) ||
        (qp->type == SR_QPT_UD && transport == SR_OP_UD) ||
        /* XRC: requests go to the target QP, responses to the initiator */
        (qp->type == SR_QPT_XRC_SEND && transport == SR_OP_XRC && is_resp) ||
        (qp->type == SR_QPT_XRC_RECV && transport == SR_OP_XRC && !is_resp) ||
        /* softrdma's SACK answers RC and XRC requesters (docs/WIRE.md) */
        (pkt.bth.opcode == SR_OP_SACK && (qp->type == SR_QPT_RC || qp->type == SR_QPT_XRC_SEND));
    if (!type_ok) {
        e->stats.rx_drop_other++;
        return;
    }
    /* Connected QPs accept packets only from their peer (IBA 9.6.1.5 path check). */
    if (qp->type != SR_QPT_UD && memcmp(src_gid, qp->attr.dgid, 16) != 0) {
        e->stats.rx_drop_bad_peer++;
        return;
    }
    if (sr_unlikely(e->bulk.rx) && !sr_bulk_rx_prepare(e, &pkt, err))
        return; /* not something that may come by reference (bulk.c) */
    const struct sr_opcode_info *info = sr_opcode_info(pkt.bth.opcode);
    if (qp->zombie) {
        if (!(info->flags & SR_OPF_RESPONSE) && err >= 0)
            sr_resp_zombie_rx(qp, &pkt, src_gid, now_ns);
        else
            e->stats.rx_drop_other++;
        return;
    }
    if (ce && !(info->flags & SR_OPF_RESPONSE)) {
        sr_ecn_ce_rx(qp);                         /* the echo to a SACK peer (ecn.c) */
        sr_cong_ce_rx(qp, &pkt, src_gid, now_ns); /* DCQCN's notification point */
    }
    if (info->flags & SR_OPF_RESPONSE) {
        if (err < 0) {
            e->stats.rx_drop_malformed++;
            return;
        }
        sr_ecn_echo_rx(qp, &pkt);
        struct sr_comp_next n = sr_comp_rx(qp, &pkt, now_ns);
        sr_ecn_echo_done(qp, now_ns); /* an echo no acknowledgement took */
        sr_comp_apply(qp, n, now_ns);
    } else {
        sr_resp_rx(qp, &pkt, err < 0 ? err : 0, src_gid, now_ns);
    }
}

/* ---- IBA tables ---- */
uint64_t sr_rnr_timer_ns(uint8_t code)
{
    /* IBA Vol 1 Table 45, in microseconds * 100 (0.01 ms units) */
    static const uint32_t t_10us[32] = {65536, 1,    2,    3,     4,     6,     8,     12,
                                        16,    24,   32,   48,    64,    96,    128,   192,
                                        256,   384,  512,  768,   1024,  1536,  2048,  3072,
                                        4096,  6144, 8192, 12288, 16384, 24576, 32768, 49152};
    return (uint64_t)t_10us[code & 31] * 10000u;
}

uint64_t sr_timeout_ns(uint8_t timeout)
{
    if (timeout == 0)
        return SR_NO_DEADLINE;
    if (timeout > 31)
        timeout = 31;
    return 4096ull << timeout;
}

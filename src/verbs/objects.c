/* objects.c: verbs objects over the engine: PDs, MRs, completion channels,
 * CQs, SRQs, QPs, AHs, and the data-path ops (post_send, post_recv,
 * post_srq_recv, poll_cq, req_notify_cq) the inline verbs reach through
 * ctx->ops. Every engine call holds the NIC lock. */
#include "sv.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

_Static_assert(sizeof(struct ibv_sge) == sizeof(struct sr_sge), "sge layout");
_Static_assert(offsetof(struct ibv_sge, lkey) == offsetof(struct sr_sge, lkey), "sge layout");
_Static_assert((int)IBV_WC_RETRY_EXC_ERR == (int)SR_WC_RETRY_EXC_ERR, "wc status values");
_Static_assert((int)IBV_WC_REM_ACCESS_ERR == (int)SR_WC_REM_ACCESS_ERR, "wc status values");
_Static_assert((int)IBV_WC_RECV_RDMA_WITH_IMM == (int)SR_WC_RECV_RDMA_WITH_IMM, "wc opcodes");
_Static_assert((int)IBV_WR_SEND_WITH_INV == (int)SR_WR_SEND_WITH_INV, "wr opcodes");
_Static_assert((int)IBV_WR_ATOMIC_WRITE == (int)SR_WR_ATOMIC_WRITE, "wr opcodes");
_Static_assert((int)IBV_WC_ATOMIC_WRITE == (int)SR_WC_ATOMIC_WRITE, "wc opcodes");
_Static_assert((int)IBV_QP_DEST_QPN == (int)SR_QP_DEST_QPN, "attr mask");
_Static_assert((int)IBV_QPS_ERR == (int)SR_QPS_ERR, "qp states");
_Static_assert((int)IBV_SEND_INLINE == (int)SR_SEND_INLINE, "send flags");
_Static_assert((int)IBV_EVENT_SRQ_LIMIT_REACHED == (int)SR_EVENT_SRQ_LIMIT_REACHED, "events");
_Static_assert((int)IBV_EVENT_QP_LAST_WQE_REACHED == (int)SR_EVENT_QP_LAST_WQE_REACHED, "events");

static struct sr_nic *nic_of(struct ibv_context *c)
{
    return sv_ctx(c)->nic;
}

#define LOCKED(ctx, expr)                                                                          \
    ({                                                                                             \
        sr_nic_lock(nic_of(ctx));                                                                  \
        __auto_type r_ = (expr);                                                                   \
        sr_nic_unlock(nic_of(ctx));                                                                \
        r_;                                                                                        \
    })

/* ---- engine callbacks (NIC lock held) ---- */
void sv_engine_cq_event(void *ctx, struct sr_cq *cq, bool solicited)
{
    (void)ctx, (void)solicited;
    struct sv_cq *c = sr_cq_user(cq);
    if (!c || !c->ibcq.channel)
        return;
    struct sv_channel *ch = sr_container_of(c->ibcq.channel, struct sv_channel, ch);
    sv_evq_post(&ch->evq, 0, c);
}

void sv_engine_async_event(void *ctx, enum sr_event_type type, void *obj)
{
    (void)ctx;
    switch (type) {
    case SR_EVENT_CQ_ERR: {
        struct sv_cq *c = sr_cq_user(obj);
        if (c)
            sv_async_post(sv_ctx(c->ibcq.context), IBV_EVENT_CQ_ERR, &c->ibcq);
        break;
    }
    case SR_EVENT_SRQ_LIMIT_REACHED: {
        struct sv_srq *s = sr_srq_user(obj);
        if (s)
            sv_async_post(sv_ctx(s->ibsrq.context), IBV_EVENT_SRQ_LIMIT_REACHED, &s->ibsrq);
        break;
    }
    default: {
        struct sv_qp *q = sr_qp_user(obj);
        if (q)
            sv_async_post(sv_ctx(q->qpex.qp_base.context), (enum ibv_event_type)type,
                          &q->qpex.qp_base);
        break;
    }
    }
}

/* ---- PD ---- */
SV_EXPORT struct ibv_pd *ibv_alloc_pd(struct ibv_context *context)
{
    if (!sv_live_is(context, SV_K_CTX)) {
        errno = EINVAL;
        return NULL;
    }
    struct sv_pd *p = calloc(1, sizeof(*p));
    if (!p) {
        errno = ENOMEM;
        return NULL;
    }
    int err = LOCKED(context, sr_pd_alloc(sr_nic_engine(nic_of(context)), &p->pd));
    if (err) {
        free(p);
        errno = sv_errno(err);
        return NULL;
    }
    p->ibpd.context = context;
    p->ibpd.handle = sv_handle_new(sv_ctx(context)->dev);
    sv_live_add(&p->ibpd, SV_K_PD);
    return &p->ibpd;
}

SV_EXPORT int ibv_dealloc_pd(struct ibv_pd *pd)
{
    if (!sv_live_is(pd, SV_K_PD))
        return EINVAL;
    struct sv_pd *p = sv_pd(pd);
    if (p->imported) {
        ibv_unimport_pd(pd); /* the original owns the engine PD */
        return 0;
    }
    if (p->parent_of || __atomic_load_n(&p->children, __ATOMIC_ACQUIRE))
        return sv_pd_ex_dealloc(p);
    int err = LOCKED(pd->context, sr_pd_free(p->pd));
    if (err)
        return sv_errno(err);
    sv_live_del(pd);
    free(p);
    return 0;
}

/* ---- MR ---- */
static const unsigned int known_access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                                         IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC |
                                         IBV_ACCESS_MW_BIND;

struct ibv_mr *sv_reg_mr(struct ibv_pd *pd, void *addr, size_t length, uint64_t iova,
                         unsigned int access)
{
    if (!sv_live_is(pd, SV_K_PD)) {
        errno = EINVAL;
        return NULL;
    }
    /* Bits no verbs version defines are EINVAL, as the kernel's
     * ib_check_mr_access answers (known ones below HUGETLB, or optional). */
    if (access & ~(unsigned int)(((IBV_ACCESS_HUGETLB << 1) - 1) | IBV_ACCESS_OPTIONAL_RANGE)) {
        errno = EINVAL;
        return NULL;
    }
    /* Optional-range bits (relaxed ordering, ...) are hints we may ignore;
     * others we do not implement (zero-based) fail. On-demand paging
     * needs no pinning here; addr 0 with SIZE_MAX bytes is the implicit
     * MR, the whole address space (verbs man page ibv_reg_mr). */
    unsigned int mandatory = access & ~(unsigned int)(IBV_ACCESS_OPTIONAL_RANGE);
    /* HUGETLB says the memory is hugetlbfs-backed, which a kernel provider
     * may use to pin it in fewer, larger pages: nothing is pinned here. */
    mandatory &= ~(unsigned int)IBV_ACCESS_HUGETLB;
    if (mandatory & ~(known_access | IBV_ACCESS_ON_DEMAND)) {
        errno = EOPNOTSUPP;
        return NULL;
    }
    bool implicit = (access & IBV_ACCESS_ON_DEMAND) && !addr && length == SIZE_MAX;
    if (!implicit && (access & IBV_ACCESS_ON_DEMAND) && !addr) {
        errno = EINVAL;
        return NULL;
    }
    if (implicit)
        iova = 0;
    struct sv_mr *m = calloc(1, sizeof(*m));
    if (!m) {
        errno = ENOMEM;
        return NULL;
    }
    uint32_t sa = mandatory & known_access;
    if (access & IBV_ACCESS_ON_DEMAND)
        sa |= SR_ACCESS_ON_DEMAND;
    int err = LOCKED(pd->context, sr_mr_reg(sv_pd(pd)->pd, addr, length, iova, sa, &m->mr));
    if (err) {
        free(m);
        errno = sv_errno(err);
        return NULL;
    }
    m->ibmr.context = pd->context;
    m->ibmr.pd = pd;
    m->ibmr.addr = addr;
    m->ibmr.length = length;
    m->ibmr.handle = sv_handle_new(sv_ctx(pd->context)->dev);
    m->ibmr.lkey = sr_mr_lkey(m->mr);
    m->ibmr.rkey = sr_mr_rkey(m->mr);
    m->access = mandatory;
    m->iova = iova;
    sv_live_add(&m->ibmr, SV_K_MR);
    return &m->ibmr;
}

#undef ibv_reg_mr
SV_EXPORT struct ibv_mr *ibv_reg_mr(struct ibv_pd *pd, void *addr, size_t length, int access);
struct ibv_mr *ibv_reg_mr(struct ibv_pd *pd, void *addr, size_t length, int access)
{
    return sv_reg_mr(pd, addr, length, (uintptr_t)addr, (unsigned int)access);
}

#undef ibv_reg_mr_iova
SV_EXPORT struct ibv_mr *ibv_reg_mr_iova(struct ibv_pd *pd, void *addr, size_t length,
                                         uint64_t iova, int access);
struct ibv_mr *ibv_reg_mr_iova(struct ibv_pd *pd, void *addr, size_t length, uint64_t iova,
                               int access)
{
    return sv_reg_mr(pd, addr, length, iova, (unsigned int)access);
}

SV_EXPORT struct ibv_mr *ibv_reg_mr_iova2(struct ibv_pd *pd, void *addr, size_t length,
                                          uint64_t iova, unsigned int access)
{
    return sv_reg_mr(pd, addr, length, iova, access);
}

SV_EXPORT struct ibv_mr *ibv_reg_dmabuf_mr(struct ibv_pd *pd, uint64_t offset, size_t length,
                                           uint64_t iova, int fd, int access)
{
    (void)pd, (void)offset, (void)length, (void)iova, (void)fd, (void)access;
    errno = EOPNOTSUPP;
    return NULL;
}

SV_EXPORT int ibv_dereg_mr(struct ibv_mr *mr)
{
    if (!sv_live_is(mr, SV_K_MR))
        return EINVAL;
    struct sv_mr *m = sr_container_of(mr, struct sv_mr, ibmr);
    if (m->imported) {
        ibv_unimport_mr(mr); /* the original owns the engine MR */
        return 0;
    }
    int err = LOCKED(mr->context, sr_mr_dereg(m->mr));
    if (err)
        return sv_errno(err);
    sv_mr_ex_dereg(m);
    sv_live_del(mr);
    free(m);
    return 0;
}

/* ---- completion channels ---- */
SV_EXPORT struct ibv_comp_channel *ibv_create_comp_channel(struct ibv_context *context)
{
    if (!sv_live_is(context, SV_K_CTX)) {
        errno = EINVAL;
        return NULL;
    }
    struct sv_channel *ch = calloc(1, sizeof(*ch));
    if (!ch) {
        errno = ENOMEM;
        return NULL;
    }
    int err = sv_evq_init(&ch->evq);
    if (err) {
        free(ch);
        errno = err;
        return NULL;
    }
    ch->ch.context = context;
    ch->ch.fd = ch->evq.rfd;
    sv_live_add(&ch->ch, SV_K_CHANNEL);
    return &ch->ch;
}

SV_EXPORT int ibv_destroy_comp_channel(struct ibv_comp_channel *channel)
{
    if (!sv_live_is(channel, SV_K_CHANNEL))
        return EINVAL;
    struct sv_channel *ch = sr_container_of(channel, struct sv_channel, ch);
    if (channel->refcnt)
        return EBUSY;
    sv_live_del(channel);
    sv_evq_fini(&ch->evq);
    free(ch);
    return 0;
}

SV_EXPORT int ibv_get_cq_event(struct ibv_comp_channel *channel, struct ibv_cq **cq,
                               void **cq_context)
{
    /* checked before it blocks: a bad output would be found only after */
    if (!cq || !cq_context || !sv_live_is(channel, SV_K_CHANNEL)) {
        errno = EINVAL;
        return -1;
    }
    struct sv_channel *ch = sr_container_of(channel, struct sv_channel, ch);
    struct sv_ev e;
    sr_nic_app_blocks(nic_of(channel->context)); /* it may sleep: the NIC thread listens */
    if (sv_evq_get(&ch->evq, &e))
        return -1;
    struct sv_cq *c = e.obj;
    *cq = &c->ibcq;
    *cq_context = c->ibcq.cq_context;
    return 0;
}

SV_EXPORT void ibv_ack_cq_events(struct ibv_cq *cq, unsigned int nevents)
{
    if (!sv_live_is(cq, SV_K_CQ))
        return;
    pthread_mutex_lock(&cq->mutex);
    cq->comp_events_completed += nevents;
    pthread_cond_signal(&cq->cond);
    pthread_mutex_unlock(&cq->mutex);
}

/* ---- CQ ---- */
SV_EXPORT struct ibv_cq *ibv_create_cq(struct ibv_context *context, int cqe, void *cq_context,
                                       struct ibv_comp_channel *channel, int comp_vector)
{
    if (!sv_live_is(context, SV_K_CTX) || !sv_live_opt(channel, SV_K_CHANNEL)) {
        errno = EINVAL;
        return NULL;
    }
    if (cqe < 1 || comp_vector < 0 || comp_vector >= context->num_comp_vectors) {
        errno = EINVAL;
        return NULL;
    }
    struct sv_cq *c = calloc(1, sizeof(*c));
    if (!c) {
        errno = ENOMEM;
        return NULL;
    }
    int err = LOCKED(context, sr_cq_create(sr_nic_engine(nic_of(context)), (uint32_t)cqe, &c->cq));
    if (err) {
        free(c);
        errno = sv_errno(err);
        return NULL;
    }
    sr_cq_set_user(c->cq, c);
    c->ibcq.context = context;
    c->ibcq.channel = channel;
    c->ibcq.cq_context = cq_context;
    c->ibcq.cqe = cqe;
    pthread_mutex_init(&c->ibcq.mutex, NULL);
    pthread_cond_init(&c->ibcq.cond, NULL);
    if (channel)
        __atomic_add_fetch(&channel->refcnt, 1, __ATOMIC_SEQ_CST);
    sv_live_add(&c->ibcq, SV_K_CQ);
    return &c->ibcq;
}

SV_EXPORT int ibv_resize_cq(struct ibv_cq *cq, int cqe)
{
    if (!sv_live_is(cq, SV_K_CQ))
        return EINVAL;
    if (cqe < 1)
        return EINVAL;
    int err = LOCKED(cq->context, sr_cq_resize(sv_cq(cq)->cq, (uint32_t)cqe));
    if (err)
        return sv_errno(err);
    cq->cqe = cqe;
    return 0;
}

SV_EXPORT int ibv_destroy_cq(struct ibv_cq *cq)
{
    if (!sv_live_is(cq, SV_K_CQ))
        return EINVAL;
    struct sv_cq *c = sv_cq(cq);
    int err = LOCKED(cq->context, sr_cq_destroy(c->cq));
    if (err)
        return sv_errno(err);
    /* no event may name a destroyed CQ */
    if (cq->channel) {
        sv_evq_purge(&sr_container_of(cq->channel, struct sv_channel, ch)->evq, c);
        __atomic_sub_fetch(&cq->channel->refcnt, 1, __ATOMIC_SEQ_CST);
    }
    sv_evq_purge(&sv_ctx(cq->context)->async, cq);
    pthread_mutex_destroy(&cq->mutex);
    pthread_cond_destroy(&cq->cond);
    sv_live_del(cq);
    free(c);
    return 0;
}

static void to_ibv_wc(const struct sr_wc *s, struct ibv_wc *w)
{
    w->wr_id = s->wr_id;
    w->status = (enum ibv_wc_status)s->status;
    w->opcode = (enum ibv_wc_opcode)s->opcode;
    w->vendor_err = s->vendor_err;
    w->byte_len = s->byte_len;
    if (s->wc_flags & SR_WC_WITH_INV)
        w->invalidated_rkey = s->imm;
    else
        w->imm_data = htonl(s->imm);
    w->qp_num = s->qp_num;
    w->src_qp = s->src_qp;
    w->wc_flags = s->wc_flags;
    w->pkey_index = s->pkey_index;
    w->slid = 0;
    w->sl = s->sl;
    w->dlid_path_bits = 0;
}

static int cq_drain(struct sv_cq *c, int num_entries, struct ibv_wc *wc)
{
    struct sr_wc tmp[32];
    int got = 0;
    while (got < num_entries) {
        int n = sr_cq_poll(c->cq, SR_MIN(num_entries - got, 32), tmp);
        for (int i = 0; i < n; i++)
            to_ibv_wc(&tmp[i], &wc[got + i]);
        got += n;
        if (n == 0)
            break;
    }
    return got;
}

static int cq_drain_ibv(struct sv_cq *c, int n, void *out)
{
    return cq_drain(c, n, out);
}

static int sv_poll_cq(struct ibv_cq *cq, int num_entries, struct ibv_wc *wc)
{
    /* before any completion is taken (it would be lost) */
    if (__builtin_expect(!wc, 0) && num_entries > 0)
        return -EINVAL;
    return sv_cq_poll_with(sv_cq(cq), num_entries, wc, cq_drain_ibv, false);
}

static int sv_req_notify_cq(struct ibv_cq *cq, int solicited_only)
{
    struct sr_nic *nic = nic_of(cq->context);
    sr_nic_lock(nic);
    int r = sr_cq_req_notify(sv_cq(cq)->cq, solicited_only != 0);
    sr_nic_app_sleeps(nic); /* it will wait: the NIC thread listens, held ACKs leave */
    sr_nic_unlock(nic);
    return sv_errno(r);
}

/* ---- SRQ ---- */
SV_EXPORT struct ibv_srq *ibv_create_srq(struct ibv_pd *pd, struct ibv_srq_init_attr *attr)
{
    if (!attr || !sv_live_is(pd, SV_K_PD)) {
        errno = EINVAL;
        return NULL;
    }
    struct sv_srq *s = calloc(1, sizeof(*s));
    if (!s) {
        errno = ENOMEM;
        return NULL;
    }
    int err =
        LOCKED(pd->context, sr_srq_create_alloc(sv_pd(pd)->pd, attr->attr.max_wr,
                                                attr->attr.max_sge, sv_pd_alloc(pd), &s->srq));
    /* srq_limit is ignored at creation (ibv_create_srq(3)): only
     * ibv_modify_srq arms the limit event. */
    if (err) {
        free(s);
        errno = sv_errno(err);
        return NULL;
    }
    sr_srq_set_user(s->srq, s);
    s->ibsrq.context = pd->context;
    s->ibsrq.srq_context = attr->srq_context;
    s->ibsrq.pd = pd;
    pthread_mutex_init(&s->ibsrq.mutex, NULL);
    pthread_cond_init(&s->ibsrq.cond, NULL);
    sv_live_add(&s->ibsrq, SV_K_SRQ);
    return &s->ibsrq;
}

/* ---- XRC domains and extended SRQs ---- */
/* A domain is private to its context: the fd that rdma-core uses to share
 * one between processes (IBV_XRCD_INIT_ATTR_FD) has no meaning here. */
static struct ibv_xrcd *sv_open_xrcd(struct ibv_context *context, struct ibv_xrcd_init_attr *attr)
{
    if (!attr || !sv_live_is(context, SV_K_CTX)) {
        errno = EINVAL;
        return NULL;
    }
    if (attr->comp_mask & ~(uint32_t)(IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS)) {
        errno = EOPNOTSUPP;
        return NULL;
    }
    struct sv_xrcd *x = calloc(1, sizeof(*x));
    if (!x) {
        errno = ENOMEM;
        return NULL;
    }
    int err = LOCKED(context, sr_xrcd_alloc(sr_nic_engine(nic_of(context)), &x->xrcd));
    if (err) {
        free(x);
        errno = sv_errno(err);
        return NULL;
    }
    x->ibxrcd.context = context;
    sv_live_add(&x->ibxrcd, SV_K_XRCD);
    return &x->ibxrcd;
}

static int sv_close_xrcd(struct ibv_xrcd *xrcd)
{
    if (!sv_live_is(xrcd, SV_K_XRCD))
        return EINVAL;
    struct sv_xrcd *x = sr_container_of(xrcd, struct sv_xrcd, ibxrcd);
    int err = LOCKED(xrcd->context, sr_xrcd_free(x->xrcd));
    if (err)
        return sv_errno(err);
    sv_live_del(xrcd);
    free(x);
    return 0;
}

static struct ibv_srq *sv_create_srq_ex(struct ibv_context *context, struct ibv_srq_init_attr_ex *a)
{
    if (!sv_live_is(context, SV_K_CTX) ||
        ((a->comp_mask & IBV_SRQ_INIT_ATTR_XRCD) && !sv_live_is(a->xrcd, SV_K_XRCD)) ||
        ((a->comp_mask & IBV_SRQ_INIT_ATTR_CQ) && !sv_live_is(a->cq, SV_K_CQ))) {
        errno = EINVAL;
        return NULL;
    }
    uint32_t known = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_XRCD |
                     IBV_SRQ_INIT_ATTR_CQ;
    enum ibv_srq_type type = (a->comp_mask & IBV_SRQ_INIT_ATTR_TYPE) ? a->srq_type : IBV_SRQT_BASIC;
    if ((a->comp_mask & ~known) || (type != IBV_SRQT_BASIC && type != IBV_SRQT_XRC)) {
        errno = EOPNOTSUPP;
        return NULL;
    }
    if (!(a->comp_mask & IBV_SRQ_INIT_ATTR_PD) || !a->pd) {
        errno = EINVAL;
        return NULL;
    }
    if (type == IBV_SRQT_BASIC)
        return ibv_create_srq(a->pd, (struct ibv_srq_init_attr *)a);
    if (!(a->comp_mask & IBV_SRQ_INIT_ATTR_XRCD) || !(a->comp_mask & IBV_SRQ_INIT_ATTR_CQ) ||
        !a->xrcd || !a->cq) {
        errno = EINVAL;
        return NULL;
    }
    struct sv_srq *s = calloc(1, sizeof(*s));
    if (!s) {
        errno = ENOMEM;
        return NULL;
    }
    struct sv_xrcd *x = sr_container_of(a->xrcd, struct sv_xrcd, ibxrcd);
    int err = LOCKED(context, sr_srq_create_xrc(sv_pd(a->pd)->pd, x->xrcd, sv_cq(a->cq)->cq,
                                                a->attr.max_wr, a->attr.max_sge, &s->srq));
    if (err) {
        free(s);
        errno = sv_errno(err);
        return NULL;
    }
    sr_srq_set_user(s->srq, s);
    s->ibsrq.context = context;
    s->ibsrq.srq_context = a->srq_context;
    s->ibsrq.pd = a->pd;
    pthread_mutex_init(&s->ibsrq.mutex, NULL);
    pthread_cond_init(&s->ibsrq.cond, NULL);
    sv_live_add(&s->ibsrq, SV_K_SRQ);
    return &s->ibsrq;
}

static int sv_get_srq_num(struct ibv_srq *srq, uint32_t *srq_num)
{
    if (!srq_num || !sv_live_is(srq, SV_K_SRQ))
        return EINVAL;
    *srq_num = sr_srq_num(sv_srq(srq)->srq);
    return 0;
}

SV_EXPORT int ibv_modify_srq(struct ibv_srq *srq, struct ibv_srq_attr *attr, int mask)
{
    if (!attr || !sv_live_is(srq, SV_K_SRQ) || (mask & ~(IBV_SRQ_MAX_WR | IBV_SRQ_LIMIT)))
        return EINVAL;
    if (mask & IBV_SRQ_MAX_WR)
        return EOPNOTSUPP; /* resizing an SRQ is not supported */
    if (mask & IBV_SRQ_LIMIT)
        return sv_errno(LOCKED(srq->context, sr_srq_set_limit(sv_srq(srq)->srq, attr->srq_limit)));
    return 0;
}

SV_EXPORT int ibv_query_srq(struct ibv_srq *srq, struct ibv_srq_attr *attr)
{
    if (!attr || !sv_live_is(srq, SV_K_SRQ))
        return EINVAL;
    uint32_t max_wr, max_sge, limit;
    sr_nic_lock(nic_of(srq->context));
    sr_srq_query(sv_srq(srq)->srq, &max_wr, &max_sge, &limit);
    sr_nic_unlock(nic_of(srq->context));
    attr->max_wr = max_wr;
    attr->max_sge = max_sge;
    attr->srq_limit = limit;
    return 0;
}

SV_EXPORT int ibv_destroy_srq(struct ibv_srq *srq)
{
    if (!sv_live_is(srq, SV_K_SRQ))
        return EINVAL;
    struct sv_srq *s = sv_srq(srq);
    int err = LOCKED(srq->context, sr_srq_destroy(s->srq));
    if (err)
        return sv_errno(err);
    sv_evq_purge(&sv_ctx(srq->context)->async, srq);
    pthread_mutex_destroy(&srq->mutex);
    pthread_cond_destroy(&srq->cond);
    sv_live_del(srq);
    free(s);
    return 0;
}

static int post_recv_list(struct ibv_context *ctx, struct sr_qp *qp, struct sr_srq *srq,
                          struct ibv_recv_wr *wr, struct ibv_recv_wr **bad_wr)
{
    if (!wr || !bad_wr)
        return EINVAL; /* rxe_post_recv */
    int err = 0;
    sr_nic_lock(nic_of(ctx));
    for (; wr; wr = wr->next) {
        struct sr_recv_wr r = {.wr_id = wr->wr_id,
                               .sg_list = (const struct sr_sge *)wr->sg_list,
                               .num_sge = (uint32_t)wr->num_sge};
        if (wr->num_sge < 0) {
            err = EINVAL;
            break;
        }
        int e = qp ? sr_qp_post_recv(qp, &r) : sr_srq_post_recv(srq, &r);
        if (e) {
            err = sv_errno(e);
            break;
        }
    }
    sr_nic_unlock(nic_of(ctx));
    if (err && bad_wr)
        *bad_wr = wr;
    return err;
}

static int sv_post_srq_recv(struct ibv_srq *srq, struct ibv_recv_wr *wr,
                            struct ibv_recv_wr **bad_wr)
{
    return post_recv_list(srq->context, NULL, sv_srq(srq)->srq, wr, bad_wr);
}

static int sv_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad_wr)
{
    return post_recv_list(qp->context, sv_qp(qp)->qp, NULL, wr, bad_wr);
}

/* ---- QP ---- */
static struct ibv_qp *create_qp(struct ibv_context *context, struct ibv_pd *pd,
                                struct ibv_xrcd *xrcd, struct ibv_qp_init_attr *a,
                                uint64_t send_ops_flags)
{
    if (!sv_live_is(context, SV_K_CTX) || !sv_live_opt(pd, SV_K_PD) ||
        !sv_live_opt(xrcd, SV_K_XRCD) || !sv_live_opt(a->send_cq, SV_K_CQ) ||
        !sv_live_opt(a->recv_cq, SV_K_CQ) || !sv_live_opt(a->srq, SV_K_SRQ)) {
        errno = EINVAL;
        return NULL;
    }
    enum sr_qp_type t;
    switch (a->qp_type) {
    case IBV_QPT_RC:
        t = SR_QPT_RC;
        break;
    case IBV_QPT_UC:
        t = SR_QPT_UC;
        break;
    case IBV_QPT_UD:
        t = SR_QPT_UD;
        break;
    case IBV_QPT_XRC_SEND:
        t = SR_QPT_XRC_SEND;
        break;
    case IBV_QPT_XRC_RECV:
        t = SR_QPT_XRC_RECV;
        break;
    default:
        errno = EOPNOTSUPP;
        return NULL;
    }
    bool ok = t == SR_QPT_XRC_RECV   ? xrcd != NULL
              : t == SR_QPT_XRC_SEND ? pd && a->send_cq
                                     : pd && a->send_cq && (a->recv_cq || a->srq);
    if (!ok) {
        errno = EINVAL;
        return NULL;
    }
    struct sv_qp *q = calloc(1, sizeof(*q));
    if (!q) {
        errno = ENOMEM;
        return NULL;
    }
    struct sr_qp_init_attr ia = {
        .alloc = pd ? sv_pd_alloc(pd) : NULL,
        .qp_type = t,
        .send_cq = a->send_cq && t != SR_QPT_XRC_RECV ? sv_cq(a->send_cq)->cq : NULL,
        .recv_cq = a->recv_cq && t != SR_QPT_XRC_RECV ? sv_cq(a->recv_cq)->cq : NULL,
        .srq = a->srq && t != SR_QPT_XRC_RECV ? sv_srq(a->srq)->srq : NULL,
        .xrcd = xrcd ? sr_container_of(xrcd, struct sv_xrcd, ibxrcd)->xrcd : NULL,
        .cap = {.max_send_wr = a->cap.max_send_wr,
                .max_recv_wr = a->srq ? 0 : a->cap.max_recv_wr,
                .max_send_sge = a->cap.max_send_sge,
                .max_recv_sge = a->cap.max_recv_sge,
                .max_inline_data = a->cap.max_inline_data},
        .sq_sig_all = a->sq_sig_all != 0,
    };
    int err = LOCKED(context, sr_qp_create(pd ? sv_pd(pd)->pd : NULL, &ia, &q->qp));
    if (err) {
        free(q);
        errno = sv_errno(err);
        return NULL;
    }
    sr_qp_set_user(q->qp, q);
    struct ibv_qp *qp = &q->qpex.qp_base;
    qp->context = context;
    qp->qp_context = a->qp_context;
    qp->pd = pd;
    qp->send_cq = a->send_cq;
    qp->recv_cq = a->recv_cq;
    qp->srq = a->srq;
    qp->qp_num = sr_qp_num(q->qp);
    qp->state = IBV_QPS_RESET;
    qp->qp_type = a->qp_type;
    pthread_mutex_init(&qp->mutex, NULL);
    pthread_cond_init(&qp->cond, NULL);
    /* report what we actually provide */
    struct sr_qp_attr qa;
    sr_qp_query(q->qp, &qa, NULL);
    a->cap.max_send_sge = qa.cap.max_send_sge;
    a->cap.max_recv_sge = qa.cap.max_recv_sge;
    a->cap.max_inline_data = qa.cap.max_inline_data;
    sv_qp_ex_init(q, send_ops_flags);
    sv_live_add(qp, SV_K_QP);
    return qp;
}

SV_EXPORT struct ibv_qp *ibv_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *attr)
{
    if (!attr || !sv_live_is(pd, SV_K_PD)) {
        errno = EINVAL;
        return NULL;
    }
    return create_qp(pd->context, pd, NULL, attr, 0);
}

static struct ibv_qp *sv_create_qp_ex(struct ibv_context *context, struct ibv_qp_init_attr_ex *ax)
{
    uint64_t known = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS | IBV_QP_INIT_ATTR_XRCD |
                     IBV_QP_INIT_ATTR_CREATE_FLAGS;
    /* No creation flag is implemented; asking for none is fine. Send ops
     * the ibv_wr_* API cannot post, or the QP type cannot carry (rxe's
     * check_qp_init_attr), are refused now, as rxe and mlx5 do, rather
     * than at ibv_wr_complete. */
    bool bad_flags = (ax->comp_mask & IBV_QP_INIT_ATTR_CREATE_FLAGS) && ax->create_flags;
    bool bad_ops = (ax->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) &&
                   (ax->send_ops_flags & ~sv_send_ops_for(ax->qp_type));
    if ((ax->comp_mask & ~known) || bad_flags || bad_ops) {
        errno = EOPNOTSUPP;
        return NULL;
    }
    struct ibv_qp_init_attr a = {
        .qp_context = ax->qp_context,
        .send_cq = ax->send_cq,
        .recv_cq = ax->recv_cq,
        .srq = ax->srq,
        .cap = ax->cap,
        .qp_type = ax->qp_type,
        .sq_sig_all = ax->sq_sig_all,
    };
    struct ibv_pd *pd = (ax->comp_mask & IBV_QP_INIT_ATTR_PD) ? ax->pd : NULL;
    uint64_t ops = (ax->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) ? ax->send_ops_flags : 0;
    struct ibv_xrcd *xrcd = (ax->comp_mask & IBV_QP_INIT_ATTR_XRCD) ? ax->xrcd : NULL;
    struct ibv_qp *qp = create_qp(context, pd, xrcd, &a, ops);
    if (qp)
        ax->cap = a.cap;
    return qp;
}

static uint32_t mtu_bytes(enum ibv_mtu m)
{
    return m >= IBV_MTU_256 && m <= IBV_MTU_4096 ? 128u << m : 0;
}

SV_EXPORT int ibv_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int attr_mask)
{
    if (!attr || !sv_live_is(qp, SV_K_QP))
        return EINVAL;
    struct sv_qp *q = sv_qp(qp);
    struct sr_qp_attr a = {0};
    uint32_t mask = (uint32_t)attr_mask;
    if (mask & ~(uint32_t)((SR_QP_DEST_QPN << 1) - 1))
        return EINVAL; /* rate limit and newer attributes are not supported */
    a.qp_state = (enum sr_qp_state)attr->qp_state;
    a.cur_qp_state = (enum sr_qp_state)attr->cur_qp_state;
    a.path_mtu = mtu_bytes(attr->path_mtu);
    if ((mask & IBV_QP_PATH_MTU) && !a.path_mtu)
        return EINVAL;
    if ((mask & IBV_QP_PATH_MTU) && a.path_mtu > sv_ctx(qp->context)->dev->cfg.mtu)
        return EINVAL; /* above the port's active MTU */
    a.qkey = attr->qkey;
    a.rq_psn = attr->rq_psn;
    a.sq_psn = attr->sq_psn;
    a.dest_qp_num = attr->dest_qp_num;
    /* Bits that describe memory, not a QP's remote access (ON_DEMAND and
     * the like, which pyverbs passes both ways), are ignored as the
     * kernel providers ignore them. */
    a.qp_access_flags = (uint32_t)attr->qp_access_flags &
                        ~(uint32_t)(IBV_ACCESS_ON_DEMAND | IBV_ACCESS_ZERO_BASED |
                                    IBV_ACCESS_HUGETLB | IBV_ACCESS_OPTIONAL_RANGE);
    a.pkey_index = attr->pkey_index;
    a.port_num = attr->port_num;
    a.timeout = attr->timeout;
    a.retry_cnt = attr->retry_cnt;
    a.rnr_retry = attr->rnr_retry;
    a.min_rnr_timer = attr->min_rnr_timer;
    a.max_rd_atomic = attr->max_rd_atomic;
    a.max_dest_rd_atomic = attr->max_dest_rd_atomic;
    if (mask & IBV_QP_AV) {
        /* RoCE: the path is the peer's GID (a GRH is required, IBA A16/A17) */
        if (!attr->ah_attr.is_global ||
            !sv_gid_index_usable(sv_ctx(qp->context)->dev, attr->ah_attr.grh.sgid_index))
            return EINVAL;
        memcpy(a.dgid, attr->ah_attr.grh.dgid.raw, 16);
    }
    struct sr_nic *nic = nic_of(qp->context);
    sr_nic_lock(nic);
    int err = sr_qp_modify(q->qp, &a, mask, sr_nic_now());
    sr_nic_flush(nic); /* SQD -> RTS resumes sending */
    sr_nic_unlock(nic);
    if (err)
        return sv_errno(err);
    if (mask & IBV_QP_STATE)
        qp->state = attr->qp_state;
    return 0;
}

SV_EXPORT int ibv_query_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int attr_mask,
                           struct ibv_qp_init_attr *init_attr)
{
    if (!attr || !sv_live_is(qp, SV_K_QP))
        return EINVAL;
    (void)attr_mask;
    struct sr_qp_attr a;
    struct sr_qp_init_attr ia;
    sr_nic_lock(nic_of(qp->context));
    sr_qp_query(sv_qp(qp)->qp, &a, &ia);
    sr_nic_unlock(nic_of(qp->context));
    memset(attr, 0, sizeof(*attr));
    attr->qp_state = (enum ibv_qp_state)a.qp_state;
    attr->cur_qp_state = (enum ibv_qp_state)a.qp_state;
    attr->path_mtu = a.path_mtu == 256    ? IBV_MTU_256
                     : a.path_mtu == 512  ? IBV_MTU_512
                     : a.path_mtu == 1024 ? IBV_MTU_1024
                     : a.path_mtu == 2048 ? IBV_MTU_2048
                                          : IBV_MTU_4096;
    attr->qkey = a.qkey;
    attr->rq_psn = a.rq_psn;
    attr->sq_psn = a.sq_psn;
    attr->dest_qp_num = a.dest_qp_num;
    attr->qp_access_flags = (unsigned int)a.qp_access_flags;
    attr->cap.max_send_wr = a.cap.max_send_wr;
    attr->cap.max_recv_wr = a.cap.max_recv_wr;
    attr->cap.max_send_sge = a.cap.max_send_sge;
    attr->cap.max_recv_sge = a.cap.max_recv_sge;
    attr->cap.max_inline_data = a.cap.max_inline_data;
    attr->ah_attr.is_global = 1;
    memcpy(attr->ah_attr.grh.dgid.raw, a.dgid, 16);
    attr->ah_attr.port_num = 1;
    attr->pkey_index = a.pkey_index;
    attr->sq_draining = a.sq_draining;
    attr->max_rd_atomic = a.max_rd_atomic;
    attr->max_dest_rd_atomic = a.max_dest_rd_atomic;
    attr->min_rnr_timer = a.min_rnr_timer;
    attr->port_num = 1;
    attr->timeout = a.timeout;
    attr->retry_cnt = a.retry_cnt;
    attr->rnr_retry = a.rnr_retry;
    if (init_attr) {
        memset(init_attr, 0, sizeof(*init_attr));
        init_attr->qp_context = qp->qp_context;
        init_attr->send_cq = qp->send_cq;
        init_attr->recv_cq = qp->recv_cq;
        init_attr->srq = qp->srq;
        init_attr->cap = attr->cap;
        init_attr->qp_type = qp->qp_type;
        init_attr->sq_sig_all = ia.sq_sig_all;
    }
    return 0;
}

SV_EXPORT int ibv_destroy_qp(struct ibv_qp *qp)
{
    if (!sv_live_is(qp, SV_K_QP))
        return EINVAL;
    struct sv_qp *q = sv_qp(qp);
    /* Linger like TCP's TIME_WAIT for as long as the peer keeps retrying
     * (its timeout and retry count assumed like ours, at most 1 s): if our
     * last ACK was lost, a retransmission still gets one and the peer's
     * last send succeeds. */
    struct sr_qp_attr a;
    sr_nic_lock(nic_of(qp->context));
    sr_qp_query(q->qp, &a, NULL);
    /* Packets held back by doorbell batching may point into this QP's
     * send queue (inline data): they leave before it is freed. */
    sr_nic_flush(nic_of(qp->context));
    uint64_t t = sr_timeout_ns(a.timeout);
    uint64_t linger =
        t == UINT64_MAX ? 1000000000ull : SR_MIN((a.retry_cnt + 1u) * t + 1000000, 1000000000ull);
    int err = sr_qp_destroy_linger(q->qp, sr_nic_now(), linger);
    sr_nic_kick(nic_of(qp->context));
    sr_nic_unlock(nic_of(qp->context));
    if (err)
        return sv_errno(err);
    sv_evq_purge(&sv_ctx(qp->context)->async, qp);
    sv_qp_ex_free(q);
    pthread_mutex_destroy(&qp->mutex);
    pthread_cond_destroy(&qp->cond);
    sv_live_del(qp);
    free(q);
    return 0;
}

/* Post one converted WR with the NIC lock held. */
int sv_post_send_one(struct sv_qp *q, const struct sr_send_wr *wr)
{
    int e = sr_qp_post_send(q->qp, wr, sr_nic_now());
    return e == SR_ERR_NOMEM ? ENOMEM : sv_errno(e);
}

static int sv_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad_wr)
{
    if (!wr || !bad_wr)
        return EINVAL; /* rxe_post_send */
    struct sv_qp *q = sv_qp(qp);
    struct sr_nic *nic = nic_of(qp->context);
    int err = 0;
    sr_nic_lock(nic);
    bool answer_due = sr_qp_answer_due(q->qp);
    for (; wr; wr = wr->next) {
        if (wr->num_sge < 0) {
            err = EINVAL;
            break;
        }
        struct sr_send_wr s = {
            .wr_id = wr->wr_id,
            .sg_list = (const struct sr_sge *)wr->sg_list,
            .num_sge = (uint32_t)wr->num_sge,
            .opcode = (enum sr_wr_opcode)wr->opcode,
            .send_flags = wr->send_flags,
        };
        switch (wr->opcode) {
        case IBV_WR_SEND_WITH_INV:
        case IBV_WR_LOCAL_INV:
            s.invalidate_rkey = wr->invalidate_rkey;
            break;
        case IBV_WR_BIND_MW:
            err = sv_mw_bind_wr(wr->bind_mw.mw, wr->bind_mw.rkey, &wr->bind_mw.bind_info, &s);
            break;
        case IBV_WR_SEND_WITH_IMM:
        case IBV_WR_RDMA_WRITE_WITH_IMM:
            s.imm = ntohl(wr->imm_data);
            break;
        case IBV_WR_ATOMIC_WRITE:
            /* struct ibv_send_wr has no room for its data: ibv_wr_atomic_write only */
            err = EINVAL;
            break;
        default:
            break;
        }
        switch (wr->opcode) {
        case IBV_WR_RDMA_WRITE:
        case IBV_WR_RDMA_WRITE_WITH_IMM:
        case IBV_WR_RDMA_READ:
            s.remote_addr = wr->wr.rdma.remote_addr;
            s.rkey = wr->wr.rdma.rkey;
            break;
        case IBV_WR_ATOMIC_CMP_AND_SWP:
        case IBV_WR_ATOMIC_FETCH_AND_ADD:
            s.remote_addr = wr->wr.atomic.remote_addr;
            s.rkey = wr->wr.atomic.rkey;
            s.compare_add = wr->wr.atomic.compare_add;
            s.swap = wr->wr.atomic.swap;
            break;
        default:
            break;
        }
        if (err)
            break;
        if (qp->qp_type == IBV_QPT_XRC_SEND)
            s.xrc_remote_srqn = wr->qp_type.xrc.remote_srqn;
        if (qp->qp_type == IBV_QPT_UD) {
            if (!wr->wr.ud.ah) {
                err = EINVAL;
                break;
            }
            struct sv_ah *ah = sr_container_of(wr->wr.ud.ah, struct sv_ah, ibah);
            memcpy(s.ah.dgid, ah->dgid, 16);
            s.ah.dest_qpn = wr->wr.ud.remote_qpn;
            s.ah.qkey = wr->wr.ud.remote_qkey;
        }
        err = sv_post_send_one(q, &s);
        if (err)
            break;
    }
    /* Doorbell batching: with an answer on its way, the pass that handles
     * it sends these packets too, with whatever else was posted by then
     * (fewer system calls, longer GSO trains). Otherwise now. */
    sr_nic_posted(nic, !answer_due);
    sr_nic_unlock(nic);
    if (err && bad_wr)
        *bad_wr = wr;
    return err;
}

/* ---- AH ---- */
SV_EXPORT struct ibv_ah *ibv_create_ah(struct ibv_pd *pd, struct ibv_ah_attr *attr)
{
    if (!attr || !sv_live_is(pd, SV_K_PD)) {
        errno = EINVAL;
        return NULL;
    }
    if (!attr->is_global || attr->port_num != 1) {
        errno = EINVAL; /* RoCE address handles need a GRH */
        return NULL;
    }
    struct sv_ah *ah = calloc(1, sizeof(*ah));
    if (!ah) {
        errno = ENOMEM;
        return NULL;
    }
    memcpy(ah->dgid, attr->grh.dgid.raw, 16);
    ah->ibah.context = pd->context;
    ah->ibah.pd = pd;
    sv_live_add(&ah->ibah, SV_K_AH);
    return &ah->ibah;
}

SV_EXPORT int ibv_destroy_ah(struct ibv_ah *ah)
{
    if (!sv_live_is(ah, SV_K_AH))
        return EINVAL;
    sv_live_del(ah);
    free(sr_container_of(ah, struct sv_ah, ibah));
    return 0;
}

SV_EXPORT int ibv_init_ah_from_wc(struct ibv_context *context, uint8_t port_num, struct ibv_wc *wc,
                                  struct ibv_grh *grh, struct ibv_ah_attr *ah_attr)
{
    if (!wc || !grh || !ah_attr) {
        errno = EINVAL;
        return -1;
    }
    (void)context;
    if (!(wc->wc_flags & IBV_WC_GRH))
        return -1;
    memset(ah_attr, 0, sizeof(*ah_attr));
    ah_attr->is_global = 1;
    ah_attr->port_num = port_num;
    const uint8_t *g = (const uint8_t *)grh;
    if ((g[20] >> 4) == 4) {
        /* RoCEv2 over IPv4: the IPv4 header sits in the GRH's last 20 bytes */
        memset(ah_attr->grh.dgid.raw, 0, 10);
        ah_attr->grh.dgid.raw[10] = ah_attr->grh.dgid.raw[11] = 0xff;
        memcpy(ah_attr->grh.dgid.raw + 12, g + 20 + 12, 4);
    } else {
        memcpy(ah_attr->grh.dgid.raw, grh->sgid.raw, 16);
    }
    ah_attr->grh.hop_limit = 64;
    return 0;
}

SV_EXPORT struct ibv_ah *ibv_create_ah_from_wc(struct ibv_pd *pd, struct ibv_wc *wc,
                                               struct ibv_grh *grh, uint8_t port_num)
{
    if (!sv_live_is(pd, SV_K_PD)) {
        errno = EINVAL;
        return NULL;
    }
    struct ibv_ah_attr a;
    if (ibv_init_ah_from_wc(pd->context, port_num, wc, grh, &a)) {
        errno = EINVAL;
        return NULL;
    }
    return ibv_create_ah(pd, &a);
}

SV_EXPORT int ibv_attach_mcast(struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid)
{
    if (!gid || !sv_live_is(qp, SV_K_QP))
        return EINVAL;
    (void)qp, (void)gid, (void)lid;
    return EOPNOTSUPP;
}

SV_EXPORT int ibv_detach_mcast(struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid)
{
    if (!gid || !sv_live_is(qp, SV_K_QP))
        return EINVAL;
    (void)qp, (void)gid, (void)lid;
    return EOPNOTSUPP;
}

SV_EXPORT int ibv_resolve_eth_l2_from_gid(struct ibv_context *context, struct ibv_ah_attr *attr,
                                          uint8_t eth_mac[6], uint16_t *vid)
{
    (void)context, (void)attr, (void)eth_mac, (void)vid;
    return EOPNOTSUPP;
}

/* ---- the ops table ---- */
void sv_init_ops(struct sv_context *ctx)
{
    struct ibv_context_ops *o = &ctx->vctx.context.ops;
    o->poll_cq = sv_poll_cq;
    o->req_notify_cq = sv_req_notify_cq;
    o->post_send = sv_post_send;
    o->post_recv = sv_post_recv;
    o->post_srq_recv = sv_post_srq_recv;
    ctx->vctx.create_qp_ex = sv_create_qp_ex;
    ctx->vctx.open_xrcd = sv_open_xrcd;
    ctx->vctx.close_xrcd = sv_close_xrcd;
    ctx->vctx.create_srq_ex = sv_create_srq_ex;
    ctx->vctx.get_srq_num = sv_get_srq_num;
    sv_mw_init_ops(ctx);
    sv_mr_ex_init_ops(ctx);
    sv_cq_ex_init_ops(ctx);
    sv_pd_ex_init_ops(ctx);
}

/* pd_ex.c: parent domains (ibv_alloc_parent_domain) and thread domains
 * (ibv_alloc_td / ibv_dealloc_td).
 *
 * A parent domain is a struct sv_pd over its PD's engine PD: MRs, MWs,
 * AHs, QPs and SRQs made on it are the same objects as on the PD (same
 * keys, same protection checks), and ibv_dealloc_pd of it frees only the
 * wrapper. With allocators, the engine takes from them the rings of the
 * objects made on it (what a kernel provider puts in the buffers it would
 * get from them): a QP's send and receive rings, a basic SRQ's ring and
 * the ring of a CQ created with IBV_CQ_INIT_ATTR_MASK_PD. An allocator
 * answering IBV_ALLOCATOR_USE_DEFAULT leaves that ring to the engine.
 * resource_type is softrdma's: SV_RES_TYPE_QP, _SRQ or _CQ below.
 *
 * softrdma has no doorbells or hardware contexts to share out: a thread
 * domain is a token a parent domain may carry, with nothing behind it. */
#include "sv.h"

#include <errno.h>
#include <stdlib.h>

/* Resource types handed to the allocators: a provider's own (rdma-core:
 * a driver id in the top half), low numbers as mlx5dv's QP, SRQ and CQ. */
#define SV_RES_TYPE(n) (((uint64_t)0x5352 << 32) | (n))

struct sv_td {
    struct ibv_td ibtd;
    uint32_t refs; /* parent domains carrying it (atomic) */
};

struct sv_pd *sv_parent_domain(struct ibv_pd *pd)
{
    struct sv_pd *p = sv_pd(pd);
    return p->parent_of ? p : NULL;
}

const struct sr_alloc *sv_pd_alloc(struct ibv_pd *pd)
{
    struct sv_pd *p = sv_pd(pd);
    return p->alloc.alloc ? &p->alloc : NULL;
}

/* The engine's allocator over the application's (NIC lock held). Every
 * ring taken counts against the parent domain, which cannot go while one
 * is out. */
static void *pd_ring_alloc(void *ctx, size_t len, enum sr_alloc_type type, bool *declined)
{
    struct sv_pd *p = ctx;
    void *m = p->u_alloc(&p->ibpd, p->pd_context, len, 64, SV_RES_TYPE(type));
    if (m == IBV_ALLOCATOR_USE_DEFAULT) {
        *declined = true;
        return NULL;
    }
    if (m)
        __atomic_add_fetch(&p->alloc_out, 1, __ATOMIC_RELAXED);
    return m;
}

static void pd_ring_free(void *ctx, void *m, enum sr_alloc_type type)
{
    struct sv_pd *p = ctx;
    p->u_free(&p->ibpd, p->pd_context, m, SV_RES_TYPE(type));
    __atomic_sub_fetch(&p->alloc_out, 1, __ATOMIC_RELAXED);
}

static struct ibv_pd *sv_alloc_parent_domain(struct ibv_context *context,
                                             struct ibv_parent_domain_init_attr *attr)
{
    uint32_t known =
        IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS | IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT;
    if (attr->comp_mask & ~known) {
        errno = EOPNOTSUPP;
        return NULL;
    }
    /* over a PD of this context (not another parent domain) */
    if (!sv_live_is(attr->pd, SV_K_PD) || attr->pd->context != context ||
        sv_parent_domain(attr->pd) || (attr->td && attr->td->context != context)) {
        errno = EINVAL;
        return NULL;
    }
    bool allocators = attr->comp_mask & IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS;
    if (allocators && (!attr->alloc || !attr->free)) {
        errno = EINVAL;
        return NULL;
    }
    struct sv_pd *p = calloc(1, sizeof(*p));
    if (!p) {
        errno = ENOMEM;
        return NULL;
    }
    struct sv_pd *base = sv_pd(attr->pd);
    p->ibpd.context = context;
    p->ibpd.handle = attr->pd->handle;
    p->pd = base->pd;
    p->parent_of = base;
    p->td = attr->td;
    if (attr->comp_mask & IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT)
        p->pd_context = attr->pd_context;
    if (allocators) {
        p->u_alloc = attr->alloc;
        p->u_free = attr->free;
        p->alloc = (struct sr_alloc){.alloc = pd_ring_alloc, .free = pd_ring_free, .ctx = p};
    }
    __atomic_add_fetch(&base->children, 1, __ATOMIC_ACQ_REL);
    if (attr->td)
        __atomic_add_fetch(&sr_container_of(attr->td, struct sv_td, ibtd)->refs, 1,
                           __ATOMIC_ACQ_REL);
    sv_live_add(&p->ibpd, SV_K_PD); /* objects are created on it as on a PD */
    return &p->ibpd;
}

int sv_pd_ex_dealloc(struct sv_pd *p)
{
    if (!p->parent_of)
        return EBUSY; /* a PD with parent domains over it */
    if (__atomic_load_n(&p->alloc_out, __ATOMIC_ACQUIRE))
        return EBUSY; /* rings of its objects are still in its memory */
    __atomic_sub_fetch(&p->parent_of->children, 1, __ATOMIC_ACQ_REL);
    if (p->td)
        __atomic_sub_fetch(&sr_container_of(p->td, struct sv_td, ibtd)->refs, 1, __ATOMIC_ACQ_REL);
    sv_live_del(&p->ibpd);
    free(p);
    return 0;
}

static struct ibv_td *sv_alloc_td(struct ibv_context *context, struct ibv_td_init_attr *attr)
{
    if (attr->comp_mask) {
        errno = EINVAL;
        return NULL;
    }
    struct sv_td *t = calloc(1, sizeof(*t));
    if (!t) {
        errno = ENOMEM;
        return NULL;
    }
    t->ibtd.context = context;
    return &t->ibtd;
}

static int sv_dealloc_td(struct ibv_td *td)
{
    struct sv_td *t = sr_container_of(td, struct sv_td, ibtd);
    if (__atomic_load_n(&t->refs, __ATOMIC_ACQUIRE))
        return EBUSY;
    free(t);
    return 0;
}

void sv_pd_ex_init_ops(struct sv_context *ctx)
{
    ctx->vctx.alloc_parent_domain = sv_alloc_parent_domain;
    ctx->vctx.alloc_td = sv_alloc_td;
    ctx->vctx.dealloc_td = sv_dealloc_td;
}

/* mr_ex.c: memory beyond ibv_reg_mr: re-registration (ibv_rereg_mr),
 * on-demand paging (the memory probe the engine asks before touching an
 * on-demand MR, ibv_advise_mr) and device memory (ibv_alloc_dm and its
 * MRs), which on a software NIC is host memory the device owns. */
#include "sv.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#define LOCKED(ctx, expr)                                                                          \
    ({                                                                                             \
        sr_nic_lock(sv_ctx(ctx)->nic);                                                             \
        __auto_type r_ = (expr);                                                                   \
        sr_nic_unlock(sv_ctx(ctx)->nic);                                                           \
        r_;                                                                                        \
    })

/* ---- on-demand paging ---- */
/* Whether [addr, addr+len) can be read (or written) now, asked before the
 * NIC touches an on-demand MR, whose pages the application may never have
 * mapped: the kernel checks one byte of each page for us. A write probe
 * copies each probed byte onto itself (process_vm_readv checks the local
 * side writable, the remote side readable); the NIC is about to write
 * those bytes anyway. */
bool sv_mem_ok(const void *addr, uint64_t len, bool write)
{
    enum { BATCH = 64 };
    static long page;
    if (!len)
        return true;
    if (!page)
        page = sysconf(_SC_PAGESIZE);
    uintptr_t p = (uintptr_t)addr, last = p + len - 1;
    if (last < p)
        return false;
    uint8_t scratch[BATCH];
    struct iovec rem[BATCH], loc[BATCH];
    pid_t self = getpid();
    for (;;) {
        int n = 0;
        while (n < BATCH) {
            rem[n].iov_base = (void *)p;
            rem[n].iov_len = 1;
            loc[n].iov_base = write ? (void *)p : &scratch[n];
            loc[n].iov_len = 1;
            n++;
            uintptr_t next = (p | (uintptr_t)(page - 1)) + 1;
            if (next == 0 || next > last)
                break;
            p = next;
        }
        if (process_vm_readv(self, loc, (unsigned long)n, rem, (unsigned long)n, 0) != n)
            return false;
        if (n < BATCH || (p | (uintptr_t)(page - 1)) >= last)
            return true;
        p = (p | (uintptr_t)(page - 1)) + 1;
    }
}

/* ibv_advise_mr: the ranges must lie in MRs of pd; there is nothing to
 * fault in ahead of time, so a prefetch only checks them. */
static int sv_advise_mr(struct ibv_pd *pd, enum ibv_advise_mr_advice advice, uint32_t flags,
                        struct ibv_sge *sg_list, uint32_t num_sge)
{
    if (advice != IBV_ADVISE_MR_ADVICE_PREFETCH && advice != IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE &&
        advice != IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT)
        return EOPNOTSUPP;
    if (flags & ~(uint32_t)IBV_ADVISE_MR_FLAG_FLUSH)
        return EOPNOTSUPP;
    if (!num_sge || !sg_list)
        return EINVAL;
    uint32_t need = advice == IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE ? SR_ACCESS_LOCAL_WRITE : 0;
    for (uint32_t i = 0; i < num_sge; i++)
        if (!LOCKED(pd->context, sr_mr_local(sv_pd(pd)->pd, sg_list[i].lkey, sg_list[i].addr,
                                             sg_list[i].length, need)))
            return EINVAL;
    return 0;
}

/* ---- ibv_rereg_mr ---- */
SV_EXPORT int ibv_rereg_mr(struct ibv_mr *ibmr, int flags, struct ibv_pd *pd, void *addr,
                           size_t length, int access)
{
    struct sv_mr *m = sr_container_of(ibmr, struct sv_mr, ibmr);
    const int known =
        IBV_REREG_MR_CHANGE_TRANSLATION | IBV_REREG_MR_CHANGE_PD | IBV_REREG_MR_CHANGE_ACCESS;
    /* rdma-core's checks (libibverbs/verbs.c), with its answers */
    /* an import's engine MR is the original's to change */
    if ((flags & ~known) || m->imported) {
        errno = EINVAL;
        return IBV_REREG_MR_ERR_INPUT;
    }
    if ((flags & IBV_REREG_MR_CHANGE_TRANSLATION) && (!length || !addr)) {
        errno = EINVAL;
        return IBV_REREG_MR_ERR_INPUT;
    }
    if ((flags & IBV_REREG_MR_CHANGE_PD) && (!pd || pd->context != ibmr->context)) {
        errno = EINVAL;
        return IBV_REREG_MR_ERR_INPUT;
    }
    if (!flags)
        return 0;
    if (m->dm) {
        errno = EOPNOTSUPP; /* a device-memory MR is registered with ibv_reg_dm_mr */
        return IBV_REREG_MR_ERR_INPUT;
    }
    unsigned int acc = m->access;
    if (flags & IBV_REREG_MR_CHANGE_ACCESS) {
        acc = (unsigned int)access & ~(unsigned int)IBV_ACCESS_OPTIONAL_RANGE;
        if (acc & ~(unsigned int)(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                                  IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC |
                                  IBV_ACCESS_ON_DEMAND)) {
            errno = EOPNOTSUPP;
            return IBV_REREG_MR_ERR_INPUT;
        }
    }
    void *a = ibmr->addr;
    size_t len = ibmr->length;
    if (flags & IBV_REREG_MR_CHANGE_TRANSLATION) {
        a = addr;
        len = length;
    }
    struct ibv_pd *npd = (flags & IBV_REREG_MR_CHANGE_PD) ? pd : ibmr->pd;
    uint32_t sa = acc & (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                         IBV_ACCESS_REMOTE_ATOMIC);
    if (acc & IBV_ACCESS_ON_DEMAND)
        sa |= SR_ACCESS_ON_DEMAND;
    uint64_t iova = (flags & IBV_REREG_MR_CHANGE_TRANSLATION) ? (uintptr_t)a : m->iova;
    int err = LOCKED(ibmr->context, sr_mr_rereg(m->mr, sv_pd(npd)->pd, a, len, iova, sa));
    if (err) {
        errno = sv_errno(err);
        return IBV_REREG_MR_ERR_INPUT;
    }
    ibmr->pd = npd;
    ibmr->addr = a;
    ibmr->length = len;
    m->access = acc;
    m->iova = iova;
    return 0;
}

/* ---- device memory ---- */
struct sv_dm {
    struct ibv_dm ibdm;
    uint8_t *mem;
    size_t len;
    uint32_t mrs;  /* MRs registered on it */
    bool imported; /* ibv_import_dm: a wrapper over the original's memory */
};

/* Copies in and out of device memory: 4-byte aligned offsets and lengths,
 * as mlx5 requires of its device memory (and pyverbs checks). */
static int dm_range(const struct sv_dm *d, uint64_t off, size_t len)
{
    if ((off | len) & 3)
        return EINVAL;
    if (off > d->len || len > d->len - off)
        return EINVAL;
    return 0;
}

static int dm_to(struct ibv_dm *dm, uint64_t off, const void *src, size_t len)
{
    struct sv_dm *d = sr_container_of(dm, struct sv_dm, ibdm);
    int e = dm_range(d, off, len);
    if (!e)
        memcpy(d->mem + off, src, len);
    return e;
}

static int dm_from(void *dst, struct ibv_dm *dm, uint64_t off, size_t len)
{
    struct sv_dm *d = sr_container_of(dm, struct sv_dm, ibdm);
    int e = dm_range(d, off, len);
    if (!e)
        memcpy(dst, d->mem + off, len);
    return e;
}

static struct ibv_dm *sv_alloc_dm(struct ibv_context *context, struct ibv_alloc_dm_attr *attr)
{
    if (attr->comp_mask) {
        errno = EINVAL;
        return NULL;
    }
    if (!attr->length || attr->length > SV_MAX_DM_SIZE || attr->log_align_req > 12) {
        errno = EINVAL;
        return NULL;
    }
    struct sv_dm *d = calloc(1, sizeof(*d));
    if (!d) {
        errno = ENOMEM;
        return NULL;
    }
    size_t len = (attr->length + 63) & ~(size_t)63;
    if (posix_memalign((void **)&d->mem, 4096, len)) {
        free(d);
        errno = ENOMEM;
        return NULL;
    }
    memset(d->mem, 0, len);
    d->len = attr->length;
    d->ibdm.context = context;
    d->ibdm.memcpy_to_dm = dm_to;
    d->ibdm.memcpy_from_dm = dm_from;
    d->ibdm.handle = sv_handle_new(sv_ctx(context)->dev);
    sv_live_add(&d->ibdm, SV_K_DM);
    return &d->ibdm;
}

static int sv_free_dm(struct ibv_dm *dm)
{
    if (!sv_live_is(dm, SV_K_DM))
        return EINVAL;
    struct sv_dm *d = sr_container_of(dm, struct sv_dm, ibdm);
    if (d->imported) {
        ibv_unimport_dm(dm); /* the original owns the memory */
        return 0;
    }
    if (d->mrs)
        return EBUSY; /* MRs still cover it */
    sv_live_del(dm);
    free(d->mem);
    free(d);
    return 0;
}

struct dm_key {
    const struct ibv_context *ctx;
    uint32_t handle;
};
static bool dm_match(const void *obj, const void *arg)
{
    const struct ibv_dm *dm = obj;
    const struct dm_key *k = arg;
    const struct sv_dm *d = sr_container_of(dm, struct sv_dm, ibdm);
    return dm->handle == k->handle && !d->imported && sv_ctx_shares(dm->context, k->ctx);
}

/* ibv_import_dm(3), as ibv_import_pd (misc.c): a wrapper over the
 * original's memory, in a context sharing its cmd_fd's file. */
SV_EXPORT struct ibv_dm *ibv_import_dm(struct ibv_context *context, uint32_t dm_handle)
{
    if (!sv_live_is(context, SV_K_CTX)) {
        errno = EINVAL;
        return NULL;
    }
    struct dm_key k = {context, dm_handle};
    const struct ibv_dm *orig = sv_live_find(SV_K_DM, dm_match, &k);
    if (!orig) {
        errno = ENOENT;
        return NULL;
    }
    struct sv_dm *d = calloc(1, sizeof(*d));
    if (!d) {
        errno = ENOMEM;
        return NULL;
    }
    const struct sv_dm *o = sr_container_of(orig, struct sv_dm, ibdm);
    d->ibdm = o->ibdm;
    d->ibdm.context = context;
    d->mem = o->mem;
    d->len = o->len;
    d->imported = true;
    sv_live_add(&d->ibdm, SV_K_DM);
    return &d->ibdm;
}

SV_EXPORT void ibv_unimport_dm(struct ibv_dm *dm)
{
    if (!sv_live_is(dm, SV_K_DM))
        return;
    struct sv_dm *d = sr_container_of(dm, struct sv_dm, ibdm);
    if (!d->imported)
        return;
    sv_live_del(dm);
    free(d);
}

/* A device-memory MR is zero based: its first byte is address 0. */
static struct ibv_mr *sv_reg_dm_mr(struct ibv_pd *pd, struct ibv_dm *dm, uint64_t dm_offset,
                                   size_t length, unsigned int access)
{
    struct sv_dm *d = sr_container_of(dm, struct sv_dm, ibdm);
    if (!(access & IBV_ACCESS_ZERO_BASED)) {
        errno = EINVAL;
        return NULL;
    }
    if (dm_offset > d->len || length > d->len - dm_offset) {
        errno = EINVAL;
        return NULL;
    }
    struct ibv_mr *mr =
        sv_reg_mr(pd, d->mem + dm_offset, length, 0, access & ~(unsigned int)IBV_ACCESS_ZERO_BASED);
    if (!mr)
        return NULL;
    struct sv_mr *m = sr_container_of(mr, struct sv_mr, ibmr);
    m->dm = d;
    m->iova = 0;
    d->mrs++;
    mr->addr = (void *)(uintptr_t)dm_offset;
    return mr;
}

void sv_mr_ex_dereg(struct sv_mr *m)
{
    if (m->dm)
        m->dm->mrs--;
}

void sv_mr_ex_init_ops(struct sv_context *ctx)
{
    ctx->vctx.advise_mr = sv_advise_mr;
    ctx->vctx.alloc_dm = sv_alloc_dm;
    ctx->vctx.free_dm = sv_free_dm;
    ctx->vctx.reg_dm_mr = sv_reg_dm_mr;
}

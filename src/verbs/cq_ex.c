/* cq_ex.c: extended completion queues (ibv_create_cq_ex through
 * verbs_context's create_cq_ex) with the ibv_start_poll / ibv_next_poll /
 * ibv_end_poll iterator and the ibv_wc_read_* accessors, and the device
 * clock (ibv_query_rt_values_ex).
 *
 * A CQ made here is an ordinary softrdma CQ (ibv_create_cq's object, with
 * room for struct ibv_cq_ex): ibv_poll_cq, req_notify, completion
 * channels, resize and destroy work on ibv_cq_ex_to_cq() of it unchanged.
 *
 * The iterator takes one completion per call out of the engine's ring,
 * under the NIC lock, and holds nothing between calls: ibv_end_poll has
 * nothing to release, so a caller that ends a poll that found nothing
 * (pyverbs does) or polls again after ENOENT is harmless. */
#include "sv.h"

#include <arpa/inet.h>
#include <errno.h>
#include <time.h>

/* What a CQ can report: the standard fields, and both timestamps. VLAN,
 * flow tags and tag matching need hardware we do not emulate. */
static const uint64_t cqx_wc_flags = IBV_WC_STANDARD_FLAGS | IBV_WC_EX_WITH_COMPLETION_TIMESTAMP |
                                     IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK;

static struct sv_cq *cqx(struct ibv_cq_ex *cq)
{
    return sr_container_of(cq, struct sv_cq, ibcqx);
}

static int drain_one(struct sv_cq *c, int n, void *out)
{
    return sr_cq_poll(c->cq, n, out);
}

static int take(struct ibv_cq_ex *cq, bool more)
{
    struct sv_cq *c = cqx(cq);
    if (!sv_cq_poll_with(c, 1, &c->cur, drain_one, more))
        return ENOENT;
    cq->status = (enum ibv_wc_status)c->cur.status;
    cq->wr_id = c->cur.wr_id;
    return 0;
}

static int start_poll(struct ibv_cq_ex *cq, struct ibv_poll_cq_attr *attr)
{
    if (attr && attr->comp_mask)
        return EINVAL; /* ibv_create_cq_ex(3): must be 0 */
    return take(cq, false);
}

static int next_poll(struct ibv_cq_ex *cq)
{
    return take(cq, true);
}

static void end_poll(struct ibv_cq_ex *cq)
{
    (void)cq;
}

static enum ibv_wc_opcode read_opcode(struct ibv_cq_ex *cq)
{
    return (enum ibv_wc_opcode)cqx(cq)->cur.opcode;
}
static uint32_t read_vendor_err(struct ibv_cq_ex *cq)
{
    return cqx(cq)->cur.vendor_err;
}
static uint32_t read_byte_len(struct ibv_cq_ex *cq)
{
    return cqx(cq)->cur.byte_len;
}
/* The immediate in network order, or (IBV_WC_WITH_INV) the invalidated
 * R_Key as it is, which ibv_wc_read_invalidated_rkey only casts. */
static __be32 read_imm_data(struct ibv_cq_ex *cq)
{
    const struct sr_wc *w = &cqx(cq)->cur;
    return (w->wc_flags & SR_WC_WITH_INV) ? (__be32)w->imm : htonl(w->imm);
}
static uint32_t read_qp_num(struct ibv_cq_ex *cq)
{
    return cqx(cq)->cur.qp_num;
}
static uint32_t read_src_qp(struct ibv_cq_ex *cq)
{
    return cqx(cq)->cur.src_qp;
}
static unsigned int read_wc_flags(struct ibv_cq_ex *cq)
{
    return cqx(cq)->cur.wc_flags;
}
/* RoCE: no LIDs and no path bits */
static uint32_t read_slid(struct ibv_cq_ex *cq)
{
    (void)cq;
    return 0;
}
static uint8_t read_sl(struct ibv_cq_ex *cq)
{
    return cqx(cq)->cur.sl;
}
static uint8_t read_dlid_path_bits(struct ibv_cq_ex *cq)
{
    (void)cq;
    return 0;
}

/* The device clock is the engine's, sr_nic_now (CLOCK_MONOTONIC), in
 * nanoseconds: hca_core_clock is advertised as 1 GHz. */
static uint64_t read_completion_ts(struct ibv_cq_ex *cq)
{
    return cqx(cq)->cur.ts_ns;
}

/* The same instant on CLOCK_REALTIME: the clocks' offset now. An NTP step
 * between the completion and this read moves it, as it would on a NIC
 * whose wallclock is translated from its free-running counter. */
static uint64_t read_completion_wallclock_ns(struct ibv_cq_ex *cq)
{
    struct timespec rt;
    clock_gettime(CLOCK_REALTIME, &rt);
    uint64_t real = (uint64_t)rt.tv_sec * 1000000000ull + (uint64_t)rt.tv_nsec;
    return cqx(cq)->cur.ts_ns + (real - sr_nic_now());
}

static struct ibv_cq_ex *sv_create_cq_ex(struct ibv_context *context, struct ibv_cq_init_attr_ex *a)
{
    if (a->comp_mask & ~(uint32_t)(IBV_CQ_INIT_ATTR_MASK_FLAGS | IBV_CQ_INIT_ATTR_MASK_PD)) {
        errno = EINVAL;
        return NULL;
    }
    /* A single-threaded CQ is a hint we need not act on; ignoring an
     * overrun would change what the engine reports (IBA 11.4.2.1). */
    uint32_t flags = (a->comp_mask & IBV_CQ_INIT_ATTR_MASK_FLAGS) ? a->flags : 0;
    if ((a->wc_flags & ~cqx_wc_flags) || (flags & ~(uint32_t)IBV_CREATE_CQ_ATTR_SINGLE_THREADED)) {
        errno = EOPNOTSUPP;
        return NULL;
    }
    struct sv_pd *parent = NULL;
    if (a->comp_mask & IBV_CQ_INIT_ATTR_MASK_PD) {
        /* verbs: it must be a parent domain of this context */
        parent = a->parent_domain ? sv_parent_domain(a->parent_domain) : NULL;
        if (!parent || a->parent_domain->context != context) {
            errno = EINVAL;
            return NULL;
        }
    }
    if (a->cqe > INT32_MAX) {
        errno = EINVAL;
        return NULL;
    }
    struct ibv_cq *cq =
        ibv_create_cq(context, (int)a->cqe, a->cq_context, a->channel, (int)a->comp_vector);
    if (!cq)
        return NULL;
    const struct sr_alloc *al = parent ? sv_pd_alloc(&parent->ibpd) : NULL;
    if (al) {
        struct sr_nic *nic = sv_ctx(context)->nic;
        sr_nic_lock(nic);
        int err = sr_cq_set_alloc(sv_cq(cq)->cq, al);
        sr_nic_unlock(nic);
        if (err) {
            ibv_destroy_cq(cq);
            errno = sv_errno(err);
            return NULL;
        }
    }
    struct ibv_cq_ex *x = &sv_cq(cq)->ibcqx;
    x->comp_mask = 0;
    x->start_poll = start_poll;
    x->next_poll = next_poll;
    x->end_poll = end_poll;
    x->read_opcode = read_opcode;
    x->read_vendor_err = read_vendor_err;
    x->read_byte_len = read_byte_len;
    x->read_imm_data = read_imm_data;
    x->read_qp_num = read_qp_num;
    x->read_src_qp = read_src_qp;
    x->read_wc_flags = read_wc_flags;
    x->read_slid = read_slid;
    x->read_sl = read_sl;
    x->read_dlid_path_bits = read_dlid_path_bits;
    if (a->wc_flags & IBV_WC_EX_WITH_COMPLETION_TIMESTAMP)
        x->read_completion_ts = read_completion_ts;
    if (a->wc_flags & IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK)
        x->read_completion_wallclock_ns = read_completion_wallclock_ns;
    return x;
}

/* The device clock now, in its own units (ns), as mlx5 reports its
 * cycle counter: all of it in tv_nsec. */
static int sv_query_rt_values(struct ibv_context *context, struct ibv_values_ex *values)
{
    (void)context;
    if (values->comp_mask & ~(uint32_t)IBV_VALUES_MASK_RAW_CLOCK)
        return EINVAL;
    if (values->comp_mask & IBV_VALUES_MASK_RAW_CLOCK) {
        values->raw_clock.tv_sec = 0;
        values->raw_clock.tv_nsec = (long)sr_nic_now();
    }
    return 0;
}

void sv_cq_ex_init_ops(struct sv_context *ctx)
{
    ctx->vctx.create_cq_ex = sv_create_cq_ex;
    ctx->vctx.query_rt_values = sv_query_rt_values;
}

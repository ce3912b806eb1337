/* badarg_test.c: every verbs entry point given bad input (NULL objects or
 * output structs, destroyed objects, unknown comp_mask bits, flags,
 * opcodes, QP types, counts above the caps) returns what rdma-core's
 * libibverbs and providers (rxe, the software provider) return, and never
 * crashes or hangs. Each row runs in a forked child under an alarm, so a
 * crash or a hang fails the row by name.
 *
 * What the expected errno follows:
 *  - bad arguments and comp_masks: EINVAL, or EOPNOTSUPP where rdma-core
 *    says so (rxe's check_qp_init_attr for QP comp_mask, create_flags and
 *    send_ops_flags; cmd_srq.c and cmd.c for SRQ and XRCD comp_mask bits
 *    at or above the RESERVED bit; the header's fallbacks for missing ops);
 *  - rxe_post_send/rxe_post_recv: a NULL list or a NULL bad_wr is EINVAL;
 *  - NULL where rdma-core itself would crash: EINVAL (NULL or -1 with
 *    errno EINVAL for calls that answer that way, EINVAL returned by
 *    destroy/dealloc), and void calls just return;
 *  - ibv_query_pkey past the table and ibv_get_pkey_index of an absent
 *    P_Key: -1 with the ENOENT of rdma-core's failed sysfs read;
 *  - ibv_reg_mr: bits outside the known and optional ranges are EINVAL
 *    (the kernel's ib_check_mr_access); optional-range bits are ignored.
 *
 * Out of reach: the header's inline verbs read their object before they
 * reach the library, so NULL or destroyed objects given to them crash in
 * the caller whatever the library does: ibv_post_send, ibv_post_recv,
 * ibv_post_srq_recv, ibv_poll_cq, ibv_req_notify_cq (all read
 * obj->context->ops), ibv_alloc_mw, ibv_dealloc_mw, ibv_bind_mw (reads
 * mw and mw_bind), ibv_open_xrcd(NULL, ...), ibv_close_xrcd,
 * ibv_create_cq_ex, ibv_create_srq_ex, ibv_create_qp_ex (read the context
 * or the attr's comp_mask), ibv_query_device_ex(NULL, ...), ibv_query_port
 * (NULL context), ibv_create_flow(NULL, ...), ibv_destroy_flow,
 * ibv_get_srq_num(NULL, ...), ibv_wr_* (function pointers in the QP).
 * Their bad non-object arguments do reach us and are tested here.
 *
 * Destroyed objects: rows pass objects destroyed during setup (after
 * every live one was created, so no live object reuses their address)
 * to the exported calls that take them. */
/* The rows pass NULL on purpose, some of it into the header's inline code. */
#pragma GCC diagnostic ignored "-Wnonnull"

#include <infiniband/verbs.h>

#include <arpa/inet.h>
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

enum { ROW_ALARM_S = 10 };

/* Exported by libibverbs, declared in no installed header (rdma-core's
 * sysfs.c and marshall.h); librdmacm imports them. */
int ibv_read_sysfs_file(const char *dir, const char *file, char *buf, size_t size);
struct ib_uverbs_qp_attr;
void ibv_copy_qp_attr_from_kern(struct ibv_qp_attr *dst, struct ib_uverbs_qp_attr *src);

struct env {
    struct ibv_device **list;
    struct ibv_context *ctx;
    struct ibv_pd *pd;
    struct ibv_mr *mr;
    struct ibv_comp_channel *ch;
    struct ibv_cq *cq;
    struct ibv_srq *srq;
    struct ibv_qp *qp; /* RC, in RTS, connected to itself */
    struct ibv_ah *ah;
    struct ibv_device_attr dattr;
    uint32_t max_send_sge, max_recv_sge;
    union ibv_gid gid;
    char buf[4096];
    /* destroyed during setup */
    struct ibv_context *dead_ctx;
    struct ibv_pd *dead_pd;
    struct ibv_mr *dead_mr;
    struct ibv_comp_channel *dead_ch;
    struct ibv_cq *dead_cq;
    struct ibv_srq *dead_srq;
    struct ibv_qp *dead_qp;
    struct ibv_ah *dead_ah;
};

static int rts_self(struct env *e, struct ibv_qp *qp)
{
    struct ibv_port_attr pa;
    if (ibv_query_port(e->ctx, 1, &pa))
        return -1;
    struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT,
                            .port_num = 1,
                            .qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE};
    if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
        return -1;
    memset(&a, 0, sizeof(a));
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = pa.active_mtu;
    a.dest_qp_num = qp->qp_num;
    a.max_dest_rd_atomic = 1;
    a.min_rnr_timer = 1;
    a.ah_attr.is_global = 1;
    a.ah_attr.grh.dgid = e->gid;
    a.ah_attr.grh.hop_limit = 64;
    a.ah_attr.port_num = 1;
    if (ibv_modify_qp(qp, &a,
                      IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                          IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
        return -1;
    memset(&a, 0, sizeof(a));
    a.qp_state = IBV_QPS_RTS;
    a.timeout = 14;
    a.retry_cnt = 7;
    a.rnr_retry = 7;
    a.max_rd_atomic = 1;
    return ibv_modify_qp(qp, &a,
                         IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                             IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
}

static struct ibv_qp_init_attr qp_attr(struct env *e)
{
    struct ibv_qp_init_attr a = {
        .send_cq = e->cq,
        .recv_cq = e->cq,
        .cap = {.max_send_wr = 8, .max_recv_wr = 8, .max_send_sge = 2, .max_recv_sge = 2},
        .qp_type = IBV_QPT_RC,
    };
    return a;
}

static struct ibv_ah_attr ah_attr(struct env *e)
{
    struct ibv_ah_attr a = {.is_global = 1, .port_num = 1};
    a.grh.dgid = e->gid;
    a.grh.hop_limit = 64;
    return a;
}

#define SETUP(x)                                                                                   \
    do {                                                                                           \
        if (!(x)) {                                                                                \
            fprintf(stderr, "setup: %s failed: %s\n", #x, strerror(errno));                        \
            return -1;                                                                             \
        }                                                                                          \
    } while (0)

static int setup(struct env *e)
{
    memset(e, 0, sizeof(*e));
    int n = 0;
    SETUP((e->list = ibv_get_device_list(&n)) && n > 0);
    SETUP((e->ctx = ibv_open_device(e->list[0])));
    SETUP(ibv_query_device(e->ctx, &e->dattr) == 0);
    SETUP(ibv_query_gid(e->ctx, 1, 0, &e->gid) == 0);
    SETUP((e->pd = ibv_alloc_pd(e->ctx)));
    SETUP((e->mr = ibv_reg_mr(e->pd, e->buf, sizeof(e->buf), IBV_ACCESS_LOCAL_WRITE)));
    SETUP((e->ch = ibv_create_comp_channel(e->ctx)));
    SETUP((e->cq = ibv_create_cq(e->ctx, 16, NULL, e->ch, 0)));
    struct ibv_srq_init_attr sa = {.attr = {.max_wr = 8, .max_sge = 2}};
    SETUP((e->srq = ibv_create_srq(e->pd, &sa)));
    struct ibv_qp_init_attr qa = qp_attr(e);
    SETUP((e->qp = ibv_create_qp(e->pd, &qa)));
    e->max_send_sge = qa.cap.max_send_sge;
    e->max_recv_sge = qa.cap.max_recv_sge;
    SETUP(rts_self(e, e->qp) == 0);
    struct ibv_ah_attr aa = ah_attr(e);
    SETUP((e->ah = ibv_create_ah(e->pd, &aa)));

    /* the destroyed ones, last */
    SETUP((e->dead_ctx = ibv_open_device(e->list[0])));
    SETUP((e->dead_pd = ibv_alloc_pd(e->ctx)));
    SETUP((e->dead_mr = ibv_reg_mr(e->pd, e->buf, 64, IBV_ACCESS_LOCAL_WRITE)));
    SETUP((e->dead_ch = ibv_create_comp_channel(e->ctx)));
    SETUP((e->dead_cq = ibv_create_cq(e->ctx, 4, NULL, NULL, 0)));
    SETUP((e->dead_srq = ibv_create_srq(e->pd, &sa)));
    qa = qp_attr(e);
    SETUP((e->dead_qp = ibv_create_qp(e->pd, &qa)));
    SETUP((e->dead_ah = ibv_create_ah(e->pd, &aa)));
    SETUP(ibv_destroy_ah(e->dead_ah) == 0);
    SETUP(ibv_destroy_qp(e->dead_qp) == 0);
    SETUP(ibv_destroy_srq(e->dead_srq) == 0);
    SETUP(ibv_destroy_cq(e->dead_cq) == 0);
    SETUP(ibv_destroy_comp_channel(e->dead_ch) == 0);
    SETUP(ibv_dereg_mr(e->dead_mr) == 0);
    SETUP(ibv_dealloc_pd(e->dead_pd) == 0);
    SETUP(ibv_close_device(e->dead_ctx) == 0);
    return 0;
}

/* ---- the calls ---- */
/* Helpers for rows whose call needs a few locals. */
static int post_send_with(struct env *e, int opcode, unsigned flags, int num_sge, bool null_list,
                          bool null_bad)
{
    struct ibv_sge sge[64];
    for (int i = 0; i < 64; i++)
        sge[i] = (struct ibv_sge){(uintptr_t)e->buf, 8, e->mr->lkey};
    struct ibv_send_wr wr = {.wr_id = 1,
                             .sg_list = null_list ? NULL : sge,
                             .num_sge = num_sge,
                             .opcode = (enum ibv_wr_opcode)opcode,
                             .send_flags = flags};
    struct ibv_send_wr *bad = NULL;
    int r = ibv_post_send(e->qp, &wr, null_bad ? NULL : &bad);
    if (r && !null_bad && bad != &wr)
        return -1000; /* bad_wr must name the rejected WR */
    return r;
}

static int post_recv_with(struct env *e, bool srq, int num_sge, bool null_wr, bool null_bad)
{
    struct ibv_sge sge[64];
    for (int i = 0; i < 64; i++)
        sge[i] = (struct ibv_sge){(uintptr_t)e->buf, 8, e->mr->lkey};
    struct ibv_recv_wr wr = {.wr_id = 1, .sg_list = sge, .num_sge = num_sge};
    struct ibv_recv_wr *bad = NULL;
    struct ibv_recv_wr *w = null_wr ? NULL : &wr;
    struct ibv_recv_wr **b = null_bad ? NULL : &bad;
    int r = srq ? ibv_post_srq_recv(e->srq, w, b) : ibv_post_recv(e->qp, w, b);
    if (r && w && b && bad != &wr)
        return -1000;
    return r;
}

static struct ibv_qp *create_qp_ex_with(struct env *e, uint64_t comp_mask, uint32_t create_flags,
                                        uint64_t send_ops, enum ibv_qp_type type, bool null_pd)
{
    struct ibv_qp_init_attr_ex a = {
        .send_cq = e->cq,
        .recv_cq = e->cq,
        .cap = {.max_send_wr = 8, .max_recv_wr = 8, .max_send_sge = 1, .max_recv_sge = 1},
        .qp_type = type,
        .comp_mask = (uint32_t)comp_mask,
        .pd = null_pd ? NULL : e->pd,
        .create_flags = create_flags,
        .send_ops_flags = send_ops,
    };
    return ibv_create_qp_ex(e->ctx, &a);
}

static struct ibv_qp *create_qp_with(struct env *e, struct ibv_pd *pd, int type, uint32_t send_sge,
                                     uint32_t send_wr, uint32_t inl, struct ibv_cq *cq)
{
    struct ibv_qp_init_attr a = qp_attr(e);
    a.qp_type = (enum ibv_qp_type)type;
    if (send_sge)
        a.cap.max_send_sge = send_sge;
    if (send_wr)
        a.cap.max_send_wr = send_wr;
    a.cap.max_inline_data = inl;
    if (cq)
        a.send_cq = cq;
    return ibv_create_qp(pd, &a);
}

static struct ibv_srq *create_srq_with(struct ibv_pd *pd, uint32_t max_wr, uint32_t max_sge)
{
    struct ibv_srq_init_attr a = {.attr = {.max_wr = max_wr, .max_sge = max_sge}};
    return ibv_create_srq(pd, &a);
}

static struct ibv_srq *create_srq_ex_with(struct env *e, uint32_t comp_mask, bool null_pd)
{
    struct ibv_srq_init_attr_ex a = {
        .attr = {.max_wr = 8, .max_sge = 1}, .comp_mask = comp_mask, .pd = null_pd ? NULL : e->pd};
    return ibv_create_srq_ex(e->ctx, &a);
}

static struct ibv_xrcd *open_xrcd_with(struct env *e, uint32_t comp_mask)
{
    struct ibv_xrcd_init_attr a = {.comp_mask = comp_mask, .fd = -1, .oflags = 0};
    return ibv_open_xrcd(e->ctx, &a);
}

static int modify_qp_with(struct ibv_qp *qp, int mask)
{
    struct ibv_qp_attr a = {.qp_state = IBV_QPS_RTS};
    return ibv_modify_qp(qp, &a, mask);
}

static int query_qp_on(struct ibv_qp *qp)
{
    struct ibv_qp_attr a;
    struct ibv_qp_init_attr ia;
    return ibv_query_qp(qp, &a, IBV_QP_STATE, &ia);
}

static struct ibv_ah *create_ah_on(struct env *e, struct ibv_pd *pd)
{
    struct ibv_ah_attr a = ah_attr(e);
    return ibv_create_ah(pd, &a);
}

static struct ibv_mr *reg_mr_var(struct env *e, struct ibv_pd *pd, unsigned access)
{
    /* not a constant: the header's macro sends it to ibv_reg_mr_iova2 */
    return ibv_reg_mr(pd, e->buf, 64, (int)access);
}

static struct ibv_cq_ex *create_cq_ex_with(struct env *e, uint32_t comp_mask, uint64_t wc_flags)
{
    struct ibv_cq_init_attr_ex a = {.cqe = 4, .comp_mask = comp_mask, .wc_flags = wc_flags};
    return ibv_create_cq_ex(e->ctx, &a);
}

static bool has_cq_ex(struct env *e)
{
    return verbs_get_ctx_op(e->ctx, create_cq_ex) != NULL;
}

/* ---- rows ---- */
enum shape {
    S_NULL,    /* a pointer: NULL, errno == err */
    S_PTR,     /* a pointer: not NULL (a control) */
    S_INT,     /* an int: == ret, and errno == err when err != 0 */
    S_VOID,    /* returns */
    S_INT_DYN, /* an int: == ret computed by want() from the environment */
    S_NULL_DYN /* a pointer: NULL, errno == want() */
};

struct row {
    const char *name;
    enum shape shape;
    long ret;
    int err;
    long (*call)(struct env *e);
    int (*want)(struct env *e);
};

/* ROW(name, shape, ret, err, expression): the expression has `e` in scope. */
#define CALL(id, expr)                                                                             \
    static long call_##id(struct env *e)                                                           \
    {                                                                                              \
        (void)e;                                                                                   \
        return (long)(intptr_t)(expr);                                                             \
    }
#define VCALL(id, expr)                                                                            \
    static long call_##id(struct env *e)                                                           \
    {                                                                                              \
        (void)e;                                                                                   \
        expr;                                                                                      \
        return 0;                                                                                  \
    }

static struct ibv_device_attr da;
static struct ibv_device_attr_ex dax;
static struct ibv_port_attr pa;
static union ibv_gid gid;
static __be16 pkey;
static struct ibv_async_event aev;
static struct ibv_cq *ecq;
static void *ectx;
static struct ibv_gid_entry gent;
static struct ibv_srq_attr srq_attr = {.srq_limit = 1};
static struct ibv_wc wc_buf;
static struct ibv_grh grh;
static char sysbuf[16];

/* device, context, attributes */
CALL(open_null, ibv_open_device(NULL))
CALL(close_null, ibv_close_device(NULL))
CALL(close_dead, ibv_close_device(e->dead_ctx))
CALL(guid_null, ibv_get_device_guid(NULL))
CALL(name_null, ibv_get_device_name(NULL))
CALL(index_null, ibv_get_device_index(NULL))
CALL(qdev_null_ctx, ibv_query_device(NULL, &da))
CALL(qdev_dead_ctx, ibv_query_device(e->dead_ctx, &da))
CALL(qdev_null_attr, ibv_query_device(e->ctx, NULL))
CALL(qdevx_null, ibv_query_device_ex(e->ctx, NULL, NULL))
CALL(qdevx_mask,
     ibv_query_device_ex(e->ctx, &(struct ibv_query_device_ex_input){.comp_mask = 1}, &dax))
CALL(qport_null, ibv_query_port(e->ctx, 1, NULL))
CALL(qport_2, ibv_query_port(e->ctx, 2, &pa))
CALL(qgid_null, ibv_query_gid(e->ctx, 1, 0, NULL))
CALL(qgid_null_ctx, ibv_query_gid(NULL, 1, 0, &gid))
CALL(qgid_index, ibv_query_gid(e->ctx, 1, 99, &gid))
CALL(qgidx_null, ibv_query_gid_ex(e->ctx, 1, 0, NULL, 0))
CALL(qgidx_null_ctx, ibv_query_gid_ex(NULL, 1, 0, &gent, 0))
CALL(qgidx_flags, ibv_query_gid_ex(e->ctx, 1, 0, &gent, 1))
CALL(qgidt_null, ibv_query_gid_table(e->ctx, NULL, 4, 0))
CALL(qpkey_null, ibv_query_pkey(e->ctx, 1, 0, NULL))
CALL(qpkey_null_ctx, ibv_query_pkey(NULL, 1, 0, &pkey))
CALL(qpkey_index, ibv_query_pkey(e->ctx, 1, 5, &pkey))
CALL(pkey_index_absent, ibv_get_pkey_index(e->ctx, 1, htons(0x1234)))
CALL(pkey_index_null, ibv_get_pkey_index(NULL, 1, htons(0xffff)))
CALL(async_null_ctx, ibv_get_async_event(NULL, &aev))
CALL(async_null_ev, ibv_get_async_event(e->ctx, NULL))
VCALL(ack_async_null, ibv_ack_async_event(NULL))
/* PD */
CALL(pd_null, ibv_alloc_pd(NULL))
CALL(pd_dead_ctx, ibv_alloc_pd(e->dead_ctx))
CALL(dealloc_null, ibv_dealloc_pd(NULL))
CALL(dealloc_dead, ibv_dealloc_pd(e->dead_pd))
CALL(dealloc_busy, ibv_dealloc_pd(e->pd))
/* MR */
CALL(mr_null, ibv_reg_mr(NULL, e->buf, 64, IBV_ACCESS_LOCAL_WRITE))
CALL(mr_dead_pd, ibv_reg_mr(e->dead_pd, e->buf, 64, IBV_ACCESS_LOCAL_WRITE))
CALL(mr_bit12, ibv_reg_mr(e->pd, e->buf, 64, IBV_ACCESS_LOCAL_WRITE | (1 << 12)))
CALL(mr_bit31, reg_mr_var(e, e->pd, IBV_ACCESS_LOCAL_WRITE | (1u << 31)))
CALL(mr_optional, reg_mr_var(e, e->pd, IBV_ACCESS_LOCAL_WRITE | (1u << 25)))
CALL(mr_iova2_null, ibv_reg_mr_iova2(NULL, e->buf, 64, 0, IBV_ACCESS_LOCAL_WRITE))
CALL(dereg_null, ibv_dereg_mr(NULL))
CALL(dereg_dead, ibv_dereg_mr(e->dead_mr))
/* completion channels */
CALL(ch_null, ibv_create_comp_channel(NULL))
CALL(ch_dead_ctx, ibv_create_comp_channel(e->dead_ctx))
CALL(ch_destroy_null, ibv_destroy_comp_channel(NULL))
CALL(ch_destroy_dead, ibv_destroy_comp_channel(e->dead_ch))
CALL(ch_destroy_busy, ibv_destroy_comp_channel(e->ch))
CALL(cq_event_null, ibv_get_cq_event(NULL, &ecq, &ectx))
CALL(cq_event_dead, ibv_get_cq_event(e->dead_ch, &ecq, &ectx))
CALL(cq_event_null_cq, ibv_get_cq_event(e->ch, NULL, &ectx))
CALL(cq_event_null_cqctx, ibv_get_cq_event(e->ch, &ecq, NULL))
VCALL(ack_cq_null, ibv_ack_cq_events(NULL, 1))
VCALL(ack_cq_dead, ibv_ack_cq_events(e->dead_cq, 1))
/* CQ */
CALL(cq_null_ctx, ibv_create_cq(NULL, 4, NULL, NULL, 0))
CALL(cq_dead_ctx, ibv_create_cq(e->dead_ctx, 4, NULL, NULL, 0))
CALL(cq_dead_ch, ibv_create_cq(e->ctx, 4, NULL, e->dead_ch, 0))
CALL(cq_zero, ibv_create_cq(e->ctx, 0, NULL, NULL, 0))
CALL(cq_vector, ibv_create_cq(e->ctx, 4, NULL, NULL, 1))
CALL(cq_too_big, ibv_create_cq(e->ctx, e->dattr.max_cqe + 1, NULL, NULL, 0))
CALL(resize_null, ibv_resize_cq(NULL, 8))
CALL(resize_dead, ibv_resize_cq(e->dead_cq, 8))
CALL(resize_zero, ibv_resize_cq(e->cq, 0))
CALL(cq_destroy_null, ibv_destroy_cq(NULL))
CALL(cq_destroy_dead, ibv_destroy_cq(e->dead_cq))
CALL(cq_destroy_busy, ibv_destroy_cq(e->cq))
CALL(cqx_mask, create_cq_ex_with(e, 1u << 31, IBV_WC_EX_WITH_BYTE_LEN))
CALL(cqx_wc_flags, create_cq_ex_with(e, 0, 1ull << 62))
/* SRQ */
CALL(srq_null_pd, create_srq_with(NULL, 8, 1))
CALL(srq_dead_pd, create_srq_with(e->dead_pd, 8, 1))
CALL(srq_null_attr, ibv_create_srq(e->pd, NULL))
CALL(srq_sge, create_srq_with(e->pd, 8, e->dattr.max_srq_sge + 1))
CALL(srq_wr, create_srq_with(e->pd, (uint32_t)e->dattr.max_srq_wr + 1, 1))
CALL(srqx_mask, create_srq_ex_with(e, IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_RESERVED, false))
CALL(srqx_null_pd, create_srq_ex_with(e, IBV_SRQ_INIT_ATTR_PD, true))
CALL(modsrq_null, ibv_modify_srq(NULL, &srq_attr, IBV_SRQ_LIMIT))
CALL(modsrq_null_attr, ibv_modify_srq(e->srq, NULL, IBV_SRQ_LIMIT))
CALL(modsrq_mask, ibv_modify_srq(e->srq, &srq_attr, 1 << 5))
CALL(modsrq_dead, ibv_modify_srq(e->dead_srq, &srq_attr, IBV_SRQ_LIMIT))
CALL(qsrq_null, ibv_query_srq(NULL, &srq_attr))
CALL(qsrq_null_attr, ibv_query_srq(e->srq, NULL))
CALL(qsrq_dead, ibv_query_srq(e->dead_srq, &srq_attr))
CALL(srqn_null, ibv_get_srq_num(e->srq, NULL))
CALL(srq_destroy_null, ibv_destroy_srq(NULL))
CALL(srq_destroy_dead, ibv_destroy_srq(e->dead_srq))
/* XRC domains */
CALL(xrcd_null_attr, ibv_open_xrcd(e->ctx, NULL))
CALL(xrcd_mask, open_xrcd_with(e, IBV_XRCD_INIT_ATTR_RESERVED))
/* QP */
CALL(qp_null_pd, create_qp_with(e, NULL, IBV_QPT_RC, 0, 0, 0, NULL))
CALL(qp_dead_pd, create_qp_with(e, e->dead_pd, IBV_QPT_RC, 0, 0, 0, NULL))
CALL(qp_null_attr, ibv_create_qp(e->pd, NULL))
CALL(qp_dead_cq, create_qp_with(e, e->pd, IBV_QPT_RC, 0, 0, 0, e->dead_cq))
CALL(qp_type, create_qp_with(e, e->pd, 77, 0, 0, 0, NULL))
CALL(qp_sge, create_qp_with(e, e->pd, IBV_QPT_RC, (uint32_t)e->dattr.max_sge + 1, 0, 0, NULL))
CALL(qp_wr, create_qp_with(e, e->pd, IBV_QPT_RC, 0, (uint32_t)e->dattr.max_qp_wr + 1, 0, NULL))
CALL(qp_inline, create_qp_with(e, e->pd, IBV_QPT_RC, 0, 0, 1u << 20, NULL))
CALL(qpx_mask, create_qp_ex_with(e, IBV_QP_INIT_ATTR_PD | (1u << 30), 0, 0, IBV_QPT_RC, false))
CALL(qpx_create_flags, create_qp_ex_with(e, IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_CREATE_FLAGS,
                                         1u << 20, 0, IBV_QPT_RC, false))
CALL(qpx_send_ops, create_qp_ex_with(e, IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS, 0,
                                     1ull << 40, IBV_QPT_RC, false))
CALL(qpx_type, create_qp_ex_with(e, IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS, 0,
                                 IBV_QP_EX_WITH_SEND, (enum ibv_qp_type)77, false))
CALL(qpx_null_pd_only, create_qp_ex_with(e, IBV_QP_INIT_ATTR_PD, 0, 0, IBV_QPT_RC, true))
CALL(qpx_null_pd, create_qp_ex_with(e, IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS, 0,
                                    IBV_QP_EX_WITH_SEND, IBV_QPT_RC, true))
CALL(modqp_null, modify_qp_with(NULL, IBV_QP_STATE))
CALL(modqp_null_attr, ibv_modify_qp(e->qp, NULL, IBV_QP_STATE))
CALL(modqp_dead, modify_qp_with(e->dead_qp, IBV_QP_STATE))
CALL(modqp_mask, modify_qp_with(e->qp, IBV_QP_STATE | (1 << 30)))
CALL(qqp_null, query_qp_on(NULL))
CALL(qqp_dead, query_qp_on(e->dead_qp))
CALL(qqp_null_attr, ibv_query_qp(e->qp, NULL, IBV_QP_STATE, NULL))
CALL(qp_destroy_null, ibv_destroy_qp(NULL))
CALL(qp_destroy_dead, ibv_destroy_qp(e->dead_qp))
CALL(qp_to_qpx_null, ibv_qp_to_qp_ex(NULL))
CALL(flow, ibv_create_flow(e->qp, &(struct ibv_flow_attr){.size = sizeof(struct ibv_flow_attr)}))
CALL(mcast_null, ibv_attach_mcast(NULL, &gid, 0))
/* AH */
CALL(ah_null_pd, create_ah_on(e, NULL))
CALL(ah_dead_pd, create_ah_on(e, e->dead_pd))
CALL(ah_null_attr, ibv_create_ah(e->pd, NULL))
CALL(ah_destroy_null, ibv_destroy_ah(NULL))
CALL(ah_destroy_dead, ibv_destroy_ah(e->dead_ah))
CALL(ah_wc_null, ibv_create_ah_from_wc(e->pd, NULL, &grh, 1))
CALL(ah_wc_null_grh, ibv_create_ah_from_wc(e->pd, &wc_buf, NULL, 1))
CALL(init_ah_null, ibv_init_ah_from_wc(e->ctx, 1, NULL, &grh, NULL))
/* memory windows: what reaches the ops */
CALL(mw_type, ibv_alloc_mw(e->pd, (enum ibv_mw_type)7))
/* data path: what reaches the ops */
CALL(send_null_list, ibv_post_send(e->qp, NULL, &(struct ibv_send_wr *){NULL}))
CALL(send_null_bad, post_send_with(e, IBV_WR_SEND, IBV_SEND_SIGNALED, 1, false, true))
CALL(send_null_bad_err, post_send_with(e, 77, IBV_SEND_SIGNALED, 1, false, true))
CALL(send_opcode, post_send_with(e, 77, IBV_SEND_SIGNALED, 1, false, false))
CALL(send_flags, post_send_with(e, IBV_WR_SEND, IBV_SEND_SIGNALED | (1u << 7), 1, false, false))
CALL(send_sge_caps, post_send_with(e, IBV_WR_SEND, 0, (int)e->max_send_sge + 1, false, false))
CALL(send_sge_neg, post_send_with(e, IBV_WR_SEND, 0, -1, false, false))
CALL(send_sge_null, post_send_with(e, IBV_WR_SEND, 0, 1, true, false))
CALL(recv_null_list, post_recv_with(e, false, 1, true, false))
CALL(recv_null_bad, post_recv_with(e, false, 1, false, true))
CALL(recv_sge_caps, post_recv_with(e, false, (int)e->max_recv_sge + 1, false, false))
CALL(recv_sge_neg, post_recv_with(e, false, -1, false, false))
CALL(srq_recv_null_list, post_recv_with(e, true, 1, true, false))
CALL(srq_recv_null_bad, post_recv_with(e, true, 1, false, true))
CALL(srq_recv_sge_caps, post_recv_with(e, true, 3, false, false))
CALL(poll_neg, ibv_poll_cq(e->cq, -1, &wc_buf))
CALL(poll_null_wc, ibv_poll_cq(e->cq, 4, NULL))
CALL(notify_cq, ibv_req_notify_cq(e->cq, 0))
/* the rest of the exported surface */
CALL(sysfs_null, ibv_read_sysfs_file(NULL, "x", sysbuf, sizeof(sysbuf)))
CALL(sysfs_null_buf, ibv_read_sysfs_file("/sys", "x", NULL, sizeof(sysbuf)))
VCALL(copy_qp_null, ibv_copy_qp_attr_from_kern(NULL, NULL))
VCALL(free_list_null, ibv_free_device_list(NULL))

/* With the op (another branch may add it): the comp_mask or flags are
 * wrong; without: the header's EOPNOTSUPP. */
static int want_cqx_mask(struct env *e)
{
    return has_cq_ex(e) ? EINVAL : EOPNOTSUPP;
}

#define R(id, shape, ret, err)                                                                     \
    {                                                                                              \
#id, shape, ret, err, call_##id, NULL                                                      \
    }
#define RD(id, shape, fn)                                                                          \
    {                                                                                              \
#id, shape, 0, 0, call_##id, fn                                                            \
    }
static const struct row rows[] = {
    R(open_null, S_NULL, 0, EINVAL),
    R(close_null, S_INT, EINVAL, 0),
    R(close_dead, S_INT, EINVAL, 0),
    R(guid_null, S_INT, 0, EINVAL),
    R(name_null, S_NULL, 0, EINVAL),
    R(index_null, S_INT, -1, EINVAL),
    R(qdev_null_ctx, S_INT, EINVAL, 0),
    R(qdev_dead_ctx, S_INT, EINVAL, 0),
    R(qdev_null_attr, S_INT, EINVAL, 0),
    R(qdevx_null, S_INT, EINVAL, 0),
    R(qdevx_mask, S_INT, EINVAL, 0),
    R(qport_null, S_INT, EINVAL, 0),
    R(qport_2, S_INT, EINVAL, 0),
    R(qgid_null, S_INT, -1, EINVAL),
    R(qgid_null_ctx, S_INT, -1, EINVAL),
    R(qgid_index, S_INT, -1, EINVAL),
    R(qgidx_null, S_INT, EINVAL, 0),
    R(qgidx_null_ctx, S_INT, EINVAL, 0),
    R(qgidx_flags, S_INT, EINVAL, 0),
    R(qgidt_null, S_INT, -EINVAL, 0),
    R(qpkey_null, S_INT, -1, EINVAL),
    R(qpkey_null_ctx, S_INT, -1, EINVAL),
    R(qpkey_index, S_INT, -1, ENOENT),
    R(pkey_index_absent, S_INT, -1, ENOENT),
    R(pkey_index_null, S_INT, -1, EINVAL),
    R(async_null_ctx, S_INT, -1, EINVAL),
    R(async_null_ev, S_INT, -1, EINVAL),
    R(ack_async_null, S_VOID, 0, 0),
    R(pd_null, S_NULL, 0, EINVAL),
    R(pd_dead_ctx, S_NULL, 0, EINVAL),
    R(dealloc_null, S_INT, EINVAL, 0),
    R(dealloc_dead, S_INT, EINVAL, 0),
    R(dealloc_busy, S_INT, EBUSY, 0),
    R(mr_null, S_NULL, 0, EINVAL),
    R(mr_dead_pd, S_NULL, 0, EINVAL),
    R(mr_bit12, S_NULL, 0, EINVAL),
    R(mr_bit31, S_NULL, 0, EINVAL),
    R(mr_optional, S_PTR, 0, 0),
    R(mr_iova2_null, S_NULL, 0, EINVAL),
    R(dereg_null, S_INT, EINVAL, 0),
    R(dereg_dead, S_INT, EINVAL, 0),
    R(ch_null, S_NULL, 0, EINVAL),
    R(ch_dead_ctx, S_NULL, 0, EINVAL),
    R(ch_destroy_null, S_INT, EINVAL, 0),
    R(ch_destroy_dead, S_INT, EINVAL, 0),
    R(ch_destroy_busy, S_INT, EBUSY, 0),
    R(cq_event_null, S_INT, -1, EINVAL),
    R(cq_event_dead, S_INT, -1, EINVAL),
    R(cq_event_null_cq, S_INT, -1, EINVAL),
    R(cq_event_null_cqctx, S_INT, -1, EINVAL),
    R(ack_cq_null, S_VOID, 0, 0),
    R(ack_cq_dead, S_VOID, 0, 0),
    R(cq_null_ctx, S_NULL, 0, EINVAL),
    R(cq_dead_ctx, S_NULL, 0, EINVAL),
    R(cq_dead_ch, S_NULL, 0, EINVAL),
    R(cq_zero, S_NULL, 0, EINVAL),
    R(cq_vector, S_NULL, 0, EINVAL),
    R(cq_too_big, S_NULL, 0, EINVAL),
    R(resize_null, S_INT, EINVAL, 0),
    R(resize_dead, S_INT, EINVAL, 0),
    R(resize_zero, S_INT, EINVAL, 0),
    R(cq_destroy_null, S_INT, EINVAL, 0),
    R(cq_destroy_dead, S_INT, EINVAL, 0),
    R(cq_destroy_busy, S_INT, EBUSY, 0),
    RD(cqx_mask, S_NULL_DYN, want_cqx_mask),
    R(cqx_wc_flags, S_NULL, 0, EOPNOTSUPP), /* rxe: unsupported wc_flags */
    R(srq_null_pd, S_NULL, 0, EINVAL),
    R(srq_dead_pd, S_NULL, 0, EINVAL),
    R(srq_null_attr, S_NULL, 0, EINVAL),
    R(srq_sge, S_NULL, 0, EINVAL),
    R(srq_wr, S_NULL, 0, EINVAL),
    R(srqx_mask, S_NULL, 0, EOPNOTSUPP),
    R(srqx_null_pd, S_NULL, 0, EINVAL),
    R(modsrq_null, S_INT, EINVAL, 0),
    R(modsrq_null_attr, S_INT, EINVAL, 0),
    R(modsrq_mask, S_INT, EINVAL, 0),
    R(modsrq_dead, S_INT, EINVAL, 0),
    R(qsrq_null, S_INT, EINVAL, 0),
    R(qsrq_null_attr, S_INT, EINVAL, 0),
    R(qsrq_dead, S_INT, EINVAL, 0),
    R(srqn_null, S_INT, EINVAL, 0),
    R(srq_destroy_null, S_INT, EINVAL, 0),
    R(srq_destroy_dead, S_INT, EINVAL, 0),
    R(xrcd_null_attr, S_NULL, 0, EINVAL),
    R(xrcd_mask, S_NULL, 0, EOPNOTSUPP),
    R(qp_null_pd, S_NULL, 0, EINVAL),
    R(qp_dead_pd, S_NULL, 0, EINVAL),
    R(qp_null_attr, S_NULL, 0, EINVAL),
    R(qp_dead_cq, S_NULL, 0, EINVAL),
    R(qp_type, S_NULL, 0, EOPNOTSUPP),
    R(qp_sge, S_NULL, 0, EINVAL),
    R(qp_wr, S_NULL, 0, EINVAL),
    R(qp_inline, S_NULL, 0, EINVAL),
    R(qpx_mask, S_NULL, 0, EOPNOTSUPP),
    R(qpx_create_flags, S_NULL, 0, EOPNOTSUPP),
    R(qpx_send_ops, S_NULL, 0, EOPNOTSUPP),
    R(qpx_type, S_NULL, 0, EOPNOTSUPP),
    R(qpx_null_pd_only, S_NULL, 0, EINVAL),
    R(qpx_null_pd, S_NULL, 0, EINVAL),
    R(modqp_null, S_INT, EINVAL, 0),
    R(modqp_null_attr, S_INT, EINVAL, 0),
    R(modqp_dead, S_INT, EINVAL, 0),
    R(modqp_mask, S_INT, EINVAL, 0),
    R(qqp_null, S_INT, EINVAL, 0),
    R(qqp_dead, S_INT, EINVAL, 0),
    R(qqp_null_attr, S_INT, EINVAL, 0),
    R(qp_destroy_null, S_INT, EINVAL, 0),
    R(qp_destroy_dead, S_INT, EINVAL, 0),
    R(qp_to_qpx_null, S_NULL, 0, EINVAL),
    R(flow, S_NULL, 0, EOPNOTSUPP),
    R(mcast_null, S_INT, EINVAL, 0),
    R(ah_null_pd, S_NULL, 0, EINVAL),
    R(ah_dead_pd, S_NULL, 0, EINVAL),
    R(ah_null_attr, S_NULL, 0, EINVAL),
    R(ah_destroy_null, S_INT, EINVAL, 0),
    R(ah_destroy_dead, S_INT, EINVAL, 0),
    R(ah_wc_null, S_NULL, 0, EINVAL),
    R(ah_wc_null_grh, S_NULL, 0, EINVAL),
    R(init_ah_null, S_INT, -1, EINVAL),
    R(mw_type, S_NULL, 0, EINVAL),
    R(send_null_list, S_INT, EINVAL, 0),
    R(send_null_bad, S_INT, EINVAL, 0),
    R(send_null_bad_err, S_INT, EINVAL, 0),
    R(send_opcode, S_INT, EINVAL, 0),
    R(send_flags, S_INT, EINVAL, 0),
    R(send_sge_caps, S_INT, EINVAL, 0),
    R(send_sge_neg, S_INT, EINVAL, 0),
    R(send_sge_null, S_INT, EINVAL, 0),
    R(recv_null_list, S_INT, EINVAL, 0),
    R(recv_null_bad, S_INT, EINVAL, 0),
    R(recv_sge_caps, S_INT, EINVAL, 0),
    R(recv_sge_neg, S_INT, EINVAL, 0),
    R(srq_recv_null_list, S_INT, EINVAL, 0),
    R(srq_recv_null_bad, S_INT, EINVAL, 0),
    R(srq_recv_sge_caps, S_INT, EINVAL, 0),
    R(poll_neg, S_INT, 0, 0),
    R(poll_null_wc, S_INT, -EINVAL, 0),
    R(notify_cq, S_INT, 0, 0),
    R(sysfs_null, S_INT, -1, EINVAL),
    R(sysfs_null_buf, S_INT, -1, EINVAL),
    R(copy_qp_null, S_VOID, 0, 0),
    R(free_list_null, S_VOID, 0, 0),
};

struct result {
    int setup_ok;
    long ret;
    int err;
    int want_err; /* for the _DYN shapes */
};

static void run_child(const struct row *r, int fd)
{
    alarm(ROW_ALARM_S);
    struct result res = {0};
    static struct env e;
    if (setup(&e) == 0) {
        res.setup_ok = 1;
        if (r->want)
            res.want_err = r->want(&e);
        errno = 0;
        res.ret = r->call(&e);
        res.err = errno;
    }
    ssize_t n = write(fd, &res, sizeof(res));
    _exit(n == (ssize_t)sizeof(res) ? 0 : 1);
}

static bool run_row(const struct row *r)
{
    int p[2];
    if (pipe(p)) {
        perror("pipe");
        return false;
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        close(p[0]);
        run_child(r, p[1]);
    }
    close(p[1]);
    struct result res;
    ssize_t got = read(p[0], &res, sizeof(res));
    close(p[0]);
    int st = 0;
    waitpid(pid, &st, 0);
    if (WIFSIGNALED(st)) {
        int sig = WTERMSIG(st);
        printf("FAIL %s: %s (%s)\n", r->name, sig == SIGALRM ? "hung" : "crashed", strsignal(sig));
        return false;
    }
    if (got != (ssize_t)sizeof(res) || !WIFEXITED(st) || WEXITSTATUS(st)) {
        printf("FAIL %s: the child exited with status %d\n", r->name, WEXITSTATUS(st));
        return false;
    }
    if (!res.setup_ok) {
        printf("FAIL %s: setup failed\n", r->name);
        return false;
    }
    bool ok;
    switch (r->shape) {
    case S_NULL:
        ok = res.ret == 0 && res.err == r->err;
        break;
    case S_NULL_DYN:
        ok = res.ret == 0 && res.err == res.want_err;
        break;
    case S_PTR:
        ok = res.ret != 0;
        break;
    case S_INT:
        ok = res.ret == r->ret && (!r->err || res.err == r->err);
        break;
    default:
        ok = true;
        break;
    }
    if (!ok) {
        int want_err = r->shape == S_NULL_DYN ? res.want_err : r->err;
        printf("FAIL %s: returned %ld errno %d (%s), want %s %ld errno %d\n", r->name, res.ret,
               res.err, strerror(res.err),
               r->shape == S_NULL || r->shape == S_NULL_DYN ? "NULL"
               : r->shape == S_PTR                          ? "non-NULL"
                                                            : "",
               r->shape == S_INT ? r->ret : 0, want_err);
    }
    return ok;
}

/* ThreadSanitizer sleeps atexit_sleep_ms (1 s by default) at each process
 * exit to catch races with threads still running; every row's child exits
 * right after one call, so 142 rows took 145 s of sleep. TSAN_OPTIONS from
 * the environment still apply on top of this. */
const char *__tsan_default_options(void);
const char *__tsan_default_options(void)
{
    return "atexit_sleep_ms=0";
}

int main(int argc, char **argv)
{
    /* Rows run one by one; a name on the command line runs that row. */
    int failed = 0, ran = 0;
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        if (argc > 1 && strcmp(argv[1], "all") && strcmp(argv[1], rows[i].name))
            continue;
        ran++;
        if (!run_row(&rows[i]))
            failed++;
    }
    printf("%d of %d rows failed\n", failed, ran);
    return failed || !ran ? 1 : 0;
}

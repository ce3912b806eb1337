/* comm.c: the public API. Communicator setup and teardown, argument
 * checks with a message for each failure, and the choice of algorithm. */
#include "sc_int.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

SC_EXPORT srcclResult_t srcclGetVersion(int *version)
{
    if (!version)
        return srcclInvalidArgument;
    *version = SRCCL_VERSION_CODE;
    return srcclSuccess;
}

void *sc_scratch(srcclComm_t c, size_t len)
{
    if (len <= c->scratch_len)
        return c->scratch;
    void *p = NULL;
    if (posix_memalign(&p, 64, len ? len : 64))
        return NULL;
    free(c->scratch);
    c->scratch = p;
    c->scratch_len = len;
    return p;
}

void sc_comm_free(srcclComm_t c)
{
    if (!c)
        return;
    sc_sched_abort(c);
    sc_tp_close(c);
    free(c->peers);
    free(c->p2p_busy);
    free(c->scratch);
    c->magic = 0;
    free(c);
}

srcclComm_t sc_comm_alloc(int nranks, int rank, const struct sc_config *cfg)
{
    srcclComm_t c = calloc(1, sizeof(*c));
    if (!c)
        return NULL;
    c->magic = SC_COMM_MAGIC;
    c->rank = rank;
    c->nranks = nranks;
    c->cfg = *cfg;
    sc_kernels_init(&c->kern, cfg->simd);
    c->peers = calloc((size_t)nranks, sizeof(*c->peers));
    c->p2p_busy = calloc((size_t)nranks, 2);
    if (!c->peers || !c->p2p_busy) {
        sc_comm_free(c);
        return NULL;
    }
    return c;
}

static srcclResult_t comm_init(srcclComm_t *out, int nranks, int rank, struct sc_id *id,
                               const struct sc_config *cfg)
{
    srcclComm_t c = sc_comm_alloc(nranks, rank, cfg);
    if (!c) {
        sc_set_thread_error("out of memory");
        return srcclSystemError;
    }
    srcclResult_t r = srcclSuccess;
    struct sc_boot boot = {.listen_fd = -1};
    size_t rec_len = sizeof(struct sc_wire_rank) + (size_t)nranks * sizeof(struct sc_wire_peer);
    struct sc_wire_rank *mine = calloc(1, rec_len);
    uint8_t *all = calloc((size_t)nranks, rec_len);
    if (!mine || !all) {
        r = sc_fail(c, srcclSystemError, "out of memory");
        goto out;
    }
    if (nranks == 1) { /* nobody to meet: no device, no rendezvous */
        if (id->pid == (uint32_t)getpid() && id->listen_fd >= 0)
            close(id->listen_fd);
        goto out;
    }
    /* A rank that cannot open its transport still joins the rendezvous,
     * with a record that says so, so that every rank fails fast. */
    srcclResult_t open_err = sc_tp_open(c, mine);
    if (open_err)
        mine->magic = 0;
    char err[256] = "";
    r = sc_boot_exchange(&boot, id, rank, nranks, mine, rec_len, all, cfg->timeout_ns, err,
                         sizeof(err));
    if (open_err) {
        r = open_err;
        goto out;
    }
    if (r) {
        sc_fail(c, r, "%s", err);
        goto out;
    }
    for (int i = 0; i < nranks; i++) {
        const struct sc_wire_rank *w = (const void *)(all + (size_t)i * rec_len);
        if (w->magic == 0) {
            r = sc_fail(c, srcclRemoteError,
                        "rank %d could not set up its device (see that rank's error)", i);
            goto out;
        }
    }
    if ((r = sc_tp_connect(c, all, rec_len)))
        goto out;
    /* Nobody sends before every QP is ready to receive. */
    if ((r = sc_boot_barrier(&boot, cfg->timeout_ns, err, sizeof(err)))) {
        sc_fail(c, r, "%s", err);
        goto out;
    }
    sc_shm_ready(c); /* every peer has mapped our segment: unlink its name */
    sc_debug(c, "connected to %d peers", nranks - 1);
out:
    sc_boot_close(&boot);
    free(mine);
    free(all);
    if (r) {
        /* The message lives on in the thread's buffer after c is gone. */
        sc_set_thread_error("%s", c->last_err[0] ? c->last_err : srcclGetErrorString(r));
        sc_comm_free(c);
        return r;
    }
    *out = c;
    return srcclSuccess;
}

SC_EXPORT srcclResult_t srcclCommInitRank(srcclComm_t *comm, int nranks, srcclUniqueId id, int rank)
{
    if (!comm) {
        sc_set_thread_error("srcclCommInitRank: comm is NULL");
        return srcclInvalidArgument;
    }
    *comm = NULL;
    if (nranks < 1 || rank < 0 || rank >= nranks) {
        sc_set_thread_error("srcclCommInitRank: rank %d of %d: need 0 <= rank < nranks", rank,
                            nranks);
        return srcclInvalidArgument;
    }
    struct sc_config cfg;
    char err[256];
    srcclResult_t r = sc_config_load(&cfg, err, sizeof(err));
    if (r) {
        sc_set_thread_error("srcclCommInitRank: %s", err);
        return r;
    }
    struct sc_id sid;
    memcpy(&sid, id.internal, sizeof(sid));
    return comm_init(comm, nranks, rank, &sid, &cfg);
}

SC_EXPORT srcclResult_t srcclCommInitFromEnv(srcclComm_t *comm)
{
    if (!comm) {
        sc_set_thread_error("srcclCommInitFromEnv: comm is NULL");
        return srcclInvalidArgument;
    }
    *comm = NULL;
    struct sc_config cfg;
    char err[256];
    srcclResult_t r = sc_config_load(&cfg, err, sizeof(err));
    if (!r)
        r = sc_config_launch(&cfg, err, sizeof(err));
    struct sc_id id;
    if (!r)
        r = sc_boot_make_id(&id, cfg.root_host, cfg.root_port, cfg.job_hash, err, sizeof(err));
    if (!r && cfg.rank == 0 && cfg.nranks > 1)
        r = sc_boot_listen(&id, err, sizeof(err));
    if (r) {
        sc_set_thread_error("srcclCommInitFromEnv: %s", err);
        return r;
    }
    return comm_init(comm, cfg.nranks, cfg.rank, &id, &cfg);
}

/* Waits until every chunk we posted has completed, so that nothing we sent
 * is lost with the QP. */
static srcclResult_t drain(srcclComm_t c)
{
    if (c->async_err || !c->peers)
        return c->async_err;
    uint64_t deadline = sc_now_ns() + c->cfg.timeout_ns;
    for (int i = 0; i < c->nranks; i++) {
        struct sc_peer *p = &c->peers[i];
        while (p->qp && p->tx_done < p->tx_head) {
            srcclResult_t r = sc_tp_wait(c, deadline, "for the last chunks to reach", i, 0);
            if (r)
                return r;
        }
    }
    return srcclSuccess;
}

static bool bad_comm(srcclComm_t comm, const char *fn)
{
    if (comm && comm->magic == SC_COMM_MAGIC)
        return false;
    sc_set_thread_error("%s: %s", fn, comm ? "not a communicator (destroyed?)" : "comm is NULL");
    return true;
}

SC_EXPORT srcclResult_t srcclCommDestroy(srcclComm_t comm)
{
    if (bad_comm(comm, "srcclCommDestroy"))
        return srcclInvalidArgument;
    srcclResult_t r = sc_sched_finish(comm); /* requests still queued complete first */
    if (!r)
        r = drain(comm);
    if (r)
        sc_set_thread_error("%s", comm->last_err);
    sc_comm_free(comm);
    return r;
}

SC_EXPORT srcclResult_t srcclCommAbort(srcclComm_t comm)
{
    if (bad_comm(comm, "srcclCommAbort"))
        return srcclInvalidArgument;
    sc_comm_free(comm);
    return srcclSuccess;
}

SC_EXPORT srcclResult_t srcclCommCount(const srcclComm_t comm, int *count)
{
    if (bad_comm(comm, "srcclCommCount"))
        return srcclInvalidArgument;
    if (!count)
        return sc_fail(comm, srcclInvalidArgument, "srcclCommCount: count is NULL");
    *count = comm->nranks;
    return srcclSuccess;
}

SC_EXPORT srcclResult_t srcclCommUserRank(const srcclComm_t comm, int *rank)
{
    if (bad_comm(comm, "srcclCommUserRank"))
        return srcclInvalidArgument;
    if (!rank)
        return sc_fail(comm, srcclInvalidArgument, "srcclCommUserRank: rank is NULL");
    *rank = comm->rank;
    return srcclSuccess;
}

SC_EXPORT srcclResult_t srcclCommGetAsyncError(srcclComm_t comm, srcclResult_t *async_error)
{
    if (bad_comm(comm, "srcclCommGetAsyncError"))
        return srcclInvalidArgument;
    if (!async_error)
        return sc_fail(comm, srcclInvalidArgument, "srcclCommGetAsyncError: async_error is NULL");
    *async_error = comm->async_err;
    return srcclSuccess;
}

/* ---- argument checks ---- */
enum { NEED_OP = 1, NEED_ROOT = 2, NEED_SEND = 4, NEED_RECV = 8 };

struct call {
    const char *fn;
    const void *send;
    const void *recv;
    size_t cnt;   /* elements per buffer unit */
    size_t units; /* how many units of cnt the larger buffer holds */
    srcclDataType_t dt;
    srcclRedOp_t op;
    int root;
    unsigned flags;
};

static srcclResult_t check(srcclComm_t comm, const struct call *a)
{
    if (bad_comm(comm, a->fn))
        return srcclInvalidArgument;
    if (comm->async_err) /* keep the first message: it names the cause */
        return comm->async_err;
    if ((unsigned)a->dt >= srcclNumTypes)
        return sc_fail(comm, srcclInvalidArgument, "%s: datatype %d is not a srcclDataType_t",
                       a->fn, (int)a->dt);
    if ((a->flags & NEED_OP) && (unsigned)a->op >= srcclNumOps)
        return sc_fail(comm, srcclInvalidArgument, "%s: op %d is not a srcclRedOp_t", a->fn,
                       (int)a->op);
    if ((a->flags & NEED_ROOT) && (a->root < 0 || a->root >= comm->nranks))
        return sc_fail(comm, srcclInvalidArgument,
                       "%s: root %d is not a rank of this %d-rank "
                       "communicator",
                       a->fn, a->root, comm->nranks);
    size_t es = sc_type_size(a->dt);
    if (a->cnt > SIZE_MAX / es / a->units / 2)
        return sc_fail(comm, srcclInvalidArgument, "%s: count %zu of %s is too large", a->fn,
                       a->cnt, sc_type_name(a->dt));
    if (a->cnt && (a->flags & NEED_SEND) && !a->send)
        return sc_fail(comm, srcclInvalidArgument, "%s: sendbuff is NULL (count %zu)", a->fn,
                       a->cnt);
    if (a->cnt && (a->flags & NEED_RECV) && !a->recv)
        return sc_fail(comm, srcclInvalidArgument, "%s: recvbuff is NULL (count %zu)", a->fn,
                       a->cnt);
    return srcclSuccess;
}

/* The algorithm for this call; one line per call at SRCCL_DEBUG >= 2. */
static enum sc_algo pick(srcclComm_t c, const char *fn, enum sc_coll coll, size_t bytes)
{
    enum sc_algo a = sc_algo_pick(c, coll, bytes);
    if (c->cfg.debug >= 2)
        sc_debug(c, "call #%llu %s: %zu bytes, %s", (unsigned long long)c->ops, fn, bytes,
                 sc_algo_name(a));
    return a;
}

static srcclResult_t done(srcclComm_t c, const char *fn, srcclResult_t r)
{
    if (r && c->last_err[0] && !strstr(c->last_err, fn)) {
        /* Name the call in the message (rank prefix kept). */
        char tmp[sizeof(c->last_err)];
        snprintf(tmp, sizeof(tmp), "%s", c->last_err);
        const char *colon = strchr(tmp, ':');
        snprintf(c->last_err, sizeof(c->last_err), "rank %d: %.40s:%.440s", c->rank, fn,
                 colon ? colon + 1 : tmp);
    }
    return r;
}

srcclResult_t sc_op_run(srcclComm_t c, const struct sc_op *o)
{
    size_t es = sc_type_size(o->dt), n = (size_t)c->nranks;
    srcclResult_t r;
    struct sc_prims p;
    c->ops++;
    if (sc_shm_on(c) && c->nranks > 1) { /* every rank on this host: shared memory */
        bool took;
        r = sc_shm_run(c, o, &took);
        if (took)
            return done(c, o->fn, r);
    }
    switch (o->kind) {
    case SC_OP_ALLREDUCE:
        r = sc_allreduce(c, o->send, o->recv, o->cnt, o->dt, o->op,
                         pick(c, o->fn, SC_ALLREDUCE, o->cnt * es));
        break;
    case SC_OP_BROADCAST:
        r = sc_broadcast(c, o->send, o->recv, o->cnt, o->dt, o->root,
                         pick(c, o->fn, SC_BROADCAST, o->cnt * es));
        break;
    case SC_OP_REDUCE:
        r = sc_reduce(c, o->send, o->recv, o->cnt, o->dt, o->op, o->root,
                      pick(c, o->fn, SC_REDUCE, o->cnt * es));
        break;
    case SC_OP_ALLGATHER:
        r = sc_allgather(c, o->send, o->recv, o->cnt, o->dt,
                         pick(c, o->fn, SC_ALLGATHER, o->cnt * es * n));
        break;
    case SC_OP_REDUCE_SCATTER:
        r = sc_reduce_scatter(c, o->send, o->recv, o->cnt, o->dt, o->op,
                              pick(c, o->fn, SC_REDUCE_SCATTER, o->cnt * es * n));
        break;
    case SC_OP_ALLTOALL:
        r = sc_alltoall(c, o->send, o->recv, o->cnt, o->dt);
        break;
    case SC_OP_BARRIER:
        r = sc_barrier(c);
        break;
    case SC_OP_SEND:
        sc_prims_init(&p, c, o->root, o->root, o->dt, srcclSum);
        r = sc_send_msg(&p, o->send, o->cnt);
        break;
    case SC_OP_RECV:
        sc_prims_init(&p, c, o->root, o->root, o->dt, srcclSum);
        r = sc_recv_msg(&p, o->recv, o->cnt);
        break;
    default:
        r = sc_fail(c, srcclInternalError, "%s: unknown operation %d", o->fn, (int)o->kind);
        break;
    }
    return done(c, o->fn, r);
}

/* Checks, then runs (request == NULL) or starts the call. */
static srcclResult_t call_checked(srcclComm_t comm, const struct call *a, enum sc_op_kind kind,
                                  srcclRequest_t *request)
{
    if (request)
        *request = NULL;
    srcclResult_t r = check(comm, a);
    if (r)
        return r;
    struct sc_op o = {.kind = kind,
                      .fn = a->fn,
                      .send = a->send,
                      .recv = (void *)a->recv,
                      .cnt = a->cnt,
                      .dt = a->dt,
                      .op = a->op,
                      .root = a->root};
    if (kind == SC_OP_BROADCAST && a->cnt && comm->rank == a->root && !a->send)
        return sc_fail(comm, srcclInvalidArgument, "%s: sendbuff is NULL on the root", a->fn);
    if (kind == SC_OP_REDUCE && a->cnt && comm->rank == a->root && !a->recv)
        return sc_fail(comm, srcclInvalidArgument, "%s: recvbuff is NULL on the root", a->fn);
    return sc_submit(comm, &o, request);
}

static srcclResult_t call(srcclComm_t comm, const struct call *a, enum sc_op_kind kind,
                          srcclRequest_t *request)
{
    return sc_group_note(call_checked(comm, a, kind, request));
}

static size_t units(srcclComm_t comm)
{
    return comm && comm->magic == SC_COMM_MAGIC ? (size_t)comm->nranks : 1;
}

/* The blocking calls and their non-blocking twins share one body. */
static srcclResult_t allreduce(const char *fn, const void *sendbuff, void *recvbuff, size_t count,
                               srcclDataType_t datatype, srcclRedOp_t op, srcclComm_t comm,
                               srcclRequest_t *req)
{
    struct call a = {
        fn, sendbuff, recvbuff, count, 1, datatype, op, 0, NEED_OP | NEED_SEND | NEED_RECV};
    return call(comm, &a, SC_OP_ALLREDUCE, req);
}

static srcclResult_t broadcast(const char *fn, const void *sendbuff, void *recvbuff, size_t count,
                               srcclDataType_t datatype, int root, srcclComm_t comm,
                               srcclRequest_t *req)
{
    struct call a = {
        fn, sendbuff, recvbuff, count, 1, datatype, srcclSum, root, NEED_ROOT | NEED_RECV};
    return call(comm, &a, SC_OP_BROADCAST, req);
}

static srcclResult_t reduce(const char *fn, const void *sendbuff, void *recvbuff, size_t count,
                            srcclDataType_t datatype, srcclRedOp_t op, int root, srcclComm_t comm,
                            srcclRequest_t *req)
{
    struct call a = {
        fn, sendbuff, recvbuff, count, 1, datatype, op, root, NEED_OP | NEED_ROOT | NEED_SEND};
    return call(comm, &a, SC_OP_REDUCE, req);
}

static srcclResult_t allgather(const char *fn, const void *sendbuff, void *recvbuff,
                               size_t sendcount, srcclDataType_t datatype, srcclComm_t comm,
                               srcclRequest_t *req)
{
    struct call a = {fn,        sendbuff,    recvbuff,
                     sendcount, units(comm), datatype,
                     srcclSum,  0,           NEED_SEND | NEED_RECV};
    return call(comm, &a, SC_OP_ALLGATHER, req);
}

static srcclResult_t reduce_scatter(const char *fn, const void *sendbuff, void *recvbuff,
                                    size_t recvcount, srcclDataType_t datatype, srcclRedOp_t op,
                                    srcclComm_t comm, srcclRequest_t *req)
{
    struct call a = {fn,        sendbuff,    recvbuff,
                     recvcount, units(comm), datatype,
                     op,        0,           NEED_OP | NEED_SEND | NEED_RECV};
    return call(comm, &a, SC_OP_REDUCE_SCATTER, req);
}

static srcclResult_t alltoall(const char *fn, const void *sendbuff, void *recvbuff, size_t count,
                              srcclDataType_t datatype, srcclComm_t comm, srcclRequest_t *req)
{
    struct call a = {
        fn, sendbuff, recvbuff, count, units(comm), datatype, srcclSum, 0, NEED_SEND | NEED_RECV};
    return call(comm, &a, SC_OP_ALLTOALL, req);
}

static srcclResult_t barrier(const char *fn, srcclComm_t comm, srcclRequest_t *req)
{
    struct call a = {fn, NULL, NULL, 0, 1, srcclUint8, srcclSum, 0, 0};
    return call(comm, &a, SC_OP_BARRIER, req);
}

static srcclResult_t p2p_checked(const char *fn, const void *buf, size_t count, srcclDataType_t dt,
                                 int peer, srcclComm_t comm, bool send, srcclRequest_t *req)
{
    struct call a = {fn, buf, buf, count, 1, dt, srcclSum, peer, NEED_SEND};
    if (req)
        *req = NULL;
    srcclResult_t r = check(comm, &a);
    if (r)
        return r;
    if (peer < 0 || peer >= comm->nranks)
        return sc_fail(comm, srcclInvalidArgument,
                       "%s: peer %d is not a rank of this %d-rank "
                       "communicator",
                       fn, peer, comm->nranks);
    /* To oneself: the matching receive must be queued too, so only inside
     * a group or as requests. */
    if (peer == comm->rank && !req && !sc_in_group())
        return sc_fail(comm, srcclInvalidUsage,
                       "%s: peer %d is this rank: a blocking send or receive with oneself "
                       "would wait for itself (put both in a group)",
                       fn, peer);
    struct sc_op o = {.kind = send ? SC_OP_SEND : SC_OP_RECV,
                      .fn = fn,
                      .send = buf,
                      .recv = (void *)buf,
                      .cnt = count,
                      .dt = dt,
                      .op = srcclSum,
                      .root = peer};
    return sc_submit(comm, &o, req);
}

static srcclResult_t p2p(const char *fn, const void *buf, size_t count, srcclDataType_t dt,
                         int peer, srcclComm_t comm, bool send, srcclRequest_t *req)
{
    return sc_group_note(p2p_checked(fn, buf, count, dt, peer, comm, send, req));
}

SC_EXPORT srcclResult_t srcclAllReduce(const void *sendbuff, void *recvbuff, size_t count,
                                       srcclDataType_t datatype, srcclRedOp_t op, srcclComm_t comm)
{
    return allreduce("srcclAllReduce", sendbuff, recvbuff, count, datatype, op, comm, NULL);
}

SC_EXPORT srcclResult_t srcclBroadcast(const void *sendbuff, void *recvbuff, size_t count,
                                       srcclDataType_t datatype, int root, srcclComm_t comm)
{
    return broadcast("srcclBroadcast", sendbuff, recvbuff, count, datatype, root, comm, NULL);
}

SC_EXPORT srcclResult_t srcclReduce(const void *sendbuff, void *recvbuff, size_t count,
                                    srcclDataType_t datatype, srcclRedOp_t op, int root,
                                    srcclComm_t comm)
{
    return reduce("srcclReduce", sendbuff, recvbuff, count, datatype, op, root, comm, NULL);
}

SC_EXPORT srcclResult_t srcclAllGather(const void *sendbuff, void *recvbuff, size_t sendcount,
                                       srcclDataType_t datatype, srcclComm_t comm)
{
    return allgather("srcclAllGather", sendbuff, recvbuff, sendcount, datatype, comm, NULL);
}

SC_EXPORT srcclResult_t srcclReduceScatter(const void *sendbuff, void *recvbuff, size_t recvcount,
                                           srcclDataType_t datatype, srcclRedOp_t op,
                                           srcclComm_t comm)
{
    return reduce_scatter("srcclReduceScatter", sendbuff, recvbuff, recvcount, datatype, op, comm,
                          NULL);
}

SC_EXPORT srcclResult_t srcclAllToAll(const void *sendbuff, void *recvbuff, size_t count,
                                      srcclDataType_t datatype, srcclComm_t comm)
{
    return alltoall("srcclAllToAll", sendbuff, recvbuff, count, datatype, comm, NULL);
}

SC_EXPORT srcclResult_t srcclBarrier(srcclComm_t comm)
{
    return barrier("srcclBarrier", comm, NULL);
}

SC_EXPORT srcclResult_t srcclSend(const void *sendbuff, size_t count, srcclDataType_t datatype,
                                  int peer, srcclComm_t comm)
{
    return p2p("srcclSend", sendbuff, count, datatype, peer, comm, true, NULL);
}

SC_EXPORT srcclResult_t srcclRecv(void *recvbuff, size_t count, srcclDataType_t datatype, int peer,
                                  srcclComm_t comm)
{
    return p2p("srcclRecv", recvbuff, count, datatype, peer, comm, false, NULL);
}

/* ---- non-blocking twins: a request to test or wait on ---- */
static bool no_request(srcclComm_t comm, const char *fn, srcclRequest_t *req)
{
    if (req)
        return false;
    if (comm && comm->magic == SC_COMM_MAGIC)
        sc_fail(comm, srcclInvalidArgument, "%s: request is NULL", fn);
    else
        sc_set_thread_error("%s: request is NULL", fn);
    return true;
}

SC_EXPORT srcclResult_t srcclIAllReduce(const void *sendbuff, void *recvbuff, size_t count,
                                        srcclDataType_t datatype, srcclRedOp_t op, srcclComm_t comm,
                                        srcclRequest_t *request)
{
    if (no_request(comm, "srcclIAllReduce", request))
        return srcclInvalidArgument;
    return allreduce("srcclIAllReduce", sendbuff, recvbuff, count, datatype, op, comm, request);
}

SC_EXPORT srcclResult_t srcclIBroadcast(const void *sendbuff, void *recvbuff, size_t count,
                                        srcclDataType_t datatype, int root, srcclComm_t comm,
                                        srcclRequest_t *request)
{
    if (no_request(comm, "srcclIBroadcast", request))
        return srcclInvalidArgument;
    return broadcast("srcclIBroadcast", sendbuff, recvbuff, count, datatype, root, comm, request);
}

SC_EXPORT srcclResult_t srcclIReduce(const void *sendbuff, void *recvbuff, size_t count,
                                     srcclDataType_t datatype, srcclRedOp_t op, int root,
                                     srcclComm_t comm, srcclRequest_t *request)
{
    if (no_request(comm, "srcclIReduce", request))
        return srcclInvalidArgument;
    return reduce("srcclIReduce", sendbuff, recvbuff, count, datatype, op, root, comm, request);
}

SC_EXPORT srcclResult_t srcclIAllGather(const void *sendbuff, void *recvbuff, size_t sendcount,
                                        srcclDataType_t datatype, srcclComm_t comm,
                                        srcclRequest_t *request)
{
    if (no_request(comm, "srcclIAllGather", request))
        return srcclInvalidArgument;
    return allgather("srcclIAllGather", sendbuff, recvbuff, sendcount, datatype, comm, request);
}

SC_EXPORT srcclResult_t srcclIReduceScatter(const void *sendbuff, void *recvbuff, size_t recvcount,
                                            srcclDataType_t datatype, srcclRedOp_t op,
                                            srcclComm_t comm, srcclRequest_t *request)
{
    if (no_request(comm, "srcclIReduceScatter", request))
        return srcclInvalidArgument;
    return reduce_scatter("srcclIReduceScatter", sendbuff, recvbuff, recvcount, datatype, op, comm,
                          request);
}

SC_EXPORT srcclResult_t srcclIAllToAll(const void *sendbuff, void *recvbuff, size_t count,
                                       srcclDataType_t datatype, srcclComm_t comm,
                                       srcclRequest_t *request)
{
    if (no_request(comm, "srcclIAllToAll", request))
        return srcclInvalidArgument;
    return alltoall("srcclIAllToAll", sendbuff, recvbuff, count, datatype, comm, request);
}

SC_EXPORT srcclResult_t srcclIBarrier(srcclComm_t comm, srcclRequest_t *request)
{
    if (no_request(comm, "srcclIBarrier", request))
        return srcclInvalidArgument;
    return barrier("srcclIBarrier", comm, request);
}

SC_EXPORT srcclResult_t srcclISend(const void *sendbuff, size_t count, srcclDataType_t datatype,
                                   int peer, srcclComm_t comm, srcclRequest_t *request)
{
    if (no_request(comm, "srcclISend", request))
        return srcclInvalidArgument;
    return p2p("srcclISend", sendbuff, count, datatype, peer, comm, true, request);
}

SC_EXPORT srcclResult_t srcclIRecv(void *recvbuff, size_t count, srcclDataType_t datatype, int peer,
                                   srcclComm_t comm, srcclRequest_t *request)
{
    if (no_request(comm, "srcclIRecv", request))
        return srcclInvalidArgument;
    return p2p("srcclIRecv", recvbuff, count, datatype, peer, comm, false, request);
}

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

static void comm_free(srcclComm_t c)
{
    if (!c)
        return;
    sc_tp_close(c);
    free(c->peers);
    free(c->scratch);
    c->magic = 0;
    free(c);
}

static srcclResult_t comm_init(srcclComm_t *out, int nranks, int rank, struct sc_id *id,
                               const struct sc_config *cfg)
{
    srcclComm_t c = calloc(1, sizeof(*c));
    if (!c) {
        sc_set_thread_error("out of memory");
        return srcclSystemError;
    }
    c->magic = SC_COMM_MAGIC;
    c->rank = rank;
    c->nranks = nranks;
    c->cfg = *cfg;
    sc_kernels_init(&c->kern, cfg->simd);
    srcclResult_t r = srcclSuccess;
    struct sc_boot boot = {.listen_fd = -1};
    size_t rec_len = sizeof(struct sc_wire_rank) + (size_t)nranks * sizeof(struct sc_wire_peer);
    struct sc_wire_rank *mine = calloc(1, rec_len);
    uint8_t *all = calloc((size_t)nranks, rec_len);
    if (!(c->peers = calloc((size_t)nranks, sizeof(*c->peers))) || !mine || !all) {
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
    sc_debug(c, "connected to %d peers", nranks - 1);
out:
    sc_boot_close(&boot);
    free(mine);
    free(all);
    if (r) {
        /* The message lives on in the thread's buffer after c is gone. */
        sc_set_thread_error("%s", c->last_err[0] ? c->last_err : srcclGetErrorString(r));
        comm_free(c);
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
            srcclResult_t r = sc_tp_wait(c, deadline, "for the last chunks to reach", i);
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
    srcclResult_t r = drain(comm);
    if (r)
        sc_set_thread_error("%s", comm->last_err);
    comm_free(comm);
    return r;
}

SC_EXPORT srcclResult_t srcclCommAbort(srcclComm_t comm)
{
    if (bad_comm(comm, "srcclCommAbort"))
        return srcclInvalidArgument;
    comm_free(comm);
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

SC_EXPORT srcclResult_t srcclAllReduce(const void *sendbuff, void *recvbuff, size_t count,
                                       srcclDataType_t datatype, srcclRedOp_t op, srcclComm_t comm)
{
    struct call a = {"srcclAllReduce",
                     sendbuff,
                     recvbuff,
                     count,
                     1,
                     datatype,
                     op,
                     0,
                     NEED_OP | NEED_SEND | NEED_RECV};
    srcclResult_t r = check(comm, &a);
    if (r || !count)
        return r;
    comm->ops++;
    size_t bytes = count * sc_type_size(datatype);
    return done(comm, a.fn,
                sc_allreduce(comm, sendbuff, recvbuff, count, datatype, op,
                             pick(comm, a.fn, SC_ALLREDUCE, bytes)));
}

SC_EXPORT srcclResult_t srcclBroadcast(const void *sendbuff, void *recvbuff, size_t count,
                                       srcclDataType_t datatype, int root, srcclComm_t comm)
{
    struct call a = {"srcclBroadcast",     sendbuff, recvbuff, count, 1, datatype, srcclSum, root,
                     NEED_ROOT | NEED_RECV};
    srcclResult_t r = check(comm, &a);
    if (r)
        return r;
    if (count && comm->rank == root && !sendbuff)
        return sc_fail(comm, srcclInvalidArgument, "srcclBroadcast: sendbuff is NULL on the root");
    if (!count)
        return srcclSuccess;
    comm->ops++;
    size_t bytes = count * sc_type_size(datatype);
    return done(comm, a.fn,
                sc_broadcast(comm, sendbuff, recvbuff, count, datatype, root,
                             pick(comm, a.fn, SC_BROADCAST, bytes)));
}

SC_EXPORT srcclResult_t srcclReduce(const void *sendbuff, void *recvbuff, size_t count,
                                    srcclDataType_t datatype, srcclRedOp_t op, int root,
                                    srcclComm_t comm)
{
    struct call a = {"srcclReduce",
                     sendbuff,
                     recvbuff,
                     count,
                     1,
                     datatype,
                     op,
                     root,
                     NEED_OP | NEED_ROOT | NEED_SEND};
    srcclResult_t r = check(comm, &a);
    if (r)
        return r;
    if (count && comm->rank == root && !recvbuff)
        return sc_fail(comm, srcclInvalidArgument, "srcclReduce: recvbuff is NULL on the root");
    if (!count)
        return srcclSuccess;
    comm->ops++;
    size_t bytes = count * sc_type_size(datatype);
    return done(comm, a.fn,
                sc_reduce(comm, sendbuff, recvbuff, count, datatype, op, root,
                          pick(comm, a.fn, SC_REDUCE, bytes)));
}

SC_EXPORT srcclResult_t srcclAllGather(const void *sendbuff, void *recvbuff, size_t sendcount,
                                       srcclDataType_t datatype, srcclComm_t comm)
{
    struct call a = {"srcclAllGather",
                     sendbuff,
                     recvbuff,
                     sendcount,
                     comm && comm->magic == SC_COMM_MAGIC ? (size_t)comm->nranks : 1,
                     datatype,
                     srcclSum,
                     0,
                     NEED_SEND | NEED_RECV};
    srcclResult_t r = check(comm, &a);
    if (r || !sendcount)
        return r;
    comm->ops++;
    size_t total = sendcount * sc_type_size(datatype) * (size_t)comm->nranks;
    return done(comm, a.fn,
                sc_allgather(comm, sendbuff, recvbuff, sendcount, datatype,
                             pick(comm, a.fn, SC_ALLGATHER, total)));
}

SC_EXPORT srcclResult_t srcclReduceScatter(const void *sendbuff, void *recvbuff, size_t recvcount,
                                           srcclDataType_t datatype, srcclRedOp_t op,
                                           srcclComm_t comm)
{
    struct call a = {"srcclReduceScatter",
                     sendbuff,
                     recvbuff,
                     recvcount,
                     comm && comm->magic == SC_COMM_MAGIC ? (size_t)comm->nranks : 1,
                     datatype,
                     op,
                     0,
                     NEED_OP | NEED_SEND | NEED_RECV};
    srcclResult_t r = check(comm, &a);
    if (r || !recvcount)
        return r;
    comm->ops++;
    size_t total = recvcount * sc_type_size(datatype) * (size_t)comm->nranks;
    return done(comm, a.fn,
                sc_reduce_scatter(comm, sendbuff, recvbuff, recvcount, datatype, op,
                                  pick(comm, a.fn, SC_REDUCE_SCATTER, total)));
}

SC_EXPORT srcclResult_t srcclAllToAll(const void *sendbuff, void *recvbuff, size_t count,
                                      srcclDataType_t datatype, srcclComm_t comm)
{
    struct call a = {"srcclAllToAll",
                     sendbuff,
                     recvbuff,
                     count,
                     comm && comm->magic == SC_COMM_MAGIC ? (size_t)comm->nranks : 1,
                     datatype,
                     srcclSum,
                     0,
                     NEED_SEND | NEED_RECV};
    srcclResult_t r = check(comm, &a);
    if (r || !count)
        return r;
    comm->ops++;
    return done(comm, a.fn, sc_alltoall(comm, sendbuff, recvbuff, count, datatype));
}

SC_EXPORT srcclResult_t srcclBarrier(srcclComm_t comm)
{
    struct call a = {"srcclBarrier", NULL, NULL, 0, 1, srcclUint8, srcclSum, 0, 0};
    srcclResult_t r = check(comm, &a);
    if (r)
        return r;
    comm->ops++;
    return done(comm, a.fn, sc_barrier(comm));
}

static srcclResult_t p2p(const char *fn, const void *buf, size_t count, srcclDataType_t dt,
                         int peer, srcclComm_t comm, bool send)
{
    struct call a = {fn, buf, buf, count, 1, dt, srcclSum, 0, NEED_SEND};
    srcclResult_t r = check(comm, &a);
    if (r)
        return r;
    if (peer < 0 || peer >= comm->nranks)
        return sc_fail(comm, srcclInvalidArgument,
                       "%s: peer %d is not a rank of this %d-rank "
                       "communicator",
                       fn, peer, comm->nranks);
    if (peer == comm->rank)
        return sc_fail(comm, srcclInvalidUsage,
                       "%s: peer %d is this rank: blocking self "
                       "send/receive needs groups, not supported yet",
                       fn, peer);
    if (!count)
        return srcclSuccess;
    comm->ops++;
    struct sc_prims p;
    sc_prims_init(&p, comm, peer, peer, dt, srcclSum);
    return done(comm, fn, send ? sc_send_msg(&p, buf, count) : sc_recv_msg(&p, (void *)buf, count));
}

SC_EXPORT srcclResult_t srcclSend(const void *sendbuff, size_t count, srcclDataType_t datatype,
                                  int peer, srcclComm_t comm)
{
    return p2p("srcclSend", sendbuff, count, datatype, peer, comm, true);
}

SC_EXPORT srcclResult_t srcclRecv(void *recvbuff, size_t count, srcclDataType_t datatype, int peer,
                                  srcclComm_t comm)
{
    return p2p("srcclRecv", recvbuff, count, datatype, peer, comm, false);
}

/* ---- declared, not supported yet ---- */
SC_EXPORT srcclResult_t srcclGroupStart(void)
{
    sc_set_thread_error("srcclGroupStart: groups are not supported yet");
    return srcclNotSupported;
}

SC_EXPORT srcclResult_t srcclGroupEnd(void)
{
    sc_set_thread_error("srcclGroupEnd: groups are not supported yet");
    return srcclNotSupported;
}

SC_EXPORT srcclResult_t srcclIAllReduce(const void *sendbuff, void *recvbuff, size_t count,
                                        srcclDataType_t datatype, srcclRedOp_t op, srcclComm_t comm,
                                        srcclRequest_t *request)
{
    (void)sendbuff, (void)recvbuff, (void)count, (void)datatype, (void)op, (void)request;
    if (comm && comm->magic == SC_COMM_MAGIC)
        return sc_fail(comm, srcclNotSupported,
                       "srcclIAllReduce: non-blocking collectives are not supported yet");
    sc_set_thread_error("srcclIAllReduce: non-blocking collectives are not supported yet");
    return srcclNotSupported;
}

SC_EXPORT srcclResult_t srcclTest(srcclRequest_t request, int *done_flag)
{
    (void)request, (void)done_flag;
    sc_set_thread_error("srcclTest: non-blocking collectives are not supported yet");
    return srcclNotSupported;
}

SC_EXPORT srcclResult_t srcclWait(srcclRequest_t request)
{
    (void)request;
    sc_set_thread_error("srcclWait: non-blocking collectives are not supported yet");
    return srcclNotSupported;
}

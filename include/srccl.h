/* srccl.h: the public API of srccl, collective communication over the
 * public verbs API (libibverbs.so.1). NCCL-shaped, with our own names.
 *
 * A communicator is a group of nranks processes, each holding one rank.
 * Collectives are blocking (they return when this rank's part is done: its
 * output is complete and its input may be reused), queued in a group, or
 * non-blocking (srcclI*: a request to test or wait on). Every rank of a
 * communicator must call the same collectives in the same order with
 * matching arguments (count, datatype, op, root).
 *
 * A communicator is used by one thread at a time. Calls never hang: every
 * wait has a deadline (SRCCL_TIMEOUT seconds, default 30), and a failed
 * peer makes calls return an error. After an error other than an argument
 * error (srcclInvalidArgument / srcclInvalidUsage found before any
 * communication), the communicator is unusable: every later call returns
 * the same error; release it with srcclCommAbort.
 *
 * Environment variables: see docs/SRCCL.md. */
#ifndef SRCCL_H
#define SRCCL_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SRCCL_MAJOR        0
#define SRCCL_MINOR        1
#define SRCCL_PATCH        0
#define SRCCL_VERSION_CODE (SRCCL_MAJOR * 10000 + SRCCL_MINOR * 100 + SRCCL_PATCH)

typedef enum {
    srcclSuccess = 0,
    srcclSystemError = 1,     /* a system or verbs call failed (no device, out of memory, ...) */
    srcclInternalError = 2,   /* a bug in srccl */
    srcclInvalidArgument = 3, /* a bad argument (NULL pointer, bad datatype, op, root, peer) */
    srcclInvalidUsage = 4,    /* a call inconsistent across ranks or with the communicator state */
    srcclRemoteError = 5,     /* a peer failed: its QP reported an error completion */
    srcclTimeout = 6,         /* nothing happened for SRCCL_TIMEOUT seconds */
    srcclNotSupported = 7,    /* not implemented (no call returns it today) */
    srcclInProgress = 8,
    srcclNumResults
} srcclResult_t;

/* The same values as NCCL's datatypes, for easy porting. */
typedef enum {
    srcclInt8 = 0,
    srcclChar = 0,
    srcclUint8 = 1,
    srcclInt32 = 2,
    srcclInt = 2,
    srcclUint32 = 3,
    srcclInt64 = 4,
    srcclUint64 = 5,
    srcclFloat16 = 6,
    srcclHalf = 6,
    srcclFloat32 = 7,
    srcclFloat = 7,
    srcclFloat64 = 8,
    srcclDouble = 8,
    srcclBfloat16 = 9,
    srcclNumTypes = 10
} srcclDataType_t;

/* Integer sums and products wrap around (two's complement). srcclAvg is the
 * sum divided by nranks: truncated toward zero for integers; float16 and
 * bfloat16 are reduced in float and rounded to nearest-even after each step. */
typedef enum {
    srcclSum = 0,
    srcclProd = 1,
    srcclMax = 2,
    srcclMin = 3,
    srcclAvg = 4,
    srcclNumOps = 5
} srcclRedOp_t;

#define SRCCL_UNIQUE_ID_BYTES 128
/* Names the rendezvous: the root's IPv4 address and TCP port, plus a nonce. */
typedef struct {
    char internal[SRCCL_UNIQUE_ID_BYTES];
} srcclUniqueId;

typedef struct srcclComm *srcclComm_t;

srcclResult_t srcclGetVersion(int *version);

/* ---- communicators ---- */

/* Creates the rendezvous point in the calling process: a TCP listener on
 * SRCCL_ROOT_ADDR's host (127.0.0.1 by default) and an ephemeral port.
 * Give the id to every rank (by any
 * out-of-band means); the calling process must itself call
 * srcclCommInitRank with it (with any rank), since it serves the rendezvous
 * from inside that call. */
srcclResult_t srcclGetUniqueId(srcclUniqueId *id);

/* Collective over nranks processes: connects one RC QP to every other rank
 * through the rendezvous named by id. */
srcclResult_t srcclCommInitRank(srcclComm_t *comm, int nranks, srcclUniqueId id, int rank);

/* Rank, size and rendezvous from the environment, in this order:
 *   SRCCL_RANK / SRCCL_NRANKS / SRCCL_ROOT_ADDR=host[:port]  (srccl-run)
 *   RANK / WORLD_SIZE / MASTER_ADDR / MASTER_PORT            (torchrun; port MASTER_PORT+1)
 *   OMPI_COMM_WORLD_RANK / OMPI_COMM_WORLD_SIZE              (Open MPI)
 *   SLURM_PROCID / SLURM_NTASKS                              (Slurm)
 * Rank 0 serves the rendezvous. Without a root address: 127.0.0.1 and
 * SRCCL_ROOT_PORT, or a port derived from the job id. */
srcclResult_t srcclCommInitFromEnv(srcclComm_t *comm);

/* Releases the communicator; local, no communication (requests still
 * outstanding are completed first). Call it once every rank is done with
 * the communicator (e.g. after a final srcclBarrier). */
srcclResult_t srcclCommDestroy(srcclComm_t comm);
/* Releases the communicator at once, whatever its state (after an error).
 * Requests still outstanding complete with an error (srcclTest / srcclWait
 * on them only return it and release them). */
srcclResult_t srcclCommAbort(srcclComm_t comm);

#define SRCCL_SPLIT_NOCOLOR (-1)
/* Collective over comm: the ranks that give the same color (>= 0) form a
 * new communicator, ranked by key, then by rank in comm. Its QPs are new
 * (connected through comm, no rendezvous); it inherits comm's
 * configuration. color == SRCCL_SPLIT_NOCOLOR: *newcomm = NULL. Every rank of
 * comm must call it. */
srcclResult_t srcclCommSplit(srcclComm_t comm, int color, int key, srcclComm_t *newcomm);

srcclResult_t srcclCommCount(const srcclComm_t comm, int *count);
srcclResult_t srcclCommUserRank(const srcclComm_t comm, int *rank);
/* The communicator's sticky error: srcclSuccess while it is usable. */
srcclResult_t srcclCommGetAsyncError(srcclComm_t comm, srcclResult_t *async_error);

const char *srcclGetErrorString(srcclResult_t result);
/* A sentence about the last failure: the communicator's last error, or with
 * comm == NULL the calling thread's last failure outside a communicator
 * (initialization). "" when there is none. */
const char *srcclGetLastError(srcclComm_t comm);

/* ---- collectives (blocking) ----
 * In-place: sendbuff == recvbuff. For srcclAllGather also
 * sendbuff == recvbuff + rank * sendcount, and for srcclReduceScatter
 * recvbuff == sendbuff + rank * recvcount (NCCL's conventions). */
srcclResult_t srcclAllReduce(const void *sendbuff, void *recvbuff, size_t count,
                             srcclDataType_t datatype, srcclRedOp_t op, srcclComm_t comm);
/* sendbuff matters on root only; recvbuff on every rank. */
srcclResult_t srcclBroadcast(const void *sendbuff, void *recvbuff, size_t count,
                             srcclDataType_t datatype, int root, srcclComm_t comm);
/* recvbuff matters on root only (may be NULL elsewhere). */
srcclResult_t srcclReduce(const void *sendbuff, void *recvbuff, size_t count,
                          srcclDataType_t datatype, srcclRedOp_t op, int root, srcclComm_t comm);
/* recvbuff holds nranks * sendcount elements, rank i's at i * sendcount. */
srcclResult_t srcclAllGather(const void *sendbuff, void *recvbuff, size_t sendcount,
                             srcclDataType_t datatype, srcclComm_t comm);
/* sendbuff holds nranks * recvcount elements; rank i gets block i reduced. */
srcclResult_t srcclReduceScatter(const void *sendbuff, void *recvbuff, size_t recvcount,
                                 srcclDataType_t datatype, srcclRedOp_t op, srcclComm_t comm);
/* count elements to and from each rank: block j of sendbuff goes to rank j,
 * block j of recvbuff comes from rank j. */
srcclResult_t srcclAllToAll(const void *sendbuff, void *recvbuff, size_t count,
                            srcclDataType_t datatype, srcclComm_t comm);
srcclResult_t srcclBarrier(srcclComm_t comm);

/* Point to point, blocking. srcclSend returns once the data is handed to the
 * transport (it may wait for the receiver to make room); the matching
 * srcclRecv must name the same count and datatype. peer may be this rank
 * only inside a group (or as srcclISend / srcclIRecv). */
srcclResult_t srcclSend(const void *sendbuff, size_t count, srcclDataType_t datatype, int peer,
                        srcclComm_t comm);
srcclResult_t srcclRecv(void *recvbuff, size_t count, srcclDataType_t datatype, int peer,
                        srcclComm_t comm);

/* ---- groups ----
 * Between srcclGroupStart and srcclGroupEnd, collectives and sends /
 * receives (on one or several communicators) are checked and queued, not
 * run: they return srcclSuccess at once (or an argument error). The
 * outermost srcclGroupEnd runs them all and returns when they are done,
 * with the first failure; groups nest (a per-thread counter, as NCCL's).
 * Per communicator, the group's collectives run in call order, then all its
 * sends and receives progress together, matched per peer in call order: a
 * send and a receive with the same peer, a ring (send to rank+1, receive
 * from rank-1), an all-to-all of sends and receives, and sends / receives
 * with oneself work at any size. If a call inside the group failed (e.g.
 * srcclInvalidArgument), srcclGroupEnd runs nothing and returns that
 * failure (the other ranks' groups then time out unless they failed too).
 * Non-blocking calls (srcclI*) are not allowed inside a group. */
srcclResult_t srcclGroupStart(void);
srcclResult_t srcclGroupEnd(void);

/* ---- non-blocking calls ----
 * srcclIxxx starts the same call as srcclXxx and returns a request at
 * once; the buffers must stay untouched until the request completes.
 * Progress happens inside srccl calls only (no progress thread): in the
 * srcclI call itself (the first chunks leave), in srcclTest (what is ready
 * moves), srcclWait, and in any other call on the communicator. Requests on
 * one communicator run and complete in call order (a blocking call made
 * while requests are outstanding waits behind them); consecutive
 * srcclISend / srcclIRecv progress together, as in a group. Errors
 * (timeouts, a dead peer) are returned by srcclTest / srcclWait within
 * SRCCL_TIMEOUT, as blocking calls return them; only time spent inside
 * srccl counts toward it, not the application's between srcclTest calls.
 * A request with nothing to move (count 0) is complete at once. */
typedef struct srcclRequest *srcclRequest_t;
srcclResult_t srcclIAllReduce(const void *sendbuff, void *recvbuff, size_t count,
                              srcclDataType_t datatype, srcclRedOp_t op, srcclComm_t comm,
                              srcclRequest_t *request);
srcclResult_t srcclIBroadcast(const void *sendbuff, void *recvbuff, size_t count,
                              srcclDataType_t datatype, int root, srcclComm_t comm,
                              srcclRequest_t *request);
srcclResult_t srcclIReduce(const void *sendbuff, void *recvbuff, size_t count,
                           srcclDataType_t datatype, srcclRedOp_t op, int root, srcclComm_t comm,
                           srcclRequest_t *request);
srcclResult_t srcclIAllGather(const void *sendbuff, void *recvbuff, size_t sendcount,
                              srcclDataType_t datatype, srcclComm_t comm, srcclRequest_t *request);
srcclResult_t srcclIReduceScatter(const void *sendbuff, void *recvbuff, size_t recvcount,
                                  srcclDataType_t datatype, srcclRedOp_t op, srcclComm_t comm,
                                  srcclRequest_t *request);
srcclResult_t srcclIAllToAll(const void *sendbuff, void *recvbuff, size_t count,
                             srcclDataType_t datatype, srcclComm_t comm, srcclRequest_t *request);
srcclResult_t srcclIBarrier(srcclComm_t comm, srcclRequest_t *request);
/* peer may be this rank (the matching srcclIRecv must follow). */
srcclResult_t srcclISend(const void *sendbuff, size_t count, srcclDataType_t datatype, int peer,
                         srcclComm_t comm, srcclRequest_t *request);
srcclResult_t srcclIRecv(void *recvbuff, size_t count, srcclDataType_t datatype, int peer,
                         srcclComm_t comm, srcclRequest_t *request);
/* Makes progress; *done = 1 once the request is complete: the request is
 * then released and the call's result returned (as MPI_Test). *done = 0:
 * srcclSuccess, call again. */
srcclResult_t srcclTest(srcclRequest_t request, int *done);
/* Progresses (sleeping on the completion channel in between) until the
 * request completes; releases it and returns the call's result. */
srcclResult_t srcclWait(srcclRequest_t request);

#ifdef __cplusplus
}
#endif
#endif /* SRCCL_H */

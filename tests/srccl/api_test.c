/* api_test: srccl's API outside the data path.
 *   api_test args      under srccl-run -n 2: argument errors and their
 *                      messages; the communicator stays usable after them;
 *                      a count mismatch between ranks is reported, not hung on
 *   api_test env N     under srccl-run --env srccl|torch|ompi|slurm -n N:
 *                      srcclCommInitFromEnv finds rank and size
 *   api_test uid N R   standalone: srcclGetUniqueId, fork N-1 ranks, the
 *                      id's process takes rank R, srcclCommInitRank everywhere
 *   api_test config    standalone: bad environment values are named
 *   api_test mismatch  under srccl-run -n N on one host (the shared-memory
 *                      path): all-reduces whose counts differ between ranks,
 *                      one-phase and two-phase sizes, and a broadcast with
 *                      different roots: every rank gets srcclInvalidUsage
 *                      naming the disagreement, the communicator stays failed */
#include "srccl.h"

#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static int failures;
static int me = -1;

#define EXPECT(cond, ...)                                                                          \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            failures++;                                                                            \
            fprintf(stderr, "rank %d FAIL %s:%d: ", me, __FILE__, __LINE__);                       \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fprintf(stderr, "\n");                                                                 \
        }                                                                                          \
    } while (0)

/* Expects result want and a last-error message containing needle. */
static void expect_err(srcclComm_t comm, srcclResult_t got, srcclResult_t want, const char *needle,
                       const char *what)
{
    const char *msg = srcclGetLastError(comm);
    EXPECT(got == want, "%s: result %d (%s), expected %d", what, (int)got, srcclGetErrorString(got),
           (int)want);
    EXPECT(strstr(msg, needle) != NULL, "%s: message \"%s\" lacks \"%s\"", what, msg, needle);
}

static srcclComm_t init_env(void)
{
    srcclComm_t comm = NULL;
    srcclResult_t r = srcclCommInitFromEnv(&comm);
    if (r) {
        fprintf(stderr, "init: %s: %s\n", srcclGetErrorString(r), srcclGetLastError(NULL));
        exit(1);
    }
    srcclCommUserRank(comm, &me);
    return comm;
}

static void sum_check(srcclComm_t comm, int n, const char *what)
{
    int64_t v[3] = {me, 1, 100 + me};
    srcclResult_t r = srcclAllReduce(v, v, 3, srcclInt64, srcclSum, comm);
    EXPECT(r == srcclSuccess, "%s: all-reduce: %s", what, srcclGetLastError(comm));
    EXPECT(v[0] == (int64_t)n * (n - 1) / 2 && v[1] == n, "%s: sum %lld/%lld for %d ranks", what,
           (long long)v[0], (long long)v[1], n);
}

static int test_args(void)
{
    srcclComm_t comm = init_env();
    int n = 0;
    srcclCommCount(comm, &n);
    float buf[64] = {0};
    for (int r = 0; r <= srcclNumResults; r++)
        EXPECT(srcclGetErrorString((srcclResult_t)r)[0], "no string for result %d", r);
    int v = 0;
    EXPECT(srcclGetVersion(&v) == srcclSuccess && v == SRCCL_VERSION_CODE, "version %d", v);

    expect_err(NULL, srcclAllReduce(buf, buf, 1, srcclFloat32, srcclSum, NULL),
               srcclInvalidArgument, "comm is NULL", "NULL comm");
    expect_err(comm, srcclAllReduce(buf, buf, 1, (srcclDataType_t)99, srcclSum, comm),
               srcclInvalidArgument, "datatype 99", "bad datatype");
    expect_err(comm, srcclAllReduce(buf, buf, 1, srcclFloat32, (srcclRedOp_t)7, comm),
               srcclInvalidArgument, "op 7", "bad op");
    expect_err(comm, srcclAllReduce(NULL, buf, 4, srcclFloat32, srcclSum, comm),
               srcclInvalidArgument, "sendbuff is NULL", "NULL sendbuff");
    expect_err(comm, srcclAllGather(buf, NULL, 4, srcclFloat32, comm), srcclInvalidArgument,
               "recvbuff is NULL", "NULL recvbuff");
    expect_err(comm, srcclBroadcast(buf, buf, 1, srcclFloat32, n, comm), srcclInvalidArgument,
               "root 2 is not a rank", "bad root");
    expect_err(comm, srcclReduce(buf, buf, 1, srcclFloat32, srcclSum, -1, comm),
               srcclInvalidArgument, "root -1", "negative root");
    expect_err(comm, srcclAllReduce(buf, buf, SIZE_MAX / 2, srcclFloat64, srcclSum, comm),
               srcclInvalidArgument, "too large", "huge count");
    expect_err(comm, srcclSend(buf, 1, srcclFloat32, me, comm), srcclInvalidUsage, "is this rank",
               "send to self");
    expect_err(comm, srcclRecv(buf, 1, srcclFloat32, 5, comm), srcclInvalidArgument, "peer 5",
               "bad peer");
    expect_err(NULL, srcclGroupEnd(), srcclInvalidUsage, "no group is open", "group end alone");
    expect_err(comm, srcclIAllReduce(buf, buf, 1, srcclFloat32, srcclSum, comm, NULL),
               srcclInvalidArgument, "request is NULL", "non-blocking without a request");
    expect_err(NULL, srcclWait(NULL), srcclInvalidArgument, "request is NULL", "wait NULL");
    EXPECT(srcclCommCount(comm, NULL) == srcclInvalidArgument, "count NULL");
    /* Zero counts are no-ops, even with NULL buffers. */
    EXPECT(srcclAllReduce(NULL, NULL, 0, srcclFloat32, srcclSum, comm) == srcclSuccess, "count 0");
    /* Argument errors leave the communicator usable. */
    srcclResult_t async = srcclInternalError;
    srcclCommGetAsyncError(comm, &async);
    EXPECT(async == srcclSuccess, "async error %d after argument errors", (int)async);
    sum_check(comm, n, "after argument errors");

    /* Ranks disagreeing on a count: reported, not misread or hung on. */
    int cnt = me == 0 ? 10 : 11;
    if (me == 0) {
        EXPECT(srcclSend(buf, (size_t)cnt, srcclFloat32, 1, comm) == srcclSuccess, "send: %s",
               srcclGetLastError(comm));
    } else if (me == 1) {
        expect_err(comm, srcclRecv(buf, (size_t)cnt, srcclFloat32, 0, comm), srcclInvalidUsage,
                   "disagree", "count mismatch");
        /* and the communicator is done */
        expect_err(comm, srcclBarrier(comm), srcclInvalidUsage, "disagree", "after mismatch");
    }
    /* Rank 0's destroy waits until its chunk has left (the mismatch must
     * reach rank 1); rank 1's communicator is failed: abort. */
    if (me == 0)
        EXPECT(srcclCommDestroy(comm) == srcclSuccess, "destroy: %s", srcclGetLastError(NULL));
    else
        EXPECT(srcclCommAbort(comm) == srcclSuccess, "abort");
    expect_err(NULL, srcclCommDestroy(NULL), srcclInvalidArgument, "comm is NULL", "destroy NULL");
    return failures ? 1 : 0;
}

static int test_env(int n)
{
    srcclComm_t comm = init_env();
    int cnt = 0;
    srcclCommCount(comm, &cnt);
    EXPECT(cnt == n, "size %d, expected %d", cnt, n);
    const char *vars[] = {"SRCCL_RANK", "RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID"};
    for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) {
        const char *v = getenv(vars[i]);
        if (v) {
            EXPECT(atoi(v) == me, "rank %d but %s=%s", me, vars[i], v);
            break;
        }
    }
    sum_check(comm, n, "from the environment");
    EXPECT(srcclBarrier(comm) == srcclSuccess, "barrier");
    EXPECT(srcclCommDestroy(comm) == srcclSuccess, "destroy: %s", srcclGetLastError(NULL));
    return failures ? 1 : 0;
}

/* The process that made the id serves the rendezvous as rank `root_rank`;
 * children take the other ranks. */
static int test_uid(int n, int root_rank)
{
    srcclUniqueId id;
    if (srcclGetUniqueId(&id)) {
        fprintf(stderr, "srcclGetUniqueId: %s\n", srcclGetLastError(NULL));
        return 1;
    }
    pid_t kids[64];
    int nk = 0;
    int rank = root_rank;
    fflush(NULL);
    for (int r = 0; r < n; r++) {
        if (r == root_rank)
            continue;
        pid_t pid = fork();
        if (pid == 0) {
            rank = r;
            nk = -1;
            break;
        }
        kids[nk++] = pid;
    }
    srcclComm_t comm;
    srcclResult_t res = srcclCommInitRank(&comm, n, id, rank);
    if (res) {
        fprintf(stderr, "rank %d: srcclCommInitRank: %s\n", rank, srcclGetLastError(NULL));
        if (nk < 0)
            _exit(1);
        failures++;
    } else {
        me = rank;
        sum_check(comm, n, "srcclCommInitRank");
        EXPECT(srcclBarrier(comm) == srcclSuccess, "barrier");
        srcclCommDestroy(comm);
    }
    if (nk < 0)
        _exit(failures ? 1 : 0);
    for (int i = 0; i < nk; i++) {
        int st;
        waitpid(kids[i], &st, 0);
        EXPECT(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child %d failed", i);
    }
    if (!failures)
        printf("api_test uid: %d ranks, id made by rank %d: OK\n", n, root_rank);
    return failures ? 1 : 0;
}

static int test_config(void)
{
    srcclComm_t comm = NULL;
    static const char *const keep[] = {
        "SRCCL_RANK",           "SRCCL_NRANKS",         "RANK",         "WORLD_SIZE",
        "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "SLURM_PROCID", "SLURM_NTASKS"};
    for (size_t i = 0; i < sizeof(keep) / sizeof(keep[0]); i++)
        unsetenv(keep[i]);
    expect_err(NULL, srcclCommInitFromEnv(&comm), srcclInvalidArgument, "SRCCL_RANK",
               "no launcher");
    setenv("SRCCL_RANK", "3", 1);
    setenv("SRCCL_NRANKS", "2", 1);
    expect_err(NULL, srcclCommInitFromEnv(&comm), srcclInvalidArgument, "rank < size",
               "rank >= size");
    setenv("SRCCL_RANK", "0", 1);
    setenv("SRCCL_NRANKS", "1", 1);
    setenv("SRCCL_TIMEOUT", "soon", 1);
    expect_err(NULL, srcclCommInitFromEnv(&comm), srcclInvalidArgument, "SRCCL_TIMEOUT",
               "bad timeout");
    unsetenv("SRCCL_TIMEOUT");
    setenv("SRCCL_ALGO", "bogus", 1);
    expect_err(NULL, srcclCommInitFromEnv(&comm), srcclInvalidArgument, "SRCCL_ALGO", "bad algo");
    unsetenv("SRCCL_ALGO");
    setenv("SRCCL_CHUNK_BYTES", "12Q", 1);
    expect_err(NULL, srcclCommInitFromEnv(&comm), srcclInvalidArgument, "SRCCL_CHUNK_BYTES",
               "bad chunk");
    unsetenv("SRCCL_CHUNK_BYTES");
    setenv("SRCCL_SHM", "2", 1);
    expect_err(NULL, srcclCommInitFromEnv(&comm), srcclInvalidArgument, "SRCCL_SHM", "bad shm");
    unsetenv("SRCCL_SHM");
    setenv("SRCCL_SHM_BYTES", "16", 1); /* below the 64 B minimum */
    expect_err(NULL, srcclCommInitFromEnv(&comm), srcclInvalidArgument, "SRCCL_SHM_BYTES",
               "bad shm bytes");
    unsetenv("SRCCL_SHM_BYTES");
    setenv("SRCCL_SHM_SPIN_US", "-5", 1);
    expect_err(NULL, srcclCommInitFromEnv(&comm), srcclInvalidArgument, "SRCCL_SHM_SPIN_US",
               "bad shm spin");
    unsetenv("SRCCL_SHM_SPIN_US");
    /* One rank needs no device and no peer. */
    EXPECT(srcclCommInitFromEnv(&comm) == srcclSuccess, "1 rank: %s", srcclGetLastError(NULL));
    me = 0;
    if (comm) {
        sum_check(comm, 1, "one rank");
        EXPECT(srcclCommDestroy(comm) == srcclSuccess, "destroy");
        expect_err(NULL, srcclCommInitRank(NULL, 2, (srcclUniqueId){{0}}, 0), srcclInvalidArgument,
                   "comm is NULL", "init NULL");
        expect_err(NULL, srcclCommInitRank(&comm, 2, (srcclUniqueId){{0}}, 2), srcclInvalidArgument,
                   "rank 2 of 2", "init bad rank");
    }
    if (!failures)
        printf("api_test config: OK\n");
    return failures ? 1 : 0;
}

static int test_mismatch(void)
{
    static const size_t base[] = {10, 3 << 20}; /* floats: one phase, then loops */
    for (int t = 0; t < 3; t++) {
        srcclComm_t comm;
        srcclResult_t r = srcclCommInitFromEnv(&comm);
        EXPECT(r == srcclSuccess, "init: %s", srcclGetLastError(NULL));
        if (r)
            return 1;
        srcclCommUserRank(comm, &me);
        size_t cnt = t < 2 ? base[t] + (size_t)me : 64;
        float *buf = calloc(cnt, sizeof(float));
        if (!buf)
            return 1;
        if (t < 2)
            expect_err(comm, srcclAllReduce(buf, buf, cnt, srcclFloat32, srcclSum, comm),
                       srcclInvalidUsage, "disagree", "all-reduce count mismatch");
        else
            expect_err(comm, srcclBroadcast(buf, buf, cnt, srcclFloat32, me, comm),
                       srcclInvalidUsage, "disagree", "broadcast root mismatch");
        expect_err(comm, srcclBarrier(comm), srcclInvalidUsage, "disagree", "after mismatch");
        EXPECT(srcclCommAbort(comm) == srcclSuccess, "abort");
        free(buf);
    }
    if (!failures && me == 0)
        printf("api_test mismatch: OK\n");
    return failures ? 1 : 0;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "args";
    if (!strcmp(mode, "args"))
        return test_args();
    if (!strcmp(mode, "env") && argc > 2)
        return test_env(atoi(argv[2]));
    if (!strcmp(mode, "uid") && argc > 3)
        return test_uid(atoi(argv[2]), atoi(argv[3]));
    if (!strcmp(mode, "mismatch"))
        return test_mismatch();
    if (!strcmp(mode, "config"))
        return test_config();
    fprintf(stderr, "usage: api_test args | env N | uid N ROOT_RANK | config\n");
    return 2;
}

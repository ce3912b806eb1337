/* group_test: groups, non-blocking calls and communicator split, under
 * srccl-run -n N. Every result is checked against a reference computed
 * here from (rank, index, salt), independently of srccl.
 *
 *   group_test ring      in one group: send to rank+1, receive from rank-1
 *                        (and with 2 ranks: a send and a receive with the
 *                        same peer), 3 MiB each: more than the slots hold, so
 *                        unfused blocking calls would deadlock; plus a send
 *                        and a receive with oneself
 *   group_test alltoall  all-to-all made of grouped sends and receives
 *                        (oneself included), 640 KiB per pair
 *   group_test colls     several collectives in one group (all-reduce x2,
 *                        broadcast, all-gather, reduce-scatter, barrier),
 *                        mixed with a send/receive ring
 *   group_test nested    nested groups: nothing runs before the outermost
 *                        end; srcclGroupEnd without a group is an error
 *   group_test argerr    a bad argument inside a group: the call and
 *                        srcclGroupEnd return it, nothing of the group runs,
 *                        the communicator stays usable
 *   group_test nb        non-blocking: several requests of every kind
 *                        started, srcclTest polled until the last is done
 *                        (the earlier ones must be done then: call order),
 *                        srcclWait; a blocking call behind requests;
 *                        ISend/IRecv ring; count 0; bad arguments
 *   group_test nbkill    rank n/2 kills itself (SIGKILL) while the others
 *                        wait on non-blocking all-reduces: srcclWait must
 *                        return an error within SRCCL_TIMEOUT + 3 s (run
 *                        through fault.sh, which counts "survivor OK")
 *   group_test nbidle    requests started, then 2.5..3.4 s of "computing"
 *                        before srcclWait, with SRCCL_TIMEOUT=2: no timeout
 *                        (only time spent inside srccl counts)
 *   group_test split     srcclCommSplit: colors by parity with keys
 *                        reversing the order, NOCOLOR, collectives on the
 *                        children and the parent, one group over the child
 *                        and the parent, a nested split, errors */
#include "srccl.h"

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int me, nr;
static srcclComm_t comm;
static long failures;

#define EXPECT(cond, ...)                                                                          \
    do {                                                                                           \
        if (!(cond) && failures++ < 20) {                                                          \
            fprintf(stderr, "rank %d FAIL %s:%d: ", me, __FILE__, __LINE__);                       \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fprintf(stderr, "\n");                                                                 \
        }                                                                                          \
    } while (0)

#define CALL(c, x)                                                                                 \
    do {                                                                                           \
        srcclResult_t r_ = (x);                                                                    \
        if (r_ != srcclSuccess) {                                                                  \
            fprintf(stderr, "rank %d %s:%d: %s -> %s: %s\n", me, __FILE__, __LINE__, #x,           \
                    srcclGetErrorString(r_), srcclGetLastError(c));                                \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Rank r's element i of the data salted with salt: a small integer, so
 * that float sums are exact. */
static int32_t val(int r, size_t i, int salt)
{
    uint32_t x = (uint32_t)(i * 2654435761u) ^ (uint32_t)(r + 1) * 40503u ^ (uint32_t)salt * 977u;
    x ^= x >> 13;
    x *= 0x5bd1e995u;
    x ^= x >> 15;
    return (int32_t)(x % 201) - 100;
}

static void fill_i(int32_t *b, size_t cnt, int r, int salt)
{
    for (size_t i = 0; i < cnt; i++)
        b[i] = val(r, i, salt);
}

static void fill_f(float *b, size_t cnt, int r, int salt)
{
    for (size_t i = 0; i < cnt; i++)
        b[i] = (float)val(r, i, salt);
}

static long check_i(const int32_t *b, size_t cnt, int r, int salt, const char *what)
{
    long bad = 0;
    for (size_t i = 0; i < cnt; i++)
        if (b[i] != val(r, i, salt) && bad++ == 0)
            EXPECT(0, "%s: element %zu is %d, expected %d (from rank %d)", what, i, b[i],
                   val(r, i, salt), r);
    return bad;
}

/* The sum over ranks of element i (salt). */
static int32_t sum_i(int n, size_t i, int salt)
{
    int32_t s = 0;
    for (int r = 0; r < n; r++)
        s += val(r, i, salt);
    return s;
}

static void *xmalloc(size_t len)
{
    void *p = malloc(len ? len : 1);
    if (!p) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    return p;
}

static void init(void)
{
    srcclResult_t r = srcclCommInitFromEnv(&comm);
    if (r) {
        fprintf(stderr, "init: %s: %s\n", srcclGetErrorString(r), srcclGetLastError(NULL));
        exit(1);
    }
    srcclCommUserRank(comm, &me);
    srcclCommCount(comm, &nr);
}

static int finish(const char *mode)
{
    CALL(comm, srcclBarrier(comm));
    CALL(comm, srcclCommDestroy(comm));
    if (!failures)
        printf("rank %d: group_test %s: OK\n", me, mode);
    return failures ? 1 : 0;
}

/* ---- groups ---- */
static int test_ring(void)
{
    const size_t cnt = 3 << 18; /* 3 MiB of int32: more than 8 slots of 128 KiB */
    int next = (me + 1) % nr, prev = (me + nr - 1) % nr;
    int32_t *s = xmalloc(cnt * 4), *r = xmalloc(cnt * 4), *self = xmalloc(1000 * 4);
    for (int round = 0; round < 3; round++) {
        fill_i(s, cnt, me, round);
        memset(r, 0, cnt * 4);
        memset(self, 0, 1000 * 4);
        CALL(comm, srcclGroupStart());
        /* The receive first on odd ranks: order inside a group is free. */
        if (me % 2)
            CALL(comm, srcclRecv(r, cnt, srcclInt32, prev, comm));
        CALL(comm, srcclSend(s, cnt, srcclInt32, next, comm));
        if (!(me % 2))
            CALL(comm, srcclRecv(r, cnt, srcclInt32, prev, comm));
        CALL(comm, srcclRecv(self, 1000, srcclInt32, me, comm));
        CALL(comm, srcclSend(s, 1000, srcclInt32, me, comm));
        CALL(comm, srcclGroupEnd());
        check_i(r, cnt, prev, round, "ring");
        check_i(self, 1000, me, round, "self");
    }
    /* Several sends to one peer in a group arrive in call order. */
    int32_t *r2 = xmalloc(cnt * 4);
    fill_i(s, cnt, me, 7);
    CALL(comm, srcclGroupStart());
    CALL(comm, srcclSend(s, cnt / 2, srcclInt32, next, comm));
    CALL(comm, srcclSend(s + cnt / 2, cnt - cnt / 2, srcclInt32, next, comm));
    CALL(comm, srcclRecv(r, cnt / 2, srcclInt32, prev, comm));
    CALL(comm, srcclRecv(r2, cnt - cnt / 2, srcclInt32, prev, comm));
    CALL(comm, srcclGroupEnd());
    memcpy(r + cnt / 2, r2, (cnt - cnt / 2) * 4);
    check_i(r, cnt, prev, 7, "two sends in order");
    /* A blocking send to oneself outside a group is refused, not hung on. */
    EXPECT(srcclSend(s, 1, srcclInt32, me, comm) == srcclInvalidUsage, "blocking self send");
    free(s);
    free(r);
    free(r2);
    free(self);
    return finish("ring");
}

static int test_alltoall(void)
{
    const size_t cnt = 160 << 10; /* per pair: 640 KiB of int32 */
    int32_t *s = xmalloc(cnt * 4 * (size_t)nr), *r = xmalloc(cnt * 4 * (size_t)nr);
    for (int round = 0; round < 2; round++) {
        for (int j = 0; j < nr; j++) /* block for rank j: salt j */
            fill_i(s + (size_t)j * cnt, cnt, me, 100 * round + j);
        memset(r, 0, cnt * 4 * (size_t)nr);
        CALL(comm, srcclGroupStart());
        for (int j = 0; j < nr; j++) {
            CALL(comm, srcclSend(s + (size_t)j * cnt, cnt, srcclInt32, j, comm));
            CALL(comm, srcclRecv(r + (size_t)j * cnt, cnt, srcclInt32, j, comm));
        }
        CALL(comm, srcclGroupEnd());
        for (int j = 0; j < nr; j++)
            check_i(r + (size_t)j * cnt, cnt, j, 100 * round + me, "all-to-all");
    }
    free(s);
    free(r);
    return finish("alltoall");
}

static int test_colls(void)
{
    const size_t cnt = 300000; /* 1.2 MB: several chunks and ring loops */
    int32_t *a = xmalloc(cnt * 4), *ar = xmalloc(cnt * 4), *b = xmalloc(cnt * 4);
    float *f = xmalloc(cnt * 4), *fr = xmalloc(cnt * 4);
    int32_t *ag = xmalloc(cnt * 4 * (size_t)nr), *rs = xmalloc(cnt * 4 * (size_t)nr);
    int32_t *rsr = xmalloc(cnt * 4), *ps = xmalloc(cnt * 4), *pr = xmalloc(cnt * 4);
    int root = nr - 1;
    fill_i(a, cnt, me, 1);
    fill_f(f, cnt, me, 2);
    if (me == root)
        fill_i(b, cnt, me, 3);
    else
        memset(b, 0, cnt * 4);
    fill_i(rs, cnt * (size_t)nr, me, 4);
    fill_i(ps, cnt, me, 5);
    CALL(comm, srcclGroupStart());
    CALL(comm, srcclAllReduce(a, ar, cnt, srcclInt32, srcclSum, comm));
    CALL(comm, srcclSend(ps, cnt, srcclInt32, (me + 1) % nr, comm));
    CALL(comm, srcclAllReduce(f, fr, cnt, srcclFloat32, srcclSum, comm));
    CALL(comm, srcclBroadcast(b, b, cnt, srcclInt32, root, comm));
    CALL(comm, srcclAllGather(a, ag, cnt, srcclInt32, comm));
    CALL(comm, srcclRecv(pr, cnt, srcclInt32, (me + nr - 1) % nr, comm));
    CALL(comm, srcclReduceScatter(rs, rsr, cnt, srcclInt32, srcclSum, comm));
    CALL(comm, srcclBarrier(comm));
    CALL(comm, srcclGroupEnd());
    long bad = 0;
    for (size_t i = 0; i < cnt; i++) {
        bad += ar[i] != sum_i(nr, i, 1);
        bad += fr[i] != (float)sum_i(nr, i, 2);
        bad += rsr[i] != sum_i(nr, (size_t)me * cnt + i, 4);
    }
    EXPECT(bad == 0, "grouped all-reduce / reduce-scatter: %ld wrong", bad);
    check_i(b, cnt, root, 3, "grouped broadcast");
    for (int j = 0; j < nr; j++)
        check_i(ag + (size_t)j * cnt, cnt, j, 1, "grouped all-gather");
    check_i(pr, cnt, (me + nr - 1) % nr, 5, "grouped ring");
    free(a), free(ar), free(b), free(f), free(fr), free(ag), free(rs), free(rsr), free(ps),
        free(pr);
    return finish("colls");
}

static int test_nested(void)
{
    EXPECT(srcclGroupEnd() == srcclInvalidUsage, "srcclGroupEnd without a group");
    const size_t cnt = 100000;
    int32_t *s = xmalloc(cnt * 4), *r = xmalloc(cnt * 4), *x = xmalloc(4 * 4);
    int peer = me ^ 1;
    if (peer >= nr)
        peer = me;
    fill_i(s, cnt, me, 9);
    memset(r, 0, cnt * 4);
    int32_t v[4] = {me, 1, 2, 3};
    CALL(comm, srcclGroupStart());
    CALL(comm, srcclGroupStart());
    CALL(comm, srcclSend(s, cnt, srcclInt32, peer, comm));
    CALL(comm, srcclGroupStart());
    CALL(comm, srcclAllReduce(v, x, 4, srcclInt32, srcclSum, comm));
    CALL(comm, srcclGroupEnd());
    CALL(comm, srcclRecv(r, cnt, srcclInt32, peer, comm));
    CALL(comm, srcclGroupEnd());
    /* Still inside the outermost group: nothing has run. */
    long moved = 0;
    for (size_t i = 0; i < cnt; i++)
        moved += r[i] != 0;
    EXPECT(moved == 0, "%ld elements received before the outermost srcclGroupEnd", moved);
    CALL(comm, srcclGroupEnd());
    check_i(r, cnt, peer, 9, "nested group");
    EXPECT(x[0] == nr * (nr - 1) / 2 && x[1] == nr, "nested all-reduce: %d %d", x[0], x[1]);
    free(s), free(r), free(x);
    return finish("nested");
}

static int test_argerr(void)
{
    const size_t cnt = 1000;
    int32_t *s = xmalloc(cnt * 4), *r = xmalloc(cnt * 4);
    fill_i(s, cnt, me, 11);
    memset(r, 0, cnt * 4);
    int next = (me + 1) % nr, prev = (me + nr - 1) % nr;
    CALL(comm, srcclGroupStart());
    CALL(comm, srcclSend(s, cnt, srcclInt32, next, comm));
    EXPECT(srcclAllReduce(s, r, cnt, (srcclDataType_t)42, srcclSum, comm) == srcclInvalidArgument,
           "bad datatype inside a group");
    CALL(comm, srcclRecv(r, cnt, srcclInt32, prev, comm));
    srcclRequest_t req = NULL;
    EXPECT(srcclIAllReduce(s, r, cnt, srcclInt32, srcclSum, comm, &req) == srcclInvalidUsage &&
               !req,
           "a non-blocking call inside a group");
    srcclResult_t e = srcclGroupEnd();
    EXPECT(e == srcclInvalidArgument, "srcclGroupEnd: %d (%s), expected the argument error", (int)e,
           srcclGetErrorString(e));
    EXPECT(strstr(srcclGetLastError(NULL), "datatype 42") != NULL, "message \"%s\"",
           srcclGetLastError(NULL));
    long moved = 0;
    for (size_t i = 0; i < cnt; i++)
        moved += r[i] != 0;
    EXPECT(moved == 0, "the failed group ran: %ld elements received", moved);
    srcclResult_t async = srcclInternalError;
    srcclCommGetAsyncError(comm, &async);
    EXPECT(async == srcclSuccess, "async error %d after a failed group", (int)async);
    /* The communicator works, groups too. */
    CALL(comm, srcclGroupStart());
    CALL(comm, srcclSend(s, cnt, srcclInt32, next, comm));
    CALL(comm, srcclRecv(r, cnt, srcclInt32, prev, comm));
    CALL(comm, srcclGroupEnd());
    check_i(r, cnt, prev, 11, "group after a failed group");
    free(s), free(r);
    return finish("argerr");
}

/* ---- non-blocking ---- */
static int test_nb(void)
{
    const size_t cnt = 400000; /* 1.6 MB */
    enum { K = 6 };
    int32_t *in[K], *out[K];
    for (int k = 0; k < K; k++) {
        in[k] = xmalloc(cnt * 4 * (size_t)nr);
        out[k] = xmalloc(cnt * 4 * (size_t)nr);
        fill_i(in[k], cnt * (size_t)nr, me, 20 + k);
        memset(out[k], 0, cnt * 4 * (size_t)nr);
    }
    int root = nr / 2;
    for (int round = 0; round < 2; round++) {
        srcclRequest_t q[K + 2];
        CALL(comm, srcclIAllReduce(in[0], out[0], cnt, srcclInt32, srcclSum, comm, &q[0]));
        CALL(comm, srcclIAllGather(in[1], out[1], cnt, srcclInt32, comm, &q[1]));
        CALL(comm, srcclIBroadcast(in[2], out[2], cnt, srcclInt32, root, comm, &q[2]));
        CALL(comm, srcclIReduceScatter(in[3], out[3], cnt, srcclInt32, srcclSum, comm, &q[3]));
        CALL(comm, srcclIAllToAll(in[4], out[4], cnt, srcclInt32, comm, &q[4]));
        CALL(comm, srcclIReduce(in[5], out[5], cnt, srcclInt32, srcclMax, root, comm, &q[5]));
        CALL(comm, srcclIBarrier(comm, &q[6]));
        CALL(comm, srcclIAllReduce(NULL, NULL, 0, srcclInt32, srcclSum, comm, &q[7]));
        int done = 0;
        if (round == 0) {
            long tests = 0;
            double t0 = now_s();
            while (!done) {
                CALL(comm, srcclTest(q[6], &done));
                tests++;
                EXPECT(now_s() - t0 < 60, "srcclTest never finished");
                if (now_s() - t0 >= 60)
                    exit(1);
            }
            /* In call order: the earlier requests are complete too. */
            for (int k = 0; k < 6; k++) {
                done = 0;
                CALL(comm, srcclTest(q[k], &done));
                EXPECT(done == 1, "request %d not done after a later one", k);
            }
            CALL(comm, srcclTest(q[7], &done));
            EXPECT(done == 1, "count 0 request not done");
            EXPECT(tests > 1, "srcclTest done at the first call (%ld): did anything wait?", tests);
        } else {
            for (int k = 7; k >= 0; k--) /* waiting on the last first works too */
                CALL(comm, srcclWait(q[k]));
        }
        long bad = 0;
        for (size_t i = 0; i < cnt; i++) {
            bad += out[0][i] != sum_i(nr, i, 20);
            bad += out[3][i] != sum_i(nr, (size_t)me * cnt + i, 23);
            if (me == root) {
                int32_t mx = val(0, i, 25);
                for (int r = 1; r < nr; r++)
                    mx = val(r, i, 25) > mx ? val(r, i, 25) : mx;
                bad += out[5][i] != mx;
            }
        }
        EXPECT(bad == 0, "round %d: %ld wrong in all-reduce / reduce-scatter / reduce", round, bad);
        for (int j = 0; j < nr; j++) {
            check_i(out[1] + (size_t)j * cnt, cnt, j, 21, "non-blocking all-gather");
            for (size_t i = 0; i < cnt; i++)
                if (out[4][(size_t)j * cnt + i] != val(j, (size_t)me * cnt + i, 24)) {
                    EXPECT(0, "non-blocking all-to-all: block %d element %zu", j, i);
                    break;
                }
        }
        check_i(out[2], cnt, root, 22, "non-blocking broadcast");
        for (int k = 0; k < K; k++)
            memset(out[k], 0, cnt * 4 * (size_t)nr);
    }
    /* A blocking call while requests are outstanding runs behind them. */
    srcclRequest_t q1, q2;
    CALL(comm, srcclIAllReduce(in[0], out[0], cnt, srcclInt32, srcclSum, comm, &q1));
    int32_t v[2] = {1, me};
    CALL(comm, srcclAllReduce(v, v, 2, srcclInt32, srcclSum, comm));
    EXPECT(v[0] == nr && v[1] == nr * (nr - 1) / 2, "blocking all-reduce behind a request");
    int done = 0;
    CALL(comm, srcclTest(q1, &done));
    EXPECT(done == 1, "the request before a blocking call is not done after it");
    for (size_t i = 0; i < cnt; i++)
        if (out[0][i] != sum_i(nr, i, 20)) {
            EXPECT(0, "all-reduce before the blocking call: element %zu", i);
            break;
        }
    /* ISend / IRecv around the ring, larger than the slots: they progress
     * together. */
    int next = (me + 1) % nr, prev = (me + nr - 1) % nr;
    CALL(comm, srcclISend(in[1], cnt, srcclInt32, next, comm, &q1));
    CALL(comm, srcclIRecv(out[1], cnt, srcclInt32, prev, comm, &q2));
    CALL(comm, srcclWait(q2));
    CALL(comm, srcclWait(q1));
    check_i(out[1], cnt, prev, 21, "ISend/IRecv ring");
    /* Bad arguments: reported at once, no request. */
    srcclRequest_t bad_q = (srcclRequest_t)1;
    EXPECT(srcclIAllReduce(in[0], out[0], cnt, srcclInt32, (srcclRedOp_t)9, comm, &bad_q) ==
                   srcclInvalidArgument &&
               bad_q == NULL,
           "non-blocking bad op");
    EXPECT(srcclIAllReduce(in[0], out[0], cnt, srcclInt32, srcclSum, comm, NULL) ==
               srcclInvalidArgument,
           "NULL request");
    EXPECT(srcclTest(NULL, &done) == srcclInvalidArgument, "srcclTest(NULL)");
    EXPECT(srcclWait(NULL) == srcclInvalidArgument, "srcclWait(NULL)");
    for (int k = 0; k < K; k++)
        free(in[k]), free(out[k]);
    return finish("nb");
}

/* The application computes between starting requests and waiting for
 * them, longer than SRCCL_TIMEOUT (2 s here) and unevenly across ranks:
 * only the time spent waiting inside srccl counts, so nothing times out. */
static int test_nbidle(void)
{
    const size_t cnt = 1 << 20; /* 4 MiB: many ring steps need the others */
    int32_t *a = xmalloc(cnt * 4), *b = xmalloc(cnt * 4);
    fill_i(a, cnt, me, 41);
    srcclRequest_t q[2];
    CALL(comm, srcclIAllReduce(a, b, cnt, srcclInt32, srcclSum, comm, &q[0]));
    CALL(comm, srcclIBarrier(comm, &q[1]));
    int done = 0;
    CALL(comm, srcclTest(q[0], &done));
    struct timespec ts = {2, 500000000L + 300000000L * me}; /* 2.5 s + 0.3 s per rank */
    while (ts.tv_nsec >= 1000000000L)
        ts.tv_sec++, ts.tv_nsec -= 1000000000L;
    nanosleep(&ts, NULL);
    if (!done)
        CALL(comm, srcclWait(q[0]));
    CALL(comm, srcclWait(q[1]));
    long bad = 0;
    for (size_t i = 0; i < cnt; i++)
        bad += b[i] != sum_i(nr, i, 41);
    EXPECT(bad == 0, "all-reduce after computing: %ld wrong", bad);
    free(a), free(b);
    return finish("nbidle");
}

static int test_nbkill(void)
{
    const char *t = getenv("SRCCL_TIMEOUT");
    double timeout = t ? atof(t) : 30;
    size_t cnt = 1 << 20;
    float *a = xmalloc(cnt * 4), *b = xmalloc(cnt * 4);
    memset(a, 0, cnt * 4);
    srcclRequest_t q[3];
    for (int k = 0; k < 3; k++)
        CALL(comm, srcclIAllReduce(a, b, cnt, srcclFloat32, srcclSum, comm, &q[k]));
    /* The victim's last chunks of these calls may still be in its own
     * memory when it dies: a same-host peer copies them straight from there
     * (docs/TUNING.md, SOFTRDMA_SHM_BULK), as a NIC may still be sending
     * them, so a survivor may already see the death here. */
    srcclResult_t r = srcclSuccess;
    for (int k = 0; k < 3; k++) {
        srcclResult_t rk = srcclWait(q[k]);
        if (rk == srcclSuccess)
            continue;
        if (me == nr / 2)
            CALL(comm, rk); /* the victim itself must get this far */
        if (r == srcclSuccess)
            r = rk;
    }
    if (me == nr / 2) {
        CALL(comm, srcclIAllReduce(a, b, cnt, srcclFloat32, srcclSum, comm, &q[0]));
        int done = 0;
        for (int i = 0; i < 3; i++)
            srcclTest(q[0], &done);
        kill(getpid(), SIGKILL);
    }
    double t0 = now_s();
    long calls = 0;
    /* Until the victim's death shows: each round, three requests. */
    while (!r && calls < 100000) {
        /* A post fails at once only when the communicator has already
         * failed: progress inside the last round's waits (a send's error
         * completion polled after its request finished) saw the death. */
        int posted = 0;
        for (; posted < 3 && !r; posted++)
            r = srcclIAllReduce(a, b, cnt, srcclFloat32, srcclSum, comm, &q[posted]);
        if (r) {
            for (int k = 0; k < posted - 1; k++)
                EXPECT(srcclWait(q[k]) == r, "a request posted before the failure: not %d", (int)r);
            break;
        }
        int done = 0;
        while (!done && !r)
            r = srcclTest(q[0], &done);
        srcclResult_t r1 = srcclWait(q[1]), r2 = srcclWait(q[2]);
        if (!r)
            r = r1 ? r1 : r2;
        else
            EXPECT(r1 == r && r2 == r, "later requests: %d %d, expected %d", (int)r1, (int)r2,
                   (int)r);
        if (!r)
            t0 = now_s();
        calls++;
    }
    double waited = now_s() - t0;
    printf("rank %d: %s after %.2f s: %s\n", me, srcclGetErrorString(r), waited,
           srcclGetLastError(comm));
    EXPECT(r == srcclRemoteError || r == srcclTimeout, "result %d", (int)r);
    EXPECT(waited <= timeout + 3, "the error took %.2f s (SRCCL_TIMEOUT %.1f)", waited, timeout);
    srcclRequest_t q2;
    EXPECT(srcclIAllReduce(a, b, cnt, srcclFloat32, srcclSum, comm, &q2) == r,
           "the communicator is not failed");
    EXPECT(srcclCommAbort(comm) == srcclSuccess, "abort");
    free(a), free(b);
    if (!failures)
        printf("rank %d: survivor OK\n", me);
    return failures ? 1 : 0;
}

/* ---- split ---- */
static void check_sum(srcclComm_t c, int n, int64_t want_ranks, const char *what)
{
    int64_t v[2] = {1, me};
    CALL(c, srcclAllReduce(v, v, 2, srcclInt64, srcclSum, c));
    EXPECT(v[0] == n && v[1] == want_ranks,
           "%s: all-reduce gives %lld ranks, sum %lld (want %d, "
           "%lld)",
           what, (long long)v[0], (long long)v[1], n, (long long)want_ranks);
}

static int test_split(void)
{
    srcclComm_t child = NULL, none = (srcclComm_t)1, grand = NULL;
    /* Parity colors; keys reverse the order. */
    int color = me % 2, cn = 0, crank = -1;
    CALL(comm, srcclCommSplit(comm, color, nr - me, &child));
    EXPECT(child != NULL, "no child communicator");
    CALL(child, srcclCommCount(child, &cn));
    CALL(child, srcclCommUserRank(child, &crank));
    int want_n = 0, want_rank = 0;
    int64_t want_sum = 0;
    for (int r = 0; r < nr; r++)
        if (r % 2 == color) {
            want_n++;
            want_sum += r;
            want_rank += r > me; /* larger parent ranks have smaller keys */
        }
    EXPECT(cn == want_n && crank == want_rank, "child rank %d of %d, expected %d of %d", crank, cn,
           want_rank, want_n);
    check_sum(child, want_n, want_sum, "child");
    check_sum(comm, nr, (int64_t)nr * (nr - 1) / 2, "parent after split");
    /* A big all-reduce on the child, the parent in between. */
    const size_t cnt = 300000;
    int32_t *a = xmalloc(cnt * 4);
    fill_i(a, cnt, me, 31);
    CALL(child, srcclAllReduce(a, a, cnt, srcclInt32, srcclSum, child));
    long bad = 0;
    for (size_t i = 0; i < cnt; i++) {
        int32_t s = 0;
        for (int r = color; r < nr; r += 2)
            s += val(r, i, 31);
        bad += a[i] != s;
    }
    EXPECT(bad == 0, "child all-reduce: %ld wrong", bad);
    /* One group over two communicators: a ring on the child and one on
     * the parent (beyond the slots), and an all-reduce on each. */
    {
        const size_t pc = 3 << 18;
        int32_t *s1 = xmalloc(pc * 4), *r1 = xmalloc(pc * 4), *s2 = xmalloc(pc * 4),
                *r2 = xmalloc(pc * 4);
        int64_t v1[2] = {1, me}, v2[2] = {1, me};
        fill_i(s1, pc, me, 51);
        fill_i(s2, pc, me, 52);
        int cnext = (crank + 1) % cn, cprev = (crank + cn - 1) % cn;
        int pnext = (me + 1) % nr, pprev = (me + nr - 1) % nr;
        CALL(comm, srcclGroupStart());
        CALL(child, srcclSend(s1, pc, srcclInt32, cnext, child));
        CALL(comm, srcclSend(s2, pc, srcclInt32, pnext, comm));
        CALL(child, srcclAllReduce(v1, v1, 2, srcclInt64, srcclSum, child));
        CALL(comm, srcclRecv(r2, pc, srcclInt32, pprev, comm));
        CALL(child, srcclRecv(r1, pc, srcclInt32, cprev, child));
        CALL(comm, srcclAllReduce(v2, v2, 2, srcclInt64, srcclSum, comm));
        CALL(comm, srcclGroupEnd());
        int cprev_parent = -1;
        for (int r = color; r < nr; r += 2) /* child rank of r: want_n - 1 - r / 2 */
            if (want_n - 1 - r / 2 == cprev)
                cprev_parent = r;
        check_i(r1, pc, cprev_parent, 51, "two-communicator group, child ring");
        check_i(r2, pc, pprev, 52, "two-communicator group, parent ring");
        EXPECT(v1[0] == want_n && v1[1] == want_sum && v2[0] == nr &&
                   v2[1] == (int64_t)nr * (nr - 1) / 2,
               "two-communicator group all-reduces");
        free(s1), free(r1), free(s2), free(r2);
    }
    /* Nested: split the child into halves by child rank, keys equal (then
     * the child's rank order decides). */
    CALL(child, srcclCommSplit(child, crank < cn / 2 ? 0 : 1, 0, &grand));
    int gn = 0, grank = -1;
    CALL(grand, srcclCommCount(grand, &gn));
    CALL(grand, srcclCommUserRank(grand, &grank));
    int want_gn = crank < cn / 2 ? cn / 2 : cn - cn / 2;
    int want_grank = crank < cn / 2 ? crank : crank - cn / 2;
    EXPECT(gn == want_gn && grank == want_grank, "grandchild rank %d of %d, expected %d of %d",
           grank, gn, want_grank, want_gn);
    int32_t one = 1;
    CALL(grand, srcclAllReduce(&one, &one, 1, srcclInt32, srcclSum, grand));
    EXPECT(one == gn, "grandchild all-reduce %d", one);
    /* NOCOLOR: rank 0 stays out, the others form one communicator. */
    CALL(comm, srcclCommSplit(comm, me == 0 ? SRCCL_SPLIT_NOCOLOR : 5, me, &none));
    if (me == 0) {
        EXPECT(none == NULL, "NOCOLOR gave a communicator");
    } else {
        EXPECT(none != NULL, "no communicator for color 5");
        if (none)
            check_sum(none, nr - 1, (int64_t)nr * (nr - 1) / 2, "without rank 0");
    }
    /* Bad arguments: the parent stays usable. */
    srcclComm_t x = NULL;
    EXPECT(srcclCommSplit(comm, -5, 0, &x) == srcclInvalidArgument, "color -5");
    EXPECT(srcclCommSplit(comm, 0, 0, NULL) == srcclInvalidArgument, "newcomm NULL");
    CALL(comm, srcclGroupStart());
    EXPECT(srcclCommSplit(comm, 0, 0, &x) == srcclInvalidUsage, "split inside a group");
    EXPECT(srcclGroupEnd() == srcclInvalidUsage, "group with a split");
    check_sum(comm, nr, (int64_t)nr * (nr - 1) / 2, "parent at the end");
    check_sum(child, want_n, want_sum, "child at the end");
    CALL(grand, srcclBarrier(grand));
    CALL(grand, srcclCommDestroy(grand));
    if (none) {
        CALL(none, srcclBarrier(none));
        CALL(none, srcclCommDestroy(none));
    }
    CALL(child, srcclBarrier(child));
    CALL(child, srcclCommDestroy(child));
    free(a);
    return finish("split");
}

int main(int argc, char **argv)
{
    static const struct {
        const char *name;
        int (*fn)(void);
    } modes[] = {{"ring", test_ring},     {"alltoall", test_alltoall}, {"colls", test_colls},
                 {"nested", test_nested}, {"argerr", test_argerr},     {"nb", test_nb},
                 {"nbkill", test_nbkill}, {"nbidle", test_nbidle},     {"split", test_split}};
    const char *mode = argc > 1 ? argv[1] : "";
    for (size_t i = 0; i < sizeof(modes) / sizeof(modes[0]); i++) {
        if (!strcmp(mode, modes[i].name)) {
            init();
            return modes[i].fn();
        }
    }
    fprintf(stderr, "usage: group_test ring|alltoall|colls|nested|argerr|nb|nbkill|nbidle|split\n");
    return 2;
}

/* fault_test: a rank fails in the middle of a collective; every other rank
 * must get an error back, never hang, within SRCCL_TIMEOUT (plus slack).
 * Run under srccl-run -k (keep going) with SRCCL_TIMEOUT set, through
 * fault.sh, which counts the survivors' "survivor OK" lines.
 *
 *   fault_test exit   the victim _exit(0)s from a timer while in all-reduces
 *   fault_test kill   the same with SIGKILL
 *   fault_test hang   the victim stops calling (sleeps past the timeout):
 *                     the others must report srcclTimeout
 * The victim is rank nranks / 2. */
#include "srccl.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void die_exit(int sig)
{
    (void)sig;
    _exit(0);
}

static void die_kill(int sig)
{
    (void)sig;
    kill(getpid(), SIGKILL);
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "exit";
    const char *t = getenv("SRCCL_TIMEOUT");
    double timeout = t ? atof(t) : 30;
    srcclComm_t comm;
    srcclResult_t r = srcclCommInitFromEnv(&comm);
    if (r) {
        fprintf(stderr, "init: %s: %s\n", srcclGetErrorString(r), srcclGetLastError(NULL));
        return 1;
    }
    int me, n;
    srcclCommUserRank(comm, &me);
    srcclCommCount(comm, &n);
    int victim = n / 2;
    size_t cnt = 1 << 20; /* 4 MiB of float: several chunks in flight */
    float *buf = calloc(cnt, sizeof(float));
    if (!buf)
        return 1;
    for (int i = 0; i < 3; i++) { /* all alive: fine */
        if ((r = srcclAllReduce(buf, buf, cnt, srcclFloat32, srcclSum, comm))) {
            fprintf(stderr, "rank %d: warm-up failed: %s\n", me, srcclGetLastError(comm));
            return 1;
        }
    }
    if (me == victim) {
        if (!strcmp(mode, "hang")) {
            /* Alive, QPs fine, but never joins the next collective. */
            struct timespec ts = {(time_t)timeout + 1, 0};
            nanosleep(&ts, NULL);
            _exit(0);
        }
        signal(SIGALRM, strcmp(mode, "kill") ? die_exit : die_kill);
        struct itimerval it = {.it_value = {0, 150 * 1000}};
        setitimer(ITIMER_REAL, &it, NULL);
        for (;;)
            srcclAllReduce(buf, buf, cnt, srcclFloat32, srcclSum, comm);
    }
    double last_ok = now_s();
    long calls = 0;
    for (;;) {
        r = srcclAllReduce(buf, buf, cnt, srcclFloat32, srcclSum, comm);
        if (r)
            break;
        last_ok = now_s();
        calls++;
        if (calls > 100000) {
            fprintf(stderr, "rank %d: the victim never failed?\n", me);
            return 1;
        }
    }
    double waited = now_s() - last_ok;
    const char *msg = srcclGetLastError(comm);
    printf("rank %d: after %ld more calls: %s in %.2f s: %s\n", me, calls, srcclGetErrorString(r),
           waited, msg);
    int bad = 0;
    if (r != srcclRemoteError && r != srcclTimeout) {
        fprintf(stderr, "rank %d: unexpected result %d\n", me, (int)r);
        bad = 1;
    }
    if (!strcmp(mode, "hang") && r != srcclTimeout) {
        fprintf(stderr, "rank %d: a hung peer must give srcclTimeout\n", me);
        bad = 1;
    }
    if (waited > timeout + 3) {
        fprintf(stderr, "rank %d: the error took %.2f s (SRCCL_TIMEOUT %.1f)\n", me, waited,
                timeout);
        bad = 1;
    }
    if (!msg[0]) {
        fprintf(stderr, "rank %d: no message from srcclGetLastError\n", me);
        bad = 1;
    }
    /* The communicator stays failed, at once, with the same error. */
    double t0 = now_s();
    srcclResult_t again = srcclBarrier(comm), async = srcclSuccess;
    srcclCommGetAsyncError(comm, &async);
    if (again != r || async != r || now_s() - t0 > 0.5) {
        fprintf(stderr, "rank %d: after the error: barrier %d, async %d, %.2f s\n", me, (int)again,
                (int)async, now_s() - t0);
        bad = 1;
    }
    if (srcclCommAbort(comm) != srcclSuccess)
        bad = 1;
    free(buf);
    if (!bad)
        printf("rank %d: survivor OK\n", me);
    return bad;
}

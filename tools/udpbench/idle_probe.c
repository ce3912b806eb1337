/* idle_probe.c: the CPU an idle softrdma process burns. It opens the first
 * verbs device, allocates a PD, a CQ and an RC QP (moved to INIT), then
 * sleeps and reports the CPU time all of its threads used meanwhile
 * (CLOCK_PROCESS_CPUTIME_ID counts the NIC thread too) and how often they
 * were scheduled (context switches summed over /proc/self/task). An idle
 * NIC should cost nothing: no polling, no periodic timers.
 *
 *   srdma-idle-probe [SECONDS]     (default 5)
 *
 * Output: "name value" lines (idle_cpu_ms, idle_cpu_pct, idle_ctx_switches,
 * idle_threads, idle_seconds). Linked against the project's libibverbs; run
 * with LD_LIBRARY_PATH=build/lib to be sure which one loads.
 */
#include <infiniband/verbs.h>

#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static uint64_t clock_ns(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Sum of voluntary and involuntary context switches of every thread, and
 * the thread count; -1 when /proc is not there. */
static long long ctx_switches(int *threads)
{
    DIR *d = opendir("/proc/self/task");
    if (!d)
        return -1;
    long long sum = 0;
    *threads = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        char path[300];
        snprintf(path, sizeof(path), "/proc/self/task/%s/status", e->d_name);
        FILE *f = fopen(path, "r");
        if (!f)
            continue; /* the thread ended meanwhile */
        (*threads)++;
        char line[256];
        while (fgets(line, sizeof(line), f)) {
            long long v;
            if (sscanf(line, "voluntary_ctxt_switches: %lld", &v) == 1 ||
                sscanf(line, "nonvoluntary_ctxt_switches: %lld", &v) == 1)
                sum += v;
        }
        fclose(f);
    }
    closedir(d);
    return sum;
}

int main(int argc, char **argv)
{
    double seconds = argc > 1 ? atof(argv[1]) : 5;
    if (seconds <= 0 || seconds > 600) {
        fprintf(stderr, "usage: srdma-idle-probe [SECONDS (0..600]]\n");
        return 2;
    }
    int rc = 1, n = 0;
    struct ibv_device **list = ibv_get_device_list(&n);
    if (!list || n < 1) {
        fprintf(stderr, "idle_probe: no verbs device\n");
        return 1;
    }
    struct ibv_context *ctx = ibv_open_device(list[0]);
    struct ibv_pd *pd = ctx ? ibv_alloc_pd(ctx) : NULL;
    struct ibv_cq *cq = pd ? ibv_create_cq(ctx, 64, NULL, NULL, 0) : NULL;
    struct ibv_qp *qp = NULL;
    if (cq) {
        struct ibv_qp_init_attr qa = {
            .send_cq = cq,
            .recv_cq = cq,
            .cap = {.max_send_wr = 64, .max_recv_wr = 64, .max_send_sge = 1, .max_recv_sge = 1},
            .qp_type = IBV_QPT_RC,
        };
        qp = ibv_create_qp(pd, &qa);
    }
    if (!qp) {
        fprintf(stderr, "idle_probe: setting up %s: %s\n", ibv_get_device_name(list[0]),
                strerror(errno));
        goto out;
    }
    struct ibv_qp_attr attr = {
        .qp_state = IBV_QPS_INIT,
        .pkey_index = 0,
        .port_num = 1,
        .qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ,
    };
    if (ibv_modify_qp(qp, &attr,
                      IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS)) {
        fprintf(stderr, "idle_probe: QP to INIT failed\n");
        goto out;
    }

    int threads = 0;
    long long sw0 = ctx_switches(&threads);
    uint64_t cpu0 = clock_ns(CLOCK_PROCESS_CPUTIME_ID);
    uint64_t wall0 = clock_ns(CLOCK_MONOTONIC);
    struct timespec req = {.tv_sec = (time_t)seconds,
                           .tv_nsec = (long)((seconds - (double)(time_t)seconds) * 1e9)};
    while (nanosleep(&req, &req) && errno == EINTR)
        ;
    uint64_t cpu1 = clock_ns(CLOCK_PROCESS_CPUTIME_ID);
    uint64_t wall1 = clock_ns(CLOCK_MONOTONIC);
    long long sw1 = ctx_switches(&threads);

    double cpu_ms = (double)(cpu1 - cpu0) / 1e6;
    double wall_ms = (double)(wall1 - wall0) / 1e6;
    printf("idle_device %s\n", ibv_get_device_name(list[0]));
    printf("idle_seconds %.2f\n", wall_ms / 1e3);
    printf("idle_cpu_ms %.3f\n", cpu_ms);
    printf("idle_cpu_pct %.4f\n", 100.0 * cpu_ms / wall_ms);
    printf("idle_ctx_switches %lld\n", sw0 >= 0 && sw1 >= 0 ? sw1 - sw0 : -1);
    printf("idle_threads %d\n", threads);
    rc = 0;
out:
    if (qp)
        ibv_destroy_qp(qp);
    if (cq)
        ibv_destroy_cq(cq);
    if (pd)
        ibv_dealloc_pd(pd);
    if (ctx)
        ibv_close_device(ctx);
    ibv_free_device_list(list);
    return rc;
}

/* shm_limits.c: what one host's memory system allows a same-host transport,
 * measured between two processes pinned to different CPUs:
 *
 *  - memcpy into a region both processes map (UCX's posix/sysv put: the
 *    initiator stores straight into the peer's memory);
 *  - process_vm_writev / process_vm_readv of the same sizes (CMA: one
 *    kernel copy per call into or out of memory the peer did not share,
 *    such as perftest's malloc'd buffers);
 *  - the one-way latency of a cache line written by one process and
 *    polled by the other (the floor of any ring or mailbox handoff);
 *  - the cost of a 2-byte process_vm_writev (the floor of a one-sided
 *    small write into unshared memory).
 *
 * Bandwidths are medians over REPS timed batches; every batch copies
 * between the same two buffers, as ib_write_bw and ucp_put_bw do (warm
 * caches at 64 KiB, memory bandwidth at 1 MiB and above). */
#define _GNU_SOURCE
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum { REPS = 9, PINGS = 200000 };

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(*v), cmp_double);
    return v[n / 2];
}

static void pin(int cpu)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    (void)sched_setaffinity(0, sizeof(set), &set);
}

/* Shared control block: the child's buffer address and a ping-pong line. */
struct ctl {
    _Alignas(64) _Atomic uint64_t ping;
    _Alignas(64) _Atomic uint64_t pong;
    _Alignas(64) uintptr_t child_buf;
    _Atomic int stop;
};

static unsigned batch_for(size_t size)
{
    size_t n = ((size_t)256 << 20) / size;
    return (unsigned)(n < 16 ? 16 : n);
}

static void bw_shared(size_t size, char *src, char *dst, double *out)
{
    unsigned n = batch_for(size);
    double v[REPS];
    for (int r = 0; r < REPS; r++) {
        double t0 = now_s();
        for (unsigned i = 0; i < n; i++) {
            memcpy(dst, src, size);
            __asm__ volatile("" ::: "memory");
        }
        v[r] = (double)size * n * 8 / (now_s() - t0) / 1e9;
    }
    *out = median(v, REPS);
}

static void bw_cma(size_t size, pid_t peer, uintptr_t remote, char *local, int write, double *out)
{
    unsigned n = batch_for(size);
    double v[REPS];
    struct iovec l = {local, size}, rm = {(void *)remote, size};
    for (int r = 0; r < REPS; r++) {
        double t0 = now_s();
        for (unsigned i = 0; i < n; i++) {
            ssize_t got = write ? process_vm_writev(peer, &l, 1, &rm, 1, 0)
                                : process_vm_readv(peer, &l, 1, &rm, 1, 0);
            if (got != (ssize_t)size) {
                perror("process_vm");
                *out = 0;
                return;
            }
        }
        v[r] = (double)size * n * 8 / (now_s() - t0) / 1e9;
    }
    *out = median(v, REPS);
}

int main(int argc, char **argv)
{
    size_t max = (size_t)16 << 20;
    const size_t sizes[] = {4096, 65536, (size_t)1 << 20, (size_t)16 << 20};
    int cpus = (int)sysconf(_SC_NPROCESSORS_ONLN);
    (void)argc;
    (void)argv;
    struct ctl *c =
        mmap(NULL, sizeof(*c), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    char *shared = mmap(NULL, max, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (c == MAP_FAILED || shared == MAP_FAILED)
        return 1;
    memset(c, 0, sizeof(*c));
    memset(shared, 1, max);
    pid_t child = fork();
    if (child == 0) {
        pin(cpus > 1 ? 1 : 0);
        char *own = malloc(max);
        if (!own)
            _exit(1);
        memset(own, 2, max);
        c->child_buf = (uintptr_t)own;
        atomic_store(&c->pong, 1);
        /* Answer pings until told to stop; then stay for CMA. */
        uint64_t last = 0;
        while (!atomic_load_explicit(&c->stop, memory_order_relaxed)) {
            uint64_t p = atomic_load_explicit(&c->ping, memory_order_acquire);
            if (p != last) {
                last = p;
                atomic_store_explicit(&c->pong, p, memory_order_release);
            }
        }
        pause();
        _exit(0);
    }
    pin(0);
    while (atomic_load(&c->pong) != 1)
        ;
    /* One-way cache-line latency: half a ping-pong round trip. */
    double lat[REPS];
    for (int r = 0; r < REPS; r++) {
        double t0 = now_s();
        for (uint64_t i = 2; i < 2 + PINGS / REPS; i++) {
            atomic_store_explicit(&c->ping, i, memory_order_release);
            while (atomic_load_explicit(&c->pong, memory_order_acquire) != i)
                ;
        }
        lat[r] = (now_s() - t0) / (PINGS / REPS) / 2 * 1e6;
    }
    atomic_store(&c->stop, 1);
    printf("cache-line handoff one-way: %.3f us (median of %d)\n", median(lat, REPS), REPS);

    char *mine = malloc(max);
    if (!mine)
        return 1;
    memset(mine, 3, max);
    /* 2-byte one-sided write cost. */
    {
        struct iovec l = {mine, 2}, rm = {(void *)c->child_buf, 2};
        double v[REPS];
        for (int r = 0; r < REPS; r++) {
            double t0 = now_s();
            for (int i = 0; i < 20000; i++)
                if (process_vm_writev(child, &l, 1, &rm, 1, 0) != 2) {
                    perror("process_vm_writev");
                    break;
                }
            v[r] = (now_s() - t0) / 20000 * 1e6;
        }
        printf("process_vm_writev 2 B: %.3f us per call\n", median(v, REPS));
    }
    printf("%-10s %14s %14s %14s\n", "size", "memcpy Gb/s", "cma_write", "cma_read");
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        size_t s = sizes[i];
        double m, w, rd;
        bw_shared(s, mine, shared, &m);
        bw_cma(s, child, c->child_buf, mine, 1, &w);
        bw_cma(s, child, c->child_buf, mine, 0, &rd);
        printf("%-10zu %14.1f %14.1f %14.1f\n", s, m, w, rd);
    }
    kill(child, 9);
    waitpid(child, NULL, 0);
    return 0;
}

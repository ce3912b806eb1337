/* shm.c: the intra-host path. When every rank of a communicator is on this
 * host (the bootstrap's host id), each rank creates a POSIX shared-memory
 * segment of its own and maps every peer's, as NCCL's SHM transport and
 * Open MPI's vader do; every collective but all-to-all then runs through
 * them instead of the QPs (sends and receives stay on the QPs), and a rank
 * reduces or copies straight from its peers' mapped buffers (one pass over
 * each input, no per-hop staging slot).
 *
 * Segment of a rank (all ranks have the same geometry, checked):
 *   header     magic, pid, geometry; the step counter on a cache line of its
 *              own, the count of peers asleep on it on another, the
 *              identity of the call each of the last 4 steps belongs to
 *   small[2]   small_len each: one-phase all-reduces alternate between them
 *   in         loop_len: this rank's input of one loop of a large all-reduce
 *              (or of the other collectives)
 *   res        seg_len: the reduced segment this rank owns in that loop
 *
 * Synchronization is one counter per rank, "step": every rank runs the same
 * collectives in the same order, so every rank counts the same steps. A
 * rank writes its buffers, then stores its step with release semantics;
 * a reader loads a peer's step with acquire semantics before it reads that
 * peer's buffers (C11 7.17.3: the release store synchronizes with the
 * acquire load that sees it). Buffer reuse needs no step of its own:
 *   - small[p] is rewritten two small all-reduces later; in between the
 *     writer waited for every peer to reach the step of the next small
 *     all-reduce, which a peer stores only after its reads of small[p];
 *   - in is rewritten in the next loop; the writer has since waited for
 *     every peer's "reduced" step (stored after the peer read every in);
 *   - res is rewritten after every peer's next "input ready" step, which a
 *     peer stores only after it copied every res out;
 *   - the other collectives end each loop with a wait for every peer's
 *     "read" step, so nobody leaves a loop while a peer still reads in;
 *   any step a peer stores comes after all its reads of earlier calls.
 * The first wait of every call also compares the call's identity
 * (collective, byte count, root, type, op) with each peer's: ranks that
 * disagree get srcclInvalidUsage instead of misreading each other.
 * Waits poll, spin for a while (yielding the CPU where the awaited peer
 * may need it: more ranks than CPUs, or the peer on our CPU; see
 * sc_shm_connect), then sleep on a futex on the peer's step word, which
 * the peer wakes only when someone sleeps there; every wait has the
 * SRCCL_TIMEOUT deadline, and a peer whose process is gone is reported as
 * such within 50 ms of the sleep that notices it. */
#include "sc_int.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#ifdef __linux__
#include <linux/futex.h>
#include <sys/syscall.h>
#endif

#define SC_SHM_MAGIC 0x73724d31u /* "srM1" */
#define SC_SHM_HDR   4096u
#define SC_LIVE_NS   50000000ull /* how often a sleeping wait checks the peer's process */

struct sc_shm_hdr {
    _Atomic uint32_t magic; /* stored last, with release */
    uint32_t rank, nranks, pid;
    uint64_t small_len, loop_len, seg_len, total_len;
    uint8_t pad0[64 - 48];
    _Atomic uint32_t step; /* own cache line: peers poll it */
    uint8_t pad1[64 - 4];
    _Atomic uint32_t sleepers; /* peers in FUTEX_WAIT on step */
    uint8_t pad2[64 - 4];
    /* What step t belongs to (tag[t % 4]: collective, size, root, type,
     * op), written before the step: a peer reads it once it sees step t,
     * when no rank can be past step t + 1. */
    uint64_t tag[4];
    /* The CPU the rank last waited on (sched_getcpu at the start of each
     * wait): a waiter that finds the rank it waits for on its own CPU
     * gives that CPU up rather than spin (sc_shm wait). */
    _Atomic int32_t cpu;
};

struct sc_shm {
    uint8_t **base;   /* nranks mappings; base[rank] is ours */
    pid_t *pid;       /* each rank's process */
    bool check_pids;  /* the pids are in our namespace (kill(pid, 0) answers) */
    char name[64];    /* ours, until unlinked */
    size_t total_len; /* every segment's length */
    size_t small_len, loop_len, seg_len;
    uint32_t step;       /* steps we have stored */
    uint64_t small_ops;  /* one-phase all-reduces run (their buffer parity) */
    uint64_t spin_ns;    /* poll this long before sleeping */
    uint64_t calls;      /* collectives run here, for SRCCL_DEBUG */
    uint64_t sleeps;     /* waits that slept on a futex */
    uint64_t naps;       /* ... of which ran to their timeout */
    bool one_cpu;        /* this process may run on one CPU only (bound) */
    bool blocked;        /* a queued collective waits on a peer's step */
    int wait_peer;       /* ... this one */
    uint32_t wait_value; /* ... whose step was this */
};

static struct sc_shm_hdr *hdr(const struct sc_shm *s, int r)
{
    return (struct sc_shm_hdr *)(void *)s->base[r];
}

static uint8_t *small_buf(const struct sc_shm *s, int r, uint64_t parity)
{
    return s->base[r] + SC_SHM_HDR + (size_t)(parity & 1) * s->small_len;
}

static uint8_t *in_buf(const struct sc_shm *s, int r)
{
    return s->base[r] + SC_SHM_HDR + 2 * s->small_len;
}

static uint8_t *res_buf(const struct sc_shm *s, int r)
{
    return in_buf(s, r) + s->loop_len;
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ volatile("yield");
#endif
}

/* Step counters wrap at 2^32: compare by difference. */
static bool reached(uint32_t v, uint32_t target)
{
    return (int32_t)(v - target) >= 0;
}

static void futex_wake(_Atomic uint32_t *w)
{
#ifdef __linux__
    syscall(SYS_futex, (uint32_t *)w, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
#else
    (void)w;
#endif
}

/* Returns true if the sleep ran to its timeout. */
static bool futex_sleep(_Atomic uint32_t *w, uint32_t v, uint64_t ns)
{
    struct timespec ts = {(time_t)(ns / 1000000000ull), (long)(ns % 1000000000ull)};
#ifdef __linux__
    return syscall(SYS_futex, (uint32_t *)w, FUTEX_WAIT, v, &ts, NULL, 0) != 0 &&
           errno == ETIMEDOUT;
#else
    (void)w;
    (void)v;
    ts = (struct timespec){0, 50000};
    nanosleep(&ts, NULL);
    return false;
#endif
}

/* Stores our next step (release: our buffer writes before it), then wakes
 * peers asleep on it. The sequentially consistent store and load pair
 * with the sleeper's increment and re-check (sc_shm wait): either it sees
 * the new step or we see it counted. */
static void publish(struct sc_shm *s, int me, uint64_t tag)
{
    struct sc_shm_hdr *h = hdr(s, me);
    h->tag[(s->step + 1) & 3] = tag;
    s->step++;
    atomic_store_explicit(&h->step, s->step, memory_order_seq_cst);
    if (atomic_load_explicit(&h->sleepers, memory_order_seq_cst))
        futex_wake(&h->step);
}

static bool peer_gone(const struct sc_shm *s, int r)
{
    return s->check_pids && kill(s->pid[r], 0) != 0 && errno == ESRCH;
}

static void seg_name(char *buf, size_t len, uint32_t pid, uint32_t tag)
{
    snprintf(buf, len, "/srccl-%u-%08x", pid, tag);
}

srcclResult_t sc_shm_open(srcclComm_t c, struct sc_wire_rank *mine)
{
    mine->pid = (uint32_t)getpid();
    mine->shm_tag = 0;
    if (!c->cfg.shm || c->nranks < 2 || c->cfg.algo == SC_ALGO_RING || c->cfg.algo == SC_ALGO_RD)
        return srcclSuccess;
    struct sc_shm *s = calloc(1, sizeof(*s));
    if (!s || !(s->base = calloc((size_t)c->nranks, sizeof(*s->base))) ||
        !(s->pid = calloc((size_t)c->nranks, sizeof(*s->pid)))) {
        if (s)
            free(s->base);
        free(s);
        return sc_fail(c, srcclSystemError, "out of memory");
    }
    c->shm = s;
    int n = c->nranks;
    /* One phase reads n inputs of S bytes per rank with one wait, two
     * phases read about (2 + (n-1)/n) S with two waits per loop: at 2 ranks
     * one phase reads less at any size, from 3 ranks it wins only while
     * the second wait costs more than the extra reads. Measured crossovers
     * (medians of interleaved runs, docs/SRCCL.md "One host"): one phase
     * ahead up to 8 KiB at 3 ranks, up to 32 KiB at 4; beyond 4 ranks
     * unmeasured, so 8 KiB. */
    s->small_len = c->cfg.shm_small_len != SIZE_MAX ? c->cfg.shm_small_len
                   : n == 2                         ? (size_t)1 << 20
                   : n == 4                         ? (size_t)32 << 10
                                                    : (size_t)8 << 10;
    /* Every segment a multiple of 64 bytes: element sizes divide it and
     * segments start on cache lines. */
    s->seg_len = (c->cfg.shm_loop_len / (size_t)n) & ~(size_t)63;
    if (s->seg_len < 64)
        s->seg_len = 64;
    s->loop_len = s->seg_len * (size_t)n;
    s->total_len = SC_SHM_HDR + 2 * s->small_len + s->loop_len + s->seg_len;
    uint32_t tag = (uint32_t)(sc_now_ns() ^ ((uint64_t)(uintptr_t)c >> 4)) | 1u;
    static _Atomic uint32_t serial;
    tag ^= atomic_fetch_add(&serial, 1u) << 24;
    seg_name(s->name, sizeof(s->name), mine->pid, tag);
    int fd = shm_open(s->name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0 || ftruncate(fd, (off_t)s->total_len)) {
        /* Not fatal: the record says "no segment", every rank then keeps
         * to the QPs. */
        sc_debug(c, "shm_open/ftruncate(%s, %zu bytes): %s: no shared-memory path", s->name,
                 s->total_len, strerror(errno));
        if (fd >= 0) {
            close(fd);
            shm_unlink(s->name);
        }
        s->name[0] = 0;
        sc_shm_close(c);
        return srcclSuccess;
    }
    void *m = mmap(NULL, s->total_len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (m == MAP_FAILED) {
        sc_debug(c, "mmap(%s): %s: no shared-memory path", s->name, strerror(errno));
        sc_shm_close(c);
        return srcclSuccess;
    }
    s->base[c->rank] = m;
    struct sc_shm_hdr *h = m;
    h->rank = (uint32_t)c->rank;
    h->nranks = (uint32_t)n;
    h->pid = mine->pid;
    h->small_len = s->small_len;
    h->loop_len = s->loop_len;
    h->seg_len = s->seg_len;
    h->total_len = s->total_len;
    atomic_store(&h->step, 0);
    atomic_store(&h->sleepers, 0);
    atomic_store(&h->cpu, -1);
    atomic_store_explicit(&h->magic, SC_SHM_MAGIC, memory_order_release);
    mine->shm_tag = tag;
    mine->shm_loop_len = (uint32_t)s->loop_len;
    mine->shm_small_len = (uint32_t)s->small_len;
    return srcclSuccess;
}

srcclResult_t sc_shm_connect(srcclComm_t c, const uint8_t *all, size_t rec_len)
{
    struct sc_shm *s = c->shm;
    bool usable = s && c->local_ranks == c->nranks;
    for (int i = 0; i < c->nranks && usable; i++)
        usable = ((const struct sc_wire_rank *)(const void *)(all + (size_t)i * rec_len))->shm_tag;
    if (!usable) { /* every rank sees the same records: all decide alike */
        if (s)
            sc_debug(c, "ranks on several hosts or without segments: no shared-memory path");
        sc_shm_close(c);
        return srcclSuccess;
    }
    /* Every rank sees the same records, so every rank refuses alike,
     * before mapping anything. */
    for (int i = 0; i < c->nranks; i++) {
        const struct sc_wire_rank *w = (const void *)(all + (size_t)i * rec_len);
        if (w->shm_loop_len != s->loop_len || w->shm_small_len != s->small_len)
            return sc_fail(c, srcclInvalidUsage,
                           "rank %d's shared memory differs (SRCCL_SHM_BYTES / SRCCL_SHM_SMALL "
                           "must agree): %zu/%zu bytes here, %u/%u there",
                           i, s->loop_len, s->small_len, w->shm_loop_len, w->shm_small_len);
    }
    s->check_pids = true;
    for (int i = 0; i < c->nranks; i++) {
        const struct sc_wire_rank *w = (const void *)(all + (size_t)i * rec_len);
        s->pid[i] = (pid_t)w->pid;
        if (i == c->rank)
            continue;
        if (kill(s->pid[i], 0) != 0 && errno == ESRCH)
            s->check_pids = false; /* another PID namespace: the timeout alone tells */
        char name[64];
        seg_name(name, sizeof(name), w->pid, w->shm_tag);
        int fd = shm_open(name, O_RDWR | O_CLOEXEC, 0);
        struct stat st;
        if (fd < 0 || fstat(fd, &st) || (size_t)st.st_size != s->total_len) {
            int e = errno;
            if (fd >= 0)
                close(fd);
            return sc_fail(c, srcclSystemError,
                           "rank %d's shared memory %s: %s (a different /dev/shm or "
                           "configuration? SRCCL_SHM=0 keeps to the QPs)",
                           i, name, fd < 0 ? strerror(e) : "wrong size");
        }
        void *m = mmap(NULL, s->total_len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        close(fd);
        if (m == MAP_FAILED)
            return sc_fail(c, srcclSystemError, "mmap(rank %d's %s): %s", i, name, strerror(errno));
        s->base[i] = m;
        const struct sc_shm_hdr *h = m;
        if (atomic_load_explicit(&h->magic, memory_order_acquire) != SC_SHM_MAGIC ||
            h->rank != (uint32_t)i || h->nranks != (uint32_t)c->nranks ||
            h->small_len != s->small_len || h->loop_len != s->loop_len || h->seg_len != s->seg_len)
            return sc_fail(c, srcclInvalidUsage,
                           "rank %d's shared memory differs (SRCCL_SHM_BYTES / SRCCL_SHM_SMALL "
                           "must agree): %llu/%llu bytes here, %llu/%llu there",
                           i, (unsigned long long)s->loop_len, (unsigned long long)s->small_len,
                           (unsigned long long)h->loop_len, (unsigned long long)h->small_len);
    }
    /* Spin before sleeping: a sleeper answers only after its wake-up (tens
     * of us under load); a spin shorter than that makes the peer's next
     * wait outlast it too, and two ranks can settle into sleeping on every
     * call (measured: 65 us per 8 B all-reduce with a 50 us spin at 2
     * ranks on a loaded machine, 0.5 us otherwise). So 200 us, and 1 ms
     * with more ranks than CPUs (a turn of the CPUs among the waiters is
     * cheaper than a wake-up), as the QP path (transport.c).
     * The spin yields the CPU between polls where the awaited peer may be
     * waiting for that CPU: always with more ranks than CPUs; at once when
     * the peer last stored our CPU as its own; and, in an unbound
     * process, after the first 5 us (the scheduler's wake-affine placement
     * puts two ranks that wake each other on one CPU, where a spin that
     * never yields measured 515 us per 8 B all-reduce against 8.4 us).
     * A process bound to one CPU (srccl-run's default, mpirun's) does not
     * yield to a peer on another CPU: that would only hand its CPU to
     * other processes for a time slice (256 KiB all-reduce at 2 ranks,
     * load average 6: 68 us median without, 415 us with that yield). */
#ifdef __linux__
    cpu_set_t set;
    s->one_cpu = !sched_getaffinity(0, sizeof(set), &set) && CPU_COUNT(&set) == 1;
#endif
    s->spin_ns = c->cfg.shm_spin_ns != UINT64_MAX ? c->cfg.shm_spin_ns
                 : c->spin_yield                  ? 1000000ull
                                                  : 200000ull;
    sc_debug(c,
             "shared-memory path: %zu bytes per rank (%zu per loop, %zu small x 2), spin %llu "
             "us%s%s",
             s->total_len, s->loop_len, s->small_len, (unsigned long long)(s->spin_ns / 1000),
             c->spin_yield ? ", yielding" : "", s->one_cpu ? ", bound to one CPU" : "");
    return srcclSuccess;
}

void sc_shm_ready(srcclComm_t c)
{
    /* Every peer has mapped it (the caller's barrier): the name can go, the
     * memory stays until the last munmap. */
    if (c->shm && c->shm->name[0]) {
        shm_unlink(c->shm->name);
        c->shm->name[0] = 0;
    }
}

void sc_shm_close(srcclComm_t c)
{
    struct sc_shm *s = c->shm;
    if (!s)
        return;
    sc_shm_ready(c);
    for (int i = 0; s->base && i < c->nranks; i++)
        if (s->base[i])
            munmap(s->base[i], s->total_len);
    if (s->calls)
        sc_debug(c, "shared-memory path: %llu collectives, %llu futex sleeps (%llu to the timeout)",
                 (unsigned long long)s->calls, (unsigned long long)s->sleeps,
                 (unsigned long long)s->naps);
    free(s->base);
    free(s->pid);
    free(s);
    c->shm = NULL;
}

bool sc_shm_on(srcclComm_t c)
{
    return c->shm != NULL;
}

bool sc_shm_blocked(srcclComm_t c)
{
    return c->shm && c->shm->blocked;
}

void sc_shm_idle(srcclComm_t c, uint64_t until_ns)
{
    struct sc_shm *s = c->shm;
    uint64_t now = sc_now_ns();
    if (!s || !s->blocked || now >= until_ns)
        return;
    struct sc_shm_hdr *h = hdr(s, s->wait_peer);
    atomic_fetch_add_explicit(&h->sleepers, 1, memory_order_seq_cst);
    if (atomic_load_explicit(&h->step, memory_order_seq_cst) == s->wait_value)
        futex_sleep(&h->step, s->wait_value, SC_MIN(until_ns - now, SC_LIVE_NS));
    atomic_fetch_sub_explicit(&h->sleepers, 1, memory_order_seq_cst);
}

/* Waits until every peer has stored step target. */
static srcclResult_t check_tags(srcclComm_t c, uint32_t target, uint64_t tag)
{
    struct sc_shm *s = c->shm;
    for (int k = 0; k < c->nranks; k++) {
        if (k == c->rank || hdr(s, k)->tag[target & 3] == tag)
            continue;
        srcclResult_t r =
            sc_fail(c, srcclInvalidUsage,
                    "call #%llu: rank %d is in another collective or count (shared "
                    "memory, tag %016llx against our %016llx): the ranks disagree "
                    "on the collective or its count",
                    (unsigned long long)c->ops, k, (unsigned long long)hdr(s, k)->tag[target & 3],
                    (unsigned long long)tag);
        c->async_err = r; /* the steps are out of step: the communicator is done */
        return r;
    }
    return srcclSuccess;
}

/* Waits until every peer has stored step target; tag != 0: and checks
 * that every peer's step target belongs to the same call as ours. */
static srcclResult_t wait_all(srcclComm_t c, uint32_t target, const char *what, uint64_t tag)
{
    struct sc_shm *s = c->shm;
    int n = c->nranks, me = c->rank, k = (me + 1) % n;
    uint64_t deadline = 0, start = 0, spin_end = 0, live_at = 0;
    bool flushed = false;
    int cpu = -1;
    for (;;) {
        uint32_t v = 0;
        int left = n - 1;
        /* Resume at the peer that was late last time. */
        while (left > 0 &&
               reached(v = atomic_load_explicit(&hdr(s, k)->step, memory_order_acquire), target)) {
            k = (k + 1) % n;
            if (k == me)
                k = (k + 1) % n;
            left--;
        }
        if (left == 0)
            return tag ? check_tags(c, target, tag) : srcclSuccess;
        uint64_t now = sc_now_ns();
        if (!deadline) {
            cpu = sched_getcpu();
            atomic_store_explicit(&hdr(s, me)->cpu, cpu, memory_order_relaxed);
            start = now;
            deadline = now + c->cfg.timeout_ns;
            spin_end = now + s->spin_ns;
            live_at = now + SC_LIVE_NS;
        }
        if (now >= live_at) {
            live_at = now + SC_LIVE_NS;
            if (peer_gone(s, k))
                return sc_fail(c, srcclRemoteError,
                               "call #%llu: rank %d (pid %d) is gone (exited or killed), found "
                               "while waiting %s rank %d",
                               (unsigned long long)c->ops, k, (int)s->pid[k], what, k);
        }
        if (c->in_co) { /* queued: yield to srcclTest / srcclWait */
            s->blocked = true;
            s->wait_peer = k;
            s->wait_value = v;
            srcclResult_t r = sc_co_block(c, &deadline, what, k);
            s->blocked = false;
            if (r)
                return r;
            continue;
        }
        if (now >= deadline)
            return sc_fail(c, srcclTimeout,
                           "call #%llu: waited %.1f s (SRCCL_TIMEOUT) %s rank %d: that rank is "
                           "dead, hung, or not calling the same collective",
                           (unsigned long long)c->ops, (double)c->cfg.timeout_ns / 1e9, what, k);
        if (now < spin_end) {
            int at = sched_getcpu(); /* the scheduler may have moved us */
            if (at != cpu)
                atomic_store_explicit(&hdr(s, me)->cpu, cpu = at, memory_order_relaxed);
            /* A peer last seen waiting on our CPU is likely queued behind
             * us there (wake-affine placement pulls a woken rank onto its
             * waker's CPU): spinning would only delay it. */
            if (c->spin_yield || (!s->one_cpu && now - start >= 5000) ||
                (cpu >= 0 && atomic_load_explicit(&hdr(s, k)->cpu, memory_order_relaxed) == cpu))
                sched_yield();
            else
                cpu_relax();
            continue;
        }
        if (!flushed) {
            /* About to sleep: a sender of an earlier point-to-point call may
             * wait on credits we owe it (transport.c). */
            int prog;
            srcclResult_t r = sc_tp_progress(c, &prog);
            if (!r)
                r = sc_tp_flush(c, false);
            if (r)
                return r;
            flushed = true;
        }
        struct sc_shm_hdr *h = hdr(s, k);
        atomic_fetch_add_explicit(&h->sleepers, 1, memory_order_seq_cst);
        if (atomic_load_explicit(&h->step, memory_order_seq_cst) == v) {
            s->sleeps++;
            s->naps += futex_sleep(&h->step, v, SC_MIN(deadline - now, live_at - now));
            /* Woken, we may be on the waker's CPU now (wake-affine). */
            atomic_store_explicit(&hdr(s, me)->cpu, cpu = sched_getcpu(), memory_order_relaxed);
        }
        atomic_fetch_sub_explicit(&h->sleepers, 1, memory_order_seq_cst);
    }
}

/* Reduces the n ranks' copies at offset off of buffer kind into dst, in
 * rank order: every rank computing an element gets the same bits. */
static void reduce_all(srcclComm_t c, uint8_t *(*buf)(const struct sc_shm *, int), size_t off,
                       void *dst, size_t cnt, sc_reduce_fn fn)
{
    struct sc_shm *s = c->shm;
    fn(dst, buf(s, 0) + off, buf(s, 1) + off, cnt);
    for (int k = 2; k < c->nranks; k++)
        fn(dst, dst, buf(s, k) + off, cnt);
}

static srcclResult_t shm_allreduce(srcclComm_t c, const void *sendbuff, void *recvbuff, size_t cnt,
                                   srcclDataType_t dt, srcclRedOp_t op, uint64_t tag)
{
    struct sc_shm *s = c->shm;
    int n = c->nranks, me = c->rank;
    size_t es = sc_type_size(dt), bytes = cnt * es;
    sc_reduce_fn fn = c->kern.reduce[op][dt];
    sc_scale_fn div = op == srcclAvg ? c->kern.div[dt] : NULL;
    const uint8_t *in = sendbuff;
    uint8_t *out = recvbuff;
    if (bytes <= s->small_len) {
        /* One phase: every rank publishes its input and reduces all of them
         * (n x bytes read, one wait). */
        uint64_t parity = s->small_ops++;
        memcpy(small_buf(s, me, parity), in, bytes);
        publish(s, me, tag);
        srcclResult_t r = wait_all(c, s->step, "for the input of", tag);
        if (r)
            return r;
        fn(out, small_buf(s, 0, parity), small_buf(s, 1, parity), cnt);
        for (int k = 2; k < n; k++)
            fn(out, out, small_buf(s, k, parity), cnt);
        if (div)
            div(out, cnt, n);
        return srcclSuccess;
    }
    /* Loops of n segments: publish the loop's input, reduce the segment we
     * own from every rank's input into res, publish, then copy every
     * other rank's res out (a reduce-scatter and an all-gather, each
     * rank's reduction reading the peers' buffers in place). */
    size_t seg_cnt = s->seg_len / es;
    for (size_t base = 0; base < cnt; base += (size_t)n * seg_cnt) {
        size_t real = SC_MIN(seg_cnt, (cnt - base + (size_t)n - 1) / (size_t)n);
        size_t loop = SC_MIN((size_t)n * real, cnt - base);
        memcpy(in_buf(s, me), in + base * es, loop * es);
        publish(s, me, tag);
        srcclResult_t r = wait_all(c, s->step, "for the input of", tag);
        tag = 0; /* checked once per call */
        if (r)
            return r;
        size_t off = (size_t)me * real;
        size_t mine = off < loop ? SC_MIN(real, loop - off) : 0;
        if (mine) {
            reduce_all(c, in_buf, off * es, res_buf(s, me), mine, fn);
            if (div)
                div(res_buf(s, me), mine, n);
        }
        publish(s, me, 0);
        if ((r = wait_all(c, s->step, "for the reduced segment of", 0)))
            return r;
        for (int j = 0; j < n; j++) {
            size_t o = (size_t)j * real;
            if (o < loop)
                memcpy(out + (base + o) * es, res_buf(s, j), SC_MIN(real, loop - o) * es);
        }
    }
    return srcclSuccess;
}

/* The other collectives, in loops of two waits: every rank's input is in
 * its buffer (and the call checked) before anyone reads, every rank has
 * read before anyone writes again. Each rank reads its peers' buffers in
 * place: a broadcast copies from the root's, an all-gather from every
 * rank's, a reduce or reduce-scatter reduces straight from every rank's
 * into the output, in rank order. */
static srcclResult_t two_waits(srcclComm_t c, uint64_t *tag, const char *what)
{
    struct sc_shm *s = c->shm;
    publish(s, c->rank, *tag);
    srcclResult_t r = wait_all(c, s->step, what, *tag);
    *tag = 0;
    return r;
}

static srcclResult_t read_done(srcclComm_t c)
{
    publish(c->shm, c->rank, 0);
    return wait_all(c, c->shm->step, "for the reads of", 0);
}

static srcclResult_t shm_broadcast(srcclComm_t c, const uint8_t *in, uint8_t *out, size_t bytes,
                                   int root, uint64_t tag)
{
    struct sc_shm *s = c->shm;
    int me = c->rank;
    if (me == root && in != out)
        memmove(out, in, bytes);
    for (size_t off = 0; off < bytes; off += s->loop_len) {
        size_t len = SC_MIN(s->loop_len, bytes - off);
        if (me == root)
            memcpy(in_buf(s, me), out + off, len);
        srcclResult_t r = two_waits(c, &tag, "for the data of");
        if (r)
            return r;
        if (me != root)
            memcpy(out + off, in_buf(s, root), len);
        if ((r = read_done(c)))
            return r;
    }
    return srcclSuccess;
}

static srcclResult_t shm_allgather(srcclComm_t c, const uint8_t *in, uint8_t *out, size_t bytes,
                                   uint64_t tag)
{
    struct sc_shm *s = c->shm;
    int n = c->nranks, me = c->rank;
    uint8_t *mine = out + (size_t)me * bytes;
    if (in != mine) /* memmove: sendbuff may overlap recvbuff */
        memmove(mine, in, bytes);
    for (size_t off = 0; off < bytes; off += s->loop_len) {
        size_t len = SC_MIN(s->loop_len, bytes - off);
        memcpy(in_buf(s, me), mine + off, len);
        srcclResult_t r = two_waits(c, &tag, "for the block of");
        if (r)
            return r;
        for (int j = 0; j < n; j++)
            if (j != me)
                memcpy(out + (size_t)j * bytes + off, in_buf(s, j), len);
        if ((r = read_done(c)))
            return r;
    }
    return srcclSuccess;
}

/* reduce (root >= 0: only the root reduces, all of it) and reduce-scatter
 * (root < 0: each rank reduces its block of cnt elements). */
static srcclResult_t shm_reduce(srcclComm_t c, const uint8_t *in, uint8_t *out, size_t cnt,
                                srcclDataType_t dt, srcclRedOp_t op, int root, uint64_t tag)
{
    struct sc_shm *s = c->shm;
    int n = c->nranks, me = c->rank;
    size_t es = sc_type_size(dt);
    sc_reduce_fn fn = c->kern.reduce[op][dt];
    sc_scale_fn div = op == srcclAvg ? c->kern.div[dt] : NULL;
    /* Reduce: loops of loop_len; reduce-scatter: of seg_len of each block,
     * block j of the loop at j * seg_len. */
    size_t step = (root >= 0 ? s->loop_len : s->seg_len) / es;
    for (size_t off = 0; off < cnt; off += step) {
        size_t m = SC_MIN(step, cnt - off);
        if (root >= 0)
            memcpy(in_buf(s, me), in + off * es, m * es);
        else
            for (int j = 0; j < n; j++)
                memcpy(in_buf(s, me) + (size_t)j * s->seg_len, in + ((size_t)j * cnt + off) * es,
                       m * es);
        srcclResult_t r = two_waits(c, &tag, "for the input of");
        if (r)
            return r;
        if (root < 0 || me == root) {
            size_t at = root >= 0 ? 0 : (size_t)me * s->seg_len;
            uint8_t *dst = out + off * es;
            fn(dst, in_buf(s, 0) + at, in_buf(s, 1) + at, m);
            for (int k = 2; k < n; k++)
                fn(dst, dst, in_buf(s, k) + at, m);
            if (div)
                div(dst, m, n);
        }
        if ((r = read_done(c)))
            return r;
    }
    return srcclSuccess;
}

srcclResult_t sc_shm_run(srcclComm_t c, const struct sc_op *o, bool *took)
{
    struct sc_shm *s = c->shm;
    size_t es = sc_type_size(o->dt), bytes = o->cnt * es, n = (size_t)c->nranks;
    const uint8_t *in = o->send;
    uint8_t *out = o->recv;
    *took = true;
    /* The call's identity, checked against every peer's at its first wait. */
    uint64_t tag = ((uint64_t)o->kind + 1) << 56 ^ (uint64_t)(o->dt & 0xf) << 52 ^
                   (uint64_t)(o->op & 0xf) << 48 ^ (uint64_t)(uint32_t)(o->root & 0xffff) << 32 ^
                   (uint64_t)(bytes & 0xffffffffu) ^ (uint64_t)(bytes >> 32) << 40;
    switch (o->kind) {
    case SC_OP_ALLREDUCE:
        break;
    case SC_OP_BARRIER:
    case SC_OP_BROADCAST:
    case SC_OP_REDUCE:
    case SC_OP_ALLGATHER:
        break;
    case SC_OP_REDUCE_SCATTER:
        break;
    default:
        *took = false;
        return srcclSuccess;
    }
    if (c->cfg.debug >= 2)
        sc_debug(c, "call #%llu %s: %zu bytes, shm", (unsigned long long)c->ops, o->fn,
                 o->kind == SC_OP_ALLGATHER || o->kind == SC_OP_REDUCE_SCATTER ? bytes * n : bytes);
    s->calls++;
    switch (o->kind) {
    case SC_OP_ALLREDUCE:
        return shm_allreduce(c, in, out, o->cnt, o->dt, o->op, tag);
    case SC_OP_BARRIER:
        publish(s, c->rank, tag);
        return wait_all(c, s->step, "at the barrier for", tag);
    case SC_OP_BROADCAST:
        return shm_broadcast(c, in, out, bytes, o->root, tag);
    case SC_OP_REDUCE:
        return shm_reduce(c, in, out, o->cnt, o->dt, o->op, o->root, tag);
    case SC_OP_ALLGATHER:
        return shm_allgather(c, in, out, bytes, tag);
    default: { /* SC_OP_REDUCE_SCATTER */
        /* Output overlapping the input anywhere but on our own block would
         * overwrite blocks of later loops: reduce into scratch (a local
         * choice: the protocol is the same on every rank). */
        uint8_t *dst = out;
        if (out < in + bytes * n && in < out + bytes && out != in + (size_t)c->rank * bytes &&
            !(dst = sc_scratch(c, bytes)))
            return sc_fail(c, srcclSystemError, "out of memory (%zu bytes of scratch)", bytes);
        srcclResult_t r = shm_reduce(c, in, dst, o->cnt, o->dt, o->op, -1, tag);
        if (!r && dst != out)
            memcpy(out, dst, bytes);
        return r;
    }
    }
}

/* config.c: the environment, read once per communicator into struct
 * sc_config (nothing else in srccl calls getenv). */
#include "sc_int.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

enum {
    SC_DEFAULT_PORT = 29517,
    SC_TORCH_DEFAULT_PORT = 29500,
    /* The shared-memory path's geometry, chosen by measurement
     * (docs/SRCCL.md, "How it works", "One host"). */
    SC_SHM_LOOP_DEFAULT = 1 << 20,
};

uint64_t sc_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

#define bad(err, err_len, ...) sc_msg(err, err_len, srcclInvalidArgument, __VA_ARGS__)

/* Integer variable within [lo, hi]; absent or empty keeps *out. */
static srcclResult_t env_int(const char *name, long long lo, long long hi, long long *out,
                             char *err, size_t err_len)
{
    const char *v = getenv(name);
    if (!v || !*v)
        return srcclSuccess;
    char *end;
    errno = 0;
    long long x = strtoll(v, &end, 0);
    if (errno || *end || x < lo || x > hi)
        return bad(err, err_len, "%s=\"%s\": expected an integer in [%lld, %lld]", name, v, lo, hi);
    *out = x;
    return srcclSuccess;
}

/* Byte count with an optional K/M/G suffix (powers of two). */
static srcclResult_t env_bytes(const char *name, size_t lo, size_t hi, size_t *out, char *err,
                               size_t err_len)
{
    const char *v = getenv(name);
    if (!v || !*v)
        return srcclSuccess;
    char *end;
    errno = 0;
    unsigned long long x = strtoull(v, &end, 0);
    unsigned shift = 0;
    if (*end == 'k' || *end == 'K')
        shift = 10, end++;
    else if (*end == 'm' || *end == 'M')
        shift = 20, end++;
    else if (*end == 'g' || *end == 'G')
        shift = 30, end++;
    if (errno || *end || v[0] == '-' || x > (hi >> shift) || (x << shift) < lo)
        return bad(err, err_len, "%s=\"%s\": expected a byte count in [%zu, %zu] (K/M/G allowed)",
                   name, v, lo, hi);
    *out = (size_t)(x << shift);
    return srcclSuccess;
}

srcclResult_t sc_config_load(struct sc_config *cfg, char *err, size_t err_len)
{
    srcclResult_t r;
    long long x;
    memset(cfg, 0, sizeof(*cfg));
    cfg->rank = cfg->nranks = -1;

    const char *t = getenv("SRCCL_TIMEOUT");
    double timeout_s = 30;
    if (t && *t) {
        char *end;
        timeout_s = strtod(t, &end);
        if (*end || !(timeout_s > 0 && timeout_s <= 86400))
            return bad(err, err_len, "SRCCL_TIMEOUT=\"%s\": expected seconds in (0, 86400]", t);
    }
    cfg->timeout_ns = (uint64_t)(timeout_s * 1e9);

    const char *a = getenv("SRCCL_ALGO");
    cfg->algo = SC_ALGO_AUTO;
    if (a && *a) {
        if (!strcasecmp(a, "ring"))
            cfg->algo = SC_ALGO_RING;
        else if (!strcasecmp(a, "rd") || !strcasecmp(a, "tree"))
            cfg->algo = SC_ALGO_RD;
        else if (!strcasecmp(a, "shm"))
            cfg->algo = SC_ALGO_SHM;
        else if (strcasecmp(a, "auto"))
            return bad(err, err_len, "SRCCL_ALGO=\"%s\": expected ring, rd, shm or auto", a);
    }

    cfg->rd_max_len = 0;
    if ((r = env_bytes("SRCCL_RD_MAX_BYTES", 0, (size_t)1 << 40, &cfg->rd_max_len, err, err_len)))
        return r;
    cfg->ab_len = 16 << 10;
    if ((r = env_bytes("SRCCL_AB_BYTES", 1, (size_t)1 << 30, &cfg->ab_len, err, err_len)))
        return r;
    /* 512 KiB x 2 slots (the memory of 128 KiB x 8): on few CPUs each
     * chunk costs wake-ups, so fewer, larger chunks move more. */
    cfg->slot_len = 512 << 10;
    if ((r = env_bytes("SRCCL_CHUNK_BYTES", 64, 64 << 20, &cfg->slot_len, err, err_len)))
        return r;
    cfg->slot_len &= ~(size_t)63; /* every element size divides it; slots stay aligned */
    x = 2;
    if ((r = env_int("SRCCL_SLOTS", 1, 1024, &x, err, err_len)))
        return r;
    cfg->slot_cnt = (uint32_t)x;
    x = -1;
    if ((r = env_int("SRCCL_SPIN_US", 0, 10000000, &x, err, err_len)))
        return r;
    cfg->spin_set = x >= 0;
    /* 200 us: a rank that sleeps answers its peer only after a wake-up
     * (tens of us). A spin shorter than that makes the peer's wait outlast
     * it, so the peer sleeps too, and two ranks can stay in that pattern
     * for the rest of a run, each small all-reduce costing a wake-up on
     * both sides. */
    cfg->spin_ns = x >= 0 ? (uint64_t)x * 1000 : 200000;
    x = 0;
    if ((r = env_int("SRCCL_DEBUG", 0, 9, &x, err, err_len)))
        return r;
    cfg->debug = (int)x;
    x = 1;
    if ((r = env_int("SRCCL_SIMD", 0, 1, &x, err, err_len)))
        return r;
    cfg->simd = x != 0;

    const char *dev = getenv("SRCCL_IB_DEV");
    if (dev)
        snprintf(cfg->ib_dev, sizeof(cfg->ib_dev), "%s", dev);
    x = 1;
    if ((r = env_int("SRCCL_IB_PORT", 1, 255, &x, err, err_len)))
        return r;
    cfg->ib_port = (uint8_t)x;
    x = 0;
    if ((r = env_int("SRCCL_IB_GID_INDEX", 0, 255, &x, err, err_len)))
        return r;
    cfg->gid_index = (uint8_t)x;
    x = 14; /* 4.096 us * 2^14 = 67 ms per try */
    if ((r = env_int("SRCCL_IB_TIMEOUT", 1, 31, &x, err, err_len)))
        return r;
    cfg->ib_timeout = (uint8_t)x;
    x = 7;
    if ((r = env_int("SRCCL_IB_RETRY_CNT", 0, 7, &x, err, err_len)))
        return r;
    cfg->ib_retry_cnt = (uint8_t)x;
    x = 1;
    if ((r = env_int("SRCCL_SHM", 0, 1, &x, err, err_len)))
        return r;
    cfg->shm = x != 0;
    cfg->shm_small_len = SIZE_MAX; /* unset: by nranks (shm.c) */
    if ((r = env_bytes("SRCCL_SHM_SMALL", 0, 64 << 20, &cfg->shm_small_len, err, err_len)))
        return r;
    if (cfg->shm_small_len != SIZE_MAX)
        cfg->shm_small_len &= ~(size_t)63;
    cfg->shm_loop_len = SC_SHM_LOOP_DEFAULT;
    if ((r = env_bytes("SRCCL_SHM_BYTES", 64, 256 << 20, &cfg->shm_loop_len, err, err_len)))
        return r;
    x = -1;
    if ((r = env_int("SRCCL_SHM_SPIN_US", 0, 10000000, &x, err, err_len)))
        return r;
    cfg->shm_spin_ns = x >= 0 ? (uint64_t)x * 1000 : UINT64_MAX; /* unset: shm.c chooses */
    return srcclSuccess;
}

static uint64_t fnv1a(uint64_t h, const char *s)
{
    for (; s && *s; s++)
        h = (h ^ (uint8_t)*s) * 0x100000001b3ull;
    return h;
}

/* Both set and integers: *rank and *nranks. 0 if absent, <0 on bad values. */
static int env_pair(const char *rname, const char *nname, int *rank, int *nranks)
{
    const char *r = getenv(rname), *n = getenv(nname);
    if (!r || !n || !*r || !*n)
        return 0;
    char *e1, *e2;
    long rv = strtol(r, &e1, 10), nv = strtol(n, &e2, 10);
    if (*e1 || *e2 || nv < 1 || nv > 65536 || rv < 0 || rv >= nv)
        return -1;
    *rank = (int)rv;
    *nranks = (int)nv;
    return 1;
}

srcclResult_t sc_config_launch(struct sc_config *cfg, char *err, size_t err_len)
{
    static const struct {
        enum sc_env_source src;
        const char *rank, *size;
    } launchers[] = {
        {SC_ENV_SRCCL, "SRCCL_RANK", "SRCCL_NRANKS"},
        {SC_ENV_TORCH, "RANK", "WORLD_SIZE"},
        {SC_ENV_OMPI, "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
        {SC_ENV_SLURM, "SLURM_PROCID", "SLURM_NTASKS"},
    };
    cfg->source = SC_ENV_NONE;
    for (size_t i = 0; i < sizeof(launchers) / sizeof(launchers[0]); i++) {
        int got = env_pair(launchers[i].rank, launchers[i].size, &cfg->rank, &cfg->nranks);
        if (got < 0)
            return bad(err, err_len, "%s=\"%s\" / %s=\"%s\": need 0 <= rank < size",
                       launchers[i].rank, getenv(launchers[i].rank), launchers[i].size,
                       getenv(launchers[i].size));
        if (got) {
            cfg->source = launchers[i].src;
            break;
        }
    }
    if (cfg->source == SC_ENV_NONE)
        return bad(
            err, err_len,
            "no rank and size in the environment: set SRCCL_RANK and SRCCL_NRANKS (srccl-run "
            "does), or run under torchrun (RANK, WORLD_SIZE), Open MPI or Slurm");

    /* A nonce the whole job agrees on, so that two jobs meeting at one
     * port reject each other. */
    static const char *const job_vars[] = {
        "SRCCL_JOB_ID",   "TORCHELASTIC_RUN_ID", "OMPI_MCA_ess_base_jobid",
        "PMIX_NAMESPACE", "SLURM_JOB_ID",        "SLURM_STEP_ID"};
    uint64_t h = 0xcbf29ce484222325ull;
    bool have_job = false;
    for (size_t i = 0; i < sizeof(job_vars) / sizeof(job_vars[0]); i++) {
        const char *v = getenv(job_vars[i]);
        if (v && *v) {
            h = fnv1a(fnv1a(h, job_vars[i]), v);
            have_job = true;
        }
    }
    char nbuf[32];
    snprintf(nbuf, sizeof(nbuf), "%d", cfg->nranks);
    h = fnv1a(h, nbuf);

    long long port = -1;
    const char *addr = getenv("SRCCL_ROOT_ADDR");
    const char *master = getenv("MASTER_ADDR");
    if (addr && *addr) {
        snprintf(cfg->root_host, sizeof(cfg->root_host), "%s", addr);
        char *colon = strrchr(cfg->root_host, ':');
        if (colon) {
            *colon = 0;
            char *end;
            port = strtoll(colon + 1, &end, 10);
            if (*end || port < 1 || port > 65535 || !cfg->root_host[0])
                return bad(err, err_len, "SRCCL_ROOT_ADDR=\"%s\": expected host[:port]", addr);
        }
    } else if (master && *master && cfg->source == SC_ENV_TORCH) {
        /* MASTER_PORT is torch's TCPStore: take the next one. */
        snprintf(cfg->root_host, sizeof(cfg->root_host), "%s", master);
        long long mp = SC_TORCH_DEFAULT_PORT;
        srcclResult_t r = env_int("MASTER_PORT", 1, 65534, &mp, err, err_len);
        if (r)
            return r;
        port = mp + 1;
    } else {
        snprintf(cfg->root_host, sizeof(cfg->root_host), "127.0.0.1");
    }
    if (port < 0) {
        port = have_job ? (long long)(20000 + h % 20000) : SC_DEFAULT_PORT;
        srcclResult_t r = env_int("SRCCL_ROOT_PORT", 1, 65535, &port, err, err_len);
        if (r)
            return r;
    }
    cfg->root_port = (uint16_t)port;
    snprintf(nbuf, sizeof(nbuf), ":%lld", port);
    cfg->job_hash = fnv1a(fnv1a(h, cfg->root_host), nbuf);
    return srcclSuccess;
}

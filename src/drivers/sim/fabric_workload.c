/* fabric_workload.c: the fabric's workloads, built on the public flow and
 * step calls: permutation, incast, all-to-all, background load, and the
 * ring and halving-doubling all-reduce as chains of dependent steps. Every
 * random choice comes from the fabric's seeded workload stream. */
#include "fabric_int.h"
#include "sr_util.h"

#include <stdlib.h>

/* 0 .. n-1 (n >= 1) in an order from the workload stream; NULL when out of
 * memory. Fisher-Yates gives a uniform permutation; with one_cycle,
 * Sattolo's variant (j < i) gives a single n-cycle: i -> p[i] never maps
 * an index to itself. */
static uint32_t *fab_shuffled(struct sr_fabric *f, uint32_t n, bool one_cycle)
{
    uint32_t *p = malloc(n * sizeof(*p));
    if (!p)
        return NULL;
    for (uint32_t i = 0; i < n; i++)
        p[i] = i;
    for (uint32_t i = n - 1; i > 0; i--) {
        uint32_t j = fab_below(fab_rand(f), one_cycle ? i : i + 1), t = p[i];
        p[i] = p[j];
        p[j] = t;
    }
    return p;
}

int sr_fabric_permutation(struct sr_fabric *f, uint64_t bytes, uint64_t start_ns)
{
    uint32_t n = sr_fabric_host_cnt(f);
    /* a single n-cycle, so no host sends to itself */
    uint32_t *perm = fab_shuffled(f, n, true);
    if (!perm)
        return SR_ERR_NOMEM;
    int err = 0;
    for (uint32_t i = 0; i < n && err >= 0; i++)
        err = sr_fabric_add_flow(f, i, perm[i], bytes, start_ns);
    free(perm);
    return err < 0 ? err : 0;
}

int sr_fabric_incast(struct sr_fabric *f, uint32_t dst, uint32_t senders, uint64_t bytes,
                     uint64_t start_ns)
{
    return sr_fabric_incast_step(f, dst, senders, bytes, start_ns, 0);
}

int sr_fabric_incast_step(struct sr_fabric *f, uint32_t dst, uint32_t senders, uint64_t bytes,
                          uint64_t start_ns, uint64_t step_ns)
{
    uint32_t n = sr_fabric_host_cnt(f);
    if (dst >= n || !senders || senders > n - 1)
        return SR_ERR_INVAL;
    uint32_t *ord = fab_shuffled(f, n, false);
    if (!ord)
        return SR_ERR_NOMEM;
    int err = 0;
    for (uint32_t i = 0, cnt = 0; i < n && cnt < senders && err >= 0; i++) {
        if (ord[i] == dst)
            continue;
        err = sr_fabric_add_flow(f, ord[i], dst, bytes, start_ns + (uint64_t)cnt * step_ns);
        cnt++;
    }
    free(ord);
    return err < 0 ? err : 0;
}

int sr_fabric_all_to_all(struct sr_fabric *f, uint64_t bytes, uint64_t start_ns)
{
    for (uint32_t s = 0; s < sr_fabric_host_cnt(f); s++)
        for (uint32_t d = 0; d < sr_fabric_host_cnt(f); d++) {
            if (s == d)
                continue;
            int err = sr_fabric_add_flow(f, s, d, bytes, start_ns);
            if (err < 0)
                return err;
        }
    return 0;
}

/* Ring all-reduce: in step s (0 .. 2n - 3) host i sends a chunk to i + 1.
 * Steps 0 .. n - 2 are the reduce-scatter, the rest the all-gather; host
 * i's step s + 1 needs the chunk it received in step s from i - 1. */
int sr_fabric_ring_allreduce(struct sr_fabric *f, uint64_t bytes, uint64_t start_ns)
{
    uint32_t n = f ? sr_fabric_host_cnt(f) : 0;
    if (!f || n < 2 || !bytes)
        return SR_ERR_INVAL;
    uint64_t chunk = (bytes + n - 1) / n;
    int coll = sr_fabric_coll_new(f);
    if (coll < 0)
        return coll;
    int *prev = malloc(n * sizeof(*prev)), *cur = malloc(n * sizeof(*cur));
    int err = prev && cur ? 0 : SR_ERR_NOMEM;
    for (uint32_t s = 0; s < 2 * (n - 1) && !err; s++)
        for (uint32_t i = 0; i < n && !err; i++) {
            int after = s ? prev[(i + n - 1) % n] : -1;
            int id = sr_fabric_add_step(f, coll, i, (i + 1) % n, chunk, after, start_ns);
            if (id < 0)
                err = id;
            cur[i] = id;
            if (i == n - 1) {
                int *t = prev;
                prev = cur;
                cur = t;
            }
        }
    free(prev);
    free(cur);
    return err < 0 ? err : coll;
}

/* Halving-doubling: reduce-scatter by recursive halving (step j: partner
 * at distance n >> (j + 1), half of what is left), then all-gather by
 * recursive doubling (distance 1, 2, .. n/2, sizes doubling back). Each
 * step of host i waits for what its previous partner sent it. */
int sr_fabric_hd_allreduce(struct sr_fabric *f, uint64_t bytes, uint64_t start_ns)
{
    uint32_t n = f ? sr_fabric_host_cnt(f) : 0;
    if (!f || n < 2 || (n & (n - 1)) || !bytes)
        return SR_ERR_INVAL;
    uint32_t lg = 0;
    while ((1u << lg) < n)
        lg++;
    int coll = sr_fabric_coll_new(f);
    if (coll < 0)
        return coll;
    int *prev = malloc(n * sizeof(*prev)), *cur = malloc(n * sizeof(*cur));
    int err = prev && cur ? 0 : SR_ERR_NOMEM;
    uint32_t prev_dist = 0;
    for (uint32_t s = 0; s < 2 * lg && !err; s++) {
        uint32_t dist = s < lg ? n >> (s + 1) : 1u << (s - lg);
        uint32_t shift = s < lg ? s + 1 : 2 * lg - s;
        uint64_t part = SR_MAX(1, (bytes + (1ull << shift) - 1) >> shift);
        for (uint32_t i = 0; i < n && !err; i++) {
            int after = s ? prev[i ^ prev_dist] : -1;
            int id = sr_fabric_add_step(f, coll, i, i ^ dist, part, after, start_ns);
            if (id < 0)
                err = id;
            cur[i] = id;
        }
        int *t = prev;
        prev = cur;
        cur = t;
        prev_dist = dist;
    }
    free(prev);
    free(cur);
    return err < 0 ? err : coll;
}

int sr_fabric_background(struct sr_fabric *f, double frac, uint64_t bytes, uint64_t start_ns)
{
    uint32_t n = f ? sr_fabric_host_cnt(f) : 0;
    if (!f || !(frac > 0.0 && frac <= 1.0))
        return SR_ERR_INVAL;
    uint32_t m = (uint32_t)(frac * n + 0.5);
    if (m < 2)
        return SR_ERR_INVAL;
    /* a uniform shuffle picks the m hosts (the first m), and one cycle
     * over those pairs them, so none sends to itself */
    uint32_t *ord = fab_shuffled(f, n, false);
    if (!ord)
        return SR_ERR_NOMEM;
    uint32_t *cyc = fab_shuffled(f, m, true);
    int err = cyc ? 0 : SR_ERR_NOMEM;
    for (uint32_t i = 0; cyc && i < m && err >= 0; i++)
        err = sr_fabric_add_flow(f, ord[i], ord[cyc[i]], bytes, start_ns);
    free(cyc);
    free(ord);
    return err < 0 ? err : 0;
}

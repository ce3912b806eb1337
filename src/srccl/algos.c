/* algos.c: the collectives as sequences of primitives.
 *   ring: all-reduce (reduce-scatter then all-gather around the ring, NCCL's
 *         step order), all-gather, reduce-scatter; chains for broadcast and
 *         reduce. Pipelined: the buffer goes round in chunks of one slot.
 *   rd:   recursive doubling for all-reduce (ranks above the largest power
 *         of two fold into a partner first), Bruck for all-gather, binomial
 *         trees for broadcast and reduce; reduce-scatter as an all-reduce.
 * Arguments are checked by the caller (comm.c); nranks > 1 here unless said. */
#include "sc_int.h"

#include <string.h>

const char *sc_algo_name(enum sc_algo a)
{
    return a == SC_ALGO_RING ? "ring" : a == SC_ALGO_RD ? "rd" : a == SC_ALGO_SHM ? "shm" : "auto";
}

/* A latency-bandwidth model: a step costs alpha + bytes / beta, and
 * ab = alpha * beta (SRCCL_AB_BYTES, 16 KiB by default: about right for
 * softrdma on loopback and for a 100 Gb/s NIC alike). With L the steps of
 * recursive doubling (log2 of the largest power of two, +2 when ranks fold
 * in) the latency algorithm wins below:
 *   all-reduce:     ring 2(n-1) steps of S/n, rd L steps of S:
 *                   S < ab (2(n-1) - L) / (L - 2(n-1)/n)  (n = 2: always)
 *   all-gather:     ring n-1 steps, Bruck ceil(log2 n), the same volume
 *                   but two more copies: S < 8 ab
 *   broadcast/reduce: chain n-1 steps pipelined, tree log2 n levels of S:
 *                   S < ab (n-1 - log) / (log - 1)  (one chunk at least)
 *   reduce-scatter: rd moves L x S instead of (n-1)/n x S: S < ab
 * SRCCL_RD_MAX_BYTES replaces the model by one threshold. */
enum sc_algo sc_algo_pick(srcclComm_t c, enum sc_coll coll, size_t bytes)
{
    if (c->cfg.algo == SC_ALGO_RING || c->cfg.algo == SC_ALGO_RD)
        return c->cfg.algo;
    if (c->cfg.rd_max_len)
        return bytes <= c->cfg.rd_max_len ? SC_ALGO_RD : SC_ALGO_RING;
    int n = c->nranks, lg = 0, p2 = 1;
    while (p2 * 2 <= n)
        p2 *= 2, lg++;
    int lg_up = lg + (p2 < n); /* ceil(log2 n) */
    double ab = (double)c->cfg.ab_len, s = (double)bytes, nn = n, lim;
    switch (coll) {
    case SC_ALLREDUCE: {
        double l = lg + (p2 < n ? 2 : 0);
        if (n == 2)
            return SC_ALGO_RD;
        lim = ab * (2 * (nn - 1) - l) / (l - 2 * (nn - 1) / nn);
        break;
    }
    case SC_ALLGATHER:
        lim = 8 * ab;
        break;
    case SC_BROADCAST:
    case SC_REDUCE:
        lim = lg_up <= 1 ? 0 : SC_MAX(ab * (nn - 1 - lg_up) / (lg_up - 1), (double)c->cfg.slot_len);
        break;
    default:
        lim = ab;
        break;
    }
    return s <= lim ? SC_ALGO_RD : SC_ALGO_RING;
}

#define TRY(x)                                                                                     \
    do {                                                                                           \
        srcclResult_t r_ = (x);                                                                    \
        if (r_)                                                                                    \
            return r_;                                                                             \
    } while (0)

static int mod(int a, int n)
{
    return ((a % n) + n) % n;
}

/* ---- all-reduce ---- */
static srcclResult_t allreduce_ring(srcclComm_t c, const char *in, char *out, size_t cnt,
                                    srcclDataType_t dt, srcclRedOp_t op)
{
    int n = c->nranks, me = c->rank;
    struct sc_prims p;
    sc_prims_init(&p, c, mod(me - 1, n), mod(me + 1, n), dt, op);
    size_t es = p.esize, chunk = sc_prims_chunk_cnt(&p), loop = (size_t)n * chunk;
    for (size_t base = 0; base < cnt; base += loop) {
        size_t real = SC_MIN(chunk, (cnt - base + (size_t)n - 1) / (size_t)n);
#define OFF(j)   (base + (size_t)(j)*real)
#define NELEM(j) (OFF(j) < cnt ? SC_MIN(real, cnt - OFF(j)) : 0)
        int k = mod(me - 1, n);
        TRY(sc_send(&p, in + OFF(k) * es, NELEM(k)));
        for (int j = 2; j < n; j++) {
            k = mod(me - j, n);
            TRY(sc_recv_reduce_send(&p, in + OFF(k) * es, NELEM(k)));
        }
        k = me;
        TRY(sc_recv_reduce_copy_send(&p, in + OFF(k) * es, out + OFF(k) * es, NELEM(k), true));
        for (int j = 1; j < n - 1; j++) {
            k = mod(me - j, n);
            TRY(sc_recv_copy_send(&p, out + OFF(k) * es, NELEM(k)));
        }
        k = mod(me + 1, n);
        TRY(sc_recv(&p, out + OFF(k) * es, NELEM(k)));
#undef OFF
#undef NELEM
    }
    return srcclSuccess;
}

static srcclResult_t allreduce_rd(srcclComm_t c, const char *in, char *out, size_t cnt,
                                  srcclDataType_t dt, srcclRedOp_t op)
{
    int n = c->nranks, me = c->rank, p2 = 1;
    while (p2 * 2 <= n)
        p2 *= 2;
    int rem = n - p2;
    struct sc_prims p;
    size_t es = sc_type_size(dt), chunk = c->cfg.slot_len / es;
    if (me >= p2) { /* fold: hand our data to me - p2, get the result back */
        sc_prims_init(&p, c, me - p2, me - p2, dt, op);
        TRY(sc_send_msg(&p, in, cnt));
        return sc_recv_msg(&p, out, cnt);
    }
    if (me < rem) {
        sc_prims_init(&p, c, me + p2, me + p2, dt, op);
        for (size_t off = 0; off < cnt; off += chunk)
            TRY(sc_recv_reduce_copy(&p, in + off * es, out + off * es, SC_MIN(chunk, cnt - off),
                                    false));
    } else if (in != out) {
        memcpy(out, in, cnt * es);
    }
    for (int mask = 1; mask < p2; mask <<= 1) {
        sc_prims_init(&p, c, me ^ mask, me ^ mask, dt, op);
        TRY(sc_sendrecv_msg(&p, out, out, cnt, true));
    }
    if (op == srcclAvg)
        c->kern.div[dt](out, cnt, n);
    if (me < rem) {
        sc_prims_init(&p, c, me + p2, me + p2, dt, op);
        TRY(sc_send_msg(&p, out, cnt));
    }
    return srcclSuccess;
}

srcclResult_t sc_allreduce(srcclComm_t c, const void *s, void *r, size_t cnt, srcclDataType_t dt,
                           srcclRedOp_t op, enum sc_algo algo)
{
    if (c->nranks == 1) {
        if (s != r)
            memmove(r, s, cnt * sc_type_size(dt));
        return srcclSuccess; /* avg over one rank is the identity */
    }
    return algo == SC_ALGO_RD ? allreduce_rd(c, s, r, cnt, dt, op)
                              : allreduce_ring(c, s, r, cnt, dt, op);
}

/* ---- broadcast ---- */
/* Binomial tree over ranks relative to root: v receives from v minus its
 * lowest set bit, then sends to v + 2^k for each 2^k below that bit. */
static int tree_parent(int v, int n, int *low)
{
    int mask = 1;
    while (mask < n && !(v & mask))
        mask <<= 1;
    *low = mask; /* >= n for the root */
    return v & mask ? v - mask : -1;
}

srcclResult_t sc_broadcast(srcclComm_t c, const void *s, void *r, size_t cnt, srcclDataType_t dt,
                           int root, enum sc_algo algo)
{
    int n = c->nranks, me = c->rank;
    size_t es = sc_type_size(dt), bytes = cnt * es;
    const char *in = s;
    char *out = r;
    if (me == root && in != out)
        memmove(out, in, bytes);
    if (n == 1)
        return srcclSuccess;
    struct sc_prims p;
    size_t chunk = c->cfg.slot_len / es;
    int v = mod(me - root, n);
    if (algo == SC_ALGO_RD) {
        int low, parent = tree_parent(v, n, &low);
        for (size_t off = 0; off < cnt; off += chunk) {
            size_t nel = SC_MIN(chunk, cnt - off);
            if (parent >= 0) {
                sc_prims_init(&p, c, mod(parent + root, n), -1, dt, srcclSum);
                TRY(sc_recv(&p, out + off * es, nel));
            }
            for (int m = low >> 1; m > 0; m >>= 1) {
                if (v + m >= n)
                    continue;
                sc_prims_init(&p, c, -1, mod(v + m + root, n), dt, srcclSum);
                TRY(sc_send(&p, out + off * es, nel));
            }
        }
        return srcclSuccess;
    }
    /* chain root -> root+1 -> ... -> root-1 */
    sc_prims_init(&p, c, mod(me - 1, n), mod(me + 1, n), dt, srcclSum);
    for (size_t off = 0; off < cnt; off += chunk) {
        size_t nel = SC_MIN(chunk, cnt - off);
        if (v == 0)
            TRY(sc_send(&p, out + off * es, nel));
        else if (v == n - 1)
            TRY(sc_recv(&p, out + off * es, nel));
        else
            TRY(sc_recv_copy_send(&p, out + off * es, nel));
    }
    return srcclSuccess;
}

/* ---- reduce ---- */
srcclResult_t sc_reduce(srcclComm_t c, const void *s, void *r, size_t cnt, srcclDataType_t dt,
                        srcclRedOp_t op, int root, enum sc_algo algo)
{
    int n = c->nranks, me = c->rank;
    size_t es = sc_type_size(dt);
    const char *in = s;
    char *out = r;
    if (n == 1) {
        if (in != out)
            memmove(out, in, cnt * es);
        return srcclSuccess;
    }
    struct sc_prims p;
    size_t chunk = c->cfg.slot_len / es;
    if (algo == SC_ALGO_RD) {
        /* Binomial tree, chunk by chunk: take the children's partial
         * results in order of distance, then pass ours up. */
        int v = mod(me - root, n), low;
        int parent = tree_parent(v, n, &low);
        char *acc = me == root ? NULL : sc_scratch(c, c->cfg.slot_len);
        if (me != root && !acc)
            return sc_fail(c, srcclSystemError, "out of memory (reduce scratch)");
        for (size_t off = 0; off < cnt; off += chunk) {
            size_t nel = SC_MIN(chunk, cnt - off);
            const char *cur = in + off * es;
            char *dst = me == root ? out + off * es : acc;
            for (int m = 1; m < low && m < n; m <<= 1) {
                if (v + m >= n)
                    break;
                sc_prims_init(&p, c, mod(v + m + root, n), -1, dt, op);
                TRY(sc_recv_reduce_copy(&p, cur, dst, nel, false));
                cur = dst;
            }
            if (parent >= 0) {
                sc_prims_init(&p, c, -1, mod(parent + root, n), dt, op);
                TRY(sc_send(&p, cur, nel));
            } else {
                if (cur != dst)
                    memmove(dst, cur, nel * es);
                if (op == srcclAvg)
                    c->kern.div[dt](dst, nel, n);
            }
        }
        return srcclSuccess;
    }
    /* chain root+1 -> root+2 -> ... -> root */
    int pos = mod(me - root - 1, n);
    sc_prims_init(&p, c, mod(me - 1, n), mod(me + 1, n), dt, op);
    for (size_t off = 0; off < cnt; off += chunk) {
        size_t nel = SC_MIN(chunk, cnt - off);
        if (pos == 0)
            TRY(sc_send(&p, in + off * es, nel));
        else if (pos == n - 1)
            TRY(sc_recv_reduce_copy(&p, in + off * es, out + off * es, nel, true));
        else
            TRY(sc_recv_reduce_send(&p, in + off * es, nel));
    }
    return srcclSuccess;
}

/* ---- all-gather ---- */
srcclResult_t sc_allgather(srcclComm_t c, const void *s, void *r, size_t cnt, srcclDataType_t dt,
                           enum sc_algo algo)
{
    int n = c->nranks, me = c->rank;
    size_t es = sc_type_size(dt), bytes = cnt * es;
    char *out = r;
    /* Our block in place first (memmove: sendbuff may overlap recvbuff). */
    if ((const char *)s != out + (size_t)me * bytes)
        memmove(out + (size_t)me * bytes, s, bytes);
    if (n == 1)
        return srcclSuccess;
    struct sc_prims p;
    if (algo == SC_ALGO_RD) {
        /* Bruck: after the step of distance d, tmp[i] holds rank me+i's
         * block for i < 2d; then rotate into place. */
        char *tmp = sc_scratch(c, (size_t)n * bytes);
        if (!tmp)
            return sc_fail(c, srcclSystemError, "out of memory (%zu bytes of all-gather scratch)",
                           (size_t)n * bytes);
        memcpy(tmp, out + (size_t)me * bytes, bytes);
        for (int d = 1; d < n; d <<= 1) {
            int blocks = SC_MIN(d, n - d);
            sc_prims_init(&p, c, mod(me + d, n), mod(me - d, n), dt, srcclSum);
            TRY(sc_sendrecv_msg(&p, tmp, tmp + (size_t)d * bytes, (size_t)blocks * cnt, false));
        }
        for (int i = 1; i < n; i++)
            memcpy(out + (size_t)mod(me + i, n) * bytes, tmp + (size_t)i * bytes, bytes);
        return srcclSuccess;
    }
    sc_prims_init(&p, c, mod(me - 1, n), mod(me + 1, n), dt, srcclSum);
    size_t chunk = sc_prims_chunk_cnt(&p);
    for (size_t off = 0; off < cnt; off += chunk) {
        size_t nel = SC_MIN(chunk, cnt - off);
#define BLK(b) (out + (size_t)(b)*bytes + off * es)
        TRY(sc_send(&p, BLK(me), nel));
        for (int k = 1; k < n - 1; k++)
            TRY(sc_recv_copy_send(&p, BLK(mod(me - k, n)), nel));
        TRY(sc_recv(&p, BLK(mod(me + 1, n)), nel));
#undef BLK
    }
    return srcclSuccess;
}

/* ---- reduce-scatter ---- */
srcclResult_t sc_reduce_scatter(srcclComm_t c, const void *s, void *r, size_t cnt,
                                srcclDataType_t dt, srcclRedOp_t op, enum sc_algo algo)
{
    int n = c->nranks, me = c->rank;
    size_t es = sc_type_size(dt), bytes = cnt * es, total = bytes * (size_t)n;
    const char *in = s;
    char *out = r;
    if (n == 1) {
        if (in != out)
            memmove(out, in, bytes);
        return srcclSuccess;
    }
    /* Output overlapping the input anywhere but on our own block (NCCL's
     * in-place) would overwrite blocks still to be sent: go through scratch. */
    bool overlap = out < in + total && in < out + bytes && out != in + (size_t)me * bytes;
    if (algo == SC_ALGO_RD) {
        char *tmp = sc_scratch(c, total);
        if (!tmp)
            return sc_fail(c, srcclSystemError, "out of memory (%zu bytes of scratch)", total);
        TRY(allreduce_rd(c, in, tmp, (size_t)n * cnt, dt, op));
        memcpy(out, tmp + (size_t)me * bytes, bytes);
        return srcclSuccess;
    }
    char *dst = out;
    if (overlap && !(dst = sc_scratch(c, bytes)))
        return sc_fail(c, srcclSystemError, "out of memory (%zu bytes of scratch)", bytes);
    struct sc_prims p;
    sc_prims_init(&p, c, mod(me - 1, n), mod(me + 1, n), dt, op);
    size_t chunk = sc_prims_chunk_cnt(&p);
    for (size_t off = 0; off < cnt; off += chunk) {
        size_t nel = SC_MIN(chunk, cnt - off);
#define BLK(b) (in + (size_t)(b)*bytes + off * es)
        TRY(sc_send(&p, BLK(mod(me - 1, n)), nel));
        for (int k = 1; k < n - 1; k++)
            TRY(sc_recv_reduce_send(&p, BLK(mod(me - 1 - k, n)), nel));
        TRY(sc_recv_reduce_copy(&p, BLK(me), dst + off * es, nel, true));
#undef BLK
    }
    if (dst != out)
        memcpy(out, dst, bytes);
    return srcclSuccess;
}

/* ---- all-to-all: pairwise exchange, step s sends to me+s and receives
 * from me-s ---- */
srcclResult_t sc_alltoall(srcclComm_t c, const void *s, void *r, size_t cnt, srcclDataType_t dt)
{
    int n = c->nranks, me = c->rank;
    size_t es = sc_type_size(dt), bytes = cnt * es, total = bytes * (size_t)n;
    const char *in = s;
    char *out = r;
    if (out < in + total && in < out + total && n > 1) { /* in place: keep a copy to send from */
        char *tmp = sc_scratch(c, total);
        if (!tmp)
            return sc_fail(c, srcclSystemError, "out of memory (%zu bytes of scratch)", total);
        memcpy(tmp, in, total);
        in = tmp;
    }
    if (in + (size_t)me * bytes != out + (size_t)me * bytes)
        memmove(out + (size_t)me * bytes, in + (size_t)me * bytes, bytes);
    struct sc_prims p;
    for (int st = 1; st < n; st++) {
        int to = mod(me + st, n), from = mod(me - st, n);
        sc_prims_init(&p, c, from, to, dt, srcclSum);
        TRY(sc_sendrecv_msg(&p, in + (size_t)to * bytes, out + (size_t)from * bytes, cnt, false));
    }
    return srcclSuccess;
}

/* ---- barrier: dissemination, ceil(log2 n) rounds of one byte ---- */
srcclResult_t sc_barrier(srcclComm_t c)
{
    int n = c->nranks, me = c->rank;
    uint8_t tok = 1;
    struct sc_prims p;
    for (int d = 1; d < n; d <<= 1) {
        sc_prims_init(&p, c, mod(me - d, n), mod(me + d, n), srcclUint8, srcclSum);
        TRY(sc_sendrecv_msg(&p, &tok, &tok, 1, false));
    }
    return srcclSuccess;
}

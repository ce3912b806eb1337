/* coll_test: every collective x datatype x op x size x in-place variant,
 * checked against a reference computed here, independently of srccl.
 * Run under srccl-run -n N. Each rank generates every rank's input from
 * (rank, index, call) and computes the expected output locally: exact
 * integers (with two's-complement wrap-around), and for floats a double
 * reference with a tolerance from the type's unit roundoff. Outputs sit
 * between guard bytes, so writes out of bounds are caught too.
 *
 *   coll_test [pass...]   pass: ring | rd | auto | shm | ring-small | rd-small |
 *                                shm-small | ring-wrap | rd-wrap | shm-edge
 * A pass is one communicator with SRCCL_ALGO (and for -small, 1 KiB chunks
 * in 2 slots: many chunks, slot reuse and credits on little data; for
 * -wrap, 64 B chunks in 5 slots and messages of over 2^16 chunks: the
 * chunk numbers and credit counts carried in 16 and 15 bits wrap, with
 * credits riding on chunks both ways (all-reduce) and on their own
 * (one-way send / receive streams)). shm (SRCCL_ALGO=shm, SRCCL_SHM=1): on
 * one host all-reduce and barrier go through shared memory; with -small
 * also 1 KiB of loop and 256 B of one-phase buffer per rank, so every
 * all-reduce beyond 256 B runs many two-phase loops; shm-edge: only
 * all-reduces at the default one-/two-phase switch points, each also
 * checked for the same bits on every rank. */
#include "srccl.h"

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { GUARD = 64, GUARD_BYTE = 0xa5 };

static const size_t esz[srcclNumTypes] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2};
static const char *const tname[srcclNumTypes] = {"int8",    "uint8",   "int32",   "uint32",
                                                 "int64",   "uint64",  "float16", "float32",
                                                 "float64", "bfloat16"};
static const char *const oname[srcclNumOps] = {"sum", "prod", "max", "min", "avg"};

static int me, nr;
static srcclComm_t comm;
static long failures, checks;
static const char *pass_name = "";
static char ctx[256];

#define FAIL(...)                                                                                  \
    do {                                                                                           \
        if (failures++ < 12) {                                                                     \
            fprintf(stderr, "rank %d FAIL [%s] %s: ", me, pass_name, ctx);                         \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fprintf(stderr, "\n");                                                                 \
        }                                                                                          \
    } while (0)

#define CALL(x)                                                                                    \
    do {                                                                                           \
        srcclResult_t r_ = (x);                                                                    \
        if (r_ != srcclSuccess) {                                                                  \
            fprintf(stderr, "rank %d [%s] %s: %s -> %s: %s\n", me, pass_name, ctx, #x,             \
                    srcclGetErrorString(r_), srcclGetLastError(comm));                             \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

static double coll_s; /* time inside the collectives */
static double now_s(void);
#define COLL(x)                                                                                    \
    do {                                                                                           \
        double t_ = now_s();                                                                       \
        CALL(x);                                                                                   \
        coll_s += now_s() - t_;                                                                    \
    } while (0)

/* ---- deterministic inputs ---- */
/* Cheap (the reference evaluates it nranks times per element) and good
 * enough: every rank, index and call gives unrelated bits. */
static uint64_t rnd(int rank, size_t i, uint64_t salt)
{
    uint64_t x = (uint64_t)i * 0x9e3779b97f4a7c15ull ^
                 (uint64_t)(rank + 1) * 0xc2b2ae3d27d4eb4full ^ salt * 0x165667b19e3779f9ull;
    x ^= x >> 32;
    x *= 0xd6e8feb86659fd93ull;
    x ^= x >> 32;
    x *= 0xd6e8feb86659fd93ull;
    return x ^ (x >> 29);
}

static bool is_float(srcclDataType_t dt)
{
    return dt == srcclFloat16 || dt == srcclFloat32 || dt == srcclFloat64 || dt == srcclBfloat16;
}

/* A float input, exactly representable in every float type: k/64 with
 * |k| <= 64, or for products +-(1 + k/8), |k| <= 4. */
static double fin(int rank, size_t i, uint64_t salt, srcclRedOp_t op)
{
    uint64_t x = rnd(rank, i, salt);
    if (op == srcclProd)
        return (x & 1 ? -1.0 : 1.0) * (1.0 + (double)((int)((x >> 1) % 9) - 4) / 8.0);
    return (double)((int)(x % 129) - 64) / 64.0;
}

/* Exact encodings of such values (the test's own, not srccl's). */
static uint16_t enc_half(double v)
{
    if (v == 0)
        return 0;
    uint16_t sign = v < 0 ? 0x8000 : 0;
    int e;
    double m = frexp(fabs(v), &e); /* |v| = m * 2^e, m in [0.5, 1) */
    int be = e - 1 + 15;
    if (be <= 0) /* subnormal: units of 2^-24 */
        return (uint16_t)(sign | (uint16_t)ldexp(fabs(v), 24));
    return (uint16_t)(sign | (be << 10) | ((uint16_t)ldexp(m, 11) & 0x3ff));
}

static double dec_half(uint16_t h)
{
    int e = (h >> 10) & 0x1f;
    double m = h & 0x3ff, v;
    if (e == 31)
        v = m ? NAN : INFINITY;
    else
        v = e ? ldexp(1024 + m, e - 25) : ldexp(m, -24);
    return h & 0x8000 ? -v : v;
}

static uint16_t enc_bf16(double v)
{
    float f = (float)v;
    uint32_t b;
    memcpy(&b, &f, 4);
    return (uint16_t)(b >> 16); /* exact for our values */
}

static double dec_bf16(uint16_t h)
{
    uint32_t b = (uint32_t)h << 16;
    float f;
    memcpy(&f, &b, 4);
    return f;
}

/* Stores rank's element i (of the call salted with salt) at buf[at]. */
static void put_in(void *buf, size_t at, srcclDataType_t dt, int rank, size_t i, uint64_t salt,
                   srcclRedOp_t op)
{
    uint64_t x = rnd(rank, i, salt);
    switch (dt) {
    case srcclInt8:
    case srcclUint8:
        ((uint8_t *)buf)[at] = (uint8_t)x;
        break;
    case srcclInt32:
    case srcclUint32:
        ((uint32_t *)buf)[at] = (uint32_t)x;
        break;
    case srcclInt64:
    case srcclUint64:
        ((uint64_t *)buf)[at] = x;
        break;
    case srcclFloat16:
        ((uint16_t *)buf)[at] = enc_half(fin(rank, i, salt, op));
        break;
    case srcclBfloat16:
        ((uint16_t *)buf)[at] = enc_bf16(fin(rank, i, salt, op));
        break;
    case srcclFloat32:
        ((float *)buf)[at] = (float)fin(rank, i, salt, op);
        break;
    case srcclFloat64:
        ((double *)buf)[at] = fin(rank, i, salt, op);
        break;
    default:
        break;
    }
}

static double get_f(const void *buf, size_t at, srcclDataType_t dt)
{
    switch (dt) {
    case srcclFloat16:
        return dec_half(((const uint16_t *)buf)[at]);
    case srcclBfloat16:
        return dec_bf16(((const uint16_t *)buf)[at]);
    case srcclFloat32:
        return ((const float *)buf)[at];
    case srcclFloat64:
        return ((const double *)buf)[at];
    default:
        return 0;
    }
}

static uint64_t get_u(const void *buf, size_t at, srcclDataType_t dt)
{
    switch (esz[dt]) {
    case 1:
        return ((const uint8_t *)buf)[at];
    case 2:
        return ((const uint16_t *)buf)[at];
    case 4:
        return ((const uint32_t *)buf)[at];
    default:
        return ((const uint64_t *)buf)[at];
    }
}

static int bits(srcclDataType_t dt)
{
    return (int)esz[dt] * 8;
}

static uint64_t trunc_w(uint64_t v, srcclDataType_t dt)
{
    return bits(dt) == 64 ? v : v & ((1ull << bits(dt)) - 1);
}

static bool is_signed(srcclDataType_t dt)
{
    return dt == srcclInt8 || dt == srcclInt32 || dt == srcclInt64;
}

static int64_t sext(uint64_t v, srcclDataType_t dt)
{
    int b = bits(dt);
    if (b == 64)
        return (int64_t)v;
    uint64_t m = 1ull << (b - 1);
    v = trunc_w(v, dt);
    return (int64_t)((v ^ m) - m);
}

/* Checks element `at` of out against the reduction of element i over all
 * ranks. */
static void check_red(const void *out, size_t at, srcclDataType_t dt, srcclRedOp_t op, size_t i,
                      uint64_t salt)
{
    checks++;
    if (!is_float(dt)) {
        uint64_t acc = 0;
        for (int r = 0; r < nr; r++) {
            uint64_t v = trunc_w(rnd(r, i, salt), dt); /* what put_in stores */
            if (r == 0) {
                acc = v;
                continue;
            }
            switch (op) {
            case srcclSum:
            case srcclAvg:
                acc += v;
                break;
            case srcclProd:
                acc *= v;
                break;
            case srcclMax:
                if (is_signed(dt) ? sext(v, dt) > sext(acc, dt) : v > acc)
                    acc = v;
                break;
            case srcclMin:
                if (is_signed(dt) ? sext(v, dt) < sext(acc, dt) : v < acc)
                    acc = v;
                break;
            default:
                break;
            }
        }
        acc = trunc_w(acc, dt);
        if (op == srcclAvg)
            acc = is_signed(dt) ? (uint64_t)(sext(acc, dt) / nr) : acc / (uint64_t)nr;
        acc = trunc_w(acc, dt);
        uint64_t got = get_u(out, at, dt);
        if (got != acc)
            FAIL("element %zu: got %llu (0x%llx), expected %llu (0x%llx)", at,
                 (unsigned long long)got, (unsigned long long)got, (unsigned long long)acc,
                 (unsigned long long)acc);
        return;
    }
    double u = dt == srcclFloat16    ? 0x1p-11
               : dt == srcclBfloat16 ? 0x1p-8
               : dt == srcclFloat32  ? 0x1p-24
                                     : 0x1p-53;
    double acc = 0, mag = 0;
    for (int r = 0; r < nr; r++) {
        double v = fin(r, i, salt, op);
        mag += fabs(v);
        if (r == 0) {
            acc = v;
            continue;
        }
        switch (op) {
        case srcclSum:
        case srcclAvg:
            acc += v;
            break;
        case srcclProd:
            acc *= v;
            break;
        case srcclMax:
            acc = fmax(acc, v);
            break;
        case srcclMin:
            acc = fmin(acc, v);
            break;
        default:
            break;
        }
    }
    double tol = 0;
    if (op == srcclSum)
        tol = 2.0 * nr * u * mag;
    else if (op == srcclAvg)
        tol = (2.0 * nr * u * mag) / nr + 2 * u * fabs(acc / nr);
    else if (op == srcclProd)
        tol = 2.0 * nr * u * fabs(acc);
    if (op == srcclAvg)
        acc /= nr;
    double got = get_f(out, at, dt);
    if (!(fabs(got - acc) <= tol))
        FAIL("element %zu: got %.9g, expected %.9g (tolerance %.3g)", at, got, acc, tol);
}

/* Checks that element `at` of out is rank's element i, bit for bit. */
static void check_copy(const void *out, size_t at, srcclDataType_t dt, int rank, size_t i,
                       uint64_t salt)
{
    uint8_t tmp[8];
    checks++;
    put_in(tmp, 0, dt, rank, i, salt, srcclSum);
    if (memcmp((const uint8_t *)out + at * esz[dt], tmp, esz[dt]))
        FAIL("element %zu: got 0x%llx, expected rank %d's element %zu 0x%llx", at,
             (unsigned long long)get_u(out, at, dt), rank, i,
             (unsigned long long)get_u(tmp, 0, dt));
}

/* ---- buffers with guards ---- */
struct buf {
    uint8_t *base; /* GUARD | data | GUARD */
    size_t len;
};

static void *buf_get(struct buf *b, size_t len)
{
    if (len + 2 * GUARD > b->len) {
        free(b->base);
        b->len = len + 2 * GUARD;
        b->base = malloc(b->len);
        if (!b->base) {
            fprintf(stderr, "out of memory\n");
            exit(1);
        }
    }
    memset(b->base, GUARD_BYTE, GUARD);
    memset(b->base + GUARD + len, GUARD_BYTE, GUARD);
    memset(b->base + GUARD, 0x5a, len);
    return b->base + GUARD;
}

static void buf_check(struct buf *b, size_t len, const char *what)
{
    for (size_t i = 0; i < GUARD; i++) {
        if (b->base[i] != GUARD_BYTE || b->base[GUARD + len + i] != GUARD_BYTE) {
            FAIL("%s: write outside the buffer (guard byte %s%zu)", what,
                 b->base[i] != GUARD_BYTE ? "-" : "+", i);
            return;
        }
    }
}

static struct buf bsend, brecv;
static uint64_t call_no;

/* ---- the collectives ---- */
enum place { OOP, INPLACE, SAME_PTR }; /* SAME_PTR: sendbuff == recvbuff (block colls) */

static void t_allreduce(srcclDataType_t dt, srcclRedOp_t op, size_t cnt, enum place pl)
{
    uint64_t salt = ++call_no;
    size_t es = esz[dt];
    snprintf(ctx, sizeof(ctx), "allreduce %s %s count %zu %s", tname[dt], oname[op], cnt,
             pl == OOP ? "out-of-place" : "in-place");
    uint8_t *out = buf_get(&brecv, cnt * es);
    uint8_t *in = pl == OOP ? buf_get(&bsend, cnt * es) : out;
    for (size_t i = 0; i < cnt; i++)
        put_in(in, i, dt, me, i, salt, op);
    COLL(srcclAllReduce(in, out, cnt, dt, op, comm));
    for (size_t i = 0; i < cnt; i++)
        check_red(out, i, dt, op, i, salt);
    buf_check(&brecv, cnt * es, "recvbuff");
}

static void t_reduce(srcclDataType_t dt, srcclRedOp_t op, size_t cnt, int root, enum place pl)
{
    uint64_t salt = ++call_no;
    size_t es = esz[dt];
    snprintf(ctx, sizeof(ctx), "reduce %s %s count %zu root %d %s", tname[dt], oname[op], cnt, root,
             pl == OOP ? "out-of-place" : "in-place");
    uint8_t *out = buf_get(&brecv, cnt * es);
    uint8_t *in = pl == OOP ? buf_get(&bsend, cnt * es) : out;
    for (size_t i = 0; i < cnt; i++)
        put_in(in, i, dt, me, i, salt, op);
    /* Off the root, recvbuff is not used: NULL out of place. */
    COLL(srcclReduce(in, me == root || pl != OOP ? out : NULL, cnt, dt, op, root, comm));
    if (me == root)
        for (size_t i = 0; i < cnt; i++)
            check_red(out, i, dt, op, i, salt);
    buf_check(&brecv, cnt * es, "recvbuff");
}

static void t_broadcast(srcclDataType_t dt, size_t cnt, int root, enum place pl)
{
    uint64_t salt = ++call_no;
    size_t es = esz[dt];
    snprintf(ctx, sizeof(ctx), "broadcast %s count %zu root %d %s", tname[dt], cnt, root,
             pl == OOP ? "out-of-place" : "in-place");
    uint8_t *out = buf_get(&brecv, cnt * es);
    uint8_t *in = pl == OOP ? buf_get(&bsend, cnt * es) : out;
    if (me == root)
        for (size_t i = 0; i < cnt; i++)
            put_in(in, i, dt, me, i, salt, srcclSum);
    COLL(srcclBroadcast(me == root ? in : NULL, out, cnt, dt, root, comm));
    for (size_t i = 0; i < cnt; i++)
        check_copy(out, i, dt, root, i, salt);
    buf_check(&brecv, cnt * es, "recvbuff");
}

static const char *place_name(enum place pl)
{
    return pl == OOP ? "out-of-place" : pl == INPLACE ? "in-place" : "sendbuff==recvbuff";
}

static void t_allgather(srcclDataType_t dt, size_t cnt, enum place pl)
{
    uint64_t salt = ++call_no;
    size_t es = esz[dt], bytes = cnt * es;
    snprintf(ctx, sizeof(ctx), "allgather %s count %zu %s", tname[dt], cnt, place_name(pl));
    uint8_t *out = buf_get(&brecv, bytes * (size_t)nr);
    uint8_t *in = pl == OOP       ? buf_get(&bsend, bytes)
                  : pl == INPLACE ? out + (size_t)me * bytes
                                  : out;
    for (size_t i = 0; i < cnt; i++)
        put_in(in, i, dt, me, i, salt, srcclSum);
    COLL(srcclAllGather(in, out, cnt, dt, comm));
    for (int r = 0; r < nr; r++)
        for (size_t i = 0; i < cnt; i++)
            check_copy(out, (size_t)r * cnt + i, dt, r, i, salt);
    buf_check(&brecv, bytes * (size_t)nr, "recvbuff");
}

static void t_reducescatter(srcclDataType_t dt, srcclRedOp_t op, size_t cnt, enum place pl)
{
    uint64_t salt = ++call_no;
    size_t es = esz[dt], bytes = cnt * es, total = cnt * (size_t)nr;
    snprintf(ctx, sizeof(ctx), "reducescatter %s %s count %zu %s", tname[dt], oname[op], cnt,
             place_name(pl));
    uint8_t *in = buf_get(&bsend, total * es);
    uint8_t *out = pl == OOP       ? buf_get(&brecv, bytes)
                   : pl == INPLACE ? in + (size_t)me * bytes
                                   : in;
    for (size_t i = 0; i < total; i++)
        put_in(in, i, dt, me, i, salt, op);
    COLL(srcclReduceScatter(in, out, cnt, dt, op, comm));
    for (size_t i = 0; i < cnt; i++)
        check_red(out, i, dt, op, (size_t)me * cnt + i, salt);
    buf_check(&bsend, total * es, "sendbuff");
    if (pl == OOP)
        buf_check(&brecv, bytes, "recvbuff");
}

static void t_alltoall(srcclDataType_t dt, size_t cnt, enum place pl)
{
    uint64_t salt = ++call_no;
    size_t es = esz[dt], total = cnt * (size_t)nr;
    snprintf(ctx, sizeof(ctx), "alltoall %s count %zu %s", tname[dt], cnt, place_name(pl));
    uint8_t *out = buf_get(&brecv, total * es);
    uint8_t *in = pl == OOP ? buf_get(&bsend, total * es) : out;
    for (size_t i = 0; i < total; i++)
        put_in(in, i, dt, me, i, salt, srcclSum);
    COLL(srcclAllToAll(in, out, cnt, dt, comm));
    for (int r = 0; r < nr; r++)
        for (size_t i = 0; i < cnt; i++)
            check_copy(out, (size_t)r * cnt + i, dt, r, (size_t)me * cnt + i, salt);
    buf_check(&brecv, total * es, "recvbuff");
}

/* Ring shift: send to me+1, receive from me-1 (even ranks send first). */
static void t_sendrecv(srcclDataType_t dt, size_t cnt)
{
    uint64_t salt = ++call_no;
    size_t es = esz[dt];
    if (nr < 2)
        return;
    snprintf(ctx, sizeof(ctx), "send/recv %s count %zu", tname[dt], cnt);
    int to = (me + 1) % nr, from = (me + nr - 1) % nr;
    uint8_t *in = buf_get(&bsend, cnt * es);
    uint8_t *out = buf_get(&brecv, cnt * es);
    for (size_t i = 0; i < cnt; i++)
        put_in(in, i, dt, me, i, salt, srcclSum);
    if (me % 2 == 0) {
        COLL(srcclSend(in, cnt, dt, to, comm));
        COLL(srcclRecv(out, cnt, dt, from, comm));
    } else {
        COLL(srcclRecv(out, cnt, dt, from, comm));
        COLL(srcclSend(in, cnt, dt, to, comm));
    }
    for (size_t i = 0; i < cnt; i++)
        check_copy(out, i, dt, from, i, salt);
    buf_check(&brecv, cnt * es, "recvbuff");
}

/* ---- the matrix ---- */
static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Small counts: empty, one element, odd, not a multiple of nranks. */
static size_t small_cnt(int k)
{
    static const size_t c[] = {0, 1, 7};
    return k < 3 ? c[k] : (size_t)(13 * nr + 5);
}
enum { NSMALL = 4 };

static void run_pass(bool small_chunks)
{
    double t0 = now_s();
    const size_t big_bytes = small_chunks ? 96 << 10 : 2 << 20;
    for (int dt = 0; dt < srcclNumTypes; dt++) {
        for (int k = 0; k < NSMALL; k++) {
            size_t cnt = small_cnt(k);
            for (int op = 0; op < srcclNumOps; op++) {
                t_allreduce(dt, op, cnt, (k + op) % 2 ? INPLACE : OOP);
                t_reduce(dt, op, cnt, (k + op) % nr, (k + op + 1) % 2 ? INPLACE : OOP);
                t_reducescatter(dt, op, cnt, (enum place)((k + op + dt) % 3));
            }
            t_broadcast(dt, cnt, (nr - 1 + k) % nr, k % 2 ? INPLACE : OOP);
            t_allgather(dt, cnt, (enum place)((k + dt) % 3));
            t_alltoall(dt, cnt, (k + dt) % 2 ? INPLACE : OOP);
            t_sendrecv(dt, cnt);
        }
    }
    CALL(srcclBarrier(comm));
    double t1 = now_s();
    /* ~2 MiB: a type of each width and each op once, both placements. */
    static const struct {
        srcclDataType_t dt;
        srcclRedOp_t op;
    } big[] = {
        {srcclFloat32, srcclSum}, {srcclBfloat16, srcclAvg}, {srcclFloat16, srcclProd},
        {srcclInt64, srcclMax},   {srcclUint8, srcclMin},
    };
    for (size_t b = 0; b < sizeof(big) / sizeof(big[0]); b++) {
        srcclDataType_t dt = big[b].dt;
        srcclRedOp_t op = big[b].op;
        size_t cnt = big_bytes / esz[dt] + 3; /* odd, not a multiple of nranks */
        size_t blk = big_bytes / esz[dt] / (size_t)nr + 1;
        enum place pl = b % 2 ? INPLACE : OOP;
        t_allreduce(dt, op, cnt, pl);
        if (b < 2) {
            t_reduce(dt, op, cnt, (int)b % nr, pl);
            t_broadcast(dt, cnt, (int)(b + 1) % nr, pl);
            t_reducescatter(dt, op, blk, (enum place)(b % 3));
            t_allgather(dt, blk, (enum place)((b + 1) % 3));
            t_alltoall(dt, blk, pl);
            t_sendrecv(dt, cnt);
        }
    }
    for (int i = 0; i < 3; i++)
        CALL(srcclBarrier(comm));
    if (me == 0)
        printf("pass %-10s nranks %d: %.2f s (small counts %.2f s, large %.2f s; in srccl "
               "%.2f s)\n",
               pass_name, nr, now_s() - t0, t1 - t0, now_s() - t1, coll_s);
    coll_s = 0;
}

/* Every rank's output of the last all-reduce (cnt elements of es bytes in
 * brecv) must have the same bits: reduced elements are not associative
 * (floats), so ranks that reduced in different orders would differ. */
static void check_same_bits(size_t bytes)
{
    const uint8_t *out = brecv.base + GUARD;
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < bytes; i++)
        h = (h ^ out[i]) * 0x100000001b3ull;
    uint64_t hi = h, lo = h;
    CALL(srcclAllReduce(&hi, &hi, 1, srcclUint64, srcclMax, comm));
    CALL(srcclAllReduce(&lo, &lo, 1, srcclUint64, srcclMin, comm));
    checks++;
    if (hi != lo || hi != h)
        FAIL("outputs differ between ranks (hash %016llx here, %016llx..%016llx over the ranks)",
             (unsigned long long)h, (unsigned long long)lo, (unsigned long long)hi);
}

/* All-reduces at the one-host switch points between the one- and two-phase
 * algorithms (SRCCL_SHM_SMALL's defaults: 8 KiB, 32 KiB at 4 ranks, 1 MiB
 * at 2) and one element either side, in every width, odd counts included;
 * each checked against the reference and for the same bits on every rank. */
static void run_edge(void)
{
    static const size_t edge[] = {8 << 10, 32 << 10, 1 << 20};
    static const struct {
        srcclDataType_t dt;
        srcclRedOp_t op;
    } kind[] = {
        {srcclFloat32, srcclSum}, {srcclFloat16, srcclSum},  {srcclBfloat16, srcclAvg},
        {srcclInt8, srcclMax},    {srcclFloat64, srcclProd},
    };
    int k = 0;
    for (size_t e = 0; e < sizeof(edge) / sizeof(edge[0]); e++)
        for (size_t t = 0; t < sizeof(kind) / sizeof(kind[0]); t++)
            for (int d = -1; d <= 1; d++) {
                srcclDataType_t dt = kind[t].dt;
                size_t cnt = (size_t)((long)(edge[e] / esz[dt]) + d);
                t_allreduce(dt, kind[t].op, cnt, k++ % 2 ? INPLACE : OOP);
                check_same_bits(cnt * esz[dt]);
            }
    CALL(srcclBarrier(comm));
    if (me == 0)
        printf("pass %-10s nranks %d: OK\n", pass_name, nr);
}

static void run_wrap(void)
{
    const size_t chunks = 70000; /* > 2^16 on every connection used */
    t_allreduce(srcclFloat32, srcclSum, chunks * 64 / 4 + 3, OOP);
    t_allreduce(srcclInt32, srcclMax, chunks * 64 / 4, INPLACE);
    t_sendrecv(srcclUint8, chunks * 64 + 1);
    CALL(srcclBarrier(comm));
    if (me == 0)
        printf("pass %-10s nranks %d: OK\n", pass_name, nr);
}

int main(int argc, char **argv)
{
    static const char *const all[] = {"ring", "rd"};
    const char *const *passes = all;
    int npass = 2;
    if (argc > 1) {
        passes = (const char *const *)&argv[1];
        npass = argc - 1;
    }
    for (int p = 0; p < npass; p++) {
        pass_name = passes[p];
        bool small = strstr(pass_name, "-small") != NULL;
        bool wrap = strstr(pass_name, "-wrap") != NULL;
        bool edge = strstr(pass_name, "-edge") != NULL;
        char algo[16];
        snprintf(algo, sizeof(algo), "%.*s", (int)strcspn(pass_name, "-"), pass_name);
        setenv("SRCCL_ALGO", algo, 1);
        if (!strcmp(algo, "shm")) {
            setenv("SRCCL_SHM", "1", 1);
            if (small) {
                setenv("SRCCL_SHM_BYTES", "1K", 1);
                setenv("SRCCL_SHM_SMALL", "256", 1);
            } else { /* the defaults */
                unsetenv("SRCCL_SHM_BYTES");
                unsetenv("SRCCL_SHM_SMALL");
            }
        }
        if (small) {
            setenv("SRCCL_CHUNK_BYTES", "1024", 1);
            setenv("SRCCL_SLOTS", "2", 1);
        } else if (wrap) {
            setenv("SRCCL_CHUNK_BYTES", "64", 1);
            setenv("SRCCL_SLOTS", "5", 1);
        } else {
            unsetenv("SRCCL_CHUNK_BYTES");
            unsetenv("SRCCL_SLOTS");
        }
        snprintf(ctx, sizeof(ctx), "init");
        CALL(srcclCommInitFromEnv(&comm));
        CALL(srcclCommUserRank(comm, &me));
        CALL(srcclCommCount(comm, &nr));
        if (wrap)
            run_wrap();
        else if (edge)
            run_edge();
        else
            run_pass(small);
        CALL(srcclCommDestroy(comm));
        comm = NULL;
    }
    if (failures) {
        fprintf(stderr, "rank %d: %ld of %ld checks FAILED\n", me, failures, checks);
        return 1;
    }
    if (me == 0)
        printf("coll_test: nranks %d: %ld checks on rank 0 OK\n", nr, checks);
    return 0;
}

/* srccl-perf: collective benchmark printing nccl-tests' table (size, count,
 * type, redop, root, then time, algbw, busbw and #wrong out of place and
 * in place). One binary for every collective (-o); run it under srccl-run:
 *
 *   srccl-run -n 4 srccl-perf -b 8 -e 64M -f 2 -o allreduce -d float -c 1
 *
 * busbw = algbw * factor, with nccl-tests' factors: all-reduce 2(n-1)/n,
 * all-gather and reduce-scatter (n-1)/n, all-to-all (n-1)/n, broadcast and
 * reduce 1. Sizes are total bytes as in nccl-tests (for all-gather the
 * gathered output, for reduce-scatter the input). The time is the slowest
 * rank's average.
 *
 * --csv FILE writes the table's rows as CSV (rank 0); --plot FILE.png draws
 * busbw against size (log2 axis) with gnuplot, one line per datatype / op
 * and placement. */
#include "srccl.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

enum coll { C_ALLREDUCE, C_BROADCAST, C_REDUCE, C_ALLGATHER, C_REDUCESCATTER, C_ALLTOALL, C_CNT };
static const char *const coll_name[C_CNT] = {"allreduce", "broadcast",     "reduce",
                                             "allgather", "reducescatter", "alltoall"};
static const char *const type_name[srcclNumTypes] = {
    "int8", "uint8", "int32", "uint32", "int64", "uint64", "half", "float", "double", "bfloat16"};
static const size_t type_size[srcclNumTypes] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2};
static const char *const op_name[srcclNumOps] = {"sum", "prod", "max", "min", "avg"};

struct opts {
    size_t min_bytes, max_bytes, step_bytes;
    double factor;
    enum coll coll;
    int dt_first, dt_last;
    int op_first, op_last;
    int root;
    int check;
    int iters, warmup;
    const char *csv;  /* --csv FILE */
    const char *plot; /* --plot FILE.png */
};

/* One printed row, kept for the plot. */
struct row {
    size_t bytes;
    int dt, op;
    double busbw[2]; /* out of place, in place */
};

#define CHECK(call)                                                                                \
    do {                                                                                           \
        srcclResult_t r_ = (call);                                                                 \
        if (r_ != srcclSuccess) {                                                                  \
            fprintf(stderr, "srccl-perf: %s failed: %s: %s\n", #call, srcclGetErrorString(r_),     \
                    srcclGetLastError(comm));                                                      \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static size_t parse_size(const char *s)
{
    char *end;
    double v = strtod(s, &end);
    switch (*end) {
    case 'K':
    case 'k':
        v *= 1024;
        break;
    case 'M':
    case 'm':
        v *= 1024 * 1024;
        break;
    case 'G':
    case 'g':
        v *= 1024.0 * 1024 * 1024;
        break;
    default:
        break;
    }
    return (size_t)v;
}

static int lookup(const char *s, const char *const *names, int cnt)
{
    for (int i = 0; i < cnt; i++)
        if (!strcasecmp(s, names[i]))
            return i;
    return -1;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: srccl-run -n N srccl-perf [options]\n"
               "  -b, --minbytes SIZE   smallest size (default 8; K/M/G suffixes)\n"
               "  -e, --maxbytes SIZE   largest size (default 32M)\n"
               "  -f, --stepfactor F    multiply the size by F (default 2)\n"
               "  -i, --stepbytes SIZE  or add SIZE (with -f 0... or -i alone)\n"
               "  -o, --coll NAME       allreduce (default), broadcast, reduce, allgather,\n"
               "                        reducescatter, alltoall\n"
               "  -R, --redop OP        sum (default), prod, max, min, avg, all\n"
               "  -d, --datatype T      float (default), half, bfloat16, double, int8, uint8,\n"
               "                        int32, uint32, int64, uint64, all\n"
               "  -r, --root R          root of broadcast/reduce (default 0)\n"
               "  -c, --check 0|1       check the results (default 1)\n"
               "  -n, --iters N         timed iterations (default 20)\n"
               "  -w, --warmup_iters N  untimed iterations first (default 5)\n"
               "      --csv FILE        also write the rows as CSV (rank 0)\n"
               "      --plot FILE.png   draw busbw against size with gnuplot (must be installed)\n"
               "note: unlike nccl-tests (one binary per collective, -o = reduction op), -o picks\n"
               "the collective and -R the op.\n");
}

static void parse(int argc, char **argv, struct opts *o)
{
    *o = (struct opts){.min_bytes = 8,
                       .max_bytes = 32 << 20,
                       .factor = 2,
                       .coll = C_ALLREDUCE,
                       .dt_first = srcclFloat32,
                       .dt_last = srcclFloat32,
                       .op_first = srcclSum,
                       .op_last = srcclSum,
                       .check = 1,
                       .iters = 20,
                       .warmup = 5};
    static const struct option lo[] = {{"minbytes", required_argument, NULL, 'b'},
                                       {"maxbytes", required_argument, NULL, 'e'},
                                       {"stepfactor", required_argument, NULL, 'f'},
                                       {"stepbytes", required_argument, NULL, 'i'},
                                       {"coll", required_argument, NULL, 'o'},
                                       {"redop", required_argument, NULL, 'R'},
                                       {"datatype", required_argument, NULL, 'd'},
                                       {"root", required_argument, NULL, 'r'},
                                       {"check", required_argument, NULL, 'c'},
                                       {"iters", required_argument, NULL, 'n'},
                                       {"warmup_iters", required_argument, NULL, 'w'},
                                       {"help", no_argument, NULL, 'h'},
                                       {"csv", required_argument, NULL, 'C'},
                                       {"plot", required_argument, NULL, 'P'},
                                       {NULL, 0, NULL, 0}};
    int c, v;
    while ((c = getopt_long(argc, argv, "b:e:f:i:o:R:d:r:c:n:w:h", lo, NULL)) != -1) {
        switch (c) {
        case 'b':
            o->min_bytes = parse_size(optarg);
            break;
        case 'e':
            o->max_bytes = parse_size(optarg);
            break;
        case 'f':
            o->factor = atof(optarg);
            break;
        case 'i':
            o->step_bytes = parse_size(optarg);
            o->factor = 0;
            break;
        case 'o':
            if ((v = lookup(optarg, coll_name, C_CNT)) < 0) {
                fprintf(stderr, "srccl-perf: unknown collective %s\n", optarg);
                exit(2);
            }
            o->coll = (enum coll)v;
            break;
        case 'R':
            if (!strcasecmp(optarg, "all")) {
                o->op_first = 0, o->op_last = srcclNumOps - 1;
            } else if ((v = lookup(optarg, op_name, srcclNumOps)) >= 0) {
                o->op_first = o->op_last = v;
            } else {
                fprintf(stderr, "srccl-perf: unknown op %s\n", optarg);
                exit(2);
            }
            break;
        case 'd':
            if (!strcasecmp(optarg, "all")) {
                o->dt_first = 0, o->dt_last = srcclNumTypes - 1;
            } else {
                static const struct {
                    const char *n;
                    int t;
                } alias[] = {{"float16", srcclFloat16}, {"fp16", srcclFloat16},
                             {"float32", srcclFloat32}, {"fp32", srcclFloat32},
                             {"float64", srcclFloat64}, {"bf16", srcclBfloat16},
                             {"char", srcclInt8},       {"int", srcclInt32}};
                v = lookup(optarg, type_name, srcclNumTypes);
                for (size_t k = 0; v < 0 && k < sizeof(alias) / sizeof(alias[0]); k++)
                    if (!strcasecmp(optarg, alias[k].n))
                        v = alias[k].t;
                if (v < 0) {
                    fprintf(stderr, "srccl-perf: unknown datatype %s\n", optarg);
                    exit(2);
                }
                o->dt_first = o->dt_last = v;
            }
            break;
        case 'r':
            o->root = atoi(optarg);
            break;
        case 'c':
            o->check = atoi(optarg);
            break;
        case 'n':
            o->iters = atoi(optarg);
            break;
        case 'w':
            o->warmup = atoi(optarg);
            break;
        case 'C':
            o->csv = optarg;
            break;
        case 'P':
            o->plot = optarg;
            break;
        case 'h':
            usage(stdout);
            exit(0);
        default:
            usage(stderr);
            exit(2);
        }
    }
    if (o->iters < 1 || o->warmup < 0 || o->max_bytes < o->min_bytes ||
        (o->factor <= 1 && o->step_bytes == 0)) {
        usage(stderr);
        exit(2);
    }
}

/* ---- data for the check: small integers, exact in every type ---- */
static double in_val(int rank, size_t i, srcclRedOp_t op)
{
    if (op == srcclProd)
        return (double)(1 + ((i + (size_t)rank) % 2)); /* 1 or 2 */
    return (double)((i * 7 + (size_t)rank * 3) % 5);
}

static uint16_t to_half(double d) /* exact for the small integers used */
{
    float f = (float)d;
    if (f == 0)
        return 0;
    int e;
    float m = frexpf(f, &e); /* f = m * 2^e, 0.5 <= m < 1 */
    uint32_t man = (uint32_t)ldexpf(m, 11) & 0x3ffu;
    return (uint16_t)(((uint32_t)(e - 1 + 15) << 10) | man);
}

static double from_half(uint16_t h)
{
    int e = (h >> 10) & 0x1f;
    double m = h & 0x3ff;
    double v = e ? ldexp(1024 + m, e - 25) : ldexp(m, -24);
    return h & 0x8000 ? -v : v;
}

static void put(void *buf, size_t i, srcclDataType_t dt, double v)
{
    switch (dt) {
    case srcclInt8:
        ((int8_t *)buf)[i] = (int8_t)(int64_t)v;
        break;
    case srcclUint8:
        ((uint8_t *)buf)[i] = (uint8_t)(uint64_t)v;
        break;
    case srcclInt32:
        ((int32_t *)buf)[i] = (int32_t)(int64_t)v;
        break;
    case srcclUint32:
        ((uint32_t *)buf)[i] = (uint32_t)(uint64_t)v;
        break;
    case srcclInt64:
        ((int64_t *)buf)[i] = (int64_t)v;
        break;
    case srcclUint64:
        ((uint64_t *)buf)[i] = (uint64_t)v;
        break;
    case srcclFloat16:
        ((uint16_t *)buf)[i] = to_half(v);
        break;
    case srcclFloat32:
        ((float *)buf)[i] = (float)v;
        break;
    case srcclFloat64:
        ((double *)buf)[i] = v;
        break;
    case srcclBfloat16: {
        float f = (float)v;
        uint32_t b;
        memcpy(&b, &f, 4);
        ((uint16_t *)buf)[i] = (uint16_t)(b >> 16);
        break;
    }
    default:
        break;
    }
}

static double get(const void *buf, size_t i, srcclDataType_t dt)
{
    switch (dt) {
    case srcclInt8:
        return ((const int8_t *)buf)[i];
    case srcclUint8:
        return ((const uint8_t *)buf)[i];
    case srcclInt32:
        return ((const int32_t *)buf)[i];
    case srcclUint32:
        return ((const uint32_t *)buf)[i];
    case srcclInt64:
        return (double)((const int64_t *)buf)[i];
    case srcclUint64:
        return (double)((const uint64_t *)buf)[i];
    case srcclFloat16:
        return from_half(((const uint16_t *)buf)[i]);
    case srcclFloat32:
        return ((const float *)buf)[i];
    case srcclFloat64:
        return ((const double *)buf)[i];
    case srcclBfloat16: {
        uint32_t b = (uint32_t)((const uint16_t *)buf)[i] << 16;
        float f;
        memcpy(&f, &b, 4);
        return f;
    }
    default:
        return 0;
    }
}

/* Expected reduction of element i over all ranks (values stay small). */
static double expect_red(int n, size_t i, srcclRedOp_t op, srcclDataType_t dt)
{
    double acc = in_val(0, i, op);
    for (int r = 1; r < n; r++) {
        double v = in_val(r, i, op);
        acc = op == srcclProd  ? acc * v
              : op == srcclMax ? fmax(acc, v)
              : op == srcclMin ? fmin(acc, v)
                               : acc + v;
    }
    if (op == srcclAvg) {
        acc /= n;
        if (dt <= srcclUint64)
            acc = trunc(acc);
    }
    if (dt == srcclUint8 || dt == srcclInt8)
        acc = (double)(dt == srcclInt8 ? (int8_t)(int64_t)acc : (uint8_t)(int64_t)acc);
    return acc;
}

static bool close_enough(double got, double want, srcclDataType_t dt)
{
    double tol = dt == srcclFloat16    ? 1e-3
                 : dt == srcclBfloat16 ? 8e-3
                 : dt == srcclFloat32  ? 1e-6
                 : dt == srcclFloat64  ? 1e-12
                                       : 0;
    return fabs(got - want) <= tol * fmax(1.0, fabs(want));
}

struct bench {
    srcclComm_t comm;
    int rank, n;
    const struct opts *o;
    char *send, *recv; /* max_bytes each (send: more for the in-place layouts) */
};

/* Runs one collective; in place per nccl-tests' conventions. */
static srcclResult_t run(struct bench *b, size_t cnt, srcclDataType_t dt, srcclRedOp_t op,
                         bool inplace)
{
    size_t es = type_size[dt];
    char *s = b->send, *r = b->recv;
    switch (b->o->coll) {
    case C_ALLREDUCE:
        return srcclAllReduce(inplace ? r : s, r, cnt, dt, op, b->comm);
    case C_BROADCAST:
        return srcclBroadcast(inplace ? r : s, r, cnt, dt, b->o->root, b->comm);
    case C_REDUCE:
        return srcclReduce(inplace ? r : s, r, cnt, dt, op, b->o->root, b->comm);
    case C_ALLGATHER:
        return srcclAllGather(inplace ? r + (size_t)b->rank * cnt * es : s, r, cnt, dt, b->comm);
    case C_REDUCESCATTER:
        return srcclReduceScatter(s, inplace ? s + (size_t)b->rank * cnt * es : r, cnt, dt, op,
                                  b->comm);
    case C_ALLTOALL:
        return srcclAllToAll(inplace ? r : s, r, cnt, dt, b->comm);
    default:
        return srcclInvalidArgument;
    }
}

/* Fills the inputs for a check run; cnt is per-call (per block where blocks). */
static void fill(struct bench *b, size_t cnt, srcclDataType_t dt, srcclRedOp_t op, bool inplace)
{
    size_t es = type_size[dt];
    int n = b->n, me = b->rank;
    switch (b->o->coll) {
    case C_ALLREDUCE:
    case C_REDUCE:
    case C_BROADCAST:
        for (size_t i = 0; i < cnt; i++)
            put(inplace ? b->recv : b->send, i, dt, in_val(me, i, op));
        break;
    case C_ALLGATHER: {
        char *dst = inplace ? b->recv + (size_t)me * cnt * es : b->send;
        for (size_t i = 0; i < cnt; i++)
            put(dst, i, dt, in_val(me, i, op));
        break;
    }
    case C_REDUCESCATTER:
        for (size_t i = 0; i < cnt * (size_t)n; i++)
            put(b->send, i, dt, in_val(me, i, op));
        break;
    case C_ALLTOALL: /* block j for rank j: value from (me, j * cnt + i) */
        for (size_t i = 0; i < cnt * (size_t)n; i++)
            put(inplace ? b->recv : b->send, i, dt, in_val(me, i, op));
        break;
    default:
        break;
    }
}

static long check(struct bench *b, size_t cnt, srcclDataType_t dt, srcclRedOp_t op, bool inplace)
{
    int n = b->n, me = b->rank, root = b->o->root;
    size_t es = type_size[dt];
    long wrong = 0;
    switch (b->o->coll) {
    case C_ALLREDUCE:
        for (size_t i = 0; i < cnt; i++)
            wrong += !close_enough(get(b->recv, i, dt), expect_red(n, i, op, dt), dt);
        break;
    case C_REDUCE:
        if (me == root)
            for (size_t i = 0; i < cnt; i++)
                wrong += !close_enough(get(b->recv, i, dt), expect_red(n, i, op, dt), dt);
        break;
    case C_BROADCAST:
        for (size_t i = 0; i < cnt; i++)
            wrong += !close_enough(get(b->recv, i, dt), in_val(root, i, op), dt);
        break;
    case C_ALLGATHER:
        for (int r = 0; r < n; r++)
            for (size_t i = 0; i < cnt; i++)
                wrong += !close_enough(get(b->recv, (size_t)r * cnt + i, dt), in_val(r, i, op), dt);
        break;
    case C_REDUCESCATTER: {
        const char *out = inplace ? b->send + (size_t)me * cnt * es : b->recv;
        for (size_t i = 0; i < cnt; i++)
            wrong +=
                !close_enough(get(out, i, dt), expect_red(n, (size_t)me * cnt + i, op, dt), dt);
        break;
    }
    case C_ALLTOALL:
        for (int r = 0; r < n; r++)
            for (size_t i = 0; i < cnt; i++)
                wrong += !close_enough(get(b->recv, (size_t)r * cnt + i, dt),
                                       in_val(r, (size_t)me * cnt + i, op), dt);
        break;
    default:
        break;
    }
    (void)es;
    return wrong;
}

/* One size, out of place or in place: average time in us (slowest rank),
 * and the wrong elements summed over the ranks (-1 without -c). */
static void measure(struct bench *b, size_t cnt, srcclDataType_t dt, srcclRedOp_t op, bool inplace,
                    double *us, long *wrong)
{
    srcclComm_t comm = b->comm;
    const struct opts *o = b->o;
    *wrong = -1;
    if (o->check) {
        fill(b, cnt, dt, op, inplace);
        CHECK(run(b, cnt, dt, op, inplace));
        double w = (double)check(b, cnt, dt, op, inplace);
        CHECK(srcclAllReduce(&w, &w, 1, srcclFloat64, srcclSum, comm));
        *wrong = (long)w;
    }
    for (int i = 0; i < o->warmup; i++)
        CHECK(run(b, cnt, dt, op, inplace));
    CHECK(srcclBarrier(comm));
    double t0 = now_s();
    for (int i = 0; i < o->iters; i++)
        CHECK(run(b, cnt, dt, op, inplace));
    double t = (now_s() - t0) / o->iters * 1e6;
    CHECK(srcclAllReduce(&t, &t, 1, srcclFloat64, srcclMax, comm));
    *us = t;
}

/* gnuplot's path from PATH, or false. */
static bool find_gnuplot(char *path, size_t len)
{
    const char *env = getenv("PATH");
    char dirs[4096];
    snprintf(dirs, sizeof(dirs), "%s", env ? env : "/usr/bin:/bin");
    for (char *save = NULL, *d = strtok_r(dirs, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
        snprintf(path, len, "%s/gnuplot", *d ? d : ".");
        if (access(path, X_OK) == 0)
            return true;
    }
    return false;
}

/* busbw against size, one line per datatype / op and placement; 0 on
 * success. The data goes through a temporary file, one gnuplot data block
 * per series. */
static int plot(const struct opts *o, const struct row *rows, size_t nrows, int nranks,
                const char *gnuplot)
{
    char dat[] = "/tmp/srccl-perf-XXXXXX";
    int fd = mkstemp(dat);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!f) {
        fprintf(stderr, "srccl-perf: --plot: temporary file: %s\n", strerror(errno));
        return 1;
    }
    int blocks = 0, first_dt[64], first_op[64];
    for (size_t i = 0; i < nrows; i++) {
        if (i == 0 || rows[i].dt != rows[i - 1].dt || rows[i].op != rows[i - 1].op) {
            if (i)
                fprintf(f, "\n\n");
            if (blocks < 64) {
                first_dt[blocks] = rows[i].dt;
                first_op[blocks] = rows[i].op;
            }
            blocks++;
        }
        fprintf(f, "%zu %.6f %.6f\n", rows[i].bytes, rows[i].busbw[0], rows[i].busbw[1]);
    }
    fclose(f);
    if (blocks > 64)
        blocks = 64;
    char cmd[4200];
    snprintf(cmd, sizeof(cmd), "'%s'", gnuplot);
    FILE *g = popen(cmd, "w");
    if (!g) {
        fprintf(stderr, "srccl-perf: --plot: cannot run %s: %s\n", gnuplot, strerror(errno));
        unlink(dat);
        return 1;
    }
    bool has_op = o->coll == C_ALLREDUCE || o->coll == C_REDUCE || o->coll == C_REDUCESCATTER;
    fprintf(g,
            "if (strstrt(GPVAL_TERMINALS, 'pngcairo') > 0) {\n"
            "  set terminal pngcairo size 1000,600 noenhanced\n"
            "} else {\n"
            "  set terminal png size 1000,600 noenhanced\n"
            "}\n"
            "set output '%s'\n"
            "set title 'srccl-perf %s, %d ranks: bus bandwidth'\n"
            "set logscale x 2\n"
            "set format x '%%.0b%%B'\n"
            "set xlabel 'size (bytes)'\n"
            "set ylabel 'busbw (GB/s)'\n"
            "set key top left\n"
            "set grid\n"
            "plot",
            o->plot, coll_name[o->coll], nranks);
    for (int b = 0; b < blocks; b++) {
        for (int ip = 0; ip < 2; ip++)
            fprintf(g, "%s '%s' index %d using 1:%d with linespoints title '%s%s%s %s'",
                    b || ip ? "," : "", dat, b, 2 + ip, type_name[first_dt[b]], has_op ? " " : "",
                    has_op ? op_name[first_op[b]] : "", ip ? "in-place" : "out-of-place");
    }
    fprintf(g, "\n");
    int st = pclose(g);
    unlink(dat);
    if (st != 0) {
        fprintf(stderr, "srccl-perf: --plot: gnuplot failed (status %d)\n", st);
        return 1;
    }
    if (access(o->plot, R_OK) != 0) {
        fprintf(stderr, "srccl-perf: --plot: gnuplot wrote no %s\n", o->plot);
        return 1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    struct opts o;
    parse(argc, argv, &o);
    char gnuplot[4200] = "";
    if (o.plot && !find_gnuplot(gnuplot, sizeof(gnuplot))) {
        fprintf(stderr, "srccl-perf: --plot needs gnuplot, which is not in PATH (Debian: apt-get "
                        "install gnuplot-nox)\n");
        return 1;
    }
    srcclComm_t comm = NULL;
    srcclResult_t r = srcclCommInitFromEnv(&comm);
    if (r) {
        fprintf(stderr, "srccl-perf: srcclCommInitFromEnv: %s: %s\n", srcclGetErrorString(r),
                srcclGetLastError(NULL));
        return 1;
    }
    struct bench b = {.comm = comm, .o = &o};
    CHECK(srcclCommUserRank(comm, &b.rank));
    CHECK(srcclCommCount(comm, &b.n));
    if (o.root < 0 || o.root >= b.n) {
        fprintf(stderr, "srccl-perf: root %d out of range\n", o.root);
        return 2;
    }
    size_t cap = o.max_bytes + 4096;
    b.send = aligned_alloc(4096, (cap + 4095) / 4096 * 4096);
    b.recv = aligned_alloc(4096, (cap + 4095) / 4096 * 4096);
    if (!b.send || !b.recv) {
        fprintf(stderr, "srccl-perf: out of memory\n");
        return 1;
    }
    memset(b.send, 0, cap);
    memset(b.recv, 0, cap);
    FILE *csv = NULL;
    struct row *rows = NULL;
    size_t nrows = 0, rows_cap = 0;
    if (b.rank == 0 && o.csv) {
        if (!(csv = fopen(o.csv, "w"))) {
            fprintf(stderr, "srccl-perf: --csv %s: %s\n", o.csv, strerror(errno));
            return 1;
        }
        fprintf(csv, "size_bytes,count,type,redop,root,oop_time_us,oop_algbw_gbs,oop_busbw_gbs,"
                     "oop_wrong,ip_time_us,ip_algbw_gbs,ip_busbw_gbs,ip_wrong\n");
    }

    bool rooted = o.coll == C_BROADCAST || o.coll == C_REDUCE;
    bool has_op = o.coll == C_ALLREDUCE || o.coll == C_REDUCE || o.coll == C_REDUCESCATTER;
    bool blocked = o.coll == C_ALLGATHER || o.coll == C_REDUCESCATTER || o.coll == C_ALLTOALL;
    double nf = b.n;
    double busf = o.coll == C_ALLREDUCE ? 2 * (nf - 1) / nf : rooted ? 1 : (nf - 1) / nf;
    if (b.rank == 0) {
        char host[256] = "?";
        gethostname(host, sizeof(host));
        printf("# srccl-perf %s: nranks %d minBytes %zu maxBytes %zu step: %g(%s) warmup iters: %d "
               "iters: %d validation: %d\n",
               coll_name[o.coll], b.n, o.min_bytes, o.max_bytes,
               o.factor > 0 ? o.factor : (double)o.step_bytes, o.factor > 0 ? "factor" : "bytes",
               o.warmup, o.iters, o.check);
        printf("#\n# Using devices\n#  Rank %2d Pid %6d on %10s (busbw factor %.3f)\n#\n", 0,
               (int)getpid(), host, busf);
        printf("#%69s%-33s%s\n", "", "out-of-place", "in-place");
        printf("#%11s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s\n", "size",
               "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time",
               "algbw", "busbw", "#wrong");
        printf("#%11s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s\n", "(B)",
               "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)",
               "");
        fflush(stdout);
    }
    long total_wrong = 0;
    double bw_sum = 0;
    int bw_cnt = 0;
    for (int dt = o.dt_first; dt <= o.dt_last; dt++) {
        for (int op = o.op_first; op <= (has_op ? o.op_last : o.op_first); op++) {
            for (size_t size = o.min_bytes; size <= o.max_bytes;) {
                size_t es = type_size[dt];
                size_t cnt = size / es;                         /* total elements */
                size_t per = blocked ? cnt / (size_t)b.n : cnt; /* per call argument */
                size_t total = blocked ? per * (size_t)b.n : per;
                size_t bytes = total * es;
                double t[2];
                long w[2];
                for (int ip = 0; ip < 2; ip++)
                    measure(&b, per, (srcclDataType_t)dt, (srcclRedOp_t)op, ip == 1, &t[ip],
                            &w[ip]);
                if (b.rank == 0) {
                    struct row rw = {bytes, dt, op, {0, 0}};
                    printf("%12zu  %12zu  %8s  %6s  %6d", bytes, total, type_name[dt],
                           has_op ? op_name[op] : "none", rooted ? o.root : -1);
                    if (csv)
                        fprintf(csv, "%zu,%zu,%s,%s,%d", bytes, total, type_name[dt],
                                has_op ? op_name[op] : "none", rooted ? o.root : -1);
                    for (int ip = 0; ip < 2; ip++) {
                        double algbw = t[ip] > 0 ? (double)bytes / 1e3 / t[ip] : 0;
                        char wbuf[24];
                        if (w[ip] < 0)
                            snprintf(wbuf, sizeof(wbuf), "N/A");
                        else
                            snprintf(wbuf, sizeof(wbuf), "%ld", w[ip]);
                        printf("  %7.*f  %6.2f  %6.2f  %6s", t[ip] < 100 ? 2 : 1, t[ip], algbw,
                               algbw * busf, wbuf);
                        if (csv) /* full precision: the table rounds */
                            fprintf(csv, ",%.3f,%.6f,%.6f,%s", t[ip], algbw, algbw * busf, wbuf);
                        rw.busbw[ip] = algbw * busf;
                        bw_sum += algbw * busf;
                        bw_cnt++;
                    }
                    printf("\n");
                    fflush(stdout);
                    if (csv)
                        fprintf(csv, "\n");
                    if (o.plot) {
                        if (nrows == rows_cap) {
                            rows_cap = rows_cap ? 2 * rows_cap : 64;
                            struct row *nr = realloc(rows, rows_cap * sizeof(*rows));
                            if (!nr) {
                                fprintf(stderr, "srccl-perf: out of memory\n");
                                exit(1);
                            }
                            rows = nr;
                        }
                        rows[nrows++] = rw;
                    }
                }
                total_wrong += (w[0] > 0 ? w[0] : 0) + (w[1] > 0 ? w[1] : 0);
                size_t next =
                    o.factor > 0 ? (size_t)((double)size * o.factor) : size + o.step_bytes;
                if (next <= size)
                    break;
                size = next;
            }
        }
    }
    if (b.rank == 0) {
        printf("# Out of bounds values : %ld %s\n", total_wrong, total_wrong ? "FAILED" : "OK");
        printf("# Avg bus bandwidth    : %g \n#\n", bw_cnt ? bw_sum / bw_cnt : 0);
    }
    CHECK(srcclBarrier(comm));
    CHECK(srcclCommDestroy(comm));
    free(b.send);
    free(b.recv);
    int rc = total_wrong ? 1 : 0;
    if (csv && fclose(csv) != 0) {
        fprintf(stderr, "srccl-perf: --csv %s: %s\n", o.csv, strerror(errno));
        rc = 1;
    }
    if (b.rank == 0 && o.plot && plot(&o, rows, nrows, b.n, gnuplot))
        rc = 1;
    free(rows);
    return rc;
}

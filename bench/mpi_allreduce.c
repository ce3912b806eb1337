/* mpi_allreduce: MPI_Allreduce (float, sum) timed the way srccl-perf times
 * srccl's all-reduce, with the same columns (nccl-tests' table): size,
 * count, type, redop, root, then time, algbw and busbw out of place and in
 * place (MPI_IN_PLACE), and #wrong from one checked call per size.
 * busbw = algbw * 2(n-1)/n (nccl-tests' all-reduce factor); the time is
 * the slowest rank's average over the timed iterations, after warm-up
 * iterations and a barrier. For bench/srccl_vs_mpi.sh; not a test.
 *
 *   mpirun -np N mpi_allreduce [-b MIN] [-e MAX] [-f FACTOR] [-n ITERS]
 *                              [-w WARMUP] [-c 0|1] [--csv FILE]
 * Sizes take K/M/G suffixes, as srccl-perf's. */
#include <mpi.h>

#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct opts {
    size_t min_bytes, max_bytes;
    double factor;
    int iters, warmup, check;
    const char *csv;
};

static size_t parse_size(const char *s)
{
    char *end;
    double v = strtod(s, &end);
    if (*end == 'K' || *end == 'k')
        v *= 1024;
    else if (*end == 'M' || *end == 'm')
        v *= 1024 * 1024;
    else if (*end == 'G' || *end == 'g')
        v *= 1024.0 * 1024 * 1024;
    return (size_t)v;
}

static int parse(int argc, char **argv, struct opts *o)
{
    *o = (struct opts){
        .min_bytes = 8, .max_bytes = 64 << 20, .factor = 2, .iters = 20, .warmup = 5, .check = 1};
    static const struct option lo[] = {{"csv", required_argument, NULL, 'C'}, {NULL, 0, NULL, 0}};
    int c;
    while ((c = getopt_long(argc, argv, "b:e:f:n:w:c:", lo, NULL)) != -1) {
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
        case 'n':
            o->iters = atoi(optarg);
            break;
        case 'w':
            o->warmup = atoi(optarg);
            break;
        case 'c':
            o->check = atoi(optarg);
            break;
        case 'C':
            o->csv = optarg;
            break;
        default:
            return -1;
        }
    }
    if (o->iters < 1 || o->warmup < 0 || o->factor <= 1 || o->min_bytes < 4 ||
        o->max_bytes < o->min_bytes)
        return -1;
    return 0;
}

/* Small integers: float sums are exact. */
static float in_val(int rank, size_t i)
{
    return (float)((i * 7 + (size_t)rank * 3) % 5);
}

/* One size, out of place or in place: the slowest rank's average time in
 * us, and the wrong elements over all ranks (-1 without a check). */
static void measure(const struct opts *o, float *s, float *r, size_t cnt, bool inplace, int rank,
                    int n, double *us, long *wrong)
{
    void *src = inplace ? MPI_IN_PLACE : (void *)s;
    float *fill = inplace ? r : s;
    *wrong = -1;
    if (o->check) {
        for (size_t i = 0; i < cnt; i++)
            fill[i] = in_val(rank, i);
        MPI_Allreduce(src, r, (int)cnt, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        long bad = 0;
        for (size_t i = 0; i < cnt; i++) {
            float want = 0;
            for (int k = 0; k < n; k++)
                want += in_val(k, i);
            bad += r[i] != want;
        }
        MPI_Allreduce(&bad, wrong, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    }
    for (int i = 0; i < o->warmup; i++)
        MPI_Allreduce(src, r, (int)cnt, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int i = 0; i < o->iters; i++)
        MPI_Allreduce(src, r, (int)cnt, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    double t = (MPI_Wtime() - t0) / o->iters * 1e6;
    MPI_Allreduce(&t, us, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, n;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    struct opts o;
    if (parse(argc, argv, &o)) {
        if (rank == 0)
            fprintf(stderr, "usage: mpirun -np N mpi_allreduce [-b MIN] [-e MAX] [-f FACTOR] "
                            "[-n ITERS] [-w WARMUP] [-c 0|1] [--csv FILE]\n");
        MPI_Finalize();
        return 2;
    }
    size_t cap = o.max_bytes / sizeof(float) + 1;
    float *s = calloc(cap, sizeof(float)), *r = calloc(cap, sizeof(float));
    FILE *csv = NULL;
    if (!s || !r) {
        fprintf(stderr, "mpi_allreduce: out of memory\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    if (rank == 0 && o.csv && !(csv = fopen(o.csv, "w"))) {
        fprintf(stderr, "mpi_allreduce: --csv %s: %s\n", o.csv, strerror(errno));
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    double busf = 2.0 * (n - 1) / n;
    if (rank == 0) {
        printf("# mpi_allreduce: nranks %d minBytes %zu maxBytes %zu step: %g(factor) warmup "
               "iters: %d iters: %d validation: %d\n",
               n, o.min_bytes, o.max_bytes, o.factor, o.warmup, o.iters, o.check);
        printf("#%69s%-33s%s\n", "", "out-of-place", "in-place");
        printf("#%11s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s\n", "size",
               "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time",
               "algbw", "busbw", "#wrong");
        printf("#%11s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s\n", "(B)",
               "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)",
               "");
        if (csv)
            fprintf(csv, "size_bytes,count,type,redop,root,oop_time_us,oop_algbw_gbs,"
                         "oop_busbw_gbs,oop_wrong,ip_time_us,ip_algbw_gbs,ip_busbw_gbs,ip_wrong\n");
        fflush(stdout);
    }
    long total_wrong = 0;
    for (size_t size = o.min_bytes; size <= o.max_bytes;) {
        size_t cnt = size / sizeof(float), bytes = cnt * sizeof(float);
        double t[2];
        long w[2];
        for (int ip = 0; ip < 2; ip++)
            measure(&o, s, r, cnt, ip == 1, rank, n, &t[ip], &w[ip]);
        if (rank == 0) {
            printf("%12zu  %12zu  %8s  %6s  %6d", bytes, cnt, "float", "sum", -1);
            if (csv)
                fprintf(csv, "%zu,%zu,float,sum,-1", bytes, cnt);
            for (int ip = 0; ip < 2; ip++) {
                double algbw = t[ip] > 0 ? (double)bytes / 1e3 / t[ip] : 0;
                char wbuf[24];
                if (w[ip] < 0)
                    snprintf(wbuf, sizeof(wbuf), "N/A");
                else
                    snprintf(wbuf, sizeof(wbuf), "%ld", w[ip]);
                printf("  %7.*f  %6.2f  %6.2f  %6s", t[ip] < 100 ? 2 : 1, t[ip], algbw,
                       algbw * busf, wbuf);
                if (csv)
                    fprintf(csv, ",%.3f,%.6f,%.6f,%s", t[ip], algbw, algbw * busf, wbuf);
            }
            printf("\n");
            fflush(stdout);
            if (csv)
                fprintf(csv, "\n");
        }
        total_wrong += (w[0] > 0 ? w[0] : 0) + (w[1] > 0 ? w[1] : 0);
        size_t next = (size_t)((double)size * o.factor);
        if (next <= size)
            break;
        size = next;
    }
    if (rank == 0) {
        printf("# Out of bounds values : %ld %s\n", total_wrong, total_wrong ? "FAILED" : "OK");
        if (csv)
            fclose(csv);
    }
    free(s);
    free(r);
    MPI_Finalize();
    return total_wrong ? 1 : 0;
}

/* mpi_compat: the Open MPI figures of bench/compat.sh, in one mpirun.
 * Between ranks 0 and 1: the 8 B ping-pong's half round trip; on all ranks:
 * MPI_Allreduce (float, sum) of 8 B and of 1 MiB. Every iteration is timed
 * on its own and the figure is the median (the slowest rank's median for
 * the all-reduce), so that a rank preempted now and then by other processes
 * on a shared machine moves it little; a mean (bench/mpi_allreduce.c) is
 * moved by every preemption. busbw = algbw at 2 ranks (nccl-tests' factor
 * 2(n-1)/n), so the 1 MiB figure is given as algbw. The 1 MiB result is
 * checked once. For bench/compat.sh; not a test. Prints one line on rank 0:
 *   mpi_compat: ranks N pingpong_8B_us X allreduce_8B_us Y
 *               allreduce_1MiB_us Z allreduce_1MiB_gbs W   (GB/s: 10^9 B/s)
 *
 *   mpirun -np N mpi_compat [-n SMALL_ITERS] [-m LARGE_ITERS] */
#define _POSIX_C_SOURCE 200809L /* getopt */

#include <mpi.h>

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

enum { AR_BIG = 1 << 20, WARMUP_DIV = 10 };

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *t, int cnt)
{
    qsort(t, (size_t)cnt, sizeof(t[0]), cmp_d);
    return cnt % 2 ? t[cnt / 2] : (t[cnt / 2 - 1] + t[cnt / 2]) / 2;
}

/* Half round trips of 8 B between ranks 0 and 1, in us (rank 0's). */
static double pingpong(int rank, int iters, double *t)
{
    char buf[8] = {0};
    int warm = iters / WARMUP_DIV;
    for (int i = -warm; i < iters; i++) {
        if (rank == 0) {
            double t0 = MPI_Wtime();
            MPI_Send(buf, 8, MPI_BYTE, 1, 1, MPI_COMM_WORLD);
            MPI_Recv(buf, 8, MPI_BYTE, 1, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            if (i >= 0)
                t[i] = (MPI_Wtime() - t0) / 2 * 1e6;
        } else if (rank == 1) {
            MPI_Recv(buf, 8, MPI_BYTE, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(buf, 8, MPI_BYTE, 0, 2, MPI_COMM_WORLD);
        }
    }
    return rank == 0 ? median(t, iters) : 0;
}

/* Median time of one MPI_Allreduce of cnt floats, in us, slowest rank. */
static double allreduce(const float *s, float *r, int cnt, int iters, double *t)
{
    int warm = iters / WARMUP_DIV + 1;
    for (int i = 0; i < warm; i++)
        MPI_Allreduce(s, r, cnt, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
    for (int i = 0; i < iters; i++) {
        double t0 = MPI_Wtime();
        MPI_Allreduce(s, r, cnt, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        t[i] = (MPI_Wtime() - t0) * 1e6;
    }
    double mine = median(t, iters), worst;
    MPI_Allreduce(&mine, &worst, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return worst;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, n, small = 5000, large = 100, c;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    while ((c = getopt(argc, argv, "n:m:")) != -1) {
        if (c == 'n')
            small = atoi(optarg);
        else if (c == 'm')
            large = atoi(optarg);
        else
            small = 0;
    }
    if (small < 1 || large < 1 || n < 2) {
        if (rank == 0)
            fprintf(stderr, "usage: mpirun -np N (N >= 2) mpi_compat [-n SMALL_ITERS] "
                            "[-m LARGE_ITERS]\n");
        MPI_Finalize();
        return 2;
    }
    int cnt = AR_BIG / (int)sizeof(float);
    double *t = malloc((size_t)(small > large ? small : large) * sizeof(double));
    float *s = malloc(AR_BIG), *r = malloc(AR_BIG);
    if (!t || !s || !r) {
        fprintf(stderr, "mpi_compat: out of memory\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    /* small integers: float sums are exact */
    for (int i = 0; i < cnt; i++)
        s[i] = (float)((i + rank) % 5);
    double pp = pingpong(rank, small, t);
    double ar8 = allreduce(s, r, 2, small, t);
    double ar1m = allreduce(s, r, cnt, large, t);
    long bad = 0, all = 0;
    for (int i = 0; i < cnt; i++) {
        float want = 0;
        for (int k = 0; k < n; k++)
            want += (float)((i + k) % 5);
        bad += r[i] != want;
    }
    MPI_Reduce(&bad, &all, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        if (all)
            printf("mpi_compat: FAIL %ld wrong elements in the 1 MiB all-reduce\n", all);
        else
            printf("mpi_compat: ranks %d pingpong_8B_us %.3f allreduce_8B_us %.3f "
                   "allreduce_1MiB_us %.1f allreduce_1MiB_gbs %.4f\n",
                   n, pp, ar8, ar1m, AR_BIG / 1e3 / ar1m);
    }
    free(t);
    free(s);
    free(r);
    MPI_Finalize();
    return all ? 1 : 0;
}

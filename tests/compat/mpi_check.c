/* mpi_check: what tests/compat/openmpi.sh runs under mpirun on softrdma.
 * A ping-pong between ranks 0 and 1 (every byte checked, 8 B to 1 MiB),
 * then MPI_Allreduce (int sum, 1 to 256 Ki elements, in place and not)
 * checked on every rank. Prints "mpi_check: OK ranks N pingpong_8B_us X"
 * on rank 0 when everything matched (X: the 8 B half round trip, median
 * of PP_ROUNDS); exits non-zero otherwise. */
#include <mpi.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { PP_ROUNDS = 200, PP_MAX = 1 << 20, AR_MAX = 1 << 18 };

static uint8_t pat(int seed, size_t i)
{
    return (uint8_t)(seed * 131 + i * 7 + (i >> 8));
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* 0 ok, else the number of mismatches seen by this rank */
static long pingpong(int rank, double *half_rtt_8)
{
    long bad = 0;
    uint8_t *buf = malloc(PP_MAX);
    static double t[PP_ROUNDS];
    if (!buf)
        return 1;
    for (size_t len = 8; len <= PP_MAX; len *= 8) {
        int rounds = len >= (1 << 18) ? 10 : PP_ROUNDS;
        for (int r = 0; r < rounds; r++) {
            int seed = (int)len + r;
            if (rank == 0) {
                for (size_t i = 0; i < len; i++)
                    buf[i] = pat(seed, i);
                double t0 = MPI_Wtime();
                MPI_Send(buf, (int)len, MPI_BYTE, 1, 1, MPI_COMM_WORLD);
                MPI_Recv(buf, (int)len, MPI_BYTE, 1, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                t[r] = (MPI_Wtime() - t0) / 2;
                for (size_t i = 0; i < len; i++) {
                    uint8_t want = (uint8_t)(0xff ^ pat(seed, i));
                    bad += buf[i] != want;
                }
            } else if (rank == 1) {
                memset(buf, 0, len);
                MPI_Recv(buf, (int)len, MPI_BYTE, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                for (size_t i = 0; i < len; i++) {
                    bad += buf[i] != pat(seed, i);
                    buf[i] = (uint8_t)(0xff ^ buf[i]);
                }
                MPI_Send(buf, (int)len, MPI_BYTE, 0, 2, MPI_COMM_WORLD);
            }
        }
        if (len == 8 && rank == 0) {
            qsort(t, PP_ROUNDS, sizeof(t[0]), cmp_d);
            *half_rtt_8 = t[PP_ROUNDS / 2] * 1e6;
        }
    }
    free(buf);
    return bad;
}

static long allreduce(int rank, int size)
{
    long bad = 0;
    int *in = malloc(AR_MAX * sizeof(int)), *out = malloc(AR_MAX * sizeof(int));
    if (!in || !out)
        return 1;
    for (int count = 1; count <= AR_MAX; count *= 8) {
        for (int inplace = 0; inplace < 2; inplace++) {
            for (int i = 0; i < count; i++)
                in[i] = (rank + 1) * (i % 1000 + 1);
            if (inplace) {
                memcpy(out, in, (size_t)count * sizeof(int));
                MPI_Allreduce(MPI_IN_PLACE, out, count, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
            } else {
                MPI_Allreduce(in, out, count, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
            }
            /* sum over ranks of (r+1) x (i%1000+1) */
            for (int i = 0; i < count; i++)
                bad += out[i] != size * (size + 1) / 2 * (i % 1000 + 1);
        }
    }
    free(in);
    free(out);
    return bad;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    double half = 0;
    long bad = size >= 2 ? pingpong(rank, &half) : 1;
    bad += allreduce(rank, size);
    long all = 0;
    MPI_Reduce(&bad, &all, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        if (all)
            printf("mpi_check: FAIL %ld mismatches\n", all);
        else
            printf("mpi_check: OK ranks %d pingpong_8B_us %.2f\n", size, half);
    }
    MPI_Finalize();
    return all ? 1 : 0;
}

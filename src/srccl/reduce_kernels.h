/* reduce_kernels.h: the element-wise kernel templates, instantiated by
 * reduce.c (baseline ISA) and reduce_avx2.c (compiled for AVX2, where the
 * compiler vectorizes the same loops). Private to src/srccl. */
#ifndef SC_REDUCE_KERNELS_H
#define SC_REDUCE_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#define SC_SUM(a, b)  ((a) + (b))
#define SC_PROD(a, b) ((a) * (b))
#define SC_MAX2(a, b) ((a) > (b) ? (a) : (b))
#define SC_MIN2(a, b) ((a) < (b) ? (a) : (b))

#define SC_KERNEL(name, T, EXPR)                                                                   \
    static void name(void *dst, const void *a, const void *b, size_t cnt)                          \
    {                                                                                              \
        T *o = dst;                                                                                \
        const T *x = a, *y = b;                                                                    \
        for (size_t i = 0; i < cnt; i++)                                                           \
            o[i] = EXPR;                                                                           \
    }

/* Integers: sum and product on the unsigned type, converted back (modulo). */
#define SC_INT_KERNELS(sfx, T, U)                                                                  \
    SC_KERNEL(sum_##sfx, T, (T)(U)((U)x[i] + (U)y[i]))                                             \
    SC_KERNEL(prod_##sfx, T, (T)(U)((U)x[i] * (U)y[i]))                                            \
    SC_KERNEL(max_##sfx, T, SC_MAX2(x[i], y[i]))                                                   \
    SC_KERNEL(min_##sfx, T, SC_MIN2(x[i], y[i]))

#define SC_FLT_KERNELS(sfx, T)                                                                     \
    SC_KERNEL(sum_##sfx, T, x[i] + y[i])                                                           \
    SC_KERNEL(prod_##sfx, T, x[i] * y[i])                                                          \
    SC_KERNEL(max_##sfx, T, SC_MAX2(x[i], y[i]))                                                   \
    SC_KERNEL(min_##sfx, T, SC_MIN2(x[i], y[i]))

/* avg's final division: C's, so integers truncate toward zero. */
#define SC_DIV(sfx, T)                                                                             \
    static void div_##sfx(void *buf, size_t cnt, int divisor)                                      \
    {                                                                                              \
        T *o = buf;                                                                                \
        for (size_t i = 0; i < cnt; i++)                                                           \
            o[i] = (T)(o[i] / (T)divisor);                                                         \
    }

#endif

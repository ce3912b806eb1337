/* reduce.c: the reduction kernels, one per (op, datatype), and the
 * float16/bfloat16 conversions. dst may alias a or b (element-wise).
 * Integer sums and products wrap (computed on the unsigned type: no
 * signed overflow); float16/bfloat16 are computed in float and rounded to
 * nearest-even after every step. Min/max of NaN are unspecified. */
#include "sc_int.h"
#include "reduce_kernels.h"

#include <string.h>
#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#endif

size_t sc_type_size(srcclDataType_t dt)
{
    static const size_t size[srcclNumTypes] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2};
    return (unsigned)dt < srcclNumTypes ? size[dt] : 0;
}

const char *sc_type_name(srcclDataType_t dt)
{
    static const char *const name[srcclNumTypes] = {"int8",    "uint8",   "int32",   "uint32",
                                                    "int64",   "uint64",  "float16", "float32",
                                                    "float64", "bfloat16"};
    return (unsigned)dt < srcclNumTypes ? name[dt] : "?";
}

const char *sc_op_name(srcclRedOp_t op)
{
    static const char *const name[srcclNumOps] = {"sum", "prod", "max", "min", "avg"};
    return (unsigned)op < srcclNumOps ? name[op] : "?";
}

/* ---- float16 / bfloat16 ---- */
float sc_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t man = h & 0x3ffu;
    uint32_t bits;
    if (exp == 0 && man == 0) {
        bits = sign;
    } else if (exp == 0) { /* subnormal: normalize */
        uint32_t e = 0;
        while (!(man & 0x400u)) {
            man <<= 1;
            e++;
        }
        bits = sign | ((113u - e) << 23) | ((man & 0x3ffu) << 13);
    } else if (exp == 31) {
        bits = sign | 0x7f800000u | (man << 13);
    } else {
        bits = sign | ((exp + 112u) << 23) | (man << 13);
    }
    float f;
    memcpy(&f, &bits, sizeof(f));
    return f;
}

uint16_t sc_f32_to_f16(float f)
{
    uint32_t x;
    memcpy(&x, &f, sizeof(x));
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    uint32_t ax = x & 0x7fffffffu;
    if (ax > 0x7f800000u) /* NaN stays NaN (quiet) */
        return (uint16_t)(sign | 0x7e00u | ((ax >> 13) & 0x3ffu));
    if (ax >= 0x477ff000u) /* >= 65520 rounds to infinity */
        return (uint16_t)(sign | 0x7c00u);
    if (ax < 0x38800000u) {    /* below 2^-14: a subnormal half, in units of 2^-24 */
        if (ax <= 0x33000000u) /* <= 2^-25: the tie goes to even zero */
            return sign;
        uint32_t e = ax >> 23;
        uint32_t m = (ax & 0x7fffffu) | 0x800000u;
        uint32_t shift = 126u - e;
        uint32_t r = m >> shift;
        uint32_t rem = m & ((1u << shift) - 1u);
        uint32_t half = 1u << (shift - 1u);
        if (rem > half || (rem == half && (r & 1u)))
            r++;
        return (uint16_t)(sign | r);
    }
    uint32_t r = (ax >> 13) - (112u << 10);
    uint32_t rem = ax & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (r & 1u)))
        r++; /* a carry into the exponent is still the right encoding */
    return (uint16_t)(sign | r);
}

float sc_bf16_to_f32(uint16_t h)
{
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, sizeof(f));
    return f;
}

uint16_t sc_f32_to_bf16(float f)
{
    uint32_t x;
    memcpy(&x, &f, sizeof(x));
    if ((x & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((x >> 16) | 0x40u);
    return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

/* uint8 * uint8 promotes to int: 255 * 255 still fits. For 32 bits the
 * unsigned type keeps the product out of signed int. */
SC_INT_KERNELS(i8, int8_t, uint8_t)
SC_INT_KERNELS(u8, uint8_t, uint8_t)
SC_INT_KERNELS(i32, int32_t, uint32_t)
SC_INT_KERNELS(u32, uint32_t, uint32_t)
SC_INT_KERNELS(i64, int64_t, uint64_t)
SC_INT_KERNELS(u64, uint64_t, uint64_t)

SC_FLT_KERNELS(f32, float)
SC_FLT_KERNELS(f64, double)

#define SC_HALF_KERNEL(name, TO, FROM, OP)                                                         \
    static void name(void *dst, const void *a, const void *b, size_t cnt)                          \
    {                                                                                              \
        uint16_t *o = dst;                                                                         \
        const uint16_t *x = a, *y = b;                                                             \
        for (size_t i = 0; i < cnt; i++) {                                                         \
            float fx = TO(x[i]), fy = TO(y[i]);                                                    \
            o[i] = FROM(OP(fx, fy));                                                               \
        }                                                                                          \
    }
#define SC_HALF_KERNELS(sfx, TO, FROM)                                                             \
    SC_HALF_KERNEL(sum_##sfx, TO, FROM, SC_SUM)                                                    \
    SC_HALF_KERNEL(prod_##sfx, TO, FROM, SC_PROD)                                                  \
    SC_HALF_KERNEL(max_##sfx, TO, FROM, SC_MAX2)                                                   \
    SC_HALF_KERNEL(min_##sfx, TO, FROM, SC_MIN2)

SC_HALF_KERNELS(f16, sc_f16_to_f32, sc_f32_to_f16)
SC_HALF_KERNELS(bf16, sc_bf16_to_f32, sc_f32_to_bf16)

/* ---- avg: the final division ---- */
SC_DIV(i8, int8_t)
SC_DIV(u8, uint8_t)
SC_DIV(i32, int32_t)
SC_DIV(u32, uint32_t)
SC_DIV(i64, int64_t)
SC_DIV(u64, uint64_t)
SC_DIV(f64, double)

static void div_f32(void *buf, size_t cnt, int divisor)
{
    float *o = buf;
    for (size_t i = 0; i < cnt; i++)
        o[i] = o[i] / (float)divisor;
}

static void div_f16(void *buf, size_t cnt, int divisor)
{
    uint16_t *o = buf;
    for (size_t i = 0; i < cnt; i++)
        o[i] = sc_f32_to_f16(sc_f16_to_f32(o[i]) / (float)divisor);
}

static void div_bf16(void *buf, size_t cnt, int divisor)
{
    uint16_t *o = buf;
    for (size_t i = 0; i < cnt; i++)
        o[i] = sc_f32_to_bf16(sc_bf16_to_f32(o[i]) / (float)divisor);
}

void sc_kernels_init(struct sc_kernels *k, bool allow_simd)
{
#define SC_ROW(sfx, dt)                                                                            \
    k->reduce[srcclSum][dt] = sum_##sfx;                                                           \
    k->reduce[srcclProd][dt] = prod_##sfx;                                                         \
    k->reduce[srcclMax][dt] = max_##sfx;                                                           \
    k->reduce[srcclMin][dt] = min_##sfx;                                                           \
    k->reduce[srcclAvg][dt] = sum_##sfx;                                                           \
    k->div[dt] = div_##sfx;
    SC_ROW(i8, srcclInt8)
    SC_ROW(u8, srcclUint8)
    SC_ROW(i32, srcclInt32)
    SC_ROW(u32, srcclUint32)
    SC_ROW(i64, srcclInt64)
    SC_ROW(u64, srcclUint64)
    SC_ROW(f16, srcclFloat16)
    SC_ROW(f32, srcclFloat32)
    SC_ROW(f64, srcclFloat64)
    SC_ROW(bf16, srcclBfloat16)
#undef SC_ROW
    k->isa = "scalar";
#if defined(__x86_64__) && defined(__GNUC__)
    if (allow_simd) {
        /* F16C by CPUID leaf 1 (ECX bit 29): not every compiler's
         * __builtin_cpu_supports knows it. */
        unsigned a, b, c = 0, d;
        bool f16c = __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 29));
        __builtin_cpu_init();
        if (__builtin_cpu_supports("avx2") && f16c)
            sc_kernels_avx2(k);
    }
#else
    (void)allow_simd;
#endif
}

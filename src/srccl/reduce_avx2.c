/* reduce_avx2.c: the kernels again, compiled with -mavx2 -mf16c -O3 (see
 * CMakeLists.txt) and installed only when the CPU has AVX2 and F16C
 * (sc_kernels_init). Integer and float32/float64 loops are the templates of
 * reduce_kernels.h, which the compiler vectorizes; float16 uses the F16C
 * conversions and bfloat16 is widened and rounded by hand. Every kernel
 * gives the scalar kernel's bits (tests/srccl/reduce_test.c checks). */
#include "sc_int.h"
#include "reduce_kernels.h"

#if defined(__AVX2__) && defined(__F16C__)
#include <immintrin.h>

SC_INT_KERNELS(i8, int8_t, uint8_t)
SC_INT_KERNELS(u8, uint8_t, uint8_t)
SC_INT_KERNELS(i32, int32_t, uint32_t)
SC_INT_KERNELS(u32, uint32_t, uint32_t)
SC_INT_KERNELS(i64, int64_t, uint64_t)
SC_INT_KERNELS(u64, uint64_t, uint64_t)
SC_FLT_KERNELS(f32, float)
SC_FLT_KERNELS(f64, double)

#define V_SUM(a, b)  _mm256_add_ps(a, b)
#define V_PROD(a, b) _mm256_mul_ps(a, b)
/* maxps/minps return the second operand on ties and NaN: a > b ? a : b */
#define V_MAX(a, b) _mm256_max_ps(a, b)
#define V_MIN(a, b) _mm256_min_ps(a, b)

static inline __m256 f16_load(const uint16_t *p)
{
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
}

static inline void f16_store(uint16_t *p, __m256 v)
{
    _mm_storeu_si128((__m128i *)p,
                     _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}

static inline __m256 bf16_load(const uint16_t *p)
{
    __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
}

/* Round to nearest-even on the upper 16 bits; NaNs stay quiet NaNs. */
static inline void bf16_store(uint16_t *p, __m256 v)
{
    __m256i x = _mm256_castps_si256(v);
    __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(x, 16), _mm256_set1_epi32(1));
    __m256i r = _mm256_srli_epi32(
        _mm256_add_epi32(_mm256_add_epi32(x, _mm256_set1_epi32(0x7fff)), lsb), 16);
    __m256i abs = _mm256_and_si256(x, _mm256_set1_epi32(0x7fffffff));
    __m256i nan = _mm256_cmpgt_epi32(abs, _mm256_set1_epi32(0x7f800000));
    __m256i qnan = _mm256_or_si256(_mm256_srli_epi32(x, 16), _mm256_set1_epi32(0x40));
    r = _mm256_blendv_epi8(r, qnan, nan);
    /* 8 x 32 -> 8 x 16: pack within lanes, then gather the two lanes. */
    __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(r, r), 0xd8);
    _mm_storeu_si128((__m128i *)p, _mm256_castsi256_si128(packed));
}

#define SC_VHALF_KERNEL(name, LOAD, STORE, TO, FROM, VOP, SOP)                                     \
    static void name(void *dst, const void *a, const void *b, size_t cnt)                          \
    {                                                                                              \
        uint16_t *o = dst;                                                                         \
        const uint16_t *x = a, *y = b;                                                             \
        size_t i = 0;                                                                              \
        for (; i + 8 <= cnt; i += 8)                                                               \
            STORE(o + i, VOP(LOAD(x + i), LOAD(y + i)));                                           \
        for (; i < cnt; i++) {                                                                     \
            float fx = TO(x[i]), fy = TO(y[i]);                                                    \
            o[i] = FROM(SOP(fx, fy));                                                              \
        }                                                                                          \
    }
#define SC_VHALF_KERNELS(sfx, LOAD, STORE, TO, FROM)                                               \
    SC_VHALF_KERNEL(sum_##sfx, LOAD, STORE, TO, FROM, V_SUM, SC_SUM)                               \
    SC_VHALF_KERNEL(prod_##sfx, LOAD, STORE, TO, FROM, V_PROD, SC_PROD)                            \
    SC_VHALF_KERNEL(max_##sfx, LOAD, STORE, TO, FROM, V_MAX, SC_MAX2)                              \
    SC_VHALF_KERNEL(min_##sfx, LOAD, STORE, TO, FROM, V_MIN, SC_MIN2)

SC_VHALF_KERNELS(f16, f16_load, f16_store, sc_f16_to_f32, sc_f32_to_f16)
SC_VHALF_KERNELS(bf16, bf16_load, bf16_store, sc_bf16_to_f32, sc_f32_to_bf16)

#define SC_VHALF_DIV(sfx, LOAD, STORE, TO, FROM)                                                   \
    static void div_##sfx(void *buf, size_t cnt, int divisor)                                      \
    {                                                                                              \
        uint16_t *o = buf;                                                                         \
        __m256 d = _mm256_set1_ps((float)divisor);                                                 \
        size_t i = 0;                                                                              \
        for (; i + 8 <= cnt; i += 8)                                                               \
            STORE(o + i, _mm256_div_ps(LOAD(o + i), d));                                           \
        for (; i < cnt; i++)                                                                       \
            o[i] = FROM(TO(o[i]) / (float)divisor);                                                \
    }
SC_VHALF_DIV(f16, f16_load, f16_store, sc_f16_to_f32, sc_f32_to_f16)
SC_VHALF_DIV(bf16, bf16_load, bf16_store, sc_bf16_to_f32, sc_f32_to_bf16)

void sc_kernels_avx2(struct sc_kernels *k)
{
#define SC_ROW(sfx, dt)                                                                            \
    k->reduce[srcclSum][dt] = sum_##sfx;                                                           \
    k->reduce[srcclProd][dt] = prod_##sfx;                                                         \
    k->reduce[srcclMax][dt] = max_##sfx;                                                           \
    k->reduce[srcclMin][dt] = min_##sfx;                                                           \
    k->reduce[srcclAvg][dt] = sum_##sfx;
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
    k->div[srcclFloat16] = div_f16;
    k->div[srcclBfloat16] = div_bf16;
    k->isa = "avx2";
}

#else /* not built for AVX2: keep the scalar kernels */

void sc_kernels_avx2(struct sc_kernels *k)
{
    (void)k;
}

#endif

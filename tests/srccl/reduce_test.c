/* reduce_test: srccl's reduction kernels (src/srccl/reduce*.c), in-process.
 *  - float16/bfloat16 decoding of every 16-bit pattern, against a decoder
 *    written here; encoding of every value back (round trip);
 *  - float -> float16/bfloat16 rounding of every tie between neighbours,
 *    1 ulp either side of it, and millions of random floats, against a
 *    reference that searches the nearest representable value (ties to even);
 *  - every (op, datatype) kernel against an element-wise reference, for
 *    lengths around the vector widths, with dst aliasing an input;
 *  - the AVX2 kernels (when the CPU has them) bit for bit against scalar. */
#include "sc_int.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static long failures;
#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond) && failures++ < 20) {                                                          \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                                   \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fprintf(stderr, "\n");                                                                 \
        }                                                                                          \
    } while (0)

static uint64_t rng = 0x853c49e6748fea9bull;
static uint64_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/* ---- independent decoders ---- */
static double ref_half(uint16_t h)
{
    int e = (h >> 10) & 0x1f;
    double m = h & 0x3ff, v;
    if (e == 31)
        v = m ? NAN : INFINITY;
    else
        v = e ? ldexp(1024 + m, e - 25) : ldexp(m, -24);
    return h & 0x8000 ? -v : v;
}

static double ref_bf16(uint16_t h)
{
    int e = (h >> 7) & 0xff;
    double m = h & 0x7f, v;
    if (e == 255)
        v = m ? NAN : INFINITY;
    else
        v = e ? ldexp(128 + m, e - 134) : ldexp(m, -133);
    return h & 0x8000 ? -v : v;
}

/* Nearest-even encoding by search: positive patterns are ordered by value
 * up to the largest finite one (max_pat); past max + half an ulp is inf. */
static uint16_t ref_round(double x, double (*dec)(uint16_t), uint16_t max_pat, uint16_t inf_pat)
{
    uint16_t sign = signbit(x) ? 0x8000 : 0;
    double a = fabs(x);
    double max = dec(max_pat), ulp = max - dec((uint16_t)(max_pat - 1));
    if (a >= max + ulp / 2)
        return sign | inf_pat;     /* the tie at max + ulp/2 goes to the even: inf */
    uint16_t lo = 0, hi = max_pat; /* largest pattern with value <= a */
    while (lo < hi) {
        uint16_t mid = (uint16_t)((lo + hi + 1) / 2);
        if (dec(mid) <= a)
            lo = mid;
        else
            hi = (uint16_t)(mid - 1);
    }
    if (lo == max_pat)
        return sign | lo;
    double dl = a - dec(lo), dh = dec((uint16_t)(lo + 1)) - a;
    if (dl < dh || (dl == dh && !(lo & 1)))
        return sign | lo;
    return sign | (uint16_t)(lo + 1);
}

static uint16_t ref_f16(float f)
{
    return ref_round(f, ref_half, 0x7bff, 0x7c00);
}

static uint16_t ref_bf(float f)
{
    return ref_round(f, ref_bf16, 0x7f7f, 0x7f80);
}

static void test_conversions(void)
{
    for (uint32_t h = 0; h < 65536; h++) {
        double want = ref_half((uint16_t)h);
        float f = sc_f16_to_f32((uint16_t)h);
        if (isnan(want)) {
            CHECK(isnan(f), "f16 0x%04x: not NaN", h);
            CHECK(isnan(sc_bf16_to_f32((uint16_t)h)) == isnan(ref_bf16((uint16_t)h)),
                  "bf16 0x%04x NaN", h);
            CHECK((sc_f32_to_f16(f) & 0x7c00) == 0x7c00 && (sc_f32_to_f16(f) & 0x3ff),
                  "f16 NaN 0x%04x does not stay NaN", h);
            continue;
        }
        CHECK((double)f == want && !signbit(f) == !signbit(want), "f16 0x%04x -> %g, want %g", h,
              (double)f, want);
        CHECK(sc_f32_to_f16(f) == h, "f16 0x%04x does not round-trip (0x%04x)", h,
              sc_f32_to_f16(f));
        double wb = ref_bf16((uint16_t)h);
        float fb = sc_bf16_to_f32((uint16_t)h);
        if (!isnan(wb)) {
            CHECK((double)fb == wb, "bf16 0x%04x -> %g, want %g", h, (double)fb, wb);
            CHECK(sc_f32_to_bf16(fb) == h, "bf16 0x%04x does not round-trip", h);
        }
    }
    /* Every midpoint between neighbours (exact in float), and 1 ulp off. */
    for (uint32_t h = 0; h < 0x7c00; h++) {
        double a = ref_half((uint16_t)h), b = h < 0x7bff ? ref_half((uint16_t)(h + 1)) : 65536.0;
        float mid = (float)((a + b) / 2);
        float probes[3] = {mid, nextafterf(mid, 0), nextafterf(mid, INFINITY)};
        for (int k = 0; k < 3; k++)
            for (int s = 0; s < 2; s++) {
                float p = s ? -probes[k] : probes[k];
                CHECK(sc_f32_to_f16(p) == ref_f16(p), "f16(%a) = 0x%04x, want 0x%04x", (double)p,
                      sc_f32_to_f16(p), ref_f16(p));
            }
    }
    for (uint32_t h = 0; h < 0x7f80; h++) {
        double a = ref_bf16((uint16_t)h);
        double b = h < 0x7f7f ? ref_bf16((uint16_t)(h + 1)) : ldexp(1, 128);
        float mid = (float)((a + b) / 2);
        if (isinf(mid))
            mid = FLT_MAX; /* above the largest bf16: rounds to inf anyway */
        float probes[3] = {mid, nextafterf(mid, 0), nextafterf(mid, INFINITY)};
        for (int k = 0; k < 3; k++) {
            if (isinf(probes[k]))
                continue;
            CHECK(sc_f32_to_bf16(probes[k]) == ref_bf(probes[k]), "bf16(%a) = 0x%04x, want 0x%04x",
                  (double)probes[k], sc_f32_to_bf16(probes[k]), ref_bf(probes[k]));
        }
    }
    for (int i = 0; i < 2000000; i++) {
        uint32_t bits = (uint32_t)next();
        if (i & 1) /* bias towards half's range */
            bits = (bits & 0x80ffffffu) | ((uint32_t)(100 + next() % 45) << 23);
        float f;
        memcpy(&f, &bits, 4);
        if (isnan(f))
            continue;
        CHECK(sc_f32_to_f16(f) == ref_f16(f), "f16(%a) = 0x%04x, want 0x%04x", (double)f,
              sc_f32_to_f16(f), ref_f16(f));
        CHECK(sc_f32_to_bf16(f) == ref_bf(f), "bf16(%a) = 0x%04x, want 0x%04x", (double)f,
              sc_f32_to_bf16(f), ref_bf(f));
    }
}

/* ---- kernels ---- */
static const size_t lens[] = {0,  1,  2,  3,  7,  8,  9,   15,   16,  17,
                              31, 32, 33, 63, 64, 65, 100, 1000, 1027};
enum { MAXN = 1027 + 8 };

static void fill(void *p, srcclDataType_t dt, size_t n)
{
    size_t es = sc_type_size(dt);
    uint8_t *b = p;
    for (size_t i = 0; i < n; i++) {
        uint64_t x = next();
        if (dt == srcclFloat32) {
            float f = (float)((double)(int64_t)x / 9.2e18 * 1000);
            memcpy(b + i * es, &f, 4);
        } else if (dt == srcclFloat64) {
            double d = (double)(int64_t)x / 9.2e18 * 1000;
            memcpy(b + i * es, &d, 8);
        } else if (dt == srcclFloat16 || dt == srcclBfloat16) {
            /* any finite pattern, ties (equal values) now and then */
            uint16_t h = (uint16_t)x;
            if (dt == srcclFloat16 && (h & 0x7c00) == 0x7c00)
                h &= 0xbbff;
            if (dt == srcclBfloat16 && (h & 0x7f80) == 0x7f80)
                h &= 0xbf7f;
            memcpy(b + i * es, &h, 2);
        } else {
            memcpy(b + i * es, &x, es);
        }
    }
}

/* Reference for one element, with the documented semantics. */
static void ref_elem(void *o, const void *a, const void *b, srcclDataType_t dt, srcclRedOp_t op)
{
    if (dt == srcclFloat16 || dt == srcclBfloat16) {
        uint16_t x, y, r;
        memcpy(&x, a, 2);
        memcpy(&y, b, 2);
        bool h = dt == srcclFloat16;
        float fx = (float)(h ? ref_half(x) : ref_bf16(x)),
              fy = (float)(h ? ref_half(y) : ref_bf16(y));
        float v = op == srcclProd  ? fx * fy
                  : op == srcclMax ? (fx > fy ? fx : fy)
                  : op == srcclMin ? (fx < fy ? fx : fy)
                                   : fx + fy;
        r = h ? ref_f16(v) : ref_bf(v);
        memcpy(o, &r, 2);
        return;
    }
    if (dt == srcclFloat32) {
        float x, y, v;
        memcpy(&x, a, 4);
        memcpy(&y, b, 4);
        v = op == srcclProd  ? x * y
            : op == srcclMax ? (x > y ? x : y)
            : op == srcclMin ? (x < y ? x : y)
                             : x + y;
        memcpy(o, &v, 4);
        return;
    }
    if (dt == srcclFloat64) {
        double x, y, v;
        memcpy(&x, a, 8);
        memcpy(&y, b, 8);
        v = op == srcclProd  ? x * y
            : op == srcclMax ? (x > y ? x : y)
            : op == srcclMin ? (x < y ? x : y)
                             : x + y;
        memcpy(o, &v, 8);
        return;
    }
    size_t es = sc_type_size(dt);
    uint64_t x = 0, y = 0, v;
    memcpy(&x, a, es); /* little-endian */
    memcpy(&y, b, es);
    int bits = (int)es * 8;
    bool sgn = dt == srcclInt8 || dt == srcclInt32 || dt == srcclInt64;
    uint64_t m = bits == 64 ? 0 : 1ull << (bits - 1);
    int64_t sx = bits == 64 ? (int64_t)x : (int64_t)((x ^ m) - m);
    int64_t sy = bits == 64 ? (int64_t)y : (int64_t)((y ^ m) - m);
    switch (op) {
    case srcclProd:
        v = x * y;
        break;
    case srcclMax:
        v = (sgn ? sx > sy : x > y) ? x : y;
        break;
    case srcclMin:
        v = (sgn ? sx < sy : x < y) ? x : y;
        break;
    default:
        v = x + y;
        break;
    }
    memcpy(o, &v, es);
}

static void test_kernels(const struct sc_kernels *k, const struct sc_kernels *scalar)
{
    static uint8_t a[MAXN * 8], b[MAXN * 8], o[MAXN * 8], want[MAXN * 8], o2[MAXN * 8];
    for (int dt = 0; dt < srcclNumTypes; dt++) {
        size_t es = sc_type_size(dt);
        for (int op = 0; op < srcclNumOps; op++) {
            for (size_t li = 0; li < sizeof(lens) / sizeof(lens[0]); li++) {
                size_t n = lens[li];
                for (size_t off = 0; off < 2; off++) { /* unaligned by one element */
                    fill(a, dt, n + 1);
                    fill(b, dt, n + 1);
                    uint8_t *pa = a + off * es, *pb = b + off * es;
                    for (size_t i = 0; i < n; i++)
                        ref_elem(want + i * es, pa + i * es, pb + i * es, dt,
                                 op == srcclAvg ? srcclSum : op);
                    memset(o, 0xcc, sizeof(o));
                    k->reduce[op][dt](o + off * es, pa, pb, n);
                    CHECK(!memcmp(o + off * es, want, n * es), "%s %s %s n=%zu off=%zu: wrong",
                          k->isa, sc_op_name(op), sc_type_name(dt), n, off);
                    CHECK(o[off * es + n * es] == 0xcc, "%s %s %s n=%zu: wrote past the end",
                          k->isa, sc_op_name(op), sc_type_name(dt), n);
                    /* in place: dst == b */
                    memcpy(o2, pb, n * es);
                    k->reduce[op][dt](o2, pa, o2, n);
                    CHECK(!memcmp(o2, want, n * es), "%s %s %s n=%zu: in place wrong", k->isa,
                          sc_op_name(op), sc_type_name(dt), n);
                }
            }
        }
        /* avg's division: the same bits as the scalar one, and the scalar
         * one against the reference. */
        for (size_t li = 0; li < sizeof(lens) / sizeof(lens[0]); li++) {
            size_t n = lens[li];
            int d = 1 + (int)(next() % 8);
            fill(a, dt, n);
            memcpy(o, a, n * es);
            memcpy(o2, a, n * es);
            k->div[dt](o, n, d);
            scalar->div[dt](o2, n, d);
            CHECK(!memcmp(o, o2, n * es), "%s div %s n=%zu", k->isa, sc_type_name(dt), n);
            for (size_t i = 0; i < n && dt == srcclFloat16; i++) {
                uint16_t x, r;
                memcpy(&x, a + 2 * i, 2);
                memcpy(&r, o2 + 2 * i, 2);
                CHECK(r == ref_f16((float)ref_half(x) / (float)d), "div f16 0x%04x / %d", x, d);
            }
            for (size_t i = 0; i < n && dt == srcclInt8; i++)
                CHECK((int8_t)o2[i] == (int8_t)((int8_t)a[i] / d), "div int8 %d / %d", (int8_t)a[i],
                      d);
        }
    }
}

int main(void)
{
    test_conversions();
    struct sc_kernels scalar, best;
    sc_kernels_init(&scalar, false);
    sc_kernels_init(&best, true);
    test_kernels(&scalar, &scalar);
    if (strcmp(best.isa, "scalar"))
        test_kernels(&best, &scalar);
    else
        printf("reduce_test: no AVX2/F16C on this CPU: scalar kernels only\n");
    if (failures) {
        fprintf(stderr, "reduce_test: %ld failures\n", failures);
        return 1;
    }
    printf("reduce_test: conversions and kernels OK (%s and scalar)\n", best.isa);
    return 0;
}

/*
 * 16-bit float conversions and the cube_math_type roundings, as static inline C so that
 * the hot loops can inline them (numpy's npy_half_* functions cannot be inlined).
 *
 * Every float32 -> 16-bit conversion rounds to nearest, ties to even, keeps NaN quiet and
 * overflows to infinity, as IEEE 754 conversion does.  The code works on bit patterns only,
 * so it gives the same answer whatever the FPU's flush-to-zero or rounding-mode state.
 */
#ifndef PG_HALF_H
#define PG_HALF_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "pg_cpu.h"

static inline uint32_t pg_f32_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static inline float pg_bits_f32(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

/* bfloat16: the high half of a float32. */
static inline float pg_bf16_to_f32(uint16_t h) { return pg_bits_f32((uint32_t)h << 16); }

static inline uint16_t pg_f32_to_bf16(float f)
{
    uint32_t u = pg_f32_bits(f);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u)          /* NaN: keep sign and payload top, quiet */
        return (uint16_t)((u >> 16) | 0x0040u);
    return (uint16_t)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

/* contiguous bfloat16 rows, written branch-free so that compilers vectorise them; x86
 * CPUs with AVX2 get builds of them for it, chosen at run time (bit-identical: integer
 * operations only) */
#define PG_BF16_IN(NAME_IN, ATTR)                                                   \
ATTR static void NAME_IN(const uint16_t *s, float *d, ptrdiff_t n)                  \
{                                                                                   \
    for (ptrdiff_t i = 0; i < n; i++) {                                             \
        uint32_t u = (uint32_t)s[i] << 16;                                          \
        memcpy(d + i, &u, 4);                                                       \
    }                                                                               \
}

static void pg_f32_to_bf16_row_base(const float *s, uint16_t *d, ptrdiff_t n)
{
    for (ptrdiff_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, s + i, 4);
        uint32_t r = (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
        uint32_t q = (u >> 16) | 0x0040u;
        d[i] = (uint16_t)(((u & 0x7FFFFFFFu) > 0x7F800000u) ? q : r);
    }
}

PG_BF16_IN(pg_bf16_to_f32_row_base, )

#if PG_X86_DISPATCH
PG_BF16_IN(pg_bf16_to_f32_row_avx2, PG_TARGET_AVX2)

/* eight float32 values rounded to bfloat16 (the formula above: round to nearest even,
 * NaN kept quiet), one per 32-bit lane */
PG_TARGET_AVX2 PG_ALWAYS_INLINE
static inline __m256i pg_bf16_round8_avx2(__m256 x)
{
    const __m256i one = _mm256_set1_epi32(1), bias = _mm256_set1_epi32(0x7FFF);
    const __m256i absmask = _mm256_set1_epi32(0x7FFFFFFF), inf = _mm256_set1_epi32(0x7F800000);
    const __m256i quiet = _mm256_set1_epi32(0x40);
    __m256i u = _mm256_castps_si256(x);
    __m256i hi = _mm256_srli_epi32(u, 16);
    __m256i r = _mm256_srli_epi32(
        _mm256_add_epi32(_mm256_add_epi32(u, bias), _mm256_and_si256(hi, one)), 16);
    __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, absmask), inf);
    return _mm256_blendv_epi8(r, _mm256_or_si256(hi, quiet), nan);
}

/* sixteen values rounded the same way (a then b), packed in order: the NaN test is one
 * compare for both blocks, so rows without NaN (nearly all) take the rounding alone */
PG_TARGET_AVX2 PG_ALWAYS_INLINE
static inline __m256i pg_bf16_round16_avx2(__m256 a, __m256 b)
{
    __m256i p;
    if (_mm256_movemask_ps(_mm256_cmp_ps(a, b, _CMP_UNORD_Q))) {
        p = _mm256_packus_epi32(pg_bf16_round8_avx2(a), pg_bf16_round8_avx2(b));
    } else {
        /* finite and infinite values: u + 0x7FFF + (bit 16 of u), top half */
        const __m256i one = _mm256_set1_epi32(1), bias = _mm256_set1_epi32(0x7FFF);
        const __m256i ua = _mm256_castps_si256(a), ub = _mm256_castps_si256(b);
        const __m256i ra = _mm256_add_epi32(_mm256_add_epi32(ua, bias),
                                            _mm256_and_si256(_mm256_srli_epi32(ua, 16), one));
        const __m256i rb = _mm256_add_epi32(_mm256_add_epi32(ub, bias),
                                            _mm256_and_si256(_mm256_srli_epi32(ub, 16), one));
        p = _mm256_packus_epi32(_mm256_srli_epi32(ra, 16), _mm256_srli_epi32(rb, 16));
    }
    /* both halves are 0..0xFFFF: the unsigned-saturating pack keeps them, per 128-bit lane,
     * and the permute puts the lanes back in order */
    return _mm256_permute4x64_epi64(p, 0xD8);
}

/* the row rounding written out with it, 16 values a step (the compiler's version of the
 * loop above spends about 2.5 instructions a value on widening and narrowing) */
PG_TARGET_AVX2 static void pg_f32_to_bf16_row_avx2(const float *s, uint16_t *d, ptrdiff_t n)
{
    ptrdiff_t i = 0;
    for (; i + 16 <= n; i += 16) {
        _mm256_storeu_si256((__m256i *)(d + i), pg_bf16_round16_avx2(_mm256_loadu_ps(s + i),
                                                                     _mm256_loadu_ps(s + i + 8)));
    }
    for (; i < n; i++) d[i] = pg_f32_to_bf16(s[i]);
}
#define PG_BF16_ROW(base, avx2, ...) (pg_have_avx2() ? avx2(__VA_ARGS__) : base(__VA_ARGS__))
#else
#define PG_BF16_ROW(base, avx2, ...) base(__VA_ARGS__)
#endif

static inline void pg_bf16_to_f32_row(const uint16_t *s, float *d, ptrdiff_t n)
{
    PG_BF16_ROW(pg_bf16_to_f32_row_base, pg_bf16_to_f32_row_avx2, s, d, n);
}

static inline void pg_f32_to_bf16_row(const float *s, uint16_t *d, ptrdiff_t n)
{
    PG_BF16_ROW(pg_f32_to_bf16_row_base, pg_f32_to_bf16_row_avx2, s, d, n);
}

/* IEEE binary16. */
static inline float pg_f16_to_f32(uint16_t h)
{
    uint32_t sign = ((uint32_t)h & 0x8000u) << 16;
    uint32_t e = ((uint32_t)h >> 10) & 0x1Fu;
    uint32_t m = (uint32_t)h & 0x3FFu;
    if (e == 0) {
        /* zero or subnormal: m * 2^-24 is exact in float32 */
        float v = (float)m * 5.9604644775390625e-08f;
        return pg_bits_f32(pg_f32_bits(v) | sign);
    }
    if (e == 31)  /* inf, or NaN made quiet as the F16C instructions do */
        return pg_bits_f32(sign | 0x7F800000u | (m << 13) | (m ? 0x400000u : 0u));
    return pg_bits_f32(sign | ((e + 112u) << 23) | (m << 13));
}

static inline uint16_t pg_f32_to_f16(float f)
{
    uint32_t u = pg_f32_bits(f);
    uint32_t sign = (u >> 16) & 0x8000u;
    uint32_t a = u & 0x7FFFFFFFu;
    uint32_t e, m, shift, r, rem, half;
    if (a >= 0x7F800000u)                          /* inf, NaN */
        return (uint16_t)(sign | 0x7C00u | (a > 0x7F800000u ? (0x0200u | ((a >> 13) & 0x3FFu)) : 0u));
    if (a >= 0x477FF000u)                          /* >= 65520 rounds to infinity */
        return (uint16_t)(sign | 0x7C00u);
    if (a >= 0x38800000u) {                        /* normal half: >= 2^-14 */
        r = (a - 0x38000000u) >> 13;               /* rebias exponent 127 -> 15, keep 10 bits */
        rem = a & 0x1FFFu;
        if (rem > 0x1000u || (rem == 0x1000u && (r & 1u))) r++;
        return (uint16_t)(sign | r);
    }
    e = a >> 23;
    if (e < 102u)                                  /* below 2^-25: rounds to zero */
        return (uint16_t)sign;
    m = (a & 0x7FFFFFu) | 0x800000u;               /* subnormal half: value / 2^-24 = m >> (126 - e) */
    shift = 126u - e;                              /* 14 .. 24 */
    r = m >> shift;
    rem = m & ((1u << shift) - 1u);
    half = 1u << (shift - 1u);
    if (rem > half || (rem == half && (r & 1u))) r++;
    return (uint16_t)(sign | r);
}

/* cube_math_type roundings of a float32 value (SPEC section 4). */
static inline float pg_round_hf32(float f)
{
    /* keep 11 explicit mantissa bits: drop 12 with round-to-nearest-even */
    uint32_t u = pg_f32_bits(f);
    if ((u & 0x7F800000u) == 0x7F800000u)          /* inf and NaN stay as they are */
        return f;
    u = (u + 0x7FFu + ((u >> 12) & 1u)) & 0xFFFFF000u;
    return pg_bits_f32(u);
}

static inline float pg_round_fp16(float f) { return pg_f16_to_f32(pg_f32_to_f16(f)); }

/*
 * Contiguous rows of float16 <-> float32.  x86 CPUs with F16C convert 8 values per
 * instruction; the choice is made at run time (the wheel targets baseline x86-64), and both
 * paths give the same bits: IEEE conversion, round to nearest even, NaN made quiet.
 */
#if (defined(__GNUC__) || defined(__clang__)) && (defined(__x86_64__) || defined(__i386__)) \
    && !defined(PG_NO_DISPATCH)
#include <immintrin.h>
#define PG_F16C_DISPATCH 1

__attribute__((target("avx,f16c")))
static void pg_f16_to_f32_row_f16c(const uint16_t *s, float *d, ptrdiff_t n)
{
    ptrdiff_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(d + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(s + i))));
    for (; i < n; i++) d[i] = _cvtsh_ss(s[i]);
}

__attribute__((target("avx,f16c")))
static void pg_f32_to_f16_row_f16c(const float *s, uint16_t *d, ptrdiff_t n)
{
    ptrdiff_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(d + i),
                         _mm256_cvtps_ph(_mm256_loadu_ps(s + i), _MM_FROUND_TO_NEAREST_INT));
    for (; i < n; i++) d[i] = _cvtss_sh(s[i], _MM_FROUND_TO_NEAREST_INT);
}

static int pg_have_f16c(void)
{
    return (pg_cpu_features() & (PG_CPU_AVX | PG_CPU_F16C)) == (PG_CPU_AVX | PG_CPU_F16C);
}
#else
#define PG_F16C_DISPATCH 0
static int pg_have_f16c(void) { return 0; }
static void pg_f16_to_f32_row_f16c(const uint16_t *s, float *d, ptrdiff_t n) { (void)s; (void)d; (void)n; }
static void pg_f32_to_f16_row_f16c(const float *s, uint16_t *d, ptrdiff_t n) { (void)s; (void)d; (void)n; }
#endif

static inline void pg_f16_to_f32_row(const uint16_t *s, float *d, ptrdiff_t n)
{
    if (pg_have_f16c()) { pg_f16_to_f32_row_f16c(s, d, n); return; }
    for (ptrdiff_t i = 0; i < n; i++) d[i] = pg_f16_to_f32(s[i]);
}

static inline void pg_f32_to_f16_row(const float *s, uint16_t *d, ptrdiff_t n)
{
    if (pg_have_f16c()) { pg_f32_to_f16_row_f16c(s, d, n); return; }
    for (ptrdiff_t i = 0; i < n; i++) d[i] = pg_f32_to_f16(s[i]);
}

#endif

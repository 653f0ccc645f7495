/*
 * 16-bit float conversions and the cube_math_type roundings, as static inline C so that
 * the hot loops can inline them (numpy's npy_half_* functions cannot be inlined), and the
 * conversions of contiguous rows.
 *
 * Every float32 -> 16-bit conversion rounds to nearest, ties to even, keeps NaN quiet and
 * overflows to infinity, as IEEE 754 conversion does.  The scalar functions work on bit
 * patterns only, so they give the same answer whatever the FPU's flush-to-zero or
 * rounding-mode state; the vector layer (pg_vec.h) gives their bits eight lanes at a time.
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

/* AVX2 forms of the bfloat16 rounding, for the vector layer (pg_f8x2_to_bf16) and the
 * headers not yet written against it; and whether the CPU converts float16 in hardware */
#if PG_X86_DISPATCH
/* eight float32 values rounded to bfloat16 (pg_f32_to_bf16's bits: round to nearest
 * even, NaN kept quiet), one per 32-bit lane */
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

/* sixteen values rounded the same way (a then b), packed per 128-bit half: lanes 0-3 of a,
 * 0-3 of b, 4-7 of a, 4-7 of b.  The NaN test is one compare for both blocks, so rows
 * without NaN (nearly all) take the rounding alone */
PG_TARGET_AVX2 PG_ALWAYS_INLINE
static inline __m256i pg_bf16_pack16_avx2(__m256 a, __m256 b)
{
    if (_mm256_movemask_ps(_mm256_cmp_ps(a, b, _CMP_UNORD_Q)))
        return _mm256_packus_epi32(pg_bf16_round8_avx2(a), pg_bf16_round8_avx2(b));
    /* finite and infinite values: u + 0x7FFF + (bit 16 of u), top half */
    const __m256i one = _mm256_set1_epi32(1), bias = _mm256_set1_epi32(0x7FFF);
    const __m256i ua = _mm256_castps_si256(a), ub = _mm256_castps_si256(b);
    const __m256i ra = _mm256_add_epi32(_mm256_add_epi32(ua, bias),
                                        _mm256_and_si256(_mm256_srli_epi32(ua, 16), one));
    const __m256i rb = _mm256_add_epi32(_mm256_add_epi32(ub, bias),
                                        _mm256_and_si256(_mm256_srli_epi32(ub, 16), one));
    return _mm256_packus_epi32(_mm256_srli_epi32(ra, 16), _mm256_srli_epi32(rb, 16));
}

/* the same in order (a then b) */
PG_TARGET_AVX2 PG_ALWAYS_INLINE
static inline __m256i pg_bf16_round16_avx2(__m256 a, __m256 b)
{
    /* both halves are 0..0xFFFF: the unsigned-saturating pack keeps them, per 128-bit lane,
     * and the permute puts the lanes back in order */
    return _mm256_permute4x64_epi64(pg_bf16_pack16_avx2(a, b), 0xD8);
}

static int pg_have_f16c(void)
{
    return (pg_cpu_features() & (PG_CPU_AVX | PG_CPU_F16C)) == (PG_CPU_AVX | PG_CPU_F16C);
}
#else
static int pg_have_f16c(void) { return 0; }
#endif

/* the row conversions below are written against the vector layer, which includes this
 * file for the functions above: it includes it once more at its end, for them */
#include "pg_vec.h"

#endif /* PG_HALF_H */

#if defined(PG_VEC_COMPLETE) && !defined(PG_HALF_ROWS)
#define PG_HALF_ROWS
/*
 * Contiguous rows: float16 or bfloat16 to float32 and back, n values from s to d (which do
 * not overlap).  One body against the vector layer, eight values a step (sixteen for the
 * bfloat16 rounding, which AVX2 tests for NaN sixteen at a time), the last step
 * overlapping the one before where n is not a multiple of 8; rows shorter than 8 go value
 * by value.  Instantiated for AVX2 with F16C (hardware float16 conversion) and for the
 * baseline (SSE2 or NEON), chosen at run time; every path gives the scalar functions' bits.
 *
 * op: 0 float16 -> float32, 1 float32 -> float16, 2 bfloat16 -> float32,
 *     3 float32 -> bfloat16
 */
#if PG_VEC
PG_VEC_INLINE void pg_cvt8(const void *s, void *d, ptrdiff_t i, int op, int isa)
{
    const uint16_t *h = (const uint16_t *)s + i;
    const float *f = (const float *)s + i;
    if (op == 0) pg_f8_store((float *)d + i, pg_f8_from_f16(pg_h8_load(h), isa));
    else if (op == 1) pg_h8_store((uint16_t *)d + i, pg_f8_to_f16(pg_f8_load(f), isa));
    else if (op == 2) pg_f8_store((float *)d + i, pg_f8_from_bf16(pg_h8_load(h)));
    else pg_h8_store((uint16_t *)d + i, pg_f8_to_bf16(pg_f8_load(f)));
}

PG_VEC_INLINE void pg_cvt_row_body(const void *s, void *d, ptrdiff_t n, int op, int isa)
{
    ptrdiff_t i = 0;
    if (op == 3) {
        for (; i + 16 <= n; i += 16)
            pg_f8x2_store_bf16((uint16_t *)d + i, pg_f8_load((const float *)s + i),
                               pg_f8_load((const float *)s + i + 8), isa);
    }
    for (; i + 8 <= n; i += 8) pg_cvt8(s, d, i, op, isa);
    if (i < n && n >= 8) {
        pg_cvt8(s, d, n - 8, op, isa);
        return;
    }
    for (; i < n; i++) {
        if (op == 0) ((float *)d)[i] = pg_f16_to_f32(((const uint16_t *)s)[i]);
        else if (op == 1) ((uint16_t *)d)[i] = pg_f32_to_f16(((const float *)s)[i]);
        else if (op == 2) ((float *)d)[i] = pg_bf16_to_f32(((const uint16_t *)s)[i]);
        else ((uint16_t *)d)[i] = pg_f32_to_bf16(((const float *)s)[i]);
    }
}

#define PG_CVT_ROWS(SFX, ATTR, ISA)                                                         \
ATTR static void pg_f16_to_f32_row_##SFX(const uint16_t *s, float *d, ptrdiff_t n)         \
{ pg_cvt_row_body(s, d, n, 0, ISA); }                                                      \
ATTR static void pg_f32_to_f16_row_##SFX(const float *s, uint16_t *d, ptrdiff_t n)         \
{ pg_cvt_row_body(s, d, n, 1, ISA); }                                                      \
ATTR static void pg_bf16_to_f32_row_##SFX(const uint16_t *s, float *d, ptrdiff_t n)        \
{ pg_cvt_row_body(s, d, n, 2, ISA); }                                                      \
ATTR static void pg_f32_to_bf16_row_##SFX(const float *s, uint16_t *d, ptrdiff_t n)        \
{ pg_cvt_row_body(s, d, n, 3, ISA); }

PG_CVT_ROWS(base, , PG_ISA_BASE)
#if PG_X86_DISPATCH
PG_CVT_ROWS(avx2, PG_TARGET_AVX2_F16C, PG_ISA_AVX2)
/* the AVX2 copies where the CPU has AVX2 and F16C (and pg_set_simd allows them) */
#define PG_CVT_ROW(name, ...) \
    (pg_have_avx2() && pg_have_f16c() ? name##_avx2(__VA_ARGS__) : name##_base(__VA_ARGS__))
#else
#define PG_CVT_ROW(name, ...) name##_base(__VA_ARGS__)
#endif

#else   /* no vector layer (MSVC): value by value */
static void pg_f16_to_f32_row_base(const uint16_t *s, float *d, ptrdiff_t n)
{
    for (ptrdiff_t i = 0; i < n; i++) d[i] = pg_f16_to_f32(s[i]);
}
static void pg_f32_to_f16_row_base(const float *s, uint16_t *d, ptrdiff_t n)
{
    for (ptrdiff_t i = 0; i < n; i++) d[i] = pg_f32_to_f16(s[i]);
}
static void pg_bf16_to_f32_row_base(const uint16_t *s, float *d, ptrdiff_t n)
{
    for (ptrdiff_t i = 0; i < n; i++) d[i] = pg_bf16_to_f32(s[i]);
}
static void pg_f32_to_bf16_row_base(const float *s, uint16_t *d, ptrdiff_t n)
{
    for (ptrdiff_t i = 0; i < n; i++) d[i] = pg_f32_to_bf16(s[i]);
}
#define PG_CVT_ROW(name, ...) name##_base(__VA_ARGS__)
#endif

static inline void pg_f16_to_f32_row(const uint16_t *s, float *d, ptrdiff_t n)
{
    PG_CVT_ROW(pg_f16_to_f32_row, s, d, n);
}

static inline void pg_f32_to_f16_row(const float *s, uint16_t *d, ptrdiff_t n)
{
    PG_CVT_ROW(pg_f32_to_f16_row, s, d, n);
}

static inline void pg_bf16_to_f32_row(const uint16_t *s, float *d, ptrdiff_t n)
{
    PG_CVT_ROW(pg_bf16_to_f32_row, s, d, n);
}

static inline void pg_f32_to_bf16_row(const float *s, uint16_t *d, ptrdiff_t n)
{
    PG_CVT_ROW(pg_f32_to_bf16_row, s, d, n);
}
#endif /* PG_HALF_ROWS */

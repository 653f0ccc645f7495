/*
 * The W expansion of the average-pool gradient in polyphase form (one lane, L = 1).
 *
 * For pooling with period P (stride P), the interior input columns w = P*q + r are covered
 * by the m[r] consecutive output columns q + c[r] ... q + c[r] + m[r] - 1, so each phase r is
 * a sum of m[r] shifted copies of the grad_output row: contiguous, vectorisable loops in
 * place of a gather through a tap table.  Terms are added in increasing output column, as
 * the tap table adds them, so the two forms give the same bits.  Each sum is then multiplied
 * by `scale` (the row's D and H weight), as a separate pass over the row would.
 *
 * Periods 1 and 2 also serve rows of `gap` channels-last lanes merged into one
 * (_plan.flat_lanes): value l of input column w sums value l of its output columns, which
 * lie gap values apart, so a phase's terms are gap apart rather than adjacent.  At period 1
 * the loops run over the values as over columns; at period 2 q0, nq and c count values
 * (columns times gap), and each group of gap values q is two blocks of gap values in the
 * row, phase 0's at 2q and phase 1's at 2q + gap.
 */
#ifndef PG_EXPAND_H
#define PG_EXPAND_H

#include <stddef.h>
#include <stdint.h>

#include "pg_cpu.h"

#if defined(__SSE2__) || defined(_M_X64) || (defined(_M_IX86_FP) && _M_IX86_FP >= 2)
#include <emmintrin.h>
#define PG_EXPAND_SSE2 1
#else
#define PG_EXPAND_SSE2 0
#endif

#define PG_PHASE_SUM(T, a, m, q)                                              \
    ((m) == 1 ? (a)[q] : (m) == 2 ? (T)((a)[q] + (a)[(q) + 1])                 \
                                  : (T)((T)((a)[q] + (a)[(q) + 1]) + (a)[(q) + 2]))

#define PG_DEFINE_EXPAND_POLY(T, NAME)                                                      \
static inline void NAME(const T *grow, T *e, ptrdiff_t P, ptrdiff_t q0, ptrdiff_t nq,      \
                        const int64_t *c, const int64_t *m, ptrdiff_t gap, T *tmp, T k)     \
{                                                                                           \
    T *dst = e + P * q0;                                                                    \
    if (P == 2 && gap > 1) {                                                                \
        for (ptrdiff_t r = 0; r < 2; r++) {                                                 \
            const T *a = grow + q0 + c[r];                                                 \
            for (ptrdiff_t q = 0; q < nq; q += gap)                                         \
                for (ptrdiff_t l = 0; l < gap; l++) {                                       \
                    T s = m[r] ? a[q + l] : (T)0;                                           \
                    for (int64_t t = 1; t < m[r]; t++) s = s + a[q + l + t * gap];          \
                    dst[2 * q + r * gap + l] = k * s;                                       \
                }                                                                           \
        }                                                                                   \
        return;                                                                             \
    }                                                                                       \
    if (P == 2 && m[0] >= 1 && m[0] <= 3 && m[1] >= 1 && m[1] <= 3) {                        \
        const T *a = grow + q0 + c[0], *b = grow + q0 + c[1];                              \
        const ptrdiff_t ma = m[0], mb = m[1];                                              \
        if (ma == 1 && mb == 2) {                                                           \
            for (ptrdiff_t q = 0; q < nq; q++) {                                            \
                dst[2*q] = k * a[q]; dst[2*q+1] = k * (T)(b[q] + b[q+1]);                   \
            }                                                                               \
        } else if (ma == 2 && mb == 1) {                                                    \
            for (ptrdiff_t q = 0; q < nq; q++) {                                            \
                dst[2*q] = k * (T)(a[q] + a[q+1]); dst[2*q+1] = k * b[q];                   \
            }                                                                               \
        } else if (ma == 1 && mb == 1) {                                                    \
            for (ptrdiff_t q = 0; q < nq; q++) { dst[2*q] = k * a[q]; dst[2*q+1] = k * b[q]; } \
        } else {                                                                            \
            for (ptrdiff_t q = 0; q < nq; q++) {                                            \
                dst[2*q] = k * PG_PHASE_SUM(T, a, ma, q);                                   \
                dst[2*q+1] = k * PG_PHASE_SUM(T, b, mb, q);                                 \
            }                                                                               \
        }                                                                                   \
        return;                                                                             \
    }                                                                                       \
    if (P == 1 && m[0] >= 1) {                                                              \
        const T *a = grow + q0 + c[0];                                                     \
        for (ptrdiff_t q = 0; q < nq; q++) dst[q] = a[q];                                   \
        for (int64_t t = 1; t < m[0]; t++)                                                  \
            for (ptrdiff_t q = 0; q < nq; q++) dst[q] = dst[q] + a[q + t * gap];            \
        for (ptrdiff_t q = 0; q < nq; q++) dst[q] = k * dst[q];                             \
        return;                                                                             \
    }                                                                                       \
    for (ptrdiff_t r = 0; r < P; r++) {                                                     \
        const T *a = grow + q0 + c[r];                                                     \
        if (m[r] == 0) {                                                                    \
            for (ptrdiff_t q = 0; q < nq; q++) dst[P*q + r] = k * (T)0;                     \
            continue;                                                                       \
        }                                                                                   \
        for (ptrdiff_t q = 0; q < nq; q++) tmp[q] = a[q];                                   \
        for (int64_t t = 1; t < m[r]; t++)                                                  \
            for (ptrdiff_t q = 0; q < nq; q++) tmp[q] = tmp[q] + a[q + t];                  \
        for (ptrdiff_t q = 0; q < nq; q++) dst[P*q + r] = k * tmp[q];                       \
    }                                                                                       \
}

PG_DEFINE_EXPAND_POLY(float, pg_expand_poly_generic_f32)
PG_DEFINE_EXPAND_POLY(double, pg_expand_poly_generic_f64)

/*
 * Period 2 (stride 2, the common case) in float32: the two phases are summed several
 * columns at a time and interleaved with unpack instructions, where the generic loop above
 * stores one value at a time.  The adds are the same, in the same order, so are the bits
 * (SSE2 and AVX2 builds alike, see pg_cpu.h).
 */
static inline int pg_poly2_ok(ptrdiff_t P, const int64_t *m)
{
    return P == 2 && m[0] >= 1 && m[0] <= 3 && m[1] >= 1 && m[1] <= 3;
}

static inline void pg_poly2_tail_f32(const float *a, const float *b, int64_t ma, int64_t mb,
                                     float *dst, ptrdiff_t q, ptrdiff_t nq, float k)
{
    for (; q < nq; q++) {
        dst[2 * q] = k * PG_PHASE_SUM(float, a, ma, q);
        dst[2 * q + 1] = k * PG_PHASE_SUM(float, b, mb, q);
    }
}

#if PG_EXPAND_SSE2
static void pg_poly2_sse2_f32(const float *a, const float *b, int64_t ma, int64_t mb,
                              float *dst, ptrdiff_t nq, float k)
{
    const __m128 vk = _mm_set1_ps(k);
    ptrdiff_t q = 0;
    for (; q + 4 <= nq; q += 4) {
        __m128 va = _mm_loadu_ps(a + q), vb = _mm_loadu_ps(b + q);
        if (ma >= 2) va = _mm_add_ps(va, _mm_loadu_ps(a + q + 1));
        if (ma >= 3) va = _mm_add_ps(va, _mm_loadu_ps(a + q + 2));
        if (mb >= 2) vb = _mm_add_ps(vb, _mm_loadu_ps(b + q + 1));
        if (mb >= 3) vb = _mm_add_ps(vb, _mm_loadu_ps(b + q + 2));
        va = _mm_mul_ps(vk, va);
        vb = _mm_mul_ps(vk, vb);
        _mm_storeu_ps(dst + 2 * q, _mm_unpacklo_ps(va, vb));
        _mm_storeu_ps(dst + 2 * q + 4, _mm_unpackhi_ps(va, vb));
    }
    pg_poly2_tail_f32(a, b, ma, mb, dst, q, nq, k);
}
#endif

/* the most terms a phase of the AVX2 interior loops (periods 1 and 2): the polyphase form
 * (_plan.polyphase) is made for at most this many */
#define PG_POLY_MAX_M 16

static inline int pg_poly2_avx2_ok(ptrdiff_t P, const int64_t *m)
{
    return P == 2 && m[0] >= 1 && m[0] <= PG_POLY_MAX_M && m[1] >= 1 && m[1] <= PG_POLY_MAX_M;
}

#if PG_X86_DISPATCH
/* a[q] + a[q+S] + ... + a[q+(M-1)*S], eight columns, added left to right (M a constant
 * where the caller's is: then the loops unroll; else four terms an iteration) */
#define PG_PHASE_SUM8_S(v, a, M, Q, S)                                                      \
    {                                                                                       \
        const float *a_ = (a) + (Q);                                                        \
        int64_t t_ = 1;                                                                     \
        v = _mm256_loadu_ps(a_);                                                            \
        for (; t_ + 4 <= (M); t_ += 4) {                                                    \
            v = _mm256_add_ps(v, _mm256_loadu_ps(a_ + t_ * (S)));                           \
            v = _mm256_add_ps(v, _mm256_loadu_ps(a_ + (t_ + 1) * (S)));                     \
            v = _mm256_add_ps(v, _mm256_loadu_ps(a_ + (t_ + 2) * (S)));                     \
            v = _mm256_add_ps(v, _mm256_loadu_ps(a_ + (t_ + 3) * (S)));                     \
        }                                                                                   \
        for (; t_ < (M); t_++) v = _mm256_add_ps(v, _mm256_loadu_ps(a_ + t_ * (S)));        \
    }
#define PG_PHASE_SUM8(v, a, M, Q) PG_PHASE_SUM8_S(v, a, M, Q, 1)

/* one loop per pair of term counts (constants, so no tests inside the loop), nq >= 8 */
#define PG_POLY2_AVX2_BLOCK(MA, MB, Q)                                                      \
    {                                                                                       \
        const ptrdiff_t q_ = (Q);                                                           \
        __m256 va, vb;                                                                      \
        PG_PHASE_SUM8(va, a, MA, q_)                                                        \
        PG_PHASE_SUM8(vb, b, MB, q_)                                                        \
        va = _mm256_mul_ps(vk, va);                                                         \
        vb = _mm256_mul_ps(vk, vb);                                                         \
        __m256 lo = _mm256_unpacklo_ps(va, vb), hi = _mm256_unpackhi_ps(va, vb);            \
        _mm256_storeu_ps(dst + 2 * q_, _mm256_permute2f128_ps(lo, hi, 0x20));               \
        _mm256_storeu_ps(dst + 2 * q_ + 8, _mm256_permute2f128_ps(lo, hi, 0x31));           \
    }
#define PG_POLY2_AVX2_LOOP(MA, MB) PG_FOR8_OVERLAP(q, nq, PG_POLY2_AVX2_BLOCK(MA, MB, q))
/* the same with the terms gap apart (merged channels-last lanes, gap >= 8): for each group
 * of gap values, eight lanes at a time (the last eight overlapping where gap is not a
 * multiple of 8), phase 0's block, then phase 1's */
#define PG_POLY2S_AVX2_BLOCK(MA, MB, G, L)                                                  \
    {                                                                                       \
        const ptrdiff_t i_ = (G) + (L);                                                     \
        __m256 va, vb;                                                                      \
        PG_PHASE_SUM8_S(va, a, MA, i_, gap)                                                 \
        PG_PHASE_SUM8_S(vb, b, MB, i_, gap)                                                 \
        _mm256_storeu_ps(dst + (G) + i_, _mm256_mul_ps(vk, va));                            \
        _mm256_storeu_ps(dst + (G) + gap + i_, _mm256_mul_ps(vk, vb));                      \
    }
#define PG_POLY2S_AVX2_LOOP(MA, MB)                                                         \
    for (ptrdiff_t g_ = 0; g_ < nq; g_ += gap)                                              \
        PG_FOR8_OVERLAP(l_, gap, PG_POLY2S_AVX2_BLOCK(MA, MB, g_, l_))

/* LOOP(MA, MB) for the phases' term counts ma, mb (pg_poly2_avx2_ok): 1 to 4 as constants
 * (kernels up to 8 at stride 2), more as they are */
#define PG_POLY2_CASES(ma, mb, LOOP)                                                        \
    switch ((ma) * 8 + (mb)) {                                                              \
    case 8 * 1 + 1: LOOP(1, 1) break;                                                       \
    case 8 * 1 + 2: LOOP(1, 2) break;                                                       \
    case 8 * 2 + 1: LOOP(2, 1) break;                                                       \
    case 8 * 2 + 2: LOOP(2, 2) break;                                                       \
    case 8 * 1 + 3: LOOP(1, 3) break;                                                       \
    case 8 * 3 + 1: LOOP(3, 1) break;                                                       \
    case 8 * 2 + 3: LOOP(2, 3) break;                                                       \
    case 8 * 3 + 2: LOOP(3, 2) break;                                                       \
    case 8 * 3 + 3: LOOP(3, 3) break;                                                       \
    case 8 * 3 + 4: LOOP(3, 4) break;                                                       \
    case 8 * 4 + 3: LOOP(4, 3) break;                                                       \
    case 8 * 4 + 4: LOOP(4, 4) break;                                                       \
    default: LOOP((ma), (mb)) break;                                                        \
    }

PG_TARGET_AVX2
static void pg_poly2_avx2_f32(const float *a, const float *b, int64_t ma, int64_t mb,
                              float *dst, ptrdiff_t nq, float k)
{
    const __m256 vk = _mm256_set1_ps(k);
    if (nq < 8) {
        for (ptrdiff_t q = 0; q < nq; q++) {
            float u = a[q], v = b[q];
            for (int64_t t = 1; t < ma; t++) u = u + a[q + t];
            for (int64_t t = 1; t < mb; t++) v = v + b[q + t];
            dst[2 * q] = k * u;
            dst[2 * q + 1] = k * v;
        }
        return;
    }
    PG_POLY2_CASES(ma, mb, PG_POLY2_AVX2_LOOP)
}

/* period 2 with the terms gap >= 8 apart (nq a multiple of gap) */
PG_TARGET_AVX2
static void pg_poly2s_avx2_f32(const float *a, const float *b, int64_t ma, int64_t mb,
                               ptrdiff_t gap, float *dst, ptrdiff_t nq, float k)
{
    const __m256 vk = _mm256_set1_ps(k);
    PG_POLY2_CASES(ma, mb, PG_POLY2S_AVX2_LOOP)
}

/*
 * Period 1 (stride 1): dst[q] = k * (a[q] + a[q+1] + ... + a[q+m-1]), added left to right
 * as the generic loop does (so the same bits), eight columns at a time.  Before it, stride
 * 1 went through the generic loop, built without AVX, and called from the AVX2 item: on
 * the 2-vCPU EPYC that call cost k3s1p1 32x64x56x56 float32 28 ms a call, against 8 ms for
 * W = 55, as if each switch between the two encodings stalled.
 */
#define PG_POLY1_AVX2_BLOCK(M, Q, S)                                                        \
    {                                                                                       \
        const ptrdiff_t q_ = (Q);                                                           \
        __m256 v;                                                                           \
        PG_PHASE_SUM8_S(v, a, M, q_, S)                                                     \
        _mm256_storeu_ps(dst + q_, _mm256_mul_ps(vk, v));                                   \
    }
#define PG_POLY1_AVX2_LOOP(M) PG_FOR8_OVERLAP(q, nq, PG_POLY1_AVX2_BLOCK(M, q, 1))
/* the same with the terms gap apart (merged channels-last lanes) */
#define PG_POLY1S_AVX2_LOOP(M) PG_FOR8_OVERLAP(q, nq, PG_POLY1_AVX2_BLOCK(M, q, gap))

/* LOOP(M) for a period-1 interior's term count m: 1 to 8 as constants (kernels up to 8
 * at stride 1), more as it is */
#define PG_POLY1_CASES(m, LOOP)                                                             \
    switch (m) {                                                                            \
    case 1: LOOP(1) break;                                                                  \
    case 2: LOOP(2) break;                                                                  \
    case 3: LOOP(3) break;                                                                  \
    default: PG_CASES_4_TO_8(m, LOOP) break;                                                \
    }

PG_TARGET_AVX2
static void pg_poly1_avx2_f32(const float *a, int64_t m, ptrdiff_t gap, float *dst,
                              ptrdiff_t nq, float k)
{
    const __m256 vk = _mm256_set1_ps(k);
    if (nq < 8) {
        for (ptrdiff_t q = 0; q < nq; q++) {
            float v = a[q];
            for (int64_t t = 1; t < m; t++) v = v + a[q + t * gap];
            dst[q] = k * v;
        }
        return;
    }
    if (gap == 1)
        PG_POLY1_CASES(m, PG_POLY1_AVX2_LOOP)
    else
        PG_POLY1_CASES(m, PG_POLY1S_AVX2_LOOP)
}
#endif

static inline void pg_expand_poly_f32(const float *grow, float *e, ptrdiff_t P, ptrdiff_t q0,
                                      ptrdiff_t nq, const int64_t *c, const int64_t *m,
                                      ptrdiff_t gap, float *tmp, float k)
{
#if PG_X86_DISPATCH
    if (P == 1 && m[0] >= 1 && pg_have_avx2()) {
        pg_poly1_avx2_f32(grow + q0 + c[0], m[0], gap, e + q0, nq, k);
        return;
    }
    if (pg_poly2_avx2_ok(P, m) && gap >= 8 && pg_have_avx2()) {
        pg_poly2s_avx2_f32(grow + q0 + c[0], grow + q0 + c[1], m[0], m[1], gap, e + 2 * q0,
                           nq, k);
        return;
    }
    if (pg_poly2_avx2_ok(P, m) && gap == 1 && pg_have_avx2()) {
        pg_poly2_avx2_f32(grow + q0 + c[0], grow + q0 + c[1], m[0], m[1], e + 2 * q0, nq, k);
        return;
    }
#endif
#if PG_EXPAND_SSE2
    if (pg_poly2_ok(P, m) && gap == 1) {
        pg_poly2_sse2_f32(grow + q0 + c[0], grow + q0 + c[1], m[0], m[1], e + 2 * q0, nq, k);
        return;
    }
#endif
    pg_expand_poly_generic_f32(grow, e, P, q0, nq, c, m, gap, tmp, k);
}

#if PG_X86_DISPATCH
/*
 * Float64 interiors four values at a time, each value's terms summed in a register in the
 * generic loop's order (so the same bits): period 1, terms gap apart, where the generic
 * loop makes a pass over the row per term; period 2 at gap 1 with 1 to 3 terms a phase,
 * the phases interleaved (a0 b0 a1 b1 ...).  With them and the one-pass row sums
 * (pg_stream.h's pg_combine_avx2_f64), float64 NCHW k7s1p3 at 112 x 112 took 56 ms a call
 * on one thread of the 2-vCPU EPYC, against 87 ms with the generic loops.
 */
PG_TARGET_AVX2
static void pg_poly1_avx2_f64(const double *a, int64_t m, ptrdiff_t gap, double *dst,
                              ptrdiff_t nq, double k)
{
    const __m256d vk = _mm256_set1_pd(k);
    ptrdiff_t q = 0;
    for (; q + 4 <= nq; q += 4) {
        __m256d v = _mm256_loadu_pd(a + q);
        for (int64_t t = 1; t < m; t++) v = _mm256_add_pd(v, _mm256_loadu_pd(a + q + t * gap));
        _mm256_storeu_pd(dst + q, _mm256_mul_pd(vk, v));
    }
    for (; q < nq; q++) {
        double v = a[q];
        for (int64_t t = 1; t < m; t++) v = v + a[q + t * gap];
        dst[q] = k * v;
    }
}

PG_TARGET_AVX2 PG_ALWAYS_INLINE
static inline __m256d pg_phase4_f64(const double *a, int64_t m, ptrdiff_t q)
{
    __m256d v = _mm256_loadu_pd(a + q);
    if (m >= 2) v = _mm256_add_pd(v, _mm256_loadu_pd(a + q + 1));
    if (m >= 3) v = _mm256_add_pd(v, _mm256_loadu_pd(a + q + 2));
    return v;
}

PG_TARGET_AVX2
static void pg_poly2_avx2_f64(const double *a, const double *b, int64_t ma, int64_t mb,
                              double *dst, ptrdiff_t nq, double k)
{
    const __m256d vk = _mm256_set1_pd(k);
    ptrdiff_t q = 0;
    for (; q + 4 <= nq; q += 4) {
        const __m256d va = _mm256_mul_pd(vk, pg_phase4_f64(a, ma, q));
        const __m256d vb = _mm256_mul_pd(vk, pg_phase4_f64(b, mb, q));
        const __m256d lo = _mm256_unpacklo_pd(va, vb);   /* a0 b0 a2 b2 */
        const __m256d hi = _mm256_unpackhi_pd(va, vb);   /* a1 b1 a3 b3 */
        _mm256_storeu_pd(dst + 2 * q, _mm256_permute2f128_pd(lo, hi, 0x20));
        _mm256_storeu_pd(dst + 2 * q + 4, _mm256_permute2f128_pd(lo, hi, 0x31));
    }
    for (; q < nq; q++) {
        dst[2 * q] = k * PG_PHASE_SUM(double, a, ma, q);
        dst[2 * q + 1] = k * PG_PHASE_SUM(double, b, mb, q);
    }
}

/* period 2 with the terms gap >= 4 apart (merged channels-last lanes; nq a multiple of
 * gap; each phase at least one term): each group of gap values is phase 0's block at
 * dst + 2q, then phase 1's, each block four values at a time, the last four overlapping
 * the ones before where gap is not a multiple of four (the same values).  Float64 merged
 * rows, k3s2p1 at 112 x 112, C = 8 and 12, 2 threads of the 2-vCPU EPYC: 9.05 and 10.84 ms,
 * against 14.17 and 12.96 ms through their tap tables (channels-last / NCHW 1.06 and 1.01,
 * was 1.17 and 1.19) */
PG_TARGET_AVX2 PG_ALWAYS_INLINE
static inline __m256d pg_phase4s_f64(const double *a, int64_t m, ptrdiff_t gap)
{
    __m256d v = _mm256_loadu_pd(a);
    for (int64_t t = 1; t < m; t++) v = _mm256_add_pd(v, _mm256_loadu_pd(a + t * gap));
    return v;
}

PG_TARGET_AVX2
static void pg_poly2s_avx2_f64(const double *a, const double *b, int64_t ma, int64_t mb,
                               ptrdiff_t gap, double *dst, ptrdiff_t nq, double k)
{
    const __m256d vk = _mm256_set1_pd(k);
    for (ptrdiff_t q = 0; q < nq; q += gap) {
        for (ptrdiff_t l = 0;; l += 4) {
            if (l + 4 > gap) l = gap - 4;
            _mm256_storeu_pd(dst + 2 * q + l,
                             _mm256_mul_pd(vk, pg_phase4s_f64(a + q + l, ma, gap)));
            _mm256_storeu_pd(dst + 2 * q + gap + l,
                             _mm256_mul_pd(vk, pg_phase4s_f64(b + q + l, mb, gap)));
            if (l + 4 >= gap) break;
        }
    }
}
#endif

static inline void pg_expand_poly_f64(const double *grow, double *e, ptrdiff_t P,
                                      ptrdiff_t q0, ptrdiff_t nq, const int64_t *c,
                                      const int64_t *m, ptrdiff_t gap, double *tmp, double k)
{
#if PG_X86_DISPATCH
    if (P == 1 && m[0] >= 1 && pg_have_avx2()) {
        pg_poly1_avx2_f64(grow + q0 + c[0], m[0], gap, e + q0, nq, k);
        return;
    }
    if (pg_poly2_ok(P, m) && gap == 1 && pg_have_avx2()) {
        pg_poly2_avx2_f64(grow + q0 + c[0], grow + q0 + c[1], m[0], m[1], e + 2 * q0, nq, k);
        return;
    }
    if (P == 2 && gap >= 4 && m[0] >= 1 && m[1] >= 1 && pg_have_avx2()) {
        pg_poly2s_avx2_f64(grow + q0 + c[0], grow + q0 + c[1], m[0], m[1], gap, e + 2 * q0,
                           nq, k);
        return;
    }
#endif
    pg_expand_poly_generic_f64(grow, e, P, q0, nq, c, m, gap, tmp, k);
}

/*
 * The W expansion with lanes (channels-last, L > 1): input column w of the row is
 * k * (the sum of the m grad_output columns tap[w*m ...]), each a run of L contiguous
 * lanes, added left to right as in the one-lane tap loop; the lane loops vectorise.
 */
#define PG_DEFINE_EXPAND_LANES(T, NAME, ATTR)                                               \
ATTR static void NAME(const T *grow, T *erow, const int64_t *tap, ptrdiff_t m, ptrdiff_t W, \
                      ptrdiff_t L, T k)                                                     \
{                                                                                           \
    for (ptrdiff_t iw = 0; iw < W; iw++) {                                                  \
        T *PG_RESTRICT dst = erow + iw * L;                                                 \
        const int64_t *t = tap + iw * m;                                                    \
        const T *PG_RESTRICT a = grow + t[0] * L;                                           \
        ptrdiff_t l;                                                                        \
        if (m == 1) {                                                                       \
            for (l = 0; l < L; l++) dst[l] = k * a[l];                                      \
        } else if (m == 2) {                                                                \
            const T *PG_RESTRICT b = grow + t[1] * L;                                       \
            for (l = 0; l < L; l++) dst[l] = k * (a[l] + b[l]);                             \
        } else if (m == 3) {                                                                \
            const T *PG_RESTRICT b = grow + t[1] * L, *PG_RESTRICT c = grow + t[2] * L;     \
            for (l = 0; l < L; l++) dst[l] = k * ((a[l] + b[l]) + c[l]);                    \
        } else {                                                                            \
            for (l = 0; l < L; l++) dst[l] = a[l];                                          \
            for (ptrdiff_t r = 1; r < m; r++) {                                             \
                const T *PG_RESTRICT b = grow + t[r] * L;                                   \
                for (l = 0; l < L; l++) dst[l] = dst[l] + b[l];                             \
            }                                                                               \
            for (l = 0; l < L; l++) dst[l] = k * dst[l];                                    \
        }                                                                                   \
    }                                                                                       \
}

PG_DEFINE_EXPAND_LANES(float, pg_lanes_base_f32, )
PG_DEFINE_EXPAND_LANES(double, pg_lanes_base_f64, )
#if PG_X86_DISPATCH
PG_DEFINE_EXPAND_LANES(float, pg_lanes_few_avx2_f32, PG_TARGET_AVX2)
PG_DEFINE_EXPAND_LANES(double, pg_lanes_avx2_f64, PG_TARGET_AVX2)

/* M terms of lanes l .. l+7 of a column, summed in registers left to right */
#define PG_LANES_SUM8(M, l)                                                                 \
    {                                                                                       \
        __m256 v_ = _mm256_loadu_ps(src[0] + (l));                                          \
        for (ptrdiff_t r_ = 1; r_ < (M); r_++)                                              \
            v_ = _mm256_add_ps(v_, _mm256_loadu_ps(src[r_] + (l)));                         \
        _mm256_storeu_ps(dst + (l), _mm256_mul_ps(kv, v_));                                 \
    }
#define PG_LANES_MANY_COLUMN(M) PG_FOR8_OVERLAP(l, L, PG_LANES_SUM8(M, l))

/*
 * Four or more taps a column (windows of 4 or more at stride 1, of 7 or more at stride 2)
 * with at least eight lanes: each block of eight lanes summed in registers, the last eight
 * again where L is not a multiple of eight (erow is not grow), in place of a pass over the
 * column for every term; 4 to 8 taps as constants.  The same sums, left to right.
 */
PG_TARGET_AVX2
static void pg_lanes_many_avx2_f32(const float *PG_RESTRICT grow, float *PG_RESTRICT erow,
                                   const int64_t *tap, ptrdiff_t m, ptrdiff_t W, ptrdiff_t L,
                                   float k)
{
    const __m256 kv = _mm256_set1_ps(k);
    const float *src[PG_MAX_TAPS];
    for (ptrdiff_t iw = 0; iw < W; iw++) {
        float *PG_RESTRICT dst = erow + iw * L;
        for (ptrdiff_t r = 0; r < m; r++) src[r] = grow + tap[iw * m + r] * L;
        PG_CASES_4_TO_8(m, PG_LANES_MANY_COLUMN)
    }
}

static void pg_lanes_avx2_f32(const float *grow, float *erow, const int64_t *tap, ptrdiff_t m,
                              ptrdiff_t W, ptrdiff_t L, float k)
{
    if (m >= 4 && m <= PG_MAX_TAPS && L >= 8)
        pg_lanes_many_avx2_f32(grow, erow, tap, m, W, L, k);
    else
        pg_lanes_few_avx2_f32(grow, erow, tap, m, W, L, k);
}
#endif

static inline void pg_expand_lanes_f32(const float *grow, float *erow, const int64_t *tap,
                                       ptrdiff_t m, ptrdiff_t W, ptrdiff_t L, float k)
{
    PG_PICK(pg_lanes, f32, grow, erow, tap, m, W, L, k);
}

static inline void pg_expand_lanes_f64(const double *grow, double *erow, const int64_t *tap,
                                       ptrdiff_t m, ptrdiff_t W, ptrdiff_t L, double k)
{
    PG_PICK(pg_lanes, f64, grow, erow, tap, m, W, L, k);
}

#endif

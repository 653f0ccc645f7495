/*
 * The W expansion of the average-pool gradient in polyphase form (one lane, L = 1).
 *
 * For pooling with period P (stride P), the interior input columns w = P*q + r are covered
 * by the m[r] consecutive output columns q + c[r] ... q + c[r] + m[r] - 1, so each phase r is
 * a sum of m[r] shifted copies of the grad_output row: contiguous, vectorisable loops in
 * place of a gather through a tap table.  Terms are added in increasing output column, as
 * the tap table adds them, so the two forms give the same bits.
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
                        const int64_t *c, const int64_t *m, T *tmp)                         \
{                                                                                           \
    T *dst = e + P * q0;                                                                    \
    if (P == 2 && m[0] >= 1 && m[0] <= 3 && m[1] >= 1 && m[1] <= 3) {                        \
        const T *a = grow + q0 + c[0], *b = grow + q0 + c[1];                              \
        const ptrdiff_t ma = m[0], mb = m[1];                                              \
        if (ma == 1 && mb == 2) {                                                           \
            for (ptrdiff_t q = 0; q < nq; q++) { dst[2*q] = a[q]; dst[2*q+1] = b[q] + b[q+1]; } \
        } else if (ma == 2 && mb == 1) {                                                    \
            for (ptrdiff_t q = 0; q < nq; q++) { dst[2*q] = a[q] + a[q+1]; dst[2*q+1] = b[q]; } \
        } else if (ma == 1 && mb == 1) {                                                    \
            for (ptrdiff_t q = 0; q < nq; q++) { dst[2*q] = a[q]; dst[2*q+1] = b[q]; }      \
        } else {                                                                            \
            for (ptrdiff_t q = 0; q < nq; q++) {                                            \
                dst[2*q] = PG_PHASE_SUM(T, a, ma, q);                                       \
                dst[2*q+1] = PG_PHASE_SUM(T, b, mb, q);                                     \
            }                                                                               \
        }                                                                                   \
        return;                                                                             \
    }                                                                                       \
    if (P == 1 && m[0] >= 1) {                                                              \
        const T *a = grow + q0 + c[0];                                                     \
        for (ptrdiff_t q = 0; q < nq; q++) dst[q] = a[q];                                   \
        for (int64_t t = 1; t < m[0]; t++)                                                  \
            for (ptrdiff_t q = 0; q < nq; q++) dst[q] = dst[q] + a[q + t];                  \
        return;                                                                             \
    }                                                                                       \
    for (ptrdiff_t r = 0; r < P; r++) {                                                     \
        const T *a = grow + q0 + c[r];                                                     \
        if (m[r] == 0) {                                                                    \
            for (ptrdiff_t q = 0; q < nq; q++) dst[P*q + r] = 0;                            \
            continue;                                                                       \
        }                                                                                   \
        for (ptrdiff_t q = 0; q < nq; q++) tmp[q] = a[q];                                   \
        for (int64_t t = 1; t < m[r]; t++)                                                  \
            for (ptrdiff_t q = 0; q < nq; q++) tmp[q] = tmp[q] + a[q + t];                  \
        for (ptrdiff_t q = 0; q < nq; q++) dst[P*q + r] = tmp[q];                           \
    }                                                                                       \
}

PG_DEFINE_EXPAND_POLY(float, pg_expand_poly_generic_f32)
PG_DEFINE_EXPAND_POLY(double, pg_expand_poly_f64)

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
                                     float *dst, ptrdiff_t q, ptrdiff_t nq)
{
    for (; q < nq; q++) {
        dst[2 * q] = PG_PHASE_SUM(float, a, ma, q);
        dst[2 * q + 1] = PG_PHASE_SUM(float, b, mb, q);
    }
}

#if PG_EXPAND_SSE2
static void pg_poly2_sse2_f32(const float *a, const float *b, int64_t ma, int64_t mb,
                              float *dst, ptrdiff_t nq)
{
    ptrdiff_t q = 0;
    for (; q + 4 <= nq; q += 4) {
        __m128 va = _mm_loadu_ps(a + q), vb = _mm_loadu_ps(b + q);
        if (ma >= 2) va = _mm_add_ps(va, _mm_loadu_ps(a + q + 1));
        if (ma >= 3) va = _mm_add_ps(va, _mm_loadu_ps(a + q + 2));
        if (mb >= 2) vb = _mm_add_ps(vb, _mm_loadu_ps(b + q + 1));
        if (mb >= 3) vb = _mm_add_ps(vb, _mm_loadu_ps(b + q + 2));
        _mm_storeu_ps(dst + 2 * q, _mm_unpacklo_ps(va, vb));
        _mm_storeu_ps(dst + 2 * q + 4, _mm_unpackhi_ps(va, vb));
    }
    pg_poly2_tail_f32(a, b, ma, mb, dst, q, nq);
}
#endif

#if PG_X86_DISPATCH
PG_TARGET_AVX2
static void pg_poly2_avx2_f32(const float *a, const float *b, int64_t ma, int64_t mb,
                              float *dst, ptrdiff_t nq)
{
    ptrdiff_t q = 0;
    if (nq < 8) {
        pg_poly2_tail_f32(a, b, ma, mb, dst, 0, nq);
        return;
    }
    for (;; q += 8) {
        if (q + 8 > nq) q = nq - 8;   /* the last block overlaps: it rewrites equal values */
        __m256 va = _mm256_loadu_ps(a + q), vb = _mm256_loadu_ps(b + q);
        if (ma >= 2) va = _mm256_add_ps(va, _mm256_loadu_ps(a + q + 1));
        if (ma >= 3) va = _mm256_add_ps(va, _mm256_loadu_ps(a + q + 2));
        if (mb >= 2) vb = _mm256_add_ps(vb, _mm256_loadu_ps(b + q + 1));
        if (mb >= 3) vb = _mm256_add_ps(vb, _mm256_loadu_ps(b + q + 2));
        __m256 lo = _mm256_unpacklo_ps(va, vb), hi = _mm256_unpackhi_ps(va, vb);
        _mm256_storeu_ps(dst + 2 * q, _mm256_permute2f128_ps(lo, hi, 0x20));
        _mm256_storeu_ps(dst + 2 * q + 8, _mm256_permute2f128_ps(lo, hi, 0x31));
        if (q + 8 == nq) break;
    }
}
#endif

static inline void pg_expand_poly_f32(const float *grow, float *e, ptrdiff_t P, ptrdiff_t q0,
                                      ptrdiff_t nq, const int64_t *c, const int64_t *m,
                                      float *tmp)
{
    if (pg_poly2_ok(P, m)) {
        const float *a = grow + q0 + c[0], *b = grow + q0 + c[1];
        float *dst = e + 2 * q0;
#if PG_X86_DISPATCH
        if (pg_have_avx2()) { pg_poly2_avx2_f32(a, b, m[0], m[1], dst, nq); return; }
#endif
#if PG_EXPAND_SSE2
        pg_poly2_sse2_f32(a, b, m[0], m[1], dst, nq);
        return;
#endif
    }
    pg_expand_poly_generic_f32(grow, e, P, q0, nq, c, m, tmp);
}

#endif

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

PG_DEFINE_EXPAND_POLY(float, pg_expand_poly_f32)
PG_DEFINE_EXPAND_POLY(double, pg_expand_poly_f64)

#endif

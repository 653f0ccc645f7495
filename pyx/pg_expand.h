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
#include "pg_vec.h"

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
    if (P == 2 && m[0] >= 1 && m[0] <= 3 && m[1] >= 1 && m[1] <= 3) {                       \
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
 * The interiors of periods 1 and 2, several columns at a time through the vector layer
 * (pg_vec.h): each value's terms summed in a register in the generic loop's order, then
 * multiplied by k, so the same bits.  Each body below is built for AVX2 and for the
 * baseline (SSE2, NEON: PG_EXPAND_ISA); pg_expand_poly_f32/_f64 pick one.
 */
static inline int pg_poly2_ok(ptrdiff_t P, const int64_t *m)
{
    return P == 2 && m[0] >= 1 && m[0] <= 3 && m[1] >= 1 && m[1] <= 3;
}

/* the most terms a phase of the vector interior loops (periods 1 and 2): the polyphase
 * form (_plan.polyphase) is made for at most this many */
#define PG_POLY_MAX_M 16

/* period 2 in the vector loops (float32; the name is older than the baseline copies) */
static inline int pg_poly2_avx2_ok(ptrdiff_t P, const int64_t *m)
{
    return P == 2 && m[0] >= 1 && m[0] <= PG_POLY_MAX_M && m[1] >= 1 && m[1] <= PG_POLY_MAX_M;
}

#if PG_VEC
/* a[0] + a[S] + ... + a[(M-1)*S], eight columns, added left to right (M a constant where
 * the caller's is: then the loops unroll; else four terms an iteration) */
PG_VEC_INLINE pg_f8 pg_phase8(const float *a, int64_t M, ptrdiff_t S)
{
    pg_f8 v = pg_f8_load(a);
    int64_t t = 1;
    for (; t + 4 <= M; t += 4) {
        v = v + pg_f8_load(a + t * S);
        v = v + pg_f8_load(a + (t + 1) * S);
        v = v + pg_f8_load(a + (t + 2) * S);
        v = v + pg_f8_load(a + (t + 3) * S);
    }
    for (; t < M; t++) v = v + pg_f8_load(a + t * S);
    return v;
}

/* The blocks of the loops, eight columns or lanes from q on.  They take k as a pointer to
 * eight copies (vk, which pg_item.h's AVX2 E rows also hold): a vector may not be passed
 * by value from an AVX2 function to a plain one. */
/* period 2: the phases a (MA terms) and b (MB) interleaved, a0 b0 a1 b1 ... */
PG_VEC_INLINE void pg_poly2_block8(const float *a, const float *b, int64_t MA, int64_t MB,
                                   float *dst, ptrdiff_t q, const void *vk, int isa)
{
    const pg_f8 k = pg_f8_load(vk);
    pg_f8 lo, hi;
    pg_f8_zip(k * pg_phase8(a + q, MA, 1), k * pg_phase8(b + q, MB, 1), &lo, &hi, isa);
    pg_f8_store(dst + 2 * q, lo);
    pg_f8_store(dst + 2 * q + 8, hi);
}

/* period 2 with the terms gap apart (merged channels-last lanes): lanes i of the group of
 * gap values at g, phase 0's block at dst + 2g, then phase 1's */
PG_VEC_INLINE void pg_poly2s_block8(const float *a, const float *b, int64_t MA, int64_t MB,
                                    ptrdiff_t gap, float *dst, ptrdiff_t g, ptrdiff_t i,
                                    const void *vk)
{
    const pg_f8 k = pg_f8_load(vk);
    pg_f8_store(dst + g + (g + i), k * pg_phase8(a + g + i, MA, gap));
    pg_f8_store(dst + g + gap + (g + i), k * pg_phase8(b + g + i, MB, gap));
}

/* period 1, the terms S apart (1, or gap for merged lanes) */
PG_VEC_INLINE void pg_poly1_block8(const float *a, int64_t M, ptrdiff_t S, float *dst,
                                   ptrdiff_t q, const void *vk)
{
    pg_f8_store(dst + q, pg_f8_load(vk) * pg_phase8(a + q, M, S));
}

/* the loops of the blocks over a row (nq >= 8; a, b, dst, nq, gap and vk in scope) */
#define PG_POLY2_LOOP(MA, MB, ISA)                                                          \
    PG_FOR8_OVERLAP(q, nq, pg_poly2_block8(a, b, MA, MB, dst, q, &vk, ISA);)
/* for each group of gap values (gap >= 8), eight lanes at a time, the last eight
 * overlapping where gap is not a multiple of 8 */
#define PG_POLY2S_LOOP(MA, MB)                                                              \
    for (ptrdiff_t g_ = 0; g_ < nq; g_ += gap)                                              \
        PG_FOR8_OVERLAP(l_, gap, pg_poly2s_block8(a, b, MA, MB, gap, dst, g_, l_, &vk);)
#define PG_POLY1_LOOP(M) PG_FOR8_OVERLAP(q, nq, pg_poly1_block8(a, M, 1, dst, q, &vk);)
#define PG_POLY1S_LOOP(M) PG_FOR8_OVERLAP(q, nq, pg_poly1_block8(a, M, gap, dst, q, &vk);)
/* the names pg_item.h's AVX2 E rows use */
#define PG_POLY2_AVX2_LOOP(MA, MB) PG_POLY2_LOOP(MA, MB, PG_ISA_AVX2)
#define PG_POLY2S_AVX2_LOOP PG_POLY2S_LOOP
#define PG_POLY1_AVX2_LOOP PG_POLY1_LOOP
#define PG_POLY1S_AVX2_LOOP PG_POLY1S_LOOP
/* (in the bodies: the instantiation's isa) */
#define PG_POLY2_ISA_LOOP(MA, MB) PG_POLY2_LOOP(MA, MB, isa)

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

/* LOOP(M) for a period-1 interior's term count m: 1 to 8 as constants (kernels up to 8
 * at stride 1), more as it is */
#define PG_POLY1_CASES(m, LOOP)                                                             \
    switch (m) {                                                                            \
    case 1: LOOP(1) break;                                                                  \
    case 2: LOOP(2) break;                                                                  \
    case 3: LOOP(3) break;                                                                  \
    default: PG_CASES_4_TO_8(m, LOOP) break;                                                \
    }

/* period 2, gap 1: dst[2q] = k * (phase a's terms), dst[2q + 1] = k * (phase b's) */
PG_VEC_INLINE void pg_poly2_body_f32(const float *a, const float *b, int64_t ma, int64_t mb,
                                     float *dst, ptrdiff_t nq, float k, int isa)
{
    const pg_f8 vk = pg_f8_set1_isa(k, isa);
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
    PG_POLY2_CASES(ma, mb, PG_POLY2_ISA_LOOP)
}

/* period 2 with the terms gap >= 8 apart (nq a multiple of gap) */
PG_VEC_INLINE void pg_poly2s_body_f32(const float *a, const float *b, int64_t ma, int64_t mb,
                                      ptrdiff_t gap, float *dst, ptrdiff_t nq, float k, int isa)
{
    const pg_f8 vk = pg_f8_set1_isa(k, isa);
    PG_POLY2_CASES(ma, mb, PG_POLY2S_LOOP)
}

/* period 1 (stride 1): dst[q] = k * (a[q] + a[q+gap] + ... + a[q+(m-1)*gap]) */
PG_VEC_INLINE void pg_poly1_body_f32(const float *a, int64_t m, ptrdiff_t gap, float *dst,
                                     ptrdiff_t nq, float k, int isa)
{
    const pg_f8 vk = pg_f8_set1_isa(k, isa);
    if (nq < 8) {
        for (ptrdiff_t q = 0; q < nq; q++) {
            float v = a[q];
            for (int64_t t = 1; t < m; t++) v = v + a[q + t * gap];
            dst[q] = k * v;
        }
        return;
    }
    if (gap == 1)
        PG_POLY1_CASES(m, PG_POLY1_LOOP)
    else
        PG_POLY1_CASES(m, PG_POLY1S_LOOP)
}

/*
 * Float64, four values at a time: period 1, terms gap apart, where the generic loop makes
 * a pass over the row per term; period 2 at gap 1 with 1 to 3 terms a phase, the phases
 * interleaved (a0 b0 a1 b1 ...); period 2 with the terms gap >= 4 apart.
 */
PG_VEC_INLINE void pg_poly1_body_f64(const double *a, int64_t m, ptrdiff_t gap, double *dst,
                                     ptrdiff_t nq, double k)
{
    const pg_d4 vk = pg_d4_set1(k);
    ptrdiff_t q = 0;
    for (; q + 4 <= nq; q += 4) {
        pg_d4 v = pg_d4_load(a + q);
        for (int64_t t = 1; t < m; t++) v = v + pg_d4_load(a + q + t * gap);
        pg_d4_store(dst + q, vk * v);
    }
    for (; q < nq; q++) {
        double v = a[q];
        for (int64_t t = 1; t < m; t++) v = v + a[q + t * gap];
        dst[q] = k * v;
    }
}

/* a[q] + a[q + 1] (+ a[q + 2]), four values (m 1 to 3) */
PG_VEC_INLINE pg_d4 pg_phase4_f64(const double *a, int64_t m, ptrdiff_t q)
{
    pg_d4 v = pg_d4_load(a + q);
    if (m >= 2) v = v + pg_d4_load(a + q + 1);
    if (m >= 3) v = v + pg_d4_load(a + q + 2);
    return v;
}

/* a[0] + a[gap] + ... + a[(m-1)*gap], four values */
PG_VEC_INLINE pg_d4 pg_phase4s_f64(const double *a, int64_t m, ptrdiff_t gap)
{
    pg_d4 v = pg_d4_load(a);
    for (int64_t t = 1; t < m; t++) v = v + pg_d4_load(a + t * gap);
    return v;
}

PG_VEC_INLINE void pg_poly2_body_f64(const double *a, const double *b, int64_t ma, int64_t mb,
                                     double *dst, ptrdiff_t nq, double k, int isa)
{
    const pg_d4 vk = pg_d4_set1(k);
    ptrdiff_t q = 0;
    for (; q + 4 <= nq; q += 4) {
        pg_d4 lo, hi;
        pg_d4_zip(vk * pg_phase4_f64(a, ma, q), vk * pg_phase4_f64(b, mb, q), &lo, &hi, isa);
        pg_d4_store(dst + 2 * q, lo);
        pg_d4_store(dst + 2 * q + 4, hi);
    }
    for (; q < nq; q++) {
        dst[2 * q] = k * PG_PHASE_SUM(double, a, ma, q);
        dst[2 * q + 1] = k * PG_PHASE_SUM(double, b, mb, q);
    }
}

/* gap >= 4, nq a multiple of gap, each phase at least one term: each group of gap values
 * is phase 0's block at dst + 2q, then phase 1's, four values at a time, the last four
 * overlapping the ones before where gap is not a multiple of four (the same values) */
PG_VEC_INLINE void pg_poly2s_body_f64(const double *a, const double *b, int64_t ma,
                                      int64_t mb, ptrdiff_t gap, double *dst, ptrdiff_t nq,
                                      double k)
{
    const pg_d4 vk = pg_d4_set1(k);
    for (ptrdiff_t q = 0; q < nq; q += gap) {
        for (ptrdiff_t l = 0;; l += 4) {
            if (l + 4 > gap) l = gap - 4;
            pg_d4_store(dst + 2 * q + l, vk * pg_phase4s_f64(a + q + l, ma, gap));
            pg_d4_store(dst + 2 * q + gap + l, vk * pg_phase4s_f64(b + q + l, mb, gap));
            if (l + 4 >= gap) break;
        }
    }
}

/* M terms of lanes l .. l+7 of a column, summed in registers left to right */
#define PG_LANES_SUM8(M, l)                                                                 \
    {                                                                                       \
        pg_f8 v_ = pg_f8_load(src[0] + (l));                                                \
        for (ptrdiff_t r_ = 1; r_ < (M); r_++) v_ = v_ + pg_f8_load(src[r_] + (l));         \
        pg_f8_store(dst + (l), kv * v_);                                                    \
    }
#define PG_LANES_MANY_COLUMN(M) PG_FOR8_OVERLAP(l, L, PG_LANES_SUM8(M, l))

/*
 * The W expansion with lanes (below), four or more taps a column (windows of 4 or more at
 * stride 1, of 7 or more at stride 2) and at least eight lanes: each block of eight lanes
 * summed in registers, the last eight again where L is not a multiple of eight (erow is
 * not grow), in place of a pass over the column for every term; 4 to 8 taps as
 * constants.  The same sums, left to right.
 */
PG_VEC_INLINE void pg_lanes_many_body_f32(const float *PG_RESTRICT grow,
                                          float *PG_RESTRICT erow, const int64_t *tap,
                                          ptrdiff_t m, ptrdiff_t W, ptrdiff_t L, float k,
                                          int isa)
{
    const pg_f8 kv = pg_f8_set1_isa(k, isa);
    const float *src[PG_MAX_TAPS];
    for (ptrdiff_t iw = 0; iw < W; iw++) {
        float *PG_RESTRICT dst = erow + iw * L;
        for (ptrdiff_t r = 0; r < m; r++) src[r] = grow + tap[iw * m + r] * L;
        PG_CASES_4_TO_8(m, PG_LANES_MANY_COLUMN)
    }
}

/* one copy of each body per instruction set */
#define PG_EXPAND_ISA(SFX, ATTR, ISA)                                                       \
ATTR static void pg_poly2_##SFX##_f32(const float *a, const float *b, int64_t ma, int64_t mb, \
                                      float *dst, ptrdiff_t nq, float k)                    \
{                                                                                           \
    pg_poly2_body_f32(a, b, ma, mb, dst, nq, k, ISA);                                       \
}                                                                                           \
ATTR static void pg_poly2s_##SFX##_f32(const float *a, const float *b, int64_t ma,          \
                                       int64_t mb, ptrdiff_t gap, float *dst, ptrdiff_t nq, \
                                       float k)                                             \
{                                                                                           \
    pg_poly2s_body_f32(a, b, ma, mb, gap, dst, nq, k, ISA);                                 \
}                                                                                           \
ATTR static void pg_poly1_##SFX##_f32(const float *a, int64_t m, ptrdiff_t gap, float *dst, \
                                      ptrdiff_t nq, float k)                                \
{                                                                                           \
    pg_poly1_body_f32(a, m, gap, dst, nq, k, ISA);                                          \
}                                                                                           \
ATTR static void pg_poly1_##SFX##_f64(const double *a, int64_t m, ptrdiff_t gap,            \
                                      double *dst, ptrdiff_t nq, double k)                  \
{                                                                                           \
    pg_poly1_body_f64(a, m, gap, dst, nq, k);                                               \
}                                                                                           \
ATTR static void pg_poly2_##SFX##_f64(const double *a, const double *b, int64_t ma,         \
                                      int64_t mb, double *dst, ptrdiff_t nq, double k)      \
{                                                                                           \
    pg_poly2_body_f64(a, b, ma, mb, dst, nq, k, ISA);                                       \
}                                                                                           \
ATTR static void pg_poly2s_##SFX##_f64(const double *a, const double *b, int64_t ma,        \
                                       int64_t mb, ptrdiff_t gap, double *dst,              \
                                       ptrdiff_t nq, double k)                              \
{                                                                                           \
    pg_poly2s_body_f64(a, b, ma, mb, gap, dst, nq, k);                                      \
}                                                                                           \
ATTR static void pg_lanes_many_##SFX##_f32(const float *grow, float *erow,                  \
                                           const int64_t *tap, ptrdiff_t m, ptrdiff_t W,    \
                                           ptrdiff_t L, float k)                            \
{                                                                                           \
    pg_lanes_many_body_f32(grow, erow, tap, m, W, L, k, ISA);                               \
}

PG_EXPAND_ISA(base, , PG_ISA_BASE)
#if PG_X86_DISPATCH
PG_EXPAND_ISA(avx2, PG_TARGET_AVX2, PG_ISA_AVX2)
#endif
#endif

static inline void pg_expand_poly_f32(const float *grow, float *e, ptrdiff_t P, ptrdiff_t q0,
                                      ptrdiff_t nq, const int64_t *c, const int64_t *m,
                                      ptrdiff_t gap, float *tmp, float k)
{
#if PG_VEC
    if (P == 1 && m[0] >= 1) {
        PG_PICK(pg_poly1, f32, grow + q0 + c[0], m[0], gap, e + q0, nq, k);
        return;
    }
    if (pg_poly2_avx2_ok(P, m) && gap >= 8) {
        PG_PICK(pg_poly2s, f32, grow + q0 + c[0], grow + q0 + c[1], m[0], m[1], gap,
                e + 2 * q0, nq, k);
        return;
    }
    if (pg_poly2_avx2_ok(P, m) && gap == 1) {
        PG_PICK(pg_poly2, f32, grow + q0 + c[0], grow + q0 + c[1], m[0], m[1], e + 2 * q0,
                nq, k);
        return;
    }
#endif
    pg_expand_poly_generic_f32(grow, e, P, q0, nq, c, m, gap, tmp, k);
}

static inline void pg_expand_poly_f64(const double *grow, double *e, ptrdiff_t P,
                                      ptrdiff_t q0, ptrdiff_t nq, const int64_t *c,
                                      const int64_t *m, ptrdiff_t gap, double *tmp, double k)
{
#if PG_VEC
    if (P == 1 && m[0] >= 1) {
        PG_PICK(pg_poly1, f64, grow + q0 + c[0], m[0], gap, e + q0, nq, k);
        return;
    }
    if (pg_poly2_ok(P, m) && gap == 1) {
        PG_PICK(pg_poly2, f64, grow + q0 + c[0], grow + q0 + c[1], m[0], m[1], e + 2 * q0,
                nq, k);
        return;
    }
    if (P == 2 && gap >= 4 && m[0] >= 1 && m[1] >= 1) {
        PG_PICK(pg_poly2s, f64, grow + q0 + c[0], grow + q0 + c[1], m[0], m[1], gap,
                e + 2 * q0, nq, k);
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

PG_DEFINE_EXPAND_LANES(float, pg_lanes_few_base_f32, )
PG_DEFINE_EXPAND_LANES(double, pg_lanes_base_f64, )
#if PG_X86_DISPATCH
PG_DEFINE_EXPAND_LANES(float, pg_lanes_few_avx2_f32, PG_TARGET_AVX2)
PG_DEFINE_EXPAND_LANES(double, pg_lanes_avx2_f64, PG_TARGET_AVX2)
#endif

/* float32: four or more taps and eight lanes through the vector loop (pg_lanes_many_*) */
#if PG_VEC
#define PG_LANES_F32(SFX)                                                                   \
static void pg_lanes_##SFX##_f32(const float *grow, float *erow, const int64_t *tap,        \
                                 ptrdiff_t m, ptrdiff_t W, ptrdiff_t L, float k)            \
{                                                                                           \
    if (m >= 4 && m <= PG_MAX_TAPS && L >= 8)                                               \
        pg_lanes_many_##SFX##_f32(grow, erow, tap, m, W, L, k);                             \
    else                                                                                    \
        pg_lanes_few_##SFX##_f32(grow, erow, tap, m, W, L, k);                              \
}
PG_LANES_F32(base)
#if PG_X86_DISPATCH
PG_LANES_F32(avx2)
#endif
#else
#define pg_lanes_base_f32 pg_lanes_few_base_f32
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

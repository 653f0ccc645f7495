/*
 * Row writers of the average-pool gradient.
 *
 * pg_combine_*: dst[j] = row[0][j] + row[1][j] + ... (added left to right), the one place
 * where a grad_input row is formed from the expanded grad_output rows that cover it (the
 * rows arrive already multiplied by their D and H weights, once per row, not once per
 * grad_input row that uses them).  With `stream`, whole cache lines of dst are written with
 * non-temporal stores: an ordinary store first reads the line it writes ("read for
 * ownership"), so for outputs far larger than the cache streaming cuts the write traffic by
 * up to half.  Lines only partly inside the row get ordinary stores, so no line ever mixes
 * the two kinds.  Values are bit-identical either way; only the cache policy differs.
 *
 * Everything here is written once against the vector layer (pg_vec.h; its pg_f8_stream /
 * pg_f4_stream / pg_h8_stream are the non-temporal stores) and built for AVX2 and for the
 * baseline (SSE2 or NEON): the combines, loads, fills, streaming copies, the channels-last
 * lanes rows, the 16-bit combines and the register-fed writer (pg_vs).  Without the layer
 * (MSVC) the element loops and ordinary stores run, and the plan forms no lanes rows.
 * pg_item.h's AVX2 intrinsics reach the 16-bit combines and pg_vs through AVX2 forms under
 * their former names (pg_combine8_avx2, pg_combine_bf16_inline, pg_combine_f16_inline,
 * pg_combine_h16_strided, pg_vs_push, pg_vs_end).
 */
#ifndef PG_STREAM_H
#define PG_STREAM_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "pg_cpu.h"
#include "pg_half.h"
#include "pg_vec.h"

/* streaming stores pay off (x86); pg_item.h and pg_scatter.h also use the SSE2 header */
#if defined(__SSE2__) || defined(_M_X64) || (defined(_M_IX86_FP) && _M_IX86_FP >= 2)
#include <emmintrin.h>
#define PG_HAVE_STREAM 1
#else
#define PG_HAVE_STREAM 0
#endif

/* first index at or after which dst is 64-byte aligned, and the end of the whole lines */
#define PG_LINES(T, dst, n, head, body_end)                                          \
    do {                                                                              \
        ptrdiff_t mis_ = (ptrdiff_t)(((uintptr_t)(dst)) & 63u);                       \
        head = mis_ ? (64 - mis_) / (ptrdiff_t)sizeof(T) : 0;                         \
        if ((((uintptr_t)(dst)) % sizeof(T)) != 0 || head > n) head = n;              \
        body_end = head + ((n - head) / (64 / (ptrdiff_t)sizeof(T))) * (64 / (ptrdiff_t)sizeof(T)); \
    } while (0)

#if PG_VEC
/* 16 bytes from src (any alignment) streamed to dst (16-byte aligned) */
PG_VEC_INLINE void pg_copy16_nt(void *dst, const void *src)
{
    pg_f4 v;
    memcpy(&v, src, 16);
    pg_f4_stream(dst, v);
}
#endif

static inline float pg_combine1_f32(const float *const *rows, ptrdiff_t nr, ptrdiff_t j)
{
    float s = rows[0][j];
    for (ptrdiff_t r = 1; r < nr; r++) s = s + rows[r][j];
    return s;
}

static inline double pg_combine1_f64(const double *const *rows, ptrdiff_t nr, ptrdiff_t j)
{
    double s = rows[0][j];
    for (ptrdiff_t r = 1; r < nr; r++) s = s + rows[r][j];
    return s;
}

/* the ordinary-store combine, with the common term counts as loops of their own (the
 * compiler vectorises each; one term is a copy); built for baseline and AVX2 (pg_cpu.h) */
#define PG_COMBINE_LOOPS(T, NAME, ATTR)                                                     \
ATTR static void NAME(T *PG_RESTRICT dst, const T *const *rows, ptrdiff_t nr, ptrdiff_t n)  \
{                                                                                           \
    ptrdiff_t j;                                                                            \
    const T *PG_RESTRICT a = rows[0];                                                       \
    if (nr == 1) {                                                                          \
        memcpy(dst, a, (size_t)n * sizeof(T));                                              \
    } else if (nr == 2) {                                                                   \
        const T *PG_RESTRICT b = rows[1];                                                   \
        for (j = 0; j < n; j++) dst[j] = a[j] + b[j];                                       \
    } else if (nr == 3) {                                                                   \
        const T *PG_RESTRICT b = rows[1], *PG_RESTRICT c = rows[2];                         \
        for (j = 0; j < n; j++) dst[j] = (a[j] + b[j]) + c[j];                              \
    } else {                                                                                \
        const T *PG_RESTRICT b = rows[1], *PG_RESTRICT c = rows[2];                         \
        for (j = 0; j < n; j++) dst[j] = (a[j] + b[j]) + c[j];                              \
        for (ptrdiff_t r = 3; r < nr; r++) {                                                \
            b = rows[r];                                                                    \
            for (j = 0; j < n; j++) dst[j] = dst[j] + b[j];                                 \
        }                                                                                   \
    }                                                                                       \
}

/* dst[j] = a[j] * b[j]: a grad_output row scaled by the W weights as it is loaded */
#define PG_MUL_LOOP(T, NAME, ATTR)                                                          \
ATTR static void NAME(T *PG_RESTRICT dst, const T *PG_RESTRICT a, const T *PG_RESTRICT b,   \
                      ptrdiff_t n)                                                          \
{                                                                                           \
    for (ptrdiff_t j = 0; j < n; j++) dst[j] = a[j] * b[j];                                 \
}

/* grad_output columns of L contiguous lanes (channels-last), `so` elements apart, loaded
 * into a dense row and multiplied by their W weight (w NULL: no weight) */
#define PG_LOAD_LANES_LOOP(T, NAME, ATTR)                                                   \
ATTR static void NAME(T *PG_RESTRICT dst, const T *PG_RESTRICT src, ptrdiff_t so,           \
                      const T *w, ptrdiff_t Wo, ptrdiff_t L)                                \
{                                                                                           \
    for (ptrdiff_t ow = 0; ow < Wo; ow++) {                                                 \
        const T *PG_RESTRICT s = src + ow * so;                                             \
        T *PG_RESTRICT d = dst + ow * L;                                                    \
        if (w) {                                                                            \
            const T c = w[ow];                                                              \
            for (ptrdiff_t l = 0; l < L; l++) d[l] = s[l] * c;                              \
        } else {                                                                            \
            memcpy(d, s, (size_t)L * sizeof(T));                                            \
        }                                                                                   \
    }                                                                                       \
}

/* x[j] = x[j] * b[j] in place (a row loaded with a conversion, then W-weighted) */
#define PG_MUL_INPLACE_LOOP(NAME, ATTR)                                                     \
ATTR static void NAME(float *PG_RESTRICT x, const float *PG_RESTRICT b, ptrdiff_t n)        \
{                                                                                           \
    for (ptrdiff_t j = 0; j < n; j++) x[j] = x[j] * b[j];                                   \
}

PG_MUL_LOOP(float, pg_mul_base_f32, )
PG_MUL_LOOP(double, pg_mul_base_f64, )
PG_MUL_INPLACE_LOOP(pg_mulin_base_f32, )
PG_LOAD_LANES_LOOP(float, pg_load_lanes_base_f32, )
PG_LOAD_LANES_LOOP(double, pg_load_lanes_base_f64, )
PG_COMBINE_LOOPS(float, pg_combine_few_base_f32, )
PG_COMBINE_LOOPS(double, pg_combine_few_base_f64, )
#if PG_X86_DISPATCH
PG_COMBINE_LOOPS(float, pg_combine_few_avx2_f32, PG_TARGET_AVX2)
PG_COMBINE_LOOPS(double, pg_combine_few_avx2_f64, PG_TARGET_AVX2)
PG_MUL_LOOP(float, pg_mul_avx2_f32, PG_TARGET_AVX2)
PG_MUL_LOOP(double, pg_mul_avx2_f64, PG_TARGET_AVX2)
PG_MUL_INPLACE_LOOP(pg_mulin_avx2_f32, PG_TARGET_AVX2)
PG_LOAD_LANES_LOOP(float, pg_load_lanes_avx2_f32, PG_TARGET_AVX2)
PG_LOAD_LANES_LOOP(double, pg_load_lanes_avx2_f64, PG_TARGET_AVX2)
#endif

#if PG_VEC
/*
 * The sum of nr >= 4 rows that follow each other rs floats apart (consecutive E rows: one
 * covering D window), eight values at a time, the last eight again where n is not a
 * multiple of eight (dst is none of the rows): the row pointers in no table, and 4 to 8
 * rows as constants (kernels of 4 to 8 at stride 1), so that a term costs one add with
 * its load.
 */
PG_VEC_INLINE pg_f8 pg_sum8_strided(const float *p, ptrdiff_t rs, ptrdiff_t nr)
{
    pg_f8 v = pg_f8_load(p) + pg_f8_load(p + rs);
    ptrdiff_t t = 2;
    for (p += 2 * rs; t + 4 <= nr; t += 4, p += 4 * rs) {   /* (nr > 8: four a time) */
        v = v + pg_f8_load(p);
        v = v + pg_f8_load(p + rs);
        v = v + pg_f8_load(p + 2 * rs);
        v = v + pg_f8_load(p + 3 * rs);
    }
    for (; t < nr; t++, p += rs) v = v + pg_f8_load(p);
    return v;
}
#define PG_SUM_STRIDED_LOOP(NR)                                                             \
    PG_FOR8_OVERLAP(j, n, { pg_f8_store(dst + j, pg_sum8_strided(r0 + j, rs, NR)); })

/* four or more terms (rows of at least eight values) summed in registers, eight values at
 * a time, in place of a pass over dst for every term past the third: channels-last rows
 * of windows of 5 or more at stride 1 (the same sums, left to right) */
PG_VEC_INLINE void pg_sum_rows_many_body(float *PG_RESTRICT dst, const float *const *rows,
                                         ptrdiff_t nr, ptrdiff_t n)
{
    const float *const r0 = rows[0], *const r1 = rows[1], *const r2 = rows[2];
    const ptrdiff_t rs = r1 - r0;
    ptrdiff_t t = 2;
    while (t < nr && rows[t] == r0 + t * rs) t++;
    if (t < nr) {   /* rows not rs apart: through the table */
        PG_FOR8_OVERLAP(j, n, {
            pg_f8 v = pg_f8_load(r0 + j) + pg_f8_load(r1 + j);
            v = v + pg_f8_load(r2 + j);
            for (ptrdiff_t r = 3; r < nr; r++) v = v + pg_f8_load(rows[r] + j);
            pg_f8_store(dst + j, v);
        })
        return;
    }
    PG_CASES_4_TO_8(nr, PG_SUM_STRIDED_LOOP)
}

/* float64, four rows or more: summed in one pass, four values at a time, each value's
 * terms added in a register in the order of the loops above (the same bits), where those
 * make a pass over dst per row past the third */
PG_VEC_INLINE void pg_sum_rows_many_f64_body(double *PG_RESTRICT dst,
                                             const double *const *rows, ptrdiff_t nr,
                                             ptrdiff_t n)
{
    const double *PG_RESTRICT a = rows[0], *PG_RESTRICT b = rows[1];
    ptrdiff_t j = 0;
    for (; j + 4 <= n; j += 4) {
        pg_d4 v = pg_d4_load(a + j) + pg_d4_load(b + j);
        for (ptrdiff_t r = 2; r < nr; r++) v = v + pg_d4_load(rows[r] + j);
        pg_d4_store(dst + j, v);
    }
    for (; j < n; j++) {
        double v = a[j] + b[j];
        for (ptrdiff_t r = 2; r < nr; r++) v = v + rows[r][j];
        dst[j] = v;
    }
}

/* the ordinary-store combine, one copy per instruction set: up to three terms through the
 * loops above; more in registers (pg_sum_rows_many_f32_* out of line, so that the
 * item's row loop, pg_item.h, keeps its registers for two and three rows) */
#define PG_COMBINE_ISA(SFX, ATTR)                                                           \
ATTR __attribute__((noinline))                                                              \
static void pg_sum_rows_many_f32_##SFX(float *PG_RESTRICT dst, const float *const *rows,    \
                                       ptrdiff_t nr, ptrdiff_t n)                           \
{                                                                                           \
    pg_sum_rows_many_body(dst, rows, nr, n);                                                \
}                                                                                           \
ATTR static void pg_combine_##SFX##_f32(float *PG_RESTRICT dst, const float *const *rows,   \
                                        ptrdiff_t nr, ptrdiff_t n)                          \
{                                                                                           \
    if (nr >= 4 && n >= 8)                                                                  \
        pg_sum_rows_many_f32_##SFX(dst, rows, nr, n);                                       \
    else                                                                                    \
        pg_combine_few_##SFX##_f32(dst, rows, nr, n);                                       \
}                                                                                           \
ATTR static void pg_combine_##SFX##_f64(double *PG_RESTRICT dst, const double *const *rows, \
                                        ptrdiff_t nr, ptrdiff_t n)                          \
{                                                                                           \
    if (nr < 4)                                                                             \
        pg_combine_few_##SFX##_f64(dst, rows, nr, n);                                       \
    else                                                                                    \
        pg_sum_rows_many_f64_body(dst, rows, nr, n);                                        \
}
PG_COMBINE_ISA(base, )
#if PG_X86_DISPATCH
PG_COMBINE_ISA(avx2, PG_TARGET_AVX2)
#endif
#else
#define pg_combine_base_f32 pg_combine_few_base_f32
#define pg_combine_base_f64 pg_combine_few_base_f64
#endif

static inline void pg_mul_f32(float *dst, const float *a, const float *b, ptrdiff_t n)
{
    PG_PICK(pg_mul, f32, dst, a, b, n);
}

static inline void pg_mul_f64(double *dst, const double *a, const double *b, ptrdiff_t n)
{
    PG_PICK(pg_mul, f64, dst, a, b, n);
}

static inline void pg_mulin_f32(float *x, const float *b, ptrdiff_t n)
{
    PG_PICK(pg_mulin, f32, x, b, n);
}

static inline void pg_load_lanes_f32(float *dst, const float *src, ptrdiff_t so, const float *w,
                                     ptrdiff_t Wo, ptrdiff_t L)
{
    PG_PICK(pg_load_lanes, f32, dst, src, so, w, Wo, L);
}

static inline void pg_load_lanes_f64(double *dst, const double *src, ptrdiff_t so,
                                     const double *w, ptrdiff_t Wo, ptrdiff_t L)
{
    PG_PICK(pg_load_lanes, f64, dst, src, so, w, Wo, L);
}

#if PG_VEC
/* the streaming combine's whole lines [head, body_end) with non-temporal stores, one and
 * two terms without the loop over rows (the same sums, left to right); the rest of the
 * row with ordinary stores.  AVX2: 32-byte loads and stores; SSE2 and NEON: two halves */
PG_VEC_INLINE void pg_combine_stream_f32_body(float *dst, const float *const *rows,
                                              ptrdiff_t nr, ptrdiff_t n, ptrdiff_t head,
                                              ptrdiff_t body_end, int isa)
{
    ptrdiff_t j;
    const float *a = rows[0];
    for (j = 0; j < head; j++) dst[j] = pg_combine1_f32(rows, nr, j);
    if (nr == 1) {
        for (; j < body_end; j += 8) pg_f8_stream(dst + j, pg_f8_load(a + j), isa);
    } else if (nr == 2) {
        const float *b = rows[1];
        for (; j < body_end; j += 8)
            pg_f8_stream(dst + j, pg_f8_load(a + j) + pg_f8_load(b + j), isa);
    } else {
        for (; j < body_end; j += 8) {
            pg_f8 s = pg_f8_load(a + j) + pg_f8_load(rows[1] + j);
            for (ptrdiff_t r = 2; r < nr; r++) s = s + pg_f8_load(rows[r] + j);
            pg_f8_stream(dst + j, s, isa);
        }
    }
    for (; j < n; j++) dst[j] = pg_combine1_f32(rows, nr, j);
}

/* the same for float64, four values a vector; the row pointers of one and two terms held
 * in locals, not taken from the table at every store */
PG_VEC_INLINE void pg_combine_stream_f64_body(double *dst, const double *const *rows,
                                              ptrdiff_t nr, ptrdiff_t n, ptrdiff_t head,
                                              ptrdiff_t body_end, int isa)
{
    ptrdiff_t j;
    const double *a = rows[0];
    for (j = 0; j < head; j++) dst[j] = pg_combine1_f64(rows, nr, j);
    if (nr == 1) {
        for (; j < body_end; j += 4) pg_f8_stream(dst + j, (pg_f8)pg_d4_load(a + j), isa);
    } else if (nr == 2) {
        const double *b = rows[1];
        for (; j < body_end; j += 4)
            pg_f8_stream(dst + j, (pg_f8)(pg_d4_load(a + j) + pg_d4_load(b + j)), isa);
    } else {
        for (; j < body_end; j += 4) {
            pg_d4 s = pg_d4_load(a + j) + pg_d4_load(rows[1] + j);
            for (ptrdiff_t r = 2; r < nr; r++) s = s + pg_d4_load(rows[r] + j);
            pg_f8_stream(dst + j, (pg_f8)s, isa);
        }
    }
    for (; j < n; j++) dst[j] = pg_combine1_f64(rows, nr, j);
}

#define PG_COMBINE_STREAM_ISA(SFX, ATTR, ISA)                                               \
ATTR static void pg_combine_stream_##SFX##_f32(float *dst, const float *const *rows,        \
                                               ptrdiff_t nr, ptrdiff_t n, ptrdiff_t head,   \
                                               ptrdiff_t body_end)                          \
{                                                                                           \
    pg_combine_stream_f32_body(dst, rows, nr, n, head, body_end, ISA);                      \
}                                                                                           \
ATTR static void pg_combine_stream_##SFX##_f64(double *dst, const double *const *rows,      \
                                               ptrdiff_t nr, ptrdiff_t n, ptrdiff_t head,   \
                                               ptrdiff_t body_end)                          \
{                                                                                           \
    pg_combine_stream_f64_body(dst, rows, nr, n, head, body_end, ISA);                      \
}
PG_COMBINE_STREAM_ISA(base, , PG_ISA_BASE)
#if PG_X86_DISPATCH
PG_COMBINE_STREAM_ISA(avx2, PG_TARGET_AVX2, PG_ISA_AVX2)
#endif
#endif

/* Channels-last rows formed straight from the grad_output rows (pg_lanes_row, and
 * pg_lanes_row_f64 for float64): their bodies are pyx/pg_lanes.c's, a translation unit of
 * their own (PG_LANES_BODIES), so that the build compiles them beside the rest. */
PG_UNIT void pg_lanes_row(void *dst, ptrdiff_t ds, ptrdiff_t nd, ptrdiff_t rs,
                          const void *const *g, ptrdiff_t gs, const float *k, const float *ww,
                          ptrdiff_t nr, const int64_t *tap, ptrdiff_t m, ptrdiff_t W,
                          ptrdiff_t L, ptrdiff_t Wo, int kind, int stream,
                          const int64_t *crun);
PG_UNIT void pg_lanes_row_f64(void *dst, ptrdiff_t ds, ptrdiff_t nd, ptrdiff_t rs,
                              const void *const *g, ptrdiff_t gs, const double *k,
                              const double *ww, ptrdiff_t nr, const int64_t *tap,
                              ptrdiff_t m, ptrdiff_t W, ptrdiff_t L, ptrdiff_t Wo, int stream);

#ifdef PG_LANES_BODIES
#if PG_VEC
/* 16 lanes of a column (at p) as float32, in two vectors: bfloat16's in the layer's pair
 * order (pg_f8x2_load_bf16_pair), which pg_lanes_pack16 undoes, as every operation on them
 * is lane by lane */
PG_VEC_INLINE void pg_lanes_get16(const char *p, int kind, pg_f8 *a, pg_f8 *b, int isa)
{
    if (kind == 0) {
        *a = pg_f8_load(p);
        *b = pg_f8_load(p + 32);
    } else if (kind == 1) {
        *a = pg_f8_from_f16(pg_h8_load(p), isa);
        *b = pg_f8_from_f16(pg_h8_load(p + 16), isa);
    } else {
        pg_f8x2_load_bf16_pair(p, a, b, isa);
    }
}

PG_VEC_INLINE pg_f8 pg_lanes_get8(const char *p, int kind, int isa)
{
    if (kind == 2) return pg_f8_load_bf16(p, isa);
    return pg_f8_get(p, kind, isa);
}

/* STMT at p = p0 + c * cs + j * rs for the nc columns and nd rows: up to two of each (k2 s2
 * pairs of columns and of rows) written out, as the loops cost more than their stores */
#define PG_STORE_GRID(p0, nd, rs, nc, cs, STMT)                                             \
    if ((nd) <= 2 && (nc) <= 2) {                                                           \
        { char *p = (p0); STMT }                                                            \
        if ((nd) == 2) { char *p = (p0) + (rs); STMT }                                      \
        if ((nc) == 2) {                                                                    \
            { char *p = (p0) + (cs); STMT }                                                 \
            if ((nd) == 2) { char *p = (p0) + (cs) + (rs); STMT }                           \
        }                                                                                   \
    } else {                                                                                \
        for (ptrdiff_t c_ = 0; c_ < (nc); c_++)                                             \
            for (ptrdiff_t j_ = 0; j_ < (nd); j_++) {                                       \
                char *p = (p0) + c_ * (cs) + j_ * (rs);                                     \
                STMT                                                                        \
            }                                                                               \
    }

/* 16 values (pg_lanes_get16's a and b) rounded to float16 (kind 1) or bfloat16 (2), in
 * lane order in q[0], q[1] */
PG_VEC_INLINE void pg_lanes_pack16(pg_f8 a, pg_f8 b, int kind, pg_h8 *q, int isa)
{
    if (kind == 1) {
        q[0] = pg_f8_to_f16(a, isa);
        q[1] = pg_f8_to_f16(b, isa);
    } else {
        pg_f8x2_to_bf16_pair(a, b, q, q + 1, isa);
    }
}

/* 16 results stored at p and at the nd - 1 places rs bytes apart after it, and the same
 * again at each of the nc - 1 places cs bytes apart after those (streamed: 16-byte stores,
 * as numpy's large arrays are 16-byte aligned), rounded once to 16 bits where the dtype
 * is */
PG_VEC_INLINE void pg_lanes_put16(char *p0, ptrdiff_t nd, ptrdiff_t rs, ptrdiff_t nc,
                                  ptrdiff_t cs, pg_f8 a, pg_f8 b, int kind, int stream,
                                  int isa)
{
    if (kind == 0) {
        if (!stream) {
            PG_STORE_GRID(p0, nd, rs, nc, cs, {
                pg_f8_store(p, a);
                pg_f8_store(p + 32, b);
            })
            return;
        }
        pg_f4 q[4];
        memcpy(q, &a, 32);
        memcpy(q + 2, &b, 32);
        PG_STORE_GRID(p0, nd, rs, nc, cs, {
            for (int i = 0; i < 4; i++) pg_f4_stream(p + 16 * i, q[i]);
        })
        return;
    }
    pg_h8 q[2];
    pg_lanes_pack16(a, b, kind, q, isa);
    if (stream) {
        PG_STORE_GRID(p0, nd, rs, nc, cs, {
            pg_h8_stream(p, q[0]);
            pg_h8_stream(p + 16, q[1]);
        })
    } else {
        PG_STORE_GRID(p0, nd, rs, nc, cs, { pg_h8x2_store(p, q[0], q[1]); })
    }
}

/* 32 lanes of 16 bits (a, b, c, d: 8 each) to each of the nd x nc targets, a whole 64-byte
 * line there (p0, cs and rs line-aligned), in two streaming stores of 32 bytes (AVX2; four
 * of 16 bytes elsewhere) */
PG_VEC_INLINE void pg_lanes_put32_line(char *p0, ptrdiff_t nd, ptrdiff_t rs, ptrdiff_t nc,
                                       ptrdiff_t cs, pg_f8 a, pg_f8 b, pg_f8 c, pg_f8 d,
                                       int kind, int isa)
{
    pg_h8 q[4];
    pg_i8 lo, hi;
    pg_lanes_pack16(a, b, kind, q, isa);
    pg_lanes_pack16(c, d, kind, q + 2, isa);
    memcpy(&lo, q, 32);
    memcpy(&hi, q + 2, 32);
    PG_STORE_GRID(p0, nd, rs, nc, cs, {
        pg_i8_stream(p, lo, isa);
        pg_i8_stream(p + 32, hi, isa);
    })
}

PG_VEC_INLINE void pg_lanes_put8(char *p0, ptrdiff_t nd, ptrdiff_t rs, ptrdiff_t nc,
                                 ptrdiff_t cs, pg_f8 s, int kind, int stream, int isa)
{
    if (kind == 0) {
        if (!stream) {
            PG_STORE_GRID(p0, nd, rs, nc, cs, { pg_f8_store(p, s); })
            return;
        }
        pg_f4 q[2];
        memcpy(q, &s, 32);
        PG_STORE_GRID(p0, nd, rs, nc, cs, {
            pg_f4_stream(p, q[0]);
            pg_f4_stream(p + 16, q[1]);
        })
        return;
    }
    const pg_h8 q = kind == 1 ? pg_f8_to_f16(s, isa) : pg_f8_to_bf16_isa(s, isa);
    if (stream) PG_STORE_GRID(p0, nd, rs, nc, cs, { pg_h8_stream(p, q); })
    else PG_STORE_GRID(p0, nd, rs, nc, cs, { pg_h8_store(p, q); })
}

/* lanes l .. l+15 of a column: sum over r of k[r] * (its taps' values, W-weighted), left to
 * right (the E rows' values and the combine's sums) */
PG_VEC_INLINE void pg_lanes_sum16(const void *const *g, ptrdiff_t l, const pg_f8 *kv,
                                  ptrdiff_t nr, const ptrdiff_t *off, const pg_f8 *wv,
                                  ptrdiff_t n, int scale, int kind, pg_f8 *s0, pg_f8 *s1,
                                  int isa)
{
    const ptrdiff_t size = kind ? 2 : 4;
    const pg_f8 zero = pg_f8_set1(0.0f);
    *s0 = *s1 = zero;   /* nr >= 1: never used */
    for (ptrdiff_t r = 0; r < nr; r++) {
        const char *gr = (const char *)g[r] + l * size;
        pg_f8 v0, v1, u0 = zero, u1 = zero;
        for (ptrdiff_t i = 0; i < n; i++) {
            pg_lanes_get16(gr + off[i], kind, &v0, &v1, isa);
            if (scale) {
                v0 = v0 * wv[i];
                v1 = v1 * wv[i];
            }
            u0 = i ? u0 + v0 : v0;
            u1 = i ? u1 + v1 : v1;
        }
        u0 = kv[r] * u0;
        u1 = kv[r] * u1;
        *s0 = r ? *s0 + u0 : u0;
        *s1 = r ? *s1 + u1 : u1;
    }
}

/* lanes l .. l+7 of a column, as pg_lanes_sum16 */
PG_VEC_INLINE pg_f8 pg_lanes_sum8(const void *const *g, ptrdiff_t l, const pg_f8 *kv,
                                  ptrdiff_t nr, const ptrdiff_t *off, const pg_f8 *wv,
                                  ptrdiff_t n, int scale, int kind, int isa)
{
    const ptrdiff_t size = kind ? 2 : 4;
    const pg_f8 zero = pg_f8_set1(0.0f);
    pg_f8 s = zero;
    for (ptrdiff_t r = 0; r < nr; r++) {
        const char *gr = (const char *)g[r] + l * size;
        pg_f8 v, u = zero;
        for (ptrdiff_t i = 0; i < n; i++) {
            v = pg_lanes_get8(gr + off[i], kind, isa);
            if (scale) v = v * wv[i];
            u = i ? u + v : v;
        }
        u = kv[r] * u;
        s = r ? s + u : u;
    }
    return s;
}

/*
 * A channels-last grad_input row (W columns of L >= 8 lanes, 16 at a time, then 8, the last
 * 8 overlapping the ones before where L is not a multiple of 8; column w at
 * dst + w*ds) formed straight from the grad_output rows of its nr covering windows, without
 * E rows and without a copy of those rows.  Column ow of row r is the L contiguous lanes at
 * g[r] + ow*gs (float32, or float16 / bfloat16 bits: kind 0, 1, 2), widened and multiplied
 * by its W weight ww[ow] as it is loaded (ww NULL: no W weight):
 *   dst[w*ds + l] = sum over r, left to right, of k[r] * (v_r(tap[w*m]) + ... )
 * over the taps of column w that are grad_output columns (< Wo; the padding taps after
 * them, -0.0 in the E rows, change no value, and a column no window covers sums to +0.0).
 * These are the values of the E rows (pg_expand.h's lanes loop: k times the taps summed
 * left to right) and the sums the combine forms of them (left to right, rounded once to
 * 16 bits), so the same bits, in registers.  Each column is stored to the nd rows rs
 * elements apart from dst on (equal rows), and a run of columns with the same taps is
 * formed once and stored to each of them.  With `stream`, non-temporal stores of 16
 * bytes (pg_lanes_row checks that dst, ds and rs allow them).  With `line` too (16-bit
 * lanes, every column's stores the same distance from a 64-byte line) and more than one
 * store target (equal rows or columns), each column's lanes up to the first line boundary
 * go first, then 32 at a time, so that each target receives whole lines in two 32-byte
 * stores, where 32 bytes to each target in turn cost much more (docs/performance.md).  One
 * target is written in address order.  The lanes are independent, so how they are grouped
 * changes no bits.  Written against the vector layer: AVX2 and baseline copies.
 */
PG_VEC_INLINE void pg_lanes_col(char *d, ptrdiff_t nd, ptrdiff_t rsb, ptrdiff_t nc,
                                ptrdiff_t dsb, const void *const *g, const pg_f8 *kv,
                                ptrdiff_t nr, const ptrdiff_t *off, const pg_f8 *wv,
                                ptrdiff_t n, int scale, ptrdiff_t L, int kind, int stream,
                                int line, int isa)
{
    const ptrdiff_t size = kind ? 2 : 4;
    ptrdiff_t l = 0;
    if (line && nd * nc > 1) {
        /* lanes to the line boundary (0, 8, 16 or 24), then whole lines */
        const ptrdiff_t head = (ptrdiff_t)((64u - ((uintptr_t)d & 63u)) & 63u) / size;
        if (head <= L - 32) {
            for (; l + 16 <= head; l += 16) {
                pg_f8 s0, s1;
                pg_lanes_sum16(g, l, kv, nr, off, wv, n, scale, kind, &s0, &s1, isa);
                pg_lanes_put16(d + l * size, nd, rsb, nc, dsb, s0, s1, kind, 1, isa);
            }
            if (l < head) {
                const pg_f8 s = pg_lanes_sum8(g, l, kv, nr, off, wv, n, scale, kind, isa);
                pg_lanes_put8(d + l * size, nd, rsb, nc, dsb, s, kind, 1, isa);
                l += 8;
            }
            for (; l + 32 <= L; l += 32) {
                pg_f8 s0, s1, s2, s3;
                pg_lanes_sum16(g, l, kv, nr, off, wv, n, scale, kind, &s0, &s1, isa);
                pg_lanes_sum16(g, l + 16, kv, nr, off, wv, n, scale, kind, &s2, &s3, isa);
                pg_lanes_put32_line(d + l * size, nd, rsb, nc, dsb, s0, s1, s2, s3, kind,
                                    isa);
            }
        }
    }
    for (; l + 16 <= L; l += 16) {
        pg_f8 s0, s1;
        pg_lanes_sum16(g, l, kv, nr, off, wv, n, scale, kind, &s0, &s1, isa);
        pg_lanes_put16(d + l * size, nd, rsb, nc, dsb, s0, s1, kind, stream, isa);
    }
    for (; l < L; l += 8) {   /* 8 lanes, then the last 8 (overlapping: equal values) */
        if (l + 8 > L) l = L - 8;
        const pg_f8 s = pg_lanes_sum8(g, l, kv, nr, off, wv, n, scale, kind, isa);
        pg_lanes_put8(d + l * size, nd, rsb, nc, dsb, s, kind, stream, isa);
    }
}

/* fixed: m is a constant of the caller, so that the columns with all m taps inside the
 * grad_output row (all but a few) take a copy of the column loop with n = m, whose vectors
 * no test of n separates (a 128-bit build keeps 32-byte vectors across such tests in
 * memory) */
PG_VEC_INLINE void pg_lanes_row_body(void *dst, ptrdiff_t ds, ptrdiff_t nd, ptrdiff_t rs,
                                     const void *const *g, ptrdiff_t gs, const float *k,
                                     const float *ww, ptrdiff_t nr, const int64_t *tap,
                                     ptrdiff_t m, ptrdiff_t W, ptrdiff_t L, ptrdiff_t Wo,
                                     const int64_t *crun, int kind, int stream, int CR,
                                     int line, int fixed, int isa)
{
    const ptrdiff_t size = kind ? 2 : 4;
    const int scale = ww != NULL;
    pg_f8 kv[8], wv[PG_MAX_TAPS];
    ptrdiff_t off[PG_MAX_TAPS] = {0};
    for (ptrdiff_t r = 0; r < nr; r++) kv[r] = pg_f8_set1_isa(k[r], isa);
    for (ptrdiff_t i = 0; i < m; i++) wv[i] = kv[0];   /* set (gcc's maybe-uninitialized) */
    for (ptrdiff_t w = 0, nc = 1; w < W; w += nc, tap += nc * m) {
        char *d = (char *)dst + w * ds * size;
        ptrdiff_t n = 0;
        /* CR: the columns from w on with the same taps (crun[w] of them: kernel = stride 2
         * gives pairs), formed once; without it, one column at a time */
        if (CR) nc = crun[w];
        while (n < m && tap[n] < Wo) {
            off[n] = tap[n] * gs * size;
            if (scale) wv[n] = pg_f8_set1_isa(ww[tap[n]], isa);
            n++;
        }
        if (fixed && n == m)
            pg_lanes_col(d, nd, rs * size, nc, ds * size, g, kv, nr, off, wv, m, scale, L,
                         kind, stream, line, isa);
        else
            pg_lanes_col(d, nd, rs * size, nc, ds * size, g, kv, nr, off, wv, n, scale, L,
                         kind, stream, line, isa);
    }
}

/* nr <= 8, m <= PG_MAX_TAPS; the common counts (1, 2 rows; 1, 2 taps) as constants */
PG_VEC_INLINE void pg_lanes_row_cases(void *dst, ptrdiff_t ds, ptrdiff_t nd, ptrdiff_t rs,
                                      const void *const *g, ptrdiff_t gs, const float *k,
                                      const float *ww, ptrdiff_t nr, const int64_t *tap,
                                      ptrdiff_t m, ptrdiff_t W, ptrdiff_t L, ptrdiff_t Wo,
                                      const int64_t *crun, int kind, int stream, int CR,
                                      int line, int isa)
{
    if (nr == 1 && m == 1)
        pg_lanes_row_body(dst, ds, nd, rs, g, gs, k, ww, 1, tap, 1, W, L, Wo, crun, kind,
                          stream, CR, line, 1, isa);
    else if (nr == 1 && m == 2)
        pg_lanes_row_body(dst, ds, nd, rs, g, gs, k, ww, 1, tap, 2, W, L, Wo, crun, kind,
                          stream, CR, line, 1, isa);
    else if (nr == 2 && m == 1)
        pg_lanes_row_body(dst, ds, nd, rs, g, gs, k, ww, 2, tap, 1, W, L, Wo, crun, kind,
                          stream, CR, line, 1, isa);
    else if (nr == 2 && m == 2)
        pg_lanes_row_body(dst, ds, nd, rs, g, gs, k, ww, 2, tap, 2, W, L, Wo, crun, kind,
                          stream, CR, line, 1, isa);
    else
        pg_lanes_row_body(dst, ds, nd, rs, g, gs, k, ww, nr, tap, m, W, L, Wo, crun, kind,
                          stream, CR, line, 0, isa);
}

/* one row (nd 1, the common case, as a constant) or equal rows.  CR: runs of columns with
 * the same taps, crun[w] of them from column w (the plan's table; NULL where all runs are
 * single columns), a table rather than a search at every column */
#define PG_LANES_ROW_ST(NAME, ATTR, ISA, KIND, ST, CR, LN)                                  \
ATTR static void NAME(void *dst, ptrdiff_t ds, ptrdiff_t nd, ptrdiff_t rs,                  \
                      const void *const *g, ptrdiff_t gs, const float *k, const float *ww,  \
                      ptrdiff_t nr, const int64_t *tap, ptrdiff_t m, ptrdiff_t W,           \
                      ptrdiff_t L, ptrdiff_t Wo, const int64_t *crun)                       \
{                                                                                           \
    if (nd == 1)                                                                            \
        pg_lanes_row_cases(dst, ds, 1, 0, g, gs, k, ww, nr, tap, m, W, L, Wo, crun, KIND,   \
                           ST, CR, LN, ISA);                                                \
    else                                                                                    \
        pg_lanes_row_cases(dst, ds, nd, rs, g, gs, k, ww, nr, tap, m, W, L, Wo, crun, KIND, \
                           ST, CR, LN, ISA);                                                \
}
/* line: 16-bit rows streamed whole lines at a time (pg_lanes_row_body), where every column's
 * stores lie the same distance from a line (column and row strides multiples of 64 bytes) */
#define PG_LANES_ROW(NAME, ATTR, ISA, KIND)                                                 \
PG_LANES_ROW_ST(NAME##_o, ATTR, ISA, KIND, 0, 0, 0)                                         \
PG_LANES_ROW_ST(NAME##_s, ATTR, ISA, KIND, 1, 0, 0)                                         \
PG_LANES_ROW_ST(NAME##_oc, ATTR, ISA, KIND, 0, 1, 0)                                        \
PG_LANES_ROW_ST(NAME##_sc, ATTR, ISA, KIND, 1, 1, 0)                                        \
PG_LANES_ROW_ST(NAME##_sl, ATTR, ISA, KIND, 1, 0, (KIND) != 0)                              \
PG_LANES_ROW_ST(NAME##_scl, ATTR, ISA, KIND, 1, 1, (KIND) != 0)                             \
static void NAME(void *dst, ptrdiff_t ds, ptrdiff_t nd, ptrdiff_t rs, const void *const *g, \
                 ptrdiff_t gs, const float *k, const float *ww, ptrdiff_t nr,               \
                 const int64_t *tap, ptrdiff_t m, ptrdiff_t W, ptrdiff_t L, ptrdiff_t Wo,   \
                 int stream, const int64_t *crun)                                           \
{                                                                                           \
    const int line = (KIND) != 0 && stream && L >= 32 && (ds * 2) % 64 == 0                \
                     && (nd == 1 || (rs * 2) % 64 == 0);                                    \
    if (crun) {                                                                             \
        if (line) NAME##_scl(dst, ds, nd, rs, g, gs, k, ww, nr, tap, m, W, L, Wo, crun);    \
        else if (stream) NAME##_sc(dst, ds, nd, rs, g, gs, k, ww, nr, tap, m, W, L, Wo, crun);\
        else NAME##_oc(dst, ds, nd, rs, g, gs, k, ww, nr, tap, m, W, L, Wo, crun);          \
    } else {                                                                                \
        if (line) NAME##_sl(dst, ds, nd, rs, g, gs, k, ww, nr, tap, m, W, L, Wo, NULL);     \
        else if (stream) NAME##_s(dst, ds, nd, rs, g, gs, k, ww, nr, tap, m, W, L, Wo, NULL);\
        else NAME##_o(dst, ds, nd, rs, g, gs, k, ww, nr, tap, m, W, L, Wo, NULL);           \
    }                                                                                       \
}
PG_LANES_ROW(pg_lanes_row_base_f32, , PG_ISA_BASE, 0)
PG_LANES_ROW(pg_lanes_row_base_f16, , PG_ISA_BASE, 1)
PG_LANES_ROW(pg_lanes_row_base_bf16, , PG_ISA_BASE, 2)
#if PG_X86_DISPATCH
PG_LANES_ROW(pg_lanes_row_avx2_f32, PG_TARGET_AVX2_F16C, PG_ISA_AVX2, 0)
PG_LANES_ROW(pg_lanes_row_avx2_f16, PG_TARGET_AVX2_F16C, PG_ISA_AVX2, 1)
PG_LANES_ROW(pg_lanes_row_avx2_bf16, PG_TARGET_AVX2_F16C, PG_ISA_AVX2, 2)
#endif

/*
 * Float64 lanes (L >= 4): pg_lanes_row_body's sums in double, the values of the float64
 * E rows (pg_expand_lanes_f64: k times the taps, each grad_output value times its W weight
 * as pg_load_lanes_f64 loads it, summed left to right) and of their combine
 * (pg_combine_f64: left to right), so the same bits.  Eight lanes at a time, then four, the
 * last four overlapping the ones before where L is not a multiple of four; each column
 * stored to the nd equal rows rs elements apart, streamed 16 bytes at a time where
 * `stream`.  AVX2 and baseline copies, as the rows above.
 */
PG_VEC_INLINE void pg_lanes_sum8_f64(const void *const *g, ptrdiff_t l, const pg_d4 *kv,
                                     ptrdiff_t nr, const ptrdiff_t *off, const pg_d4 *wv,
                                     ptrdiff_t n, int scale, int two, pg_d4 *s0, pg_d4 *s1)
{
    const pg_d4 zero = {0.0, 0.0, 0.0, 0.0};
    *s0 = *s1 = zero;   /* nr >= 1: never used */
    for (ptrdiff_t r = 0; r < nr; r++) {
        const char *gr = (const char *)g[r] + l * 8;
        pg_d4 u0 = zero, u1 = zero;
        for (ptrdiff_t i = 0; i < n; i++) {
            pg_d4 v0 = pg_d4_load(gr + off[i]), v1 = v0;
            if (two) v1 = pg_d4_load(gr + off[i] + 32);
            if (scale) {
                v0 = v0 * wv[i];
                if (two) v1 = v1 * wv[i];
            }
            u0 = i ? u0 + v0 : v0;
            if (two) u1 = i ? u1 + v1 : v1;
        }
        u0 = kv[r] * u0;
        *s0 = r ? *s0 + u0 : u0;
        if (two) {
            u1 = kv[r] * u1;
            *s1 = r ? *s1 + u1 : u1;
        }
    }
}

/* four values to each of the nd rows: 32-byte stores, or two 16-byte streaming ones */
PG_VEC_INLINE void pg_lanes_put4_f64(char *p, ptrdiff_t nd, ptrdiff_t rsb, pg_d4 s,
                                     int stream, int isa)
{
    for (ptrdiff_t t = 0; t < nd; t++, p += rsb) {
        if (stream) {
            pg_d4_stream16x2(p, s, isa);
            continue;
        }
        pg_d4_store(p, s);
    }
}

/* one column's lanes, eight at a time, then four */
PG_VEC_INLINE void pg_lanes_col_f64(char *d, ptrdiff_t nd, ptrdiff_t rsb,
                                    const void *const *g, const pg_d4 *kv, ptrdiff_t nr,
                                    const ptrdiff_t *off, const pg_d4 *wv, ptrdiff_t n,
                                    int scale, ptrdiff_t L, int stream, int isa)
{
    pg_d4 s0, s1;
    ptrdiff_t l = 0;
    for (; l + 8 <= L; l += 8) {
        pg_lanes_sum8_f64(g, l, kv, nr, off, wv, n, scale, 1, &s0, &s1);
        pg_lanes_put4_f64(d + l * 8, nd, rsb, s0, stream, isa);
        pg_lanes_put4_f64(d + l * 8 + 32, nd, rsb, s1, stream, isa);
    }
    for (; l < L; l += 4) {
        if (l + 4 > L) l = L - 4;
        pg_lanes_sum8_f64(g, l, kv, nr, off, wv, n, scale, 0, &s0, &s1);
        pg_lanes_put4_f64(d + l * 8, nd, rsb, s0, stream, isa);
    }
}

/* fixed: m a constant of the caller (the columns with all m taps take a copy with n = m,
 * as pg_lanes_row_body) */
PG_VEC_INLINE void pg_lanes_row_f64_body(void *dst, ptrdiff_t ds, ptrdiff_t nd, ptrdiff_t rs,
                                         const void *const *g, ptrdiff_t gs, const double *k,
                                         const double *ww, ptrdiff_t nr, const int64_t *tap,
                                         ptrdiff_t m, ptrdiff_t W, ptrdiff_t L, ptrdiff_t Wo,
                                         int stream, int fixed, int isa)
{
    const int scale = ww != NULL;
    pg_d4 kv[8], wv[PG_MAX_TAPS];
    ptrdiff_t off[PG_MAX_TAPS] = {0};
    for (ptrdiff_t r = 0; r < nr; r++) kv[r] = pg_d4_splat(k[r], isa);
    for (ptrdiff_t i = 0; i < m; i++) wv[i] = kv[0];   /* set (gcc's maybe-uninitialized) */
    for (ptrdiff_t w = 0; w < W; w++, tap += m) {
        char *d = (char *)dst + w * ds * 8;
        ptrdiff_t n = 0;
        while (n < m && tap[n] < Wo) {
            off[n] = tap[n] * gs * 8;
            if (scale) wv[n] = pg_d4_splat(ww[tap[n]], isa);
            n++;
        }
        if (fixed && n == m)
            pg_lanes_col_f64(d, nd, rs * 8, g, kv, nr, off, wv, m, scale, L, stream, isa);
        else
            pg_lanes_col_f64(d, nd, rs * 8, g, kv, nr, off, wv, n, scale, L, stream, isa);
    }
}

/* the common counts (1, 2 rows; 1, 2 taps) as constants, and one row or equal rows, as
 * pg_lanes_row_cases and PG_LANES_ROW_ST */
PG_VEC_INLINE void pg_lanes_row_f64_cases(void *dst, ptrdiff_t ds, ptrdiff_t nd,
                                          ptrdiff_t rs, const void *const *g, ptrdiff_t gs,
                                          const double *k, const double *ww, ptrdiff_t nr,
                                          const int64_t *tap, ptrdiff_t m, ptrdiff_t W,
                                          ptrdiff_t L, ptrdiff_t Wo, int stream, int isa)
{
    if (nr == 1 && m == 1)
        pg_lanes_row_f64_body(dst, ds, nd, rs, g, gs, k, ww, 1, tap, 1, W, L, Wo, stream,
                              1, isa);
    else if (nr == 1 && m == 2)
        pg_lanes_row_f64_body(dst, ds, nd, rs, g, gs, k, ww, 1, tap, 2, W, L, Wo, stream,
                              1, isa);
    else if (nr == 2 && m == 1)
        pg_lanes_row_f64_body(dst, ds, nd, rs, g, gs, k, ww, 2, tap, 1, W, L, Wo, stream,
                              1, isa);
    else if (nr == 2 && m == 2)
        pg_lanes_row_f64_body(dst, ds, nd, rs, g, gs, k, ww, 2, tap, 2, W, L, Wo, stream,
                              1, isa);
    else
        pg_lanes_row_f64_body(dst, ds, nd, rs, g, gs, k, ww, nr, tap, m, W, L, Wo, stream,
                              0, isa);
}

#define PG_LANES_ROW_F64(NAME, ATTR, ISA, ST)                                               \
ATTR static void NAME(void *dst, ptrdiff_t ds, ptrdiff_t nd, ptrdiff_t rs,                  \
                      const void *const *g, ptrdiff_t gs, const double *k, const double *ww,\
                      ptrdiff_t nr, const int64_t *tap, ptrdiff_t m, ptrdiff_t W,           \
                      ptrdiff_t L, ptrdiff_t Wo)                                            \
{                                                                                           \
    if (nd == 1)                                                                            \
        pg_lanes_row_f64_cases(dst, ds, 1, 0, g, gs, k, ww, nr, tap, m, W, L, Wo, ST, ISA); \
    else                                                                                    \
        pg_lanes_row_f64_cases(dst, ds, nd, rs, g, gs, k, ww, nr, tap, m, W, L, Wo, ST,     \
                               ISA);                                                        \
}
PG_LANES_ROW_F64(pg_lanes_row_base_f64_o, , PG_ISA_BASE, 0)
PG_LANES_ROW_F64(pg_lanes_row_base_f64_s, , PG_ISA_BASE, 1)
#if PG_X86_DISPATCH
PG_LANES_ROW_F64(pg_lanes_row_avx2_f64_o, PG_TARGET_AVX2, PG_ISA_AVX2, 0)
PG_LANES_ROW_F64(pg_lanes_row_avx2_f64_s, PG_TARGET_AVX2, PG_ISA_AVX2, 1)
#endif
#endif

/* the copy of the lanes rows that runs: 2 the AVX2 one (its target: AVX2 and F16C), 1 the
 * baseline one (SSE2, NEON), 0 none (no vector layer: the plan then forms E rows,
 * _kernels.LANES_ROWS) */
static inline int pg_lanes_isa(void)
{
#if PG_X86_DISPATCH
    if (pg_have_avx2() && pg_have_f16c()) return 2;
#endif
    return PG_VEC;
}

/* The row is stored at dst and at the nd - 1 rows rs elements apart after it: equal rows
 * (the same covering windows), each column formed once and its stores to the rows
 * interleaved with the forming of the next */
void pg_lanes_row(void *dst, ptrdiff_t ds, ptrdiff_t nd, ptrdiff_t rs, const void *const *g,
                  ptrdiff_t gs, const float *k, const float *ww, ptrdiff_t nr,
                  const int64_t *tap, ptrdiff_t m, ptrdiff_t W, ptrdiff_t L, ptrdiff_t Wo,
                  int kind, int stream, const int64_t *crun)
{
#if PG_VEC
    /* streaming stores of 16 bytes: dst, the column and row strides and the lanes' bytes
     * (where the last 8 lanes start) 16-byte aligned */
    const ptrdiff_t size = kind ? 2 : 4;
    stream = PG_HAVE_STREAM && stream && ((uintptr_t)dst % 16u) == 0
             && (ds * size) % 16 == 0 && (L * size) % 16 == 0 && (nd == 1 || (rs * size) % 16 == 0);
#if PG_X86_DISPATCH
    if (pg_lanes_isa() == 2) {
        if (kind == 0)
            pg_lanes_row_avx2_f32(dst, ds, nd, rs, g, gs, k, ww, nr, tap, m, W, L, Wo,
                                  stream, crun);
        else if (kind == 1)
            pg_lanes_row_avx2_f16(dst, ds, nd, rs, g, gs, k, ww, nr, tap, m, W, L, Wo,
                                  stream, crun);
        else
            pg_lanes_row_avx2_bf16(dst, ds, nd, rs, g, gs, k, ww, nr, tap, m, W, L, Wo,
                                   stream, crun);
        return;
    }
#endif
    if (kind == 0)
        pg_lanes_row_base_f32(dst, ds, nd, rs, g, gs, k, ww, nr, tap, m, W, L, Wo,
                              stream, crun);
    else if (kind == 1)
        pg_lanes_row_base_f16(dst, ds, nd, rs, g, gs, k, ww, nr, tap, m, W, L, Wo,
                              stream, crun);
    else
        pg_lanes_row_base_bf16(dst, ds, nd, rs, g, gs, k, ww, nr, tap, m, W, L, Wo,
                               stream, crun);
#else   /* never planned without the vector layer */
    (void)dst; (void)ds; (void)nd; (void)rs; (void)g; (void)gs; (void)k; (void)ww; (void)nr;
    (void)tap; (void)m; (void)W; (void)L; (void)Wo; (void)kind; (void)stream; (void)crun;
#endif
}

/* float64 rows (pg_lanes_row_f64_body): streamed where dst, the column and row strides and
 * the lanes (where the last four start) are 16-byte aligned */
void pg_lanes_row_f64(void *dst, ptrdiff_t ds, ptrdiff_t nd, ptrdiff_t rs,
                      const void *const *g, ptrdiff_t gs, const double *k, const double *ww,
                      ptrdiff_t nr, const int64_t *tap, ptrdiff_t m, ptrdiff_t W, ptrdiff_t L,
                      ptrdiff_t Wo, int stream)
{
#if PG_VEC
    if (PG_HAVE_STREAM && stream && ((uintptr_t)dst % 16u) == 0 && ds % 2 == 0
            && L % 2 == 0 && (nd == 1 || rs % 2 == 0))
        PG_PICK(pg_lanes_row, f64_s, dst, ds, nd, rs, g, gs, k, ww, nr, tap, m, W, L, Wo);
    else
        PG_PICK(pg_lanes_row, f64_o, dst, ds, nd, rs, g, gs, k, ww, nr, tap, m, W, L, Wo);
#else   /* never planned without the vector layer */
    (void)dst; (void)ds; (void)nd; (void)rs; (void)g; (void)gs; (void)k; (void)ww; (void)nr;
    (void)tap; (void)m; (void)W; (void)L; (void)Wo; (void)stream;
#endif
}
#endif   /* PG_LANES_BODIES */

/* a grad_input row of W columns (nbytes each, dstep bytes apart) copied from an identical
 * row already formed at src (columns sstep bytes apart), so the same bits: column by
 * column, each in order, with 16-byte streaming stores where `stream` and dst, dstep and
 * nbytes allow them */
static inline void pg_lanes_copy(char *PG_RESTRICT dst, ptrdiff_t dstep,
                                 const char *PG_RESTRICT src, ptrdiff_t sstep, ptrdiff_t W,
                                 ptrdiff_t nbytes, int stream)
{
    if (dstep == nbytes && sstep == nbytes) {   /* one run */
        nbytes *= W;
        dstep = sstep = nbytes;
        W = 1;
    }
#if PG_HAVE_STREAM && PG_VEC
    if (stream && ((uintptr_t)dst % 16u) == 0 && dstep % 16 == 0 && nbytes % 16 == 0) {
        for (ptrdiff_t w = 0; w < W; w++)
            for (ptrdiff_t i = 0; i < nbytes; i += 16)
                pg_copy16_nt(dst + w * dstep + i, src + w * sstep + i);
        return;
    }
#else
    (void)stream;
#endif
    for (ptrdiff_t w = 0; w < W; w++)
        memcpy(dst + w * dstep, src + w * sstep, (size_t)nbytes);
}

/* dst = the sum of the nr rows; with `stream` (where the build has streaming stores and
 * the vector layer), dst's whole cache lines written with non-temporal stores */
static inline void pg_combine_f32(float *dst, const float *const *rows, ptrdiff_t nr,
                                  ptrdiff_t n, int stream)
{
#if PG_HAVE_STREAM && PG_VEC
    if (stream) {
        ptrdiff_t head = n, body_end = n;
        PG_LINES(float, dst, n, head, body_end);
        PG_PICK(pg_combine_stream, f32, dst, rows, nr, n, head, body_end);
        return;
    }
#endif
    (void)stream;
    PG_PICK(pg_combine, f32, dst, rows, nr, n);
}

static inline void pg_combine_f64(double *dst, const double *const *rows, ptrdiff_t nr,
                                  ptrdiff_t n, int stream)
{
#if PG_HAVE_STREAM && PG_VEC
    if (stream) {
        ptrdiff_t head = n, body_end = n;
        PG_LINES(double, dst, n, head, body_end);
        PG_PICK(pg_combine_stream, f64, dst, rows, nr, n, head, body_end);
        return;
    }
#endif
    (void)stream;
    PG_PICK(pg_combine, f64, dst, rows, nr, n);
}

/*
 * The combine of a 16-bit output row with its single rounding fused in: eight sums at a
 * time, rounded to bfloat16 (integer operations, pg_half.h's formula) or float16 (F16C,
 * _Float16 or the layer's lane operations: IEEE round to nearest even) and stored, without
 * the float32 row in between.  The same bits as pg_combine_f32 followed by the row
 * conversion.  Written against the vector layer: AVX2 and baseline copies.
 */
#if PG_VEC
/* the sum at column j of nr rows (r0, r1, r2 the first three, or r0 where there are fewer):
 * one to three terms (the common counts: k3 s1 sums three rows) without the loop, their
 * row pointers the caller's locals, not reloaded at every block (the extension builds
 * without strict aliasing, so a store through dst could have changed rows[]); rows after
 * the third from rows[], or with rows NULL rs floats apart from r0 on */
PG_VEC_INLINE pg_f8 pg_combine8(const float *r0, const float *r1, const float *r2,
                                const float *const *rows, ptrdiff_t rs, ptrdiff_t nr,
                                ptrdiff_t j)
{
    if (nr == 1) return pg_f8_load(r0 + j);
    pg_f8 s = pg_f8_load(r0 + j) + pg_f8_load(r1 + j);
    if (nr == 2) return s;
    s = s + pg_f8_load(r2 + j);
    if (rows)
        for (ptrdiff_t r = 3; r < nr; r++) s = s + pg_f8_load(rows[r] + j);
    else
        for (ptrdiff_t r = 3; r < nr; r++) s = s + pg_f8_load(r0 + r * rs + j);
    return s;
}

/* n >= 8.  bfloat16 sixteen at a time (two rounded blocks, one store: AVX2 tests the
 * sixteen for NaN at once); a row of 16 or more ends with a block that overlaps the one
 * before (equal values again), a shorter one with a block of eight that does */
PG_VEC_INLINE void pg_combine_h16_body(uint16_t *dst, const float *r0, const float *r1,
                                       const float *r2, const float *const *rows,
                                       ptrdiff_t rs, ptrdiff_t nr, ptrdiff_t n, int bf16,
                                       int isa)
{
    if (!bf16) {
        PG_FOR8_OVERLAP(j, n, {
            const pg_f8 s = pg_combine8(r0, r1, r2, rows, rs, nr, j);
            pg_h8_store(dst + j, pg_f8_to_f16(s, isa));
        })
        return;
    }
    ptrdiff_t j = 0;
#define PG_COMBINE16_BF16(j)                                                                \
    pg_f8x2_store_bf16(dst + (j), pg_combine8(r0, r1, r2, rows, rs, nr, (j)),               \
                       pg_combine8(r0, r1, r2, rows, rs, nr, (j) + 8), isa)
    for (; j + 16 <= n; j += 16) PG_COMBINE16_BF16(j);
    if (j < n && n >= 16) {
        PG_COMBINE16_BF16(n - 16);
        return;
    }
#undef PG_COMBINE16_BF16
    for (; j < n; j += 8) {
        if (j + 8 > n) j = n - 8;   /* the last block overlaps: it rewrites equal values */
        const pg_f8 s = pg_combine8(r0, r1, r2, rows, rs, nr, j);
        pg_h8_store(dst + j, pg_f8_to_bf16_isa(s, isa));
    }
}

/* a row of the sum of nr rows (r0, r1, r2 the first three, or r0 where there are fewer;
 * rows[] all of them), rounded to bfloat16 (bf16) or float16; inlined where rows are formed
 * (pg_item.h's 16-bit item), so that the first three rows stay in registers and a row costs
 * no call */
PG_VEC_INLINE void pg_combine_h16_inline(uint16_t *dst, const float *r0, const float *r1,
                                         const float *r2, const float *const *rows,
                                         ptrdiff_t nr, ptrdiff_t n, int bf16, int isa)
{
    if (n < 8) {
        for (ptrdiff_t j = 0; j < n; j++) {
            const float s = pg_combine1_f32(rows, nr, j);
            dst[j] = bf16 ? pg_f32_to_bf16(s) : pg_f32_to_f16_isa(s, isa);
        }
        return;
    }
    /* the common term counts as constants, so the loops carry no test on them */
    if (nr == 1) pg_combine_h16_body(dst, r0, r0, r0, rows, 0, 1, n, bf16, isa);
    else if (nr == 2) pg_combine_h16_body(dst, r0, r1, r0, rows, 0, 2, n, bf16, isa);
    else if (nr == 3) pg_combine_h16_body(dst, r0, r1, r2, rows, 0, 3, n, bf16, isa);
    else pg_combine_h16_body(dst, r0, r1, r2, rows, 0, nr, n, bf16, isa);
}

/* the same for nr >= 4 rows rs floats apart from r0 on (consecutive E rows, n >= 8), 4 to 8
 * rows as constants (kernels of 4 to 8 at stride 1) */
PG_VEC_INLINE void pg_combine_h16_strided_body(uint16_t *dst, const float *r0, ptrdiff_t rs,
                                               ptrdiff_t nr, ptrdiff_t n, int bf16, int isa)
{
    const float *r1 = r0 + rs, *r2 = r1 + rs;
#define PG_COMBINE_STRIDED(NR)                                                              \
    pg_combine_h16_body(dst, r0, r1, r2, NULL, rs, NR, n, bf16, isa);
    PG_CASES_4_TO_8(nr, PG_COMBINE_STRIDED)
#undef PG_COMBINE_STRIDED
}

/* whether the nr rows (nr >= 3) lie rs floats apart from rows[0] on */
static inline int pg_rows_strided(const float *const *rows, ptrdiff_t nr, ptrdiff_t rs)
{
    ptrdiff_t t = 2;
    while (t < nr && rows[t] == rows[0] + t * rs) t++;
    return t == nr;
}

/* one copy per instruction set and format; the strided sums out of line, so that the
 * items' row loops keep their registers for the common counts.  A table of four or more
 * rows rs apart (consecutive E rows) takes the strided sums, whose rows are constants
 * (the 128-bit copies' loop over a table keeps its sums in memory) */
#define PG_COMBINE_H16_ISA(SFX, ATTR, ISA)                                                  \
ATTR __attribute__((noinline))                                                              \
static void pg_combine_h16_strided_##SFX(uint16_t *dst, const float *r0, ptrdiff_t rs,      \
                                         ptrdiff_t nr, ptrdiff_t n, int bf16)               \
{                                                                                           \
    pg_combine_h16_strided_body(dst, r0, rs, nr, n, bf16, ISA);                             \
}                                                                                           \
ATTR static void pg_combine_bf16_##SFX(uint16_t *dst, const float *const *rows,             \
                                       ptrdiff_t nr, ptrdiff_t n)                           \
{                                                                                           \
    if (nr >= 4 && n >= 8 && pg_rows_strided(rows, nr, rows[1] - rows[0]))                 \
        pg_combine_h16_strided_##SFX(dst, rows[0], rows[1] - rows[0], nr, n, 1);            \
    else                                                                                    \
        pg_combine_h16_inline(dst, rows[0], nr > 1 ? rows[1] : rows[0],                     \
                              nr > 2 ? rows[2] : rows[0], rows, nr, n, 1, ISA);             \
}                                                                                           \
ATTR static void pg_combine_f16_##SFX(uint16_t *dst, const float *const *rows,              \
                                      ptrdiff_t nr, ptrdiff_t n)                            \
{                                                                                           \
    if (nr >= 4 && n >= 8 && pg_rows_strided(rows, nr, rows[1] - rows[0]))                 \
        pg_combine_h16_strided_##SFX(dst, rows[0], rows[1] - rows[0], nr, n, 0);            \
    else                                                                                    \
        pg_combine_h16_inline(dst, rows[0], nr > 1 ? rows[1] : rows[0],                     \
                              nr > 2 ? rows[2] : rows[0], rows, nr, n, 0, ISA);             \
}
PG_COMBINE_H16_ISA(base, , PG_ISA_BASE)
#if PG_X86_DISPATCH
PG_COMBINE_H16_ISA(avx2, PG_TARGET_AVX2_F16C, PG_ISA_AVX2)

/* the AVX2 forms by the names pg_item.h's AVX2 code calls them (a vector it receives comes
 * through a pointer: AVX code may pass none by value to a function without the target) */
#define pg_combine_h16_strided pg_combine_h16_strided_avx2

PG_VEC_INLINE void pg_combine_bf16_inline(uint16_t *dst, const float *r0, const float *r1,
                                          const float *r2, const float *const *rows,
                                          ptrdiff_t nr, ptrdiff_t n)
{
    pg_combine_h16_inline(dst, r0, r1, r2, rows, nr, n, 1, PG_ISA_AVX2);
}

PG_VEC_INLINE void pg_combine_f16_inline(uint16_t *dst, const float *r0, const float *r1,
                                         const float *r2, const float *const *rows,
                                         ptrdiff_t nr, ptrdiff_t n)
{
    pg_combine_h16_inline(dst, r0, r1, r2, rows, nr, n, 0, PG_ISA_AVX2);
}

PG_VEC_INLINE void pg_combine8_to(pg_f8 *v, const float *r0, const float *r1,
                                  const float *r2, const float *const *rows, ptrdiff_t rs,
                                  ptrdiff_t nr, ptrdiff_t j)
{
    *v = pg_combine8(r0, r1, r2, rows, rs, nr, j);
}

PG_TARGET_AVX2 PG_ALWAYS_INLINE
static inline __m256 pg_combine8_avx2(const float *r0, const float *r1, const float *r2,
                                       const float *const *rows, ptrdiff_t rs, ptrdiff_t nr,
                                       ptrdiff_t j)
{
    pg_f8 v;
    pg_combine8_to(&v, r0, r1, r2, rows, rs, nr, j);
    return v;
}
#endif
#endif
/* whether the AVX2 16-bit routines can run: AVX2, and F16C for float16 */
static inline int pg_have_h16(int bf16)
{
#if PG_X86_DISPATCH
    return pg_have_avx2() && (bf16 || pg_have_f16c());
#else
    (void)bf16;
    return 0;
#endif
}

#if PG_VEC
/* eight 16-bit values widened to float32 (bf16: bfloat16, else float16) */
PG_VEC_INLINE pg_f8 pg_h8_widen(const uint16_t *p, int bf16, int isa)
{
    return bf16 ? pg_f8_load_bf16(p, isa) : pg_f8_from_f16(pg_h8_load(p), isa);
}

/* (one float16 value to float32 and back: pg_vec.h's pg_f16_to_f32_isa, pg_f32_to_f16_isa) */


/*
 * A contiguous 16-bit grad_output row widened to float32 and multiplied by its W weights
 * (w NULL: not multiplied) in one pass: the same values as the row conversion followed by
 * the multiply.
 */
PG_VEC_INLINE void pg_load_h16_body(float *dst, const uint16_t *src, const float *w,
                                    ptrdiff_t n, int bf16, int isa)
{
    if (n < 8) {
        for (ptrdiff_t j = 0; j < n; j++) {
            const float x = bf16 ? pg_bf16_to_f32(src[j]) : pg_f16_to_f32_isa(src[j], isa);
            dst[j] = w ? x * w[j] : x;
        }
        return;
    }
    PG_FOR8_OVERLAP(j, n, {
        pg_f8 v = pg_h8_widen(src + j, bf16, isa);
        if (w) v = v * pg_f8_load(w + j);
        pg_f8_store(dst + j, v);
    })
}

/*
 * Channels-last 16-bit grad_output columns of L >= 8 contiguous lanes, `so` elements
 * apart, widened to float32 into a dense row and multiplied by their W weight (w NULL: not
 * multiplied): the same values as the conversion followed by the multiply.
 */
PG_VEC_INLINE void pg_load_lanes_h16_body(float *dst, const uint16_t *src, ptrdiff_t so,
                                          const float *w, ptrdiff_t Wo, ptrdiff_t L,
                                          int bf16, int isa)
{
    for (ptrdiff_t ow = 0; ow < Wo; ow++) {
        const uint16_t *s = src + ow * so;
        float *d = dst + ow * L;
        const pg_f8 c = pg_f8_splat(w ? w[ow] : 0.0f, isa);
        PG_FOR8_OVERLAP(l, L, {
            pg_f8 v = pg_h8_widen(s + l, bf16, isa);
            if (w) v = v * c;
            pg_f8_store(d + l, v);
        })
    }
}

/* one copy per instruction set and format (pg_item.h calls the AVX2 ones by name) */
#define PG_LOAD_H16_ISA(SFX, ATTR_BF16, ATTR_F16, ISA)                                      \
ATTR_BF16 static void pg_load_bf16_##SFX(float *dst, const uint16_t *src, const float *w,   \
                                         ptrdiff_t n)                                       \
{                                                                                           \
    pg_load_h16_body(dst, src, w, n, 1, ISA);                                               \
}                                                                                           \
ATTR_F16 static void pg_load_f16_##SFX(float *dst, const uint16_t *src, const float *w,     \
                                       ptrdiff_t n)                                         \
{                                                                                           \
    pg_load_h16_body(dst, src, w, n, 0, ISA);                                               \
}                                                                                           \
ATTR_F16 static void pg_load_lanes_h16_##SFX(float *dst, const uint16_t *src, ptrdiff_t so, \
                                             const float *w, ptrdiff_t Wo, ptrdiff_t L,     \
                                             int bf16)                                      \
{                                                                                           \
    if (bf16) pg_load_lanes_h16_body(dst, src, so, w, Wo, L, 1, ISA);                       \
    else pg_load_lanes_h16_body(dst, src, so, w, Wo, L, 0, ISA);                            \
}
PG_LOAD_H16_ISA(base, , , PG_ISA_BASE)
#if PG_X86_DISPATCH
PG_LOAD_H16_ISA(avx2, PG_TARGET_AVX2, PG_TARGET_AVX2_F16C, PG_ISA_AVX2)
#endif
#endif

/* which copy of the 16-bit loads runs: 2 the AVX2 one, 1 the baseline one, 0 none (no
 * vector layer, or float16 without hardware conversions: there lane by lane in registers
 * costs more than the caller's element loops) */
#if PG_VEC && PG_VEC_F16
#define PG_H16_BASE_F16 1
#else
#define PG_H16_BASE_F16 0
#endif
static inline int pg_h16_isa(int bf16)
{
    if (pg_have_h16(bf16)) return 2;
    return PG_VEC && (bf16 || PG_H16_BASE_F16);
}

/* returns 0 (and does nothing) where pg_h16_isa is 0: the caller then converts and
 * multiplies */
static inline int pg_load_h16(float *dst, const uint16_t *src, const float *w, ptrdiff_t n,
                              int bf16)
{
    const int isa = pg_h16_isa(bf16);
#if PG_X86_DISPATCH
    if (isa == 2) (bf16 ? pg_load_bf16_avx2 : pg_load_f16_avx2)(dst, src, w, n);
#endif
#if PG_VEC
    if (isa == 1) (bf16 ? pg_load_bf16_base : pg_load_f16_base)(dst, src, w, n);
#endif
    (void)dst; (void)src; (void)w; (void)n;
    return isa != 0;
}

/* the same for lanes; 0 also where L < 8 */
static inline int pg_load_lanes_h16(float *dst, const uint16_t *src, ptrdiff_t so,
                                    const float *w, ptrdiff_t Wo, ptrdiff_t L, int bf16)
{
    const int isa = L >= 8 ? pg_h16_isa(bf16) : 0;
#if PG_X86_DISPATCH
    if (isa == 2) pg_load_lanes_h16_avx2(dst, src, so, w, Wo, L, bf16);
#endif
#if PG_VEC
    if (isa == 1) pg_load_lanes_h16_base(dst, src, so, w, Wo, L, bf16);
#endif
    (void)dst; (void)src; (void)so; (void)w; (void)Wo;
    return isa != 0;
}

/* the fused 16-bit combine: the AVX2 copy where the CPU has it, else the baseline one;
 * returns 0 (and does nothing) without the vector layer: the caller then combines and
 * converts */
static inline int pg_combine_h16(uint16_t *dst, const float *const *rows, ptrdiff_t nr,
                                 ptrdiff_t n, int bf16)
{
#if PG_X86_DISPATCH
    if (pg_have_h16(0)) {   /* the copies' target: AVX2 and F16C */
        (bf16 ? pg_combine_bf16_avx2 : pg_combine_f16_avx2)(dst, rows, nr, n);
        return 1;
    }
#endif
#if PG_VEC
    (bf16 ? pg_combine_bf16_base : pg_combine_f16_base)(dst, rows, nr, n);
    return 1;
#else
    (void)dst; (void)rows; (void)nr; (void)n; (void)bf16;
    return 0;
#endif
}

/* n elements of `size` bytes (2, 4 or 8), every one equal to *value: the fill of global
 * pooling's planes.  The vector build stores 32 bytes at a time and ends with one store
 * that overlaps the one before (the same bytes again), so a 49-value plane takes seven
 * stores. */
static void pg_fill_base(void *dst, const void *value, ptrdiff_t size, ptrdiff_t n)
{
    if (size == 2) {
        uint16_t v, *d = (uint16_t *)dst;
        memcpy(&v, value, 2);
        for (ptrdiff_t i = 0; i < n; i++) d[i] = v;
    } else if (size == 4) {
        uint32_t v, *d = (uint32_t *)dst;
        memcpy(&v, value, 4);
        for (ptrdiff_t i = 0; i < n; i++) d[i] = v;
    } else {
        uint64_t v, *d = (uint64_t *)dst;
        memcpy(&v, value, 8);
        for (ptrdiff_t i = 0; i < n; i++) d[i] = v;
    }
}

#if PG_VEC
/* 32 bytes of the 4-byte pattern u */
PG_VEC_INLINE pg_f8 pg_fill_pat32(uint32_t u, int isa)
{
    float x;
    memcpy(&x, &u, 4);
    return pg_f8_splat(x, isa);
}

/* nb bytes from d on (nb >= 32, a multiple of the pattern's size, which divides 32) */
PG_VEC_INLINE void pg_fill_bytes(char *d, pg_f8 p, ptrdiff_t nb)
{
    ptrdiff_t i = 0;
    for (; i + 32 <= nb; i += 32) pg_f8_store(d + i, p);
    if (i < nb) pg_f8_store(d + nb - 32, p);
}

PG_VEC_INLINE void pg_fill_body(void *dst, const void *value, ptrdiff_t size, ptrdiff_t n,
                               int isa)
{
    const ptrdiff_t nb = n * size;
    if (nb < 32) {
        pg_fill_base(dst, value, size, n);
        return;
    }
    pg_f8 p;
    if (size == 2) {
        uint16_t v;
        memcpy(&v, value, 2);
        p = pg_fill_pat32(v * 0x10001u, isa);
    } else if (size == 4) {
        uint32_t v;
        memcpy(&v, value, 4);
        p = pg_fill_pat32(v, isa);
    } else {
        double v;
        memcpy(&v, value, 8);
        p = (pg_f8)pg_d4_splat(v, isa);
    }
    pg_fill_bytes((char *)dst, p, nb);
}

/* a row of n float32 values x, or of n 16-bit values h (the rows' stores below) */
PG_VEC_INLINE void pg_fill_row_f32(float *d, float x, ptrdiff_t n, int isa)
{
    if (n >= 8) pg_fill_bytes((char *)d, pg_f8_splat(x, isa), n * 4);
    else for (ptrdiff_t i = 0; i < n; i++) d[i] = x;
}

PG_VEC_INLINE void pg_fill_row_u16(uint16_t *d, uint16_t h, ptrdiff_t n, int isa)
{
    if (n >= 16) pg_fill_bytes((char *)d, pg_fill_pat32(h * 0x10001u, isa), n * 2);
    else for (ptrdiff_t i = 0; i < n; i++) d[i] = h;
}

static void pg_fill_vec_base(void *dst, const void *value, ptrdiff_t size, ptrdiff_t n)
{
    pg_fill_body(dst, value, size, n, PG_ISA_BASE);
}
#if PG_X86_DISPATCH
PG_TARGET_AVX2
static void pg_fill_avx2(void *dst, const void *value, ptrdiff_t size, ptrdiff_t n)
{
    pg_fill_body(dst, value, size, n, PG_ISA_AVX2);
}
#define pg_fill(...)                                                                        \
    (pg_have_avx2() ? pg_fill_avx2(__VA_ARGS__) : pg_fill_vec_base(__VA_ARGS__))
#else
#define pg_fill(...) pg_fill_vec_base(__VA_ARGS__)
#endif
#else
#define pg_fill(...) pg_fill_base(__VA_ARGS__)
#endif

/*
 * Global pooling's planes, D row by D row (_fill_rows in _kernels.pyx, whose arithmetic
 * this is): row d, n values at dst + d*xs2, is filled with
 *   FROM32((wd[od] * kh) * (TO32(g0[od*gs2]) * ww[0]))   od = dlo[d]; no ww where it is NULL
 * (float32: no conversions; float16 / bfloat16: to float32 and rounded back once).
 * One loop over the rows, so a 49-value plane costs its seven stores and a few
 * instructions, not a call and a dispatch (the folded benchmark case has 131,072 planes).
 */
#define PG_FILL_ROWS(NAME, ATTR, T, TO32, FROM32, STORE)                                    \
ATTR static void NAME(T *dst, ptrdiff_t xs2, ptrdiff_t n, const T *g0, ptrdiff_t gs2,        \
                      const int64_t *dlo, const float *wd, float kh, const float *ww,       \
                      ptrdiff_t d0, ptrdiff_t d1)                                           \
{                                                                                           \
    for (ptrdiff_t d = d0; d < d1; d++) {                                                   \
        const ptrdiff_t od = (ptrdiff_t)dlo[d];                                             \
        float x = TO32(g0[od * gs2]);                                                       \
        if (ww) x = x * ww[0];                                                              \
        x = (wd[od] * kh) * x;                                                              \
        const T v = FROM32(x);                                                              \
        STORE(dst + d * xs2, v, n);                                                         \
    }                                                                                       \
}
#define PG_SAME(x) (x)

#define PG_FILL_STORE_BASE(p, x, n)                                                         \
    do {                                                                                    \
        for (ptrdiff_t i_ = 0; i_ < (n); i_++) (p)[i_] = (x);                               \
    } while (0)

/* the rows' stores: 32 bytes at a time through the layer, element by element without it */
#if PG_VEC
#define PG_FILL_STORE_F32(p, x, n) pg_fill_row_f32(p, x, n, PG_ISA_BASE)
#define PG_FILL_STORE_U16(p, x, n) pg_fill_row_u16(p, x, n, PG_ISA_BASE)
#else
#define PG_FILL_STORE_F32 PG_FILL_STORE_BASE
#define PG_FILL_STORE_U16 PG_FILL_STORE_BASE
#endif

PG_FILL_ROWS(pg_fill_rows_f32_base, , float, PG_SAME, PG_SAME, PG_FILL_STORE_F32)
PG_FILL_ROWS(pg_fill_rows_f16_base, , uint16_t, pg_f16_to_f32, pg_f32_to_f16,
             PG_FILL_STORE_U16)
PG_FILL_ROWS(pg_fill_rows_bf16_base, , uint16_t, pg_bf16_to_f32, pg_f32_to_bf16,
             PG_FILL_STORE_U16)

#if PG_X86_DISPATCH
/* 32 bytes a store; a row of 32 bytes or more ends with one store overlapping the one
 * before.  The float16 conversions of one value through F16C */
#define PG_F16_TO_F32_AVX2(h) pg_f16_to_f32_isa((h), PG_ISA_AVX2)
#define PG_F32_TO_F16_AVX2(x) pg_f32_to_f16_isa((x), PG_ISA_AVX2)
#define PG_FILL_STORE_F32_AVX2(p, x, n) pg_fill_row_f32(p, x, n, PG_ISA_AVX2)
#define PG_FILL_STORE_U16_AVX2(p, x, n) pg_fill_row_u16(p, x, n, PG_ISA_AVX2)

PG_FILL_ROWS(pg_fill_rows_f32_avx2, PG_TARGET_AVX2, float, PG_SAME, PG_SAME,
             PG_FILL_STORE_F32_AVX2)
PG_FILL_ROWS(pg_fill_rows_f16_avx2, PG_TARGET_AVX2_F16C, uint16_t, PG_F16_TO_F32_AVX2,
             PG_F32_TO_F16_AVX2, PG_FILL_STORE_U16_AVX2)
PG_FILL_ROWS(pg_fill_rows_bf16_avx2, PG_TARGET_AVX2, uint16_t, pg_bf16_to_f32, pg_f32_to_bf16,
             PG_FILL_STORE_U16_AVX2)
#define pg_fill_rows_f32(...)                                                               \
    (pg_have_avx2() ? pg_fill_rows_f32_avx2(__VA_ARGS__) : pg_fill_rows_f32_base(__VA_ARGS__))
#else
#define pg_fill_rows_f32(...) pg_fill_rows_f32_base(__VA_ARGS__)
#endif

/* pg_fill_rows_f32's 16-bit twin (bf16: bfloat16, else float16) */
static inline void pg_fill_rows_h16(uint16_t *dst, ptrdiff_t xs2, ptrdiff_t n,
                                    const uint16_t *g0, ptrdiff_t gs2, const int64_t *dlo,
                                    const float *wd, float kh, const float *ww, ptrdiff_t d0,
                                    ptrdiff_t d1, int bf16)
{
#if PG_X86_DISPATCH
    if (pg_have_h16(bf16)) {
        (bf16 ? pg_fill_rows_bf16_avx2 : pg_fill_rows_f16_avx2)(dst, xs2, n, g0, gs2, dlo, wd,
                                                                 kh, ww, d0, d1);
        return;
    }
#endif
    (bf16 ? pg_fill_rows_bf16_base : pg_fill_rows_f16_base)(dst, xs2, n, g0, gs2, dlo, wd, kh,
                                                             ww, d0, d1);
}

/* a contiguous row copy with the same line policy (the max-pool scatter's store) */
static inline void pg_stream_f32(float *dst, const float *src, ptrdiff_t n)
{
    const float *rows[1] = {src};
    pg_combine_f32(dst, rows, 1, n, 1);
}

static inline void pg_stream_f64(double *dst, const double *src, ptrdiff_t n)
{
    const double *rows[1] = {src};
    pg_combine_f64(dst, rows, 1, n, 1);
}

static inline void pg_stream_u16(uint16_t *dst, const uint16_t *src, ptrdiff_t n)
{
    ptrdiff_t j = 0;
#if PG_HAVE_STREAM && PG_VEC
    ptrdiff_t head = n, body_end = n;
    PG_LINES(uint16_t, dst, n, head, body_end);
    for (j = 0; j < head; j++) dst[j] = src[j];
    for (; j < body_end; j += 8) pg_copy16_nt(dst + j, src + j);
#endif
    for (; j < n; j++) dst[j] = src[j];
}

/*
 * A line writer for a contiguous output region written as a sequence of rows: whole cache
 * lines go out with streaming stores even where rows are shorter than a line or not
 * line-aligned (a line that spans two rows is assembled in `carry` first).  The partial
 * lines at the two ends of the region get ordinary stores, since the neighbouring bytes
 * may belong to another thread's region.  Used by the max-pool scatter's blocks
 * (_store_region in _kernels.pyx), its window item, and the benchmarks' streaming copy and
 * traffic bound; the gather item forms its rows in place instead (pg_stage, below).
 */
typedef struct {
    char *pos;            /* next byte of the region to write */
    ptrdiff_t ncarry;     /* bytes of the line at pos - ncarry held in carry */
    unsigned char carry[64];
} pg_sw;

static inline void pg_sw_begin(pg_sw *w, void *dst)
{
    w->pos = (char *)dst;
    w->ncarry = 0;
}

static inline void pg_sw_line(char *dst, const unsigned char *src)
{
#if PG_HAVE_STREAM && PG_VEC
    for (int i = 0; i < 64; i += 16) pg_copy16_nt(dst + i, src + i);
#else
    memcpy(dst, src, 64);
#endif
}

static inline void pg_sw_append(pg_sw *w, const void *src_, ptrdiff_t n)
{
    const unsigned char *src = (const unsigned char *)src_;
    if (w->ncarry) {                       /* finish the line begun by earlier rows */
        ptrdiff_t k = 64 - w->ncarry;
        if (k > n) k = n;
        memcpy(w->carry + w->ncarry, src, (size_t)k);
        w->ncarry += k; w->pos += k; src += k; n -= k;
        if (w->ncarry < 64) return;
        pg_sw_line(w->pos - 64, w->carry);
        w->ncarry = 0;
    } else {
        ptrdiff_t mis = (ptrdiff_t)(((uintptr_t)w->pos) & 63u);
        if (mis) {                         /* the region's first, partial line */
            ptrdiff_t k = 64 - mis;
            if (k > n) k = n;
            memcpy(w->pos, src, (size_t)k);
            w->pos += k; src += k; n -= k;
        }
    }
    while (n >= 64) {
        pg_sw_line(w->pos, src);
        w->pos += 64; src += 64; n -= 64;
    }
    if (n > 0) {
        memcpy(w->carry, src, (size_t)n);
        w->ncarry = n; w->pos += n;
    }
}

/* the region's last, partial line: ordinary stores */
static inline void pg_sw_end(pg_sw *w)
{
    if (w->ncarry) memcpy(w->pos - w->ncarry, w->carry, (size_t)w->ncarry);
    w->ncarry = 0;
}

/*
 * A staged region writer, for rows formed by the caller: each row is formed straight into
 * a small (L1-sized) buffer laid out like the region, byte i of the buffer bound for
 * output byte base + i with base 64-byte aligned, and when the buffer is full every whole
 * line in it goes out with a streaming store and the partial last line moves to the front.
 * So a line that spans two rows costs nothing extra, and the work per row is the row's own
 * arithmetic: the float32 gather item's region (pg_item.h), whose rows are often shorter
 * than a few lines and whose region is rarely line-aligned (numpy aligns large arrays to
 * 16 bytes).  As in pg_sw, the partial lines at the region's two ends get ordinary stores.
 */
typedef struct {
    char *base;          /* output address of buf[0], 64-byte aligned */
    char *buf;           /* 64-byte aligned, cap + 64 bytes */
    ptrdiff_t lo;        /* bytes of buf[0..64) before the region (until the first flush) */
    ptrdiff_t hi;        /* end of the bytes formed */
    ptrdiff_t cap;       /* a multiple of 64, at least 64 more than the longest row */
} pg_stage;

/* the bytes of memory a stage of capacity cap needs: cap and a line of slack, within one
 * page, somewhere in this many bytes from any address (see pg_stage_begin) */
#define PG_STAGE_MEM(cap) (2 * (cap) + 192)

/* a stage bound for dst, in the PG_STAGE_MEM(cap) bytes at mem.  The buffer is
 * line-aligned and, for cap <= 4032, never crosses a 4 KiB boundary (a buffer across one
 * made the stage several times slower at some workspace offsets: docs/performance.md) */
static inline void pg_stage_begin(pg_stage *s, void *dst, void *mem, ptrdiff_t cap)
{
    uintptr_t b = ((uintptr_t)mem + 63u) & ~(uintptr_t)63u;
    const uintptr_t last = b + (uintptr_t)cap + 63u;
    if ((b >> 12) != (last >> 12)) b = (last >> 12) << 12;
    s->lo = (ptrdiff_t)(((uintptr_t)dst) & 63u);
    s->base = (char *)dst - s->lo;
    s->buf = (char *)b;
    s->hi = s->lo;
    s->cap = cap;
}

/* the whole lines formed so far streamed out; with `last`, the rest with ordinary stores,
 * else the partial last line kept (moved to the front) */
#define PG_STAGE_FLUSH(NAME, ATTR, LINE)                                                    \
ATTR static void NAME(pg_stage *s, int last)                                                \
{                                                                                           \
    const ptrdiff_t lines_end = s->hi & ~(ptrdiff_t)63;                                     \
    ptrdiff_t i = 0;                                                                        \
    if (s->lo) {          /* the region's first line, partly another's */                   \
        const ptrdiff_t e = s->hi < 64 ? s->hi : 64;                                        \
        memcpy(s->base + s->lo, s->buf + s->lo, (size_t)(e - s->lo));                       \
        s->lo = 0;                                                                          \
        i = 64;                                                                             \
    }                                                                                       \
    for (; i < lines_end; i += 64) LINE(s->base + i, s->buf + i);                           \
    if (last) {                                                                             \
        if (s->hi > i) memcpy(s->base + i, s->buf + i, (size_t)(s->hi - i));                \
        s->hi = 0;                                                                          \
        return;                                                                             \
    }                                                                                       \
    memcpy(s->buf, s->buf + lines_end, 64);   /* the slack keeps this inside buf */         \
    s->base += lines_end;                                                                   \
    s->hi -= lines_end;                                                                     \
}

#if PG_X86_DISPATCH
/* one line, two 32-byte streaming stores (not a target function itself: clang refuses a
 * 32-byte vector passed to the layer from AVX code, as pg_vec.h says) */
PG_VEC_INLINE void pg_stage_line_avx2(char *dst, const char *src)
{
    pg_f8_stream(dst, pg_f8_load(src), PG_ISA_AVX2);
    pg_f8_stream(dst + 32, pg_f8_load(src + 32), PG_ISA_AVX2);
}
PG_STAGE_FLUSH(pg_stage_flush_avx2, PG_TARGET_AVX2, pg_stage_line_avx2)
#endif
static inline void pg_stage_line_base(char *dst, const char *src)
{
    pg_sw_line(dst, (const unsigned char *)src);
}
PG_STAGE_FLUSH(pg_stage_flush_base, , pg_stage_line_base)

/* where the next n bytes of the region are to be formed (whole lines streamed first if
 * they would not fit); `avx` a constant of the caller's build */
PG_ALWAYS_INLINE
static inline void *pg_stage_next(pg_stage *s, ptrdiff_t n, int avx)
{
    if (s->hi + n > s->cap) {
#if PG_X86_DISPATCH
        if (avx) pg_stage_flush_avx2(s, 0); else
#endif
        pg_stage_flush_base(s, 0);
        (void)avx;
    }
    void *p = s->buf + s->hi;
    s->hi += n;
    return p;
}

PG_ALWAYS_INLINE
static inline void pg_stage_end(pg_stage *s, int avx)
{
#if PG_X86_DISPATCH
    if (avx) { pg_stage_flush_avx2(s, 1); return; }
#endif
    (void)avx;
    pg_stage_flush_base(s, 1);
}

#if PG_VEC
/*
 * A register-fed region writer for regions of whole vectors of float lanes (pg_item.h's
 * float64 items push each double as two; at a 4-byte-aligned address: grad_input is
 * aligned to its dtype, _validate.py): the region's values are
 * pushed eight at a time, in order, and each 32-byte-aligned vector of the output is
 * formed in registers from the last two pushed (shifted by the region's misalignment, sh
 * floats), streamed where its line lies whole in the region, else stored masked to the
 * region's own floats (the partial lines at the region's ends, as in pg_sw).  One stream
 * store a vector, where the stage (pg_stage) stores each value twice and loads it once.
 * With nt = 0 (an output in the cache) each vector lying whole in the region gets an
 * ordinary aligned store, and only the region's partial vectors are masked.  Written
 * against the vector layer (pg_vs_push_isa, pg_vs_end_isa); pg_vs_push and pg_vs_end are
 * its AVX2 forms for intrinsics code.
 */
typedef struct {
    float *a;              /* next aligned output vector */
    float *r0, *r1;        /* the region */
    float *w0, *w1;        /* its whole lines (nt = 0: its whole vectors) */
    pg_f8 prev;            /* the last vector pushed */
    pg_i8 perm, hi;        /* lane i takes float (i - sh) & 7; lanes sh.. set */
    int sh;
} pg_vs;

PG_VEC_INLINE void pg_vs_begin(pg_vs *v, float *dst, ptrdiff_t n, int nt)
{
    const ptrdiff_t sh = (ptrdiff_t)(((uintptr_t)dst & 31u) / 4u);
    const uintptr_t unit = nt ? 63u : 31u;
    const pg_i8 lane = {0, 1, 2, 3, 4, 5, 6, 7};
    const int32_t s = (int32_t)sh;
    v->sh = (int)sh;
    v->a = dst - sh;
    v->r0 = dst;
    v->r1 = dst + n;
    v->w0 = (float *)(((uintptr_t)dst + unit) & ~unit);
    v->w1 = (float *)(((uintptr_t)(dst + n)) & ~unit);
    v->perm = (lane - (pg_i8){s, s, s, s, s, s, s, s}) & 7;
    v->hi = lane > (pg_i8){s - 1, s - 1, s - 1, s - 1, s - 1, s - 1, s - 1, s - 1};
    v->prev = pg_f8_set1(0.0f);
}

/* the output vector at v->a, from lanes of the vector before and the vector now; nt as
 * at pg_vs_begin, a constant where it is called (a test of it at every store costs time) */
PG_VEC_INLINE void pg_vs_put(pg_vs *v, pg_f8 s, const int nt, int isa)
{
    float *const a = v->a;
    if (a >= v->w0 && a + 8 <= v->w1) {
        if (nt) pg_f8_stream(a, s, isa);
        else pg_f8_store(a, s);
    } else {   /* a partial line: the region's floats only */
        pg_f8_store_part(a, v->r0 - a, v->r1 - a, s, isa);
    }
    v->a = a + 8;
}

PG_VEC_INLINE void pg_vs_push_isa(pg_vs *v, pg_f8 x, const int nt, int isa)
{
    pg_f8 s;
    if (v->sh == 0)
        s = x;
    else if (v->sh == 4)
        s = pg_f8_mid(v->prev, x, isa);
    else
        s = pg_f8_blend(pg_f8_permute(v->prev, v->perm, isa), pg_f8_permute(x, v->perm, isa),
                        v->hi, isa);
    v->prev = x;
    pg_vs_put(v, s, nt, isa);
}

/* the last output vector (the region's last sh floats) */
PG_VEC_INLINE void pg_vs_end_isa(pg_vs *v, const int nt, int isa)
{
    if (v->sh) pg_vs_push_isa(v, pg_f8_set1(0.0f), nt, isa);
}

#if PG_X86_DISPATCH
/* the AVX2 forms for pg_item.h's intrinsics (the vector through a pointer: AVX code may pass
 * none by value to a function without the target) */
PG_VEC_INLINE void pg_vs_push_at(pg_vs *v, const pg_f8 *x, const int nt)
{
    pg_vs_push_isa(v, *x, nt, PG_ISA_AVX2);
}

PG_TARGET_AVX2 PG_ALWAYS_INLINE
static inline void pg_vs_push(pg_vs *v, __m256 x, const int nt)
{
    const pg_f8 y = x;
    pg_vs_push_at(v, &y, nt);
}

PG_VEC_INLINE void pg_vs_end(pg_vs *v, const int nt)
{
    pg_vs_end_isa(v, nt, PG_ISA_AVX2);
}
#endif
#endif

/* the float64 gather's staged rows (_kernels.pyx's _gather_item): each row the sum of its
 * nr E rows (nr = 0: zeros), formed in the stage (the same sums as pg_combine_f64 into the
 * output), and the stage's last bytes stored at the end */
static inline void pg_stage_combine_f64(pg_stage *s, const double *const *rows, ptrdiff_t nr,
                                        ptrdiff_t n)
{
    if (nr == 0) {   /* no window covers the row: +0.0 */
        memset(pg_stage_next(s, n * (ptrdiff_t)sizeof(double), 0), 0,
               (size_t)n * sizeof(double));
        return;
    }
#if PG_X86_DISPATCH
    if (pg_have_avx2()) {
        pg_combine_avx2_f64((double *)pg_stage_next(s, n * (ptrdiff_t)sizeof(double), 1),
                            rows, nr, n);
        return;
    }
#endif
    pg_combine_base_f64((double *)pg_stage_next(s, n * (ptrdiff_t)sizeof(double), 0),
                        rows, nr, n);
}

static inline void pg_stage_finish(pg_stage *s)
{
    pg_stage_end(s, PG_X86_DISPATCH && pg_have_avx2());
}

/* streaming stores are weakly ordered: fence before other threads may read the data */
static inline void pg_store_fence(void)
{
#if PG_VEC
    pg_nt_fence();
#endif
}

#endif

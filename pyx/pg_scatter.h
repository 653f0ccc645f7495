/*
 * The max-pool gradient's scatter for its common configuration: contiguous grad_output and
 * index rows, float32 / bfloat16 / float16 values summed in a float32 block buffer.
 * Written once against the vector layer (pg_vec.h) and compiled twice: AVX2 and F16C where
 * the CPU has them, SSE2 or NEON elsewhere (pg_scatter_fast says whether either runs; where
 * neither does, MSVC, the caller keeps its element loops).
 *
 * pg_scatter_row: buf[j[i] - lo] += g[i], i = 0, 1, ... in order (the same additions in the
 * same order as the baseline loop in _kernels.pyx, so the same bits), for the indices with
 * j[i] - lo < span in unsigned arithmetic: four indices are tested at once, a group with
 * none inside the block skipped, and in one with some inside the others added to slots
 * past the block (buf[dummy .. dummy + 3], never stored) rather than branched around.
 * For the lanes of one pixel (channels-last, i = lane): buf[(j[i] - lo) * lanes + i] += g[i].
 * pg_scatter_lane_rows: an output row of all lanes whose grad_output or indices are not
 * channels-last (NCHW planes, say) into a channels-last block: buf[(j_l[i] - lo) * lanes +
 * l] += g_l[i].
 *
 * pg_flush_block: the block's n sums stored to a contiguous run of grad_input, rounded to
 * the output format as the baseline does (round to nearest even, NaN kept quiet), and the
 * block buffer set back to zero in the same pass, so that no item clears it first.  With
 * `stream`, the whole 64-byte lines of the run get streaming stores (the partial lines at
 * its two ends ordinary ones: their other bytes may be another thread's).
 *
 * kind: 0 float32, 1 bfloat16, 2 float16.  Called only where pg_scatter_fast(kind) says so.
 * The gather forms further down (windows that tile the plane) are written the same way.
 */
#ifndef PG_SCATTER_H
#define PG_SCATTER_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "pg_cpu.h"
#include "pg_half.h"
#include "pg_stream.h"
#include "pg_tpose.h"
#include "pg_vec.h"

/* *b += v with the running total as the first operand of the instruction too: where both
 * are NaN, x86 returns the first one's bits, and a compiler may put either operand of `+=`
 * first, so the baseline and vector loops all add through this (pg_acc_isa in the vector
 * bodies: the add VEX-encoded in their AVX2 copies) */
PG_ALWAYS_INLINE
static inline void pg_acc(float *b, float v)
{
#if PG_VEC
    *b = pg_add_first(*b, v, PG_ISA_BASE);
#elif PG_HAVE_STREAM
    _mm_store_ss(b, _mm_add_ss(_mm_load_ss(b), _mm_set_ss(v)));
#else
    *b = *b + v;
#endif
}

#if PG_VEC
PG_VEC_INLINE void pg_acc_isa(float *b, float v, int isa) { *b = pg_add_first(*b, v, isa); }
#endif

/* 2: the AVX2 copies, 1: the baseline ones (SSE2, NEON), 0: the caller's element loops */
static inline int pg_scatter_isa(int kind)
{
#if PG_X86_DISPATCH
    if (pg_have_avx2() && (kind != 2 || pg_have_f16c())) return 2;
#endif
    (void)kind;
    return PG_VEC;
}

static inline int pg_scatter_fast(int kind)
{
    return pg_scatter_isa(kind) != 0;
}

/* the first index from which whole 64-byte lines of dst begin (n: none, or dst not aligned
 * to its element size) */
static inline ptrdiff_t pg_flush_head(const void *dst, ptrdiff_t n, int kind)
{
    const ptrdiff_t es = kind ? 2 : 4, mis = (ptrdiff_t)((uintptr_t)dst & 63u);
    const ptrdiff_t head = ((uintptr_t)dst % (uintptr_t)es) ? n : (mis ? (64 - mis) / es : 0);
    return head > n ? n : head;
}

/* where a block to be streamed to dst should start in a 32-byte aligned scratch area (0..7
 * values in), so that its loads and stores in pg_flush_block are aligned */
static inline ptrdiff_t pg_flush_shift(const void *dst, ptrdiff_t n, int kind)
{
    return (8 - pg_flush_head(dst, n, kind) % 8) % 8;
}

#if PG_VEC
/* four grad values widened to float32 */
PG_VEC_INLINE pg_f4 pg_load4(const void *g, ptrdiff_t i, int kind, int isa)
{
    if (kind == 0) {
        pg_f4 v;
        memcpy(&v, (const float *)g + i, 16);
        return v;
    }
    pg_h4 h;
    memcpy(&h, (const uint16_t *)g + i, 8);
    return kind == 1 ? pg_f4_from_bf16(h) : pg_f4_from_f16(h, isa);
}

/* one grad value widened (float16: the same value as pg_half.h's) */
PG_VEC_INLINE float pg_load1(const void *g, ptrdiff_t i, int kind, int isa)
{
    if (kind == 0)
        return ((const float *)g)[i];
    const uint16_t h = ((const uint16_t *)g)[i];
    return kind == 1 ? pg_bf16_to_f32(h) : pg_f16_to_f32_isa(h, isa);
}

/* the four indices at j + i (int64, or int32 sign-extended), minus lo */
PG_VEC_INLINE pg_uq4 pg_idx4(const void *j, ptrdiff_t i, int j64, pg_uq4 lo)
{
    const pg_q4 v = j64 ? pg_q4_load((const int64_t *)j + i)
                        : pg_q4_from_i32((const int32_t *)j + i);
    return (pg_uq4)v - lo;
}

PG_VEC_INLINE void pg_scatter_body(float *PG_RESTRICT buf, const void *g, int kind,
                                   const void *j, int j64, ptrdiff_t n, uint64_t lo,
                                   uint64_t span, ptrdiff_t lanes, int tstep,
                                   ptrdiff_t dummy, int isa)
{
    /* value t of the row goes to position q of the block: buf[q] for a row of one lane,
     * buf[q * lanes + t] for the lanes of one pixel (channels-last, tstep 1), buf[q * lanes]
     * for a row of one lane of a channels-last block (tstep 0: buf points at the lane) */
#define PG_AT(q, t) (lanes == 1 ? (ptrdiff_t)(q)                                            \
                     : (ptrdiff_t)(q) * lanes + (tstep ? (ptrdiff_t)(t) : 0))
#define PG_ADD(at, v) pg_acc_isa(buf + (at), (v), isa)
    const pg_uq4 lov = {lo, lo, lo, lo}, spanv = {span, span, span, span};
    ptrdiff_t i = 0;
    for (; i + 4 <= n; i += 4) {
        const pg_uq4 r = pg_idx4(j, i, j64, lov);
        const int mask = pg_q4_movemask((pg_q4)(r < spanv), isa);
        if (mask == 0)
            continue;   /* all four in other blocks */
        int64_t rr[4];
        float vv[4];
        const pg_f4 v = pg_load4(g, i, kind, isa);
        memcpy(rr, &r, 32);
        memcpy(vv, &v, 16);
        if (mask == 0xF) {
            PG_ADD(PG_AT(rr[0], i), vv[0]);
            PG_ADD(PG_AT(rr[1], i + 1), vv[1]);
            PG_ADD(PG_AT(rr[2], i + 2), vv[2]);
            PG_ADD(PG_AT(rr[3], i + 3), vv[3]);
            continue;
        }
        /* some inside, some not: every value added, those outside the block to a slot of
         * their own past it (dummy, never stored), so that no branch depends on the data
         * (windows taller than a block make such groups common) */
        for (int k = 0; k < 4; k++) {
            const uint64_t m = 0 - (uint64_t)((mask >> k) & 1);
            const uint64_t at = (uint64_t)rr[k] * (uint64_t)lanes
                                + (uint64_t)(lanes == 1 || !tstep ? 0 : i + k);
            PG_ADD((ptrdiff_t)((at & m) | ((uint64_t)(dummy + k) & ~m)), vv[k]);
        }
    }
    for (; i < n; i++) {
        const uint64_t q = (j64 ? (uint64_t)((const int64_t *)j)[i]
                                : (uint64_t)(int64_t)((const int32_t *)j)[i]) - lo;
        if (q < span) PG_ADD(PG_AT(q, i), pg_load1(g, i, kind, isa));
    }
#undef PG_ADD
#undef PG_AT
}

/* the rows of L lanes of a channels-last block whose grad_output or indices do not hold a
 * pixel's lanes together (NCHW planes, or any strides): buf[(j[l, i] - lo) * L + l] +=
 * g[l, i], value (l, i) at g + l * gl + i * gt and j + l * jl + i * jt (in elements),
 * PG_LTILE columns of every lane at a time, so that the block's values added to lie on a
 * few lines (lane by lane along whole rows, each addition went to a line of its own).
 * Columns with a stride other than 1 are gathered a lane's tile at a time first.  A value
 * of the block gets its additions in the same order as from pg_scatter_row over the
 * pixels' lanes: for its lane, the columns in order. */
#define PG_LTILE 8
#define PG_LAHEAD 16   /* prefetch distance in columns */

PG_VEC_INLINE void pg_scatter_lanes_body(float *PG_RESTRICT buf, const void *g, ptrdiff_t gl,
                                         ptrdiff_t gt, int kind, const void *j,
                                         ptrdiff_t jl, ptrdiff_t jt, int j64, ptrdiff_t n,
                                         ptrdiff_t L, uint64_t lo, uint64_t span,
                                         ptrdiff_t dummy, int rows, int isa)
{
    const ptrdiff_t es = kind ? 2 : 4, isz = j64 ? 8 : 4;
    int64_t jtile[PG_LTILE];
    float gtile[PG_LTILE];   /* PG_LTILE float32, or 16-bit values in its first half */
    for (ptrdiff_t o = 0; o < n; o += PG_LTILE) {
        const ptrdiff_t m = n - o < PG_LTILE ? n - o : PG_LTILE;
        const char *gp = (const char *)g + o * gt * es;
        const char *jp = (const char *)j + o * jt * isz;
        for (ptrdiff_t l = 0; l < L; l++) {
            const char *gr = gp + l * gl * es, *jr = jp + l * jl * isz;
            if (rows) {
                /* L rows read a tile at a time are more streams than the prefetchers
                 * follow: the next tiles' lines asked for here (past a row's end: the next
                 * row's) */
                __builtin_prefetch(jr + PG_LAHEAD * isz, 0, 3);
                __builtin_prefetch(gr + PG_LAHEAD * es, 0, 3);
            }
            if (gt != 1) {
                for (ptrdiff_t k = 0; k < m; k++) {
                    if (kind == 0) gtile[k] = ((const float *)gr)[k * gt];
                    else ((uint16_t *)gtile)[k] = ((const uint16_t *)gr)[k * gt];
                }
                gr = (const char *)gtile;
            }
            if (jt != 1) {
                for (ptrdiff_t k = 0; k < m; k++) {
                    if (j64) jtile[k] = ((const int64_t *)jr)[k * jt];
                    else ((int32_t *)jtile)[k] = ((const int32_t *)jr)[k * jt];
                }
                jr = (const char *)jtile;
            }
            pg_scatter_body(buf + l, gr, kind, jr, j64, m, lo, span, L, 0, dummy - l, isa);
        }
    }
}

/* half a 64-byte line of sums (8 float32, or 16 values for a 16-bit format) in its output
 * format; zero: and cleared in buf */
PG_VEC_INLINE pg_i8 pg_line_half(float *s, int kind, int zero, int isa)
{
    const pg_f8 z = pg_f8_set1(0.0f);
    if (kind == 0) {
        const pg_f8 a = pg_f8_load(s);
        if (zero) pg_f8_store(s, z);
        return (pg_i8)a;
    }
    const pg_f8 a = pg_f8_load(s), b = pg_f8_load(s + 8);
    if (zero) {
        pg_f8_store(s, z);
        pg_f8_store(s + 8, z);
    }
    /* bfloat16: always the full rounding (a sum that is a bfloat16 value already keeps its
     * top half through it): a test for that case mispredicts wherever windows overlap */
    return kind == 1 ? (pg_i8)pg_f8x2_to_bf16x16(a, b, isa) : (pg_i8)pg_f8x2_to_f16x16(a, b, isa);
}

/* one 64-byte line of output, streamed or not */
PG_VEC_INLINE void pg_line_store(char *d, pg_i8 lo, pg_i8 hi, int stream, int isa)
{
    if (stream) {
        pg_i8_stream(d, lo, isa);
        pg_i8_stream(d + 32, hi, isa);
    } else {
        memcpy(d, &lo, 32);
        memcpy(d + 32, &hi, 32);
    }
}

PG_VEC_INLINE void pg_flush1(float *s, char *d, int kind, int isa)
{
    if (kind == 0) memcpy(d, s, 4);
    else {
        const uint16_t h = kind == 1 ? pg_f32_to_bf16(*s) : pg_f32_to_f16_isa(*s, isa);
        memcpy(d, &h, 2);
    }
    *s = 0.0f;
}

PG_VEC_INLINE void pg_flush_body(float *PG_RESTRICT buf, char *PG_RESTRICT dst, ptrdiff_t n,
                                 int kind, int stream, int zero, int isa)
{
    const ptrdiff_t es = kind ? 2 : 4, per = 64 / es;   /* values per 64-byte line */
    const ptrdiff_t head = stream ? pg_flush_head(dst, n, kind) : 0;
    ptrdiff_t i = 0;
    for (; i < head; i++) pg_flush1(buf + i, dst + i * es, kind, isa);
    for (; i + per <= n; i += per) {
        char *d = dst + i * es;
        pg_line_store(d, pg_line_half(buf + i, kind, zero, isa),
                      pg_line_half(buf + i + per / 2, kind, zero, isa), stream, isa);
    }
    for (; i < n; i++) pg_flush1(buf + i, dst + i * es, kind, isa);
    if (!zero) memset(buf + head, 0, (size_t)(i - head) * sizeof(float));
}

/* n float32 zeros from d with ordinary 32-byte stores, aligned after a head of up to 7
 * single ones: the max-pool scatter's direct form clears its block of grad_input with it
 * before adding into it (faster than memset: docs/performance.md) */
PG_VEC_INLINE void pg_zero_body(float *d, ptrdiff_t n)
{
    const pg_f8 z = pg_f8_set1(0.0f);
    ptrdiff_t i = 0;
    for (; i < n && ((uintptr_t)(d + i) & 31u); i++) d[i] = 0.0f;
    for (; i + 32 <= n; i += 32) {
        float *a = (float *)__builtin_assume_aligned(d + i, 32);
        memcpy(a, &z, 32);
        memcpy(a + 8, &z, 32);
        memcpy(a + 16, &z, 32);
        memcpy(a + 24, &z, 32);
    }
    for (; i + 8 <= n; i += 8) memcpy(__builtin_assume_aligned(d + i, 32), &z, 32);
    for (; i < n; i++) d[i] = 0.0f;
}

/* pg_flush_body with the kind a constant */
#define PG_SC_FLUSH(s, z, ISA) do {                                                         \
        if (kind == 0) pg_flush_body(buf, d, n, 0, s, z, ISA);                              \
        else if (kind == 1) pg_flush_body(buf, d, n, 1, s, z, ISA);                         \
        else pg_flush_body(buf, d, n, 2, s, z, ISA);                                        \
    } while (0)
/* M(kind, j64, ISA) with both constants */
#define PG_SC_KW(M, ISA)                                                                    \
    if (j64) {                                                                              \
        if (kind == 0) M(0, 1, ISA); else if (kind == 1) M(1, 1, ISA); else M(2, 1, ISA);   \
    } else {                                                                                \
        if (kind == 0) M(0, 0, ISA); else if (kind == 1) M(1, 0, ISA); else M(2, 0, ISA);   \
    }
#define PG_SC_ROW(k, w, ISA) \
    pg_scatter_body(buf, g, k, j, w, n, lo, span, 1, 1, dummy, ISA)
#define PG_SC_LR(k, w, ISA) \
    pg_scatter_lanes_body(buf, g, gl, 1, k, j, jl, 1, w, n, L, lo, span, dummy, 1, ISA)

/* One copy of the entry points per instruction set: the cases a loop runs most, the kind,
 * the index width and the lane layout, passed to the bodies as constants so that each loop
 * carries no test on them. */
#define PG_SCATTER_ISA(SFX, ATTR, ISA)                                                      \
ATTR static void pg_scatter_lanes_##SFX(float *buf, const void *g, int kind, const void *j, \
                                        int j64, ptrdiff_t n, uint64_t lo, uint64_t span,  \
                                        ptrdiff_t lanes, ptrdiff_t dummy)                  \
{                                                                                           \
    if (j64) pg_scatter_body(buf, g, kind, j, 1, n, lo, span, lanes, 1, dummy, ISA);        \
    else pg_scatter_body(buf, g, kind, j, 0, n, lo, span, lanes, 1, dummy, ISA);            \
}                                                                                           \
ATTR static void pg_scatter_row_##SFX(float *buf, const void *g, int kind, const void *j,   \
                                      int j64, ptrdiff_t n, uint64_t lo, uint64_t span,    \
                                      ptrdiff_t lanes, ptrdiff_t dummy)                    \
{                                                                                           \
    if (lanes != 1) {                                                                       \
        pg_scatter_lanes_##SFX(buf, g, kind, j, j64, n, lo, span, lanes, dummy);            \
        return;                                                                             \
    }                                                                                       \
    PG_SC_KW(PG_SC_ROW, ISA)                                                                \
}                                                                                           \
ATTR static void pg_scatter_lane_rows_##SFX(float *buf, const void *g, ptrdiff_t gl,        \
                                            ptrdiff_t gt, int kind, const void *j,          \
                                            ptrdiff_t jl, ptrdiff_t jt, int j64,            \
                                            ptrdiff_t n, ptrdiff_t L, uint64_t lo,          \
                                            uint64_t span, ptrdiff_t dummy)                 \
{                                                                                           \
    if (gt != 1 || jt != 1) {                                                               \
        pg_scatter_lanes_body(buf, g, gl, gt, kind, j, jl, jt, j64, n, L, lo, span, dummy,  \
                              0, ISA);                                                      \
        return;                                                                             \
    }                                                                                       \
    PG_SC_KW(PG_SC_LR, ISA) /* rows in planes */                                            \
}                                                                                           \
ATTR static void pg_flush_block_##SFX(float *buf, void *dst, ptrdiff_t n, int kind,         \
                                      int stream)                                           \
{                                                                                           \
    char *d = (char *)dst;                                                                  \
    /* buf cleared in the same pass only where its loads and stores are 32-byte aligned    \
     * (misaligned ones between streaming stores cost more than a separate clear) */        \
    const ptrdiff_t head = stream ? pg_flush_head(dst, n, kind) : 0;                        \
    const int zero = ((uintptr_t)(buf + head) & 31u) == 0;                                  \
    if (stream)                                                                             \
        PG_SC_FLUSH(1, zero, ISA);                                                          \
    else                                                                                    \
        PG_SC_FLUSH(0, zero, ISA);                                                          \
}                                                                                           \
ATTR static void pg_zero_f32_##SFX(float *d, ptrdiff_t n) { pg_zero_body(d, n); }

PG_SCATTER_ISA(base, , PG_ISA_BASE)
#if PG_X86_DISPATCH
PG_SCATTER_ISA(avx2, PG_TARGET_AVX2_F16C, PG_ISA_AVX2)
#endif
#endif

/* the entry points: the AVX2 copy where pg_scatter_isa says, else the baseline one (and
 * nothing without the vector layer: pg_scatter_fast is 0 there) */
#if PG_X86_DISPATCH
#define PG_SC_CALL(F, kind, ARGS)                                                           \
    do {                                                                                    \
        if (pg_scatter_isa(kind) == 2) F##_avx2 ARGS;                                       \
        else F##_base ARGS;                                                                 \
    } while (0)
#elif PG_VEC
#define PG_SC_CALL(F, kind, ARGS) F##_base ARGS
#else
#define PG_SC_CALL(F, kind, ARGS) do { (void)(kind); } while (0)
#endif

static void pg_scatter_row(float *buf, const void *g, int kind, const void *j, int j64,
                           ptrdiff_t n, uint64_t lo, uint64_t span, ptrdiff_t lanes,
                           ptrdiff_t dummy)
{
    PG_SC_CALL(pg_scatter_row, kind, (buf, g, kind, j, j64, n, lo, span, lanes, dummy));
    (void)buf; (void)g; (void)j; (void)j64; (void)n; (void)lo; (void)span; (void)lanes;
    (void)dummy;
}

static void pg_scatter_lane_rows(float *buf, const void *g, ptrdiff_t gl, ptrdiff_t gt,
                                 int kind, const void *j, ptrdiff_t jl, ptrdiff_t jt, int j64,
                                 ptrdiff_t n, ptrdiff_t L, uint64_t lo, uint64_t span,
                                 ptrdiff_t dummy)
{
    PG_SC_CALL(pg_scatter_lane_rows, kind,
               (buf, g, gl, gt, kind, j, jl, jt, j64, n, L, lo, span, dummy));
    (void)buf; (void)g; (void)gl; (void)gt; (void)j; (void)jl; (void)jt; (void)j64; (void)n;
    (void)L; (void)lo; (void)span; (void)dummy;
}

static void pg_flush_block(float *buf, void *dst, ptrdiff_t n, int kind, int stream)
{
    PG_SC_CALL(pg_flush_block, kind, (buf, dst, n, kind, stream));
    (void)buf; (void)dst; (void)n; (void)stream;
}

static void pg_zero_f32(float *d, ptrdiff_t n)
{
#if PG_VEC
    PG_SC_CALL(pg_zero_f32, 0, (d, n));
#else
    memset(d, 0, (size_t)n * sizeof(float));
#endif
}
#undef PG_SC_CALL

#if PG_VEC
/*
 * The gather form of the max-pool gradient, for windows two wide that tile the plane
 * (W = 2*Wo, H = Ho*kh, kh < 128), eight outputs a step (Wo a multiple of 8).  Where every
 * index lies in its own window, each input position receives at most one value, and the
 * scatter's result there is round(0 + v) (v as it is, except that the add turns -0 into
 * +0 and quiets a NaN) or zero.
 *
 * pg_wcode_plane (the index check's pass): the code of each index of a plane, 2*r + c
 * where it is the position (r, c) of its own window, else 0xFF.  Returns 1 where every
 * index lies in its own window, which puts it in [0, H*W) too (an int64 index is tested
 * on its low 32 bits after its high ones are seen to be zero), else 0: the caller then
 * checks the plane's range (_kernels.pyx's _plane_bad) and scatters it.
 *
 * pg_wrows (the write pass, for planes whose indices all lie in their windows): input
 * rows r0 <= r < r1 of the windows of n output rows from their codes and values (unit
 * stride), written to dst + (r - r0) * ds (bytes, plus rs per output row), with
 * streaming stores if `stream` (dst and ds multiples of 16).  The sums are formed with
 * the operations of the scatter's loops and flush, so the bits are the scatter's.
 */
/* the codes kw * r + c of eight indices x (their low 32 bits; the high ones are the
 * caller's) at distances from their windows' top-left positions cur, windows kw wide: kh
 * rows tested (kh2: two, unrolled) */
PG_VEC_INLINE pg_i8 pg_wcode8(pg_i8 x, pg_i8 cur, ptrdiff_t W, ptrdiff_t kh, ptrdiff_t kw,
                              int kh2, int isa)
{
    /* unsigned q < kw as a signed compare of both with the top bit flipped */
    const pg_i8 flip = pg_i8_set1(INT32_MIN, isa);
    const pg_i8 kwf = pg_i8_set1((int32_t)kw, isa) ^ flip;
    const pg_i8 wv = pg_i8_set1((int32_t)W, isa), kwv = pg_i8_set1((int32_t)kw, isa);
    pg_i8 q = x - cur, c = pg_i8_set1(0xFF, isa);
    /* q = distance - r*W: inside row r of the window where q < kw (unsigned); at most one
     * row matches (W >= kw) */
    if (kh2) {
        const pg_i8 q1 = q - wv;
        c = pg_i8_select(pg_i8_gt(kwf, q ^ flip, isa), q, c, isa);
        return pg_i8_select(pg_i8_gt(kwf, q1 ^ flip, isa), q1 + kwv, c, isa);
    }
    pg_i8 cr = pg_i8_set1(0, isa);
    for (ptrdiff_t r = 0; r < kh; r++) {
        c = pg_i8_select(pg_i8_gt(kwf, q ^ flip, isa), q + cr, c, isa);
        q = q - wv;
        cr = cr + kwv;
    }
    return c;
}

/* eight codes (one per 32-bit lane of c) stored as bytes at code; *top keeps the largest */
PG_VEC_INLINE void pg_wcode_put8(uint8_t *code, pg_i8 c, pg_u8 *top, int isa)
{
    *top = pg_u8_max(*top, (pg_u8)c, isa);
    pg_i8_bytes8(code, c, isa);
}

/* 1 where every code coded was a window position (top below 0xFF) and, for int64 indices,
 * every high half or-ed into hi was zero (once per row or plane: lane by lane) */
PG_VEC_INLINE int pg_wcode_all_in(pg_u8 top, pg_q4 hi, int j64)
{
    for (int i = 0; i < 8; i++)
        if (top[i] == 0xFF) return 0;   /* some index outside its own window */
    if (j64)
        for (int i = 0; i < 4; i++)
            if ((uint64_t)hi[i] >> 32) return 0;   /* some index at or past 2**32, or < 0 */
    return 1;
}

/* the low 32 bits of the eight indices at j + o, in order; int64: the high ones or-ed into
 * *hi (all zero where every index is below 2**32) */
PG_VEC_INLINE pg_i8 pg_wlow8(const void *j, ptrdiff_t o, int j64, pg_q4 *hi, int isa)
{
    if (!j64) {
        pg_i8 v;
        memcpy(&v, (const int32_t *)j + o, 32);
        return v;
    }
    const pg_q4 x0 = pg_q4_load((const int64_t *)j + o);
    const pg_q4 x1 = pg_q4_load((const int64_t *)j + o + 4);
    *hi = *hi | x0 | x1;
    return pg_q4x2_lo32(x0, x1, isa);
}

/* the codes of a plane's indices (rows js apart, Wo a multiple of 8), 16 a step; returns 1
 * where all lie in their own windows */
PG_VEC_INLINE int pg_wcode_body(uint8_t *PG_RESTRICT code, const void *j, int j64,
                                ptrdiff_t Ho, ptrdiff_t Wo, ptrdiff_t js, ptrdiff_t W,
                                ptrdiff_t kh, int kh2, int isa)
{
    const pg_i8 step8 = pg_i8_set1(16, isa);
    const ptrdiff_t isz = j64 ? 8 : 4;
    pg_q4 hi = {0, 0, 0, 0};
    pg_u8 top = {0, 0, 0, 0, 0, 0, 0, 0};
    /* positions below H*W <= 2**31 - 1: their distances fit 32 bits */
    const pg_i8 lanes = {0, 2, 4, 6, 8, 10, 12, 14};
    for (ptrdiff_t oh = 0; oh < Ho; oh++, code += Wo) {
        const char *jr = (const char *)j + oh * js * isz;
        pg_i8 cur = pg_i8_set1((int32_t)(oh * kh * W), isa) + lanes;
        ptrdiff_t o = 0;
        for (; o + 16 <= Wo; o += 16) {
            const pg_i8 c0 = pg_wcode8(pg_wlow8(jr, o, j64, &hi, isa), cur, W, kh, 2, kh2, isa);
            cur = cur + step8;
            const pg_i8 c1 = pg_wcode8(pg_wlow8(jr, o + 8, j64, &hi, isa), cur, W, kh, 2, kh2,
                                       isa);
            cur = cur + step8;
            top = pg_u8_max(top, pg_u8_max((pg_u8)c0, (pg_u8)c1, isa), isa);
            pg_i8x2_bytes16(code + o, c0, c1, isa);
        }
        if (o < Wo)     /* Wo = 16 k + 8 */
            pg_wcode_put8(code + o,
                          pg_wcode8(pg_wlow8(jr, o, j64, &hi, isa), cur, W, kh, 2, kh2, isa),
                          &top, isa);
    }
    return pg_wcode_all_in(top, hi, j64);
}

/* eight outputs: their codes (8 bytes at cp) and values (at gp: float32, or 16-bit) give
 * 16 input columns of rows r0..r1-1 */
PG_VEC_INLINE void pg_wstep(char *PG_RESTRICT dst, ptrdiff_t ds, int kind, int stream,
                            const uint8_t *cp, const char *gp, ptrdiff_t r0, ptrdiff_t r1,
                            int isa)
{
    /* per input column: the code at its window's left column, the code ^ 1 at its right
     * one; a match in row r where that equals 2 * r.  float32: 32-bit lanes, columns 0-7
     * in e0 and 8-15 in e1; 16-bit: 16-bit lanes, all 16 columns in h0 */
    pg_i8 e0 = pg_i8_set1(0, isa), e1 = e0;
    pg_h16 h0 = pg_h16_set1(0, isa);
    if (kind == 0) {
        const pg_i8 q = pg_b8_to_i8(cp, isa);
        pg_i8_zip(q, q ^ 1, &e0, &e1, isa);
    } else {
        const pg_h8 q = pg_b8_to_h8(cp, isa);
        h0 = pg_h8_zip(q, q ^ 1, isa);
    }
    /* the values plus zero (as the scatter adds them to its zeroed sums), each twice */
    const pg_f8 zero = pg_f8_set1(0.0f);
    pg_i8 v0, v1 = pg_i8_set1(0, isa);
    if (kind == 0) {
        const pg_f8 v = zero + pg_f8_load(gp);
        pg_i8_zip((pg_i8)v, (pg_i8)v, &v0, &v1, isa);
    } else {
        const pg_h8 h = pg_h8_load(gp);
        pg_u8 w;
        if (kind == 1)   /* a bfloat16 value plus zero is a bfloat16 value: its top half */
            w = (pg_u8)(zero + (pg_f8)(pg_h8_to_u8(h, isa) << 16)) >> 16;
        else
            w = pg_h8_to_u8(pg_f8_to_f16(zero + pg_f8_from_f16(h, isa), isa), isa);
        v0 = (pg_i8)(w | (w << 16));
    }
    if (kind == 0) {
        pg_i8 t = pg_i8_set1((int32_t)(2 * r0), isa);
        const pg_i8 two = pg_i8_set1(2, isa);
        for (ptrdiff_t r = r0; r < r1; r++, dst += ds, t = t + two) {
            const pg_i8 x0 = (e0 == t) & v0, x1 = (e1 == t) & v1;
            if (stream) {
                pg_i8_stream16x2(dst, x0);
                pg_i8_stream16x2(dst + 32, x1);
            } else {
                memcpy(dst, &x0, 32);
                memcpy(dst + 32, &x1, 32);
            }
        }
    } else {
        pg_h16 t = pg_h16_set1((uint16_t)(2 * r0), isa);
        const pg_h16 two = pg_h16_set1(2, isa);
        for (ptrdiff_t r = r0; r < r1; r++, dst += ds, t = t + two) {
            const pg_i8 x = (pg_i8)((pg_h16)(h0 == t) & (pg_h16)v0);
            if (stream) pg_i8_stream16x2(dst, x);
            else memcpy(dst, &x, 32);
        }
    }
}

PG_VEC_INLINE void pg_wrowc_body(char *PG_RESTRICT dst, ptrdiff_t ds, const void *g,
                                 int kind, int stream, const uint8_t *code, ptrdiff_t Wo,
                                 ptrdiff_t r0, ptrdiff_t r1, int isa)
{
    const ptrdiff_t es = kind ? 2 : 4;
    for (ptrdiff_t o = 0; o < Wo; o += 8)
        pg_wstep(dst + 2 * o * es, ds, kind, stream, code + o, (const char *)g + o * es, r0,
                 r1, isa);
}

PG_VEC_INLINE int pg_wcode_plane_in(uint8_t *code, const void *j, int j64, ptrdiff_t Ho,
                                    ptrdiff_t Wo, ptrdiff_t js, ptrdiff_t W, ptrdiff_t kh,
                                    int isa)
{
    if (kh == 2) {
        if (j64) return pg_wcode_body(code, j, 1, Ho, Wo, js, W, 2, 1, isa);
        return pg_wcode_body(code, j, 0, Ho, Wo, js, W, 2, 1, isa);
    }
    if (j64) return pg_wcode_body(code, j, 1, Ho, Wo, js, W, kh, 0, isa);
    return pg_wcode_body(code, j, 0, Ho, Wo, js, W, kh, 0, isa);
}

/* rows r0 <= r < r1 of n output rows' windows, `chunk` input rows at a time (few enough
 * lines written at once for the streaming stores' buffers): output row t's row r at
 * dst + t * rs + (r - r0) * ds (bytes), from its values at g + t * gs (bytes) and its
 * codes at code + t * Wo */
PG_VEC_INLINE void pg_wrows_in(void *dst, ptrdiff_t rs, ptrdiff_t ds, const void *g,
                               ptrdiff_t gs, int kind, int stream, const uint8_t *code,
                               ptrdiff_t Wo, ptrdiff_t n, ptrdiff_t r0, ptrdiff_t r1,
                               ptrdiff_t chunk, int isa)
{
#define PG_WR(k, s)                                                                         \
    for (ptrdiff_t t = 0; t < n; t++)                                                       \
        for (ptrdiff_t a = r0; a < r1; a += chunk)                                          \
            pg_wrowc_body((char *)dst + t * rs + (a - r0) * ds, ds, (const char *)g + t * gs,\
                          k, s, code + t * Wo, Wo, a, a + chunk < r1 ? a + chunk : r1, isa)
#define PG_WR2(k, s)                                                                        \
    for (ptrdiff_t t = 0; t < n; t++)                                                       \
        pg_wrowc_body((char *)dst + t * rs, ds, (const char *)g + t * gs, k, s,             \
                      code + t * Wo, Wo, 0, 2, isa)
#define PG_WR_KIND(M, s) do {                                                               \
        if (kind == 0) M(0, s);                                                             \
        else if (kind == 1) M(1, s);                                                        \
        else M(2, s);                                                                       \
    } while (0)
    /* the kind, the store and (for windows two high, the 112 -> 56 case: the row loop
     * unrolled) the rows as constants */
    if (r0 == 0 && r1 == 2 && chunk >= 2) {
        if (stream) PG_WR_KIND(PG_WR2, 1);
        else PG_WR_KIND(PG_WR2, 0);
    } else {
        if (stream) PG_WR_KIND(PG_WR, 1);
        else PG_WR_KIND(PG_WR, 0);
    }
#undef PG_WR_KIND
#undef PG_WR2
#undef PG_WR
}

/*
 * The channels-last gather form (windows kh x kw tiling the plane, L >= 8 lanes a position;
 * where L is not a multiple of 8, the last 8 lanes of a position overlap the ones before).
 *
 * pg_lcode_row (the check's pass): the codes of one output row's indices (Wo columns of
 * L lanes, columns js apart), r * kw + c where an index is position (r, c) of its own
 * window (the row's first window at flat position base), else 0xFF; a byte per index,
 * Wo * L in order.  Returns 1 where all lie in their own windows, which puts them inside
 * the plane too (an int64 index is tested on its low 32 bits after its high ones are
 * seen to be zero), else 0.
 *
 * pg_lwrite_row (the write pass): the kh input rows of one output row's windows, from the
 * codes and values (columns gs apart), written to dst (rows rs, columns xs apart): each
 * value where its code says, +0.0 elsewhere, the value plus zero as the scatter adds it to
 * its zeroed sums (so the scatter's bits: -0.0 becomes +0.0, a NaN quiet); streaming
 * stores if `stream`.
 */
PG_VEC_INLINE int pg_lcode_body(uint8_t *PG_RESTRICT code, const void *j, int j64,
                                ptrdiff_t js, ptrdiff_t Wo, ptrdiff_t L, ptrdiff_t base,
                                ptrdiff_t W, ptrdiff_t kh, ptrdiff_t kw, int tail, int isa)
{
    const ptrdiff_t isz = j64 ? 8 : 4;
    pg_q4 hi = {0, 0, 0, 0};
    pg_u8 top = {0, 0, 0, 0, 0, 0, 0, 0};
    for (ptrdiff_t ow = 0; ow < Wo; ow++, code += L) {
        const char *jc = (const char *)j + ow * js * isz;
        const pg_i8 b = pg_i8_set1((int32_t)(base + ow * kw), isa);
        for (ptrdiff_t l = 0; l < L; l += 8) {
            if (tail && l + 8 > L) l = L - 8;   /* the last 8 overlap the ones before */
            pg_wcode_put8(code + l,
                          pg_wcode8(pg_wlow8(jc, l, j64, &hi, isa), b, W, kh, kw, kh == 2, isa),
                          &top, isa);
        }
    }
    return pg_wcode_all_in(top, hi, j64);
}

PG_VEC_INLINE int pg_lcode_row_in(uint8_t *code, const void *j, int j64, ptrdiff_t js,
                                  ptrdiff_t Wo, ptrdiff_t L, ptrdiff_t base, ptrdiff_t W,
                                  ptrdiff_t kh, ptrdiff_t kw, int isa)
{
#define PG_LC(j64_, h, w) do {                                                              \
        if (L % 8) return pg_lcode_body(code, j, j64_, js, Wo, L, base, W, h, w, 1, isa);   \
        return pg_lcode_body(code, j, j64_, js, Wo, L, base, W, h, w, 0, isa);              \
    } while (0)
    if (kh == 2 && kw == 2) {   /* the 2x2 windows as constants */
        if (j64) PG_LC(1, 2, 2);
        PG_LC(0, 2, 2);
    }
    if (j64) PG_LC(1, kh, kw);
    PG_LC(0, kh, kw);
#undef PG_LC
}

/* pg_lcode_row for an output row whose indices lie in NCHW planes (lane l's row at
 * j + l * jl, unit-stride columns; Wo >= 8 and L >= 8): the same codes in the same place,
 * code[ow * L + l], eight lanes by eight columns at a time through a transpose (the last
 * 8 lanes and columns overlapping the ones before); pf: the distance in elements to the
 * indices to prefetch (the next output row's) */
PG_VEC_INLINE int pg_lcodet_body(uint8_t *PG_RESTRICT code, const void *j, int j64,
                                 ptrdiff_t jl, ptrdiff_t Wo, ptrdiff_t L, ptrdiff_t base,
                                 ptrdiff_t W, ptrdiff_t kh, ptrdiff_t kw, ptrdiff_t pf, int isa)
{
    const ptrdiff_t isz = j64 ? 8 : 4;
    const pg_i8 step = (pg_i8){0, 1, 2, 3, 4, 5, 6, 7} * pg_i8_set1((int32_t)kw, isa);
    pg_q4 hi = {0, 0, 0, 0};
    pg_u8 top = {0, 0, 0, 0, 0, 0, 0, 0};
    for (ptrdiff_t l = 0; l < L; l += 8) {
        if (l + 8 > L) l = L - 8;
        const char *jr = (const char *)j + l * jl * isz;
        for (ptrdiff_t o = 0; o < Wo; o += 8) {
            if (o + 8 > Wo) o = Wo - 8;
            const pg_i8 cur = pg_i8_set1((int32_t)(base + o * kw), isa) + step;
            pg_f8 r[8];
            for (int k = 0; k < 8; k++) {
                /* more planes than the prefetchers follow: the next row's columns asked
                 * for now */
                __builtin_prefetch(jr + (k * jl + o + pf) * isz, 0, 3);
                if (j64) __builtin_prefetch(jr + (k * jl + o + 4 + pf) * isz, 0, 3);
                r[k] = (pg_f8)pg_wcode8(pg_wlow8(jr + k * jl * isz, o, j64, &hi, isa), cur, W,
                                        kh, kw, kh == 2, isa);
            }
            pg_f8_transpose8(r, isa);
            for (int m = 0; m < 8; m++)
                pg_wcode_put8(code + (o + m) * L + l, (pg_i8)r[m], &top, isa);
        }
    }
    return pg_wcode_all_in(top, hi, j64);
}

PG_VEC_INLINE int pg_lcode_rowt_in(uint8_t *code, const void *j, int j64, ptrdiff_t jl,
                                   ptrdiff_t Wo, ptrdiff_t L, ptrdiff_t base, ptrdiff_t W,
                                   ptrdiff_t kh, ptrdiff_t kw, ptrdiff_t pf, int isa)
{
    if (kh == 2 && kw == 2) {   /* the 2x2 windows as constants */
        if (j64) return pg_lcodet_body(code, j, 1, jl, Wo, L, base, W, 2, 2, pf, isa);
        return pg_lcodet_body(code, j, 0, jl, Wo, L, base, W, 2, 2, pf, isa);
    }
    if (j64) return pg_lcodet_body(code, j, 1, jl, Wo, L, base, W, kh, kw, pf, isa);
    return pg_lcodet_body(code, j, 0, jl, Wo, L, base, W, kh, kw, pf, isa);
}

/* an output row of grad_output values that lie in NCHW planes (lane l's row at g + l * gl,
 * unit-stride columns; Wo >= 8 and L >= 8) copied to t in channels-last order, t[ow * L +
 * l], eight by eight through a transpose (16-bit values widened to 32 bits and back: the
 * same bits); es: 4 or 2; pf: the distance in elements to the values to prefetch */
PG_VEC_INLINE void pg_lanes_gather_in(void *t, const void *g, ptrdiff_t gl, ptrdiff_t Wo,
                                      ptrdiff_t L, ptrdiff_t es, ptrdiff_t pf, int isa)
{
    for (ptrdiff_t l = 0; l < L; l += 8) {
        if (l + 8 > L) l = L - 8;
        for (ptrdiff_t o = 0; o < Wo; o += 8) {
            if (o + 8 > Wo) o = Wo - 8;
            pg_f8 r[8];
            if (es == 4) {
                for (int k = 0; k < 8; k++) {
                    __builtin_prefetch((const float *)g + (l + k) * gl + o + pf, 0, 3);
                    r[k] = pg_f8_load((const float *)g + (l + k) * gl + o);
                }
                pg_f8_transpose8(r, isa);
                for (int m = 0; m < 8; m++) pg_f8_store((float *)t + (o + m) * L + l, r[m]);
                continue;
            }
            for (int k = 0; k < 8; k++) {
                __builtin_prefetch((const uint16_t *)g + (l + k) * gl + o + pf, 0, 3);
                r[k] = (pg_f8)pg_h8_to_u8(pg_h8_load((const uint16_t *)g + (l + k) * gl + o),
                                          isa);
            }
            pg_f8_transpose8(r, isa);
            for (int m = 0; m < 8; m++)
                pg_h8_store((uint16_t *)t + (o + m) * L + l, pg_u8_to_h8((pg_u8)r[m], isa));
        }
    }
}

/* eight 16-bit values plus zero (kind 1 bfloat16: a bfloat16 value plus zero is a bfloat16
 * value, the top half of the float32 sum; 2 float16) */
PG_VEC_INLINE pg_h8 pg_h16_plus0(pg_h8 h, int kind, int isa)
{
    const pg_f8 zero = pg_f8_set1(0.0f);
    if (kind == 1)
        return pg_u8_to_h8((pg_u8)(zero + (pg_f8)(pg_h8_to_u8(h, isa) << 16)) >> 16, isa);
    return pg_f8_to_f16(zero + pg_f8_from_f16(h, isa), isa);
}

/* up to PG_LBLOCK lanes of one output column at a time: their codes widened and their
 * values formed once (the value plus zero), then the kh * kw input columns of the window
 * written one after another, each column's lanes in order, so that one or two output
 * lines are open at a time (lanes outer and columns inner kept kw partial lines open, more
 * than the write combining of streaming stores holds for wide windows) */
#define PG_LBLOCK 1024

/* the staging buffers' loads and stores: aligned, except where the last 8 lanes overlap */
#define PG_LST(p, v) memcpy(tail ? (void *)(p) : __builtin_assume_aligned((p), sizeof(v)), \
                            &(v), sizeof(v))
#define PG_LLD(v, p) memcpy(&(v), tail ? (const void *)(p)                                \
                                       : __builtin_assume_aligned((p), sizeof(v)), sizeof(v))

/* the block's codes (widened to the values' width) and values plus zero into the staging
 * buffers */
PG_VEC_INLINE void pg_lstage(uint32_t *PG_RESTRICT qbuf, uint32_t *PG_RESTRICT vbuf,
                             const uint8_t *cp, const char *gp, ptrdiff_t nb, int kind,
                             int tail, int isa)
{
    const pg_f8 zero = pg_f8_set1(0.0f);
    for (ptrdiff_t l = 0; l < nb; l += 8) {
        if (tail && l + 8 > nb) l = nb - 8;   /* the last 8 overlap the ones before */
        if (kind == 0) {
            const pg_i8 q = pg_b8_to_i8(cp + l, isa);
            const pg_f8 v = zero + pg_f8_load((const float *)gp + l);
            PG_LST(qbuf + l, q);
            PG_LST(vbuf + l, v);
            continue;
        }
        const pg_h8 q = pg_b8_to_h8(cp + l, isa);
        const pg_h8 v = pg_h16_plus0(pg_h8_load((const uint16_t *)gp + l), kind, isa);
        PG_LST((uint16_t *)qbuf + l, q);
        PG_LST((uint16_t *)vbuf + l, v);
    }
}

/* the staged block's lanes where their code is `want`, +0.0 elsewhere, stored from dp */
PG_VEC_INLINE void pg_lput(char *dp, const uint32_t *PG_RESTRICT qbuf,
                           const uint32_t *PG_RESTRICT vbuf, ptrdiff_t nb, int want, int kind,
                           int stream, int tail, int isa)
{
    if (kind == 0) {
        const pg_i8 wv = pg_i8_set1(want, isa);
        for (ptrdiff_t l = 0; l < nb; l += 8) {
            if (tail && l + 8 > nb) l = nb - 8;
            pg_i8 q, v;
            PG_LLD(q, qbuf + l);
            PG_LLD(v, vbuf + l);
            const pg_i8 x = (q == wv) & v;
            if (stream) pg_i8_stream16x2(dp + l * 4, x);
            else memcpy(dp + l * 4, &x, 32);
        }
        return;
    }
    const pg_h8 wv = pg_h8_set1((uint16_t)want, isa);
    for (ptrdiff_t l = 0; l < nb; l += 8) {
        if (tail && l + 8 > nb) l = nb - 8;
        pg_h8 q, v;
        PG_LLD(q, (const uint16_t *)qbuf + l);
        PG_LLD(v, (const uint16_t *)vbuf + l);
        const pg_h8 x = (pg_h8)(q == wv) & v;
        if (stream) pg_h8_stream(dp + l * 2, x);
        else memcpy(dp + l * 2, &x, 16);
    }
}

#undef PG_LST
#undef PG_LLD

PG_VEC_INLINE void pg_lwrite_body(char *PG_RESTRICT dst, ptrdiff_t rs, ptrdiff_t xs,
                                  const char *g, ptrdiff_t gs, const uint8_t *code, int kind,
                                  int stream, ptrdiff_t Wo, ptrdiff_t L, ptrdiff_t kh,
                                  ptrdiff_t kw, int tail, int isa)
{
    const ptrdiff_t es = kind ? 2 : 4;
    __attribute__((aligned(32))) uint32_t qbuf[PG_LBLOCK];   /* codes: 32 or 16 bits */
    __attribute__((aligned(32))) uint32_t vbuf[PG_LBLOCK];   /* values: 4 or 2 bytes */
    for (ptrdiff_t ow = 0; ow < Wo; ow++) {
        for (ptrdiff_t l0 = 0; l0 < L; l0 += PG_LBLOCK) {
            ptrdiff_t nb = L - l0 < PG_LBLOCK ? L - l0 : PG_LBLOCK;
            if (nb < 8) {   /* a tail of fewer than 8 lanes: the last 8 lanes again */
                l0 = L - 8;
                nb = 8;
            }
            pg_lstage(qbuf, vbuf, code + ow * L + l0, g + (ow * gs + l0) * es, nb, kind, tail,
                      isa);
            for (ptrdiff_t r = 0; r < kh; r++)
                for (ptrdiff_t c = 0; c < kw; c++)
                    pg_lput(dst + (r * rs + (ow * kw + c) * xs + l0) * es, qbuf, vbuf, nb,
                            (int)(r * kw + c), kind, stream, tail, isa);
        }
    }
}

PG_VEC_INLINE void pg_lwrite_row_in(void *dst, ptrdiff_t rs, ptrdiff_t xs, const void *g,
                                    ptrdiff_t gs, const uint8_t *code, int kind, int stream,
                                    ptrdiff_t Wo, ptrdiff_t L, ptrdiff_t kh, ptrdiff_t kw,
                                    int isa)
{
    /* streaming stores of 16 bytes: dst and the row and column strides 16-byte aligned */
    const ptrdiff_t es = kind ? 2 : 4;
    stream = stream && ((uintptr_t)dst % 16u) == 0 && (xs * es) % 16 == 0 && (rs * es) % 16 == 0;
#define PG_LW(k, s, h, w, t) pg_lwrite_body((char *)dst, rs, xs, (const char *)g, gs, code, k, \
                                            s, Wo, L, h, w, t, isa)
#define PG_LW_TAIL(k, s, h, w) do {                                                         \
        if (L % 8) PG_LW(k, s, h, w, 1);                                                    \
        else PG_LW(k, s, h, w, 0);                                                          \
    } while (0)
#define PG_LW_KIND(s, h, w) do {                                                            \
        if (kind == 0) PG_LW_TAIL(0, s, h, w);                                              \
        else if (kind == 1) PG_LW_TAIL(1, s, h, w);                                         \
        else PG_LW_TAIL(2, s, h, w);                                                        \
    } while (0)
    if (kh == 2 && kw == 2) {
        if (stream) PG_LW_KIND(1, 2, 2);
        else PG_LW_KIND(0, 2, 2);
    } else {
        if (stream) PG_LW_KIND(1, kh, kw);
        else PG_LW_KIND(0, kh, kw);
    }
#undef PG_LW_KIND
#undef PG_LW_TAIL
#undef PG_LW
}

/*
 * The channels-last gather form for 2..15 lanes a position, not a multiple of 8 (flat rows:
 * an output row's Wo * L indices and values, and an input row's W * L values, each
 * contiguous).
 *
 * pg_fcode_row: the codes of one output row's n = Wo * L indices (n >= 8), as pg_lcode_row
 * gives them, eight a step (the last eight overlapping the ones before), each index's
 * window found from its place in the row: column (i / L) * kw of the first window's row.
 *
 * pg_fwrite_row: the kh input rows (rs apart) of one output row's windows, each n = W * L
 * values: block by block of B columns (B = 8 for float32, 16 for 16-bit, the last
 * overlapping the one before), each column's value and code gathered from the output row
 * and its codes through the table sp (_plan.window_spread: per block, the spread's base
 * and controls, then each column's place c in its window row, 32 bytes), then, for each
 * input row r, the value where the code is r * kw + c, +0.0 elsewhere.  The values plus
 * zero and +0.0 elsewhere, as pg_lwrite_row; a staging buffer of PG_FCOLS columns makes
 * the rows' stores one row after another.  Streaming stores if `stream` (dst, rs and the
 * row 16-byte multiples).  The gathers are the layer's spreads (pg_vec.h: AVX2's permutes
 * and byte shuffles).
 */
PG_VEC_INLINE int pg_fcode_body(uint8_t *PG_RESTRICT code, const void *j, int j64,
                                ptrdiff_t n, ptrdiff_t L, ptrdiff_t base, ptrdiff_t W,
                                ptrdiff_t kh, ptrdiff_t kw, int isa)
{
    pg_q4 hi = {0, 0, 0, 0};
    pg_u8 top = {0, 0, 0, 0, 0, 0, 0, 0};
    /* lane i of the step at o: its lane within the position (o + i) % L and its window's
     * top-left corner base + ((o + i) / L) * kw, both advanced by 8 a step */
    int32_t rem0[8], cur0[8];
    for (ptrdiff_t i = 0, r = 0, c = base; i < 8; i++) {
        rem0[i] = (int32_t)r;
        cur0[i] = (int32_t)c;
        if (++r == L) {
            r = 0;
            c += kw;
        }
    }
    pg_i8 rem, cur;
    memcpy(&rem, rem0, 32);
    memcpy(&cur, cur0, 32);
    const pg_i8 dr = pg_i8_set1((int32_t)(8 % L), isa);
    const pg_i8 dc = pg_i8_set1((int32_t)((8 / L) * kw), isa);
    const pg_i8 lm1 = pg_i8_set1((int32_t)(L - 1), isa), lv = pg_i8_set1((int32_t)L, isa);
    const pg_i8 kwv = pg_i8_set1((int32_t)kw, isa);
    ptrdiff_t o = 0;
    for (; o + 8 <= n; o += 8) {
        pg_wcode_put8(code + o,
                      pg_wcode8(pg_wlow8(j, o, j64, &hi, isa), cur, W, kh, kw, kh == 2, isa),
                      &top, isa);
        rem = rem + dr;
        cur = cur + dc;
        const pg_i8 carry = pg_i8_gt(rem, lm1, isa);
        rem = rem - (carry & lv);
        cur = cur + (carry & kwv);
    }
    if (o < n) {
        o = n - 8;
        for (ptrdiff_t i = 0, r = o % L, c = base + (o / L) * kw; i < 8; i++) {
            cur0[i] = (int32_t)c;
            if (++r == L) {
                r = 0;
                c += kw;
            }
        }
        memcpy(&cur, cur0, 32);
        pg_wcode_put8(code + o,
                      pg_wcode8(pg_wlow8(j, o, j64, &hi, isa), cur, W, kh, kw, kh == 2, isa),
                      &top, isa);
    }
    return pg_wcode_all_in(top, hi, j64);
}

PG_VEC_INLINE int pg_fcode_row_in(uint8_t *code, const void *j, int j64, ptrdiff_t n,
                                  ptrdiff_t L, ptrdiff_t base, ptrdiff_t W, ptrdiff_t kh,
                                  ptrdiff_t kw, int isa)
{
    if (kh == 2 && kw == 2) {
        if (j64) return pg_fcode_body(code, j, 1, n, L, base, W, 2, 2, isa);
        return pg_fcode_body(code, j, 0, n, L, base, W, 2, 2, isa);
    }
    if (j64) return pg_fcode_body(code, j, 1, n, L, base, W, kh, kw, isa);
    return pg_fcode_body(code, j, 0, n, L, base, W, kh, kw, isa);
}

#define PG_FCOLS 512   /* staged columns (a multiple of 16) */

PG_VEC_INLINE void pg_fwrite_body(char *PG_RESTRICT dst, ptrdiff_t rs, const char *g,
                                  const uint8_t *code, const int64_t *sp, ptrdiff_t n,
                                  int kind, int stream, int wide, ptrdiff_t kh, ptrdiff_t kw,
                                  int isa)
{
    const ptrdiff_t es = kind ? 2 : 4, B = kind ? 16 : 8;
    const ptrdiff_t nblk = (n + B - 1) / B, per = PG_FCOLS / B;
    const pg_f8 zero = pg_f8_set1(0.0f);
    __attribute__((aligned(32))) uint8_t vbuf[PG_FCOLS * 4], qbuf[PG_FCOLS * 4];
    for (ptrdiff_t b0 = 0; b0 < nblk; b0 += per) {
        const ptrdiff_t b1 = b0 + per < nblk ? b0 + per : nblk;
        /* each block's values (plus zero) and codes, gathered to its columns */
        for (ptrdiff_t b = b0; b < b1; b++) {
            const int64_t *t = sp + 9 * b;
            void *vs = __builtin_assume_aligned(vbuf + (b - b0) * 32, 32);
            void *qs = __builtin_assume_aligned(qbuf + (b - b0) * 32, 32);
            const uint8_t *cp = code + t[0];
            if (kind == 0) {
                /* (the value plus zero, lane by lane: the same after the spread) */
                const pg_f8 v = zero + pg_f8_spread((const float *)g + t[0], t + 1, wide, isa);
                const pg_i8 q = pg_b8_spread(cp, t + 1, wide, isa);
                memcpy(vs, &v, 32);
                memcpy(qs, &q, 32);
                continue;
            }
            const uint16_t *s = (const uint16_t *)g + t[0];
            const pg_h8 va = pg_h16_plus0(pg_h8_load(s), kind, isa);
            const pg_h8 vb = wide ? pg_h16_plus0(pg_h8_load(s + 8), kind, isa) : va;
            const pg_h16 v = pg_h16_spread(va, vb, t + 1, wide, isa);
            const pg_h16 q = pg_b8_spread16(cp, t + 1, wide, isa);
            memcpy(vs, &v, 32);
            memcpy(qs, &q, 32);
        }
        /* then each input row's blocks: the value where the code is r * kw + c */
        for (ptrdiff_t r = 0; r < kh; r++) {
            char *row = dst + r * rs * es;
            const pg_i8 rk = pg_i8_set1((int32_t)(r * kw), isa);
            const pg_h16 rk16 = pg_h16_set1((uint16_t)(r * kw), isa);
            for (ptrdiff_t b = b0; b < b1; b++) {
                const int64_t *t = sp + 9 * b;
                const ptrdiff_t j = b * B + B <= n ? b * B : n - B;
                const void *vs = __builtin_assume_aligned(vbuf + (b - b0) * 32, 32);
                const void *qs = __builtin_assume_aligned(qbuf + (b - b0) * 32, 32);
                pg_i8 x;
                if (kind == 0) {
                    pg_i8 cpos, v, q;
                    memcpy(&cpos, t + 5, 32);
                    memcpy(&v, vs, 32);
                    memcpy(&q, qs, 32);
                    x = pg_i8_eq(q, cpos + rk, isa) & v;
                } else {
                    pg_h16 cpos, v, q;
                    memcpy(&cpos, t + 5, 32);
                    memcpy(&v, vs, 32);
                    memcpy(&q, qs, 32);
                    x = (pg_i8)(pg_h16_eq(q, cpos + rk16, isa) & v);
                }
                if (stream) pg_i8_stream16x2(row + j * es, x);
                else memcpy(row + j * es, &x, 32);
            }
        }
    }
}

PG_VEC_INLINE void pg_fwrite_row_in(void *dst, ptrdiff_t rs, const void *g,
                                    const uint8_t *code, const int64_t *sp, ptrdiff_t n,
                                    int kind, int stream, int wide, ptrdiff_t kh, ptrdiff_t kw,
                                    int isa)
{
    const ptrdiff_t es = kind ? 2 : 4;
    stream = stream && ((uintptr_t)dst % 16u) == 0 && (rs * es) % 16 == 0 && (n * es) % 16 == 0;
#define PG_FW(k, s, w, h, kw_) pg_fwrite_body((char *)dst, rs, (const char *)g, code, sp, n, \
                                              k, s, w, h, kw_, isa)
#define PG_FW_KIND(s, w, h, kw_) do {                                                      \
        if (kind == 0) PG_FW(0, s, w, h, kw_);                                              \
        else if (kind == 1) PG_FW(1, s, w, h, kw_);                                         \
        else PG_FW(2, s, w, h, kw_);                                                        \
    } while (0)
    if (kh == 2 && kw == 2) {
        if (stream) { if (wide) PG_FW_KIND(1, 1, 2, 2); else PG_FW_KIND(1, 0, 2, 2); }
        else { if (wide) PG_FW_KIND(0, 1, 2, 2); else PG_FW_KIND(0, 0, 2, 2); }
    } else {
        if (stream) PG_FW_KIND(1, wide, kh, kw);
        else PG_FW_KIND(0, wide, kh, kw);
    }
#undef PG_FW_KIND
#undef PG_FW
}

/* one copy of the gather forms' entry points per instruction set */
#define PG_GATHER_ISA(SFX, ATTR, ISA)                                                       \
ATTR static int pg_wcode_plane_##SFX(uint8_t *code, const void *j, int j64, ptrdiff_t Ho,   \
                                     ptrdiff_t Wo, ptrdiff_t js, ptrdiff_t W, ptrdiff_t kh) \
{                                                                                           \
    return pg_wcode_plane_in(code, j, j64, Ho, Wo, js, W, kh, ISA);                         \
}                                                                                           \
ATTR static void pg_wrows_##SFX(void *dst, ptrdiff_t rs, ptrdiff_t ds, const void *g,       \
                                ptrdiff_t gs, int kind, int stream, const uint8_t *code,    \
                                ptrdiff_t Wo, ptrdiff_t n, ptrdiff_t r0, ptrdiff_t r1,      \
                                ptrdiff_t chunk)                                            \
{                                                                                           \
    pg_wrows_in(dst, rs, ds, g, gs, kind, stream, code, Wo, n, r0, r1, chunk, ISA);         \
}                                                                                           \
ATTR static int pg_lcode_row_##SFX(uint8_t *code, const void *j, int j64, ptrdiff_t js,     \
                                   ptrdiff_t Wo, ptrdiff_t L, ptrdiff_t base, ptrdiff_t W,  \
                                   ptrdiff_t kh, ptrdiff_t kw)                              \
{                                                                                           \
    return pg_lcode_row_in(code, j, j64, js, Wo, L, base, W, kh, kw, ISA);                  \
}                                                                                           \
ATTR static int pg_lcode_rowt_##SFX(uint8_t *code, const void *j, int j64, ptrdiff_t jl,    \
                                    ptrdiff_t Wo, ptrdiff_t L, ptrdiff_t base, ptrdiff_t W, \
                                    ptrdiff_t kh, ptrdiff_t kw, ptrdiff_t pf)               \
{                                                                                           \
    return pg_lcode_rowt_in(code, j, j64, jl, Wo, L, base, W, kh, kw, pf, ISA);             \
}                                                                                           \
ATTR static void pg_lanes_gather_##SFX(void *t, const void *g, ptrdiff_t gl, ptrdiff_t Wo,  \
                                       ptrdiff_t L, ptrdiff_t es, ptrdiff_t pf)             \
{                                                                                           \
    pg_lanes_gather_in(t, g, gl, Wo, L, es, pf, ISA);                                       \
}                                                                                           \
ATTR static void pg_lwrite_row_##SFX(void *dst, ptrdiff_t rs, ptrdiff_t xs, const void *g,  \
                                     ptrdiff_t gs, const uint8_t *code, int kind,           \
                                     int stream, ptrdiff_t Wo, ptrdiff_t L, ptrdiff_t kh,   \
                                     ptrdiff_t kw)                                          \
{                                                                                           \
    pg_lwrite_row_in(dst, rs, xs, g, gs, code, kind, stream, Wo, L, kh, kw, ISA);           \
}                                                                                           \
ATTR static int pg_fcode_row_##SFX(uint8_t *code, const void *j, int j64, ptrdiff_t n,      \
                                   ptrdiff_t L, ptrdiff_t base, ptrdiff_t W, ptrdiff_t kh,  \
                                   ptrdiff_t kw)                                            \
{                                                                                           \
    return pg_fcode_row_in(code, j, j64, n, L, base, W, kh, kw, ISA);                       \
}                                                                                           \
ATTR static void pg_fwrite_row_##SFX(void *dst, ptrdiff_t rs, const void *g,                \
                                     const uint8_t *code, const int64_t *sp, ptrdiff_t n,   \
                                     int kind, int stream, int wide, ptrdiff_t kh,          \
                                     ptrdiff_t kw)                                          \
{                                                                                           \
    pg_fwrite_row_in(dst, rs, g, code, sp, n, kind, stream, wide, kh, kw, ISA);             \
}

PG_GATHER_ISA(base, , PG_ISA_BASE)
#if PG_X86_DISPATCH
PG_GATHER_ISA(avx2, PG_TARGET_AVX2_F16C, PG_ISA_AVX2)
#endif
#endif

/* The gather forms' entry points: the AVX2 copies where the CPU has AVX2 and F16C (and they
 * are allowed), else the baseline ones.  Without the vector layer the codes' passes answer
 * 0 (not every index in its own window) and the caller scatters every plane; the write
 * passes run only for planes a codes' pass answered 1 for, under the same choice. */
static inline int pg_gather_isa(void)
{
#if PG_X86_DISPATCH
    if (pg_have_avx2() && pg_have_f16c()) return 2;
#endif
    return PG_VEC;
}

#if PG_X86_DISPATCH
#define PG_GATHER(F, ARGS)                                                                  \
    return pg_gather_isa() == 2 ? F##_avx2 ARGS : F##_base ARGS
#define PG_GWRITE(F, ARGS)                                                                  \
    do {                                                                                    \
        if (pg_gather_isa() == 2) F##_avx2 ARGS;                                            \
        else F##_base ARGS;                                                                 \
    } while (0)
#elif PG_VEC
#define PG_GATHER(F, ARGS) return F##_base ARGS
#define PG_GWRITE(F, ARGS) F##_base ARGS
#else
#define PG_GATHER(F, ARGS) return 0
#define PG_GWRITE(F, ARGS) (void)0
#endif

static int pg_wcode_plane(uint8_t *code, const void *j, int j64, ptrdiff_t Ho, ptrdiff_t Wo,
                          ptrdiff_t js, ptrdiff_t W, ptrdiff_t kh)
{
    (void)code; (void)j; (void)j64; (void)Ho; (void)Wo; (void)js; (void)W; (void)kh;
    PG_GATHER(pg_wcode_plane, (code, j, j64, Ho, Wo, js, W, kh));
}

static int pg_lcode_row(uint8_t *code, const void *j, int j64, ptrdiff_t js, ptrdiff_t Wo,
                        ptrdiff_t L, ptrdiff_t base, ptrdiff_t W, ptrdiff_t kh, ptrdiff_t kw)
{
    (void)code; (void)j; (void)j64; (void)js; (void)Wo; (void)L; (void)base; (void)W;
    (void)kh; (void)kw;
    PG_GATHER(pg_lcode_row, (code, j, j64, js, Wo, L, base, W, kh, kw));
}

static int pg_lcode_rowt(uint8_t *code, const void *j, int j64, ptrdiff_t jl, ptrdiff_t Wo,
                         ptrdiff_t L, ptrdiff_t base, ptrdiff_t W, ptrdiff_t kh, ptrdiff_t kw,
                         ptrdiff_t pf)
{
    (void)code; (void)j; (void)j64; (void)jl; (void)Wo; (void)L; (void)base; (void)W;
    (void)kh; (void)kw; (void)pf;
    PG_GATHER(pg_lcode_rowt, (code, j, j64, jl, Wo, L, base, W, kh, kw, pf));
}

static int pg_fcode_row(uint8_t *code, const void *j, int j64, ptrdiff_t n, ptrdiff_t L,
                        ptrdiff_t base, ptrdiff_t W, ptrdiff_t kh, ptrdiff_t kw)
{
    (void)code; (void)j; (void)j64; (void)n; (void)L; (void)base; (void)W; (void)kh; (void)kw;
    PG_GATHER(pg_fcode_row, (code, j, j64, n, L, base, W, kh, kw));
}

static void pg_lanes_gather(void *t, const void *g, ptrdiff_t gl, ptrdiff_t Wo, ptrdiff_t L,
                            ptrdiff_t es, ptrdiff_t pf)
{
    (void)t; (void)g; (void)gl; (void)Wo; (void)L; (void)es; (void)pf;
    PG_GWRITE(pg_lanes_gather, (t, g, gl, Wo, L, es, pf));
}

static void pg_lwrite_row(void *dst, ptrdiff_t rs, ptrdiff_t xs, const void *g, ptrdiff_t gs,
                          const uint8_t *code, int kind, int stream, ptrdiff_t Wo, ptrdiff_t L,
                          ptrdiff_t kh, ptrdiff_t kw)
{
    (void)dst; (void)rs; (void)xs; (void)g; (void)gs; (void)code; (void)kind; (void)stream;
    (void)Wo; (void)L; (void)kh; (void)kw;
    PG_GWRITE(pg_lwrite_row, (dst, rs, xs, g, gs, code, kind, stream, Wo, L, kh, kw));
}

static void pg_fwrite_row(void *dst, ptrdiff_t rs, const void *g, const uint8_t *code,
                          const int64_t *sp, ptrdiff_t n, int kind, int stream, int wide,
                          ptrdiff_t kh, ptrdiff_t kw)
{
    (void)dst; (void)rs; (void)g; (void)code; (void)sp; (void)n; (void)kind; (void)stream;
    (void)wide; (void)kh; (void)kw;
    PG_GWRITE(pg_fwrite_row, (dst, rs, g, code, sp, n, kind, stream, wide, kh, kw));
}

static void pg_wrows(void *dst, ptrdiff_t rs, ptrdiff_t ds, const void *g, ptrdiff_t gs,
                     int kind, int stream, const uint8_t *code, ptrdiff_t Wo, ptrdiff_t n,
                     ptrdiff_t r0, ptrdiff_t r1, ptrdiff_t chunk)
{
    (void)dst; (void)rs; (void)ds; (void)g; (void)gs; (void)kind; (void)stream; (void)code;
    (void)Wo; (void)n; (void)r0; (void)r1; (void)chunk;
    PG_GWRITE(pg_wrows, (dst, rs, ds, g, gs, kind, stream, code, Wo, n, r0, r1, chunk));
}
#undef PG_GATHER
#undef PG_GWRITE

#endif

/*
 * One work item of the separable average-pool gradient for the common configuration:
 * float32, one lane (L = 1), contiguous grad_output and grad_input rows, edge columns of
 * the W expansion through the tap table, ordinary stores.  It does exactly the arithmetic
 * of _gather_item in _kernels.pyx (the same operations in the same order, so the same
 * bits), as one C function per instruction set, so that the per-row loops inline and
 * vectorise and nothing is dispatched per row.  For float32 outputs larger than the cache,
 * `region` forms the item's rows in a small stage and streams its whole lines (pg_stream.h's
 * pg_stage).  Where the W interior has period 1 or 2, the item forms its E rows in one loop
 * per pair of phase term counts (pg_item_erows), and a grad_input row under one D window
 * finds its E rows without the cover table.  Measurements: docs/performance.md.
 *
 * The loops are written once against the vector layer (pg_vec.h), with a constant `isa`,
 * and built per instruction set: AVX2 where the CPU has it, else the baseline (SSE2, NEON).
 * The float64 items (pg_fused64) are built for AVX2 only: they feed pg_stream.h's
 * register-fed writer, which is AVX2 code, and the plan takes them only there.
 *
 *   E[od, oh][w] = k(od, oh) * sum over the taps of w of (grad_output[od, oh, ow] * ww[ow])
 *   grad_input[d, h] = sum, left to right, of the E rows whose windows hold (d, h)
 */
#ifndef PG_ITEM_H
#define PG_ITEM_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "pg_cpu.h"
#include "pg_expand.h"
#include "pg_stream.h"
#include "pg_vec.h"

typedef struct {
    ptrdiff_t W, Wo;
    ptrdiff_t gs2, gs3;                    /* grad_output D and H strides (elements) */
    ptrdiff_t xs2, xs3;                    /* grad_input D and H strides (elements) */
    const int64_t *dlo, *dhi, *hlo, *hhi;  /* covering output ranges per input index */
    const int64_t *wtap;                   /* m taps per input column */
    ptrdiff_t m;
    ptrdiff_t P, q0, q1;                   /* polyphase interior [P*q0, P*q1), P = 0: none */
    ptrdiff_t gap;        /* how far apart a phase's terms are (1; the lanes of a merged
                           * channels-last row, P = 1 or 2: pg_expand.h) */
    ptrdiff_t qx0, qx1;   /* the interior of the E-row formers (pg_item_erows, _h16):
                           * [q0, q1) widened over edge columns whose windows the row's
                           * ends cut off (_plan.poly_padded), read with -0.0 beyond them */
    ptrdiff_t epad;       /* the slots they read beyond each side of a row (at least 2,
                           * at most PG_POLY_MAX_M - 1: a phase's terms less one; times gap
                           * for merged lanes) */
    ptrdiff_t gblk;       /* their grow block, at E + gblk: epad floats, then Wo + 2 * epad
                           * for each E row of the item (gblk_rows) or for one */
    int gblk_rows;        /* all the item's rows go into the grow block before they are
                           * expanded (else each row right before) */
    const int64_t *pc, *pm;
    const float *wd, *wh, *ww;             /* ww NULL: no W weights */
    int region;                            /* float32: stream an item's rows as one region */
    ptrdiff_t stage, stage_cap;            /* region: its stage (pg_stream.h), stage floats
                                            * past E, stage_cap bytes (in PG_STAGE_MEM) */
    int single;   /* one tap per column (m = 1) and at most one covering window per D and H
                   * index: each grad_input value is one (rounded, for 16-bit) product */
    int dup2;     /* single, and column w's tap is w / 2 (kernel = stride = 2 along W) */
    int pair_nt;  /* dup2 or spread rows: pairs of rows stored with streaming stores (W
                   * and the row step 16-byte multiples, an output larger than the
                   * last-level cache) */
    const int64_t *wrun;   /* m = 1: where each run of equal taps starts, then W; or NULL */
    ptrdiff_t nrun;
    const int64_t *hrun;   /* for each H index, how many rows from it on (to H) have the
                            * same covering windows */
    const int64_t *hstep;  /* ... and how many have them moved on by one row each */
    ptrdiff_t step_rows;   /* the most rows of a step run formed together in the stage */
    int hsteps;            /* some step run is longer than one row */
    int sent;              /* some tap is a sentinel slot (an empty cover, a padding tap) */
    const int64_t *spread; /* m = 1: the 16-bit spread table (_plan.spread), or NULL */
    int spread_wide;       /* its blocks take from 16 values (else 8) */
    const int64_t *spread32;   /* m = 1: the float32 spread table, or NULL */
    int spread32_wide;
    const int64_t *tspread;    /* m >= 2, P = 0: the tap spread (_plan.tap_spread), or NULL */
    int tspread_wide;
} pg_item_f32;

/* A float64 item's tables for the fused rows (pg_fused_avx2_f64, below) */
typedef struct {
    ptrdiff_t P, W, Wo, gs2, gs3, xs2, xs3, qx1, q1, epad;
    const int64_t *dlo, *dhi, *hlo, *hhi, *pc, *pm;
    const double *wd, *wh, *ww;   /* ww NULL: no W weights */
    int strips;                   /* stride 1 in strips (pg_fused1_strips_f64) */
    int nt;                       /* streamed (else ordinary stores: in the cache) */
} pg_fused64;

/* The items' entry points.  Their bodies are pyx/pg_item.c's, a translation unit of its own
 * (PG_ITEM_BODIES), so that the build compiles them beside the rest. */
PG_UNIT int pg_fused_f64_run(const pg_fused64 *f, const double *gbase, double *xbase,
                             ptrdiff_t d0, ptrdiff_t d1, ptrdiff_t h0, ptrdiff_t h1, double *G);
PG_UNIT int pg_item_h16_run(const pg_item_f32 *g, const uint16_t *gbase, uint16_t *xbase,
                            ptrdiff_t d0, ptrdiff_t d1, ptrdiff_t h0, ptrdiff_t h1, float *grow,
                            float *E, const float **rows, float *tmp, int bf16);
PG_UNIT void pg_item_f32_run(const pg_item_f32 *g, const float *gbase, float *xbase,
                             ptrdiff_t d0, ptrdiff_t d1, ptrdiff_t h0, ptrdiff_t h1, float *grow,
                             float *E, const float **rows, float *tmp);

#ifdef PG_ITEM_BODIES

/* the rows from ih on, before h1, with the same covering H windows as row ih */
static inline ptrdiff_t pg_item_hrun(const pg_item_f32 *g, ptrdiff_t ih, ptrdiff_t h1)
{
    const ptrdiff_t c = (ptrdiff_t)g->hrun[ih];
    return c < h1 - ih ? c : h1 - ih;
}

/* the planes from idd on, before d1, with the same covering D windows as plane idd (the
 * same E rows, so the same rows of grad_input) */
static inline ptrdiff_t pg_item_drun(const pg_item_f32 *g, ptrdiff_t idd, ptrdiff_t d1)
{
    ptrdiff_t n = 1;
    while (idd + n < d1 && g->dlo[idd + n] == g->dlo[idd] && g->dhi[idd + n] == g->dhi[idd])
        n++;
    return n;
}

/* PG_ROWS(isa, pg_runs_f32, args): the copy of a function for the instruction set isa */
#if PG_X86_DISPATCH
#define PG_ROWS(isa, name, ...) \
    ((isa) == PG_ISA_AVX2 ? name##_avx2(__VA_ARGS__) : name##_base(__VA_ARGS__))
#else
#define PG_ROWS(isa, name, ...) name##_base(__VA_ARGS__)
#endif

#if PG_VEC
/*
 * A one-tap row (m = 1) through its runs of equal taps (g->wrun): dst[j] = src[tap[j]],
 * times k where `scaled`.  Each run's value is formed once, broadcast and stored eight
 * columns at a time: a run's last store overlaps the one before it, and a run shorter than
 * eight stores on into the next run, which then overwrites those columns.  From the first
 * run with no room for a whole store before W, columns go one at a time.  The same values
 * (the same product, once per run) as the column loop, in a few instructions per run:
 * adaptive windows are runs of W / Wo columns.
 */
PG_VEC_INLINE void pg_runs_f32_body(float *PG_RESTRICT dst, const float *PG_RESTRICT src,
                                    const int64_t *tap, const int64_t *run, ptrdiff_t nrun,
                                    ptrdiff_t W, float k, int scaled, int isa)
{
    ptrdiff_t i = 0;
    for (; i < nrun && run[i] + 8 <= W; i++) {
        const ptrdiff_t s = run[i], e = run[i + 1];
        const float x = src[tap[s]];
        const pg_f8 v = pg_f8_set1_isa(scaled ? k * x : x, isa);
        ptrdiff_t j = s;
        for (; j + 8 <= e; j += 8) pg_f8_store(dst + j, v);
        if (j < e) pg_f8_store(dst + (e - s >= 8 ? e - 8 : j), v);
    }
    for (ptrdiff_t j = i < nrun ? run[i] : W; j < W; j++)
        dst[j] = scaled ? k * src[tap[j]] : src[tap[j]];
}

/* the same for 16-bit values (no scaling: they are rounded already) */
PG_VEC_INLINE void pg_runs_u16_body(uint16_t *PG_RESTRICT dst, const uint16_t *PG_RESTRICT src,
                                    const int64_t *tap, const int64_t *run, ptrdiff_t nrun,
                                    ptrdiff_t W, int isa)
{
    ptrdiff_t i = 0;
    for (; i < nrun && run[i] + 8 <= W; i++) {
        const ptrdiff_t s = run[i], e = run[i + 1];
        const pg_h8 v = pg_h8_set1(src[tap[s]], isa);
        ptrdiff_t j = s;
        for (; j + 8 <= e; j += 8) pg_h8_store(dst + j, v);
        if (j < e) pg_h8_store(dst + (e - s >= 8 ? e - 8 : j), v);
    }
    for (ptrdiff_t j = i < nrun ? run[i] : W; j < W; j++) dst[j] = src[tap[j]];
}

/* 32 bytes to dst, and to dst2 where it is not NULL; where nt, streamed as two 16-byte
 * halves (dst and dst2 16-byte aligned) */
PG_VEC_INLINE void pg_store_pair(void *dst, void *dst2, pg_f8 v, int nt)
{
    if (nt) {
        const pg_h8 lo = pg_f8_lo(v), hi = pg_f8_hi(v);
        pg_h8_stream(dst, lo);
        pg_h8_stream((char *)dst + 16, hi);
        if (dst2) {
            pg_h8_stream(dst2, lo);
            pg_h8_stream((char *)dst2 + 16, hi);
        }
        return;
    }
    pg_f8_store(dst, v);
    if (dst2) pg_f8_store(dst2, v);
}

/* the 8 values of a spread block (5 int64 at t: the base, then 8 int32 offsets from it),
 * the offsets to *ix */
PG_VEC_INLINE pg_f8 pg_spread8(const float *src, const int64_t *t, int wide, pg_i8 *ix,
                               int isa)
{
    memcpy(ix, t + 1, 32);
    const float *s = src + t[0];
    pg_f8 v = pg_f8_permute(pg_f8_load(s), *ix, isa);
    if (wide)   /* bit 3 of the offset: the second 8 */
        v = pg_f8_blend_sign(v, pg_f8_permute(pg_f8_load(s + 8), *ix, isa),
                        (pg_i8)((pg_u8)*ix << 28), isa);
    return v;
}

/*
 * A one-tap float32 row through its spread table (_plan.spread, W >= 8): dst[j] =
 * k * src[tap[j]], eight columns at a time (the last block overlapping
 * the one before), each block permuted from the 8 values at its base, or from the 16 there
 * (`wide`: two permutes, blended on bit 3 of the index).  The same products as the column
 * loop, for runs shorter than a store (channels-last rows of a few lanes merged into one).
 */
PG_VEC_INLINE void pg_spread32_row_body(float *PG_RESTRICT dst, const float *PG_RESTRICT src,
                                        const int64_t *sp, ptrdiff_t W, int wide, float k,
                                        int isa)
{
    const pg_f8 kv = pg_f8_set1_isa(k, isa);
    for (ptrdiff_t j = 0;; j += 8, sp += 5) {
        if (j + 8 > W) j = W - 8;
        pg_i8 ix;
        const pg_f8 v = pg_spread8(src, sp, wide, &ix, isa);
        pg_f8_store(dst + j, kv * v);
        if (j + 8 == W) break;
    }
}

/* the same, unscaled, to the rows dst and dst2 (or dst alone where dst2 is NULL), streamed
 * where nt (pg_store_pair) */
PG_VEC_INLINE void pg_spread32_rows(float *dst, float *dst2, const float *PG_RESTRICT src,
                                    const int64_t *sp, ptrdiff_t W, int wide, int nt, int isa)
{
    for (ptrdiff_t j = 0;; j += 8, sp += 5) {
        if (j + 8 > W) j = W - 8;
        pg_i8 ix;
        const pg_f8 v = pg_spread8(src, sp, wide, &ix, isa);
        pg_store_pair(dst + j, dst2 ? dst2 + j : NULL, v, nt);
        if (j + 8 == W) break;
    }
}

/*
 * A row of m >= 2 taps a column through its tap spread (_plan.tap_spread, W >= 8): the
 * column loop's sums, eight columns at a time (the last block overlapping the one before),
 * each tap slot permuted from the 8 or 16 values at its base as in pg_spread32_row.  Bit 31
 * of an offset marks a sentinel: +0.0 for a first tap, and a later one leaves the sum as it
 * is (x + -0.0 is x).  The same bits as the column loop: rows of a few channels-last lanes
 * merged into one, whose taps have no polyphase form.
 */
PG_VEC_INLINE void pg_tspread32_row_body(float *PG_RESTRICT dst, const float *PG_RESTRICT src,
                                         const int64_t *sp, ptrdiff_t W, ptrdiff_t m, int wide,
                                         float k, int isa)
{
    const pg_f8 kv = pg_f8_set1_isa(k, isa), zero = pg_f8_set1_isa(0.0f, isa);
    for (ptrdiff_t j = 0;; j += 8, sp += 5 * m) {
        if (j + 8 > W) j = W - 8;
        pg_i8 ix;
        pg_f8 v = pg_spread8(src, sp, wide, &ix, isa);
        v = pg_f8_blend_sign(v, zero, ix, isa);
        for (ptrdiff_t t = 1; t < m; t++) {
            const pg_f8 u = pg_spread8(src, sp + 5 * t, wide, &ix, isa);
            v = pg_f8_blend_sign(v + u, v, ix, isa);
        }
        pg_f8_store(dst + j, kv * v);
        if (j + 8 == W) break;
    }
}

/* the row functions above as functions of their own (left to the compiler to inline), one
 * per instruction set */
#define PG_ROWS_ISA(SFX, ATTR, ISA)                                                         \
ATTR static inline void pg_runs_f32_##SFX(float *PG_RESTRICT dst,                           \
                                          const float *PG_RESTRICT src, const int64_t *tap, \
                                          const int64_t *run, ptrdiff_t nrun, ptrdiff_t W,  \
                                          float k, int scaled)                              \
{                                                                                           \
    pg_runs_f32_body(dst, src, tap, run, nrun, W, k, scaled, ISA);                          \
}                                                                                           \
ATTR static inline void pg_runs_u16_##SFX(uint16_t *PG_RESTRICT dst,                        \
                                          const uint16_t *PG_RESTRICT src,                  \
                                          const int64_t *tap, const int64_t *run,           \
                                          ptrdiff_t nrun, ptrdiff_t W)                      \
{                                                                                           \
    pg_runs_u16_body(dst, src, tap, run, nrun, W, ISA);                                     \
}                                                                                           \
ATTR static inline void pg_spread32_row_##SFX(float *PG_RESTRICT dst,                       \
                                              const float *PG_RESTRICT src,                 \
                                              const int64_t *sp, ptrdiff_t W, int wide,     \
                                              float k)                                      \
{                                                                                           \
    pg_spread32_row_body(dst, src, sp, W, wide, k, ISA);                                    \
}                                                                                           \
ATTR static inline void pg_tspread32_row_##SFX(float *PG_RESTRICT dst,                      \
                                               const float *PG_RESTRICT src,                \
                                               const int64_t *sp, ptrdiff_t W, ptrdiff_t m, \
                                               int wide, float k)                           \
{                                                                                           \
    pg_tspread32_row_body(dst, src, sp, W, m, wide, k, ISA);                                \
}

PG_ROWS_ISA(base, , PG_ISA_BASE)
#if PG_X86_DISPATCH
PG_ROWS_ISA(avx2, PG_TARGET_AVX2, PG_ISA_AVX2)
#endif
#endif

/* a grad_output row (already in grow, W-weighted, with the two sentinel slots after it)
 * expanded to the input width, times k: edge columns through the taps, the interior in
 * polyphase form */
PG_ALWAYS_INLINE
static inline void pg_item_expand(const pg_item_f32 *g, const float *PG_RESTRICT grow,
                                  float *PG_RESTRICT e, float k, float *tmp, int isa)
{
    const ptrdiff_t W = g->W, m = g->m;
#if PG_VEC
    if (!g->P && g->spread32) {   /* one tap per column, short runs */
        PG_ROWS(isa, pg_spread32_row, e, grow, g->spread32, W, g->spread32_wide, k);
        return;
    }
    if (!g->P && g->tspread) {   /* several taps per column, no polyphase interior */
        PG_ROWS(isa, pg_tspread32_row, e, grow, g->tspread, W, m, g->tspread_wide, k);
        return;
    }
    if (!g->P && g->wrun) {   /* one tap per column, no polyphase interior */
        PG_ROWS(isa, pg_runs_f32, e, grow, g->wtap, g->wrun, g->nrun, W, k, 1);
        return;
    }
#endif
    (void)isa;
    const ptrdiff_t e0 = g->P ? g->P * g->q0 : W, e1 = g->P ? g->P * g->q1 : W;
    ptrdiff_t j;
    for (int side = 0; side < 2; side++) {
        const ptrdiff_t c0 = side ? e1 : 0, c1 = side ? W : e0;
        const int64_t *tp = g->wtap + c0 * m;
        if (m == 1) {
            for (j = c0; j < c1; j++, tp += 1) e[j] = k * grow[tp[0]];
        } else if (m == 2) {
            for (j = c0; j < c1; j++, tp += 2) e[j] = k * (grow[tp[0]] + grow[tp[1]]);
        } else if (m == 3) {
            for (j = c0; j < c1; j++, tp += 3) e[j] = k * ((grow[tp[0]] + grow[tp[1]]) + grow[tp[2]]);
        } else {
            for (j = c0; j < c1; j++, tp += m) {
                float s = grow[tp[0]];
                for (ptrdiff_t t = 1; t < m; t++) s = s + grow[tp[t]];
                e[j] = k * s;
            }
        }
    }
    if (!g->P)
        return;
#if PG_X86_DISPATCH   /* the AVX2 item: pg_expand.h's AVX2 interiors, no second dispatch */
    if (isa == PG_ISA_AVX2 && g->P == 1 && g->pm[0] >= 1) {
        pg_poly1_avx2_f32(grow + g->q0 + g->pc[0], g->pm[0], g->gap, e + g->q0,
                          g->q1 - g->q0, k);
        return;
    }
    if (isa == PG_ISA_AVX2 && pg_poly2_avx2_ok(g->P, g->pm) && g->gap == 1) {
        const ptrdiff_t q0 = g->q0;
        pg_poly2_avx2_f32(grow + q0 + g->pc[0], grow + q0 + g->pc[1], g->pm[0], g->pm[1],
                          e + 2 * q0, g->q1 - q0, k);
        return;
    }
#endif
    pg_expand_poly_f32(grow, e, g->P, g->q0, g->q1 - g->q0, g->pc, g->pm, g->gap, tmp, k);
}

#if PG_VEC
/*
 * The item's E rows where the W interior is period 1 or 2 (pg_item_erows_ok, at least
 * eight columns of each phase) and grad_output rows are at least eight wide:
 * pg_item_expand's arithmetic for each row, one loop per phase term count (or pair of
 * them: pg_expand.h's pg_poly1 and pg_poly2 blocks inline), with the row loop's
 * fields in registers.  The edge columns sum their taps left to right, as pg_item_expand
 * does for every m.
 *
 * The interior is the one widened over the edge columns that the row's ends cut off
 * (g->qx0, g->qx1, _plan.poly_padded): it reads -0.0 from the g->epad slots before and
 * after each row for the missing terms.  Where rows are short (g->gblk_rows) all the
 * item's grad_output rows go into the grow block first (W-weighted, with their slots),
 * then are expanded from there: expanding each row right after storing it had most of its
 * loads wait for the stores (a load that spans two stores still in flight is not forwarded
 * from them).
 */
#define PG_EROW_GROW(J)                                                                     \
    {                                                                                       \
        pg_f8 v_ = pg_f8_load(src + (J));                                                   \
        if (ww) v_ = v_ * pg_f8_load(ww + (J));                                             \
        pg_f8_store(grow + (J), v_);                                                        \
    }
/* the E rows of grad_output rows of SRC_T, each put in the grow block by FILL, the
 * interior expanded by INTERIOR (from a, b to dst, times vk) */
#define PG_EROWS_ROWS(SRC_T, FILL, INTERIOR, PD)                                            \
    {                                                                                       \
        const ptrdiff_t pd = (PD);                                                          \
        float *grow = gblk + pd;                                                            \
        for (ptrdiff_t od = od0; od < od1 && gstep; od++) {                                 \
            for (ptrdiff_t oh = oh0; oh < oh1; oh++, grow += gstep) {                       \
                const SRC_T *PG_RESTRICT src = gbase + od * gs2 + oh * gs3;                 \
                FILL                                                                        \
                /* its slots after it and the next row's before it */                       \
                grow[Wo] = padr;                                                            \
                for (ptrdiff_t t_ = 1; t_ < 2 * pd; t_++) grow[Wo + t_] = -0.0f;            \
            }                                                                               \
        }                                                                                   \
        grow = gblk + pd;                                                                   \
        grow[Wo] = padr;                                                                    \
        for (ptrdiff_t t_ = 1; t_ < pd; t_++) grow[Wo + t_] = -0.0f;                        \
        for (ptrdiff_t od = od0; od < od1; od++) {                                          \
            for (ptrdiff_t oh = oh0; oh < oh1; oh++, e += W, grow += gstep) {               \
                const float k = wd[od] * wh[oh];                                            \
                if (!gstep) {                                                               \
                    const SRC_T *PG_RESTRICT src = gbase + od * gs2 + oh * gs3;             \
                    FILL                                                                    \
                }                                                                           \
                pg_item_edges(e, grow, wtap, m, 0, e0, k);                                  \
                pg_item_edges(e, grow, wtap, m, e1, W, k);                                  \
                const pg_f8 vk = pg_f8_set1_isa(k, isa);                                    \
                float *const dst = e + e0;                                                  \
                const float *a = grow + q0 + pc0, *b = grow + q0 + pc1;                     \
                (void)b;                                                                    \
                INTERIOR                                                                    \
            }                                                                               \
        }                                                                                   \
    }
#define PG_FILL_F32 PG_FOR8_OVERLAP(j, Wo, PG_EROW_GROW(j))
/* 16-bit rows widened and W-weighted as the general 16-bit loop loads them */
#define PG_FILL_H16 pg_item_load_h16(grow, src, ww, Wo, bf16, isa);
/* the slots beyond a row: 2 (a constant) where the phases have at most 3 terms */
#define PG_EROWS_PAD(M) ((M) <= 3 ? 2 : g->epad)
#define PG_EROWS2_F32(MA, MB)                                                               \
    PG_EROWS_ROWS(float, PG_FILL_F32, PG_POLY2_ISA_LOOP(MA, MB),                           \
                  PG_EROWS_PAD((MA) > (MB) ? (MA) : (MB)))
#define PG_EROWS2_H16(MA, MB)                                                               \
    PG_EROWS_ROWS(uint16_t, PG_FILL_H16, PG_POLY2_ISA_LOOP(MA, MB),                        \
                  PG_EROWS_PAD((MA) > (MB) ? (MA) : (MB)))
#define PG_EROWS1_F32(M) PG_EROWS_ROWS(float, PG_FILL_F32, PG_POLY1_LOOP(M), PG_EROWS_PAD(M))
#define PG_EROWS1_H16(M)                                                                    \
    PG_EROWS_ROWS(uint16_t, PG_FILL_H16, PG_POLY1_LOOP(M), PG_EROWS_PAD(M))
/* periods 1 and 2 with the terms gap apart (merged channels-last lanes): g->epad slots
 * (pad * gap) */
#define PG_EROWS1S_F32(M) PG_EROWS_ROWS(float, PG_FILL_F32, PG_POLY1S_LOOP(M), g->epad)
#define PG_EROWS1S_H16(M) PG_EROWS_ROWS(uint16_t, PG_FILL_H16, PG_POLY1S_LOOP(M), g->epad)
#define PG_EROWS2S_F32(MA, MB)                                                              \
    PG_EROWS_ROWS(float, PG_FILL_F32, PG_POLY2S_LOOP(MA, MB), g->epad)
#define PG_EROWS2S_H16(MA, MB)                                                              \
    PG_EROWS_ROWS(uint16_t, PG_FILL_H16, PG_POLY2S_LOOP(MA, MB), g->epad)
/* the fields both E-row formers use, as locals.  A row's epad slots after it: +0.0 (the
 * tap tables' n_out slot) where the interior is not widened past the row's end, then -0.0
 * (the tap tables' n_out + 1 slot and beyond), then the next row's epad slots before it,
 * -0.0 */
#define PG_EROWS_LOCALS                                                                     \
    const ptrdiff_t W = g->W, Wo = g->Wo, m = g->m, gs2 = g->gs2, gs3 = g->gs3, P = g->P;   \
    const ptrdiff_t q0 = g->qx0, nq = g->qx1 - g->qx0, e0 = P * g->qx0, e1 = P * g->qx1;    \
    const ptrdiff_t pc0 = g->pc[0], pc1 = P > 1 ? g->pc[1] : 0, gap = g->gap;               \
    const ptrdiff_t gstep = g->gblk_rows ? Wo + 2 * g->epad : 0;                            \
    const int64_t *PG_RESTRICT wtap = g->wtap;                                              \
    const float *PG_RESTRICT ww = g->ww, *PG_RESTRICT wd = g->wd, *PG_RESTRICT wh = g->wh;  \
    float *const gblk = E + g->gblk;                                                        \
    const float padr = g->qx1 > g->q1 ? -0.0f : 0.0f;                                       \
    float *PG_RESTRICT e = E;                                                               \
    for (ptrdiff_t t_ = 0; t_ < g->epad; t_++) gblk[t_] = -0.0f;

/* columns j0..j1 of an E row through their m taps each */
PG_ALWAYS_INLINE
static inline void pg_item_edges(float *PG_RESTRICT e, const float *PG_RESTRICT grow,
                                 const int64_t *PG_RESTRICT wtap, ptrdiff_t m, ptrdiff_t j0,
                                 ptrdiff_t j1, float k)
{
    const int64_t *tp = wtap + j0 * m;
    if (m == 2) {
        for (ptrdiff_t j = j0; j < j1; j++, tp += 2) e[j] = k * (grow[tp[0]] + grow[tp[1]]);
        return;
    }
    for (ptrdiff_t j = j0; j < j1; j++, tp += m) {
        float s = grow[tp[0]];
        for (ptrdiff_t t = 1; t < m; t++) s = s + grow[tp[t]];
        e[j] = k * s;
    }
}

/* a 16-bit grad_output row widened and W-weighted (pg_stream.h's loads, out of line) */
PG_VEC_INLINE void pg_item_load_h16(float *grow, const uint16_t *src, const float *ww,
                                    ptrdiff_t Wo, int bf16, int isa)
{
#if PG_X86_DISPATCH
    if (isa == PG_ISA_AVX2) {
        if (bf16) pg_load_bf16_avx2(grow, src, ww, Wo);
        else pg_load_f16_avx2(grow, src, ww, Wo);
        return;
    }
#endif
    (void)isa;
    if (bf16) pg_load_bf16_base(grow, src, ww, Wo);
    else pg_load_f16_base(grow, src, ww, Wo);
}

PG_VEC_INLINE void pg_item_erows_body(const pg_item_f32 *g, const float *gbase, ptrdiff_t od0,
                                      ptrdiff_t od1, ptrdiff_t oh0, ptrdiff_t oh1,
                                      float *PG_RESTRICT E, int isa)
{
    PG_EROWS_LOCALS
    if (P == 1 && gap > 1)
        PG_POLY1_CASES(g->pm[0], PG_EROWS1S_F32)
    else if (P == 1)
        PG_POLY1_CASES(g->pm[0], PG_EROWS1_F32)
    else if (gap > 1)
        PG_POLY2_CASES(g->pm[0], g->pm[1], PG_EROWS2S_F32)
    else
        PG_POLY2_CASES(g->pm[0], g->pm[1], PG_EROWS2_F32)
}

/* the same E rows from 16-bit grad_output rows */
PG_VEC_INLINE void pg_item_erows_h16_body(const pg_item_f32 *g, const uint16_t *gbase,
                                          ptrdiff_t od0, ptrdiff_t od1, ptrdiff_t oh0,
                                          ptrdiff_t oh1, float *PG_RESTRICT E, int bf16, int isa)
{
    PG_EROWS_LOCALS
    if (P == 1 && gap > 1)
        PG_POLY1_CASES(g->pm[0], PG_EROWS1S_H16)
    else if (P == 1)
        PG_POLY1_CASES(g->pm[0], PG_EROWS1_H16)
    else if (gap > 1)
        PG_POLY2_CASES(g->pm[0], g->pm[1], PG_EROWS2S_H16)
    else
        PG_POLY2_CASES(g->pm[0], g->pm[1], PG_EROWS2_H16)
}

/* one copy of each per instruction set */
static void pg_item_erows_base(const pg_item_f32 *g, const float *gbase, ptrdiff_t od0,
                               ptrdiff_t od1, ptrdiff_t oh0, ptrdiff_t oh1, float *PG_RESTRICT E)
{
    pg_item_erows_body(g, gbase, od0, od1, oh0, oh1, E, PG_ISA_BASE);
}
#if PG_X86_DISPATCH
PG_TARGET_AVX2
static void pg_item_erows_avx2(const pg_item_f32 *g, const float *gbase, ptrdiff_t od0,
                               ptrdiff_t od1, ptrdiff_t oh0, ptrdiff_t oh1, float *PG_RESTRICT E)
{
    pg_item_erows_body(g, gbase, od0, od1, oh0, oh1, E, PG_ISA_AVX2);
}

PG_TARGET_AVX2_F16C
static void pg_item_erows_h16_avx2(const pg_item_f32 *g, const uint16_t *gbase, ptrdiff_t od0,
                                   ptrdiff_t od1, ptrdiff_t oh0, ptrdiff_t oh1,
                                   float *PG_RESTRICT E, int bf16)
{
    pg_item_erows_h16_body(g, gbase, od0, od1, oh0, oh1, E, bf16, PG_ISA_AVX2);
}
#endif
static void pg_item_erows_h16_base(const pg_item_f32 *g, const uint16_t *gbase, ptrdiff_t od0,
                                   ptrdiff_t od1, ptrdiff_t oh0, ptrdiff_t oh1,
                                   float *PG_RESTRICT E, int bf16)
{
    pg_item_erows_h16_body(g, gbase, od0, od1, oh0, oh1, E, bf16, PG_ISA_BASE);
}
#endif

/* whether the item's E rows go through pg_item_erows / _h16: a period-2 interior
 * (pg_poly2_avx2_ok; merged lanes at least eight) or a period-1 one of at most
 * PG_POLY_MAX_M terms, at least eight columns a phase, and grad_output rows at least eight
 * wide */
static inline int pg_item_erows_ok(const pg_item_f32 *g)
{
    return g->Wo >= 8 && g->qx1 - g->qx0 >= 8
           && ((pg_poly2_avx2_ok(g->P, g->pm) && (g->gap == 1 || g->gap >= 8))
               || (g->P == 1 && g->pm[0] >= 1 && g->pm[0] <= PG_POLY_MAX_M));
}

/* the E rows covering grad_input row (idd, ih), od-major, into rows: their count.  One D
 * row and at most three H rows (every 2-D case) are consecutive E rows, set without a loop */
PG_ALWAYS_INLINE
static inline ptrdiff_t pg_item_cover(const pg_item_f32 *g, const float *E, ptrdiff_t od0,
                                      ptrdiff_t oh0, ptrdiff_t noh, ptrdiff_t idd, ptrdiff_t ih,
                                      const float **rows)
{
    const ptrdiff_t a = g->dlo[idd], b = g->dhi[idd], p = g->hlo[ih], q = g->hhi[ih];
    const ptrdiff_t W = g->W;
    if (q <= p || b <= a)
        return 0;
    const float *r0 = E + ((a - od0) * noh + (p - oh0)) * W;
    if (b - a == 1 && q - p <= 3) {
        rows[0] = r0;
        rows[1] = r0 + W;
        rows[2] = r0 + 2 * W;
        return q - p;
    }
    ptrdiff_t nr = 0;
    for (ptrdiff_t od = a; od < b; od++, r0 += noh * W)
        for (ptrdiff_t t = 0; t < q - p; t++) rows[nr++] = r0 + t * W;
    return nr;
}

/* a one-term grad_input row: a copy of its E row (inline where rows are a few hundred
 * bytes and a call to memcpy costs as much as the copy) */
PG_ALWAYS_INLINE
static inline void pg_item_copy(float *PG_RESTRICT dst, const float *PG_RESTRICT src,
                                ptrdiff_t n, int isa)
{
#if PG_VEC
    if (isa == PG_ISA_AVX2) {
        ptrdiff_t j = 0;
        for (; j + 16 <= n; j += 16) {
            const pg_f8 a = pg_f8_load(src + j), b = pg_f8_load(src + j + 8);
            pg_f8_store(dst + j, a);
            pg_f8_store(dst + j + 8, b);
        }
        if (j + 8 <= n) {
            pg_f8_store(dst + j, pg_f8_load(src + j));
            j += 8;
        }
        if (j < n && n >= 8)   /* the last eight again, overlapping: the same values */
            pg_f8_store(dst + n - 8, pg_f8_load(src + n - 8));
        else
            for (; j < n; j++) dst[j] = src[j];
        return;
    }
#endif
    (void)isa;
    memcpy(dst, src, (size_t)n * sizeof(float));
}

#if PG_VEC
/*
 * A grad_input row of nr >= 2 E rows, eight columns at a time, the last eight again where
 * W is not a multiple of eight (overlapping: the same values; dst is none of the rows):
 * the adds of the column loop, left to right, without its vectorised loop's prologue and
 * scalar epilogue, which cost more than the adds on rows of a few dozen columns; four rows
 * or more through pg_stream.h's pg_sum_rows_many_f32 (out of line).
 */
PG_VEC_INLINE void pg_item_sum_rows(float *PG_RESTRICT dst, const float *PG_RESTRICT r0,
                                    const float *PG_RESTRICT r1, const float *PG_RESTRICT r2,
                                    const float **rows, ptrdiff_t nr, ptrdiff_t W, int isa)
{
    if (nr == 2) {
        PG_FOR8_OVERLAP(j, W, { pg_f8_store(dst + j, pg_f8_load(r0 + j) + pg_f8_load(r1 + j)); })
    } else if (nr == 3) {
        PG_FOR8_OVERLAP(j, W, {
            const pg_f8 v = pg_f8_load(r0 + j) + pg_f8_load(r1 + j);
            pg_f8_store(dst + j, v + pg_f8_load(r2 + j));
        })
    } else {
#if PG_X86_DISPATCH
        if (isa == PG_ISA_AVX2) {
            pg_sum_rows_many_f32_avx2(dst, rows, nr, W);
            return;
        }
#endif
        (void)isa;
        pg_sum_rows_many_f32_base(dst, rows, nr, W);
    }
}
#else
#define pg_item_erows_base(...) ((void)0)   /* PG_VEC is 0: the items' element loops */
#define pg_item_sum_rows(...) ((void)0)
#endif

/* the item's grad_input rows from its E rows; with STEPS (a constant), runs of rows whose
 * windows move on by one row each (stride 1 along H, g->hstep) go as one sum of run * W
 * values where the rows follow each other in memory (or in the stage, g->step_rows at
 * a time), in fewer instructions */
#define PG_ITEM_COMBINE_ROWS(STEPS, ISA)                                                    \
    for (ptrdiff_t idd = d0; idd < d1; idd++) {                                             \
        /* one covering D window (every 2-D case): row p of it at E + (eb + p) * W */       \
        const ptrdiff_t a = g->dlo[idd], nd = g->dhi[idd] - a;                              \
        const ptrdiff_t eb = (a - od0) * noh - oh0;                                         \
        for (ptrdiff_t ih = h0; ih < h1; ih++) {                                            \
            const ptrdiff_t p = hlo[ih], nh = hhi[ih] - p;                                  \
            /* the rows after it whose windows are its own moved one row on (stride 1      \
             * along H): their E rows follow its own, so where the rows follow each other   \
             * in memory too they are one sum of nh rows of run * W values */               \
            ptrdiff_t run = 1;                                                              \
            if (STEPS && nd == 1) {                                                         \
                run = hstep[ih] < h1 - ih ? hstep[ih] : h1 - ih;                            \
                if (use_sw && run > g->step_rows) run = g->step_rows;                       \
            }                                                                               \
            const ptrdiff_t n = run * W;                                                    \
            float *PG_RESTRICT dst = use_sw                                                 \
                ? (float *)pg_stage_next(&st, n * (ptrdiff_t)sizeof(float), AVX2)           \
                : xbase + idd * xs2 + ih * xs3;                                             \
            const float *PG_RESTRICT r0, *PG_RESTRICT r1, *PG_RESTRICT r2;                  \
            ptrdiff_t nr;                                                                   \
            if (nd == 1 && nh <= 3) {   /* consecutive E rows, set without a table */       \
                nr = nh > 0 ? nh : 0;                                                       \
                r0 = nr ? E + (eb + p) * W : E;                                             \
                r1 = r0 + W;                                                                \
                r2 = r1 + W;                                                                \
            } else {                                                                        \
                nr = pg_item_cover(g, E, od0, oh0, noh, idd, ih, rows);                     \
                r0 = rows[0];                                                               \
                r1 = nr > 1 ? rows[1] : r0;                                                 \
                r2 = nr > 2 ? rows[2] : r0;                                                 \
            }                                                                               \
            ih += run - 1;                                                                  \
            if (nr == 0) {                                                                  \
                memset(dst, 0, (size_t)n * sizeof(float));                                  \
            } else if (PG_VEC && STEPS && run > 1) {   /* (W >= 8) */                        \
                if (nr == 1) pg_item_copy(dst, r0, n, ISA);                                 \
                else pg_item_sum_rows(dst, r0, r1, r2, rows, nr, n, ISA);                   \
            } else if (nr == 1) {                                                           \
                pg_item_copy(dst, r0, W, ISA);                                              \
            } else if (PG_VEC && W >= 8) {                                                  \
                pg_item_sum_rows(dst, r0, r1, r2, rows, nr, W, ISA);                        \
            } else if (nr == 2) {                                                           \
                for (j = 0; j < W; j++) dst[j] = r0[j] + r1[j];                             \
            } else {                                                                        \
                for (j = 0; j < W; j++) dst[j] = (r0[j] + r1[j]) + r2[j];                   \
                for (ptrdiff_t r = 3; r < nr; r++) {                                        \
                    const float *PG_RESTRICT rr = rows[r];                                  \
                    for (j = 0; j < W; j++) dst[j] = dst[j] + rr[j];                        \
                }                                                                           \
            }                                                                               \
        }                                                                                   \
    }

/*
 * float64 items whose E rows are never stored (in place of the Cython row loop,
 * _kernels.pyx's _gather_item): stride 2 along W with phases of at most three terms in all
 * and at most two covering windows along H, or stride 1 with up to three terms and three
 * windows; one along D, no edge columns (the interior widened over them with -0.0 slots,
 * _plan.poly_padded: the tap tables' bits), W a multiple of four.  Each grad_input row is
 * summed from the E values of its covering rows, formed in registers a block at a time,
 * and pushed straight to the register-fed writer (pg_vs): only the grad_input values are
 * stored, streamed where the output is larger than the cache (f->nt), else with ordinary
 * stores.  Stores retire in order, so the E rows' stores of the row loop wait behind the
 * streaming stores, which wait for memory, and the E rows cost their whole time on top of
 * the writes.  Each E value k * (its phase terms left to right) as pg_poly2_avx2_f64 and
 * pg_poly1_avx2_f64 form it, the rows added left to right as pg_combine_f64 adds them;
 * four values a vector, pushed through pg_vs as eight float lanes (a double's two halves
 * move together).  The item's grad_output rows go into the grow block first (W-weighted,
 * with their slots).  Stride 1 gains too, as the row loop it replaces forms and combines
 * its rows at a time.
 */

#if PG_X86_DISPATCH
/* The E values of a block, k * (each phase's terms left to right), as layer bodies: the
 * AVX2 item below calls them with pointers (a 32-byte vector passes between AVX2 code and
 * the layer's functions by pointer only) and pushes what they form to pg_stream.h's
 * register-fed writer (pg_vs, AVX2 code). */
/* a[0] + a[1] + ... + a[M - 1], four values from a */
PG_VEC_INLINE pg_d4 pg_phase4d(const double *a, int64_t M)
{
    pg_d4 v = pg_d4_load(a);
    for (int64_t t = 1; t < M; t++) v = v + pg_d4_load(a + t);
    return v;
}

/* the weights of a grad_input row's covering rows (k1, k2 those of its second and third),
 * each in four lanes */
PG_VEC_INLINE void pg_fused64_weights(double k0, double k1, double k2, pg_d4 vk[3], int isa)
{
    vk[0] = pg_d4_set1_isa(k0, isa);
    vk[1] = pg_d4_set1_isa(k1, isa);
    vk[2] = pg_d4_set1_isa(k2, isa);
}

/* period 2: columns 2q .. 2q + 7, the phases a (MA terms) and b (MB) interleaved, of one
 * covering row (NH 1) or the sum of two (ra1 the second), to *lo and *hi */
PG_VEC_INLINE void pg_fused64_block(const double *ra0, const double *ra1, ptrdiff_t pc0,
                                    ptrdiff_t pc1, int64_t MA, int64_t MB, int NH,
                                    ptrdiff_t q, const pg_d4 vk[3], pg_d4 *lo, pg_d4 *hi,
                                    int isa)
{
    pg_d4 va = vk[0] * pg_phase4d(ra0 + pc0 + q, MA);
    pg_d4 vb = vk[0] * pg_phase4d(ra0 + pc1 + q, MB);
    if (NH == 2) {
        va = va + vk[1] * pg_phase4d(ra1 + pc0 + q, MA);
        vb = vb + vk[1] * pg_phase4d(ra1 + pc1 + q, MB);
    }
    pg_d4_zip(va, vb, lo, hi, isa);
}

/* period 1: columns q .. q + 3, the NH rows' E values added left to right, to *v */
PG_VEC_INLINE void pg_fused64_block1(const double *ra0, ptrdiff_t gstep, ptrdiff_t pc0,
                                     int64_t M, int NH, ptrdiff_t q, const pg_d4 vk[3],
                                     pg_d4 *v)
{
    pg_d4 s = vk[0] * pg_phase4d(ra0 + pc0 + q, M);
    if (NH >= 2) s = s + vk[1] * pg_phase4d(ra0 + gstep + pc0 + q, M);
    if (NH >= 3) s = s + vk[2] * pg_phase4d(ra0 + 2 * gstep + pc0 + q, M);
    *v = s;
}

/* four doubles pushed to the writer (its vectors are __m256: eight floats, the same bits) */
#define PG_VS_PUSH4(V) pg_vs_push(&vs, (__m256)(V), PG_VS_NT)
/* the item's grad_input rows (F the tables, pg_fused64; T double, STEP values a vector):
 * each summed by ROW(nh, ...) from its nh covering rows (at most MAXNH) with their
 * weights vk; zeros where no window covers it */
#define PG_FUSED_RUN(F, T, STEP, MAXNH, ROW, ...)                                           \
    for (ptrdiff_t idd = d0; idd < d1; idd++) {                                             \
        const ptrdiff_t od = F->dlo[idd];                                                   \
        const T *const gd = gblk + pd + (od - od0) * noh * gstep;                           \
        for (ptrdiff_t ih = h0; ih < h1; ih++) {                                            \
            const ptrdiff_t p = F->hlo[ih], nh = F->hhi[ih] - p;                            \
            const T *const ra0 = gd + (p - oh0) * gstep, *const ra1 = ra0 + gstep;         \
            const double k0 = F->wd[od] * F->wh[p];                                         \
            pg_d4 vk[3];                                                                    \
            pg_fused64_weights(k0, nh >= 2 ? F->wd[od] * F->wh[p + 1] : k0,                 \
                               nh >= 3 ? F->wd[od] * F->wh[p + 2] : k0, vk, PG_ISA_AVX2);   \
            (void)ra1;                                                                      \
            if (nh == 1) {                                                                  \
                ROW(1, __VA_ARGS__)                                                         \
            } else if (nh == 2) {                                                           \
                ROW(2, __VA_ARGS__)                                                         \
            } else if ((MAXNH) >= 3 && nh == 3) {                                           \
                ROW(3, __VA_ARGS__)                                                         \
            } else {   /* no window: zeros */                                               \
                for (ptrdiff_t j = 0; j < W; j += (STEP)) PG_VS_PUSH4(zero4);               \
            }                                                                               \
        }                                                                                   \
    }
#define PG_FUSED64_ROW(NH, MA, MB)                                                          \
    {                                                                                       \
        ptrdiff_t q = 0;                                                                    \
        pg_d4 lo, hi;                                                                       \
        for (; q + 4 <= nq; q += 4) {                                                       \
            pg_fused64_block(ra0, ra1, pc0, pc1, MA, MB, NH, q, vk, &lo, &hi, PG_ISA_AVX2); \
            PG_VS_PUSH4(lo);                                                                \
            PG_VS_PUSH4(hi);                                                                \
        }                                                                                   \
        if (q < nq) {   /* nq = 2 mod 4: the last four columns, of the block before */      \
            pg_fused64_block(ra0, ra1, pc0, pc1, MA, MB, NH, nq - 4, vk, &lo, &hi,          \
                             PG_ISA_AVX2);                                                  \
            PG_VS_PUSH4(hi);                                                                \
        }                                                                                   \
    }
#define PG_FUSED64_ROWS(MA, MB) PG_FUSED_RUN(f, double, 4, 2, PG_FUSED64_ROW, MA, MB)

/* period 1: grad_input columns q .. q + 3 */
#define PG_FUSED64_ROW1(NH, M)                                                              \
    for (ptrdiff_t q = 0; q < nq; q += 4) {                                                 \
        pg_d4 v;                                                                            \
        pg_fused64_block1(ra0, gstep, pc0, M, NH, q, vk, &v);                               \
        PG_VS_PUSH4(v);                                                                     \
    }
#define PG_FUSED64_ROWS1(M) PG_FUSED_RUN(f, double, 4, 3, PG_FUSED64_ROW1, M)

/* the grad_output rows of plane od, W-weighted, with their slots, into the grow block (as
 * pg_fused_avx2_f64 forms them for all the item's planes) */
PG_ALWAYS_INLINE
static inline void pg_fused64_grow(const pg_fused64 *f, const double *gbase, ptrdiff_t od,
                                   ptrdiff_t oh0, ptrdiff_t oh1, double *PG_RESTRICT gblk)
{
    const ptrdiff_t Wo = f->Wo, pd = f->epad, gstep = Wo + 2 * pd;
    const double *PG_RESTRICT ww = f->ww;
    const double padr = f->qx1 > f->q1 ? -0.0 : 0.0;
    for (ptrdiff_t t = 0; t < pd; t++) gblk[t] = -0.0;
    double *grow = gblk + pd;
    for (ptrdiff_t oh = oh0; oh < oh1; oh++, grow += gstep) {
        const double *PG_RESTRICT src = gbase + od * f->gs2 + oh * f->gs3;
        for (ptrdiff_t j = 0; j < Wo; j++) grow[j] = ww ? src[j] * ww[j] : src[j];
        grow[Wo] = padr;
        for (ptrdiff_t t = 1; t < 2 * pd; t++) grow[Wo + t] = -0.0;
    }
}

#if PG_X86_DISPATCH
/*
 * Stride 1 (P = 1): plane by plane, in strips of 8 columns walked down the plane's rows.
 * Each E value (a grad_output row's phase sum at 4 columns, the same adds as
 * PG_FUSED64_ROW1's) is formed once and kept in registers for the up to three grad_input
 * rows it covers, where the row form sums it again for each (hhi is nondecreasing, so a
 * row's windows are the last nh formed); each row k0 * E0 + k1 * E1 + k2 * E2 as there,
 * each k * E formed once with the E value (k belongs to its grad_output row).  In the
 * cache (f->nt = 0) the strips are stored as they are, the last one overlapping the one
 * before where W is not a multiple of 8.  Streamed (W a multiple
 * of 8, the output 16-byte aligned) they lie on the output's lines, each streamed whole;
 * where the rows start tb = 2, 4 or 6 values into a line, the line across two rows takes
 * the last tb values of the strip at W - 8 (kept in T) and the first 8 - tb of the strip
 * at 0, and the region's two partial end lines are stored by value.
 */
enum { PG_STRIP_STREAM, PG_STRIP_KEEP, PG_STRIP_SEAM, PG_STRIP_STORE };

/* eight doubles streamed to dst (32-byte aligned) */
PG_VEC_INLINE void pg_stream8_f64(double *dst, pg_d4 lo, pg_d4 hi, int isa)
{
    pg_f8_stream(dst, (pg_f8)lo, isa);
    pg_f8_stream(dst + 4, (pg_f8)hi, isa);
}

PG_VEC_INLINE void pg_seam_line(double *dst, pg_d4 t0, pg_d4 t1, pg_d4 u0, pg_d4 u1, int tb,
                                int isa)
{
    if (tb == 2) pg_stream8_f64(dst, pg_d4_mid(t1, u0), pg_d4_mid(u0, u1), isa);
    else if (tb == 4) pg_stream8_f64(dst, t1, u0, isa);
    else pg_stream8_f64(dst, pg_d4_mid(t0, t1), pg_d4_mid(t1, u0), isa);
}

/* one strip: columns q .. q + 7 of rows h0 .. h1 (x: row h0's column q) */
PG_VEC_INLINE void pg_strip64(const pg_fused64 *f, const double *grow0, ptrdiff_t gstep,
                              ptrdiff_t oh0, double kd, ptrdiff_t h0, ptrdiff_t h1,
                              ptrdiff_t q, const int M, const int mode, int tb, double *x,
                              double *T, double *carry, pg_pf *nx, int isa)
{
    const pg_d4 z = pg_d4_set1_isa(0.0, isa);
    const double *const g0 = grow0 + f->pc[0] + q;
    /* (the table pointers in registers: the stores may alias f) */
    const int64_t *const hlo = f->hlo, *const hhi = f->hhi;
    const double *const wh = f->wh;
    const ptrdiff_t W = f->W;
    pg_d4 a0 = z, a1 = z, b0 = z, b1 = z, c0 = z, c1 = z;
    ptrdiff_t top = oh0;
    for (ptrdiff_t ih = h0; ih < h1; ih++, x += W) {
        const ptrdiff_t p = hlo[ih], e = hhi[ih], nh = e - p;
        pg_pf_step(nx, 1);
        for (; top < e; top++) {
            /* k for the row it belongs to, applied once: each row's k * E as before */
            const pg_d4 k = pg_d4_set1_isa(kd * wh[top], isa);
            a0 = b0; a1 = b1; b0 = c0; b1 = c1;
            c0 = k * pg_phase4d(g0 + (top - oh0) * gstep, M);
            c1 = k * pg_phase4d(g0 + (top - oh0) * gstep + 4, M);
        }
        pg_d4 v0, v1;
        if (nh == 3) {
            v0 = (a0 + b0) + c0;
            v1 = (a1 + b1) + c1;
        } else if (nh == 2) {
            v0 = b0 + c0;
            v1 = b1 + c1;
        } else if (nh == 1) {
            v0 = c0;
            v1 = c1;
        } else {   /* no window: +0.0 */
            v0 = v1 = z;
        }
        if (mode == PG_STRIP_STREAM) {
            pg_stream8_f64(x, v0, v1, isa);
        } else if (mode == PG_STRIP_STORE) {
            pg_d4_store(x, v0);
            pg_d4_store(x + 4, v1);
        } else if (mode == PG_STRIP_KEEP) {
            double *const t = T + 8 * (ih - h0);
            pg_d4_store(t, v0);
            pg_d4_store(t + 4, v1);
        } else {   /* the line from the row before's last tb values and these */
            const double *const t = ih > h0 ? T + 8 * (ih - h0 - 1) : carry;
            if (ih > h0 || carry != NULL) {
                pg_seam_line(x - tb, pg_d4_load(t), pg_d4_load(t + 4), v0, v1, tb, isa);
            } else {   /* the region's first line: this row's values only */
                double y[8];
                pg_d4_store(y, v0);
                pg_d4_store(y + 4, v1);
                for (int k = 0; k < 8 - tb; k++) x[k] = y[k];
            }
        }
    }
}

#define PG_STRIP64_M(q, M, MODE, x)                                                         \
    pg_strip64(f, grow0, gstep, oh0, kd, h0, h1, q, M, MODE, tb, x, T, cr, &nx, PG_ISA_AVX2);
#define PG_STRIP64(q, MODE, x)                                                              \
    switch (f->pm[0]) {                                                                     \
    case 1: PG_STRIP64_M(q, 1, MODE, x) break;                                              \
    case 2: PG_STRIP64_M(q, 2, MODE, x) break;                                              \
    default: PG_STRIP64_M(q, 3, MODE, x) break;                                             \
    }

/* T: 8 * (h1 - h0 + 1) doubles, 32-byte aligned, after the grow block */
PG_TARGET_AVX2
static void pg_fused1_strips_f64(const pg_fused64 *f, const double *gbase, double *x0,
                                 ptrdiff_t d0, ptrdiff_t d1, ptrdiff_t h0, ptrdiff_t h1,
                                 double *PG_RESTRICT gblk, double *PG_RESTRICT T)
{
    const ptrdiff_t W = f->W, pd = f->epad, gstep = f->Wo + 2 * pd, nr = h1 - h0;
    const ptrdiff_t oh0 = f->hlo[h0], oh1 = f->hhi[h1 - 1];
    const double *const grow0 = gblk + pd;
    const int tb = (int)(((uintptr_t)x0 & 63u) / 8u);   /* (0, 2, 4 or 6) */
    const ptrdiff_t qa = tb ? 8 - tb : 0, qb = tb ? W - 8 - tb : W - 8;   /* whole lines */
    double *const carry = T + 8 * nr;
    double *cr = NULL;   /* the row before's tail, where it is in the region */
    for (ptrdiff_t idd = d0; idd < d1; idd++) {
        const ptrdiff_t od = f->dlo[idd];
        const double kd = f->wd[od];
        double *const xp = x0 + (idd - d0) * f->xs2;
        pg_fused64_grow(f, gbase, od, oh0, oh1, gblk);
        /* the next plane's grad_output rows (where they follow each other), spread over
         * this plane's strips */
        pg_pf nx = {0};
        if (idd + 1 < d1 && f->gs3 == f->Wo && oh1 > oh0) {
            nx.p = (const char *)(gbase + f->dlo[idd + 1] * f->gs2 + oh0 * f->gs3);
            nx.n = (oh1 - oh0) * f->Wo * (ptrdiff_t)sizeof(double);
            const ptrdiff_t steps = (W / 8 + (tb != 0)) * nr;
            nx.per = ((nx.n + 63) / 64 + steps - 1) / steps;
        }
        if (!f->nt) {   /* in the cache: ordinary stores, no seams (W not a multiple of 8:
                         * the last strip overlaps the one before, storing the same bits) */
            for (ptrdiff_t q = 0; q < W; q += 8) {
                const ptrdiff_t qq = q + 8 <= W ? q : W - 8;
                PG_STRIP64(qq, PG_STRIP_STORE, xp + qq)
            }
            continue;
        }
        for (ptrdiff_t q = qa; q <= qb; q += 8) PG_STRIP64(q, PG_STRIP_STREAM, xp + q)
        if (tb) {
            PG_STRIP64(W - 8, PG_STRIP_KEEP, xp)
            PG_STRIP64(0, PG_STRIP_SEAM, xp)
            memcpy(carry, T + 8 * (nr - 1), 8 * sizeof(double));
            cr = carry;
        }
    }
    if (tb && f->nt) {   /* the region's last line: the last row's last tb values */
        double *const x = x0 + (d1 - 1 - d0) * f->xs2 + nr * W - tb;
        for (int k = 0; k < tb; k++) x[k] = carry[8 - tb + k];
    }
}
#endif

PG_TARGET_AVX2
static void pg_fused_avx2_f64(const pg_fused64 *f, const double *gbase, double *x0,
                              ptrdiff_t d0, ptrdiff_t d1, ptrdiff_t h0, ptrdiff_t h1,
                              double *PG_RESTRICT gblk)
{
    const ptrdiff_t W = f->W, Wo = f->Wo, nq = f->qx1, pd = f->epad;
    const ptrdiff_t od0 = f->dlo[d0], od1 = f->dhi[d1 - 1];
    const ptrdiff_t oh0 = f->hlo[h0], oh1 = f->hhi[h1 - 1];
    const ptrdiff_t noh = oh1 > oh0 ? oh1 - oh0 : 0, gstep = Wo + 2 * pd;
    const ptrdiff_t pc0 = f->pc[0], pc1 = f->P > 1 ? f->pc[1] : 0;
    if (f->strips && (!f->nt || (W % 8 == 0 && ((uintptr_t)x0 & 15u) == 0))) {
        pg_fused1_strips_f64(f, gbase, x0, d0, d1, h0, h1, gblk,
                             (double *)(((uintptr_t)(gblk + pd + (oh1 - oh0) * gstep) + 31u)
                                        & ~(uintptr_t)31u));
        return;
    }
    /* the grow block: each grad_output row W-weighted, its slots after it (+0.0 where the
     * interior is not widened past its end, then -0.0) and the next row's before it, the
     * item's planes one after another */
    for (ptrdiff_t od = od0; od < od1; od++)
        pg_fused64_grow(f, gbase, od, oh0, oh1, gblk + (od - od0) * noh * gstep);
    const pg_d4 zero4 = {0.0, 0.0, 0.0, 0.0};
    pg_vs vs;
    pg_vs_begin(&vs, (float *)x0, 2 * (d1 - d0) * (h1 - h0) * W, f->nt);
    /* streamed or not, a constant in each copy of the loops */
#define PG_FUSED64_SWITCH                                                                   \
    if (f->P == 1) {                                                                        \
        switch (f->pm[0]) {                                                                 \
        case 1: PG_FUSED64_ROWS1(1) break;                                                  \
        case 2: PG_FUSED64_ROWS1(2) break;                                                  \
        default: PG_FUSED64_ROWS1(3) break;                                                 \
        }                                                                                   \
    } else {                                                                                \
        switch (f->pm[0] * 2 + f->pm[1]) {                                                  \
        case 2 * 1 + 2: PG_FUSED64_ROWS(1, 2) break;                                        \
        case 2 * 2 + 1: PG_FUSED64_ROWS(2, 1) break;                                        \
        default: PG_FUSED64_ROWS(1, 1) break;                                               \
        }                                                                                   \
    }                                                                                       \
    pg_vs_end(&vs, PG_VS_NT);
    if (f->nt) { enum { PG_VS_NT = 1 }; PG_FUSED64_SWITCH }
    else { enum { PG_VS_NT = 0 }; PG_FUSED64_SWITCH }
#undef PG_FUSED64_SWITCH
}
#endif

/* rows d0..d1, h0..h1 of an item through pg_fused_avx2_f64, the grow block at G; 0 where
 * the CPU has no AVX2 (the row loop then) */
int pg_fused_f64_run(const pg_fused64 *f, const double *gbase, double *xbase, ptrdiff_t d0,
                     ptrdiff_t d1, ptrdiff_t h0, ptrdiff_t h1, double *G)
{
#if PG_X86_DISPATCH
    if (pg_have_avx2()) {
        pg_fused_avx2_f64(f, gbase, xbase + d0 * f->xs2 + h0 * f->xs3, d0, d1, h0, h1, G);
        return 1;
    }
#endif
    (void)f; (void)gbase; (void)xbase; (void)d0; (void)d1; (void)h0; (void)h1; (void)G;
    return 0;
}

#define PG_DEFINE_ITEM(NAME, ATTR, REGION, ISA)                                             \
ATTR static void NAME(const pg_item_f32 *g, const float *gbase, float *xbase,               \
                      ptrdiff_t d0, ptrdiff_t d1, ptrdiff_t h0, ptrdiff_t h1,               \
                      float *PG_RESTRICT grow, float *PG_RESTRICT E,                        \
                      const float **rows, float *tmp)                                       \
{                                                                                           \
    const ptrdiff_t W = g->W, Wo = g->Wo;                                                   \
    const ptrdiff_t od0 = g->dlo[d0], od1 = g->dhi[d1 - 1];                                 \
    const ptrdiff_t oh0 = g->hlo[h0], oh1 = g->hhi[h1 - 1];                                 \
    const ptrdiff_t noh = oh1 > oh0 ? oh1 - oh0 : 0;                                        \
    const float *PG_RESTRICT ww = g->ww;                                                    \
    ptrdiff_t j;                                                                            \
    grow[Wo] = 0.0f;          /* an empty cover */                                          \
    grow[Wo + 1] = -0.0f;     /* a padding tap */                                           \
    const int AVX2 = ISA == PG_ISA_AVX2;   /* (the stage's flag) */                         \
    if (PG_VEC && pg_item_erows_ok(g))                                                      \
        PG_ROWS(ISA, pg_item_erows, g, gbase, od0, od1, oh0, oh1, E);                       \
    else                                                                                    \
    for (ptrdiff_t od = od0; od < od1; od++) {                                              \
        for (ptrdiff_t oh = oh0; oh < oh1; oh++) {                                          \
            const float *PG_RESTRICT src = gbase + od * g->gs2 + oh * g->gs3;               \
            if (ww) { for (j = 0; j < Wo; j++) grow[j] = src[j] * ww[j]; }                  \
            else    { for (j = 0; j < Wo; j++) grow[j] = src[j]; }                          \
            pg_item_expand(g, grow, E + ((od - od0) * noh + (oh - oh0)) * W,                \
                           g->wd[od] * g->wh[oh], tmp, ISA);                                \
        }                                                                                   \
    }                                                                                       \
    /* outputs larger than the cache: where an item's rows follow each other in memory     \
     * (its rows of one D row, or of consecutive whole planes), they are formed in the      \
     * stage and go out as whole lines, streamed */                                         \
    const int use_sw = REGION && g->xs3 == W && (d1 - d0 == 1 || g->xs2 == (h1 - h0) * W); \
    pg_stage st = {0};     /* zeroed for gcc's maybe-uninitialized: set before use */      \
    if (use_sw) pg_stage_begin(&st, xbase + d0 * g->xs2 + h0 * g->xs3, E + g->stage,        \
                               g->stage_cap);                                               \
    const int64_t *PG_RESTRICT hlo = g->hlo, *PG_RESTRICT hhi = g->hhi;                    \
    const int64_t *PG_RESTRICT hstep = g->hstep;                                            \
    const ptrdiff_t xs2 = g->xs2, xs3 = g->xs3;                                             \
    const int merge = PG_VEC && W >= 8 && (use_sw || xs3 == W);                            \
    if (merge && g->hsteps) PG_ITEM_COMBINE_ROWS(1, ISA)                                    \
    else PG_ITEM_COMBINE_ROWS(0, ISA)                                                       \
    if (use_sw) pg_stage_end(&st, AVX2);                                                    \
}

/* built with and without the region writer (a constant, so the plain build carries none of
 * its tests), for baseline x86-64 and AVX2 */
PG_DEFINE_ITEM(pg_item_base_f32, , 0, PG_ISA_BASE)
PG_DEFINE_ITEM(pg_item_base_sw_f32, , 1, PG_ISA_BASE)
#if PG_X86_DISPATCH
PG_DEFINE_ITEM(pg_item_avx2_f32, PG_TARGET_AVX2, 0, PG_ISA_AVX2)
PG_DEFINE_ITEM(pg_item_avx2_sw_f32, PG_TARGET_AVX2, 1, PG_ISA_AVX2)
#endif

#if PG_VEC
/* the nbytes at src copied to c rows dst, dst + step, ...: loaded once (128-byte blocks, or
 * up to four vectors for a shorter row, the last one overlapping the one before), stored to
 * every row */
PG_VEC_INLINE void pg_copy_row_body(char *dst, ptrdiff_t step, ptrdiff_t c, const char *src,
                                    ptrdiff_t nbytes)
{
    if (nbytes < 32) {
        for (ptrdiff_t t = 0; t < c; t++) memcpy(dst + t * step, src, (size_t)nbytes);
        return;
    }
    /* offsets of four vectors: a 128-byte block, or a row of 32..127 bytes whole */
    ptrdiff_t o1 = 32, o2 = 64, o3 = 96, blk = 128;
    if (nbytes < 128) {
        o3 = nbytes - 32;
        o2 = nbytes >= 64 ? nbytes - 64 : 0;
        o1 = nbytes >= 96 ? 32 : o3;
        blk = nbytes;
    }
    for (ptrdiff_t off = 0;; off += blk) {
        if (off + blk > nbytes) off = nbytes - blk;
        const char *s = src + off;
        const pg_f8 a = pg_f8_load(s), b = pg_f8_load(s + o1);
        const pg_f8 e = pg_f8_load(s + o2), f = pg_f8_load(s + o3);
        for (char *d = dst + off, *const de = d + c * step; d != de; d += step) {
            pg_f8_store(d, a);
            pg_f8_store(d + o1, b);
            pg_f8_store(d + o2, e);
            pg_f8_store(d + o3, f);
        }
        if (off + blk == nbytes) break;
    }
}

/* n >= 64 bytes from s to d: d's whole lines with aligned stores, two a line, and its
 * partial end lines with unaligned ones (faster than memcpy for planes of a few KB copied
 * from the first of their D run: docs/performance.md) */
PG_VEC_INLINE void pg_copy_lines(char *PG_RESTRICT d, const char *PG_RESTRICT s, ptrdiff_t n)
{
    pg_f8_store(d, pg_f8_load(s));
    pg_f8_store(d + 32, pg_f8_load(s + 32));
    for (ptrdiff_t i = (ptrdiff_t)((64u - ((uintptr_t)d & 63u)) & 63u); i + 64 <= n; i += 64) {
        const pg_f8 a = pg_f8_load(s + i), b = pg_f8_load(s + i + 32);
        pg_f8_store_aligned(d + i, a);
        pg_f8_store_aligned(d + i + 32, b);
    }
    pg_f8_store(d + n - 64, pg_f8_load(s + n - 64));
    pg_f8_store(d + n - 32, pg_f8_load(s + n - 32));
}

/* rows h0..h1 of D plane idd copied from plane `from` (rows contiguous, xs3 == W) */
PG_VEC_INLINE void pg_item_copy_d_body(const pg_item_f32 *g, void *xbase, ptrdiff_t idd,
                                       ptrdiff_t from, ptrdiff_t h0, ptrdiff_t h1,
                                       ptrdiff_t es)
{
    const ptrdiff_t at = h0 * g->xs3 * es, n = (h1 - h0) * g->W * es;
    char *const x = (char *)xbase + idd * g->xs2 * es + at;
    const char *const src = (const char *)xbase + from * g->xs2 * es + at;
    if (n >= 64) pg_copy_lines(x, src, n);
    else memcpy(x, src, (size_t)n);
}

/* one copy of each per instruction set: pg_copy_row out of line for the one-term items
 * (fewer instructions than inlined there), inline (pg_copy_row_body) in the 16-bit item */
#define PG_COPY_ISA(SFX, ATTR)                                                              \
ATTR __attribute__((noinline)) static void pg_copy_row_##SFX(char *dst, ptrdiff_t step,     \
                                                             ptrdiff_t c, const char *src,  \
                                                             ptrdiff_t nbytes)              \
{                                                                                           \
    pg_copy_row_body(dst, step, c, src, nbytes);                                            \
}                                                                                           \
ATTR static inline void pg_item_copy_d_##SFX(const pg_item_f32 *g, void *xbase,            \
                                             ptrdiff_t idd, ptrdiff_t from, ptrdiff_t h0,   \
                                             ptrdiff_t h1, ptrdiff_t es)                    \
{                                                                                           \
    pg_item_copy_d_body(g, xbase, idd, from, h0, h1, es);                                   \
}

PG_COPY_ISA(base, )
#if PG_X86_DISPATCH
PG_COPY_ISA(avx2, PG_TARGET_AVX2)
#endif

/* whether grad_input plane idd of an item (D index, rows h0..h1) equals the one before it:
 * the same covering D windows (so the same E rows and sums), with the rows contiguous, so
 * that the whole slab is copied at once (adaptive D windows: 15 -> 4 repeats 8 of 15) */
static inline int pg_item_same_d(const pg_item_f32 *g, ptrdiff_t d0, ptrdiff_t idd)
{
    return idd > d0 && g->xs3 == g->W && g->dlo[idd] == g->dlo[idd - 1]
           && g->dhi[idd] == g->dhi[idd - 1];
}

/* k * (16-bit grad_output value j, widened, times its W weight): one value, and eight from
 * j on (kv = k in every lane); the products of the 16-bit R and N rows */
PG_VEC_INLINE float pg_h16_kx1(const uint16_t *src, const float *ww, float k, ptrdiff_t j,
                               int bf16, int isa)
{
    const float x = bf16 ? pg_bf16_to_f32(src[j]) : pg_f16_to_f32_isa(src[j], isa);
    return k * (ww ? x * ww[j] : x);
}

PG_VEC_INLINE pg_f8 pg_h16_kx8(const uint16_t *src, const float *ww, pg_f8 kv, ptrdiff_t j,
                               int bf16, int isa)
{
    const pg_h8 h = pg_h8_load(src + j);
    pg_f8 x = bf16 ? (pg_f8)(pg_h8_to_u8(h, isa) << 16) : pg_f8_from_f16(h, isa);
    if (ww) x = x * pg_f8_load(ww + j);
    return kv * x;
}

/* x rounded to bfloat16 (pg_f8_to_bf16), in 32-bit lanes; products that are bfloat16
 * values already (k a power of two: kernel = stride = 2) take their top halves, NaNs
 * included (the multiply has quieted them): the full rounding only where a low half is not
 * zero */
PG_VEC_INLINE pg_u8 pg_item_bf16_u8(pg_f8 x, int isa)
{
    return pg_f8_low16_zero(x, isa) ? (pg_u8)x >> 16 : pg_f8_to_bf16_u8(x, isa);
}

/* one R row of a 16-bit item: k * (grad_output row times the W weights), rounded to 16
 * bits, then the two sentinel slots (k * +0.0, k * -0.0 rounded): what the one-term
 * combine of the general path stores for each grad_input value they reach, from the same
 * products, in one pass */
PG_VEC_INLINE void pg_r_row_h16(uint16_t *r, const uint16_t *src, const float *ww, float k,
                                ptrdiff_t Wo, int bf16, int sent, int isa)
{
    const pg_f8 kv = pg_f8_set1_isa(k, isa);
    ptrdiff_t j = 0;
    if (Wo < 8) {
        for (; j < Wo; j++) {
            const float v = pg_h16_kx1(src, ww, k, j, bf16, isa);
            r[j] = bf16 ? pg_f32_to_bf16(v) : pg_f32_to_f16_isa(v, isa);
        }
    } else {
        PG_FOR8_OVERLAP(j, Wo, {
            const pg_f8 x = pg_h16_kx8(src, ww, kv, j, bf16, isa);
            pg_h8_store(r + j, bf16 ? pg_u8_to_h8(pg_item_bf16_u8(x, isa), isa)
                                    : pg_f8_to_f16(x, isa));
        })
    }
    if (!sent)
        return;
    const float z0 = k * 0.0f, z1 = k * -0.0f;
    r[Wo] = bf16 ? pg_f32_to_bf16(z0) : pg_f32_to_f16_isa(z0, isa);
    r[Wo + 1] = bf16 ? pg_f32_to_bf16(z1) : pg_f32_to_f16_isa(z1, isa);
}

/* one R row: k * grad_output row (times the W weights), float32 */
PG_VEC_INLINE void pg_r_row_f32(float *r, const float *src, const float *ww, float k,
                                ptrdiff_t Wo, int sent, int isa)
{
    const pg_f8 kv = pg_f8_set1_isa(k, isa);
    ptrdiff_t j = 0;
    if (Wo < 8) {
        for (; j < Wo; j++) r[j] = k * (ww ? src[j] * ww[j] : src[j]);
    } else {
        PG_FOR8_OVERLAP(j, Wo, {
            pg_f8 v = pg_f8_load(src + j);
            if (ww) v = v * pg_f8_load(ww + j);
            pg_f8_store(r + j, kv * v);
        })
    }
    if (!sent)
        return;
    r[Wo] = k * 0.0f;          /* the sentinel slots: an empty cover, a padding tap */
    r[Wo + 1] = k * -0.0f;
}

/* the rounded 16-bit row r spread to columns 0..W-1 of dst (W >= 16) through the table sp
 * (_plan.spread): each block of 16 columns (the last one overlapping the one before)
 * looked up bytewise in the 8 values at its base, or (wide) in the 16 there: a lookup in
 * each half, each zeroing the bytes of the other half (the indices are below 32: + 0x70
 * sets bit 7 of those of the second half, - 16 that of those of the first), or-ed */
PG_VEC_INLINE void pg_spread16_row(uint16_t *dst, uint16_t *dst2, const uint16_t *r,
                                   const int64_t *sp, ptrdiff_t W, int wide, int nt, int isa)
{
    for (ptrdiff_t j = 0;; j += 16, sp += 5) {
        if (j + 16 > W) j = W - 16;
        pg_b32 c;
        memcpy(&c, sp + 1, 32);
        const uint16_t *const t = r + sp[0];
        pg_b32 v;
        if (isa == PG_ISA_AVX2 || PG_VEC_BASE_LOOKUP) {
            if (!wide)
                v = pg_b32_lookup16(t, c, isa);
            else
                v = pg_b32_lookup16(t, c + 0x70, isa) | pg_b32_lookup16(t + 8, c - 16, isa);
        } else {   /* no byte shuffle (SSE2): value by value, each by its first byte index */
            pg_h16 h;
            for (int i = 0; i < 16; i++) h[i] = t[c[2 * i] >> 1];
            v = (pg_b32)h;
        }
        pg_store_pair(dst + j, dst2 ? dst2 + j : NULL, (pg_f8)v, nt);
        if (j + 16 == W) break;
    }
}

/*
 * Kernel = stride = 2 along W (g->dup2): a grad_input row 32 bytes at a time straight from
 * its grad_output row.  Each block of grad_output values
 * (8 16-bit, 4 float32; 4 and 2 for a last half block) is weighted and rounded in
 * registers as its R row would be (pg_r_row_h16, pg_r_row_f32: the same products, the same
 * rounding) and each value put twice in place, so no R row is stored or read back.
 */
PG_VEC_INLINE pg_f8 pg_dup2_block(const char *src, const float *ww, pg_f8 kv, ptrdiff_t i,
                                  int half, int kind, int isa)
{
    if (kind == 0) {
        const float *s = (const float *)src + i;
        pg_f4 x = (pg_f4)(half ? pg_h8_load_lo(s) : pg_h8_load(s));
        if (ww) x = x * (pg_f4)(half ? pg_h8_load_lo(ww + i) : pg_h8_load(ww + i));
        x = (pg_f4)pg_f8_lo(kv) * x;
        return pg_f4_twice(x, isa);
    }
    const uint16_t *s = (const uint16_t *)src + i;
    const pg_h8 h = half ? pg_h8_load_lo(s) : pg_h8_load(s);
    pg_f8 x = kind == 1 ? (pg_f8)(pg_h8_to_u8(h, isa) << 16) : pg_f8_from_f16(h, isa);
    if (ww) x = x * (half ? pg_f8_load16(ww + i, isa) : pg_f8_load(ww + i));
    x = kv * x;
    const pg_u8 v = kind == 1 ? pg_item_bf16_u8(x, isa) : pg_h8_to_u8(pg_f8_to_f16(x, isa), isa);
    return (pg_f8)pg_u8_twice16(v, isa);
}

/* the row r0, and r1 where it is not NULL, formed so: W even, and at least one block long
 * (32 bytes) or W * es a multiple of 16.  Where W * es is a multiple of 16 the row ends in
 * whole blocks or a half block; otherwise its last block overlaps the one before (the same
 * values again).  Streamed 16 bytes at a time where nt (both rows 16-byte aligned, W * es a
 * multiple of 16: pg_store_pair), which is faster than whole 32-byte streamed stores with
 * the row 16 bytes past a boundary built from two blocks in turn */
PG_VEC_INLINE void pg_dup2_rows_body(char *r0, char *r1, const char *src, const float *ww,
                                     float k, ptrdiff_t W, int kind, int nt, int isa)
{
    const ptrdiff_t es = kind ? 2 : 4, V = 32 / es;   /* values a block */
    const pg_f8 kv = pg_f8_set1_isa(k, isa);
    ptrdiff_t j = 0;
    for (; j + V <= W; j += V)
        pg_store_pair(r0 + j * es, r1 ? r1 + j * es : NULL,
                      pg_dup2_block(src, ww, kv, j / 2, 0, kind, isa), nt);
    if (j == W)
        return;
    if ((W - j) * es != 16) {
        j = W - V;
        pg_store_pair(r0 + j * es, r1 ? r1 + j * es : NULL,
                      pg_dup2_block(src, ww, kv, j / 2, 0, kind, isa), 0);
        return;
    }
    /* a last half block */
    const pg_h8 h = pg_f8_lo(pg_dup2_block(src, ww, kv, j / 2, 1, kind, isa));
    char *const p0 = r0 + j * es, *const p1 = r1 + j * es;
    if (nt) {
        pg_h8_stream(p0, h);
        if (r1) pg_h8_stream(p1, h);
        return;
    }
    pg_h8_store(p0, h);
    if (r1) pg_h8_store(p1, h);
}

PG_VEC_INLINE void pg_dup2_rows(char *r0, char *r1, const char *src, const float *ww, float k,
                                ptrdiff_t W, int kind, int nt, int isa)
{
    if (nt) pg_dup2_rows_body(r0, r1, src, ww, k, W, kind, 1, isa);
    else pg_dup2_rows_body(r0, r1, src, ww, k, W, kind, 0, isa);
}

/*
 * Non-overlapping windows (g->single): every grad_input value is one grad_output value
 * times its weights.  Each grad_output value is weighted (and rounded, for 16-bit) once,
 * into R (one row of Wo + 2 per E row, the sentinel slots included); the first grad_input
 * row an R row covers picks its values from it through the taps, the others copy that
 * row: the same bits as expanding the rows and combining one term.  kind: 0 float32,
 * 1 bfloat16, 2 float16.  pg_item_single_body plans the item and walks its planes and
 * runs of rows; the functions before it do the parts.
 */

/* the item's R rows, one per E row (od0..od1, oh0..oh0 + noh) */
PG_VEC_INLINE void pg_single_r_rows(const pg_item_f32 *g, const char *gbase, char *R,
                                    ptrdiff_t od0, ptrdiff_t od1, ptrdiff_t oh0,
                                    ptrdiff_t noh, int kind, int isa)
{
    const ptrdiff_t Wo = g->Wo, rl = Wo + 2, es = kind ? 2 : 4;
    for (ptrdiff_t od = od0; od < od1; od++) {
        for (ptrdiff_t oh = oh0; oh < oh0 + noh; oh++) {
            const char *src = gbase + (od * g->gs2 + oh * g->gs3) * es;
            char *r = R + ((od - od0) * noh + (oh - oh0)) * rl * es;
            const float k = g->wd[od] * g->wh[oh];
            if (kind == 0) {
                pg_r_row_f32((float *)r, (const float *)src, g->ww, k, Wo, g->sent, isa);
                continue;
            }
            pg_r_row_h16((uint16_t *)r, (const uint16_t *)src, g->ww, k, Wo, kind == 1,
                         g->sent, isa);
        }
    }
}

/* a plane whose rows all go in pairs under one H window each (`pairs`): one tight loop of
 * pg_dup2_rows from grad_output plane a, without the run loop's tables and cases */
PG_VEC_INLINE void pg_single_pairs(const pg_item_f32 *g, const char *gbase, char *dst,
                                   ptrdiff_t a, ptrdiff_t h0, ptrdiff_t h1, int kind, int isa)
{
    const ptrdiff_t es = kind ? 2 : 4, W = g->W, step = g->xs3 * es;
    const char *const gd = gbase + a * g->gs2 * es;
    const ptrdiff_t gstep = g->gs3 * es;
    const int64_t *const hlo = g->hlo;
    const float *const wh = g->wh, *const ww = g->ww;
    const float kd = g->wd[a];
    /* streamed as the run loop streams a pair: every row 16-byte aligned */
    if (g->pair_nt && ((uintptr_t)dst % 16u) == 0 && step % 16 == 0) {
        for (ptrdiff_t ih = h0; ih < h1; ih += 2, dst += 2 * step)
            pg_dup2_rows_body(dst, dst + step, gd + hlo[ih] * gstep, ww, kd * wh[hlo[ih]], W,
                              kind, 1, isa);
    } else {
        for (ptrdiff_t ih = h0; ih < h1; ih += 2, dst += 2 * step)
            pg_dup2_rows_body(dst, dst + step, gd + hlo[ih] * gstep, ww, kd * wh[hlo[ih]], W,
                              kind, 0, isa);
    }
}

/* kernel = stride = 2 along W, a pair of rows streamed: each value of R row r twice, 16
 * bytes to each row at a time (W * es a multiple of 16, so no store overlaps another) */
PG_VEC_INLINE void pg_single_dup2_nt(char *dst, char *dst2, const char *r, ptrdiff_t W,
                                     ptrdiff_t es)
{
    const ptrdiff_t b32 = 32 / es;
    for (ptrdiff_t j = 0; j < W; j += b32) {
        const char *const s = r + j / 2 * es;
        const ptrdiff_t o = j * es;
        const int whole = j + b32 <= W;
        const pg_h8 v = whole ? pg_h8_load(s) : pg_h8_load_lo(s);
        const pg_h8 lo = pg_h8_twice_lo(v, es);
        pg_h8_stream(dst + o, lo);
        pg_h8_stream(dst2 + o, lo);
        if (whole) {
            const pg_h8 hi = pg_h8_twice_hi(v, es);
            pg_h8_stream(dst + o + 16, hi);
            pg_h8_stream(dst2 + o + 16, hi);
        }
    }
}

/* kernel = stride = 2 along W (W >= 32 / es): each value of R row r twice, from 32 bytes
 * of R to 64 of grad_input (16 to 32 where the row is shorter), to dst and, where `two`,
 * dst2 too; the last block starts at an even column and overlaps the one before (equal
 * values again), an odd W's last column is left to the caller: the columns done */
PG_VEC_INLINE ptrdiff_t pg_single_dup2(char *dst, char *dst2, const char *r, ptrdiff_t W,
                                       ptrdiff_t es, int two, int isa)
{
    const ptrdiff_t b32 = 32 / es, blk = W >= 2 * b32 ? 2 * b32 : b32;
    ptrdiff_t j = 0;
    for (;; j += blk) {
        if (j + blk > W) j = (W - blk) & ~(ptrdiff_t)1;
        const char *const s = r + j / 2 * es;
        const ptrdiff_t o = j * es;
        if (blk > b32) {
            pg_f8 a, b;
            pg_f8_twice(pg_f8_load(s), &a, &b, (int)es, isa);
            pg_f8_store(dst + o, a);
            pg_f8_store(dst + o + 32, b);
            if (two) {
                pg_f8_store(dst2 + o, a);
                pg_f8_store(dst2 + o + 32, b);
            }
        } else {
            const pg_h8 v = pg_h8_load(s);
            const pg_h8 lo = pg_h8_twice_lo(v, es), hi = pg_h8_twice_hi(v, es);
            pg_h8_store(dst + o, lo);
            pg_h8_store(dst + o + 16, hi);
            if (two) {
                pg_h8_store(dst2 + o, lo);
                pg_h8_store(dst2 + o + 16, hi);
            }
        }
        if (j + blk >= W - 1) break;
    }
    return j + blk;
}

/* columns j.. of the row dst (and dst2 where `two`) picked from R row r: through the spread
 * table or the runs of equal taps where the row is whole (j = 0, not two), else column by
 * column.  The spreads store the first two rows at once (c >= 2), streamed where pairs
 * are.  The rows it made (1 or 2) */
PG_VEC_INLINE ptrdiff_t pg_single_pick(const pg_item_f32 *g, char *dst, char *dst2,
                                       const char *r, ptrdiff_t j, ptrdiff_t c, int two,
                                       ptrdiff_t es, int isa)
{
    const ptrdiff_t W = g->W;
    const int64_t *tap = g->wtap;
    if (!two && j == 0 && (es == 2 ? g->spread : g->spread32) != NULL) {
        const int spread2 = c >= 2;
        const int nt = g->pair_nt && c == 2 && ((uintptr_t)dst % 16u) == 0;
        /* the three forms with their arguments constant in the loops (a row and its flags
         * as variables cost the one-row planes more) */
#define PG_SPREAD_ROWS(D2, NT)                                                              \
        if (es == 2)                                                                        \
            pg_spread16_row((uint16_t *)dst, (uint16_t *)(D2), (const uint16_t *)r,         \
                            g->spread, W, g->spread_wide, NT, isa);                         \
        else                                                                                \
            pg_spread32_rows((float *)dst, (float *)(D2), (const float *)r, g->spread32, W, \
                             g->spread32_wide, NT, isa);
        if (nt) { PG_SPREAD_ROWS(dst2, 1) }
        else if (spread2) { PG_SPREAD_ROWS(dst2, 0) }
        else { PG_SPREAD_ROWS(NULL, 0) }
#undef PG_SPREAD_ROWS
        return spread2 ? 2 : 1;
    }
    if (!two && j == 0 && g->wrun) {
        if (es == 2)
            PG_ROWS(isa, pg_runs_u16, (uint16_t *)dst, (const uint16_t *)r, tap, g->wrun,
                    g->nrun, W);
        else
            PG_ROWS(isa, pg_runs_f32, (float *)dst, (const float *)r, tap, g->wrun, g->nrun,
                    W, 1.0f, 0);
    } else if (es == 2) {
        for (; j < W; j++) {
            const uint16_t v = ((const uint16_t *)r)[tap[j]];
            ((uint16_t *)dst)[j] = v;
            if (two) ((uint16_t *)dst2)[j] = v;
        }
    } else {
        for (; j < W; j++) {
            const float v = ((const float *)r)[tap[j]];
            ((float *)dst)[j] = v;
            if (two) ((float *)dst2)[j] = v;
        }
    }
    return two ? 2 : 1;
}

/* a run of c rows from dst on (step bytes apart) under the same windows, E row e (plane a,
 * row p of grad_output): one row formed, the others copies.  first[e]: the row already
 * made from it, where the item keeps that table (else NULL) */
PG_VEC_INLINE void pg_single_run(const pg_item_f32 *g, const char *gbase, const char *R,
                                 char *dst, ptrdiff_t step, ptrdiff_t c, ptrdiff_t a,
                                 ptrdiff_t p, ptrdiff_t e, const char **first, int direct,
                                 int kind, int isa)
{
    const ptrdiff_t W = g->W, es = kind ? 2 : 4, rl = g->Wo + 2;
    if (first && first[e]) {
        PG_ROWS(isa, pg_copy_row, dst, step, c, first[e], W * es);
        return;
    }
    if (first) first[e] = dst;
    if (direct) {
        /* the run's first two rows formed at once, streamed where pairs are (and for a run
         * of one row) */
        const int nt = g->pair_nt && c <= 2 && ((uintptr_t)dst % 16u) == 0 && step % 16 == 0;
        pg_dup2_rows(dst, c >= 2 ? dst + step : NULL, gbase + (a * g->gs2 + p * g->gs3) * es,
                     g->ww, g->wd[a] * g->wh[p], W, kind, nt, isa);
        if (c > 2) PG_ROWS(isa, pg_copy_row, dst + 2 * step, step, c - 2, dst, W * es);
        return;
    }
    const char *r = R + e * rl * es;
    char *const dst2 = dst + step;
#if PG_HAVE_STREAM
    if (g->pair_nt && g->dup2 && c == 2 && ((uintptr_t)dst % 16u) == 0) {
        pg_single_dup2_nt(dst, dst2, r, W, es);
        return;
    }
#endif
    const int two = c >= 2 && g->dup2 && W >= 32 / es;
    const ptrdiff_t j = g->dup2 && W >= 32 / es ? pg_single_dup2(dst, dst2, r, W, es, two, isa)
                                                : 0;
    const ptrdiff_t t0 = pg_single_pick(g, dst, dst2, r, j, c, two, es, isa);
    if (c > t0) PG_ROWS(isa, pg_copy_row, dst + t0 * step, step, c - t0, dst, W * es);
}

PG_VEC_INLINE void pg_item_single_body(const pg_item_f32 *g, const void *gbase_, void *xbase_,
                                       ptrdiff_t d0, ptrdiff_t d1, ptrdiff_t h0, ptrdiff_t h1,
                                       void *PG_RESTRICT R_, int kind, int isa)
{
    const ptrdiff_t W = g->W, rl = g->Wo + 2;
    const ptrdiff_t es = kind ? 2 : 4;
    const ptrdiff_t od0 = g->dlo[d0], od1 = g->dhi[d1 - 1];
    const ptrdiff_t oh0 = g->hlo[h0], oh1 = g->hhi[h1 - 1];
    const ptrdiff_t noh = oh1 > oh0 ? oh1 - oh0 : 0;
    const char *gbase = (const char *)gbase_;
    char *xbase = (char *)xbase_, *R = (char *)R_;
    /* kernel = stride = 2 along W, W even, rows of 32 bytes or more or of whole 16-byte
     * halves: rows formed straight from grad_output (pg_dup2_rows), no R rows.  Not 16-bit
     * rows of up to 64 bytes in the cache, where the R rows are faster */
    const int direct = g->dup2 && W % 2 == 0 && ((W * es) % 16 == 0 || W * es >= 32)
                       && (kind == 0 || W * es > 64 || g->pair_nt);
    if (!direct) pg_single_r_rows(g, gbase, R, od0, od1, oh0, noh, kind, isa);
    /* after the R rows: for each, the first grad_input row made from it, which later runs
     * of rows copy: the next D planes under the same window where pg_item_same_d cannot
     * copy them as one slab (rows not contiguous).  Otherwise each R row serves one run of
     * rows (the rows, and the planes, under one window are consecutive) and there is no
     * table to clear */
    const ptrdiff_t nE = (od1 - od0) * noh;
    int reuse = 0;
    for (ptrdiff_t idd = d0 + 1; idd < d1 && g->xs3 != W && !reuse; idd++)
        reuse = g->dlo[idd] == g->dlo[idd - 1] && g->dhi[idd] == g->dhi[idd - 1];
    const char **first = NULL;
    if (reuse) {
        first = (const char **)(R + ((nE * rl * es + 7) & ~(ptrdiff_t)7));
        for (ptrdiff_t e = 0; e < nE; e++) first[e] = NULL;
    }
    /* the item's rows all in pairs under one H window each (kernel = stride = 2 along H
     * too, or adaptive 2:1): each plane through pg_single_pairs */
    int pairs = direct && !first && (h1 - h0) % 2 == 0;
    for (ptrdiff_t ih = h0; ih < h1 && pairs; ih += 2)
        pairs = g->hrun[ih] == 2 && g->hhi[ih] > g->hlo[ih];
    /* one covered row a plane, spread from its R row (small planes run as one row each,
     * _plan.FLAT_PLANE_W): the same calls as the run loop's, without its cases */
    const int64_t *const sp = es == 2 ? g->spread : g->spread32;
    const int flat1 = h1 - h0 == 1 && !direct && !first && sp != NULL
                      && !(g->dup2 && W >= 32 / es) && g->hhi[h0] > g->hlo[h0];
    for (ptrdiff_t idd = d0, lead = d0; idd < d1; idd++) {
        if (pg_item_same_d(g, d0, idd)) {
            PG_ROWS(isa, pg_item_copy_d, g, xbase, idd, lead, h0, h1, es);
            continue;
        }
        lead = idd;
        const ptrdiff_t a = g->dlo[idd], step = g->xs3 * es;
        const int dcov = g->dhi[idd] > a;
        if (flat1 && dcov) {
            char *dst = xbase + (idd * g->xs2 + h0 * g->xs3) * es;
            const char *r = R + ((a - od0) * noh + (g->hlo[h0] - oh0)) * rl * es;
            if (es == 2)
                pg_spread16_row((uint16_t *)dst, NULL, (const uint16_t *)r, sp, W,
                                g->spread_wide, 0, isa);
            else
                pg_spread32_rows((float *)dst, NULL, (const float *)r, sp, W,
                                 g->spread32_wide, 0, isa);
            continue;
        }
        if (pairs && dcov) {
            pg_single_pairs(g, gbase, xbase + (idd * g->xs2 + h0 * g->xs3) * es, a, h0, h1,
                            kind, isa);
            continue;
        }
        for (ptrdiff_t ih = h0; ih < h1;) {
            /* a run of c rows under the same H window */
            const ptrdiff_t p = g->hlo[ih], q = g->hhi[ih];
            const ptrdiff_t c = pg_item_hrun(g, ih, h1);
            char *dst = xbase + (idd * g->xs2 + ih * g->xs3) * es;
            ih += c;
            if (q <= p || !dcov) {
                for (ptrdiff_t t = 0; t < c; t++)
                    memset(dst + t * step, 0, (size_t)(W * es));   /* +0.0 in every format */
                continue;
            }
            pg_single_run(g, gbase, R, dst, step, c, a, p, (a - od0) * noh + (p - oh0), first,
                          direct, kind, isa);
        }
    }
}

/* one copy of the item per instruction set and format, each with its element size a
 * constant */
#define PG_SINGLE_ISA(NAME, ATTR, ISA)                                                      \
ATTR static void NAME(const pg_item_f32 *g, const void *gbase, void *xbase, ptrdiff_t d0,   \
                      ptrdiff_t d1, ptrdiff_t h0, ptrdiff_t h1, void *PG_RESTRICT R,        \
                      int kind)                                                             \
{                                                                                           \
    if (kind == 0) pg_item_single_body(g, gbase, xbase, d0, d1, h0, h1, R, 0, ISA);         \
    else if (kind == 1) pg_item_single_body(g, gbase, xbase, d0, d1, h0, h1, R, 1, ISA);    \
    else pg_item_single_body(g, gbase, xbase, d0, d1, h0, h1, R, 2, ISA);                   \
}

PG_SINGLE_ISA(pg_item_single_base, , PG_ISA_BASE)
#if PG_X86_DISPATCH
/* at a 64-byte boundary: where its loops lie against the 32-byte fetch blocks otherwise
 * depends on the code linked before it (docs/performance.md, pg_item.h) */
PG_SINGLE_ISA(pg_item_single_avx2, PG_TARGET_AVX2_F16C __attribute__((aligned(64))), PG_ISA_AVX2)
#endif
#endif

#if PG_VEC
/*
 * Overlapping D or H windows over one tap per column (g->spread, 16-bit): each grad_input
 * value is a sum over its covering rows of k * (grad_output value times its W weight), so
 * the sum depends on the column only through its tap.  Each E row is therefore kept at the
 * output width (N rows: Wo values, the two sentinel slots if used, zeros to a multiple of
 * 8), the covering N rows are summed and rounded there, once per window rather than once
 * per column, and the rounded row is spread to the input width by byte shuffles
 * (pg_spread16_row) and copied to every row and plane with the same covering windows.  The
 * same products summed in the same order and rounded the same way as the E rows' combine:
 * the same bits.
 */
/* one N row: k * (grad_output row times the W weights), the sentinel slots (k * +0.0,
 * k * -0.0) where nw = Wo + 2, then zeros up to nw + 8 */
PG_VEC_INLINE void pg_n_row_h16(float *e, const uint16_t *src, const float *ww, float k,
                                ptrdiff_t Wo, ptrdiff_t nw, int bf16, int isa)
{
    const pg_f8 kv = pg_f8_set1_isa(k, isa);
    if (Wo < 8) {
        for (ptrdiff_t j = 0; j < Wo; j++) e[j] = pg_h16_kx1(src, ww, k, j, bf16, isa);
    } else {
        PG_FOR8_OVERLAP(j, Wo, {
            pg_f8_store(e + j, pg_h16_kx8(src, ww, kv, j, bf16, isa));
        })
    }
    if (nw > Wo) {
        e[Wo] = k * 0.0f;
        e[Wo + 1] = k * -0.0f;
    }
    pg_f8_store(e + nw, pg_f8_set1_isa(0.0f, isa));
}

/* the sum of nr >= 1 E rows at columns j .. j + 7, left to right (pg_stream.h's
 * pg_combine8_avx2): r0, r1, r2 the first three (in registers), rows[] all of them */
PG_VEC_INLINE pg_f8 pg_item_sum8(const float *r0, const float *r1, const float *r2,
                                 const float **rows, ptrdiff_t nr, ptrdiff_t j)
{
    if (nr == 1) return pg_f8_load(r0 + j);
    pg_f8 s = pg_f8_load(r0 + j) + pg_f8_load(r1 + j);
    if (nr == 2) return s;
    s = s + pg_f8_load(r2 + j);
    for (ptrdiff_t r = 3; r < nr; r++) s = s + pg_f8_load(rows[r] + j);
    return s;
}

PG_VEC_INLINE void pg_item_narrow_body(const pg_item_f32 *g, const uint16_t *gbase,
                                       uint16_t *xbase, ptrdiff_t d0, ptrdiff_t d1,
                                       ptrdiff_t h0, ptrdiff_t h1, float *PG_RESTRICT E,
                                       const float **rows, uint16_t *PG_RESTRICT R, int bf16,
                                       int isa)
{
    const ptrdiff_t W = g->W, Wo = g->Wo, nw = g->sent ? Wo + 2 : Wo, nwp = (nw + 7) & ~7;
    const ptrdiff_t od0 = g->dlo[d0], od1 = g->dhi[d1 - 1];
    const ptrdiff_t oh0 = g->hlo[h0], oh1 = g->hhi[h1 - 1];
    const ptrdiff_t noh = oh1 > oh0 ? oh1 - oh0 : 0;
    const ptrdiff_t step = g->xs3 * 2, dstep = g->xs2 * 2;
    float *e = E;
    for (ptrdiff_t od = od0; od < od1; od++)
        for (ptrdiff_t oh = oh0; oh < oh1; oh++, e += W)
            pg_n_row_h16(e, gbase + od * g->gs2 + oh * g->gs3, g->ww, g->wd[od] * g->wh[oh],
                         Wo, nw, bf16, isa);
    /* rows one after another in each plane (as pg_item_same_d asks) */
    const int whole = g->xs3 == W;
    for (ptrdiff_t idd = d0; idd < d1;) {
        /* the planes from idd on with the same covering D windows get the same rows */
        const ptrdiff_t nd = pg_item_drun(g, idd, d1);
        for (ptrdiff_t ih = h0; ih < h1;) {
            const ptrdiff_t c = pg_item_hrun(g, ih, h1);
            char *const dst = (char *)(xbase + idd * g->xs2 + ih * g->xs3);
            const ptrdiff_t nr = pg_item_cover(g, E, od0, oh0, noh, idd, ih, rows);
            ih += c;
            if (nr == 0) {
                for (ptrdiff_t u = 0; u < (whole ? 1 : nd); u++)
                    for (ptrdiff_t t = 0; t < c; t++)
                        memset(dst + u * dstep + t * step, 0, (size_t)W * 2);   /* +0.0 */
                continue;
            }
            const float *const r0 = rows[0], *const r1 = nr > 1 ? rows[1] : rows[0];
            const float *const r2 = nr > 2 ? rows[2] : rows[0];
            for (ptrdiff_t j = 0; j < nwp; j += 8) {
                const pg_f8 v = pg_item_sum8(r0, r1, r2, rows, nr, j);
                pg_h8_store(R + j, bf16 ? pg_f8_to_bf16_isa(v, isa)
                                        : pg_f8_to_f16(v, isa));
            }
            /* one row spread, the others (c rows in each of nd planes) copies of it */
            pg_spread16_row((uint16_t *)dst, NULL, R, g->spread, W, g->spread_wide, 0, isa);
            if (c > 1) pg_copy_row_body(dst + step, step, c - 1, dst, W * 2);
            if (!whole)
                for (ptrdiff_t u = 1; u < nd; u++)
                    pg_copy_row_body(dst + u * dstep, step, c, dst, W * 2);
        }
        if (whole)   /* the other planes copied whole from the first */
            for (ptrdiff_t u = 1; u < nd; u++)
                PG_ROWS(isa, pg_item_copy_d, g, xbase, idd + u, idd, h0, h1, 2);
        idd += nd;
    }
}

/* a grad_input row of n >= 8 values, the sum of nr >= 1 E rows (r0, r1, r2 the first three,
 * rows[] all of them) rounded to float16 eight values at a time, or to bfloat16 sixteen at
 * a time (two blocks rounded into one store; AVX2 rounds the sixteen at once), the last
 * block overlapping the one before (equal values again): pg_stream.h's fused 16-bit
 * combine, the same sums rounded the same way */
PG_VEC_INLINE void pg_item_combine_h16_body(uint16_t *dst, const float *r0, const float *r1,
                                            const float *r2, const float **rows, ptrdiff_t nr,
                                            ptrdiff_t n, int bf16, int isa)
{
    if (!bf16) {
        PG_FOR8_OVERLAP(j, n, {
            pg_h8_store(dst + j, pg_f8_to_f16(pg_item_sum8(r0, r1, r2, rows, nr, j), isa));
        })
        return;
    }
    ptrdiff_t j = 0;
    for (; j + 16 <= n; j += 16)
        pg_f8x2_store_bf16(dst + j, pg_item_sum8(r0, r1, r2, rows, nr, j),
                           pg_item_sum8(r0, r1, r2, rows, nr, j + 8), isa);
    if (j < n && n >= 16) {
        pg_f8x2_store_bf16(dst + n - 16, pg_item_sum8(r0, r1, r2, rows, nr, n - 16),
                           pg_item_sum8(r0, r1, r2, rows, nr, n - 8), isa);
        return;
    }
    for (; j < n; j += 8) {
        if (j + 8 > n) j = n - 8;
        pg_h8_store(dst + j, pg_f8_to_bf16_isa(pg_item_sum8(r0, r1, r2, rows, nr, j), isa));
    }
}

/* the same for any n (r0, r1, r2 the first three rows, or r0 where there are fewer), the
 * common term counts as constants, so that the loops carry no test on them */
PG_VEC_INLINE void pg_item_combine_h16(uint16_t *dst, const float *r0, const float *r1,
                                       const float *r2, const float **rows, ptrdiff_t nr,
                                       ptrdiff_t n, int bf16, int isa)
{
    if (n < 8) {
        for (ptrdiff_t j = 0; j < n; j++) {
            const float v = pg_combine1_f32(rows, nr, j);
            dst[j] = bf16 ? pg_f32_to_bf16(v) : pg_f32_to_f16_isa(v, isa);
        }
        return;
    }
    if (nr == 1) pg_item_combine_h16_body(dst, r0, r0, r0, rows, 1, n, bf16, isa);
    else if (nr == 2) pg_item_combine_h16_body(dst, r0, r1, r0, rows, 2, n, bf16, isa);
    else if (nr == 3) pg_item_combine_h16_body(dst, r0, r1, r2, rows, 3, n, bf16, isa);
    else pg_item_combine_h16_body(dst, r0, r1, r2, rows, nr, n, bf16, isa);
}

/* the same for nr >= 4 E rows rs floats apart from r0 on, n >= 8 (AVX2: pg_stream.h's, out
 * of line) */
PG_VEC_INLINE void pg_item_combine_h16_strided(uint16_t *dst, const float *r0, ptrdiff_t rs,
                                               ptrdiff_t nr, ptrdiff_t n, int bf16, int isa)
{
#if PG_X86_DISPATCH
    if (isa == PG_ISA_AVX2) {
        pg_combine_h16_strided(dst, r0, rs, nr, n, bf16);
        return;
    }
#endif
    PG_FOR8_OVERLAP(j, n, {
        const pg_f8 v = pg_sum8_strided(r0 + j, rs, nr);
        pg_h8_store(dst + j, bf16 ? pg_f8_to_bf16_isa(v, isa) : pg_f8_to_f16(v, isa));
    })
}

/*
 * The same item with bfloat16 / float16 grad_output and grad_input: rows widened and
 * W-weighted as they are loaded, each grad_input row summed, rounded once and stored by the
 * fused 16-bit combine (pg_item_combine_h16).  Where the W interior has period 1 or 2, its
 * E rows are formed as the float32 item forms them (one loop per pair of phase term
 * counts), and a grad_input row under one D window finds its E rows without the cover
 * table.
 */
PG_VEC_INLINE void pg_item_h16_body(const pg_item_f32 *g, const uint16_t *gbase,
                                    uint16_t *xbase, ptrdiff_t d0, ptrdiff_t d1, ptrdiff_t h0,
                                    ptrdiff_t h1, float *PG_RESTRICT grow, float *PG_RESTRICT E,
                                    const float **rows, float *tmp, int bf16, int isa)
{
    const ptrdiff_t W = g->W, Wo = g->Wo;
    const ptrdiff_t od0 = g->dlo[d0], od1 = g->dhi[d1 - 1];
    const ptrdiff_t oh0 = g->hlo[h0], oh1 = g->hhi[h1 - 1];
    const ptrdiff_t noh = oh1 > oh0 ? oh1 - oh0 : 0;
    grow[Wo] = 0.0f;
    grow[Wo + 1] = -0.0f;
    if (g->single) {
        PG_ROWS(isa, pg_item_single, g, gbase, xbase, d0, d1, h0, h1, E, bf16 ? 1 : 2);
        return;
    }
    if (g->spread) {   /* tmp: the rounded row (W floats' room, nwp + 8 values used) */
        uint16_t *const R = (uint16_t *)tmp;
        if (bf16) pg_item_narrow_body(g, gbase, xbase, d0, d1, h0, h1, E, rows, R, 1, isa);
        else pg_item_narrow_body(g, gbase, xbase, d0, d1, h0, h1, E, rows, R, 0, isa);
        return;
    }
    if (pg_item_erows_ok(g)) {
        PG_ROWS(isa, pg_item_erows_h16, g, gbase, od0, od1, oh0, oh1, E, bf16);
    } else {
        for (ptrdiff_t od = od0; od < od1; od++) {
            for (ptrdiff_t oh = oh0; oh < oh1; oh++) {
                const uint16_t *src = gbase + od * g->gs2 + oh * g->gs3;
                pg_item_load_h16(grow, src, g->ww, Wo, bf16, isa);
                pg_item_expand(g, grow, E + ((od - od0) * noh + (oh - oh0)) * W,
                               g->wd[od] * g->wh[oh], tmp, isa);
            }
        }
    }
    for (ptrdiff_t idd = d0, lead = d0; idd < d1; idd++) {
        if (pg_item_same_d(g, d0, idd)) {
            PG_ROWS(isa, pg_item_copy_d, g, xbase, idd, lead, h0, h1, 2);
            continue;
        }
        lead = idd;
        /* one covering D window (every 2-D case): row p of it at E + (eb + p) * W; the
         * fields in locals (the stores through rows[] and dst may alias *g) */
        const ptrdiff_t a = g->dlo[idd], nd = g->dhi[idd] - a;
        const ptrdiff_t eb = (a - od0) * noh - oh0, xs3 = g->xs3;
        const int64_t *PG_RESTRICT hlo = g->hlo, *PG_RESTRICT hhi = g->hhi;
        const int64_t *PG_RESTRICT hrun = g->hrun;
        uint16_t *const plane = xbase + idd * g->xs2;
        if (g->hsteps && nd == 1 && xs3 == W && W >= 8) {
            /* runs of rows whose windows move on by one row each (stride 1 along H,
             * g->hstep): their E rows follow each other as the rows do, so a run is one
             * rounded sum of run * W values; a row of a run of one still copies its sum
             * to the rows after it with the same windows */
            const int64_t *PG_RESTRICT hstep = g->hstep;
            for (ptrdiff_t ih = h0; ih < h1;) {
                uint16_t *dst = plane + ih * W;
                const ptrdiff_t p = hlo[ih], nh = hhi[ih] - p;
                const ptrdiff_t run = hstep[ih] < h1 - ih ? hstep[ih] : h1 - ih;
                const ptrdiff_t n = run * W;
                const float *const r0 = E + (eb + p) * W, *const r1 = r0 + W, *const r2 = r1 + W;
                const ptrdiff_t nr = nh > 0 ? nh : 0;
                if (nr == 0) memset(dst, 0, (size_t)n * sizeof(uint16_t));
                else if (nr > 3) pg_item_combine_h16_strided(dst, r0, W, nr, n, bf16, isa);
                else pg_item_combine_h16(dst, r0, r1, r2, rows, nr, n, bf16, isa);
                ptrdiff_t c = run;
                if (run == 1) {
                    c = hrun[ih] < h1 - ih ? hrun[ih] : h1 - ih;   /* pg_item_hrun */
                    if (c > 1) pg_copy_row_body((char *)(dst + W), W * 2, c - 1,
                                                (const char *)dst, W * 2);
                }
                ih += c;
            }
            continue;
        }
        for (ptrdiff_t ih = h0; ih < h1; ih++) {
            uint16_t *dst = plane + ih * xs3;
            const ptrdiff_t p = hlo[ih], nh = hhi[ih] - p;
            const float *r0, *r1, *r2;
            ptrdiff_t nr;
            if (nd == 1 && nh <= 3) {   /* consecutive E rows, set without the table */
                nr = nh > 0 ? nh : 0;
                r0 = E + (eb + p) * W;
                r1 = r0 + W;
                r2 = r1 + W;
                rows[0] = r0;   /* for the scalar loop of rows under 8 values */
                rows[1] = r1;
                rows[2] = r2;
            } else {
                nr = pg_item_cover(g, E, od0, oh0, noh, idd, ih, rows);
                r0 = rows[0];
                r1 = nr > 1 ? rows[1] : r0;
                r2 = nr > 2 ? rows[2] : r0;
            }
            if (nr == 0) memset(dst, 0, (size_t)W * sizeof(uint16_t));   /* +0.0 in both */
            else if (nr > 3 && nd == 1 && W >= 8)   /* E rows W apart */
                pg_item_combine_h16_strided(dst, r0, W, nr, W, bf16, isa);
            else pg_item_combine_h16(dst, r0, r1, r2, rows, nr, W, bf16, isa);
            /* the rows after it with the same covering windows have the same E rows and
             * the same sum: its rounded values again (stride >= kernel, adaptive windows) */
            const ptrdiff_t c = hrun[ih] < h1 - ih ? hrun[ih] : h1 - ih;   /* pg_item_hrun */
            if (c > 1) pg_copy_row_body((char *)(dst + xs3), xs3 * 2, c - 1,
                                        (const char *)dst, W * 2);
            ih += c - 1;
        }
    }
}

/* one copy per instruction set */
static void pg_item_h16_base(const pg_item_f32 *g, const uint16_t *gbase, uint16_t *xbase,
                             ptrdiff_t d0, ptrdiff_t d1, ptrdiff_t h0, ptrdiff_t h1,
                             float *PG_RESTRICT grow, float *PG_RESTRICT E, const float **rows,
                             float *tmp, int bf16)
{
    pg_item_h16_body(g, gbase, xbase, d0, d1, h0, h1, grow, E, rows, tmp, bf16, PG_ISA_BASE);
}
#if PG_X86_DISPATCH
PG_TARGET_AVX2_F16C
static void pg_item_h16_avx2(const pg_item_f32 *g, const uint16_t *gbase, uint16_t *xbase,
                             ptrdiff_t d0, ptrdiff_t d1, ptrdiff_t h0, ptrdiff_t h1,
                             float *PG_RESTRICT grow, float *PG_RESTRICT E, const float **rows,
                             float *tmp, int bf16)
{
    pg_item_h16_body(g, gbase, xbase, d0, d1, h0, h1, grow, E, rows, tmp, bf16, PG_ISA_AVX2);
}
#endif
#endif

/* 1 where the item ran in C: the AVX2 item where the CPU has it, else the baseline one
 * (float16 too: converted in lanes it costs less than the general code); 0 without the
 * vector layer: the caller runs the general code */
int pg_item_h16_run(const pg_item_f32 *g, const uint16_t *gbase, uint16_t *xbase,
                    ptrdiff_t d0, ptrdiff_t d1, ptrdiff_t h0, ptrdiff_t h1, float *grow,
                    float *E, const float **rows, float *tmp, int bf16)
{
#if PG_X86_DISPATCH
    if (pg_have_h16(bf16)) {
        pg_item_h16_avx2(g, gbase, xbase, d0, d1, h0, h1, grow, E, rows, tmp, bf16);
        return 1;
    }
#endif
#if PG_VEC
    pg_item_h16_base(g, gbase, xbase, d0, d1, h0, h1, grow, E, rows, tmp, bf16);
    return 1;
#else
    (void)g; (void)gbase; (void)xbase; (void)d0; (void)d1; (void)h0; (void)h1;
    (void)grow; (void)E; (void)rows; (void)tmp; (void)bf16;
    return 0;
#endif
}

void pg_item_f32_run(const pg_item_f32 *g, const float *gbase, float *xbase, ptrdiff_t d0,
                     ptrdiff_t d1, ptrdiff_t h0, ptrdiff_t h1, float *grow, float *E,
                     const float **rows, float *tmp)
{
#if PG_X86_DISPATCH
    if (g->single && pg_have_h16(0)) {
        pg_item_single_avx2(g, gbase, xbase, d0, d1, h0, h1, E, 0);
        return;
    }
    if (pg_have_avx2()) {
        (g->region ? pg_item_avx2_sw_f32 : pg_item_avx2_f32)(g, gbase, xbase, d0, d1, h0, h1,
                                                             grow, E, rows, tmp);
        return;
    }
#endif
#if PG_VEC
    if (g->single) {
        pg_item_single_base(g, gbase, xbase, d0, d1, h0, h1, E, 0);
        return;
    }
#endif
    (g->region ? pg_item_base_sw_f32 : pg_item_base_f32)(g, gbase, xbase, d0, d1, h0, h1,
                                                         grow, E, rows, tmp);
}

#endif   /* PG_ITEM_BODIES */

#endif

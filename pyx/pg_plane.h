/*
 * Small NCHW planes in registers: a work item of the small-plane lanes (_plan.gather_views6,
 * "tstore"), where each lane is a whole plane, computed plane by plane with each grad_output
 * row in one or two vectors and each E row formed from them by permutes, where the lanes
 * path moves every value between planes and lanes through 8 x 8 transposes and passes over
 * the item's rows five times.  Planes go PG_PLANE_CH at a time: their E rows, then each
 * grad_input row for all of them, so the per-row work is paid once per chunk.  The plan
 * takes this path where it measured faster (_plan.plane_regs; docs/performance.md).
 *
 * The arithmetic is the lanes path's, in the same order, so the bits are the same: each
 * grad_output value times its W weight; E[od, oh][w] = k(od, oh) * (the taps of w, added
 * left to right, with the tap table's +0.0 and -0.0 slots at Wo and Wo + 1); each
 * grad_input row the sum, left to right, of the E rows that cover it (+0.0 where none
 * does), rounded once to a 16-bit format.
 *
 * Rows of 8 or more are stored where they go (two overlapping vectors: columns [0, 8) and
 * [W - 8, W)); narrower rows, and outputs larger than the cache, go through a stage and
 * out in runs that follow each other in memory, streamed for the large outputs.  Taps
 * that slide with the column (stride 1) are loads from the staged rows at each tap's
 * offset rather than permutes (pg_plane_aff).
 *
 * Written once against the vector layer (pg_vec.h), built for AVX2 and F16C and for the
 * baseline (SSE2, NEON).  kind: 0 float32, 2 float16, 3 bfloat16 (the kernels' K_*
 * numbers).  pg_plane_item returns 0, having done nothing, where the item does not fit
 * (W > 16, Wo > 14: the row and its two slots in two vectors; more than PG_PLANE_TAPS
 * taps) or pg_tpose_isa finds no copy for the format (float16 without hardware
 * conversions; MSVC, no vector layer): the caller then takes the lanes path.
 */
#ifndef PG_PLANE_H
#define PG_PLANE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "pg_cpu.h"
#include "pg_half.h"
#include "pg_stream.h"
#include "pg_tpose.h"
#include "pg_vec.h"

/* the most bytes staged before they go out: a stage that stays in the level-1 cache with
 * the chunk's E rows (the sizes measured: docs/performance.md) */
#ifndef PG_PLANE_RUN
#define PG_PLANE_RUN 16384
#endif
#ifndef PG_PLANE_PREFETCH
#define PG_PLANE_PREFETCH 1
#endif
/* the most taps per input column of a plane in registers (its permutes) */
#define PG_PLANE_TAPS 4
/* planes formed together (E rows of this many planes: 64 bytes a plane and row) */
#ifndef PG_PLANE_CH
#define PG_PLANE_CH 16
#endif

typedef struct {
    const void *go;            /* the item's first plane of grad_output */
    void *gi;                  /* ... and of grad_input */
    ptrdiff_t L;               /* planes */
    ptrdiff_t gps, gs2, gs3;   /* grad_output plane, D and H strides (elements; W: 1) */
    ptrdiff_t xps, xs2, xs3;   /* grad_input likewise (xs3 = W: rows follow each other) */
    ptrdiff_t W, Wo, m;
    const int64_t *tap;        /* m taps per input column */
    const int64_t *dlo, *dhi, *hlo, *hhi;
    ptrdiff_t d0, d1, h0, h1;  /* the item's input box */
    const float *wd, *wh, *ww; /* ww NULL: no W weights */
    int kind;
    int stream;                /* stream the runs (an output larger than the cache) */
    float *E;                  /* scratch: 16 floats per E row and plane of a chunk */
    ptrdiff_t E_elems;
    void *stage;               /* scratch: stage_bytes, 64-byte aligned or not */
    ptrdiff_t stage_bytes;
} pg_plane_args;

#if PG_VEC
/* the stage's bytes [0, n) to dst: streamed, or copied */
static inline void pg_plane_flush(char *dst, const char *stage, ptrdiff_t n, int kind,
                                  int stream)
{
    if (n <= 0) return;
    if (!stream) {
        memcpy(dst, stage, (size_t)n);
    } else if (kind == 0) {
        pg_stream_f32((float *)dst, (const float *)stage, n / 4);
    } else {
        pg_stream_u16((uint16_t *)dst, (const uint16_t *)stage, n / 2);
    }
}

/* n <= 8 values of one row from p (t: the masks of n), widened, the others +0.0 */
PG_VEC_INLINE pg_f8 pg_plane_get8(const char *p, const pg_tail8 *t, int kind, int isa)
{
    if (kind == 0) return pg_f8_load_tail((const float *)p, t, isa);
    const pg_h8 h = pg_h8_load_tail((const uint16_t *)p, t, isa);
    return kind == 2 ? pg_f8_from_f16(h, isa) : pg_f8_from_bf16_isa(h, isa);
}

/* eight values stored at o, rounded to the element's format */
PG_VEC_INLINE void pg_plane_put8(char *o, pg_f8 v, int kind, int isa)
{
    if (kind == 0) pg_f8_store(o, v);
    else pg_h8_store(o, kind == 2 ? pg_f8_to_f16(v, isa) : pg_f8_to_bf16_isa(v, isa));
}

/* the item's fields and what follows from them, as locals of pg_plane_body (the stores
 * may alias anything: no strict aliasing) */
typedef struct {
    ptrdiff_t es, W, Wo, L, m;
    ptrdiff_t gps, gs2, gs3, xps, xs2, xs3;
    ptrdiff_t d0, d1, h0, h1;
    const int64_t *dlo, *dhi, *hlo, *hhi;
    const float *wd, *wh;
    const char *go;
    char *gi, *stage;
    float *E;
    ptrdiff_t od0, od1, oh0, oh1, noh;   /* the grad_output rows the item reads */
    ptrdiff_t rowb, nh;                  /* a row's bytes, the item's rows */
    /* wide: a row's 8-value stores stay inside it; two: a second vector (W > 8: a row of
     * exactly 8 is one vector, formed and stored once); direct: rows stored where they
     * go (wide and not streamed), else through the stage */
    int stream, wide, two, direct;
    ptrdiff_t CH, estep;   /* planes a chunk; floats from one E row to the next */
    ptrdiff_t gspan;       /* the bytes of a plane's grad_output rows read (from its first) */
} pg_plane_geo;

PG_VEC_INLINE pg_plane_geo pg_plane_geo_of(const pg_plane_args *a, int kind)
{
    pg_plane_geo g;
    g.es = kind ? 2 : 4;
    g.W = a->W, g.Wo = a->Wo, g.L = a->L, g.m = a->m;
    g.gps = a->gps, g.gs2 = a->gs2, g.gs3 = a->gs3;
    g.xps = a->xps, g.xs2 = a->xs2, g.xs3 = a->xs3;
    g.d0 = a->d0, g.d1 = a->d1, g.h0 = a->h0, g.h1 = a->h1;
    g.dlo = a->dlo, g.dhi = a->dhi, g.hlo = a->hlo, g.hhi = a->hhi;
    g.wd = a->wd, g.wh = a->wh;
    g.go = (const char *)a->go;
    g.gi = (char *)a->gi;
    g.stage = (char *)a->stage;
    g.E = a->E;
    g.od0 = g.dlo[g.d0], g.od1 = g.dhi[g.d1 - 1];
    g.oh0 = g.hlo[g.h0], g.oh1 = g.hhi[g.h1 - 1];
    g.noh = g.oh1 > g.oh0 ? g.oh1 - g.oh0 : 0;
    g.rowb = g.W * g.es, g.nh = g.h1 - g.h0;
    g.stream = a->stream, g.wide = g.W >= 8, g.two = g.W > 8;
    g.direct = g.wide && !a->stream;
    /* planes a chunk: PG_PLANE_CH, fewer where the stage holds fewer */
    g.CH = g.L < PG_PLANE_CH ? g.L : PG_PLANE_CH;
    if (!g.direct) {
        ptrdiff_t cap = a->stage_bytes - 32;   /* a row's last store may pass its end */
        if (cap > PG_PLANE_RUN && g.nh * g.rowb <= PG_PLANE_RUN) cap = PG_PLANE_RUN;
        if (g.CH > cap / (g.nh * g.rowb)) g.CH = cap / (g.nh * g.rowb);
    }
    g.estep = g.CH * 16;
    g.gspan = g.od1 > g.od0 && g.noh
        ? ((g.od1 - g.od0 - 1) * g.gs2 + (g.noh - 1) * g.gs3 + g.Wo) * g.es : 0;
    return g;
}

/* what forms the E rows from a row: its loads, W weights and sentinel slots, and the tap
 * table as permutes */
typedef struct {
    pg_i8 idx[2][PG_PLANE_TAPS];      /* tap t of half h: each lane's slot & 7 ... */
    pg_i8 fromhi[2][PG_PLANE_TAPS];   /* ... taken from hi (slot >= 8): all ones */
    ptrdiff_t mt[2];                  /* the taps a half uses */
    pg_f8 slo, shi;                   /* the sentinel slots' values (+0.0, -0.0) */
    pg_f8 wlo, whi;                   /* the W weights */
    pg_tail8 glo, ghi;                /* the row's loads; .m: the lanes of the row */
    ptrdiff_t nhi;                    /* the row's values in hi */
    int scale, nhalf, zused;
} pg_plane_perm;

PG_VEC_INLINE void pg_plane_perm_init(pg_plane_perm *p, const pg_plane_args *a,
                                      const pg_plane_geo *g)
{
    const ptrdiff_t W = g->W, Wo = g->Wo, m = g->m;
    /* the sentinel slots in use go right after the row: +0.0 (slot Wo) at zs, -0.0
     * (Wo + 1) at ns */
    int zused = 0, nused = 0;
    for (ptrdiff_t i = 0; i < W * m; i++) {
        zused |= a->tap[i] == Wo;
        nused |= a->tap[i] == Wo + 1;
    }
    const ptrdiff_t zs = Wo, ns = Wo + zused;
    p->zused = zused;
    p->nhalf = g->two ? 2 : 1;
    /* for half h and tap t, lane j takes slot s (0..7 in register lo, 8..15 in hi): index
     * s & 7, from hi where s >= 8.  Taps that are -0.0 in all 8 lanes are left out (x +
     * -0.0 is x, and the product by k that follows quiets a signalling NaN either way) */
    p->mt[0] = p->mt[1] = 1;
    for (int h = 0; h < p->nhalf; h++) {
        const ptrdiff_t c0 = h ? W - 8 : 0;
        for (ptrdiff_t t = 0; t < m; t++) {
            int real = 0;
            for (int j = 0; j < 8; j++) {
                const ptrdiff_t w = c0 + j < W ? c0 + j : W - 1;
                int64_t s = a->tap[w * m + t];
                real |= s < Wo;
                s = s == Wo ? zs : s == Wo + 1 ? ns : s;
                p->idx[h][t][j] = (int32_t)(s & 7);
                p->fromhi[h][t][j] = s >= 8 ? -1 : 0;
            }
            if (real) p->mt[h] = t + 1;
        }
    }
    for (int s = 0; s < 16; s++) {
        const float sv = nused && s == ns ? -0.0f : 0.0f;
        const float wv = a->ww && s < Wo ? a->ww[s] : 1.0f;
        if (s < 8) p->slo[s] = sv, p->wlo[s] = wv;
        else p->shi[s - 8] = sv, p->whi[s - 8] = wv;
    }
    p->nhi = Wo > 8 ? Wo - 8 : 0;
    p->glo = pg_tail8_of((int)(Wo < 8 ? Wo : 8));
    p->ghi = pg_tail8_of((int)p->nhi);
    p->scale = a->ww != NULL;
}

/*
 * Taps that slide with the column (stride 1: column w's taps are the grad_output columns
 * w + o, o = omin .. omin + m - 1, those inside the row): each chunk's rows of one
 * (od, oh) are staged W-weighted, with -0.0 in the slots around them, and each tap of a
 * half is then one load at its offset, where the permutes took three instructions a tap
 * and half.  The same products, and the same real taps added in the same order (a -0.0
 * added, before or after, leaves every value's bits as they were), so the same bits; a
 * column no window covers (its +0.0 slot) keeps the permutes.  omin is -(m - 1) .. 0
 * (windows that start after their column's first position do not cover it), so the
 * loads stay within [-3, 19) of a row (its slot: [-8, 24)).  Whether the taps slide (and
 * *omin), _plan.sliding_taps's test.
 */
static inline int pg_plane_slides(const pg_plane_args *a, int zused, ptrdiff_t *omin)
{
    const ptrdiff_t W = a->W, Wo = a->Wo, m = a->m;
    int aff = 0;
    *omin = 0;
    if (zused || m > PG_PLANE_TAPS) return 0;
    for (ptrdiff_t w = 0; w < W && !aff; w++)
        if (a->tap[w * m] > 0 && a->tap[w * m] < Wo) {
            *omin = a->tap[w * m] - w;   /* a first tap the row's start did not clip */
            aff = *omin <= 0 && *omin >= 1 - m;
        }
    for (ptrdiff_t w = 0; w < W && aff; w++) {
        const ptrdiff_t first = w + *omin > 0 ? w + *omin : 0;
        const ptrdiff_t last = w + *omin + m - 1 < Wo - 1 ? w + *omin + m - 1 : Wo - 1;
        for (ptrdiff_t t = 0; t < m; t++) {
            const int64_t want = first + t <= last ? first + t : Wo + 1;
            if (a->tap[w * m + t] != want) aff = 0;
        }
    }
    return aff;
}

/* the staged rows: PG_PLANE_SLOT floats apart, the row at PG_PLANE_LEAD */
#define PG_PLANE_SLOT 32
#define PG_PLANE_LEAD 8

/* sliding taps: the E row of lc planes from their rows staged in `rows`: half h of a
 * plane's E row is k times the sum of its M loads at off[h][t] (E rows 16 floats apart) */
PG_VEC_INLINE void pg_plane_aff_rows(float *PG_RESTRICT e, const float *rows, ptrdiff_t lc,
                                     float kf, const ptrdiff_t (*off)[PG_PLANE_TAPS],
                                     const int M, const int TWO, int isa)
{
    const pg_f8 k = pg_f8_set1_isa(kf, isa);
    ptrdiff_t o[2][PG_PLANE_TAPS];
    for (int h = 0; h < 1 + TWO; h++)
        for (int t = 0; t < M; t++) o[h][t] = off[h][t];
    for (ptrdiff_t l = 0; l < lc; l++, rows += PG_PLANE_SLOT, e += 16) {
        for (int h = 0; h < 1 + TWO; h++) {
            pg_f8 s = pg_f8_load(rows + o[h][0]);
            for (int t = 1; t < M; t++) s = s + pg_f8_load(rows + o[h][t]);
            pg_f8_store(e + 8 * h, k * s);
        }
    }
}

PG_VEC_INLINE void pg_plane_aff_body(float *e, const float *rows, ptrdiff_t lc, float k,
                                     const ptrdiff_t (*off)[PG_PLANE_TAPS], ptrdiff_t m,
                                     int two, int isa)
{
#define PG_PLANE_AFF(M)                                                                     \
    do {                                                                                    \
        if (two) pg_plane_aff_rows(e, rows, lc, k, off, M, 1, isa);                         \
        else pg_plane_aff_rows(e, rows, lc, k, off, M, 0, isa);                             \
    } while (0)
    switch (m) {
    case 1: PG_PLANE_AFF(1); break;
    case 2: PG_PLANE_AFF(2); break;
    case 3: PG_PLANE_AFF(3); break;
    default: PG_PLANE_AFF(4); break;
    }
#undef PG_PLANE_AFF
}

/* (one copy per instruction set for every format and register layout of pg_plane_body) */
static void pg_plane_aff_base(float *e, const float *rows, ptrdiff_t lc, float k,
                              const ptrdiff_t (*off)[PG_PLANE_TAPS], ptrdiff_t m, int two)
{
    pg_plane_aff_body(e, rows, lc, k, off, m, two, PG_ISA_BASE);
}

#if PG_X86_DISPATCH
PG_TARGET_AVX2_F16C
static void pg_plane_aff_avx2(float *e, const float *rows, ptrdiff_t lc, float k,
                              const ptrdiff_t (*off)[PG_PLANE_TAPS], ptrdiff_t m, int two)
{
    pg_plane_aff_body(e, rows, lc, k, off, m, two, PG_ISA_AVX2);
}
#endif

/* one (od, oh)'s E rows for lc planes by sliding taps: the rows from r (rstep bytes apart)
 * staged in arows, then pg_plane_aff */
PG_VEC_INLINE void pg_plane_erow_aff(const pg_plane_perm *p, float *erow, const char *r,
                                     ptrdiff_t rstep, ptrdiff_t lc, float k, float *arows,
                                     const ptrdiff_t (*aoff)[PG_PLANE_TAPS], ptrdiff_t m,
                                     int two, int kind, int isa)
{
    const ptrdiff_t es = kind ? 2 : 4;
    const pg_f8 negz = pg_f8_set1(-0.0f);
    float *ar = arows + PG_PLANE_LEAD;
    for (ptrdiff_t l = 0; l < lc; l++, r += rstep, ar += PG_PLANE_SLOT) {
        pg_f8 lo = pg_plane_get8(r, &p->glo, kind, isa);
        if (p->scale) lo = lo * p->wlo;
        pg_f8_store(ar, pg_f8_blend(negz, lo, p->glo.m, isa));
        if (p->nhi) {
            pg_f8 hi = pg_plane_get8(r + 8 * es, &p->ghi, kind, isa);
            if (p->scale) hi = hi * p->whi;
            pg_f8_store(ar + 8, pg_f8_blend(negz, hi, p->ghi.m, isa));
        }
    }
#if PG_X86_DISPATCH
    if (isa == PG_ISA_AVX2) {
        pg_plane_aff_avx2(erow, arows + PG_PLANE_LEAD, lc, k, aoff, m, two);
        return;
    }
#endif
    pg_plane_aff_base(erow, arows + PG_PLANE_LEAD, lc, k, aoff, m, two);
}

/* tap t of half h: the row's slots through the permute (HI: slots 8..15 from hi) */
PG_VEC_INLINE pg_f8 pg_plane_tap(const pg_plane_perm *p, pg_f8 lo, pg_f8 hi, int h, int t,
                                 int HI, int isa)
{
    const pg_f8 x = pg_f8_permute(lo, p->idx[h][t], isa);
    if (!HI) return x;
    return pg_f8_blend(x, pg_f8_permute(hi, p->idx[h][t], isa), p->fromhi[h][t], isa);
}

/* one (od, oh)'s E rows for lc planes by permutes, from their rows at r (rstep bytes
 * apart): each row and its sentinel slots in lo (and hi), each half of the E row k times
 * the sum of its taps.  MT: the taps of every half (1 or 2, a constant), or 0: p->mt */
PG_VEC_INLINE void pg_plane_erow_perm(const pg_plane_perm *p, float *erow, const char *r,
                                      ptrdiff_t rstep, ptrdiff_t lc, float kf, int two,
                                      int kind, int HI, int MT, int isa)
{
    const ptrdiff_t es = kind ? 2 : 4;
    const pg_f8 k = pg_f8_set1_isa(kf, isa);
    for (ptrdiff_t l = 0; l < lc; l++, r += rstep) {
        pg_f8 lo = pg_plane_get8(r, &p->glo, kind, isa);
        pg_f8 hi = p->shi;
        if (p->scale) lo = lo * p->wlo;
        lo = pg_f8_blend(p->slo, lo, p->glo.m, isa);
        if (HI && p->nhi) {
            hi = pg_plane_get8(r + 8 * es, &p->ghi, kind, isa);
            if (p->scale) hi = hi * p->whi;
            hi = pg_f8_blend(p->shi, hi, p->ghi.m, isa);
        }
        if (MT) {
            /* MT taps in both halves (a tap left out adds -0.0: the same bits) */
            pg_f8 s = pg_plane_tap(p, lo, hi, 0, 0, HI, isa);
            if (MT > 1) s = s + pg_plane_tap(p, lo, hi, 0, 1, HI, isa);
            pg_f8_store(erow + 16 * l, k * s);
            if (two) {
                pg_f8 s1 = pg_plane_tap(p, lo, hi, 1, 0, HI, isa);
                if (MT > 1) s1 = s1 + pg_plane_tap(p, lo, hi, 1, 1, HI, isa);
                pg_f8_store(erow + 16 * l + 8, k * s1);
            }
            continue;
        }
        for (int h = 0; h < 1 + two; h++) {
            pg_f8 s = pg_plane_tap(p, lo, hi, h, 0, HI, isa);
            if (p->mt[h] > 1) s = s + pg_plane_tap(p, lo, hi, h, 1, HI, isa);
            if (p->mt[h] > 2) s = s + pg_plane_tap(p, lo, hi, h, 2, HI, isa);
            if (p->mt[h] > 3) s = s + pg_plane_tap(p, lo, hi, h, 3, HI, isa);
            pg_f8_store(erow + 16 * l + 8 * h, k * s);
        }
    }
}

/* the grad_input row of planes [la, lb) (16 floats apart in E, pstep bytes apart from out
 * on): the sum of the E rows (od, hq), od < nd, hq < nq, from e0 (rows estep floats
 * apart, D rows noh rows apart), +0.0 where nq is 0.  Called with nd and nq constants
 * where they are small (the loops unroll) */
PG_VEC_INLINE void pg_plane_rows(const pg_plane_geo *g, char *out, ptrdiff_t pstep,
                                 const float *e0, ptrdiff_t la, ptrdiff_t lb, ptrdiff_t nd,
                                 ptrdiff_t nq, int kind, int isa)
{
    const ptrdiff_t estep = g->estep, noh = g->noh;
    const int two = g->two;
    for (ptrdiff_t l = la; l < lb; l++) {
        const float *el = e0 + 16 * l;
        pg_f8 s0 = pg_f8_set1(0.0f), s1 = s0;
        if (nq > 0) {
            /* (the second half's E values exist only for rows of two) */
            s0 = pg_f8_load(el);
            s1 = two ? pg_f8_load(el + 8) : s0;
            for (ptrdiff_t od = 0; od < nd; od++) {
                for (ptrdiff_t j = od ? 0 : 1; j < nq; j++) {
                    const float *e = el + (od * noh + j) * estep;
                    s0 = s0 + pg_f8_load(e);
                    if (two) s1 = s1 + pg_f8_load(e + 8);
                }
            }
        }
        char *o = out + l * pstep;
        pg_plane_put8(o, s0, kind, isa);
        if (two) pg_plane_put8(o + (g->W - 8) * g->es, s1, kind, isa);
    }
}

/* grad_input rows [h0, h1) of planes [la, lb) of a chunk, from out on (rows rstep bytes
 * apart), of the E rows from ed (nd D rows) */
PG_VEC_INLINE void pg_plane_out(const pg_plane_geo *g, char *out, ptrdiff_t rstep,
                                ptrdiff_t pstep, const float *ed, ptrdiff_t nd, ptrdiff_t la,
                                ptrdiff_t lb, int kind, int isa)
{
    for (ptrdiff_t ih = g->h0; ih < g->h1; ih++, out += rstep) {
        const ptrdiff_t nq = nd > 0 ? g->hhi[ih] - g->hlo[ih] : 0;
        const float *const e0 = ed + (g->hlo[ih] - g->oh0) * g->estep;
        if (nd <= 1 && nq == 1) pg_plane_rows(g, out, pstep, e0, la, lb, 1, 1, kind, isa);
        else if (nd <= 1 && nq == 2) pg_plane_rows(g, out, pstep, e0, la, lb, 1, 2, kind, isa);
        else if (nd <= 1 && nq == 3) pg_plane_rows(g, out, pstep, e0, la, lb, 1, 3, kind, isa);
        else if (nq <= 0) pg_plane_rows(g, out, pstep, e0, la, lb, 0, 0, kind, isa);
        else pg_plane_rows(g, out, pstep, e0, la, lb, nd, nq, kind, isa);
    }
}

/* the staged planes [0, lc) of D row idd out to dst, in runs that follow each other in
 * the output */
static inline void pg_plane_drain(const pg_plane_geo *g, char *dst, ptrdiff_t lc, int kind)
{
    const ptrdiff_t pb = g->nh * g->rowb;   /* a plane's bytes in the stage */
    ptrdiff_t run = 0;
    char *run_dst = dst;
    const char *run_src = g->stage;
    for (ptrdiff_t l = 0; l < lc; l++) {
        char *to = dst + l * g->xps * g->es;
        if (run && to != run_dst + run) {
            pg_plane_flush(run_dst, run_src, run, kind, g->stream);
            run_dst = to;
            run_src = g->stage + l * pb;
            run = 0;
        }
        run += pb;
    }
    pg_plane_flush(run_dst, run_src, run, kind, g->stream);
}

/* D row idd's grad_input rows [h0, h1) of the chunk's lc planes from l0 on: rows of 8 or
 * more each for all the planes; narrower ones plane by plane, as each row's store passes
 * its end into the next row (each plane its own call: a loop of one plane the compiler
 * sees) */
PG_VEC_INLINE void pg_plane_drow(const pg_plane_geo *g, ptrdiff_t l0, ptrdiff_t lc,
                                 ptrdiff_t idd, int kind, int isa)
{
    const ptrdiff_t es = g->es;
    char *const dst = g->gi + (l0 * g->xps + idd * g->xs2 + g->h0 * g->xs3) * es;
    char *const out = g->direct ? dst : g->stage;
    const ptrdiff_t pstep = g->direct ? g->xps * es : g->nh * g->rowb;
    const ptrdiff_t rstep = g->direct ? g->xs3 * es : g->rowb;
    const ptrdiff_t da = g->dlo[idd], nd = g->dhi[idd] - da;
    const float *const ed = g->E + (da - g->od0) * g->noh * g->estep;
    if (g->wide) {
        pg_plane_out(g, out, rstep, pstep, ed, nd, 0, lc, kind, isa);
    } else {
        for (ptrdiff_t lp = 0; lp < lc; lp++)
            pg_plane_out(g, out, rstep, pstep, ed, nd, lp, lp + 1, kind, isa);
    }
    if (!g->direct) pg_plane_drain(g, dst, lc, kind);
}

/* the next chunk's grad_output (planes [l0, l0 + ln)) asked for now: its rows are read
 * plane by plane across the chunk, an order the hardware prefetcher does not follow */
static inline void pg_plane_prefetch(const pg_plane_geo *g, ptrdiff_t l0, ptrdiff_t ln)
{
    if (g->gspan <= 0 || g->gs2 < 0 || g->gs3 < 0) return;
    for (ptrdiff_t l = 0; l < ln; l++) {
        const char *r = g->go + ((l0 + l) * g->gps + g->od0 * g->gs2 + g->oh0 * g->gs3) * g->es;
        for (ptrdiff_t o = 0; o < g->gspan; o += 64) __builtin_prefetch(r + o, 0, 3);
        __builtin_prefetch(r + g->gspan - 1, 0, 3);
    }
}

/*
 * A row is one or two vectors (`two`, W > 8): columns [0, 8) and [W - 8, W), which
 * overlap below W = 16, so a row's stores stay inside it (`wide`, W >= 8).  HI: the row
 * and the sentinel slots it uses take more than 8 slots (two vectors).  MT: the taps of
 * every column (1 or 2, float32; 0: as many as each half uses).  Planes go CH at a time:
 * their E rows ([row][plane][16], od-major), then each grad_input row for the CH planes,
 * so the per-row work is done once per CH planes, or (rows narrower than 8) all the rows
 * of one plane after the other.
 */
PG_VEC_INLINE void pg_plane_body(const pg_plane_args *a, int kind, int HI, int MT, int isa)
{
    const pg_plane_geo g = pg_plane_geo_of(a, kind);
    pg_plane_perm p;
    pg_plane_perm_init(&p, a, &g);
    ptrdiff_t omin;
    const int aff = pg_plane_slides(a, p.zused, &omin);
    ptrdiff_t aoff[2][PG_PLANE_TAPS];
    __attribute__((aligned(32))) float arows[PG_PLANE_CH * PG_PLANE_SLOT];
    if (aff) {
        for (int h = 0; h < p.nhalf; h++)
            for (ptrdiff_t t = 0; t < g.m; t++)
                aoff[h][t] = (h ? g.W - 8 : 0) + omin + t;
        for (ptrdiff_t i = 0; i < PG_PLANE_CH * PG_PLANE_SLOT; i++) arows[i] = -0.0f;
    }
    const ptrdiff_t rstep = g.gps * g.es;   /* from a plane's grad_output row to the next's */
    for (ptrdiff_t l0 = 0; l0 < g.L; l0 += g.CH) {
        const ptrdiff_t lc = g.L - l0 < g.CH ? g.L - l0 : g.CH;
#if PG_PLANE_PREFETCH
        pg_plane_prefetch(&g, l0 + lc, g.L - l0 - lc < g.CH ? g.L - l0 - lc : g.CH);
#endif
        float *erow = g.E;
        for (ptrdiff_t od = g.od0; od < g.od1; od++) {
            for (ptrdiff_t oh = g.oh0; oh < g.oh1; oh++, erow += g.estep) {
                const char *r = g.go + (l0 * g.gps + od * g.gs2 + oh * g.gs3) * g.es;
                const float k = g.wd[od] * g.wh[oh];
                if (aff)
                    pg_plane_erow_aff(&p, erow, r, rstep, lc, k, arows,
                                      (const ptrdiff_t (*)[PG_PLANE_TAPS])aoff, g.m, g.two,
                                      kind, isa);
                else
                    pg_plane_erow_perm(&p, erow, r, rstep, lc, k, g.two, kind, HI, MT, isa);
            }
        }
        for (ptrdiff_t idd = g.d0; idd < g.d1; idd++) pg_plane_drow(&g, l0, lc, idd, kind, isa);
    }
}

/* the copies of the body: HI where the row and its sentinel slots in use pass 8 slots;
 * float32 with the taps a constant where there are at most two (the 16-bit formats keep
 * one copy) */
PG_VEC_INLINE void pg_plane_run(const pg_plane_args *a, int isa)
{
    int z = 0, n = 0;
    for (ptrdiff_t i = 0; i < a->W * a->m; i++) {
        z |= a->tap[i] == a->Wo;
        n |= a->tap[i] == a->Wo + 1;
    }
    const int hi = a->Wo + z + n > 8;
    const int mt = a->m <= 2 ? (int)a->m : 0;
#define PG_PLANE_MT(H)                                                                      \
    (mt == 1 ? pg_plane_body(a, 0, H, 1, isa) : mt == 2 ? pg_plane_body(a, 0, H, 2, isa)    \
             : pg_plane_body(a, 0, H, 0, isa))
    if (a->kind == 0) {
        if (hi) PG_PLANE_MT(1); else PG_PLANE_MT(0);
    } else if (a->kind == 2) {
        if (hi) pg_plane_body(a, 2, 1, 0, isa); else pg_plane_body(a, 2, 0, 0, isa);
    } else {
        if (hi) pg_plane_body(a, 3, 1, 0, isa); else pg_plane_body(a, 3, 0, 0, isa);
    }
#undef PG_PLANE_MT
}

static void pg_plane_base(const pg_plane_args *a) { pg_plane_run(a, PG_ISA_BASE); }
#if PG_X86_DISPATCH
PG_TARGET_AVX2_F16C static void pg_plane_avx2(const pg_plane_args *a)
{
    pg_plane_run(a, PG_ISA_AVX2);
}
#endif
#endif

static inline int pg_plane_item(const pg_plane_args *a)
{
#if PG_VEC
    const ptrdiff_t es = a->kind ? 2 : 4;
    if (a->W >= 1 && a->W <= 16 && a->Wo >= 1 && a->Wo <= 14 && a->m >= 1
            && a->m <= PG_PLANE_TAPS && (a->xs3 == a->W || (a->W >= 8 && !a->stream))
            && a->h1 > a->h0 && a->d1 > a->d0
            && (a->kind == 0 || a->kind == 2 || a->kind == 3)
            && (a->h1 - a->h0) * a->W * es + 32 <= a->stage_bytes
            && (a->dhi[a->d1 - 1] - a->dlo[a->d0]) * (a->hhi[a->h1 - 1] - a->hlo[a->h0]) * 16
               * (a->L < PG_PLANE_CH ? a->L : PG_PLANE_CH) <= a->E_elems) {
        /* pg_tpose.h's choice: 2 the AVX2 copies, 1 the baseline, 0 neither */
        const int isa = pg_tpose_isa(a->kind);
#if PG_X86_DISPATCH
        if (isa == 2) pg_plane_avx2(a);
#endif
        if (isa == 1) pg_plane_base(a);
        if (isa) return 1;
    }
#endif
    (void)a;
    return 0;
}

#endif

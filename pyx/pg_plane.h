/*
 * Small NCHW planes in registers: a work item of the small-plane lanes (_plan.gather_views6,
 * "tstore"), where each lane is a whole plane, computed plane by plane with each grad_output
 * row in one or two AVX2 registers and each E row formed from them by permutes, where the
 * lanes path moves every value between planes and lanes through 8 x 8 transposes and passes
 * over the item's rows five times.  Planes go PG_PLANE_CH at a time: their E rows, then each
 * grad_input row for all of them, so the per-row work is paid once per chunk.  On the 2-vCPU
 * EPYC a 14 x 14 k3s2p1 float32 plane took 49-54 ns in cache (the transposes 82 ns); the plan
 * takes this path where it was faster (_plan.plane_regs).
 *
 * The arithmetic is the lanes path's, in the same order, so the bits are the same: each
 * grad_output value times its W weight; E[od, oh][w] = k(od, oh) * (the taps of w, added
 * left to right, with the tap table's +0.0 and -0.0 slots at Wo and Wo + 1); each
 * grad_input row the sum, left to right, of the E rows that cover it (+0.0 where none
 * does), rounded once to a 16-bit format.
 *
 * Rows of 8 or more are stored where they go (two overlapping vectors: columns [0, 8) and
 * [W - 8, W)); narrower rows, and outputs larger than the cache, go through a stage and
 * out in runs that follow each other in memory, streamed for the large outputs.
 *
 * kind: 0 float32, 2 float16, 3 bfloat16 (the kernels' K_* numbers).  pg_plane_item returns
 * 0, having done nothing, where the CPU lacks AVX2 (and F16C) or the item does not fit:
 * W > 16, Wo > 14 (the row and its two slots in two registers), more than PG_PLANE_TAPS
 * taps.  Taps that slide with the column (stride 1) are loads from the staged rows at
 * each tap's offset rather than permutes (pg_plane_aff).
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

/* the most bytes staged before they go out (a stage that stays in the level-1 cache, with
 * the chunk's E rows).  Streamed float32 14 x 14 k3s2p1, 2-vCPU EPYC, 2 threads: 8192
 * bytes (10 planes a chunk) 0.194 ns a value, 16384 (16) 0.164, 32768 with 32 planes a
 * chunk 0.179, 2048 0.271; 1 thread 0.31 for all but 2048 (0.52).  Going out in steps
 * while the next chunk formed took 0.52 (1 thread), against 0.31 at once */
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

#if PG_X86_DISPATCH
/* the masks that load n <= 8 values of a row (pg_plane_get8), made once an item */
typedef struct {
    __m256i m32;      /* float32: lanes < n */
    __m128i pairs;    /* 16-bit: the whole 32-bit pairs */
    __m128i sel;      /* ... and the lane of an odd last value */
    ptrdiff_t last;   /* its byte offset, or -1 */
} pg_plane_mask;

__attribute__((target("avx2,f16c"))) PG_ALWAYS_INLINE
static inline pg_plane_mask pg_plane_mask_of(ptrdiff_t n, __m256i m32)
{
    pg_plane_mask k;
    k.m32 = m32;
    k.pairs = _mm_set_epi32(n >= 8 ? -1 : 0, n >= 6 ? -1 : 0, n >= 4 ? -1 : 0,
                            n >= 2 ? -1 : 0);
    k.sel = _mm_cmpeq_epi16(_mm_set1_epi16((short)(n - 1)),
                            _mm_setr_epi16(0, 1, 2, 3, 4, 5, 6, 7));
    k.last = n & 1 ? 2 * (n - 1) : -1;
    return k;
}

/* n <= 8 values of one row from p (the masks of n), widened, the others +0.0 */
__attribute__((target("avx2,f16c"))) PG_ALWAYS_INLINE
static inline __m256 pg_plane_get8(const char *p, const pg_plane_mask *mk, int kind)
{
    if (kind == 0) return _mm256_maskload_ps((const float *)p, mk->m32);
    /* whole 32-bit pairs by a masked load, an odd last value by itself */
    __m128i h = _mm_maskload_epi32((const int *)p, mk->pairs);
    if (mk->last >= 0) {
        uint16_t last;
        memcpy(&last, p + mk->last, 2);
        h = _mm_blendv_epi8(h, _mm_set1_epi16((short)last), mk->sel);
    }
    if (kind == 2) return _mm256_cvtph_ps(h);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

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

/* the grad_input row of nq E rows from e0 (rows estep floats apart), over lc planes (16
 * floats apart in E, pstep bytes apart in out) */
#define PG_PLANE_ROWS(LOAD0, LOAD1)                                                         \
    for (ptrdiff_t l = la; l < lb; l++) {                                                    \
        const float *el = e0 + 16 * l;                                                      \
        (void)el;                                                                           \
        char *o = out + l * pstep;                                                          \
        pg_tstore8(o, 0, LOAD0, kind);                                                      \
        if (two) pg_tstore8(o + (W - 8) * es, 0, LOAD1, kind);                              \
    }

/* tap t of half h: the row's slots through the permute (HI: slots 8..15 from hi) */
#define PG_PLANE_TAP(h, t)                                                                  \
    (HI ? _mm256_blendv_ps(_mm256_permutevar8x32_ps(lo, idx[h][t]),                         \
                           _mm256_permutevar8x32_ps(hi, idx[h][t]), fromhi[h][t])           \
        : _mm256_permutevar8x32_ps(lo, idx[h][t]))

/* grad_input rows [h0, h1) of planes [LA, LB) of a chunk (pg_plane_body's locals) */
#define PG_PLANE_OUT(LA, LB)                                                                \
    const ptrdiff_t la = (LA), lb = (LB);                                                   \
    out = direct ? dst : stage;                                                             \
    for (ptrdiff_t ih = h0; ih < h1; ih++, out += rstep) {                                  \
        const ptrdiff_t nq = nd > 0 ? hhi[ih] - hlo[ih] : 0;                                \
        const float *const e0 = ed + (hlo[ih] - oh0) * estep;                               \
        if (nd <= 1 && nq == 1) {                                                           \
            PG_PLANE_ROWS(_mm256_loadu_ps(el), _mm256_loadu_ps(el + 8))                     \
        } else if (nd <= 1 && nq == 2) {                                                    \
            PG_PLANE_ROWS(                                                                  \
                _mm256_add_ps(_mm256_loadu_ps(el), _mm256_loadu_ps(el + estep)),            \
                _mm256_add_ps(_mm256_loadu_ps(el + 8), _mm256_loadu_ps(el + estep + 8)))    \
        } else if (nd <= 1 && nq == 3) {                                                    \
            PG_PLANE_ROWS(                                                                  \
                _mm256_add_ps(_mm256_add_ps(_mm256_loadu_ps(el), _mm256_loadu_ps(el + estep)), \
                              _mm256_loadu_ps(el + 2 * estep)),                             \
                _mm256_add_ps(_mm256_add_ps(_mm256_loadu_ps(el + 8),                        \
                                            _mm256_loadu_ps(el + estep + 8)),               \
                              _mm256_loadu_ps(el + 2 * estep + 8)))                         \
        } else if (nq <= 0) {                                                               \
            PG_PLANE_ROWS(_mm256_setzero_ps(), _mm256_setzero_ps())                         \
        } else {                                                                            \
            for (ptrdiff_t l = la; l < lb; l++) {                                           \
                const float *el = e0 + 16 * l;                                              \
                /* (the second half's E values exist only for rows of two) */               \
                __m256 s0 = _mm256_loadu_ps(el);                                            \
                __m256 s1 = two ? _mm256_loadu_ps(el + 8) : s0;                             \
                for (ptrdiff_t od = 0; od < nd; od++) {                                     \
                    for (ptrdiff_t j = od ? 0 : 1; j < nq; j++) {                           \
                        const float *e = el + (od * noh + j) * estep;                       \
                        s0 = _mm256_add_ps(s0, _mm256_loadu_ps(e));                         \
                        if (two) s1 = _mm256_add_ps(s1, _mm256_loadu_ps(e + 8));            \
                    }                                                                       \
                }                                                                           \
                char *o = out + l * pstep;                                                  \
                pg_tstore8(o, 0, s0, kind);                                                 \
                if (two) pg_tstore8(o + (W - 8) * es, 0, s1, kind);                         \
            }                                                                               \
        }                                                                                   \
    }

/* sliding taps (pg_plane_body's `aff`): the E row of lc planes from their grad_output rows
 * staged in `rows` (PG_PLANE_SLOT floats apart, W-weighted, -0.0 in the slots around each
 * row): half h of a plane's E row is k times the sum of its M loads at off[h][t]
 * (E rows 16 floats apart) */
#define PG_PLANE_SLOT 32
#define PG_PLANE_LEAD 8
__attribute__((target("avx2,f16c"))) PG_ALWAYS_INLINE
static inline void pg_plane_aff_rows(float *PG_RESTRICT e, const float *rows, ptrdiff_t lc,
                                     __m256 k, const ptrdiff_t (*off)[PG_PLANE_TAPS],
                                     const int M, const int TWO)
{
    ptrdiff_t o[2][PG_PLANE_TAPS];
    for (int h = 0; h < 1 + TWO; h++)
        for (int t = 0; t < M; t++) o[h][t] = off[h][t];
    for (ptrdiff_t l = 0; l < lc; l++, rows += PG_PLANE_SLOT, e += 16) {
        for (int h = 0; h < 1 + TWO; h++) {
            __m256 s = _mm256_loadu_ps(rows + o[h][0]);
            for (int t = 1; t < M; t++) s = _mm256_add_ps(s, _mm256_loadu_ps(rows + o[h][t]));
            _mm256_storeu_ps(e + 8 * h, _mm256_mul_ps(k, s));
        }
    }
}

/* (one copy for every format and register layout of pg_plane_body) */
__attribute__((target("avx2,f16c")))
static void pg_plane_aff(float *e, const float *rows, ptrdiff_t lc, __m256 k,
                         const ptrdiff_t (*off)[PG_PLANE_TAPS], ptrdiff_t m, int two)
{
#define PG_PLANE_AFF(M)                                                                     \
    do {                                                                                    \
        if (two) pg_plane_aff_rows(e, rows, lc, k, off, M, 1);                              \
        else pg_plane_aff_rows(e, rows, lc, k, off, M, 0);                                  \
    } while (0)
    switch (m) {
    case 1: PG_PLANE_AFF(1); break;
    case 2: PG_PLANE_AFF(2); break;
    case 3: PG_PLANE_AFF(3); break;
    default: PG_PLANE_AFF(4); break;
    }
#undef PG_PLANE_AFF
}

/*
 * A row is one or two vectors (`two`, W > 8): columns [0, 8) and [W - 8, W), which
 * overlap below W = 16, so a row's stores stay inside it (`wide`, W >= 8).  HI: the row
 * and the sentinel slots it uses take more than 8 slots (two registers).  MT: the taps
 * of every column (1 or 2, float32; 0: as many as each half uses).  `direct`: rows
 * stored where they go (W >= 8, not streamed), else through the stage.  Planes go CH at
 * a time: their E rows ([row][plane][16]), then each grad_input row for the CH planes,
 * so the per-row work is done once per CH planes, or (rows narrower than 8) all the rows
 * of one plane after the other.
 */
__attribute__((target("avx2,f16c"))) PG_ALWAYS_INLINE
static inline void pg_plane_body(const pg_plane_args *a, int kind, int HI, int MT)
{
    /* every field in a local: the stores below may alias anything (no strict aliasing) */
    const ptrdiff_t es = kind ? 2 : 4;
    const ptrdiff_t W = a->W, Wo = a->Wo, L = a->L, m = a->m;
    const ptrdiff_t gps = a->gps, gs2 = a->gs2, gs3 = a->gs3;
    const ptrdiff_t xps = a->xps, xs2 = a->xs2, xs3 = a->xs3;
    const ptrdiff_t d0 = a->d0, d1 = a->d1, h0 = a->h0, h1 = a->h1;
    const int64_t *const dlo = a->dlo, *const dhi = a->dhi;
    const int64_t *const hlo = a->hlo, *const hhi = a->hhi;
    const float *const wd = a->wd, *const wh = a->wh;
    /* wide: a row's 8-value stores stay inside it; two: a second vector (W > 8: a row of
     * exactly 8 is one vector, formed and stored once) */
    const int stream = a->stream, wide = W >= 8, two = W > 8, direct = wide && !a->stream;
    const char *const go = (const char *)a->go;
    char *const gi = (char *)a->gi;
    float *const E = a->E;
    char *const stage = (char *)a->stage;
    const ptrdiff_t od0 = dlo[d0], od1 = dhi[d1 - 1];
    const ptrdiff_t oh0 = hlo[h0], oh1 = hhi[h1 - 1];
    const ptrdiff_t noh = oh1 > oh0 ? oh1 - oh0 : 0;
    const ptrdiff_t rowb = W * es, nh = h1 - h0;
    const int nhalf = two ? 2 : 1;
    /* the sentinel slots in use go right after the row: +0.0 (slot Wo) at zs, -0.0
     * (Wo + 1) at ns */
    int zused = 0, nused = 0;
    for (ptrdiff_t i = 0; i < W * m; i++) {
        zused |= a->tap[i] == Wo;
        nused |= a->tap[i] == Wo + 1;
    }
    const ptrdiff_t zs = Wo, ns = Wo + zused;
    /* the tap table as permutes: for half h and tap t, lane j takes slot s (0..7 in
     * register lo, 8..15 in hi): index s & 7, from hi where s >= 8.  Taps that are -0.0
     * in all 8 lanes are left out (x + -0.0 is x, and the product by k that follows quiets
     * a signalling NaN either way) */
    __m256i idx[2][PG_PLANE_TAPS];
    __m256 fromhi[2][PG_PLANE_TAPS];
    ptrdiff_t mt[2] = {1, 1};
    for (int h = 0; h < nhalf; h++) {
        const ptrdiff_t c0 = h ? W - 8 : 0;
        for (ptrdiff_t t = 0; t < m; t++) {
            int32_t iv[8], hv[8];
            int real = 0;
            for (int j = 0; j < 8; j++) {
                const ptrdiff_t w = c0 + j < W ? c0 + j : W - 1;
                int64_t s = a->tap[w * m + t];
                real |= s < Wo;
                s = s == Wo ? zs : s == Wo + 1 ? ns : s;
                iv[j] = (int32_t)(s & 7);
                hv[j] = s >= 8 ? -1 : 0;
            }
            idx[h][t] = _mm256_loadu_si256((const __m256i *)iv);
            fromhi[h][t] = _mm256_castsi256_ps(_mm256_loadu_si256((const __m256i *)hv));
            if (real) mt[h] = t + 1;
        }
    }
    /* the sentinel slots, the W weights, the row's load masks */
    float sv[16], wv[16];
    int32_t keep[16];
    for (int s = 0; s < 16; s++) {
        sv[s] = nused && s == ns ? -0.0f : 0.0f;
        wv[s] = a->ww && s < Wo ? a->ww[s] : 1.0f;
        keep[s] = s < Wo ? -1 : 0;
    }
    const __m256 slo = _mm256_loadu_ps(sv), shi = _mm256_loadu_ps(sv + 8);
    const __m256 wlo = _mm256_loadu_ps(wv), whi = _mm256_loadu_ps(wv + 8);
    const __m256i mlo = _mm256_loadu_si256((const __m256i *)keep);
    const __m256i mhi = _mm256_loadu_si256((const __m256i *)(keep + 8));
    const __m256 klo = _mm256_castsi256_ps(mlo), khi = _mm256_castsi256_ps(mhi);
    const ptrdiff_t nlo = Wo < 8 ? Wo : 8, nhi = Wo > 8 ? Wo - 8 : 0;
    const pg_plane_mask glo = pg_plane_mask_of(nlo, mlo), ghi = pg_plane_mask_of(nhi, mhi);
    const int scale = a->ww != NULL;
    /* taps that slide with the column (stride 1: column w's taps are the grad_output
     * columns w + o, o = omin .. omin + m - 1, those inside the row): each chunk's rows
     * of one (od, oh) are staged W-weighted, with -0.0 in the slots around them, and each
     * tap of a half is then one load at its offset, where the permutes took three
     * instructions a tap and half.  The same products, and the same real taps added in the
     * same order (a -0.0 added, before or after, leaves every value's bits as they were),
     * so the same bits; a column no window covers (its +0.0 slot) keeps the permutes.
     * omin is -(m - 1) .. 0 (windows that start after their column's first position do
     * not cover it), so the loads stay within [-3, 19) of a row (its slot: [-8, 24)) */
    int aff = 0;
    ptrdiff_t omin = 0;
    if (!zused && m <= PG_PLANE_TAPS) {
        for (ptrdiff_t w = 0; w < W && !aff; w++)
            if (a->tap[w * m] > 0 && a->tap[w * m] < Wo) {
                omin = a->tap[w * m] - w;   /* a first tap the row's start did not clip */
                aff = omin <= 0 && omin >= 1 - m;
            }
        for (ptrdiff_t w = 0; w < W && aff; w++) {
            const ptrdiff_t first = w + omin > 0 ? w + omin : 0;
            const ptrdiff_t last = w + omin + m - 1 < Wo - 1 ? w + omin + m - 1 : Wo - 1;
            for (ptrdiff_t t = 0; t < m; t++) {
                const int64_t want = first + t <= last ? first + t : Wo + 1;
                if (a->tap[w * m + t] != want) aff = 0;
            }
        }
    }
    ptrdiff_t aoff[2][PG_PLANE_TAPS];
    __attribute__((aligned(32))) float arows[PG_PLANE_CH * PG_PLANE_SLOT];
    const __m256 negz = _mm256_set1_ps(-0.0f);
    if (aff) {
        for (int h = 0; h < nhalf; h++)
            for (ptrdiff_t t = 0; t < m; t++)
                aoff[h][t] = (h ? W - 8 : 0) + omin + t;
        for (ptrdiff_t i = 0; i < PG_PLANE_CH * PG_PLANE_SLOT; i++) arows[i] = -0.0f;
    }
    /* planes a chunk: PG_PLANE_CH, fewer where the stage holds fewer */
    ptrdiff_t CH = L < PG_PLANE_CH ? L : PG_PLANE_CH;
    if (!direct) {
        ptrdiff_t cap = a->stage_bytes - 32;   /* a row's last store may pass its end */
        if (cap > PG_PLANE_RUN && nh * rowb <= PG_PLANE_RUN) cap = PG_PLANE_RUN;
        if (CH > cap / (nh * rowb)) CH = cap / (nh * rowb);
    }
    const ptrdiff_t estep = CH * 16;   /* floats from one E row to the next */
    /* the bytes of one plane's grad_output rows that an item reads (from its first) */
    const ptrdiff_t gspan = od1 > od0 && noh
        ? ((od1 - od0 - 1) * gs2 + (noh - 1) * gs3 + Wo) * es : 0;
    for (ptrdiff_t l0 = 0; l0 < L; l0 += CH) {
        const ptrdiff_t lc = L - l0 < CH ? L - l0 : CH;
#if PG_PLANE_PREFETCH
        /* the next chunk's grad_output asked for now: its rows are read plane by plane
         * across the chunk, an order the hardware prefetcher does not follow */
        if (gspan > 0 && gs2 >= 0 && gs3 >= 0) {
            const ptrdiff_t ln = L - l0 - lc < CH ? L - l0 - lc : CH;
            for (ptrdiff_t l = 0; l < ln; l++) {
                const char *r = go + ((l0 + lc + l) * gps + od0 * gs2 + oh0 * gs3) * es;
                for (ptrdiff_t o = 0; o < gspan; o += 64) _mm_prefetch(r + o, _MM_HINT_T0);
                _mm_prefetch(r + gspan - 1, _MM_HINT_T0);
            }
        }
#endif
        /* E rows, od-major */
        float *erow = E;
        for (ptrdiff_t od = od0; od < od1; od++) {
            for (ptrdiff_t oh = oh0; oh < oh1; oh++, erow += estep) {
                const char *r = go + (l0 * gps + od * gs2 + oh * gs3) * es;
                const __m256 k = _mm256_set1_ps(wd[od] * wh[oh]);
                if (aff) {
                    float *ar = arows + PG_PLANE_LEAD;
                    for (ptrdiff_t l = 0; l < lc; l++, r += gps * es, ar += PG_PLANE_SLOT) {
                        __m256 lo = pg_plane_get8(r, &glo, kind);
                        if (scale) lo = _mm256_mul_ps(lo, wlo);
                        _mm256_store_ps(ar, _mm256_blendv_ps(negz, lo, klo));
                        if (nhi) {
                            __m256 hi = pg_plane_get8(r + 8 * es, &ghi, kind);
                            if (scale) hi = _mm256_mul_ps(hi, whi);
                            _mm256_store_ps(ar + 8, _mm256_blendv_ps(negz, hi, khi));
                        }
                    }
                    pg_plane_aff(erow, arows + PG_PLANE_LEAD, lc, k,
                                 (const ptrdiff_t (*)[PG_PLANE_TAPS])aoff, m, two);
                    continue;
                }
                for (ptrdiff_t l = 0; l < lc; l++, r += gps * es) {
                    __m256 lo = pg_plane_get8(r, &glo, kind);
                    __m256 hi = shi;
                    if (scale) lo = _mm256_mul_ps(lo, wlo);
                    lo = _mm256_blendv_ps(slo, lo, klo);
                    if (HI && nhi) {
                        hi = pg_plane_get8(r + 8 * es, &ghi, kind);
                        if (scale) hi = _mm256_mul_ps(hi, whi);
                        hi = _mm256_blendv_ps(shi, hi, khi);
                    }
                    (void)hi;
                    if (MT) {
                        /* MT taps in both halves (a tap left out adds -0.0: the same bits) */
                        __m256 s = PG_PLANE_TAP(0, 0);
                        if (MT > 1) s = _mm256_add_ps(s, PG_PLANE_TAP(0, 1));
                        _mm256_storeu_ps(erow + 16 * l, _mm256_mul_ps(k, s));
                        if (two) {
                            __m256 s1 = PG_PLANE_TAP(1, 0);
                            if (MT > 1) s1 = _mm256_add_ps(s1, PG_PLANE_TAP(1, 1));
                            _mm256_storeu_ps(erow + 16 * l + 8, _mm256_mul_ps(k, s1));
                        }
                    } else
                    for (int h = 0; h < nhalf; h++) {
                        __m256 s = PG_PLANE_TAP(h, 0);
                        if (mt[h] > 1) s = _mm256_add_ps(s, PG_PLANE_TAP(h, 1));
                        if (mt[h] > 2) s = _mm256_add_ps(s, PG_PLANE_TAP(h, 2));
                        if (mt[h] > 3) s = _mm256_add_ps(s, PG_PLANE_TAP(h, 3));
                        _mm256_storeu_ps(erow + 16 * l + 8 * h, _mm256_mul_ps(k, s));
                    }
                }
            }
        }
        /* grad_input rows: each D row's rows [h0, h1) of the chunk's planes */
        for (ptrdiff_t idd = d0; idd < d1; idd++) {
            char *const dst = gi + (l0 * xps + idd * xs2 + h0 * xs3) * es;
            char *out = direct ? dst : stage;
            const ptrdiff_t pstep = direct ? xps * es : nh * rowb;
            const ptrdiff_t rstep = direct ? xs3 * es : rowb;
            const ptrdiff_t da = dlo[idd], nd = dhi[idd] - da;
            const float *const ed = E + (da - od0) * noh * estep;
            /* rows of 8 or more: each row for all the chunk's planes; narrower ones plane
             * by plane, as each row's store passes its end into the next row (each plane
             * its own expansion: a loop of one plane the compiler sees) */
            if (wide) {
                PG_PLANE_OUT(0, lc)
            } else {
                for (ptrdiff_t lp = 0; lp < lc; lp++) {
                    PG_PLANE_OUT(lp, lp + 1)
                }
            }
            if (!direct) {
                /* the staged planes out, in runs that follow each other in the output */
                ptrdiff_t run = 0;
                char *run_dst = dst;
                const char *run_src = stage;
                for (ptrdiff_t l = 0; l < lc; l++) {
                    char *to = dst + l * xps * es;
                    if (run && to != run_dst + run) {
                        pg_plane_flush(run_dst, run_src, run, kind, stream);
                        run_dst = to;
                        run_src = stage + l * nh * rowb;
                        run = 0;
                    }
                    run += nh * rowb;
                }
                pg_plane_flush(run_dst, run_src, run, kind, stream);
            }
        }
    }
}
#undef PG_PLANE_ROWS
#undef PG_PLANE_OUT
#undef PG_PLANE_TAP

__attribute__((target("avx2,f16c")))
static void pg_plane_avx2(const pg_plane_args *a)
{
    /* HI where the row and its sentinel slots in use pass 8 slots */
    int z = 0, n = 0;
    for (ptrdiff_t i = 0; i < a->W * a->m; i++) {
        z |= a->tap[i] == a->Wo;
        n |= a->tap[i] == a->Wo + 1;
    }
    const int hi = a->Wo + z + n > 8;
    /* float32: the taps a constant where there are at most two (each a copy of the body;
     * the 16-bit formats keep one) */
    const int mt = a->m <= 2 ? (int)a->m : 0;
#define PG_PLANE_MT(H) \
    (mt == 1 ? pg_plane_body(a, 0, H, 1) : mt == 2 ? pg_plane_body(a, 0, H, 2) \
             : pg_plane_body(a, 0, H, 0))
    if (a->kind == 0) {
        if (hi) PG_PLANE_MT(1); else PG_PLANE_MT(0);
    } else if (a->kind == 2) {
        if (hi) pg_plane_body(a, 2, 1, 0); else pg_plane_body(a, 2, 0, 0);
    } else {
        if (hi) pg_plane_body(a, 3, 1, 0); else pg_plane_body(a, 3, 0, 0);
    }
#undef PG_PLANE_MT
}
#endif

static inline int pg_plane_item(const pg_plane_args *a)
{
#if PG_X86_DISPATCH
    const ptrdiff_t es = a->kind ? 2 : 4;
    if (a->W >= 1 && a->W <= 16 && a->Wo >= 1 && a->Wo <= 14 && a->m >= 1
            && a->m <= PG_PLANE_TAPS && (a->xs3 == a->W || (a->W >= 8 && !a->stream))
            && a->h1 > a->h0 && a->d1 > a->d0
            && (a->kind == 0 || a->kind == 2 || a->kind == 3)
            && (a->h1 - a->h0) * a->W * es + 32 <= a->stage_bytes
            && (a->dhi[a->d1 - 1] - a->dlo[a->d0]) * (a->hhi[a->h1 - 1] - a->hlo[a->h0]) * 16
               * (a->L < PG_PLANE_CH ? a->L : PG_PLANE_CH) <= a->E_elems
            && pg_have_avx2() && pg_have_f16c()) {
        pg_plane_avx2(a);
        return 1;
    }
#endif
    (void)a;
    return 0;
}

#endif

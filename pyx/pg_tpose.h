/*
 * Small NCHW planes with C as the lane axis (_plan.gather_views6, "tstore"): each lane is a
 * whole plane, so a work item gathers its grad_output rows from C planes into
 * [position][lane] order and scatters its grad_input rows back to the planes.  These two
 * loops do it eight lanes by eight positions at a time, through an 8x8 transpose in
 * registers, where the general code moved one value at a time.  They compute what the
 * element loops compute (one widening and one multiply by the W weight on the way in, one
 * rounding on the way out), so the results are the same bits.
 *
 *   pg_tload:  dst[(q * pitch + c) * L + l] = value(src[l * ps + p]) (times ww[c]),
 *              p = q * rowlen + c: rows of rowlen positions, placed pitch positions apart
 *   pg_tstore: dst[l * ps + p] = round(src[p * L + l])
 *
 * kind: 0 float32, 2 float16, 3 bfloat16 (the kernels' K_* numbers).  Written once against
 * the vector layer (pg_vec.h): AVX2 and F16C where the CPU has them, SSE2 or NEON elsewhere.
 * Both return 0, and do nothing, where there are fewer than 8 lanes or no vector layer
 * (MSVC): the caller then runs its element loops.
 */
#ifndef PG_TPOSE_H
#define PG_TPOSE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "pg_cpu.h"
#include "pg_half.h"
#include "pg_stream.h"
#include "pg_vec.h"

#if PG_VEC
/* eight float32 values of one lane stored from p on, rounded to the element's format */
PG_VEC_INLINE void pg_vtstore8(char *dst, ptrdiff_t p, pg_f8 v, int kind, int isa)
{
    if (kind == 0) pg_f8_store((float *)dst + p, v);
    else pg_h8_store((uint16_t *)dst + p, kind == 2 ? pg_f8_to_f16(v, isa) : pg_f8_to_bf16(v));
}

PG_VEC_INLINE void pg_tload_body(float *PG_RESTRICT dst, const char *src, ptrdiff_t ps,
                                 ptrdiff_t n, ptrdiff_t L, const float *ww, ptrdiff_t rowlen,
                                 ptrdiff_t pitch, int kind, int isa)
{
    const ptrdiff_t es = kind ? 2 : 4;
    const int lk = kind == 0 ? 0 : (kind == 2 ? 1 : 2);   /* pg_f8_get's numbers */
    char pad[8][32];   /* fewer than 8 positions: each lane's values in a block of 8 */
    if (n < 8) memset(pad, 0, sizeof pad);
    /* every line of every lane asked for at once: the loads below take eight lanes a step
     * across the item's planes, an order the hardware prefetcher does not follow */
    for (ptrdiff_t l = 0; l < L; l++)
        for (ptrdiff_t o = 0; o < n * es; o += 64)
            __builtin_prefetch(src + l * ps * es + o, 0, 3);
    for (ptrdiff_t l0 = 0;; l0 += 8) {
        if (l0 + 8 > L) l0 = L - 8;   /* the last block overlaps: the same values again */
        const char *s = src + l0 * ps * es;
        for (ptrdiff_t p = 0;; p += 8) {
            if (n >= 8 && p + 8 > n) p = n - 8;
            pg_f8 r[8];
            for (int i = 0; i < 8; i++) {
                if (n >= 8) {
                    r[i] = pg_f8_get(s + (i * ps + p) * es, lk, isa);
                } else {
                    memcpy(pad[i], s + i * ps * es, (size_t)(n * es));
                    r[i] = pg_f8_get(pad[i], lk, isa);
                }
            }
            pg_f8_transpose8(r, isa);
            /* position p + j: column c of row q, at (q * pitch + c) * L */
            ptrdiff_t q = p / rowlen, c = p - q * rowlen;
            for (ptrdiff_t j = 0; j < 8 && p + j < n; j++) {
                pg_f8_store(dst + (q * pitch + c) * L + l0, ww ? r[j] * ww[c] : r[j]);
                if (++c == rowlen) { c = 0; q++; }
            }
            if (p + 8 >= n) break;
        }
        if (l0 + 8 == L) break;
    }
}

PG_VEC_INLINE void pg_tstore_body(char *dst, ptrdiff_t ps, const float *PG_RESTRICT src,
                                  ptrdiff_t n, ptrdiff_t L, int kind, int isa)
{
    const ptrdiff_t es = kind ? 2 : 4;
    for (ptrdiff_t l0 = 0;; l0 += 8) {
        if (l0 + 8 > L) l0 = L - 8;
        char *d = dst + l0 * ps * es;
        for (ptrdiff_t p = 0;; p += 8) {
            if (p + 8 > n) p = n - 8;
            pg_f8 r[8];
            for (int j = 0; j < 8; j++) r[j] = pg_f8_load(src + (p + j) * L + l0);
            pg_f8_transpose8(r, isa);
            if (kind == 3) {   /* bfloat16 rounds two rows at a time */
                for (int i = 0; i < 8; i += 2) {
                    pg_h8 ha, hb;
                    pg_f8x2_to_bf16(r[i], r[i + 1], &ha, &hb, isa);
                    pg_h8_store((uint16_t *)(d + i * ps * es) + p, ha);
                    pg_h8_store((uint16_t *)(d + (i + 1) * ps * es) + p, hb);
                }
            } else {
                for (int i = 0; i < 8; i++) pg_vtstore8(d + i * ps * es, p, r[i], kind, isa);
            }
            if (p + 8 == n) break;
        }
        if (l0 + 8 == L) break;
    }
}

/* one copy per instruction set and format, the element size a constant */
#define PG_TPOSE_ISA(LOAD, STORE, ATTR, ISA)                                                \
ATTR static void LOAD(float *dst, const void *src, ptrdiff_t ps, ptrdiff_t n, ptrdiff_t L,   \
                      const float *ww, ptrdiff_t rowlen, ptrdiff_t pitch, int kind)         \
{                                                                                           \
    const char *s = (const char *)src;                                                      \
    if (kind == 0) pg_tload_body(dst, s, ps, n, L, ww, rowlen, pitch, 0, ISA);              \
    else if (kind == 2) pg_tload_body(dst, s, ps, n, L, ww, rowlen, pitch, 2, ISA);         \
    else pg_tload_body(dst, s, ps, n, L, ww, rowlen, pitch, 3, ISA);                        \
}                                                                                           \
ATTR static void STORE(void *dst, ptrdiff_t ps, const float *src, ptrdiff_t n, ptrdiff_t L,  \
                       int kind)                                                            \
{                                                                                           \
    if (kind == 0) pg_tstore_body((char *)dst, ps, src, n, L, 0, ISA);                      \
    else if (kind == 2) pg_tstore_body((char *)dst, ps, src, n, L, 2, ISA);                 \
    else pg_tstore_body((char *)dst, ps, src, n, L, 3, ISA);                                \
}

PG_TPOSE_ISA(pg_tload_base, pg_tstore_base, , PG_ISA_BASE)
#if PG_X86_DISPATCH
PG_TPOSE_ISA(pg_tload_avx2, pg_tstore_avx2, PG_TARGET_AVX2_F16C, PG_ISA_AVX2)
#endif

/* 2: the AVX2 copies, 1: the baseline ones, for every format: without float16 hardware
 * (SSE2) the layer converts eight float16 values in 60 to 80 instructions, where the
 * caller's element loops spend 15 to 25 on each value (a branchy scalar conversion, an
 * index, a load or store a plane away from the one before) */
static inline int pg_tpose_isa(int kind)
{
    (void)kind;
#if PG_X86_DISPATCH
    if (pg_have_avx2() && pg_have_f16c()) return 2;
#endif
    return 1;
}
#endif

static inline int pg_tload(float *dst, const void *src, ptrdiff_t ps, ptrdiff_t n,
                           ptrdiff_t L, const float *ww, ptrdiff_t rowlen, ptrdiff_t pitch,
                           int kind)
{
#if PG_VEC
    const int isa = L >= 8 && n >= 1 ? pg_tpose_isa(kind) : 0;
#if PG_X86_DISPATCH
    if (isa == 2) pg_tload_avx2(dst, src, ps, n, L, ww, rowlen, pitch, kind);
#endif
    if (isa == 1) pg_tload_base(dst, src, ps, n, L, ww, rowlen, pitch, kind);
    if (isa) return 1;
#endif
    (void)dst; (void)src; (void)ps; (void)n; (void)L; (void)ww; (void)rowlen; (void)pitch;
    (void)kind;
    return 0;
}

/* at least 8 positions (a short item keeps the element loop) */
static inline int pg_tstore(void *dst, ptrdiff_t ps, const float *src, ptrdiff_t n,
                            ptrdiff_t L, int kind)
{
#if PG_VEC
    const int isa = L >= 8 && n >= 8 ? pg_tpose_isa(kind) : 0;
#if PG_X86_DISPATCH
    if (isa == 2) pg_tstore_avx2(dst, ps, src, n, L, kind);
#endif
    if (isa == 1) pg_tstore_base(dst, ps, src, n, L, kind);
    if (isa) return 1;
#endif
    (void)dst; (void)ps; (void)src; (void)n; (void)L; (void)kind;
    return 0;
}

#endif

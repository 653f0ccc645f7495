/*
 * The kernels' vector layer: one source for every instruction set.
 *
 * pg_f8 is eight float32 lanes as a GCC/Clang vector type.  A kernel body written against
 * it (always inlined) is compiled once per instruction set by the function that inlines
 * it: inside a PG_TARGET_AVX2_F16C function the compiler lowers it to one AVX2 register,
 * elsewhere to two SSE2 registers (x86-64's baseline) or two NEON registers (aarch64).
 * Operators (+, *, &, |, <<, comparisons) are element-wise; casts between vectors of the
 * same size reinterpret the bits.  Nothing here fuses a multiply and an add (the build's
 * -ffp-contract=off), so every instruction set gives the same bits.
 *
 * What differs between instruction sets is passed as a constant `isa` and chosen here,
 * never in a kernel body: PG_ISA_AVX2 (AVX2 and F16C: float16 converted in hardware) or
 * PG_ISA_BASE (SSE2 on x86, float16 converted lane by lane with pg_half.h's functions;
 * aarch64, float16 converted in hardware through _Float16).
 *
 * MSVC has no vector extensions: PG_VEC is 0 there, and the kernels keep their element
 * loops (which give the same bits).
 */
#ifndef PG_VEC_H
#define PG_VEC_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "pg_cpu.h"
#include "pg_half.h"

#if (defined(__GNUC__) || defined(__clang__)) && !defined(PG_NO_VEC)
#define PG_VEC 1
#if defined(__GNUC__) && !defined(__clang__)
/* 32-byte vectors passed by value outside AVX code: only between inlined functions here */
#pragma GCC diagnostic ignored "-Wpsabi"
#endif

enum { PG_ISA_BASE = 0, PG_ISA_AVX2 = 1 };

typedef float pg_f8 __attribute__((vector_size(32)));
typedef int32_t pg_i8 __attribute__((vector_size(32)));
typedef uint32_t pg_u8 __attribute__((vector_size(32)));
typedef uint16_t pg_h8 __attribute__((vector_size(16)));

#if defined(__clang__)
#define PG_SHUF8(a, b, i0, i1, i2, i3, i4, i5, i6, i7) \
    __builtin_shufflevector(a, b, i0, i1, i2, i3, i4, i5, i6, i7)
#else
#define PG_SHUF8(a, b, i0, i1, i2, i3, i4, i5, i6, i7) \
    __builtin_shuffle(a, b, (pg_i8){i0, i1, i2, i3, i4, i5, i6, i7})
#endif

#if defined(__aarch64__) && defined(__ARM_FP16_FORMAT_IEEE)
#define PG_VEC_F16 1     /* _Float16 vectors: fcvtl / fcvtn */
typedef _Float16 pg_hf8 __attribute__((vector_size(16)));
#else
#define PG_VEC_F16 0
#endif

#define PG_VEC_INLINE __attribute__((always_inline)) static inline

/* unaligned loads and stores (memcpy: one vector move where the target has it) */
PG_VEC_INLINE pg_f8 pg_f8_load(const void *p) { pg_f8 v; memcpy(&v, p, 32); return v; }
PG_VEC_INLINE void pg_f8_store(void *p, pg_f8 v) { memcpy(p, &v, 32); }
PG_VEC_INLINE pg_h8 pg_h8_load(const void *p) { pg_h8 v; memcpy(&v, p, 16); return v; }
PG_VEC_INLINE void pg_h8_store(void *p, pg_h8 v) { memcpy(p, &v, 16); }
PG_VEC_INLINE pg_f8 pg_f8_set1(float x) { return (pg_f8){x, x, x, x, x, x, x, x}; }

/* float16 bits to float32, and float32 to float16 rounded to nearest even.  F16C's forms
 * are functions of their own (not forced inline): a baseline body may name them in a
 * branch its constant `isa` removes, which an always-inline F16C intrinsic would refuse;
 * they take pointers, since a 32-byte vector may not cross into AVX code by value. */
#if PG_X86_DISPATCH
PG_TARGET_AVX2_F16C static inline void pg_f8_from_f16_f16c(const pg_h8 *h, pg_f8 *v)
{
    __m128i x;
    memcpy(&x, h, 16);
    __m256 r = _mm256_cvtph_ps(x);
    memcpy(v, &r, 32);
}

PG_TARGET_AVX2_F16C static inline void pg_f8_to_f16_f16c(const pg_f8 *v, pg_h8 *h)
{
    __m256 x;
    memcpy(&x, v, 32);
    __m128i r = _mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT);
    memcpy(h, &r, 16);
}
#endif

PG_VEC_INLINE pg_f8 pg_f8_from_f16(pg_h8 h, int isa)
{
#if PG_X86_DISPATCH
    if (isa == PG_ISA_AVX2) {
        pg_f8 v;
        pg_f8_from_f16_f16c(&h, &v);
        return v;
    }
#endif
    (void)isa;
#if PG_VEC_F16
    return __builtin_convertvector((pg_hf8)h, pg_f8);
#else
    float t[8];   /* lane by lane, through memory (inserting lanes costs more) */
    for (int i = 0; i < 8; i++) t[i] = pg_f16_to_f32(h[i]);
    return pg_f8_load(t);
#endif
}

PG_VEC_INLINE pg_h8 pg_f8_to_f16(pg_f8 v, int isa)
{
#if PG_X86_DISPATCH
    if (isa == PG_ISA_AVX2) {
        pg_h8 h;
        pg_f8_to_f16_f16c(&v, &h);
        return h;
    }
#endif
    (void)isa;
#if PG_VEC_F16
    return (pg_h8)__builtin_convertvector(v, pg_hf8);
#else
    float t[8];
    uint16_t u[8];
    pg_f8_store(t, v);
    for (int i = 0; i < 8; i++) u[i] = pg_f32_to_f16(t[i]);
    return pg_h8_load(u);
#endif
}

/* bfloat16 bits to float32 (exact), and float32 to bfloat16 rounded to nearest even, a NaN
 * kept a quiet NaN of the same sign (pg_f32_to_bf16's bits) */
PG_VEC_INLINE pg_f8 pg_f8_from_bf16(pg_h8 h)
{
    return (pg_f8)(__builtin_convertvector(h, pg_u8) << 16);
}

PG_VEC_INLINE pg_h8 pg_f8_to_bf16(pg_f8 v)
{
    const pg_u8 u = (pg_u8)v, hi = u >> 16;
    const pg_u8 r = (u + 0x7FFF + (hi & 1)) >> 16;
    const pg_u8 nan = (pg_u8)((u & 0x7FFFFFFF) > 0x7F800000);   /* all ones where NaN */
    return __builtin_convertvector((r & ~nan) | ((hi | 0x40) & nan), pg_h8);
}

/* sixteen values rounded to bfloat16 the same way, a to *ha and b to *hb; AVX2 tests the
 * sixteen for NaN at once and rounds rows without NaN (nearly all) without the select */
#if PG_X86_DISPATCH
PG_TARGET_AVX2_F16C static inline void pg_f8x2_to_bf16_avx2(const pg_f8 *a, const pg_f8 *b,
                                                           pg_h8 *ha, pg_h8 *hb)
{
    __m256 x, y;
    memcpy(&x, a, 32);
    memcpy(&y, b, 32);
    const __m256i q = pg_bf16_round16_avx2(x, y);
    memcpy(ha, &q, 16);
    memcpy(hb, (const char *)&q + 16, 16);
}
#endif

PG_VEC_INLINE void pg_f8x2_to_bf16(pg_f8 a, pg_f8 b, pg_h8 *ha, pg_h8 *hb, int isa)
{
#if PG_X86_DISPATCH
    if (isa == PG_ISA_AVX2) {
        pg_f8x2_to_bf16_avx2(&a, &b, ha, hb);
        return;
    }
#endif
    (void)isa;
    *ha = pg_f8_to_bf16(a);
    *hb = pg_f8_to_bf16(b);
}

/* eight values of a format (0 float32, 1 float16, 2 bfloat16: the lanes' numbers) */
PG_VEC_INLINE pg_f8 pg_f8_get(const void *p, int lk, int isa)
{
    if (lk == 0) return pg_f8_load(p);
    if (lk == 1) return pg_f8_from_f16(pg_h8_load(p), isa);
    return pg_f8_from_bf16(pg_h8_load(p));
}

/* r[j] <- column j of the 8x8 matrix whose row i is r[i].  AVX2 shuffles whole 256-bit
 * registers; 128-bit instruction sets (SSE2, NEON) transpose the four 4x4 blocks, each
 * a register's half, with shuffles of 4 lanes (which they have) and swap the corners. */
typedef float pg_f4 __attribute__((vector_size(16)));
typedef int32_t pg_i4 __attribute__((vector_size(16)));
#if defined(__clang__)
#define PG_SHUF4(a, b, i0, i1, i2, i3) __builtin_shufflevector(a, b, i0, i1, i2, i3)
#define PG_HALF(v, h) __builtin_shufflevector(v, v, 4 * (h), 4 * (h) + 1, 4 * (h) + 2, 4 * (h) + 3)
#define PG_JOIN(a, b) __builtin_shufflevector(a, b, 0, 1, 2, 3, 4, 5, 6, 7)
#else
#define PG_SHUF4(a, b, i0, i1, i2, i3) __builtin_shuffle(a, b, (pg_i4){i0, i1, i2, i3})
#define PG_HALF(v, h) ((pg_f4){(v)[4 * (h)], (v)[4 * (h) + 1], (v)[4 * (h) + 2], (v)[4 * (h) + 3]})
#define PG_JOIN(a, b) ((pg_f8){(a)[0], (a)[1], (a)[2], (a)[3], (b)[0], (b)[1], (b)[2], (b)[3]})
#endif

PG_VEC_INLINE void pg_f4_transpose4(pg_f4 *a, pg_f4 *b, pg_f4 *c, pg_f4 *d)
{
    const pg_f4 t0 = PG_SHUF4(*a, *b, 0, 4, 1, 5), t1 = PG_SHUF4(*a, *b, 2, 6, 3, 7);
    const pg_f4 t2 = PG_SHUF4(*c, *d, 0, 4, 1, 5), t3 = PG_SHUF4(*c, *d, 2, 6, 3, 7);
    *a = PG_SHUF4(t0, t2, 0, 1, 4, 5);
    *b = PG_SHUF4(t0, t2, 2, 3, 6, 7);
    *c = PG_SHUF4(t1, t3, 0, 1, 4, 5);
    *d = PG_SHUF4(t1, t3, 2, 3, 6, 7);
}

PG_VEC_INLINE void pg_f8_transpose8(pg_f8 r[8], int isa)
{
    if (isa == PG_ISA_AVX2) {
        pg_f8 t[8], s[8];
        for (int i = 0; i < 4; i++) {   /* interleave pairs of rows, per 128-bit half */
            t[2 * i] = PG_SHUF8(r[2 * i], r[2 * i + 1], 0, 8, 1, 9, 4, 12, 5, 13);
            t[2 * i + 1] = PG_SHUF8(r[2 * i], r[2 * i + 1], 2, 10, 3, 11, 6, 14, 7, 15);
        }
        for (int i = 0; i < 2; i++) {   /* then pairs of pairs */
            s[4 * i] = PG_SHUF8(t[4 * i], t[4 * i + 2], 0, 1, 8, 9, 4, 5, 12, 13);
            s[4 * i + 1] = PG_SHUF8(t[4 * i], t[4 * i + 2], 2, 3, 10, 11, 6, 7, 14, 15);
            s[4 * i + 2] = PG_SHUF8(t[4 * i + 1], t[4 * i + 3], 0, 1, 8, 9, 4, 5, 12, 13);
            s[4 * i + 3] = PG_SHUF8(t[4 * i + 1], t[4 * i + 3], 2, 3, 10, 11, 6, 7, 14, 15);
        }
        for (int i = 0; i < 4; i++) {   /* then the 128-bit halves */
            r[i] = PG_SHUF8(s[i], s[i + 4], 0, 1, 2, 3, 8, 9, 10, 11);
            r[i + 4] = PG_SHUF8(s[i], s[i + 4], 4, 5, 6, 7, 12, 13, 14, 15);
        }
        return;
    }
    pg_f4 q[8][2];   /* q[i][h]: half h of row i */
    for (int i = 0; i < 8; i++) {
        q[i][0] = PG_HALF(r[i], 0);
        q[i][1] = PG_HALF(r[i], 1);
    }
    for (int bi = 0; bi < 2; bi++)
        for (int bh = 0; bh < 2; bh++)
            pg_f4_transpose4(&q[4 * bi][bh], &q[4 * bi + 1][bh], &q[4 * bi + 2][bh],
                             &q[4 * bi + 3][bh]);
    /* row j of the result: block (0, j / 4)'s row j % 4, then block (1, j / 4)'s */
    for (int j = 0; j < 8; j++) r[j] = PG_JOIN(q[j % 4][j / 4], q[4 + j % 4][j / 4]);
}

/* --- layer for pg_plane.h, pg_expand.h --- */
/* AVX2 forms (F16C's helpers' pattern above: functions of their own, pointers); AVX2
 * alone, so that they inline into PG_TARGET_AVX2 and PG_TARGET_AVX2_F16C code alike */
#if PG_X86_DISPATCH
PG_TARGET_AVX2 static inline void pg_f8_blend_avx2(const pg_f8 *a, const pg_f8 *b,
                                                  const pg_i8 *m, pg_f8 *r)
{
    __m256 x, y, z;
    memcpy(&x, a, 32);
    memcpy(&y, b, 32);
    memcpy(&z, m, 32);
    x = _mm256_blendv_ps(x, y, z);
    memcpy(r, &x, 32);
}

PG_TARGET_AVX2 static inline void pg_f8_permute_avx2(const pg_f8 *v, const pg_i8 *i, pg_f8 *r)
{
    __m256 x;
    __m256i j;
    memcpy(&x, v, 32);
    memcpy(&j, i, 32);
    x = _mm256_permutevar8x32_ps(x, j);
    memcpy(r, &x, 32);
}

PG_TARGET_AVX2 static inline void pg_f8_to_bf16_avx2(const pg_f8 *v, pg_h8 *h)
{
    __m256 x;
    memcpy(&x, v, 32);
    const __m256i q = pg_bf16_round8_avx2(x);
    const __m128i o = _mm_packus_epi32(_mm256_castsi256_si128(q),
                                       _mm256_extracti128_si256(q, 1));
    memcpy(h, &o, 16);
}
#endif

#if PG_X86_DISPATCH
PG_TARGET_AVX2 static inline void pg_f8_from_bf16_avx2(const pg_h8 *h, pg_f8 *v)
{
    __m128i x;
    memcpy(&x, h, 16);
    const __m256i r = _mm256_slli_epi32(_mm256_cvtepu16_epi32(x), 16);
    memcpy(v, &r, 32);
}

PG_TARGET_AVX2 static inline void pg_f8_set1_avx2(const float *x, pg_f8 *v)
{
    const __m256 r = _mm256_set1_ps(*x);
    memcpy(v, &r, 32);
}
#endif

/* pg_f8_from_bf16 and pg_f8_set1; AVX2 by the intrinsics (gcc 12 makes two 128-bit
 * widenings, and four inserts, of the generic forms in AVX2 code) */
PG_VEC_INLINE pg_f8 pg_f8_from_bf16_isa(pg_h8 h, int isa)
{
#if PG_X86_DISPATCH
    if (isa == PG_ISA_AVX2) {
        pg_f8 v;
        pg_f8_from_bf16_avx2(&h, &v);
        return v;
    }
#endif
    (void)isa;
    return pg_f8_from_bf16(h);
}

PG_VEC_INLINE pg_f8 pg_f8_set1_isa(float x, int isa)
{
#if PG_X86_DISPATCH
    if (isa == PG_ISA_AVX2) {
        pg_f8 v;
        pg_f8_set1_avx2(&x, &v);
        return v;
    }
#endif
    (void)isa;
    return pg_f8_set1(x);
}

/* lanes of b where m is all ones, of a where it is zero (m's lanes: 0 or -1) */
PG_VEC_INLINE pg_f8 pg_f8_blend(pg_f8 a, pg_f8 b, pg_i8 m, int isa)
{
#if PG_X86_DISPATCH
    if (isa == PG_ISA_AVX2) {
        pg_f8 r;
        pg_f8_blend_avx2(&a, &b, &m, &r);
        return r;
    }
#endif
    (void)isa;
    return (pg_f8)(((pg_i8)a & ~m) | ((pg_i8)b & m));
}

/* r[j] = v[i[j]], i's lanes 0 to 7 (AVX2: one vpermps; elsewhere lane by lane) */
PG_VEC_INLINE pg_f8 pg_f8_permute(pg_f8 v, pg_i8 i, int isa)
{
#if PG_X86_DISPATCH
    if (isa == PG_ISA_AVX2) {
        pg_f8 r;
        pg_f8_permute_avx2(&v, &i, &r);
        return r;
    }
#endif
    (void)isa;
    pg_f8 r;
    for (int j = 0; j < 8; j++) r[j] = v[i[j] & 7];
    return r;
}

/* pg_f8_to_bf16's bits; AVX2 through pg_half.h's rounding and a pack (fewer instructions) */
PG_VEC_INLINE pg_h8 pg_f8_to_bf16_isa(pg_f8 v, int isa)
{
#if PG_X86_DISPATCH
    if (isa == PG_ISA_AVX2) {
        pg_h8 h;
        pg_f8_to_bf16_avx2(&v, &h);
        return h;
    }
#endif
    (void)isa;
    return pg_f8_to_bf16(v);
}

/* the first n (0 to 8) values at p, the other lanes zero, nothing read past them (a row's
 * end may be a page's): the masks made once (pg_tail8_of), AVX2 masked loads */
typedef struct {
    pg_i8 m;          /* lanes < n: all ones */
    pg_i4 pairs;      /* 16-bit values: the whole 32-bit pairs below n */
    pg_h8 odd;        /* ... and the lane of an odd last value (n - 1) */
    ptrdiff_t last;   /* that lane, or -1 */
    int n;
} pg_tail8;

PG_VEC_INLINE pg_tail8 pg_tail8_of(int n)
{
    pg_tail8 t;
    for (int j = 0; j < 8; j++) {
        t.m[j] = j < n ? -1 : 0;
        t.odd[j] = j == n - 1 ? 0xFFFF : 0;
    }
    for (int j = 0; j < 4; j++) t.pairs[j] = 2 * j + 2 <= n ? -1 : 0;
    t.last = n & 1 ? n - 1 : -1;
    t.n = n;
    return t;
}

#if PG_X86_DISPATCH
PG_TARGET_AVX2 static inline void pg_f8_load_tail_avx2(const float *p, const pg_tail8 *t,
                                                      pg_f8 *v)
{
    __m256i m;
    memcpy(&m, &t->m, 32);
    const __m256 r = _mm256_maskload_ps(p, m);
    memcpy(v, &r, 32);
}

PG_TARGET_AVX2 static inline void pg_h8_load_tail_avx2(const uint16_t *p, const pg_tail8 *t,
                                                      pg_h8 *h)
{
    __m128i m;
    memcpy(&m, &t->pairs, 16);
    __m128i r = _mm_maskload_epi32((const int *)p, m);
    if (t->last >= 0) {
        __m128i sel;
        memcpy(&sel, &t->odd, 16);
        r = _mm_blendv_epi8(r, _mm_set1_epi16((short)p[t->last]), sel);
    }
    memcpy(h, &r, 16);
}
#endif

PG_VEC_INLINE pg_f8 pg_f8_load_tail(const float *p, const pg_tail8 *t, int isa)
{
#if PG_X86_DISPATCH
    if (isa == PG_ISA_AVX2) {
        pg_f8 v;
        pg_f8_load_tail_avx2(p, t, &v);
        return v;
    }
#endif
    (void)isa;
    if (t->n == 8) return pg_f8_load(p);
    float b[8] = {0};
    for (int j = 0; j < t->n; j++) b[j] = p[j];
    return pg_f8_load(b);
}

PG_VEC_INLINE pg_h8 pg_h8_load_tail(const uint16_t *p, const pg_tail8 *t, int isa)
{
#if PG_X86_DISPATCH
    if (isa == PG_ISA_AVX2) {
        pg_h8 h;
        pg_h8_load_tail_avx2(p, t, &h);
        return h;
    }
#endif
    (void)isa;
    if (t->n == 8) return pg_h8_load(p);
    uint16_t b[8] = {0};
    for (int j = 0; j < t->n; j++) b[j] = p[j];
    return pg_h8_load(b);
}

/* *lo = a0 b0 a1 b1 a2 b2 a3 b3, *hi = a4 b4 ... a7 b7.  AVX2 interleaves within 128-bit
 * halves, then swaps halves; 128-bit sets zip each half (gcc lowers a 32-byte shuffle
 * there lane by lane) */
PG_VEC_INLINE void pg_f8_zip(pg_f8 a, pg_f8 b, pg_f8 *lo, pg_f8 *hi, int isa)
{
    if (isa == PG_ISA_AVX2) {
        const pg_f8 t0 = PG_SHUF8(a, b, 0, 8, 1, 9, 4, 12, 5, 13);
        const pg_f8 t1 = PG_SHUF8(a, b, 2, 10, 3, 11, 6, 14, 7, 15);
        *lo = PG_SHUF8(t0, t1, 0, 1, 2, 3, 8, 9, 10, 11);
        *hi = PG_SHUF8(t0, t1, 4, 5, 6, 7, 12, 13, 14, 15);
        return;
    }
    const pg_f4 a0 = PG_HALF(a, 0), a1 = PG_HALF(a, 1), b0 = PG_HALF(b, 0), b1 = PG_HALF(b, 1);
    *lo = PG_JOIN(PG_SHUF4(a0, b0, 0, 4, 1, 5), PG_SHUF4(a0, b0, 2, 6, 3, 7));
    *hi = PG_JOIN(PG_SHUF4(a1, b1, 0, 4, 1, 5), PG_SHUF4(a1, b1, 2, 6, 3, 7));
}

/* four float64 lanes: one AVX2 register, two SSE2 or NEON ones */
typedef double pg_d4 __attribute__((vector_size(32)));
typedef int64_t pg_l4 __attribute__((vector_size(32)));
PG_VEC_INLINE pg_d4 pg_d4_load(const void *p) { pg_d4 v; memcpy(&v, p, 32); return v; }
PG_VEC_INLINE void pg_d4_store(void *p, pg_d4 v) { memcpy(p, &v, 32); }
PG_VEC_INLINE pg_d4 pg_d4_set1(double x) { return (pg_d4){x, x, x, x}; }

/* *lo = a0 b0 a1 b1, *hi = a2 b2 a3 b3 (as pg_f8_zip) */
PG_VEC_INLINE void pg_d4_zip(pg_d4 a, pg_d4 b, pg_d4 *lo, pg_d4 *hi, int isa)
{
    if (isa == PG_ISA_AVX2) {
#if defined(__clang__)
        const pg_d4 t0 = __builtin_shufflevector(a, b, 0, 4, 2, 6);
        const pg_d4 t1 = __builtin_shufflevector(a, b, 1, 5, 3, 7);
        *lo = __builtin_shufflevector(t0, t1, 0, 1, 4, 5);
        *hi = __builtin_shufflevector(t0, t1, 2, 3, 6, 7);
#else
        const pg_d4 t0 = __builtin_shuffle(a, b, (pg_l4){0, 4, 2, 6});
        const pg_d4 t1 = __builtin_shuffle(a, b, (pg_l4){1, 5, 3, 7});
        *lo = __builtin_shuffle(t0, t1, (pg_l4){0, 1, 4, 5});
        *hi = __builtin_shuffle(t0, t1, (pg_l4){2, 3, 6, 7});
#endif
        return;
    }
    *lo = (pg_d4){a[0], b[0], a[1], b[1]};
    *hi = (pg_d4){a[2], b[2], a[3], b[3]};
}

#else
#define PG_VEC 0
#endif

#endif

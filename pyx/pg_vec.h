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

/* --- layer for pg_item.h --- */
#if defined(__SSE2__)
#include <emmintrin.h>
#endif
typedef uint8_t pg_b32 __attribute__((vector_size(32)));
typedef float pg_f8a __attribute__((vector_size(32), may_alias));   /* for aligned stores */
typedef uint32_t pg_u4 __attribute__((vector_size(16)));
#if defined(__clang__)
#define PG_SHUFH8(a, b, i0, i1, i2, i3, i4, i5, i6, i7) \
    __builtin_shufflevector(a, b, i0, i1, i2, i3, i4, i5, i6, i7)
#define PG_SHUFU4(a, b, i0, i1, i2, i3) __builtin_shufflevector(a, b, i0, i1, i2, i3)
#else
typedef int16_t pg_s8 __attribute__((vector_size(16)));
#define PG_SHUFH8(a, b, i0, i1, i2, i3, i4, i5, i6, i7) \
    __builtin_shuffle(a, b, (pg_s8){i0, i1, i2, i3, i4, i5, i6, i7})
#define PG_SHUFU4(a, b, i0, i1, i2, i3) __builtin_shuffle(a, b, (pg_i4){i0, i1, i2, i3})
#endif

/* 32 bytes to a 32-byte aligned address */
PG_VEC_INLINE void pg_f8_store_a(void *p, pg_f8 v) { *(pg_f8a *)p = v; }
/* 16 and 8 bytes (the other 8 lanes' bytes zero) */
PG_VEC_INLINE pg_f4 pg_f4_load(const void *p) { pg_f4 v; memcpy(&v, p, 16); return v; }
PG_VEC_INLINE pg_f4 pg_f4_load2(const void *p) { pg_f4 v = {0}; memcpy(&v, p, 8); return v; }
PG_VEC_INLINE void pg_f4_store(void *p, pg_f4 v) { memcpy(p, &v, 16); }
PG_VEC_INLINE pg_h8 pg_h8_load4(const void *p) { pg_h8 v = {0}; memcpy(&v, p, 8); return v; }
PG_VEC_INLINE pg_h8 pg_h8_set1(uint16_t x) { return (pg_h8){x, x, x, x, x, x, x, x}; }
PG_VEC_INLINE pg_u8 pg_u8_set1(uint32_t x) { return (pg_u8){x, x, x, x, x, x, x, x}; }
/* a 16-byte store past the caches (p 16-byte aligned) where the ISA has one, else a store */
PG_VEC_INLINE void pg_f4_stream(void *p, pg_f4 v)
{
#if defined(__SSE2__)
    _mm_stream_ps((float *)p, (__m128)v);
#else
    memcpy(p, &v, 16);
#endif
}
/* half h of v (0: lanes 0..3) */
PG_VEC_INLINE pg_f4 pg_f8_half(pg_f8 v, int h)
{
    pg_f4 r;
    memcpy(&r, (const char *)&v + 16 * h, 16);
    return r;
}
/* each 16-bit (es 2) or 32-bit element of the 16 bytes v twice: its first half's to *lo, its
 * second half's to *hi */
PG_VEC_INLINE void pg_f4_twice(pg_f4 v, ptrdiff_t es, pg_f4 *lo, pg_f4 *hi)
{
    if (es == 2) {
        const pg_h8 h = (pg_h8)v;
        *lo = (pg_f4)PG_SHUFH8(h, h, 0, 8, 1, 9, 2, 10, 3, 11);
        *hi = (pg_f4)PG_SHUFH8(h, h, 4, 12, 5, 13, 6, 14, 7, 15);
    } else {
        const pg_u4 u = (pg_u4)v;
        *lo = (pg_f4)PG_SHUFU4(u, u, 0, 4, 1, 5);
        *hi = (pg_f4)PG_SHUFU4(u, u, 2, 6, 3, 7);
    }
}

#if PG_X86_DISPATCH
PG_TARGET_AVX2 static inline void pg_f8_permute_avx2(const pg_f8 *v, const pg_i8 *ix, pg_f8 *r)
{
    __m256 x;
    __m256i i;
    memcpy(&x, v, 32);
    memcpy(&i, ix, 32);
    const __m256 y = _mm256_permutevar8x32_ps(x, i);
    memcpy(r, &y, 32);
}

PG_TARGET_AVX2 static inline void pg_f8_select_avx2(const pg_f8 *a, const pg_f8 *b,
                                                    const pg_i8 *m, pg_f8 *r)
{
    __m256 x, y, s;
    memcpy(&x, a, 32);
    memcpy(&y, b, 32);
    memcpy(&s, m, 32);
    const __m256 z = _mm256_blendv_ps(x, y, s);
    memcpy(r, &z, 32);
}

PG_TARGET_AVX2 static inline int pg_u8_testz_avx2(const pg_u8 *v, const pg_u8 *m)
{
    __m256i x, y;
    memcpy(&x, v, 32);
    memcpy(&y, m, 32);
    return _mm256_testz_si256(x, y);
}

PG_TARGET_AVX2 static inline void pg_f8_to_bf16w_avx2(const pg_f8 *v, pg_u8 *r)
{
    __m256 x;
    memcpy(&x, v, 32);
    const __m256i q = pg_bf16_round8_avx2(x);
    memcpy(r, &q, 32);
}

PG_TARGET_AVX2 static inline void pg_u8_narrow_avx2(const pg_u8 *v, pg_h8 *h)
{
    __m256i x;
    memcpy(&x, v, 32);
    const __m128i o = _mm_packus_epi32(_mm256_castsi256_si128(x), _mm256_extracti128_si256(x, 1));
    memcpy(h, &o, 16);
}

PG_TARGET_AVX2 static inline void pg_lookup_bytes_avx2(const uint8_t *t, const void *ix,
                                                       int wide, pg_b32 *r)
{
    const __m256i c = _mm256_loadu_si256((const __m256i *)ix);
    const __m256i a = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)t));
    __m256i v;
    if (!wide) {
        v = _mm256_shuffle_epi8(a, c);
    } else {
        /* each half's shuffle zeroes the bytes of the other half: indices 16..31 carry into
         * the sign bit of the first, 0..15 borrow into that of the second */
        const __m256i b = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(t + 16)));
        v = _mm256_or_si256(_mm256_shuffle_epi8(a, _mm256_adds_epu8(c, _mm256_set1_epi8(0x70))),
                            _mm256_shuffle_epi8(b, _mm256_sub_epi8(c, _mm256_set1_epi8(16))));
    }
    memcpy(r, &v, 32);
}

PG_TARGET_AVX2 static inline void pg_twice32_avx2(const void *s, ptrdiff_t es, pg_f8 *a, pg_f8 *b)
{
    const __m256i v = _mm256_loadu_si256((const __m256i *)s);
    __m256i lo, hi;
    if (es == 2) {
        lo = _mm256_unpacklo_epi16(v, v);
        hi = _mm256_unpackhi_epi16(v, v);
    } else {
        lo = _mm256_unpacklo_epi32(v, v);
        hi = _mm256_unpackhi_epi32(v, v);
    }
    const __m256i x = _mm256_permute2x128_si256(lo, hi, 0x20);
    const __m256i y = _mm256_permute2x128_si256(lo, hi, 0x31);
    memcpy(a, &x, 32);
    memcpy(b, &y, 32);
}

PG_TARGET_AVX2 static inline void pg_f8_bcast_avx2(float x, pg_f8 *r)
{
    const __m256 v = _mm256_set1_ps(x);
    memcpy(r, &v, 32);
}

PG_TARGET_AVX2 static inline void pg_f8_join_avx2(const pg_f4 *lo, const pg_f4 *hi, pg_f8 *r)
{
    __m128 a, b;
    memcpy(&a, lo, 16);
    memcpy(&b, hi, 16);
    const __m256 v = _mm256_set_m128(b, a);
    memcpy(r, &v, 32);
}

PG_TARGET_AVX2 static inline void pg_h8_widen_avx2(const pg_h8 *h, pg_u8 *r)
{
    __m128i x;
    memcpy(&x, h, 16);
    const __m256i v = _mm256_cvtepu16_epi32(x);
    memcpy(r, &v, 32);
}

PG_TARGET_AVX2_F16C static inline float pg_f16_to_f32_f16c(uint16_t h) { return _cvtsh_ss(h); }
PG_TARGET_AVX2_F16C static inline uint16_t pg_f32_to_f16_f16c(float f)
{
    return _cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT);
}
#endif

/* x in every lane (gcc builds pg_f8_set1's vector lane by lane where the function that
 * inlines it is AVX2 code: vbroadcastss here) */
PG_VEC_INLINE pg_f8 pg_f8_bcast(float x, int isa)
{
    pg_f8 r;
#if PG_X86_DISPATCH
    if (isa == PG_ISA_AVX2) {
        pg_f8_bcast_avx2(x, &r);
        return r;
    }
#endif
    (void)isa;
    const pg_f4 h = {x, x, x, x};
    memcpy(&r, &h, 16);
    memcpy((char *)&r + 16, &h, 16);
    return r;
}

/* lo in lanes 0..3, hi in 4..7 (one vinsertf128 on AVX2, where gcc would go through memory) */
PG_VEC_INLINE pg_f8 pg_f8_join(pg_f4 lo, pg_f4 hi, int isa)
{
    pg_f8 r;
#if PG_X86_DISPATCH
    if (isa == PG_ISA_AVX2) {
        pg_f8_join_avx2(&lo, &hi, &r);
        return r;
    }
#endif
    (void)isa;
    memcpy(&r, &lo, 16);
    memcpy((char *)&r + 16, &hi, 16);
    return r;
}

/* 16-bit lanes widened to 32 bits (one vpmovzxwd on AVX2, where gcc converts the halves
 * apart) */
PG_VEC_INLINE pg_u8 pg_h8_widen(pg_h8 h, int isa)
{
#if PG_X86_DISPATCH
    if (isa == PG_ISA_AVX2) {
        pg_u8 r;
        pg_h8_widen_avx2(&h, &r);
        return r;
    }
#endif
    (void)isa;
    return __builtin_convertvector(h, pg_u8);
}

/* pg_f8_from_bf16 through pg_h8_widen */
PG_VEC_INLINE pg_f8 pg_f8_from_bf16_isa(pg_h8 h, int isa)
{
    return (pg_f8)(pg_h8_widen(h, isa) << 16);
}

/* r[i] = v[ix[i] % 8] */
PG_VEC_INLINE pg_f8 pg_f8_permute(pg_f8 v, pg_i8 ix, int isa)
{
#if PG_X86_DISPATCH
    if (isa == PG_ISA_AVX2) {
        pg_f8 r;
        pg_f8_permute_avx2(&v, &ix, &r);
        return r;
    }
#endif
    (void)isa;
    float t[8], r[8];
    pg_f8_store(t, v);
    for (int i = 0; i < 8; i++) r[i] = t[ix[i] & 7];
    return pg_f8_load(r);
}

/* b in the lanes where m's sign bit is set, a in the others */
PG_VEC_INLINE pg_f8 pg_f8_select(pg_f8 a, pg_f8 b, pg_i8 m, int isa)
{
#if PG_X86_DISPATCH
    if (isa == PG_ISA_AVX2) {
        pg_f8 r;
        pg_f8_select_avx2(&a, &b, &m, &r);
        return r;
    }
#endif
    (void)isa;
    const pg_i8 s = m >> 31;
    return (pg_f8)(((pg_i8)a & ~s) | ((pg_i8)b & s));
}

/* whether v & m is all zero bits */
PG_VEC_INLINE int pg_u8_testz(pg_u8 v, pg_u8 m, int isa)
{
#if PG_X86_DISPATCH
    if (isa == PG_ISA_AVX2) return pg_u8_testz_avx2(&v, &m);
#endif
    (void)isa;
    const pg_u8 t = v & m;
    uint64_t q[4];
    memcpy(q, &t, 32);
    return ((q[0] | q[1]) | (q[2] | q[3])) == 0;
}

/* float32 rounded to bfloat16 as pg_f8_to_bf16 rounds it, in the low half of each lane */
PG_VEC_INLINE pg_u8 pg_f8_to_bf16w(pg_f8 v, int isa)
{
#if PG_X86_DISPATCH
    if (isa == PG_ISA_AVX2) {
        pg_u8 r;
        pg_f8_to_bf16w_avx2(&v, &r);
        return r;
    }
#endif
    (void)isa;
    const pg_u8 u = (pg_u8)v, hi = u >> 16;
    const pg_u8 r = (u + 0x7FFF + (hi & 1)) >> 16;
    const pg_u8 nan = (pg_u8)((u & 0x7FFFFFFF) > 0x7F800000);
    return (r & ~nan) | ((hi | 0x40) & nan);
}

/* 32-bit lanes of at most 0xFFFF narrowed to 16 bits */
PG_VEC_INLINE pg_h8 pg_u8_narrow(pg_u8 v, int isa)
{
#if PG_X86_DISPATCH
    if (isa == PG_ISA_AVX2) {
        pg_h8 h;
        pg_u8_narrow_avx2(&v, &h);
        return h;
    }
#endif
    (void)isa;
    return __builtin_convertvector(v, pg_h8);
}

/* byte i of the result: byte ix[i] of the 16 bytes at t (ix[i] < 16), or of the 32 there
 * where wide (ix[i] < 32); ix: 32 bytes */
PG_VEC_INLINE pg_b32 pg_lookup_bytes(const void *t, const void *ix, int wide, int isa)
{
    pg_b32 r;
#if PG_X86_DISPATCH
    if (isa == PG_ISA_AVX2) {
        pg_lookup_bytes_avx2((const uint8_t *)t, ix, wide, &r);
        return r;
    }
#endif
    (void)isa;
    const uint8_t *tb = (const uint8_t *)t, *c = (const uint8_t *)ix;
    uint8_t o[32];
    for (int i = 0; i < 32; i++) o[i] = tb[c[i] & (wide ? 31 : 15)];
    memcpy(&r, o, 32);
    return r;
}

/* each 16-bit (es 2) or 32-bit element of the 32 bytes at s twice: the first 16 bytes' to
 * *a, the last 16's to *b */
PG_VEC_INLINE void pg_twice32(const void *s, ptrdiff_t es, pg_f8 *a, pg_f8 *b, int isa)
{
#if PG_X86_DISPATCH
    if (isa == PG_ISA_AVX2) {
        pg_twice32_avx2(s, es, a, b);
        return;
    }
#endif
    (void)isa;
    pg_f4 l0, h0, l1, h1;
    pg_f4_twice(pg_f4_load(s), es, &l0, &h0);
    pg_f4_twice(pg_f4_load((const char *)s + 16), es, &l1, &h1);
    *a = pg_f8_join(l0, h0, PG_ISA_BASE);
    *b = pg_f8_join(l1, h1, PG_ISA_BASE);
}

/* one float16 value to float32, and float32 to float16 (rounded to nearest even) */
PG_VEC_INLINE float pg_f16_to_f32_isa(uint16_t h, int isa)
{
#if PG_X86_DISPATCH
    if (isa == PG_ISA_AVX2) return pg_f16_to_f32_f16c(h);
#endif
    (void)isa;
    return pg_f16_to_f32(h);
}

PG_VEC_INLINE uint16_t pg_f32_to_f16_isa(float f, int isa)
{
#if PG_X86_DISPATCH
    if (isa == PG_ISA_AVX2) return pg_f32_to_f16_f16c(f);
#endif
    (void)isa;
    return pg_f32_to_f16(f);
}

#else
#define PG_VEC 0
#endif

#endif

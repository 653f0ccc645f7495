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
 * PG_ISA_BASE (SSE2 on x86, float16 converted in integer and float32 lane operations;
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

/* (defined without the layer too: the kernels pass isa to their element loops as well) */
enum { PG_ISA_BASE = 0, PG_ISA_AVX2 = 1 };

#if (defined(__GNUC__) || defined(__clang__)) && !defined(PG_NO_VEC)
#define PG_VEC 1
#if defined(__GNUC__) && !defined(__clang__)
/* 32-byte vectors passed by value outside AVX code: only between inlined functions here */
#pragma GCC diagnostic ignored "-Wpsabi"
#endif

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

/* in a function of the layer, where isa is PG_ISA_AVX2: return the result of an AVX2
 * helper that writes it through a pointer (pg_r_ in CALL), or run one that returns
 * nothing and return; nothing without the AVX2 copies */
#if PG_X86_DISPATCH
#define PG_AVX2_RETURN(T, CALL) \
    if (isa == PG_ISA_AVX2) { T pg_r_; CALL; return pg_r_; }
#define PG_AVX2_DO(CALL) \
    if (isa == PG_ISA_AVX2) { CALL; return; }
#else
#define PG_AVX2_RETURN(T, CALL)
#define PG_AVX2_DO(CALL)
#endif

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

/* All ones in the lanes whose top bit is set, zero elsewhere: pg_sign_mask(a - b) is the
 * comparison a < b for lanes that differ by less than 2^31.  gcc splits a subtraction and
 * a shift of 32-byte vectors into two 16-byte instructions each on 128-bit targets (SSE2,
 * NEON) but makes eight scalar compares of a 32-byte `<`; AVX2 pays one instruction more
 * than a compare. */
PG_VEC_INLINE pg_u8 pg_sign_mask(pg_u8 d) { return (pg_u8)((pg_i8)d >> 31); }

/* The same two conversions in lane operations only (integer and float32 arithmetic), for
 * instruction sets without float16 hardware (SSE2): the bits of pg_half.h's pg_f16_to_f32
 * and pg_f32_to_f16 for every input, NaN payloads and signs included (checked over all
 * 2^16 and 2^32 inputs), under the default rounding mode, with or without flush-to-zero
 * and denormals-are-zero (no float operation here has a float32 subnormal operand or
 * result, except inputs below 2^-25, which round to zero either way). */
PG_VEC_INLINE pg_f8 pg_f8_from_f16_soft(pg_h8 h)
{
    const pg_u8 x = __builtin_convertvector(h, pg_u8);
    const pg_u8 a = (x & 0x7FFF) << 13;                  /* exponent and mantissa, placed */
    /* rebias the exponent 15 -> 127, and once more for inf and NaN (31 -> 255) */
    pg_u8 r = a + 0x38000000 + (pg_sign_mask(0x0F7FFFFF - a) & 0x38000000);
    r |= pg_sign_mask(0x0F800000 - a) & 0x400000;           /* NaN made quiet */
    /* zero and subnormals, m * 2^-24: (1 + m / 1024) * 2^-14 - 2^-14, exact */
    const pg_u8 sub = pg_sign_mask(a - 0x00800000);
    const pg_u8 s = (pg_u8)((pg_f8)(a | 0x38800000) - 6.103515625e-05f);
    r = (sub & s) | (~sub & r);
    return (pg_f8)(r | (x & 0x8000) << 16);
}

PG_VEC_INLINE pg_h8 pg_f8_to_f16_soft(pg_f8 v)
{
    const pg_u8 u = (pg_u8)v, a = u & 0x7FFFFFFF;
    /* normal half (a >= 2^-14): rebias 127 -> 15 and drop 13 bits to nearest even (a carry
     * into the exponent is the right answer) */
    pg_u8 r = (a - 0x38000000 + 0xFFF + ((a >> 13) & 1)) >> 13;
    /* subnormal half: adding 0.5 leaves a * 2^24 rounded to nearest even in the mantissa */
    const pg_u8 sub = pg_sign_mask(a - 0x38800000);
    const pg_u8 s = (pg_u8)((pg_f8)a + 0.5f) - 0x3F000000;
    r = (sub & s) | (~sub & r);
    /* 65520 and up: infinity; NaN: quiet, the payload's top 9 bits kept */
    const pg_u8 big = pg_sign_mask(0x477FEFFF - a);
    const pg_u8 inf = 0x7C00 | (pg_sign_mask(0x7F800000 - a) & (0x200 | ((a >> 13) & 0x3FF)));
    r = (big & inf) | (~big & r);
    return __builtin_convertvector(r | ((u >> 16) & 0x8000), pg_h8);
}

PG_VEC_INLINE pg_f8 pg_f8_from_f16(pg_h8 h, int isa)
{
    PG_AVX2_RETURN(pg_f8, pg_f8_from_f16_f16c(&h, &pg_r_));
    (void)isa;
#if PG_VEC_F16
    return __builtin_convertvector((pg_hf8)h, pg_f8);
#else
    return pg_f8_from_f16_soft(h);
#endif
}

PG_VEC_INLINE pg_h8 pg_f8_to_f16(pg_f8 v, int isa)
{
    PG_AVX2_RETURN(pg_h8, pg_f8_to_f16_f16c(&v, &pg_r_));
    (void)isa;
#if PG_VEC_F16
    return (pg_h8)__builtin_convertvector(v, pg_hf8);
#else
    return pg_f8_to_f16_soft(v);
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
    const pg_u8 nan = pg_sign_mask(0x7F800000 - (u & 0x7FFFFFFF));   /* all ones where NaN */
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
    PG_AVX2_DO(pg_f8x2_to_bf16_avx2(&a, &b, ha, hb));
    (void)isa;
    *ha = pg_f8_to_bf16(a);
    *hb = pg_f8_to_bf16(b);
}

/* the same sixteen values stored from p on (unaligned), a then b: one 32-byte store on AVX2 */
#if PG_X86_DISPATCH
PG_TARGET_AVX2_F16C static inline void pg_f8x2_store_bf16_avx2(void *p, const pg_f8 *a,
                                                               const pg_f8 *b)
{
    __m256 x, y;
    memcpy(&x, a, 32);
    memcpy(&y, b, 32);
    const __m256i q = pg_bf16_round16_avx2(x, y);
    memcpy(p, &q, 32);
}
#endif

PG_VEC_INLINE void pg_f8x2_store_bf16(void *p, pg_f8 a, pg_f8 b, int isa)
{
    PG_AVX2_DO(pg_f8x2_store_bf16_avx2(p, &a, &b));
    (void)isa;
    pg_h8_store(p, pg_f8_to_bf16(a));
    pg_h8_store((char *)p + 16, pg_f8_to_bf16(b));
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

/* --- layer for pg_scatter.h --- */
typedef int64_t pg_q4 __attribute__((vector_size(32)));     /* four int64 lanes */
typedef uint64_t pg_uq4 __attribute__((vector_size(32)));   /* four uint64 lanes */
typedef uint32_t pg_u4 __attribute__((vector_size(16)));    /* four uint32 lanes */
typedef uint16_t pg_h4 __attribute__((vector_size(8)));     /* four 16-bit values */
typedef uint16_t pg_h16 __attribute__((vector_size(32)));   /* sixteen 16-bit values */

#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#if PG_X86_DISPATCH
/* AVX2 / F16C forms of the primitives below (pointers: see pg_f8_from_f16_f16c) */
PG_TARGET_AVX2_F16C static inline int pg_q4_movemask_avx2(const pg_q4 *m)
{
    __m256d x;
    memcpy(&x, m, 32);
    return _mm256_movemask_pd(x);
}

PG_TARGET_AVX2_F16C static inline void pg_f4_from_f16_f16c(const pg_h4 *h, pg_f4 *v)
{
    __m128i x = _mm_setzero_si128();
    memcpy(&x, h, 8);
    const __m128 r = _mm_cvtph_ps(x);
    memcpy(v, &r, 16);
}

PG_TARGET_AVX2_F16C static inline float pg_f16_to_f32_f16c(uint16_t h) { return _cvtsh_ss(h); }

PG_TARGET_AVX2_F16C static inline uint16_t pg_f32_to_f16_f16c(float f)
{
    return (uint16_t)_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT);
}

PG_TARGET_AVX2_F16C static inline void pg_bf16x16_avx2(const pg_f8 *a, const pg_f8 *b,
                                                       pg_h16 *h)
{
    __m256 x, y;
    memcpy(&x, a, 32);
    memcpy(&y, b, 32);
    const __m256i q = pg_bf16_round16_avx2(x, y);
    memcpy(h, &q, 32);
}

PG_TARGET_AVX2_F16C static inline void pg_f16x16_f16c(const pg_f8 *a, const pg_f8 *b,
                                                      pg_h16 *h)
{
    __m256 x, y;
    memcpy(&x, a, 32);
    memcpy(&y, b, 32);
    const __m256i q = _mm256_set_m128i(_mm256_cvtps_ph(y, _MM_FROUND_TO_NEAREST_INT),
                                       _mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT));
    memcpy(h, &q, 32);
}

PG_TARGET_AVX2_F16C static inline void pg_i8_stream_avx2(void *p, const pg_i8 *v)
{
    __m256i x;
    memcpy(&x, v, 32);
    _mm256_stream_si256((__m256i *)p, x);
}
#endif

/* a + b with a the first operand of the x86 instruction (where both are NaN, x86 keeps the
 * first one's bits; a compiler may swap the operands of `+`, clang even those of
 * _mm_add_ss): VEX-encoded in AVX code, SSE otherwise */
PG_VEC_INLINE float pg_add_first(float a, float b, int isa)
{
#if defined(__x86_64__) || defined(__i386__)
#if defined(__AVX__)
    isa = PG_ISA_AVX2;
#endif
    if (isa == PG_ISA_AVX2) __asm__("vaddss {%2, %1, %0|%0, %1, %2}" : "=x"(a) : "x"(a), "x"(b));
    else __asm__("addss {%1, %0|%0, %1}" : "+x"(a) : "x"(b));
    return a;
#else
    (void)isa;
    return a + b;
#endif
}

/* four int64 lanes from p, or four int32 lanes sign-extended */
PG_VEC_INLINE pg_q4 pg_q4_load(const void *p) { pg_q4 v; memcpy(&v, p, 32); return v; }
PG_VEC_INLINE pg_q4 pg_q4_from_i32(const void *p)
{
    pg_i4 v;
    memcpy(&v, p, 16);
    return __builtin_convertvector(v, pg_q4);
}

/* bit k: lane k of m (all ones or all zeros) set */
PG_VEC_INLINE int pg_q4_movemask(pg_q4 m, int isa)
{
#if PG_X86_DISPATCH
    if (isa == PG_ISA_AVX2) return pg_q4_movemask_avx2(&m);
#endif
    (void)isa;
#if defined(__SSE2__)
    __m128d lo, hi;
    memcpy(&lo, &m, 16);
    memcpy(&hi, (const char *)&m + 16, 16);
    return _mm_movemask_pd(lo) | (_mm_movemask_pd(hi) << 2);
#else
    return (int)((m[0] & 1) | (m[1] & 2) | (m[2] & 4) | (m[3] & 8));
#endif
}

/* four float16 / bfloat16 values widened to float32 */
PG_VEC_INLINE pg_f4 pg_f4_from_f16(pg_h4 h, int isa)
{
    PG_AVX2_RETURN(pg_f4, pg_f4_from_f16_f16c(&h, &pg_r_));
    (void)isa;
#if PG_VEC_F16
    typedef _Float16 pg_hf4 __attribute__((vector_size(8)));
    return __builtin_convertvector((pg_hf4)h, pg_f4);
#else
    return (pg_f4){pg_f16_to_f32(h[0]), pg_f16_to_f32(h[1]), pg_f16_to_f32(h[2]),
                   pg_f16_to_f32(h[3])};
#endif
}

PG_VEC_INLINE pg_f4 pg_f4_from_bf16(pg_h4 h)
{
    return (pg_f4)(__builtin_convertvector(h, pg_u4) << 16);
}

/* one float16 value to float32 and back (pg_half.h's values; F16C where isa says) */
PG_VEC_INLINE float pg_f16_to_f32_isa(uint16_t h, int isa)
{
#if PG_X86_DISPATCH
    if (isa == PG_ISA_AVX2) return pg_f16_to_f32_f16c(h);
#endif
    (void)isa;
#if PG_VEC_F16
    _Float16 x;
    memcpy(&x, &h, 2);
    return (float)x;
#else
    return pg_f16_to_f32(h);
#endif
}

PG_VEC_INLINE uint16_t pg_f32_to_f16_isa(float f, int isa)
{
#if PG_X86_DISPATCH
    if (isa == PG_ISA_AVX2) return pg_f32_to_f16_f16c(f);
#endif
    (void)isa;
#if PG_VEC_F16
    const _Float16 x = (_Float16)f;
    uint16_t h;
    memcpy(&h, &x, 2);
    return h;
#else
    return pg_f32_to_f16(f);
#endif
}

/* sixteen values rounded to bfloat16 (pg_f8x2_to_bf16's), a then b, in one vector */
PG_VEC_INLINE pg_h16 pg_f8x2_to_bf16x16(pg_f8 a, pg_f8 b, int isa)
{
    pg_h16 h;
#if PG_X86_DISPATCH
    if (isa == PG_ISA_AVX2) {
        pg_bf16x16_avx2(&a, &b, &h);
        return h;
    }
#endif
    (void)isa;
    const pg_h8 ha = pg_f8_to_bf16(a), hb = pg_f8_to_bf16(b);
    memcpy(&h, &ha, 16);
    memcpy((char *)&h + 16, &hb, 16);
    return h;
}

/* sixteen values rounded to float16 (pg_f8_to_f16's), a then b, in one vector */
PG_VEC_INLINE pg_h16 pg_f8x2_to_f16x16(pg_f8 a, pg_f8 b, int isa)
{
    PG_AVX2_RETURN(pg_h16, pg_f16x16_f16c(&a, &b, &pg_r_));
    const pg_h8 ha = pg_f8_to_f16(a, isa), hb = pg_f8_to_f16(b, isa);
    pg_h16 h;
    memcpy(&h, &ha, 16);
    memcpy((char *)&h + 16, &hb, 16);
    return h;
}

/* 32 bytes stored past the caches where the target has streaming stores (x86): p 32-byte
 * aligned (AVX2: one store), or pg_i8_stream16x2 for p 16-byte aligned (two) */
PG_VEC_INLINE void pg_i8_stream16x2(void *p, pg_i8 v)
{
#if defined(__SSE2__)
    __m128i lo, hi;
    memcpy(&lo, &v, 16);
    memcpy(&hi, (const char *)&v + 16, 16);
    _mm_stream_si128((__m128i *)p, lo);
    _mm_stream_si128((__m128i *)p + 1, hi);
#else
    memcpy(p, &v, 32);
#endif
}

PG_VEC_INLINE void pg_i8_stream(void *p, pg_i8 v, int isa)
{
    PG_AVX2_DO(pg_i8_stream_avx2(p, &v));
    (void)isa;
    pg_i8_stream16x2(p, v);
}

/* the gather forms' integer steps */
typedef uint8_t pg_b8 __attribute__((vector_size(8)));      /* eight bytes */

#if PG_X86_DISPATCH
PG_TARGET_AVX2_F16C static inline void pg_i8_select_avx2(const pg_i8 *m, const pg_i8 *a,
                                                         const pg_i8 *b, pg_i8 *r)
{
    __m256i x, y, z;
    memcpy(&x, m, 32);
    memcpy(&y, a, 32);
    memcpy(&z, b, 32);
    const __m256i q = _mm256_blendv_epi8(z, y, x);
    memcpy(r, &q, 32);
}

PG_TARGET_AVX2_F16C static inline void pg_u8_max_avx2(const pg_u8 *a, const pg_u8 *b,
                                                      pg_u8 *r)
{
    __m256i x, y;
    memcpy(&x, a, 32);
    memcpy(&y, b, 32);
    const __m256i q = _mm256_max_epu32(x, y);
    memcpy(r, &q, 32);
}

PG_TARGET_AVX2_F16C static inline void pg_i8_bytes8_avx2(const pg_i8 *c, void *dst)
{
    __m256i x;
    memcpy(&x, c, 32);
    const __m128i h = _mm_packus_epi32(_mm256_castsi256_si128(x), _mm256_extracti128_si256(x, 1));
    _mm_storel_epi64((__m128i *)dst, _mm_packus_epi16(h, h));
}

PG_TARGET_AVX2_F16C static inline void pg_i8x2_bytes16_avx2(const pg_i8 *a, const pg_i8 *b,
                                                            void *dst)
{
    __m256i x, y;
    memcpy(&x, a, 32);
    memcpy(&y, b, 32);
    /* bytes: dwords 0 1 of the first 128 bits hold lanes 0-3 of a and of b, of the second
     * 4-7 of each */
    const __m256i w = _mm256_packus_epi32(x, y);
    const __m256i q = _mm256_permutevar8x32_epi32(_mm256_packus_epi16(w, w),
                                                  _mm256_setr_epi32(0, 4, 1, 5, 0, 4, 1, 5));
    _mm_storeu_si128((__m128i *)dst, _mm256_castsi256_si128(q));
}

PG_TARGET_AVX2_F16C static inline void pg_q4x2_lo32_avx2(const pg_q4 *a, const pg_q4 *b,
                                                         pg_i8 *r)
{
    __m256 x, y;
    memcpy(&x, a, 32);
    memcpy(&y, b, 32);
    /* dwords 0 2 of each 128-bit half of a, then of b: lanes 0 1 4 5 | 2 3 6 7, which the
     * 64-bit permute puts in order */
    const __m256i q = _mm256_permute4x64_epi64(_mm256_castps_si256(_mm256_shuffle_ps(x, y, 0x88)),
                                               0xD8);
    memcpy(r, &q, 32);
}

PG_TARGET_AVX2_F16C static inline void pg_i8_zip_avx2(const pg_i8 *a, const pg_i8 *b,
                                                      pg_i8 *lo, pg_i8 *hi)
{
    __m256i x, y;
    memcpy(&x, a, 32);
    memcpy(&y, b, 32);
    const __m256i l = _mm256_unpacklo_epi32(x, y), h = _mm256_unpackhi_epi32(x, y);
    const __m256i p = _mm256_permute2x128_si256(l, h, 0x20);
    const __m256i q = _mm256_permute2x128_si256(l, h, 0x31);
    memcpy(lo, &p, 32);
    memcpy(hi, &q, 32);
}

PG_TARGET_AVX2_F16C static inline void pg_h8_zip_avx2(const pg_h8 *a, const pg_h8 *b,
                                                      pg_h16 *r)
{
    __m128i x, y;
    memcpy(&x, a, 16);
    memcpy(&y, b, 16);
    const __m256i q = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_unpacklo_epi16(x, y)),
                                              _mm_unpackhi_epi16(x, y), 1);
    memcpy(r, &q, 32);
}

PG_TARGET_AVX2_F16C static inline void pg_h8_to_u8_avx2(const pg_h8 *h, pg_u8 *r)
{
    __m128i x;
    memcpy(&x, h, 16);
    const __m256i q = _mm256_cvtepu16_epi32(x);
    memcpy(r, &q, 32);
}

PG_TARGET_AVX2_F16C static inline void pg_u8_to_h8_avx2(const pg_u8 *v, pg_h8 *r)
{
    __m256i x;
    memcpy(&x, v, 32);
    const __m128i q = _mm_packus_epi32(_mm256_castsi256_si128(x), _mm256_extracti128_si256(x, 1));
    memcpy(r, &q, 16);
}
#endif

/* every lane x (gcc builds a vector literal of a variable lane by lane in AVX code: the
 * AVX2 forms broadcast it) */
#if PG_X86_DISPATCH
PG_TARGET_AVX2_F16C static inline void pg_i8_set1_avx2(int32_t x, pg_i8 *r)
{
    const __m256i q = _mm256_set1_epi32(x);
    memcpy(r, &q, 32);
}

PG_TARGET_AVX2_F16C static inline void pg_h16_set1_avx2(uint16_t x, pg_h16 *r)
{
    const __m256i q = _mm256_set1_epi16((short)x);
    memcpy(r, &q, 32);
}

/* (AVX2 alone: it inlines into AVX2 code without F16C too) */
PG_TARGET_AVX2 static inline void pg_h8_set1_avx2(uint16_t x, pg_h8 *r)
{
    const __m128i q = _mm_set1_epi16((short)x);
    memcpy(r, &q, 16);
}

/* eight bytes at p widened to 32 bits */
PG_TARGET_AVX2_F16C static inline void pg_b8_to_i8_avx2(const void *p, pg_i8 *r)
{
    const __m256i q = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)p));
    memcpy(r, &q, 32);
}

PG_TARGET_AVX2_F16C static inline void pg_b8_to_h8_avx2(const void *p, pg_h8 *r)
{
    const __m128i q = _mm_cvtepu8_epi16(_mm_loadl_epi64((const __m128i *)p));
    memcpy(r, &q, 16);
}
#endif

PG_VEC_INLINE pg_i8 pg_i8_set1(int32_t x, int isa)
{
    PG_AVX2_RETURN(pg_i8, pg_i8_set1_avx2(x, &pg_r_));
    (void)isa;
    return (pg_i8){x, x, x, x, x, x, x, x};
}

PG_VEC_INLINE pg_h8 pg_h8_set1(uint16_t x, int isa)
{
    PG_AVX2_RETURN(pg_h8, pg_h8_set1_avx2(x, &pg_r_));
    (void)isa;
    return (pg_h8){x, x, x, x, x, x, x, x};
}

PG_VEC_INLINE pg_h16 pg_h16_set1(uint16_t x, int isa)
{
    PG_AVX2_RETURN(pg_h16, pg_h16_set1_avx2(x, &pg_r_));
    (void)isa;
    return (pg_h16){x, x, x, x, x, x, x, x, x, x, x, x, x, x, x, x};
}

/* eight bytes at p widened to eight 16-bit or 32-bit lanes */
PG_VEC_INLINE pg_h8 pg_b8_to_h8(const void *p, int isa)
{
    PG_AVX2_RETURN(pg_h8, pg_b8_to_h8_avx2(p, &pg_r_));
    (void)isa;
    pg_b8 b;
    memcpy(&b, p, 8);
    return __builtin_convertvector(b, pg_h8);
}

PG_VEC_INLINE pg_i8 pg_b8_to_i8(const void *p, int isa)
{
    PG_AVX2_RETURN(pg_i8, pg_b8_to_i8_avx2(p, &pg_r_));
    (void)isa;
    pg_b8 b;
    memcpy(&b, p, 8);
    return __builtin_convertvector(b, pg_i8);
}

/* m ? a : b, lane by lane (m: all ones or all zeros) */
PG_VEC_INLINE pg_i8 pg_i8_select(pg_i8 m, pg_i8 a, pg_i8 b, int isa)
{
    PG_AVX2_RETURN(pg_i8, pg_i8_select_avx2(&m, &a, &b, &pg_r_));
    (void)isa;
    return (m & a) | (~m & b);
}

/* the larger of a and b, lane by lane, unsigned */
PG_VEC_INLINE pg_u8 pg_u8_max(pg_u8 a, pg_u8 b, int isa)
{
    PG_AVX2_RETURN(pg_u8, pg_u8_max_avx2(&a, &b, &pg_r_));
    (void)isa;
    const pg_u8 m = (pg_u8)(a > b);
    return (a & m) | (b & ~m);
}

/* eight lanes of 0..255 stored as eight bytes; a then b (sixteen) as sixteen */
PG_VEC_INLINE void pg_i8_bytes8(void *dst, pg_i8 c, int isa)
{
    PG_AVX2_DO(pg_i8_bytes8_avx2(&c, dst));
    (void)isa;
    const pg_b8 b = __builtin_convertvector(c, pg_b8);
    memcpy(dst, &b, 8);
}

PG_VEC_INLINE void pg_i8x2_bytes16(void *dst, pg_i8 a, pg_i8 b, int isa)
{
    PG_AVX2_DO(pg_i8x2_bytes16_avx2(&a, &b, dst));
    pg_i8_bytes8(dst, a, isa);
    pg_i8_bytes8((char *)dst + 8, b, isa);
}

/* the low 32 bits of the eight int64 lanes of a then b, in order */
PG_VEC_INLINE pg_i8 pg_q4x2_lo32(pg_q4 a, pg_q4 b, int isa)
{
    PG_AVX2_RETURN(pg_i8, pg_q4x2_lo32_avx2(&a, &b, &pg_r_));
    (void)isa;
    return PG_SHUF8((pg_i8)a, (pg_i8)b, 0, 2, 4, 6, 8, 10, 12, 14);
}

/* the lanes of a and b interleaved: *lo = a0 b0 a1 b1 a2 b2 a3 b3, *hi = a4 b4 ... a7 b7 */
PG_VEC_INLINE void pg_i8_zip(pg_i8 a, pg_i8 b, pg_i8 *lo, pg_i8 *hi, int isa)
{
    PG_AVX2_DO(pg_i8_zip_avx2(&a, &b, lo, hi));
    (void)isa;
    *lo = PG_SHUF8(a, b, 0, 8, 1, 9, 2, 10, 3, 11);
    *hi = PG_SHUF8(a, b, 4, 12, 5, 13, 6, 14, 7, 15);
}

/* the 16-bit lanes of a and b interleaved: a0 b0 a1 b1 ... a7 b7 */
PG_VEC_INLINE pg_h16 pg_h8_zip(pg_h8 a, pg_h8 b, int isa)
{
    pg_h16 r;
#if PG_X86_DISPATCH
    if (isa == PG_ISA_AVX2) {
        pg_h8_zip_avx2(&a, &b, &r);
        return r;
    }
#endif
    (void)isa;
    for (int i = 0; i < 8; i++) {
        r[2 * i] = a[i];
        r[2 * i + 1] = b[i];
    }
    return r;
}

/* eight 16-bit lanes widened to 32 bits (gcc's __builtin_convertvector takes three
 * instructions in AVX code) */
PG_VEC_INLINE pg_u8 pg_h8_to_u8(pg_h8 h, int isa)
{
    PG_AVX2_RETURN(pg_u8, pg_h8_to_u8_avx2(&h, &pg_r_));
    (void)isa;
    return __builtin_convertvector(h, pg_u8);
}

/* eight 32-bit lanes of 0..65535 narrowed to 16 bits */
PG_VEC_INLINE pg_h8 pg_u8_to_h8(pg_u8 v, int isa)
{
    PG_AVX2_RETURN(pg_h8, pg_u8_to_h8_avx2(&v, &pg_r_));
    (void)isa;
    return __builtin_convertvector(v, pg_h8);
}

/* 16 bytes at a 16-byte boundary stored past the caches where the target has streaming
 * stores (x86) */
PG_VEC_INLINE void pg_h8_stream(void *p, pg_h8 v)
{
#if defined(__SSE2__)
    __m128i x;
    memcpy(&x, &v, 16);
    _mm_stream_si128((__m128i *)p, x);
#else
    memcpy(p, &v, 16);
#endif
}


/* --- layer for pg_stream.h --- */
/* four float64 lanes (one AVX2 register; two SSE2 or NEON ones), unaligned load and store
 * (pg_d4_splat below) */
typedef double pg_d4 __attribute__((vector_size(32)));
PG_VEC_INLINE pg_d4 pg_d4_load(const void *p) { pg_d4 v; memcpy(&v, p, 32); return v; }
PG_VEC_INLINE void pg_d4_store(void *p, pg_d4 v) { memcpy(p, &v, 32); }

/* x in all eight lanes, in the form gcc 12 makes one broadcast of: the bits for AVX2
 * (VPBROADCASTD; pg_f8_set1 inlined into AVX2 code becomes four inserts), the float
 * elsewhere (SSE2: one SHUFPS).  The bits are kept, whatever x is */
PG_VEC_INLINE pg_f8 pg_f8_splat(float x, int isa)
{
    if (isa == PG_ISA_AVX2) {
        uint32_t u;
        memcpy(&u, &x, 4);
        return (pg_f8)(pg_u8){u, u, u, u, u, u, u, u};
    }
    return pg_f8_set1(x);
}

/* x in all four lanes, as pg_f8_splat (AVX2: VPBROADCASTQ of the bits) */
PG_VEC_INLINE pg_d4 pg_d4_splat(double x, int isa)
{
    if (isa == PG_ISA_AVX2) {
        typedef uint64_t pg_q4_ __attribute__((vector_size(32)));
        uint64_t u;
        memcpy(&u, &x, 8);
        return (pg_d4)(pg_q4_){u, u, u, u};
    }
    return (pg_d4){x, x, x, x};
}

/* eight bfloat16 values loaded from p and widened to float32: pg_f8_from_bf16 of a load,
 * with AVX2's one VPMOVZXWD from memory (gcc 12 makes two 128-bit ones of the generic form) */
#if PG_X86_DISPATCH
PG_TARGET_AVX2 static inline void pg_f8_load_bf16_avx2(const void *p, pg_f8 *v)
{
    const __m128i h = _mm_loadu_si128((const __m128i *)p);
    const __m256i x = _mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16);
    memcpy(v, &x, 32);
}
#endif

PG_VEC_INLINE pg_f8 pg_f8_load_bf16(const void *p, int isa)
{
    PG_AVX2_RETURN(pg_f8, pg_f8_load_bf16_avx2(p, &pg_r_));
    (void)isa;
    return pg_f8_from_bf16(pg_h8_load(p));
}

/*
 * Nontemporal (streaming) stores: the line is written without first being read into the
 * cache ("read for ownership"), which saves up to half the write traffic of an output far
 * larger than the cache.  They are weakly ordered: pg_nt_fence() before other threads read
 * the data.  x86: MOVNTPS (SSE2, 16 bytes) and VMOVNTPS (AVX2, 32 bytes); elsewhere clang's
 * __builtin_nontemporal_store (aarch64: STNP), else an ordinary store.  The bits stored are
 * the same either way, only the cache policy differs.
 */
#if defined(__SSE2__) || defined(__x86_64__)
#include <emmintrin.h>
#define PG_NT_X86 1
#else
#define PG_NT_X86 0
#endif
#if defined(__has_builtin)
#if __has_builtin(__builtin_nontemporal_store)
#define PG_NT_BUILTIN 1
#endif
#endif

/* 16 bytes at p, 16-byte aligned */
PG_VEC_INLINE void pg_f4_stream(void *p, pg_f4 v)
{
#if PG_NT_X86
    _mm_stream_ps((float *)p, (__m128)v);
#elif defined(PG_NT_BUILTIN)
    __builtin_nontemporal_store(v, (pg_f4 *)p);
#else
    memcpy(p, &v, 16);
#endif
}

/* 32 bytes at p: 32-byte aligned for PG_ISA_AVX2 (one store), 16-byte aligned otherwise
 * (two); the AVX form takes a pointer, as pg_f8_from_f16_f16c does */
#if PG_X86_DISPATCH
PG_TARGET_AVX2 static inline void pg_f8_stream_avx2(void *p, const pg_f8 *v)
{
    __m256 x;
    memcpy(&x, v, 32);
    _mm256_stream_ps((float *)p, x);
}
#endif

PG_VEC_INLINE void pg_f8_stream(void *p, pg_f8 v, int isa)
{
    PG_AVX2_DO(pg_f8_stream_avx2(p, &v));
    (void)isa;
    pg_f4 lo, hi;
    memcpy(&lo, &v, 16);
    memcpy(&hi, (const char *)&v + 16, 16);
    pg_f4_stream(p, lo);
    pg_f4_stream((char *)p + 16, hi);
}

/* the streaming stores made so far ordered before later stores (x86's SFENCE; the other
 * targets' nontemporal stores are ordered as ordinary ones) */
PG_VEC_INLINE void pg_nt_fence(void)
{
#if PG_NT_X86
    _mm_sfence();
#endif
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
    PG_AVX2_RETURN(pg_f8, pg_f8_from_bf16_avx2(&h, &pg_r_));
    (void)isa;
    return pg_f8_from_bf16(h);
}

PG_VEC_INLINE pg_f8 pg_f8_set1_isa(float x, int isa)
{
    PG_AVX2_RETURN(pg_f8, pg_f8_set1_avx2(&x, &pg_r_));
    (void)isa;
    return pg_f8_set1(x);
}

/* lanes of b where m is all ones, of a where it is zero (m's lanes: 0 or -1) */
PG_VEC_INLINE pg_f8 pg_f8_blend(pg_f8 a, pg_f8 b, pg_i8 m, int isa)
{
    PG_AVX2_RETURN(pg_f8, pg_f8_blend_avx2(&a, &b, &m, &pg_r_));
    (void)isa;
    return (pg_f8)(((pg_i8)a & ~m) | ((pg_i8)b & m));
}

/* r[j] = v[i[j]], i's lanes 0 to 7 (AVX2: one vpermps; elsewhere lane by lane) */
PG_VEC_INLINE pg_f8 pg_f8_permute(pg_f8 v, pg_i8 i, int isa)
{
    PG_AVX2_RETURN(pg_f8, pg_f8_permute_avx2(&v, &i, &pg_r_));
    (void)isa;
    pg_f8 r;
    for (int j = 0; j < 8; j++) r[j] = v[i[j] & 7];
    return r;
}

/* pg_f8_to_bf16's bits; AVX2 through pg_half.h's rounding and a pack (fewer instructions) */
PG_VEC_INLINE pg_h8 pg_f8_to_bf16_isa(pg_f8 v, int isa)
{
    PG_AVX2_RETURN(pg_h8, pg_f8_to_bf16_avx2(&v, &pg_r_));
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
    PG_AVX2_RETURN(pg_f8, pg_f8_load_tail_avx2(p, t, &pg_r_));
    (void)isa;
    if (t->n == 8) return pg_f8_load(p);
    float b[8] = {0};
    for (int j = 0; j < t->n; j++) b[j] = p[j];
    return pg_f8_load(b);
}

PG_VEC_INLINE pg_h8 pg_h8_load_tail(const uint16_t *p, const pg_tail8 *t, int isa)
{
    PG_AVX2_RETURN(pg_h8, pg_h8_load_tail_avx2(p, t, &pg_r_));
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
/* (pg_d4, pg_d4_load, pg_d4_store: the block for pg_stream.h) */
typedef int64_t pg_l4 __attribute__((vector_size(32)));
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

/* --- layer for pg_scatter.h's flat rows (pg_fwrite_row) and its codes' comparisons --- */
/* Spreads through a table of _plan.spread's form (32 bytes at ctl a block): lane k takes
 * the value at its place in the block's 8 values, or 16 where `wide`.  float32 and 32-bit
 * lanes: eight int32 places (0-7, wide 0-15); 16-bit lanes: the places o as byte pairs
 * 2o, 2o + 1 (a byte shuffle's controls).  AVX2 permutes or shuffles whole registers (wide:
 * the two halves' results blended); the 128-bit sets have no such permutes and read each
 * place from the table and the value from memory (gcc would spill the registers, and make
 * scalar stores and a vector load of a widening). */
#if PG_X86_DISPATCH
PG_TARGET_AVX2 static inline void pg_f8_spread_avx2(const pg_f8 *a, const pg_f8 *b,
                                                    const void *ctl, int wide, pg_f8 *r)
{
    __m256 x;
    memcpy(&x, a, 32);
    const __m256i ix = _mm256_loadu_si256((const __m256i *)ctl);
    x = _mm256_permutevar8x32_ps(x, ix);
    if (wide) {
        __m256 y;
        memcpy(&y, b, 32);
        x = _mm256_blendv_ps(x, _mm256_permutevar8x32_ps(y, ix),
                             _mm256_castsi256_ps(_mm256_slli_epi32(ix, 28)));
    }
    memcpy(r, &x, 32);
}

/* wide: byte shuffles of a and of b, each zeroing the bytes of the other (the control +
 * 0x70 saturated sets the top bit of places 8-15, - 16 that of 0-7), or-ed */
PG_TARGET_AVX2 static inline void pg_h16_spread_avx2(const pg_h8 *a, const pg_h8 *b,
                                                     const void *ctl, int wide, pg_h16 *r)
{
    __m128i x;
    memcpy(&x, a, 16);
    const __m256i k = _mm256_loadu_si256((const __m256i *)ctl);
    const __m256i xa = _mm256_broadcastsi128_si256(x);
    __m256i q;
    if (!wide) {
        q = _mm256_shuffle_epi8(xa, k);
    } else {
        __m128i y;
        memcpy(&y, b, 16);
        q = _mm256_or_si256(
            _mm256_shuffle_epi8(xa, _mm256_adds_epu8(k, _mm256_set1_epi8(0x70))),
            _mm256_shuffle_epi8(_mm256_broadcastsi128_si256(y),
                                _mm256_sub_epi8(k, _mm256_set1_epi8(16))));
    }
    memcpy(r, &q, 32);
}
#endif

/* the place of lane k */
PG_VEC_INLINE int pg_spread_at(const void *ctl, int k, int wide, int es)
{
    if (es == 4) {
        int32_t c;
        memcpy(&c, (const char *)ctl + 4 * k, 4);
        return c & (wide ? 15 : 7);
    }
    return (((const uint8_t *)ctl)[2 * k] >> 1) & (wide ? 15 : 7);
}

/* eight float32 values from s (8, or 16 where wide) */
PG_VEC_INLINE pg_f8 pg_f8_spread(const float *s, const void *ctl, int wide, int isa)
{
#if PG_X86_DISPATCH
    if (isa == PG_ISA_AVX2) {
        const pg_f8 a = pg_f8_load(s), b = wide ? pg_f8_load(s + 8) : a;
        PG_AVX2_RETURN(pg_f8, pg_f8_spread_avx2(&a, &b, ctl, wide, &pg_r_));
    }
#endif
    (void)isa;
    pg_f8 r;
    for (int k = 0; k < 8; k++) r[k] = s[pg_spread_at(ctl, k, wide, 4)];
    return r;
}

/* eight bytes from p (8, or 16 where wide) widened to 32-bit lanes */
PG_VEC_INLINE pg_i8 pg_b8_spread(const uint8_t *p, const void *ctl, int wide, int isa)
{
#if PG_X86_DISPATCH
    if (isa == PG_ISA_AVX2) {
        const pg_f8 a = (pg_f8)pg_b8_to_i8(p, isa);
        const pg_f8 b = wide ? (pg_f8)pg_b8_to_i8(p + 8, isa) : a;
        PG_AVX2_RETURN(pg_i8, pg_f8_spread_avx2(&a, &b, ctl, wide, (pg_f8 *)&pg_r_));
    }
#endif
    (void)isa;
    pg_i8 r;
    for (int k = 0; k < 8; k++) r[k] = p[pg_spread_at(ctl, k, wide, 4)];
    return r;
}

/* sixteen 16-bit values of a (and b, places 8-15, where wide) */
PG_VEC_INLINE pg_h16 pg_h16_spread(pg_h8 a, pg_h8 b, const void *ctl, int wide, int isa)
{
    PG_AVX2_RETURN(pg_h16, pg_h16_spread_avx2(&a, &b, ctl, wide, &pg_r_));
    (void)isa;
    uint16_t v[16];
    memcpy(v, &a, 16);
    memcpy(v + 8, &b, 16);
    pg_h16 r;
    for (int k = 0; k < 16; k++) r[k] = v[pg_spread_at(ctl, k, wide, 2)];
    return r;
}

/* sixteen bytes from p (8, or 16 where wide) widened to 16-bit lanes */
PG_VEC_INLINE pg_h16 pg_b8_spread16(const uint8_t *p, const void *ctl, int wide, int isa)
{
    if (isa == PG_ISA_AVX2) {
        const pg_h8 a = pg_b8_to_h8(p, isa), b = wide ? pg_b8_to_h8(p + 8, isa) : a;
        return pg_h16_spread(a, b, ctl, wide, isa);
    }
    pg_h8 h[2];   /* (halves: gcc puts each one's bytes in a register, not in memory) */
    for (int k = 0; k < 16; k++) h[k / 8][k % 8] = p[pg_spread_at(ctl, k, wide, 2)];
    pg_h16 r;
    memcpy(&r, h, 32);
    return r;
}

/* Comparisons, all ones in the lanes where they hold: 128-bit sets compare the halves
 * (gcc makes lane-by-lane compares and selects of 32-byte vectors there; cf. pg_sign_mask).
 * a == b: */
PG_VEC_INLINE pg_i8 pg_i8_eq(pg_i8 a, pg_i8 b, int isa)
{
    if (isa == PG_ISA_AVX2) return (pg_i8)(a == b);
    pg_i4 x[2], y[2], r[2];
    memcpy(x, &a, 32);
    memcpy(y, &b, 32);
    r[0] = (pg_i4)(x[0] == y[0]);
    r[1] = (pg_i4)(x[1] == y[1]);
    pg_i8 q;
    memcpy(&q, r, 32);
    return q;
}

PG_VEC_INLINE pg_h16 pg_h16_eq(pg_h16 a, pg_h16 b, int isa)
{
    if (isa == PG_ISA_AVX2) return (pg_h16)(a == b);
    pg_h8 x[2], y[2], r[2];
    memcpy(x, &a, 32);
    memcpy(y, &b, 32);
    r[0] = (pg_h8)(x[0] == y[0]);
    r[1] = (pg_h8)(x[1] == y[1]);
    pg_h16 q;
    memcpy(&q, r, 32);
    return q;
}

/* a > b, signed */
PG_VEC_INLINE pg_i8 pg_i8_gt(pg_i8 a, pg_i8 b, int isa)
{
    if (isa == PG_ISA_AVX2) return (pg_i8)(a > b);
    pg_i4 x[2], y[2], r[2];
    memcpy(x, &a, 32);
    memcpy(y, &b, 32);
    r[0] = (pg_i4)(x[0] > y[0]);
    r[1] = (pg_i4)(x[1] > y[1]);
    pg_i8 q;
    memcpy(&q, r, 32);
    return q;
}
/* --- end of the layer for pg_scatter.h's flat rows and comparisons --- */

/* --- layer for pg_item.h --- */
typedef uint8_t pg_b32 __attribute__((vector_size(32)));   /* 32 bytes (byte lookups) */
#if defined(__aarch64__)
#include <arm_neon.h>
#elif defined(__SSSE3__)
#include <tmmintrin.h>
#endif
/* 1 where the baseline pg_b32_lookup16 is a byte shuffle (NEON's tbl, SSSE3's pshufb); 0
 * where it goes byte by byte (SSE2, x86-64's baseline): callers may then do better by
 * other means (pg_item.h's 16-bit spread takes whole values one by one) */
#if defined(__aarch64__) || defined(__SSSE3__)
#define PG_VEC_BASE_LOOKUP 1
#else
#define PG_VEC_BASE_LOOKUP 0
#endif
#if defined(__clang__)
#define PG_SHUFH8(a, b, ...) __builtin_shufflevector(a, b, __VA_ARGS__)
#else
#define PG_SHUFH8(a, b, ...) __builtin_shuffle(a, b, (pg_h8){__VA_ARGS__})
#endif

/* the first and the last 16 bytes of v, and two 16-byte vectors as one of 32 */
PG_VEC_INLINE pg_h8 pg_f8_lo(pg_f8 v) { pg_h8 h; memcpy(&h, &v, 16); return h; }
PG_VEC_INLINE pg_h8 pg_f8_hi(pg_f8 v) { pg_h8 h; memcpy(&h, (const char *)&v + 16, 16); return h; }
PG_VEC_INLINE pg_f8 pg_f8_join(pg_h8 a, pg_h8 b)
{
    pg_f8 v;
    memcpy(&v, &a, 16);
    memcpy((char *)&v + 16, &b, 16);
    return v;
}

/* the 8 bytes at p, then zeros (one 8-byte load) */
typedef uint64_t pg_q2 __attribute__((vector_size(16)));
PG_VEC_INLINE pg_h8 pg_h8_load_lo(const void *p)
{
    uint64_t x;
    memcpy(&x, p, 8);
    return (pg_h8)(pg_q2){x, 0};
}

/* a 32-byte store to p, 32-byte aligned */
PG_VEC_INLINE void pg_f8_store_aligned(void *p, pg_f8 v)
{
    memcpy(__builtin_assume_aligned(p, 32), &v, 32);
}

/* each 16-bit (es 2) or 32-bit value of the first (_lo) or last (_hi) 8 bytes of v twice */
PG_VEC_INLINE pg_h8 pg_h8_twice_lo(pg_h8 v, int es)
{
    if (es == 2) return PG_SHUFH8(v, v, 0, 8, 1, 9, 2, 10, 3, 11);
    return (pg_h8)PG_SHUF4((pg_i4)v, (pg_i4)v, 0, 4, 1, 5);
}

PG_VEC_INLINE pg_h8 pg_h8_twice_hi(pg_h8 v, int es)
{
    if (es == 2) return PG_SHUFH8(v, v, 4, 12, 5, 13, 6, 14, 7, 15);
    return (pg_h8)PG_SHUF4((pg_i4)v, (pg_i4)v, 2, 6, 3, 7);
}

/* x in the four lanes (AVX2: vbroadcastsd; gcc 12 builds pg_d4_set1 inlined into AVX2 code
 * from 128-bit halves) */
#if PG_X86_DISPATCH
PG_TARGET_AVX2 static inline void pg_d4_set1_avx2(const double *x, pg_d4 *v)
{
    const __m256d r = _mm256_set1_pd(*x);
    memcpy(v, &r, 32);
}
#endif

PG_VEC_INLINE pg_d4 pg_d4_set1_isa(double x, int isa)
{
    PG_AVX2_RETURN(pg_d4, pg_d4_set1_avx2(&x, &pg_r_));
    (void)isa;
    return pg_d4_set1(x);
}

/* the last two lanes of a, then the first two of b (AVX2: one vperm2f128) */
PG_VEC_INLINE pg_d4 pg_d4_mid(pg_d4 a, pg_d4 b)
{
#if defined(__clang__)
    return __builtin_shufflevector(a, b, 2, 3, 4, 5);
#else
    return __builtin_shuffle(a, b, (pg_l4){2, 3, 4, 5});
#endif
}

/* AVX2 forms (pointers: see pg_f8_from_f16_f16c) of the functions below */
#if PG_X86_DISPATCH
PG_TARGET_AVX2 static inline int pg_f8_low16_zero_avx2(const pg_f8 *v)
{
    __m256i x;
    memcpy(&x, v, 32);
    return _mm256_testz_si256(x, _mm256_set1_epi32(0xFFFF));
}

PG_TARGET_AVX2 static inline void pg_f8_twice_avx2(const pg_f8 *v, pg_f8 *a, pg_f8 *b, int es)
{
    __m256i x, lo, hi;
    memcpy(&x, v, 32);
    if (es == 2) {
        lo = _mm256_unpacklo_epi16(x, x);
        hi = _mm256_unpackhi_epi16(x, x);
    } else {
        lo = _mm256_unpacklo_epi32(x, x);
        hi = _mm256_unpackhi_epi32(x, x);
    }
    /* lo, hi hold the doubled values of each 128-bit half in turn */
    const __m256i p = _mm256_permute2x128_si256(lo, hi, 0x20);
    const __m256i q = _mm256_permute2x128_si256(lo, hi, 0x31);
    memcpy(a, &p, 32);
    memcpy(b, &q, 32);
}

PG_TARGET_AVX2 static inline void pg_b32_lookup16_avx2(const void *t, const pg_b32 *c,
                                                      pg_b32 *r)
{
    __m256i x;
    memcpy(&x, c, 32);
    x = _mm256_shuffle_epi8(_mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)t)),
                            x);
    memcpy(r, &x, 32);
}

PG_TARGET_AVX2 static inline void pg_f8_load16_avx2(const void *p, pg_f8 *r)
{
    const __m256 v = _mm256_insertf128_ps(_mm256_setzero_ps(), _mm_loadu_ps((const float *)p),
                                          0);
    memcpy(r, &v, 32);
}

PG_TARGET_AVX2 static inline void pg_f4_twice_avx2(const pg_f4 *x, pg_f8 *r)
{
    __m128 v;
    memcpy(&v, x, 16);
    const __m256 t = _mm256_set_m128(_mm_unpackhi_ps(v, v), _mm_unpacklo_ps(v, v));
    memcpy(r, &t, 32);
}

PG_TARGET_AVX2 static inline void pg_u8_twice16_avx2(const pg_u8 *v, pg_u8 *r)
{
    __m256i x;
    memcpy(&x, v, 32);
    x = _mm256_or_si256(x, _mm256_slli_epi32(x, 16));
    memcpy(r, &x, 32);
}

PG_TARGET_AVX2 static inline void pg_f8_to_bf16_u8_avx2(const pg_f8 *v, pg_u8 *u)
{
    __m256 x;
    memcpy(&x, v, 32);
    const __m256i r = pg_bf16_round8_avx2(x);
    memcpy(u, &r, 32);
}
#endif

/* lanes of b where m's top bit is set, of a elsewhere (m's other bits: anything) */
PG_VEC_INLINE pg_f8 pg_f8_blend_sign(pg_f8 a, pg_f8 b, pg_i8 m, int isa)
{
    PG_AVX2_RETURN(pg_f8, pg_f8_blend_avx2(&a, &b, &m, &pg_r_));   /* (vblendvps: top bits) */
    (void)isa;
    const pg_i8 s = m >> 31;
    return (pg_f8)(((pg_i8)a & ~s) | ((pg_i8)b & s));
}

/* whether every lane's low 16 bits are 0 (float32 values that are bfloat16 values already) */
PG_VEC_INLINE int pg_f8_low16_zero(pg_f8 v, int isa)
{
#if PG_X86_DISPATCH
    if (isa == PG_ISA_AVX2) return pg_f8_low16_zero_avx2(&v);
#endif
    (void)isa;
    const pg_u8 u = (pg_u8)v & 0xFFFF;
    uint64_t q[4];
    memcpy(q, &u, 32);
    return ((q[0] | q[1]) | (q[2] | q[3])) == 0;
}

/* each 16-bit (es 2) or 32-bit value of v twice, those of its first 16 bytes to *a, of its
 * last 16 to *b */
PG_VEC_INLINE void pg_f8_twice(pg_f8 v, pg_f8 *a, pg_f8 *b, int es, int isa)
{
    PG_AVX2_DO(pg_f8_twice_avx2(&v, a, b, es));
    (void)isa;
    const pg_h8 l = pg_f8_lo(v), h = pg_f8_hi(v);
    *a = pg_f8_join(pg_h8_twice_lo(l, es), pg_h8_twice_hi(l, es));
    *b = pg_f8_join(pg_h8_twice_lo(h, es), pg_h8_twice_hi(h, es));
}

/* the 16 bytes at p, then zeros */
PG_VEC_INLINE pg_f8 pg_f8_load16(const void *p, int isa)
{
    PG_AVX2_RETURN(pg_f8, pg_f8_load16_avx2(p, &pg_r_));
    (void)isa;
    return pg_f8_join(pg_h8_load(p), (pg_h8){0, 0, 0, 0, 0, 0, 0, 0});
}

/* each of the four values of x twice */
PG_VEC_INLINE pg_f8 pg_f4_twice(pg_f4 x, int isa)
{
    PG_AVX2_RETURN(pg_f8, pg_f4_twice_avx2(&x, &pg_r_));
    (void)isa;
    return pg_f8_join((pg_h8)PG_SHUF4(x, x, 0, 4, 1, 5), (pg_h8)PG_SHUF4(x, x, 2, 6, 3, 7));
}

/* each lane's 16-bit value (v's lanes below 0x10000) in both its halves: v | v << 16 */
PG_VEC_INLINE pg_u8 pg_u8_twice16(pg_u8 v, int isa)
{
    PG_AVX2_RETURN(pg_u8, pg_u8_twice16_avx2(&v, &pg_r_));
    (void)isa;
    return v | v << 16;
}

/* pg_f8_to_bf16's values in 32-bit lanes (AVX2: pg_half.h's rounding) */
PG_VEC_INLINE pg_u8 pg_f8_to_bf16_u8(pg_f8 v, int isa)
{
    PG_AVX2_RETURN(pg_u8, pg_f8_to_bf16_u8_avx2(&v, &pg_r_));
    (void)isa;
    return __builtin_convertvector(pg_f8_to_bf16(v), pg_u8);
}

/* r[i] = t[c[i] & 15] from the 16 bytes at t, 0 where bit 7 of c[i] is set (AVX2's
 * vpshufb of them in both halves, NEON's tbl, SSSE3's pshufb, else byte by byte) */
PG_VEC_INLINE pg_b32 pg_b32_lookup16(const void *t, pg_b32 c, int isa)
{
    pg_b32 r;
#if PG_X86_DISPATCH
    if (isa == PG_ISA_AVX2) {
        pg_b32_lookup16_avx2(t, &c, &r);
        return r;
    }
#endif
    (void)isa;
#if defined(__aarch64__)
    const uint8x16_t tb = vld1q_u8((const uint8_t *)t), m = vdupq_n_u8(0x8F);
    uint8x16_t c0, c1;
    memcpy(&c0, &c, 16);
    memcpy(&c1, (const char *)&c + 16, 16);
    c0 = vqtbl1q_u8(tb, vandq_u8(c0, m));   /* indices 0x80.. out of range: 0 */
    c1 = vqtbl1q_u8(tb, vandq_u8(c1, m));
    memcpy(&r, &c0, 16);
    memcpy((char *)&r + 16, &c1, 16);
#elif defined(__SSSE3__)
    const __m128i tb = _mm_loadu_si128((const __m128i *)t);
    __m128i c0, c1;
    memcpy(&c0, &c, 16);
    memcpy(&c1, (const char *)&c + 16, 16);
    c0 = _mm_shuffle_epi8(tb, c0);
    c1 = _mm_shuffle_epi8(tb, c1);
    memcpy(&r, &c0, 16);
    memcpy((char *)&r + 16, &c1, 16);
#else
    uint8_t tb[16];
    memcpy(tb, t, 16);
    for (int i = 0; i < 32; i++) r[i] = (c[i] & 0x80) ? 0 : tb[c[i] & 15];
#endif
    return r;
}
/* --- layer for pg_stream.h: lanes rows, 16-bit combines, register-fed writer --- */
/* Sixteen bfloat16 values as two float32 vectors in the pair order, for lane-by-lane work
 * between pg_f8x2_load_bf16_pair and pg_f8x2_to_bf16_pair: AVX2 widens them with the
 * unpacks of its 128-bit halves (a: values 0-3 and 8-11, b: 4-7 and 12-15), whose order
 * its pack undoes, a shuffle less each way than lane order; other instruction sets keep
 * lane order (a: 0-7, b: 8-15) */
#if PG_X86_DISPATCH
PG_TARGET_AVX2 static inline void pg_f8x2_load_bf16_pair_avx2(const void *p, pg_f8 *a,
                                                              pg_f8 *b)
{
    const __m256i x = _mm256_loadu_si256((const __m256i *)p), z = _mm256_setzero_si256();
    const __m256i lo = _mm256_unpacklo_epi16(z, x), hi = _mm256_unpackhi_epi16(z, x);
    memcpy(a, &lo, 32);
    memcpy(b, &hi, 32);
}

PG_TARGET_AVX2 static inline void pg_f8x2_to_bf16_pair_avx2(const pg_f8 *a, const pg_f8 *b,
                                                            pg_h8 *ha, pg_h8 *hb)
{
    __m256 x, y;
    memcpy(&x, a, 32);
    memcpy(&y, b, 32);
    const __m256i q = pg_bf16_pack16_avx2(x, y);
    memcpy(ha, &q, 16);
    memcpy(hb, (const char *)&q + 16, 16);
}
#endif

PG_VEC_INLINE void pg_f8x2_load_bf16_pair(const void *p, pg_f8 *a, pg_f8 *b, int isa)
{
    PG_AVX2_DO(pg_f8x2_load_bf16_pair_avx2(p, a, b));
    *a = pg_f8_load_bf16(p, isa);
    *b = pg_f8_load_bf16((const char *)p + 16, isa);
}

/* the pair rounded to bfloat16 as pg_f8x2_to_bf16 rounds, in lane order: values 0-7 to
 * *ha, 8-15 to *hb */
PG_VEC_INLINE void pg_f8x2_to_bf16_pair(pg_f8 a, pg_f8 b, pg_h8 *ha, pg_h8 *hb, int isa)
{
    PG_AVX2_DO(pg_f8x2_to_bf16_pair_avx2(&a, &b, ha, hb));
    pg_f8x2_to_bf16(a, b, ha, hb, isa);
}

/* lanes j of v with lo <= j < hi stored to p[j], nothing else touched (AVX2: one masked
 * store) */
#if PG_X86_DISPATCH
PG_TARGET_AVX2 static inline void pg_f8_store_part_avx2(float *p, ptrdiff_t lo, ptrdiff_t hi,
                                                        const pg_f8 *v)
{
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const __m256i a = _mm256_set1_epi32((int)lo - 1), b = _mm256_set1_epi32((int)hi);
    const __m256i m = _mm256_and_si256(_mm256_cmpgt_epi32(lane, a),
                                       _mm256_cmpgt_epi32(b, lane));
    __m256 x;
    memcpy(&x, v, 32);
    _mm256_maskstore_ps(p, m, x);
}
#endif

PG_VEC_INLINE void pg_f8_store_part(float *p, ptrdiff_t lo, ptrdiff_t hi, pg_f8 v, int isa)
{
    PG_AVX2_DO(pg_f8_store_part_avx2(p, lo, hi, &v));
    (void)isa;
    for (ptrdiff_t j = lo < 0 ? 0 : lo; j < hi && j < 8; j++) p[j] = v[j];
}

/* lanes 4-7 of a, then lanes 0-3 of b (AVX2: one VPERM2F128) */
PG_VEC_INLINE pg_f8 pg_f8_mid(pg_f8 a, pg_f8 b, int isa)
{
    if (isa == PG_ISA_AVX2) return PG_SHUF8(a, b, 4, 5, 6, 7, 8, 9, 10, 11);
    return PG_JOIN(PG_HALF(a, 1), PG_HALF(b, 0));
}

/* four float64 lanes streamed to p (16-byte aligned) in two stores of 16 bytes: 128-bit
 * sets take the halves as elements (gcc copies a 32-byte vector's halves through memory
 * there), AVX2 extracts the upper one */
PG_VEC_INLINE void pg_d4_stream16x2(void *p, pg_d4 v, int isa)
{
    if (isa == PG_ISA_AVX2) {
        pg_f4 lo, hi;
        memcpy(&lo, &v, 16);
        memcpy(&hi, (const char *)&v + 16, 16);
        pg_f4_stream(p, lo);
        pg_f4_stream((char *)p + 16, hi);
        return;
    }
    typedef double pg_d2 __attribute__((vector_size(16)));
    pg_f4_stream(p, (pg_f4)(pg_d2){v[0], v[1]});
    pg_f4_stream((char *)p + 16, (pg_f4)(pg_d2){v[2], v[3]});
}
/* sixteen 16-bit values stored from p on (unaligned) as two stores of 16 bytes, a then b:
 * vector-typed stores, as gcc's SLP pass joins two pg_h8_store (128-bit integer stores)
 * into one of 32 bytes, which crosses a cache line every other time at a 16-byte boundary */
PG_VEC_INLINE void pg_h8x2_store(void *p, pg_h8 a, pg_h8 b)
{
    typedef uint16_t pg_h8u __attribute__((vector_size(16), aligned(1), may_alias));
    ((pg_h8u *)p)[0] = a;
    ((pg_h8u *)p)[1] = b;
}
/* --- end of the layer for pg_stream.h's lanes rows, 16-bit combines and writer --- */

#else
#define PG_VEC 0
#endif

/* pg_half.h's row conversions are written against this layer: a file that included
 * pg_half.h first, or this file first (which included pg_half.h above), gets them here */
#define PG_VEC_COMPLETE 1
#include "pg_half.h"

#endif

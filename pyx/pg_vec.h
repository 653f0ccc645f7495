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
#if PG_X86_DISPATCH
    if (isa == PG_ISA_AVX2) {
        pg_f8 v;
        pg_f8_load_bf16_avx2(p, &v);
        return v;
    }
#endif
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
#if PG_X86_DISPATCH
    if (isa == PG_ISA_AVX2) {
        pg_f8_stream_avx2(p, &v);
        return;
    }
#endif
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

#else
#define PG_VEC 0
#endif

#endif

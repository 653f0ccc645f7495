/*
 * Run-time choice of instruction set for the hot float32 loops.
 *
 * The wheel targets baseline x86-64 (SSE2).  Loops whose results do not depend on the
 * vector width -- element-wise multiplies and adds in a fixed order, no fused
 * multiply-add (the build passes -ffp-contract=off), integer bit manipulation -- are also
 * compiled for AVX2 with a target attribute and chosen at run time, so every CPU computes
 * the same bits.  pg_set_simd(0) forces the baseline loops (the tests compare the two);
 * compiling with -DPG_NO_DISPATCH leaves the AVX2 builds out, as on other CPUs and MSVC.
 */
#ifndef PG_CPU_H
#define PG_CPU_H

#include <stddef.h>

/* The extension is three translation units (setup.py: _kernels.c, pg_item.c, pg_lanes.c,
 * compiled in parallel).  PG_UNIT marks what one defines for the others: not exported from
 * the module.  pg_simd_allowed is defined in _kernels.c alone (the units define
 * PG_KERNEL_UNIT), so that pg_set_simd() reaches every unit's dispatch. */
#if defined(__GNUC__) || defined(__clang__)
#define PG_UNIT __attribute__((visibility("hidden")))
#else
#define PG_UNIT
#endif
#ifdef PG_KERNEL_UNIT
extern int pg_simd_allowed;
#else
PG_UNIT int pg_simd_allowed = 1;   /* set by pg_set_simd() only, before any kernel runs */
#endif

#if (defined(__GNUC__) || defined(__clang__)) && (defined(__x86_64__) || defined(__i386__)) \
    && !defined(PG_NO_DISPATCH)
#include <immintrin.h>
#include <cpuid.h>
#define PG_X86_DISPATCH 1
#define PG_TARGET_AVX2 __attribute__((target("avx2")))
/* every AVX2 CPU also has F16C; the loops that convert float16 in registers still check */
#define PG_TARGET_AVX2_F16C __attribute__((target("avx2,f16c")))

/* The CPU's AVX (1), F16C (2) and AVX2 (4) support, with the OS saving the YMM registers,
 * read with CPUID and XGETBV (clang before 18 refuses __builtin_cpu_supports("f16c")) */
enum { PG_CPU_AVX = 1, PG_CPU_F16C = 2, PG_CPU_AVX2 = 4 };

static inline int pg_cpu_features(void)
{
    static int have = -1;   /* a benign race: every thread computes the same value */
    if (have < 0) {
        unsigned a, b, c, d, lo, hi;
        int f = 0;
        if (__get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 27))) {   /* OSXSAVE */
            __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
            if ((lo & 6u) == 6u && (c & (1u << 28))) {              /* XMM, YMM; AVX */
                f |= PG_CPU_AVX;
                if (c & (1u << 29)) f |= PG_CPU_F16C;
                if (__get_cpuid_count(7, 0, &a, &b, &c, &d) && (b & (1u << 5)))
                    f |= PG_CPU_AVX2;
            }
        }
        have = f;
    }
    return have;
}

static inline int pg_cpu_avx2(void) { return (pg_cpu_features() & PG_CPU_AVX2) != 0; }

static inline int pg_have_avx2(void) { return pg_simd_allowed && pg_cpu_avx2(); }
#else
#define PG_X86_DISPATCH 0
#define PG_TARGET_AVX2
#define PG_TARGET_AVX2_F16C
static inline int pg_have_avx2(void) { return 0; }
#endif

/*
 * A prefetch cursor: bytes [p, p + n) read next (the float64 strips' next plane of
 * grad_output rows, pg_item.h's pg_fused1_strips_f64), prefetched `per` lines for each
 * grad_input row a strip writes before them (pg_pf_step).
 */
typedef struct {
    const char *p;
    ptrdiff_t n, per;
} pg_pf;

static inline void pg_pf_step(pg_pf *pf, ptrdiff_t rows)
{
#if defined(__GNUC__) || defined(__clang__)
    for (ptrdiff_t k = rows * pf->per; k > 0 && pf->n > 0; k--, pf->p += 64, pf->n -= 64)
        __builtin_prefetch(pf->p, 0, 3);
#else
    (void)pf;
    (void)rows;
#endif
}

/* the most taps per input column of a W tap table (_plan.MAX_TAPS) */
#define PG_MAX_TAPS 16

/* PG_PICK(pg_mul, f32, args): pg_mul_avx2_f32(args) where the CPU has AVX2 (and it is
 * allowed), else pg_mul_base_f32(args) */
#if PG_X86_DISPATCH
#define PG_PICK(pre, sfx, ...) \
    (pg_have_avx2() ? pre##_avx2_##sfx(__VA_ARGS__) : pre##_base_##sfx(__VA_ARGS__))
#else
#define PG_PICK(pre, sfx, ...) pre##_base_##sfx(__VA_ARGS__)
#endif

#if defined(_MSC_VER)
#define PG_RESTRICT __restrict
#define PG_ALWAYS_INLINE __forceinline
#else
#define PG_RESTRICT __restrict__
#define PG_ALWAYS_INLINE __attribute__((always_inline))
#endif

/*
 * The statements for j = 0, 8, 16, ... while a block of eight fits in n (n >= 8), then at
 * j = n - 8 where columns remain: that last block overlaps the one before and rewrites
 * equal values.  Written out, as gcc makes a loop of a few instructions of it where the
 * same loop with the last block folded in (`if (j + 8 > n) j = n - 8`) costs seven more
 * per block.
 */
#define PG_FOR8_OVERLAP(j, n, ...)                                                          \
    {                                                                                       \
        ptrdiff_t j;                                                                        \
        for (j = 0; j + 8 <= (n); j += 8) { __VA_ARGS__ }                                   \
        if (j < (n)) { j = (n) - 8; __VA_ARGS__ }                                           \
    }

/* CALL(N) with N the constant n where n is 4 to 8 (loops over that many rows unroll), n
 * itself otherwise */
#define PG_CASES_4_TO_8(n, CALL)                                                            \
    switch (n) {                                                                            \
    case 4: CALL(4) break;                                                                  \
    case 5: CALL(5) break;                                                                  \
    case 6: CALL(6) break;                                                                  \
    case 7: CALL(7) break;                                                                  \
    case 8: CALL(8) break;                                                                  \
    default: CALL(n) break;                                                                 \
    }

/* 1: use the AVX2 loops where the CPU has them (default); 0: baseline loops only */
static inline void pg_set_simd(int allowed) { pg_simd_allowed = allowed != 0; }

#endif

/*
 * The max-pool gradient's index check: does a contiguous run of indices hold one outside
 * [0, limit)?  x | (limit - 1 - x), in unsigned arithmetic, has its top bit set exactly
 * when x < 0 or x >= limit (limit <= 2**31 - 1 for int32 indices, the planning rule), so
 * one OR-reduction answers for the whole run; the exact count runs only when it says yes.
 * Integer operations only, so the AVX2 build answers as the baseline one does.
 */
#ifndef PG_INDEX_H
#define PG_INDEX_H

#include <stddef.h>
#include <stdint.h>

#include "pg_cpu.h"

#define PG_DEFINE_ANY_BAD(NAME, ATTR)                                                    \
ATTR static int NAME##_i64(const int64_t *x, ptrdiff_t n, uint64_t limit)               \
{                                                                                        \
    const uint64_t lim1 = limit - 1;                                                     \
    uint64_t acc = 0;                                                                    \
    for (ptrdiff_t i = 0; i < n; i++)                                                    \
        acc |= (uint64_t)x[i] | (lim1 - (uint64_t)x[i]);                                 \
    return (int)(acc >> 63);                                                             \
}                                                                                        \
ATTR static int NAME##_i32(const int32_t *x, ptrdiff_t n, uint64_t limit)               \
{                                                                                        \
    const uint32_t lim1 = (uint32_t)(limit - 1);                                         \
    uint32_t acc = 0;                                                                    \
    for (ptrdiff_t i = 0; i < n; i++)                                                    \
        acc |= (uint32_t)x[i] | (lim1 - (uint32_t)x[i]);                                 \
    return (int)(acc >> 31);                                                             \
}

PG_DEFINE_ANY_BAD(pg_any_bad_base, )
#if PG_X86_DISPATCH
PG_DEFINE_ANY_BAD(pg_any_bad_avx2, PG_TARGET_AVX2)
#endif

static inline int pg_any_bad_i64(const int64_t *x, ptrdiff_t n, uint64_t limit)
{
    return PG_PICK(pg_any_bad, i64, x, n, limit);
}

static inline int pg_any_bad_i32(const int32_t *x, ptrdiff_t n, uint64_t limit)
{
    return PG_PICK(pg_any_bad, i32, x, n, limit);
}

#endif

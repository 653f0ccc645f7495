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

/*
 * The smallest and largest of n >= 1 indices, into r[0] and r[1] (int64): the index check's
 * pass for planes split into blocks of rows, which then skip the output rows whose indices
 * all lie outside them.  Two indices at a time, in two pairs of lanes, merged at the end.
 */
#define PG_DEFINE_ROW_RANGE(NAME, ATTR)                                                  \
ATTR static void NAME##_i64(const int64_t *x, ptrdiff_t n, int64_t *r)                  \
{                                                                                        \
    int64_t lo0 = x[0], hi0 = x[0], lo1 = x[0], hi1 = x[0];                             \
    ptrdiff_t i = 0;                                                                     \
    for (; i + 2 <= n; i += 2) {                                                         \
        const int64_t a = x[i], b = x[i + 1];                                            \
        lo0 = a < lo0 ? a : lo0; hi0 = a > hi0 ? a : hi0;                               \
        lo1 = b < lo1 ? b : lo1; hi1 = b > hi1 ? b : hi1;                               \
    }                                                                                    \
    if (i < n) { lo0 = x[i] < lo0 ? x[i] : lo0; hi0 = x[i] > hi0 ? x[i] : hi0; }        \
    r[0] = lo0 < lo1 ? lo0 : lo1;                                                        \
    r[1] = hi0 > hi1 ? hi0 : hi1;                                                        \
}                                                                                        \
ATTR static void NAME##_i32(const int32_t *x, ptrdiff_t n, int64_t *r)                  \
{                                                                                        \
    int32_t lo = x[0], hi = x[0];                                                        \
    for (ptrdiff_t i = 1; i < n; i++) {                                                  \
        lo = x[i] < lo ? x[i] : lo;                                                      \
        hi = x[i] > hi ? x[i] : hi;                                                      \
    }                                                                                    \
    r[0] = lo;                                                                           \
    r[1] = hi;                                                                           \
}

PG_DEFINE_ROW_RANGE(pg_row_range_base, )
#if PG_X86_DISPATCH
PG_DEFINE_ROW_RANGE(pg_row_range_avx2, PG_TARGET_AVX2)
#endif

static inline void pg_row_range_i64(const int64_t *x, ptrdiff_t n, int64_t *r)
{
    PG_PICK(pg_row_range, i64, x, n, r);
}

static inline void pg_row_range_i32(const int32_t *x, ptrdiff_t n, int64_t *r)
{
    PG_PICK(pg_row_range, i32, x, n, r);
}

static inline int pg_any_bad_i64(const int64_t *x, ptrdiff_t n, uint64_t limit)
{
    return PG_PICK(pg_any_bad, i64, x, n, limit);
}

static inline int pg_any_bad_i32(const int32_t *x, ptrdiff_t n, uint64_t limit)
{
    return PG_PICK(pg_any_bad, i32, x, n, limit);
}

#endif

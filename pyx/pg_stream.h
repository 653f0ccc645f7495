/*
 * Row stores that bypass the cache (non-temporal), for outputs far larger than the cache:
 * a normal store first reads the line it writes ("read for ownership"), so streaming
 * stores cut the memory traffic of writing grad_input by up to half.  Values are
 * bit-identical to plain stores; only the cache policy differs.
 */
#ifndef PG_STREAM_H
#define PG_STREAM_H

#include <stddef.h>
#include <stdint.h>

#if defined(__SSE2__) || defined(_M_X64) || (defined(_M_IX86_FP) && _M_IX86_FP >= 2)
#include <emmintrin.h>
#define PG_HAVE_STREAM 1

static inline void pg_stream_f32(float *dst, const float *src, ptrdiff_t n)
{
    ptrdiff_t i = 0;
    while (i < n && ((uintptr_t)(dst + i) & 15u)) { dst[i] = src[i]; i++; }
    for (; i + 4 <= n; i += 4) _mm_stream_ps(dst + i, _mm_loadu_ps(src + i));
    for (; i < n; i++) dst[i] = src[i];
}

static inline void pg_stream_f64(double *dst, const double *src, ptrdiff_t n)
{
    ptrdiff_t i = 0;
    while (i < n && ((uintptr_t)(dst + i) & 15u)) { dst[i] = src[i]; i++; }
    for (; i + 2 <= n; i += 2) _mm_stream_pd(dst + i, _mm_loadu_pd(src + i));
    for (; i < n; i++) dst[i] = src[i];
}

static inline void pg_stream_u16(uint16_t *dst, const uint16_t *src, ptrdiff_t n)
{
    ptrdiff_t i = 0;
    while (i < n && ((uintptr_t)(dst + i) & 15u)) { dst[i] = src[i]; i++; }
    for (; i + 8 <= n; i += 8)
        _mm_stream_si128((__m128i *)(dst + i), _mm_loadu_si128((const __m128i *)(src + i)));
    for (; i < n; i++) dst[i] = src[i];
}

/* streaming stores are weakly ordered: fence before other threads may read the data */
static inline void pg_store_fence(void) { _mm_sfence(); }

#else
#define PG_HAVE_STREAM 0
static inline void pg_stream_f32(float *d, const float *s, ptrdiff_t n)
{ for (ptrdiff_t i = 0; i < n; i++) d[i] = s[i]; }
static inline void pg_stream_f64(double *d, const double *s, ptrdiff_t n)
{ for (ptrdiff_t i = 0; i < n; i++) d[i] = s[i]; }
static inline void pg_stream_u16(uint16_t *d, const uint16_t *s, ptrdiff_t n)
{ for (ptrdiff_t i = 0; i < n; i++) d[i] = s[i]; }
static inline void pg_store_fence(void) {}
#endif

#endif

/*
 * Row writers of the average-pool gradient.
 *
 * pg_combine_*: dst[j] = w[0]*row[0][j] + w[1]*row[1][j] + ... (added left to right, no
 * fused multiply-add), the one place where a grad_input row is formed from the expanded
 * grad_output rows that cover it.  With `stream`, whole cache lines of dst are written with
 * non-temporal stores: an ordinary store first reads the line it writes ("read for
 * ownership"), so for outputs far larger than the cache streaming cuts the write traffic by
 * up to half.  Lines only partly inside the row get ordinary stores, so no line ever mixes
 * the two kinds.  Values are bit-identical either way; only the cache policy differs.
 */
#ifndef PG_STREAM_H
#define PG_STREAM_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#if defined(__SSE2__) || defined(_M_X64) || (defined(_M_IX86_FP) && _M_IX86_FP >= 2)
#include <emmintrin.h>
#define PG_HAVE_STREAM 1
#else
#define PG_HAVE_STREAM 0
#endif

/* first index at or after which dst is 64-byte aligned, and the end of the whole lines */
#define PG_LINES(T, dst, n, head, body_end)                                          \
    do {                                                                              \
        ptrdiff_t mis_ = (ptrdiff_t)(((uintptr_t)(dst)) & 63u);                       \
        head = mis_ ? (64 - mis_) / (ptrdiff_t)sizeof(T) : 0;                         \
        if ((((uintptr_t)(dst)) % sizeof(T)) != 0 || head > n) head = n;              \
        body_end = head + ((n - head) / (64 / (ptrdiff_t)sizeof(T))) * (64 / (ptrdiff_t)sizeof(T)); \
    } while (0)

static inline float pg_combine1_f32(const float *const *rows, const float *w, ptrdiff_t nr, ptrdiff_t j)
{
    float s = w[0] * rows[0][j];
    for (ptrdiff_t r = 1; r < nr; r++) s = s + w[r] * rows[r][j];
    return s;
}

static inline double pg_combine1_f64(const double *const *rows, const double *w, ptrdiff_t nr, ptrdiff_t j)
{
    double s = w[0] * rows[0][j];
    for (ptrdiff_t r = 1; r < nr; r++) s = s + w[r] * rows[r][j];
    return s;
}

static inline void pg_combine_f32(float *dst, const float *const *rows, const float *w,
                                  ptrdiff_t nr, ptrdiff_t n, int stream)
{
    ptrdiff_t j = 0, head = n, body_end = n;
    if (nr == 1) {
        const float *a = rows[0]; float wa = w[0];
        if (!(PG_HAVE_STREAM && stream)) { for (j = 0; j < n; j++) dst[j] = wa * a[j]; return; }
    } else if (nr == 2) {
        const float *a = rows[0], *b = rows[1]; float wa = w[0], wb = w[1];
        if (!(PG_HAVE_STREAM && stream)) {
            for (j = 0; j < n; j++) dst[j] = wa * a[j] + wb * b[j];
            return;
        }
    } else if (!(PG_HAVE_STREAM && stream)) {
        for (j = 0; j < n; j++) dst[j] = w[0] * rows[0][j];
        for (ptrdiff_t r = 1; r < nr; r++) {
            const float *a = rows[r]; float wa = w[r];
            for (j = 0; j < n; j++) dst[j] = dst[j] + wa * a[j];
        }
        return;
    }
#if PG_HAVE_STREAM
    PG_LINES(float, dst, n, head, body_end);
    for (j = 0; j < head; j++) dst[j] = pg_combine1_f32(rows, w, nr, j);
    for (; j < body_end; j += 4) {
        __m128 s = _mm_mul_ps(_mm_set1_ps(w[0]), _mm_loadu_ps(rows[0] + j));
        for (ptrdiff_t r = 1; r < nr; r++)
            s = _mm_add_ps(s, _mm_mul_ps(_mm_set1_ps(w[r]), _mm_loadu_ps(rows[r] + j)));
        _mm_stream_ps(dst + j, s);
    }
    for (; j < n; j++) dst[j] = pg_combine1_f32(rows, w, nr, j);
#endif
}

static inline void pg_combine_f64(double *dst, const double *const *rows, const double *w,
                                  ptrdiff_t nr, ptrdiff_t n, int stream)
{
    ptrdiff_t j = 0, head = n, body_end = n;
    if (!(PG_HAVE_STREAM && stream)) {
        if (nr == 1) {
            for (j = 0; j < n; j++) dst[j] = w[0] * rows[0][j];
        } else if (nr == 2) {
            for (j = 0; j < n; j++) dst[j] = w[0] * rows[0][j] + w[1] * rows[1][j];
        } else {
            for (j = 0; j < n; j++) dst[j] = w[0] * rows[0][j];
            for (ptrdiff_t r = 1; r < nr; r++)
                for (j = 0; j < n; j++) dst[j] = dst[j] + w[r] * rows[r][j];
        }
        return;
    }
#if PG_HAVE_STREAM
    PG_LINES(double, dst, n, head, body_end);
    for (j = 0; j < head; j++) dst[j] = pg_combine1_f64(rows, w, nr, j);
    for (; j < body_end; j += 2) {
        __m128d s = _mm_mul_pd(_mm_set1_pd(w[0]), _mm_loadu_pd(rows[0] + j));
        for (ptrdiff_t r = 1; r < nr; r++)
            s = _mm_add_pd(s, _mm_mul_pd(_mm_set1_pd(w[r]), _mm_loadu_pd(rows[r] + j)));
        _mm_stream_pd(dst + j, s);
    }
    for (; j < n; j++) dst[j] = pg_combine1_f64(rows, w, nr, j);
#endif
}

/* a contiguous row copy with the same line policy (the max-pool scatter's store) */
static inline void pg_stream_f32(float *dst, const float *src, ptrdiff_t n)
{
    const float *rows[1] = {src}; float w[1] = {1.0f};
    pg_combine_f32(dst, rows, w, 1, n, 1);
}

static inline void pg_stream_f64(double *dst, const double *src, ptrdiff_t n)
{
    const double *rows[1] = {src}; double w[1] = {1.0};
    pg_combine_f64(dst, rows, w, 1, n, 1);
}

static inline void pg_stream_u16(uint16_t *dst, const uint16_t *src, ptrdiff_t n)
{
    ptrdiff_t j = 0, head = n, body_end = n;
#if PG_HAVE_STREAM
    PG_LINES(uint16_t, dst, n, head, body_end);
    for (j = 0; j < head; j++) dst[j] = src[j];
    for (; j < body_end; j += 8)
        _mm_stream_si128((__m128i *)(dst + j), _mm_loadu_si128((const __m128i *)(src + j)));
#endif
    for (; j < n; j++) dst[j] = src[j];
}

/*
 * A line writer for a contiguous output region written as a sequence of rows: whole cache
 * lines go out with streaming stores even where rows are shorter than a line or not
 * line-aligned (a line that spans two rows is assembled in `carry` first).  The partial
 * lines at the two ends of the region get ordinary stores, since the neighbouring bytes
 * may belong to another thread's region.  The benchmarks' streaming copy uses it.  (Tried
 * for the gather kernel's rows, where an item's rows follow each other in memory: no
 * faster on either machine measured, see benchmarks/RESULTS.md, so the kernels do not.)
 */
typedef struct {
    char *pos;            /* next byte of the region to write */
    ptrdiff_t ncarry;     /* bytes of the line at pos - ncarry held in carry */
    unsigned char carry[64];
} pg_sw;

static inline void pg_sw_begin(pg_sw *w, void *dst)
{
    w->pos = (char *)dst;
    w->ncarry = 0;
}

static inline void pg_sw_line(char *dst, const unsigned char *src)
{
#if PG_HAVE_STREAM
    __m128i a = _mm_loadu_si128((const __m128i *)src);
    __m128i b = _mm_loadu_si128((const __m128i *)(src + 16));
    __m128i c = _mm_loadu_si128((const __m128i *)(src + 32));
    __m128i d = _mm_loadu_si128((const __m128i *)(src + 48));
    _mm_stream_si128((__m128i *)dst, a);
    _mm_stream_si128((__m128i *)(dst + 16), b);
    _mm_stream_si128((__m128i *)(dst + 32), c);
    _mm_stream_si128((__m128i *)(dst + 48), d);
#else
    memcpy(dst, src, 64);
#endif
}

static inline void pg_sw_append(pg_sw *w, const void *src_, ptrdiff_t n)
{
    const unsigned char *src = (const unsigned char *)src_;
    if (w->ncarry) {                       /* finish the line begun by earlier rows */
        ptrdiff_t k = 64 - w->ncarry;
        if (k > n) k = n;
        memcpy(w->carry + w->ncarry, src, (size_t)k);
        w->ncarry += k; w->pos += k; src += k; n -= k;
        if (w->ncarry < 64) return;
        pg_sw_line(w->pos - 64, w->carry);
        w->ncarry = 0;
    } else {
        ptrdiff_t mis = (ptrdiff_t)(((uintptr_t)w->pos) & 63u);
        if (mis) {                         /* the region's first, partial line */
            ptrdiff_t k = 64 - mis;
            if (k > n) k = n;
            memcpy(w->pos, src, (size_t)k);
            w->pos += k; src += k; n -= k;
        }
    }
    while (n >= 64) {
        pg_sw_line(w->pos, src);
        w->pos += 64; src += 64; n -= 64;
    }
    if (n > 0) {
        memcpy(w->carry, src, (size_t)n);
        w->ncarry = n; w->pos += n;
    }
}

/* the region's last, partial line: ordinary stores */
static inline void pg_sw_end(pg_sw *w)
{
    if (w->ncarry) memcpy(w->pos - w->ncarry, w->carry, (size_t)w->ncarry);
    w->ncarry = 0;
}

/* streaming stores are weakly ordered: fence before other threads may read the data */
static inline void pg_store_fence(void)
{
#if PG_HAVE_STREAM
    _mm_sfence();
#endif
}

#endif

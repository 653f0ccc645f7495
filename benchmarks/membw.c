/*
 * The benchmarks' memory-bandwidth references (built and loaded by benchmarks/membw.py):
 * an OpenMP team over 1 MiB chunks that copies bytes (membw_copy), or reads one buffer and
 * writes another (membw_traffic), with ordinary or with non-temporal (streaming) stores.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#if defined(__SSE2__) || defined(_M_X64) || (defined(_M_IX86_FP) && _M_IX86_FP >= 2)
#include <emmintrin.h>
#define HAVE_STREAM 1
#else
#define HAVE_STREAM 0
#endif
#if HAVE_STREAM && (defined(__GNUC__) || defined(__clang__)) \
    && (defined(__x86_64__) || defined(__i386__))
#include <immintrin.h>
#define HAVE_AVX2 1
#else
#define HAVE_AVX2 0
#endif
#ifdef _WIN32
#define EXPORT __declspec(dllexport)
#else
#define EXPORT __attribute__((visibility("default")))
#endif

#define CHUNK ((ptrdiff_t)1 << 20)

/* A region writer: whole 64-byte lines with streaming stores (a line that spans two
 * appends is assembled in carry first); the partial lines at the region's two ends get
 * ordinary stores, since their other bytes may be another thread's. */
typedef struct {
    char *pos;          /* next byte of the region */
    ptrdiff_t ncarry;   /* bytes of the line at pos - ncarry held in carry */
    unsigned char carry[64];
} sw;

static void sw_line(char *dst, const unsigned char *src)
{
#if HAVE_STREAM
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

static void sw_append(sw *w, const void *src_, ptrdiff_t n)
{
    const unsigned char *src = (const unsigned char *)src_;
    ptrdiff_t k;
    if (w->ncarry) {                       /* finish the line begun by earlier appends */
        k = 64 - w->ncarry < n ? 64 - w->ncarry : n;
        memcpy(w->carry + w->ncarry, src, (size_t)k);
        w->ncarry += k; w->pos += k; src += k; n -= k;
        if (w->ncarry < 64) return;
        sw_line(w->pos - 64, w->carry);
        w->ncarry = 0;
    } else if ((uintptr_t)w->pos & 63u) {  /* the region's first, partial line */
        k = 64 - (ptrdiff_t)((uintptr_t)w->pos & 63u);
        if (k > n) k = n;
        memcpy(w->pos, src, (size_t)k);
        w->pos += k; src += k; n -= k;
    }
    for (; n >= 64; w->pos += 64, src += 64, n -= 64) sw_line(w->pos, src);
    if (n > 0) {
        memcpy(w->carry, src, (size_t)n);
        w->ncarry = n; w->pos += n;
    }
}

static void sw_end(sw *w)                  /* the region's last, partial line */
{
    if (w->ncarry) memcpy(w->pos - w->ncarry, w->carry, (size_t)w->ncarry);
    w->ncarry = 0;
}

/* plain vector loads and stores, 32 (AVX2) or 16 bytes at a time: memcpy would pick its
 * own method by size (rep movsb, streaming stores) */
#if HAVE_AVX2
__attribute__((target("avx2")))
static void plain_copy_avx2(char *dst, const char *src, ptrdiff_t n)
{
    ptrdiff_t i = 0;
    for (; i + 32 <= n; i += 32)
        _mm256_storeu_si256((__m256i *)(dst + i), _mm256_loadu_si256((const __m256i *)(src + i)));
    for (; i < n; i++) dst[i] = src[i];
}
#endif

static void plain_copy(char *dst, const char *src, ptrdiff_t n, int avx2)
{
    ptrdiff_t i = 0;
#if HAVE_AVX2
    if (avx2) { plain_copy_avx2(dst, src, n); return; }
#endif
    (void)avx2;
#if HAVE_STREAM
    for (; i + 16 <= n; i += 16)
        _mm_storeu_si128((__m128i *)(dst + i), _mm_loadu_si128((const __m128i *)(src + i)));
#endif
    for (; i < n; i++) dst[i] = src[i];
}

static void store_fence(void)   /* streaming stores are weakly ordered */
{
#if HAVE_STREAM
    _mm_sfence();
#endif
}

EXPORT int membw_has_stream(void) { return HAVE_STREAM; }

EXPORT int membw_openmp(void)
{
#ifdef _OPENMP
    return _OPENMP;
#else
    return 0;
#endif
}

/* n bytes from src to dst: 1 MiB chunks over the team, memcpy or streaming stores */
EXPORT void membw_copy(void *dst, const void *src, ptrdiff_t n, int n_threads, int stream)
{
    const ptrdiff_t nchunk = (n + CHUNK - 1) / CHUNK;
    const int nt = n_threads > 1 ? n_threads : 1;
    ptrdiff_t i;
    (void)nt;
#pragma omp parallel num_threads(nt) if (nt > 1)
    {
#pragma omp for schedule(static)
        for (i = 0; i < nchunk; i++) {
            const ptrdiff_t a = i * CHUNK, m = n - a < CHUNK ? n - a : CHUNK;
            if (stream) {
                sw w = {(char *)dst + a, 0, {0}};
                sw_append(&w, (const char *)src + a, m);
                sw_end(&w);
            } else {
                memcpy((char *)dst + a, (const char *)src + a, (size_t)m);
            }
        }
        store_fence();
    }
}

/* the xor of n 64-bit words, in four chains so that the loads are not serialised */
static uint64_t xor_words(const char *p, ptrdiff_t n)
{
    uint64_t x0 = 0, x1 = 0, x2 = 0, x3 = 0, w[4];
    ptrdiff_t i = 0;
    for (; i + 4 <= n; i += 4) {
        memcpy(w, p + 8 * i, 32);   /* src need not be 8-byte aligned */
        x0 ^= w[0]; x1 ^= w[1]; x2 ^= w[2]; x3 ^= w[3];
    }
    for (; i < n; i++) { memcpy(w, p + 8 * i, 8); x0 ^= w[0]; }
    return x0 ^ x1 ^ x2 ^ x3;
}

/* Reads every word of src (nr words) once and writes pat (npat bytes), repeated from
 * dst[0], over dst (nw bytes): each 1 MiB chunk of dst reads its proportional share of
 * src.  Returns the xor of src's words, so that the reads cannot be left out. */
EXPORT uint64_t membw_traffic(void *dst, ptrdiff_t nw, const void *src, ptrdiff_t nr,
                              const void *pat, ptrdiff_t npat, int n_threads, int stream)
{
    const ptrdiff_t nchunk = (nw + CHUNK - 1) / CHUNK;
    const int nt = n_threads > 1 ? n_threads : 1;
    int avx2 = 0;
    uint64_t x = 0;
    ptrdiff_t i;
    (void)nt;
#if HAVE_AVX2
    __builtin_cpu_init();
    avx2 = __builtin_cpu_supports("avx2");
#endif
#pragma omp parallel num_threads(nt) if (nt > 1)
    {
#pragma omp for schedule(static) reduction(^ : x)
        for (i = 0; i < nchunk; i++) {
            char *d = (char *)dst + i * CHUNK;
            const ptrdiff_t n = nw - i * CHUNK < CHUNK ? nw - i * CHUNK : CHUNK;
            const ptrdiff_t r0 = nr * i / nchunk, r1 = nr * (i + 1) / nchunk;
            ptrdiff_t a = 0, o = i * CHUNK % npat, k;
            sw w = {d, 0, {0}};
            x ^= xor_words((const char *)src + 8 * r0, r1 - r0);
            for (; a < n; a += k, o = 0) {
                k = n - a < npat - o ? n - a : npat - o;
                if (stream) sw_append(&w, (const char *)pat + o, k);
                else plain_copy(d + a, (const char *)pat + o, k, avx2);
            }
            if (stream) sw_end(&w);
        }
        store_fence();
    }
    return x;
}

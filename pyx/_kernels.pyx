# Pooling-gradient kernels of pool_grad.
#
# Every array reaches these kernels as a 6-D strided view (N, C, D, H, W, L), built by
# pool_grad/_layout.py without copying: 2-D operators have D = 1; in the channels-last
# layout C moves to the innermost "lane" axis L (and the C axis has size 1), so the loops
# below always walk rows of W*L elements whose innermost axis is the contiguous one.
#
# Determinism: each element of grad_input is produced by exactly one work item, and the
# order in which its terms are added depends only on the window tables, never on the thread
# count or on which thread runs the item.  No atomics, no reductions across threads.

from cython.parallel cimport prange, parallel, threadid
from libc.stdint cimport uint16_t, int32_t, int64_t, uint64_t
from libc.string cimport memcpy, memset, strchr
from libc.stdlib cimport malloc, free
from libc.stdint cimport uint8_t, uintptr_t
from cpython.buffer cimport (PyObject_GetBuffer, PyBuffer_Release, PyBUF_WRITABLE,
                             PyBUF_FORMAT)
cimport numpy as cnp
import threading

import numpy as np

cnp.import_array()
from libc.math cimport INFINITY, NAN

cdef extern from "pg_half.h" nogil:
    float pg_f16_to_f32(uint16_t h)
    uint16_t pg_f32_to_f16(float f)
    float pg_bf16_to_f32(uint16_t h)
    uint16_t pg_f32_to_bf16(float f)
    float pg_round_hf32(float f)
    float pg_round_fp16(float f)
    void pg_bf16_to_f32_row(const uint16_t* s, float* d, Py_ssize_t n)
    void pg_f32_to_bf16_row(const float* s, uint16_t* d, Py_ssize_t n)
    void pg_f16_to_f32_row(const uint16_t* s, float* d, Py_ssize_t n)
    void pg_f32_to_f16_row(const float* s, uint16_t* d, Py_ssize_t n)
    int pg_have_f16c()

cdef extern from "pg_cpu.h" nogil:
    int pg_have_avx2()
    void pg_set_simd(int allowed)
    Py_ssize_t PG_MAX_TAPS

cdef extern from "pg_stream.h" nogil:
    void pg_mul_f32(float* dst, const float* a, const float* b, Py_ssize_t n)
    void pg_mulin_f32(float* x, const float* b, Py_ssize_t n)
    void pg_mul_f64(double* dst, const double* a, const double* b, Py_ssize_t n)
    void pg_load_lanes_f64(double* dst, const double* src, Py_ssize_t so, const double* w,
                           Py_ssize_t Wo, Py_ssize_t L)
    void pg_load_lanes_f32(float* dst, const float* src, Py_ssize_t so, const float* w,
                           Py_ssize_t Wo, Py_ssize_t L)
    int pg_combine_h16(uint16_t* dst, const float** rows, Py_ssize_t nr, Py_ssize_t n,
                       int bf16)
    int pg_load_h16(float* dst, const uint16_t* src, const float* w, Py_ssize_t n, int bf16)
    int pg_load_lanes_h16(float* dst, const uint16_t* src, Py_ssize_t so, const float* w,
                          Py_ssize_t Wo, Py_ssize_t L, int bf16)
    void pg_combine_f32(float* dst, const float** rows, Py_ssize_t nr, Py_ssize_t n,
                        int stream)
    void pg_lanes_row(void* dst, Py_ssize_t ds, Py_ssize_t nd, Py_ssize_t rs, const void** g,
                      Py_ssize_t gs, const float* k, const float* ww, Py_ssize_t nr,
                      const int64_t* tap, Py_ssize_t m, Py_ssize_t W, Py_ssize_t L,
                      Py_ssize_t Wo, int kind, int stream, const int64_t* crun)
    void pg_lanes_row_f64(void* dst, Py_ssize_t ds, Py_ssize_t nd, Py_ssize_t rs,
                          const void** g, Py_ssize_t gs, const double* k, const double* ww,
                          Py_ssize_t nr, const int64_t* tap, Py_ssize_t m, Py_ssize_t W,
                          Py_ssize_t L, Py_ssize_t Wo, int stream)
    void pg_lanes_copy(char* dst, Py_ssize_t dstep, const char* src, Py_ssize_t sstep,
                       Py_ssize_t W, Py_ssize_t nbytes, int stream)
    void pg_combine_f64(double* dst, const double** rows, Py_ssize_t nr, Py_ssize_t n,
                        int stream)
    void pg_fill(void* dst, const void* value, Py_ssize_t size, Py_ssize_t n)
    Py_ssize_t PG_STAGE_MEM(Py_ssize_t cap)
    void pg_fill_rows_f32(float* dst, Py_ssize_t xs2, Py_ssize_t n, const float* g0,
                          Py_ssize_t gs2, const int64_t* dlo, const float* wd, float kh,
                          const float* ww, Py_ssize_t d0, Py_ssize_t d1)
    void pg_fill_rows_h16(uint16_t* dst, Py_ssize_t xs2, Py_ssize_t n, const uint16_t* g0,
                          Py_ssize_t gs2, const int64_t* dlo, const float* wd, float kh,
                          const float* ww, Py_ssize_t d0, Py_ssize_t d1, int bf16)
    void pg_stream_f32(float* dst, const float* src, Py_ssize_t n)
    void pg_stream_f64(double* dst, const double* src, Py_ssize_t n)
    void pg_stream_u16(uint16_t* dst, const uint16_t* src, Py_ssize_t n)
    void pg_store_fence()
    int PG_HAVE_STREAM
    int PG_VEC
    ctypedef struct pg_sw:
        pass
    void pg_sw_begin(pg_sw* w, void* dst)
    void pg_sw_append(pg_sw* w, const void* src, Py_ssize_t nbytes)
    void pg_sw_end(pg_sw* w)
    ctypedef struct pg_stage:
        pass
    void pg_stage_begin(pg_stage* s, void* dst, void* mem, Py_ssize_t cap)
    void pg_stage_combine_f64(pg_stage* s, const double** rows, Py_ssize_t nr, Py_ssize_t n)
    void pg_stage_finish(pg_stage* s)

cdef extern from "pg_expand.h" nogil:
    Py_ssize_t PG_POLY_MAX_M
    void pg_expand_poly_f32(const float* grow, float* e, Py_ssize_t P, Py_ssize_t q0,
                            Py_ssize_t nq, const int64_t* c, const int64_t* m,
                            Py_ssize_t gap, float* tmp, float k)
    void pg_expand_poly_f64(const double* grow, double* e, Py_ssize_t P, Py_ssize_t q0,
                            Py_ssize_t nq, const int64_t* c, const int64_t* m,
                            Py_ssize_t gap, double* tmp, double k)
    void pg_expand_lanes_f32(const float* grow, float* erow, const int64_t* tap, Py_ssize_t m,
                             Py_ssize_t W, Py_ssize_t L, float k)
    void pg_expand_lanes_f64(const double* grow, double* erow, const int64_t* tap,
                             Py_ssize_t m, Py_ssize_t W, Py_ssize_t L, double k)

cdef extern from "pg_item.h" nogil:
    ctypedef struct pg_item_f32:
        Py_ssize_t W, Wo, gs2, gs3, xs2, xs3
        const int64_t* dlo
        const int64_t* dhi
        const int64_t* hlo
        const int64_t* hhi
        const int64_t* wtap
        Py_ssize_t m, P, q0, q1, gap, qx0, qx1, epad, gblk
        int gblk_rows
        const int64_t* pc
        const int64_t* pm
        const float* wd
        const float* wh
        const float* ww
        int region
        Py_ssize_t stage, stage_cap
        int single
        int dup2
        int pair_nt
        const int64_t* wrun
        Py_ssize_t nrun
        const int64_t* hrun
        const int64_t* hstep
        Py_ssize_t step_rows
        int hsteps
        int sent
        const int64_t* spread
        int spread_wide
        const int64_t* spread32
        int spread32_wide
        const int64_t* tspread
        int tspread_wide
    ctypedef struct pg_fused64:
        Py_ssize_t P, W, Wo, gs2, gs3, xs2, xs3, qx1, q1, epad
        const int64_t* dlo
        const int64_t* dhi
        const int64_t* hlo
        const int64_t* hhi
        const int64_t* pc
        const int64_t* pm
        const double* wd
        const double* wh
        const double* ww
        int strips
        int nt
    int pg_fused_f64_run(const pg_fused64* f, const double* gbase, double* xbase,
                         Py_ssize_t d0, Py_ssize_t d1, Py_ssize_t h0, Py_ssize_t h1,
                         double* G)
    void pg_item_f32_run(const pg_item_f32* g, const float* gbase, float* xbase,
                         Py_ssize_t d0, Py_ssize_t d1, Py_ssize_t h0, Py_ssize_t h1,
                         float* grow, float* E, const float** rows, float* tmp)
    int pg_item_h16_run(const pg_item_f32* g, const uint16_t* gbase, uint16_t* xbase,
                        Py_ssize_t d0, Py_ssize_t d1, Py_ssize_t h0, Py_ssize_t h1,
                        float* grow, float* E, const float** rows, float* tmp, int bf16)

cdef extern from "pg_tpose.h" nogil:
    int pg_tload(float* dst, const void* src, Py_ssize_t ps, Py_ssize_t n, Py_ssize_t L,
                 const float* ww, Py_ssize_t rowlen, Py_ssize_t pitch, int kind)
    int pg_tstore(void* dst, Py_ssize_t ps, const float* src, Py_ssize_t n, Py_ssize_t L,
                  int kind)

cdef extern from "pg_plane.h" nogil:
    ctypedef struct pg_plane_args:
        const void* go
        void* gi
        Py_ssize_t L, gps, gs2, gs3, xps, xs2, xs3, W, Wo, m
        const int64_t* tap
        const int64_t* dlo
        const int64_t* dhi
        const int64_t* hlo
        const int64_t* hhi
        Py_ssize_t d0, d1, h0, h1
        const float* wd
        const float* wh
        const float* ww
        int kind, stream
        float* E
        Py_ssize_t E_elems
        void* stage
        Py_ssize_t stage_bytes
    int pg_plane_item(const pg_plane_args* a)
    Py_ssize_t PG_PLANE_CH
    Py_ssize_t PG_PLANE_TAPS

cdef extern from "pg_index.h" nogil:
    int pg_any_bad_i64(const int64_t* x, Py_ssize_t n, uint64_t limit)
    int pg_any_bad_i32(const int32_t* x, Py_ssize_t n, uint64_t limit)
    void pg_row_range_i64(const int64_t* x, Py_ssize_t n, int64_t* r)
    void pg_row_range_i32(const int32_t* x, Py_ssize_t n, int64_t* r)

cdef extern from "pg_scatter.h" nogil:
    int pg_scatter_fast(int kind)
    void pg_scatter_row(float* buf, const void* g, int kind, const void* j, int j64,
                        Py_ssize_t n, uint64_t lo, uint64_t span, Py_ssize_t lanes,
                        Py_ssize_t dummy)
    void pg_scatter_lane_rows(float* buf, const void* g, Py_ssize_t gl, Py_ssize_t gt,
                              int kind, const void* j, Py_ssize_t jl, Py_ssize_t jt, int j64,
                              Py_ssize_t n, Py_ssize_t L, uint64_t lo, uint64_t span,
                              Py_ssize_t dummy)
    void pg_flush_block(float* buf, void* dst, Py_ssize_t n, int kind, int stream)
    Py_ssize_t pg_flush_shift(const void* dst, Py_ssize_t n, int kind)
    void pg_zero_f32(float* d, Py_ssize_t n)
    void pg_acc(float* b, float v)
    int pg_wcode_plane(uint8_t* code, const void* j, int j64, Py_ssize_t Ho, Py_ssize_t Wo,
                       Py_ssize_t js, Py_ssize_t W, Py_ssize_t kh)
    void pg_wrows(void* dst, Py_ssize_t rs, Py_ssize_t ds, const void* g, Py_ssize_t gs,
                  int kind, int stream, const uint8_t* code, Py_ssize_t Wo, Py_ssize_t n,
                  Py_ssize_t r0, Py_ssize_t r1, Py_ssize_t chunk)
    int pg_lcode_rowt(uint8_t* code, const void* j, int j64, Py_ssize_t jl, Py_ssize_t Wo,
                      Py_ssize_t L, Py_ssize_t base, Py_ssize_t W, Py_ssize_t kh, Py_ssize_t kw,
                      Py_ssize_t pf)
    void pg_lanes_gather(void* t, const void* g, Py_ssize_t gl, Py_ssize_t Wo, Py_ssize_t L,
                         Py_ssize_t es, Py_ssize_t pf)
    int pg_lcode_row(uint8_t* code, const void* j, int j64, Py_ssize_t js, Py_ssize_t Wo,
                     Py_ssize_t L, Py_ssize_t base, Py_ssize_t W, Py_ssize_t kh, Py_ssize_t kw)
    void pg_lwrite_row(void* dst, Py_ssize_t rs, Py_ssize_t xs, const void* g, Py_ssize_t gs,
                       const uint8_t* code, int kind, int stream, Py_ssize_t Wo, Py_ssize_t L,
                       Py_ssize_t kh, Py_ssize_t kw)
    int pg_fcode_row(uint8_t* code, const void* j, int j64, Py_ssize_t n, Py_ssize_t L,
                     Py_ssize_t base, Py_ssize_t W, Py_ssize_t kh, Py_ssize_t kw)
    void pg_fwrite_row(void* dst, Py_ssize_t rs, const void* g, const uint8_t* code,
                       const int64_t* sp, Py_ssize_t n, int kind, int stream, int wide,
                       Py_ssize_t kh, Py_ssize_t kw)

cdef extern from "pg_omp.h" nogil:
    int pg_omp_max_threads()
    int PG_OPENMP
    int PG_OPENMP_VERSION

ctypedef fused store_t:
    float
    double
    uint16_t

ctypedef fused acc_t:
    float
    double

ctypedef fused idx_t:
    int32_t
    int64_t

# storage kinds (the Python layer passes the same numbers)
cdef enum:
    K_F32 = 0
    K_F64 = 1
    K_F16 = 2
    K_BF16 = 3

# bytes of the stage through which a gather item streams its region (pg_stream.h): its
# whole lines go out each time it fills; small enough not to cross a page
cdef enum:
    STAGE_BYTES = 1024

# the item's E-row formers (pg_item.h) put all of an item's grad_output rows in their grow
# block before expanding them where the interior is period 2 and rows have at most this
# many grad_output values, and each row right before it is expanded otherwise
GROW_BLOCK_WO = 19

# the C loops' limits that the plan's tables must keep to (_plan.MAX_TAPS, POLY_MAX_M)
MAX_TAPS = PG_MAX_TAPS
PLANE_TAPS = PG_PLANE_TAPS      # the most taps a column of pg_plane.h's planes
STAGE = STAGE_BYTES
POLY_MAX_M = PG_POLY_MAX_M

# cube_math_type roundings applied to grad_output on load (float32 storage only)
cdef enum:
    R_NONE = 0
    R_HF32 = 1
    R_FP16 = 2

OPENMP_ENABLED = bool(PG_OPENMP)
STREAMING_STORES = bool(PG_HAVE_STREAM)
# channels-last rows formed without E rows (pg_lanes_row): built with the vector layer
LANES_ROWS = bool(PG_VEC)


def f16c_in_use():
    """Whether float16 rows are converted with the CPU's F16C instructions."""
    return bool(pg_have_f16c())
OPENMP_VERSION = PG_OPENMP_VERSION


def scatter_fast(int kind):
    """Whether the max-pool scatter's vector forms run for storage kind (K_*) here."""
    return kind != K_F64 and pg_scatter_fast(0 if kind == K_F32 else (1 if kind == K_BF16 else 2)) != 0


def simd_in_use():
    """The instruction set of the hot float loops: "avx2" or "baseline" (pg_cpu.h)."""
    return "avx2" if pg_have_avx2() else "baseline"


def _set_simd(bint allowed):
    """Allow (default) or forbid the AVX2 loops; for tests comparing the two, which must
    give the same bits.  Not thread-safe: call only while no kernel runs."""
    pg_set_simd(allowed)


def omp_max_threads():
    """What the OpenMP runtime would give a parallel region now (1 without OpenMP)."""
    return pg_omp_max_threads()


# ---- thread policy (pool_grad._threads is its Python face): the default budget, kept
# here so that a call with n_threads=None (budget 0 to run / run_on) pays no Python call
# for it, and the threads worth using for a call's size
cdef Py_ssize_t _user_threads = 0   # set_num_threads (0: none)
cdef Py_ssize_t _cpu_count = 1
# bytes of memory traffic below which a second thread does not pay for itself; each
# further thread needs as much again
cdef enum:
    C_GRAIN_BYTES = 1 << 18
GRAIN_BYTES = C_GRAIN_BYTES


def _set_thread_defaults(Py_ssize_t user, Py_ssize_t cpu_count):
    global _user_threads, _cpu_count
    _user_threads = user
    _cpu_count = cpu_count if cpu_count > 0 else 1


def user_threads():
    """The count of set_num_threads, 0 where there is none."""
    return _user_threads


def default_threads():
    """The default budget: set_num_threads', else the OpenMP runtime's capped at the CPUs
    this process may use (pool_grad.get_num_threads)."""
    return _default_budget()


cdef inline int _default_budget() noexcept:
    cdef Py_ssize_t n
    if _user_threads > 0:
        return <int>_user_threads
    n = pg_omp_max_threads()
    if n > _cpu_count:
        n = _cpu_count
    return <int>n if n > 1 else 1


cdef inline Py_ssize_t _threads_for(Py_ssize_t budget, Py_ssize_t traffic,
                                    Py_ssize_t n_items) noexcept:
    """Threads worth using within budget: at most one per item and per C_GRAIN_BYTES of
    traffic, at least one."""
    cdef Py_ssize_t nt = budget
    if nt > n_items:
        nt = n_items
    if nt > traffic // C_GRAIN_BYTES:
        nt = traffic // C_GRAIN_BYTES
    return nt if nt > 1 else 1


def threads_for_work(Py_ssize_t budget, Py_ssize_t nbytes, Py_ssize_t n_items):
    """_threads_for, for pool_grad._threads.for_work."""
    return _threads_for(budget, nbytes, n_items)


# --------------------------------------------------------------------------------------
# execution shared by the planned kernels: thread count, workspace, scratch
# --------------------------------------------------------------------------------------

cdef enum:
    # calls moving fewer bytes than this keep the GIL: releasing and taking it back costs
    # more than such a kernel runs (a few microseconds)
    C_NOGIL_BYTES = 1 << 16
    # the workspace start is rounded up to this many bytes, which workspace sizes include
    C_ALIGN = 64

ALIGN = C_ALIGN

# A kernel with alternate forms (PlannedKernel.add_alternate: the other store form, or
# another shape of the same work) runs its first calls in turn in each form: one call
# each to fault in pages and scratch, then C_TUNE_TIMED timed rounds of one call each,
# then one more call of the planned form (TUNE_CALLS = 13 calls for two forms,
# tune_calls in general: at most C_MAX_FORMS forms, 25 calls, which the two store forms
# of a float64 average gradient in strips, each timed beside its row form, reach).  Each
# alternate's call is compared with the mean of the planned form's calls just before and
# after it, which cancels a drift of the machine's speed, and the median of those ratios
# decides: the alternate of least median is kept where it is below TUNE_MARGIN.  All
# forms give the same bits, and which is faster depends on the machine, on the call and
# on what else the process does with the cache; least times, compared instead, can keep
# the slower form (docs/performance.md).
cdef enum:
    C_TUNE_TIMED = 5
    C_TUNE_CALLS = 2 * (1 + C_TUNE_TIMED) + 1
    C_MAX_FORMS = 4
TUNE_CALLS = C_TUNE_CALLS
TUNE_TIMED = C_TUNE_TIMED
MAX_FORMS = C_MAX_FORMS
TUNE_MARGIN = 0.97

from time import perf_counter as _perf_counter


def _raise_invalid(arg, rule, value):
    from pool_grad._errors import invalid
    raise invalid(arg, rule, value)


cdef bint _plain_format(const char* fmt) noexcept:
    """A struct-module format of one plain number or byte, e.g. 'B', '<f', '=e'."""
    cdef const char* f = fmt
    if f[0] != 0 and strchr(b"@=<>!", f[0]) != NULL:
        f += 1
    return f[0] != 0 and f[1] == 0 and strchr(b"cbB?hHiIlLqQnNefdg", f[0]) != NULL


cdef class PlannedKernel:
    """Execution shared by the planned kernels.  ``run`` picks the thread count from the
    work size, takes per-thread scratch from the caller's workspace (or from a buffer the
    kernel keeps between calls), and calls the subclass's ``_execute`` without the GIL."""
    cdef readonly Py_ssize_t n_items
    cdef readonly Py_ssize_t scratch_elems
    cdef readonly Py_ssize_t scratch_bytes   # per thread
    cdef readonly Py_ssize_t shared_bytes    # before the threads' scratch, one for all
    cdef readonly Py_ssize_t traffic         # bytes the call must move
    # first elements of the planned arrays (run) - run_on passes other arrays' instead
    cdef char* p_go
    cdef char* p_gi
    cdef char* p_ind
    cdef object _extents             # (lo, hi) byte addresses the planned arrays span
    cdef uintptr_t _ext[8]           # the same, as C integers (at most four arrays)
    cdef Py_ssize_t _n_ext
    cdef void* _own
    cdef size_t _own_bytes
    cdef bint _own_busy
    # held by run() around a call where the kernel adds into grad_input itself (the
    # max-pool's direct form): two executes of one op at once, into the same array, would
    # add into each other's sums; they then run one after the other (None: no lock)
    cdef object _lock
    # the form this kernel was planned with: its store form, "stream" or "cache", and
    # for another shape of the same work its name after it ("cache rows"; ops.py); the
    # same call in other forms, timed against it over the first calls (add_alternate),
    # and the one kept in its place once they are timed (None: this one)
    cdef public str form
    cdef readonly object choice      # the plan's form for it (_plan.gather_choice, ...)
    cdef list _alts
    cdef PlannedKernel _alt
    cdef Py_ssize_t _tune_calls, _tune_nt
    cdef double _times[C_MAX_FORMS][C_TUNE_TIMED + 1]

    def __dealloc__(self):
        free(self._own)

    def set_alternate(self, PlannedKernel alt):
        """Plan the same call in one other form beside this one (None: none), replacing
        any planned before (add_alternate)."""
        self._alts = None
        self._alt = None
        if alt is not None:
            self.add_alternate(alt)

    def add_alternate(self, PlannedKernel alt):
        """Plan the same call in another form beside this one (and those added before):
        the first ``tune_calls`` calls run in each form in turn and time them, and the
        fastest is kept (``store_form``)."""
        if alt is None or alt is self:
            raise ValueError("pool_grad: an alternate must be another kernel")
        if alt._alts is not None or alt._alt is not None:
            raise ValueError("pool_grad: an alternate has no alternate of its own")
        if self._alt is not None:
            raise ValueError("pool_grad: this kernel's forms were timed already")
        if self._alts is None:
            self._alts = []
        if len(self._alts) + 1 >= C_MAX_FORMS:
            raise ValueError(f"pool_grad: at most {C_MAX_FORMS} forms of one call")
        self._alts.append(alt)
        self._tune_calls = 0

    @property
    def alternates(self):
        """The other forms timed against this one while they are (a tuple, else empty)."""
        return tuple(self._alts) if self._alts is not None else ()

    @property
    def alternate(self):
        """The kernel that runs in this one's place once the timing kept it, the first
        other form while they are timed, else None."""
        if self._alt is not None:
            return self._alt
        return self._alts[0] if self._alts else None

    @property
    def tune_calls(self):
        """Calls that time the forms (0 where there is one form, or once they are timed)."""
        if not self._alts:
            return 0
        return (1 + len(self._alts)) * (1 + C_TUNE_TIMED) + 1

    @property
    def store_form(self):
        """The form the calls use: this kernel's ``form``, an alternate's once it proved
        faster, or "tuning" while they are timed."""
        if self._alt is not None:
            return self._alt.form
        return "tuning" if self._alts else self.form

    def settle(self, double t_self, *t_alts):
        """Keep the fastest alternate where its time is below ``TUNE_MARGIN * t_self``
        (times of the forms, in the order they were added), else this form; the losers'
        scratch is freed."""
        if not self._alts:
            return
        if len(t_alts) != len(self._alts):
            raise ValueError(f"pool_grad: settle takes {1 + len(self._alts)} times")
        self._settle_ratios([t / t_self for t in t_alts])

    cdef _settle_ratios(self, list ratios):
        """Keep the alternate of least time ratio (to this form's) where it is below
        TUNE_MARGIN, else this form."""
        cdef Py_ssize_t i, keep = -1
        cdef double best = TUNE_MARGIN
        for i in range(len(self._alts)):
            if ratios[i] < best:
                keep, best = i, ratios[i]
        if keep >= 0:
            self._alt = self._alts[keep]
            self._free_own()
        for i in range(len(self._alts)):
            if i != keep:
                (<PlannedKernel>self._alts[i])._free_own()
        self._alts = None

    cdef _free_own(self):
        if not self._own_busy:
            free(self._own)
            self._own, self._own_bytes = NULL, 0

    cpdef int threads_for(self, int budget):
        """Threads worth using within ``budget`` for this call's work size."""
        return <int>_threads_for(budget, self.traffic, self.n_items)

    def workspace_size(self, int budget):
        """Bytes of workspace a call of at most ``budget`` threads needs (in any of its
        forms, while they are timed)."""
        if self.n_items == 0:
            return 0
        own = self.shared_bytes + self.scratch_bytes * self.threads_for(budget) + C_ALIGN
        for alt in self._forms():
            if alt is not self:
                own = max(own, alt.workspace_size(budget))
        return own

    cdef list _forms(self):
        """This kernel and its alternates (timed, or the one kept)."""
        if self._alts:
            return [self] + self._alts
        return [self] if self._alt is None else [self, self._alt]

    cdef Py_ssize_t _execute(self, char* scratch, int nt, char* go, char* gi,
                             char* ind) except -1:
        return 0

    def run_on(self, cnp.ndarray grad_output, cnp.ndarray grad_input, indices, int budget):
        """Run this plan on other arrays of exactly the planned shapes, strides and dtypes
        (the one-shot functions' cache of validated configurations guarantees it);
        budget 0: the default (get_num_threads)."""
        cdef char* ind = NULL
        if indices is not None:
            ind = <char*>cnp.PyArray_DATA(<cnp.ndarray>indices)
        return self._run(None, budget, 0, <char*>cnp.PyArray_DATA(grad_output),
                         <char*>cnp.PyArray_DATA(grad_input), ind)

    def run(self, workspace, int budget, Py_ssize_t need):
        """Execute with at most ``budget`` threads (0: the default, get_num_threads);
        ``workspace`` None or a writeable buffer of at least ``need`` bytes.  Returns the
        kernel's status (0: done)."""
        if self.p_gi == NULL:
            raise RuntimeError("pool_grad: this plan was released from its arrays")
        if self._lock is not None:
            with self._lock:
                return self._run(workspace, budget, need, self.p_go, self.p_gi, self.p_ind)
        return self._run(workspace, budget, need, self.p_go, self.p_gi, self.p_ind)

    @property
    def extents(self):
        return self._extents

    @extents.setter
    def extents(self, value):
        cdef Py_ssize_t k = 0
        if value is not None:
            value = list(value)
            if len(value) > 4:
                raise ValueError("pool_grad: at most four planned arrays")
            for lo, hi in value:
                self._ext[2 * k] = <uintptr_t>lo
                self._ext[2 * k + 1] = <uintptr_t>hi
                k += 1
        self._n_ext = k
        self._extents = value
        for alt in self._forms():
            if alt is not self:
                alt.extents = value

    def release_arrays(self):
        """Forget the planned arrays (a cached template keeps only the geometry, and is
        run with run_on): a cache must not keep a caller's arrays alive."""
        self.p_go = self.p_gi = self.p_ind = NULL
        self.extents = None
        self._release()
        for alt in self._forms():
            if alt is not self:
                alt.release_arrays()

    cdef _release(self):
        pass

    cdef object _run(self, workspace, int budget, Py_ssize_t need, char* go, char* gi,
                     char* ind):
        if self._alts is None:
            if self._alt is None:
                return self._run_here(workspace, budget, need, go, gi, ind)
            return self._alt._run_here(workspace, budget, need, go, gi, ind)
        return self._run_tuning(workspace, budget, need, go, gi, ind)

    cdef object _run_tuning(self, workspace, int budget, Py_ssize_t need, char* go,
                            char* gi, char* ind):
        """One of the first calls of a kernel with alternates: in turn in each form, a
        first untimed round, then C_TUNE_TIMED timed rounds and a last call of this form
        (calls on another thread count than the first are not comparable: they run
        untimed, in the planned form)."""
        cdef int nt = self.threads_for(budget if budget > 0 else _default_budget())
        cdef Py_ssize_t k = self._tune_calls
        cdef Py_ssize_t nf = 1 + len(self._alts)
        cdef Py_ssize_t which = k % nf
        cdef Py_ssize_t rnd = k // nf - 1      # the timed round (-1: the first, untimed)
        cdef PlannedKernel kern = self if which == 0 else self._alts[which - 1]
        cdef double t
        if k == 0:
            self._tune_nt = nt
        elif nt != self._tune_nt:
            return self._run_here(workspace, budget, need, go, gi, ind)
        self._tune_calls = k + 1
        t = _perf_counter()
        status = kern._run_here(workspace, budget, need, go, gi, ind)
        t = _perf_counter() - t
        if rnd >= 0:
            self._times[which][rnd] = t if status == 0 else NAN
        if k + 1 >= nf * (1 + C_TUNE_TIMED) + 1 and self._alts:
            self._settle_ratios([self._median_ratio(j) for j in range(1, nf)])
        return status

    cdef double _median_ratio(self, Py_ssize_t j):
        """Form j's timed calls over the mean of this form's calls before and after each,
        their median (INFINITY where none could be compared)."""
        cdef Py_ssize_t i
        cdef double a, b
        ratios = []
        for i in range(C_TUNE_TIMED):
            a = self._times[0][i] + self._times[0][i + 1]
            b = self._times[j][i]
            if a > 0 and b == b and a == a:
                ratios.append(2 * b / a)
        if not ratios:
            return INFINITY
        ratios.sort()
        n = len(ratios)
        return ratios[n // 2] if n % 2 else 0.5 * (ratios[n // 2 - 1] + ratios[n // 2])

    cdef object _run_here(self, workspace, int budget, Py_ssize_t need, char* go,
                          char* gi, char* ind):
        cdef Py_buffer view
        cdef int nt = self.threads_for(budget if budget > 0 else _default_budget())
        cdef size_t want, fit
        cdef uintptr_t addr, off
        cdef char* base
        cdef bint owned = False, temp = False
        cdef Py_ssize_t status, k
        if self.n_items == 0:
            return 0
        if workspace is not None:
            try:
                # contiguous (no strides asked for), writeable, plain data
                PyObject_GetBuffer(workspace, &view, PyBUF_WRITABLE | PyBUF_FORMAT)
            except (BufferError, TypeError, ValueError) as exc:
                _raise_invalid("workspace", "must be None or a writeable contiguous buffer",
                               f"{type(workspace).__name__} ({exc})")
            try:
                if view.format != NULL and not _plain_format(view.format):
                    # scratch bytes written over object pointers would crash the interpreter
                    _raise_invalid("workspace", "must hold plain bytes or numbers (no "
                                   "objects or records)", f"buffer format {view.format!r}")
                for k in range(self._n_ext):
                    if <uintptr_t>view.buf < self._ext[2 * k + 1] and \
                            self._ext[2 * k] < <uintptr_t>view.buf + <uintptr_t>view.len:
                        _raise_invalid("workspace", "must not overlap grad_output, "
                                       "indices or grad_input", "a buffer sharing "
                                       "their memory")
                if view.len < need:
                    _raise_invalid("workspace", f"must hold at least workspace_size = "
                                   f"{need} bytes", f"{view.len} bytes")
                addr = <uintptr_t>view.buf
                off = (C_ALIGN - addr % C_ALIGN) % C_ALIGN
                fit = ((view.len - off - self.shared_bytes) // self.scratch_bytes
                       if <size_t>view.len > off + self.shared_bytes else 0)
                if fit < 1:
                    _raise_invalid("workspace", "is too small for one thread's scratch",
                                   f"{view.len} bytes")
                if <size_t>nt > fit:
                    nt = <int>fit
                return self._execute(<char*>view.buf + off + self.shared_bytes, nt, go, gi,
                                     ind)
            finally:
                PyBuffer_Release(&view)
        want = self.shared_bytes + self.scratch_bytes * nt + C_ALIGN
        if not self._own_busy:
            if self._own_bytes < want:
                free(self._own)
                self._own = malloc(want)
                self._own_bytes = want if self._own != NULL else 0
                if self._own == NULL:
                    raise MemoryError("pool_grad: cannot allocate the scratch buffer")
            base = <char*>self._own
            self._own_busy = owned = True
        else:  # the same kernel running in another Python thread: scratch of our own
            base = <char*>malloc(want)
            if base == NULL:
                raise MemoryError("pool_grad: cannot allocate the scratch buffer")
            temp = True
        try:
            addr = <uintptr_t>base
            return self._execute(base + (C_ALIGN - addr % C_ALIGN) % C_ALIGN + self.shared_bytes,
                                 nt, go, gi, ind)
        finally:
            if owned:
                self._own_busy = False
            if temp:
                free(base)

# --------------------------------------------------------------------------------------
# strided rows <-> contiguous accumulation buffers
# --------------------------------------------------------------------------------------

cdef inline void _load_block(const store_t* src, Py_ssize_t so, Py_ssize_t si,
                             Py_ssize_t no, Py_ssize_t ni, acc_t* dst,
                             int kind, int rnd) noexcept nogil:
    """dst[o*ni + i] = value(src[o*so + i*si]) with dtype widening and cube rounding."""
    cdef Py_ssize_t o, i
    cdef const store_t* s
    cdef acc_t* d
    for o in range(no):
        s = src + o * so
        d = dst + o * ni
        if store_t is uint16_t:
            if kind == K_F16:
                if acc_t is float:
                    if si == 1:
                        pg_f16_to_f32_row(s, d, ni)
                        continue
                for i in range(ni):
                    d[i] = pg_f16_to_f32(s[i * si])
            else:
                if acc_t is float:
                    if si == 1:
                        pg_bf16_to_f32_row(s, d, ni)
                        continue
                for i in range(ni):
                    d[i] = pg_bf16_to_f32(s[i * si])
        elif store_t is float:
            if rnd == R_HF32:
                for i in range(ni):
                    d[i] = pg_round_hf32(s[i * si])
            elif rnd == R_FP16:
                for i in range(ni):
                    d[i] = pg_round_fp16(s[i * si])
            elif si == 1:
                for i in range(ni):
                    d[i] = s[i]
            else:
                for i in range(ni):
                    d[i] = s[i * si]
        else:
            if si == 1:
                for i in range(ni):
                    d[i] = <acc_t>s[i]
            else:
                for i in range(ni):
                    d[i] = <acc_t>s[i * si]


cdef inline void _store_block(const acc_t* src, store_t* dst, Py_ssize_t so, Py_ssize_t si,
                              Py_ssize_t no, Py_ssize_t ni, int kind) noexcept nogil:
    """dst[o*so + i*si] = round(src[o*ni + i]): the single rounding of a 16-bit result."""
    cdef Py_ssize_t o, i
    cdef const acc_t* s
    cdef store_t* d
    for o in range(no):
        s = src + o * ni
        d = dst + o * so
        if store_t is uint16_t:
            if kind == K_F16:
                if acc_t is float:
                    if si == 1:
                        pg_f32_to_f16_row(s, d, ni)
                        continue
                for i in range(ni):
                    d[i * si] = pg_f32_to_f16(<float>s[i])
            else:
                if acc_t is float:
                    if si == 1:
                        pg_f32_to_bf16_row(s, d, ni)
                        continue
                for i in range(ni):
                    d[i * si] = pg_f32_to_bf16(<float>s[i])
        elif si == 1:
            for i in range(ni):
                d[i] = <store_t>s[i]
        else:
            for i in range(ni):
                d[i * si] = <store_t>s[i]


cdef inline void _store_row(acc_t* src, store_t* dst, Py_ssize_t sw, Py_ssize_t sl,
                            Py_ssize_t W, Py_ssize_t L, int kind, int stream,
                            uint16_t* tmp16) noexcept nogil:
    """Store one (W, L) row of results.  A contiguous row of a large output that covers
    whole cache lines goes out with streaming stores; 16-bit rows are rounded into tmp16
    first."""
    cdef Py_ssize_t i, n = W * L
    if L == 1 or (sl == 1 and sw == L):
        if L == 1:
            sl = sw
        # streaming pays only on rows of several whole cache lines
        if stream and sl == 1 and n * <Py_ssize_t>sizeof(store_t) >= 256:
            if store_t is uint16_t:
                if kind == K_F16:
                    if acc_t is float:
                        pg_f32_to_f16_row(src, tmp16, n)
                    else:
                        for i in range(n):
                            tmp16[i] = pg_f32_to_f16(<float>src[i])
                elif acc_t is float:
                    pg_f32_to_bf16_row(src, tmp16, n)
                else:
                    for i in range(n):
                        tmp16[i] = pg_f32_to_bf16(<float>src[i])
                pg_stream_u16(dst, tmp16, n)
            elif store_t is float:
                if acc_t is float:
                    pg_stream_f32(dst, src, n)
            else:
                if acc_t is double:
                    pg_stream_f64(dst, src, n)
            return
        _store_block(src, dst, 0, sl, 1, n, kind)
    else:
        _store_block(src, dst, sw, sl, W, L, kind)


# --------------------------------------------------------------------------------------
# separable average-pool gradient (AvgPool2dBackward, AdaptiveAvgPool3dBackward)
# --------------------------------------------------------------------------------------
#
# grad_input[d, h, w] = sum_{od in cov_d(d)} sum_{oh in cov_h(h)} wd[od] * wh[oh]
#                       * sum_{ow in cov_w(w)} ww[ow] * grad_output[od, oh, ow]
#
# cov_x(i) = [lo[i], hi[i]) is the range of output indices whose window holds input index i
# (built at planning).  A work item is one (n, c) plane (or one n in channels-last), one block
# of D rows and one block of H rows.  It first expands each grad_output row it needs to the
# input width ("E rows": the sum over ow), then forms every grad_input row of its block as
# the weighted sum of the few E rows that cover it, and stores it once.

cdef struct Gather:
    Py_ssize_t N, C, D, H, W, L
    Py_ssize_t Wo
    Py_ssize_t bd, bh, nbd, nbh
    Py_ssize_t gs[6]
    Py_ssize_t xs[6]
    const int64_t* dlo
    const int64_t* dhi
    const int64_t* hlo
    const int64_t* hhi
    const int64_t* wlo
    const int64_t* whi
    const int64_t* wtap     # m taps per input column (padding taps point at a -0.0 slot)
    Py_ssize_t m            # taps per column, 0: use the [wlo, whi) ranges instead
    Py_ssize_t P, q0, q1    # polyphase interior of the W expansion (P = 0: none)
    Py_ssize_t gap          # how far apart a phase's terms are (1, or at P = 1 or 2 the
                            # lanes of a merged channels-last row: pg_expand.h)
    const int64_t* pc
    const int64_t* pm
    Py_ssize_t max_terms    # most E rows that one grad_input row sums
    int tstore              # lanes are whole planes (small NCHW planes): store plane by plane
    int tstage              # tstore, in an output larger than the cache: items of whole
                            # planes staged and streamed
    int plane_regs          # tstore: planes up to 16 wide formed in registers (pg_plane.h)
    int fill                # one grad_output value per D row (global pooling): fill planes
    int fill_fast           # fill, with _fill_rows's arithmetic (no rounding steps, one tap
                            # at column 0, no polyphase) into rows that are one run each
    Py_ssize_t rows_cap     # E rows the scratch holds
    int scale_w
    int kind
    int rnd
    int stream
    Py_ssize_t stage64      # float64 rows of one run (L = 1, contiguous) in an output
                            # larger than the cache: the item's rows are formed in a stage
                            # of this capacity (bytes; after the E rows) and its whole lines
                            # streamed (pg_stage); 0: rows stored where they go
    const pg_item_f32* item_f32   # the whole item in C (pg_item.h: float32, 16-bit), or NULL
    const pg_fused64* fused64     # float64 region items with their E values in registers
                                  # (pg_item.h's pg_fused_avx2_f64), or NULL
    int lanes_row           # float32 / 16-bit lanes (L >= 8): grad_input rows formed
                            # straight from the grad_output rows (pg_lanes_row), no E rows
    int lanes_copy          # lanes_row, and a row small enough to be formed once in cache
                            # and copied to the rows with the same windows
    Py_ssize_t copy_min     # the fewest such rows that are copied
    int lanes_pair          # two such rows formed together (each column stored to both)
    const int64_t* lanes_crun   # lanes_row: for each column, how many from it on have the
                            # same taps (formed once, stored to each: pg_lanes_row_body), or
                            # NULL where every column's taps differ from the next one's


cdef void _expand_taps(const acc_t* grow, acc_t* erow, const int64_t* tap, Py_ssize_t m,
                       Py_ssize_t W, Py_ssize_t L, acc_t k) noexcept nogil:
    """erow[w] = k * (grow[tap[w*m]] + ... + grow[tap[w*m + m-1]]), added left to right:
    the same sums as _expand_w (padding taps add -0.0, which changes nothing), branch-free."""
    cdef Py_ssize_t iw, t
    cdef acc_t s
    if L == 1:
        if m == 1:
            for iw in range(W):
                erow[iw] = k * grow[tap[iw]]
        elif m == 2:
            for iw in range(W):
                erow[iw] = k * (grow[tap[2 * iw]] + grow[tap[2 * iw + 1]])
        elif m == 3:
            for iw in range(W):
                erow[iw] = k * (grow[tap[3 * iw]] + grow[tap[3 * iw + 1]]
                                + grow[tap[3 * iw + 2]])
        else:
            for iw in range(W):
                s = grow[tap[m * iw]]
                for t in range(1, m):
                    s = s + grow[tap[m * iw + t]]
                erow[iw] = k * s
        return
    if acc_t is float:
        pg_expand_lanes_f32(grow, erow, tap, m, W, L, k)
    else:
        pg_expand_lanes_f64(grow, erow, tap, m, W, L, k)


cdef void _expand_w(const acc_t* grow, acc_t* erow, const int64_t* lo, const int64_t* hi,
                    Py_ssize_t W, Py_ssize_t L, acc_t k) noexcept nogil:
    """erow[w] = k * (sum over ow in [lo[w], hi[w]) of grow[ow]), added in increasing ow
    (an empty range sums to +0.0)."""
    cdef Py_ssize_t iw, ow, l, a, b
    cdef acc_t s
    cdef const acc_t* src
    cdef acc_t* dst
    if L == 1:
        for iw in range(W):
            a = lo[iw]
            b = hi[iw]
            if a >= b:
                s = 0
            else:
                s = grow[a]
                for ow in range(a + 1, b):
                    s = s + grow[ow]
            erow[iw] = k * s
        return
    for iw in range(W):
        a = lo[iw]
        b = hi[iw]
        dst = erow + iw * L
        if a >= b:
            s = 0
            for l in range(L):
                dst[l] = k * s
            continue
        src = grow + a * L
        for l in range(L):
            dst[l] = src[l]
        for ow in range(a + 1, b):
            src = grow + ow * L
            for l in range(L):
                dst[l] = dst[l] + src[l]
        for l in range(L):
            dst[l] = k * dst[l]


cdef inline void _expand_cols(const acc_t* grow, acc_t* erow, const Gather* g,
                              Py_ssize_t c0, Py_ssize_t c1, acc_t k) noexcept nogil:
    """Columns [c0, c1) of the W expansion times k, through the tap table or the ranges."""
    if c1 <= c0:
        return
    if g.m:
        _expand_taps(grow, erow + c0 * g.L, g.wtap + c0 * g.m, g.m, c1 - c0, g.L, k)
    else:
        _expand_w(grow, erow + c0 * g.L, g.wlo + c0, g.whi + c0, c1 - c0, g.L, k)


cdef void _expand(const acc_t* grow, acc_t* erow, const Gather* g, acc_t* tmp,
                  acc_t k) noexcept nogil:
    """One grad_output row expanded to the input width, each sum then multiplied by k (the
    row's D and H weight): the polyphase interior where there is one, the tap table or
    ranges elsewhere (the same sums either way)."""
    if g.P == 0:
        _expand_cols(grow, erow, g, 0, g.W, k)
        return
    _expand_cols(grow, erow, g, 0, g.P * g.q0, k)
    if acc_t is float:
        pg_expand_poly_f32(grow, erow, g.P, g.q0, g.q1 - g.q0, g.pc, g.pm, g.gap, tmp, k)
    else:
        pg_expand_poly_f64(grow, erow, g.P, g.q0, g.q1 - g.q0, g.pc, g.pm, g.gap, tmp, k)
    _expand_cols(grow, erow, g, g.P * g.q1, g.W, k)


cdef struct Box:
    Py_ssize_t n, c, d0, d1, h0, h1


cdef inline Box _item_box(const Gather* g, Py_ssize_t item) noexcept nogil:
    """The (n, c) plane and the D and H row ranges of work item `item` of the gather."""
    cdef Box b
    cdef Py_ssize_t t = item // g.nbh
    b.h0 = (item % g.nbh) * g.bh
    b.h1 = min(b.h0 + g.bh, g.H)
    b.d0 = (t % g.nbd) * g.bd
    b.d1 = min(b.d0 + g.bd, g.D)
    t = t // g.nbd
    b.c = t % g.C
    b.n = t // g.C
    return b


cdef inline void _fill_rows(const store_t* gbase, store_t* xbase, const Gather* g,
                            const acc_t* wd, const acc_t* wh, const acc_t* ww,
                            Py_ssize_t d0, Py_ssize_t d1, Py_ssize_t h0,
                            Py_ssize_t h1) noexcept nogil:
    """_fill_item's arithmetic written out (g.fill_fast): a column's expansion is
    k * (its one tap, which is grad_output column 0), so rows h0..h1-1 of each D row of the
    plane at gbase / xbase are one run of one value, stored as a fill."""
    cdef Py_ssize_t idd, od
    cdef Py_ssize_t nrow = (h1 - h0) * g.W
    cdef acc_t kh = wh[g.hlo[h0]]
    cdef const store_t* g0 = gbase + g.hlo[h0] * g.gs[3]
    cdef acc_t x
    cdef store_t v
    if acc_t is float:
        if store_t is float:
            pg_fill_rows_f32(xbase + h0 * g.xs[3], g.xs[2], nrow, g0, g.gs[2], g.dlo, wd, kh,
                             ww if g.scale_w else NULL, d0, d1)
            return
        if store_t is uint16_t:
            pg_fill_rows_h16(xbase + h0 * g.xs[3], g.xs[2], nrow, g0, g.gs[2], g.dlo, wd, kh,
                             ww if g.scale_w else NULL, d0, d1, g.kind == K_BF16)
            return
    for idd in range(d0, d1):
        od = g.dlo[idd]
        if store_t is uint16_t:
            if g.kind == K_F16:
                x = pg_f16_to_f32(g0[od * g.gs[2]])
            else:
                x = pg_bf16_to_f32(g0[od * g.gs[2]])
        else:
            x = <acc_t>g0[od * g.gs[2]]
        if g.scale_w:
            x = x * ww[0]
        x = (wd[od] * kh) * x
        if store_t is uint16_t:
            if g.kind == K_F16:
                v = pg_f32_to_f16(<float>x)
            else:
                v = pg_f32_to_bf16(<float>x)
        else:
            v = <store_t>x
        pg_fill(xbase + idd * g.xs[2] + h0 * g.xs[3], &v, sizeof(store_t), nrow)


cdef void _fill_item(const store_t* go, store_t* gi, const Gather* g,
                     const acc_t* wd, const acc_t* wh, const acc_t* ww,
                     acc_t* buf, Py_ssize_t item) noexcept nogil:
    """_gather_item where every grad_output row is a single value covering the whole row
    and every input index lies in exactly one window (global pooling, Wo = Ho = 1): all
    grad_input values of a D row are the same number, computed once by the general code's
    arithmetic (load, W scale, expansion, weighted combine), then stored as a fill."""
    cdef Py_ssize_t W = g.W
    cdef Box box = _item_box(g, item)
    cdef Py_ssize_t c = box.c, n = box.n, d0 = box.d0, d1 = box.d1, h0 = box.h0, h1 = box.h1
    cdef acc_t* grow = buf + g.max_terms * (sizeof(void*) // sizeof(acc_t))
    cdef acc_t* acc = grow + (g.Wo + 2)
    cdef acc_t* E = acc + W + (W + 1) // 2
    cdef Py_ssize_t idd, ih, od, i, nrow
    cdef const store_t* gbase = go + n * g.gs[0] + c * g.gs[1]
    cdef store_t* xbase = gi + n * g.xs[0] + c * g.xs[1]
    cdef store_t* dst
    cdef store_t v
    cdef Py_ssize_t xs3 = g.xs[3], xs4 = g.xs[4]
    if g.fill_fast:
        _fill_rows(gbase, xbase, g, wd, wh, ww, d0, d1, h0, h1)
        return
    grow[1] = 0
    grow[2] = -0.0
    for idd in range(d0, d1):
        od = g.dlo[idd]
        _load_block(gbase + od * g.gs[2] + g.hlo[h0] * g.gs[3], 0, g.gs[4], 1, 1, grow,
                    g.kind, g.rnd)
        if g.scale_w:
            grow[0] = grow[0] * ww[0]
        # every column holds the same value: expand column 0 only (times its D and H
        # weight, as the general code's expansion does)
        _expand_cols(grow, E, g, 0, 1, wd[od] * wh[g.hlo[h0]])
        _store_block(E, &v, 0, 1, 1, 1, g.kind)
        dst = xbase + idd * g.xs[2] + h0 * xs3
        if xs4 == 1 and xs3 == W:
            nrow = (h1 - h0) * W
            for i in range(nrow):
                dst[i] = v
        else:
            for ih in range(h1 - h0):
                for i in range(W):
                    dst[ih * xs3 + i * xs4] = v


cdef inline void _lanes_row(void* dst, Py_ssize_t ds, Py_ssize_t nd, Py_ssize_t rs,
                            const void** rows, const Gather* g, const acc_t* ks,
                            const acc_t* ww, Py_ssize_t nr, int kind,
                            int stream) noexcept nogil:
    """One pg_lanes_row call (pg_lanes_row_f64 for float64) with the plan's taps."""
    if acc_t is double:
        pg_lanes_row_f64(dst, ds, nd, rs, rows, g.gs[4], ks, ww if g.scale_w else NULL, nr,
                         g.wtap, g.m, g.W, g.L, g.Wo, stream)
    else:
        pg_lanes_row(dst, ds, nd, rs, rows, g.gs[4], ks, ww if g.scale_w else NULL, nr,
                     g.wtap, g.m, g.W, g.L, g.Wo, kind, stream, g.lanes_crun)


cdef void _lanes_rows(const store_t* gbase, store_t* xbase, const Gather* g, const acc_t* wd,
                      const acc_t* wh, const acc_t* ww, const void** rows, store_t* rowbuf,
                      Py_ssize_t d0, Py_ssize_t d1, Py_ssize_t h0, Py_ssize_t h1) noexcept nogil:
    """A channels-last item without E rows (g.lanes_row): each grad_input row formed in
    registers from the grad_output rows of the windows covering it, read where they are
    (pg_lanes_row: the same values and sums as the E rows and their combine).  Rows with
    the same D and H windows (runs of equal dlo/dhi and hlo/hhi: adaptive windows, kernel
    = stride) are equal: a block of two is formed together (each column formed once and
    stored to both rows, pg_lanes_row's nd); with g.lanes_copy, a block of at least
    g.copy_min such rows has its row formed once and copied to its rows
    (pg_lanes_copy): formed in the block's first row, or, where the plan streams, in rowbuf
    (the thread's scratch, so that no row is read for ownership) and streamed to all."""
    cdef Py_ssize_t W = g.W, L = g.L, es = sizeof(store_t)
    cdef Py_ssize_t od, oh, idd, ih, ed, eh, jd, jh, a, b, p, q, nr, iw
    cdef store_t* dst
    cdef acc_t ks[8]
    cdef int kind = 0 if store_t is not uint16_t else (1 if g.kind == K_F16 else 2)
    idd = d0
    while idd < d1:
        a = g.dlo[idd]
        b = g.dhi[idd]
        ed = idd + 1
        while ed < d1 and g.dlo[ed] == a and g.dhi[ed] == b:
            ed += 1
        ih = h0
        while ih < h1:
            p = g.hlo[ih]
            q = g.hhi[ih]
            eh = ih + 1
            while eh < h1 and g.hlo[eh] == p and g.hhi[eh] == q:
                eh += 1
            nr = 0
            if q > p:
                for od in range(a, b):
                    for oh in range(p, q):
                        rows[nr] = gbase + od * g.gs[2] + oh * g.gs[3]
                        ks[nr] = wd[od] * wh[oh]
                        nr += 1
            dst = xbase + idd * g.xs[2] + ih * g.xs[3]
            if nr == 0:   # no window covers the rows: +0.0, all bits clear in every dtype
                for jd in range(idd, ed):
                    for jh in range(ih, eh):
                        dst = xbase + jd * g.xs[2] + jh * g.xs[3]
                        for iw in range(W):
                            memset(dst + iw * g.xs[4], 0, L * es)
            elif (ed - idd) * (eh - ih) == 2 and g.lanes_pair:
                # two rows formed together: each column formed once and stored to both
                # (two rows of one plane, or one row in two consecutive planes)
                if eh - ih == 1:
                    _lanes_row(dst, g.xs[4], ed - idd, g.xs[2], rows, g, ks, ww, nr, kind,
                               g.stream)
                else:
                    for jd in range(idd, ed):
                        _lanes_row(xbase + jd * g.xs[2] + ih * g.xs[3], g.xs[4], eh - ih,
                                   g.xs[3], rows, g, ks, ww, nr, kind, g.stream)
            elif not g.lanes_copy or (ed - idd) * (eh - ih) < g.copy_min:
                for jd in range(idd, ed):
                    for jh in range(ih, eh):
                        _lanes_row(xbase + jd * g.xs[2] + jh * g.xs[3], g.xs[4], 1, 0,
                                   rows, g, ks, ww, nr, kind, g.stream)
            elif g.stream:
                _lanes_row(rowbuf, L, 1, 0, rows, g, ks, ww, nr, kind, 0)
                for jd in range(idd, ed):
                    for jh in range(ih, eh):
                        pg_lanes_copy(<char*>(xbase + jd * g.xs[2] + jh * g.xs[3]),
                                      g.xs[4] * es, <const char*>rowbuf, L * es, W, L * es, 1)
            else:
                _lanes_row(dst, g.xs[4], 1, 0, rows, g, ks, ww, nr, kind, 0)
                for jd in range(idd, ed):
                    for jh in range(ih, eh):
                        if jd != idd or jh != ih:
                            pg_lanes_copy(<char*>(xbase + jd * g.xs[2] + jh * g.xs[3]),
                                          g.xs[4] * es, <const char*>dst, g.xs[4] * es, W,
                                          L * es, 0)
            ih = eh
        idd = ed


cdef inline bint _load_scaled(acc_t* grow, const acc_t* src, const Gather* g, const acc_t* ww,
                              Py_ssize_t Wo, Py_ssize_t L) noexcept nogil:
    """A grad_output row stored in the accumulation type loaded and W-scaled in one pass
    (the same products as _load_block and then the weights); False where that does not
    apply (cube rounding, strided lanes, one lane without W weights or not contiguous)."""
    if g.rnd != R_NONE:
        return False
    if L == 1 and g.scale_w and g.gs[4] == 1:
        if acc_t is float:
            pg_mul_f32(grow, src, ww, Wo)
        else:
            pg_mul_f64(grow, src, ww, Wo)
        return True
    if L > 1 and g.gs[5] == 1:
        if acc_t is float:
            pg_load_lanes_f32(grow, src, g.gs[4], ww if g.scale_w else NULL, Wo, L)
        else:
            pg_load_lanes_f64(grow, src, g.gs[4], ww if g.scale_w else NULL, Wo, L)
        return True
    return False


cdef inline bint _item_form(const store_t* gbase, store_t* xbase, const Gather* g,
                            const acc_t* wd, const acc_t* wh, const acc_t* ww,
                            const acc_t** rows, acc_t* grow, acc_t* acc, acc_t* E, acc_t* S,
                            acc_t* P, Py_ssize_t d0, Py_ssize_t d1, Py_ssize_t h0,
                            Py_ssize_t h1) noexcept nogil:
    """Run the item in the C form its plan chose (GatherChoice: the C item, float64 E
    values in registers, lanes, planes in registers) where that form takes it: True if
    it did, False to leave it to the rows below."""
    cdef pg_plane_args pa
    cdef Py_ssize_t rl = g.W * g.L
    if store_t is float:
        if acc_t is float:
            if g.item_f32 != NULL:
                pg_item_f32_run(g.item_f32, gbase, xbase, d0, d1, h0, h1, grow, E, rows, acc)
                return True
    if store_t is double:
        if acc_t is double:
            if (g.fused64 != NULL and (d1 - d0 == 1 or g.xs[2] == (h1 - h0) * rl)
                    and pg_fused_f64_run(g.fused64, gbase, xbase, d0, d1, h0, h1, E)):
                return True
    if store_t is uint16_t:
        if acc_t is float:
            if g.item_f32 != NULL and pg_item_h16_run(g.item_f32, gbase, xbase, d0, d1, h0, h1,
                                                      grow, E, rows, acc, g.kind == K_BF16):
                return True
    if (acc_t is double and store_t is double) or (acc_t is float and store_t is not double):
        if g.lanes_row:
            # the row buffer of streamed blocks: after the row pointers, 64-byte aligned
            _lanes_rows(gbase, xbase, g, wd, wh, ww, <const void**>rows,
                        <store_t*>((<uintptr_t>(rows + g.max_terms) + 63) & ~(<uintptr_t>63)),
                        d0, d1, h0, h1)
            return True
    if acc_t is float:
        if store_t is not double:
            if g.plane_regs:
                # small planes one at a time, each row in registers (pg_plane.h)
                pa.go = gbase
                pa.gi = xbase
                pa.L, pa.gps, pa.gs2, pa.gs3 = g.L, g.gs[5], g.gs[2], g.gs[3]
                pa.xps, pa.xs2, pa.xs3 = g.xs[5], g.xs[2], g.xs[3]
                pa.W, pa.Wo, pa.m, pa.tap = g.W, g.Wo, g.m, g.wtap
                pa.dlo, pa.dhi, pa.hlo, pa.hhi = g.dlo, g.dhi, g.hlo, g.hhi
                pa.d0, pa.d1, pa.h0, pa.h1 = d0, d1, h0, h1
                pa.wd, pa.wh, pa.ww = wd, wh, (ww if g.scale_w else NULL)
                pa.kind, pa.stream = g.kind, g.tstage
                # its E rows after the stage P (scratch_elems)
                pa.E = P + g.bh * rl
                pa.E_elems = g.rows_cap * 16 * min(g.L, PG_PLANE_CH)
                # the stage: S, and T's first row past it (a last store's spill)
                pa.stage = S
                pa.stage_bytes = (g.bh * rl + (g.Wo + 2) * g.L) * sizeof(float)
                if pg_plane_item(&pa):
                    return True
    return False


cdef inline void _expand_rows(const store_t* gbase, const Gather* g, const acc_t* wd,
                              const acc_t* wh, const acc_t* ww, acc_t* grow, acc_t* acc,
                              acc_t* E, acc_t* T, Py_ssize_t od0, Py_ssize_t od1,
                              Py_ssize_t oh0, Py_ssize_t oh1) noexcept nogil:
    """The item's grad_output rows -> E rows: each row scaled by ww per output column,
    expanded, then multiplied by its D and H weight (once here, not in every grad_input
    row using it)."""
    cdef Py_ssize_t L = g.L, Wo = g.Wo, rl = g.W * g.L
    cdef Py_ssize_t noh = oh1 - oh0 if oh1 > oh0 else 0
    cdef Py_ssize_t od, oh, ow, l
    cdef acc_t s
    cdef acc_t* erow
    cdef bint fused, tpre = False
    # two slots past the row for the tap tables: +0.0 (an empty cover) and -0.0 (padding)
    for l in range(L):
        grow[Wo * L + l] = 0
        grow[(Wo + 1) * L + l] = -0.0
    # lanes that are planes (small NCHW planes, one D row): the item's grad_output rows,
    # contiguous in each plane, gathered at once eight planes by eight values through a
    # transpose, each row with its two slots after it (rows Wo + 2 positions apart)
    if acc_t is float:
        if store_t is not double:
            if (g.tstore and od1 > od0 and noh > 0 and g.gs[4] == 1 and g.gs[3] == Wo
                    and g.rnd == R_NONE):
                # each D row's grad_output rows at once (rows of one D row follow each
                # other in a plane), after the rows of the D rows before it
                for od in range(od0, od1):
                    tpre = pg_tload(T + (od - od0) * noh * (Wo + 2) * L,
                                    gbase + od * g.gs[2] + oh0 * g.gs[3], g.gs[5], noh * Wo,
                                    L, ww if g.scale_w else NULL, Wo, Wo + 2, g.kind) != 0
                    if not tpre:
                        break
                if tpre:
                    for oh in range((od1 - od0) * noh):
                        for l in range(L):
                            T[(oh * (Wo + 2) + Wo) * L + l] = 0
                            T[(oh * (Wo + 2) + Wo + 1) * L + l] = -0.0
    for od in range(od0, od1):
        for oh in range(oh0, oh1):
            erow = E + ((od - od0) * noh + (oh - oh0)) * rl
            if tpre:
                # the row, its sentinel slots set, where pg_tload put it
                _expand(T + ((od - od0) * noh + oh - oh0) * (Wo + 2) * L, erow, g, acc,
                        wd[od] * wh[oh])
                continue
            fused = False
            if (store_t is float and acc_t is float) or (store_t is double and acc_t is double):
                fused = _load_scaled(grow, <const acc_t*>(gbase + od * g.gs[2] + oh * g.gs[3]),
                                     g, ww, Wo, L)
            if store_t is uint16_t:
                if acc_t is float:
                    if L == 1 and g.gs[4] == 1:
                        # widen and W scale in one pass (the same values)
                        fused = pg_load_h16(grow, gbase + od * g.gs[2] + oh * g.gs[3],
                                            ww if g.scale_w else NULL, Wo,
                                            g.kind == K_BF16) != 0
                    elif L > 1 and g.gs[5] == 1:
                        fused = pg_load_lanes_h16(grow, gbase + od * g.gs[2] + oh * g.gs[3],
                                                  g.gs[4], ww if g.scale_w else NULL, Wo, L,
                                                  g.kind == K_BF16) != 0
            if not fused:
                if L == 1:
                    _load_block(gbase + od * g.gs[2] + oh * g.gs[3], 0, g.gs[4], 1, Wo,
                                grow, g.kind, g.rnd)
                else:
                    _load_block(gbase + od * g.gs[2] + oh * g.gs[3], g.gs[4], g.gs[5], Wo, L,
                                grow, g.kind, g.rnd)
                if g.scale_w:
                    if L == 1:
                        if acc_t is float:
                            pg_mulin_f32(grow, ww, Wo)
                        else:
                            for ow in range(Wo):
                                grow[ow] = grow[ow] * ww[ow]
                    else:
                        for ow in range(Wo):
                            s = ww[ow]
                            for l in range(L):
                                grow[ow * L + l] = grow[ow * L + l] * s
            _expand(grow, erow, g, acc, wd[od] * wh[oh])


cdef inline void _store_planes(store_t* xbase, const Gather* g, const acc_t* S, acc_t* P,
                               Py_ssize_t idd, Py_ssize_t h0, Py_ssize_t h1) noexcept nogil:
    """tstore: one D row of the item's grad_input rows, kept in S with C planes as lanes,
    stored to the planes."""
    cdef Py_ssize_t W = g.W, L = g.L, rl = g.W * g.L
    cdef Py_ssize_t ih, ow, l, l0, l1
    cdef const acc_t* src
    cdef store_t* dst
    if acc_t is float:
        if store_t is not double:
            # rows that follow each other in every plane: eight planes by eight values
            # through a transpose; whole planes that follow each other in an output larger
            # than the cache (tstage) go through the stage P and out as one streamed run
            # (no read of the lines they replace)
            if g.xs[4] == 1 and g.xs[3] == W:
                if (g.tstage and h0 == 0 and h1 == g.H and g.xs[5] == g.H * W
                        and pg_tstore(P, g.H * W, S, g.H * W, L, g.kind)):
                    if store_t is float:
                        pg_stream_f32(xbase + idd * g.xs[2], <const float*>P, L * g.H * W)
                    else:
                        pg_stream_u16(xbase + idd * g.xs[2], <const uint16_t*>P, L * g.H * W)
                    return
                if pg_tstore(xbase + idd * g.xs[2] + h0 * g.xs[3], g.xs[5], S, (h1 - h0) * W,
                             L, g.kind):
                    return
    # lane l is plane c = l: store 16 planes at a time, reading one cache line of lanes per
    # element and writing within those planes only
    for l0 in range(0, L, 16):
        l1 = min(l0 + 16, L)
        for ih in range(h0, h1):
            for ow in range(W):
                src = S + (ih - h0) * rl + ow * L
                dst = xbase + idd * g.xs[2] + ih * g.xs[3] + ow * g.xs[4]
                for l in range(l0, l1):
                    _store1(dst + l * g.xs[5], src[l], g.kind)


cdef void _gather_item(const store_t* go, store_t* gi, const Gather* g,
                       const acc_t* wd, const acc_t* wh, const acc_t* ww,
                       acc_t* buf, Py_ssize_t item) noexcept nogil:
    """One work item of the separable gather: its block of grad_input rows, in the plan's
    C form where that takes it, else as E rows (_expand_rows) summed per row here."""
    cdef Py_ssize_t W = g.W, L = g.L, Wo = g.Wo
    cdef Py_ssize_t rl = W * L
    cdef Box box = _item_box(g, item)
    cdef Py_ssize_t c = box.c, n = box.n, d0 = box.d0, d1 = box.d1, h0 = box.h0, h1 = box.h1
    cdef Py_ssize_t od0 = g.dlo[d0], od1 = g.dhi[d1 - 1]
    cdef Py_ssize_t oh0 = g.hlo[h0], oh1 = g.hhi[h1 - 1]
    cdef Py_ssize_t noh = oh1 - oh0 if oh1 > oh0 else 0
    # scratch: row pointers | grow row + 2 slots | acc row | 16-bit row | E rows
    cdef const acc_t** rows = <const acc_t**>buf
    cdef acc_t* grow = buf + g.max_terms * (sizeof(void*) // sizeof(acc_t))
    cdef acc_t* acc = grow + (Wo + 2) * L
    cdef uint16_t* tmp16 = <uint16_t*>(acc + rl)
    cdef acc_t* E = acc + rl + (rl + 1) // 2
    # tstore: the item's grad_input rows, kept until they are stored plane by plane
    cdef acc_t* S = E + g.rows_cap * rl
    # tstore: the item's grad_output rows in lane order (pg_tload), after its rows
    cdef acc_t* T = S + g.bh * rl
    cdef acc_t* P = T + g.rows_cap * (Wo + 2) * L   # and a stage of S's size
    cdef Py_ssize_t od, oh, idd, ih, a, b, p, q
    cdef Py_ssize_t nr
    cdef const acc_t* src
    cdef store_t* dst
    cdef pg_stage st
    cdef bint staged = False
    # rows of grad_input that are contiguous are formed right in place
    cdef bint direct = (L == 1 and g.xs[4] == 1) or (g.xs[5] == 1 and g.xs[4] == L)
    cdef const store_t* gbase = go + n * g.gs[0] + c * g.gs[1]
    cdef store_t* xbase = gi + n * g.xs[0] + c * g.xs[1]
    if _item_form(gbase, xbase, g, wd, wh, ww, rows, grow, acc, E, S, P, d0, d1, h0, h1):
        return
    _expand_rows(gbase, g, wd, wh, ww, grow, acc, E, T, od0, od1, oh0, oh1)
    # grad_input rows: sums of the E rows that cover them, stored once; float64 rows that
    # follow each other in memory (one D row, or whole planes) through the stage
    if store_t is double:
        if acc_t is double:
            if g.stage64 and g.xs[3] == rl and (d1 - d0 == 1 or g.xs[2] == (h1 - h0) * rl):
                pg_stage_begin(&st, xbase + d0 * g.xs[2] + h0 * g.xs[3], S, g.stage64)
                staged = True
    for idd in range(d0, d1):
        a = g.dlo[idd]
        b = g.dhi[idd]
        for ih in range(h0, h1):
            p = g.hlo[ih]
            q = g.hhi[ih]
            nr = 0
            if q > p:
                # the E rows of one D row are consecutive: od-major, oh-minor order
                for od in range(a, b):
                    src = E + ((od - od0) * noh + (p - oh0)) * rl
                    for oh in range(q - p):
                        rows[nr + oh] = src + oh * rl
                    nr += q - p
            if store_t is double:
                if acc_t is double:
                    if staged:
                        pg_stage_combine_f64(&st, rows, nr, rl)
                        continue
            if g.tstore:
                if nr == 0:
                    memset(S + (ih - h0) * rl, 0, rl * sizeof(acc_t))
                elif acc_t is float:
                    pg_combine_f32(S + (ih - h0) * rl, rows, nr, rl, 0)
                else:
                    pg_combine_f64(S + (ih - h0) * rl, rows, nr, rl, 0)
                continue
            dst = xbase + idd * g.xs[2] + ih * g.xs[3]
            if nr == 0:
                memset(acc, 0, rl * sizeof(acc_t))
                _store_row(acc, dst, g.xs[4], g.xs[5], W, L, g.kind, 0, tmp16)
                continue
            if store_t is float:
                if acc_t is float:
                    if direct:
                        pg_combine_f32(dst, rows, nr, rl, g.stream)
                        continue
            if store_t is double:
                if acc_t is double:
                    if direct:
                        pg_combine_f64(dst, rows, nr, rl, g.stream)
                        continue
            if store_t is uint16_t:
                if acc_t is float:
                    if direct and not g.stream and pg_combine_h16(dst, rows, nr, rl,
                                                                  g.kind == K_BF16):
                        continue
                    # streamed: the rounded row formed in tmp16 (in cache), then streamed
                    # out, as _store_row would after a float32 combine (the same bits)
                    if (direct and g.stream and rl * 2 >= 256
                            and pg_combine_h16(tmp16, rows, nr, rl, g.kind == K_BF16)):
                        pg_stream_u16(dst, tmp16, rl)
                        continue
            if acc_t is float:
                pg_combine_f32(acc, rows, nr, rl, 0)
            else:
                pg_combine_f64(acc, rows, nr, rl, 0)
            _store_row(acc, dst, g.xs[4], g.xs[5], W, L, g.kind, g.stream, tmp16)
        if g.tstore:
            _store_planes(xbase, g, S, P, idd, h0, h1)
    if store_t is double:
        if acc_t is double:
            if staged:
                pg_stage_finish(&st)


cdef void _gather_run(const store_t* go, store_t* gi, const Gather* g,
                      const acc_t* wd, const acc_t* wh, const acc_t* ww,
                      acc_t* scratch, Py_ssize_t per_thread, int nt) noexcept nogil:
    cdef Py_ssize_t n_items = g.N * g.C * g.nbd * g.nbh
    cdef Py_ssize_t item
    cdef acc_t* buf = scratch
    if nt <= 1:   # no parallel region to open (a few microseconds for a small call)
        for item in range(n_items):
            if g.fill:
                _fill_item(go, gi, g, wd, wh, ww, buf, item)
            else:
                _gather_item(go, gi, g, wd, wh, ww, buf, item)
        pg_store_fence()
        return
    with parallel(num_threads=nt):
        buf = scratch + threadid() * per_thread
        for item in prange(n_items, schedule='static'):
            if g.fill:
                _fill_item(go, gi, g, wd, wh, ww, buf, item)
            else:
                _gather_item(go, gi, g, wd, wh, ww, buf, item)
        pg_store_fence()


cdef inline void _fill_strides(Py_ssize_t* dst, arr):
    cdef Py_ssize_t k, item = arr.itemsize
    for k in range(6):
        dst[k] = arr.strides[k] // item


cdef class AvgGatherKernel(PlannedKernel):
    """A planned average-pool gradient: the tables, blocks and typed views of one call.

    Built once at planning; ``run`` does no Python-level allocation of arrays and takes
    its per-thread scratch from the caller's workspace.
    """
    cdef Gather g
    cdef pg_item_f32 it
    cdef pg_fused64 f64
    cdef object _keep
    cdef const float[:, :, :, :, :, :] go_f
    cdef float[:, :, :, :, :, :] gi_f
    cdef const double[:, :, :, :, :, :] go_d
    cdef double[:, :, :, :, :, :] gi_d
    cdef const uint16_t[:, :, :, :, :, :] go_h
    cdef uint16_t[:, :, :, :, :, :] gi_h
    cdef const float[::1] wd_f, wh_f, ww_f
    cdef const double[::1] wd_d, wh_d, ww_d

    def __init__(self, go6, gi6, int kind, int rnd, geometry, choice):
        # geometry: _plan.gather_geometry's tables and blocking; choice: _plan.gather_choice
        tables, taps, runs, poly, weights, bd, bh, rows, terms, scale_w = geometry
        self._keep = (go6, gi6, tables, taps, runs, poly, weights, choice.crun)
        self.choice = choice
        self._fill_gather(go6, gi6, kind, rnd, geometry, choice)
        self._set_arrays(go6, gi6, kind, weights)
        g = &self.g
        g.item_f32 = NULL
        g.fused64 = NULL
        if choice.fused64:
            self._fill_fused64(poly, scale_w, choice)
            g.fused64 = &self.f64
        if choice.c_item:
            self._fill_item(gi6, kind, poly, runs, rows, scale_w, choice)
            g.item_f32 = &self.it
        self.n_items = g.N * g.C * g.nbd * g.nbh
        self.traffic = go6.nbytes + gi6.nbytes
        self._size_scratch(gi6, kind, rows, bh)

    cdef _fill_gather(self, go6, gi6, int kind, int rnd, geometry, choice):
        """The Gather struct: shapes, strides, tables and the choice's flags."""
        cdef const int64_t[::1] t
        tables, taps, runs, poly, weights, bd, bh, rows, terms, scale_w = geometry
        g = &self.g
        g.N, g.C, g.D, g.H, g.W, g.L = gi6.shape
        g.Wo = go6.shape[4]
        g.bd, g.bh = bd, bh
        g.nbd = (g.D + bd - 1) // bd
        g.nbh = (g.H + bh - 1) // bh
        g.kind, g.rnd, g.scale_w, g.stream = kind, rnd, scale_w, choice.stream
        g.max_terms = max(terms, 3)   # pg_item_cover sets three row pointers at once
        g.rows_cap = rows
        g.tstore, g.tstage = choice.tstore, choice.tstage
        g.fill, g.fill_fast = choice.fill, choice.fill_fast
        g.plane_regs = choice.plane
        g.stage64 = choice.stage64
        g.lanes_row, g.lanes_copy = choice.lanes, choice.lanes_copy
        g.lanes_pair, g.copy_min = choice.lanes_pair, choice.copy_min
        g.lanes_crun = NULL
        if choice.crun is not None:
            t = choice.crun; g.lanes_crun = &t[0]
        g.m = 0 if taps is None else taps.shape[0] // g.W
        if g.m:
            t = taps; g.wtap = &t[0]
        g.P, g.gap = 0, 1
        if poly is not None and g.L == 1:
            g.q0, g.q1 = poly[0], poly[1]
            t = poly[2]; g.pc = &t[0]
            t = poly[3]; g.pm = &t[0]
            g.P = poly[2].shape[0]
            g.gap = poly[7]
        _fill_strides(g.gs, go6)
        _fill_strides(g.xs, gi6)
        dlo, dhi, hlo, hhi, wlo, whi = tables
        t = dlo; g.dlo = &t[0]
        t = dhi; g.dhi = &t[0]
        t = hlo; g.hlo = &t[0]
        t = hhi; g.hhi = &t[0]
        t = wlo; g.wlo = &t[0]
        t = whi; g.whi = &t[0]

    cdef _set_arrays(self, go6, gi6, int kind, weights):
        """The typed views of the arrays and weights, by storage kind."""
        wd, wh, ww = weights
        if kind == K_F64:
            self.go_d = go6
            self.gi_d = gi6
            self.p_go = <char*>&self.go_d[0, 0, 0, 0, 0, 0]
            self.p_gi = <char*>&self.gi_d[0, 0, 0, 0, 0, 0]
            self.wd_d, self.wh_d, self.ww_d = wd, wh, ww
            return
        if kind == K_F32:
            self.go_f = go6
            self.gi_f = gi6
            self.p_go = <char*>&self.go_f[0, 0, 0, 0, 0, 0]
            self.p_gi = <char*>&self.gi_f[0, 0, 0, 0, 0, 0]
        else:
            self.go_h = go6
            self.gi_h = gi6
            self.p_go = <char*>&self.go_h[0, 0, 0, 0, 0, 0]
            self.p_gi = <char*>&self.gi_h[0, 0, 0, 0, 0, 0]
        self.wd_f, self.wh_f, self.ww_f = wd, wh, ww

    cdef _fill_fused64(self, poly, bint scale_w, choice):
        """The float64 register form's struct (pg_item.h's pg_fused_avx2_f64)."""
        g = &self.g
        self.f64.P, self.f64.W, self.f64.Wo = g.P, g.W, g.Wo
        self.f64.gs2, self.f64.gs3, self.f64.xs2, self.f64.xs3 = (
            g.gs[2], g.gs[3], g.xs[2], g.xs[3])
        self.f64.qx1, self.f64.q1, self.f64.epad = poly[5], g.q1, poly[6]
        self.f64.dlo, self.f64.dhi, self.f64.hlo, self.f64.hhi = g.dlo, g.dhi, g.hlo, g.hhi
        self.f64.pc, self.f64.pm = g.pc, g.pm
        self.f64.wd, self.f64.wh = &self.wd_d[0], &self.wh_d[0]
        self.f64.ww = &self.ww_d[0] if scale_w else NULL
        self.f64.strips = choice.strips
        self.f64.nt = choice.fused_nt

    cdef _fill_item(self, gi6, int kind, poly, runs, Py_ssize_t rows, bint scale_w,
                    choice):
        """The C item's struct (pg_item.h: float32 and 16-bit rows of one lane)."""
        cdef const int64_t[::1] t
        g = &self.g
        it = &self.it
        it.W, it.Wo = g.W, g.Wo
        it.gs2, it.gs3, it.xs2, it.xs3 = g.gs[2], g.gs[3], g.xs[2], g.xs[3]
        it.dlo, it.dhi, it.hlo, it.hhi = g.dlo, g.dhi, g.hlo, g.hhi
        it.wtap, it.m = g.wtap, g.m
        it.P, it.q0, it.q1, it.pc, it.pm = g.P, g.q0, g.q1, g.pc, g.pm
        it.gap = g.gap
        it.qx0, it.qx1 = (poly[4], poly[5]) if g.P else (g.q0, g.q1)
        it.epad = poly[6] if g.P else 2
        it.wd, it.wh = &self.wd_f[0], &self.wh_f[0]
        it.ww = &self.ww_f[0] if scale_w else NULL
        it.region = choice.item_region
        it.single, it.dup2, it.pair_nt = choice.single, choice.dup2, choice.pair_nt
        # the region's stage (pg_stream.h), after the E rows: STAGE_BYTES, or a row and a
        # line if that is more
        it.stage = rows * g.W
        it.stage_cap = max(STAGE_BYTES, (g.W * 4 + 64 + 63) // 64 * 64)
        t = runs[1]; it.hrun = &t[0]
        t = runs[6]; it.hstep = &t[0]
        it.hsteps = bool(np.any(runs[6] > 1))
        # rows of a step run formed together at most this many a time (the stage's)
        it.step_rows = max(1, (it.stage_cap - 64) // (g.W * 4))
        it.wrun, it.nrun = NULL, 0
        it.sent = runs[2]
        it.spread = it.spread32 = NULL
        it.spread_wide = it.spread32_wide = 0
        if choice.spread and kind != K_F32:
            t = runs[3][0]; it.spread = &t[0]
            it.spread_wide = runs[3][1]
        if choice.spread and kind == K_F32:
            t = runs[4][0]; it.spread32 = &t[0]
            it.spread32_wide = runs[4][1]
        it.tspread, it.tspread_wide = NULL, 0
        if runs[5] is not None:
            t = runs[5][0]; it.tspread = &t[0]
            it.tspread_wide = runs[5][1]
        if runs[0] is not None:
            t = runs[0]; it.wrun = &t[0]
            it.nrun = runs[0].shape[0] - 1
        it.gblk_rows = g.P == 2 and g.Wo <= GROW_BLOCK_WO
        # the E-row formers' grow block (pg_item.h), after the E rows and the stage
        it.gblk = rows * g.W + ((PG_STAGE_MEM(it.stage_cap) + 3) // 4 if it.region else 0)

    cdef _size_scratch(self, gi6, int kind, Py_ssize_t rows, Py_ssize_t bh):
        """Scratch a thread: row pointers, grow row + 2 sentinel slots, acc row, 16-bit
        staging row, E rows (see _gather_item), and what the chosen form adds; the rows
        formed without E rows use the row pointers only, and a row and a line where they
        stream the rows they form once and copy."""
        g = &self.g
        it = &self.it
        cdef Py_ssize_t n
        if g.lanes_row:
            n = (g.max_terms * (sizeof(void*) // 4)
                 + ((g.W * g.L * gi6.itemsize + 64) // 4 if g.lanes_copy and g.stream else 0))
        else:
            n = (g.max_terms * (sizeof(void*) // (8 if kind == K_F64 else 4))
                 + (g.Wo + 2) * g.L + g.W * g.L + (g.W * g.L + 1) // 2 + rows * g.W * g.L
                 + ((2 * bh * g.W + rows * (g.Wo + 2)) * g.L if g.tstore else 0)
                 + (rows * 16 * min(g.L, PG_PLANE_CH) if g.plane_regs else 0)
                 + ((PG_STAGE_MEM(it.stage_cap) + 3) // 4
                    if g.item_f32 != NULL and it.region else 0)
                 + ((PG_STAGE_MEM(g.stage64) + 7) // 8 if g.stage64 else 0))
            if g.fused64 != NULL:   # the register form's grow block, at the E rows
                n += max(0, rows * (g.Wo + 2 * self.f64.epad) + self.f64.epad - rows * g.W)
                if self.f64.strips:   # ... and the strips' T rows after it
                    n += 8 * (bh + 1) + 4
            if g.item_f32 != NULL and (g.P == 1 or g.P == 2):
                n += it.epad + (rows if it.gblk_rows else 1) * (g.Wo + 2 * it.epad)
        # whole pairs of cache lines a thread (threads sharing a line take turns at it)
        self.scratch_elems = (n + 31) // 32 * 32
        self.scratch_bytes = self.scratch_elems * (8 if kind == K_F64 else 4)

    @property
    def c_item(self):
        """The C item's name (_plan.GatherChoice.item)."""
        return self.choice.item

    @property
    def strips(self):
        """Whether float64 planes go in strips (pg_fused1_strips_f64)."""
        return self.choice.strips

    cdef _release(self):
        self.go_f = self.go_d = self.go_h = None
        self.gi_f = self.gi_d = self.gi_h = None
        self._keep = self._keep[2:]

    cdef Py_ssize_t _execute(self, char* scratch, int nt, char* go, char* gi,
                             char* ind) except -1:
        if self.traffic >= C_NOGIL_BYTES:
            with nogil:
                self._launch(scratch, nt, go, gi)
        else:
            self._launch(scratch, nt, go, gi)
        return 0

    cdef void _launch(self, char* scratch, int nt, char* go, char* gi) noexcept nogil:
        cdef Gather* g = &self.g
        cdef Py_ssize_t per = self.scratch_elems
        if g.kind == K_F64:
            _gather_run(<const double*>go, <double*>gi, g, &self.wd_d[0], &self.wh_d[0],
                        &self.ww_d[0], <double*>scratch, per, nt)
        elif g.kind == K_F32:
            _gather_run(<const float*>go, <float*>gi, g, &self.wd_f[0], &self.wh_f[0],
                        &self.ww_f[0], <float*>scratch, per, nt)
        else:
            _gather_run(<const uint16_t*>go, <uint16_t*>gi, g, &self.wd_f[0],
                        &self.wh_f[0], &self.ww_f[0], <float*>scratch, per, nt)


# --------------------------------------------------------------------------------------
# max-pool gradient: scatter of grad_output to the argmax positions (AdaptiveMaxPool2dBackward)
# --------------------------------------------------------------------------------------
#
# A work item owns one block of rows of one (n, c) plane (all C lanes in channels-last): it
# walks every (oh, ow) of the plane in increasing order adding the values whose index falls
# inside its accumulation block (zero when the item starts: each thread clears its block
# once, and every item leaves it cleared), and stores the block once.  Repeated indices
# therefore accumulate in increasing output order whatever the thread count.  Where the
# windows tile the plane and every index of a plane lies in its own window, the plane is
# written as a gather instead (_window_item; channels-last: _lwindow_run), with the bits
# of the scatter.

cdef enum:
    # past a block's bh rows: up to 7 values of shift (pg_flush_shift), then 8 slots where
    # the AVX2 scatter adds values that fall outside the block (never stored)
    SCATTER_SLACK = 16
    SCATTER_DUMMY = 8


cdef struct Scatter:
    Py_ssize_t N, C, H, W, L, Ho, Wo
    # H and Ho count the rows of a whole (D, H) volume; a row r of grad_input lies at
    # (r // Hd, r % Hd) on its (D, H) axes, an output row at (r // Hod, r % Hod): Hd == H
    # (Hod == Ho) where D and H merge into one axis of rows (2-D operators, contiguous
    # volumes), which the forms that assume rows following each other require
    Py_ssize_t Hd, Hod
    Py_ssize_t bh, nbh
    Py_ssize_t gs[6]
    Py_ssize_t xs[6]
    Py_ssize_t js[6]
    int kind
    int stream
    int region      # stream each item's block of rows through the line writer
    int window          # the gather form (_window_item) where a plane's indices allow it
    int lwindow         # its channels-last form (_lwindow_run)
    int lmixed          # ... with grad_output and indices in NCHW planes (lanes apart)
    Py_ssize_t kh       # its windows' height (their width is 2; channels-last: kw)
    Py_ssize_t kw
    const int64_t* flat # its flat rows' table (_plan.window_spread), or NULL: lanes
    int flat_wide
    Py_ssize_t w_at     # its staging rows, in values from a thread's scratch
    int rows_rng        # planes split into blocks of rows: the index check records each
                        # output row's smallest and largest index (shared workspace), and
                        # a block skips the output rows with none in it


cdef inline Py_ssize_t _row_at(Py_ssize_t r, Py_ssize_t per, const Py_ssize_t* s) noexcept nogil:
    """Element offset of row r of a (D, H) volume of `per` rows per D step (strides s)."""
    if r < per:
        return r * s[3]
    return (r // per) * s[2] + (r % per) * s[3]


cdef inline void _acc(acc_t* b, acc_t v) noexcept nogil:
    """b[0] += v, the total the first operand (pg_scatter.h's pg_acc for float32 sums)."""
    if acc_t is float:
        pg_acc(b, v)
    else:
        b[0] = b[0] + v


cdef inline void _scatter_row(acc_t* buf, const store_t* gp, Py_ssize_t gs,
                              const idx_t* jp, Py_ssize_t js, Py_ssize_t n, uint64_t lo,
                              uint64_t span, int kind, Py_ssize_t L) noexcept nogil:
    """Add the n grad values gp[i*gs] of one output row (L == 1) or of one output pixel's
    n == L lanes into the block buf, which holds plane positions [lo, lo + span) (lane i
    of position x at (x - lo) * L + i).  One compare per index, in uint64_t arithmetic
    (which wraps around: a bad index never lands inside the block); the dtype is chosen
    outside the loops."""
    cdef Py_ssize_t i
    cdef uint64_t r
    if L == 1:
        if store_t is uint16_t:
            if kind == K_F16:
                for i in range(n):
                    r = <uint64_t>jp[i * js] - lo
                    if r < span:
                        _acc(buf + r, pg_f16_to_f32(gp[i * gs]))
            else:
                for i in range(n):
                    r = <uint64_t>jp[i * js] - lo
                    if r < span:
                        _acc(buf + r, pg_bf16_to_f32(gp[i * gs]))
        else:
            for i in range(n):
                r = <uint64_t>jp[i * js] - lo
                if r < span:
                    _acc(buf + r, <acc_t>gp[i * gs])
        return
    if store_t is uint16_t:
        if kind == K_F16:
            for i in range(n):
                r = <uint64_t>jp[i * js] - lo
                if r < span:
                    _acc(buf + r * L + i, pg_f16_to_f32(gp[i * gs]))
        else:
            for i in range(n):
                r = <uint64_t>jp[i * js] - lo
                if r < span:
                    _acc(buf + r * L + i, pg_bf16_to_f32(gp[i * gs]))
    else:
        for i in range(n):
            r = <uint64_t>jp[i * js] - lo
            if r < span:
                _acc(buf + r * L + i, <acc_t>gp[i * gs])


cdef void _scatter_item(const store_t* go, const idx_t* ind, store_t* gi, const Scatter* g,
                        acc_t* buf, Py_ssize_t item, const int64_t* rng) noexcept nogil:
    cdef Py_ssize_t W = g.W, L = g.L
    cdef Py_ssize_t bh_i = item % g.nbh
    cdef Py_ssize_t t = item // g.nbh
    cdef Py_ssize_t c = t % g.C
    cdef Py_ssize_t n = t // g.C
    cdef Py_ssize_t h0 = bh_i * g.bh
    cdef Py_ssize_t h1 = min(h0 + g.bh, g.H)
    cdef uint64_t lo = h0 * W, hi = h1 * W
    cdef Py_ssize_t oh, ow, ih
    cdef const store_t* gb = go + n * g.gs[0] + c * g.gs[1]
    cdef const idx_t* jb = ind + n * g.js[0] + c * g.js[1]
    cdef store_t* xb = gi + n * g.xs[0] + c * g.xs[1]
    cdef const store_t* gp
    cdef const idx_t* jp
    # strides in locals: the compiler cannot keep them in registers through g while the
    # loop stores into buf
    cdef Py_ssize_t gs4 = g.gs[4], gs5 = g.gs[5]
    cdef Py_ssize_t js4 = g.js[4], js5 = g.js[5]
    cdef Py_ssize_t Ho = g.Ho, Wo = g.Wo
    cdef int kind = g.kind
    # float32 sums of contiguous rows or lanes: the AVX2 loops (pg_scatter.h), where the CPU
    # has them
    cdef int fk = -1
    cdef int j64 = 1 if idx_t is int64_t else 0
    if acc_t is float:
        fk = 0 if kind == K_F32 else (1 if kind == K_BF16 else 2)
        if not pg_scatter_fast(fk):
            fk = -1
    cdef Py_ssize_t nblk = (h1 - h0) * W * L
    cdef bint dense = g.xs[4] == 1 if L == 1 else (g.xs[5] == 1 and g.xs[4] == L)
    cdef bint contig = dense and g.xs[3] == W * L and g.Hd == g.H   # rows follow each other
    cdef bint whole = g.region and contig
    cdef uint16_t* stage = <uint16_t*>(buf + g.bh * W * L + SCATTER_SLACK)
    cdef Py_ssize_t dummy = g.bh * W * L + SCATTER_DUMMY   # from buf, shifted or not
    cdef Py_ssize_t shift = 0
    if acc_t is float:
        if fk >= 0 and whole:
            # the block placed so that its loads and stores in pg_flush_block are aligned
            shift = pg_flush_shift(xb + h0 * W * L, nblk, fk)
            buf = buf + shift
            dummy -= shift
    # float32 blocks of one run in an output in the cache (not streamed): the sums are
    # added straight into grad_input, zeroed first, with no flush pass (the same additions
    # from +0.0 in the same order as into buf: the same bits), which saves the flush's
    # load, clear and store of every value.  The mixed groups' dummy slots stay in buf, as
    # an offset from the block.
    cdef acc_t* tgt = buf
    cdef bint direct = False
    if acc_t is float:
        if store_t is float:
            if fk == 0 and contig and not g.region and not g.stream:
                direct = True
                tgt = <acc_t*>(xb + h0 * W * L)
                dummy = (buf + dummy) - tgt
                pg_zero_f32(tgt, nblk)
    # the plane's output rows' [smallest, largest] index (rows_rng), or NULL
    cdef const int64_t* rr = NULL
    if rng != NULL:
        rr = rng + t * Ho * 2
    for oh in range(Ho):
        if rr != NULL and (rr[2 * oh + 1] < <int64_t>lo or rr[2 * oh] >= <int64_t>hi):
            continue   # no index of this output row falls in the block
        gp = gb + _row_at(oh, g.Hod, g.gs)
        jp = jb + _row_at(oh, g.Hod, g.js)
        if L == 1:
            if acc_t is float:
                if fk >= 0 and gs4 == 1 and js4 == 1:
                    pg_scatter_row(tgt, gp, fk, jp, j64, Wo, lo, hi - lo, 1, dummy)
                    continue
            _scatter_row(tgt, gp, gs4, jp, js4, Wo, lo, hi - lo, kind, 1)
        else:
            if acc_t is float:
                if fk >= 0 and gs5 == 1 and js5 == 1:
                    for ow in range(Wo):
                        pg_scatter_row(tgt, gp + ow * gs4, fk, jp + ow * js4, j64, L, lo,
                                       hi - lo, L, dummy)
                    continue
                if fk >= 0:
                    # grad_output or indices not channels-last (NCHW planes, say) into a
                    # channels-last block: a few columns of every lane at a time, so that
                    # the values added to lie on a few lines (each value of the block gets
                    # the same additions in the same order as over the pixels' lanes)
                    pg_scatter_lane_rows(tgt, gp, gs5, gs4, fk, jp, js5, js4, j64, Wo, L, lo,
                                         hi - lo, dummy)
                    continue
            for ow in range(Wo):
                _scatter_row(tgt, gp + ow * gs4, gs5, jp + ow * js4, js5, L, lo, hi - lo,
                             kind, L)
    if direct:
        return
    if acc_t is float:
        if dense and fk >= 0:
            # rounded, stored and cleared in one pass: the block at once where its rows
            # follow each other in memory (streamed as a region, or not streamed), else
            # row by row
            if whole:
                pg_flush_block(buf, xb + h0 * W * L, nblk, fk, 1)
                return
            if contig and not g.stream:
                # one run too: 16-bit rows whose bytes are no multiple of 32 would each end
                # in values rounded one at a time
                pg_flush_block(buf, xb + h0 * W * L, nblk, fk, 0)
                return
            for ih in range(h0, h1):
                pg_flush_block(buf + (ih - h0) * W * L, xb + _row_at(ih, g.Hd, g.xs), W * L, fk,
                               g.stream and W * L * <Py_ssize_t>sizeof(store_t) >= 256)
            return
    if acc_t is float:
        if (not dense and fk >= 0 and g.xs[4] == 1 and g.xs[3] == W and g.Hd == g.H
                and pg_tstore(xb + h0 * W, g.xs[5], buf, (h1 - h0) * W, L, kind)):
            # lanes that are planes (channels-last grad_output and indices into an NCHW
            # grad_input): eight planes by eight values through a transpose
            memset(buf, 0, nblk * sizeof(acc_t))
            return
    if whole:
        # whole lines streamed, whatever the rows' length and alignment (16-bit rows
        # rounded into the staging area first)
        _store_region(buf, xb + h0 * W * L, nblk, kind, stage)
    else:
        for ih in range(h0, h1):
            _store_row(buf + (ih - h0) * W * L, xb + _row_at(ih, g.Hd, g.xs), g.xs[4], g.xs[5], W, L,
                       g.kind, g.stream, stage)
    memset(buf, 0, nblk * sizeof(acc_t))


cdef void _store_region(acc_t* src, store_t* dst, Py_ssize_t n, int kind,
                        uint16_t* tmp16) noexcept nogil:
    """Store n contiguous results through the line writer (pg_sw); 16-bit results are
    rounded into the staging area tmp16 first."""
    cdef pg_sw sw
    pg_sw_begin(&sw, dst)
    if store_t is uint16_t:
        if acc_t is float:
            if kind == K_F16:
                pg_f32_to_f16_row(src, tmp16, n)
            else:
                pg_f32_to_bf16_row(src, tmp16, n)
            pg_sw_append(&sw, tmp16, n * <Py_ssize_t>sizeof(uint16_t))
    elif store_t is float:
        if acc_t is float:
            pg_sw_append(&sw, src, n * <Py_ssize_t>sizeof(float))
    else:
        if acc_t is double:
            pg_sw_append(&sw, src, n * <Py_ssize_t>sizeof(double))
    pg_sw_end(&sw)


cdef enum:
    # input rows of a window formed at once by _window_item (its staging area's rows)
    WINDOW_ROWS = 8


cdef void _window_item(const store_t* go, store_t* gi, const Scatter* g, acc_t* buf,
                       Py_ssize_t item, const uint8_t* codes) noexcept nogil:
    """The max-pool gradient of one whole plane whose indices all lie in their own windows,
    as a gather (pg_scatter.h's pg_wrows): each output row's windows formed row by row from
    the index codes of the check's pass and the values."""
    cdef int fk = 0 if g.kind == K_F32 else (1 if g.kind == K_BF16 else 2)
    cdef Py_ssize_t W = g.W, kh = g.kh, Ho = g.Ho, Wo = g.Wo
    cdef Py_ssize_t c = item % g.C
    cdef Py_ssize_t n = item // g.C
    cdef const store_t* gb = go + n * g.gs[0] + c * g.gs[1]
    cdef store_t* xb = gi + n * g.xs[0] + c * g.xs[1]
    cdef const uint8_t* cb = codes + item * Ho * Wo
    cdef Py_ssize_t xs3 = g.xs[3], xs4 = g.xs[4], gs3 = g.gs[3]
    cdef Py_ssize_t size = sizeof(store_t)
    # a streamed plane (rows following each other) goes out through the line writer; where
    # its rows (multiples of 32 bytes) start on 16-byte boundaries, all but its first and
    # last window rows get streaming stores straight from the registers instead (the lines
    # at the plane's two ends, which it may share with another thread's plane, are the
    # line writer's: ordinary stores)
    cdef bint region = g.stream and xs4 == 1 and xs3 == W
    cdef bint direct = region and Ho > 2 and (<size_t>xb) % 16 == 0
    cdef bint staged, use_sw
    cdef store_t* stage = <store_t*>(buf + g.w_at)
    cdef Py_ssize_t oh, r0, r1, ih, x
    cdef pg_sw sw
    if store_t is double or acc_t is double:
        return
    if region and not direct:
        pg_sw_begin(&sw, xb)
    oh = 0
    while oh < Ho:
        use_sw = region and (not direct or oh == 0 or oh == Ho - 1)
        staged = use_sw or (g.stream and not region) or xs4 != 1
        if not staged:
            # this row and the next ones up to the last (direct: the last but one) are
            # written straight from the registers, by one call
            x = Ho - 1 if direct else Ho
            pg_wrows(xb + oh * kh * xs3, kh * xs3 * size, xs3 * size, gb + oh * gs3,
                     gs3 * size, fk, direct, cb + oh * Wo, Wo, x - oh, 0, kh, WINDOW_ROWS)
            oh = x
            continue
        if direct and use_sw:
            pg_sw_begin(&sw, xb + oh * kh * xs3)
        r0 = 0
        while r0 < kh:
            r1 = min(r0 + WINDOW_ROWS, kh)
            pg_wrows(stage, 0, W * size, gb + oh * gs3, 0, fk, 0, cb + oh * Wo, Wo, 1, r0, r1,
                     WINDOW_ROWS)
            if use_sw:
                pg_sw_append(&sw, stage, (r1 - r0) * W * size)
                r0 = r1
                continue
            for ih in range(r1 - r0):
                if xs4 == 1:
                    pg_sw_begin(&sw, xb + (oh * kh + r0 + ih) * xs3)
                    pg_sw_append(&sw, stage + ih * W, W * size)
                    pg_sw_end(&sw)
                else:
                    for x in range(W):
                        xb[(oh * kh + r0 + ih) * xs3 + x * xs4] = stage[ih * W + x]
            r0 = r1
        if direct and use_sw:
            pg_sw_end(&sw)
        oh += 1
    if region and not direct:
        pg_sw_end(&sw)


cdef Py_ssize_t _wplane(const idx_t* ind, const Scatter* g, uint8_t* codes, uint8_t* ok,
                        Py_ssize_t p) noexcept nogil:
    """The index check of one plane with the gather form's codes (pg_wcode_plane): ok[p]
    says whether every index lies in its own window (and so inside the plane); where one
    does not, the plane's range check follows.  Returns the number of bad indices."""
    cdef Py_ssize_t c = p % g.C
    cdef Py_ssize_t n = p // g.C
    cdef const idx_t* jb = ind + n * g.js[0] + c * g.js[1]
    cdef int j64 = 1 if idx_t is int64_t else 0
    ok[p] = pg_wcode_plane(codes + p * g.Ho * g.Wo, jb, j64, g.Ho, g.Wo, g.js[3], g.W, g.kh)
    if ok[p]:
        return 0
    return _plane_bad(ind, g, p, <uint64_t>(g.H * g.W), NULL)


cdef Py_ssize_t _wcheck(const idx_t* ind, const Scatter* g, uint8_t* codes, uint8_t* ok,
                        int nt) noexcept nogil:
    cdef Py_ssize_t p, bad = 0
    if nt <= 1:
        for p in range(g.N * g.C):
            bad += _wplane(ind, g, codes, ok, p)
        return bad
    for p in prange(g.N * g.C, num_threads=nt, schedule='static', use_threads_if=nt > 1,
                    nogil=True):
        bad += _wplane(ind, g, codes, ok, p)
    return bad


cdef void _lrow_write(const store_t* go, store_t* gi, const Scatter* g, const uint8_t* codes,
                      Py_ssize_t item, void* tmp) noexcept nogil:
    """The kh input rows of output row item % Ho of plane item // Ho (channels-last
    gather form: pg_lwrite_row, or pg_fwrite_row for flat rows; grad_output in NCHW planes
    (g.lmixed): its row first gathered into tmp in channels-last order)."""
    cdef int fk = 0 if g.kind == K_F32 else (1 if g.kind == K_BF16 else 2)
    cdef Py_ssize_t n = item // g.Ho, oh = item % g.Ho
    if g.lmixed:
        pg_lanes_gather(tmp, go + n * g.gs[0] + oh * g.gs[3], g.gs[5], g.Wo, g.L,
                        sizeof(store_t), g.gs[3])
        pg_lwrite_row(gi + n * g.xs[0] + oh * g.kh * g.xs[3], g.xs[3], g.xs[4], tmp, g.L,
                      codes + item * g.Wo * g.L, fk, g.stream, g.Wo, g.L, g.kh, g.kw)
        return
    if g.flat != NULL:
        # flat rows are short, but an item's kh rows are one block of memory where the
        # rows are contiguous: streamed as the scatter streams its blocks (g.region)
        pg_fwrite_row(gi + n * g.xs[0] + oh * g.kh * g.xs[3], g.xs[3],
                      go + n * g.gs[0] + oh * g.gs[3], codes + item * g.Wo * g.L, g.flat,
                      g.W * g.L, fk, g.stream or g.region, g.flat_wide, g.kh, g.kw)
        return
    pg_lwrite_row(gi + n * g.xs[0] + oh * g.kh * g.xs[3], g.xs[3], g.xs[4],
                  go + n * g.gs[0] + oh * g.gs[3], g.gs[4], codes + item * g.Wo * g.L, fk,
                  g.stream, g.Wo, g.L, g.kh, g.kw)


cdef void _lwindow_run(const store_t* go, store_t* gi, const Scatter* g, const uint8_t* codes,
                       const uint8_t* ok, int nt, char* scratch,
                       Py_ssize_t per_thread) noexcept nogil:
    """The channels-last gather form of every plane whose indices all lie in their windows
    (ok), one output row's windows an item (scratch: per_thread bytes a thread, for
    g.lmixed)."""
    cdef Py_ssize_t item
    cdef char* tmp = scratch
    if store_t is double:
        return
    if nt <= 1:
        for item in range(g.N * g.Ho):
            if ok[item // g.Ho]:
                _lrow_write(go, gi, g, codes, item, tmp)
        pg_store_fence()
        return
    with parallel(num_threads=nt):
        tmp = scratch + threadid() * per_thread
        for item in prange(g.N * g.Ho, schedule='static'):
            if ok[item // g.Ho]:
                _lrow_write(go, gi, g, codes, item, tmp)
        pg_store_fence()


cdef Py_ssize_t _lcheck(const idx_t* ind, const Scatter* g, uint8_t* codes, uint8_t* okrow,
                        uint8_t* ok, int nt) noexcept nogil:
    """The channels-last gather form's check: each output row's codes (pg_lcode_row;
    flat rows: pg_fcode_row), a plane ok where all its rows are, and the range check of
    the other planes.  Returns the number of bad indices."""
    cdef Py_ssize_t item, n, oh, bad = 0
    cdef int j64 = 1 if idx_t is int64_t else 0
    for item in prange(g.N * g.Ho, num_threads=nt, schedule='static', use_threads_if=nt > 1,
                       nogil=True):
        if g.flat != NULL:
            okrow[item] = pg_fcode_row(codes + item * g.Wo * g.L,
                                       ind + (item // g.Ho) * g.js[0] + (item % g.Ho) * g.js[3],
                                       j64, g.Wo * g.L, g.L, (item % g.Ho) * g.kh * g.W, g.W,
                                       g.kh, g.kw)
            continue
        if g.lmixed:
            okrow[item] = pg_lcode_rowt(codes + item * g.Wo * g.L,
                                        ind + (item // g.Ho) * g.js[0] + (item % g.Ho) * g.js[3],
                                        j64, g.js[5], g.Wo, g.L, (item % g.Ho) * g.kh * g.W,
                                        g.W, g.kh, g.kw, g.js[3])
            continue
        okrow[item] = pg_lcode_row(codes + item * g.Wo * g.L,
                                   ind + (item // g.Ho) * g.js[0] + (item % g.Ho) * g.js[3],
                                   j64, g.js[4], g.Wo, g.L, (item % g.Ho) * g.kh * g.W, g.W,
                                   g.kh, g.kw)
    for n in range(g.N):
        ok[n] = 1
        for oh in range(g.Ho):
            if not okrow[n * g.Ho + oh]:
                ok[n] = 0
                break
    for n in prange(g.N, num_threads=nt, schedule='static', use_threads_if=nt > 1,
                    nogil=True):
        if not ok[n]:
            bad += _plane_bad(ind, g, n, <uint64_t>(g.H * g.W), NULL)
    return bad


cdef void _scatter_run(const store_t* go, const idx_t* ind, store_t* gi, const Scatter* g,
                       acc_t* scratch, Py_ssize_t per_thread, int nt,
                       const uint8_t* codes, const uint8_t* ok,
                       const int64_t* rng) noexcept nogil:
    """Every plane's item: the gather form where ok says its indices lie in their windows
    (ok NULL: nowhere), else the scatter (rng: the output rows' index ranges, or NULL).
    Channels-last (g.lwindow): the gather form's planes first, by output rows, then the
    scatter's items of the other planes."""
    cdef Py_ssize_t n_items = g.N * g.C * g.nbh
    cdef Py_ssize_t item
    cdef Py_ssize_t nblk = g.bh * g.W * g.L + SCATTER_SLACK
    cdef acc_t* buf = scratch
    if g.lwindow:
        _lwindow_run(go, gi, g, codes, ok, nt, <char*>scratch, per_thread * sizeof(acc_t))
        for item in range(g.N):
            if not ok[item]:
                break
        else:
            return
    if nt <= 1:
        memset(buf, 0, nblk * sizeof(acc_t))
        for item in range(n_items):
            if ok != NULL and ok[item // g.nbh]:
                if not g.lwindow:
                    _window_item(go, gi, g, buf, item, codes)
            else:
                _scatter_item(go, ind, gi, g, buf, item, rng)
        pg_store_fence()
        return
    with parallel(num_threads=nt):
        buf = scratch + threadid() * per_thread
        memset(buf, 0, nblk * sizeof(acc_t))
        for item in prange(n_items, schedule='static'):
            if ok != NULL and ok[item // g.nbh]:
                if not g.lwindow:
                    _window_item(go, gi, g, buf, item, codes)
            else:
                _scatter_item(go, ind, gi, g, buf, item, rng)
        pg_store_fence()


cdef Py_ssize_t _plane_bad(const idx_t* ind, const Scatter* g, Py_ssize_t p,
                           uint64_t limit, int64_t* rng) noexcept nogil:
    """The number of plane p's indices outside [0, limit); rng (or NULL): where to record
    each output row's smallest and largest index (rows with unit-stride indices, or lanes
    whose rows lie in NCHW planes; the others get [0, limit - 1], which makes a block scan
    them)."""
    cdef Py_ssize_t c = p % g.C
    cdef Py_ssize_t n = p // g.C
    cdef const idx_t* jb = ind + n * g.js[0] + c * g.js[1]
    cdef const idx_t* jp
    cdef Py_ssize_t oh, ow, l, bad = 0, rows, per_row
    cdef int any_bad
    cdef bint lanes_apart
    cdef int64_t r2[2]
    if rng != NULL:
        rng = rng + p * g.Ho * 2
        if (g.L == 1 and g.js[4] == 1) or (g.js[5] == 1 and g.js[4] == g.L):
            any_bad = 0
            for oh in range(g.Ho):
                if idx_t is int64_t:
                    pg_row_range_i64(jb + _row_at(oh, g.Hod, g.js), g.Wo * g.L, rng + 2 * oh)
                else:
                    pg_row_range_i32(jb + _row_at(oh, g.Hod, g.js), g.Wo * g.L, rng + 2 * oh)
                any_bad |= rng[2 * oh] < 0 or rng[2 * oh + 1] >= <int64_t>limit
            if not any_bad:
                return 0
        elif g.L > 1 and g.js[4] == 1:
            # lanes whose rows lie in NCHW planes: each output row's range over its lanes'
            # rows, plane by plane
            for l in range(g.L):
                jp = jb + l * g.js[5]
                for oh in range(g.Ho):
                    if idx_t is int64_t:
                        pg_row_range_i64(jp + _row_at(oh, g.Hod, g.js), g.Wo, r2)
                    else:
                        pg_row_range_i32(jp + _row_at(oh, g.Hod, g.js), g.Wo, r2)
                    if l == 0 or r2[0] < rng[2 * oh]:
                        rng[2 * oh] = r2[0]
                    if l == 0 or r2[1] > rng[2 * oh + 1]:
                        rng[2 * oh + 1] = r2[1]
            any_bad = 0
            for oh in range(g.Ho):
                any_bad |= rng[2 * oh] < 0 or rng[2 * oh + 1] >= <int64_t>limit
            if not any_bad:
                return 0
        else:
            for oh in range(g.Ho):
                rng[2 * oh] = 0
                rng[2 * oh + 1] = <int64_t>limit - 1
    elif g.js[4] == 1 or (g.js[5] == 1 and g.js[4] == g.L):
        # unit-stride rows (of all lanes together, or of each lane where the lanes lie in
        # NCHW planes): a vectorised pass that only says whether any index is bad
        # (pg_index.h), over the whole plane where its rows follow each other; the exact
        # count below runs only when one is
        lanes_apart = g.L > 1 and not (g.js[5] == 1 and g.js[4] == g.L)
        rows, per_row = g.Ho, (g.Wo if lanes_apart else g.Wo * g.L)
        if g.js[3] == per_row and g.Hod == g.Ho:
            rows, per_row = 1, g.Ho * per_row
        any_bad = 0
        for l in range(g.L if lanes_apart else 1):
            jp = jb + l * g.js[5]
            for oh in range(rows):
                if idx_t is int64_t:
                    any_bad |= pg_any_bad_i64(jp + _row_at(oh, g.Hod, g.js), per_row, limit)
                else:
                    any_bad |= pg_any_bad_i32(jp + _row_at(oh, g.Hod, g.js), per_row, limit)
        if not any_bad:
            return 0
    for oh in range(g.Ho):
        for ow in range(g.Wo):
            jp = jb + _row_at(oh, g.Hod, g.js) + ow * g.js[4]
            for l in range(g.L):
                # a negative index becomes a huge unsigned value: one compare checks both ends
                bad += (<uint64_t><int64_t>jp[l * g.js[5]]) >= limit
    return bad


cdef Py_ssize_t _count_bad(const idx_t* ind, const Scatter* g, int nt,
                           int64_t* rng) noexcept nogil:
    cdef Py_ssize_t p, bad = 0
    cdef uint64_t limit = <uint64_t>(g.H * g.W)
    if nt <= 1:
        for p in range(g.N * g.C):
            bad += _plane_bad(ind, g, p, limit, rng)
        return bad
    for p in prange(g.N * g.C, num_threads=nt, schedule='static', use_threads_if=nt > 1,
                    nogil=True):
        bad += _plane_bad(ind, g, p, limit, rng)
    return bad


cdef class MaxScatterKernel(PlannedKernel):
    """A planned max-pool gradient (scatter to argmax indices) of one call."""
    cdef Scatter g
    cdef object _keep
    cdef const float[:, :, :, :, :, :] go_f
    cdef float[:, :, :, :, :, :] gi_f
    cdef const double[:, :, :, :, :, :] go_d
    cdef double[:, :, :, :, :, :] gi_d
    cdef const uint16_t[:, :, :, :, :, :] go_h
    cdef uint16_t[:, :, :, :, :, :] gi_h
    cdef const int32_t[:, :, :, :, :, :] ind32
    cdef const int64_t[:, :, :, :, :, :] ind64
    cdef int idx64
    cdef const int64_t[::1] _flat

    def __init__(self, go6, ind6, gi6, int kind, Py_ssize_t bh, choice):
        # choice: _plan.scatter_choice
        self._keep = (go6, ind6, gi6)
        self.choice = choice
        g = &self.g
        g.N, g.C, d, g.Hd, g.W, g.L = gi6.shape
        g.H = d * g.Hd
        g.Hod, g.Wo = go6.shape[3], go6.shape[4]
        g.Ho = go6.shape[2] * g.Hod
        if d <= 1 or gi6.strides[2] == g.Hd * gi6.strides[3]:
            g.Hd = g.H      # D and H merge: one axis of rows
        if go6.shape[2] <= 1 or (go6.strides[2] == g.Hod * go6.strides[3]
                                 and ind6.strides[2] == g.Hod * ind6.strides[3]):
            g.Hod = g.Ho
        g.bh = bh
        g.nbh = (g.H + bh - 1) // bh if g.H > 0 else 0
        g.kind = kind
        g.stream, g.region = choice.stream, choice.region
        _fill_strides(g.gs, go6)
        _fill_strides(g.xs, gi6)
        _fill_strides(g.js, ind6)
        self._set_arrays(go6, ind6, gi6, kind)
        self.n_items = g.N * g.C * g.nbh
        if kind == K_F32:   # the direct form may add into grad_input (_scatter_item)
            self._lock = threading.Lock()
        self._fill_windows(choice)
        self._size_scratch(gi6, kind)
        self.traffic = go6.nbytes + gi6.nbytes + ind6.nbytes

    cdef _set_arrays(self, go6, ind6, gi6, int kind):
        """The typed views of the arrays, by storage kind and index type."""
        if kind == K_F64:
            self.go_d = go6
            self.gi_d = gi6
            self.p_go = <char*>&self.go_d[0, 0, 0, 0, 0, 0]
            self.p_gi = <char*>&self.gi_d[0, 0, 0, 0, 0, 0]
        elif kind == K_F32:
            self.go_f = go6
            self.gi_f = gi6
            self.p_go = <char*>&self.go_f[0, 0, 0, 0, 0, 0]
            self.p_gi = <char*>&self.gi_f[0, 0, 0, 0, 0, 0]
        else:
            self.go_h = go6
            self.gi_h = gi6
            self.p_go = <char*>&self.go_h[0, 0, 0, 0, 0, 0]
            self.p_gi = <char*>&self.gi_h[0, 0, 0, 0, 0, 0]
        self.idx64 = ind6.itemsize == 8
        if self.idx64:
            self.ind64 = ind6
            self.p_ind = <char*>&self.ind64[0, 0, 0, 0, 0, 0]
        else:
            self.ind32 = ind6
            self.p_ind = <char*>&self.ind32[0, 0, 0, 0, 0, 0]

    cdef _fill_windows(self, choice):
        """The gather forms' part of the struct: windows' size, flat rows' table, and the
        workspace's shared part (the index check's codes: a byte per index, and one per
        plane, or per output row and plane channels-last, saying whether all lie in their
        windows; planes split into blocks of rows: two int64 a row, the output rows' index
        ranges)."""
        g = &self.g
        g.window, g.lwindow, g.lmixed = choice.window, choice.lwindow, choice.lmixed
        g.kh = g.H // g.Ho if g.window else 0
        g.kw = 0
        g.flat = NULL
        g.flat_wide = 0
        cdef Py_ssize_t blk = 32 // (4 if g.kind == K_F32 else 2)
        if g.lwindow:
            g.kh, g.kw = g.H // g.Ho, g.W // g.Wo
            if choice.flat is not None:
                self._flat = choice.flat[0]
                if self._flat.shape[0] != 9 * ((g.W * g.L + blk - 1) // blk):
                    raise ValueError("pool_grad: the flat table does not fit the rows")
                g.flat = &self._flat[0]
                g.flat_wide = choice.flat[1]
        self.shared_bytes = 0
        if g.window:
            self.shared_bytes = (g.N * g.C * (g.Ho * g.Wo + 1) + 63) // 64 * 64
        if g.lwindow:
            self.shared_bytes = (g.N * (g.Ho * g.Wo * g.L + g.Ho + 1) + 63) // 64 * 64
        g.rows_rng = g.nbh > 1 and not g.window and not g.lwindow
        if g.rows_rng:
            self.shared_bytes = (g.N * g.C * g.Ho * 16 + 63) // 64 * 64

    cdef _size_scratch(self, gi6, int kind):
        """Scratch a thread, in 64-byte multiples: accumulation rows and SCATTER_SLACK
        values (room to shift them for pg_flush_block's alignment, and the scatter's slots
        for values outside), a 16-bit staging area for the block (one row unless the block
        is streamed as a region), and the NCHW gather form's staging rows."""
        g = &self.g
        cdef Py_ssize_t bh = g.bh
        cdef Py_ssize_t acc_size = 8 if kind == K_F64 else 4
        cdef Py_ssize_t elems = (bh * g.W * g.L + SCATTER_SLACK
                                 + ((bh if g.region else 1) * g.W * g.L + 1) // 2
                                 + 15) // 16 * 16
        g.w_at = elems
        if g.window:
            elems += (WINDOW_ROWS * g.W * gi6.itemsize // acc_size + 15) // 16 * 16
        self.scratch_elems = elems
        self.scratch_bytes = self.scratch_elems * acc_size

    cdef _release(self):
        self.go_f = self.go_d = self.go_h = None
        self.gi_f = self.gi_d = self.gi_h = None
        self.ind32 = self.ind64 = None
        self._keep = ()

    def count_bad_indices(self, int n_threads):
        """How many indices lie outside [0, H*W)."""
        if self.p_ind == NULL:
            raise RuntimeError("pool_grad: this plan was released from its arrays")
        return self._count_bad(n_threads, self.p_ind, NULL)

    cdef Py_ssize_t _count_bad(self, int nt, char* ind, int64_t* rng) except -1:
        cdef Py_ssize_t bad
        if self.traffic >= C_NOGIL_BYTES:
            with nogil:
                bad = self._count_bad_nogil(nt, ind, rng)
        else:
            bad = self._count_bad_nogil(nt, ind, rng)
        return bad

    cdef Py_ssize_t _count_bad_nogil(self, int nt, char* ind, int64_t* rng) noexcept nogil:
        if self.idx64:
            return _count_bad(<const int64_t*>ind, &self.g, nt, rng)
        return _count_bad(<const int32_t*>ind, &self.g, nt, rng)

    cdef Py_ssize_t _execute(self, char* scratch, int nt, char* go, char* gi,
                             char* ind) except -1:
        """Check every index, then scatter; returns the number of bad indices (nothing is
        written unless it is 0)."""
        cdef Scatter* g = &self.g
        cdef int fk = 0 if g.kind == K_F32 else (1 if g.kind == K_BF16 else 2)
        cdef uint8_t* codes = NULL
        cdef uint8_t* ok = NULL
        cdef int64_t* rng = NULL
        cdef Py_ssize_t bad
        if g.lwindow:
            codes = <uint8_t*>(scratch - self.shared_bytes)
            ok = codes + g.N * g.Ho * g.Wo * g.L + g.N * g.Ho
            if self.traffic >= C_NOGIL_BYTES:
                with nogil:
                    bad = self._lcheck_nogil(nt, ind, codes, ok)
            else:
                bad = self._lcheck_nogil(nt, ind, codes, ok)
        elif g.window and pg_scatter_fast(fk):
            # the check's pass codes the indices for the gather form (shared workspace)
            codes = <uint8_t*>(scratch - self.shared_bytes)
            ok = codes + g.N * g.C * g.Ho * g.Wo
            if self.traffic >= C_NOGIL_BYTES:
                with nogil:
                    bad = self._wcheck_nogil(nt, ind, codes, ok)
            else:
                bad = self._wcheck_nogil(nt, ind, codes, ok)
        else:
            if g.rows_rng:
                rng = <int64_t*>(scratch - self.shared_bytes)
            bad = self._count_bad(nt, ind, rng)
        if bad:
            return bad
        if self.traffic >= C_NOGIL_BYTES:
            with nogil:
                self._launch(scratch, nt, go, gi, ind, codes, ok, rng)
        else:
            self._launch(scratch, nt, go, gi, ind, codes, ok, rng)
        return 0

    cdef Py_ssize_t _lcheck_nogil(self, int nt, char* ind, uint8_t* codes,
                                  uint8_t* ok) noexcept nogil:
        cdef uint8_t* okrow = ok - self.g.N * self.g.Ho
        if self.idx64:
            return _lcheck(<const int64_t*>ind, &self.g, codes, okrow, ok, nt)
        return _lcheck(<const int32_t*>ind, &self.g, codes, okrow, ok, nt)

    cdef Py_ssize_t _wcheck_nogil(self, int nt, char* ind, uint8_t* codes,
                                  uint8_t* ok) noexcept nogil:
        if self.idx64:
            return _wcheck(<const int64_t*>ind, &self.g, codes, ok, nt)
        return _wcheck(<const int32_t*>ind, &self.g, codes, ok, nt)

    cdef void _launch(self, char* scratch, int nt, char* go, char* gi, char* ind,
                      const uint8_t* codes, const uint8_t* ok,
                      const int64_t* rng) noexcept nogil:
        cdef Scatter* g = &self.g
        cdef Py_ssize_t per = self.scratch_elems
        if g.kind == K_F64:
            if self.idx64:
                _scatter_run(<const double*>go, <const int64_t*>ind, <double*>gi, g,
                             <double*>scratch, per, nt, codes, ok, rng)
            else:
                _scatter_run(<const double*>go, <const int32_t*>ind, <double*>gi, g,
                             <double*>scratch, per, nt, codes, ok, rng)
        elif g.kind == K_F32:
            if self.idx64:
                _scatter_run(<const float*>go, <const int64_t*>ind, <float*>gi, g,
                             <float*>scratch, per, nt, codes, ok, rng)
            else:
                _scatter_run(<const float*>go, <const int32_t*>ind, <float*>gi, g,
                             <float*>scratch, per, nt, codes, ok, rng)
        else:
            if self.idx64:
                _scatter_run(<const uint16_t*>go, <const int64_t*>ind, <uint16_t*>gi, g,
                             <float*>scratch, per, nt, codes, ok, rng)
            else:
                _scatter_run(<const uint16_t*>go, <const int32_t*>ind, <uint16_t*>gi, g,
                             <float*>scratch, per, nt, codes, ok, rng)


# --------------------------------------------------------------------------------------
# forward companions (PyTorch forward semantics), over (N, C, D, H, W, 1) views
# --------------------------------------------------------------------------------------

cdef struct Windows:
    Py_ssize_t N, C, D, H, W, Do, Ho, Wo
    Py_ssize_t xs[6]
    Py_ssize_t ys[6]
    const int64_t* ds
    const int64_t* de
    const int64_t* hs
    const int64_t* he
    const int64_t* ws
    const int64_t* we
    Py_ssize_t dd, dh, dw   # the steps inside a window (max pooling's dilation)
    int kind


cdef inline acc_t _load1(const store_t* p, int kind, acc_t like) noexcept nogil:
    if store_t is uint16_t:
        if kind == K_F16:
            return pg_f16_to_f32(p[0])
        return pg_bf16_to_f32(p[0])
    else:
        return <acc_t>p[0]


cdef inline void _store1(store_t* p, acc_t v, int kind) noexcept nogil:
    if store_t is uint16_t:
        if kind == K_F16:
            p[0] = pg_f32_to_f16(<float>v)
        else:
            p[0] = pg_f32_to_bf16(<float>v)
    else:
        p[0] = <store_t>v


cdef void _avg_fwd_plane(const store_t* x, store_t* y, const Windows* g, const acc_t* div,
                         Py_ssize_t p) noexcept nogil:
    """Window sums divided by div[(od*Ho + oh)*Wo + ow]."""
    cdef Py_ssize_t c = p % g.C, n = p // g.C
    cdef const store_t* xb = x + n * g.xs[0] + c * g.xs[1]
    cdef store_t* yb = y + n * g.ys[0] + c * g.ys[1]
    cdef Py_ssize_t od, oh, ow, i, j, k
    cdef acc_t s
    for od in range(g.Do):
        for oh in range(g.Ho):
            for ow in range(g.Wo):
                s = 0
                for i in range(g.ds[od], g.de[od]):
                    for j in range(g.hs[oh], g.he[oh]):
                        for k in range(g.ws[ow], g.we[ow]):
                            s = s + _load1(xb + i * g.xs[2] + j * g.xs[3] + k * g.xs[4],
                                           g.kind, s)
                _store1(yb + od * g.ys[2] + oh * g.ys[3] + ow * g.ys[4],
                        s / div[(od * g.Ho + oh) * g.Wo + ow], g.kind)


cdef void _max_fwd_plane(const store_t* x, store_t* y, int64_t* ind, const Windows* g,
                         acc_t like, Py_ssize_t p) noexcept nogil:
    """Maximum of each (D, H, W) window, stepping by the dilation, and its flat index
    (d*H + h)*W + w, as PyTorch's CPU kernel picks them: the first position is the
    answer until a later element is strictly greater, or NaN."""
    cdef Py_ssize_t c = p % g.C, n = p // g.C
    cdef const store_t* xb = x + n * g.xs[0] + c * g.xs[1]
    cdef store_t* yb = y + n * g.ys[0] + c * g.ys[1]
    cdef int64_t* ib = ind + p * g.Do * g.Ho * g.Wo
    cdef Py_ssize_t od, oh, ow, i, j, k
    cdef acc_t best, v
    cdef int64_t arg
    for od in range(g.Do):
        for oh in range(g.Ho):
            for ow in range(g.Wo):
                best = -INFINITY
                arg = (g.ds[od] * g.H + g.hs[oh]) * g.W + g.ws[ow]
                # (while loops: Cython's range takes no step unknown at compile time)
                i = g.ds[od]
                while i < g.de[od]:
                    j = g.hs[oh]
                    while j < g.he[oh]:
                        k = g.ws[ow]
                        while k < g.we[ow]:
                            v = _load1(xb + i * g.xs[2] + j * g.xs[3] + k * g.xs[4], g.kind,
                                       like)
                            if v > best or v != v:
                                best = v
                                arg = (i * g.H + j) * g.W + k
                            k += g.dw
                        j += g.dh
                    i += g.dd
                _store1(yb + od * g.ys[2] + oh * g.ys[3] + ow * g.ys[4], best, g.kind)
                ib[(od * g.Ho + oh) * g.Wo + ow] = arg


cdef void _fill_windows(Windows* g, x6, y6, tables, int kind):
    cdef const int64_t[::1] t
    g.N, g.C, g.D, g.H, g.W, _ = x6.shape
    _, _, g.Do, g.Ho, g.Wo, _ = y6.shape
    _fill_strides(g.xs, x6)
    _fill_strides(g.ys, y6)
    g.kind = kind
    t = tables[0]; g.ds = &t[0]
    t = tables[1]; g.de = &t[0]
    t = tables[2]; g.hs = &t[0]
    t = tables[3]; g.he = &t[0]
    t = tables[4]; g.ws = &t[0]
    t = tables[5]; g.we = &t[0]
    g.dd, g.dh, g.dw = tables[6] if len(tables) > 6 else (1, 1, 1)


def avg_forward(x6, y6, int kind, tables, div, int n_threads):
    """y = window sums of x / div, for the average poolings (2-D ones with D = 1)."""
    cdef Windows g
    cdef Py_ssize_t p, planes
    cdef const float[:, :, :, :, :, :] xf
    cdef float[:, :, :, :, :, :] yf
    cdef const double[:, :, :, :, :, :] xd
    cdef double[:, :, :, :, :, :] yd
    cdef const uint16_t[:, :, :, :, :, :] xh
    cdef uint16_t[:, :, :, :, :, :] yh
    cdef const float[::1] divf
    cdef const double[::1] divd
    if y6.size == 0:
        return
    _fill_windows(&g, x6, y6, tables, kind)
    planes = g.N * g.C
    if kind == K_F64:
        xd = x6; yd = y6; divd = div
        for p in prange(planes, nogil=True, num_threads=n_threads, schedule='static',
                        use_threads_if=n_threads > 1):
            _avg_fwd_plane(&xd[0, 0, 0, 0, 0, 0], &yd[0, 0, 0, 0, 0, 0], &g, &divd[0], p)
    elif kind == K_F32:
        xf = x6; yf = y6; divf = div
        for p in prange(planes, nogil=True, num_threads=n_threads, schedule='static',
                        use_threads_if=n_threads > 1):
            _avg_fwd_plane(&xf[0, 0, 0, 0, 0, 0], &yf[0, 0, 0, 0, 0, 0], &g, &divf[0], p)
    else:
        xh = x6; yh = y6; divf = div
        for p in prange(planes, nogil=True, num_threads=n_threads, schedule='static',
                        use_threads_if=n_threads > 1):
            _avg_fwd_plane(&xh[0, 0, 0, 0, 0, 0], &yh[0, 0, 0, 0, 0, 0], &g, &divf[0], p)


def max_forward(x6, y6, int kind, tables, int64_t[:, ::1] ind, int n_threads):
    """y, ind = window maxima of x and their flat (d*H + h)*W + w positions; tables: the
    (start, end) of every axis' windows, then optionally the (D, H, W) steps."""
    cdef Windows g
    cdef Py_ssize_t p, planes
    cdef const float[:, :, :, :, :, :] xf
    cdef float[:, :, :, :, :, :] yf
    cdef const double[:, :, :, :, :, :] xd
    cdef double[:, :, :, :, :, :] yd
    cdef const uint16_t[:, :, :, :, :, :] xh
    cdef uint16_t[:, :, :, :, :, :] yh
    cdef float lf = 0
    cdef double ld = 0
    if y6.size == 0:
        return
    _fill_windows(&g, x6, y6, tables, kind)
    planes = g.N * g.C
    if kind == K_F64:
        xd = x6; yd = y6
        for p in prange(planes, nogil=True, num_threads=n_threads, schedule='static',
                        use_threads_if=n_threads > 1):
            _max_fwd_plane(&xd[0, 0, 0, 0, 0, 0], &yd[0, 0, 0, 0, 0, 0], &ind[0, 0], &g, ld, p)
    elif kind == K_F32:
        xf = x6; yf = y6
        for p in prange(planes, nogil=True, num_threads=n_threads, schedule='static',
                        use_threads_if=n_threads > 1):
            _max_fwd_plane(&xf[0, 0, 0, 0, 0, 0], &yf[0, 0, 0, 0, 0, 0], &ind[0, 0], &g, lf, p)
    else:
        xh = x6; yh = y6
        for p in prange(planes, nogil=True, num_threads=n_threads, schedule='static',
                        use_threads_if=n_threads > 1):
            _max_fwd_plane(&xh[0, 0, 0, 0, 0, 0], &yh[0, 0, 0, 0, 0, 0], &ind[0, 0], &g, lf, p)

"""Sizes (issue #6, point 2): element counts and byte sizes that overflow 32/64-bit
arithmetic, kernel/stride/padding values near the int64 limits, outputs that would need
terabytes.  Each call gives a correct result or a clear 161002 at planning, before any large
allocation -- never OverflowError, MemoryError, a plain ValueError, a hang or a silently
wrong answer.  The kernels' index arithmetic is checked to be 64-bit by reading the source."""
import os
import re
import subprocess
import sys
import textwrap
import tracemalloc

import numpy as np
import pytest

import pool_grad as pg

from reference import ref_avg_pool2d_backward, ref_avg_pool2d_output_size

INVALID = pg.ACLNN_ERR_PARAM_INVALID


@pytest.fixture(autouse=True)
def _address_space_cap():
    """Cap the address space at what the process uses + 4 GiB while a test runs, so that a
    huge allocation the library should never attempt fails with MemoryError instead of
    driving the machine into the OOM killer.  Not under AddressSanitizer (its shadow
    memory is a huge reservation)."""
    try:
        import resource
    except ImportError:
        yield
        return
    if "asan" in os.environ.get("LD_PRELOAD", "") or not os.path.exists("/proc/self/status"):
        yield
        return
    with open("/proc/self/status") as f:
        vm = next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmSize:"))
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    cap = vm + (4 << 30)
    if hard != resource.RLIM_INFINITY:
        cap = min(cap, hard)
    resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def _planning_peak(fn):
    """(outcome, peak bytes traced) of fn(); outcome is the result or the exception."""
    tracemalloc.start()
    try:
        try:
            out = fn()
        except Exception as exc:  # noqa: BLE001 - the caller judges the class
            out = exc
        return out, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def _assert_clear_161002(outcome, peak, limit=64 << 20):
    assert isinstance(outcome, pg.AclnnError), f"not an AclnnError: {outcome!r}"
    assert outcome.code == INVALID, outcome
    assert peak < limit, f"{peak} bytes allocated before the error"


def _correct_or_161002(fn, want):
    try:
        got = fn()
    except pg.AclnnError as exc:
        assert exc.code == INVALID
        return
    np.testing.assert_allclose(np.asarray(got, np.float64), want, rtol=1e-6, atol=1e-30)


# ------------------------------------------------------------ kernel/stride/padding limits

@pytest.mark.parametrize("stride", [2**31, 2**32 + 1, 2**62, 2**63 - 1, 2**63, 2**64, 2**100])
def test_huge_stride(stride):
    """A stride beyond the input gives one output position: correct, or 161002."""
    go = np.arange(1, 3, dtype=np.float64).reshape(1, 2, 1, 1)
    want = ref_avg_pool2d_backward(go, (1, 2, 3, 3), (2, 2), (stride, stride), (0, 0),
                                   False, True, 0)
    _correct_or_161002(lambda: pg.avg_pool2d_backward(go, (1, 2, 3, 3), 2, stride), want)


@pytest.mark.parametrize("k,p,s", [
    (2**62, 2**61, None), (2**63 - 1, 2**62 - 1, None), (2**63 - 1, 2**62 - 1, 1),
    (2**63, 2**62, None), (2**64, 2**63, None), (2**64 + 1, 2**63, 1), (2**100, 2**99, None),
])
@pytest.mark.parametrize("cip", [True, False])
def test_kernel_and_padding_near_int64_limits(k, p, s, cip):
    """Kernels and paddings around 2**63 with an input of 3: the output size arithmetic
    is exact (Python ints), so either the reference's answer or a clear 161002."""
    H = 3
    ss = k if s is None else s
    outs = ref_avg_pool2d_output_size(H, k, ss, p, False)
    assert outs >= 1
    go = np.linspace(1, 2, outs * 1 * 2).reshape(1, 2, outs, 1)
    want = ref_avg_pool2d_backward(go, (1, 2, H, 1), (k, 1), (ss, 1), (p, 0), False, cip, 0)
    _correct_or_161002(lambda: pg.avg_pool2d_backward(
        go, (1, 2, H, 1), (k, 1), None if s is None else (s, 1), (p, 0),
        count_include_pad=cip), want)


@pytest.mark.parametrize("cip", [True, False])
def test_window_end_past_int64_is_not_silently_wrong(cip):
    """H = 3, kernel 2**63-1, stride 2**62, padding 2**62-1, ceil_mode: two windows; the
    second one starts at 1 and its end, start + kernel = 2**63, does not fit in int64.
    Planning in wrapping int64 arithmetic gives all zeros; the right answer is the
    reference's (or a clear 161002)."""
    go = np.ones((1, 1, 2, 1))
    args = ((2**63 - 1, 1), (2**62, 1), (2**62 - 1, 0), True, cip, 0)
    want = ref_avg_pool2d_backward(go, (1, 1, 3, 1), *args)
    assert want.any()
    _correct_or_161002(lambda: pg.avg_pool2d_backward(
        go, (1, 1, 3, 1), args[0], args[1], args[2], ceil_mode=True, count_include_pad=cip),
        want)


@pytest.mark.parametrize("div", [1, -1, 2**31, -2**31, 2**53 + 1])
def test_divisor_override_limits(div):
    go = np.full((1, 1, 2, 2), 3.0)
    want = ref_avg_pool2d_backward(go, (1, 1, 4, 4), (2, 2), (2, 2), (0, 0), False, True, div)
    got = pg.avg_pool2d_backward(go, (1, 1, 4, 4), 2, divisor_override=div)
    np.testing.assert_allclose(got, want, rtol=1e-15, atol=0)


@pytest.mark.parametrize("div", [2**62, 2**63 - 1, -2**63, 2**63, -2**63 - 1, 2**64, 2**100])
def test_divisor_override_near_and_beyond_int64(div):
    """SPEC: "no range limit"; a clear 161002 is accepted too, never OverflowError."""
    go = np.full((1, 1, 2, 2), 3.0)
    want = ref_avg_pool2d_backward(go, (1, 1, 4, 4), (2, 2), (2, 2), (0, 0), False, True, div)
    _correct_or_161002(lambda: pg.avg_pool2d_backward(go, (1, 1, 4, 4), 2,
                                                      divisor_override=div), want)


@pytest.mark.parametrize("n", [2**31, 2**32 + 1, 2**63 - 1, 2**63, 2**100])
def test_huge_n_threads_is_capped(n, restore_num_threads):
    rng = np.random.default_rng(0)
    go = rng.random((2, 8, 32, 32)).astype(np.float32)
    want = pg.avg_pool2d_backward(go, (2, 8, 64, 64), 2, n_threads=1)
    got = pg.avg_pool2d_backward(go, (2, 8, 64, 64), 2, n_threads=n)
    assert np.array_equal(got, want)
    pg.set_num_threads(n)
    assert np.array_equal(pg.avg_pool2d_backward(go, (2, 8, 64, 64), 2), want)


# ------------------------------------------------------------ shapes

@pytest.mark.parametrize("shape,dtype", [
    ((1, 2**40, 2**10, 2**10), np.float64),        # 8 EiB: beyond the 2**62-byte limit
    ((1, 2**30, 2**20, 2**20), np.float16),        # elements overflow int64
    ((1, 2**31 + 1, 2**31 + 1), np.float32),       # 3-D form, 2**64 bytes
    ((1, 1, 2**20, 2**20), np.float32),            # 4 TiB (invalid kernel: must not allocate)
    ((2**20, 1, 2**20, 2**20), np.float32),        # 4 EiB
])
def test_avg_huge_x_shape_is_161002_before_allocating(shape, dtype):
    go = np.broadcast_to(np.ones((), dtype), shape[:-2] + (1, 1))
    outcome, peak = _planning_peak(lambda: pg.avg_pool2d_backward(go, shape, 2**62))
    _assert_clear_161002(outcome, peak)


@pytest.mark.parametrize("shape", [(1, 1, 2**14, 2**14, 2**12), (2**20, 1, 2**20, 2**20, 1),
                                   (1, 1, 2**63 - 1, 1, 1)])
def test_adaptive_huge_x_shape_is_161002_before_allocating(shape):
    go = np.broadcast_to(np.float32(1), shape[:2] + (1, 1, 1))
    outcome, peak = _planning_peak(lambda: pg.adaptive_avg_pool3d_backward(go, shape))
    _assert_clear_161002(outcome, peak)


@pytest.mark.parametrize("out_shape", [(1, 1, 1, 1, 2**40), (1, 1, 2**20, 2**20, 2**20),
                                       (1, 1, 2**40, 1, 1), (1, 1, 2**30, 2**10, 1)])
def test_adaptive_terabyte_output_size_is_161002_at_planning(out_shape):
    """grad_output as a zero-stride view of (logically) terabytes: the window tables alone
    would need as many int64s as the output size -- a clear 161002 at planning, not a
    MemoryError (or an out-of-memory kill)."""
    go = np.broadcast_to(np.float32(1), out_shape)
    gi = np.zeros((1, 1, 1, 1, 2), np.float32)
    for make in (lambda: pg.adaptive_avg_pool3d_backward(go, gi.shape),
                 lambda: pg.AdaptiveAvgPool3dBackward(go, gi.shape, gi)):
        outcome, peak = _planning_peak(make)
        _assert_clear_161002(outcome, peak)


@pytest.mark.parametrize("shape", [(0, 1, 2**62, 2**62), (0, 1, 2**64, 2**64),
                                   (1, 0, 2**40, 2**40), (0, 2**40, 2**40, 4)])
def test_zero_size_x_with_huge_dims(shape):
    """A zero-size x whose other dimensions are huge: an empty result or a clear 161002,
    never numpy's ValueError ("array is too big", "Maximum allowed dimension exceeded")."""
    go = np.ones(shape[:2] + (1, 1), np.float32) if shape[0] * shape[1] == 0 else None
    try:
        res = pg.avg_pool2d_backward(go, shape, 2**62 if shape[2] >= 2**62 else 4)
    except pg.AclnnError as exc:
        assert exc.code == INVALID
    else:
        assert res.size == 0 and res.shape == shape


def test_max_plane_over_int32_is_161002_before_allocating():
    """H*W > 2**31-1 is 161002 at planning whatever the index dtype; the function layer
    must not allocate a 4 GiB grad_input before it says so."""
    shape = (1, 1, 46341, 46341)  # H*W = 2**31 + 88454
    go = np.zeros((1, 1, 1, 1), np.float16)
    for idt in (np.int32, np.int64):
        ind = np.zeros((1, 1, 1, 1), idt)
        outcome, peak = _planning_peak(
            lambda: pg.adaptive_max_pool2d_backward(go, shape, ind))
        _assert_clear_161002(outcome, peak)
        assert "H*W" in str(outcome) or "2**31" in str(outcome), outcome


def test_max_plane_over_int32_with_zero_batch():
    """Even with nothing to compute (N = 0), H*W > 2**31-1 is 161002 at planning."""
    go = np.zeros((0, 1, 1, 1), np.float32)
    ind = np.zeros((0, 1, 1, 1), np.int64)
    with pytest.raises(pg.ParamInvalidError, match=r"H\*W|2\*\*31"):
        pg.adaptive_max_pool2d_backward(go, (0, 1, 2**16, 2**16), ind)


# ------------------------------------------------------------ the kernels' integer types

_PYX = os.path.join(os.path.dirname(__file__), os.pardir, "pyx", "_kernels.pyx")
# C ints that are flags or thread counts, never an index, extent or offset
_INT_OK = {"kind", "rnd", "nt", "n_threads", "first", "idx64", "scale_w", "stream", "tstore", "fill", "fill_fast",
           "budget", "threads_for", "pg_have_f16c", "pg_have_avx2", "allowed", "bf16", "pg_combine_h16", "pg_load_h16", "pg_load_lanes_h16", "pg_item_h16_run", "region",
           "pg_any_bad_i64", "pg_any_bad_i32", "any_bad", "single", "dup2",
           "pg_scatter_fast", "fk", "j64", "_default_budget", "window", "sent",
           "PG_OPENMP", "PG_OPENMP_VERSION", "PG_HAVE_STREAM", "PG_VEC", "lanes_row", "pg_lanes_row", "rows_rng",
           "pg_wcode_plane", "pg_lcode_row", "pg_lcode_rowt", "lwindow", "lmixed", "lanes_copy", "lanes_pair", "pair_nt", "big", "spread_wide",
           "spread32_wide", "tspread_wide", "pg_fcode_row", "wide", "flat_wide", "pg_tload", "pg_tstore", "tstage",
           "pg_plane_item", "plane_regs", "gblk_rows", "hsteps", "staging",
           "pg_fused_f64_run", "strips"}


@pytest.mark.skipif(not os.path.exists(_PYX), reason="needs the source checkout")
def test_kernel_index_arithmetic_is_64_bit():
    """Every C integer in pyx/_kernels.pyx that can hold an index, a size, a stride or an
    offset is Py_ssize_t / int64_t / size_t: `int` is allowed only for flags and thread
    counts, and no `long`, `short`, `unsigned` or `int32_t` (except as the index *storage*
    type) variable is declared."""
    src = open(_PYX).read()
    code = "\n".join(line.split("#", 1)[0] for line in src.splitlines())
    bad = []
    for m in re.finditer(r"\b(?:cdef\s+)?(?:const\s+)?(?:unsigned\s+)?int\s+(\w+)", code):
        if m.group(1) not in _INT_OK and m.group(1) != "pg_omp_max_threads":
            bad.append(m.group(0))
    for m in re.finditer(r"\b(long|short|unsigned int|unsigned)\b(?!\s+long)", code):
        bad.append(code[max(0, m.start() - 30):m.end() + 20].replace("\n", " "))
    for m in re.finditer(r"int32_t\b[^\n]*", code):
        line = m.group(0)
        if not ("[:" in line or line.startswith("int32_t*") or line.strip() == "int32_t"
                or "cimport" in code[
                max(0, m.start() - 60):m.start()]):
            bad.append(line)
    assert not bad, "32-bit or platform-sized integers in the kernels: " + "; ".join(bad)


def test_gather_scratch_check_is_the_kernels(monkeypatch):
    """The average-pool gradient refuses, at planning, per-thread scratch that could never
    fit in memory; the bytes it checks are what the kernel asks for
    (AvgGatherKernel.scratch_bytes) times the CPUs, on every path: float32 rows and regions
    (with their stage), 16-bit, float64, channels-last lanes, small planes stored whole."""
    from pool_grad import _plan, _threads, _validate

    seen = []
    real = _validate.memory_fits

    def record(nbytes, name, what):
        if what == "scratch rows":
            seen.append(nbytes)
        return real(nbytes, name, what)

    monkeypatch.setattr(_validate, "memory_fits", record)
    rng = np.random.default_rng(3)
    for region in (False, True):
        if region:   # streamed regions on every output (their stage counts)
            monkeypatch.setattr(_plan, "STREAM_BYTES", -1)
            monkeypatch.setattr(_plan, "STREAM_ROW_BYTES", 1 << 62)
            monkeypatch.setattr(_plan, "REGION_ROW_BYTES", 0)
            _plan.gather_geometry.cache_clear()
        for shape, k, s, p in [((2, 3, 40, 300), 3, 2, 1), ((1, 2, 9, 2000), 5, 1, 2),
                               ((2, 16, 6, 6), 3, 3, 0), ((1, 1, 7, 7), 7, 7, 0)]:
            for dt in (np.float32, np.float64, np.float16):
                for channels_last in (False, True):
                    x = np.zeros(shape, dt)
                    y = pg.avg_pool2d(x.astype(np.float32), k, s, p).astype(dt)
                    go = rng.standard_normal(y.shape).astype(dt)
                    gi = np.empty(shape, dt)
                    if channels_last:
                        go = np.ascontiguousarray(go.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)
                        gi = np.empty((shape[0], shape[2], shape[3], shape[1]),
                                      dt).transpose(0, 3, 1, 2)
                    seen.clear()
                    op = pg.AvgPool2dBackward(go, x, k, s, p, False, True, 0, 0, gi)
                    assert len(seen) == 1
                    assert seen[0] == _threads.CPU_COUNT * op._kernel.scratch_bytes, (
                        shape, dt, channels_last, region, op._kernel.c_item)
        for shape, out in [((2, 3, 5, 30, 300), (2, 7, 9)), ((1, 4, 4, 4, 4), (1, 1, 1))]:
            go = rng.standard_normal(shape[:2] + out).astype(np.float32)
            seen.clear()
            op = pg.AdaptiveAvgPool3dBackward(go, np.zeros(shape, np.float32),
                                              np.empty(shape, np.float32))
            assert len(seen) == 1 and seen[0] == _threads.CPU_COUNT * op._kernel.scratch_bytes
    _plan.gather_geometry.cache_clear()


@pytest.mark.parametrize("fn", ["avg_pool2d_backward", "AvgPool2dBackward",
                                "adaptive_avg_pool3d_backward"])
def test_gather_scratch_beyond_memory_is_161002(monkeypatch, fn):
    """Scratch that this machine's memory could not hold for every CPU: 161002 at
    planning, naming grad_output and the scratch, with grad_input untouched."""
    from pool_grad import _threads, _validate, functions

    monkeypatch.setattr(functions, "_cache", {})   # plan every call afresh
    if fn == "adaptive_avg_pool3d_backward":
        go = np.ones((2, 3, 1, 4, 4), np.float32)
        gi = np.full((2, 3, 1, 8, 8), 7.0, np.float32)
        op = pg.AdaptiveAvgPool3dBackward(go, gi, gi)
        call = lambda: pg.adaptive_avg_pool3d_backward(go, gi, out=gi)
    else:
        go = np.ones((2, 3, 4, 4), np.float32)
        gi = np.full((2, 3, 8, 8), 7.0, np.float32)
        op = pg.AvgPool2dBackward(go, gi, 2, 2, 0, False, True, 0, 0, gi)
        if fn == "avg_pool2d_backward":
            call = lambda: pg.avg_pool2d_backward(go, gi.shape, 2, 2, 0, out=gi)
        else:
            call = lambda: pg.AvgPool2dBackward(go, gi, 2, 2, 0, False, True, 0, 0, gi)
    need = _threads.CPU_COUNT * op._kernel.scratch_bytes
    monkeypatch.setattr(_validate, "physical_memory", lambda: need - 1)
    with pytest.raises(pg.ParamInvalidError, match="grad_output.*scratch rows") as e:
        call()
    assert e.value.code == 161002
    assert (gi == 7.0).all()

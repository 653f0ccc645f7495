"""SPEC §4 numerics shared by the three backward operators: 16-bit types accumulate in float32
and round once at the store, NaN/inf in grad_output propagate and never raise, and the result
does not depend on the thread count."""

import ml_dtypes
import numpy as np
import pytest

import pool_grad
from conftest import make_array
from reference import (
    ref_adaptive_avg_pool3d_backward,
    ref_adaptive_max_pool2d_backward,
    ref_avg_pool2d_backward,
    ref_avg_pool2d_output_size,
    tolerance,
)

BF16 = ml_dtypes.bfloat16
HALF_DTYPES = [np.float16, BF16]
ALL_DTYPES = [np.float32, np.float64, np.float16, BF16]


def _dt_id(dt):
    return np.dtype(dt).name


def _bits(a):
    return np.ascontiguousarray(a).view(np.uint8).tobytes()


def _ordered(a):
    """16-bit floats mapped to integers whose difference counts ulps (±0 both map to 0)."""
    u = np.ascontiguousarray(a).view(np.uint16).astype(np.int64)
    return np.where(u & 0x8000, -(u & 0x7FFF), u)


def _ulp_diff(a, b):
    return np.abs(_ordered(a) - _ordered(b))


# ---------------------------------------------------------------- the cases

class _AvgCase:
    name = "avg_pool2d_backward"

    def __init__(self, x_shape=(2, 3, 9, 8), k=(3, 3), s=(1, 2), p=(1, 1), ceil_mode=True,
                 cip=False, div=0):
        self.x_shape, self.k, self.s, self.p = x_shape, k, s, p
        self.ceil_mode, self.cip, self.div = ceil_mode, cip, div
        ho = ref_avg_pool2d_output_size(x_shape[-2], k[0], s[0], p[0], ceil_mode)
        wo = ref_avg_pool2d_output_size(x_shape[-1], k[1], s[1], p[1], ceil_mode)
        self.g_shape = tuple(x_shape[:-2]) + (ho, wo)

    def run(self, g, n_threads=None, out=None):
        return pool_grad.avg_pool2d_backward(
            g, self.x_shape, self.k, self.s, self.p, ceil_mode=self.ceil_mode,
            count_include_pad=self.cip, divisor_override=self.div, out=out, n_threads=n_threads)

    def ref(self, g):
        return ref_avg_pool2d_backward(np.asarray(g).astype(np.float64), self.x_shape, self.k,
                                       self.s, self.p, self.ceil_mode, self.cip, self.div)


class _AdaptiveAvgCase:
    name = "adaptive_avg_pool3d_backward"

    def __init__(self, x_shape=(2, 3, 5, 7, 6), osize=(3, 4, 4)):
        self.x_shape = x_shape
        self.g_shape = tuple(x_shape[:-3]) + osize

    def run(self, g, n_threads=None, out=None):
        return pool_grad.adaptive_avg_pool3d_backward(g, self.x_shape, out=out,
                                                      n_threads=n_threads)

    def ref(self, g):
        return ref_adaptive_avg_pool3d_backward(np.asarray(g).astype(np.float64), self.x_shape)


class _AdaptiveMaxCase:
    name = "adaptive_max_pool2d_backward"

    def __init__(self, x_shape=(2, 3, 4, 5), osize=(6, 7), idx_high=None, seed=0):
        self.x_shape = x_shape
        self.g_shape = tuple(x_shape[:-2]) + osize
        hw = x_shape[-2] * x_shape[-1]
        rng = np.random.default_rng(seed)
        self.idx = rng.integers(0, idx_high or hw, size=self.g_shape).astype(np.int64)

    def run(self, g, n_threads=None, out=None):
        return pool_grad.adaptive_max_pool2d_backward(g, self.x_shape, self.idx, out=out,
                                                      n_threads=n_threads)

    def ref(self, g):
        return ref_adaptive_max_pool2d_backward(np.asarray(g).astype(np.float64), self.x_shape,
                                                self.idx)


CASES = {
    "avg_ceil_no_pad_count": lambda: _AvgCase(),
    "avg_pad_count_div_override": lambda: _AvgCase((3, 7, 7), (3, 2), (1, 1), (1, 1), False,
                                                   True, -3),
    "avg_overlapping_k5_s1": lambda: _AvgCase((1, 2, 10, 10), (5, 5), (1, 1), (2, 2), False,
                                              True, 0),
    "adaptive_avg_non_dividing": lambda: _AdaptiveAvgCase(),
    "adaptive_avg_upsampling": lambda: _AdaptiveAvgCase((3, 2, 3, 2), (5, 7, 4)),
    "adaptive_max_random": lambda: _AdaptiveMaxCase(),
    "adaptive_max_hot_spots": lambda: _AdaptiveMaxCase((1, 2, 3, 3), (20, 20), idx_high=2),
}

# Large enough (1-3 MiB of traffic) that the library really splits the work between threads:
# it keeps small calls serial, which would make the thread-count tests vacuous.
BIG_CASES = {
    "avg_big": lambda: _AvgCase((8, 16, 64, 64), (3, 3), (2, 2), (1, 1), True, False, 0),
    "avg_big_div_override": lambda: _AvgCase((16, 64, 64), (5, 4), (1, 3), (2, 1), False,
                                             True, 7),
    "adaptive_avg_big": lambda: _AdaptiveAvgCase((4, 8, 16, 32, 64), (7, 13, 20)),
    "adaptive_max_big": lambda: _AdaptiveMaxCase((8, 16, 32, 32), (40, 40), seed=5),
    "adaptive_max_big_hot": lambda: _AdaptiveMaxCase((8, 16, 8, 8), (64, 64), idx_high=3),
}


# ---------------------------------------------------------------- rounded once

@pytest.mark.parametrize("scale", [1.0, 3e-5, 500.0])
@pytest.mark.parametrize("dtype", HALF_DTYPES, ids=_dt_id)
@pytest.mark.parametrize("case_name", list(CASES))
def test_16bit_result_is_float32_computation_rounded_once(case_name, dtype, scale):
    case = CASES[case_name]()
    rng = np.random.default_rng(1)
    g = make_array(case.g_shape, dtype, rng, low=-scale, high=scale)
    got = case.run(g)
    assert got.dtype == np.dtype(dtype)
    exact64 = case.ref(g)
    # elements whose sum cancels badly (sum of |terms| > 16 x |result|) may legitimately carry
    # a float32 accumulation error above half a 16-bit ulp; compare the well-conditioned rest
    abs_terms = case.ref(np.abs(g.astype(np.float64)))
    mask = abs_terms <= 16 * np.abs(exact64)
    assert mask.mean() > 0.5
    # pool_grad's own float32 path on the same (exactly widened) values, rounded once
    via_f32 = case.run(g.astype(np.float32)).astype(dtype)
    d = np.where(mask, _ulp_diff(got, via_f32), 0)
    assert d.max() <= 1, (d.max(), np.argwhere(d > 1)[:5])
    # and the exact (float64) result rounded once (RNE) is at most 1 ulp away
    d = np.where(mask, _ulp_diff(got, exact64.astype(dtype)), 0)
    assert d.max() <= 1, (d.max(), np.argwhere(d > 1)[:5])


@pytest.mark.parametrize("dtype", HALF_DTYPES, ids=_dt_id)
def test_avg_pool2d_backward_16bit_divides_and_sums_in_float32(dtype):
    # each interior element receives 9 contributions of g/9: rounding every step in the 16-bit
    # type would not give back exactly 1
    g = np.ones((1, 1, 5, 5), dtype)
    got = pool_grad.avg_pool2d_backward(g, (1, 1, 7, 7), 3, 1, 0)
    assert np.all(got[0, 0, 2:5, 2:5].astype(np.float32) == 1.0)
    np.testing.assert_array_equal(got.astype(np.float64),
                                  ref_avg_pool2d_backward(g, (1, 1, 7, 7), (3, 3), (1, 1),
                                                          (0, 0), False, True, 0).astype(dtype)
                                  .astype(np.float64))


@pytest.mark.parametrize("dtype", HALF_DTYPES, ids=_dt_id)
def test_adaptive_avg_pool3d_backward_16bit_divides_and_sums_in_float32(dtype):
    # input 5 -> output 3 per axis: windows [0,2) [1,4) [3,5); the middle elements receive
    # several g/k contributions with k in {8, 12, 18, 27}
    g = np.full((1, 1, 3, 3, 3), 0.3, np.float64).astype(dtype)
    got = pool_grad.adaptive_avg_pool3d_backward(g, (1, 1, 5, 5, 5))
    exact = ref_adaptive_avg_pool3d_backward(g, (1, 1, 5, 5, 5))
    # every exact value lies > 3e-5 (relative) from a 16-bit rounding midpoint, far more than
    # float32 accumulation error: rounding once must give exactly the rounded exact value
    np.testing.assert_array_equal(got.astype(np.float64),
                                  exact.astype(dtype).astype(np.float64))


@pytest.mark.parametrize("n,dtype", [(3000, np.float16), (300, BF16)], ids=["float16", "bfloat16"])
def test_adaptive_max_pool2d_backward_16bit_accumulates_in_float32(n, dtype):
    # summing n ones in the 16-bit type stalls at 2048 (float16) / 256 (bfloat16)
    g = np.ones((1, 1, 1, n), dtype)
    idx = np.zeros((1, 1, 1, n), np.int32)
    got = pool_grad.adaptive_max_pool2d_backward(g, (1, 1, 2, 2), idx)
    np.testing.assert_array_equal(got.astype(np.float64), [[[[float(n), 0.0], [0.0, 0.0]]]])


def test_adaptive_max_pool2d_backward_float16_intermediate_overflow_is_not_rounded():
    # 60000 + 60000 overflows float16 but not float32; the final 60000 is representable
    g = np.array([[[[60000.0, 60000.0, -60000.0]]]], np.float16)
    idx = np.zeros((1, 1, 1, 3), np.int64)
    got = pool_grad.adaptive_max_pool2d_backward(g, (1, 1, 1, 2), idx)
    np.testing.assert_array_equal(got, np.array([[[[60000.0, 0.0]]]], np.float16))


@pytest.mark.parametrize("dtype", HALF_DTYPES, ids=_dt_id)
def test_16bit_overflow_at_the_store_gives_inf(dtype):
    big = 60000.0 if dtype == np.float16 else 3.0e38
    g = np.full((1, 1, 1, 4), big, dtype)
    idx = np.zeros((1, 1, 1, 4), np.int64)
    got = pool_grad.adaptive_max_pool2d_backward(g, (1, 1, 1, 1), idx)
    assert np.isposinf(got.astype(np.float64)).all()


# ---------------------------------------------------------------- NaN / inf propagate

@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=_dt_id)
@pytest.mark.parametrize("case_name", list(CASES))
def test_nan_and_inf_in_grad_output_propagate_and_never_raise(case_name, dtype):
    case = CASES[case_name]()
    rng = np.random.default_rng(2)
    g = make_array(case.g_shape, dtype, rng)
    flat = g.reshape(-1)
    n = flat.size
    flat[n // 7] = np.nan
    flat[n // 3] = np.inf
    flat[n // 2] = -np.inf
    flat[(2 * n) // 3] = np.inf
    flat[(2 * n) // 3 + 1] = -np.inf       # neighbours: their windows overlap -> inf - inf
    with np.errstate(all="ignore"):
        want = case.ref(g)
        got = case.run(g)
    assert np.isnan(want).any()            # the case really exercises propagation
    got64 = got.astype(np.float64)
    np.testing.assert_array_equal(np.isnan(got64), np.isnan(want))
    np.testing.assert_array_equal(np.isposinf(got64), np.isposinf(want))
    np.testing.assert_array_equal(np.isneginf(got64), np.isneginf(want))
    finite = np.isfinite(want)
    rtol, atol = tolerance(dtype)
    np.testing.assert_allclose(got64[finite], want[finite], rtol=rtol, atol=atol)


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=_dt_id)
def test_all_nan_grad_output_gives_nan_wherever_a_window_covers(dtype):
    with np.errstate(all="ignore"):
        g = np.full((1, 2, 2, 2), np.nan, dtype)
        got = pool_grad.avg_pool2d_backward(g, (1, 2, 5, 5), 2, 2, 0)
    got64 = got.astype(np.float64)
    assert np.isnan(got64[..., :4, :4]).all()
    assert (got64[..., 4, :] == 0).all() and (got64[..., :, 4] == 0).all()
    with np.errstate(all="ignore"):
        got = pool_grad.adaptive_max_pool2d_backward(
            g, (1, 2, 3, 3), np.full(g.shape, 4, np.int64))
        got64 = got.astype(np.float64)
    assert np.isnan(got64[:, :, 1, 1]).all()
    got64[:, :, 1, 1] = 0
    assert (got64 == 0).all()
    with np.errstate(all="ignore"):
        got = pool_grad.adaptive_avg_pool3d_backward(g[:, :, None], (1, 2, 1, 3, 3))
    assert np.isnan(got.astype(np.float64)).all()


# ---------------------------------------------------------------- thread-count invariance

@pytest.mark.parametrize("dtype", HALF_DTYPES, ids=_dt_id)
@pytest.mark.parametrize("case_name", list(BIG_CASES))
def test_16bit_results_are_identical_for_every_thread_count(case_name, dtype):
    case = BIG_CASES[case_name]()
    rng = np.random.default_rng(3)
    g = make_array(case.g_shape, dtype, rng, low=-2.0, high=3.0)
    first = _bits(case.run(g, n_threads=1))
    for n in (2, 3, 4):
        assert _bits(case.run(g, n_threads=n)) == first, n
    assert _bits(case.run(g)) == first


@pytest.mark.parametrize("layout", ["f", "channels_last", "negative"])
@pytest.mark.parametrize("dtype", HALF_DTYPES, ids=_dt_id)
@pytest.mark.parametrize("case_name", ["avg_big", "adaptive_avg_big", "adaptive_max_big"])
def test_16bit_results_identical_for_every_thread_count_and_layout(case_name, dtype, layout):
    case = BIG_CASES[case_name]()
    rng = np.random.default_rng(4)
    g = make_array(case.g_shape, dtype, rng, layout, low=-2.0, high=3.0)
    first = _bits(case.run(np.ascontiguousarray(g), n_threads=1))
    for n in (1, 2, 3, 4):
        assert _bits(case.run(g, n_threads=n)) == first, n


@pytest.mark.parametrize("dtype", HALF_DTYPES, ids=_dt_id)
@pytest.mark.parametrize("case_name", ["avg_big", "adaptive_avg_big", "adaptive_max_big_hot"])
def test_16bit_results_identical_for_every_thread_count_into_strided_out(case_name, dtype):
    case = BIG_CASES[case_name]()
    rng = np.random.default_rng(5)
    g = make_array(case.g_shape, dtype, rng, low=-2.0, high=3.0)
    first = _bits(case.run(g, n_threads=1))
    for n in (1, 2, 4):
        out = np.full(case.x_shape[::-1], 7, dtype).T     # Fortran-ordered output
        case.run(g, n_threads=n, out=out)
        assert _bits(out) == first, n

"""Forward companions (PyTorch forward semantics): avg_pool2d, adaptive_avg_pool3d,
adaptive_max_pool2d — against the float64 reference, against torch when importable, and the
adjoint identity that ties each forward to its backward operator."""

import ml_dtypes
import numpy as np
import pytest

import pool_grad
from conftest import DTYPES, LAYOUTS, make_array
from reference import (
    ref_adaptive_avg_pool3d,
    ref_adaptive_max_pool2d,
    ref_avg_pool2d,
    tolerance,
)


def _dt_id(dt):
    return np.dtype(dt).name


def _pair(v, default=None):
    if v is None:
        return default
    if np.ndim(v) == 0:
        return (int(v), int(v))
    v = tuple(int(e) for e in v)
    if len(v) == 0:
        return default
    return v * 2 if len(v) == 1 else v


def _assert_close(got, ref, dtype):
    rtol, atol = tolerance(dtype)
    np.testing.assert_allclose(np.asarray(got).astype(np.float64), ref, rtol=rtol, atol=atol)


# ================================================================= avg_pool2d

# (x shape, kernel, stride, padding, ceil_mode, count_include_pad, divisor_override)
AVG_GRID = [
    ((1, 2, 6, 6), 2, None, 0, False, True, 0),
    ((1, 16, 4, 4), 4, 1, 0, False, True, 0),
    ((2, 3, 7, 5), 3, 2, 1, True, True, 0),
    ((2, 3, 7, 5), 3, 2, 1, True, False, 0),
    ((2, 3, 7, 5), (3, 2), (2, 1), (1, 0), False, False, 0),
    ((3, 5, 6), 3, 2, 1, True, False, 0),
    ((1, 2, 5, 5), 2, 2, 1, True, True, 3),
    ((2, 2, 9, 8), (3, 3), (3, 2), (1, 1), True, False, -2),
    ((1, 1, 5, 4), (1, 2), (1, 3), (0, 1), True, True, 0),
    ((2, 1, 6, 7), (4, 3), (3, 3), (2, 1), True, False, 0),
    ((4, 3, 3), (2,), (), (1,), False, True, 0),
    ((1, 3, 8, 8), 5, 3, 2, True, True, 7),
]
AVG_IDS = [f"avg{i}" for i in range(len(AVG_GRID))]


def _avg_ref(x, k, s, p, ceil_mode, cip, div):
    kk = _pair(k)
    return ref_avg_pool2d(np.asarray(x).astype(np.float64), kk, _pair(s, kk), _pair(p),
                          ceil_mode, cip, div)


def _avg(x, k, s, p, ceil_mode, cip, div):
    return pool_grad.avg_pool2d(x, k, s, p, ceil_mode, cip, div)


@pytest.mark.parametrize("dtype", DTYPES, ids=_dt_id)
@pytest.mark.parametrize("params", AVG_GRID, ids=AVG_IDS)
def test_avg_pool2d_matches_reference(params, dtype):
    x_shape, *rest = params
    rng = np.random.default_rng(1)
    x = make_array(x_shape, dtype, rng)
    y = _avg(x, *rest)
    want = _avg_ref(x, *rest)
    assert y.dtype == np.dtype(dtype)
    assert y.shape == want.shape
    _assert_close(y, want, dtype)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("params", AVG_GRID[2:5], ids=AVG_IDS[2:5])
def test_avg_pool2d_non_contiguous_x(params, layout):
    x_shape, *rest = params
    rng = np.random.default_rng(2)
    x = make_array(x_shape, np.float64, rng, layout)
    np.testing.assert_allclose(_avg(x, *rest), _avg_ref(x, *rest), rtol=1e-12, atol=1e-14)


def test_avg_pool2d_keyword_defaults():
    rng = np.random.default_rng(3)
    x = make_array((2, 3, 6, 4), np.float32, rng)
    y = pool_grad.avg_pool2d(x, 2)
    _assert_close(y, _avg_ref(x, 2, None, 0, False, True, 0), np.float32)
    y2 = pool_grad.avg_pool2d(x, kernel_size=(3, 2), stride=(1, 2), padding=(1, 1),
                              ceil_mode=True, count_include_pad=False, divisor_override=0)
    _assert_close(y2, _avg_ref(x, (3, 2), (1, 2), (1, 1), True, False, 0), np.float32)


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=_dt_id)
@pytest.mark.parametrize("params", AVG_GRID, ids=AVG_IDS)
def test_avg_pool2d_matches_torch(params, dtype):
    torch = pytest.importorskip("torch")
    x_shape, k, s, p, ceil_mode, cip, div = params
    rng = np.random.default_rng(4)
    x = rng.standard_normal(x_shape).astype(dtype)
    kk = _pair(k)
    want = torch.nn.functional.avg_pool2d(
        torch.from_numpy(x), kk, _pair(s, kk), _pair(p), ceil_mode, cip,
        divisor_override=div or None).numpy()
    got = _avg(x, k, s, p, ceil_mode, cip, div)
    assert got.shape == want.shape
    if dtype == np.float32:
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    else:
        np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-14)


@pytest.mark.parametrize("params", AVG_GRID, ids=AVG_IDS)
def test_avg_pool2d_adjoint_of_avg_pool2d_backward(params):
    x_shape, k, s, p, ceil_mode, cip, div = params
    rng = np.random.default_rng(5)
    x = rng.standard_normal(x_shape)
    y = _avg(x, k, s, p, ceil_mode, cip, div)
    g = rng.standard_normal(y.shape)
    gi = pool_grad.avg_pool2d_backward(g, x, k, s, p, ceil_mode=ceil_mode,
                                       count_include_pad=cip, divisor_override=div)
    assert gi.shape == x.shape
    np.testing.assert_allclose(np.vdot(y, g), np.vdot(x, gi), rtol=1e-12, atol=1e-13)


def test_avg_pool2d_worked_example_forward_of_ones():
    y = pool_grad.avg_pool2d(np.ones((1, 16, 4, 4), np.float32), 4, 1, 0)
    np.testing.assert_array_equal(y, np.ones((1, 16, 1, 1), np.float32))


# ================================================================= adaptive_avg_pool3d

# (x shape, output_size as passed)
AAVG_GRID = [
    ((2, 3, 4, 6, 8), (2, 3, 4)),
    ((1, 2, 5, 7, 3), (3, 4, 2)),
    ((2, 2, 2, 3, 2), (5, 4, 3)),   # larger than input
    ((1, 3, 3, 4, 5), 1),           # int output size
    ((1, 2, 3, 3, 3), 5),
    ((3, 5, 6, 4), (2, 3, 4)),      # 4-D
    ((2, 3, 1, 5), (1, 2, 7)),
    ((2, 1, 1, 1), 3),
]
AAVG_IDS = [f"aavg{i}" for i in range(len(AAVG_GRID))]


def _triple(v):
    return (v,) * 3 if np.ndim(v) == 0 else tuple(v)


@pytest.mark.parametrize("dtype", DTYPES, ids=_dt_id)
@pytest.mark.parametrize("x_shape,osize", AAVG_GRID, ids=AAVG_IDS)
def test_adaptive_avg_pool3d_matches_reference(x_shape, osize, dtype):
    rng = np.random.default_rng(6)
    x = make_array(x_shape, dtype, rng)
    y = pool_grad.adaptive_avg_pool3d(x, osize)
    want = ref_adaptive_avg_pool3d(x.astype(np.float64), _triple(osize))
    assert y.dtype == np.dtype(dtype)
    assert y.shape == tuple(x_shape[:-3]) + _triple(osize)
    _assert_close(y, want, dtype)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("x_shape,osize", AAVG_GRID[:2] + AAVG_GRID[5:6])
def test_adaptive_avg_pool3d_non_contiguous_x(x_shape, osize, layout):
    rng = np.random.default_rng(7)
    x = make_array(x_shape, np.float32, rng, layout)
    y = pool_grad.adaptive_avg_pool3d(x, osize)
    _assert_close(y, ref_adaptive_avg_pool3d(x.astype(np.float64), _triple(osize)), np.float32)


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=_dt_id)
@pytest.mark.parametrize("x_shape,osize", AAVG_GRID, ids=AAVG_IDS)
def test_adaptive_avg_pool3d_matches_torch(x_shape, osize, dtype):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(8)
    x = rng.standard_normal(x_shape).astype(dtype)
    want = torch.nn.functional.adaptive_avg_pool3d(torch.from_numpy(x), osize).numpy()
    got = pool_grad.adaptive_avg_pool3d(x, osize)
    assert got.shape == want.shape
    if dtype == np.float32:
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    else:
        np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-14)


# ================================================================= adaptive_max_pool2d

AMAX_GRID = [
    ((2, 3, 4, 6), (2, 3)),
    ((1, 2, 5, 7), (3, 4)),
    ((2, 2, 3, 3), (5, 6)),   # larger than input
    ((3, 4, 6), 1),           # 3-D, int size
    ((4, 5, 5), (3, 2)),
    ((1, 1, 1, 1), 2),
    ((2, 3, 7, 4), (7, 4)),   # identity
]
AMAX_IDS = [f"amax{i}" for i in range(len(AMAX_GRID))]


def _pair_size(v):
    return (v, v) if np.ndim(v) == 0 else tuple(v)


@pytest.mark.parametrize("dtype", DTYPES, ids=_dt_id)
@pytest.mark.parametrize("x_shape,osize", AMAX_GRID, ids=AMAX_IDS)
def test_adaptive_max_pool2d_matches_reference_values_and_indices(x_shape, osize, dtype):
    rng = np.random.default_rng(9)
    x = make_array(x_shape, dtype, rng)
    y, idx = pool_grad.adaptive_max_pool2d(x, osize, return_indices=True)
    want_y, want_idx = ref_adaptive_max_pool2d(x.astype(np.float64), _pair_size(osize))
    assert y.dtype == np.dtype(dtype)
    assert idx.dtype == np.int64
    assert y.shape == idx.shape == tuple(x_shape[:-2]) + _pair_size(osize)
    np.testing.assert_array_equal(y.astype(np.float64), want_y)   # a max is exact
    np.testing.assert_array_equal(idx, want_idx)


@pytest.mark.parametrize("x_shape,osize", AMAX_GRID[:3], ids=AMAX_IDS[:3])
def test_adaptive_max_pool2d_without_indices_returns_only_values(x_shape, osize):
    rng = np.random.default_rng(10)
    x = make_array(x_shape, np.float32, rng)
    y = pool_grad.adaptive_max_pool2d(x, osize)
    assert isinstance(y, np.ndarray)
    y2, _ = pool_grad.adaptive_max_pool2d(x, osize, return_indices=True)
    np.testing.assert_array_equal(y, y2)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("x_shape,osize", AMAX_GRID[:2] + AMAX_GRID[4:5])
def test_adaptive_max_pool2d_non_contiguous_x(x_shape, osize, layout):
    rng = np.random.default_rng(11)
    x = make_array(x_shape, np.float32, rng, layout)
    y, idx = pool_grad.adaptive_max_pool2d(x, osize, return_indices=True)
    want_y, want_idx = ref_adaptive_max_pool2d(x.astype(np.float64), _pair_size(osize))
    np.testing.assert_array_equal(y.astype(np.float64), want_y)
    np.testing.assert_array_equal(idx, want_idx)


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=_dt_id)
@pytest.mark.parametrize("x_shape,osize", AMAX_GRID, ids=AMAX_IDS)
def test_adaptive_max_pool2d_matches_torch(x_shape, osize, dtype):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(12)
    x = rng.standard_normal(x_shape).astype(dtype)
    want_y, want_idx = torch.nn.functional.adaptive_max_pool2d(
        torch.from_numpy(x), osize, return_indices=True)
    y, idx = pool_grad.adaptive_max_pool2d(x, osize, return_indices=True)
    np.testing.assert_array_equal(y, want_y.numpy())
    np.testing.assert_array_equal(idx, want_idx.numpy())


@pytest.mark.parametrize("dtype", DTYPES, ids=_dt_id)
def test_adaptive_max_pool2d_first_maximum_wins_on_ties(dtype):
    x = np.array([[[[3, 1, 3], [2, 3, 0]], [[-1, -1, -1], [-1, -1, -1]]]], dtype)
    y, idx = pool_grad.adaptive_max_pool2d(x, (1, 1), return_indices=True)
    np.testing.assert_array_equal(idx, [[[[0]], [[0]]]])
    np.testing.assert_array_equal(y.astype(np.float64), [[[[3.0]], [[-1.0]]]])
    y, idx = pool_grad.adaptive_max_pool2d(x, (1, 2), return_indices=True)
    # windows: columns [0, 2) and [1, 3)
    np.testing.assert_array_equal(idx, [[[[0, 2]], [[0, 1]]]])


def _nan_planes(dtype):
    nan = np.nan
    return np.array([[[1.0, 9.0, nan], [nan, 2.0, 8.0]],
                     [[nan, 5.0, 6.0], [7.0, 8.0, 9.0]],
                     [[1.0, 2.0, 3.0], [4.0, 5.0, nan]],
                     [[nan, nan, nan], [nan, 3.0, 1.0]]], dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=_dt_id)
def test_adaptive_max_pool2d_nan_is_the_maximum_and_the_last_nan_wins_as_in_pytorch(dtype):
    # PyTorch's CPU kernel: a later element replaces the running maximum if it is greater or
    # NaN, so with several NaNs in a window the last one (row-major) is reported
    x = _nan_planes(dtype)
    y, idx = pool_grad.adaptive_max_pool2d(x, 1, return_indices=True)
    np.testing.assert_array_equal(idx, [[[3]], [[0]], [[5]], [[3]]])
    assert np.isnan(y.astype(np.float64)).all()
    want_y, want_idx = ref_adaptive_max_pool2d(x.astype(np.float64), (1, 1))
    np.testing.assert_array_equal(idx, want_idx)


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=_dt_id)
def test_adaptive_max_pool2d_several_nans_per_window_match_torch(dtype):
    torch = pytest.importorskip("torch")
    x = _nan_planes(dtype)[None]
    rng = np.random.default_rng(17)
    x2 = rng.standard_normal((2, 3, 7, 6)).astype(dtype)
    x2[rng.random(x2.shape) < 0.2] = np.nan
    for arr, size in ((x, (1, 1)), (x, (2, 2)), (x2, (3, 4)), (x2, (5, 5))):
        want_y, want_idx = torch.nn.functional.adaptive_max_pool2d(
            torch.from_numpy(arr), size, return_indices=True)
        y, idx = pool_grad.adaptive_max_pool2d(arr, size, return_indices=True)
        np.testing.assert_array_equal(idx, want_idx.numpy())
        np.testing.assert_array_equal(y, want_y.numpy())


@pytest.mark.parametrize("dtype", DTYPES, ids=_dt_id)
def test_adaptive_max_pool2d_all_minus_inf_window_picks_its_first_element(dtype):
    x = np.full((1, 1, 3, 4), -np.inf, dtype)
    y, idx = pool_grad.adaptive_max_pool2d(x, (2, 2), return_indices=True)
    # windows start at rows 0, 1 and columns 0, 2
    np.testing.assert_array_equal(idx, [[[[0, 2], [4, 6]]]])
    assert np.all(np.isneginf(y.astype(np.float64)))


def test_adaptive_max_pool2d_nan_with_single_nan_per_window_matches_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(13)
    x = rng.standard_normal((2, 3, 6, 6)).astype(np.float32)
    x[0, 0, 1, 1] = np.nan
    x[1, 2, 5, 0] = np.nan
    want_y, want_idx = torch.nn.functional.adaptive_max_pool2d(
        torch.from_numpy(x), (3, 3), return_indices=True)
    y, idx = pool_grad.adaptive_max_pool2d(x, (3, 3), return_indices=True)
    np.testing.assert_array_equal(idx, want_idx.numpy())
    np.testing.assert_array_equal(y, want_y.numpy())   # NaN == NaN in assert_array_equal


def test_adaptive_avg_pool3d_nan_propagates_only_to_windows_containing_it():
    x = np.ones((1, 1, 2, 2, 4), np.float32)
    x[0, 0, 0, 0, 0] = np.nan
    y = pool_grad.adaptive_avg_pool3d(x, (1, 1, 2))
    assert np.isnan(y[0, 0, 0, 0, 0])
    assert y[0, 0, 0, 0, 1] == 1.0


@pytest.mark.parametrize("x_shape,osize", AMAX_GRID, ids=AMAX_IDS)
def test_adaptive_max_pool2d_adjoint_of_its_backward(x_shape, osize):
    rng = np.random.default_rng(14)
    x = rng.standard_normal(x_shape)
    y, idx = pool_grad.adaptive_max_pool2d(x, osize, return_indices=True)
    g = rng.standard_normal(y.shape)
    gi = pool_grad.adaptive_max_pool2d_backward(g, x, idx)
    np.testing.assert_allclose(np.vdot(y, g), np.vdot(x, gi), rtol=1e-12, atol=1e-13)


@pytest.mark.parametrize("x_shape,osize", AAVG_GRID, ids=AAVG_IDS)
def test_adaptive_avg_pool3d_adjoint_of_its_backward(x_shape, osize):
    rng = np.random.default_rng(15)
    x = rng.standard_normal(x_shape)
    y = pool_grad.adaptive_avg_pool3d(x, osize)
    g = rng.standard_normal(y.shape)
    gi = pool_grad.adaptive_avg_pool3d_backward(g, x)
    np.testing.assert_allclose(np.vdot(y, g), np.vdot(x, gi), rtol=1e-12, atol=1e-13)


def test_forward_outputs_are_new_c_contiguous_arrays():
    rng = np.random.default_rng(16)
    x4 = make_array((2, 3, 6, 5), np.float32, rng, "f")
    x5 = make_array((2, 3, 4, 6, 5), ml_dtypes.bfloat16, rng, "channels_last")
    for y in (pool_grad.avg_pool2d(x4, 2), pool_grad.adaptive_max_pool2d(x4, 3),
              pool_grad.adaptive_max_pool2d(x4, 3, return_indices=True)[1],
              pool_grad.adaptive_avg_pool3d(x5, 2)):
        assert y.flags.c_contiguous
        assert not np.shares_memory(y, x4) and not np.shares_memory(y, x5)

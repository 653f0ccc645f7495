"""Tests for adaptive_max_pool2d_backward (SPEC §1.3, §2, §3, §4, §5)."""

import re

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, strategies as st

import pool_grad
from pool_grad import AclnnError, ParamInvalidError, ParamNullptrError
from conftest import DTYPES, as_layout, make_array
from reference import ref_adaptive_max_pool2d_backward, tolerance

GO = ("grad_output", "gradOutput")
X = ("x", "self")
OUT = ("out", "grad_input", "gradInput")
IDX = ("indices",)

NULLPTR = 161001
INVALID = 161002

LAYOUTS = ["c", "f", "channels_last", "sliced", "negative"]

# (x shape, grad_output / indices spatial size)
SHAPE_GRID = [
    ((2, 3, 4, 5), (2, 2)),
    ((1, 2, 5, 7), (3, 4)),
    ((2, 2, 3, 3), (5, 6)),   # output larger than input: indices repeat
    ((3, 4, 6), (1, 1)),      # 3-D, global max
    ((4, 5, 5), (3, 2)),      # 3-D
    ((1, 1, 1, 1), (2, 3)),   # 1x1 plane: every index is 0
]


def _dt_id(dt):
    return np.dtype(dt).name


def _go_shape(x_shape, osize):
    return tuple(x_shape[:-2]) + tuple(osize)


def _bits(a):
    return np.ascontiguousarray(a).view(np.uint8).tobytes()


def _random_indices(shape, hw, rng, dtype=np.int64, high=None):
    return rng.integers(0, hw if high is None else high, size=shape).astype(dtype)


def _ref(g, x_shape, idx):
    return ref_adaptive_max_pool2d_backward(np.asarray(g).astype(np.float64), tuple(x_shape),
                                            np.asarray(idx))


def _assert_close(got, ref, dtype):
    rtol, atol = tolerance(dtype)
    np.testing.assert_allclose(np.asarray(got).astype(np.float64), ref, rtol=rtol, atol=atol)


def _assert_error(excinfo, cls, code, names, value=None):
    e = excinfo.value
    assert isinstance(e, cls), type(e)
    assert isinstance(e, AclnnError)
    assert e.code == code
    msg = str(e)
    assert any(re.search(r"(?<![A-Za-z0-9_])" + re.escape(n) + r"(?![A-Za-z0-9_])", msg)
               for n in names), msg
    if value is not None:
        assert value in msg, msg


def _sentinel_out(shape, dtype, layout="c"):
    """An output pre-filled with a recognisable, non-trivial bit pattern."""
    n = int(np.prod(shape))
    vals = (np.arange(n, dtype=np.float64) * 0.37 - 11.0).reshape(shape)
    return as_layout(vals.astype(dtype), layout)


# ---------------------------------------------------------------- values vs reference

@pytest.mark.parametrize("idx_dtype", [np.int32, np.int64], ids=_dt_id)
@pytest.mark.parametrize("dtype", DTYPES, ids=_dt_id)
@pytest.mark.parametrize("x_shape,osize", SHAPE_GRID)
def test_matches_reference_over_shape_dtype_and_index_dtype_grid(x_shape, osize, dtype, idx_dtype):
    rng = np.random.default_rng(hash((x_shape, osize)) % 2**32)
    hw = x_shape[-2] * x_shape[-1]
    g = make_array(_go_shape(x_shape, osize), dtype, rng)
    idx = _random_indices(g.shape, hw, rng, idx_dtype)
    got = pool_grad.adaptive_max_pool2d_backward(g, np.zeros(x_shape, dtype), idx)
    assert got.shape == x_shape and got.dtype == np.dtype(dtype)
    assert got.flags.c_contiguous
    _assert_close(got, _ref(g, x_shape, idx), dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=_dt_id)
def test_repeated_indices_accumulate(dtype):
    g = np.array([[[[0.5, 0.25], [1.0, 2.0]]]], dtype)
    idx = np.array([[[[3, 3], [0, 3]]]], np.int64)
    got = pool_grad.adaptive_max_pool2d_backward(g, (1, 1, 2, 2), idx)
    np.testing.assert_array_equal(got.astype(np.float64), [[[[1.0, 0.0], [0.0, 2.75]]]])


def test_indices_address_their_own_plane():
    # the same flat index in different (n, c) planes must land in different planes
    g = np.arange(1, 7, dtype=np.float64).reshape(2, 3, 1, 1)
    idx = np.full((2, 3, 1, 1), 5, np.int32)
    got = pool_grad.adaptive_max_pool2d_backward(g, (2, 3, 2, 3), idx)
    want = np.zeros((2, 3, 2, 3))
    want[:, :, 1, 2] = g[:, :, 0, 0]
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("idx_layout", LAYOUTS + ["broadcast"])
@pytest.mark.parametrize("idx_dtype", [np.int32, np.int64], ids=_dt_id)
def test_non_contiguous_indices(idx_layout, idx_dtype):
    rng = np.random.default_rng(1)
    x_shape = (2, 3, 4, 5)
    g = make_array((2, 3, 3, 4), np.float32, rng)
    idx = as_layout(_random_indices(g.shape, 20, rng, idx_dtype), idx_layout)
    got = pool_grad.adaptive_max_pool2d_backward(g, x_shape, idx)
    _assert_close(got, _ref(g, x_shape, idx), np.float32)


@pytest.mark.parametrize("dtype", DTYPES, ids=_dt_id)
@pytest.mark.parametrize("g_layout", LAYOUTS + ["broadcast"])
@pytest.mark.parametrize("x_shape", [(2, 3, 4, 5), (3, 4, 5)])
def test_non_contiguous_grad_output(x_shape, g_layout, dtype):
    rng = np.random.default_rng(2)
    g = make_array(_go_shape(x_shape, (3, 2)), dtype, rng, g_layout)
    idx = _random_indices(g.shape, x_shape[-2] * x_shape[-1], rng)
    got = pool_grad.adaptive_max_pool2d_backward(g, np.empty(x_shape, dtype), idx)
    _assert_close(got, _ref(g, x_shape, idx), dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=_dt_id)
@pytest.mark.parametrize("out_layout", LAYOUTS)
@pytest.mark.parametrize("x_shape", [(2, 3, 4, 5), (3, 4, 5)])
def test_out_in_any_layout_is_fully_written_and_returned(x_shape, out_layout, dtype):
    rng = np.random.default_rng(3)
    g = make_array(_go_shape(x_shape, (2, 3)), dtype, rng)
    idx = _random_indices(g.shape, x_shape[-2] * x_shape[-1], rng, np.int32)
    out = _sentinel_out(x_shape, dtype, out_layout)
    res = pool_grad.adaptive_max_pool2d_backward(g, x_shape, idx, out=out)
    assert res is out
    _assert_close(out, _ref(g, x_shape, idx), dtype)


@pytest.mark.parametrize("idx_dtype", [np.int32, np.int64], ids=_dt_id)
def test_channels_last_grad_output_indices_and_out_together(idx_dtype):
    rng = np.random.default_rng(4)
    x_shape = (2, 5, 6, 7)
    g = make_array((2, 5, 4, 3), np.float64, rng, "channels_last")
    idx = as_layout(_random_indices(g.shape, 42, rng, idx_dtype), "channels_last")
    out = _sentinel_out(x_shape, np.float64, "channels_last")
    pool_grad.adaptive_max_pool2d_backward(g, x_shape, idx, out=out)
    np.testing.assert_allclose(out, _ref(g, x_shape, idx), rtol=1e-13, atol=1e-15)


def test_x_given_as_shape_tuple_equals_x_given_as_array():
    rng = np.random.default_rng(5)
    g = make_array((2, 3, 2, 2), np.float32, rng)
    idx = _random_indices(g.shape, 12, rng)
    x = np.ones((2, 3, 3, 4), np.float32)
    a = pool_grad.adaptive_max_pool2d_backward(g, x, idx)
    b = pool_grad.adaptive_max_pool2d_backward(g, x.shape, idx)
    assert b.dtype == np.float32
    assert _bits(a) == _bits(b)


def test_nested_lists_are_converted_with_asarray():
    got = pool_grad.adaptive_max_pool2d_backward([[[[1.5, 2.0]]]], np.zeros((1, 1, 2, 2)),
                                                 [[[[3, 3]]]])
    np.testing.assert_array_equal(got, [[[[0.0, 0.0], [0.0, 3.5]]]])


# ---------------------------------------------------------------- vs torch / forward indices

@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=_dt_id)
@pytest.mark.parametrize("x_shape,osize", SHAPE_GRID)
def test_matches_torch_with_indices_from_torch_forward(x_shape, osize, dtype):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(6)
    x = rng.standard_normal(x_shape).astype(dtype)
    g = rng.standard_normal(_go_shape(x_shape, osize)).astype(dtype)
    xt = torch.from_numpy(x)
    _, idx_t = torch.nn.functional.adaptive_max_pool2d(xt, osize, return_indices=True)
    want = torch.ops.aten.adaptive_max_pool2d_backward(torch.from_numpy(g), xt, idx_t).numpy()
    got = pool_grad.adaptive_max_pool2d_backward(g, x, idx_t.numpy())
    if dtype == np.float32:
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    else:
        np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-14)


@pytest.mark.parametrize("dtype", DTYPES, ids=_dt_id)
@pytest.mark.parametrize("x_shape,osize", SHAPE_GRID)
def test_indices_from_pool_grad_forward_are_accepted(x_shape, osize, dtype):
    rng = np.random.default_rng(7)
    x = make_array(x_shape, dtype, rng)
    y, idx = pool_grad.adaptive_max_pool2d(x, osize, return_indices=True)
    assert idx.dtype == np.int64 and idx.shape == y.shape
    g = make_array(y.shape, dtype, rng)
    got = pool_grad.adaptive_max_pool2d_backward(g, x, idx)
    _assert_close(got, _ref(g, x_shape, idx), dtype)


# ---------------------------------------------------------------- out-of-range indices

BAD_INDEX = [
    ("equal_to_hw", lambda hw: hw, np.int64),
    ("minus_one", lambda hw: -1, np.int64),
    ("very_negative", lambda hw: -(2**40), np.int64),
    ("huge", lambda hw: 2**40, np.int64),
    ("int64_max", lambda hw: 2**63 - 1, np.int64),
    ("int64_min", lambda hw: -(2**63), np.int64),
    ("int32_equal_to_hw", lambda hw: hw, np.int32),
    ("int32_max", lambda hw: 2**31 - 1, np.int32),
    ("int32_min", lambda hw: -(2**31), np.int32),
    ("int32_minus_one", lambda hw: -1, np.int32),
]


@pytest.mark.parametrize("where", ["first", "middle", "last"])
@pytest.mark.parametrize("bad", BAD_INDEX, ids=[b[0] for b in BAD_INDEX])
def test_index_outside_plane_is_161002_from_execute_and_leaves_out_unchanged(bad, where):
    _, value, idx_dtype = bad
    rng = np.random.default_rng(8)
    x_shape = (3, 4, 5, 6)
    hw = 30
    g = make_array((3, 4, 7, 5), np.float32, rng)
    idx = _random_indices(g.shape, hw, rng, idx_dtype)
    pos = {"first": (0, 0, 0, 0), "middle": (1, 2, 3, 2), "last": (2, 3, 6, 4)}[where]
    idx[pos] = value(hw)
    out = _sentinel_out(x_shape, np.float32)
    before = _bits(out)
    op = pool_grad.AdaptiveMaxPool2dBackward(g, np.empty(x_shape, np.float32), idx, out)
    for n in (1, 4):
        with pytest.raises(ParamInvalidError) as ei:
            op.execute(n_threads=n)
        assert ei.value.code == INVALID
        assert isinstance(ei.value, ValueError)
        assert _bits(out) == before


@pytest.mark.parametrize("dtype", DTYPES, ids=_dt_id)
@pytest.mark.parametrize("out_layout", ["c", "f", "sliced"])
def test_index_outside_plane_via_function_leaves_out_unchanged(dtype, out_layout):
    rng = np.random.default_rng(9)
    x_shape = (2, 3, 4, 4)
    g = make_array((2, 3, 4, 4), dtype, rng)
    idx = _random_indices(g.shape, 16, rng)
    idx[1, 2, 3, 3] = 16
    out = _sentinel_out(x_shape, dtype, out_layout)
    before = _bits(out)
    with pytest.raises(ParamInvalidError) as ei:
        pool_grad.adaptive_max_pool2d_backward(g, x_shape, idx, out=out)
    _assert_error(ei, ParamInvalidError, INVALID, IDX)
    assert _bits(out) == before


def test_index_outside_plane_on_stream_is_reraised_by_synchronize():
    x_shape = (1, 1, 2, 2)
    g = np.ones((1, 1, 1, 1), np.float32)
    idx = np.array([[[[4]]]], np.int64)
    out = _sentinel_out(x_shape, np.float32)
    before = _bits(out)
    op = pool_grad.AdaptiveMaxPool2dBackward(g, np.empty(x_shape, np.float32), idx, out)
    stream = pool_grad.Stream()
    op.execute(stream=stream)
    with pytest.raises(ParamInvalidError) as ei:
        stream.synchronize()
    assert ei.value.code == INVALID
    assert _bits(out) == before


def test_index_outside_plane_in_aclnn_layer_is_161002():
    from pool_grad import aclnn
    g = np.ones((1, 1, 1, 1), np.float32)
    idx = np.array([[[[-1]]]], np.int32)
    out = _sentinel_out((1, 1, 2, 2), np.float32)
    before = _bits(out)
    ws, ex = aclnn.aclnnAdaptiveMaxPool2dBackwardGetWorkspaceSize(
        g, np.empty((1, 1, 2, 2), np.float32), idx, out)
    workspace = np.empty(ws, np.uint8) if ws else None
    try:
        ret = aclnn.aclnnAdaptiveMaxPool2dBackward(workspace, ws, ex, None)
    except AclnnError as e:  # the layer may raise or return the status code
        ret = e.code
    assert ret == INVALID
    assert _bits(out) == before


def test_worked_example_from_seed_page():
    g = np.array([[[[0.4757]]]], np.float32)
    x = np.zeros((1, 1, 2, 2), np.float32)
    out = np.zeros((1, 1, 2, 2), np.float32)
    op = pool_grad.AdaptiveMaxPool2dBackward(g, x, np.array([[[[6]]]], np.int64), out)
    with pytest.raises(ParamInvalidError) as ei:
        op.execute()
    assert ei.value.code == 161002
    with pytest.raises(ParamInvalidError):
        pool_grad.adaptive_max_pool2d_backward(g, x, np.array([[[[6]]]], np.int64))
    got = pool_grad.adaptive_max_pool2d_backward(g, x, np.array([[[[0]]]], np.int64))
    np.testing.assert_array_equal(got, np.array([[[[0.4757, 0], [0, 0]]]], np.float32))


# ---------------------------------------------------------------- validation (§3)

def _invalid_cases():
    """(id, grad_output, x, indices, out, exception, code, names, value-in-message)."""
    f32 = np.float32
    g = lambda shape=(2, 3, 2, 2), dt=f32: np.ones(shape, dt)  # noqa: E731
    x = lambda shape=(2, 3, 4, 4), dt=f32: np.zeros(shape, dt)  # noqa: E731
    ix = lambda shape=(2, 3, 2, 2), dt=np.int64: np.zeros(shape, dt)  # noqa: E731
    cases = [
        ("grad_output_none", None, x(), ix(), x(), ParamNullptrError, NULLPTR, GO, None),
        ("x_none", g(), None, ix(), x(), ParamNullptrError, NULLPTR, X, None),
        ("indices_none", g(), x(), None, x(), ParamNullptrError, NULLPTR, IDX, None),
    ]
    for bad in (np.float32, np.float64, np.int8, np.int16, np.uint8, np.uint32, np.uint64,
                np.bool_):
        name = np.dtype(bad).name
        cases.append((f"indices_dtype_{name}", g(), x(), ix(dt=bad), x(),
                      ParamInvalidError, INVALID, IDX, name))
    for bad in (np.int32, np.int64, np.complex64, np.bool_):
        name = np.dtype(bad).name
        cases.append((f"dtype_{name}", g(dt=bad), x(dt=bad), ix(), x(dt=bad),
                      ParamInvalidError, INVALID, GO + X + OUT, name))
    cases += [
        ("grad_output_float64_x_float32", g(dt=np.float64), x(), ix(), x(),
         ParamInvalidError, INVALID, GO + X, None),
        ("grad_output_bfloat16_x_float16", g(dt=ml_dtypes.bfloat16), x(dt=np.float16), ix(),
         x(dt=np.float16), ParamInvalidError, INVALID, GO + X, None),
        ("out_dtype_differs", g(), x(), ix(), x(dt=np.float64),
         ParamInvalidError, INVALID, OUT, None),
        ("indices_shape_spatial_differs", g(), x(), ix((2, 3, 2, 3)), x(),
         ParamInvalidError, INVALID, IDX + GO, None),
        ("indices_shape_c_differs", g(), x(), ix((2, 1, 2, 2)), x(),
         ParamInvalidError, INVALID, IDX + GO, None),
        ("indices_rank_differs", g(), x(), ix((3, 2, 2)), x(),
         ParamInvalidError, INVALID, IDX + GO, None),
        ("indices_transposed_shape", g((2, 3, 2, 5)), x(), ix((2, 3, 5, 2)), x(),
         ParamInvalidError, INVALID, IDX + GO, None),
        ("n_mismatch", g((3, 3, 2, 2)), x(), ix((3, 3, 2, 2)), x(),
         ParamInvalidError, INVALID, GO + X, None),
        ("c_mismatch", g((2, 4, 2, 2)), x(), ix((2, 4, 2, 2)), x(),
         ParamInvalidError, INVALID, GO + X, None),
        ("c_mismatch_3d", g((4, 2, 2)), x((3, 4, 4)), ix((4, 2, 2)), x((3, 4, 4)),
         ParamInvalidError, INVALID, GO + X, None),
        ("rank2", g((2, 2)), x((4, 4)), ix((2, 2)), x((4, 4)),
         ParamInvalidError, INVALID, GO + X, None),
        ("rank5", g((1, 2, 3, 2, 2)), x((1, 2, 3, 4, 4)), ix((1, 2, 3, 2, 2)),
         x((1, 2, 3, 4, 4)), ParamInvalidError, INVALID, GO + X, None),
        ("grad_output_rank3_x_rank4", g((3, 2, 2)), x((1, 3, 4, 4)), ix((3, 2, 2)),
         x((1, 3, 4, 4)), ParamInvalidError, INVALID, GO + X, None),
        ("grad_output_rank4_x_rank3", g((1, 3, 2, 2)), x((3, 4, 4)), ix((1, 3, 2, 2)),
         x((3, 4, 4)), ParamInvalidError, INVALID, GO + X, None),
        ("out_shape_wrong", g(), x(), ix(), x((2, 3, 4, 5)),
         ParamInvalidError, INVALID, OUT, None),
        ("out_shape_permuted_same_size", g(), x((2, 3, 4, 6)), ix(), x((2, 3, 6, 4)),
         ParamInvalidError, INVALID, OUT, None),
    ]
    return cases


INVALID_CASES = _invalid_cases()


@pytest.mark.parametrize("api", ["function", "class", "aclnn"])
@pytest.mark.parametrize("case", INVALID_CASES, ids=[c[0] for c in INVALID_CASES])
def test_invalid_arguments_raise_the_documented_error_at_planning(case, api):
    _, g, x, idx, out, exc, code, names, value = case
    sentinel = _bits(out)
    with pytest.raises(AclnnError) as ei:
        if api == "function":
            pool_grad.adaptive_max_pool2d_backward(g, x, idx, out=out)
        elif api == "class":
            pool_grad.AdaptiveMaxPool2dBackward(g, x, idx, out)
        else:
            pool_grad.aclnn.aclnnAdaptiveMaxPool2dBackwardGetWorkspaceSize(g, x, idx, out)
    _assert_error(ei, exc, code, names, value)
    if exc is ParamNullptrError:
        assert isinstance(ei.value, TypeError)
    else:
        assert isinstance(ei.value, ValueError)
    assert _bits(out) == sentinel


@pytest.mark.parametrize("api", ["class", "aclnn"])
def test_grad_input_none_is_161001(api):
    g = np.ones((1, 2, 2, 2), np.float32)
    x = np.zeros((1, 2, 3, 3), np.float32)
    idx = np.zeros((1, 2, 2, 2), np.int32)
    with pytest.raises(ParamNullptrError) as ei:
        if api == "class":
            pool_grad.AdaptiveMaxPool2dBackward(g, x, idx, None)
        else:
            pool_grad.aclnn.aclnnAdaptiveMaxPool2dBackwardGetWorkspaceSize(g, x, idx, None)
    _assert_error(ei, ParamNullptrError, NULLPTR, OUT)


ZERO_SIZE_CASES = [
    # (x shape, grad_output/indices shape)
    ((0, 3, 4, 4), (0, 3, 2, 2)),
    ((2, 0, 4, 4), (2, 0, 2, 2)),
    ((0, 4, 4), (0, 2, 2)),
    ((0, 0, 4, 4), (0, 0, 1, 1)),
    ((2, 3, 4, 4), (2, 3, 0, 2)),
    ((2, 3, 4, 4), (2, 3, 2, 0)),
    ((3, 4, 4), (3, 0, 0)),
]


@pytest.mark.parametrize("idx_dtype", [np.int32, np.int64], ids=_dt_id)
@pytest.mark.parametrize("x_shape,g_shape", ZERO_SIZE_CASES)
def test_zero_size_dimensions_are_accepted_and_do_nothing(x_shape, g_shape, idx_dtype):
    g = np.ones(g_shape, np.float32)
    idx = np.zeros(g_shape, idx_dtype)
    res = pool_grad.adaptive_max_pool2d_backward(g, np.zeros(x_shape, np.float32), idx)
    assert res.shape == x_shape and res.dtype == np.float32
    out = np.zeros(x_shape, np.float32)
    op = pool_grad.AdaptiveMaxPool2dBackward(g, np.zeros(x_shape, np.float32), idx, out)
    assert op.workspace_size == 0
    op.execute()
    ws, ex = pool_grad.aclnn.aclnnAdaptiveMaxPool2dBackwardGetWorkspaceSize(
        g, np.zeros(x_shape, np.float32), idx, out)
    assert ws == 0
    assert pool_grad.aclnn.aclnnAdaptiveMaxPool2dBackward(None, 0, ex, None) == 0


@pytest.mark.parametrize("g_shape", [(2, 3, 0, 2), (2, 3, 2, 0), (2, 3, 0, 0)])
def test_empty_grad_output_gives_an_all_zero_new_grad_input(g_shape):
    # §1.3: "zero elsewhere" -- with no gradient at all the returned array is all zeros, never
    # uninitialised memory (pollute the allocator's cache with a pattern first)
    x_shape = (2, 3, 4, 4)
    for _ in range(3):
        junk = np.full(x_shape, 5.0, np.float32)
        del junk
        res = pool_grad.adaptive_max_pool2d_backward(np.ones(g_shape, np.float32), x_shape,
                                                     np.zeros(g_shape, np.int64))
        assert res.shape == x_shape
        np.testing.assert_array_equal(res, np.zeros(x_shape, np.float32))


def test_zero_size_x_plane_with_empty_grad_output_is_accepted():
    x_shape = (2, 3, 0, 4)
    g = np.ones((2, 3, 0, 2), np.float32)
    res = pool_grad.adaptive_max_pool2d_backward(g, x_shape, np.zeros(g.shape, np.int64))
    assert res.shape == x_shape


@pytest.mark.parametrize("hw", [(46341, 46341), (1, 2**31)])
@pytest.mark.parametrize("idx_dtype", [np.int32, np.int64], ids=_dt_id)
def test_plane_larger_than_int32_range_is_161002_at_planning(idx_dtype, hw):
    # x is only a shape (zero strides, no memory); grad_input is virtual memory never touched
    # when the plan is refused
    shape = (1, 1) + hw
    x = np.broadcast_to(np.zeros((), np.float16), shape)
    g = np.ones((1, 1, 1, 1), np.float16)
    idx = np.zeros((1, 1, 1, 1), idx_dtype)
    out = np.empty(shape, np.float16)
    with pytest.raises(ParamInvalidError) as ei:
        pool_grad.AdaptiveMaxPool2dBackward(g, x, idx, out)
    _assert_error(ei, ParamInvalidError, INVALID, X + IDX + OUT)
    with pytest.raises(ParamInvalidError) as ei:
        pool_grad.adaptive_max_pool2d_backward(g, shape, idx, out=out)
    assert ei.value.code == INVALID
    del out


def test_read_only_out_is_161002():
    g = np.ones((1, 1, 2, 2), np.float32)
    idx = np.zeros((1, 1, 2, 2), np.int64)
    out = np.zeros((1, 1, 3, 3), np.float32)
    out.flags.writeable = False
    with pytest.raises(ParamInvalidError) as ei:
        pool_grad.adaptive_max_pool2d_backward(g, out.shape, idx, out=out)
    _assert_error(ei, ParamInvalidError, INVALID, OUT)


def test_out_with_zero_strides_is_161002():
    g = np.ones((1, 1, 2, 2), np.float32)
    idx = np.zeros((1, 1, 2, 2), np.int64)
    base = np.zeros(3, np.float32)
    out = np.lib.stride_tricks.as_strided(base, shape=(1, 1, 3, 3), strides=(0, 0, 4, 0),
                                          writeable=True)
    with pytest.raises(ParamInvalidError) as ei:
        pool_grad.adaptive_max_pool2d_backward(g, (1, 1, 3, 3), idx, out=out)
    _assert_error(ei, ParamInvalidError, INVALID, OUT)
    assert not base.any()


def test_out_overlapping_indices_is_161002():
    buf = np.zeros(8, np.int64)
    idx = buf[:4].reshape(1, 1, 2, 2)
    out = buf.view(np.float64)[2:6].reshape(1, 1, 2, 2)
    g = np.ones((1, 1, 2, 2), np.float64)
    for call in (lambda: pool_grad.adaptive_max_pool2d_backward(g, (1, 1, 2, 2), idx, out=out),
                 lambda: pool_grad.AdaptiveMaxPool2dBackward(g, np.zeros((1, 1, 2, 2)), idx, out)):
        with pytest.raises(ParamInvalidError) as ei:
            call()
        _assert_error(ei, ParamInvalidError, INVALID, OUT + IDX)
    assert not buf.any()


def test_out_overlapping_grad_output_is_161002():
    g = np.zeros((1, 2, 3, 3), np.float32)
    idx = np.zeros((1, 2, 3, 3), np.int32)
    with pytest.raises(ParamInvalidError) as ei:
        pool_grad.adaptive_max_pool2d_backward(g, g.shape, idx, out=g)
    _assert_error(ei, ParamInvalidError, INVALID, OUT + GO)


def test_grad_output_or_out_in_swapped_byte_order_is_161002_naming_byte_order():
    swapped = np.dtype(np.float32).newbyteorder()
    idx = np.zeros((1, 2, 2, 2), np.int64)
    for g, out, names in [(np.ones((1, 2, 2, 2), swapped), None, GO),
                          (np.ones((1, 2, 2, 2), np.float32), np.empty((1, 2, 4, 4), swapped),
                           OUT)]:
        with pytest.raises(ParamInvalidError) as ei:
            pool_grad.adaptive_max_pool2d_backward(g, (1, 2, 4, 4), idx, out=out)
        _assert_error(ei, ParamInvalidError, INVALID, names)
        assert "byte order" in str(ei.value)


def test_out_as_list_is_161002():
    with pytest.raises(ParamInvalidError) as ei:
        pool_grad.adaptive_max_pool2d_backward(np.ones((1, 1, 1, 1)), (1, 1, 1, 2),
                                               np.zeros((1, 1, 1, 1), np.int64),
                                               out=[[[[0.0, 0.0]]]])
    assert ei.value.code == INVALID


# ---------------------------------------------------------------- determinism / adjoint

# Inputs below are large enough (1-5 MiB of traffic) that the library really splits the work
# between threads: it keeps small calls serial, which would make these tests vacuous.

@pytest.mark.parametrize("dtype", [np.float32, np.float16, ml_dtypes.bfloat16, np.float64],
                         ids=_dt_id)
@pytest.mark.parametrize("idx_dtype", [np.int32, np.int64], ids=_dt_id)
def test_bitwise_identical_for_every_n_threads_with_many_repeated_indices(dtype, idx_dtype):
    rng = np.random.default_rng(10)
    x_shape = (4, 8, 4, 4)
    g = make_array((4, 8, 96, 96), dtype, rng, low=-3.0, high=5.0)
    idx = _random_indices(g.shape, 16, rng, idx_dtype, high=3)   # ~3000 adds per slot
    results = [_bits(pool_grad.adaptive_max_pool2d_backward(g, x_shape, idx, n_threads=n))
               for n in (1, 2, 3, 4)]
    assert len(set(results)) == 1
    assert _bits(pool_grad.adaptive_max_pool2d_backward(g, x_shape, idx)) == results[0]


@pytest.mark.parametrize("dtype", [np.float32, np.float16], ids=_dt_id)
def test_bitwise_identical_for_every_n_threads_with_one_big_plane(dtype):
    # one (n, c) plane, gradients concentrated on a few elements spread over its rows: the
    # order must be fixed even if the kernel splits a plane between threads
    rng = np.random.default_rng(11)
    g = make_array((1, 1, 512, 512), dtype, rng, low=-1.0, high=1.0)
    spots = np.array([0, 5, 64 * 20 + 7, 64 * 40, 64 * 64 - 1])
    idx = spots[rng.integers(0, len(spots), size=g.shape)]
    results = [_bits(pool_grad.adaptive_max_pool2d_backward(g, (1, 1, 64, 64), idx, n_threads=n))
               for n in (1, 2, 3, 4)]
    assert len(set(results)) == 1
    # ~52000 float32 additions per spot: allow their accumulated rounding error
    rtol, _ = tolerance(dtype)
    np.testing.assert_allclose(
        pool_grad.adaptive_max_pool2d_backward(g, (1, 1, 64, 64), idx).astype(np.float64),
        _ref(g, (1, 1, 64, 64), idx), rtol=rtol, atol=1e-2)


@pytest.mark.parametrize("x_shape,osize", SHAPE_GRID)
def test_adjoint_identity_for_fixed_indices(x_shape, osize):
    rng = np.random.default_rng(12)
    x = rng.standard_normal(x_shape)
    g = rng.standard_normal(_go_shape(x_shape, osize))
    hw = x_shape[-2] * x_shape[-1]
    idx = _random_indices(g.shape, hw, rng)
    # forward with fixed indices is a gather inside each (n, c) plane
    xf = x.reshape(x_shape[:-2] + (hw,))
    y = np.take_along_axis(xf, idx.reshape(g.shape[:-2] + (-1,)), axis=-1).reshape(g.shape)
    lhs = np.vdot(y, g)
    rhs = np.vdot(x, pool_grad.adaptive_max_pool2d_backward(g, x, idx))
    np.testing.assert_allclose(lhs, rhs, rtol=1e-12, atol=1e-13)


# ---------------------------------------------------------------- two-phase / aclnn / stream

def test_two_phase_object_can_be_executed_again_after_inputs_change():
    rng = np.random.default_rng(13)
    x = np.empty((2, 3, 4, 5), np.float32)
    g = make_array((2, 3, 3, 3), np.float32, rng)
    idx = _random_indices(g.shape, 20, rng, np.int32)
    gi = _sentinel_out(x.shape, np.float32)
    op = pool_grad.AdaptiveMaxPool2dBackward(g, x, idx, gi)
    assert isinstance(op.workspace_size, int) and op.workspace_size >= 0
    op.execute()
    _assert_close(gi, _ref(g, x.shape, idx), np.float32)
    g[...] = make_array(g.shape, np.float32, rng)
    idx[...] = _random_indices(g.shape, 20, rng, np.int32)
    op.execute()
    _assert_close(gi, _ref(g, x.shape, idx), np.float32)
    # a bad index now fails at execute; a good one afterwards works again
    idx[0, 0, 0, 0] = 20
    before = _bits(gi)
    with pytest.raises(ParamInvalidError):
        op.execute()
    assert _bits(gi) == before
    idx[0, 0, 0, 0] = 19
    op.execute()
    _assert_close(gi, _ref(g, x.shape, idx), np.float32)


@pytest.mark.parametrize("dtype", DTYPES, ids=_dt_id)
def test_workspace_of_exact_size_is_accepted(dtype):
    rng = np.random.default_rng(14)
    x = np.empty((2, 3, 4, 5), dtype)
    g = make_array((2, 3, 6, 6), dtype, rng)
    idx = _random_indices(g.shape, 20, rng)
    gi = _sentinel_out(x.shape, dtype)
    op = pool_grad.AdaptiveMaxPool2dBackward(g, x, idx, gi)
    ws = op.workspace_size
    op.execute(workspace=np.empty(ws, np.uint8))
    _assert_close(gi, _ref(g, x.shape, idx), dtype)
    gi[...] = 3
    op.execute(workspace=bytearray(ws + 16))
    _assert_close(gi, _ref(g, x.shape, idx), dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=_dt_id)
def test_workspace_smaller_than_workspace_size_is_161002(dtype):
    x = np.empty((2, 3, 4, 5), dtype)
    g = np.ones((2, 3, 6, 6), dtype)
    idx = np.zeros(g.shape, np.int64)
    gi = np.zeros(x.shape, dtype)
    op = pool_grad.AdaptiveMaxPool2dBackward(g, x, idx, gi)
    ws = op.workspace_size
    if ws == 0:
        pytest.skip("this plan needs no workspace")
    with pytest.raises(ParamInvalidError) as ei:
        op.execute(workspace=bytearray(ws - 1))
    assert ei.value.code == INVALID
    assert not gi.astype(np.float64).any()


@pytest.mark.parametrize("use_stream", [False, True])
@pytest.mark.parametrize("idx_dtype", [np.int32, np.int64], ids=_dt_id)
def test_aclnn_layer_two_calls_fill_grad_input_and_return_success(idx_dtype, use_stream):
    from pool_grad import aclnn
    rng = np.random.default_rng(15)
    x = np.empty((2, 2, 3, 4), np.float32)
    g = make_array((2, 2, 2, 2), np.float32, rng)
    idx = _random_indices(g.shape, 12, rng, idx_dtype)
    gi = _sentinel_out(x.shape, np.float32)
    ws, executor = aclnn.aclnnAdaptiveMaxPool2dBackwardGetWorkspaceSize(g, x, idx, gi)
    assert isinstance(ws, int) and ws >= 0
    workspace = np.empty(ws, np.uint8) if ws > 0 else None
    stream = pool_grad.Stream() if use_stream else None
    ret = aclnn.aclnnAdaptiveMaxPool2dBackward(workspace, ws, executor, stream)
    if stream is not None:
        stream.synchronize()
    assert ret == 0 == pool_grad.ACLNN_SUCCESS
    _assert_close(gi, _ref(g, x.shape, idx), np.float32)


def test_execute_on_stream_runs_in_submission_order():
    rng = np.random.default_rng(16)
    x_shape = (2, 3, 5, 5)
    g = make_array((2, 3, 4, 4), np.float64, rng)
    idx = _random_indices(g.shape, 25, rng)
    gi = np.full(x_shape, np.nan)
    op = pool_grad.AdaptiveMaxPool2dBackward(g, np.empty(x_shape), idx, gi)
    stream = pool_grad.Stream()
    # same op twice on one stream: the result is that of one execution (not accumulated twice)
    op.execute(stream=stream)
    op.execute(stream=stream)
    stream.synchronize()
    np.testing.assert_allclose(gi, _ref(g, x_shape, idx), rtol=1e-13, atol=1e-15)


@pytest.mark.parametrize("n_threads", [0, -1])
def test_n_threads_must_be_positive(n_threads):
    g = np.ones((1, 1, 1, 1), np.float32)
    with pytest.raises(ValueError):
        pool_grad.adaptive_max_pool2d_backward(g, (1, 1, 2, 2), np.zeros((1, 1, 1, 1), np.int64),
                                               n_threads=n_threads)


@given(data=st.data(), rank=st.sampled_from([3, 4]), dtype=st.sampled_from(DTYPES),
       idx_dtype=st.sampled_from([np.int32, np.int64]))
def test_property_matches_reference_for_random_shapes_and_indices(data, rank, dtype, idx_dtype):
    lead = [data.draw(st.integers(1, 3), label="C")]
    if rank == 4:
        lead = [data.draw(st.integers(1, 2), label="N")] + lead
    h, w = data.draw(st.integers(1, 6), label="H"), data.draw(st.integers(1, 6), label="W")
    oh, ow = data.draw(st.integers(1, 8), label="Ho"), data.draw(st.integers(1, 8), label="Wo")
    g_layout = data.draw(st.sampled_from(LAYOUTS + ["broadcast"]), label="g_layout")
    i_layout = data.draw(st.sampled_from(LAYOUTS), label="idx_layout")
    o_layout = data.draw(st.sampled_from(LAYOUTS), label="out_layout")
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), label="seed"))
    x_shape = tuple(lead + [h, w])
    g = make_array(tuple(lead + [oh, ow]), dtype, rng, g_layout)
    idx = as_layout(_random_indices(g.shape, h * w, rng, idx_dtype), i_layout)
    out = _sentinel_out(x_shape, dtype, o_layout)
    pool_grad.adaptive_max_pool2d_backward(g, x_shape, idx, out=out)
    _assert_close(out, _ref(g, x_shape, idx), dtype)


def test_torch_tensors_are_converted_but_out_must_be_an_ndarray():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(18)
    g = make_array((2, 3, 2, 2), np.float32, rng)
    idx = _random_indices(g.shape, 9, rng)
    got = pool_grad.adaptive_max_pool2d_backward(torch.from_numpy(g), (2, 3, 3, 3),
                                                 torch.from_numpy(idx))
    _assert_close(got, _ref(g, (2, 3, 3, 3), idx), np.float32)
    with pytest.raises(ParamInvalidError) as ei:
        pool_grad.adaptive_max_pool2d_backward(g, (2, 3, 3, 3), idx,
                                               out=torch.zeros((2, 3, 3, 3)))
    _assert_error(ei, ParamInvalidError, INVALID, OUT)

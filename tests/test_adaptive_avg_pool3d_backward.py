"""Tests for adaptive_avg_pool3d_backward (SPEC §1.2, §2, §3, §4, §5)."""

import re

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, strategies as st

import pool_grad
from pool_grad import AclnnError, ParamInvalidError, ParamNullptrError
from conftest import DTYPES, make_array
from reference import (
    ref_adaptive_avg_pool3d,
    ref_adaptive_avg_pool3d_backward,
    tolerance,
)

GO = ("grad_output", "gradOutput")
X = ("x", "self")
OUT = ("out", "grad_input", "gradInput")

NULLPTR = 161001
INVALID = 161002

G_LAYOUTS = ["c", "f", "channels_last", "sliced", "negative", "broadcast"]
OUT_LAYOUTS = ["c", "f", "channels_last", "channels_last_3d", "sliced", "negative"]

# (x shape, output spatial size): dividing, non-dividing, larger than input, all ones,
# mixed per axis, unbatched 4-D.
SHAPE_GRID = [
    ((2, 3, 4, 6, 8), (2, 3, 4)),        # every axis divides
    ((1, 2, 5, 7, 3), (3, 4, 2)),        # no axis divides: overlapping windows
    ((2, 2, 2, 3, 2), (5, 4, 3)),        # output larger than input
    ((1, 3, 3, 4, 5), (1, 1, 1)),        # global average
    ((2, 1, 4, 5, 6), (4, 2, 7)),        # equal / non-dividing / larger mixed
    ((3, 5, 6, 4), (2, 3, 4)),           # 4-D (C, D, H, W)
    ((2, 3, 1, 5), (1, 2, 3)),           # 4-D non-dividing, larger
    ((4, 1, 1, 1), (2, 2, 2)),           # 4-D 1x1x1 input upsampled
]


def _dt_id(dt):
    return np.dtype(dt).name


def _go_shape(x_shape, osize):
    return tuple(x_shape[:-3]) + tuple(osize)


def _ref(g, x_shape):
    return ref_adaptive_avg_pool3d_backward(np.asarray(g).astype(np.float64), tuple(x_shape))


def _assert_close(got, ref, dtype):
    rtol, atol = tolerance(dtype)
    np.testing.assert_allclose(np.asarray(got).astype(np.float64), ref, rtol=rtol, atol=atol)


def _bits(a):
    a = np.ascontiguousarray(a)
    return a.view(np.uint8).tobytes()


def _alloc_out(shape, dtype, layout, fill=7):
    """A writeable array of `shape` with the strides of `layout`, pre-filled with `fill`."""
    shape = tuple(shape)
    nd = len(shape)
    if layout == "c":
        a = np.empty(shape, dtype)
    elif layout == "f":
        a = np.empty(shape, dtype, order="F")
    elif layout in ("channels_last", "channels_last_3d"):
        # channels last: C (axis nd-4 for 5-D, axis 0 for 4-D) is the fastest axis
        c_axis = 1 if nd == 5 else 0
        perm_shape = tuple(s for i, s in enumerate(shape) if i != c_axis) + (shape[c_axis],)
        base = np.empty(perm_shape, dtype)
        axes = list(range(nd - 1))
        axes.insert(c_axis, nd - 1)
        a = base.transpose(axes)
    elif layout == "sliced":
        base = np.empty(shape[:-1] + (2 * shape[-1] + 1,), dtype)
        a = base[..., 1::2]
    elif layout == "negative":
        a = np.empty(shape, dtype)[::-1, ..., ::-1]
    else:  # pragma: no cover
        raise AssertionError(layout)
    assert a.shape == shape
    a[...] = fill
    return a


def _as_layout(src, layout):
    a = _alloc_out(src.shape, src.dtype, layout)
    a[...] = src
    return a


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


# ---------------------------------------------------------------- values vs reference

@pytest.mark.parametrize("dtype", DTYPES, ids=_dt_id)
@pytest.mark.parametrize("x_shape,osize", SHAPE_GRID)
def test_matches_reference_over_shape_and_dtype_grid(x_shape, osize, dtype):
    rng = np.random.default_rng(hash((x_shape, osize)) % 2**32)
    g = make_array(_go_shape(x_shape, osize), dtype, rng, "c")
    x = np.zeros(x_shape, dtype)
    got = pool_grad.adaptive_avg_pool3d_backward(g, x)
    assert got.shape == x_shape
    assert got.dtype == np.dtype(dtype)
    assert got.flags.c_contiguous
    _assert_close(got, _ref(g, x_shape), dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=_dt_id)
@pytest.mark.parametrize("x_shape,osize", SHAPE_GRID)
def test_matches_torch_adaptive_avg_pool3d_backward(x_shape, osize, dtype):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(1)
    g = rng.standard_normal(_go_shape(x_shape, osize)).astype(dtype)
    x = rng.standard_normal(x_shape).astype(dtype)
    want = torch.ops.aten._adaptive_avg_pool3d_backward(
        torch.from_numpy(g), torch.from_numpy(x)).numpy()
    got = pool_grad.adaptive_avg_pool3d_backward(g, x)
    if dtype == np.float32:
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    else:
        np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-14)


def test_x_given_as_shape_tuple_equals_x_given_as_array():
    rng = np.random.default_rng(2)
    g = rng.standard_normal((2, 3, 2, 3, 2)).astype(np.float32)
    x = np.ones((2, 3, 5, 4, 3), np.float32)
    a = pool_grad.adaptive_avg_pool3d_backward(g, x)
    b = pool_grad.adaptive_avg_pool3d_backward(g, x.shape)
    assert b.dtype == np.float32
    assert _bits(a) == _bits(b)


def test_only_shape_of_x_is_used_not_its_values():
    rng = np.random.default_rng(3)
    g = rng.standard_normal((1, 2, 2, 2, 2))
    x1 = rng.standard_normal((1, 2, 3, 3, 3))
    x2 = np.full((1, 2, 3, 3, 3), np.nan)
    assert _bits(pool_grad.adaptive_avg_pool3d_backward(g, x1)) == \
        _bits(pool_grad.adaptive_avg_pool3d_backward(g, x2))


def test_nested_list_grad_output_is_converted_with_asarray():
    g = [[[[[1.0, 2.0]]]]]
    x = np.zeros((1, 1, 1, 1, 4), np.float64)
    got = pool_grad.adaptive_avg_pool3d_backward(g, x)
    np.testing.assert_array_equal(got, [[[[[0.5, 0.5, 1.0, 1.0]]]]])


def test_worked_example_from_seed_page():
    g = np.arange(1, 9, dtype=np.float32).reshape(2, 2, 1, 1, 2)
    x = np.zeros((2, 2, 1, 1, 4), np.float32)
    got = pool_grad.adaptive_avg_pool3d_backward(g, x)
    want = np.array([[0.5, 0.5, 1, 1], [1.5, 1.5, 2, 2],
                     [2.5, 2.5, 3, 3], [3.5, 3.5, 4, 4]], np.float32).reshape(2, 2, 1, 1, 4)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dtype", DTYPES, ids=_dt_id)
@pytest.mark.parametrize("x_shape,osize", [((2, 3, 1, 1, 2), (2, 1, 1)),
                                           ((1, 2, 1, 1, 16), (2, 1, 1)),
                                           ((2, 3, 1, 3, 13), (3, 1, 1)),
                                           ((1, 9, 1, 3, 40), (2, 3, 7)),
                                           ((2, 1, 6, 7), (4, 3, 3))])
def test_one_input_plane_to_several_output_planes(x_shape, osize, dtype):
    """D = 1 taken to D_out > 1: every grad_output plane adds to the one input plane (the
    small-plane paths once summed the first only)."""
    rng = np.random.default_rng(12)
    g = make_array(_go_shape(x_shape, osize), dtype, rng, "c")
    _assert_close(pool_grad.adaptive_avg_pool3d_backward(g, x_shape), _ref(g, x_shape), dtype)


def test_identity_when_output_size_equals_input_size():
    rng = np.random.default_rng(4)
    g = rng.standard_normal((2, 3, 3, 4, 5))
    got = pool_grad.adaptive_avg_pool3d_backward(g, g.shape)
    np.testing.assert_array_equal(got, g)


def test_global_average_spreads_gradient_evenly():
    g = np.full((1, 2, 1, 1, 1), 8.0, np.float32)
    got = pool_grad.adaptive_avg_pool3d_backward(g, (1, 2, 2, 2, 2))
    np.testing.assert_array_equal(got, np.ones((1, 2, 2, 2, 2), np.float32))


# ---------------------------------------------------------------- layouts

@pytest.mark.parametrize("dtype", DTYPES, ids=_dt_id)
@pytest.mark.parametrize("layout", G_LAYOUTS)
@pytest.mark.parametrize("x_shape,osize", [((2, 3, 5, 4, 6), (3, 2, 4)), ((3, 4, 5, 6), (2, 5, 4))])
def test_non_contiguous_grad_output_layouts(x_shape, osize, layout, dtype):
    rng = np.random.default_rng(5)
    g = make_array(_go_shape(x_shape, osize), dtype, rng, layout)
    got = pool_grad.adaptive_avg_pool3d_backward(g, np.empty(x_shape, dtype))
    assert got.flags.c_contiguous
    _assert_close(got, _ref(g, x_shape), dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=_dt_id)
def test_channels_last_3d_grad_output(dtype):
    rng = np.random.default_rng(6)
    x_shape, osize = (2, 4, 5, 3, 6), (3, 2, 4)
    g = _as_layout(rng.standard_normal(_go_shape(x_shape, osize)).astype(dtype), "channels_last_3d")
    assert not g.flags.c_contiguous
    got = pool_grad.adaptive_avg_pool3d_backward(g, np.empty(x_shape, dtype))
    _assert_close(got, _ref(g, x_shape), dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=_dt_id)
@pytest.mark.parametrize("layout", OUT_LAYOUTS)
@pytest.mark.parametrize("x_shape,osize", [((2, 3, 5, 4, 6), (3, 2, 4)), ((3, 4, 5, 6), (2, 5, 4))])
def test_out_in_any_layout_is_fully_written_and_returned(x_shape, osize, layout, dtype):
    rng = np.random.default_rng(7)
    g = make_array(_go_shape(x_shape, osize), dtype, rng, "c")
    out = _alloc_out(x_shape, dtype, layout, fill=np.nan)
    res = pool_grad.adaptive_avg_pool3d_backward(g, np.empty(x_shape, dtype), out=out)
    assert res is out
    _assert_close(out, _ref(g, x_shape), dtype)


@pytest.mark.parametrize("g_layout", ["f", "channels_last_3d", "negative"])
@pytest.mark.parametrize("out_layout", ["f", "channels_last_3d", "sliced"])
def test_non_contiguous_grad_output_and_out_together(g_layout, out_layout):
    rng = np.random.default_rng(8)
    x_shape = (2, 3, 4, 7, 5)
    g = _as_layout(rng.standard_normal((2, 3, 3, 3, 2)), g_layout)
    out = _alloc_out(x_shape, np.float64, out_layout, fill=np.nan)
    pool_grad.adaptive_avg_pool3d_backward(g, x_shape, out=out)
    np.testing.assert_allclose(out, _ref(g, x_shape), rtol=1e-13, atol=1e-15)


# ---------------------------------------------------------------- threads

# Large enough (1-5 MiB of traffic) that the library really splits the work between threads:
# it keeps small calls serial, which would make these tests vacuous.
BIG_X = (2, 8, 24, 32, 48)
BIG_OSIZE = (10, 13, 20)


@pytest.mark.parametrize("dtype", DTYPES, ids=_dt_id)
def test_bitwise_identical_for_every_n_threads(dtype):
    rng = np.random.default_rng(9)
    g = make_array(_go_shape(BIG_X, BIG_OSIZE), dtype, rng, "c")
    first = pool_grad.adaptive_avg_pool3d_backward(g, BIG_X, n_threads=1)
    for n in (2, 3, 4):
        again = pool_grad.adaptive_avg_pool3d_backward(g, BIG_X, n_threads=n)
        assert _bits(again) == _bits(first), n
    assert _bits(pool_grad.adaptive_avg_pool3d_backward(g, BIG_X)) == _bits(first)
    _assert_close(first, _ref(g, BIG_X), dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float16], ids=_dt_id)
def test_bitwise_identical_for_every_n_threads_channels_last_input(dtype):
    rng = np.random.default_rng(10)
    x_shape = (2, 16, 20, 24, 40)
    g = _as_layout(rng.standard_normal((2, 16, 6, 8, 10)).astype(dtype), "channels_last_3d")
    outs = []
    for n in (1, 2, 3, 4):
        out = _alloc_out(x_shape, dtype, "channels_last_3d")
        pool_grad.adaptive_avg_pool3d_backward(g, x_shape, out=out, n_threads=n)
        outs.append(_bits(out))
    assert len(set(outs)) == 1


# ---------------------------------------------------------------- two-phase / aclnn / stream

def test_two_phase_object_can_be_executed_again_after_inputs_change():
    rng = np.random.default_rng(11)
    x = np.empty((2, 3, 4, 5, 6), np.float32)
    g = rng.standard_normal((2, 3, 3, 2, 4)).astype(np.float32)
    gi = np.full(x.shape, np.nan, np.float32)
    op = pool_grad.AdaptiveAvgPool3dBackward(g, x, gi)
    assert isinstance(op.workspace_size, int) and op.workspace_size >= 0
    op.execute()
    _assert_close(gi, _ref(g, x.shape), np.float32)
    g[...] = rng.standard_normal(g.shape)
    gi[...] = np.nan
    op.execute()
    _assert_close(gi, _ref(g, x.shape), np.float32)


@pytest.mark.parametrize("dtype", DTYPES, ids=_dt_id)
def test_workspace_of_exact_size_is_accepted(dtype):
    rng = np.random.default_rng(12)
    x = np.empty((2, 3, 5, 4, 6), dtype)
    g = make_array((2, 3, 3, 3, 4), dtype, rng, "c")
    gi = np.zeros(x.shape, dtype)
    op = pool_grad.AdaptiveAvgPool3dBackward(g, x, gi)
    ws = op.workspace_size
    op.execute(workspace=np.empty(ws, np.uint8))
    _assert_close(gi, _ref(g, x.shape), dtype)
    gi[...] = 0
    op.execute(workspace=bytearray(ws))
    _assert_close(gi, _ref(g, x.shape), dtype)
    gi[...] = 0
    op.execute(workspace=bytearray(ws + 64))
    _assert_close(gi, _ref(g, x.shape), dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=_dt_id)
def test_workspace_smaller_than_workspace_size_is_161002(dtype):
    x = np.empty((2, 3, 5, 4, 6), dtype)
    g = np.ones((2, 3, 3, 3, 4), dtype)
    gi = np.zeros(x.shape, dtype)
    op = pool_grad.AdaptiveAvgPool3dBackward(g, x, gi)
    ws = op.workspace_size
    if ws == 0:
        pytest.skip("this plan needs no workspace")
    with pytest.raises(ParamInvalidError) as ei:
        op.execute(workspace=bytearray(ws - 1))
    assert ei.value.code == INVALID
    assert np.all(gi.astype(np.float64) == 0)


def test_two_phase_object_validates_at_construction():
    x = np.empty((1, 2, 3, 3, 3), np.float32)
    g = np.ones((1, 2, 1, 1, 1), np.float64)
    with pytest.raises(ParamInvalidError):
        pool_grad.AdaptiveAvgPool3dBackward(g, x, np.empty(x.shape, np.float32))


def test_execute_on_stream_runs_in_submission_order():
    rng = np.random.default_rng(13)
    x_shape = (2, 3, 4, 5, 6)
    g1 = rng.standard_normal((2, 3, 2, 3, 4))
    g2 = rng.standard_normal((2, 3, 2, 3, 4))
    gi1 = np.full(x_shape, np.nan)
    gi2 = np.full(x_shape, np.nan)
    op1 = pool_grad.AdaptiveAvgPool3dBackward(g1, np.empty(x_shape), gi1)
    op2 = pool_grad.AdaptiveAvgPool3dBackward(g2, np.empty(x_shape), gi2)
    stream = pool_grad.Stream()
    op1.execute(stream=stream)
    op2.execute(stream=stream)
    stream.synchronize()
    np.testing.assert_allclose(gi1, _ref(g1, x_shape), rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(gi2, _ref(g2, x_shape), rtol=1e-13, atol=1e-15)


@pytest.mark.parametrize("use_stream", [False, True])
def test_aclnn_layer_two_calls_fill_out_and_return_success(use_stream):
    from pool_grad import aclnn
    rng = np.random.default_rng(14)
    x = np.empty((2, 2, 3, 4, 5), np.float32)
    g = rng.standard_normal((2, 2, 2, 3, 2)).astype(np.float32)
    out = np.full(x.shape, np.nan, np.float32)
    ws, executor = aclnn.aclnnAdaptiveAvgPool3dBackwardGetWorkspaceSize(g, x, out)
    assert isinstance(ws, int) and ws >= 0
    workspace = np.empty(ws, np.uint8) if ws > 0 else None
    stream = pool_grad.Stream() if use_stream else None
    ret = aclnn.aclnnAdaptiveAvgPool3dBackward(workspace, ws, executor, stream)
    if stream is not None:
        stream.synchronize()
    assert ret == 0 == pool_grad.ACLNN_SUCCESS
    _assert_close(out, _ref(g, x.shape), np.float32)


def test_aclnn_get_workspace_size_null_out_is_161001():
    from pool_grad import aclnn
    x = np.empty((1, 1, 2, 2, 2), np.float32)
    g = np.ones((1, 1, 1, 1, 1), np.float32)
    with pytest.raises(ParamNullptrError) as ei:
        aclnn.aclnnAdaptiveAvgPool3dBackwardGetWorkspaceSize(g, x, None)
    _assert_error(ei, ParamNullptrError, NULLPTR, OUT)


# ---------------------------------------------------------------- validation (§3)

def _x5(dtype=np.float32, shape=(2, 3, 4, 4, 4)):
    return np.zeros(shape, dtype)


def _invalid_cases():
    """(id, grad_output, x, out, exception, code, names, value-in-message)."""
    f32 = np.float32
    ok_g = np.ones((2, 3, 2, 2, 2), f32)
    ok_x = _x5()
    ok_out = lambda shape=(2, 3, 4, 4, 4), dt=f32: np.zeros(shape, dt)  # noqa: E731
    cases = [
        ("grad_output_none", None, ok_x, ok_out(), ParamNullptrError, NULLPTR, GO, None),
        ("x_none", ok_g, None, ok_out(), ParamNullptrError, NULLPTR, X, None),
    ]
    for bad in (np.int32, np.int64, np.int8, np.uint16, np.bool_, np.complex64, np.longdouble):
        if bad is np.longdouble and np.dtype(np.longdouble) == np.dtype(np.float64):
            continue
        name = np.dtype(bad).name
        cases.append((f"dtype_{name}", np.ones((2, 3, 2, 2, 2), bad), _x5(bad),
                      ok_out(dt=bad), ParamInvalidError, INVALID, GO + X + OUT, name))
    cases += [
        ("grad_output_float64_x_float32", np.ones((2, 3, 2, 2, 2), np.float64), ok_x, ok_out(),
         ParamInvalidError, INVALID, GO + X, None),
        ("grad_output_float16_x_bfloat16", np.ones((2, 3, 2, 2, 2), np.float16),
         _x5(ml_dtypes.bfloat16), ok_out(dt=ml_dtypes.bfloat16),
         ParamInvalidError, INVALID, GO + X, None),
        ("out_float64_others_float32", ok_g, ok_x, ok_out(dt=np.float64),
         ParamInvalidError, INVALID, OUT, None),
        ("out_float16_others_float32", ok_g, ok_x, ok_out(dt=np.float16),
         ParamInvalidError, INVALID, OUT, None),
        ("rank3", np.ones((3, 2, 2), f32), np.zeros((3, 4, 4), f32), ok_out((3, 4, 4)),
         ParamInvalidError, INVALID, GO + X, None),
        ("rank6", np.ones((1, 2, 3, 2, 2, 2), f32), np.zeros((1, 2, 3, 4, 4, 4), f32),
         ok_out((1, 2, 3, 4, 4, 4)), ParamInvalidError, INVALID, GO + X, None),
        ("rank2", np.ones((2, 2), f32), np.zeros((4, 4), f32), ok_out((4, 4)),
         ParamInvalidError, INVALID, GO + X, None),
        ("grad_output_rank4_x_rank5", np.ones((3, 2, 2, 2), f32), ok_x, ok_out(),
         ParamInvalidError, INVALID, GO + X, None),
        ("grad_output_rank5_x_rank4", np.ones((1, 3, 2, 2, 2), f32), np.zeros((3, 4, 4, 4), f32),
         ok_out((3, 4, 4, 4)), ParamInvalidError, INVALID, GO + X, None),
        ("n_mismatch", np.ones((3, 3, 2, 2, 2), f32), ok_x, ok_out(),
         ParamInvalidError, INVALID, GO + X, None),
        ("c_mismatch", np.ones((2, 4, 2, 2, 2), f32), ok_x, ok_out(),
         ParamInvalidError, INVALID, GO + X, None),
        ("c_mismatch_4d", np.ones((4, 2, 2, 2), f32), np.zeros((3, 4, 4, 4), f32),
         ok_out((3, 4, 4, 4)), ParamInvalidError, INVALID, GO + X, None),
        ("out_shape_wrong", ok_g, ok_x, ok_out((2, 3, 4, 4, 5)),
         ParamInvalidError, INVALID, OUT, None),
        ("out_shape_permuted_same_size", ok_g, _x5(shape=(2, 3, 4, 4, 6)),
         ok_out((2, 3, 6, 4, 4)), ParamInvalidError, INVALID, OUT, None),
        ("out_rank4", ok_g, ok_x, ok_out((6, 4, 4, 4)), ParamInvalidError, INVALID, OUT, None),
    ]
    # any zero dimension of x or grad_output (5-D and 4-D)
    for i in range(5):
        xs = [2, 3, 4, 4, 4]
        gs = [2, 3, 2, 2, 2]
        xs[i] = 0
        if i < 2:
            gs[i] = 0
        cases.append((f"x_zero_dim{i}_5d", np.ones(gs, f32), np.zeros(xs, f32), np.zeros(xs, f32),
                      ParamInvalidError, INVALID, GO + X, None))
    for i in range(2, 5):
        gs = [2, 3, 2, 2, 2]
        gs[i] = 0
        cases.append((f"grad_output_zero_dim{i}_5d", np.ones(gs, f32), ok_x, ok_out(),
                      ParamInvalidError, INVALID, GO + X, None))
    for i in range(4):
        xs = [3, 4, 4, 4]
        gs = [3, 2, 2, 2]
        xs[i] = 0
        if i == 0:
            gs[i] = 0
        cases.append((f"x_zero_dim{i}_4d", np.ones(gs, f32), np.zeros(xs, f32), np.zeros(xs, f32),
                      ParamInvalidError, INVALID, GO + X, None))
        if i > 0:
            gs = [3, 2, 2, 2]
            gs[i] = 0
            cases.append((f"grad_output_zero_dim{i}_4d", np.ones(gs, f32),
                          np.zeros((3, 4, 4, 4), f32),
                          np.zeros((3, 4, 4, 4), f32), ParamInvalidError, INVALID, GO + X, None))
    return cases


INVALID_CASES = _invalid_cases()


@pytest.mark.parametrize("api", ["function", "class", "aclnn"])
@pytest.mark.parametrize("case", INVALID_CASES, ids=[c[0] for c in INVALID_CASES])
def test_invalid_arguments_raise_the_documented_error_at_planning(case, api):
    _, g, x, out, exc, code, names, value = case
    sentinel = None if out is None else out.copy()
    with pytest.raises(AclnnError) as ei:
        if api == "function":
            pool_grad.adaptive_avg_pool3d_backward(g, x, out=out)
        elif api == "class":
            pool_grad.AdaptiveAvgPool3dBackward(g, x, out)
        else:
            pool_grad.aclnn.aclnnAdaptiveAvgPool3dBackwardGetWorkspaceSize(g, x, out)
    _assert_error(ei, exc, code, names, value)
    if exc is ParamNullptrError:
        assert isinstance(ei.value, TypeError)
    else:
        assert isinstance(ei.value, ValueError)
    if out is not None and out.size:
        assert _bits(out) == _bits(sentinel)


@pytest.mark.parametrize("x_shape,g_shape", [
    ((0, 3, 4, 4, 4), (0, 3, 2, 2, 2)),
    ((2, 3, 0, 4, 4), (2, 3, 2, 2, 2)),
    ((2, 3, 4, 4, 0), (2, 3, 2, 2, 2)),
    ((3, 4, 0, 4), (3, 2, 2, 2)),
    ((0, 4, 4, 4), (0, 2, 2, 2)),
])
@pytest.mark.parametrize("x_as", ["array", "shape"])
def test_zero_size_x_without_out_is_161002_naming_x(x_shape, g_shape, x_as):
    g = np.ones(g_shape, np.float32)
    x = np.zeros(x_shape, np.float32) if x_as == "array" else x_shape
    with pytest.raises(ParamInvalidError) as ei:
        pool_grad.adaptive_avg_pool3d_backward(g, x)
    _assert_error(ei, ParamInvalidError, INVALID, X + GO)


@pytest.mark.parametrize("api", ["class", "aclnn"])
def test_grad_input_none_is_161001(api):
    x = _x5()
    g = np.ones((2, 3, 2, 2, 2), np.float32)
    with pytest.raises(ParamNullptrError) as ei:
        if api == "class":
            pool_grad.AdaptiveAvgPool3dBackward(g, x, None)
        else:
            pool_grad.aclnn.aclnnAdaptiveAvgPool3dBackwardGetWorkspaceSize(g, x, None)
    _assert_error(ei, ParamNullptrError, NULLPTR, OUT)


def test_read_only_out_is_161002():
    g = np.ones((2, 3, 2, 2, 2), np.float32)
    out = np.zeros((2, 3, 4, 4, 4), np.float32)
    out.flags.writeable = False
    with pytest.raises(ParamInvalidError) as ei:
        pool_grad.adaptive_avg_pool3d_backward(g, out.shape, out=out)
    _assert_error(ei, ParamInvalidError, INVALID, OUT)
    assert not out.any()


def test_out_with_zero_strides_overlapping_itself_is_161002():
    g = np.ones((1, 2, 1, 1, 1), np.float32)
    base = np.zeros(4, np.float32)
    out = np.lib.stride_tricks.as_strided(base, shape=(1, 2, 2, 2, 2),
                                          strides=(0, 4, 0, 0, 0), writeable=True)
    with pytest.raises(ParamInvalidError) as ei:
        pool_grad.adaptive_avg_pool3d_backward(g, out.shape, out=out)
    _assert_error(ei, ParamInvalidError, INVALID, OUT)
    assert not base.any()


def test_out_that_is_grad_output_is_161002():
    g = np.ones((1, 2, 3, 3, 3), np.float32)
    with pytest.raises(ParamInvalidError) as ei:
        pool_grad.adaptive_avg_pool3d_backward(g, g.shape, out=g)
    _assert_error(ei, ParamInvalidError, INVALID, OUT + GO)
    assert np.all(g == 1)


def test_out_partially_overlapping_grad_output_is_161002():
    buf = np.ones(2 * 8 + 4, np.float64)
    g = buf[:8].reshape(1, 1, 2, 2, 2)
    out = buf[4:12].reshape(1, 1, 2, 2, 2)
    with pytest.raises(ParamInvalidError) as ei:
        pool_grad.adaptive_avg_pool3d_backward(g, (1, 1, 2, 2, 2), out=out)
    _assert_error(ei, ParamInvalidError, INVALID, OUT + GO)
    assert np.all(buf == 1)


def test_grad_output_or_out_in_swapped_byte_order_is_161002_naming_byte_order():
    swapped = np.dtype(np.float64).newbyteorder()
    for g, out, names in [(np.ones((1, 2, 1, 2, 2), swapped), None, GO),
                          (np.ones((1, 2, 1, 2, 2)), np.empty((1, 2, 2, 4, 4), swapped), OUT)]:
        with pytest.raises(ParamInvalidError) as ei:
            pool_grad.adaptive_avg_pool3d_backward(g, (1, 2, 2, 4, 4), out=out)
        _assert_error(ei, ParamInvalidError, INVALID, names)
        assert "byte order" in str(ei.value)


def test_out_as_list_is_161002():
    g = np.ones((1, 1, 1, 1, 1), np.float64)
    with pytest.raises(ParamInvalidError) as ei:
        pool_grad.adaptive_avg_pool3d_backward(g, (1, 1, 1, 1, 2), out=[[[[[0.0, 0.0]]]]])
    assert ei.value.code == INVALID


# ---------------------------------------------------------------- properties

@given(
    data=st.data(),
    rank=st.sampled_from([4, 5]),
    dtype=st.sampled_from(DTYPES),
)
def test_property_matches_reference_for_random_shapes(data, rank, dtype):
    lead = [data.draw(st.integers(1, 3), label="C")]
    if rank == 5:
        lead = [data.draw(st.integers(1, 2), label="N")] + lead
    spatial = [data.draw(st.integers(1, 7), label=f"in{i}") for i in range(3)]
    osize = [data.draw(st.integers(1, 8), label=f"out{i}") for i in range(3)]
    layout = data.draw(st.sampled_from(G_LAYOUTS), label="layout")
    seed = data.draw(st.integers(0, 2**32 - 1), label="seed")
    rng = np.random.default_rng(seed)
    x_shape = tuple(lead + spatial)
    g = make_array(tuple(lead + osize), dtype, rng, layout)
    got = pool_grad.adaptive_avg_pool3d_backward(g, x_shape)
    _assert_close(got, _ref(g, x_shape), dtype)


@pytest.mark.parametrize("x_shape,osize", SHAPE_GRID)
def test_adjoint_identity_with_forward(x_shape, osize):
    rng = np.random.default_rng(15)
    x = rng.standard_normal(x_shape)
    g = rng.standard_normal(_go_shape(x_shape, osize))
    y = pool_grad.adaptive_avg_pool3d(x, osize)
    np.testing.assert_allclose(y, ref_adaptive_avg_pool3d(x, osize), rtol=1e-12, atol=1e-14)
    lhs = np.vdot(y, g)
    rhs = np.vdot(x, pool_grad.adaptive_avg_pool3d_backward(g, x))
    np.testing.assert_allclose(lhs, rhs, rtol=1e-12, atol=1e-13)


@pytest.mark.parametrize("n_threads", [0, -1])
def test_n_threads_must_be_positive(n_threads):
    g = np.ones((1, 1, 1, 1, 1), np.float32)
    with pytest.raises(ValueError):
        pool_grad.adaptive_avg_pool3d_backward(g, (1, 1, 2, 2, 2), n_threads=n_threads)


def test_torch_tensors_are_converted_but_out_must_be_an_ndarray():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(16)
    g = rng.standard_normal((2, 3, 2, 3, 2))
    x = torch.zeros(2, 3, 4, 5, 3, dtype=torch.float64)
    got = pool_grad.adaptive_avg_pool3d_backward(torch.from_numpy(g), x)
    np.testing.assert_allclose(got, _ref(g, (2, 3, 4, 5, 3)), rtol=1e-13, atol=1e-15)
    with pytest.raises(ParamInvalidError) as ei:
        pool_grad.adaptive_avg_pool3d_backward(g, (2, 3, 4, 5, 3), out=torch.zeros_like(x))
    _assert_error(ei, ParamInvalidError, INVALID, OUT)

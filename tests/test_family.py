"""The five operators of SPEC §6 (AvgPool3dBackward, AdaptiveAvgPool2dBackward,
AdaptiveMaxPool3dBackward, MaxPool2dWithIndicesBackward, MaxPool3dWithArgmaxBackward) and
their forwards: worked examples, every validation rule, the float64 reference in every
dtype and layout, PyTorch, thread counts and layouts bit for bit, the three API layers."""
import itertools

import numpy as np
import pytest

import pool_grad as pg
from pool_grad import aclnn
from conftest import (BFLOAT16, DTYPE_IDS, DTYPES, as_layout, empty_out, error_message_names,
                      make_array)
import reference as ref

LAYOUTS = ["c", "channels_last", "sliced", "negative", "f"]


# ------------------------------------------------------------------ the five operators
# Each case: (name, x shape, params); `call(case, go, x, idx, out, n_threads)` runs the
# scikit-style function; `expected(case, go, idx)` the float64 reference.

def _avg3d(go, x, idx, out, nt, k=3, s=2, p=1, ceil=False, cip=True, div=0):
    return pg.avg_pool3d_backward(go, x, k, s, p, ceil_mode=ceil, count_include_pad=cip,
                                  divisor_override=div, out=out, n_threads=nt)


def _aavg2d(go, x, idx, out, nt):
    return pg.adaptive_avg_pool2d_backward(go, x, out=out, n_threads=nt)


def _amax3d(go, x, idx, out, nt):
    return pg.adaptive_max_pool3d_backward(go, x, idx, out=out, n_threads=nt)


def _max2d(go, x, idx, out, nt, k=3, s=2, p=1, d=1, ceil=False):
    return pg.max_pool2d_with_indices_backward(go, x, idx, k, s, p, d, ceil_mode=ceil,
                                               out=out, n_threads=nt)


def _max3d(go, x, idx, out, nt, k=3, s=2, p=1, ceil=False):
    return pg.max_pool3d_with_argmax_backward(go, x, idx, k, s, p, 1, ceil_mode=ceil,
                                              out=out, n_threads=nt)


CASES = {
    # name: (function, x shape, params, n spatial, kind)
    "avg3d_k3s2p1": (_avg3d, (2, 3, 5, 7, 9), dict(k=3, s=2, p=1), 3, "avg"),
    "avg3d_ceil_nopad": (_avg3d, (2, 3, 6, 5, 8), dict(k=(2, 3, 2), s=(2, 2, 3), p=(1, 1, 0),
                                                      ceil=True, cip=False), 3, "avg"),
    "avg3d_override": (_avg3d, (1, 4, 4, 6, 6), dict(k=2, s=1, p=0, div=-3), 3, "avg"),
    "aavg2d": (_aavg2d, (2, 3, 10, 7), dict(out=(4, 3)), 2, "aavg"),
    "aavg2d_up": (_aavg2d, (2, 3, 3, 5), dict(out=(7, 8)), 2, "aavg"),
    "amax3d": (_amax3d, (2, 3, 5, 9, 8), dict(out=(2, 4, 3)), 3, "amax"),
    "max2d_k3s2p1": (_max2d, (2, 3, 11, 12), dict(k=3, s=2, p=1), 2, "max"),
    "max2d_dil_ceil": (_max2d, (2, 3, 13, 11), dict(k=(3, 2), s=(2, 1), p=(1, 0), d=(2, 3),
                                                   ceil=True), 2, "max"),
    "max2d_k2s2": (_max2d, (2, 3, 8, 16), dict(k=2, s=2, p=0), 2, "max"),
    "max3d_k3s2p1": (_max3d, (2, 3, 5, 7, 9), dict(k=3, s=2, p=1), 3, "max"),
    "max3d_ceil": (_max3d, (1, 2, 4, 6, 5), dict(k=(2, 3, 2), s=(2, 2, 2), p=(1, 1, 0),
                                                ceil=True), 3, "max"),
}


def _forward(case, x):
    """y (float64 reference) and int64 indices of the case's forward, through pool_grad."""
    _, _, prm, n, kind = CASES[case]
    if kind == "amax":
        return pg.adaptive_max_pool3d(x, prm["out"], return_indices=True)
    if kind == "max":
        fwd = pg.max_pool2d if n == 2 else pg.max_pool3d
        return fwd(x, prm["k"], prm["s"], prm["p"], prm.get("d", 1), prm.get("ceil", False),
                   return_indices=True)
    raise AssertionError(kind)


def _go_shape(case):
    _, xs, prm, n, kind = CASES[case]
    if kind in ("aavg", "amax"):
        return xs[:-n] + prm["out"]
    k = ref._tuple_n(prm["k"], n)
    s = ref._tuple_n(prm["s"], n)
    p = ref._tuple_n(prm["p"], n)
    d = ref._tuple_n(prm.get("d", 1), n)
    return xs[:-n] + tuple(ref.ref_pool_output_size(i, *a, prm.get("ceil", False))
                           for i, *a in zip(xs[-n:], k, s, p, d))


def _inputs(case, dtype, rng, layout="c"):
    """grad_output (in layout), x and the indices (channels-last where the layout is) of a
    case; indices come from the forward of random data."""
    _, xs, prm, n, kind = CASES[case]
    go = make_array(_go_shape(case), dtype, rng, layout)
    x = make_array(xs, dtype, rng)
    idx = None
    if kind in ("amax", "max"):
        _, idx = _forward(case, x)
        idx = as_layout(idx, layout if layout != "f" else "c")
    return go, x, idx


def _call(case, go, x, idx, out=None, nt=None):
    fn, _, prm, _, _ = CASES[case]
    prm = {k: v for k, v in prm.items() if k != "out"}
    return fn(go, x, idx, out, nt, **prm)


def _expected(case, go, idx):
    _, xs, prm, n, kind = CASES[case]
    if kind == "avg":
        return ref.ref_avg_pool_backward(go, xs, n, prm["k"], prm["s"], prm["p"],
                                         prm.get("ceil", False), prm.get("cip", True),
                                         prm.get("div", 0))
    if kind == "aavg":
        return ref.ref_adaptive_avg_backward(go, xs, n)
    return ref.ref_max_backward(go, xs, idx, n)


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("case", list(CASES))
def test_matches_the_float64_reference(case, dtype, rng):
    go, x, idx = _inputs(case, dtype, rng)
    got = _call(case, go, x, idx)
    assert got.dtype == np.dtype(dtype) and got.shape == x.shape
    want = _expected(case, go, idx)
    rtol, atol = ref.tolerance(dtype)
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=rtol, atol=atol)


@pytest.mark.parametrize("dtype", [np.float32, BFLOAT16], ids=["float32", "bfloat16"])
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("case", list(CASES))
def test_every_layout_and_out_gives_the_same_bits(case, layout, dtype, rng):
    """grad_output, indices and out in one layout (sliced, transposed, negative strides
    included) give the bits of the C-contiguous call, on 1 to 4 threads."""
    go, x, idx = _inputs(case, dtype, rng)
    want = _call(case, go, x, idx, nt=1)
    go_l = as_layout(go, layout)
    idx_l = None if idx is None else as_layout(idx, layout)
    for nt in (1, 2, 3, 4):
        out = empty_out(x.shape, dtype, layout)
        got = _call(case, go_l, x.shape, idx_l, out=out, nt=nt)
        assert got is out
        assert np.ascontiguousarray(got).tobytes() == want.tobytes(), (layout, nt)


@pytest.mark.parametrize("case", [c for c in CASES if CASES[c][3] == 3
                                  and CASES[c][4] in ("amax", "max")])
def test_volumes_whose_depth_and_rows_do_not_merge(case, rng):
    """3-D scatters into and from arrays whose D and H axes are not one axis of rows (a
    slice along H, D and H swapped): the kernel steps over D itself."""
    go, x, idx = _inputs(case, np.float32, rng)
    want = _expected(case, go, idx)
    n, c, d, h, w = x.shape
    big = np.full((n, c, d, h + 3, w), 5, np.float32)
    out = big[:, :, :, 1:h + 1]
    got = _call(case, go, x.shape, idx, out=out)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    assert np.all(big[:, :, :, 0] == 5) and np.all(big[:, :, :, h + 1:] == 5)
    swapped = np.empty((n, c, h, d, w), np.float32).transpose(0, 1, 3, 2, 4)
    go_big = np.zeros(go.shape[:3] + (go.shape[3] + 2,) + go.shape[4:], np.float32)
    go_s = go_big[:, :, :, 1:-1]
    go_s[...] = go
    idx_s = np.zeros_like(go_big, dtype=idx.dtype)[:, :, :, 1:-1]
    idx_s[...] = idx
    got = _call(case, go_s, x.shape, idx_s, out=swapped)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("case", list(CASES))
def test_unbatched_inputs(case, rng):
    go, x, idx = _inputs(case, np.float64, rng)
    got = _call(case, go[0], x[0].shape, None if idx is None else idx[0])
    np.testing.assert_array_equal(got, _call(case, go, x, idx)[0])


@pytest.mark.parametrize("case", [c for c in CASES if CASES[c][4] in ("amax", "max")])
def test_int32_indices_and_equal_indices_accumulate(case, rng):
    go, x, idx = _inputs(case, np.float32, rng)
    got = _call(case, go, x, idx.astype(np.int32))
    np.testing.assert_array_equal(got, _call(case, go, x, idx))
    same = np.zeros_like(idx)            # every output to position 0
    got = _call(case, go, x, same)
    planes = got.reshape(got.shape[0] * got.shape[1], -1)
    want = go.reshape(planes.shape[0], -1).astype(np.float64).sum(axis=1)
    np.testing.assert_allclose(planes[:, 0], want, rtol=1e-5, atol=1e-5)
    assert not planes[:, 1:].any()


@pytest.mark.parametrize("case", [c for c in CASES if CASES[c][4] in ("amax", "max")])
def test_an_index_outside_the_volume_is_161002_at_execute(case, rng):
    go, x, idx = _inputs(case, np.float32, rng)
    vol = int(np.prod(x.shape[-CASES[case][3]:]))
    bad = idx.copy()
    bad.flat[len(bad.flat) // 2] = vol
    out = np.full(x.shape, 3, np.float32)
    with pytest.raises(pg.ParamInvalidError) as e:
        _call(case, go, x, bad, out=out)
    assert e.value.code == 161002 and error_message_names(e, "indices")
    assert str(vol) in str(e.value)
    assert np.all(out == 3)
    bad.flat[0] = -1
    with pytest.raises(pg.ParamInvalidError):
        _call(case, go, x, bad, out=out)
    assert np.all(out == 3)


# ------------------------------------------------------------------ the worked examples

def test_worked_examples_of_spec_6():
    go = np.ones((1, 16, 1, 1, 1), np.float32)
    gi = pg.avg_pool3d_backward(go, (1, 16, 4, 4, 4), 4, 1, 0, count_include_pad=False)
    assert np.all(gi == 0.015625)
    go = np.arange(1, 7, dtype=np.float32).reshape(1, 1, 3, 2)
    np.testing.assert_array_equal(pg.adaptive_avg_pool2d_backward(go, (1, 1, 4, 2))[0, 0],
                                  [[0.5, 1], [2, 3], [4, 5], [2.5, 3]])
    go = np.full((1, 1, 1, 1, 1), 0.4757, np.float32)
    want = np.zeros(8, np.float32)
    want[6] = np.float32(0.4757)
    for dt in (np.int32, np.int64):
        idx = np.full((1, 1, 1, 1, 1), 6, dt)
        np.testing.assert_array_equal(
            pg.adaptive_max_pool3d_backward(go, (1, 1, 2, 2, 2), idx).ravel(), want)
        np.testing.assert_array_equal(
            pg.max_pool3d_with_argmax_backward(go, (1, 1, 2, 2, 2), idx, 2, 2, 0, 1).ravel(),
            want)
    go = np.array([0.4757, 0.1726], np.float32).reshape(1, 1, 2, 1)
    gi = pg.max_pool2d_with_indices_backward(go, (1, 1, 4, 3), np.array([0, 6]).reshape(
        1, 1, 2, 1), 2, 2, 0, 1)
    want = np.zeros(12, np.float32)
    want[0], want[6] = go.ravel()
    np.testing.assert_array_equal(gi.ravel(), want)


# ------------------------------------------------------------------ forwards

@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_forwards_match_the_reference(dtype, rng):
    x = make_array((2, 3, 5, 7, 6), dtype, rng)
    rtol, atol = ref.tolerance(dtype)
    y, idx = pg.max_pool3d(x, 3, 2, 1, return_indices=True)
    ry, ridx = ref.ref_max_pool(x, 3, 3, 2, 1, 1, False)
    np.testing.assert_array_equal(idx, ridx)
    np.testing.assert_array_equal(y.astype(np.float64), ry)
    y, idx = pg.max_pool3d(x, (2, 3, 2), (1, 2, 2), (1, 1, 0), (2, 1, 2), True,
                           return_indices=True)
    ry, ridx = ref.ref_max_pool(x, 3, (2, 3, 2), (1, 2, 2), (1, 1, 0), (2, 1, 2), True)
    np.testing.assert_array_equal(idx, ridx)
    y, idx = pg.adaptive_max_pool3d(x, (2, 3, 4), return_indices=True)
    ry, ridx = ref.ref_adaptive_max(x, 3, (2, 3, 4))
    np.testing.assert_array_equal(idx, ridx)
    np.testing.assert_array_equal(y.astype(np.float64), ry)
    x2 = make_array((2, 3, 9, 8), dtype, rng, "channels_last")
    y, idx = pg.max_pool2d(x2, 3, 2, 1, 2, True, return_indices=True)
    ry, ridx = ref.ref_max_pool(x2, 2, 3, 2, 1, 2, True)
    np.testing.assert_array_equal(idx, ridx)
    np.testing.assert_array_equal(y.astype(np.float64), ry)
    y = pg.adaptive_avg_pool2d(x2, (4, 3))
    full = ref._f64(x2)
    for oh, (hs, he) in enumerate(ref._adaptive_windows(9, 4)):
        for ow, (ws, we) in enumerate(ref._adaptive_windows(8, 3)):
            np.testing.assert_allclose(y[:, :, oh, ow].astype(np.float64),
                                       full[:, :, hs:he, ws:we].mean(axis=(2, 3)),
                                       rtol=rtol, atol=atol)
    y = pg.avg_pool3d(x, 3, 2, 1, count_include_pad=False)
    # the gradient of a sum of the outputs is the backward of ones: its reference agrees
    assert y.shape == (2, 3, 3, 4, 3)


def test_max_forward_nan_and_ties():
    x = np.zeros((1, 1, 2, 2, 2), np.float32)
    y, idx = pg.max_pool3d(x, 2, return_indices=True)
    assert idx.ravel().tolist() == [0]
    x.ravel()[[3, 5]] = np.nan
    y, idx = pg.max_pool3d(x, 2, return_indices=True)
    assert np.isnan(y).all() and idx.ravel().tolist() == [5]


# ------------------------------------------------------------------ PyTorch

def _t(torch, a):
    return torch.from_numpy(np.ascontiguousarray(a, np.float32)).requires_grad_(True)


@pytest.mark.parametrize("seed", range(8))
def test_matches_pytorch_on_random_configurations(torch, seed):
    """Forward values, indices and the backward of each operator against PyTorch's CPU
    kernels (float32), for random kernels, strides, paddings, dilations and ceil_mode,
    overlapping windows included."""
    F = torch.nn.functional
    r = np.random.default_rng(seed)
    n, c = int(r.integers(1, 3)), int(r.integers(1, 5))
    for dims in (2, 3):
        sizes = tuple(int(v) for v in r.integers(3 if dims == 3 else 4, 10, dims))
        x = r.standard_normal((n, c) + sizes).astype(np.float32)
        k = tuple(int(v) for v in r.integers(1, 4, dims))
        s = tuple(int(v) for v in r.integers(1, 4, dims))
        p = tuple(int(r.integers(0, kk // 2 + 1)) for kk in k)
        d = (tuple(int(v) for v in r.integers(1, 3, dims)) if dims == 2 else (1,) * dims)
        ceil = bool(r.integers(0, 2))
        xt = _t(torch, x)
        try:
            if dims == 2:
                yt, it = F.max_pool2d(xt, k, s, p, d, ceil, return_indices=True)
            else:
                yt, it = F.max_pool3d(xt, k, s, p, d, ceil, return_indices=True)
        except RuntimeError:
            continue   # an output size < 1: pool_grad refuses it too
        fwd = pg.max_pool2d if dims == 2 else pg.max_pool3d
        y, idx = fwd(x, k, s, p, d, ceil, return_indices=True)
        np.testing.assert_array_equal(y, yt.detach().numpy())
        np.testing.assert_array_equal(idx, it.numpy())
        go = r.standard_normal(y.shape).astype(np.float32)
        yt.backward(torch.from_numpy(go))
        if dims == 2:
            gi = pg.max_pool2d_with_indices_backward(go, x, idx, k, s, p, d, ceil_mode=ceil)
        else:
            gi = pg.max_pool3d_with_argmax_backward(go, x, idx, k, s, p, d, ceil_mode=ceil)
        np.testing.assert_allclose(gi, xt.grad.numpy(), rtol=1e-5, atol=1e-6)

        outs = tuple(int(v) for v in r.integers(1, 12, dims))
        xt = _t(torch, x)
        if dims == 3:
            yt, it = F.adaptive_max_pool3d(xt, outs, return_indices=True)
            y, idx = pg.adaptive_max_pool3d(x, outs, return_indices=True)
            np.testing.assert_array_equal(idx, it.numpy())
            go = r.standard_normal(y.shape).astype(np.float32)
            yt.backward(torch.from_numpy(go))
            gi = pg.adaptive_max_pool3d_backward(go, x, idx)
        else:
            yt = F.adaptive_avg_pool2d(xt, outs)
            y = pg.adaptive_avg_pool2d(x, outs)
            np.testing.assert_allclose(y, yt.detach().numpy(), rtol=1e-5, atol=1e-6)
            go = r.standard_normal(y.shape).astype(np.float32)
            yt.backward(torch.from_numpy(go))
            gi = pg.adaptive_avg_pool2d_backward(go, x)
        np.testing.assert_allclose(gi, xt.grad.numpy(), rtol=1e-5, atol=1e-5)

    sizes = tuple(int(v) for v in r.integers(3, 9, 3))
    x = r.standard_normal((n, c) + sizes).astype(np.float32)
    k = tuple(int(v) for v in r.integers(1, 4, 3))
    s = tuple(int(v) for v in r.integers(1, 4, 3))
    p = tuple(int(r.integers(0, kk // 2 + 1)) for kk in k)
    ceil, cip = bool(r.integers(0, 2)), bool(r.integers(0, 2))
    div = int(r.choice([0, 0, 3]))
    xt = _t(torch, x)
    yt = F.avg_pool3d(xt, k, s, p, ceil, cip, div or None)
    y = pg.avg_pool3d(x, k, s, p, ceil, cip, div)
    np.testing.assert_allclose(y, yt.detach().numpy(), rtol=1e-5, atol=1e-6)
    go = r.standard_normal(y.shape).astype(np.float32)
    yt.backward(torch.from_numpy(go))
    gi = pg.avg_pool3d_backward(go, x, k, s, p, ceil_mode=ceil, count_include_pad=cip,
                                divisor_override=div)
    np.testing.assert_allclose(gi, xt.grad.numpy(), rtol=1e-5, atol=1e-6)


# ------------------------------------------------------------------ the three layers

def test_two_phase_objects_and_the_aclnn_layer(rng):
    go, x, idx = _inputs("max2d_k3s2p1", np.float32, rng)
    want = _call("max2d_k3s2p1", go, x, idx)
    gi = np.empty_like(x)
    ws, ex = aclnn.aclnnMaxPool2dWithIndicesBackwardGetWorkspaceSize(
        go, x, idx, [3, 3], [2, 2], [1, 1], [1, 1], False, gi)
    assert aclnn.aclnnMaxPool2dWithIndicesBackward(np.empty(ws, np.uint8), ws, ex, None) == 0
    np.testing.assert_array_equal(gi, want)
    go2 = go * 2
    op = pg.MaxPool2dWithIndicesBackward(go2, x, idx, 3, 2, 1, 1, False, gi)
    op.execute()
    np.testing.assert_array_equal(gi, 2 * want)
    go2[...] = go
    op.execute(n_threads=1)                  # re-execution sees the new values
    np.testing.assert_array_equal(gi, want)
    assert "MaxPool2dWithIndicesBackward" in repr(op) and "dilation=(1, 1)" in repr(op)

    go, x, idx = _inputs("max3d_k3s2p1", np.float32, rng)
    gi = np.empty_like(x)
    ws, ex = aclnn.aclnnMaxPool3dWithArgmaxBackwardGetWorkspaceSize(
        go, x, idx, [3], [2], [1], [1], False, gi)
    s = pg.Stream()
    aclnn.aclnnMaxPool3dWithArgmaxBackward(None if not ws else np.empty(ws, np.uint8), ws,
                                           ex, s)
    s.synchronize()
    np.testing.assert_array_equal(gi, _call("max3d_k3s2p1", go, x, idx))

    go, x, idx = _inputs("amax3d", np.float32, rng)
    gi = np.empty_like(x)
    ws, ex = aclnn.aclnnAdaptiveMaxPool3dBackwardGetWorkspaceSize(go, x, idx, gi)
    aclnn.aclnnAdaptiveMaxPool3dBackward(np.empty(ws, np.uint8), ws, ex, None)
    np.testing.assert_array_equal(gi, _call("amax3d", go, x, idx))

    go, x, _ = _inputs("avg3d_k3s2p1", np.float32, rng)
    gi = np.empty_like(x)
    ws, ex = aclnn.aclnnAvgPool3dBackwardGetWorkspaceSize(go, x, [3, 3, 3], [2, 2, 2],
                                                          [1, 1, 1], False, True, 0, gi)
    aclnn.aclnnAvgPool3dBackward(np.empty(ws, np.uint8), ws, ex, None)
    np.testing.assert_array_equal(gi, _call("avg3d_k3s2p1", go, x, None))
    with pytest.raises(pg.ParamInvalidError):
        aclnn.aclnnAvgPool3dBackward(None, ws, ex, None) if ws else \
            aclnn.aclnnAvgPool3dBackward(None, -1, ex, None)

    go, x, _ = _inputs("aavg2d", np.float32, rng)
    gi = np.empty_like(x)
    ws, ex = aclnn.aclnnAdaptiveAvgPool2dBackwardGetWorkspaceSize(go, x, gi)
    aclnn.aclnnAdaptiveAvgPool2dBackward(np.empty(ws, np.uint8), ws, ex, None)
    np.testing.assert_array_equal(gi, _call("aavg2d", go, x, None))
    with pytest.raises(pg.ParamInvalidError):
        aclnn.aclnnAdaptiveAvgPool2dBackward(np.empty(ws, np.uint8), ws, op, None)


# ------------------------------------------------------------------ validation (SPEC §6)

def _max2d_args(**kw):
    a = dict(grad_output=np.zeros((1, 2, 3, 3), np.float32), x=(1, 2, 6, 6),
             indices=np.zeros((1, 2, 3, 3), np.int64), kernel_size=2, stride=2, padding=0,
             dilation=1, ceil_mode=False, grad_input=np.zeros((1, 2, 6, 6), np.float32))
    a.update(kw)
    return a


def _max3d_args(**kw):
    a = dict(grad_output=np.zeros((1, 2, 2, 3, 3), np.float32), x=(1, 2, 4, 6, 6),
             indices=np.zeros((1, 2, 2, 3, 3), np.int64), kernel_size=2, stride=2, padding=0,
             dilation=1, ceil_mode=False, grad_input=np.zeros((1, 2, 4, 6, 6), np.float32))
    a.update(kw)
    return a


def _avg3d_args(**kw):
    a = dict(grad_output=np.zeros((1, 2, 2, 3, 3), np.float32), x=(1, 2, 4, 6, 6),
             kernel_size=2, stride=2, padding=0, ceil_mode=False, count_include_pad=True,
             divisor_override=0, grad_input=np.zeros((1, 2, 4, 6, 6), np.float32))
    a.update(kw)
    return a


def _amax3d_args(**kw):
    a = dict(grad_output=np.zeros((1, 2, 2, 3, 3), np.float32), x=(1, 2, 4, 6, 6),
             indices=np.zeros((1, 2, 2, 3, 3), np.int64),
             grad_input=np.zeros((1, 2, 4, 6, 6), np.float32))
    a.update(kw)
    return a


def _aavg2d_args(**kw):
    a = dict(grad_output=np.zeros((1, 2, 3, 3), np.float32), x=(1, 2, 6, 6),
             grad_input=np.zeros((1, 2, 6, 6), np.float32))
    a.update(kw)
    return a


OPS = {
    "avg3d": (pg.AvgPool3dBackward, _avg3d_args),
    "aavg2d": (pg.AdaptiveAvgPool2dBackward, _aavg2d_args),
    "amax3d": (pg.AdaptiveMaxPool3dBackward, _amax3d_args),
    "max2d": (pg.MaxPool2dWithIndicesBackward, _max2d_args),
    "max3d": (pg.MaxPool3dWithArgmaxBackward, _max3d_args),
}

f16 = np.float16
# (op, changed arguments, code, names the message must mention)
RULES = [
    # 161001: a None argument
    *[(op, {arg: None}, 161001, (arg,)) for op, args in [
        ("avg3d", ("grad_output", "x", "kernel_size", "padding", "grad_input")),
        ("aavg2d", ("grad_output", "x", "grad_input")),
        ("amax3d", ("grad_output", "x", "indices", "grad_input")),
        ("max2d", ("grad_output", "x", "indices", "kernel_size", "padding", "dilation",
                   "grad_input")),
        ("max3d", ("grad_output", "x", "indices", "kernel_size", "padding", "dilation",
                   "grad_input"))] for arg in args],
    # dtypes
    *[(op, {"grad_output": OPS[op][1]()["grad_output"].astype(np.int32)}, 161002,
       ("grad_output",)) for op in OPS],
    *[(op, {"grad_input": OPS[op][1]()["grad_input"].astype(f16)}, 161002, ("grad_input",))
      for op in OPS],
    *[(op, {"indices": OPS[op][1]()["indices"].astype(np.float32)}, 161002, ("indices",))
      for op in ("amax3d", "max2d", "max3d")],
    *[(op, {"indices": OPS[op][1]()["indices"][..., :2]}, 161002, ("indices",))
      for op in ("amax3d", "max2d", "max3d")],
    # ranks, N/C, shapes
    *[(op, {"x": (2, 6, 6)}, 161002, ("x", "grad_output")) for op in ("avg3d", "amax3d",
                                                                       "max3d")],
    *[(op, {"x": (1, 2, 1, 6, 6)}, 161002, ("x", "grad_output")) for op in ("aavg2d",
                                                                             "max2d")],
    *[(op, {"x": (1, 3) + OPS[op][1]()["x"][2:],
            "grad_input": np.zeros((1, 3) + OPS[op][1]()["x"][2:], np.float32)},
       161002, ("grad_output",)) for op in OPS],
    *[(op, {"grad_input": np.zeros(OPS[op][1]()["x"][:-1] + (7,), np.float32)}, 161002,
       ("grad_input",)) for op in OPS],
    *[(op, {"grad_output": np.zeros(OPS[op][1]()["grad_output"].shape[:-1] + (4,),
                                    np.float32),
            "indices": np.zeros(OPS[op][1]()["grad_output"].shape[:-1] + (4,), np.int64)},
       161002, ("grad_output",)) for op in ("avg3d", "max2d", "max3d")],
    # kernel, stride, padding, dilation
    *[(op, {"kernel_size": 0}, 161002, ("kernel_size",)) for op in ("avg3d", "max2d",
                                                                     "max3d")],
    *[(op, {"kernel_size": (2, 2)}, 161002, ("kernel_size",)) for op in ("avg3d", "max3d")],
    ("max2d", {"kernel_size": (2, 2, 2)}, 161002, ("kernel_size",)),
    *[(op, {"stride": -1}, 161002, ("stride",)) for op in ("avg3d", "max2d", "max3d")],
    *[(op, {"stride": (2, 2, 2, 2)}, 161002, ("stride",)) for op in ("avg3d", "max2d",
                                                                      "max3d")],
    *[(op, {"padding": -1}, 161002, ("padding",)) for op in ("avg3d", "max2d", "max3d")],
    *[(op, {"padding": 2}, 161002, ("padding",)) for op in ("avg3d", "max2d", "max3d")],
    ("max2d", {"dilation": 0}, 161002, ("dilation",)),
    ("max2d", {"dilation": (1, 1, 1)}, 161002, ("dilation",)),
    ("max3d", {"dilation": 2}, 161002, ("dilation",)),
    ("max3d", {"dilation": (1, 2, 1)}, 161002, ("dilation",)),
    ("avg3d", {"ceil_mode": 2}, 161002, ("ceil_mode",)),
    ("max2d", {"ceil_mode": "yes"}, 161002, ("ceil_mode",)),
    ("avg3d", {"divisor_override": 1.5}, 161002, ("divisor_override",)),
    # output size < 1
    ("max2d", {"x": (1, 2, 2, 6), "grad_input": np.zeros((1, 2, 2, 6), np.float32),
               "kernel_size": 3, "stride": 1, "dilation": 2}, 161002, ("kernel_size",)),
    ("avg3d", {"x": (1, 2, 1, 6, 6), "grad_input": np.zeros((1, 2, 1, 6, 6), np.float32),
               "kernel_size": (2, 1, 1)}, 161002, ("kernel_size",)),
    # empty arrays, per operator
    ("aavg2d", {"x": (0, 2, 6, 6), "grad_input": np.zeros((0, 2, 6, 6), np.float32),
                "grad_output": np.zeros((0, 2, 3, 3), np.float32)}, 161002, ("x",)),
    ("max2d", {"x": (1, 2, 0, 6), "grad_input": np.zeros((1, 2, 0, 6), np.float32)},
     161002, ("x",)),
    ("max2d", {"x": (1, 0, 6, 6), "grad_input": np.zeros((1, 0, 6, 6), np.float32),
               "grad_output": np.zeros((1, 0, 3, 3), np.float32),
               "indices": np.zeros((1, 0, 3, 3), np.int64)}, 161002, ("x",)),
    ("max3d", {"x": (0, 2, 4, 6, 6), "grad_input": np.zeros((0, 2, 4, 6, 6), np.float32),
               "grad_output": np.zeros((0, 2, 2, 3, 3), np.float32),
               "indices": np.zeros((0, 2, 2, 3, 3), np.int64)}, 161002, ("x",)),
]


def _readonly(shape):
    a = np.zeros(shape, np.float32)
    a.flags.writeable = False
    return a


@pytest.mark.parametrize("op,changes,code,names", RULES,
                         ids=[f"{r[0]}-{'-'.join(r[1])}-{i}" for i, r in enumerate(RULES)])
def test_every_rule_raises_its_code_naming_the_argument(op, changes, code, names):
    cls, args = OPS[op]
    kwargs = args(**{k: v for k, v in changes.items() if k in args()})
    with pytest.raises(pg.AclnnError) as e:
        cls(*kwargs.values())
    assert e.value.code == code, str(e.value)
    assert error_message_names(e, *names), str(e.value)
    assert isinstance(e.value, TypeError if code == 161001 else ValueError)


@pytest.mark.parametrize("op", list(OPS))
def test_grad_input_read_only_or_overlapping(op):
    cls, args = OPS[op]
    kwargs = args(grad_input=_readonly(args()["x"]))
    with pytest.raises(pg.ParamInvalidError) as e:
        cls(*kwargs.values())
    assert error_message_names(e, "grad_input")
    big = np.zeros(args()["x"], np.float32)
    go = big[(slice(None),) * 2 + tuple(slice(0, n) for n in args()["grad_output"].shape[2:])]
    kwargs = args(grad_output=go, grad_input=big)
    with pytest.raises(pg.ParamInvalidError) as e:
        cls(*kwargs.values())
    assert error_message_names(e, "grad_input")


@pytest.mark.parametrize("op", ["amax3d", "max2d", "max3d"])
def test_volumes_past_int32_are_refused_at_planning(op):
    cls, args = OPS[op]
    big = (1, 1, 1 << 11, 1 << 10, 1 << 10) if op != "max2d" else (1, 1, 1 << 16, 1 << 15)
    n = len(big) - 2
    go_shape = (1, 1) + (1,) * n
    kw = dict(grad_output=np.zeros(go_shape, np.float32), x=big,
              indices=np.zeros(go_shape, np.int64), grad_input=pg._validate.NewOutput(
                  big, np.float32, False))
    if op != "amax3d":
        kw.update(kernel_size=tuple(big[2:]), stride=None, padding=0, dilation=1,
                  ceil_mode=False)
        kw = {k: kw[k] for k in args()}
    with pytest.raises(pg.ParamInvalidError) as e:
        cls(*kw.values())
    assert "2**31-1" in str(e.value) and error_message_names(e, "x")


def test_zero_size_n_is_a_no_op():
    out = np.full((0, 2, 6, 6), 1, np.float32)
    pg.MaxPool2dWithIndicesBackward(np.zeros((0, 2, 3, 3), np.float32), out.shape,
                                    np.zeros((0, 2, 3, 3), np.int64), 2, 2, 0, 1, False,
                                    out).execute()
    out = np.full((0, 2, 4, 6, 6), 1, np.float32)
    op = pg.AvgPool3dBackward(np.zeros((0, 2, 2, 3, 3), np.float32), out.shape, 2, 2, 0,
                              False, True, 0, out)
    assert op.workspace_size == 0
    op.execute()
    pg.AdaptiveMaxPool3dBackward(np.zeros((0, 2, 2, 3, 3), np.float32), out.shape,
                                 np.zeros((0, 2, 2, 3, 3), np.int64), out).execute()


def test_parameter_forms(rng):
    """int, length 1 and full length give one result; stride None and () are the kernel."""
    go, x, _ = _inputs("avg3d_k3s2p1", np.float32, rng)
    a = pg.avg_pool3d_backward(go, x, 3, 2, 1)
    b = pg.avg_pool3d_backward(go, x, [3], (2,), np.array([1, 1, 1]))
    np.testing.assert_array_equal(a, b)
    go = make_array((1, 2, 2, 3, 3), np.float32, rng)
    np.testing.assert_array_equal(pg.avg_pool3d_backward(go, (1, 2, 4, 6, 6), 2),
                                  pg.avg_pool3d_backward(go, (1, 2, 4, 6, 6), 2, ()))
    idx = np.zeros(go.shape, np.int64)
    np.testing.assert_array_equal(
        pg.max_pool3d_with_argmax_backward(go, (1, 2, 4, 6, 6), idx, (2, 2, 2)),
        pg.max_pool3d_with_argmax_backward(go, (1, 2, 4, 6, 6), idx, 2, [], 0, [1]))


def test_forward_rules():
    x = np.zeros((1, 2, 6, 6), np.float32)
    with pytest.raises(pg.ParamInvalidError) as e:
        pg.max_pool2d(x, 2, padding=2)
    assert error_message_names(e, "padding")
    with pytest.raises(pg.ParamInvalidError) as e:
        pg.max_pool2d(np.zeros((1, 2, 0, 6), np.float32), 2)
    assert error_message_names(e, "x")
    with pytest.raises(pg.ParamInvalidError) as e:
        pg.adaptive_avg_pool2d(x, (0, 2))
    assert error_message_names(e, "output_size")
    with pytest.raises(pg.ParamInvalidError) as e:
        pg.adaptive_max_pool3d(np.zeros((1, 2, 3, 0, 6), np.float32), 2)
    assert error_message_names(e, "x")
    with pytest.raises(pg.ParamNullptrError):
        pg.max_pool3d(np.zeros((1, 2, 3, 6, 6), np.float32), 2, dilation=None)
    assert pg.max_pool2d(np.zeros((0, 2, 6, 6), np.float32), 2).shape == (0, 2, 3, 3)

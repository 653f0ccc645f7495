"""Independent float64 reference for the pool_grad operators.

Written from SPEC.md alone (never from the kernels): the formulas of §1 for the gradients, the
PyTorch forward semantics the backward operators are the derivatives of, and the rounding rules of
§4 for cube_math_type.  Loops run over output positions only; the N and C axes are vectorised so
the test suite stays fast.  Nothing here imports pool_grad.
"""

import itertools

import numpy as np

try:  # bfloat16 is optional for the reference itself; the test suite requires it.
    import ml_dtypes

    _BFLOAT16 = np.dtype(ml_dtypes.bfloat16)
except ImportError:  # pragma: no cover
    ml_dtypes = None
    _BFLOAT16 = None


# --------------------------------------------------------------------------------------------
# helpers

def _f64(a):
    """Any array-like (bfloat16/float16 included) as a float64 ndarray."""
    return np.asarray(a).astype(np.float64)


def _lift(a, batched_rank):
    """Add a leading N axis to an unbatched array; return (array, squeeze_back)."""
    if a.ndim == batched_rank - 1:
        return a[None], True
    if a.ndim != batched_rank:
        raise ValueError(f"rank {a.ndim} not in ({batched_rank - 1}, {batched_rank})")
    return a, False


def _lift_shape(shape, batched_rank):
    shape = tuple(int(s) for s in shape)
    if len(shape) == batched_rank - 1:
        return (1,) + shape, True
    if len(shape) != batched_rank:
        raise ValueError(f"rank {len(shape)} not in ({batched_rank - 1}, {batched_rank})")
    return shape, False


def _triple(v):
    if np.ndim(v) == 0:
        return (int(v),) * 3
    v = tuple(int(e) for e in v)
    return v * 3 if len(v) == 1 else v


def _pair(v):
    if np.ndim(v) == 0:
        return (int(v),) * 2
    v = tuple(int(e) for e in v)
    return v * 2 if len(v) == 1 else v


def _adaptive_start(o, in_size, out_size):
    return (o * in_size) // out_size


def _adaptive_end(o, in_size, out_size):
    return -((-(o + 1) * in_size) // out_size)  # ceil((o+1)*in/out)


# --------------------------------------------------------------------------------------------
# §1.1 AvgPool2d

def ref_avg_pool2d_output_size(in_size, k, s, p, ceil_mode):
    """SPEC §1.1 output size (may be < 1; the caller decides whether that is an error)."""
    out = (in_size + 2 * p - k + (s - 1 if ceil_mode else 0)) // s + 1  # Python // floors
    if ceil_mode and (out - 1) * s >= in_size + p:
        out -= 1
    return out


def _avg_windows(H, W, kernel_size, stride, padding, ceil_mode, count_include_pad,
                 divisor_override):
    """Yield (oh, ow, hs, he, ws, we, divisor) for every non-empty window, per SPEC §1.1."""
    kh, kw = kernel_size
    sh, sw = stride
    ph, pw = padding
    Ho = ref_avg_pool2d_output_size(H, kh, sh, ph, ceil_mode)
    Wo = ref_avg_pool2d_output_size(W, kw, sw, pw, ceil_mode)
    windows = []
    for oh in range(Ho):
        hs = oh * sh - ph
        he = min(hs + kh, H + ph)
        for ow in range(Wo):
            ws = ow * sw - pw
            we = min(ws + kw, W + pw)
            pool_size = (he - hs) * (we - ws)
            hs0, he0 = max(hs, 0), min(he, H)
            ws0, we0 = max(ws, 0), min(we, W)
            if hs0 >= he0 or ws0 >= we0:
                windows.append((oh, ow, hs0, he0, ws0, we0, None))
                continue
            if divisor_override:
                divisor = divisor_override
            elif count_include_pad:
                divisor = pool_size
            else:
                divisor = (he0 - hs0) * (we0 - ws0)
            windows.append((oh, ow, hs0, he0, ws0, we0, divisor))
    return Ho, Wo, windows


def ref_avg_pool2d_backward(grad_output, x_shape, kernel_size, stride, padding, ceil_mode,
                            count_include_pad, divisor_override):
    """SPEC §1.1 gradient in float64.  kernel_size/stride/padding are (h, w) tuples;
    divisor_override 0 (or None) means unset.  3-D (C,H,W) and 4-D (N,C,H,W)."""
    g, squeeze = _lift(_f64(grad_output), 4)
    shape4, _ = _lift_shape(x_shape, 4)
    N, C, H, W = shape4
    Ho, Wo, windows = _avg_windows(H, W, _pair(kernel_size), _pair(stride), _pair(padding),
                                   ceil_mode, count_include_pad, divisor_override or 0)
    if g.shape != (N, C, Ho, Wo):
        raise ValueError(f"grad_output shape {g.shape} != {(N, C, Ho, Wo)}")
    gi = np.zeros(shape4, dtype=np.float64)
    for oh, ow, hs, he, ws, we, divisor in windows:
        if divisor is None:
            continue
        gi[:, :, hs:he, ws:we] += (g[:, :, oh, ow] / divisor)[:, :, None, None]
    return gi[0] if squeeze else gi


def ref_avg_pool2d(x, kernel_size, stride, padding, ceil_mode, count_include_pad,
                   divisor_override):
    """PyTorch avg_pool2d forward (same windows and divisors as SPEC §1.1), float64."""
    a, squeeze = _lift(_f64(x), 4)
    N, C, H, W = a.shape
    Ho, Wo, windows = _avg_windows(H, W, _pair(kernel_size), _pair(stride), _pair(padding),
                                   ceil_mode, count_include_pad, divisor_override or 0)
    out = np.zeros((N, C, Ho, Wo), dtype=np.float64)
    for oh, ow, hs, he, ws, we, divisor in windows:
        if divisor is None:
            continue
        out[:, :, oh, ow] = a[:, :, hs:he, ws:we].sum(axis=(2, 3)) / divisor
    return out[0] if squeeze else out


# --------------------------------------------------------------------------------------------
# §1.2 AdaptiveAvgPool3d

def _adaptive_windows(in_size, out_size):
    return [(_adaptive_start(o, in_size, out_size), _adaptive_end(o, in_size, out_size))
            for o in range(out_size)]


def ref_adaptive_avg_pool3d_backward(grad_output, x_shape):
    """SPEC §1.2 gradient in float64; 4-D (C,D,H,W) and 5-D (N,C,D,H,W)."""
    g, squeeze = _lift(_f64(grad_output), 5)
    shape5, _ = _lift_shape(x_shape, 5)
    N, C, D, H, W = shape5
    if g.shape[:2] != (N, C):
        raise ValueError(f"grad_output N,C {g.shape[:2]} != {(N, C)}")
    Do, Ho, Wo = g.shape[2:]
    gi = np.zeros(shape5, dtype=np.float64)
    for od, (ds, de) in enumerate(_adaptive_windows(D, Do)):
        for oh, (hs, he) in enumerate(_adaptive_windows(H, Ho)):
            for ow, (ws, we) in enumerate(_adaptive_windows(W, Wo)):
                divisor = (de - ds) * (he - hs) * (we - ws)
                gi[:, :, ds:de, hs:he, ws:we] += (g[:, :, od, oh, ow] / divisor)[
                    :, :, None, None, None]
    return gi[0] if squeeze else gi


def ref_adaptive_avg_pool3d(x, output_size):
    """PyTorch adaptive_avg_pool3d forward, float64."""
    a, squeeze = _lift(_f64(x), 5)
    N, C, D, H, W = a.shape
    Do, Ho, Wo = _triple(output_size)
    out = np.zeros((N, C, Do, Ho, Wo), dtype=np.float64)
    for od, (ds, de) in enumerate(_adaptive_windows(D, Do)):
        for oh, (hs, he) in enumerate(_adaptive_windows(H, Ho)):
            for ow, (ws, we) in enumerate(_adaptive_windows(W, Wo)):
                out[:, :, od, oh, ow] = a[:, :, ds:de, hs:he, ws:we].mean(axis=(2, 3, 4))
    return out[0] if squeeze else out


# --------------------------------------------------------------------------------------------
# §1.3 AdaptiveMaxPool2d

def ref_adaptive_max_pool2d_backward(grad_output, x_shape, indices):
    """SPEC §1.3 gradient in float64; 3-D and 4-D; repeated indices accumulate.
    Raises IndexError for an index outside [0, H*W)."""
    g, squeeze = _lift(_f64(grad_output), 4)
    idx, _ = _lift(np.asarray(indices).astype(np.int64), 4)
    shape4, _ = _lift_shape(x_shape, 4)
    N, C, H, W = shape4
    if idx.shape != g.shape:
        raise ValueError(f"indices shape {idx.shape} != grad_output shape {g.shape}")
    if idx.size and (idx.min() < 0 or idx.max() >= H * W):
        raise IndexError("index outside [0, H*W)")
    gi = np.zeros((N * C, H * W), dtype=np.float64)
    per_plane = g.shape[2] * g.shape[3]
    rows = np.repeat(np.arange(N * C), per_plane)
    np.add.at(gi, (rows, idx.reshape(-1)), g.reshape(-1))
    gi = gi.reshape(shape4)
    return gi[0] if squeeze else gi


def ref_adaptive_max_pool2d(x, output_size):
    """PyTorch (CPU) adaptive_max_pool2d forward: (out float64, indices int64).  The first
    maximum in row-major window order wins; NaN counts as the maximum and, as in PyTorch's CPU
    kernel, the last NaN of the window wins (checked against torch in test_reference.py)."""
    a, squeeze = _lift(_f64(x), 4)
    N, C, H, W = a.shape
    Ho, Wo = _pair(output_size)
    out = np.zeros((N, C, Ho, Wo), dtype=np.float64)
    indices = np.zeros((N, C, Ho, Wo), dtype=np.int64)
    for oh, (hs, he) in enumerate(_adaptive_windows(H, Ho)):
        for ow, (ws, we) in enumerate(_adaptive_windows(W, Wo)):
            win = a[:, :, hs:he, ws:we].reshape(N, C, -1)
            # Without NaN: the first maximum (np.argmax).  With NaN: PyTorch's CPU kernel takes
            # `val > maxval || isnan(val)`, so every NaN replaces the running maximum and the
            # LAST NaN in row-major window order wins.
            local = np.argmax(np.where(np.isnan(win), -np.inf, win), axis=2)
            isnan = np.isnan(win)
            last_nan = win.shape[2] - 1 - np.argmax(isnan[:, :, ::-1], axis=2)
            local = np.where(isnan.any(axis=2), last_nan, local)
            out[:, :, oh, ow] = np.take_along_axis(win, local[:, :, None], axis=2)[:, :, 0]
            wlen = we - ws
            indices[:, :, oh, ow] = (hs + local // wlen) * W + (ws + local % wlen)
    if squeeze:
        return out[0], indices[0]
    return out, indices


# --------------------------------------------------------------------------------------------
# §4 rounding for cube_math_type

def ref_round_hf32(a):
    """Round each float32 value to HF32: 11 explicit mantissa bits, round-to-nearest-even,
    float32 exponent range (overflow rounds to inf); inf and NaN are kept."""
    a = np.asarray(a, dtype=np.float32)
    flat = np.array(a, dtype=np.float32, ndmin=1).reshape(-1)
    u = flat.view(np.uint32).astype(np.uint64)
    r = (u + np.uint64(0x7FF) + ((u >> np.uint64(12)) & np.uint64(1))) & np.uint64(0xFFFFF000)
    out = r.astype(np.uint32).view(np.float32)
    keep = ~np.isfinite(flat)
    out[keep] = flat[keep]
    return out.reshape(a.shape)


def ref_round_fp16(a):
    """Round each float32 value to IEEE float16 (round-to-nearest-even) and back."""
    with np.errstate(over="ignore"):  # overflow to inf is the intended IEEE behaviour
        return np.asarray(a, dtype=np.float32).astype(np.float16).astype(np.float32)


# --------------------------------------------------------------------------------------------
# tolerances

def tolerance(dtype):
    """(rtol, atol) for comparing a result of `dtype` with the float64 reference, for data of
    magnitude about 1 (the suite draws values from uniform(-1, 1)).  The 16-bit bounds allow
    the single rounding at the store (SPEC §4) plus float32 accumulation."""
    dt = np.dtype(dtype)
    if dt == np.float64:
        return 1e-12, 1e-12
    if dt == np.float32:
        return 1e-5, 1e-6
    if dt == np.float16:
        return 2e-3, 1e-4
    if _BFLOAT16 is not None and dt == _BFLOAT16:
        return 1.6e-2, 1e-3
    raise TypeError(f"no tolerance for dtype {dt}")


# --------------------------------------------------------------------------------------------
# §6: the family over n = 2 or 3 spatial axes (written from SPEC §6 and PyTorch's forward
# semantics, like the rest of this file)

def _tuple_n(v, n):
    if np.ndim(v) == 0:
        return (int(v),) * n
    v = tuple(int(e) for e in v)
    return v * n if len(v) == 1 else v


def ref_pool_output_size(in_size, k, s, p, d, ceil_mode):
    """SPEC §6.4 output size (d = 1: §1.1's)."""
    out = (in_size + 2 * p - d * (k - 1) - 1 + (s - 1 if ceil_mode else 0)) // s + 1
    if ceil_mode and (out - 1) * s >= in_size + p:
        out -= 1
    return out


def _lift_n(a, n):
    return _lift(a, n + 2)


def ref_avg_pool_backward(grad_output, x_shape, n, kernel_size, stride, padding, ceil_mode,
                          count_include_pad, divisor_override):
    """SPEC §1.1 / §6.1 gradient in float64 over the last n axes."""
    g, squeeze = _lift_n(_f64(grad_output), n)
    shape, _ = _lift_shape(x_shape, n + 2)
    k = _tuple_n(kernel_size, n)
    s = k if stride is None or (np.ndim(stride) and len(stride) == 0) else _tuple_n(stride, n)
    p = _tuple_n(padding, n)
    sizes = shape[2:]
    outs = tuple(ref_pool_output_size(i, kk, ss, pp, 1, ceil_mode)
                 for i, kk, ss, pp in zip(sizes, k, s, p))
    assert g.shape[2:] == outs, (g.shape, outs)
    gi = np.zeros(shape, np.float64)
    for o in np.ndindex(*outs):
        lo, hi, pool, clipped = [], [], 1, 1
        for a in range(n):
            st = o[a] * s[a] - p[a]
            en = min(st + k[a], sizes[a] + p[a])
            pool *= en - st
            st, en = max(st, 0), min(en, sizes[a])
            clipped *= max(en - st, 0)
            lo.append(st)
            hi.append(en)
        if clipped == 0:
            continue
        div = divisor_override if divisor_override else (pool if count_include_pad
                                                         else clipped)
        sl = (slice(None), slice(None)) + tuple(slice(a, b) for a, b in zip(lo, hi))
        gi[sl] += (g[(slice(None), slice(None)) + o] / div)[(...,) + (None,) * n]
    return gi[0] if squeeze else gi


def ref_adaptive_avg_backward(grad_output, x_shape, n):
    """SPEC §1.2 / §6.2 gradient in float64 over the last n axes."""
    g, squeeze = _lift_n(_f64(grad_output), n)
    shape, _ = _lift_shape(x_shape, n + 2)
    sizes, outs = shape[2:], g.shape[2:]
    gi = np.zeros(shape, np.float64)
    wins = [_adaptive_windows(i, o) for i, o in zip(sizes, outs)]
    for o in np.ndindex(*outs):
        w = [wins[a][o[a]] for a in range(n)]
        vol = np.prod([b - a for a, b in w])
        sl = (slice(None), slice(None)) + tuple(slice(a, b) for a, b in w)
        gi[sl] += (g[(slice(None), slice(None)) + o] / vol)[(...,) + (None,) * n]
    return gi[0] if squeeze else gi


def ref_max_backward(grad_output, x_shape, indices, n):
    """SPEC §1.3 / §6.3-6.5 scatter in float64: indices flat in each (n, c) volume of the
    last n axes; raises IndexError for one outside it."""
    g, squeeze = _lift_n(_f64(grad_output), n)
    idx, _ = _lift_n(np.asarray(indices).astype(np.int64), n)
    shape, _ = _lift_shape(x_shape, n + 2)
    vol = int(np.prod(shape[2:]))
    if idx.size and (idx.min() < 0 or idx.max() >= vol):
        raise IndexError("index outside the volume")
    planes = shape[0] * shape[1]
    gi = np.zeros((planes, vol), np.float64)
    per = int(np.prod(g.shape[2:]))
    np.add.at(gi, (np.repeat(np.arange(planes), per), idx.reshape(-1)), g.reshape(-1))
    gi = gi.reshape(shape)
    return gi[0] if squeeze else gi


def _window_max(win_vals, win_pos):
    """PyTorch's pick over positions in visiting order: strictly greater, or NaN."""
    best, arg = -np.inf, win_pos[0]
    for val, pos in zip(win_vals, win_pos):
        if val > best or np.isnan(val):
            best, arg = val, pos
    return best, arg


def ref_max_pool(x, n, kernel_size, stride, padding, dilation, ceil_mode):
    """PyTorch (CPU) max_pool{2,3}d forward over the last n axes: (out float64, indices
    int64 flat in each volume).  Slow: for small inputs."""
    a, squeeze = _lift_n(_f64(x), n)
    sizes = a.shape[2:]
    k, p, d = _tuple_n(kernel_size, n), _tuple_n(padding, n), _tuple_n(dilation, n)
    s = k if stride is None else _tuple_n(stride, n)
    outs = tuple(ref_pool_output_size(i, kk, ss, pp, dd, ceil_mode)
                 for i, kk, ss, pp, dd in zip(sizes, k, s, p, d))
    out = np.zeros(a.shape[:2] + outs)
    ind = np.zeros(a.shape[:2] + outs, np.int64)
    flat = a.reshape(a.shape[:2] + (-1,))
    for o in np.ndindex(*outs):
        axes = []
        for ax in range(n):
            st = o[ax] * s[ax] - p[ax]
            axes.append([i for i in range(st, st + (k[ax] - 1) * d[ax] + 1, d[ax])
                         if 0 <= i < sizes[ax]])
        pos = [int(np.ravel_multi_index(c, sizes)) for c in itertools.product(*axes)]
        for nc in np.ndindex(*a.shape[:2]):
            out[nc + o], ind[nc + o] = _window_max(flat[nc][pos], pos)
    return (out[0], ind[0]) if squeeze else (out, ind)


def ref_adaptive_max(x, n, output_size):
    """PyTorch (CPU) adaptive_max_pool{2,3}d forward: (out float64, indices int64)."""
    a, squeeze = _lift_n(_f64(x), n)
    sizes = a.shape[2:]
    outs = _tuple_n(output_size, n)
    out = np.zeros(a.shape[:2] + outs)
    ind = np.zeros(a.shape[:2] + outs, np.int64)
    flat = a.reshape(a.shape[:2] + (-1,))
    wins = [_adaptive_windows(i, o) for i, o in zip(sizes, outs)]
    for o in np.ndindex(*outs):
        axes = [range(*wins[ax][o[ax]]) for ax in range(n)]
        pos = [int(np.ravel_multi_index(c, sizes)) for c in itertools.product(*axes)]
        for nc in np.ndindex(*a.shape[:2]):
            out[nc + o], ind[nc + o] = _window_max(flat[nc][pos], pos)
    return (out[0], ind[0]) if squeeze else (out, ind)

"""Independent float64 reference for the pool_grad operators.

Written from SPEC.md alone (never from the kernels): the formulas of §1 for the gradients, the
PyTorch forward semantics the backward operators are the derivatives of, and the rounding rules of
§4 for cube_math_type.  Loops run over output positions only; the N and C axes are vectorised so
the test suite stays fast.  Nothing here imports pool_grad.
"""

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

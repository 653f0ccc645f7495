"""The eight operators as two-phase objects (aclnn's GetWorkspaceSize, then execute).

Each constructor validates (pool_grad._validate), plans (pool_grad._plan) and hands a
planned kernel to pool_grad._execute.Operator.  Every operator pools over (D, H, W), a
2-D one with D = 1: the average-pool gradients are one separable gather over per-axis
window tables, the max-pool gradients one scatter to the forward's indices.
"""
import numpy as np

from . import _kernels, _plan, _threads
from . import _validate as v
from ._errors import (ALLOW_FP32_DOWN_PRECISION, KEEP_DTYPE, USE_FP16, USE_HF32, invalid)
from ._execute import Operator
from ._typing import Array, ArrayLike, Ints, XLike

_ROUND_NONE, _ROUND_HF32, _ROUND_FP16 = 0, 1, 2


def _nbytes(shape, dtype):
    n = dtype.itemsize
    for d in shape:
        n *= d
    return n


def _acc_dtype(dtype):
    return np.float64 if dtype == np.float64 else np.float32


def _common_arrays(grad_output, x, grad_input, ranks, go_name, x_name, gi_name):
    """Shared checks of (grad_output, x, grad_input): presence, dtypes, ranks, shapes."""
    v.not_none(grad_output, go_name)
    v.not_none(x, x_name)
    v.not_none(grad_input, gi_name)
    go = v.as_input(grad_output, go_name)
    dt = v.float_dtype(go, go_name)
    xs, xdt = v.x_shape(x, go, x_name)
    gi = v.as_output(grad_input, gi_name)
    v.same_dtype(dt, xdt, x_name, go_name)
    v.same_dtype(dt, v.float_dtype(gi, gi_name), gi_name, go_name)
    v.rank(xs, ranks, x_name)
    v.rank(go.shape, ranks, go_name)
    if go.ndim != len(xs):
        raise invalid(go_name, f"must have the same rank as {x_name} ({len(xs)})",
                      f"{go.ndim}-D shape {go.shape}")
    if gi.shape != xs:
        raise invalid(gi_name, f"shape must equal {x_name}'s shape {xs}", gi.shape)
    if go is not grad_output and isinstance(grad_output, np.ndarray):
        v.check_no_overlap(gi, grad_output, gi_name, go_name)  # before an aligned copy
    return go, xs, gi, dt


def _span_bytes(a):
    """Bytes an array really spans (a zero-stride view spans almost none)."""
    lo, hi = _plan.byte_span(a)
    return hi - lo


def _check_plan_size(in_sizes, out_sizes, go, gi_bytes):
    """The window tables hold a few int64 per input and output index, at most about 12
    times the bytes of a real grad_input; refuse, before building them, sizes that only a
    zero-stride grad_output can have."""
    need = 48 * (sum(in_sizes) + sum(out_sizes))
    if need > max(64 << 20, 16 * (_span_bytes(go) + gi_bytes)):
        raise invalid("grad_output", f"needs window tables of {need} bytes, more than 16 "
                      f"times the memory of grad_output and grad_input", go.shape)


def _gather_kernel(go, gi, n_spatial, spec, rnd):
    """Plan the separable average-pool gradient of one call (geometry from the cache)."""
    fill = _plan.constant_planes(spec)
    flat = _plan.flat_plane_ok(spec)
    disjoint = _plan.disjoint_windows(spec)
    go6, gi6, tstore, folded = _plan.gather_views6(go, gi, n_spatial, fill, disjoint, flat,
                                                   _plan.step_windows(spec))
    acc = np.dtype(_acc_dtype(go.dtype))
    geometry = None
    lanes = gi6.shape[5]
    # the most lanes merged with a polyphase form of period 1 and 2, by element size
    step_max = (_plan.FLAT_STEP_LANES_MAX[gi.itemsize], _plan.FLAT_STEP2_LANES_MAX[gi.itemsize])
    if (not tstore and not fill and 1 < lanes < max(_plan.FLAT_LANES_MAX, *step_max)
            and _plan.on("flat_lanes")):
        # channels-last C < 16 (at stride 1 C < 64, 16-bit any C; 16-bit at stride 2
        # C < 64): rows of W * C values of one lane where W and C merge
        fgo6, fgi6 = _plan.flat_lanes(go6), _plan.flat_lanes(gi6)
        if fgo6 is not None and fgi6 is not None:
            geometry = _plan.gather_geometry(spec, fgi6.shape, acc, _threads.CPU_COUNT,
                                             False, lanes)
            poly = geometry[3] if geometry is not None else None
            # period 2 only where some value sums several terms (one product a value
            # stays faster as lanes)
            step = poly is not None and (
                len(poly[2]) == 1 and lanes < step_max[0]
                or len(poly[2]) == 2 and poly[3].max() > 1 and lanes < step_max[1])
            if geometry is not None and (lanes < _plan.FLAT_LANES_MAX or step):
                go6, gi6 = fgo6, fgi6
            else:
                geometry = None
    if (flat and _plan.on("flat_planes") and not fill and not tstore and geometry is None
            and gi6.shape[5] == 1
            and (folded or gi6.shape[3] * gi6.shape[4] <= _plan.FOLD_PLANE_ELEMS)
            and gi6.shape[4] < _plan.FLAT_PLANE_W.get(gi6.itemsize, 0)):
        # small planes of disjoint H and W windows (folded, or along a D axis that keeps
        # its windows): each plane one row of H * W values
        fgo6, fgi6 = _plan.flat_planes(go6), _plan.flat_planes(gi6)
        if fgo6 is not None and fgi6 is not None:
            geometry = _plan.plane_geometry(spec, fgi6.shape, acc, _threads.CPU_COUNT,
                                            folded)
            if geometry is not None:
                go6, gi6 = fgo6, fgi6
    if geometry is None:
        geometry = _plan.gather_geometry(spec, gi6.shape, acc, _threads.CPU_COUNT, folded)
    taps = geometry[1]
    w = gi6.shape[4]
    nt = _threads.planned()
    region_row = _plan.FOLDED_REGION_ROW_BYTES if folded and not disjoint else None

    def flags(limit):   # rows streamed, blocks of rows streamed, larger than the cache
        return (_plan.streaming(gi6, nt, limit),
                _plan.streaming_region(gi6, nt, region_row, limit),
                _plan.streaming_region(gi6, nt, 0, limit))

    plane_rule = tstore and _plan.plane_regs(w, gi6.itemsize, taps, go6.shape[4])

    def build(f, strips=True):
        kind = _plan.KINDS[go.dtype]
        choice = _plan.gather_choice(go6, gi6, kind, rnd, geometry, f[0], f[1], f[2],
                                     tstore, fill, plane_rule, strips)
        kernel = _kernels.AvgGatherKernel(go6, gi6, kind, rnd, geometry, choice)
        # building the kernel allocates nothing in proportion to its scratch: refuse here,
        # before any workspace, scratch a thread that no machine of this memory could hold
        v.memory_fits(kernel.scratch_bytes * _threads.CPU_COUNT, "grad_output",
                      "scratch rows")
        return kernel

    def other_shape(f, kernel):
        # the same call in another shape of work, timed beside it (_plan.TUNE_SHAPE_BYTES):
        # float64 planes in strips, the row form
        if kernel.strips:
            alt = build(f, strips=False)
            alt.form = kernel.form + " rows"
            return alt
        return None

    return (_plan.store_forms(gi6, nt, flags, build, other_shape),
            (("grad_output", go6), ("grad_input", gi6)))


def _padded(values, n, fill):
    """(D, H, W) values of a pooling over the last n axes (a 2-D one has D = 1)."""
    return (fill,) * (3 - n) + tuple(values)


class _AvgPoolBackward(Operator):
    """Average pooling's gradient over the last ``_n`` axes: validation of the arrays and
    the windows, then the separable gather (the two-phase objects below fix ``_n``)."""

    _n = 2
    _params = ("kernel_size", "stride", "padding", "ceil_mode", "count_include_pad",
               "divisor_override")

    def _setup(self, grad_output, x, grad_input, kernel_size, stride, padding, ceil_mode,
               count_include_pad, divisor_override, extra_check=None):
        n = self._n
        v.not_none(kernel_size, "kernel_size")
        v.not_none(padding, "padding")
        go, xs, gi, dt = _common_arrays(grad_output, x, grad_input, (n + 1, n + 2),
                                        "grad_output", "x", "grad_input")
        k, s, p, ceil_mode, count_include_pad, override = v.avg_params(
            kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override, n)
        rnd = extra_check(dt) if extra_check else _ROUND_NONE
        in_sz = tuple(xs[-n:])
        outs = _plan.avg_output_sizes(in_sz, k, s, p, ceil_mode)
        if go.shape[-n:] != outs:
            raise invalid("grad_output", f"spatial size must equal the forward output size "
                          f"{outs}", go.shape[-n:])
        v.n_c_match(go.shape, xs, n, "grad_output")
        v.check_no_overlap(gi, go, "grad_input", "grad_output")
        if go.size:
            _check_plan_size(in_sz, outs, go, _nbytes(xs, dt))
        gi = v.materialize(gi, "x")

        self.grad_output, self.grad_input = go, gi
        self.kernel_size, self.stride, self.padding = k, s, p
        self.ceil_mode, self.count_include_pad = ceil_mode, count_include_pad
        self.divisor_override = override
        kernel, views = None, ()
        if go.size and gi.size:
            spec = ("avg", _padded(in_sz, n, 1), _padded(outs, n, 1), _padded(k, n, 1),
                    _padded(s, n, 1), _padded(p, n, 0), count_include_pad, override)
            kernel, views = _gather_kernel(go, gi, n, spec, rnd)
        self._planned(kernel, (go, gi), views)


def _cube_rounding(cube, dt):
    """cube_math_type checked against the data's dtype, and the rounding it asks of
    grad_output (SPEC section 4)."""
    if cube == USE_FP16 and dt == v.BFLOAT16:
        raise invalid("cube_math_type", "USE_FP16 (2) is not supported for bfloat16", cube)
    if cube == USE_HF32 and dt != np.float32:
        raise invalid("cube_math_type", "USE_HF32 (3) needs float32 data", f"{cube} "
                      f"with {dt}")
    if dt != np.float32:
        return _ROUND_NONE
    return {ALLOW_FP32_DOWN_PRECISION: _ROUND_HF32, USE_HF32: _ROUND_HF32,
            USE_FP16: _ROUND_FP16}.get(cube, _ROUND_NONE)


class AvgPool2dBackward(_AvgPoolBackward):
    """aclnnAvgPool2dBackward as a two-phase object: validate and plan, then execute.

    Construction does every check that does not depend on array values and plans the
    work (aclnn's GetWorkspaceSize); `execute` fills ``grad_input`` and may run again
    after the arrays' contents change.

    Parameters
    ----------
    grad_output, x, kernel_size, stride, padding, ceil_mode, count_include_pad, \
divisor_override, cube_math_type
        As in `avg_pool2d_backward`, in aclnn's order.
    grad_input : ndarray
        Required (None is 161001, as in aclnn).  Receives the result ("gradInput"): x's
        shape, grad_output's dtype, writeable, any strides, not overlapping grad_output.

    Attributes
    ----------
    workspace_size : int
        Bytes of workspace `execute` needs, for the thread count at planning.
    grad_output, grad_input : ndarray
        The arrays the plan reads and writes (grad_output as converted, if it was not an
        aligned ndarray).

    Raises
    ------
    ParamNullptrError, ParamInvalidError
        At construction, for the rules of `avg_pool2d_backward` (codes 161001, 161002).

    Examples
    --------
    >>> import numpy as np
    >>> import pool_grad as pg
    >>> go = np.ones((1, 16, 1, 1), np.float32)
    >>> gi = np.empty((1, 16, 4, 4), np.float32)
    >>> op = pg.AvgPool2dBackward(go, gi.shape, 4, 1, 0, False, True, 0, pg.KEEP_DTYPE, gi)
    >>> ws = np.empty(op.workspace_size, np.uint8)
    >>> op.execute(workspace=ws)
    >>> float(gi[0, 0, 0, 0])
    0.0625
    >>> go[...] = 2    # new values, same plan
    >>> op.execute(workspace=ws)
    >>> float(gi[0, 0, 0, 0])
    0.125
    """

    _params = _AvgPoolBackward._params + ("cube_math_type",)

    def __init__(self, grad_output: ArrayLike, x: XLike, kernel_size: Ints,
                 stride: Ints | None, padding: Ints, ceil_mode: bool = False,
                 count_include_pad: bool = True, divisor_override: int | None = 0,
                 cube_math_type: int = KEEP_DTYPE, grad_input: Array | None = None) -> None:
        def check(dt):
            cube = v.int_param(cube_math_type, "cube_math_type")
            if cube not in (KEEP_DTYPE, ALLOW_FP32_DOWN_PRECISION, USE_FP16, USE_HF32):
                raise invalid("cube_math_type", "must be 0 (KEEP_DTYPE), "
                              "1 (ALLOW_FP32_DOWN_PRECISION), 2 (USE_FP16) or 3 (USE_HF32)",
                              cube)
            self.cube_math_type = cube
            return _cube_rounding(cube, dt)
        self._setup(grad_output, x, grad_input, kernel_size, stride, padding, ceil_mode,
                    count_include_pad, divisor_override, check)


class AvgPool3dBackward(_AvgPoolBackward):
    """aclnnAvgPool3dBackward as a two-phase object: validate and plan, then execute.

    Parameters
    ----------
    grad_output, x, kernel_size, stride, padding, ceil_mode, count_include_pad, \
divisor_override
        As in `avg_pool3d_backward`, in aclnn's order.
    grad_input : ndarray
        Required (None is 161001, as in aclnn).  Receives the result ("output"): x's
        shape, grad_output's dtype, writeable, any strides, not overlapping grad_output.

    Attributes
    ----------
    workspace_size : int
        Bytes of workspace `execute` needs, for the thread count at planning.
    grad_output, grad_input : ndarray
        The arrays the plan reads and writes.

    Raises
    ------
    ParamNullptrError, ParamInvalidError
        At construction, for the rules of `avg_pool3d_backward` (codes 161001, 161002).

    Examples
    --------
    The operator page's example: a 4x4x4 window, padding not counted.

    >>> import numpy as np
    >>> import pool_grad as pg
    >>> go = np.ones((1, 16, 1, 1, 1), np.float32)
    >>> gi = np.empty((1, 16, 4, 4, 4), np.float32)
    >>> op = pg.AvgPool3dBackward(go, gi.shape, 4, 1, 0, False, False, 0, gi)
    >>> op.execute(workspace=np.empty(op.workspace_size, np.uint8))
    >>> float(gi.min()), float(gi.max())
    (0.015625, 0.015625)
    """

    _n = 3

    def __init__(self, grad_output: ArrayLike, x: XLike, kernel_size: Ints,
                 stride: Ints | None, padding: Ints, ceil_mode: bool = False,
                 count_include_pad: bool = True, divisor_override: int | None = 0,
                 grad_input: Array | None = None) -> None:
        self._setup(grad_output, x, grad_input, kernel_size, stride, padding, ceil_mode,
                    count_include_pad, divisor_override)


class _AdaptiveAvgPoolBackward(Operator):
    """Adaptive average pooling's gradient over the last ``_n`` axes (the separable
    gather); no dimension may be 0."""

    _n = 3

    def __init__(self, grad_output: ArrayLike, x: XLike, grad_input: Array | None) -> None:
        n = self._n
        go, xs, gi, dt = _common_arrays(grad_output, x, grad_input, (n + 1, n + 2),
                                        "grad_output", "x", "grad_input")
        for name, shape in (("x", xs), ("grad_output", go.shape)):
            if 0 in shape:
                raise invalid(name, "must not have a zero-size dimension", shape)
        v.n_c_match(go.shape, xs, n, "grad_output")
        v.check_no_overlap(gi, go, "grad_input", "grad_output")
        _check_plan_size(xs[-n:], go.shape[-n:], go, _nbytes(xs, dt))
        gi = v.materialize(gi, "x")
        self.grad_output, self.grad_input = go, gi
        spec = ("adaptive", _padded(xs[-n:], n, 1), _padded(go.shape[-n:], n, 1))
        kernel, views = _gather_kernel(go, gi, n, spec, _ROUND_NONE)
        self._planned(kernel, (go, gi), views)


class AdaptiveAvgPool3dBackward(_AdaptiveAvgPoolBackward):
    """aclnnAdaptiveAvgPool3dBackward as a two-phase object: validate and plan, then
    execute.

    Parameters
    ----------
    grad_output, x
        As in `adaptive_avg_pool3d_backward`.
    grad_input : ndarray
        Receives the result ("out" in aclnn's naming): x's shape, grad_output's dtype,
        writeable, any strides, not overlapping grad_output.

    Attributes
    ----------
    workspace_size : int
        Bytes of workspace `execute` needs, for the thread count at planning.
    grad_output, grad_input : ndarray
        The arrays the plan reads and writes.

    Raises
    ------
    ParamNullptrError, ParamInvalidError
        At construction, for the rules of `adaptive_avg_pool3d_backward`.

    Examples
    --------
    Work queued on a `Stream` runs in order on the stream's thread:

    >>> import numpy as np
    >>> import pool_grad as pg
    >>> go = np.arange(1, 9, dtype=np.float32).reshape(2, 2, 1, 1, 2)
    >>> gi = np.empty((2, 2, 1, 1, 4), np.float32)
    >>> op = pg.AdaptiveAvgPool3dBackward(go, gi.shape, gi)
    >>> s = pg.Stream()
    >>> op.execute(stream=s)
    >>> s.synchronize()
    >>> print(gi[0, 0, 0, 0])
    [0.5 0.5 1.  1. ]
    """

    _n = 3


class AdaptiveAvgPool2dBackward(_AdaptiveAvgPoolBackward):
    """aclnnAdaptiveAvgPool2dBackward as a two-phase object: validate and plan, then
    execute.

    Parameters
    ----------
    grad_output, x
        As in `adaptive_avg_pool2d_backward`.
    grad_input : ndarray
        Receives the result ("out" in aclnn's naming): x's shape, grad_output's dtype,
        writeable, any strides, not overlapping grad_output.

    Attributes
    ----------
    workspace_size : int
        Bytes of workspace `execute` needs, for the thread count at planning.
    grad_output, grad_input : ndarray
        The arrays the plan reads and writes.

    Raises
    ------
    ParamNullptrError, ParamInvalidError
        At construction, for the rules of `adaptive_avg_pool2d_backward`.

    Examples
    --------
    The operator page's example: 4 rows pooled to 3 (overlapping windows).

    >>> import numpy as np
    >>> import pool_grad as pg
    >>> go = np.arange(1, 7, dtype=np.float32).reshape(1, 1, 3, 2)
    >>> gi = np.empty((1, 1, 4, 2), np.float32)
    >>> pg.AdaptiveAvgPool2dBackward(go, gi.shape, gi).execute()
    >>> print(gi[0, 0])
    [[0.5 1. ]
     [2.  3. ]
     [4.  5. ]
     [2.5 3. ]]
    """

    _n = 2


class _MaxPoolBackward(Operator):
    """Max pooling's gradient over the last ``_n`` axes: grad_output scattered to the
    forward's argmax indices (flat positions in each (n, c) volume).  ``_windows`` says
    whether the operator has a kernel (max pooling) or adaptive windows; ``_empty_ok``
    which zero-size arrays are a no-op rather than an error."""

    _n = 2
    _windows = False
    _unit_dilation = False
    _empty_ok = "all"      # "all": any zero-size dimension; "n": N only; "none"
    _params = ()

    def _setup(self, grad_output, x, indices, grad_input, window_args=None):
        n = self._n
        v.not_none(indices, "indices")
        if window_args is not None:
            for name, val in zip(("kernel_size", "padding", "dilation"),
                                 (window_args[0], window_args[2], window_args[3])):
                v.not_none(val, name)
        go, xs, gi, dt = _common_arrays(grad_output, x, grad_input, (n + 1, n + 2),
                                        "grad_output", "x", "grad_input")
        ind = v.as_input(indices, "indices")
        if ind is not indices and isinstance(indices, np.ndarray):
            v.check_no_overlap(gi, indices, "grad_input", "indices")
        v.index_dtype(ind, "indices")
        if ind.shape != go.shape:
            raise invalid("indices", f"shape must equal grad_output's shape {go.shape}",
                          ind.shape)
        lead = len(xs) - n
        if self._empty_ok == "none" and 0 in xs:
            raise invalid("x", "must not have a zero-size dimension", xs)
        if self._empty_ok == "n" and 0 in xs[lead - 1:]:
            raise invalid("x", "must have non-zero C and spatial sizes (N may be 0)", xs)
        tiles = False
        if window_args is not None:
            k, s, p, d, ceil_mode = v.max_params(*window_args, n, self._unit_dilation)
            outs = _plan.avg_output_sizes(tuple(xs[-n:]), k, s, p, ceil_mode, d)
            if go.shape[-n:] != outs:
                raise invalid("grad_output", f"spatial size must equal the forward output "
                              f"size {outs}", go.shape[-n:])
            self.kernel_size, self.stride, self.padding = k, s, p
            self.dilation, self.ceil_mode = d, ceil_mode
            # windows that tile the plane: the scatter's gather form applies
            tiles = n == 2 and k == s and p == (0,) * n and d == (1,) * n and all(
                i == o * kk for i, o, kk in zip(xs[-n:], outs, k))
        v.n_c_match(go.shape, xs, n, "grad_output")
        volume = 1
        for size in xs[-n:]:
            volume *= size
        axes = "D*H*W" if n == 3 else "H*W"
        if volume > 2**31 - 1:
            raise invalid("x", f"{axes} must be at most 2**31-1 (the device indexes in "
                          f"int32)", f"{' * '.join(map(str, xs[-n:]))} = {volume}")
        v.check_no_overlap(gi, go, "grad_input", "grad_output")
        v.check_no_overlap(gi, ind, "grad_input", "indices")
        gi = v.materialize(gi, "x")
        self.grad_output, self.indices, self.grad_input = go, ind, gi
        self._plane, self._axes = volume, axes
        kernel, views = None, ()
        if go.size and gi.size:
            kernel, views = self._scatter_kernel(go, ind, gi, dt,
                                                 window=tiles or not self._windows)
        elif go.size and not gi.size:
            # a zero-size plane with grad_output values: every index is out of range
            self._plane = 0
        self._planned(kernel, (go, ind, gi), views)

    def _scatter_kernel(self, go, ind, gi, dt, window):
        (go6, ind6, gi6), _ = _plan.views6([go, ind, gi], self._n, out_index=2)
        go6, ind6 = _plan.merge_depth(go6, ind6)
        gi6, = _plan.merge_depth(gi6)
        plane_in = gi6.shape[2] * gi6.shape[3] * gi6.shape[4]
        plane_out = go6.shape[2] * go6.shape[3] * go6.shape[4]
        if (_plan.mixed_lanes(go6, gi6, ind6)
                and plane_out * _plan.SPARSE_VALUES > plane_in):
            # channels-last grad_output and indices into NCHW rows, not sparse: C as
            # lanes, the blocks stored to the planes through transposes (sparse ones keep
            # the plane rows that read them strided: docs/performance.md)
            go6, ind6, gi6 = _plan.lanes(go6), _plan.lanes(ind6), _plan.lanes(gi6)
        n, c, dd, hh, ww, lanes = gi6.shape
        rows = dd * hh
        flat_2d = dd == 1 and go6.shape[2] == 1
        bh = _plan.scatter_blocks(rows, ww * lanes, n * c, _threads.CPU_COUNT,
                                  go6.shape[3] if flat_2d else 0)
        window = window and flat_2d
        flat = _plan.window_spread(ww, lanes, go6.shape[4], gi6.itemsize) if window else None
        nt = _threads.planned()
        return _plan.store_forms(
            gi6, nt, lambda limit: (_plan.streaming(gi6, nt, limit),
                                    _plan.streaming_region(gi6, nt, 0, limit)),
            lambda f: _kernels.MaxScatterKernel(
                go6, ind6, gi6, _plan.KINDS[dt], bh,
                _plan.scatter_choice(go6, ind6, gi6, _plan.KINDS[dt], bh, f[0], f[1],
                                     window, flat))), (
            ("grad_output", go6), ("indices", ind6), ("grad_input", gi6))

    def _status(self, status):
        # no kernel with grad_output values means an empty plane: every index is outside
        if status or (status is None and self.grad_output.size):
            self._raise_bad_index()

    def _raise_bad_index(self):
        ind = self.indices
        bad = np.argwhere((ind < 0) | (ind >= self._plane))[0]
        raise invalid("indices", f"must lie in [0, {self._axes}) = [0, {self._plane}) (a "
                      f"flat position in its own (n, c) {'volume' if self._n == 3 else 'plane'})",
                      f"{ind[tuple(bad)]} at position {tuple(int(b) for b in bad)}")


class AdaptiveMaxPool2dBackward(_MaxPoolBackward):
    """aclnnAdaptiveMaxPool2dBackward as a two-phase object: grad_output scattered to the
    forward's argmax ``indices``.

    The indices' values are checked by `execute`, before anything is written: an index
    outside ``[0, H*W)`` raises ``ParamInvalidError`` (161002) and leaves grad_input as it
    was.  Everything else is checked at construction.

    Parameters
    ----------
    grad_output, x, indices
        As in `adaptive_max_pool2d_backward`.
    grad_input : ndarray
        Receives the result: x's shape, grad_output's dtype, writeable, any strides,
        overlapping neither grad_output nor indices.

    Attributes
    ----------
    workspace_size : int
        Bytes of workspace `execute` needs, for the thread count at planning.
    grad_output, indices, grad_input : ndarray
        The arrays the plan reads and writes.

    Raises
    ------
    ParamNullptrError, ParamInvalidError
        At construction, for the rules of `adaptive_max_pool2d_backward` other than the
        index range.

    Examples
    --------
    >>> import numpy as np
    >>> import pool_grad as pg
    >>> go = np.array([[[[0.4757]]]], np.float32)
    >>> idx = np.array([[[[6]]]])
    >>> gi = np.zeros((1, 1, 2, 2), np.float32)
    >>> op = pg.AdaptiveMaxPool2dBackward(go, gi.shape, idx, gi)
    >>> try:
    ...     op.execute()
    ... except pg.ParamInvalidError as e:
    ...     print(e.code)
    161002
    >>> idx[...] = 3
    >>> op.execute()
    >>> print(gi[0, 0])
    [[0.     0.    ]
     [0.     0.4757]]
    """

    def __init__(self, grad_output: ArrayLike, x: XLike, indices: ArrayLike,
                 grad_input: Array | None) -> None:
        self._setup(grad_output, x, indices, grad_input)


class AdaptiveMaxPool3dBackward(_MaxPoolBackward):
    """aclnnAdaptiveMaxPool3dBackward as a two-phase object: grad_output scattered to the
    forward's argmax ``indices`` (flat positions ``(d*H + h)*W + w`` in each volume).

    The indices' values are checked by `execute`, before anything is written: an index
    outside ``[0, D*H*W)`` raises ``ParamInvalidError`` (161002) and leaves grad_input as
    it was.  Everything else is checked at construction.

    Parameters
    ----------
    grad_output, x, indices
        As in `adaptive_max_pool3d_backward`.
    grad_input : ndarray
        Receives the result: x's shape, grad_output's dtype, writeable, any strides,
        overlapping neither grad_output nor indices.

    Attributes
    ----------
    workspace_size : int
        Bytes of workspace `execute` needs, for the thread count at planning.
    grad_output, indices, grad_input : ndarray
        The arrays the plan reads and writes.

    Examples
    --------
    The operator page's example:

    >>> import numpy as np
    >>> import pool_grad as pg
    >>> go = np.full((1, 1, 1, 1, 1), 0.4757, np.float32)
    >>> gi = np.empty((1, 1, 2, 2, 2), np.float32)
    >>> pg.AdaptiveMaxPool3dBackward(go, gi.shape, np.array([[[[[6]]]]], np.int32),
    ...                              gi).execute()
    >>> print(gi.ravel())
    [0.     0.     0.     0.     0.     0.     0.4757 0.    ]
    """

    _n = 3

    def __init__(self, grad_output: ArrayLike, x: XLike, indices: ArrayLike,
                 grad_input: Array | None) -> None:
        self._setup(grad_output, x, indices, grad_input)


class MaxPool2dWithIndicesBackward(_MaxPoolBackward):
    """aclnnMaxPool2dWithIndicesBackward as a two-phase object: grad_output scattered to
    the forward's argmax ``indices`` (flat positions ``h*W + w`` in each plane).

    An index outside ``[0, H*W)`` raises ``ParamInvalidError`` (161002) at `execute` and
    leaves grad_input as it was; an index inside the plane but outside its window is
    accepted (the device does not check it either).

    Parameters
    ----------
    grad_output, x, indices, kernel_size, stride, padding, dilation, ceil_mode
        As in `max_pool2d_with_indices_backward`, in aclnn's order.
    grad_input : ndarray
        Receives the result: x's shape, grad_output's dtype, writeable, any strides,
        overlapping neither grad_output nor indices.

    Attributes
    ----------
    workspace_size : int
        Bytes of workspace `execute` needs, for the thread count at planning.
    grad_output, indices, grad_input : ndarray
        The arrays the plan reads and writes.

    Examples
    --------
    The operator page's example:

    >>> import numpy as np
    >>> import pool_grad as pg
    >>> go = np.array([0.4757, 0.1726], np.float32).reshape(1, 1, 2, 1)
    >>> idx = np.array([0, 6]).reshape(1, 1, 2, 1)
    >>> gi = np.empty((1, 1, 4, 3), np.float32)
    >>> op = pg.MaxPool2dWithIndicesBackward(go, gi.shape, idx, 2, 2, 0, 1, False, gi)
    >>> op.execute()
    >>> print(gi[0, 0])
    [[0.4757 0.     0.    ]
     [0.     0.     0.    ]
     [0.1726 0.     0.    ]
     [0.     0.     0.    ]]
    """

    _n = 2
    _windows = True
    _empty_ok = "n"
    _params = ("kernel_size", "stride", "padding", "dilation", "ceil_mode")

    def __init__(self, grad_output: ArrayLike, x: XLike, indices: ArrayLike,
                 kernel_size: Ints, stride: Ints | None, padding: Ints, dilation: Ints = 1,
                 ceil_mode: bool = False, grad_input: Array | None = None) -> None:
        self._setup(grad_output, x, indices, grad_input,
                    (kernel_size, stride, padding, dilation, ceil_mode))


class MaxPool3dWithArgmaxBackward(_MaxPoolBackward):
    """aclnnMaxPool3dWithArgmaxBackward as a two-phase object: grad_output scattered to
    the forward's argmax ``indices`` (flat positions ``(d*H + h)*W + w`` in each volume).

    Dilation must be 1 and no array may be empty (the operator's page); an index outside
    ``[0, D*H*W)`` raises ``ParamInvalidError`` (161002) at `execute` and leaves
    grad_input as it was.

    Parameters
    ----------
    grad_output, x, indices, kernel_size, stride, padding, dilation, ceil_mode
        As in `max_pool3d_with_argmax_backward`, in aclnn's order.
    grad_input : ndarray
        Receives the result: x's shape, grad_output's dtype, writeable, any strides,
        overlapping neither grad_output nor indices.

    Attributes
    ----------
    workspace_size : int
        Bytes of workspace `execute` needs, for the thread count at planning.
    grad_output, indices, grad_input : ndarray
        The arrays the plan reads and writes.

    Examples
    --------
    The operator page's example:

    >>> import numpy as np
    >>> import pool_grad as pg
    >>> go = np.full((1, 1, 1, 1, 1), 0.4757, np.float32)
    >>> idx = np.full((1, 1, 1, 1, 1), 6, np.int32)
    >>> gi = np.empty((1, 1, 2, 2, 2), np.float32)
    >>> pg.MaxPool3dWithArgmaxBackward(go, gi.shape, idx, 2, 2, 0, 1, False, gi).execute()
    >>> print(gi.ravel())
    [0.     0.     0.     0.     0.     0.     0.4757 0.    ]
    """

    _n = 3
    _windows = True
    _unit_dilation = True
    _empty_ok = "none"
    _params = ("kernel_size", "stride", "padding", "dilation", "ceil_mode")

    def __init__(self, grad_output: ArrayLike, x: XLike, indices: ArrayLike,
                 kernel_size: Ints, stride: Ints | None, padding: Ints, dilation: Ints = 1,
                 ceil_mode: bool = False, grad_input: Array | None = None) -> None:
        self._setup(grad_output, x, indices, grad_input,
                    (kernel_size, stride, padding, dilation, ceil_mode))

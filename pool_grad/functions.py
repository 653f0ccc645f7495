"""Scikit-style functions: validate, plan and execute in one call, returning grad_input.

A call whose configuration (shapes, strides and dtypes of the arrays, every parameter,
exactly typed, and the thread count asked for) has already passed validation once reuses
that call's planned kernel on the new arrays, so that a small one-shot call costs a few
microseconds.  Only configurations that validated and planned successfully enter this
cache, and everything validation looks at is part of the key, so a cache hit can never
accept a call the checks would refuse.
"""
import numpy as np

from . import _threads
from ._typing import Array, ArrayLike, Ints, XLike
from ._errors import ParamInvalidError
from . import _validate as v
from .ops import (AdaptiveAvgPool2dBackward, AdaptiveAvgPool3dBackward,
                  AdaptiveMaxPool2dBackward, AdaptiveMaxPool3dBackward, AvgPool2dBackward,
                  AvgPool3dBackward, MaxPool2dWithIndicesBackward, MaxPool3dWithArgmaxBackward)

_ndarray = np.ndarray
_CACHE_SIZE = 256
_cache = {}


def _exact(value):
    """A cache-key component that equals another only when validation cannot tell them
    apart: ints (not bools or floats, which compare equal to ints), tuples of ints, None."""
    t = type(value)
    if t is int or value is None:
        return value
    if t is tuple:
        for e in value:   # a plain loop: half the time of all() over a generator
            if type(e) is not int:
                raise TypeError
        return value
    raise TypeError  # not cacheable: take the validating path


def _flag(value):
    if type(value) is bool or type(value) is int:
        return bool(value) if value in (0, 1) else ("bad", value)
    raise TypeError


def _array_key(a):
    if type(a) is not _ndarray or not a.flags.aligned:
        raise TypeError
    return a.shape, a.strides, a.dtype


def _x_key(x):
    if type(x) is _ndarray:
        return x.shape, x.dtype
    return ("shape", _exact(tuple(x) if type(x) is list else x))


def _new_grad_input(grad_output, x):
    """grad_input to be allocated once the operator's checks pass: x's shape, grad_output's
    dtype, zero-filled only when grad_output is empty (otherwise every element is
    written)."""
    go = v.as_input(grad_output, "grad_output")
    dt = v.float_dtype(go, "grad_output")
    shape, _ = v.x_shape(x, go, "x")
    return go, v.NewOutput(shape, dt, zero=go.size == 0)


def _call(key, make_op, grad_output, x, indices, out, n_threads):
    """Run one call: through the cached plan of its configuration and thread count when
    there is one, else by constructing (validating, planning) the operator."""
    if n_threads is not None and type(n_threads) is not int:
        key = None   # the operator checks it (an unhashable one too)
    if key is not None:
        # the thread count the plan is for: the call's, else set_num_threads' (a plan
        # made for the OpenMP default is kept when that changes; it gives the same bits)
        key += (n_threads if n_threads is not None else _threads.user_threads(),)
        hit = _cache.get(key)
        if hit is not None:
            kernel, shape, dtype = hit
            if out is None:
                out = np.empty(shape, dtype)
            elif np.may_share_memory(out, grad_output) or (
                    indices is not None and np.may_share_memory(out, indices)):
                hit = None  # let the operator decide exactly
            if hit is not None:
                budget = 0 if n_threads is None else _threads.requested(n_threads)
                if kernel.run_on(grad_output, out, indices, budget) == 0:
                    return out
                # a bad index: the operator raises the full error below
    if out is None:
        grad_output, out = _new_grad_input(grad_output, x)
    try:
        plan_for = _threads.requested(n_threads)
    except ParamInvalidError:
        plan_for = None   # execute raises it, after the operator's own checks
    with _threads.planning(plan_for):
        op = make_op(grad_output, out)
    out = op.grad_input
    op.execute(n_threads=n_threads)
    if key is not None and op._kernel is not None and op.grad_output is grad_output and \
            getattr(op, "indices", None) is indices:
        if len(_cache) >= _CACHE_SIZE:
            try:  # oldest first; another thread may be evicting too
                _cache.pop(next(iter(_cache)), None)
            except (StopIteration, RuntimeError):
                pass
        op._kernel.release_arrays()  # the op is not used again; keep no arrays alive
        _cache[key] = (op._kernel, out.shape, out.dtype)
    return out


def _out_key(out):
    if out is None:
        return None
    if not out.flags.writeable:
        raise TypeError
    return _array_key(out)


def avg_pool2d_backward(grad_output: ArrayLike, x: XLike, kernel_size: Ints,
                        stride: Ints | None = None, padding: Ints = 0, *,
                        ceil_mode: bool = False, count_include_pad: bool = True,
                        divisor_override: int | None = 0, cube_math_type: int = 0,
                        out: Array | None = None, n_threads: int | None = None) -> Array:
    """Gradient of 2-D average pooling with respect to its input (aclnnAvgPool2dBackward).

    Parameters
    ----------
    grad_output : array_like, shape (N, C, H_out, W_out) or (C, H_out, W_out)
        Gradient of the pooled output: float32, float64, float16 or ``ml_dtypes.bfloat16``,
        any strides (read in place, not copied).  (H_out, W_out) must be the forward's
        output size for these parameters.
    x : ndarray or tuple of int
        The forward input ("self" in aclnn), or its shape, (N, C, H, W) or (C, H, W).
        Only its shape and dtype are used; an array's dtype must be grad_output's.
    kernel_size : int or sequence of 1 or 2 ints
        The window (kH, kW), each > 0.
    stride : int, sequence of 0, 1 or 2 ints, or None, default None
        The windows' step (sH, sW), each > 0.  None or ``()``: the kernel size.
    padding : int or sequence of 1 or 2 ints, default 0
        Implicit zeros on both sides (pH, pW), each >= 0 and at most half the kernel on
        its axis.
    ceil_mode : bool, default False
        Round the output size up instead of down (the last window still has to start
        inside the input or its left padding).
    count_include_pad : bool, default True
        Count padded positions in a window's divisor.
    divisor_override : int or None, default 0
        Any nonzero integer (negative ones too) divides every window instead; 0 or None
        means not set.
    cube_math_type : {0, 1, 2, 3}, default 0
        ``KEEP_DTYPE``, ``ALLOW_FP32_DOWN_PRECISION``, ``USE_FP16`` or ``USE_HF32``.  On
        float32 data, 1 and 3 round each grad_output value to HF32 (11 mantissa bits) and
        2 to float16 before the arithmetic; 0, and any value on other dtypes, changes
        nothing.  USE_FP16 refuses bfloat16 and USE_HF32 anything but float32 (161002).
    out : ndarray, optional
        Receives the result: x's shape, grad_output's dtype, writeable, any strides, and
        not overlapping grad_output.  Every element is written.
    n_threads : int, optional
        The most OpenMP threads to use; None takes the library default
        (`set_num_threads`, else ``OMP_NUM_THREADS``, else all cores).  Small calls use
        fewer.  The result is bitwise the same for every thread count.

    Returns
    -------
    grad_input : ndarray
        x's shape, grad_output's dtype: ``out`` when given, else a new C-contiguous array.

    Raises
    ------
    ParamNullptrError
        A ``TypeError`` with code 161001: grad_output, x, kernel_size or padding is None.
    ParamInvalidError
        A ``ValueError`` with code 161002 for any broken rule (dtypes, ranks, shapes,
        parameter ranges, cube_math_type, an ``out`` that is read-only or overlaps
        grad_output).  The message names the argument, the rule and the value.

    See Also
    --------
    AvgPool2dBackward : the same call validated and planned once, executed many times.
    avg_pool2d : the forward pass.

    Notes
    -----
    The output size on each axis is ``(in + 2*p - k + (s - 1 if ceil_mode else 0)) // s
    + 1``.  Each grad_output value is divided by its window's divisor (the override, else
    the window's size before clipping to the input if count_include_pad, else after) and
    added to every input position of the window.  float16 and bfloat16 accumulate in
    float32 and round once, when stored.

    Examples
    --------
    The operator page's example: a 4x4 window over a 4x4 input spreads each gradient over
    16 positions.

    >>> import numpy as np
    >>> import pool_grad as pg
    >>> go = np.ones((1, 16, 1, 1), np.float32)
    >>> gi = pg.avg_pool2d_backward(go, (1, 16, 4, 4), kernel_size=4, stride=1)
    >>> gi.shape, gi.dtype
    ((1, 16, 4, 4), dtype('float32'))
    >>> print(gi[0, 0])
    [[0.0625 0.0625 0.0625 0.0625]
     [0.0625 0.0625 0.0625 0.0625]
     [0.0625 0.0625 0.0625 0.0625]
     [0.0625 0.0625 0.0625 0.0625]]

    Into an existing array, here a channels-last one, which is written in place:

    >>> out = np.empty((1, 4, 4, 16), np.float32).transpose(0, 3, 1, 2)
    >>> pg.avg_pool2d_backward(go, (1, 16, 4, 4), 4, out=out) is out
    True

    A broken rule raises with aclnn's code:

    >>> try:  # doctest: +ELLIPSIS
    ...     pg.avg_pool2d_backward(go, (1, 16, 4, 4), kernel_size=4, padding=3)
    ... except pg.ParamInvalidError as e:
    ...     print(e)
    ACLNN_ERR_PARAM_INVALID (161002): padding must be at most half the kernel (pH <= ...
    """
    try:
        key = ("avg2d", _array_key(grad_output), _x_key(x), _out_key(out),
               _exact(kernel_size), _exact(stride), _exact(padding), _flag(ceil_mode),
               _flag(count_include_pad), _exact(divisor_override), _exact(cube_math_type))
    except (TypeError, AttributeError):
        key = None

    def make_op(go, gi):
        return AvgPool2dBackward(go, x, kernel_size, stride, padding, ceil_mode,
                                 count_include_pad, divisor_override, cube_math_type, gi)
    return _call(key, make_op, grad_output, x, None, out, n_threads)


def adaptive_avg_pool3d_backward(grad_output: ArrayLike, x: XLike, *,
                                 out: Array | None = None, n_threads: int | None = None
                                 ) -> Array:
    """Gradient of 3-D adaptive average pooling (aclnnAdaptiveAvgPool3dBackward).

    Parameters
    ----------
    grad_output : array_like, shape (N, C, D_out, H_out, W_out) or (C, D_out, H_out, W_out)
        Gradient of the pooled output: float32, float64, float16 or ``ml_dtypes.bfloat16``,
        any strides.  The output size is free (each >= 1); no dimension may be 0.
    x : ndarray or tuple of int
        The forward input ("self"), or its shape, (N, C, D, H, W) or (C, D, H, W), with N
        and C equal to grad_output's and no dimension 0.  Only shape and dtype are used.
    out : ndarray, optional
        Receives the result: x's shape, grad_output's dtype, writeable, any strides, and
        not overlapping grad_output.
    n_threads : int, optional
        The most OpenMP threads to use (None: the library default); the result is bitwise
        the same for every thread count.

    Returns
    -------
    grad_input : ndarray
        The gradient with respect to x, the same shape: ``out`` itself when given, else a
        new C-contiguous array of grad_output's dtype.

    Raises
    ------
    ParamNullptrError
        A ``TypeError`` with code 161001: grad_output or x is None.
    ParamInvalidError
        A ``ValueError`` with code 161002 for any broken rule (dtypes, ranks, N or C, a
        zero-size dimension, ``out``'s shape, a read-only or overlapping ``out``).

    See Also
    --------
    AdaptiveAvgPool3dBackward : the two-phase object.
    adaptive_avg_pool3d : the forward pass.

    Notes
    -----
    On each axis output index o averages the input range ``[floor(o*in/out),
    ceil((o+1)*in/out))``; these windows overlap where out does not divide in.  Each
    grad_output value is divided by its window's volume and added to every position of
    the window.

    Examples
    --------
    The operator page's example: each output value covers two inputs along W.

    >>> import numpy as np
    >>> import pool_grad as pg
    >>> go = np.arange(1, 9, dtype=np.float32).reshape(2, 2, 1, 1, 2)
    >>> gi = pg.adaptive_avg_pool3d_backward(go, (2, 2, 1, 1, 4))
    >>> print(gi.reshape(4, 4))
    [[0.5 0.5 1.  1. ]
     [1.5 1.5 2.  2. ]
     [2.5 2.5 3.  3. ]
     [3.5 3.5 4.  4. ]]
    """
    try:
        key = ("adaptive3d", _array_key(grad_output), _x_key(x), _out_key(out))
    except (TypeError, AttributeError):
        key = None

    def make_op(go, gi):
        return AdaptiveAvgPool3dBackward(go, x, gi)
    return _call(key, make_op, grad_output, x, None, out, n_threads)


def adaptive_max_pool2d_backward(grad_output: ArrayLike, x: XLike, indices: ArrayLike, *,
                                 out: Array | None = None, n_threads: int | None = None
                                 ) -> Array:
    """Gradient of 2-D adaptive max pooling: grad_output scattered to the forward's
    argmax ``indices`` (aclnnAdaptiveMaxPool2dBackward).

    Parameters
    ----------
    grad_output : array_like, shape (N, C, H_out, W_out) or (C, H_out, W_out)
        Gradient of the pooled output: float32, float64, float16 or ``ml_dtypes.bfloat16``,
        any strides.
    x : ndarray or tuple of int
        The forward input ("self"), or its shape, (N, C, H, W) or (C, H, W), with N and C
        equal to grad_output's and H*W at most 2**31 - 1.  Only shape and dtype are used.
    indices : array_like of int32 or int64, grad_output's shape
        For each output element, the flat position ``h*W + w`` of its maximum inside its
        own (n, c) plane, as `adaptive_max_pool2d` returns it.  Each must lie in
        ``[0, H*W)``; equal indices accumulate.
    out : ndarray, optional
        Receives the result: x's shape, grad_output's dtype, writeable, any strides, and
        overlapping neither grad_output nor indices.  Left unchanged when an index is out
        of range.
    n_threads : int, optional
        The most OpenMP threads to use (None: the library default); the result is bitwise
        the same for every thread count.

    Returns
    -------
    grad_input : ndarray
        Zero except at the positions the indices name, which hold the sum of their
        grad_output values: ``out`` itself when given, else a new C-contiguous array.

    Raises
    ------
    ParamNullptrError
        A ``TypeError`` with code 161001: grad_output, x or indices is None.
    ParamInvalidError
        A ``ValueError`` with code 161002 for any broken rule (dtypes, ranks, shapes, an
        index outside its plane, a read-only or overlapping ``out``).

    See Also
    --------
    AdaptiveMaxPool2dBackward : the two-phase object.
    adaptive_max_pool2d : the forward pass, which returns the indices.

    Examples
    --------
    The operator page's example, with an index inside the 2x2 plane:

    >>> import numpy as np
    >>> import pool_grad as pg
    >>> go = np.array([[[[0.4757]]]], np.float32)
    >>> print(pg.adaptive_max_pool2d_backward(go, (1, 1, 2, 2), np.array([[[[0]]]])))
    [[[[0.4757 0.    ]
       [0.     0.    ]]]]

    With the page's index 6, which lies outside the plane:

    >>> try:
    ...     pg.adaptive_max_pool2d_backward(go, (1, 1, 2, 2), np.array([[[[6]]]]))
    ... except pg.ParamInvalidError as e:
    ...     print(e.code)
    161002

    Forward and backward together:

    >>> x = np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4)
    >>> y, idx = pg.adaptive_max_pool2d(x, 2, return_indices=True)
    >>> print(pg.adaptive_max_pool2d_backward(np.ones_like(y), x, idx)[0, 0])
    [[0. 0. 0. 0.]
     [0. 1. 0. 1.]
     [0. 0. 0. 0.]
     [0. 1. 0. 1.]]
    """
    try:
        key = ("max2d", _array_key(grad_output), _x_key(x), _array_key(indices),
               _out_key(out))
    except (TypeError, AttributeError):
        key = None

    def make_op(go, gi):
        return AdaptiveMaxPool2dBackward(go, x, indices, gi)
    return _call(key, make_op, grad_output, x, indices, out, n_threads)


def avg_pool3d_backward(grad_output: ArrayLike, x: XLike, kernel_size: Ints,
                        stride: Ints | None = None, padding: Ints = 0, *,
                        ceil_mode: bool = False, count_include_pad: bool = True,
                        divisor_override: int | None = 0, out: Array | None = None,
                        n_threads: int | None = None) -> Array:
    """Gradient of 3-D average pooling with respect to its input (aclnnAvgPool3dBackward).

    Parameters
    ----------
    grad_output : array_like, shape (N, C, D_out, H_out, W_out) or (C, D_out, H_out, W_out)
        Gradient of the pooled output: float32, float64, float16 or ``ml_dtypes.bfloat16``,
        any strides.  (D_out, H_out, W_out) must be the forward's output size.
    x : ndarray or tuple of int
        The forward input ("self"), or its shape, (N, C, D, H, W) or (C, D, H, W).  Only
        its shape and dtype are used.
    kernel_size : int or sequence of 1 or 3 ints
        The window (kD, kH, kW), each > 0.
    stride : int, sequence of 0, 1 or 3 ints, or None, default None
        The windows' step, each > 0.  None or ``()``: the kernel size.
    padding : int or sequence of 1 or 3 ints, default 0
        Implicit zeros on both sides, each >= 0 and at most half the kernel on its axis.
    ceil_mode, count_include_pad, divisor_override
        As in `avg_pool2d_backward`.
    out : ndarray, optional
        Receives the result: x's shape, grad_output's dtype, writeable, any strides, not
        overlapping grad_output.
    n_threads : int, optional
        The most OpenMP threads to use (None: the library default); the result is bitwise
        the same for every thread count.

    Returns
    -------
    grad_input : ndarray
        x's shape, grad_output's dtype: ``out`` when given, else a new C-contiguous array.

    Raises
    ------
    ParamNullptrError
        Code 161001: grad_output, x, kernel_size or padding is None.
    ParamInvalidError
        Code 161002 for any broken rule; the message names the argument, the rule and the
        value.

    See Also
    --------
    AvgPool3dBackward : the two-phase object.
    avg_pool3d : the forward pass.

    Notes
    -----
    `avg_pool2d_backward` over three axes: each grad_output value divided by its window's
    divisor (the override, else the window's volume before clipping to the input if
    count_include_pad, else after) is added to every input position of its window.

    Examples
    --------
    The operator page's example:

    >>> import numpy as np
    >>> import pool_grad as pg
    >>> go = np.ones((1, 16, 1, 1, 1), np.float32)
    >>> gi = pg.avg_pool3d_backward(go, (1, 16, 4, 4, 4), 4, 1, 0, count_include_pad=False)
    >>> print(np.unique(gi))
    [0.015625]
    """
    try:
        key = ("avg3d", _array_key(grad_output), _x_key(x), _out_key(out),
               _exact(kernel_size), _exact(stride), _exact(padding), _flag(ceil_mode),
               _flag(count_include_pad), _exact(divisor_override))
    except (TypeError, AttributeError):
        key = None

    def make_op(go, gi):
        return AvgPool3dBackward(go, x, kernel_size, stride, padding, ceil_mode,
                                 count_include_pad, divisor_override, gi)
    return _call(key, make_op, grad_output, x, None, out, n_threads)


def adaptive_avg_pool2d_backward(grad_output: ArrayLike, x: XLike, *,
                                 out: Array | None = None, n_threads: int | None = None
                                 ) -> Array:
    """Gradient of 2-D adaptive average pooling (aclnnAdaptiveAvgPool2dBackward).

    Parameters
    ----------
    grad_output : array_like, shape (N, C, H_out, W_out) or (C, H_out, W_out)
        Gradient of the pooled output: float32, float64, float16 or ``ml_dtypes.bfloat16``,
        any strides; any output size >= 1, no dimension 0.
    x : ndarray or tuple of int
        The forward input ("self"), or its shape, (N, C, H, W) or (C, H, W), N and C equal
        to grad_output's, no dimension 0.
    out : ndarray, optional
        Receives the result: x's shape, grad_output's dtype, writeable, any strides, not
        overlapping grad_output.
    n_threads : int, optional
        The most OpenMP threads to use (None: the library default).

    Returns
    -------
    grad_input : ndarray
        ``out`` when given, else a new C-contiguous array.

    Raises
    ------
    ParamNullptrError
        Code 161001: grad_output or x is None.
    ParamInvalidError
        Code 161002 for any broken rule (an empty array among them).

    See Also
    --------
    AdaptiveAvgPool2dBackward : the two-phase object.
    adaptive_avg_pool2d : the forward pass.

    Notes
    -----
    On each axis output index o averages ``[floor(o*in/out), ceil((o+1)*in/out))``.

    Examples
    --------
    The operator page's example:

    >>> import numpy as np
    >>> import pool_grad as pg
    >>> go = np.arange(1, 7, dtype=np.float32).reshape(1, 1, 3, 2)
    >>> print(pg.adaptive_avg_pool2d_backward(go, (1, 1, 4, 2))[0, 0])
    [[0.5 1. ]
     [2.  3. ]
     [4.  5. ]
     [2.5 3. ]]
    """
    try:
        key = ("adaptive2d", _array_key(grad_output), _x_key(x), _out_key(out))
    except (TypeError, AttributeError):
        key = None

    def make_op(go, gi):
        return AdaptiveAvgPool2dBackward(go, x, gi)
    return _call(key, make_op, grad_output, x, None, out, n_threads)


def adaptive_max_pool3d_backward(grad_output: ArrayLike, x: XLike, indices: ArrayLike, *,
                                 out: Array | None = None, n_threads: int | None = None
                                 ) -> Array:
    """Gradient of 3-D adaptive max pooling: grad_output scattered to the forward's
    argmax ``indices`` (aclnnAdaptiveMaxPool3dBackward).

    Parameters
    ----------
    grad_output : array_like, shape (N, C, D_out, H_out, W_out) or (C, D_out, H_out, W_out)
        float32, float64, float16 or ``ml_dtypes.bfloat16``, any strides.
    x : ndarray or tuple of int
        The forward input, or its shape, (N, C, D, H, W) or (C, D, H, W); D*H*W at most
        2**31 - 1.
    indices : array_like of int32 or int64, grad_output's shape
        The flat position ``(d*H + h)*W + w`` of each output's maximum in its own (n, c)
        volume, as `adaptive_max_pool3d` returns it; each in ``[0, D*H*W)``.
    out : ndarray, optional
        Receives the result (left unchanged when an index is out of range).
    n_threads : int, optional
        The most OpenMP threads to use (None: the library default).

    Returns
    -------
    grad_input : ndarray
        Zero except at the positions the indices name, which hold the sum of their
        grad_output values.

    Raises
    ------
    ParamNullptrError
        Code 161001: grad_output, x or indices is None.
    ParamInvalidError
        Code 161002 for any broken rule, an index outside its volume among them.

    See Also
    --------
    AdaptiveMaxPool3dBackward : the two-phase object.
    adaptive_max_pool3d : the forward pass, which returns the indices.

    Examples
    --------
    The operator page's example:

    >>> import numpy as np
    >>> import pool_grad as pg
    >>> go = np.full((1, 1, 1, 1, 1), 0.4757, np.float32)
    >>> idx = np.full((1, 1, 1, 1, 1), 6, np.int32)
    >>> print(pg.adaptive_max_pool3d_backward(go, (1, 1, 2, 2, 2), idx).ravel())
    [0.     0.     0.     0.     0.     0.     0.4757 0.    ]
    """
    try:
        key = ("amax3d", _array_key(grad_output), _x_key(x), _array_key(indices),
               _out_key(out))
    except (TypeError, AttributeError):
        key = None

    def make_op(go, gi):
        return AdaptiveMaxPool3dBackward(go, x, indices, gi)
    return _call(key, make_op, grad_output, x, indices, out, n_threads)


def _max_pool_key(name, grad_output, x, indices, out, kernel_size, stride, padding,
                  dilation, ceil_mode):
    try:
        return (name, _array_key(grad_output), _x_key(x), _array_key(indices),
                _out_key(out), _exact(kernel_size), _exact(stride), _exact(padding),
                _exact(dilation), _flag(ceil_mode))
    except (TypeError, AttributeError):
        return None


def max_pool2d_with_indices_backward(grad_output: ArrayLike, x: XLike, indices: ArrayLike,
                                     kernel_size: Ints, stride: Ints | None = None,
                                     padding: Ints = 0, dilation: Ints = 1, *,
                                     ceil_mode: bool = False, out: Array | None = None,
                                     n_threads: int | None = None) -> Array:
    """Gradient of 2-D max pooling: grad_output scattered to the forward's argmax
    ``indices`` (aclnnMaxPool2dWithIndicesBackward).

    Parameters
    ----------
    grad_output : array_like, shape (N, C, H_out, W_out) or (C, H_out, W_out)
        float32, float64, float16 or ``ml_dtypes.bfloat16``, any strides; (H_out, W_out)
        must be the forward's output size for these parameters.
    x : ndarray or tuple of int
        The forward input, or its shape, (N, C, H, W) or (C, H, W): C, H and W >= 1 (N
        may be 0: nothing to do), H*W at most 2**31 - 1.
    indices : array_like of int32 or int64, grad_output's shape
        The flat position ``h*W + w`` of each output's maximum in its own plane, as
        `max_pool2d` returns it; each in ``[0, H*W)`` (one outside its window is
        accepted, as on the device).
    kernel_size : int or sequence of 1 or 2 ints
        Each > 0.
    stride : int, sequence of 0, 1 or 2 ints, or None, default None
        Each > 0; None or ``()``: the kernel size.
    padding : int or sequence of 1 or 2 ints, default 0
        Each >= 0 and at most kernel // 2 on its axis.
    dilation : int or sequence of 1 or 2 ints, default 1
        The step between a window's elements, each >= 1.
    ceil_mode : bool, default False
        Round the output size up.
    out : ndarray, optional
        Receives the result (left unchanged when an index is out of range).
    n_threads : int, optional
        The most OpenMP threads to use (None: the library default).

    Returns
    -------
    grad_input : ndarray
        Zero except at the positions the indices name.

    Raises
    ------
    ParamNullptrError
        Code 161001: grad_output, x, indices, kernel_size, padding or dilation is None.
    ParamInvalidError
        Code 161002 for any broken rule, an index outside its plane among them.

    See Also
    --------
    MaxPool2dWithIndicesBackward : the two-phase object.
    max_pool2d : the forward pass, which returns the indices.

    Notes
    -----
    The output size on each axis is ``(in + 2*p - dilation*(k - 1) - 1 + (s - 1 if
    ceil_mode else 0)) // s + 1``, less one with ceil_mode where the last window would
    start past the input and its left padding.

    Examples
    --------
    The operator page's example:

    >>> import numpy as np
    >>> import pool_grad as pg
    >>> go = np.array([0.4757, 0.1726], np.float32).reshape(1, 1, 2, 1)
    >>> idx = np.array([0, 6]).reshape(1, 1, 2, 1)
    >>> gi = pg.max_pool2d_with_indices_backward(go, (1, 1, 4, 3), idx, 2, 2, 0, 1)
    >>> print(gi.ravel())
    [0.4757 0.     0.     0.     0.     0.     0.1726 0.     0.     0.     0.     0.    ]
    """
    key = _max_pool_key("max2d_k", grad_output, x, indices, out, kernel_size, stride,
                        padding, dilation, ceil_mode)

    def make_op(go, gi):
        return MaxPool2dWithIndicesBackward(go, x, indices, kernel_size, stride, padding,
                                            dilation, ceil_mode, gi)
    return _call(key, make_op, grad_output, x, indices, out, n_threads)


def max_pool3d_with_argmax_backward(grad_output: ArrayLike, x: XLike, indices: ArrayLike,
                                    kernel_size: Ints, stride: Ints | None = None,
                                    padding: Ints = 0, dilation: Ints = 1, *,
                                    ceil_mode: bool = False, out: Array | None = None,
                                    n_threads: int | None = None) -> Array:
    """Gradient of 3-D max pooling: grad_output scattered to the forward's argmax
    ``indices`` (aclnnMaxPool3dWithArgmaxBackward).

    Parameters
    ----------
    grad_output : array_like, shape (N, C, D_out, H_out, W_out) or (C, D_out, H_out, W_out)
        float32, float64, float16 or ``ml_dtypes.bfloat16``, any strides; the forward's
        output size for these parameters.
    x : ndarray or tuple of int
        The forward input, or its shape, (N, C, D, H, W) or (C, D, H, W): no dimension 0
        (the operator supports no empty tensor), D*H*W at most 2**31 - 1.
    indices : array_like of int32 or int64, grad_output's shape
        The flat position ``(d*H + h)*W + w`` of each output's maximum in its own volume,
        as `max_pool3d` returns it; each in ``[0, D*H*W)``.
    kernel_size, stride, padding, ceil_mode
        As in `max_pool2d_with_indices_backward`, over three axes (lengths 1 or 3).
    dilation : int or sequence of 1 or 3 ints, default 1
        Must be 1 on every axis (the operator supports no other).
    out : ndarray, optional
        Receives the result (left unchanged when an index is out of range).
    n_threads : int, optional
        The most OpenMP threads to use (None: the library default).

    Returns
    -------
    grad_input : ndarray
        Zero except at the positions the indices name.

    Raises
    ------
    ParamNullptrError
        Code 161001: grad_output, x, indices, kernel_size, padding or dilation is None.
    ParamInvalidError
        Code 161002 for any broken rule, an index outside its volume among them.

    See Also
    --------
    MaxPool3dWithArgmaxBackward : the two-phase object.
    max_pool3d : the forward pass, which returns the indices.

    Examples
    --------
    The operator page's example:

    >>> import numpy as np
    >>> import pool_grad as pg
    >>> go = np.full((1, 1, 1, 1, 1), 0.4757, np.float32)
    >>> idx = np.full((1, 1, 1, 1, 1), 6, np.int32)
    >>> print(pg.max_pool3d_with_argmax_backward(go, (1, 1, 2, 2, 2), idx, 2).ravel())
    [0.     0.     0.     0.     0.     0.     0.4757 0.    ]
    """
    key = _max_pool_key("max3d_k", grad_output, x, indices, out, kernel_size, stride,
                        padding, dilation, ceil_mode)

    def make_op(go, gi):
        return MaxPool3dWithArgmaxBackward(go, x, indices, kernel_size, stride, padding,
                                           dilation, ceil_mode, gi)
    return _call(key, make_op, grad_output, x, indices, out, n_threads)

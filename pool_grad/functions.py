"""Scikit-style functions: validate, plan and execute in one call, returning grad_input.

A call whose configuration (shapes, strides and dtypes of the arrays, and every parameter,
exactly typed) has already passed validation once reuses that call's planned kernel on the
new arrays, so that a small one-shot call costs a few microseconds.  Only configurations
that validated and planned successfully enter this cache, and everything validation looks
at is part of the key, so a cache hit can never accept a call the checks would refuse.
"""
import numpy as np

from . import _threads
from . import _validate as v
from .ops import AdaptiveAvgPool3dBackward, AdaptiveMaxPool2dBackward, AvgPool2dBackward

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
    """Run one call: through the cached plan of its configuration when there is one,
    else by constructing (validating, planning) the operator."""
    if key is not None:
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


def avg_pool2d_backward(grad_output, x, kernel_size, stride=None, padding=0, *,
                        ceil_mode=False, count_include_pad=True, divisor_override=0,
                        cube_math_type=0, out=None, n_threads=None):
    """Gradient of 2-D average pooling with respect to its input (aclnnAvgPool2dBackward).

    ``x`` is the forward input or its shape; ``out`` (optional) receives the result."""
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


def adaptive_avg_pool3d_backward(grad_output, x, *, out=None, n_threads=None):
    """Gradient of 3-D adaptive average pooling (aclnnAdaptiveAvgPool3dBackward)."""
    try:
        key = ("adaptive3d", _array_key(grad_output), _x_key(x), _out_key(out))
    except (TypeError, AttributeError):
        key = None

    def make_op(go, gi):
        return AdaptiveAvgPool3dBackward(go, x, gi)
    return _call(key, make_op, grad_output, x, None, out, n_threads)


def adaptive_max_pool2d_backward(grad_output, x, indices, *, out=None, n_threads=None):
    """Gradient of 2-D adaptive max pooling: grad_output scattered to the forward's
    argmax ``indices`` (aclnnAdaptiveMaxPool2dBackward)."""
    try:
        key = ("max2d", _array_key(grad_output), _x_key(x), _array_key(indices),
               _out_key(out))
    except (TypeError, AttributeError):
        key = None

    def make_op(go, gi):
        return AdaptiveMaxPool2dBackward(go, x, indices, gi)
    return _call(key, make_op, grad_output, x, indices, out, n_threads)

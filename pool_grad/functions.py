"""Scikit-style functions: validate, plan and execute in one call, returning grad_input."""
import numpy as np

from . import _validate as v
from .ops import AdaptiveAvgPool3dBackward, AdaptiveMaxPool2dBackward, AvgPool2dBackward


def _new_grad_input(grad_output, x):
    """A fresh C-contiguous grad_input of x's shape and grad_output's dtype (the
    operator's checks then run on it like on any ``out``)."""
    go = v.as_input(grad_output, "grad_output")
    dt = v.float_dtype(go, "grad_output")
    shape, _ = v.x_shape(x, go, "x")
    v.size_fits(shape, dt.itemsize, "x")
    try:
        # an empty grad_output has an all-zero gradient; otherwise every element is written
        return go, (np.zeros if go.size == 0 else np.empty)(shape, dt)
    except MemoryError:
        raise v.invalid("x", "needs a grad_input larger than the memory available",
                        shape) from None


def avg_pool2d_backward(grad_output, x, kernel_size, stride=None, padding=0, *,
                        ceil_mode=False, count_include_pad=True, divisor_override=0,
                        cube_math_type=0, out=None, n_threads=None):
    """Gradient of 2-D average pooling with respect to its input (aclnnAvgPool2dBackward).

    ``x`` is the forward input or its shape; ``out`` (optional) receives the result."""
    if out is None:
        grad_output, out = _new_grad_input(grad_output, x)
    AvgPool2dBackward(grad_output, x, kernel_size, stride, padding, ceil_mode,
                      count_include_pad, divisor_override, cube_math_type,
                      out).execute(n_threads=n_threads)
    return out


def adaptive_avg_pool3d_backward(grad_output, x, *, out=None, n_threads=None):
    """Gradient of 3-D adaptive average pooling (aclnnAdaptiveAvgPool3dBackward)."""
    if out is None:
        grad_output, out = _new_grad_input(grad_output, x)
    AdaptiveAvgPool3dBackward(grad_output, x, out).execute(n_threads=n_threads)
    return out


def adaptive_max_pool2d_backward(grad_output, x, indices, *, out=None, n_threads=None):
    """Gradient of 2-D adaptive max pooling: grad_output scattered to the forward's
    argmax ``indices`` (aclnnAdaptiveMaxPool2dBackward)."""
    if out is None:
        grad_output, out = _new_grad_input(grad_output, x)
    AdaptiveMaxPool2dBackward(grad_output, x, indices, out).execute(n_threads=n_threads)
    return out

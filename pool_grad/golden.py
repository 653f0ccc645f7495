"""Golden data for CANN operator tests: the eight aclnn pooling backwards, without torch.

CANN's own operator tests (ops-nn keeps a ``golden.py`` beside each operator's tests)
compute expected outputs with PyTorch on the CPU: 16-bit inputs upcast to float32,
``torch.ops.aten.*_backward``, a cast back, int32 indices widened to int64, NHWC permuted
in and out.  The functions here give the same results from pool_grad's kernels (16-bit
data accumulates in float32 and rounds once, as that recipe does), take the aclnn
arguments in GetWorkspaceSize order, and keep a channels-last layout physical: with
``format="NHWC"`` (or ``"NDHWC"``) the arrays are (N, H, W, C) in memory and so is the
result.  `GOLDEN` maps each aclnn name to its function, as CANN's golden modules do.

>>> import numpy as np
>>> from pool_grad import golden
>>> go = np.ones((1, 2, 2, 16), np.float32)      # NHWC: N, H_out, W_out, C
>>> gi = golden.aclnn_avg_pool2d_backward_golden(
...     go, (1, 4, 4, 16), [2, 2], [2, 2], [0, 0], False, True, 0, 0, format="NHWC")
>>> gi.shape, gi.dtype, float(gi[0, 3, 3, 15])
((1, 4, 4, 16), dtype('float32'), 0.25)
>>> golden.get_golden("aclnnAvgPool2dBackward") is golden.aclnn_avg_pool2d_backward_golden
True

From the shell (``main`` here), every input and the expected output are written as raw
little-endian ``.bin`` files with a ``manifest.json`` describing them::

    python -m pool_grad golden aclnnAvgPool2dBackward --shape 8,64,56,56 \\
        --dtype bfloat16 --kernel 3 --stride 2 --padding 1 --seed 0 --out DIR
"""
import argparse
import difflib
import json
import os
import re
import shlex
import sys
from collections.abc import Callable
from typing import Any

import numpy as np

from . import _plan
from . import _validate as v
from ._errors import AclnnError, invalid
from ._typing import Array, ArrayLike, Ints, XLike
from .forward import adaptive_max_pool2d, adaptive_max_pool3d, max_pool2d, max_pool3d
from .functions import (adaptive_avg_pool2d_backward, adaptive_avg_pool3d_backward,
                        adaptive_max_pool2d_backward, adaptive_max_pool3d_backward,
                        avg_pool2d_backward, avg_pool3d_backward,
                        max_pool2d_with_indices_backward, max_pool3d_with_argmax_backward)

__all__ = [
    "GOLDEN", "get_golden", "main", "UnknownOperatorError",
    "aclnn_avg_pool2d_backward_golden", "aclnn_avg_pool3d_backward_golden",
    "aclnn_adaptive_avg_pool2d_backward_golden", "aclnn_adaptive_avg_pool3d_backward_golden",
    "aclnn_adaptive_max_pool2d_backward_golden", "aclnn_adaptive_max_pool3d_backward_golden",
    "aclnn_max_pool2d_with_indices_backward_golden",
    "aclnn_max_pool3d_with_argmax_backward_golden",
]

# --------------------------------------------------------------------------------------
# Layouts

#: channels-first and channels-last format of the 2-D and the 3-D operators
_FORMATS = {2: ("NCHW", "NHWC"), 3: ("NCDHW", "NDHWC")}
#: the keyword that names the tensor format, and the spellings also accepted
_FORMAT_KEYS = ("format", "input_format", "data_format")


def _channels_last(kwargs, n, op_name):
    """Whether the format named in kwargs (any of _FORMAT_KEYS) is the channels-last one
    of an n-D operator; "ND" and the channels-first format are not."""
    given = [(k, kwargs[k]) for k in _FORMAT_KEYS if kwargs.get(k) is not None]
    if not given:
        return False
    first, last = _FORMATS[n]
    names = set()
    for key, value in given:
        if not isinstance(value, str):
            raise invalid(key, f"must be a string, {first!r} or {last!r}", repr(value))
        names.add(value.upper())
    if len(names) > 1:
        raise invalid("format", "and its spellings input_format and data_format must "
                      "name the same format", ", ".join(f"{k}={val!r}" for k, val in given))
    fmt = names.pop()
    if fmt in ("ND", first):
        return False
    if fmt == last:
        return True
    raise invalid(given[0][0], f"must be {first} or {last} (or ND) for {op_name}, a "
                  f"{n}-D operator", repr(given[0][1]))


def _from_channels_last(ndim, n):
    """The axes that view a channels-last array, (N, *spatial, C) or (*spatial, C), as
    (N, C, *spatial) or (C, *spatial); None for a rank the operator does not take (its
    own check then reports it)."""
    if ndim == n + 2:
        return (0, ndim - 1) + tuple(range(1, ndim - 1))
    if ndim == n + 1:
        return (ndim - 1,) + tuple(range(ndim - 1))
    return None


def _to_channels_last(perm):
    return tuple(int(a) for a in np.argsort(perm))


def _is_shape(x):
    return isinstance(x, (tuple, list)) and all(
        isinstance(d, (int, np.integer)) and not isinstance(d, (bool, np.bool_)) for d in x)


def _run(fn, op_name, n, grad_output, x, indices, out, kwargs, *args, **params):
    """Call pool_grad's function fn, through channels-first views of channels-last
    arrays when kwargs name the channels-last format; returns the result in the
    arrays' own (physical) layout."""
    n_threads = kwargs.get("n_threads")
    extra = () if indices is None else (indices,)
    if not _channels_last(kwargs, n, op_name):
        return fn(grad_output, x, *extra, *args, out=out, n_threads=n_threads, **params)
    go = v.as_input(grad_output, "gradOutput")
    perm = _from_channels_last(go.ndim, n)
    if perm is None:   # a rank the operator refuses: let it say so
        return fn(go, x, *extra, *args, out=out, n_threads=n_threads, **params)
    v.float_dtype(go, "gradOutput")
    x_shape, _ = v.x_shape(x, go, "self")
    if len(x_shape) != len(perm):
        return fn(go, x, *extra, *args, out=out, n_threads=n_threads, **params)
    if _is_shape(x):
        x_view = tuple(x_shape[a] for a in perm)
    else:
        x_view = v.as_input(x, "self").transpose(perm)
    if indices is not None:
        ind = v.as_input(indices, "indices")
        extra = (ind.transpose(perm) if ind.ndim == len(perm) else ind,)
    if out is None:
        out = v.NewOutput(x_shape, go.dtype, zero=go.size == 0).allocate("gradInput")
    out_view = out.transpose(perm) if isinstance(out, np.ndarray) and \
        out.ndim == len(perm) else out
    fn(go.transpose(perm), x_view, *extra, *args, out=out_view, n_threads=n_threads,
       **params)
    return out


# --------------------------------------------------------------------------------------
# The golden functions, aclnn names and GetWorkspaceSize order

_KWARGS_DOC = """format : str, optional
        The tensors' format, by keyword (also spelled ``input_format`` or
        ``data_format``): NCHW or NHWC for a 2-D operator, NCDHW or NDHWC for a 3-D
        one, ND or None for channels-first.  With the channels-last one the arrays,
        and the result, are physically (N, [D,] H, W, C), or that without N; they are
        viewed through transposes, never copied.
    n_threads : int, optional
        By keyword: passed on to pool_grad.
    **kwargs
        Any other keyword is ignored."""


def aclnn_avg_pool2d_backward_golden(gradOutput: ArrayLike, self: XLike, kernelSize: Ints,
                                     stride: Ints | None, padding: Ints, ceilMode: bool,
                                     countIncludePad: bool, divisorOverride: int | None,
                                     cubeMathType: int = 0, gradInput: Array | None = None,
                                     **kwargs: Any) -> Array:
    """Expected gradInput of aclnnAvgPool2dBackward.

    Parameters
    ----------
    gradOutput, self
        As in `pool_grad.avg_pool2d_backward` (``self`` may be a shape), in the layout
        the format says.
    kernelSize, stride, padding, ceilMode, countIncludePad, divisorOverride, cubeMathType
        As in `pool_grad.avg_pool2d_backward`.
    gradInput : ndarray, optional
        Receives the result (self's physical shape); a new array when None.
    {kwargs}

    Returns
    -------
    ndarray
        gradInput, gradOutput's dtype, self's physical shape.

    Examples
    --------
    >>> import numpy as np
    >>> from pool_grad.golden import aclnn_avg_pool2d_backward_golden as golden
    >>> gi = golden(np.ones((1, 1, 1, 1), np.float16), (1, 1, 2, 2), 2, None, 0, False,
    ...             True, 0)
    >>> print(gi[0, 0])
    [[0.25 0.25]
     [0.25 0.25]]
    """
    return _run(avg_pool2d_backward, "aclnnAvgPool2dBackward", 2, gradOutput, self, None,
                gradInput, kwargs, kernelSize, stride, padding, ceil_mode=ceilMode,
                count_include_pad=countIncludePad, divisor_override=divisorOverride,
                cube_math_type=cubeMathType)


def aclnn_avg_pool3d_backward_golden(gradOutput: ArrayLike, self: XLike, kernelSize: Ints,
                                     stride: Ints | None, padding: Ints, ceilMode: bool,
                                     countIncludePad: bool, divisorOverride: int | None,
                                     output: Array | None = None, **kwargs: Any) -> Array:
    """Expected output of aclnnAvgPool3dBackward.

    Parameters
    ----------
    gradOutput, self, kernelSize, stride, padding, ceilMode, countIncludePad, divisorOverride
        As in `pool_grad.avg_pool3d_backward` (``self`` may be a shape).
    output : ndarray, optional
        Receives the result (self's physical shape); a new array when None.
    {kwargs}

    Returns
    -------
    ndarray
        The gradient, gradOutput's dtype, self's physical shape.

    Examples
    --------
    >>> import numpy as np
    >>> from pool_grad.golden import aclnn_avg_pool3d_backward_golden as golden
    >>> go = np.ones((1, 1, 1, 1, 1), np.float32)
    >>> print(golden(go, (1, 1, 2, 2, 2), [2], [], [0], False, True, 0).ravel())
    [0.125 0.125 0.125 0.125 0.125 0.125 0.125 0.125]
    """
    return _run(avg_pool3d_backward, "aclnnAvgPool3dBackward", 3, gradOutput, self, None,
                output, kwargs, kernelSize, stride, padding, ceil_mode=ceilMode,
                count_include_pad=countIncludePad, divisor_override=divisorOverride)


def aclnn_adaptive_avg_pool2d_backward_golden(gradOutput: ArrayLike, self: XLike,
                                              out: Array | None = None, **kwargs: Any
                                              ) -> Array:
    """Expected out of aclnnAdaptiveAvgPool2dBackward.

    Parameters
    ----------
    gradOutput, self
        As in `pool_grad.adaptive_avg_pool2d_backward` (``self`` may be a shape).
    out : ndarray, optional
        Receives the result (self's physical shape); a new array when None.
    {kwargs}

    Returns
    -------
    ndarray
        The gradient, gradOutput's dtype, self's physical shape.

    Examples
    --------
    >>> import numpy as np
    >>> from pool_grad.golden import aclnn_adaptive_avg_pool2d_backward_golden as golden
    >>> go = np.arange(1, 7, dtype=np.float32).reshape(1, 3, 2, 1)   # NHWC
    >>> print(golden(go, (1, 4, 2, 1), format="NHWC")[0, :, :, 0])
    [[0.5 1. ]
     [2.  3. ]
     [4.  5. ]
     [2.5 3. ]]
    """
    return _run(adaptive_avg_pool2d_backward, "aclnnAdaptiveAvgPool2dBackward", 2,
                gradOutput, self, None, out, kwargs)


def aclnn_adaptive_avg_pool3d_backward_golden(gradOutput: ArrayLike, self: XLike,
                                              out: Array | None = None, **kwargs: Any
                                              ) -> Array:
    """Expected out of aclnnAdaptiveAvgPool3dBackward.

    Parameters
    ----------
    gradOutput, self
        As in `pool_grad.adaptive_avg_pool3d_backward` (``self`` may be a shape).
    out : ndarray, optional
        Receives the result (self's physical shape); a new array when None.
    {kwargs}

    Returns
    -------
    ndarray
        The gradient, gradOutput's dtype, self's physical shape.

    Examples
    --------
    >>> import numpy as np
    >>> from pool_grad.golden import aclnn_adaptive_avg_pool3d_backward_golden as golden
    >>> go = np.arange(1, 9, dtype=np.float32).reshape(2, 2, 1, 1, 2)
    >>> print(golden(go, (2, 2, 1, 1, 4)).reshape(4, 4)[0])
    [0.5 0.5 1.  1. ]
    """
    return _run(adaptive_avg_pool3d_backward, "aclnnAdaptiveAvgPool3dBackward", 3,
                gradOutput, self, None, out, kwargs)


def aclnn_adaptive_max_pool2d_backward_golden(gradOutput: ArrayLike, self: XLike,
                                              indices: ArrayLike,
                                              gradInput: Array | None = None,
                                              **kwargs: Any) -> Array:
    """Expected gradInput of aclnnAdaptiveMaxPool2dBackward.

    Parameters
    ----------
    gradOutput, self, indices
        As in `pool_grad.adaptive_max_pool2d_backward` (int32 or int64 indices, flat
        ``h*W + w`` in each plane whatever the format).
    gradInput : ndarray, optional
        Receives the result (self's physical shape); a new array when None.
    {kwargs}

    Returns
    -------
    ndarray
        gradInput, gradOutput's dtype, self's physical shape.

    Examples
    --------
    >>> import numpy as np
    >>> from pool_grad.golden import aclnn_adaptive_max_pool2d_backward_golden as golden
    >>> go = np.array([[[[0.5]]]], np.float32)
    >>> print(golden(go, (1, 1, 2, 2), np.array([[[[3]]]], np.int32))[0, 0])
    [[0.  0. ]
     [0.  0.5]]
    """
    return _run(adaptive_max_pool2d_backward, "aclnnAdaptiveMaxPool2dBackward", 2,
                gradOutput, self, indices, gradInput, kwargs)


def aclnn_adaptive_max_pool3d_backward_golden(gradOutput: ArrayLike, self: XLike,
                                              indices: ArrayLike,
                                              gradInput: Array | None = None,
                                              **kwargs: Any) -> Array:
    """Expected gradInput of aclnnAdaptiveMaxPool3dBackward.

    Parameters
    ----------
    gradOutput, self, indices
        As in `pool_grad.adaptive_max_pool3d_backward` (int32 or int64 indices, flat
        ``(d*H + h)*W + w`` in each volume whatever the format).
    gradInput : ndarray, optional
        Receives the result (self's physical shape); a new array when None.
    {kwargs}

    Returns
    -------
    ndarray
        gradInput, gradOutput's dtype, self's physical shape.

    Examples
    --------
    >>> import numpy as np
    >>> from pool_grad.golden import aclnn_adaptive_max_pool3d_backward_golden as golden
    >>> go = np.full((1, 1, 1, 1, 1), 0.4757, np.float32)
    >>> idx = np.full((1, 1, 1, 1, 1), 6, np.int32)
    >>> print(golden(go, (1, 1, 2, 2, 2), idx).ravel())
    [0.     0.     0.     0.     0.     0.     0.4757 0.    ]
    """
    return _run(adaptive_max_pool3d_backward, "aclnnAdaptiveMaxPool3dBackward", 3,
                gradOutput, self, indices, gradInput, kwargs)


def aclnn_max_pool2d_with_indices_backward_golden(gradOutput: ArrayLike, self: XLike,
                                                  indices: ArrayLike, kernelSize: Ints,
                                                  stride: Ints | None, padding: Ints,
                                                  dilation: Ints, ceilMode: bool,
                                                  gradInput: Array | None = None,
                                                  **kwargs: Any) -> Array:
    """Expected gradInput of aclnnMaxPool2dWithIndicesBackward.

    Parameters
    ----------
    gradOutput, self, indices, kernelSize, stride, padding, dilation, ceilMode
        As in `pool_grad.max_pool2d_with_indices_backward` (int32 or int64 indices, flat
        ``h*W + w`` in each plane whatever the format).
    gradInput : ndarray, optional
        Receives the result (self's physical shape); a new array when None.
    {kwargs}

    Returns
    -------
    ndarray
        gradInput, gradOutput's dtype, self's physical shape.

    Examples
    --------
    >>> import numpy as np
    >>> from pool_grad.golden import aclnn_max_pool2d_with_indices_backward_golden as golden
    >>> go = np.array([0.4757, 0.1726], np.float32).reshape(1, 1, 2, 1)
    >>> idx = np.array([0, 6], np.int32).reshape(1, 1, 2, 1)
    >>> print(golden(go, (1, 1, 4, 3), idx, [2, 2], [2, 2], [0, 0], [1, 1], False)[0, 0])
    [[0.4757 0.     0.    ]
     [0.     0.     0.    ]
     [0.1726 0.     0.    ]
     [0.     0.     0.    ]]
    """
    return _run(max_pool2d_with_indices_backward, "aclnnMaxPool2dWithIndicesBackward", 2,
                gradOutput, self, indices, gradInput, kwargs, kernelSize, stride, padding,
                dilation, ceil_mode=ceilMode)


def aclnn_max_pool3d_with_argmax_backward_golden(gradOutput: ArrayLike, self: XLike,
                                                 indices: ArrayLike, kernelSize: Ints,
                                                 stride: Ints | None, padding: Ints,
                                                 dilation: Ints, ceilMode: bool,
                                                 gradInput: Array | None = None,
                                                 **kwargs: Any) -> Array:
    """Expected gradInput of aclnnMaxPool3dWithArgmaxBackward.

    Parameters
    ----------
    gradOutput, self, indices, kernelSize, stride, padding, dilation, ceilMode
        As in `pool_grad.max_pool3d_with_argmax_backward` (int32 or int64 indices, flat
        ``(d*H + h)*W + w`` in each volume whatever the format; dilation 1).
    gradInput : ndarray, optional
        Receives the result (self's physical shape); a new array when None.
    {kwargs}

    Returns
    -------
    ndarray
        gradInput, gradOutput's dtype, self's physical shape.

    Examples
    --------
    >>> import numpy as np
    >>> from pool_grad.golden import aclnn_max_pool3d_with_argmax_backward_golden as golden
    >>> go = np.full((1, 1, 1, 1, 1), 0.4757, np.float32)
    >>> idx = np.full((1, 1, 1, 1, 1), 6, np.int32)
    >>> print(golden(go, (1, 1, 2, 2, 2), idx, [2], [2], [0], [1], False).ravel())
    [0.     0.     0.     0.     0.     0.     0.4757 0.    ]
    """
    return _run(max_pool3d_with_argmax_backward, "aclnnMaxPool3dWithArgmaxBackward", 3,
                gradOutput, self, indices, gradInput, kwargs, kernelSize, stride, padding,
                dilation, ceil_mode=ceilMode)


#: aclnn operator name -> golden function, as CANN's golden modules register them
GOLDEN: dict[str, Callable[..., Array]] = {
    "aclnnAvgPool2dBackward": aclnn_avg_pool2d_backward_golden,
    "aclnnAvgPool3dBackward": aclnn_avg_pool3d_backward_golden,
    "aclnnAdaptiveAvgPool2dBackward": aclnn_adaptive_avg_pool2d_backward_golden,
    "aclnnAdaptiveAvgPool3dBackward": aclnn_adaptive_avg_pool3d_backward_golden,
    "aclnnAdaptiveMaxPool2dBackward": aclnn_adaptive_max_pool2d_backward_golden,
    "aclnnAdaptiveMaxPool3dBackward": aclnn_adaptive_max_pool3d_backward_golden,
    "aclnnMaxPool2dWithIndicesBackward": aclnn_max_pool2d_with_indices_backward_golden,
    "aclnnMaxPool3dWithArgmaxBackward": aclnn_max_pool3d_with_argmax_backward_golden,
}

for _fn in GOLDEN.values():
    if _fn.__doc__:   # None under python -OO
        _fn.__doc__ = _fn.__doc__.replace("{kwargs}", _KWARGS_DOC)
del _fn


class UnknownOperatorError(KeyError, ValueError):
    """An operator name that `GOLDEN` does not know (a KeyError and a ValueError)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


def _lookup(name):
    """The registered name for name (an aclnn name, or one without the "aclnn" prefix),
    else UnknownOperatorError naming the known ones."""
    if isinstance(name, str):
        if name in GOLDEN:
            return name
        if "aclnn" + name in GOLDEN:
            return "aclnn" + name
    close = difflib.get_close_matches(str(name), list(GOLDEN), n=1)
    hint = f"did you mean {close[0]}? " if close else ""
    raise UnknownOperatorError(f"unknown operator {name!r}; {hint}known operators: "
                               f"{', '.join(GOLDEN)}")


def get_golden(name: str) -> Callable[..., Array]:
    """The golden function of an aclnn operator.

    Parameters
    ----------
    name : str
        The aclnn name, e.g. ``"aclnnMaxPool2dWithIndicesBackward"`` (the ``aclnn``
        prefix may be left off).

    Returns
    -------
    callable
        ``GOLDEN[name]``.

    Raises
    ------
    UnknownOperatorError
        A ``KeyError`` and ``ValueError`` whose message lists the known names.

    Examples
    --------
    >>> from pool_grad.golden import get_golden
    >>> get_golden("MaxPool3dWithArgmaxBackward").__name__
    'aclnn_max_pool3d_with_argmax_backward_golden'
    >>> try:
    ...     get_golden("aclnnAvgPool2dBackwards")  # doctest: +ELLIPSIS
    ... except KeyError as e:
    ...     print(e)
    unknown operator 'aclnnAvgPool2dBackwards'; did you mean aclnnAvgPool2dBackward? ...
    """
    return GOLDEN[_lookup(name)]


# --------------------------------------------------------------------------------------
# Command line: python -m pool_grad golden OPERATOR --shape ... --out DIR

PROG = "python -m pool_grad golden"
_CHUNK = 1 << 22                  # elements per random-generation step
_WRITE_CHUNK = 16 << 20           # bytes per tofile call
_PROGRESS_OVER = 64 << 20         # bytes written above which a progress bar is shown
_LITTLE = sys.byteorder == "little"

_DTYPES = {"float32": np.float32, "float16": np.float16, "bfloat16": v.BFLOAT16,
           "float64": np.float64}
_DTYPE_ALIASES = {"fp32": "float32", "float": "float32", "fp16": "float16",
                  "half": "float16", "bf16": "bfloat16", "fp64": "float64",
                  "double": "float64"}
# Random values: sign, two exponent bits and every mantissa bit random, the rest of the
# exponent fixed, so |value| lies in [0.125, 2) and is exact in the file's dtype.
_BITS = {  # itemsize -> (unsigned type, mask of the random bits, fixed exponent bits)
    4: (np.uint32, 0x81FFFFFF, 124 << 23),
    8: (np.uint64, 0x801FFFFFFFFFFFFF, 1020 << 52),
}
_BITS16 = {np.dtype(np.float16): (np.uint16, 0x8FFF, 12 << 10),
           v.BFLOAT16: (np.uint16, 0x81FF, 124 << 7)}

# kind -> the options that apply to it (beyond operator, --shape, --dtype, --format,
# --seed, --out); "cube_math_type" only for AvgPool2dBackward
_OPTIONS = {
    "avg": ("kernel", "stride", "padding", "ceil_mode", "count_include_pad",
            "divisor_override"),
    "adaptive_avg": ("output_size",),
    "adaptive_max": ("output_size", "index_dtype"),
    "max": ("kernel", "stride", "padding", "dilation", "ceil_mode", "index_dtype"),
}
# operator -> (kind, spatial rank, name of its output tensor)
_OPERATORS = {
    "aclnnAvgPool2dBackward": ("avg", 2, "gradInput"),
    "aclnnAvgPool3dBackward": ("avg", 3, "output"),
    "aclnnAdaptiveAvgPool2dBackward": ("adaptive_avg", 2, "out"),
    "aclnnAdaptiveAvgPool3dBackward": ("adaptive_avg", 3, "out"),
    "aclnnAdaptiveMaxPool2dBackward": ("adaptive_max", 2, "gradInput"),
    "aclnnAdaptiveMaxPool3dBackward": ("adaptive_max", 3, "gradInput"),
    "aclnnMaxPool2dWithIndicesBackward": ("max", 2, "gradInput"),
    "aclnnMaxPool3dWithArgmaxBackward": ("max", 3, "gradInput"),
}
# pool_grad's argument names -> the option that sets them (for error messages)
_OPTION_OF = {"kernel_size": "--kernel", "stride": "--stride", "padding": "--padding",
              "dilation": "--dilation", "divisor_override": "--divisor-override",
              "cube_math_type": "--cube-math-type", "x": "--shape", "self": "--shape",
              "output_size": "--output-size", "ceil_mode": "--ceil-mode"}


class _UsageError(Exception):
    """A bad command line: reported in one line, exit status 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # argparse would print the usage too and exit
        raise _UsageError(message)


def _parser():
    p = _Parser(
        prog=PROG, allow_abbrev=False,
        description="Write golden data for a CANN aclnn pooling-backward operator test: "
                    "every input and the expected output as raw little-endian .bin files "
                    "(named after the aclnn arguments) plus manifest.json (each file's "
                    "shape, dtype and format, and the parameters).  Random inputs come "
                    "from a seeded generator: the same arguments write the same bytes.",
        epilog="Operators: " + ", ".join(_OPERATORS) + ".")
    p.add_argument("operator", help="aclnn operator name, e.g. aclnnAvgPool2dBackward")
    p.add_argument("--shape", required=True,
                   help="the forward input (self) shape in --format's order, e.g. "
                        "8,64,56,56 (N,C,H,W) or 8,56,56,64 with --format NHWC")
    p.add_argument("--dtype", default="float32",
                   help="float32 (default), float16, bfloat16 or float64")
    p.add_argument("--format", help="NCHW (default of the 2-D operators), NHWC, NCDHW "
                   "(default of the 3-D ones) or NDHWC: the files' physical layout")
    p.add_argument("--kernel", help="kernelSize: one int or one per spatial axis, "
                   "comma-separated (avg and max pooling; required there)")
    p.add_argument("--stride", help="stride, like --kernel (default: the kernel)")
    p.add_argument("--padding", help="padding, like --kernel (default 0)")
    p.add_argument("--dilation", help="dilation of max pooling, like --kernel (default 1)")
    p.add_argument("--ceil-mode", action="store_true", default=None,
                   help="ceilMode true (default false)")
    p.add_argument("--count-include-pad", action=argparse.BooleanOptionalAction,
                   default=None, help="countIncludePad of average pooling (default true)")
    p.add_argument("--divisor-override", help="divisorOverride (default 0: not set)")
    p.add_argument("--cube-math-type", help="cubeMathType of AvgPool2dBackward, 0-3 "
                   "(default 0)")
    p.add_argument("--output-size", help="the adaptive operators' output size: one int "
                   "or one per spatial axis (required there)")
    p.add_argument("--index-dtype", help="int32 (default) or int64: the max operators' "
                   "indices")
    p.add_argument("--seed", default="0", help="seed of the random inputs (default 0)")
    p.add_argument("--out", required=True, help="directory to write (created if needed)")
    return p


def _ints(text, option, *, empty=False, minimum=None):
    """Comma-separated integers, e.g. "3" or "3,2"."""
    items = [t.strip() for t in text.split(",")] if text.strip() else []
    try:
        vals = [int(t) for t in items]
    except ValueError:
        raise _UsageError(f"{option} must be comma-separated integers (e.g. 3 or 3,2); "
                          f"got {text!r}") from None
    if not vals and not empty:
        raise _UsageError(f"{option} must not be empty")
    if minimum is not None and any(val < minimum for val in vals):
        raise _UsageError(f"{option} must be >= {minimum} on every axis; got {text!r}")
    return vals


def _int(text, option, minimum=None):
    try:
        val = int(text)
    except ValueError:
        raise _UsageError(f"{option} must be an integer; got {text!r}") from None
    if minimum is not None and val < minimum:
        raise _UsageError(f"{option} must be >= {minimum}; got {val}")
    return val


def _dtype(text):
    name = _DTYPE_ALIASES.get(text.lower(), text.lower())
    if name not in _DTYPES:
        raise _UsageError(f"--dtype must be float32, float16, bfloat16 or float64; "
                          f"got {text!r}")
    return name, np.dtype(_DTYPES[name])


def _fill_random(rng, arr):
    """Fill a C-contiguous float array with random values of |value| in [0.125, 2) (sign,
    two exponent bits and the mantissa random; exact in arr's dtype), chunk by chunk from
    the generator's raw 64-bit stream: about a nanosecond per element, and the same
    values whatever the chunking."""
    utype, mask, base = _BITS16.get(arr.dtype) or _BITS[arr.itemsize]
    flat = arr.reshape(-1).view(utype)
    little = np.dtype(utype).newbyteorder("<")
    per_word = 8 // arr.itemsize
    mask, base = utype(mask), utype(base)
    for start in range(0, flat.size, _CHUNK):
        dst = flat[start:start + _CHUNK]
        raw = rng.bit_generator.random_raw(-(-dst.size // per_word))
        words = raw.astype("<u8", copy=False).view(little)[:dst.size]
        np.bitwise_and(words, mask, out=dst)
        np.bitwise_or(dst, base, out=dst)


class _Progress:
    """A one-line text bar on stderr, redrawn with \\r when the percentage changes."""

    def __init__(self, total, enabled, stream=None, width=30):
        self.total, self.enabled, self.width = total, enabled, width
        self.stream = sys.stderr if stream is None else stream
        self.done, self.shown = 0, -1

    def advance(self, nbytes):
        self.done += nbytes
        if not self.enabled:
            return
        pct = 100 * self.done // max(self.total, 1)
        if pct != self.shown:
            self.shown = pct
            filled = self.width * self.done // max(self.total, 1)
            self.stream.write(f"\rwriting [{'#' * filled}{'.' * (self.width - filled)}] "
                              f"{pct:3d}% {self.done / 2**20:.1f}/{self.total / 2**20:.1f}"
                              " MiB")
            self.stream.flush()

    def close(self):
        if self.enabled and self.shown >= 0:
            self.stream.write("\n")
            self.stream.flush()


def _write(path, arr, progress):
    """arr's bytes, little-endian, C order, in chunks."""
    flat = np.ascontiguousarray(arr).reshape(-1)
    flat = flat.view(f"u{flat.itemsize}")
    step = max(1, _WRITE_CHUNK // flat.itemsize)
    with open(path, "wb") as f:
        for start in range(0, flat.size, step):
            chunk = flat[start:start + step]
            if not _LITTLE:
                chunk = chunk.byteswap()
            chunk.tofile(f)
            progress.advance(chunk.nbytes)


def _resolve(args):
    """Check the command line and work out the case: everything but the arrays."""
    name = _lookup(args.operator)
    kind, n, out_name = _OPERATORS[name]
    allowed = set(_OPTIONS[kind]) | ({"cube_math_type"} if name ==
                                     "aclnnAvgPool2dBackward" else set())
    for opt in ("kernel", "stride", "padding", "dilation", "ceil_mode", "count_include_pad",
                "divisor_override", "cube_math_type", "output_size", "index_dtype"):
        if getattr(args, opt) is not None and opt not in allowed:
            flag = "--" + opt.replace("_", "-")
            takes = ", ".join("--" + o.replace("_", "-") for o in sorted(allowed))
            raise _UsageError(f"{flag} does not apply to {name} (its options: {takes})")
    dtype_name, dtype = _dtype(args.dtype)
    first, last = _FORMATS[n]
    fmt = (args.format or first).upper()
    if fmt not in (first, last):
        raise _UsageError(f"--format must be {first} or {last} for {name}, a {n}-D "
                          f"operator; got {args.format!r}")
    shape = tuple(_ints(args.shape, "--shape", empty=True, minimum=0))
    if len(shape) not in (n + 1, n + 2):
        raise _UsageError(f"--shape must have {n + 2} dimensions ({','.join(fmt)}) or "
                          f"{n + 1} (without N) for {name}; got {len(shape)}: {args.shape}")
    perm = _from_channels_last(len(shape), n) if fmt == last else None
    logical = shape if perm is None else tuple(shape[a] for a in perm)
    seed = _int(args.seed, "--seed", minimum=0)
    case = {"name": name, "kind": kind, "n": n, "out_name": out_name, "dtype": dtype,
            "dtype_name": dtype_name, "format": fmt, "shape": shape, "perm": perm,
            "logical": logical, "seed": seed}
    spatial = logical[-n:]
    if kind in ("avg", "max"):
        if args.kernel is None:
            raise _UsageError(f"--kernel is required for {name}")
        kernel = _ints(args.kernel, "--kernel")
        stride = kernel if args.stride is None else _ints(args.stride, "--stride",
                                                          empty=True)
        padding = [0] if args.padding is None else _ints(args.padding, "--padding")
        ceil = bool(args.ceil_mode)
        if kind == "avg":
            cip = True if args.count_include_pad is None else args.count_include_pad
            div = 0 if args.divisor_override is None else _int(args.divisor_override,
                                                                "--divisor-override")
            k, s, p, _, _, _ = v.avg_params(kernel, stride, padding, ceil, cip, div, n)
            params = {"kernelSize": kernel, "stride": stride, "padding": padding,
                      "ceilMode": ceil, "countIncludePad": cip, "divisorOverride": div}
            if n == 2:
                params["cubeMathType"] = 0 if args.cube_math_type is None else _int(
                    args.cube_math_type, "--cube-math-type")
            outs = _plan.avg_output_sizes(spatial, k, s, p, ceil)
        else:
            dilation = [1] if args.dilation is None else _ints(args.dilation,
                                                                "--dilation")
            k, s, p, d, _ = v.max_params(kernel, stride, padding, dilation, ceil, n,
                                         unit_dilation=n == 3)
            params = {"kernelSize": kernel, "stride": stride, "padding": padding,
                      "dilation": dilation, "ceilMode": ceil}
            outs = _plan.avg_output_sizes(spatial, k, s, p, ceil, d)
    else:
        if args.output_size is None:
            raise _UsageError(f"--output-size is required for {name}")
        size = _ints(args.output_size, "--output-size", minimum=1)
        if len(size) not in (1, n):
            raise _UsageError(f"--output-size must have 1 or {n} values for {name}; got "
                              f"{args.output_size!r}")
        outs = tuple(size * n if len(size) == 1 else size)
        params = {}
        case["output_size"] = list(outs)
    case["params"] = params
    case["go_logical"] = logical[:-n] + tuple(outs)
    if kind in ("adaptive_max", "max"):
        idx = (args.index_dtype or "int32").lower()
        if idx not in ("int32", "int64"):
            raise _UsageError(f"--index-dtype must be int32 or int64; got "
                              f"{args.index_dtype!r}")
        case["index_dtype"] = np.dtype(idx)
    return case


def _physical(shape, perm):
    return tuple(shape) if perm is None else tuple(shape[a] for a in _to_channels_last(perm))


def _command(case):
    """The command line that writes this case (without --out)."""
    parts = [case["name"], "--shape", ",".join(map(str, case["shape"])),
             "--dtype", case["dtype_name"], "--format", case["format"]]
    opt = {"kernelSize": "--kernel", "stride": "--stride", "padding": "--padding",
           "dilation": "--dilation", "divisorOverride": "--divisor-override",
           "cubeMathType": "--cube-math-type"}
    for key, val in case["params"].items():
        if key in opt:
            parts += [opt[key], ",".join(map(str, val)) if isinstance(val, list) else
                      str(val)]
    if case["params"].get("ceilMode"):
        parts.append("--ceil-mode")
    if "countIncludePad" in case["params"]:
        parts.append("--count-include-pad" if case["params"]["countIncludePad"]
                     else "--no-count-include-pad")
    if "output_size" in case:
        parts += ["--output-size", ",".join(map(str, case["output_size"]))]
    if "index_dtype" in case:
        parts += ["--index-dtype", str(case["index_dtype"])]
    parts += ["--seed", str(case["seed"])]
    return f"{PROG} {shlex.join(parts)}"


def _generate(case):
    """The arrays: [(aclnn name, physical array)] for the inputs in GetWorkspaceSize
    order, then the expected output."""
    perm, dtype, n = case["perm"], case["dtype"], case["n"]
    view = (lambda a: a) if perm is None else (lambda a: a.transpose(perm))
    # memory: self, gradOutput, expected output, and the max forward's output and
    # int64 indices (plus the narrowed copy)
    x_bytes = dtype.itemsize * int(np.prod(case["shape"], dtype=np.float64))
    go_elems = int(np.prod(case["go_logical"], dtype=np.float64))
    need = 2 * x_bytes + go_elems * dtype.itemsize
    if "index_dtype" in case:
        need += go_elems * (dtype.itemsize + 8 + case["index_dtype"].itemsize)
    limit = v.physical_memory()
    if need > limit:
        raise _UsageError(f"--shape {','.join(map(str, case['shape']))} needs about "
                          f"{need / 2**30:.1f} GiB of memory, more than this machine's "
                          f"{limit / 2**30:.1f} GiB")
    rng = np.random.default_rng(case["seed"])
    x = np.empty(case["shape"], dtype)
    _fill_random(rng, x)
    indices = None
    if "index_dtype" in case:
        if case["kind"] == "max":
            fwd = max_pool2d if n == 2 else max_pool3d
            p = case["params"]
            _, ind = fwd(view(x), p["kernelSize"], p["stride"], p["padding"],
                         p["dilation"], p["ceilMode"], return_indices=True)
        else:
            fwd = adaptive_max_pool2d if n == 2 else adaptive_max_pool3d
            _, ind = fwd(view(x), case["output_size"], return_indices=True)
        if perm is None and ind.dtype == case["index_dtype"]:
            indices = ind
        else:
            indices = np.empty(_physical(ind.shape, perm), case["index_dtype"])
            view(indices)[...] = ind
        del ind
    go = np.empty(_physical(case["go_logical"], perm), dtype)
    _fill_random(rng, go)
    arrays = [("gradOutput", go), ("self", x)]
    if indices is not None:
        arrays.append(("indices", indices))
    fn = GOLDEN[case["name"]]
    extra = () if indices is None else (indices,)
    expected = fn(go, x, *extra, *case["params"].values(), format=case["format"])
    return arrays, (case["out_name"], expected)


def _entry(name, arr, fmt):
    return {"name": name, "file": f"{name}.bin", "shape": list(arr.shape),
            "dtype": str(arr.dtype), "format": fmt, "nbytes": int(arr.nbytes)}


def _write_case(case, directory):
    inputs, (out_name, expected) = _generate(case)
    files = inputs + [(out_name, expected)]
    total = sum(a.nbytes for _, a in files)
    progress = _Progress(total, total > _PROGRESS_OVER)
    try:
        for name, arr in files:
            _write(os.path.join(directory, f"{name}.bin"), arr, progress)
    finally:
        progress.close()
    from . import __version__
    manifest = {
        "operator": case["name"],
        "generator": f"pool_grad {__version__} (pool_grad.golden)",
        "command": _command(case),
        "seed": case["seed"],
        "byte_order": "little",
        "format": case["format"],
        "values": "random (seeded PCG64): sign, 2 exponent bits and every mantissa bit; "
                  "|x| in [0.125, 2)" + ("; indices from the forward max pooling of self"
                                         if "index_dtype" in case else ""),
        "params": case["params"],
        "inputs": [_entry(name, arr, case["format"]) for name, arr in inputs],
        "outputs": [_entry(out_name, expected, case["format"])],
    }
    if "output_size" in case:
        manifest["output_size"] = case["output_size"]
    text = json.dumps(manifest, indent=2)
    # one line per list of numbers (shapes, kernel sizes)
    text = re.sub(r"\[\s+([-\d,\s]*?)\s+\]",
                  lambda m: "[" + ", ".join(t.strip() for t in m.group(1).split(",")) + "]",
                  text)
    path = os.path.join(directory, "manifest.json")
    with open(path + ".tmp", "w") as f:
        f.write(text + "\n")
    os.replace(path + ".tmp", path)   # the manifest appears once every file is complete
    return files, total


def _one_line(exc):
    text = str(exc).replace("\n", " ")
    if isinstance(exc, AclnnError):
        arg = exc.message.split(" ", 1)[0]
        if arg in _OPTION_OF:
            text += f" (from {_OPTION_OF[arg]})"
    return text


def main(argv: list[str] | None = None) -> int:
    """``python -m pool_grad golden``: write a test case's inputs and golden output.

    Parameters
    ----------
    argv : list of str, optional
        The arguments after ``golden`` (default ``sys.argv[1:]``); ``--help`` lists them.

    Returns
    -------
    int
        0 on success; 2 for a bad argument (one line on stderr, no traceback); 1 when
        the files cannot be written.

    Examples
    --------
    >>> import json, os, tempfile
    >>> from pool_grad.golden import main
    >>> d = tempfile.mkdtemp()
    >>> main(["aclnnMaxPool2dWithIndicesBackward", "--shape", "2,8,8,4", "--format",
    ...       "NHWC", "--kernel", "2", "--dtype", "bf16", "--out", d])  # doctest: +ELLIPSIS
    wrote 4 files (... KiB) and manifest.json to ...
    0
    >>> [(e["name"], e["shape"], e["dtype"]) for e in
    ...  json.load(open(os.path.join(d, "manifest.json")))["inputs"]]
    [('gradOutput', [2, 4, 4, 4], 'bfloat16'), ('self', [2, 8, 8, 4], 'bfloat16'),
     ('indices', [2, 4, 4, 4], 'int32')]
    >>> import shutil; shutil.rmtree(d)
    """
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        args = _parser().parse_args(argv)
        case = _resolve(args)
        if os.path.exists(args.out) and not os.path.isdir(args.out):
            raise _UsageError(f"--out must be a directory; {args.out!r} is a file")
    except SystemExit as exc:   # --help
        return exc.code if isinstance(exc.code, int) else 0
    except (_UsageError, UnknownOperatorError, AclnnError) as exc:
        print(f"{PROG}: error: {_one_line(exc)}", file=sys.stderr)
        return 2
    try:
        os.makedirs(args.out, exist_ok=True)
        files, total = _write_case(case, args.out)
    except AclnnError as exc:
        print(f"{PROG}: error: {_one_line(exc)}", file=sys.stderr)
        return 2
    except _UsageError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 2
    except (OSError, MemoryError) as exc:
        print(f"{PROG}: error: cannot write {args.out!r}: {_one_line(exc)}",
              file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
    size = f"{total / 2**20:.1f} MiB" if total >= 2**20 else f"{total / 2**10:.1f} KiB"
    print(f"wrote {len(files)} files ({size}) and manifest.json to {args.out}")
    return 0

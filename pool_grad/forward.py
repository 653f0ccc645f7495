"""Forward companions with PyTorch's CPU semantics, so that the package is self-contained:
the max-pool gradients need the forward's indices, and tests need forwards without torch.
Every forward pools over (D, H, W) with one kernel per kind (a 2-D pooling has D = 1)."""
from typing import Literal, overload

import numpy as np

from . import _kernels, _plan, _threads
from . import _validate as v
from ._errors import invalid
from ._typing import Array, ArrayLike, Ints, OutputSize


def _input(x, ranks, no_zero):
    x = v.as_input(x, "x")
    v.float_dtype(x, "x")
    v.rank(x.shape, ranks, "x")
    if no_zero and 0 in x.shape:
        raise invalid("x", "must not have a zero-size dimension", x.shape)
    return x


def _sizes(output_size, in_sizes):
    n = len(in_sizes)
    v.not_none(output_size, "output_size")
    if isinstance(output_size, (int, np.integer)) and not isinstance(output_size, bool):
        output_size = (output_size,) * n
    try:
        items = list(output_size)
    except TypeError:
        raise invalid("output_size", "must be an int or a sequence of ints",
                      repr(output_size)) from None
    if len(items) != n:
        raise invalid("output_size", f"must have length {n}", items)
    sizes = tuple(s if o is None else v.int_param(o, "output_size")
                  for o, s in zip(items, in_sizes))
    if any(o < 1 for o in sizes):
        raise invalid("output_size", "must be >= 1 on every axis", sizes)
    return sizes


def _run(kernel, x, out_shape, n_spatial, tables, extra):
    """Run a forward kernel into a new C-contiguous output of out_shape."""
    y = np.empty(out_shape, x.dtype)
    x6 = _plan.to6(_plan.storage_view(x), n_spatial)
    y6 = _plan.to6(_plan.storage_view(y), n_spatial)
    nt = _threads.for_work(_threads.get_num_threads(), x.nbytes + y.nbytes,
                           x6.shape[0] * x6.shape[1])
    kernel(x6, y6, _plan.KINDS[x.dtype], tables, extra, nt)
    return y


def _avg_pool(x, n, kernel_size, stride, padding, ceil_mode, count_include_pad,
              divisor_override):
    x = _input(x, (n + 1, n + 2), no_zero=False)
    k, s, p, ceil_mode, count_include_pad, override = v.avg_params(
        kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override, n)
    outs = _plan.avg_output_sizes(x.shape[-n:], k, s, p, ceil_mode)
    wins = [_plan.avg_windows(*a, count_include_pad)
            for a in zip(x.shape[-n:], outs, k, s, p)]
    acc = np.float64 if x.dtype == np.float64 else np.float32
    if override:
        div = np.full(int(np.prod(outs)), override, acc)
    else:
        div = wins[0][2].astype(acc)
        for w in wins[1:]:
            div = np.multiply.outer(div, w[2]).astype(acc)
        div = np.ascontiguousarray(div, acc).ravel()
    tables = (np.zeros(1, np.int64), np.ones(1, np.int64)) * (3 - n) + tuple(
        t for w in wins for t in w[:2])
    return _run(_kernels.avg_forward, x, x.shape[:-n] + outs, n, tables, div)


def avg_pool2d(x: ArrayLike, kernel_size: Ints, stride: Ints | None = None, padding: Ints = 0,
               ceil_mode: bool = False, count_include_pad: bool = True,
               divisor_override: int | None = 0) -> Array:
    """2-D average pooling of a (C, H, W) or (N, C, H, W) array (PyTorch's avg_pool2d).

    Parameters
    ----------
    x : array_like
        float32, float64, float16 or ``ml_dtypes.bfloat16``, any strides.
    kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override
        As in `avg_pool2d_backward`, with the same rules.

    Returns
    -------
    ndarray
        x's dtype, shape ``x.shape[:-2] + (H_out, W_out)``, C-contiguous.

    Examples
    --------
    >>> import numpy as np
    >>> import pool_grad as pg
    >>> x = np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4)
    >>> print(pg.avg_pool2d(x, 2)[0, 0])
    [[ 2.5  4.5]
     [10.5 12.5]]
    """
    return _avg_pool(x, 2, kernel_size, stride, padding, ceil_mode, count_include_pad,
                     divisor_override)


def avg_pool3d(x: ArrayLike, kernel_size: Ints, stride: Ints | None = None, padding: Ints = 0,
               ceil_mode: bool = False, count_include_pad: bool = True,
               divisor_override: int | None = 0) -> Array:
    """3-D average pooling of a (C, D, H, W) or (N, C, D, H, W) array (PyTorch's
    avg_pool3d).

    Parameters
    ----------
    x : array_like
        float32, float64, float16 or ``ml_dtypes.bfloat16``, any strides.
    kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override
        As in `avg_pool3d_backward`, with the same rules.

    Returns
    -------
    ndarray
        x's dtype, shape ``x.shape[:-3] + (D_out, H_out, W_out)``, C-contiguous.

    Examples
    --------
    >>> import numpy as np
    >>> import pool_grad as pg
    >>> x = np.arange(8, dtype=np.float32).reshape(1, 1, 2, 2, 2)
    >>> print(pg.avg_pool3d(x, 2).ravel())
    [3.5]
    """
    return _avg_pool(x, 3, kernel_size, stride, padding, ceil_mode, count_include_pad,
                     divisor_override)


def _adaptive_avg(x, n, output_size):
    x = _input(x, (n + 1, n + 2), no_zero=True)
    outs = _sizes(output_size, x.shape[-n:])
    wins = [_plan.adaptive_windows(i, o) for i, o in zip(x.shape[-n:], outs)]
    acc = np.float64 if x.dtype == np.float64 else np.float32
    div = wins[0][2].astype(acc)
    for w in wins[1:]:
        div = np.multiply.outer(div, w[2].astype(acc))
    div = np.ascontiguousarray(div, acc).ravel()
    tables = (np.zeros(1, np.int64), np.ones(1, np.int64)) * (3 - n) + tuple(
        t for w in wins for t in w[:2])
    return _run(_kernels.avg_forward, x, x.shape[:-n] + outs, n, tables, div)


def adaptive_avg_pool2d(x: ArrayLike, output_size: OutputSize) -> Array:
    """2-D adaptive average pooling of a (C, H, W) or (N, C, H, W) array (PyTorch's
    adaptive_avg_pool2d).

    Parameters
    ----------
    x : array_like
        float32, float64, float16 or ``ml_dtypes.bfloat16``, any strides, no dimension 0.
    output_size : int or sequence of 2 ints or None
        (H_out, W_out), each >= 1; an int for both; None keeps that axis.

    Returns
    -------
    ndarray
        x's dtype, shape ``x.shape[:-2] + output_size``, C-contiguous.

    Examples
    --------
    >>> import numpy as np
    >>> import pool_grad as pg
    >>> x = np.arange(8, dtype=np.float32).reshape(1, 4, 2)
    >>> print(pg.adaptive_avg_pool2d(x, (3, 1))[0])
    [[1.5]
     [3.5]
     [5.5]]
    """
    return _adaptive_avg(x, 2, output_size)


def adaptive_avg_pool3d(x: ArrayLike, output_size: OutputSize) -> Array:
    """3-D adaptive average pooling of a (C, D, H, W) or (N, C, D, H, W) array
    (PyTorch's adaptive_avg_pool3d).

    Parameters
    ----------
    x : array_like
        float32, float64, float16 or ``ml_dtypes.bfloat16``, any strides, no dimension 0.
    output_size : int or sequence of 3 ints or None
        (D_out, H_out, W_out), each >= 1; an int for all three; None keeps that axis.

    Returns
    -------
    ndarray
        x's dtype, shape ``x.shape[:-3] + output_size``, C-contiguous.

    Examples
    --------
    >>> import numpy as np
    >>> import pool_grad as pg
    >>> x = np.arange(8, dtype=np.float32).reshape(1, 2, 2, 2)
    >>> print(pg.adaptive_avg_pool3d(x, (1, 1, 2))[0, 0, 0])
    [3. 4.]
    """
    return _adaptive_avg(x, 3, output_size)


def _max_run(x, n, outs, wins, steps):
    """Window maxima and their flat positions in each (n, c) volume (int64)."""
    tables = (np.zeros(1, np.int64), np.ones(1, np.int64)) * (3 - n) + tuple(
        t for w in wins for t in w[:2]) + ((1,) * (3 - n) + tuple(steps),)
    shape = x.shape[:-n] + outs
    ind = np.empty(shape, np.int64)
    planes = int(np.prod(shape[:-n]))
    y = _run(_kernels.max_forward, x, shape, n, tables,
             ind.reshape(planes, int(np.prod(outs))))
    return y, ind


def _adaptive_max(x, n, output_size, return_indices):
    x = _input(x, (n + 1, n + 2), no_zero=False)
    if 0 in x.shape[-n:]:
        raise invalid("x", "must have non-zero spatial sizes", x.shape)
    outs = _sizes(output_size, x.shape[-n:])
    wins = [_plan.adaptive_windows(i, o) for i, o in zip(x.shape[-n:], outs)]
    y, ind = _max_run(x, n, outs, wins, (1,) * n)
    return (y, ind) if _flag(return_indices) else y


def _flag(value):
    return v.flag(value, "return_indices")


@overload
def adaptive_max_pool2d(x: ArrayLike, output_size: OutputSize,
                        return_indices: Literal[True]) -> tuple[Array, Array]: ...


@overload
def adaptive_max_pool2d(x: ArrayLike, output_size: OutputSize,
                        return_indices: Literal[False] = ...) -> Array: ...


@overload
def adaptive_max_pool2d(x: ArrayLike, output_size: OutputSize,
                        return_indices: bool = ...) -> Array | tuple[Array, Array]: ...


def adaptive_max_pool2d(x: ArrayLike, output_size: OutputSize, return_indices: bool = False
                        ) -> Array | tuple[Array, Array]:
    """2-D adaptive max pooling of a (C, H, W) or (N, C, H, W) array (PyTorch's
    adaptive_max_pool2d).

    Parameters
    ----------
    x : array_like
        float32, float64, float16 or ``ml_dtypes.bfloat16``, any strides, H and W >= 1.
    output_size : int or sequence of 2 ints or None
        (H_out, W_out), each >= 1; an int for both; None keeps that axis.
    return_indices : bool, default False
        Also return the int64 flat positions ``h*W + w`` of the maxima in their planes,
        as `adaptive_max_pool2d_backward` takes them.  A NaN counts as the maximum;
        ties go to the first in row-major order.

    Returns
    -------
    y : ndarray
        x's dtype, shape ``x.shape[:-2] + output_size``, C-contiguous.
    indices : ndarray of int64
        y's shape; only with ``return_indices``.

    Examples
    --------
    >>> import numpy as np
    >>> import pool_grad as pg
    >>> x = np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4)
    >>> y, idx = pg.adaptive_max_pool2d(x, 2, return_indices=True)
    >>> print(y[0, 0]); print(idx[0, 0])
    [[ 5.  7.]
     [13. 15.]]
    [[ 5  7]
     [13 15]]
    """
    return _adaptive_max(x, 2, output_size, return_indices)


@overload
def adaptive_max_pool3d(x: ArrayLike, output_size: OutputSize,
                        return_indices: Literal[True]) -> tuple[Array, Array]: ...


@overload
def adaptive_max_pool3d(x: ArrayLike, output_size: OutputSize,
                        return_indices: Literal[False] = ...) -> Array: ...


@overload
def adaptive_max_pool3d(x: ArrayLike, output_size: OutputSize,
                        return_indices: bool = ...) -> Array | tuple[Array, Array]: ...


def adaptive_max_pool3d(x: ArrayLike, output_size: OutputSize, return_indices: bool = False
                        ) -> Array | tuple[Array, Array]:
    """3-D adaptive max pooling of a (C, D, H, W) or (N, C, D, H, W) array (PyTorch's
    adaptive_max_pool3d).

    Parameters
    ----------
    x : array_like
        float32, float64, float16 or ``ml_dtypes.bfloat16``, any strides, D, H and W >= 1.
    output_size : int or sequence of 3 ints or None
        (D_out, H_out, W_out), each >= 1; an int for all three; None keeps that axis.
    return_indices : bool, default False
        Also return the int64 flat positions ``(d*H + h)*W + w`` of the maxima in their
        volumes, as `adaptive_max_pool3d_backward` takes them (NaN counts as the
        maximum; ties go to the first in row-major order).

    Returns
    -------
    y : ndarray
        x's dtype, shape ``x.shape[:-3] + output_size``, C-contiguous.
    indices : ndarray of int64
        y's shape; only with ``return_indices``.

    Examples
    --------
    >>> import numpy as np
    >>> import pool_grad as pg
    >>> x = np.arange(8, dtype=np.float32).reshape(1, 1, 2, 2, 2)
    >>> y, idx = pg.adaptive_max_pool3d(x, 1, return_indices=True)
    >>> print(y.ravel(), idx.ravel())
    [7.] [7]
    """
    return _adaptive_max(x, 3, output_size, return_indices)


def _max_pool(x, n, kernel_size, stride, padding, dilation, ceil_mode, return_indices):
    x = _input(x, (n + 1, n + 2), no_zero=False)
    if 0 in x.shape[-n - 1:]:
        raise invalid("x", "must have non-zero C and spatial sizes (N may be 0)", x.shape)
    k, s, p, d, ceil_mode = v.max_params(kernel_size, stride, padding, dilation, ceil_mode,
                                         n)
    outs = _plan.avg_output_sizes(x.shape[-n:], k, s, p, ceil_mode, d)
    wins = [_plan.max_windows(*a) for a in zip(x.shape[-n:], outs, k, s, p, d)]
    y, ind = _max_run(x, n, outs, wins, d)
    return (y, ind) if _flag(return_indices) else y


@overload
def max_pool2d(x: ArrayLike, kernel_size: Ints, stride: Ints | None = ...,
               padding: Ints = ..., dilation: Ints = ..., ceil_mode: bool = ..., *,
               return_indices: Literal[True]) -> tuple[Array, Array]: ...


@overload
def max_pool2d(x: ArrayLike, kernel_size: Ints, stride: Ints | None = ...,
               padding: Ints = ..., dilation: Ints = ..., ceil_mode: bool = ...,
               return_indices: Literal[False] = ...) -> Array: ...


@overload
def max_pool2d(x: ArrayLike, kernel_size: Ints, stride: Ints | None = ...,
               padding: Ints = ..., dilation: Ints = ..., ceil_mode: bool = ...,
               return_indices: bool = ...) -> Array | tuple[Array, Array]: ...


def max_pool2d(x: ArrayLike, kernel_size: Ints, stride: Ints | None = None, padding: Ints = 0,
               dilation: Ints = 1, ceil_mode: bool = False, return_indices: bool = False
               ) -> Array | tuple[Array, Array]:
    """2-D max pooling of a (C, H, W) or (N, C, H, W) array (PyTorch's max_pool2d).

    Parameters
    ----------
    x : array_like
        float32, float64, float16 or ``ml_dtypes.bfloat16``, any strides; C, H, W >= 1.
    kernel_size, stride, padding, dilation, ceil_mode
        As in `max_pool2d_with_indices_backward`, with the same rules.
    return_indices : bool, default False
        Also return the int64 flat positions ``h*W + w`` of the maxima in their planes,
        as `max_pool2d_with_indices_backward` takes them.  NaN counts as the maximum;
        ties go to the first position the window visits.

    Returns
    -------
    y : ndarray
        x's dtype, shape ``x.shape[:-2] + (H_out, W_out)``, C-contiguous.
    indices : ndarray of int64
        y's shape; only with ``return_indices``.

    Examples
    --------
    >>> import numpy as np
    >>> import pool_grad as pg
    >>> x = np.arange(12, dtype=np.float32).reshape(1, 1, 4, 3)
    >>> y, idx = pg.max_pool2d(x, 2, return_indices=True)
    >>> print(y[0, 0].ravel(), idx[0, 0].ravel())
    [ 4. 10.] [ 4 10]
    """
    return _max_pool(x, 2, kernel_size, stride, padding, dilation, ceil_mode,
                     return_indices)


@overload
def max_pool3d(x: ArrayLike, kernel_size: Ints, stride: Ints | None = ...,
               padding: Ints = ..., dilation: Ints = ..., ceil_mode: bool = ..., *,
               return_indices: Literal[True]) -> tuple[Array, Array]: ...


@overload
def max_pool3d(x: ArrayLike, kernel_size: Ints, stride: Ints | None = ...,
               padding: Ints = ..., dilation: Ints = ..., ceil_mode: bool = ...,
               return_indices: Literal[False] = ...) -> Array: ...


@overload
def max_pool3d(x: ArrayLike, kernel_size: Ints, stride: Ints | None = ...,
               padding: Ints = ..., dilation: Ints = ..., ceil_mode: bool = ...,
               return_indices: bool = ...) -> Array | tuple[Array, Array]: ...


def max_pool3d(x: ArrayLike, kernel_size: Ints, stride: Ints | None = None, padding: Ints = 0,
               dilation: Ints = 1, ceil_mode: bool = False, return_indices: bool = False
               ) -> Array | tuple[Array, Array]:
    """3-D max pooling of a (C, D, H, W) or (N, C, D, H, W) array (PyTorch's max_pool3d).

    Parameters
    ----------
    x : array_like
        float32, float64, float16 or ``ml_dtypes.bfloat16``, any strides; C, D, H, W >= 1.
    kernel_size, stride, padding, dilation, ceil_mode
        As in `max_pool3d_with_argmax_backward`, except that the forward, like PyTorch's,
        also takes a dilation above 1 (whose indices that backward refuses).
    return_indices : bool, default False
        Also return the int64 flat positions ``(d*H + h)*W + w`` of the maxima in their
        volumes, as `max_pool3d_with_argmax_backward` takes them.

    Returns
    -------
    y : ndarray
        x's dtype, shape ``x.shape[:-3] + (D_out, H_out, W_out)``, C-contiguous.
    indices : ndarray of int64
        y's shape; only with ``return_indices``.

    Examples
    --------
    >>> import numpy as np
    >>> import pool_grad as pg
    >>> x = np.arange(8, dtype=np.float32).reshape(1, 1, 2, 2, 2)
    >>> y, idx = pg.max_pool3d(x, 2, return_indices=True)
    >>> print(y.ravel(), idx.ravel())
    [7.] [7]
    """
    return _max_pool(x, 3, kernel_size, stride, padding, dilation, ceil_mode,
                     return_indices)

"""Forward companions with PyTorch's CPU semantics, so that the package is self-contained:
the max-pool gradient needs the forward's indices, and tests need forwards without torch."""
import numpy as np

from . import _kernels, _plan, _threads
from . import _validate as v
from ._errors import invalid


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
    y = np.empty(out_shape, x.dtype)
    x6 = _plan.to6(_plan.storage_view(x), n_spatial)
    y6 = _plan.to6(_plan.storage_view(y), n_spatial)
    nt = _threads.for_work(_threads.get_num_threads(), x.nbytes + y.nbytes,
                           x6.shape[0] * x6.shape[1])
    kernel(x6, y6, _plan.KINDS[x.dtype], tables, extra, nt)
    return y


def avg_pool2d(x, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=True, divisor_override=0):
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
    x = _input(x, (3, 4), no_zero=False)
    k, s, p, ceil_mode, count_include_pad, override = v.avg_params(
        kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override)
    outs = _plan.avg_output_sizes(x.shape[-2:], k, s, p, ceil_mode)
    hs, he, hf = _plan.avg_windows(x.shape[-2], outs[0], k[0], s[0], p[0], count_include_pad)
    ws, we, wf = _plan.avg_windows(x.shape[-1], outs[1], k[1], s[1], p[1], count_include_pad)
    acc = np.float64 if x.dtype == np.float64 else np.float32
    if override:
        div = np.full(outs[0] * outs[1], override, acc)
    else:
        div = np.multiply.outer(hf, wf).astype(acc).ravel()
    tables = (np.zeros(1, np.int64), np.ones(1, np.int64), hs, he, ws, we)
    return _run(_kernels.avg_forward, x, x.shape[:-2] + outs, 2, tables, div)


def adaptive_avg_pool3d(x, output_size):
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
    x = _input(x, (4, 5), no_zero=True)
    outs = _sizes(output_size, x.shape[-3:])
    wins = [_plan.adaptive_windows(n, o) for n, o in zip(x.shape[-3:], outs)]
    acc = np.float64 if x.dtype == np.float64 else np.float32
    f = [w[2].astype(acc) for w in wins]
    div = (f[0][:, None, None] * f[1][None, :, None] * f[2][None, None, :]).ravel()
    tables = tuple(t for w in wins for t in w[:2])
    return _run(_kernels.avg_forward, x, x.shape[:-3] + outs, 3, tables, div)


def adaptive_max_pool2d(x, output_size, return_indices=False):
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
    x = _input(x, (3, 4), no_zero=False)
    if 0 in x.shape[-2:]:
        raise invalid("x", "must have non-zero H and W", x.shape)
    outs = _sizes(output_size, x.shape[-2:])
    wins = [_plan.adaptive_windows(n, o) for n, o in zip(x.shape[-2:], outs)]
    tables = (np.zeros(1, np.int64), np.ones(1, np.int64)) + tuple(
        t for w in wins for t in w[:2])
    shape = x.shape[:-2] + outs
    ind = np.empty(shape, np.int64)
    planes = int(np.prod(shape[:-2]))
    y = _run(_kernels.max_forward, x, shape, 2, tables, ind.reshape(planes, -1))
    return (y, ind) if return_indices else y

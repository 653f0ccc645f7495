"""The eight pooling-backward functions over dask arrays: gradients larger than memory.

Each function takes the parameters of its namesake in `pool_grad` (no ``out``: the result
is a new lazy array) and returns a ``dask.array.Array`` of x's shape and grad_output's
dtype, built with ``map_blocks``:

- grad_output keeps its chunks over N and C (the leading axes), and the result has the
  same N and C chunks; each spatial axis (D, H, W) is one chunk, rechunked to one where it
  is not (a plane's gradient needs the whole plane);
- indices (max pooling) are rechunked to grad_output's chunks;
- each block is one call of the in-memory function on that block's planes, so the result
  is bitwise the in-memory call's (the kernels are deterministic and plane-independent);
- every rule that does not depend on array values is checked when the graph is built,
  by the same validation as pool_grad's own (on zero-stride stand-ins of the arrays'
  shapes and dtypes: nothing is read or allocated), so a bad call raises pool_grad's
  ``ParamNullptrError`` / ``ParamInvalidError`` (161001 / 161002) at once; an index
  outside its plane raises ``ParamInvalidError`` (161002) when the block is computed.

``n_threads`` is passed to every block's call (None: pool_grad's default, all cores).  The
threaded scheduler runs several blocks at once, so ``n_threads=1`` there (or a
``dask.distributed`` cluster with one thread per worker and ``n_threads`` = its cores)
avoids oversubscribing the cores.

``import pool_grad`` never imports dask; this module needs ``pip install "dask[array]"``
(and ``distributed`` for a cluster).

Examples
--------
>>> import dask.array as da
>>> import numpy as np
>>> import pool_grad.dask as pgd
>>> go = da.ones((8, 16, 2, 2, 2), dtype=np.float32, chunks=(2, 8, 2, 2, 2))
>>> gi = pgd.avg_pool3d_backward(go, (8, 16, 4, 4, 4), kernel_size=2)
>>> gi.chunks[:2], gi.chunksize[2:]
(((2, 2, 2, 2), (8, 8)), (4, 4, 4))
>>> float(gi.sum().compute())
1024.0
"""
try:
    import dask.array as da
except ImportError as _exc:  # pragma: no cover - exercised in a subprocess by the tests
    raise ImportError(
        "pool_grad.dask needs dask.array, which is not installed (or not importable: "
        f"{_exc}); install it with: pip install \"dask[array]\"  (and `pip install "
        "distributed` for a dask.distributed cluster)") from _exc

import numpy as np

from . import _threads
from . import functions as _functions
from . import ops as _ops
from . import _validate as v
from ._errors import ParamInvalidError, invalid
from ._typing import ArrayLike, Ints, XLike

__all__ = [
    "avg_pool2d_backward", "avg_pool3d_backward", "adaptive_avg_pool2d_backward",
    "adaptive_avg_pool3d_backward", "adaptive_max_pool2d_backward",
    "adaptive_max_pool3d_backward", "max_pool2d_with_indices_backward",
    "max_pool3d_with_argmax_backward",
]


# -- validation at graph construction ------------------------------------------------------

class _Validated(Exception):
    """Raised by the stand-in grad_input once every check of the operator has passed."""


class _StandIn(v.NewOutput):
    """grad_input of the right shape and dtype that the operator checks like a new output;
    the operator asks to allocate it only after its last check, and it stops there."""

    def allocate(self, name):
        raise _Validated


def _is_dask(value):
    return isinstance(value, da.Array)


def _is_lazy(value):
    """A dask array, or an array-like that reads on demand (zarr, h5py, ...): wrapped,
    never converted to numpy as a whole."""
    if _is_dask(value):
        return True
    if isinstance(value, np.ndarray):
        return False
    return (isinstance(getattr(value, "dtype", None), np.dtype)
            and isinstance(getattr(value, "shape", None), tuple)
            and hasattr(value, "ndim") and hasattr(value, "__getitem__"))


def _input(value, name):
    """(the array, or an ndarray of it, and a stand-in of its shape and dtype that the
    validation reads without reading the data)."""
    if value is None:
        return None, None
    if not _is_lazy(value):
        arr = v.as_input(value, name)    # lists, tensors: pool_grad's own conversion
        return arr, arr
    shape = tuple(value.shape)
    if any(not isinstance(s, (int, np.integer)) or s != s for s in shape):
        raise invalid(name, "must have known chunk sizes (call .compute_chunk_sizes() "
                      "on it first)", f"shape {shape}")
    return value, np.broadcast_to(np.zeros((), value.dtype), shape)


def _x_input(x):
    """x's stand-in: shapes are passed as they are, arrays by their shape and dtype."""
    if x is None or isinstance(x, (tuple, list)):
        return x
    return _input(x, "x")[1]


def _validate(grad_output, x, indices, n_spatial, make_op, n_threads, max_pool):
    """Run the operator's own checks on stand-ins; returns (grad_output and indices as
    given or converted, x's shape, the dtype, the number of leading (N, C) axes)."""
    if max_pool:
        v.not_none(indices, "indices")
    go, go_meta = _input(grad_output, "grad_output")
    ind, ind_meta = _input(indices, "indices")
    x_meta = _x_input(x)
    v.not_none(go_meta, "grad_output")
    v.not_none(x_meta, "x")
    dt = v.float_dtype(go_meta, "grad_output")
    xs, _ = v.x_shape(x_meta, go_meta, "x")
    try:
        make_op(go_meta, x_meta, ind_meta, _StandIn(xs, dt, zero=False))
    except _Validated:
        pass
    if n_threads is not None:
        _threads.requested(n_threads)   # the same check (and error) as every block's call
    lead = len(xs) - n_spatial
    return go, ind, xs, dt, lead


def _as_dask(arr, chunks):
    if _is_dask(arr):
        return arr
    return da.from_array(arr, chunks=chunks)


def _graph(name, grad_output, x, indices, n_spatial, make_op, params, n_threads,
           max_pool=False):
    """Validate, then the lazy gradient: one in-memory call per (N, C) block."""
    go, ind, xs, dt, lead = _validate(grad_output, x, indices, n_spatial, make_op,
                                      n_threads, max_pool)
    ndim = len(xs)
    go = _as_dask(go, ("auto",) * lead + (-1,) * n_spatial)
    if any(len(c) > 1 for c in go.chunks[lead:]):
        go = go.rechunk({axis: -1 for axis in range(lead, ndim)})
    arrays = [go]
    if ind is not None:
        ind = _as_dask(ind, go.chunks)
        if ind.chunks != go.chunks:
            ind = ind.rechunk(go.chunks)
        arrays.append(ind)
    chunks = go.chunks[:lead] + tuple((s,) for s in xs[lead:])
    return da.map_blocks(_block, *arrays, token=name, chunks=chunks, dtype=dt,
                         meta=np.empty((0,) * ndim, dt), op=name,
                         x_spatial=tuple(xs[lead:]), params=params, n_threads=n_threads)


def _block(grad_output, indices=None, *, op, x_spatial, params, n_threads,
           block_info=None):
    """One block's gradient: the in-memory function on the block's (N, C) planes."""
    fn = getattr(_functions, op)
    x = grad_output.shape[:grad_output.ndim - len(x_spatial)] + x_spatial
    if indices is None:
        return fn(grad_output, x, **params, n_threads=n_threads)
    try:
        return fn(grad_output, x, indices, **params, n_threads=n_threads)
    except ParamInvalidError as exc:
        where = _global_position(indices, x_spatial, block_info)
        if where is None:
            raise
        raise ParamInvalidError(f"{exc.message} (block {where[0]} of the dask array; "
                                f"position {where[1]} of the whole indices)") from None


def _global_position(indices, x_spatial, block_info):
    """(block id, position in the whole indices array) of the block's first bad index."""
    if not block_info or 1 not in block_info:
        return None
    volume = 1
    for s in x_spatial:
        volume *= s
    bad = np.argwhere((indices < 0) | (indices >= volume))
    if not len(bad):
        return None
    info = block_info[1]
    start = [lo for lo, _ in info["array-location"]]
    return (tuple(info["chunk-location"]),
            tuple(int(b) + int(o) for b, o in zip(bad[0], start)))


# -- the eight functions --------------------------------------------------------------------

_DOC = """{summary}

    The dask form of `pool_grad.{name}`: the same parameters, no ``out``;
    the result is lazy.

    Parameters
    ----------
    grad_output : dask.array.Array or array_like
        Chunked over N and C as you like; each spatial axis is rechunked to one chunk.
        A numpy array or a lazy array-like (zarr, h5py) is wrapped with
        ``dask.array.from_array``.
    x : tuple of int, or an array
        The forward input's shape, or an array (numpy or dask) whose shape and dtype are
        used (it is never read).{indices}{extra}
    n_threads : int, optional
        Passed to every block's call (None: pool_grad's default).

    Returns
    -------
    grad_input : dask.array.Array
        x's shape and grad_output's dtype, grad_output's chunks over N and C and one
        chunk per spatial axis; bitwise the in-memory function's result.

    Raises
    ------
    ParamNullptrError, ParamInvalidError
        At once (graph construction) for every rule of the in-memory function that does
        not depend on values, with its message (argument, rule, value); unknown (NaN)
        chunk sizes are 161002 too.{compute_error}
"""

_IDX_DOC = """
    indices : dask.array.Array or array_like of int32 or int64
        grad_output's shape; rechunked to grad_output's chunks."""
_IDX_ERR = """
        An index outside its plane raises ParamInvalidError (161002) when its block is
        computed, naming the block and its position in the whole indices array."""


def _doc(name, summary, max_pool=False, extra=""):
    def deco(fn):
        more = (f"\n    {extra}\n        As in `pool_grad.{name}`; checked when the graph "
                "is built.") if extra else ""
        fn.__doc__ = _DOC.format(summary=summary, name=name, extra=more,
                                 indices=_IDX_DOC if max_pool else "",
                                 compute_error=_IDX_ERR if max_pool else "")
        return fn
    return deco


@_doc("avg_pool2d_backward", "Gradient of 2-D average pooling over dask arrays.",
      extra="kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override, "
            "cube_math_type")
def avg_pool2d_backward(grad_output: ArrayLike, x: XLike, kernel_size: Ints,
                        stride: Ints | None = None, padding: Ints = 0, *,
                        ceil_mode: bool = False, count_include_pad: bool = True,
                        divisor_override: int | None = 0, cube_math_type: int = 0,
                        n_threads: int | None = None) -> "da.Array":
    def _avg_op(go, xx, _ind, gi):
        return _ops.AvgPool2dBackward(go, xx, kernel_size, stride, padding, ceil_mode,
                                      count_include_pad, divisor_override, cube_math_type,
                                      gi)
    params = dict(kernel_size=kernel_size, stride=stride, padding=padding,
                  ceil_mode=ceil_mode, count_include_pad=count_include_pad,
                  divisor_override=divisor_override, cube_math_type=cube_math_type)
    return _graph("avg_pool2d_backward", grad_output, x, None, 2, _avg_op, params,
                  n_threads)


@_doc("avg_pool3d_backward", "Gradient of 3-D average pooling over dask arrays.",
      extra="kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override")
def avg_pool3d_backward(grad_output: ArrayLike, x: XLike, kernel_size: Ints,
                        stride: Ints | None = None, padding: Ints = 0, *,
                        ceil_mode: bool = False, count_include_pad: bool = True,
                        divisor_override: int | None = 0,
                        n_threads: int | None = None) -> "da.Array":
    def _avg_op(go, xx, _ind, gi):
        return _ops.AvgPool3dBackward(go, xx, kernel_size, stride, padding, ceil_mode,
                                      count_include_pad, divisor_override, gi)
    params = dict(kernel_size=kernel_size, stride=stride, padding=padding,
                  ceil_mode=ceil_mode, count_include_pad=count_include_pad,
                  divisor_override=divisor_override)
    return _graph("avg_pool3d_backward", grad_output, x, None, 3, _avg_op, params,
                  n_threads)


@_doc("adaptive_avg_pool2d_backward",
      "Gradient of 2-D adaptive average pooling over dask arrays.")
def adaptive_avg_pool2d_backward(grad_output: ArrayLike, x: XLike, *,
                                 n_threads: int | None = None) -> "da.Array":
    def _adaptive_op(go, xx, _ind, gi):
        return _ops.AdaptiveAvgPool2dBackward(go, xx, gi)
    return _graph("adaptive_avg_pool2d_backward", grad_output, x, None, 2, _adaptive_op,
                  {}, n_threads)


@_doc("adaptive_avg_pool3d_backward",
      "Gradient of 3-D adaptive average pooling over dask arrays.")
def adaptive_avg_pool3d_backward(grad_output: ArrayLike, x: XLike, *,
                                 n_threads: int | None = None) -> "da.Array":
    def _adaptive_op(go, xx, _ind, gi):
        return _ops.AdaptiveAvgPool3dBackward(go, xx, gi)
    return _graph("adaptive_avg_pool3d_backward", grad_output, x, None, 3, _adaptive_op,
                  {}, n_threads)


@_doc("adaptive_max_pool2d_backward",
      "Gradient of 2-D adaptive max pooling over dask arrays.", max_pool=True)
def adaptive_max_pool2d_backward(grad_output: ArrayLike, x: XLike, indices: ArrayLike, *,
                                 n_threads: int | None = None) -> "da.Array":
    def _max_op(go, xx, ind, gi):
        return _ops.AdaptiveMaxPool2dBackward(go, xx, ind, gi)
    return _graph("adaptive_max_pool2d_backward", grad_output, x, indices, 2, _max_op,
                  {}, n_threads, max_pool=True)


@_doc("adaptive_max_pool3d_backward",
      "Gradient of 3-D adaptive max pooling over dask arrays.", max_pool=True)
def adaptive_max_pool3d_backward(grad_output: ArrayLike, x: XLike, indices: ArrayLike, *,
                                 n_threads: int | None = None) -> "da.Array":
    def _max_op(go, xx, ind, gi):
        return _ops.AdaptiveMaxPool3dBackward(go, xx, ind, gi)
    return _graph("adaptive_max_pool3d_backward", grad_output, x, indices, 3, _max_op,
                  {}, n_threads, max_pool=True)


@_doc("max_pool2d_with_indices_backward",
      "Gradient of 2-D max pooling over dask arrays.", max_pool=True,
      extra="kernel_size, stride, padding, dilation, ceil_mode")
def max_pool2d_with_indices_backward(grad_output: ArrayLike, x: XLike, indices: ArrayLike,
                                     kernel_size: Ints, stride: Ints | None = None,
                                     padding: Ints = 0, dilation: Ints = 1, *,
                                     ceil_mode: bool = False,
                                     n_threads: int | None = None) -> "da.Array":
    def _max_op(go, xx, ind, gi):
        return _ops.MaxPool2dWithIndicesBackward(go, xx, ind, kernel_size, stride, padding,
                                                 dilation, ceil_mode, gi)
    params = dict(kernel_size=kernel_size, stride=stride, padding=padding,
                  dilation=dilation, ceil_mode=ceil_mode)
    return _graph("max_pool2d_with_indices_backward", grad_output, x, indices, 2, _max_op,
                  params, n_threads, max_pool=True)


@_doc("max_pool3d_with_argmax_backward",
      "Gradient of 3-D max pooling over dask arrays.", max_pool=True,
      extra="kernel_size, stride, padding, dilation, ceil_mode")
def max_pool3d_with_argmax_backward(grad_output: ArrayLike, x: XLike, indices: ArrayLike,
                                    kernel_size: Ints, stride: Ints | None = None,
                                    padding: Ints = 0, dilation: Ints = 1, *,
                                    ceil_mode: bool = False,
                                    n_threads: int | None = None) -> "da.Array":
    def _max_op(go, xx, ind, gi):
        return _ops.MaxPool3dWithArgmaxBackward(go, xx, ind, kernel_size, stride, padding,
                                                dilation, ceil_mode, gi)
    params = dict(kernel_size=kernel_size, stride=stride, padding=padding,
                  dilation=dilation, ceil_mode=ceil_mode)
    return _graph("max_pool3d_with_argmax_backward", grad_output, x, indices, 3, _max_op,
                  params, n_threads, max_pool=True)

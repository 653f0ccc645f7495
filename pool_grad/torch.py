"""PyTorch integration: pool_grad's kernels as the backward of PyTorch's pooling layers.

Two ways in, both on CPU tensors of float32, float64, float16 and bfloat16:

* autograd functions, one per operator, with `torch.nn.functional`'s signatures::

      y = pool_grad.torch.avg_pool2d(x, 3, stride=2, padding=1)
      y, idx = pool_grad.torch.max_pool2d(x, 3, 2, 1, return_indices=True)

  The forward is PyTorch's own; the backward runs pool_grad on zero-copy numpy views of
  the tensors, straight into the tensor autograd hands on.

* `enable()`, an opt-in switch (a function and a context manager) that registers pool_grad
  through `torch.library` as the CPU kernel of aten's eight pooling-backward operators, so
  that an unchanged model trains with it::

      with pool_grad.torch.enable():
          loss = model(x).sum()
          loss.backward()

  Leaving the block (or `disable()`) puts PyTorch's own kernels back.

Whatever pool_grad cannot take -- tensors that are not on the CPU (CUDA, meta, ...), other
dtypes, a parameter outside pool_grad's rules (dilation > 1 in 3-D max pooling, padding over
half the kernel in a dilated max pooling, ``divisor_override=0``, empty adaptive pooling
inputs, an argmax outside its plane), and double backward (``create_graph=True``) -- is
computed by PyTorch's own kernel: the autograd functions call the aten operator, and
`enable()`'s kernels call the CPU kernel they replaced (`torch.library.get_kernel`).

`call_counts()` says how many backward calls pool_grad computed and how many `enable()`'s
kernels handed back to PyTorch.  float16 and bfloat16 gradients accumulate in float32 and
round once (SPEC section 4), so they can differ from PyTorch's (which rounds at every step)
by a few 16-bit ulps, towards the exact value.

Importing `pool_grad` never imports torch; importing this module does.
"""
try:
    import torch
except ImportError as _exc:  # torch is an optional peer, never a dependency of pool_grad
    raise ImportError(
        "pool_grad.torch needs PyTorch, which is not installed. pool_grad does not depend on "
        "it: install the tested CPU build yourself with `pip install torch==2.13.0` (e.g. "
        "`pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu`). "
        "The rest of pool_grad works without it."
    ) from _exc

import collections
import threading
import warnings

import ml_dtypes
import numpy as np

from . import _threads
from ._errors import AclnnError
from .functions import (adaptive_avg_pool2d_backward, adaptive_avg_pool3d_backward,
                        adaptive_max_pool2d_backward, adaptive_max_pool3d_backward,
                        avg_pool2d_backward, avg_pool3d_backward,
                        max_pool2d_with_indices_backward, max_pool3d_with_argmax_backward)

F = torch.nn.functional

__all__ = [
    "avg_pool2d", "avg_pool3d", "adaptive_avg_pool2d", "adaptive_avg_pool3d",
    "adaptive_max_pool2d", "adaptive_max_pool3d", "max_pool2d", "max_pool3d",
    "AvgPool2dFunction", "AvgPool3dFunction", "AdaptiveAvgPool2dFunction",
    "AdaptiveAvgPool3dFunction", "AdaptiveMaxPool2dFunction", "AdaptiveMaxPool3dFunction",
    "MaxPool2dFunction", "MaxPool3dFunction",
    "enable", "disable", "is_enabled", "call_counts", "reset_call_counts", "ATEN_OPS",
]

#: the aten operators `enable()` takes over on the CPU
ATEN_OPS = (
    "avg_pool2d_backward", "avg_pool3d_backward",
    "_adaptive_avg_pool2d_backward", "_adaptive_avg_pool3d_backward",
    "adaptive_max_pool2d_backward", "adaptive_max_pool3d_backward",
    "max_pool2d_with_indices_backward", "max_pool3d_with_indices_backward",
)

_FLOATS = (torch.float32, torch.float64, torch.float16, torch.bfloat16)
_INDEX_DTYPES = (torch.int64, torch.int32)
_BF16 = np.dtype(ml_dtypes.bfloat16)

_counts = collections.Counter()
_counts_lock = threading.Lock()


def call_counts():
    """Backward calls since the last `reset_call_counts`, as ``{(aten_op, who): count}``:
    ``who`` is ``"pool_grad"`` for a gradient pool_grad computed (through the autograd
    functions or `enable()`), ``"torch"`` for one `enable()`'s kernel handed back to
    PyTorch's own CPU kernel."""
    with _counts_lock:
        return dict(_counts)


def reset_call_counts():
    """Set every `call_counts` entry back to zero."""
    with _counts_lock:
        _counts.clear()


def _count(op, who):
    with _counts_lock:
        _counts[(op, who)] += 1


# -- tensors as numpy arrays ---------------------------------------------------------------

def _plain(t, dtypes):
    """Whether pool_grad can read ``t`` in place: a dense-layout CPU tensor of one of
    ``dtypes`` whose memory numpy can view (any strides, zero ones included)."""
    return (isinstance(t, torch.Tensor) and t.device.type == "cpu"
            and t.layout == torch.strided and t.dtype in dtypes
            and not t.is_neg() and not t.is_conj())


def _as_numpy(t):
    """A zero-copy numpy view of a CPU tensor (bfloat16 through its int16 bits)."""
    t = t.detach()
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().view(_BF16)
    return t.numpy()


def _n_threads():
    # pool_grad.set_num_threads wins; otherwise follow torch.set_num_threads, so that one
    # setting governs the whole training step
    return None if _threads.user_threads() is not None else torch.get_num_threads()


def _pool_grad(op, fn, grad_output, x, indices, args, kwargs):
    """grad_input computed by pool_grad's ``fn``, or None where pool_grad cannot take the
    call (the caller then uses PyTorch's kernel).  grad_input is a new tensor laid out like
    ``x`` (channels-last stays channels-last) that pool_grad writes through a numpy view."""
    if not (_plain(grad_output, _FLOATS) and _plain(x, _FLOATS)
            and grad_output.dtype == x.dtype):
        return None
    if indices is not None and not _plain(indices, _INDEX_DTYPES):
        return None
    grad_input = torch.empty_like(x)
    try:
        go = _as_numpy(grad_output)
        gi = _as_numpy(grad_input)
        idx = () if indices is None else (_as_numpy(indices),)
    except (RuntimeError, TypeError, ValueError):  # memory numpy cannot view
        return None
    try:
        fn(go, tuple(x.shape), *idx, *args, out=gi, n_threads=_n_threads(), **kwargs)
    except AclnnError:  # outside pool_grad's rules: grad_input untouched, use PyTorch's
        return None
    _count(op, "pool_grad")
    return grad_input


def _ints(v, n=None):
    """A parameter as a tuple of ints (an int repeated n times); None stays None."""
    if v is None:
        return None
    if isinstance(v, (int, np.integer)) and not isinstance(v, bool):
        return (int(v),) * (n or 1)
    return tuple(int(e) for e in v)


# -- pool_grad on aten's argument lists (the schemas of ATEN_OPS) ---------------------------
#
# Each takes exactly the arguments of its aten operator and returns grad_input, or None when
# pool_grad cannot take the call.

def _avg_backward(op, fn):
    def run(grad_output, x, kernel_size, stride, padding, ceil_mode, count_include_pad,
            divisor_override):
        if divisor_override == 0:   # pool_grad's "not set"; PyTorch's error: let it raise
            return None
        return _pool_grad(op, fn, grad_output, x, None,
                          (_ints(kernel_size), _ints(stride), _ints(padding)),
                          dict(ceil_mode=bool(ceil_mode),
                               count_include_pad=bool(count_include_pad),
                               divisor_override=0 if divisor_override is None
                               else int(divisor_override)))
    return run


def _adaptive_avg_backward(op, fn):
    def run(grad_output, x):
        return _pool_grad(op, fn, grad_output, x, None, (), {})
    return run


def _adaptive_max_backward(op, fn):
    def run(grad_output, x, indices):
        return _pool_grad(op, fn, grad_output, x, indices, (), {})
    return run


def _max_backward(op, fn):
    def run(grad_output, x, kernel_size, stride, padding, dilation, ceil_mode, indices):
        return _pool_grad(op, fn, grad_output, x, indices,
                          (_ints(kernel_size), _ints(stride), _ints(padding), _ints(dilation)),
                          dict(ceil_mode=bool(ceil_mode)))
    return run


_BACKWARDS = {
    "avg_pool2d_backward": _avg_backward("avg_pool2d_backward", avg_pool2d_backward),
    "avg_pool3d_backward": _avg_backward("avg_pool3d_backward", avg_pool3d_backward),
    "_adaptive_avg_pool2d_backward": _adaptive_avg_backward(
        "_adaptive_avg_pool2d_backward", adaptive_avg_pool2d_backward),
    "_adaptive_avg_pool3d_backward": _adaptive_avg_backward(
        "_adaptive_avg_pool3d_backward", adaptive_avg_pool3d_backward),
    "adaptive_max_pool2d_backward": _adaptive_max_backward(
        "adaptive_max_pool2d_backward", adaptive_max_pool2d_backward),
    "adaptive_max_pool3d_backward": _adaptive_max_backward(
        "adaptive_max_pool3d_backward", adaptive_max_pool3d_backward),
    "max_pool2d_with_indices_backward": _max_backward(
        "max_pool2d_with_indices_backward", max_pool2d_with_indices_backward),
    "max_pool3d_with_indices_backward": _max_backward(
        "max_pool3d_with_indices_backward", max_pool3d_with_argmax_backward),
}


def _backward(op, *args):
    """grad_input of aten operator ``op`` on its arguments: pool_grad's when it can take
    them and no graph of the backward is being recorded, else the aten operator's (which
    dispatches to CUDA, meta, ... and is differentiable for double backward)."""
    grad_output, x = args[0], args[1]
    if not (torch.is_grad_enabled() and (grad_output.requires_grad or x.requires_grad)):
        grad_input = _BACKWARDS[op](*args)
        if grad_input is not None:
            return grad_input
    return getattr(torch.ops.aten, op)(*args)


# -- autograd functions -------------------------------------------------------------------

class AvgPool2dFunction(torch.autograd.Function):
    """2-D average pooling: PyTorch's forward, pool_grad's backward.
    ``apply(x, kernel_size, stride, padding, ceil_mode, count_include_pad,
    divisor_override)`` with tuples of ints (stride ``()`` = the kernel)."""

    _op = "avg_pool2d_backward"

    @staticmethod
    def _forward(x, *params):
        return torch.ops.aten.avg_pool2d(x, *params)

    @classmethod
    def forward(cls, ctx, x, kernel_size, stride, padding, ceil_mode, count_include_pad,
                divisor_override):
        params = (kernel_size, stride, padding, ceil_mode, count_include_pad,
                  divisor_override)
        ctx.save_for_backward(x)
        ctx.params = params
        return cls._forward(x, *params)

    @classmethod
    def backward(cls, ctx, grad_output):
        x, = ctx.saved_tensors
        return (_backward(cls._op, grad_output, x, *ctx.params),) + (None,) * 6


class AvgPool3dFunction(AvgPool2dFunction):
    """3-D average pooling: PyTorch's forward, pool_grad's backward (as AvgPool2dFunction)."""

    _op = "avg_pool3d_backward"

    @staticmethod
    def _forward(x, *params):
        return torch.ops.aten.avg_pool3d(x, *params)


class AdaptiveAvgPool2dFunction(torch.autograd.Function):
    """2-D adaptive average pooling: PyTorch's forward, pool_grad's backward.
    ``apply(x, output_size)``."""

    _op = "_adaptive_avg_pool2d_backward"
    _forward = staticmethod(F.adaptive_avg_pool2d)

    @classmethod
    def forward(cls, ctx, x, output_size):
        ctx.save_for_backward(x)
        return cls._forward(x, output_size)

    @classmethod
    def backward(cls, ctx, grad_output):
        x, = ctx.saved_tensors
        return _backward(cls._op, grad_output, x), None


class AdaptiveAvgPool3dFunction(AdaptiveAvgPool2dFunction):
    """3-D adaptive average pooling: PyTorch's forward, pool_grad's backward."""

    _op = "_adaptive_avg_pool3d_backward"
    _forward = staticmethod(F.adaptive_avg_pool3d)


class AdaptiveMaxPool2dFunction(torch.autograd.Function):
    """2-D adaptive max pooling: PyTorch's forward, pool_grad's backward.
    ``apply(x, output_size)`` returns (output, indices); the indices are int64 flat
    positions in each plane and carry no gradient."""

    _op = "adaptive_max_pool2d_backward"

    @staticmethod
    def _forward(x, output_size):
        return F.adaptive_max_pool2d(x, output_size, return_indices=True)

    @classmethod
    def forward(cls, ctx, x, output_size):
        y, indices = cls._forward(x, output_size)
        ctx.save_for_backward(x, indices)
        ctx.mark_non_differentiable(indices)
        return y, indices

    @classmethod
    def backward(cls, ctx, grad_output, _grad_indices):
        x, indices = ctx.saved_tensors
        return _backward(cls._op, grad_output, x, indices), None


class AdaptiveMaxPool3dFunction(AdaptiveMaxPool2dFunction):
    """3-D adaptive max pooling: PyTorch's forward, pool_grad's backward."""

    _op = "adaptive_max_pool3d_backward"

    @staticmethod
    def _forward(x, output_size):
        return F.adaptive_max_pool3d(x, output_size, return_indices=True)


class MaxPool2dFunction(torch.autograd.Function):
    """2-D max pooling: PyTorch's forward, pool_grad's backward.
    ``apply(x, kernel_size, stride, padding, dilation, ceil_mode)`` with tuples of ints
    returns (output, indices)."""

    _op = "max_pool2d_with_indices_backward"

    @staticmethod
    def _forward(x, *params):
        return torch.ops.aten.max_pool2d_with_indices(x, *params)

    @classmethod
    def forward(cls, ctx, x, kernel_size, stride, padding, dilation, ceil_mode):
        params = (kernel_size, stride, padding, dilation, ceil_mode)
        y, indices = cls._forward(x, *params)
        ctx.save_for_backward(x, indices)
        ctx.params = params
        ctx.mark_non_differentiable(indices)
        return y, indices

    @classmethod
    def backward(cls, ctx, grad_output, _grad_indices):
        x, indices = ctx.saved_tensors
        return (_backward(cls._op, grad_output, x, *ctx.params, indices),) + (None,) * 5


class MaxPool3dFunction(MaxPool2dFunction):
    """3-D max pooling: PyTorch's forward, pool_grad's backward."""

    _op = "max_pool3d_with_indices_backward"

    @staticmethod
    def _forward(x, *params):
        return torch.ops.aten.max_pool3d_with_indices(x, *params)


# -- functional wrappers (torch.nn.functional's signatures) ---------------------------------

def _stride(stride, n):
    return () if stride is None else _ints(stride, n)


def avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=True, divisor_override=None):
    """`torch.nn.functional.avg_pool2d` whose backward is pool_grad's."""
    return AvgPool2dFunction.apply(input, _ints(kernel_size, 2), _stride(stride, 2),
                                   _ints(padding, 2), bool(ceil_mode),
                                   bool(count_include_pad), divisor_override)


def avg_pool3d(input, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=True, divisor_override=None):
    """`torch.nn.functional.avg_pool3d` whose backward is pool_grad's."""
    return AvgPool3dFunction.apply(input, _ints(kernel_size, 3), _stride(stride, 3),
                                   _ints(padding, 3), bool(ceil_mode),
                                   bool(count_include_pad), divisor_override)


def adaptive_avg_pool2d(input, output_size):
    """`torch.nn.functional.adaptive_avg_pool2d` whose backward is pool_grad's."""
    return AdaptiveAvgPool2dFunction.apply(input, output_size)


def adaptive_avg_pool3d(input, output_size):
    """`torch.nn.functional.adaptive_avg_pool3d` whose backward is pool_grad's."""
    return AdaptiveAvgPool3dFunction.apply(input, output_size)


def adaptive_max_pool2d(input, output_size, return_indices=False):
    """`torch.nn.functional.adaptive_max_pool2d` whose backward is pool_grad's."""
    y, indices = AdaptiveMaxPool2dFunction.apply(input, output_size)
    return (y, indices) if return_indices else y


def adaptive_max_pool3d(input, output_size, return_indices=False):
    """`torch.nn.functional.adaptive_max_pool3d` whose backward is pool_grad's."""
    y, indices = AdaptiveMaxPool3dFunction.apply(input, output_size)
    return (y, indices) if return_indices else y


def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    """`torch.nn.functional.max_pool2d` whose backward is pool_grad's."""
    y, indices = MaxPool2dFunction.apply(input, _ints(kernel_size, 2), _stride(stride, 2),
                                         _ints(padding, 2), _ints(dilation, 2),
                                         bool(ceil_mode))
    return (y, indices) if return_indices else y


def max_pool3d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    """`torch.nn.functional.max_pool3d` whose backward is pool_grad's."""
    y, indices = MaxPool3dFunction.apply(input, _ints(kernel_size, 3), _stride(stride, 3),
                                         _ints(padding, 3), _ints(dilation, 3),
                                         bool(ceil_mode))
    return (y, indices) if return_indices else y


# -- enable(): pool_grad as aten's CPU kernels ----------------------------------------------

_lock = threading.RLock()
_library = None      # the torch.library.Library holding the registrations, while enabled
_depth = 0           # open enable() handles
_generation = 0      # bumped by disable(): handles from before it no longer count


def _aten_kernel(op, original):
    """The CPU kernel registered for aten ``op``: pool_grad, else ``original`` (the CPU
    kernel it replaced, called with the dispatcher's key set)."""
    compute = _BACKWARDS[op]

    def kernel(keyset, *args, **kwargs):
        grad_input = None if kwargs else compute(*args)
        if grad_input is None:
            _count(op, "torch")
            return original.call_boxed(keyset, *args, **kwargs)
        return grad_input
    kernel.__name__ = f"pool_grad_{op.lstrip('_')}"
    return kernel


def _register():
    get_kernel = getattr(torch.library, "get_kernel", None)
    if get_kernel is None:
        raise RuntimeError(
            f"pool_grad.torch.enable() needs torch.library.get_kernel (PyTorch >= 2.9) to "
            f"keep PyTorch's own kernels for the calls pool_grad cannot take; this is "
            f"torch {torch.__version__}. Use the autograd functions of pool_grad.torch "
            f"instead, or pip install torch==2.13.0.")
    library = torch.library.Library("aten", "IMPL")
    try:
        with warnings.catch_warnings():
            # "Overriding a previously registered kernel": that is the point
            warnings.filterwarnings("ignore", message=r"(?s).*Overriding a previously registered")
            for op in ATEN_OPS:
                original = get_kernel(f"aten::{op}", "CPU")
                library.impl(op, _aten_kernel(op, original), "CPU", with_keyset=True)
    except BaseException:
        library._destroy()
        raise
    return library


def _unregister():
    global _library
    if _library is not None:
        _library._destroy()   # restores the kernels registered before ours
        _library = None


class enable:
    """Register pool_grad as the CPU kernel of aten's pooling backward operators
    (`ATEN_OPS`), so that unchanged models compute their pooling gradients with it.

    ``enable()`` switches it on at once; as a context manager, leaving the block undoes
    that call again::

        with pool_grad.torch.enable():
            model(x).sum().backward()     # pool_grad's kernels
        model(x).sum().backward()         # PyTorch's own again

    Calls nest (the kernels stay until the outermost open block closes), and `disable()`
    switches everything off at once.  Calls pool_grad cannot take (other devices and
    dtypes, parameters outside its rules) run PyTorch's own CPU kernel.  Registration is
    process-wide: it applies to every Python thread.
    """

    def __init__(self):
        global _library, _depth
        with _lock:
            if _library is None:
                _library = _register()
                _depth = 0
            _depth += 1
            self._generation = _generation
            self._open = True

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        """Undo this `enable()` call (once; later calls do nothing)."""
        global _depth
        with _lock:
            if not self._open:
                return
            self._open = False
            if self._generation != _generation:   # a disable() came in between
                return
            _depth -= 1
            if _depth == 0:
                _unregister()


def disable():
    """Put PyTorch's own pooling-backward kernels back, whatever `enable()` calls are
    still open (closing those later does nothing)."""
    global _depth, _generation
    with _lock:
        _unregister()
        _depth = 0
        _generation += 1


def is_enabled():
    """Whether pool_grad's kernels are registered (see `enable`)."""
    return _library is not None

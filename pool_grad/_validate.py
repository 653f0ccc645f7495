"""Validation of every argument, shared by all operators (SPEC section 3).

Each check raises the aclnn error the SPEC assigns, with a message that names the
argument, the rule and the offending value.  Nothing here looks at array *values*.
"""
import operator
import os

import numpy as np
import ml_dtypes

from ._errors import ParamNullptrError, invalid

BFLOAT16 = np.dtype(ml_dtypes.bfloat16)
FLOAT_DTYPES = (np.dtype(np.float32), np.dtype(np.float64), np.dtype(np.float16), BFLOAT16)
INDEX_DTYPES = (np.dtype(np.int32), np.dtype(np.int64))
_DTYPE_NAMES = "float32, float64, float16 or bfloat16"


def not_none(value, name):
    if value is None:
        raise ParamNullptrError(f"{name} must not be None (a null pointer in aclnn)")
    return value


def as_input(value, name):
    """An input array: converted with np.asarray, so lists and CPU tensors work."""
    not_none(value, name)
    if isinstance(value, np.ndarray):
        arr = value
    else:
        try:
            arr = np.asarray(value)
        except Exception as exc:  # ragged lists, objects numpy cannot read
            raise invalid(name, "must be convertible to a numpy array",
                          f"{type(value).__name__} ({exc})") from None
    if not arr.flags.aligned:
        arr = np.require(arr, requirements="A")
    return arr


def physical_memory():
    """Bytes of RAM of this machine (the bound for anything pool_grad allocates)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 2**40


def memory_fits(nbytes, name, what):
    """161002 at planning, before allocating, for what could never fit in memory."""
    limit = physical_memory()
    if nbytes > limit:
        raise invalid(name, f"needs {what} of {nbytes} bytes, more than this machine's "
                      f"memory ({limit} bytes)", nbytes)


class NewOutput:
    """grad_input still to be allocated (by the functions): its allocation waits until
    every check has passed, so a call that is refused allocates nothing."""

    def __init__(self, shape, dtype, zero):
        self.shape, self.dtype, self.zero = tuple(shape), np.dtype(dtype), zero

    def allocate(self, name):
        n = self.dtype.itemsize
        for d in self.shape:
            n *= d
        memory_fits(n, name, "a new grad_input")
        try:
            return (np.zeros if self.zero else np.empty)(self.shape, self.dtype)
        except (ValueError, MemoryError) as exc:  # numpy's own size limits
            raise invalid(name, "cannot be allocated", f"shape {self.shape} ({exc})") \
                from None


def materialize(out, name):
    return out.allocate(name) if isinstance(out, NewOutput) else out


def as_output(value, name):
    """The output array: a real, writeable, aligned numpy array that does not overlap
    itself (written in place, so never converted)."""
    not_none(value, name)
    if isinstance(value, NewOutput):
        return value
    if not isinstance(value, np.ndarray):
        raise invalid(name, "must be a writeable numpy.ndarray", type(value).__name__)
    if not value.flags.writeable:
        raise invalid(name, "must be writeable", "a read-only array")
    if not value.flags.aligned:
        raise invalid(name, "must be aligned to its dtype", f"strides {value.strides}")
    if has_internal_overlap(value):
        raise invalid(name, "must not overlap itself (zero or overlapping strides)",
                      f"shape {value.shape} strides {value.strides}")
    return value


def has_internal_overlap(arr):
    """Conservative: True unless the strides provably map every index to its own bytes.

    Sorting the axes by |stride|, each stride must step over the whole extent of the
    smaller ones; layouts that interleave in stranger ways are reported as overlapping.
    """
    if arr.size == 0:
        return False
    extent = arr.itemsize
    axes = sorted((abs(t), s) for s, t in zip(arr.shape, arr.strides) if s > 1)
    for stride, size in axes:
        if stride < extent:
            return True
        extent = stride * (size - 1) + extent
    return False


def check_no_overlap(out, other, out_name, other_name):
    if other is None or isinstance(out, NewOutput) or not np.may_share_memory(out, other):
        return
    try:
        overlap = np.shares_memory(out, other, max_work=1 << 20)
    except np.exceptions.TooHardError:
        overlap = True
    if overlap:
        raise invalid(out_name, f"must not overlap {other_name}", "arrays sharing memory")


def float_dtype(arr, name):
    dt = arr.dtype
    if not isinstance(dt, np.dtype) or (dt not in FLOAT_DTYPES
                                        and dt.newbyteorder("=") not in FLOAT_DTYPES):
        raise invalid(name, f"dtype must be {_DTYPE_NAMES}", str(dt))
    if not dt.isnative:   # e.g. >f4 on a little-endian machine
        raise invalid(name, "must be in the machine's byte order", str(dt))
    return dt


def same_dtype(dt, other, name, ref_name):
    if other != dt:
        raise invalid(name, f"dtype must equal {ref_name}'s dtype {dt}", str(other))


def index_dtype(arr, name):
    dt = arr.dtype
    if dt not in INDEX_DTYPES or not dt.isnative:
        raise invalid(name, "dtype must be int32 or int64 (native byte order)", str(dt))


def rank(shape, allowed, name):
    if len(shape) not in allowed:
        want = " or ".join(str(r) for r in allowed)
        raise invalid(name, f"must have {want} dimensions", f"{len(shape)}-D shape {shape}")


def x_shape(x, grad_output, name="x"):
    """The forward input's shape and dtype: x is an array, or a shape (then its dtype is
    grad_output's)."""
    not_none(x, name)
    if isinstance(x, (tuple, list)) and all(_is_int(v) for v in x):
        shape = tuple(operator.index(v) for v in x)
        if any(v < 0 for v in shape):
            raise invalid(name, "shape must not have negative sizes", shape)
        return shape, grad_output.dtype
    arr = as_input(x, name)
    return arr.shape, float_dtype(arr, name)


def _is_int(v):
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


def int_param(v, name):
    """An integer that fits aclnn's int64."""
    if not _is_int(v):
        raise invalid(name, "must be an integer", repr(v))
    v = operator.index(v)
    if not -2**63 <= v < 2**63:
        raise invalid(name, "must fit in int64", v)
    return v


def int_tuple(value, name, lengths, empty=None):
    """An int or a sequence of ints of an allowed length, as a tuple of the longest
    allowed length (one value repeated on every axis)."""
    n = max(lengths)
    if _is_int(value):
        value = int_param(value, name)
        return (value,) * n
    if isinstance(value, np.ndarray) and value.ndim == 1:
        value = value.tolist()
    if not isinstance(value, (list, tuple, range)):
        # sets and dicts have no order, bytes are not integers, iterators are used up
        raise invalid(name, "must be an integer or a list or tuple of integers",
                      repr(value))
    items = list(value)
    if len(items) == 0 and empty is not None:
        return empty
    if len(items) not in lengths:
        want = " or ".join(str(n) for n in lengths)
        raise invalid(name, f"must have length {want}", f"length {len(items)}: {items!r}")
    vals = tuple(int_param(v, name) for v in items)
    return vals * n if len(vals) == 1 else vals


def flag(value, name):
    if isinstance(value, (bool, np.bool_)) or (_is_int(value) and value in (0, 1)):
        return bool(value)
    raise invalid(name, "must be a bool", repr(value))


def n_c_match(shape, x_shape_, n_spatial, name, x_name="x"):
    """The leading (N,) C dimensions of an array equal x's."""
    lead = len(x_shape_) - n_spatial
    if tuple(shape[:lead]) != tuple(x_shape_[:lead]):
        raise invalid(name, f"leading (N, C) dimensions must equal {x_name}'s "
                      f"{x_shape_[:lead]}", shape[:lead])


def window_params(kernel_size, stride, padding, n):
    """Normalised (kernel, stride, padding) of a pooling over n = 2 or 3 axes: each an int
    or of length 1 or n (stride also None or empty: the kernel), kernel > 0, stride > 0,
    0 <= padding <= kernel/2."""
    not_none(kernel_size, "kernel_size")
    not_none(padding, "padding")
    k = int_tuple(kernel_size, "kernel_size", (1, n))
    s = int_tuple(k if stride is None else stride, "stride", (1, n), empty=k)
    p = int_tuple(padding, "padding", (1, n))
    for axis, (kk, ss, pp) in enumerate(zip(k, s, p)):
        ax = "DHW"[3 - n + axis]
        if kk <= 0:
            raise invalid("kernel_size", f"must be > 0 (k{ax})", k)
        if ss <= 0:
            raise invalid("stride", f"must be > 0 (s{ax})", s)
        if pp < 0:
            raise invalid("padding", f"must be >= 0 (p{ax})", p)
        if 2 * pp > kk:
            raise invalid("padding", f"must be at most half the kernel "
                          f"(p{ax} <= k{ax}/2 = {kk / 2:g})", p)
    return k, s, p


def avg_params(kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override,
               n=2):
    """Normalised (kernel, stride, padding) tuples, flags and divisor of average pooling
    over n axes."""
    k, s, p = window_params(kernel_size, stride, padding, n)
    ceil_mode = flag(ceil_mode, "ceil_mode")
    count_include_pad = flag(count_include_pad, "count_include_pad")
    override = 0 if divisor_override is None else int_param(divisor_override,
                                                            "divisor_override")
    return k, s, p, ceil_mode, count_include_pad, override


def max_params(kernel_size, stride, padding, dilation, ceil_mode, n, unit_dilation=False):
    """Normalised (kernel, stride, padding, dilation) tuples and ceil_mode of max pooling
    over n axes; dilation an int or of length 1 or n, each >= 1 (all 1 with
    unit_dilation: MaxPool3dWithArgmax supports no other)."""
    k, s, p = window_params(kernel_size, stride, padding, n)
    not_none(dilation, "dilation")
    d = int_tuple(dilation, "dilation", (1, n))
    for axis, dd in enumerate(d):
        ax = "DHW"[3 - n + axis]
        if dd < 1:
            raise invalid("dilation", f"must be >= 1 (d{ax})", d)
        if unit_dilation and dd != 1:
            raise invalid("dilation", f"must be 1 on every axis (d{ax}; the operator "
                          "supports no other)", d)
    return k, s, p, d, flag(ceil_mode, "ceil_mode")

"""Type aliases of the public API (PEP 561: the package ships ``py.typed``)."""
from typing import Any, Sequence, Union

from numpy.typing import ArrayLike, NDArray

#: an ndarray of any dtype (the float dtypes pool_grad takes, or int32/int64 indices)
Array = NDArray[Any]
#: an int, or a sequence of ints (kernel_size, stride, padding, dilation)
Ints = Union[int, Sequence[int]]
#: the forward input: an array (its shape and dtype are used), or its shape
XLike = Union[ArrayLike, Sequence[int]]
#: an output size: an int for every axis, or one per axis (None keeps that axis)
OutputSize = Union[int, Sequence[Union[int, None]]]

__all__ = ["Any", "Array", "ArrayLike", "Ints", "OutputSize", "XLike"]

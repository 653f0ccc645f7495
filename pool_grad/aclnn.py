"""aclnn-named layer, for porting C++ aclnn code line by line (SPEC section 2.3).

``...GetWorkspaceSize`` validates and plans, returning ``(workspace_size, executor)``;
the operator call runs the executor and returns ACLNN_SUCCESS.  Where C returns an error
status, these functions raise the matching AclnnError (its ``.code`` is the status).
The executor is pool_grad's two-phase object (`pool_grad.AvgPool2dBackward`, ...); the
stream argument is None (run now) or a `pool_grad.Stream`.

>>> import numpy as np
>>> from pool_grad import aclnn
>>> go = np.ones((1, 16, 1, 1), np.float32)
>>> gi = np.empty((1, 16, 4, 4), np.float32)
>>> ws_size, executor = aclnn.aclnnAvgPool2dBackwardGetWorkspaceSize(
...     go, gi.shape, [4, 4], [1, 1], [0, 0], False, True, 0, 0, gi)
>>> aclnn.aclnnAvgPool2dBackward(np.empty(ws_size, np.uint8), ws_size, executor, None)
0
>>> float(gi[0, 0, 0, 0])
0.0625
"""
from ._errors import ACLNN_SUCCESS, invalid
from ._stream import Stream
from ._typing import Any, Array, ArrayLike, Ints, XLike
from .ops import (AdaptiveAvgPool2dBackward, AdaptiveAvgPool3dBackward,
                  AdaptiveMaxPool2dBackward, AdaptiveMaxPool3dBackward, AvgPool2dBackward,
                  AvgPool3dBackward, MaxPool2dWithIndicesBackward, MaxPool3dWithArgmaxBackward)

__all__ = [
    "aclnnAvgPool2dBackwardGetWorkspaceSize", "aclnnAvgPool2dBackward",
    "aclnnAvgPool3dBackwardGetWorkspaceSize", "aclnnAvgPool3dBackward",
    "aclnnAdaptiveAvgPool2dBackwardGetWorkspaceSize", "aclnnAdaptiveAvgPool2dBackward",
    "aclnnAdaptiveAvgPool3dBackwardGetWorkspaceSize", "aclnnAdaptiveAvgPool3dBackward",
    "aclnnAdaptiveMaxPool2dBackwardGetWorkspaceSize", "aclnnAdaptiveMaxPool2dBackward",
    "aclnnAdaptiveMaxPool3dBackwardGetWorkspaceSize", "aclnnAdaptiveMaxPool3dBackward",
    "aclnnMaxPool2dWithIndicesBackwardGetWorkspaceSize", "aclnnMaxPool2dWithIndicesBackward",
    "aclnnMaxPool3dWithArgmaxBackwardGetWorkspaceSize", "aclnnMaxPool3dWithArgmaxBackward",
]


def _launch(kind, workspace, workspace_size, executor, stream):
    if not isinstance(executor, kind):
        raise invalid("executor", f"must come from {kind.__name__}'s GetWorkspaceSize",
                      type(executor).__name__)
    if workspace_size is None or workspace_size < executor.workspace_size:
        raise invalid("workspaceSize", f"must be at least {executor.workspace_size}",
                      workspace_size)
    if workspace is None and executor.workspace_size:
        raise invalid("workspace", "must not be None when workspaceSize > 0", None)
    executor.execute(workspace=workspace, stream=stream)
    return ACLNN_SUCCESS


def aclnnAvgPool2dBackwardGetWorkspaceSize(gradOutput: ArrayLike, self: XLike,
                                           kernelSize: Ints, stride: Ints | None,
                                           padding: Ints, ceilMode: bool,
                                           countIncludePad: bool,
                                           divisorOverride: int | None, cubeMathType: int,
                                           gradInput: Array
                                           ) -> tuple[int, AvgPool2dBackward]:
    """Validate and plan (`pool_grad.AvgPool2dBackward`'s arguments, C order and
    names); returns ``(workspace_size, executor)``."""
    op = AvgPool2dBackward(gradOutput, self, kernelSize, stride, padding, ceilMode,
                           countIncludePad, divisorOverride, cubeMathType, gradInput)
    return op.workspace_size, op


def aclnnAvgPool2dBackward(workspace: Any, workspaceSize: int, executor: AvgPool2dBackward,
                           stream: Stream | None) -> int:
    """Run the executor into its gradInput; returns ACLNN_SUCCESS (0)."""
    return _launch(AvgPool2dBackward, workspace, workspaceSize, executor, stream)


def aclnnAdaptiveAvgPool3dBackwardGetWorkspaceSize(gradOutput: ArrayLike, self: XLike,
                                                   out: Array
                                                   ) -> tuple[int, AdaptiveAvgPool3dBackward]:
    """Validate and plan (`pool_grad.AdaptiveAvgPool3dBackward`'s arguments); returns
    ``(workspace_size, executor)``."""
    op = AdaptiveAvgPool3dBackward(gradOutput, self, out)
    return op.workspace_size, op


def aclnnAdaptiveAvgPool3dBackward(workspace: Any, workspaceSize: int,
                                   executor: AdaptiveAvgPool3dBackward,
                                   stream: Stream | None) -> int:
    """Run the executor into its out; returns ACLNN_SUCCESS (0)."""
    return _launch(AdaptiveAvgPool3dBackward, workspace, workspaceSize, executor, stream)


def aclnnAdaptiveMaxPool2dBackwardGetWorkspaceSize(gradOutput: ArrayLike, self: XLike,
                                                   indices: ArrayLike, gradInput: Array
                                                   ) -> tuple[int, AdaptiveMaxPool2dBackward]:
    """Validate and plan (`pool_grad.AdaptiveMaxPool2dBackward`'s arguments); returns
    ``(workspace_size, executor)``."""
    op = AdaptiveMaxPool2dBackward(gradOutput, self, indices, gradInput)
    return op.workspace_size, op


def aclnnAdaptiveMaxPool2dBackward(workspace: Any, workspaceSize: int,
                                   executor: AdaptiveMaxPool2dBackward,
                                   stream: Stream | None) -> int:
    """Run the executor into its gradInput (an index outside its plane raises
    ParamInvalidError, 161002, and writes nothing); returns ACLNN_SUCCESS (0)."""
    return _launch(AdaptiveMaxPool2dBackward, workspace, workspaceSize, executor, stream)


def aclnnAvgPool3dBackwardGetWorkspaceSize(gradOutput: ArrayLike, self: XLike,
                                           kernelSize: Ints, stride: Ints | None,
                                           padding: Ints, ceilMode: bool,
                                           countIncludePad: bool,
                                           divisorOverride: int | None, output: Array
                                           ) -> tuple[int, AvgPool3dBackward]:
    """Validate and plan (`pool_grad.AvgPool3dBackward`'s arguments, C order and
    names); returns ``(workspace_size, executor)``."""
    op = AvgPool3dBackward(gradOutput, self, kernelSize, stride, padding, ceilMode,
                           countIncludePad, divisorOverride, output)
    return op.workspace_size, op


def aclnnAvgPool3dBackward(workspace: Any, workspaceSize: int, executor: AvgPool3dBackward,
                           stream: Stream | None) -> int:
    """Run the executor into its output; returns ACLNN_SUCCESS (0)."""
    return _launch(AvgPool3dBackward, workspace, workspaceSize, executor, stream)


def aclnnAdaptiveAvgPool2dBackwardGetWorkspaceSize(gradOutput: ArrayLike, self: XLike,
                                                   out: Array
                                                   ) -> tuple[int, AdaptiveAvgPool2dBackward]:
    """Validate and plan (`pool_grad.AdaptiveAvgPool2dBackward`'s arguments); returns
    ``(workspace_size, executor)``."""
    op = AdaptiveAvgPool2dBackward(gradOutput, self, out)
    return op.workspace_size, op


def aclnnAdaptiveAvgPool2dBackward(workspace: Any, workspaceSize: int,
                                   executor: AdaptiveAvgPool2dBackward,
                                   stream: Stream | None) -> int:
    """Run the executor into its out; returns ACLNN_SUCCESS (0)."""
    return _launch(AdaptiveAvgPool2dBackward, workspace, workspaceSize, executor, stream)


def aclnnAdaptiveMaxPool3dBackwardGetWorkspaceSize(gradOutput: ArrayLike, self: XLike,
                                                   indices: ArrayLike, gradInput: Array
                                                   ) -> tuple[int, AdaptiveMaxPool3dBackward]:
    """Validate and plan (`pool_grad.AdaptiveMaxPool3dBackward`'s arguments); returns
    ``(workspace_size, executor)``."""
    op = AdaptiveMaxPool3dBackward(gradOutput, self, indices, gradInput)
    return op.workspace_size, op


def aclnnAdaptiveMaxPool3dBackward(workspace: Any, workspaceSize: int,
                                   executor: AdaptiveMaxPool3dBackward,
                                   stream: Stream | None) -> int:
    """Run the executor into its gradInput (an index outside its volume raises
    ParamInvalidError, 161002, and writes nothing); returns ACLNN_SUCCESS (0)."""
    return _launch(AdaptiveMaxPool3dBackward, workspace, workspaceSize, executor, stream)


def aclnnMaxPool2dWithIndicesBackwardGetWorkspaceSize(gradOutput: ArrayLike, self: XLike,
                                                      indices: ArrayLike, kernelSize: Ints,
                                                      stride: Ints | None, padding: Ints,
                                                      dilation: Ints, ceilMode: bool,
                                                      gradInput: Array
                                                      ) -> tuple[int, MaxPool2dWithIndicesBackward]:
    """Validate and plan (`pool_grad.MaxPool2dWithIndicesBackward`'s arguments); returns
    ``(workspace_size, executor)``."""
    op = MaxPool2dWithIndicesBackward(gradOutput, self, indices, kernelSize, stride, padding,
                                      dilation, ceilMode, gradInput)
    return op.workspace_size, op


def aclnnMaxPool2dWithIndicesBackward(workspace: Any, workspaceSize: int,
                                      executor: MaxPool2dWithIndicesBackward,
                                      stream: Stream | None) -> int:
    """Run the executor into its gradInput (an index outside its plane raises
    ParamInvalidError, 161002, and writes nothing); returns ACLNN_SUCCESS (0)."""
    return _launch(MaxPool2dWithIndicesBackward, workspace, workspaceSize, executor, stream)


def aclnnMaxPool3dWithArgmaxBackwardGetWorkspaceSize(gradOutput: ArrayLike, self: XLike,
                                                     indices: ArrayLike, kernelSize: Ints,
                                                     stride: Ints | None, padding: Ints,
                                                     dilation: Ints, ceilMode: bool,
                                                     gradInput: Array
                                                     ) -> tuple[int, MaxPool3dWithArgmaxBackward]:
    """Validate and plan (`pool_grad.MaxPool3dWithArgmaxBackward`'s arguments); returns
    ``(workspace_size, executor)``."""
    op = MaxPool3dWithArgmaxBackward(gradOutput, self, indices, kernelSize, stride, padding,
                                     dilation, ceilMode, gradInput)
    return op.workspace_size, op


def aclnnMaxPool3dWithArgmaxBackward(workspace: Any, workspaceSize: int,
                                     executor: MaxPool3dWithArgmaxBackward,
                                     stream: Stream | None) -> int:
    """Run the executor into its gradInput (an index outside its volume raises
    ParamInvalidError, 161002, and writes nothing); returns ACLNN_SUCCESS (0)."""
    return _launch(MaxPool3dWithArgmaxBackward, workspace, workspaceSize, executor, stream)

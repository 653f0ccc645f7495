"""aclnn-named layer, for porting C++ aclnn code line by line (SPEC section 2.3).

``...GetWorkspaceSize`` validates and plans, returning ``(workspace_size, executor)``;
the operator call runs the executor and returns ACLNN_SUCCESS.  Where C returns an error
status, these functions raise the matching AclnnError (its ``.code`` is the status).
The executor is the two-phase object of `pool_grad` (`AvgPool2dBackward`, ...); the
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


def aclnnAvgPool2dBackwardGetWorkspaceSize(gradOutput, self, kernelSize, stride, padding,
                                           ceilMode, countIncludePad, divisorOverride,
                                           cubeMathType, gradInput):
    """Validate and plan (`AvgPool2dBackward`'s arguments, C order and names); returns
    ``(workspace_size, executor)``."""
    op = AvgPool2dBackward(gradOutput, self, kernelSize, stride, padding, ceilMode,
                           countIncludePad, divisorOverride, cubeMathType, gradInput)
    return op.workspace_size, op


def aclnnAvgPool2dBackward(workspace, workspaceSize, executor, stream):
    """Run the executor into its gradInput; returns ACLNN_SUCCESS (0)."""
    return _launch(AvgPool2dBackward, workspace, workspaceSize, executor, stream)


def aclnnAdaptiveAvgPool3dBackwardGetWorkspaceSize(gradOutput, self, out):
    """Validate and plan (`AdaptiveAvgPool3dBackward`'s arguments); returns
    ``(workspace_size, executor)``."""
    op = AdaptiveAvgPool3dBackward(gradOutput, self, out)
    return op.workspace_size, op


def aclnnAdaptiveAvgPool3dBackward(workspace, workspaceSize, executor, stream):
    """Run the executor into its out; returns ACLNN_SUCCESS (0)."""
    return _launch(AdaptiveAvgPool3dBackward, workspace, workspaceSize, executor, stream)


def aclnnAdaptiveMaxPool2dBackwardGetWorkspaceSize(gradOutput, self, indices, gradInput):
    """Validate and plan (`AdaptiveMaxPool2dBackward`'s arguments); returns
    ``(workspace_size, executor)``."""
    op = AdaptiveMaxPool2dBackward(gradOutput, self, indices, gradInput)
    return op.workspace_size, op


def aclnnAdaptiveMaxPool2dBackward(workspace, workspaceSize, executor, stream):
    """Run the executor into its gradInput (an index outside its plane raises
    ParamInvalidError, 161002, and writes nothing); returns ACLNN_SUCCESS (0)."""
    return _launch(AdaptiveMaxPool2dBackward, workspace, workspaceSize, executor, stream)


def aclnnAvgPool3dBackwardGetWorkspaceSize(gradOutput, self, kernelSize, stride, padding,
                                           ceilMode, countIncludePad, divisorOverride,
                                           output):
    """Validate and plan (`AvgPool3dBackward`'s arguments, C order and names); returns
    ``(workspace_size, executor)``."""
    op = AvgPool3dBackward(gradOutput, self, kernelSize, stride, padding, ceilMode,
                           countIncludePad, divisorOverride, output)
    return op.workspace_size, op


def aclnnAvgPool3dBackward(workspace, workspaceSize, executor, stream):
    """Run the executor into its output; returns ACLNN_SUCCESS (0)."""
    return _launch(AvgPool3dBackward, workspace, workspaceSize, executor, stream)


def aclnnAdaptiveAvgPool2dBackwardGetWorkspaceSize(gradOutput, self, out):
    """Validate and plan (`AdaptiveAvgPool2dBackward`'s arguments); returns
    ``(workspace_size, executor)``."""
    op = AdaptiveAvgPool2dBackward(gradOutput, self, out)
    return op.workspace_size, op


def aclnnAdaptiveAvgPool2dBackward(workspace, workspaceSize, executor, stream):
    """Run the executor into its out; returns ACLNN_SUCCESS (0)."""
    return _launch(AdaptiveAvgPool2dBackward, workspace, workspaceSize, executor, stream)


def aclnnAdaptiveMaxPool3dBackwardGetWorkspaceSize(gradOutput, self, indices, gradInput):
    """Validate and plan (`AdaptiveMaxPool3dBackward`'s arguments); returns
    ``(workspace_size, executor)``."""
    op = AdaptiveMaxPool3dBackward(gradOutput, self, indices, gradInput)
    return op.workspace_size, op


def aclnnAdaptiveMaxPool3dBackward(workspace, workspaceSize, executor, stream):
    """Run the executor into its gradInput (an index outside its volume raises
    ParamInvalidError, 161002, and writes nothing); returns ACLNN_SUCCESS (0)."""
    return _launch(AdaptiveMaxPool3dBackward, workspace, workspaceSize, executor, stream)


def aclnnMaxPool2dWithIndicesBackwardGetWorkspaceSize(gradOutput, self, indices, kernelSize,
                                                      stride, padding, dilation, ceilMode,
                                                      gradInput):
    """Validate and plan (`MaxPool2dWithIndicesBackward`'s arguments); returns
    ``(workspace_size, executor)``."""
    op = MaxPool2dWithIndicesBackward(gradOutput, self, indices, kernelSize, stride, padding,
                                      dilation, ceilMode, gradInput)
    return op.workspace_size, op


def aclnnMaxPool2dWithIndicesBackward(workspace, workspaceSize, executor, stream):
    """Run the executor into its gradInput (an index outside its plane raises
    ParamInvalidError, 161002, and writes nothing); returns ACLNN_SUCCESS (0)."""
    return _launch(MaxPool2dWithIndicesBackward, workspace, workspaceSize, executor, stream)


def aclnnMaxPool3dWithArgmaxBackwardGetWorkspaceSize(gradOutput, self, indices, kernelSize,
                                                     stride, padding, dilation, ceilMode,
                                                     gradInput):
    """Validate and plan (`MaxPool3dWithArgmaxBackward`'s arguments); returns
    ``(workspace_size, executor)``."""
    op = MaxPool3dWithArgmaxBackward(gradOutput, self, indices, kernelSize, stride, padding,
                                     dilation, ceilMode, gradInput)
    return op.workspace_size, op


def aclnnMaxPool3dWithArgmaxBackward(workspace, workspaceSize, executor, stream):
    """Run the executor into its gradInput (an index outside its volume raises
    ParamInvalidError, 161002, and writes nothing); returns ACLNN_SUCCESS (0)."""
    return _launch(MaxPool3dWithArgmaxBackward, workspace, workspaceSize, executor, stream)

"""aclnn-named layer, for porting C++ aclnn code line by line (SPEC section 2.3).

``...GetWorkspaceSize`` validates and plans, returning ``(workspace_size, executor)``;
the operator call runs the executor and returns ACLNN_SUCCESS.  Where C returns an error
status, these functions raise the matching AclnnError (its ``.code`` is the status).
"""
from ._errors import ACLNN_SUCCESS, invalid
from .ops import AdaptiveAvgPool3dBackward, AdaptiveMaxPool2dBackward, AvgPool2dBackward

__all__ = [
    "aclnnAvgPool2dBackwardGetWorkspaceSize", "aclnnAvgPool2dBackward",
    "aclnnAdaptiveAvgPool3dBackwardGetWorkspaceSize", "aclnnAdaptiveAvgPool3dBackward",
    "aclnnAdaptiveMaxPool2dBackwardGetWorkspaceSize", "aclnnAdaptiveMaxPool2dBackward",
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
    op = AvgPool2dBackward(gradOutput, self, kernelSize, stride, padding, ceilMode,
                           countIncludePad, divisorOverride, cubeMathType, gradInput)
    return op.workspace_size, op


def aclnnAvgPool2dBackward(workspace, workspaceSize, executor, stream):
    return _launch(AvgPool2dBackward, workspace, workspaceSize, executor, stream)


def aclnnAdaptiveAvgPool3dBackwardGetWorkspaceSize(gradOutput, self, out):
    op = AdaptiveAvgPool3dBackward(gradOutput, self, out)
    return op.workspace_size, op


def aclnnAdaptiveAvgPool3dBackward(workspace, workspaceSize, executor, stream):
    return _launch(AdaptiveAvgPool3dBackward, workspace, workspaceSize, executor, stream)


def aclnnAdaptiveMaxPool2dBackwardGetWorkspaceSize(gradOutput, self, indices, gradInput):
    op = AdaptiveMaxPool2dBackward(gradOutput, self, indices, gradInput)
    return op.workspace_size, op


def aclnnAdaptiveMaxPool2dBackward(workspace, workspaceSize, executor, stream):
    return _launch(AdaptiveMaxPool2dBackward, workspace, workspaceSize, executor, stream)

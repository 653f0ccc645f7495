"""pool_grad: input gradients of the Ascend CANN aclnn pooling operators on the CPU.

Eight operators, three layers over one planned-kernel machinery::

  functions  avg_pool{2,3}d_backward, adaptive_avg_pool{2,3}d_backward,
             adaptive_max_pool{2,3}d_backward, max_pool2d_with_indices_backward,
             max_pool3d_with_argmax_backward
  objects    AvgPool2dBackward, ... (validate and plan at construction; .workspace_size;
             .execute())
  aclnn      pool_grad.aclnn.aclnn*GetWorkspaceSize / aclnn* with the C argument order

plus the forward companions avg_pool{2,3}d, adaptive_avg_pool{2,3}d,
adaptive_max_pool{2,3}d, max_pool{2,3}d.
"""
try:
    from . import _kernels  # noqa: F401  (the compiled extension)
except ImportError as _exc:
    import os as _os
    raise ImportError(
        f"pool_grad's compiled kernels are missing from {_os.path.dirname(__file__)}: this "
        "is an uncompiled source checkout. Run Python from another directory to use the "
        "installed pool_grad, or build in place with `python setup.py build_ext --inplace`."
    ) from _exc

from ._errors import (ACLNN_ERR_PARAM_INVALID, ACLNN_ERR_PARAM_NULLPTR, ACLNN_SUCCESS,
                      ALLOW_FP32_DOWN_PRECISION, KEEP_DTYPE, USE_FP16, USE_HF32, AclnnError,
                      ParamInvalidError, ParamNullptrError)
from ._stream import Stream
from ._threads import get_num_threads, set_num_threads
from ._config import show_config
from .forward import (adaptive_avg_pool2d, adaptive_avg_pool3d, adaptive_max_pool2d,
                      adaptive_max_pool3d, avg_pool2d, avg_pool3d, max_pool2d, max_pool3d)
from .functions import (adaptive_avg_pool2d_backward, adaptive_avg_pool3d_backward,
                        adaptive_max_pool2d_backward, adaptive_max_pool3d_backward,
                        avg_pool2d_backward, avg_pool3d_backward,
                        max_pool2d_with_indices_backward, max_pool3d_with_argmax_backward)
from .ops import (AdaptiveAvgPool2dBackward, AdaptiveAvgPool3dBackward,
                  AdaptiveMaxPool2dBackward, AdaptiveMaxPool3dBackward, AvgPool2dBackward,
                  AvgPool3dBackward, MaxPool2dWithIndicesBackward, MaxPool3dWithArgmaxBackward)
from . import aclnn

__version__ = "0.1.0"

__all__ = [
    "avg_pool2d_backward", "avg_pool3d_backward", "adaptive_avg_pool2d_backward",
    "adaptive_avg_pool3d_backward", "adaptive_max_pool2d_backward",
    "adaptive_max_pool3d_backward", "max_pool2d_with_indices_backward",
    "max_pool3d_with_argmax_backward",
    "AvgPool2dBackward", "AvgPool3dBackward", "AdaptiveAvgPool2dBackward",
    "AdaptiveAvgPool3dBackward", "AdaptiveMaxPool2dBackward", "AdaptiveMaxPool3dBackward",
    "MaxPool2dWithIndicesBackward", "MaxPool3dWithArgmaxBackward",
    "avg_pool2d", "avg_pool3d", "adaptive_avg_pool2d", "adaptive_avg_pool3d",
    "adaptive_max_pool2d", "adaptive_max_pool3d", "max_pool2d", "max_pool3d",
    "Stream", "set_num_threads", "get_num_threads", "show_config", "aclnn",
    "AclnnError", "ParamNullptrError", "ParamInvalidError",
    "ACLNN_SUCCESS", "ACLNN_ERR_PARAM_NULLPTR", "ACLNN_ERR_PARAM_INVALID",
    "KEEP_DTYPE", "ALLOW_FP32_DOWN_PRECISION", "USE_FP16", "USE_HF32",
]

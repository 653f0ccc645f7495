"""A typed user of pool_grad's public API: `mypy --strict` must accept it (CI runs it).
Not a test module (pytest does not collect it); `python tests/typing/typed_usage.py` runs
it."""
import numpy as np
from numpy.typing import NDArray

import pool_grad as pg
from pool_grad import aclnn


def gradients(x: NDArray[np.float32]) -> list[NDArray[np.float32]]:
    out: list[NDArray[np.float32]] = []
    y = pg.avg_pool2d(x, 3, 2, 1)
    out.append(pg.avg_pool2d_backward(np.ones_like(y), x, kernel_size=3, stride=2,
                                      padding=1, n_threads=1))
    ym, idx = pg.max_pool2d(x, 3, 2, 1, return_indices=True)
    out.append(pg.max_pool2d_with_indices_backward(np.ones_like(ym), x.shape, idx, 3, 2, 1,
                                                   ceil_mode=False))
    ya, ida = pg.adaptive_max_pool2d(x, (2, 2), return_indices=True)
    out.append(pg.adaptive_max_pool2d_backward(np.ones_like(ya), x, ida))
    only_y: NDArray[np.float32] = pg.max_pool2d(x, 2)
    out.append(pg.adaptive_avg_pool2d_backward(pg.adaptive_avg_pool2d(x, 3), x))
    out.append(only_y)
    return out


def volumes(x: NDArray[np.float32]) -> NDArray[np.float32]:
    gi = np.empty_like(x)
    op = pg.AvgPool3dBackward(pg.avg_pool3d(x, 2), x, 2, None, 0, False, True, 0, gi)
    ws = np.empty(op.workspace_size, np.uint8)
    op.execute(workspace=ws, n_threads=2)
    y, idx = pg.max_pool3d(x, 2, return_indices=True)
    size, executor = aclnn.aclnnMaxPool3dWithArgmaxBackwardGetWorkspaceSize(
        np.ones_like(y), x, idx, [2], [2], [0], [1], False, gi)
    stream = pg.Stream()
    assert aclnn.aclnnMaxPool3dWithArgmaxBackward(np.empty(size, np.uint8), size, executor,
                                                  stream) == pg.ACLNN_SUCCESS
    stream.synchronize()
    ym, idx3 = pg.adaptive_max_pool3d(x, 1, return_indices=True)
    pg.adaptive_max_pool3d_backward(ym, x, idx3, out=gi)
    return pg.adaptive_avg_pool3d_backward(pg.adaptive_avg_pool3d(x, (1, 2, 2)), x.shape)


def errors() -> int:
    try:
        pg.avg_pool2d_backward(np.ones((1, 1, 1, 1), np.float32), (1, 1, 4, 4), 4, padding=3)
    except pg.ParamInvalidError as exc:
        return exc.code
    return 0


if __name__ == "__main__":
    pg.set_num_threads(2)
    n: int = pg.get_num_threads()
    gradients(np.ones((1, 2, 8, 8), np.float32))
    volumes(np.ones((1, 2, 4, 4, 4), np.float32))
    assert errors() == pg.ACLNN_ERR_PARAM_INVALID and n == 2
    pg.show_config()

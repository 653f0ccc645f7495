"""The kernels take different paths for different layouts (polyphase W expansion for
NCHW rows, tap tables over a channel lane axis for channels-last, in-place row combines
for contiguous outputs, a staging row for strided ones); every path must give the same
bits, so a result never depends on the memory layout of its arrays."""
import itertools

import numpy as np
import pytest

import pool_grad as pg
from conftest import DTYPES

AVG_CASES = [c for c in itertools.product(
    [(9, 13), (16, 32), (31, 57)], [1, 2, 3, 5], [1, 2, 3], [0, 1, 2], [False, True],
    [False, True], [0, 3]) if 2 * c[3] <= c[1]]


def _bits(a):
    return np.ascontiguousarray(a).view(np.uint8)


def _layouts(shape, dtype):
    """Empty outputs of one logical shape in NCHW(-like), channels-last and strided forms."""
    n, c = shape[:2]
    sp = shape[2:]
    cl = np.empty((n,) + sp + (c,), dtype)
    big = np.empty(shape[:-1] + (2 * shape[-1],), dtype)
    return {"c": np.empty(shape, dtype), "channels_last": np.moveaxis(cl, -1, 1),
            "stepped": big[..., ::2], "reversed": np.empty(shape, dtype)[..., ::-1]}


@pytest.mark.parametrize("hw,k,s,p,ceil,cip,div", AVG_CASES[::7])
def test_avg_pool2d_backward_bits_do_not_depend_on_layout(hw, k, s, p, ceil, cip, div):
    rng = np.random.default_rng(0)
    x_shape = (2, 3) + hw
    try:
        y = pg.avg_pool2d(np.empty(x_shape, np.float32), k, s, p, ceil, cip, div)
    except pg.AclnnError:
        pytest.skip("no valid output size")
    go = rng.standard_normal(y.shape).astype(np.float32)
    results = [pg.avg_pool2d_backward(go, x_shape, k, s, p, ceil_mode=ceil,
                                      count_include_pad=cip, divisor_override=div, out=o)
               for o in _layouts(x_shape, np.float32).values()]
    for r in results[1:]:
        assert np.array_equal(_bits(r), _bits(results[0]))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("dhw,out", [((4, 6, 64), (2, 3, 8)), ((5, 7, 63), (5, 7, 9)),
                                     ((3, 4, 40), (1, 2, 20)), ((2, 3, 5), (3, 4, 7))])
def test_adaptive_avg_pool3d_backward_bits_do_not_depend_on_layout(dtype, dhw, out):
    rng = np.random.default_rng(1)
    x_shape = (2, 3) + dhw
    go = rng.standard_normal((2, 3) + out).astype(dtype)
    results = [pg.adaptive_avg_pool3d_backward(go, x_shape, out=o)
               for o in _layouts(x_shape, dtype).values()]
    for r in results[1:]:
        assert np.array_equal(_bits(r), _bits(results[0]))


@pytest.mark.parametrize("dtype", DTYPES)
def test_adaptive_max_pool2d_backward_bits_do_not_depend_on_layout(dtype):
    rng = np.random.default_rng(2)
    x = rng.standard_normal((2, 5, 23, 17)).astype(dtype)
    y, ind = pg.adaptive_max_pool2d(x, (9, 6), return_indices=True)
    ind[..., 0] = ind[..., 1]  # repeated indices: their order of addition matters
    go = rng.standard_normal(y.shape).astype(dtype)
    results = [pg.adaptive_max_pool2d_backward(go, x, ind, out=o)
               for o in _layouts(x.shape, dtype).values()]
    for r in results[1:]:
        assert np.array_equal(_bits(r), _bits(results[0]))

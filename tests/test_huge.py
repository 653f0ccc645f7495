"""Calls with more than 2**31 elements (opt-in: about 10 GiB of memory and a minute).

test_sizes.py reads the kernels' source to check that their index arithmetic is 64-bit;
these tests run it.  Each operator gets a grad_input of more than 2**31 float16 elements
(4.3 GB), NCHW and channels-last, and the result is checked at random positions and at
both ends against its closed form (windows that tile the input, so each value is one
grad_output value over the window size, or zero).  Run with::

    POOL_GRAD_HUGE=1 pytest tests/test_huge.py
"""
import os

import numpy as np
import pytest

import pool_grad as pg

pytestmark = pytest.mark.skipif(os.environ.get("POOL_GRAD_HUGE", "") in ("", "0"),
                                reason="opt-in: POOL_GRAD_HUGE=1 (about 10 GiB of memory)")


def _spot_check(gi, want, rng, n=4000):
    """gi at n random positions and its first and last element equals want(*index)."""
    idx = [rng.integers(0, s, n) for s in gi.shape]
    for k, s in enumerate(gi.shape):
        idx[k][0] = 0
        idx[k][-1] = s - 1
    got = gi[tuple(idx)].astype(np.float64)
    np.testing.assert_array_equal(got, want(*idx))


def _channels_last(shape, dtype):
    n, c = shape[:2]
    return np.empty((n,) + tuple(shape[2:]) + (c,), dtype).transpose(
        (0, len(shape) - 1) + tuple(range(1, len(shape) - 1)))


@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
def test_avg_pool2d_past_2_31_elements(layout):
    rng = np.random.default_rng(0)
    shape = (2, 1, 32768, 32800) if layout == "NCHW" else (1, 65536, 182, 182)
    assert np.prod(shape) > 2**31
    n, c, h, w = shape
    # multiples of 4: the quotients by the window size 4 are exact in float16
    out = None
    if layout == "NCHW":
        go = (rng.integers(0, 64, (n, c, h // 2, w // 2)) * 4).astype(np.float16)
    else:
        go = (rng.integers(0, 64, (n, h // 2, w // 2, c)) * 4).astype(np.float16)
        go = go.transpose(0, 3, 1, 2)
        out = _channels_last(shape, np.float16)
    gi = pg.avg_pool2d_backward(go, shape, 2, 2, 0, out=out)
    _spot_check(gi, lambda a, b, i, j: go[a, b, i // 2, j // 2].astype(np.float64) / 4, rng)


def test_adaptive_avg_pool3d_past_2_31_elements():
    rng = np.random.default_rng(1)
    shape = (1, 1, 32, 8192, 8200)
    go = (rng.integers(0, 64, (1, 1, 16, 4096, 4100)) * 8).astype(np.float16)
    gi = pg.adaptive_avg_pool3d_backward(go, shape)
    _spot_check(gi, lambda a, b, d, i, j: go[a, b, d // 2, i // 2, j // 2].astype(np.float64)
                / 8, rng)


@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
def test_adaptive_max_pool2d_past_2_31_elements(layout):
    rng = np.random.default_rng(2)
    shape = (129, 256, 256, 256)     # planes of 2**16: only the total passes 2**31
    n, c, h, w = shape
    # values and indices made in their layout (numpy's copy of a 3 GB transpose takes
    # minutes): each index at a random position of its own 2 x 2 window
    lead = (n, c, 128, 128) if layout == "NCHW" else (n, 128, 128, c)
    go = rng.integers(0, 64, lead).astype(np.float16)
    pick = rng.integers(0, 4, lead, dtype=np.int8)
    r = np.arange(128).reshape((128, 1) if layout == "NCHW" else (128, 1, 1)) * 2
    q = np.arange(128).reshape((128,) if layout == "NCHW" else (128, 1)) * 2
    ind = ((r + (pick >> 1)) * w + q + (pick & 1)).astype(np.int32)
    del pick
    out = None
    if layout == "NHWC":
        go, ind = go.transpose(0, 3, 1, 2), ind.transpose(0, 3, 1, 2)
        out = _channels_last(shape, np.float16)
    gi = pg.adaptive_max_pool2d_backward(go, shape, ind, out=out)

    def want(a, b, i, j):
        g = go[a, b, i // 2, j // 2].astype(np.float64)
        return np.where(ind[a, b, i // 2, j // 2] == i * w + j, g, 0.0)
    _spot_check(gi, want, rng)

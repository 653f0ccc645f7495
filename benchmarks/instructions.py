#!/usr/bin/env python
"""Instructions executed per work item of the pooling gradients (one thread).

Wall-clock time on a shared 2-vCPU VM drifts by up to 2x between runs, and on it the large
cases are limited by memory bandwidth, so kernel changes that only cut arithmetic and
per-row overhead (which limits the 16-core machine) are compared by instruction counts:
deterministic, and the same for every run.  This script plans one case (one batch element,
so the data stay in the cache) and executes it twice on one thread; run it under
valgrind's callgrind with collection limited to the kernel's item functions:

    valgrind --tool=callgrind --callgrind-out-file=/tmp/cg.out --collect-atstart=no \\
        --toggle-collect='*_gather_item*' --toggle-collect='*_fill_item*' \\
        --toggle-collect='*_scatter_item*' --toggle-collect='*_plane_bad*' \\
        --toggle-collect='*_window_item*' --toggle-collect='*_wplane*' \\
        python benchmarks/instructions.py k3s2p1

and read "Collected" (or `callgrind_annotate /tmp/cg.out` for the split by function).
With --stream, the case takes the streaming-store paths that the full-size case takes
where its output is larger than the last-level cache.
Cases: k3s2p1, k3s2p1_nhwc, k2s2_f32, k2s2_f16, k2s2_bf16, global, planes14,
planes14_bf16, adaptive, adaptive_ndhwc, adaptive_bf16, max7, max7_nhwc, max56_bf16 (the
benchmark suite's shapes with N = 1; the max-pool cases count the index check and the
scatter), and k3s2p1_bf16, k3s2p1_f16 (the first case in 16 bits).
Note: callgrind counts each byte of a `rep movsb` copy (glibc's memcpy for rows over a few
KiB) as one instruction, which inflates the channels-last figures.
"""
import sys

import numpy as np

import pool_grad as pg

try:
    import ml_dtypes
    BF16 = np.dtype(ml_dtypes.bfloat16)
except ImportError:  # pragma: no cover - bfloat16 cases need ml_dtypes
    BF16 = None


def avg(shape, k, s, p, dtype, channels_last=False):
    rng = np.random.default_rng(0)
    ho = (shape[2] + 2 * p - k) // s + 1
    wo = (shape[3] + 2 * p - k) // s + 1
    if channels_last:
        go = rng.random((shape[0], ho, wo, shape[1]), np.float32).astype(dtype)
        go = go.transpose(0, 3, 1, 2)
        gi = np.empty((shape[0], shape[2], shape[3], shape[1]), dtype).transpose(0, 3, 1, 2)
    else:
        go = rng.random(shape[:2] + (ho, wo), np.float32).astype(dtype)
        gi = np.empty(shape, dtype)
    return pg.AvgPool2dBackward(go, shape, k, s, p, False, True, 0, 0, gi)


def adaptive(shape, out, dtype, channels_last=False):
    rng = np.random.default_rng(0)
    if channels_last:
        go = rng.random((shape[0],) + out + (shape[1],), np.float32).astype(dtype)
        go = np.moveaxis(go, -1, 1)
        gi = np.moveaxis(np.empty((shape[0],) + shape[2:] + (shape[1],), dtype), -1, 1)
    else:
        go = rng.random(shape[:2] + out, np.float32).astype(dtype)
        gi = np.empty(shape, dtype)
    return pg.AdaptiveAvgPool3dBackward(go, shape, gi)


def amax(shape, out, dtype, channels_last=False):
    rng = np.random.default_rng(0)
    n, c, h, w = shape
    oh, ow = out
    # a real forward's argmax: one index per (non-overlapping here) window
    r = rng.integers(0, h // oh, (n, c, oh, ow)) + np.arange(oh)[:, None] * (h // oh)
    q = rng.integers(0, w // ow, (n, c, oh, ow)) + np.arange(ow) * (w // ow)
    ind = (r * w + q).astype(np.int64)
    go = rng.random((n, c, oh, ow), np.float32).astype(dtype)
    gi = np.empty(shape, dtype)
    if channels_last:
        go = np.ascontiguousarray(go.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)
        ind = np.ascontiguousarray(ind.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)
        gi = np.empty((n, h, w, c), dtype).transpose(0, 3, 1, 2)
    return pg.AdaptiveMaxPool2dBackward(go, shape, ind, gi)


CASES = {
    "k3s2p1": lambda: avg((1, 64, 112, 112), 3, 2, 1, np.float32),
    "k3s2p1_bf16": lambda: avg((1, 64, 112, 112), 3, 2, 1, BF16),
    "k3s2p1_f16": lambda: avg((1, 64, 112, 112), 3, 2, 1, np.float16),
    "k3s2p1_nhwc": lambda: avg((1, 64, 112, 112), 3, 2, 1, np.float32, True),
    "k2s2_f32": lambda: avg((1, 256, 56, 56), 2, 2, 0, np.float32),
    "k2s2_f16": lambda: avg((1, 256, 56, 56), 2, 2, 0, np.float16),
    "k2s2_bf16": lambda: avg((1, 256, 56, 56), 2, 2, 0, BF16),
    "global": lambda: avg((2, 2048, 7, 7), 7, 7, 0, np.float32),
    "planes14": lambda: avg((1, 256, 14, 14), 3, 2, 1, np.float32),
    "planes14_bf16": lambda: avg((1, 512, 14, 14), 2, 2, 0, BF16),
    "adaptive": lambda: adaptive((1, 32, 16, 64, 64), (4, 8, 8), np.float32),
    "adaptive_ndhwc": lambda: adaptive((1, 32, 16, 64, 64), (4, 8, 8), np.float32, True),
    "adaptive_bf16": lambda: adaptive((1, 32, 15, 63, 63), (4, 7, 7), BF16),
    "max7": lambda: amax((1, 64, 112, 112), (7, 7), np.float32),
    "max7_nhwc": lambda: amax((1, 64, 112, 112), (7, 7), np.float32, True),
    "max56_bf16": lambda: amax((1, 64, 112, 112), (56, 56), BF16),
}


def main(argv):
    stream = "--stream" in argv[1:]
    argv = [a for a in argv if a != "--stream"]
    if len(argv) != 2 or argv[1] not in CASES:
        sys.exit("usage: instructions.py CASE [--stream]   (one of: " + ", ".join(CASES) + ")")
    from pool_grad import _plan
    _plan.TUNE_BYTES = None   # one store form: no alternate timed over the first calls
    _plan.TUNE_SHAPE_BYTES = None   # ... and one shape of work (strips where they apply)
    if stream:
        # the streaming-store paths the full-size case takes where its output is larger
        # than the last-level cache (the N = 1 case fits in it)
        _plan.STREAM_BYTES = -1
    op = CASES[argv[1]]()
    ws = np.empty(op.workspace_size, np.uint8)
    for _ in range(2):
        op.execute(ws, n_threads=1)


if __name__ == "__main__":
    main(sys.argv)

#!/usr/bin/env python
"""Bitwise determinism across thread counts, on a many-core machine (issue #4).

The unit tests compare thread counts 1-4 (CI machines are small).  This script draws random
calls of all three operators -- every dtype, random shapes large enough that the kernels
really split the work over up to ``--max-threads`` threads, random layouts of grad_output,
indices and grad_input (C order, channels-last, strided, reversed), duplicate max-pool
indices -- and checks that ``n_threads = 1, 2, ..., max`` all give the same bytes, with
grad_input poisoned with NaN before every call (every element must be written).  Correctness
against the float64 reference is the unit tests' job.

    python benchmarks/check_threads.py [--max-threads 16] [--calls 200] [--seed 0]

Exit status 0 when every call matched; the last line says how many calls and thread counts
were compared and how many threads the kernels actually used at most.
"""
import argparse
import os
import sys
import time

import numpy as np

import pool_grad as pg

try:
    import ml_dtypes
    BF16 = np.dtype(ml_dtypes.bfloat16)
except ImportError:
    BF16 = None

DTYPES = [np.dtype(np.float32), np.dtype(np.float64), np.dtype(np.float16)] + \
    ([BF16] if BF16 is not None else [])


def _layout(shape, dtype, kind, rng):
    """An empty array of logical `shape` in a memory layout."""
    if kind == "c":
        return np.empty(shape, dtype)
    if kind == "cl":      # channels-last: C is the contiguous axis
        perm = (0,) + tuple(range(2, len(shape))) + (1,)
        phys = np.empty(tuple(shape[i] for i in perm), dtype)
        return np.moveaxis(phys, -1, 1)
    if kind == "stepped":
        big = np.empty(shape[:-1] + (2 * shape[-1] + 1,), dtype)
        return big[..., 1::2]
    if kind == "reversed":
        return np.empty(shape, dtype)[:, ::-1, ..., ::-1]
    raise ValueError(kind)


def _filled(values, kind, rng):
    arr = _layout(values.shape, values.dtype, kind, rng)
    arr[...] = values
    return arr


def _draw(rng):
    """(name, function, args, kwargs, grad_input shape, dtype) of one random call."""
    dtype = DTYPES[rng.integers(len(DTYPES))]
    big = rng.random() < 0.7
    op = rng.choice(["avg2d", "aavg3d", "amax2d"])
    layouts = ["c", "cl", "stepped", "reversed"]
    lay_go, lay_gi = rng.choice(layouts), rng.choice(layouts)
    if op == "avg2d":
        while True:
            n, c = int(rng.integers(1, 9)), int(rng.integers(1, 65))
            h, w = (int(v) for v in rng.integers(4, 160 if big else 24, size=2))
            kh, kw = (int(v) for v in rng.integers(1, 8, size=2))
            sh, sw = (int(rng.integers(1, kk + 2)) for kk in (kh, kw))
            ph, pw = int(rng.integers(0, kh // 2 + 1)), int(rng.integers(0, kw // 2 + 1))
            ceil, cip = bool(rng.integers(2)), bool(rng.integers(2))
            div = int(rng.choice([0, 0, 0, 3, -7]))
            cube = int(rng.choice([0, 1, 2, 3])) if dtype == np.float32 else 0
            try:
                y = pg.avg_pool2d(np.empty((n, c, h, w), np.float32), (kh, kw), (sh, sw),
                                  (ph, pw), ceil, cip, div)
            except pg.AclnnError:
                continue
            break
        go = _filled(rng.standard_normal(y.shape).astype(dtype), lay_go, rng)
        gi = _layout((n, c, h, w), dtype, lay_gi, rng)
        name = (f"avg2d {n}x{c}x{h}x{w} k{kh},{kw} s{sh},{sw} p{ph},{pw} ceil={ceil} "
                f"cip={cip} div={div} cube={cube}")
        return (name, pg.avg_pool2d_backward, (go, (n, c, h, w), (kh, kw), (sh, sw), (ph, pw)),
                dict(ceil_mode=ceil, count_include_pad=cip, divisor_override=div,
                     cube_math_type=cube), gi, (go, lay_go, lay_gi, dtype))
    if op == "aavg3d":
        n, c = int(rng.integers(1, 5)), int(rng.integers(1, 33))
        d, h, w = (int(v) for v in rng.integers(1, [24, 80, 80] if big else [6, 12, 12]))
        od, oh, ow = (int(rng.integers(1, s + 3)) for s in (d, h, w))
        go = _filled(rng.standard_normal((n, c, od, oh, ow)).astype(dtype), lay_go, rng)
        gi = _layout((n, c, d, h, w), dtype, lay_gi, rng)
        name = f"aavg3d {n}x{c}x{d}x{h}x{w} -> {od}x{oh}x{ow}"
        return (name, pg.adaptive_avg_pool3d_backward, (go, (n, c, d, h, w)), {}, gi,
                (go, lay_go, lay_gi, dtype))
    n, c = int(rng.integers(1, 9)), int(rng.integers(1, 65))
    h, w = (int(v) for v in rng.integers(1, 160 if big else 24, size=2))
    oh, ow = (int(rng.integers(1, s + 3)) for s in (h, w))
    go = _filled(rng.standard_normal((n, c, oh, ow)).astype(dtype), lay_go, rng)
    if rng.random() < 0.5:       # the forward's argmax
        _, idx = pg.adaptive_max_pool2d(rng.standard_normal((n, c, h, w)), (oh, ow),
                                        return_indices=True)
    else:                        # arbitrary, many duplicates (accumulation order matters)
        idx = rng.integers(0, max(1, (h * w) // 4), size=(n, c, oh, ow))
    idx = _filled(idx.astype(rng.choice([np.int32, np.int64])), rng.choice(layouts), rng)
    gi = _layout((n, c, h, w), dtype, lay_gi, rng)
    name = f"amax2d {n}x{c}x{h}x{w} -> {oh}x{ow} {idx.dtype}"
    return (name, pg.adaptive_max_pool2d_backward, (go, (n, c, h, w), idx), {}, gi,
            (go, lay_go, lay_gi, dtype))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--max-threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    counts = list(range(1, args.max_threads + 1))
    t0 = time.perf_counter()
    bad = 0
    most_used = 0
    multi = 0
    for i in range(args.calls):
        name, fn, fargs, kw, gi, (go, lay_go, lay_gi, dtype) = _draw(rng)
        first = None
        used = 1
        for n in counts:
            gi[...] = np.nan            # poison: every element must be written
            fn(*fargs, **kw, out=gi, n_threads=n)
            bits = np.ascontiguousarray(gi).view(np.uint8).copy()
            if first is None:
                first = bits
            elif not np.array_equal(bits, first):
                bad += 1
                print(f"MISMATCH call {i}: {name} dtype={dtype} go={lay_go} gi={lay_gi} "
                      f"n_threads={n}", flush=True)
                break
        # how many threads the kernel chose at the largest count (the op plans the same way)
        op = _op_for(fn, fargs, kw, gi)
        if op is not None and op._kernel is not None:
            used = op._kernel.threads_for(args.max_threads)
        most_used = max(most_used, used)
        multi += used > 1
    dt = time.perf_counter() - t0
    print(f"{args.calls} calls x n_threads 1..{args.max_threads}: {bad} mismatches; "
          f"{multi} calls split over >1 thread (at most {most_used}); {dt:.1f} s")
    return 1 if bad else 0


def _op_for(fn, fargs, kw, gi):
    if fn is pg.avg_pool2d_backward:
        go, x, k, s, p = fargs
        return pg.AvgPool2dBackward(go, x, k, s, p, kw["ceil_mode"], kw["count_include_pad"],
                                    kw["divisor_override"], kw["cube_math_type"], gi)
    if fn is pg.adaptive_avg_pool3d_backward:
        go, x = fargs
        return pg.AdaptiveAvgPool3dBackward(go, x, gi)
    go, x, idx = fargs
    return pg.AdaptiveMaxPool2dBackward(go, x, idx, gi)


if __name__ == "__main__":
    sys.exit(main())

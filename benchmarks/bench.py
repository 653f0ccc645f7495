#!/usr/bin/env python
"""pool_grad benchmark suite (issue #4).

For every case, in one run:
  * pool_grad, two-phase: the op is constructed once (validation + plan) and only
    ``op.execute(workspace=ws)`` into the preallocated grad_input is timed;
  * pool_grad, one-shot: the scikit-style function, which allocates its result;
  * PyTorch's CPU backward (``torch.ops.aten.*_backward``) on the same data, when torch is
    installed (``torch.set_num_threads(N)``; channels-last tensors for channels-last cases);
  * the machine's best memory copy moving the same bytes between two preallocated
    buffers: ``np.copyto`` single-threaded and split over N Python threads (numpy releases
    the GIL in copyto), and an OpenMP team of N threads copying 1 MiB chunks with memcpy
    and with non-temporal (streaming) stores; the fastest of the four is the "copy
    bandwidth".

Times are medians of the repeats after a warm-up.  Bytes that must move = grad_output +
grad_input (+ indices).  Each copy buffer holds half of that, so a copy reads + writes
exactly the bytes the case must move, and "% copy" = copy time / pool_grad time.

Extra checks: the seed 1x16x4x4 case in microseconds per call, the index-validation share
of the max-pool gradient, auto thread choice vs n_threads=1 on small calls, and two
concurrent Python threads each running a large call vs one call.

    python benchmarks/bench.py [--threads N] [--json FILE] [--cases SUBSTR] [--repeats R]
                               [--sweep 1,2] [--no-torch] [--no-checks] [--budget S]
"""
import argparse
import concurrent.futures
import datetime
import functools
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import threading
import time

import numpy as np

import pool_grad as pg

# membw (this folder): the OpenMP copy and traffic references, compiled from membw.c on
# first use; the folder is on sys.path when this runs as a script, not when imported
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import membw  # noqa: E402

try:
    import ml_dtypes
    BF16 = np.dtype(ml_dtypes.bfloat16)
except ImportError:  # pool_grad needs it anyway
    ml_dtypes, BF16 = None, None

DTYPES = {"float32": np.dtype(np.float32), "float16": np.dtype(np.float16),
          "float64": np.dtype(np.float64), "bfloat16": BF16}


# ------------------------------------------------------------------------------ cases

class Case:
    """One benchmark case.  op: 'avg2d' | 'avg3d' | 'aavg2d' | 'aavg3d' | 'amax2d' |
    'amax3d' | 'max2d' | 'max3d'; shape: the logical (N, C, [D,] H, W) of x; out: the
    pooled spatial size (computed for the windowed ops: k, s, p); layout: 'NCHW'
    (C-contiguous) or 'CL' (channels-last)."""

    WINDOWED = ("avg2d", "avg3d", "max2d", "max3d")
    INDEXED = ("amax2d", "amax3d", "max2d", "max3d")

    def __init__(self, op, shape, dtype="float32", layout="NCHW", out=None, k=None, s=None,
                 p=0, label=None):
        self.op, self.shape, self.dtype, self.layout = op, tuple(shape), dtype, layout
        self.k, self.s, self.p = k, s, p
        if op in self.WINDOWED:
            s_ = s if s is not None else k
            nsp = 3 if op.endswith("3d") else 2
            out = tuple((n + 2 * p - k) // s_ + 1 for n in shape[-nsp:])
        self.out = tuple(out)
        self.name = label or self._name()

    def _name(self):
        dims = "x".join(map(str, self.shape))
        lay = {"NCHW": "NCDHW" if len(self.shape) == 5 else "NCHW",
               "CL": "NDHWC" if len(self.shape) == 5 else "NHWC"}[self.layout]
        dt = {"float32": "f32", "float16": "f16", "bfloat16": "bf16",
              "float64": "f64"}[self.dtype]
        if self.op in self.WINDOWED:
            par = f"k{self.k}s{self.s if self.s is not None else self.k}p{self.p}"
            op = {"avg2d": "avg_pool2d", "avg3d": "avg_pool3d", "max2d": "max_pool2d",
                  "max3d": "max_pool3d"}[self.op]
            return f"{op} {dims} {par} {dt} {lay}"
        to = "x".join(map(str, self.out))
        op = {"aavg3d": "adaptive_avg_pool3d", "amax2d": "adaptive_max_pool2d",
              "aavg2d": "adaptive_avg_pool2d", "amax3d": "adaptive_max_pool3d"}[self.op]
        return f"{op} {dims}->{to} {dt} {lay}"


def default_cases():
    A, A3, M = "avg2d", "aavg3d", "amax2d"
    return [
        Case(A, (32, 64, 112, 112), k=3, s=2, p=1),
        Case(A, (32, 64, 112, 112), k=3, s=2, p=1, layout="CL"),
        Case(A, (32, 256, 56, 56), k=2, s=2),
        Case(A, (32, 256, 56, 56), "float16", k=2, s=2),
        Case(A, (32, 256, 56, 56), "bfloat16", k=2, s=2),
        Case(A, (32, 256, 56, 56), "float16", k=2, s=2, layout="CL"),
        Case(A, (32, 256, 56, 56), "bfloat16", k=2, s=2, layout="CL"),
        Case(A, (64, 2048, 7, 7), k=7, s=7, label="avg_pool2d global 64x2048x7x7 k7 f32 NCHW"),
        # small planes (DenseNet's transitions and later layers)
        Case(A, (256, 256, 14, 14), k=3, s=2, p=1),
        Case(A, (256, 512, 14, 14), "bfloat16", k=2, s=2),
        Case(A, (1, 16, 4, 4), k=4, s=1, label="avg_pool2d seed 1x16x4x4 k4s1p0 f32 NCHW"),
        # stride 1 on small planes (Inception's 3x3 average pools; beyond the issue's list)
        Case(A, (32, 2048, 8, 8), k=3, s=1, p=1),
        Case(A, (32, 768, 17, 17), k=3, s=1, p=1),
        # float64, the golden-reference dtype (the k3s2p1 case's bytes at half the batch)
        Case(A, (16, 64, 112, 112), "float64", k=3, s=2, p=1),
        Case(A, (16, 64, 112, 112), "float64", k=3, s=2, p=1, layout="CL"),
        Case(A, (32, 64, 56, 56), "float64", k=3, s=1, p=1),
        Case(A3, (4, 32, 16, 64, 64), out=(4, 8, 8)),
        Case(A3, (4, 32, 16, 64, 64), out=(4, 8, 8), layout="CL"),
        Case(A3, (4, 32, 16, 64, 64), out=(1, 1, 1)),
        Case(A3, (4, 32, 15, 63, 63), "bfloat16", out=(4, 7, 7)),
        Case(M, (32, 64, 112, 112), out=(7, 7)),
        Case(M, (32, 64, 112, 112), out=(7, 7), layout="CL"),
        Case(M, (32, 64, 113, 113), out=(7, 7)),
        Case(M, (32, 64, 112, 112), "bfloat16", out=(56, 56)),
        Case(M, (32, 64, 112, 112), "bfloat16", out=(56, 56), layout="CL"),
        # the operators of SPEC section 6 (issue #57)
        Case("avg3d", (8, 64, 16, 56, 56), k=3, s=2, p=1),
        Case("avg3d", (8, 64, 16, 56, 56), "bfloat16", k=3, s=2, p=1),
        Case("aavg2d", (64, 512, 14, 14), out=(7, 7)),
        Case("amax3d", (4, 32, 16, 64, 64), out=(4, 8, 8)),
        Case("max2d", (32, 64, 112, 112), k=3, s=2, p=1),
        Case("max2d", (32, 64, 112, 112), k=3, s=2, p=1, layout="CL"),
        Case("max2d", (32, 64, 112, 112), "bfloat16", k=3, s=2, p=1),
        Case("max3d", (8, 64, 16, 56, 56), k=3, s=2, p=1),
        # layouts the cases above lack: small planes along a real D axis (video networks'
        # late stages), channels-last images of three channels
        Case("avg3d", (8, 256, 8, 14, 14), k=3, s=2, p=1),
        Case(A, (32, 3, 224, 224), k=3, s=2, p=1, layout="CL"),
    ]


def shrunk(case, by):
    """The case with its batch divided by ``by`` (at least 1)."""
    shape = (max(1, case.shape[0] // by),) + case.shape[1:]
    return Case(case.op, shape, case.dtype, case.layout, case.out, case.k, case.s, case.p)


def small_cases():
    """Small calls for the auto-thread check: around and below the parallel threshold."""
    A, A3, M = "avg2d", "aavg3d", "amax2d"
    return [
        Case(A, (1, 16, 4, 4), k=4, s=1, label="avg_pool2d seed 1x16x4x4 k4s1p0 f32 NCHW"),
        Case(A, (1, 64, 28, 28), k=3, s=2, p=1),
        Case(A, (4, 64, 28, 28), k=3, s=2, p=1),
        Case(A, (8, 64, 28, 28), k=3, s=2, p=1, layout="CL"),
        Case(A, (8, 128, 7, 7), "bfloat16", k=7, s=7),
        Case(A3, (1, 16, 8, 16, 16), out=(2, 4, 4)),
        Case(A3, (2, 32, 8, 32, 32), out=(4, 8, 8)),
        Case(M, (1, 64, 32, 32), out=(7, 7)),
        Case(M, (4, 64, 56, 56), out=(7, 7)),
    ]


# ------------------------------------------------------------------------------ data

def _layouted(shape, dtype, layout):
    """An empty array of logical shape (N, C, *sp) in the layout asked for."""
    if layout == "NCHW":
        return np.empty(shape, dtype)
    nd = len(shape)
    phys = (shape[0],) + tuple(shape[2:]) + (shape[1],)
    perm = (0, nd - 1) + tuple(range(1, nd - 1))
    return np.empty(phys, dtype).transpose(perm)


def _random(rng, shape, dtype, layout):
    a = _layouted(shape, dtype, layout)
    a[...] = rng.standard_normal(a.shape, dtype=np.float32)
    return a


class Data:
    """The arrays of one case, and the calls to time on them."""

    def __init__(self, case, rng, with_torch):
        self.case = case
        dt = DTYPES[case.dtype]
        n, c = case.shape[:2]
        oshape = (n, c) + case.out
        self.go = _random(rng, oshape, dt, case.layout)
        self.gi = _layouted(case.shape, dt, case.layout)
        self.gi[...] = 0  # fault the pages in
        self.ind = None
        if case.op in Case.INDEXED:
            x = _random(rng, case.shape, dt, case.layout)
            if case.op == "amax2d":
                _, ind = pg.adaptive_max_pool2d(x, case.out, return_indices=True)
            elif case.op == "amax3d":
                _, ind = pg.adaptive_max_pool3d(x, case.out, return_indices=True)
            else:
                fwd = pg.max_pool2d if case.op == "max2d" else pg.max_pool3d
                _, ind = fwd(x, case.k, case.s, case.p, return_indices=True)
            del x
            self.ind = _layouted(oshape, np.int64, case.layout)
            self.ind[...] = ind
            del ind
        self.nbytes = self.go.nbytes + self.gi.nbytes + (
            self.ind.nbytes if self.ind is not None else 0)
        self.torch_args = None
        self.torch_error = None
        self.torch_out = None
        self.torch_out_error = None
        if with_torch:
            try:
                self.torch_args = self._torch_args()
            except Exception as exc:  # a dtype torch lacks, say
                self.torch_error = f"{type(exc).__name__}: {exc}"

    # pool_grad
    def make_op(self):
        c = self.case
        if c.op == "avg2d":
            return pg.AvgPool2dBackward(self.go, c.shape, c.k, c.s, c.p, False, True, 0,
                                        pg.KEEP_DTYPE, self.gi)
        if c.op == "avg3d":
            return pg.AvgPool3dBackward(self.go, c.shape, c.k, c.s, c.p, False, True, 0,
                                        self.gi)
        if c.op == "aavg3d":
            return pg.AdaptiveAvgPool3dBackward(self.go, c.shape, self.gi)
        if c.op == "aavg2d":
            return pg.AdaptiveAvgPool2dBackward(self.go, c.shape, self.gi)
        if c.op == "amax3d":
            return pg.AdaptiveMaxPool3dBackward(self.go, c.shape, self.ind, self.gi)
        if c.op == "max2d":
            return pg.MaxPool2dWithIndicesBackward(self.go, c.shape, self.ind, c.k, c.s, c.p,
                                                   1, False, self.gi)
        if c.op == "max3d":
            return pg.MaxPool3dWithArgmaxBackward(self.go, c.shape, self.ind, c.k, c.s, c.p,
                                                  1, False, self.gi)
        return pg.AdaptiveMaxPool2dBackward(self.go, c.shape, self.ind, self.gi)

    def oneshot(self, n_threads=None):
        c = self.case
        if c.op == "avg2d":
            return pg.avg_pool2d_backward(self.go, c.shape, c.k, c.s, c.p,
                                          n_threads=n_threads)
        if c.op == "avg3d":
            return pg.avg_pool3d_backward(self.go, c.shape, c.k, c.s, c.p,
                                          n_threads=n_threads)
        if c.op == "aavg3d":
            return pg.adaptive_avg_pool3d_backward(self.go, c.shape, n_threads=n_threads)
        if c.op == "aavg2d":
            return pg.adaptive_avg_pool2d_backward(self.go, c.shape, n_threads=n_threads)
        if c.op == "amax3d":
            return pg.adaptive_max_pool3d_backward(self.go, c.shape, self.ind,
                                                   n_threads=n_threads)
        if c.op == "max2d":
            return pg.max_pool2d_with_indices_backward(self.go, c.shape, self.ind, c.k, c.s,
                                                       c.p, n_threads=n_threads)
        if c.op == "max3d":
            return pg.max_pool3d_with_argmax_backward(self.go, c.shape, self.ind, c.k, c.s,
                                                      c.p, n_threads=n_threads)
        return pg.adaptive_max_pool2d_backward(self.go, c.shape, self.ind,
                                               n_threads=n_threads)

    # torch
    def _torch_args(self):
        import torch
        c = self.case
        mf = torch.contiguous_format
        if c.layout == "CL":
            mf = torch.channels_last if len(c.shape) == 4 else torch.channels_last_3d
        if c.dtype == "bfloat16":
            go = torch.from_numpy(self.go.astype(np.float32)).to(torch.bfloat16)
            tdt = torch.bfloat16
        else:
            go = torch.from_numpy(self.go)
            tdt = go.dtype
        go = go.contiguous(memory_format=mf)
        x = torch.empty(c.shape, dtype=tdt, memory_format=mf)
        nsp = len(c.shape) - 2
        s = c.s if c.s is not None else c.k
        ind = (torch.from_numpy(self.ind).contiguous(memory_format=mf)
               if self.ind is not None else None)
        if c.op in ("avg2d", "avg3d"):
            args = (go, x, [c.k] * nsp, [s] * nsp, [c.p] * nsp, False, True, None)
            fn = getattr(torch.ops.aten, f"avg_pool{nsp}d_backward")
            fn_out = fn.grad_input
        elif c.op == "aavg3d":
            args = (go, x)
            fn = torch.ops.aten._adaptive_avg_pool3d_backward
            fn_out = torch.ops.aten.adaptive_avg_pool3d_backward.grad_input
        elif c.op == "aavg2d":
            args = (go, x)
            fn = torch.ops.aten._adaptive_avg_pool2d_backward
            out_op = torch.ops.aten._adaptive_avg_pool2d_backward.out
            fn_out = lambda *a, grad_input: out_op(*a, out=grad_input)  # noqa: E731
        elif c.op == "amax3d":
            args = (go, x, ind)
            fn = torch.ops.aten.adaptive_max_pool3d_backward
            fn_out = fn.grad_input
        elif c.op in ("max2d", "max3d"):
            args = (go, x, [c.k] * nsp, [s] * nsp, [c.p] * nsp, [1] * nsp, False, ind)
            fn = getattr(torch.ops.aten, f"max_pool{nsp}d_with_indices_backward")
            fn_out = fn.grad_input
        else:
            ind = torch.from_numpy(self.ind).contiguous(memory_format=mf)
            args = (go, x, ind)
            fn = torch.ops.aten.adaptive_max_pool2d_backward
            fn_out = torch.ops.aten.adaptive_max_pool2d_backward.grad_input
        fn(*args)  # fails here, not in the timing, if torch lacks the dtype
        # the same backward into a preallocated grad_input (aten's out= overload), like
        # pool_grad's op.execute: no allocation, so none of the first-touch page faults of
        # a fresh result, which took most of the allocating call's time in some runs
        # (glibc's malloc hands a large block back to the system, or keeps it, by its
        # history: torch's allocating call varied 4-6x between runs of this VM)
        out = torch.empty(c.shape, dtype=tdt, memory_format=mf)
        try:
            fn_out(*args, grad_input=out)
            self.torch_out = (fn_out, args, out)
        except Exception as exc:   # an older torch without the overload
            self.torch_out = None
            self.torch_out_error = f"{type(exc).__name__}: {exc}"
        return fn, args

    def torch_call(self):
        fn, args = self.torch_args
        return fn(*args)

    def torch_out_call(self):
        fn, args, out = self.torch_out
        return fn(*args, grad_input=out)


# ------------------------------------------------------------------------------ timing

class Timer:
    def __init__(self, budget, min_reps, max_reps, fixed):
        self.budget, self.min_reps, self.max_reps, self.fixed = budget, min_reps, max_reps, fixed

    def __call__(self, fn, budget=None):
        """Median seconds per call of fn after a warm-up.  Calls under 1 ms are timed in
        batches (each sample >= ~1 ms).  Returns (median, samples, calls per sample)."""
        budget = self.budget if budget is None else budget
        fn()  # warm-up: first touch, lazy init, thread pool start
        t0 = time.perf_counter()
        fn()
        one = max(time.perf_counter() - t0, 1e-7)
        inner = 1 if one >= 1e-3 else int(math.ceil(1e-3 / one))
        if self.fixed:
            reps = self.fixed
        else:
            reps = int(min(self.max_reps, max(self.min_reps, budget / (one * inner))))
        samples = []
        for _ in range(reps):
            t0 = time.perf_counter()
            for _ in range(inner):
                fn()
            samples.append((time.perf_counter() - t0) / inner)
        return statistics.median(samples), samples, inner

    def ms(self, fn, budget=None):
        """(median ms, min ms) of fn."""
        med, samples, _ = self(fn, budget)
        return med * 1e3, min(samples) * 1e3


class CopyBench:
    """Best memory copy of nbytes of traffic: src and dst of nbytes/2 each."""

    def __init__(self, nthreads):
        self.nthreads = nthreads
        self.pool = (concurrent.futures.ThreadPoolExecutor(max_workers=nthreads - 1)
                     if nthreads > 1 else None)

    def close(self):
        if self.pool is not None:
            self.pool.shutdown()

    def run(self, nbytes, timer):
        half = max(64, (nbytes // 2) // 64 * 64)
        src = np.ones(half // 8, np.float64)
        dst = np.zeros(half // 8, np.float64)
        res = {"buffer_bytes": int(src.nbytes)}
        t1, _, _ = timer(lambda: np.copyto(dst, src))
        res["single_ms"] = t1 * 1e3
        best = t1
        self.best_fn = lambda: np.copyto(dst, src)
        if self.pool is not None:
            n = self.nthreads
            bounds = np.linspace(0, src.size, n + 1).astype(np.int64)
            parts = [(dst[a:b], src[a:b]) for a, b in zip(bounds[:-1], bounds[1:])]

            def mt():
                futs = [self.pool.submit(np.copyto, d, s) for d, s in parts[1:]]
                np.copyto(*parts[0])
                for f in futs:
                    f.result()
            tn, _, _ = timer(mt)
            res["multi_ms"] = tn * 1e3
            if tn < best:
                best, self.best_fn = tn, mt
        # an OpenMP team of as many threads copying 1 MiB chunks, with memcpy and with
        # line-streaming (non-temporal) stores (benchmarks/membw.c; none without a C
        # compiler, streaming only where the CPU has it)
        if membw.available():
            for key, stream in (("omp_ms", False), ("omp_stream_ms", True)):
                if stream and not membw.has_stream():
                    continue
                fn = membw.bound_copy(dst, src, self.nthreads, stream)
                tn, _, _ = timer(fn)
                res[key] = tn * 1e3
                if tn < best:
                    best, self.best_fn = tn, fn
        res["best_ms"] = best * 1e3
        res["gbps"] = 2 * src.nbytes / best / 1e9
        return res


class TrafficBound:
    """The least time, on this machine, for a gradient that reads grad_output (and the
    indices) once and writes grad_input once: an OpenMP team of as many threads as the
    case uses reads a buffer of the bytes read and writes one of grad_input's size with a
    16 KiB sample of the real result, over and over (membw.traffic: benchmarks/membw.c),
    with ordinary and with streaming stores: the faster.  Unlike the copy, it reads and
    writes as many bytes as the case does, and it writes what the case writes (this VM
    writes lines of zeros faster than other lines, and a max-pool gradient is mostly
    zeros)."""

    SAMPLE = 1 << 14
    MIN_BYTES = 1 << 20

    def __init__(self, nthreads):
        self.nthreads = nthreads
        self.fn = membw.bound_traffic if membw.available() else None

    @classmethod
    def sample(cls, gi):
        """The first bytes of grad_input, in memory order."""
        flat = gi.ravel(order="K")
        return np.ascontiguousarray(flat[:max(1, cls.SAMPLE // flat.itemsize)]).view(np.uint8)

    def run(self, read_bytes, write_bytes, sample, timer):
        if self.fn is None or write_bytes == 0:
            self.best_fn = None
            return None
        src = np.ones(max(1, read_bytes // 8), np.uint64)
        dst = np.empty(write_bytes, np.uint8)
        dst[...] = 1  # fault the pages in
        res = {"read_bytes": int(src.nbytes), "write_bytes": int(dst.nbytes)}
        best = None
        for key, stream in (("ordinary_ms", False), ("stream_ms", True)):
            if stream and not membw.has_stream():
                continue
            fn = self.fn(dst, src, sample, self.nthreads, stream)
            tn, _, _ = timer(fn)
            res[key] = tn * 1e3
            if best is None or tn < best:
                best, self.best_fn = tn, fn
        res["best_ms"] = best * 1e3
        res["gbps"] = (src.nbytes + dst.nbytes) / best / 1e9
        return res


class Background:
    """CPUs kept busy by *other* processes while a measurement runs: machine busy time
    (/proc/stat, steal included) minus this process's CPU time, per second of wall time.
    Anything well above 0 means the numbers are contaminated."""

    def __init__(self):
        self.ok = os.path.exists("/proc/stat")
        self.hz = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
        self.start()

    def _busy(self):
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:9]]
        return (sum(v) - v[3] - v[4]) / self.hz

    def start(self):
        if self.ok:
            self.b0, self.p0, self.w0 = self._busy(), time.process_time(), time.perf_counter()

    def stop(self):
        """Mean number of CPUs busy with other processes since start(), or None."""
        if not self.ok:
            return None
        wall = time.perf_counter() - self.w0
        if wall <= 0:
            return None
        other = (self._busy() - self.b0) - (time.process_time() - self.p0)
        return max(0.0, other / wall)


def _auto_threads(op, budget=None):
    """The thread count execute() would pick for this op (private API, which changes:
    None when neither known form is there)."""
    budget = budget or pg.get_num_threads()
    kern = getattr(op, "_kernel", None)
    try:
        if hasattr(kern, "threads_for"):
            return int(kern.threads_for(budget))
        from pool_grad import _threads
        return int(_threads.for_work(budget, op._nbytes, op._n_items))
    except Exception:
        return None


def _settle(op, ws, most=32):
    """Run op until it uses one form (private API: None where it is missing); returns
    that form ("stream" or "cache", with " rows" for another shape of the same work, the
    float64 strips' row form: ops.py's other_shape)."""
    kern = getattr(op, "_kernel", None)
    for _ in range(most):
        form = getattr(kern, "store_form", None)
        if form != "tuning":
            return form
        op.execute(workspace=ws)
    return getattr(kern, "store_form", None)


# ------------------------------------------------------------------------------ runs

def set_threads(n, torch_mod):
    pg.set_num_threads(n)
    if torch_mod is not None:
        torch_mod.set_num_threads(n)


def run_case(case, nthreads, timer, copier, torch_mod, rng):
    bg = Background()
    data = Data(case, rng, torch_mod is not None)
    r = {"name": case.name, "op": case.op, "shape": list(case.shape), "out": list(case.out),
         "dtype": case.dtype, "layout": case.layout, "threads": nthreads,
         "bytes": int(data.nbytes), "grad_output_bytes": int(data.go.nbytes),
         "grad_input_bytes": int(data.gi.nbytes),
         "indices_bytes": int(data.ind.nbytes) if data.ind is not None else 0}
    op = data.make_op()
    ws = np.empty(op.workspace_size, np.uint8)
    r["workspace_bytes"] = int(op.workspace_size)
    r["auto_threads"] = _auto_threads(op, nthreads)
    # an op planned in two store forms times both over its first calls and keeps the
    # faster: those calls are the op's warm-up, not its steady state
    r["store_form"] = _settle(op, ws)

    t, samples, inner = timer(lambda: op.execute(workspace=ws))
    r["pg_ms"] = t * 1e3
    r["pg_min_ms"] = min(samples) * 1e3
    r["pg_samples_ms"] = [x * 1e3 for x in samples]
    r["pg_calls_per_sample"] = inner
    r["pg_gbps"] = data.nbytes / t / 1e9
    r["oneshot_ms"], r["oneshot_min_ms"] = timer.ms(data.oneshot)

    if case.op in Case.INDEXED:
        kern = getattr(op, "_kernel", None)
        count = getattr(kern, "count_bad_indices", None)
        nt = r["auto_threads"] or nthreads
        if count is not None:
            tc, _, _ = timer(lambda: count(nt))
            r["index_check_ms"] = tc * 1e3
            r["index_check_share"] = tc / t
        else:
            r["index_check_ms"] = None

    if torch_mod is not None:
        if data.torch_args is not None:
            r["torch_ms"], r["torch_min_ms"] = timer.ms(data.torch_call)
            r["speedup"] = r["torch_ms"] / r["pg_ms"]
            r["speedup_oneshot"] = r["torch_ms"] / r["oneshot_ms"]
            if data.torch_out is not None:
                r["torch_out_ms"], r["torch_out_min_ms"] = timer.ms(data.torch_out_call)
                r["speedup_out"] = r["torch_out_ms"] / r["pg_ms"]
            else:
                r["torch_out_ms"] = r["speedup_out"] = None
                r["torch_out_error"] = data.torch_out_error
            time.sleep(0.02)  # let torch's OpenMP threads stop spinning
        else:
            r["torch_ms"] = None
            r["torch_error"] = data.torch_error
    sample = TrafficBound.sample(data.gi)
    read_bytes = data.nbytes - data.gi.nbytes
    del data
    cp = copier.run(r["bytes"], timer)
    r["copy"] = cp
    r["copy_gbps"] = cp["gbps"]
    r["pct_copy"] = 100.0 * r["pg_gbps"] / cp["gbps"]
    r["pct_copy_paired"] = _paired_pct(lambda: op.execute(workspace=ws), t,
                                       copier.best_fn, cp["best_ms"] / 1e3, timer.budget)
    bound = TrafficBound(r["auto_threads"] or nthreads or pg.get_num_threads())
    # (not for calls of a few kilobytes, which time the call, not the traffic)
    bd = (bound.run(read_bytes, r["grad_input_bytes"], sample, timer)
          if r["bytes"] >= TrafficBound.MIN_BYTES else None)
    r["bound"] = bd
    if bd is not None:
        r["pct_bound"] = 100.0 * bd["best_ms"] / r["pg_ms"]
        r["pct_bound_paired"] = _paired_pct(lambda: op.execute(workspace=ws), t,
                                            bound.best_fn, bd["best_ms"] / 1e3, timer.budget)
        if r.get("torch_out_ms"):
            # the speed-up over torch out= of a kernel that ran at the bound pass's time:
            # where it is under 5, no kernel that moves these bytes reaches 5x
            r["ceiling_out"] = r["torch_out_ms"] / bd["best_ms"]
    del op, ws
    r["bg_cpus"] = bg.stop()
    return r


def _paired_ratio(a_fn, a_s, b_fn, b_s, budget):
    """Median over interleaved rounds of (time of b) / (time of a): rounds of (a batch,
    b batch) back to back, so that both see the same machine state.  On a VM whose speed
    drifts, separate medians can be seconds apart; this ratio cannot."""
    n_a = max(1, int(math.ceil(1e-3 / max(a_s, 1e-7))))
    n_b = max(1, int(math.ceil(1e-3 / max(b_s, 1e-7))))
    rounds = int(min(41, max(7, budget / max(n_a * a_s + n_b * b_s, 1e-6))))
    ratios = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(n_a):
            a_fn()
        t1 = time.perf_counter()
        for _ in range(n_b):
            b_fn()
        t2 = time.perf_counter()
        ratios.append(((t2 - t1) / n_b) / ((t1 - t0) / n_a))
    return statistics.median(ratios)


def _paired_pct(pg_fn, pg_s, copy_fn, copy_s, budget):
    """% of copy bandwidth from interleaved timings (the two move the same bytes)."""
    return 100.0 * _paired_ratio(pg_fn, pg_s, copy_fn, copy_s, budget)


def seed_us(nthreads, timer, rng):
    """Microseconds per call of the seed 1x16x4x4 case, op.execute() and one-shot."""
    case = Case("avg2d", (1, 16, 4, 4), k=4, s=1)
    data = Data(case, rng, False)
    op = data.make_op()
    ws = np.empty(op.workspace_size, np.uint8)
    res = {}
    for key, fn in (("execute_ws_us", lambda: op.execute(workspace=ws)),
                    ("execute_us", op.execute),
                    ("oneshot_us", data.oneshot),
                    ("construct_op_us", data.make_op)):
        t, _, _ = timer(fn, budget=0.2)
        res[key] = t * 1e6
    return res


def auto_vs_one(cases, nthreads, timer, rng):
    """Is the auto thread choice (budget N) within 10% of n_threads=1 on small calls?"""
    out = []
    for case in cases:
        bg = Background()
        data = Data(case, rng, False)
        op = data.make_op()
        ws = np.empty(op.workspace_size, np.uint8)
        auto = functools.partial(op.execute, workspace=ws)
        one = functools.partial(op.execute, workspace=ws, n_threads=1)
        ta, _, _ = timer(auto, budget=0.15)
        t1, _, _ = timer(one, budget=0.15)
        # the verdict from interleaved rounds: the separate medians, taken a moment apart,
        # differed by 1.7x on this VM for the same thread count
        ratio = 1.0 / _paired_ratio(auto, ta, one, t1, 0.3)
        out.append({"name": case.name, "bytes": int(data.nbytes),
                    "auto_threads": _auto_threads(op, nthreads),
                    "auto_us": ta * 1e6, "one_us": t1 * 1e6, "ratio": ratio,
                    "ok": ratio <= 1.10, "bg_cpus": bg.stop()})
    return out


def concurrency(timer, rng, case=None, reps=None):
    """Two Python threads each running an independent large call (n_threads=1) vs one."""
    case = case or Case("avg2d", (32, 256, 56, 56), k=2, s=2)
    bg = Background()
    ops = []
    for _ in range(2):
        d = Data(case, rng, False)
        op = d.make_op()
        ops.append((op, np.empty(op.workspace_size, np.uint8), d))
    single, _, _ = timer(lambda: ops[0][0].execute(workspace=ops[0][1], n_threads=1))

    def two():
        barrier = threading.Barrier(3)
        done = []

        def work(op, ws):
            barrier.wait()
            op.execute(workspace=ws, n_threads=1)
        ths = [threading.Thread(target=work, args=(op, ws)) for op, ws, _ in ops]
        for th in ths:
            th.start()
        barrier.wait()
        t0, c0 = time.perf_counter(), time.process_time()
        for th in ths:
            th.join()
        done.append((time.perf_counter() - t0, time.process_time() - c0))
        return done[0]

    two()
    samples = [two() for _ in range(reps or max(5, timer.fixed or 0))]
    pair = statistics.median(w for w, _ in samples)
    # CPU time of the process over wall time: about 2 when both calls ran at once (the GIL
    # released), about 1 when they took turns.  A memory-bound call can take up to 2x as
    # long beside another without any serialisation (they share the bandwidth), so the
    # time ratio alone does not tell
    cpu_wall = statistics.median(c / w for w, c in samples)
    return {"case": case.name, "n_threads_per_call": 1, "one_call_ms": single * 1e3,
            "two_concurrent_ms": pair * 1e3, "ratio": pair / single,
            "cpu_per_wall": cpu_wall, "ok": pair < 1.5 * single or cpu_wall >= 1.5,
            "bg_cpus": bg.stop()}


# ------------------------------------------------------------------------------ report

def _loadavg():
    try:
        return list(os.getloadavg())
    except (AttributeError, OSError):
        return None


def _max_bg(runs):
    vals = [c.get("bg_cpus") for r in runs for c in r["cases"]]
    for r in runs:
        vals += [a.get("bg_cpus") for a in r.get("auto_vs_one", [])]
        vals.append((r.get("concurrency") or {}).get("bg_cpus"))
    vals = [v for v in vals if v is not None]
    return max(vals) if vals else None


def machine_info(torch_mod):
    cpu = platform.processor() or "?"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    info = {"cpu": cpu, "nproc": os.cpu_count(),
            "affinity": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
            else None,
            "platform": platform.platform(), "python": sys.version.split()[0],
            "numpy": np.__version__, "ml_dtypes": getattr(ml_dtypes, "__version__", None),
            "pool_grad": getattr(pg, "__version__", None),
            "pool_grad_path": os.path.dirname(pg.__file__),
            "torch": getattr(torch_mod, "__version__", None),
            "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
            "omp_num_threads_env": os.environ.get("OMP_NUM_THREADS"),
            "loadavg_start": _loadavg()}
    try:
        info["pool_grad_git"] = subprocess.run(
            ["git", "-C", info["pool_grad_path"], "describe", "--always", "--dirty"],
            capture_output=True, text=True, timeout=5).stdout.strip() or None
    except Exception:
        info["pool_grad_git"] = None
    # an installed package has no git checkout beside it: many_core.sh passes the commit
    info["pool_grad_git"] = info["pool_grad_git"] or os.environ.get("POOL_GRAD_GIT")
    try:
        from pool_grad import _config
        cfg = _config.config()
        info["pool_grad_config"] = {k: cfg[k] for k in cfg if k != "build"}
    except Exception:
        pass
    try:
        with open("/proc/meminfo") as f:
            info["mem_total_kb"] = int(f.readline().split()[1])
    except Exception:
        pass
    info["topology"] = cpu_topology()
    return info


def cpu_topology(root="/sys/devices/system/cpu"):
    """What Linux tells of the CPUs (None elsewhere): the CPU family and model, how many
    cores and sockets the visible CPUs are (16 vCPUs may be 8 cores with two hardware
    threads each, which share a core's caches and ports), and the caches of CPU 0 (level,
    type, size, how many CPUs share it)."""
    out = {}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                key = key.strip()
                if key in ("cpu family", "model", "stepping") and key not in out:
                    out[key] = value.strip()
                if not line.strip():
                    break
    except OSError:
        return None
    cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    cores, sockets = set(), set()
    for c in cpus:
        try:
            with open(f"{root}/cpu{c}/topology/core_id") as f:
                core = f.read().strip()
            with open(f"{root}/cpu{c}/topology/physical_package_id") as f:
                pkg = f.read().strip()
        except OSError:
            continue
        cores.add((pkg, core))
        sockets.add(pkg)
    if cores:
        out["cpus"], out["cores"], out["sockets"] = len(cpus), len(cores), len(sockets)
    caches = []
    for i in range(8):
        d = f"{root}/cpu0/cache/index{i}"
        try:
            fields = {}
            for name in ("level", "type", "size", "shared_cpu_list"):
                with open(f"{d}/{name}") as f:
                    fields[name] = f.read().strip()
        except OSError:
            continue
        caches.append(fields)
    if caches:
        out["caches"] = caches
    return out


def _f(x, fmt):
    return "-" if x is None else format(x, fmt)


def _pct(x):
    return "     -" if x is None else format(x, "5.0f") + "%"


def print_table(rows, nthreads, file=sys.stdout):
    w = max([len(r["name"]) for r in rows] + [4])
    head = (f"{'case':<{w}} {'pg ms':>9} {'GB/s':>6} {'%copy':>6} {'paired':>6} "
            f"{'%bound':>6} {'1shot ms':>9} {'torch ms':>9} {'speedup':>8} {'torch out':>9} "
            f"{'vs out':>7} {'ceil':>6} {'copy GB/s':>9} {'bg':>4}")
    print(f"\n== {nthreads} thread{'s' if nthreads != 1 else ''}  (pg ms: op.execute into "
          f"preallocated out, median; bg: CPUs busy with other processes)", file=file)
    print(head, file=file)
    print("-" * len(head), file=file)
    for r in rows:
        sp, so, ce = r.get("speedup"), r.get("speedup_out"), r.get("ceiling_out")
        print(f"{r['name']:<{w}} {_f(r['pg_ms'], '9.3f')} {_f(r['pg_gbps'], '6.1f')} "
              f"{_f(r['pct_copy'], '5.0f')}% {_f(r.get('pct_copy_paired'), '5.0f')}% "
              f"{_pct(r.get('pct_bound_paired'))} {_f(r['oneshot_ms'], '9.3f')} "
              f"{_f(r.get('torch_ms'), '9.3f')} {(_f(sp, '7.2f') + 'x') if sp else '       -'} "
              f"{_f(r.get('torch_out_ms'), '9.3f')} "
              f"{(_f(so, '6.2f') + 'x') if so else '      -'} "
              f"{(_f(ce, '5.1f') + 'x') if ce else '     -'} "
              f"{_f(r['copy_gbps'], '9.1f')} {_f(r.get('bg_cpus'), '4.1f')}", file=file)
    forms = {}
    for r in rows:
        forms.setdefault(r.get("store_form") or "-", []).append(r["name"])
    if len(forms) > 1 or "stream" in forms:
        print("store form each op kept (streamed or ordinary stores): " + "; ".join(
            f"{form}: {len(names)}" for form, names in sorted(forms.items())), file=file)
        for r in rows:
            if r.get("store_form") == "stream":
                print(f"  stream: {r['name']}", file=file)
    errs = [r for r in rows if r.get("torch_error")]
    for r in errs:
        print(f"  torch n/a for {r['name']}: {r['torch_error']}", file=file)
    mx = [r for r in rows if r.get("index_check_ms") is not None]
    if mx:
        print("index validation (op._kernel.count_bad_indices alone vs op.execute):",
              file=file)
        for r in mx:
            print(f"  {r['name']:<{w}} {r['index_check_ms']:8.3f} ms = "
                  f"{100 * r['index_check_share']:4.1f}% of execute", file=file)


def print_checks(res, file=sys.stdout):
    if "seed_us" in res:
        s = res["seed_us"]
        print(f"\nseed 1x16x4x4 k4 s1, per call: op.execute(workspace=ws) "
              f"{s['execute_ws_us']:.1f} us, op.execute() {s['execute_us']:.1f} us, "
              f"one-shot function {s['oneshot_us']:.1f} us, op construction "
              f"{s['construct_op_us']:.1f} us", file=file)
    if res.get("auto_vs_one"):
        print(f"\nauto thread choice (budget {res['threads']}) vs n_threads=1, small calls "
              f"(ok: auto <= 1.10 x one):", file=file)
        w = max(len(a["name"]) for a in res["auto_vs_one"])
        for a in res["auto_vs_one"]:
            print(f"  {a['name']:<{w}} {a['bytes'] / 1e6:7.3f} MB  auto={a['auto_threads']}"
                  f"  {a['auto_us']:9.1f} us vs {a['one_us']:9.1f} us  "
                  f"ratio {a['ratio']:5.2f}  {'ok' if a['ok'] else 'SLOWER'}"
                  f"{' (inconclusive: busy machine)' if (a.get('bg_cpus') or 0) > 0.25 else ''}"
                  f"  bg {_f(a.get('bg_cpus'), '.1f')}", file=file)
    if res.get("concurrency"):
        c = res["concurrency"]
        print(f"\nconcurrency ({c['case']}, n_threads=1 per call): one call "
              f"{c['one_call_ms']:.2f} ms, two calls in 2 Python threads "
              f"{c['two_concurrent_ms']:.2f} ms = {c['ratio']:.2f}x one call, CPU time / "
              f"wall {_f(c.get('cpu_per_wall'), '.2f')} "
              f"({'ok: GIL released' if c['ok'] else 'serialised?'}"
              f"{', inconclusive: busy machine' if (c.get('bg_cpus') or 0) > 0.25 else ''}; "
              f"bg {_f(c.get('bg_cpus'), '.1f')})", file=file)


def print_sweep(runs, file=sys.stdout):
    counts = [r["threads"] for r in runs]
    base = {c["name"]: c for c in runs[0]["cases"]}
    names = [c["name"] for c in runs[0]["cases"]]
    by = [{c["name"]: c for c in r["cases"]} for r in runs]
    w = max(len(n) for n in names)
    cols = "".join(f" {'pg ' + str(t) + 't':>9}" for t in counts)
    cols += "".join(f" {'x' + str(t):>6}" for t in counts[1:])
    cols += "".join(f" {'torch ' + str(t) + 't':>9}" for t in counts)
    print(f"\n== thread scaling (ms, median; xN = speed-up of N threads over "
          f"{counts[0]})", file=file)
    print(f"{'case':<{w}}{cols}", file=file)
    for n in names:
        line = f"{n:<{w}}"
        line += "".join(f" {b[n]['pg_ms']:9.3f}" for b in by)
        line += "".join(f" {base[n]['pg_ms'] / b[n]['pg_ms']:6.2f}" for b in by[1:])
        line += "".join(f" {_f(b[n].get('torch_ms'), '9.3f')}" for b in by)
        print(line, file=file)


# ------------------------------------------------------------------------------ main

def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, default=None,
                    help="threads for pool_grad and torch (default: pool_grad's default)")
    ap.add_argument("--sweep", default=None,
                    help="comma-separated thread counts: run every case at each, e.g. 1,2")
    ap.add_argument("--json", default=None, help="write all numbers + machine info here")
    ap.add_argument("--cases", default=None, help="only cases whose name contains this")
    ap.add_argument("--ops", default=None,
                    help="only these operators, comma-separated (avg2d, avg3d, aavg2d, "
                         "aavg3d, amax2d, amax3d, max2d, max3d)")
    ap.add_argument("--repeats", type=int, default=None,
                    help="repeats per measurement (default: adaptive, 5..50)")
    ap.add_argument("--budget", type=float, default=0.5,
                    help="seconds per measurement when repeats are adaptive (default 0.5)")
    ap.add_argument("--no-torch", action="store_true", help="skip PyTorch")
    ap.add_argument("--no-checks", action="store_true",
                    help="skip seed-us, auto-vs-1-thread and concurrency checks")
    ap.add_argument("--list", action="store_true", help="list the cases and exit")
    ap.add_argument("--shrink", type=int, default=1,
                    help="divide each case's batch (N) by this, at least 1: e.g. 8 puts "
                         "the large cases' 3-13 MB in a 32 MB last-level cache, as a "
                         "16-core machine's 300 MB cache holds the full ones")
    args = ap.parse_args(argv)

    cases = default_cases()
    if args.shrink > 1:
        cases = [shrunk(c, args.shrink) for c in cases if c.shape[0] > 1]
    smalls = small_cases()
    if args.ops:
        keep = set(args.ops.split(","))
        cases = [c for c in cases if c.op in keep]
    if args.cases:
        sub = args.cases.lower()
        cases = [c for c in cases if sub in c.name.lower()]
        smalls = [c for c in smalls if sub in c.name.lower()]
    if args.list:
        for c in cases:
            print(c.name)
        return 0

    torch_mod = None
    if not args.no_torch:
        try:
            import torch as torch_mod
        except ImportError:
            print("torch not installed: no PyTorch column", file=sys.stderr)

    if args.sweep:
        counts = [int(x) for x in args.sweep.split(",") if x.strip()]
    else:
        counts = [args.threads or pg.get_num_threads()]
    timer = Timer(args.budget, 5, 50, args.repeats)
    info = machine_info(torch_mod)
    print(f"pool_grad {info['pool_grad']} ({info['pool_grad_path']}, "
          f"{info.get('pool_grad_git')}), numpy {info['numpy']}, torch {info['torch']}")
    print(f"{info['cpu']}, {info['nproc']} cpus, {info['date']}")
    print("GB/s = (grad_output + grad_input [+ indices] bytes) / time; %copy = vs the best "
          "copy (np.copyto / OpenMP memcpy / OpenMP streaming) moving as many bytes; paired = "
          "the same ratio from interleaved rounds (median); %bound = time of an OpenMP pass "
          "that only reads the case's input bytes and writes its output bytes (a sample of "
          "the real result) / pg time, from interleaved rounds; speedup = torch ms (its "
          "call allocating the result) / pg ms; torch out = torch into a preallocated "
          "grad_input (aten's out= overload); vs out = torch out / pg ms")

    t_start = time.perf_counter()
    runs = []
    for n in counts:
        set_threads(n, torch_mod)
        rng = np.random.default_rng(0)
        copier = CopyBench(n)
        res = {"threads": n, "cases": []}
        try:
            for case in cases:
                r = run_case(case, n, timer, copier, torch_mod, rng)
                res["cases"].append(r)
                print(f"  .. {r['name']}: {r['pg_ms']:.3f} ms", file=sys.stderr, flush=True)
        finally:
            copier.close()
        if res["cases"]:
            print_table(res["cases"], n)
        if not args.no_checks:
            if not args.cases or "seed" in args.cases.lower():
                res["seed_us"] = seed_us(n, timer, rng)
            if n > 1:
                res["auto_vs_one"] = auto_vs_one(smalls, n, timer, rng)
            if not args.cases:
                res["concurrency"] = concurrency(timer, rng)
            print_checks(res)
        runs.append(res)
        sys.stdout.flush()
    if len(runs) > 1 and runs[0]["cases"]:
        print_sweep(runs)
    elapsed = time.perf_counter() - t_start
    info["loadavg_end"] = _loadavg()
    bgmax = _max_bg(runs)
    info["max_background_cpus"] = bgmax
    if bgmax is not None and bgmax > 0.25:
        print(f"\nWARNING: other processes kept up to {bgmax:.1f} CPUs busy during this run "
              f"(column bg); multi-threaded numbers are unreliable, rerun on a quiet machine")
    print(f"\ntotal benchmark time {elapsed:.0f} s")
    if args.json:
        doc = {"machine": info, "argv": sys.argv[1:], "repeats": args.repeats,
               "budget_s": args.budget, "elapsed_s": elapsed, "runs": runs}
        with open(args.json, "w") as f:
            json.dump(doc, f, indent=1)
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

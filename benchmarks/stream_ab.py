#!/usr/bin/env python
"""Streaming against ordinary stores, by thread count, on one machine (issue #4).

The library streams an output (cache-bypassing stores) when it is larger than the planned
threads' share of the last-level cache (``_plan.stream_bytes``).  That rule was set from
the 2-vCPU EPYC and from a 16-CPU Xeon whose 300 MB L3 holds the suite's outputs; this
script tells, on the machine it runs on, what either choice would cost.

For each case of bench.py's suite (``--cases`` filters by name) and each thread count of
``--threads``, three ops are planned on the same arrays: one with every output streamed
(``_plan.STREAM_BYTES = -1``), one with none (``_plan.stream_bytes`` patched to
infinity), both without a timed alternate (``_plan.TUNE_BYTES`` and
``_plan.TUNE_SHAPE_BYTES`` None: the planned shape of work, strips where they apply), and
one as the library plans it, run until its first calls have timed its forms and kept one
(``PlannedKernel.store_form``: "stream", "cache", or "cache rows" / "stream rows" for the
row form of planes that could go in strips; the tuned op can therefore be faster than
both fixed forms).  Rows too short to stream stay ordinary in both, so some
cases have one form only (ratio 1.00).  All the ops of a case then run in interleaved
rounds, in a fresh random order each round, timed twice:

* hot: right after another call on the same arrays (the benchmark's repeated calls),
* cold: right after a copy of twice the last-level cache, which evicts the arrays (a
  gradient whose grad_output was produced long ago and whose grad_input was not written
  recently).

It prints, per case and thread count, the median time of each form and the median of the
per-round ratios stream / ordinary, the form that the size rule alone plans (``rule``),
the form the library's op kept (``kept``) and its hot time over the faster form's.  No
PyTorch, no copy reference: the forms move the same bytes, so the ratio is the whole
answer.

    PYTHONPATH=. python benchmarks/stream_ab.py [--threads 8,16] [--rounds 15]
                                                [--cases SUBSTR] [--json FILE]
"""
import argparse
import json
import os
import random
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402  (the suite's cases and arrays)
import membw  # noqa: E402  (the OpenMP copy: benchmarks/membw.c)

import pool_grad as pg  # noqa: E402
from pool_grad import _plan  # noqa: E402


def _planned(data, threads, mode):
    """An op over data's arrays planned for `threads`, streaming every output ('stream'),
    none ('cache'), or as the library plans it ('tuned', run until it has kept a form)."""
    saved = (_plan.STREAM_BYTES, _plan.stream_bytes, _plan.TUNE_BYTES,
             _plan.TUNE_SHAPE_BYTES)
    pg.set_num_threads(threads)
    try:
        if mode == "stream":
            _plan.STREAM_BYTES, _plan.TUNE_BYTES, _plan.TUNE_SHAPE_BYTES = -1, None, None
        elif mode == "cache":
            _plan.stream_bytes = lambda t: _plan.NEVER
            _plan.TUNE_BYTES, _plan.TUNE_SHAPE_BYTES = None, None
        op = data.make_op()
    finally:
        (_plan.STREAM_BYTES, _plan.stream_bytes, _plan.TUNE_BYTES,
         _plan.TUNE_SHAPE_BYTES) = saved
    ws = np.empty(op.workspace_size, np.uint8)
    if mode == "tuned":
        kernel = getattr(op, "_kernel", None)
        for _ in range(getattr(kernel, "tune_calls", pg._kernels.TUNE_CALLS)):
            op.execute(workspace=ws, n_threads=threads)
    return op, ws


def _form(op):
    kernel = getattr(op, "_kernel", None)
    return getattr(kernel, "store_form", None) or "-"



class Evict:
    """A copy of twice the last-level cache through it, on every CPU."""

    def __init__(self):
        n = max(64 << 20, 2 * _plan.LLC_BYTES) // 8
        self.src, self.dst = np.ones(n), np.zeros(n)
        self.copy = membw.bound_copy(self.dst, self.src, os.cpu_count() or 1, False)

    def __call__(self):
        self.copy()


def run_case(case, thread_counts, rounds, evict, rng):
    data = bench.Data(case, rng, False)
    ops = {}
    for t in thread_counts:
        for mode in ("cache", "stream", "tuned"):
            ops[(t, mode)] = _planned(data, t, mode)
    times = {(k, state): [] for k in ops for state in ("hot", "cold")}
    keys = list(ops)
    for _ in range(rounds):
        random.shuffle(keys)
        for key in keys:
            op, ws = ops[key]
            t = key[0]
            op.execute(workspace=ws, n_threads=t)
            t0 = time.perf_counter()
            op.execute(workspace=ws, n_threads=t)
            times[(key, "hot")].append(time.perf_counter() - t0)
            evict()
            t0 = time.perf_counter()
            op.execute(workspace=ws, n_threads=t)
            times[(key, "cold")].append(time.perf_counter() - t0)
    res = {"name": case.name, "grad_input_bytes": int(data.gi.nbytes), "threads": {}}
    for t in thread_counts:
        row = {"rule": "stream" if data.gi.nbytes > _plan.stream_bytes(t) else "cache",
               "kept": _form(ops[(t, "tuned")][0])}
        for state in ("hot", "cold"):
            c, s = times[((t, "cache"), state)], times[((t, "stream"), state)]
            u = times[((t, "tuned"), state)]
            row[state] = {"cache_ms": statistics.median(c) * 1e3,
                          "stream_ms": statistics.median(s) * 1e3,
                          "tuned_ms": statistics.median(u) * 1e3,
                          "ratio": statistics.median(b / a for a, b in zip(c, s)),
                          "tuned_vs_best": statistics.median(
                              x / min(a, b) for a, b, x in zip(c, s, u)),
                          "cache_samples_ms": [x * 1e3 for x in c],
                          "stream_samples_ms": [x * 1e3 for x in s],
                          "tuned_samples_ms": [x * 1e3 for x in u]}
        res["threads"][t] = row
    return res


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", default="8,16" if (os.cpu_count() or 1) >= 16 else "1,2")
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--cases", default=None)
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    thread_counts = [int(x) for x in args.threads.split(",")]
    cases = [c for c in bench.default_cases() if c.shape[0] > 1
             and (args.cases is None or args.cases.lower() in c.name.lower())]
    rng = np.random.default_rng(0)
    random.seed(0)
    evict = Evict()
    print(f"LLC {_plan.LLC_BYTES / 2**20:.0f} MiB shared by {_plan.LLC_CPUS} CPUs; "
          f"{os.cpu_count()} CPUs; stream_bytes: "
          + ", ".join(f"{t} t {_plan.stream_bytes(t) / 2**20:.0f} MiB" for t in thread_counts))
    print(f"{'case':52} {'t':>3} {'rule':>6} {'kept':>6}  {'hot: cache':>10} {'stream':>8}"
          f" {'s/c':>5} {'kept/best':>9}  {'cold: cache':>11} {'stream':>8} {'s/c':>5}"
          f" {'kept/best':>9}")
    out = []
    for case in cases:
        r = run_case(case, thread_counts, args.rounds, evict, rng)
        out.append(r)
        for t, row in r["threads"].items():
            h, c = row["hot"], row["cold"]
            print(f"{r['name']:52} {t:>3} {row['rule']:>6} {row['kept']:>6}  "
                  f"{h['cache_ms']:10.3f} {h['stream_ms']:8.3f} {h['ratio']:5.2f} "
                  f"{h['tuned_vs_best']:9.2f}  {c['cache_ms']:11.3f} {c['stream_ms']:8.3f} "
                  f"{c['ratio']:5.2f} {c['tuned_vs_best']:9.2f}", flush=True)
    if args.json:
        info = {"cpu": bench.machine_info(None), "argv": sys.argv[1:],
                "llc_bytes": _plan.LLC_BYTES, "llc_cpus": _plan.LLC_CPUS, "cases": out}
        with open(args.json, "w") as f:
            json.dump(info, f, indent=1)
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()

#!/usr/bin/env python
"""NCHW average-pool gradients by plane width, outside the suite (issue #4's targets: the
traffic bound, and 16-bit no slower than float32 per element).

bench.py's avg_pool2d cases have planes of 112, 56 and 14 columns.  The kernels choose
their path by the width (lanes of eight planes through transposes for narrow planes,
planes folded into one item and streamed as a block up to 64 x 64, rows beyond), and
per-row costs weigh most on rows of a few dozen values, so this script sweeps the width:
for each call (k3s2p1, k3s1p1, k2s2 by default; any kKsSpP, such as k7s2p3, for windows
of more terms a value), width and dtype, 64 channels and a batch of about 25 M grad_input
values, it times op.execute() (bench.py's Timer) and, in the same run,
the traffic bound of the same bytes (bench.py's TrafficBound: read grad_output once,
write grad_input once, ordinary or streaming stores, the faster).  It prints the time,
the bound's share of it (100 % = at the bound), and for 16-bit dtypes the time against
float32's for as many values (the target: at most 1.0).

    PYTHONPATH=. python benchmarks/widths.py [--threads N] [--widths 14,20,28,...]
                                             [--calls k3s2p1,k3s1p1,k2s2,k7s2p3,...]
                                             [--dtypes float32,float16,bfloat16]
                                             [--json FILE]
"""
import argparse
import json
import platform
import re

import numpy as np

import pool_grad as pg
from bench import Timer, TrafficBound

try:
    import ml_dtypes
    _DTYPES = {"float32": np.dtype(np.float32), "float16": np.dtype(np.float16),
               "bfloat16": np.dtype(ml_dtypes.bfloat16)}
except ImportError:   # bfloat16 is skipped without ml_dtypes
    _DTYPES = {"float32": np.dtype(np.float32), "float16": np.dtype(np.float16)}

VALUES = 25 << 20     # grad_input values per call, about
CHANNELS = 64
CALLS = {"k3s2p1": (3, 2, 1), "k3s1p1": (3, 1, 1), "k2s2": (2, 2, 0)}


def _kernel(call):
    """(kernel, stride, padding) of a call named kKsS or kKsSpP (square windows)."""
    m = re.fullmatch(r"k(\d+)s(\d+)(?:p(\d+))?", call)
    if m is None:
        raise SystemExit(f"--calls: {call!r} is not kKsS or kKsSpP (e.g. k7s2p3)")
    return int(m.group(1)), int(m.group(2)), int(m.group(3) or 0)


def _op(width, call, dtype, rng):
    k, s, p = _kernel(call)
    n = max(1, VALUES // (CHANNELS * width * width))
    wo = (width + 2 * p - k) // s + 1
    go = rng.standard_normal((n, CHANNELS, wo, wo), np.float32).astype(dtype)
    gi = np.empty((n, CHANNELS, width, width), dtype)
    return pg.AvgPool2dBackward(go, gi, k, s, p, False, True, 0, 0, gi), go, gi


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--widths", default="14,20,24,28,32,40,56,112")
    ap.add_argument("--calls", default=",".join(CALLS))
    ap.add_argument("--dtypes", default=",".join(_DTYPES))
    ap.add_argument("--budget", type=float, default=0.5, help="seconds per measurement")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    nt = args.threads or pg.get_num_threads()
    timer = Timer(args.budget, 5, 50, None)
    bound = TrafficBound(nt)
    rng = np.random.default_rng(0)
    rows = []
    print(f"{'call':8s} {'W':>4s} {'dtype':9s} {'ms':>8s} {'bound ms':>9s} {'of bound':>8s}"
          f" {'vs f32':>7s}   ({nt} threads)")
    for call in args.calls.split(","):
        for width in (int(w) for w in args.widths.split(",")):
            f32_ms = None
            for name in args.dtypes.split(","):
                if name not in _DTYPES:
                    continue
                op, go, gi = _op(width, call, _DTYPES[name], rng)
                t, _, _ = timer(lambda: op.execute(n_threads=nt))
                op.execute(n_threads=nt)
                b = bound.run(go.nbytes, gi.nbytes, TrafficBound.sample(gi), timer)
                ms = t * 1e3
                f32_ms = ms if name == "float32" else f32_ms
                vs = ms / f32_ms if f32_ms and name != "float32" else None
                row = {"call": call, "width": width, "dtype": name, "ms": ms,
                       "bound_ms": b["best_ms"] if b else None, "vs_float32": vs,
                       "values": int(gi.size)}
                rows.append(row)
                share = f"{100 * b['best_ms'] / ms:7.0f}%" if b else "       -"
                print(f"{call:8s} {width:4d} {name:9s} {ms:8.3f} "
                      f"{b['best_ms'] if b else float('nan'):9.3f} {share}"
                      f" {'' if vs is None else f'{vs:7.2f}'}", flush=True)
                del op, go, gi
    slow = [r for r in rows if r["vs_float32"] is not None and r["vs_float32"] > 1.0]
    print(f"16-bit calls slower than float32 per value: {len(slow)} of "
          f"{sum(r['vs_float32'] is not None for r in rows)}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"machine": platform.platform(), "processor": platform.processor(),
                       "threads": nt, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()

#!/usr/bin/env python
"""What each kernel form gains: the form ledger's numbers (docs/forms.md).

For every benchmark case of bench.py, the op is planned as it is, then once with each form
of ``pool_grad._plan.FORMS`` turned off (``_plan.forms_off``).  Where turning a form off
changes the plan, the form serves the case, and the two ops are timed in interleaved
rounds (bench.py's paired ratio, both past their warm-up).  The gain is time(off) /
time(on) - 1: what the call loses without the form, to the form its rules take instead.

    python benchmarks/forms.py [--threads N] [--cases SUBSTR] [--forms a,b]
                               [--shrink K] [--budget S] [--json FILE]

Channels-last cases also run into a C-contiguous grad_input (what a one-shot call on
channels-last arrays returns), and NCHW max-pool cases into a channels-last one (the
forward's outputs with ``np.empty_like`` of a channels-last x).  --shrink 8 makes the large cases fit a 32 MB cache, where
the forms for outputs in the cache (strips, ordinary stores) are planned.  Run on an idle
machine.
"""
import argparse
import dataclasses
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402  (the cases, their arrays and the paired timing)

import pool_grad as pg  # noqa: E402
from pool_grad import _plan  # noqa: E402


def signature(op):
    """What the plan chose, as far as the kernels show it: equal signatures, one plan."""
    k = op._kernel
    if k is None:
        return None

    def choice(c):   # the kernel's form record, its tables as bytes
        return tuple(v.tobytes() if isinstance(v, np.ndarray) else
                     tuple(x.tobytes() if isinstance(x, np.ndarray) else x for x in v)
                     if isinstance(v, tuple) else v for v in dataclasses.astuple(c))

    def one(k):
        return (type(k).__name__, choice(k.choice), k.form, k.n_items, k.scratch_bytes,
                k.shared_bytes)

    return (one(k), tuple(one(a) for a in k.alternates), op.workspace_size)


def _time(fn, n=3):
    best = float("inf")
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def run_case(case, forms, budget, rng, into=None):
    data = bench.Data(case, rng, False)
    if into == "NCHW":
        # channels-last grad_output (and indices) into a C-contiguous grad_input: what a
        # one-shot call on channels-last arrays returns
        data.gi = np.zeros(data.gi.shape, data.gi.dtype)
    elif into == "NHWC":
        # C-contiguous grad_output and indices into a channels-last grad_input: the
        # forward's outputs with np.empty_like of a channels-last x
        order = (0,) + tuple(range(2, data.gi.ndim)) + (1,)
        back = (0, data.gi.ndim - 1) + tuple(range(1, data.gi.ndim - 1))
        data.gi = np.zeros(tuple(data.gi.shape[i] for i in order),
                           data.gi.dtype).transpose(back)
    base = data.make_op()
    sig = signature(base)
    ws = np.empty(base.workspace_size, np.uint8)
    kept = bench._settle(base, ws)
    name = case.name + (f" into {into}" if into else "")
    out = {"case": name, "plan": base.plan.item if sig else None, "kept": kept,
           "forms": {}}
    for form in forms:
        with _plan.forms_off(form):
            op = data.make_op()
        if signature(op) == sig:
            continue
        ws_off = np.empty(op.workspace_size, np.uint8)
        kept_off = bench._settle(op, ws_off)

        def on():
            base.execute(workspace=ws)

        def off():
            op.execute(workspace=ws_off)

        ratio = bench._paired_ratio(on, _time(on), off, _time(off), budget)
        k = op._kernel
        out["forms"][form] = {"gain": ratio - 1.0,
                              "instead": f"{getattr(k, 'c_item', '')} {kept_off}".strip()}
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--cases", default=None, help="only cases whose name contains this")
    ap.add_argument("--forms", default=None, help="comma-separated forms (default: all)")
    ap.add_argument("--shrink", type=int, default=1)
    ap.add_argument("--budget", type=float, default=0.6, help="seconds per paired ratio")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    forms = args.forms.split(",") if args.forms else list(_plan.FORMS)
    _plan.set_forms_off(())   # every form on unless the run turns it off
    if args.threads:
        pg.set_num_threads(args.threads)
    cases = [c for c in bench.default_cases() if "seed" not in c.name]
    if args.shrink > 1:
        cases = [bench.shrunk(c, args.shrink) for c in cases]
    if args.cases:
        cases = [c for c in cases if args.cases.lower() in c.name.lower()]
    rng = np.random.default_rng(0)
    runs = []
    print(f"threads {pg.get_num_threads()}, shrink {args.shrink}; gain = time without the "
          f"form / time with it - 1")
    for case in cases:
        intos = ((None, "NCHW") if case.layout == "CL"
                 else (None, "NHWC") if case.op in bench.Case.INDEXED else (None,))
        for into in intos:
            r = run_case(case, forms, args.budget, rng, into)
            runs.append(r)
            used = ", ".join(f"{f} {v['gain']:+.0%} ({v['instead']})"
                             for f, v in r["forms"].items()) or "-"
            print(f"{r['case']} [{r['plan']} {r['kept']}]: {used}", flush=True)
    print("\nper form: best gain over the cases it serves")
    for form in forms:
        gains = [(r["forms"][form]["gain"], r["case"]) for r in runs if form in r["forms"]]
        if gains:
            g, name = max(gains)
            print(f"  {form:13s} {g:+6.0%}  {name}  ({len(gains)} cases)")
        else:
            print(f"  {form:13s}   none")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"threads": pg.get_num_threads(), "shrink": args.shrink,
                       "machine": bench.machine_info(None), "runs": runs}, f, indent=1)


if __name__ == "__main__":
    main()

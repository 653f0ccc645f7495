#!/usr/bin/env python
"""What the max-pool gradient's index validation adds to op.execute (issue #4's target:
at most 10 %).

Execute checks every index before it writes anything (aclnn's contract: a bad index gives
error 161002 and an untouched grad_input), and it folds that check into a pass over the
indices it needs anyway: the pass that codes each index's place in its window for the
gather form, or the one that records each output row's index range for planes split into
blocks.  Timing that pass alone (bench.py's "index validation" check) therefore times the
read of the indices, not the validation.  This script measures the validation itself:

  1. it copies the source tree (tracked files) to a temporary directory and removes the
     range tests there: the OR of the int64 indices' high halves in the coding pass (an
     index in its own window needs no other test), the per-row test of the row ranges,
     and the separate count of planes that are not split or coded;
  2. it builds that copy in place and imports it beside the installed pool_grad, renamed
     pool_grad_unchecked (measurement only: that build writes out of bounds on a bad
     index, and it is deleted at the end);
  3. for each max-pool case of bench.py it alternates execute calls of the two builds on
     the same data and reports the median of the per-round ratios checked / unchecked.

    PYTHONPATH=. python benchmarks/index_check_cost.py [--threads N] [--rounds R]
                                                       [--cases SUBSTR]

Needs the build requirements (Cython, a C compiler with OpenMP) and git.
"""
import argparse
import importlib
import os
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

import bench  # noqa: E402
import pool_grad as pg  # noqa: E402

# (file, text in the checked source, text of the unchecked copy, how often the text occurs)
PATCHES = [
    ("pyx/pg_scatter.h",
     "    *hi = *hi | x0 | x1;",
     "    (void)hi;", 1),
    # the row ranges' test: rows of all lanes together, and rows of each lane
    ("pyx/_kernels.pyx",
     "                any_bad |= rng[2 * oh] < 0 or rng[2 * oh + 1] >= <int64_t>limit\n",
     "                pass\n", 2),
    ("pyx/_kernels.pyx",
     "            bad = self._count_bad(nt, ind, rng)\n        if bad:",
     "            bad = self._count_bad(nt, ind, rng) if rng != NULL else 0\n        if bad:", 1),
]


def build_unchecked(tmp):
    """The unchecked copy of the source tree, built; returns the directory holding
    pool_grad_unchecked."""
    src = os.path.join(tmp, "src")
    files = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, check=True,
                           capture_output=True).stdout.decode().split("\0")
    for f in filter(None, files):
        dst = os.path.join(src, f)
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        shutil.copy2(os.path.join(ROOT, f), dst)
    for name, old, new, times in PATCHES:
        path = os.path.join(src, name)
        with open(path) as fh:
            text = fh.read()
        if text.count(old) != times:
            sys.exit(f"index_check_cost: {name} no longer has the text this script removes "
                     f"(update PATCHES):\n{old}")
        with open(path, "w") as fh:
            fh.write(text.replace(old, new))
    print("building the unchecked copy ...", flush=True)
    done = subprocess.run([sys.executable, "setup.py", "-q", "build_ext", "--inplace"],
                          cwd=src, capture_output=True, text=True)
    if done.returncode:
        sys.exit(f"index_check_cost: the build failed:\n{done.stdout}\n{done.stderr}")
    pkg = os.path.join(tmp, "pkg")
    shutil.copytree(os.path.join(src, "pool_grad"), os.path.join(pkg, "pool_grad_unchecked"))
    return pkg


def make_op(data, module):
    saved = bench.pg
    bench.pg = module
    try:
        return data.make_op()
    finally:
        bench.pg = saved


def compare(case, unchecked, nt, rounds):
    data = bench.Data(case, np.random.default_rng(0), False)
    ops = [make_op(data, pg), make_op(data, unchecked)]
    assert type(ops[1]).__module__.startswith("pool_grad_unchecked")
    wss = [np.empty(op.workspace_size, np.uint8) for op in ops]
    for _ in range(3):
        for op, ws in zip(ops, wss):
            op.execute(workspace=ws, n_threads=nt)
    times = [[], []]
    for r in range(rounds):
        for which in ((0, 1) if r % 2 else (1, 0)):
            t = time.perf_counter()
            ops[which].execute(workspace=wss[which], n_threads=nt)
            times[which].append(time.perf_counter() - t)
    checked, plain = np.array(times[0]), np.array(times[1])
    ratio = checked / plain
    return np.median(checked), np.median(plain), np.quantile(ratio, [0.25, 0.5, 0.75])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", default="1,2",
                    help="comma-separated thread counts (default 1,2)")
    ap.add_argument("--rounds", type=int, default=40, help="alternating rounds (default 40)")
    ap.add_argument("--cases", default="adaptive_max",
                    help="substring of bench.py's case names (default: the max-pool cases)")
    args = ap.parse_args(argv)
    cases = [c for c in bench.default_cases()
             if c.op == "amax2d" and args.cases.lower() in c.name.lower()]
    if not cases:
        sys.exit("index_check_cost: no max-pool case matches --cases")
    with tempfile.TemporaryDirectory(prefix="pg_unchecked_") as tmp:
        sys.path.insert(0, build_unchecked(tmp))
        unchecked = importlib.import_module("pool_grad_unchecked")
        w = max(len(c.name) for c in cases)
        print(f"{'case':<{w}} thr  checked ms  unchecked ms  checked/unchecked q25 / median / q75")
        for nt in (int(x) for x in args.threads.split(",")):
            for case in cases:
                tc, tu, q = compare(case, unchecked, nt, args.rounds)
                print(f"{case.name:<{w}} {nt:3d}  {tc * 1e3:10.3f}  {tu * 1e3:12.3f}  "
                      f"{q[0]:.3f} / {q[1]:.3f} / {q[2]:.3f}", flush=True)
    print("validation's share of execute = 1 - 1 / (checked/unchecked); a ratio within "
          "about 0.03 of 1 is this VM's noise")


if __name__ == "__main__":
    main()

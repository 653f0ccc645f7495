"""Two builds of pool_grad's extension, timed against each other in one process.

    python benchmarks/ab_builds.py A.so B.so SPEC [SPEC ...] [--threads N]
        [--a-plan CODE] [--b-plan CODE] [--rounds R] [--ws-offset BYTES] [--no-check]

A.so and B.so are copies of ``pool_grad/_kernels*.so`` from two builds (copy the built file
aside before rebuilding).  Both are loaded as separate modules beside the package's own;
for each SPEC an operator is planned through each (the package's Python planning, its
kernel classes from that build) on the same arrays, both are run until their store forms
settle, their results are compared bit for bit, and then they are timed in interleaved
rounds (A then B, B then A, ...), each round a batch of calls of about 3 million output
values.  It prints each side's median time and the median (and quartiles) of the
per-round ratios B / A: on a machine whose speed drifts between runs, only such ratios are
worth comparing.

Both sides share one workspace buffer, and each round places it at another offset from a
page boundary (the same for A and B in that round; `--ws-offset` fixes one): a kernel's
time can depend on where in a page its scratch lies (1.5-2x at one offset in 32 for
17 x 17 k3s1p1 float32 on the 2-vCPU Cascade Lake, the same offset wherever the arrays,
the kernel object and the stack lay: presumably stores to the scratch that alias, modulo
4 KiB, loads from the process's fixed data), so a build whose scratch fell there, or
whose arrays fell elsewhere, would otherwise seem slower or faster for it.

SPEC is ``avg:NxCxHxW:k,s,p:DTYPE[:nhwc]`` (average pooling, count_include_pad),
``max:NxCxHxW:Ho,Wo:DTYPE[:nhwc]`` (adaptive max pooling, float32 forward for the indices)
or ``maxk:NxCxHxW:k,s,p:DTYPE[:nhwc]`` (max pooling with a kernel, dilation 1; a shape of
five sizes, NxCxDxHxW, is max_pool3d), DTYPE one of f32, f64, f16, bf16.  ``--a-plan`` / ``--b-plan`` run Python code in
``pool_grad._plan``'s namespace while that side's operator is planned (restored after),
for example ``--b-plan "PLANE_SLIDING_W = {}"``, so one build can be compared with itself
under two plans (give the same file twice).

Every loaded copy of the extension keeps its own default thread count, which
``pool_grad.set_num_threads`` sets only in the package's copy: this script sets it in
both (``--threads``; a copy left alone runs one thread).
"""
import argparse
import importlib.machinery
import importlib.util
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import pool_grad as pg  # noqa: E402
from pool_grad import _plan, _threads, ops  # noqa: E402

try:
    import ml_dtypes
except ImportError:   # bfloat16 specs need it
    ml_dtypes = None

DTYPES = {"f32": np.float32, "f64": np.float64, "f16": np.float16}
if ml_dtypes is not None:
    DTYPES["bf16"] = ml_dtypes.bfloat16


def load(path):
    """The extension file at `path` as a module of its own."""
    name = "pool_grad._kernels"
    loader = importlib.machinery.ExtensionFileLoader(name, path)
    spec = importlib.util.spec_from_file_location(name, path, loader=loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod


def _channels_last(a):
    nd = a.ndim
    return np.ascontiguousarray(a.transpose((0,) + tuple(range(2, nd)) + (1,))).transpose(
        (0, nd - 1) + tuple(range(1, nd - 1)))


def _clear_caches():
    for fn in list(vars(_plan).values()):
        if callable(getattr(fn, "cache_clear", None)):
            fn.cache_clear()


def make_arrays(spec, rng):
    """The arrays of `spec`: (operator, its parameters, grad_output, x, indices, grad_input)."""
    parts = spec.split(":")
    op, shape, params, dt = parts[:4]
    nhwc = len(parts) > 4 and parts[4] == "nhwc"
    shape = tuple(int(v) for v in shape.split("x"))
    dt = DTYPES[dt]
    x = np.zeros(shape, dt)
    if nhwc:
        x = _channels_last(x)
    idx = None
    if op == "avg":
        params = tuple(int(v) for v in params.split(","))
        go = rng.standard_normal(pg.avg_pool2d(x.astype(np.float32), *params).shape)
        go = go.astype(dt)
        if nhwc:
            go = _channels_last(go)
    elif op == "max":
        params = tuple(int(v) for v in params.split(","))
        xx = rng.standard_normal(shape).astype(np.float32)
        if nhwc:
            xx = _channels_last(xx)
        y, idx = pg.adaptive_max_pool2d(xx, params, return_indices=True)
        go = rng.standard_normal(y.shape).astype(dt)
    elif op == "maxk":
        params = tuple(int(v) for v in params.split(","))
        xx = rng.standard_normal(shape).astype(np.float32)
        fwd = pg.max_pool2d if len(shape) == 4 else pg.max_pool3d
        y, idx = fwd(xx, *params, return_indices=True)
        if nhwc:
            idx = _channels_last(idx)
        go = rng.standard_normal(y.shape).astype(dt)
        if nhwc:
            go = _channels_last(go)
    else:
        raise SystemExit(f"unknown operator in {spec!r} (avg, max or maxk)")
    return op, params, go, x, idx, np.empty_like(x)


def make_op(arrays, mod, plan_code):
    """The operator of `arrays` planned with the kernels of `mod` (and `plan_code` run in
    _plan's namespace meanwhile)."""
    op, params, go, x, idx, gi = arrays
    own, saved = ops._kernels, dict(vars(_plan))
    ops._kernels = mod
    _clear_caches()
    try:
        if plan_code:
            exec(plan_code, vars(_plan))
        if op == "avg":
            k, s, p = params
            return pg.AvgPool2dBackward(go, x, k, s, p, False, True, 0, 0, gi)
        if op == "maxk":
            k, s, p = params
            cls = pg.MaxPool2dWithIndicesBackward if x.ndim == 4 else \
                pg.MaxPool3dWithArgmaxBackward
            return cls(go, x, idx, k, s, p, 1, False, gi)
        return pg.AdaptiveMaxPool2dBackward(go, x, idx, gi)
    finally:
        ops._kernels = own
        vars(_plan).clear()
        vars(_plan).update(saved)
        _clear_caches()   # (geometry cached under this side's plan)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("specs", nargs="+")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--a-plan", default="")
    ap.add_argument("--b-plan", default="")
    ap.add_argument("--rounds", type=int, default=41)
    ap.add_argument("--ws-offset", type=int, default=None,
                    help="the workspace this many bytes past a page boundary in every "
                         "round (default: another multiple of 64 each round)")
    ap.add_argument("--no-check", action="store_true", help="skip the bitwise comparison")
    args = ap.parse_args(argv)
    mods = [load(args.a), load(args.b)]
    pg.set_num_threads(args.threads)
    for mod in mods:
        mod._set_thread_defaults(args.threads, _threads.CPU_COUNT)
        assert mod.default_threads() == args.threads
    for spec in args.specs:
        arrays = make_arrays(spec, np.random.default_rng(0))
        gi = arrays[-1]
        sides = [make_op(arrays, mod, code) for mod, code in zip(mods, (args.a_plan, args.b_plan))]
        need = max(o.workspace_size for o in sides)
        buf = np.empty(need + 8192, np.uint8)
        page = (-buf.ctypes.data) % 4096
        offsets = ([args.ws_offset % 4096] if args.ws_offset is not None else
                   list(np.random.default_rng(1).permutation(np.arange(0, 4096, 64))))
        results = []
        for o in sides:
            ws = buf[page + offsets[0]:page + offsets[0] + need]
            gi[...] = np.nan   # (what a side leaves unwritten differs from the other)
            for _ in range(40):   # through the store forms' timing
                o.execute(workspace=ws)
            results.append(gi.ravel(order="K").view(np.uint8).copy())
        if not args.no_check:
            assert np.array_equal(*results), f"{spec}: the two builds' bits differ"
        reps = max(1, int(3e6 // gi.size))
        times = [[], []]
        for r in range(args.rounds):
            off = page + offsets[r % len(offsets)]
            ws = buf[off:off + need]
            for i in ((0, 1) if r % 2 else (1, 0)):
                o = sides[i]
                t0 = time.perf_counter()
                for _ in range(reps):
                    o.execute(workspace=ws)
                times[i].append((time.perf_counter() - t0) / reps)
        ratios = sorted(tb / ta for ta, tb in zip(*times))
        n = len(ratios)
        forms = [o._kernel.store_form for o in sides]
        print(f"{spec:40s} {args.threads} t  A {np.median(times[0]) * 1e3:8.3f} ms  "
              f"B {np.median(times[1]) * 1e3:8.3f} ms  B/A {ratios[n // 2]:.3f} "
              f"[{ratios[n // 4]:.3f}, {ratios[3 * n // 4]:.3f}]  forms {forms}", flush=True)


if __name__ == "__main__":
    main()

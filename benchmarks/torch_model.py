#!/usr/bin/env python
"""Backward pass of a pooling-heavy PyTorch model, with PyTorch's own CPU pooling kernels
and with pool_grad's (``pool_grad.torch.enable()``), in one process (issue #58).

The model is ResNet-18-shaped but made of pooling: a 1x1 convolution stem (3 -> 16
channels; cheap, so that the gradient also reaches parameters), max_pool2d k3 s2 p1, then
four stages of two blocks (``h + (avg_pool2d(h, 3, 1, 1) + max_pool2d(h, 3, 1, 1)) / 2``),
each stage after the first entered through a downsampling that doubles the channels
(``cat(avg_pool2d(h, 2), max_pool2d(h, 3, 2, 1))``), and a head of
adaptive_avg_pool2d(2) and adaptive_max_pool2d(2) into a linear layer.  (An
adaptive_avg_pool2d to 1x1 would be no test: PyTorch computes it as a mean.)

Only ``loss.backward()`` is timed (the forward is the same code in both modes); every
repeat runs a fresh forward, the modes alternate, and the table gives the best and the
median of the repeats.  The gradients of both modes are compared.

    python benchmarks/torch_model.py [--small] [--batch B] [--size S] [--threads N]
                                     [--repeats R] [--dtype float32] [--channels-last]
                                     [--json FILE]

Defaults: 32x3x224x224 float32, all cores, 5 repeats (well under 2 minutes on 2 cores);
``--small``: 8x3x112x112.
"""
import argparse
import datetime
import json
import os
import platform
import statistics
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

import pool_grad
import pool_grad.torch as pgt


class PoolNet18(nn.Module):
    """Pooling in place of ResNet-18's convolutions (see the module docstring)."""

    def __init__(self, width=16, classes=10):
        super().__init__()
        self.stem = nn.Conv2d(3, width, 1)
        self.fc = nn.Linear(width * 8 * 2 * 2 * 2, classes)

    @staticmethod
    def block(h):
        return h + 0.5 * (F.avg_pool2d(h, 3, 1, 1, count_include_pad=False)
                          + F.max_pool2d(h, 3, 1, 1))

    def forward(self, x):
        h = F.max_pool2d(self.stem(x), 3, 2, 1)                  # 1/2 the input size
        for stage in range(4):
            if stage:                                             # 1/4, 1/8, 1/16
                h = torch.cat([F.avg_pool2d(h, 2), F.max_pool2d(h, 3, 2, 1)], 1)
            h = self.block(self.block(h))
        head = torch.cat([F.adaptive_avg_pool2d(h, 2).flatten(1),
                          F.adaptive_max_pool2d(h, 2).flatten(1)], 1)
        return self.fc(head)


def _backward_once(model, x, target):
    """One forward (untimed) and the timed backward; returns (seconds, gradients)."""
    model.zero_grad(set_to_none=True)
    x.grad = None
    loss = F.cross_entropy(model(x).float(), target)
    t0 = time.perf_counter()
    loss.backward()
    elapsed = time.perf_counter() - t0
    grads = [x.grad] + [p.grad for p in model.parameters()]
    return elapsed, grads


def run(batch, size, threads, repeats, dtype, channels_last):
    torch.manual_seed(0)
    torch.set_num_threads(threads)
    pool_grad.set_num_threads(threads)
    dt = getattr(torch, dtype)
    fmt = torch.channels_last if channels_last else torch.contiguous_format
    model = PoolNet18().to(dtype=dt, memory_format=fmt)
    x = torch.randn(batch, 3, size, size, dtype=dt).contiguous(memory_format=fmt)
    x.requires_grad_()
    target = torch.randint(0, 10, (batch,))

    times = {"torch": [], "pool_grad": []}
    grads = {}
    pgt.reset_call_counts()
    for mode in ("torch", "pool_grad"):   # warm-up (first-touch of memory, plans)
        with pgt.enable() if mode == "pool_grad" else _nothing():
            grads[mode] = _backward_once(model, x, target)[1]
    for r in range(repeats):
        order = ("torch", "pool_grad") if r % 2 == 0 else ("pool_grad", "torch")
        for mode in order:
            with pgt.enable() if mode == "pool_grad" else _nothing():
                times[mode].append(_backward_once(model, x, target)[0])
    counts = pgt.call_counts()
    diff = max(float((a.double() - b.double()).abs().max())
               for a, b in zip(grads["torch"], grads["pool_grad"]))
    scale = max(float(g.double().abs().max()) for g in grads["torch"])
    return times, counts, diff, scale


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--small", action="store_true", help="8x3x112x112 (a quick look)")
    ap.add_argument("--batch", type=int, help="batch size (default 32; 8 with --small)")
    ap.add_argument("--size", type=int, help="input height = width (default 224; 112 small)")
    ap.add_argument("--threads", type=int, default=None,
                    help="torch and pool_grad threads (default: the CPUs of this process)")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--dtype", default="float32",
                    choices=["float32", "float64", "float16", "bfloat16"])
    ap.add_argument("--channels-last", action="store_true")
    ap.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    args = ap.parse_args(argv)
    batch = args.batch or (8 if args.small else 32)
    size = args.size or (112 if args.small else 224)
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    threads = args.threads or cpus

    times, counts, diff, scale = run(batch, size, threads, args.repeats, args.dtype,
                                     args.channels_last)
    best = {m: min(t) for m, t in times.items()}
    med = {m: statistics.median(t) for m, t in times.items()}
    layout = "channels_last" if args.channels_last else "contiguous"
    print(f"PoolNet18 backward, input {batch}x3x{size}x{size} {args.dtype} {layout}; "
          f"{threads} threads on {cpus} CPUs; torch {torch.__version__}, pool_grad "
          f"{pool_grad.__version__}; best and median of {args.repeats}\n")
    print("| pooling backward kernels | best (ms) | median (ms) | speed-up (best) |")
    print("| --- | ---: | ---: | ---: |")
    for mode, label in (("torch", "PyTorch (aten CPU)"),
                        ("pool_grad", "pool_grad (`pool_grad.torch.enable()`)")):
        print(f"| {label} | {best[mode] * 1e3:.1f} | {med[mode] * 1e3:.1f} | "
              f"{best['torch'] / best[mode]:.2f}x |")
    ours = sum(n for (op, who), n in counts.items() if who == "pool_grad")
    theirs = sum(n for (op, who), n in counts.items() if who == "torch")
    print(f"\npool_grad computed {ours} pooling gradients ({theirs} handed back to PyTorch); "
          f"largest gradient difference {diff:.3g} (largest gradient {scale:.3g})")

    if args.json:
        record = {
            "benchmark": "torch_model", "model": "PoolNet18",
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(),
            "machine": {"cpus": cpus, "platform": platform.platform(),
                        "processor": platform.processor(), "python": sys.version.split()[0]},
            "torch": torch.__version__, "pool_grad": pool_grad.__version__,
            "config": {"batch": batch, "size": size, "dtype": args.dtype, "layout": layout,
                       "threads": threads, "repeats": args.repeats},
            "results": {m: {"best_s": best[m], "median_s": med[m], "times_s": times[m]}
                        for m in times},
            "speedup_best": best["torch"] / best["pool_grad"],
            "speedup_median": med["torch"] / med["pool_grad"],
            "calls": {f"{op}/{who}": n for (op, who), n in sorted(counts.items())},
            "max_abs_grad_diff": diff, "max_abs_grad": scale,
        }
        with open(args.json, "w") as f:
            json.dump(record, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())

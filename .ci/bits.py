"""Bit digests of pool_grad's results, to compare two builds (x86_64 and aarch64).

    python bits.py OUT.txt

Runs a fixed set of calls: every backward operator and the forward before it (whose
indices the max-pool backwards take), in float32, float64, float16 and bfloat16, NC(D)HW
and channels-last, several parameter sets (ceil_mode, padding, count_include_pad,
divisor_override, cube_math_type, dilation), small shapes and larger ones on 1 and 2
threads.  Writes one line per array: its name, dtype, shape and the sha256 of its bytes
in C order.  The inputs are listed too, so that a difference in the data itself shows as
such.  Exits non-zero if layouts or thread counts give different bits in this build.

The data are finite (a NaN's sign is not guaranteed between builds) and made from integers
scaled by powers of two, so that they are exact and do not depend on how numpy's random
floats are rounded on each machine.
"""
import hashlib
import sys
import zlib

import ml_dtypes
import numpy as np

import pool_grad as pg

SEED = 20240611
DTYPES = {"float32": np.float32, "float64": np.float64, "float16": np.float16,
          "bfloat16": ml_dtypes.bfloat16}
LAYOUTS = ("contiguous", "channels_last")

_rng = None
_lines = []


def values(shape, dtype):
    """Random finite values of `dtype`: k / 2**bits * 2**e, |k| < 2**bits, e in [-6, 6)."""
    bits = 52 if dtype == np.float64 else 23
    k = _rng.integers(-(2 ** bits) + 1, 2 ** bits, size=shape)
    e = _rng.integers(-6, 6, size=shape)
    return np.ldexp(k.astype(np.float64), e - bits).astype(dtype)


def in_layout(a, layout):
    """`a` (C order) stored in `layout`; channels-last keeps the logical N, C, ... shape."""
    if layout == "contiguous":
        return np.ascontiguousarray(a)
    order = [0] + list(range(2, a.ndim)) + [1]
    out = np.ascontiguousarray(a.transpose(order)).transpose(np.argsort(order))
    assert out.shape == a.shape and out.strides[1] == a.itemsize
    return out


def empty(shape, dtype, layout):
    return in_layout(np.zeros(shape, dtype), layout)


def record(name, a):
    a = np.asarray(a)
    digest = hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest()
    shape = "x".join(map(str, a.shape))
    _lines.append(f"{name} {a.dtype} {shape} {digest}")


def grad(name, fn, go, x, layout, *args, **kw):
    """fn(go, x.shape, *args, out=..., **kw), recorded; the out array in `layout`."""
    gi = fn(go, x.shape, *args, out=empty(x.shape, x.dtype, layout), **kw)
    record(name, gi)
    return gi


def case(tag, dtype, layout, shape, n_threads=None):
    """Every operator over one input shape (2-D and 3-D forms by the shape's rank); the
    data depend on the dtype and shape only, so that every layout and thread count must
    give the same bits (checked in main)."""
    global _rng
    _rng = np.random.default_rng([SEED, zlib.crc32(f"{np.dtype(dtype)}{shape}".encode())])
    x = in_layout(values(shape, dtype), layout)
    record(f"{tag}/x", x)
    kw = {} if n_threads is None else {"n_threads": n_threads}

    def go_for(y, name):
        go = in_layout(values(y.shape, dtype), layout)
        record(f"{tag}/{name}/grad_output", go)
        return go

    if x.ndim == 4:
        avg_sets = {"k3s2p1": ((3, 2, 1), {}),
                    "k3x2s2x1p1x0ceil_nopad": (((3, 2), (2, 1), (1, 0)),
                                               {"ceil_mode": True,
                                                "count_include_pad": False}),
                    "k2div3": ((2, None, 0), {"divisor_override": 3}),
                    "k3s1p1div-5": ((3, 1, 1), {"divisor_override": -5})}
        for name, (args, opts) in avg_sets.items():
            y = pg.avg_pool2d(x, *args, **opts)
            record(f"{tag}/avg2d_{name}/y", y)
            go = go_for(y, f"avg2d_{name}")
            grad(f"{tag}/avg2d_{name}/grad_input", pg.avg_pool2d_backward, go, x, layout,
                 *args, **opts, **kw)
            if dtype == np.float32 and name == "k3s2p1":
                for cube in (pg.ALLOW_FP32_DOWN_PRECISION, pg.USE_FP16, pg.USE_HF32):
                    grad(f"{tag}/avg2d_{name}_cube{cube}/grad_input", pg.avg_pool2d_backward,
                         go, x, layout, *args, cube_math_type=cube, **opts, **kw)
        for size in ((4, 5), (9, 16)):
            name = "adaptive_avg2d_%dx%d" % size
            y = pg.adaptive_avg_pool2d(x, size)
            record(f"{tag}/{name}/y", y)
            grad(f"{tag}/{name}/grad_input", pg.adaptive_avg_pool2d_backward,
                 go_for(y, name), x, layout, **kw)
        for size in ((4, 5), (5, 3)):
            name = "adaptive_max2d_%dx%d" % size
            y, idx = pg.adaptive_max_pool2d(x, size, return_indices=True)
            record(f"{tag}/{name}/y", y)
            record(f"{tag}/{name}/indices", idx)
            grad(f"{tag}/{name}/grad_input", pg.adaptive_max_pool2d_backward,
                 go_for(y, name), x, layout, idx, **kw)
        max_sets = {"k3s2p1": ((3, 2, 1, 1), {}),
                    "k3x2s2x1p1x1d1x2ceil": (((3, 2), (2, 1), (1, 1), (1, 2)),
                                             {"ceil_mode": True})}
        for name, (args, opts) in max_sets.items():
            y, idx = pg.max_pool2d(x, *args, return_indices=True, **opts)
            record(f"{tag}/max2d_{name}/y", y)
            record(f"{tag}/max2d_{name}/indices", idx)
            grad(f"{tag}/max2d_{name}/grad_input", pg.max_pool2d_with_indices_backward,
                 go_for(y, f"max2d_{name}"), x, layout, idx, *args, **opts, **kw)
    else:
        avg_sets = {"k3s2p1": ((3, 2, 1), {}),
                    "k2x3x2s1x2x2p1x1x0ceil_nopad": (((2, 3, 2), (1, 2, 2), (1, 1, 0)),
                                                     {"ceil_mode": True,
                                                      "count_include_pad": False}),
                    "k2div7": ((2, None, 0), {"divisor_override": 7})}
        for name, (args, opts) in avg_sets.items():
            y = pg.avg_pool3d(x, *args, **opts)
            record(f"{tag}/avg3d_{name}/y", y)
            grad(f"{tag}/avg3d_{name}/grad_input", pg.avg_pool3d_backward,
                 go_for(y, f"avg3d_{name}"), x, layout, *args, **opts, **kw)
        for size in ((3, 4, 2), (2, 9, 7)):
            name = "adaptive_avg3d_%dx%dx%d" % size
            y = pg.adaptive_avg_pool3d(x, size)
            record(f"{tag}/{name}/y", y)
            grad(f"{tag}/{name}/grad_input", pg.adaptive_avg_pool3d_backward,
                 go_for(y, name), x, layout, **kw)
        for size in ((3, 4, 2), (1, 5, 5)):
            name = "adaptive_max3d_%dx%dx%d" % size
            y, idx = pg.adaptive_max_pool3d(x, size, return_indices=True)
            record(f"{tag}/{name}/y", y)
            record(f"{tag}/{name}/indices", idx)
            grad(f"{tag}/{name}/grad_input", pg.adaptive_max_pool3d_backward,
                 go_for(y, name), x, layout, idx, **kw)
        max_sets = {"k3s2p1": ((3, 2, 1), {}),
                    "k2x3x3s1x2x2p0x1x1ceil": (((2, 3, 3), (1, 2, 2), (0, 1, 1)),
                                               {"ceil_mode": True})}
        for name, (args, opts) in max_sets.items():
            y, idx = pg.max_pool3d(x, *args, return_indices=True, **opts)
            record(f"{tag}/max3d_{name}/y", y)
            record(f"{tag}/max3d_{name}/indices", idx)
            grad(f"{tag}/max3d_{name}/grad_input", pg.max_pool3d_with_argmax_backward,
                 go_for(y, f"max3d_{name}"), x, layout, idx, *args, **opts, **kw)


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    for dname, dtype in DTYPES.items():
        for layout in LAYOUTS:
            case(f"{dname}/{layout}/small2d", dtype, layout, (2, 5, 13, 11))
            case(f"{dname}/{layout}/small3d", dtype, layout, (2, 3, 5, 7, 6))
            for threads in (1, 2):
                case(f"{dname}/{layout}/large2d/t{threads}", dtype, layout, (2, 32, 40, 40),
                     threads)
                case(f"{dname}/{layout}/large3d/t{threads}", dtype, layout,
                     (1, 16, 8, 20, 20), threads)
    with open(sys.argv[1], "w") as f:
        f.write("\n".join(_lines) + "\n")
    print(f"bits: {len(_lines)} digests written to {sys.argv[1]}")
    # the same array from every layout and thread count: one digest
    groups = {}
    for line in _lines:
        name, digest = line.split()[0], line.split()[-1]
        parts = name.split("/")
        key = "/".join([parts[0]] + [p for p in parts[2:] if p not in ("t1", "t2")])
        groups.setdefault(key, set()).add(digest)
    differ = sorted(key for key, digests in groups.items() if len(digests) > 1)
    if differ:
        sys.exit("bits: layouts or thread counts give different bits:\n  "
                 + "\n  ".join(differ))


if __name__ == "__main__":
    main()

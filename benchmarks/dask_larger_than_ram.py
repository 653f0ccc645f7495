"""A pooling gradient larger than RAM: pool_grad.dask from one zarr store into another.

grad_output (N, C, 32, 32, 32) is written once to ``<store>/grad_output.zarr`` (random
values; with ``--op max`` also window-consistent argmax indices), then the gradient of a
2x2x2, stride-2 average (or max) pooling, grad_input (N, C, 64, 64, 64), is computed lazily
with ``pool_grad.dask`` and streamed block by block into ``<store>/grad_input.zarr`` with
``dask.array.to_zarr``.  Only a few (1, C) blocks are in memory at a time: the peak memory
printed at the end stays flat however large ``--size`` is.  A few blocks are then checked
bitwise against the in-memory ``pool_grad`` call.

    python benchmarks/dask_larger_than_ram.py                  # 0.5 GiB grad_input (< 1 min)
    python benchmarks/dask_larger_than_ram.py --size 8 --op max
    python benchmarks/dask_larger_than_ram.py --beyond-ram     # 1.5 x this machine's RAM
    python benchmarks/dask_larger_than_ram.py --size 64 --scheduler distributed --workers 4

``--size`` is grad_input's size in GiB; ``--beyond-ram`` picks 1.5 times the machine's
physical memory (it needs that much free disk, and a while: it is checked before anything
is written).  An existing grad_output store of the same shape is reused (``--fresh``
rewrites it).  zarr has no bfloat16: with ``--dtype bfloat16`` the stores hold the raw
uint16 bits (attribute ``pool_grad_dtype``), viewed as bfloat16 block by block.

Needs: pip install "dask[array]" zarr   (and distributed for --scheduler distributed)
"""
import argparse
import math
import os
import resource
import shutil
import sys
import time

import numpy as np

try:
    import dask
    import dask.array as da
    import zarr
except ImportError as exc:
    sys.exit(f"{exc}: this example needs `pip install \"dask[array]\" zarr`")

import ml_dtypes

import pool_grad as pg
import pool_grad.dask as pgd

BF16 = np.dtype(ml_dtypes.bfloat16)
SPATIAL = (64, 64, 64)          # x's (D, H, W); grad_output's is half of it
KERNEL = 2
GIB = 1 << 30


def physical_memory():
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def peak_rss():
    """Peak resident memory of this process, in bytes (Linux: KiB; macOS: bytes)."""
    r = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return r if sys.platform == "darwin" else r * 1024


def storage_dtype(dtype):
    return np.dtype(np.uint16) if dtype == BF16 else dtype


def to_storage(arr):
    """bfloat16 as its uint16 bits (zarr has no bfloat16); other dtypes as they are."""
    if arr.dtype != BF16:
        return arr
    return arr.map_blocks(lambda b: b.view(np.uint16), dtype=np.uint16)


def from_storage(arr, dtype):
    if dtype != BF16:
        return arr
    return arr.map_blocks(lambda b: b.view(BF16), dtype=BF16)


def argmax_block(block, block_info=None):
    """Window-consistent flat indices d*H*W + h*W + w of a 2x2x2/stride-2 max pooling: one
    random position per window, seeded by the block's location (reproducible)."""
    loc = block_info[0]["chunk-location"]
    rng = np.random.default_rng([12345, *loc])
    D, H, W = SPATIAL
    od, oh, ow = block.shape[-3:]
    off = rng.integers(0, KERNEL, size=(3,) + block.shape, dtype=np.int32)
    d = np.arange(od, dtype=np.int32)[:, None, None] * KERNEL + off[0]
    h = np.arange(oh, dtype=np.int32)[None, :, None] * KERNEL + off[1]
    w = np.arange(ow, dtype=np.int32)[None, None, :] * KERNEL + off[2]
    return (d * H + h) * W + w


def open_or_create_inputs(store, shape, chunks, dtype, op, fresh):
    """grad_output (and indices) on disk: reused when present with this shape and dtype."""
    go_path = os.path.join(store, "grad_output.zarr")
    idx_path = os.path.join(store, "indices.zarr")
    want = {"shape": list(shape), "pool_grad_dtype": dtype.name}
    reuse = not fresh and os.path.isdir(go_path)
    if reuse:
        attrs = dict(zarr.open_array(go_path, mode="r").attrs)
        reuse = all(attrs.get(k) == val for k, val in want.items())
    if not reuse:
        t = time.perf_counter()
        rng = da.random.default_rng(2024)
        go = rng.standard_normal(shape, chunks=chunks, dtype=np.float32).astype(dtype)
        da.to_zarr(to_storage(go), go_path, overwrite=True)
        zarr.open_array(go_path, mode="r+").attrs.update(want)
        print(f"wrote {go_path}: {shape} {dtype.name} in {time.perf_counter() - t:.1f} s")
    go = from_storage(da.from_zarr(go_path), dtype)
    idx = None
    if op == "max":
        if not reuse or not os.path.isdir(idx_path):
            t = time.perf_counter()
            idx = go.map_blocks(argmax_block, dtype=np.int32)
            da.to_zarr(idx, idx_path, overwrite=True)
            print(f"wrote {idx_path}: int32 indices in {time.perf_counter() - t:.1f} s")
        idx = da.from_zarr(idx_path)
    return go, idx


def gradient(op, go, x_shape, idx, n_threads):
    if op == "avg":
        return pgd.avg_pool3d_backward(go, x_shape, kernel_size=KERNEL, stride=KERNEL,
                                       n_threads=n_threads)
    return pgd.max_pool3d_with_argmax_backward(go, x_shape, idx, kernel_size=KERNEL,
                                               stride=KERNEL, n_threads=n_threads)


def spot_check(op, go, x_shape, idx, gi_path, dtype, n_blocks=3):
    """A few (1, C) blocks of the stored result against the in-memory call, bitwise."""
    stored = from_storage(da.from_zarr(gi_path), dtype)
    rng = np.random.default_rng(0)
    for n in sorted(set(rng.integers(0, go.shape[0], n_blocks).tolist())):
        g = go[n:n + 1].compute()
        xs = (1,) + tuple(x_shape[1:])
        if op == "avg":
            ref = pg.avg_pool3d_backward(g, xs, KERNEL, KERNEL)
        else:
            ref = pg.max_pool3d_with_argmax_backward(g, xs, idx[n:n + 1].compute(), KERNEL,
                                                     KERNEL)
        got = stored[n:n + 1].compute()
        if got.dtype != ref.dtype or got.tobytes() != ref.tobytes():
            sys.exit(f"MISMATCH in batch {n}: the stored gradient differs from pool_grad's")
    print("spot check: stored blocks bitwise equal to the in-memory pool_grad call")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--store", default="pool_grad_dask_example",
                   help="directory for the zarr stores (default: %(default)s)")
    p.add_argument("--size", type=float, default=0.5,
                   help="grad_input's size in GiB (default %(default)s: under a minute)")
    p.add_argument("--beyond-ram", action="store_true",
                   help="size grad_input at 1.5x this machine's RAM (overrides --size)")
    p.add_argument("--op", choices=("avg", "max"), default="avg",
                   help="avg_pool3d_backward, or max_pool3d_with_argmax_backward")
    p.add_argument("--dtype", choices=("float32", "bfloat16"), default="float32")
    p.add_argument("--channels", type=int, default=16, help="C (one block holds all C "
                   "planes of one sample: C x 1 MiB of float32)")
    p.add_argument("--scheduler", choices=("threads", "distributed"), default="threads")
    p.add_argument("--workers", type=int, default=os.cpu_count(),
                   help="dask threads (threads) or worker processes (distributed)")
    p.add_argument("--n-threads", type=int, default=1,
                   help="pool_grad threads per block (default 1: dask runs blocks in "
                   "parallel)")
    p.add_argument("--fresh", action="store_true", help="rewrite grad_output even if present")
    p.add_argument("--keep", action="store_true", help="keep the stores afterwards")
    p.add_argument("--force", action="store_true", help="skip the free-disk check")
    a = p.parse_args(argv)

    dtype = BF16 if a.dtype == "bfloat16" else np.dtype(np.float32)
    size = 1.5 * physical_memory() if a.beyond_ram else a.size * GIB
    plane = math.prod(SPATIAL) * dtype.itemsize
    C = a.channels
    N = max(1, math.ceil(size / (plane * C)))
    x_shape = (N, C) + SPATIAL
    go_shape = (N, C) + tuple(s // KERNEL for s in SPATIAL)
    chunks = (1, C) + go_shape[2:]
    gi_bytes = math.prod(x_shape) * dtype.itemsize
    go_bytes = math.prod(go_shape) * dtype.itemsize
    idx_bytes = math.prod(go_shape) * 4 if a.op == "max" else 0
    need = gi_bytes + go_bytes + idx_bytes
    os.makedirs(a.store, exist_ok=True)
    free = shutil.disk_usage(a.store).free
    if need > free and not a.force:
        sys.exit(f"{a.store}: {free / GIB:.1f} GiB free, the stores may take up to "
                 f"{need / GIB:.1f} GiB (incompressible data); --force to try anyway")
    print(f"grad_input {x_shape} {dtype.name}: {gi_bytes / GIB:.2f} GiB "
          f"({gi_bytes / physical_memory():.2f} x this machine's "
          f"{physical_memory() / GIB:.1f} GiB of RAM); {N} blocks of "
          f"{gi_bytes / N / 2**20:.0f} MiB")

    client = cluster = None
    if a.scheduler == "distributed":
        from dask.distributed import Client, LocalCluster
        cluster = LocalCluster(n_workers=a.workers, threads_per_worker=1, processes=True,
                               dashboard_address=None)
        client = Client(cluster)
        print(f"dask.distributed: {a.workers} worker processes, 1 thread each")
    else:
        dask.config.set(scheduler="threads", num_workers=a.workers)
    try:
        go, idx = open_or_create_inputs(a.store, go_shape, chunks, dtype, a.op, a.fresh)
        gi = gradient(a.op, go, x_shape, idx, a.n_threads)    # lazy: nothing computed yet
        gi_path = os.path.join(a.store, "grad_input.zarr")
        t = time.perf_counter()
        da.to_zarr(to_storage(gi), gi_path, overwrite=True)   # streamed, block by block
        dt = time.perf_counter() - t
        zarr.open_array(gi_path, mode="r+").attrs.update({"pool_grad_dtype": dtype.name})
        print(f"{a.op}_pool3d gradient -> {gi_path}: {dt:.1f} s, "
              f"{gi_bytes / GIB / dt:.2f} GiB/s written")
        spot_check(a.op, go, x_shape, idx, gi_path, dtype)
        if client is None:
            print(f"peak memory of this process: {peak_rss() / 2**20:.0f} MiB "
                  f"(grad_input alone is {gi_bytes / 2**20:.0f} MiB)")
    finally:
        if client is not None:
            client.close()
            cluster.close()
    if not a.keep:
        for name in ("grad_output.zarr", "indices.zarr", "grad_input.zarr"):
            shutil.rmtree(os.path.join(a.store, name), ignore_errors=True)
        try:
            os.rmdir(a.store)
        except OSError:
            pass


if __name__ == "__main__":
    main()

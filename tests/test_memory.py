"""Memory (issue #6, point 3): 100 000 small calls and 1 000 large ones, through every
layer and operator, grow the resident set by less than 1 MB; Python-level allocations do
not accumulate (tracemalloc); Streams do not leak their worker threads.

The loops run in a fresh subprocess so that the figures are not disturbed by the rest of
the suite.  The AddressSanitizer run of the whole suite is documented in the README."""
import json
import subprocess

from conftest import child_kwargs
import sys
import textwrap

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="reads /proc/self/statm")

_LOOP = textwrap.dedent("""
    import gc, json, os, sys, time, tracemalloc
    import numpy as np, ml_dtypes, pool_grad as pg
    from pool_grad import aclnn

    PAGE = os.sysconf("SC_PAGE_SIZE")
    def rss():
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * PAGE

    rng = np.random.default_rng(0)
    f32, bf16 = np.float32, ml_dtypes.bfloat16
    # small calls: planning + execute (functions, objects, aclnn) and bare re-executes
    s_go = rng.random((1, 3, 3, 3)).astype(f32)
    s_gi = np.empty((1, 3, 6, 6), f32)
    s_go3 = rng.random((1, 2, 2, 2, 3)).astype(bf16)
    s_gi3 = np.empty((1, 2, 3, 5, 4), bf16)
    s_ind = rng.integers(0, 36, (1, 3, 3, 3)).astype(np.int32)
    s_bad = s_ind.copy(); s_bad[0, 0, 0, 0] = 36
    s_go5 = rng.random((1, 2, 2, 2, 2)).astype(f32)
    s_gi5 = np.empty((1, 2, 4, 4, 4), f32)
    s_ind5 = rng.integers(0, 64, (1, 2, 2, 2, 2)).astype(np.int64)
    ops = [pg.AvgPool2dBackward(s_go, s_gi, 2, 2, 0, False, True, 0, 0, s_gi),
           pg.AdaptiveAvgPool3dBackward(s_go3, s_gi3.shape, s_gi3),
           pg.AdaptiveMaxPool2dBackward(s_go, s_gi.shape, s_ind, s_gi),
           pg.AvgPool3dBackward(s_go5, s_gi5.shape, 2, 2, 0, False, True, 0, s_gi5),
           pg.AdaptiveAvgPool2dBackward(s_go, s_gi.shape, s_gi),
           pg.AdaptiveMaxPool3dBackward(s_go5, s_gi5.shape, s_ind5, s_gi5),
           pg.MaxPool2dWithIndicesBackward(s_go, s_gi.shape, s_ind, 2, 2, 0, 1, False, s_gi),
           pg.MaxPool3dWithArgmaxBackward(s_go5, s_gi5.shape, s_ind5, 2, 2, 0, 1, False,
                                          s_gi5)]
    bad_op = pg.AdaptiveMaxPool2dBackward(s_go, s_gi.shape, s_bad, s_gi)
    ws = [np.empty(max(op.workspace_size, 1), np.uint8) for op in ops]
    stream = pg.Stream()

    def small(i):
        r = i % 20
        if r == 0:
            pg.avg_pool2d_backward(s_go, s_gi.shape, 2, 2, ceil_mode=True)
        elif r == 1:
            pg.adaptive_avg_pool3d_backward(s_go3, s_gi3.shape, out=s_gi3)
        elif r == 2:
            pg.adaptive_max_pool2d_backward(s_go, s_gi.shape, s_ind)
        elif r == 3:
            size, ex = aclnn.aclnnAvgPool2dBackwardGetWorkspaceSize(
                s_go, s_gi, [2, 2], [2, 2], [0, 0], False, True, 0, 0, s_gi)
            aclnn.aclnnAvgPool2dBackward(np.empty(size, np.uint8), size, ex, None)
        elif r == 4:  # errors must not leak either
            try:
                pg.avg_pool2d_backward(s_go, s_gi.shape, 3)
            except pg.AclnnError:
                pass
        elif r == 5:
            try:
                bad_op.execute()
            except pg.AclnnError:
                pass
        elif r == 6:
            ops[i % len(ops)].execute(stream=stream)
            if i % 100 == 6:
                stream.synchronize()
        elif r == 7:
            pg.max_pool3d_with_argmax_backward(s_go5, s_gi5.shape, s_ind5, 2)
        elif r == 8:
            pg.max_pool2d_with_indices_backward(s_go, s_gi.shape, s_ind, 2, out=s_gi)
        elif r == 9:
            pg.avg_pool3d_backward(s_go5, s_gi5.shape, 2, 2)
        else:
            k = i % len(ops)
            ops[k].execute(workspace=ws[k] if i % 2 else None)

    l_go = rng.random((2, 32, 32, 32)).astype(f32)
    l_gi = np.empty((2, 32, 64, 64), f32)
    l_ind = rng.integers(0, 64 * 64, (2, 32, 32, 32)).astype(np.int64)
    l_go3 = rng.random((2, 16, 4, 16, 16)).astype(np.float64)
    l_go5 = rng.random((2, 16, 4, 16, 16)).astype(f32)
    l_gi5 = np.empty((2, 16, 8, 32, 32), f32)
    l_ind5 = rng.integers(0, 8 * 32 * 32, (2, 16, 4, 16, 16)).astype(np.int32)
    def large(i):
        r = i % 6
        if r == 0:
            pg.avg_pool2d_backward(l_go, l_gi.shape, 3, 2, 1, out=l_gi)
        elif r == 1:
            pg.adaptive_max_pool2d_backward(l_go, l_gi.shape, l_ind)
        elif r == 2:
            pg.adaptive_avg_pool3d_backward(l_go3, (2, 16, 7, 30, 30))
        elif r == 3:
            pg.avg_pool2d_backward(l_go, l_gi.shape, 2)
        elif r == 4:
            pg.max_pool3d_with_argmax_backward(l_go5, l_gi5.shape, l_ind5, 2, out=l_gi5)
        else:
            pg.avg_pool3d_backward(l_go5, l_gi5.shape, 2)

    n_small, n_large = int(sys.argv[1]), int(sys.argv[2])
    for i in range(2000): small(i)          # warm-up: caches, arenas, thread pools
    for i in range(40): large(i)
    stream.synchronize()
    gc.collect()
    t0 = time.perf_counter(); r0 = rss()
    for i in range(n_small): small(i)
    stream.synchronize()
    gc.collect(); r1 = rss(); t1 = time.perf_counter()
    for i in range(n_large): large(i)
    gc.collect(); r2 = rss(); t2 = time.perf_counter()
    # Python-level objects: a traced loop must not leave allocations behind
    tracemalloc.start()
    for i in range(2000): small(i)
    stream.synchronize(); gc.collect()
    snap0 = tracemalloc.take_snapshot()
    for i in range(5000): small(i)
    stream.synchronize(); gc.collect()
    snap1 = tracemalloc.take_snapshot()
    diff = snap1.compare_to(snap0, "traceback")
    grown = sum(s.size_diff for s in diff)
    # objects that accumulate with the number of calls (a one-off buffer alive at the
    # snapshot is not a leak)
    piling = sum(s.size_diff for s in diff if s.count_diff >= 50)
    print(json.dumps(dict(rss0=r0, small=r1 - r0, large=r2 - r1, total=r2 - r0,
                          traced=grown, piling=piling, t_small=t1 - t0, t_large=t2 - t1)))
""")


def test_rss_growth_under_1mb():
    proc = subprocess.run([sys.executable, "-c", _LOOP, "100000", "1000"], **child_kwargs(),
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    print(res)
    assert res["small"] < 1 << 20, res
    assert res["large"] < 1 << 20, res
    assert res["total"] < 1 << 20, res
    assert res["piling"] < 64 << 10, res


_STREAMS = textwrap.dedent("""
    import gc, threading, numpy as np, pool_grad as pg
    go = np.ones((1, 1, 2, 2), np.float32); gi = np.empty((1, 1, 4, 4), np.float32)
    op = pg.AvgPool2dBackward(go, gi, 2, 2, 0, False, True, 0, 0, gi)
    base = threading.active_count()
    for i in range(200):
        s = pg.Stream()
        op.execute(stream=s)
        s.synchronize()
        del s
    gc.collect()
    print(threading.active_count() - base)
""")


def test_dropped_streams_release_their_threads():
    """A Stream that is synchronized and dropped must not keep a worker thread (and its
    queue) alive forever: 200 such streams may leave at most a handful of threads."""
    proc = subprocess.run([sys.executable, "-c", _STREAMS], capture_output=True, text=True,
                          **child_kwargs(),
                          timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    extra = int(proc.stdout.strip().splitlines()[-1])
    assert extra <= 2, f"{extra} stream worker threads still alive after 200 dropped streams"


def test_one_shot_functions_keep_no_caller_array_alive():
    """The functions cache the plan of each validated configuration; that cache must not
    hold on to the arrays of the call that built it (nor to the result it returned)."""
    import gc
    import weakref

    import numpy as np

    import pool_grad as pg

    def refs_after(call):
        arrays = call()
        refs = [weakref.ref(a) for a in arrays]
        del arrays
        gc.collect()
        return [r() is None for r in refs]

    def avg():
        go = np.ones((2, 3, 7, 5), np.float32)
        return go, pg.avg_pool2d_backward(go, (2, 3, 14, 10), 2, 2, 0)

    def adaptive():
        go = np.ones((2, 3, 2, 3, 4), np.float32)
        return go, pg.adaptive_avg_pool3d_backward(go, (2, 3, 4, 6, 8))

    def max_():
        x = np.random.default_rng(0).random((2, 3, 9, 9)).astype(np.float32)
        y, ind = pg.adaptive_max_pool2d(x, 4, return_indices=True)
        return y, ind, pg.adaptive_max_pool2d_backward(y, x, ind)

    for call in (avg, adaptive, max_):
        for _ in range(2):  # the first call plans and caches, the second uses the cache
            assert all(refs_after(call)), call.__name__

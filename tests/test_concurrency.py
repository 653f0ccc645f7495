"""Concurrency (issue #6, point 4): the same op and different ops executed at once from 8
Python threads give bitwise the results of serial runs; Streams keep submission order; a
failing call on a Stream does not stop later ones, and synchronize re-raises it once."""
import threading

import ml_dtypes
import numpy as np
import pytest

import pool_grad as pg

N_THREADS = 8


def _cases(rng):
    """(name, make) pairs: make(out) -> a planned op writing into `out`, plus out's shape
    and dtype."""
    go_a = rng.random((2, 8, 21, 21)).astype(np.float32)
    go_b = rng.random((2, 4, 3, 5, 7)).astype(ml_dtypes.bfloat16)
    go_c = rng.random((2, 8, 9, 9)).astype(np.float64)
    ind_c = rng.integers(0, 40 * 40, (2, 8, 9, 9)).astype(np.int64)
    ind_c[:, :, 0, :] = 7  # repeated indices: the accumulation order must not vary
    go_d = rng.random((2, 4, 4, 6, 7)).astype(np.float32)
    go_e = rng.random((2, 8, 9, 13)).astype(np.float16)
    go_f = rng.random((2, 4, 4, 6, 7)).astype(ml_dtypes.bfloat16)
    ind_f = rng.integers(0, 6 * 11 * 13, (2, 4, 4, 6, 7)).astype(np.int32)
    ind_f[:, :, 0] = 5
    go_g = rng.random((2, 4, 3, 5, 4)).astype(np.float32)
    ind_g = rng.integers(0, 6 * 11 * 13, (2, 4, 3, 5, 4)).astype(np.int64)
    ind_g[:, :, :, 0] = 9
    go_h = rng.random((2, 8, 19, 19)).astype(np.float32)
    ind_h = rng.integers(0, 40 * 40, (2, 8, 19, 19)).astype(np.int64)
    ind_h[:, :, 0, :] = 3
    return [
        ("avg", (2, 8, 40, 40), np.float32,
         lambda out: pg.AvgPool2dBackward(go_a, out.shape, 3, 2, 1, True, False, 0, 0, out)),
        ("adaptive", (2, 4, 7, 13, 11), ml_dtypes.bfloat16,
         lambda out: pg.AdaptiveAvgPool3dBackward(go_b, out.shape, out)),
        ("max", (2, 8, 40, 40), np.float64,
         lambda out: pg.AdaptiveMaxPool2dBackward(go_c, out.shape, ind_c, out)),
        # the operators of SPEC section 6
        ("avg3d", (2, 4, 6, 11, 13), np.float32,
         lambda out: pg.AvgPool3dBackward(go_d, out.shape, 3, 2, 1, True, False, 0, out)),
        ("adaptive2d", (2, 8, 40, 40), np.float16,
         lambda out: pg.AdaptiveAvgPool2dBackward(go_e, out.shape, out)),
        ("max3d", (2, 4, 6, 11, 13), ml_dtypes.bfloat16,
         lambda out: pg.MaxPool3dWithArgmaxBackward(go_f, out.shape, ind_f, 3, 2, 1, 1,
                                                    True, out)),
        ("amax3d", (2, 4, 6, 11, 13), np.float32,
         lambda out: pg.AdaptiveMaxPool3dBackward(go_g, out.shape, ind_g, out)),
        ("max2d", (2, 8, 40, 40), np.float32,
         lambda out: pg.MaxPool2dWithIndicesBackward(go_h, out.shape, ind_h, 3, 2, 1, 2,
                                                     False, out)),
    ]


def _serial(cases):
    want = {}
    for name, shape, dtype, make in cases:
        out = np.zeros(shape, dtype)
        make(out).execute(n_threads=1)
        want[name] = out
    return want


def _run_threads(target, n=N_THREADS):
    errors = []
    barrier = threading.Barrier(n)

    def wrap(i):
        try:
            barrier.wait()
            target(i)
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=wrap, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
        assert not t.is_alive(), "a thread hung"
    if errors:
        raise errors[0]


def test_different_ops_from_8_threads_bitwise_equal_serial():
    cases = _cases(np.random.default_rng(0))
    want = _serial(cases)
    results = {}

    def work(i):
        name, shape, dtype, make = cases[i % len(cases)]
        for rep in range(6):
            out = np.full(shape, np.nan, dtype)
            make(out).execute(n_threads=[None, 1, 2, 3][(i + rep) % 4])
            results.setdefault((i, rep), (name, out))

    _run_threads(work)
    for (i, rep), (name, out) in results.items():
        assert np.array_equal(out.view(np.uint8), want[name].view(np.uint8)), (name, i, rep)


def test_same_op_from_8_threads_bitwise_equal_serial():
    """One planned op per operator executed at once from 8 threads (each with its own
    workspace, or None): every run writes the same bits."""
    for name, shape, dtype, make in _cases(np.random.default_rng(1)):
        out = np.zeros(shape, dtype)
        op = make(out)
        op.execute(n_threads=1)
        want = out.copy()
        out[...] = 0

        def work(i):
            ws = np.empty(op.workspace_size, np.uint8) if i % 2 else None
            for _ in range(5):
                op.execute(workspace=ws, n_threads=1 + i % 3)

        _run_threads(work)
        assert np.array_equal(out.view(np.uint8), want.view(np.uint8)), name


def test_function_calls_from_8_threads():
    rng = np.random.default_rng(2)
    gos = [rng.random((1, 4, 16, 16)).astype(np.float16) for _ in range(N_THREADS)]
    want = [pg.avg_pool2d_backward(g, (1, 4, 32, 32), 2, n_threads=1) for g in gos]
    got = [None] * N_THREADS

    def work(i):
        for _ in range(20):
            got[i] = pg.avg_pool2d_backward(gos[i], (1, 4, 32, 32), 2)

    _run_threads(work)
    for g, w in zip(got, want):
        assert np.array_equal(g.view(np.uint16), w.view(np.uint16))


def test_stream_keeps_submission_order():
    """Each op reads the grad_input the previous one wrote (a chain): only in-order
    execution gives the serial answer."""
    n = 30
    bufs = [np.zeros((1, 1, 4, 4), np.float64) for _ in range(n + 1)]
    bufs[0][...] = np.arange(16).reshape(1, 1, 4, 4)
    # adaptive avg 3d with out = in: each step is an identity-shaped smoothing of the last
    ops = []
    for k in range(n):
        go = bufs[k][:, :, None]          # (1, 1, 1, 4, 4) view of the previous result
        out = bufs[k + 1][:, :, None]
        ops.append(pg.AdaptiveAvgPool3dBackward(go, (1, 1, 1, 4, 4), out))
    s = pg.Stream()
    for op in ops:
        op.execute(stream=s)
    s.synchronize()
    want = bufs[0].copy()
    for k in range(n):
        want = want.copy()  # identity (out size == in size): each step copies
    assert np.array_equal(bufs[n], want)
    # a chain that changes values: avg 2x2 backward then forward shape again
    x = np.zeros((1, 1, 8, 8))
    seq = []
    s2 = pg.Stream()
    outs = [np.zeros((1, 1, 8, 8)) for _ in range(n)]
    go = np.ones((1, 1, 4, 4))
    for k in range(n):
        g = go if k == 0 else outs[k - 1][:, :, ::2, ::2]
        op = pg.AvgPool2dBackward(g, x.shape, 2, 2, 0, False, True, 0, 0, outs[k])
        op.execute(stream=s2)
        seq.append(op)
    s2.synchronize()
    assert np.allclose(outs[-1], 0.25 ** n)


def test_stream_failure_does_not_stop_later_jobs_and_is_raised_once():
    go = np.ones((1, 1, 2, 2), np.float32)
    bad_ind = np.full((1, 1, 2, 2), 99, np.int64)
    good_ind = np.zeros((1, 1, 2, 2), np.int64)
    gi_bad = np.full((1, 1, 4, 4), 7, np.float32)
    gi_good = np.zeros((1, 1, 4, 4), np.float32)
    gi_after = np.zeros((1, 1, 4, 4), np.float32)
    bad = pg.AdaptiveMaxPool2dBackward(go, gi_bad.shape, bad_ind, gi_bad)
    good = pg.AdaptiveMaxPool2dBackward(go, gi_good.shape, good_ind, gi_good)
    after = pg.AvgPool2dBackward(go, gi_after.shape, 2, 2, 0, False, True, 0, 0, gi_after)
    s = pg.Stream()
    good.execute(stream=s)
    bad.execute(stream=s)      # fails on the worker (index 99 outside the 4x4 plane)
    after.execute(stream=s)    # must still run
    bad.execute(stream=s)      # a second failure: only the first is raised
    with pytest.raises(pg.ParamInvalidError) as info:
        s.synchronize()
    assert info.value.code == pg.ACLNN_ERR_PARAM_INVALID
    assert "indices" in str(info.value)
    assert gi_good[0, 0, 0, 0] == 4 and gi_good.sum() == 4
    assert np.all(gi_bad == 7), "a failed execute wrote grad_input"
    assert np.all(gi_after == 0.25)
    s.synchronize()            # raised once: the next synchronize is clean
    after.execute(stream=s)
    s.synchronize()


def test_streams_from_8_threads():
    """8 threads each drive their own Stream and one shared Stream at once."""
    cases = _cases(np.random.default_rng(3))
    want = _serial(cases)
    shared = pg.Stream()
    outs = {}

    def work(i):
        own = pg.Stream()
        name, shape, dtype, make = cases[i % len(cases)]
        mine = [np.full(shape, np.nan, dtype) for _ in range(4)]
        for k, out in enumerate(mine):
            make(out).execute(stream=own if k % 2 else shared)
        own.synchronize()
        shared.synchronize()
        outs[i] = (name, mine)

    _run_threads(work)
    shared.synchronize()
    for name, mine in outs.values():
        for out in mine:
            assert np.array_equal(out.view(np.uint8), want[name].view(np.uint8)), name

"""pool_grad.dask: the eight backward functions over dask arrays (issue #58).

Every operator, float32 and bfloat16, batched and unbatched, is computed chunked over N and
C (spatial axes split and rechunked, indices chunked unlike grad_output) and compared
bitwise with the in-memory call; bad calls raise pool_grad's own errors when the graph is
built, out-of-range indices when it is computed.  The same on a dask.distributed cluster of
two worker processes.  Skipped without dask.
"""
import os
import pickle
import subprocess
import sys
import textwrap

import ml_dtypes
import numpy as np
import pytest

da = pytest.importorskip("dask.array")
import dask  # noqa: E402

import pool_grad as pg  # noqa: E402
import pool_grad.dask as pgd  # noqa: E402

BF16 = np.dtype(ml_dtypes.bfloat16)
DTYPES = [np.dtype(np.float32), BF16]
DTYPE_IDS = ["float32", "bfloat16"]
OPS = ["avg_pool2d_backward", "avg_pool3d_backward", "adaptive_avg_pool2d_backward",
       "adaptive_avg_pool3d_backward", "adaptive_max_pool2d_backward",
       "adaptive_max_pool3d_backward", "max_pool2d_with_indices_backward",
       "max_pool3d_with_argmax_backward"]
N, C = 5, 6


def make_case(op, dtype, batched, seed=0):
    """(grad_output, x's shape, indices or None, parameters) of a valid call, the indices
    from the forward on random data (overlapping windows: equal indices accumulate)."""
    rng = np.random.default_rng(seed)
    lead = (N, C) if batched else (C,)
    three = "3d" in op
    xs = lead + ((7, 9, 10) if three else (11, 13))
    x = rng.uniform(-1, 1, xs).astype(dtype)
    idx = None
    if op.startswith("avg_pool"):
        params = dict(kernel_size=3, stride=2, padding=1, ceil_mode=True,
                      count_include_pad=False)
        if three:
            params["divisor_override"] = 5
            y = pg.avg_pool3d(x, **params)
        else:
            params["cube_math_type"] = pg.ALLOW_FP32_DOWN_PRECISION
            y = pg.avg_pool2d(x, **{k: w for k, w in params.items() if k != "cube_math_type"})
    elif op.startswith("adaptive_avg"):
        params = {}
        y = (pg.adaptive_avg_pool3d(x, (3, 4, 6)) if three
             else pg.adaptive_avg_pool2d(x, (4, 6)))
    elif op.startswith("adaptive_max"):
        params = {}
        y, idx = (pg.adaptive_max_pool3d(x, (3, 4, 6), return_indices=True) if three
                  else pg.adaptive_max_pool2d(x, (4, 6), return_indices=True))
    else:
        params = dict(kernel_size=3, stride=2, padding=1, ceil_mode=True)
        if three:
            y, idx = pg.max_pool3d(x, **params, return_indices=True)
        else:
            params["dilation"] = (1, 2)
            y, idx = pg.max_pool2d(x, **params, return_indices=True)
    go = rng.uniform(-1, 1, y.shape).astype(dtype)
    return go, xs, idx, params


def in_memory(op, go, xs, idx, params):
    fn = getattr(pg, op)
    return fn(go, xs, **params) if idx is None else fn(go, xs, idx, **params)


def lazy(op, go, xs, idx, params, **kw):
    fn = getattr(pgd, op)
    return fn(go, xs, **params, **kw) if idx is None else fn(go, xs, idx, **params, **kw)


def split_chunks(shape, lead):
    """grad_output's chunks: N by 2, C by 4, every spatial axis in two pieces."""
    lead_chunks = (2, 4)[-lead:]
    return lead_chunks + tuple(max(1, -(-s // 2)) for s in shape[lead:])


def index_chunks(shape, lead):
    """indices' chunks, unlike grad_output's: N by 3, C by 3, spatial axes whole."""
    return (3, 3)[-lead:] + (-1,) * (len(shape) - lead)


def assert_bitwise(got, ref):
    assert got.shape == ref.shape and got.dtype == ref.dtype
    assert got.tobytes() == ref.tobytes()


# -- every operator, bitwise, threaded scheduler ------------------------------------------

@pytest.mark.parametrize("batched", [True, False], ids=["NC", "C"])
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("op", OPS)
def test_bitwise_equal_to_in_memory_call(op, dtype, batched):
    go, xs, idx, params = make_case(op, dtype, batched)
    ref = in_memory(op, go, xs, idx, params)
    lead = 2 if batched else 1
    dgo = da.from_array(go, chunks=split_chunks(go.shape, lead))
    assert any(len(c) > 1 for c in dgo.chunks[lead:])   # the spatial axes get rechunked
    didx = None if idx is None else da.from_array(idx, chunks=index_chunks(idx.shape, lead))
    if didx is not None:
        assert didx.chunks != dgo.chunks
    gi = lazy(op, dgo, xs, didx, params)
    assert isinstance(gi, da.Array)
    assert gi.shape == xs and gi.dtype == dtype
    # grad_output's N and C chunks, one chunk per spatial axis
    assert gi.chunks[:lead] == dgo.chunks[:lead]
    assert gi.chunks[lead:] == tuple((s,) for s in xs[lead:])
    got = gi.compute(scheduler="threads")
    assert_bitwise(got, ref)


@pytest.mark.parametrize("op", ["avg_pool3d_backward", "max_pool3d_with_argmax_backward"])
def test_numpy_inputs_x_as_array_and_n_threads(op):
    """numpy grad_output and indices are wrapped; x may be a numpy or dask array (only its
    shape and dtype are used); every n_threads gives the same bits."""
    go, xs, idx, params = make_case(op, np.float32, True, seed=1)
    ref = in_memory(op, go, xs, idx, params)
    for x in (np.zeros(xs, np.float32),
              da.zeros(xs, dtype=np.float32, chunks=(1, 1, 7, 9, 10))):
        for n_threads in (None, 1, 2):
            gi = lazy(op, go, x, idx, params, n_threads=n_threads)
            assert_bitwise(gi.compute(scheduler="threads"), ref)


def test_zarr_arrays_in_and_out():
    """zarr arrays are read lazily, block by block, and the result streams into a store."""
    zarr = pytest.importorskip("zarr")
    go, xs, idx, params = make_case("max_pool3d_with_argmax_backward", np.float32, True)
    zgo = zarr.create_array(zarr.storage.MemoryStore(), shape=go.shape, dtype=go.dtype,
                            chunks=(1, 2) + go.shape[2:])
    zgo[...] = go
    zidx = zarr.create_array(zarr.storage.MemoryStore(), shape=idx.shape, dtype=idx.dtype,
                             chunks=(2, 3) + idx.shape[2:])
    zidx[...] = idx
    gi = pgd.max_pool3d_with_argmax_backward(zgo, xs, zidx, **params)      # not read yet
    store = zarr.storage.MemoryStore()
    with dask.config.set(scheduler="threads"):
        da.to_zarr(gi, store)
    assert_bitwise(zarr.open_array(store, mode="r")[...], in_memory(
        "max_pool3d_with_argmax_backward", go, xs, idx, params))


def test_module_example():
    import doctest
    result = doctest.testmod(pgd, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted and not result.failed


def test_zero_size_batch_is_an_empty_result():
    go = da.zeros((0, 3, 2, 2), dtype=np.float32, chunks=(1, 3, 2, 2))
    gi = pgd.avg_pool2d_backward(go, (0, 3, 4, 4), 2)
    assert gi.shape == (0, 3, 4, 4)
    assert gi.compute(scheduler="threads").shape == (0, 3, 4, 4)


def test_graph_is_lazy_and_blocks_follow_n_and_c():
    calls = []

    def load(block):
        calls.append(block.shape)
        return block

    go, xs, _, params = make_case("avg_pool2d_backward", np.float32, True)
    dgo = da.from_array(go, chunks=(1, 3, -1, -1)).map_blocks(load, meta=go[:0])
    gi = pgd.avg_pool2d_backward(dgo, xs, **params)
    assert calls == []                                  # nothing computed yet
    assert gi.numblocks == (5, 2, 1, 1)
    part = gi[:2, :3].compute(scheduler="threads")      # only the blocks it needs
    assert len(calls) == 2
    assert_bitwise(part, pg.avg_pool2d_backward(go[:2, :3], (2, 3) + xs[2:], **params))


# -- errors -------------------------------------------------------------------------------

def _bad_calls():
    go, xs, idx, params = make_case("max_pool2d_with_indices_backward", np.float32, True)
    dgo, didx = da.from_array(go, chunks=(2, 3, 2, 2)), da.from_array(idx, chunks=2)
    a_go, a_xs, _, a_params = make_case("avg_pool2d_backward", np.float32, True)
    a_dgo = da.from_array(a_go, chunks=(2, 3, -1, -1))
    m = pgd.max_pool2d_with_indices_backward
    a = pgd.avg_pool2d_backward
    return [
        # (call, error class, argument, words of the rule)
        (lambda: a(a_dgo, a_xs, 3, 2, padding=2), pg.ParamInvalidError, "padding",
         "at most half the kernel"),
        (lambda: a(a_dgo, a_xs, **{**a_params, "cube_math_type": 7}), pg.ParamInvalidError,
         "cube_math_type", "must be 0 (KEEP_DTYPE)"),
        (lambda: a(a_dgo, (N, C + 1) + a_xs[2:], **a_params), pg.ParamInvalidError,
         "grad_output", "leading (N, C) dimensions"),
        (lambda: a(a_dgo, a_xs[:2] + (20, 20), **a_params), pg.ParamInvalidError,
         "grad_output", "spatial size must equal the forward output size"),
        (lambda: a(a_dgo.astype(np.int32), a_xs, **a_params), pg.ParamInvalidError,
         "grad_output", "dtype must be"),
        (lambda: a(a_dgo, da.zeros(a_xs, dtype=np.float64), **a_params),
         pg.ParamInvalidError, "x", "dtype must equal grad_output's dtype"),
        (lambda: a(a_dgo[:, :, 0], a_xs, **a_params), pg.ParamInvalidError,
         "grad_output", "must have the same rank as x"),
        (lambda: a(None, a_xs, **a_params), pg.ParamNullptrError, "grad_output",
         "must not be None"),
        (lambda: a(a_dgo, a_xs, **a_params, n_threads=0), pg.ParamInvalidError,
         "n_threads", "positive"),
        (lambda: a(a_dgo[a_dgo[:, 0, 0, 0] > 0], a_xs, **a_params), pg.ParamInvalidError,
         "grad_output", "known chunk sizes"),
        (lambda: m(dgo, xs, didx.astype(np.float32), **params), pg.ParamInvalidError,
         "indices", "dtype must be int32 or int64"),
        (lambda: m(dgo, xs, didx[:, :, :-1], **params), pg.ParamInvalidError, "indices",
         "shape must equal grad_output's shape"),
        (lambda: m(dgo, xs, None, **params), pg.ParamNullptrError, "indices",
         "must not be None"),
        (lambda: m(dgo, xs, didx, **{**params, "dilation": 0}), pg.ParamInvalidError,
         "dilation", "must be >= 1"),
        (lambda: pgd.max_pool3d_with_argmax_backward(
            da.zeros((1, 1, 1, 1, 1), dtype=np.float32), (1, 1, 2, 2, 2),
            da.zeros((1, 1, 1, 1, 1), dtype=np.int32), 2, dilation=2), pg.ParamInvalidError,
         "dilation", "must be 1 on every axis"),
        (lambda: pgd.adaptive_avg_pool3d_backward(
            da.zeros((1, 2, 1, 1, 1), dtype=np.float32), (1, 2, 0, 4, 4)),
         pg.ParamInvalidError, "x", "must not have a zero-size dimension"),
    ]


@pytest.mark.parametrize("case", range(len(_bad_calls())))
def test_bad_call_raises_pool_grads_error_at_graph_construction(case):
    call, cls, arg, rule = _bad_calls()[case]
    with dask.config.set(scheduler="sync"):
        with pytest.raises(cls) as info:
            call()                       # building the graph, never computing it
    err = info.value
    assert err.code == (161001 if cls is pg.ParamNullptrError else 161002)
    assert err.message.startswith(arg + " "), err.message   # names the argument first
    assert rule in err.message, err.message


def test_the_same_message_as_the_in_memory_call():
    go, xs, _, params = make_case("avg_pool3d_backward", np.float32, True)
    kw = {**params, "padding": 2}
    with pytest.raises(pg.ParamInvalidError) as core:
        pg.avg_pool3d_backward(go, xs, **kw)
    with pytest.raises(pg.ParamInvalidError) as lazy_err:
        pgd.avg_pool3d_backward(da.from_array(go, chunks=2), xs, **kw)
    assert str(lazy_err.value) == str(core.value)


def test_no_out_argument():
    with pytest.raises(TypeError, match="out"):
        pgd.adaptive_avg_pool2d_backward(da.ones((1, 1, 2, 2), dtype=np.float32),
                                         (1, 1, 4, 4), out=np.empty((1, 1, 4, 4), np.float32))


@pytest.mark.parametrize("op", ["adaptive_max_pool3d_backward",
                                "max_pool2d_with_indices_backward"])
def test_out_of_range_index_raises_at_compute_time(op):
    go, xs, idx, params = make_case(op, np.float32, True)
    bad = idx.copy()
    pos = (3, 4) + (1,) * (idx.ndim - 2)
    bad[pos] = -1
    gi = lazy(op, da.from_array(go, chunks=(2, 3) + (-1,) * (go.ndim - 2)), xs,
              da.from_array(bad, chunks=2), params)       # the graph builds: values unread
    with pytest.raises(pg.ParamInvalidError) as info:
        gi.compute(scheduler="threads")
    err = info.value
    assert err.code == 161002
    assert err.message.startswith("indices must lie in [0, "), err.message
    assert f"position {pos} of the whole indices" in err.message
    assert str(err).count("161002") == 1


def test_errors_pickle_without_a_doubled_prefix():
    err = pickle.loads(pickle.dumps(pg.ParamInvalidError("indices must lie in [0, 4); got 9")))
    assert str(err) == "ACLNN_ERR_PARAM_INVALID (161002): indices must lie in [0, 4); got 9"
    assert err.code == 161002 and err.message == "indices must lie in [0, 4); got 9"
    err = pickle.loads(pickle.dumps(pg.ParamNullptrError("x must not be None")))
    assert type(err) is pg.ParamNullptrError and str(err).count("161001") == 1


# -- imports ------------------------------------------------------------------------------

def _python(code):
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, timeout=120, cwd=os.path.dirname(__file__))


def test_import_pool_grad_does_not_import_dask():
    out = _python("""
        import sys, pool_grad
        assert not any(m == "dask" or m.startswith("dask.") for m in sys.modules), \\
            sorted(m for m in sys.modules if m.startswith("dask"))
    """)
    assert out.returncode == 0, out.stderr


def test_import_pool_grad_dask_without_dask_says_what_to_install():
    out = _python("""
        import sys
        sys.modules["dask"] = None          # as if dask were not installed
        try:
            import pool_grad.dask
        except ImportError as e:
            print(e)
        else:
            raise SystemExit("imported")
    """)
    assert out.returncode == 0, out.stderr
    assert 'pip install "dask[array]"' in out.stdout


# -- dask.distributed: two worker processes -----------------------------------------------

@pytest.fixture(scope="module")
def client():
    distributed = pytest.importorskip("dask.distributed")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None, worker_dashboard_address=None,
                                  silence_logs=40) as cluster, \
            distributed.Client(cluster) as c:
        yield c
    # both context managers closed: the workers and the scheduler are shut down


@pytest.mark.parametrize("op,dtype", [("avg_pool3d_backward", BF16),
                                      ("max_pool2d_with_indices_backward", np.float32),
                                      ("adaptive_avg_pool2d_backward", BF16),
                                      ("adaptive_max_pool3d_backward", np.float32)],
                         ids=["avg3d-bf16", "max2d-f32", "aavg2d-bf16", "amax3d-f32"])
def test_distributed_bitwise_equal(client, op, dtype):
    go, xs, idx, params = make_case(op, dtype, True, seed=2)
    ref = in_memory(op, go, xs, idx, params)
    dgo = da.from_array(go, chunks=split_chunks(go.shape, 2))
    didx = None if idx is None else da.from_array(idx, chunks=index_chunks(idx.shape, 2))
    gi = lazy(op, dgo, xs, didx, params, n_threads=1)
    got = client.compute(gi).result(timeout=60)
    assert_bitwise(got, ref)
    # the blocks ran in the worker processes
    assert len(client.scheduler_info()["workers"]) == 2


def test_distributed_out_of_range_index(client):
    go, xs, idx, params = make_case("max_pool3d_with_argmax_backward", np.float32, True)
    bad = idx.copy()
    bad[4, 5, 0, 0, 0] = 10**6
    gi = pgd.max_pool3d_with_argmax_backward(da.from_array(go, chunks=(2, 3, -1, -1, -1)),
                                             xs, bad, **params)
    with pytest.raises(pg.ParamInvalidError) as info:
        client.compute(gi).result(timeout=60)
    err = info.value
    assert err.code == 161002 and str(err).count("161002") == 1, str(err)
    assert "position (4, 5, 0, 0, 0) of the whole indices" in err.message

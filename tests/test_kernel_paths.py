"""Kernel paths chosen by the plan that ordinary-sized tests may not reach (issue #4):

* the plane fill of global pooling (every grad_output row one value, every input index in
  exactly one window): same values as the reference and the same bits as the gather of
  the other layouts, special values (-0.0, inf, NaN) included;
* streaming (non-temporal) stores, normally used only for outputs over 8 MiB: forced on
  small outputs here, they must give the same bits as ordinary stores;
* the AVX2 builds of the float loops (row combine, W scale, period-2 expansion, bfloat16
  conversions), chosen at run time on CPUs that have AVX2: the same bits as the baseline
  loops, with windows of 1 to 3 taps per phase and rows of every length mod 8;
* the max-pool scatter's AVX2 loops against the baseline ones, streamed or not;
* the max-pool scatter of NCHW (or strided) grad_output and indices into a channels-last
  grad_input, a few columns of every lane at a time: the bits of the all-channels-last call;
  and its gather form, rows brought to channels-last order through transposes;
* blocks of a few rows (and D planes), as large calls have, on small shapes: the same bits
  as whole planes;
* the max-pool index check's fast path for contiguous index planes, at the edges of the
  valid range and at the extremes of each index type;
* the max-pool gradient's gather form (windows two wide that tile the plane, every index
  in its own window): the same bits as the scatter, planes with an index elsewhere (or out
  of range) handled as before.
"""
import numpy as np
import pytest

import pool_grad as pg
from conftest import (BFLOAT16, DTYPE_IDS, DTYPES, OUT_LAYOUTS, as_layout, empty_out,
                      make_array)
from pool_grad import _kernels, _plan, functions
from reference import (ref_adaptive_avg_pool3d_backward, ref_adaptive_max_pool2d_backward,
                       ref_avg_pool2d_backward, tolerance)


def _bits(a):
    return np.ascontiguousarray(a).view(np.uint8)


def _nan_bits(a):
    """The bits with every NaN made the dtype's default NaN: where an input NaN meets the
    NaN of inf - inf, which of the two a sum keeps follows the operand order the compiler
    chose (x86 returns the first), so two code paths may differ in a NaN's sign alone
    (clang's portable loops against the AVX2 ones).  Where the NaNs are, and every other
    bit, must still agree."""
    v = np.ascontiguousarray(a).copy()
    v[np.isnan(v.astype(np.float64))] = np.nan
    return v.view(np.uint8)


def _same_bits_after(request, fixture, runs):
    """runs() gives the same bits before and after the fixture switches a kernel path."""
    before = runs()
    request.getfixturevalue(fixture)
    for a, b in zip(before, runs(), strict=True):
        assert np.array_equal(a, b)


GLOBAL_AVG = [  # (x shape, kernel, stride, padding, count_include_pad, divisor_override)
    ((2, 5, 7, 7), 7, 7, 0, True, 0),
    ((3, 4, 5, 6), (5, 6), None, 0, True, 0),
    ((2, 3, 5, 5), 5, 5, 2, True, 0),     # windows reach into the padding
    ((2, 3, 5, 5), 5, 5, 2, False, 0),
    ((1, 6, 4, 4), 4, 1, 0, True, -3),
    ((4, 9, 6), 6, 6, 0, True, 0),        # 3-D input
]


def _special(shape, dtype, rng):
    g = make_array(shape, dtype, rng)
    flat = g.reshape(-1)
    for i, v in enumerate([-0.0, 0.0, np.inf, -np.inf, np.nan]):
        if i < flat.size:
            flat[(i * 7) % flat.size] = v
    return g


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("case", GLOBAL_AVG)
def test_global_avg_pool2d_fill_matches_reference_and_other_layouts(case, dtype):
    x_shape, k, s, p, cip, div = case
    rng = np.random.default_rng(3)
    y = pg.avg_pool2d(np.zeros(x_shape, np.float32), k, s, p, count_include_pad=cip,
                      divisor_override=div)
    assert y.shape[-2:] == (1, 1)
    go = make_array(y.shape, dtype, rng)
    ref = ref_avg_pool2d_backward(go, x_shape, _pair(k), _pair(s if s else k), _pair(p),
                                  False, cip, div)
    rtol, atol = tolerance(dtype)
    results = []
    for layout in OUT_LAYOUTS:
        out = empty_out(x_shape, dtype, layout)
        pg.avg_pool2d_backward(go, x_shape, k, s, p, count_include_pad=cip,
                               divisor_override=div, out=out)
        np.testing.assert_allclose(out.astype(np.float64), ref, rtol=rtol, atol=atol)
        results.append(_bits(out))
    special = _special(y.shape, dtype, rng)
    for layout in OUT_LAYOUTS:
        out = empty_out(x_shape, dtype, layout)
        pg.avg_pool2d_backward(special, x_shape, k, s, p, count_include_pad=cip,
                               divisor_override=div, out=out)
        results.append(_bits(out))
    n = len(OUT_LAYOUTS)
    for r in results[1:n]:
        assert np.array_equal(r, results[0])
    for r in results[n + 1:]:
        assert np.array_equal(r, results[n])


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("x_shape,out_dhw", [((2, 3, 4, 5, 6), (1, 1, 1)),
                                             ((2, 3, 4, 5, 6), (4, 1, 1)),
                                             ((2, 3, 1, 7, 7), (1, 1, 1))])
def test_adaptive_avg_pool3d_fill_matches_reference_and_other_layouts(x_shape, out_dhw,
                                                                      dtype):
    rng = np.random.default_rng(4)
    go = make_array(x_shape[:2] + out_dhw, dtype, rng)
    ref = ref_adaptive_avg_pool3d_backward(go, x_shape)
    rtol, atol = tolerance(dtype)
    results = []
    for layout in OUT_LAYOUTS:
        out = empty_out(x_shape, dtype, layout)
        pg.adaptive_avg_pool3d_backward(go, x_shape, out=out)
        np.testing.assert_allclose(out.astype(np.float64), ref, rtol=rtol, atol=atol)
        results.append(_bits(out))
    for r in results[1:]:
        assert np.array_equal(r, results[0])


def test_fill_plan_is_chosen_only_for_single_covering_windows():
    spec = ("avg", (1, 7, 7), (1, 1, 1), (1, 7, 7), (1, 7, 7), (0, 0, 0), True, 0)
    assert _plan.constant_planes(spec)
    # overlapping windows along H: each row is covered by one window, but not exactly one
    assert not _plan.constant_planes(("adaptive", (4, 5, 6), (1, 2, 1)))
    assert _plan.constant_planes(("adaptive", (4, 5, 6), (2, 1, 1)))
    assert not _plan.constant_planes(("avg", (1, 8, 8), (1, 1, 1), (1, 7, 7), (1, 7, 7),
                                      (0, 0, 0), True, 0))   # row 7, column 7: no window
    # a 3-D average pool whose D windows overlap is no fill
    assert not _plan.constant_planes(("avg", (5, 7, 7), (2, 1, 1), (3, 7, 7), (2, 7, 7),
                                      (0, 0, 0), True, 0))


@pytest.fixture
def stream_everything(monkeypatch):
    """Streaming stores on every output, whatever its size or row length."""
    monkeypatch.setattr(_plan, "STREAM_BYTES", -1)
    monkeypatch.setattr(_plan, "STREAM_ROW_BYTES", 0)
    monkeypatch.setattr(functions, "_cache", {})   # no plan from before the switch


@pytest.fixture
def stream_regions(monkeypatch):
    """Streamed row blocks in the C items (pg_item.h) on every output, per-row streaming
    off (it would take the rows away from the C items)."""
    monkeypatch.setattr(_plan, "STREAM_BYTES", -1)
    monkeypatch.setattr(_plan, "STREAM_ROW_BYTES", 1 << 62)
    monkeypatch.setattr(_plan, "REGION_ROW_BYTES", 0)
    monkeypatch.setattr(_plan, "FOLDED_REGION_ROW_BYTES", 0)
    monkeypatch.setattr(functions, "_cache", {})


def _avg_runs(x_shape, dtype, layouts):
    rng = np.random.default_rng(5)
    outs = []
    for s in (2, 1):   # grad_input rows of up to two and three terms
        y = pg.avg_pool2d(np.zeros(x_shape, np.float32), 3, s, 1)
        go = make_array(y.shape, dtype, rng)
        for layout in layouts:
            out = empty_out(x_shape, dtype, layout)
            pg.avg_pool2d_backward(go, x_shape, 3, s, 1, out=out)
            outs.append(_bits(out))
    return outs


def _max_runs(x_shape, dtype, layouts):
    rng = np.random.default_rng(6)
    x = make_array(x_shape, np.float64, rng)
    _, idx = pg.adaptive_max_pool2d(x, (5, 7), return_indices=True)
    go = make_array(idx.shape, dtype, rng)
    outs = []
    for layout in layouts:
        out = empty_out(x_shape, dtype, layout)
        pg.adaptive_max_pool2d_backward(go, x_shape, idx, out=out)
        outs.append(_bits(out))
    return outs


@pytest.mark.parametrize("simd", ["default", "baseline_simd"])
@pytest.mark.parametrize("mode", ["stream_everything", "stream_regions"])
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("x_shape", [(2, 3, 17, 300), (2, 5, 9, 37), (1, 40, 6, 70)])
def test_streaming_stores_give_the_same_bits(x_shape, dtype, mode, simd, request):
    if simd != "default":   # the baseline loops, on a CPU with AVX2 too
        request.getfixturevalue(simd)
    plain = _avg_runs(x_shape, dtype, OUT_LAYOUTS) + _max_runs(x_shape, dtype, OUT_LAYOUTS)
    request.getfixturevalue(mode)
    _plan.gather_geometry.cache_clear()
    streamed = _avg_runs(x_shape, dtype, OUT_LAYOUTS) + _max_runs(x_shape, dtype,
                                                                   OUT_LAYOUTS)
    for a, b in zip(plain, streamed):
        assert np.array_equal(a, b)


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_streamed_regions_store_zeros_where_no_window_covers(dtype, request):
    """Kernel 2, stride 3: every third row and column lies in no window.  A region formed
    in a stage (float32's C item, float64's row loop) stores those rows as zeros too."""
    rng = np.random.default_rng(12)
    x_shape = (2, 3, 17, 40)
    go = make_array(pg.avg_pool2d(np.zeros(x_shape, np.float32), 2, 3).shape, dtype, rng)

    def runs():
        outs = []
        for layout in ("c", "sliced"):
            out = empty_out(x_shape, dtype, layout)
            pg.avg_pool2d_backward(go, x_shape, 2, 3, out=out)
            assert not np.any(np.asarray(out[:, :, 2::3], np.float64))
            assert not np.any(np.asarray(out[:, :, :, 2::3], np.float64))
            outs.append(_bits(out))
        return outs

    _same_bits_after(request, "stream_regions", runs)


def _channels_last_at(shape, dtype, slots, offset):
    """A channels-last (N, C, H, W) view whose pixels are `slots` elements apart, the first
    `offset` bytes after a 64-byte line, filled with 7s, and the buffer it lies in."""
    n, c, h, w = shape
    nbytes = n * h * w * slots * np.dtype(dtype).itemsize
    raw = np.full(nbytes + 192, 7, np.uint8)
    start = (-raw.ctypes.data) % 64 + 64 + offset
    full = raw[start:start + nbytes].view(dtype).reshape(n, h, w, slots)
    return full[..., :c].transpose(0, 3, 1, 2), full, raw, start, nbytes


@pytest.mark.parametrize("dtype", [np.float16, BFLOAT16], ids=["float16", "bfloat16"])
def test_streamed_lane_rows_in_whole_lines_give_the_same_bits(dtype, request):
    """16-bit channels-last rows whose pixels and rows lie a multiple of 64 bytes apart are
    streamed a line at a time (pg_lanes_row_body's `line`): the lanes before the first line
    boundary (0, 8, 16 or 24), whole lines, then the lanes after them.  Results placed 0,
    16, 32 and 48 bytes off a line, with C = 32 ... 96 of 32 ... 128 channel slots: the same
    bits as ordinary stores, the reference's values, and nothing written outside them."""
    calls = [(2, 2, 0), (3, 2, 1), (3, 1, 1)]   # k2 s2: pairs of rows and columns
    lanes = set()

    def runs():
        outs = []
        for c, slots in [(32, 32), (64, 64), (96, 96), (40, 64), (72, 128)]:
            x_shape = (2, c, 6, 10)
            for k, s, p in calls:
                go = make_array(pg.avg_pool2d(np.zeros(x_shape, np.float32), k, s, p).shape,
                                dtype, np.random.default_rng(c * 10 + k), "channels_last")
                want = ref_avg_pool2d_backward(go, x_shape, (k, k), (s, s), (p, p), False,
                                               True, 0)
                rtol, atol = tolerance(dtype)
                for offset in (0, 16, 32, 48):
                    out, full, raw, start, nbytes = _channels_last_at(x_shape, dtype, slots,
                                                                      offset)
                    op = pg.AvgPool2dBackward(go, x_shape, k, s, p, False, True, 0, 0, out)
                    op.execute()
                    lanes.add((c, k, s, op._kernel.c_item == "lanes"))
                    np.testing.assert_allclose(out.astype(np.float64), want, rtol=rtol,
                                               atol=atol)
                    assert np.all(raw[:start] == 7) and np.all(raw[start + nbytes:] == 7)
                    assert np.all(full[..., c:].view(np.uint8) == 7)
                    outs.append(_bits(out))
        return outs

    _same_bits_after(request, "stream_everything", runs)
    # stride 2 forms these rows as lanes (stride 1 merges W and C, or sums E rows), where
    # the vector layer is built
    if pg._kernels.LANES_ROWS:
        assert {(c, k) for c, k, s, used in lanes if used} >= {
            (c, k) for c in (40, 64, 72, 96) for k in (2, 3)}


def test_stream_threshold_is_the_planned_threads_share_of_the_cache(monkeypatch):
    mib = 1 << 20
    for llc, cpus, cap, want in [
            (300 * mib, 16, 300 * mib, {1: 18.75 * mib, 2: 37.5 * mib, 8: 150 * mib,
                                        16: 300 * mib, 64: 300 * mib}),
            (16 * mib, 2, 16 * mib, {1: 8 * mib, 2: 16 * mib, 3: 16 * mib}),
            (0, 4, 8 * mib, {1: 8 * mib, 4: 8 * mib}),             # cache size unknown
            (300 * mib, 16, -1, {1: -1, 16: -1})]:                 # the tests' override
        monkeypatch.setattr(_plan, "LLC_BYTES", llc)
        monkeypatch.setattr(_plan, "LLC_CPUS", cpus)
        monkeypatch.setattr(_plan, "STREAM_BYTES", cap)
        assert {t: _plan.stream_bytes(t) for t in want} == want


def test_shared_cpu_list_is_counted(tmp_path):
    for text, n in [("0-15\n", 16), ("0-15,32-47", 32), ("3", 1), ("0,2,4-5", 4),
                    ("", 0), ("x", 0)]:
        (tmp_path / "shared_cpu_list").write_text(text)
        assert _plan._shared_cpus(str(tmp_path)) == n
    assert _plan._shared_cpus(str(tmp_path / "missing")) == 0
    size, cpus = _plan.last_level_cache()
    assert size >= 0 and cpus >= 1


def test_plans_are_made_for_the_thread_count_of_the_call(monkeypatch, restore_num_threads):
    """Operators plan for set_num_threads' count, one-shot functions for their n_threads,
    and a one-shot plan is kept per thread count asked for."""
    seen = []
    real = _plan.stream_bytes
    monkeypatch.setattr(_plan, "stream_bytes", lambda t: seen.append(t) or real(t))
    monkeypatch.setattr(functions, "_cache", {})
    rng = np.random.default_rng(5)
    x = rng.standard_normal((2, 3, 12, 12)).astype(np.float32)
    go = rng.standard_normal((2, 3, 6, 6)).astype(np.float32)
    y, idx = pg.adaptive_max_pool2d(x, 6, return_indices=True)
    pg.set_num_threads(3)
    pg.AvgPool2dBackward(go, x, 2, 2, 0, False, True, 0, 0, np.empty_like(x))
    pg.AdaptiveMaxPool2dBackward(go, x, idx, np.empty_like(x))
    assert seen and set(seen) == {3}
    calls = [lambda n: pg.avg_pool2d_backward(go, x.shape, kernel_size=2, n_threads=n),
             lambda n: pg.adaptive_avg_pool3d_backward(go, x.shape, n_threads=n),
             lambda n: pg.adaptive_max_pool2d_backward(go, x.shape, idx, n_threads=n)]
    for n in (5, None, 5, 1):
        want = [r(1) for r in calls]
        seen.clear()
        got = [r(n) for r in calls]
        assert set(seen) <= {3 if n is None else n}
        for a, b in zip(want, got):
            assert np.array_equal(_bits(a), _bits(b))
    seen.clear()
    for n in (5, None, 1):   # each planned once above
        [r(n) for r in calls]
    assert seen == []


@pytest.mark.parametrize("n_threads", [[2], "2", 2.0, 0, True])
def test_one_shot_bad_n_threads_is_reported_after_the_operator_checks(n_threads):
    """A bad n_threads (unhashable, or not a positive integer) raises ParamInvalidError
    naming it, from a cached configuration too; a call with another broken rule reports
    that rule first, as before plans were keyed by thread count."""
    go = np.ones((1, 2, 2, 2), np.float32)
    pg.avg_pool2d_backward(go, (1, 2, 4, 4), kernel_size=2)   # cached
    for _ in range(2):
        with pytest.raises(pg.ParamInvalidError, match="n_threads"):
            pg.avg_pool2d_backward(go, (1, 2, 4, 4), kernel_size=2, n_threads=n_threads)
    with pytest.raises(pg.ParamInvalidError, match="kernel_size"):
        pg.avg_pool2d_backward(go, (1, 2, 4, 4), kernel_size=0, n_threads=n_threads)
    got = pg.avg_pool2d_backward(go, (1, 2, 4, 4), kernel_size=2, n_threads=np.int64(2))
    assert np.array_equal(got, np.full((1, 2, 4, 4), 0.25, np.float32))


def test_a_plan_for_fewer_threads_streams_with_the_same_bits(monkeypatch, restore_num_threads):
    """Where one thread's share of the cache is smaller than the output and two threads'
    is not, a plan made for one thread streams its stores and one made for two does not:
    the same bits, executed with either thread count."""
    mib = 1 << 20
    monkeypatch.setattr(_plan, "LLC_BYTES", 32 * mib)
    monkeypatch.setattr(_plan, "LLC_CPUS", 2)
    monkeypatch.setattr(_plan, "STREAM_BYTES", 32 * mib)
    monkeypatch.setattr(_plan, "TUNE_BYTES", None)   # the rule's form alone
    streamed = []
    real = _plan.streaming_region
    monkeypatch.setattr(_plan, "streaming_region",
                        lambda *a: streamed.append(real(*a)) or streamed[-1])
    rng = np.random.default_rng(6)
    x = rng.standard_normal((4, 64, 140, 140)).astype(np.float32)    # 20 MB
    go = rng.standard_normal((4, 64, 70, 70)).astype(np.float32)
    gm, idx = pg.adaptive_max_pool2d(x, 7, return_indices=True)
    gm = rng.standard_normal(gm.shape).astype(np.float32)
    outs = {}
    for planned in (1, 2):
        pg.set_num_threads(planned)
        streamed.clear()
        ops = [pg.AvgPool2dBackward(go, x, 3, 2, 1, False, True, 0, 0, np.empty_like(x)),
               pg.AvgPool2dBackward(go, x, 2, 2, 0, False, True, 0, 0,
                                    as_layout(np.empty_like(x), "channels_last")),
               pg.AdaptiveMaxPool2dBackward(gm, x, idx, np.empty_like(x))]
        assert all(streamed) if planned == 1 else not any(streamed)
        for ran in (1, 2):
            for i, op in enumerate(ops):
                op.grad_input[...] = np.nan
                op.execute(n_threads=ran)
                outs.setdefault(i, []).append(_bits(op.grad_input).copy())
    for i, results in outs.items():
        for r in results[1:]:
            assert np.array_equal(results[0], r)


@pytest.fixture
def two_forms(monkeypatch):
    """Every call planned in both store forms, however small: the size rule's (ordinary
    stores, for these outputs) and streamed rows as the alternate its first calls time."""
    monkeypatch.setattr(_plan, "TUNE_BYTES", 0)
    monkeypatch.setattr(_plan, "STREAM_ROW_BYTES", 0)
    monkeypatch.setattr(functions, "_cache", {})


def _form_calls(layout, dtype):
    """(make_op, one_shot) pairs of every operator on small arrays in `layout`."""
    rng = np.random.default_rng(11)
    x = make_array((2, 8, 20, 24), np.float32, rng)
    go_avg = make_array((2, 8, 10, 12), dtype, rng, layout)
    go_ada = make_array((2, 8, 3, 7, 5), dtype, rng, layout)
    ind = pg.adaptive_max_pool2d(x, (5, 6), return_indices=True)[1]
    go_max = make_array((2, 8, 5, 6), dtype, rng, layout)
    ind = as_layout(ind, layout)
    return [
        (lambda: pg.AvgPool2dBackward(go_avg, x.shape, 3, 2, 1, False, True, 0, 0,
                                      empty_out(x.shape, dtype, layout)),
         lambda: pg.avg_pool2d_backward(go_avg, x.shape, 3, 2, 1)),
        (lambda: pg.AdaptiveAvgPool3dBackward(go_ada, (2, 8, 5, 20, 24),
                                              empty_out((2, 8, 5, 20, 24), dtype, layout)),
         lambda: pg.adaptive_avg_pool3d_backward(go_ada, (2, 8, 5, 20, 24))),
        (lambda: pg.AdaptiveMaxPool2dBackward(go_max, x.shape, ind,
                                              empty_out(x.shape, dtype, layout)),
         lambda: pg.adaptive_max_pool2d_backward(go_max, x.shape, ind)),
    ]


@pytest.mark.parametrize("layout", ["c", "channels_last"])
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_the_first_calls_time_both_store_forms_with_the_same_bits(
        request, monkeypatch, layout, dtype):
    """An op planned in two store forms runs its first calls in both, keeps one, and every
    call gives the bits of the op planned in one form; so do the one-shot functions'
    cached plans through their first calls."""
    monkeypatch.setattr(_plan, "TUNE_BYTES", None)
    want = [_bits(_run(make_op)).copy() for make_op, _ in _form_calls(layout, dtype)]
    request.getfixturevalue("two_forms")
    for (make_op, one_shot), w in zip(_form_calls(layout, dtype), want):
        op = make_op()
        kernel = op._kernel
        assert kernel.alternate is not None and kernel.store_form == "tuning"
        assert {kernel.form, kernel.alternate.form} == {"cache", "stream"}
        ws = np.empty(op.workspace_size, np.uint8)
        for call in range(2 * _kernels.TUNE_CALLS):
            # (a call on another thread count than the first runs untimed, planned form)
            op.grad_input[...] = np.nan
            op.execute(workspace=ws if call % 2 else None, n_threads=1 + call % 3 // 2)
            assert np.array_equal(_bits(op.grad_input), w)
        assert kernel.store_form in ("cache", "stream")
        for _ in range(_kernels.TUNE_CALLS + 2):
            assert np.array_equal(_bits(one_shot()), w)


def _run(make_op):
    op = make_op()
    op.grad_input[...] = np.nan
    op.execute()
    return op.grad_input


def test_the_alternate_is_kept_only_when_clearly_faster(two_forms):
    """settle(t_planned, t_alternate) keeps the alternate where it took less than
    TUNE_MARGIN of the planned form's time, and drops it otherwise; either way the op
    runs on with the same bits, in a workspace of its workspace_size."""
    for faster, kept in ((0.5, "alternate"), (_kernels.TUNE_MARGIN * 1.01, "planned")):
        for make_op, _ in _form_calls("c", np.float32):
            op = make_op()
            kernel, alt = op._kernel, op._kernel.alternate
            planned_form = kernel.form
            assert op.workspace_size >= max(alt.workspace_size(pg.get_num_threads()),
                                             kernel.scratch_bytes)
            op.execute()
            first = _bits(op.grad_input).copy()
            kernel.settle(1.0, faster)
            assert kernel.store_form == (alt.form if kept == "alternate" else planned_form)
            assert (kernel.alternate is alt) == (kept == "alternate")
            op.grad_input[...] = np.nan
            op.execute(workspace=np.empty(op.workspace_size, np.uint8))
            assert np.array_equal(_bits(op.grad_input), first)


def test_outputs_up_to_tune_bytes_have_one_form(monkeypatch):
    """Outputs no larger than TUNE_BYTES (and every output where it is None) are planned in
    the size rule's form alone."""
    for limit in (None, 1 << 30):
        monkeypatch.setattr(_plan, "TUNE_BYTES", limit)
        for make_op, _ in _form_calls("c", np.float32):
            kernel = make_op()._kernel
            assert kernel.alternate is None and kernel.store_form == "cache"


STRIP_CASES = [  # (dtype, x shape, kernel, stride, padding, ceil_mode, count_include_pad)
    (np.float64, (2, 8, 20, 40), 3, 1, 1, False, True),    # float64 stride 1
    (np.float64, (1, 3, 9, 12), 2, 1, 0, True, False),
]


@pytest.mark.parametrize("dtype, x_shape, k, st, p, ceil, cip", STRIP_CASES)
def test_strips_are_timed_beside_the_row_form_with_the_same_bits(
        monkeypatch, restore_num_threads, dtype, x_shape, k, st, p, ceil, cip):
    """float64 planes in strips (pg_fused1_strips_f64) larger than TUNE_SHAPE_BYTES are
    planned with the row form as a timed alternate ("cache rows"); every call, through the
    timing and after, on mixed thread counts, gives the bits of the strips alone and the
    reference's values; so do the one-shot function's cached plans."""
    go, ref, make_op = _avg_call(dtype, x_shape, k, st, p, ceil, cip, seed=17)
    monkeypatch.setattr(_plan, "TUNE_SHAPE_BYTES", None)
    alone = make_op()
    if not alone._kernel.strips:
        pytest.skip("no AVX2: the planes do not go in strips")
    assert alone._kernel.alternates == ()
    want = _alone_bits(alone, dtype, ref)

    monkeypatch.setattr(_plan, "TUNE_SHAPE_BYTES", 0)
    monkeypatch.setattr(functions, "_cache", {})
    op = make_op()
    kernel = op._kernel
    assert kernel.strips and kernel.store_form == "tuning"
    assert [(a.form, a.strips) for a in kernel.alternates] == [("cache rows", False)]
    assert kernel.tune_calls == 2 * (1 + _kernels.TUNE_TIMED) + 1 == _kernels.TUNE_CALLS
    _calls_keep_bits(op, want, 2 * kernel.tune_calls)
    assert kernel.store_form in ("cache", "cache rows") and kernel.alternates == ()
    for _ in range(_kernels.TUNE_CALLS + 2):
        got = pg.avg_pool2d_backward(go, x_shape, k, st, p, ceil_mode=ceil,
                                     count_include_pad=cip)
        assert np.array_equal(_bits(got), want)


PLANE_RULE_CASES = [  # (dtype, x shape, kernel, stride, padding, ceil_mode, count_include_pad)
    (np.float32, (2, 20, 14, 14), 3, 2, 1, False, True),   # two vectors a row
    (np.float32, (1, 19, 8, 8), 3, 1, 1, False, False),    # one vector a row
    (np.float32, (2, 9, 11, 10), 2, 1, 0, True, True),
    (np.float32, (2, 16, 12, 12), 3, 1, 1, False, False),  # taps that slide (stride 1)
    (np.float16, (2, 17, 14, 14), 3, 2, 1, True, False),
    (BFLOAT16, (1, 20, 14, 14), 3, 1, 1, False, True),
    (BFLOAT16, (1, 33, 16, 16), 3, 2, 1, False, True),
]


@pytest.mark.parametrize("dtype, x_shape, k, st, p, ceil, cip", PLANE_RULE_CASES,
                         ids=lambda v: getattr(v, "__name__", None))
def test_planes_in_registers_time_both_store_forms_with_the_same_bits(
        monkeypatch, restore_num_threads, dtype, x_shape, k, st, p, ceil, cip):
    """Planes that the plan puts in registers (pg_plane.h), planned in both store forms
    (the streamed one timed beside them): every call, through the timing and after, gives
    the bits of the planes in one form and the reference's values, whichever form is
    kept."""
    _, ref, make_op = _avg_call(dtype, x_shape, k, st, p, ceil, cip, seed=23)
    monkeypatch.setattr(_plan, "TUNE_SHAPE_BYTES", 0)
    alone = make_op()
    if alone._kernel.c_item != "plane":
        pytest.skip("no AVX2: the planes do not go in registers")
    assert alone._kernel.alternates == ()
    want = _alone_bits(alone, dtype, ref)

    monkeypatch.setattr(_plan, "TUNE_BYTES", 0)
    forms = ["stream"]
    op = make_op()
    kernel = op._kernel
    assert [a.form for a in kernel.alternates] == forms
    assert all(a.c_item == "plane" for a in kernel.alternates)
    _calls_keep_bits(op, want, kernel.tune_calls + 3)
    assert kernel.store_form in ["cache"] + forms
    for keep in range(len(forms) + 1):   # each form kept in turn
        op = make_op()
        op._kernel.settle(1.0, *[0.5 if i + 1 == keep else 1.0 for i in range(len(forms))])
        assert op._kernel.store_form == (["cache"] + forms)[keep]
        op.grad_input[...] = np.nan
        op.execute(workspace=np.empty(op.workspace_size, np.uint8))
        assert np.array_equal(_bits(op.grad_input), want)


# planes in registers whose taps slide with the column (stride 1): each chunk's rows staged
# with -0.0 around them, each tap one load at its offset (pg_plane.h's pg_plane_aff), where
# other tap tables go through permutes.  Two, three and four taps a column, one vector a
# row (8), two (10 to 14) and rows through the stage (7), W weights (count_include_pad
# False), ceil_mode, all three 16- and 32-bit formats; and windows that do not slide
# (stride 2: the permutes)
SLIDING_TAPS = [  # (x shape, kernel, stride, padding, ceil_mode, count_include_pad)
    ((2, 16, 14, 14), 3, 1, 1, False, True),
    ((2, 16, 14, 14), 3, 1, 1, False, False),
    ((1, 24, 8, 8), 3, 1, 1, False, False),
    ((2, 16, 7, 7), 3, 1, 1, False, True),
    ((2, 16, 11, 10), 2, 1, 0, True, True),
    ((1, 16, 12, 13), 4, 1, 2, False, False),
    ((1, 17, 9, 12), 4, 1, 1, True, True),
    ((2, 16, 14, 14), 3, 2, 1, False, True),
]


def _w_taps(w, k, s, p, ceil=False):
    n_out = _plan.avg_output_size(w, k, s, p, ceil)
    lo, hi = _plan.cover(*_plan.avg_windows(w, n_out, k, s, p, True)[:2], w)
    return _plan.taps(lo, hi, n_out), n_out


def test_sliding_taps_are_those_of_stride_one():
    """_plan.sliding_taps (pg_plane.h checks the same at every item): stride 1 with any
    padding and ceil_mode slides, and adaptive windows that are k2s1's; stride 2, other
    adaptive windows, and columns no window covers (their +0.0 slot) do not."""
    for w, k, s, p, ceil in [(14, 3, 1, 1, False), (8, 2, 1, 0, True), (13, 4, 1, 2, False),
                             (12, 4, 1, 1, True), (9, 1, 1, 0, False)]:
        tp, n_out = _w_taps(w, k, s, p, ceil)
        assert _plan.sliding_taps(tp, w, n_out)
    for w, k, s, p in [(14, 3, 2, 1), (14, 2, 2, 0), (17, 2, 3, 0)]:
        tp, n_out = _w_taps(w, k, s, p)
        assert not _plan.sliding_taps(tp, w, n_out)
    lo, hi = _plan.cover(*_plan.adaptive_windows(14, 10)[:2], 14)
    assert not _plan.sliding_taps(_plan.taps(lo, hi, 10), 14, 10)
    lo, hi = _plan.cover(*_plan.adaptive_windows(14, 13)[:2], 14)   # k2s1's windows
    assert _plan.sliding_taps(_plan.taps(lo, hi, 13), 14, 13)
    tp, n_out = _w_taps(14, 3, 1, 1)
    assert _plan.plane_regs(14, 4, tp, n_out) and _plan.plane_regs(14, 2, tp, n_out)
    tp, n_out = _w_taps(7, 3, 1, 1)
    assert not _plan.plane_regs(7, 4, tp, n_out)   # narrower than PLANE_SLIDING_W


def _sliding_grad(shape, dtype, rng):
    """Random values with signed zeros (whole rows and a whole plane of -0.0, columns of
    -0.0 at both edges, a row of +0.0), an infinity and a NaN: no window holds two NaNs
    or infinities of both signs (which NaN a sum keeps is the operand order's)."""
    g = make_array(shape, dtype, rng)
    g[0, 0] = -0.0
    g[..., 0] = g[..., -1] = -0.0
    g[:, -1, 1, :] = -0.0
    g[:, -1, 2, :] = 0.0
    g[-1, 1, -2, 3] = np.inf
    g[-1, 2, 3, 2] = np.nan
    return g


@pytest.mark.skipif(_kernels.simd_in_use() != "avx2", reason="an AVX2 path")
@pytest.mark.parametrize("dtype", [np.float32, np.float16, BFLOAT16],
                         ids=["f32", "f16", "bf16"])
@pytest.mark.parametrize("x_shape, k, st, p, ceil, cip", SLIDING_TAPS)
def test_planes_in_registers_with_sliding_taps_give_the_lanes_bits(
        forms_off, monkeypatch, restore_num_threads, x_shape, k, st, p, ceil, cip, dtype):
    go = _sliding_grad(_avg_out_shape(x_shape, k, st, p, ceil), dtype,
                       np.random.default_rng(29))
    ref = ref_avg_pool2d_backward(go, x_shape, (k, k), (st, st), (p, p), ceil, cip, 0)
    rtol, atol = tolerance(dtype)
    monkeypatch.setattr(_plan, "TUNE_SHAPE_BYTES", None)   # one form a plan

    def make_op():
        return pg.AvgPool2dBackward(go, x_shape, k, st, p, ceil, cip, 0, 0,
                                    np.empty(x_shape, dtype))

    def run():
        op = make_op()
        out = op.grad_input
        outs = []
        for nt in (1, 2):
            out[...] = 7
            op.execute(n_threads=nt)
            outs.append(_bits(out).copy())
        assert np.array_equal(outs[0], outs[1])
        np.testing.assert_allclose(out.astype(np.float64), ref, rtol=rtol, atol=atol)
        return op._kernel.c_item, outs[0]

    forms_off({"plane"})
    item, want = run()
    assert item != "plane"
    forms_off(())
    monkeypatch.setattr(_plan, "PLANE_REGS_TAPS", 4)
    monkeypatch.setattr(_plan, "PLANE_REGS_W", {4: 1, 2: 1})
    item, got = run()
    assert item == "plane"
    assert np.array_equal(got, want)
    # both store forms through the timing
    monkeypatch.setattr(_plan, "TUNE_SHAPE_BYTES", 0)
    monkeypatch.setattr(_plan, "TUNE_BYTES", 0)
    op = make_op()
    assert [a.form for a in op._kernel.alternates] == ["stream"]
    _calls_keep_bits(op, want, op._kernel.tune_calls + 3)


def _alone_bits(op, dtype, ref):
    """Run a form-less op once: its values against the float64 reference, then its bits."""
    op.execute()
    rtol, atol = tolerance(dtype)
    np.testing.assert_allclose(op.grad_input.astype(np.float64), ref, rtol=rtol, atol=atol)
    return _bits(op.grad_input).copy()


def _calls_keep_bits(op, want, calls):
    """`calls` executions (through the form timing and after, workspace or not, 1 and 2
    threads), each giving the bits `want`."""
    ws = np.empty(op.workspace_size, np.uint8)
    for call in range(calls):
        op.grad_input[...] = np.nan
        op.execute(workspace=ws if call % 2 else None, n_threads=1 + call % 3 // 2)
        assert np.array_equal(_bits(op.grad_input), want)


def _avg_call(dtype, x_shape, k, st, p, ceil, cip, seed):
    """Random grad_output of one average-pool call, its float64 reference, and a maker of
    ops planned for it (each into a new grad_input)."""
    x = np.zeros(x_shape, dtype)
    go = make_array(_avg_out_shape(x_shape, k, st, p, ceil), dtype,
                    np.random.default_rng(seed))
    ref = ref_avg_pool2d_backward(go, x_shape, (k, k), (st, st), (p, p), ceil, cip, 0)

    def make_op():
        return pg.AvgPool2dBackward(go, x, k, st, p, ceil, cip, 0, 0, np.empty_like(x))

    return go, ref, make_op


def _avg_out_shape(x_shape, k, st, p, ceil):
    out = []
    for size in x_shape[2:]:
        n = (size + 2 * p - k + (st - 1 if ceil else 0)) // st + 1
        if ceil and (n - 1) * st >= size + p:
            n -= 1
        out.append(n)
    return x_shape[:2] + tuple(out)


def test_settle_keeps_the_fastest_of_several_forms(monkeypatch):
    """With three alternates (the float64 strips' row form beside each store form: the
    most forms a call has), settle keeps the one of least time where it is below
    TUNE_MARGIN of the planned form's, else the planned form; it takes one time a form."""
    monkeypatch.setattr(_plan, "TUNE_SHAPE_BYTES", 0)
    monkeypatch.setattr(_plan, "TUNE_BYTES", 0)
    monkeypatch.setattr(_plan, "STREAM_ROW_BYTES", 0)
    rng = np.random.default_rng(3)
    x = np.zeros((2, 8, 20, 40), np.float64)
    go = make_array((2, 8, 20, 40), np.float64, rng)

    def make_op():
        return pg.AvgPool2dBackward(go, x, 3, 1, 1, False, True, 0, 0, np.empty_like(x))

    first = make_op()
    if not first._kernel.strips:
        pytest.skip("no AVX2: the planes do not go in strips")
    assert [a.form for a in first._kernel.alternates] == ["stream", "cache rows",
                                                           "stream rows"]
    assert len(first._kernel.alternates) + 1 == _kernels.MAX_FORMS
    assert first._kernel.tune_calls == _kernels.MAX_FORMS * (1 + _kernels.TUNE_TIMED) + 1
    with pytest.raises(ValueError, match="4 times"):
        first._kernel.settle(1.0, 0.5)
    first.execute()
    want = _bits(first.grad_input).copy()
    m = _kernels.TUNE_MARGIN
    for times, kept in (((0.9, 0.5, 1.0), 1), ((0.5, 0.9, 1.0), 0), ((1.0, 0.9, 0.4), 2),
                        ((m * 1.01, m * 1.02, m * 1.03), None),
                        ((m * 0.99, m * 1.01, 1.0), 0)):
        op = make_op()
        kernel = op._kernel
        alts = kernel.alternates
        kernel.settle(1.0, *times)
        assert kernel.alternates == ()
        if kept is None:
            assert kernel.alternate is None and kernel.store_form == "cache"
        else:
            assert kernel.alternate is alts[kept] and kernel.store_form == alts[kept].form
        op.grad_input[...] = np.nan
        op.execute(workspace=np.empty(op.workspace_size, np.uint8))
        assert np.array_equal(_bits(op.grad_input), want)


def test_add_alternate_refuses_what_cannot_be_timed():
    """An alternate is another kernel with no alternates of its own; at most MAX_FORMS
    forms a call; none once the forms were timed."""
    rng = np.random.default_rng(4)
    x = np.zeros((1, 2, 6, 8), np.float32)
    go = make_array((1, 2, 3, 4), np.float32, rng)

    def kern():
        return pg.AvgPool2dBackward(go, x, 2, 2, 0, False, True, 0, 0,
                                    np.empty_like(x))._kernel

    k = kern()
    with pytest.raises(ValueError, match="another kernel"):
        k.add_alternate(k)
    with_alt = kern()
    with_alt.add_alternate(kern())
    with pytest.raises(ValueError, match="no alternate of its own"):
        k.add_alternate(with_alt)
    for _ in range(_kernels.MAX_FORMS - 1):
        k.add_alternate(kern())
    with pytest.raises(ValueError, match="at most"):
        k.add_alternate(kern())
    k.settle(1.0, *([0.5] + [1.0] * (_kernels.MAX_FORMS - 2)))
    with pytest.raises(ValueError, match="timed already"):
        k.add_alternate(kern())
    k.set_alternate(None)
    assert k.alternate is None and k.alternates == () and k.tune_calls == 0


@pytest.fixture
def split_items(monkeypatch):
    """Work items split down to single rows (and single D planes) however small the call:
    the blocks' edges, where the gather expands again rows a neighbouring block expanded
    too, on the small shapes of the tests."""
    monkeypatch.setattr(_plan, "MIN_ITEM_VALUES", 0)
    monkeypatch.setattr(_plan, "MIN_ITEMS", 1 << 30)   # whatever the number of CPUs
    monkeypatch.setattr(functions, "_cache", {})
    _plan.gather_geometry.cache_clear()
    yield
    _plan.gather_geometry.cache_clear()


SPLIT_AVG = [  # (x shape, kernel, stride, padding, ceil_mode, count_include_pad, divisor)
    ((2, 3, 21, 37), 3, 2, 1, False, True, 0),
    ((1, 4, 19, 45), 5, 2, 2, True, False, 0),
    ((2, 2, 16, 30), 2, 2, 0, False, True, 0),
    ((1, 3, 17, 23), (5, 3), (1, 2), (2, 1), False, True, 3),
    ((2, 3, 23, 61), 7, 3, 3, True, False, 0),
    ((5, 12, 9), 3, 1, 1, False, False, 0),           # 3-D input
]

SPLIT_ADAPTIVE = [  # (x shape, output size)
    ((2, 3, 9, 13, 17), (4, 5, 6)),
    ((1, 2, 7, 20, 9), (3, 7, 9)),
    ((3, 4, 6, 5, 5), (2, 2, 2)),                     # small planes
    ((2, 16, 11, 3), (5, 2, 2)),                      # 4-D input
]


def _split_runs(dtype):
    rng = np.random.default_rng(8)
    outs, items = [], []
    for x_shape, k, s, p, ceil, cip, div in SPLIT_AVG:
        y = pg.avg_pool2d(np.zeros(x_shape, np.float32), k, s, p, ceil_mode=ceil,
                          count_include_pad=cip, divisor_override=div)
        go = make_array(y.shape, dtype, rng)
        for layout in ("c", "channels_last", "negative"):
            out = empty_out(x_shape, dtype, layout)
            op = pg.AvgPool2dBackward(go, x_shape, k, s, p, ceil, cip, div, 0, out)
            op.execute()
            outs.append(_bits(out))
            items.append(op._kernel.n_items)
    for x_shape, out_size in SPLIT_ADAPTIVE:
        go = make_array(x_shape[:-3] + out_size, dtype, rng)
        for layout in ("c", "channels_last", "negative"):
            out = empty_out(x_shape, dtype, layout)
            op = pg.AdaptiveAvgPool3dBackward(go, x_shape, out)
            op.execute()
            outs.append(_bits(out))
            items.append(op._kernel.n_items)
    return outs, items


# the max-pool scatter over planes split into blocks of rows: the index check records each
# output row's smallest and largest index, and a block skips the rows with none inside it
# (unit-stride index rows; the others are scanned whole).  Indices from the forward (in
# their windows), anywhere in the plane, or all in the plane's first and last rows
MAX_SPLIT = [((2, 16, 12, 20), (3, 5)), ((1, 8, 9, 13), (4, 4)), ((2, 3, 17, 11), (5, 2))]


def _max_split_runs(idx_dtype):
    rng = np.random.default_rng(23)
    outs, items = [], []
    for x_shape, o in MAX_SPLIT:
        x = make_array(x_shape, np.float32, rng)
        _, fwd = pg.adaptive_max_pool2d(x, o, return_indices=True)
        hw = x_shape[2] * x_shape[3]
        ends = rng.choice([0, 1, hw - 2, hw - 1], fwd.shape)
        for ind in (fwd, rng.integers(0, hw, fwd.shape), ends):
            go = make_array(fwd.shape, np.float32, rng)
            want = ref_adaptive_max_pool2d_backward(go, x_shape, ind)
            for layout in ("c", "channels_last", "negative"):
                g_, i_ = as_layout(go, layout), as_layout(ind.astype(idx_dtype), layout)
                out = empty_out(x_shape, np.float32, layout)
                op = pg.AdaptiveMaxPool2dBackward(g_, x_shape, i_, out)
                op.execute(n_threads=2)
                np.testing.assert_allclose(out, want, *tolerance(np.float32))
                outs.append(_bits(out))
                items.append(op._kernel.n_items)
    return outs, items


@pytest.mark.parametrize("idx_dtype", [np.int64, np.int32])
def test_max_pool_split_blocks_give_the_same_bits(idx_dtype, request):
    whole, whole_items = _max_split_runs(idx_dtype)
    request.getfixturevalue("split_items")
    split, split_items = _max_split_runs(idx_dtype)
    assert sum(split_items) > 2 * sum(whole_items)   # the fixture did split them
    for a, b in zip(whole, split, strict=True):
        assert np.array_equal(a, b)


def test_gather_blocks_grow_their_budget_rather_than_expand_rows_again(monkeypatch):
    """Blocks that fit SCRATCH_ELEMS only by expanding each grad_output row more than
    SCRATCH_REEXPAND times on average (channels-last k11 s1 p5 rows: 5-row blocks
    expanding 15) get up to SCRATCH_GROW times the budget (one 40-row block); the bits are
    those of the small blocks, and a block that re-expands little keeps the budget."""
    x_shape = (1, 16, 40, 30)
    monkeypatch.setattr(_plan, "SCRATCH_ELEMS", 16 * 30 * 16)   # 16 rows of 30 x 16 lanes
    monkeypatch.setattr(_plan, "MIN_ITEM_VALUES", 1 << 62)      # no split for threads

    def run(k, p, grow):
        monkeypatch.setattr(_plan, "SCRATCH_GROW", grow)
        monkeypatch.setattr(_plan, "SCRATCH_GROW_MAX", grow)   # one step, no doubling
        _plan.gather_geometry.cache_clear()
        go, want = _channels_last_avg(np.float32, np.random.default_rng(33), x_shape, k, 1, p,
                                      False, True, 0)
        out = empty_out(x_shape, np.float32, "channels_last")
        op = pg.AvgPool2dBackward(go, x_shape, k, 1, p, False, True, 0, 0, out)
        op.execute(n_threads=2)
        np.testing.assert_allclose(out, want, *tolerance(np.float32))
        return op._kernel.n_items, _bits(out)

    (n_small, small), (n_grown, grown) = run(11, 5, 1), run(11, 5, 4)
    assert (n_small, n_grown) == (8, 1)
    assert np.array_equal(small, grown)
    assert run(3, 1, 4)[0] == run(3, 1, 1)[0] == 4    # 10-row blocks expanding 12: kept


def test_gather_blocks_grow_again_where_the_first_step_still_reexpands(monkeypatch):
    """Where blocks at SCRATCH_GROW times the budget still expand each grad_output row more
    than SCRATCH_REEXPAND times (k11 s1 p5 at a quarter of the budget above: 5-row blocks
    expanding 15), the budget doubles, up to SCRATCH_GROW_MAX times (20-row blocks expanding
    30); the same bits, and a block that re-expands little stops at the first step."""
    x_shape = (1, 16, 40, 30)
    monkeypatch.setattr(_plan, "SCRATCH_ELEMS", 4 * 30 * 16)    # 4 rows of 30 x 16 lanes
    monkeypatch.setattr(_plan, "MIN_ITEM_VALUES", 1 << 62)      # no split for threads
    monkeypatch.setattr(_plan, "SCRATCH_GROW", 4)
    go, want = _channels_last_avg(np.float32, np.random.default_rng(34), x_shape, 11, 1, 5,
                                  False, True, 0)

    def run(grow_max, k=11, p=5):
        monkeypatch.setattr(_plan, "SCRATCH_GROW_MAX", grow_max)
        _plan.gather_geometry.cache_clear()
        g, w = (go, want) if k == 11 else _channels_last_avg(
            np.float32, np.random.default_rng(35), x_shape, k, 1, p, False, True, 0)
        out = empty_out(x_shape, np.float32, "channels_last")
        op = pg.AvgPool2dBackward(g, x_shape, k, 1, p, False, True, 0, 0, out)
        op.execute(n_threads=2)
        np.testing.assert_allclose(out, w, *tolerance(np.float32))
        return op._kernel.n_items, op.workspace_size, _bits(out)

    (n4, ws4, once), (n8, ws8, twice) = run(4), run(8)
    assert (n4, n8) == (8, 2) and ws8 > ws4
    assert np.array_equal(once, twice)
    assert run(8, 3, 1)[:2] == run(4, 3, 1)[:2]   # 10-row blocks expanding 12 at 4x: kept


def test_max_pool_blocks_hold_whole_windows(monkeypatch):
    """Where the output rows' windows tile the plane (H = Ho * kh), a plane split into
    blocks of rows is split at window edges while a window fits in the budget, also when
    the blocks are split further for the threads; elsewhere the rows are halved as
    before.  Any block gives the same bits (the block only chooses which indices an item
    adds)."""
    blocks = _plan.scatter_blocks
    assert _plan.SCRATCH_ELEMS // 7168 == 18
    assert blocks(112, 7168, 32, 2, 7) == 16           # ->7x7 channels-last, 64 lanes
    assert blocks(112, 7168, 32, 2) == 18              # no output height given
    assert blocks(113, 7168, 32, 2, 7) == 18           # overlapping windows
    assert blocks(112, 1792, 4, 2, 7) == 64            # 73 rows of budget: 4 windows
    assert blocks(112, 1792, 1, 2, 7) == 8             # 64 -> 32 -> 16 -> 8 for threads
    assert blocks(112, 7168, 32, 2, 112) == 18         # one-row windows: nothing to keep
    # a plane split at window edges (bh 8 = 2 windows of 4 rows, 3 blocks) against one
    # block: indices from the forward, and anywhere in the plane
    x_shape, o = (2, 16, 24, 24), (6, 6)
    rng = np.random.default_rng(31)
    x = make_array(x_shape, np.float32, rng)
    _, fwd = pg.adaptive_max_pool2d(x, o, return_indices=True)
    go = make_array(fwd.shape, np.float32, rng)
    cases = [(fwd, layout) for layout in ("c", "channels_last")]
    cases.append((rng.integers(0, 24 * 24, fwd.shape), "channels_last"))

    def runs(bh):
        outs = []
        for ind, layout in cases:
            out = empty_out(x_shape, np.float32, layout)
            op = pg.AdaptiveMaxPool2dBackward(as_layout(go, layout), x_shape,
                                              as_layout(ind, layout), out)
            if layout == "channels_last":   # planes of 16 lanes, 24 // bh blocks each
                assert op._kernel.n_items == 2 * (24 // bh)
            op.execute(n_threads=2)
            np.testing.assert_allclose(out, ref_adaptive_max_pool2d_backward(go, x_shape, ind),
                                       *tolerance(np.float32))
            outs.append(_bits(out))
        return outs

    monkeypatch.setattr(_plan, "SCRATCH_ELEMS", 9 * 24 * 16)   # 9 rows of 16 lanes
    monkeypatch.setattr(_plan, "MIN_ITEM_VALUES", 1 << 62)   # no split for threads
    split = runs(8)
    monkeypatch.setattr(_plan, "SCRATCH_ELEMS", 1 << 17)
    for a, b in zip(runs(24), split, strict=True):
        assert np.array_equal(a, b)


@pytest.mark.parametrize("bad", [-1, "hw"])
@pytest.mark.parametrize("layout", ["c", "channels_last", "negative"])
def test_max_pool_split_blocks_reject_a_bad_index(bad, layout, request):
    """The row ranges' pass is the index check of split planes: an index outside the plane,
    in any row, is still found (161002) and nothing is written."""
    request.getfixturevalue("split_items")
    x_shape, o = (2, 8, 12, 20), (3, 5)
    rng = np.random.default_rng(24)
    ind = rng.integers(0, 240, (2, 8) + o)
    ind[1, 5, 2, 3] = -1 if bad == -1 else 240
    go = make_array(ind.shape, np.float32, rng)
    out = empty_out(x_shape, np.float32, layout)
    before = out.copy()
    op = pg.AdaptiveMaxPool2dBackward(as_layout(go, layout), x_shape, as_layout(ind, layout),
                                      out)
    assert op._kernel.n_items > 16
    with pytest.raises(pg.AclnnError) as exc:
        op.execute()
    assert exc.value.code == 161002
    assert np.array_equal(out, before)


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_split_items_give_the_same_bits(dtype, request):
    """Small calls run as whole planes (_plan.MIN_ITEM_VALUES); split into rows, as a large
    call's blocks are, they give the same bits."""
    whole, whole_items = _split_runs(dtype)
    request.getfixturevalue("split_items")
    split, split_items = _split_runs(dtype)
    assert sum(split_items) > 2 * sum(whole_items)   # the fixture did split them
    for a, b in zip(whole, split):
        assert np.array_equal(a, b)


# rows of 52 bytes (a plane inside a line or across two), 68, exactly a line, 148, and
# 1200 (longer than the stage, pg_stream.h's pg_stage); narrower rows take the lane path
REGION_SHAPES = [(1, 2, 1, 13), (2, 3, 5, 17), (1, 2, 9, 16), (2, 3, 33, 37), (1, 2, 20, 100),
                 (1, 2, 7, 300)]


@pytest.mark.parametrize("simd", ["default", "baseline_simd"])
@pytest.mark.parametrize("split", [False, True], ids=["planes", "split"])
@pytest.mark.parametrize("x_shape", REGION_SHAPES)
def test_staged_region_at_every_offset_from_a_line(x_shape, split, simd, request,
                                                  monkeypatch):
    """The float32 C item's streamed region, formed in a stage and written as whole lines:
    grad_input starting at every 4-byte offset from a cache line, planes smaller than a
    line, rows shorter and longer than a line and than the stage, items of whole planes
    (many stage fills each) and of single rows (a region starting mid-plane).  The same
    bits as ordinary stores, and nothing written outside grad_input."""
    if simd != "default":
        request.getfixturevalue(simd)
    rng = np.random.default_rng(21)
    size = int(np.prod(x_shape))
    runs = []
    for s in (2, 1):   # grad_input rows of one or two terms, and of two or three
        y = pg.avg_pool2d(np.zeros(x_shape, np.float32), 3, s, 1)
        go = make_array(y.shape, np.float32, rng)
        runs.append((s, go, _bits(pg.avg_pool2d_backward(go, x_shape, 3, s, 1))))
    request.getfixturevalue("stream_regions")
    if split:
        request.getfixturevalue("split_items")
    else:   # whole planes however many CPUs the machine has
        monkeypatch.setattr(_plan, "MIN_ITEM_VALUES", 1 << 62)
    _plan.gather_geometry.cache_clear()
    guard = np.uint32(0x7FC0BEEF)
    raw = np.empty(size + 32, np.float32)
    base = (-raw.ctypes.data % 64) // 4     # raw[base] starts a line
    ws_raw = np.empty(64 * 1024, np.uint8)
    ws_base = -ws_raw.ctypes.data % 4096
    for s, go, want in runs:
        for off in range(16):
            raw.view(np.uint32).fill(guard)
            out = raw[base + off:base + off + size].reshape(x_shape)
            op = pg.AvgPool2dBackward(go, x_shape, 3, s, 1, False, True, 0, 0, out)
            assert op._kernel.c_item == "region"
            # the workspace at offsets all over a page (where the stage moves so as not
            # to cross one) and from a line: nothing written past its end
            ws_raw.fill(0xA5)
            at = ws_base + off * 260
            ws = ws_raw[at:at + op.workspace_size]
            assert ws.size == op.workspace_size
            op.execute(workspace=ws, n_threads=2)
            assert np.array_equal(_bits(out), want), (s, off)
            left = raw[:base + off].view(np.uint32)
            right = raw[base + off + size:].view(np.uint32)
            assert np.all(left == guard) and np.all(right == guard), (s, off)
            assert np.all(ws_raw[:at] == 0xA5) and np.all(ws_raw[at + ws.size:] == 0xA5)


def _region_items(request, monkeypatch, region, split):
    """Streamed row blocks (or not), and items of single rows (split) or of whole planes."""
    if region:
        request.getfixturevalue("stream_regions")
    if split:
        request.getfixturevalue("split_items")
    else:
        monkeypatch.setattr(_plan, "MIN_ITEM_VALUES", 1 << 62)
    _plan.gather_geometry.cache_clear()


# rows of 16 to 112 columns (interiors of whole blocks of eight, and 12 = 4 mod 8), planes
# of 5 to 20 rows, odd and even
FUSED_SHAPES = [(1, 2, 9, 16), (2, 3, 13, 24), (2, 2, 7, 48), (1, 2, 20, 112)]
# (kernel, stride, padding, ceil_mode, count_include_pad, whether the register form takes
# it): stride 2 with phases of one and two terms, or one and one; k3s2p0 leaves the last
# column to no window (an edge column); stride 1 of up to three terms and three rows;
# border divisors; a last window cut off
FUSED_POOLS = [(3, 2, 1, False, True, True), (3, 2, 1, True, False, True),
               (3, 2, 0, False, True, False), (3, 2, 0, True, False, True),
               (2, 2, 0, True, True, True), (3, 1, 1, False, False, True),
               (2, 1, 0, False, True, True), (1, 1, 0, False, True, True)]


@pytest.mark.skipif(_kernels.simd_in_use() != "avx2", reason="an AVX2 path")
@pytest.mark.parametrize("split", [False, True], ids=["planes", "split"])
@pytest.mark.parametrize("region", [False, True], ids=["cache", "streamed"])
@pytest.mark.parametrize("x_shape", FUSED_SHAPES)
def test_fused_region_at_every_offset_from_a_line(x_shape, region, split, request,
                                                  monkeypatch):
    """The float64 items whose E values are formed in registers and pushed through the
    register-fed writer (pg_item.h's pg_fused_avx2_f64, pg_stream.h's pg_vs), where they
    apply and where not, streamed (outputs larger than the cache) or with ordinary stores
    (in the cache): grad_input at every offset of a whole value from a cache line,
    grad_output contiguous and reversed along H, items of whole planes and of single rows,
    1 and 2 threads.  The same bits as the row loop (the reference: the default plan,
    taken before the region and item settings), and nothing written outside grad_input."""
    rng = np.random.default_rng(23)
    dtype = np.float64
    es = np.dtype(dtype).itemsize
    size = int(np.prod(x_shape))
    runs = []
    for k, st, p, ceil, cip, fused in FUSED_POOLS:
        y = pg.avg_pool2d(np.zeros(x_shape, dtype), k, st, p, ceil_mode=ceil,
                          count_include_pad=cip)
        # -0.0 in the first and last columns: a sum that reaches a slot beyond a row's
        # end keeps the sign of a zero only where that slot holds -0.0, as the taps' does
        signed = make_array(y.shape, dtype, rng)
        signed[..., 0] = signed[..., -1] = -0.0
        for go in (signed, make_array(y.shape, dtype, rng)[..., ::-1, :]):
            # the reference: rows of grad_input apart in memory, which the register form
            # never takes
            ref = np.empty(x_shape[:3] + (x_shape[3] + 1,), dtype)[..., :x_shape[3]]
            op = pg.AvgPool2dBackward(go, x_shape, k, st, p, ceil, cip, 0, 0, ref)
            assert "fused" not in op._kernel.c_item
            op.execute()
            runs.append(((k, st, p, ceil, cip), go, _bits(ref), fused))
    _region_items(request, monkeypatch, region, split)
    guard = 0xA7
    raw = np.empty(es * size + 256, np.uint8)
    base = -raw.ctypes.data % 64
    for args, go, want, fused in runs:
        for off in range(0, 64, es):
            raw.fill(guard)
            out = raw[base + off:base + off + es * size].view(dtype).reshape(x_shape)
            op = pg.AvgPool2dBackward(go, x_shape, *args, 0, 0, out)
            assert (op._kernel.c_item == ("region, fused" if region else "fused")) == fused, (
                args, op._kernel.c_item)
            for nt in (1, 2):
                out[...] = 7
                op.execute(n_threads=nt)
                assert np.array_equal(_bits(out), want), (args, off, nt)
                assert np.all(raw[:base + off] == guard), (args, off, nt)
                assert np.all(raw[base + off + out.nbytes:] == guard), (args, off, nt)


def _at_every_offset(go, x_shape, args, want, c_item):
    """AvgPool2dBackward(go, x_shape, *args) into a grad_input at every offset of a whole
    value from a 64-byte line: the plan takes c_item, its bits on 1 and 2 threads are
    `want`, and nothing is written outside grad_input."""
    dtype = go.dtype
    es, size = dtype.itemsize, int(np.prod(x_shape))
    raw = np.empty(es * size + 256, np.uint8)
    base = -raw.ctypes.data % 64
    for off in range(0, 64, es):
        raw.fill(0xA7)
        out = raw[base + off:base + off + es * size].view(dtype).reshape(x_shape)
        op = pg.AvgPool2dBackward(go, x_shape, *args, 0, out)
        assert op._kernel.c_item == c_item, (x_shape, args, op._kernel.c_item)
        for nt in (1, 2):
            out[...] = 7
            op.execute(n_threads=nt)
            assert np.array_equal(_bits(out), want), (args, off, nt)
            assert np.all(raw[:base + off] == 0xA7), (args, off, nt)
            assert np.all(raw[base + off + out.nbytes:] == 0xA7), (args, off, nt)


# float64 stride 1 in strips of 8 columns (pg_item.h's pg_fused1_strips_f64): one strip
# (W = 8) and several, W = 12 and 28 not whole strips, planes of 3 to 13 rows, one plane
# and several an item
STRIP_SHAPES = [(1, 1, 5, 8), (2, 3, 13, 16), (1, 2, 3, 24), (1, 2, 7, 56), (2, 2, 6, 12),
                (1, 3, 4, 28)]
STRIP_POOLS = [(3, 1, 1, False, True, 0), (3, 1, 1, True, False, 0), (2, 1, 0, False, True, 0),
               (3, 1, 0, True, True, 5), (2, 1, 1, False, False, 0), (1, 1, 0, False, True, 0)]


@pytest.mark.skipif(_kernels.simd_in_use() != "avx2", reason="an AVX2 path")
@pytest.mark.parametrize("split", [False, True], ids=["planes", "split"])
@pytest.mark.parametrize("region", [False, True], ids=["cache", "streamed"])
@pytest.mark.parametrize("x_shape", STRIP_SHAPES)
def test_float64_stride1_strips(x_shape, region, split, request, monkeypatch):
    """float64 stride-1 gradients formed in strips of a line walked down each plane, with
    ordinary stores (outputs in the cache: any offset of a value from a line; W = 12 and
    28 end in a strip that overlaps the one before) or streamed
    (where grad_input lies 0, 16, 32 or 48 bytes from a line, the lines across two rows
    and planes from two strips; 8, 24, ... take the register rows): the same bits as the
    row loop (the same call into a grad_input whose rows are not contiguous), and nothing
    written outside grad_input.  NaN, Inf and -0.0 among the values, grad_output reversed
    along H too."""
    rng = np.random.default_rng(41)
    _region_items(request, monkeypatch, region, split)
    wide = np.empty(x_shape[:3] + (x_shape[3] + 1,))
    for k, st, p, ceil, cip, div in STRIP_POOLS:
        y = pg.avg_pool2d(np.zeros(x_shape), k, st, p, ceil_mode=ceil, count_include_pad=cip)
        go = make_array(y.shape, np.float64, rng)
        go.reshape(-1)[rng.integers(0, go.size, 3)] = [np.nan, np.inf, -0.0]
        for g in (go, go[..., ::-1, :]):
            ref = wide[..., :x_shape[3]]
            pg.AvgPool2dBackward(g, x_shape, k, st, p, ceil, cip, div, 0, ref).execute()
            _at_every_offset(g, x_shape, (k, st, p, ceil, cip, div), _bits(ref),
                             "region, fused" if region else "fused")
    _plan.gather_geometry.cache_clear()


SIMD_AVG = [  # (x shape, kernel, stride, padding, count_include_pad)
    ((2, 3, 21, 37), 3, 2, 1, True),       # phases of 1 and 2 taps
    ((2, 3, 20, 40), 2, 2, 0, True),       # 1 and 1
    ((1, 4, 19, 45), 5, 2, 2, False),      # 3 and 2, border divisors
    ((1, 2, 16, 75), 4, 2, 1, True),       # 2 and 2
    ((3, 2, 9, 9), 3, 1, 1, True),         # period 1
    # period 1 through pg_poly1_avx2_f32: interiors of 28 and 20 columns (whole blocks of
    # eight and an overlapping last one), 3 and 2 taps
    ((2, 3, 9, 30), 3, 1, 1, True),
    ((1, 2, 8, 21), 2, 1, 0, True),
    ((2, 3, 23, 61), 7, 3, 3, False),      # period 3: generic loops
    # period 2 in the float32 item's row loop (pg_item_erows_poly2_avx2): an interior of
    # whole blocks only (16 and 8 columns per phase), and one of 7 (the per-row path)
    ((2, 3, 12, 37), 6, 2, 3, False),      # 3 and 3, 16
    ((1, 3, 11, 20), 4, 2, 1, True),       # 2 and 2, 8
    ((1, 3, 10, 16), 3, 2, 1, True),       # 1 and 2, 7
    ((1, 2, 12, 20), 5, 1, 2, True),       # five covering rows per grad_input row
    # more than three terms a phase (pg_poly1_avx2_f32 and PG_POLY2_CASES: constants up to
    # 8 and 4, counts beyond as they are), more than four taps a column (a tap table of up
    # to 16), and 17 (no tap table: the column ranges); channels-last C = 3 and 2 go as
    # lanes of W * C values
    ((2, 3, 19, 40), 7, 2, 3, True),       # phases of 4 and 3
    ((1, 2, 12, 45), 5, 1, 2, False),      # period 1, 5 terms and rows
    ((1, 3, 14, 50), 11, 1, 5, True),      # period 1, 11
    ((1, 2, 10, 60), 11, 2, 5, False),     # period 2, 6 and 5
    ((1, 2, 9, 40), 17, 1, 8, True),       # 17 taps
    ((2, 8, 9, 9), 5, 1, 2, True),         # narrow planes as lanes, 5 taps
]


@pytest.fixture
def baseline_simd():
    """Runs the test body's kernels with the AVX2 loops forbidden, then allows them again
    (the one-shot functions' cached plans are dropped each time: a plan may choose a path
    by the loops there are when it is made)."""
    functions._cache.clear()
    _kernels._set_simd(False)
    yield
    _kernels._set_simd(True)
    functions._cache.clear()


@pytest.mark.skipif(_kernels.simd_in_use() != "avx2", reason="CPU without AVX2")
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_avx2_loops_give_the_same_bits_as_baseline(dtype, request):
    def runs():
        outs = []
        for x_shape, k, s, p, cip in SIMD_AVG:
            y = pg.avg_pool2d(np.zeros(x_shape, np.float32), k, s, p, count_include_pad=cip)
            go = _special(y.shape, dtype, np.random.default_rng(9))
            for layout in ("c", "channels_last"):
                out = empty_out(x_shape, dtype, layout)
                pg.avg_pool2d_backward(go, x_shape, k, s, p, count_include_pad=cip,
                                       out=out, n_threads=1)
                outs.append(_nan_bits(out))
        go3 = make_array((2, 3, 4, 5, 9), dtype, np.random.default_rng(8))
        for layout in ("c", "channels_last"):
            out = empty_out((2, 3, 9, 14, 37), dtype, layout)
            pg.adaptive_avg_pool3d_backward(go3, (2, 3, 9, 14, 37), out=out)
            outs.append(_nan_bits(out))
        # non-overlapping windows (each value weighted and rounded once, pg_item.h):
        # kernel = stride = 2 with an odd width (ceil_mode), an uncovered last column,
        # and adaptive integer ratios
        # (rows of 64-byte blocks, of 32-byte blocks only: W = 13, and 17 in 16 bits)
        for x_shape, ceil in [((2, 3, 21, 35), True), ((2, 3, 20, 41), False),
                              ((1, 2, 6, 17), True), ((2, 3, 6, 13), False),
                              ((2, 3, 7, 5), True)]:   # Wo < 8
            y = pg.avg_pool2d(np.zeros(x_shape, np.float32), 2, 2, 0, ceil_mode=ceil)
            go = _special(y.shape, dtype, np.random.default_rng(12))
            for layout in ("c", "channels_last"):
                out = empty_out(x_shape, dtype, layout)
                pg.avg_pool2d_backward(go, x_shape, 2, 2, 0, ceil_mode=ceil, out=out,
                                       n_threads=1)
                outs.append(_nan_bits(out))
        go3 = _special((2, 3, 4, 6, 8), dtype, np.random.default_rng(13))
        out = empty_out((2, 3, 8, 12, 48), dtype, "c")
        pg.adaptive_avg_pool3d_backward(go3, (2, 3, 8, 12, 48), out=out)
        outs.append(_nan_bits(out))
        # runs of rows with the same windows copied from the first (rows under and over
        # 32 bytes), overlapping W windows; 64 planes, so that H is not split into items
        for x_shape, o in [((8, 8, 5, 12, 10), (2, 4, 3)), ((4, 16, 3, 15, 70), (2, 3, 9))]:
            go3 = _special(x_shape[:2] + o, dtype, np.random.default_rng(14))
            out = empty_out(x_shape, dtype, "c")
            pg.adaptive_avg_pool3d_backward(go3, x_shape, out=out)
            outs.append(_nan_bits(out))
        # global pooling's plane fills: shorter than, equal to and past one 32-byte store
        for x_shape in [(2, 3, 2, 3), (2, 3, 4, 4), (2, 3, 7, 7), (1, 2, 3, 45)]:
            go = _special(x_shape[:2] + (1, 1), dtype, np.random.default_rng(10))
            if go.dtype.itemsize == 2:   # signalling NaNs, made quiet by either conversion
                go.view(np.uint16).reshape(-1)[-2:] = (
                    (0x7C01, 0xFC05) if go.dtype == np.float16 else (0x7F81, 0xFF85))
            for layout in ("c", "channels_last"):
                out = empty_out(x_shape, dtype, layout)
                pg.avg_pool2d_backward(go, x_shape, x_shape[2:], out=out, n_threads=1)
                outs.append(_nan_bits(out))
        # max-pool scatter (sums of repeated indices rounded once, rows with vector tails)
        # and its index check
        rng = np.random.default_rng(11)
        for x_shape, o in [((2, 3, 9, 37), (4, 5)), ((1, 2, 16, 64), (8, 8))]:
            go = _special(x_shape[:2] + o, dtype, rng)
            idx = rng.integers(0, x_shape[2] * x_shape[3], go.shape)
            idx[..., 1, :] = idx[..., 0, :1]
            for layout in ("c", "channels_last"):
                out = empty_out(x_shape, dtype, layout)
                pg.adaptive_max_pool2d_backward(go, x_shape, idx, out=out, n_threads=1)
                outs.append(_nan_bits(out))
        return outs

    fast = runs()
    request.getfixturevalue("baseline_simd")
    assert _kernels.simd_in_use() == "baseline"
    base = runs()
    for a, b in zip(fast, base):
        assert np.array_equal(a, b)


# period-2 and period-1 interiors widened over the edge columns (_plan.poly_padded): the
# E-row formers read -0.0 beyond the grad_output row for the windows' missing terms.  Right
# edge (k3s2p1), left edge (k3s2p0), both (k5s2p2, k4s2p1, k3s1p1, k2s1p0), an odd width
# (a last column left to the taps), ceil_mode, W weights (count_include_pad=False), and a
# row not widened at its right end because a column there is uncovered (k3s2p0, W even,
# last); rows put in the grow block together (period 2, Wo < 20) and one at a time
PADDED_POLY = [  # (x shape, kernel, stride, padding, ceil_mode, count_include_pad)
    ((2, 3, 9, 28), 3, 2, 1, False, True),
    ((1, 2, 5, 44), 3, 2, 1, False, True),
    ((1, 2, 7, 29), 3, 2, 0, False, True),
    ((1, 3, 8, 28), 5, 2, 2, False, False),
    ((2, 2, 6, 33), 4, 2, 1, True, True),
    ((1, 2, 5, 34), 3, 2, 1, True, False),
    ((2, 3, 7, 21), 3, 1, 1, False, True),
    ((1, 2, 6, 17), 2, 1, 0, False, True),
    ((1, 3, 6, 30), 3, 1, 1, True, False),
    ((1, 2, 6, 30), 3, 2, 0, False, True),
    # slots beyond the row for more terms than three (pad 3, 6, 10): k4s1p0 (left edge
    # only cut off by the row's start), k7s1p3, k7s2p3 (phases of 4 and 3) with W weights,
    # k11s2p5 (6 and 5); planes high enough that no H window holds both the NaN of an
    # infinity less an infinity and a NaN of grad_output (which of two NaNs a sum keeps is
    # the compiler's choice of operand order)
    ((1, 2, 12, 30), 4, 1, 0, False, True),
    ((1, 2, 16, 40), 7, 1, 3, False, True),
    ((2, 3, 24, 36), 7, 2, 3, False, False),
    ((1, 2, 30, 50), 11, 2, 5, True, True),
]


def test_plan_tables_keep_to_the_c_loops_limits():
    """The plan makes tap tables of at most MAX_TAPS taps a column (the channels-last rows
    keep one register per tap, PG_MAX_TAPS of them) and polyphase interiors of at most
    POLY_MAX_M terms a phase (the E-row formers' slots beyond a row: one fewer)."""
    assert _plan.MAX_TAPS <= _kernels.MAX_TAPS
    assert _plan.POLY_MAX_M == _kernels.POLY_MAX_M
    for k, m in [(16, 16), (17, None)]:
        out = _plan.avg_output_size(64, k, 1, 8, False)
        lo, hi = _plan.cover(*_plan.avg_windows(64, out, k, 1, 8, True)[:2], 64)
        tp, poly = _plan.taps(lo, hi, out), _plan.polyphase(lo, hi, 1)
        if m is None:
            assert tp is None and poly is None
        else:
            assert tp.shape == (64 * m,)
            assert _plan.poly_padded(lo, hi, 1, poly, out, tp)[2] == m - 1


@pytest.mark.skipif(_kernels.simd_in_use() != "avx2", reason="CPU without AVX2")
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_widened_poly_interior_gives_the_tap_tables_bits(dtype, request):
    """Signed zeros, infinities and a NaN in every edge column of grad_output: the widened
    interior's sums (with -0.0 for the terms beyond the row) have the bits of the baseline
    loops, which sum the tap table's terms."""
    widened = 0
    for x_shape, k, s, p, ceil, cip in PADDED_POLY:
        y = pg.avg_pool2d(np.zeros(x_shape, np.float32), k, s, p, ceil_mode=ceil,
                          count_include_pad=cip)
        st, en, _ = _plan.avg_windows(x_shape[-1], y.shape[-1], k, s, p, cip)
        lo, hi = _plan.cover(st, en, x_shape[-1])
        poly = _plan.polyphase(lo, hi, s)
        q0, q1, _ = _plan.poly_padded(lo, hi, s, poly, y.shape[-1],
                                      _plan.taps(lo, hi, y.shape[-1]))
        widened += (q0, q1) != poly[:2]
        assert q1 - q0 >= 8, x_shape

    def runs():
        outs = []
        rng = np.random.default_rng(31)
        for x_shape, k, s, p, ceil, cip in PADDED_POLY:
            y = pg.avg_pool2d(np.zeros(x_shape, np.float32), k, s, p, ceil_mode=ceil,
                              count_include_pad=cip)
            go = make_array(y.shape, dtype, rng)
            wo = go.shape[-1]
            for j, col in enumerate((0, 1, wo - 2, wo - 1)):
                go[..., j % go.shape[-2], col] = (-0.0, 0.0, -np.inf, np.inf)[j]
                go[..., (j + 2) % go.shape[-2], col] = -0.0
            go[0, 0, -1, -1] = np.nan
            go[0, -1, 0, 0] = np.nan
            for layout in ("c", "sliced"):
                out = empty_out(x_shape, dtype, layout)
                pg.avg_pool2d_backward(as_layout(go, layout), x_shape, k, s, p,
                                       ceil_mode=ceil, count_include_pad=cip, out=out,
                                       n_threads=1)
                outs.append(_bits(out))
        return outs

    assert widened == len(PADDED_POLY) - 1
    _same_bits_after(request, "baseline_simd", runs)


# small NCHW planes run with C as lanes (_plan.gather_views6's tstore): grad_output rows
# gathered and grad_input rows stored eight planes by eight values through transposes
# (pg_tpose.h).  C a multiple of 8, C = 13 and 20 (the last 8 lanes overlapping), C = 5
# (fewer than 8 lanes: the element loops), items with fewer than 8 grad_output values, W
# weights (count_include_pad=False), 3-D input, an adaptive 3-D call with D = 1, C in lane
# blocks, and layouts whose strides send them to the element loops (sliced, negative,
# Fortran)
TSTORE_AVG = [  # (x shape, kernel, stride, padding, count_include_pad)
    ((2, 8, 9, 9), 3, 2, 1, False),
    ((3, 13, 8, 8), 2, 2, 0, True),
    ((2, 20, 11, 7), 3, 1, 1, True),
    ((2, 16, 4, 4), 2, 2, 0, True),       # 2x2 grad_output planes: 4 values an item
    ((1, 24, 3, 3), 3, 1, 1, False),
    ((2, 5, 9, 9), 3, 2, 1, True),        # 5 lanes
    ((16, 9, 10), 3, 2, 1, False),        # 3-D input
    # lane blocks (_plan.tstore_lanes): 2 of 64, 2 of 36, and 67 planes in one
    ((2, 128, 6, 6), 2, 2, 0, True),
    ((1, 72, 5, 7), 3, 2, 1, False),
    ((1, 67, 4, 6), 3, 1, 1, True),
]


@pytest.mark.skipif(_kernels.simd_in_use() != "avx2", reason="CPU without AVX2")
@pytest.mark.parametrize("streamed", [False, True], ids=["stores", "streamed"])
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_small_planes_through_transposes_give_the_same_bits_as_baseline(dtype, streamed,
                                                                         request):
    """The transposes give the baseline loops' bits; `streamed`: with whole planes staged
    and streamed as one run, as outputs larger than the cache are."""
    if streamed:
        request.getfixturevalue("stream_everything")
    for x_shape, *_ in TSTORE_AVG:
        gi = np.zeros(x_shape, np.float32)
        assert _plan.gather_views6(gi[..., :1, :1], gi, 2)[2], x_shape

    def runs():
        outs = []
        rng = np.random.default_rng(21)
        for x_shape, k, s, p, cip in TSTORE_AVG:
            y = pg.avg_pool2d(np.zeros(x_shape, np.float32), k, s, p, count_include_pad=cip)
            go = _special(y.shape, dtype, rng)
            if go.dtype.itemsize == 2:   # a signalling NaN, made quiet by either conversion
                # (one: where two NaNs meet in a sum, which payload wins is the compiler's
                # operand order, not the same in the baseline and the AVX2 loops)
                go.view(np.uint16).reshape(-1)[-1] = (
                    0x7C01 if go.dtype == np.float16 else 0xFF85)
            for layout in ("c", "f", "sliced", "negative"):
                out = empty_out(x_shape, dtype, layout)
                pg.avg_pool2d_backward(as_layout(go, layout), x_shape, k, s, p,
                                       count_include_pad=cip, out=out, n_threads=1)
                outs.append(_nan_bits(out))
        # 3-D: D = 1, and D rows with windows of their own (overlapping, 2:1, 1 -> 2)
        for x_shape, o in [((3, 16, 1, 10, 11), (1, 3, 4)), ((2, 16, 4, 10, 11), (3, 4, 4)),
                           ((1, 24, 6, 7, 9), (3, 3, 4)), ((2, 8, 1, 9, 9), (2, 4, 4))]:
            go3 = _special(x_shape[:2] + o, dtype, rng)
            out = empty_out(x_shape, dtype, "c")
            pg.adaptive_avg_pool3d_backward(go3, x_shape, out=out, n_threads=2)
            with np.errstate(invalid="ignore"):
                np.testing.assert_allclose(out.astype(np.float64),
                                           ref_adaptive_avg_pool3d_backward(go3, x_shape),
                                           *tolerance(dtype))
            gi = np.zeros(x_shape, np.float32)
            assert _plan.gather_views6(go3.astype(np.float32), gi, 3)[2], x_shape
            outs.append(_nan_bits(out))
        return outs

    _same_bits_after(request, "baseline_simd", runs)


# small NCHW plane lanes formed one plane at a time, each row in registers (pg_plane.h,
# the form "plane"): the reference's values and the transposes' bits, for rows of 1 to
# 16 values with 1 to 4 taps a column, grad_output rows whose sentinel slots pass one
# register (k3s1p1 at W = 14), W weights, divisor_override, C not a multiple of 8 and in
# lane blocks, planes in reverse order, grad_input rows apart from each other, adaptive
# windows with D rows of their own
PLANE_AVG = [  # (x shape, kernel, stride, padding, ceil_mode, count_include_pad, divisor)
    ((2, 16, 14, 14), 3, 2, 1, False, True, 0),
    ((1, 24, 14, 14), 3, 1, 1, False, False, 0),
    ((2, 13, 13, 11), 3, 2, 1, True, False, 0),
    ((1, 8, 9, 16), (2, 3), (2, 1), (1, 0), False, True, 0),
    ((2, 16, 8, 8), 2, 2, 1, False, False, 0),     # disjoint windows
    ((2, 16, 8, 8), 3, 1, 1, False, True, 0),      # rows of exactly one vector
    ((1, 16, 6, 8), 3, 2, 1, True, False, 3),
    ((2, 16, 9, 9), (2, 3), (2, 3), 0, False, True, 0),
    ((3, 8, 5, 7), 3, 2, 1, False, True, 0),
    ((1, 72, 6, 4), 3, 1, 1, False, True, 5),
    ((2, 8, 10, 12), 4, 3, 2, True, False, 0),
    ((1, 9, 6, 1), (3, 1), (2, 1), (1, 0), False, True, 0),
]

PLANE_ADAPTIVE = [  # (x shape, output size)
    ((2, 16, 1, 9, 5), (1, 4, 13)),       # 1 to 4 windows a column
    ((1, 8, 3, 6, 16), (2, 4, 14)),
    ((2, 16, 4, 7, 9), (3, 3, 4)),
]


def _plane_views(values, layout):
    """`values` (N, C, ...) as planes in reverse order, or with each row of the last axis
    3 elements apart from the next ("apart"), or C-contiguous."""
    if layout == "reversed":
        return np.ascontiguousarray(values[:, ::-1])[:, ::-1]
    if layout == "apart":
        buf = np.full(values.shape[:-1] + (values.shape[-1] + 3,), 7, values.dtype)
        view = buf[..., 1:1 + values.shape[-1]]
        view[...] = values
        return view
    return np.ascontiguousarray(values)


@pytest.mark.skipif(_kernels.simd_in_use() != "avx2", reason="CPU without AVX2")
@pytest.mark.parametrize("mode", ["stores", "streamed", "split"])
@pytest.mark.parametrize("dtype", [np.float32, np.float16, BFLOAT16],
                         ids=["float32", "float16", "bfloat16"])
def test_small_planes_in_registers_give_the_transposes_bits(forms_off, dtype, mode, request,
                                                            monkeypatch):
    """`streamed`: outputs staged and streamed, as those larger than the cache are;
    `split`: items of a few rows of a plane."""
    if mode != "stores":
        request.getfixturevalue({"streamed": "stream_everything", "split": "split_items"}[mode])
    # every case in registers, whatever the plan would choose for its width, taps, dtype
    monkeypatch.setattr(_plan, "PLANE_REGS_W", {4: 1, 2: 1})
    monkeypatch.setattr(_plan, "PLANE_REGS_TAPS", 4)
    monkeypatch.setattr(_plan, "TSTORE_W_STEP", {})   # 16-bit W = 16 stride 1: lanes too
    used = []

    def runs():
        monkeypatch.setattr(functions, "_cache", {})
        outs = []
        rng = np.random.default_rng(8)
        calls = []
        for x_shape, k, s, p, ceil, cip, div in PLANE_AVG:
            y = pg.avg_pool2d(np.zeros(x_shape, np.float32), k, s, p, ceil, cip, div)
            calls.append((x_shape, _special(y.shape, dtype, rng),
                          lambda go, x, out, a=(k, s, p, ceil, cip, div):
                          pg.AvgPool2dBackward(go, x, *a, pg.KEEP_DTYPE, out),
                          lambda go, x_shape, a=(k, s, p, ceil, cip, div):
                          ref_avg_pool2d_backward(go, x_shape, *[
                              (v, v) if isinstance(v, int) and i < 3 else v
                              for i, v in enumerate(a)])))
        for x_shape, o in PLANE_ADAPTIVE:
            calls.append((x_shape, _special(x_shape[:2] + o, dtype, rng),
                          lambda go, x, out: pg.AdaptiveAvgPool3dBackward(go, x, out),
                          ref_adaptive_avg_pool3d_backward))
        for x_shape, go, make, ref in calls:
            x = np.zeros(x_shape, dtype)
            for layout in ("c", "reversed", "apart"):
                out = _plane_views(np.full(x_shape, 7, dtype), layout)
                op = make(_plane_views(go, layout), x, out)
                op.execute(n_threads=2)
                if layout == "c":
                    used.append(op._kernel.c_item == "plane")
                    with np.errstate(invalid="ignore"):
                        np.testing.assert_allclose(out.astype(np.float64), ref(go, x_shape),
                                                   *tolerance(dtype))
                outs.append(_bits(out))
        return outs

    in_registers = runs()
    assert all(used), used
    used.clear()
    forms_off({"plane"})
    for a, b in zip(in_registers, runs(), strict=True):
        assert np.array_equal(a, b)
    assert not any(used)


def _same_bits_as_plane_rows(forms_off, monkeypatch, runs):
    """runs() gives the same bits with channels-last input into NCHW run as lanes
    (the form "mixed_lanes") and as plane rows reading it strided."""
    monkeypatch.setattr(functions, "_cache", {})
    lanes = runs()
    forms_off({"mixed_lanes"})
    monkeypatch.setattr(functions, "_cache", {})
    for a, b in zip(lanes, runs(), strict=True):
        assert np.array_equal(a, b)


# channels-last grad_output into an NCHW grad_input (what a one-shot call returns) as
# plane lanes (the form "mixed_lanes"): the reference's values and the bits of the plane rows
# that read grad_output strided; C = 8, 13, 72 (blocks of 36) and 128 (of 64), planes
# split into blocks of rows (few items), W weights, 16-bit rounding
MIXED_AVG = [  # (x shape, kernel, stride, padding, count_include_pad)
    ((2, 8, 21, 37), 3, 2, 1, False),
    ((1, 13, 16, 16), 2, 2, 0, True),
    ((1, 72, 30, 9), 3, 1, 1, True),
    ((1, 128, 40, 24), 3, 2, 1, True),
]


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_channels_last_into_nchw_as_plane_lanes_gives_the_rows_bits(dtype, monkeypatch,
                                                                    forms_off):
    rng = np.random.default_rng(33)
    calls = []
    for x_shape, k, s, p, cip in MIXED_AVG:
        y = pg.avg_pool2d(np.zeros(x_shape, np.float32), k, s, p, count_include_pad=cip)
        go = as_layout(_special(y.shape, dtype, rng), "channels_last")
        with np.errstate(invalid="ignore"):
            want = ref_avg_pool2d_backward(go, x_shape, k, s, p, False, cip, 0)
        calls.append((go, x_shape, k, s, p, cip, want))

    def runs():
        outs = []
        for go, x_shape, k, s, p, cip, want in calls:
            for nt in (1, 2):
                out = pg.avg_pool2d_backward(go, x_shape, k, s, p, count_include_pad=cip,
                                             n_threads=nt)
                with np.errstate(invalid="ignore"):
                    np.testing.assert_allclose(out.astype(np.float64), want, *tolerance(dtype))
                outs.append(_bits(out))
        return outs

    if dtype != np.float64:   # as plane lanes
        assert all(_plan.gather_views6(go, np.empty(x_shape, dtype), 2)[2]
                   for go, x_shape, *_ in calls)
    _same_bits_as_plane_rows(forms_off, monkeypatch, runs)


@pytest.mark.parametrize("idx_dtype", [np.int32, np.int64])
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_max_pool_channels_last_into_nchw_as_lanes_gives_the_rows_bits(dtype, idx_dtype,
                                                                       monkeypatch, forms_off):
    """Channels-last grad_output and indices into an NCHW grad_input, C as lanes stored
    through transposes (_plan.mixed_lanes): the reference's values and the bits of the
    plane rows, repeated indices summed in the same order, C = 8, 13 and 64, blocks of
    rows, 1 and 2 threads; a bad index still raises and leaves grad_input as it was."""
    rng = np.random.default_rng(35)
    calls = []
    for x_shape, o in [((2, 8, 12, 10), (6, 5)), ((1, 13, 9, 16), (9, 8)),
                       ((1, 64, 40, 12), (20, 6))]:
        g = make_array(x_shape[:2] + o, dtype, rng)
        idx = rng.integers(0, x_shape[2] * x_shape[3], g.shape).astype(idx_dtype)
        idx[..., 1, :] = idx[..., 0, :]   # repeated indices
        go, ind = as_layout(g, "channels_last"), as_layout(idx, "channels_last")
        with np.errstate(invalid="ignore"):
            want = ref_adaptive_max_pool2d_backward(go, x_shape, ind)
        calls.append((go, ind, x_shape, want))
        if dtype != np.float64:
            v = _plan.views6([go, ind, np.empty(x_shape, dtype)], 2, out_index=2)[0]
            assert _plan.mixed_lanes(v[0], v[2], v[1])

    def runs():
        outs = []
        for go, ind, x_shape, want in calls:
            for nt in (1, 2):
                out = empty_out(x_shape, dtype, "c")
                pg.adaptive_max_pool2d_backward(go, x_shape, ind, out=out, n_threads=nt)
                with np.errstate(invalid="ignore"):
                    np.testing.assert_allclose(out.astype(np.float64), want, *tolerance(dtype))
                outs.append(_bits(out))
        go, ind, x_shape, _ = calls[-1]
        bad = ind.copy()
        bad[0, 5, 3, 2] = x_shape[2] * x_shape[3]
        out = empty_out(x_shape, dtype, "c")
        with pytest.raises(pg.ParamInvalidError):
            pg.adaptive_max_pool2d_backward(go, x_shape, bad, out=out, n_threads=2)
        assert np.all(out == 7)
        return outs

    _same_bits_as_plane_rows(forms_off, monkeypatch, runs)


# grad_output or indices that do not hold a pixel's lanes together (NCHW planes, as the
# forward returns its indices, or any strides) into a channels-last grad_input (np.empty_like
# of a channels-last x): a few columns of every lane at a time, columns apart gathered first
# (pg_scatter.h's pg_scatter_lane_rows); 8 lanes with rows shorter than a tile, 13 lanes
# with 2.5 tiles a row, 64 lanes, and a sparse scatter (3x3 indices into 30x30 planes)
NCHW_INTO_CL = [((2, 8, 12, 10), (6, 5)), ((1, 13, 9, 40), (9, 20)),
                ((1, 64, 40, 36), (20, 18)), ((2, 16, 30, 30), (3, 3))]
NCHW_INTO_CL_READS = [("c", "c"), ("channels_last", "c"), ("c", "channels_last"),
                      ("sliced", "c"), ("c", "negative")]


@pytest.mark.parametrize("mode", ["whole", "split", "stream", "baseline"])
@pytest.mark.parametrize("idx_dtype", [np.int32, np.int64])
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_max_pool_nchw_into_channels_last_gives_the_lanes_bits(dtype, idx_dtype, mode,
                                                              request, monkeypatch):
    """grad_output and indices in NCHW planes (or one of them channels-last, or strided)
    into a channels-last grad_input: the reference's values and the bits of the
    all-channels-last call, repeated indices summed in the same order, 1 and 2 threads,
    whole planes, blocks of rows (split), streamed blocks, the baseline loops; a bad index
    (past the plane, or negative) still raises and leaves grad_input as it was."""
    rng = np.random.default_rng(36)
    calls = []
    for x_shape, o in NCHW_INTO_CL:
        g = make_array(x_shape[:2] + o, dtype, rng)
        idx = rng.integers(0, x_shape[2] * x_shape[3], g.shape).astype(idx_dtype)
        idx[..., 1, :] = idx[..., 0, :]   # repeated indices, across rows and within them
        idx[..., :, 1] = idx[..., :, 0]
        want = pg.adaptive_max_pool2d_backward(
            as_layout(g, "channels_last"), x_shape, as_layout(idx, "channels_last"),
            out=empty_out(x_shape, dtype, "channels_last"))
        with np.errstate(invalid="ignore"):
            np.testing.assert_allclose(want.astype(np.float64),
                                       ref_adaptive_max_pool2d_backward(g, x_shape, idx),
                                       *tolerance(dtype))
        calls.append((g, idx, x_shape, _bits(want)))
    if mode == "whole":   # whole planes however many CPUs the machine has
        monkeypatch.setattr(_plan, "MIN_ITEM_VALUES", 1 << 62)
        monkeypatch.setattr(functions, "_cache", {})
    elif mode == "split":
        request.getfixturevalue("split_items")
    elif mode == "stream":
        request.getfixturevalue("stream_regions")
    elif mode == "baseline":
        request.getfixturevalue("baseline_simd")
    for g, idx, x_shape, want in calls:
        for go_layout, ind_layout in NCHW_INTO_CL_READS:
            go, ind = as_layout(g, go_layout), as_layout(idx, ind_layout)
            for nt in (1, 2):
                out = empty_out(x_shape, dtype, "channels_last")
                pg.adaptive_max_pool2d_backward(go, x_shape, ind, out=out, n_threads=nt)
                assert np.array_equal(_bits(out), want), (x_shape, go_layout, ind_layout, nt)
    g, idx, x_shape, _ = calls[2]
    for at, v in [((0, 63, 19, 17), x_shape[2] * x_shape[3]), ((0, 5, 3, 2), -1)]:
        bad = idx.copy()
        bad[at] = v
        out = empty_out(x_shape, dtype, "channels_last")
        with pytest.raises(pg.ParamInvalidError, match="indices"):
            pg.adaptive_max_pool2d_backward(g, x_shape, bad, out=out, n_threads=2)
        assert np.all(out == 7)


# small planes of disjoint windows as one row each (_plan.flat_planes, plane_geometry):
# kernel = stride 2 and 3, padding whose windows still tile every row, W weights
# (count_include_pad=False), a negative divisor (the sentinel slots' -0.0), widths below
# and past a spread block, a 3-D call with D = 1, and planes that keep their rows: an H row
# no window covers (9 rows, k2s2) and H weights that differ (ceil_mode's short last window)
PLANE_ROW_AVG = [  # (x shape, kernel, stride, padding, ceil_mode, count_include_pad, divisor)
    ((2, 3, 14, 14), 2, 2, 0, False, True, 0),
    ((3, 5, 8, 6), 2, 2, 0, False, True, 0),
    ((2, 4, 12, 15), 3, 3, 0, False, True, 0),
    ((2, 3, 10, 10), 3, 3, 1, False, True, 0),
    ((2, 3, 9, 10), 3, 3, (0, 1), False, False, 0),    # W weights only
    ((1, 6, 16, 16), 2, 2, 0, False, True, -3),
    ((4, 14, 30), 2, 2, 0, False, True, 0),
    ((2, 3, 9, 8), 2, 2, 0, False, True, 0),
    ((2, 3, 9, 9), 2, 2, 0, True, False, 0),
]


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("simd", ["default", "baseline_simd"])
def test_small_planes_as_one_row_give_the_reference_and_the_rows_bits(dtype, simd, request,
                                                                     monkeypatch):
    if simd != "default":
        request.getfixturevalue(simd)
    rng = np.random.default_rng(31)
    calls = []
    for x_shape, k, s, p, ceil, cip, div in PLANE_ROW_AVG:
        y = pg.avg_pool2d(np.zeros(x_shape, np.float32), k, s, p, ceil_mode=ceil,
                          count_include_pad=cip, divisor_override=div)
        go = _special(y.shape, dtype, rng)
        with np.errstate(invalid="ignore"):
            want = ref_avg_pool2d_backward(go, x_shape, k, s, p, ceil, cip, div)
        calls.append((go, x_shape, want, lambda go, x, out, a=(k, s, p, ceil, cip, div):
                      pg.AvgPool2dBackward(go, x, a[0], a[1], a[2], a[3], a[4], a[5], 0, out)))
    # 3-D: D = 1, and planes along a D axis that keeps its windows (2:1, overlapping
    # 5 -> 3, and one input plane to two output planes)
    for x_shape, o in [((2, 5, 1, 14, 15), (1, 7, 5)), ((2, 5, 6, 14, 15), (3, 7, 5)),
                       ((1, 3, 5, 8, 8), (3, 4, 4)), ((2, 4, 1, 6, 6), (2, 3, 3))]:
        go3 = _special(x_shape[:2] + o, dtype, rng)
        with np.errstate(invalid="ignore"):
            want3 = ref_adaptive_avg_pool3d_backward(go3, x_shape)
        calls.append((go3, x_shape, want3,
                      lambda go, x, out: pg.AdaptiveAvgPool3dBackward(go, x, out)))

    def runs():
        outs = []
        for go, x_shape, want, make in calls:
            out = empty_out(x_shape, dtype, "c")
            make(go, x_shape, out).execute(n_threads=2)
            with np.errstate(invalid="ignore"):
                np.testing.assert_allclose(out.astype(np.float64), want, *tolerance(dtype))
            outs.append(_bits(out))
        return outs

    seen = []
    real = _plan.flat_plane_ok
    monkeypatch.setattr(_plan, "flat_plane_ok", lambda spec: seen.append(real(spec)) or seen[-1])
    one_row = runs()
    assert seen == [True] * 7 + [False, False] + [True] * 4   # which ran as one row
    monkeypatch.setattr(_plan, "FLAT_PLANE_W", {})
    for a, b in zip(one_row, runs(), strict=True):
        assert np.array_equal(a, b)


# channels-last float32 and 16-bit with whole vectors of lanes (C a multiple of 8): each
# grad_input row formed in registers from the grad_output rows, no E rows (_lanes_rows,
# pg_stream.h's pg_lanes_row); one and two taps per column and up to six covering rows,
# padding (sentinel taps), divisors of either sign, stride past the kernel (empty covers),
# 3-D input, C of 16 q + 8 lanes (the 8-lane tail), C = 12 and 20 (the last 8 lanes
# overlapping the ones before), and outputs whose columns have gaps between them, at an
# address that is not 16-byte aligned (no streaming stores there)
LANES_AVG = [  # (x shape, kernel, stride, padding, ceil_mode, count_include_pad, divisor)
    ((2, 8, 13, 21), 3, 2, 1, False, True, 0),
    ((1, 16, 12, 19), 3, 1, 0, True, False, 0),       # three rows and taps a value
    ((2, 24, 9, 17), (3, 2), (1, 2), (1, 1), False, True, -3),
    ((1, 8, 11, 14), 2, 3, 0, True, True, 0),         # columns and rows no window covers
    ((1, 32, 10, 23), (6, 4), (2, 3), (3, 2), True, False, 0),
    ((16, 9, 13), 3, 2, 1, False, False, 5),            # 3-D input
    ((2, 16, 12, 15), 3, 3, 0, False, True, 0),         # blocks of 3 equal rows
    ((2, 12, 9, 11), 3, 2, 1, False, True, 0),
    ((1, 20, 8, 10), 2, 2, 0, False, True, 0),
]
# the last three: blocks of equal rows (3 x 3, 4 x 8 and 2 x 3), each row formed once and
# copied
LANES_ADAPTIVE = [((2, 16, 5, 9, 13), (3, 4, 6)), ((1, 8, 4, 6, 24), (4, 3, 8)),
                  ((2, 8, 6, 9, 10), (2, 3, 5)), ((1, 64, 16, 64, 64), (4, 8, 8)),
                  ((2, 13, 4, 9, 10), (2, 3, 5)),
                  ((1, 16, 4, 7, 9), (2, 5, 4)),    # pairs of planes, rows all different
                  ((2, 24, 3, 8, 6), (3, 4, 3))]    # pairs of rows in a plane


def _lanes_out(shape, dtype, gaps):
    """A channels-last output; with `gaps`, columns 24 lanes apart than C, starting one
    element into the buffer (not 16-byte aligned)."""
    if not gaps:
        return empty_out(shape, dtype, "channels_last")
    c_ax = 1 if len(shape) >= 4 else 0
    order = [a for a in range(len(shape)) if a != c_ax] + [c_ax]
    store = np.full([shape[a] for a in order[:-1]] + [shape[c_ax] + 24], 7, dtype)
    return store[..., 1:1 + shape[c_ax]].transpose(np.argsort(order))


def _channels_last_avg(dtype, rng, x_shape, k, s, p, ceil, cip, div):
    """A channels-last grad_output of special values for an average pooling, and the
    reference's grad_input."""
    y = pg.avg_pool2d(np.zeros(x_shape, np.float32), k, s, p, ceil_mode=ceil,
                      count_include_pad=cip, divisor_override=div)
    go = as_layout(_special(y.shape, dtype, rng), "channels_last")
    with np.errstate(invalid="ignore"):   # inf - inf in the reference's sums
        return go, ref_avg_pool2d_backward(go, x_shape, k, s, p, ceil, cip, div)


def _reversed_w_and_c(a):
    """A copy of channels-last `a` (N, C, *spatial) whose memory holds W and C in reverse
    (both strides negative: they still merge into one row, read backwards)."""
    order = (0,) + tuple(range(2, a.ndim)) + (1,)
    store = np.empty([a.shape[i] for i in order], a.dtype)[..., ::-1, ::-1]
    store[...] = a.transpose(order)
    return store.transpose(np.argsort(order))


def _same_bits_baseline_and_streamed(request, runs, base_runs=None):
    """runs() with the AVX2 loops, base_runs() (runs by default) with the baseline loops,
    and runs() with the AVX2 loops and streaming stores: the same bits each time.  Returns
    the first results."""
    fast = runs()
    request.getfixturevalue("baseline_simd")
    base = (base_runs or runs)()
    _kernels._set_simd(True)
    request.getfixturevalue("stream_everything")
    _plan.gather_geometry.cache_clear()
    streamed = runs()
    for a, b, c in zip(fast, base, streamed, strict=True):
        assert np.array_equal(a, b) and np.array_equal(a, c)
    return fast


def _lanes_runs(dtype, lanes=True):
    rng = np.random.default_rng(21)
    outs = []
    for x_shape, k, s, p, ceil, cip, div in LANES_AVG:
        go, want = _channels_last_avg(dtype, rng, x_shape, k, s, p, ceil, cip, div)
        for nt, gaps in ((1, False), (3, False), (2, True)):
            out = _lanes_out(x_shape, dtype, gaps)
            op = pg.AvgPool2dBackward(go, x_shape, k, s, p, ceil, cip, div, 0, out)
            assert (op._kernel.c_item == "lanes") == lanes
            op.execute(n_threads=nt)
            np.testing.assert_allclose(out.astype(np.float64), want, *tolerance(dtype))
            if gaps:
                assert np.all(out.base[..., :1] == 7) and np.all(
                    out.base[..., 1 + out.shape[1 if out.ndim >= 4 else 0]:] == 7)
            outs.append(_bits(out))
    for x_shape, o in LANES_ADAPTIVE:
        go = as_layout(_special(x_shape[:2] + o, dtype, rng), "channels_last")
        with np.errstate(invalid="ignore"):
            want = ref_adaptive_avg_pool3d_backward(go, x_shape)
        for gaps in (False, True):
            out = _lanes_out(x_shape, dtype, gaps)
            op = pg.AdaptiveAvgPool3dBackward(go, x_shape, out)
            assert (op._kernel.c_item == "lanes") == lanes
            op.execute(n_threads=2)
            np.testing.assert_allclose(out.astype(np.float64), want, *tolerance(dtype))
            outs.append(_bits(out))
    return outs


@pytest.mark.skipif(not _kernels.LANES_ROWS, reason="no lanes rows without the vector layer")
@pytest.mark.parametrize("dtype", [np.dtype(np.float32), np.dtype(np.float16), BFLOAT16],
                         ids=["f32", "f16", "bf16"])
def test_lanes_rows_give_the_same_bits_as_e_rows(dtype, request, monkeypatch, forms_off):
    """The channels-last rows formed without E rows: the reference's values, the same bits
    with the AVX2 and the baseline loops, with ordinary and with streaming stores, and the
    bits of the E rows and their combine (planned with the lanes form off).  C = 8 stays a
    lane axis here (it would merge into W: _plan.FLAT_LANES_MAX, FLAT_STEP_LANES_MAX,
    FLAT_STEP2_LANES_MAX), and values of more than _plan.LANES_ROW_TERMS terms go as lanes
    too."""
    monkeypatch.setattr(_plan, "FLAT_LANES_MAX", 8)
    monkeypatch.setattr(_plan, "FLAT_STEP_LANES_MAX", {2: 8, 4: 8, 8: 8})
    monkeypatch.setattr(_plan, "FLAT_STEP2_LANES_MAX", {2: 8, 4: 8, 8: 8})
    monkeypatch.setattr(_plan, "LANES_ROW_TERMS", 1 << 30)
    _plan.gather_geometry.cache_clear()
    lanes = _same_bits_baseline_and_streamed(request, lambda: _lanes_runs(dtype))
    forms_off({"lanes"})
    for a, b in zip(lanes, _lanes_runs(dtype, lanes=False), strict=True):
        assert np.array_equal(a, b)


@pytest.mark.skipif(not _kernels.LANES_ROWS, reason="no lanes rows without the vector layer")
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_channels_last_values_of_many_terms_go_through_e_rows(dtype, monkeypatch):
    """Channels-last calls whose values have more than LANES_ROW_TERMS terms (k3s1p1: 3
    rows of 3 taps; k7s2p3: 4 of 4) form E rows, which sum the taps once for every row
    that shares them; those of at most that many (k3s2p1: 2 of 2) form rows as lanes.
    C = 16 stays a lane axis at stride 2 here (16-bit rows would merge into W:
    _plan.FLAT_STEP2_LANES_MAX)."""
    monkeypatch.setattr(_plan, "FLAT_STEP2_LANES_MAX", {2: 0, 4: 0, 8: 0})
    _plan.gather_geometry.cache_clear()
    rng = np.random.default_rng(27)
    for (k, s, p), lanes in [((3, 1, 1), False), ((7, 2, 3), False), ((3, 2, 1), True)]:
        x_shape = (2, 16, 12, 19)
        go, want = _channels_last_avg(dtype, rng, x_shape, k, s, p, False, True, 0)
        out = empty_out(x_shape, dtype, "channels_last")
        op = pg.AvgPool2dBackward(go, x_shape, k, s, p, False, True, 0, 0, out)
        if dtype != np.float64:
            assert (op._kernel.c_item == "lanes") == lanes, (k, s, p)
        op.execute(n_threads=2)
        np.testing.assert_allclose(out.astype(np.float64), want, *tolerance(dtype))


# channels-last E rows (values of more than LANES_ROW_TERMS terms) with four or more taps a
# column and four or more covering rows: the taps and rows summed in registers eight lanes
# at a time (pg_lanes_many_avx2_f32, pg_sum_rows_many_f32_avx2), 16-bit rows widened in one
# pass (pg_load_lanes_h16) and, streamed, rounded in cache first
CL_MANY_TERMS = [  # (x shape, kernel, stride, padding, count_include_pad)
    ((2, 16, 11, 23), 5, 1, 2, True),      # 5 taps and rows
    ((1, 20, 12, 30), 7, 1, 3, False),     # 7, W weights, lanes past the last block of 8
    ((1, 16, 13, 40), 11, 1, 5, True),     # 11 (a count the loops take as it is)
    ((2, 20, 9, 17), 4, 1, 0, True),       # 4
    ((1, 16, 15, 33), 7, 2, 3, False),     # 4 and 3 a column at stride 2
    ((1, 6, 10, 19), 5, 1, 2, False),      # 6 lanes (under 8: the loops over terms)
]


def _cl_many_runs(dtype):
    rng = np.random.default_rng(31)
    outs = []
    for x_shape, k, s, p, cip in CL_MANY_TERMS:
        go, want = _channels_last_avg(dtype, rng, x_shape, k, s, p, False, cip, 0)
        for layout in ("c", "channels_last"):
            out = empty_out(x_shape, dtype, layout)
            op = pg.AvgPool2dBackward(as_layout(go, layout), x_shape, k, s, p, False, cip, 0,
                                      0, out)
            if layout == "channels_last":
                assert op._kernel.c_item == "", (x_shape, k)
            op.execute(n_threads=2)
            np.testing.assert_allclose(out.astype(np.float64), want, *tolerance(dtype))
            outs.append(_bits(out))
    # adaptive windows overlapping along D and H: four covering rows, not equally spaced
    # (two D rows' E rows), 16 and 20 lanes
    for x_shape, o in [((1, 16, 7, 9, 20), (4, 5, 6)), ((2, 20, 5, 11, 9), (3, 4, 7))]:
        go = _special(x_shape[:2] + o, dtype, rng)
        with np.errstate(invalid="ignore"):
            want = ref_adaptive_avg_pool3d_backward(go, x_shape)
        for layout in ("c", "channels_last"):
            out = empty_out(x_shape, dtype, layout)
            pg.adaptive_avg_pool3d_backward(as_layout(go, layout), x_shape, out=out,
                                            n_threads=2)
            np.testing.assert_allclose(out.astype(np.float64), want, *tolerance(dtype))
            outs.append(_bits(out))
    return outs


@pytest.mark.skipif(_kernels.simd_in_use() != "avx2", reason="CPU without AVX2")
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_channels_last_e_rows_of_many_taps_give_the_same_bits(dtype, request, monkeypatch):
    """Channels-last E rows with many taps a column and many rows a value: the reference's
    values, the bits of their NCHW twins, and the same bits with the baseline loops and
    with streaming stores.  C = 6, 16 and 20 stay lane axes here (they would merge into W)."""
    monkeypatch.setattr(_plan, "FLAT_LANES_MAX", 4)
    monkeypatch.setattr(_plan, "FLAT_STEP_LANES_MAX", {2: 4, 4: 4, 8: 4})
    monkeypatch.setattr(_plan, "FLAT_STEP2_LANES_MAX", {2: 4, 4: 4, 8: 4})
    _plan.gather_geometry.cache_clear()
    fast = _same_bits_baseline_and_streamed(request, lambda: _cl_many_runs(dtype))
    for a, b in zip(fast[::2], fast[1::2]):
        assert np.array_equal(a, b)


@pytest.mark.skipif(not _kernels.LANES_ROWS, reason="no lanes rows without the vector layer")
@pytest.mark.parametrize("dtype", [np.dtype(np.float32), np.dtype(np.float16),
                                   np.dtype(np.float64)], ids=["f32", "f16", "f64"])
def test_lanes_rows_stream_only_where_their_last_lanes_are_aligned(dtype, request):
    """Channels-last rows of 10 lanes (float64: 9), columns 48 lanes apart from an aligned
    start: the column stride allows 16-byte streaming stores, but the last 8 lanes start 2
    lanes in (float64: the last 4 start 5 lanes in), so pg_lanes_row (pg_lanes_row_f64)
    stores them without streaming (a streaming store there would fault)."""
    request.getfixturevalue("stream_everything")
    x_shape = (2, 9 if dtype == np.float64 else 10, 9, 12)
    go, want = _channels_last_avg(dtype, np.random.default_rng(25), x_shape, 3, 2, 1,
                                  False, True, 0)
    c = x_shape[1]
    store = np.full((2, 9, 12, 16 + 32), 7, dtype)
    skip = (-store.ctypes.data % 64) // dtype.itemsize   # start on a 64-byte boundary
    out = store[..., skip:skip + c].transpose(0, 3, 1, 2)
    assert out.ctypes.data % 64 == 0 and out.strides[3] % 16 == 0
    op = pg.AvgPool2dBackward(go, x_shape, 3, 2, 1, False, True, 0, 0, out)
    assert op._kernel.c_item == "lanes"
    op.execute(n_threads=2)
    np.testing.assert_allclose(out.astype(np.float64), want, *tolerance(dtype))
    assert np.all(store[..., :skip] == 7) and np.all(store[..., skip + c:] == 7)


@pytest.mark.skipif(not _kernels.LANES_ROWS, reason="no lanes rows without the vector layer")
@pytest.mark.parametrize("dtype", [np.dtype(np.float32), np.dtype(np.float16),
                                   np.dtype(np.float64)], ids=["f32", "f16", "f64"])
@pytest.mark.parametrize("case", ["rows", "planes"])
def test_lanes_row_pairs_stream_only_where_the_row_stride_is_aligned(dtype, case, request):
    """Pairs of equal channels-last rows formed together (each column stored to both, the
    rows (k2s2) or the planes (adaptive D 4 -> 2) one row stride apart), into an output
    that starts on a 64-byte boundary with columns 16 lanes apart, but one element more
    between its rows (and so its planes) than they fill: the second row's stores are not
    16-byte aligned, so the pair is stored without streaming (a streaming store there
    would fault), and nothing outside the output is written."""
    request.getfixturevalue("stream_everything")
    x_shape = (2, 16, 6, 10) if case == "rows" else (1, 16, 4, 7, 9)
    rng = np.random.default_rng(26)
    if case == "rows":
        go, want = _channels_last_avg(dtype, rng, x_shape, 2, 2, 0, False, True, 0)
    else:
        go = as_layout(_special(x_shape[:2] + (2, 5, 4), dtype, rng), "channels_last")
        want = ref_adaptive_avg_pool3d_backward(go, x_shape)
    spatial, c = x_shape[2:], x_shape[1]
    row = spatial[-1] * c + 1                      # one element past each row
    sizes = (x_shape[0],) + tuple(spatial[:-1]) + (row,)
    store = np.full(int(np.prod(sizes)) + 64, 7, dtype)
    skip = (-store.ctypes.data % 64) // dtype.itemsize
    es = dtype.itemsize
    strides = [es * row * int(np.prod(spatial[:-1]))]              # N
    strides.append(es)                                              # C
    for i in range(len(spatial) - 1):                               # D, H
        strides.append(es * row * int(np.prod(spatial[i + 1:-1])))
    strides.append(es * c)                                          # W
    out = np.lib.stride_tricks.as_strided(store[skip:], x_shape, strides)
    assert out.ctypes.data % 64 == 0 and (out.strides[-1] % 16 == 0)
    assert out.strides[-2] % 16 != 0
    if case == "rows":
        op = pg.AvgPool2dBackward(go, x_shape, 2, 2, 0, False, True, 0, 0, out)
    else:
        op = pg.AdaptiveAvgPool3dBackward(go, x_shape, out)
    assert op._kernel.c_item == "lanes"
    op.execute(n_threads=2)
    np.testing.assert_allclose(out.astype(np.float64), want, *tolerance(dtype))
    written = np.zeros(store.size, bool)
    idx = np.lib.stride_tricks.as_strided(np.arange(store.size - skip), x_shape,
                                          [st // es * 8 for st in strides])
    written[skip + idx.ravel()] = True
    assert np.all(store[~written] == 7)


# k2s2 pairs of grad_input rows (pg_item.h's single item with dup2): (x shape, streamed)
# where the rows' bytes are a multiple of 16: 16, 24, 12 and 56 columns (whole and half
# 32-byte blocks), an odd H (a last row no window covers), and W = 20 (40 bytes at 16 bits,
# no streaming there; 80 at float32).  The rows formed straight from grad_output
# (pg_dup2_rows) against those from R rows: 16-bit W = 20 and 28 take R rows; W = 36 (72
# bytes) ends in a block overlapping the one before
DUP2_AVG = [(2, 3, 8, 16), (1, 2, 6, 24), (1, 2, 4, 12), (1, 3, 7, 16), (1, 2, 4, 56),
            (1, 2, 6, 20), (1, 2, 4, 28), (1, 3, 4, 36)]
# channels-last, C < 16 merged into W: rows of 16-byte multiples (streamed where big) and
# not (the last)
SPREAD_PAIRS = [(2, 3, 8, 16), (1, 5, 6, 8), (1, 12, 4, 6), (1, 3, 6, 10)]


@pytest.mark.skipif(_kernels.simd_in_use() != "avx2", reason="CPU without AVX2")
@pytest.mark.parametrize("dtype", [np.dtype(np.float32), np.dtype(np.float16), BFLOAT16],
                         ids=["f32", "f16", "bf16"])
def test_k2s2_pairs_streamed_give_the_same_bits(dtype, monkeypatch):
    """Pairs of equal k2s2 rows stored with streaming stores (an output taken as larger
    than the last-level cache, rows shorter than a streamed region's): the reference's
    values and the bits of ordinary stores, on 1 and 2 threads, into contiguous outputs
    and into one that starts an element past a 16-byte boundary (ordinary stores there,
    the plan unchanged); 3-D adaptive 2:1 along H and W too, streamed only where no D
    window covers two planes (those planes are copied from the first); and channels-last
    C < 16 merged into W (SPREAD_PAIRS), whose pairs are spread from one R row
    (_plan.spread) to both rows at once."""
    monkeypatch.setattr(_plan, "FLAT_PLANE_W", {})   # the planes' own rows, not one row
    monkeypatch.setattr(_plan, "REGION_ROW_BYTES", 1 << 30)   # float32: not the region
    rng = np.random.default_rng(27)
    calls = []

    def big_item(row_bytes):
        return "single, streamed pairs" if row_bytes % 16 == 0 else "single"

    for x_shape in DUP2_AVG + [(2, 3, 6, 14), (1, 2, 4, 602)]:
        go, want = _channels_last_avg(dtype, rng, x_shape, 2, 2, 0, False, True, 0)
        go = np.ascontiguousarray(go)
        calls.append((go, x_shape, want, big_item(x_shape[3] * dtype.itemsize), False,
                      lambda go, x, out:
                      pg.AvgPool2dBackward(go, x, 2, 2, 0, False, True, 0, 0, out)))
    for x_shape in SPREAD_PAIRS:
        go, want = _channels_last_avg(dtype, rng, x_shape, 2, 2, 0, False, True, 0)
        calls.append((go, x_shape, want,
                      big_item(x_shape[1] * x_shape[3] * dtype.itemsize), True,
                      lambda go, x, out:
                      pg.AvgPool2dBackward(go, x, 2, 2, 0, False, True, 0, 0, out)))
    for x_shape, o, item in [((1, 2, 3, 6, 16), (3, 3, 8), "single, streamed pairs"),
                             ((2, 2, 4, 6, 16), (2, 3, 8), "single")]:
        go = np.ascontiguousarray(_special(x_shape[:2] + o, dtype, rng))
        with np.errstate(invalid="ignore"):
            want = ref_adaptive_avg_pool3d_backward(go, x_shape)
        calls.append((go, x_shape, want, item, False,
                      lambda go, x, out: pg.AdaptiveAvgPool3dBackward(go, x, out)))

    def runs(big):
        outs = []
        for go, x_shape, want, item, last, make in calls:
            n = int(np.prod(x_shape))
            store = np.full(n + 64, 7, dtype)
            skip = (-store.ctypes.data % 64) // dtype.itemsize
            for start, nt in ((skip, 1), (skip, 2), (skip + 1, 2)):
                out = store[start:start + n].reshape(x_shape)
                if last:   # channels-last, the same elements
                    n_, c_, h_, w_ = x_shape
                    out = out.reshape(n_, h_, w_, c_).transpose(0, 3, 1, 2)
                op = make(go, x_shape, out)
                assert op._kernel.c_item == (item if big else "single"), x_shape
                used.add(op._kernel.c_item)
                store[:] = 7
                op.execute(n_threads=nt)
                with np.errstate(invalid="ignore"):
                    np.testing.assert_allclose(out.astype(np.float64), want,
                                               *tolerance(dtype))
                assert np.all(store[:start] == 7) and np.all(store[start + n:] == 7)
                outs.append(_bits(out))
        return outs

    used = set()
    plain = runs(False)
    monkeypatch.setattr(_plan, "STREAM_BYTES", -1)
    monkeypatch.setattr(functions, "_cache", {})
    _plan.gather_geometry.cache_clear()
    streamed = runs(True)
    _plan.gather_geometry.cache_clear()
    for a, b in zip(plain, streamed, strict=True):
        assert np.array_equal(a, b)
    assert used == {"single", "single, streamed pairs"}


# k2s2 items whose rows all come in pairs under one window each (pg_item.h: a tight loop
# of pg_dup2_rows a plane): (x shape, ceil_mode, divisor_override) with rows of whole and
# half 32-byte blocks and one that ends overlapping the block before, an odd H under
# ceil_mode (a last window of one row: the run loop), and no W weights (an override)
PAIR_PLANES = [((2, 3, 12, 56), False, 0), ((1, 2, 20, 40), False, 3),
               ((1, 2, 13, 56), True, 0), ((1, 4, 8, 36), False, 0), ((3, 1, 28, 16), False, 0)]


@pytest.mark.skipif(_kernels.simd_in_use() != "avx2", reason="CPU without AVX2")
@pytest.mark.parametrize("dtype", [np.dtype(np.float32), np.dtype(np.float16), BFLOAT16],
                         ids=["f32", "f16", "bf16"])
def test_k2s2_row_pairs_of_whole_items_give_the_same_bits(dtype, monkeypatch):
    """The items' rows in pairs (every H block starting at an even row) against the run
    loop (blocks of one row, and blocks starting at odd rows): the same bits, the
    reference's values and nothing written around the result, on 1 and 2 threads, with
    grad_output reversed along H and grad_input every other plane of a larger array."""
    rng = np.random.default_rng(61)
    monkeypatch.setattr(functions, "_cache", {})

    def run(go, x_shape, ceil, div, min_items, min_values):
        monkeypatch.setattr(_plan, "MIN_ITEMS", min_items)
        monkeypatch.setattr(_plan, "MIN_ITEM_VALUES", min_values)
        _plan.gather_geometry.cache_clear()
        n, c, h, w = x_shape
        outs = []
        for nt in (1, 2):
            store = np.full((n, 2 * c + 1, h, w), 7, dtype)
            out = store[:, 1::2]
            op = pg.AvgPool2dBackward(go, x_shape, 2, 2, 0, ceil, True, div, 0, out)
            assert op._kernel.c_item == "single"
            op.execute(n_threads=nt)
            assert np.all(store[:, 0::2] == 7)
            outs.append(out.copy())
        assert np.array_equal(_bits(outs[0]), _bits(outs[1]))
        return outs[0]

    for x_shape, ceil, div in PAIR_PLANES:
        y = pg.avg_pool2d(np.zeros(x_shape, np.float32), 2, 2, 0, ceil_mode=ceil,
                          divisor_override=div)
        go = np.ascontiguousarray(_special(y.shape, dtype, rng)[:, :, ::-1])[:, :, ::-1]
        with np.errstate(invalid="ignore"):
            want = ref_avg_pool2d_backward(go, x_shape, 2, 2, 0, ceil, True, div)
        whole = run(go, x_shape, ceil, div, 1, 1 << 62)               # one item a plane
        halves = run(go, x_shape, ceil, div, 2 * x_shape[0] * x_shape[1], 0)
        rows = run(go, x_shape, ceil, div, 1 << 30, 0)                # one row an item
        with np.errstate(invalid="ignore"):
            np.testing.assert_allclose(whole.astype(np.float64), want, *tolerance(dtype))
        assert np.array_equal(_bits(whole), _bits(rows))
        assert np.array_equal(_bits(halves), _bits(rows))
    _plan.gather_geometry.cache_clear()


def test_runs_of_equal_windows():
    assert _plan._runs([0, 0, 1, 1, 1], [1, 1, 2, 2, 2]).max() == 3
    assert _plan._runs([0, 1, 2], [1, 2, 3]).max() == 1
    assert _plan._runs([], []).max() == 1


# channels-last C < 16: (x shape, kernel, stride, padding, ceil_mode, count_include_pad,
# divisor) with padding, ceil_mode, border divisors, stride 1, columns no window covers and
# a divisor override, and kernel = stride 2 with C = 9 and 12 (one tap per column, blocks of
# the spread that take from 16 values); stride 2 with 2 to 4 taps a column and C < 8 (tap
# spreads from 8 values), stride 3 with C = 9 and 12 (tap spreads from 16 values); stride 2
# with C = 8 to 15 in polyphase form, phases of 1 to 3 terms, with W weights, ceil_mode and
# an interior only when widened; stride 1 with 3 to 7 terms, W weights, an interior of 8
# merged columns only when widened, one without padding, and C = 20 and 16 (merged at
# stride 1 only: FLAT_STEP_LANES_MAX); then adaptive (x shape, output size) with
# overlapping windows, and W windows of 2 and 3 columns under overlapping H windows
FLAT_AVG = [
    ((2, 3, 11, 14), 3, 2, 1, False, True, 0),
    ((1, 5, 9, 13), 2, 2, 0, True, False, 0),
    ((2, 3, 12, 20), 3, 1, 1, False, False, 0),
    ((1, 2, 8, 11), 1, 3, 0, False, True, 0),
    ((2, 7, 10, 16), (4, 2), (2, 5), 0, False, True, -3),
    ((2, 12, 6, 10), 2, 2, 0, False, True, 0),
    ((1, 9, 7, 13), 2, 2, 0, True, True, 0),
    ((2, 12, 6, 14), 3, 2, 1, False, True, 0),
    ((1, 13, 5, 11), 3, 1, 1, True, False, 0),
    ((1, 4, 6, 12), 4, 1, 2, False, True, 0),
    ((1, 9, 5, 12), 5, 2, 2, False, True, 0),
    ((2, 3, 11, 14), 5, 2, 2, False, False, 0),
    ((1, 3, 8, 22), 7, 2, 3, False, True, 0),
    ((1, 12, 6, 16), 7, 1, 3, False, False, 0),
    ((2, 5, 5, 13), 5, 1, 2, True, True, 0),
    ((1, 2, 5, 4), 3, 1, 1, False, True, 0),
    ((1, 6, 4, 15), 3, 1, 0, False, True, 0),
    ((1, 20, 5, 9), 3, 1, 1, False, False, 0),
    ((2, 16, 4, 11), 5, 1, 2, False, True, 0),
    ((1, 9, 5, 16), 4, 3, 1, False, True, 0),
    ((1, 12, 4, 17), 7, 3, 3, False, False, 0),
    ((1, 8, 6, 24), 3, 2, 1, False, False, 0),
    ((1, 15, 5, 21), 4, 2, 1, True, True, 0),
    ((1, 11, 4, 26), 5, 2, 2, False, False, 0),
    ((2, 10, 5, 19), 3, 2, 0, True, False, 0),
]
FLAT_ADAPTIVE = [((2, 3, 5, 9, 13), (3, 4, 6)), ((1, 5, 4, 8, 24), (2, 3, 8)),
                 ((1, 12, 4, 7, 16), (2, 4, 8)), ((2, 15, 3, 4, 12), (3, 2, 4))]


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_channels_last_small_c_as_flat_rows_gives_the_lanes_bits(dtype, monkeypatch,
                                                                  request):
    """Channels-last C < 16 (C < 64 at stride 1) merged into the W axis (_plan.flat_lanes,
    flat_taps): the reference's values and the bits of the lane path (FLAT_LANES_MAX,
    FLAT_STEP_LANES_MAX and FLAT_STEP2_LANES_MAX = 0), on 1 and 3 threads, with the AVX2
    loops, the baseline loops and streaming stores; an output whose W and C do not merge
    (gaps between its columns) keeps the lane path, and a grad_output stored with W and C
    reversed (merged rows read backwards: the row loop in _kernels.pyx, not the C item)
    gives the same bits.  The merged one-tap rows are spread from 8 and from 16 values
    (_plan.spread), in both element sizes, rows of 2, 3 and 4 taps a column through their
    tap spreads (_plan.tap_spread, pg_tspread32_row) from 8 and 16 values, and stride-1
    rows of 3 to 7 terms and stride-2 rows (C >= 8) of 1 to 3 terms a phase in polyphase
    form with the terms C apart (_plan.flat_polyphase)."""
    rng = np.random.default_rng(24)
    calls = []
    for x_shape, k, s, p, ceil, cip, div in FLAT_AVG:
        go, want = _channels_last_avg(dtype, rng, x_shape, k, s, p, ceil, cip, div)
        calls.append((go, x_shape, want,
                      lambda go, x, out, k=k, s=s, p=p, ceil=ceil, cip=cip, div=div:
                      pg.AvgPool2dBackward(go, x, k, s, p, ceil, cip, div, 0, out)))
    for x_shape, o in FLAT_ADAPTIVE:
        go = as_layout(_special(x_shape[:2] + o, dtype, rng), "channels_last")
        with np.errstate(invalid="ignore"):
            want = ref_adaptive_avg_pool3d_backward(go, x_shape)
        calls.append((go, x_shape, want,
                      lambda go, x, out: pg.AdaptiveAvgPool3dBackward(go, x, out)))
    merged = []
    real = _plan.flat_lanes

    def spy(arr6):
        v = real(arr6)
        merged.append(v is not None)
        return v

    monkeypatch.setattr(_plan, "flat_lanes", spy)
    spreads = set()
    real_spread = _plan.spread

    def spread_spy(tp, width, n_narrow, es):
        v = real_spread(tp, width, n_narrow, es)
        if v is not None:
            spreads.add((es, v[1]))
        return v

    monkeypatch.setattr(_plan, "spread", spread_spy)
    tap_spreads = set()
    real_tap_spread = _plan.tap_spread

    def tap_spread_spy(tp, width, n_out):
        v = real_tap_spread(tp, width, n_out)
        if v is not None:
            tap_spreads.add((tp.shape[0] // width, v[1]))
        return v

    monkeypatch.setattr(_plan, "tap_spread", tap_spread_spy)
    polys = set()
    real_flat_polyphase = _plan.flat_polyphase

    def flat_polyphase_spy(*args):
        v = real_flat_polyphase(*args)
        if v is not None:
            polys.add((v[7], tuple(int(m) for m in v[3]), v[4] < v[0]))
        return v

    monkeypatch.setattr(_plan, "flat_polyphase", flat_polyphase_spy)

    def runs():
        outs = []
        _plan.gather_geometry.cache_clear()
        for go, x_shape, want, make in calls:
            for gaps, back in ((False, False), (True, False), (False, True)):
                merged.clear()
                out = _lanes_out(x_shape, dtype, gaps)
                op = make(_reversed_w_and_c(go) if back else go, x_shape, out)
                if _plan.FLAT_LANES_MAX:
                    assert merged == [True, not gaps]
                for nt in (1, 3):
                    out[...] = 7
                    op.execute(n_threads=nt)
                    np.testing.assert_allclose(out.astype(np.float64), want,
                                               *tolerance(dtype))
                    if gaps:
                        assert np.all(out.base[..., :1] == 7)
                    outs.append(_nan_bits(out))
        return outs

    flat = _same_bits_baseline_and_streamed(request, runs)
    assert spreads == {(2, False), (2, True), (4, False), (4, True)}
    assert tap_spreads == {(2, False), (2, True), (3, False), (3, True), (4, False)}
    # (lanes, terms of each phase, widened): stride 1 with C = 3, 13, 4, 12, 5, 2, 6, 20
    # and 16; stride 2 with C = 8 to 15
    assert polys == {(3, (3,), True), (13, (3,), True), (4, (4,), True), (12, (7,), True),
                     (5, (5,), True), (2, (3,), True), (6, (3,), True), (20, (3,), True),
                     (16, (5,), True),
                     (12, (1, 1), False), (9, (1, 1), False), (12, (1, 2), False),
                     (9, (3, 2), True), (8, (1, 2), False), (15, (2, 2), True),
                     (11, (3, 2), True), (10, (2, 1), True)}
    monkeypatch.setattr(_plan, "FLAT_LANES_MAX", 0)
    monkeypatch.setattr(_plan, "FLAT_STEP_LANES_MAX", {2: 0, 4: 0, 8: 0})
    monkeypatch.setattr(_plan, "FLAT_STEP2_LANES_MAX", {2: 0, 4: 0, 8: 0})
    lanes = runs()
    assert not merged
    for a, b in zip(flat, lanes, strict=True):
        assert np.array_equal(a, b)


@pytest.mark.parametrize("dtype", [np.dtype(np.float16), BFLOAT16], ids=["f16", "bf16"])
def test_channels_last_16bit_wide_c_at_stride_1_as_flat_rows_gives_the_lanes_bits(
        dtype, monkeypatch, request):
    """16-bit channels-last rows of any C merge into W at stride 1
    (_plan.FLAT_STEP_LANES_MAX), and of C < 64 at stride 2 (FLAT_STEP2_LANES_MAX): C = 64
    and 72 (k3s1p1, k5s1p2 with W weights, ceil_mode), C = 24 and 40 (k3s2p1, k4s2p1 with W
    weights, ceil_mode) give the reference's values and the bits of the lane path, on 1 and
    2 threads, with the AVX2 loops, the baseline loops and streaming stores; stride 2 with
    C = 64 keeps the lane path."""
    rng = np.random.default_rng(37)
    calls = [((1, 64, 5, 9), 3, 1, 1, False, True, True),
             ((2, 72, 4, 7), 5, 1, 2, True, False, True),
             ((1, 24, 5, 19), 3, 2, 1, False, True, True),
             ((2, 40, 4, 17), 4, 2, 1, True, False, True),
             ((1, 64, 5, 9), 3, 2, 1, False, True, False)]
    data = [_channels_last_avg(dtype, rng, x_shape, k, s, p, ceil, cip, 0)
            for x_shape, k, s, p, ceil, cip, _ in calls]
    merged = []
    real = _kernels.AvgGatherKernel

    def spy(go6, gi6, *args):
        merged.append(gi6.shape[5] == 1)   # lanes merged into W: one lane
        return real(go6, gi6, *args)

    monkeypatch.setattr(_kernels, "AvgGatherKernel", spy)

    def runs():
        outs = []
        _plan.gather_geometry.cache_clear()
        for (x_shape, k, s, p, ceil, cip, flat), (go, want) in zip(calls, data):
            merged.clear()
            out = empty_out(x_shape, dtype, "channels_last")
            op = pg.AvgPool2dBackward(go, x_shape, k, s, p, ceil, cip, 0, 0, out)
            assert merged == [flat and _plan.FLAT_STEP_LANES_MAX[2] > 64]
            for nt in (1, 2):
                out[...] = 7
                op.execute(n_threads=nt)
                np.testing.assert_allclose(out.astype(np.float64), want, *tolerance(dtype))
                outs.append(_bits(out))
        return outs

    flat = _same_bits_baseline_and_streamed(request, runs)
    monkeypatch.setattr(_plan, "FLAT_STEP_LANES_MAX", {2: 0, 4: 0, 8: 0})
    monkeypatch.setattr(_plan, "FLAT_STEP2_LANES_MAX", {2: 0, 4: 0, 8: 0})
    lanes = runs()
    for a, b in zip(flat, lanes, strict=True):
        assert np.array_equal(a, b)


def test_tap_spread_table_gives_back_the_taps():
    """_plan.tap_spread: for each block of 8 columns and each tap slot, base + offset is the
    column's tap, and bit 31 marks exactly the sentinel taps (+0.0 and -0.0 slots); no
    block reads past the two sentinel slots."""
    rng = np.random.default_rng(5)
    wides = set()
    for width, m, n_out in ((8, 2, 6), (13, 3, 7), (40, 2, 21), (37, 4, 12), (24, 2, 30),
                            (30, 3, 40)):
        lo = np.sort(rng.integers(0, n_out, width))
        count = rng.integers(0, m + 1, width)
        count[0] = m
        count = np.minimum(count, n_out - lo)
        tp = _plan.taps(lo, lo + count, n_out)
        table, wide = _plan.tap_spread(tp, width, n_out)
        wides.add(wide)
        load = 16 if wide else 8
        t = table.reshape(-1, m, 5)
        off = t[..., 1:].copy().view(np.uint32).reshape(len(t), m, 8)
        for b in range(len(t)):
            j = min(8 * b, width - 8)
            assert 0 <= t[b, 0, 0] and all(t[b, s, 0] + load <= n_out + 2 for s in range(m))
            for s in range(m):
                for c in range(8):
                    tap = tp[(j + c) * m + s]
                    sentinel = bool(off[b, s, c] >> 31)
                    assert sentinel == (tap >= n_out)
                    if not sentinel:
                        assert t[b, s, 0] + (off[b, s, c] & 15) == tap
    assert wides == {False, True}


# 16-bit rows with overlapping D or H windows over one tap per column: the sums formed at
# the output width, rounded, spread to the input width by byte shuffles (pg_item.h's
# pg_item_narrow_body, _plan.spread); adaptive windows of 8, 9 and 12 columns, a batch of
# one plane split into blocks, pooling with kernel = stride 2 along W (with padding and
# count_include_pad off: W weights), stride past the kernel (empty covers: the sentinel
# slots), a divisor override of either sign, grad_input rows with gaps and planes apart
NARROW_ADAPTIVE = [((1, 1, 15, 20, 63), (4, 6, 7)), ((2, 3, 15, 7, 63), (4, 7, 7)),
                   ((2, 2, 5, 9, 40), (3, 4, 5)), ((1, 2, 7, 5, 96), (3, 2, 8))]
NARROW_AVG = [  # (x shape, kernel, stride, padding, count_include_pad, divisor)
    ((2, 3, 11, 32), (3, 2), (2, 2), 0, True, 0),
    ((1, 2, 9, 34), 3, (1, 3), (1, 1), False, 0),
    ((2, 2, 10, 20), (4, 2), (2, 5), 0, True, 0),
    ((1, 3, 12, 48), (5, 3), (2, 3), (2, 1), True, -3),
]


def _narrow_runs(dtype):
    rng = np.random.default_rng(23)
    calls = []
    for x_shape, o in NARROW_ADAPTIVE:
        go = _special(x_shape[:2] + o, dtype, rng)
        calls.append((go, x_shape, ref_adaptive_avg_pool3d_backward(go, x_shape),
                      lambda go, x, out: pg.AdaptiveAvgPool3dBackward(go, x, out)))
    for x_shape, k, s, p, cip, div in NARROW_AVG:
        y = pg.avg_pool2d(np.zeros(x_shape, np.float32), k, s, p, count_include_pad=cip,
                          divisor_override=div)
        go = _special(y.shape, dtype, rng)
        want = ref_avg_pool2d_backward(go, x_shape, k, s, p, False, cip, div)
        calls.append((go, x_shape, want,
                      lambda go, x, out, k=k, s=s, p=p, cip=cip, div=div:
                      pg.AvgPool2dBackward(go, x, k, s, p, False, cip, div, 0, out)))
    outs = []
    for go, x_shape, want, make in calls:
        # planes and rows of grad_input with gaps after them: nothing is written there
        big = np.full(x_shape[:-2] + (x_shape[-2] + 1, x_shape[-1] + 9), 7, dtype)
        for out in (np.full(x_shape, 7, dtype), big[..., :-1, 1:1 + x_shape[-1]]):
            op = make(go, x_shape, out)
            assert op._kernel.c_item == "narrow", x_shape   # the plan's (baseline too)
            for nt in (1, 3):
                op.execute(n_threads=nt)
                np.testing.assert_allclose(out.astype(np.float32), want, *tolerance(dtype))
                outs.append(_bits(out))
        assert np.all(big[..., -1, :] == 7)
        assert np.all(big[..., :1] == 7) and np.all(big[..., 1 + x_shape[-1]:] == 7)
    return outs


@pytest.mark.skipif(_kernels.simd_in_use() != "avx2", reason="CPU without AVX2")
@pytest.mark.parametrize("dtype", [np.dtype(np.float16), BFLOAT16], ids=["f16", "bf16"])
def test_narrow_rows_give_the_same_bits_as_e_rows(dtype, request):
    """The 16-bit sums formed at the output width and spread: the reference's values, and
    the bits of the E rows' combine (the baseline loops)."""
    with np.errstate(invalid="ignore"):   # inf - inf in the reference's sums
        fast = _narrow_runs(dtype)
        request.getfixturevalue("baseline_simd")
        base = _narrow_runs(dtype)
    for a, b in zip(fast, base, strict=True):
        assert np.array_equal(a, b)


# one tap per column (pg_item.h's runs of equal taps, stored eight columns at a time, or for
# float32 runs under 8 columns the spread, permuted eight columns at a time): adaptive W
# windows of 3 (a short run's store runs on into the next), 12 and 18 (the last store
# overlaps), a width under 8 and a last run without room for a whole store; overlapping or
# separate D/H windows (the general item and the one-value-per-window one, whose planes
# under one D window are copied from the first as a slab, or row by row where grad_input's
# rows have gaps between them); pooling with kernel = stride 3 and an uncovered last
# column, and stride past the kernel (gaps)
RUN_ADAPTIVE = [((2, 3, 4, 5, 48), (3, 5, 16)), ((2, 3, 5, 6, 96), (2, 3, 8)),
                ((2, 3, 3, 4, 7), (2, 3, 7)), ((2, 3, 2, 3, 9), (2, 2, 3)),
                ((1, 4, 6, 9, 72), (6, 9, 4)), ((2, 3, 15, 7, 63), (4, 7, 7)),
                ((2, 3, 8, 6, 48), (4, 3, 16))]
RUN_AVG = [((2, 3, 9, 20), 3, 3, 0), ((2, 3, 8, 29), 2, 3, 0), ((1, 2, 10, 37), 5, 5, 2)]


@pytest.mark.skipif(_kernels.simd_in_use() != "avx2", reason="CPU without AVX2")
@pytest.mark.parametrize("spread32", [True, False], ids=["spread32", "runs"])
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_one_tap_runs_give_the_same_bits_as_baseline(dtype, spread32, request, monkeypatch):
    """One-tap rows through the runs of equal taps, or for float32 with short runs their
    spread (_plan.spread, pg_spread32_row), give the baseline loops' bits."""
    if not spread32:
        monkeypatch.setattr(_plan, "SPREAD32_RUN", 0)
    _plan.gather_geometry.cache_clear()
    request.addfinalizer(_plan.gather_geometry.cache_clear)
    rng = np.random.default_rng(15)
    cases = []
    for x_shape, o in RUN_ADAPTIVE:
        go = _special(x_shape[:2] + o, dtype, rng)
        cases.append((lambda go, x, out, nt:
                       pg.adaptive_avg_pool3d_backward(go, x, out=out, n_threads=nt),
                       go, x_shape))
    for x_shape, k, s, p in RUN_AVG:
        y = pg.avg_pool2d(np.zeros(x_shape, np.float32), k, s, p)
        go = _special(y.shape, dtype, rng)
        cases.append((lambda go, x, out, nt, k=k, s=s, p=p:
                       pg.avg_pool2d_backward(go, x, k, s, p, out=out, n_threads=nt),
                       go, x_shape))

    def runs():
        outs = []
        for fn, go, x_shape in cases:
            # rows of grad_input with room after them: nothing is written past a row
            big = np.full(x_shape[:-1] + (x_shape[-1] + 9,), 7, dtype)
            for out in (np.full(x_shape, 7, dtype), big[..., 1:1 + x_shape[-1]]):
                for nt in (1, 2):
                    fn(go, x_shape, out, nt)
                    outs.append(_bits(out))
            assert np.all(big[..., :1] == 7) and np.all(big[..., 1 + x_shape[-1]:] == 7)
        return outs

    _same_bits_after(request, "baseline_simd", runs)


@pytest.mark.skipif(_kernels.simd_in_use() != "avx2", reason="CPU without AVX2")
def test_avx2_bfloat16_rounding_shortcut_gives_the_same_bits(request):
    """Non-overlapping bfloat16 items and the max-pool block store skip the full rounding
    of values whose low halves are zero: signalling and quiet NaNs of both signs,
    infinities, subnormals that the weights push below bfloat16's range, and exact values,
    against the baseline."""
    go = np.zeros((1, 2, 4, 8), BFLOAT16)
    bits = go.view(np.uint16)
    bits[0, 0, 0] = [0x7F81, 0xFF81, 0x7FC1, 0x0001, 0x8001, 0x7F80, 0x0080, 0x3F81]
    bits[0, 0, 1] = 0x0001
    bits[0, 1] = np.random.default_rng(16).integers(0, 1 << 16, (4, 8))

    idx = np.arange(32).reshape(1, 1, 4, 8) * 4 + np.array([0, 1, 0, 3])[:, None]
    idx = np.concatenate([idx, idx[:, :, ::-1]], axis=1)   # the max-pool block's stores

    def run():
        return (_bits(pg.avg_pool2d_backward(go, (1, 2, 8, 16), 2, 2, 0, n_threads=1)),
                _bits(pg.adaptive_max_pool2d_backward(go, (1, 2, 8, 16), idx, n_threads=1)))

    fast = run()
    request.getfixturevalue("baseline_simd")
    for a, b in zip(fast, run()):
        assert np.array_equal(a, b)


@pytest.mark.skipif(BFLOAT16 is None, reason="needs ml_dtypes")
@pytest.mark.parametrize("simd", [True, False], ids=["simd", "baseline"])
def test_bfloat16_row_sums_round_ties_to_even(simd, request):
    """Overlapping windows with divisor 1 make each grad_input value an exact float32 sum of
    up to four bfloat16 values (1 + 2**-8 and 1 + 3 * 2**-8 are ties), rounded once: to
    nearest even, sums past the largest bfloat16 to infinity.  Blocks of 16 values with a
    NaN (which take the rounding's NaN branch) beside blocks without one."""
    if not simd:
        request.getfixturevalue("baseline_simd")
    x_shape = (2, 3, 9, 37)
    y = pg.avg_pool2d(np.zeros(x_shape, np.float32), 3, 2, 1, divisor_override=1)
    big = float(np.array(0x7F7F, np.uint16).view(BFLOAT16))   # the largest bfloat16
    rng = np.random.default_rng(17)
    # sums exact in float32 in any order; and sums of positive values with the largest
    # bfloat16, which are that value (its float32 ulp is 2**104) or past it (inf)
    exact = np.array([1.0, 2.0 ** -8, 3 * 2.0 ** -8, -1.0, -(2.0 ** -8), 0.5], np.float32)
    large = np.array([big, 1.0, 2.0 ** -8, 0.5], np.float32)
    gos = [rng.choice(v, y.shape).astype(BFLOAT16) for v in (exact, large)]
    nan_go = gos[0].copy()
    nan_go[1, 2, 3, 5] = np.nan        # one NaN: a few 16-value blocks of two rows
    for g in gos + [nan_go]:
        with np.errstate(over="ignore"):
            sums = ref_avg_pool2d_backward(g, x_shape, (3, 3), (2, 2), (1, 1), False, True,
                                           1).astype(np.float32)
        if g is gos[0]:   # the case has ties (low halves 0x8000) of both parities
            ties = sums.view(np.uint32)[(sums.view(np.uint32) & 0xFFFF) == 0x8000]
            assert len(np.unique(ties >> 16 & 1)) == 2
        want = sums.astype(BFLOAT16)
        num = ~np.isnan(sums)
        for nt in (1, 2):
            got = pg.avg_pool2d_backward(g, x_shape, 3, 2, 1, divisor_override=1,
                                         n_threads=nt)
            assert np.array_equal(np.isnan(got.astype(np.float32)), ~num)
            assert np.array_equal(got.view(np.uint16)[num], want.view(np.uint16)[num])
            if g is gos[1]:
                assert np.isinf(got.astype(np.float32)).any()


@pytest.fixture
def small_blocks(monkeypatch):
    """Max-pool blocks of a few rows: most indices fall outside an item's block."""
    monkeypatch.setattr(_plan, "SCRATCH_ELEMS", 64)
    monkeypatch.setattr(functions, "_cache", {})


@pytest.fixture
def stream_small_blocks(stream_regions, small_blocks):
    """Streamed max-pool blocks of a few rows."""


@pytest.mark.skipif(_kernels.simd_in_use() != "avx2", reason="CPU without AVX2")
@pytest.mark.parametrize("mode", [None, "stream_regions", "stream_everything",
                                  "small_blocks", "stream_small_blocks"])
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_avx2_scatter_gives_the_same_bits_as_baseline(dtype, mode, request):
    """The max-pool scatter's AVX2 loops (pg_scatter.h: four indices tested at once, the
    block rounded, stored and cleared in one pass, its streamed lines aligned) against the
    baseline ones: repeated indices, int32 and int64 indices, grad_input at every offset
    from a cache line (the streamed block shifted in the scratch), rows of every length
    mod 4, channels-last lanes, special values, blocks that hold only part of the
    indices, and sparse planes."""
    if mode:
        request.getfixturevalue(mode)
    rng = np.random.default_rng(15)
    cases = []
    for x_shape, o in [((2, 3, 17, 33), (5, 7)), ((3, 2, 9, 30), (4, 20)),
                       ((2, 2, 40, 70), (20, 35)), ((1, 3, 5, 3), (2, 2)),
                       ((2, 9, 11, 13), (4, 5)), ((1, 16, 8, 8), (3, 3)),   # lanes 9, 16
                       ((2, 3, 40, 40), (2, 3)), ((1, 16, 24, 24), (3, 2))]:   # sparse
        for idx_dtype in (np.int64, np.int32):
            idx = rng.integers(0, x_shape[2] * x_shape[3], x_shape[:2] + o)
            idx[..., ::2, :] = idx[..., :1, :1]     # one position many times per plane
            go = _special(idx.shape, dtype, rng)
            for layout, offset in [("c", 0), ("c", 1), ("c", 5), ("channels_last", 3),
                                   ("all_channels_last", 0), ("all_channels_last", 1)]:
                cases.append((x_shape, go, idx.astype(idx_dtype), layout, offset))

    def lanes_last(a):   # channels-last grad_output / indices: a pixel's lanes contiguous
        return np.moveaxis(np.ascontiguousarray(np.moveaxis(a, 1, -1)), -1, 1)

    def runs():
        outs = []
        for x_shape, go, idx, layout, offset in cases:
            if layout == "all_channels_last":
                go, idx = lanes_last(go), lanes_last(idx)
            n = int(np.prod(x_shape))
            flat = np.full(n + offset, 7, dtype)[offset:]
            if layout == "c":
                out = flat.reshape(x_shape)
            else:
                phys = x_shape[:1] + x_shape[2:] + x_shape[1:2]
                out = np.moveaxis(flat.reshape(phys), -1, 1)
            pg.adaptive_max_pool2d_backward(go, x_shape, idx, out=out, n_threads=1)
            outs.append(_bits(out))
        return outs

    _same_bits_after(request, "baseline_simd", runs)


@pytest.mark.skipif(_kernels.simd_in_use() != "avx2", reason="CPU without AVX2")
@pytest.mark.parametrize("blocks", [False, True], ids=["planes", "small_blocks"])
@pytest.mark.parametrize("layout", ["c", "all_channels_last"])
def test_max_pool_float32_in_the_cache_adds_into_grad_input(layout, blocks, request):
    """float32 max-pool gradients in the cache add straight into grad_input (zeroed a block
    at a time, no buffer, no flush: _kernels.pyx's _scatter_item): the same bits as the
    buffered scatter that streamed outputs take, with repeated indices, indices in two
    windows' overlap, NaN, infinities and -0.0, int32 and int64 indices, grad_input at
    several offsets from a line, 1 and 2 threads, blocks of whole planes and of a few rows
    (most indices outside them: the mixed groups' dummy slots), and nothing written
    outside grad_input."""
    if blocks:
        request.getfixturevalue("small_blocks")
    rng = np.random.default_rng(29)
    runs = []
    for x_shape, o in [((2, 3, 17, 33), (5, 7)), ((2, 9, 13, 13), (4, 4)),
                       ((1, 16, 24, 24), (3, 2)), ((3, 2, 9, 30), (4, 20))]:
        x = make_array(x_shape, np.float32, rng)
        x[..., ::3, ::2] = 1.0   # ties: the first of equal maxima, in overlapping windows
        for idx_dtype in (np.int64, np.int32):
            _, idx = pg.adaptive_max_pool2d(x, o, return_indices=True)
            idx = idx.astype(idx_dtype)
            idx[..., 1::3, :] = idx[..., :1, :1]   # one position many times per plane
            go = _special(idx.shape, np.float32, rng)
            if layout == "all_channels_last":
                go, idx = (np.moveaxis(np.ascontiguousarray(np.moveaxis(a, 1, -1)), -1, 1)
                           for a in (go, idx))
            runs.append((x_shape, go, idx))
    outs = {}
    for mode in ("cache", "streamed"):
        if mode == "streamed":
            request.getfixturevalue("stream_regions")
        for r, (x_shape, go, idx) in enumerate(runs):
            n = int(np.prod(x_shape))
            for off in (0, 3):
                raw = np.full(n + 40, 7, np.float32)
                flat = raw[16 + off:16 + off + n]
                if layout == "c":
                    out = flat.reshape(x_shape)
                else:
                    phys = x_shape[:1] + x_shape[2:] + x_shape[1:2]
                    out = np.moveaxis(flat.reshape(phys), -1, 1)
                op = pg.AdaptiveMaxPool2dBackward(go, x_shape, idx, out)
                for nt in (1, 2):
                    out[...] = 7
                    op.execute(n_threads=nt)
                    outs.setdefault((r, off, nt), []).append(_bits(out))
                    assert np.all(raw[:16 + off] == 7) and np.all(raw[16 + off + n:] == 7)
    for key, (cached, streamed) in outs.items():
        assert np.array_equal(cached, streamed), key


@pytest.mark.parametrize("idx_dtype", [np.int32, np.int64])
@pytest.mark.parametrize("layout", ["c", "channels_last", "negative"])
def test_index_check_edges(idx_dtype, layout):
    x_shape = (2, 3, 6, 7)
    limit = 6 * 7
    rng = np.random.default_rng(7)
    go = make_array((2, 3, 4, 5), np.float32, rng)
    info = np.iinfo(idx_dtype)
    good = rng.integers(0, limit, size=go.shape).astype(idx_dtype)
    good.reshape(-1)[0] = 0
    good.reshape(-1)[-1] = limit - 1
    out = pg.adaptive_max_pool2d_backward(go, x_shape, _as(good, layout))
    np.testing.assert_allclose(out, ref_adaptive_max_pool2d_backward(go, x_shape, good),
                               rtol=1e-6)
    for bad_value in [limit, -1, info.min, info.max, limit + 1, 2 * limit]:
        for pos in [0, 17, good.size - 1]:
            bad = good.copy()
            bad.reshape(-1)[pos] = bad_value
            dst = np.full(x_shape, 5.0, np.float32)
            with pytest.raises(pg.ParamInvalidError) as e:
                pg.adaptive_max_pool2d_backward(go, x_shape, _as(bad, layout), out=dst)
            assert e.value.code == 161002
            assert np.all(dst == 5.0)


WINDOW_CASES = [  # (x shape, output size): W = 2 * Wo, Wo a multiple of 8, H = Ho * kh
    ((2, 3, 16, 32), (8, 16)),     # kh 2
    ((2, 4, 16, 16), (2, 8)),      # kh 8
    ((1, 3, 8, 16), (8, 8)),       # kh 1
    ((2, 3, 12, 32), (4, 16)),     # kh 3
    ((3, 2, 9, 48), (3, 24)),      # kh 3, Wo 24
    ((2, 2, 254, 16), (2, 8)),     # kh 127, the largest coded
]


def _padded_rows(a):
    """a's values in rows 8 elements apart from the next (unit stride along the row)."""
    padded = np.full(a.shape[:-1] + (a.shape[-1] + 8,), -5, a.dtype)
    padded[..., 3:-5] = a
    out = padded[..., 3:-5]
    assert out.strides[-2] != a.shape[-1] * a.itemsize and out.strides[-1] == a.itemsize
    return out


def _window_indices(x_shape, out, rng, mode):
    """Argmax-like indices: each in its own window ('window'), or one per plane elsewhere
    in the plane ('stray')."""
    n, c, h, w = x_shape
    oh, ow = out
    kh, kw = h // oh, w // ow
    r = rng.integers(0, kh, (n, c, oh, ow)) + np.arange(oh)[:, None] * kh
    q = rng.integers(0, kw, (n, c, oh, ow)) + np.arange(ow) * kw
    idx = r * w + q
    if mode == "stray":
        idx[0, 0, -1, -1] = 0 if idx[0, 0, -1, -1] else h * w - 1
        idx[-1, -1, 0, 3] = idx[-1, -1, 0, 2]    # twice the same position
    return idx


@pytest.fixture
def no_window(forms_off, monkeypatch):
    """The max-pool gradient as the scatter everywhere."""
    forms_off({"window", "lwindow"})
    monkeypatch.setattr(functions, "_cache", {})


@pytest.mark.parametrize("mode", [None, "stream_regions", "stream_everything"])
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_max_pool_gather_form_gives_the_scatters_bits(dtype, mode, request):
    """The gather form (pg_scatter.h: pg_wcode_plane, pg_wrows) against the scatter: special
    values (-0.0 becomes +0.0, NaN), int32 and int64 indices, planes with a stray index
    (those take the scatter), grad_input at offsets from a cache line, strided and
    negative-stride grad_input, streamed or not (streaming straight from the registers
    where the planes allow it), 1 and 2 threads."""
    if mode:
        request.getfixturevalue(mode)
    rng = np.random.default_rng(21)
    cases = []
    for x_shape, o in WINDOW_CASES:
        for kind in ("window", "stray"):
            idx = _window_indices(x_shape, o, rng, kind)
            go = _special(idx.shape, dtype, rng)
            for idx_dtype in (np.int64, np.int32):
                for layout in ("c0", "c8", "gap", "flip"):
                    cases.append((x_shape, go, idx.astype(idx_dtype), layout))
                # index rows apart in memory (the check's pass with a row stride)
                cases.append((x_shape, go, _padded_rows(idx.astype(idx_dtype)), "c0"))

    def runs():
        outs = []
        for x_shape, go, idx, layout in cases:
            n = int(np.prod(x_shape))
            if layout in ("c0", "c8"):
                off = 0 if layout == "c0" else 4
                out = np.full(n + off, 7, dtype)[off:].reshape(x_shape)
            elif layout == "gap":    # rows of grad_input apart in memory
                out = np.full(x_shape[:3] + (x_shape[3] + 5,), 7, dtype)[..., 2:-3]
            else:
                out = np.full(x_shape, 7, dtype)[:, :, ::-1]
            for nt in (1, 2):
                out[...] = 7
                pg.adaptive_max_pool2d_backward(go, x_shape, idx, out=out, n_threads=nt)
                outs.append(_bits(out))
        return outs

    _same_bits_after(request, "no_window", runs)


@pytest.mark.skipif(_kernels.simd_in_use() != "avx2", reason="CPU without AVX2")
def test_max_pool_gather_form_plan_and_workspace():
    """The gather form is planned only where the windows allow it, and its codes (a byte
    per index, one per plane) are part of the workspace; a bad index anywhere leaves
    grad_input untouched."""
    rng = np.random.default_rng(5)
    x_shape, out = (2, 3, 16, 32), (8, 16)
    idx = _window_indices(x_shape, out, rng, "window")
    go = make_array(idx.shape, np.float32, rng)
    gi = np.empty(x_shape, np.float32)
    op = pg.AdaptiveMaxPool2dBackward(go, x_shape, idx, gi)
    assert op._kernel.shared_bytes >= idx.size + 6
    assert op.workspace_size >= op._kernel.shared_bytes + op._kernel.scratch_bytes
    op.execute(np.empty(op.workspace_size, np.uint8))
    np.testing.assert_array_equal(gi, ref_adaptive_max_pool2d_backward(go, x_shape, idx))
    # the check's pass: each index's code, 2 * row + column in its own 2-wide window, at
    # the workspace's 64-byte aligned start, then a byte per plane saying that all its
    # indices lie in their windows (the planes written as the gather); index rows apart in
    # memory too, and one plane with a stray index
    rows = (np.arange(8) * 2)[:, None]
    want = 2 * (idx // 32 - rows) + idx % 32 - np.arange(16) * 2
    stray = idx.copy()
    stray[0, 1, 3, 4] = 0
    for j, planes in ((idx, np.ones(6)), (_padded_rows(idx), np.ones(6)),
                      (stray, np.arange(6) != 1)):
        ws = np.zeros(op.workspace_size, np.uint8)
        pg.AdaptiveMaxPool2dBackward(go, x_shape, j, gi).execute(ws)
        at = (-ws.ctypes.data) % 64
        codes, ok = ws[at:at + idx.size], ws[at + idx.size:at + idx.size + 6]
        np.testing.assert_array_equal(ok, planes)
        np.testing.assert_array_equal(codes.reshape(6, -1)[planes.astype(bool)],
                                      want.reshape(6, -1)[planes.astype(bool)])
    for shape, o in [((2, 3, 16, 30), (8, 15)), ((2, 3, 16, 32), (8, 8)),
                     ((2, 3, 15, 32), (2, 16)), ((2, 2, 256, 16), (2, 8))]:
        j = np.zeros((shape[0], shape[1]) + o, np.int64)
        k = pg.AdaptiveMaxPool2dBackward(np.zeros(j.shape, np.float32), shape, j,
                                         np.empty(shape, np.float32))._kernel
        assert k.shared_bytes == 0, shape
    own = int(idx[1, 2, 7, 15])
    # the codes are formed from an index's low 32 bits: the range check must still see the
    # high half of an index that, cut to 32 bits, would lie in its own window
    for bad_value in (-1, 16 * 32, own + 2**32, own - 2**32, own + 2**31,
                      own + 2**63 - 2**32):
        for padded in (False, True):   # contiguous index rows, or rows apart in memory
            bad = idx.copy()
            bad[1, 2, 7, 15] = bad_value
            if padded:
                bad = _padded_rows(bad)
            dst = np.full(x_shape, 5.0, np.float32)
            with pytest.raises(pg.ParamInvalidError) as e:
                pg.AdaptiveMaxPool2dBackward(go, x_shape, bad, dst).execute()
            assert e.value.code == 161002
            assert np.all(dst == 5.0)


# the channels-last gather form: windows of at most 64 positions tiling the plane.  Lanes
# (pg_scatter.h: pg_lcode_row, pg_lwrite_row): C >= 8 (the last 8 lanes overlapping the
# ones before where C is not a multiple of 8), windows of at most 4 positions or C lanes of
# at least 128 bytes; flat rows (pg_fcode_row, pg_fwrite_row): C < 16 not a multiple of 8,
# contiguous rows of at least 16 outputs, windows of at most 16 positions
LWINDOW_CASES = [  # (x shape, output size, planned with contiguous lanes, columns apart)
    ((2, 16, 8, 8), (4, 4), True, True),        # 2 x 2
    ((3, 64, 12, 10), (4, 5), True, True),      # 3 x 2, 128 bytes of float16 lanes
    ((1, 64, 6, 16), (2, 4), True, True),       # 3 x 4
    ((2, 64, 16, 32), (2, 4), True, True),      # 8 x 8, the largest
    ((1, 16, 5, 16), (5, 4), True, True),       # 1 x 4
    ((1, 1032, 6, 8), (2, 4), True, True),      # 3 x 2, lanes in two blocks (1024 + 8)
    ((1, 1028, 4, 8), (2, 4), True, True),      # 2 x 2, 1024 lanes + the last 8 again
    ((2, 20, 8, 8), (4, 4), True, True),        # 2 x 2, 16 lanes + the last 8 again
    ((1, 68, 4, 16), (2, 4), True, True),       # 2 x 4, 68 lanes
    ((2, 24, 12, 10), (4, 5), False, False),    # 3 x 2 with 24 lanes: the scatter
    ((2, 3, 8, 12), (4, 6), True, False),       # flat rows, 2 x 2
    ((3, 5, 12, 10), (4, 5), True, False),      # 3 x 2
    ((1, 7, 16, 24), (4, 6), True, False),      # 4 x 4
    ((2, 2, 6, 27), (2, 9), True, False),       # 3 x 3, two lanes
    ((1, 9, 4, 12), (2, 6), True, True),        # 2 x 2: flat rows, or lanes
    ((1, 15, 6, 8), (3, 4), True, True),
    ((2, 12, 6, 12), (2, 4), True, False),      # 3 x 3: flat rows only
    ((1, 2, 4, 8), (2, 4), False, False),       # rows of 8 outputs: the scatter
    ((1, 3, 16, 32), (2, 4), False, False),     # 8 x 8 windows: the scatter
]


def _lanes_view(shape, dtype, gap):
    """A channels-last grad_input filled with 7: columns C (gap: C + 24) lanes apart, at
    `gap` elements into its buffer (1: not 16-byte aligned); -1: contiguous, one element
    into its buffer."""
    n, c, h, w = shape
    if gap < 0:
        store = np.full(n * h * w * c + 1, 7, dtype)[1:].reshape(n, h, w, c)
        return store.transpose(0, 3, 1, 2)
    store = np.full((n, h, w, c + (24 if gap else 0)), 7, dtype)
    return store[..., gap:gap + c].transpose(0, 3, 1, 2)


def _lanes_gather_runs(cases, dtype):
    """Each case (x shape, grad_output, indices, planned(gap)) into channels-last
    grad_input views (_lanes_view) at gaps 0, -1, 1 and 8, on 1 and 3 threads: the
    reference's values, nothing written outside, the gather form's codes in the workspace
    where planned(gap) says; returns the bits of every result."""
    outs = []
    for x_shape, go, idx, planned in cases:
        want = ref_adaptive_max_pool2d_backward(go, x_shape, idx)
        for gap in (0, -1, 1, 8):
            out = _lanes_view(x_shape, dtype, gap)
            op = pg.AdaptiveMaxPool2dBackward(go, x_shape, idx, out)
            if dtype != np.float64 and _kernels.simd_in_use() == "avx2":
                assert ((op._kernel.shared_bytes >= idx.size)
                        == (_plan.on("lwindow") and planned(gap))), (x_shape, gap)
            for nt in (1, 3):
                out[...] = 7
                op.execute(n_threads=nt)
                np.testing.assert_allclose(out.astype(np.float64), want, *tolerance(dtype))
                if gap > 0:
                    assert np.all(out.base[..., :gap] == 7)
                    assert np.all(out.base[..., gap + x_shape[1]:] == 7)
                elif gap < 0:
                    assert out.base[0] == 7   # the element before it
                outs.append(_bits(out))
    return outs


@pytest.mark.parametrize("mode", [None, "stream_everything", "baseline_simd"])
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_max_pool_channels_last_gather_form_gives_the_scatters_bits(dtype, mode, request,
                                                                   monkeypatch):
    """The channels-last gather form (lanes and flat rows) against the scatter: special
    values, int32 and int64 indices, planes with a stray index or one position twice (those
    take the scatter), grad_input contiguous, columns apart and unaligned, streamed or not,
    1 and 3 threads, the AVX2 loops and the baseline ones (flat rows planned there too);
    planned where LWINDOW_CASES says."""
    if mode:
        request.getfixturevalue(mode)
    if mode == "baseline_simd":
        monkeypatch.setattr(_plan, "FLAT_ROWS_BASELINE", True)
    rng = np.random.default_rng(22)
    cases = []
    for x_shape, o, dense, apart in LWINDOW_CASES:
        for kind in ("window", "stray"):
            idx = _as(_window_indices(x_shape, o, rng, kind), "channels_last")
            go = _as(_special(idx.shape, dtype, rng), "channels_last")
            for idx_dtype in (np.int64, np.int32):
                cases.append((x_shape, go, idx.astype(idx_dtype), dense, apart))

    def runs():
        # the codes (a byte per index) in the shared workspace; the scatter's row ranges of
        # a plane split into blocks are fewer bytes
        return _lanes_gather_runs(
            [(x_shape, go, idx, lambda gap, d=dense, a=apart: d if gap <= 0 else a)
             for x_shape, go, idx, dense, apart in cases], dtype)

    _same_bits_after(request, "no_window", runs)


# the channels-last gather form with grad_output and indices in NCHW planes (pg_scatter.h:
# pg_lcode_rowt, pg_lanes_gather): lane rows with at least 8 output columns, the last 8
# lanes and columns overlapping the ones before
LMIXED_CASES = [  # (x shape, output size, planned)
    ((2, 16, 8, 16), (4, 8), True),         # 2 x 2, one block of 8 columns
    ((1, 13, 9, 40), (9, 20), True),        # 1 x 2, 13 lanes, 20 columns
    ((1, 64, 12, 20), (4, 10), True),       # 3 x 2, lanes of 128 bytes or more
    ((2, 64, 16, 64), (2, 8), True),        # 8 x 8, the largest
    ((1, 1032, 4, 16), (2, 8), True),       # lanes in two blocks (1024 + 8)
    ((2, 24, 12, 20), (4, 10), False),      # 3 x 2, lanes of 48 or 96 bytes: the scatter
    ((1, 16, 4, 14), (2, 7), False),        # 7 columns: the scatter
]


@pytest.mark.parametrize("mode", [None, "stream_everything"])
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_max_pool_nchw_into_channels_last_gather_form_gives_the_scatters_bits(dtype, mode,
                                                                              request):
    """The channels-last gather form from grad_output and indices in NCHW planes against
    the scatter and the reference: special values, int32 and int64 indices, planes with a
    stray index or one position twice (those take the scatter), grad_input contiguous,
    columns apart and unaligned, streamed or not, 1 and 3 threads; planned where
    LMIXED_CASES says; a bad index anywhere leaves grad_input untouched."""
    if mode:
        request.getfixturevalue(mode)
    rng = np.random.default_rng(37)
    cases = []
    for x_shape, o, planned in LMIXED_CASES:
        for kind in ("window", "stray"):
            idx = _window_indices(x_shape, o, rng, kind)
            go = _special(idx.shape, dtype, rng)
            for idx_dtype in (np.int64, np.int32):
                cases.append((x_shape, go, idx.astype(idx_dtype), planned))

    def runs():
        return _lanes_gather_runs([(x_shape, go, idx, lambda gap, p=planned: p)
                                   for x_shape, go, idx, planned in cases], dtype)

    if dtype != np.float64 and _kernels.simd_in_use() == "avx2":
        # the check's pass: each index's code r * kw + c in its own window, in channels-last
        # order at the workspace's 64-byte aligned start, then a byte per output row and
        # one per plane saying that all lie in their windows (so the planes were gathered)
        for x_shape, go, idx, planned in cases[::2]:
            if not planned:
                continue
            n, c, ho, wo = idx.shape
            kh, kw = x_shape[2] // ho, x_shape[3] // wo
            out = _lanes_view(x_shape, dtype, 0)
            op = pg.AdaptiveMaxPool2dBackward(go, x_shape, idx, out)
            ws = np.zeros(op.workspace_size, np.uint8)
            op.execute(ws, n_threads=2)
            at = (-ws.ctypes.data) % 64
            codes = ws[at:at + idx.size].reshape(n, ho, wo, c)
            ok = ws[at + idx.size + n * ho:at + idx.size + n * ho + n]
            rows = idx // x_shape[3] - np.arange(ho)[:, None] * kh
            cols = idx % x_shape[3] - np.arange(wo) * kw
            code = (rows * kw + cols).transpose(0, 2, 3, 1)
            stray = np.any((rows < 0) | (rows >= kh) | (cols < 0) | (cols >= kw),
                           axis=(1, 2, 3))
            np.testing.assert_array_equal(ok, ~stray)
            np.testing.assert_array_equal(codes[~stray], code[~stray])
    x_shape, go, idx, _ = cases[8]   # (1, 64, 12, 20) -> (4, 10), int64, in its windows
    own = int(idx[0, 37, 3, 9])
    for bad_value in (-1, 12 * 20, own + 2**32, own - 2**32, own + 2**31):
        bad = idx.copy()
        bad[0, 37, 3, 9] = bad_value
        dst = _lanes_view(x_shape, dtype, 0)
        with pytest.raises(pg.ParamInvalidError) as e:
            pg.AdaptiveMaxPool2dBackward(go, x_shape, bad, dst).execute()
        assert e.value.code == 161002
        assert np.all(dst == 7)
    _same_bits_after(request, "no_window", runs)


@pytest.mark.skipif(_kernels.simd_in_use() != "avx2", reason="CPU without AVX2")
def test_max_pool_flat_rows_table():
    """_plan.window_spread: each input column's output column and place in its window row,
    for both block sizes; None where the flat rows do not apply."""
    W, L, Wo = 12, 3, 6
    x = np.arange(W * L)
    src = (x // L // 2) * L + x % L
    place = (x // L) % 2
    for es, blk, view in ((4, 8, np.int32), (2, 16, np.uint16)):
        table, wide = _plan.window_spread(W, L, Wo, es)
        t = table.reshape(-1, 9)
        first = np.minimum(np.arange(0, W * L, blk), W * L - blk)
        assert len(t) == len(first)
        for row, f in zip(t, first):
            cols = f + np.arange(blk)
            if es == 4:
                off = row[1:5].view(np.int32)
            else:
                off = row[1:5].view(np.uint8)[0::2] // 2
            np.testing.assert_array_equal(row[0] + off, src[cols])
            np.testing.assert_array_equal(row[5:].view(view), place[cols])
            assert 0 <= row[0] and row[0] + (16 if wide else 8) <= Wo * L
    assert _plan.window_spread(6, 3, 3, 4) is None       # rows of 9 outputs
    assert _plan.window_spread(12, 8, 6, 4) is None      # whole vectors of lanes
    assert _plan.window_spread(12, 3, 6, 8) is None      # float64
    assert _plan.window_spread(13, 3, 6, 4) is None      # windows do not tile the row
    assert _plan.window_spread(12, 1, 6, 4) is None


@pytest.mark.skipif(_kernels.simd_in_use() != "avx2", reason="CPU without AVX2")
@pytest.mark.parametrize("c", [32, 5], ids=["lanes", "flat_rows"])
def test_max_pool_channels_last_gather_form_codes_and_bad_indices(c):
    """The check's pass of the channels-last gather form (lanes, and flat rows): each
    index's code r * kw + c in its own window, at the workspace's 64-byte aligned start,
    then a byte per output row and one per plane saying that all lie in their windows; not
    planned where the windows do not tile the plane, are larger than 64 positions or, for
    the lanes, more than 4 with lanes of fewer than 128 bytes; a bad index anywhere (its
    low 32 bits in its own window included) leaves grad_input untouched."""
    rng = np.random.default_rng(6)
    x_shape, o = (2, c, 12, 10), (4, 5)      # windows 3 x 2
    idx = _window_indices(x_shape, o, rng, "window")
    go = _as(make_array(idx.shape, np.float32, rng), "channels_last")
    gi = _lanes_view(x_shape, np.float32, 0)
    n, c, ho, wo = idx.shape
    rows = (idx // 10 - np.arange(4)[:, None] * 3)
    cols = (idx % 10 - np.arange(5) * 2)
    want = (rows * 2 + cols).transpose(0, 2, 3, 1)         # (N, Ho, Wo, C)
    stray = idx.copy()
    stray[1, 3, 2, 3] = 0
    for j, planes in ((idx, [1, 1]), (stray, [1, 0])):
        op = pg.AdaptiveMaxPool2dBackward(go, x_shape, _as(j, "channels_last"), gi)
        assert op._kernel.shared_bytes >= idx.size + n * ho + n
        ws = np.zeros(op.workspace_size, np.uint8)
        op.execute(ws)
        np.testing.assert_array_equal(gi, ref_adaptive_max_pool2d_backward(go, x_shape, j))
        at = (-ws.ctypes.data) % 64
        codes = ws[at:at + idx.size].reshape(n, ho, wo, c)
        okrow = ws[at + idx.size:at + idx.size + n * ho].reshape(n, ho)
        ok = ws[at + idx.size + n * ho:at + idx.size + n * ho + n]
        np.testing.assert_array_equal(ok, planes)
        np.testing.assert_array_equal(codes[0], want[0])
        assert np.all(okrow[0] == 1) and okrow[1].min() == planes[1]
    for shape, out, ch in [((2, 16, 13, 10), (4, 5), 16), ((1, 8, 18, 9), (2, 1), 8),
                           ((2, 24, 12, 10), (4, 5), 24), ((2, 5, 13, 10), (4, 5), 5),
                           ((2, 5, 16, 40), (2, 5), 5)]:
        j = _as(np.zeros((shape[0], ch) + out, np.int64), "channels_last")
        k = pg.AdaptiveMaxPool2dBackward(_as(np.zeros(j.shape, np.float32), "channels_last"),
                                         shape, j, _lanes_view(shape, np.float32, 0))._kernel
        assert k.shared_bytes == 0, shape
    own = int(idx[1, 3, 3, 4])
    for bad_value in (-1, 120, own + 2**32, own - 2**32, own + 2**31):
        bad = idx.copy()
        bad[1, 3, 3, 4] = bad_value
        dst = _lanes_view(x_shape, np.float32, 0)
        with pytest.raises(pg.ParamInvalidError) as e:
            pg.AdaptiveMaxPool2dBackward(go, x_shape, _as(bad, "channels_last"), dst).execute()
        assert e.value.code == 161002
        assert np.all(dst == 7)


def _as(a, layout):
    from conftest import as_layout
    return as_layout(a, layout)


def _pair(v):
    return tuple(v) if isinstance(v, tuple) else (v, v)


@pytest.mark.parametrize("shape", [(1, 1, 256, 256), (1, 4096, 4, 4), (1, 2048, 8, 4)],
                         ids=["rows", "small-planes", "small-planes-8"])
def test_every_float16_value_converts_exactly_on_every_path(shape, request):
    """All 65536 float16 bit patterns as grad_output of a 2x2 average (every grad_input
    value one quarter of one grad_output value): float16 -> float32 exactly, and the
    quarter (exact in float32, subnormal halves rounding to nearest even) back to float16,
    NaN made quiet with its sign and payload: numpy's conversions' bits, on the AVX2 (F16C)
    loops and the baseline ones (pg_vec.h's lane conversions on SSE2), whole rows
    (pg_half.h's row conversions) and small planes (pg_tpose.h's transposes)."""
    g = np.arange(65536, dtype=np.uint32).astype(np.uint16).view(np.float16).reshape(shape)
    with np.errstate(invalid="ignore"):
        want = (g.astype(np.float32) * np.float32(0.25)).astype(np.float16)
    want = np.repeat(np.repeat(want, 2, axis=2), 2, axis=3).view(np.uint16)
    x_shape = shape[:2] + (shape[2] * 2, shape[3] * 2)

    def runs():
        outs = [pg.avg_pool2d_backward(g, x_shape, 2, 2, 0).view(np.uint16)]
        np.testing.assert_array_equal(outs[0], want)
        return outs

    _same_bits_after(request, "baseline_simd", runs)

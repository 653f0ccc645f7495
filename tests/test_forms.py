"""Every kernel form gives the same bits (docs/forms.md): each call planned as it is and
with each form of _plan.FORMS turned off, in every dtype and layout, stored through the
cache and streamed, on 1 and 3 threads, with the SIMD loops and without; and the plan
value that names the choices (op.plan).  The calls reach every form but `crun`
(test_kernel_paths.py compares it with its plain loops)."""
import dataclasses

import numpy as np
import pytest

import pool_grad as pg
from pool_grad import _kernels, _plan

from conftest import BFLOAT16

DTYPES = [np.float32, np.float64, np.float16, BFLOAT16]
IDS = ["f32", "f64", "f16", "bf16"]


def _layout(arr, layout):
    if layout == "nchw":
        return arr
    perm = (0,) + tuple(range(2, arr.ndim)) + (1,)
    back = (0, arr.ndim - 1) + tuple(range(1, arr.ndim - 1))
    return np.ascontiguousarray(arr.transpose(perm)).transpose(back)


def _calls(dtype, layout, rng):
    """(name, make_op) for calls that reach most forms: small planes (tstore, plane,
    folded, flat planes), one-term and narrow sums, channels-last lanes, strips, and the
    scatter's window form."""
    def data(shape):
        return _layout(rng.standard_normal(shape).astype(np.float32).astype(dtype), layout)

    def out(shape):
        return _layout(np.zeros(shape, dtype), layout)

    calls = []
    for shape, k, s, p in [((2, 16, 14, 14), 3, 2, 1), ((2, 16, 8, 8), 3, 1, 1),
                           ((2, 24, 56, 56), 2, 2, 0), ((1, 16, 7, 7), 7, 7, 0),
                           ((1, 8, 40, 40), 3, 1, 1)]:
        o = tuple((n + 2 * p - k) // s + 1 for n in shape[2:])
        go = data(shape[:2] + o)
        calls.append((f"avg {shape} k{k}s{s}p{p}", lambda go=go, shape=shape, k=k, s=s, p=p:
                      pg.AvgPool2dBackward(go, shape, k, s, p, False, True, 0,
                                           pg.KEEP_DTYPE, out(shape))))
    go = data((2, 8, 4, 7, 7))
    calls.append(("adaptive 3-D", lambda go=go: pg.AdaptiveAvgPool3dBackward(
        go, (2, 8, 8, 14, 14), out((2, 8, 8, 14, 14)))))
    go = data((1, 16, 2, 4, 4))
    calls.append(("avg 3-D small planes", lambda go=go: pg.AvgPool3dBackward(
        go, (1, 16, 4, 8, 8), 3, 2, 1, False, True, 0, out((1, 16, 4, 8, 8)))))
    calls.append(("adaptive 3-D 4:1", lambda go=go: pg.AdaptiveAvgPool3dBackward(
        go, (1, 16, 8, 16, 16), out((1, 16, 8, 16, 16)))))
    go = data((1, 8, 4, 7, 7))
    calls.append(("adaptive 3-D overlapping", lambda go=go: pg.AdaptiveAvgPool3dBackward(
        go, (1, 8, 15, 21, 21), out((1, 8, 15, 21, 21)))))
    # channels-last grad_output into C-contiguous rows, and the other way round
    go = data((2, 16, 7, 7))
    other = "nhwc" if layout == "nchw" else "nchw"
    calls.append(("k2s2 into the other layout", lambda go=go: pg.AvgPool2dBackward(
        go, (2, 16, 14, 14), 2, 2, 0, False, True, 0, pg.KEEP_DTYPE,
        _layout(np.zeros((2, 16, 14, 14), dtype), other))))
    go = data((2, 16, 7, 7))
    calls.append(("adaptive 2-D", lambda go=go: pg.AdaptiveAvgPool2dBackward(
        go, (2, 16, 14, 14), out((2, 16, 14, 14)))))
    x = data((2, 16, 32, 32))
    y, ind = pg.adaptive_max_pool2d(x, (16, 16), return_indices=True)
    y, ind = (_layout(np.ascontiguousarray(a), layout) for a in (y, ind))
    for into in (layout, other):
        calls.append((f"adaptive max 32 -> 16 into {into}",
                      lambda y=y, ind=ind, into=into: pg.AdaptiveMaxPool2dBackward(
                          y, x.shape, ind, _layout(np.zeros(x.shape, dtype), into))))
    y, ind = pg.max_pool2d(x, 3, 2, 1, return_indices=True)
    y, ind = (_layout(np.ascontiguousarray(a), layout) for a in (y, ind))
    calls.append(("max k3s2p1", lambda y=y, ind=ind: pg.MaxPool2dWithIndicesBackward(
        y, x.shape, ind, 3, 2, 1, 1, False, out(x.shape))))
    return calls


def _bits(op, n_threads):
    op.grad_input[...] = np.nan
    for _ in range(op._kernel.tune_calls + 1 if op._kernel is not None else 1):
        op.execute(n_threads=n_threads)   # through the timing of the store forms too
    return op.grad_input.view(np.uint16 if op.grad_input.itemsize == 2 else
                              np.uint32 if op.grad_input.itemsize == 4 else np.uint64).copy()


@pytest.mark.parametrize("stores", ["cache", "stream"])
@pytest.mark.parametrize("layout", ["nchw", "nhwc"])
@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
def test_every_form_gives_the_same_bits(forms_off, monkeypatch, dtype, layout, stores, rng):
    if stores == "stream":   # these small outputs planned as if larger than the cache
        monkeypatch.setattr(_plan, "stream_bytes", lambda threads: 0)
        monkeypatch.setattr(_plan, "TUNE_BYTES", 0)
    used = set()
    for name, make_op in _calls(dtype, layout, rng):
        forms_off(())
        base = make_op()
        want = _bits(base, 1)
        for simd in (True, False):
            _kernels._set_simd(simd)
            try:
                for form in _plan.FORMS:
                    forms_off({form})
                    op = make_op()
                    if op.plan == base.plan:
                        continue
                    used.add(form)
                    for nt in (1, 3):
                        assert np.array_equal(_bits(op, nt), want), (name, form, simd, nt)
            finally:
                _kernels._set_simd(True)
                forms_off(())
    assert used   # some form applied to these calls


def test_plan_names_the_choices(forms_off):
    go = np.ones((2, 16, 7, 7), np.float32)
    make = lambda: pg.AvgPool2dBackward(go, (2, 16, 14, 14), 2, 2, 0, False, True, 0,  # noqa
                                        pg.KEEP_DTYPE, np.zeros((2, 16, 14, 14), np.float32))
    plan = make().plan
    assert plan.operator == "AvgPool2dBackward" and plan.kernel == "AvgGatherKernel"
    assert plan.store_forms[0] in ("cache", "stream") and plan.items >= 1
    assert [v[0] for v in plan.views] == ["grad_output", "grad_input"]
    assert all(len(shape) == 6 for _, shape, _ in plan.views)
    assert plan == make().plan                       # the same call, the same plan
    text = str(plan)
    assert "AvgGatherKernel" in text and "grad_input: shape" in text
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan.items = 0
    forms_off({"folded"})
    off = make().plan
    assert off != plan and off.forms_off == ("folded",) and "forms off: folded" in str(off)


def test_plan_of_an_empty_call():
    op = pg.AvgPool2dBackward(np.ones((0, 4, 2, 2), np.float32), (0, 4, 4, 4), 2, 2, 0,
                              False, True, 0, pg.KEEP_DTYPE,
                              np.zeros((0, 4, 4, 4), np.float32))
    assert op.plan.kernel == "" and op.plan.workspace_size == 0
    assert "no kernel" in str(op.plan)


def test_unknown_forms_are_refused(forms_off):
    with pytest.raises(ValueError, match="unknown forms"):
        forms_off({"no such form"})

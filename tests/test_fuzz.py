"""Fuzzing of every operator through every API layer (issue #6, point 1).

Each example draws a call -- a valid configuration, optionally broken by one or more
"mutations" (wrong dtypes, ranks, shapes, strides, aliasing, hostile kernel/stride/padding
values, bad indices, hostile workspaces and thread counts) -- and runs it through one of the
three layers (functions, two-phase objects, pool_grad.aclnn).  The outcome must be one of:

* the call succeeds and grad_input matches the float64 reference (tests/reference.py) within
  the dtype's tolerance -- required when every mutation is benign;
* it raises an AclnnError subclass (or a plain TypeError when the broken argument is a
  non-array Python parameter), and grad_input is left unchanged -- required when some
  mutation breaks a SPEC rule;

never SystemError, IndexError, OverflowError, MemoryError, a crash or a hang; inputs are
never modified.

CI runs a derandomized, bounded number of examples.  A long run (random seeds, more
examples) is selected with environment variables::

    POOL_GRAD_FUZZ_EXAMPLES=20000 POOL_GRAD_FUZZ_RANDOM=1 pytest tests/test_fuzz.py -x
"""
import os
import subprocess
import sys
import textwrap

import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import pool_grad as pg
from conftest import child_kwargs
from pool_grad import aclnn

from reference import (ref_adaptive_avg_pool3d_backward, ref_adaptive_max_pool2d_backward,
                       ref_avg_pool2d_backward, ref_avg_pool2d_output_size, ref_round_fp16,
                       ref_round_hf32, tolerance)

BF16 = np.dtype(ml_dtypes.bfloat16)
VALID_DTYPES = [np.dtype(np.float32), np.dtype(np.float64), np.dtype(np.float16), BF16]
INVALID_DTYPES = [np.dtype(d) for d in (np.int8, np.int32, np.int64, np.uint16, np.bool_,
                                        np.complex64, np.complex128, object, "f4,f4",
                                        ">f4", ">f8", np.longdouble, "U3", "M8[s]")]

_EXAMPLES = int(os.environ.get("POOL_GRAD_FUZZ_EXAMPLES", "0") or 0)
_RANDOM = os.environ.get("POOL_GRAD_FUZZ_RANDOM", "") not in ("", "0")


def fuzz_settings(ci_examples):
    return settings(max_examples=_EXAMPLES or ci_examples, derandomize=not _RANDOM,
                    deadline=None, print_blob=True, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.filter_too_much])


# ----------------------------------------------------------------------------- arrays

def _values(shape, dtype, rng):
    """An array of `dtype` (valid or not) and `shape`, C-contiguous."""
    dt = np.dtype(dtype)
    base = rng.uniform(-1, 1, size=shape)
    if dt.kind == "f" or dt == BF16:
        return base.astype(dt)
    if dt.kind in "iu":
        return rng.integers(0, 3, size=shape).astype(dt)
    if dt.kind == "b":
        return base > 0
    if dt.kind == "c":
        return (base + 1j * base).astype(dt)
    if dt.kind == "O":
        return base.astype(object)
    if dt.kind == "U":
        return np.full(shape, "ab", dt)
    return np.zeros(shape, dt)  # structured, datetime


def _layout(arr, layout, rng):
    """`arr`'s values in a memory layout (read-only layouts only for inputs)."""
    shape = arr.shape
    if layout == "c" or arr.ndim == 0:
        return arr.copy()
    if layout == "f":
        return np.asfortranarray(arr)
    if layout == "neg":
        rev = tuple(slice(None, None, -1) for _ in shape)
        return np.ascontiguousarray(arr[rev])[rev]
    if layout == "perm":  # a random axis order in memory (channels-last and friends)
        order = rng.permutation(arr.ndim)
        return np.ascontiguousarray(arr.transpose(order)).transpose(np.argsort(order))
    if layout in ("step", "bigstep"):
        steps = [int(rng.integers(1, 4)) for _ in shape]
        if layout == "bigstep":
            steps[-1] = 97
        big = np.zeros(tuple(max(1, s * t) for s, t in zip(shape, steps)), arr.dtype)
        out = big[tuple(slice(None, s * t, t) for s, t in zip(shape, steps))]
        out[...] = arr
        return out
    if layout == "broadcast":  # zero strides: the values along axis 0 repeat index 0
        return np.broadcast_to(arr[:1], shape) if shape[0] else arr.copy()
    if layout == "unaligned":  # byte offset 1 into a buffer
        if arr.dtype.itemsize < 2 or arr.dtype.hasobject:
            return arr.copy()
        buf = np.zeros(arr.nbytes + arr.dtype.itemsize, np.uint8)
        out = buf[1:1 + arr.nbytes].view(arr.dtype).reshape(shape)
        out[...] = arr
        return out
    if layout == "readonly":
        out = arr.copy()
        out.flags.writeable = False
        return out
    raise AssertionError(layout)


IN_LAYOUTS = ["c", "c", "f", "neg", "perm", "step", "bigstep", "broadcast", "unaligned",
              "readonly"]
OUT_LAYOUTS = ["c", "c", "f", "neg", "perm", "step"]


# ----------------------------------------------------------------------------- hostile values

HUGE = [2**31 - 1, 2**31, 2**32 + 1, 2**62, 2**63 - 1, 2**63, 2**64, 2**100, -2**63, -2**64]
JUNK = [None, 1.0, 2.5, float("nan"), float("inf"), "2", "", object(), [2, "x"], [[2, 2]],
        [2, 2, 2], [2.0, 2], True, np.float64(2.0), np.bool_(True), np.array([[1, 1]]), 1j]


def _is_int(v):
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


class Invalid(Exception):
    """The SPEC rejects the call (pool_grad must raise)."""


def _int64(e, name):
    """aclnn passes these as int64 (aclIntArray): a value outside it cannot be a call."""
    if not -2**63 <= int(e) < 2**63:
        raise Invalid(name)
    return int(e)


def spec_pair(v, name, allow_empty=None):
    """The SPEC's reading of an int-or-sequence parameter: (h, w), or Invalid."""
    if _is_int(v):
        return _int64(v, name), _int64(v, name)
    if isinstance(v, np.ndarray):
        if v.ndim != 1 or not (v.dtype.kind in "iu" or v.size == 0):
            raise Invalid(name)
        v = v.tolist()
    if not isinstance(v, (list, tuple, range)):
        raise Invalid(name)
    items = list(v)
    if not items and allow_empty is not None:
        return allow_empty
    if len(items) not in (1, 2) or not all(_is_int(e) for e in items):
        raise Invalid(name)
    items = [_int64(e, name) for e in items]
    return (items[0], items[0]) if len(items) == 1 else tuple(items)


def spec_flag(v):
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    if _is_int(v) and v in (0, 1):
        return bool(v)  # not in the SPEC's words, but an unambiguous reading
    raise Invalid("flag")


# ----------------------------------------------------------------------------- outcomes

ALLOWED_TYPEERROR = object()


def _snapshot(*arrays):
    return [np.ascontiguousarray(a).tobytes() if isinstance(a, np.ndarray)
            and not a.dtype.hasobject else None for a in arrays]


def _unchanged(before, arrays):
    for b, a in zip(before, arrays):
        if b is not None:
            assert np.ascontiguousarray(a).tobytes() == b, "an array changed"


def check_outcome(call, expect, ref_fn, dtype, inputs, gi, typeerror_ok, untouched_ok=False):
    """Run `call`; `expect` is "ok" (must succeed), "error" (must raise) or "either".
    `ref_fn()` gives (reference, scale) when the call succeeded; `untouched_ok`: leaving a
    given grad_input as it was is also right (SPEC section 3: zero-size grad_output)."""
    before_in = _snapshot(*inputs)
    before_gi = _snapshot(gi)
    try:
        result = call()
    except pg.AclnnError as exc:
        assert expect != "ok", f"a valid call raised {exc!r}"
        assert exc.code in (pg.ACLNN_ERR_PARAM_NULLPTR, pg.ACLNN_ERR_PARAM_INVALID)
        assert str(exc), "empty message"
        if gi is not None and isinstance(gi, np.ndarray):
            _unchanged(before_gi, [gi])
        _unchanged(before_in, inputs)
        return "error"
    except TypeError as exc:
        if expect == "ok" or not typeerror_ok:
            raise AssertionError(f"plain TypeError (not an AclnnError): {exc!r}") from exc
        return "error"
    assert expect != "error", "an invalid call was accepted"
    _unchanged(before_in, inputs)
    ref, scale = ref_fn()
    result = np.asarray(result)
    if untouched_ok and gi is not None and before_gi[0] is not None and \
            np.ascontiguousarray(gi).tobytes() == before_gi[0]:
        return "ok"
    assert result.shape == ref.shape, (result.shape, ref.shape)
    assert result.dtype == dtype
    rtol, atol = tolerance(dtype)
    got = result.astype(np.float64)
    bound = rtol * scale + atol
    bad = ~(np.abs(got - ref) <= bound)
    assert not bad.any(), (f"wrong result: max err {np.max(np.abs(got - ref)[bad])} at "
                           f"{np.argwhere(bad)[0]}; got {got[bad][:4]} want {ref[bad][:4]}")
    return "ok"


def run_layer(layer, op_cls, fn, fn_args, fn_kwargs, op_args, gi, threads, workspace_kind,
              stream_kind):
    """Build a zero-argument callable for one API layer; returns the grad_input."""
    if layer == "func":
        def call():
            return fn(*fn_args, **fn_kwargs, out=gi, n_threads=threads)
        return call
    if layer == "op":
        def call():
            op = op_cls(*op_args)
            ws = _workspace(op.workspace_size, workspace_kind)
            if stream_kind:
                s = STREAM
                op.execute(workspace=ws, stream=s, n_threads=threads)
                s.synchronize()
            else:
                op.execute(workspace=ws, n_threads=threads)
            return op_args[-1]
        return call
    get_ws, launch = {
        pg.AvgPool2dBackward: (aclnn.aclnnAvgPool2dBackwardGetWorkspaceSize,
                               aclnn.aclnnAvgPool2dBackward),
        pg.AdaptiveAvgPool3dBackward: (aclnn.aclnnAdaptiveAvgPool3dBackwardGetWorkspaceSize,
                                       aclnn.aclnnAdaptiveAvgPool3dBackward),
        pg.AdaptiveMaxPool2dBackward: (aclnn.aclnnAdaptiveMaxPool2dBackwardGetWorkspaceSize,
                                       aclnn.aclnnAdaptiveMaxPool2dBackward),
    }[op_cls]

    def call():
        size, executor = get_ws(*op_args)
        ws = _workspace(size, "u8" if workspace_kind == "none" else workspace_kind) \
            if size else None
        stream = STREAM if stream_kind else None
        assert launch(ws, size, executor, stream) == pg.ACLNN_SUCCESS
        if stream is not None:
            stream.synchronize()
        return op_args[-1]
    return call


def _workspace(size, kind):
    """Valid workspaces only: hostile ones are fuzzed in a subprocess (see below)."""
    if kind == "none":
        return None
    if kind == "bytearray":
        return bytearray(size)
    if kind == "f64":
        return np.zeros((size + 7) // 8, np.float64)
    if kind == "offset":
        return np.zeros(size + 3, np.uint8)[3:]
    return np.zeros(size, np.uint8)


# one stream for the whole module (a Stream's worker thread lives as long as the process)
STREAM = pg.Stream()
layer_st = st.sampled_from(["func", "op", "aclnn"])
threads_st = st.sampled_from([None, None, 1, 2, 3, 64])
ws_st = st.sampled_from(["none", "u8", "bytearray", "f64", "offset"])


_LAST = ("go_list", "idx_list", "go_none", "x_none", "gi_none", "idx_none", "go_0d")


_FIRST = ("zero_lead", "zero_out", "zero_plane")


def _order(mutations):
    """Mutations that give the arrays new (empty) shapes go first, so that they do not
    replace an array that another mutation made invalid; a read-only grad_input after the
    others that give it new memory; those that replace an argument by a non-array (or a
    0-d one) last."""
    return sorted(mutations, key=lambda m: _FIRST.index(m) if m in _FIRST
                  else len(_FIRST) + (m == "gi_readonly") + 2 * (m in _LAST))


def _replaces_bad_gi(m, mutations):
    """True when mutation m, which gives grad_input new (aliased) memory, would replace the
    grad_input that another gi_ mutation made invalid (gi_readonly runs after it)."""
    return any(g.startswith("gi_") and g not in (m, "gi_readonly") for g in mutations)


# ----------------------------------------------------------------------------- AvgPool2d

@st.composite
def avg_config(draw):
    rank = draw(st.sampled_from([3, 4]))
    lead = tuple(draw(st.integers(0 if draw(st.booleans()) and draw(st.booleans()) else 1, 3))
                 for _ in range(rank - 2))
    H, W = draw(st.integers(1, 7)), draw(st.integers(1, 7))
    huge = draw(st.integers(0, 9)) == 0
    k, s, p = [], [], []
    for size in (H, W):
        if huge:  # kernel/stride/padding near or beyond int64 limits, output size >= 1
            kind = draw(st.sampled_from(["stride", "kernel"]))
            if kind == "stride":
                kk = draw(st.integers(1, size))
                ss = draw(st.sampled_from(HUGE[:5]))  # valid: within aclnn's int64
                pp = draw(st.integers(0, kk // 2))
            else:
                kk = draw(st.sampled_from([2**62, 2**63 - 1]))
                pp = kk // 2 - draw(st.integers(0, 1)) * (size // 2)
                ss = draw(st.sampled_from([1, size, 2**62, kk]))
        else:
            kk = draw(st.integers(1, size + 2))
            pp = draw(st.integers(0, kk // 2))
            ss = draw(st.integers(1, 4))
        k.append(kk), s.append(ss), p.append(pp)
    ceil = draw(st.booleans())
    outs = [ref_avg_pool2d_output_size(n, kk, ss, pp, ceil)
            for n, kk, ss, pp in zip((H, W), k, s, p)]
    assume(all(o >= 1 for o in outs))
    return dict(lead=lead, H=H, W=W, k=tuple(k), s=tuple(s), p=tuple(p), ceil=ceil,
                outs=tuple(outs))


def _avg_params_fit(cfg, k, s, p):
    """Whether kernel k, stride s, padding p are valid for the configuration's input and give
    its grad_output size."""
    return all(kk > 0 and ss > 0 and 0 <= pp <= kk // 2
               and ref_avg_pool2d_output_size(n, kk, ss, pp, cfg["ceil"]) == o
               for n, kk, ss, pp, o in zip((cfg["H"], cfg["W"]), k, s, p, cfg["outs"]))


def _param_form(draw, pair, allow_none=False):
    """An equivalent spelling of a (h, w) pair."""
    forms = [list(pair), tuple(pair)]
    small = max(map(abs, pair)) < 2**63
    if small:
        forms.append(np.array(pair, np.int64))
    if pair[0] == pair[1]:
        forms += [pair[0], [pair[0]]] + ([np.int64(pair[0])] if small else [])
    return draw(st.sampled_from(forms))


AVG_MUTATIONS = [
    "go_dtype_invalid", "go_dtype_other", "x_dtype_other", "gi_dtype_invalid",
    "go_rank", "go_spatial", "go_channels", "gi_shape", "gi_readonly", "gi_zero_stride",
    "gi_alias_go", "gi_unaligned", "kernel_junk", "stride_junk", "padding_junk",
    "kernel_huge", "stride_huge", "padding_huge", "padding_gt_half", "kernel_zero",
    "stride_zero", "padding_negative", "ceil_junk", "cip_junk", "divisor_junk",
    "divisor_huge", "cube_invalid", "cube_dtype", "threads_bad", "go_none", "x_none",
    "gi_none", "kernel_none", "padding_none", "go_list", "go_0d", "x_rank",
]


# the mutations of kernel, stride and padding, judged together once all are applied
PARAM_MUTATIONS = {"kernel_junk", "stride_junk", "padding_junk", "kernel_huge",
                   "stride_huge", "padding_huge", "padding_gt_half", "kernel_zero",
                   "stride_zero", "padding_negative", "kernel_none", "padding_none"}


@fuzz_settings(150)
@given(cfg=avg_config(), data=st.data())
def test_fuzz_avg_pool2d_backward(cfg, data):
    draw = data.draw
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    dtype = draw(st.sampled_from(VALID_DTYPES))
    xs = cfg["lead"] + (cfg["H"], cfg["W"])
    gs = cfg["lead"] + cfg["outs"]
    go = _layout(_values(gs, dtype, rng), draw(st.sampled_from(IN_LAYOUTS)), rng)
    x_kind = draw(st.sampled_from(["shape", "array", "list"]))
    gi = _layout(np.full(xs, 7, dtype), draw(st.sampled_from(OUT_LAYOUTS)), rng)
    k, s, p = cfg["k"], cfg["s"], cfg["p"]
    kernel, stride, padding = (_param_form(draw, k), _param_form(draw, s),
                               _param_form(draw, p))
    if s == k and draw(st.booleans()):
        stride = draw(st.sampled_from([None, [], ()]))
    ceil = cfg["ceil"]
    cip = draw(st.booleans())
    div = draw(st.sampled_from([0, None, 0, 1, 3, -2, 2**31, -2**63]))
    cube = draw(st.sampled_from([0, 0, 1, 2, 3]))
    if cube == 2 and dtype == BF16 or cube == 3 and dtype != np.float32:
        cube = 0
    threads = draw(threads_st)
    layer = draw(layer_st)
    use_out = layer != "func" or draw(st.booleans())
    mutations = _order(draw(st.lists(st.sampled_from(AVG_MUTATIONS), max_size=2,
                                     unique=True) if draw(st.booleans()) else st.just([])))
    if not use_out:  # the function allocates grad_input itself
        mutations = [m for m in mutations if not m.startswith("gi_")]
    expect = "ok"
    typeerror_ok = False

    def bad(kind="error", te=False):
        nonlocal expect, typeerror_ok
        if kind == "error" or expect != "error" and kind == "either":
            expect = kind
        typeerror_ok = typeerror_ok or te

    x_dtype = dtype
    params_te = False   # a junk kernel/stride/padding may raise a plain TypeError
    for m in mutations:
        if m == "go_dtype_invalid":
            go = _values(gs, draw(st.sampled_from(INVALID_DTYPES)), rng); bad()
        # go_dtype_other and x_dtype_other never pick the same new dtype: with grad_input
        # allocated by the function, go and x would agree again (a valid call)
        elif m == "go_dtype_other":  # x (an array here) or grad_input has the old dtype
            x_kind = "array"
            go = _values(gs, draw(st.sampled_from([d for d in VALID_DTYPES
                                                   if d != dtype and d != x_dtype])), rng)
            bad()
        elif m == "x_dtype_other":
            x_kind = "array"
            x_dtype = draw(st.sampled_from([d for d in VALID_DTYPES + INVALID_DTYPES
                                            if d != dtype and d != go.dtype])); bad()
        elif m == "gi_dtype_invalid":
            gi = np.zeros(xs, draw(st.sampled_from(INVALID_DTYPES + [d for d in VALID_DTYPES
                                                                    if d != dtype]))); bad()
        elif m == "go_rank":
            if "x_rank" in mutations:   # both ranks changed may agree again
                continue
            go = go[None] if go.ndim == 3 or not go.shape[0] or draw(st.booleans()) \
                else go[0]
            bad()
        elif m == "go_spatial":
            if set(mutations) & PARAM_MUTATIONS:   # new parameters (a stride of None: the
                continue                           # kernel's) may give go's new shape
            ax = draw(st.sampled_from([-1, -2]))
            shp = list(go.shape); shp[ax] += draw(st.sampled_from([-1, 1, 5]))
            assume(shp[ax] >= 0)
            go = _values(tuple(shp), dtype, rng); bad()
        elif m == "go_channels":
            shp = list(go.shape); shp[-3] += 1
            go = _values(tuple(shp), dtype, rng); bad()
        elif m == "gi_shape":
            shp = list(gi.shape); shp[draw(st.integers(0, len(shp) - 1))] += 1
            gi = np.zeros(tuple(shp), dtype); bad()
        elif m == "gi_readonly":
            gi = _layout(gi, "readonly", rng); bad()
        elif m == "gi_zero_stride":
            big = [a for a, n in enumerate(gi.shape) if n > 1]
            if not big or not gi.size:   # (an empty grad_input has no element to overlap)
                continue
            strides = list(gi.strides); strides[draw(st.sampled_from(big))] = 0
            gi = np.lib.stride_tricks.as_strided(gi, gi.shape, strides, writeable=True); bad()
        elif m == "gi_alias_go":
            if go.dtype != dtype:   # go_dtype_*: already invalid, and kept so
                continue
            if _replaces_bad_gi(m, mutations):
                continue
            assume(go.size and np.prod(xs))
            buf = np.zeros(max(go.size, int(np.prod(xs))) + 1, dtype)
            gi = buf[:int(np.prod(xs))].reshape(xs)
            g2 = buf[1:1 + go.size].reshape(go.shape)
            g2[...] = go
            go = g2
            if np.shares_memory(gi, go):   # one element each: side by side, no overlap
                bad()
        elif m == "gi_unaligned":
            gi = _layout(gi, "unaligned", rng)
            if not gi.flags.aligned:   # (an empty one is aligned)
                bad()
        elif m in ("kernel_junk", "stride_junk", "padding_junk"):
            v = draw(st.sampled_from(JUNK + ([None] if m == "stride_junk" else [])))
            if m == "kernel_junk":
                kernel = v
            elif m == "stride_junk":
                stride = v
            else:
                padding = v
            params_te = True
        elif m in ("kernel_huge", "stride_huge", "padding_huge"):
            v = draw(st.sampled_from(HUGE))
            if m == "kernel_huge":
                kernel = v
            elif m == "stride_huge":
                stride = v
            else:
                padding = v
        elif m == "padding_gt_half":
            padding = (k[0] // 2 + 1, p[1])
        elif m == "kernel_zero":
            kernel = draw(st.sampled_from([0, -1, (0, 1), (1, -3)]))
        elif m == "stride_zero":
            stride = draw(st.sampled_from([0, -1, (1, 0), (-2, 1)]))
        elif m == "padding_negative":
            padding = draw(st.sampled_from([-1, (0, -1), (-2**63, 0)]))
        elif m == "ceil_junk":
            ceil = draw(st.sampled_from([None, "yes", 2, 1.0, [True]])); bad(te=True)
        elif m == "cip_junk":
            cip = draw(st.sampled_from([None, "no", -1, 0.0])); bad(te=True)
        elif m == "divisor_junk":
            div = draw(st.sampled_from([1.5, "2", [2], float("nan")])); bad(te=True)
        elif m == "divisor_huge":
            div = draw(st.sampled_from([2**63, 2**64, -2**63 - 1, 2**100]))
            bad("either")  # SPEC: no range limit; a clear 161002 is acceptable too
        elif m == "cube_invalid":
            cube = draw(st.sampled_from([-1, 4, 2**63, 1.0, "0", None])); bad(te=True)
        elif m == "cube_dtype":
            if dtype == BF16:
                cube = draw(st.sampled_from([2, 3])); bad()
            elif dtype != np.float32:
                cube = 3; bad()
        elif m == "threads_bad":
            if layer == "aclnn":   # the aclnn entry points take no thread count
                continue
            threads = draw(st.sampled_from([0, -1, 1.5, "2", True, -2**63])); bad(te=True)
        elif m == "go_none":
            go = None; bad()
        elif m == "x_none":
            x_kind = "none"; bad()
        elif m == "gi_none":
            if layer != "func":
                gi = None; bad()
        elif m == "kernel_none":
            kernel = None
        elif m == "padding_none":
            padding = None
        elif m == "go_list":
            # converted with np.asarray: the same values, as float64; a valid float64 call
            # where neither x nor grad_input fixes another dtype
            # (an empty grad_output's list, [], loses the shape; a copy would end the
            # aliasing of gi_alias_go)
            if go is None or go.dtype == BF16 or not go.size or (not use_out
                                                                 and x_kind != "array"):
                continue
            if "gi_alias_go" in mutations:
                continue
            go = go.tolist()
            if dtype != np.float64:
                bad()
        elif m == "go_0d":
            go = np.array(1.0, dtype); bad()
        elif m == "x_rank":
            x_kind = "bad_rank"; bad()
    if set(mutations) & PARAM_MUTATIONS:
        # the SPEC's reading of the final arguments: mostly invalid, but a huge stride
        # still gives a one-wide output where the kernel spans the padded input, so does a
        # huge kernel as its own stride with ceil_mode, and W = 1 takes any stride
        try:
            kk = spec_pair(kernel, "kernel")
            ss = kk if stride is None else spec_pair(stride, "stride", allow_empty=kk)
            pp = spec_pair(padding, "padding")
        except Invalid:
            bad(te=params_te)
        else:
            if _avg_params_fit(cfg, kk, ss, pp):
                k, s, p = kk, ss, pp
            else:
                bad(te=params_te)
    if layer != "func" and gi is None and "gi_none" not in mutations:
        gi = np.zeros(xs, dtype)

    if x_kind == "shape":
        x = tuple(xs)
    elif x_kind == "list":
        x = list(xs)
    elif x_kind == "array":
        x = _layout(_values(xs, x_dtype, rng), draw(st.sampled_from(IN_LAYOUTS)), rng)
    elif x_kind == "bad_rank":
        x = xs[1:] if len(xs) == 4 else (1, 1, 1) + xs
    else:
        x = None
    out = gi if use_out else None
    gi_for_check = out

    def ref_fn():
        g = np.asarray(go).astype(np.float64) if not isinstance(go, np.ndarray) \
            else go.astype(np.float64)
        if dtype == np.float32 and cube in (1, 3):
            g = ref_round_hf32(go.astype(np.float32)).astype(np.float64)
        elif dtype == np.float32 and cube == 2:
            g = ref_round_fp16(go.astype(np.float32)).astype(np.float64)
        args = (xs, k, s, p, ceil, cip, div or 0)
        return (ref_avg_pool2d_backward(g, *args),
                np.abs(ref_avg_pool2d_backward(np.abs(g), *args)))

    call = run_layer(layer, pg.AvgPool2dBackward, pg.avg_pool2d_backward,
                     (go, x, kernel, stride, padding),
                     dict(ceil_mode=ceil, count_include_pad=cip, divisor_override=div,
                          cube_math_type=cube),
                     (go, x, kernel, stride, padding, ceil, cip, div, cube, out),
                     out, threads, draw(ws_st), draw(st.booleans()) and draw(st.booleans()))
    check_outcome(call, expect, ref_fn, dtype, [go, x], gi_for_check, typeerror_ok)


# ----------------------------------------------------------------------------- adaptive avg 3d

ADA_MUTATIONS = [
    "go_dtype_invalid", "go_dtype_other", "gi_dtype_invalid", "go_rank", "go_channels",
    "gi_shape", "gi_readonly", "gi_zero_stride", "gi_alias_go", "zero_dim_x",
    "zero_dim_go", "threads_bad", "go_none", "x_none", "gi_none", "x_negative",
    "x_rank", "go_list",
]


@fuzz_settings(200)
@given(data=st.data())
def test_fuzz_adaptive_avg_pool3d_backward(data):
    draw = data.draw
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    dtype = draw(st.sampled_from(VALID_DTYPES))
    rank = draw(st.sampled_from([4, 5]))
    lead = tuple(draw(st.integers(1, 3)) for _ in range(rank - 3))
    xs = lead + tuple(draw(st.integers(1, 6)) for _ in range(3))
    gs = lead + tuple(draw(st.integers(1, 7)) for _ in range(3))
    go = _layout(_values(gs, dtype, rng), draw(st.sampled_from(IN_LAYOUTS)), rng)
    gi = _layout(np.full(xs, 7, dtype), draw(st.sampled_from(OUT_LAYOUTS)), rng)
    x_kind = draw(st.sampled_from(["shape", "array", "list"]))
    threads = draw(threads_st)
    layer = draw(layer_st)
    use_out = layer != "func" or draw(st.booleans())
    mutations = _order(draw(st.lists(st.sampled_from(ADA_MUTATIONS), max_size=2,
                                     unique=True) if draw(st.booleans()) else st.just([])))
    if not use_out:  # the function allocates grad_input itself
        mutations = [m for m in mutations if not m.startswith("gi_")]
    expect, typeerror_ok = "ok", False
    for m in mutations:
        te = False
        if m == "go_dtype_invalid":
            go = _values(gs, draw(st.sampled_from(INVALID_DTYPES)), rng)
        elif m == "go_dtype_other":  # x (an array here) or grad_input has the old dtype
            x_kind = "array"
            go = _values(gs, draw(st.sampled_from([d for d in VALID_DTYPES if d != dtype])),
                         rng)
        elif m == "gi_dtype_invalid":
            gi = np.zeros(xs, draw(st.sampled_from(INVALID_DTYPES)))
        elif m == "go_rank":
            if "x_rank" in mutations:   # both ranks changed may agree again
                continue
            go = go[None] if go.ndim == 4 or not go.shape[0] or draw(st.booleans()) \
                else go[0]
        elif m == "go_channels":
            shp = list(go.shape); shp[-4] += 1
            go = _values(tuple(shp), dtype, rng)
        elif m == "gi_shape":
            shp = list(gi.shape); shp[draw(st.integers(0, len(shp) - 1))] += 1
            gi = np.zeros(tuple(shp), dtype)
        elif m == "gi_readonly":
            gi = _layout(gi, "readonly", rng)
        elif m == "gi_zero_stride":
            big = [a for a, n in enumerate(gi.shape) if n > 1]
            if not big or not gi.size:   # (an empty grad_input has no element to overlap)
                continue
            strides = list(gi.strides); strides[draw(st.sampled_from(big))] = 0
            gi = np.lib.stride_tricks.as_strided(gi, gi.shape, strides, writeable=True)
        elif m == "gi_alias_go":
            if go.dtype != dtype:   # go_dtype_*: already invalid, and kept so
                continue
            if _replaces_bad_gi(m, mutations):
                continue
            buf = np.zeros(max(go.size, int(np.prod(xs))) + 1, dtype)
            gi = buf[:int(np.prod(xs))].reshape(xs)
            g2 = buf[1:1 + go.size].reshape(go.shape)
            g2[...] = go
            go = g2
            if not np.shares_memory(gi, go):   # one element each: side by side, no overlap
                continue
        elif m == "zero_dim_x":
            ax = draw(st.integers(0, len(xs) - 1))
            xs = xs[:ax] + (0,) + xs[ax + 1:]
            gi = np.zeros(xs, dtype)
            if ax < len(lead):
                gs = gs[:ax] + (0,) + gs[ax + 1:]
                go = _values(gs, dtype, rng)
        elif m == "zero_dim_go":
            ax = draw(st.integers(len(lead), len(gs) - 1))
            gs = gs[:ax] + (0,) + gs[ax + 1:]
            go = _values(gs, dtype, rng)
        elif m == "threads_bad":
            if layer == "aclnn":   # the aclnn entry points take no thread count
                continue
            threads = draw(st.sampled_from([0, -5, 2.0, "1", True])); te = True
        elif m == "go_none":
            go = None
        elif m == "x_none":
            x_kind = "none"
        elif m == "gi_none":
            if layer == "func":
                continue
            gi = None
        elif m == "x_negative":
            x_kind = "negative"
        elif m == "x_rank":
            x_kind = "bad_rank"
        elif m == "go_list":
            # converted with np.asarray: the same values, as float64; a valid float64 call
            # where neither x nor grad_input fixes another dtype
            if (go is None or go.dtype == BF16 or dtype == np.float64
                    or not use_out and x_kind != "array"):
                continue
            go = go.tolist()
        expect = "error"
        typeerror_ok = typeerror_ok or te
    if x_kind == "shape":
        x = tuple(xs)
    elif x_kind == "list":
        x = list(xs)
    elif x_kind == "array":
        x = _values(xs, dtype, rng)
    elif x_kind == "negative":
        x = xs[:-1] + (-1,)
    elif x_kind == "bad_rank":
        x = xs[1:] if len(xs) == 5 else (1, 1, 1) + xs
    else:
        x = None
    out = gi if use_out else None

    def ref_fn():
        g = go.astype(np.float64)
        return (ref_adaptive_avg_pool3d_backward(g, xs),
                ref_adaptive_avg_pool3d_backward(np.abs(g), xs))

    call = run_layer(layer, pg.AdaptiveAvgPool3dBackward, pg.adaptive_avg_pool3d_backward,
                     (go, x), {}, (go, x, out), out, threads, draw(ws_st),
                     draw(st.booleans()) and draw(st.booleans()))
    check_outcome(call, expect, ref_fn, dtype, [go, x], out, typeerror_ok)


# ----------------------------------------------------------------------------- adaptive max 2d

MAX_MUTATIONS = [
    "idx_out_of_range", "idx_negative", "idx_dtype", "idx_shape", "idx_layout",
    "go_dtype_invalid", "go_dtype_other", "gi_dtype_invalid", "go_rank", "go_channels",
    "gi_shape", "gi_readonly", "gi_zero_stride", "gi_alias_go", "gi_alias_idx",
    "zero_lead", "zero_out", "zero_plane", "threads_bad", "go_none", "x_none", "gi_none",
    "idx_none", "idx_list", "idx_float",
]


@fuzz_settings(200)
@given(data=st.data())
def test_fuzz_adaptive_max_pool2d_backward(data):
    draw = data.draw
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    dtype = draw(st.sampled_from(VALID_DTYPES))
    rank = draw(st.sampled_from([3, 4]))
    lead = tuple(draw(st.integers(1, 3)) for _ in range(rank - 2))
    H, W = draw(st.integers(1, 6)), draw(st.integers(1, 6))
    xs = lead + (H, W)
    gs = lead + (draw(st.integers(1, 5)), draw(st.integers(1, 5)))
    idt = draw(st.sampled_from([np.int32, np.int64]))
    ind = rng.integers(0, H * W, size=gs).astype(idt)
    if draw(st.booleans()):  # repeated indices accumulate
        ind[...] = ind.reshape(-1)[0]
    ind = _layout(ind, draw(st.sampled_from(IN_LAYOUTS)), rng)
    go = _layout(_values(gs, dtype, rng), draw(st.sampled_from(IN_LAYOUTS)), rng)
    gi = _layout(np.full(xs, 7, dtype), draw(st.sampled_from(OUT_LAYOUTS)), rng)
    x_kind = draw(st.sampled_from(["shape", "array", "list"]))
    threads = draw(threads_st)
    layer = draw(layer_st)
    use_out = layer != "func" or draw(st.booleans())
    mutations = _order(draw(st.lists(st.sampled_from(MAX_MUTATIONS), max_size=2,
                                     unique=True) if draw(st.booleans()) else st.just([])))
    if not use_out:  # the function allocates grad_input itself
        mutations = [m for m in mutations if not m.startswith("gi_")]
    expect, typeerror_ok, untouched_ok = "ok", False, False
    for m in mutations:
        te = False
        if m in ("idx_out_of_range", "idx_negative") and (
                np.size(ind) == 0 or np.asarray(ind).dtype not in (np.int32, np.int64)):
            continue   # no index to corrupt, or a dtype already rejected (idx_dtype)
        if m == "idx_out_of_range":
            ind = np.array(ind, order="C")   # reshape(-1) below is a view of it
            ind.reshape(-1)[draw(st.integers(0, ind.size - 1))] = draw(st.sampled_from(
                [H * W, H * W + 1, 2**31 - 1] + ([2**40, 2**63 - 1] if idt == np.int64 else [])))
        elif m == "idx_negative":
            ind = np.array(ind, order="C")   # reshape(-1) below is a view of it
            ind.reshape(-1)[-1] = draw(st.sampled_from([-1, -H * W, -2**31]))
        elif m == "idx_dtype":
            ind = np.array(ind).astype(draw(st.sampled_from(
                [np.int8, np.int16, np.uint32, np.uint64, np.float32, ">i4", ">i8", np.bool_,
                 object])))
        elif m == "idx_shape":
            ind = np.zeros(gs[:-1] + (gs[-1] + 1,), idt)
        elif m == "idx_layout":  # benign: any strides
            if "gi_alias_idx" in mutations:   # a copy would end the aliasing
                continue
            layouts = IN_LAYOUTS
            if {"idx_out_of_range", "idx_negative"} & set(mutations):
                # a broadcast repeats the first batch element's indices: the bad one goes
                layouts = [lay for lay in IN_LAYOUTS if lay != "broadcast"]
            ind = _layout(np.array(ind), draw(st.sampled_from(layouts)), rng)
            continue
        elif m == "go_dtype_invalid":
            go = _values(gs, draw(st.sampled_from(INVALID_DTYPES)), rng)
        elif m == "go_dtype_other":  # x (an array here) or grad_input has the old dtype
            x_kind = "array"
            go = _values(gs, draw(st.sampled_from([d for d in VALID_DTYPES if d != dtype])),
                         rng)
        elif m == "gi_dtype_invalid":
            gi = np.zeros(xs, draw(st.sampled_from(INVALID_DTYPES)))
        elif m == "go_rank":
            go = go[None] if go.ndim == 3 or not go.shape[0] or draw(st.booleans()) \
                else go[0]
        elif m == "go_channels":
            shp = list(go.shape); shp[-3] += 1
            go = _values(tuple(shp), dtype, rng)
            ind = np.zeros(tuple(shp), idt)
        elif m == "gi_shape":
            shp = list(gi.shape); shp[draw(st.integers(0, len(shp) - 1))] += 1
            gi = np.zeros(tuple(shp), dtype)
        elif m == "gi_readonly":
            gi = _layout(gi, "readonly", rng)
        elif m == "gi_zero_stride":
            big = [a for a, n in enumerate(gi.shape) if n > 1]
            if not big or not gi.size:   # (an empty grad_input has no element to overlap)
                continue
            strides = list(gi.strides); strides[draw(st.sampled_from(big))] = 0
            gi = np.lib.stride_tricks.as_strided(gi, gi.shape, strides, writeable=True)
        elif m == "gi_alias_go":
            if go.dtype != dtype:   # go_dtype_*: already invalid, and kept so
                continue
            if _replaces_bad_gi(m, mutations):
                continue
            buf = np.zeros(max(go.size, int(np.prod(xs))) + 1, dtype)
            gi = buf[:int(np.prod(xs))].reshape(xs)
            g2 = buf[1:1 + go.size].reshape(go.shape)
            g2[...] = go
            go = g2
            if not np.shares_memory(gi, go):   # one element each: side by side, no overlap
                continue
        elif m == "gi_alias_idx":
            if np.asarray(ind).dtype not in (np.int32, np.int64):
                continue   # idx_dtype: already invalid, and kept so
            if _replaces_bad_gi(m, mutations):
                continue
            if np.dtype(idt).itemsize != dtype.itemsize:
                idt = {2: np.int32, 4: np.int32, 8: np.int64}[dtype.itemsize]
                if dtype.itemsize == 2:
                    continue
            ind = np.asarray(ind)
            buf = np.zeros(max(ind.size, int(np.prod(xs))) + 1, idt)
            gi = buf[:int(np.prod(xs))].view(dtype).reshape(xs)
            i2 = buf[1:1 + ind.size].reshape(ind.shape)
            i2[...] = ind   # the values as they are (idx_out_of_range: still out of range)
            ind = i2
            if not np.shares_memory(gi, ind):   # one element each: side by side
                continue
        elif m == "zero_lead":  # zero-size N or C: accepted, nothing to do
            ax = draw(st.integers(0, len(lead) - 1))
            xs = xs[:ax] + (0,) + xs[ax + 1:]
            gs = gs[:ax] + (0,) + gs[ax + 1:]
            go, ind, gi = _values(gs, dtype, rng), np.zeros(gs, idt), np.zeros(xs, dtype)
            continue
        elif m == "zero_out":  # zero-size H_out/W_out: accepted; grad_input all zero
            ax = draw(st.sampled_from([-1, -2]))
            gs = gs[:len(gs) + ax] + (0,) + gs[len(gs) + ax + 1:]
            go, ind = _values(gs, dtype, rng), np.zeros(gs, idt)
            untouched_ok = True  # with a given grad_input; a new one must be all zero
            continue
        elif m == "zero_plane":  # H or W = 0 with grad_output values: every index invalid
            ax = draw(st.sampled_from([-1, -2]))
            xs = xs[:len(xs) + ax] + (0,) + xs[len(xs) + ax + 1:]
            gi = np.zeros(xs, dtype)
            if not np.size(go):   # no index at all (zero_lead, zero_out): nothing invalid
                continue
        elif m == "threads_bad":
            if layer == "aclnn":   # the aclnn entry points take no thread count
                continue
            threads = draw(st.sampled_from([0, -5, 2.0, "1", True])); te = True
        elif m == "go_none":
            go = None
        elif m == "x_none":
            x_kind = "none"
        elif m == "gi_none":
            if layer == "func":
                continue
            gi = None
        elif m == "idx_none":
            ind = None
        elif m == "idx_list":  # converted with np.asarray: int64, benign
            if len(mutations) == 1:
                ind = np.array(ind).tolist()
            continue
        elif m == "idx_float":
            ind = np.array(ind).astype(np.float64)
        expect = "error"
        typeerror_ok = typeerror_ok or te
    if x_kind == "shape":
        x = tuple(xs)
    elif x_kind == "list":
        x = list(xs)
    elif x_kind == "array":
        x = _values(xs, dtype, rng)
    else:
        x = None
    out = gi if use_out else None

    def ref_fn():
        g = go.astype(np.float64)
        return (ref_adaptive_max_pool2d_backward(g, xs, np.asarray(ind)),
                ref_adaptive_max_pool2d_backward(np.abs(g), xs, np.asarray(ind)))

    call = run_layer(layer, pg.AdaptiveMaxPool2dBackward, pg.adaptive_max_pool2d_backward,
                     (go, x, ind), {}, (go, x, ind, out), out, threads, draw(ws_st),
                     draw(st.booleans()) and draw(st.booleans()))
    check_outcome(call, expect, ref_fn, dtype, [go, x, ind], out, typeerror_ok,
                  untouched_ok and out is not None)


# ----------------------------------------------------------------------------- workspaces

_WS_SCRIPT = textwrap.dedent("""
    import sys, numpy as np, ml_dtypes, pool_grad as pg
    from pool_grad import aclnn
    kind = sys.argv[1]
    go = np.random.default_rng(0).random((1, 2, 4, 4)).astype(np.float32)
    gi = np.zeros((1, 2, 8, 8), np.float32)
    size, ex = aclnn.aclnnAvgPool2dBackwardGetWorkspaceSize(go, gi, [2, 2], [2, 2], [0, 0],
                                                             False, True, 0, 0, gi)
    n = size + 64
    ws = {
        "object": lambda: np.zeros(n, object),
        "bfloat16": lambda: np.zeros(n, ml_dtypes.bfloat16),
        "structured": lambda: np.zeros(n, "f8,f8"),
        "complex": lambda: np.zeros(n, np.complex128),
        "datetime": lambda: np.zeros(n, "M8[s]"),
        "unicode": lambda: np.zeros(n, "U2"),
        "readonly": lambda: bytes(n),
        "strided": lambda: np.zeros(2 * n, np.uint8)[::2],
        "too_small": lambda: np.zeros(max(size - 1, 0), np.uint8),
        "2d": lambda: np.zeros((n, 2), np.uint8),
        "fortran2d": lambda: np.zeros((n, 2), np.uint8, order="F"),
        "int": lambda: 5,
        "str": lambda: "x" * n,
        "list": lambda: [0] * n,
        "memoryview": lambda: memoryview(bytearray(n)),
    }[kind]()
    try:
        aclnn.aclnnAvgPool2dBackward(ws, size, ex, None)
        ok = True
    except pg.AclnnError as exc:
        ok = False
    except TypeError as exc:
        ok = False
    del ws
    import gc; gc.collect()
    if ok:
        want = go.repeat(2, 2).repeat(2, 3) / 4
        assert np.allclose(gi, want), "wrong result"
    print("DONE", ok)
""")


@pytest.mark.parametrize("kind", ["object", "bfloat16", "structured", "complex", "datetime",
                                  "unicode", "readonly", "strided", "too_small", "2d",
                                  "fortran2d", "int", "str", "list", "memoryview"])
def test_hostile_workspace_never_crashes(kind):
    """Any object as the workspace: a clear error or a correct result, in a subprocess so
    that a crash (a float scratch written over an object array's pointers) is caught."""
    proc = subprocess.run([sys.executable, "-c", _WS_SCRIPT, kind], capture_output=True,
                          text=True, timeout=60, **child_kwargs())
    assert proc.returncode == 0 and "DONE" in proc.stdout, (
        f"workspace {kind!r}: rc={proc.returncode}\n{proc.stdout}\n{proc.stderr[-2000:]}")


@pytest.mark.parametrize("target", ["grad_input", "grad_output"])
def test_workspace_overlapping_an_argument(target):
    """A workspace that is grad_input's or grad_output's own memory: the kernels' scratch
    would be written over the data being read or produced.  A clear error, or (if the
    library copes) the correct result with grad_output unchanged -- never a silently wrong
    answer."""
    rng = np.random.default_rng(1)
    buf_go = np.zeros(4096, np.float32)
    go = buf_go[:32].reshape(1, 2, 4, 4)
    go[...] = rng.random((1, 2, 4, 4))
    go_before = go.copy()
    buf_gi = np.zeros(4096, np.float32)
    gi = buf_gi[:128].reshape(1, 2, 8, 8)
    op = pg.AvgPool2dBackward(go, gi.shape, 2, 2, 0, False, True, 0, 0, gi)
    ws = (buf_gi if target == "grad_input" else buf_go).view(np.uint8)
    assert ws.nbytes >= op.workspace_size
    try:
        op.execute(workspace=ws)
    except pg.AclnnError:
        return
    want = ref_avg_pool2d_backward(go_before, gi.shape, (2, 2), (2, 2), (0, 0), False, True, 0)
    assert np.array_equal(go, go_before), "grad_output was overwritten by the workspace"
    np.testing.assert_allclose(gi, want, rtol=1e-6)


@pytest.mark.parametrize("value", [{2: 2}, {3, 2}, frozenset([2]), b"\x02\x02",
                                   bytearray(b"\x02"), iter([2, 2]), "22"],
                         ids=["dict", "set", "frozenset", "bytes", "bytearray", "iterator",
                              "str"])
@pytest.mark.parametrize("param", ["kernel_size", "stride", "padding"])
def test_unordered_or_byte_containers_rejected(param, value):
    """kernel_size/stride/padding are an int or a sequence of ints (SPEC section 1.1): a
    dict, a set (no order: {3, 2} is not (3, 2)), bytes or an iterator is a wrong type --
    a clear error, never silently read as a kernel.  grad_output has the size that reading
    the container as list(value) would give, so only the type check can reject it."""
    args = dict(kernel_size=6 if param == "padding" else 2, stride=2, padding=0)
    try:
        as_list = [int(v) for v in list(iter(value) if not isinstance(value, type(iter([])))
                                        else [2, 2])]
    except ValueError:
        as_list = [2]
    pair = (as_list * 2)[:2] if len(as_list) == 1 else as_list
    kp = {k: (v, v) for k, v in args.items()}
    kp[param] = tuple(pair)
    outs = [ref_avg_pool2d_output_size(12, kp["kernel_size"][a], kp["stride"][a],
                                       kp["padding"][a], False) for a in range(2)]
    go = np.ones((1, 1) + tuple(max(o, 1) for o in outs), np.float32)
    args[param] = value
    with pytest.raises((pg.AclnnError, TypeError)):
        pg.avg_pool2d_backward(go, (1, 1, 12, 12), **args)


MANY_LAYOUTS = ["c", "cl", "cl", "f", "neg", "perm", "step"]


def _many_layout(arr, layout, rng):
    """_layout, and "cl": channels-last (C innermost in memory)."""
    if layout != "cl":
        return _layout(arr, layout, rng)
    order = (0,) + tuple(range(2, arr.ndim)) + (1,)
    return np.ascontiguousarray(arr.transpose(order)).transpose(np.argsort(order))


@fuzz_settings(60)
@given(data=st.data())
def test_fuzz_many_channels(data):
    """Valid calls of every operator with 8 to 70 channels and small planes (the plane
    lanes, the one-row planes and the channels-last-into-NCHW paths start at 8 channels):
    the reference's values in any layout, the same bits on 1 and 2 threads."""
    draw = data.draw
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    dtype = draw(st.sampled_from(VALID_DTYPES))
    n, c = draw(st.integers(1, 2)), draw(st.integers(8, 70))
    op = draw(st.sampled_from(["avg", "adaptive", "max"]))
    if op == "avg":
        h, w = draw(st.integers(2, 18)), draw(st.integers(2, 34))
        k = (draw(st.integers(1, min(h, 4))), draw(st.integers(1, min(w, 4))))
        s = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
        p = (draw(st.integers(0, k[0] // 2)), draw(st.integers(0, k[1] // 2)))
        ceil, cip = draw(st.booleans()), draw(st.booleans())
        div = draw(st.sampled_from([0, 0, 3, -2]))
        xs = (n, c, h, w)
        gs = (n, c) + tuple(ref_avg_pool2d_output_size(xs[2 + a], k[a], s[a], p[a], ceil)
                            for a in range(2))
        go = _values(gs, dtype, rng)
        want = ref_avg_pool2d_backward(go, xs, k, s, p, ceil, cip, div)

        def call(g, out, nt):
            return pg.avg_pool2d_backward(g, xs, k, s, p, ceil_mode=ceil,
                                          count_include_pad=cip, divisor_override=div,
                                          out=out, n_threads=nt)
    elif op == "adaptive":
        xs = (n, c, draw(st.integers(1, 5)), draw(st.integers(1, 16)), draw(st.integers(1, 34)))
        gs = (n, c, draw(st.integers(1, 4)), draw(st.integers(1, 7)), draw(st.integers(1, 9)))
        go = _values(gs, dtype, rng)
        want = ref_adaptive_avg_pool3d_backward(go, xs)

        def call(g, out, nt):
            return pg.adaptive_avg_pool3d_backward(g, xs, out=out, n_threads=nt)
    else:
        xs = (n, c, draw(st.integers(2, 20)), draw(st.integers(2, 20)))
        x = rng.standard_normal(xs).astype(np.float32)
        _, idx = pg.adaptive_max_pool2d(x, (draw(st.integers(1, xs[2])),
                                            draw(st.integers(1, xs[3]))), return_indices=True)
        go = _values(idx.shape, dtype, rng)
        want = ref_adaptive_max_pool2d_backward(go, xs, idx)
        idx = _many_layout(idx, draw(st.sampled_from(MANY_LAYOUTS)), rng)

        def call(g, out, nt):
            return pg.adaptive_max_pool2d_backward(g, xs, idx, out=out, n_threads=nt)
    g = _many_layout(go, draw(st.sampled_from(MANY_LAYOUTS)), rng)
    out_layout = draw(st.sampled_from(MANY_LAYOUTS + [None]))
    bits = []
    for nt in (1, 2):
        out = (None if out_layout is None
               else _many_layout(np.full(xs, 7, dtype), out_layout, rng))
        got = call(g, out, nt)
        with np.errstate(invalid="ignore", over="ignore"):
            np.testing.assert_allclose(got.astype(np.float64), want, *tolerance(dtype))
        bits.append(np.ascontiguousarray(got).view(np.uint8))
    assert np.array_equal(bits[0], bits[1])


# ------------------------------------------------------------------ SPEC section 6

from reference import (ref_adaptive_avg_backward, ref_avg_pool_backward,  # noqa: E402
                       ref_max_backward, ref_pool_output_size, tolerance as _tol)


def _family_call(kind, n, layer, go, xs, ind, gi, prm, threads):
    """One call of a section-6 operator through a layer (func, op or aclnn)."""
    k, s, p, d, ceil = prm.get("k"), prm.get("s"), prm.get("p"), prm.get("d"), prm.get("ceil")
    if layer == "func":
        if kind == "avg":
            return pg.avg_pool3d_backward(go, xs, k, s, p, ceil_mode=ceil, out=gi,
                                          count_include_pad=prm["cip"],
                                          divisor_override=prm["div"], n_threads=threads)
        if kind == "aavg":
            return pg.adaptive_avg_pool2d_backward(go, xs, out=gi, n_threads=threads)
        if kind == "amax":
            return pg.adaptive_max_pool3d_backward(go, xs, ind, out=gi, n_threads=threads)
        fn = (pg.max_pool2d_with_indices_backward if n == 2
              else pg.max_pool3d_with_argmax_backward)
        return fn(go, xs, ind, k, s, p, d, ceil_mode=ceil, out=gi, n_threads=threads)
    if kind == "avg":
        args = ("AvgPool3dBackward", go, xs, k, s, p, ceil, prm["cip"], prm["div"], gi)
    elif kind == "aavg":
        args = ("AdaptiveAvgPool2dBackward", go, xs, gi)
    elif kind == "amax":
        args = ("AdaptiveMaxPool3dBackward", go, xs, ind, gi)
    else:
        name = "MaxPool2dWithIndicesBackward" if n == 2 else "MaxPool3dWithArgmaxBackward"
        args = (name, go, xs, ind, k, s, p, d, ceil, gi)
    if layer == "op":
        op = getattr(pg, args[0])(*args[1:])
        op.execute(n_threads=threads)
        return gi
    size, ex = getattr(aclnn, f"aclnn{args[0]}GetWorkspaceSize")(*args[1:])
    getattr(aclnn, f"aclnn{args[0]}")(np.empty(size, np.uint8), size, ex, None)
    return gi


@fuzz_settings(150)
@given(data=st.data())
def test_fuzz_family(data):
    """Random valid calls of the five section-6 operators in every layer, dtype and layout
    equal the float64 reference; an index corrupted out of its volume raises 161002 and
    leaves grad_input untouched."""
    draw = data.draw
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    kind, n = draw(st.sampled_from([("avg", 3), ("aavg", 2), ("amax", 3), ("max", 2),
                                    ("max", 3)]))
    dtype = draw(st.sampled_from(VALID_DTYPES))
    lead = (draw(st.integers(1, 2)), draw(st.integers(1, 3)))
    if draw(st.booleans()):
        lead = lead[1:]
    sizes = tuple(draw(st.integers(1, 7)) for _ in range(n))
    xs = lead + sizes
    prm = {}
    if kind in ("avg", "max"):
        k = tuple(draw(st.integers(1, 4)) for _ in range(n))
        s = tuple(draw(st.integers(1, 3)) for _ in range(n))
        p = tuple(draw(st.integers(0, kk // 2)) for kk in k)
        d = tuple(draw(st.integers(1, 2)) for _ in range(n)) if kind == "max" and n == 2 \
            else (1,) * n
        ceil = draw(st.booleans())
        outs = tuple(ref_pool_output_size(i, *a, ceil) for i, *a in zip(sizes, k, s, p, d))
        assume(min(outs) >= 1)
        prm = dict(k=k, s=s, p=p, d=d, ceil=ceil, cip=draw(st.booleans()),
                   div=draw(st.sampled_from([0, 0, 2, -3])))
    else:
        outs = tuple(draw(st.integers(1, 5)) for _ in range(n))
    gs = lead + outs
    go = _layout(_values(gs, dtype, rng), draw(st.sampled_from(IN_LAYOUTS)), rng)
    ind = None
    if kind in ("amax", "max"):
        ind = rng.integers(0, int(np.prod(sizes)), size=gs).astype(
            draw(st.sampled_from([np.int32, np.int64])))
        ind = _layout(ind, draw(st.sampled_from(IN_LAYOUTS)), rng)
    gi = _layout(np.full(xs, 7, dtype), draw(st.sampled_from(OUT_LAYOUTS)), rng)
    layer = draw(layer_st)
    threads = draw(threads_st)
    if ind is not None and draw(st.booleans()):
        ind = np.array(ind, order="C")   # reshape(-1) below is a view of it
        ind.reshape(-1)[draw(st.integers(0, ind.size - 1))] = draw(st.sampled_from(
            [-1, int(np.prod(sizes)), 2**31 - 1]))
        before = gi.copy()
        with pytest.raises(pg.ParamInvalidError) as e:
            _family_call(kind, n, layer, go, xs, ind, gi, prm, threads)
        assert e.value.code == 161002 and "indices" in str(e.value)
        assert np.ascontiguousarray(gi).tobytes() == np.ascontiguousarray(before).tobytes()
        return
    got = _family_call(kind, n, layer, go, xs, ind, gi, prm, threads)
    if kind == "avg":
        want = ref_avg_pool_backward(go, xs, n, prm["k"], prm["s"], prm["p"], prm["ceil"],
                                     prm["cip"], prm["div"])
    elif kind == "aavg":
        want = ref_adaptive_avg_backward(go, xs, n)
    else:
        want = ref_max_backward(go, xs, ind, n)
    rtol, atol = _tol(dtype)
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=rtol, atol=atol * 4)

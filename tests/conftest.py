"""Shared fixtures and helpers for the pool_grad test suite.

- DTYPES: the four dtypes every operator accepts (SPEC §3).
- make_array(shape, dtype, rng, layout): arrays with given values in every memory layout the
  operators must accept (SPEC §2.1: "any strides").
- torch: fixture that SKIPS a test when PyTorch is not importable (it is an optional oracle).
- A hypothesis profile "ci" (derandomized, bounded) loaded by default.
"""

import os
import sys

import ml_dtypes
import numpy as np
import pytest

# Make `import reference` / `from conftest import ...` work whatever pytest's import mode.
_HERE = os.path.dirname(os.path.abspath(__file__))
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)

try:
    from hypothesis import settings

    settings.register_profile("ci", derandomize=True, max_examples=50, deadline=None,
                              database=None, print_blob=True)
    settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
except ImportError:  # pragma: no cover
    pass


BFLOAT16 = np.dtype(ml_dtypes.bfloat16)
DTYPES = [np.float32, np.float64, np.float16, ml_dtypes.bfloat16]
DTYPE_IDS = ["float32", "float64", "float16", "bfloat16"]

#: layouts valid for any array, and those valid for writeable outputs (broadcast is read-only)
LAYOUTS = ["c", "f", "channels_last", "sliced", "negative", "broadcast"]
OUT_LAYOUTS = ["c", "f", "channels_last", "sliced", "negative"]


def random_values(shape, dtype, rng, low=-1.0, high=1.0):
    """C-contiguous array of `dtype` with values drawn from uniform(low, high)."""
    return rng.uniform(low, high, size=shape).astype(dtype)


def _channel_axis(ndim):
    # 3-D (C,H,W) / 4-D (C,D,H,W) unbatched forms have C first; batched forms have it at 1.
    return 1 if ndim >= 4 else 0


def as_layout(values, layout):
    """Return an array equal to `values` (same shape, dtype and values) stored in `layout`.

    "c": C-contiguous; "f": Fortran order; "channels_last": channel axis innermost in memory
    (NHWC for 4-D, NDHWC for 5-D, HWC for 3-D) with the logical NC.. shape; "sliced": every
    other element of a bigger buffer, starting at offset 1 on each axis; "negative": negative
    strides on every axis; "broadcast": zero stride on axis 0 (read-only; the values along
    axis 0 are replaced by those of index 0, so the result equals `values` only when
    values.shape[0] == 1 — compare against the returned array, not `values`).
    """
    values = np.ascontiguousarray(values)
    shape, ndim = values.shape, values.ndim
    if layout == "c":
        return values.copy()
    if layout == "f":
        out = np.asfortranarray(values)
        assert out.flags.f_contiguous
        return out
    if layout == "channels_last":
        ax = _channel_axis(ndim)
        order = [a for a in range(ndim) if a != ax] + [ax]  # memory order, channel last
        store = np.ascontiguousarray(values.transpose(order))
        inverse = np.argsort(order)
        out = store.transpose(inverse)
        assert out.shape == shape
        return out
    if layout == "sliced":
        big = np.zeros(tuple(2 * s + 1 for s in shape), dtype=values.dtype)
        out = big[tuple(slice(1, 1 + 2 * s, 2) for s in shape)]
        out[...] = values
        return out
    if layout == "negative":
        rev = tuple(slice(None, None, -1) for _ in shape)
        out = np.ascontiguousarray(values[rev])[rev]
        assert all(st < 0 for st, s in zip(out.strides, shape) if s > 1)
        return out
    if layout == "broadcast":
        out = np.broadcast_to(values[:1], shape)
        assert out.strides[0] == 0
        return out
    raise ValueError(f"unknown layout {layout!r}")


def make_array(shape, dtype, rng, layout="c", low=-1.0, high=1.0):
    """Random uniform(low, high) array of `dtype` and logical `shape` stored in `layout`."""
    return as_layout(random_values(shape, dtype, rng, low, high), layout)


def empty_out(shape, dtype, layout):
    """A writeable, uninitialised-looking (filled with 7) output array in `layout`."""
    return as_layout(np.full(shape, 7, dtype=dtype), layout)


def error_message_names(excinfo, *names):
    """True if the exception message mentions one of `names`, compared without case and
    underscores (so grad_input matches gradInput).  "x" is matched as a word."""
    import re

    msg = str(excinfo.value)
    flat = msg.lower().replace("_", "")
    for name in names:
        if name == "x":
            if re.search(r"(?<![A-Za-z0-9_])x(?![A-Za-z0-9_])", msg):
                return True
        elif name.lower().replace("_", "") in flat:
            return True
    return False


@pytest.fixture
def rng(request):
    """Per-test deterministic generator (seeded from the test id)."""
    import zlib

    return np.random.default_rng(zlib.crc32(request.node.nodeid.encode()))


@pytest.fixture
def torch():
    """PyTorch if importable; otherwise the test is skipped, never failed."""
    return pytest.importorskip("torch")


@pytest.fixture
def forms_off():
    """pool_grad._plan.set_forms_off (turn off exactly the named forms in plans made from
    then on); the forms are as they were again after the test."""
    from pool_grad import _plan

    saved = _plan._off
    yield _plan.set_forms_off
    _plan.set_forms_off(saved)


@pytest.fixture
def restore_num_threads():
    """Restore pool_grad's default thread count after a test that changes it."""
    import pool_grad

    before = pool_grad.get_num_threads()
    yield
    pool_grad.set_num_threads(before)


def child_kwargs():
    """cwd and env for a child Python that must import the same pool_grad as the tests: not
    the uncompiled source package that a cwd inside the checkout would put first."""
    import os
    import tempfile
    env = dict(os.environ)
    if env.get("PYTHONPATH"):
        env["PYTHONPATH"] = os.pathsep.join(os.path.abspath(p) for p in
                                            env["PYTHONPATH"].split(os.pathsep) if p)
    return {"cwd": tempfile.gettempdir(), "env": env}

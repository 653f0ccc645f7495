"""Planning, shared by all operators: per-axis window tables, the 6-D strided views the
kernels walk, and the blocking of the work into items.

Every operator here pools over up to three spatial axes (D, H, W; a 2-D operator has
D = 1).  Along one axis a pooling is fully described by, for each output index o, the
clipped input window [start[o], end[o]) and a divisor factor; the divisor of a window is
the product of its axes' factors (or divisor_override), which is what makes the average
gradients separable.  For the gather form of a gradient, each input index i also needs the
range [lo[i], hi[i]) of output indices whose windows hold it.

The limits below are the rules of which form runs; docs/performance.md ("The measurements
behind the planner's rules") has what each was measured from.
"""
import dataclasses
import functools
import math
import os
import warnings

import numpy as np

from . import _kernels, _threads
from ._errors import invalid
from ._validate import BFLOAT16

# ---------------------------------------------------------------- forms

# Every form a plan may choose besides the plain loops, by name: those of the views and
# the store (ops.py and the functions below), then those of the kernels (gather_choice,
# scatter_choice).  docs/forms.md says what each does and gains.  `forms_off` turns some
# off for a benchmark or a test, and so does POOL_GRAD_FORMS_OFF (comma-separated names;
# "tune" there gives one form per call, no timing of forms over the first calls).  A form
# turned off leaves a call to the next form that its rules allow: the same bits, another
# speed.
FORMS = ("tstore", "tstore_d", "mixed_lanes", "folded", "flat_lanes", "flat_planes",
         "plane", "sliding", "stream", "tune",
         "lanes", "lanes_copy", "crun", "fused64", "single", "pairs", "strips", "narrow",
         "window", "lwindow", "lmixed")
_off = frozenset()


def on(name):
    """Whether the form ``name`` (one of FORMS) may be planned."""
    return name not in _off


def set_forms_off(names):
    """Turn off exactly the named forms in plans made from now on (not thread-safe: for
    benchmarks and tests; cached one-shot plans keep their forms)."""
    global _off
    names = frozenset(names)
    unknown = sorted(names - set(FORMS))
    if unknown:
        raise ValueError(f"pool_grad: unknown forms {unknown}; the forms are {FORMS}")
    _off = names


class forms_off:
    """``with forms_off("strips", "tune"):`` plans made in the block leave those forms out
    (and only those)."""

    def __init__(self, *names):
        self.names = names

    def __enter__(self):
        self.saved = _off
        set_forms_off(self.names)
        return self

    def __exit__(self, *exc):
        set_forms_off(self.saved)


def _env_forms_off():
    names = {n for n in os.environ.get("POOL_GRAD_FORMS_OFF", "").replace(" ", "").split(",")
             if n}
    if names - set(FORMS):
        warnings.warn(f"pool_grad: POOL_GRAD_FORMS_OFF names unknown forms "
                      f"{sorted(names - set(FORMS))}, left out; the forms are {FORMS}")
    return names & set(FORMS)


set_forms_off(_env_forms_off())


@dataclasses.dataclass(frozen=True)
class Plan:
    """One call's plan as its kernel runs it (``op.plan``).

    kernel: AvgGatherKernel (the separable gather) or MaxScatterKernel (the scatter);
    item: the kernel's form (the gather's ``"rows"``, ``"single"``, ``"lanes"``,
    ``"plane"``, ...; the scatter's ``"scatter"``, ``"window"``, ...; docs/forms.md), as
    gather_choice or scatter_choice chose it; store_forms: the forms planned, the rule's first,
    the others timed beside it over the first calls; kept: the one in use ("tuning" while
    they are timed); views: (array, shape, strides in elements) of the (N, C, D, H, W, L)
    views the kernel walks; items: work items; threads: the count planned for;
    scratch_bytes: per thread; workspace_size: what execute needs; forms_off: the forms
    turned off when it was planned.
    """
    operator: str
    kernel: str
    item: str
    store_forms: tuple
    kept: str
    views: tuple
    items: int
    threads: int
    scratch_bytes: int
    shared_bytes: int
    workspace_size: int
    forms_off: tuple = dataclasses.field(compare=False)   # equal plans: equal choices

    @classmethod
    def of(cls, op):
        k = op._kernel
        views = tuple((name, tuple(a.shape), tuple(st // a.itemsize for st in a.strides))
                      for name, a in getattr(op, "_views", ()))
        if k is None:
            return cls(type(op).__name__, "", "", (), "", views, 0, op._threads, 0, 0, 0,
                       tuple(sorted(_off)))
        return cls(type(op).__name__, type(k).__name__, k.choice.item,
                   (k.form,) + tuple(a.form for a in k.alternates), k.store_form, views,
                   k.n_items, op._threads, k.scratch_bytes, k.shared_bytes,
                   op.workspace_size, tuple(sorted(_off)))

    def __str__(self):
        lines = [f"{self.operator}: {self.kernel or 'no kernel (nothing to compute)'}"
                 + (f", item {self.item!r}" if self.item else "")]
        if self.kernel:
            lines.append(f"  store forms {', '.join(self.store_forms)} (in use: "
                         f"{self.kept})")
        lines += [f"  {name}: shape {shape}, strides {strides}"
                  for name, shape, strides in self.views]
        lines.append(f"  {self.items} items, planned for {self.threads} threads, scratch "
                     f"{self.scratch_bytes} B a thread + {self.shared_bytes} B shared, "
                     f"workspace {self.workspace_size} B")
        if self.forms_off:
            lines.append(f"  forms off: {', '.join(self.forms_off)}")
        return "\n".join(lines)


# storage kinds, as pyx/_kernels.pyx numbers them
KINDS = {np.dtype(np.float32): 0, np.dtype(np.float64): 1, np.dtype(np.float16): 2,
         BFLOAT16: 3}

# per-thread scratch a work item may use for its expanded rows (elements); sized to stay
# in a core's L2 cache
SCRATCH_ELEMS = 1 << 17
# blocks that fit that budget only by expanding their grad_output rows more than
# SCRATCH_REEXPAND times on average (the rows a block shares with its neighbours: wide
# channels-last rows under windows of many rows) get up to SCRATCH_GROW times the budget:
# E rows past the L2 cost less than expanding them again
SCRATCH_REEXPAND = 1.25
SCRATCH_GROW = 4
# ... and twice that again, up to SCRATCH_GROW_MAX times, where the blocks still expand more
# than SCRATCH_REEXPAND times (blocks that no longer do gain nothing from more: the same
# time in twice the workspace)
SCRATCH_GROW_MAX = 8
# a parallel call wants at least 4 work items per core (and MIN_ITEMS) to balance threads,
# but blocks are not split below MIN_ITEM_VALUES values (a smaller call runs on one thread:
# C_GRAIN_BYTES).  More items cost more where blocks split a plane's rows: each block
# expands again the grad_output rows it shares with its neighbours
MIN_ITEMS = 8
MIN_ITEM_VALUES = 4096


# ---------------------------------------------------------------- shape arithmetic

def avg_output_size(in_size, k, s, p, ceil_mode, d=1):
    """Output length of a pooling along one axis (SPEC sections 1.1 and 6.4; d: the
    dilation, 1 for average pooling)."""
    out = (in_size + 2 * p - d * (k - 1) - 1 + ((s - 1) if ceil_mode else 0)) // s + 1
    if ceil_mode and (out - 1) * s >= in_size + p:
        out -= 1
    return out


def avg_output_sizes(in_sizes, k, s, p, ceil_mode, dilation=None):
    """The output size of a pooling over the last len(in_sizes) axes (H, W or D, H, W),
    checked to be >= 1 where the input is not empty."""
    n = len(in_sizes)
    dil = dilation or (1,) * n
    outs = []
    for axis in range(n):
        out = avg_output_size(in_sizes[axis], k[axis], s[axis], p[axis], ceil_mode,
                              dil[axis])
        if in_sizes[axis] == 0:
            out = max(out, 0)  # zero-size input: nothing to pool, no size rule
        elif out < 1:
            more = f", dilation {dil[axis]}" if dilation else ""
            raise invalid("kernel_size", f"gives an output size < 1 along "
                          f"{'DHW'[3 - n + axis]} (input {in_sizes[axis]}, kernel {k[axis]}, "
                          f"stride {s[axis]}, padding {p[axis]}{more})", out)
        outs.append(out)
    return tuple(outs)


def max_windows(in_size, out, k, s, p, d):
    """Max pooling's windows along one axis, as PyTorch walks them: [start, end) in steps
    of the dilation d, start moved past the padding by whole steps."""
    o = np.arange(out, dtype=np.int64)
    start = o * s - p
    end = np.minimum(start + (k - 1) * d + 1, in_size)
    start = np.where(start < 0, start + (-start + d - 1) // d * d, start)
    return start, end


def avg_windows(in_size, out, k, s, p, count_include_pad):
    """Clipped windows and divisor factors of average pooling along one axis.

    Parameters near the int64 limits (which aclnn accepts) are computed in exact Python
    integers: the unclipped window bounds can then exceed int64, though the clipped ones
    and the output length (at most in + 1 then) stay small."""
    exact = max(abs(k), abs(s), abs(p), in_size, out) >= 2**40
    o = np.arange(out, dtype=object if exact else np.int64)
    start = o * s - p
    end = np.minimum(start + k, in_size + p)
    pool = end - start
    start = np.maximum(start, 0)
    end = np.minimum(end, in_size)
    factor = pool if count_include_pad else end - start
    if exact:
        return start.astype(np.int64), end.astype(np.int64), factor.astype(np.float64)
    return start, end, factor


def adaptive_windows(in_size, out):
    """Adaptive windows along one axis: [floor(o*in/out), ceil((o+1)*in/out))."""
    o = np.arange(out, dtype=np.int64)
    start = (o * in_size) // out
    end = ((o + 1) * in_size + out - 1) // out
    return start, end, end - start


def cover(start, end, in_size):
    """For each input index i, the output indices [lo, hi) whose window holds i.

    Window starts and ends never decrease with o (true of every pooling here), so the
    windows holding i are those with start <= i (the first hi of them) less those with
    end <= i (the first lo)."""
    i = np.arange(in_size, dtype=np.int64)
    lo = np.searchsorted(end, i, side="right").astype(np.int64)
    hi = np.searchsorted(start, i, side="right").astype(np.int64)
    return lo, np.maximum(hi, lo)


# the most taps per input column for which the W expansion uses a tap table
MAX_TAPS = 16


def last_level_cache():
    """Size of the CPU's largest cache and how many CPUs share it (Linux sysfs; size 0
    where it cannot be read, and then the CPUs this process may use)."""
    import glob
    best, cpus = 0, 0
    for d in glob.glob("/sys/devices/system/cpu/cpu0/cache/index*"):
        try:
            with open(d + "/size") as f:
                text = f.read().strip().upper()
        except OSError:
            continue
        scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
        digits = text.rstrip("KMG")
        if digits.isdigit() and int(digits) * scale > best:
            best, cpus = int(digits) * scale, _shared_cpus(d)
    return best, cpus or _threads.CPU_COUNT


def _shared_cpus(cache_dir):
    """The number of CPUs in a sysfs cache's shared_cpu_list ("0-15,32-47"), 0 if unread."""
    try:
        with open(cache_dir + "/shared_cpu_list") as f:
            text = f.read().strip()
        count = 0
        for part in text.split(","):
            lo, _, hi = part.partition("-")
            count += int(hi or lo) - int(lo) + 1
        return count
    except (OSError, ValueError):
        return 0


LLC_BYTES, LLC_CPUS = last_level_cache()

# outputs larger than the planned threads' share of the last-level cache (at least 8 MiB)
# are written with streaming (cache-bypassing) stores, on rows of at least
# STREAM_ROW_BYTES, or as whole blocks of rows (streaming_region: the float32 C items and
# float64 register rows through a stage, pg_stream.h; the max-pool scatter's blocks).
# Long rows and blocks of rows gain from streaming where the output is larger than the
# cache, short rows streamed one by one lose; an output within the planned threads' share
# of the cache is written faster through it.  STREAM_BYTES caps the threshold (the tests
# set it to -1 to stream every output).
STREAM_BYTES = max(8 << 20, LLC_BYTES)
STREAM_ROW_BYTES = 4096


def stream_bytes(threads):
    """Outputs larger than this are streamed by a call planned for ``threads`` threads:
    their share of the last-level cache, at least 8 MiB, at most STREAM_BYTES."""
    share = LLC_BYTES * min(threads, LLC_CPUS) // max(1, LLC_CPUS)
    return min(STREAM_BYTES, max(8 << 20, share))


# Outputs larger than this are planned in both store forms, the one stream_bytes implies
# and the other (streamed where it is not, ordinary stores where it is), and the kernel's
# first calls time the two and keep the faster (PlannedKernel.add_alternate): which is
# faster depends on the machine more than any rule here can tell.  None: never (the tests
# and benchmarks/instructions.py, which count one form's instructions).
TUNE_BYTES = 8 << 20

# a limit that no output exceeds: the form with ordinary stores only
NEVER = 1 << 62


def streaming(out6, threads, limit=None):
    """Whether the kernels should write this (6-D view of an) output with streaming stores,
    in a call planned for ``threads`` threads (or where it is larger than ``limit``)."""
    row = out6.shape[4] * out6.shape[5] * out6.itemsize
    limit = stream_bytes(threads) if limit is None else limit
    return out6.nbytes > limit and row >= STREAM_ROW_BYTES and on("stream")


# rows shorter than this are not streamed as blocks either: short rows streamed that way
# lose to ordinary stores
REGION_ROW_BYTES = 256
# ... and this for small planes folded into D whose windows overlap: each item's block of
# rows is then whole planes, one run in memory, which streams well in shorter rows
FOLDED_REGION_ROW_BYTES = 64


def streaming_region(out6, threads, min_row=None, limit=None):
    """Whether a kernel should stream whole blocks of rows (the gather's C items, pg_item.h;
    the max-pool scatter): outputs larger than ``stream_bytes(threads)`` (or ``limit``),
    with rows of at least min_row bytes (default REGION_ROW_BYTES; the scatter, which
    writes a block at once, 0)."""
    row = out6.shape[4] * out6.shape[5] * out6.itemsize
    min_row = REGION_ROW_BYTES if min_row is None else min_row
    limit = stream_bytes(threads) if limit is None else limit
    return out6.nbytes > limit and row >= min_row and on("stream")


# Outputs larger than this are also planned in another shape of the same work where the
# operator has one (store_forms' ``variant``: the average-pool gradient's row form beside
# its float64 stride-1 strips down each plane, pg_item.h's pg_fused1_strips_f64) and timed
# with the store forms: which is faster depends on the machine and on how much of the
# output a core's L2 holds.  None: never.
TUNE_SHAPE_BYTES = 1 << 20


def store_forms(out6, threads, flags, build, variant=None):
    """The kernel of one call, built by ``build(flags(limit))`` in the store form that
    ``stream_bytes(threads)`` implies and, where the output is larger than TUNE_BYTES and
    the other form's flags differ, with that form as its timed alternate; where it is
    larger than TUNE_SHAPE_BYTES, ``variant(f, kernel)`` may add, for each of those forms
    (flags f, its kernel), the same call in another shape of work (a kernel with its
    ``form`` named, or None)."""
    limit = stream_bytes(threads)
    planned = flags(limit)
    kernel = build(planned)
    kernel.form = "stream" if any(planned) else "cache"
    forms = [(planned, kernel)]
    if TUNE_BYTES is not None and out6.nbytes > TUNE_BYTES and on("tune"):
        other = flags(NEVER if any(planned) else TUNE_BYTES)
        if other != planned:
            alt = build(other)
            alt.form = "stream" if any(other) else "cache"
            kernel.add_alternate(alt)
            forms.append((other, alt))
    if (variant is not None and TUNE_SHAPE_BYTES is not None
            and out6.nbytes > TUNE_SHAPE_BYTES and on("tune")):
        for f, k in forms:
            v = variant(f, k)
            if v is not None:
                kernel.add_alternate(v)
    return kernel


def taps(lo, hi, n_out):
    """(W * m) tap table of the W expansion: for column i the output indices lo..hi-1,
    padded with n_out + 1 (a -0.0 slot); an empty cover starts at n_out (a +0.0 slot).
    None where some column has more than MAX_TAPS covering windows."""
    count = hi - lo
    m = int(count.max()) if count.size else 0
    if m > MAX_TAPS or m == 0:
        return None
    t = lo[:, None] + np.arange(m)[None, :]
    t = np.where(np.arange(m)[None, :] < count[:, None], t, n_out + 1)
    t[count == 0, 0] = n_out
    return np.ascontiguousarray(t.reshape(-1), dtype=np.int64)


def item_runs(tp, width, hcover, n_out, poly_free=False):
    """Run tables of the C item (pyx/pg_item.h): where each run of equal taps starts, then
    the width (a tap table of one tap per column only; else None), for each H index how
    many rows from it on have the same covering windows (and, last, how many have them
    moved on by one row each: stride 1 along H), whether a tap reaches the
    sentinel slots after the n_out grad_output columns, the spread tables of 16-bit and of
    float32 rows (spread, or None), and where ``poly_free`` (the row has no polyphase
    interior) the tap spread of rows of several taps a column (tap_spread, or None).
    Float32 rows whose runs average SPREAD32_RUN columns or more keep the runs (a few
    broadcast stores a run)."""
    wrun = None
    if tp is not None and tp.shape[0] == width:
        wrun = np.concatenate(([0], np.flatnonzero(tp[1:] != tp[:-1]) + 1, [width]))
        wrun = np.ascontiguousarray(wrun, dtype=np.int64)
    lo, hi = hcover
    starts = np.concatenate(([0], np.flatnonzero((lo[1:] != lo[:-1]) | (hi[1:] != hi[:-1])) + 1))
    ends = np.append(starts[1:], len(lo))
    hrun = np.ascontiguousarray(np.repeat(ends, ends - starts) - np.arange(len(lo)), np.int64)
    hstep = _step_runs(lo, hi)
    sent = tp is not None and tp.size > 0 and int(tp.max()) >= n_out
    n_narrow = n_out + 2 if sent else n_out
    sp16 = None
    # the narrow item keeps its rounded rows of n_narrow values (and zeros to a multiple
    # of 8, and 8 more) where it keeps rows of the input width
    if ((n_narrow + 7) & ~7) + 8 <= width:
        sp16 = spread(tp, width, n_narrow, 2)
    sp32 = None
    if wrun is not None and width < SPREAD32_RUN * (len(wrun) - 1):
        sp32 = spread(tp, width, n_narrow, 4)
    tsp = tap_spread(tp, width, n_out) if poly_free else None
    return wrun, hrun, sent, sp16, sp32, tsp, hstep


def _step_runs(lo, hi):
    """For each index i, how many indices from i on have the covering range of i moved on
    by one each ([lo[i] + t, hi[i] + t) for index i + t)."""
    n = len(lo)
    same = (lo[1:] == lo[:-1] + 1) & (hi[1:] == hi[:-1] + 1)
    starts = np.concatenate(([0], np.flatnonzero(~same) + 1))
    ends = np.append(starts[1:], n)
    return np.ascontiguousarray(np.repeat(ends, ends - starts) - np.arange(n), np.int64)


# float32 one-tap rows whose runs of equal taps average fewer columns than this are spread
# (pg_spread32_row) rather than stored run by run (pg_runs_f32_avx2)
SPREAD32_RUN = 8


def spread(tp, width, n_narrow, es):
    """The spread of a row of n_narrow values of es bytes (one per grad_output column, then
    the sentinel slots if used) to the input width through a tap table of one tap per
    column (pg_item.h's pg_spread16_row and pg_spread32_row): (table, wide), the table as
    five int64 per block of B columns (B = 16 for 16-bit values, 8 for float32; starting at
    B * i, the last at width - B): the block's base value, then 32 bytes that give each
    column its value counted from the base (16-bit: the two byte indices; float32: an
    int32).  A block takes its values from 8 values at its base, or from 16 where some block
    spans more than 8 (wide); the base is lowered where needed so that no block reads past
    the n_narrow values where there are as many as a block reads (16-bit rows of fewer than
    8 values read on into the slack after them, as they did before there were wide
    blocks).  None where some block spans more than 16 values, the row is narrower than a
    block, or wide or float32 blocks would read past the narrow row."""
    blk = 16 if es == 2 else 8
    if tp is None or tp.shape[0] != width or width < blk:
        return None
    first = np.minimum(np.arange(0, width, blk), width - blk)
    tb = tp[first[:, None] + np.arange(blk)[None, :]]
    lo = tb.min(axis=1)
    span = int((tb.max(axis=1) - lo).max())
    wide = span > 7
    load = 16 if wide else 8
    if span > 15:
        return None
    if n_narrow >= load:
        base = np.minimum(lo, n_narrow - load)
    elif es == 2 and not wide:
        base = lo   # reads past the values into the slack the items keep after them
    else:
        return None
    off = tb - base[:, None]
    table = np.empty((len(first), 5), np.int64)
    table[:, 0] = base
    if es == 2:
        shuf = table[:, 1:].view(np.uint8).reshape(len(first), 16, 2)
        shuf[..., 0] = 2 * off      # byte shuffles within each 16-byte half: columns 8..15
        shuf[..., 1] = 2 * off + 1  # take from the upper copy of the values
    else:
        table[:, 1:].view(np.int32).reshape(len(first), 8)[:] = off
    table = table.reshape(-1)
    table.flags.writeable = False
    return table, wide


def tap_spread(tp, width, n_out):
    """The E-row expansion of a W axis of m >= 2 taps a column (pg_item.h's
    pg_tspread32_row), as m spreads: (table, wide), the table as 5 * m int64 per block of 8
    columns (starting at 8 * i, the last at width - 8), for each tap slot its base value and
    8 int32 offsets from it, as in spread.  A sentinel tap (a +0.0 slot, which only a first
    tap is, or a -0.0 padding slot) has bit 31 of its offset set and is not loaded: the
    first tap's sentinel is +0.0 and a later one adds nothing.  The slots' values come from
    8 values at the base, or 16 (wide) where some slot of some block spans more than 8;
    bases are lowered so that no block reads past the two sentinel slots after the row.
    None where a slot spans more than 16 values, m < 2, or the row is narrower than a
    block."""
    if tp is None or width < 8:
        return None
    m = tp.shape[0] // width
    if m < 2 or n_out + 2 < 8:
        return None
    t = tp.reshape(width, m)
    first = np.minimum(np.arange(0, width, 8), width - 8)
    tb = t[first[:, None] + np.arange(8)[None, :]]          # (blocks, 8, m)
    real = tb < n_out
    big = np.iinfo(np.int64).max
    lo = np.where(real, tb, big).min(axis=1)                 # (blocks, m)
    hi = np.where(real, tb, -1).max(axis=1)
    lo = np.where(hi < 0, 0, lo)
    span = int((hi - lo).max())
    wide = span > 7
    load = 16 if wide else 8
    if span > 15 or n_out + 2 < load:
        return None
    base = np.minimum(lo, n_out + 2 - load)
    off = np.where(real, tb - base[:, None, :], 0).astype(np.int64)
    off = np.where(real, off, off | (1 << 31))
    table = np.empty((len(first), m, 5), np.int64)
    table[..., 0] = base
    table[..., 1:].view(np.uint32).reshape(len(first), m, 8)[:] = (
        off.transpose(0, 2, 1).astype(np.uint32))
    table = table.reshape(-1)
    table.flags.writeable = False
    return table, wide


@functools.lru_cache(maxsize=256)
def window_spread(W, L, Wo, es):
    """The table of the channels-last max-pool gradient's gather form in flat rows
    (pg_scatter.h's pg_fwrite_row), for 2..15 lanes not a multiple of 8: an input row of W
    positions of L lanes (flat column x = w * L + l) takes its values from the output row's
    column (w // kw) * L + l, kw = W // Wo; (table, wide), the table nine int64 per block:
    spread's five, then each column's place w % kw in its window row (int32 for float32,
    uint16 for 16-bit).  None where there is no such form: other lane counts or element
    sizes, windows that do not tile the row, or output rows of fewer than 16 values (a
    block's loads).  Fewer than 16 lanes keep every block's span within 16 values: 16
    columns across two windows span 15, within one window at most L - 1."""
    if not 1 < L < 16 or L % 8 == 0 or es not in (2, 4) or Wo < 1 or W % Wo or Wo * L < 16:
        return None
    kw = W // Wo
    w, lane = np.divmod(np.arange(W * L), L)
    sp = spread((w // kw) * L + lane, W * L, Wo * L, es)
    if sp is None:
        return None
    blk = 16 if es == 2 else 8
    first = np.minimum(np.arange(0, W * L, blk), W * L - blk)
    place = (w % kw)[first[:, None] + np.arange(blk)[None, :]]
    table = np.empty((len(first), 9), np.int64)
    table[:, :5] = sp[0].reshape(-1, 5)
    table[:, 5:].view(np.int32 if es == 4 else np.uint16)[:] = place
    table = table.reshape(-1)
    table.flags.writeable = False
    return table, sp[1]


# the most terms a phase of the polyphase form (pyx/pg_expand.h's PG_POLY_MAX_M)
POLY_MAX_M = 16


def polyphase(lo, hi, period):
    """Interior of the W expansion in polyphase form (pyx/pg_expand.h): (q0, q1, c, m) such
    that for q0 <= q < q1 and r < period, column period*q + r is covered by the output
    columns q + c[r] ... q + c[r] + m[r] - 1.  None where there is no such interior or a
    phase has more than POLY_MAX_M terms."""
    n = len(lo)
    if not period or period < 1 or n < 4 * period:
        return None
    nq = n // period
    shift = (lo[:nq * period].reshape(nq, period) - np.arange(nq)[:, None])
    count = (hi - lo)[:nq * period].reshape(nq, period)
    ref = nq // 2
    c, m = shift[ref], count[ref]
    bad = np.flatnonzero(~np.all((shift == c) & (count == m), axis=1))
    q0 = int(bad[bad < ref].max()) + 1 if np.any(bad < ref) else 0
    q1 = int(bad[bad > ref].min()) if np.any(bad > ref) else nq
    if q1 - q0 < 2 or m.max() > POLY_MAX_M:
        return None
    return q0, q1, np.ascontiguousarray(c, np.int64), np.ascontiguousarray(m, np.int64)


def poly_padded(lo, hi, period, poly, n_out, tp):
    """The polyphase interior (q0, q1) of `poly` widened over the edge columns whose
    covering windows are the interior's pattern cut off by the row's ends, and the slots
    of -0.0 the E-row formers keep on each side of a row for them (pad: the most terms a
    phase less one, at least 2): those columns, read from a grad_output row with -0.0 in
    the pad slots before it and after it, sum the interior's terms with -0.0 for the
    missing ones, which leaves every sum's bits as the tap table's (x + -0.0 and -0.0 + x
    are x, NaN payloads included).  Only for periods 1 and 2 (pyx/pg_item.h's E-row
    formers); not over a column that no window covers (+0.0, not -0.0), and not past the
    row's end where an edge column left over takes the +0.0 slot (the formers put -0.0
    there).  (q0, q1, pad)."""
    if poly is None:
        return None
    q0, q1, c, m = poly
    pad = max(2, int(m.max()) - 1)
    if period not in (1, 2):
        return q0, q1, pad
    nq = len(lo) // period

    def fits(q):
        for r in range(period):
            a, b = q + c[r], q + c[r] + m[r]
            col = period * q + r
            if a < -pad or b > n_out + pad:
                return False
            if lo[col] != max(a, 0) or hi[col] != min(b, n_out) or hi[col] <= lo[col]:
                return False
        return True

    while q0 > 0 and fits(q0 - 1):
        q0 -= 1
    x1 = q1
    while x1 < nq and fits(x1):
        x1 += 1
    if x1 > q1 and tp is not None:
        # the edge columns left over may take the +0.0 slot n_out only where the widened
        # interior does not read it
        m_ = tp.shape[0] // len(lo)
        rest = np.concatenate((tp[:period * q0 * m_], tp[period * x1 * m_:]))
        if np.any(rest == n_out):
            x1 = q1
    return q0, x1, pad


# ---------------------------------------------------------------- layout

def byte_span(a):
    """[lo, hi) byte addresses that an array's elements occupy ((0, 0) when empty)."""
    if a.size == 0:
        return 0, 0
    lo = hi = a.__array_interface__["data"][0]
    for n, st in zip(a.shape, a.strides):
        if st > 0:
            hi += (n - 1) * st
        else:
            lo += (n - 1) * st
    return lo, hi + a.itemsize


def storage_view(arr):
    """The array as the kernels see it: 16-bit floats as their uint16 bits (zero-copy)."""
    if arr.dtype.itemsize == 2:
        return arr.view(np.uint16)
    return arr


def to6(arr, n_spatial):
    """(N, C, D, H, W, 1) view of a (C, *sp) or (N, C, *sp) array, without copying."""
    if arr.ndim == n_spatial + 1:
        arr = arr[None]
    if n_spatial == 2:
        arr = arr[:, :, None]
    return arr[..., None]


def merge_depth(*arrays6):
    """(N, C, 1, D*H, W, L) views of (N, C, D, H, W, L) views whose D and H axes merge into
    one axis of rows (all of them, or none: they are returned as they are).  The
    max-pool scatter walks a volume's rows as one plane of flat positions; where they do
    not merge, its kernel steps over D itself."""
    merged = []
    for a in arrays6:
        n, c, d, h, w, lanes = a.shape
        st = a.strides
        if d == 1:
            merged.append(a)
            continue
        if h != 1 and st[2] != h * st[3]:
            return arrays6
        merged.append(np.lib.stride_tricks.as_strided(
            a, (n, c, 1, d * h, w, lanes), st[:2] + (d * h * st[3] if h != 1 else d * st[2],
                                                     st[3] if h != 1 else st[2]) + st[4:],
            writeable=a.flags.writeable))
    return tuple(merged)


def channels_last(arr6):
    """True when C is the innermost axis in memory (NHWC / NDHWC), so the kernels should
    walk C as their contiguous lane axis."""
    n, c, d, h, w, _ = arr6.shape
    if c <= 1:
        return False
    sc = abs(arr6.strides[1])
    return all(sc < abs(st) for size, st in zip((d, h, w), arr6.strides[2:5]) if size > 1)


# planes of at most this many elements are folded into the D axis (see fold_planes)
FOLD_PLANE_ELEMS = 4096


def fold_planes(arr6):
    """(N, 1, C, H, W, 1) view of a (N, C, 1, H, W, 1) view: for operators without a real D
    axis, the C planes become D "rows" whose window tables map each to itself, so that one
    work item covers a block of small planes instead of a single one (same arithmetic)."""
    return arr6[:, :, 0][:, None]


def lanes(arr6):
    """(N, 1, D, H, W, C) view of a (N, C, D, H, W, 1) view: C becomes the lane axis."""
    return np.moveaxis(arr6[..., 0], 1, -1)[:, None]


def views6(arrays, n_spatial, out_index):
    """6-D views of all arrays of a call, in the lane layout when the output is
    channels-last; returns (views, lanes_used)."""
    v = [to6(storage_view(a), n_spatial) for a in arrays]
    use_lanes = channels_last(v[out_index])
    if use_lanes:
        v = [lanes(a) for a in v]
    return v, use_lanes


# rows narrower than this, in planes of at most TSTORE_ELEMS elements for all C, run with C
# as a strided lane axis and are stored plane by plane (see gather_views6)
TSTORE_W = 12
TSTORE_ELEMS = 1 << 17
# ... and for float32 and 16-bit with at least 8 planes, whose rows go in and out eight
# planes by eight values through transposes (pg_tpose.h), these widths, by element size
# and whether the windows are disjoint (disjoint_windows): narrower rows run faster as
# lanes than as folded planes' rows (narrower still for disjoint windows, whose folded
# rows copy each value without sums)
TSTORE_W_FAST = {(4, True): 12, (4, False): 17, (2, True): 16, (2, False): 28}
# ... and for windows that overlap and move on by one column each (stride 1,
# step_windows), whose rows go as step runs (pg_item.h), faster than the lanes from
# these widths
TSTORE_W_STEP = {2: 16, 4: 16}


@functools.lru_cache(maxsize=256)
def step_windows(spec):
    """Whether the W windows overlap and move on by one column each (period 1)."""
    return _AXES[spec[0]](*spec[1:])[3] == 1 and not disjoint_windows(spec)


# channels-last lanes fewer than this (C < 16) are merged into the W axis where the strides
# allow (flat_lanes): each row is then a row of W * C values of one lane, with a tap table
# of its own (flat_taps), and one-tap rows are spread by permutes (_plan.spread).  Wider
# lanes run faster as lanes (a block spanning more than 16 values is not spread)
FLAT_LANES_MAX = 16
# ... and lanes fewer than this, by element size, merge where the merged W axis has a
# period-1 polyphase form (stride 1: flat_polyphase), whose loops add the terms C apart
# without tap tables (faster than the lanes up to these C)
FLAT_STEP_LANES_MAX = {2: 1 << 62, 4: 64, 8: 64}
# ... and lanes fewer than this merge where it has a period-2 form (stride 2, C >= 8:
# flat_polyphase) of several terms a value; one term a value (k2s2) stays faster as lanes
FLAT_STEP2_LANES_MAX = {2: 64, 4: 16, 8: 16}


# merged rows of at least this many lanes take a period-2 polyphase form (flat_polyphase),
# faster than their tap spreads; its loops go eight lanes at a time
FLAT_POLY2_LANES = 8


def flat_lanes(arr6):
    """(N, 1, D, H, W * L, 1) view of a (N, 1, D, H, W, L) lanes view whose W stride is L
    lane strides (C contiguous after W), or None where the axes do not merge."""
    n, one, d, h, w, lanes = arr6.shape
    st = arr6.strides
    if st[4] != lanes * st[5] and w > 1:
        return None
    return np.lib.stride_tricks.as_strided(arr6, (n, one, d, h, w * lanes, 1),
                                           st[:4] + (st[5], st[5]),
                                           writeable=arr6.flags.writeable)


def flat_taps(tp, w, n_out, lanes):
    """The tap table of a W axis merged with `lanes` lanes (flat_lanes): value l of column
    i takes output value t * lanes + l for each tap t of column i; the +0.0 and -0.0 slots
    move to n_out * lanes and n_out * lanes + 1."""
    m = tp.shape[0] // w
    t = tp.reshape(w, 1, m)
    flat = np.where(t < n_out, t * lanes + np.arange(lanes)[None, :, None],
                    np.where(t == n_out, n_out * lanes, n_out * lanes + 1))
    return np.ascontiguousarray(flat.reshape(-1), dtype=np.int64)


# planes that run as lanes go TSTORE_LANES at a time where C allows (tstore_lanes), and
# TSTORE_ELEMS bounds a block's planes, not all C: blocks of 64 planes run about as fast as
# one block of all C (smaller ones slower), and let very wide C (1024 planes of 14 x 14) run
# as lanes rather than as folded planes
TSTORE_LANES = 64


def tstore_lanes(c):
    """Planes per item of the small-plane lanes: the largest divisor of C from 8 to
    TSTORE_LANES, or C where there is none."""
    for lb in range(min(c, TSTORE_LANES), 7, -1):
        if c % lb == 0:
            return lb
    return c


def lane_blocks(arr6, lb):
    """(N, C / lb, D, H, W, lb) view of a (N, 1, D, H, W, C) lanes view: C in blocks of lb
    lanes (lb divides C)."""
    n, _, d, h, w, c = arr6.shape
    if lb == c:
        return arr6
    st = arr6.strides
    return np.lib.stride_tricks.as_strided(arr6, (n, c // lb, d, h, w, lb),
                                           (st[0], lb * st[5]) + st[2:],
                                           writeable=arr6.flags.writeable)


# channels-last grad_output with an NCHW grad_input (one-shot results are C-contiguous)
# runs as plane lanes where a block of planes holds at most this many elements: the lanes
# read grad_output where it lies, faster than plane rows that read it strided
MIXED_LANES_ELEMS = 1 << 20
# small planes along a real D axis (3-D NCDHW) run as plane lanes too
# plane lanes of PLANE_REGS_W (by element size) to 16 columns (grad_output rows up to 14),
# at most PLANE_REGS_TAPS windows a column, go one plane at a time, each row in two
# registers (pg_plane.h), where the CPU has AVX2: from these widths they beat the
# transposes
PLANE_REGS_W = {4: 10, 2: 14}
PLANE_REGS_TAPS = 2


# ... and planes of PLANE_SLIDING_W columns or more whose W taps slide with the column
# (stride 1, sliding_taps), up to PLANE_SLIDING_TAPS a column, whose E rows are loads
# from the staged rows (pg_plane_aff), faster than the lanes from these widths
PLANE_SLIDING_W = {4: 8, 2: 10}
PLANE_SLIDING_TAPS = 4


def sliding_taps(taps, w, n_out):
    """Whether the W tap table `taps` (w columns, n_out outputs) slides with the column:
    column i's taps are the outputs i + omin ... i + omin + m - 1 that exist, then -0.0
    slots, for one omin in 1 - m ... 0 (pg_plane.h checks the same at every item)."""
    if taps is None or w < 1 or taps.shape[0] % w:
        return False
    m = taps.shape[0] // w
    t = taps.reshape(w, m)
    if m > PLANE_SLIDING_TAPS or np.any(t == n_out):
        return False
    cols = np.arange(w)
    unclipped = np.flatnonzero((t[:, 0] > 0) & (t[:, 0] < n_out))
    if unclipped.size == 0:
        return False
    omin = int(t[unclipped[0], 0]) - int(unclipped[0])
    if not 1 - m <= omin <= 0:
        return False
    first = np.maximum(cols + omin, 0)
    last = np.minimum(cols + omin + m - 1, n_out - 1)
    want = first[:, None] + np.arange(m)[None, :]
    want = np.where(want <= last[:, None], want, n_out + 1)
    return bool(np.array_equal(t, want))


def plane_regs(w, itemsize, taps, n_out=None):
    """Whether small-plane lanes (gather_views6's tstore) of width w, with the W tap table
    `taps` over n_out outputs, should go plane by plane in registers (pg_plane.h)."""
    if not on("plane") or taps is None:
        return False
    if (w >= PLANE_REGS_W.get(itemsize, 1 << 62)
            and taps.shape[0] // max(w, 1) <= PLANE_REGS_TAPS):
        return True
    return (n_out is not None and on("sliding") and w >= PLANE_SLIDING_W.get(itemsize, 1 << 62)
            and sliding_taps(taps, w, n_out))


def mixed_lanes(go6, gi6, ind6=None):
    """Whether channels-last grad_output (and indices) into an NCHW grad_input of rows
    that follow each other should run with C as lanes, stored through transposes."""
    c, h, w = gi6.shape[1], gi6.shape[3], gi6.shape[4]
    es = gi6.itemsize
    return (on("mixed_lanes") and c >= 8 and es in (2, 4) and channels_last(go6)
            and (ind6 is None or channels_last(ind6)) and not channels_last(gi6)
            and gi6.strides[4] == es and (gi6.strides[3] == w * es or h == 1))


@functools.lru_cache(maxsize=256)
def disjoint_windows(spec):
    """Whether every input index lies in at most one window along H and along W (kernel <=
    stride, adaptive sizes that divide): each grad_input value is then one product."""
    windows = _AXES[spec[0]](*spec[1:])[0]
    sizes = spec[1][-2:]
    for (start, end), size in zip(windows[1:], sizes):
        lo, hi = cover(start, end, size)
        if np.any(hi - lo > 1):
            return False
    return True


def gather_views6(go, gi, n_spatial, fill=False, disjoint=False, flat=False, step=False):
    """The average-pool gradient's views, whether the kernel stores plane by plane, and
    whether the planes were folded into D.

    Channels-last arrays walk C as the contiguous lane axis.  Otherwise, for a 2-D operator
    with narrow rows (global pooling: 7-wide rows) the per-row work would dominate, so C
    becomes a lane axis all the same (each lane a whole plane): every row operation then
    spans W*C elements, and the kernel stores an item's rows plane by plane, so grad_input
    is still written in memory order (wider rows too for float32 and 16-bit, which move
    between planes and lanes through transposes: TSTORE_W_FAST, by ``disjoint`` windows).
    Other small planes are folded into D (fold_planes), and so are those narrower than
    FLAT_PLANE_W where ``flat`` (flat_plane_ok): they then run as one row each.
    With ``fill`` (constant_planes) the kernel fills planes and needs no lanes; ``step``
    (step_windows) picks TSTORE_W_STEP's widths.
    """
    (go6, gi6), use_lanes = views6([go, gi], n_spatial, out_index=1)
    n, c, d, h, w, _ = gi6.shape
    if use_lanes or c <= 1 or (d != 1 and not on("tstore_d")):
        return go6, gi6, False, False
    width = TSTORE_W_FAST.get((gi.itemsize, bool(disjoint)), TSTORE_W) if c >= 8 else TSTORE_W
    if step and c >= 8:
        width = TSTORE_W_STEP.get(gi.itemsize, width)
    lb = tstore_lanes(c)
    # planes fold only where grad_output has one D row too (an adaptive D axis of 1 -> 2
    # has windows to sum over)
    small = h * w <= FOLD_PLANE_ELEMS
    fold = small and go6.shape[2] == 1 and d == 1 and on("folded")
    flat_rows = flat and on("flat_planes") and w < FLAT_PLANE_W.get(gi.itemsize, 0) and small
    if (w < width and h * w * lb <= TSTORE_ELEMS and not fill and not flat_rows
            and on("tstore")):
        return lane_blocks(lanes(go6), lb), lane_blocks(lanes(gi6), lb), True, False
    if mixed_lanes(go6, gi6) and not fill and h * w * lb <= MIXED_LANES_ELEMS:
        # channels-last grad_output into NCHW rows (a one-shot call's result): the lanes
        # read grad_output where it lies, and the rows go out to the planes transposed
        return lane_blocks(lanes(go6), lb), lane_blocks(lanes(gi6), lb), True, False
    if fold:
        return fold_planes(go6), fold_planes(gi6), False, True
    return go6, gi6, False, False


# ---------------------------------------------------------------- blocking

def _ceil_half(n):
    return (n + 1) // 2


def _max_span(lo, hi, size, block):
    """Largest number of output indices that one block of input indices touches."""
    starts = np.arange(0, size, block)
    ends = np.minimum(starts + block, size) - 1
    return int(np.max(hi[ends] - lo[starts])) if size else 0


def gather_blocks(dcov, hcov, D, H, row_len, planes, n_cpu, folded=False):
    """Block sizes (bd, bh) for the separable gather and the E rows a block needs.

    Blocks are as large as the scratch budget allows (E rows recomputed at block edges
    are the only redundancy), then H blocks are split until there are enough items to
    balance the threads -- D blocks first where D holds folded planes, which share no E
    rows (splitting them costs nothing, while an H split re-expands rows) -- but not below
    MIN_ITEM_VALUES values (tiny items cost more to run than they balance)."""
    def rows(bd, bh):
        return _max_span(*dcov, D, bd) * _max_span(*hcov, H, bh)

    def fit(budget):
        bd, bh = D, H
        while rows(bd, bh) * row_len > budget and (bd > 1 or bh > 1):
            if bd > 1:
                bd = _ceil_half(bd)
            else:
                bh = _ceil_half(bh)
        return bd, bh

    bd, bh = fit(SCRATCH_ELEMS)
    grow = SCRATCH_GROW
    while rows(bd, bh) > SCRATCH_REEXPAND * bd * bh and grow <= SCRATCH_GROW_MAX:
        bd, bh = fit(grow * SCRATCH_ELEMS)
        grow *= 2
    want = max(MIN_ITEMS, 4 * n_cpu)

    def split(bd, bh):   # too few items, and blocks worth splitting
        return (planes * math.ceil(D / bd) * math.ceil(H / bh) < want
                and bd * bh * row_len > MIN_ITEM_VALUES)
    while folded and split(bd, bh) and bd > 1:
        bd = _ceil_half(bd)
    while split(bd, bh) and bh > 1:
        bh = _ceil_half(bh)
    return bd, bh, rows(bd, bh)


# a max-pool scatter is sparse with at most one index per SPARSE_VALUES values of the plane
# (ops._MaxPoolBackward._scatter_kernel keeps such a scatter's NCHW plane rows, not lanes)
SPARSE_VALUES = 32


def scatter_blocks(H, row_len, planes, n_cpu, Ho=0):
    """Rows per block of the max-pool scatter (each block re-reads its plane's indices,
    so blocks are split only for the scratch budget or to balance threads).

    Where the output rows' windows tile the plane (H = Ho * kh, the adaptive windows), a
    block that is split holds whole windows where it can: a window cut by a block edge
    has its indices on both sides, and the scatter then adds each group of four indices
    with some outside the block through its slower mixed path, once per block."""
    bh = max(1, min(H, SCRATCH_ELEMS // max(row_len, 1)))
    kh = H // Ho if Ho and H % Ho == 0 else 0
    if kh and kh <= bh < H:
        bh -= bh % kh
    want = max(MIN_ITEMS, 4 * n_cpu)
    while planes * math.ceil(H / bh) < want and bh > 1 and bh * row_len > MIN_ITEM_VALUES:
        if kh and bh % kh == 0 and bh > kh:
            bh = _ceil_half(bh // kh) * kh   # still whole windows
        else:
            bh = _ceil_half(bh)
    return bh


# ---------------------------------------------------------------- cached geometry

def avg_axes(in_dhw, outs, k, s, p, count_include_pad, override):
    """Per-axis (D, H, W) windows and weights of average pooling (a 2-D pooling has a
    D axis of kernel 1 over one row); a divisor_override becomes a factor on D alone."""
    windows, factors = [], []
    for axis in range(3):
        st, en, f = avg_windows(in_dhw[axis], outs[axis], k[axis], s[axis], p[axis],
                                count_include_pad)
        windows.append((st, en))
        factors.append(f)
    if override:
        weights = (np.full(outs[0], 1.0 / override), np.ones(outs[1]), np.ones(outs[2]))
    else:
        weights = tuple(1.0 / f for f in factors)
    return windows, weights, not override, s[2]


def adaptive_axes(in_dhw, out_dhw):
    """Per-axis windows and weights (1 / window length) of adaptive average pooling."""
    windows, weights = [], []
    for size, out in zip(in_dhw, out_dhw):
        s, e, f = adaptive_windows(size, out)
        windows.append((s, e))
        weights.append(1.0 / f)
    w_in, w_out = in_dhw[2], out_dhw[2]
    return windows, weights, True, (w_in // w_out if w_in % w_out == 0 else None)


# spec: ("avg", in_dhw, out_dhw, k, s, p, count_include_pad, divisor_override) or
# ("adaptive", in_dhw, out_dhw), every size and parameter for (D, H, W)
_AXES = {"avg": avg_axes, "adaptive": adaptive_axes}


@functools.lru_cache(maxsize=256)
def constant_planes(spec):
    """Whether every grad_output row is one value (Ho = Wo = 1) and every input index lies
    in exactly one window on each axis (global pooling): then all of a D row's grad_input
    values are one number and the kernel fills instead of gathering."""
    windows = _AXES[spec[0]](*spec[1:])[0]
    sizes = spec[1]
    if len(windows[1][0]) != 1 or len(windows[2][0]) != 1:
        return False
    for (start, end), size in zip(windows, sizes):
        lo, hi = cover(start, end, size)
        if not np.all(hi - lo == 1):
            return False
    return True


@functools.lru_cache(maxsize=256)
def gather_geometry(spec, shape6, acc, n_cpu, folded=False, flat=1):
    """Everything the separable gather needs that depends only on shapes and parameters
    (not on the arrays): coverage tables, the W tap table, weights and blocking.  Cached,
    so that repeated calls of one configuration skip straight to the kernel.

    With ``flat`` > 1, shape6 is a flat_lanes view (W axis of W * flat values): the W
    tables are for W * flat columns of one lane (flat_taps; W weights repeated for each
    lane; a polyphase form for period 1 only: flat_polyphase).  None there if the W axis
    has no tap table.

    The polyphase form is (q0, q1, c, m) (polyphase), then (q0, q1, pad) widened
    (poly_padded), then the gap: how far apart a phase's terms are (1; flat_polyphase)."""
    windows, weights, scale_w, w_period = _AXES[spec[0]](*spec[1:])
    n, c, d, h, w, lanes = shape6
    if flat > 1:
        return _flat_geometry(spec, shape6, acc, n_cpu, flat)
    if folded:
        # planes folded into the D axis (fold_planes): D index i is covered by output i alone
        i = np.arange(d, dtype=np.int64)
        windows = [(i, i + 1)] + list(windows[1:])
        weights = [np.full(d, weights[0][0])] + list(weights[1:])
    covs = [cover(s, e, size) for (s, e), size in zip(windows, (d, h, w))]
    bd, bh, rows = gather_blocks(covs[0], covs[1], d, h, w * lanes, n * c, n_cpu, folded)
    tables = tuple(t for cv in covs for t in cv)
    tp = taps(*covs[2], len(windows[2][0]))
    # the polyphase loops are vectorised for periods 1 and 2 only; longer periods (adaptive
    # windows) expand faster through the tap table where there is one
    poly = (polyphase(*covs[2], w_period)
            if lanes == 1 and ((w_period or 0) <= 2 or tp is None) else None)
    if poly is not None:
        poly = poly + poly_padded(*covs[2], w_period, poly, len(windows[2][0]), tp) + (1,)
    wts = tuple(np.ascontiguousarray(x, dtype=acc) for x in weights)
    runs = item_runs(tp, w, covs[1], len(windows[2][0]), poly is None and lanes == 1)
    for arr in tables + wts + runs[:2] + runs[6:] + (tp,) + (poly[2:4] if poly else ()):
        if arr is not None:
            arr.flags.writeable = False
    terms = int((covs[0][1] - covs[0][0]).max()) * int((covs[1][1] - covs[1][0]).max())
    return tables, tp, runs, poly, wts, bd, bh, rows, terms, scale_w


# folded planes narrower than this, by element size, run as one row each where their
# windows allow (flat_planes, flat_plane_ok): below these widths they beat the folded
# planes' rows and the plane lanes; wider planes lose to their wider spreads
FLAT_PLANE_W = {4: 17, 2: 33}


@functools.lru_cache(maxsize=256)
def flat_plane_ok(spec):
    """Whether planes of this configuration can run as one row each (plane_geometry):
    disjoint windows, every H index in exactly one window, one H weight for all."""
    windows, weights = _AXES[spec[0]](*spec[1:])[:2]
    h = spec[1][-2]
    lo, hi = cover(*windows[1], h)
    return (disjoint_windows(spec) and bool(np.all(hi - lo == 1))
            and bool(np.all(weights[1] == weights[1][0])))


def flat_planes(arr6):
    """(N, C, D, 1, H * W, 1) view of a (N, C, D, H, W, 1) view (folded planes: C = 1)
    whose rows follow each other (H stride W, W stride 1 element), or None."""
    n, c, d, h, w, _ = arr6.shape
    st = arr6.strides
    es = arr6.itemsize
    if st[4] != es or (st[3] != w * es and h > 1):
        return None
    return np.lib.stride_tricks.as_strided(arr6, (n, c, d, 1, h * w, 1),
                                           st[:3] + (h * w * es, es, es),
                                           writeable=arr6.flags.writeable)


@functools.lru_cache(maxsize=256)
def plane_geometry(spec, shape6, acc, n_cpu, folded=True):
    """gather_geometry of a flat_planes view: each plane (folded into D, or of a real D
    axis whose windows stay as they are) one row of H * W columns
    whose tap is output value hlo[h] * Wo + tap[w] (the sentinel slots move to Ho * Wo and
    Ho * Wo + 1), under one H window whose weight is the planes' one H weight; W weights
    repeated for each output row.  The same products as the planes' rows (one tap a value:
    disjoint windows).  None where that does not hold: an H row no window covers (stored
    +0.0, which the sentinel slot gives only for a positive weight), H weights that differ,
    more than one tap a column."""
    n, c, d, _, hw, _ = shape6
    h = spec[1][-2]
    w = hw // h
    tables, tp, runs, poly, wts, bd, bh, rows, terms, scale_w = gather_geometry(
        spec, (n, c, d, h, w, 1), acc, n_cpu, folded)
    hlo, hhi = tables[2], tables[3]
    n_wo = len(wts[2])
    n_ho = len(wts[1])
    dterms = int(np.max(tables[1] - tables[0])) if d else 0
    if (tp is None or tp.shape[0] != w or terms != dterms or np.any(hhi - hlo != 1)
            or np.any(wts[1] != wts[1][0])):
        return None
    n_out = n_ho * n_wo
    ftp = np.where(tp[None, :] < n_wo, hlo[:, None] * n_wo + tp[None, :],
                   tp[None, :] - n_wo + n_out)
    ftp = np.ascontiguousarray(ftp.reshape(-1), dtype=np.int64)
    one_row = (np.zeros(1, np.int64), np.ones(1, np.int64))
    i = np.arange(hw, dtype=np.int64)
    ftables = tables[:2] + one_row + (i, i + 1)
    fwts = (wts[0], np.ascontiguousarray(wts[1][:1]),
            np.ascontiguousarray(np.tile(wts[2], n_ho)))
    fruns = item_runs(ftp, hw, one_row, n_out)
    bd, bh, frows = gather_blocks(tables[:2], one_row, d, 1, hw, n * c, n_cpu, folded)
    for arr in ftables[2:] + fwts[1:] + (ftp,) + fruns[:2]:
        if arr is not None:
            arr.flags.writeable = False
    return ftables, ftp, fruns, None, fwts, bd, bh, frows, terms, scale_w


def _flat_geometry(spec, shape6, acc, n_cpu, flat):
    """gather_geometry of a flat_lanes view (see there)."""
    n, c, d, h, wl, _ = shape6
    w = wl // flat
    tables, tp, runs, poly, wts, bd, bh, rows, terms, scale_w = gather_geometry(
        spec, (n, c, d, h, w, flat), acc, n_cpu)
    n_out = len(wts[2])   # one W weight per output column, whether or not it scales
    if tp is None:
        return None
    ftp = flat_taps(tp, w, n_out, flat)
    poly = flat_polyphase(tables[4], tables[5], _AXES[spec[0]](*spec[1:])[3], n_out, tp, flat)
    lane = np.arange(flat)
    # the [wlo, whi) ranges of the merged axis (the kernel uses them only without taps)
    wlo = np.ascontiguousarray((tables[4][:, None] * flat + lane).reshape(-1))
    whi = np.ascontiguousarray(((tables[5][:, None] - 1) * flat + lane + 1).reshape(-1))
    ftables = tables[:4] + (wlo, whi)
    fwts = wts[:2] + (np.ascontiguousarray(np.repeat(wts[2], flat)),)
    fruns = item_runs(ftp, wl, (tables[2], tables[3]), n_out * flat, poly is None)
    for arr in (wlo, whi, fwts[2], ftp) + fruns[:2] + (poly[2:4] if poly else ()):
        if arr is not None:
            arr.flags.writeable = False
    return ftables, ftp, fruns, poly, fwts, bd, bh, rows, terms, scale_w


def flat_polyphase(lo, hi, period, n_out, tp, lanes):
    """The polyphase form of a W axis of period 1 or 2 merged with `lanes` lanes
    (flat_lanes), from its own (polyphase, poly_padded): columns, offsets and pad slots
    times `lanes`, and a phase's terms `lanes` apart (value l of column w sums value l of
    its output columns), so that the period-1 and period-2 loops (pyx/pg_expand.h) run
    over the merged row in blocks of lanes, where tap spreads would permute every term.
    None for other periods, and at period 2 for fewer than FLAT_POLY2_LANES lanes (the
    loops go eight lanes at a time)."""
    if period not in (1, 2) or (period == 2 and lanes < FLAT_POLY2_LANES):
        return None
    poly = polyphase(lo, hi, period)
    if poly is None:
        return None
    q0, q1, c, m = poly
    x0, x1, pad = poly_padded(lo, hi, period, poly, n_out, tp)
    return (q0 * lanes, q1 * lanes, np.ascontiguousarray(c * lanes), m,
            x0 * lanes, x1 * lanes, pad * lanes, lanes)


# ---------------------------------------------------------------- the kernels' forms
#
# Which C form runs a planned call: rules on the call's views, tables and store form, and
# on the instructions the CPU has.  The kernels take the choice as it is (they lay out
# their structs and scratch from it and decide nothing); docs/forms.md says what each form
# does and what it gains, docs/performance.md what the limits below were measured from.

# float32 and float64 storage, 16-bit (the kernels' K_* numbers, as KINDS)
K_F32, K_F64, K_F16, K_BF16 = 0, 1, 2, 3
# channels-last rows formed without E rows (lanes): at most this many terms a value (each
# value sums all its terms there, where E rows sum those along W once for all the rows
# that share them)
LANES_ROW_TERMS = 8
# ... and rows of at most this many bytes (which the core's L2 keeps for their copies) are
# formed once and copied to the rows with the same windows, where there are at least
# LANES_COPY_MIN of them; two such rows are formed together instead
LANES_COPY_BYTES = 131072
LANES_COPY_MIN = 3


def _runs(lo, hi):
    """The lengths of the runs of consecutive equal (lo, hi) windows."""
    lo, hi = np.asarray(lo), np.asarray(hi)
    cuts = np.flatnonzero((np.diff(lo) != 0) | (np.diff(hi) != 0)) + 1
    return np.diff(np.concatenate(([0], cuts, [lo.size]))) if lo.size else np.ones(1, np.int64)


def column_runs(tw):
    """For a (W, m) tap table, how many columns from each on have its taps (a run ends at
    W), as int64; None where there are more runs than 3/4 of the columns (their loops
    then cost more than they save)."""
    w = tw.shape[0]
    same = np.all(tw[1:] == tw[:w - 1], axis=1)
    if w - np.count_nonzero(same) > 3 * w // 4:
        return None
    run = np.ones(w, np.int64)
    for i in range(w - 2, -1, -1):
        if same[i]:
            run[i] = run[i + 1] + 1
    return run


def _elem_strides(a):
    return tuple(s // a.itemsize for s in a.strides)


@dataclasses.dataclass(frozen=True, eq=False)
class GatherChoice:
    """The separable gather's form for one call (AvgGatherKernel runs it as it is).

    item: the C item's name (``Plan.item``; docs/forms.md): "" (the general item),
    "rows", "region", "single", "single, streamed pairs", "narrow", "fused",
    "region, fused", "lanes" or "plane".  The flags say which parts run: stream (rows
    streamed), region (blocks of rows streamed), big (an output larger than the cache),
    tstore (C as lanes through transposes), tstage, fill and fill_fast (constant planes),
    plane (small planes in registers), lanes with crun (its column runs, or None),
    lanes_copy, lanes_pair and copy_min, fused64 with strips and fused_nt, stage64 (bytes
    of the float64 region's stage, 0: none), the float32 C item (c_item) with its region,
    single, dup2 and pair_nt, and spread (the narrow rows' tables used).
    """
    item: str
    stream: bool
    region: bool
    big: bool
    tstore: bool
    tstage: bool
    fill: bool
    fill_fast: bool
    plane: bool
    lanes: bool
    crun: object
    lanes_copy: bool
    lanes_pair: bool
    copy_min: int
    fused64: bool
    strips: bool
    fused_nt: bool
    stage64: int
    c_item: bool
    item_region: bool
    single: bool
    dup2: bool
    pair_nt: bool
    spread: bool


def gather_choice(go6, gi6, kind, rnd, geometry, stream, region, big, tstore, fill,
                  plane_rule, strips_ok=True):
    """The form of a planned average gradient (GatherChoice): go6, gi6 its views, kind its
    storage (K_*), rnd its cube_math_type rounding (0: none), geometry gather_geometry's
    tuple, stream / region / big the store form's flags, tstore, fill and plane_rule the
    views' rules; strips_ok=False leaves float64 planes in rows (the strips' timed
    alternate)."""
    tables, taps_, runs, poly, _weights, _bd, _bh, _rows, terms, _scale_w = geometry
    dlo, dhi, hlo, hhi = (np.asarray(t) for t in tables[:4])
    W, L = gi6.shape[4], gi6.shape[5]
    Wo, es = go6.shape[4], gi6.itemsize
    gs, xs = _elem_strides(go6), _elem_strides(gi6)
    m = 0 if taps_ is None else taps_.shape[0] // W
    lane1 = poly is not None and L == 1
    P, gap = (poly[2].shape[0], poly[7]) if lane1 else (0, 1)
    avx2 = _kernels.simd_in_use() == "avx2"
    fill = fill and L == 1 and Wo == 1 and not tstore
    fill_fast = (fill and rnd == 0 and m == 1 and P == 0 and taps_[0] == 0 and xs[4] == 1
                 and xs[3] == W)
    stage64 = (max(_kernels.STAGE, (W * 8 + 64 + 63) // 64 * 64)
               if kind == K_F64 and region and L == 1 and not tstore and not fill
               and xs[4] == 1 else 0)
    # small planes in registers (pg_plane.h: at most 16 wide, 14 outputs, PLANE_TAPS taps)
    # (AVX2 only: the 128-bit copies' lane permutes go element by element, slower than
    # the transposes of tstore)
    plane = (tstore and plane_rule and kind != K_F64 and rnd == 0 and taps_ is not None
             and 1 <= W <= 16 and 1 <= Wo <= 14 and 1 <= m <= _kernels.PLANE_TAPS
             and gs[4] == 1 and xs[4] == 1 and avx2)
    # channels-last rows without E rows: contiguous lanes (8, float64 4), few terms a value
    lanes = (on("lanes") and rnd == 0 and L >= (4 if kind == K_F64 else 8)
             and 0 < m <= MAX_TAPS and not tstore and not fill
             and terms <= 8 and terms * m <= LANES_ROW_TERMS and gs[5] == 1 and xs[5] == 1
             and _kernels.LANES_ROWS)
    crun = None   # 16-bit only: their rounding is what a column run saves
    if lanes and W > 1 and kind in (K_F16, K_BF16) and on("crun"):
        crun = column_runs(np.asarray(taps_).reshape(W, m))
    lanes_copy = lanes and W * L * es <= LANES_COPY_BYTES and on("lanes_copy")
    col16 = (xs[4] * es) % 16 == 0 and (L * es) % 16 == 0   # columns that can stream
    # where the rows stream: pairs of equal rows formed together where their columns can
    # stream, else copied from one formed in the thread's scratch (it streams as one run)
    lanes_pair = lanes and stream and col16
    copy_min = 2 if lanes_copy and stream and not col16 else LANES_COPY_MIN
    fused64 = strips = False
    if kind == K_F64:
        # float64 rows with their E values in registers (pg_fused_avx2_f64): the region's
        # rows, stride-1 planes in strips, stride 2 in the cache
        strips = (strips_ok and on("strips") and P == 1 and W >= 8 and L == 1
                  and not tstore and not fill and bool(np.all(np.diff(hhi) >= 0)))
        cached2 = P == 2 and L == 1 and not tstore and not fill
        fused64 = bool((stage64 or strips or cached2) and gap == 1 and avx2
                       and on("fused64")
                       and ((P == 2 and poly[3][0] + poly[3][1] <= 3
                             and np.all(hhi - hlo <= 2))
                            or (P == 1 and poly[3][0] <= 3 and np.all(hhi - hlo <= 3)))
                       and poly[4] == 0 and P * poly[5] == W and poly[5] >= 4
                       and W % 4 == 0 and gs[4] == 1 and xs[4] == 1 and xs[3] == W
                       and np.all(dhi - dlo == 1))
        strips = fused64 and strips
    # the C item of 32- and 16-bit rows (pg_item.h), rows long enough to stream one by one
    # included (float32 streams them as its region)
    c_item = (kind != K_F64 and rnd == 0 and L == 1 and gs[4] == 1 and xs[4] == 1
              and m > 0 and not tstore and not fill
              and (not stream or kind != K_F32 or region))
    item_region = single = dup2 = pair_nt = spread = False
    if c_item:
        item_region = region and kind == K_F32
        spread = runs[4 if kind == K_F32 else 3] is not None and on("narrow")
        # one term a value: single rows (k2s2, adaptive 2:1), whose R rows and a pointer
        # each ((Wo + 2) values + 8 bytes, up to 7 of alignment) fit where E rows would be
        if (on("single") and m == 1 and (Wo + 2) * (4 if kind == K_F32 else 2) + 16 <= 4 * W
                and np.all(dhi - dlo <= 1) and np.all(hhi - hlo <= 1)):
            two = bool(np.array_equal(np.asarray(taps_), np.arange(W) // 2))
            pairs = ((two or spread) and big and on("pairs") and (W * es) % 16 == 0
                     and (xs[3] * es) % 16 == 0 and int(_runs(dlo, dhi).max()) == 1)
            # pairs of rows streamed, but not where planes under one D window are copied
            # from the first (the copies would read back what was streamed); float32 rows
            # long enough for the region go as single rows where their pairs stream
            if not item_region or pairs:
                single, dup2, pair_nt, item_region = True, two, pairs, False
    item = ("plane" if plane else "lanes" if lanes
            else ("single, streamed pairs" if pair_nt else "single" if single
                  else "narrow" if spread and kind != K_F32 else "region" if item_region
                  else "rows") if c_item
            else ("region, fused" if stage64 else "fused") if fused64 else "")
    return GatherChoice(item, bool(stream), bool(region), bool(big), bool(tstore),
                        bool(tstore and big), bool(fill), bool(fill_fast), bool(plane),
                        bool(lanes), crun, bool(lanes_copy), bool(lanes_pair), copy_min,
                        fused64, bool(strips), bool(fused64 and stage64 != 0), stage64,
                        bool(c_item), bool(item_region), single, dup2, pair_nt,
                        bool(spread))


@dataclasses.dataclass(frozen=True, eq=False)
class ScatterChoice:
    """The max-pool scatter's form for one call (MaxScatterKernel runs it as it is).

    stream, region: the store form's flags; window: NCHW planes whose windows, two wide,
    tile them are written as a gather where their indices allow (_window_item); lwindow: its
    channels-last form (_lwindow_run), with lmixed (grad_output and indices in NCHW planes)
    and flat (the flat rows' table of window_spread, or None: vectors of lanes).
    """
    item: str
    stream: bool
    region: bool
    window: bool
    lwindow: bool
    lmixed: bool
    flat: object


# the channels-last gather form's flat rows are planned only with AVX2: the 128-bit copies
# (their permutes and byte shuffles lane by lane) took 0.9-1.55x the scatter's time
# (docs/performance.md); True plans them there too (for tests)
FLAT_ROWS_BASELINE = False


def scatter_choice(go6, ind6, gi6, kind, bh, stream, region, window, flat):
    """The form of a planned max-pool gradient (ScatterChoice): its views, storage kind,
    rows per block, store form; window (whether the gather forms may run) and flat
    (window_spread's table, or None) from the op."""
    n, c, d, hd, w, lanes = gi6.shape
    h, ho, wo = d * hd, go6.shape[2] * go6.shape[3], go6.shape[4]
    gs, xs, js = _elem_strides(go6), _elem_strides(gi6), _elem_strides(ind6)
    nbh = -(-h // bh) if h > 0 else 0
    es = 4 if kind == K_F32 else 2
    fast = kind != K_F64 and _kernels.scatter_fast(kind)
    # both gather forms walk the rows of 2-D planes
    window = window and d <= 1 and go6.shape[2] <= 1
    # NCHW: windows two wide and fewer than 128 high tiling the plane, rows of a multiple
    # of 8 outputs, unit-stride grad_output and index rows
    nchw = bool(window and on("window") and fast and nbh == 1 and lanes == 1 and ho > 0
                and h % ho == 0 and h // ho < 128 and w == 2 * wo and wo % 8 == 0
                and gs[4] == 1 and js[4] == 1)
    # channels-last: windows of at most 64 positions tiling the plane; flat rows (fewer
    # than 16 lanes, not a multiple of 8) under windows of at most 16 positions, or at
    # least 8 contiguous lanes under windows of at most 4 or lanes of 128 bytes or more
    positions = (h // ho) * (w // wo) if ho and wo else 0
    flat_rows = (flat is not None and 1 < lanes < 16 and lanes % 8 != 0 and positions <= 16
                 and gs[4] == lanes and js[4] == lanes and xs[4] == lanes)
    flat_simd = FLAT_ROWS_BASELINE or _kernels.simd_in_use() == "avx2"
    lane_rows = lanes >= 8 and (positions <= 4 or lanes * es >= 128)
    mixed = (lane_rows and on("lmixed") and wo >= 8 and xs[5] == 1 and gs[4] == 1
             and js[4] == 1 and gs[5] != 1 and js[5] != 1)
    lwindow = bool(window and on("lwindow") and fast and c == 1
                   and (flat_rows and flat_simd or lane_rows and not flat_rows)
                   and ho > 0 and wo > 0 and h % ho == 0 and w % wo == 0 and positions <= 64
                   and (gs[5] == 1 and js[5] == 1 or mixed) and xs[5] == 1)
    mixed = bool(mixed and lwindow)
    item = ("lanes window, NCHW rows" if mixed else "lanes window" if lwindow
            else "window" if nchw else "scatter")
    return ScatterChoice(item, bool(stream), bool(region), nchw, lwindow, mixed,
                         flat if lwindow and flat_rows else None)

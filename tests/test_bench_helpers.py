"""The benchmarks' memory-bandwidth references (benchmarks/membw.py, compiled from
membw.c; not part of the package): the OpenMP memory copy that is bench.py's
copy-bandwidth reference, and the traffic bound that reads a case's input bytes and writes
its output bytes.  They are timed by the benchmarks only; here, that they move exactly the
bytes they say, with any thread count and either store kind, and write nothing outside
their destination.  Skipped without the checkout's benchmarks/ or a C compiler."""
import importlib.util
from pathlib import Path

import numpy as np
import pytest

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"
MIB = 1 << 20


@pytest.fixture(scope="module")
def membw():
    if not (BENCHMARKS / "membw.py").exists():
        pytest.skip(f"no {BENCHMARKS / 'membw.py'} (not a source checkout)")
    spec = importlib.util.spec_from_file_location("membw", BENCHMARKS / "membw.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    try:
        mod.load()
    except mod.BuildError as e:
        pytest.skip(f"membw.c not built: {e}")
    return mod


@pytest.mark.parametrize("nbytes", [1, 100, 3 * MIB + 17])
@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("n_threads", [1, 2])
def test_copy(membw, nbytes, stream, n_threads):
    rng = np.random.default_rng(nbytes)
    src = rng.integers(0, 256, nbytes, dtype=np.uint8)
    buf = np.full(nbytes + 128, 0xEE, np.uint8)
    dst = buf[64:64 + nbytes]
    membw.copy(dst, src, n_threads, stream)
    assert np.array_equal(dst, src)
    assert np.all(buf[:64] == 0xEE) and np.all(buf[64 + nbytes:] == 0xEE)


def test_copy_checks(membw):
    with pytest.raises(ValueError):
        membw.copy(np.empty(10, np.uint8), np.empty(11, np.uint8), 1, False)
    with pytest.raises(ValueError):   # a read-only destination
        membw.copy(np.frombuffer(b"abcd", np.uint8), np.ones(4, np.uint8), 1, False)
    with pytest.raises(TypeError):    # not C-contiguous
        membw.copy(np.empty(8, np.uint8)[::2], np.ones(4, np.uint8), 1, False)
    membw.copy(np.empty(0, np.uint8), np.empty(0, np.uint8), 2, True)   # nothing to do
    dst = bytearray(5)                # any buffer
    membw.copy(dst, b"hello", 1, False)
    assert dst == b"hello"


def test_bound_copy_keeps_its_arrays(membw):
    src, dst = np.arange(1000, dtype=np.uint8), np.zeros(1000, np.uint8)
    fn = membw.bound_copy(dst, src[:], 2, True)
    del src
    fn()
    assert np.array_equal(dst, np.arange(1000, dtype=np.uint8))


@pytest.mark.parametrize("nw, nread, npat", [
    (1, 1, 1),
    (1000, 3, 7),
    (MIB, 5, 4096),
    (2 * MIB + 333, 100_001, 16384),   # more chunks than one, a partial last chunk
    (3 * MIB, 2, 1000),                # more chunks than words to read
])
@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("n_threads", [1, 2, 3])
def test_traffic(membw, nw, nread, npat, stream, n_threads):
    rng = np.random.default_rng(nw + nread)
    src = rng.integers(0, 2**63, nread, dtype=np.uint64)
    pattern = rng.integers(0, 256, npat, dtype=np.uint8)
    buf = np.full(nw + 128, 0xEE, np.uint8)
    dst = buf[64:64 + nw]
    x = membw.traffic(dst, src, pattern, n_threads, stream)
    assert x == int(np.bitwise_xor.reduce(src))          # every word read once
    assert np.array_equal(dst, np.resize(pattern, nw))   # the pattern, repeated
    assert np.all(buf[:64] == 0xEE) and np.all(buf[64 + nw:] == 0xEE)


def test_traffic_unaligned_src(membw):
    words = np.arange(1, 11, dtype=np.uint64)
    raw = np.zeros(8 * 10 + 3, np.uint8)
    raw[3:] = words.view(np.uint8)
    dst = np.empty(100, np.uint8)
    assert membw.traffic(dst, raw[3:], np.ones(3, np.uint8), 1, False) == \
        int(np.bitwise_xor.reduce(words))


def test_traffic_checks(membw):
    one = np.ones(1, np.uint64)
    for dst, src, pat in ((np.empty(0, np.uint8), one, np.ones(1, np.uint8)),
                          (np.empty(8, np.uint8), np.empty(0, np.uint64), np.ones(1, np.uint8)),
                          (np.empty(8, np.uint8), one, np.empty(0, np.uint8))):
        with pytest.raises(ValueError):
            membw.traffic(dst, src, pat, 1, False)
    with pytest.raises(TypeError):    # src not a whole number of 64-bit words
        membw.traffic(np.empty(8, np.uint8), np.ones(9, np.uint8), np.ones(1, np.uint8), 1,
                      False)


def test_index_check_cost_finds_the_text_it_removes():
    """benchmarks/index_check_cost.py builds a copy without the index checks by removing
    lines of the sources: each must still occur as often as it says."""
    path = BENCHMARKS / "index_check_cost.py"
    if not path.exists():
        pytest.skip(f"no {path} (not a source checkout)")
    spec = importlib.util.spec_from_file_location("index_check_cost", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    for name, old, _, times in mod.PATCHES:
        assert (BENCHMARKS.parent / name).read_text().count(old) == times, (name, old)

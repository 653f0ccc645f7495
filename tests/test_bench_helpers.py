"""The extension's two helpers for benchmarks/bench.py (not API): the OpenMP memory copy
that is the copy-bandwidth reference, and the traffic bound that reads a case's input
bytes and writes its output bytes.  They are timed by the benchmarks only; here, that
they move exactly the bytes they say, with any thread count and either store kind, and
write nothing outside their destination."""
import numpy as np
import pytest

from pool_grad import _kernels

MIB = 1 << 20


@pytest.mark.parametrize("nbytes", [1, 100, 3 * MIB + 17])
@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("n_threads", [1, 2])
def test_copy_for_benchmark(nbytes, stream, n_threads):
    rng = np.random.default_rng(nbytes)
    src = rng.integers(0, 256, nbytes, dtype=np.uint8)
    buf = np.full(nbytes + 128, 0xEE, np.uint8)
    dst = buf[64:64 + nbytes]
    _kernels._copy_for_benchmark(dst, src, n_threads, stream)
    assert np.array_equal(dst, src)
    assert np.all(buf[:64] == 0xEE) and np.all(buf[64 + nbytes:] == 0xEE)


def test_copy_for_benchmark_sizes_must_match():
    with pytest.raises(ValueError):
        _kernels._copy_for_benchmark(np.empty(10, np.uint8), np.empty(11, np.uint8), 1, False)


@pytest.mark.parametrize("nw, nread, npat", [
    (1, 1, 1),
    (1000, 3, 7),
    (MIB, 5, 4096),
    (2 * MIB + 333, 100_001, 16384),   # more chunks than one, a partial last chunk
    (3 * MIB, 2, 1000),                # more chunks than words to read
])
@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("n_threads", [1, 2, 3])
def test_traffic_for_benchmark(nw, nread, npat, stream, n_threads):
    rng = np.random.default_rng(nw + nread)
    src = rng.integers(0, 2**63, nread, dtype=np.uint64)
    pattern = rng.integers(0, 256, npat, dtype=np.uint8)
    buf = np.full(nw + 128, 0xEE, np.uint8)
    dst = buf[64:64 + nw]
    x = _kernels._traffic_for_benchmark(dst, src, pattern, n_threads, stream)
    assert x == int(np.bitwise_xor.reduce(src))          # every word read once
    assert np.array_equal(dst, np.resize(pattern, nw))   # the pattern, repeated
    assert np.all(buf[:64] == 0xEE) and np.all(buf[64 + nw:] == 0xEE)


def test_traffic_for_benchmark_empty():
    one = np.ones(1, np.uint64)
    for dst, src, pat in ((np.empty(0, np.uint8), one, np.ones(1, np.uint8)),
                          (np.empty(8, np.uint8), np.empty(0, np.uint64), np.ones(1, np.uint8)),
                          (np.empty(8, np.uint8), one, np.empty(0, np.uint8))):
        with pytest.raises(ValueError):
            _kernels._traffic_for_benchmark(dst, src, pat, 1, False)

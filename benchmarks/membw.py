"""The benchmarks' memory-bandwidth references, in C (membw.c), outside the shipped package.

    copy(dst, src, n_threads, stream)              the OpenMP memory copy (bench.py's
                                                   copy-bandwidth reference)
    traffic(dst, src, pattern, n_threads, stream)  the traffic bound (bench.py's %bound)
    bound_copy(...), bound_traffic(...)            the same, checked once and bound: a
                                                   function of no arguments, to time

membw.c is compiled on first use with $CC (default ``cc``): ``-O2 -fopenmp -shared
-fPIC``, or without ``-fopenmp`` (one thread, with a warning) where that fails.  The
library is cached in benchmarks/.build/, named by a hash of the source and the compiler,
so an edit recompiles.  load() raises BuildError when no compiler can build it.  Arrays:
any C-contiguous buffer (numpy arrays, memoryviews); ctypes releases the GIL during a call.
"""
import ctypes
import hashlib
import os
import shlex
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
SOURCE = HERE / "membw.c"
BUILD = HERE / ".build"
FLAGS = ["-O2", "-shared", "-fPIC"]


class BuildError(RuntimeError):
    """membw.c could not be compiled or loaded."""


_lib = None


def _compile(cc, out):
    """Builds `out` (with OpenMP if the compiler can); returns whether OpenMP is in."""
    errors = []
    for extra in (["-fopenmp"], []):
        fd, tmp = tempfile.mkstemp(suffix=".so", dir=BUILD)
        os.close(fd)
        cmd = cc + FLAGS + extra + [str(SOURCE), "-o", tmp]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True)
        except OSError as e:   # no such compiler
            os.unlink(tmp)
            raise BuildError(f"cannot run the C compiler {cc[0]!r}: {e}") from None
        if proc.returncode == 0:
            os.replace(tmp, out)   # atomic: another process may be building it too
            return bool(extra)
        os.unlink(tmp)
        errors.append(f"$ {shlex.join(cmd)}\n{proc.stderr.strip()}")
    raise BuildError("cannot compile membw.c:\n" + "\n".join(errors))


def load():
    """The compiled library (built on first use); BuildError if it cannot be built."""
    global _lib
    if _lib is not None:
        return _lib
    if not SOURCE.exists():   # the sdist ships no .c files (.ci/run checks)
        raise BuildError(f"{SOURCE} is missing")
    cc = shlex.split(os.environ.get("CC") or "cc")
    key = hashlib.sha256(SOURCE.read_bytes() + " ".join(cc + FLAGS).encode()).hexdigest()
    out = BUILD / f"membw-{key[:16]}{'.dll' if sys.platform == 'win32' else '.so'}"
    if not out.exists():
        BUILD.mkdir(exist_ok=True)
        _compile(cc, out)
    try:
        lib = ctypes.CDLL(str(out))
    except OSError as e:
        raise BuildError(f"cannot load {out}: {e}") from None
    vp, sz, i = ctypes.c_void_p, ctypes.c_ssize_t, ctypes.c_int
    lib.membw_copy.argtypes = [vp, vp, sz, i, i]
    lib.membw_copy.restype = None
    lib.membw_traffic.argtypes = [vp, sz, vp, sz, vp, sz, i, i]
    lib.membw_traffic.restype = ctypes.c_uint64
    if not lib.membw_openmp():
        warnings.warn(f"{cc[0]} cannot build OpenMP code (-fopenmp failed): membw's copy "
                      "and traffic run on one thread", RuntimeWarning, stacklevel=2)
    _lib = lib
    return lib


def available():
    """Whether the library builds and loads here (the reason printed once if not)."""
    global _lib
    if _lib is None:
        try:
            load()
        except BuildError as e:
            print(f"membw: {e}", file=sys.stderr)
            _lib = False
    return bool(_lib)


def has_stream():
    """Whether streaming stores exist here (x86 SSE2); elsewhere stream=True is memcpy."""
    return bool(load().membw_has_stream())


def openmp():
    """The OpenMP version (_OPENMP) the library was built with; 0 without OpenMP."""
    return load().membw_openmp()


def _buffer(obj, writable, itemsize=1):
    """(address, bytes) of a C-contiguous buffer, checked as the typed memoryviews of the
    former Cython helpers checked it (TypeError / ValueError)."""
    a = obj if type(obj) is np.ndarray else np.asarray(memoryview(obj))
    if not a.flags.c_contiguous:
        raise TypeError("memoryview: casts are restricted to C-contiguous views")
    if writable and not a.flags.writeable:
        raise ValueError("buffer source array is read-only")
    if a.nbytes % itemsize:
        raise TypeError("memoryview: length is not a multiple of itemsize")
    return a.ctypes.data, a.nbytes


def bound_copy(dst, src, n_threads, stream):
    """copy(dst, src, n_threads, stream) checked and bound once: a function of no
    arguments that does the copy (the addresses resolved, for timing small copies)."""
    lib = load()
    s, n = _buffer(src, False)
    d, nd = _buffer(dst, True)
    if nd != n:
        raise ValueError("dst and src differ in size")
    nt, st = int(n_threads), bool(stream)

    def run(_keep=(dst, src)):   # the buffers, and so the addresses, live as long as run
        if n:
            lib.membw_copy(d, s, n, nt, st)
    return run


def copy(dst, src, n_threads, stream):
    """Copy the bytes of `src` into `dst` (same size, both C-contiguous) with an OpenMP
    team of `n_threads`: 1 MiB chunks, memcpy or (`stream`) whole cache lines with
    non-temporal stores, the partial lines at each chunk's ends with ordinary ones."""
    bound_copy(dst, src, n_threads, stream)()


def bound_traffic(dst, src, pattern, n_threads, stream):
    """traffic(...) checked and bound once: a function of no arguments (as bound_copy)."""
    lib = load()
    s, nr = _buffer(src, False, 8)
    d, nw = _buffer(dst, True)
    p, npat = _buffer(pattern, False)
    if nw == 0 or nr == 0 or npat == 0:
        raise ValueError("src, dst and pattern must not be empty")
    nt, st = int(n_threads), bool(stream)

    def run(_keep=(dst, src, pattern)):
        return lib.membw_traffic(d, nw, s, nr // 8, p, npat, nt, st)
    return run


def traffic(dst, src, pattern, n_threads, stream):
    """Read every byte of `src` once and write every byte of `dst` once, as a kernel that
    did nothing else would: an OpenMP team over 1 MiB chunks of `dst`, each chunk reading
    its share of `src` (in proportion; 64-bit words, xor-ed together so that the reads
    cannot be left out), then writing the bytes of `pattern` over it, repeated from the
    start of `dst` (ordinary or streaming stores).  `pattern`: a sample of the real output
    small enough to stay in the L1 cache (this VM's memory writes lines of zeros faster
    than other lines, and a max-pool gradient is mostly zeros).  All C-contiguous, `src` a
    whole number of 64-bit words.  Returns the xor of `src`'s words (an int)."""
    return bound_traffic(dst, src, pattern, n_threads, stream)()

"""Every threading decision of pool_grad: how many threads a call may use, and how many
it is worth giving it.

The kernels are bitwise deterministic for any thread count, so this module only trades
speed: a parallel region costs a few microseconds to open, which a small call never earns
back, so the count is capped by the work size (bytes moved) as PyTorch's grain size does.

The policy has one implementation, in the extension (pyx/_kernels.pyx, "thread
policy"): a call with n_threads=None takes its default there without a Python call.  This
module is its Python face: the user's setting, the CPUs this process may use, the planning
context, and the argument checks.
"""
import os
import threading

from . import _kernels
from ._errors import invalid

# Bytes of memory traffic below which a second thread does not pay for itself; each
# further thread needs as much again.
GRAIN_BYTES = _kernels.GRAIN_BYTES
# more threads than this are never started, whatever a call asks for
MAX_THREADS = 1024


def _cpu_count():
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


CPU_COUNT = _cpu_count()
_kernels._set_thread_defaults(0, CPU_COUNT)


def set_num_threads(n: int | None) -> None:
    """Set the default number of threads of every pool_grad call.

    Parameters
    ----------
    n : int or None
        A positive thread count (at most 1024 are ever started), or None to go back to the
        OpenMP runtime's default (``OMP_NUM_THREADS``, else all cores).  A call's own
        ``n_threads`` overrides it; small calls use fewer threads either way.

    Raises
    ------
    ParamInvalidError
        n is not None or a positive integer (161002).

    Examples
    --------
    >>> import pool_grad as pg
    >>> pg.set_num_threads(1)
    >>> pg.get_num_threads()
    1
    >>> pg.set_num_threads(None)
    """
    user = 0 if n is None else min(_check_positive(n, "n_threads"), MAX_THREADS)
    _kernels._set_thread_defaults(user, CPU_COUNT)


def get_num_threads() -> int:
    """The number of threads a large call uses when its n_threads is None: the value of
    `set_num_threads`, else the OpenMP runtime's (``OMP_NUM_THREADS``, threadpoolctl's
    limits) capped at the CPUs this process may use."""
    # omp_get_max_threads follows OMP_NUM_THREADS and threadpoolctl's limits at call time
    return _kernels.default_threads()


def user_threads():
    """The count given to `set_num_threads`, else None."""
    return _kernels.user_threads() or None


# the thread count that operators constructed by this Python thread are planned for, where
# a one-shot function was given its own (`planning`); else the default
_planning = threading.local()


def planned():
    """The thread count a call being planned now is planned for: the one-shot function's
    n_threads (`planning`), else `get_num_threads`.  Plans tune the output's stores to it
    (_plan.stream_bytes); any thread count gives the same bits."""
    n = getattr(_planning, "n", None)
    return get_num_threads() if n is None else n


class planning:
    """``with planning(n):`` operators constructed in the block are planned for n threads."""

    def __init__(self, n):
        self.n = n

    def __enter__(self):
        self.saved = getattr(_planning, "n", None)
        _planning.n = self.n

    def __exit__(self, *exc):
        _planning.n = self.saved


def _check_positive(n, name):
    if isinstance(n, bool) or not isinstance(n, int) and not hasattr(n, "__index__"):
        raise invalid(name, "must be None or a positive integer", repr(n))
    n = int(n.__index__()) if not isinstance(n, int) else n
    if n < 1:
        raise invalid(name, "must be None or a positive integer", n)
    return n


def requested(n_threads):
    """The thread budget of a call: n_threads (capped at MAX_THREADS), or the default."""
    if n_threads is None:
        return get_num_threads()
    return min(_check_positive(n_threads, "n_threads"), MAX_THREADS)


def for_work(budget, nbytes, n_items):
    """Threads worth using within ``budget`` for ``nbytes`` of traffic split into
    ``n_items`` work items: at most one per item and per GRAIN_BYTES, at least one."""
    return _kernels.threads_for_work(budget, nbytes, n_items)

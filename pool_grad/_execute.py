"""Execution, shared by all operators: the plan -> execute object (aclnn's two phases).

The per-call work (thread count, workspace, scratch) lives in the Cython kernel object
(pyx/_kernels.pyx, PlannedKernel.run) so that executing a planned call costs about a
microsecond of Python."""
from typing import Any

from . import _plan, _threads
from ._errors import invalid
from ._stream import Stream


class Operator:
    """A validated, planned call.  Construction has done every check that does not
    depend on array values; ``execute`` runs the kernel (again, if called again)."""

    _kernel = None
    _workspace_size = 0
    _params = ()   # the planned parameters that repr shows after the arrays

    def __repr__(self) -> str:
        items = [f"{name}={a.dtype.name}{a.shape}" for name, a in (
            (n, getattr(self, n, None)) for n in ("grad_output", "indices", "grad_input"))
            if a is not None]
        items += [f"{name}={getattr(self, name)!r}" for name in self._params]
        items.append(f"workspace_size={self._workspace_size}")
        return f"<pool_grad.{type(self).__name__} {' '.join(items)}>"

    def _planned(self, kernel, arrays, views=()):
        self._kernel = kernel
        self._views = views
        self._threads = _threads.planned()
        if kernel is not None:
            self._workspace_size = kernel.workspace_size(self._threads)
            kernel.extents = [_plan.byte_span(a) for a in arrays]

    @property
    def plan(self) -> "_plan.Plan":
        """What planning chose for this call (`pool_grad._plan.Plan`): the kernel, its
        item form, the store forms, the 6-D views, items, threads and scratch.  A snapshot:
        ``kept`` says "tuning" until the first calls have timed the store forms."""
        return _plan.Plan.of(self)

    @property
    def workspace_size(self) -> int:
        """Bytes of workspace `execute` needs, for the thread count at planning (0 when
        the call needs none).  Asked for more threads, execute uses as many as the given
        workspace holds scratch for."""
        return self._workspace_size

    def execute(self, workspace: Any = None, stream: Stream | None = None,
                n_threads: int | None = None) -> None:
        """Fill grad_input; it may run again after the arrays' contents change.

        Parameters
        ----------
        workspace : writeable buffer, optional
            At least `workspace_size` bytes (a uint8 ndarray, a bytearray, ...); with one,
            execute allocates nothing.  None allocates it here.
        stream : Stream, optional
            None runs the call now; a `Stream` queues it and returns at once (its
            ``synchronize()`` waits and re-raises the first error).
        n_threads : int, optional
            The most OpenMP threads to use; None takes the library default.  The result
            is bitwise the same for every thread count.

        Raises
        ------
        ParamInvalidError
            A workspace too small or not a writeable contiguous buffer, a bad n_threads or
            stream, or (max pool) an index outside its plane.

        Notes
        -----
        Where grad_input is larger than 8 MiB, the first thirteen calls time two store
        forms (streaming or ordinary stores) and later calls use the faster: the same bits.
        A float64 average-pool gradient over 1 MiB whose planes go in strips (stride 1)
        also times the row form beside each store form: thirteen calls up to 8 MiB, 25 (four
        forms) past it (``_kernel.tune_calls``).
        """
        # budget 0: the default, which the kernel computes (no Python call for it); a
        # plain int in range taken as it is (no call either)
        if n_threads is None:
            budget = 0
        elif type(n_threads) is int and 0 < n_threads <= _threads.MAX_THREADS:
            budget = n_threads
        else:
            budget = _threads.requested(n_threads)
        if stream is None:
            if self._kernel is not None:
                status = self._kernel.run(workspace, budget, self._workspace_size)
                if status:   # 0: done (no call on the common path)
                    self._status(status)
            else:
                self._status(None)
            return None
        if not isinstance(stream, Stream):
            raise invalid("stream", "must be None or a pool_grad.Stream",
                          type(stream).__name__)
        budget = budget or _threads.get_num_threads()   # the default when queued
        if workspace is not None:
            self._check_workspace(workspace)
        stream._submit(lambda: self.execute(workspace, None, budget))
        return None

    def _check_workspace(self, workspace):
        try:
            mv = memoryview(workspace)
        except TypeError:
            raise invalid("workspace", "must be None or a writeable contiguous buffer",
                          type(workspace).__name__) from None
        if mv.readonly or not mv.c_contiguous:
            raise invalid("workspace", "must be None or a writeable contiguous buffer",
                          "a read-only or strided buffer")
        if "O" in mv.format or "T" in mv.format:
            raise invalid("workspace", "must hold plain bytes or numbers (no objects or "
                          "records)", f"buffer format {mv.format!r}")
        if mv.nbytes < self._workspace_size:
            raise invalid("workspace", f"must hold at least workspace_size = "
                          f"{self._workspace_size} bytes", f"{mv.nbytes} bytes")

    def _status(self, status):
        """React to the kernel's status (0: done); the max-pool gradient overrides it."""

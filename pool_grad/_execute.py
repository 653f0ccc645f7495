"""Execution, shared by all operators: the plan -> execute object (aclnn's two phases),
its workspace, its thread count and its stream."""
import numpy as np

from . import _threads
from ._errors import invalid
from ._stream import Stream

# the workspace start is rounded up to this many bytes, which workspace_size includes
ALIGN = 64


class Operator:
    """A validated, planned call.  Construction has done every check that does not
    depend on array values; ``execute`` runs the kernel (again, if called again)."""

    _kernel = None

    def _planned(self, kernel, acc_dtype, nbytes):
        self._kernel = kernel
        self._acc = np.dtype(acc_dtype)
        self._nbytes = int(nbytes)
        self._n_items = 0 if kernel is None else kernel.n_items
        self._per_thread = 0 if kernel is None else kernel.scratch_elems * self._acc.itemsize
        if self._n_items == 0:
            self._workspace_size = 0
        else:
            nt = _threads.for_work(_threads.get_num_threads(), self._nbytes, self._n_items)
            self._workspace_size = self._per_thread * nt + ALIGN

    @property
    def workspace_size(self):
        """Bytes of workspace ``execute`` needs (for the thread count at planning)."""
        return self._workspace_size

    def execute(self, workspace=None, stream=None, n_threads=None):
        """Fill grad_input.  ``workspace``: None (allocated here) or a writeable buffer of
        at least workspace_size bytes; ``stream``: None (run now) or a Stream (queued);
        ``n_threads``: None (library default) or a positive int."""
        nt = _threads.for_work(_threads.requested(n_threads), self._nbytes, self._n_items)
        scratch = None
        if workspace is not None:
            scratch, nt = self._scratch_from(workspace, nt)
        if stream is None:
            self._run(scratch, nt)
            return None
        if not isinstance(stream, Stream):
            raise invalid("stream", "must be None or a pool_grad.Stream", type(stream).__name__)
        stream._submit(lambda: self._run(scratch, nt))
        return None

    def _scratch_from(self, workspace, nt):
        try:
            mv = memoryview(workspace)
        except TypeError:
            raise invalid("workspace", "must be None or a writeable buffer",
                          type(workspace).__name__) from None
        if mv.readonly:
            raise invalid("workspace", "must be writeable", "a read-only buffer")
        if not mv.c_contiguous:
            raise invalid("workspace", "must be contiguous", "a strided buffer")
        if mv.nbytes < self._workspace_size:
            raise invalid("workspace", f"must hold at least workspace_size = "
                          f"{self._workspace_size} bytes", f"{mv.nbytes} bytes")
        if self._n_items == 0:
            return None, nt
        raw = np.frombuffer(mv.cast("B") if mv.ndim != 1 or mv.format != "B" else mv,
                            np.uint8)
        off = -raw.__array_interface__["data"][0] % ALIGN
        fit = (raw.nbytes - off) // self._per_thread
        nt = max(1, min(nt, fit))
        return raw[off:off + nt * self._per_thread].view(self._acc), nt

    def _run(self, scratch, nt):
        if self._n_items == 0:
            return
        if scratch is None:
            scratch = np.empty(nt * self._kernel.scratch_elems, self._acc)
        self._check_values(nt)
        self._kernel.run(scratch, nt)

    def _check_values(self, nt):
        """Value-dependent checks that must pass before anything is written."""

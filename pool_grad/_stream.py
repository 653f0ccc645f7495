"""Stream: an in-order queue of executes on one worker thread (aclnn's aclrtStream)."""
import queue
import threading
import weakref


def _work(jobs, errors, lock):
    """The worker: runs jobs in order until the stop sentinel (None).  It holds no
    reference to its Stream, so a Stream that is dropped is collected and stops it."""
    while True:
        job = jobs.get()
        try:
            if job is None:
                return
            job()
        except BaseException as exc:  # kept for synchronize, never lost
            with lock:
                errors.append(exc)
        finally:
            jobs.task_done()


class Stream:
    """An in-order queue of executes, like aclnn's stream.

    Work submitted with ``op.execute(stream=s)`` runs on this stream's worker thread in
    submission order; ``synchronize()`` waits for all of it and re-raises the first error
    (once).  A failing job does not stop later ones.  The worker starts with the first
    job and stops when the Stream is garbage-collected.  See `AdaptiveAvgPool3dBackward`
    for an example.
    """

    def __init__(self) -> None:
        self._jobs = queue.Queue()
        self._errors = []
        self._lock = threading.Lock()
        self._worker = None

    def _submit(self, job):
        with self._lock:
            if self._worker is None or not self._worker.is_alive():
                self._worker = threading.Thread(
                    target=_work, args=(self._jobs, self._errors, self._lock),
                    name="pool_grad-stream", daemon=True)
                self._worker.start()
                weakref.finalize(self, self._jobs.put, None)
        self._jobs.put(job)

    def synchronize(self) -> None:
        """Wait until every submitted job has run; raise the first error since the last
        synchronize, if any."""
        done = threading.Event()
        self._submit(done.set)
        while not done.wait(0.05):  # a timed wait keeps Ctrl-C deliverable
            pass
        with self._lock:
            errors = self._errors[:]
            del self._errors[:]
        if errors:
            raise errors[0]

    def __repr__(self) -> str:
        return f"<pool_grad.Stream pending={self._jobs.unfinished_tasks}>"

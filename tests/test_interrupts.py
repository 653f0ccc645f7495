"""Interrupts (issue #6, point 6): Ctrl-C (SIGINT) during a long call, or during
Stream.synchronize, leaves the interpreter usable: the KeyboardInterrupt arrives, and the
same process then computes correct results (on the same Stream, too)."""
import os
import signal
import subprocess

from conftest import child_kwargs
import sys
import textwrap
import time

import pytest

pytestmark = pytest.mark.skipif(os.name != "posix", reason="sends SIGINT")

_CHILD = textwrap.dedent("""
    import sys, time, numpy as np, pool_grad as pg
    mode = sys.argv[1]
    # a long call: a zero-stride grad_output of 2**29 elements scattered to one index
    go = np.broadcast_to(np.float32(1), (1, 1, 2**14, 2**15))
    ind = np.broadcast_to(np.int64(3), go.shape)
    def check_usable(stream=None):
        g = np.arange(4, dtype=np.float32).reshape(1, 1, 2, 2)
        gi = np.zeros((1, 1, 4, 4), np.float32)
        op = pg.AvgPool2dBackward(g, gi.shape, 2, 2, 0, False, True, 0, 0, gi)
        op.execute(stream=stream)
        if stream is not None:
            stream.synchronize()
        assert np.array_equal(gi, g.repeat(2, 2).repeat(2, 3) / 4), gi
        print("USABLE", flush=True)
    stream = pg.Stream()
    try:
        if mode == "call":
            print("START", flush=True)
            pg.adaptive_max_pool2d_backward(go, (1, 1, 4, 4), ind)
        else:
            gi = np.zeros((1, 1, 4, 4), np.float32)
            pg.AdaptiveMaxPool2dBackward(go, gi.shape, ind, gi).execute(stream=stream)
            print("START", flush=True)
            stream.synchronize()
        print("FINISHED BEFORE THE SIGNAL", flush=True)
    except KeyboardInterrupt:
        print("INTERRUPTED", flush=True)
    if mode == "sync":
        stream.synchronize()   # the long job still completes; no error is left behind
    check_usable()
    check_usable(stream)
""")


@pytest.mark.parametrize("mode", ["call", "sync"])
def test_sigint_leaves_interpreter_usable(mode):
    proc = subprocess.Popen([sys.executable, "-c", _CHILD, mode], **child_kwargs(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "START"
        time.sleep(0.5)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        pytest.fail("the child hung after SIGINT")
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err[-3000:]
    assert "INTERRUPTED" in out or "FINISHED BEFORE THE SIGNAL" in out, out
    assert out.count("USABLE") == 2, out + err[-2000:]

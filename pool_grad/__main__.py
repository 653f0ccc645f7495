"""python -m pool_grad: the worked examples of SPEC section 5, then one realistic timing
per operator, on built-in data."""
import sys
import time

import numpy as np

import pool_grad as pg


def _section(title):
    print(f"\n== {title}")


def examples():
    _section("AvgPool2dBackward: grad_output ones (1,16,1,1), x (1,16,4,4), kernel 4, "
             "stride 1, padding 0")
    gi = pg.avg_pool2d_backward(np.ones((1, 16, 1, 1), np.float32), (1, 16, 4, 4), 4, 1, 0)
    print(f"grad_input {gi.shape}, plane 0:\n{gi[0, 0]}")

    _section("AdaptiveAvgPool3dBackward: grad_output (2,2,1,1,2) = 1..8, x (2,2,1,1,4)")
    go = np.arange(1, 9, dtype=np.float32).reshape(2, 2, 1, 1, 2)
    gi = pg.adaptive_avg_pool3d_backward(go, (2, 2, 1, 1, 4))
    print(gi.reshape(4, 4))

    _section("AdaptiveMaxPool2dBackward: grad_output [[[[0.4757]]]], x (1,1,2,2)")
    go = np.array([[[[0.4757]]]], np.float32)
    try:
        pg.adaptive_max_pool2d_backward(go, (1, 1, 2, 2), np.array([[[[6]]]]))
    except pg.ParamInvalidError as exc:
        print(f"indices [[[[6]]]] -> {type(exc).__name__} code {exc.code}:\n  {exc}")
    gi = pg.adaptive_max_pool2d_backward(go, (1, 1, 2, 2), np.array([[[[0]]]]))
    print(f"indices [[[[0]]]] -> grad_input\n{gi[0, 0]}")


def _best(fn, repeats=7):
    fn()
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def timings():
    rng = np.random.default_rng(0)
    threads = pg.get_num_threads()
    _section(f"timings ({threads} threads; best of 7, preallocated output, two-phase op)")
    cases = []
    go = rng.standard_normal((32, 64, 56, 56), dtype=np.float32)
    gi = np.empty((32, 64, 112, 112), np.float32)
    cases.append(("avg_pool2d_backward 32x64x112x112 k3 s2 p1 float32",
                  pg.AvgPool2dBackward(go, gi, 3, 2, 1, False, True, 0, 0, gi), go, gi))
    go = rng.standard_normal((4, 32, 4, 8, 8), dtype=np.float32)
    gi = np.empty((4, 32, 16, 64, 64), np.float32)
    cases.append(("adaptive_avg_pool3d_backward 4x32x16x64x64 -> 4x8x8 float32",
                  pg.AdaptiveAvgPool3dBackward(go, gi, gi), go, gi))
    x = rng.standard_normal((32, 64, 112, 112), dtype=np.float32)
    y, ind = pg.adaptive_max_pool2d(x, (56, 56), return_indices=True)
    go = rng.standard_normal(y.shape, dtype=np.float32)
    gi = np.empty_like(x)
    cases.append(("adaptive_max_pool2d_backward 32x64x112x112 -> 56x56 float32",
                  pg.AdaptiveMaxPool2dBackward(go, x, ind, gi), go, gi))
    for name, op, go, gi in cases:
        ws = np.empty(op.workspace_size, np.uint8)
        t = _best(lambda: op.execute(workspace=ws))
        moved = go.nbytes + gi.nbytes + getattr(op, "indices", go[:0]).nbytes
        print(f"{name}: {t * 1e3:.2f} ms ({moved / t / 1e9:.1f} GB/s of grad_output"
              f"{' + indices' if hasattr(op, 'indices') else ''} + grad_input traffic)")


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    print(f"pool_grad {pg.__version__}")
    examples()
    if "--no-timing" not in argv:
        timings()
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""python -m pool_grad: the worked example of every operator (SPEC sections 5 and 6), then
realistic timings on built-in data.  ``python -m pool_grad golden ...`` writes CANN golden
data instead (pool_grad.golden)."""
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

    _section("AvgPool3dBackward: grad_output ones (1,16,1,1,1), x (1,16,4,4,4), kernel 4, "
             "stride 1, padding 0, count_include_pad False")
    gi = pg.avg_pool3d_backward(np.ones((1, 16, 1, 1, 1), np.float32), (1, 16, 4, 4, 4), 4, 1,
                                0, count_include_pad=False)
    print(f"grad_input {gi.shape}, every element {np.unique(gi)}")

    _section("AdaptiveAvgPool2dBackward: grad_output (1,1,3,2) = 1..6, x (1,1,4,2)")
    go = np.arange(1, 7, dtype=np.float32).reshape(1, 1, 3, 2)
    print(pg.adaptive_avg_pool2d_backward(go, (1, 1, 4, 2))[0, 0])

    go = np.full((1, 1, 1, 1, 1), 0.4757, np.float32)
    idx = np.full((1, 1, 1, 1, 1), 6, np.int32)
    _section("AdaptiveMaxPool3dBackward: grad_output [0.4757], x (1,1,2,2,2), indices [6]")
    print(f"grad_input flat {pg.adaptive_max_pool3d_backward(go, (1, 1, 2, 2, 2), idx).ravel()}")

    _section("MaxPool2dWithIndicesBackward: grad_output (1,1,2,1) = [0.4757, 0.1726], "
             "x (1,1,4,3), indices [0, 6], kernel 2, stride 2")
    go2 = np.array([0.4757, 0.1726], np.float32).reshape(1, 1, 2, 1)
    gi = pg.max_pool2d_with_indices_backward(go2, (1, 1, 4, 3),
                                             np.array([0, 6]).reshape(1, 1, 2, 1), 2, 2, 0, 1)
    print(gi[0, 0])

    _section("MaxPool3dWithArgmaxBackward: grad_output [0.4757], x (1,1,2,2,2), indices [6], "
             "kernel 2, stride 2")
    gi = pg.max_pool3d_with_argmax_backward(go, (1, 1, 2, 2, 2), idx, 2, 2, 0, 1)
    print(f"grad_input flat {gi.ravel()}")


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
    go = rng.standard_normal((8, 64, 8, 28, 28), dtype=np.float32)
    gi = np.empty((8, 64, 16, 56, 56), np.float32)
    cases.append(("avg_pool3d_backward 8x64x16x56x56 k3 s2 p1 float32",
                  pg.AvgPool3dBackward(go, gi, 3, 2, 1, False, True, 0, gi), go, gi))
    x = rng.standard_normal((32, 64, 112, 112), dtype=np.float32)
    y, ind = pg.max_pool2d(x, 3, 2, 1, return_indices=True)
    go = rng.standard_normal(y.shape, dtype=np.float32)
    gi = np.empty_like(x)
    cases.append(("max_pool2d_with_indices_backward 32x64x112x112 k3 s2 p1 float32",
                  pg.MaxPool2dWithIndicesBackward(go, x, ind, 3, 2, 1, 1, False, gi), go, gi))
    for name, op, go, gi in cases:
        ws = np.empty(op.workspace_size, np.uint8)
        t = _best(lambda: op.execute(workspace=ws))
        moved = go.nbytes + gi.nbytes + getattr(op, "indices", go[:0]).nbytes
        print(f"{name}: {t * 1e3:.2f} ms ({moved / t / 1e9:.1f} GB/s of grad_output"
              f"{' + indices' if hasattr(op, 'indices') else ''} + grad_input traffic)")


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["golden"]:
        # python -m pool_grad golden aclnn<Name> ...: CANN golden data (pool_grad.golden)
        from pool_grad.golden import main as golden_main
        return golden_main(argv[1:])
    print(f"pool_grad {pg.__version__}")
    examples()
    if "--no-timing" not in argv:
        timings()
    return 0


if __name__ == "__main__":
    sys.exit(main())

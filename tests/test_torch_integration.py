"""pool_grad.torch (issue #58): autograd functions whose backward is pool_grad's, and
`enable()`, which makes pool_grad aten's CPU pooling-backward kernels for unchanged models.

PyTorch is an optional peer: every test that needs it skips without it, except the two that
pin what happens without it (they run in a child interpreter)."""
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from conftest import child_kwargs


@pytest.fixture(scope="module")
def torch():
    return pytest.importorskip("torch")


@pytest.fixture(scope="module")
def pt(torch):
    import pool_grad.torch
    return pool_grad.torch


@pytest.fixture(autouse=True)
def _switched_off_afterwards():
    """No test leaves pool_grad registered in aten, whatever it asserts."""
    yield
    mod = sys.modules.get("pool_grad.torch")
    if mod is not None:
        mod.disable()


def _child(code):
    # (from outside the checkout, whose uncompiled pool_grad/ would come first on the path)
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                         text=True, timeout=120, **child_kwargs())
    assert out.returncode == 0, out.stderr
    return out.stdout


# -- without torch ------------------------------------------------------------------------

def test_import_pool_grad_does_not_import_torch():
    out = _child("""
        import sys
        import pool_grad
        print("torch" in sys.modules)
    """)
    assert out.strip() == "False"


def test_import_pool_grad_torch_without_torch_names_the_pinned_pip_command():
    out = _child("""
        import sys
        sys.modules["torch"] = None      # what an environment without PyTorch looks like
        import pool_grad                 # the package itself works
        try:
            import pool_grad.torch
        except ImportError as exc:
            print(exc)
        else:
            print("imported")
    """)
    assert "pip install torch==2.13.0" in out


# -- helpers ------------------------------------------------------------------------------

def _distinct(torch, shape, dtype=None, seed=0):
    """Values with no ties (a random permutation), so argmax is stable under gradcheck's
    perturbations."""
    g = torch.Generator().manual_seed(seed)
    n = int(np.prod(shape))
    v = torch.randperm(n, generator=g).to(torch.float64) / n
    return v.reshape(shape).to(dtype or torch.float64)


# (name, pool_grad.torch call, torch.nn.functional call, input shape) -- every operator
# with a configuration off the defaults
CASES = {
    "avg_pool2d": (lambda m, x: m.avg_pool2d(x, 3, 2, 1, ceil_mode=True,
                                             count_include_pad=False), (2, 3, 7, 8)),
    "avg_pool2d_divisor": (lambda m, x: m.avg_pool2d(x, (2, 3), (1, 2), (1, 0),
                                                     divisor_override=5), (3, 6, 7)),
    "avg_pool3d": (lambda m, x: m.avg_pool3d(x, 2, 1, 1, count_include_pad=True),
                   (1, 2, 4, 5, 4)),
    "adaptive_avg_pool2d": (lambda m, x: m.adaptive_avg_pool2d(x, (3, 5)), (2, 3, 7, 8)),
    "adaptive_avg_pool3d": (lambda m, x: m.adaptive_avg_pool3d(x, (2, 3, None)),
                            (1, 2, 5, 4, 3)),
    "adaptive_max_pool2d": (lambda m, x: m.adaptive_max_pool2d(x, (3, 5)), (2, 3, 7, 8)),
    "adaptive_max_pool3d": (lambda m, x: m.adaptive_max_pool3d(x, (2, 3, 2)),
                            (1, 2, 5, 4, 3)),
    "max_pool2d": (lambda m, x: m.max_pool2d(x, 3, 2, 1, dilation=2, ceil_mode=True),
                   (2, 3, 9, 8)),
    "max_pool3d": (lambda m, x: m.max_pool3d(x, (2, 3, 2), (1, 2, 2), (1, 1, 0),
                                             ceil_mode=True), (1, 2, 4, 6, 5)),
}


# -- the autograd functions ---------------------------------------------------------------

@pytest.mark.parametrize("case", sorted(CASES))
def test_autograd_functions_pass_gradcheck_in_float64(torch, pt, case):
    call, shape = CASES[case]
    x = _distinct(torch, shape).requires_grad_()
    pt.reset_call_counts()
    assert torch.autograd.gradcheck(lambda t: call(pt, t), (x,))
    assert sum(n for (op, who), n in pt.call_counts().items() if who == "pool_grad") > 0


@pytest.mark.parametrize("channels_last", [False, True])
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_autograd_functions_match_torch(torch, pt, case, dtype, channels_last):
    """Same forward as torch.nn.functional, and the gradient of PyTorch's backward: within
    a few ulps in float32/float64; in 16-bit, against a float64 reference with a 16-bit
    tolerance (pool_grad rounds once, PyTorch at every step; SPEC section 4)."""
    call, shape = CASES[case]
    if case == "avg_pool3d" and dtype in ("float16", "bfloat16"):
        pytest.skip("PyTorch has no 16-bit avg_pool3d forward on the CPU")
    dt = getattr(torch, dtype)
    x64 = _distinct(torch, shape, seed=1)
    if channels_last and len(shape) in (4, 5):
        fmt = torch.channels_last if len(shape) == 4 else torch.channels_last_3d
        x64 = x64.contiguous(memory_format=fmt)
    x = x64.to(dt).requires_grad_()
    y = call(pt, x)
    gy = _distinct(torch, y.shape, seed=2).to(dt) - 0.5
    y.backward(gy)
    y_ref = call(torch.nn.functional, x.detach())
    assert torch.equal(y.detach(), y_ref)
    # the reference: PyTorch's kernels on the same values in float64
    x_ref = x.detach().to(torch.float64).requires_grad_()
    call(torch.nn.functional, x_ref).backward(gy.to(torch.float64))
    tol = {"float64": 1e-12, "float32": 1e-6, "float16": 2e-3, "bfloat16": 1.6e-2}[dtype]
    torch.testing.assert_close(x.grad.to(torch.float64), x_ref.grad, rtol=tol, atol=tol)
    assert x.grad.dtype == dt and x.grad.shape == x.shape


def test_autograd_functions_return_indices_like_torch(torch, pt):
    x = _distinct(torch, (2, 3, 8, 8), torch.float32)
    F = torch.nn.functional
    for ours, theirs in [
            (pt.max_pool2d(x, 3, 2, 1, return_indices=True),
             F.max_pool2d(x, 3, 2, 1, return_indices=True)),
            (pt.adaptive_max_pool2d(x, 3, return_indices=True),
             F.adaptive_max_pool2d(x, 3, return_indices=True)),
            (pt.max_pool3d(x, 2, return_indices=True),
             F.max_pool3d(x, 2, return_indices=True)),
            (pt.adaptive_max_pool3d(x, (1, 2, 3), return_indices=True),
             F.adaptive_max_pool3d(x, (1, 2, 3), return_indices=True))]:
        assert torch.equal(ours[0], theirs[0]) and torch.equal(ours[1], theirs[1])


def test_autograd_functions_write_gradients_in_place_of_a_preallocated_tensor(torch, pt,
                                                                              monkeypatch):
    """Zero-copy: pool_grad writes grad_input through a numpy view of the tensor that
    autograd receives (allocated with x's layout), reading grad_output in place."""
    import pool_grad.torch as mod
    seen = {}
    real = mod._BACKWARDS["max_pool2d_with_indices_backward"]

    def spy(*args):
        gi = real(*args)
        seen["channels_last"] = gi.is_contiguous(memory_format=torch.channels_last)
        seen["ptr"] = gi.data_ptr()    # no reference kept: autograd may take the tensor
        return gi
    monkeypatch.setitem(mod._BACKWARDS, "max_pool2d_with_indices_backward", spy)
    x = _distinct(torch, (2, 4, 6, 6), torch.float32).contiguous(
        memory_format=torch.channels_last).requires_grad_()
    x.grad = None
    pt.max_pool2d(x, 2).sum().backward()
    assert seen["channels_last"]
    assert x.grad.data_ptr() == seen["ptr"]    # x.grad is the very tensor pool_grad wrote


def test_double_backward_goes_through_torch_and_is_right(torch, pt):
    x = _distinct(torch, (1, 1, 5, 6)).requires_grad_()
    assert torch.autograd.gradgradcheck(lambda t: pt.avg_pool2d(t, 3, 2, 1), (x,))
    assert torch.autograd.gradgradcheck(lambda t: pt.max_pool2d(t, 2), (x,))
    assert torch.autograd.gradgradcheck(lambda t: pt.adaptive_avg_pool3d(t, (1, 3, 2)), (x,))


def test_non_cpu_tensors_use_torchs_backward(torch, pt):
    """Tensors pool_grad cannot read (here on the meta device; CUDA likewise) go to the
    aten operator."""
    pt.reset_call_counts()
    x = torch.empty(2, 3, 8, 8, device="meta", requires_grad=True)
    for y in (pt.avg_pool2d(x, 2), pt.max_pool2d(x, 2), pt.adaptive_avg_pool2d(x, 3),
              pt.adaptive_max_pool2d(x, 3)):
        (gx,) = torch.autograd.grad(y.sum(), x)
        assert gx.device.type == "meta" and gx.shape == x.shape
    assert pt.call_counts() == {}


def test_what_pool_grad_refuses_uses_torchs_backward(torch, pt):
    """3-D max pooling with dilation > 1 is outside pool_grad's rules (SPEC 6.5): PyTorch
    computes it, and gets its own answer."""
    x = _distinct(torch, (1, 2, 7, 7, 7), torch.float32).requires_grad_()
    pt.reset_call_counts()
    (g,) = torch.autograd.grad(pt.max_pool3d(x, 2, 1, 1, dilation=2).sum(), x)
    (g_ref,) = torch.autograd.grad(
        torch.nn.functional.max_pool3d(x, 2, 1, 1, dilation=2).sum(), x)
    assert torch.equal(g, g_ref)
    assert pt.call_counts() == {}


# -- enable(): unchanged models ------------------------------------------------------------

def _net2d(torch):
    nn, F = torch.nn, torch.nn.functional

    class Net2d(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
            self.conv2 = nn.Conv2d(8, 8, 3, padding=1)
            self.fc = nn.Linear(8 * 3 * 3 + 8 * 2 * 2, 5)

        def forward(self, x):
            x = F.relu(self.conv1(x))                                # 20x20
            x = F.max_pool2d(x, 3, 2, 1)                             # 10x10
            x = F.avg_pool2d(x, 3, 1, 1, count_include_pad=False)
            x = F.relu(self.conv2(x))
            x = F.max_pool2d(x, 3, 1, 1, dilation=2, ceil_mode=True)  # 8x8
            x = F.avg_pool2d(x, 2, ceil_mode=True, divisor_override=3)
            a = F.adaptive_avg_pool2d(x, (3, 3))
            m = F.adaptive_max_pool2d(x, (2, 2))
            return self.fc(torch.cat([a.flatten(1), m.flatten(1)], 1))
    return Net2d(), (4, 3, 20, 20)


def _net3d(torch):
    nn, F = torch.nn, torch.nn.functional

    class Net3d(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv3d(2, 4, 3, padding=1)
            self.fc = nn.Linear(4 * 2 * 3 * 2 + 4 * 2 * 2 * 2, 5)

        def forward(self, x):
            x = F.relu(self.conv(x))                                  # 8x10x9
            x = F.avg_pool3d(x, 2, 1, 1, count_include_pad=False)     # 9x11x10
            x = F.max_pool3d(x, 3, 2, 1, ceil_mode=True)              # 5x6x5
            a = F.adaptive_avg_pool3d(x, (2, 3, 2))
            m = F.adaptive_max_pool3d(x, (2, 2, 2))
            return self.fc(torch.cat([a.flatten(1), m.flatten(1)], 1))
    return Net3d(), (3, 2, 8, 10, 9)


OPS_2D = {"max_pool2d_with_indices_backward", "avg_pool2d_backward",
          "_adaptive_avg_pool2d_backward", "adaptive_max_pool2d_backward"}
OPS_3D = {"avg_pool3d_backward", "max_pool3d_with_indices_backward",
          "_adaptive_avg_pool3d_backward", "adaptive_max_pool3d_backward"}


def _train_step(torch, net, x, y):
    """One SGD step; returns the parameter gradients it used."""
    net.zero_grad()
    loss = torch.nn.functional.cross_entropy(net(x), y)
    loss.backward()
    grads = {k: p.grad.clone() for k, p in net.named_parameters()}
    with torch.no_grad():
        for p in net.parameters():
            p -= 0.1 * p.grad
    return grads


@pytest.mark.parametrize("channels_last", [False, True])
@pytest.mark.parametrize("make_net, ops", [(_net2d, OPS_2D), (_net3d, OPS_3D)],
                         ids=["2d", "3d"])
def test_enable_trains_an_unchanged_model_like_torch(torch, pt, make_net, ops,
                                                     channels_last):
    torch.manual_seed(0)
    net, shape = make_net(torch)
    x = torch.randn(shape)
    if channels_last:
        x = x.contiguous(memory_format=torch.channels_last if len(shape) == 4
                         else torch.channels_last_3d)
        net = net.to(memory_format=torch.channels_last if len(shape) == 4
                     else torch.channels_last_3d)
    y = torch.randint(0, 5, (shape[0],))
    state = {k: v.clone() for k, v in net.state_dict().items()}

    pt.reset_call_counts()
    ref = _train_step(torch, net, x, y)
    assert pt.call_counts() == {}
    net.load_state_dict(state)
    with pt.enable():
        assert pt.is_enabled()
        ours = _train_step(torch, net, x, y)
    counts = pt.call_counts()
    assert {op for (op, who) in counts if who == "pool_grad"} == ops   # pool_grad ran
    assert not any(who == "torch" for (op, who) in counts)
    for k in ref:
        torch.testing.assert_close(ours[k], ref[k], rtol=1e-4, atol=1e-6)
    # and the step itself is the same step
    after = {k: v.clone() for k, v in net.state_dict().items()}
    net.load_state_dict(state)
    _train_step(torch, net, x, y)
    for k, v in net.state_dict().items():
        torch.testing.assert_close(after[k], v, rtol=1e-4, atol=1e-6)

    # leaving the block put PyTorch's kernels back: the counters stand still
    assert not pt.is_enabled()
    _train_step(torch, net, x, y)
    assert pt.call_counts() == counts


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_enable_16bit_gradients_are_within_16bit_tolerance(torch, pt, dtype):
    F = torch.nn.functional
    dt = getattr(torch, dtype)

    def f(x):   # every pooling on x itself: the 16-bit and float64 argmaxes agree
        return (F.max_pool2d(x, 3, 2, 1).sum() + F.avg_pool2d(x, 3, 1, 1).sum()
                + F.adaptive_avg_pool2d(x, 5).sum() + F.adaptive_max_pool2d(x, 5).sum()
                + F.adaptive_avg_pool3d(x, 3).sum() + F.max_pool3d(x, 2).sum())
    x = _distinct(torch, (2, 4, 12, 12), dt, seed=3).requires_grad_()
    x64 = x.detach().to(torch.float64).requires_grad_()    # the same values
    (g_ref,) = torch.autograd.grad(f(x64), x64)
    pt.reset_call_counts()
    with pt.enable():
        (g,) = torch.autograd.grad(f(x), x)
    assert g.dtype == dt
    assert len(pt.call_counts()) == 6 and all(w == "pool_grad" for _, w in pt.call_counts())
    tol = 2e-3 if dtype == "float16" else 1.6e-2
    torch.testing.assert_close(g.to(torch.float64), g_ref, rtol=tol, atol=tol)


def test_enable_passes_gradcheck_for_every_operator(torch, pt):
    F = torch.nn.functional
    x2 = _distinct(torch, (1, 2, 5, 6)).requires_grad_()
    x3 = _distinct(torch, (1, 1, 4, 5, 4), seed=5).requires_grad_()
    calls = [(lambda t: F.avg_pool2d(t, 3, 2, 1, count_include_pad=False), x2),
             (lambda t: F.adaptive_avg_pool2d(t, (4, 3)), x2),
             (lambda t: F.adaptive_max_pool2d(t, (3, 4)), x2),
             (lambda t: F.max_pool2d(t, 2, 1, 1, dilation=2, ceil_mode=True), x2),
             (lambda t: F.avg_pool3d(t, 2, 2, 1, ceil_mode=True, divisor_override=3), x3),
             (lambda t: F.adaptive_avg_pool3d(t, (3, 2, 3)), x3),
             (lambda t: F.adaptive_max_pool3d(t, (2, 3, 2)), x3),
             (lambda t: F.max_pool3d(t, 2, 1, 1), x3)]
    pt.reset_call_counts()
    with pt.enable():
        for f, x in calls:
            assert torch.autograd.gradcheck(f, (x,))
    assert {op for (op, who) in pt.call_counts() if who == "pool_grad"} == set(pt.ATEN_OPS)


def test_enable_hands_what_pool_grad_refuses_to_torchs_own_kernel(torch, pt):
    F = torch.nn.functional
    x = _distinct(torch, (1, 2, 7, 7, 7), torch.float32).requires_grad_()
    (g_ref,) = torch.autograd.grad(F.max_pool3d(x, 2, 1, 1, dilation=2).sum(), x)
    pt.reset_call_counts()
    with pt.enable():
        # dilation > 1 in 3-D max pooling: outside pool_grad's rules (SPEC 6.5)
        (g,) = torch.autograd.grad(F.max_pool3d(x, 2, 1, 1, dilation=2).sum(), x)
        # divisor_override=0 is PyTorch's error, not pool_grad's "unset": PyTorch raises it
        go, xx = torch.ones(1, 1, 2, 2), torch.ones(1, 1, 4, 4)
        with pytest.raises(RuntimeError, match="divisor"):
            torch.ops.aten.avg_pool2d_backward(go, xx, [2, 2], [2, 2], [0, 0], False, True, 0)
        # dtypes pool_grad does not take reach PyTorch's kernel, which decides
        with pytest.raises(RuntimeError, match="dtype double"):
            torch.ops.aten._adaptive_avg_pool2d_backward(
                torch.ones(1, 1, 2, 2), torch.ones(1, 1, 4, 4, dtype=torch.float64))
    assert torch.equal(g, g_ref)
    assert pt.call_counts() == {("max_pool3d_with_indices_backward", "torch"): 1,
                                ("avg_pool2d_backward", "torch"): 1,
                                ("_adaptive_avg_pool2d_backward", "torch"): 1}


def test_enable_nests_reenters_and_disable_switches_everything_off(torch, pt):
    F = torch.nn.functional
    x = _distinct(torch, (1, 2, 6, 6), torch.float32).requires_grad_()

    def ours():
        pt.reset_call_counts()
        torch.autograd.grad(F.avg_pool2d(x, 2).sum(), x)
        return pt.call_counts().get(("avg_pool2d_backward", "pool_grad"), 0) == 1

    assert not pt.is_enabled() and not ours()
    with pt.enable():
        with pt.enable() as inner:
            assert ours()
        assert pt.is_enabled() and ours()       # the outer block still holds it
        inner.close()                          # closing twice changes nothing
        assert pt.is_enabled() and ours()
    assert not pt.is_enabled() and not ours()
    for _ in range(2):                         # re-entered, and again
        with pt.enable():
            assert ours()
        assert not ours()

    handle = pt.enable()                       # a plain call switches it on...
    assert pt.is_enabled() and ours()
    with pt.enable():
        pt.disable()                           # ...disable() switches everything off
        assert not pt.is_enabled() and not ours()
    handle.close()                             # stale handles do nothing
    assert not pt.is_enabled() and not ours()
    with pt.enable():
        assert ours()
    pt.disable()
    pt.disable()
    assert not pt.is_enabled() and not ours()


def test_readme_example(torch, pt):
    """The README's "PyTorch training" example, verbatim (kept here: the README's python
    blocks also run where torch is missing)."""
    import torch, torch.nn as nn
    import pool_grad.torch

    model = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(),
                          nn.MaxPool2d(3, stride=2, padding=1), nn.AvgPool2d(3, 1, 1),
                          nn.AdaptiveAvgPool2d(4), nn.Flatten(), nn.Linear(16 * 4 * 4, 10))
    x, target = torch.randn(8, 3, 32, 32), torch.randint(0, 10, (8,))
    with pool_grad.torch.enable():          # nests; pool_grad.torch.disable() switches it off
        nn.functional.cross_entropy(model(x), target).backward()
    print(pool_grad.torch.call_counts())    # {('avg_pool2d_backward', 'pool_grad'): 1, ...}

    y = pool_grad.torch.max_pool2d(x.requires_grad_(), 3, 2, 1)   # per call: F's signatures
    y.sum().backward()

    counts = pool_grad.torch.call_counts()
    assert counts[("max_pool2d_with_indices_backward", "pool_grad")] >= 2
    assert counts[("avg_pool2d_backward", "pool_grad")] >= 1
    assert counts[("_adaptive_avg_pool2d_backward", "pool_grad")] >= 1

"""How the public API describes itself: docstring examples run and print what they show,
every operator and forward function documents its parameters with an example, and an
operator's repr names its planned call."""
import doctest

import numpy as np
import pytest

import pool_grad as pg
from pool_grad import _threads, aclnn, forward, functions, golden, ops

MODULES = [functions, ops, forward, _threads, aclnn, golden]

DOCUMENTED = [
    pg.avg_pool2d_backward, pg.adaptive_avg_pool3d_backward, pg.adaptive_max_pool2d_backward,
    pg.AvgPool2dBackward, pg.AdaptiveAvgPool3dBackward, pg.AdaptiveMaxPool2dBackward,
    pg.avg_pool2d, pg.adaptive_avg_pool3d, pg.adaptive_max_pool2d, pg.set_num_threads,
    # SPEC section 6
    pg.avg_pool3d_backward, pg.adaptive_avg_pool2d_backward, pg.adaptive_max_pool3d_backward,
    pg.max_pool2d_with_indices_backward, pg.max_pool3d_with_argmax_backward,
    pg.AvgPool3dBackward, pg.AdaptiveAvgPool2dBackward, pg.AdaptiveMaxPool3dBackward,
    pg.MaxPool2dWithIndicesBackward, pg.MaxPool3dWithArgmaxBackward,
    pg.avg_pool3d, pg.adaptive_avg_pool2d, pg.adaptive_max_pool3d, pg.max_pool2d,
    pg.max_pool3d,
]


@pytest.mark.parametrize("module", MODULES, ids=lambda m: m.__name__)
def test_docstring_examples_print_what_they_show(module):
    saved = _threads.user_threads()   # set_num_threads' example changes the default
    try:
        result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE,
                                 raise_on_error=False, report=True)
    finally:
        pg.set_num_threads(saved)
    assert result.attempted, "no examples found (run with python -OO?)"
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples failed"


@pytest.mark.parametrize("obj", DOCUMENTED, ids=lambda o: o.__name__)
def test_public_callable_documents_parameters_returns_and_an_example(obj):
    doc = obj.__doc__ or ""
    assert "Parameters\n    ----------" in doc
    assert "Examples\n    --------" in doc
    if not isinstance(obj, type) and obj is not pg.set_num_threads:
        assert "Returns\n    -------" in doc


def test_operator_repr_names_arrays_parameters_and_workspace():
    go = np.ones((2, 3, 2, 2), np.float32)
    gi = np.empty((2, 3, 4, 4), np.float32)
    op = pg.AvgPool2dBackward(go, gi.shape, 3, 2, 1, False, False, -2, pg.USE_HF32, gi)
    assert repr(op) == (
        "<pool_grad.AvgPool2dBackward grad_output=float32(2, 3, 2, 2) "
        "grad_input=float32(2, 3, 4, 4) kernel_size=(3, 3) stride=(2, 2) padding=(1, 1) "
        "ceil_mode=False count_include_pad=False divisor_override=-2 cube_math_type=3 "
        f"workspace_size={op.workspace_size}>")
    idx = np.zeros(go.shape, np.int32)
    op = pg.AdaptiveMaxPool2dBackward(go, gi.shape, idx, gi)
    assert repr(op) == (
        "<pool_grad.AdaptiveMaxPool2dBackward grad_output=float32(2, 3, 2, 2) "
        "indices=int32(2, 3, 2, 2) grad_input=float32(2, 3, 4, 4) "
        f"workspace_size={op.workspace_size}>")
    op = pg.AdaptiveAvgPool3dBackward(go[None], (1,) + gi.shape, gi[None])
    assert repr(op).startswith("<pool_grad.AdaptiveAvgPool3dBackward grad_output=float32(1, 2")

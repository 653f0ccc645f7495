"""The public API's docstrings: their examples run and print what they show, and every
operator and forward function documents its parameters with an example."""
import doctest

import pytest

import pool_grad as pg
from pool_grad import _threads, aclnn, forward, functions, ops

MODULES = [functions, ops, forward, _threads, aclnn]

DOCUMENTED = [
    pg.avg_pool2d_backward, pg.adaptive_avg_pool3d_backward, pg.adaptive_max_pool2d_backward,
    pg.AvgPool2dBackward, pg.AdaptiveAvgPool3dBackward, pg.AdaptiveMaxPool2dBackward,
    pg.avg_pool2d, pg.adaptive_avg_pool3d, pg.adaptive_max_pool2d, pg.set_num_threads,
]


@pytest.mark.parametrize("module", MODULES, ids=lambda m: m.__name__)
def test_docstring_examples_print_what_they_show(module):
    saved = _threads._user_threads   # set_num_threads' example changes the default
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

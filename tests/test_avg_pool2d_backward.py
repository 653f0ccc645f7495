"""AvgPool2dBackward (SPEC §1.1, §2, §3, §4, §5): values against the float64 reference and
PyTorch, cube_math_type, every validation rule, memory layouts, thread-count determinism, the
two-phase object and the aclnn layer, streams, and a property test over random valid calls.
"""

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

import pool_grad
from pool_grad import AclnnError, ParamInvalidError, ParamNullptrError
from conftest import (
    BFLOAT16,
    DTYPE_IDS,
    DTYPES,
    LAYOUTS,
    OUT_LAYOUTS,
    as_layout,
    empty_out,
    error_message_names,
    make_array,
    random_values,
)
from reference import (
    ref_avg_pool2d_backward,
    ref_avg_pool2d_output_size,
    ref_round_fp16,
    ref_round_hf32,
    tolerance,
)

# --------------------------------------------------------------------------------------------
# helpers


def pair(v):
    """kernel/stride/padding argument as an (h, w) tuple, SPEC §1.1 (int, length 1 or 2)."""
    if np.ndim(v) == 0:
        return (int(v), int(v))
    v = tuple(int(e) for e in v)
    return v * 2 if len(v) == 1 else v


def norm_stride(stride, kernel_size):
    if stride is None or (np.ndim(stride) == 1 and len(stride) == 0):
        return pair(kernel_size)
    return pair(stride)


def grad_output_shape(x_shape, kernel_size, stride=None, padding=0, ceil_mode=False):
    (kh, kw), (sh, sw), (ph, pw) = pair(kernel_size), norm_stride(stride, kernel_size), \
        pair(padding)
    ho = ref_avg_pool2d_output_size(x_shape[-2], kh, sh, ph, ceil_mode)
    wo = ref_avg_pool2d_output_size(x_shape[-1], kw, sw, pw, ceil_mode)
    return tuple(x_shape[:-2]) + (ho, wo)


def reference(grad_output, x_shape, kernel_size, stride=None, padding=0, ceil_mode=False,
              count_include_pad=True, divisor_override=0):
    return ref_avg_pool2d_backward(grad_output, x_shape, pair(kernel_size),
                                   norm_stride(stride, kernel_size), pair(padding), ceil_mode,
                                   count_include_pad, divisor_override or 0)


def assert_matches(got, expected, dtype):
    rtol, atol = tolerance(dtype)
    assert got.dtype == np.dtype(dtype)
    assert got.shape == expected.shape
    np.testing.assert_allclose(got.astype(np.float64), expected, rtol=rtol, atol=atol)


def raw_bytes(a):
    return np.ascontiguousarray(a).view(np.uint8)


def run_op(grad_output, x, kernel_size, stride=None, padding=0, ceil_mode=False,
           count_include_pad=True, divisor_override=0, cube_math_type=0, grad_input=None):
    """Two-phase path: construct AvgPool2dBackward, execute, return grad_input."""
    if grad_input is None:
        grad_input = np.empty(np.shape(x), dtype=np.asarray(grad_output).dtype)
    op = pool_grad.AvgPool2dBackward(grad_output, x, kernel_size, stride, padding, ceil_mode,
                                     count_include_pad, divisor_override, cube_math_type,
                                     grad_input)
    op.execute()
    return grad_input


def call(api, grad_output, x, kernel_size, stride=None, padding=0, ceil_mode=False,
         count_include_pad=True, divisor_override=0, cube_math_type=0, out=None):
    """The same call through the scikit-style function or the two-phase object."""
    if api == "function":
        return pool_grad.avg_pool2d_backward(
            grad_output, x, kernel_size, stride, padding, ceil_mode=ceil_mode,
            count_include_pad=count_include_pad, divisor_override=divisor_override,
            cube_math_type=cube_math_type, out=out)
    assert api == "op"
    return run_op(grad_output, x, kernel_size, stride, padding, ceil_mode, count_include_pad,
                  divisor_override, cube_math_type, out)


APIS = ["function", "op"]


def assert_error(excinfo, cls, *names):
    err = excinfo.value
    assert isinstance(err, cls)
    assert isinstance(err, AclnnError)
    if cls is ParamNullptrError:
        assert err.code == 161001 and err.name == "ACLNN_ERR_PARAM_NULLPTR"
        assert isinstance(err, TypeError)
    else:
        assert err.code == 161002 and err.name == "ACLNN_ERR_PARAM_INVALID"
        assert isinstance(err, ValueError)
    assert error_message_names(excinfo, *names), \
        f"message {str(err)!r} does not name any of {names}"


GO_NAMES = ("grad_output", "gradOutput")
X_NAMES = ("x", "self")
GI_NAMES = ("grad_input", "gradInput", "out")


# A valid baseline call: x (2, 3, 8, 8), kernel 2 (stride = kernel) -> grad_output (2, 3, 4, 4).
X_SHAPE = (2, 3, 8, 8)
GO_SHAPE = (2, 3, 4, 4)


@pytest.fixture
def base(rng):
    go = random_values(GO_SHAPE, np.float32, rng)
    x = np.zeros(X_SHAPE, np.float32)
    return go, x


# --------------------------------------------------------------------------------------------
# module surface

def test_module_constants_have_aclnn_values():
    assert pool_grad.ACLNN_SUCCESS == 0
    assert pool_grad.ACLNN_ERR_PARAM_NULLPTR == 161001
    assert pool_grad.ACLNN_ERR_PARAM_INVALID == 161002
    assert pool_grad.KEEP_DTYPE == 0
    assert pool_grad.ALLOW_FP32_DOWN_PRECISION == 1
    assert pool_grad.USE_FP16 == 2
    assert pool_grad.USE_HF32 == 3


def test_error_classes_hierarchy():
    assert issubclass(ParamNullptrError, AclnnError) and issubclass(ParamNullptrError, TypeError)
    assert issubclass(ParamInvalidError, AclnnError) and issubclass(ParamInvalidError, ValueError)
    assert issubclass(AclnnError, Exception)


# --------------------------------------------------------------------------------------------
# SPEC §5 worked example

@pytest.mark.parametrize("api", APIS)
def test_spec_example_ones_over_4x4_kernel_give_one_sixteenth(api):
    go = np.ones((1, 16, 1, 1), np.float32)
    x = np.zeros((1, 16, 4, 4), np.float32)
    gi = call(api, go, x, 4, 1, 0, ceil_mode=False, count_include_pad=True)
    assert gi.shape == (1, 16, 4, 4) and gi.dtype == np.float32
    np.testing.assert_array_equal(gi, np.full((1, 16, 4, 4), 0.0625, np.float32))


# --------------------------------------------------------------------------------------------
# the value grid vs the float64 reference (all four dtypes) and vs torch (float32/float64)

CONFIGS = [
    pytest.param(2, None, 0, id="k2"),
    pytest.param(3, 2, 1, id="k3s2p1"),
    pytest.param((3, 2), (2, 1), (1, 0), id="k32s21p10"),
    pytest.param(3, 1, 0, id="k3s1"),
    pytest.param((2, 3), (1, 2), (1, 1), id="k23s12p11"),
    pytest.param(4, 3, 2, id="k4s3p2"),
    pytest.param(1, 1, 0, id="k1"),
    pytest.param([5], [2], [2], id="k5s2p2-len1"),
    pytest.param((3,), (), 0, id="k3-stride-empty"),
]
GRID_SHAPES = [pytest.param((2, 3, 7, 9), id="4d"), pytest.param((3, 8, 5), id="3d")]
DIVISORS = [0, 3, -2]


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("divisor_override", DIVISORS)
@pytest.mark.parametrize("count_include_pad", [True, False], ids=["cip", "nocip"])
@pytest.mark.parametrize("ceil_mode", [False, True], ids=["floor", "ceil"])
@pytest.mark.parametrize("x_shape", GRID_SHAPES)
@pytest.mark.parametrize("kernel_size,stride,padding", CONFIGS)
def test_grid_matches_reference(rng, kernel_size, stride, padding, x_shape, ceil_mode,
                                count_include_pad, divisor_override, dtype):
    go = random_values(grad_output_shape(x_shape, kernel_size, stride, padding, ceil_mode),
                       dtype, rng)
    gi = pool_grad.avg_pool2d_backward(go, np.zeros(x_shape, dtype), kernel_size, stride,
                                       padding, ceil_mode=ceil_mode,
                                       count_include_pad=count_include_pad,
                                       divisor_override=divisor_override)
    expected = reference(go, x_shape, kernel_size, stride, padding, ceil_mode,
                         count_include_pad, divisor_override)
    assert_matches(gi, expected, dtype)


TORCH_TOL = {np.float32: (2e-6, 1e-6), np.float64: (1e-13, 1e-14)}


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float32", "float64"])
@pytest.mark.parametrize("divisor_override", DIVISORS)
@pytest.mark.parametrize("count_include_pad", [True, False], ids=["cip", "nocip"])
@pytest.mark.parametrize("ceil_mode", [False, True], ids=["floor", "ceil"])
@pytest.mark.parametrize("x_shape", GRID_SHAPES)
@pytest.mark.parametrize("kernel_size,stride,padding", CONFIGS)
def test_grid_matches_torch(torch, rng, kernel_size, stride, padding, x_shape, ceil_mode,
                            count_include_pad, divisor_override, dtype):
    go = random_values(grad_output_shape(x_shape, kernel_size, stride, padding, ceil_mode),
                       dtype, rng)
    x = np.zeros(x_shape, dtype)
    expected = torch.ops.aten.avg_pool2d_backward(
        torch.from_numpy(go), torch.from_numpy(x), list(pair(kernel_size)),
        list(norm_stride(stride, kernel_size)), list(pair(padding)), ceil_mode,
        count_include_pad, divisor_override or None).numpy()
    gi = pool_grad.avg_pool2d_backward(go, x, kernel_size, stride, padding,
                                       ceil_mode=ceil_mode, count_include_pad=count_include_pad,
                                       divisor_override=divisor_override)
    rtol, atol = TORCH_TOL[dtype]
    assert gi.dtype == expected.dtype
    np.testing.assert_allclose(gi, expected, rtol=rtol, atol=atol)


MEDIUM_X = (2, 37, 13, 29)  # odd C and W: remainders of any vectorised loop


@pytest.mark.parametrize("go_layout,out_layout", [("c", "c"), ("channels_last", "channels_last"),
                                                  ("channels_last", "c"),
                                                  ("c", "channels_last")])
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("count_include_pad", [True, False], ids=["cip", "nocip"])
@pytest.mark.parametrize("ceil_mode", [False, True], ids=["floor", "ceil"])
@pytest.mark.parametrize("kernel_size,stride,padding", CONFIGS)
def test_medium_grid_in_nchw_and_channels_last_matches_reference(
        rng, kernel_size, stride, padding, ceil_mode, count_include_pad, dtype, go_layout,
        out_layout):
    go = make_array(grad_output_shape(MEDIUM_X, kernel_size, stride, padding, ceil_mode),
                    dtype, rng, go_layout)
    out = empty_out(MEDIUM_X, dtype, out_layout)
    res = pool_grad.avg_pool2d_backward(go, make_array(MEDIUM_X, dtype, rng, go_layout),
                                        kernel_size, stride, padding, ceil_mode=ceil_mode,
                                        count_include_pad=count_include_pad, out=out)
    assert res is out
    assert_matches(out, reference(go, MEDIUM_X, kernel_size, stride, padding, ceil_mode,
                                  count_include_pad), dtype)


@pytest.mark.parametrize("dtype", [np.float16, BFLOAT16], ids=["float16", "bfloat16"])
def test_16bit_results_are_rounded_once_from_float32_accumulation(rng, dtype):
    # SPEC §4: accumulate in float32, round once at the store.  Then nearly every element is
    # the correctly rounded float64 result (the rest sit on exact ties that the float32
    # division nudges); rounding every division and add in 16 bits (PyTorch's CPU way) matches
    # only ~40% of elements on this case.
    x_shape = (2, 8, 20, 20)
    go = random_values(x_shape, dtype, rng)
    gi = pool_grad.avg_pool2d_backward(go, x_shape, 3, 1, 1, count_include_pad=False)
    gi = gi.astype(np.float64)
    ref = reference(go, x_shape, 3, 1, 1, False, False)
    mantissa_bits = 10 if np.dtype(dtype) == np.float16 else 7
    ulp = np.exp2(np.floor(np.log2(np.maximum(np.abs(ref), 1e-30))) - mantissa_bits)
    assert np.all(np.abs(gi - ref) <= ulp + 1e-7)
    assert np.mean(gi == ref.astype(dtype).astype(np.float64)) >= 0.97


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_two_phase_object_matches_reference(rng, dtype):
    x_shape = (2, 4, 9, 7)
    go = random_values(grad_output_shape(x_shape, (3, 2), (2, 1), (1, 1), True), dtype, rng)
    gi = run_op(go, np.zeros(x_shape, dtype), (3, 2), (2, 1), (1, 1), True, False, 0, 0)
    assert_matches(gi, reference(go, x_shape, (3, 2), (2, 1), (1, 1), True, False, 0), dtype)


# --------------------------------------------------------------------------------------------
# argument forms

def test_x_as_shape_tuple_equals_x_as_array(rng):
    go = random_values(GO_SHAPE, np.float32, rng)
    a = pool_grad.avg_pool2d_backward(go, np.zeros(X_SHAPE, np.float32), 2)
    b = pool_grad.avg_pool2d_backward(go, X_SHAPE, 2)
    assert b.dtype == np.float32 and b.shape == X_SHAPE
    np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("kernel_size", [3, [3], (3, 3), np.array([3, 3])],
                         ids=["int", "len1", "len2", "ndarray"])
@pytest.mark.parametrize("stride", [None, (), [], 3, [3], (3, 3)],
                         ids=["None", "empty-tuple", "empty-list", "int", "len1", "len2"])
def test_kernel_and_stride_forms_are_equivalent(rng, kernel_size, stride):
    x_shape = (1, 2, 9, 9)
    go = random_values((1, 2, 3, 3), np.float64, rng)
    gi = pool_grad.avg_pool2d_backward(go, x_shape, kernel_size, stride, [1])
    assert_matches(gi, reference(go, x_shape, 3, 3, 1), np.float64)


@pytest.mark.parametrize("padding", [1, [1], (1, 1)], ids=["int", "len1", "len2"])
def test_padding_forms_are_equivalent(rng, padding):
    go = random_values((1, 2, 3, 3), np.float64, rng)
    gi = pool_grad.avg_pool2d_backward(go, (1, 2, 9, 9), 3, None, padding)
    assert_matches(gi, reference(go, (1, 2, 9, 9), 3, 3, 1), np.float64)


@pytest.mark.parametrize("api", APIS)
def test_divisor_override_none_means_unset(api, rng):
    go = random_values((1, 2, 4, 4), np.float64, rng)
    x = np.zeros((1, 2, 7, 7), np.float64)
    a = call(api, go, x, 3, 2, 1, count_include_pad=False, divisor_override=None)
    b = call(api, go, x, 3, 2, 1, count_include_pad=False, divisor_override=0)
    np.testing.assert_array_equal(a, b)
    assert_matches(a, reference(go, x.shape, 3, 2, 1, False, False, 0), np.float64)


@pytest.mark.parametrize("divisor_override", [-7, -1, 1, 1000])
def test_any_nonzero_divisor_override_replaces_the_divisor(rng, divisor_override):
    go = random_values((2, 4, 4), np.float64, rng)
    gi = pool_grad.avg_pool2d_backward(go, (2, 7, 7), 3, 2, 1,
                                       divisor_override=divisor_override)
    assert_matches(gi, reference(go, (2, 7, 7), 3, 2, 1, False, True, divisor_override),
                   np.float64)


def test_default_return_is_new_c_contiguous_array_of_input_dtype(rng):
    go = make_array((3, 2, 4, 5), np.float16, rng, "f")
    gi = pool_grad.avg_pool2d_backward(go, (3, 2, 8, 10), 2)
    assert isinstance(gi, np.ndarray)
    assert gi.flags.c_contiguous and gi.flags.writeable
    assert gi.dtype == np.float16 and gi.shape == (3, 2, 8, 10)
    assert not np.shares_memory(gi, go)


def test_uncovered_elements_are_written_with_zero(rng):
    # kernel 2, stride 3 on 8x8: windows [0,2) [3,5) [6,8); rows/cols 2 and 5 are in none
    go = random_values((1, 2, 3, 3), np.float32, rng)
    out = np.full((1, 2, 8, 8), np.nan, np.float32)
    pool_grad.avg_pool2d_backward(go, out.shape, 2, 3, out=out)
    for i in (2, 5):
        assert np.all(out[..., i, :] == 0) and np.all(out[..., :, i] == 0)
    assert_matches(out, reference(go, out.shape, 2, 3), np.float32)


def test_nan_and_inf_propagate_without_raising(rng):
    go = random_values((1, 1, 4, 4), np.float32, rng)
    go[0, 0, 0, 0] = np.nan
    go[0, 0, 2, 2] = np.inf
    go[0, 0, 2, 1] = -np.inf  # overlaps the +inf window at one column: inf + -inf = nan
    gi = pool_grad.avg_pool2d_backward(go, (1, 1, 7, 7), 3, 2, 1)
    with np.errstate(invalid="ignore"):
        expected = reference(go, (1, 1, 7, 7), 3, 2, 1)
    np.testing.assert_array_equal(np.isnan(gi), np.isnan(expected))
    np.testing.assert_array_equal(np.isinf(gi), np.isinf(expected))
    assert np.isnan(gi).any() and np.isinf(gi).any()
    finite = np.isfinite(expected)
    np.testing.assert_allclose(gi[finite], expected[finite], rtol=1e-5, atol=1e-6)


# --------------------------------------------------------------------------------------------
# cube_math_type (SPEC §4)

CUBE_X = (2, 3, 9, 8)
CUBE_ARGS = dict(kernel_size=3, stride=1, padding=1)


def _cube_go(rng, dtype=np.float32):
    # full-mantissa float32 values: the HF32/FP16 rounding visibly changes them
    return random_values(grad_output_shape(CUBE_X, **CUBE_ARGS), dtype, rng, 0.5, 1.5)


def test_keep_dtype_float32_is_plain_float32(rng):
    go = _cube_go(rng)
    gi = pool_grad.avg_pool2d_backward(go, CUBE_X, **CUBE_ARGS,
                                       cube_math_type=pool_grad.KEEP_DTYPE)
    assert_matches(gi, reference(go, CUBE_X, 3, 1, 1), np.float32)


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("cube_math_type", [1, 3], ids=["ALLOW_FP32_DOWN_PRECISION",
                                                        "USE_HF32"])
def test_hf32_modes_round_float32_grad_output_to_hf32(api, rng, cube_math_type):
    go = _cube_go(rng)
    gi = call(api, go, np.zeros(CUBE_X, np.float32), 3, 1, 1, cube_math_type=cube_math_type)
    assert_matches(gi, reference(ref_round_hf32(go), CUBE_X, 3, 1, 1), np.float32)
    plain = reference(go, CUBE_X, 3, 1, 1)
    assert np.max(np.abs(gi - plain)) > 1e-5  # the rounding really happened


@pytest.mark.parametrize("api", APIS)
def test_use_fp16_rounds_float32_grad_output_to_float16(api, rng):
    go = _cube_go(rng)
    gi = call(api, go, np.zeros(CUBE_X, np.float32), 3, 1, 1, cube_math_type=pool_grad.USE_FP16)
    assert_matches(gi, reference(ref_round_fp16(go), CUBE_X, 3, 1, 1), np.float32)
    plain = reference(go, CUBE_X, 3, 1, 1)
    assert np.max(np.abs(gi - plain)) > 1e-5


@pytest.mark.parametrize("cube_math_type,rounder", [(1, ref_round_hf32), (3, ref_round_hf32),
                                                    (2, ref_round_fp16)],
                         ids=["ALLOW_FP32_DOWN_PRECISION", "USE_HF32", "USE_FP16"])
def test_cube_modes_equal_keep_dtype_on_prerounded_grad_output_bitwise(rng, cube_math_type,
                                                                       rounder):
    # "first round each grad_output value ... The rest proceeds in float32" (SPEC §4)
    go = _cube_go(rng)
    a = pool_grad.avg_pool2d_backward(go, CUBE_X, **CUBE_ARGS, cube_math_type=cube_math_type)
    b = pool_grad.avg_pool2d_backward(rounder(go), CUBE_X, **CUBE_ARGS, cube_math_type=0)
    np.testing.assert_array_equal(raw_bytes(a), raw_bytes(b))


def test_cube_rounding_keeps_inf_and_nan(rng):
    go = _cube_go(rng)
    go[0, 0, 0, 0], go[1, 2, 3, 3] = np.inf, np.nan
    for cmt, rounder in [(1, ref_round_hf32), (3, ref_round_hf32), (2, ref_round_fp16)]:
        gi = pool_grad.avg_pool2d_backward(go, CUBE_X, **CUBE_ARGS, cube_math_type=cmt)
        with np.errstate(invalid="ignore"):
            expected = reference(rounder(go), CUBE_X, 3, 1, 1)
        np.testing.assert_array_equal(np.isnan(gi), np.isnan(expected))
        np.testing.assert_array_equal(np.isposinf(gi), np.isposinf(expected))


@pytest.mark.parametrize("dtype,cube_math_type", [
    (np.float16, 1), (np.float16, 2), (BFLOAT16, 1)],
    ids=["float16-ALLOW_FP32_DOWN_PRECISION", "float16-USE_FP16",
         "bfloat16-ALLOW_FP32_DOWN_PRECISION"])
def test_cube_math_type_changes_nothing_for_16bit_inputs(rng, dtype, cube_math_type):
    go = _cube_go(rng, dtype)
    a = pool_grad.avg_pool2d_backward(go, CUBE_X, **CUBE_ARGS, cube_math_type=cube_math_type)
    b = pool_grad.avg_pool2d_backward(go, CUBE_X, **CUBE_ARGS, cube_math_type=0)
    np.testing.assert_array_equal(raw_bytes(a), raw_bytes(b))
    assert_matches(a, reference(go, CUBE_X, 3, 1, 1), dtype)


# --------------------------------------------------------------------------------------------
# validation (SPEC §3): one test per rule; exception class, .code, message names the argument

@pytest.mark.parametrize("api", APIS)
def test_grad_output_none_is_161001(api, base):
    _, x = base
    with pytest.raises(ParamNullptrError) as ei:
        call(api, None, x, 2, out=np.empty(X_SHAPE, np.float32))
    assert_error(ei, ParamNullptrError, *GO_NAMES)


@pytest.mark.parametrize("api", APIS)
def test_x_none_is_161001(api, base):
    go, _ = base
    with pytest.raises(ParamNullptrError) as ei:
        call(api, go, None, 2, out=np.empty(X_SHAPE, np.float32))
    assert_error(ei, ParamNullptrError, *X_NAMES)


def test_grad_input_none_is_161001(base):
    go, x = base
    with pytest.raises(ParamNullptrError) as ei:
        pool_grad.AvgPool2dBackward(go, x, 2, None, 0, False, True, 0, 0, None)
    assert_error(ei, ParamNullptrError, *GI_NAMES)


def test_aclnn_grad_input_none_is_161001(base):
    from pool_grad import aclnn

    go, x = base
    with pytest.raises(ParamNullptrError) as ei:
        aclnn.aclnnAvgPool2dBackwardGetWorkspaceSize(go, x, [2, 2], [2, 2], [0, 0], False,
                                                     True, 0, 0, None)
    assert_error(ei, ParamNullptrError, *GI_NAMES)


@pytest.mark.parametrize("api", APIS)
def test_kernel_size_none_is_161001(api, base):
    go, x = base
    with pytest.raises(ParamNullptrError) as ei:
        call(api, go, x, None, 2)
    assert_error(ei, ParamNullptrError, "kernel_size", "kernelSize")


@pytest.mark.parametrize("api", APIS)
def test_padding_none_is_161001(api, base):
    go, x = base
    with pytest.raises(ParamNullptrError) as ei:
        call(api, go, x, 2, 2, None)
    assert_error(ei, ParamNullptrError, "padding")


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.complex64, np.bool_, np.uint16],
                         ids=["int32", "int64", "complex64", "bool", "uint16"])
def test_unsupported_dtype_is_161002(api, dtype):
    go = np.ones(GO_SHAPE, dtype)
    x = np.zeros(X_SHAPE, dtype)
    with pytest.raises(ParamInvalidError) as ei:
        call(api, go, x, 2)
    assert_error(ei, ParamInvalidError, *GO_NAMES, *X_NAMES, *GI_NAMES)


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("where", ["grad_output", "x", "grad_input"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16],
                         ids=["float32", "float64", "float16"])
def test_swapped_byte_order_is_161002_naming_byte_order(api, where, dtype):
    """A supported dtype in the other byte order (e.g. >f4 here): the rule it breaks is
    the byte order, not the dtype."""
    swapped = np.dtype(dtype).newbyteorder()
    go = np.ones(GO_SHAPE, swapped if where == "grad_output" else dtype)
    x = np.zeros(X_SHAPE, swapped if where == "x" else dtype)
    out = np.empty(X_SHAPE, swapped if where == "grad_input" else dtype)
    with pytest.raises(ParamInvalidError) as ei:
        call(api, go, x, 2, out=out)
    names = {"grad_output": GO_NAMES, "x": X_NAMES, "grad_input": GI_NAMES}[where]
    assert_error(ei, ParamInvalidError, *names)
    assert "byte order" in str(ei.value)


@pytest.mark.skipif(np.dtype(np.longdouble) == np.dtype(np.float64),
                    reason="longdouble is float64 here")
def test_longdouble_dtype_is_161002():
    with pytest.raises(ParamInvalidError) as ei:
        pool_grad.avg_pool2d_backward(np.ones(GO_SHAPE, np.longdouble), X_SHAPE, 2)
    assert_error(ei, ParamInvalidError, *GO_NAMES, *X_NAMES)


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("go_dtype,x_dtype", [(np.float32, np.float64), (np.float16, BFLOAT16),
                                              (np.float64, np.float32)],
                         ids=["f32-f64", "f16-bf16", "f64-f32"])
def test_grad_output_and_x_dtypes_differ_is_161002(api, go_dtype, x_dtype):
    go = np.ones(GO_SHAPE, go_dtype)
    x = np.zeros(X_SHAPE, x_dtype)
    with pytest.raises(ParamInvalidError) as ei:
        call(api, go, x, 2, out=np.empty(X_SHAPE, go_dtype))
    assert_error(ei, ParamInvalidError, *GO_NAMES, *X_NAMES)


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("out_dtype", [np.float64, np.float16, BFLOAT16],
                         ids=["float64", "float16", "bfloat16"])
def test_grad_input_dtype_differs_is_161002(api, base, out_dtype):
    go, x = base
    with pytest.raises(ParamInvalidError) as ei:
        call(api, go, x, 2, out=np.empty(X_SHAPE, out_dtype))
    assert_error(ei, ParamInvalidError, *GI_NAMES)


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("x_shape,go_shape", [((8, 8), (4, 4)), ((1, 2, 3, 8, 8), (1, 2, 3, 4, 4)),
                                              ((8,), (4,))], ids=["2d", "5d", "1d"])
def test_rank_not_3_or_4_is_161002(api, x_shape, go_shape):
    with pytest.raises(ParamInvalidError) as ei:
        call(api, np.ones(go_shape, np.float32), np.zeros(x_shape, np.float32), 2)
    assert_error(ei, ParamInvalidError, *GO_NAMES, *X_NAMES)


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("x_shape,go_shape", [((1, 3, 8, 8), (3, 4, 4)), ((3, 8, 8), (1, 3, 4, 4))],
                         ids=["x4d-go3d", "x3d-go4d"])
def test_ranks_differ_is_161002(api, x_shape, go_shape):
    with pytest.raises(ParamInvalidError) as ei:
        call(api, np.ones(go_shape, np.float32), np.zeros(x_shape, np.float32), 2,
             out=np.empty(x_shape, np.float32))
    assert_error(ei, ParamInvalidError, *GO_NAMES, *X_NAMES)


@pytest.mark.parametrize("api", APIS)
def test_batch_size_mismatch_is_161002(api, base):
    _, x = base
    with pytest.raises(ParamInvalidError) as ei:
        call(api, np.ones((3, 3, 4, 4), np.float32), x, 2)
    assert_error(ei, ParamInvalidError, *GO_NAMES, *X_NAMES)


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("x_shape,go_shape", [((2, 3, 8, 8), (2, 4, 4, 4)), ((3, 8, 8), (2, 4, 4))],
                         ids=["4d", "3d"])
def test_channel_mismatch_is_161002(api, x_shape, go_shape):
    with pytest.raises(ParamInvalidError) as ei:
        call(api, np.ones(go_shape, np.float32), np.zeros(x_shape, np.float32), 2)
    assert_error(ei, ParamInvalidError, *GO_NAMES, *X_NAMES)


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("out_shape", [(2, 3, 8, 9), (2, 3, 8), (1, 3, 8, 8), (2, 3, 8, 8, 1)])
def test_grad_input_shape_differs_from_x_is_161002(api, base, out_shape):
    go, x = base
    with pytest.raises(ParamInvalidError) as ei:
        call(api, go, x, 2, out=np.empty(out_shape, np.float32))
    assert_error(ei, ParamInvalidError, *GI_NAMES)


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("kernel_size", [[], [2, 2, 2]], ids=["len0", "len3"])
def test_kernel_size_length_not_1_or_2_is_161002(api, base, kernel_size):
    go, x = base
    with pytest.raises(ParamInvalidError) as ei:
        call(api, go, x, kernel_size, 2)
    assert_error(ei, ParamInvalidError, "kernel_size", "kernelSize")


@pytest.mark.parametrize("api", APIS)
def test_stride_length_3_is_161002(api, base):
    go, x = base
    with pytest.raises(ParamInvalidError) as ei:
        call(api, go, x, 2, [2, 2, 2])
    assert_error(ei, ParamInvalidError, "stride")


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("padding", [[], [0, 0, 0]], ids=["len0", "len3"])
def test_padding_length_not_1_or_2_is_161002(api, base, padding):
    go, x = base
    with pytest.raises(ParamInvalidError) as ei:
        call(api, go, x, 2, 2, padding)
    assert_error(ei, ParamInvalidError, "padding")


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("kernel_size", [0, -2, (2, 0), (-1, 2)])
def test_kernel_size_not_positive_is_161002(api, base, kernel_size):
    go, x = base
    with pytest.raises(ParamInvalidError) as ei:
        call(api, go, x, kernel_size, 2)
    assert_error(ei, ParamInvalidError, "kernel_size", "kernelSize")


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("stride", [0, -2, (2, 0), [-1]])
def test_stride_not_positive_is_161002(api, base, stride):
    go, x = base
    with pytest.raises(ParamInvalidError) as ei:
        call(api, go, x, 2, stride)
    assert_error(ei, ParamInvalidError, "stride")


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("padding", [-1, (0, -1), [-1]])
def test_negative_padding_is_161002(api, base, padding):
    go, x = base
    with pytest.raises(ParamInvalidError) as ei:
        call(api, go, x, 2, 2, padding)
    assert_error(ei, ParamInvalidError, "padding")


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("kernel_size,padding", [(2, 2), (3, 2), (1, 1), ((4, 3), (2, 2)),
                                                 ((3, 4), (2, 1))],
                         ids=["k2p2", "k3p2", "k1p1", "kw3pw2", "kh3ph2"])
def test_padding_over_half_kernel_is_161002(api, kernel_size, padding):
    x_shape = (1, 2, 12, 12)
    # a grad_output of the size the formula would give, so only the padding rule can fail
    go_shape = grad_output_shape(x_shape, kernel_size, 1, padding)
    with pytest.raises(ParamInvalidError) as ei:
        call(api, np.ones(go_shape, np.float32), np.zeros(x_shape, np.float32), kernel_size, 1,
             padding)
    assert_error(ei, ParamInvalidError, "padding")


@pytest.mark.parametrize("kernel_size,padding", [(2, 1), (3, 1), (4, 2), (5, 2), ((4, 3), (2, 1))],
                         ids=["k2p1", "k3p1", "k4p2", "k5p2", "k43p21"])
def test_padding_up_to_half_kernel_is_accepted(rng, kernel_size, padding):
    x_shape = (1, 2, 9, 10)
    go = random_values(grad_output_shape(x_shape, kernel_size, 1, padding), np.float64, rng)
    gi = pool_grad.avg_pool2d_backward(go, x_shape, kernel_size, 1, padding)
    assert_matches(gi, reference(go, x_shape, kernel_size, 1, padding), np.float64)


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("x_shape,kernel_size,padding", [((1, 1, 2, 8), 5, 0),
                                                         ((1, 1, 8, 3), (2, 6), (1, 1)),
                                                         ((2, 1, 1), 3, 0)],
                         ids=["h", "w", "3d"])
def test_output_size_below_one_is_161002(api, x_shape, kernel_size, padding):
    # any grad_output: the computed output size is < 1 on one axis
    go = np.ones(x_shape[:-2] + (1, 1), np.float32)
    with pytest.raises(ParamInvalidError) as ei:
        call(api, go, np.zeros(x_shape, np.float32), kernel_size, 1, padding)
    assert_error(ei, ParamInvalidError, "output", "kernel_size", "kernelSize", *X_NAMES,
                 *GO_NAMES, "padding", "size")


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("go_shape", [(2, 3, 5, 4), (2, 3, 4, 3), (2, 3, 3, 3), (2, 3, 1, 1)])
def test_grad_output_spatial_size_not_computed_size_is_161002(api, base, go_shape):
    _, x = base
    with pytest.raises(ParamInvalidError) as ei:
        call(api, np.ones(go_shape, np.float32), x, 2)
    assert_error(ei, ParamInvalidError, *GO_NAMES)


@pytest.mark.parametrize("api", APIS)
def test_grad_output_size_of_other_ceil_mode_is_161002(api):
    # x 5x5, k2 s2: floor gives 2x2, ceil gives 3x3; each is wrong for the other mode
    x = np.zeros((1, 1, 5, 5), np.float32)
    with pytest.raises(ParamInvalidError):
        call(api, np.ones((1, 1, 3, 3), np.float32), x, 2, ceil_mode=False)
    with pytest.raises(ParamInvalidError):
        call(api, np.ones((1, 1, 2, 2), np.float32), x, 2, ceil_mode=True)


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("cube_math_type", [4, -1, 100])
def test_cube_math_type_out_of_range_is_161002(api, base, cube_math_type):
    go, x = base
    with pytest.raises(ParamInvalidError) as ei:
        call(api, go, x, 2, cube_math_type=cube_math_type)
    assert_error(ei, ParamInvalidError, "cube_math_type", "cubeMathType")


@pytest.mark.parametrize("api", APIS)
def test_use_fp16_with_bfloat16_is_161002(api):
    go = np.ones(GO_SHAPE, BFLOAT16)
    with pytest.raises(ParamInvalidError) as ei:
        call(api, go, np.zeros(X_SHAPE, BFLOAT16), 2, cube_math_type=pool_grad.USE_FP16)
    assert_error(ei, ParamInvalidError, "cube_math_type", "cubeMathType")


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("dtype", [np.float16, BFLOAT16, np.float64],
                         ids=["float16", "bfloat16", "float64"])
def test_use_hf32_with_non_float32_is_161002(api, dtype):
    go = np.ones(GO_SHAPE, dtype)
    with pytest.raises(ParamInvalidError) as ei:
        call(api, go, np.zeros(X_SHAPE, dtype), 2, cube_math_type=pool_grad.USE_HF32)
    assert_error(ei, ParamInvalidError, "cube_math_type", "cubeMathType")


@pytest.mark.parametrize("api", APIS)
def test_grad_input_not_writeable_is_161002(api, base):
    go, x = base
    out = np.empty(X_SHAPE, np.float32)
    out.flags.writeable = False
    with pytest.raises(ParamInvalidError) as ei:
        call(api, go, x, 2, out=out)
    assert_error(ei, ParamInvalidError, *GI_NAMES)


@pytest.mark.parametrize("api", APIS)
def test_broadcast_grad_input_is_161002(api, base):
    go, x = base
    out = np.broadcast_to(np.empty((1,) + X_SHAPE[1:], np.float32), X_SHAPE)
    with pytest.raises(ParamInvalidError) as ei:
        call(api, go, x, 2, out=out)
    assert_error(ei, ParamInvalidError, *GI_NAMES)


@pytest.mark.parametrize("api", APIS)
def test_grad_input_with_zero_stride_is_161002(api, base):
    go, x = base
    buf = np.empty(X_SHAPE[1:], np.float32)
    out = np.lib.stride_tricks.as_strided(buf, X_SHAPE, (0,) + buf.strides, writeable=True)
    assert out.flags.writeable
    with pytest.raises(ParamInvalidError) as ei:
        call(api, go, x, 2, out=out)
    assert_error(ei, ParamInvalidError, *GI_NAMES)


@pytest.mark.parametrize("api", APIS)
def test_grad_input_same_array_as_grad_output_is_161002(api, rng):
    # kernel 1: grad_output and grad_input have the same shape
    go = random_values((2, 3, 5, 5), np.float32, rng)
    before = go.copy()
    with pytest.raises(ParamInvalidError) as ei:
        call(api, go, go.shape, 1, out=go) if api == "function" else \
            call(api, go, np.zeros(go.shape, np.float32), 1, out=go)
    assert_error(ei, ParamInvalidError, *GI_NAMES, *GO_NAMES)
    np.testing.assert_array_equal(go, before)


@pytest.mark.parametrize("api", APIS)
def test_grad_input_partially_overlapping_grad_output_is_161002(api):
    buf = np.zeros(2 * 75, np.float32)
    go = buf[:75].reshape(1, 3, 5, 5)
    out = buf[40:115].reshape(1, 3, 5, 5)
    with pytest.raises(ParamInvalidError) as ei:
        call(api, go, np.zeros(go.shape, np.float32), 1, out=out)
    assert_error(ei, ParamInvalidError, *GI_NAMES, *GO_NAMES)


@pytest.mark.parametrize("api", APIS)
def test_grad_input_other_view_of_grad_output_memory_is_161002(api):
    # two distinct ndarray objects over the same elements: overlap is about memory, not identity
    buf = np.zeros((1, 3, 5, 10), np.float32)
    go = buf[..., 0::2]
    out = buf[..., 0:10:2]
    assert go is not out
    with pytest.raises(ParamInvalidError) as ei:
        call(api, go, np.zeros(go.shape, np.float32), 1, out=out)
    assert_error(ei, ParamInvalidError, *GI_NAMES, *GO_NAMES)


@pytest.mark.parametrize("api", APIS)
def test_grad_input_list_is_161002(api, base):
    go, x = base
    with pytest.raises(ParamInvalidError) as ei:
        call(api, go, x, 2, out=np.zeros(X_SHAPE, np.float32).tolist())
    assert_error(ei, ParamInvalidError, *GI_NAMES)


def test_grad_input_torch_tensor_is_161002(torch, base):
    go, x = base
    with pytest.raises(ParamInvalidError) as ei:
        pool_grad.AvgPool2dBackward(go, x, 2, None, 0, False, True, 0, 0,
                                    torch.zeros(X_SHAPE, dtype=torch.float32))
    assert_error(ei, ParamInvalidError, *GI_NAMES)


@pytest.mark.parametrize("api", APIS)
def test_lists_are_accepted_as_inputs(api, rng):
    go = random_values((1, 2, 3, 3), np.float64, rng)
    x = np.zeros((1, 2, 6, 6))
    gi = call(api, go.tolist(), x.tolist(), 2)
    assert gi.dtype == np.float64
    assert_matches(gi, reference(go, x.shape, 2), np.float64)


@pytest.mark.parametrize("api", APIS)
def test_torch_tensors_are_accepted_as_inputs(api, torch, rng):
    go = random_values((2, 3, 3), np.float32, rng)
    gi = call(api, torch.from_numpy(go), torch.zeros((2, 6, 6)), 2)
    assert isinstance(gi, np.ndarray) and gi.dtype == np.float32
    assert_matches(gi, reference(go, (2, 6, 6), 2), np.float32)


def test_invalid_call_leaves_grad_input_untouched(base):
    go, x = base
    out = np.full(X_SHAPE, 5.0, np.float32)
    with pytest.raises(ParamInvalidError):
        pool_grad.avg_pool2d_backward(go, x, 2, 2, 2, out=out)  # padding over half kernel
    assert np.all(out == 5.0)


def test_validation_happens_at_construction(base):
    go, x = base
    with pytest.raises(ParamInvalidError):
        pool_grad.AvgPool2dBackward(go, x, 2, None, 0, False, True, 0, 7,
                                    np.empty(X_SHAPE, np.float32))


# --------------------------------------------------------------------------------------------
# zero-size dimensions: accepted, workspace 0, execute does nothing (SPEC §3)

@pytest.mark.parametrize("x_shape,go_shape", [((0, 3, 8, 8), (0, 3, 4, 4)),
                                              ((2, 0, 8, 8), (2, 0, 4, 4)),
                                              ((0, 8, 8), (0, 4, 4))],
                         ids=["N0", "C0", "3d-C0"])
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_zero_size_batch_or_channel_is_accepted_with_workspace_0(x_shape, go_shape, dtype):
    go = np.ones(go_shape, dtype)
    gi = np.empty(x_shape, dtype)
    op = pool_grad.AvgPool2dBackward(go, np.zeros(x_shape, dtype), 2, None, 0, False, True, 0,
                                     0, gi)
    assert op.workspace_size == 0
    op.execute()
    op.execute(workspace=bytearray(0))
    res = pool_grad.avg_pool2d_backward(go, x_shape, 2)
    assert res.shape == x_shape and res.dtype == np.dtype(dtype)


def test_zero_height_with_matching_empty_grad_output_is_accepted():
    # H = 0, kernel 2 stride 2: the computed output height is 0; the output-size rule is set
    # aside for zero-size tensors and the grad_output height (0) equals the computed one.
    x_shape, go_shape = (1, 2, 0, 8), (1, 2, 0, 4)
    gi = np.empty(x_shape, np.float32)
    op = pool_grad.AvgPool2dBackward(np.ones(go_shape, np.float32), np.zeros(x_shape, np.float32),
                                     2, 2, 0, False, True, 0, 0, gi)
    assert op.workspace_size == 0
    op.execute()


def test_zero_size_still_checks_other_rules():
    # the zero-size acceptance applies only "when every other rule holds"
    with pytest.raises(ParamInvalidError):
        pool_grad.avg_pool2d_backward(np.ones((0, 3, 4, 4), np.float32), (0, 3, 8, 8), 2, 2, 2)
    with pytest.raises(ParamInvalidError):
        pool_grad.avg_pool2d_backward(np.ones((0, 3, 4, 4), np.int32), (0, 3, 8, 8), 2)
    with pytest.raises(ParamInvalidError):
        pool_grad.avg_pool2d_backward(np.ones((0, 4, 4, 4), np.float32), (0, 3, 8, 8), 2)


# --------------------------------------------------------------------------------------------
# memory layouts (SPEC §2.1 "any strides")

LAYOUT_X = (2, 3, 9, 8)
LAYOUT_ARGS = dict(kernel_size=(3, 2), stride=(2, 1), padding=(1, 1), ceil_mode=True,
                   count_include_pad=False)


def _layout_reference(go, x_shape):
    return reference(go, x_shape, (3, 2), (2, 1), (1, 1), True, False)


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("x_shape", [LAYOUT_X, LAYOUT_X[1:]], ids=["4d", "3d"])
def test_grad_output_in_any_layout(rng, x_shape, layout, dtype):
    go = make_array(grad_output_shape(x_shape, (3, 2), (2, 1), (1, 1), True), dtype, rng, layout)
    gi = pool_grad.avg_pool2d_backward(go, x_shape, **LAYOUT_ARGS)
    assert gi.flags.c_contiguous
    assert_matches(gi, _layout_reference(go, x_shape), dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("layout", OUT_LAYOUTS)
@pytest.mark.parametrize("x_shape", [LAYOUT_X, LAYOUT_X[1:]], ids=["4d", "3d"])
def test_out_in_any_layout_is_filled_and_returned(rng, x_shape, layout, dtype):
    go = random_values(grad_output_shape(x_shape, (3, 2), (2, 1), (1, 1), True), dtype, rng)
    out = empty_out(x_shape, dtype, layout)
    res = pool_grad.avg_pool2d_backward(go, x_shape, **LAYOUT_ARGS, out=out)
    assert res is out
    assert_matches(out, _layout_reference(go, x_shape), dtype)


@pytest.mark.parametrize("go_layout", LAYOUTS)
@pytest.mark.parametrize("out_layout", OUT_LAYOUTS)
def test_any_grad_output_layout_into_any_out_layout_with_op(rng, go_layout, out_layout):
    go = make_array(grad_output_shape(LAYOUT_X, (3, 2), (2, 1), (1, 1), True), np.float32, rng,
                    go_layout)
    out = empty_out(LAYOUT_X, np.float32, out_layout)
    x = make_array(LAYOUT_X, np.float32, rng, go_layout)
    op = pool_grad.AvgPool2dBackward(go, x, (3, 2), (2, 1), (1, 1), True, False, 0, 0, out)
    op.execute()
    assert_matches(out, _layout_reference(go, LAYOUT_X), np.float32)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_x_layout_does_not_matter(rng, layout):
    go = random_values(grad_output_shape(LAYOUT_X, (3, 2), (2, 1), (1, 1), True), np.float32, rng)
    a = pool_grad.avg_pool2d_backward(go, np.zeros(LAYOUT_X, np.float32), **LAYOUT_ARGS)
    b = pool_grad.avg_pool2d_backward(go, make_array(LAYOUT_X, np.float32, rng, layout),
                                      **LAYOUT_ARGS)
    np.testing.assert_array_equal(raw_bytes(a), raw_bytes(b))


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_sliced_out_leaves_the_gaps_of_its_buffer_untouched(rng, dtype):
    go = random_values(grad_output_shape(LAYOUT_X, (3, 2), (2, 1), (1, 1), True), dtype, rng)
    big = np.full(tuple(2 * s + 1 for s in LAYOUT_X), 9, dtype)
    view = tuple(slice(1, 1 + 2 * s, 2) for s in LAYOUT_X)
    out = big[view]
    pool_grad.avg_pool2d_backward(go, LAYOUT_X, **LAYOUT_ARGS, out=out)
    gaps = np.ones(big.shape, bool)
    gaps[view] = False
    assert np.all(big[gaps].astype(np.float64) == 9)
    assert_matches(out, _layout_reference(go, LAYOUT_X), dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_layouts_give_bitwise_identical_results(rng, dtype):
    go = random_values(grad_output_shape(LAYOUT_X, (3, 2), (2, 1), (1, 1), True), dtype, rng)
    ref = pool_grad.avg_pool2d_backward(go, LAYOUT_X, **LAYOUT_ARGS)
    for go_layout in LAYOUTS[:-1]:
        for out_layout in OUT_LAYOUTS:
            out = empty_out(LAYOUT_X, dtype, out_layout)
            pool_grad.avg_pool2d_backward(as_layout(go, go_layout), LAYOUT_X, **LAYOUT_ARGS,
                                          out=out)
            np.testing.assert_array_equal(raw_bytes(out), raw_bytes(ref),
                                          err_msg=f"{go_layout} -> {out_layout}")


# --------------------------------------------------------------------------------------------
# determinism across thread counts (SPEC §2.1, §4)

THREAD_X = (3, 5, 37, 29)
THREAD_ARGS = dict(kernel_size=(3, 4), stride=(2, 1), padding=(1, 2), ceil_mode=True,
                   count_include_pad=False)


def _thread_go(rng, dtype, layout="c"):
    return make_array(grad_output_shape(THREAD_X, (3, 4), (2, 1), (1, 2), True), dtype, rng,
                      layout)


@pytest.mark.parametrize("layout", ["c", "channels_last"])
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_large_results_are_bitwise_identical_for_every_n_threads(rng, dtype, layout):
    # large enough that any "is it worth a parallel region" heuristic does go parallel
    x_shape = (4, 16, 96, 90)
    go = make_array(grad_output_shape(x_shape, (3, 4), (2, 1), (1, 2), True), dtype, rng,
                    layout)
    first = None
    for n in (1, 2, 3, 4, 8):
        r = pool_grad.avg_pool2d_backward(go, x_shape, **THREAD_ARGS, n_threads=n)
        if first is None:
            first = r
        np.testing.assert_array_equal(raw_bytes(r), raw_bytes(first), err_msg=f"n={n}")


@pytest.mark.parametrize("layout", ["c", "channels_last"])
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_results_are_bitwise_identical_for_every_n_threads(rng, dtype, layout):
    go = _thread_go(rng, dtype, layout)
    results = {n: pool_grad.avg_pool2d_backward(go, THREAD_X, **THREAD_ARGS, n_threads=n)
               for n in (1, 2, 3, 4, 16)}
    for n, r in results.items():
        np.testing.assert_array_equal(raw_bytes(r), raw_bytes(results[1]), err_msg=f"n={n}")
    assert_matches(results[1], reference(go, THREAD_X, (3, 4), (2, 1), (1, 2), True, False),
                   dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float16], ids=["float32", "float16"])
def test_execute_n_threads_is_bitwise_identical(rng, dtype):
    go = _thread_go(rng, dtype)
    outs = []
    for n in (1, 2, 3, 4):
        out = np.empty(THREAD_X, dtype)
        op = pool_grad.AvgPool2dBackward(go, np.zeros(THREAD_X, dtype), (3, 4),
                                         (2, 1), (1, 2), True, False, 0, 0, out)
        op.execute(n_threads=n)
        outs.append(out)
    for out in outs[1:]:
        np.testing.assert_array_equal(raw_bytes(out), raw_bytes(outs[0]))


def test_set_num_threads_is_reported_and_does_not_change_results(rng, restore_num_threads):
    go = _thread_go(rng, np.float32)
    results = []
    for n in (1, 2, 3, 4):
        pool_grad.set_num_threads(n)
        assert pool_grad.get_num_threads() == n
        results.append(pool_grad.avg_pool2d_backward(go, THREAD_X, **THREAD_ARGS))
    for r in results[1:]:
        np.testing.assert_array_equal(raw_bytes(r), raw_bytes(results[0]))


def test_kernels_default_thread_budget_follows_get_num_threads(restore_num_threads):
    """A call with n_threads=None passes budget 0 and the kernel computes the default
    itself: it must be get_num_threads() after set_num_threads(n), after
    set_num_threads(None), and under an OpenMP limit (threadpoolctl)."""
    from pool_grad import _kernels
    for n in (1, 3, 2, None):
        pool_grad.set_num_threads(n)
        assert _kernels.default_threads() == pool_grad.get_num_threads()
    threadpoolctl = pytest.importorskip("threadpoolctl")
    with threadpoolctl.threadpool_limits(1, user_api="openmp"):
        assert _kernels.default_threads() == pool_grad.get_num_threads()


# --------------------------------------------------------------------------------------------
# two-phase object, workspace, aclnn layer (SPEC §2.2, §2.3)

def _op_setup(rng, dtype=np.float32, layout="c"):
    x_shape = (2, 3, 9, 8)
    go = make_array(grad_output_shape(x_shape, 3, 2, 1, True), dtype, rng, layout)
    gi = empty_out(x_shape, dtype, layout if layout != "broadcast" else "c")
    op = pool_grad.AvgPool2dBackward(go, np.zeros(x_shape, dtype), 3, 2, 1, True, True, 0, 0, gi)
    return op, go, gi, x_shape


def _op_reference(go, x_shape):
    return reference(go, x_shape, 3, 2, 1, True, True, 0)


def test_workspace_size_is_a_nonnegative_int(rng):
    for dtype in DTYPES:
        for layout in ("c", "channels_last", "negative"):
            op, *_ = _op_setup(rng, dtype, layout)
            ws = op.workspace_size
            assert isinstance(ws, int) and not isinstance(ws, bool)
            assert ws >= 0


def test_op_executes_again_after_grad_output_changes_in_place(rng):
    op, go, gi, x_shape = _op_setup(rng)
    op.execute()
    assert_matches(gi, _op_reference(go, x_shape), np.float32)
    go[...] = random_values(go.shape, np.float32, rng)
    op.execute()
    assert_matches(gi, _op_reference(go, x_shape), np.float32)
    go *= -3
    op.execute()
    assert_matches(gi, _op_reference(go, x_shape), np.float32)


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("kind", ["bytearray", "uint8-array"])
def test_execute_with_workspace_of_exactly_workspace_size_bytes(rng, dtype, kind):
    op, go, gi, x_shape = _op_setup(rng, dtype, "channels_last")
    ws = op.workspace_size
    workspace = bytearray(ws) if kind == "bytearray" else np.zeros(ws, np.uint8)
    op.execute(workspace=workspace)
    assert_matches(gi, _op_reference(go, x_shape), dtype)
    op.execute(workspace=workspace)  # reusable
    assert_matches(gi, _op_reference(go, x_shape), dtype)


def test_execute_with_a_larger_workspace(rng):
    op, go, gi, x_shape = _op_setup(rng, np.float16)
    op.execute(workspace=bytearray(op.workspace_size + 100))
    assert_matches(gi, _op_reference(go, x_shape), np.float16)


def _op_with_positive_workspace(rng):
    for dtype in DTYPES:
        for layout in ("c", "channels_last", "f", "negative", "sliced"):
            op, go, gi, x_shape = _op_setup(rng, dtype, layout)
            if op.workspace_size > 0:
                return op
    pytest.skip("no configuration needs a workspace (workspace_size is 0 everywhere)")


def test_too_small_workspace_is_161002(rng):
    op = _op_with_positive_workspace(rng)
    with pytest.raises(ParamInvalidError) as ei:
        op.execute(workspace=bytearray(op.workspace_size - 1))
    assert ei.value.code == 161002
    assert error_message_names(ei, "workspace")


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_aclnn_two_call_layer(rng, dtype):
    from pool_grad import aclnn

    x_shape = (2, 3, 9, 8)
    go = random_values(grad_output_shape(x_shape, 3, 2, 1, True), dtype, rng)
    gi = np.empty(x_shape, dtype)
    ws, executor = aclnn.aclnnAvgPool2dBackwardGetWorkspaceSize(
        go, np.zeros(x_shape, dtype), [3, 3], [2, 2], [1, 1], True, True, 0,
        pool_grad.KEEP_DTYPE, gi)
    assert isinstance(ws, int) and ws >= 0
    workspace = bytearray(ws) if ws > 0 else None
    ret = aclnn.aclnnAvgPool2dBackward(workspace, ws, executor, None)
    assert ret == pool_grad.ACLNN_SUCCESS == 0
    assert_matches(gi, _op_reference(go, x_shape), dtype)


def test_aclnn_layer_on_a_stream(rng):
    from pool_grad import aclnn

    x_shape = (2, 3, 9, 8)
    go = random_values(grad_output_shape(x_shape, 3, 2, 1, True), np.float32, rng)
    gi = np.empty(x_shape, np.float32)
    ws, executor = aclnn.aclnnAvgPool2dBackwardGetWorkspaceSize(
        go, np.zeros(x_shape, np.float32), [3, 3], [2, 2], [1, 1], True, True, 0, 0, gi)
    stream = pool_grad.Stream()
    ret = aclnn.aclnnAvgPool2dBackward(bytearray(ws) if ws else None, ws, executor, stream)
    assert ret == 0
    stream.synchronize()
    assert_matches(gi, _op_reference(go, x_shape), np.float32)


# --------------------------------------------------------------------------------------------
# streams (SPEC §2.2)

def test_stream_synchronize_with_nothing_submitted_returns():
    stream = pool_grad.Stream()
    stream.synchronize()
    stream.synchronize()


def test_stream_runs_jobs_in_submission_order_last_writer_wins(rng):
    x_shape = (2, 3, 40, 36)
    gi = np.empty(x_shape, np.float32)
    stream = pool_grad.Stream()
    gos, ops = [], []
    for _ in range(6):
        go = random_values(grad_output_shape(x_shape, 3, 1, 1), np.float32, rng)
        op = pool_grad.AvgPool2dBackward(go, np.zeros(x_shape, np.float32), 3, 1, 1, False,
                                         True, 0, 0, gi)
        gos.append(go)
        ops.append(op)
        op.execute(stream=stream)
    stream.synchronize()
    assert_matches(gi, reference(gos[-1], x_shape, 3, 1, 1), np.float32)


def test_stream_runs_dependent_jobs_in_submission_order(rng):
    # kernel 1, divisor_override 2: each op halves its input; op i reads op i-1's grad_input
    shape = (2, 3, 33, 17)
    first = random_values(shape, np.float64, rng)
    bufs = [first] + [np.full(shape, np.nan) for _ in range(6)]
    stream = pool_grad.Stream()
    ops = []
    for i in range(6):
        op = pool_grad.AvgPool2dBackward(bufs[i], np.zeros(shape), 1, 1, 0, False, True, 2, 0,
                                         bufs[i + 1])
        ops.append(op)
        op.execute(stream=stream)
    stream.synchronize()
    for i in range(1, 7):
        np.testing.assert_array_equal(bufs[i], first / 2.0 ** i)


def test_stream_keeps_submitted_ops_alive(rng):
    import gc

    x_shape = (2, 3, 40, 36)
    go = random_values(grad_output_shape(x_shape, 3, 1, 1), np.float32, rng)
    gi = np.empty(x_shape, np.float32)
    stream = pool_grad.Stream()
    for _ in range(3):  # the op objects are dropped right after submission
        pool_grad.AvgPool2dBackward(go.copy(), np.zeros(x_shape, np.float32), 3, 1, 1, False,
                                    True, 0, 0, gi).execute(stream=stream)
    gc.collect()
    stream.synchronize()
    assert_matches(gi, reference(go, x_shape, 3, 1, 1), np.float32)


def test_stream_reraises_a_job_error_once_from_synchronize(rng):
    # a value-dependent error (an out-of-range max-pool index, SPEC §1.3) can only arise in the
    # job itself; avg-pool jobs queued before it still run.
    x_shape = (1, 2, 6, 6)
    go = random_values(grad_output_shape(x_shape, 2), np.float32, rng)
    gi = np.empty(x_shape, np.float32)
    stream = pool_grad.Stream()
    avg_op = pool_grad.AvgPool2dBackward(go, np.zeros(x_shape, np.float32), 2, None, 0, False,
                                         True, 0, 0, gi)
    avg_op.execute(stream=stream)
    bad_idx = np.full((1, 1, 2, 2), 4, np.int64)
    bad_idx[0, 0, 1, 1] = 4 * 4  # outside the 4x4 plane
    max_gi = np.full((1, 1, 4, 4), 3.0, np.float32)
    max_op = pool_grad.AdaptiveMaxPool2dBackward(np.ones((1, 1, 2, 2), np.float32),
                                                 np.zeros((1, 1, 4, 4), np.float32), bad_idx,
                                                 max_gi)
    max_op.execute(stream=stream)
    with pytest.raises(ParamInvalidError) as ei:
        stream.synchronize()
    assert ei.value.code == 161002
    stream.synchronize()  # reported once
    assert_matches(gi, reference(go, x_shape, 2), np.float32)
    assert np.all(max_gi == 3.0)  # execute's error leaves grad_input unchanged (SPEC §1.3)


def test_stream_workspace_error_is_reported_exactly_once(rng):
    op = _op_with_positive_workspace(rng)
    stream = pool_grad.Stream()
    raised = 0
    try:
        op.execute(workspace=bytearray(op.workspace_size - 1), stream=stream)
    except ParamInvalidError:
        raised += 1
    try:
        stream.synchronize()
    except ParamInvalidError:
        raised += 1
    stream.synchronize()
    assert raised == 1


def test_stream_keeps_working_after_an_error(rng):
    x_shape = (1, 2, 6, 6)
    stream = pool_grad.Stream()
    bad_idx = np.full((1, 1, 1, 1), 99, np.int64)
    pool_grad.AdaptiveMaxPool2dBackward(np.ones((1, 1, 1, 1), np.float32),
                                        np.zeros((1, 1, 2, 2), np.float32), bad_idx,
                                        np.zeros((1, 1, 2, 2), np.float32)).execute(
        stream=stream)
    with pytest.raises(ParamInvalidError):
        stream.synchronize()
    go = random_values(grad_output_shape(x_shape, 2), np.float32, rng)
    gi = np.empty(x_shape, np.float32)
    pool_grad.AvgPool2dBackward(go, np.zeros(x_shape, np.float32), 2, None, 0, False, True, 0,
                                0, gi).execute(stream=stream)
    stream.synchronize()
    assert_matches(gi, reference(go, x_shape, 2), np.float32)


# --------------------------------------------------------------------------------------------
# property test over random valid calls

@st.composite
def valid_calls(draw):
    batched = draw(st.booleans())
    n, c = draw(st.integers(1, 2)), draw(st.integers(1, 3))
    h, w = draw(st.integers(1, 12)), draw(st.integers(1, 12))
    kh, kw = draw(st.integers(1, 5)), draw(st.integers(1, 5))
    sh, sw = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    ph, pw = draw(st.integers(0, kh // 2)), draw(st.integers(0, kw // 2))
    ceil_mode, cip = draw(st.booleans()), draw(st.booleans())
    div = draw(st.one_of(st.just(0), st.integers(-6, -1), st.integers(1, 6)))
    dtype = draw(st.sampled_from(DTYPES))
    go_layout = draw(st.sampled_from(LAYOUTS))
    out_layout = draw(st.sampled_from([None] + OUT_LAYOUTS))
    ho = ref_avg_pool2d_output_size(h, kh, sh, ph, ceil_mode)
    wo = ref_avg_pool2d_output_size(w, kw, sw, pw, ceil_mode)
    assume(ho >= 1 and wo >= 1)
    x_shape = ((n,) if batched else ()) + (c, h, w)
    seed = draw(st.integers(0, 2 ** 32 - 1))
    return (x_shape, (kh, kw), (sh, sw), (ph, pw), ceil_mode, cip, div, dtype, go_layout,
            out_layout, seed)


@given(valid_calls())
def test_property_random_valid_calls_match_reference(params):
    x_shape, k, s, p, ceil_mode, cip, div, dtype, go_layout, out_layout, seed = params
    rng = np.random.default_rng(seed)
    go = make_array(grad_output_shape(x_shape, k, s, p, ceil_mode), dtype, rng, go_layout)
    out = None if out_layout is None else empty_out(x_shape, dtype, out_layout)
    gi = pool_grad.avg_pool2d_backward(go, np.zeros(x_shape, dtype), k, s, p,
                                       ceil_mode=ceil_mode, count_include_pad=cip,
                                       divisor_override=div, out=out)
    if out is not None:
        assert gi is out
    assert_matches(gi, reference(go, x_shape, k, s, p, ceil_mode, cip, div), dtype)


@given(st.integers(1, 6), st.integers(1, 9), st.integers(1, 3), st.booleans())
def test_property_output_size_below_one_is_always_161002(h, k, s, ceil_mode):
    p = 0
    assume(ref_avg_pool2d_output_size(h, k, s, p, ceil_mode) < 1)
    with pytest.raises(ParamInvalidError):
        pool_grad.avg_pool2d_backward(np.ones((1, 1, 1, 1), np.float32), (1, 1, h, 8), (k, 1),
                                      (s, 1), p, ceil_mode=ceil_mode)

"""Sanity tests of tests/reference.py itself, so that the oracle the operator tests rely on is
trusted: SPEC §5 worked examples, hand-computed tiny cases, the adjoint identity between each
forward and its backward, and (when PyTorch is importable) a handful of comparisons with torch.
"""

import itertools

import numpy as np
import pytest

from reference import (
    ref_adaptive_avg_pool3d,
    ref_adaptive_avg_pool3d_backward,
    ref_adaptive_max_pool2d,
    ref_adaptive_max_pool2d_backward,
    ref_avg_pool2d,
    ref_avg_pool2d_backward,
    ref_avg_pool2d_output_size,
    ref_round_fp16,
    ref_round_hf32,
    tolerance,
)
from conftest import BFLOAT16

# --------------------------------------------------------------------------------------------
# SPEC §5 worked examples


def test_spec_example_avg_pool2d_backward_is_one_sixteenth_everywhere():
    g = np.ones((1, 16, 1, 1))
    gi = ref_avg_pool2d_backward(g, (1, 16, 4, 4), (4, 4), (1, 1), (0, 0), False, True, 0)
    assert gi.shape == (1, 16, 4, 4)
    np.testing.assert_array_equal(gi, np.full((1, 16, 4, 4), 0.0625))


def test_spec_example_adaptive_avg_pool3d_backward_rows():
    g = np.arange(1, 9, dtype=np.float64).reshape(2, 2, 1, 1, 2)
    gi = ref_adaptive_avg_pool3d_backward(g, (2, 2, 1, 1, 4))
    expected = np.array([[0.5, 0.5, 1, 1], [1.5, 1.5, 2, 2], [2.5, 2.5, 3, 3],
                         [3.5, 3.5, 4, 4]]).reshape(2, 2, 1, 1, 4)
    np.testing.assert_array_equal(gi, expected)


def test_spec_example_adaptive_max_pool2d_backward_index_zero():
    g = np.array([[[[0.4757]]]])
    gi = ref_adaptive_max_pool2d_backward(g, (1, 1, 2, 2), np.array([[[[0]]]]))
    np.testing.assert_array_equal(gi, [[[[0.4757, 0], [0, 0]]]])


def test_spec_example_adaptive_max_pool2d_backward_index_six_is_rejected():
    with pytest.raises(IndexError):
        ref_adaptive_max_pool2d_backward(np.array([[[[0.4757]]]]), (1, 1, 2, 2),
                                         np.array([[[[6]]]]))


# --------------------------------------------------------------------------------------------
# output size (SPEC §1.1)

@pytest.mark.parametrize("in_size,k,s,p,ceil,expected", [
    (4, 4, 1, 0, False, 1),
    (5, 2, 2, 0, False, 2),
    (5, 2, 2, 0, True, 3),     # ceil keeps a last, partial window
    (4, 2, 2, 1, True, 3),
    (1, 2, 2, 1, True, 1),     # ceil's extra window would start in the right padding: dropped
    (1, 2, 2, 1, False, 1),
    (2, 5, 1, 0, False, -2),   # may be < 1; the operator turns that into 161002
    (7, 3, 2, 1, False, 4),
    (8, 3, 3, 1, True, 3),
])
def test_avg_pool2d_output_size_formula(in_size, k, s, p, ceil, expected):
    assert ref_avg_pool2d_output_size(in_size, k, s, p, ceil) == expected


# --------------------------------------------------------------------------------------------
# hand-computed avg_pool2d_backward cases

def test_avg_backward_overlapping_2x2_windows_by_hand():
    g = np.array([[[[1.0, 2.0], [3.0, 4.0]]]])
    gi = ref_avg_pool2d_backward(g, (1, 1, 3, 3), (2, 2), (1, 1), (0, 0), False, True, 0)
    expected = np.array([[1, 3, 2], [4, 10, 6], [3, 7, 4]]) / 4.0
    np.testing.assert_allclose(gi[0, 0], expected, rtol=0, atol=1e-15)


def test_avg_backward_padding_divisor_with_and_without_count_include_pad():
    g = np.ones((1, 1, 2, 2))
    with_pad = ref_avg_pool2d_backward(g, (1, 1, 2, 2), (3, 3), (1, 1), (1, 1), False, True, 0)
    without = ref_avg_pool2d_backward(g, (1, 1, 2, 2), (3, 3), (1, 1), (1, 1), False, False, 0)
    np.testing.assert_allclose(with_pad, np.full((1, 1, 2, 2), 4 / 9), rtol=1e-15)
    np.testing.assert_allclose(without, np.ones((1, 1, 2, 2)), rtol=1e-15)


def test_avg_backward_ceil_mode_last_window_pool_size_is_clipped_to_padded_input():
    # in=5, k=2, s=2, ceil: windows [0,2) [2,4) [4,6)->[4,5); hend=min(6, 5+0)=5 so the
    # count_include_pad divisor of the last window is 1, not 2.
    g = np.ones((1, 1, 1, 3))
    gi = ref_avg_pool2d_backward(g, (1, 1, 1, 5), (1, 2), (1, 2), (0, 0), True, True, 0)
    np.testing.assert_allclose(gi[0, 0, 0], [0.5, 0.5, 0.5, 0.5, 1.0], rtol=1e-15)


def test_avg_backward_negative_divisor_override():
    g = np.ones((1, 1, 1, 1))
    gi = ref_avg_pool2d_backward(g, (1, 1, 2, 2), (2, 2), (2, 2), (0, 0), False, True, -3)
    np.testing.assert_allclose(gi, np.full((1, 1, 2, 2), -1 / 3), rtol=1e-15)


def test_avg_backward_uncovered_elements_are_zero():
    g = np.ones((2, 1, 1))  # 3-D (C, H, W), kernel 2 stride 3 on a 4x4 plane: rows 2,3 uncovered
    gi = ref_avg_pool2d_backward(g, (2, 4, 4), (2, 2), (3, 3), (0, 0), False, True, 0)
    assert gi.shape == (2, 4, 4)
    np.testing.assert_array_equal(gi[:, 2:, :], 0)
    np.testing.assert_array_equal(gi[:, :, 2:], 0)
    np.testing.assert_array_equal(gi[:, :2, :2], 0.25)


def test_avg_backward_rejects_wrong_grad_output_shape():
    with pytest.raises(ValueError):
        ref_avg_pool2d_backward(np.ones((1, 1, 3, 3)), (1, 1, 4, 4), (2, 2), (2, 2), (0, 0),
                                False, True, 0)


# --------------------------------------------------------------------------------------------
# adjoint identity: <fwd(x), g> == <x, bwd(g)> (the backward is the transpose of the forward)

@pytest.mark.parametrize("shape,k,s,p,ceil,cip,div", [
    ((2, 3, 7, 9), (3, 3), (2, 2), (1, 1), True, True, 0),
    ((2, 3, 7, 9), (3, 2), (2, 1), (1, 0), True, False, 0),
    ((3, 8, 5), (2, 3), (1, 2), (1, 1), False, False, -2),
    ((1, 2, 6, 6), (4, 4), (3, 3), (2, 2), True, True, 5),
])
def test_avg_forward_and_backward_references_are_adjoint(shape, k, s, p, ceil, cip, div):
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape)
    y = ref_avg_pool2d(x, k, s, p, ceil, cip, div)
    g = rng.standard_normal(y.shape)
    gi = ref_avg_pool2d_backward(g, shape, k, s, p, ceil, cip, div)
    assert np.isclose(np.vdot(y, g), np.vdot(x, gi), rtol=1e-12)


@pytest.mark.parametrize("shape,out", [((2, 3, 5, 7, 4), (3, 2, 3)), ((2, 4, 4, 6), (4, 4, 6)),
                                       ((1, 1, 3, 3, 3), (5, 1, 2))])
def test_adaptive_avg3d_forward_and_backward_references_are_adjoint(shape, out):
    rng = np.random.default_rng(1)
    x = rng.standard_normal(shape)
    y = ref_adaptive_avg_pool3d(x, out)
    g = rng.standard_normal(y.shape)
    gi = ref_adaptive_avg_pool3d_backward(g, shape)
    assert np.isclose(np.vdot(y, g), np.vdot(x, gi), rtol=1e-12)


def test_adaptive_windows_overlap_when_output_does_not_divide_input():
    # in=5, out=3: windows [0,2) [1,4) [3,5)
    x = np.arange(5, dtype=np.float64).reshape(1, 1, 1, 1, 5)
    y = ref_adaptive_avg_pool3d(x, (1, 1, 3))
    np.testing.assert_allclose(y.ravel(), [0.5, 2.0, 3.5])


# --------------------------------------------------------------------------------------------
# adaptive max

def test_adaptive_max_forward_first_maximum_wins():
    x = np.array([[[[1.0, 3.0], [3.0, 0.0]]]])
    out, idx = ref_adaptive_max_pool2d(x, 1)
    assert out[0, 0, 0, 0] == 3.0 and idx[0, 0, 0, 0] == 1


def test_adaptive_max_forward_nan_is_the_maximum_and_last_nan_wins_like_torch_cpu():
    x = np.array([[[[1.0, np.nan], [np.nan, 9.0]]]])
    out, idx = ref_adaptive_max_pool2d(x, (1, 1))
    assert np.isnan(out[0, 0, 0, 0]) and idx[0, 0, 0, 0] == 2


def test_adaptive_max_forward_indices_are_flat_in_plane():
    x = np.zeros((2, 5, 4))
    x[0, 4, 3] = 5.0
    x[1, 1, 2] = 5.0
    out, idx = ref_adaptive_max_pool2d(x, (2, 2))
    assert idx.shape == (2, 2, 2)
    assert idx[0, 1, 1] == 4 * 4 + 3
    assert idx[1, 0, 1] == 1 * 4 + 2


def test_adaptive_max_backward_repeated_indices_accumulate():
    g = np.array([[[[1.0, 2.0], [4.0, 8.0]]]])
    idx = np.array([[[[3, 3], [0, 3]]]], dtype=np.int32)
    gi = ref_adaptive_max_pool2d_backward(g, (1, 1, 2, 3), idx)
    np.testing.assert_array_equal(gi, [[[[4.0, 0, 0], [11.0, 0, 0]]]])


def test_adaptive_max_forward_and_backward_references_are_adjoint_for_fixed_indices():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((2, 3, 7, 5))
    y, idx = ref_adaptive_max_pool2d(x, (3, 4))
    g = rng.standard_normal(y.shape)
    gi = ref_adaptive_max_pool2d_backward(g, x.shape, idx)
    assert np.isclose(np.vdot(y, g), np.vdot(x, gi), rtol=1e-12)


# --------------------------------------------------------------------------------------------
# rounding (SPEC §4)

def test_round_hf32_keeps_11_mantissa_bits_nearest_even():
    one = np.float32(1.0)
    ulp = 2.0 ** -11  # spacing of values with 11 explicit mantissa bits in [1, 2)
    vals = np.array([1.0, 1 + ulp, 1 + ulp / 2, 1 + 3 * ulp / 2, 1 + ulp / 2 + 2 ** -23,
                     -(1 + 3 * ulp / 2), 3.0, 0.0, -0.0], dtype=np.float32)
    expected = np.array([1.0, 1 + ulp, 1.0, 1 + 2 * ulp, 1 + ulp, -(1 + 2 * ulp), 3.0, 0.0,
                         -0.0], dtype=np.float32)
    got = ref_round_hf32(vals)
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got.view(np.uint32), expected.view(np.uint32))
    assert one == ref_round_hf32(one)


def test_round_hf32_keeps_inf_and_nan_and_zeroes_low_12_bits():
    vals = np.array([np.inf, -np.inf, np.nan], dtype=np.float32)
    got = ref_round_hf32(vals)
    assert got[0] == np.inf and got[1] == -np.inf and np.isnan(got[2])
    r = ref_round_hf32(np.random.default_rng(3).standard_normal(1000).astype(np.float32))
    assert np.all(r.view(np.uint32) & 0xFFF == 0)


def test_round_fp16_matches_numpy_cast():
    vals = np.array([1 + 2.0 ** -11, 1 + 3 * 2.0 ** -11, 70000.0, 1e-8], dtype=np.float32)
    with np.errstate(over="ignore"):
        got = ref_round_fp16(vals)
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, [1.0, 1 + 2.0 ** -9, np.inf, 0.0])


def test_tolerances_are_ordered_by_precision():
    order = [np.float64, np.float32, np.float16, BFLOAT16]
    rtols = [tolerance(d)[0] for d in order]
    assert rtols == sorted(rtols)


# --------------------------------------------------------------------------------------------
# against PyTorch (skipped when torch is absent)

AVG_CASES = [
    ((2, 3, 7, 9), (3, 3), (2, 2), (1, 1), True, True, None),
    ((2, 3, 7, 9), (3, 2), (2, 1), (1, 0), True, False, None),
    ((3, 8, 5), (2, 3), (1, 2), (1, 1), False, False, -2),
    ((1, 2, 6, 6), (4, 4), (3, 3), (2, 2), True, True, 5),
    ((1, 1, 5, 5), (2, 2), (2, 2), (0, 0), True, True, None),
]


@pytest.mark.parametrize("shape,k,s,p,ceil,cip,div", AVG_CASES)
def test_avg_references_match_torch(torch, shape, k, s, p, ceil, cip, div):
    rng = np.random.default_rng(4)
    x = rng.standard_normal(shape)
    y = torch.nn.functional.avg_pool2d(torch.from_numpy(x), k, s, p, ceil, cip, div).numpy()
    np.testing.assert_allclose(ref_avg_pool2d(x, k, s, p, ceil, cip, div), y, rtol=1e-12,
                               atol=1e-14)
    g = rng.standard_normal(y.shape)
    gi_t = torch.ops.aten.avg_pool2d_backward(torch.from_numpy(g), torch.from_numpy(x), list(k),
                                              list(s), list(p), ceil, cip, div).numpy()
    gi = ref_avg_pool2d_backward(g, shape, k, s, p, ceil, cip, div or 0)
    np.testing.assert_allclose(gi, gi_t, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("shape,out", [((2, 3, 5, 7, 4), (3, 2, 3)), ((2, 4, 4, 6), (4, 4, 6)),
                                       ((1, 2, 3, 3, 3), (5, 1, 2))])
def test_adaptive_avg3d_references_match_torch(torch, shape, out):
    rng = np.random.default_rng(5)
    xt = torch.from_numpy(rng.standard_normal(shape)).requires_grad_(True)
    yt = torch.nn.functional.adaptive_avg_pool3d(xt, out)
    np.testing.assert_allclose(ref_adaptive_avg_pool3d(xt.detach().numpy(), out),
                               yt.detach().numpy(), rtol=1e-12, atol=1e-14)
    g = rng.standard_normal(tuple(yt.shape))
    yt.backward(torch.from_numpy(g))
    np.testing.assert_allclose(ref_adaptive_avg_pool3d_backward(g, shape), xt.grad.numpy(),
                               rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("shape,out", [((2, 3, 7, 5), (3, 4)), ((3, 4, 4), (4, 4)),
                                       ((1, 2, 3, 5), (5, 2))])
def test_adaptive_max_references_match_torch(torch, shape, out):
    rng = np.random.default_rng(6)
    # few distinct values so ties occur; the first maximum must win as in torch
    x = rng.integers(0, 3, size=shape).astype(np.float64)
    x.reshape(-1)[::7] = np.nan
    yt, it = torch.nn.functional.adaptive_max_pool2d(torch.from_numpy(x), out,
                                                     return_indices=True)
    y, idx = ref_adaptive_max_pool2d(x, out)
    np.testing.assert_array_equal(y, yt.numpy())
    np.testing.assert_array_equal(idx, it.numpy())
    g = rng.standard_normal(y.shape)
    gi_t = torch.ops.aten.adaptive_max_pool2d_backward(torch.from_numpy(g), torch.from_numpy(x),
                                                       it).numpy()
    np.testing.assert_allclose(ref_adaptive_max_pool2d_backward(g, shape, idx), gi_t,
                               rtol=1e-12, atol=1e-14)


def test_tiny_cases_cover_every_combination_of_flags():
    # every (ceil_mode, count_include_pad, divisor_override sign) gives a finite, shaped result
    for ceil, cip, div in itertools.product([False, True], [False, True], [0, 3, -3]):
        g = np.ones((1, 1, ref_avg_pool2d_output_size(5, 3, 2, 1, ceil),
                     ref_avg_pool2d_output_size(6, 3, 2, 1, ceil)))
        gi = ref_avg_pool2d_backward(g, (1, 1, 5, 6), (3, 3), (2, 2), (1, 1), ceil, cip, div)
        assert gi.shape == (1, 1, 5, 6) and np.all(np.isfinite(gi))

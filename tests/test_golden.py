"""pool_grad.golden: golden data for CANN operator tests.

The golden functions are checked against the recipe CANN's ops-nn golden modules use
(`torch_recipe` below: 16-bit upcast to float32, torch.ops.aten.*_backward, cast back,
int32 indices widened to int64, NHWC permuted in and out), for every operator, dtype and
format; then the registry, the keyword handling and the command line.
"""
import doctest
import json
import os
import subprocess
import sys
import tracemalloc

import ml_dtypes
import numpy as np
import pytest

import pool_grad as pg
from pool_grad import golden

from conftest import child_kwargs

BF16 = np.dtype(ml_dtypes.bfloat16)
DTYPES = [np.dtype(np.float32), np.dtype(np.float64), np.dtype(np.float16), BF16]
DTYPE_IDS = ["float32", "float64", "float16", "bfloat16"]
HALF = (np.dtype(np.float16), BF16)
FORMATS = {2: ("NCHW", "NHWC"), 3: ("NCDHW", "NDHWC")}
PROG = "python -m pool_grad golden"

# --------------------------------------------------------------------------------------
# CANN's PyTorch recipe

ATEN = {
    "aclnnAvgPool2dBackward": "avg_pool2d_backward",
    "aclnnAvgPool3dBackward": "avg_pool3d_backward",
    "aclnnAdaptiveAvgPool2dBackward": "_adaptive_avg_pool2d_backward",
    "aclnnAdaptiveAvgPool3dBackward": "_adaptive_avg_pool3d_backward",
    "aclnnAdaptiveMaxPool2dBackward": "adaptive_max_pool2d_backward",
    "aclnnAdaptiveMaxPool3dBackward": "adaptive_max_pool3d_backward",
    "aclnnMaxPool2dWithIndicesBackward": "max_pool2d_with_indices_backward",
    "aclnnMaxPool3dWithArgmaxBackward": "max_pool3d_with_indices_backward",
}


def channels_last_axes(ndim, n):
    """Axes viewing a channels-last array (N, *spatial, C) / (*spatial, C) as N, C, ..."""
    if ndim == n + 2:
        return (0, ndim - 1) + tuple(range(1, ndim - 1))
    return (ndim - 1,) + tuple(range(ndim - 1))


def torch_recipe(name, n, go, x, indices, params, channels_last):
    """ops-nn's golden: upcast 16-bit to float32, torch.ops.aten.<op>_backward on the
    CPU, cast back; int32 indices to int64; channels-last permuted in and out."""
    torch = pytest.importorskip("torch")
    dtype = go.dtype
    perm = channels_last_axes(go.ndim, n) if channels_last else None

    def tensor(a):
        if a.dtype in HALF:
            a = a.astype(np.float32)
        t = torch.from_numpy(np.ascontiguousarray(a))
        if t.dtype == torch.int32:
            t = t.to(torch.int64)
        return t.permute(perm) if perm else t

    g, s = tensor(go), tensor(x)
    if indices is not None:
        # adaptive_max_pool3d_backward's CPU kernel reads indices through the raw data
        # pointer, ignoring channels-last strides (pytorch/pytorch#197888): the recipe's
        # permuted view gives wrong gradients there, so hand torch contiguous indices.
        indices = tensor(indices).contiguous()
    op = getattr(torch.ops.aten, ATEN[name])
    if name.startswith("aclnnAvgPool"):
        k, st, p, ceil, cip, div = params[:6]
        r = op(g, s, k, st, p, ceil, cip, div or None)
    elif name.startswith("aclnnAdaptiveAvg"):
        r = op(g, s)
    elif name.startswith("aclnnAdaptiveMax"):
        r = op(g, s, indices)
    else:
        k, st, p, d, ceil = params
        r = op(g, s, k, st, p, d, ceil, indices)
    if perm:
        r = r.permute(tuple(int(a) for a in np.argsort(perm)))
    return r.contiguous().numpy().astype(dtype)


def ordered(a):
    """Integers in the order of the values (so that neighbours differ by 1)."""
    bits = a.view(np.uint16).astype(np.int32)
    return np.where(bits & 0x8000, -(bits & 0x7FFF), bits)


def assert_close(got, want):
    assert got.dtype == want.dtype and got.shape == want.shape
    if got.dtype in HALF:   # both round once from float32: within one 16-bit ulp
        diff = np.abs(ordered(got) - ordered(want))
        assert diff.max(initial=0) <= 1, (got.astype(np.float64) - want.astype(np.float64))
    elif got.dtype == np.float32:
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    else:
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)


# --------------------------------------------------------------------------------------
# Cases: (operator, spatial rank, self shape (N, C, ... logical), output size or None,
# params in aclnn order)

CASES = [
    ("aclnnAvgPool2dBackward", 2, (2, 3, 7, 6), None,
     ([3, 2], [2, 1], [1, 1], True, False, 0, 0)),
    ("aclnnAvgPool2dBackward", 2, (3, 5, 5), None, ([3], [], [1], False, True, -3, 0)),
    ("aclnnAvgPool3dBackward", 3, (2, 2, 5, 6, 4), None,
     ([3, 2, 2], [2, 2, 1], [1, 1, 0], True, False, 0)),
    ("aclnnAvgPool3dBackward", 3, (2, 4, 4, 5), None, ([2], [], [1], False, True, 5)),
    ("aclnnAdaptiveAvgPool2dBackward", 2, (2, 3, 7, 5), (3, 4), ()),
    ("aclnnAdaptiveAvgPool2dBackward", 2, (3, 4, 6), (5, 4), ()),
    ("aclnnAdaptiveAvgPool3dBackward", 3, (2, 2, 5, 6, 4), (2, 3, 3), ()),
    ("aclnnAdaptiveAvgPool3dBackward", 3, (3, 4, 5, 3), (3, 2, 2), ()),
    ("aclnnAdaptiveMaxPool2dBackward", 2, (2, 3, 7, 5), (3, 4), ()),
    ("aclnnAdaptiveMaxPool2dBackward", 2, (3, 6, 6), (4, 4), ()),
    ("aclnnAdaptiveMaxPool3dBackward", 3, (2, 2, 5, 6, 4), (2, 3, 3), ()),
    ("aclnnAdaptiveMaxPool3dBackward", 3, (3, 4, 5, 3), (3, 2, 2), ()),
    ("aclnnMaxPool2dWithIndicesBackward", 2, (2, 3, 9, 8), None,
     ([3, 2], [2, 1], [1, 1], [2, 1], True)),
    ("aclnnMaxPool2dWithIndicesBackward", 2, (3, 7, 7), None, ([3], [], [1], [1], False)),
    ("aclnnMaxPool3dWithArgmaxBackward", 3, (2, 2, 6, 7, 5), None,
     ([3, 2, 2], [2, 2, 1], [1, 0, 1], [1], True)),
    ("aclnnMaxPool3dWithArgmaxBackward", 3, (2, 5, 4, 6), None, ([2], [], [1], [1], False)),
]


def make_case(name, n, shape, out_size, params, dtype, channels_last, rng,
              index_dtype=np.int32):
    """(gradOutput, self, indices) in the physical layout, and the golden's arguments."""
    x = rng.uniform(-1, 1, shape).astype(dtype)
    indices = None
    if name.startswith("aclnnAvgPool"):
        fwd = pg.avg_pool2d if n == 2 else pg.avg_pool3d
        y = fwd(x, *params[:6])
    elif name.startswith("aclnnAdaptiveAvg"):
        y = (pg.adaptive_avg_pool2d if n == 2 else pg.adaptive_avg_pool3d)(x, out_size)
    elif name.startswith("aclnnAdaptiveMax"):
        fwd = pg.adaptive_max_pool2d if n == 2 else pg.adaptive_max_pool3d
        y, indices = fwd(x, out_size, return_indices=True)
    else:
        fwd = pg.max_pool2d if n == 2 else pg.max_pool3d
        y, indices = fwd(x, *params, return_indices=True)
    go = rng.uniform(-1, 1, y.shape).astype(dtype)
    if indices is not None:
        indices = indices.astype(index_dtype)
    if channels_last:
        back = tuple(int(a) for a in np.argsort(channels_last_axes(x.ndim, n)))
        go, x = (np.ascontiguousarray(a.transpose(back)) for a in (go, x))
        if indices is not None:
            indices = np.ascontiguousarray(indices.transpose(back))
    return go, x, indices


def call_golden(name, go, x, indices, params, **kwargs):
    fn = golden.GOLDEN[name]
    extra = () if indices is None else (indices,)
    return fn(go, x, *extra, *params, **kwargs)


# --------------------------------------------------------------------------------------
# The functions against the recipe


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("channels_last", [False, True], ids=["first", "last"])
@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0][5:]}-{len(c[2])}d")
def test_golden_matches_the_pytorch_recipe(case, channels_last, dtype):
    name, n, shape, out_size, params = case
    rng = np.random.default_rng(len(shape) * 100 + len(name))
    idx_dtype = np.int32 if channels_last else np.int64
    go, x, indices = make_case(name, n, shape, out_size, params, dtype, channels_last, rng,
                               idx_dtype)
    fmt = FORMATS[n][channels_last]
    got = call_golden(name, go, x, indices, params, format=fmt)
    assert got.shape == x.shape and got.dtype == dtype and got.flags.c_contiguous
    assert_close(got, torch_recipe(name, n, go, x, indices, params, channels_last))


@pytest.mark.parametrize("case", [c for c in CASES if c[0].startswith("aclnnMax")][::2],
                         ids=lambda c: c[0][5:])
@pytest.mark.parametrize("index_dtype", [np.int32, np.int64], ids=["int32", "int64"])
def test_max_ops_take_int32_and_int64_indices_in_either_format(case, index_dtype):
    name, n, shape, out_size, params = case
    for channels_last in (False, True):
        go, x, indices = make_case(name, n, shape, out_size, params, BF16, channels_last,
                                   np.random.default_rng(1), index_dtype)
        got = call_golden(name, go, x, indices, params,
                          format=FORMATS[n][channels_last])
        assert_close(got, torch_recipe(name, n, go, x, indices, params, channels_last))


@pytest.mark.parametrize("cube", [pg.ALLOW_FP32_DOWN_PRECISION, pg.USE_FP16, pg.USE_HF32])
def test_avg_pool2d_cube_math_type_is_passed_on(cube):
    go, x, _ = make_case(*CASES[0][:4], CASES[0][4], np.float32, True,
                         np.random.default_rng(2))
    params = CASES[0][4][:6] + (cube,)
    got = golden.aclnn_avg_pool2d_backward_golden(go, x, *params, format="NHWC")
    want = pg.avg_pool2d_backward(go.transpose(0, 3, 1, 2), x.transpose(0, 3, 1, 2),
                                  *params[:3], ceil_mode=True, count_include_pad=False,
                                  cube_math_type=cube)
    np.testing.assert_array_equal(got, want.transpose(0, 2, 3, 1))
    if cube == pg.USE_FP16:   # the recipe on float16-rounded gradients
        go16 = go.astype(np.float16).astype(np.float32)
        assert_close(got, torch_recipe(CASES[0][0], 2, go16, x, None, params, True))


def test_self_may_be_a_shape_in_either_format():
    go, x, _ = make_case(*CASES[0][:4], CASES[0][4], np.float32, True,
                         np.random.default_rng(3))
    want = call_golden(CASES[0][0], go, x, None, CASES[0][4], format="NHWC")
    got = call_golden(CASES[0][0], go, x.shape, None, CASES[0][4], format="NHWC")
    np.testing.assert_array_equal(got, want)
    got = call_golden(CASES[0][0], go.transpose(0, 3, 1, 2).copy(),
                      x.transpose(0, 3, 1, 2).shape, None, CASES[0][4])
    np.testing.assert_array_equal(got, want.transpose(0, 3, 1, 2))


def test_channels_last_result_is_written_through_views_without_copies():
    name, n, shape, out_size, params = CASES[12]
    shape = (4, 16, 64, 64)
    go, x, idx = make_case(name, n, shape, out_size, params, np.float32, True,
                           np.random.default_rng(4))
    want = call_golden(name, go, x, idx, params, format="NHWC")
    out = np.full_like(x, 7)
    tracemalloc.start()
    try:
        got = call_golden(name, go, x, idx, params, gradInput=out, format="NHWC")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert got is out
    np.testing.assert_array_equal(out, want)
    assert peak < go.nbytes // 2, f"{peak} bytes allocated: a copy was made"


# --------------------------------------------------------------------------------------
# Keywords and the registry


def test_format_spellings_case_and_nd():
    name, n, shape, out_size, params = CASES[4]
    go, x, _ = make_case(name, n, shape, out_size, params, np.float32, True,
                         np.random.default_rng(5))
    want = call_golden(name, go, x, None, params, format="NHWC")
    for kw in ({"input_format": "NHWC"}, {"data_format": "nhwc"},
               {"format": "NHWC", "data_format": "NHWC"}):
        np.testing.assert_array_equal(call_golden(name, go, x, None, params, **kw), want)
    first = np.ascontiguousarray(go.transpose(0, 3, 1, 2))
    xs = x.transpose(0, 3, 1, 2).shape
    plain = call_golden(name, first, xs, None, params)
    for kw in ({"format": "ND"}, {"format": "NCHW"}, {"format": None}):
        np.testing.assert_array_equal(call_golden(name, first, xs, None, params, **kw),
                                      plain)


@pytest.mark.parametrize("kwargs, words", [
    ({"format": "NCDHW"}, ["format", "NCHW or NHWC", "2-D"]),
    ({"format": "NHWC", "data_format": "NCHW"}, ["format", "same format"]),
    ({"input_format": 4}, ["input_format", "string"]),
])
def test_bad_format_is_a_clear_param_invalid_error(kwargs, words):
    go = np.ones((1, 2, 2, 3), np.float32)
    with pytest.raises(pg.ParamInvalidError) as info:
        golden.aclnn_adaptive_avg_pool2d_backward_golden(go, (1, 4, 4, 3), **kwargs)
    for word in words:
        assert word in str(info.value)


def test_unknown_keywords_are_ignored_and_n_threads_is_passed_on():
    name, n, shape, out_size, params = CASES[12]
    go, x, idx = make_case(name, n, shape, out_size, params, np.float16, False,
                           np.random.default_rng(6))
    want = call_golden(name, go, x, idx, params)
    got = call_golden(name, go, x, idx, params, dtype="float16", input_formats=["ND"],
                      precision_method=1, foo=object(), n_threads=1)
    np.testing.assert_array_equal(got, want)
    with pytest.raises(pg.ParamInvalidError):
        call_golden(name, go, x, idx, params, n_threads=0)


def test_errors_of_the_core_come_through():
    with pytest.raises(pg.ParamInvalidError, match="padding"):
        golden.aclnn_avg_pool2d_backward_golden(np.ones((1, 1, 2, 2), np.float32),
                                                (1, 4, 4, 1), [2], [2], [2], False, True,
                                                0, format="NHWC")
    with pytest.raises(pg.ParamNullptrError):
        golden.aclnn_adaptive_avg_pool3d_backward_golden(None, (1, 1, 2, 2, 2))


def test_registry_maps_every_aclnn_name_to_its_function():
    assert list(golden.GOLDEN) == list(ATEN)
    for name, fn in golden.GOLDEN.items():
        assert callable(fn) and fn.__name__.endswith("_golden")
        assert golden.get_golden(name) is fn
        assert golden.get_golden(name[len("aclnn"):]) is fn
        assert name in fn.__doc__


def test_unknown_operator_names_the_known_ones():
    for bad in ("aclnnAvgPool2dBackwards", "nope", None):
        with pytest.raises(KeyError) as info:
            golden.get_golden(bad)
        assert isinstance(info.value, ValueError)
        msg = str(info.value)
        assert msg.startswith(f"unknown operator {bad!r}")
        assert all(name in msg for name in golden.GOLDEN)
    assert "did you mean aclnnAvgPool2dBackward?" in str(
        pytest.raises(KeyError, golden.get_golden, "aclnnAvgPool2dBackwards").value)


def test_docstring_examples_run():
    result = doctest.testmod(golden, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted >= 10 and result.failed == 0


# --------------------------------------------------------------------------------------
# Command line


def run_cli(capsys, *argv):
    rc = golden.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


def load(directory):
    """The manifest, and every file read back as the array the manifest describes."""
    with open(os.path.join(directory, "manifest.json")) as f:
        manifest = json.load(f)
    arrays = {}
    for entry in manifest["inputs"] + manifest["outputs"]:
        path = os.path.join(directory, entry["file"])
        assert os.path.getsize(path) == entry["nbytes"]
        dtype = BF16 if entry["dtype"] == "bfloat16" else np.dtype("<" + np.dtype(
            entry["dtype"]).str[1:])
        arrays[entry["name"]] = np.fromfile(path, dtype).reshape(entry["shape"])
    return manifest, arrays


CLI_CASES = [
    ("aclnnAvgPool2dBackward", ["--shape", "2,9,9,3", "--format", "NHWC", "--dtype",
                                "bfloat16", "--kernel", "3", "--stride", "2", "--padding",
                                "1", "--no-count-include-pad", "--cube-math-type", "1"]),
    ("aclnnAvgPool3dBackward", ["--shape", "2,3,5,6,7", "--dtype", "float16", "--kernel",
                                "3,2,2", "--ceil-mode", "--divisor-override", "-4"]),
    ("aclnnAdaptiveAvgPool2dBackward", ["--shape", "3,7,5", "--output-size", "3,2"]),
    ("aclnnAdaptiveAvgPool3dBackward", ["--shape", "2,5,6,4,3", "--format", "NDHWC",
                                        "--output-size", "2", "--dtype", "float64"]),
    ("aclnnAdaptiveMaxPool2dBackward", ["--shape", "2,8,8,3", "--format", "nhwc",
                                        "--output-size", "3", "--dtype", "bf16"]),
    ("aclnnAdaptiveMaxPool3dBackward", ["--shape", "2,3,5,6,4", "--output-size", "2,3,2",
                                        "--index-dtype", "int64"]),
    ("aclnnMaxPool2dWithIndicesBackward", ["--shape", "2,3,9,8", "--kernel", "3",
                                           "--stride", "2", "--padding", "1",
                                           "--dilation", "2", "--dtype", "fp16"]),
    ("aclnnMaxPool3dWithArgmaxBackward", ["--shape", "2,6,7,5,3", "--format", "NDHWC",
                                          "--kernel", "2", "--padding", "1"]),
]


@pytest.mark.parametrize("name, argv", CLI_CASES, ids=[c[0][5:] for c in CLI_CASES])
def test_cli_writes_inputs_golden_output_and_manifest(name, argv, tmp_path, capsys):
    rc, out, err = run_cli(capsys, name, *argv, "--seed", 7, "--out", tmp_path)
    assert rc == 0 and err == ""
    assert out.startswith("wrote ") and str(tmp_path) in out
    manifest, arrays = load(tmp_path)
    assert manifest["operator"] == name and manifest["seed"] == 7
    assert manifest["byte_order"] == "little"
    assert sorted(os.listdir(tmp_path)) == sorted(
        [e["file"] for e in manifest["inputs"] + manifest["outputs"]] + ["manifest.json"])
    names = [e["name"] for e in manifest["inputs"]]
    out_name = manifest["outputs"][0]["name"]
    assert names[:2] == ["gradOutput", "self"]
    assert (names[2:] == ["indices"]) == ("Max" in name)
    fmt = manifest["format"]
    assert all(e["format"] == fmt for e in manifest["inputs"] + manifest["outputs"])
    x, go = arrays["self"], arrays["gradOutput"]
    assert list(x.shape) == [int(s) for s in argv[1].split(",")]
    assert go.dtype == x.dtype == arrays[out_name].dtype
    mag = np.abs(go.astype(np.float64))
    assert mag.min() >= 0.125 and mag.max() < 2 and (go.astype(np.float64) < 0).any()
    if "indices" in arrays:
        assert arrays["indices"].dtype == ("int64" if "int64" in argv else "int32")
    # the expected output is the golden function of the files, bitwise
    extra = (arrays["indices"],) if "indices" in arrays else ()
    want = golden.get_golden(name)(go, x, *extra, *manifest["params"].values(), format=fmt)
    np.testing.assert_array_equal(arrays[out_name].view(np.uint8), want.view(np.uint8))
    # ... and the PyTorch recipe's, within the dtype's tolerance
    n = 3 if "3d" in name else 2
    params = tuple(manifest["params"].values())
    if name == "aclnnAvgPool2dBackward" and params[-1] != 0:
        return   # cube math rounds gradOutput first; the plain recipe does not
    assert_close(arrays[out_name], torch_recipe(name, n, go, x, extra[0] if extra else None,
                                                params, fmt in ("NHWC", "NDHWC")))


def test_cli_issue_example_and_command_in_manifest(tmp_path, capsys):
    argv = ["aclnnAvgPool2dBackward", "--shape", "2,8,14,14", "--dtype", "bfloat16",
            "--kernel", "3", "--stride", "2", "--padding", "1", "--seed", "0"]
    rc, _, err = run_cli(capsys, *argv, "--out", tmp_path / "a")
    assert rc == 0 and err == ""
    manifest, arrays = load(tmp_path / "a")
    assert manifest["params"] == {"kernelSize": [3], "stride": [2], "padding": [1],
                                  "ceilMode": False, "countIncludePad": True,
                                  "divisorOverride": 0, "cubeMathType": 0}
    assert manifest["inputs"][0]["shape"] == [2, 8, 7, 7]
    # the recorded command writes the same bytes
    cmd = manifest["command"].split()
    assert " ".join(cmd[:5]) == PROG + " aclnnAvgPool2dBackward"
    rc, _, _ = run_cli(capsys, *cmd[4:], "--out", tmp_path / "b")
    assert rc == 0
    for f in os.listdir(tmp_path / "a"):
        assert (tmp_path / "a" / f).read_bytes() == (tmp_path / "b" / f).read_bytes()


def test_cli_same_seed_same_bytes_other_seed_other_data(tmp_path, capsys):
    argv = ["aclnnMaxPool2dWithIndicesBackward", "--shape", "2,3,20,20", "--kernel", "3",
            "--stride", "2", "--dtype", "bfloat16"]
    for d, seed in (("a", 5), ("b", 5), ("c", 6)):
        assert run_cli(capsys, *argv, "--seed", seed, "--out", tmp_path / d)[0] == 0
    files = sorted(os.listdir(tmp_path / "a"))
    assert files == ["gradInput.bin", "gradOutput.bin", "indices.bin", "manifest.json",
                     "self.bin"]
    for f in files:
        assert (tmp_path / "a" / f).read_bytes() == (tmp_path / "b" / f).read_bytes()
    for f in ("gradOutput.bin", "self.bin"):
        assert (tmp_path / "a" / f).read_bytes() != (tmp_path / "c" / f).read_bytes()


BAD = [
    (["aclnnFoo", "--shape", "1,1,2,2", "--kernel", "2"], ["unknown operator 'aclnnFoo'",
                                                           "aclnnAvgPool2dBackward"]),
    (["aclnnAvgPool2dBackward", "--shape", "8,x,4,4", "--kernel", "2"],
     ["--shape", "integers"]),
    (["aclnnAvgPool2dBackward", "--shape", "2,3,4,5,6", "--kernel", "2", "--format", "NHWC"],
     ["--shape", "4 dimensions", "N,H,W,C"]),
    (["aclnnAvgPool2dBackward", "--shape", "1,1,4,4", "--kernel", "2", "--dtype", "int8"],
     ["--dtype", "bfloat16", "int8"]),
    (["aclnnAvgPool2dBackward", "--shape", "1,1,4,4", "--kernel", "3", "--padding", "2"],
     ["161002", "padding", "half the kernel", "--padding"]),
    (["aclnnAvgPool2dBackward", "--shape", "1,1,4,4"], ["--kernel is required"]),
    (["aclnnAdaptiveAvgPool2dBackward", "--shape", "1,1,4,4"],
     ["--output-size is required"]),
    (["aclnnAvgPool2dBackward", "--shape", "1,1,4,4", "--kernel", "2", "--dilation", "2"],
     ["--dilation does not apply", "--kernel"]),
    (["aclnnAvgPool3dBackward", "--shape", "1,1,4,4,4", "--kernel", "2", "--format",
      "NHWC"], ["--format", "NCDHW or NDHWC"]),
    (["aclnnMaxPool3dWithArgmaxBackward", "--shape", "1,1,4,4,4", "--kernel", "2",
      "--dilation", "2"], ["161002", "dilation", "--dilation"]),
    (["aclnnAdaptiveAvgPool2dBackward", "--shape", "1,0,4,4", "--output-size", "2"],
     ["161002", "zero-size", "--shape"]),
    (["aclnnMaxPool2dWithIndicesBackward", "--shape", "1,1,4,4", "--kernel", "2",
      "--index-dtype", "int16"], ["--index-dtype", "int32 or int64"]),
    (["aclnnAvgPool2dBackward", "--shape", "1,1,4,4", "--kernel", "2", "--seed", "-1"],
     ["--seed", ">= 0"]),
    (["aclnnAvgPool2dBackward", "--shape", "1,1,4,4", "--kernel", "2", "--bogus"],
     ["unrecognized arguments: --bogus"]),
    (["aclnnAvgPool2dBackward", "--shape", "100000,100000,1000,1000", "--kernel", "2"],
     ["--shape", "memory"]),
]


@pytest.mark.parametrize("argv, words", BAD, ids=range(len(BAD)))
def test_cli_bad_arguments_exit_2_with_one_line(argv, words, tmp_path, capsys):
    rc, out, err = run_cli(capsys, *argv, "--out", tmp_path / "d")
    assert rc == 2 and out == ""
    assert err.count("\n") == 1 and err.endswith("\n") and "Traceback" not in err
    assert err.startswith(f"{PROG}: error: ")
    for word in words:
        assert word in err, err
    assert not (tmp_path / "d" / "manifest.json").exists()


def test_cli_out_must_be_a_directory_and_help_exits_0(tmp_path, capsys):
    f = tmp_path / "file"
    f.write_text("")
    rc, _, err = run_cli(capsys, "aclnnAvgPool2dBackward", "--shape", "1,1,4,4",
                         "--kernel", "2", "--out", f)
    assert rc == 2 and "--out must be a directory" in err and err.count("\n") == 1
    rc, out, _ = run_cli(capsys, "--help")
    assert rc == 0 and "--output-size" in out and "aclnnMaxPool3dWithArgmaxBackward" in out


def test_cli_in_a_process_prints_no_traceback(tmp_path):
    code = "import sys, pool_grad.golden as g; sys.exit(g.main(sys.argv[1:]))"
    proc = subprocess.run(
        [sys.executable, "-c", code, "aclnnAvgPool2dBackward", "--shape", "1,1,4,4",
         "--kernel", "3", "--padding", "2", "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=60, **child_kwargs())
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert "ACLNN_ERR_PARAM_INVALID (161002): padding" in proc.stderr


def test_cli_progress_bar_over_64_mib_only(tmp_path, capsys):
    # 36 MiB self + 36 MiB expected output: 72 MiB written
    rc, _, err = run_cli(capsys, "aclnnAdaptiveAvgPool2dBackward", "--shape",
                         "1,9,1024,1024", "--output-size", "1", "--out", tmp_path / "big")
    assert rc == 0
    assert err.startswith("\rwriting [") and err.endswith("100% 72.0/72.0 MiB\n")
    assert err.count("\n") == 1 and err.count("\r") > 3
    rc, _, err = run_cli(capsys, "aclnnAdaptiveAvgPool2dBackward", "--shape",
                         "1,9,64,64", "--output-size", "1", "--out", tmp_path / "small")
    assert rc == 0 and err == ""

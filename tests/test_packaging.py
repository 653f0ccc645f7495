"""The installed package: that the tests import it (not the source tree), what it reports
about itself (__version__, show_config), what it ships and depends on, and that its OpenMP
runtime is the one threadpoolctl sees and limits."""

import importlib.metadata
import io
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

import pool_grad
from pool_grad import _config, _kernels, _threads


def _distribution():
    try:
        return importlib.metadata.distribution("pool_grad")
    except importlib.metadata.PackageNotFoundError:
        if os.environ.get("POOL_GRAD_TEST_SOURCE_TREE", "") not in ("", "0"):
            pytest.skip("POOL_GRAD_TEST_SOURCE_TREE=1: testing an uninstalled in-place build")
        pytest.fail(f"pool_grad is imported from {pool_grad.__file__} but is not installed: "
                    "the tests run against the installed package (pip install '.[test]')")


def _editable(dist):
    text = dist.read_text("direct_url.json")
    return bool(text) and json.loads(text).get("dir_info", {}).get("editable", False)


def _installed_files(dist):
    return {Path(dist.locate_file(f)).resolve() for f in dist.files or ()}


@pytest.fixture
def default_threads():
    """pool_grad's thread default left to the OpenMP runtime (no set_num_threads) for the
    test, and put back afterwards."""
    saved = _threads.user_threads()
    pool_grad.set_num_threads(None)
    yield
    pool_grad.set_num_threads(saved)


def _run_python(code, **env):
    """Run ``code`` in a fresh interpreter (a new OpenMP runtime) from outside the source
    tree, so it imports the same pool_grad as this process; returns its stdout."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("OMP_", "KMP_"))}
    environ.update(env)
    pkg_parent = str(Path(pool_grad.__file__).resolve().parent.parent)
    environ["PYTHONPATH"] = os.pathsep.join([pkg_parent] + [
        p for p in environ.get("PYTHONPATH", "").split(os.pathsep) if p])
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=environ,
                         cwd=pkg_parent, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    return out.stdout


# -- the tests run against the installed package ------------------------------------------

def test_tests_import_the_installed_package_not_the_source_tree():
    dist = _distribution()
    if _editable(dist):
        pytest.skip("editable install: pool_grad is the source tree by design")
    if os.environ.get("POOL_GRAD_TEST_SOURCE_TREE", "") not in ("", "0"):
        pytest.skip("POOL_GRAD_TEST_SOURCE_TREE=1: testing an uninstalled in-place build")
    installed = _installed_files(dist)
    for module in (pool_grad, _kernels):
        path = Path(module.__file__).resolve()
        assert path in installed, (
            f"{module.__name__} was imported from {path}, which is not a file of the "
            f"installed distribution at {dist.locate_file('')}: the source tree shadows the "
            "installed package (run `pytest`, not `python -m pytest`, from the checkout)")


def test_version_is_the_distributions():
    assert pool_grad.__version__ == _distribution().version


def test_installed_files_are_the_package_and_its_openmp_runtime_only():
    dist = _distribution()
    if _editable(dist):
        pytest.skip("editable install: the package is the source tree")
    top = {f.parts[0] for f in dist.files if not f.parts[0].endswith(".dist-info")}
    assert top <= {"pool_grad", "pool_grad.libs"}, top
    shipped = [f for f in dist.files if f.parts[0] == "pool_grad"]
    # .dylib: delocate's pool_grad/.dylibs/libomp.dylib on macOS; py.typed and the
    # extension's .pyi stub: the type information (PEP 561)
    assert {f.suffix for f in shipped} <= {".py", ".pyc", ".so", ".pyd", ".dylib", ".pyi",
                                           ".typed"}, shipped
    assert any(f.name == "py.typed" for f in shipped)
    assert any(f.name == "_kernels.pyi" for f in shipped)
    assert any(f.name.startswith("_kernels.") and f.suffix in (".so", ".pyd") for f in shipped)
    assert any(f.name == "_build_info.py" for f in shipped)


def test_requirements_name_neither_cython_nor_torch():
    try:
        requires = importlib.metadata.requires("pool_grad")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("pool_grad is not installed (an in-place build)")
    names = [r.split(";")[0].strip().lower() for r in requires]
    assert not any(n.startswith(("cython", "torch")) for n in names), names


# -- what it reports about itself ---------------------------------------------------------

def test_build_info_records_compiler_and_flags():
    build = _config.config()["build"]
    assert build, "pool_grad/_build_info.py missing: setup.py's BuildExt did not write it"
    assert build["compiler"] and build["compiler_type"]
    assert build["extra_compile_args"]
    assert build["cython"]


def test_show_config_prints_version_openmp_threads_build_and_dependencies():
    buf = io.StringIO()
    pool_grad.show_config(file=buf)
    lines = dict(line.split(": ", 1) for line in buf.getvalue().splitlines())
    assert lines["pool_grad"] == pool_grad.__version__
    assert lines["numpy"] == np.__version__
    assert lines["ml_dtypes"] == ml_dtypes.__version__
    assert lines["openmp"] == str(_kernels.OPENMP_ENABLED)
    assert int(lines["openmp_max_threads"]) >= 1
    assert int(lines["default_threads"]) >= 1
    assert lines["build.compiler"] and lines["build.extra_compile_args"]
    if _kernels.OPENMP_ENABLED:
        assert lines["openmp_library"] != "None"


def test_openmp_is_enabled_when_the_build_asked_for_it():
    build = _config.config()["build"]
    if not build.get("openmp_requested", True):
        pytest.skip("built with POOL_GRAD_NO_OPENMP=1")
    assert _kernels.OPENMP_ENABLED
    assert _kernels.OPENMP_VERSION >= 200203  # MSVC's OpenMP 2.0 is the oldest
    assert _config.openmp_library() is not None


def test_a_repaired_wheel_calls_its_bundled_openmp_runtime():
    dist = _distribution()
    # auditwheel and delvewheel: pool_grad.libs/; delocate: pool_grad/.dylibs/
    bundled = [p for p in _installed_files(dist)
               if p.parent.name in ("pool_grad.libs", ".dylibs") and "omp" in p.name]
    if not bundled:
        pytest.skip("not a repaired wheel (no bundled OpenMP runtime)")
    assert Path(_config.openmp_library()).resolve() in bundled


# -- threadpoolctl ------------------------------------------------------------------------

def _threadpoolctl():
    return pytest.importorskip("threadpoolctl")


def test_threadpoolctl_sees_the_openmp_runtime_pool_grad_calls():
    if not _kernels.OPENMP_ENABLED:
        pytest.skip("built without OpenMP")
    threadpoolctl = _threadpoolctl()
    def same(path):
        return os.path.normcase(os.path.realpath(path))

    ours = same(_config.openmp_library())
    seen = [same(i["filepath"]) for i in threadpoolctl.threadpool_info()
            if i["user_api"] == "openmp"]
    assert ours in seen, (ours, seen)


def test_threadpool_limits_sets_pool_grads_default_thread_count(default_threads):
    if not _kernels.OPENMP_ENABLED:
        pytest.skip("built without OpenMP")
    threadpoolctl = _threadpoolctl()
    outside = pool_grad.get_num_threads()
    with threadpoolctl.threadpool_limits(1, user_api="openmp"):
        assert _kernels.omp_max_threads() == 1
        assert pool_grad.get_num_threads() == 1
    assert pool_grad.get_num_threads() == outside


def test_set_num_threads_wins_over_threadpool_limits(default_threads):
    threadpoolctl = _threadpoolctl()
    pool_grad.set_num_threads(2)
    with threadpoolctl.threadpool_limits(1, user_api="openmp"):
        assert pool_grad.get_num_threads() == 2


def test_omp_num_threads_sets_the_default_thread_count():
    out = _run_python("""
        import pool_grad
        print(pool_grad.get_num_threads(), pool_grad._kernels.omp_max_threads())
    """, OMP_NUM_THREADS="1")
    assert out.split() == ["1", "1"]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="counts /proc/self/task")
def test_threadpool_limits_1_runs_pool_grad_on_one_thread():
    """Counts the process's threads around a large call: an OpenMP team keeps its worker
    threads after the region, so a call on T threads leaves T - 1 new ones; under
    threadpool_limits(1) the call must leave none (and give the same result)."""
    if not _kernels.OPENMP_ENABLED or _threads.CPU_COUNT < 2:
        pytest.skip("needs OpenMP and two CPUs")
    pytest.importorskip("threadpoolctl")
    code = """
        import contextlib, os, sys
        import numpy as np
        import threadpoolctl
        import pool_grad as pg

        def threads():
            return len(os.listdir("/proc/self/task"))

        limit = sys.argv[-1] == "limit"
        go = np.ones((8, 64, 56, 56), np.float32)
        before = threads()
        with (threadpoolctl.threadpool_limits(1, user_api="openmp") if limit
              else contextlib.nullcontext()):
            gi = pg.avg_pool2d_backward(go, (8, 64, 112, 112), 3, 2, 1)
            go5 = np.ones((4, 32, 4, 8, 8), np.float32)
            gi5 = pg.adaptive_avg_pool3d_backward(go5, (4, 32, 16, 64, 64))
        print(threads() - before, float(gi.sum()), float(gi5.sum()))
    """
    unlimited = _run_python(code.replace('sys.argv[-1] == "limit"', "False")).split()
    limited = _run_python(code.replace('sys.argv[-1] == "limit"', "True")).split()
    assert int(unlimited[0]) >= 1, "the unlimited call did not start a thread team"
    assert int(limited[0]) == 0, f"{limited[0]} threads started under threadpool_limits(1)"
    assert limited[1:] == unlimited[1:]


_PYX_DIR = Path(__file__).resolve().parent.parent / "pyx"


@pytest.mark.skipif(not (_PYX_DIR / "_kernels.pyx").exists(), reason="needs the source checkout")
@pytest.mark.skipif(not (shutil.which("cc") or shutil.which("gcc")), reason="no C compiler")
@pytest.mark.parametrize("dispatch", [True, False], ids=["x86-dispatch", "PG_NO_DISPATCH"])
def test_kernel_headers_compile_with_and_without_the_avx2_builds(dispatch, tmp_path):
    """Each pyx/pg_*.h compiles on its own, also with -DPG_NO_DISPATCH (what other CPUs and
    MSVC build: no AVX2 loops at all), so AVX2 code left outside its `#if PG_X86_DISPATCH`
    guard fails here, not on another platform's build."""
    cc = shutil.which("cc") or shutil.which("gcc")
    src = tmp_path / "one.c"
    for header in sorted(_PYX_DIR.glob("pg_*.h")):
        src.write_text(f'#include "{header.name}"\nint main(void) {{ return 0; }}\n')
        # with the bodies that pyx/pg_item.c and pyx/pg_lanes.c compile
        cmd = [cc, "-fsyntax-only", "-DPG_ITEM_BODIES", "-DPG_LANES_BODIES", "-I",
               str(_PYX_DIR), str(src)]
        if not dispatch:
            cmd.insert(1, "-DPG_NO_DISPATCH")
        done = subprocess.run(cmd, capture_output=True, text=True)
        assert done.returncode == 0, f"{header.name}:\n{done.stderr}"


_ROOT = _PYX_DIR.parent


@pytest.mark.skipif(not (_ROOT / "tests" / "requirements.txt").exists(),
                    reason="needs the source checkout")
def test_test_requirements_are_the_test_extra():
    """README's test command installs tests/requirements.txt (the package is installed
    already); it must list what `pip install ".[test]"` installs."""
    tomllib = pytest.importorskip("tomllib")
    extra = tomllib.loads((_ROOT / "pyproject.toml").read_text())[
        "project"]["optional-dependencies"]["test"]
    lines = (_ROOT / "tests" / "requirements.txt").read_text().splitlines()
    listed = [line for line in lines if line.strip() and not line.startswith("#")]
    assert listed == extra

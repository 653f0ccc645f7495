"""Build of pool_grad's Cython kernels, with OpenMP on every platform that wheels target.

Environment switches (for developers):
  LIBOMP_PREFIX=/path       macOS: where libomp lives (default: `brew --prefix libomp`)
  POOL_GRAD_NO_OPENMP=1     build without OpenMP (kernels run on one thread)
  POOL_GRAD_NO_DISPATCH=1   leave out the x86 AVX2/F16C loops (-DPG_NO_DISPATCH: the
                            portable loops that other CPUs run), keeping Python's own flags
  POOL_GRAD_BOUNDSCHECK=1   compile the kernels with Cython bounds checking on
  POOL_GRAD_SANITIZE=address  add -fsanitize=address (gcc/clang); see README
  POOL_GRAD_OPT=1           gcc/clang -O1 instead of -O3: half the compile time, the same
                            results (IEEE arithmetic in a fixed order at every level), for
                            builds that only run tests (CI's clang and no-dispatch phases)
"""
import glob
import os
import platform
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext


def _flag(name):
    return os.environ.get(name, "") not in ("", "0")


def _brew_prefix(formula):
    """Homebrew's prefix of a keg-only formula (libomp is one), or "" without Homebrew."""
    try:
        out = subprocess.run(["brew", "--prefix", formula], capture_output=True, text=True,
                             timeout=60)
    except (OSError, subprocess.SubprocessError):
        return ""
    prefix = out.stdout.strip()
    return prefix if out.returncode == 0 and os.path.isdir(prefix) else ""


class BuildExt(build_ext):
    """Picks the optimisation and OpenMP flags for the compiler in use and records them
    in pool_grad/_build_info.py, which pool_grad.show_config() prints."""

    def build_extensions(self):
        ctype = self.compiler.compiler_type
        openmp = not _flag("POOL_GRAD_NO_OPENMP")
        cflags, lflags = [], []
        if ctype == "msvc":
            cflags += ["/O2", "/fp:precise"]
            if openmp:
                cflags += ["/openmp"]
        else:
            # -ffp-contract=off: no fused multiply-add, so results do not depend on the
            # target's FMA support (one golden answer per input on every machine).
            opt = os.environ.get("POOL_GRAD_OPT", "") or "3"
            if opt not in ("1", "2", "3"):
                raise SystemExit(f"POOL_GRAD_OPT must be 1, 2 or 3, not {opt!r}")
            cflags += ["-O" + opt, "-ffp-contract=off", "-fno-math-errno"]
            # pg_vec.h's 32-byte vectors pass between inlined functions only: gcc's note on
            # their ABI outside AVX code says nothing about this build
            cflags += ["-Wno-psabi"]
            # the kernels' cdef functions are fused over (storage, accumulator) types, and
            # Cython emits every pair although only (float, float), (double, double) and
            # (uint16, float) are called: the other specializations are dead by design
            cflags += ["-Wno-unused-function"]
            if openmp:
                if sys.platform == "darwin":
                    prefix = os.environ.get("LIBOMP_PREFIX", "") or _brew_prefix("libomp")
                    inc = ["-I" + os.path.join(prefix, "include")] if prefix else []
                    if self._compiles("#include <omp.h>\n", ["-Xpreprocessor", "-fopenmp"]
                                      + inc):
                        cflags += ["-Xpreprocessor", "-fopenmp"] + inc
                        lflags += ["-lomp"]
                        if prefix:
                            lflags += ["-L" + os.path.join(prefix, "lib")]
                    else:
                        openmp = False
                        print("pool_grad: omp.h not found (no Homebrew libomp and no "
                              "LIBOMP_PREFIX): building WITHOUT OpenMP, every call runs "
                              "on one thread. `brew install libomp` or set LIBOMP_PREFIX "
                              "(e.g. to conda-forge's llvm-openmp) and rebuild for threads.",
                              file=sys.stderr)
                else:
                    cflags += ["-fopenmp"]
                    lflags += ["-fopenmp"]
            san = os.environ.get("POOL_GRAD_SANITIZE", "")
            if san:
                cflags += ["-fsanitize=" + san, "-fno-omit-frame-pointer", "-g"]
                lflags += ["-fsanitize=" + san]
            else:
                # no debug information (Python's own flags ask for -g): the 4 MB generated
                # C file then compiles in 0.8x the time (2.5 instead of 3 minutes on a
                # 2-vCPU Cascade Lake, three builds a CI run) into 2 MB of object code, not 23
                cflags += ["-g0"]
        for ext in self.extensions:
            ext.extra_compile_args = cflags + list(ext.extra_compile_args or [])
            ext.extra_link_args = lflags + list(ext.extra_link_args or [])
        compiler = " ".join(getattr(self.compiler, "compiler_so", None) or [ctype])
        self._write_build_info(compiler, cflags, lflags, openmp)
        self._compile_units_in_parallel()
        super().build_extensions()

    def _compile_units_in_parallel(self):
        """The extension's C units (pyx/pg_item.c, pyx/pg_lanes.c, Cython's _kernels.c)
        compiled at once, one compiler process each, at most `build_ext -j N` or the CPU
        count of them: setuptools compiles one extension's sources one after another."""
        if self.compiler.compiler_type == "msvc":   # (sets itself up on its first compile)
            return
        jobs = self.parallel if type(self.parallel) is int else os.cpu_count() or 1
        serial = self.compiler.compile

        def compile(sources, *args, **kwargs):
            if jobs < 2 or len(sources) < 2:
                return serial(sources, *args, **kwargs)
            from concurrent.futures import ThreadPoolExecutor
            with ThreadPoolExecutor(min(jobs, len(sources))) as pool:
                parts = list(pool.map(lambda src: serial([src], *args, **kwargs), sources))
            return [obj for part in parts for obj in part]

        self.compiler.compile = compile

    # setuptools' build_ext.run() clears self.inplace while it builds and afterwards copies
    # only the extension modules back into the source tree (copy_extensions_to_source);
    # an editable install asks get_output_mapping() for what to link back.  So the info file
    # is always written under build_lib and joins the extension in both of those places.

    def _build_info_paths(self):
        """(build_lib file, source-tree file) of pool_grad/_build_info.py."""
        package_dir = self.get_finalized_command("build_py").get_package_dir("pool_grad")
        return (os.path.join(self.build_lib, "pool_grad", "_build_info.py"),
                os.path.join(package_dir, "_build_info.py"))

    def copy_extensions_to_source(self):
        super().copy_extensions_to_source()
        built, source = self._build_info_paths()
        self.copy_file(built, source, level=self.verbose)

    def get_output_mapping(self):
        mapping = super().get_output_mapping()
        if self.inplace:
            built, source = self._build_info_paths()
            mapping[built] = source
        return mapping

    def get_outputs(self):
        outputs = super().get_outputs()
        return outputs if self.inplace else outputs + [self._build_info_paths()[0]]

    def _compiles(self, source, flags):
        """Whether the compiler in use compiles `source` with `flags` (a probe)."""
        import tempfile
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "probe.c")
            with open(path, "w") as f:
                f.write(source)
            try:
                self.compiler.compile([path], output_dir=tmp, extra_postargs=flags)
            except Exception:  # noqa: BLE001 - any failure means "no"
                return False
        return True

    def _compiler_version(self):
        """The compiler's own version line, best effort (empty when it cannot be asked)."""
        try:
            if self.compiler.compiler_type == "msvc":
                if not getattr(self.compiler, "initialized", True):
                    self.compiler.initialize()
                cmd = [getattr(self.compiler, "cc", "cl.exe")]
            else:
                cmd = [self.compiler.compiler_so[0], "--version"]
            out = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
            lines = (out.stdout + out.stderr).strip().splitlines()
            return lines[0].strip() if lines else ""
        except Exception:  # noqa: BLE001 - informational only, never fail the build on it
            return ""

    def _write_build_info(self, compiler, cflags, lflags, openmp):
        import Cython

        fields = {
            "compiler": compiler,
            "compiler_version": self._compiler_version(),
            "compiler_type": self.compiler.compiler_type,
            "extra_compile_args": cflags,
            "extra_link_args": lflags,
            "openmp_requested": openmp,
            "cython": Cython.__version__,
            "platform": platform.platform(),
            "python": sys.version.split()[0],
        }
        if sys.platform == "darwin":
            fields["macosx_deployment_target"] = os.environ.get("MACOSX_DEPLOYMENT_TARGET", "")
        text = "# Written by setup.py at build time; not in git.\n" + "".join(
            f"{key} = {value!r}\n" for key, value in fields.items())
        path = self._build_info_paths()[0]
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(text)


def extensions():
    from Cython.Build import cythonize

    directives = {
        "language_level": 3,
        "boundscheck": _flag("POOL_GRAD_BOUNDSCHECK"),
        "wraparound": False,
        "initializedcheck": False,
        "cdivision": True,
        "embedsignature": True,
        # a fused function's branches on its types (`if store_t is float: ...; return`)
        # leave code after them unreachable in some specializations, which is intended
        "warn.unreachable": False,
    }
    import numpy

    macros = [("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION"),
              # the oldest numpy the extension runs with, kept equal to pyproject's
              # dependency whichever numpy 2.x built it
              ("NPY_TARGET_VERSION", "NPY_1_23_API_VERSION")]
    if _flag("POOL_GRAD_NO_DISPATCH"):
        macros.append(("PG_NO_DISPATCH", "1"))
    units = ["pyx/pg_item.c", "pyx/pg_lanes.c", "pyx/_kernels.pyx"]
    ext = Extension("pool_grad._kernels", units, depends=sorted(glob.glob("pyx/pg_*.h")),
                    include_dirs=["pyx", numpy.get_include()], define_macros=macros)
    return cythonize([ext], compiler_directives=directives, quiet=True)


setup(ext_modules=extensions(), cmdclass={"build_ext": BuildExt})

"""Build of pool_grad's Cython kernels, with OpenMP on every platform that wheels target.

Environment switches (for developers):
  POOL_GRAD_NO_OPENMP=1     build without OpenMP (kernels run on one thread)
  POOL_GRAD_BOUNDSCHECK=1   compile the kernels with Cython bounds checking on
  POOL_GRAD_SANITIZE=address  add -fsanitize=address (gcc/clang); see README
"""
import os
import platform
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext


def _flag(name):
    return os.environ.get(name, "") not in ("", "0")


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
            cflags += ["-O3", "-ffp-contract=off", "-fno-math-errno"]
            if openmp:
                if sys.platform == "darwin":
                    cflags += ["-Xpreprocessor", "-fopenmp"]
                    lflags += ["-lomp"]
                    prefix = os.environ.get("LIBOMP_PREFIX", "")
                    if prefix:
                        cflags += ["-I" + os.path.join(prefix, "include")]
                        lflags += ["-L" + os.path.join(prefix, "lib")]
                else:
                    cflags += ["-fopenmp"]
                    lflags += ["-fopenmp"]
            san = os.environ.get("POOL_GRAD_SANITIZE", "")
            if san:
                cflags += ["-fsanitize=" + san, "-fno-omit-frame-pointer", "-g"]
                lflags += ["-fsanitize=" + san]
        for ext in self.extensions:
            ext.extra_compile_args = cflags + list(ext.extra_compile_args or [])
            ext.extra_link_args = lflags + list(ext.extra_link_args or [])
        compiler = " ".join(getattr(self.compiler, "compiler_so", None) or [ctype])
        self._write_build_info(compiler, cflags, lflags, openmp)
        super().build_extensions()

    def _write_build_info(self, compiler, cflags, lflags, openmp):
        text = (
            "# Written by setup.py at build time; not in git.\n"
            f"compiler = {compiler!r}\n"
            f"compiler_type = {self.compiler.compiler_type!r}\n"
            f"extra_compile_args = {cflags!r}\n"
            f"extra_link_args = {lflags!r}\n"
            f"openmp_requested = {openmp!r}\n"
            f"platform = {platform.platform()!r}\n"
            f"python = {sys.version.split()[0]!r}\n"
        )
        roots = ["."] if self.inplace else [self.build_lib]
        for root in roots:
            path = os.path.join(root, "pool_grad", "_build_info.py")
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
    }
    ext = Extension("pool_grad._kernels", ["pyx/_kernels.pyx"], include_dirs=["pyx"])
    return cythonize([ext], compiler_directives=directives, quiet=True)


setup(ext_modules=extensions(), cmdclass={"build_ext": BuildExt})

"""show_config(): what this build of pool_grad is, for bug reports."""
import platform
import sys

from . import _kernels, _threads


def _build_info():
    try:
        from . import _build_info as info
    except ImportError:
        return {}
    return {k: getattr(info, k) for k in ("compiler", "compiler_type", "extra_compile_args",
                                          "extra_link_args", "platform", "python")}


def config():
    """The build and runtime facts that show_config prints, as a dict."""
    import ml_dtypes
    import numpy

    from . import __version__
    return {
        "pool_grad": __version__,
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "numpy": numpy.__version__,
        "ml_dtypes": ml_dtypes.__version__,
        "openmp": _kernels.OPENMP_ENABLED,
        "openmp_version": _kernels.OPENMP_VERSION,
        "openmp_max_threads": _kernels.omp_max_threads(),
        "default_threads": _threads.get_num_threads(),
        "build": _build_info(),
    }


def show_config(file=None):
    """Print the version, OpenMP runtime and threads, compiler and flags of this build,
    and the numpy and ml_dtypes versions."""
    c = config()
    out = file or sys.stdout
    for key, value in c.items():
        if key == "build":
            for bk, bv in value.items():
                print(f"  build.{bk}: {bv}", file=out)
        else:
            print(f"{key}: {value}", file=out)

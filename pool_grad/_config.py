"""show_config(): what this build of pool_grad is, for bug reports."""
import ctypes
import os
import platform
import sys
from typing import IO, Any

from . import _kernels, _threads

# _OPENMP (the date of the specification the compiler implements) -> version
_OPENMP_SPECS = {200203: "2.0", 200505: "2.5", 200805: "3.0", 201107: "3.1", 201307: "4.0",
                 201511: "4.5", 201811: "5.0", 202011: "5.1", 202111: "5.2", 202411: "6.0"}

# How the OpenMP runtime DLLs that MSVC (/openmp, /openmp:llvm) or Intel builds link begin.
_WINDOWS_OPENMP_DLLS = ("vcomp", "libomp", "libiomp5")


def _build_info():
    try:
        from . import _build_info as info
    except ImportError:
        return {}
    return {k: v for k, v in vars(info).items() if not k.startswith("_")}


class _DlInfo(ctypes.Structure):
    _fields_ = [("dli_fname", ctypes.c_char_p), ("dli_fbase", ctypes.c_void_p),
                ("dli_sname", ctypes.c_char_p), ("dli_saddr", ctypes.c_void_p)]


def _posix_library_of(handle, symbol):
    """The file of the shared library that provides ``symbol`` to ``handle``: dlsym
    searches the library and then its dependencies, as the dynamic linker did when it
    bound the extension's call, and dladdr names the file the address lies in."""
    address = ctypes.cast(getattr(handle, symbol), ctypes.c_void_p).value
    try:
        dladdr = ctypes.CDLL(None).dladdr
    except AttributeError:  # glibc before 2.34 keeps it in libdl
        dladdr = ctypes.CDLL("libdl.so.2").dladdr
    dladdr.argtypes = [ctypes.c_void_p, ctypes.POINTER(_DlInfo)]
    info = _DlInfo()
    if not dladdr(address, ctypes.byref(info)) or not info.dli_fname:
        return None
    return os.path.realpath(os.fsdecode(info.dli_fname))


def _windows_loaded_dll():
    """The loaded OpenMP runtime DLL, preferring one bundled with pool_grad (delvewheel
    renames it, e.g. vcomp140-<hash>.dll in pool_grad.libs/)."""
    from ctypes import wintypes

    kernel32 = ctypes.WinDLL("kernel32", use_last_error=True)
    kernel32.GetCurrentProcess.restype = wintypes.HANDLE
    kernel32.K32EnumProcessModulesEx.argtypes = [
        wintypes.HANDLE, ctypes.POINTER(wintypes.HMODULE), wintypes.DWORD,
        ctypes.POINTER(wintypes.DWORD), wintypes.DWORD]
    kernel32.GetModuleFileNameW.argtypes = [wintypes.HMODULE, wintypes.LPWSTR, wintypes.DWORD]
    process = kernel32.GetCurrentProcess()
    size = 1024
    while True:
        modules = (wintypes.HMODULE * size)()
        needed = wintypes.DWORD()
        if not kernel32.K32EnumProcessModulesEx(process, modules, ctypes.sizeof(modules),
                                                ctypes.byref(needed), 3):  # LIST_MODULES_ALL
            return None
        count = needed.value // ctypes.sizeof(wintypes.HMODULE)
        if count <= size:
            break
        size = count
    name = ctypes.create_unicode_buffer(32768)
    found = []
    for module in modules[:count]:
        if module and kernel32.GetModuleFileNameW(module, name, len(name)):
            base = os.path.basename(name.value).lower()
            if base.startswith(_WINDOWS_OPENMP_DLLS):
                found.append(name.value)
    ours = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    bundled = [f for f in found if os.path.abspath(f).lower().startswith(ours.lower())]
    return (bundled or found or [None])[0]


def openmp_library():
    """Path of the OpenMP runtime library that pool_grad's kernels call (libgomp, libomp or
    vcomp), or None in a build without OpenMP or where it cannot be found out.  It is the
    library that threadpoolctl reports with user_api "openmp"."""
    if not _kernels.OPENMP_ENABLED:
        return None
    try:
        if sys.platform == "win32":
            return _windows_loaded_dll()
        # dlopen of an already loaded library returns the handle it was loaded with
        return _posix_library_of(ctypes.CDLL(_kernels.__file__), "omp_get_max_threads")
    except (OSError, AttributeError, ValueError):
        return None


def _openmp_spec(version):
    return _OPENMP_SPECS.get(version, str(version)) if version else "none"


def config() -> dict[str, Any]:
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
        "openmp_spec": _openmp_spec(_kernels.OPENMP_VERSION),
        "openmp_library": openmp_library(),
        "openmp_max_threads": _kernels.omp_max_threads(),
        "default_threads": _threads.get_num_threads(),
        "simd": _kernels.simd_in_use(),
        "f16c": _kernels.f16c_in_use(),
        "build": _build_info(),
    }


def show_config(file: IO[str] | None = None) -> None:
    """Print the version, OpenMP runtime and threads, compiler and flags of this build,
    and the numpy and ml_dtypes versions."""
    c = config()
    out = file or sys.stdout
    build = c.pop("build")
    for key, value in c.items():
        print(f"{key}: {value}", file=out)
    if not build:
        print("build: unknown (pool_grad/_build_info.py missing: not built by setup.py)",
              file=out)
    for key, value in build.items():
        if isinstance(value, list):
            value = " ".join(value)
        print(f"build.{key}: {value}", file=out)

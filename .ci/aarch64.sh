#!/usr/bin/env bash
# CI phase: pool_grad built for aarch64 on this x86_64 Debian 12 machine and tested under
# qemu-user (no arm64 hardware, no binfmt_misc, nothing of arm64 installed by apt):
#   tools    gcc-aarch64-linux-gnu and qemu-user
#   sysroot  Debian's arm64 python3.11 and the libraries it loads, unpacked with dpkg -x
#            from .debs that `apt-get download` fetches, plus the cross gcc's libgomp
#   wheels   aarch64 wheels of the dependencies and the test extra, from PyPI
#   compile  setup.py build_ext (so its flags and _build_info.py) in a copy of the tree,
#            with the arm64 Python's sysconfig: aarch64-linux-gnu-gcc, the arm64 headers
#   tests    the suite, or the subset below, against that build, under qemu
#   bits     .ci/bits.py's digests of the x86_64 build and of the aarch64 one: must match
#
# Usage: .ci/aarch64.sh [--full] [--cache DIR] [--x86-python PY]
#   --full            the whole test suite (default: the subset in $SUBSET)
#   --cache DIR       keep the sysroot, wheels and host venv in DIR and reuse them
#   --x86-python PY   the x86_64 Python whose installed pool_grad bits.py compares with
#                     (default: the CI's .venv; without one, an x86_64 build of the tree)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
export PIP_DISABLE_PIP_VERSION_CHECK=1 DEBIAN_FRONTEND=noninteractive

full=0 cache="" x86_python=""
while [ $# -gt 0 ]; do
    case $1 in
        --full) full=1 ;;
        --cache) cache=$(mkdir -p "$2" && cd "$2" && pwd); shift ;;
        --x86-python)   # absolute, without resolving a venv's python symlink
            case $2 in */*) x86_python=$(realpath -s "$2") ;; *) x86_python=$(command -v "$2") ;; esac
            shift ;;
        *) echo "usage: $0 [--full] [--cache DIR] [--x86-python PY]" >&2; exit 2 ;;
    esac
    shift
done
# the CI's .venv (phase readme-install) when its pool_grad imports, from outside the tree
if [ -z "$x86_python" ] && (cd / && "$root/.venv/bin/python" -c "import pool_grad") 2>/dev/null
then
    x86_python=$root/.venv/bin/python
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
keep=${cache:-$work}          # what a --cache run keeps: sysroot, wheels, host venv
sysroot=$keep/sysroot site=$keep/site-aarch64 hostvenv=$keep/host-venv
pyq=$sysroot/usr/bin/python3.11-qemu   # runs the arm64 python3.11 under qemu

# The tests of the default run (under qemu on 2 vCPUs about 5 minutes, the whole suite 10):
# the kernels' paths and bits, the operators' own tests, numerics, layouts, sizes,
# the forms, and the packaging tests (OpenMP runtime, threadpoolctl, Python subprocesses).
# --full adds AvgPool2d's own tests, concurrency, fuzzing, memory, interrupts, golden data,
# docstrings and the PyTorch/dask layers (whose tests skip: neither is installed).
SUBSET=(tests/test_kernel_paths.py tests/test_forms.py tests/test_family.py
        tests/test_adaptive_avg_pool3d_backward.py tests/test_adaptive_max_pool2d_backward.py
        tests/test_layout_bitwise.py tests/test_numerics.py tests/test_sizes.py
        tests/test_forward.py tests/test_packaging.py)

step_name="" step_start=0 total_start=$SECONDS
timings=()
step() {
    end_step
    step_name=$1 step_start=$SECONDS
    echo
    echo "=== [aarch64] $step_name"
}
end_step() {
    if [ -n "$step_name" ]; then
        local took=$((SECONDS - step_start))
        timings+=("$(printf '%-8s %4ds' "$step_name" "$took")")
        echo "=== [aarch64] $step_name: ${took}s"
        step_name=""
    fi
}
apt_get() { apt-get -q -o DPkg::Lock::Timeout=600 "$@"; }

# -- tools ---------------------------------------------------------------------------------
step tools
apt_get install -y gcc-aarch64-linux-gnu qemu-user >/dev/null \
    || { apt_get update >/dev/null && apt_get install -y gcc-aarch64-linux-gnu qemu-user >/dev/null; }
aarch64-linux-gnu-gcc --version | head -1
qemu-aarch64 --version | head -1

# -- sysroot: arm64 python3.11 without installing any arm64 package -------------------------
step sysroot
# the interpreter, its headers, and the libraries that it and its stdlib modules load
# (all but nis's libnsl: the tests do not use nis); libstdc++ for numpy and ml_dtypes
DEBS=(python3.11-minimal libpython3.11-minimal libpython3.11-stdlib libpython3.11
      libpython3.11-dev libc6 libgcc-s1 libstdc++6 zlib1g libexpat1 libssl3 libffi8
      libbz2-1.0 liblzma5 libcrypt1 libsqlite3-0 libuuid1 libncursesw6 libtinfo6
      libreadline8 libdb5.3)
if [ -f "$sysroot/.done" ] && [ "$(cat "$sysroot/.done")" = "${DEBS[*]}" ]; then
    echo "reusing $sysroot"
else
    rm -rf "$sysroot" "$keep/debs"
    mkdir -p "$sysroot" "$keep/debs"
    # arm64 package lists, for `apt-get download` only (never `apt-get install pkg:arm64`:
    # that replaces the amd64 python3 and removes the packages that depend on it)
    dpkg --print-foreign-architectures | grep -qx arm64 || dpkg --add-architecture arm64
    apt-cache show python3.11-minimal:arm64 >/dev/null 2>&1 || apt_get update >/dev/null
    download() {
        (cd "$keep/debs" && apt_get -o APT::Sandbox::User=root download "${DEBS[@]/%/:arm64}")
    }
    download >/dev/null || { apt_get update >/dev/null && download >/dev/null; }
    for deb in "$keep"/debs/*.deb; do dpkg -x "$deb" "$sysroot"; done
    # absolute links (sitecustomize.py -> /etc/...) would resolve on the host: into the root
    find "$sysroot" -type l -lname '/*' | while read -r link; do
        ln -sfn "$sysroot$(readlink "$link")" "$link"
    done
    # the OpenMP runtime the extension links with, from the cross toolchain.  A link to the
    # host's file, not a copy: qemu shows the guest its host path in /proc/self/maps (where
    # threadpoolctl looks) and the sysroot one elsewhere (dladdr, where pool_grad looks);
    # through the link both resolve to /usr/aarch64-linux-gnu/lib/libgomp.so.1.0.0
    ln -s /usr/aarch64-linux-gnu/lib/libgomp.so.1 "$sysroot/usr/lib/aarch64-linux-gnu/"
    # python3.11 through qemu, also as sys.executable for the tests' subprocesses (the
    # kernel cannot run an aarch64 binary itself).  -0 gives Python this path as argv[0]:
    # beside the sysroot's lib/python3.11 it makes sys.prefix the sysroot's /usr, so no
    # site directory of the host's own Python gets on the path.
    cat > "$pyq" <<EOF
#!/bin/sh
exec qemu-aarch64 -L "$sysroot" -0 "\$0" "$sysroot/usr/bin/python3.11" "\$@"
EOF
    chmod +x "$pyq"
    # every library the interpreter and its extension modules need is there
    missing=0
    for elf in "$sysroot/usr/bin/python3.11" "$sysroot"/usr/lib/python3.11/lib-dynload/*.so; do
        case $elf in */nis.*) continue ;; esac
        for lib in $(readelf -d "$elf" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'); do
            [ -e "$sysroot/lib/aarch64-linux-gnu/$lib" ] || [ -e "$sysroot/usr/lib/aarch64-linux-gnu/$lib" ] \
                || { echo "sysroot lacks $lib (needed by $(basename "$elf"))"; missing=1; }
        done
    done
    [ $missing = 0 ]
    echo "${DEBS[*]}" > "$sysroot/.done"
fi
"$pyq" -c "import sys, platform, ssl, ctypes, sqlite3, lzma, bz2, decimal, uuid
assert platform.machine() == 'aarch64' and sys.prefix == '$sysroot/usr', (platform.machine(), sys.prefix)
print(sys.executable, platform.machine(), sys.version.split()[0])"

# -- wheels: aarch64 dependencies, test deps, and a host venv for Cython ----------------------
step wheels
if ! "$hostvenv/bin/python" -c "import Cython, numpy, setuptools" 2>/dev/null; then
    rm -rf "$hostvenv"
    python3 -m venv "$hostvenv"
    "$hostvenv/bin/pip" install -q cython numpy "setuptools>=77"
fi
# pyproject's dependencies and test extra, less the optional peers whose tests skip without
# them (torch is in neither; dask, distributed and zarr are)
mapfile -t reqs < <("$hostvenv/bin/python" - "$root/pyproject.toml" <<'EOF'
import re, sys, tomllib
project = tomllib.load(open(sys.argv[1], "rb"))["project"]
for req in project["dependencies"] + project["optional-dependencies"]["test"]:
    if re.match(r"(dask|distributed|zarr|torch)\b", req) is None:
        print(req)
EOF
)
if [ -f "$site/.done" ] && [ "$(cat "$site/.done")" = "${reqs[*]}" ]; then
    echo "reusing $site"
else
    rm -rf "$site"
    # every manylinux tag the sysroot's glibc 2.36 runs (pip does not widen --platform)
    plats=(--platform manylinux2014_aarch64)
    for v in $(seq 17 36); do plats+=(--platform "manylinux_2_${v}_aarch64"); done
    "$hostvenv/bin/pip" install -q --target "$site" --only-binary=:all: --python-version 3.11 \
        --implementation cp --abi cp311 "${plats[@]}" "${reqs[@]}"
    echo "${reqs[*]}" > "$site/.done"
fi
numpy_inc=$site/numpy/_core/include   # numpy 2 (numpy/core/include in 1.x)
[ -d "$numpy_inc" ] || numpy_inc=$site/numpy/core/include
PYTHONPATH=$site "$pyq" -c "
import numpy, ml_dtypes, pytest, hypothesis
print('numpy', numpy.__version__, 'ml_dtypes', ml_dtypes.__version__, 'pytest', pytest.__version__,
      'hypothesis', hypothesis.__version__)"

# -- compile: setup.py with the arm64 Python's build configuration ---------------------------
step compile
# one snapshot of the tree (files git tracks or would), for this build and bits' x86_64 one
# (a file that goes while tar runs, from a phase beside this one, is left out with a warning)
git ls-files -z --cached --others --exclude-standard \
    | xargs -0 tar cf "$work/tree.tar" --ignore-failed-read
src=$work/src
mkdir "$src"
tar xf "$work/tree.tar" -C "$src"
mkdir "$work/sysconfig"
cp "$sysroot/usr/lib/python3.11/_sysconfigdata__linux_aarch64-linux-gnu.py" "$work/sysconfig/"
# The arm64 sysconfig gives CC/LDSHARED aarch64-linux-gnu-gcc and the aarch64 extension
# suffix; CPPFLAGS puts the arm64 Python headers (the pyconfig.h wrapper includes
# <aarch64-linux-gnu/python3.11/pyconfig.h>) and the aarch64 numpy's headers on the
# command line before the host's, which setuptools and setup.py still add after them.
(cd "$src" && env PYTHONPATH="$work/sysconfig" \
    _PYTHON_SYSCONFIGDATA_NAME=_sysconfigdata__linux_aarch64-linux-gnu \
    _PYTHON_HOST_PLATFORM=linux-aarch64 \
    CPPFLAGS="-I$sysroot/usr/include/python3.11 -I$sysroot/usr/include -I$numpy_inc" \
    "$hostvenv/bin/python" setup.py build_ext --inplace)
so=$src/pool_grad/_kernels.cpython-311-aarch64-linux-gnu.so
readelf -h "$so" | grep -q 'Machine:.*AArch64' || { echo "$so is not an aarch64 object"; exit 1; }
ls -l "$so"

# the tests and bits.py run from outside the tree: the copy holds an uncompiled pool_grad/
# only through PYTHONPATH, and an in-place build, which test_packaging is told of
mkdir "$work/run"
aarch64_env=(env PYTHONPATH="$src:$site" POOL_GRAD_TEST_SOURCE_TREE=1)

# -- tests -----------------------------------------------------------------------------------
step tests
if [ $full = 1 ]; then tests=("$src/tests"); else tests=("${SUBSET[@]/#/$src/}"); fi
(cd "$work/run" && "${aarch64_env[@]}" "$pyq" -m pytest -c "$src/pyproject.toml" \
    --rootdir "$src" -q -rfEs "${tests[@]}")

# -- bits: the same digests from the x86_64 and the aarch64 builds ---------------------------
step bits
x86_env=(env)
if [ -z "$x86_python" ]; then
    # no installed x86_64 pool_grad: build one in another copy, from the same generated C
    echo "no --x86-python and no $root/.venv: building the x86_64 extension"
    mkdir "$work/src-x86"
    tar xf "$work/tree.tar" -C "$work/src-x86"
    cp -p "$src/pyx/_kernels.c" "$work/src-x86/pyx/"
    (cd "$work/src-x86" && "$hostvenv/bin/pip" install -q ml_dtypes \
        && "$hostvenv/bin/python" setup.py -q build_ext --inplace)
    x86_python=$hostvenv/bin/python
    x86_env=(env PYTHONPATH="$work/src-x86")
fi
(cd "$work/run" && "${x86_env[@]}" "$x86_python" "$root/.ci/bits.py" "$work/bits-x86_64.txt")
(cd "$work/run" && "${aarch64_env[@]}" "$pyq" "$root/.ci/bits.py" "$work/bits-aarch64.txt")
if ! cmp -s "$work/bits-x86_64.txt" "$work/bits-aarch64.txt"; then
    echo "aarch64 and x86_64 results differ (x86_64 <, aarch64 >):"
    diff "$work/bits-x86_64.txt" "$work/bits-aarch64.txt" | head -60
    exit 1
fi
echo "aarch64 and x86_64: the same bits ($(wc -l < "$work/bits-x86_64.txt") arrays)"

end_step
echo
echo "=== [aarch64] wall time per step"
printf '  %s\n' "${timings[@]}"
echo "  total    $((SECONDS - total_start))s"

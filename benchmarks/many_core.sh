#!/usr/bin/env bash
# The many-core measurements of issue #4 (RESULTS.md's 16-core tables), in a few commands
# that each fit a 10-minute slot on a lent machine.  Run from the source checkout, with
# Python, numpy, Cython, setuptools (and ml_dtypes, pytest, torch where installed) already
# there; nothing is downloaded:
#
#   bash benchmarks/many_core.sh OUT check          build, test suite, determinism 1..nproc
#   bash benchmarks/many_core.sh OUT bench 1,2,4    the suite at these thread counts
#   bash benchmarks/many_core.sh OUT bench 8,16
#   bash benchmarks/many_core.sh OUT bench 16 --cases max     (more bench.py options)
#   bash benchmarks/many_core.sh OUT all 1,2,4,8,16 --budget 0.3
#                                  one build: determinism 1..nproc, then the sweep (no tests;
#                                  the build takes 1.5-3 minutes of a 10-minute slot)
#   bash benchmarks/many_core.sh OUT stores 1,16 --rounds 7   streamed against ordinary
#                                  stores and the form each op keeps (stream_ab.py)
#
# SKIP_INSTALL=1 runs a second command on the package the first installed.
# Every command builds and installs the checkout first (`pip install --no-build-isolation`,
# compiled afresh each time) and runs from outside the checkout, so the installed
# package is the one measured.  OUT receives the logs and, for `bench`, a JSON file per call
# (results_<nproc>core_t<threads>.json) for results_to_md.py; bench.py records the commit
# from POOL_GRAD_GIT, else from git where the checkout has its .git.  PYTHON picks the
# interpreter (default python3).
set -euo pipefail
if [ $# -lt 2 ]; then
    awk 'NR > 1 && !/^#/ { exit } NR > 1' "$0"
    exit 2
fi
out=$(mkdir -p "$1" && cd "$1" && pwd)
what=$2
threads=${3:-1,2,4,8,16}
shift $(( $# < 3 ? $# : 3 ))
py=${PYTHON:-python3}
src=$(cd "$(dirname "$0")/.." && pwd)
cores=$(nproc)
export POOL_GRAD_GIT=${POOL_GRAD_GIT:-$(git -C "$src" describe --always --dirty 2>/dev/null || true)}

if [ -z "${SKIP_INSTALL:-}" ]; then
    echo "== install ($(date -u +%FT%TZ), $cores CPUs)"
    (cd "$src" && "$py" -m pip install --no-build-isolation --no-deps -q . ) \
        >"$out/install.log" 2>&1 || { tail -40 "$out/install.log"; exit 1; }
fi
cd "$out"
"$py" -c "import pool_grad; print(pool_grad.__file__); pool_grad.show_config()"

determinism() {
    echo "== determinism, 1..$cores threads"
    "$py" "$src/benchmarks/check_threads.py" --max-threads "$cores" --calls 400 \
        2>&1 | tee "$out/check_threads.log" | tail -8
}

case $what in
check)
    echo "== tests"
    "$py" -m pytest -c "$src/pyproject.toml" --rootdir "$src" "$src/tests" -q \
        -p no:cacheprovider 2>&1 | tail -5
    determinism
    ;;
all)
    determinism
    ;&
bench)
    tag=${threads//,/-}
    echo "== bench.py --sweep $threads"
    "$py" "$src/benchmarks/bench.py" --sweep "$threads" "$@" \
        --json "$out/results_${cores}core_t$tag.json" 2>&1 | tee "$out/bench_t$tag.log" \
        | tail -60
    ;;
stores)
    tag=${threads//,/-}
    echo "== stream_ab.py --threads $threads"
    "$py" "$src/benchmarks/stream_ab.py" --threads "$threads" "$@" \
        --json "$out/stores_${cores}core_t$tag.json" 2>&1 | tee "$out/stores_t$tag.log"
    ;;
*)
    echo "unknown command '$what' (check, bench, all or stores)" >&2
    exit 2
    ;;
esac

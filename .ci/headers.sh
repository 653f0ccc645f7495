#!/usr/bin/env bash
# The C headers of pyx/ compiled for targets this machine cannot run, syntax only, warnings
# as errors: aarch64 Linux (gcc-aarch64-linux-gnu), macOS arm64 and x86_64 (clang-19).
# They include them in the order pyx/_kernels.pyx does.  macOS has no SDK here: the two
# libc headers they need (and omp.h's stdlib.h) are stubs, freestanding otherwise.
# Unused static functions are not errors here: the extension is what uses them.
set -euo pipefail
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# (with the bodies that pg_item.c and pg_lanes.c compile on their own)
{
    echo "#define PG_ITEM_BODIES 1"
    echo "#define PG_LANES_BODIES 1"
    for h in pg_half pg_cpu pg_stream pg_expand pg_item pg_tpose pg_plane pg_index pg_scatter \
             pg_omp; do
        echo "#include \"$h.h\""
    done
} > "$tmp/all.c"
mkdir "$tmp/stub"
printf '#include <stddef.h>\nvoid *memcpy(void *, const void *, size_t);
void *memmove(void *, const void *, size_t);\nvoid *memset(void *, int, size_t);
int memcmp(const void *, const void *, size_t);\n' > "$tmp/stub/string.h"
printf '#include <stddef.h>\nvoid *malloc(size_t);\nvoid free(void *);\n' > "$tmp/stub/stdlib.h"
flags=(-fsyntax-only -Wall -Wextra -Werror -Wno-unused-function -Wno-unused-parameter
       -fopenmp -Ipyx)
check() {
    echo "headers: $*"
    "$@" "${flags[@]}" "$tmp/all.c"
}
check aarch64-linux-gnu-gcc
check aarch64-linux-gnu-gcc -DPG_NO_DISPATCH
for target in arm64-apple-macos11 x86_64-apple-macos10.13; do
    check clang-19 -target "$target" -ffreestanding -isystem "$tmp/stub"
done
check gcc -DPG_NO_DISPATCH
echo "headers: all clean"

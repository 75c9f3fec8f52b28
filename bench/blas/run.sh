#!/usr/bin/env bash
# Builds bench/blas/blas_probe.c against an OpenBLAS and runs it (issue 16's
# BLAS comparison; see the file's comment). Usage: run.sh [iters]
# OPENBLAS_SO: the library to link (default: Debian's libopenblas0-pthread,
# unpacked with apt-get download + dpkg -x when it is not installed, so the
# system's BLAS alternative stays as it is).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
so=${OPENBLAS_SO:-/usr/lib/x86_64-linux-gnu/openblas-pthread/libopenblas.so.0}
if [ ! -e "$so" ]; then
  d=$(mktemp -d)
  (cd "$d" && apt-get download libopenblas0-pthread >/dev/null && dpkg -x ./*.deb root)
  so=$d/root/usr/lib/x86_64-linux-gnu/openblas-pthread/libopenblas.so.0
fi
inc=$(dirname "$(find /usr/include -name cblas.h | head -1)")
out=$(mktemp -d)/blas_probe
gcc -O3 -march=native -fopenmp -I"$inc" "$here/blas_probe.c" "$so" -lm -o "$out" \
  -Wl,-rpath,"$(dirname "$so")"
"$out" "${1:-3}"

#!/usr/bin/env bash
# The test command: set up, build warning-free, and run the whole suite, then
# again with AddressSanitizer and UndefinedBehaviorSanitizer.
# Usage: scripts/test.sh [--quick]   (--quick skips the sanitizer pass)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh

cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DFATTN_WERROR=ON >/dev/null
cmake --build build -j "$fattn_jobs"
ctest --test-dir build --output-on-failure -j "$fattn_jobs"

if [ "${1:-}" != "--quick" ]; then
  # The CUDA module is left out here: its kernels cannot run without a GPU, and
  # its host code runs under compute-sanitizer on the GPU machine instead.
  cmake -S . -B build-sanitize -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFATTN_SANITIZE=ON \
    -DFATTN_WERROR=ON -DFATTN_BUILD_EXAMPLES=OFF -DFATTN_CUDA=OFF >/dev/null
  cmake --build build-sanitize -j "$fattn_jobs"
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
    ctest --test-dir build-sanitize --output-on-failure -L sanitize
fi

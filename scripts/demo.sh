#!/usr/bin/env bash
# The main command: set up, build, and run the demo on every available backend.
# Usage: scripts/demo.sh [build-dir]   (default: build)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh
build=${1:-build}
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build" -j "$fattn_jobs" --target fattn_demo
"$build"/fattn_demo
# The short cross-vendor benchmark: every backend and device here, side by side.
cmake --build "$build" -j "$fattn_jobs" --target fattn_bench
bench/compare.sh --quick --build "$build" --out "$build/bench-quick"

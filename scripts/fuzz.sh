#!/usr/bin/env bash
# Builds the libFuzzer target (tests/fuzz/fuzz_forward: validation and the CPU
# forward path under ASan and UBSan) and runs it on the seed corpus for a
# bounded time. A crash, a sanitizer report or a violated check fails the
# run, and the input that did it is left in build-fuzz/artifacts/ (replay:
# build-fuzz/fuzz_forward FILE; the progress is in build-fuzz/fuzz.log).
# Usage: scripts/fuzz.sh [seconds]   default 60; a long run: scripts/fuzz.sh 3600
#        scripts/fuzz.sh --compiler  prints the clang it would use, or fails
# FATTN_FUZZ_CC picks the compiler; else the first clang whose libFuzzer links.
set -euo pipefail
cd "$(dirname "$0")/.."

# A clang that links -fsanitize=fuzzer: PoCL's clang-15 on Debian 12 does;
# a plain `clang` may lack the runtime (libclang-rt-*-dev).
find_compiler() {
  local probe cc
  probe=$(mktemp -d)
  for cc in ${FATTN_FUZZ_CC:-} clang clang-{20..14}; do
    command -v "$cc" >/dev/null || continue
    echo 'int LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n) { return d && n; }' |
      "$cc" -x c -fsanitize=fuzzer,address,undefined - -o "$probe/probe" 2>/dev/null || continue
    rm -rf "$probe"
    echo "$cc"
    return 0
  done
  rm -rf "$probe"
  return 1
}

if [ "${1:-}" = "--compiler" ]; then
  find_compiler
  exit
fi
seconds=${1:-60}
case "$seconds" in '' | *[!0-9]*) echo "usage: scripts/fuzz.sh [seconds] | --compiler" >&2; exit 2 ;; esac
cc=$(find_compiler) || {
  echo "fuzz: no clang with libFuzzer (Debian: clang libclang-rt-dev)" >&2
  exit 1
}

build="build-fuzz"
cmake -S . -B "$build" -DCMAKE_C_COMPILER="$cc" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFATTN_FUZZ=ON \
  -DFATTN_CUDA=OFF -DFATTN_OPENCL=OFF -DFATTN_BUILD_EXAMPLES=OFF -DFATTN_BUILD_BENCH=OFF >/dev/null
cmake --build "$build" --target fuzz_forward -j "$(nproc 2>/dev/null || echo 2)"

# New inputs go to a scratch corpus, so the committed seeds stay few. The
# progress goes to a log (tail -f it during a long run).
work="$build/corpus"
log="$build/fuzz.log"
mkdir -p "$work" "$build/artifacts"
echo "fuzz: fuzz_forward ($cc) for ${seconds}s on tests/fuzz/corpus; log in $log"
if FATTN_CPU_THREADS=1 "$build/fuzz_forward" "$work" tests/fuzz/corpus \
  -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=10 -max_len=512 \
  -artifact_prefix="$build/artifacts/" -print_final_stats=1 >"$log" 2>&1; then
  grep -E '^(Done|stat::(number_of_executed_units|average_exec_per_sec|peak_rss_mb))' "$log" | sed 's/^/fuzz: /'
else
  rc=$?
  tail -n 60 "$log" >&2
  echo "fuzz: FAILED (exit $rc); the input that did it is in $build/artifacts/, full log $log" >&2
  exit 1
fi

#!/usr/bin/env bash
# The test command: set up, build warning-free, and run the whole suite; then
# the Python package's; then again with AddressSanitizer and UndefinedBehaviorSanitizer; then the
# concurrency test under ThreadSanitizer; then the NEON kernel under qemu-user;
# then a minute of fuzzing.
# Usage: scripts/test.sh [--quick]   (--quick runs the suite only)
set -euo pipefail
cd "$(dirname "$0")/.."
# Without --quick, setup.sh also makes sure a clang with libFuzzer is there.
[ "${1:-}" = "--quick" ] || fattn_setup_fuzz=1
source scripts/setup.sh

pass() { echo "== test.sh: $* ($(date +%T))"; }

pass "release build and suite"
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DFATTN_WERROR=ON >/dev/null
cmake --build build -j "$fattn_jobs"
ctest --test-dir build --output-on-failure --no-tests=error -j "$fattn_jobs"
[ "${1:-}" = "--quick" ] && exit 0

pass "Python package (pip install ./python, pytest)"
scripts/python_check.sh

# The CUDA module is left out of the sanitizer builds: its kernels cannot run
# without a GPU, and its host code runs under compute-sanitizer on the GPU
# machine instead.
# use_sigaltstack=0: PoCL calls LLVM's RemoveFileOnSignal, which swaps in
# LLVM's own alternate signal stack on the calling thread; ASan then fails to
# unmap "its" stack when that thread exits (a first use of OpenCL off the main
# thread, as test_concurrency makes, aborts in AsanThread::Destroy).
# use_tls=0: LeakSanitizer's scan of dynamically allocated TLS reads a garbage
# entry on the main thread after PoCL's dlopened LLVM has used TLS (seen as
# "DTLS 8 at 0x5d-0x80000115f", then "Tracer caught signal 11"), in about one
# run in ten under load. fattn keeps no heap pointers in TLS (its only
# thread-local is the message buffer, an array), so no root is lost.
pass "ASan+UBSan build and suite"
cmake -S . -B build-sanitize -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFATTN_SANITIZE=ON \
  -DFATTN_WERROR=ON -DFATTN_BUILD_EXAMPLES=OFF -DFATTN_CUDA=OFF >/dev/null
cmake --build build-sanitize -j "$fattn_jobs"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:use_sigaltstack=0 LSAN_OPTIONS=use_tls=0 \
  UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --test-dir build-sanitize --output-on-failure --no-tests=error -j "$fattn_jobs" -L sanitize

# Only the tests labelled tsan are built and run: ThreadSanitizer slows the
# rest for nothing. No suppressions: PoCL is not instrumented, and nothing
# of ours has needed one.
pass "ThreadSanitizer build, concurrency and CPU pool tests"
tsan=-fsanitize=thread
cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFATTN_CUDA=OFF \
  -DFATTN_BUILD_EXAMPLES=OFF -DFATTN_BUILD_BENCH=OFF "-DCMAKE_C_FLAGS=$tsan" \
  "-DCMAKE_EXE_LINKER_FLAGS=$tsan" "-DCMAKE_SHARED_LINKER_FLAGS=$tsan" \
  "-DCMAKE_MODULE_LINKER_FLAGS=$tsan" >/dev/null
cmake --build build-tsan -j "$fattn_jobs" --target test_concurrency test_cpu_pool
TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" \
  ctest --test-dir build-tsan --output-on-failure --no-tests=error -L tsan

# The NEON kernel: an AArch64 cross build run under qemu-user (x86-64 hosts;
# CI, FATTN_TEST_REQUIRE containing "neon", fails without the tools).
pass "NEON kernel (AArch64 cross build under qemu-user)"
scripts/neon_check.sh

# CI (FATTN_TEST_REQUIRE containing "fuzz") fails without a fuzzer.
if scripts/fuzz.sh --compiler >/dev/null; then
  pass "fuzzing"
  scripts/fuzz.sh 60
elif [[ ",${FATTN_TEST_REQUIRE:-}," == *,fuzz,* ]]; then
  echo "fuzz: required (FATTN_TEST_REQUIRE=$FATTN_TEST_REQUIRE) but no clang with libFuzzer" >&2
  exit 1
else
  echo "fuzz: skipped (no clang with libFuzzer; Debian: clang libclang-rt-dev)"
fi
pass "done"

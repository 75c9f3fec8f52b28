#!/usr/bin/env bash
# One device call that checks a change for "no behaviour or speed change":
# builds this tree and a baseline tree (the benchmark's head dims only) side
# by side, then, most telling first (each step is time-limited and logged,
# so a call cut short still returns what ran): the API tests on CUDA and
# NVIDIA OpenCL, fattn_bench at seq 8192 on both builds in alternating
# rounds (drift between them shows), a compute-sanitizer memcheck over a few
# cases, and the conformance suite.
# FATTN_CUDA_HEAD_DIMS (default 64;128;256) picks this tree's buckets: fewer
# build faster, and smaller head dims run padded in the next bucket.
# Usage (GPU machine): source .devkit/env.sh && bash bench/before_after.sh OLD_SRC_DIR
# Results go to $OUT (or ./out); each step is time-limited so one call fits.
set -uo pipefail
cd "$(dirname "$0")/.."
old=${1:?usage: bench/before_after.sh OLD_SRC_DIR}
out=${OUT:-out}
mkdir -p "$out"
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; git log -1 --format=%h 2>/dev/null; } | tee "$out/machine.txt"
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA_ARCHS=90 \
  "-DFATTN_CUDA_HEAD_DIMS=${FATTN_CUDA_HEAD_DIMS:-64;128;256}" > "$out/build.log" 2>&1 &&
  cmake --build build -j 10 >> "$out/build.log" 2>&1 &
cmake -S "$old" -B build-old -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA_ARCHS=90 "-DFATTN_CUDA_HEAD_DIMS=64;128" \
  -DFATTN_BUILD_TESTS=OFF -DFATTN_BUILD_EXAMPLES=OFF > "$out/build_old.log" 2>&1 &&
  cmake --build build-old -j 6 --target fattn_bench >> "$out/build_old.log" 2>&1 &
wait
[ -x build/fattn_bench ] || { tail -30 "$out/build.log"; exit 1; }
[ -x build-old/fattn_bench ] || tail -10 "$out/build_old.log"
step() {   # name, time limit, command...: logs, exit status, and the verdict lines
  local name=$1 limit=$2
  shift 2
  timeout "$limit" "$@" > "$out/$name.log" 2>&1
  echo "$name exit status: $?" | tee -a "$out/$name.log"
  grep -E "^\[  (PASSED|FAILED|SKIPPED) |ERROR SUMMARY" "$out/$name.log" | head -6
}
export FATTN_TEST_REQUIRE=cuda,cuda-naive,opencl
step api_ext 60 env FATTN_TEST_REQUIRE=cuda,opencl ./build/test_api_ext
step special 60 env FATTN_TEST_BACKENDS=cuda,opencl ./build/test_special
bench() {   # binary, backend, csv, extra options: the seq 8192 rows, 60 s at most
  timeout 60 "$1" --backend "$2" --device 0 --iters 10 --seqs 8192 --dims 64,128 --no-naive --csv "$3" "${@:4}"
}
for round in 1 2; do
  for tree in old new; do
    bin=build/fattn_bench
    [ $tree = old ] && bin=build-old/fattn_bench
    [ -x $bin ] || continue
    bench $bin cuda "$out/${tree}_cuda_$round.csv" > /dev/null 2>&1
    [ $round = 1 ] && bench $bin opencl "$out/${tree}_opencl_$round.csv" --dtype f32 > /dev/null 2>&1
  done
done
step memcheck 120 env FATTN_TEST_BACKENDS=cuda "FATTN_TEST_CASES=seq 65 dim 80,causal seq 127 dim 256,no keys" \
  compute-sanitizer --tool memcheck --error-exitcode 9 ./build/test_conformance
step conformance 200 env FATTN_TEST_BACKENDS=cuda,opencl ./build/test_conformance
ls "$out"
exit 0

#!/usr/bin/env bash
# The GPU machine's call: build, then the phases named on the command line
# (default: all of them, which may exceed one 10-minute device call):
#   test   the whole test suite (OpenCL on NVIDIA's driver and on PoCL, the naive baseline)
#   tune   bench/tune_opencl.sh on the GPU
#   bench  fattn_bench on NVIDIA OpenCL, every dtype, with the naive baseline
#   peers  PyTorch SDPA (flash, cuDNN, efficient) on the same shapes, f32/f16/bf16
#   pocl   fattn_bench on PoCL (the host CPU), every shape and dtype, one timed call each
#   cuda   the CUDA conformance rows (every dtype, tiled and naive)
#   cudabench  fattn_bench on CUDA with the naive baseline, seq 2048/4096/8192
#   simt   bench/tune_cuda_simt.sh: the f32 CUDA-core kernel's tile candidates
#   compare  bench/compare.sh --long: every backend and device over the papers' sweep, the
#          long-sequence demonstration and the PyTorch peers, one table and the charts
#   sanitize  compute-sanitizer memcheck, racecheck, synccheck and initcheck over a few CUDA
#          conformance cases, test_special and the decode cases with 3 forced splits;
#          memcheck and racecheck also over test_ragged and test_combine
#   decode  fattn_bench --decode on CUDA and NVIDIA OpenCL, and the PyTorch peers on the same
#          shapes (bf16 and f16), in one call
#   decodebars  the issue's decode bars only, in one call (a few minutes in all): bf16 and f16,
#          GQA 32/8, d128: batch 1 at seq_kv 32k and 128k, batch 8 and 64 at 32k, a paged
#          cache (pages of 16 and 256) at batch 1 and 8, 32k; f32 at batch 1, 128k. fattn_bench
#          on CUDA and on NVIDIA OpenCL (device 0) with --hbm-gbps 4800 (the H200), then the
#          PyTorch peers on the same shapes; CSV / JSON lines, decodebars_table.md, and the
#          decode charts where matplotlib is installed (else: bench/compare.py later, on the files)
#   cpudecode  the CPU backend's decode against the host's STREAM copy (the issue's CPU bar
#          on the GPU host's CPU): GQA 32/8 d128, batch 1 at 32k and 128k, batch 8 at 32k,
#          every dtype, and the same batch 1 32k with pages of 16
#   robust  on CUDA: test_special (NaN/inf semantics), test_determinism (1000 bitwise repeats
#          per kernel), test_concurrency (CUDA and OpenCL), the conformance case with
#          batch * heads above 65,535 (grid folding)
# Results go to $OUT (or ./out).
# Usage (on the GPU machine): source .devkit/env.sh && bash bench/run_gpu.sh [phase...]
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-out}
phases=${*:-test tune bench peers pocl cuda cudabench sanitize robust}
mkdir -p "$out"
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } | tee "$out/machine.txt"
clinfo -l 2>&1 | tee -a "$out/machine.txt"

cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA_ARCHS=90 > "$out/build.log" 2>&1 &&
  cmake --build build -j 16 >> "$out/build.log" 2>&1 || { tail -30 "$out/build.log"; exit 1; }
has() { [[ " $phases " == *" $1 "* ]]; }

if has test; then
  export FATTN_TEST_REQUIRE=opencl,opencl-naive
  ctest --test-dir build --output-on-failure -E conformance 2>&1 | tee "$out/ctest.log" | tail -4
  ./build/test_conformance > "$out/conformance.log" 2>&1
  echo "test_conformance exit status: $?" | tee -a "$out/conformance.log"
  grep -E "device|SKIPPED|FAILED|PASSED|error" "$out/conformance.log"
fi
if has tune; then bench/tune_opencl.sh build 0 64 128 | tee "$out/tune.csv"; fi
# Device 0 is the GPU: GPUs are listed first.
if has bench; then
  ./build/fattn_bench --backend opencl --device 0 --iters 5 --seqs 4096,8192 --csv "$out/fattn_opencl_nvidia.csv"
fi
if has cuda; then
  FATTN_TEST_REQUIRE=cuda,cuda-naive FATTN_TEST_BACKENDS=cuda ./build/test_conformance > "$out/conformance_cuda.log" 2>&1
  echo "test_conformance (cuda) exit status: $?" | tee -a "$out/conformance_cuda.log"
  grep -E "device|SKIPPED|FAILED|PASSED|case" "$out/conformance_cuda.log" | grep -v "not in FATTN_TEST" | head -40
  FATTN_CUDA_SMALL_TILES=1 FATTN_TEST_REQUIRE=cuda FATTN_TEST_BACKENDS=cuda ./build/test_conformance \
    > "$out/conformance_cuda_small.log" 2>&1
  echo "test_conformance (cuda, FATTN_CUDA_SMALL_TILES=1) exit status: $?" | tee -a "$out/conformance_cuda_small.log"
fi
if has cudabench; then
  ./build/fattn_bench --backend cuda --device 0 --iters 10 --seqs 2048,4096,8192 --csv "$out/fattn_cuda.csv"
fi
if has simt; then bench/tune_cuda_simt.sh 90 | tee "$out/tune_simt.csv"; fi
if has compare; then bash bench/compare.sh --long --out "$out/compare" -- --iters 5 --budget 4; fi
# Runs ./build/$2 with the rest of the line as its environment and arguments,
# logging to $out/$1.log and printing the exit status; a test that was not
# built is reported, not fatal.
run_logged() {
  local name=$1 bin=./build/$2
  shift 2
  if [ ! -x "$bin" ]; then
    echo "$name: $bin was not built" | tee "$out/$name.log"
    return
  fi
  env "$@" "$bin" > "$out/$name.log" 2>&1
  echo "$name exit status: $?" | tee -a "$out/$name.log"
  grep -E "PASSED|FAILED" "$out/$name.log" | head -8
}
if has sanitize; then
  # A few shapes that reach every path: odd sizes, GQA, strides, causal, no keys, each dtype;
  # and test_special's NaN / inf rows. initcheck: the harness writes every byte it later
  # reads (guards included) before the call, so only reads of memory nobody wrote are
  # reported (unused allocations are not: --track-unused-memory, a flag, stays off).
  cases="seq 65 dim 80,causal seq 127 dim 256,kv strides differ causal,no keys,batch 3"
  for tool in memcheck racecheck synccheck initcheck; do
    opts=(--tool "$tool" --error-exitcode 9)
    for bin in test_conformance test_special; do
      log="$out/sanitize_${tool}_$bin.log"
      if [ ! -x "./build/$bin" ]; then
        echo "compute-sanitizer $tool $bin: ./build/$bin was not built" | tee "$log"
        continue
      fi
      FATTN_TEST_BACKENDS=cuda FATTN_TEST_CASES="$cases" compute-sanitizer "${opts[@]}" "./build/$bin" > "$log" 2>&1
      echo "compute-sanitizer $tool $bin exit status: $?" | tee -a "$log"
      grep -E "ERROR SUMMARY|FAILED" "$log" | head -5
    done
    # The split-KV decode and its combine (forced splits, odd lengths), and for
    # memcheck and racecheck the ragged suite (varlen, paged, bad tables) and
    # fattn_combine's own tests.
    log="$out/sanitize_${tool}_decode.log"
    env FATTN_TEST_BACKENDS=cuda FATTN_TEST_KV_SPLITS=3 "FATTN_TEST_CASES=decode 1/4099,decode 8/777,decode 4/40000" \
      compute-sanitizer "${opts[@]}" ./build/test_conformance > "$log" 2>&1
    echo "compute-sanitizer $tool decode exit status: $?" | tee -a "$log"
    [ "$tool" = memcheck ] || [ "$tool" = racecheck ] || continue
    for bin in test_ragged test_combine; do
      log="$out/sanitize_${tool}_$bin.log"
      FATTN_TEST_BACKENDS=cuda compute-sanitizer "${opts[@]}" "./build/$bin" > "$log" 2>&1
      echo "compute-sanitizer $tool $bin exit status: $?" | tee -a "$log"
      grep -E "ERROR SUMMARY|FAILED" "$log" | head -5
    done
  done
fi
if has robust; then
  run_logged special_cuda test_special FATTN_TEST_BACKENDS=cuda FATTN_TEST_REQUIRE=cuda
  run_logged determinism_cuda test_determinism FATTN_TEST_BACKENDS=cuda FATTN_TEST_REQUIRE=cuda FATTN_TEST_REPEATS=1000
  run_logged concurrency test_concurrency FATTN_TEST_BACKENDS=cuda,opencl FATTN_TEST_REQUIRE=cuda,opencl
  run_logged conformance_cuda_pairs test_conformance FATTN_TEST_BACKENDS=cuda FATTN_TEST_REQUIRE=cuda,cuda-naive \
    "FATTN_TEST_CASES=batch x heads"
fi
if has decode; then
  for be in cuda opencl; do
    timeout 240 ./build/fattn_bench --backend $be --device 0 --decode --iters 20 --budget 20 \
      --csv "$out/decode_$be.csv" --json "$out/decode_$be.jsonl" > "$out/decode_$be.txt" 2>&1
    echo "fattn_bench --decode ($be) exit status: $?"
  done
  for dt in bf16 f16; do
    python3 bench/peers_torch.py --decode --dtypes $dt 2>/dev/null
  done | tee "$out/peers_decode.jsonl" | wc -l
fi
if has decodebars; then
  # One list for fattn and the peers (peers_torch.py times a paged shape's contiguous twin once).
  g="hq=32,hkv=8,sq=1,d=128"
  bars=(b=1,$g,skv=32768 b=1,$g,skv=131072 b=8,$g,skv=32768 b=64,$g,skv=32768
        b=1,$g,skv=32768,page=16 b=1,$g,skv=32768,page=256 b=8,$g,skv=32768,page=16
        b=8,$g,skv=32768,page=256 b=1,$g,skv=131072,dtype=f32)
  shapes=()
  for s in "${bars[@]}"; do shapes+=(--shape "$s"); done
  for be in cuda opencl; do
    timeout 170 ./build/fattn_bench --backend $be --device 0 --no-sweep "${shapes[@]}" --dtype bf16,f16 \
      --no-naive --iters 20 --budget 20 --hbm-gbps 4800 \
      --csv "$out/decodebars_$be.csv" --json "$out/decodebars_$be.jsonl" > "$out/decodebars_$be.txt" 2>&1
    echo "fattn_bench decode bars ($be) exit status: $?"
    grep -E "STREAM|unsupported|error" "$out/decodebars_$be.txt" | head -5
  done
  timeout 150 python3 bench/peers_torch.py --decode --no-sweep "${shapes[@]}" --dtypes bf16,f16 --iters 20 \
    > "$out/decodebars_peers.jsonl" 2> "$out/decodebars_peers.err"
  echo "peers_torch.py decode bars exit status: $? ($(wc -l < "$out/decodebars_peers.jsonl") rows)"
  python3 bench/peer_table.py "$out/decodebars_cuda.csv" "$out/decodebars_opencl.csv" \
    "$out/decodebars_peers.jsonl" > "$out/decodebars_table.md"
  py=python3
  python3 -c "import matplotlib" 2>/dev/null || { [ -x /usr/bin/python3 ] && py=/usr/bin/python3; }
  "$py" bench/compare.py "$out/decodebars_cuda.jsonl" "$out/decodebars_opencl.jsonl" \
    "$out/decodebars_peers.jsonl" --out "$out/decodebars" > /dev/null
  echo "compare.py decode bars exit status: $? ($(ls "$out/decodebars" 2>/dev/null | tr '\n' ' '))"
fi
if has cpudecode; then
  g="hq=32,hkv=8,sq=1,d=128"
  timeout 300 ./build/fattn_bench --backend cpu --no-sweep --shape b=1,$g,skv=32768 --shape b=1,$g,skv=131072 \
    --shape b=8,$g,skv=32768 --shape b=1,$g,skv=32768,page=16 --no-naive --iters 5 --budget 30 \
    --csv "$out/cpudecode.csv" --json "$out/cpudecode.jsonl" > "$out/cpudecode.txt" 2>&1
  echo "fattn_bench cpu decode exit status: $?"
  grep -E "STREAM" "$out/cpudecode.txt" | head -3
fi
if has peers; then
  for dt in f32 f16 bf16; do
    for d in 64 128; do for s in 2048 4096 8192; do for c in "" --causal; do
      python3 .devkit/peer_sdpa.py --dtype $dt --batch $((16384 / s)) --heads $((2048 / d)) --seq $s --dim $d $c --json
    done; done; done
  done 2>/dev/null | tee "$out/peers.jsonl"
fi
if has pocl; then
  timeout 400 ./build/fattn_bench --backend opencl --device 1 --iters 1 --warmup 1 --seqs 4096,8192 --no-naive \
    --budget 1e9 --csv "$out/fattn_opencl_pocl.csv"
fi
exit 0

#!/usr/bin/env bash
# One call on the GPU machine: build, run the whole test suite (OpenCL on
# NVIDIA's driver and on PoCL), then fattn's benchmark and PyTorch's SDPA
# peers on the same shapes in the same run. Results go to $OUT (or ./out).
# Usage (on the GPU machine): source .devkit/env.sh && bash bench/run_gpu.sh
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-out}
mkdir -p "$out"
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; git rev-parse HEAD 2>/dev/null; } | tee "$out/machine.txt"
clinfo -l 2>&1 | tee -a "$out/machine.txt"

cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 > "$out/build.log" 2>&1 &&
  cmake --build build -j 16 >> "$out/build.log" 2>&1 || { tail -30 "$out/build.log"; exit 1; }
FATTN_TEST_REQUIRE=opencl ctest --test-dir build --output-on-failure 2>&1 | tee "$out/ctest.log" | tail -15
./build/test_conformance > "$out/conformance.log" 2>&1; grep -E "device|SKIPPED|FAILED|PASSED" "$out/conformance.log"

# fattn on NVIDIA OpenCL (device 0 is the GPU: GPUs are listed first).
./build/fattn_bench --backend opencl --device 0 --iters 5 | tee "$out/fattn_opencl_nvidia.csv"
# PoCL on the host CPU: one small shape, one iteration (it is slow).
timeout 300 ./build/fattn_bench --backend opencl --device 1 --dtype f32 --seq 4096 --dim 64 --iters 1 |
  tee "$out/fattn_opencl_pocl.csv"

# Peers on the same shapes.
for dt in f32 bf16; do
  for d in 64 128; do for s in 4096 8192; do for c in "" --causal; do
    python3 .devkit/peer_sdpa.py --dtype $dt --batch $((16384 / s)) --heads $((2048 / d)) --seq $s --dim $d $c --json
  done; done; done
done 2>/dev/null | tee "$out/peers.jsonl"

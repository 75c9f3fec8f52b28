#!/usr/bin/env bash
# Sweeps the CUDA-core (f32) kernel's tile shapes: one build per candidate
# (the shapes are template arguments, set by FATTN_SIMT_{BQ,BKV,TQ,TK}_<DPAD>),
# all built in parallel, then each timed alone: f32, seq 8192, causal and not.
# One CSV row per (shape, run).
# Usage (GPU machine): bench/tune_cuda_simt.sh [arch]   e.g. 90
# Round 1 (2026-11-21, H200) also tried d64 64x48/16x8, 64x64/16x8, 128x32/16x8,
# 64x64/8x8 and d128 40x32/8x16, 64x32/16x8, 64x64/16x8, 32x64/8x16.
set -uo pipefail
arch=${1:-90}
cands_64="128,64,16,8 128,48,16,8 128,64,32,8"
cands_128="64,32,8,16 64,64,8,16 128,32,16,8 64,48,8,16 128,32,16,16"
dirs=()
for d in 64 128; do
  var=cands_$d
  for c in ${!var}; do
    IFS=, read -r bq bkv tq tk <<< "$c"
    dir=build-simt-$d-${c//,/x}
    dirs+=("$d:$c:$dir")
    ( cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA_ARCHS=$arch -DFATTN_OPENCL=OFF \
        -DFATTN_BUILD_TESTS=OFF -DFATTN_BUILD_EXAMPLES=OFF -DFATTN_CUDA_HEAD_DIMS=$d \
        "-DCMAKE_CUDA_FLAGS=-DFATTN_SIMT_BQ_$d=$bq -DFATTN_SIMT_BKV_$d=$bkv -DFATTN_SIMT_TQ_$d=$tq -DFATTN_SIMT_TK_$d=$tk" &&
      cmake --build "$dir" -j 4 ) > "$dir.log" 2>&1 &
  done
done
wait
echo "dim,shape,backend,device,dtype,batch,heads,seq,dim,causal,ms,tflops,flash_bytes,naive_bytes,naive_ms,naive_tflops,note"
for entry in "${dirs[@]}"; do
  IFS=: read -r d c dir <<< "$entry"
  [ -x "$dir/fattn_bench" ] || { echo "$d,\"$c\",build failed"; continue; }
  for causal in "" --causal; do
    "$dir/fattn_bench" --backend cuda --dtype f32 --seq 8192 --dim $d --iters 5 $causal | tail -1 |
      sed "s|^|$d,\"$c\",|"
  done
done

#!/usr/bin/env bash
# Sweeps the CUDA-core (f32) kernel's tile shapes: one build per candidate
# (the shapes are template arguments, set by FATTN_SIMT_{BQ,BKV,TQ,TK,MINB}_<DPAD>),
# all built in parallel, then each timed alone: f32, seq 8192, causal and not.
# A candidate is BQ,BKV,TQ,TK,MINB (MINB: blocks per SM the registers are
# capped for). One CSV row per (shape, run).
# Usage (GPU machine): bench/tune_cuda_simt.sh [arch] [seq]   e.g. 90 8192
# CANDS_64 / CANDS_128 (space-separated candidates) replace the lists below.
# Earlier rounds (2026-11-21, H200): results/tune/cuda-simt-*.csv.
set -uo pipefail
arch=${1:-90}
seq=${2:-8192}
cands_64=${CANDS_64-"128,64,16,8,2 128,64,16,8,1 64,64,16,8,3 128,32,16,8,2"}
cands_128=${CANDS_128-"64,32,8,16,3 64,32,8,16,2 48,32,8,16,3 32,32,8,16,4 64,64,8,16,1"}
dirs=()
for d in 64 128; do
  var=cands_$d
  for c in ${!var}; do
    IFS=, read -r bq bkv tq tk minb <<< "$c"
    dir=build-simt-$d-${c//,/x}
    dirs+=("$d:$c:$dir")
    ( cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA_ARCHS=$arch -DFATTN_OPENCL=OFF \
        -DFATTN_BUILD_TESTS=OFF -DFATTN_BUILD_EXAMPLES=OFF -DFATTN_CUDA_HEAD_DIMS=$d \
        "-DCMAKE_CUDA_FLAGS=-DFATTN_SIMT_BQ_$d=$bq -DFATTN_SIMT_BKV_$d=$bkv -DFATTN_SIMT_TQ_$d=$tq -DFATTN_SIMT_TK_$d=$tk -DFATTN_SIMT_MINB_$d=$minb" &&
      cmake --build "$dir" -j 4 ) > "$dir.log" 2>&1 &
  done
done
wait
echo "dim,shape,$("${dirs[0]##*:}/fattn_bench" --csv-header)"
for entry in "${dirs[@]}"; do
  IFS=: read -r d c dir <<< "$entry"
  [ -x "$dir/fattn_bench" ] || { echo "$d,\"$c\",build failed"; continue; }
  for causal in "" c; do
    "$dir/fattn_bench" --backend cuda --dtype f32 --no-sweep --shape "$((16384 / seq))x$((2048 / d))x${seq}x$d$causal" \
      --iters 5 --no-naive --check-rows 0 --csv - 2>/dev/null | tail -1 |
      sed "s|^|$d,\"$c\",|"
  done
done

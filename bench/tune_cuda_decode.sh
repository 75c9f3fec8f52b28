#!/usr/bin/env bash
# Sweeps the split-KV decode variant's run-time knobs (FATTN_DECODE_TUNE,
# backends/cuda/cuda_decode.c lists the names) on the GQA decode shapes of
# issue 12: bf16, 32 query / 8 K/V heads, d128, seq_q 1, at b1 32k, b1 128k,
# b8 32k and b64 32k. One CSV row per (candidate, shape), led by the
# candidate ("default" = no override). Optionally rebuilds the CUDA module
# once per compile-time variant (kernels_cu/decode.cu's FATTN_DECODE_*
# defines) into its own build directory.
# Usage (GPU machine, after `source .devkit/env.sh` and a build in ./build):
#   bench/tune_cuda_decode.sh [iters]            (default 20; ~1-2 min)
#   CANDS="default min_keys=512 ..." bench/tune_cuda_decode.sh
#   BUILDS="-DFATTN_DECODE_MMA_RING=65536" bench/tune_cuda_decode.sh
#     (each BUILDS entry, ;-separated, is built in build-dec-N with those
#      CUDA flags and swept with the default candidate only)
set -uo pipefail
iters=${1:-20}
cands=${CANDS-"default min_keys=1024 min_keys=2048 max_splits=32 slack_pm=50 blocks_per_sm=3"}
shapes="b=1,hq=32,hkv=8,sq=1,d=128,skv=32768 b=1,hq=32,hkv=8,sq=1,d=128,skv=131072 b=8,hq=32,hkv=8,sq=1,d=128,skv=32768 b=64,hq=32,hkv=8,sq=1,d=128,skv=32768"
bench() {   # dir cand
  local dir=$1 cand=$2 tunev=
  [ "$cand" = default ] || tunev=$cand
  for sh in $shapes; do
    FATTN_DECODE_TUNE=$tunev timeout 60 "$dir/fattn_bench" --backend cuda --device 0 --no-sweep \
      --shape "$sh" --dtype bf16 --no-naive --check-rows 0 --iters "$iters" --csv - 2>/dev/null |
      tail -1 | sed "s|^|\"$dir\",\"$cand\",|"
  done
}
echo "build,candidate,$(./build/fattn_bench --csv-header)"
for c in $cands; do bench build "$c"; done
if [ -n "${BUILDS-}" ]; then
  IFS=';' read -ra flags <<< "$BUILDS"
  for i in "${!flags[@]}"; do
    dir=build-dec-$i
    if cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA_ARCHS=90 -DFATTN_OPENCL=OFF \
         -DFATTN_BUILD_TESTS=OFF -DFATTN_BUILD_EXAMPLES=OFF -DFATTN_CUDA_HEAD_DIMS=128 \
         "-DCMAKE_CUDA_FLAGS=${flags[$i]}" > "$dir.log" 2>&1 &&
       cmake --build "$dir" -j 16 >> "$dir.log" 2>&1; then
      echo "# $dir: ${flags[$i]}"
      bench "$dir" default
    else
      echo "\"$dir\",\"${flags[$i]}\",build failed (see $dir.log)"
    fi
  done
fi

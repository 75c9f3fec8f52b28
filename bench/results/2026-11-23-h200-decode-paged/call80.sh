#!/usr/bin/env bash
# Session 2026-11-23j, call 80: ncu (call 79) put the paged decode's extra time in the kernel
# (same DRAM bytes, +8% instructions, +13% active cycles) at one 4-warp block per SM: latency,
# not bandwidth. Does a deeper cp.async ring hide it (and help dense batch 1)? The tensor-core
# decode's ring (FATTN_DECODE_MMA_RING, 96 KiB: 3 stages at d128) at 128 KiB (4 stages) and
# 192 KiB (6 stages), each built apart (d128 only), against ./build, in alternating rounds.
set -u
source .devkit/env.sh
O=/tmp/o80; rm -rf $O; mkdir -p $O
fin() { tar czf $OUT/out.tgz -C $O .; }
trap fin EXIT
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u; } > $O/machine.txt
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA_ARCHS=90 > $O/build.log 2>&1 &&
  cmake --build build -j8 --target fattn_bench >> $O/build.log 2>&1 &
bd() { cmake -S . -B $1 -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA_ARCHS=90 -DFATTN_OPENCL=OFF \
         -DFATTN_BUILD_TESTS=OFF -DFATTN_BUILD_EXAMPLES=OFF -DFATTN_CUDA_HEAD_DIMS=128 \
         "-DCMAKE_CUDA_FLAGS=$2" > $O/$1.log 2>&1 && cmake --build $1 -j4 --target fattn_bench >> $O/$1.log 2>&1; }
bd build-r128 "-DFATTN_DECODE_MMA_RING=131072" &
bd build-r192 "-DFATTN_DECODE_MMA_RING=196608 -DFATTN_DECODE_STAGES=6" &
wait
for b in build build-r128 build-r192; do [ -x $b/fattn_bench ] || { echo "$b failed"; tail -20 $O/$b.log; }; done
g="hq=32,hkv=8,sq=1,d=128"
rows=(b=1,$g,skv=32768 b=1,$g,skv=32768,page=16 b=1,$g,skv=131072 b=1,$g,skv=131072,page=16
      b=1,$g,skv=8192 b=8,$g,skv=32768 b=8,$g,skv=32768,page=16 b=64,$g,skv=32768)
sh() { local a=(); for s in "$@"; do a+=(--shape "$s"); done; echo "${a[@]}"; }
for r in 1 2; do for b in build build-r128 build-r192; do
  timeout 100 ./$b/fattn_bench --backend cuda --device 0 --no-sweep --dtype bf16 --no-naive --iters 30 \
    --budget 20 --hbm-gbps 4800 $(sh "${rows[@]}") --json $O/${b}_$r.jsonl > $O/${b}_$r.txt 2>&1
  echo "${b}_$r rc $?" >> $O/summary.txt
done; done
cat $O/summary.txt

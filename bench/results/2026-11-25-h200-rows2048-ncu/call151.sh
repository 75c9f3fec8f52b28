#!/usr/bin/env bash
# Issue 15, session v, call 151: what cuDNN's kernels look like on the seq-2048 rows where fattn
# trails it (bf16 d64 causal, d256 non-causal) and one where it leads (d128 non-causal): kernel
# names (tile shapes), grids, blocks, registers, shared memory, and ncu's speed of light, tensor
# pipe and per-SM active cycles (min / avg / max: the tail) beside fattn's wgmma kernel.
set -u
source .devkit/env.sh
O=/tmp/o151; rm -rf $O; mkdir -p $O
trap 'tar czf $OUT/out.tgz -C /tmp o151' EXIT
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u; } > $O/machine.txt
D=bench/results/2026-11-25-h200-rows2048-ncu
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA_ARCHS=90 -DFATTN_BUILD_TESTS=OFF -DFATTN_BUILD_EXAMPLES=OFF > $O/build.log 2>&1 && (time cmake --build build -j 16 --target fattn_bench fattn_cuda) >> $O/build.log 2>&1 || tail -30 $O/build.log
M="--section SpeedOfLight --section LaunchStats --section Occupancy --metrics sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_elapsed,sm__cycles_active.min,sm__cycles_active.avg,sm__cycles_active.max,smsp__issue_active.avg.pct_of_peak_sustained_active,gpu__time_duration.sum"
for cfg in "8 32 2048 64 1" "8 8 2048 256 0" "8 16 2048 128 0"; do
  set -- $cfg; n=d$4_c$5
  timeout 60 python3 $D/cudnn_one.py $cfg > $O/names_$n.txt 2>&1
  timeout 120 ncu $M -k regex:'cudnn|sdpa|fprop|fmha|flash' --launch-skip 4 --launch-count 1 python3 $D/cudnn_one.py $cfg > $O/ncu_cudnn_$n.txt 2>&1; echo "ncu cudnn $n rc $?" >> $O/summary.txt
  c=""; [ $5 = 1 ] && c=c
  timeout 120 ncu $M -k regex:flash_wgmma --launch-skip 3 --launch-count 1 ./build/fattn_bench --backend cuda --device 0 --no-sweep --no-naive --warmup 3 --iters 1 --check-rows 0 --dtype bf16 --shape $1x$2x$3x$4$c > $O/ncu_fattn_$n.txt 2>&1; echo "ncu fattn $n rc $?" >> $O/summary.txt
done
cat $O/summary.txt; grep -h real $O/build.log
for f in $O/names_*; do echo "== $f"; grep kernel: $f; done
for f in $O/ncu_*; do echo "== $(basename $f)"; grep -E "^  [a-z_]|Duration|Grid Size|Block Size|Registers Per|Dynamic Shared|Compute \(SM\) Throughput|Memory Throughput|gmma|cycles_active|issue_active|Achieved Occupancy" $f | head -24; done

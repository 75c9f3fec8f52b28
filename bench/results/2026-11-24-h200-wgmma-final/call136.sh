#!/usr/bin/env bash
# Issue 15, session t, call 136: ncu stall reasons for the rows still below cuDNN (d64 causal 2048,
# d256 non-causal 2048), to guide the next session. One launch each, --clock-control none.
set -u
source .devkit/env.sh
O=/tmp/o136; rm -rf $O; mkdir -p $O
trap 'tar czf $OUT/out.tgz -C /tmp o136' EXIT
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u; } > $O/machine.txt
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA_ARCHS=90 -DFATTN_BUILD_TESTS=OFF -DFATTN_BUILD_EXAMPLES=OFF > $O/build.log 2>&1 && (time cmake --build build -j 16 --target fattn_bench fattn_cuda) >> $O/build.log 2>&1 || tail -30 $O/build.log
for s in 8x32x2048x64c 8x16x2048x256 8x32x2048x128c; do
  timeout 90 ncu --clock-control none --kernel-name regex:flash_wgmma --launch-skip 1 --launch-count 1 --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section InstructionStats --metrics regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio ./build/fattn_bench --backend cuda --device 0 --no-sweep --dtype bf16 --no-naive --iters 1 --warmup 1 --check-rows 0 --shape $s > $O/ncu_$s.log 2>&1; echo "ncu $s rc $?" >> $O/summary.txt
done
cat $O/summary.txt
for f in $O/ncu_*; do echo "== $f"; grep -E "Duration|Compute \(SM\) Throughput|Issued Warp|No Eligible|stalled" $f | sort -k3 -g -r | head -14; done

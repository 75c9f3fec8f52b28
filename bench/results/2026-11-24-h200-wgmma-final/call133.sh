#!/usr/bin/env bash
# Issue 15, session t, call 133: the state after ghosts and the longest-first order (a6c… see README):
# the table, f16 and bf16, d64/128/256, seq 512-16384, batch x seq 16384, causal and not,
# auto (wgmma where it takes the problem) against forced mma.sync and the PyTorch peers (cuDNN, FA2)
# in the same call; 1000-repeat bitwise determinism on forced wgmma; one ncu profile (d64 causal 2048).
set -u
source .devkit/env.sh
O=/tmp/o133; rm -rf $O; mkdir -p $O
trap 'tar czf $OUT/out.tgz -C /tmp o133' EXIT
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u; } > $O/machine.txt
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA_ARCHS=90 -DFATTN_BUILD_TESTS=ON -DFATTN_BUILD_EXAMPLES=OFF > $O/build.log 2>&1 && (time cmake --build build -j 16 --target fattn_bench fattn_cuda test_determinism) >> $O/build.log 2>&1 || tail -30 $O/build.log
st() { local n=$1 lim=$2; shift 2; timeout $lim "$@" > $O/$n.log 2>&1; echo "$n rc $? $(date -u +%T)" >> $O/summary.txt; }
sw() {   # $1 name, then env assignments
  local n=$1; shift
  env "$@" timeout 150 ./build/fattn_bench --backend cuda --device 0 --dtype bf16,f16 --seqs 512,1024,2048,4096,8192,16384 \
    --dims 64,128,256 --no-naive --iters 10 --check-rows 64 --csv $O/sweep_$n.csv > $O/sweep_$n.txt 2>&1
  echo "sweep $n rc $? $(date -u +%T)" >> $O/summary.txt
}
sw auto FATTN_CUDA_KERNEL=auto
sw mma FATTN_CUDA_KERNEL=mma
timeout 200 python3 bench/peers_torch.py --dtypes bf16,f16 --seqs 512,1024,2048,4096,8192,16384 --dims 64,128,256 --iters 10 \
  > $O/peers.jsonl 2> $O/peers.err; echo "peers rc $? $(date -u +%T)" >> $O/summary.txt
sw auto2 FATTN_CUDA_KERNEL=auto
st determinism 150 env FATTN_TEST_BACKENDS=cuda FATTN_CUDA_KERNEL=wgmma FATTN_TEST_REPEATS=1000 ./build/test_determinism
st ncu 90 ncu --clock-control none --kernel-name regex:flash_wgmma --launch-skip 1 --launch-count 1 --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats --section SchedulerStats ./build/fattn_bench --backend cuda --device 0 --no-sweep --dtype bf16 --no-naive --iters 1 --warmup 1 --check-rows 0 --shape 8x32x2048x64c
cat $O/summary.txt; grep -h "real" $O/build.log
grep -hE "runs passed|PASSED|FAILED|repeat" $O/determinism.log | head
grep -hE "Duration|Compute \(SM\) Throughput|Memory Throughput|Achieved Occupancy|Registers Per|No Eligible|Issued Warp" $O/ncu.log | head -12

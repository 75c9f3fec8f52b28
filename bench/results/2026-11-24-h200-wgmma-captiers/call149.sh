#!/usr/bin/env bash
# Issue 13, session v, call 149: which softcap tiers. Builds: A = all three tiers (default),
# B = no three-term tier (FATTN_WGMMA_CAP_TIER1=0), C = tiers in the bf16 fixed-offset instances
# only (FATTN_WGMMA_CAP_ROWMAX=0), P4 = four terms alone (FATTN_WGMMA_CAP_POLY=4). Three
# interleaved rounds of softcap 50 / 8 / 4 (bench data: two / three / three-and-four terms) and
# plain, on 32k d128 causal, 4k d128 and 8k d64 causal, bf16 and f16 (f16 printed first).
set -u
source .devkit/env.sh
O=/tmp/o149; rm -rf $O; mkdir -p $O
trap 'tar czf $OUT/out.tgz -C /tmp o149' EXIT
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u; git log --oneline | head -1; } > $O/machine.txt
B() { local n=$1 f=$2; cmake -S . -B $n -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA_ARCHS=90 "-DCMAKE_CUDA_FLAGS=$f" -DFATTN_BUILD_TESTS=OFF -DFATTN_BUILD_EXAMPLES=OFF > $O/$n.log 2>&1 && cmake --build $n -j 4 --target fattn_bench fattn_cuda >> $O/$n.log 2>&1 || tail -20 $O/$n.log; }
B bA "" & B bB -DFATTN_WGMMA_CAP_TIER1=0 & B bC -DFATTN_WGMMA_CAP_ROWMAX=0 & B bP4 -DFATTN_WGMMA_CAP_POLY=4 &
wait
R() { local n=$1 lim=$2; shift 2; timeout $lim "$@" > $O/$n.txt 2>&1; echo "$n rc $?" >> $O/summary.txt; }
W="--backend cuda --device 0 --no-sweep --no-naive --warmup 10 --iters 30 --check-rows 0 --dtype bf16,f16"
SH="--shape 1x32x32768x128c --shape 4x32x4096x128 --shape 2x32x8192x64c"
for r in 1 2 3; do
  R plain_$r 90 ./bA/fattn_bench $W $SH
  for c in 50 8 4; do for b in bA bB bC bP4; do
    R cap${c}_${b}_$r 90 ./$b/fattn_bench $W --variant softcap=$c $SH
  done; done
done
grep -v "rc 0" $O/summary.txt
for f in $O/plain_* $O/cap*; do echo "$(basename $f .txt): $(grep -hE '^\[' $f | grep -o '[0-9.]* ms' | tr '\n' ' ')"; done

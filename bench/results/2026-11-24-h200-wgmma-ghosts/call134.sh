#!/usr/bin/env bash
# Issue 15, session t, call 134 (an experiment, not landed as built): causal problems on the persistent
# grid in the longest-first order (FATTN_WGMMA_XP=persist) against a block per tile (the landed order),
# and the section size forced (lgN: 2^N pairs), one build, same call, bf16 causal, two runs each.
set -u
source .devkit/env.sh
O=/tmp/o134; rm -rf $O; mkdir -p $O
trap 'tar czf $OUT/out.tgz -C /tmp o134' EXIT
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u; } > $O/machine.txt
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA_ARCHS=90 -DFATTN_BUILD_TESTS=OFF -DFATTN_BUILD_EXAMPLES=OFF > $O/build.log 2>&1 && (time cmake --build build -j 16 --target fattn_bench fattn_cuda) >> $O/build.log 2>&1 || tail -30 $O/build.log
for r in 1 2; do for x in none persist persist,lg5 lg5 lg3 lg0; do
  FATTN_WGMMA_XP=$x timeout 60 ./build/fattn_bench --backend cuda --device 0 --dtype bf16 --seqs 2048,4096,8192,16384 --dims 64,128,256 --causal 1 --no-naive --iters 10 --check-rows 8 --csv $O/sweep_${x}_$r.csv > $O/sweep_${x}_$r.txt 2>&1; echo "sweep $x $r rc $?" >> $O/summary.txt
done; done
for x in none persist lg5; do
  FATTN_WGMMA_XP=$x timeout 60 ./build/fattn_bench --backend cuda --device 0 --no-sweep --dtype bf16 --no-naive --iters 10 --check-rows 4 --shape 1x32x32768x64c --shape 1x32x32768x128c --shape 8x32x1000x64c --shape 4x32x2048:4096x64c > $O/extra_${x}.txt 2>&1; echo "extra $x rc $?" >> $O/summary.txt
done
cat $O/summary.txt; grep -h real $O/build.log
for f in $O/sweep_*.txt $O/extra_*; do echo "$(basename $f): $(grep -hE '^\[' $f | grep -o '[0-9.]* ms' | tr '\n' ' ')"; done
grep -h "err\b\|FAIL\|error" $O/sweep_*.txt | head -5

#!/usr/bin/env bash
# Issue 15, session t, call 137: the cost of the consumers' turn ring at head dim 64 (call136: barrier
# stalls 1.09 per issue), the landed kernel against one built with FATTN_WGMMA_RING64=0 (no turns at
# d64), same call, bf16 d64, causal and not, two runs each, rows checked.
set -u
source .devkit/env.sh
O=/tmp/o137; rm -rf $O; mkdir -p $O
trap 'tar czf $OUT/out.tgz -C /tmp o137' EXIT
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u; } > $O/machine.txt
(cmake -S . -B build_r0 -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA_ARCHS=90 -DCMAKE_CUDA_FLAGS=-DFATTN_WGMMA_RING64=0 -DFATTN_BUILD_TESTS=OFF -DFATTN_BUILD_EXAMPLES=OFF > $O/build_r0.log 2>&1 && cmake --build build_r0 -j 8 --target fattn_bench fattn_cuda >> $O/build_r0.log 2>&1 || tail -20 $O/build_r0.log) &
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA_ARCHS=90 -DFATTN_BUILD_TESTS=OFF -DFATTN_BUILD_EXAMPLES=OFF > $O/build.log 2>&1 && (time cmake --build build -j 8 --target fattn_bench fattn_cuda) >> $O/build.log 2>&1 || tail -30 $O/build.log
wait
for r in 1 2; do for t in ring r0; do
  bin=./build/fattn_bench; [ $t = r0 ] && bin=./build_r0/fattn_bench
  timeout 60 $bin --backend cuda --device 0 --dtype bf16 --seqs 512,1024,2048,4096,8192,16384 --dims 64 --causal both --no-naive --iters 10 --check-rows 16 --csv $O/sweep_${t}_$r.csv > $O/sweep_${t}_$r.txt 2>&1; echo "sweep $t $r rc $?" >> $O/summary.txt
done; done
cat $O/summary.txt; grep -h real $O/build.log
for f in $O/sweep_*.txt; do echo "$(basename $f): $(grep -hE '^\[' $f | grep -o '[0-9.]* ms' | tr '\n' ' ')"; done
grep -h "err" $O/sweep_r0_1.txt | awk '{print $(NF-2), $(NF-1)}' | head -12

#!/usr/bin/env bash
# Issue 15, session w, call 157: the stale max's vote taken in softmax, before the wait on the
# P V in flight (FATTN_WGMMA_VOTE_EARLY=1), and with it the stale max at head dim 128
# (FATTN_WGMMA_STALE128=1; call154 had it 1-2% slower with the vote in rescale_pack).
# Builds: build (as landed: vote in rescale_pack, off at 128), build_E (early vote), build_E128
# (early vote, on at 128). test_variants forced to wgmma on build_E128; three interleaved rounds.
set -u
source .devkit/env.sh
O=/tmp/o157; rm -rf $O; mkdir -p $O
trap 'tar czf $OUT/out.tgz -C /tmp o157' EXIT
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u; } > $O/machine.txt
R() { local n=$1 lim=$2; shift 2; timeout $lim "$@" > $O/$n.txt 2>&1; echo "$n rc $?" >> $O/summary.txt; }
B() { local n=$1 f=$2 t=$3 j=$4; shift 4; cmake -S . -B $n -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA_ARCHS=90 "-DCMAKE_CUDA_FLAGS=$f" -DFATTN_BUILD_TESTS=$t -DFATTN_BUILD_EXAMPLES=OFF > $O/$n.log 2>&1 && (time cmake --build $n -j $j --target fattn_bench fattn_cuda "$@") >> $O/$n.log 2>&1 || tail -20 $O/$n.log; }
B build "" OFF 5 & B build_E -DFATTN_WGMMA_VOTE_EARLY=1 OFF 5 & B build_E128 "-DFATTN_WGMMA_VOTE_EARLY=1 -DFATTN_WGMMA_STALE128=1" ON 6 test_variants
wait
grep -h real $O/build*.log
R var_wgmma 150 env FATTN_TEST_BACKENDS=cuda FATTN_CUDA_KERNEL=wgmma ./build_E128/test_variants
W="--backend cuda --device 0 --no-naive --warmup 10 --iters 30 --check-rows 0"
for r in 1 2 3; do
  for b in build build_E build_E128; do
    R table_${b}_$r 150 ./$b/fattn_bench $W --dtype bf16,f16 --seqs 2048,4096,8192,16384 --dims 64,128,256 --causal both --csv $O/table_${b}_$r.csv
  done
done
grep -v "rc 0" $O/summary.txt
grep -hE "runs passed|FAILED" $O/var_wgmma.txt | sort | uniq -c
true

#!/usr/bin/env bash
# Issue 15, session w, call 156: (a) was the plain d128 kernel slower today than at 688d69c
# (call145: bf16 d128 non-causal 2048 0.440 ms; calls 154-155: 0.448-0.450 without the stale
# rescale at d128)? build_688 is 688d69c's tree (git archive, carried as build_src688). (b) the
# stale rescale now off with ALiBi (call155: ALiBi d256 32k causal 3% slower with it). Tests on the
# new build (test_variants forced to wgmma, memcheck of the stale cases); three interleaved rounds
# of the rows at 2048-16384; ALiBi and plain rows at d64/d256 32k.
set -u
source .devkit/env.sh
O=/tmp/o156; rm -rf $O; mkdir -p $O
trap 'tar czf $OUT/out.tgz -C /tmp o156' EXIT
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u; } > $O/machine.txt
R() { local n=$1 lim=$2; shift 2; timeout $lim "$@" > $O/$n.txt 2>&1; echo "$n rc $?" >> $O/summary.txt; }
B() { local s=$1 n=$2 t=$3 j=$4; shift 4; cmake -S $s -B $n -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA_ARCHS=90 -DFATTN_BUILD_TESTS=$t -DFATTN_BUILD_EXAMPLES=OFF > $O/$n.log 2>&1 && (time cmake --build $n -j $j --target fattn_bench fattn_cuda "$@") >> $O/$n.log 2>&1 || tail -20 $O/$n.log; }
B build_src688 build_688 OFF 6 & B . build ON 10 test_variants
wait
grep -h real $O/build*.log
T="FATTN_TEST_BACKENDS=cuda"
R var_wgmma 150 env $T FATTN_CUDA_KERNEL=wgmma ./build/test_variants
R memcheck 100 env $T FATTN_CUDA_KERNEL=wgmma FATTN_TEST_CASES='stale threshold' compute-sanitizer --tool memcheck --error-exitcode 9 ./build/test_variants
W="--backend cuda --device 0 --no-naive --warmup 10 --iters 30 --check-rows 0"
V="--backend cuda --device 0 --no-naive --no-sweep --warmup 10 --iters 30 --check-rows 0 --dtype bf16 --shape 1x32x32768x64c --shape 1x8x32768x256c --shape 1x16x32768x128c"
for r in 1 2 3; do
  for b in build build_688; do
    R table_${b}_$r 150 ./$b/fattn_bench $W --dtype bf16,f16 --seqs 2048,4096,8192,16384 --dims 64,128,256 --causal both --csv $O/table_${b}_$r.csv
  done
done
for r in 1 2; do for b in build build_688; do
  R var_${b}_$r 120 bash -c "./$b/fattn_bench $V; ./$b/fattn_bench $V --variant alibi"
done; done
grep -v "rc 0" $O/summary.txt
grep -hE "runs passed|FAILED|ERROR SUMMARY" $O/var_wgmma.txt $O/memcheck.txt | sort | uniq -c
for f in $O/var_*_[12].txt; do echo "$(basename $f .txt): $(grep -hE '^\[' $f | grep -o '[0-9.]* ms' | tr '\n' ' ')"; done
true

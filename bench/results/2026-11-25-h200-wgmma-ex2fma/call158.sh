#!/usr/bin/env bash
# Session w, call 158: the stale max on the mma.sync kernel (kernels_cu/flash_mma.cuh: the path off
# Hopper, and on it for what wgmma declines), forced with FATTN_CUDA_KERNEL=mma. Builds: build
# (FATTN_MMA_STALE 8, the default) and build_m0 (0: every tile rescales, as before). Tests forced
# to mma on build (variants, conformance, memcheck of the stale cases); three interleaved rounds
# of seq 1024/4096/16384, d64/128/256, causal and not, bf16 and f16; variant rows at 8k d128/d256.
set -u
source .devkit/env.sh
O=/tmp/o158; rm -rf $O; mkdir -p $O
trap 'tar czf $OUT/out.tgz -C /tmp o158' EXIT
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u; } > $O/machine.txt
R() { local n=$1 lim=$2; shift 2; timeout $lim "$@" > $O/$n.txt 2>&1; echo "$n rc $?" >> $O/summary.txt; }
B() { local n=$1 f=$2 t=$3 j=$4; shift 4; cmake -S . -B $n -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA_ARCHS=90 "-DCMAKE_CUDA_FLAGS=$f" -DFATTN_BUILD_TESTS=$t -DFATTN_BUILD_EXAMPLES=OFF > $O/$n.log 2>&1 && (time cmake --build $n -j $j --target fattn_bench fattn_cuda "$@") >> $O/$n.log 2>&1 || tail -20 $O/$n.log; }
B build_m0 -DFATTN_MMA_STALE=0 OFF 6 & B build "" ON 10 test_variants test_conformance
wait
grep -h real $O/build*.log
T="FATTN_TEST_BACKENDS=cuda FATTN_CUDA_KERNEL=mma"
R var_mma 150 env $T ./build/test_variants
R conf_mma 120 env $T FATTN_TEST_DTYPES=f16,bf16 ./build/test_conformance
R memcheck 100 env $T FATTN_TEST_CASES='stale threshold' compute-sanitizer --tool memcheck --error-exitcode 9 ./build/test_variants
W="--backend cuda --device 0 --no-naive --warmup 10 --iters 30 --check-rows 0"
V="--backend cuda --device 0 --no-naive --no-sweep --warmup 10 --iters 30 --check-rows 0 --shape 2x16x8192x128c --shape 2x8x8192x256"
for r in 1 2 3; do
  for b in build build_m0; do
    R table_${b}_$r 150 env FATTN_CUDA_KERNEL=mma ./$b/fattn_bench $W --dtype bf16,f16 --seqs 1024,4096,16384 --dims 64,128,256 --causal both --csv $O/table_${b}_$r.csv
  done
done
for r in 1 2; do for b in build build_m0; do
  R var_${b}_$r 120 bash -c "export FATTN_CUDA_KERNEL=mma; ./$b/fattn_bench $V --dtype bf16; ./$b/fattn_bench $V --dtype f16 --variant softcap=50; ./$b/fattn_bench $V --dtype bf16 --variant alibi; ./$b/fattn_bench $V --dtype bf16 --variant window=2048,sinks"
done; done
grep -v "rc 0" $O/summary.txt
grep -hE "runs passed|FAILED|ERROR SUMMARY" $O/var_mma.txt $O/conf_mma.txt $O/memcheck.txt | sort | uniq -c
for f in $O/var_*_[12].txt; do echo "$(basename $f .txt): $(grep -hE '^\[' $f | grep -o '[0-9.]* ms' | tr '\n' ' ')"; done
true

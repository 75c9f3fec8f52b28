#!/usr/bin/env bash
# Issue 13/15: the variants (window, softcap, ALiBi, sinks) on the wgmma kernel.
# New = this checkout; old = .old (db72ccd: variants on mma.sync, plain on wgmma).
# Tests (auto, forced wgmma, forced mma), sanitizers on the wgmma variant cases,
# then variant costs new/old at 8k/32k bf16 d128 causal, FlexAttention in the same call.
set -u
source .devkit/env.sh
O=/tmp/o105; rm -rf $O; mkdir -p $O
trap 'tar czf $OUT/out.tgz -C /tmp o105' EXIT
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $O/machine.txt; date -u >> $O/machine.txt
git log -1 --format=%H >> $O/machine.txt 2>/dev/null
(cd .old && cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA_ARCHS=90 -DFATTN_BUILD_TESTS=OFF -DFATTN_BUILD_EXAMPLES=OFF > $O/build_old.log 2>&1 && cmake --build build -j 6 --target fattn_bench fattn_cuda >> $O/build_old.log 2>&1 || tail -20 $O/build_old.log) &
(timeout 420 python3 bench/peer_variants.py > $O/peer_variants.txt 2>&1; echo "peers rc $?" >> $O/summary.txt) &
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA_ARCHS=90 -DFATTN_BUILD_EXAMPLES=OFF > $O/build.log 2>&1 && (time cmake --build build -j 10 --target fattn_bench fattn_cuda fattn_opencl test_variants test_conformance test_determinism) >> $O/build.log 2>&1 || tail -20 $O/build.log
wait
st() { local n=$1 lim=$2; shift 2; timeout $lim "$@" > $O/$n.log 2>&1; echo "$n rc $?" >> $O/summary.txt; }
st var_auto 200 env FATTN_TEST_BACKENDS=cuda FATTN_TEST_REQUIRE=cuda,cuda-variants ./build/test_variants
st var_wgmma 200 env FATTN_CUDA_KERNEL=wgmma FATTN_TEST_BACKENDS=cuda ./build/test_variants
st var_mma 200 env FATTN_CUDA_KERNEL=mma FATTN_TEST_BACKENDS=cuda FATTN_TEST_REQUIRE=cuda,cuda-variants ./build/test_variants
st conf_auto 200 env FATTN_TEST_BACKENDS=cuda FATTN_TEST_REQUIRE=cuda ./build/test_conformance
st conf_wgmma 200 env FATTN_CUDA_KERNEL=wgmma FATTN_TEST_BACKENDS=cuda FATTN_TEST_DTYPES=f16,bf16 FATTN_TEST_DECLINED_OK=1 ./build/test_conformance
C="wgmma,window,softcap,alibi,sinks"
st memcheck 300 env FATTN_CUDA_KERNEL=wgmma FATTN_TEST_BACKENDS=cuda FATTN_TEST_CASES=$C compute-sanitizer --tool memcheck --error-exitcode 9 ./build/test_variants
st racecheck 200 env FATTN_CUDA_KERNEL=wgmma FATTN_TEST_BACKENDS=cuda "FATTN_TEST_CASES=wgmma tiles, window 300,wgmma persistent, alibi" compute-sanitizer --tool racecheck --error-exitcode 9 ./build/test_variants
st synccheck 200 env FATTN_CUDA_KERNEL=wgmma FATTN_TEST_BACKENDS=cuda "FATTN_TEST_CASES=wgmma tiles, window 100,wgmma persistent, softcap" compute-sanitizer --tool synccheck --error-exitcode 9 ./build/test_variants
sh="--shape 1x32x8192x128c --shape 1x32x32768x128c"
VS="none window=4096 softcap=50 softcap=30 alibi sinks window=4096,softcap=50 bias"
for t in new old; do
  bin=./build/fattn_bench; [ $t = old ] && bin=.old/build/fattn_bench
  for v in $VS; do
    timeout 90 $bin --backend cuda --device 0 --no-sweep $sh --dtype bf16 --no-naive --iters 10 --check-rows 0 $([ $v = none ] || echo --variant $v) > "$O/b16_${t}_${v}.txt" 2>&1; echo "b16 $t $v rc $?" >> $O/summary.txt
  done
  for v in none softcap=50 alibi; do
    timeout 90 $bin --backend cuda --device 0 --no-sweep $sh --dtype f16 --no-naive --iters 10 --check-rows 0 $([ $v = none ] || echo --variant $v) > "$O/f16_${t}_${v}.txt" 2>&1; echo "f16 $t $v rc $?" >> $O/summary.txt
  done
done
# Plain prefill new/old over head dims (the mask and jmask changes touch the plain instances).
P="--seqs 2048,8192 --dims 64,128,256 --causal both --dtype bf16 --no-naive --iters 10 --check-rows 2"
for t in new old new; do
  bin=./build/fattn_bench; [ $t = old ] && bin=.old/build/fattn_bench
  timeout 150 $bin --backend cuda --device 0 $P > $O/pre_${t}.txt 2>&1; echo "pre $t rc $?" >> $O/summary.txt
done
grep -v "rc 0" $O/summary.txt; grep -h "real" $O/build.log
grep -hE "runs passed|SKIPPED \] cuda" $O/var_*.log | head -20; grep -h "ERROR SUMMARY\|RACECHECK SUMMARY" $O/memcheck.log $O/racecheck.log $O/synccheck.log
for f in $O/b16_* $O/f16_*; do echo "$(basename $f): $(grep -hE '^\[' $f | awk '{print $(NF-5)}' | tr '\n' ' ')"; done
cat $O/peer_variants.txt | tail -20

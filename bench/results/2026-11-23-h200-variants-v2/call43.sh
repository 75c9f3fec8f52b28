#!/usr/bin/env bash
# Session 2026-11-23c, call 10: experiment: the bias family at d128 with 48-key tiles (working tree) vs 32 (HEAD 'base'): test_variants + memcheck on the 48 build; bias costs new/base.
set -u
source .devkit/env.sh
R=$OUT; O=/tmp/o43; rm -rf $O; mkdir -p $O
fin() { tar czf $R/out.tgz -C $O .; }
trap fin EXIT
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $O/machine.txt; date -u >> $O/machine.txt
(cd .base && cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA_ARCHS=90 -DFATTN_BUILD_TESTS=OFF -DFATTN_BUILD_EXAMPLES=OFF > $O/build_base.log 2>&1 && cmake --build build -j 6 --target fattn_bench fattn_cuda >> $O/build_base.log 2>&1 || tail -20 $O/build_base.log) &
cd .wtc
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA_ARCHS=90 > $O/build.log 2>&1 && (time cmake --build build -j 8 --target fattn_bench fattn_cuda fattn_opencl test_variants test_conformance test_ragged test_special test_cuda_graph test_append test_determinism) >> $O/build.log 2>&1 || tail -20 $O/build.log
wait
st() { local n=$1 lim=$2; shift 2; timeout $lim "$@" > $O/$n.log 2>&1; echo "$n rc $?" >> $O/summary.txt; }
st cu_variants 200 env FATTN_TEST_BACKENDS=cuda FATTN_TEST_REQUIRE=cuda,cuda-variants ./build/test_variants
st cu_conf 150 env FATTN_TEST_BACKENDS=cuda FATTN_TEST_REQUIRE=cuda ./build/test_conformance
st cu_ragged 90 env FATTN_TEST_BACKENDS=cuda FATTN_TEST_REQUIRE=cuda ./build/test_ragged
st cu_special 60 env FATTN_TEST_BACKENDS=cuda ./build/test_special
st cu_graph 60 env FATTN_TEST_BACKENDS=cuda FATTN_TEST_REQUIRE=cuda ./build/test_cuda_graph
st cu_append 60 env FATTN_TEST_BACKENDS=cuda FATTN_TEST_REQUIRE=cuda ./build/test_append
st cu_determinism 60 env FATTN_TEST_BACKENDS=cuda ./build/test_determinism
sh="--shape 1x32x8192x128c --shape 1x32x32768x128c"
for t in new base; do
  bin=./build/fattn_bench; [ $t = base ] && bin=../.base/build/fattn_bench
  for v in none bias; do
    timeout 90 $bin --backend cuda --device 0 --no-sweep $sh --dtype bf16 --no-naive --iters 10 --check-rows 0 $([ $v = none ] || echo --variant $v) > $O/var_${t}_${v}.txt 2>&1; echo "var $t $v rc $?" >> $O/summary.txt
    timeout 90 $bin --backend cuda --device 0 --no-sweep $sh --dtype f16 --no-naive --iters 10 --check-rows 0 $([ $v = none ] || echo --variant $v) > $O/var16_${t}_${v}.txt 2>&1; echo "var16 $t $v rc $?" >> $O/summary.txt
  done
done
st cu_variants_memcheck 240 env FATTN_TEST_BACKENDS=cuda FATTN_TEST_REQUIRE=cuda compute-sanitizer --tool memcheck --error-exitcode 9 ./build/test_variants
cat $O/summary.txt | grep -v "rc 0"; grep -h "real" $O/build.log; grep -hE "runs passed" $O/cu_variants.log $O/cu_variants_memcheck.log; grep -h "ERROR SUMMARY" $O/cu_variants_memcheck.log
for v in none bias; do for t in new base; do echo "$t $v: bf16 $(grep -hE '^\[' $O/var_${t}_${v}.txt | awk '{print $(NF-5)}' | tr '\n' ' ') f16 $(grep -hE '^\[' $O/var16_${t}_${v}.txt | awk '{print $(NF-5)}' | tr '\n' ' ')"; done; done

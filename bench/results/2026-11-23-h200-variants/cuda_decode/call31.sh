#!/usr/bin/env bash
# Session 2026-11-23b, call 13: CUDA decode with window and sinks (641d0b2): test_variants, decode suites, memcheck; plain decode before (HEAD~1) / after; window decode cost.
set -u
source .devkit/env.sh
R=$OUT; O=/tmp/o31; rm -rf $O; mkdir -p $O
fin() { tar czf $R/out.tgz -C $O .; }
trap fin EXIT
(cd .base && cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA_ARCHS=90 -DFATTN_OPENCL=OFF -DFATTN_BUILD_TESTS=OFF -DFATTN_BUILD_EXAMPLES=OFF > $O/build_base.log 2>&1 && cmake --build build -j 6 --target fattn_bench fattn_cuda >> $O/build_base.log 2>&1 || tail -20 $O/build_base.log) &
cd .wtc
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA_ARCHS=90 -DFATTN_OPENCL=OFF > $O/build.log 2>&1 && cmake --build build -j 10 --target fattn_bench fattn_cuda test_variants test_conformance test_ragged test_cuda_graph test_special test_combine test_append >> $O/build.log 2>&1 || tail -20 $O/build.log
wait
st() { local n=$1 lim=$2; shift 2; timeout $lim "$@" > $O/$n.log 2>&1; echo "$n rc $?" >> $O/summary.txt; }
export FATTN_TEST_BACKENDS=cuda
st cu_variants 150 env FATTN_TEST_REQUIRE=cuda ./build/test_variants
st cu_dec 90 env FATTN_TEST_REQUIRE=cuda FATTN_TEST_CASES=decode ./build/test_conformance
st cu_dec_s3 90 env FATTN_TEST_REQUIRE=cuda FATTN_TEST_CASES=decode FATTN_TEST_KV_SPLITS=3 ./build/test_conformance
st cu_ragged 90 env FATTN_TEST_REQUIRE=cuda ./build/test_ragged
st cu_graph 60 env FATTN_TEST_REQUIRE=cuda ./build/test_cuda_graph
st cu_special 60 ./build/test_special
st cu_combine 60 env FATTN_TEST_REQUIRE=cuda ./build/test_combine
st cu_append 60 env FATTN_TEST_REQUIRE=cuda ./build/test_append
st cu_variants_memcheck 150 env FATTN_TEST_REQUIRE=cuda compute-sanitizer --tool memcheck --error-exitcode 9 ./build/test_variants
st cu_variants_race 120 env FATTN_TEST_REQUIRE=cuda compute-sanitizer --tool racecheck --error-exitcode 9 ./build/test_variants
g="hq=32,hkv=8,sq=1,d=128"
S="--shape b=1,$g,skv=32768 --shape b=1,$g,skv=131072 --shape b=8,$g,skv=32768 --shape b=64,$g,skv=32768 --shape b=1,$g,skv=32768,page=16 --shape b=1,$g,skv=131072,dtype=f32"
for r in 1 2; do for t in new base; do
  bin=./build/fattn_bench; [ $t = base ] && bin=../.base/build/fattn_bench
  timeout 60 $bin --backend cuda --device 0 --no-sweep $S --dtype bf16 --no-naive --iters 20 --check-rows 1 --no-stream --hbm-gbps 4800 > $O/dec_${t}_$r.txt 2>&1; echo "dec $t $r rc $?" >> $O/summary.txt
done; done
W="--shape b=1,$g,skv=32768 --shape b=8,$g,skv=32768 --shape b=1,$g,skv=4097 --shape b=8,$g,skv=4097"
timeout 60 ./build/fattn_bench --backend cuda --device 0 --no-sweep $W --dtype bf16 --no-naive --iters 20 --check-rows 0 --no-stream --hbm-gbps 4800 > $O/win_none.txt 2>&1; echo "win none rc $?" >> $O/summary.txt
for v in window=4096 sinks window=4096,sinks; do
timeout 60 ./build/fattn_bench --backend cuda --device 0 --no-sweep $W --dtype bf16 --no-naive --iters 20 --check-rows 0 --no-stream --hbm-gbps 4800 --variant $v > $O/win_$v.txt 2>&1; echo "win $v rc $?" >> $O/summary.txt
done
cat $O/summary.txt; grep -h "runs passed\|ERROR SUMMARY\|RACECHECK SUMMARY" $O/cu_variants*.log

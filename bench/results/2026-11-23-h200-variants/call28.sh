#!/usr/bin/env bash
# Session 2026-11-23b, call 10: issue 13 variants on the H200: test_variants (CUDA, NVIDIA OpenCL), suites, memcheck; variant costs vs FlexAttention; prefill before/after.
set -u
source .devkit/env.sh
R=$OUT; O=/tmp/o28; rm -rf $O; mkdir -p $O
fin() { tar czf $R/out.tgz -C $O .; }
trap fin EXIT
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $O/machine.txt; date -u >> $O/machine.txt
(cd .base && cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA_ARCHS=90 -DFATTN_BUILD_TESTS=OFF -DFATTN_BUILD_EXAMPLES=OFF > $O/build_base.log 2>&1 && cmake --build build -j 6 --target fattn_bench fattn_cuda fattn_opencl >> $O/build_base.log 2>&1 || tail -20 $O/build_base.log) &
cd .wtc
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA_ARCHS=90 > $O/build.log 2>&1 && (time cmake --build build -j 10 --target fattn_bench fattn_cuda fattn_opencl test_variants test_conformance test_ragged test_append test_cuda_graph test_special) >> $O/build.log 2>&1 || tail -20 $O/build.log
wait
st() { local n=$1 lim=$2; shift 2; timeout $lim "$@" > $O/$n.log 2>&1; echo "$n rc $?" >> $O/summary.txt; }
st cu_variants 150 env FATTN_TEST_BACKENDS=cuda FATTN_TEST_REQUIRE=cuda ./build/test_variants
st cl_variants 200 env FATTN_OPENCL_DEVICE=NVIDIA FATTN_TEST_BACKENDS=opencl FATTN_TEST_REQUIRE=opencl,opencl-variants ./build/test_variants
st cu_graph 60 env FATTN_TEST_BACKENDS=cuda FATTN_TEST_REQUIRE=cuda ./build/test_cuda_graph
st cu_append 60 env FATTN_TEST_BACKENDS=cuda FATTN_TEST_REQUIRE=cuda ./build/test_append
st cu_ragged 90 env FATTN_TEST_BACKENDS=cuda FATTN_TEST_REQUIRE=cuda ./build/test_ragged
st cu_special 60 env FATTN_TEST_BACKENDS=cuda ./build/test_special
st cu_conf 150 env FATTN_TEST_BACKENDS=cuda FATTN_TEST_REQUIRE=cuda ./build/test_conformance
st cl_dec 90 env FATTN_OPENCL_DEVICE=NVIDIA FATTN_TEST_BACKENDS=opencl FATTN_TEST_CASES=decode FATTN_TEST_KV_SPLITS=3 ./build/test_conformance
# Variant costs: B1 H32 d128 bf16 causal 32k (and 8k), fattn CUDA; then OpenCL at 8k; FlexAttention peers.
sh32="--shape 1x32x32768x128c"; sh8="--shape 1x32x8192x128c"
for v in none window=4096 softcap=50 alibi sinks bias; do
  va=""; [ $v = none ] || va="--variant $v"
  timeout 60 ./build/fattn_bench --backend cuda --device 0 --no-sweep $sh8 $sh32 --dtype bf16 --no-naive --iters 10 --check-rows 0 $va > $O/var_cuda_$v.txt 2>&1
  echo "var cuda $v rc $?" >> $O/summary.txt
  env FATTN_OPENCL_DEVICE=NVIDIA timeout 60 ./build/fattn_bench --backend opencl --device 0 --no-sweep $sh8 --dtype bf16 --no-naive --iters 5 --check-rows 0 $va > $O/var_ocl_$v.txt 2>&1
  echo "var ocl $v rc $?" >> $O/summary.txt
done
timeout 150 python3 ../.devkit/peer_flex.py > $O/peer_flex.txt 2>&1; echo "flex rc $?" >> $O/summary.txt
# Prefill before/after (plain path), CUDA and NVIDIA OpenCL.
P="--seqs 2048,4096,8192,16384 --dims 128 --causal both --dtype bf16,f32 --no-naive --iters 10 --check-rows 2"
for r in 1 2; do for t in new base; do
  bin=./build/fattn_bench; [ $t = base ] && bin=../.base/build/fattn_bench
  timeout 100 $bin --backend cuda --device 0 $P > $O/pre_cuda_${t}_$r.txt 2>&1; echo "pre cuda $t $r rc $?" >> $O/summary.txt
done; done
g="hq=32,hkv=8,sq=1,d=128"
S="--shape b=1,$g,skv=32768 --shape b=8,$g,skv=32768 --shape b=1,$g,skv=32768,page=16 --shape b=8,$g,skv=32768,page=256 --shape b=1,$g,skv=131072,dtype=f32"
for t in new base; do
  bin=./build/fattn_bench; [ $t = base ] && bin=../.base/build/fattn_bench
  for be in opencl cuda; do
    env FATTN_OPENCL_DEVICE=NVIDIA timeout 60 $bin --backend $be --device 0 --no-sweep $S --dtype bf16 --no-naive --iters 20 --check-rows 1 --no-stream --hbm-gbps 4800 > $O/dec_${be}_${t}.txt 2>&1; echo "dec $be $t rc $?" >> $O/summary.txt
  done
done
st cu_variants_memcheck 150 env FATTN_TEST_BACKENDS=cuda FATTN_TEST_REQUIRE=cuda compute-sanitizer --tool memcheck --error-exitcode 9 ./build/test_variants
cat $O/summary.txt; grep -h "real" $O/build.log; grep -hE "FAILED|PASSED|SKIPPED \]" $O/cu_variants.log $O/cl_variants.log | sort | uniq -c | head -20

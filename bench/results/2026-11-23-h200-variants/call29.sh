#!/usr/bin/env bash
# Session 2026-11-23b, call 11: main after the variants merge (CPU + OpenCL kernels): NVIDIA OpenCL test_variants and suites, CUDA suites (declines, graph append), OpenCL plain decode/prefill before (b956ecc) / after, OpenCL variant costs.
set -u
source .devkit/env.sh
R=$OUT; O=/tmp/o29; rm -rf $O; mkdir -p $O
fin() { tar czf $R/out.tgz -C $O .; }
trap fin EXIT
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $O/machine.txt; date -u >> $O/machine.txt
(cd .base && cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA=OFF -DFATTN_BUILD_TESTS=OFF > $O/build_base.log 2>&1 && cmake --build build -j 6 --target fattn_bench >> $O/build_base.log 2>&1 || tail -20 $O/build_base.log) &
cd .wtc
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA_ARCHS=90 > $O/build.log 2>&1 && cmake --build build -j 10 --target fattn_bench fattn_cuda fattn_opencl test_variants test_conformance test_ragged test_append test_cuda_graph test_special >> $O/build.log 2>&1 || tail -20 $O/build.log
wait
st() { local n=$1 lim=$2; shift 2; timeout $lim "$@" > $O/$n.log 2>&1; echo "$n rc $?" >> $O/summary.txt; }
export FATTN_OPENCL_DEVICE=NVIDIA
st cl_variants 200 env FATTN_TEST_BACKENDS=opencl FATTN_TEST_REQUIRE=opencl,opencl-variants ./build/test_variants
st cl_ragged 120 env FATTN_TEST_LONG=1 FATTN_TEST_BACKENDS=opencl FATTN_TEST_REQUIRE=opencl ./build/test_ragged
st cl_append 60 env FATTN_TEST_BACKENDS=opencl FATTN_TEST_REQUIRE=opencl ./build/test_append
st cl_special 60 env FATTN_TEST_BACKENDS=opencl ./build/test_special
st cl_conf 200 env FATTN_TEST_BACKENDS=opencl FATTN_TEST_REQUIRE=opencl ./build/test_conformance
st cl_dec_s3 90 env FATTN_TEST_BACKENDS=opencl FATTN_TEST_CASES=decode FATTN_TEST_KV_SPLITS=3 ./build/test_conformance
unset FATTN_OPENCL_DEVICE
st cu_graph 60 env FATTN_TEST_BACKENDS=cuda FATTN_TEST_REQUIRE=cuda ./build/test_cuda_graph
st cu_variants 60 env FATTN_TEST_BACKENDS=cuda FATTN_TEST_REQUIRE=cuda ./build/test_variants
st cu_ragged 90 env FATTN_TEST_BACKENDS=cuda FATTN_TEST_REQUIRE=cuda ./build/test_ragged
export FATTN_OPENCL_DEVICE=NVIDIA
g="hq=32,hkv=8,sq=1,d=128"
S="--shape b=1,$g,skv=32768 --shape b=1,$g,skv=131072 --shape b=8,$g,skv=32768 --shape b=64,$g,skv=32768 --shape b=1,$g,skv=32768,page=16 --shape b=8,$g,skv=32768,page=256 --shape b=1,$g,skv=131072,dtype=f32"
for r in 1 2; do for t in new base; do
  bin=./build/fattn_bench; [ $t = base ] && bin=../.base/build/fattn_bench
  timeout 90 $bin --backend opencl --device 0 --no-sweep $S --dtype bf16 --no-naive --iters 20 --check-rows 1 --no-stream --hbm-gbps 4800 > $O/dec_${t}_$r.txt 2>&1; echo "dec $t $r rc $?" >> $O/summary.txt
  timeout 90 $bin --backend opencl --device 0 --seqs 2048,8192 --dims 128 --causal both --dtype bf16,f32 --no-naive --iters 5 --check-rows 2 > $O/pre_${t}_$r.txt 2>&1; echo "pre $t $r rc $?" >> $O/summary.txt
done; done
for v in none window=1024 softcap=50 alibi sinks bias; do
  va=""; [ $v = none ] || va="--variant $v"
  timeout 60 ./build/fattn_bench --backend opencl --device 0 --no-sweep --shape 1x32x8192x128c --dtype bf16 --no-naive --iters 5 --check-rows 0 $va > $O/var_ocl_$v.txt 2>&1
  echo "var ocl $v rc $?" >> $O/summary.txt
done
cat $O/summary.txt; grep -h "runs passed" $O/cl_variants.log $O/cu_variants.log

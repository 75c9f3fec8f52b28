#!/usr/bin/env bash
# Session 2026-11-23b, call 4: append (CUDA, NVIDIA OpenCL) tests; OpenCL paged lookups + decode_waves: before (a79ac57) / after, CUDA alongside.
set -u
source .devkit/env.sh
R=$OUT; O=/tmp/o22; rm -rf $O; mkdir -p $O
fin() { tar czf $R/out.tgz -C $O .; }
trap fin EXIT
(cd .base && cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA=OFF -DFATTN_BUILD_TESTS=OFF > $O/build_base.log 2>&1 && cmake --build build -j 8 --target fattn_bench >> $O/build_base.log 2>&1 || tail -20 $O/build_base.log) &
cd .wtc
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA_ARCHS=90 > $O/build.log 2>&1 && cmake --build build -j 12 --target fattn_bench fattn_cuda fattn_opencl test_append test_ragged test_cuda_graph test_conformance test_special >> $O/build.log 2>&1 || tail -20 $O/build.log
wait
st() { local n=$1 lim=$2; shift 2; timeout $lim "$@" > $O/$n.log 2>&1; echo "$n rc $?" >> $O/summary.txt; }
st cu_append 120 env FATTN_TEST_BACKENDS=cuda FATTN_TEST_REQUIRE=cuda ./build/test_append
st cu_ragged 120 env FATTN_TEST_BACKENDS=cuda FATTN_TEST_REQUIRE=cuda ./build/test_ragged
st cu_graph 60 env FATTN_TEST_BACKENDS=cuda FATTN_TEST_REQUIRE=cuda ./build/test_cuda_graph
st cu_append_memcheck 200 env FATTN_TEST_BACKENDS=cuda FATTN_TEST_REQUIRE=cuda compute-sanitizer --tool memcheck --error-exitcode 9 ./build/test_append
export FATTN_OPENCL_DEVICE=NVIDIA
st cl_append 120 env FATTN_TEST_BACKENDS=opencl FATTN_TEST_REQUIRE=opencl ./build/test_append
st cl_ragged 150 env FATTN_TEST_LONG=1 FATTN_TEST_BACKENDS=opencl FATTN_TEST_REQUIRE=opencl ./build/test_ragged
st cl_special 90 env FATTN_TEST_BACKENDS=opencl ./build/test_special
st cl_dec_s3 90 env FATTN_TEST_BACKENDS=opencl FATTN_TEST_CASES=decode FATTN_TEST_KV_SPLITS=3 ./build/test_conformance
g="hq=32,hkv=8,sq=1,d=128"
S="--shape b=1,$g,skv=32768 --shape b=1,$g,skv=131072 --shape b=8,$g,skv=32768 --shape b=64,$g,skv=32768 --shape b=1,$g,skv=32768,page=16 --shape b=1,$g,skv=32768,page=256 --shape b=8,$g,skv=32768,page=16 --shape b=8,$g,skv=32768,page=256 --shape b=1,$g,skv=131072,dtype=f32"
for r in 1 2; do for t in new base; do
  bin=./build/fattn_bench; [ $t = base ] && bin=../.base/build/fattn_bench
  timeout 120 $bin --backend opencl --device 0 --no-sweep $S --dtype bf16,f16 --no-naive --iters 20 --check-rows 2 --no-stream --hbm-gbps 4800 > $O/ocl_${t}_$r.txt 2>&1
  echo "ocl $t $r rc $?" >> $O/summary.txt
done; done
unset FATTN_OPENCL_DEVICE
timeout 90 ./build/fattn_bench --backend cuda --device 0 --no-sweep $S --dtype bf16,f16 --no-naive --iters 20 --check-rows 1 --no-stream --hbm-gbps 4800 > $O/cuda.txt 2>&1
echo "cuda rc $?" >> $O/summary.txt
cat $O/summary.txt

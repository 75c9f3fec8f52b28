#!/usr/bin/env bash
# Session 2026-11-23b, call 7: paged row offsets in local memory (long2) vs page/slot (int2, a191fbe); registers; NVIDIA OpenCL tests.
set -u
source .devkit/env.sh
R=$OUT; O=/tmp/o25; rm -rf $O; mkdir -p $O
fin() { tar czf $R/out.tgz -C $O .; }
trap fin EXIT
python3 .devkit/buildlog.py .wtc/backends/opencl/ocl_program.c > $O/patch.log 2>&1
(cd .base && cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA=OFF -DFATTN_BUILD_TESTS=OFF > $O/build_base.log 2>&1 && cmake --build build -j 8 --target fattn_bench >> $O/build_base.log 2>&1 || tail -20 $O/build_base.log) &
cd .wtc
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA=OFF > $O/build.log 2>&1 && cmake --build build -j 8 --target fattn_bench test_ragged test_special test_append test_conformance >> $O/build.log 2>&1 || tail -20 $O/build.log
wait
st() { local n=$1 lim=$2; shift 2; timeout $lim "$@" > $O/$n.log 2>&1; echo "$n rc $?" >> $O/summary.txt; }
export FATTN_OPENCL_DEVICE=NVIDIA
st cl_ragged 150 env FATTN_TEST_LONG=1 FATTN_TEST_BACKENDS=opencl FATTN_TEST_REQUIRE=opencl ./build/test_ragged
st cl_append 90 env FATTN_TEST_BACKENDS=opencl FATTN_TEST_REQUIRE=opencl ./build/test_append
st cl_special 90 env FATTN_TEST_BACKENDS=opencl ./build/test_special
g="hq=32,hkv=8,sq=1,d=128"
S="--shape b=1,$g,skv=32768 --shape b=8,$g,skv=32768 --shape b=1,$g,skv=32768,page=16 --shape b=1,$g,skv=32768,page=256 --shape b=8,$g,skv=32768,page=16 --shape b=8,$g,skv=32768,page=256 --shape b=64,$g,skv=32768,page=16"
for r in 1 2; do for t in new base; do
  bin=./build/fattn_bench; [ $t = base ] && bin=../.base/build/fattn_bench
  env FATTN_DEBUG_BUILDLOG=1 FATTN_OPENCL_OPTIONS=-cl-nv-verbose FATTN_CACHE_DIR=off timeout 120 $bin --backend opencl --device 0 --no-sweep $S --dtype bf16,f16 --no-naive --iters 20 --check-rows 2 --no-stream --hbm-gbps 4800 > $O/ocl_${t}_$r.txt 2>&1
  echo "ocl $t $r rc $?" >> $O/summary.txt
done; done
cat $O/summary.txt; grep -h "Used\|BUILDLOG decode" $O/ocl_new_1.txt | cut -c1-220 | head -30

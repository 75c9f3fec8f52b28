#!/usr/bin/env bash
# Session 2026-11-23b, call 15: HEAD (program cache clock) on the H200: test_variants on CUDA and NVIDIA OpenCL, decode conformance.
set -u
source .devkit/env.sh
R=$OUT; O=/tmp/o33; rm -rf $O; mkdir -p $O
fin() { tar czf $R/out.tgz -C $O .; }
trap fin EXIT
cd .wtc
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA_ARCHS=90 > $O/build.log 2>&1 && cmake --build build -j 16 --target fattn_cuda fattn_opencl test_variants test_conformance test_validation test_opencl >> $O/build.log 2>&1 || tail -20 $O/build.log
st() { local n=$1 lim=$2; shift 2; timeout $lim "$@" > $O/$n.log 2>&1; echo "$n rc $?" >> $O/summary.txt; }
st cu_variants 150 env FATTN_TEST_BACKENDS=cuda FATTN_TEST_REQUIRE=cuda ./build/test_variants
st cl_variants 200 env FATTN_OPENCL_DEVICE=NVIDIA FATTN_TEST_BACKENDS=opencl FATTN_TEST_REQUIRE=opencl,opencl-variants ./build/test_variants
st cu_dec_s3 90 env FATTN_TEST_BACKENDS=cuda FATTN_TEST_REQUIRE=cuda FATTN_TEST_CASES=decode FATTN_TEST_KV_SPLITS=3 ./build/test_conformance
st validation 60 ./build/test_validation
st cl_opencl 90 env FATTN_OPENCL_DEVICE=NVIDIA FATTN_TEST_BACKENDS=opencl ./build/test_opencl
cat $O/summary.txt; grep -h "runs passed" $O/*_variants.log

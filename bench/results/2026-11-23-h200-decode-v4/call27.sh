#!/usr/bin/env bash
# Session 2026-11-23b, call 9: decode bars (CUDA, NVIDIA OpenCL, peers) at b956ecc; OpenCL paged tests on NVIDIA.
set -u
source .devkit/env.sh
R=$OUT; O=/tmp/o27; rm -rf $O; mkdir -p $O/bars
fin() { tar czf $R/out.tgz -C $O .; }
trap fin EXIT
cd .wtc
OUT=$O/bars timeout 420 bash bench/run_gpu.sh decodebars > $O/bars.log 2>&1
echo "bars rc $?" >> $O/summary.txt
st() { local n=$1 lim=$2; shift 2; timeout $lim "$@" > $O/$n.log 2>&1; echo "$n rc $?" >> $O/summary.txt; }
export FATTN_OPENCL_DEVICE=NVIDIA
st cl_ragged 150 env FATTN_TEST_LONG=1 FATTN_TEST_BACKENDS=opencl FATTN_TEST_REQUIRE=opencl ./build/test_ragged
st cl_append 90 env FATTN_TEST_BACKENDS=opencl FATTN_TEST_REQUIRE=opencl ./build/test_append
st cl_dec_s3 90 env FATTN_TEST_BACKENDS=opencl FATTN_TEST_CASES=decode FATTN_TEST_KV_SPLITS=3 ./build/test_conformance
cat $O/summary.txt; cat $O/bars/decodebars_table.md 2>/dev/null | head -40

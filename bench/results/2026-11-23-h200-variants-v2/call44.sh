#!/usr/bin/env bash
# Session 2026-11-23c, call 11: final check of HEAD a1084fe (planner reports the bias families' tile): CUDA test_variants, test_dispatch, test_conformance, test_ragged, test_append; bias cost.
set -u
source .devkit/env.sh
R=$OUT; O=/tmp/o44; rm -rf $O; mkdir -p $O
fin() { tar czf $R/out.tgz -C $O .; }
trap fin EXIT
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $O/machine.txt; date -u >> $O/machine.txt
cd .wtc
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA_ARCHS=90 > $O/build.log 2>&1 && (time cmake --build build -j 14 --target fattn_bench fattn_cuda fattn_opencl test_variants test_conformance test_ragged test_append test_dispatch test_special) >> $O/build.log 2>&1 || tail -20 $O/build.log
st() { local n=$1 lim=$2; shift 2; timeout $lim "$@" > $O/$n.log 2>&1; echo "$n rc $?" >> $O/summary.txt; }
st cu_variants 200 env FATTN_TEST_BACKENDS=cuda FATTN_TEST_REQUIRE=cuda,cuda-variants ./build/test_variants
st cu_dispatch 120 env FATTN_TEST_BACKENDS=cuda FATTN_TEST_REQUIRE=cuda ./build/test_dispatch
st cu_conf 150 env FATTN_TEST_BACKENDS=cuda FATTN_TEST_REQUIRE=cuda ./build/test_conformance
st cu_ragged 90 env FATTN_TEST_BACKENDS=cuda FATTN_TEST_REQUIRE=cuda ./build/test_ragged
st cu_append 60 env FATTN_TEST_BACKENDS=cuda FATTN_TEST_REQUIRE=cuda ./build/test_append
st cu_special 60 env FATTN_TEST_BACKENDS=cuda ./build/test_special
timeout 60 ./build/fattn_bench --backend cuda --device 0 --no-sweep --shape 1x32x8192x128c --shape 1x32x32768x128c --dtype bf16 --no-naive --iters 10 --check-rows 0 --variant bias > $O/var_bias.txt 2>&1; echo "bias rc $?" >> $O/summary.txt
cat $O/summary.txt; grep -h "real" $O/build.log; grep -h "runs passed" $O/cu_variants.log; grep -hE "^\[" $O/var_bias.txt

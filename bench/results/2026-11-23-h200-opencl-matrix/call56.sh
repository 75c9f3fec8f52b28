#!/usr/bin/env bash
# Session 2026-11-23e, call 8: HEAD (d32 on 8 warps) suites on NVIDIA OpenCL; every bucket vs base af66f7d in the same call.
set -u
source .devkit/env.sh
R=$OUT; O=/tmp/o56; rm -rf $O; mkdir -p $O
fin() { tar czf $R/out.tgz -C $O .; }
trap fin EXIT
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $O/machine.txt; date -u >> $O/machine.txt
(cd .base && cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA=OFF -DFATTN_BUILD_TESTS=OFF -DFATTN_BUILD_EXAMPLES=OFF > $O/build_base.log 2>&1 && cmake --build build -j 6 --target fattn_bench fattn_opencl >> $O/build_base.log 2>&1) &
cd .wtc
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA=OFF > $O/build.log 2>&1 && cmake --build build -j 10 --target fattn_bench fattn_opencl test_matrix test_variants test_conformance test_ragged >> $O/build.log 2>&1 || tail -20 $O/build.log
wait
export FATTN_OPENCL_DEVICE=NVIDIA
st() { local n=$1 lim=$2; shift 2; timeout $lim "$@" > $O/$n.log 2>&1; echo "$n rc $?" >> $O/summary.txt; }
st matrix 200 env FATTN_TEST_BACKENDS=opencl FATTN_TEST_REQUIRE=opencl,opencl-matrix ./build/test_matrix
st variants 300 env FATTN_TEST_BACKENDS=opencl FATTN_TEST_REQUIRE=opencl,opencl-variants ./build/test_variants
st conf 300 env FATTN_TEST_BACKENDS=opencl FATTN_TEST_REQUIRE=opencl FATTN_TEST_CASES=seq,causal,GQA,MQA,batch,strides,packed,logits,key,scale,dim ./build/test_conformance
st ragged 200 env FATTN_TEST_BACKENDS=opencl FATTN_TEST_REQUIRE=opencl ./build/test_ragged
B="--no-naive --iters 20 --check-rows 1 --fail-above 0.05 --seqs 4096,16384 --dtype f16,bf16 --dims 32,64,128,256"
timeout 150 ./build/fattn_bench --backend opencl --device 0 $B > $O/b_new.txt 2>&1; echo "new rc $?" >> $O/summary.txt
timeout 150 ../.base/build/fattn_bench --backend opencl --device 0 $B > $O/b_base.txt 2>&1; echo "base rc $?" >> $O/summary.txt
cat $O/summary.txt; grep -h "runs passed\|FAILED\|PASSED" $O/*.log | sort | uniq -c
for f in $O/b_*.txt; do echo "== $f"; grep -E "^\[" $f | awk '{print $5,$9,$10,$11,$12,$13}'; done

#!/usr/bin/env bash
# Session 2026-11-24m, call 93: the landed wgmma kernel (v0's loop; head dims up to 32 in the 64
# bucket): CUDA conformance with FATTN_CUDA_KERNEL=wgmma and with the default (mma.sync),
# compute-sanitizer memcheck and racecheck on wgmma problems, test_validation on the GPU host.
set -u
source .devkit/env.sh
O=/tmp/o93; rm -rf $O; mkdir -p $O
fin() { tar czf $OUT/out.tgz -C $O .; }
trap fin EXIT
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u; } > $O/machine.txt
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA_ARCHS=90 -DFATTN_BUILD_EXAMPLES=OFF > $O/build.log 2>&1 &&
  cmake --build build -j16 >> $O/build.log 2>&1 || { tail -40 $O/build.log; exit 1; }
st() { local n=$1 lim=$2; shift 2; timeout $lim "$@" > $O/$n.log 2>&1; echo "$n rc $?" >> $O/summary.txt; }
st conf_wgmma 400 env FATTN_CUDA_KERNEL=wgmma FATTN_TEST_BACKENDS=cuda FATTN_TEST_REQUIRE=cuda FATTN_TEST_DTYPES=f16,bf16 ./build/test_conformance
st conf_auto 400 env FATTN_TEST_BACKENDS=cuda FATTN_TEST_REQUIRE=cuda ./build/test_conformance
for t in memcheck racecheck; do
  st san_$t 240 env FATTN_CUDA_KERNEL=wgmma FATTN_TEST_BACKENDS=cuda FATTN_TEST_DTYPES=bf16 \
    FATTN_TEST_CASES="seq 65 dim 80,seq 129 dim 128,causal seq 1000 dim 128,kv strides differ causal,no keys,GQA 8/2 causal bhsd,head dim 1" \
    compute-sanitizer --tool $t --error-exitcode 9 ./build/test_conformance
done
st validation 60 ./build/test_validation
cat $O/summary.txt; grep -hE "runs passed|FAILED|ERROR SUMMARY" $O/*.log | head -20

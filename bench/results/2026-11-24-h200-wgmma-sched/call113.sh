#!/usr/bin/env bash
# The final state (scheduler reverted; the multi-tile cases kept): CUDA test_variants auto,
# forced wgmma, forced mma.sync; memcheck over the multi-tile cases; NVIDIA OpenCL (and the
# host's PoCL) over this session's new bias layouts and multi-tile cases.
set -u
source .devkit/env.sh
O=/tmp/o113; rm -rf $O; mkdir -p $O
trap 'tar czf $OUT/out.tgz -C /tmp o113' EXIT
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u; } > $O/machine.txt
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA_ARCHS=90 -DFATTN_BUILD_EXAMPLES=OFF > $O/build.log 2>&1 && cmake --build build -j 14 --target fattn_cuda fattn_opencl test_variants test_conformance >> $O/build.log 2>&1 || tail -30 $O/build.log
st() { local n=$1 lim=$2; shift 2; timeout $lim "$@" > $O/$n.log 2>&1; echo "$n rc $?" >> $O/summary.txt; }
T="FATTN_TEST_BACKENDS=cuda"
st var_auto 200 env $T FATTN_TEST_REQUIRE=cuda,cuda-variants ./build/test_variants
st var_wgmma 200 env $T FATTN_CUDA_KERNEL=wgmma ./build/test_variants
st var_mma 200 env $T FATTN_CUDA_KERNEL=mma ./build/test_variants
st san_memcheck 200 env $T FATTN_CUDA_KERNEL=wgmma FATTN_TEST_CASES="wgmma many tiles" compute-sanitizer --tool memcheck --error-exitcode 9 ./build/test_variants
st ocl_new 240 env FATTN_TEST_BACKENDS=opencl FATTN_TEST_CASES="wgmma tiles, bias,wgmma persistent, bias,wgmma many tiles,softcap + alibi, window 250,fast softcap + alibi" ./build/test_variants
cat $O/summary.txt; grep -hE "device|runs passed|ERROR SUMMARY" $O/*.log | sort | uniq -c

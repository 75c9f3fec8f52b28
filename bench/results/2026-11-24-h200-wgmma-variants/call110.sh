#!/usr/bin/env bash
# Review check: test_variants (with this session's new cases) on NVIDIA OpenCL and
# the CUDA suites the wgmma change reaches (test_cp: its window calls now run on
# wgmma; test_conformance auto; test_determinism), cp_bench --emulate after its
# refactor (scaling_cfg, one_gpu_ms).
set -u
source .devkit/env.sh
O=/tmp/o110; rm -rf $O; mkdir -p $O
trap 'tar czf $OUT/out.tgz -C /tmp o110' EXIT
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $O/machine.txt; date -u >> $O/machine.txt
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA_ARCHS=90 -DFATTN_BUILD_EXAMPLES=OFF > $O/build.log 2>&1 && cmake --build build -j 16 --target fattn_cuda fattn_opencl test_variants test_cp test_conformance test_determinism cp_bench >> $O/build.log 2>&1 || tail -20 $O/build.log
st() { local n=$1 lim=$2; shift 2; timeout $lim "$@" > $O/$n.log 2>&1; echo "$n rc $?" >> $O/summary.txt; }
st ocl_variants 300 env FATTN_TEST_BACKENDS=opencl FATTN_TEST_REQUIRE=opencl,opencl-variants ./build/test_variants
st cu_cp 200 env FATTN_TEST_BACKENDS=cuda FATTN_TEST_REQUIRE=cuda ./build/test_cp
st cu_conf 200 env FATTN_TEST_BACKENDS=cuda FATTN_TEST_REQUIRE=cuda ./build/test_conformance
st cu_det 100 env FATTN_TEST_BACKENDS=cuda ./build/test_determinism
st emulate 120 ./build/cp_bench --emulate 2,4 --seqs 131072 --iters 2 --layouts zigzag
cat $O/summary.txt; grep -hE "runs passed|splits|PASSED|FAILED" $O/*.log | head -20; cat $O/emulate.log | head

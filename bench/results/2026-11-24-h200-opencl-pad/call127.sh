#!/usr/bin/env bash
# Session 2026-11-24s, call 127: correctness of the padded table on NVIDIA's OpenCL (matrix path):
# test_matrix (f16, bf16, TF32, tuned shapes, the 48 KiB fallbacks), test_conformance, test_ragged,
# test_variants; compute-sanitizer is not used (it does not see OpenCL launches).
set -u
source .devkit/env.sh
O=/tmp/o127; rm -rf $O; mkdir -p $O
fin() { tar czf $OUT/out.tgz -C $O .; }
trap fin EXIT
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $O/machine.txt; date -u >> $O/machine.txt
cmake -S . -B build_t -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA=OFF -DFATTN_BUILD_TESTS=ON -DFATTN_BUILD_EXAMPLES=OFF > $O/build.log 2>&1 && cmake --build build_t -j 16 --target test_matrix test_conformance test_ragged test_variants >> $O/build.log 2>&1 || tail -20 $O/build.log
export FATTN_OPENCL_DEVICE=NVIDIA
st() { local n=$1 lim=$2; shift 2; timeout $lim "$@" > $O/$n.log 2>&1; echo "$n rc $?" >> $O/summary.txt; }
T="FATTN_TEST_BACKENDS=opencl FATTN_TEST_REQUIRE=opencl,opencl-matrix,opencl-tf32"
st matrix 120 env $T ./build_t/test_matrix
st conformance 150 env $T ./build_t/test_conformance
st ragged 100 env $T ./build_t/test_ragged
st variants 250 env $T ./build_t/test_variants
cat $O/summary.txt
grep -hE "runs passed|FAILED|ERROR|device 0" $O/*.log | sort | uniq -c | head -30

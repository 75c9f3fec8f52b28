#!/usr/bin/env bash
# Session 2026-11-23h, call 66: test_variants on NVIDIA OpenCL (its decode cases take
# decode-matrix under forced splits; call65 cut it off at 150 s while compiling), and where a
# decode call's fixed time goes (launch_cost.c): host time of fattn_forward, the bench's
# single-call time and back-to-back calls, CUDA and OpenCL (matrix and scalar), bf16 GQA 32/8 d128.
set -u
source .devkit/env.sh
O=/tmp/o66; rm -rf $O; mkdir -p $O
fin() { tar czf $OUT/out.tgz -C $O .; }
trap fin EXIT
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u; } > $O/machine.txt
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA_ARCHS=90 > $O/build.log 2>&1 &&
  cmake --build build -j16 >> $O/build.log 2>&1 || { tail -30 $O/build.log; exit 1; }
export FATTN_OPENCL_DEVICE=NVIDIA
d=bench/results/2026-11-23-h200-decode-mma
cc -O2 -Iinclude $d/launch_cost.c -Lbuild -lfattn -Wl,-rpath,$PWD/build -o $O/launch_cost || exit 1
for skv in 4096 32768 131072; do
  $O/launch_cost cuda $skv
  $O/launch_cost opencl $skv
  FATTN_DECODE_TUNE=mma=0 $O/launch_cost opencl $skv
done 2>&1 | tee $O/launch_cost.txt
timeout 380 env FATTN_TEST_BACKENDS=opencl FATTN_TEST_REQUIRE=opencl ./build/test_variants > $O/variants.log 2>&1
echo "variants rc $?" | tee -a $O/summary.txt
grep -E "runs passed|FAILED|PASSED" $O/variants.log | tail -8

#!/usr/bin/env bash
# Session 2026-11-23h, call 72: test_variants' decoding cases on NVIDIA OpenCL, now asserting
# that the 16-bit ones under forced splits run "decode-matrix" (an OpenCL-only build, for time).
set -u
source .devkit/env.sh
O=/tmp/o72; rm -rf $O; mkdir -p $O
fin() { tar czf $OUT/out.tgz -C $O .; }
trap fin EXIT
cmake -S . -B build72 -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA=OFF > $O/build.log 2>&1 &&
  cmake --build build72 -j16 --target test_variants fattn_opencl >> $O/build.log 2>&1 || { tail -30 $O/build.log; exit 1; }
FATTN_OPENCL_DEVICE=NVIDIA FATTN_TEST_CASES=decode FATTN_TEST_BACKENDS=opencl FATTN_TEST_REQUIRE=opencl \
  timeout 150 ./build72/test_variants > $O/variants.log 2>&1
echo "variants rc $?" | tee $O/summary.txt
grep -E "device 0|runs passed|FAILED|kernel is|PASSED" $O/variants.log | head -12

#!/usr/bin/env bash
# Session 2026-11-24n, call 101: the OpenCL decode kernel before (.old/kernels_cl, 607792e) and
# after the PoCL 5.0 workaround (152d141: the key-lane sum reads a copy of the accumulators), on
# NVIDIA's OpenCL, through FATTN_KERNEL_DIR, two alternating rounds; test_ragged on OpenCL.
set -u
source .devkit/env.sh
O=/tmp/o101; rm -rf $O; mkdir -p $O
fin() { tar czf $OUT/out.tgz -C $O .; }
trap fin EXIT
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u; } > $O/machine.txt
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA=OFF -DFATTN_BUILD_EXAMPLES=OFF > $O/build.log 2>&1 &&
  cmake --build build -j16 --target fattn_bench test_ragged fattn_opencl >> $O/build.log 2>&1 || { tail -40 $O/build.log; exit 1; }
export FATTN_OPENCL_DEVICE=NVIDIA
for r in 1 2; do
  for k in old new; do
    dir=$PWD/kernels_cl; [ $k = old ] && dir=$PWD/.old/kernels_cl
    mkdir -p $O/cache_$k
    FATTN_KERNEL_DIR=$dir FATTN_CACHE_DIR=$O/cache_$k timeout 150 ./build/fattn_bench --backend opencl --device 0 --decode \
      --dtype f32,bf16 --seqs 4096,32768 --batches 1,8 --iters 20 --check-rows 8 --csv $O/dec_${k}_$r.csv > $O/dec_${k}_$r.txt 2>&1
    echo "dec $k $r rc $?" >> $O/summary.txt
  done
done
FATTN_CACHE_DIR=$O/cache_new timeout 150 env FATTN_TEST_BACKENDS=opencl ./build/test_ragged > $O/ragged.log 2>&1; echo "ragged rc $?" >> $O/summary.txt
rm -rf $O/cache_*
cat $O/summary.txt; grep -h "runs passed" $O/ragged.log

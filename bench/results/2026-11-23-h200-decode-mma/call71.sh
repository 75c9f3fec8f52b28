#!/usr/bin/env bash
# Session 2026-11-23h, call 71: after decode_split.cl (the decode kernels' shared start, folded
# out of decode.cl and decode_mma.cl): the OpenCL suites that reach the decode rows on NVIDIA
# OpenCL (test_variants last), and the decode bars (CUDA, OpenCL matrix, OpenCL scalar with
# mma=0) in one call.
set -u
source .devkit/env.sh
O=/tmp/o71; rm -rf $O; mkdir -p $O
fin() { tar czf $OUT/out.tgz -C $O .; }
trap fin EXIT
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u; } > $O/machine.txt
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA_ARCHS=90 > $O/build.log 2>&1 &&
  cmake --build build -j16 >> $O/build.log 2>&1 || { tail -30 $O/build.log; exit 1; }
export FATTN_OPENCL_DEVICE=NVIDIA
st() { local n=$1 lim=$2; shift 2; timeout $lim "$@" > $O/$n.log 2>&1; echo "$n rc $?" >> $O/summary.txt; }
st matrix 120 env FATTN_TEST_BACKENDS=opencl FATTN_TEST_REQUIRE=opencl-matrix ./build/test_matrix
st dec_s3 90 env FATTN_TEST_BACKENDS=opencl FATTN_TEST_REQUIRE=opencl FATTN_TEST_CASES=decode FATTN_TEST_KV_SPLITS=3 ./build/test_conformance
st ragged 150 env FATTN_TEST_LONG=1 FATTN_TEST_BACKENDS=opencl FATTN_TEST_REQUIRE=opencl ./build/test_ragged
st append 90 env FATTN_TEST_BACKENDS=opencl FATTN_TEST_REQUIRE=opencl ./build/test_append
g="hq=32,hkv=8,sq=1,d=128"
bars=(b=1,$g,skv=32768 b=1,$g,skv=131072 b=8,$g,skv=32768 b=64,$g,skv=32768
      b=1,$g,skv=32768,page=16 b=1,$g,skv=32768,page=256 b=8,$g,skv=32768,page=16
      b=8,$g,skv=32768,page=256 b=1,$g,skv=131072,dtype=f32)
shapes=(); for s in "${bars[@]}"; do shapes+=(--shape "$s"); done
fb() { local n=$1 dt=$2; shift 2
  timeout 100 ./build/fattn_bench --device 0 --no-sweep --dtype $dt --no-naive --iters 20 --budget 20 \
    --hbm-gbps 4800 "$@" --csv $O/$n.csv --json $O/$n.jsonl > $O/$n.txt 2>&1
  echo "$n rc $?" >> $O/summary.txt; }
fb bars_cuda bf16,f16 --backend cuda "${shapes[@]}"
fb bars_ocl_mma bf16,f16 --backend opencl "${shapes[@]}"
FATTN_DECODE_TUNE=mma=0 fb bars_ocl_scalar bf16,f16 --backend opencl "${shapes[@]}"
d=bench/results/2026-11-23-h200-decode-mma
st variants 250 env FATTN_TEST_BACKENDS=opencl FATTN_TEST_REQUIRE=opencl ./build/test_variants
cd $O && for f in bars_*.txt; do echo "== $f"; grep -E "^\[" $f | sed 's/^\[[^]]*\] //' | cut -c1-135; done > $O/lines.txt
cat $O/summary.txt; grep -hE "FAILED|[1-9][0-9]* failed" $O/*.log | head -20; cat $O/lines.txt

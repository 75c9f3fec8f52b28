#!/usr/bin/env bash
# Session 2026-11-23h, call 65: decode_mma.cl with the merge and Q staging inside the rings
# (d128: 2 warps x 3 stages = 48 KiB), on the H200: the OpenCL suites that reach the decode rows
# on NVIDIA OpenCL (test_matrix, decode conformance at 3 and 7 splits, test_ragged,
# test_variants, test_append), then the decode bars for CUDA, the OpenCL matrix kernel (default,
# and 2 stages as in call64) and the scalar one (mma=0), all in one call, and a waves sweep.
set -u
source .devkit/env.sh
O=/tmp/o65; rm -rf $O; mkdir -p $O
fin() { tar czf $OUT/out.tgz -C $O .; }
trap fin EXIT
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u; git log --oneline -1; } > $O/machine.txt
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA_ARCHS=90 > $O/build.log 2>&1 &&
  cmake --build build -j16 >> $O/build.log 2>&1 || { tail -30 $O/build.log; exit 1; }
export FATTN_OPENCL_DEVICE=NVIDIA
st() { local n=$1 lim=$2; shift 2; timeout $lim "$@" > $O/$n.log 2>&1; echo "$n rc $?" >> $O/summary.txt; }
st matrix 120 env FATTN_TEST_BACKENDS=opencl FATTN_TEST_REQUIRE=opencl-matrix ./build/test_matrix
st dec_s3 90 env FATTN_TEST_BACKENDS=opencl FATTN_TEST_REQUIRE=opencl FATTN_TEST_CASES=decode FATTN_TEST_KV_SPLITS=3 ./build/test_conformance
st dec_s7 90 env FATTN_TEST_BACKENDS=opencl FATTN_TEST_REQUIRE=opencl FATTN_TEST_CASES=decode FATTN_TEST_KV_SPLITS=7 ./build/test_conformance
st ragged 150 env FATTN_TEST_LONG=1 FATTN_TEST_BACKENDS=opencl FATTN_TEST_REQUIRE=opencl ./build/test_ragged
st variants 150 env FATTN_TEST_BACKENDS=opencl FATTN_TEST_REQUIRE=opencl ./build/test_variants
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
FATTN_DECODE_TUNE=stages=2 fb bars_ocl_mma_st2 bf16 --backend opencl "${shapes[@]}"
FATTN_DECODE_TUNE=mma=0 fb bars_ocl_scalar bf16,f16 --backend opencl "${shapes[@]}"
sw=(--shape b=1,$g,skv=32768 --shape b=1,$g,skv=131072 --shape b=8,$g,skv=32768 --shape b=64,$g,skv=32768)
i=0
for t in waves=3 waves=5 waves=6 min_keys=512; do
  i=$((i+1)); echo "sweep$i $t" >> $O/summary.txt
  FATTN_DECODE_TUNE=$t fb sweep$i bf16 --backend opencl "${sw[@]}"
done
cd $O && for f in bars_*.txt sweep*.txt; do echo "== $f"; grep -E "^\[" $f | sed 's/^\[[^]]*\] //' | cut -c1-135; done > $O/lines.txt
cat $O/summary.txt; grep -E "FAILED|failed|rc [1-9]" $O/*.log | head -20; cat $O/lines.txt

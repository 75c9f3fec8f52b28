#!/usr/bin/env bash
# Session 2026-11-23h, call 64: the OpenCL matrix decode kernel (kernels_cl/decode_mma.cl) on
# the H200: test_matrix on NVIDIA OpenCL (tensor cores), the decode bars for CUDA, the
# OpenCL matrix kernel and the scalar one (FATTN_DECODE_TUNE=mma=0) in one call, then a sweep
# of the matrix kernel's shape knobs (bf16).
set -u
source .devkit/env.sh
O=/tmp/o64; rm -rf $O; mkdir -p $O
fin() { tar czf $OUT/out.tgz -C $O .; }
trap fin EXIT
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u; git log --oneline -1; } > $O/machine.txt
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA_ARCHS=90 > $O/build.log 2>&1 &&
  cmake --build build -j16 >> $O/build.log 2>&1 || { tail -30 $O/build.log; exit 1; }
export FATTN_OPENCL_DEVICE=NVIDIA
st() { local n=$1 lim=$2; shift 2; timeout $lim "$@" > $O/$n.log 2>&1; echo "$n rc $?" >> $O/summary.txt; }
st matrix 150 env FATTN_TEST_BACKENDS=opencl FATTN_TEST_REQUIRE=opencl-matrix ./build/test_matrix
g="hq=32,hkv=8,sq=1,d=128"
bars=(b=1,$g,skv=32768 b=1,$g,skv=131072 b=8,$g,skv=32768 b=64,$g,skv=32768
      b=1,$g,skv=32768,page=16 b=1,$g,skv=32768,page=256 b=8,$g,skv=32768,page=16
      b=8,$g,skv=32768,page=256 b=1,$g,skv=131072,dtype=f32)
shapes=(); for s in "${bars[@]}"; do shapes+=(--shape "$s"); done
fb() { local n=$1 dt=$2; shift 2
  timeout 120 ./build/fattn_bench --device 0 --no-sweep --dtype $dt --no-naive --iters 20 --budget 20 \
    --hbm-gbps 4800 "$@" --csv $O/$n.csv --json $O/$n.jsonl > $O/$n.txt 2>&1
  echo "$n rc $?" >> $O/summary.txt; }
fb bars_cuda bf16,f16 --backend cuda "${shapes[@]}"
fb bars_ocl_mma bf16,f16 --backend opencl "${shapes[@]}"
FATTN_DECODE_TUNE=mma=0 fb bars_ocl_scalar bf16,f16 --backend opencl "${shapes[@]}"
sw=(--shape b=1,$g,skv=32768 --shape b=1,$g,skv=131072 --shape b=8,$g,skv=32768 --shape b=64,$g,skv=32768
    --shape b=1,$g,skv=32768,page=16)
i=0
for t in nw=1 waves=6 nw=2,stages=3 nw=1,stages=4 waves=8 waves=2 nw=2,kw=32 nw=1,kw=32,stages=3; do
  i=$((i+1)); echo "sweep$i $t" >> $O/summary.txt
  FATTN_DECODE_TUNE=$t fb sweep$i bf16 --backend opencl "${sw[@]}"
done
cd $O && for f in bars_*.txt sweep*.txt; do echo "== $f"; grep -E "^\[" $f | sed 's/^\[[^]]*\] //'; done > $O/lines.txt
cat $O/summary.txt; cat $O/lines.txt | cut -c1-160

#!/usr/bin/env bash
# Session 2026-11-23i, call 74: f32 decoding with one P.V row lane at batch 1 (the new default
# of the scalar decode kernel): NVIDIA OpenCL suites that reach it (decode conformance at 3
# splits, test_ragged long, test_variants), the f32 rows on CUDA, OpenCL now and OpenCL with
# the old maps (vr=4, batch 1 only), and the 16-bit bar rows twice (call-to-call noise), with
# batch 1 at 4k and 8k keys beside them.
set -u
source .devkit/env.sh
O=/tmp/o74; rm -rf $O; mkdir -p $O
fin() { tar czf $OUT/out.tgz -C $O .; }
trap fin EXIT
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u; } > $O/machine.txt
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA_ARCHS=90 > $O/build.log 2>&1 &&
  cmake --build build -j16 >> $O/build.log 2>&1 || { tail -30 $O/build.log; exit 1; }
export FATTN_OPENCL_DEVICE=NVIDIA
st() { local n=$1 lim=$2; shift 2; timeout $lim "$@" > $O/$n.log 2>&1; echo "$n rc $?" >> $O/summary.txt; }
st dec_s3 90 env FATTN_TEST_BACKENDS=opencl FATTN_TEST_REQUIRE=opencl FATTN_TEST_CASES=decode FATTN_TEST_KV_SPLITS=3 ./build/test_conformance
st ragged 150 env FATTN_TEST_LONG=1 FATTN_TEST_BACKENDS=opencl FATTN_TEST_REQUIRE=opencl ./build/test_ragged
g="hq=32,hkv=8,sq=1,d=128"
f32=(b=1,$g,skv=32768 b=1,$g,skv=131072 b=8,$g,skv=32768 b=64,$g,skv=32768
     b=1,$g,skv=32768,page=16 b=1,$g,skv=32768,page=256 b=8,$g,skv=32768,page=16
     b=1,hq=32,hkv=8,sq=1,d=64,skv=32768)
f32b1=(b=1,$g,skv=32768 b=1,$g,skv=131072 b=1,$g,skv=32768,page=16 b=1,$g,skv=32768,page=256
       b=1,hq=32,hkv=8,sq=1,d=64,skv=32768)
h16=(b=1,$g,skv=4096 b=1,$g,skv=8192 b=1,$g,skv=32768 b=1,$g,skv=131072 b=8,$g,skv=32768
     b=64,$g,skv=32768 b=1,$g,skv=32768,page=16 b=1,$g,skv=32768,page=256
     b=8,$g,skv=32768,page=16 b=8,$g,skv=32768,page=256)
sh() { local a=(); for s in "$@"; do a+=(--shape "$s"); done; echo "${a[@]}"; }
fb() { local n=$1 dt=$2; shift 2
  timeout 120 ./build/fattn_bench --device 0 --no-sweep --dtype $dt --no-naive --iters 20 --budget 20 \
    --hbm-gbps 4800 "$@" --csv $O/$n.csv --json $O/$n.jsonl > $O/$n.txt 2>&1
  echo "$n rc $?" >> $O/summary.txt; }
fb f32_cuda f32 --backend cuda $(sh "${f32[@]}")
fb f32_ocl f32 --backend opencl $(sh "${f32[@]}")
FATTN_DECODE_TUNE=vr=4 fb f32_ocl_vr4 f32 --backend opencl $(sh "${f32b1[@]}")
for r in 1 2; do
  fb h16_cuda_$r bf16,f16 --backend cuda $(sh "${h16[@]}")
  fb h16_ocl_$r bf16,f16 --backend opencl $(sh "${h16[@]}")
done
st variants 280 env FATTN_TEST_BACKENDS=opencl FATTN_TEST_REQUIRE=opencl ./build/test_variants
cd $O && for f in f32_*.txt h16_*.txt; do echo "== $f"; grep -E "^\[" $f | sed 's/^\[[^]]*\] //' | cut -c1-112; done > $O/lines.txt
cat $O/summary.txt; grep -hE "FAILED|[1-9][0-9]* failed" $O/*.log | head -20; cat $O/lines.txt

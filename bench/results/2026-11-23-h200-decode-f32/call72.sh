#!/usr/bin/env bash
# Session 2026-11-23i, call 72: f32 decoding on the OpenCL matrix decode kernel (three TF32
# products each): test_matrix (its decode test runs f32 now) and test_variants on NVIDIA
# OpenCL; the f32 decode rows on CUDA, OpenCL matrix and OpenCL scalar (mma=0, the kernel f32
# ran before) in one call, two f32 knob shapes, the 16-bit batch-1 rows again (unchanged
# code paths), and launch_cost with its plan-only column.
set -u
source .devkit/env.sh
O=/tmp/o72; rm -rf $O; mkdir -p $O
fin() { tar czf $OUT/out.tgz -C $O .; }
trap fin EXIT
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u; } > $O/machine.txt
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA_ARCHS=90 > $O/build.log 2>&1 &&
  cmake --build build -j16 >> $O/build.log 2>&1 || { tail -30 $O/build.log; exit 1; }
export FATTN_OPENCL_DEVICE=NVIDIA
st() { local n=$1 lim=$2; shift 2; timeout $lim "$@" > $O/$n.log 2>&1; echo "$n rc $?" >> $O/summary.txt; }
st matrix 150 env FATTN_TEST_BACKENDS=opencl FATTN_TEST_REQUIRE=opencl-matrix ./build/test_matrix
st dec_s3 90 env FATTN_TEST_BACKENDS=opencl FATTN_TEST_REQUIRE=opencl FATTN_TEST_CASES=decode FATTN_TEST_KV_SPLITS=3 ./build/test_conformance
st ragged 150 env FATTN_TEST_LONG=1 FATTN_TEST_BACKENDS=opencl FATTN_TEST_REQUIRE=opencl ./build/test_ragged
g="hq=32,hkv=8,sq=1,d=128"
f32=(b=1,$g,skv=32768 b=1,$g,skv=131072 b=8,$g,skv=32768 b=64,$g,skv=32768
     b=1,$g,skv=32768,page=16 b=1,$g,skv=32768,page=256 b=8,$g,skv=32768,page=16
     b=1,hq=32,hkv=8,sq=1,d=64,skv=32768)
h16=(b=1,$g,skv=32768 b=1,$g,skv=131072 b=8,$g,skv=32768 b=1,$g,skv=32768,page=256)
sh() { local a=(); for s in "$@"; do a+=(--shape "$s"); done; echo "${a[@]}"; }
fb() { local n=$1 dt=$2; shift 2
  timeout 100 ./build/fattn_bench --device 0 --no-sweep --dtype $dt --no-naive --iters 20 --budget 20 \
    --hbm-gbps 4800 "$@" --csv $O/$n.csv --json $O/$n.jsonl > $O/$n.txt 2>&1
  echo "$n rc $?" >> $O/summary.txt; }
fb f32_cuda f32 --backend cuda $(sh "${f32[@]}")
fb f32_ocl_mma f32 --backend opencl $(sh "${f32[@]}")
FATTN_DECODE_TUNE=mma=0 fb f32_ocl_scalar f32 --backend opencl $(sh "${f32[@]}")
FATTN_DECODE_TUNE=kw=32,nw=1,stages=2 fb f32_ocl_kw32 f32 --backend opencl $(sh "${f32[@]:0:3}")
FATTN_DECODE_TUNE=nw=1,stages=2 fb f32_ocl_s2 f32 --backend opencl $(sh "${f32[@]:0:3}")
fb h16_cuda bf16,f16 --backend cuda $(sh "${h16[@]}")
fb h16_ocl_mma bf16,f16 --backend opencl $(sh "${h16[@]}")
d=bench/results/2026-11-23-h200-decode-f32
cc -O2 -Iinclude $d/launch_cost.c -Lbuild -lfattn -Wl,-rpath,$PWD/build -o $O/launch_cost &&
for skv in 32768 131072; do $O/launch_cost cuda $skv; $O/launch_cost opencl $skv; done 2>&1 | tee $O/launch_cost.txt
st variants 280 env FATTN_TEST_BACKENDS=opencl FATTN_TEST_REQUIRE=opencl ./build/test_variants
cd $O && for f in f32_*.txt h16_*.txt; do echo "== $f"; grep -E "^\[" $f | sed 's/^\[[^]]*\] //' | cut -c1-135; done > $O/lines.txt
cat $O/summary.txt; grep -hE "FAILED|[1-9][0-9]* failed" $O/*.log | head -20; cat $O/lines.txt

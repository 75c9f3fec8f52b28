#!/usr/bin/env bash
# Session 2026-11-23i, call 76: combine.cl with eight parts' loads in flight: test_combine and the
# decode suites on NVIDIA OpenCL, combine_cost and launch_cost (before: call75), and the 16-bit
# decode bar rows (before: call74) in one call with CUDA.
set -u
source .devkit/env.sh
O=/tmp/o76; rm -rf $O; mkdir -p $O
fin() { tar czf $OUT/out.tgz -C $O .; }
trap fin EXIT
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u; } > $O/machine.txt
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA_ARCHS=90 > $O/build.log 2>&1 &&
  cmake --build build -j16 >> $O/build.log 2>&1 || { tail -30 $O/build.log; exit 1; }
export FATTN_OPENCL_DEVICE=NVIDIA
st() { local n=$1 lim=$2; shift 2; timeout $lim "$@" > $O/$n.log 2>&1; echo "$n rc $?" >> $O/summary.txt; }
st combine 60 env FATTN_TEST_BACKENDS=opencl FATTN_TEST_REQUIRE=opencl ./build/test_combine
st dec_s3 90 env FATTN_TEST_BACKENDS=opencl FATTN_TEST_REQUIRE=opencl FATTN_TEST_CASES=decode FATTN_TEST_KV_SPLITS=3 ./build/test_conformance
st dec_s7 90 env FATTN_TEST_BACKENDS=opencl FATTN_TEST_REQUIRE=opencl FATTN_TEST_CASES=decode FATTN_TEST_KV_SPLITS=11 ./build/test_conformance
st ragged 150 env FATTN_TEST_LONG=1 FATTN_TEST_BACKENDS=opencl FATTN_TEST_REQUIRE=opencl ./build/test_ragged
d=bench/results/2026-11-23-h200-decode-f32
cc -O2 -Iinclude $d/combine_cost.c -Lbuild -lfattn -Wl,-rpath,$PWD/build -o $O/combine_cost &&
cc -O2 -Iinclude $d/launch_cost.c -Lbuild -lfattn -Wl,-rpath,$PWD/build -o $O/launch_cost || exit 1
for b in cuda opencl; do $O/combine_cost $b 66; $O/combine_cost $b 8; $O/launch_cost $b 32768; done 2>&1 | tee $O/cost.txt
g="hq=32,hkv=8,sq=1,d=128"
h16=(b=1,$g,skv=4096 b=1,$g,skv=8192 b=1,$g,skv=32768 b=1,$g,skv=131072 b=8,$g,skv=32768
     b=64,$g,skv=32768 b=1,$g,skv=32768,page=16 b=1,$g,skv=32768,page=256
     b=8,$g,skv=32768,page=16 b=8,$g,skv=32768,page=256 b=1,$g,skv=32768,dtype=f32
     b=1,$g,skv=131072,dtype=f32)
sh() { local a=(); for s in "$@"; do a+=(--shape "$s"); done; echo "${a[@]}"; }
fb() { local n=$1 dt=$2; shift 2
  timeout 120 ./build/fattn_bench --device 0 --no-sweep --dtype $dt --no-naive --iters 20 --budget 20 \
    --hbm-gbps 4800 "$@" --csv $O/$n.csv --json $O/$n.jsonl > $O/$n.txt 2>&1
  echo "$n rc $?" >> $O/summary.txt; }
fb h16_cuda bf16,f16 --backend cuda $(sh "${h16[@]}")
fb h16_ocl bf16,f16 --backend opencl $(sh "${h16[@]}")
cd $O && for f in h16_*.txt; do echo "== $f"; grep -E "^\[" $f | sed 's/^\[[^]]*\] //' | cut -c1-100; done > $O/lines.txt
cat $O/summary.txt; grep -hE "FAILED|[1-9][0-9]* failed" $O/*.log | head -20; cat $O/lines.txt

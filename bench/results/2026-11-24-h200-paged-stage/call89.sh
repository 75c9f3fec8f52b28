#!/usr/bin/env bash
# Session 2026-11-24m, call 89: (1) issue 12's decode bars with the staged paged decode
# (bench/run_gpu.sh decodebars: CUDA, NVIDIA OpenCL and the PyTorch peers in one call) and
# test_ragged on CUDA; (2) the dense decode at d64 and d128 against the baseline (.old =
# 8d4b1dd), four alternating rounds (call88 showed d64 dense 3.6% slower in two rounds);
# (3) the softcap's reciprocal on the FMA pipe (FATTN_CAP_RCP 1: every score, 2: every other)
# against the MUFU one (0, the default build), prefill bf16 d128 causal 8k/32k, alternating,
# and CUDA test_variants on the FATTN_CAP_RCP=1 build (head dim 128 only: other cases decline).
set -u
source .devkit/env.sh
O=/tmp/o89; rm -rf $O; mkdir -p $O
fin() { tar czf $OUT/out.tgz -C $O .; }
trap fin EXIT
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u; } > $O/machine.txt
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA_ARCHS=90 > $O/build.log 2>&1 &&
  cmake --build build -j8 >> $O/build.log 2>&1 &
cmake -S .old -B build-old -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA_ARCHS=90 "-DFATTN_CUDA_HEAD_DIMS=64;128" \
  -DFATTN_BUILD_TESTS=OFF -DFATTN_BUILD_EXAMPLES=OFF > $O/build_old.log 2>&1 &&
  cmake --build build-old -j3 --target fattn_bench >> $O/build_old.log 2>&1 &
for n in 1 2; do
  cmake -S . -B build-r$n -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA_ARCHS=90 -DFATTN_CUDA_HEAD_DIMS=128 \
    -DCMAKE_CUDA_FLAGS=-DFATTN_CAP_RCP=$n -DFATTN_BUILD_EXAMPLES=OFF > $O/build_r$n.log 2>&1 &&
    cmake --build build-r$n -j3 --target fattn_bench test_variants >> $O/build_r$n.log 2>&1 &
done
wait
for b in build build-old build-r1 build-r2; do [ -x $b/fattn_bench ] || { echo "$b failed"; tail -20 $O/build*.log; }; done
echo "built $(date -u +%T)" >> $O/summary.txt
st() { local n=$1 lim=$2; shift 2; timeout $lim "$@" > $O/$n.log 2>&1; echo "$n rc $?" >> $O/summary.txt; }
st ragged 150 env FATTN_TEST_BACKENDS=cuda FATTN_TEST_REQUIRE=cuda ./build/test_ragged
export FATTN_OPENCL_DEVICE=NVIDIA
OUT=$O/bars bash bench/run_gpu.sh decodebars > $O/decodebars.log 2>&1; echo "decodebars rc $?" >> $O/summary.txt
g="hq=32,hkv=8,sq=1,d=128"; g64="hq=32,hkv=8,sq=1,d=64"
rows=(b=1,$g64,skv=32768 b=1,$g64,skv=8192 b=8,$g64,skv=32768 b=1,$g,skv=32768 b=1,$g,skv=8192)
sh() { local a=(); for s in "$@"; do a+=(--shape "$s"); done; echo "${a[@]}"; }
fb() { local n=$1 bin=$2; shift 2
  timeout 120 $bin --device 0 --no-sweep --dtype bf16 --no-naive --iters 30 --budget 20 \
    --hbm-gbps 4800 "$@" --csv $O/$n.csv > $O/$n.txt 2>&1
  echo "$n rc $?" >> $O/summary.txt; }
for r in 1 2 3 4; do
  fb dnew_$r ./build/fattn_bench --backend cuda $(sh "${rows[@]}")
  fb dold_$r ./build-old/fattn_bench --backend cuda $(sh "${rows[@]}")
done
cap() { local n=$1 bin=$2 v=$3
  timeout 120 $bin --backend cuda --device 0 --no-sweep --shape 1x32x8192x128c --shape 1x32x32768x128c \
    --dtype bf16 --no-naive --iters 10 --check-rows 0 $([ $v = none ] || echo --variant $v) --csv $O/$n.csv > $O/$n.txt 2>&1
  echo "$n rc $?" >> $O/summary.txt; }
for r in 1 2; do
  cap c0_none_$r ./build/fattn_bench none
  for k in 0 1 2; do b=./build-r$k/fattn_bench; [ $k = 0 ] && b=./build/fattn_bench; cap c${k}_cap_$r $b softcap=50; done
done
st variants_r1 240 env FATTN_TEST_BACKENDS=cuda FATTN_TEST_REQUIRE=cuda ./build-r1/test_variants
cat $O/summary.txt; grep -hE "FAILED|[1-9][0-9]* failed|runs passed" $O/*.log | head -20

#!/usr/bin/env bash
# Session 2026-11-23j, call 77: the CUDA combine with eight parts' loads in flight, and the CUDA
# decode vetting a split's pages while its first tiles are in flight. Builds this tree and the
# baseline (.old = e27439b, fattn_bench only), then: test_combine (CUDA, NVIDIA OpenCL),
# test_ragged's faults and the forced-split decode cases on CUDA, compute-sanitizer memcheck
# over test_ragged (bad page tables: the early copies must stay in the buffers), combine_cost,
# and the paged / contiguous decode rows on both builds in alternating rounds.
set -u
source .devkit/env.sh
O=/tmp/o77; rm -rf $O; mkdir -p $O
fin() { tar czf $OUT/out.tgz -C $O .; }
trap fin EXIT
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u; } > $O/machine.txt
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA_ARCHS=90 > $O/build.log 2>&1 &&
  cmake --build build -j12 >> $O/build.log 2>&1 &
cmake -S .old -B build-old -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA_ARCHS=90 "-DFATTN_CUDA_HEAD_DIMS=128" \
  -DFATTN_BUILD_TESTS=OFF -DFATTN_BUILD_EXAMPLES=OFF > $O/build_old.log 2>&1 &&
  cmake --build build-old -j4 --target fattn_bench >> $O/build_old.log 2>&1 &
wait
[ -x build/fattn_bench ] || { tail -30 $O/build.log; exit 1; }
[ -x build-old/fattn_bench ] || tail -10 $O/build_old.log
echo "built $(date -u +%T)" >> $O/summary.txt
export FATTN_OPENCL_DEVICE=NVIDIA
st() { local n=$1 lim=$2; shift 2; timeout $lim "$@" > $O/$n.log 2>&1; echo "$n rc $?" >> $O/summary.txt; }
st combine 90 env FATTN_TEST_BACKENDS=cuda,opencl FATTN_TEST_REQUIRE=cuda,opencl ./build/test_combine
st ragged 150 env FATTN_TEST_BACKENDS=cuda FATTN_TEST_REQUIRE=cuda ./build/test_ragged
st dec_s3 90 env FATTN_TEST_BACKENDS=cuda FATTN_TEST_REQUIRE=cuda FATTN_TEST_CASES=decode FATTN_TEST_KV_SPLITS=3 ./build/test_conformance
st dec_s11 90 env FATTN_TEST_BACKENDS=cuda FATTN_TEST_REQUIRE=cuda FATTN_TEST_CASES=decode FATTN_TEST_KV_SPLITS=11 ./build/test_conformance
st memcheck_ragged 240 env FATTN_TEST_BACKENDS=cuda FATTN_TEST_REQUIRE=cuda compute-sanitizer --tool memcheck --error-exitcode 9 ./build/test_ragged
d=bench/results/2026-11-23-h200-decode-f32   # combine_cost.c (call75)
for v in new old; do
  lib=build; [ $v = old ] && lib=build-old
  cc -O2 -Iinclude $d/combine_cost.c -L$lib -lfattn -Wl,-rpath,$PWD/$lib -o $O/combine_cost_$v
done
for r in 1 2; do for v in new old; do $O/combine_cost_$v cuda 66 | sed "s/^/$v: /"; done; done 2>&1 | tee $O/cost.txt
g="hq=32,hkv=8,sq=1,d=128"
rows=(b=1,$g,skv=32768 b=1,$g,skv=32768,page=16 b=1,$g,skv=32768,page=256
      b=1,$g,skv=131072 b=1,$g,skv=131072,page=16 b=8,$g,skv=32768 b=8,$g,skv=32768,page=16
      b=8,$g,skv=32768,page=256 b=1,$g,skv=4096 b=1,$g,skv=4096,page=16)
sh() { local a=(); for s in "$@"; do a+=(--shape "$s"); done; echo "${a[@]}"; }
fb() { local n=$1 bin=$2; shift 2
  timeout 120 $bin --device 0 --no-sweep --dtype bf16 --no-naive --iters 30 --budget 20 \
    --hbm-gbps 4800 "$@" --csv $O/$n.csv --json $O/$n.jsonl > $O/$n.txt 2>&1
  echo "$n rc $?" >> $O/summary.txt; }
for r in 1 2; do
  fb new_$r ./build/fattn_bench --backend cuda $(sh "${rows[@]}")
  fb old_$r ./build-old/fattn_bench --backend cuda $(sh "${rows[@]}")
done
cd $O && for f in new_*.txt old_*.txt; do echo "== $f"; grep -E "^\[" $f | sed 's/^\[[^]]*\] //' | cut -c1-110; done > $O/lines.txt
cat $O/summary.txt; grep -hE "FAILED|[1-9][0-9]* failed|ERROR SUMMARY" $O/*.log | head -20; cat $O/lines.txt

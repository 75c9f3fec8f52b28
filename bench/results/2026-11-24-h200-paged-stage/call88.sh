#!/usr/bin/env bash
# Session 2026-11-24m, call 88: the tensor-core decode stages a split's vetted page offsets in
# shared memory (ragged_pages_stage) and both decode kernels divide by the page size in 32 bits.
# Builds this tree and the baseline (.old = 8d4b1dd, fattn_bench only), runs test_ragged, the
# forced-split decode cases and compute-sanitizer memcheck over test_ragged on CUDA, then the
# paged / contiguous decode rows (bf16; d128 GQA 32/8, d64 32/8, d256 16/2; f32 and f16 d128)
# on both builds in alternating rounds.
set -u
source .devkit/env.sh
O=/tmp/o88; rm -rf $O; mkdir -p $O
fin() { tar czf $OUT/out.tgz -C $O .; }
trap fin EXIT
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u; } > $O/machine.txt
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA_ARCHS=90 > $O/build.log 2>&1 &&
  cmake --build build -j12 >> $O/build.log 2>&1 &
cmake -S .old -B build-old -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA_ARCHS=90 "-DFATTN_CUDA_HEAD_DIMS=64;128;256" \
  -DFATTN_BUILD_TESTS=OFF -DFATTN_BUILD_EXAMPLES=OFF > $O/build_old.log 2>&1 &&
  cmake --build build-old -j4 --target fattn_bench >> $O/build_old.log 2>&1 &
wait
[ -x build/fattn_bench ] || { tail -30 $O/build.log; exit 1; }
[ -x build-old/fattn_bench ] || tail -10 $O/build_old.log
echo "built $(date -u +%T)" >> $O/summary.txt
st() { local n=$1 lim=$2; shift 2; timeout $lim "$@" > $O/$n.log 2>&1; echo "$n rc $?" >> $O/summary.txt; }
st ragged 150 env FATTN_TEST_BACKENDS=cuda FATTN_TEST_REQUIRE=cuda ./build/test_ragged
st dec_s3 90 env FATTN_TEST_BACKENDS=cuda FATTN_TEST_REQUIRE=cuda FATTN_TEST_CASES=decode FATTN_TEST_KV_SPLITS=3 ./build/test_conformance
st dec_s11 90 env FATTN_TEST_BACKENDS=cuda FATTN_TEST_REQUIRE=cuda FATTN_TEST_CASES=decode FATTN_TEST_KV_SPLITS=11 ./build/test_conformance
st memcheck_ragged 240 env FATTN_TEST_BACKENDS=cuda FATTN_TEST_REQUIRE=cuda compute-sanitizer --tool memcheck --error-exitcode 9 ./build/test_ragged
g="hq=32,hkv=8,sq=1,d=128"; g64="hq=32,hkv=8,sq=1,d=64"; g256="hq=16,hkv=2,sq=1,d=256"
rows=(b=1,$g,skv=32768 b=1,$g,skv=32768,page=16 b=1,$g,skv=32768,page=256
      b=1,$g,skv=131072 b=1,$g,skv=131072,page=16 b=8,$g,skv=32768 b=8,$g,skv=32768,page=16
      b=8,$g,skv=32768,page=256 b=1,$g,skv=4096 b=1,$g,skv=4096,page=16
      b=1,$g64,skv=32768 b=1,$g64,skv=32768,page=16 b=1,$g256,skv=32768 b=1,$g256,skv=32768,page=16)
sh() { local a=(); for s in "$@"; do a+=(--shape "$s"); done; echo "${a[@]}"; }
fb() { local n=$1 bin=$2; shift 2
  timeout 120 $bin --device 0 --no-sweep --dtype bf16 --no-naive --iters 30 --budget 20 \
    --hbm-gbps 4800 "$@" --csv $O/$n.csv --json $O/$n.jsonl > $O/$n.txt 2>&1
  echo "$n rc $?" >> $O/summary.txt; }
for r in 1 2 3; do
  fb new_$r ./build/fattn_bench --backend cuda $(sh "${rows[@]}")
  fb old_$r ./build-old/fattn_bench --backend cuda $(sh "${rows[@]}")
done
for dt in f32 f16; do
  fr=(b=1,$g,skv=32768 b=1,$g,skv=32768,page=16 b=8,$g,skv=32768 b=8,$g,skv=32768,page=16)
  fb new_$dt ./build/fattn_bench --backend cuda $(sh "${fr[@]}") --dtype $dt
  fb old_$dt ./build-old/fattn_bench --backend cuda $(sh "${fr[@]}") --dtype $dt
done
cd $O && for f in new_*.txt old_*.txt; do echo "== $f"; grep -E "^\[" $f | sed 's/^\[[^]]*\] //' | cut -c1-110; done > $O/lines.txt
cat $O/summary.txt; grep -hE "FAILED|[1-9][0-9]* failed|ERROR SUMMARY" $O/*.log | head -20

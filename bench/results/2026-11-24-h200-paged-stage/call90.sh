#!/usr/bin/env bash
# Session 2026-11-24m, call 90: the decode key loop hoisted per way of finding rows (HEAD) against
# the in-loop branch (.mid = 022949b, call89: dense d64 b1 3-7% slower than .old) and the
# baseline (.old = 8d4b1dd), four rounds in rotating order; the bf16 softcap with the fixed
# offset folded into its FFMA (HEAD) against .mid, prefill bf16 d128 causal 8k/32k, plain and
# softcap 50, three rounds; CUDA test_variants, test_ragged and decode conformance at 3 splits
# on HEAD.
set -u
source .devkit/env.sh
O=/tmp/o90; rm -rf $O; mkdir -p $O
fin() { tar czf $OUT/out.tgz -C $O .; }
trap fin EXIT
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u; } > $O/machine.txt
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA_ARCHS=90 -DFATTN_BUILD_EXAMPLES=OFF > $O/build.log 2>&1 &&
  cmake --build build -j8 --target fattn_bench test_variants test_ragged test_conformance >> $O/build.log 2>&1 &
for t in old mid; do
  cmake -S .$t -B build-$t -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA_ARCHS=90 "-DFATTN_CUDA_HEAD_DIMS=64;128" \
    -DFATTN_BUILD_TESTS=OFF -DFATTN_BUILD_EXAMPLES=OFF > $O/build_$t.log 2>&1 &&
    cmake --build build-$t -j4 --target fattn_bench >> $O/build_$t.log 2>&1 &
done
wait
for b in build build-old build-mid; do [ -x $b/fattn_bench ] || { echo "$b failed"; tail -20 $O/build*.log; }; done
echo "built $(date -u +%T)" >> $O/summary.txt
st() { local n=$1 lim=$2; shift 2; timeout $lim "$@" > $O/$n.log 2>&1; echo "$n rc $?" >> $O/summary.txt; }
st variants 240 env FATTN_TEST_BACKENDS=cuda FATTN_TEST_REQUIRE=cuda,cuda-variants ./build/test_variants
st ragged 150 env FATTN_TEST_BACKENDS=cuda FATTN_TEST_REQUIRE=cuda ./build/test_ragged
st dec_s3 90 env FATTN_TEST_BACKENDS=cuda FATTN_TEST_REQUIRE=cuda FATTN_TEST_CASES=decode FATTN_TEST_KV_SPLITS=3 ./build/test_conformance
g="hq=32,hkv=8,sq=1,d=128"; g64="hq=32,hkv=8,sq=1,d=64"
rows=(b=1,$g64,skv=32768 b=1,$g64,skv=8192 b=8,$g64,skv=32768 b=1,$g,skv=32768 b=1,$g,skv=8192
      b=1,$g,skv=32768,page=16 b=1,$g,skv=32768,page=256 b=1,$g64,skv=32768,page=16)
sh() { local a=(); for s in "$@"; do a+=(--shape "$s"); done; echo "${a[@]}"; }
fb() { local n=$1 t=$2; shift 2
  timeout 120 ./build$t/fattn_bench --backend cuda --device 0 --no-sweep --dtype bf16 --no-naive --iters 30 \
    --budget 20 --hbm-gbps 4800 $(sh "${rows[@]}") --csv $O/$n.csv > $O/$n.txt 2>&1
  echo "$n rc $?" >> $O/summary.txt; }
for r in 1 2 3 4; do
  case $r in 1|4) ord="new mid old";; 2) ord="mid old new";; 3) ord="old new mid";; esac
  for t in $ord; do s=-$t; [ $t = new ] && s=; fb d${t}_$r "$s"; done
done
cap() { local n=$1 t=$2 v=$3
  timeout 120 ./build$t/fattn_bench --backend cuda --device 0 --no-sweep --shape 1x32x8192x128c --shape 1x32x32768x128c \
    --dtype bf16 --no-naive --iters 10 --check-rows 0 $([ $v = none ] || echo --variant $v) --csv $O/$n.csv > $O/$n.txt 2>&1
  echo "$n rc $?" >> $O/summary.txt; }
for r in 1 2 3; do
  cap cnew_none_$r "" none; cap cnew_cap_$r "" softcap=50; cap cmid_cap_$r -mid softcap=50; cap cmid_none_$r -mid none
done
cat $O/summary.txt; grep -hE "FAILED|[1-9][0-9]* failed|runs passed" $O/*.log | head -20

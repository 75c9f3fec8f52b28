#!/usr/bin/env bash
# Issue 13, session v, call 148: the softcap tiers as landed (none in the d128 row-max instances)
# against four terms alone (FATTN_WGMMA_CAP_POLY=4 build): three interleaved rounds of
# plain / softcap 50 (two terms on bench data) / 8 (three) / 4 (three and four) over four shapes,
# bf16 and f16 (fattn_bench prints f16 first); softcap 1 (the fallback) once; the variant tests.
set -u
source .devkit/env.sh
O=/tmp/o148; rm -rf $O; mkdir -p $O
trap 'tar czf $OUT/out.tgz -C /tmp o148' EXIT
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u; git log --oneline | head -1; } > $O/machine.txt
(cmake -S . -B build_p4 -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA_ARCHS=90 -DCMAKE_CUDA_FLAGS=-DFATTN_WGMMA_CAP_POLY=4 -DFATTN_BUILD_TESTS=OFF -DFATTN_BUILD_EXAMPLES=OFF > $O/build_p4.log 2>&1 && cmake --build build_p4 -j 6 --target fattn_bench fattn_cuda >> $O/build_p4.log 2>&1 || tail -20 $O/build_p4.log) &
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA_ARCHS=90 -DFATTN_BUILD_TESTS=ON -DFATTN_BUILD_EXAMPLES=OFF > $O/build.log 2>&1 && (time cmake --build build -j 10 --target fattn_bench fattn_cuda test_variants) >> $O/build.log 2>&1 || tail -30 $O/build.log
wait
R() { local n=$1 lim=$2; shift 2; timeout $lim "$@" > $O/$n.txt 2>&1; echo "$n rc $?" >> $O/summary.txt; }
W="--backend cuda --device 0 --no-sweep --no-naive --warmup 10 --iters 30 --check-rows 0 --dtype bf16,f16"
SH="--shape 1x32x32768x128c --shape 4x32x4096x128 --shape 2x32x8192x64c --shape 2x16x8192x256c"
for r in 1 2 3; do
  R plain_$r 90 ./build/fattn_bench $W $SH
  for c in 50 8 4; do for b in build build_p4; do
    R cap${c}_${b}_$r 90 ./$b/fattn_bench $W --variant softcap=$c $SH
  done; done
done
for b in build build_p4; do R cap1_$b 90 ./$b/fattn_bench $W --variant softcap=1 $SH; done
R var_wgmma 150 env FATTN_TEST_BACKENDS=cuda FATTN_CUDA_KERNEL=wgmma ./build/test_variants
grep -v "rc 0" $O/summary.txt; grep -h real $O/build.log
grep -hE "runs passed|FAILED" $O/var_*.txt | sort | uniq -c
for f in $O/plain_* $O/cap*; do echo "$(basename $f .txt): $(grep -hE '^\[' $f | grep -o '[0-9.]* ms' | tr '\n' ' ')"; done

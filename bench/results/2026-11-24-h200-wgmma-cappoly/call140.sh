#!/usr/bin/env bash
# Issue 13, session u, call 140: the softcap polynomial (4 terms, the default) measured for the
# record: bf16/f16 32k d128 causal, plain / softcap 50 / fast / softcap 50 without the polynomial
# (FATTN_WGMMA_CAP_POLY=0 build), 10 warm-ups and 30 calls, three interleaved rounds; other shapes;
# softcap 1 (outside the range: the check's cost); FlexAttention; tests, memcheck on the softcap
# cases of the wgmma tiles.
set -u
source .devkit/env.sh
O=/tmp/o140; rm -rf $O; mkdir -p $O
trap 'tar czf $OUT/out.tgz -C /tmp o140' EXIT
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u; } > $O/machine.txt
(timeout 300 python3 bench/peer_variants.py --seqs 32768 > $O/peer_variants.txt 2>&1; echo "peer_variants rc $?" >> $O/summary.txt) &
(cmake -S . -B build_p0 -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA_ARCHS=90 -DCMAKE_CUDA_FLAGS=-DFATTN_WGMMA_CAP_POLY=0 -DFATTN_BUILD_TESTS=OFF -DFATTN_BUILD_EXAMPLES=OFF > $O/build_p0.log 2>&1 && cmake --build build_p0 -j 5 --target fattn_bench fattn_cuda >> $O/build_p0.log 2>&1 || tail -20 $O/build_p0.log) &
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA_ARCHS=90 -DFATTN_BUILD_TESTS=ON -DFATTN_BUILD_EXAMPLES=OFF > $O/build.log 2>&1 && (time cmake --build build -j 9 --target fattn_bench fattn_cuda test_variants) >> $O/build.log 2>&1 || tail -30 $O/build.log
wait
R() { local n=$1 lim=$2; shift 2; timeout $lim "$@" > $O/$n.txt 2>&1; echo "$n rc $?" >> $O/summary.txt; }
W="--backend cuda --device 0 --no-sweep --no-naive --warmup 10 --iters 30 --check-rows 0"
for r in 1 2 3; do for dt in bf16 f16; do
  R plain_${dt}_$r 60 ./build/fattn_bench $W --dtype $dt --shape 1x32x32768x128c
  R cap_${dt}_$r 60 ./build/fattn_bench $W --dtype $dt --variant softcap=50 --shape 1x32x32768x128c
  R fast_${dt}_$r 60 ./build/fattn_bench $W --dtype $dt --variant softcap=50 --fast-softcap --shape 1x32x32768x128c
  R old_${dt}_$r 60 ./build_p0/fattn_bench $W --dtype $dt --variant softcap=50 --shape 1x32x32768x128c
done; done
SH="--shape 2x32x8192x64c --shape 2x16x8192x256c --shape 4x32x4096x128 --shape 1x32x8192x128c"
for b in build build_p0; do
  R o_plain_$b 90 ./$b/fattn_bench $W --dtype bf16,f16 $SH
  R o_cap50_$b 90 ./$b/fattn_bench $W --dtype bf16,f16 --variant softcap=50 $SH
  R o_cap1_$b 90 ./$b/fattn_bench $W --dtype bf16,f16 --variant softcap=1 $SH
  R o_capalibi_$b 60 ./$b/fattn_bench $W --dtype bf16 --variant softcap=50,alibi --shape 1x32x32768x128c
done
R var_wgmma 150 env FATTN_TEST_BACKENDS=cuda FATTN_CUDA_KERNEL=wgmma ./build/test_variants
R var_auto 150 env FATTN_TEST_BACKENDS=cuda FATTN_TEST_REQUIRE=cuda,cuda-variants ./build/test_variants
R memcheck 200 env FATTN_CUDA_KERNEL=wgmma FATTN_TEST_BACKENDS=cuda FATTN_TEST_CASES='wgmma tiles, softcap' compute-sanitizer --tool memcheck --error-exitcode 9 ./build/test_variants
grep -v "rc 0" $O/summary.txt; grep -h real $O/build.log
grep -hE "runs passed|FAILED" $O/var_*.txt $O/memcheck.txt | sort | uniq -c; grep -h "ERROR SUMMARY" $O/memcheck.txt
for f in $O/plain_* $O/cap_* $O/fast_* $O/old_* $O/o_*; do echo "$(basename $f): $(grep -hE '^\[' $f | grep -o '[0-9.]* ms' | tr '\n' ' ')"; done
grep -E "softcap|causal " $O/peer_variants.txt

#!/usr/bin/env bash
# Issue 13, session v, call 150: the softcap tiers as landed (all three in the bf16 fixed-offset
# instances; two and four terms in the row-max ones at d64/d256; four alone at d128) for the
# record, against four terms alone (FATTN_WGMMA_CAP_POLY=4 build) and three at least (=3):
# bf16/f16 32k d128 causal, plain / softcap 50 / fast, 10 warm-ups and 30 calls, three
# interleaved rounds; a cap sweep (50, 8, 4, 1: each tier's range and the fallback) on bench data
# (a warp tile's largest |scale s| is about 1.2); other shapes; FlexAttention; tests; memcheck.
set -u
source .devkit/env.sh
O=/tmp/o150; rm -rf $O; mkdir -p $O
trap 'tar czf $OUT/out.tgz -C /tmp o150' EXIT
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u; git log --oneline | head -1; } > $O/machine.txt
(timeout 300 python3 bench/peer_variants.py --seqs 32768 > $O/peer_variants.txt 2>&1; echo "peer_variants rc $?" >> $O/summary.txt) &
for P in 3 4; do
(cmake -S . -B build_p$P -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA_ARCHS=90 -DCMAKE_CUDA_FLAGS=-DFATTN_WGMMA_CAP_POLY=$P -DFATTN_BUILD_TESTS=OFF -DFATTN_BUILD_EXAMPLES=OFF > $O/build_p$P.log 2>&1 && cmake --build build_p$P -j 4 --target fattn_bench fattn_cuda >> $O/build_p$P.log 2>&1 || tail -20 $O/build_p$P.log) &
done
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA_ARCHS=90 -DFATTN_BUILD_TESTS=ON -DFATTN_BUILD_EXAMPLES=OFF > $O/build.log 2>&1 && (time cmake --build build -j 7 --target fattn_bench fattn_cuda test_variants) >> $O/build.log 2>&1 || tail -30 $O/build.log
wait
R() { local n=$1 lim=$2; shift 2; timeout $lim "$@" > $O/$n.txt 2>&1; echo "$n rc $?" >> $O/summary.txt; }
W="--backend cuda --device 0 --no-sweep --no-naive --warmup 10 --iters 30 --check-rows 0"
S32="--shape 1x32x32768x128c"
for r in 1 2 3; do for dt in bf16 f16; do
  R plain_${dt}_$r 60 ./build/fattn_bench $W --dtype $dt $S32
  R cap_${dt}_$r 60 ./build/fattn_bench $W --dtype $dt --variant softcap=50 $S32
  R cap3_${dt}_$r 60 ./build_p3/fattn_bench $W --dtype $dt --variant softcap=50 $S32
  R cap4_${dt}_$r 60 ./build_p4/fattn_bench $W --dtype $dt --variant softcap=50 $S32
  R fast_${dt}_$r 60 ./build/fattn_bench $W --dtype $dt --variant softcap=50 --fast-softcap $S32
done; done
for c in 8 4 1; do for b in build build_p4; do
  R sweep${c}_$b 90 ./$b/fattn_bench $W --dtype bf16,f16 --variant softcap=$c $S32
done; done
SH="--shape 2x32x8192x64c --shape 2x16x8192x256c --shape 4x32x4096x128 --shape 1x32x8192x128c"
for b in build build_p4; do
  R o_plain_$b 90 ./$b/fattn_bench $W --dtype bf16,f16 $SH
  R o_cap50_$b 90 ./$b/fattn_bench $W --dtype bf16,f16 --variant softcap=50 $SH
  R o_cap4_$b 90 ./$b/fattn_bench $W --dtype bf16,f16 --variant softcap=4 $SH
  R o_capalibi_$b 60 ./$b/fattn_bench $W --dtype bf16 --variant softcap=50,alibi $S32
done
R var_wgmma 150 env FATTN_TEST_BACKENDS=cuda FATTN_CUDA_KERNEL=wgmma ./build/test_variants
R var_auto 150 env FATTN_TEST_BACKENDS=cuda FATTN_TEST_REQUIRE=cuda,cuda-variants ./build/test_variants
R memcheck 200 env FATTN_CUDA_KERNEL=wgmma FATTN_TEST_BACKENDS=cuda FATTN_TEST_CASES='wgmma tiles, softcap' compute-sanitizer --tool memcheck --error-exitcode 9 ./build/test_variants
grep -v "rc 0" $O/summary.txt; grep -h real $O/build.log
grep -hE "runs passed|FAILED" $O/var_*.txt $O/memcheck.txt | sort | uniq -c; grep -h "ERROR SUMMARY" $O/memcheck.txt
for f in $O/plain_* $O/cap_* $O/cap3_* $O/cap4_* $O/fast_* $O/sweep* $O/o_*; do echo "$(basename $f): $(grep -hE '^\[' $f | grep -o '[0-9.]* ms' | tr '\n' ' ')"; done
grep -E "softcap|causal " $O/peer_variants.txt

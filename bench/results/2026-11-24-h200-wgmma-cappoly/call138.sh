#!/usr/bin/env bash
# Issue 13 (the accurate softcap's cost on Hopper), session u, call 138: the tanh as a polynomial
# on the FMA pipe where a warp's scores lie within |scale s| <= 0.75 softcap (FATTN_WGMMA_CAP_POLY=1,
# the default) against ex2/rcp everywhere (0), two builds, same call: softcap 50 (polynomial),
# softcap 1 (mostly outside its range: the check's cost), fast softcap and plain; tests on 1;
# FlexAttention's softcap and plain rows (peer_variants.py) during the builds; SASS of the bar's
# instance (bf16 d128 fixed offset) from both builds.
set -u
source .devkit/env.sh
O=/tmp/o138; rm -rf $O; mkdir -p $O
trap 'tar czf $OUT/out.tgz -C /tmp o138' EXIT
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u; git log -1 --format=%h 2>/dev/null; } > $O/machine.txt
(timeout 400 python3 bench/peer_variants.py --seqs 32768 > $O/peer_variants.txt 2>&1; echo "peers rc $?" >> $O/summary.txt) &
(cmake -S . -B build_p0 -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA_ARCHS=90 -DCMAKE_CUDA_FLAGS=-DFATTN_WGMMA_CAP_POLY=0 -DFATTN_BUILD_TESTS=OFF -DFATTN_BUILD_EXAMPLES=OFF > $O/build_p0.log 2>&1 && cmake --build build_p0 -j 5 --target fattn_bench fattn_cuda >> $O/build_p0.log 2>&1 || tail -20 $O/build_p0.log) &
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA_ARCHS=90 -DFATTN_BUILD_TESTS=ON -DFATTN_BUILD_EXAMPLES=OFF > $O/build.log 2>&1 && (time cmake --build build -j 9 --target fattn_bench fattn_cuda test_variants) >> $O/build.log 2>&1 || tail -30 $O/build.log
wait
for b in build build_p0; do
  o=$(find $b -name 'flash_wgmma.cu.o' | head -1)
  cuobjdump -sass $o 2>&1 | awk '/Function :/{p = /flash_wgmma_kernelI13__nv_bfloat16Li128ELi3ELb0/} p' > $O/sass_$b.txt
  echo "$b: lines $(wc -l < $O/sass_$b.txt) MUFU $(grep -c MUFU $O/sass_$b.txt) STL $(grep -c STL $O/sass_$b.txt) LDL $(grep -c LDL $O/sass_$b.txt) FFMA $(grep -c FFMA $O/sass_$b.txt)" >> $O/sass_summary.txt
done
B() { case $1 in 1) echo ./build/fattn_bench;; *) echo ./build_p0/fattn_bench;; esac; }
SH="--shape 1x32x32768x128c --shape 2x32x8192x64c --shape 2x16x8192x256c --shape 4x32x4096x128"
for r in 1 2; do for v in 1 0; do
  for dt in bf16 f16; do
    timeout 60 $(B $v) --backend cuda --device 0 --no-sweep --dtype $dt --no-naive --iters 10 --check-rows 0 --variant softcap=50 $SH > $O/cap50_${v}_${dt}_$r.txt 2>&1; echo "cap50 $v $dt $r rc $?" >> $O/summary.txt
    timeout 60 $(B $v) --backend cuda --device 0 --no-sweep --dtype $dt --no-naive --iters 10 --check-rows 0 --variant softcap=1 $SH > $O/cap1_${v}_${dt}_$r.txt 2>&1; echo "cap1 $v $dt $r rc $?" >> $O/summary.txt
  done
  timeout 60 $(B $v) --backend cuda --device 0 --no-sweep --dtype bf16,f16 --no-naive --iters 10 --check-rows 0 --variant softcap=50 --fast-softcap $SH > $O/fast_${v}_$r.txt 2>&1; echo "fast $v $r rc $?" >> $O/summary.txt
  timeout 60 $(B $v) --backend cuda --device 0 --no-sweep --dtype bf16 --no-naive --iters 10 --check-rows 0 --variant softcap=50,alibi --shape 1x32x32768x128c > $O/capalibi_${v}_$r.txt 2>&1; echo "capalibi $v $r rc $?" >> $O/summary.txt
  timeout 60 $(B $v) --backend cuda --device 0 --no-sweep --dtype bf16,f16 --no-naive --iters 10 --check-rows 0 $SH > $O/plain_${v}_$r.txt 2>&1; echo "plain $v $r rc $?" >> $O/summary.txt
done; done
timeout 120 env FATTN_TEST_BACKENDS=cuda FATTN_CUDA_KERNEL=wgmma ./build/test_variants > $O/var_wgmma.log 2>&1; echo "var_wgmma rc $?" >> $O/summary.txt
timeout 120 env FATTN_TEST_BACKENDS=cuda FATTN_TEST_REQUIRE=cuda,cuda-variants ./build/test_variants > $O/var_auto.log 2>&1; echo "var_auto rc $?" >> $O/summary.txt
cat $O/summary.txt | grep -v "rc 0"; grep -h real $O/build.log; cat $O/sass_summary.txt
grep -hE "runs passed|FAILED" $O/var_*.log | sort | uniq -c
for f in $O/cap50_* $O/cap1_* $O/fast_* $O/capalibi_* $O/plain_*; do echo "$(basename $f): $(grep -hE '^\[' $f | grep -o '[0-9.]* ms' | tr '\n' ' ')"; done
grep -E "softcap|causal " $O/peer_variants.txt

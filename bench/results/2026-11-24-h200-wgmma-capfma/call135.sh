#!/usr/bin/env bash
# Issue 13 (the accurate softcap's cost on Hopper), session t, call 135: the tanh's ex2 on the FMA
# pipe (FATTN_WGMMA_CAP_FMA=1, every score; 2, every other one) against MUFU (0), three builds, same
# call: the bar's row (32k bf16 d128 causal, softcap 50) and others, plain for the ratio; tests on 1.
set -u
source .devkit/env.sh
O=/tmp/o135; rm -rf $O; mkdir -p $O
trap 'tar czf $OUT/out.tgz -C /tmp o135' EXIT
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u; } > $O/machine.txt
for v in 0 2; do
  (cmake -S . -B build_c$v -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA_ARCHS=90 -DCMAKE_CUDA_FLAGS=-DFATTN_WGMMA_CAP_FMA=$v -DFATTN_BUILD_TESTS=OFF -DFATTN_BUILD_EXAMPLES=OFF > $O/build_c$v.log 2>&1 && cmake --build build_c$v -j 4 --target fattn_bench fattn_cuda >> $O/build_c$v.log 2>&1 || tail -20 $O/build_c$v.log) &
done
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA_ARCHS=90 -DFATTN_BUILD_TESTS=ON -DFATTN_BUILD_EXAMPLES=OFF > $O/build.log 2>&1 && (time cmake --build build -j 8 --target fattn_bench fattn_cuda test_variants) >> $O/build.log 2>&1 || tail -30 $O/build.log
wait
B() { case $1 in 1) echo ./build/fattn_bench;; *) echo ./build_c$1/fattn_bench;; esac; }
for r in 1 2; do for v in 1 0 2; do
  for dt in bf16 f16; do
    timeout 60 $(B $v) --backend cuda --device 0 --no-sweep --dtype $dt --no-naive --iters 10 --check-rows 0 --variant softcap=50 --shape 1x32x32768x128c --shape 2x32x8192x64c --shape 2x16x8192x256c --shape 4x32x4096x128 > $O/cap_${v}_${dt}_$r.txt 2>&1; echo "cap $v $dt $r rc $?" >> $O/summary.txt
  done
  timeout 60 $(B $v) --backend cuda --device 0 --no-sweep --dtype bf16 --no-naive --iters 10 --check-rows 0 --variant softcap=50,alibi --shape 1x32x32768x128c > $O/capalibi_${v}_$r.txt 2>&1; echo "capalibi $v $r rc $?" >> $O/summary.txt
  timeout 60 $(B $v) --backend cuda --device 0 --no-sweep --dtype bf16,f16 --no-naive --iters 10 --check-rows 0 --shape 1x32x32768x128c --shape 2x32x8192x64c --shape 2x16x8192x256c --shape 4x32x4096x128 > $O/plain_${v}_$r.txt 2>&1; echo "plain $v $r rc $?" >> $O/summary.txt
done; done
timeout 100 env FATTN_TEST_BACKENDS=cuda FATTN_CUDA_KERNEL=wgmma ./build/test_variants > $O/var_wgmma.log 2>&1; echo "var_wgmma rc $?" >> $O/summary.txt
timeout 100 env FATTN_TEST_BACKENDS=cuda ./build/test_variants > $O/var_auto.log 2>&1; echo "var_auto rc $?" >> $O/summary.txt
cat $O/summary.txt; grep -h real $O/build.log
grep -hE "runs passed|FAILED" $O/var_*.log | sort | uniq -c
for f in $O/cap_* $O/capalibi_* $O/plain_*; do echo "$(basename $f): $(grep -hE '^\[' $f | grep -o '[0-9.]* ms' | tr '\n' ' ')"; done

#!/usr/bin/env bash
# The softcap's reciprocal on the wgmma kernel: FATTN_WGMMA_CAP 0 (MUFU rcp),
# 1 (Newton steps on the FMA pipe, the default), 2 (tanh.approx.f32), same call;
# test_variants (forced wgmma) on the default build.
set -u
source .devkit/env.sh
O=/tmp/o106; rm -rf $O; mkdir -p $O
trap 'tar czf $OUT/out.tgz -C /tmp o106' EXIT
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $O/machine.txt; date -u >> $O/machine.txt
for c in 0 2; do
  (cmake -S . -B build$c -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA_ARCHS=90 -DFATTN_BUILD_TESTS=OFF -DFATTN_BUILD_EXAMPLES=OFF -DCMAKE_CUDA_FLAGS=-DFATTN_WGMMA_CAP=$c > $O/build$c.log 2>&1 && cmake --build build$c -j 5 --target fattn_bench fattn_cuda >> $O/build$c.log 2>&1 || tail -20 $O/build$c.log) &
done
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA_ARCHS=90 -DFATTN_BUILD_EXAMPLES=OFF > $O/build.log 2>&1 && cmake --build build -j 6 --target fattn_bench fattn_cuda test_variants >> $O/build.log 2>&1 || tail -20 $O/build.log
wait
FATTN_CUDA_KERNEL=wgmma FATTN_TEST_BACKENDS=cuda FATTN_TEST_CASES=softcap timeout 120 ./build/test_variants > $O/var_wgmma_softcap.log 2>&1; echo "var rc $?" >> $O/summary.txt
sh="--shape 1x32x8192x128c --shape 1x32x32768x128c"
for r in 1 2; do for c in 0 1 2; do
  bin=./build/fattn_bench; [ $c = 1 ] || bin=./build$c/fattn_bench
  for dt in bf16 f16; do for v in none softcap=50 window=4096,softcap=50; do
    timeout 60 $bin --backend cuda --device 0 --no-sweep $sh --dtype $dt --no-naive --iters 10 --check-rows 0 $([ $v = none ] || echo --variant $v) > "$O/${dt}_c${c}_${v}_r$r.txt" 2>&1; echo "$dt $c $v $r rc $?" >> $O/summary.txt
  done; done
done; done
grep -v "rc 0" $O/summary.txt; grep -h "runs passed" $O/var_wgmma_softcap.log
for f in $O/*_r*.txt; do echo "$(basename $f): $(grep -hE '^\[' $f | grep -o '[0-9.]* ms' | tr '\n' ' ')"; done

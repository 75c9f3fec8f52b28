#!/usr/bin/env bash
# The gathered bias path: a per-key bias (padding mask, [batch, 1, 1, seq_kv], row stride 0:
# the producer's element loads) beside the plane (TMA) and plain, on wgmma (auto) and forced
# mma.sync, same call.
set -u
source .devkit/env.sh
O=/tmp/o114; rm -rf $O; mkdir -p $O
trap 'tar czf $OUT/out.tgz -C /tmp o114' EXIT
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u; } > $O/machine.txt
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA_ARCHS=90 -DFATTN_BUILD_TESTS=OFF -DFATTN_BUILD_EXAMPLES=OFF > $O/build.log 2>&1 && cmake --build build -j 16 --target fattn_bench fattn_cuda >> $O/build.log 2>&1 || tail -30 $O/build.log
B="--backend cuda --device 0 --no-sweep --dtype bf16 --no-naive --iters 10 --check-rows 0"
sh="--shape 1x32x8192x128c --shape 1x32x32768x128c --shape 4x32x8192x128 --shape 4x16x8192x64c"
for r in 1 2; do
  for v in none bias bias=keys; do
    timeout 90 ./build/fattn_bench $B $sh $([ $v = none ] || echo --variant $v) > "$O/auto_${v}_$r.txt" 2>&1; echo "auto $v $r rc $?" >> $O/summary.txt
  done
  for v in none bias=keys; do
    FATTN_CUDA_KERNEL=mma timeout 120 ./build/fattn_bench $B $sh $([ $v = none ] || echo --variant $v) > "$O/mma_${v}_$r.txt" 2>&1; echo "mma $v $r rc $?" >> $O/summary.txt
  done
done
grep -v "rc 0" $O/summary.txt
for f in $O/auto_* $O/mma_*; do echo "$(basename $f): $(grep -hE '^\[' $f | grep -o '[0-9.]* ms' | tr '\n' ' ') $(grep -ho '\[[a-z-]*\]$' $f | sort -u | tr '\n' ' ')"; done

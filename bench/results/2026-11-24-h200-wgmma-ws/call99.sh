#!/usr/bin/env bash
# Session 2026-11-24n, call 99: auto routes causal head dim 64 up to 512 keys to mma.sync; the
# sweep rows at seq 512 and 2048 on auto and forced mma.sync, to show which kernel auto ran.
set -u
source .devkit/env.sh
O=/tmp/o99; rm -rf $O; mkdir -p $O
fin() { tar czf $OUT/out.tgz -C $O .; }
trap fin EXIT
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u; git log --oneline -1; } > $O/machine.txt
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA_ARCHS=90 -DFATTN_BUILD_EXAMPLES=OFF -DFATTN_CUDA_HEAD_DIMS="64;128" \
  -DFATTN_OPENCL=OFF > $O/build.log 2>&1 && cmake --build build -j16 --target fattn_bench fattn_cuda >> $O/build.log 2>&1 || { tail -40 $O/build.log; exit 1; }
for k in auto mma; do
  FATTN_CUDA_KERNEL=$k timeout 100 ./build/fattn_bench --backend cuda --device 0 --dtype bf16,f16 --seqs 512,2048 --dims 64 \
    --no-naive --iters 10 --check-rows 16 --csv $O/sweep_$k.csv > $O/sweep_$k.txt 2>&1; echo "sweep $k rc $?" >> $O/summary.txt
done
cat $O/summary.txt; grep -h "^\[" $O/sweep_*.txt | cut -c17-170

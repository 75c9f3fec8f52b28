#!/usr/bin/env bash
# Issue 15, session u, call 141: the seq-2048 rows of issue 15's table again against the PyTorch
# peers (cuDNN, FA2), 10 warm-ups and 30 calls for fattn, 30 calls for the peers, twice.
set -u
source .devkit/env.sh
O=/tmp/o141; rm -rf $O; mkdir -p $O
trap 'tar czf $OUT/out.tgz -C /tmp o141' EXIT
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u; } > $O/machine.txt
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA_ARCHS=90 -DFATTN_BUILD_TESTS=OFF -DFATTN_BUILD_EXAMPLES=OFF > $O/build.log 2>&1 && (time cmake --build build -j 16 --target fattn_bench fattn_cuda) >> $O/build.log 2>&1 || tail -30 $O/build.log
for r in 1 2; do
  timeout 150 ./build/fattn_bench --backend cuda --device 0 --dtype bf16,f16 --seqs 2048,4096 --dims 64,128,256 --no-naive --warmup 10 --iters 30 --check-rows 16 --csv $O/s2048_$r.csv > $O/s2048_$r.txt 2>&1; echo "s2048 $r rc $?" >> $O/summary.txt
  timeout 200 python3 bench/peers_torch.py --dtypes bf16,f16 --seqs 2048,4096 --dims 64,128,256 --iters 30 > $O/peers2048_$r.jsonl 2> $O/peers2048_$r.err; echo "peers2048 $r rc $?" >> $O/summary.txt
done
cat $O/summary.txt; grep -h real $O/build.log

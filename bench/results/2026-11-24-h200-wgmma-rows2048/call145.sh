#!/usr/bin/env bash
# Issue 15, session u, call 145: the seq-2048 rows below cuDNN, measured four times interleaved with
# the peers in one call (fattn 10 warm-ups + 30 calls; peers 30 calls), to tell a real gap from
# run-to-run spread (cuDNN's own times moved 10-15% between calls 141 and 144).
set -u
source .devkit/env.sh
O=/tmp/o145; rm -rf $O; mkdir -p $O
trap 'tar czf $OUT/out.tgz -C /tmp o145' EXIT
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u; git log -1 --format=%h 2>/dev/null; } > $O/machine.txt
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA_ARCHS=90 -DFATTN_BUILD_TESTS=OFF -DFATTN_BUILD_EXAMPLES=OFF > $O/build.log 2>&1 && (time cmake --build build -j 16 --target fattn_bench fattn_cuda) >> $O/build.log 2>&1 || tail -30 $O/build.log
for r in 1 2 3 4; do
  timeout 60 ./build/fattn_bench --backend cuda --device 0 --dtype bf16,f16 --seqs 2048 --dims 64,128,256 --no-naive --warmup 10 --iters 30 --check-rows 0 --csv $O/f_$r.csv > $O/f_$r.txt 2>&1; echo "f $r rc $?" >> $O/summary.txt
  timeout 90 python3 bench/peers_torch.py --dtypes bf16,f16 --seqs 2048 --dims 64,128,256 --iters 30 > $O/p_$r.jsonl 2> $O/p_$r.err; echo "p $r rc $?" >> $O/summary.txt
done
grep -v "rc 0" $O/summary.txt; grep -h real $O/build.log

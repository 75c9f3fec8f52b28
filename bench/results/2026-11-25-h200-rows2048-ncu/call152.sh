#!/usr/bin/env bash
# Issue 15, session v, call 152: cuDNN runs d64 causal 2048 with 384-thread blocks (two consumer
# warpgroups, 128-row tiles) on a persistent grid (call151). fattn's d64 has three consumers
# (192-row tiles: 11 per 2048 rows, the last 2/3 full). Default build against
# FATTN_WGMMA_NWG64=2, with cuDNN/FA2 in the same call: seq 2048 and 4096, d64, bf16 and f16,
# causal and not (fattn_bench's sweep rows), three interleaved rounds.
set -u
source .devkit/env.sh
O=/tmp/o152; rm -rf $O; mkdir -p $O
trap 'tar czf $OUT/out.tgz -C /tmp o152' EXIT
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u; } > $O/machine.txt
B() { local n=$1 f=$2; cmake -S . -B $n -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA_ARCHS=90 "-DCMAKE_CUDA_FLAGS=$f" -DFATTN_BUILD_TESTS=OFF -DFATTN_BUILD_EXAMPLES=OFF > $O/$n.log 2>&1 && cmake --build $n -j 8 --target fattn_bench fattn_cuda >> $O/$n.log 2>&1 || tail -20 $O/$n.log; }
B build "" & B build_n2 -DFATTN_WGMMA_NWG64=2 &
wait
for r in 1 2 3; do
  for b in build build_n2; do
    timeout 60 ./$b/fattn_bench --backend cuda --device 0 --dtype bf16,f16 --seqs 2048,4096 --dims 64 --no-naive --warmup 10 --iters 30 --check-rows 0 --csv $O/${b}_$r.csv > $O/${b}_$r.txt 2>&1; echo "$b $r rc $?" >> $O/summary.txt
  done
  timeout 90 python3 bench/peers_torch.py --dtypes bf16,f16 --seqs 2048,4096 --dims 64 --iters 30 > $O/p_$r.jsonl 2> $O/p_$r.err; echo "p $r rc $?" >> $O/summary.txt
done
grep -v "rc 0" $O/summary.txt
for f in $O/build_[0-9].txt $O/build_n2_*.txt; do echo "== $(basename $f)"; grep -E "^\[" $f | sed 's/  */ /g' | cut -c1-110; done
for f in $O/p_*.jsonl; do echo "== $(basename $f)"; python3 -c "
import json,sys
for l in open('$f'):
    d=json.loads(l)
    if 'ms' in d and d['peer'] in ('torch-cudnn','torch-flash'): print(d['peer'],d['dtype'],d['seq'],d['causal'],round(d['ms'],4))
"; done

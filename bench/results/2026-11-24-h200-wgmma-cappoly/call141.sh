#!/usr/bin/env bash
# Issue 15, session u, call 141: the seq-2048 rows of issue 15's table again against the PyTorch
# peers (cuDNN, FA2), 10 warm-ups and 30 calls for fattn, 30 calls for the peers, twice. Issue 13:
# the softcap's fallback (softcap 1, outside the polynomial's range) at head dim 256 against a
# build without the polynomial, three interleaved rounds (call140 had one run 15% slower in bf16).
set -u
source .devkit/env.sh
O=/tmp/o141; rm -rf $O; mkdir -p $O
trap 'tar czf $OUT/out.tgz -C /tmp o141' EXIT
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u; } > $O/machine.txt
(cmake -S . -B build_p0 -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA_ARCHS=90 -DCMAKE_CUDA_FLAGS=-DFATTN_WGMMA_CAP_POLY=0 -DFATTN_BUILD_TESTS=OFF -DFATTN_BUILD_EXAMPLES=OFF > $O/build_p0.log 2>&1 && cmake --build build_p0 -j 6 --target fattn_bench fattn_cuda >> $O/build_p0.log 2>&1 || tail -20 $O/build_p0.log) &
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA_ARCHS=90 -DFATTN_BUILD_TESTS=OFF -DFATTN_BUILD_EXAMPLES=OFF > $O/build.log 2>&1 && (time cmake --build build -j 10 --target fattn_bench fattn_cuda) >> $O/build.log 2>&1 || tail -30 $O/build.log
wait
W="--backend cuda --device 0 --no-sweep --no-naive --warmup 10 --iters 30 --check-rows 0 --shape 2x16x8192x256c --shape 4x16x4096x256"
for r in 1 2 3; do for b in build build_p0; do for c in 1 50; do for dt in bf16 f16; do
  timeout 60 ./$b/fattn_bench $W --dtype $dt --variant softcap=$c > $O/d256_${b}_${c}_${dt}_$r.txt 2>&1; echo "d256 $b $c $dt $r rc $?" >> $O/summary.txt
done; done; done; done
timeout 60 ./build/fattn_bench $W --dtype bf16,f16 > $O/d256_plain.txt 2>&1
for r in 1 2; do
  timeout 150 ./build/fattn_bench --backend cuda --device 0 --dtype bf16,f16 --seqs 2048,4096 --dims 64,128,256 --no-naive --warmup 10 --iters 30 --check-rows 16 --csv $O/s2048_$r.csv > $O/s2048_$r.txt 2>&1; echo "s2048 $r rc $?" >> $O/summary.txt
  timeout 200 python3 bench/peers_torch.py --dtypes bf16,f16 --seqs 2048,4096 --dims 64,128,256 --iters 30 > $O/peers2048_$r.jsonl 2> $O/peers2048_$r.err; echo "peers2048 $r rc $?" >> $O/summary.txt
done
grep -v "rc 0" $O/summary.txt; grep -h real $O/build.log
for f in $O/d256_*; do echo "$(basename $f): $(grep -hE '^\[' $f | grep -o '[0-9.]* ms' | tr '\n' ' ')"; done

#!/usr/bin/env bash
# Session 2026-11-24k, call 83: issue 16's f32 rows on the GPU host's CPU (16 cores): the lane
# kernel with two row groups per step and 128-row tiles (this commit) against call 82's tree
# (.old = dfcfc29: one group, 64-row tiles) and PyTorch's CPU SDPA, in one call; bf16 (AMX,
# unchanged) and the decode bar again, to see that nothing else moved.
set -u
source .devkit/env.sh
O=/tmp/o83; rm -rf $O; mkdir -p $O
fin() { tar czf $OUT/out.tgz -C $O .; }
trap fin EXIT
{ lscpu | grep -E "Model name|^CPU\(s\)|Thread|Core|Socket"; nproc; date -u; } > $O/machine.txt
for t in new old; do
  src=.; [ $t = old ] && src=.old
  cmake -S $src -B build-$t -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA=OFF -DFATTN_OPENCL=OFF \
    -DFATTN_BUILD_TESTS=OFF -DFATTN_BUILD_EXAMPLES=OFF > $O/build-$t.log 2>&1 &&
    cmake --build build-$t -j16 --target fattn_bench >> $O/build-$t.log 2>&1 || { tail -20 $O/build-$t.log; exit 1; }
done
fb() { local n=$1 t=$2 dt=$3
  timeout 240 ./build-$t/fattn_bench --backend cpu --seqs 512,1024,2048,4096 --dims 64,128 \
    --causal both --dtype $dt --no-naive --iters 5 --warmup 1 --budget 20 --no-stream \
    --csv $O/$n.csv > $O/$n.txt 2>&1
  echo "$n rc $?" >> $O/summary.txt; }
fb fattn_new new f32
timeout 200 python3 bench/peer_cpu_sdpa.py --iters 5 --dtypes f32 > $O/torch.csv 2> $O/torch.err
echo "torch rc $?" >> $O/summary.txt
fb fattn_old old f32
fb fattn_new2 new f32
fb fattn_new_bf16 new bf16
timeout 120 python3 bench/peer_cpu_sdpa.py --iters 5 --dtypes bf16 > $O/torch_bf16.csv 2> $O/torch_bf16.err
echo "torch_bf16 rc $?" >> $O/summary.txt
timeout 120 ./build-new/fattn_bench --backend cpu --decode --batches 1,8 --heads 32:8 --seqs 32768 \
  --dims 128 --dtype bf16,f32 --no-naive --iters 10 --warmup 2 --csv $O/decode_new.csv > $O/decode_new.txt 2>&1
echo "decode_new rc $?" >> $O/summary.txt
cat $O/summary.txt $O/machine.txt
for n in fattn_new fattn_old fattn_new2 fattn_new_bf16; do echo "== $n"; grep -E "^\[" $O/$n.txt | sed 's/^\[[^]]*\] //' | cut -c1-90; done
cat $O/torch.csv $O/torch_bf16.csv
grep -E "^\[|STREAM" $O/decode_new.txt | cut -c1-140

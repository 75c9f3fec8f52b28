#!/usr/bin/env bash
# Session 2026-11-23k, call 82: issue 16 on the GPU host's CPU (16 cores): the AMX bf16 kernel
# and the persistent thread pool (this commit) against the tree before them (.old = bbe92c7:
# lane kernel, threads per call), and PyTorch's CPU SDPA, in one call. Prefill sweep (f32 and
# bf16, d64/d128, seq 512-4096, causal and not; batch * seq = 16384, heads * dim = 2048) and
# the decode bar (bf16 b1 32k GQA 32/8 d128 against the STREAM copy).
set -u
source .devkit/env.sh
O=/tmp/o82; rm -rf $O; mkdir -p $O
fin() { tar czf $OUT/out.tgz -C $O .; }
trap fin EXIT
{ lscpu | grep -E "Model name|^CPU\(s\)|Thread|Core|Socket"; grep -o -w "amx_bf16\|amx_tile\|avx512_bf16\|avx512f" /proc/cpuinfo | sort | uniq -c; nproc; date -u; } > $O/machine.txt
for t in new old; do
  src=.; [ $t = old ] && src=.old
  cmake -S $src -B build-$t -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA=OFF -DFATTN_OPENCL=OFF \
    -DFATTN_BUILD_TESTS=OFF -DFATTN_BUILD_EXAMPLES=OFF > $O/build-$t.log 2>&1 &&
    cmake --build build-$t -j16 --target fattn_bench >> $O/build-$t.log 2>&1 || { tail -20 $O/build-$t.log; exit 1; }
done
fb() { local n=$1 t=$2; shift 2
  timeout 240 env "$@" ./build-$t/fattn_bench --backend cpu --seqs 512,1024,2048,4096 --dims 64,128 \
    --causal both --dtype f32,bf16 --no-naive --iters 5 --warmup 1 --budget 20 --no-stream \
    --csv $O/$n.csv > $O/$n.txt 2>&1
  echo "$n rc $?" >> $O/summary.txt; }
dec() { local n=$1 t=$2
  timeout 120 ./build-$t/fattn_bench --backend cpu --decode --batches 1,8 --heads 32:8 --seqs 32768 \
    --dims 128 --dtype bf16,f32 --no-naive --iters 10 --warmup 2 --csv $O/$n.csv > $O/$n.txt 2>&1
  echo "$n rc $?" >> $O/summary.txt; }
fb fattn_new new FATTN_CPU_ISA=auto
timeout 240 python3 bench/peer_cpu_sdpa.py --iters 5 > $O/torch.csv 2> $O/torch.err
echo "torch rc $?" >> $O/summary.txt
fb fattn_old old FATTN_CPU_ISA=auto
dec decode_new new
dec decode_old old
dec decode_new2 new
cat $O/summary.txt $O/machine.txt
for n in fattn_new fattn_old; do echo "== $n"; grep -E "^\[" $O/$n.txt | sed 's/^\[[^]]*\] //' | cut -c1-100; done
cat $O/torch.csv
for n in decode_new decode_old decode_new2; do echo "== $n"; grep -E "^\[|STREAM|stream" $O/$n.txt | cut -c1-140; done

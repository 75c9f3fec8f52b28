#!/usr/bin/env bash
# Session 2026-11-23j, call 81: issue 16's prefill bar on the GPU host's CPU (16 cores): fattn's
# CPU backend (the AVX-512 lane kernel, and FATTN_CPU_ISA=avx2, the kernels before it) against
# PyTorch's CPU SDPA on the same shapes (f32 and bf16, d64 and d128, seq 512-4096, causal and
# not; batch * seq = 16384, heads * dim = 2048), in one call.
set -u
source .devkit/env.sh
O=/tmp/o81; rm -rf $O; mkdir -p $O
fin() { tar czf $OUT/out.tgz -C $O .; }
trap fin EXIT
{ lscpu | grep -E "Model name|^CPU\(s\)|Flags" | cut -c1-200; nproc; date -u; } > $O/machine.txt
cmake -S . -B build-cpu -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA=OFF -DFATTN_OPENCL=OFF \
  -DFATTN_BUILD_TESTS=OFF -DFATTN_BUILD_EXAMPLES=OFF > $O/build.log 2>&1 &&
  cmake --build build-cpu -j16 --target fattn_bench >> $O/build.log 2>&1 || { tail -20 $O/build.log; exit 1; }
fb() { local n=$1; shift
  timeout 200 env "$@" ./build-cpu/fattn_bench --backend cpu --seqs 512,1024,2048,4096 --dims 64,128 \
    --causal both --dtype f32,bf16 --no-naive --iters 5 --warmup 1 --budget 20 --no-stream \
    --csv $O/$n.csv > $O/$n.txt 2>&1
  echo "$n rc $?" >> $O/summary.txt; }
fb fattn_avx512 FATTN_CPU_ISA=auto
timeout 240 python3 bench/peer_cpu_sdpa.py --iters 5 > $O/torch.csv 2> $O/torch.err
echo "torch rc $?" >> $O/summary.txt
fb fattn_avx2 FATTN_CPU_ISA=avx2
cat $O/summary.txt; grep -E "^\[" $O/fattn_avx512.txt | sed 's/^\[[^]]*\] //' | cut -c1-100; cat $O/torch.csv

#!/usr/bin/env bash
# Session 2026-11-23g, call 63: issue 14's comparison at 5bc739c (OpenCL matrix path, fattn CUDA, PyTorch SDPA; f16/bf16, d64/d128, seq 2048-16384, causal both) as JSON for compare.py's table and charts.
set -u
source .devkit/env.sh
R=$OUT; O=/tmp/o63; rm -rf $O; mkdir -p $O
fin() { tar czf $R/out.tgz -C $O .; }
trap fin EXIT
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $O/machine.txt; date -u >> $O/machine.txt
cd .wtc
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA_ARCHS=90 "-DFATTN_CUDA_HEAD_DIMS=64;128" -DFATTN_BUILD_TESTS=OFF -DFATTN_BUILD_EXAMPLES=OFF > $O/build.log 2>&1 && cmake --build build -j 16 --target fattn_bench fattn_opencl fattn_cuda >> $O/build.log 2>&1 || tail -20 $O/build.log
export FATTN_OPENCL_DEVICE=NVIDIA
C="--device 0 --no-naive --iters 10 --check-rows 1 --seqs 2048,4096,8192,16384 --dtype f16,bf16 --dims 64,128 --causal both"
timeout 120 ./build/fattn_bench --backend opencl $C --json $O/cmp_opencl.json > $O/cmp_opencl.txt 2>&1; echo "cmp opencl rc $?" >> $O/summary.txt
timeout 120 ./build/fattn_bench --backend cuda $C --json $O/cmp_cuda.json > $O/cmp_cuda.txt 2>&1; echo "cmp cuda rc $?" >> $O/summary.txt
timeout 150 python3 bench/peers_torch.py --seqs 2048,4096,8192,16384 --dims 64,128 --dtypes f16,bf16 > $O/peers.jsonl 2> $O/peers.err; echo "peers rc $?" >> $O/summary.txt
cat $O/summary.txt

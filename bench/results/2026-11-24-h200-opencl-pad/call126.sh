#!/usr/bin/env bash
# Session 2026-11-24s, call 126: the padded table (issue 14's comparison). OpenCL matrix path against
# .old (f2806e6, this session's start: swizzled shapes), fattn CUDA mma.sync (FATTN_CUDA_KERNEL=mma),
# fattn CUDA's default (wgmma on the H200) and PyTorch's FlashAttention-2, same call: f16/bf16,
# d64/d128, seq 2048-16384, causal and not; d32/d256 f16; TF32 and the scalar f32 kernel.
set -u
source .devkit/env.sh
O=/tmp/o126; rm -rf $O; mkdir -p $O
fin() { tar czf $OUT/out.tgz -C $O .; }
trap fin EXIT
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $O/machine.txt; date -u >> $O/machine.txt
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA_ARCHS=90 "-DFATTN_CUDA_HEAD_DIMS=32;64;128;256" -DFATTN_BUILD_TESTS=OFF -DFATTN_BUILD_EXAMPLES=OFF > $O/build.log 2>&1 && cmake --build build -j 16 --target fattn_bench fattn_opencl fattn_cuda >> $O/build.log 2>&1 || tail -20 $O/build.log
(cd .old && cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA=OFF -DFATTN_BUILD_TESTS=OFF -DFATTN_BUILD_EXAMPLES=OFF > $O/build_old.log 2>&1 && cmake --build build -j 16 --target fattn_bench fattn_opencl >> $O/build_old.log 2>&1) || tail -20 $O/build_old.log
export FATTN_OPENCL_DEVICE=NVIDIA
C="--device 0 --no-naive --iters 10 --check-rows 1 --fail-above 0.05 --seqs 2048,4096,8192,16384 --dtype f16,bf16 --dims 64,128 --causal both"
timeout 120 ./build/fattn_bench --backend opencl $C --json $O/cmp_opencl.json > $O/cmp_opencl.txt 2>&1; echo "cmp opencl rc $?" >> $O/summary.txt
timeout 120 .old/build/fattn_bench --backend opencl $C --json $O/cmp_old.json > $O/cmp_old.txt 2>&1; echo "cmp old rc $?" >> $O/summary.txt
FATTN_CUDA_KERNEL=mma timeout 120 ./build/fattn_bench --backend cuda $C --json $O/cmp_cuda.json > $O/cmp_cuda.txt 2>&1; echo "cmp cuda rc $?" >> $O/summary.txt
timeout 120 ./build/fattn_bench --backend cuda $C --json $O/cmp_cuda_auto.json > $O/cmp_cuda_auto.txt 2>&1; echo "cmp cuda auto rc $?" >> $O/summary.txt
timeout 150 python3 bench/peers_torch.py --seqs 2048,4096,8192,16384 --dims 64,128 --dtypes f16,bf16 > $O/peers.jsonl 2> $O/peers.err; echo "peers rc $?" >> $O/summary.txt
E="--device 0 --no-naive --iters 10 --check-rows 1 --fail-above 0.05 --seqs 4096,16384 --causal both"
timeout 90 ./build/fattn_bench --backend opencl $E --dtype f16 --dims 32,256 > $O/ext_new.txt 2>&1; echo "ext new rc $?" >> $O/summary.txt
timeout 90 .old/build/fattn_bench --backend opencl $E --dtype f16 --dims 32,256 > $O/ext_old.txt 2>&1; echo "ext old rc $?" >> $O/summary.txt
FATTN_CUDA_KERNEL=mma timeout 90 ./build/fattn_bench --backend cuda $E --dtype f16 --dims 32,256 > $O/ext_cuda.txt 2>&1; echo "ext cuda rc $?" >> $O/summary.txt
timeout 120 ./build/fattn_bench --backend opencl $E --dtype f32 --tf32 --dims 32,64,128,256 > $O/tf32_new.txt 2>&1; echo "tf32 new rc $?" >> $O/summary.txt
timeout 120 .old/build/fattn_bench --backend opencl $E --dtype f32 --tf32 --dims 32,64,128,256 > $O/tf32_old.txt 2>&1; echo "tf32 old rc $?" >> $O/summary.txt
timeout 120 ./build/fattn_bench --backend opencl $E --dtype f32 --dims 32,64,128,256 > $O/f32_scalar.txt 2>&1; echo "f32 scalar rc $?" >> $O/summary.txt
python3 bench/compare.py $O/cmp_opencl.json $O/cmp_cuda.json $O/peers.jsonl --out $O/chart > $O/compare.log 2>&1; echo "compare rc $?" >> $O/summary.txt
cat $O/summary.txt
for f in $O/cmp_opencl.txt $O/cmp_old.txt $O/cmp_cuda.txt $O/cmp_cuda_auto.txt $O/ext_*.txt $O/tf32_*.txt $O/f32_scalar.txt; do echo "== $f"; grep -E "^\[" $f | cut -c15-100; done
grep -c torch-flash $O/peers.jsonl

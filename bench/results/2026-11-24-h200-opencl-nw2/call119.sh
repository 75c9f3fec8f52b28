#!/usr/bin/env bash
# Session 2026-11-24r, call 119: with the kernel built for aligned operands (VEC), registers and a
# shape sweep (explicit FATTN_OPENCL_MATRIX_TUNE shapes) at d64/d128/d256 f16 and TF32 d128/d256;
# .old (e746a34, this session's start: 48 KiB table, runtime vec) and CUDA mma.sync in the same call.
set -u
source .devkit/env.sh
O=/tmp/o119; rm -rf $O; mkdir -p $O
fin() { tar czf $OUT/out.tgz -C $O .; }
trap fin EXIT
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $O/machine.txt; date -u >> $O/machine.txt; git rev-parse HEAD >> $O/machine.txt
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA_ARCHS=90 "-DFATTN_CUDA_HEAD_DIMS=64;128;256" -DFATTN_BUILD_TESTS=OFF -DFATTN_BUILD_EXAMPLES=OFF > $O/build.log 2>&1 && cmake --build build -j 16 --target fattn_bench fattn_opencl fattn_cuda >> $O/build.log 2>&1 || tail -20 $O/build.log
(cd .old && cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA=OFF -DFATTN_BUILD_TESTS=OFF -DFATTN_BUILD_EXAMPLES=OFF > $O/build_old.log 2>&1 && cmake --build build -j 16 --target fattn_bench fattn_opencl >> $O/build_old.log 2>&1) || tail -20 $O/build_old.log
export FATTN_OPENCL_DEVICE=NVIDIA
gcc -std=c11 -O1 -o /tmp/regs_sweep bench/results/2026-11-23-h200-opencl-matrix/regs_sweep2.c -lOpenCL
shp() { local t=$1 d=$2 bm=128 bn=64 nw=4 qreg=0 stages=2 fold=1
  for kv in ${t//,/ }; do eval "${kv%%=*}=${kv#*=}"; done
  echo "-DDPAD=$d -DBM=$bm -DBN=$bn -DNW=$nw -DQREG=$qreg -DSTAGES=$stages -DFOLD=$fold -DVEC=7"; }
D64="bn=128 bn=96 bn=64,qreg=1 bn=128,qreg=1"
D128="bn=64 bn=64,fold=0 bn=32 bn=48 bn=32,stages=1"
D256="bm=64,bn=32 bm=64,bn=32,qreg=1 bm=64,bn=32,qreg=1,stages=1 bm=64,bn=48"
args=(); for t in $D64; do args+=("$(shp $t 64)"); done; for t in $D128; do args+=("$(shp $t 128)"); done; for t in $D256; do args+=("$(shp $t 256)"); done
timeout 200 /tmp/regs_sweep kernels_cl "${args[@]}" > $O/regs.txt 2>&1; echo "regs rc $?" >> $O/summary.txt
B="--device 0 --no-naive --iters 10 --check-rows 1 --fail-above 0.05 --seqs 4096,16384 --causal both"
FATTN_CUDA_KERNEL=mma timeout 120 ./build/fattn_bench --backend cuda $B --dtype f16 --dims 64,128,256 > $O/cuda_mma.txt 2>&1; echo "cuda mma rc $?" >> $O/summary.txt
ob() { local n=$1 t=$2; shift 2; FATTN_OPENCL_MATRIX_TUNE=$t timeout 90 ./build/fattn_bench --backend opencl $B "$@" > $O/$n.txt 2>&1; echo "$n [$t] rc $?" >> $O/summary.txt; }
timeout 120 .old/build/fattn_bench --backend opencl $B --dtype f16 --dims 64,128,256 > $O/old.txt 2>&1; echo "old rc $?" >> $O/summary.txt
i=0; for t in $D64; do i=$((i+1)); ob d64_$i "$(echo bm=128,nw=4,qreg=0,stages=2,fold=1,$t)" --dtype f16 --dims 64; done
i=0; for t in $D128; do i=$((i+1)); ob d128_$i "$(echo bm=128,nw=4,qreg=0,stages=2,fold=1,$t)" --dtype f16 --dims 128; done
i=0; for t in $D256; do i=$((i+1)); ob d256_$i "$(echo nw=4,qreg=0,stages=2,fold=1,$t)" --dtype f16 --dims 256; done
ob tf128_1 bm=64,bn=32,nw=4,qreg=0,stages=2,fold=1 --dtype f32 --tf32 --dims 128
ob tf128_2 bm=64,bn=16,nw=4,qreg=0,stages=2,fold=1 --dtype f32 --tf32 --dims 128
ob tf128_3 bm=64,bn=16,nw=4,qreg=0,stages=1,fold=1 --dtype f32 --tf32 --dims 128
ob tf256_1 bm=64,bn=16,nw=4,qreg=0,stages=1,fold=1 --dtype f32 --tf32 --dims 256
ob tf256_2 bm=64,bn=32,nw=4,qreg=0,stages=1,fold=1 --dtype f32 --tf32 --dims 256
timeout 120 .old/build/fattn_bench --backend opencl $B --dtype f32 --tf32 --dims 128,256 > $O/old_tf32.txt 2>&1; echo "old tf32 rc $?" >> $O/summary.txt
FATTN_CUDA_KERNEL=mma timeout 120 ./build/fattn_bench --backend cuda $B --dtype f16 --dims 64,128,256 > $O/cuda_mma2.txt 2>&1; echo "cuda mma again rc $?" >> $O/summary.txt
cat $O/summary.txt
grep -E "===|registers|spill" $O/regs.txt | paste - - - | sed 's/ptxas[ a-z.:]*//g; s/-DNW=4 //; s/-DVEC=7 //; s/stack frame, //' | cut -c10-190
for f in $O/cuda_mma.txt $O/old.txt $O/d*.txt $O/old_tf32.txt $O/tf*.txt; do echo "== $f"; grep -E "^\[" $f | cut -c15-100; done

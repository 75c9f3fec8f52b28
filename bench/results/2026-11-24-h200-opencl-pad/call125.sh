#!/usr/bin/env bash
# Session 2026-11-24s, call 125: padded rows with the fragment base pinned (mx_pin) per sweep of loads, so the
# addresses are base + immediate rather than hoisted registers. Registers and spills,
# PTX of d128's 128 x 64 double-buffered shape, and a sweep of padded shapes
# (FATTN_OPENCL_MATRIX_TUNE) against the table (swizzled), fattn CUDA mma.sync, same call.
set -u
source .devkit/env.sh
O=/tmp/o125; rm -rf $O; mkdir -p $O
fin() { tar czf $OUT/out.tgz -C $O .; }
trap fin EXIT
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $O/machine.txt; date -u >> $O/machine.txt
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA_ARCHS=90 "-DFATTN_CUDA_HEAD_DIMS=64;128;256" -DFATTN_BUILD_TESTS=OFF -DFATTN_BUILD_EXAMPLES=OFF > $O/build.log 2>&1 && cmake --build build -j 16 --target fattn_bench fattn_opencl fattn_cuda >> $O/build.log 2>&1 || tail -20 $O/build.log
export FATTN_OPENCL_DEVICE=NVIDIA
R=bench/results/2026-11-23-h200-opencl-matrix
gcc -std=c11 -O1 -o /tmp/regs_sweep $R/regs_sweep2.c -lOpenCL
gcc -std=c11 -O1 -o /tmp/dump_ptx $R/dump_ptx.c -lOpenCL
F="storage.cl ragged.cl variants.cl mma_common.cl mma_nv.cl mma_nv_tile.cl flash_mma.cl"
/tmp/dump_ptx $O/d128_64x2_pin_vec.ptx kernels_cl "-cl-std=CL1.2 -DDTYPE=1 -DDPAD=128 -DBM=128 -DBN=64 -DNW=4 -DQREG=0 -DSTAGES=2 -DFOLD=1 -DPADL=1 -DVEC=7" $F 2> $O/e1.txt; echo "ptx rc $?" >> $O/summary.txt
shp() { local t=$1 d=$2 bm=128 bn=64 nw=4 qreg=0 stages=2 fold=1 pad=1 vec=1
  for kv in ${t//,/ }; do eval "${kv%%=*}=${kv#*=}"; done
  echo "-DDPAD=$d -DBM=$bm -DBN=$bn -DNW=$nw -DQREG=$qreg -DSTAGES=$stages -DFOLD=$fold -DPADL=$pad$([ $vec = 1 ] && echo ' -DVEC=7')"; }
RS="d=128,bn=32,stages=1,pad=0,vec=0 d=128,bn=32,stages=1 d=128,bn=64 d=128,bn=64,vec=0 d=128,bn=64,fold=0 d=128,bn=32 d=128,bn=64,stages=1 d=128,bn=96 d=128,bn=128,stages=1 d=128,qreg=1,bn=32 d=128,qreg=1,bn=64,stages=1 d=64,bn=96 d=64,bn=96,vec=0 d=64,bn=128 d=64,qreg=1,bn=64 d=256,bm=64,bn=32 d=256,bm=64,bn=64 d=256,bm=64,bn=64,stages=1"
args=(); for t in $RS; do d=${t#d=}; d=${d%%,*}; args+=("$(shp ${t#d=*,} $d)"); done
timeout 150 /tmp/regs_sweep kernels_cl "${args[@]}" > $O/regs.txt 2>&1; echo "regs rc $?" >> $O/summary.txt
B="--device 0 --no-naive --iters 10 --check-rows 1 --fail-above 0.05 --seqs 4096,16384 --causal both --dtype f16"
ob() { local n=$1 t=$2; shift 2; FATTN_OPENCL_MATRIX_TUNE=$t timeout 60 ./build/fattn_bench --backend opencl $B "$@" > $O/$n.txt 2>&1; echo "$n [$t] rc $?" >> $O/summary.txt; }
FATTN_CUDA_KERNEL=mma timeout 90 ./build/fattn_bench --backend cuda $B --dims 64,128,256 > $O/cuda_mma.txt 2>&1; echo "cuda mma rc $?" >> $O/summary.txt
timeout 90 ./build/fattn_bench --backend opencl $B --dims 64,128,256 > $O/table.txt 2>&1; echo "table rc $?" >> $O/summary.txt
T1=bm=128,nw=4,qreg=0
ob d128_a "$T1,bn=32,stages=1,fold=1,pad=1,spec=1" --dims 128
ob d128_b "$T1,bn=64,stages=1,fold=1,pad=1,spec=1" --dims 128
ob d128_c "$T1,bn=64,stages=2,fold=1,pad=1,spec=1" --dims 128
ob d128_d "$T1,bn=64,stages=2,fold=1,pad=1,spec=0" --dims 128
ob d128_e "$T1,bn=64,stages=2,fold=0,pad=1,spec=1" --dims 128
ob d128_f "$T1,bn=32,stages=2,fold=1,pad=1,spec=1" --dims 128
ob d128_g "$T1,bn=128,stages=1,fold=1,pad=1,spec=1" --dims 128
ob d128_h "$T1,bn=96,stages=2,fold=1,pad=1,spec=1" --dims 128
ob d64_a "$T1,bn=96,stages=2,fold=1,pad=1,spec=0" --dims 64
ob d64_b "$T1,bn=96,stages=2,fold=1,pad=1,spec=1" --dims 64
ob d64_c "$T1,bn=128,stages=2,fold=1,pad=1,spec=1" --dims 64
ob d256_a "bm=64,nw=4,qreg=0,bn=32,stages=2,fold=1,pad=1,spec=1" --dims 256
ob d256_b "bm=64,nw=4,qreg=0,bn=64,stages=2,fold=1,pad=1,spec=1" --dims 256
ob d256_c "bm=64,nw=4,qreg=0,bn=64,stages=1,fold=1,pad=1,spec=1" --dims 256
ob tf128_a "bm=64,nw=4,qreg=0,bn=16,stages=2,fold=1,pad=1,spec=1" --dims 128 --dtype f32 --tf32
ob tf128_t "bm=64,nw=4,qreg=0,bn=16,stages=2,fold=1,pad=0,spec=1" --dims 128 --dtype f32 --tf32
ob tf256_a "bm=64,nw=4,qreg=0,bn=16,stages=1,fold=1,pad=1,spec=1" --dims 256 --dtype f32 --tf32
FATTN_CUDA_KERNEL=mma timeout 90 ./build/fattn_bench --backend cuda $B --dims 64,128,256 > $O/cuda_mma2.txt 2>&1; echo "cuda mma again rc $?" >> $O/summary.txt
cat $O/summary.txt
grep -E "===|registers|spill" $O/regs.txt | paste - - - | sed 's/ptxas[ a-z.:]*//g; s/-DNW=4 //; s/stack frame, //' | cut -c10-200
for f in $O/cuda_mma.txt $O/table.txt $O/d*.txt $O/cuda_mma2.txt; do echo "== $f"; grep -E "^\[" $f | cut -c15-100; done

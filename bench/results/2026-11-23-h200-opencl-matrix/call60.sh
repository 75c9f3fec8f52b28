#!/usr/bin/env bash
# Session 2026-11-23g, call 60: d128 f16 shapes with Q in registers and 16/32-key tiles (ptxas counts + times); TF32 d128 on 2 warps.
set -u
source .devkit/env.sh
R=$OUT; O=/tmp/o60; rm -rf $O; mkdir -p $O
fin() { tar czf $R/out.tgz -C $O .; }
trap fin EXIT
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $O/machine.txt; date -u >> $O/machine.txt
cd .wtc
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA=OFF -DFATTN_BUILD_TESTS=OFF -DFATTN_BUILD_EXAMPLES=OFF > $O/build.log 2>&1 && cmake --build build -j 16 --target fattn_bench fattn_opencl >> $O/build.log 2>&1 || tail -20 $O/build.log
export FATTN_OPENCL_DEVICE=NVIDIA
gcc -std=c11 -O1 -o /tmp/regs_sweep ../.devkit/regs_sweep2.c -lOpenCL
S="x bm=128,bn=16,qreg=1,stages=2 bm=128,bn=16,qreg=1,stages=1 bm=128,bn=32,qreg=1,stages=2 bm=128,bn=32,qreg=1,stages=1 bm=128,bn=16,nw=8,qreg=1,stages=2 bm=128,bn=32,nw=8,qreg=1,stages=2"
shp() { local t=$1 bm=128 bn=32 nw=4 qreg=0 stages=1 fold=1
  [ "$t" = x ] || for kv in ${t//,/ }; do eval "${kv%%=*}=${kv#*=}"; done
  echo "-DDPAD=128 -DBM=$bm -DBN=$bn -DNW=$nw -DQREG=$qreg -DSTAGES=$stages -DFOLD=$fold"; }
args=(); for t in $S; do args+=("$(shp $t)"); done
timeout 200 /tmp/regs_sweep kernels_cl "${args[@]}" > $O/regs.txt 2>&1; echo "regs rc $?" >> $O/summary.txt
B="--backend opencl --device 0 --no-naive --iters 10 --check-rows 1 --fail-above 0.05 --seqs 4096,16384 --dims 128 --causal both"
i=0; for t in $S; do i=$((i+1)); [ $t = x ] && t=; FATTN_OPENCL_MATRIX_TUNE=$t timeout 60 ./build/fattn_bench $B --dtype f16 > $O/b128_$i.txt 2>&1; echo "d128 $i [$t] rc $?" >> $O/summary.txt; done
for t in x bm=64,bn=16,nw=2,qreg=0,stages=1,fold=1; do [ $t = x ] && t=; FATTN_OPENCL_MATRIX_TUNE=$t timeout 60 ./build/fattn_bench $B --dtype f32 --tf32 > $O/t128_${t:-table}.txt 2>&1; echo "tf32 [$t] rc $?" >> $O/summary.txt; done
cat $O/summary.txt
grep -E "===|registers|spill" $O/regs.txt | paste - - - | cut -c1-220
for f in $O/b128_*.txt $O/t128_*.txt; do echo "== $f"; grep -E "^\[" $f | cut -c15-130; done

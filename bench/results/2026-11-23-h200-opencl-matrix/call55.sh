#!/usr/bin/env bash
# Session 2026-11-23e, call 7: d32 shapes (FATTN_OPENCL_MATRIX_TUNE) at HEAD vs base af66f7d's table shape, same call; registers.
set -u
source .devkit/env.sh
R=$OUT; O=/tmp/o55; rm -rf $O; mkdir -p $O
fin() { tar czf $R/out.tgz -C $O .; }
trap fin EXIT
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $O/machine.txt; date -u >> $O/machine.txt
(cd .base && cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA=OFF -DFATTN_BUILD_TESTS=OFF -DFATTN_BUILD_EXAMPLES=OFF > $O/build_base.log 2>&1 && cmake --build build -j 6 --target fattn_bench fattn_opencl >> $O/build_base.log 2>&1) &
cd .wtc
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA=OFF -DFATTN_BUILD_TESTS=OFF -DFATTN_BUILD_EXAMPLES=OFF > $O/build.log 2>&1 && cmake --build build -j 10 --target fattn_bench fattn_opencl >> $O/build.log 2>&1 || tail -20 $O/build.log
wait
gcc -std=c11 -O1 -o /tmp/regs_sweep2 ../.devkit/regs_sweep2.c -lOpenCL 2>/dev/null
T="x bm=64,bn=64,nw=4,qreg=1,stages=2 bm=64,bn=128,nw=4,qreg=1,stages=2 bm=128,bn=64,nw=8,qreg=1,stages=2 bm=128,bn=128,nw=8,qreg=1,stages=2 bm=128,bn=128,nw=4,qreg=1,stages=2 bm=64,bn=64,nw=2,qreg=1,stages=2"
args=(); for t in $T; do bm=128 bn=64 nw=4 qreg=1 stages=2; [ $t = x ] || for kv in ${t//,/ }; do eval "${kv%%=*}=${kv#*=}"; done; args+=("-DDPAD=32 -DBM=$bm -DBN=$bn -DNW=$nw -DQREG=$qreg -DSTAGES=$stages -DFOLD=1"); done
timeout 100 /tmp/regs_sweep2 kernels_cl "${args[@]}" > $O/regs.txt 2>&1
export FATTN_OPENCL_DEVICE=NVIDIA
B="--no-naive --iters 20 --check-rows 1 --fail-above 0.05 --seqs 4096,16384 --dtype f16,bf16 --dims 32"
timeout 100 ../.base/build/fattn_bench --backend opencl --device 0 $B > $O/b_base.txt 2>&1; echo "base rc $?" >> $O/summary.txt
i=0; for t in $T; do i=$((i+1)); [ $t = x ] && t=; FATTN_OPENCL_MATRIX_TUNE=$t timeout 100 ./build/fattn_bench --backend opencl --device 0 $B > $O/b_$i.txt 2>&1; echo "$i [$t] rc $?" >> $O/summary.txt; done
cat $O/summary.txt
grep -E "===|registers|spill" $O/regs.txt | paste - - - | cut -c1-230
for f in $O/b_*.txt; do echo "== $f"; grep -E "^\[" $f | awk '{print $5,$9,$10,$11,$12,$13}'; done

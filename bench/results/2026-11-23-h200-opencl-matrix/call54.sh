#!/usr/bin/env bash
# Session 2026-11-23e, call 6: d32 register pressure (168 regs = 3 groups/SM before the split, 174 = 2 after): variants of the kernel sources (FATTN_KERNEL_DIR) and -cl-nv-maxrregcount, regs and speed, base af66f7d in the same call.
set -u
source .devkit/env.sh
R=$OUT; O=/tmp/o54; rm -rf $O; mkdir -p $O
fin() { tar czf $R/out.tgz -C $O .; }
trap fin EXIT
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $O/machine.txt; date -u >> $O/machine.txt
(cd .base && cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA=OFF -DFATTN_BUILD_TESTS=OFF -DFATTN_BUILD_EXAMPLES=OFF > $O/build_base.log 2>&1 && cmake --build build -j 6 --target fattn_bench fattn_opencl >> $O/build_base.log 2>&1) &
cd .wtc
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA=OFF -DFATTN_BUILD_TESTS=OFF -DFATTN_BUILD_EXAMPLES=OFF > $O/build.log 2>&1 && cmake --build build -j 10 --target fattn_bench fattn_opencl >> $O/build.log 2>&1 || tail -20 $O/build.log
wait
gcc -std=c11 -O1 -o /tmp/regs_sweep2 ../.devkit/regs_sweep2.c -lOpenCL 2>/dev/null
S32="-DDPAD=32 -DBM=128 -DBN=64 -DNW=4 -DQREG=1 -DSTAGES=2 -DFOLD=1"
S256="-DDPAD=256 -DBM=64 -DBN=32 -DNW=4 -DQREG=1 -DSTAGES=1 -DFOLD=1"
for v in kernels_cl var_a var_b; do echo "== $v" >> $O/regs.txt; /tmp/regs_sweep2 $v "$S32" "$S32 -cl-nv-maxrregcount=168" "$S256" >> $O/regs.txt 2>&1; done
export FATTN_OPENCL_DEVICE=NVIDIA
B="--no-naive --iters 20 --check-rows 1 --fail-above 0.05 --seqs 4096,16384 --dtype f16"
run() { local n=$1 d=$2; shift 2; timeout 100 env "$@" ./build/fattn_bench --backend opencl --device 0 $B --dims $d > $O/b_$n.txt 2>&1; echo "$n rc $?" >> $O/summary.txt; }
timeout 100 ../.base/build/fattn_bench --backend opencl --device 0 $B --dims 32,64,128,256 > $O/b_base.txt 2>&1; echo "base rc $?" >> $O/summary.txt
run head 32,64,128,256 X=1
run var_a 32,64,128,256 FATTN_KERNEL_DIR=$PWD/var_a
run var_b 32,64,128,256 FATTN_KERNEL_DIR=$PWD/var_b
run head_r168 32 FATTN_OPENCL_OPTIONS=-cl-nv-maxrregcount=168
run var_a_r168 32 FATTN_KERNEL_DIR=$PWD/var_a FATTN_OPENCL_OPTIONS=-cl-nv-maxrregcount=168
timeout 100 ../.base/build/fattn_bench --backend opencl --device 0 $B --dims 32,64,128,256 > $O/b_base2.txt 2>&1; echo "base2 rc $?" >> $O/summary.txt
cat $O/summary.txt
grep -E "==|===|registers|spill" $O/regs.txt | cut -c1-160
for f in $O/b_*.txt; do echo "== $f"; grep -E "^\[" $f | awk '{print $9,$10,$11,$12,$13}'; done

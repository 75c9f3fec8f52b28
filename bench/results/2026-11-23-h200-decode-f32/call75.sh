#!/usr/bin/env bash
# Session 2026-11-23i, call 75: where batch 1's fixed cost goes, for the next step (the combine
# folded into the decode kernel): combine_cost (fattn_combine alone on the batch-1 workspace
# shape, both backends), launch_cost again, and whether nsys sees NVIDIA OpenCL's kernels (per-
# kernel GPU times of the decode and the combine).
set -u
source .devkit/env.sh
O=/tmp/o75; rm -rf $O; mkdir -p $O
fin() { tar czf $OUT/out.tgz -C $O .; }
trap fin EXIT
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u; } > $O/machine.txt
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA_ARCHS=90 > $O/build.log 2>&1 &&
  cmake --build build -j16 >> $O/build.log 2>&1 || { tail -30 $O/build.log; exit 1; }
export FATTN_OPENCL_DEVICE=NVIDIA
d=bench/results/2026-11-23-h200-decode-f32
cc -O2 -Iinclude $d/combine_cost.c -Lbuild -lfattn -Wl,-rpath,$PWD/build -o $O/combine_cost &&
cc -O2 -Iinclude $d/launch_cost.c -Lbuild -lfattn -Wl,-rpath,$PWD/build -o $O/launch_cost || exit 1
for r in 1 2; do for b in cuda opencl; do
  $O/combine_cost $b 66; $O/combine_cost $b 8; $O/launch_cost $b 32768; done; done 2>&1 | tee $O/cost.txt
if command -v nsys > /dev/null; then
  for b in cuda opencl; do
    timeout 150 nsys profile -t cuda,osrt -o $O/ns_$b -f true $O/launch_cost $b 32768 > $O/ns_$b.log 2>&1
    timeout 100 nsys stats -r cuda_gpu_kern_sum $O/ns_$b.nsys-rep > $O/ns_${b}_kern.txt 2>&1
    rm -f $O/ns_$b.nsys-rep $O/ns_$b.sqlite
  done
  head -30 $O/ns_*_kern.txt
else
  echo "no nsys" | tee $O/ns.txt
fi

#!/usr/bin/env bash
# Session 2026-11-24r, call 116: does NVIDIA's OpenCL give a group more than 48 KiB of local memory
# (dynamic __local argument, static array)? And the PTX of the matrix kernel's table shapes (d64, d128 f16).
set -u
source .devkit/env.sh
O=/tmp/o116; rm -rf $O; mkdir -p $O
fin() { tar czf $OUT/out.tgz -C $O .; }
trap fin EXIT
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $O/machine.txt; date -u >> $O/machine.txt; git rev-parse HEAD >> $O/machine.txt
R=bench/results/2026-11-24-h200-opencl-nw2
gcc -std=c11 -O1 -o /tmp/bsp $R/bigshared_probe.c -lOpenCL && timeout 60 /tmp/bsp > $O/bigshared.txt 2>&1; echo "probe rc $?" >> $O/summary.txt
gcc -std=c11 -O1 -o /tmp/dump_ptx bench/results/2026-11-23-h200-opencl-matrix/dump_ptx.c -lOpenCL
F="storage.cl ragged.cl variants.cl mma_common.cl mma_nv.cl mma_nv_tile.cl flash_mma.cl"
/tmp/dump_ptx $O/d64.ptx kernels_cl "-cl-std=CL1.2 -DDTYPE=1 -DDPAD=64 -DBM=128 -DBN=64 -DNW=4 -DQREG=1 -DSTAGES=2 -DFOLD=1" $F 2> $O/d64.err; echo "ptx d64 rc $?" >> $O/summary.txt
/tmp/dump_ptx $O/d128.ptx kernels_cl "-cl-std=CL1.2 -DDTYPE=1 -DDPAD=128 -DBM=128 -DBN=32 -DNW=4 -DQREG=0 -DSTAGES=1 -DFOLD=1" $F 2> $O/d128.err; echo "ptx d128 rc $?" >> $O/summary.txt
/tmp/dump_ptx $O/d64_bn128.ptx kernels_cl "-cl-std=CL1.2 -DDTYPE=1 -DDPAD=64 -DBM=128 -DBN=128 -DNW=4 -DQREG=0 -DSTAGES=1 -DFOLD=1" $F 2> $O/d64b.err; echo "ptx d64 bn128 rc $?" >> $O/summary.txt
cat $O/summary.txt $O/bigshared.txt

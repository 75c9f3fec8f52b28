#!/usr/bin/env bash
# Session 2026-11-24r, call 122: NVIDIA's PTX of the OpenCL matrix kernel at d128 for the next
# session's register analysis (ptxas and cuobjdump run here too): the table's 128 x 32 single-buffered
# shape and CUDA's 128 x 64 double-buffered design (which spills under NVIDIA's OpenCL compiler).
set -u
source .devkit/env.sh
O=/tmp/o122; rm -rf $O; mkdir -p $O
fin() { tar czf $OUT/out.tgz -C $O .; }
trap fin EXIT
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $O/machine.txt; date -u >> $O/machine.txt
gcc -std=c11 -O1 -o /tmp/dump_ptx bench/results/2026-11-23-h200-opencl-matrix/dump_ptx.c -lOpenCL
F="storage.cl ragged.cl variants.cl mma_common.cl mma_nv.cl mma_nv_tile.cl flash_mma.cl"
/tmp/dump_ptx $O/d128_32x1.ptx kernels_cl "-cl-std=CL1.2 -DDTYPE=1 -DDPAD=128 -DBM=128 -DBN=32 -DNW=4 -DQREG=0 -DSTAGES=1 -DFOLD=1" $F 2> $O/e1.txt; echo "d128 32x1 rc $?" >> $O/summary.txt
/tmp/dump_ptx $O/d128_64x2_vec.ptx kernels_cl "-cl-std=CL1.2 -DDTYPE=1 -DDPAD=128 -DBM=128 -DBN=64 -DNW=4 -DQREG=0 -DSTAGES=2 -DFOLD=0 -DVEC=7" $F 2> $O/e2.txt; echo "d128 64x2 vec rc $?" >> $O/summary.txt
/tmp/dump_ptx $O/d256_32x2_vec.ptx kernels_cl "-cl-std=CL1.2 -DDTYPE=1 -DDPAD=256 -DBM=64 -DBN=32 -DNW=4 -DQREG=0 -DSTAGES=2 -DFOLD=1 -DVEC=7" $F 2> $O/e3.txt; echo "d256 32x2 vec rc $?" >> $O/summary.txt
cat $O/summary.txt; ls -la $O

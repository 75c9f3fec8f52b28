#!/usr/bin/env bash
# Session 2026-11-23e, call 5: PTX of the matrix kernel from NVIDIA's OpenCL, base af66f7d vs HEAD, d32/d64/d128/d256 f16 (for SASS offline).
set -u
source .devkit/env.sh
O=$OUT
gcc -std=c11 -O1 -o /tmp/dump_ptx .devkit/dump_ptx.c -lOpenCL || exit 1
S=("-DDPAD=32 -DBM=128 -DBN=64 -DNW=4 -DQREG=1 -DSTAGES=2 -DFOLD=1" "-DDPAD=64 -DBM=128 -DBN=64 -DNW=4 -DQREG=1 -DSTAGES=2 -DFOLD=1" "-DDPAD=128 -DBM=128 -DBN=32 -DNW=4 -DQREG=0 -DSTAGES=1 -DFOLD=1" "-DDPAD=256 -DBM=64 -DBN=32 -DNW=4 -DQREG=1 -DSTAGES=1 -DFOLD=1")
D=(32 64 128 256)
for i in 0 1 2 3; do
  /tmp/dump_ptx $O/base_d${D[$i]}.ptx .base/kernels_cl "-cl-std=CL1.2 -DDTYPE=1 ${S[$i]}" storage.cl ragged.cl variants.cl mma_nv.cl flash_mma.cl 2> $O/base_d${D[$i]}.err; echo "base d${D[$i]} rc $?"
  /tmp/dump_ptx $O/new_d${D[$i]}.ptx .wtc/kernels_cl "-cl-std=CL1.2 -DDTYPE=1 ${S[$i]}" storage.cl ragged.cl variants.cl mma_common.cl mma_nv.cl mma_nv_tile.cl flash_mma.cl 2> $O/new_d${D[$i]}.err; echo "new d${D[$i]} rc $?"
done
ls -la $O

#!/usr/bin/env bash
# Issue 18, session u, call 146 (run as one command line on nvidia-h200-x2): the build was made on
# the development machine at b01ebab (cmake -DFATTN_CUDA_ARCHS=90 -DFATTN_NCCL_INCLUDE_DIR=<nccl.h
# of pip's nvidia-nccl-cu13> --target cp_bench fattn_cuda) and carried as build-x2/, since the
# session's device time left no room for a build there. NCCL is the machine's (PyTorch's wheel).
source .devkit/env.sh
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FATTN_MODULE_DIR=$PWD/build-x2
ND=$(python3 -c "import nvidia.nccl as n; print(list(n.__path__)[0])" 2>/dev/null)
export LD_LIBRARY_PATH=$ND/lib:$LD_LIBRARY_PATH
{ nvidia-smi --query-gpu=name,driver_version --format=csv; date -u; echo "nccl: $ND"; } > $OUT/gpus.txt 2>&1
nvidia-smi topo -m > $OUT/topo.txt 2>&1
timeout 70 stdbuf -oL ./build-x2/cp_bench --check > $OUT/check.csv 2> $OUT/check.err; echo "check rc $?"
timeout 110 stdbuf -oL ./build-x2/cp_bench --seqs 131072,524288,1048576 --iters 2 --layouts zigzag > $OUT/scale.csv 2> $OUT/scale.err; echo "scale rc $?"
# then, on the same machine: a 1 GiB cuda:0 -> cuda:1 copy with PyTorch (p2p.txt) and nvidia-smi nvlink -s (nvlink.txt)

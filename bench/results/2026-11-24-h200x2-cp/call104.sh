#!/usr/bin/env bash
# Issue 18, one H200: the final step writing the caller's O directly (no
# copy of acc at the end) against the state of call103 (.old, cfae414's
# core), --emulate in the same call, both binaries on the same CUDA module;
# cp_bench --check with a one-rank NCCL communicator.
source .devkit/env.sh
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
O=/tmp/o104; mkdir -p $O
trap 'tar czf $OUT/out.tgz -C /tmp o104' EXIT
ND=$(python3 -c "import nvidia.nccl as n; print(list(n.__path__)[0])" 2>/dev/null)
export LD_LIBRARY_PATH=$ND/lib:$LD_LIBRARY_PATH
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA_ARCHS=90 -DFATTN_BUILD_EXAMPLES=OFF -DFATTN_NCCL_INCLUDE_DIR=$ND/include > $O/cmake.txt 2>&1
cmake --build build -j16 > $O/build.txt 2>&1 || { tail -40 $O/build.txt; exit 1; }
cmake -S .old -B build0 -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA=OFF -DFATTN_OPENCL=OFF -DFATTN_BUILD_EXAMPLES=OFF > $O/cmake0.txt 2>&1
cmake --build build0 -j16 --target cp_bench > $O/build0.txt 2>&1 || { tail -20 $O/build0.txt; exit 1; }
timeout 60 ./build/cp_bench --check > $O/check.csv 2> $O/check.err; echo "check rc $?"; cat $O/check.csv; tail -3 $O/check.err
for round in 1 2; do
  for b in build0 build; do
    FATTN_MODULE_DIR=$PWD/build timeout 120 ./$b/cp_bench --emulate 2,8 --seqs 131072,1048576 --iters 1 --layouts zigzag > $O/emulate_${b}_$round.csv 2> $O/emulate_${b}_$round.err
    echo "$b round $round rc $?"; cat $O/emulate_${b}_$round.csv; tail -2 $O/emulate_${b}_$round.err
  done
done

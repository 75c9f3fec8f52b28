#!/usr/bin/env bash
# Issue 18 on one H200 (the 2-GPU kind was not lent): build with NCCL,
# test_cp on CPU, CUDA and NVIDIA's OpenCL (ranks as several contexts' worth
# of work on one device), memcheck of its CUDA part, cp_bench --check with a
# one-rank NCCL communicator (the NCCL path end to end, no transfers), and
# --emulate: every rank's compute for R = 2, 4, 8 timed on this GPU.
source .devkit/env.sh
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
O=/tmp/o103; mkdir -p $O
trap 'tar czf $OUT/out.tgz -C /tmp o103' EXIT
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > $O/gpus.txt 2>&1
ND=$(python3 -c "import nvidia.nccl as n; print(list(n.__path__)[0])" 2>/dev/null)
echo "nccl dir: $ND" > $O/nccl.txt; ls $ND/include $ND/lib >> $O/nccl.txt 2>&1
ls /usr/local/cuda/include/nccl.h >> $O/nccl.txt 2>&1
INC=""; [ -f "$ND/include/nccl.h" ] && INC="-DFATTN_NCCL_INCLUDE_DIR=$ND/include"
export LD_LIBRARY_PATH=$ND/lib:$LD_LIBRARY_PATH
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA_ARCHS=90 -DFATTN_BUILD_EXAMPLES=OFF $INC > $O/cmake.txt 2>&1
cmake --build build -j16 > $O/build.txt 2>&1 || { tail -40 $O/build.txt; exit 1; }
grep -i "nccl" $O/cmake.txt
export FATTN_OPENCL_DEVICE=NVIDIA
timeout 150 ./build/test_cp > $O/test_cp.txt 2>&1; echo "test_cp rc $?"; grep -E "splits|SKIP|FAIL|PASSED|rror" $O/test_cp.txt | head
FATTN_TEST_BACKENDS=cuda timeout 120 compute-sanitizer --tool memcheck ./build/test_cp > $O/memcheck.txt 2>&1; echo "memcheck rc $?"; grep -E "ERROR SUMMARY|splits|FAIL" $O/memcheck.txt | head
timeout 60 ./build/cp_bench --check > $O/check.csv 2> $O/check.err; echo "check rc $?"; cat $O/check.csv; tail -3 $O/check.err
timeout 240 ./build/cp_bench --emulate 2,4,8 --seqs 131072,524288,1048576 --iters 1 --layouts zigzag,contiguous > $O/emulate.csv 2> $O/emulate.err; echo "emulate rc $?"; cat $O/emulate.csv; tail -3 $O/emulate.err

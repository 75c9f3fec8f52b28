#!/usr/bin/env bash
# Session 2026-11-24r, call 123: the last commit (VEC=7 only for all-aligned operands): NVIDIA OpenCL
# test_matrix, test_conformance, test_ragged, and d64/d256 f16 once more against fattn CUDA mma.sync.
set -u
source .devkit/env.sh
O=/tmp/o123; rm -rf $O; mkdir -p $O
fin() { tar czf $OUT/out.tgz -C $O .; }
trap fin EXIT
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $O/machine.txt; date -u >> $O/machine.txt
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA_ARCHS=90 "-DFATTN_CUDA_HEAD_DIMS=64;256" -DFATTN_BUILD_EXAMPLES=OFF > $O/build.log 2>&1 && cmake --build build -j 16 --target fattn_bench fattn_opencl fattn_cuda test_matrix test_conformance test_ragged >> $O/build.log 2>&1 || tail -20 $O/build.log
export FATTN_OPENCL_DEVICE=NVIDIA
st() { local n=$1 lim=$2; shift 2; timeout $lim "$@" > $O/$n.log 2>&1; echo "$n rc $?" >> $O/summary.txt; }
T="FATTN_TEST_BACKENDS=opencl FATTN_TEST_REQUIRE=opencl,opencl-matrix,opencl-tf32"
st matrix 150 env $T ./build/test_matrix
st conformance 200 env $T ./build/test_conformance
st ragged 150 env $T ./build/test_ragged
E="--device 0 --no-naive --iters 10 --check-rows 1 --seqs 4096,16384 --causal both --dtype f16 --dims 64,256"
timeout 100 ./build/fattn_bench --backend opencl $E > $O/new.txt 2>&1; echo "new rc $?" >> $O/summary.txt
FATTN_CUDA_KERNEL=mma timeout 100 ./build/fattn_bench --backend cuda $E > $O/cuda.txt 2>&1; echo "cuda rc $?" >> $O/summary.txt
cat $O/summary.txt
grep -hE "runs passed|FAILED|ERROR|device 0" $O/*.log | sort | uniq -c | head -20
for f in $O/new.txt $O/cuda.txt; do echo "== $f"; grep -E "^\[" $f | cut -c15-100; done

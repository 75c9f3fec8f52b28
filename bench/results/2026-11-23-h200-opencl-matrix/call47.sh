#!/usr/bin/env bash
# Session 2026-11-23d, call 2: the OpenCL matrix path on the H200: ptxas info, test_matrix (NV), OpenCL suites (matrix path taken for f16/bf16), bench OpenCL matrix vs scalar vs CUDA vs FA2.
set -u
source .devkit/env.sh
R=$OUT; O=/tmp/o47; rm -rf $O; mkdir -p $O
fin() { tar czf $R/out.tgz -C $O .; }
trap fin EXIT
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $O/machine.txt; date -u >> $O/machine.txt
gcc -std=c11 -O1 -o /tmp/regs_cl .devkit/regs_cl.c -lOpenCL && timeout 200 /tmp/regs_cl .wtc/kernels_cl > $O/regs.txt 2>&1; echo "regs rc $?" >> $O/summary.txt
cd .wtc
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA_ARCHS=90 > $O/build.log 2>&1 && cmake --build build -j 14 --target fattn_bench fattn_cuda fattn_opencl test_matrix test_conformance test_variants test_ragged test_special test_append >> $O/build.log 2>&1 || tail -20 $O/build.log
export FATTN_OPENCL_DEVICE=NVIDIA
st() { local n=$1 lim=$2; shift 2; timeout $lim "$@" > $O/$n.log 2>&1; echo "$n rc $?" >> $O/summary.txt; }
st matrix 120 env FATTN_TEST_BACKENDS=opencl FATTN_TEST_REQUIRE=opencl,opencl-matrix ./build/test_matrix
st conf 300 env FATTN_TEST_BACKENDS=opencl FATTN_TEST_REQUIRE=opencl ./build/test_conformance
st variants 300 env FATTN_TEST_BACKENDS=opencl FATTN_TEST_REQUIRE=opencl,opencl-variants ./build/test_variants
st ragged 200 env FATTN_TEST_BACKENDS=opencl FATTN_TEST_REQUIRE=opencl ./build/test_ragged
st special 120 env FATTN_TEST_BACKENDS=opencl FATTN_TEST_REQUIRE=opencl ./build/test_special
st append 120 env FATTN_TEST_BACKENDS=opencl FATTN_TEST_REQUIRE=opencl ./build/test_append
B="--no-naive --iters 10 --check-rows 1 --seqs 2048,4096,8192,16384 --dims 64,128 --dtype f16,bf16"
timeout 200 ./build/fattn_bench --backend opencl --device 0 $B > $O/bench_ocl_matrix.txt 2>&1; echo "bench ocl rc $?" >> $O/summary.txt
timeout 150 ./build/fattn_bench --backend cuda --device 0 $B > $O/bench_cuda.txt 2>&1; echo "bench cuda rc $?" >> $O/summary.txt
FATTN_OPENCL_MATRIX=off timeout 150 ./build/fattn_bench --backend opencl --device 0 --no-naive --iters 5 --check-rows 1 --seqs 4096,16384 --dims 128 --dtype f16 > $O/bench_ocl_scalar.txt 2>&1; echo "bench scalar rc $?" >> $O/summary.txt
timeout 200 python3 bench/peers_torch.py --seqs 2048,4096,8192,16384 --dims 64,128 --dtypes f16,bf16 > $O/peers.jsonl 2> $O/peers.err; echo "peers rc $?" >> $O/summary.txt
cat $O/summary.txt; grep -h "runs passed\|FAILED\|PASSED" $O/*.log | head -30
grep -E "built|FAILED|registers|spill|error" $O/regs.txt | head -40
for f in $O/bench_*.txt; do echo "== $f"; grep -E "^\[|ms" $f | head -40; done
head -c 3000 $O/peers.jsonl

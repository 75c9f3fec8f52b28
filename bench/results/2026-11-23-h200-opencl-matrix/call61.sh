#!/usr/bin/env bash
# Session 2026-11-23g, call 61: the Intel/CDNA commit's shared changes (load_rows with fewer work-items than chunks, the epilogue split by layout, the probe over MT row tiles) on NVIDIA OpenCL: suites, and every bucket against base 75a9d24 in the same call; then issue 14's comparison (OpenCL matrix, fattn CUDA, PyTorch SDPA) as JSON for compare.py's table and charts.
set -u
source .devkit/env.sh
R=$OUT; O=/tmp/o61; rm -rf $O; mkdir -p $O
fin() { tar czf $R/out.tgz -C $O .; }
trap fin EXIT
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $O/machine.txt; date -u >> $O/machine.txt
(cd .base && cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA=OFF -DFATTN_BUILD_TESTS=OFF -DFATTN_BUILD_EXAMPLES=OFF > $O/build_base.log 2>&1 && cmake --build build -j 6 --target fattn_bench fattn_opencl >> $O/build_base.log 2>&1) &
cd .wtc
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA_ARCHS=90 "-DFATTN_CUDA_HEAD_DIMS=64;128" > $O/build.log 2>&1 && cmake --build build -j 10 --target fattn_bench fattn_opencl fattn_cuda test_matrix test_variants test_conformance test_ragged >> $O/build.log 2>&1 || tail -20 $O/build.log
wait
export FATTN_OPENCL_DEVICE=NVIDIA
st() { local n=$1 lim=$2; shift 2; timeout $lim "$@" > $O/$n.log 2>&1; echo "$n rc $?" >> $O/summary.txt; }
st matrix 200 env FATTN_TEST_BACKENDS=opencl FATTN_TEST_REQUIRE=opencl,opencl-matrix,opencl-tf32 ./build/test_matrix
st variants 300 env FATTN_TEST_BACKENDS=opencl FATTN_TEST_REQUIRE=opencl,opencl-variants ./build/test_variants
st conf 300 env FATTN_TEST_BACKENDS=opencl FATTN_TEST_REQUIRE=opencl FATTN_TEST_CASES=seq,causal,GQA,MQA,batch,strides,packed,logits,key,scale,dim ./build/test_conformance
st ragged 200 env FATTN_TEST_BACKENDS=opencl FATTN_TEST_REQUIRE=opencl ./build/test_ragged
B="--backend opencl --device 0 --no-naive --iters 20 --check-rows 1 --fail-above 0.05 --seqs 4096,16384 --dtype f16,bf16 --dims 32,64,128,256"
timeout 150 ./build/fattn_bench $B > $O/b_new.txt 2>&1; echo "new rc $?" >> $O/summary.txt
timeout 150 ../.base/build/fattn_bench $B > $O/b_base.txt 2>&1; echo "base rc $?" >> $O/summary.txt
cat $O/summary.txt; grep -h "runs passed\|FAILED\|PASSED" $O/*.log | sort | uniq -c
paste <(grep -E "^\[" $O/b_new.txt | cut -c15-95) <(grep -E "^\[" $O/b_base.txt | awk '{for(i=1;i<=NF;i++) if($i=="ms") print $(i-1)}')
C="--device 0 --no-naive --iters 10 --check-rows 1 --seqs 2048,4096,8192,16384 --dtype f16,bf16 --dims 64,128 --causal both"
timeout 120 ./build/fattn_bench --backend opencl $C --json $O/cmp_opencl.json > $O/cmp_opencl.txt 2>&1; echo "cmp opencl rc $?" >> $O/summary.txt
timeout 120 ./build/fattn_bench --backend cuda $C --json $O/cmp_cuda.json > $O/cmp_cuda.txt 2>&1; echo "cmp cuda rc $?" >> $O/summary.txt
timeout 150 python3 bench/peers_torch.py --seqs 2048,4096,8192,16384 --dims 64,128 --dtypes f16,bf16 > $O/peers.jsonl 2> $O/peers.err; echo "peers rc $?" >> $O/summary.txt
tail -4 $O/summary.txt

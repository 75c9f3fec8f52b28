#!/usr/bin/env bash
# Session 2026-11-23g, call 62: load_rows back to its own loop where the group covers a row's chunks (the narrow case in a function of its own) and the pair epilogue as before; every bucket against base 75a9d24 in the same call, test_matrix on NVIDIA OpenCL.
set -u
source .devkit/env.sh
R=$OUT; O=/tmp/o62; rm -rf $O; mkdir -p $O
fin() { tar czf $R/out.tgz -C $O .; }
trap fin EXIT
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $O/machine.txt; date -u >> $O/machine.txt
(cd .base && cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA=OFF -DFATTN_BUILD_TESTS=OFF -DFATTN_BUILD_EXAMPLES=OFF > $O/build_base.log 2>&1 && cmake --build build -j 6 --target fattn_bench fattn_opencl >> $O/build_base.log 2>&1) &
cd .wtc
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA=OFF > $O/build.log 2>&1 && cmake --build build -j 10 --target fattn_bench fattn_opencl test_matrix >> $O/build.log 2>&1 || tail -20 $O/build.log
wait
export FATTN_OPENCL_DEVICE=NVIDIA
st() { local n=$1 lim=$2; shift 2; timeout $lim "$@" > $O/$n.log 2>&1; echo "$n rc $?" >> $O/summary.txt; }
st matrix 200 env FATTN_TEST_BACKENDS=opencl FATTN_TEST_REQUIRE=opencl,opencl-matrix,opencl-tf32 ./build/test_matrix
B="--backend opencl --device 0 --no-naive --iters 20 --check-rows 1 --fail-above 0.05 --seqs 4096,16384 --dtype f16 --dims 32,64,128,256 --causal both"
for i in 1 2; do
timeout 100 ./build/fattn_bench $B > $O/b_new$i.txt 2>&1; echo "new$i rc $?" >> $O/summary.txt
timeout 100 ../.base/build/fattn_bench $B > $O/b_base$i.txt 2>&1; echo "base$i rc $?" >> $O/summary.txt
done
cat $O/summary.txt; grep -h "runs passed\|FAILED\|PASSED" $O/*.log | sort | uniq -c
ms() { grep -E "^\[" $1 | awk '{for(i=1;i<=NF;i++) if($i=="ms") print $(i-1)}'; }
paste <(grep -E "^\[" $O/b_new1.txt | cut -c15-80) <(ms $O/b_new1.txt) <(ms $O/b_new2.txt) <(ms $O/b_base1.txt) <(ms $O/b_base2.txt)

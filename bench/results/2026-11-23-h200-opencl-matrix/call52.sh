#!/usr/bin/env bash
# Session 2026-11-23e, call 4: softmax pairs restored (working tree), d32..d256 vs af66f7d in the same call; test_matrix.
set -u
source .devkit/env.sh
R=$OUT; O=/tmp/o52; rm -rf $O; mkdir -p $O
fin() { tar czf $R/out.tgz -C $O .; }
trap fin EXIT
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $O/machine.txt; date -u >> $O/machine.txt
(cd .base && cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA=OFF -DFATTN_BUILD_TESTS=OFF -DFATTN_BUILD_EXAMPLES=OFF > $O/build_base.log 2>&1 && cmake --build build -j 6 --target fattn_bench fattn_opencl >> $O/build_base.log 2>&1) &
cd .wtc
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA=OFF > $O/build.log 2>&1 && cmake --build build -j 10 --target fattn_bench fattn_opencl test_matrix >> $O/build.log 2>&1 || tail -20 $O/build.log
wait
export FATTN_OPENCL_DEVICE=NVIDIA
timeout 200 env FATTN_TEST_BACKENDS=opencl FATTN_TEST_REQUIRE=opencl,opencl-matrix ./build/test_matrix > $O/matrix.log 2>&1; echo "matrix rc $?" >> $O/summary.txt
B="--no-naive --iters 20 --check-rows 1 --seqs 4096,16384 --dims 32,64,128,256 --dtype f16"
for r in 1; do
timeout 100 ./build/fattn_bench --backend opencl --device 0 $B > $O/bench_new_$r.txt 2>&1; echo "new $r rc $?" >> $O/summary.txt
timeout 100 ../.base/build/fattn_bench --backend opencl --device 0 $B > $O/bench_base_$r.txt 2>&1; echo "base $r rc $?" >> $O/summary.txt
done
cat $O/summary.txt; grep -h "runs passed\|FAILED\|PASSED" $O/matrix.log
for f in $O/bench_*.txt; do echo "== $f"; grep -E "^\[" $f | awk '{print $4,$5,$6,$7,$8,$9,$10,$11,$12,$13}'; done

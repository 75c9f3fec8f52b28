#!/usr/bin/env bash
# Session 2026-11-23c, call 1: CUDA variant families (11cf77d): test_variants (CUDA), suites; variant costs (new and base b01c267) vs FlexAttention and SDPA-with-mask; plain prefill before/after.
set -u
source .devkit/env.sh
R=$OUT; O=/tmp/o34; rm -rf $O; mkdir -p $O
fin() { tar czf $R/out.tgz -C $O .; }
trap fin EXIT
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $O/machine.txt; date -u >> $O/machine.txt
(cd .base && cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA_ARCHS=90 -DFATTN_BUILD_TESTS=OFF -DFATTN_BUILD_EXAMPLES=OFF > $O/build_base.log 2>&1 && cmake --build build -j 6 --target fattn_bench fattn_cuda >> $O/build_base.log 2>&1 || tail -20 $O/build_base.log) &
(timeout 300 python3 .wtc/bench/peer_variants.py > $O/peer_variants.txt 2>&1; echo "peers rc $?" >> $O/summary.txt) &
PEER=$!
cd .wtc
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA_ARCHS=90 > $O/build.log 2>&1 && (time cmake --build build -j 10 --target fattn_bench fattn_cuda fattn_opencl test_variants test_conformance test_ragged test_append test_cuda_graph) >> $O/build.log 2>&1 || tail -20 $O/build.log
wait $PEER
wait
st() { local n=$1 lim=$2; shift 2; timeout $lim "$@" > $O/$n.log 2>&1; echo "$n rc $?" >> $O/summary.txt; }
st cu_variants 200 env FATTN_TEST_BACKENDS=cuda FATTN_TEST_REQUIRE=cuda,cuda-variants ./build/test_variants
st cu_ragged 90 env FATTN_TEST_BACKENDS=cuda FATTN_TEST_REQUIRE=cuda ./build/test_ragged
st cu_conf 150 env FATTN_TEST_BACKENDS=cuda FATTN_TEST_REQUIRE=cuda ./build/test_conformance
st cu_append 60 env FATTN_TEST_BACKENDS=cuda FATTN_TEST_REQUIRE=cuda ./build/test_append
st cu_graph 60 env FATTN_TEST_BACKENDS=cuda FATTN_TEST_REQUIRE=cuda ./build/test_cuda_graph
sh="--shape 1x32x8192x128c --shape 1x32x32768x128c"
for t in new base; do
  bin=./build/fattn_bench; [ $t = base ] && bin=../.base/build/fattn_bench
  for v in none window=4096 softcap=50 alibi sinks bias window=4096,softcap=50; do
    va=""; [ $v = none ] || va="--variant $v"
    timeout 90 $bin --backend cuda --device 0 --no-sweep $sh --dtype bf16 --no-naive --iters 10 --check-rows 0 $va > $O/var_${t}_$v.txt 2>&1
    echo "var $t $v rc $?" >> $O/summary.txt
  done
done
P="--seqs 4096,16384 --dims 64,128 --causal both --dtype bf16 --no-naive --iters 10 --check-rows 2"
for t in new base; do
  bin=./build/fattn_bench; [ $t = base ] && bin=../.base/build/fattn_bench
  timeout 100 $bin --backend cuda --device 0 $P > $O/pre_cuda_${t}.txt 2>&1; echo "pre cuda $t rc $?" >> $O/summary.txt
done
cat $O/summary.txt; grep -h "real" $O/build.log; grep -hE "FAILED|PASSED|SKIPPED \]|passed|failed" $O/cu_variants.log | sort | uniq -c | head -20

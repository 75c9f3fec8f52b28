#!/usr/bin/env bash
# Session 2026-11-24n, call 100: at head dim 64 (three consumers, no in-warpgroup overlap), a
# consumer issues no GEMM for key tiles its 64 rows cannot see (causal diagonal, rows past
# seq_q); build0: FATTN_WGMMA_SKIP=0. Forced-wgmma conformance and sanitizers, the d64 sweep on
# both builds with the peers; then test_ragged on OpenCL (a PoCL 5.0 workaround in decode.cl).
set -u
source .devkit/env.sh
O=/tmp/o100; rm -rf $O; mkdir -p $O
fin() { tar czf $OUT/out.tgz -C $O .; }
trap fin EXIT
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u; git log --oneline -1; git status --short; } > $O/machine.txt
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA_ARCHS=90 -DFATTN_BUILD_EXAMPLES=OFF > $O/build.log 2>&1 &&
  cmake --build build -j16 >> $O/build.log 2>&1 || { tail -40 $O/build.log; exit 1; }
echo "built $(date -u +%T)" >> $O/summary.txt
( cmake -S . -B build0 -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA_ARCHS=90 -DFATTN_BUILD_EXAMPLES=OFF \
    -DFATTN_CUDA_HEAD_DIMS="64" -DCMAKE_CUDA_FLAGS=-DFATTN_WGMMA_SKIP=0 > $O/build0.log 2>&1 &&
  cmake --build build0 -j6 --target fattn_cuda >> $O/build0.log 2>&1; echo "build0 rc $? $(date -u +%T)" >> $O/summary.txt ) &
B0=$!
st() { local n=$1 lim=$2; shift 2; timeout $lim "$@" > $O/$n.log 2>&1; echo "$n rc $? $(date -u +%T)" >> $O/summary.txt; }
st conf_wgmma 120 env FATTN_CUDA_KERNEL=wgmma FATTN_TEST_BACKENDS=cuda FATTN_TEST_REQUIRE=cuda FATTN_TEST_DTYPES=f16,bf16 FATTN_TEST_DECLINED_OK=1 ./build/test_conformance
CASES="seq 65 dim 80,causal seq 65,causal sq>sk 129/63,causal sq<sk 63/129,causal tl sq>sk 101/37,causal br sq<sk 37/101,seq 1000 dim 64,causal seq 1000 dim 128"
for t in memcheck racecheck synccheck; do
  st san_$t 120 env FATTN_CUDA_KERNEL=wgmma FATTN_TEST_BACKENDS=cuda FATTN_TEST_DTYPES=bf16 FATTN_TEST_CASES="$CASES" \
    compute-sanitizer --tool $t --error-exitcode 9 ./build/test_conformance
done
FATTN_CUDA_KERNEL=wgmma timeout 60 ./build/fattn_bench --backend cuda --device 0 --no-sweep --dtype bf16,f16 --no-naive --iters 3 \
  --check-rows 64 --shape 4x40x600x64c --shape 2x16x3000x64t --shape 3x8x1000x40c --shape 1x8:2x2100x64c > $O/first.txt 2>&1
echo "first rc $?" >> $O/summary.txt
wait $B0
sw() {   # $1 name, then env assignments
  local n=$1; shift
  env "$@" timeout 200 ./build/fattn_bench --backend cuda --device 0 --dtype bf16,f16 --seqs 512,2048,8192,16384 \
    --dims 64 --no-naive --iters 10 --check-rows 64 --csv $O/sweep_$n.csv > $O/sweep_$n.txt 2>&1
  echo "sweep $n rc $? $(date -u +%T)" >> $O/summary.txt
}
sw wgmma FATTN_CUDA_KERNEL=wgmma
sw wgmma0 FATTN_CUDA_KERNEL=wgmma FATTN_MODULE_DIR=$PWD/build0
sw wgmma_b FATTN_CUDA_KERNEL=wgmma
sw wgmma0_b FATTN_CUDA_KERNEL=wgmma FATTN_MODULE_DIR=$PWD/build0
timeout 200 python3 bench/peers_torch.py --dtypes bf16,f16 --seqs 512,2048,8192,16384 --dims 64 --iters 10 \
  > $O/peers.jsonl 2> $O/peers.err; echo "peers rc $? $(date -u +%T)" >> $O/summary.txt
mkdir -p $O/cache; st ragged_opencl 150 env FATTN_CACHE_DIR=$O/cache FATTN_TEST_BACKENDS=opencl ./build/test_ragged
rm -rf $O/cache
cat $O/summary.txt; grep -hE "runs passed|FAILED|ERROR SUMMARY|RACECHECK SUMMARY" $O/*.log | head -30; grep "^\[" $O/first.txt | cut -c17-160

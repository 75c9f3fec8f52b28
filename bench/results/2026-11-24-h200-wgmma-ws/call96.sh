#!/usr/bin/env bash
# Session 2026-11-24n, call 96: wgmma v2 with three consumer warpgroups at head dim 64 (BM 192;
# build0: two, as in call95). Forced-wgmma conformance and the sanitizers on the new shape, then
# the sweep at d64/d128/d256 on wgmma and mma.sync with the PyTorch peers (call95 ran out of
# time before mma and the peers), small shapes on both kernels, and test_ragged on OpenCL
# alone (call95's ctest -j4 saw OpenCL decode failures on the NVIDIA device).
set -u
source .devkit/env.sh
O=/tmp/o96; rm -rf $O; mkdir -p $O
fin() { tar czf $OUT/out.tgz -C $O .; }
trap fin EXIT
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u; git log --oneline -1; } > $O/machine.txt
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA_ARCHS=90 -DFATTN_BUILD_EXAMPLES=OFF > $O/build.log 2>&1 &&
  cmake --build build -j16 >> $O/build.log 2>&1 || { tail -40 $O/build.log; exit 1; }
echo "built $(date -u +%T)" >> $O/summary.txt
( cmake -S . -B build0 -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA_ARCHS=90 -DFATTN_BUILD_EXAMPLES=OFF \
    -DFATTN_CUDA_HEAD_DIMS="64" -DCMAKE_CUDA_FLAGS=-DFATTN_WGMMA_NWG64=2 > $O/build0.log 2>&1 &&
  cmake --build build0 -j6 --target fattn_cuda >> $O/build0.log 2>&1; echo "build0 rc $? $(date -u +%T)" >> $O/summary.txt ) &
B0=$!
st() { local n=$1 lim=$2; shift 2; timeout $lim "$@" > $O/$n.log 2>&1; echo "$n rc $? $(date -u +%T)" >> $O/summary.txt; }
st conf_wgmma 120 env FATTN_CUDA_KERNEL=wgmma FATTN_TEST_BACKENDS=cuda FATTN_TEST_REQUIRE=cuda FATTN_TEST_DTYPES=f16,bf16 FATTN_TEST_DECLINED_OK=1 ./build/test_conformance
CASES="seq 65 dim 80,causal seq 1000 dim 40,kv strides differ causal,no keys,GQA 8/2 causal bhsd,head dim 1,seq 63 dim 40"
for t in memcheck racecheck synccheck; do
  st san_$t 120 env FATTN_CUDA_KERNEL=wgmma FATTN_TEST_BACKENDS=cuda FATTN_TEST_DTYPES=bf16 FATTN_TEST_CASES="$CASES" \
    compute-sanitizer --tool $t --error-exitcode 9 ./build/test_conformance
done
wait $B0
sw() {   # $1 name, $2 dims, then env assignments
  local n=$1 d=$2; shift 2
  env "$@" timeout 200 ./build/fattn_bench --backend cuda --device 0 --dtype bf16,f16 --seqs 512,2048,8192,16384 \
    --dims $d --no-naive --iters 10 --check-rows 64 --csv $O/sweep_$n.csv > $O/sweep_$n.txt 2>&1
  echo "sweep $n rc $? $(date -u +%T)" >> $O/summary.txt
}
sw wgmma 64,128,256 FATTN_CUDA_KERNEL=auto
sw wgmma2wg 64 FATTN_CUDA_KERNEL=auto FATTN_MODULE_DIR=$PWD/build0
sw mma 64,128,256 FATTN_CUDA_KERNEL=mma
timeout 200 python3 bench/peers_torch.py --dtypes bf16,f16 --seqs 512,2048,8192,16384 --dims 64,128,256 --iters 10 \
  > $O/peers.jsonl 2> $O/peers.err; echo "peers rc $? $(date -u +%T)" >> $O/summary.txt
for k in auto mma; do
  FATTN_CUDA_KERNEL=$k timeout 100 ./build/fattn_bench --backend cuda --device 0 --no-sweep --dtype bf16 --no-naive --iters 20 \
    --shape 1x8x128x128 --shape 1x8x256x64c --shape 4x16x300x128c --shape 1x32x1000x64 --shape 2x8x200x256 \
    --shape 1x16x2048x128c --shape 1x32:8x4096x128c --shape 16x16x100x64 --csv $O/small_$k.csv > $O/small_$k.txt 2>&1
  echo "small $k rc $?" >> $O/summary.txt
done
mkdir -p $O/cache; st ragged_opencl 150 env FATTN_CACHE_DIR=$O/cache FATTN_TEST_BACKENDS=opencl ./build/test_ragged
rm -rf $O/cache
cat $O/summary.txt; grep -hE "runs passed|FAILED|ERROR SUMMARY" $O/*.log | head -30

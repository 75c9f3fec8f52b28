#!/usr/bin/env bash
# Session 2026-11-24n, call 95: wgmma v2 with head dim 256 (64-key tiles), the overlap per bucket
# (64: off, 128/256: on), and auto = wgmma on compute 9.0. The CUDA ctests (auto conformance now
# on wgmma, forced wgmma and forced mma), compute-sanitizer memcheck/racecheck/synccheck on wgmma
# cases, the determinism test at 1000 repeats, then the sweep at d64/d128/d256 on wgmma and mma
# with the PyTorch peers, and small shapes on both kernels.
set -u
source .devkit/env.sh
O=/tmp/o95; rm -rf $O; mkdir -p $O
fin() { tar czf $OUT/out.tgz -C $O .; }
trap fin EXIT
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u; git log --oneline -1; } > $O/machine.txt
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA_ARCHS=90 -DFATTN_BUILD_EXAMPLES=OFF > $O/build.log 2>&1 &&
  cmake --build build -j16 >> $O/build.log 2>&1 || { tail -40 $O/build.log; exit 1; }
echo "built $(date -u +%T)" >> $O/summary.txt
st() { local n=$1 lim=$2; shift 2; timeout $lim "$@" > $O/$n.log 2>&1; echo "$n rc $? $(date -u +%T)" >> $O/summary.txt; }
(cd build && st ctest_cuda 400 ctest -R "cuda|conformance|determinism|variants|ragged" -j4 --output-on-failure)
CASES="seq 65 dim 80,seq 129 dim 128,causal seq 1000 dim 128,kv strides differ causal,no keys,GQA 8/2 causal bhsd,head dim 1,seq 129 dim 256,MQA 4/1 dim 256"
for t in memcheck racecheck synccheck; do
  st san_$t 200 env FATTN_CUDA_KERNEL=wgmma FATTN_TEST_BACKENDS=cuda FATTN_TEST_DTYPES=bf16 FATTN_TEST_CASES="$CASES" \
    compute-sanitizer --tool $t --error-exitcode 9 ./build/test_conformance
done
st determinism 300 env FATTN_TEST_BACKENDS=cuda FATTN_TEST_DTYPES=f16,bf16 FATTN_TEST_REPEATS=1000 ./build/test_determinism
sw() {   # $1 name, then env assignments
  local n=$1; shift
  env "$@" timeout 200 ./build/fattn_bench --backend cuda --device 0 --dtype bf16,f16 --seqs 512,2048,8192,16384 \
    --dims 64,128,256 --no-naive --iters 10 --check-rows 64 --csv $O/sweep_$n.csv > $O/sweep_$n.txt 2>&1
  echo "sweep $n rc $?" >> $O/summary.txt
}
sw wgmma FATTN_CUDA_KERNEL=auto
sw mma FATTN_CUDA_KERNEL=mma
timeout 200 python3 bench/peers_torch.py --dtypes bf16,f16 --seqs 512,2048,8192,16384 --dims 64,128,256 --iters 10 \
  > $O/peers.jsonl 2> $O/peers.err; echo "peers rc $?" >> $O/summary.txt
for k in auto mma; do
  FATTN_CUDA_KERNEL=$k timeout 120 ./build/fattn_bench --backend cuda --device 0 --no-sweep --dtype bf16 --no-naive --iters 20 \
    --shape 1x8x128x128 --shape 1x8x256x64c --shape 4x16x300x128c --shape 1x32x1000x64 --shape 2x8x200x256 \
    --shape 1x16x2048x128c --shape 1x32:8x4096x128c --shape 16x16x100x64 --csv $O/small_$k.csv > $O/small_$k.txt 2>&1
  echo "small $k rc $?" >> $O/summary.txt
done
cat $O/summary.txt; grep -hE "tests passed|FAILED|ERROR SUMMARY|Failed" $O/*.log | head -30

#!/usr/bin/env bash
# Session 2026-11-24n, call 97: wgmma v3: a persistent grid (a block per SM walks the work tiles;
# the producer loads the next tile's Q once the consumers' last Q K^T is done) and 80-key tiles
# at head dim 256. build0: a block per work tile (FATTN_WGMMA_PERSISTENT=0); build1: 64-key
# tiles at d256. Forced-wgmma checks on multi-tile shapes, conformance, sanitizers (with the
# 70000-pair case, which walks ~530 tiles per block), then the sweep on the three builds and
# the PyTorch peers.
set -u
source .devkit/env.sh
O=/tmp/o97; rm -rf $O; mkdir -p $O
fin() { tar czf $OUT/out.tgz -C $O .; }
trap fin EXIT
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u; git log --oneline -1; } > $O/machine.txt
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA_ARCHS=90 -DFATTN_BUILD_EXAMPLES=OFF > $O/build.log 2>&1 &&
  cmake --build build -j16 >> $O/build.log 2>&1 || { tail -40 $O/build.log; exit 1; }
echo "built $(date -u +%T)" >> $O/summary.txt
xb() {   # $1 dir, $2 head dims, $3 CUDA flags
  cmake -S . -B $1 -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA_ARCHS=90 -DFATTN_BUILD_EXAMPLES=OFF \
    -DFATTN_CUDA_HEAD_DIMS="$2" -DCMAKE_CUDA_FLAGS="$3" > $O/$1.log 2>&1 &&
  cmake --build $1 -j4 --target fattn_cuda >> $O/$1.log 2>&1; echo "$1 rc $? $(date -u +%T)" >> $O/summary.txt
}
( xb build0 "64;128;256" -DFATTN_WGMMA_PERSISTENT=0 ) & B0=$!
( xb build1 "256" -DFATTN_WGMMA_BN256=64 ) & B1=$!
st() { local n=$1 lim=$2; shift 2; timeout $lim "$@" > $O/$n.log 2>&1; echo "$n rc $? $(date -u +%T)" >> $O/summary.txt; }
FATTN_CUDA_KERNEL=wgmma timeout 60 ./build/fattn_bench --backend cuda --device 0 --no-sweep --dtype bf16,f16 --no-naive --iters 3 \
  --check-rows 64 --shape 4x40x600x64 --shape 4x40x600x64c --shape 3x50x700x128c --shape 3x50x700x128 --shape 2x40x333x256 \
  --shape 2x40x333x256c --shape 1x32:8x5000x128c --shape 2x16x3000x64t > $O/first.txt 2>&1; echo "first rc $?" >> $O/summary.txt
grep "^\[" $O/first.txt | cut -c17-160
st conf_wgmma 120 env FATTN_CUDA_KERNEL=wgmma FATTN_TEST_BACKENDS=cuda FATTN_TEST_REQUIRE=cuda FATTN_TEST_DTYPES=f16,bf16 FATTN_TEST_DECLINED_OK=1 ./build/test_conformance
CASES="seq 65 dim 80,seq 129 dim 256,causal seq 127 dim 256,MQA 4/1 dim 256,kv strides differ causal,no keys,GQA 8/2 causal bhsd,head dim 1,seq 1000 dim 64"
for t in memcheck synccheck; do
  st san_$t 150 env FATTN_CUDA_KERNEL=wgmma FATTN_TEST_BACKENDS=cuda FATTN_TEST_DTYPES=bf16 FATTN_TEST_CASES="$CASES,batch x heads 70000" \
    compute-sanitizer --tool $t --error-exitcode 9 ./build/test_conformance
done
st san_racecheck 150 env FATTN_CUDA_KERNEL=wgmma FATTN_TEST_BACKENDS=cuda FATTN_TEST_DTYPES=bf16 FATTN_TEST_CASES="$CASES" \
    compute-sanitizer --tool racecheck --error-exitcode 9 ./build/test_conformance
st determinism 200 env FATTN_CUDA_KERNEL=wgmma FATTN_TEST_BACKENDS=cuda FATTN_TEST_DTYPES=f16,bf16 FATTN_TEST_REPEATS=1000 ./build/test_determinism
wait $B0 $B1
sw() {   # $1 name, $2 dims, then env assignments
  local n=$1 d=$2; shift 2
  env "$@" timeout 200 ./build/fattn_bench --backend cuda --device 0 --dtype bf16,f16 --seqs 512,2048,8192,16384 \
    --dims $d --no-naive --iters 10 --check-rows 64 --csv $O/sweep_$n.csv > $O/sweep_$n.txt 2>&1
  echo "sweep $n rc $? $(date -u +%T)" >> $O/summary.txt
}
sw wgmma 64,128,256 FATTN_CUDA_KERNEL=wgmma
sw wgmma0 64,128,256 FATTN_CUDA_KERNEL=wgmma FATTN_MODULE_DIR=$PWD/build0
sw wgmma64 256 FATTN_CUDA_KERNEL=wgmma FATTN_MODULE_DIR=$PWD/build1
timeout 200 python3 bench/peers_torch.py --dtypes bf16,f16 --seqs 512,2048,8192,16384 --dims 64,128,256 --iters 10 \
  > $O/peers.jsonl 2> $O/peers.err; echo "peers rc $? $(date -u +%T)" >> $O/summary.txt
cat $O/summary.txt; grep -hE "runs passed|FAILED|ERROR SUMMARY|bitwise" $O/*.log | head -30

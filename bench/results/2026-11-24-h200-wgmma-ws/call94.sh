#!/usr/bin/env bash
# Session 2026-11-24n, call 94: the warp-specialised wgmma kernel (issue 15, v2: TMA producer
# warpgroup, mbarrier stages, setmaxnreg, ping-pong consumers). build: the default
# (FATTN_WGMMA_OVERLAP=1, softmax of tile j beside P V of tile j - 1); build0: the same
# kernel without that overlap (ping-pong only). Conformance with FATTN_CUDA_KERNEL=wgmma,
# then the prefill sweep on wgmma (both builds) and mma.sync with the PyTorch peers.
set -u
source .devkit/env.sh
O=/tmp/o94; rm -rf $O; mkdir -p $O
fin() { tar czf $OUT/out.tgz -C $O .; }
trap fin EXIT
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u; git log --oneline -1; } > $O/machine.txt
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA_ARCHS=90 -DFATTN_BUILD_EXAMPLES=OFF > $O/build.log 2>&1 &&
  cmake --build build -j16 >> $O/build.log 2>&1 || { tail -40 $O/build.log; exit 1; }
echo "built $(date -u +%T)" >> $O/summary.txt
( cmake -S . -B build0 -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA_ARCHS=90 -DFATTN_BUILD_EXAMPLES=OFF \
    -DFATTN_CUDA_HEAD_DIMS="64;128" -DCMAKE_CUDA_FLAGS=-DFATTN_WGMMA_OVERLAP=0 > $O/build0.log 2>&1 &&
  cmake --build build0 -j8 --target fattn_cuda >> $O/build0.log 2>&1; echo "build0 rc $? $(date -u +%T)" >> $O/summary.txt ) &
B0=$!
st() { local n=$1 lim=$2; shift 2; timeout $lim "$@" > $O/$n.log 2>&1; echo "$n rc $?" >> $O/summary.txt; }
first() {   # $1 name, then env assignments
  local n=$1; shift
  env "$@" timeout 60 ./build/fattn_bench --backend cuda --device 0 --no-sweep --shape 2x16x1000x128 \
    --shape 2x16x1000x128c --shape 2x16x777x64 --shape 2x16x777x64c --shape 1x8x4096x128c --dtype bf16,f16 --no-naive \
    --iters 3 > $O/first_$n.txt 2>&1; echo "first $n rc $?" >> $O/summary.txt
}
first wgmma FATTN_CUDA_KERNEL=wgmma
grep -hE "^\[|max|err" $O/first_wgmma.txt | head -20
st conf_wgmma 300 env FATTN_CUDA_KERNEL=wgmma FATTN_TEST_BACKENDS=cuda FATTN_TEST_REQUIRE=cuda FATTN_TEST_DTYPES=f16,bf16 ./build/test_conformance
wait $B0
first wgmma0 FATTN_CUDA_KERNEL=wgmma FATTN_MODULE_DIR=$PWD/build0
sw() {   # $1 name, then env assignments
  local n=$1; shift
  env "$@" timeout 200 ./build/fattn_bench --backend cuda --device 0 --dtype bf16,f16 --seqs 512,2048,8192,16384 \
    --no-naive --iters 10 --check-rows 64 --csv $O/sweep_$n.csv > $O/sweep_$n.txt 2>&1
  echo "sweep $n rc $?" >> $O/summary.txt
}
sw wgmma FATTN_CUDA_KERNEL=wgmma
sw wgmma0 FATTN_CUDA_KERNEL=wgmma FATTN_MODULE_DIR=$PWD/build0
sw mma FATTN_CUDA_KERNEL=mma
timeout 200 python3 bench/peers_torch.py --dtypes bf16,f16 --seqs 512,2048,8192,16384 --iters 10 \
  > $O/peers.jsonl 2> $O/peers.err; echo "peers rc $?" >> $O/summary.txt
cat $O/summary.txt; grep -hE "FAILED|[1-9][0-9]* failed|PASSED|runs passed" $O/conf*.log | head

#!/usr/bin/env bash
# Session 2026-11-24m, call 92: the wgmma kernel v1 (Q K^T of tile j issued with P V of tile j - 1,
# the softmax beside P V; K and V loads a tile apart). Conformance with FATTN_CUDA_KERNEL=wgmma
# (the harness's unaligned operands now take element loads) and =mma, compute-sanitizer memcheck and
# racecheck on a small wgmma problem, the prefill sweep on both kernels and the PyTorch peers.
#
set -u
source .devkit/env.sh
O=/tmp/o92; rm -rf $O; mkdir -p $O
fin() { tar czf $OUT/out.tgz -C $O .; }
trap fin EXIT
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u; } > $O/machine.txt
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA_ARCHS=90 -DFATTN_BUILD_EXAMPLES=OFF > $O/build.log 2>&1 &&
  cmake --build build -j16 >> $O/build.log 2>&1 || { tail -40 $O/build.log; exit 1; }
grep -i "wgmma" $O/build.log | head -3
echo "built $(date -u +%T)" >> $O/summary.txt
st() { local n=$1 lim=$2; shift 2; timeout $lim "$@" > $O/$n.log 2>&1; echo "$n rc $?" >> $O/summary.txt; }
# A small first look: one shape per bucket, both kernels, with the check.
for k in wgmma mma; do
  FATTN_CUDA_KERNEL=$k timeout 60 ./build/fattn_bench --backend cuda --device 0 --no-sweep --shape 2x16x1000x128 \
    --shape 2x16x1000x128c --shape 2x16x777x64 --shape 2x16x777x64c --shape 1x8x4096x128c --dtype bf16,f16 --no-naive \
    --iters 3 > $O/first_$k.txt 2>&1; echo "first $k rc $?" >> $O/summary.txt
done
for t in memcheck racecheck; do
  FATTN_CUDA_KERNEL=wgmma timeout 200 compute-sanitizer --tool $t --error-exitcode 9 ./build/fattn_bench --backend cuda \
    --device 0 --no-sweep --shape 1x2x300x128c --shape 1x2x200x64 --dtype bf16 --no-naive --iters 1 --warmup 0 > $O/san_$t.log 2>&1
  echo "san $t rc $?" >> $O/summary.txt
done
st conf 400 env FATTN_CUDA_KERNEL=wgmma FATTN_TEST_BACKENDS=cuda FATTN_TEST_REQUIRE=cuda FATTN_TEST_DTYPES=f16,bf16 ./build/test_conformance
st conf_mma 400 env FATTN_CUDA_KERNEL=mma FATTN_TEST_BACKENDS=cuda FATTN_TEST_REQUIRE=cuda FATTN_TEST_DTYPES=f16,bf16 ./build/test_conformance
for k in wgmma mma; do
  FATTN_CUDA_KERNEL=$k timeout 240 ./build/fattn_bench --backend cuda --device 0 --dtype bf16,f16 --seqs 512,2048,8192,16384 \
    --no-naive --iters 10 --check-rows 64 --csv $O/sweep_$k.csv --json $O/sweep_$k.jsonl > $O/sweep_$k.txt 2>&1
  echo "sweep $k rc $?" >> $O/summary.txt
done
timeout 200 python3 bench/peers_torch.py --dtypes bf16,f16 --seqs 512,2048,8192,16384 --iters 10 \
  > $O/peers.jsonl 2> $O/peers.err; echo "peers rc $?" >> $O/summary.txt
cat $O/summary.txt; grep -hE "FAILED|[1-9][0-9]* failed|PASSED" $O/conf*.log | head; grep -hE "^\[" $O/first_*.txt | cut -c1-160; grep -h "ERROR SUMMARY" $O/san_*.log

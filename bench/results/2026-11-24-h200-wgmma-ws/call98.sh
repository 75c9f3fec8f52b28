#!/usr/bin/env bash
# Session 2026-11-24n, call 98: the landed state (persistent grid without a causal mask, a block
# per tile with one; 80-key tiles at d256; auto = wgmma where it takes the problem). Forced-wgmma
# conformance, multi-tile checks and memcheck on a persistent multi-tile shape, then the sweep
# on auto and mma.sync with the PyTorch peers, all in one call.
set -u
source .devkit/env.sh
O=/tmp/o98; rm -rf $O; mkdir -p $O
fin() { tar czf $OUT/out.tgz -C $O .; }
trap fin EXIT
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u; git log --oneline -1; } > $O/machine.txt
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA_ARCHS=90 -DFATTN_BUILD_EXAMPLES=OFF > $O/build.log 2>&1 &&
  cmake --build build -j16 >> $O/build.log 2>&1 || { tail -40 $O/build.log; exit 1; }
echo "built $(date -u +%T)" >> $O/summary.txt
st() { local n=$1 lim=$2; shift 2; timeout $lim "$@" > $O/$n.log 2>&1; echo "$n rc $? $(date -u +%T)" >> $O/summary.txt; }
SH="--shape 4x40x600x64 --shape 4x40x600x64c --shape 3x50x700x128 --shape 3x50x700x128c --shape 2x40x333x256 --shape 2x40x333x256c --shape 1x32:8x5000x128c --shape 2x16x3000x64t"
FATTN_CUDA_KERNEL=wgmma timeout 60 ./build/fattn_bench --backend cuda --device 0 --no-sweep --dtype bf16,f16 --no-naive --iters 3 \
  --check-rows 64 $SH > $O/first.txt 2>&1; echo "first rc $?" >> $O/summary.txt
st conf_wgmma 120 env FATTN_CUDA_KERNEL=wgmma FATTN_TEST_BACKENDS=cuda FATTN_TEST_REQUIRE=cuda FATTN_TEST_DTYPES=f16,bf16 FATTN_TEST_DECLINED_OK=1 ./build/test_conformance
st conf_auto 120 env FATTN_TEST_BACKENDS=cuda FATTN_TEST_REQUIRE=cuda ./build/test_conformance
st san_memcheck_bench 120 env FATTN_CUDA_KERNEL=wgmma compute-sanitizer --tool memcheck --error-exitcode 9 ./build/fattn_bench --backend cuda \
  --device 0 --no-sweep --dtype bf16 --no-naive --iters 1 --warmup 0 --check-rows 8 --shape 4x40x600x64 --shape 2x40x333x256
sw() {   # $1 name, then env assignments
  local n=$1; shift
  env "$@" timeout 200 ./build/fattn_bench --backend cuda --device 0 --dtype bf16,f16 --seqs 512,2048,8192,16384 \
    --dims 64,128,256 --no-naive --iters 10 --check-rows 64 --csv $O/sweep_$n.csv > $O/sweep_$n.txt 2>&1
  echo "sweep $n rc $? $(date -u +%T)" >> $O/summary.txt
}
sw wgmma FATTN_CUDA_KERNEL=auto
sw mma FATTN_CUDA_KERNEL=mma
timeout 200 python3 bench/peers_torch.py --dtypes bf16,f16 --seqs 512,2048,8192,16384 --dims 64,128,256 --iters 10 \
  > $O/peers.jsonl 2> $O/peers.err; echo "peers rc $? $(date -u +%T)" >> $O/summary.txt
cat $O/summary.txt; grep -hE "runs passed|FAILED|ERROR SUMMARY" $O/*.log | head -30; grep "^\[" $O/first.txt | cut -c17-160

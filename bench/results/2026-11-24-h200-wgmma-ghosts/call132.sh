#!/usr/bin/env bash
# Issue 15, session t, call 132: ghosts (call131) plus a longest-first order for a block per causal
# tile (sections of 2^lg pairs that fit half the L2, heavy tiles first across them), against the same
# tree built with FATTN_WGMMA_LPT=0 and .old = 0f5d8ba (before both), same call: bf16 sweeps x2,
# long extras, tests (the memory report check on auto and forced wgmma), sanitizers, cuDNN peers.
set -u
source .devkit/env.sh
O=/tmp/o132; rm -rf $O; mkdir -p $O
trap 'tar czf $OUT/out.tgz -C /tmp o132' EXIT
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u; } > $O/machine.txt
(timeout 300 python3 bench/peers_torch.py --dtypes bf16 --seqs 2048,4096,8192,16384 --dims 64,128,256 --iters 10 > $O/peers.jsonl 2> $O/peers.err; echo "peers rc $?" >> $O/summary.txt) &
(cmake -S . -B build_l0 -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA_ARCHS=90 -DCMAKE_CUDA_FLAGS=-DFATTN_WGMMA_LPT=0 -DFATTN_BUILD_TESTS=OFF -DFATTN_BUILD_EXAMPLES=OFF > $O/build_l0.log 2>&1 && cmake --build build_l0 -j 3 --target fattn_bench fattn_cuda >> $O/build_l0.log 2>&1 || tail -20 $O/build_l0.log) &
(cd .old && cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA_ARCHS=90 -DFATTN_BUILD_TESTS=OFF -DFATTN_BUILD_EXAMPLES=OFF > $O/build_old.log 2>&1 && cmake --build build -j 3 --target fattn_bench fattn_cuda >> $O/build_old.log 2>&1 || tail -20 $O/build_old.log) &
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA_ARCHS=90 -DFATTN_BUILD_TESTS=ON -DFATTN_BUILD_EXAMPLES=OFF > $O/build.log 2>&1 && (time cmake --build build -j 9 --target fattn_bench fattn_cuda test_variants test_conformance) >> $O/build.log 2>&1 || tail -30 $O/build.log
wait
st() { local n=$1 lim=$2; shift 2; timeout $lim "$@" > $O/$n.log 2>&1; echo "$n rc $?" >> $O/summary.txt; }
T="FATTN_TEST_BACKENDS=cuda"
W="FATTN_CUDA_KERNEL=wgmma"
B() { case $1 in new) echo ./build/fattn_bench;; l0) echo ./build_l0/fattn_bench;; old) echo .old/build/fattn_bench;; esac; }
for r in 1 2; do for t in new l0 old; do
  timeout 60 $(B $t) --backend cuda --device 0 --dtype bf16 --seqs 2048,4096,8192,16384 --dims 64,128,256 --causal both --no-naive --iters 10 --check-rows 8 --csv $O/sweep_${t}_$r.csv > $O/sweep_${t}_$r.txt 2>&1; echo "sweep $t $r rc $?" >> $O/summary.txt
done; done
for r in 1 2; do for t in old new l0; do
  timeout 60 $(B $t) --backend cuda --device 0 --no-sweep --dtype bf16 --no-naive --iters 10 --check-rows 4 --shape 1x32x32768x64c --shape 2x32x16384x64c --shape 1x32x32768x128c --shape 8x32x1000x64c > $O/extra_${t}_$r.txt 2>&1; echo "extra $t $r rc $?" >> $O/summary.txt
done; done
st var_auto 150 env $T ./build/test_variants
st var_wgmma 150 env $T $W ./build/test_variants
st conf_wgmma 120 env $T $W FATTN_TEST_DTYPES=f16,bf16 FATTN_TEST_DECLINED_OK=1 ./build/test_conformance
st san_memcheck 120 env $T $W FATTN_TEST_CASES="wgmma" compute-sanitizer --tool memcheck --error-exitcode 9 ./build/test_variants
for tool in memcheck racecheck synccheck; do
  st san_bench_$tool 90 env $W compute-sanitizer --tool $tool --error-exitcode 9 ./build/fattn_bench --backend cuda --device 0 --no-sweep --dtype bf16 --no-naive --iters 1 --warmup 0 --check-rows 8 --shape 2x8x700x64c --shape 1x8x1000:600x64c --shape 2x4x900x128c --fail-above 0.05
  st san_bias_$tool 90 env $W compute-sanitizer --tool $tool --error-exitcode 9 ./build/fattn_bench --backend cuda --device 0 --no-sweep --dtype bf16 --no-naive --iters 1 --warmup 0 --check-rows 0 --variant bias,window=300:20 --shape 1x4x700x64c --shape 1x4x1000:600x64c
done
cat $O/summary.txt; grep -h "real" $O/build.log
grep -hE "runs passed|ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED|memory report" $O/*.log | sort | uniq -c | head -20
grep -h "wgmma\]\|mma\]" $O/san_bias_memcheck.log | head -3
for f in $O/sweep_* $O/extra_*; do case $f in *.csv) continue;; esac; echo "$(basename $f): $(grep -hE '^\[' $f | grep -o '[0-9.]* ms' | tr '\n' ' ')"; done
grep -h '"torch-cudnn"' $O/peers.jsonl | python3 -c "import sys,json; [print(r['dtype'],r['dim'],r['seq'],r['causal'],r['ms']) for r in map(json.loads,sys.stdin)]"

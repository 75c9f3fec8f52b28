#!/usr/bin/env bash
# Issue 15, session t, call 130: call129 again after the non-paired instances went back to the plain loop (paired: plain causal, d128/d256, <= 64
# query tiles), its own instances (kPaired), against a block per tile everywhere (.old = b297815, the commit
# before), same call: tests, sanitizers, determinism; bf16 sweep new/old twice; cuDNN peers.
set -u
source .devkit/env.sh
O=/tmp/o130; rm -rf $O; mkdir -p $O
trap 'tar czf $OUT/out.tgz -C /tmp o130' EXIT
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u; } > $O/machine.txt
(timeout 300 python3 bench/peers_torch.py --dtypes bf16 --seqs 2048,4096,8192,16384 --dims 64,128,256 --iters 10 > $O/peers.jsonl 2> $O/peers.err; echo "peers rc $?" >> $O/summary.txt) &
(cd .old && cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA_ARCHS=90 -DFATTN_BUILD_TESTS=OFF -DFATTN_BUILD_EXAMPLES=OFF > $O/build_old.log 2>&1 && cmake --build build -j 5 --target fattn_bench fattn_cuda >> $O/build_old.log 2>&1 || tail -20 $O/build_old.log) &
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA_ARCHS=90 -DFATTN_BUILD_TESTS=ON -DFATTN_BUILD_EXAMPLES=OFF > $O/build.log 2>&1 && (time cmake --build build -j 10 --target fattn_bench fattn_cuda test_variants test_conformance test_determinism) >> $O/build.log 2>&1 || tail -30 $O/build.log
wait
st() { local n=$1 lim=$2; shift 2; timeout $lim "$@" > $O/$n.log 2>&1; echo "$n rc $?" >> $O/summary.txt; }
T="FATTN_TEST_BACKENDS=cuda"
for r in 1 2; do for t in new old; do
  bin=./build/fattn_bench; [ $t = old ] && bin=.old/build/fattn_bench
  timeout 100 $bin --backend cuda --device 0 --dtype bf16 --seqs 2048,4096,8192,16384 --dims 64,128,256 --causal both --no-naive --iters 10 --check-rows 8 --csv $O/sweep_${t}_$r.csv > $O/sweep_${t}_$r.txt 2>&1; echo "sweep $t $r rc $?" >> $O/summary.txt
done; done
for t in new old; do
  bin=./build/fattn_bench; [ $t = old ] && bin=.old/build/fattn_bench
  timeout 60 $bin --backend cuda --device 0 --no-sweep --dtype bf16 --no-naive --iters 10 --check-rows 4 --shape 1x32x32768x128c --shape 4x32x2048:4096x128c --shape 8x32x1000x64c > $O/extra_${t}.txt 2>&1; echo "extra $t rc $?" >> $O/summary.txt
done
st var_wgmma 150 env $T FATTN_CUDA_KERNEL=wgmma ./build/test_variants
st conf_wgmma 120 env $T FATTN_CUDA_KERNEL=wgmma FATTN_TEST_DTYPES=f16,bf16 FATTN_TEST_DECLINED_OK=1 ./build/test_conformance
st determinism 100 env $T FATTN_CUDA_KERNEL=wgmma FATTN_TEST_REPEATS=100 ./build/test_determinism
for tool in memcheck racecheck; do
  st san_$tool 120 env $T FATTN_CUDA_KERNEL=wgmma FATTN_TEST_CASES="wgmma many tiles" compute-sanitizer --tool $tool --error-exitcode 9 ./build/test_variants
done
st san_bench 90 env FATTN_CUDA_KERNEL=wgmma compute-sanitizer --tool memcheck --error-exitcode 9 ./build/fattn_bench --backend cuda --device 0 --no-sweep --dtype bf16 --no-naive --iters 1 --warmup 0 --check-rows 16 --shape 2x80x700x128c --shape 2x80x900x64c --shape 1x80x500x256c --shape 2x40x300:900x128c --shape 3x64x1100x128c --fail-above 0.05
for tool in racecheck synccheck; do
  st san_bench_$tool 120 env FATTN_CUDA_KERNEL=wgmma compute-sanitizer --tool $tool --error-exitcode 9 ./build/fattn_bench --backend cuda --device 0 --no-sweep --dtype bf16 --no-naive --iters 1 --warmup 0 --check-rows 4 --shape 1x4x700x128c --shape 1x2x500x256c --shape 1x2x300:900x128c
done
cat $O/summary.txt; grep -h "real" $O/build.log
grep -hE "runs passed|ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED" $O/*.log | sort | uniq -c | head -20
for f in $O/sweep_* $O/extra_*; do case $f in *.csv) continue;; esac; echo "$(basename $f): $(grep -hE '^\[' $f | grep -o '[0-9.]* ms' | tr '\n' ' ')"; done
grep -h '"torch-cudnn"' $O/peers.jsonl | python3 -c "import sys,json; [print(r['dim'],r['seq'],r['causal'],r['ms']) for r in map(json.loads,sys.stdin)]"

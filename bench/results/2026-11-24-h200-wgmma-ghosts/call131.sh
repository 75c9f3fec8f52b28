#!/usr/bin/env bash
# Issue 15, session t, call 131: at head dim 64 a consumer computes only the key tiles its rows see
# (ghost tiles past its last row's diagonal, and for rows past seq_q, are waited for, released and
# passed through the turn ring without GEMMs), against the same tree built with FATTN_WGMMA_GHOSTS=0,
# same call: tests, sanitizers over the ghost cases, d64 sweeps bf16/f16 x2 each, cuDNN peers at d64.
set -u
source .devkit/env.sh
O=/tmp/o131; rm -rf $O; mkdir -p $O
trap 'tar czf $OUT/out.tgz -C /tmp o131' EXIT
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u; } > $O/machine.txt
(timeout 280 python3 bench/peers_torch.py --dtypes bf16,f16 --seqs 512,1024,2048,4096,8192,16384 --dims 64 --iters 10 > $O/peers.jsonl 2> $O/peers.err; echo "peers rc $?" >> $O/summary.txt) &
(cmake -S . -B build_g0 -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA_ARCHS=90 -DCMAKE_CUDA_FLAGS=-DFATTN_WGMMA_GHOSTS=0 -DFATTN_BUILD_TESTS=OFF -DFATTN_BUILD_EXAMPLES=OFF > $O/build_g0.log 2>&1 && cmake --build build_g0 -j 5 --target fattn_bench fattn_cuda >> $O/build_g0.log 2>&1 || tail -20 $O/build_g0.log) &
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA_ARCHS=90 -DFATTN_BUILD_TESTS=ON -DFATTN_BUILD_EXAMPLES=OFF > $O/build.log 2>&1 && (time cmake --build build -j 10 --target fattn_bench fattn_cuda test_variants test_conformance test_determinism) >> $O/build.log 2>&1 || tail -30 $O/build.log
wait
st() { local n=$1 lim=$2; shift 2; timeout $lim "$@" > $O/$n.log 2>&1; echo "$n rc $?" >> $O/summary.txt; }
T="FATTN_TEST_BACKENDS=cuda"
W="FATTN_CUDA_KERNEL=wgmma"
for r in 1 2; do for t in new g0; do for dt in bf16 f16; do
  bin=./build/fattn_bench; [ $t = g0 ] && bin=./build_g0/fattn_bench
  timeout 60 env $W $bin --backend cuda --device 0 --dtype $dt --seqs 512,1024,2048,4096,8192,16384 --dims 64 --causal both --no-naive --iters 10 --check-rows 8 --csv $O/sweep_${t}_${dt}_$r.csv > $O/sweep_${t}_${dt}_$r.txt 2>&1; echo "sweep $t $dt $r rc $?" >> $O/summary.txt
done; done; done
for t in new g0; do
  bin=./build/fattn_bench; [ $t = g0 ] && bin=./build_g0/fattn_bench
  timeout 60 env $W $bin --backend cuda --device 0 --no-sweep --dtype bf16 --no-naive --iters 10 --check-rows 4 --shape 8x32x1000x64c --shape 4x32x1000:3000x64c --shape 4x32x3000:1000x64c --shape 8x32x1000x64 --shape 1x32x32768x64c > $O/extra_${t}.txt 2>&1; echo "extra $t rc $?" >> $O/summary.txt
  timeout 60 env $W $bin --backend cuda --device 0 --no-sweep --dtype bf16 --no-naive --iters 10 --check-rows 0 --variant window=1000 --shape 2x32x8192x64c > $O/extra_win_${t}.txt 2>&1; echo "extra win $t rc $?" >> $O/summary.txt
done
st var_wgmma 150 env $T $W ./build/test_variants
st conf_wgmma 120 env $T $W FATTN_TEST_DTYPES=f16,bf16 FATTN_TEST_DECLINED_OK=1 ./build/test_conformance
st determinism 100 env $T $W FATTN_TEST_REPEATS=100 ./build/test_determinism
for tool in memcheck racecheck synccheck; do
  st san_$tool 120 env $T $W FATTN_TEST_CASES="wgmma" compute-sanitizer --tool $tool --error-exitcode 9 ./build/test_variants
  st san_bench_$tool 90 env $W compute-sanitizer --tool $tool --error-exitcode 9 ./build/fattn_bench --backend cuda --device 0 --no-sweep --dtype bf16 --no-naive --iters 1 --warmup 0 --check-rows 8 --shape 1x4x700x64c --shape 1x4x1000:600x64c --shape 1x4x600:1000x64c --shape 1x4x300x64 --fail-above 0.05
  st san_bias_$tool 90 env $W compute-sanitizer --tool $tool --error-exitcode 9 ./build/fattn_bench --backend cuda --device 0 --no-sweep --dtype bf16 --no-naive --iters 1 --warmup 0 --check-rows 0 --variant bias,window=300:20 --shape 1x4x700x64c --shape 1x4x1000:600x64c
done
cat $O/summary.txt; grep -h "real" $O/build.log
grep -hE "runs passed|ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED" $O/*.log | sort | uniq -c | head -20
for f in $O/sweep_* $O/extra_*; do case $f in *.csv) continue;; esac; echo "$(basename $f): $(grep -hE '^\[' $f | grep -o '[0-9.]* ms' | tr '\n' ' ')"; done
grep -h '"torch-cudnn"' $O/peers.jsonl | python3 -c "import sys,json; [print(r['dtype'],r['dim'],r['seq'],r['causal'],r['ms']) for r in map(json.loads,sys.stdin)]"

#!/usr/bin/env bash
# Issue 15, session u, call 144: the dynamic schedule with the ticket taken two key tiles before a
# block's last (call143 took it when a tile started: a static walk in effect, 10-20% slower at
# 16k) against a block per tile (FATTN_WGMMA_DYNAMIC=0); tests; causal and non-causal rows twice;
# the window rows; cuDNN at 2048.
set -u
source .devkit/env.sh
O=/tmp/o144; rm -rf $O; mkdir -p $O
trap 'tar czf $OUT/out.tgz -C /tmp o144' EXIT
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u; } > $O/machine.txt
(cmake -S . -B build_d0 -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA_ARCHS=90 -DCMAKE_CUDA_FLAGS=-DFATTN_WGMMA_DYNAMIC=0 -DFATTN_BUILD_TESTS=OFF -DFATTN_BUILD_EXAMPLES=OFF > $O/build_d0.log 2>&1 && cmake --build build_d0 -j 6 --target fattn_bench fattn_cuda >> $O/build_d0.log 2>&1 || tail -20 $O/build_d0.log) &
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA_ARCHS=90 -DFATTN_BUILD_TESTS=ON -DFATTN_BUILD_EXAMPLES=OFF > $O/build.log 2>&1 && (time cmake --build build -j 10 --target fattn_bench fattn_cuda test_variants test_conformance test_determinism) >> $O/build.log 2>&1 || tail -30 $O/build.log
wait
st() { local n=$1 lim=$2; shift 2; timeout $lim "$@" > $O/$n.txt 2>&1; echo "$n rc $?" >> $O/summary.txt; }
T="FATTN_TEST_BACKENDS=cuda"
st conf_wgmma 90 env $T FATTN_CUDA_KERNEL=wgmma FATTN_TEST_DTYPES=f16,bf16 FATTN_TEST_DECLINED_OK=1 ./build/test_conformance
st var_wgmma 90 env $T FATTN_CUDA_KERNEL=wgmma ./build/test_variants
st determinism 60 env $T FATTN_CUDA_KERNEL=wgmma FATTN_TEST_REPEATS=200 ./build/test_determinism
st racecheck 80 env $T FATTN_CUDA_KERNEL=wgmma FATTN_TEST_CASES='wgmma many tiles' compute-sanitizer --tool racecheck --error-exitcode 9 ./build/test_variants
W="--backend cuda --device 0 --no-naive --warmup 10 --iters 30"
for r in 1 2; do for b in build build_d0; do
  st causal_${b}_$r 100 ./$b/fattn_bench $W --dtype bf16 --seqs 2048,4096,16384 --dims 64,128,256 --causal 1 --check-rows 4 --csv $O/causal_${b}_$r.csv
  st nc_${b}_$r 60 ./$b/fattn_bench $W --dtype bf16 --seqs 8192 --dims 128,256 --causal 0 --check-rows 0 --csv $O/nc_${b}_$r.csv
  st win_${b}_$r 60 ./$b/fattn_bench $W --no-sweep --check-rows 0 --dtype bf16 --variant window=4096 --shape 1x32x32768x128c --shape 1x32x8192x128
done; done
timeout 60 python3 bench/peers_torch.py --dtypes bf16 --seqs 2048 --dims 64,128,256 --iters 30 > $O/peers.jsonl 2> $O/peers.err; echo "peers rc $?" >> $O/summary.txt
grep -v "rc 0" $O/summary.txt; grep -h real $O/build.log
grep -hE "runs passed|PASSED|FAILED|ERROR SUMMARY|RACECHECK SUMMARY" $O/*.txt | sort | uniq -c
for f in $O/win_*; do echo "$(basename $f): $(grep -hE '^\[' $f | grep -o '[0-9.]* ms' | tr '\n' ' ')"; done

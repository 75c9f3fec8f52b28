#!/usr/bin/env bash
# Issue 15, session u, call 143: the dynamic tile schedule for causal and windowed problems
# (FATTN_WGMMA_DYNAMIC=1: a block per SM takes tiles heaviest first from a counter in the plan's
# workspace) against a block per tile (0), two builds, same call. Tests first (conformance,
# variants, determinism, accounting/api/validation/graph/concurrency on CUDA, memcheck and
# racecheck on causal cases), then causal seq 2048-16384 d64/d128/d256, non-causal controls,
# and the peers at 2048/4096.
set -u
source .devkit/env.sh
O=/tmp/o143; rm -rf $O; mkdir -p $O
trap 'tar czf $OUT/out.tgz -C /tmp o143' EXIT
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u; } > $O/machine.txt
(cmake -S . -B build_d0 -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA_ARCHS=90 -DCMAKE_CUDA_FLAGS=-DFATTN_WGMMA_DYNAMIC=0 -DFATTN_BUILD_TESTS=OFF -DFATTN_BUILD_EXAMPLES=OFF > $O/build_d0.log 2>&1 && cmake --build build_d0 -j 6 --target fattn_bench fattn_cuda >> $O/build_d0.log 2>&1 || tail -20 $O/build_d0.log) &
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA_ARCHS=90 -DFATTN_BUILD_TESTS=ON -DFATTN_BUILD_EXAMPLES=OFF > $O/build.log 2>&1 && (time cmake --build build -j 10 --target fattn_bench fattn_cuda test_variants test_conformance test_determinism test_accounting test_api_ext test_validation test_cuda_graph test_concurrency test_dispatch) >> $O/build.log 2>&1 || tail -30 $O/build.log
wait
st() { local n=$1 lim=$2; shift 2; timeout $lim "$@" > $O/$n.txt 2>&1; echo "$n rc $?" >> $O/summary.txt; }
T="FATTN_TEST_BACKENDS=cuda"
st conf_wgmma 90 env $T FATTN_CUDA_KERNEL=wgmma FATTN_TEST_DTYPES=f16,bf16 FATTN_TEST_DECLINED_OK=1 ./build/test_conformance
st var_wgmma 90 env $T FATTN_CUDA_KERNEL=wgmma ./build/test_variants
st var_auto 90 env $T FATTN_TEST_REQUIRE=cuda,cuda-variants ./build/test_variants
st determinism 60 env $T FATTN_CUDA_KERNEL=wgmma FATTN_TEST_REPEATS=200 ./build/test_determinism
for x in accounting api_ext validation cuda_graph concurrency dispatch; do st t_$x 60 env $T ./build/test_$x; done
st memcheck 80 env $T FATTN_CUDA_KERNEL=wgmma FATTN_TEST_CASES='wgmma many tiles' compute-sanitizer --tool memcheck --error-exitcode 9 ./build/test_variants
st racecheck 80 env $T FATTN_CUDA_KERNEL=wgmma FATTN_TEST_CASES='wgmma many tiles, causal' compute-sanitizer --tool racecheck --error-exitcode 9 ./build/test_variants
st synccheck 80 env $T FATTN_CUDA_KERNEL=wgmma FATTN_TEST_CASES='wgmma many tiles, causal' compute-sanitizer --tool synccheck --error-exitcode 9 ./build/test_variants
W="--backend cuda --device 0 --no-naive --warmup 10 --iters 30"
for r in 1 2; do for b in build build_d0; do
  st causal_${b}_$r 120 ./$b/fattn_bench $W --dtype bf16,f16 --seqs 2048,4096,8192,16384 --dims 64,128,256 --causal 1 --check-rows 8 --csv $O/causal_${b}_$r.csv
done; done
for b in build build_d0; do
  st nc_${b} 90 ./$b/fattn_bench $W --dtype bf16 --seqs 2048,8192 --dims 64,128,256 --causal 0 --check-rows 0 --csv $O/nc_${b}.csv
  st win_${b} 60 ./$b/fattn_bench $W --no-sweep --check-rows 0 --dtype bf16 --variant window=4096 --shape 1x32x32768x128c --shape 1x32x8192x128
done
timeout 120 python3 bench/peers_torch.py --dtypes bf16,f16 --seqs 2048,4096 --dims 64,128,256 --iters 30 > $O/peers.jsonl 2> $O/peers.err; echo "peers rc $?" >> $O/summary.txt
grep -v "rc 0" $O/summary.txt; grep -h real $O/build.log
grep -hE "runs passed|PASSED|FAILED|ERROR SUMMARY|RACECHECK SUMMARY" $O/*.txt | sort | uniq -c
for f in $O/win_*; do echo "$(basename $f): $(grep -hE '^\[' $f | grep -o '[0-9.]* ms' | tr '\n' ' ')"; done

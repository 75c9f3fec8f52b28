#!/usr/bin/env bash
# Issues 13 and 15, session u, call 142: P's row sums on the tensor cores (FATTN_WGMMA_TCSUM=1, an
# m64n8 wgmma of P and a block of ones beside P V, head dims 64 and 128) against the FADD sums (0),
# two builds, same call: tests first (conformance, variants, determinism, memcheck on forced wgmma),
# then plain seq 2048-16384 d64/d128 causal and not, softcap 50 at 32k, and the peers at 2048/4096.
set -u
source .devkit/env.sh
O=/tmp/o142; rm -rf $O; mkdir -p $O
trap 'tar czf $OUT/out.tgz -C /tmp o142' EXIT
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u; } > $O/machine.txt
(cmake -S . -B build_t0 -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA_ARCHS=90 -DCMAKE_CUDA_FLAGS=-DFATTN_WGMMA_TCSUM=0 -DFATTN_BUILD_TESTS=OFF -DFATTN_BUILD_EXAMPLES=OFF > $O/build_t0.log 2>&1 && cmake --build build_t0 -j 6 --target fattn_bench fattn_cuda >> $O/build_t0.log 2>&1 || tail -20 $O/build_t0.log) &
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA_ARCHS=90 -DFATTN_BUILD_TESTS=ON -DFATTN_BUILD_EXAMPLES=OFF > $O/build.log 2>&1 && (time cmake --build build -j 10 --target fattn_bench fattn_cuda test_variants test_conformance test_determinism) >> $O/build.log 2>&1 || tail -30 $O/build.log
wait
st() { local n=$1 lim=$2; shift 2; timeout $lim "$@" > $O/$n.txt 2>&1; echo "$n rc $?" >> $O/summary.txt; }
T="FATTN_TEST_BACKENDS=cuda"
st conf_wgmma 100 env $T FATTN_CUDA_KERNEL=wgmma FATTN_TEST_DTYPES=f16,bf16 FATTN_TEST_DECLINED_OK=1 ./build/test_conformance
st var_wgmma 100 env $T FATTN_CUDA_KERNEL=wgmma ./build/test_variants
st determinism 60 env $T FATTN_CUDA_KERNEL=wgmma FATTN_TEST_REPEATS=200 ./build/test_determinism
st memcheck 100 env $T FATTN_CUDA_KERNEL=wgmma FATTN_TEST_CASES='wgmma tiles' compute-sanitizer --tool memcheck --error-exitcode 9 ./build/test_variants
W="--backend cuda --device 0 --no-naive --warmup 10 --iters 30"
for r in 1 2; do for b in build build_t0; do
  dt=bf16,f16; [ $r = 2 ] && dt=bf16
  st sweep_${b}_$r 120 ./$b/fattn_bench $W --dtype $dt --seqs 2048,4096,8192,16384 --dims 64,128 --check-rows 8 --csv $O/sweep_${b}_$r.csv
  st cap_${b}_$r 60 ./$b/fattn_bench $W --no-sweep --check-rows 0 --dtype bf16,f16 --variant softcap=50 --shape 1x32x32768x128c --shape 2x32x8192x64c
  st plain32k_${b}_$r 60 ./$b/fattn_bench $W --no-sweep --check-rows 0 --dtype bf16,f16 --shape 1x32x32768x128c --shape 2x32x8192x64c
done; done
timeout 100 python3 bench/peers_torch.py --dtypes bf16,f16 --seqs 2048,4096 --dims 64,128 --iters 30 > $O/peers.jsonl 2> $O/peers.err; echo "peers rc $?" >> $O/summary.txt
grep -v "rc 0" $O/summary.txt; grep -h real $O/build.log
grep -hE "runs passed|PASSED|FAILED|ERROR SUMMARY" $O/conf_wgmma.txt $O/var_wgmma.txt $O/determinism.txt $O/memcheck.txt | sort | uniq -c
for f in $O/cap_* $O/plain32k_*; do echo "$(basename $f): $(grep -hE '^\[' $f | grep -o '[0-9.]* ms' | tr '\n' ' ')"; done

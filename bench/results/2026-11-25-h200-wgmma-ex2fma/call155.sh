#!/usr/bin/env bash
# Issue 15, session w, call 155: the stale-max rescale as landed (head dims 64 and 256; off at 128)
# against FATTN_WGMMA_STALE=0 (every tile rescales, the kernel before this session). Part 1:
# builds, tests forced to wgmma (variants with the new cases, conformance, determinism 1000
# repeats), auto routing, compute-sanitizer memcheck/racecheck/synccheck. Part 2: three
# interleaved rounds of the table (seq 512-16384, d64/128/256, causal and not, bf16 and
# f16) with the peers in the same call, and variant rows at d64/d256 32k.
set -u
PART=${1:-1}
source .devkit/env.sh
O=/tmp/o155_$PART; rm -rf $O; mkdir -p $O
trap 'tar czf $OUT/out.tgz -C /tmp o155_$PART' EXIT
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u; } > $O/machine.txt
R() { local n=$1 lim=$2; shift 2; timeout $lim "$@" > $O/$n.txt 2>&1; echo "$n rc $?" >> $O/summary.txt; }
if [ $PART = 1 ]; then
  B() { local n=$1 f=$2 t=$3 j=$4; shift 4; cmake -S . -B $n -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA_ARCHS=90 "-DCMAKE_CUDA_FLAGS=$f" -DFATTN_BUILD_TESTS=$t -DFATTN_BUILD_EXAMPLES=OFF > $O/$n.log 2>&1 && (time cmake --build $n -j $j --target fattn_bench fattn_cuda "$@") >> $O/$n.log 2>&1 || tail -20 $O/$n.log; }
  B build_s0 -DFATTN_WGMMA_STALE=0.f OFF 5 & B build "" ON 11 test_variants test_conformance test_determinism
  wait
  grep -h real $O/build*.log
  T="FATTN_TEST_BACKENDS=cuda"
  R var_wgmma 150 env $T FATTN_CUDA_KERNEL=wgmma ./build/test_variants
  R var_auto 150 env $T FATTN_TEST_REQUIRE=cuda,cuda-variants ./build/test_variants
  R conf_wgmma 120 env $T FATTN_CUDA_KERNEL=wgmma FATTN_TEST_DTYPES=f16,bf16 FATTN_TEST_DECLINED_OK=1 ./build/test_conformance
  R determinism 150 env $T FATTN_CUDA_KERNEL=wgmma FATTN_TEST_REPEATS=1000 ./build/test_determinism
  for tool in memcheck racecheck synccheck; do
    R $tool 100 env $T FATTN_CUDA_KERNEL=wgmma FATTN_TEST_CASES='stale threshold' compute-sanitizer --tool $tool --error-exitcode 9 ./build/test_variants
  done
  grep -v "rc 0" $O/summary.txt
  grep -hE "runs passed|PASSED|FAILED|ERROR SUMMARY|RACECHECK SUMMARY|bitwise" $O/*.txt | sort | uniq -c
else
  W="--backend cuda --device 0 --no-naive --warmup 10 --iters 30 --check-rows 0"
  for r in 1 2 3; do
    for b in build build_s0; do
      R table_${b}_$r 150 ./$b/fattn_bench $W --dtype bf16,f16 --seqs 512,1024,2048,4096,8192,16384 --dims 64,128,256 --causal both --csv $O/table_${b}_$r.csv
    done
    timeout 200 python3 bench/peers_torch.py --dtypes bf16,f16 --seqs 512,1024,2048,4096,8192,16384 --dims 64,128,256 --iters 30 > $O/peers_$r.jsonl 2> $O/peers_$r.err; echo "peers_$r rc $?" >> $O/summary.txt
  done
  V="--backend cuda --device 0 --no-naive --no-sweep --warmup 10 --iters 30 --check-rows 0 --dtype bf16 --shape 1x32x32768x64c --shape 1x8x32768x256c"
  for r in 1 2; do for b in build build_s0; do
    R var_${b}_$r 120 bash -c "./$b/fattn_bench $V; ./$b/fattn_bench $V --variant alibi; ./$b/fattn_bench $V --variant softcap=50; ./$b/fattn_bench $V --variant window=4096,sinks"
  done; done
  grep -v "rc 0" $O/summary.txt
  for f in $O/var_*_[12].txt; do echo "$(basename $f .txt): $(grep -hE '^\[' $f | grep -o '[0-9.]* ms' | tr '\n' ' ')"; done
fi
true

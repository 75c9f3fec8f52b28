#!/usr/bin/env bash
# Issue 15, session w, call 154: FlashAttention-4's conditional rescaling on the wgmma kernel. A
# row keeps its running max until a tile's max passes it by more than FATTN_WGMMA_STALE (log2
# units; terms then reach 2^STALE), and a warp rescales O only when one of its rows moved its max.
# Builds: build_0 (STALE 0, as landed), build_S8 (STALE 8, FlashAttention-4's threshold). Tests
# forced to wgmma on build_S8 (variants, conformance, determinism); three interleaved rounds of the
# issue's table rows (seq 2048-16384, d64/128/256, causal and not, bf16 and f16) with the peers in
# the same call; variant rows (32k d128 causal: plain, ALiBi, softcap 50 f16, window 4096).
set -u
source .devkit/env.sh
O=/tmp/o154; rm -rf $O; mkdir -p $O
trap 'tar czf $OUT/out.tgz -C /tmp o154' EXIT
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u; } > $O/machine.txt
B() { local n=$1 f=$2 t=$3; shift 3; cmake -S . -B $n -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA_ARCHS=90 "-DCMAKE_CUDA_FLAGS=$f" -DFATTN_BUILD_TESTS=$t -DFATTN_BUILD_EXAMPLES=OFF > $O/$n.log 2>&1 && (time cmake --build $n -j 8 --target fattn_bench fattn_cuda "$@") >> $O/$n.log 2>&1 || tail -20 $O/$n.log; }
B build_0 "" OFF & B build_S8 -DFATTN_WGMMA_STALE=8.f ON test_variants test_conformance test_determinism
wait
grep -h real $O/b*.log
R() { local n=$1 lim=$2; shift 2; timeout $lim "$@" > $O/$n.txt 2>&1; echo "$n rc $?" >> $O/summary.txt; }
T="FATTN_TEST_BACKENDS=cuda"
R var_wgmma 120 env $T FATTN_CUDA_KERNEL=wgmma ./build_S8/test_variants
R conf_wgmma 120 env $T FATTN_CUDA_KERNEL=wgmma FATTN_TEST_DTYPES=f16,bf16 FATTN_TEST_DECLINED_OK=1 ./build_S8/test_conformance
R determinism 60 env $T FATTN_CUDA_KERNEL=wgmma FATTN_TEST_REPEATS=200 ./build_S8/test_determinism
W="--backend cuda --device 0 --no-naive --warmup 10 --iters 30 --check-rows 0"
V="--backend cuda --device 0 --no-naive --no-sweep --warmup 10 --iters 30 --check-rows 0 --shape 1x32x32768x128c"
for r in 1 2 3; do
  for b in build_0 build_S8; do
    R table_${b}_$r 150 ./$b/fattn_bench $W --dtype bf16,f16 --seqs 2048,4096,8192,16384 --dims 64,128,256 --causal both --csv $O/table_${b}_$r.csv
  done
  timeout 200 python3 bench/peers_torch.py --dtypes bf16,f16 --seqs 2048,4096,8192,16384 --dims 64,128,256 --iters 30 > $O/peers_$r.jsonl 2> $O/peers_$r.err; echo "peers_$r rc $?" >> $O/summary.txt
done
for r in 1 2; do for b in build_0 build_S8; do
  R var_${b}_$r 120 bash -c "./$b/fattn_bench $V --dtype bf16; ./$b/fattn_bench $V --dtype bf16 --variant alibi; ./$b/fattn_bench $V --dtype f16 --variant softcap=50; ./$b/fattn_bench $V --dtype bf16 --variant window=4096"
done; done
R check_S8 120 ./build_S8/fattn_bench --backend cuda --device 0 --no-naive --warmup 2 --iters 3 --dtype bf16,f16 --seqs 512,2048 --dims 64,128,256 --causal both --check-rows 64
grep -v "rc 0" $O/summary.txt
grep -hE "runs passed|PASSED|FAILED" $O/var_wgmma.txt $O/conf_wgmma.txt $O/determinism.txt | tail -8
for f in $O/var_*_[12].txt; do echo "$(basename $f .txt): $(grep -hE '^\[' $f | grep -o '[0-9.]* ms' | tr '\n' ' ')"; done
true

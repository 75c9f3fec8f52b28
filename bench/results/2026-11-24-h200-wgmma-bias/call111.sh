#!/usr/bin/env bash
# The bias and softcap+ALiBi on wgmma (kWgAll): tests (auto, forced wgmma,
# forced mma.sync), sanitizers over the wgmma cases, costs new/old (.old =
# b2cfe10: the bias on mma.sync), plain A/B, peers (FlexAttention, SDPA mask).
set -u
source .devkit/env.sh
O=/tmp/o111; rm -rf $O; mkdir -p $O
trap 'tar czf $OUT/out.tgz -C /tmp o111' EXIT
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $O/machine.txt; date -u >> $O/machine.txt
(timeout 400 python3 bench/peer_variants.py > $O/peer_variants.txt 2>&1; echo "peers rc $?" >> $O/summary.txt) &
(cd .old && cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA_ARCHS=90 -DFATTN_BUILD_TESTS=OFF -DFATTN_BUILD_EXAMPLES=OFF > $O/build_old.log 2>&1 && cmake --build build -j 5 --target fattn_bench fattn_cuda >> $O/build_old.log 2>&1 || tail -20 $O/build_old.log) &
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA_ARCHS=90 -DFATTN_BUILD_EXAMPLES=OFF > $O/build.log 2>&1 && (time cmake --build build -j 10 --target fattn_bench fattn_cuda test_variants test_conformance) >> $O/build.log 2>&1 || tail -30 $O/build.log
wait
st() { local n=$1 lim=$2; shift 2; timeout $lim "$@" > $O/$n.log 2>&1; echo "$n rc $?" >> $O/summary.txt; }
T="FATTN_TEST_BACKENDS=cuda"
st var_auto 200 env $T FATTN_TEST_REQUIRE=cuda,cuda-variants ./build/test_variants
st var_wgmma 200 env $T FATTN_CUDA_KERNEL=wgmma ./build/test_variants
st var_mma 200 env $T FATTN_CUDA_KERNEL=mma ./build/test_variants
st conf_wgmma 150 env $T FATTN_CUDA_KERNEL=wgmma FATTN_TEST_DTYPES=f16,bf16 FATTN_TEST_DECLINED_OK=1 ./build/test_conformance
CS=/usr/local/cuda/bin/compute-sanitizer; command -v compute-sanitizer >/dev/null && CS=compute-sanitizer
for tool in memcheck racecheck synccheck; do
  st san_$tool 240 env $T FATTN_CUDA_KERNEL=wgmma FATTN_TEST_CASES="wgmma tiles, bias,wgmma persistent, bias,softcap + alibi, window 250" $CS --tool $tool --error-exitcode 9 ./build/test_variants
done
sh="--shape 1x32x8192x128c --shape 1x32x32768x128c"
B="--backend cuda --device 0 --no-sweep --dtype bf16 --no-naive --iters 10 --check-rows 0"
for r in 1 2; do for t in new old; do
  bin=./build/fattn_bench; [ $t = old ] && bin=.old/build/fattn_bench
  for v in none bias softcap=50,alibi; do
    timeout 90 $bin $B $sh $([ $v = none ] || echo --variant $v) > "$O/v_${t}_${v}_$r.txt" 2>&1; echo "v $t $v $r rc $?" >> $O/summary.txt
  done
  timeout 90 $bin $B --shape 1x32x8192x128 --shape 1x16x8192x64c --shape 1x16x8192x256c --shape 1x16x8192x256 --variant bias > "$O/vb_${t}_$r.txt" 2>&1
  timeout 90 $bin $B --shape 1x32x8192x128 --shape 1x16x8192x64c --shape 1x16x8192x256c --shape 1x16x8192x256 > "$O/vn_${t}_$r.txt" 2>&1
done; done
P="--seqs 2048,8192 --dims 64,128,256 --causal both --dtype bf16 --no-naive --iters 10 --check-rows 2"
for t in new old; do bin=./build/fattn_bench; [ $t = old ] && bin=.old/build/fattn_bench
  timeout 150 $bin --backend cuda --device 0 $P > $O/pre_${t}.txt 2>&1; echo "pre $t rc $?" >> $O/summary.txt; done
grep -v "rc 0" $O/summary.txt; grep -h "real" $O/build.log
grep -hE "runs passed" $O/var_*.log $O/conf_*.log
grep -hE "ERROR SUMMARY|RACECHECK SUMMARY|runs passed" $O/san_*.log
for f in $O/v_* $O/vb_* $O/vn_* $O/pre*; do echo "$(basename $f): $(grep -hE '^\[' $f | grep -o '[0-9.]* ms' | tr '\n' ' ')"; done
tail -12 $O/peer_variants.txt

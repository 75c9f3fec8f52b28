#!/usr/bin/env bash
# Final state: the plain instances keep the block mask form at head dim 64 only
# (call108: d256 spilled 116 bytes with it, 8% slower); plain A/B against .old,
# tests (auto, forced wgmma), the variant costs again.
set -u
source .devkit/env.sh
O=/tmp/o109; rm -rf $O; mkdir -p $O
trap 'tar czf $OUT/out.tgz -C /tmp o109' EXIT
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $O/machine.txt; date -u >> $O/machine.txt
(cd .old && cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA_ARCHS=90 -DFATTN_BUILD_TESTS=OFF -DFATTN_BUILD_EXAMPLES=OFF > $O/build_old.log 2>&1 && cmake --build build -j 6 --target fattn_bench fattn_cuda >> $O/build_old.log 2>&1 || tail -20 $O/build_old.log) &
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA_ARCHS=90 -DFATTN_BUILD_EXAMPLES=OFF > $O/build.log 2>&1 && (time cmake --build build -j 10 --target fattn_bench fattn_cuda fattn_opencl test_variants test_conformance) >> $O/build.log 2>&1 || tail -20 $O/build.log
wait
st() { local n=$1 lim=$2; shift 2; timeout $lim "$@" > $O/$n.log 2>&1; echo "$n rc $?" >> $O/summary.txt; }
st var_auto 200 env FATTN_TEST_BACKENDS=cuda FATTN_TEST_REQUIRE=cuda,cuda-variants ./build/test_variants
st var_wgmma 200 env FATTN_CUDA_KERNEL=wgmma FATTN_TEST_BACKENDS=cuda ./build/test_variants
st conf_wgmma 200 env FATTN_CUDA_KERNEL=wgmma FATTN_TEST_BACKENDS=cuda FATTN_TEST_DTYPES=f16,bf16 FATTN_TEST_DECLINED_OK=1 ./build/test_conformance
P="--seqs 2048,8192 --dims 64,128,256 --causal both --dtype bf16 --no-naive --iters 10 --check-rows 2"
for r in 1 2; do for t in new old; do
  bin=./build/fattn_bench; [ $t = old ] && bin=.old/build/fattn_bench
  timeout 150 $bin --backend cuda --device 0 $P > $O/pre_${t}_$r.txt 2>&1; echo "pre $t $r rc $?" >> $O/summary.txt
done; done
P16="--seqs 8192 --dims 64 --causal both --dtype f16 --no-naive --iters 10 --check-rows 2"
for t in new old; do bin=./build/fattn_bench; [ $t = old ] && bin=.old/build/fattn_bench
  timeout 60 $bin --backend cuda --device 0 $P16 > $O/pre16_${t}.txt 2>&1; done
sh="--shape 1x32x8192x128c --shape 1x32x32768x128c"
for v in none softcap=50+fast softcap=50 alibi sinks window=4096; do
  vv=${v%+fast}; fl=""; [ "$vv" = "$v" ] || fl=--fast-softcap
  timeout 60 ./build/fattn_bench --backend cuda --device 0 --no-sweep $sh --dtype bf16 --no-naive --iters 10 --check-rows 0 $fl $([ $vv = none ] || echo --variant $vv) > "$O/bf16_${v}.txt" 2>&1; echo "bf16 $v rc $?" >> $O/summary.txt
done
grep -v "rc 0" $O/summary.txt; grep -h "real" $O/build.log
grep -hE "runs passed" $O/var_*.log $O/conf_*.log
for f in $O/bf16_* $O/pre*; do echo "$(basename $f): $(grep -hE '^\[' $f | grep -o '[0-9.]* ms' | tr '\n' ' ')"; done

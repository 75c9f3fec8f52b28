#!/usr/bin/env bash
# FATTN_FLAG_FAST_SOFTCAP on the wgmma kernel (tanh.approx) beside the accurate
# softcap (MUFU rcp); tests (auto, forced wgmma, forced mma), memcheck on the
# softcap cases; variant costs; plain prefill A/B against .old (db72ccd),
# interleaved; FlexAttention in the same call.
set -u
source .devkit/env.sh
O=/tmp/o107; rm -rf $O; mkdir -p $O
trap 'tar czf $OUT/out.tgz -C /tmp o107' EXIT
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $O/machine.txt; date -u >> $O/machine.txt
(cd .old && cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA_ARCHS=90 -DFATTN_BUILD_TESTS=OFF -DFATTN_BUILD_EXAMPLES=OFF > $O/build_old.log 2>&1 && cmake --build build -j 6 --target fattn_bench fattn_cuda >> $O/build_old.log 2>&1 || tail -20 $O/build_old.log) &
(timeout 420 python3 bench/peer_variants.py > $O/peer_variants.txt 2>&1; echo "peers rc $?" >> $O/summary.txt) &
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA_ARCHS=90 -DFATTN_BUILD_EXAMPLES=OFF > $O/build.log 2>&1 && (time cmake --build build -j 10 --target fattn_bench fattn_cuda fattn_opencl test_variants test_validation) >> $O/build.log 2>&1 || tail -20 $O/build.log
wait
st() { local n=$1 lim=$2; shift 2; timeout $lim "$@" > $O/$n.log 2>&1; echo "$n rc $?" >> $O/summary.txt; }
st var_auto 200 env FATTN_TEST_BACKENDS=cuda FATTN_TEST_REQUIRE=cuda,cuda-variants ./build/test_variants
st var_wgmma 200 env FATTN_CUDA_KERNEL=wgmma FATTN_TEST_BACKENDS=cuda ./build/test_variants
st var_mma 200 env FATTN_CUDA_KERNEL=mma FATTN_TEST_BACKENDS=cuda FATTN_TEST_REQUIRE=cuda,cuda-variants ./build/test_variants
st validation 100 env FATTN_TEST_BACKENDS=cuda ./build/test_validation
st memcheck 240 env FATTN_CUDA_KERNEL=wgmma FATTN_TEST_BACKENDS=cuda FATTN_TEST_CASES=softcap compute-sanitizer --tool memcheck --error-exitcode 9 ./build/test_variants
sh="--shape 1x32x8192x128c --shape 1x32x32768x128c"
for dt in bf16 f16; do
  for v in none softcap=50 softcap=50+fast alibi window=4096 window=4096,softcap=50+fast; do
    vv=${v%+fast}; fl=""; [ "$vv" = "$v" ] || fl=--fast-softcap
    timeout 60 ./build/fattn_bench --backend cuda --device 0 --no-sweep $sh --dtype $dt --no-naive --iters 10 --check-rows 0 $fl $([ $vv = none ] || echo --variant $vv) > "$O/${dt}_${v}.txt" 2>&1; echo "$dt $v rc $?" >> $O/summary.txt
  done
done
P="--seqs 2048,8192 --dims 64,128,256 --causal both --dtype bf16 --no-naive --iters 10 --check-rows 2"
for r in 1 2; do for t in new old; do
  bin=./build/fattn_bench; [ $t = old ] && bin=.old/build/fattn_bench
  timeout 150 $bin --backend cuda --device 0 $P > $O/pre_${t}_$r.txt 2>&1; echo "pre $t $r rc $?" >> $O/summary.txt
done; done
grep -v "rc 0" $O/summary.txt; grep -h "real" $O/build.log
grep -hE "runs passed" $O/var_*.log; grep -h "ERROR SUMMARY" $O/memcheck.log
for f in $O/bf16_* $O/f16_*; do echo "$(basename $f): $(grep -hE '^\[' $f | grep -o '[0-9.]* ms' | tr '\n' ' ')"; done
for f in $O/pre_*; do echo "$(basename $f): $(grep -hE '^\[' $f | grep -o '[0-9.]* ms' | tr '\n' ' ')"; done
grep -E "softcap|causal " $O/peer_variants.txt

#!/usr/bin/env bash
# Session 2026-11-23c, call 2: merged CUDA decode variants + bias L1 prefetch: test_variants (CUDA, with decode cases), suites, memcheck; prefill variant costs (new, tanh.approx softcap copy), decode variant costs (new vs base b01c267), FlexAttention/SDPA peers.
set -u
source .devkit/env.sh
R=$OUT; O=/tmp/o35; rm -rf $O; mkdir -p $O
fin() { tar czf $R/out.tgz -C $O .; }
trap fin EXIT
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $O/machine.txt; date -u >> $O/machine.txt
(cd .base && cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA_ARCHS=90 -DFATTN_BUILD_TESTS=OFF -DFATTN_BUILD_EXAMPLES=OFF > $O/build_base.log 2>&1 && cmake --build build -j 4 --target fattn_bench fattn_cuda >> $O/build_base.log 2>&1 || tail -20 $O/build_base.log) &
rm -rf /tmp/apx && cp -r .wtc /tmp/apx && sed -i 's|    asm("rcp.approx.ftz.f32 %0, %1;\\n" : "=f"(r) : "f"(ex2(u) + 1.f));\n    return fmaf(r, -2.f \* c2, c2);|XX|' /tmp/apx/kernels_cu/variants.cuh
python3 - <<'PY'
p='/tmp/apx/kernels_cu/variants.cuh'; s=open(p).read()
a=s.index('__device__ __forceinline__ float var_tanh2(float u, float c2) {'); b=s.index('}', a)
s=s[:a]+'__device__ __forceinline__ float var_tanh2(float u, float c2) {\n    float r;\n    asm("tanh.approx.f32 %0, %1;\\n" : "=f"(r) : "f"(u * 0.34657359f));\n    return c2 * r;\n'+s[b:]
open(p,'w').write(s)
PY
grep -A4 "float var_tanh2" /tmp/apx/kernels_cu/variants.cuh > $O/apx_tanh.txt
(cd /tmp/apx && cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA_ARCHS=90 -DFATTN_BUILD_TESTS=OFF -DFATTN_BUILD_EXAMPLES=OFF > $O/build_apx.log 2>&1 && cmake --build build -j 4 --target fattn_bench fattn_cuda >> $O/build_apx.log 2>&1 || tail -20 $O/build_apx.log) &
(timeout 400 python3 .wtc/bench/peer_variants.py > $O/peer_variants.txt 2>&1; echo "peers rc $?" >> $O/summary.txt) &
PEER=$!
cd .wtc
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA_ARCHS=90 > $O/build.log 2>&1 && (time cmake --build build -j 8 --target fattn_bench fattn_cuda fattn_opencl test_variants test_conformance test_ragged test_special test_cuda_graph) >> $O/build.log 2>&1 || tail -20 $O/build.log
wait $PEER
wait
st() { local n=$1 lim=$2; shift 2; timeout $lim "$@" > $O/$n.log 2>&1; echo "$n rc $?" >> $O/summary.txt; }
st cu_variants 200 env FATTN_TEST_BACKENDS=cuda FATTN_TEST_REQUIRE=cuda,cuda-variants ./build/test_variants
st cu_dec3 120 env FATTN_TEST_BACKENDS=cuda FATTN_TEST_REQUIRE=cuda FATTN_TEST_CASES=decode FATTN_TEST_KV_SPLITS=3 ./build/test_conformance
st cu_ragged 90 env FATTN_TEST_BACKENDS=cuda FATTN_TEST_REQUIRE=cuda ./build/test_ragged
st cu_special 60 env FATTN_TEST_BACKENDS=cuda ./build/test_special
st cu_graph 60 env FATTN_TEST_BACKENDS=cuda FATTN_TEST_REQUIRE=cuda ./build/test_cuda_graph
sh="--shape 1x32x8192x128c --shape 1x32x32768x128c"
for v in none softcap=50 bias alibi window=4096,softcap=50; do
  timeout 90 ./build/fattn_bench --backend cuda --device 0 --no-sweep $sh --dtype bf16 --no-naive --iters 10 --check-rows 0 $([ $v = none ] || echo --variant $v) > $O/var_new_$v.txt 2>&1; echo "var new $v rc $?" >> $O/summary.txt
done
for v in softcap=50 window=4096,softcap=50; do
  timeout 90 /tmp/apx/build/fattn_bench --backend cuda --device 0 --no-sweep $sh --dtype bf16 --no-naive --iters 10 --check-rows 2 --variant $v > $O/var_apx_$v.txt 2>&1; echo "var apx $v rc $?" >> $O/summary.txt
done
g="hq=32,hkv=8,sq=1,d=128"
S="--shape b=1,$g,skv=32768 --shape b=8,$g,skv=32768 --shape b=1,$g,skv=32768,page=16 --shape b=1,$g,skv=131072,dtype=f32"
for t in new base; do
  bin=./build/fattn_bench; [ $t = base ] && bin=../.base/build/fattn_bench
  for v in none softcap=50 alibi bias; do
    timeout 60 $bin --backend cuda --device 0 --no-sweep $S --dtype bf16 --no-naive --iters 20 --check-rows 0 --no-stream $([ $v = none ] || echo --variant $v) > $O/dec_${t}_$v.txt 2>&1; echo "dec $t $v rc $?" >> $O/summary.txt
  done
done
st cu_variants_memcheck 240 env FATTN_TEST_BACKENDS=cuda FATTN_TEST_REQUIRE=cuda compute-sanitizer --tool memcheck --error-exitcode 9 ./build/test_variants
cat $O/summary.txt; grep -h "real" $O/build.log; grep -hE "runs passed" $O/cu_variants.log $O/cu_variants_memcheck.log; grep -h "ERROR SUMMARY" $O/cu_variants_memcheck.log

#!/usr/bin/env bash
# Session 2026-11-23c, call 3: bias pairs prefetched to registers before Q K^T; tanh.approx softcap copy; variant costs and peers again.
set -u
source .devkit/env.sh
R=$OUT; O=/tmp/o36; rm -rf $O; mkdir -p $O
fin() { tar czf $R/out.tgz -C $O .; }
trap fin EXIT
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $O/machine.txt; date -u >> $O/machine.txt
rm -rf /tmp/apx && cp -r .wtc /tmp/apx && sed -i 's|    asm("rcp.approx.ftz.f32 %0, %1;\\n" : "=f"(r) : "f"(ex2(u) + 1.f));\n    return fmaf(r, -2.f \* c2, c2);|XX|' /tmp/apx/kernels_cu/variants.cuh
python3 - <<'PY'
p='/tmp/apx/kernels_cu/variants.cuh'; s=open(p).read()
a=s.index('__device__ __forceinline__ float var_tanh2(float u, float c2) {'); b=s.index('}', a)
s=s[:a]+'__device__ __forceinline__ float var_tanh2(float u, float c2) {\n    float r;\n    asm("tanh.approx.f32 %0, %1;\\n" : "=f"(r) : "f"(u * 0.34657359f));\n    return c2 * r;\n'+s[b:]
open(p,'w').write(s)
PY
grep -A4 "float var_tanh2" /tmp/apx/kernels_cu/variants.cuh > $O/apx_tanh.txt
(cd /tmp/apx && cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA_ARCHS=90 -DFATTN_BUILD_EXAMPLES=OFF > $O/build_apx.log 2>&1 && cmake --build build -j 6 --target fattn_bench fattn_cuda test_variants >> $O/build_apx.log 2>&1 || tail -20 $O/build_apx.log) &
(timeout 400 python3 .wtc/bench/peer_variants.py > $O/peer_variants.txt 2>&1; echo "peers rc $?" >> $O/summary.txt) &
PEER=$!
cd .wtc
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA_ARCHS=90 > $O/build.log 2>&1 && (time cmake --build build -j 8 --target fattn_bench fattn_cuda fattn_opencl test_variants test_conformance test_ragged test_special test_cuda_graph) >> $O/build.log 2>&1 || tail -20 $O/build.log
wait $PEER
wait
st() { local n=$1 lim=$2; shift 2; timeout $lim "$@" > $O/$n.log 2>&1; echo "$n rc $?" >> $O/summary.txt; }
st cu_variants 200 env FATTN_TEST_BACKENDS=cuda FATTN_TEST_REQUIRE=cuda,cuda-variants ./build/test_variants
st cu_conf 150 env FATTN_TEST_BACKENDS=cuda FATTN_TEST_REQUIRE=cuda ./build/test_conformance
st cu_ragged 90 env FATTN_TEST_BACKENDS=cuda FATTN_TEST_REQUIRE=cuda ./build/test_ragged
st cu_special 60 env FATTN_TEST_BACKENDS=cuda ./build/test_special
st cu_graph 60 env FATTN_TEST_BACKENDS=cuda FATTN_TEST_REQUIRE=cuda ./build/test_cuda_graph
sh="--shape 1x32x8192x128c --shape 1x32x32768x128c"
for v in none softcap=50 bias alibi window=4096 sinks window=4096,softcap=50; do
  timeout 90 ./build/fattn_bench --backend cuda --device 0 --no-sweep $sh --dtype bf16 --no-naive --iters 10 --check-rows 0 $([ $v = none ] || echo --variant $v) > $O/var_new_$v.txt 2>&1; echo "var new $v rc $?" >> $O/summary.txt
done
for v in softcap=50 window=4096,softcap=50; do
  timeout 90 /tmp/apx/build/fattn_bench --backend cuda --device 0 --no-sweep $sh --dtype bf16 --no-naive --iters 10 --check-rows 0 --variant $v > $O/var_apx_$v.txt 2>&1; echo "var apx $v rc $?" >> $O/summary.txt
done
st apx_variants 200 env FATTN_TEST_BACKENDS=cuda FATTN_TEST_REQUIRE=cuda,cuda-variants /tmp/apx/build/test_variants
cat $O/summary.txt; grep -h "real" $O/build.log; grep -hE "runs passed" $O/cu_variants.log; 

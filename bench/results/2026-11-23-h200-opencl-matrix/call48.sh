#!/usr/bin/env bash
# Session 2026-11-23d, call 3: OpenCL matrix path with double-buffered K/V at d<=64 (HEAD) vs single (HEAD~1, .base) in the same call; suites (variants fixed); CUDA and FA2 in the same call.
set -u
source .devkit/env.sh
R=$OUT; O=/tmp/o48; rm -rf $O; mkdir -p $O
fin() { tar czf $R/out.tgz -C $O .; }
trap fin EXIT
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $O/machine.txt; date -u >> $O/machine.txt
gcc -std=c11 -O1 -o /tmp/regs_cl .devkit/regs_cl.c -lOpenCL && timeout 200 /tmp/regs_cl .wtc/kernels_cl > $O/regs.txt 2>&1; echo "regs rc $?" >> $O/summary.txt
(cd .base && cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA=OFF -DFATTN_BUILD_TESTS=OFF -DFATTN_BUILD_EXAMPLES=OFF > $O/build_base.log 2>&1 && cmake --build build -j 4 --target fattn_bench fattn_opencl >> $O/build_base.log 2>&1) &
cd .wtc
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA_ARCHS=90 > $O/build.log 2>&1 && cmake --build build -j 12 --target fattn_bench fattn_cuda fattn_opencl test_matrix test_conformance test_variants test_ragged >> $O/build.log 2>&1 || tail -20 $O/build.log
wait
export FATTN_OPENCL_DEVICE=NVIDIA
st() { local n=$1 lim=$2; shift 2; timeout $lim "$@" > $O/$n.log 2>&1; echo "$n rc $?" >> $O/summary.txt; }
st matrix 120 env FATTN_TEST_BACKENDS=opencl FATTN_TEST_REQUIRE=opencl,opencl-matrix ./build/test_matrix
st variants 300 env FATTN_TEST_BACKENDS=opencl FATTN_TEST_REQUIRE=opencl,opencl-variants ./build/test_variants
st conf 300 env FATTN_TEST_BACKENDS=opencl FATTN_TEST_REQUIRE=opencl FATTN_TEST_CASES=seq,causal,GQA,MQA,batch,strides,packed,logits,key,scale ./build/test_conformance
st ragged 200 env FATTN_TEST_BACKENDS=opencl FATTN_TEST_REQUIRE=opencl ./build/test_ragged
B="--no-naive --iters 10 --check-rows 1 --seqs 2048,4096,8192,16384 --dtype f16,bf16"
timeout 120 ./build/fattn_bench --backend opencl --device 0 $B --dims 64,128 > $O/bench_ocl.txt 2>&1; echo "bench ocl rc $?" >> $O/summary.txt
timeout 100 ../.base/build/fattn_bench --backend opencl --device 0 $B --dims 64 > $O/bench_ocl_base.txt 2>&1; echo "bench base rc $?" >> $O/summary.txt
timeout 120 ./build/fattn_bench --backend cuda --device 0 $B --dims 64,128 > $O/bench_cuda.txt 2>&1; echo "bench cuda rc $?" >> $O/summary.txt
timeout 100 ./build/fattn_bench --backend opencl --device 0 --no-naive --iters 10 --check-rows 1 --seqs 4096 --dims 256 --dtype bf16 > $O/bench_ocl_d256.txt 2>&1; echo "bench d256 rc $?" >> $O/summary.txt
timeout 200 python3 bench/peers_torch.py --seqs 2048,4096,8192,16384 --dims 64,128 --dtypes f16,bf16 > $O/peers.jsonl 2> $O/peers.err; echo "peers rc $?" >> $O/summary.txt
cat $O/summary.txt; grep -h "runs passed\|FAILED\|PASSED" $O/*.log | head -30
grep -E "===|registers|spill" $O/regs.txt | paste - - - | cut -c1-200 | head -14
for f in $O/bench_*.txt; do echo "== $f"; grep -E "^\[" $f | awk '{print $4,$5,$6,$7,$8,$9,$10,$11,$12,$13,$14}' | head -40; done
python3 - <<'PY'
import json
for l in open('/tmp/o48/peers.jsonl'):
    try: r=json.loads(l)
    except: continue
    if r.get('peer')=='torch-flash' and 'ms' in r: print('fa2', r['dtype'], r['batch'], r['heads'], r['seq'], r['dim'], r['causal'], r['ms'], r['tflops'])
PY

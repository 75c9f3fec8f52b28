#!/usr/bin/env bash
# Session 2026-11-23e, call 2: the matrix kernel on the per-vendor tile interface (HEAD) vs af66f7d (.base, before the split) on NVIDIA OpenCL; suites; CUDA and FA2 in the same call; ptxas counts.
set -u
source .devkit/env.sh
R=$OUT; O=/tmp/o50; rm -rf $O; mkdir -p $O
fin() { tar czf $R/out.tgz -C $O .; }
trap fin EXIT
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $O/machine.txt; date -u >> $O/machine.txt
(cd .base && cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA=OFF -DFATTN_BUILD_TESTS=OFF -DFATTN_BUILD_EXAMPLES=OFF > $O/build_base.log 2>&1 && cmake --build build -j 4 --target fattn_bench fattn_opencl >> $O/build_base.log 2>&1) &
cd .wtc
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA_ARCHS=90 > $O/build.log 2>&1 && cmake --build build -j 12 --target fattn_bench fattn_cuda fattn_opencl test_matrix test_conformance test_variants test_ragged >> $O/build.log 2>&1 || tail -20 $O/build.log
wait
gcc -std=c11 -O1 -o /tmp/regs_sweep2 ../.devkit/regs_sweep2.c -lOpenCL 2>/dev/null
timeout 120 /tmp/regs_sweep2 kernels_cl "-DDPAD=32 -DBM=128 -DBN=64 -DNW=4 -DQREG=1 -DSTAGES=2 -DFOLD=1" "-DDPAD=64 -DBM=128 -DBN=64 -DNW=4 -DQREG=1 -DSTAGES=2 -DFOLD=1" "-DDPAD=128 -DBM=128 -DBN=32 -DNW=4 -DQREG=0 -DSTAGES=1 -DFOLD=1" "-DDPAD=256 -DBM=64 -DBN=32 -DNW=4 -DQREG=1 -DSTAGES=1 -DFOLD=1" > $O/regs.txt 2>&1; echo "regs rc $?" >> $O/summary.txt
export FATTN_OPENCL_DEVICE=NVIDIA
st() { local n=$1 lim=$2; shift 2; timeout $lim "$@" > $O/$n.log 2>&1; echo "$n rc $?" >> $O/summary.txt; }
st matrix 200 env FATTN_TEST_BACKENDS=opencl FATTN_TEST_REQUIRE=opencl,opencl-matrix ./build/test_matrix
st variants 300 env FATTN_TEST_BACKENDS=opencl FATTN_TEST_REQUIRE=opencl,opencl-variants ./build/test_variants
st conf 300 env FATTN_TEST_BACKENDS=opencl FATTN_TEST_REQUIRE=opencl FATTN_TEST_CASES=seq,causal,GQA,MQA,batch,strides,packed,logits,key,scale ./build/test_conformance
st ragged 200 env FATTN_TEST_BACKENDS=opencl FATTN_TEST_REQUIRE=opencl ./build/test_ragged
B="--no-naive --iters 10 --check-rows 1 --seqs 2048,4096,8192,16384 --dtype f16,bf16"
timeout 150 ./build/fattn_bench --backend opencl --device 0 $B --dims 64,128 > $O/bench_ocl.txt 2>&1; echo "bench ocl rc $?" >> $O/summary.txt
timeout 150 ../.base/build/fattn_bench --backend opencl --device 0 $B --dims 64,128 > $O/bench_ocl_base.txt 2>&1; echo "bench base rc $?" >> $O/summary.txt
timeout 120 ./build/fattn_bench --backend cuda --device 0 $B --dims 64,128 > $O/bench_cuda.txt 2>&1; echo "bench cuda rc $?" >> $O/summary.txt
timeout 100 ./build/fattn_bench --backend opencl --device 0 --no-naive --iters 10 --check-rows 1 --seqs 4096 --dims 32,256 --dtype bf16 > $O/bench_ocl_d32_256.txt 2>&1; echo "bench d32/256 rc $?" >> $O/summary.txt
timeout 200 python3 bench/peers_torch.py --seqs 2048,4096,8192,16384 --dims 64,128 --dtypes f16,bf16 > $O/peers.jsonl 2> $O/peers.err; echo "peers rc $?" >> $O/summary.txt
cat $O/summary.txt; grep -h "runs passed\|FAILED\|PASSED\|SKIPPED" $O/*.log | head -30
grep -E "===|registers|spill" $O/regs.txt | paste - - - | cut -c1-200
for f in $O/bench_*.txt; do echo "== $f"; grep -E "^\[" $f | awk '{print $4,$5,$6,$7,$8,$9,$10,$11,$12,$13,$14}' | head -40; done
python3 - <<'PY'
import json
for l in open('/tmp/o50/peers.jsonl'):
    try: r=json.loads(l)
    except: continue
    if r.get('peer')=='torch-flash' and 'ms' in r: print('fa2', r['dtype'], r['batch'], r['heads'], r['seq'], r['dim'], r['causal'], r['ms'], r['tflops'])
PY

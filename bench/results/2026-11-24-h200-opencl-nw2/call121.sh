#!/usr/bin/env bash
# Session 2026-11-24r, call 121: the final OpenCL tiles: NVIDIA OpenCL test_matrix and test_variants
# (the whole file), d64/d256 f16 of this build, its 48 KiB fallbacks (local=56) and .old (e746a34),
# fattn CUDA mma.sync and FA2 in the same call.
set -u
source .devkit/env.sh
O=/tmp/o121; rm -rf $O; mkdir -p $O
fin() { tar czf $OUT/out.tgz -C $O .; }
trap fin EXIT
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $O/machine.txt; date -u >> $O/machine.txt; git rev-parse HEAD >> $O/machine.txt
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA_ARCHS=90 "-DFATTN_CUDA_HEAD_DIMS=64;256" -DFATTN_BUILD_EXAMPLES=OFF > $O/build.log 2>&1 && cmake --build build -j 16 --target fattn_bench fattn_opencl fattn_cuda test_matrix test_variants >> $O/build.log 2>&1 || tail -20 $O/build.log
(cd .old && cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA=OFF -DFATTN_BUILD_TESTS=OFF -DFATTN_BUILD_EXAMPLES=OFF > $O/build_old.log 2>&1 && cmake --build build -j 16 --target fattn_bench fattn_opencl >> $O/build_old.log 2>&1) || tail -20 $O/build_old.log
export FATTN_OPENCL_DEVICE=NVIDIA
st() { local n=$1 lim=$2; shift 2; timeout $lim "$@" > $O/$n.log 2>&1; echo "$n rc $?" >> $O/summary.txt; }
T="FATTN_TEST_BACKENDS=opencl FATTN_TEST_REQUIRE=opencl,opencl-matrix,opencl-tf32"
st matrix 150 env $T ./build/test_matrix
E="--device 0 --no-naive --iters 10 --check-rows 1 --seqs 2048,4096,8192,16384 --causal both --dtype f16 --dims 64,256"
timeout 100 ./build/fattn_bench --backend opencl $E > $O/new.txt 2>&1; echo "new rc $?" >> $O/summary.txt
FATTN_OPENCL_MATRIX_TUNE=local=56 timeout 100 ./build/fattn_bench --backend opencl $E > $O/fallback.txt 2>&1; echo "fallback rc $?" >> $O/summary.txt
timeout 100 .old/build/fattn_bench --backend opencl $E > $O/old.txt 2>&1; echo "old rc $?" >> $O/summary.txt
FATTN_CUDA_KERNEL=mma timeout 100 ./build/fattn_bench --backend cuda $E > $O/cuda.txt 2>&1; echo "cuda rc $?" >> $O/summary.txt
timeout 150 python3 bench/peers_torch.py --seqs 2048,4096,8192,16384 --dims 64,256 --dtypes f16 > $O/peers.jsonl 2> $O/peers.err; echo "peers rc $?" >> $O/summary.txt
st variants 330 env $T ./build/test_variants
cat $O/summary.txt
grep -hE "runs passed|FAILED|ERROR" $O/*.log | sort | uniq -c | head -20
for f in $O/new.txt $O/fallback.txt $O/old.txt $O/cuda.txt; do echo "== $f"; grep -E "^\[" $f | cut -c15-100; done
python3 - <<'PY'
import json
for l in open('/tmp/o121/peers.jsonl'):
    try: r=json.loads(l)
    except: continue
    if r.get('peer')=='torch-flash' and 'ms' in r: print('fa2', r['dtype'], r['batch'], r['heads'], r['seq'], r['dim'], r['causal'], r['ms'], r.get('tflops'))
PY

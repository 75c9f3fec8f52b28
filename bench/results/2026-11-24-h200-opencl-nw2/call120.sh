#!/usr/bin/env bash
# Session 2026-11-24r, call 120: the landed OpenCL matrix tiles: NVIDIA OpenCL tests (matrix,
# conformance, variants, ragged), then issue 14's comparison (f16/bf16, d64/d128, seq 2048-16384,
# causal both) of this build, .old (e746a34, the session's start), fattn CUDA mma.sync and FA2, plus
# d32/d256 and TF32, all in one call.
set -u
source .devkit/env.sh
O=/tmp/o120; rm -rf $O; mkdir -p $O
fin() { tar czf $OUT/out.tgz -C $O .; }
trap fin EXIT
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $O/machine.txt; date -u >> $O/machine.txt; git rev-parse HEAD >> $O/machine.txt
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA_ARCHS=90 "-DFATTN_CUDA_HEAD_DIMS=32;64;128;256" -DFATTN_BUILD_EXAMPLES=OFF > $O/build.log 2>&1 && cmake --build build -j 16 --target fattn_bench fattn_opencl fattn_cuda test_matrix test_conformance test_variants test_ragged >> $O/build.log 2>&1 || tail -20 $O/build.log
(cd .old && cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA=OFF -DFATTN_BUILD_TESTS=OFF -DFATTN_BUILD_EXAMPLES=OFF > $O/build_old.log 2>&1 && cmake --build build -j 16 --target fattn_bench fattn_opencl >> $O/build_old.log 2>&1) || tail -20 $O/build_old.log
export FATTN_OPENCL_DEVICE=NVIDIA
st() { local n=$1 lim=$2; shift 2; timeout $lim "$@" > $O/$n.log 2>&1; echo "$n rc $?" >> $O/summary.txt; }
T="FATTN_TEST_BACKENDS=opencl FATTN_TEST_REQUIRE=opencl,opencl-matrix,opencl-tf32"
st matrix 150 env $T ./build/test_matrix
st conformance 200 env $T ./build/test_conformance
C="--device 0 --no-naive --iters 10 --check-rows 1 --seqs 2048,4096,8192,16384 --dtype f16,bf16 --dims 64,128 --causal both"
timeout 150 ./build/fattn_bench --backend opencl $C --json $O/cmp_opencl.json > $O/cmp_opencl.txt 2>&1; echo "cmp opencl rc $?" >> $O/summary.txt
timeout 150 .old/build/fattn_bench --backend opencl $C --json $O/cmp_old.json > $O/cmp_old.txt 2>&1; echo "cmp old rc $?" >> $O/summary.txt
FATTN_CUDA_KERNEL=mma timeout 150 ./build/fattn_bench --backend cuda $C --json $O/cmp_cuda.json > $O/cmp_cuda.txt 2>&1; echo "cmp cuda rc $?" >> $O/summary.txt
timeout 200 python3 bench/peers_torch.py --seqs 2048,4096,8192,16384 --dims 64,128 --dtypes f16,bf16 > $O/peers.jsonl 2> $O/peers.err; echo "peers rc $?" >> $O/summary.txt
E="--device 0 --no-naive --iters 10 --check-rows 1 --seqs 4096,16384 --causal both"
timeout 100 ./build/fattn_bench --backend opencl $E --dtype f16 --dims 32,256 > $O/ext_new.txt 2>&1; echo "ext new rc $?" >> $O/summary.txt
timeout 100 .old/build/fattn_bench --backend opencl $E --dtype f16 --dims 32,256 > $O/ext_old.txt 2>&1; echo "ext old rc $?" >> $O/summary.txt
FATTN_CUDA_KERNEL=mma timeout 100 ./build/fattn_bench --backend cuda $E --dtype f16 --dims 32,256 > $O/ext_cuda.txt 2>&1; echo "ext cuda rc $?" >> $O/summary.txt
timeout 150 ./build/fattn_bench --backend opencl $E --dtype f32 --tf32 --dims 32,64,128,256 > $O/tf32_new.txt 2>&1; echo "tf32 new rc $?" >> $O/summary.txt
timeout 150 .old/build/fattn_bench --backend opencl $E --dtype f32 --tf32 --dims 32,64,128,256 > $O/tf32_old.txt 2>&1; echo "tf32 old rc $?" >> $O/summary.txt
st variants 200 env $T ./build/test_variants
st ragged 150 env $T ./build/test_ragged
python3 bench/compare.py $O/cmp_opencl.json $O/cmp_cuda.json $O/peers.jsonl --out $O/chart > $O/compare.log 2>&1; echo "compare rc $?" >> $O/summary.txt
cat $O/summary.txt
grep -hE "runs passed|FAILED|ERROR" $O/*.log | sort | uniq -c | head -20
for f in $O/cmp_opencl.txt $O/cmp_old.txt $O/cmp_cuda.txt $O/ext_*.txt $O/tf32_*.txt; do echo "== $f"; grep -E "^\[" $f | cut -c15-100; done
python3 - <<'PY'
import json
for l in open('/tmp/o120/peers.jsonl'):
    try: r=json.loads(l)
    except: continue
    if r.get('peer')=='torch-flash' and 'ms' in r: print('fa2', r['dtype'], r['batch'], r['heads'], r['seq'], r['dim'], r['causal'], r['ms'], r.get('tflops'))
PY

#!/usr/bin/env bash
# Session 2026-11-24r, call 118: the OpenCL matrix path with tiles past 48 KiB (static local arrays,
# probed): NVIDIA OpenCL tests on the new shapes, registers, a shape sweep (d64/d128/d256 f16, TF32
# d128/d256) against the 48 KiB table (local=52), fattn CUDA mma.sync and FA2 in the same call.
set -u
source .devkit/env.sh
O=/tmp/o118; rm -rf $O; mkdir -p $O
fin() { tar czf $OUT/out.tgz -C $O .; }
trap fin EXIT
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $O/machine.txt; date -u >> $O/machine.txt; git rev-parse HEAD >> $O/machine.txt
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA_ARCHS=90 "-DFATTN_CUDA_HEAD_DIMS=64;128;256" -DFATTN_BUILD_EXAMPLES=OFF > $O/build.log 2>&1 && cmake --build build -j 16 --target fattn_bench fattn_opencl fattn_cuda test_matrix test_conformance test_variants >> $O/build.log 2>&1 || tail -20 $O/build.log
export FATTN_OPENCL_DEVICE=NVIDIA
st() { local n=$1 lim=$2; shift 2; timeout $lim "$@" > $O/$n.log 2>&1; echo "$n rc $?" >> $O/summary.txt; }
T="FATTN_TEST_BACKENDS=opencl FATTN_TEST_REQUIRE=opencl,opencl-matrix,opencl-tf32"
st matrix 150 env $T ./build/test_matrix
st conformance 200 env $T ./build/test_conformance
gcc -std=c11 -O1 -o /tmp/regs_sweep bench/results/2026-11-23-h200-opencl-matrix/regs_sweep2.c -lOpenCL
shp() { local t=$1 d=$2 bm=128 bn=64 nw=4 qreg=0 stages=2 fold=1
  for kv in ${t//,/ }; do eval "${kv%%=*}=${kv#*=}"; done
  echo "-DDPAD=$d -DBM=$bm -DBN=$bn -DNW=$nw -DQREG=$qreg -DSTAGES=$stages -DFOLD=$fold"; }
D64="bn=128 bn=128,fold=0 bn=96 bn=64"
D128="bn=32 bn=64 bn=64,fold=0 bn=48"
D256="bm=64,bn=32,qreg=1 bm=64,bn=64,qreg=1 bm=64,bn=32,qreg=0"
args=(); for t in $D64; do args+=("$(shp $t 64)"); done; for t in $D128; do args+=("$(shp $t 128)"); done; for t in $D256; do args+=("$(shp $t 256)"); done
timeout 200 /tmp/regs_sweep kernels_cl "${args[@]}" > $O/regs.txt 2>&1; echo "regs rc $?" >> $O/summary.txt
B="--device 0 --no-naive --iters 10 --check-rows 1 --fail-above 0.05 --seqs 4096,16384 --causal both"
FATTN_CUDA_KERNEL=mma timeout 120 ./build/fattn_bench --backend cuda $B --dtype f16 --dims 64,128,256 > $O/cuda_mma.txt 2>&1; echo "cuda mma rc $?" >> $O/summary.txt
ob() { local n=$1 t=$2; shift 2; FATTN_OPENCL_MATRIX_TUNE=$t timeout 90 ./build/fattn_bench --backend opencl $B "$@" > $O/$n.txt 2>&1; echo "$n [$t] rc $?" >> $O/summary.txt; }
ob t64 "" --dtype f16 --dims 64
ob o64 local=52 --dtype f16 --dims 64
ob a64 bn=128,qreg=0,stages=2,fold=0 --dtype f16 --dims 64
ob b64 bn=96,qreg=0,stages=2,fold=1 --dtype f16 --dims 64
ob t128 "" --dtype f16 --dims 128
ob o128 local=52 --dtype f16 --dims 128
ob a128 bn=64,qreg=0,stages=2,fold=1 --dtype f16 --dims 128
ob b128 bn=64,qreg=0,stages=2,fold=0 --dtype f16 --dims 128
ob c128 bn=48,qreg=0,stages=2,fold=1 --dtype f16 --dims 128
ob t256 "" --dtype f16 --dims 256
ob o256 local=52 --dtype f16 --dims 256
ob a256 bm=64,bn=64,qreg=1,stages=2,fold=1 --dtype f16 --dims 256
ob tt "" --dtype f32 --tf32 --dims 128,256
ob ot local=52 --dtype f32 --tf32 --dims 128,256
ob t64b "" --dtype bf16 --dims 64,128
FATTN_CUDA_KERNEL=mma timeout 120 ./build/fattn_bench --backend cuda $B --dtype f16 --dims 64,128,256 > $O/cuda_mma2.txt 2>&1; echo "cuda mma again rc $?" >> $O/summary.txt
timeout 150 python3 bench/peers_torch.py --seqs 4096,16384 --dims 64,128,256 --dtypes f16 > $O/peers.jsonl 2> $O/peers.err; echo "peers rc $?" >> $O/summary.txt
st variants 240 env $T ./build/test_variants
cat $O/summary.txt
grep -hE "runs passed|FAILED|device 0" $O/matrix.log $O/conformance.log $O/variants.log | sort | uniq -c | head -20
grep -E "===|registers|spill" $O/regs.txt | paste - - - | sed 's/ptxas[ a-z.:]*//g' | cut -c1-200
for f in $O/cuda_mma.txt $O/cuda_mma2.txt $O/[tmoabc]*.txt; do echo "== $f"; grep -E "^\[" $f | cut -c15-118; done
python3 - <<'PY'
import json
for l in open('/tmp/o118/peers.jsonl'):
    try: r=json.loads(l)
    except: continue
    if r.get('peer')=='torch-flash' and 'ms' in r: print('fa2', r['dtype'], r['batch'], r['heads'], r['seq'], r['dim'], r['causal'], r['ms'], r.get('tflops'))
PY

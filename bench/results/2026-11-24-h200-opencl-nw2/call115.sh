#!/usr/bin/env bash
# Session 2026-11-24r, call 115: OpenCL matrix tiles on 2-warp groups (4 groups per SM, each with
# its own 48 KiB) at d64/d128 f16, against the table's shapes, fattn CUDA mma.sync and FA2, same call.
set -u
source .devkit/env.sh
O=/tmp/o115; rm -rf $O; mkdir -p $O
fin() { tar czf $OUT/out.tgz -C $O .; }
trap fin EXIT
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $O/machine.txt; date -u >> $O/machine.txt; git rev-parse HEAD >> $O/machine.txt
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA_ARCHS=90 "-DFATTN_CUDA_HEAD_DIMS=64;128" -DFATTN_BUILD_TESTS=OFF -DFATTN_BUILD_EXAMPLES=OFF > $O/build.log 2>&1 && cmake --build build -j 16 --target fattn_bench fattn_opencl fattn_cuda >> $O/build.log 2>&1 || tail -20 $O/build.log
export FATTN_OPENCL_DEVICE=NVIDIA
D64="x bm=64,bn=64,nw=2,qreg=1,stages=2,fold=1 bm=64,bn=64,nw=2,qreg=0,stages=2,fold=1 bm=64,bn=128,nw=2,qreg=0,stages=1,fold=1 bm=64,bn=128,nw=2,qreg=1,stages=1,fold=1 bm=64,bn=96,nw=2,qreg=1,stages=2,fold=1"
D128="x bm=64,bn=32,nw=2,qreg=0,stages=2,fold=1 bm=64,bn=64,nw=2,qreg=0,stages=1,fold=1 bm=64,bn=16,nw=2,qreg=0,stages=2,fold=1 bm=64,bn=32,nw=2,qreg=1,stages=2,fold=1 bm=32,bn=32,nw=1,qreg=0,stages=2,fold=1"
gcc -std=c11 -O1 -o /tmp/regs_sweep bench/results/2026-11-23-h200-opencl-matrix/regs_sweep2.c -lOpenCL
shp() { local t=$1 d=$2 bm=128 bn=64 nw=4 qreg=1 stages=2 fold=1
  [ $d = 128 ] && { bn=32; qreg=0; stages=1; }
  [ "$t" = x ] || for kv in ${t//,/ }; do eval "${kv%%=*}=${kv#*=}"; done
  echo "-DDPAD=$d -DBM=$bm -DBN=$bn -DNW=$nw -DQREG=$qreg -DSTAGES=$stages -DFOLD=$fold"; }
args=(); for t in $D64; do args+=("$(shp $t 64)"); done; for t in $D128; do args+=("$(shp $t 128)"); done
timeout 200 /tmp/regs_sweep kernels_cl "${args[@]}" > $O/regs.txt 2>&1; echo "regs rc $?" >> $O/summary.txt
B="--device 0 --no-naive --iters 10 --check-rows 1 --fail-above 0.05 --seqs 4096,16384 --dtype f16 --causal both"
FATTN_CUDA_KERNEL=mma timeout 120 ./build/fattn_bench --backend cuda $B --dims 64,128 > $O/cuda_mma.txt 2>&1; echo "cuda mma rc $?" >> $O/summary.txt
i=0; for t in $D64; do i=$((i+1)); [ $t = x ] && t=; FATTN_OPENCL_MATRIX_TUNE=$t timeout 60 ./build/fattn_bench --backend opencl $B --dims 64 > $O/b64_$i.txt 2>&1; echo "d64 $i [$t] rc $?" >> $O/summary.txt; done
i=0; for t in $D128; do i=$((i+1)); [ $t = x ] && t=; FATTN_OPENCL_MATRIX_TUNE=$t timeout 60 ./build/fattn_bench --backend opencl $B --dims 128 > $O/b128_$i.txt 2>&1; echo "d128 $i [$t] rc $?" >> $O/summary.txt; done
FATTN_CUDA_KERNEL=mma timeout 120 ./build/fattn_bench --backend cuda $B --dims 64,128 > $O/cuda_mma2.txt 2>&1; echo "cuda mma again rc $?" >> $O/summary.txt
timeout 150 python3 bench/peers_torch.py --seqs 4096,16384 --dims 64,128 --dtypes f16 > $O/peers.jsonl 2> $O/peers.err; echo "peers rc $?" >> $O/summary.txt
cat $O/summary.txt
grep -E "===|registers|spill" $O/regs.txt | paste - - - | cut -c1-240
for f in $O/cuda_mma.txt $O/cuda_mma2.txt $O/b64_*.txt $O/b128_*.txt; do echo "== $f"; grep -E "^\[" $f | cut -c15-135; done
python3 - <<'PY'
import json
for l in open('/tmp/o115/peers.jsonl'):
    try: r=json.loads(l)
    except: continue
    if r.get('peer')=='torch-flash' and 'ms' in r: print('fa2', r['dtype'], r['batch'], r['heads'], r['seq'], r['dim'], r['causal'], r['ms'], r.get('tflops'))
PY

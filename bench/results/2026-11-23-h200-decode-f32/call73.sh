#!/usr/bin/env bash
# Session 2026-11-23i, call 73: the f32 matrix decode (three TF32 products) lost to the scalar
# kernel in call72 beyond batch 1. Here: the scalar kernel's knobs for f32 (waves, tile, nt, vr)
# on the bar rows, the matrix build with one TF32 product (--tf32), CUDA beside them.
set -u
source .devkit/env.sh
O=/tmp/o73; rm -rf $O; mkdir -p $O
fin() { tar czf $OUT/out.tgz -C $O .; }
trap fin EXIT
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u; } > $O/machine.txt
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA_ARCHS=90 > $O/build.log 2>&1 &&
  cmake --build build -j16 >> $O/build.log 2>&1 || { tail -30 $O/build.log; exit 1; }
export FATTN_OPENCL_DEVICE=NVIDIA
g="hq=32,hkv=8,sq=1,d=128"
rows=(--shape b=1,$g,skv=32768 --shape b=1,$g,skv=131072 --shape b=8,$g,skv=32768 --shape b=64,$g,skv=32768)
fb() { local n=$1; shift
  timeout 100 ./build/fattn_bench --device 0 --no-sweep --dtype f32 --no-naive --iters 20 --budget 20 \
    --hbm-gbps 4800 "$@" "${rows[@]}" --csv $O/$n.csv > $O/$n.txt 2>&1
  echo "$n rc $?" >> $O/summary.txt; }
fb cuda --backend cuda
fb mma_tf32 --backend opencl --tf32
for t in mma=0 mma=0,waves=2 mma=0,waves=3 mma=0,waves=6 mma=0,waves=8 mma=0,tile=8192 \
         mma=0,tile=32768 mma=0,nt=256 mma=0,tile=8192,waves=8 mma=0,vr=1 mma=0,vr=2 \
         mma=0,nt=256,tile=32768 mma=0,tile=8192,nt=256; do
  FATTN_DECODE_TUNE=$t fb "scalar_$t" --backend opencl
done
fb cuda2 --backend cuda
cd $O && for f in *.txt; do echo "== $f"; grep -E "^\[" $f | sed 's/^\[[^]]*\] //' | cut -c1-110; done > $O/lines.txt
cat $O/summary.txt | grep -v "rc 0"; cat $O/lines.txt

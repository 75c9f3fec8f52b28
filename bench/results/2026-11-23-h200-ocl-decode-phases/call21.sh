#!/usr/bin/env bash
# Session 2026-11-23b, call 3: where an OpenCL decode tile's time goes: variants with a phase left out (timing only).
set -u
source .devkit/env.sh
R=$OUT; O=/tmp/o21; rm -rf $O; mkdir -p $O
fin() { tar czf $R/out.tgz -C $O .; }
trap fin EXIT
cd .wtc
patch -p0 kernels_cl/decode.cl < ../.devkit/prof.patch > $O/patch.log 2>&1 || echo "patch failed"
sed -i "s/if (n >= 2 \&\& t\[0\] == /if (0 \&\& n >= 2 \&\& t[0] == /" backends/opencl/ocl_program.c; grep -c "if (0 && n >= 2" backends/opencl/ocl_program.c >> $O/patch.log
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA=OFF > $O/build.log 2>&1 && cmake --build build -j 16 --target fattn_bench >> $O/build.log 2>&1 || tail -20 $O/build.log
g="hq=32,hkv=8,sq=1,d=128"
S="--shape b=1,$g,skv=32768 --shape b=1,$g,skv=131072 --shape b=64,$g,skv=32768 --shape b=1,$g,skv=32768,page=16 --shape b=8,$g,skv=32768,page=256"
i=0
for v in "" "-DPROF_NOLOAD -DPROF_NOPV" "-DPROF_NOLOAD -DPROF_NOSCORE" "-DPROF_NOLOAD -DPROF_NOSOFTMAX" "-DPROF_NOSCORE" "-DPROF_NOSOFTMAX" "-DPROF_NOPV" "-DPROF_NOSCORE -DPROF_NOSOFTMAX -DPROF_NOPV" "-DPROF_NOLOAD -DPROF_NOSCORE -DPROF_NOSOFTMAX -DPROF_NOPV"; do
  for r in 1 2; do
  env FATTN_OPENCL_DEVICE=NVIDIA FATTN_CACHE_DIR=off FATTN_OPENCL_OPTIONS="$v" timeout 80 ./build/fattn_bench --backend opencl --device 0 --no-sweep $S --dtype bf16 --no-naive --iters 20 --check-rows 0 --no-stream --hbm-gbps 4800 > $O/v${i}_$r.txt 2>&1
  echo "v$i [$v] $r rc $?" >> $O/summary.txt
  done
  i=$((i+1))
done
cat $O/summary.txt

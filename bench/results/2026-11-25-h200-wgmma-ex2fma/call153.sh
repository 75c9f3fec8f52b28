#!/usr/bin/env bash
# Issue 15, session w, call 153: the softmax's dependent chains and the MUFU unit.
# Builds: build_0 = as landed; build_C = a row's max and sum in 4 chains (FATTN_WGMMA_CHAINS=4); build_P8/build_P4/build_P2
# = build_C plus ex2_fma (2^x on the FMA pipe, degree 5) for 1/8, 1/4, 1/2 of the terms at head dim 64
# (FATTN_WGMMA_EX2POLY64). Three interleaved rounds of the rows at seq 2048 and 8192
# (bf16; f16 d64), cuDNN in the same call; test_variants and test_conformance forced to wgmma on
# build_P4; SASS instruction counts of the d64 plain kernel per build.
set -u
# Two device calls: `call153.sh 1` (builds, tests, SASS, round 1), `call153.sh 2` (rounds 2 and 3).
PART=${1:-1}
source .devkit/env.sh
O=/tmp/o153_$PART; rm -rf $O; mkdir -p $O
trap 'tar czf $OUT/out.tgz -C /tmp o153_$PART' EXIT
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u; } > $O/machine.txt
B() { local n=$1 f=$2 t=${3:-OFF}; shift 3; cmake -S . -B $n -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA_ARCHS=90 "-DCMAKE_CUDA_FLAGS=$f" -DFATTN_BUILD_TESTS=$t -DFATTN_BUILD_EXAMPLES=OFF > $O/$n.log 2>&1 && (time cmake --build $n -j 3 --target fattn_bench fattn_cuda "$@") >> $O/$n.log 2>&1 || tail -20 $O/$n.log; }
if [ $PART = 1 ]; then
B build_0 "" OFF & B build_C -DFATTN_WGMMA_CHAINS=4 OFF & B build_P8 "-DFATTN_WGMMA_CHAINS=4 -DFATTN_WGMMA_EX2POLY64=8" OFF &
B build_P2 "-DFATTN_WGMMA_CHAINS=4 -DFATTN_WGMMA_EX2POLY64=2" OFF &
B build_P4 "-DFATTN_WGMMA_CHAINS=4 -DFATTN_WGMMA_EX2POLY64=4" ON test_variants test_conformance
wait
grep -h real $O/b*.log
fi
R() { local n=$1 lim=$2; shift 2; timeout $lim "$@" > $O/$n.txt 2>&1; echo "$n rc $?" >> $O/summary.txt; }
T="FATTN_TEST_BACKENDS=cuda"
if [ $PART = 1 ]; then
R var_wgmma 120 env $T FATTN_CUDA_KERNEL=wgmma ./build_P4/test_variants
R conf_wgmma 120 env $T FATTN_CUDA_KERNEL=wgmma FATTN_TEST_DTYPES=f16,bf16 FATTN_TEST_DECLINED_OK=1 ./build_P4/test_conformance
# SASS counts of the d64 kernels (plain kV 0, causal path shares it): total, MUFU, FFMA, FMNMX, FADD.
for b in build_0 build_C build_P8 build_P4 build_P2; do
  lib=$(ls $b/backends/cuda/libfattn_cuda*.so* 2>/dev/null | head -1); [ -z "$lib" ] && lib=$(find $b -name 'libfattn_cuda*' | head -1)
  cuobjdump -sass "$lib" 2>/dev/null | awk -v B=$b '/Function : /{f=$3; on = (f ~ /flash_wgmma_kernel/ && f ~ /Li64ELi0ELb0/)} on && /\/\*[0-9a-f]{4}\*\// {n[f]++; if (/MUFU/) m[f]++; if (/FFMA/) a[f]++; if (/FMNMX/) x[f]++; if (/FADD/) d[f]++} END {for (f in n) print B, f, "total", n[f], "MUFU", m[f], "FFMA", a[f], "FMNMX", x[f], "FADD", d[f]}' >> $O/sass_counts.txt
done
fi
W="--backend cuda --device 0 --no-naive --warmup 10 --iters 30 --check-rows 0"
ROUNDS="1"; [ $PART = 2 ] && ROUNDS="2 3"
for r in $ROUNDS; do
  for b in build_0 build_C build_P8 build_P4 build_P2; do
    R d64_${b}_$r 120 ./$b/fattn_bench $W --dtype bf16,f16 --seqs 2048,8192 --dims 64 --causal both --csv $O/d64_${b}_$r.csv
  done
  for b in build_0 build_C; do
    R d128_${b}_$r 120 ./$b/fattn_bench $W --dtype bf16 --seqs 2048,8192 --dims 128,256 --causal both --csv $O/d128_${b}_$r.csv
  done
  timeout 150 python3 bench/peers_torch.py --dtypes bf16,f16 --seqs 2048,8192 --dims 64,128,256 --iters 30 > $O/peers_$r.jsonl 2> $O/peers_$r.err; echo "peers_$r rc $?" >> $O/summary.txt
done
R check_bP4 120 ./build_P4/fattn_bench --backend cuda --device 0 --no-naive --warmup 2 --iters 3 --dtype bf16,f16 --seqs 512,2048 --dims 64 --causal both --check-rows 64
grep -v "rc 0" $O/summary.txt
[ $PART = 1 ] && grep -hE "runs passed|PASSED|FAILED|declined" $O/var_wgmma.txt $O/conf_wgmma.txt | tail -6
[ $PART = 1 ] && cat $O/sass_counts.txt 

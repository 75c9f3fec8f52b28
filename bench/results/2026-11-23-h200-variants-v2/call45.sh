#!/usr/bin/env bash
# Session 2026-11-23c, call 12: review commit (HEAD): CUDA test_variants and NVIDIA OpenCL test_variants (the new long/padded-bias/softcap cases), CUDA decode conformance at 3 splits, test_ragged; bias, softcap and decode-softcap costs.
set -u
source .devkit/env.sh
R=$OUT; O=/tmp/o45; rm -rf $O; mkdir -p $O
fin() { tar czf $R/out.tgz -C $O .; }
trap fin EXIT
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $O/machine.txt; date -u >> $O/machine.txt
cd .wtc
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA_ARCHS=90 > $O/build.log 2>&1 && cmake --build build -j 14 --target fattn_bench fattn_cuda fattn_opencl test_variants test_conformance test_ragged >> $O/build.log 2>&1 || tail -20 $O/build.log
st() { local n=$1 lim=$2; shift 2; timeout $lim "$@" > $O/$n.log 2>&1; echo "$n rc $?" >> $O/summary.txt; }
st cu_variants 200 env FATTN_TEST_BACKENDS=cuda FATTN_TEST_REQUIRE=cuda,cuda-variants ./build/test_variants
st cl_variants 240 env FATTN_OPENCL_DEVICE=NVIDIA FATTN_TEST_BACKENDS=opencl FATTN_TEST_REQUIRE=opencl,opencl-variants ./build/test_variants
st cu_dec3 120 env FATTN_TEST_BACKENDS=cuda FATTN_TEST_REQUIRE=cuda FATTN_TEST_CASES=decode FATTN_TEST_KV_SPLITS=3 ./build/test_conformance
st cu_ragged 90 env FATTN_TEST_BACKENDS=cuda FATTN_TEST_REQUIRE=cuda ./build/test_ragged
for v in none bias softcap=50; do timeout 60 ./build/fattn_bench --backend cuda --device 0 --no-sweep --shape 1x32x8192x128c --shape 1x32x32768x128c --dtype bf16 --no-naive --iters 10 --check-rows 0 $([ $v = none ] || echo --variant $v) > $O/var_$v.txt 2>&1; echo "var $v rc $?" >> $O/summary.txt; done
g="hq=32,hkv=8,sq=1,d=128"
for v in none softcap=50; do timeout 60 ./build/fattn_bench --backend cuda --device 0 --no-sweep --shape b=1,$g,skv=32768 --shape b=8,$g,skv=32768 --dtype bf16 --no-naive --iters 20 --check-rows 0 --no-stream $([ $v = none ] || echo --variant $v) > $O/dec_$v.txt 2>&1; echo "dec $v rc $?" >> $O/summary.txt; done
cat $O/summary.txt; grep -h "runs passed" $O/cu_variants.log $O/cl_variants.log; for f in $O/var_*.txt $O/dec_*.txt; do echo "$(basename $f): $(grep -hE '^\[' $f | awk '{print $(NF-5)}' | tr '\n' ' ')"; done

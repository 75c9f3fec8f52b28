#!/usr/bin/env bash
# Session 2026-11-23g, call 59: the QREG=0 TF32 fix and d64's new TF32 shape: suites with TF32 on NVIDIA OpenCL; TF32 vs scalar f32; d128 TF32 shape sweep.
set -u
source .devkit/env.sh
R=$OUT; O=/tmp/o59; rm -rf $O; mkdir -p $O
fin() { tar czf $R/out.tgz -C $O .; }
trap fin EXIT
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $O/machine.txt; date -u >> $O/machine.txt
cd .wtc
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA=OFF > $O/build.log 2>&1 && cmake --build build -j 16 --target fattn_bench fattn_opencl test_matrix test_variants test_ragged >> $O/build.log 2>&1 || tail -20 $O/build.log
export FATTN_OPENCL_DEVICE=NVIDIA
st() { local n=$1 lim=$2; shift 2; timeout $lim "$@" > $O/$n.log 2>&1; echo "$n rc $?" >> $O/summary.txt; }
st matrix 200 env FATTN_TEST_BACKENDS=opencl FATTN_TEST_REQUIRE=opencl,opencl-matrix ./build/test_matrix
st variants 300 env FATTN_TEST_TF32=1 FATTN_TEST_BACKENDS=opencl FATTN_TEST_REQUIRE=opencl,opencl-variants ./build/test_variants
st ragged 200 env FATTN_TEST_TF32=1 FATTN_TEST_BACKENDS=opencl FATTN_TEST_REQUIRE=opencl ./build/test_ragged
cat $O/summary.txt; grep -h "runs passed\|FAILED\|PASSED" $O/*.log | sort | uniq -c
B="--backend opencl --device 0 --no-naive --iters 10 --check-rows 1 --fail-above 0.05 --dtype f32 --causal both"
timeout 120 ./build/fattn_bench $B --tf32 --seqs 2048,4096,16384 --dims 32,64,128 > $O/b_tf32.txt 2>&1; echo "tf32 rc $?" >> $O/summary.txt
timeout 150 ./build/fattn_bench $B --seqs 2048,4096,16384 --dims 32,64,128 > $O/b_f32.txt 2>&1; echo "f32 rc $?" >> $O/summary.txt
for s in 64,16,4,0,1,1 64,16,4,1,1,1 64,16,4,1,2,1 32,32,2,1,1,1 128,16,8,1,1,1 64,32,4,1,1,0 32,16,2,0,2,1; do
  IFS=, read bm bn nw q st fo <<< "$s"
  FATTN_OPENCL_MATRIX_TUNE="bm=$bm,bn=$bn,nw=$nw,qreg=$q,stages=$st,fold=$fo" timeout 60 ./build/fattn_bench $B --tf32 --seqs 4096,16384 --dims 128 > $O/t128_$s.txt 2>&1; echo "tune $s rc $?" >> $O/summary.txt
done
cat $O/summary.txt
for f in $O/b_*.txt $O/t128_*.txt; do echo "== $f"; grep -E "^\[" $f | cut -c15-130; done

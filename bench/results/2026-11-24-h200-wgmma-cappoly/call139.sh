#!/usr/bin/env bash
# Issue 13, session u, call 139: the softcap polynomial's degree and range check, three builds in
# one call: A the default (5 terms, tanh to x^9 on |x| <= 0.75; the check's max in 2 chains),
# B 4 terms (x^7 on |x| <= 0.5), C the check in 4 chains. Softcap 50 rows, the fast form and plain
# (A), interleaved twice; SM clock and power sampled through the bf16 32k rows; tests on B.
set -u
source .devkit/env.sh
O=/tmp/o139; rm -rf $O; mkdir -p $O
trap 'tar czf $OUT/out.tgz -C /tmp o139' EXIT
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u; } > $O/machine.txt
bld() { local d=$1 tests=$2 cf=$3 cu=$4
  cmake -S . -B $d -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA_ARCHS=90 "-DCMAKE_C_FLAGS=$cf" "-DCMAKE_CUDA_FLAGS=$cu" -DFATTN_BUILD_TESTS=$tests -DFATTN_BUILD_EXAMPLES=OFF > $O/$d.log 2>&1 &&
    cmake --build $d -j 5 --target fattn_bench fattn_cuda $([ $tests = ON ] && echo test_variants) >> $O/$d.log 2>&1 || tail -20 $O/$d.log; }
bld bA OFF "" "" &
bld bB ON "-DFATTN_CUDA_CAP_POLY_TERMS=4" "-DFATTN_CUDA_CAP_POLY_TERMS=4" &
bld bC OFF "" "-DFATTN_WGMMA_CAP_CHAINS=4" &
wait
SH="--shape 1x32x32768x128c --shape 2x32x8192x64c --shape 4x32x4096x128"
R() { local n=$1; shift; timeout 60 "$@" > $O/$n.txt 2>&1; echo "$n rc $?" >> $O/summary.txt; }
for r in 1 2; do
  for b in A B C; do for dt in bf16 f16; do
    R cap50_${b}_${dt}_$r ./b$b/fattn_bench --backend cuda --device 0 --no-sweep --dtype $dt --no-naive --iters 10 --check-rows 0 --variant softcap=50 $SH
  done; done
  R fast_A_$r ./bA/fattn_bench --backend cuda --device 0 --no-sweep --dtype bf16,f16 --no-naive --iters 10 --check-rows 0 --variant softcap=50 --fast-softcap $SH
  R plain_A_$r ./bA/fattn_bench --backend cuda --device 0 --no-sweep --dtype bf16,f16 --no-naive --iters 10 --check-rows 0 $SH
done
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu,clocks_throttle_reasons.active --format=csv -lms 250 > $O/smi.csv 2>&1 & SMI=$!
for v in plain fast cap; do
  case $v in plain) x="";; fast) x="--variant softcap=50 --fast-softcap";; cap) x="--variant softcap=50";; esac
  echo "$v $(date +%T.%N)" >> $O/smi_marks.txt
  R clk_${v} ./bA/fattn_bench --backend cuda --device 0 --no-sweep --dtype bf16 --no-naive --iters 20 --check-rows 0 $x --shape 1x32x32768x128c
done
kill $SMI
R var_B env FATTN_TEST_BACKENDS=cuda FATTN_CUDA_KERNEL=wgmma ./bB/test_variants
grep -v "rc 0" $O/summary.txt
grep -hE "runs passed|FAILED" $O/var_*.txt | sort | uniq -c
for f in $O/cap50_* $O/fast_* $O/plain_* $O/clk_*; do echo "$(basename $f): $(grep -hE '^\[' $f | grep -o '[0-9.]* ms' | tr '\n' ' ')"; done
cat $O/smi_marks.txt; awk -F', ' 'NR>1{c+=$2; p+=$3; n++} END{print "mean clock", c/n, "power", p/n}' $O/smi.csv

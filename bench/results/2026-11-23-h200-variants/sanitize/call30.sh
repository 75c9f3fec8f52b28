#!/usr/bin/env bash
# Session 2026-11-23b, call 12: compute-sanitizer over main after the variants merge: run_gpu.sh sanitize, racecheck/synccheck over test_variants (CUDA).
set -u
source .devkit/env.sh
R=$OUT; O=/tmp/o30; rm -rf $O; mkdir -p $O/san
fin() { tar czf $R/out.tgz -C $O .; }
trap fin EXIT
cd .wtc
OUT=$O/san timeout 330 bash bench/run_gpu.sh sanitize > $O/san.log 2>&1
echo "sanitize rc $?" >> $O/summary.txt
for tool in racecheck synccheck; do
  env FATTN_TEST_BACKENDS=cuda timeout 110 compute-sanitizer --tool $tool --error-exitcode 9 ./build/test_variants > $O/variants_$tool.log 2>&1
  echo "variants $tool rc $?" >> $O/summary.txt
done
cat $O/summary.txt; grep -h "exit status\|ERROR SUMMARY" $O/san.log $O/variants_*.log | head -40

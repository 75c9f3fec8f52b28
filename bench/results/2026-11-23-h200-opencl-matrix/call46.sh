#!/usr/bin/env bash
# Session 2026-11-23d, call 1b: inline-PTX probe under NVIDIA OpenCL (shared addresses for ldmatrix/cp.async, bf16 mma, shfl, ex2).
set -u
source .devkit/env.sh
R=$OUT; O=/tmp/o46; rm -rf $O; mkdir -p $O
fin() { tar czf $R/out.tgz -C $O .; }
trap fin EXIT
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $O/machine.txt; date -u >> $O/machine.txt
gcc -std=c11 -O1 -o /tmp/probe2 .devkit/probe2.c -lOpenCL -lm > $O/probe_build.txt 2>&1
timeout 120 /tmp/probe2 > $O/probe2.txt 2>&1; echo "probe rc $?"
grep -v "^\s*$" $O/probe2.txt | grep -E "platform|ran:|FAILED|cvta|isspacep|cp\.async|ex2|shfl|\.target|\.version|shared" | head -60

#!/usr/bin/env bash
# Session 2026-11-24r, call 117: static __local arrays of 48-228 KiB on NVIDIA's OpenCL, with their contents checked.
set -u
source .devkit/env.sh
O=/tmp/o117; rm -rf $O; mkdir -p $O
fin() { tar czf $OUT/out.tgz -C $O .; }
trap fin EXIT
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $O/machine.txt; date -u >> $O/machine.txt; git rev-parse HEAD >> $O/machine.txt
gcc -std=c11 -O1 -o /tmp/bsp bench/results/2026-11-24-h200-opencl-nw2/bigshared_probe.c -lOpenCL && timeout 60 /tmp/bsp > $O/bigshared.txt 2>&1; echo "probe rc $?" >> $O/summary.txt
cat $O/summary.txt $O/bigshared.txt

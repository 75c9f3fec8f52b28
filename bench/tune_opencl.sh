#!/usr/bin/env bash
# Sweeps OpenCL tile shapes through FATTN_OPENCL_TILES on one device, f32,
# seq 8192 (batch 2), causal and not, and prints one CSV row per (tiles, shape).
# The rows of backends/opencl/ocl_tuning.c come from runs of this script.
# Usage: bench/tune_opencl.sh [build dir] [device index] [dims...]
#   e.g. bench/tune_opencl.sh build 0 64 128
set -uo pipefail
build=${1:-build}
device=${2:-0}
shift 2 2>/dev/null
dims=${*:-64 128}

# Candidates per head dim: BQxBKV/TQxTK. Ones that do not fit the device
# report an error row and are skipped.
# The first round (2026-11-21, H200) also tried, and dropped: d64 64x32/8x8,
# 32x64/8x8, 32x32/8x8, 64x16/16x4; d128 64x16 with 8x8, 16x4, 32x8, 32x4 grids,
# 32x32/8x8, 32x32/16x8, 32x32/16x16, 32x16, 48x16, 16x64, 32x24, 16x32.
tiles_64="64x32/16x8 64x32/16x4 64x48/16x8 64x48/16x16 64x48/8x16 64x48/8x8 64x40/16x8 32x64/8x16 \
32x80/8x16 48x48/16x8"
tiles_128="64x16/16x8 32x32/8x16 32x32/8x32 32x32/4x16 32x32/16x32 32x40/8x8 24x32/8x16 16x48/4x16 \
40x32/8x16"

echo "tiles,$("$build/fattn_bench" --csv-header)"
for d in $dims; do
  var=tiles_$d
  for t in ${!var}; do
    for c in "" c; do
      FATTN_OPENCL_TILES="$d:$t" "$build/fattn_bench" --backend opencl --device "$device" --dtype f32 \
        --no-sweep --shape "$((16384 / 8192))x$((2048 / d))x8192x$d$c" --iters 3 --no-naive --check-rows 0 \
        --csv - 2>/dev/null | tail -1 | sed "s|^|$t,|"
    done
  done
done

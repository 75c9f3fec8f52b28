#!/usr/bin/env bash
# Compile checks of the OpenCL matrix kernel's instruction files for GPUs no
# machine here has: AMD RDNA3 WMMA (kernels_cl/mma_rdna.cl) with clang's
# amdgcn target for gfx1100. It joins the files as backends/opencl/ocl_mma.c
# does ("rdna" row of prims[]), builds the probe and the kernel at every
# head-dim bucket's table shape (ocl_mma.c's shape_for) in f16 and bf16,
# plain, ragged (varlen/paged) and with every variant, and checks that the
# objects hold WMMA instructions. What runs is checked elsewhere: the same
# tile file with the emulated instructions (test_matrix_rdna on PoCL).
# Usage: vendor_compile.sh KERNELS_CL_DIR. Exit 77 (a skip) without the
# compiler, unless FATTN_TEST_REQUIRE names vendor-compile.
set -euo pipefail
dir=$1
clang=${FATTN_AMDGCN_CLANG:-clang-16}
objdump=${FATTN_AMDGCN_OBJDUMP:-llvm-objdump-16}
if ! command -v "$clang" >/dev/null || ! command -v "$objdump" >/dev/null; then
  echo "vendor-compile: no $clang / $objdump (Debian: clang-16 llvm-16)"
  [[ ",${FATTN_TEST_REQUIRE:-}," == *,vendor-compile,* ]] && exit 1
  exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
files="storage.cl ragged.cl variants.cl mma_common.cl mma_plain.cl mma_rdna.cl mma_rdna_tile.cl"
shapes=("-DDPAD=32 -DBM=128 -DBN=64 -DNW=4 -DQREG=1 -DSTAGES=2 -DFOLD=1"
  "-DDPAD=64 -DBM=128 -DBN=64 -DNW=4 -DQREG=1 -DSTAGES=2 -DFOLD=1"
  "-DDPAD=128 -DBM=128 -DBN=32 -DNW=4 -DQREG=0 -DSTAGES=1 -DFOLD=1"
  "-DDPAD=256 -DBM=64 -DBN=32 -DNW=4 -DQREG=1 -DSTAGES=1 -DFOLD=1")
builds=("" "-DFATTN_RAGGED=1" "-DFATTN_VAR=63 -DBIAS_DTYPE=2 -DDVPAD=64 -DFATTN_RAGGED=1")
n=0
build() { # label, kernel file, options
  local src="$work/src.cl" obj="$work/k.o"
  (cd "$dir" && cat $files "$2") > "$src"
  if ! "$clang" -x cl -cl-std=CL1.2 -target amdgcn-amd-amdhsa -mcpu=gfx1100 -nogpulib \
      -Xclang -finclude-default-header -O2 -c $3 "$src" -o "$obj" 2> "$work/log"; then
    echo "vendor-compile: $1 did not build ($3):"; cat "$work/log"; exit 1
  fi
  "$objdump" -d "$obj" > "$work/dis"
  if ! grep -q v_wmma_f32_16x16x16 "$work/dis"; then
    echo "vendor-compile: $1 built without WMMA instructions ($3)"; exit 1
  fi
  n=$((n + 1))
}
for dt in 1 2; do
  build "rdna probe" mma_probe.cl "-DDTYPE=$dt -DDPAD=32 -DBM=16 -DBN=16 -DNW=1 -DQREG=1"
  for s in "${shapes[@]}"; do
    for b in "${builds[@]}"; do build "rdna flash_mma" flash_mma.cl "-DDTYPE=$dt $s $b"; done
  done
done
echo "vendor-compile: $n builds for gfx1100 (RDNA3 WMMA) passed"

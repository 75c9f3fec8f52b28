#!/usr/bin/env bash
# Compile checks of the OpenCL matrix kernel's instruction files for GPUs no
# machine here has: AMD RDNA3 WMMA (kernels_cl/mma_rdna.cl) and CDNA MFMA
# (mma_cdna.cl) with clang's amdgcn target for gfx1100 and gfx90a, and Intel
# XMX DPAS (mma_xe.cl) with Intel's ocloc for pvc (16-wide sub-groups) and
# dg2-g10 (8-wide). It joins the files as backends/opencl/ocl_mma.c does
# (the "rdna", "cdna" and "xe" rows of prims[]), builds the probe and the
# kernel at every head-dim bucket's table shape in f16 and bf16, plain,
# ragged (varlen/paged) and with every variant, and the split-KV decode
# kernel (decode_mma.cl) at its d64 and d128 shapes, and checks that the
# binaries hold the matrix instructions (and, for Intel, no calls: ocloc
# builds a misspelt builtin into a call). What runs is checked elsewhere:
# the same tile files with the emulated instructions (test_matrix_rdna,
# _cdna, _xe, _xe8 on PoCL).
# ocloc comes from Debian's intel-opencl-icd unpacked (never installed: its
# ICD breaks ASan in the OpenCL tests) by scripts/setup.sh into
# FATTN_OCLOC_ROOT (default /var/cache/fattn-ocloc).
# Usage: vendor_compile.sh KERNELS_CL_DIR. Exit 77 (a skip) without the
# compilers, unless FATTN_TEST_REQUIRE names vendor-compile.
set -euo pipefail
dir=$1
clang=${FATTN_AMDGCN_CLANG:-clang-16}
objdump=${FATTN_AMDGCN_OBJDUMP:-llvm-objdump-16}
oroot=${FATTN_OCLOC_ROOT:-/var/cache/fattn-ocloc}
olib=$oroot/usr/lib/x86_64-linux-gnu
missing() {
  echo "vendor-compile: $1"
  [[ ",${FATTN_TEST_REQUIRE:-}," == *,vendor-compile,* ]] && exit 1
  exit 77
}
if ! command -v "$clang" >/dev/null || ! command -v "$objdump" >/dev/null; then
  missing "no $clang / $objdump (Debian: clang-16 llvm-16)"
fi
[ -x "$oroot/usr/bin/ocloc" ] || missing "no ocloc in $oroot (scripts/setup.sh unpacks it there)"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
builds=("" "-DFATTN_RAGGED=1" "-DFATTN_VAR=63 -DBIAS_DTYPE=2 -DDVPAD=64 -DFATTN_RAGGED=1")
build() { # label, kernel file, options (cpu, files and the instruction to find: the caller's)
  local src="$work/src.cl" obj="$work/k.o"
  (cd "$dir" && cat $files ${pre:-} "$2") > "$src"
  if ! "$clang" -x cl -cl-std=CL1.2 -target amdgcn-amd-amdhsa -mcpu=$cpu -nogpulib \
      -Xclang -finclude-default-header -O2 -c $3 "$src" -o "$obj" 2> "$work/log"; then
    echo "vendor-compile: $1 did not build for $cpu ($3):"; cat "$work/log"; exit 1
  fi
  "$objdump" -d "$obj" > "$work/dis"
  if ! grep -q "$insn" "$work/dis"; then
    echo "vendor-compile: $1 built without $insn for $cpu ($3)"; exit 1
  fi
  n=$((n + 1))
}
# The split-KV decode kernel (decode_mma.cl) at ocl_decode.c's mma_shape for d64 and d128
# (16-row tiles: MX_TQ 16; Intel's 8 below), dense, paged and with the variants.
dshapes=("-DDPAD=64 -DBM=64 -DBN=16 -DNW=4 -DDSTAGES=3" "-DDPAD=128 -DBM=32 -DBN=16 -DNW=2 -DDSTAGES=3 -DKV_VEC=1")
dbuilds=("" "-DFATTN_RAGGED=1 -DFATTN_PAGED=1" "-DFATTN_VAR=55 -DBIAS_DTYPE=2 -DDVPAD=64 -DFATTN_RAGGED=1")
amd() { # the shapes (ocl_mma.c's table for the layout) in f16 and bf16, every build
  n=0
  for dt in 1 2; do
    build "$cpu probe" mma_probe.cl "-DDTYPE=$dt -DDPAD=32 -DBM=16 -DBN=16 -DNW=1 -DQREG=1"
    for s in "${shapes[@]}"; do
      for b in "${builds[@]}"; do build "$cpu flash_mma" flash_mma.cl "-DDTYPE=$dt $s $b"; done
    done
    for s in "${dshapes[@]}"; do
      for b in "${dbuilds[@]}"; do pre=decode_split.cl build "$cpu decode_mma" decode_mma.cl "-DDTYPE=$dt $s $b"; done
    done
  done
  echo "vendor-compile: $n builds for $cpu ($insn) passed"
}
# RDNA3: shape_nv's shapes.
files="storage.cl ragged.cl variants.cl mma_common.cl mma_plain.cl mma_rdna.cl mma_rdna_tile.cl"
shapes=("-DDPAD=32 -DBM=128 -DBN=64 -DNW=4 -DQREG=1 -DSTAGES=2 -DFOLD=1"
  "-DDPAD=64 -DBM=128 -DBN=64 -DNW=4 -DQREG=1 -DSTAGES=2 -DFOLD=1"
  "-DDPAD=128 -DBM=128 -DBN=32 -DNW=4 -DQREG=0 -DSTAGES=1 -DFOLD=1"
  "-DDPAD=256 -DBM=64 -DBN=32 -DNW=4 -DQREG=1 -DSTAGES=1 -DFOLD=1")
cpu=gfx1100 insn=v_wmma_f32_16x16x16 amd
# CDNA (MFMA, wave64): shape_cdna's.
files="storage.cl ragged.cl variants.cl mma_common.cl mma_plain.cl mma_cdna.cl mma_cdna_tile.cl"
shapes=("-DDPAD=32 -DBM=128 -DBN=64 -DNW=4 -DQREG=1 -DSTAGES=2 -DFOLD=1"
  "-DDPAD=64 -DBM=128 -DBN=64 -DNW=4 -DQREG=1 -DSTAGES=2 -DFOLD=1"
  "-DDPAD=128 -DBM=128 -DBN=32 -DNW=4 -DQREG=1 -DSTAGES=2 -DFOLD=1"
  "-DDPAD=256 -DBM=64 -DBN=32 -DNW=4 -DQREG=1 -DSTAGES=1 -DFOLD=1")
cpu=gfx90a insn=v_mfma_f32_16x16x16 amd

# Intel: ocl_mma.c's shape_xe (64 x 32 on 8 sub-groups; single-buffered at 256).
files="storage.cl ragged.cl variants.cl mma_common.cl mma_plain.cl mma_xe.cl mma_xe_tile.cl"
shapes=("-DDPAD=32 -DBM=64 -DBN=32 -DNW=8 -DQREG=1 -DSTAGES=2 -DFOLD=1"
  "-DDPAD=64 -DBM=64 -DBN=32 -DNW=8 -DQREG=1 -DSTAGES=2 -DFOLD=1"
  "-DDPAD=128 -DBM=64 -DBN=32 -DNW=8 -DQREG=1 -DSTAGES=2 -DFOLD=1"
  "-DDPAD=256 -DBM=64 -DBN=32 -DNW=8 -DQREG=1 -DSTAGES=1 -DFOLD=1")
n=0
xbuild() { # label, kernel file, device, options
  local src="$work/src.cl" bin="$work/x"
  (cd "$dir" && cat $files ${pre:-} "$2") > "$src"
  rm -rf "$work/dis" "$bin"*
  if ! LD_LIBRARY_PATH="$olib:$olib/intel-opencl" "$oroot/usr/bin/ocloc" compile -q -file "$src" \
      -device "$3" -options "-cl-std=CL1.2 $4" -output_no_suffix -output "$bin" > "$work/log" 2>&1; then
    echo "vendor-compile: $1 did not build for $3 ($4):"; cat "$work/log"; exit 1
  fi
  LD_LIBRARY_PATH="$olib:$olib/intel-opencl" "$oroot/usr/bin/ocloc" disasm -file "$bin" \
    -device "$3" -dump "$work/dis" > /dev/null 2>&1 || true
  if ! grep -qs "dpas" "$work"/dis/*.asm; then
    echo "vendor-compile: $1 built without DPAS instructions for $3 ($4)"; exit 1
  fi
  if grep -qsE "^\s*calla? " "$work"/dis/*.asm; then
    echo "vendor-compile: $1 for $3 makes calls (an unresolved builtin?) ($4):"
    grep -hE "^\s*calla? " "$work"/dis/*.asm | head -5; exit 1
  fi
  n=$((n + 1))
}
# ocloc takes 5-10 s a build: every shape plain in both dtypes, the ragged
# and variant builds in f16 at 64 and 256 (single- and double-buffered).
for target in "pvc -DXE_SG=16" "dg2-g10 -DXE_SG=8"; do
  dev=${target%% *} sg=${target#* }
  for dt in 1 2; do
    xbuild "xe probe" mma_probe.cl "$dev" "$sg -DDTYPE=$dt -DDPAD=32 -DBM=16 -DBN=16 -DNW=1 -DQREG=1"
    for s in "${shapes[@]}"; do xbuild "xe flash_mma" flash_mma.cl "$dev" "$sg -DDTYPE=$dt $s"; done
  done
  for s in "${shapes[1]}" "${shapes[3]}"; do
    for b in "${builds[@]:1}"; do xbuild "xe flash_mma" flash_mma.cl "$dev" "$sg -DDTYPE=1 $s $b"; done
  done
  # decode_mma.cl at d128 (8-row tiles: BM = 8 NW), dense in bf16, paged in f16.
  pre=decode_split.cl xbuild "xe decode_mma" decode_mma.cl "$dev" "$sg -DDTYPE=2 -DDPAD=128 -DBM=16 -DBN=16 -DNW=2 -DDSTAGES=3"
  pre=decode_split.cl xbuild "xe decode_mma" decode_mma.cl "$dev" \
    "$sg -DDTYPE=1 -DDPAD=128 -DBM=16 -DBN=16 -DNW=2 -DDSTAGES=3 -DFATTN_RAGGED=1 -DFATTN_PAGED=1"
done
echo "vendor-compile: $n builds for pvc and dg2-g10 (Intel XMX DPAS) passed"

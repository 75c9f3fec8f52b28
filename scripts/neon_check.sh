#!/usr/bin/env bash
# The CPU backend's NEON kernel (backends/cpu/cpu_neon.c) on an x86-64 machine:
# builds the library and the cmocka-free case-table runner for AArch64 with
# Debian's cross compiler (gcc-aarch64-linux-gnu) and runs cases that take the
# lane kernel (odd head dims, causal diagonals, GQA, decoding, strides, large
# logits, no keys) under qemu-user, with FATTN_CPU_ISA=neon, against the double
# reference. scripts/setup.sh installs both packages on x86-64 when root.
# Without them: a visible skip, or a failure when FATTN_TEST_REQUIRE names
# neon (CI). On an AArch64 machine the suite itself runs the NEON kernel.
# Usage: scripts/neon_check.sh [build dir (build-neon)]
set -euo pipefail
cd "$(dirname "$0")/.."
B=${1:-build-neon}
if [ "$(uname -m)" = aarch64 ]; then
  echo "neon_check: this machine is AArch64; the suite runs the NEON kernel natively"
  exit 0
fi
for tool in aarch64-linux-gnu-gcc qemu-aarch64; do
  command -v $tool >/dev/null && continue
  if [[ ",${FATTN_TEST_REQUIRE:-}," == *,neon,* ]]; then
    echo "neon_check: required (FATTN_TEST_REQUIRE=$FATTN_TEST_REQUIRE) but $tool is missing" >&2
    exit 1
  fi
  echo "neon_check: SKIPPED: no $tool (Debian: gcc-aarch64-linux-gnu qemu-user)"
  exit 0
done
cmake -S . -B "$B" -DCMAKE_SYSTEM_NAME=Linux -DCMAKE_SYSTEM_PROCESSOR=aarch64 \
  -DCMAKE_C_COMPILER=aarch64-linux-gnu-gcc -DCMAKE_BUILD_TYPE=Release -DFATTN_WERROR=ON \
  -DFATTN_CUDA=OFF -DFATTN_OPENCL=OFF -DFATTN_BUILD_TESTS=OFF -DFATTN_BUILD_EXAMPLES=ON \
  -DFATTN_BUILD_BENCH=OFF >/dev/null
cmake --build "$B" -j "$(nproc)" --target fattn_case_table >/dev/null
cases="seq 63 dim 40,seq 65 dim 80,seq 127 dim 96,causal seq 127 dim 256,causal sq>sk 65/7"
cases="$cases,causal sq<sk 63/129,GQA 8/2 causal bhsd,MQA 4/1 dim 256,decode 2/1000 gqa 8 br"
cases="$cases,kv strides differ dim 40,large logits causal,no keys,single key causal,head dim 1"
FATTN_CPU_ISA=neon FATTN_CPU_THREADS=2 qemu-aarch64 -L /usr/aarch64-linux-gnu \
  "$B/fattn_case_table" cpu "$cases"

# Sourced by demo.sh and test.sh: installs the Debian packages fattn builds
# and tests with, when they are missing and we are root; then nothing else.
# (clang-16 and llvm-16 compile the AMD matrix kernels, and an unpacked ocloc
# the Intel ones: tests/vendor_compile.sh.)
# Without root, missing packages are listed and the build goes on without
# the parts that need them.
fattn_packages="cmake make gcc g++ pkg-config libcmocka-dev ocl-icd-opencl-dev opencl-headers
  pocl-opencl-icd libclblast-dev clinfo clang-16 llvm-16"
# On x86-64, an AArch64 cross compiler, its C library (only recommended by
# the compiler's package, and setup installs no recommends) and qemu-user run
# the CPU backend's NEON kernel (scripts/neon_check.sh).
[ "$(uname -m)" = x86_64 ] &&
  fattn_packages="$fattn_packages gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user"
fattn_missing=""
for p in $fattn_packages; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
    fattn_missing="$fattn_missing $p"
done
if [ -n "$fattn_missing" ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "setup: installing$fattn_missing"
    apt-get update -qq &&
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $fattn_missing \
        >/dev/null || { echo "setup: apt-get failed" >&2; exit 1; }
  else
    echo "setup: missing packages (run as root to install):$fattn_missing" >&2
  fi
fi
# Intel's ocloc compiles the Intel matrix kernels (tests/vendor_compile.sh):
# Debian's intel-opencl-icd and its compiler libraries, unpacked with dpkg -x
# and never installed (installed, its ICD's loader makes ASan abort every
# OpenCL test).
fattn_ocloc=${FATTN_OCLOC_ROOT:-/var/cache/fattn-ocloc}
if [ ! -x "$fattn_ocloc/usr/bin/ocloc" ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  echo "setup: unpacking Intel's ocloc into $fattn_ocloc"
  fattn_debs=$(mktemp -d) && chmod 777 "$fattn_debs"
  p="intel-opencl-icd libigc1 libigdfcl1 libigdgmm12 libopencl-clang14 libllvmspirvlib14 libllvm14"
  if (cd "$fattn_debs" && { apt-get download $p >/dev/null 2>&1 ||
      { apt-get update -qq && apt-get download $p >/dev/null 2>&1; }; }); then
    for d in "$fattn_debs"/*.deb; do dpkg -x "$d" "$fattn_ocloc"; done
    ln -sf libiga64.so.1 "$fattn_ocloc/usr/lib/x86_64-linux-gnu/libiga64.so" # ocloc disasm opens this name
  else
    echo "setup: could not download intel-opencl-icd and its libraries (no ocloc)" >&2
  fi
  rm -rf "$fattn_debs"
fi
# test.sh also fuzzes, with a clang whose libFuzzer links. On Debian 12
# PoCL's clang-15 has one; elsewhere the distribution's default clang and its
# runtimes (libclang-rt-dev) are added.
if [ "${fattn_setup_fuzz:-0}" = 1 ] && ! scripts/fuzz.sh --compiler >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "setup: installing clang libclang-rt-dev (for scripts/fuzz.sh)"
    apt-get update -qq &&
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends clang libclang-rt-dev \
        >/dev/null || { echo "setup: apt-get failed" >&2; exit 1; }
  else
    echo "setup: no clang with libFuzzer (run as root to install clang libclang-rt-dev)" >&2
  fi
fi
fattn_jobs=$(nproc 2>/dev/null || echo 2)
unset fattn_packages fattn_missing fattn_setup_fuzz fattn_ocloc fattn_debs p d

# Sourced by demo.sh and test.sh: installs the Debian packages fattn builds
# and tests with, when they are missing and we are root; then nothing else.
# (clang-16 and llvm-16 compile the AMD matrix kernels: tests/vendor_compile.sh.)
# Without root, missing packages are listed and the build goes on without
# the parts that need them.
fattn_packages="cmake make gcc g++ pkg-config libcmocka-dev ocl-icd-opencl-dev opencl-headers
  pocl-opencl-icd libclblast-dev clinfo clang-16 llvm-16"
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
unset fattn_packages fattn_missing fattn_setup_fuzz p

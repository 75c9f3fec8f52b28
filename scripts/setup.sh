# Sourced by demo.sh and test.sh: installs the Debian packages fattn builds
# and tests with, when they are missing and we are root; then nothing else.
# Without root, missing packages are listed and the build goes on without
# the parts that need them.
fattn_packages="cmake make gcc g++ pkg-config libcmocka-dev ocl-icd-opencl-dev opencl-headers
  pocl-opencl-icd libclblast-dev clinfo"
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
fattn_jobs=$(nproc 2>/dev/null || echo 2)
unset fattn_packages fattn_missing p

#!/usr/bin/env bash
# The Python package: pip install ./python into a fresh virtual environment
# (build-py/venv), then its pytest suite against the installed package.
# CI (FATTN_TEST_REQUIRE containing "python") fails where this cannot run;
# elsewhere a missing Python is a visible skip.
# The wheel leaves CUDA out here (-C cmake.define.FATTN_CUDA=OFF): the suite
# has no GPU to run it on, and the C build has compiled it already. On a
# GPU machine, run plain `pip install ./python` (bench/results' scripts do).
set -euo pipefail
cd "$(dirname "$0")/.."
required=0
[[ ",${FATTN_TEST_REQUIRE:-}," == *,python,* ]] && required=1
skip() {
  echo "python: $*" >&2
  [ "$required" = 1 ] && { echo "python: required (FATTN_TEST_REQUIRE)" >&2; exit 1; }
  echo "python: skipped" >&2
  exit 0
}
py=$(command -v python3 || true)
[ -n "$py" ] || skip "no python3"
venv=build-py/venv
if [ ! -x "$venv/bin/python" ]; then
  if ! "$py" -m venv "$venv" 2>/dev/null; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
      apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
        --no-install-recommends python3-venv >/dev/null
      rm -rf "$venv" && "$py" -m venv "$venv" || skip "python3 -m venv failed"
    else
      skip "python3 -m venv failed (Debian: python3-venv)"
    fi
  fi
fi
pip() { "$venv/bin/python" -m pip --disable-pip-version-check -q "$@"; }
pip install numpy ml_dtypes pytest || skip "pip could not install numpy, ml_dtypes, pytest"
pip install ./python -C cmake.define.FATTN_CUDA=OFF
# From the tests' directory, so `import fattn` is the installed package.
cd python/tests
FATTN_TEST_PY_BACKENDS=${FATTN_TEST_PY_BACKENDS:-cpu,opencl} \
  "../../$venv/bin/python" -m pytest -q -rs -p no:cacheprovider .

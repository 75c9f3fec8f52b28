#!/usr/bin/env bash
# Session 2026-11-24l, call 87: the package's final state (each call holding
# its context's lock from the first wrapper to the last free) on the H200:
# pip install ./python, python/tests (CPU, NVIDIA OpenCL, PyTorch and CuPy
# CUDA tensors), and the overhead again.
set -u
source .devkit/env.sh
export FATTN_OPENCL_DEVICE=NVIDIA
O=/tmp/o87; rm -rf $O; mkdir -p $O
fin() { tar czf $OUT/out.tgz -C $O .; }
trap fin EXIT
start=$(date +%s)
CMAKE_BUILD_PARALLEL_LEVEL=16 python3 -m pip install --no-build-isolation --no-deps --no-index \
  -C cmake.define.FATTN_CUDA_ARCHS=90 ./python > $O/pip.log 2>&1
echo "pip install rc $? in $(( $(date +%s) - start )) s" | tee $O/summary.txt
(cd python/tests && timeout 400 python3 -m pytest -q -rs -p no:cacheprovider . > $O/pytest.txt 2>&1; echo "pytest rc $?" >> $O/summary.txt)
tail -4 $O/pytest.txt
timeout 120 python3 bench/python_overhead.py > $O/overhead.jsonl 2> $O/overhead.err
echo "overhead rc $?" >> $O/summary.txt
cat $O/summary.txt $O/overhead.jsonl

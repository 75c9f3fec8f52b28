#!/usr/bin/env bash
# Session 2026-11-24l, call 86: issue 17 on the H200, after call 85 (the CUDA test compared bottom-right with SDPA's top-left causal; PyTorch tensors now read directly, not through a DLPack capsule each, and the Python overhead profiled). pip install ./python as
# a user would (CUDA and OpenCL modules included; the machine is offline, so
# scikit-build-core comes from the image: --no-build-isolation), then the
# package's tests (CPU, NVIDIA OpenCL, PyTorch and CuPy CUDA tensors), the
# Python call's overhead over the C call, and peers_torch.py with the
# "fattn-python" column beside SDPA's backends, plus fattn_bench (C) on the
# same shapes from the same build.
set -u
source .devkit/env.sh
export FATTN_OPENCL_DEVICE=NVIDIA
O=/tmp/o86; rm -rf $O; mkdir -p $O
fin() { tar czf $OUT/out.tgz -C $O .; }
trap fin EXIT
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u; git log -1 --format=%H;
  python3 --version; python3 -c "import torch; print('torch', torch.__version__)"; } > $O/machine.txt 2>&1
start=$(date +%s)
CMAKE_BUILD_PARALLEL_LEVEL=16 python3 -m pip install --no-build-isolation --no-deps --no-index \
  -C cmake.define.FATTN_CUDA_ARCHS=90 -C cmake.define.FATTN_BUILD_BENCH=ON ./python > $O/pip.log 2>&1
echo "pip install rc $? in $(( $(date +%s) - start )) s" | tee $O/summary.txt
python3 -c "import fattn, json; print(fattn.__version__, fattn.__file__); print(json.dumps(fattn.backends(), indent=1))" >> $O/summary.txt 2>&1
(cd python/tests && timeout 400 python3 -m pytest -q -rs -p no:cacheprovider . > $O/pytest.txt 2>&1; echo "pytest rc $?" >> $O/summary.txt)
tail -15 $O/pytest.txt
timeout 120 python3 bench/python_overhead.py --profile $O/overhead_profile.txt > $O/overhead.jsonl 2> $O/overhead.err
echo "overhead rc $?" >> $O/summary.txt
SH="--shape 4x16x4096x128 --shape 4x16x4096x128c --shape 2x16x8192x64c --shape 1x32:8x1:32768x128 --shape 8x32:8x1:32768x128 --shape 1x32:8x1:4096x128"
timeout 200 python3 bench/peers_torch.py --no-sweep --fattn-python --dtypes bf16,f16 --iters 20 $SH > $O/peers.jsonl 2> $O/peers.err
echo "peers rc $?" >> $O/summary.txt
bench=$(ls python/build/*/fattn_bench | head -1)
timeout 200 $bench --backend cuda --no-sweep --dtype bf16,f16 --iters 20 --no-naive $SH --json $O/fattn_c.json > $O/fattn_c.txt 2>&1
echo "fattn_bench rc $?" >> $O/summary.txt
cat $O/summary.txt; cat $O/overhead.jsonl
python3 - $O <<'PY'
import json, sys
O = sys.argv[1]
rows = {}
for line in open(f"{O}/peers.jsonl"):
    r = json.loads(line)
    if "ms" in r:
        rows.setdefault((r["dtype"], r["batch"], r["heads"], r["heads_kv"], r["seq"], r["seq_kv"], r["dim"], r["causal"]), {})[r["peer"]] = r["ms"]
print("dtype b hq hkv sq skv d causal | fattn-python ms | flash | cudnn | py/cudnn (time)")
for k, v in rows.items():
    p, c = v.get("fattn-python"), v.get("torch-cudnn")
    print(*k, "|", p, "|", v.get("torch-flash"), "|", c, "|", round(c / p, 3) if p and c else "-")
PY

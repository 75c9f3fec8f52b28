#!/usr/bin/env bash
# Session 2026-11-24k, call 84: issue 16's f32 bar on the GPU host's CPU (16 cores), measured in
# alternating rounds (fattn f32 sweep, then PyTorch's CPU SDPA on the same shapes, three times)
# so that the shared host's drift falls on both alike; the ratio per round and its median.
set -u
source .devkit/env.sh
O=/tmp/o84; rm -rf $O; mkdir -p $O
fin() { tar czf $OUT/out.tgz -C $O .; }
trap fin EXIT
{ lscpu | grep -E "Model name|^CPU\(s\)"; nproc; date -u; git log -1 --format=%H 2>/dev/null; } > $O/machine.txt
cmake -S . -B build-new -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA=OFF -DFATTN_OPENCL=OFF \
  -DFATTN_BUILD_TESTS=OFF -DFATTN_BUILD_EXAMPLES=OFF > $O/build.log 2>&1 &&
  cmake --build build-new -j16 --target fattn_bench >> $O/build.log 2>&1 || { tail -20 $O/build.log; exit 1; }
for r in 1 2 3; do
  timeout 150 ./build-new/fattn_bench --backend cpu --seqs 512,1024,2048,4096 --dims 64,128 \
    --causal both --dtype f32 --no-naive --iters 5 --warmup 1 --budget 20 --no-stream \
    --csv $O/fattn_r$r.csv > $O/fattn_r$r.txt 2>&1
  echo "fattn r$r rc $?" >> $O/summary.txt
  timeout 150 python3 bench/peer_cpu_sdpa.py --iters 5 --dtypes f32 > $O/torch_r$r.csv 2> $O/torch_r$r.err
  echo "torch r$r rc $?" >> $O/summary.txt
done
cat $O/summary.txt
python3 - $O <<'PY'
import csv, statistics, sys
O = sys.argv[1]
rows = {}
for r in (1, 2, 3):
    for x in csv.DictReader(open(f"{O}/fattn_r{r}.csv")):
        if x["status"] == "ok":
            rows.setdefault((int(x["seq"]), int(x["dim"]), int(x["causal"])), {}).setdefault("f", []).append(float(x["ms"]))
    for line in open(f"{O}/torch_r{r}.csv"):
        if line[0] in "#d": continue
        t = line.strip().split(",")
        rows.setdefault((int(t[1]), int(t[2]), int(t[3])), {}).setdefault("t", []).append(float(t[6]))
print("seq dim causal | fattn ms r1 r2 r3 | torch ms r1 r2 r3 | ratio per round | median ratio")
for k in sorted(rows):
    f, t = rows[k].get("f", []), rows[k].get("t", [])
    rat = [b / a for a, b in zip(f, t)]
    print(k, [round(x, 1) for x in f], [round(x, 1) for x in t], [round(x, 2) for x in rat],
          round(statistics.median(rat), 2) if rat else None)
PY

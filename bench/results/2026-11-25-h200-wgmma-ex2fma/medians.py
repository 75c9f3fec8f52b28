#!/usr/bin/env python3
"""Median of a call's interleaved rounds per cell, as JSON lines bench/compare.py reads:
fattn rows from fattn_bench CSVs (argv[1], a glob), labelled argv[3]; peer rows from
peers_torch.py JSON lines (argv[2], a glob). TFLOP/s and GB/s rescaled to the median time.
Writes to stdout."""
import csv, glob, json, statistics as st, sys
from collections import defaultdict

def emit(rows, key):
    for k, v in rows.items():
        ms = st.median(r["ms"] for r in v)
        j = dict(v[0])
        for f in ("tflops", "gbps"):
            if j.get(f):
                j[f] = j[f] * j["ms"] / ms
        j["ms"] = ms
        print(json.dumps(j))

f = defaultdict(list)
for path in glob.glob(sys.argv[1]):
    for r in csv.DictReader(open(path)):
        if r["status"] != "ok":
            continue
        j = {"backend": r["backend"], "device": r["device"], "dtype": r["dtype"], "status": "ok",
             "device_name": sys.argv[3], "kv_layout": "dense", "page_size": 0,
             "ms": float(r["ms"]), "tflops": float(r["tflops"])}
        for n in ("batch", "heads", "seq", "dim", "causal", "heads_kv", "seq_kv"):
            j[n] = int(r[n])
        f[tuple(j[n] for n in ("dtype", "batch", "heads", "seq", "dim", "causal"))].append(j)
p = defaultdict(list)
for path in glob.glob(sys.argv[2]):
    for line in open(path):
        j = json.loads(line)
        if "ms" in j:
            p[tuple(j[n] for n in ("peer", "dtype", "batch", "heads", "seq", "dim", "causal"))].append(j)
emit(f, None)
emit(p, None)

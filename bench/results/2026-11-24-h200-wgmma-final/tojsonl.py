#!/usr/bin/env python3
"""fattn_bench CSV rows as bench/compare.py's JSON lines, the kernel named in the device name
(compare.py keys its columns by backend and device): tojsonl.py CSV LABEL > OUT.jsonl"""
import csv, json, sys
for r in csv.DictReader(open(sys.argv[1])):
    out = {k: r[k] for k in ("backend", "device", "dtype", "status")}
    out["device_name"] = f"H200 {sys.argv[2]}"
    for k in ("batch", "heads", "seq", "dim", "causal", "heads_kv", "seq_kv"):
        out[k] = int(r[k])
    out["kv_layout"] = r["kv_layout"]
    out["page_size"] = int(r["page_size"] or 0)
    if r["status"] == "ok":
        out["tflops"], out["ms"] = float(r["tflops"]), float(r["ms"])
    print(json.dumps(out))

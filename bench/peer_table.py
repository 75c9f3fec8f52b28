#!/usr/bin/env python3
"""Joins fattn_bench CSV rows with peer_sdpa.py JSON lines (same shapes, same
run) into a Markdown table: fattn against FlashAttention-2 (f16/bf16) or
PyTorch's memory-efficient kernel (f32), cuDNN alongside, the naive baseline
and the device memory each call was measured to hold.

Usage: bench/peer_table.py FATTN_CSV PEERS_JSONL > table.md
"""
import csv
import json
import sys


def gib(n):
    return "–" if n in ("", None) else f"{int(n) / 2**30:.3g} GiB"


def main(csv_path, jsonl_path):
    peers = {}
    with open(jsonl_path) as f:
        for line in f:
            if line.startswith("{"):
                j = json.loads(line)
                peers[(j["peer"], j["dtype"], j["seq"], j["dim"], j["causal"])] = j["tflops"]
    cols = ["dtype", "B", "H", "seq", "dim", "causal", "fattn ms", "fattn TFLOP/s", "torch-flash (FA2)",
            "torch-cudnn", "torch-efficient", "fattn / bar peer", "naive ms", "naive TFLOP/s",
            "tiled: memory measured", "naive: memory measured"]
    print("| " + " | ".join(cols) + " |")
    print("|" + "---|" * len(cols))
    with open(csv_path) as f:
        for r in csv.DictReader(f):
            key = (r["dtype"], int(r["seq"]), int(r["dim"]), int(r["causal"]))
            fl, cd, ef = (peers.get((p,) + key) for p in ("torch-flash", "torch-cudnn", "torch-efficient"))
            bar = ef if r["dtype"] == "f32" else fl
            ratio = f"**{float(r['tflops']) / bar:.2f}x**" if bar else "–"
            cells = [r["dtype"], r["batch"], r["heads"], r["seq"], r["dim"], r["causal"], f"{float(r['ms']):.3f}",
                     f"{float(r['tflops']):.1f}", fl or "–", cd or "–", ef or "–", ratio,
                     f"{float(r['naive_ms']):.2f}" if r.get("naive_ms") else "–",
                     f"{float(r['naive_tflops']):.1f}" if r.get("naive_tflops") else "–",
                     gib(r.get("flash_measured_bytes")), gib(r.get("naive_measured_bytes"))]
            print("| " + " | ".join(str(c) for c in cells) + " |")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])

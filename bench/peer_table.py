#!/usr/bin/env python3
"""Joins fattn_bench CSV rows with the peers' JSON lines (bench/peers_torch.py,
or .devkit/peer_sdpa.py; same shapes, same run) into Markdown tables.

Square multi-head rows (the papers' sweep): fattn against FlashAttention-2
(f16/bf16) or PyTorch's memory-efficient kernel (f32), cuDNN alongside, the
naive baseline and the device memory each call was measured to hold.
Decode and other shapes (GQA, seq_q != seq_kv: fattn_bench --decode,
peers_torch.py --decode) follow in a second table keyed by batch, seq_kv,
heads, dim and dtype: fattn's time and GB/s (Q, K, V and O moved once) and
each peer's, side by side, and the best peer's time over fattn's. CSV files
and JSON lines from before the heads_kv / seq_kv / gbps columns read as
square shapes.

Usage: bench/peer_table.py FATTN_CSV PEERS_JSONL > table.md
"""
import csv
import json
import sys

PEERS = ("torch-flash", "torch-cudnn", "torch-efficient")


def gib(n):
    return "–" if n in ("", None) else f"{int(n) / 2**30:.3g} GiB"


def rate(gb):
    return f"{gb / 1e3:.2f} TB/s" if gb >= 1000 else f"{gb:.3g} GB/s"


def shape_of(r):
    """(dtype, batch, heads, heads_kv, seq, seq_kv, dim, causal) of a CSV or JSON row."""
    heads, seq = int(r["heads"]), int(r["seq"])
    hkv = r.get("heads_kv") if r.get("heads_kv") not in (None, "") else heads
    skv = r.get("seq_kv") if r.get("seq_kv") not in (None, "") else seq
    return (r["dtype"], int(r["batch"]), heads, int(hkv), seq, int(skv), int(r["dim"]), int(r["causal"]))


def square(key):
    return key[2] == key[3] and key[4] == key[5]


def peer_cell(j):
    if j is None:
        return "–"
    if "error" in j:
        return "refused"
    if j.get("status", "ok") != "ok" or j.get("ms") is None:
        return j.get("status", "–")
    gb = j.get("gbps")
    return f"{j['ms']:.3g} ms" + (f" ({rate(gb)})" if gb else "")


def main(csv_path, jsonl_path):
    peers, peers_full = {}, {}
    with open(jsonl_path) as f:
        for line in f:
            if line.startswith("{"):
                j = json.loads(line)
                key = shape_of(j)
                peers_full[(j["peer"],) + key] = j
                if square(key):  # the papers' sweep: (seq, dim) fixes batch and heads
                    peers[(j["peer"], j["dtype"], j["seq"], j["dim"], j["causal"])] = j.get("tflops")
    with open(csv_path) as f:
        rows = list(csv.DictReader(f))
    prefill = [r for r in rows if square(shape_of(r))]
    decode = [r for r in rows if not square(shape_of(r))]
    if prefill or not decode:
        cols = ["dtype", "B", "H", "seq", "dim", "causal", "fattn ms", "fattn TFLOP/s", "torch-flash (FA2)",
                "torch-cudnn", "torch-efficient", "fattn / bar peer", "naive ms", "naive TFLOP/s",
                "tiled: memory measured", "naive: memory measured"]
        print("| " + " | ".join(cols) + " |")
        print("|" + "---|" * len(cols))
        for r in prefill:
            key = (r["dtype"], int(r["seq"]), int(r["dim"]), int(r["causal"]))
            fl, cd, ef = (peers.get((p,) + key) for p in PEERS)
            bar = ef if r["dtype"] == "f32" else fl
            ok = r.get("status", "ok") == "ok" and r.get("tflops")
            ratio = f"**{float(r['tflops']) / bar:.2f}x**" if bar and ok else "–"
            cells = [r["dtype"], r["batch"], r["heads"], r["seq"], r["dim"], r["causal"],
                     f"{float(r['ms']):.3f}" if ok else r.get("status", "–"),
                     f"{float(r['tflops']):.1f}" if ok else "–", fl or "–", cd or "–", ef or "–", ratio,
                     f"{float(r['naive_ms']):.2f}" if r.get("naive_ms") else "–",
                     f"{float(r['naive_tflops']):.1f}" if r.get("naive_tflops") else "–",
                     gib(r.get("flash_measured_bytes")), gib(r.get("naive_measured_bytes"))]
            print("| " + " | ".join(str(c) for c in cells) + " |")
    if decode:
        if prefill:
            print()
        print("Decode and other shapes: median time and GB/s (Q, K, V and O, each moved once, over the time); "
              "best peer / fattn: the fastest peer's time over fattn's (above 1: fattn is faster).")
        print()
        cols = ["batch", "seq_kv", "heads (q/kv)", "seq_q", "dim", "dtype", "causal", "fattn ms", "fattn GB/s",
                "torch-flash (FA2)", "torch-cudnn", "torch-efficient", "best peer / fattn"]
        print("| " + " | ".join(cols) + " |")
        print("|" + "---|" * len(cols))
        rank = {"f32": 0, "f16": 1, "bf16": 2}
        decode.sort(key=lambda r: (lambda k: (k[1], k[5], k[3], k[2], k[4], k[6], rank.get(k[0], 3), k[7]))(
            shape_of(r)))
        for r in decode:
            key = shape_of(r)
            got = [peers_full.get((p,) + key) for p in PEERS]
            ok = r.get("status", "ok") == "ok" and r.get("ms")
            best = min((j["ms"] for j in got if j and "error" not in j and j.get("ms")), default=None)
            gb = r.get("gbps")
            cells = [key[1], key[5], f"{key[2]}/{key[3]}", key[4], key[6], key[0], key[7],
                     f"{float(r['ms']):.4g}" if ok else r.get("status", "–"),
                     rate(float(gb)) if ok and gb not in (None, "") else "–"] + [peer_cell(j) for j in got] + \
                [f"**{best / float(r['ms']):.3g}x**" if ok and best else "–"]
            print("| " + " | ".join(str(c) for c in cells) + " |")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])

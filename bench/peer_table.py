#!/usr/bin/env python3
"""Joins fattn_bench CSV rows with the peers' JSON lines (bench/peers_torch.py,
or .devkit/peer_sdpa.py; same shapes, same run) into Markdown tables.

Square multi-head rows (the papers' sweep): fattn against FlashAttention-2
(f16/bf16) or PyTorch's memory-efficient kernel (f32), cuDNN alongside, the
naive baseline and the device memory each call was measured to hold.
Decode and other shapes (GQA, seq_q != seq_kv: fattn_bench --decode,
peers_torch.py --decode) follow in a second table keyed by batch, seq_kv,
heads, dim and dtype: fattn's time and GB/s (Q, K, V and O moved once) and
each peer's, side by side, and the best peer's time over fattn's; with the
backend, the K/V storage (dense, a paged cache's page size, varied lengths),
GB/s as a share of the device's bandwidth (bw_pct: of --hbm-gbps on a GPU,
of the host's STREAM copy on a CPU), and a paged row's time over the
contiguous row's (peers have no paged cache: a paged row is set against the
peers' contiguous time). CSV files and JSON lines from before the heads_kv /
seq_kv / gbps columns read as square shapes; from before kv_layout, dense.

Usage: bench/peer_table.py FATTN_CSV... PEERS_JSONL > table.md
(several CSVs, e.g. one per backend from run_gpu.sh decodebars, make one table)
"""
import csv
import json
import sys
from collections import OrderedDict

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


def kv_of(r):
    """(kv_layout, page_size, kv_lens) of a CSV row; ("dense", 0, "") for older files."""
    return (r.get("kv_layout") or "dense", int(r.get("page_size") or 0), r.get("kv_lens") or "")


def kv_text(kv):
    layout, page, lens = kv
    if layout == "paged":
        return f"page {page}" + (f", lens {lens.replace(';', '/')}" if lens else "")
    return f"{layout} {lens.replace(';', '/')}".strip()


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


def main(csv_paths, jsonl_path):
    peers, peers_full = {}, {}
    with open(jsonl_path) as f:
        for line in f:
            if line.startswith("{"):
                j = json.loads(line)
                key = shape_of(j)
                peers_full[(j["peer"],) + key] = j
                if square(key):  # the papers' sweep: (seq, dim) fixes batch and heads
                    peers[(j["peer"], j["dtype"], j["seq"], j["dim"], j["causal"])] = j.get("tflops")
    rows = []
    for path in csv_paths:
        with open(path) as f:
            rows += list(csv.DictReader(f))
    prefill = [r for r in rows if square(shape_of(r)) and kv_of(r)[0] == "dense"]
    decode = [r for r in rows if not (square(shape_of(r)) and kv_of(r)[0] == "dense")]
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
        print("Decode and other shapes: median time and GB/s (Q, K, V and O, each moved once, only the keys "
              "each sequence uses, over the time), with its share of the device's bandwidth (HBM: --hbm-gbps; "
              "STREAM: the host's copy); paged / contiguous: a paged row's time over the same backend's "
              "contiguous row (bar: at most 1.1x); best peer / fattn: the fastest peer's time over fattn's "
              "(above 1: fattn is faster; a paged row against the peers' contiguous time).")
        print()
        cols = ["batch", "seq_kv", "heads (q/kv)", "seq_q", "dim", "dtype", "causal", "K/V", "backend", "fattn ms",
                "fattn GB/s", "paged / contiguous", "torch-flash (FA2)", "torch-cudnn", "torch-efficient",
                "best peer / fattn"]
        print("| " + " | ".join(cols) + " |")
        print("|" + "---|" * len(cols))
        rank = {"f32": 0, "f16": 1, "bf16": 2}
        layout_rank = {"dense": 0, "paged": 1, "padded": 2, "packed": 3}
        decode.sort(key=lambda r: (lambda k, kv: (k[1], k[5], k[3], k[2], k[4], k[6], rank.get(k[0], 3), k[7],
                                                  layout_rank.get(kv[0], 4), kv[1], kv[2], r["backend"],
                                                  int(r["device"])))(shape_of(r), kv_of(r)))
        ms_of = {(r["backend"], r["device"], shape_of(r), kv_of(r)): r for r in decode}
        for r in decode:
            key, kv = shape_of(r), kv_of(r)
            got = [peers_full.get((p,) + key) for p in PEERS] if kv[0] in ("dense", "paged") and not kv[2] else \
                [None] * len(PEERS)
            ok = r.get("status", "ok") == "ok" and r.get("ms")
            best = min((j["ms"] for j in got if j and "error" not in j and j.get("ms")), default=None)
            gb, pct = r.get("gbps"), r.get("bw_pct")
            ref = {"hbm": "HBM", "stream": "STREAM"}.get(r.get("bw_ref") or "", "")
            dense = ms_of.get((r["backend"], r["device"], key, ("dense", 0, ""))) if kv[0] == "paged" else None
            dense_ok = dense is not None and dense.get("status", "ok") == "ok" and dense.get("ms")
            cells = [key[1], key[5], f"{key[2]}/{key[3]}", key[4], key[6], key[0], key[7], kv_text(kv),
                     f"{r['backend']} {r['device']}",
                     f"{float(r['ms']):.4g}" if ok else r.get("status", "–"),
                     (rate(float(gb)) + (f" ({float(pct):.0f}% {ref})" if pct not in (None, "") else ""))
                     if ok and gb not in (None, "") else "–",
                     f"{float(r['ms']) / float(dense['ms']):.3g}x" if ok and dense_ok else "–"] + \
                [peer_cell(j) for j in got] + [f"**{best / float(r['ms']):.3g}x**" if ok and best else "–"]
            print("| " + " | ".join(str(c) for c in cells) + " |")
        notes = OrderedDict()
        for r in decode:
            if r.get("status") == "unsupported":
                notes.setdefault(f"{r['backend']} {r['device']}: {r.get('note', '')}", None)
        for n in notes:
            print(f"\nunsupported on {n}")


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    main(sys.argv[1:-1], sys.argv[-1])

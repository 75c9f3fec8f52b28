#!/usr/bin/env python3
"""Joins fattn_bench's JSON lines with the PyTorch peers' (bench/peers_torch.py)
into one side-by-side table (Markdown, printed and written to OUT/table.md) and,
where matplotlib is installed, PNG charts in OUT/: throughput against sequence
length (grouped bars per seq, one per implementation, a panel per head dim and
causal, a figure per dtype) and the device memory each path held.

Usage: bench/compare.py FATTN_JSONL [PEERS_JSONL] --out DIR
"""
import argparse
import json
import os
from collections import OrderedDict


def load(path):
    rows = []
    if path and os.path.exists(path):
        with open(path) as f:
            rows = [json.loads(line) for line in f if line.startswith("{")]
    return rows


def short(name):
    """A device name short enough for a column header."""
    for cut in (" (", ","):
        name = name.split(cut)[0]
    return name.replace("cpu-", "PoCL ").replace("pthread-", "PoCL ")[:28]


def columns(fattn, peers):
    """Implementation -> {(dtype, seq, dim, causal): row}, fattn first."""
    cols = OrderedDict()
    for r in fattn:
        cols.setdefault(f"fattn {r['backend']} {r['device']}: {short(r['device_name'])}", {})[
            (r["dtype"], r["seq"], r["dim"], r["causal"])] = r
    for r in peers:
        cols.setdefault(r["peer"], {})[(r["dtype"], r["seq"], r["dim"], r["causal"])] = r
    return cols


def cell(r):
    if r is None:
        return "–"
    if "error" in r:
        return "refused"
    if r.get("status", "ok") != "ok":
        return r["status"]
    return f"{r['tflops']:.3g}"


def table(fattn, peers):
    cols = columns(fattn, peers)
    keys = list(OrderedDict.fromkeys((r["dtype"], r["seq"], r["dim"], r["causal"]) for r in fattn))
    shape = {(r["dtype"], r["seq"], r["dim"], r["causal"]): (r["batch"], r["heads"]) for r in fattn}
    naive_col = next((c for c in cols if c.startswith("fattn cuda")), next(iter(cols), None))
    head = ["dtype", "seq", "dim", "causal", "B x H"] + list(cols) + [f"naive ({naive_col.split(':')[0]})" if naive_col else "naive"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for k in keys:
        b, h = shape[k]
        cells = [k[0], str(k[1]), str(k[2]), str(k[3]), f"{b}x{h}"] + [cell(cols[c].get(k)) for c in cols]
        n = cols[naive_col].get(k) if naive_col else None
        cells.append(f"{n['naive_tflops']:.3g}" if n and "naive_tflops" in n else
                     "no room" if n and n.get("naive_note", "").startswith("impossible") else "–")
        lines.append("| " + " | ".join(cells) + " |")
    return "TFLOP/s, higher is better; fattn counts 4·B·H·S²·D (unmasked pairs when causal) for every column.\n\n" + \
        "\n".join(lines) + "\n"


def charts(fattn, peers, out):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("compare.py: no matplotlib, no charts (apt-get install python3-matplotlib)")
        return []
    cols = columns(fattn, peers)
    # Implementations under 1 TFLOP/s everywhere (CPUs) would be invisible bars: table only.
    best = {n: max([r.get("tflops", 0) or 0 for r in c.values()] or [0]) for n, c in cols.items()}
    drawn = [n for n in cols if best[n] >= 1]
    left_out = [n for n in cols if best[n] < 1]
    colour = {n: f"C{i % 10}" for i, n in enumerate(drawn)}
    made = []
    for dt in OrderedDict.fromkeys(r["dtype"] for r in fattn):
        dims = sorted({r["dim"] for r in fattn if r["dtype"] == dt})
        impls = [n for n in drawn if any(k[0] == dt and cell(r) not in ("–", "refused", "skipped", "error")
                                         for k, r in cols[n].items())]
        fig, axes = plt.subplots(len(dims), 2, figsize=(15, 4.2 * len(dims)), squeeze=False)
        w = 0.8 / max(len(impls), 1)
        for i, d in enumerate(dims):
            for c in (0, 1):
                ax = axes[i][c]
                seqs = sorted({r["seq"] for r in fattn if r["dtype"] == dt and r["dim"] == d})
                for j, n in enumerate(impls):
                    ys = [cols[n].get((dt, s, d, c), {}).get("tflops", 0) or 0 for s in seqs]
                    bars = ax.bar([x + j * w for x in range(len(seqs))], ys, w, label=n, color=colour[n])
                    ax.bar_label(bars, labels=[f"{y:.0f}" if y else "" for y in ys], fontsize=6, rotation=90, padding=2)
                ax.set_xticks([x + w * (len(impls) - 1) / 2 for x in range(len(seqs))], [str(s) for s in seqs])
                ax.set_xlabel("sequence length")
                ax.set_ylabel("TFLOP/s")
                ax.set_title(f"{dt}, head dim {d}, {'causal' if c else 'not causal'}")
                ax.margins(y=0.15)
        handles, labels = axes[0][0].get_legend_handles_labels()
        fig.legend(handles, labels, loc="lower center", ncol=3, fontsize=8)
        note = f" — not drawn (under 1 TFLOP/s, see table.md): {', '.join(left_out)}" if left_out else ""
        fig.suptitle(f"Attention forward throughput, {dt} (batch·seq 16384, heads·dim 2048){note}", fontsize=10)
        fig.tight_layout(rect=(0, 0.08, 1, 0.96))
        path = os.path.join(out, f"throughput_{dt}.png")
        fig.savefig(path, dpi=110)
        plt.close(fig)
        made.append(path)
    # Memory: the device memory each path held while it ran, for the first GPU backend.
    gpu = [r for r in fattn if r["backend"] == "cuda"] or [r for r in fattn if r["backend"] == "opencl"]
    mem = [r for r in gpu if r["dim"] == max(x["dim"] for x in gpu) and r["causal"] == 0 and r["device"] == gpu[0]["device"]
           and r["dtype"] == gpu[0]["dtype"] and r.get("status") == "ok"] if gpu else []
    if mem:
        fig, ax = plt.subplots(figsize=(9, 4.5))
        seqs = [r["seq"] for r in mem]
        es = 4 if mem[0]["dtype"] == "f32" else 2
        series = [("naive: S and P, measured", [r.get("naive_measured_bytes") for r in mem]),
                  ("naive: S and P, accounting", [r["naive_bytes"] for r in mem]),
                  ("tiled, measured", [r.get("flash_measured_bytes") for r in mem]),
                  ("Q, K, V, O (both)", [4 * r["batch"] * r["heads"] * r["seq"] * r["dim"] * es for r in mem])]
        w = 0.2
        for j, (label, ys) in enumerate(series):
            gib = [(y or 0) / 2**30 for y in ys]
            bars = ax.bar([x + j * w for x in range(len(seqs))], gib, w, label=label)
            ax.bar_label(bars, labels=["n/a" if y is None else f"{g:.2g}" for y, g in zip(ys, gib)], fontsize=6, padding=2)
        ax.set_xticks([x + 1.5 * w for x in range(len(seqs))], [str(s) for s in seqs])
        ax.set_xlabel("sequence length")
        ax.set_ylabel("GiB")
        ax.set_title(f"Device memory beyond the inputs, {mem[0]['backend']} {short(mem[0]['device_name'])}, "
                     f"{mem[0]['dtype']}, head dim {mem[0]['dim']}")
        ax.legend(fontsize=8)
        fig.tight_layout()
        path = os.path.join(out, "memory.png")
        fig.savefig(path, dpi=110)
        plt.close(fig)
        made.append(path)
    return made


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("fattn")
    ap.add_argument("peers", nargs="?")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    fattn, peers = load(args.fattn), load(args.peers)
    os.makedirs(args.out, exist_ok=True)
    text = table(fattn, peers)
    with open(os.path.join(args.out, "table.md"), "w") as f:
        f.write(text)
    print(text)
    for p in charts(fattn, peers, args.out):
        print("chart:", p)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Joins fattn_bench's JSON lines with the PyTorch peers' (bench/peers_torch.py)
into one side-by-side table (Markdown, printed and written to OUT/table.md) and,
where matplotlib is installed, PNG charts in OUT/: throughput against sequence
length (grouped bars per seq, one per implementation, a panel per head dim and
causal, a figure per dtype; TFLOP/s, or GFLOP/s where nothing reaches 1 TFLOP/s;
titles give the sizes that ran) and the device memory each path held (MiB or
GiB, whichever fits). A chart with nothing measured is not made, said on stdout.

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


def sizes(rows):
    """The sizes the rows ran, for a chart's title: "batch·seq 2048, heads·dim 512"."""
    def span(values):
        values = sorted(set(values))
        return ", ".join(str(v) for v in values) if len(values) <= 3 else f"{values[0]}–{values[-1]}"
    return (f"batch·seq {span(r['batch'] * r['seq'] for r in rows)}, "
            f"heads·dim {span(r['heads'] * r['dim'] for r in rows)}")


def rate_unit(best):
    """TFLOP/s where the chart's best is 1 TFLOP/s or more, else GFLOP/s: (name, factor from TFLOP/s)."""
    return ("TFLOP/s", 1.0) if best >= 1 else ("GFLOP/s", 1e3)


def byte_unit(values):
    """MiB where every value is under 1 GiB, else GiB: (name, bytes per unit)."""
    return ("GiB", 2**30) if max(values, default=0) >= 2**30 else ("MiB", 2**20)


def num(y):
    return f"{y:.0f}" if y >= 10 else f"{y:.2g}"


def charts(fattn, peers, out):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("compare.py: no matplotlib, no charts (apt-get install python3-matplotlib)")
        return []
    cols = columns(fattn, peers)
    made = []
    for dt in OrderedDict.fromkeys(r["dtype"] for r in fattn):
        rows = [r for r in fattn if r["dtype"] == dt]
        # Throughput of each implementation on this dtype's measured cells.
        best = {n: max([r.get("tflops", 0) or 0 for k, r in c.items() if k[0] == dt] or [0])
                for n, c in cols.items()}
        top = max(best.values(), default=0)
        if top <= 0:
            print(f"compare.py: no throughput chart for {dt}: no cell was measured "
                  "(all skipped or failed, see table.md)")
            continue
        # Bars under 1% of the chart's best would be invisible: table only.
        impls = [n for n in cols if best[n] >= top / 100]
        left_out = [n for n in cols if 0 < best[n] < top / 100]
        unit, factor = rate_unit(top)
        colour = {n: f"C{i % 10}" for i, n in enumerate(cols)}
        dims, masks = sorted({r["dim"] for r in rows}), sorted({r["causal"] for r in rows})
        fig, axes = plt.subplots(len(dims), len(masks), figsize=(7.5 * len(masks), 4.2 * len(dims)),
                                 squeeze=False)
        w = 0.8 / max(len(impls), 1)
        for i, d in enumerate(dims):
            for m, c in enumerate(masks):
                ax = axes[i][m]
                ax.set_title(f"{dt}, head dim {d}, {'causal' if c else 'not causal'}")
                seqs = sorted({r["seq"] for r in rows if r["dim"] == d and r["causal"] == c})
                if not any((cols[n].get((dt, s, d, c)) or {}).get("tflops") for n in impls for s in seqs):
                    ax.axis("off")
                    ax.text(0.5, 0.5, "nothing measured (skipped or failed, see table.md)" if seqs
                            else "not run", ha="center", va="center", transform=ax.transAxes)
                    continue
                for j, n in enumerate(impls):
                    got = [cols[n].get((dt, s, d, c)) for s in seqs]
                    ys = [((r or {}).get("tflops", 0) or 0) * factor for r in got]
                    bars = ax.bar([x + j * w for x in range(len(seqs))], ys, w, label=n, color=colour[n])
                    ax.bar_label(bars, labels=[num(y) if y else cell(r) if r else "" for y, r in zip(ys, got)],
                                 fontsize=6, rotation=90, padding=2)
                ax.set_xticks([x + w * (len(impls) - 1) / 2 for x in range(len(seqs))], [str(s) for s in seqs])
                ax.set_xlabel("sequence length")
                ax.set_ylabel(unit)
                ax.margins(y=0.15)
        handles, labels = [], []
        for ax in axes.flat:
            for h, l in zip(*ax.get_legend_handles_labels()):
                if l not in labels:
                    handles.append(h)
                    labels.append(l)
        fig.legend(handles, labels, loc="lower center", ncol=3, fontsize=8)
        note = f" — not drawn (under 1% of the best, see table.md): {', '.join(left_out)}" if left_out else ""
        fig.suptitle(f"Attention forward throughput, {dt} ({sizes(rows)}){note}", fontsize=10)
        fig.tight_layout(rect=(0, 0.08, 1, 0.96))
        path = os.path.join(out, f"throughput_{dt}.png")
        fig.savefig(path, dpi=110)
        plt.close(fig)
        made.append(path)
    # Memory: the device memory each path held while it ran, for the first GPU backend.
    gpu = [r for r in fattn if r["backend"] == "cuda"] or [r for r in fattn if r["backend"] == "opencl"]
    mem = [r for r in gpu if r["dim"] == max(x["dim"] for x in gpu) and r["causal"] == 0 and r["device"] == gpu[0]["device"]
           and r["dtype"] == gpu[0]["dtype"] and r.get("status") == "ok"] if gpu else []
    if not mem:
        print("compare.py: no memory chart: no cell measured on a CUDA or OpenCL device")
    if mem:
        fig, ax = plt.subplots(figsize=(9, 4.5))
        seqs = [r["seq"] for r in mem]
        es = 4 if mem[0]["dtype"] == "f32" else 2
        series = [("naive: S and P, measured", [r.get("naive_measured_bytes") for r in mem]),
                  ("naive: S and P, accounting", [r["naive_bytes"] for r in mem]),
                  ("tiled, measured", [r.get("flash_measured_bytes") for r in mem]),
                  ("Q, K, V, O (both)", [4 * r["batch"] * r["heads"] * r["seq"] * r["dim"] * es for r in mem])]
        unit, scale = byte_unit([y for _, ys in series for y in ys if y is not None])
        w = 0.2
        for j, (label, ys) in enumerate(series):
            vals = [(y or 0) / scale for y in ys]
            bars = ax.bar([x + j * w for x in range(len(seqs))], vals, w, label=label)
            ax.bar_label(bars, labels=["n/a" if y is None else f"{v:.2g}" for y, v in zip(ys, vals)], fontsize=6, padding=2)
        ax.set_xticks([x + 1.5 * w for x in range(len(seqs))], [str(s) for s in seqs])
        ax.set_xlabel("sequence length")
        ax.set_ylabel(unit)
        ax.set_title(f"Device memory beyond the inputs, {mem[0]['backend']} {short(mem[0]['device_name'])}, "
                     f"{mem[0]['dtype']}, head dim {mem[0]['dim']}\n({sizes(mem)})", fontsize=10)
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

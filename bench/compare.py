#!/usr/bin/env python3
"""Joins fattn_bench's JSON lines with the PyTorch peers' (bench/peers_torch.py)
into side-by-side tables (Markdown, printed and written to OUT/table.md) and,
where matplotlib is installed, PNG charts in OUT/: throughput against sequence
length (grouped bars per seq, one per implementation, a panel per head dim and
causal, a figure per dtype; TFLOP/s, or GFLOP/s where nothing reaches 1 TFLOP/s;
titles give the sizes that ran) and the device memory each path held (MiB or
GiB, whichever fits). A chart with nothing measured is not made, said on stdout.

Square multi-head rows (heads = heads_kv, seq = seq_kv: the papers' sweep) go
to the TFLOP/s table and charts, as before. Decode and other shapes (GQA,
seq_q != seq_kv: fattn_bench --decode, peers_torch.py --decode) go to a second
table keyed by batch, seq_kv, heads, dim and dtype, each implementation's time
and GB/s (Q, K, V and O moved once) side by side, with the best peer's time
over fattn's; and, for seq_q = 1, to decode charts: GB/s against seq_kv, one
line per implementation, a panel per batch, heads and head dim (--hbm GBPS
draws the device's memory bandwidth). Rows without heads_kv / seq_kv (older
files) are square.

Usage: bench/compare.py FATTN_JSONL [PEERS_JSONL] --out DIR [--hbm GBPS]
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
    for r in rows:  # files from before heads_kv / seq_kv: square shapes
        r.setdefault("heads_kv", r["heads"])
        r.setdefault("seq_kv", r["seq"])
    return rows


def square(r):
    """A square multi-head row: the papers' sweep's kind."""
    return r["heads"] == r["heads_kv"] and r["seq"] == r["seq_kv"]


def fattn_name(r):
    return f"fattn {r['backend']} {r['device']}: {short(r['device_name'])}"


def short(name):
    """A device name short enough for a column header."""
    for cut in (" (", ","):
        name = name.split(cut)[0]
    return name.replace("cpu-", "PoCL ").replace("pthread-", "PoCL ")[:28]


def columns(fattn, peers):
    """Implementation -> {(dtype, seq, dim, causal): row}, fattn first."""
    cols = OrderedDict()
    for r in fattn:
        cols.setdefault(fattn_name(r), {})[(r["dtype"], r["seq"], r["dim"], r["causal"])] = r
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
    """The square rows' TFLOP/s table (fattn and peers given square rows only)."""
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


def full_key(r):
    return (r["dtype"], r["batch"], r["heads"], r["heads_kv"], r["seq"], r["seq_kv"], r["dim"], r["causal"])


def decode_columns(fattn, peers):
    """Implementation -> {full shape key: row}, fattn first."""
    cols = OrderedDict()
    for r in fattn:
        cols.setdefault(fattn_name(r), {})[full_key(r)] = r
    for r in peers:
        cols.setdefault(r["peer"], {})[full_key(r)] = r
    return cols


def ok(r):
    return r is not None and "error" not in r and r.get("status", "ok") == "ok" and r.get("ms")


def gbps(r):
    """A row's GB/s: its own field, else Q, K, V and O once over its time."""
    if r.get("gbps") is not None:
        return r["gbps"]
    es = 4 if r["dtype"] == "f32" else 2
    moved = (2 * r["batch"] * r["heads"] * r["seq"] + 2 * r["batch"] * r["heads_kv"] * r["seq_kv"]) * r["dim"] * es
    return moved / (r["ms"] * 1e-3) / 1e9


def rate(gb):
    return f"{gb / 1e3:.2f} TB/s" if gb >= 1000 else f"{gb:.3g} GB/s"


def decode_cell(r):
    if r is None:
        return "–"
    if "error" in r:
        return "refused"
    if not ok(r):
        return r.get("status", "–")
    return f"{r['ms']:.3g} ms ({rate(gbps(r))})"


def dtype_rank(dt):
    return {"f32": 0, "f16": 1, "bf16": 2}.get(dt, 3)


def decode_table(fattn, peers):
    """Decode and other non-square shapes: one row per (batch, seq_kv, heads, dim, dtype)."""
    cols = decode_columns(fattn, peers)
    names = list(cols)
    fattn_cols = [n for n in names if n.startswith("fattn ")]
    peer_cols = [n for n in names if not n.startswith("fattn ")]
    keys = sorted(OrderedDict.fromkeys(full_key(r) for r in fattn),
                  key=lambda k: (k[1], k[5], k[3], k[2], k[4], k[6], dtype_rank(k[0]), k[7]))
    head = ["batch", "seq_kv", "heads (q/kv)", "seq_q", "dim", "dtype", "causal"] + names
    if peer_cols:
        head += [f"best peer / {n.split(':')[0]}" for n in fattn_cols]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for k in keys:
        dt, b, hq, hkv, sq, skv, d, c = k
        cells = [str(b), str(skv), f"{hq}/{hkv}", str(sq), str(d), dt, str(c)]
        cells += [decode_cell(cols[n].get(k)) for n in names]
        if peer_cols:
            best = min((cols[n][k]["ms"] for n in peer_cols if ok(cols[n].get(k))), default=None)
            for n in fattn_cols:
                r = cols[n].get(k)
                cells.append(f"{best / r['ms']:.3g}x" if best and ok(r) else "–")
        lines.append("| " + " | ".join(cells) + " |")
    ratio = (" 'best peer / fattn' is the fastest peer's time over fattn's (above 1: fattn is faster)."
             if peer_cols else "")
    return ("Decode and other shapes: median time and GB/s (the bytes of Q, K, V and O, each moved once, "
            "over the time); causal 1 is bottom-right, 2 top-left." + ratio + "\n\n" + "\n".join(lines) + "\n")


def decode_charts(fattn, peers, out, hbm):
    """GB/s against seq_kv for the seq_q = 1 rows: a figure per dtype, a panel per
    (batch, heads, head dim), a line per implementation."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("compare.py: no matplotlib, no decode charts (apt-get install python3-matplotlib)")
        return []
    cols = decode_columns([r for r in fattn if r["seq"] == 1], [r for r in peers if r["seq"] == 1])
    made = []
    for dt in sorted({r["dtype"] for r in fattn if r["seq"] == 1}, key=dtype_rank):
        rows = [r for r in fattn if r["seq"] == 1 and r["dtype"] == dt]
        panels = sorted({(r["batch"], r["heads"], r["heads_kv"], r["dim"], r["causal"]) for r in rows})
        measured = [n for n, c in cols.items() if any(ok(r) for k, r in c.items() if k[0] == dt)]
        if not measured:
            print(f"compare.py: no decode chart for {dt}: no decode cell was measured "
                  "(all skipped or failed, see table.md)")
            continue
        batches = sorted({p[0] for p in panels})
        kinds = sorted({p[1:] for p in panels}, key=lambda p: (p[1], p[0], p[2], p[3]))
        fig, axes = plt.subplots(len(batches), len(kinds), figsize=(4.5 * len(kinds), 3.6 * len(batches)),
                                 squeeze=False)
        colour = {n: f"C{i % 10}" for i, n in enumerate(cols)}
        for i, b in enumerate(batches):
            for j, (hq, hkv, d, c) in enumerate(kinds):
                ax = axes[i][j]
                ax.set_title(f"batch {b}, heads {hq}/{hkv}, dim {d}" + (", causal" if c else ""), fontsize=9)
                drawn = 0
                for n in measured:
                    pts = sorted((k[5], gbps(r)) for k, r in cols[n].items()
                                 if k[:5] == (dt, b, hq, hkv, 1) and k[6:] == (d, c) and ok(r))
                    if pts:
                        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=n, color=colour[n])
                        drawn += 1
                if hbm:
                    ax.axhline(hbm, color="k", linestyle="--", linewidth=1, label=f"memory bandwidth {rate(hbm)}")
                if not drawn:
                    ax.text(0.5, 0.5, "nothing measured (skipped or failed, see table.md)", ha="center",
                            va="center", transform=ax.transAxes, fontsize=8)
                ax.set_xscale("log", base=2)
                ax.set_xlabel("seq_kv")
                ax.set_ylabel("GB/s")
                ax.set_ylim(bottom=0)
        handles, labels = [], []
        for ax in axes.flat:
            for h, l in zip(*ax.get_legend_handles_labels()):
                if l not in labels:
                    handles.append(h)
                    labels.append(l)
        fig.legend(handles, labels, loc="lower center", ncol=3, fontsize=8)
        fig.suptitle(f"Decode (seq_q 1), {dt}: GB/s of Q, K, V and O moved once", fontsize=10)
        fig.tight_layout(rect=(0, 0.08, 1, 0.96))
        path = os.path.join(out, f"decode_{dt}.png")
        fig.savefig(path, dpi=110)
        plt.close(fig)
        made.append(path)
    return made


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("fattn")
    ap.add_argument("peers", nargs="?")
    ap.add_argument("--out", required=True)
    ap.add_argument("--hbm", type=float, default=None,
                    help="the device's memory bandwidth in GB/s, drawn on the decode charts")
    args = ap.parse_args()
    fattn, peers = load(args.fattn), load(args.peers)
    os.makedirs(args.out, exist_ok=True)
    sq_fattn, sq_peers = [r for r in fattn if square(r)], [r for r in peers if square(r)]
    gen_fattn, gen_peers = [r for r in fattn if not square(r)], [r for r in peers if not square(r)]
    parts = []
    if sq_fattn or not gen_fattn:
        parts.append(table(sq_fattn, sq_peers))
    if gen_fattn:
        parts.append(decode_table(gen_fattn, gen_peers))
    text = "\n".join(parts)
    with open(os.path.join(args.out, "table.md"), "w") as f:
        f.write(text)
    print(text)
    made = charts(sq_fattn, sq_peers, args.out) if sq_fattn else []
    if gen_fattn:
        made += decode_charts(gen_fattn, gen_peers, args.out, args.hbm)
    for p in made:
        print("chart:", p)


if __name__ == "__main__":
    main()

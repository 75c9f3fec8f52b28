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
line per implementation (a paged cache's rows a line of their own, "page N"),
a panel per batch, heads and head dim, a figure per dtype, and the memory
bandwidth as a dashed line: --hbm GBPS, else the rows' own (fattn_bench
--hbm-gbps writes bw_ref_gbps); the host's STREAM copy where a CPU device is
drawn. The decode table adds, per row, each fattn time's share of that
bandwidth, the paged rows' time over the contiguous row's (the same
implementation), fattn OpenCL's speed over fattn CUDA's on the same GPU, and
the best peer's time over fattn's (peers have no paged cache: a paged row is
set against the peers' contiguous time). Varied-length batches (kv_lens) are
in the table only. Rows without heads_kv / seq_kv (older files) are square;
without kv_layout, dense.

--peak TFLOPS draws the device's dense matrix peak on the throughput charts.

Usage: bench/compare.py FATTN_JSONL... [PEERS_JSONL] --out DIR [--hbm GBPS] [--peak TFLOPS]
(every file may hold fattn rows or peer rows: a row with "peer" is a peer's).
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
    for r in rows:  # files from before heads_kv / seq_kv: square shapes; before kv_layout: dense
        r.setdefault("heads_kv", r["heads"])
        r.setdefault("seq_kv", r["seq"])
        r.setdefault("kv_layout", "dense")
        r.setdefault("page_size", 0)
    return rows


def square(r):
    """A square multi-head dense row: the papers' sweep's kind."""
    return r["heads"] == r["heads_kv"] and r["seq"] == r["seq_kv"] and r["kv_layout"] == "dense"


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


def charts(fattn, peers, out, peak=None):
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
                if peak:
                    ax.axhline(peak * factor, color="0.3", linestyle="--", linewidth=1,
                               label=f"dense peak {num(peak * factor)} {unit}")
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
           and r["dtype"] == gpu[0]["dtype"] and r.get("status") == "ok" and "naive_bytes" in r] if gpu else []
    if not mem:
        print("compare.py: no memory chart: no cell with its byte counts measured on a CUDA or OpenCL device")
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
    """(dtype, batch, heads, heads_kv, seq, seq_kv, dim, causal, (kv_layout, page_size, kv_lens))."""
    return (r["dtype"], r["batch"], r["heads"], r["heads_kv"], r["seq"], r["seq_kv"], r["dim"], r["causal"],
            (r["kv_layout"], r["page_size"], tuple(r.get("kv_lens", ()))))


DENSE = ("dense", 0, ())


def dense_key(k):
    """The contiguous shape of a key: what a paged row is set against."""
    return k[:8] + (DENSE,) if k[8][0] == "paged" and not k[8][2] else None


def kv_text(kv):
    layout, page, lens = kv
    if layout == "paged":
        return f"page {page}" + (f", lens {'/'.join(map(str, lens))}" if lens else "")
    if lens:
        return f"{layout} {'/'.join(map(str, lens))}"
    return "" if layout == "dense" else layout


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


def share(r, hbm):
    """The row's GB/s as a share of its device's bandwidth: ", 45% HBM" / ", 60% STREAM"."""
    ref = r.get("bw_ref_gbps") or (hbm if not r.get("bw_ref") else None)
    kind = {"stream": "STREAM", "hbm": "HBM"}.get(r.get("bw_ref") or "hbm", "")
    return f", {100 * gbps(r) / ref:.0f}% {kind}" if ref else ""


def decode_cell(r, hbm=None):
    if r is None:
        return "–"
    if "error" in r:
        return "refused"
    if not ok(r):
        return r.get("status", "–")
    return f"{r['ms']:.3g} ms ({rate(gbps(r))}{share(r, hbm) if 'peer' not in r else ''})"


def dtype_rank(dt):
    return {"f32": 0, "f16": 1, "bf16": 2}.get(dt, 3)


def ratio_cell(num, den):
    """num's time over den's ("1.23x"), "–" unless both ran."""
    return f"{num['ms'] / den['ms']:.3g}x" if ok(num) and ok(den) else "–"


def decode_table(fattn, peers, hbm=None):
    """Decode and other non-square shapes: one row per (batch, seq_kv, heads, dim, dtype, K/V storage)."""
    cols = decode_columns(fattn, peers)
    names = list(cols)
    fattn_cols = [n for n in names if n.startswith("fattn ")]
    peer_cols = [n for n in names if not n.startswith("fattn ")]
    cuda = next((n for n in fattn_cols if n.startswith("fattn cuda ")), None)
    opencl = [n for n in fattn_cols if n.startswith("fattn opencl ")]
    paged = any(k[8][0] == "paged" for c in cols.values() for k in c)
    keys = sorted(OrderedDict.fromkeys(full_key(r) for r in fattn),
                  key=lambda k: (k[1], k[5], k[3], k[2], k[4], k[6], dtype_rank(k[0]), k[7], k[8][0] != "dense",
                                 k[8][1], k[8]))
    head = ["batch", "seq_kv", "heads (q/kv)", "seq_q", "dim", "dtype", "causal", "K/V"] + names
    if paged:
        head += [f"paged / contiguous ({n.split(':')[0]})" for n in fattn_cols]
    if cuda and opencl:
        head += [f"{n.split(':')[0]} speed / fattn cuda" for n in opencl]
    if peer_cols:
        head += [f"best peer / {n.split(':')[0]}" for n in fattn_cols]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for k in keys:
        dt, b, hq, hkv, sq, skv, d, c, kv = k
        pk = dense_key(k) or k  # the peers' (contiguous) row
        cells = [str(b), str(skv), f"{hq}/{hkv}", str(sq), str(d), dt, str(c), kv_text(kv) or "dense"]
        cells += [decode_cell(cols[n].get(pk if n in peer_cols else k), hbm) for n in names]
        if paged:
            cells += [ratio_cell(cols[n].get(k), cols[n].get(dense_key(k))) if dense_key(k) else "–"
                      for n in fattn_cols]
        if cuda and opencl:
            cells += [ratio_cell(cols[cuda].get(k) or {}, cols[n].get(k) or {}) for n in opencl]
        if peer_cols:
            best = min((cols[n][pk]["ms"] for n in peer_cols if ok(cols[n].get(pk))), default=None)
            for n in fattn_cols:
                r = cols[n].get(k)
                cells.append(f"{best / r['ms']:.3g}x" if best and ok(r) else "–")
        lines.append("| " + " | ".join(cells) + " |")
    notes = []
    if paged:
        notes.append("'paged / contiguous' is a paged row's time over the contiguous row's (bar: at most 1.1x).")
    if cuda and opencl:
        notes.append("'fattn opencl speed / fattn cuda' is CUDA's time over OpenCL's (bar: at least 0.7x).")
    if peer_cols:
        notes.append("'best peer / fattn' is the fastest peer's time over fattn's (above 1: fattn is faster); "
                     "peers have no paged cache, so a paged row is set against their contiguous time.")
    return ("Decode and other shapes: median time and GB/s (the bytes of Q, K, V and O, each moved once, "
            "only the keys each sequence uses, over the time), with its share of the device's memory "
            "bandwidth (HBM: --hbm-gbps; STREAM: the host's copy) where known; causal 1 is bottom-right, "
            "2 top-left. " + " ".join(notes) + "\n\n" + "\n".join(lines) + "\n")


# A paged cache's lines: their implementation's colour, these markers (bars: hatches).
PAGE_MARKER = {", page 16": "s", ", page 256": "^"}
PAGE_HATCH = {", page 16": "//", ", page 256": ".."}


def decode_charts(fattn, peers, out, hbm):
    """GB/s against seq_kv for the seq_q = 1 rows of one length per batch (not kv_lens): a figure
    per dtype, a row of panels per batch, a panel per (heads, head dim), a line per implementation
    and page size, the memory bandwidth as a dashed line."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("compare.py: no matplotlib, no decode charts (apt-get install python3-matplotlib)")
        return []
    fattn = [r for r in fattn if r["seq"] == 1 and not r.get("kv_lens")]
    peers = [r for r in peers if r["seq"] == 1]
    # A line per implementation and K/V storage: "fattn cuda 0: H200" and "fattn cuda 0: H200, page 16".
    lines = OrderedDict()
    for r in fattn + peers:
        k = full_key(r)
        name = r["peer"] if "peer" in r else fattn_name(r)
        if k[8] != DENSE:
            name += f", {kv_text(k[8])}"
        lines.setdefault(name, {})[k[:8]] = r
    # The bandwidth lines: --hbm, else the GPU rows' own; the host's STREAM copy for CPU rows.
    hbm = hbm or next((r["bw_ref_gbps"] for r in fattn if r.get("bw_ref") == "hbm" and r.get("bw_ref_gbps")), None)
    stream = next((r["stream_gbps"] for r in fattn if r.get("stream_gbps")), None)
    host_lines = {fattn_name(r) for r in fattn if r.get("bw_ref") == "stream"}
    colour = {}
    for n in lines:  # the same colour for an implementation's page sizes, other markers
        base = n.split(", page")[0].split(", ")[0] if n.startswith("fattn ") else n
        colour.setdefault(base, f"C{len(colour) % 10}")
    made = []
    for dt in sorted({r["dtype"] for r in fattn}, key=dtype_rank):
        rows = [r for r in fattn if r["dtype"] == dt]
        measured = [n for n, c in lines.items() if any(ok(r) for k, r in c.items() if k[0] == dt)]
        if not measured:
            print(f"compare.py: no decode chart for {dt}: no decode cell was measured "
                  "(all skipped, unsupported or failed, see table.md)")
            continue
        batches = sorted({r["batch"] for r in rows})
        kinds = sorted({(r["heads"], r["heads_kv"], r["dim"], r["causal"]) for r in rows},
                       key=lambda p: (p[1], p[0], p[2], p[3]))
        # At least 9 inches wide: the legend names devices in full.
        fig, axes = plt.subplots(len(batches), len(kinds), figsize=(max(5.5 * len(kinds), 9), 3.8 * len(batches)),
                                 squeeze=False)
        for i, b in enumerate(batches):
            for j, (hq, hkv, d, c) in enumerate(kinds):
                ax = axes[i][j]
                ax.set_title(f"{dt}, batch {b}, heads {hq}/{hkv}, dim {d}" + (", causal" if c else ""), fontsize=9)
                drawn, host = 0, False
                series = []
                for n in measured:
                    pts = sorted((k[5], gbps(r)) for k, r in lines[n].items()
                                 if k[:5] == (dt, b, hq, hkv, 1) and k[6:8] == (d, c) and ok(r))
                    if pts:
                        series.append((n, pts))
                seqs = sorted({p[0] for _, pts in series for p in pts})
                for idx, (n, pts) in enumerate(series):
                    base = n.split(", page")[0] if n.startswith("fattn ") else n
                    page = n[len(base):]
                    style = dict(label=n, color=colour[base.split(", ")[0]])
                    if len(seqs) == 1:  # one length: grouped bars, a line would be a dot
                        w = 0.8 / len(series)
                        bars = ax.bar(idx * w - 0.4 + w / 2, pts[0][1], w,
                                      hatch=PAGE_HATCH.get(page, "//") if page else None,
                                      edgecolor="white" if page else None, **style)
                        ax.bar_label(bars, labels=[num(pts[0][1])], fontsize=6, padding=2)
                    else:
                        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker=PAGE_MARKER.get(page, "D") if page
                                else "o", linestyle=":" if page else "-", **style)
                    drawn += 1
                    host |= base in host_lines
                if hbm:
                    ax.axhline(hbm, color="k", linestyle="--", linewidth=1, label=f"HBM peak {rate(hbm)}")
                if stream and host:
                    ax.axhline(stream, color="grey", linestyle="-.", linewidth=1,
                               label=f"host STREAM copy {rate(stream)}")
                if not drawn:
                    ax.text(0.5, 0.5, "nothing measured (skipped, unsupported or failed, see table.md)",
                            ha="center", va="center", transform=ax.transAxes, fontsize=8)
                if len(seqs) == 1:
                    ax.set_xticks([0], [str(seqs[0])])
                else:
                    ax.set_xscale("log", base=2)
                    ax.margins(x=0.15)
                ax.set_xlabel("seq_kv")
                ax.set_ylabel("GB/s")
                ax.set_ylim(bottom=0)
        handles, labels = [], []
        for ax in axes.flat:
            for h, l in zip(*ax.get_legend_handles_labels()):
                if l not in labels:
                    handles.append(h)
                    labels.append(l)
        fig.legend(handles, labels, loc="lower center", ncol=2, fontsize=8)
        fig.suptitle(f"Decode (seq_q 1), {dt}: GB/s of Q, K, V and O moved once (higher is better)", fontsize=10)
        legend_in = 0.3 + 0.2 * ((len(labels) + 1) // 2)  # the legend's height, inches
        fig.tight_layout(rect=(0, legend_in / fig.get_size_inches()[1], 1, 0.96))
        path = os.path.join(out, f"decode_{dt}.png")
        fig.savefig(path, dpi=110)
        plt.close(fig)
        made.append(path)
    return made


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="+", help="fattn_bench --json files and a peers_torch.py file")
    ap.add_argument("--out", required=True)
    ap.add_argument("--hbm", type=float, default=None,
                    help="the GPU's memory bandwidth in GB/s, drawn on the decode charts (default: the "
                         "rows' bw_ref_gbps, from fattn_bench --hbm-gbps)")
    ap.add_argument("--peak", type=float, default=None,
                    help="the device's dense matrix peak in TFLOP/s (989 for an H200 in f16/bf16), "
                         "drawn as a dashed line on the throughput charts")
    args = ap.parse_args()
    rows = [r for path in args.files for r in load(path)]
    fattn, peers = [r for r in rows if "peer" not in r], [r for r in rows if "peer" in r]
    os.makedirs(args.out, exist_ok=True)
    sq_fattn, sq_peers = [r for r in fattn if square(r)], [r for r in peers if square(r)]
    gen_fattn, gen_peers = [r for r in fattn if not square(r)], [r for r in peers if not square(r)]
    parts = []
    if sq_fattn or not gen_fattn:
        parts.append(table(sq_fattn, sq_peers))
    if gen_fattn:
        parts.append(decode_table(gen_fattn, gen_peers, args.hbm))
    text = "\n".join(parts)
    with open(os.path.join(args.out, "table.md"), "w") as f:
        f.write(text)
    print(text)
    made = charts(sq_fattn, sq_peers, args.out, args.peak) if sq_fattn else []
    if gen_fattn:
        made += decode_charts(gen_fattn, gen_peers, args.out, args.hbm)
    for p in made:
        print("chart:", p, flush=True)


if __name__ == "__main__":
    main()

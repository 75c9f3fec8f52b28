#!/usr/bin/env python3
"""The scaling chart of README.md (issue 18): causal bf16 d128, 16 heads,
zigzag. Measured on two H200s (call146/scale.csv: fattn_cp_forward over NCCL,
one GPU's time over the 2-GPU time) beside the compute bound of ranks
emulated on one GPU (call104, R = 2, 4, 8: one GPU's time over the slowest
rank's, transfers assumed hidden). Usage: python3 scaling_chart.py"""
import csv
import os

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt

here = os.path.dirname(os.path.abspath(__file__))
meas = [r for r in csv.DictReader(l for l in open(os.path.join(here, "call146/scale.csv"))
                                  if not l.startswith("#"))]
# Emulated compute bound (README table, calls 103-104), zigzag: seq -> {R: speedup}.
bound = {131072: {2: 1.96, 4: 3.43, 8: 6.26}, 524288: {2: 1.98, 4: 3.88, 8: 7.34},
         1048576: {2: 1.91, 4: 3.87, 8: 7.70}}
seqs = sorted(bound)
x = range(len(seqs))
fig, ax = plt.subplots(figsize=(7, 4.5))
for R, c in ((2, "C0"), (4, "C1"), (8, "C2")):
    ax.plot(x, [bound[s][R] for s in seqs], "--o", color=c, mfc="none",
            label=f"R = {R}: compute bound (ranks emulated on one GPU)")
    ax.axhline(R, color=c, lw=0.6, alpha=0.5)
ax.plot(x, [float(r["speedup"]) for r in sorted(meas, key=lambda r: int(r["seq"]))], "-s",
        color="C0", ms=8, label="R = 2: measured, two H200s over NCCL (NVLink)")
ax.set_xticks(list(x), [f"{s // 1024}k" for s in seqs])
ax.set_xlabel("sequence length (tokens)")
ax.set_ylabel("speedup over one GPU")
ax.set_ylim(0, 8.5)
ax.set_title("fattn_cp_forward: causal bf16, 16 heads, d128, zigzag (H200)")
ax.legend(fontsize=8, loc="center right")
ax.grid(alpha=0.3)
fig.tight_layout()
fig.savefig(os.path.join(here, "scaling.png"), dpi=120)
print("wrote scaling.png")

#!/usr/bin/env python3
"""PyTorch's CPU scaled_dot_product_attention on fattn_bench's prefill sweep
shapes (issue 16's peer): batch * seq = 16384, heads * dim = 2048, BHSD
tensors, causal (is_causal, square) and not. One CSV row per cell: dtype,
seq, dim, causal, batch, heads, median ms, TFLOP/s (fattn_bench's count:
4 * b * h * s * s * d, halved when causal).
Usage: peer_cpu_sdpa.py [--seqs 512,1024,2048,4096] [--dims 64,128]
                        [--dtypes f32,bf16] [--iters 5] [--threads N]"""
import argparse
import statistics
import sys
import time

ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
ap.add_argument("--seqs", default="512,1024,2048,4096")
ap.add_argument("--dims", default="64,128")
ap.add_argument("--dtypes", default="f32,bf16")
ap.add_argument("--iters", type=int, default=5)
ap.add_argument("--threads", type=int, default=0, help="torch.set_num_threads (0: its default)")
args = ap.parse_args()
try:
    import torch
    import torch.nn.functional as F
except ImportError as e:
    sys.exit(f"peer_cpu_sdpa.py: PyTorch is not installed ({e})")
if args.threads > 0:
    torch.set_num_threads(args.threads)
dt = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16}
print(f"# torch {torch.__version__}, {torch.get_num_threads()} threads")
print("dtype,seq,dim,causal,batch,heads,ms,tflops")
for name in args.dtypes.split(","):
    for d in (int(x) for x in args.dims.split(",")):
        for s in (int(x) for x in args.seqs.split(",")):
            b, h = max(1, 16384 // s), max(1, 2048 // d)
            q, k, v = (torch.randn(b, h, s, d, dtype=dt[name]) for _ in range(3))
            for causal in (0, 1):
                F.scaled_dot_product_attention(q, k, v, is_causal=bool(causal))  # warm-up
                times = []
                for _ in range(args.iters):
                    t0 = time.perf_counter()
                    F.scaled_dot_product_attention(q, k, v, is_causal=bool(causal))
                    times.append(time.perf_counter() - t0)
                ms = statistics.median(times) * 1e3
                flops = 4.0 * b * h * s * s * d / (2 if causal else 1)
                print(f"{name},{s},{d},{causal},{b},{h},{ms:.3f},{flops / ms / 1e9:.3f}", flush=True)

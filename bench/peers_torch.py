#!/usr/bin/env python3
"""PyTorch's scaled_dot_product_attention backends (FlashAttention-2, cuDNN,
memory-efficient) on the fattn_bench shapes, on an NVIDIA GPU, in one process.
One JSON line per (peer, dtype, shape): median milliseconds of --iters calls
after warm-up, timed with CUDA events, and TFLOP/s counted as fattn counts
(4*B*H*S*S*D, unmasked pairs only when causal). A peer that refuses a shape
(FlashAttention-2 has no f32) is a line with "error".

Usage: bench/peers_torch.py [--quick] [--seqs 512,...] [--dims 64,128] [--dtypes f32,f16,bf16]
                            [--shape BxHxSxD[c]]... [--iters 10] > peers.jsonl
"""
import argparse
import json
import sys


def flops(b, h, s, d, causal):
    pairs = s * (s + 1) // 2 if causal else s * s
    return 4.0 * b * h * d * pairs


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seqs", default="512,1024,2048,4096,8192,16384")
    ap.add_argument("--dims", default="64,128")
    ap.add_argument("--dtypes", default="f32,f16,bf16")
    ap.add_argument("--shape", action="append", default=[])
    ap.add_argument("--quick", action="store_true", help="fattn_bench --quick's shapes")
    ap.add_argument("--iters", type=int, default=10)
    args = ap.parse_args()
    try:
        import torch
        from torch.nn.attention import SDPBackend, sdpa_kernel
    except ImportError as e:
        sys.exit(f"peers_torch.py: PyTorch is not installed ({e})")
    if not torch.cuda.is_available():
        sys.exit("peers_torch.py: PyTorch sees no CUDA GPU")

    tokens, width, seqs, dims = 16384, 2048, args.seqs, args.dims
    if args.quick:
        tokens, width, seqs, dims = 2048, 512, "256,512,1024", "64"
    shapes = [(max(tokens // s, 1), max(width // d, 1), s, d, c)
              for d in map(int, dims.split(",")) for c in (0, 1) for s in map(int, seqs.split(","))]
    for spec in args.shape:
        b, h, s, d = (int(x) for x in spec.rstrip("c").split("x"))
        shapes.append((b, h, s, d, int(spec.endswith("c"))))
    peers = {"torch-flash": SDPBackend.FLASH_ATTENTION, "torch-cudnn": SDPBackend.CUDNN_ATTENTION,
             "torch-efficient": SDPBackend.EFFICIENT_ATTENTION}
    types = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}
    device = torch.cuda.get_device_name()
    for dt in args.dtypes.split(","):
        for (b, h, s, d, c) in shapes:
            # (batch, heads, seq, dim), as SDPA takes it; random, never zeros.
            q, k, v = (torch.rand(b, h, s, d, device="cuda", dtype=types[dt]) * 2 - 1 for _ in range(3))
            for name, backend in peers.items():
                row = {"peer": name, "device_name": device, "dtype": dt, "batch": b, "heads": h, "seq": s,
                       "dim": d, "causal": c}
                try:
                    with sdpa_kernel(backend):
                        call = lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=bool(c))
                        for _ in range(2):
                            call()
                        times = []
                        for _ in range(args.iters):
                            start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                            start.record()
                            call()
                            stop.record()
                            stop.synchronize()
                            times.append(start.elapsed_time(stop))
                    ms = sorted(times)[len(times) // 2]
                    row.update(ms=round(ms, 5), tflops=round(flops(b, h, s, d, c) / (ms * 1e-3) / 1e12, 3))
                except Exception as e:  # a backend that refuses the shape or dtype
                    row["error"] = str(e).splitlines()[0][:200] if str(e) else type(e).__name__
                print(json.dumps(row), flush=True)
            del q, k, v
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()

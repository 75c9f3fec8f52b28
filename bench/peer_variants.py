#!/usr/bin/env python3
"""The peers of fattn's attention variants (issue 13) on an NVIDIA GPU:
PyTorch FlexAttention (torch.compile) for the sliding window, softcap, ALiBi,
an additive bias (a score_mod reading the bias plane) and window + softcap,
and scaled_dot_product_attention with an explicit mask for the bias. The
shapes and values are fattn_bench --variant's: bf16, batch 1, 32 heads, head
dim 128, bottom-right causal; softcap 50; ALiBi slope 1/16 on every head
(FlexAttention's distance qi - ki, causal so never negative); the bias one
[seq, seq] bf16 plane (zeros) broadcast over heads; window 4096 keys to the
left (FlexAttention: qi - ki <= 4096). One line per row: median ms of 10
calls after 3 warm-ups (CUDA events), TFLOP/s over the visible pairs.
Usage: python3 bench/peer_variants.py [--seqs 8192,32768]"""
import argparse

import torch
import torch.nn.functional as F
from torch.nn.attention.flex_attention import create_block_mask, flex_attention

ap = argparse.ArgumentParser()
ap.add_argument("--seqs", default="8192,32768")
args = ap.parse_args()
# One compiled kernel per (score_mod, mask, length): more than dynamo's default
# limit of 8, past which it falls back to the unfused, N x N form.
torch._dynamo.config.recompile_limit = 64
flex = torch.compile(flex_attention, dynamic=False)


def bench(f):
    for _ in range(3):
        f()
    torch.cuda.synchronize()
    ts = []
    for _ in range(10):
        s = torch.cuda.Event(enable_timing=True)
        e = torch.cuda.Event(enable_timing=True)
        s.record()
        f()
        e.record()
        torch.cuda.synchronize()
        ts.append(s.elapsed_time(e))
    ts.sort()
    return ts[5]


B, H, D, W, CAP, SLOPE = 1, 32, 128, 4096, 50.0, 0.0625
for S in (int(x) for x in args.seqs.split(",")):
    q = torch.randn(B, H, S, D, device="cuda", dtype=torch.bfloat16)
    k, v = torch.randn_like(q), torch.randn_like(q)
    causal = create_block_mask(lambda b, h, qi, ki: qi >= ki, None, None, S, S)
    window = create_block_mask(lambda b, h, qi, ki: (qi >= ki) & (qi - ki <= W), None, None, S, S)
    full = 4.0 * B * H * D * S * (S + 1) / 2
    win = 4.0 * B * H * D * sum(min(i + 1, W + 1) for i in range(S))
    bias = torch.zeros(S, S, device="cuda", dtype=torch.bfloat16)

    def row(name, fl, f):
        try:
            m = bench(f)
            print(f"S{S:<6} {name:<28} {m:9.3f} ms {fl / m / 1e9:7.1f} TF", flush=True)
        except Exception as ex:  # a peer that cannot run a row says so
            print(f"S{S:<6} {name:<28} error: {type(ex).__name__}: {str(ex)[:120]}", flush=True)

    cap = lambda s, b, h, qi, ki: CAP * torch.tanh(s / CAP)
    row("flex causal", full, lambda: flex(q, k, v, block_mask=causal))
    row("sdpa causal", full, lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True))
    row("flex window", win, lambda: flex(q, k, v, block_mask=window))
    row("flex softcap", full, lambda: flex(q, k, v, score_mod=cap, block_mask=causal))
    row("flex alibi", full,
        lambda: flex(q, k, v, score_mod=lambda s, b, h, qi, ki: s - SLOPE * (qi - ki),
                     block_mask=causal))
    row("flex bias", full,
        lambda: flex(q, k, v, score_mod=lambda s, b, h, qi, ki: s + bias[qi, ki],
                     block_mask=causal))
    row("flex window+softcap", win, lambda: flex(q, k, v, score_mod=cap, block_mask=window))
    # SDPA takes no is_causal with a mask: the causal -inf goes into the mask.
    mask = torch.full((S, S), float("-inf"), device="cuda", dtype=torch.bfloat16).triu_(1)
    mask += bias
    row("sdpa mask (bias+causal)", full,
        lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=mask[None, None]))
    del mask, bias
    torch.cuda.empty_cache()

#!/usr/bin/env python3
"""One shape through SDPA's cuDNN backend, for a profiler: warm-ups, then one
call. Usage: cudnn_one.py B H S D causal(0/1) [dtype bf16|f16]"""
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

b, h, s, d, causal = (int(x) for x in sys.argv[1:6])
dt = torch.bfloat16 if (sys.argv[6:] or ["bf16"])[0] == "bf16" else torch.float16
q, k, v = (torch.rand(b, h, s, d, device="cuda", dtype=dt) * 2 - 1 for _ in range(3))
with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
    for _ in range(4):
        F.scaled_dot_product_attention(q, k, v, is_causal=bool(causal))
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as p:
        F.scaled_dot_product_attention(q, k, v, is_causal=bool(causal))
        torch.cuda.synchronize()
for e in p.events():
    if e.device_type == torch.autograd.DeviceType.CUDA:
        print("kernel:", e.name, f"{e.device_time_total / 1000:.3f} ms")

#!/usr/bin/env python3
"""What a Python call costs over the C call, at a tiny shape (issue 17).

Per backend, back-to-back calls on one problem, host wall time per call:
  python: fattn.attention(q, k, v, out=o) as a user writes it (arguments
          turned into fattn tensors, buffers wrapped, the call, wrappers freed);
  c:      fattn_forward alone, called through ctypes on structs and buffers
          built once (the C call plus ctypes' own dispatch, about a
          microsecond), so python - c is what the package adds.
Each is the median of --rounds rounds of --calls calls, with one
synchronisation at the end of each round (GPU backends queue asynchronously,
so this is the host's cost while the queue runs ahead). One JSON line per
backend: backend, device, shape, python_us, c_us, overhead_us.
CUDA runs on PyTorch tensors (zero-copy, on the current stream) when
PyTorch sees a GPU; the CPU backend on NumPy arrays.
Usage: bench/python_overhead.py [--calls 2000] [--rounds 5] [--backends cpu,cuda]
"""
import argparse
import ctypes
import json
import time

import numpy as np

import fattn
from fattn import _capi as C, _context


def rounds(fn, sync, calls, n):
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        sync()
        out.append((time.perf_counter() - t0) / calls * 1e6)
    return sorted(out)[len(out) // 2]


def raw_forward(ctx, q, k, v, o, ptr_of, dtype, b, h, s, d):
    """fattn_forward on structs built once: the C call as ctypes makes it."""
    n = b * h * s * d
    esize = 2 if dtype != C.F32 else 4
    bufs = [ctx.wrap(ctypes.c_void_p(ptr_of(x)), n * esize, x is not o) for x in (q, k, v, o)]
    desc = C.AttentionDesc(batch=b, heads_q=h, heads_kv=h, seq_q=s, seq_kv=s, head_dim=d,
                           dtype=dtype)
    ts = [C.Tensor(buffer=bf, dtype=dtype, stride_batch=s * h * d, stride_head=d,
                   stride_seq=h * d, stride_dim=1) for bf in bufs]
    args = (ctx.handle, ctypes.byref(desc), *(ctypes.byref(t) for t in ts), None)
    fwd = C.lib.fattn_forward

    def call():
        st = fwd(*args)
        if st:
            raise RuntimeError(C.message(ctx.handle))
    return call, bufs


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--backends", default="cpu,cuda")
    ap.add_argument("--profile", metavar="FILE", help="also write a cProfile report of the "
                    "Python calls (top functions by own time) to FILE")
    args = ap.parse_args()
    b, h, s, d = 1, 1, 16, 64   # [batch, seq, heads, dim]: tiny, so the call's fixed cost shows
    for backend in args.backends.split(","):
        if backend == "cuda":
            try:
                import torch
            except ImportError:
                print(json.dumps({"backend": "cuda", "status": "skipped", "note": "no PyTorch"}))
                continue
            if not torch.cuda.is_available():
                print(json.dumps({"backend": "cuda", "status": "skipped", "note": "no GPU"}))
                continue
            q, k, v, o = (torch.randn(b, s, h, d, device="cuda", dtype=torch.float16)
                          for _ in range(4))
            sync, ptr_of, dtype = torch.cuda.synchronize, lambda x: x.data_ptr(), C.F16
        else:
            rng = np.random.default_rng(0)
            q, k, v, o = (rng.standard_normal((b, s, h, d)).astype(np.float32) for _ in range(4))
            sync, ptr_of, dtype = (lambda: None), (lambda x: x.ctypes.data), C.F32
        fattn.attention(q, k, v, out=o)   # makes the context, builds the kernels
        sync()
        ctx = _context.get(backend, 0 if backend == "cuda" else None)
        py_us = rounds(lambda: fattn.attention(q, k, v, out=o), sync, args.calls, args.rounds)
        if args.profile:
            import cProfile
            import pstats
            prof = cProfile.Profile()
            prof.runcall(lambda: [fattn.attention(q, k, v, out=o) for _ in range(args.calls)])
            with open(args.profile, "a") as f:
                f.write(f"== {backend}\n")
                pstats.Stats(prof, stream=f).sort_stats("tottime").print_stats(25)
        raw, bufs = raw_forward(ctx, q, k, v, o, ptr_of, dtype, b, h, s, d)
        with ctx.lock:
            c_us = rounds(raw, sync, args.calls, args.rounds)
        for bf in bufs:
            C.lib.fattn_buffer_free(bf)
        print(json.dumps({"backend": backend, "device": ctx.name, "shape": [b, s, h, d],
                          "python_us": round(py_us, 2), "c_us": round(c_us, 2),
                          "overhead_us": round(py_us - c_us, 2)}), flush=True)


if __name__ == "__main__":
    main()

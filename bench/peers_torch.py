#!/usr/bin/env python3
"""PyTorch's scaled_dot_product_attention backends (FlashAttention-2, cuDNN,
memory-efficient) on the fattn_bench shapes, on an NVIDIA GPU, in one process.
One JSON line per (peer, dtype, shape): median milliseconds of --iters calls
after two warm-ups, timed with CUDA events; TFLOP/s counted as fattn counts
(4*B*HQ*D per visible (query, key) pair: B*HQ*S*S unmasked, the unmasked pairs
when causal); GB/s as fattn counts (the bytes of Q, K, V and O, each moved
once, over the median time). Fields: peer, device_name, dtype, batch, heads,
heads_kv, seq, seq_kv, dim, causal (0, 1 bottom-right, 2 top-left), then ms,
tflops, gbps; or "error" where a peer refuses the shape (FlashAttention-2 has
no f32), or "status": "skipped" with a "note" where Q, K, V and O do not fit
the GPU.

The papers' sweep (default), as fattn_bench's: seq --seqs, dim --dims,
batch*seq = 16384, heads*dim = 2048, causal and not (--quick: seq 256..1024,
dim 64, batch*seq = 2048, heads*dim = 512).
--decode, as fattn_bench --decode: seq_q 1, not causal, batch --batches
(1,8,64) x seq_kv --seqs (4096,16384,32768,131072) x heads --heads (32:8 GQA,
32:32 MHA) x dim --dims (64,128), every dtype (--quick: the first two batches
and lengths). Grouped-query shapes pass enable_gqa=True (PyTorch 2.5 or newer),
so K and V are read once per key/value head, as fattn reads them.
--shape takes fattn_bench's forms: BxHxSxD[c|t], H may be HQ:HKV, S may be
SQ:SKV (c: causal bottom-right, t: top-left), or b=1,hq=32,hkv=8,sq=1,skv=4096,
d=128[,causal=0|br|tl][,dtype=f32|f16|bf16][,page=N]. Bottom-right with seq_q !=
seq_kv is passed as torch.nn.attention.bias.causal_lower_right (a boolean mask
on older PyTorch). dtype= runs that shape in that dtype only (if --dtypes
leaves it out too). page= is accepted so that fattn_bench's shape list can be
given as it is: SDPA has no paged cache, so the contiguous shape is timed
(once, however many page sizes name it); the tables set fattn's paged rows
beside it. lens= / kv= (varied lengths) are skipped with a note on stderr:
SDPA takes dense batches. --no-sweep (with or without --decode): only the
--shape shapes.

Usage: bench/peers_torch.py [--quick] [--seqs 512,...] [--dims 64,128] [--dtypes f32,f16,bf16]
                            [--shape SHAPE]... [--iters 10] > peers.jsonl
       bench/peers_torch.py --decode [--quick] [--batches 1,8,64] [--seqs 4096,...]
                            [--heads 32:8,32:32] [--dims 64,128] [--dtypes ...] > peers.jsonl
--fattn-python adds a "fattn-python" row per shape: fattn.attention from the
Python package (python/, pip install ./python) on the same PyTorch tensors,
zero-copy, timed the same way (so its Python overhead shows on small shapes).
Exit status 1, saying why, where PyTorch or a CUDA GPU is missing (or the
fattn package, with --fattn-python).
"""
import argparse
import json
import re
import sys

DECODE_SEQS = "4096,16384,32768,131072"
ELEMENT = {"f32": 4, "f16": 2, "bf16": 2}


def visible_pairs(sq, skv, causal):
    """(query, key) pairs the mask leaves, as fattn_visible_pairs counts them:
    row i sees keys j <= i + off (bottom-right: off = skv - sq; top-left: 0)."""
    if not causal:
        return sq * skv
    off = skv - sq if causal == 1 else 0
    lo = -off if off < 0 else 0           # first row that sees a key
    full = max(skv - off - 1, 0)          # first row that sees them all
    mid_end = min(full, sq)
    pairs = 0
    if mid_end > lo:
        pairs += (lo + off + 1 + mid_end + off) * (mid_end - lo) // 2
    full_from = max(full, lo)
    if sq > full_from:
        pairs += (sq - full_from) * skv
    return pairs


def flops(b, hq, sq, skv, d, causal):
    return 4.0 * b * hq * d * visible_pairs(sq, skv, causal)


def io_bytes(b, hq, hkv, sq, skv, d, dtype):
    """Q, K, V and O, each moved once."""
    return (2 * b * hq * sq * d + 2 * b * hkv * skv * d) * ELEMENT[dtype]


def parse_shape(spec):
    """fattn_bench's --shape forms -> ((b, hq, hkv, sq, skv, d, causal), dtype or None);
    None for a varied-length shape (lens= / kv=), which SDPA cannot take."""
    dtype = None
    if "=" in spec:
        f = {"b": 1, "hq": None, "hkv": None, "sq": None, "skv": None, "d": None, "causal": 0}
        alias = {"batch": "b", "h": "hq", "heads": "hq", "heads_kv": "hkv", "s": "sq", "seq": "sq",
                 "seq_kv": "skv", "dim": "d"}
        for item in spec.split(","):
            key, _, value = item.partition("=")
            key = alias.get(key, key)
            if key in ("lens", "kv"):
                return None
            if key == "dtype":
                if value not in ELEMENT:
                    raise ValueError(f"dtype={value} is not f32, f16 or bf16")
                dtype = value
            elif key == "page":
                if not value.isdigit():
                    raise ValueError(f"page={value} is not a whole number")
            elif key == "causal":
                causal = {"0": 0, "none": 0, "1": 1, "br": 1, "2": 2, "tl": 2}.get(value)
                if causal is None:
                    raise ValueError(f"causal={value} is not 0, br or tl")
                f["causal"] = causal
            elif key in f and value.isdigit() and int(value) >= 1:
                f[key] = int(value)
            else:
                raise ValueError(f"'{item}' is not b, hq, hkv, sq, skv, d (a whole number >= 1) or causal")
        if None in (f["hq"], f["sq"], f["d"]):
            raise ValueError("hq (or h), sq (or s) and d are needed")
        b, hq, hkv, sq, skv, d, c = (f["b"], f["hq"], f["hkv"] or f["hq"], f["sq"], f["skv"] or f["sq"],
                                     f["d"], f["causal"])
    else:
        m = re.fullmatch(r"(\d+)x(\d+)(?::(\d+))?x(\d+)(?::(\d+))?x(\d+)([ct]?)", spec)
        if not m:
            raise ValueError("not BxHxSxD[c|t] (H may be HQ:HKV, S may be SQ:SKV)")
        b, hq, hkv, sq, skv, d = (int(x) if x else None for x in m.groups()[:6])
        hkv, skv = hkv or hq, skv or sq
        c = {"": 0, "c": 1, "t": 2}[m.group(7)]
    if min(b, hq, hkv, sq, skv, d) < 1 or hq % hkv:
        raise ValueError("sizes must be >= 1 and HQ a multiple of HKV")
    return (b, hq, hkv, sq, skv, d, c), dtype


def int_list(text, name):
    try:
        values = [int(x) for x in text.split(",")]
    except ValueError:
        values = []
    if not values or min(values) < 1:
        sys.exit(f"peers_torch.py: --{name} '{text}' is not a list of whole numbers >= 1")
    return values


def shapes_of(args):
    """The shapes to run, in fattn_bench's order: (shape, dtype or None for every dtype)."""
    shapes = []
    if args.decode and args.sweep:
        batches = int_list(args.batches, "batches")
        seqs = int_list(args.seqs or DECODE_SEQS, "seqs")
        dims = int_list(args.dims, "dims")
        heads = []
        for h in args.heads.split(","):
            hq, _, hkv = h.partition(":")
            if not hq.isdigit() or not (hkv or hq).isdigit() or int(hq) < 1 or int(hkv or hq) < 1 \
                    or int(hq) % int(hkv or hq):
                sys.exit(f"peers_torch.py: --heads '{h}' is not HQ:HKV (HQ a multiple of HKV) or H")
            heads.append((int(hq), int(hkv or hq)))
        if args.quick:
            batches, seqs = batches[:2], seqs[:2]
        shapes = [((b, hq, hkv, 1, s, d, 0), None) for d in dims for (hq, hkv) in heads
                  for b in batches for s in seqs]
    elif args.sweep:
        tokens, width = 16384, 2048
        seqs, dims = int_list(args.seqs or "512,1024,2048,4096,8192,16384", "seqs"), int_list(args.dims, "dims")
        if args.quick:
            tokens, width, seqs, dims = 2048, 512, [256, 512, 1024], [64]
        shapes = [((max(tokens // s, 1), max(width // d, 1), max(width // d, 1), s, s, d, c), None)
                  for d in dims for c in (0, 1) for s in seqs]
    for spec in args.shape:
        try:
            got = parse_shape(spec)
        except ValueError as e:
            sys.exit(f"peers_torch.py: --shape '{spec}': {e}")
        if got is None:
            print(f"peers_torch.py: --shape '{spec}': skipped (varied lengths: SDPA takes dense "
                  "batches)", file=sys.stderr)
        elif got not in shapes:  # page sizes of one shape: the contiguous shape once
            shapes.append(got)
    return shapes


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seqs", default=None, help="seq (sweep) or seq_kv (--decode) values")
    ap.add_argument("--dims", default="64,128")
    ap.add_argument("--dtypes", default="f32,f16,bf16")
    ap.add_argument("--dtype", choices=("all", "f32", "f16", "bf16"), help="as fattn_bench: one dtype or all")
    ap.add_argument("--shape", action="append", default=[])
    ap.add_argument("--quick", action="store_true", help="fattn_bench --quick's shapes")
    ap.add_argument("--decode", action="store_true", help="fattn_bench --decode's shapes")
    ap.add_argument("--batches", default="1,8,64", help="--decode: batches")
    ap.add_argument("--heads", default="32:8,32:32", help="--decode: HQ:HKV pairs")
    ap.add_argument("--no-sweep", dest="sweep", action="store_false", help="only the --shape shapes")
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--fattn-python", action="store_true",
                    help="add a 'fattn-python' row: fattn.attention (python/) on the same tensors")
    args = ap.parse_args()
    if args.dtype:
        args.dtypes = "f32,f16,bf16" if args.dtype == "all" else args.dtype
    dtypes = args.dtypes.split(",")
    if not dtypes or any(dt not in ELEMENT for dt in dtypes):
        sys.exit(f"peers_torch.py: --dtypes '{args.dtypes}' is not a list of f32, f16, bf16")
    if args.iters < 1:
        sys.exit("peers_torch.py: --iters must be >= 1")
    shapes = shapes_of(args)
    if not shapes:
        sys.exit("peers_torch.py: no shapes (--no-sweep without --shape)")
    try:
        import torch
        from torch.nn.attention import SDPBackend, sdpa_kernel
    except ImportError as e:
        sys.exit(f"peers_torch.py: PyTorch is not installed ({e})")
    if not torch.cuda.is_available():
        sys.exit("peers_torch.py: PyTorch sees no CUDA GPU")
    try:
        from torch.nn.attention.bias import causal_lower_right
    except ImportError:
        causal_lower_right = None

    fattn_py = None
    if args.fattn_python:
        try:
            import fattn as fattn_py
        except ImportError as e:
            sys.exit(f"peers_torch.py: --fattn-python: the fattn package is not installed ({e}; "
                     "pip install ./python)")

    def median_ms(call):
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
        return sorted(times)[len(times) // 2]

    peers = {"torch-flash": SDPBackend.FLASH_ATTENTION, "torch-cudnn": SDPBackend.CUDNN_ATTENTION,
             "torch-efficient": SDPBackend.EFFICIENT_ATTENTION}
    types = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}
    device = torch.cuda.get_device_name()
    sdpa = torch.nn.functional.scaled_dot_product_attention
    for dt in ("f32", "f16", "bf16"):
        for (b, hq, hkv, sq, skv, d, c), only in shapes:
            if (only or dt) != dt or (only is None and dt not in dtypes):
                continue
            base = {"device_name": device, "dtype": dt, "batch": b, "heads": hq, "heads_kv": hkv,
                    "seq": sq, "seq_kv": skv, "dim": d, "causal": c}
            need = io_bytes(b, hq, hkv, sq, skv, d, dt)
            free, _ = torch.cuda.mem_get_info()
            if need > 0.9 * free:
                for name in list(peers) + (["fattn-python"] if fattn_py else []):
                    print(json.dumps({"peer": name, **base, "status": "skipped",
                                      "note": f"no room: Q, K, V and O need {need / 2**30:.1f} GiB, "
                                              f"the GPU has {free / 2**30:.1f} GiB free"}), flush=True)
                continue
            try:
                # (batch, heads, seq, dim), as SDPA takes it; random in [-1, 1), never zeros,
                # filled in place (a decode cache can be tens of GiB).
                q = torch.empty(b, hq, sq, d, device="cuda", dtype=types[dt]).uniform_(-1, 1)
                k, v = (torch.empty(b, hkv, skv, d, device="cuda", dtype=types[dt]).uniform_(-1, 1)
                        for _ in range(2))
            except torch.cuda.OutOfMemoryError as e:
                q = k = v = None
                torch.cuda.empty_cache()
                for name in list(peers) + (["fattn-python"] if fattn_py else []):
                    print(json.dumps({"peer": name, **base, "status": "skipped",
                                      "note": "no room: " + str(e).splitlines()[0][:160]}), flush=True)
                continue
            kwargs = {}
            if hq != hkv:
                kwargs["enable_gqa"] = True  # K/V read once per key/value head
            if c == 2 or (c == 1 and sq == skv):
                kwargs["is_causal"] = True  # top-left, which is bottom-right when sq == skv
            elif c == 1:
                if causal_lower_right is not None:
                    kwargs["attn_mask"] = causal_lower_right(sq, skv)
                else:
                    i = torch.arange(sq, device="cuda")[:, None]
                    j = torch.arange(skv, device="cuda")[None, :]
                    kwargs["attn_mask"] = j <= i + (skv - sq)
            calls = {name: (backend, lambda: sdpa(q, k, v, **kwargs)) for name, backend in peers.items()}
            if fattn_py is not None:
                # The same tensors, zero-copy through DLPack, on PyTorch's current stream.
                align = "top_left" if c == 2 else "bottom_right"
                calls["fattn-python"] = (None, lambda: fattn_py.attention(
                    q, k, v, layout="bhsd", causal=c != 0, causal_alignment=align))
            for name, (backend, call) in calls.items():
                row = {"peer": name, **base}
                try:
                    if backend is None:
                        ms = median_ms(call)
                    else:
                        with sdpa_kernel(backend):
                            ms = median_ms(call)
                    row.update(ms=round(ms, 5), tflops=round(flops(b, hq, sq, skv, d, c) / (ms * 1e-3) / 1e12, 3),
                               gbps=round(need / (ms * 1e-3) / 1e9, 2))
                except Exception as e:  # a backend that refuses the shape or dtype
                    row["error"] = str(e).splitlines()[0][:200] if str(e) else type(e).__name__
                print(json.dumps(row), flush=True)
            del q, k, v, kwargs
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()

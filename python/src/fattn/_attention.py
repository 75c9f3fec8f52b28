"""fattn.attention and fattn.combine: argument plumbing from arrays to one
fattn_forward / fattn_combine call. Everything the C API checks is left to
it; this layer checks only what the C API cannot see (array shapes against
each other, devices, the layout's axes)."""
import ctypes

import numpy as np

from . import _capi as C
from ._arrays import as_view, empty_like, index_view
from ._call import Call, pick_context
from ._errors import fail

# fattn's (batch, head, seq, dim) as axes of the caller's arrays.
_DENSE = {"bshd": (0, 2, 1, 3), "bhsd": (0, 1, 2, 3)}
_PACKED = {"bshd": (None, 1, 0, 2), "bhsd": (None, 0, 1, 2)}   # [total, h, d] / [h, total, d]
_LSE_DENSE, _LSE_PACKED = (0, 1, 2, None), (None, 0, 1, None)
_VECTOR, _TABLE = (None, None, 0, None), (0, None, 1, None)
_CAUSAL = {"bottom_right": C.CAUSAL_BOTTOM_RIGHT, "top_left": C.CAUSAL_TOP_LEFT}


def _axes(layout, packed):
    table = _PACKED if packed else _DENSE
    if layout not in table:
        fail("InvalidArgumentError", f"layout={layout!r}: expected 'bshd' ([batch, seq, heads, "
             "dim], FlashAttention's) or 'bhsd' ([batch, heads, seq, dim], PyTorch SDPA's)")
    return table[layout]


def _sizes(view, name, axes):
    """(batch, heads, seq, dim) of an array laid out as axes says."""
    want = sum(a is not None for a in axes)
    if len(view.shape) != want:
        fail("InvalidSizeError", f"{name}: expected {want} dimensions, got shape {view.shape}")
    return tuple(view.shape[a] if a is not None else 1 for a in axes)


def _shape(axes, b, h, s, d):
    """The array shape whose axes map to fattn's (b, h, s, d)."""
    n = sum(a is not None for a in axes)
    shape = [0] * n
    for a, x in zip(axes, (b, h, s, d)):
        if a is not None:
            shape[a] = x
    return tuple(shape)


def _max_len(view, name, given, table_name):
    """max_seqlen_*: given, else read from a host cu_seqlens table."""
    if given is not None:
        return int(given)
    if view.device[0] != "cpu":
        fail("InvalidArgumentError", f"{name} is needed with a {table_name} that is not in host "
             "memory (the longest sequence's length)")
    a = np.asarray(view.obj)
    return int(np.max(np.diff(a))) if a.size > 1 else 0


def _out(call, given, name, ref, shape, code, axes):
    """The output array (given or new) and its tensor."""
    if given is None:
        arr = empty_like(ref, shape, code)
        fresh = True
    else:
        arr, fresh = given, False
    v, _ = as_view(arr, name, writable=True)
    if v.shape != tuple(shape):
        fail("InvalidSizeError", f"{name}: shape {v.shape}, expected {tuple(shape)}")
    if v.dtype != code:
        fail("DtypeError", f"{name}: dtype must match ({'float32' if code == C.F32 else 'q'}'s)")
    return arr, call.tensor(v, axes, output=True, fresh=fresh)


def attention(q, k, v, *, causal=False, scale=None, layout="bshd", return_lse=False,
              backend=None, device=None, causal_alignment="bottom_right", window_size=(-1, -1),
              softcap=0.0, alibi_slopes=None, sinks=None, attn_bias=None, cu_seqlens_q=None,
              cu_seqlens_k=None, seqused_k=None, max_seqlen_q=None, max_seqlen_k=None,
              block_table=None, k_new=None, v_new=None, num_splits=0, allow_tf32=False,
              fast_softcap=False, out=None, lse_out=None, stream=None):
    """Exact attention softmax(scale * q k^T [+ variants]) v, on the backend
    that holds the arrays; see the package README for every argument."""
    packed_q, packed_k = cu_seqlens_q is not None, cu_seqlens_k is not None
    paged = block_table is not None
    qa, ka = _axes(layout, packed_q), _axes(layout, packed_k)

    views = []

    def view(x, name, index=False):
        if x is None:
            return None
        vw, s = (index_view if index else as_view)(x, name, stream=stream)
        views.append((name, vw, s))
        return vw

    qv, kv, vv = view(q, "q"), view(k, "k"), view(v, "v")
    cu_q, cu_k = view(cu_seqlens_q, "cu_seqlens_q", True), view(cu_seqlens_k, "cu_seqlens_k", True)
    used, table = view(seqused_k, "seqused_k", True), view(block_table, "block_table", True)
    slopes, sinkv = view(alibi_slopes, "alibi_slopes"), view(sinks, "sinks")
    bias, knv, vnv = view(attn_bias, "attn_bias"), view(k_new, "k_new"), view(v_new, "v_new")
    ctx = pick_context([(n, x) for n, x, _ in views], backend, device)

    # Sizes, from the arrays as the layout reads them.
    b, hq, sq, d = _sizes(qv, "q", qa)
    if packed_q:
        if len(cu_q.shape) != 1 or cu_q.shape[0] < 2:
            fail("InvalidSizeError", f"cu_seqlens_q: shape {cu_q.shape}, expected [batch + 1]")
        b, total_q, sq = cu_q.shape[0] - 1, sq, _max_len(cu_q, "max_seqlen_q", max_seqlen_q,
                                                          "cu_seqlens_q")
    pb, hk, sk, dk = _sizes(kv, "k", _DENSE[layout] if paged else ka)
    _, hv, skv, dv = _sizes(vv, "v", _DENSE[layout] if paged else ka)
    if dk != d:
        fail("HeadDimError", f"k's head dim {dk} differs from q's {d}")
    if (hv, skv) != (hk, sk) or (vv.shape[0] != kv.shape[0]):
        fail("InvalidSizeError", f"v's shape {vv.shape} does not match k's {kv.shape} "
             "(heads and keys; only the head dim may differ)")
    total_k = 0
    if paged:
        if len(table.shape) != 2 or table.shape[0] != b:
            fail("InvalidSizeError", f"block_table: shape {table.shape}, expected [batch={b}, "
                 "pages per sequence]")
        page_size, num_pages, pages = sk, pb, table.shape[1]
        sk = int(max_seqlen_k) if max_seqlen_k is not None else pages * page_size
    elif packed_k:
        if len(cu_k.shape) != 1 or cu_k.shape[0] != b + 1:
            fail("InvalidSizeError",
                 f"cu_seqlens_k: shape {cu_k.shape}, expected [batch+1={b + 1}]")
        total_k, sk = sk, _max_len(cu_k, "max_seqlen_k", max_seqlen_k, "cu_seqlens_k")
    else:
        if pb != b:
            fail("InvalidSizeError", f"k's batch {pb} differs from q's {b}")
        if max_seqlen_k is not None and int(max_seqlen_k) != sk:
            fail("InvalidSizeError", f"max_seqlen_k={max_seqlen_k} but k holds {sk} keys")
    if used is not None and used.shape != (b,):
        fail("InvalidSizeError", f"seqused_k: shape {used.shape}, expected [batch={b}]")

    if causal and causal_alignment not in _CAUSAL:
        fail("InvalidArgumentError", f"causal_alignment={causal_alignment!r}: expected "
             "'bottom_right' or 'top_left'")
    # The whole call, wrappers and copies included, holds the context's
    # lock: a C context serves one thread at a time.
    with ctx.lock:
        call = Call(ctx)
        try:
            t = call.tensor
            desc = C.AttentionDesc(batch=b, heads_q=hq, heads_kv=hk, seq_q=sq, seq_kv=sk,
                                   head_dim=d, dtype=qv.dtype, scale=float(scale or 0.0),
                                   causal=_CAUSAL[causal_alignment] if causal else C.CAUSAL_NONE,
                                   flags=(C.FLAG_ALLOW_TF32 if allow_tf32 else 0)
                                   | (C.FLAG_FAST_SOFTCAP if fast_softcap else 0),
                                   head_dim_v=dv if dv != d else 0)
            wl, wr = window_size
            mask = None
            if (wl, wr) != (-1, -1) or softcap or any(x is not None for x in (slopes, sinkv, bias)):
                mask = C.MaskDesc(window_left=int(wl), window_right=int(wr), softcap=float(softcap))
                if slopes is not None:
                    if slopes.shape not in ((hq,), (b, hq)):
                        fail("InvalidSizeError", f"alibi_slopes: shape {slopes.shape}, expected "
                             f"[heads_q={hq}] or [batch={b}, heads_q={hq}]")
                    mask.alibi_slopes = t(slopes, (None, 0, None, None) if len(slopes.shape) == 1
                                          else (0, 1, None, None))
                if sinkv is not None:
                    if sinkv.shape != (hq,):
                        fail("InvalidSizeError",
                             f"sinks: shape {sinkv.shape}, expected [heads_q={hq}]")
                    mask.sinks = t(sinkv, (None, 0, None, None))
                if bias is not None:
                    full = (b, hq, sq, sk)
                    n = len(bias.shape)
                    if n > 4 or any(x not in (1, y) for x, y in zip(bias.shape, full[4 - n:])):
                        fail("InvalidSizeError",
                             f"attn_bias: shape {bias.shape} does not broadcast "
                             f"to [batch, heads_q, seq_q, seq_k] = {list(full)}")
                    mask.bias = t(bias, tuple(None if i < 4 - n else i - (4 - n) for i in range(4)),
                                  broadcast=True)
                desc.mask = ctypes.pointer(mask)
            if packed_q or packed_k or used is not None:
                vl = C.VarlenDesc(cu_seqlens_q=t(cu_q, _VECTOR), cu_seqlens_kv=t(cu_k, _VECTOR),
                                  seqused_kv=t(used, _VECTOR), total_q=total_q if packed_q else 0,
                                  total_kv=total_k)
                desc.varlen = ctypes.pointer(vl)
            if paged:
                pk = C.PagedKvDesc(block_table=t(table, _TABLE), pages_per_seq=pages,
                                   page_size=page_size, num_pages=num_pages)
                desc.paged_kv = ctypes.pointer(pk)
            appending = knv is not None or vnv is not None
            if appending:
                if knv is None or vnv is None:
                    fail("InvalidArgumentError", "k_new and v_new go together")
                nb, nh, sn, nd = _sizes(knv, "k_new", _DENSE[layout])
                want_v = (b, hk, sn, dv)
                if (nb, nh, nd) != (b, hk, d) or _sizes(vnv, "v_new", _DENSE[layout]) != want_v:
                    fail("InvalidSizeError", f"k_new {knv.shape} / v_new {vnv.shape}: expected "
                         f"{_shape(_DENSE[layout], b, hk, sn, d)} / "
                         f"{_shape(_DENSE[layout], b, hk, sn, dv)}")
                ap = C.KvAppendDesc(k_new=t(knv, _DENSE[layout]), v_new=t(vnv, _DENSE[layout]),
                                    seq_new=sn)
                desc.append = ctypes.pointer(ap)

            oshape = _shape(qa, b, hq, total_q if packed_q else sq, dv)
            lse_axes = _LSE_PACKED if packed_q else _LSE_DENSE
            lshape = (hq, total_q) if packed_q else (b, hq, sq)
            o, to = _out(call, out, "out", qv, oshape, qv.dtype, qa)
            lse, tl = None, None
            if return_lse or lse_out is not None:
                lse, tl = _out(call, lse_out, "lse_out", qv, lshape, C.F32, lse_axes)
            tq = t(qv, qa)
            # With append the cache is written (in place; a host cache a GPU
            # backend copied is read back).
            tk = t(kv, _DENSE[layout] if paged else ka, output=appending)
            tv = t(vv, _DENSE[layout] if paged else ka, output=appending)
            ctx.set_splits(int(num_splits))
            _run(ctx, call, views, stream, "fattn_forward", ctypes.byref(desc), tq, tk, tv, to, tl)
        finally:
            call.close()
        return (o, lse) if (return_lse or lse_out is not None) else o


def _native_stream(ctx, views, stream):
    """The stream the call runs on: the DLPack stream of its CUDA arrays
    (the producer's current stream), else `stream`, else the context's own."""
    if ctx.kind != C.BACKEND_CUDA:
        if stream is not None:
            fail("InvalidArgumentError", "stream= applies to the CUDA backend only")
        return None
    for _, v, s in views:
        if s is not None:
            return s
    if stream:
        return int(stream)
    for _, v, _ in views:   # PyTorch tensors, read directly: PyTorch's current stream
        if v.framework == "torch" and v.device[0] == "cuda":
            import torch
            return torch.cuda.current_stream(v.device[1]).cuda_stream or 1
    return None


def _run(ctx, call, views, stream, fn, *args):
    """The C call, on the call's stream; copied outputs read back. The
    caller holds ctx.lock."""
    ctx.set_stream(_native_stream(ctx, views, stream))
    ctx.call(fn, ctx.handle, *args)
    call.finish()


def combine(o_parts, lse_parts, *, layout="bshd", dtype=None, out=None, lse_out=None,
            backend=None, device=None, stream=None):
    """Merges partial results over disjoint key sets: o_parts [parts, ...]
    (each part an attention output in `layout`), lse_parts [parts, batch,
    heads, seq] float32. Returns (o, lse)."""
    views = []
    for x, name in ((o_parts, "o_parts"), (lse_parts, "lse_parts")):
        vw, s = as_view(x, name, stream=stream)
        views.append((name, vw, s))
    ov, lv = views[0][1], views[1][1]
    ctx = pick_context([(n, x) for n, x, _ in views], backend, device)
    axes = tuple(None if a is None else a + 1 for a in _axes(layout, False))
    if len(ov.shape) != 5:
        fail("InvalidSizeError", f"o_parts: shape {ov.shape}, expected [parts, *attention output]")
    parts = ov.shape[0]
    b, h, s, d = (ov.shape[a] for a in axes)
    if lv.shape != (parts, b, h, s):
        fail("InvalidSizeError", f"lse_parts: shape {lv.shape}, expected {(parts, b, h, s)}")
    code = ov.dtype if dtype is None else _dtype_code(dtype)
    with ctx.lock:
        call = Call(ctx)
        try:
            desc = C.CombineDesc(batch=b, heads=h, seq=s, head_dim=d, parts=parts,
                                 part_dtype=ov.dtype, dtype=code,
                                 o_part_stride=ov.strides[0] if parts > 1 else 0,
                                 lse_part_stride=lv.strides[0] if parts > 1 else 0)
            oshape = _shape(_DENSE[layout], b, h, s, d)
            o, to = _out(call, out, "out", ov, oshape, code, _DENSE[layout])
            lse, tl = _out(call, lse_out, "lse_out", ov, (b, h, s), C.F32, _LSE_DENSE)
            tparts = call.tensor(ov, axes)
            tlse = call.tensor(lv, (1, 2, 3, None))
            _run(ctx, call, views, stream, "fattn_combine", ctypes.byref(desc), tparts, tlse, to,
                 tl)
        finally:
            call.close()
        return o, lse


def _dtype_code(dtype):
    names = {"float32": C.F32, "f32": C.F32, "float16": C.F16, "f16": C.F16,
             "bfloat16": C.BF16, "bf16": C.BF16}
    name = getattr(dtype, "name", None) or str(dtype).replace("torch.", "")
    if name not in names:
        fail("DtypeError", f"dtype {dtype!r}: expected float32, float16 or bfloat16")
    return names[name]

"""What is here (backends, devices) and what a problem costs (memory, FLOPs)."""
import ctypes

from . import _capi as C
from . import _context
from ._attention import _CAUSAL, _dtype_code

_KINDS = (C.BACKEND_CPU, C.BACKEND_CUDA, C.BACKEND_OPENCL)


def backends():
    """Every backend with its availability: a list of dicts (name,
    available, device_count, gpu_count, reason)."""
    out = []
    for kind in _KINDS:
        info = C.BackendInfo()
        C.call("fattn_backend_get_info", kind, ctypes.byref(info))
        out.append({"name": info.name.decode(), "available": bool(info.available),
                    "device_count": info.device_count, "gpu_count": info.gpu_count,
                    "reason": info.reason.decode(errors="replace")})
    return out


def devices(backend=None):
    """The devices of one backend (or of every available one): a list of
    dicts (backend, index, name)."""
    kinds = [_context.backend_kind(backend)] if backend is not None else _KINDS
    out = []
    for kind in kinds:
        info = C.BackendInfo()
        C.call("fattn_backend_get_info", kind, ctypes.byref(info))
        buf = ctypes.create_string_buffer(512)
        for i in range(info.device_count):
            C.call("fattn_device_get_name", kind, i, buf, len(buf))
            out.append({"backend": info.name.decode(), "index": i,
                        "name": buf.value.decode(errors="replace")})
    return out


def _desc(batch, heads_q, seq_q, seq_kv, head_dim, heads_kv, head_dim_v, dtype, causal,
          causal_alignment):
    return C.AttentionDesc(batch=batch, heads_q=heads_q, heads_kv=heads_kv or heads_q,
                           seq_q=seq_q, seq_kv=seq_q if seq_kv is None else seq_kv,
                           head_dim=head_dim, dtype=_dtype_code(dtype),
                           causal=_CAUSAL.get(causal_alignment, -1) if causal else 0,
                           head_dim_v=head_dim_v or 0)


def memory_estimate(batch, heads_q, seq_q, head_dim, *, seq_kv=None, heads_kv=None,
                    head_dim_v=None, dtype="float16", causal=False,
                    causal_alignment="bottom_right", backend=None, device=None):
    """fattn_memory_estimate (no backend: generic tiles) or, with a backend,
    fattn_context_memory_report (its own tiling and kernel), as a dict."""
    desc = _desc(batch, heads_q, seq_q, seq_kv, head_dim, heads_kv, head_dim_v, dtype, causal,
                 causal_alignment)
    rep = C.MemoryReport()
    if backend is None and device is None:
        C.call("fattn_memory_estimate", ctypes.byref(desc), None, ctypes.byref(rep))
    else:
        ctx = _context.get(backend, device)
        with ctx.lock:
            ctx.call("fattn_context_memory_report", ctx.handle, ctypes.byref(desc),
                     ctypes.byref(rep))
    return {name: (getattr(rep, name).decode() if name == "kernel" else getattr(rep, name))
            for name, _ in C.MemoryReport._fields_ if name != "size"}


def flops(batch, heads_q, seq_q, head_dim, *, seq_kv=None, heads_kv=None, head_dim_v=None,
          causal=False, causal_alignment="bottom_right"):
    """fattn_flops: 2*B*Hq*(D+Dv) per unmasked query-key pair (0.0 for an
    invalid description)."""
    desc = _desc(batch, heads_q, seq_q, seq_kv, head_dim, heads_kv, head_dim_v, "float32",
                 causal, causal_alignment)
    return C.lib.fattn_flops(ctypes.byref(desc))


def synchronize(backend=None, device=None):
    """Waits for the work fattn queued on (backend, device)'s cached context
    and raises what it reports (e.g. a bad device-side index table)."""
    _context.get(backend, device).synchronize()

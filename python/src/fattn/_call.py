"""One C call's tensors: which context runs it, and each array's memory as a
fattn buffer (a wrapper around the caller's memory, or, for host arrays on a
GPU backend, a device copy) described as a fattn_tensor."""
import ctypes

from . import _capi as C
from . import _context
from ._errors import fail


def _where(v):
    kind, dev = v.device
    return f"a fattn array on {dev.backend}:{dev.device}" if kind == "fattn" else f"{kind}:{dev}"


def pick_context(views, backend, device):
    """The context for a call: the device the arrays live on (a CUDA array's
    own device, a fattn.Array's context), else (backend or the CPU, device)
    for host arrays. Host arrays may join a GPU call (they are copied);
    arrays on two different devices may not."""
    placed = [(n, v) for n, v in views if v is not None and v.device[0] != "cpu"]
    for n, v in placed[1:]:
        if v.device != placed[0][1].device:
            fail("InvalidArgumentError", f"{n} is {_where(v)} but {placed[0][0]} is "
                 f"{_where(placed[0][1])}: every array of a call must be on one device")
    if not placed:
        return _context.get(backend if backend is not None else "cpu", device)
    name, v = placed[0]
    if v.device[0] == "fattn":
        ctx = v.device[1]
    else:
        ctx = _context.get("cuda", v.device[1])
    if backend is not None and _context.backend_kind(backend) not in (ctx.kind, C.BACKEND_AUTO):
        fail("InvalidArgumentError", f"{name} is {_where(v)} but backend={backend!r} was asked")
    if device is not None and v.device[0] == "cuda" and int(device) != v.device[1]:
        fail("InvalidArgumentError", f"{name} is {_where(v)} but device={device} was asked")
    return ctx


class Call:
    """Collects the tensors of one call on ctx; close() frees the wrappers
    and device copies (after reading copied outputs back with finish())."""

    def __init__(self, ctx):
        self.ctx, self.bufs, self.readback, self.keep = ctx, [], [], []

    def tensor(self, view, dims, *, output=False, fresh=False, broadcast=False):
        """A fattn_tensor (by reference) for view; dims names the view's axis
        for fattn's batch, head, seq and dim (None: not there, stride 0). An
        axis of size 1 gets stride 0, as the C API asks, except the dim axis
        (contiguous, stride 1) unless the tensor broadcasts (the bias)."""
        if view is None:
            return None
        st = [0 if a is None or view.shape[a] == 1 else view.strides[a] for a in dims]
        if not broadcast and (dims[3] is None or view.shape[dims[3]] == 1):
            st[3] = 1
        buf, off = self._memory(view, output, fresh)
        t = C.Tensor(buffer=buf, dtype=view.dtype, offset=off, stride_batch=st[0],
                     stride_head=st[1], stride_seq=st[2], stride_dim=st[3])
        self.keep.append(t)
        return ctypes.pointer(t)

    def _memory(self, view, output, fresh):
        if view.buffer is not None:
            return view.buffer, view.offset
        if view.size == 0:
            return None, 0
        ctx, n = self.ctx, view.nbytes_span()
        if view.device[0] == "cpu" and ctx.kind != C.BACKEND_CPU:
            b = ctx.alloc(n)
            self.bufs.append(b)
            # A copied output goes up too unless every element is new: the
            # gaps of a strided out= keep what the caller had there.
            if not (output and fresh):
                ctx.call("fattn_buffer_write", b, 0, ctypes.c_void_p(view.ptr), n)
            if output:
                self.readback.append((b, view.ptr, n))
            return b, 0
        b = ctx.wrap(ctypes.c_void_p(view.ptr), n, not output)
        self.bufs.append(b)
        return b, 0

    def finish(self):
        for b, ptr, n in self.readback:
            self.ctx.call("fattn_buffer_read", b, 0, ctypes.c_void_p(ptr), n)

    def close(self):
        for b in self.bufs:
            C.lib.fattn_buffer_free(b)
        self.bufs = []

"""fattn.Array: an array in a fattn context's memory (device memory on CUDA
and OpenCL, host memory on the CPU backend), so that repeated calls on an
OpenCL or CUDA device need no copies and no other framework."""
import ctypes

import numpy as np

from . import _arrays as A
from . import _capi as C
from . import _context


class Array:
    """A contiguous (row-major) array owned by fattn. Make one with
    fattn.asarray(x, backend=..., device=...) or as the output of a call
    whose inputs are fattn arrays; read it back with .numpy()."""

    def __init__(self, ctx, buffer, shape, code):
        self._ctx, self._buf, self.shape, self._code = ctx, buffer, tuple(shape), code

    @classmethod
    def empty(cls, ctx, shape, code):
        n = int(np.prod(shape, dtype=np.int64)) if len(shape) else 1
        return cls(ctx, ctx.alloc(n * A.ESIZE[code]), shape, code)

    def __del__(self):
        if getattr(self, "_buf", None) and not _context._exiting:
            with self._ctx.lock:   # a call on the context, from whichever thread the GC runs on
                C.lib.fattn_buffer_free(self._buf)
            self._buf = None

    @property
    def dtype(self):
        return A.numpy_dtype(self._code)

    @property
    def backend(self):
        return self._ctx.backend

    @property
    def device(self):
        return self._ctx.device

    @property
    def ndim(self):
        return len(self.shape)

    @property
    def nbytes(self):
        return int(np.prod(self.shape, dtype=np.int64)) * A.ESIZE[self._code]

    def _view(self):
        return A.View(None, self.shape, A.compact_strides(self.shape), self._code,
                      ("fattn", self._ctx), self, "fattn",
                      self, buffer=self._buf, offset=0)

    def numpy(self):
        """A NumPy copy (waits for the work queued on the context)."""
        out = np.empty(self.shape, dtype=self.dtype)
        if out.nbytes:
            with self._ctx.lock:
                self._ctx.call("fattn_buffer_read", self._buf, 0,
                               ctypes.c_void_p(out.ctypes.data), out.nbytes)
        return out

    def __array__(self, dtype=None, copy=None):
        a = self.numpy()
        return a if dtype is None else a.astype(dtype)

    def __repr__(self):
        return (f"fattn.Array(shape={self.shape}, dtype={self.dtype.name}, "
                f"backend={self.backend!r}, device={self._ctx.name!r})")


def asarray(x, *, backend=None, device=None):
    """Copies host data (a NumPy array or anything np.asarray takes; bf16
    through ml_dtypes) into a new fattn.Array on (backend, device)."""
    a = np.ascontiguousarray(x)
    if A._code_of_numpy(a.dtype) is None:
        A.fail("DtypeError", f"dtype {a.dtype} is not supported (float32, float16, bfloat16, "
               "int32)")
    ctx = _context.get(backend, device)
    with ctx.lock:
        arr = Array.empty(ctx, a.shape, A._code_of_numpy(a.dtype))
        if a.nbytes:
            ctx.call("fattn_buffer_write", arr._buf, 0, ctypes.c_void_p(a.ctypes.data), a.nbytes)
    return arr

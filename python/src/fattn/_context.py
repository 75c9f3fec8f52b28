"""Contexts, cached per (backend, device) for the life of the process.

A C context is not thread-safe; each cached one carries a lock that every
call through it holds, so Python threads may share them (ctypes releases the
GIL while C runs, so threads on different contexts run in parallel)."""
import atexit
import ctypes
import threading

from . import _capi as C
from ._errors import fail

_cache = {}
_cache_lock = threading.Lock()


_kinds = {}


def backend_kind(name):
    """A backend name ("cpu", "cuda", "opencl", "auto"; any case) as its kind."""
    if isinstance(name, int):
        return name
    kind = _kinds.get(name)
    if kind is None:
        k = ctypes.c_int()
        C.call("fattn_backend_from_name", str(name).encode(), ctypes.byref(k))
        kind = _kinds[name] = k.value
    return kind


class Context:
    def __init__(self, kind, device):
        p = C.ContextParams(backend=kind, device=device)
        h = ctypes.c_void_p()
        C.call("fattn_context_create_with", ctypes.byref(p), ctypes.byref(h))
        self.handle = h.value
        self.kind = C.lib.fattn_context_backend(self.handle)
        self.device = device
        self.lock = threading.RLock()   # re-entrant: an Array freed by the GC mid-call
        self.splits = 0        # FATTN_PARAM_KV_SPLITS as last set
        self.stream = None     # the native stream as last set (None: the context's own)

    @property
    def backend(self):
        return {C.BACKEND_CPU: "cpu", C.BACKEND_CUDA: "cuda", C.BACKEND_OPENCL: "opencl"}[self.kind]

    @property
    def name(self):
        return C.lib.fattn_context_device_name(self.handle).decode(errors="replace")

    def call(self, fn, *args):
        C.call(fn, *args, ctx=self.handle)

    def set_splits(self, n):
        if n != self.splits:
            self.call("fattn_context_set_param", self.handle, C.PARAM_KV_SPLITS, int(n))
            self.splits = n

    def set_stream(self, native):
        if native != self.stream:
            self.call("fattn_context_set_stream", self.handle, native)
            self.stream = native

    def wrap(self, ptr, nbytes, const):
        b = ctypes.c_void_p()
        fn = "fattn_buffer_wrap_const" if const else "fattn_buffer_wrap"
        self.call(fn, self.handle, ptr, nbytes, ctypes.byref(b))
        return b.value

    def alloc(self, nbytes):
        b = ctypes.c_void_p()
        self.call("fattn_buffer_alloc", self.handle, max(int(nbytes), 1), ctypes.byref(b))
        return b.value

    def synchronize(self):
        with self.lock:
            self.call("fattn_context_synchronize", self.handle)

    def __del__(self):
        # Not at interpreter exit: the GPU runtimes may be gone by then, and
        # the process's end frees everything anyway.
        if getattr(self, "handle", None) and not _exiting:
            C.lib.fattn_context_free(self.handle)
            self.handle = None


def get(backend, device):
    """The cached context for (backend, device); device None is the backend's
    default (FATTN_DEVICE, else 0)."""
    kind = backend_kind(backend if backend is not None else "auto")
    dev = -1 if device is None else int(device)
    if dev < -1:
        fail("InvalidArgumentError", f"device {device}: must be an index >= 0")
    key = (kind, dev)
    with _cache_lock:
        ctx = _cache.get(key)
        if ctx is None:
            ctx = _cache[key] = Context(kind, dev)
        return ctx


def release():
    """Drops the cached contexts: each is freed once nothing uses it (a
    fattn.Array keeps its context). Later calls make new ones."""
    with _cache_lock:
        _cache.clear()


def _at_exit():
    global _exiting
    _exiting = True


_exiting = False
atexit.register(_at_exit)

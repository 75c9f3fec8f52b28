"""Arrays in, arrays out: NumPy arrays, fattn.Array, and any object with
__dlpack__ (PyTorch, CuPy, JAX, NumPy's own), seen as a View (address,
shape, strides in elements, fattn dtype, device) without copying; outputs
made in the framework of the inputs."""
import ctypes
import sys

import numpy as np

from . import _capi as C
from ._errors import fail

# DLPack device types and dtype codes (dlpack.h).
DL_CPU, DL_CUDA, DL_CUDA_HOST, DL_CUDA_MANAGED = 1, 2, 3, 13
_DL_DTYPES = {(2, 32): C.F32, (2, 16): C.F16, (4, 16): C.BF16, (0, 32): C.I32}
DTYPE_NAMES = {C.F32: "float32", C.F16: "float16", C.BF16: "bfloat16", C.I32: "int32"}
ESIZE = {C.F32: 4, C.F16: 2, C.BF16: 2, C.I32: 4}


def numpy_dtype(code):
    if code == C.BF16:
        try:
            import ml_dtypes
        except ImportError:
            fail("DtypeError", "bfloat16 NumPy arrays need the ml_dtypes package "
                 "(pip install ml_dtypes)")
        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(DTYPE_NAMES[code])


_NP_CODES = {np.dtype(np.float32): C.F32, np.dtype(np.float16): C.F16,
             np.dtype(np.int32): C.I32}


def _code_of_numpy(dt):
    code = _NP_CODES.get(dt)
    if code is None and dt.name == "bfloat16":
        code = _NP_CODES[dt] = C.BF16
    return code


def compact_strides(shape):
    """Row-major strides, in elements."""
    strides, acc = [0] * len(shape), 1
    for i in reversed(range(len(shape))):
        strides[i], acc = acc, acc * max(shape[i], 1)
    return strides


class View:
    """An array's memory as fattn sees it. device is ("cpu", 0), ("cuda", n)
    or ("fattn", context); for fattn arrays, buffer and offset name the
    memory, else ptr does. owner keeps the memory (or the DLPack capsule)
    alive while the view is used."""

    __slots__ = ("ptr", "buffer", "offset", "shape", "strides", "dtype", "device", "owner",
                 "framework", "obj")

    def __init__(self, ptr, shape, strides, dtype, device, owner, framework, obj,
                 buffer=None, offset=0):
        if 0 in shape:   # an empty array's strides may be anything (NumPy's are 0)
            strides = compact_strides(shape)
        self.ptr, self.shape, self.strides, self.dtype = ptr, tuple(shape), tuple(strides), dtype
        self.device, self.owner, self.framework, self.obj = device, owner, framework, obj
        self.buffer, self.offset = buffer, offset

    @property
    def size(self):
        n = 1
        for s in self.shape:
            n *= s
        return n

    def span(self):
        """Elements from the first element to the last one, inclusive."""
        if self.size == 0:
            return 0
        return 1 + sum((n - 1) * s for n, s in zip(self.shape, self.strides))

    def nbytes_span(self):
        return self.span() * ESIZE[self.dtype]


def _from_numpy(a, name, writable):
    code = _code_of_numpy(a.dtype)
    if code is None:
        fail("DtypeError", f"{name}: dtype {a.dtype} is not supported "
             "(float32, float16, bfloat16 via ml_dtypes; int32 for index tables)")
    es = a.dtype.itemsize
    if any(s < 0 or s % es for s in a.strides):
        if writable:
            fail("StrideError", f"{name}: strides {a.strides} (bytes) must be non-negative "
                 f"multiples of the element size {es}")
        a = np.ascontiguousarray(a)   # an input: a copy keeps the call exact
    if writable and not a.flags.writeable:
        fail("InvalidArgumentError", f"{name}: the output array is read-only")
    return View(a.ctypes.data, a.shape, [s // es for s in a.strides], code, ("cpu", 0), a,
                "numpy", a)


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", _DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


_capsule_ptr = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_ptr.restype, _capsule_ptr.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]


def _framework(x):
    mod = type(x).__module__.split(".")[0]
    return mod if mod in ("torch", "cupy", "jax", "jaxlib", "numpy") else "dlpack"


def cuda_stream_of(x, device_id, stream):
    """The stream fattn runs on for a CUDA array: the caller's `stream` if
    given, else the producer's current one (PyTorch, CuPy), else the legacy
    default stream. Returned as the DLPack protocol's integer (1 = legacy
    default)."""
    if stream is not None:
        return int(stream) or 1
    fw = _framework(x)
    if fw == "torch":
        import torch
        return torch.cuda.current_stream(device_id).cuda_stream or 1
    if fw == "cupy":
        import cupy
        with cupy.cuda.Device(device_id):
            return cupy.cuda.get_current_stream().ptr or 1
    return 1


def _from_dlpack(x, name, stream):
    dev_type, dev_id = x.__dlpack_device__()
    dev_type = int(dev_type)
    if dev_type in (DL_CPU, DL_CUDA_HOST):
        capsule, device = x.__dlpack__(), ("cpu", 0)
        s = None
    elif dev_type in (DL_CUDA, DL_CUDA_MANAGED):
        s = cuda_stream_of(x, dev_id, stream)
        capsule, device = x.__dlpack__(stream=s), ("cuda", int(dev_id))
    else:
        fail("UnsupportedError", f"{name}: DLPack device type {dev_type} is not supported "
             "(CPU and CUDA arrays are; for OpenCL use fattn.asarray)")
    ptr = _capsule_ptr(capsule, b"dltensor")
    t = _DLTensor.from_address(ptr)
    code = _DL_DTYPES.get((t.dtype.code, t.dtype.bits)) if t.dtype.lanes == 1 else None
    if code is None:
        fail("DtypeError", f"{name}: DLPack dtype (code {t.dtype.code}, {t.dtype.bits} bits, "
             f"{t.dtype.lanes} lanes) is not supported (float32, float16, bfloat16; int32 "
             "for index tables)")
    shape = [t.shape[i] for i in range(t.ndim)]
    strides = [t.strides[i] for i in range(t.ndim)] if t.strides else compact_strides(shape)
    if any(st < 0 for st, n in zip(strides, shape) if n > 1):
        fail("StrideError", f"{name}: negative strides {strides} are not supported")
    strides = [st if n > 1 else 0 for st, n in zip(strides, shape)]
    view = View((t.data or 0) + t.byte_offset, shape, strides, code, device, capsule,
                _framework(x), x)
    return view, s


_TORCH_CODES = {}


def _from_torch(x, name, torch):
    """A PyTorch tensor read directly (the same facts DLPack gives, without
    building a capsule per tensor: a tenth of the cost)."""
    if not _TORCH_CODES:
        _TORCH_CODES.update({torch.float32: C.F32, torch.float16: C.F16,
                             torch.bfloat16: C.BF16, torch.int32: C.I32})
    code = _TORCH_CODES.get(x.dtype)
    if code is None:
        fail("DtypeError", f"{name}: dtype {x.dtype} is not supported (float32, float16, "
             "bfloat16; int32 for index tables)")
    dev = x.device
    if dev.type == "cuda":
        device = ("cuda", dev.index if dev.index is not None else torch.cuda.current_device())
    elif dev.type == "cpu":
        device = ("cpu", 0)
    else:
        fail("UnsupportedError", f"{name}: a tensor on {dev} (CPU and CUDA tensors are)")
    shape, strides = x.shape, x.stride()
    if any(st < 0 for st, n in zip(strides, shape) if n > 1):
        fail("StrideError", f"{name}: negative strides {strides} are not supported")
    return View(x.data_ptr(), shape, strides, code, device, x, "torch", x)


def as_view(x, name, *, writable=False, stream=None):
    """(View, DLPack stream or None) for an input or output array."""
    from ._array import Array
    if isinstance(x, np.ndarray):
        return _from_numpy(x, name, writable), None
    if isinstance(x, Array):
        return x._view(), None
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(x, torch.Tensor):
        return _from_torch(x, name, torch), None
    if hasattr(x, "__dlpack__") and hasattr(x, "__dlpack_device__"):
        return _from_dlpack(x, name, stream)
    if writable:
        fail("InvalidArgumentError", f"{name}: expected a NumPy array, a fattn.Array or an "
             f"object with __dlpack__, got {type(x).__name__}")
    # A Python sequence: floats become float32 (fattn has no float64).
    a = np.asarray(x)
    return _from_numpy(a.astype(np.float32) if a.dtype.kind == "f" and a.itemsize > 4 else a,
                       name, False), None


def index_view(x, name, stream=None):
    """An int32 index table; Python sequences and NumPy integer arrays of
    another width are converted (a host copy)."""
    if isinstance(x, (list, tuple)) or (isinstance(x, np.ndarray) and x.dtype != np.int32
                                        and x.dtype.kind in "iu"):
        arr = np.asarray(x)
        if arr.size and (arr.min() < -2**31 or arr.max() >= 2**31):
            fail("InvalidArgumentError", f"{name}: values do not fit int32")
        x = arr.astype(np.int32)
    v, s = as_view(x, name, stream=stream)
    if v.dtype != C.I32:
        fail("DtypeError", f"{name}: must be int32, is {DTYPE_NAMES[v.dtype]}")
    return v, s


def empty_like(ref, shape, code, ctx=None):
    """An uninitialised array of `shape` and fattn dtype `code` in the
    framework and on the device of the View ref."""
    fw, dev = ref.framework, ref.device
    if dev[0] == "fattn":
        from ._array import Array
        return Array.empty(dev[1], shape, code)
    if fw == "torch":
        import torch
        tdt = {C.F32: torch.float32, C.F16: torch.float16, C.BF16: torch.bfloat16}[code]
        return torch.empty(shape, dtype=tdt, device=ref.obj.device)
    if fw == "cupy":
        import cupy
        with cupy.cuda.Device(dev[1]):
            return cupy.empty(shape, dtype=numpy_dtype(code))
    if dev[0] == "cpu":
        return np.empty(shape, dtype=numpy_dtype(code))
    fail("UnsupportedError", f"cannot allocate the output for a {type(ref.obj).__name__} on "
         f"{dev[0]}:{dev[1]}: pass out= (and lse_out=) arrays")

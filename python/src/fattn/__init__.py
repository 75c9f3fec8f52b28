"""fattn: exact FlashAttention on CPU, CUDA and OpenCL, for NumPy arrays and
any DLPack tensor (PyTorch, CuPy, JAX), through the fattn C library.

    import fattn
    o = fattn.attention(q, k, v, causal=True)   # q, k, v: [batch, seq, heads, dim]
"""
from ._capi import lib as _lib
from ._errors import ERRORS as _ERRORS, Error
from ._array import Array, asarray
from ._attention import attention, combine
from ._context import release
from ._info import backends, devices, flops, memory_estimate, synchronize

globals().update(_ERRORS)
__version__ = _lib.fattn_version_string().decode()
__all__ = ["attention", "combine", "Array", "asarray", "backends", "devices", "flops",
           "memory_estimate", "synchronize", "release", "Error", *_ERRORS]

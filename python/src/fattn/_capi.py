"""The C API through ctypes: the library, its structs and its functions.

Every struct mirrors include/fattn.h field for field (tests/test_capi.py
compiles a C program that prints the header's offsets and compares them), and
each starts with its own size, so this module and a newer library stay
compatible the way C programs do.
"""
import ctypes
import glob
import os

from ._errors import raise_status

c_int64 = ctypes.c_int64
c_ptr = ctypes.c_void_p

# fattn_dtype
F32, F16, BF16, I32 = 0, 1, 2, 3
# fattn_backend_kind
BACKEND_AUTO, BACKEND_CPU, BACKEND_CUDA, BACKEND_OPENCL = 0, 1, 2, 3
# fattn_causal
CAUSAL_NONE, CAUSAL_BOTTOM_RIGHT, CAUSAL_TOP_LEFT = 0, 1, 2
# fattn_param
PARAM_KV_SPLITS = 102
FLAG_ALLOW_TF32 = 1
FLAG_FAST_SOFTCAP = 2


class _Sized(ctypes.Structure):
    """A struct whose first field is its own size, set on construction."""

    def __init__(self, **fields):
        super().__init__(size=ctypes.sizeof(self), **fields)


class BackendInfo(_Sized):
    _fields_ = [("size", ctypes.c_size_t), ("kind", ctypes.c_int), ("name", ctypes.c_char_p),
                ("available", ctypes.c_int), ("device_count", ctypes.c_int),
                ("gpu_count", ctypes.c_int), ("reason", ctypes.c_char * 256)]


class ContextParams(_Sized):
    _fields_ = [("size", ctypes.c_size_t), ("backend", ctypes.c_int), ("device", ctypes.c_int),
                ("cpu_threads", ctypes.c_int), ("opencl_platform", ctypes.c_char_p),
                ("opencl_device", ctypes.c_char_p), ("cache_dir", ctypes.c_char_p),
                ("native_context", c_ptr), ("native_device", c_ptr), ("native_queue", c_ptr),
                ("cuda_current_context", ctypes.c_int)]


class Tensor(_Sized):
    _fields_ = [("size", ctypes.c_size_t), ("buffer", c_ptr), ("dtype", ctypes.c_int),
                ("offset", c_int64), ("stride_batch", c_int64), ("stride_head", c_int64),
                ("stride_seq", c_int64), ("stride_dim", c_int64)]


class MaskDesc(_Sized):
    _fields_ = [("size", ctypes.c_size_t), ("window_left", c_int64), ("window_right", c_int64),
                ("softcap", ctypes.c_float), ("alibi_slopes", ctypes.POINTER(Tensor)),
                ("sinks", ctypes.POINTER(Tensor)), ("bias", ctypes.POINTER(Tensor))]


class VarlenDesc(_Sized):
    _fields_ = [("size", ctypes.c_size_t), ("cu_seqlens_q", ctypes.POINTER(Tensor)),
                ("cu_seqlens_kv", ctypes.POINTER(Tensor)), ("seqused_kv", ctypes.POINTER(Tensor)),
                ("total_q", c_int64), ("total_kv", c_int64)]


class PagedKvDesc(_Sized):
    _fields_ = [("size", ctypes.c_size_t), ("block_table", ctypes.POINTER(Tensor)),
                ("pages_per_seq", c_int64), ("page_size", c_int64), ("num_pages", c_int64)]


class KvAppendDesc(_Sized):
    _fields_ = [("size", ctypes.c_size_t), ("k_new", ctypes.POINTER(Tensor)),
                ("v_new", ctypes.POINTER(Tensor)), ("seq_new", c_int64)]


class AttentionDesc(_Sized):
    _fields_ = [("size", ctypes.c_size_t), ("batch", c_int64), ("heads_q", c_int64),
                ("heads_kv", c_int64), ("seq_q", c_int64), ("seq_kv", c_int64),
                ("head_dim", c_int64), ("dtype", ctypes.c_int), ("scale", ctypes.c_float),
                ("causal", ctypes.c_int), ("flags", ctypes.c_uint),
                ("mask", ctypes.POINTER(MaskDesc)), ("varlen", ctypes.POINTER(VarlenDesc)),
                ("paged_kv", ctypes.POINTER(PagedKvDesc)), ("workspace", c_ptr),
                ("append", ctypes.POINTER(KvAppendDesc)), ("head_dim_v", c_int64)]


class CombineDesc(_Sized):
    _fields_ = [("size", ctypes.c_size_t), ("batch", c_int64), ("heads", c_int64),
                ("seq", c_int64), ("head_dim", c_int64), ("parts", c_int64),
                ("part_dtype", ctypes.c_int), ("dtype", ctypes.c_int),
                ("o_part_stride", c_int64), ("lse_part_stride", c_int64)]


class Tiling(_Sized):
    _fields_ = [("size", ctypes.c_size_t), ("tile_q", ctypes.c_int), ("tile_kv", ctypes.c_int),
                ("concurrent_groups", c_int64), ("workspace_bytes", ctypes.c_uint64)]


class MemoryReport(_Sized):
    _fields_ = [("size", ctypes.c_size_t), ("naive_bytes", ctypes.c_uint64),
                ("flash_bytes", ctypes.c_uint64), ("tile_bytes", ctypes.c_uint64),
                ("groups", c_int64), ("row_stat_bytes", ctypes.c_uint64),
                ("workspace_bytes", ctypes.c_uint64), ("reduction", ctypes.c_double),
                ("percent_saved", ctypes.c_double), ("flops", ctypes.c_double),
                ("kernel", ctypes.c_char * 24)]


STRUCTS = {"fattn_backend_info": BackendInfo, "fattn_context_params": ContextParams,
           "fattn_tensor": Tensor, "fattn_mask_desc": MaskDesc, "fattn_varlen_desc": VarlenDesc,
           "fattn_paged_kv_desc": PagedKvDesc, "fattn_kv_append_desc": KvAppendDesc,
           "fattn_attention_desc": AttentionDesc, "fattn_combine_desc": CombineDesc,
           "fattn_tiling": Tiling, "fattn_memory_report": MemoryReport}

_P = ctypes.POINTER
_st = ctypes.c_int
# name: (restype, argtypes). A restype of _st is a status: checked by call().
_PROTOTYPES = {
    "fattn_version_string": (ctypes.c_char_p, []),
    "fattn_status_string": (ctypes.c_char_p, [ctypes.c_int]),
    "fattn_error_message": (ctypes.c_char_p, [c_ptr]),
    "fattn_backend_get_info": (_st, [ctypes.c_int, _P(BackendInfo)]),
    "fattn_backend_from_name": (_st, [ctypes.c_char_p, _P(ctypes.c_int)]),
    "fattn_device_get_name": (_st, [ctypes.c_int, ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t]),
    "fattn_context_create_with": (_st, [_P(ContextParams), _P(c_ptr)]),
    "fattn_context_free": (None, [c_ptr]),
    "fattn_context_backend": (ctypes.c_int, [c_ptr]),
    "fattn_context_device_name": (ctypes.c_char_p, [c_ptr]),
    "fattn_context_set_param": (_st, [c_ptr, ctypes.c_int, c_int64]),
    "fattn_context_get_param": (_st, [c_ptr, ctypes.c_int, _P(c_int64)]),
    "fattn_context_set_stream": (_st, [c_ptr, c_ptr]),
    "fattn_context_synchronize": (_st, [c_ptr]),
    "fattn_buffer_alloc": (_st, [c_ptr, ctypes.c_size_t, _P(c_ptr)]),
    "fattn_buffer_wrap": (_st, [c_ptr, c_ptr, ctypes.c_size_t, _P(c_ptr)]),
    "fattn_buffer_wrap_const": (_st, [c_ptr, c_ptr, ctypes.c_size_t, _P(c_ptr)]),
    "fattn_buffer_free": (None, [c_ptr]),
    "fattn_buffer_write": (_st, [c_ptr, ctypes.c_size_t, c_ptr, ctypes.c_size_t]),
    "fattn_buffer_read": (_st, [c_ptr, ctypes.c_size_t, c_ptr, ctypes.c_size_t]),
    "fattn_buffer_native": (c_ptr, [c_ptr]),
    "fattn_forward": (_st, [c_ptr, _P(AttentionDesc), _P(Tensor), _P(Tensor), _P(Tensor),
                            _P(Tensor), _P(Tensor)]),
    "fattn_combine": (_st, [c_ptr, _P(CombineDesc), _P(Tensor), _P(Tensor), _P(Tensor),
                            _P(Tensor)]),
    "fattn_memory_estimate": (_st, [_P(AttentionDesc), _P(Tiling), _P(MemoryReport)]),
    "fattn_context_memory_report": (_st, [c_ptr, _P(AttentionDesc), _P(MemoryReport)]),
    "fattn_flops": (ctypes.c_double, [_P(AttentionDesc)]),
}


def _candidates():
    """Where libfattn is looked for: FATTN_LIBRARY, then beside this package
    (a wheel installs it in fattn/lib), then the system's search path."""
    env = os.environ.get("FATTN_LIBRARY")
    if env:
        return [env]
    here = os.path.dirname(os.path.abspath(__file__))
    found = sorted(glob.glob(os.path.join(here, "lib*", "libfattn.so*")) +
                   glob.glob(os.path.join(here, "lib*", "libfattn*.dylib")) +
                   glob.glob(os.path.join(here, "bin", "fattn.dll")))
    return found[:1] + ["libfattn.so.0", "libfattn.so"]


def _load():
    tried = []
    for path in _candidates():
        try:
            lib = ctypes.CDLL(path)
        except OSError as e:
            tried.append(f"{path}: {e}")
            continue
        for name, (res, args) in _PROTOTYPES.items():
            fn = getattr(lib, name)
            fn.restype, fn.argtypes = res, args
        return lib
    raise ImportError("fattn: cannot load libfattn (set FATTN_LIBRARY to its path); tried:\n  " +
                      "\n  ".join(tried))


lib = _load()


def message(ctx=None):
    """The C library's detail of the last failure on ctx (or this thread's)."""
    m = lib.fattn_error_message(ctx)
    return m.decode(errors="replace") if m else ""


def call(name, *args, ctx=None):
    """Calls a status-returning function; raises the matching fattn.Error
    with the C message (from ctx, else from this thread's slot)."""
    st = getattr(lib, name)(*args)
    if st != 0:
        raise_status(st, message(ctx) or lib.fattn_status_string(st).decode(), name)

"""fattn.attention against the float64 reference: shapes that are no
multiple of any tile, GQA, causal both ways, LSE, every dtype, both
layouts, strided views, out=, on the CPU and OpenCL backends."""
import ctypes

import numpy as np
import pytest

import fattn
from fattn import _capi as C, _context
import reference
from conftest import available_backends, check, dtype_of, randn

BACKENDS = available_backends()
# (batch, heads_q, heads_kv, seq_q, seq_kv, head_dim, head_dim_v)
SHAPES = [(1, 1, 1, 1, 1, 1, 1), (2, 4, 2, 37, 50, 64, 64), (1, 8, 1, 5, 130, 72, 72),
          (3, 6, 3, 19, 7, 40, 40), (1, 2, 2, 33, 33, 128, 128), (2, 4, 4, 1, 200, 96, 48),
          (1, 2, 1, 16, 45, 192, 128), (1, 1, 1, 3, 9, 256, 256)]


def to_bhsd(x, layout):
    return x if layout == "bhsd" else np.swapaxes(x, 1, 2)


def from_bhsd(x, layout):
    return x if layout == "bhsd" else np.swapaxes(x, 1, 2)


def make(rng, shape, dtype, layout):
    b, hq, hk, sq, sk, d, dv = shape
    q = randn(rng, (b, hq, sq, d), dtype)
    k = randn(rng, (b, hk, sk, d), dtype)
    v = randn(rng, (b, hk, sk, dv), dtype)
    return [np.ascontiguousarray(from_bhsd(x, layout)) for x in (q, k, v)]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_shapes(backend, dtype, shape, rng):
    dt = dtype_of(dtype)
    for layout, causal, top_left in (("bshd", False, False), ("bhsd", True, False),
                                      ("bshd", True, True)):
        q, k, v = make(rng, shape, dt, layout)
        o, lse = fattn.attention(q, k, v, causal=causal, layout=layout, return_lse=True,
                                 causal_alignment="top_left" if top_left else "bottom_right",
                                 backend=backend)
        assert o.dtype == dt and lse.dtype == np.float32
        want_o, want_lse = reference.attention(to_bhsd(q, layout), to_bhsd(k, layout),
                                               to_bhsd(v, layout), causal=causal,
                                               top_left=top_left)
        check(to_bhsd(o, layout), want_o, dtype)
        check(lse, want_lse, dtype, "lse")


@pytest.mark.parametrize("backend", BACKENDS)
def test_strided_views_and_out(backend, rng):
    """Views into bigger arrays are described by strides, not copied; out=
    is written in place and its gaps are left alone."""
    big = randn(rng, (2, 40, 3, 6, 80), np.float32)   # [b, s, (q|k|v), h, 80]
    q, k, v = big[:, :, 0, :, :64], big[:, 3:, 1, ::2, 8:72], big[:, 3:, 2, ::2, 16:80]
    assert not q.flags.c_contiguous
    out = np.full((2, 40, 6, 100), 7.0, np.float32)
    dst = out[..., 10:74]
    res = fattn.attention(q, k, v, scale=0.3, out=dst, backend=backend)
    assert res is dst
    want, _ = reference.attention(to_bhsd(q, "bshd"), to_bhsd(k, "bshd"), to_bhsd(v, "bshd"),
                                  scale=0.3)
    check(to_bhsd(out[..., 10:74], "bshd"), want, "float32")
    assert (out[..., :10] == 7).all() and (out[..., 74:] == 7).all()


@pytest.mark.parametrize("backend", BACKENDS)
def test_no_keys(backend, rng):
    """seq_kv = 0: O = 0, lse = -inf."""
    q = randn(rng, (1, 3, 2, 16), np.float32)
    kv = np.zeros((1, 0, 2, 16), np.float32)
    o, lse = fattn.attention(q, kv, kv, return_lse=True, backend=backend)
    assert (o == 0).all() and np.isneginf(lse).all()


def test_lists_and_scale(rng):
    q = randn(rng, (1, 4, 1, 8), np.float32)
    o = fattn.attention(q.tolist(), q.tolist(), q.tolist(), scale=2.0)
    want, _ = reference.attention(to_bhsd(q, "bshd"), to_bhsd(q, "bshd"), to_bhsd(q, "bshd"),
                                  scale=2.0)
    check(to_bhsd(o, "bshd"), want, "float32")


@pytest.mark.parametrize("backend", BACKENDS)
def test_splits(backend, rng):
    """Decoding shapes under every forced split count agree with the reference."""
    q = randn(rng, (2, 1, 8, 64), np.float16)
    k = randn(rng, (2, 333, 2, 64), np.float16)
    v = randn(rng, (2, 333, 2, 64), np.float16)
    want, want_lse = reference.attention(to_bhsd(q, "bshd"), to_bhsd(k, "bshd"),
                                         to_bhsd(v, "bshd"))
    ctx = _context.get(backend, None)
    for n in (1, 2, 3, 7, 0):
        o, lse = fattn.attention(q, k, v, num_splits=n, return_lse=True, backend=backend)
        check(to_bhsd(o, "bshd"), want, "float16")
        check(lse, want_lse, "float16", "lse")
        # The count reached the context (FATTN_PARAM_KV_SPLITS) for this call.
        got = ctypes.c_int64(-1)
        C.call("fattn_context_get_param", ctx.handle, C.PARAM_KV_SPLITS, ctypes.byref(got))
        assert got.value == n


def test_fattn_arrays_stay_on_device(rng):
    """fattn.asarray puts data in a context's memory; a call on such arrays
    returns one there, and .numpy() reads it."""
    backend = "opencl" if any(b["name"] == "opencl" and b["available"]
                              for b in fattn.backends()) else "cpu"
    q = randn(rng, (1, 21, 4, 32), np.float32)
    k = randn(rng, (1, 30, 2, 32), np.float32)
    arrs = [fattn.asarray(x, backend=backend) for x in (q, k, k)]
    o, lse = fattn.attention(*arrs, causal=True, return_lse=True)
    assert isinstance(o, fattn.Array) and o.backend == backend and o.shape == q.shape
    want, want_lse = reference.attention(to_bhsd(q, "bshd"), to_bhsd(k, "bshd"),
                                         to_bhsd(k, "bshd"), causal=True)
    check(to_bhsd(o.numpy(), "bshd"), want, "float32")
    check(np.asarray(lse), want_lse, "float32", "lse")
    # Host index tables and slopes may join a call on device arrays: copied.
    o2 = fattn.attention(*arrs, alibi_slopes=np.full(4, 0.1, np.float32))
    want2, _ = reference.attention(to_bhsd(q, "bshd"), to_bhsd(k, "bshd"), to_bhsd(k, "bshd"),
                                   slopes=np.full(4, 0.1))
    check(to_bhsd(o2.numpy(), "bshd"), want2, "float32")

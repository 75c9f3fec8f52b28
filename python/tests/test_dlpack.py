"""DLPack inputs: NumPy's own __dlpack__ (through a wrapper that offers only
the protocol, so the DLPack path is the one taken), and PyTorch CPU tensors
when PyTorch is installed (a visible skip otherwise). CUDA tensors are in
test_torch_cuda.py."""
import numpy as np
import pytest

import fattn
import reference
from conftest import check, randn


class OnlyDLPack:
    """Exposes an array through the DLPack protocol and nothing else."""

    def __init__(self, a):
        self.a = a

    def __dlpack__(self, stream=None, **kw):
        return self.a.__dlpack__()

    def __dlpack_device__(self):
        return self.a.__dlpack_device__()


def bhsd(x):
    return np.swapaxes(x, 1, 2)


def test_numpy_dlpack_zero_copy(rng):
    big = randn(rng, (1, 30, 4, 48), np.float32)
    q = big[:, :, :, :32]                 # strided view: described, not copied
    k = randn(rng, (1, 41, 2, 32), np.float32)
    v = randn(rng, (1, 41, 2, 32), np.float32)
    o, lse = fattn.attention(OnlyDLPack(q), OnlyDLPack(k), OnlyDLPack(v), causal=True,
                             return_lse=True)
    assert isinstance(o, np.ndarray)
    want, wl = reference.attention(bhsd(q), bhsd(k), bhsd(v), causal=True)
    check(bhsd(o), want, "float32")
    check(lse, wl, "float32", "lse")
    # Written in place through DLPack: the output's own memory.
    out = np.zeros((1, 30, 4, 32), np.float32)
    fattn.attention(OnlyDLPack(q), OnlyDLPack(k), OnlyDLPack(v), causal=True,
                    out=OnlyDLPack(out))
    check(bhsd(out), want, "float32")


def test_dlpack_dtypes(rng):
    q = randn(rng, (1, 9, 2, 16), np.float16)
    o = fattn.attention(OnlyDLPack(q), OnlyDLPack(q), OnlyDLPack(q))
    want, _ = reference.attention(bhsd(q), bhsd(q), bhsd(q))
    check(bhsd(o), want, "float16")
    with pytest.raises(fattn.DtypeError, match="DLPack dtype"):
        fattn.attention(OnlyDLPack(q.astype(np.float64)), q, q)


def test_torch_cpu(rng):
    torch = pytest.importorskip("torch")
    q, k, v = (torch.randn(2, 4, 19, 32, dtype=torch.bfloat16) for _ in range(3))
    o, lse = fattn.attention(q, k, v, layout="bhsd", causal=True, return_lse=True)
    assert isinstance(o, torch.Tensor) and o.dtype == torch.bfloat16
    want = torch.nn.functional.scaled_dot_product_attention(q.double(), k.double(), v.double(),
                                                            is_causal=True)
    check(o.float().numpy(), want.numpy(), "bfloat16")
    qt = torch.randn(1, 8, 5, 3, 16).select(2, 1)   # strided: [1, 8, 3, 16] view
    o2 = fattn.attention(qt, qt, qt)
    want2, _ = reference.attention(bhsd(qt.numpy()), bhsd(qt.numpy()), bhsd(qt.numpy()))
    check(bhsd(o2.numpy()), want2, "float32")

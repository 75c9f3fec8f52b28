"""CuPy CUDA arrays (the GPU machine): zero-copy in, a CuPy array out, on
CuPy's current stream; checked against the float64 reference on the host.
Skipped, visibly, without CuPy, a GPU, or fattn's CUDA backend."""
import numpy as np
import pytest

import fattn
import reference
from conftest import check

cupy = pytest.importorskip("cupy")
try:
    if cupy.cuda.runtime.getDeviceCount() < 1:
        raise RuntimeError
except Exception:
    pytest.skip("no CUDA device for CuPy", allow_module_level=True)
if not any(b["name"] == "cuda" and b["available"] for b in fattn.backends()):
    pytest.skip("fattn was built without its CUDA backend", allow_module_level=True)


def test_cupy_in_cupy_out():
    rng = np.random.default_rng(5)
    q, k, v = (rng.standard_normal(s).astype(np.float16)
               for s in ((2, 77, 8, 64), (2, 90, 2, 64), (2, 90, 2, 64)))
    with cupy.cuda.Stream(non_blocking=True):
        o = fattn.attention(*(cupy.asarray(x) for x in (q, k, v)), causal=True)
        assert isinstance(o, cupy.ndarray)
        got = cupy.asnumpy(o)
    want, _ = reference.attention(*(np.swapaxes(x, 1, 2) for x in (q, k, v)), causal=True)
    check(np.swapaxes(got, 1, 2), want, "float16")

import os

import numpy as np
import pytest

import fattn

try:
    import ml_dtypes
    BF16 = np.dtype(ml_dtypes.bfloat16)
except ImportError:   # the bf16 cases then show as skips
    BF16 = None

# Tolerances against the float64 reference, relative to the output's scale.
TOL = {"float32": 2e-5, "float16": 4e-3, "bfloat16": 3e-2}


def available_backends():
    """cpu, and opencl where a device is there (FATTN_TEST_PY_BACKENDS
    narrows the list; FATTN_TEST_REQUIRE turns a skip into a failure); cuda
    is tested with PyTorch tensors (test_torch_cuda.py)."""
    want = os.environ.get("FATTN_TEST_PY_BACKENDS", "cpu,opencl").split(",")
    required = os.environ.get("FATTN_TEST_REQUIRE", "").split(",")
    have = {b["name"]: b["available"] for b in fattn.backends()}
    # A backend CI requires runs (and fails) rather than skip.
    return [pytest.param(b, marks=pytest.mark.skipif(not have.get(b) and b not in required,
                                                     reason=f"no {b} here"))
            for b in want]


def dtype_of(name):
    if name == "bfloat16":
        if BF16 is None:
            pytest.skip("ml_dtypes is not installed")
        return BF16
    return np.dtype(name)


def randn(rng, shape, dtype):
    """Random normal values rounded to dtype (never all zeros)."""
    return rng.standard_normal(shape).astype(np.float32).astype(dtype)


def check(got, want, dtype_name, what="o"):
    got = np.asarray(got, dtype=np.float64)
    want = np.asarray(want, dtype=np.float64)
    assert got.shape == want.shape, (what, got.shape, want.shape)
    inf = ~np.isfinite(want)
    assert np.array_equal(got[inf], want[inf]), f"{what}: non-finite entries differ"
    err = np.abs(got[~inf] - want[~inf]).max(initial=0.0)
    scale = max(1.0, np.abs(want[~inf]).max(initial=0.0))
    assert err <= TOL[dtype_name] * scale, f"{what}: max error {err:.3g} (scale {scale:.3g})"


@pytest.fixture
def rng():
    return np.random.default_rng(1234)

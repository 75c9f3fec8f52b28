"""Bad input raises the fattn.Error subclass of its status, with the C
library's message (or, for what only Python sees, one naming the argument)."""
import re
from pathlib import Path

import numpy as np
import pytest

import fattn
from conftest import randn

HEADER = Path(__file__).resolve().parents[2] / "include" / "fattn.h"


def arrays(rng, d=16, dtype=np.float32):
    return (randn(rng, (1, 5, 2, d), dtype), randn(rng, (1, 7, 2, d), dtype),
            randn(rng, (1, 7, 2, d), dtype))


def test_status_table_matches_header():
    """Every status in include/fattn.h has its class, by value and name."""
    text = HEADER.read_text()
    found = re.findall(r"X\((ERR_\w+),\s*(-\d+),", text)
    assert len(found) >= 22
    for name, value in found:
        cls = [c for c in fattn.Error.__subclasses__() if c.status == int(value)]
        assert len(cls) == 1 and cls[0].status_name == "FATTN_" + name, name


def test_c_errors_carry_status_and_message(rng):
    q, k, v = arrays(rng, d=300)
    with pytest.raises(fattn.HeadDimError) as e:
        fattn.attention(q, k, v)
    assert e.value.status == -4 and e.value.status_name == "FATTN_ERR_HEAD_DIM"
    assert "300" in e.value.message and isinstance(e.value, ValueError)
    q, k, v = arrays(rng)
    with pytest.raises(fattn.InvalidArgumentError, match="window"):
        fattn.attention(q, k, v, window_size=(-2, 0))
    with pytest.raises(fattn.InvalidArgumentError, match="softcap"):
        fattn.attention(q, k, v, softcap=-1.0)
    with pytest.raises(fattn.DtypeError):
        fattn.attention(q, k.astype(np.float16), v)
    with pytest.raises(fattn.HeadsError):
        fattn.attention(randn(rng, (1, 5, 3, 16), np.float32), k, v)
    with pytest.raises(fattn.UnknownBackendError):
        fattn.attention(q, k, v, backend="metal")


def test_python_side_errors(rng):
    q, k, v = arrays(rng)
    with pytest.raises(fattn.InvalidSizeError, match="expected 4 dimensions"):
        fattn.attention(q[0], k, v)
    with pytest.raises(fattn.HeadDimError, match="k's head dim"):
        fattn.attention(q, k[..., :8], v)
    with pytest.raises(fattn.InvalidSizeError, match="v's shape"):
        fattn.attention(q, k, v[:, :6])
    with pytest.raises(fattn.InvalidSizeError, match="batch"):
        fattn.attention(q, np.concatenate([k, k]), np.concatenate([v, v]))
    with pytest.raises(fattn.DtypeError, match="float64"):
        fattn.attention(q.astype(np.float64), k, v)
    with pytest.raises(fattn.InvalidArgumentError, match="layout"):
        fattn.attention(q, k, v, layout="sbhd")
    with pytest.raises(fattn.InvalidArgumentError, match="causal_alignment"):
        fattn.attention(q, k, v, causal=True, causal_alignment="middle")
    with pytest.raises(fattn.InvalidSizeError, match="alibi_slopes"):
        fattn.attention(q, k, v, alibi_slopes=np.ones(3, np.float32))
    with pytest.raises(fattn.DtypeError):
        fattn.attention(q, k, v, alibi_slopes=np.ones(2, np.float16))
    with pytest.raises(fattn.InvalidSizeError, match="attn_bias"):
        fattn.attention(q, k, v, attn_bias=np.zeros((5, 6), np.float32))
    with pytest.raises(fattn.InvalidSizeError, match="out"):
        fattn.attention(q, k, v, out=np.empty((1, 5, 2, 8), np.float32))
    with pytest.raises(fattn.InvalidArgumentError, match="read-only"):
        ro = np.empty_like(q)
        ro.flags.writeable = False
        fattn.attention(q, k, v, out=ro)
    with pytest.raises(fattn.InvalidArgumentError, match="k_new and v_new"):
        fattn.attention(q, k, v, k_new=k, seqused_k=[7])
    with pytest.raises(fattn.InvalidArgumentError, match="stream"):
        fattn.attention(q, k, v, stream=5)


def test_bad_tables(rng):
    """Host tables the CPU checks: a page outside the cache, offsets that
    decrease, a used length past the cache."""
    q = randn(rng, (2, 1, 2, 16), np.float32)
    kc = randn(rng, (4, 8, 2, 16), np.float32)
    with pytest.raises(fattn.IndexTableError, match="block_table"):
        fattn.attention(q, kc, kc, block_table=np.array([[0, 1], [2, 9]], np.int32))
    qp, kp = randn(rng, (6, 2, 16), np.float32), randn(rng, (6, 2, 16), np.float32)
    with pytest.raises(fattn.IndexTableError, match="cu_seqlens"):
        fattn.attention(qp, kp, kp, cu_seqlens_q=[0, 4, 2], cu_seqlens_k=[0, 3, 6],
                        max_seqlen_q=4, max_seqlen_k=3)
    k = randn(rng, (2, 5, 2, 16), np.float32)
    with pytest.raises(fattn.IndexTableError, match="seqused"):
        fattn.attention(q, k, k, seqused_k=[3, 6])
    with pytest.raises(fattn.InvalidArgumentError, match="int32"):
        fattn.attention(q, k, k, seqused_k=[3, 2**40])


def test_devices_must_agree(rng):
    q, k, v = arrays(rng)
    a = fattn.asarray(q, backend="cpu")
    names = [b["name"] for b in fattn.backends() if b["available"]]
    if "opencl" not in names:
        pytest.skip("needs a second backend (OpenCL) for two devices")
    b = fattn.asarray(k, backend="opencl")
    with pytest.raises(fattn.InvalidArgumentError, match="one device"):
        fattn.attention(a, b, b)
    with pytest.raises(fattn.InvalidArgumentError, match="backend="):
        fattn.attention(a, a, a, backend="opencl")


def test_unavailable_backend_names_why(rng):
    info = {b["name"]: b for b in fattn.backends()}
    gone = [n for n, b in info.items() if not b["available"]]
    if not gone:
        pytest.skip("every backend is available here")
    q, k, v = arrays(rng)
    with pytest.raises((fattn.BackendUnavailableError, fattn.NoDeviceError)) as e:
        fattn.attention(q, k, v, backend=gone[0])
    assert e.value.message

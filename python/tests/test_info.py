"""backends(), devices(), memory_estimate() and flops(): the C library's
answers, as plain Python values."""
import fattn


def test_backends_and_devices():
    info = {b["name"]: b for b in fattn.backends()}
    assert set(info) == {"cpu", "cuda", "opencl"}
    assert info["cpu"]["available"] and info["cpu"]["device_count"] >= 1
    for b in info.values():
        assert b["available"] == (b["reason"] == ""), b   # a reason exactly when unavailable
    devs = fattn.devices()
    assert sum(d["backend"] == "cpu" for d in devs) == info["cpu"]["device_count"]
    assert all(d["name"] for d in devs)
    assert fattn.devices("cpu")[0]["index"] == 0


def test_flops_and_memory():
    # 4 * B * Hq * Sq * Sk * D when not causal; causal bottom-right at Sq = Sk
    # counts S(S+1)/2 pairs.
    assert fattn.flops(2, 4, 100, 64, seq_kv=300) == 4.0 * 2 * 4 * 100 * 300 * 64
    assert fattn.flops(1, 1, 10, 8, causal=True) == 4.0 * 55 * 8
    assert fattn.flops(1, 1, 10, 8, head_dim_v=16) == 2.0 * 100 * (8 + 16)
    assert fattn.flops(1, 3, 10, 8, heads_kv=2) == 0.0   # invalid (3 % 2): 0, as in C
    rep = fattn.memory_estimate(1, 8, 4096, 128)
    assert rep["naive_bytes"] == 2 * 8 * 4096 * 4096 * 4
    assert 0 < rep["flash_bytes"] < rep["naive_bytes"] and rep["kernel"] == ""
    ctx_rep = fattn.memory_estimate(1, 8, 4096, 128, backend="cpu")
    assert ctx_rep["kernel"] != "" and ctx_rep["naive_bytes"] == rep["naive_bytes"]

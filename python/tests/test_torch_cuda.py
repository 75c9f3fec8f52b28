"""PyTorch CUDA tensors (the GPU machine): zero-copy in and out, on the
producer's current stream (a non-default one too), against PyTorch's SDPA.
Skipped, visibly, without PyTorch or a CUDA device or fattn's CUDA backend."""
import pytest

import fattn

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device for PyTorch", allow_module_level=True)
if not any(b["name"] == "cuda" and b["available"] for b in fattn.backends()):
    pytest.skip("fattn was built without its CUDA backend", allow_module_level=True)


def sdpa(q, k, v, causal):
    rep = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1)
    return torch.nn.functional.scaled_dot_product_attention(q.double(), k.double(), v.double(),
                                                            is_causal=causal)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("stream", ["default", "side"])
def test_zero_copy_on_current_stream(dtype, stream):
    torch.manual_seed(0)
    s = torch.cuda.Stream() if stream == "side" else torch.cuda.current_stream()
    with torch.cuda.stream(s):
        q = torch.randn(2, 8, 300, 128, device="cuda", dtype=dtype)
        k = torch.randn(2, 2, 333, 128, device="cuda", dtype=dtype)
        v = torch.randn(2, 2, 333, 128, device="cuda", dtype=dtype)
        out = torch.empty_like(q)
        # SDPA's is_causal is top-left; seq_q != seq_kv tells the two apart.
        res = fattn.attention(q, k, v, layout="bhsd", causal=True, causal_alignment="top_left",
                              out=out)
        assert res is out
        o, lse = fattn.attention(q, k, v, layout="bhsd", causal=True, return_lse=True,
                                 causal_alignment="top_left")
        # Work queued after, on the same stream, sees the results.
        diff = (o.double() - sdpa(q, k, v, True)).abs().max()
    s.synchronize()
    assert isinstance(o, torch.Tensor) and o.device == q.device and o.dtype == dtype
    assert lse.dtype == torch.float32 and lse.shape == (2, 8, 300)
    tol = {torch.float32: 2e-5, torch.float16: 4e-3, torch.bfloat16: 3e-2}[dtype]
    assert diff.item() <= tol * 4
    assert (out == o).all()


def test_out_pointer_is_the_callers():
    q = torch.randn(1, 64, 4, 64, device="cuda", dtype=torch.float16)
    out = torch.empty_like(q)
    ptr = out.data_ptr()
    fattn.attention(q, q, q, out=out)
    torch.cuda.synchronize()
    assert out.data_ptr() == ptr
    want = sdpa(q.transpose(1, 2), q.transpose(1, 2), q.transpose(1, 2), False).transpose(1, 2)
    assert (out.double() - want).abs().max().item() < 1e-2


def test_decode_paged_on_gpu():
    b, hq, hk, d, page = 2, 32, 8, 128, 16
    used = torch.tensor([1000, 37], dtype=torch.int32, device="cuda")
    pages = 64
    table = torch.randperm(b * pages, device="cuda").to(torch.int32).view(b, pages)
    kc = torch.randn(b * pages, page, hk, d, device="cuda", dtype=torch.bfloat16)
    vc = torch.randn(b * pages, page, hk, d, device="cuda", dtype=torch.bfloat16)
    q = torch.randn(b, 1, hq, d, device="cuda", dtype=torch.bfloat16)
    o = fattn.attention(q, kc, vc, block_table=table, seqused_k=used, max_seqlen_k=pages * page)
    for i in range(b):
        n = int(used[i])
        ks = kc[table[i].long()].reshape(-1, hk, d)[:n][None].transpose(1, 2)
        vs = vc[table[i].long()].reshape(-1, hk, d)[:n][None].transpose(1, 2)
        want = sdpa(q[i:i + 1].transpose(1, 2), ks, vs, False).transpose(1, 2)
        assert (o[i:i + 1].double() - want).abs().max().item() < 3e-2


def test_bad_device_table_reported_at_synchronize():
    q = torch.randn(1, 1, 8, 64, device="cuda", dtype=torch.float16)
    kc = torch.randn(4, 16, 8, 64, device="cuda", dtype=torch.float16)
    table = torch.tensor([[0, 99]], dtype=torch.int32, device="cuda")
    fattn.attention(q, kc, kc, block_table=table)   # asynchronous: no error yet
    with pytest.raises(fattn.IndexTableError):
        fattn.synchronize("cuda", 0)


def test_mixed_devices_refused():
    q = torch.randn(1, 8, 2, 16, device="cuda")
    with pytest.raises(fattn.InvalidArgumentError):
        fattn.attention(q, q, q, backend="cpu")

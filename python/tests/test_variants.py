"""Window, softcap, ALiBi, sinks and bias, alone and together, and the
ragged features: varlen, seqused_k, paged caches, append, combine."""
import numpy as np
import pytest

import fattn
import reference
from conftest import available_backends, check, randn

BACKENDS = available_backends()


def bhsd(x):
    return np.swapaxes(x, 1, 2)


def qkv(rng, b, hq, hk, sq, sk, d, dtype=np.float32, dv=None):
    return (randn(rng, (b, sq, hq, d), dtype), randn(rng, (b, sk, hk, d), dtype),
            randn(rng, (b, sk, hk, dv or d), dtype))


CASES = [
    dict(window_size=(0, 0)), dict(window_size=(3, -1)), dict(window_size=(-1, 2)),
    dict(window_size=(5, 1), causal=True), dict(window_size=(1000, 1000)),
    dict(softcap=5.0), dict(softcap=0.05),
    dict(softcap=5.0, fast_softcap=True),   # a permission: f32 here stays accurate
    dict(alibi_slopes="h"), dict(alibi_slopes="bh", causal=True),
    dict(sinks=True), dict(sinks=True, window_size=(2, 0)),
    dict(attn_bias=(2, 4, 13, 29)), dict(attn_bias=(13, 29)), dict(attn_bias=(1, 4, 1, 29)),
    dict(attn_bias=(2, 1, 13, 1)),
    dict(window_size=(4, 3), softcap=3.0, sinks=True, causal=True, alibi_slopes="h",
         attn_bias=(1, 4, 13, 29)),
]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join(f"{k}" for k in c))
def test_variant(backend, case, rng):
    b, hq, hk, sq, sk, d = 2, 4, 2, 13, 29, 40
    q, k, v = qkv(rng, b, hq, hk, sq, sk, d)
    kw, ref = dict(case), {}
    if "window_size" in kw:
        ref["window"] = kw["window_size"]
    if "softcap" in kw:
        ref["softcap"] = kw["softcap"]
        q = q * 4   # logits far past the cap
    if kw.get("causal"):
        ref["causal"] = True
    if "alibi_slopes" in kw:
        shape = (hq,) if kw["alibi_slopes"] == "h" else (b, hq)
        kw["alibi_slopes"] = ref["slopes"] = rng.uniform(0.05, 1.0, shape).astype(np.float32)
    if kw.pop("sinks", False):
        kw["sinks"] = ref["sinks"] = rng.uniform(-2, 2, hq).astype(np.float32)
    if "attn_bias" in kw:
        bias = randn(rng, kw["attn_bias"], np.float32)
        bias[..., ::7] = -np.inf   # hidden keys
        kw["attn_bias"] = ref["bias"] = bias
    o, lse = fattn.attention(q, k, v, return_lse=True, backend=backend, **kw)
    want, want_lse = reference.attention(bhsd(q), bhsd(k), bhsd(v), **ref)
    assert np.isfinite(o).all()
    check(bhsd(o), want, "float32")
    check(lse, want_lse, "float32", "lse")


@pytest.mark.parametrize("backend", BACKENDS)
def test_varlen(backend, rng):
    """Packed sequences, one of them empty and one a single key."""
    lq, lk = [5, 0, 1, 17], [9, 3, 1, 40]
    hq, hk, d = 4, 2, 24
    cq, ck = np.cumsum([0] + lq), np.cumsum([0] + lk)
    q = randn(rng, (cq[-1], hq, d), np.float16)
    k = randn(rng, (ck[-1], hk, d), np.float16)
    v = randn(rng, (ck[-1], hk, d), np.float16)
    o = np.full((cq[-1] + 3, hq, d), 9, np.float16)   # rows past the last sequence: untouched
    res, lse = fattn.attention(q, k, v, cu_seqlens_q=cq, cu_seqlens_k=ck, causal=True,
                               return_lse=True, out=o[:cq[-1]], backend=backend)
    assert lse.shape == (hq, cq[-1])
    for i in range(len(lq)):
        qs, ks = q[None, cq[i]:cq[i + 1]], k[None, ck[i]:ck[i + 1]]
        want, wl = reference.attention(bhsd(qs), bhsd(ks), bhsd(v[None, ck[i]:ck[i + 1]]),
                                       causal=True)
        check(bhsd(o[None, cq[i]:cq[i + 1]]), want, "float16")
        check(lse[:, cq[i]:cq[i + 1]], wl[0], "float16", "lse")
    assert (o[cq[-1]:] == 9).all()


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("page", [1, 5, 16])
def test_paged_with_append(backend, page, rng):
    """A shuffled page table, a last page partly used, and new keys appended
    at seqused_k before attending (flash_attn_with_kvcache)."""
    b, hq, hk, d, sq, new = 3, 4, 2, 32, 2, 2
    used = np.array([7, 0, 30], np.int32)
    pages_per_seq = -(-40 // page)
    num_pages = b * pages_per_seq + 3
    table = rng.permutation(num_pages)[:b * pages_per_seq].reshape(b, pages_per_seq)
    kc = randn(rng, (num_pages, page, hk, d), np.float32)
    vc = randn(rng, (num_pages, page, hk, d), np.float32)
    q, kn, vn = (randn(rng, (b, n, hk if i else hq, d), np.float32)
                 for i, n in enumerate((sq, new, new)))
    dense_k = [kc[table[i]].reshape(-1, hk, d)[:used[i]] for i in range(b)]
    dense_v = [vc[table[i]].reshape(-1, hk, d)[:used[i]] for i in range(b)]
    o = fattn.attention(q, kc, vc, block_table=table.astype(np.int32), seqused_k=used,
                        k_new=kn, v_new=vn, causal=True, max_seqlen_k=pages_per_seq * page,
                        backend=backend)
    for i in range(b):
        ks = np.concatenate([dense_k[i], kn[i]])[None]
        vs = np.concatenate([dense_v[i], vn[i]])[None]
        want, _ = reference.attention(bhsd(q[i:i + 1]), bhsd(ks), bhsd(vs), causal=True)
        check(bhsd(o[i:i + 1]), want, "float32")
        # The cache now holds the new keys.
        got = kc[table[i]].reshape(-1, hk, d)[used[i]:used[i] + new]
        assert np.array_equal(got, kn[i])


@pytest.mark.parametrize("backend", BACKENDS)
def test_combine(backend, rng):
    """Attention over key parts merged by fattn.combine equals the whole;
    an empty part (lse -inf) is skipped."""
    q, k, v = qkv(rng, 2, 4, 4, 6, 50, 16)
    cuts = [0, 11, 11, 37, 50]
    parts = [fattn.attention(q, k[:, a:z], v[:, a:z], return_lse=True, backend=backend)
             for a, z in zip(cuts, cuts[1:])]
    o_parts = np.stack([p[0] for p in parts])
    lse_parts = np.stack([p[1] for p in parts])
    assert np.isneginf(lse_parts[1]).all()
    o, lse = fattn.combine(o_parts, lse_parts, backend=backend)
    want, want_lse = reference.attention(bhsd(q), bhsd(k), bhsd(v))
    check(bhsd(o), want, "float32")
    check(lse, want_lse, "float32", "lse")
    o16, _ = fattn.combine(o_parts, lse_parts, dtype="float16", backend=backend)
    assert o16.dtype == np.float16
    check(bhsd(o16), want, "float16")

"""The float64 NumPy reference the tests compare with: include/fattn.h's
formulas written out directly, one (batch, head) plane at a time."""
import numpy as np


def attention(q, k, v, *, causal=False, top_left=False, scale=None, window=(-1, -1),
              softcap=0.0, slopes=None, sinks=None, bias=None):
    """q [B, Hq, Sq, D], k [B, Hk, Sk, D], v [B, Hk, Sk, Dv] (any float
    dtype, computed in float64); slopes [Hq] or [B, Hq]; sinks [Hq]; bias
    broadcasting to [B, Hq, Sq, Sk]. Returns (o [B, Hq, Sq, Dv], lse [B, Hq, Sq])."""
    q, k, v = (np.asarray(x, dtype=np.float64) for x in (q, k, v))
    b, hq, sq, d = q.shape
    hk, sk = k.shape[1], k.shape[2]
    k = np.repeat(k, hq // hk, axis=1)
    v = np.repeat(v, hq // hk, axis=1)
    scale = 1.0 / np.sqrt(d) if not scale else scale
    s = np.einsum("bhid,bhjd->bhij", q, k) * scale
    if softcap:
        s = softcap * np.tanh(s / softcap)
    off = sk - sq
    i = np.arange(sq)[:, None]
    j = np.arange(sk)[None, :]
    if slopes is not None:
        sl = np.broadcast_to(np.asarray(slopes, np.float64), (b, hq))
        s = s - sl[:, :, None, None] * np.abs(i + off - j)
    if bias is not None:
        s = s + np.asarray(bias, np.float64)
    vis = np.ones((sq, sk), bool)
    if causal:
        vis &= j <= (i if top_left else i + off)
    if window[0] >= 0:
        vis &= j >= i + off - window[0]
    if window[1] >= 0:
        vis &= j <= i + off + window[1]
    s = np.where(vis, s, -np.inf)
    m = s.max(axis=-1, initial=-np.inf)
    sink = None
    if sinks is not None:
        sink = np.asarray(sinks, np.float64)[None, :, None]
        m = np.maximum(m, sink)
    ms = np.where(np.isfinite(m), m, 0.0)
    p = np.exp(s - ms[..., None])
    den = p.sum(-1)
    if sink is not None:
        den = den + np.exp(sink - ms)
    with np.errstate(divide="ignore", invalid="ignore"):
        o = np.where(den[..., None] > 0, np.einsum("bhij,bhjd->bhid", p, v) / den[..., None], 0.0)
        lse = np.where(den > 0, np.log(den) + ms, -np.inf)
    return o, lse

"""Threads share the cached contexts: each call holds its context's lock,
and every result is still right."""
import threading

import numpy as np

import fattn
import reference
from conftest import check, randn


def test_threads_share_contexts(rng):
    backends = [b["name"] for b in fattn.backends()
                if b["available"] and b["name"] in ("cpu", "opencl")]
    jobs = []
    for i in range(12):
        q = randn(rng, (1, 17 + i, 4, 32), np.float32)
        k = randn(rng, (1, 23, 2, 32), np.float32)
        jobs.append((backends[i % len(backends)], q, k))
    results, errors = [None] * len(jobs), []

    def work(i):
        try:
            b, q, k = jobs[i]
            for _ in range(3):
                results[i] = fattn.attention(q, k, k, causal=True, backend=b)
        except Exception as e:   # reported below, in the main thread
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(jobs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    for (b, q, k), o in zip(jobs, results):
        want, _ = reference.attention(np.swapaxes(q, 1, 2), np.swapaxes(k, 1, 2),
                                      np.swapaxes(k, 1, 2), causal=True)
        check(np.swapaxes(o, 1, 2), want, "float32")

#!/usr/bin/env python3
"""Writes the seed corpus of fuzz_forward (tests/fuzz/corpus/): a few inputs
in the byte format fuzz_forward.c decodes, each a valid call or a named
refusal, so the fuzzer starts from calls that reach the kernels.
Run from anywhere: python3 tests/fuzz/make_corpus.py"""
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))


def small(n):      # size_val default class: 1..8
    return bytes([8, n - 1])


def upto256(n):    # size_val case 2: 1..256
    return bytes([2, n - 1])


def edge(n):       # size_val case 3: 62..69
    return bytes([3, n - 62])


def zero():
    return bytes([0, 0])


def negative(n):   # size_val case 1: -1..-64
    return bytes([1, n - 1])


def head_dim(n):   # dim_val case 2: 1..256
    return bytes([2, n - 1])


def call(ops=0, batch=small(1), heads_kv=small(2), gqa=1, seq_q=small(8), seq_kv=small(8),
         dim=head_dim(16), dtype=0, scale=b"\0\0", causal=False, specials=False,
         tiles=(b"\0\0", b"\0\0"), seed=1, accounting=b"\0\0\0\0\0\0\0\0", regions=b"\0",
         tensors=None, tail=b""):
    out = bytes([ops]) + batch + heads_kv
    out += bytes([1, gqa - 1])                  # heads_q = heads_kv * gqa
    out += seq_q + seq_kv + dim + bytes([dtype]) + scale
    out += bytes([(1 if causal else 0) | (0x30 if specials else 0)])
    out += tiles[0] + tiles[1] + struct.pack("<Q", seed)
    out += accounting + b"\x10" + regions       # 16 * 8 spare arena bytes
    # Per tensor: buffer pick (0: region 0, packed), stride mode (0: BSHD), offset.
    for t in tensors or [b"\0\0\0"] * 5:
        out += t
    return out + tail


SEEDS = {
    "basic-f32": call(accounting=b"\0\0\0\0\0\0\0\x03"),
    "causal-gqa-f16": call(heads_kv=small(2), gqa=4, seq_q=edge(65), seq_kv=upto256(33),
                           dim=head_dim(40), dtype=1, causal=True),
    "naive-bf16-bhsd": call(ops=12, seq_q=upto256(17), seq_kv=upto256(31), dim=head_dim(64), dtype=2,
                            tensors=[b"\0\x02\0"] * 4 + [b"\0\0\0"]),
    "no-keys-causal": call(seq_kv=zero(), causal=True),
    "refused-sizes": call(batch=negative(3), dim=bytes([1, 2]), scale=bytes([1, 0])),
    "host-and-copies": call(ops=16 | 32 | 1, seq_q=small(5), seq_kv=small(7), dim=head_dim(3),
                            tail=b"\0" + struct.pack("<Q", 100) + b"\0\x10\x20\0\x50\x60"),
    "broadcast-kv-tiles": call(seq_q=small(7), seq_kv=edge(64), dim=head_dim(8),
                               tiles=(bytes([1, 2]), bytes([1, 4])),
                               tensors=[b"\0\0\x03", b"\0\x04\0", b"\0\x0c\0", b"\0\x03\x01", b"\0\0\0"]),
    "misaligned-k": call(regions=b"\x06"),
    "specials": call(seq_q=small(4), seq_kv=small(6), specials=True, seed=7),
}


def main():
    out_dir = os.path.join(HERE, "corpus")
    os.makedirs(out_dir, exist_ok=True)
    for name, data in SEEDS.items():
        with open(os.path.join(out_dir, name), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    main()

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


CAUSAL = {False: 0, "none": 0, True: 0x01, "br": 0x01, "tl": 0x41, "3": 0x81}


def call(ops=0, batch=small(1), heads_kv=small(2), gqa=1, seq_q=small(8), seq_kv=small(8),
         dim=head_dim(16), dtype=0, scale=b"\0\0", causal=False, specials=False,
         tiles=(b"\0\0", b"\0\0"), seed=1, ext=0, regions=b"\0", tensors=None, extras=b"",
         accounting=b"\0\0\0\0\0\0\0\0", tail=b"", pre=b""):
    """causal: False/"none", True/"br" (bottom-right), "tl" (top-left) or "3"
    (no such alignment). tiles: two tile_val encodings, set as context
    parameters. ext: bit 0 the description's size follows in extras, bits
    1..4 a mask, varlen, paged-KV description and workspace follow there.
    pre: what bits 6 (a key split count) and 5 (a whole varlen/paged
    problem: decode_ragged) read, right after ext; bit 7 (fattn_combine)
    reads from tail."""
    out = bytes([ops]) + batch + heads_kv
    out += bytes([1, gqa - 1])                  # heads_q = heads_kv * gqa
    out += seq_q + seq_kv + dim + bytes([dtype]) + scale
    out += bytes([CAUSAL[causal] | (0x30 if specials else 0)])
    out += b"\0" + tiles[0] + b"\0" + tiles[1]  # tile_param_val: an int tile_val
    out += struct.pack("<Q", seed) + bytes([ext]) + pre
    out += b"\x10" + regions                    # 16 * 8 spare arena bytes
    # Per tensor: buffer pick (0: region 0, packed), stride mode (0: BSHD), offset.
    for t in tensors or [b"\0\0\0"] * 5:
        out += t
    return out + extras + accounting + tail


SEEDS = {
    "basic-f32": call(accounting=b"\0\0\0\0\0\0\0\x43"),
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
    # Top-left causal both ways; bottom-right with empty first rows.
    "causal-tl-sq-gt-sk": call(seq_q=upto256(37), seq_kv=small(5), dim=head_dim(24), causal="tl"),
    "causal-tl-sq-lt-sk": call(heads_kv=small(1), gqa=3, seq_q=small(7), seq_kv=edge(66), causal="tl", dtype=1),
    "causal-br-empty-rows": call(seq_q=upto256(37), seq_kv=small(5), dim=head_dim(24), causal="br"),
    "causal-3-refused": call(causal="3"),
    # The description's size (sized_val: selector, byte): 0; where flags ends
    # (an older caller's); a larger one with a zero tail; with a non-zero byte.
    "desc-size-0": call(ext=1, extras=b"\x01\0"),
    "desc-size-older": call(ext=1, extras=b"\x02\x0a"),
    "desc-size-zero-tail": call(ext=1, extras=b"\x04\x01"),
    "desc-size-nonzero-tail": call(ext=1, extras=b"\x05\x07\x03\x80"),
    # 93 bytes: past DESC_MIN, ending 5 bytes into paged_kv, which points to
    # a paged description: the library must not read a torn pointer.
    "desc-size-torn-pointer": call(ext=1 | 8, extras=b"\x03\x5d" + b"\x04" + upto256(16)),
    # A mask of INIT's values (asks nothing), and one with a window (refused).
    "mask-init": call(ext=2, extras=b"\0"),
    "mask-window": call(ext=2, extras=b"\x01\x06"),
    "varlen-cu-seqlens": call(ext=4, extras=b"\x01\x01\0\0\0"),
    "paged-page-size": call(ext=8, extras=b"\x04" + upto256(16)),
    "workspace-own": call(ext=16, extras=b"\x01\x04"),
    "workspace-foreign": call(ext=16, extras=b"\x02"),
    # Tiles set on the context: 5 x 9, and 1025 (valid, the CPU refuses it).
    "tiles-param": call(seq_q=edge(65), seq_kv=edge(63), tiles=(bytes([1, 4]), bytes([1, 8]))),
    "tiles-param-unsupported": call(tiles=(bytes([4, 0]), b"\0\0"), accounting=b"\0\0\0\0\0\0\0\x43"),
    # Whole variable-length and paged problems (decode_ragged: m, f, g, seq_q,
    # per sequence its lengths, then page size, spare pages, the used pages'
    # entries, total_q and total_kv extra rows, the spoiled sequence).
    # 3 packed sequences (5 rows / 144 keys, empty / empty, 2 rows / 7 keys).
    "ragged-varlen-packed": call(ext=32, pre=bytes([26, 0x80, 0, 0, 0x45, 0x92, 0x40, 0x00,
                                                    0xC1, 0x47, 0, 2, 1, 0])),
    # Paged (page 7), seqused_kv, 5 key splits: 2 sequences of 224 and 104 keys.
    "ragged-paged-used-splits": call(ext=32 | 64, pre=bytes([5, 3, 0x55, 0x88, 0, 3, 0x94, 2,
                                                             0x85, 1, 6, 1])
                                     + bytes(range(0, 94, 2)) + b"\0\0\0\0"),
    # The same with a used page of -1: FATTN_ERR_INDEX_TABLE.
    "ragged-paged-bad-page": call(ext=32 | 64, pre=bytes([5, 3, 0x55, 0x58, 0, 3, 0x94, 2,
                                                          0x85, 1, 6, 1])
                                  + bytes(range(0, 94, 2)) + b"\0\0\0\1"),
    # Dense padded cache (seqused_kv), one sequence decoding against 500
    # keys in 3 splits, with a workspace of fattn_workspace_size's bytes.
    "ragged-decode-used-workspace": call(ext=16 | 32 | 64, seq_q=small(1),
                                         pre=bytes([5, 1, 0x60, 0x80, 0, 0, 0xB3, 3, 0, 0, 0, 0]),
                                         extras=b"\x03"),
    # A decode shape split 7 ways through the context parameter alone.
    "splits-decode-gqa": call(ext=64, heads_kv=small(2), gqa=4, seq_q=small(2), seq_kv=upto256(200),
                              pre=bytes([5, 5]), tiles=(b"\0\0", bytes([1, 15]))),
    # fattn_combine of 3 parts of [1, 2, 2, 8] in regions 0 and 1 into 2 and 3.
    "combine-parts": call(ext=128, tail=bytes([0, 0x4a, 7, 0, 0, 0, 1, 0, 0, 2, 0, 0, 3, 0, 0, 0])),
}


def main():
    out_dir = os.path.join(HERE, "corpus")
    os.makedirs(out_dir, exist_ok=True)
    for name, data in SEEDS.items():
        with open(os.path.join(out_dir, name), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    main()

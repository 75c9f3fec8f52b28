// Variable-length sequences and paged K/V caches on the device: the rules of
// src/seam/backend.h (fattn_ragged) for a kernel that works on sequence b.
// A bad table entry is never followed: its FATTN_FAULT_* bit goes into the
// context's fault word and what it names is treated as absent.
#ifndef FATTN_RAGGED_CUH
#define FATTN_RAGGED_CUH

#include <stdint.h>

#include "device_util.cuh"
#include "params.h"

namespace {

// Fault bits, as src/seam/backend.h numbers them (the kernels do not include it).
constexpr unsigned kFaultCuQ = 1u, kFaultCuKv = 2u, kFaultUsed = 4u, kFaultTable = 8u;

// Sequence b: its rows of Q/O/lse (batch index and first row), its keys
// (batch index and first row when not paged) and causal offset. q_ok 0:
// the query span is bad, so no row of it may be written.
struct Seq {
    int64_t q_batch, q_row0, kv_batch, kv_row0;
    int len_q, len_kv, causal_offset;
    bool q_ok;
};

__device__ __forceinline__ void ragged_fault(const fattn_cuda_ragged &r, unsigned bit) {
    atomicOr(r.fault, bit);
}

// Resolves sequence b. A dense problem (r.on 0) is batch index b, rows from
// 0, seq_q and seq_kv long, with the problem's causal offset. Every thread
// that calls it gets the same answer; several may record the same fault.
__device__ __forceinline__ Seq ragged_seq(const fattn_cuda_args &a, int64_t b) {
    const fattn_cuda_ragged &r = a.rag;
    Seq s{b, 0, b, 0, a.seq_q, a.seq_kv, a.causal_offset, true};
    if (!r.on) return s;
    if (r.cu_q) {
        const int64_t lo = r.cu_q[b * r.cu_q_s], hi = r.cu_q[(b + 1) * r.cu_q_s];
        s.q_batch = 0, s.q_row0 = lo;
        if (lo < 0 || hi < lo || hi > r.total_q || hi - lo > a.seq_q) {
            ragged_fault(r, kFaultCuQ);
            s.q_ok = false, s.len_q = 0;
        } else {
            s.len_q = (int)(hi - lo);
        }
    }
    // How many keys the sequence holds, before seqused_kv.
    int64_t cap = a.seq_kv;
    if (r.cu_kv) {
        const int64_t lo = r.cu_kv[b * r.cu_kv_s], hi = r.cu_kv[(b + 1) * r.cu_kv_s];
        s.kv_batch = 0, s.kv_row0 = lo;
        if (lo < 0 || hi < lo || hi > r.total_kv || hi - lo > a.seq_kv) {
            ragged_fault(r, kFaultCuKv);
            cap = 0;
        } else {
            cap = hi - lo;
        }
    } else if (r.page_size) {
        const int64_t pages = (int64_t)r.pages_per_seq * r.page_size;
        cap = pages < cap ? pages : cap;
    }
    int64_t len = cap;
    if (r.used) {
        // An append's keys follow the used ones and must fit too.
        len = r.used[b * r.used_s];
        if (len < 0 || len > cap - r.added) {
            ragged_fault(r, kFaultUsed);
            len = 0;
        } else {
            len += r.added;
        }
    }
    s.len_kv = (int)len;
    s.causal_offset = r.top_left ? 0 : s.len_kv - s.len_q;
    return s;
}

// A split's pages in shared memory, for the decode kernels' copies: entry
// p - p0 holds page p's first element in K (k) and in V (v), the head's
// offset included, so a key's rows cost one shared load each instead of a
// table read, a clamp and two 64-bit products per tile (ncu put that at 8%
// more instructions than the contiguous cache in a latency-bound loop).
// Splits over more than kPageCap pages read the table (page_in_range).
constexpr int kPageCap = 256;
struct PageWindow {
    int64_t *k, *v;
    int p0;
    bool on;   // the split's pages are staged
};

// Whether every page that keys [k0, k1) of sequence b lie in is in range,
// checked by the whole block (every thread must call it, as __syncthreads);
// a bad page is recorded. Dense and contiguous problems are always fine.
// With w, the pages are staged into it (w->k, w->v: kPageCap entries each)
// as they are vetted, when they fit; w->on says whether they did, and the
// barrier inside makes the entries visible to the block.
__device__ __forceinline__ bool ragged_pages_stage(const fattn_cuda_args &a, int64_t b, int k0,
                                                   int k1, int64_t k_head, int64_t v_head,
                                                   PageWindow *w) {
    const fattn_cuda_ragged &r = a.rag;
    if (w) w->on = false;
    if (!r.on || !r.page_size || k1 <= k0) return true;
    const int p0 = k0 / r.page_size, p1 = (k1 - 1) / r.page_size;
    const bool stage = w && p1 - p0 < kPageCap;
    if (w) w->p0 = p0, w->on = stage;
    int bad = 0;
    for (int p = p0 + (int)threadIdx.x; p <= p1; p += (int)blockDim.x) {
        const int64_t pg = r.table[b * r.table_sb + (int64_t)p * r.table_ss];
        bad |= pg < 0 || pg >= r.num_pages;
        if (stage) w->k[p - p0] = pg * a.k_sb + k_head, w->v[p - p0] = pg * a.v_sb + v_head;
    }
    bad = __syncthreads_or(bad);
    if (bad && threadIdx.x == 0) ragged_fault(r, kFaultTable);
    return !bad;
}

__device__ __forceinline__ bool ragged_pages_ok(const fattn_cuda_args &a, int64_t b, int k0,
                                                int k1) {
    return ragged_pages_stage(a, b, k0, k1, 0, 0, nullptr);
}

// Entry pi of sequence b's page table, clamped into 0..num_pages-1: the
// decode kernels start their first copies before ragged_pages_ok has
// vetted the table (its verdict then discards them), and those copies must
// stay in the caller's buffers whatever the entry holds.
__device__ __forceinline__ int64_t page_in_range(const fattn_cuda_ragged &r, int64_t b,
                                                 int64_t pi) {
    const int64_t pg = __ldg(r.table + b * r.table_sb + pi * r.table_ss);
    return pg < 0 ? 0 : pg >= r.num_pages ? r.num_pages - 1 : pg;
}

// The element offsets of key kc's rows in K (ko) and V (vo) of paged
// sequence b, the head's included: from the staged window (kStaged), else
// from the table, the entry clamped into range (page_in_range).
template <bool kStaged>
__device__ __forceinline__ void paged_rows(const fattn_cuda_args &a, int64_t b, int kc,
                                           Divisor32 page, const PageWindow &w, int64_t k_head,
                                           int64_t v_head, int64_t *ko, int64_t *vo) {
    const int pi = divide32(kc, page), slot = kc - pi * a.rag.page_size;
    if constexpr (kStaged) {
        *ko = w.k[pi - w.p0] + slot * a.k_ss;
        *vo = w.v[pi - w.p0] + slot * a.v_ss;
    } else {
        const int64_t pg = page_in_range(a.rag, b, pi);
        *ko = pg * a.k_sb + k_head + slot * a.k_ss;
        *vo = pg * a.v_sb + v_head + slot * a.v_ss;
    }
}

// The element offset of key j of sequence b in K or V (strides sb, ss; the
// head's offset is the caller's): through the page table when paged, whose
// entries ragged_pages_ok has vetted.
__device__ __forceinline__ int64_t ragged_key(const fattn_cuda_args &a, const Seq &s, int64_t b,
                                              int j, int64_t sb, int64_t ss) {
    const fattn_cuda_ragged &r = a.rag;
    if (r.on && r.page_size) {
        const int64_t pg = r.table[b * r.table_sb + (int64_t)(j / r.page_size) * r.table_ss];
        return pg * sb + (int64_t)(j % r.page_size) * ss;
    }
    return s.kv_batch * sb + (s.kv_row0 + j) * ss;
}

}  // namespace

#endif  // FATTN_RAGGED_CUH

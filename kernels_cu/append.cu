// desc->append on CUDA: this step's keys and values written into the cache
// (K and V of the attention that follows on the same stream), the CUDA side
// of kernels_cl/append.cl; backends/cuda/cuda_launch.c launches it.
//
// Row t of k_new and v_new for sequence b becomes key L_b + t, L_b =
// used[b]: ragged_seq gives L_b + seq_new keys, or none for a count that
// breaks the rules (recorded), and ragged_pages_ok checks, with the whole
// block, every page the new keys lie in before any is written, so nothing
// of a bad sequence is written. Copies are of raw bits (exact in every
// dtype). Blocks stride over the sequences (grid y) and over chunks of
// kRows (head, t) rows (grid x). No allocation, no synchronisation: a CUDA
// graph can capture it.
#include <stdint.h>

#include "params.h"
#include "ragged.cuh"

namespace {

constexpr int kThreads = 128;
constexpr int kRows = 8;                 // (head, new key) rows per block and pass
constexpr unsigned kMaxRowBlocks = 64;   // grid x at most: each block checks the pages again
constexpr unsigned kMaxSeqBlocks = 65535;

// B: the storage type's bits (uint32_t for f32, uint16_t for f16 and bf16).
template <typename B>
__global__ void __launch_bounds__(kThreads)
    append_rows(const fattn_cuda_args a, const fattn_cuda_append_args n) {
    // The cache is written here, though the attention's arguments hold it
    // as const: the core checked it is writable (no const wrapper).
    B *const k = static_cast<B *>(const_cast<void *>(a.k));
    B *const v = static_cast<B *>(const_cast<void *>(a.v));
    const B *const kn = static_cast<const B *>(n.k_new);
    const B *const vn = static_cast<const B *>(n.v_new);
    const int64_t rows = n.heads_kv * n.seq_new, D = a.head_dim;
    for (int64_t b = blockIdx.y; b < a.batch; b += gridDim.y) {
        const Seq s = ragged_seq(a, b);
        const int L = s.len_kv - n.seq_new;   // negative: a bad count, recorded
        if (L < 0) continue;                  // the same for every thread of the block
        if (!ragged_pages_ok(a, b, L, s.len_kv)) continue;   // every thread: a barrier
        for (int64_t r0 = (int64_t)blockIdx.x * kRows; r0 < rows;
             r0 += (int64_t)gridDim.x * kRows) {
            const int64_t left = rows - r0, count = (left < kRows ? left : kRows) * D;
            for (int64_t i = threadIdx.x; i < count; i += kThreads) {
                const int64_t r = r0 + i / D, d = i % D;
                const int64_t h = r / n.seq_new, t = r % n.seq_new;
                const int j = L + (int)t;
                k[ragged_key(a, s, b, j, a.k_sb, a.k_ss) + h * a.k_sh + d] =
                    kn[b * n.kn_sb + h * n.kn_sh + t * n.kn_ss + d];
                v[ragged_key(a, s, b, j, a.v_sb, a.v_ss) + h * a.v_sh + d] =
                    vn[b * n.vn_sb + h * n.vn_sh + t * n.vn_ss + d];
            }
        }
    }
}

}   // namespace

extern "C" cudaError_t fattn_cuda_append(const fattn_cuda_args *a, const fattn_cuda_append_args *n,
                                         cudaStream_t stream) {
    if (a->batch <= 0 || n->heads_kv <= 0 || n->seq_new <= 0) return cudaSuccess;
    if (!a->rag.on || !a->rag.used || a->rag.added != n->seq_new || a->head_dim < 1)
        return cudaErrorInvalidValue;
    const int64_t chunks = (n->heads_kv * n->seq_new + kRows - 1) / kRows;
    const dim3 grid((unsigned)(chunks < kMaxRowBlocks ? chunks : kMaxRowBlocks),
                    (unsigned)(a->batch < kMaxSeqBlocks ? a->batch : kMaxSeqBlocks));
    if (a->dtype == FATTN_F32)
        append_rows<uint32_t><<<grid, kThreads, 0, stream>>>(*a, *n);
    else if (a->dtype == FATTN_F16 || a->dtype == FATTN_BF16)
        append_rows<uint16_t><<<grid, kThreads, 0, stream>>>(*a, *n);
    else
        return cudaErrorInvalidValue;
    return cudaGetLastError();
}

// The naive baseline's own kernels; its GEMMs are cuBLAS's. softmax_rows
// turns one row of S (float32, already scaled by scale * log2 e) into P with
// the causal mask and the lse; zero_output serves seq_kv = 0.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "params.h"
#include "device_util.cuh"
#include "ragged.cuh"

namespace {

constexpr int WG = 256;   // threads per row

__device__ __forceinline__ void put(float *p, float x) { *p = x; }
__device__ __forceinline__ void put(__half *p, float x) { *p = __float2half_rn(x); }
__device__ __forceinline__ void put(__nv_bfloat16 *p, float x) { *p = __float2bfloat16_rn(x); }

__device__ float block_reduce(float x, bool is_max, float *red) {
    for (int off = 16; off > 0; off /= 2) {
        const float y = __shfl_xor_sync(0xffffffffu, x, off);
        x = is_max ? fmaxf(x, y) : x + y;
    }
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    __syncthreads();   // red is reused between calls
    if (lane == 0) red[warp] = x;
    __syncthreads();
    x = is_max ? -INFINITY : 0.f;
    for (int w = 0; w < WG / 32; w++) x = is_max ? fmaxf(x, red[w]) : x + red[w];
    return x;
}

// Block (row i, pair bh): S and P are [pairs][seq_q][seq_kv]. Keys j index
// in 64 bits: j + WG can pass 2^31 when seq_kv is near it. The softmax
// follows the tiled kernels: fmaxf drops a NaN from the max, but its
// exp2(NaN - mx) makes sum NaN, and so P, O and the lse; mx = -inf (no
// finite score) subtracts 0, so -inf scores give 0 rather than NaN.
template <typename P>
__global__ void __launch_bounds__(WG)
    softmax_rows(const float *S, P *out, fattn_cuda_args a, Pairs pairs) {
    __shared__ float red[WG / 32];
    const int i = blockIdx.x, Sq = a.seq_q, Sk = a.seq_kv;
    const int64_t bh = block_bh(pairs), b = divide(bh, pairs.heads_q), h = bh - b * a.heads_q;
    const int64_t base = (bh * Sq + i) * Sk;
    const int64_t lim_ll = a.causal ? (int64_t)i + a.causal_offset + 1 : Sk;   // j <= i + offset
    const int64_t lim = lim_ll < 0 ? 0 : (lim_ll > Sk ? Sk : lim_ll);

    float mx = -INFINITY;
    for (int64_t j = threadIdx.x; j < lim; j += WG) mx = fmaxf(mx, S[base + j]);
    mx = block_reduce(mx, true, red);
    const float mu = mx == -INFINITY ? 0.f : mx;
    float sum = 0.f;
    for (int64_t j = threadIdx.x; j < lim; j += WG) sum += exp2f(S[base + j] - mu);
    sum = block_reduce(sum, false, red);
    const float inv = sum == 0.f ? 0.f : 1.f / sum;
    for (int64_t j = threadIdx.x; j < Sk; j += WG)
        put(out + base + j, j < lim ? exp2f(S[base + j] - mu) * inv : 0.f);
    if (a.lse && threadIdx.x == 0)
        a.lse[b * a.l_sb + h * a.l_sh + (int64_t)i * a.l_ss] =
            sum == 0.f ? -INFINITY : (mx + log2f(sum)) * kLn2;
}

// grid (seq_q, pairs): one row of O per block, row i of sequence b (of a
// ragged problem: its own rows only, none for a bad query span; its tables
// are vetted as the tiled kernels do, so a bad one is reported the same).
template <typename T> __global__ void zero_rows(fattn_cuda_args a, Pairs pairs) {
    const int64_t bh = block_bh(pairs), b = divide(bh, pairs.heads_q), h = bh - b * a.heads_q;
    const Seq s = ragged_seq(a, b);   // dense: batch b, rows 0 .. seq_q-1
    const int64_t i = blockIdx.x;
    if (i >= s.len_q) return;
    const int64_t qb = s.q_batch, row = s.q_row0 + i;
    T *o = static_cast<T *>(a.o) + qb * a.o_sb + h * a.o_sh + row * a.o_ss;
    for (int d = threadIdx.x; d < a.head_dim_v; d += blockDim.x) put(o + d, 0.f);
    // No key: the lse is the sink's logit alone (-inf without sinks).
    const float lse = a.var.on && a.var.sinks ? a.var.sinks[h * a.var.sinks_sh] : -INFINITY;
    if (a.lse && threadIdx.x == 0) a.lse[qb * a.l_sb + h * a.l_sh + row * a.l_ss] = lse;
}

template <typename P>
cudaError_t softmax(const float *s, void *p, const fattn_cuda_args *a, cudaStream_t stream) {
    return launch_pairs(*a, (unsigned)a->seq_q, [&](const Pairs &pairs, dim3 grid) {
        softmax_rows<P><<<grid, WG, 0, stream>>>(s, static_cast<P *>(p), *a, pairs);
    });
}

template <typename T> cudaError_t zero(const fattn_cuda_args *a, cudaStream_t stream) {
    const int threads = a->head_dim_v < 128 ? 64 : 128;
    return launch_pairs(*a, (unsigned)a->seq_q, [&](const Pairs &pairs, dim3 grid) {
        zero_rows<T><<<grid, threads, 0, stream>>>(*a, pairs);
    });
}

}   // namespace

extern "C" cudaError_t fattn_cuda_naive_softmax(const float *s, void *p, fattn_dtype p_dtype,
                                                const fattn_cuda_args *a, cudaStream_t stream) {
    if (a->seq_q <= 0 || a->heads_q <= 0 || a->batch <= 0) return cudaSuccess;
    if (a->causal && (a->causal_offset < -a->seq_q || a->causal_offset > a->seq_kv - 1))
        return cudaErrorInvalidValue;   // params.h's range, the same contract as the tiled kernels'
    if (p_dtype == FATTN_F32) return softmax<float>(s, p, a, stream);
    if (p_dtype == FATTN_F16) return softmax<__half>(s, p, a, stream);
    if (p_dtype == FATTN_BF16) return softmax<__nv_bfloat16>(s, p, a, stream);
    return cudaErrorInvalidValue;
}

extern "C" cudaError_t fattn_cuda_zero_output(const fattn_cuda_args *a, cudaStream_t stream) {
    if (a->seq_q <= 0 || a->heads_q <= 0 || a->batch <= 0) return cudaSuccess;
    if (a->dtype == FATTN_F32) return zero<float>(a, stream);
    if (a->dtype == FATTN_F16) return zero<__half>(a, stream);
    if (a->dtype == FATTN_BF16) return zero<__nv_bfloat16>(a, stream);
    return cudaErrorInvalidValue;
}

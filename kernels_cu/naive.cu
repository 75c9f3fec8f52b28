// The naive baseline's own kernels; its GEMMs are cuBLAS's. softmax_rows
// turns one row of S (float32, already scaled by scale * log2 e) into P with
// the causal mask and the lse; zero_output serves seq_kv = 0.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "cuda_kernels.h"

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

// Block (row i, pair bh0 + blockIdx.y). S and P hold pairs bh0.. only.
template <typename P>
__global__ void __launch_bounds__(WG) softmax_rows(const float *S, P *out, fattn_cuda_args a, long long bh0) {
    __shared__ float red[WG / 32];
    const int i = blockIdx.x, Sq = a.seq_q, Sk = a.seq_kv;
    const long long bh = bh0 + blockIdx.y;
    const long long base = ((long long)blockIdx.y * Sq + i) * Sk;
    const long long lim_ll = a.causal ? (long long)i + Sk - Sq + 1 : Sk;
    const int lim = lim_ll < 0 ? 0 : (lim_ll > Sk ? Sk : (int)lim_ll);

    float mx = -INFINITY;
    for (int j = threadIdx.x; j < lim; j += WG) mx = fmaxf(mx, S[base + j]);
    mx = block_reduce(mx, true, red);
    float sum = 0.f;
    for (int j = threadIdx.x; j < lim; j += WG) sum += exp2f(S[base + j] - mx);
    sum = block_reduce(sum, false, red);
    const float inv = sum > 0.f ? 1.f / sum : 0.f;
    for (int j = threadIdx.x; j < Sk; j += WG) put(out + base + j, j < lim ? exp2f(S[base + j] - mx) * inv : 0.f);
    if (a.lse && threadIdx.x == 0) {
        const long long b = bh / a.heads_q, h = bh % a.heads_q;
        a.lse[b * a.l_sb + h * a.l_sh + (long long)i * a.l_ss] = sum > 0.f ? (mx + log2f(sum)) * 0.69314718055994531f : -INFINITY;
    }
}

// grid (seq_q, heads_q, batch): one row of O per block.
template <typename T>
__global__ void zero_rows(fattn_cuda_args a) {
    const long long b = blockIdx.z, h = blockIdx.y, i = blockIdx.x;
    T *o = static_cast<T *>(a.o) + b * a.o_sb + h * a.o_sh + i * a.o_ss;
    for (int d = threadIdx.x; d < a.head_dim; d += blockDim.x) put(o + d, 0.f);
    if (a.lse && threadIdx.x == 0) a.lse[b * a.l_sb + h * a.l_sh + i * a.l_ss] = -INFINITY;
}

}  // namespace

extern "C" cudaError_t fattn_cuda_naive_softmax(const float *s, void *p, int p_dtype, const fattn_cuda_args *a,
                                                int64_t bh0, int64_t pairs, cudaStream_t stream) {
    if (pairs > 65535) return cudaErrorInvalidValue;   // grid.y; the host passes chunks
    const dim3 grid((unsigned)a->seq_q, (unsigned)pairs);
    if (p_dtype == 0) softmax_rows<float><<<grid, WG, 0, stream>>>(s, static_cast<float *>(p), *a, bh0);
    else if (p_dtype == 1) softmax_rows<__half><<<grid, WG, 0, stream>>>(s, static_cast<__half *>(p), *a, bh0);
    else if (p_dtype == 2) softmax_rows<__nv_bfloat16><<<grid, WG, 0, stream>>>(s, static_cast<__nv_bfloat16 *>(p), *a, bh0);
    else return cudaErrorInvalidValue;
    return cudaGetLastError();
}

extern "C" cudaError_t fattn_cuda_zero_output(const fattn_cuda_args *a, cudaStream_t stream) {
    const dim3 grid((unsigned)a->seq_q, (unsigned)a->heads_q, (unsigned)a->batch);
    const int threads = a->head_dim < 128 ? 64 : 128;
    if (a->dtype == 0) zero_rows<float><<<grid, threads, 0, stream>>>(*a);
    else if (a->dtype == 1) zero_rows<__half><<<grid, threads, 0, stream>>>(*a);
    else if (a->dtype == 2) zero_rows<__nv_bfloat16><<<grid, threads, 0, stream>>>(*a);
    else return cudaErrorInvalidValue;
    return cudaGetLastError();
}

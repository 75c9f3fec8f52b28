// fattn_combine's kernel: the log-sum-exp merge of `parts` partial results,
// one block per output row (b, h, i), float32 arithmetic, the semantics of
// backends/cpu/cpu_combine.c. Per row the block finds m, the largest part
// lse (fmaxf drops NaN, as the CPU's `x > m` does), shifts by it (by 0 when
// m = -inf), then walks the parts in order in chunks of WG: each thread
// computes one part's weight exp(lse_p - shift) into shared memory (-1 marks
// a part with lse_p = -inf: it saw no key and its O is not read), and every
// thread adds the chunk's weighted O rows to its head-dim elements, in part
// order (loading kUnroll parts' rows at once), and the weights to l (so l is
// summed in the CPU's order). A NaN or +inf lse gives a NaN weight (NaN is
// not < 0, so it is not skipped) and makes the row NaN. O = acc * (l == 0 ? 0 : 1 / l), lse = l == 0 ? -inf :
// m + log(l). Rows, parts, offsets and strides are 64-bit; the grid is
// capped and strides over the rows, so any row count runs. With cu_q (the
// decode path's packed query rows) a row's output place comes from the
// table, and rows outside every sequence are left alone. The decode's merge
// may add a sink per head (sinks): it joins m and l once, with no O row.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "params.h"
#include "device_util.cuh"

namespace {

constexpr int WG = 64;                                // threads per row: a multiple of 32
constexpr int NACC = FATTN_CUDA_COMBINE_MAX_D / WG;   // head-dim elements per thread
constexpr int64_t kMaxBlocks = int64_t(1) << 20;      // blocks stride over rows beyond this
constexpr int kUnroll = 8;                            // parts whose O loads are in flight together
static_assert(WG % 32 == 0 && FATTN_CUDA_COMBINE_MAX_D % WG == 0, "WG must tile the head dim");

__device__ __forceinline__ float get(const float *p) { return *p; }
__device__ __forceinline__ float get(const __half *p) { return __half2float(*p); }
__device__ __forceinline__ float get(const __nv_bfloat16 *p) { return __bfloat162float(*p); }
__device__ __forceinline__ void put(float *p, float x) { *p = x; }
__device__ __forceinline__ void put(__half *p, float x) { *p = __float2half_rn(x); }
__device__ __forceinline__ void put(__nv_bfloat16 *p, float x) { *p = __float2bfloat16_rn(x); }

// P: the parts' storage type, T: the output's.
template <typename P, typename T>
__global__ void __launch_bounds__(WG)
    combine_rows(fattn_cuda_combine_args a, Divisor by_seq, Divisor by_heads) {
    __shared__ float red[WG / 32];
    __shared__ float wts[WG];
    const int tid = threadIdx.x;
#if __CUDA_ARCH__ >= 900
    // Launched early (after_grid): the parts are complete and visible only
    // once the kernel before us has finished. A no-op otherwise.
    asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
    const int64_t rows = a.batch * a.heads * a.seq;   // validated: no overflow
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const int64_t bh = divide(r, by_seq), i = r - bh * a.seq;
        const int64_t b = divide(bh, by_heads), h = bh - b * a.heads;
        // Where the row goes: (b, h, i), or with packed rows (cu_q) row
        // cu_q[b] + i at batch index 0. Rows past the sequence, or of a bad
        // span (kernels_cu/ragged.cuh's rule for cu_seqlens_q), have no part
        // and no place: skipped by the whole block, before any barrier.
        int64_t ob = b, oi = i;
        if (a.cu_q) {
            const int64_t lo = a.cu_q[b * a.cu_q_s], hi = a.cu_q[(b + 1) * a.cu_q_s];
            if (lo < 0 || hi < lo || hi > a.total_q || hi - lo > a.seq || i >= hi - lo) continue;
            ob = 0, oi = lo + i;
        }
        const float *pl = a.part_lse + b * a.pl_sb + h * a.pl_sh + i * a.pl_ss;
        const P *po = static_cast<const P *>(a.part_o) + b * a.po_sb + h * a.po_sh + i * a.po_ss;

        float m = -INFINITY;
        for (int64_t p = tid; p < a.parts; p += WG) m = fmaxf(m, pl[p * a.pl_ps]);
        for (int off = 16; off > 0; off /= 2) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, off));
        if (tid % 32 == 0) red[tid / 32] = m;
        __syncthreads();
        m = red[0];
#pragma unroll
        for (int w = 1; w < WG / 32; w++) m = fmaxf(m, red[w]);
        // The decode's merge: the sink joins the max and, below, the sum.
        const float sink = a.sinks ? a.sinks[h * a.sinks_sh] : -INFINITY;
        m = fmaxf(m, sink);
        const float shift = m == -INFINITY ? 0.f : m;

        float l = 0.f, acc[NACC];
#pragma unroll
        for (int k = 0; k < NACC; k++) acc[k] = 0.f;
        for (int64_t c = 0; c < a.parts; c += WG) {
            __syncthreads();   // the previous chunk's weights are read
            if (c + tid < a.parts) {
                const float x = pl[(c + tid) * a.pl_ps];
                wts[tid] = x == -INFINITY ? -1.f : expf(x - shift);
            }
            __syncthreads();
            const int n = a.parts - c < WG ? (int)(a.parts - c) : WG;
            int j = 0;
            // kUnroll parts at a time: their loads are issued together (a
            // part with lse -inf loads nothing), then added in part order.
            // One at a time, each load waited for the last: 66 parts of a
            // batch-1 decode took 16.5 us on the H200. `!(w < 0)`, not
            // `w >= 0`: a NaN weight is added, as in the loop below.
            for (; j + kUnroll <= n; j += kUnroll) {
                float w[kUnroll];
#pragma unroll
                for (int u = 0; u < kUnroll; u++) w[u] = wts[j + u];
                const P *src = po + (c + j) * a.po_ps;
#pragma unroll
                for (int k = 0; k < NACC; k++) {
                    const int d = tid + k * WG;
                    if (d >= a.head_dim) continue;
                    float x[kUnroll];
#pragma unroll
                    for (int u = 0; u < kUnroll; u++)
                        x[u] = w[u] < 0.f ? 0.f : get(src + u * a.po_ps + d);
#pragma unroll
                    for (int u = 0; u < kUnroll; u++)
                        if (!(w[u] < 0.f)) acc[k] += w[u] * x[u];
                }
#pragma unroll
                for (int u = 0; u < kUnroll; u++)
                    if (!(w[u] < 0.f)) l += w[u];
            }
            for (; j < n; j++) {
                const float w = wts[j];
                if (w < 0.f) continue;   // lse -inf: no key; O is not read
                l += w;
                const P *src = po + (c + j) * a.po_ps;
#pragma unroll
                for (int k = 0; k < NACC; k++) {
                    const int d = tid + k * WG;
                    if (d < a.head_dim) acc[k] += w * get(src + d);
                }
            }
        }

        if (a.sinks) l += expf(sink - shift);   // NaN sink: l NaN, the row NaN
        const float inv = l == 0.f ? 0.f : 1.f / l;
        T *dst = static_cast<T *>(a.o) + ob * a.o_sb + h * a.o_sh + oi * a.o_ss;
#pragma unroll
        for (int k = 0; k < NACC; k++) {
            const int d = tid + k * WG;
            if (d < a.head_dim) put(dst + d, acc[k] * inv);
        }
        if (a.lse && tid == 0)
            a.lse[ob * a.l_sb + h * a.l_sh + oi * a.l_ss] = l == 0.f ? -INFINITY : m + logf(l);
        __syncthreads();   // red and wts are read before the next row writes them
    }
}

template <typename P, typename T>
cudaError_t launch(const fattn_cuda_combine_args *a, cudaStream_t stream) {
    const int64_t rows = a->batch * a->heads * a->seq;
    const unsigned blocks = (unsigned)(rows < kMaxBlocks ? rows : kMaxBlocks);
    const Divisor by_seq = make_divisor((uint64_t)a->seq), by_heads = make_divisor((uint64_t)a->heads);
    if (!a->after_grid) {
        combine_rows<P, T><<<blocks, WG, 0, stream>>>(*a, by_seq, by_heads);
        return cudaGetLastError();
    }
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(blocks);
    cfg.blockDim = dim3(WG);
    cfg.stream = stream;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    const cudaError_t err = cudaLaunchKernelEx(&cfg, combine_rows<P, T>, *a, by_seq, by_heads);
    return err != cudaSuccess ? err : cudaGetLastError();
}

template <typename P> cudaError_t by_out(const fattn_cuda_combine_args *a, cudaStream_t stream) {
    if (a->dtype == FATTN_F32) return launch<P, float>(a, stream);
    if (a->dtype == FATTN_F16) return launch<P, __half>(a, stream);
    if (a->dtype == FATTN_BF16) return launch<P, __nv_bfloat16>(a, stream);
    return cudaErrorInvalidValue;
}

}   // namespace

extern "C" cudaError_t fattn_cuda_combine(const fattn_cuda_combine_args *a, cudaStream_t stream) {
    if (a->batch <= 0 || a->heads <= 0 || a->seq <= 0) return cudaSuccess;
    if (a->parts < 1 || a->head_dim < 1 || a->head_dim > FATTN_CUDA_COMBINE_MAX_D)
        return cudaErrorInvalidValue;
    if (a->part_dtype == FATTN_F32) return by_out<float>(a, stream);
    if (a->part_dtype == FATTN_F16) return by_out<__half>(a, stream);
    if (a->part_dtype == FATTN_BF16) return by_out<__nv_bfloat16>(a, stream);
    return cudaErrorInvalidValue;
}

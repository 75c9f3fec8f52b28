// Tiled FlashAttention forward on the CUDA cores (FFMA), every dtype, float32
// arithmetic: the f32 path, and the f16/bf16 path below compute capability
// 8.0. The same register-blocked design as kernels_cl/flash_fwd.cl: a block
// owns BQ query rows of one (batch, head) and streams BKV-key tiles of K and
// V through shared memory (online softmax); its TQ x TK threads each compute
// RPT rows x KPT keys of S from float4 reads along d, then RPT rows x CPT
// float4 chunks of O. Rows, keys and chunks are owned strided (ty + i*TQ,
// tx + k*TK) so neighbouring threads read neighbouring shared words.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "cuda_kernels.h"

#ifndef FATTN_CUDA_SIMT_HALF   // f16/bf16 instances, needed only below compute capability 8.0
#define FATTN_CUDA_SIMT_HALF 1
#endif

namespace {

__device__ __forceinline__ float to_f(float x) { return x; }
__device__ __forceinline__ void from_f(float *p, float x) { *p = x; }
#if FATTN_CUDA_SIMT_HALF
__device__ __forceinline__ float to_f(__half x) { return __half2float(x); }
__device__ __forceinline__ float to_f(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __forceinline__ void from_f(__half *p, float x) { *p = __float2half_rn(x); }
__device__ __forceinline__ void from_f(__nv_bfloat16 *p, float x) { *p = __float2bfloat16_rn(x); }
#endif

// Elements d .. d+3 of a row, zero past the head dim D.
template <typename T>
__device__ __forceinline__ float4 load4(const T *row, int d, int D) {
    float4 x = make_float4(0.f, 0.f, 0.f, 0.f);
    if (d < D) x.x = to_f(row[d]);
    if (d + 1 < D) x.y = to_f(row[d + 1]);
    if (d + 2 < D) x.z = to_f(row[d + 2]);
    if (d + 3 < D) x.w = to_f(row[d + 3]);
    return x;
}

__device__ __forceinline__ int key_limit(int i, int Sq, int Sk, int causal) {
    if (!causal) return Sk;
    const long long lim = (long long)i + Sk - Sq + 1;
    return lim < 0 ? 0 : (lim > Sk ? Sk : (int)lim);
}

template <int DPAD, int BQ, int BKV, int TQ, int TK>
struct Tiles {
    static constexpr int NT = TQ * TK, RPT = BQ / TQ, KPT = BKV / TK, D4 = DPAD / 4, CPT = D4 / TK;
    static constexpr int QPAD = TK < 8 ? 1 : 0, KPAD = 1, PPAD = 4;   // in float4s / floats: banks
    static constexpr int SMEM = 16 * (BQ * (D4 + QPAD) + BKV * (D4 + KPAD)) + 4 * (BQ * (BKV + PPAD) + BQ * TK);
    static_assert(BQ % TQ == 0 && BKV % TK == 0 && BKV % 4 == 0 && D4 % TK == 0, "tile shape");
};

template <typename T, int DPAD, int BQ, int BKV, int TQ, int TK>
__global__ void __launch_bounds__(TQ * TK) flash_simt(fattn_cuda_args a) {
    using C = Tiles<DPAD, BQ, BKV, TQ, TK>;
    constexpr int RPT = C::RPT, KPT = C::KPT, D4 = C::D4, CPT = C::CPT, NT = C::NT;
    extern __shared__ float4 smem[];
    float4(*Qs)[D4 + C::QPAD] = reinterpret_cast<float4(*)[D4 + C::QPAD]>(smem);
    // K for the scores, then V: the scores are finished (a barrier) before V lands.
    float4(*KVs)[D4 + C::KPAD] = reinterpret_cast<float4(*)[D4 + C::KPAD]>(smem + BQ * (D4 + C::QPAD));
    float(*Ps)[BKV + C::PPAD] = reinterpret_cast<float(*)[BKV + C::PPAD]>(smem + BQ * (D4 + C::QPAD) + BKV * (D4 + C::KPAD));
    float(*red)[TK] = reinterpret_cast<float(*)[TK]>(&Ps[BQ][0]);

    const int tid = threadIdx.x, ty = tid / TK, tx = tid % TK;
    const int q0 = blockIdx.x * BQ, h = blockIdx.y, b = blockIdx.z, hk = h / a.group;
    const int D = a.head_dim, Sq = a.seq_q, Sk = a.seq_kv;
    const T *q = static_cast<const T *>(a.q) + b * a.q_sb + h * a.q_sh;
    const T *k = static_cast<const T *>(a.k) + b * a.k_sb + hk * a.k_sh;
    const T *v = static_cast<const T *>(a.v) + b * a.v_sb + hk * a.v_sh;

    // Q scaled by scale * log2(e): the softmax runs on exp2.
    for (int idx = tid; idx < BQ * D4; idx += NT) {
        const int r = idx / D4, c = idx % D4, row = q0 + r;
        float4 x = row < Sq ? load4(q + row * a.q_ss, 4 * c, D) : make_float4(0.f, 0.f, 0.f, 0.f);
        Qs[r][c] = make_float4(x.x * a.scale_log2, x.y * a.scale_log2, x.z * a.scale_log2, x.w * a.scale_log2);
    }

    int lim[RPT];
    float m_i[RPT], l_i[RPT];   // l_i: this thread's keys only; summed over the row at the end
    float4 acc[RPT][CPT];
#pragma unroll
    for (int i = 0; i < RPT; i++) {
        const int row = q0 + ty + i * TQ;
        lim[i] = row < Sq ? key_limit(row, Sq, Sk, a.causal) : 0;
        m_i[i] = -INFINITY;
        l_i[i] = 0.f;
#pragma unroll
        for (int c = 0; c < CPT; c++) acc[i][c] = make_float4(0.f, 0.f, 0.f, 0.f);
    }
    // Tiles past what the block's last row sees are skipped, not masked.
    const int kv_end = key_limit(min(q0 + BQ, Sq) - 1, Sq, Sk, a.causal);

    for (int j0 = 0; j0 < kv_end; j0 += BKV) {
        __syncthreads();   // the previous tile's readers of V and P are done
        for (int idx = tid; idx < BKV * D4; idx += NT) {
            const int j = idx / D4, c = idx % D4, key = j0 + j;
            KVs[j][c] = key < Sk ? load4(k + key * a.k_ss, 4 * c, D) : make_float4(0.f, 0.f, 0.f, 0.f);
        }
        __syncthreads();

        float s[RPT][KPT];
#pragma unroll
        for (int i = 0; i < RPT; i++)
#pragma unroll
            for (int kk = 0; kk < KPT; kk++) s[i][kk] = 0.f;
#pragma unroll 4
        for (int c = 0; c < D4; c++) {
            float4 qv[RPT], kv[KPT];
#pragma unroll
            for (int i = 0; i < RPT; i++) qv[i] = Qs[ty + i * TQ][c];
#pragma unroll
            for (int kk = 0; kk < KPT; kk++) kv[kk] = KVs[tx + kk * TK][c];
#pragma unroll
            for (int i = 0; i < RPT; i++)
#pragma unroll
                for (int kk = 0; kk < KPT; kk++) {
                    float x = s[i][kk];
                    x = fmaf(qv[i].x, kv[kk].x, x);
                    x = fmaf(qv[i].y, kv[kk].y, x);
                    x = fmaf(qv[i].z, kv[kk].z, x);
                    x = fmaf(qv[i].w, kv[kk].w, x);
                    s[i][kk] = x;
                }
        }

#pragma unroll
        for (int i = 0; i < RPT; i++) {
            float mx = -INFINITY;
#pragma unroll
            for (int kk = 0; kk < KPT; kk++) {
                if (j0 + tx + kk * TK >= lim[i]) s[i][kk] = -INFINITY;
                mx = fmaxf(mx, s[i][kk]);
            }
            red[ty + i * TQ][tx] = mx;
        }
        __syncthreads();   // also: every thread is done reading K

        for (int idx = tid; idx < BKV * D4; idx += NT) {
            const int j = idx / D4, c = idx % D4, key = j0 + j;
            KVs[j][c] = key < Sk ? load4(v + key * a.v_ss, 4 * c, D) : make_float4(0.f, 0.f, 0.f, 0.f);
        }
#pragma unroll
        for (int i = 0; i < RPT; i++) {
            const int r = ty + i * TQ;
            float mx = -INFINITY;
#pragma unroll
            for (int t = 0; t < TK; t++) mx = fmaxf(mx, red[r][t]);
            const float m_new = fmaxf(m_i[i], mx);
            // A row that has seen no key yet keeps m = -inf: nothing to rescale.
            const float alpha = m_new == -INFINITY ? 1.f : exp2f(m_i[i] - m_new);
            float psum = 0.f;
#pragma unroll
            for (int kk = 0; kk < KPT; kk++) {
                const float p = s[i][kk] == -INFINITY ? 0.f : exp2f(s[i][kk] - m_new);
                Ps[r][tx + kk * TK] = p;
                psum += p;
            }
            l_i[i] = l_i[i] * alpha + psum;
            m_i[i] = m_new;
#pragma unroll
            for (int c = 0; c < CPT; c++) {
                acc[i][c].x *= alpha, acc[i][c].y *= alpha, acc[i][c].z *= alpha, acc[i][c].w *= alpha;
            }
        }
        __syncthreads();

#pragma unroll 2
        for (int j4 = 0; j4 < BKV / 4; j4++) {
            float4 pv[RPT];
#pragma unroll
            for (int i = 0; i < RPT; i++) pv[i] = *reinterpret_cast<const float4 *>(&Ps[ty + i * TQ][4 * j4]);
#pragma unroll
            for (int c = 0; c < CPT; c++) {
                const float4 v0 = KVs[4 * j4 + 0][tx + c * TK], v1 = KVs[4 * j4 + 1][tx + c * TK];
                const float4 v2 = KVs[4 * j4 + 2][tx + c * TK], v3 = KVs[4 * j4 + 3][tx + c * TK];
#pragma unroll
                for (int i = 0; i < RPT; i++) {
                    float4 o = acc[i][c];
                    o.x = fmaf(pv[i].x, v0.x, o.x), o.y = fmaf(pv[i].x, v0.y, o.y);
                    o.z = fmaf(pv[i].x, v0.z, o.z), o.w = fmaf(pv[i].x, v0.w, o.w);
                    o.x = fmaf(pv[i].y, v1.x, o.x), o.y = fmaf(pv[i].y, v1.y, o.y);
                    o.z = fmaf(pv[i].y, v1.z, o.z), o.w = fmaf(pv[i].y, v1.w, o.w);
                    o.x = fmaf(pv[i].z, v2.x, o.x), o.y = fmaf(pv[i].z, v2.y, o.y);
                    o.z = fmaf(pv[i].z, v2.z, o.z), o.w = fmaf(pv[i].z, v2.w, o.w);
                    o.x = fmaf(pv[i].w, v3.x, o.x), o.y = fmaf(pv[i].w, v3.y, o.y);
                    o.z = fmaf(pv[i].w, v3.z, o.z), o.w = fmaf(pv[i].w, v3.w, o.w);
                    acc[i][c] = o;
                }
            }
        }
    }

    // The loop's last barrier passed every reader of red, so it is free.
#pragma unroll
    for (int i = 0; i < RPT; i++) red[ty + i * TQ][tx] = l_i[i];
    __syncthreads();

#pragma unroll
    for (int i = 0; i < RPT; i++) {
        const int r = ty + i * TQ, row = q0 + r;
        if (row >= Sq) continue;
        float l = 0.f;
#pragma unroll
        for (int t = 0; t < TK; t++) l += red[r][t];
        const float inv = l > 0.f ? 1.f / l : 0.f;
        T *o = static_cast<T *>(a.o) + b * a.o_sb + h * a.o_sh + row * a.o_ss;
#pragma unroll
        for (int c = 0; c < CPT; c++) {
            const int d = 4 * (tx + c * TK);
            const float4 x = acc[i][c];
            if (d < D) from_f(o + d, x.x * inv);
            if (d + 1 < D) from_f(o + d + 1, x.y * inv);
            if (d + 2 < D) from_f(o + d + 2, x.z * inv);
            if (d + 3 < D) from_f(o + d + 3, x.w * inv);
        }
        if (a.lse && tx == 0)
            a.lse[b * a.l_sb + h * a.l_sh + row * a.l_ss] = l > 0.f ? (m_i[i] + log2f(l)) * 0.69314718055994531f : -INFINITY;
    }
}

// Tile shapes per head-dim bucket. 64 and 128 from bench/tune_cuda_simt.sh
// on the H200 (bench/results/tune/): with shared memory not capped at 48 KiB
// as in OpenCL, larger query tiles win (d64 128x64 over 64x48: +7%; d128
// 64x32 on an 8x16 grid over 40x32: +17-32%).
template <int BQ_, int BKV_, int TQ_, int TK_>
struct ShapeOf {
    static constexpr int BQ = BQ_, BKV = BKV_, TQ = TQ_, TK = TK_;
};
template <int DPAD> struct Shape;
template <> struct Shape<32> : ShapeOf<64, 64, 16, 8> {};
template <> struct Shape<256> : ShapeOf<16, 16, 8, 8> {};
// FATTN_SIMT_{BQ,BKV,TQ,TK}_<DPAD> (compile definitions) override the 64 and
// 128 rows, for tile sweeps (bench/tune_cuda_simt.sh).
#ifdef FATTN_SIMT_BQ_64
template <> struct Shape<64> : ShapeOf<FATTN_SIMT_BQ_64, FATTN_SIMT_BKV_64, FATTN_SIMT_TQ_64, FATTN_SIMT_TK_64> {};
#else
template <> struct Shape<64> : ShapeOf<128, 64, 16, 8> {};   // H200 f32 seq 8192: 30.2 TFLOP/s
#endif
#ifdef FATTN_SIMT_BQ_128
template <> struct Shape<128> : ShapeOf<FATTN_SIMT_BQ_128, FATTN_SIMT_BKV_128, FATTN_SIMT_TQ_128, FATTN_SIMT_TK_128> {};
#else
template <> struct Shape<128> : ShapeOf<64, 32, 8, 16> {};   // H200 f32 seq 8192: 28.2 TFLOP/s
#endif

template <typename T, int DPAD>
cudaError_t launch(const fattn_cuda_args *a, cudaStream_t stream) {
    using S = Shape<DPAD>;
    using C = Tiles<DPAD, S::BQ, S::BKV, S::TQ, S::TK>;
    auto kernel = flash_simt<T, DPAD, S::BQ, S::BKV, S::TQ, S::TK>;
    cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, C::SMEM);
    if (err != cudaSuccess) return err;
    const dim3 grid((unsigned)((a->seq_q + S::BQ - 1) / S::BQ), (unsigned)a->heads_q, (unsigned)a->batch);
    kernel<<<grid, C::NT, C::SMEM, stream>>>(*a);
    return cudaGetLastError();
}

template <int DPAD>
void tiles(int *bm, int *bn, int *smem) {
    using S = Shape<DPAD>;
    *bm = S::BQ;
    *bn = S::BKV;
    *smem = Tiles<DPAD, S::BQ, S::BKV, S::TQ, S::TK>::SMEM;
}

template <int DPAD>
cudaError_t by_dtype(const fattn_cuda_args *a, cudaStream_t stream) {
    if (a->dtype == 0) return launch<float, DPAD>(a, stream);
#if FATTN_CUDA_SIMT_HALF
    if (a->dtype == 1) return launch<__half, DPAD>(a, stream);
    if (a->dtype == 2) return launch<__nv_bfloat16, DPAD>(a, stream);
#endif
    return cudaErrorInvalidValue;
}

}  // namespace

extern "C" int fattn_cuda_dpad_built(int dpad) {
    switch (dpad) {
    case 32: return FATTN_CUDA_DPAD_32;
    case 64: return FATTN_CUDA_DPAD_64;
    case 128: return FATTN_CUDA_DPAD_128;
    case 256: return FATTN_CUDA_DPAD_256;
    default: return 0;
    }
}

extern "C" int fattn_cuda_simt_half_built(void) { return FATTN_CUDA_SIMT_HALF; }

extern "C" cudaError_t fattn_cuda_flash_simt(const fattn_cuda_args *a, int dpad, cudaStream_t stream) {
    switch (dpad) {
#if FATTN_CUDA_DPAD_32
    case 32: return by_dtype<32>(a, stream);
#endif
#if FATTN_CUDA_DPAD_64
    case 64: return by_dtype<64>(a, stream);
#endif
#if FATTN_CUDA_DPAD_128
    case 128: return by_dtype<128>(a, stream);
#endif
#if FATTN_CUDA_DPAD_256
    case 256: return by_dtype<256>(a, stream);
#endif
    default: return cudaErrorInvalidValue;
    }
}

extern "C" void fattn_cuda_flash_simt_tiles(int dpad, int *block_m, int *block_n, int *smem_bytes) {
    *block_m = *block_n = *smem_bytes = 0;
    switch (dpad) {
    case 32: tiles<32>(block_m, block_n, smem_bytes); break;
    case 64: tiles<64>(block_m, block_n, smem_bytes); break;
    case 128: tiles<128>(block_m, block_n, smem_bytes); break;
    case 256: tiles<256>(block_m, block_n, smem_bytes); break;
    default: break;
    }
}

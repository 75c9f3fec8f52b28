// Tiled FlashAttention forward on the CUDA cores (FFMA), every dtype, float32
// arithmetic: the f32 path, and the f16/bf16 path below compute capability
// 8.0. A block owns BQ query rows of one (batch, head) and streams BKV-key
// tiles of K and V through shared memory (online softmax); its TQ x TK
// threads each compute RPT rows x KPT keys of S from float4 reads along d,
// then RPT rows x CPT float4 chunks of O. Rows, keys and chunks are owned
// strided (ty + i*TQ, tx + k*TK) so neighbouring threads read neighbouring
// shared words, and a row's TK threads are neighbouring lanes of one warp, so
// row maxima and sums are warp shuffles, not shared-memory round trips.
//
// K and V have a buffer each, so every load overlaps a product: V_j lands
// while S = Q K_j^T is computed, K_j+1 while O += P V_j is. With 16-byte
// aligned f32 rows (VEC) the tiles come by cp.async; otherwise each thread
// issues all its loads of a tile before storing any.
//
// Row and key positions below seq (< 2^31) are ints, but a tile's end (q0 +
// BQ, j0 + BKV) can pass 2^31: sums that can are taken in unsigned, where
// they stay exact below 2^32 (int64 costs registers here).
//
// Variable-length and paged problems run a second instance (kRagged), so the
// dense one compiles to the code it had.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "params.h"
#include "device_util.cuh"
#include "ragged.cuh"
#include "variants.cuh"

#ifndef FATTN_CUDA_SIMT_HALF   // f16/bf16 instances, needed only below compute capability 8.0
#define FATTN_CUDA_SIMT_HALF 1
#endif

// The tile traits: compile-time data in a named namespace, since in the
// anonymous one nvcc warns (#177) about each member that a build without
// some head-dim bucket leaves unreferenced.
namespace fattn_simt_shapes {

// The layout a shape implies: threads, each thread's rows (RPT), keys (KPT)
// and float4 chunks of O (CPT), shared-memory strides and bytes.
template <int DPAD, int BQ, int BKV, int TQ, int TK> struct Tiles {
    static constexpr int NT = TQ * TK, RPT = BQ / TQ, KPT = BKV / TK, D4 = DPAD / 4, CPT = D4 / TK;
    static constexpr int QPAD = TK < 8 ? 1 : 0, KPAD = 1, PPAD = 4;   // in float4s / floats: banks
    static constexpr int QLD = D4 + QPAD, KLD = D4 + KPAD, PLD = BKV + PPAD;
    static constexpr int SMEM = 16 * (BQ * QLD + 2 * BKV * KLD) + 4 * BQ * PLD;
    static_assert(BQ % TQ == 0 && BKV % TK == 0 && BKV % 4 == 0 && D4 % TK == 0, "tile shape");
    static_assert(TK <= 32 && 32 % TK == 0 && NT % 32 == 0, "a row's threads share a warp");
};

// Tile shapes per head-dim bucket. 64 and 128 from bench/tune_cuda_simt.sh
// on the H200 (bench/results/tune/cuda-simt-v2-*): d64 96x64 on a 16x8 grid
// (40.5 TFLOP/s f32 seq 8192, 84 KiB; 128x64 as fast but 100 KiB, more than
// compute 7.0 / 8.6 / 8.9 give a block), d128 64x48 on 8x16 (39.1, 95 KiB;
// 64x32 36.7, 64x64 at one block per SM 35.7, a 16x8 grid 35.2).
// Shape<DPAD, true>: the fallback for devices that give a block less shared
// memory than Shape<DPAD, false> needs (compute 7.5: 64 KiB); untuned.
// MINB: blocks per SM the registers are capped for (__launch_bounds__).
template <int BQ_, int BKV_, int TQ_, int TK_, int MINB_ = 1> struct ShapeOf {
    static constexpr int BQ = BQ_, BKV = BKV_, TQ = TQ_, TK = TK_, MINB = MINB_;
};
template <int DPAD, bool SMALL> struct Shape : Shape<DPAD, false> {};   // no smaller shape
template <> struct Shape<32, false> : ShapeOf<64, 64, 16, 8> {};
template <> struct Shape<256, false> : ShapeOf<16, 16, 8, 8> {};
template <> struct Shape<64, true> : ShapeOf<64, 32, 16, 8> {};
template <> struct Shape<128, true> : ShapeOf<32, 32, 8, 16> {};
// FATTN_SIMT_{BQ,BKV,TQ,TK,MINB}_<DPAD> (compile definitions; nvcc splits
// values at commas, hence five) override the 64 and 128 rows, for tile
// sweeps (bench/tune_cuda_simt.sh).
#ifdef FATTN_SIMT_BQ_64
template <>
struct Shape<64, false> : ShapeOf<FATTN_SIMT_BQ_64, FATTN_SIMT_BKV_64, FATTN_SIMT_TQ_64,
                                  FATTN_SIMT_TK_64, FATTN_SIMT_MINB_64> {};
#else
template <> struct Shape<64, false> : ShapeOf<96, 64, 16, 8, 2> {};
#endif
#ifdef FATTN_SIMT_BQ_128
template <>
struct Shape<128, false> : ShapeOf<FATTN_SIMT_BQ_128, FATTN_SIMT_BKV_128, FATTN_SIMT_TQ_128,
                                   FATTN_SIMT_TK_128, FATTN_SIMT_MINB_128> {};
#else
template <> struct Shape<128, false> : ShapeOf<64, 48, 8, 16, 2> {};
#endif
template <int DPAD, bool SMALL>
using TilesOf = Tiles<DPAD, Shape<DPAD, SMALL>::BQ, Shape<DPAD, SMALL>::BKV, Shape<DPAD, SMALL>::TQ,
                      Shape<DPAD, SMALL>::TK>;
// Whether Shape<DPAD, true> is a shape of its own (else: no instance for it).
template <int DPAD> constexpr bool has_small() {
    return TilesOf<DPAD, true>::SMEM != TilesOf<DPAD, false>::SMEM;
}

}   // namespace fattn_simt_shapes

namespace {

using fattn_simt_shapes::has_small;
using fattn_simt_shapes::Shape;
using fattn_simt_shapes::Tiles;
using fattn_simt_shapes::TilesOf;

__device__ __forceinline__ float to_f(float x) { return x; }
__device__ __forceinline__ void from_f(float *p, float x) { *p = x; }
#if FATTN_CUDA_SIMT_HALF
__device__ __forceinline__ float to_f(__half x) { return __half2float(x); }
__device__ __forceinline__ float to_f(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __forceinline__ void from_f(__half *p, float x) { *p = __float2half_rn(x); }
__device__ __forceinline__ void from_f(__nv_bfloat16 *p, float x) { *p = __float2bfloat16_rn(x); }
#endif

// Elements d .. d+3 of a row, zero past the head dim D.
template <typename T> __device__ __forceinline__ float4 load4(const T *row, int d, int D) {
    float4 x = make_float4(0.f, 0.f, 0.f, 0.f);
    if (d < D) x.x = to_f(row[d]);
    if (d + 1 < D) x.y = to_f(row[d + 1]);
    if (d + 2 < D) x.z = to_f(row[d + 2]);
    if (d + 3 < D) x.w = to_f(row[d + 3]);
    return x;
}

// Rows j0 .. j0+ROWS-1 of a (seq x D) operand with row stride ss into
// dst[ROWS][LD] float4s, zero past n rows and past D. A thread copies chunk
// tid % D4 of rows tid / D4 + it * NT / D4. VEC: f32 rows 16-byte aligned
// and D % 4 == 0, so a float4 is wholly inside or outside.
template <bool VEC, int ROWS, int D4, int LD, int NT, typename T>
__device__ __forceinline__ void load_tile(float4 (*dst)[LD], const T *src, int64_t ss, int j0,
                                          int n, int D, int tid) {
    static_assert(NT % D4 == 0, "a thread keeps its chunk column");
    constexpr int STEP = NT / D4, ITERS = (ROWS + STEP - 1) / STEP;
    const int c = tid % D4, j = tid / D4;
    const T *p = src + (int64_t)((unsigned)j0 + j) * ss + 4 * c;
    if constexpr (VEC) {
#pragma unroll
        for (int it = 0; it < ITERS; it++) {
            const int r = j + it * STEP;
            if (ROWS % STEP != 0 && r >= ROWS) break;
            if ((unsigned)j0 + r < (unsigned)n && 4 * c < D)
                cp_async16(&dst[r][c], p + it * STEP * ss);
            else
                dst[r][c] = make_float4(0.f, 0.f, 0.f, 0.f);
        }
        cp_async_commit();
    } else {
        float4 x[ITERS];   // every load in flight before the first store
#pragma unroll
        for (int it = 0; it < ITERS; it++) {
            const int r = j + it * STEP;
            x[it] = r < ROWS && (unsigned)j0 + r < (unsigned)n
                        ? load4(p + it * STEP * ss, 0, D - 4 * c)
                        : make_float4(0.f, 0.f, 0.f, 0.f);
        }
#pragma unroll
        for (int it = 0; it < ITERS; it++)
            if (j + it * STEP < ROWS) dst[j + it * STEP][c] = x[it];
    }
}

// load_tile for the keys of a ragged sequence: src is the K/V head at the
// sequence's key 0 when not paged (rows ss apart, as load_tile), else at
// element 0, each row at its own address (ragged_key: a slot of a page that
// ragged_pages_ok has vetted, so any page size works).
template <bool VEC, int ROWS, int D4, int LD, int NT, typename T>
__device__ __forceinline__ void load_keys(float4 (*dst)[LD], const T *src, int64_t sb, int64_t ss,
                                          int j0, int n, int D, int tid, const fattn_cuda_args &a,
                                          const Seq &sr, int64_t b) {
    if (!a.rag.page_size) return load_tile<VEC, ROWS, D4, LD, NT>(dst, src, ss, j0, n, D, tid);
    constexpr int STEP = NT / D4, ITERS = (ROWS + STEP - 1) / STEP;
    const int c = tid % D4, j = tid / D4;
    const T *p = src + 4 * c;
    if constexpr (VEC) {
#pragma unroll
        for (int it = 0; it < ITERS; it++) {
            const int r = j + it * STEP;
            if (ROWS % STEP != 0 && r >= ROWS) break;
            if ((unsigned)j0 + r < (unsigned)n && 4 * c < D)
                cp_async16(&dst[r][c], p + ragged_key(a, sr, b, j0 + r, sb, ss));
            else
                dst[r][c] = make_float4(0.f, 0.f, 0.f, 0.f);
        }
        cp_async_commit();
    } else {
        float4 x[ITERS];   // every load in flight before the first store
#pragma unroll
        for (int it = 0; it < ITERS; it++) {
            const int r = j + it * STEP;
            x[it] = r < ROWS && (unsigned)j0 + r < (unsigned)n
                        ? load4(p + ragged_key(a, sr, b, j0 + r, sb, ss), 0, D - 4 * c)
                        : make_float4(0.f, 0.f, 0.f, 0.f);
        }
#pragma unroll
        for (int it = 0; it < ITERS; it++)
            if (j + it * STEP < ROWS) dst[j + it * STEP][c] = x[it];
    }
}

// Max / sum over the TK neighbouring lanes that share a row.
template <int TK> __device__ __forceinline__ float row_max(float x) {
#pragma unroll
    for (int off = TK / 2; off > 0; off >>= 1) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, off));
    return x;
}
template <int TK> __device__ __forceinline__ float row_sum(float x) {
#pragma unroll
    for (int off = TK / 2; off > 0; off >>= 1) x += __shfl_xor_sync(0xffffffffu, x, off);
    return x;
}

// Keys j < key_limit are visible to row i: j <= i + off under causal
// (off in [-Sq, Sk - 1], params.h), clamped to 0..Sk. The sum is taken in
// 64 bits: i + off + 1 can pass 2^31.
__device__ __forceinline__ int key_limit(int i, int Sk, int off, int causal) {
    if (!causal) return Sk;
    const long long lim = (long long)i + off + 1;
    return lim < 0 ? 0 : (lim > Sk ? Sk : (int)lim);
}

// kRagged: the block works on sequence b of a variable-length or paged
// problem (ragged.cuh): its rows, keys and causal offset; query tiles at or
// past its length exit, and keys on a bad page give the block no keys.
// kVar: the attention variants (variants.cuh) and head_dim_v (V and O
// dims [0, head_dim_v), DPAD holding both): key tiles left of the block's
// window are skipped, scores rescored and masked per element, and the sink
// joins each row at the end.
template <typename T, int DPAD, int BQ, int BKV, int TQ, int TK, int MINB, bool VEC, bool kRagged,
          bool kVar>
__global__ void __launch_bounds__(TQ *TK, MINB) flash_simt(fattn_cuda_args a, Pairs pairs) {
    using C = Tiles<DPAD, BQ, BKV, TQ, TK>;
    constexpr int RPT = C::RPT, KPT = C::KPT, D4 = C::D4, CPT = C::CPT, NT = C::NT;
    extern __shared__ float4 smem[];
    float4(*Qs)[C::QLD] = reinterpret_cast<float4(*)[C::QLD]>(smem);
    float4(*Ks)[C::KLD] = reinterpret_cast<float4(*)[C::KLD]>(smem + BQ * C::QLD);
    float4(*Vs)[C::KLD] = reinterpret_cast<float4(*)[C::KLD]>(smem + BQ * C::QLD + BKV * C::KLD);
    float(*Ps)[C::PLD] = reinterpret_cast<float(*)[C::PLD]>(smem + BQ * C::QLD + 2 * BKV * C::KLD);

    const int tid = threadIdx.x, ty = tid / TK, tx = tid % TK;
    const int q0 = blockIdx.x * BQ;
    int64_t b, h, hk;
    block_pair(a, pairs, b, h, hk);
    const int D = a.head_dim, Dv = kVar ? a.head_dim_v : a.head_dim;
    int Sq = a.seq_q, Sk = a.seq_kv, off = a.causal_offset;
    // Q, O and lse: batch index and first row (the sequence's, when ragged).
    int64_t qb = b, qr = 0;
    Seq sr{};
    if constexpr (kRagged) {
        sr = ragged_seq(a, b);
        if (q0 >= sr.len_q) return;   // the whole block: no barrier is left waiting
        Sq = sr.len_q, Sk = sr.len_kv, off = sr.causal_offset, qb = sr.q_batch, qr = sr.q_row0;
    }
    const T *q = static_cast<const T *>(a.q) + qb * a.q_sb + h * a.q_sh + qr * a.q_ss;
    // K and V at key 0 of the head; paged: at element 0 (load_keys).
    const T *k, *v;
    if constexpr (kRagged) {
        k = static_cast<const T *>(a.k) + hk * a.k_sh;
        v = static_cast<const T *>(a.v) + hk * a.v_sh;
        if (!a.rag.page_size) {
            k += ragged_key(a, sr, b, 0, a.k_sb, a.k_ss);
            v += ragged_key(a, sr, b, 0, a.v_sb, a.v_ss);
        }
    } else {
        k = static_cast<const T *>(a.k) + b * a.k_sb + hk * a.k_sh;
        v = static_cast<const T *>(a.v) + b * a.v_sb + hk * a.v_sh;
    }

    // Tiles past what the block's last row sees are skipped, not masked.
    int kv_end = key_limit((int)min((unsigned)q0 + BQ, (unsigned)Sq) - 1, Sk, off, a.causal);
    // kVar: the window narrows the block's keys to [kv_lo, kv_end) (kv_lo
    // rounded down to a tile); woff is the sequence's len_kv - len_q.
    int kv_lo = 0;
    int64_t woff = 0;
    float slope = 0.f;
    if constexpr (kVar) {
        woff = (int64_t)Sk - Sq;
        const int64_t last = (int64_t)min((unsigned)q0 + BQ, (unsigned)Sq) - 1;
        if (a.var.window_right >= 0)
            kv_end =
                (int)max((int64_t)0, min((int64_t)kv_end, last + woff + a.var.window_right + 1));
        if (a.var.window_left >= 0) {
            const int64_t lo = max((int64_t)0, (int64_t)q0 + woff - a.var.window_left);
            kv_lo = (int)(min(lo, (int64_t)kv_end) / BKV * BKV);
        }
        slope = var_slope(a, b, h);
    }
    // A bad page among the block's keys: no keys (O = 0, lse = -inf).
    if constexpr (kRagged)
        if (!ragged_pages_ok(a, b, kv_lo, kv_end)) kv_end = 0;
    // The dense or the ragged key loader. Ragged, keys from kv_end on (which
    // no stored row sees) are zeros, not loads: their pages were not vetted.
    // dims: D for K, Dv for V.
    auto load_kv = [&](float4(*dst)[C::KLD], const T *src, int64_t sb, int64_t ss, unsigned j0,
                       int dims) {
        if constexpr (kRagged)
            load_keys<VEC, BKV, D4, C::KLD, NT>(dst, src, sb, ss, (int)j0, kv_end, dims, tid, a, sr,
                                                b);
        else
            load_tile<VEC, BKV, D4, C::KLD, NT>(dst, src, ss, (int)j0, Sk, dims, tid);
    };
    if (kv_end > kv_lo) load_kv(Ks, k, a.k_sb, a.k_ss, (unsigned)kv_lo, D);

    // Q scaled by scale * log2(e): the softmax runs on exp2.
    load_tile<false, BQ, D4, C::QLD, NT>(Qs, q, a.q_ss, q0, Sq, D, tid);
    // Each thread scales the chunks it stored: no barrier between.
#pragma unroll
    for (int r = tid / D4; r < BQ; r += NT / D4) {
        float4 &x = Qs[r][tid % D4];
        x.x *= a.scale_log2, x.y *= a.scale_log2, x.z *= a.scale_log2, x.w *= a.scale_log2;
    }

    int lim[RPT];
    float m_i[RPT], l_i[RPT];   // l_i: this thread's keys only; summed over the row at the end
    float4 acc[RPT][CPT];
#pragma unroll
    for (int i = 0; i < RPT; i++) {
        const unsigned row = (unsigned)q0 + ty + i * TQ;
        lim[i] = row < (unsigned)Sq ? key_limit((int)row, Sk, off, a.causal) : 0;
        m_i[i] = -INFINITY;
        l_i[i] = 0.f;
#pragma unroll
        for (int c = 0; c < CPT; c++) acc[i][c] = make_float4(0.f, 0.f, 0.f, 0.f);
    }

    const bool rescore = kVar && var_rescore(a);
    for (unsigned j0 = (unsigned)kv_lo; j0 < (unsigned)kv_end; j0 += BKV) {
        // K_j landed; every reader of the previous V and P is done.
        cp_async_wait_all();
        __syncthreads();
        load_kv(Vs, v, a.v_sb, a.v_ss, j0, Dv);

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
            for (int kk = 0; kk < KPT; kk++) kv[kk] = Ks[tx + kk * TK][c];
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
            if constexpr (kVar) {
                // The sequence's row and keys; scores back to natural units
                // for the rescoring, then to log2 again.
                const int64_t row = (int64_t)q0 + ty + i * TQ;
#pragma unroll
                for (int kk = 0; kk < KPT; kk++) {
                    const int64_t jj = (int64_t)j0 + tx + kk * TK;
                    const bool vis = jj < lim[i] && var_visible(a, row, jj, Sk, off, woff);
                    float x = s[i][kk];
                    if (rescore && vis)
                        x = var_score(a, x * kLn2, slope, (float)(row + woff - jj),
                                      var_bias_row(a, b, h, row) + jj * a.var.bias_sd) *
                            kLog2e;
                    s[i][kk] = vis ? x : -INFINITY;
                    mx = fmaxf(mx, s[i][kk]);
                }
            } else {
#pragma unroll
                for (int kk = 0; kk < KPT; kk++) {
                    if (j0 + tx + kk * TK >= (unsigned)lim[i]) s[i][kk] = -INFINITY;
                    mx = fmaxf(mx, s[i][kk]);
                }
            }
            const float m_new = fmaxf(m_i[i], row_max<TK>(mx));
            // A row that has seen no key yet keeps m = -inf; its exponents
            // are taken against 0 so masked scores give 0, not NaN.
            const float m_use = m_new == -INFINITY ? 0.f : m_new;
            const float alpha = ex2(m_i[i] - m_use);
            float psum = 0.f;
#pragma unroll
            for (int kk = 0; kk < KPT; kk++) {
                const float p = ex2(s[i][kk] - m_use);
                Ps[ty + i * TQ][tx + kk * TK] = p;
                psum += p;
            }
            l_i[i] = l_i[i] * alpha + psum;
            m_i[i] = m_new;
#pragma unroll
            for (int c = 0; c < CPT; c++) {
                acc[i][c].x *= alpha, acc[i][c].y *= alpha, acc[i][c].z *= alpha,
                    acc[i][c].w *= alpha;
            }
        }
        // V_j landed and P is written; every reader of K_j is done.
        cp_async_wait_all();
        __syncthreads();
        if (j0 + BKV < (unsigned)kv_end) load_kv(Ks, k, a.k_sb, a.k_ss, j0 + BKV, D);

#pragma unroll 2
        for (int j4 = 0; j4 < BKV / 4; j4++) {
            float4 pv[RPT];
#pragma unroll
            for (int i = 0; i < RPT; i++)
                pv[i] = *reinterpret_cast<const float4 *>(&Ps[ty + i * TQ][4 * j4]);
#pragma unroll
            for (int c = 0; c < CPT; c++) {
                const float4 v0 = Vs[4 * j4 + 0][tx + c * TK], v1 = Vs[4 * j4 + 1][tx + c * TK];
                const float4 v2 = Vs[4 * j4 + 2][tx + c * TK], v3 = Vs[4 * j4 + 3][tx + c * TK];
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

    // l = 0 (no visible key, or every score -inf) gives O = 0 and lse = -inf;
    // a NaN or +inf score made l NaN, and O and lse stay NaN (a NaN l must
    // not pass for 0).
#pragma unroll
    for (int i = 0; i < RPT; i++) {
        const unsigned row = (unsigned)q0 + ty + i * TQ;
        const float l = row_sum<TK>(l_i[i]);   // every lane: the shuffle needs the whole warp
        if (row >= (unsigned)Sq) continue;
        float inv = l == 0.f ? 0.f : 1.f / l, lse = -INFINITY;
        if constexpr (kVar) {   // the plain instances take the lse at its store
            if (l != 0.f) lse = (m_i[i] + log2f(l)) * kLn2;
            var_sink_fold(m_i[i], l, var_sink_log2(a, h), &inv, &lse);
        }
        T *o = static_cast<T *>(a.o) + qb * a.o_sb + h * a.o_sh + (qr + row) * a.o_ss;
#pragma unroll
        for (int c = 0; c < CPT; c++) {
            const int d = 4 * (tx + c * TK);
            const float4 x = acc[i][c];
            if (d < Dv) from_f(o + d, x.x * inv);
            if (d + 1 < Dv) from_f(o + d + 1, x.y * inv);
            if (d + 2 < Dv) from_f(o + d + 2, x.z * inv);
            if (d + 3 < Dv) from_f(o + d + 3, x.w * inv);
        }
        if (a.lse && tx == 0)
            a.lse[qb * a.l_sb + h * a.l_sh + (qr + row) * a.l_ss] =
                kVar ? lse : l == 0.f ? -INFINITY : (m_i[i] + log2f(l)) * kLn2;
    }
}

template <typename T, int DPAD, bool SMALL, bool VEC, bool kRagged, bool kVar = false>
cudaError_t launch(const fattn_cuda_args *a, cudaStream_t stream) {
    using S = Shape<DPAD, SMALL>;
    using C = TilesOf<DPAD, SMALL>;
    auto kernel = flash_simt<T, DPAD, S::BQ, S::BKV, S::TQ, S::TK, S::MINB, VEC, kRagged, kVar>;
    cudaError_t err =
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, C::SMEM);
    if (err != cudaSuccess) return err;
    const unsigned tiles_q = (unsigned)(((int64_t)a->seq_q + S::BQ - 1) / S::BQ);
    return launch_pairs(*a, tiles_q, [&](const Pairs &pairs, dim3 grid) {
        flash_simt<T, DPAD, S::BQ, S::BKV, S::TQ, S::TK, S::MINB, VEC, kRagged, kVar>
            <<<grid, C::NT, C::SMEM, stream>>>(*a, pairs);
    });
}

// K and V rows can be copied as float4s: f32, 16-byte aligned bases, and
// strides and head dim in multiples of 4 elements.
bool vec_rows(const fattn_cuda_args *a) {
    const int64_t strides[] = {a->k_sb, a->k_sh, a->k_ss, a->v_sb, a->v_sh, a->v_ss};
    for (int64_t st : strides)
        if (st % 4 != 0) return false;
    return a->dtype == FATTN_F32 && a->head_dim % 4 == 0 && (uintptr_t)a->k % 16 == 0 &&
           (uintptr_t)a->v % 16 == 0;
}

template <int DPAD> void tiles(int small, int *bm, int *bn, int *smem) {
    if (small && has_small<DPAD>()) {
        *bm = Shape<DPAD, true>::BQ, *bn = Shape<DPAD, true>::BKV,
        *smem = TilesOf<DPAD, true>::SMEM;
    } else {
        *bm = Shape<DPAD, false>::BQ, *bn = Shape<DPAD, false>::BKV,
        *smem = TilesOf<DPAD, false>::SMEM;
    }
}

template <typename T, int DPAD, bool VEC, bool kRagged, bool kVar = false>
cudaError_t by_shape(const fattn_cuda_args *a, int small, cudaStream_t stream) {
    if constexpr (has_small<DPAD>())
        if (small) return launch<T, DPAD, true, VEC, kRagged, kVar>(a, stream);
    return launch<T, DPAD, false, VEC, kRagged, kVar>(a, stream);
}

// Ragged problems run their own instances: the dense kernel keeps its code.
template <typename T, int DPAD, bool VEC>
cudaError_t by_layout(const fattn_cuda_args *a, int small, cudaStream_t stream) {
    return a->rag.on ? by_shape<T, DPAD, VEC, true>(a, small, stream)
                     : by_shape<T, DPAD, VEC, false>(a, small, stream);
}

// Variants and head_dim_v run one more family, f32 only (f16/bf16 have the
// tensor-core kernel on the devices that matter), ragged-capable (a dense
// problem is a ragged one with rag.on 0) and unvectorised: one instance
// per bucket and shape.
template <int DPAD> cudaError_t by_dtype(const fattn_cuda_args *a, int small, cudaStream_t stream) {
    if (a->var.on || a->head_dim_v != a->head_dim)
        return a->dtype == FATTN_F32 ? by_shape<float, DPAD, false, true, true>(a, small, stream)
                                     : cudaErrorInvalidValue;
    if (a->dtype == FATTN_F32)
        return vec_rows(a) ? by_layout<float, DPAD, true>(a, small, stream)
                           : by_layout<float, DPAD, false>(a, small, stream);
#if FATTN_CUDA_SIMT_HALF
    if (a->dtype == FATTN_F16) return by_layout<__half, DPAD, false>(a, small, stream);
    if (a->dtype == FATTN_BF16) return by_layout<__nv_bfloat16, DPAD, false>(a, small, stream);
#endif
    return cudaErrorInvalidValue;
}

}   // namespace

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

extern "C" cudaError_t fattn_cuda_flash_simt(const fattn_cuda_args *a, int dpad, int small,
                                             cudaStream_t stream) {
    // The kernel holds the offset in an int and its limits in int arithmetic
    // (params.h gives the range).
    if (a->causal && (a->causal_offset < -a->seq_q || a->causal_offset > a->seq_kv - 1))
        return cudaErrorInvalidValue;
    switch (dpad) {
#if FATTN_CUDA_DPAD_32
    case 32: return by_dtype<32>(a, small, stream);
#endif
#if FATTN_CUDA_DPAD_64
    case 64: return by_dtype<64>(a, small, stream);
#endif
#if FATTN_CUDA_DPAD_128
    case 128: return by_dtype<128>(a, small, stream);
#endif
#if FATTN_CUDA_DPAD_256
    case 256: return by_dtype<256>(a, small, stream);
#endif
    default: return cudaErrorInvalidValue;
    }
}

extern "C" void fattn_cuda_flash_simt_tiles(int dpad, int small, int *block_m, int *block_n,
                                            int *smem_bytes) {
    *block_m = *block_n = *smem_bytes = 0;
    switch (dpad) {
    case 32: tiles<32>(small, block_m, block_n, smem_bytes); break;
    case 64: tiles<64>(small, block_m, block_n, smem_bytes); break;
    case 128: tiles<128>(small, block_m, block_n, smem_bytes); break;
    case 256: tiles<256>(small, block_m, block_n, smem_bytes); break;
    default: break;
    }
}

// Split-KV decoding with GQA packing (flash-decoding): f32 on the CUDA cores,
// f16/bf16 on the tensor cores (decode_mma_kernel, below); the
// first launch of the CUDA "decode" variant (backends/cuda/cuda_decode.c);
// with more than one split, kernels_cu/combine.cu merges the partial results.
//
// Design. Decoding reads each K/V element once and does little arithmetic on
// it, so the kernel is built around the memory stream, in float32:
// - Rows. The R = group * seq_q query rows that read one K/V head (row rr =
//   g * seq_q + i: query head hk * group + g, query row i) are packed into
//   tiles of BR = 4, 8 or 16 rows; a block owns one tile, so every K/V
//   element it streams serves BR rows (all the heads of the group when
//   R <= BR) instead of one.
// - Keys. Grid x is (b, hk, row tile), grid y the key split: split s of a
//   sequence with T block tiles (of BKV keys) takes tiles [s*T/S, (s+1)*T/S),
//   clipped to the keys its rows see (causal) and, when paged, checked page
//   by page (ragged_pages_ok: a bad page leaves the block no keys) while
//   the first tiles, their pages clamped into range, are in flight; the
//   tensor-core kernel stages the vetted pages' offsets in shared memory
//   then (ragged_pages_stage), and its later tiles find their rows there.
//   With a sliding window, each row sees [rowlo, rowlim) and the splits
//   divide only the tiles from the rows' first visible key (split_keys).
// - Variants. The window and sinks (folded in at the output or by the
//   combine) run in the plain instances; softcap, ALiBi and a bias, which
//   change each score, in instances of their own (kScore), whose visible
//   scores go through dec_score, so the plain instances' code stays as it
//   was.
// - Warps. The block's W warps are independent streams: warp w takes keys
//   w*KW .. w*KW+KW-1 of every block tile, through its own STAGES-deep ring of
//   K+V tiles in shared memory filled by 16-byte cp.async (zero-filling the
//   tail of a row and keys past the range), so the loop has no block barrier
//   and each warp keeps STAGES-1 tiles (12 KiB at the defaults) in flight.
//   A warp tile is KW keys (4 KiB of K+V at the defaults); LPK = 32/KW lanes
//   share a key: each lane loads, and then dots with Q, the same LPK-strided
//   16-byte chunks of its key's K row, so the scores need an LPK-lane
//   shuffle sum and no barrier. Rows are XOR-swizzled by 16-byte chunk
//   ((key * LPK) & 7) so those reads are free of bank conflicts, and so are
//   the P.V reads, where the 32 lanes split the head dim of one V row.
// - Softmax. Online, in base 2 (Q is pre-scaled by scale * log2 e), per
//   warp: each warp keeps its own running max and sums; at the end the
//   block merges its warps by the log-sum-exp rule through shared memory
//   (the K/V ring, no longer needed, holds the warps' accumulators).
// - Output. One split: O in the storage dtype and the lse, directly (a sink
//   folded in). More: a normalised float32 partial O and its natural-log lse
//   per row into the workspace (-inf and zeros for a split that saw no key),
//   for combine.cu, which adds the sink once.
// Ragged problems (varlen, seqused_kv, paged with any page size) resolve
// their sequence through kernels_cu/ragged.cuh; a query row past its
// sequence is neither computed nor written.
//
// Budget (H200, bf16, d128, BR 4): a 4 KiB warp tile costs ~520 warp
// instructions, about 60% of what the SM can issue in the time HBM
// (4.8 TB/s over 132 SMs) delivers it, so the kernel stays memory-bound up
// to BR 8; BR 16 (e.g. MQA, or 4 query rows of a GQA-4 group) becomes
// issue-bound at roughly half the bandwidth.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstring>
#include <type_traits>

#include "params.h"
#include "device_util.cuh"
#include "mma_sm80.cuh"
#include "ragged.cuh"
#include "variants.cuh"

// Tunables, overridable at compile time for sweeps. Starting points from the
// budget above (not yet measured on the H200): 4 warps of 4 stages of 4 KiB
// is 64 KiB of ring per block, three blocks per SM.
#ifndef FATTN_DECODE_WARPS
#define FATTN_DECODE_WARPS 4
#endif
#ifndef FATTN_DECODE_STAGES
#define FATTN_DECODE_STAGES 4
#endif
#ifndef FATTN_DECODE_TILE_BYTES
#define FATTN_DECODE_TILE_BYTES 4096
#endif

// The shapes: compile-time data in a named namespace (in the anonymous one
// nvcc warns, #177, about members that some build leaves unreferenced).
namespace fattn_decode_shapes {

constexpr int clampi(int x, int lo, int hi) { return x < lo ? lo : x > hi ? hi : x; }
constexpr bool pow2(int x) { return x > 0 && (x & (x - 1)) == 0; }

template <int ESZ, int DPAD, int BR> struct Shape {
    static constexpr int W = FATTN_DECODE_WARPS, NT = 32 * W, STAGES = FATTN_DECODE_STAGES;
    static constexpr int RB = DPAD * ESZ;   // bytes of a K or V row in shared memory
    static constexpr int CH = RB / 16;      // its 16-byte chunks
    static constexpr int CE = 16 / ESZ;     // elements per chunk
    // Keys per warp tile: FATTN_DECODE_TILE_BYTES of K and V together, 2..32
    // (2: f32 at d256, whose 8 KiB tiles of 4 keys would leave room for one
    // block per SM).
    static constexpr int KW = clampi(FATTN_DECODE_TILE_BYTES / (2 * RB), 2, 32);
    static constexpr int LPK = 32 / KW;    // lanes per key (loads and scores)
    static constexpr int CPL = CH / LPK;   // chunks per lane per row
    static constexpr int BKV = W * KW;     // keys per block tile
    // P.V: each lane owns E = DPAD/32 elements of a V row, as NU units of UE
    // contiguous elements (UB bytes, at most 16), unit u at element
    // (u * 32 + lane) * UE: a warp reads a row in order, conflict-free.
    static constexpr int E = DPAD / 32;
    static constexpr int UB = E * ESZ < 16 ? E * ESZ : 16;
    static constexpr int UE = UB / ESZ, NU = E / UE;
    static constexpr int QH = CE / 4;           // float4s of Q per chunk of K
    static constexpr int STAGE = 2 * KW * RB;   // one warp tile: K rows, then V rows
    // Shared memory, in bytes: the rings, Q (float32, [BR][QH][CH] float4s,
    // so the float4s the lanes of a key read at once are consecutive), P
    // per warp [W][KW][BR], the warps' row maxima, sums and merge factors
    // [W][BR] each, then the block's rows: sum, max, key limit, first key.
    static constexpr int RING = W * STAGES * STAGE;
    static constexpr int QS = BR * DPAD * 4;
    static constexpr int PS = W * KW * BR * 4;
    static constexpr int STATS = (3 * W * BR + 4 * BR) * 4;
    static constexpr int SMEM = RING + QS + PS + STATS;
    static_assert(ESZ == 2 || ESZ == 4, "storage types are 2 or 4 bytes");
    static_assert(pow2(KW) && KW <= 32 && CH >= 8 && CH % LPK == 0, "warp tile shape");
    static_assert(E % UE == 0 && UB % ESZ == 0, "P.V units");
    static_assert(BR % 4 == 0 && DPAD % 32 == 0, "rows come in float4s, lanes split the dims");
    // The merge writes the warps' [BR][DPAD] float accumulators over the rings.
    static_assert(W * BR * DPAD * 4 <= RING, "the merge does not fit in the rings");
    static_assert(STAGES >= 2, "a ring needs two stages");
};

}   // namespace fattn_decode_shapes

namespace {

using fattn_decode_shapes::Shape;

// What the launch adds to fattn_cuda_args.
struct Params {
    int splits, row_tiles, heads_kv;
    int vec;        // 1: K and V rows are 16-byte aligned (cp.async), else element copies
    Divisor32 page;   // page_size (paged caches only)
    float *ws_o, *ws_lse;
};

template <typename T> struct Bits;   // the storage type's raw bits
template <> struct Bits<float> { using type = uint32_t; };
template <> struct Bits<__half> { using type = uint16_t; };
template <> struct Bits<__nv_bfloat16> { using type = uint16_t; };

__device__ __forceinline__ void from_f(float *p, float x) { *p = x; }
__device__ __forceinline__ void from_f(__half *p, float x) { *p = __float2half_rn(x); }
__device__ __forceinline__ void from_f(__nv_bfloat16 *p, float x) { *p = __float2bfloat16_rn(x); }
__device__ __forceinline__ float to_f(float x) { return x; }
[[maybe_unused]] __device__ __forceinline__ float to_f(__half x) { return __half2float(x); }
[[maybe_unused]] __device__ __forceinline__ float to_f(__nv_bfloat16 x) { return __bfloat162float(x); }

// Two 16-bit elements of a 32-bit word (the lower first) as floats.
template <typename T> __device__ __forceinline__ void unpack2(uint32_t w, float &lo, float &hi);
template <>
[[maybe_unused]] __device__ __forceinline__ void unpack2<__nv_bfloat16>(uint32_t w, float &lo, float &hi) {
    lo = __uint_as_float(w << 16);   // bf16 is the upper half of a float
    hi = __uint_as_float(w & 0xffff0000u);
}
template <> [[maybe_unused]] __device__ __forceinline__ void unpack2<__half>(uint32_t w, float &lo, float &hi) {
    const float2 f = __half22float2(*reinterpret_cast<const __half2 *>(&w));
    lo = f.x, hi = f.y;
}

// N 32-bit words of storage as floats (N for f32, 2N for the 16-bit types).
template <typename T, int N> __device__ __forceinline__ void unpack(const uint32_t *w, float *f) {
#pragma unroll
    for (int k = 0; k < N; k++) {
        if constexpr (sizeof(T) == 4)
            f[k] = __uint_as_float(w[k]);
        else
            unpack2<T>(w[k], f[2 * k], f[2 * k + 1]);
    }
}


// 16 bytes global -> shared, of which the first `bytes` are read and the
// rest zero-filled (0: no read, all zeros). dst and src 16-byte aligned;
// bytes a multiple of the element size.
__device__ __forceinline__ void cp_async16_fill(void *dst, const void *src, int bytes) {
#if __CUDA_ARCH__ >= 800
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_u32(dst)), "l"(src),
                 "r"(bytes)
                 : "memory");
#else
    *static_cast<uint4 *>(dst) = gather16<uint16_t>(src, 0, bytes / 2);
#endif
}

// Waits until at most N of this thread's cp.async groups are pending.
template <int N> __device__ __forceinline__ void cp_async_wait() {
#if __CUDA_ARCH__ >= 800
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
#endif
}

// The keys are read: a combine launched after this kernel as its
// programmatic dependent (cuda_decode.c) may start launching; it waits for
// our results itself.
__device__ __forceinline__ void allow_dependents() {
#if __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}

__device__ __forceinline__ int key_limit(int i, int len_kv, int off, int causal) {
    if (!causal) return len_kv;
    const long long lim = (long long)i + off + 1;
    return lim < 0 ? 0 : (lim > len_kv ? len_kv : (int)lim);
}

// The keys query row i of sequence s sees, [*lo, *hi): causal as key_limit,
// cut by the sliding window when the problem has variants (variants.cuh's
// rule; the host clamps the window sides, so the sums fit in int64).
__device__ __forceinline__ void row_keys(const fattn_cuda_args &a, const Seq &s, int i, int *lo,
                                         int *hi) {
    int l = 0, h = key_limit(i, s.len_kv, s.causal_offset, a.causal);
    if (a.var.on) {
        const int64_t woff = (int64_t)s.len_kv - s.len_q;
        if (a.var.window_right >= 0)
            h = (int)max((int64_t)0, min((int64_t)h, i + woff + a.var.window_right + 1));
        if (a.var.window_left >= 0)
            l = (int)max((int64_t)0, min((int64_t)s.len_kv, i + woff - a.var.window_left));
    }
    *lo = l, *hi = h;
}

// This split's keys, [*k0, *k_hi) in whole tiles of BKV from *k0: the keys
// the block's rows see (rowlo/rowlim, BR rows) divided among the splits.
// Without variants, the tiles of the sequence's len_kv keys are divided
// (as before windows), each split ending where the last-seeing row stops;
// with them, only the tiles from the first row's first visible key.
template <int BKV, int BR>
__device__ __forceinline__ void split_keys(const fattn_cuda_args &a, const Params &prm, int len,
                                           const int *rowlo, const int *rowlim, int split,
                                           int *k0, int *k_hi) {
    int maxlim = 0, minlo = len;
#pragma unroll
    for (int r = 0; r < BR; r++) {
        maxlim = max(maxlim, rowlim[r]);
        if (rowlim[r] > rowlo[r]) minlo = min(minlo, rowlo[r]);
    }
    const int tb = a.var.on ? min(minlo, maxlim) / BKV : 0;
    const int te = ((a.var.on ? min(len, maxlim) : len) + BKV - 1) / BKV;
    const int tiles = max(te - tb, 0);
    const int t0 = tb + (int)((int64_t)split * tiles / prm.splits);
    const int t1 = tb + (int)((int64_t)(split + 1) * tiles / prm.splits);
    *k0 = t0 * BKV;
    *k_hi = min(min(t1 * BKV, len), maxlim);
}

// The rescoring variants (softcap, ALiBi, bias) in the kernels' units,
// log2 (Q carries scale * log2 e), so the plain path's scaling stays:
// cap2 = softcap * log2 e, capk = 2 / softcap (both 0 without a softcap).
struct Rescore {
    float cap2, capk;
};

__device__ __forceinline__ Rescore rescore_consts(const fattn_cuda_args &a) {
    const float c = a.var.softcap;
    return c > 0.f ? Rescore{c * kLog2e, 2.f / c} : Rescore{0.f, 0.f};
}

// Score x (log2 units) of a visible key after the softcap, ALiBi and the
// bias, in variants.cuh's order (var_score's rule): slope2 is the row's
// slope times log2 e, dist the key's distance i + len_kv - len_q - j, bias_at
// its bias element. The softcap is variants.cuh's var_tanh2 (two MUFU ops,
// absolute error ~1e-7 c).
__device__ __forceinline__ float dec_score(const fattn_cuda_args &a, const Rescore &rs, float x,
                                           float slope2, int dist, int64_t bias_at) {
    if (a.var.softcap > 0.f) x = var_tanh2(x * rs.capk, rs.cap2);
    if (a.var.alibi) x = fmaf(-slope2, fabsf((float)dist), x);
    if (a.var.bias) x = fmaf(var_bias(a, bias_at), kLog2e, x);
    return x;
}

// After the key loop, with each warp's row maxima and sums in wm, wl
// [W][BR]: lets a dependent combine launch, waits for the rings to be idle
// (the last copy groups are empty), and merges the warps by the log-sum-exp
// rule into the block's rows (rowM, rowL) and each warp's factor (wf), for
// the accumulators that then go over the rings. Both kernels end here.
template <int W, int BR>
__device__ __forceinline__ void merge_warps(const float *wm, const float *wl, float *wf,
                                            float *rowM, float *rowL, int tid) {
    allow_dependents();
    cp_async_wait<0>();
    __syncthreads();
    if (tid < BR) {
        float M = -INFINITY, L = 0.f;
        for (int w = 0; w < W; w++) M = fmaxf(M, wm[w * BR + tid]);
        for (int w = 0; w < W; w++) {
            const float mw = wm[w * BR + tid];
            const float f = mw == -INFINITY ? 0.f : ex2(mw - M);
            wf[w * BR + tid] = f;
            L = fmaf(wl[w * BR + tid], f, L);
        }
        rowM[tid] = M, rowL[tid] = L;
    }
    __syncthreads();
}

// The block's output, after the warps left their O rows in Ow ([W][BR][DPAD])
// and the merged L and M in rowL/rowM: O = sum over the warps / L (0 where
// L = 0: no key; NaN stays NaN) and the lse, to O and lse with one split
// (with a sink folded in: var_sink_fold), else to the split's partial rows
// in the workspace (without it). Both kernels end here.
template <typename T, int W, int NT, int DPAD, int BR>
__device__ __forceinline__ void write_rows(const fattn_cuda_args &a, const Params &prm, const Seq &s,
                                           const float *Ow, const float *rowL, const float *rowM,
                                           int tid, int r0, int R, int Sq, int D, int64_t hk,
                                           int group, int split, int64_t b) {
    const int64_t Hq = a.heads_q;
    for (int idx = tid; idx < BR * DPAD; idx += NT) {
        const int r = idx / DPAD, dd = idx % DPAD, rr = r0 + r;
        const int g = rr / Sq, i = rr - g * Sq;
        if (dd >= D || rr >= R || i >= s.len_q) continue;
        float x = 0.f;
#pragma unroll
        for (int w = 0; w < W; w++) x += Ow[(w * BR + r) * DPAD + dd];
        const float L = rowL[r];
        float inv = L == 0.f ? 0.f : 1.f / L, lse_unused;
        const int64_t h = hk * group + g;
        // One split: the sink joins the row here; more: combine.cu adds it.
        if (prm.splits == 1 && a.var.on)
            var_sink_fold(rowM[r], L, var_sink_log2(a, h), &inv, &lse_unused);
        x *= inv;
        if (prm.splits == 1) {
            T *o =
                static_cast<T *>(a.o) + s.q_batch * a.o_sb + h * a.o_sh + (s.q_row0 + i) * a.o_ss;
            from_f(o + dd, x);
        } else {
            const int64_t row = (((int64_t)split * a.batch + b) * Hq + h) * Sq + i;
            prm.ws_o[row * D + dd] = x;
        }
    }
    if (tid < BR) {
        const int rr = r0 + tid, g = rr / Sq, i = rr - g * Sq;
        if (rr < R && i < s.len_q) {
            const float L = rowL[tid];
            float lse = L == 0.f ? -INFINITY : (rowM[tid] + log2f(L)) * kLn2, inv_unused;
            const int64_t h = hk * group + g;
            if (prm.splits == 1 && a.var.on)
                var_sink_fold(rowM[tid], L, var_sink_log2(a, h), &inv_unused, &lse);
            if (prm.splits == 1) {
                if (a.lse) a.lse[s.q_batch * a.l_sb + h * a.l_sh + (s.q_row0 + i) * a.l_ss] = lse;
            } else {
                prm.ws_lse[(((int64_t)split * a.batch + b) * Hq + h) * Sq + i] = lse;
            }
        }
    }
}

// Shared memory per row of decode_kernel's rescoring instance: its bias
// row (int64), slope and diagonal.
constexpr int kRowVarBytes = 16;

// kScore: the instance for the rescoring variants (softcap, ALiBi, bias;
// launched only with var.on): each visible score goes through dec_score,
// with the rows' slopes, diagonals and bias rows in shared memory after
// the plain instance's (kRowVarBytes a row), which does none of it.
template <typename T, int DPAD, int BR, bool kScore>
__global__ void __launch_bounds__(Shape<sizeof(T), DPAD, BR>::NT)
    decode_kernel(fattn_cuda_args a, Params prm) {
    using C = Shape<sizeof(T), DPAD, BR>;
    using B = typename Bits<T>::type;
    constexpr int W = C::W, NT = C::NT, KW = C::KW, LPK = C::LPK, CH = C::CH, CE = C::CE;
    constexpr int QH = C::QH, RB = C::RB, UE = C::UE, NU = C::NU, E = C::E, ESZ = sizeof(T);
    extern __shared__ __align__(16) unsigned char smem[];
    unsigned char *ring = smem;
    float4 *Qs = reinterpret_cast<float4 *>(smem + C::RING);
    float *Ps = reinterpret_cast<float *>(smem + C::RING + C::QS);
    float *wm = Ps + W * KW * BR, *wl = wm + W * BR, *wf = wl + W * BR;
    float *rowL = wf + W * BR, *rowM = rowL + BR;
    int *rowlim = reinterpret_cast<int *>(rowM + BR), *rowlo = rowlim + BR;
    // kScore: per row, the bias element at key 0, the slope (log2 units)
    // and the diagonal i + len_kv - len_q.
    static_assert(C::SMEM % 8 == 0, "the bias rows are int64");
    int64_t *rowbb = reinterpret_cast<int64_t *>(smem + C::SMEM);
    float *rowsl = reinterpret_cast<float *>(rowbb + BR);
    int *rowdg = reinterpret_cast<int *>(rowsl + BR);

    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int split = blockIdx.y;
    const unsigned unit = blockIdx.x;   // (b * heads_kv + hk) * row_tiles + rt, below 2^31
    const int rt = (int)(unit % (unsigned)prm.row_tiles);
    const unsigned bhk = unit / (unsigned)prm.row_tiles;
    const int64_t hk = bhk % (unsigned)prm.heads_kv, b = bhk / (unsigned)prm.heads_kv;
    const int Sq = a.seq_q, D = a.head_dim, group = (int)a.group;
    const int R = group * Sq, r0 = rt * BR;   // R below 2^31: the planner checks
    const Seq s = ragged_seq(a, b);

    // The tile's rows: the keys each sees (0: not a row of the sequence).
    if (tid < BR) {
        const int rr = r0 + tid, i = rr % Sq;
        int lo = 0, hi = 0;
        if (rr < R && i < s.len_q) row_keys(a, s, i, &lo, &hi);
        rowlo[tid] = lo, rowlim[tid] = hi;
        if constexpr (kScore) {
            const bool ok = rr < R && i < s.len_q;
            const int64_t h = hk * group + rr / Sq;
            rowbb[tid] = ok ? var_bias_row(a, b, h, i) : 0;
            rowsl[tid] = ok ? var_slope(a, b, h) * kLog2e : 0.f;
            rowdg[tid] = i + (s.len_kv - s.len_q);
        }
    }
    // Q, scaled by scale * log2 e (the softmax runs on exp2), zero past the
    // head dim and on rows that are not the sequence's; element d of row r
    // is float4 (r * QH + (d % CE) / 4) * CH + d / CE, component d % 4.
    for (int idx = tid; idx < BR * DPAD / 4; idx += NT) {
        const int r = idx / (DPAD / 4), d = 4 * (idx % (DPAD / 4)), rr = r0 + r;
        const int g = rr / Sq, i = rr - g * Sq;
        float4 x = make_float4(0.f, 0.f, 0.f, 0.f);
        if (rr < R && i < s.len_q) {
            const T *q = static_cast<const T *>(a.q) + s.q_batch * a.q_sb +
                         (hk * group + g) * a.q_sh + (s.q_row0 + i) * a.q_ss;
            if (d < D) x.x = to_f(q[d]) * a.scale_log2;
            if (d + 1 < D) x.y = to_f(q[d + 1]) * a.scale_log2;
            if (d + 2 < D) x.z = to_f(q[d + 2]) * a.scale_log2;
            if (d + 3 < D) x.w = to_f(q[d + 3]) * a.scale_log2;
        }
        Qs[(r * QH + (d % CE) / 4) * CH + d / CE] = x;
    }
    __syncthreads();

    // This split's keys: [k0, k_hi) (split_keys). len: below 2^31 - 4096
    // (the planner checks).
    int k0, k_hi;
    split_keys<C::BKV, BR>(a, prm, s.len_kv, rowlo, rowlim, split, &k0, &k_hi);
    int nt = k_hi > k0 ? (k_hi - k0 + C::BKV - 1) / C::BKV : 0;   // 0 below on a bad page

    // This lane's key in a warp tile, and the chunks of its row it moves.
    const int jj = lane / LPK, part = lane % LPK;
    const int sw = (jj * LPK) & 7;   // the row's chunk swizzle
    unsigned char *wring = ring + warp * C::STAGES * C::STAGE;
    const fattn_cuda_ragged &rg = a.rag;
    const bool paged = rg.on && rg.page_size;
    const int64_t k_head = hk * a.k_sh, v_head = hk * a.v_sh;

    // Warp tile t into stage t % STAGES: one cp.async group per call, empty
    // past the last tile, so that the group count stays in step.
    auto issue = [&](int t) {
        if (t < nt) {
            const int kj = k0 + t * C::BKV + warp * KW + jj;
            const bool valid = kj < k_hi;
            const int kc = valid ? kj : k_hi - 1;   // an address in range either way
            int64_t ko, vo;
            if (paged) {
                paged_rows<false>(a, b, kc, prm.page, PageWindow{}, k_head, v_head, &ko, &vo);
            } else {
                ko = s.kv_batch * a.k_sb + k_head + (s.kv_row0 + kc) * a.k_ss;
                vo = s.kv_batch * a.v_sb + v_head + (s.kv_row0 + kc) * a.v_ss;
            }
            const T *krow = static_cast<const T *>(a.k) + ko;
            const T *vrow = static_cast<const T *>(a.v) + vo;
            unsigned char *st = wring + (t % C::STAGES) * C::STAGE;
            unsigned char *kdst = st + jj * RB, *vdst = st + (KW + jj) * RB;
            // Chunk c of the row: n elements to read (the rest of the 16 bytes
            // zero), stored at chunk c ^ sw.
            if (prm.vec) {
#pragma unroll
                for (int ci = 0; ci < C::CPL; ci++) {
                    const int c = part + ci * LPK, d0 = c * CE, pc = (c ^ sw) * 16;
                    const int n = valid ? min(max(D - d0, 0), CE) : 0;
                    cp_async16_fill(kdst + pc, n ? krow + d0 : krow, n * ESZ);
                    cp_async16_fill(vdst + pc, n ? vrow + d0 : vrow, n * ESZ);
                }
            } else {
                // Unaligned rows: element loads, then one 16-byte store. Not
                // unrolled: the rare path must not cost the common one registers.
#pragma unroll 1
                for (int ci = 0; ci < C::CPL; ci++) {
                    const int c = part + ci * LPK, d0 = c * CE, pc = (c ^ sw) * 16;
                    const int n = valid ? min(max(D - d0, 0), CE) : 0;
                    *reinterpret_cast<uint4 *>(kdst + pc) = gather16<B>(krow, d0, n);
                    *reinterpret_cast<uint4 *>(vdst + pc) = gather16<B>(vrow, d0, n);
                }
            }
        }
        cp_async_commit();
    };

    // Per row: running max (base 2, every lane the same), this lane's share
    // of the sum, and its E elements of the accumulator.
    float m[BR], l[BR], acc[BR][E];
#pragma unroll
    for (int r = 0; r < BR; r++) {
        m[r] = -INFINITY, l[r] = 0.f;
#pragma unroll
        for (int e = 0; e < E; e++) acc[r][e] = 0.f;
    }
    float *wps = Ps + warp * KW * BR;
    [[maybe_unused]] const Rescore rs = kScore ? rescore_consts(a) : Rescore{0.f, 0.f};

#pragma unroll
    for (int t = 0; t < C::STAGES - 1; t++) issue(t);
    // The pages are vetted while the first tiles are in flight, as in
    // decode_mma_kernel (which says why).
    if (!ragged_pages_ok(a, b, k0, k_hi)) {   // every thread: it is a barrier
        cp_async_wait_all();                  // the ring is reused at the end
        k_hi = k0, nt = 0;
    }
    for (int t = 0; t < nt; t++) {
        // The stage this fills was read in iteration t - 1, which every lane
        // finished (the __syncwarp that ends it).
        issue(t + C::STAGES - 1);
        cp_async_wait<C::STAGES - 1>();   // this lane's copies of tile t landed
        __syncwarp();                     // and every lane's (V is read across lanes)
        const unsigned char *st = wring + (t % C::STAGES) * C::STAGE;
        const int kj = k0 + t * C::BKV + warp * KW + jj;

        // Scores of this lane's key over its chunks, then summed over the
        // key's LPK lanes.
        float sc[BR];
#pragma unroll
        for (int r = 0; r < BR; r++) sc[r] = 0.f;
        const uint4 *krow = reinterpret_cast<const uint4 *>(st + jj * RB);
#pragma unroll
        for (int ci = 0; ci < C::CPL; ci++) {
            const int c = part + ci * LPK;
            const uint4 raw = krow[c ^ sw];
            float kf[CE];
            unpack<T, 4>(reinterpret_cast<const uint32_t *>(&raw), kf);
#pragma unroll
            for (int r = 0; r < BR; r++) {
#pragma unroll
                for (int hq = 0; hq < QH; hq++) {
                    const float4 q = Qs[(r * QH + hq) * CH + c];
                    float x = sc[r];
                    x = fmaf(q.x, kf[4 * hq], x);
                    x = fmaf(q.y, kf[4 * hq + 1], x);
                    x = fmaf(q.z, kf[4 * hq + 2], x);
                    x = fmaf(q.w, kf[4 * hq + 3], x);
                    sc[r] = x;
                }
            }
        }

        const bool in_range = kj < k_hi;
#pragma unroll
        for (int r = 0; r < BR; r++) {
#pragma unroll
            for (int off = 1; off < LPK; off <<= 1)
                sc[r] += __shfl_xor_sync(0xffffffffu, sc[r], off);
            if constexpr (kScore) {
                // The key's LPK lanes rescore it alike (their bias loads
                // coincide), so every lane holds the score, as below.
                if (in_range && kj < rowlim[r] && kj >= rowlo[r])
                    sc[r] = dec_score(a, rs, sc[r], rowsl[r], rowdg[r] - kj,
                                      rowbb[r] + kj * a.var.bias_sd);
                else
                    sc[r] = -INFINITY;
            } else {
                if (!in_range || kj >= rowlim[r] || kj < rowlo[r]) sc[r] = -INFINITY;
            }
            float mx = sc[r];
#pragma unroll
            for (int off = LPK; off < 32; off <<= 1)
                mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, off));
            // While a row has seen no key, m stays -inf and its exponents are
            // taken against 0: masked scores weigh 0, not NaN. A NaN score
            // (fmaxf drops it from m) or a +inf one makes the row NaN.
            const float m_new = fmaxf(m[r], mx);
            const float m_use = m_new == -INFINITY ? 0.f : m_new;
            const float alpha = ex2(m[r] - m_use);
            const float p = ex2(sc[r] - m_use);
            m[r] = m_new;
            // One lane per (key, row) counts p and publishes it.
            const bool mine = (r % LPK) == part;
            l[r] = fmaf(l[r], alpha, mine ? p : 0.f);
            if (mine) wps[jj * BR + r] = p;
#pragma unroll
            for (int e = 0; e < E; e++) acc[r][e] *= alpha;
        }
        __syncwarp();   // P is written

        // O += P V over the warp tile's keys; V row j's chunks are swizzled
        // by (j * LPK) & 7.
        const unsigned char *vt = st + KW * RB;
#pragma unroll
        for (int j = 0; j < KW; j++) {
            float pr[BR];
#pragma unroll
            for (int r4 = 0; r4 < BR / 4; r4++) {
                const float4 x = *reinterpret_cast<const float4 *>(wps + j * BR + 4 * r4);
                pr[4 * r4] = x.x, pr[4 * r4 + 1] = x.y, pr[4 * r4 + 2] = x.z, pr[4 * r4 + 3] = x.w;
            }
            const int swj = (j * LPK) & 7;
#pragma unroll
            for (int u = 0; u < NU; u++) {
                const int byte = (u * 32 + lane) * C::UB;
                const unsigned char *src = vt + j * RB + (((byte >> 4) ^ swj) << 4) + (byte & 15);
                uint32_t w[C::UB / 4];
                if constexpr (C::UB == 16) {
                    const uint4 x = *reinterpret_cast<const uint4 *>(src);
                    w[0] = x.x, w[1] = x.y, w[2] = x.z, w[3] = x.w;
                } else if constexpr (C::UB == 8) {
                    const uint2 x = *reinterpret_cast<const uint2 *>(src);
                    w[0] = x.x, w[1] = x.y;
                } else {
                    w[0] = *reinterpret_cast<const uint32_t *>(src);
                }
                float vf[UE];
                unpack<T, C::UB / 4>(w, vf);
#pragma unroll
                for (int r = 0; r < BR; r++)
#pragma unroll
                    for (int e = 0; e < UE; e++)
                        acc[r][u * UE + e] = fmaf(pr[r], vf[e], acc[r][u * UE + e]);
            }
        }
        __syncwarp();   // the stage and P are read before they are written again
    }

    // Merge the warps: each publishes its rows' max and sum, the block finds
    // the rows' max M and each warp's factor exp2(m_w - M) (0 for a warp
    // that saw no key: its accumulator is 0, or NaN, which stays), and
    // L = sum of l_w times the factor.
#pragma unroll
    for (int r = 0; r < BR; r++) {
        float x = l[r];
#pragma unroll
        for (int off = 1; off < 32; off <<= 1) x += __shfl_xor_sync(0xffffffffu, x, off);
        if (lane == 0) wm[warp * BR + r] = m[r], wl[warp * BR + r] = x;
    }
    merge_warps<W, BR>(wm, wl, wf, rowM, rowL, tid);
    float *Ow = reinterpret_cast<float *>(ring);   // [W][BR][DPAD], over the rings
#pragma unroll
    for (int r = 0; r < BR; r++) {
        const float f = wf[warp * BR + r];
#pragma unroll
        for (int u = 0; u < NU; u++)
#pragma unroll
            for (int e = 0; e < UE; e++)
                Ow[(warp * BR + r) * DPAD + (u * 32 + lane) * UE + e] = acc[r][u * UE + e] * f;
    }
    __syncthreads();

    // O = sum over the warps / L (0 where L = 0: no key; NaN stays NaN).
    write_rows<T, W, NT, DPAD, BR>(a, prm, s, Ow, rowL, rowM, tid, r0, R, Sq, D, hk, group, split, b);
}

}   // namespace

// ---- The tensor-core path (f16, bf16) ----
// The CUDA-core kernel above spends ~450 warp instructions on each 8-key
// (4 KiB) warp tile of bf16 d128: the Q loads from shared memory, the
// conversions, the FMAs and the shuffle sums scale with rows * keys * dims,
// so the 16-bit types, at half the bytes per key of f32, were issue-bound
// (56% of HBM at b1 128k, against f32's 80%). This kernel does the same work
// with mma.sync m16n8k16 (f32 accumulate), as FlashInfer does for GQA
// decoding: the BR packed rows are the M = 16 rows of the A operand (rows
// past BR are zeros: free in a memory-bound kernel), so a warp tile of 16
// keys costs 2 * DPAD/16 mma for Q.K^T and DPAD/8 for P.V, one ldmatrix per
// 512 bytes of K or V, and a softmax over 4 scores per lane with a 2-step
// quad shuffle, about 190 warp instructions per 8 KiB at d128.
// - Q: unscaled, in the storage type, as A fragments in registers (exact:
//   it is the input); the scores are scaled by scale * log2 e in float32.
// - Warp tiles of KW = 16 keys, streamed through each warp's own ring as
//   before (cp.async, 2 lanes per key, zero-filled past the head dim and
//   past the key range); chunk c of key j sits at chunk c ^ (j & 7), so the
//   8 rows of an ldmatrix matrix fall in 8 distinct 16-byte bank groups.
// - P is rounded to the storage type for P.V (as in FlashAttention-2); the
//   row sums use the float32 p.
// Prologue, merge of the warps and output are the CUDA-core kernel's.
#ifndef FATTN_DECODE_MMA_RING
#define FATTN_DECODE_MMA_RING 98304   // bytes of rings per block: d128 gets 3 stages, 2 blocks/SM
#endif
// Blocks per SM the register allocation must allow (__launch_bounds__'s
// second argument): 1 leaves ptxas free; sweeps try 3 with a smaller ring.
#ifndef FATTN_DECODE_MMA_MINB
#define FATTN_DECODE_MMA_MINB 1
#endif

namespace fattn_decode_shapes {

template <int DPAD, int BR> struct MShape {
    static constexpr int W = FATTN_DECODE_WARPS, NT = 32 * W;
    static constexpr int KW = 16;              // keys per warp tile: one k-step of P.V
    static constexpr int RB = DPAD * 2;        // bytes of a K or V row
    static constexpr int CH = RB / 16;         // its 16-byte chunks
    static constexpr int KS = DPAD / 16;       // k-steps of Q.K^T
    static constexpr int NV = DPAD / 8;        // n-tiles of P.V (8 dims each)
    static constexpr int MH = BR > 8 ? 2 : 1;  // row halves of the M = 16 tile in use
    static constexpr int STAGE = 2 * KW * RB;  // one warp tile: K rows, then V rows
    static constexpr int STAGES = clampi(FATTN_DECODE_MMA_RING / (W * STAGE), 2, FATTN_DECODE_STAGES);
    static constexpr int BKV = W * KW;         // keys per block tile
    static constexpr int RING = W * STAGES * STAGE;
    static constexpr int STATS = (3 * W * BR + 4 * BR) * 4;
    static constexpr int PAGES = 2 * kPageCap * 8;   // the split's staged pages (PageWindow)
    static constexpr int SMEM = RING + STATS + PAGES;
    static_assert(STATS % 8 == 0, "the staged pages are 8-byte aligned");
    static_assert(CH >= 8 && CH % 8 == 0, "the swizzle spans 8 chunks");
    static_assert(BR % 4 == 0 && BR <= 16, "one M = 16 tile of rows");
    static_assert(W * BR * DPAD * 4 <= RING, "the merge does not fit in the rings");
    static_assert(STAGES >= 2, "a ring needs two stages");
};

}   // namespace fattn_decode_shapes

namespace {

using fattn_decode_shapes::MShape;

// kScore: as decode_kernel's; each lane keeps its rows' slopes, diagonals
// and bias rows in registers.
template <typename T, int DPAD, int BR, bool kScore>
__global__ void __launch_bounds__(MShape<DPAD, BR>::NT, FATTN_DECODE_MMA_MINB)
    decode_mma_kernel(fattn_cuda_args a, Params prm) {
#if __CUDA_ARCH__ >= 800
    using C = MShape<DPAD, BR>;
    constexpr int W = C::W, NT = C::NT, KW = C::KW, RB = C::RB, KS = C::KS;
    constexpr int NV = C::NV, MH = C::MH, ESZ = 2, CE = 8;
    extern __shared__ __align__(16) unsigned char smem[];
    unsigned char *ring = smem;
    float *wm = reinterpret_cast<float *>(smem + C::RING), *wl = wm + W * BR, *wf = wl + W * BR;
    float *rowL = wf + W * BR, *rowM = rowL + BR;
    int *rowlim = reinterpret_cast<int *>(rowM + BR), *rowlo = rowlim + BR;

    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int split = blockIdx.y;
    const unsigned unit = blockIdx.x;   // (b * heads_kv + hk) * row_tiles + rt, below 2^31
    const int rt = (int)(unit % (unsigned)prm.row_tiles);
    const unsigned bhk = unit / (unsigned)prm.row_tiles;
    const int64_t hk = bhk % (unsigned)prm.heads_kv, b = bhk / (unsigned)prm.heads_kv;
    const int Sq = a.seq_q, D = a.head_dim, group = (int)a.group;
    const int R = group * Sq, r0 = rt * BR;
    const Seq s = ragged_seq(a, b);

    if (tid < BR) {
        const int rr = r0 + tid, i = rr % Sq;
        int lo = 0, hi = 0;
        if (rr < R && i < s.len_q) row_keys(a, s, i, &lo, &hi);
        rowlo[tid] = lo, rowlim[tid] = hi;
    }
    // Q as A fragments: this lane's rows qr and qr + 8 of the tile, dims
    // 16 ks + qc, +1 (registers 0, 1) and 16 ks + 8 + qc, +1 (2, 3); zeros
    // past the head dim and on rows that are not the tile's or the sequence's.
    const int qr = lane >> 2, qc = (lane & 3) * 2;
    uint32_t qa[KS][4];
#pragma unroll
    for (int h = 0; h < 2; h++) {
        const int r = qr + 8 * h, rr = r0 + r, g = rr / Sq, i = rr - g * Sq;
        const bool ok = r < BR && rr < R && i < s.len_q;
        const uint16_t *q = ok ? static_cast<const uint16_t *>(a.q) + s.q_batch * a.q_sb +
                                     (hk * group + g) * a.q_sh + (s.q_row0 + i) * a.q_ss
                               : nullptr;
#pragma unroll
        for (int ks = 0; ks < KS; ks++) {
#pragma unroll
            for (int half = 0; half < 2; half++) {
                const int d = ks * 16 + half * 8 + qc;
                uint32_t w = 0;
                if (ok) {
                    const uint32_t lo = d < D ? q[d] : 0u, hi = d + 1 < D ? q[d + 1] : 0u;
                    w = lo | hi << 16;
                }
                qa[ks][2 * half + h] = w;
            }
        }
    }
    __syncthreads();

    // This split's keys: [k0, k_hi) (split_keys).
    int k0, k_hi;
    split_keys<C::BKV, BR>(a, prm, s.len_kv, rowlo, rowlim, split, &k0, &k_hi);
    int nt = k_hi > k0 ? (k_hi - k0 + C::BKV - 1) / C::BKV : 0;   // 0 below on a bad page
    // kScore: this lane's rows' bias element at key 0, slope (log2 units)
    // and diagonal i + len_kv - len_q.
    [[maybe_unused]] int64_t vbb[MH];
    [[maybe_unused]] float vsl[MH];
    [[maybe_unused]] int vdg[MH];
    [[maybe_unused]] Rescore rs{0.f, 0.f};
    if constexpr (kScore) {
        rs = rescore_consts(a);
#pragma unroll
        for (int h = 0; h < MH; h++) {
            const int rr = r0 + qr + 8 * h, g = rr / Sq, i = rr - g * Sq;
            const bool ok = qr + 8 * h < BR && rr < R && i < s.len_q;
            vbb[h] = ok ? var_bias_row(a, b, hk * group + g, i) : 0;
            vsl[h] = ok ? var_slope(a, b, hk * group + g) * kLog2e : 0.f;
            vdg[h] = i + (s.len_kv - s.len_q);
        }
    }

    // Loads. Lane jj (and jj + 16) finds the rows of key jj of the warp
    // tile; the copies then go row by row: LPR lanes take the consecutive
    // 16-byte chunks of one row and RPI rows go per instruction, so each
    // instruction reads whole 128-byte lines (with one lane pair per key, as
    // before, an instruction touched 16 lines and kept the L1TEX pipe busy),
    // and each lane gets its row's offsets from the finder by shuffle.
    constexpr int LPR = C::CH < 32 ? C::CH : 32, RPI = 32 / LPR;
    const int jj = lane & (KW - 1), lc = lane % LPR, lr = lane / LPR;
    unsigned char *wring = ring + warp * C::STAGES * C::STAGE;
    const fattn_cuda_ragged &rg = a.rag;
    const bool paged = rg.on && rg.page_size;
    const int64_t k_head = hk * a.k_sh, v_head = hk * a.v_sh;

    // The split's pages, once staged (after the first tiles are issued).
    PageWindow pw{reinterpret_cast<int64_t *>(smem + C::RING + C::STATS), nullptr, 0, false};
    pw.v = pw.k + kPageCap;

    // Warp tile t into stage t % STAGES (kStaged: its pages from pw).
    auto issue = [&](int t, auto staged) {
        if (t < nt) {
            const int kbase = k0 + t * C::BKV + warp * KW;
            const int kc = min(kbase + jj, k_hi - 1);   // an address in range either way
            int64_t ko, vo;
            constexpr bool kStaged = decltype(staged)::value;   // implies paged
            if (kStaged || paged) {
                paged_rows<kStaged>(a, b, kc, prm.page, pw, k_head, v_head, &ko, &vo);
            } else {
                ko = s.kv_batch * a.k_sb + k_head + (s.kv_row0 + kc) * a.k_ss;
                vo = s.kv_batch * a.v_sb + v_head + (s.kv_row0 + kc) * a.v_ss;
            }
            unsigned char *st = wring + (t % C::STAGES) * C::STAGE;
            const int d0 = lc * CE;
#pragma unroll
            for (int i = 0; i < KW / RPI; i++) {
                const int key = i * RPI + lr;
                const T *krow =
                    static_cast<const T *>(a.k) + __shfl_sync(0xffffffffu, (long long)ko, key);
                const T *vrow =
                    static_cast<const T *>(a.v) + __shfl_sync(0xffffffffu, (long long)vo, key);
                const int n = kbase + key < k_hi ? min(max(D - d0, 0), CE) : 0;
                const int pc = (lc ^ (key & 7)) * 16;
                unsigned char *kdst = st + key * RB + pc, *vdst = st + (KW + key) * RB + pc;
                if (prm.vec) {
                    cp_async16_fill(kdst, n ? krow + d0 : krow, n * ESZ);
                    cp_async16_fill(vdst, n ? vrow + d0 : vrow, n * ESZ);
                } else {
                    *reinterpret_cast<uint4 *>(kdst) = gather16<uint16_t>(krow, d0, n);
                    *reinterpret_cast<uint4 *>(vdst) = gather16<uint16_t>(vrow, d0, n);
                }
            }
        }
        cp_async_commit();
    };

    // ldmatrix rows. K (B of Q.K^T): matrices (keys 0-7, chunk 2ks),
    // (0-7, 2ks+1), (8-15, 2ks), (8-15, 2ks+1). V (B of P.V, transposed):
    // (keys 0-7, chunk 2v), (8-15, 2v), (0-7, 2v+1), (8-15, 2v+1).
    const int kk = (lane & 7) + ((lane >> 4) << 3), kh = (lane >> 3) & 1;
    const int kv = (lane & 7) + (((lane >> 3) & 1) << 3), vh = lane >> 4;

    // Per row half: running max (base 2, the quad's lanes the same), this
    // lane's share of the sum; O as C fragments (row qr + 8h: registers
    // 2h, 2h+1 at dims 8n + qc, +1).
    float m[MH], l[MH], o[NV][4];
#pragma unroll
    for (int h = 0; h < MH; h++) m[h] = -INFINITY, l[h] = 0.f;
#pragma unroll
    for (int n = 0; n < NV; n++) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.f;
    const float sl2 = a.scale_log2;

#pragma unroll
    for (int t = 0; t < C::STAGES - 1; t++) issue(t, std::false_type{});
    // The split's pages are vetted (and staged) while its first tiles are in
    // flight (issue clamps each page into range, so those copies stay in
    // the caller's buffers whatever the table holds): a round of table reads
    // less before the first copy. A bad page leaves the block no keys.
    if (!ragged_pages_stage(a, b, k0, k_hi, k_head, v_head, &pw)) {   // a barrier
        cp_async_wait_all();   // the ring is reused at the end
        k_hi = k0, nt = 0;
    }
    // The keys this lane's rows see (0 for rows past the tile).
    int lim[MH], klo[MH];
#pragma unroll
    for (int h = 0; h < MH; h++) {
        lim[h] = qr + 8 * h < BR ? min(rowlim[qr + 8 * h], k_hi) : 0;
        klo[h] = qr + 8 * h < BR ? rowlo[qr + 8 * h] : 0;
    }
    // The key loop, once per way of finding rows (kStaged: the split's pages
    // in pw), so that the dense loop stays as it was: a branch between the
    // two issue paths in one loop made the dense b1 decode 3-7% slower at
    // d64 (call89).
    auto tiles = [&](auto staged) {
        for (int t = 0; t < nt; t++) {
            issue(t + C::STAGES - 1, staged);
            cp_async_wait<C::STAGES - 1>();
            __syncwarp();
            const unsigned char *st = wring + (t % C::STAGES) * C::STAGE;

            // S = Q K^T: two n-tiles of 8 keys; sc[n][2h + e] is row qr + 8h,
            // key 8n + qc + e.
            float sc[2][4];
#pragma unroll
            for (int n = 0; n < 2; n++) sc[n][0] = sc[n][1] = sc[n][2] = sc[n][3] = 0.f;
#pragma unroll
            for (int ks = 0; ks < KS; ks++) {
                uint32_t kb[4];
                ldsm_x4(kb, st + kk * RB + (((2 * ks + kh) ^ (kk & 7)) << 4));
                mma16816<T>(sc[0], qa[ks], kb[0], kb[1]);
                mma16816<T>(sc[1], qa[ks], kb[2], kb[3]);
            }

            // Online softmax per row; P as the A fragment of P.V.
            const int kb0 = k0 + t * C::BKV + warp * KW + qc;
            uint32_t pa[4] = {0u, 0u, 0u, 0u};
#pragma unroll
            for (int h = 0; h < MH; h++) {
                float x[4];
#pragma unroll
                for (int n = 0; n < 2; n++)
#pragma unroll
                    for (int e = 0; e < 2; e++) {
                        const int kj = kb0 + 8 * n + e;
                        if constexpr (kScore) {
                            float y = -INFINITY;
                            if (kj < lim[h] && kj >= klo[h])
                                y = dec_score(a, rs, sc[n][2 * h + e] * sl2, vsl[h], vdg[h] - kj,
                                              vbb[h] + kj * a.var.bias_sd);
                            x[2 * n + e] = y;
                        } else {
                            x[2 * n + e] =
                                kj < lim[h] && kj >= klo[h] ? sc[n][2 * h + e] * sl2 : -INFINITY;
                        }
                    }
                float mx = fmaxf(fmaxf(x[0], x[1]), fmaxf(x[2], x[3]));
                mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
                mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
                // As in the CUDA-core kernel: while a row has seen no key, m
                // stays -inf and exponents are taken against 0.
                const float m_new = fmaxf(m[h], mx);
                const float m_use = m_new == -INFINITY ? 0.f : m_new;
                const float alpha = ex2(m[h] - m_use);
                m[h] = m_new;
                float p[4];
#pragma unroll
                for (int k = 0; k < 4; k++) p[k] = ex2(x[k] - m_use);
                l[h] = fmaf(l[h], alpha, (p[0] + p[1]) + (p[2] + p[3]));
                pa[h] = pack2<T>(p[0], p[1]);
                pa[2 + h] = pack2<T>(p[2], p[3]);
#pragma unroll
                for (int n = 0; n < NV; n++) o[n][2 * h] *= alpha, o[n][2 * h + 1] *= alpha;
            }

            // O += P V.
            const unsigned char *vt = st + KW * RB;
#pragma unroll
            for (int v = 0; v < NV / 2; v++) {
                uint32_t vb[4];
                ldsm_x4_t(vb, vt + kv * RB + (((2 * v + vh) ^ (kv & 7)) << 4));
                mma16816<T>(o[2 * v], pa, vb[0], vb[1]);
                mma16816<T>(o[2 * v + 1], pa, vb[2], vb[3]);
            }
            __syncwarp();   // the stage is read before it is written again
        }
    };
    if (pw.on)
        tiles(std::true_type{});
    else   // dense, varlen, or more pages than are staged
        tiles(std::false_type{});

        // Merge the warps, as in the CUDA-core kernel.
#pragma unroll
    for (int h = 0; h < MH; h++) {
        float x = l[h];
        x += __shfl_xor_sync(0xffffffffu, x, 1);
        x += __shfl_xor_sync(0xffffffffu, x, 2);
        const int r = qr + 8 * h;
        if ((lane & 3) == 0 && r < BR) wm[warp * BR + r] = m[h], wl[warp * BR + r] = x;
    }
    merge_warps<W, BR>(wm, wl, wf, rowM, rowL, tid);
    float *Ow = reinterpret_cast<float *>(ring);   // [W][BR][DPAD], over the rings
#pragma unroll
    for (int h = 0; h < MH; h++) {
        const int r = qr + 8 * h;
        if (r < BR) {
            const float f = wf[warp * BR + r];
#pragma unroll
            for (int n = 0; n < NV; n++) {
                float2 x = make_float2(o[n][2 * h] * f, o[n][2 * h + 1] * f);
                *reinterpret_cast<float2 *>(Ow + (warp * BR + r) * DPAD + 8 * n + qc) = x;
            }
        }
    }
    __syncthreads();

    write_rows<T, W, NT, DPAD, BR>(a, prm, s, Ow, rowL, rowM, tid, r0, R, Sq, D, hk, group, split, b);
#endif
}

// The instance for (T, DPAD, BR, kScore): the tensor-core kernel for the
// 16-bit types, the CUDA-core one for f32; its shared memory and block tile.
template <typename T, int DPAD, int BR, bool kScore> struct Inst {
    static constexpr bool kMma = sizeof(T) == 2;
    using S = Shape<sizeof(T), DPAD, BR>;
    using M = MShape<DPAD, BR>;
    static constexpr int SMEM = kMma ? M::SMEM : S::SMEM + (kScore ? BR * kRowVarBytes : 0);
    static constexpr int BKV = kMma ? M::BKV : S::BKV;
    static auto kernel() {
        if constexpr (kMma)
            return decode_mma_kernel<T, DPAD, BR, kScore>;
        else
            return decode_kernel<T, DPAD, BR, kScore>;
    }
};

// Buckets built (FATTN_CUDA_HEAD_DIMS): the decode kernel's 64 serves the
// 32 bucket too (a warp splits at least 64 dims: 2 per lane).
constexpr bool kBuilt64 = FATTN_CUDA_DPAD_32 || FATTN_CUDA_DPAD_64;
constexpr bool kBuilt128 = FATTN_CUDA_DPAD_128;
constexpr bool kBuilt256 = FATTN_CUDA_DPAD_256;

// K and V rows can be copied in 16-byte pieces: both bases and every stride
// the kernel uses are multiples of 16 bytes (the head dim need not be: the
// copies zero-fill past it).
bool vec_rows(const fattn_cuda_args *a) {
    const int64_t es = a->dtype == FATTN_F32 ? 4 : 2;
    // With packed keys (cu_seqlens_kv) the batch index is 0: its stride is never used.
    const bool batch_used = !(a->rag.on && a->rag.cu_kv);
    const int64_t strides[] = {
        a->k_sh, a->k_ss, a->v_sh, a->v_ss, batch_used ? a->k_sb : 0, batch_used ? a->v_sb : 0};
    for (int64_t st : strides)
        if (st * es % 16 != 0) return false;
    return (uintptr_t)a->k % 16 == 0 && (uintptr_t)a->v % 16 == 0;
}

// The kernel's attributes, before a launch or an occupancy query: its
// dynamic shared memory (above 48 KiB a block must opt in), and all of the
// SM's unified L1/shared storage as shared memory, so that as many blocks
// fit as the registers allow (the copies bypass L1: cp.async.cg).
template <typename K> cudaError_t set_attributes(K kernel, int smem) {
    cudaError_t err =
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    if (err == cudaSuccess)
        err = cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                                   cudaSharedmemCarveoutMaxShared);
    return err;
}

// One launch of an instance (with_instance's kernel and shared memory).
using Kernel = void (*)(fattn_cuda_args, Params);
cudaError_t launch(Kernel kernel, int smem, const fattn_cuda_args *a,
                   const fattn_cuda_decode_args *d, cudaStream_t stream) {
    cudaError_t err = set_attributes(kernel, smem);
    if (err != cudaSuccess) return err;
    const int64_t heads_kv = a->heads_q / a->group;
    const int64_t units = a->batch * heads_kv * d->row_tiles;   // the planner keeps it below 2^31
    Params prm;
    prm.splits = d->splits;
    prm.row_tiles = d->row_tiles;
    prm.heads_kv = (int)heads_kv;
    prm.vec = vec_rows(a);
    prm.page = make_divisor32(a->rag.on && a->rag.page_size ? (uint32_t)a->rag.page_size : 1u);
    prm.ws_o = d->ws_o;
    prm.ws_lse = d->ws_lse;
    const dim3 grid((unsigned)units, (unsigned)d->splits);
    kernel<<<grid, 32 * FATTN_DECODE_WARPS, smem, stream>>>(*a, prm);
    return cudaGetLastError();
}

// The instance for (dtype, dpad, br, score), handed to f as a kernel
// pointer, its shared memory and block tile; false when it was not built.
template <typename T, int DPAD, bool kScore, typename F> bool with_rows(int br, F f) {
    using I4 = Inst<T, DPAD, 4, kScore>;
    using I8 = Inst<T, DPAD, 8, kScore>;
    if (br == 4) return f(I4::kernel(), I4::SMEM, I4::BKV);
    if (br == 8) return f(I8::kernel(), I8::SMEM, I8::BKV);
    if constexpr (DPAD <= 128) {
        using I16 = Inst<T, DPAD, 16, kScore>;
        if (br == 16) return f(I16::kernel(), I16::SMEM, I16::BKV);
    }
    return false;
}
template <typename T, int DPAD, typename F> bool with_score(int br, bool score, F f) {
    return score ? with_rows<T, DPAD, true>(br, f) : with_rows<T, DPAD, false>(br, f);
}
template <typename T, typename F> bool with_dpad(int dpad, int br, bool score, F f) {
    if constexpr (kBuilt64)
        if (dpad == 64) return with_score<T, 64>(br, score, f);
    if constexpr (kBuilt128)
        if (dpad == 128) return with_score<T, 128>(br, score, f);
    if constexpr (kBuilt256)
        if (dpad == 256) return with_score<T, 256>(br, score, f);
    return false;
}
template <typename F> bool with_instance(fattn_dtype dt, int dpad, int br, bool score, F f) {
    if (dt == FATTN_F32) return with_dpad<float>(dpad, br, score, f);
    if (dt == FATTN_F16) return with_dpad<__half>(dpad, br, score, f);
    if (dt == FATTN_BF16) return with_dpad<__nv_bfloat16>(dpad, br, score, f);
    return false;
}

}   // namespace

extern "C" int fattn_cuda_decode_dpad(int64_t head_dim) {
    if (head_dim < 1) return 0;
    if (head_dim <= 64 && kBuilt64) return 64;
    if (head_dim <= 128 && kBuilt128) return 128;
    if (head_dim <= 256 && kBuilt256) return 256;
    return 0;
}

extern "C" void fattn_cuda_decode_shape(fattn_dtype dtype, int dpad, int br, int rescore,
                                        int *block_kv, int *smem_bytes) {
    *block_kv = *smem_bytes = 0;
    with_instance(dtype, dpad, br, rescore != 0, [&](auto, int smem, int bkv) {
        *block_kv = bkv, *smem_bytes = smem;
        return true;
    });
}

extern "C" cudaError_t fattn_cuda_decode_occupancy(fattn_dtype dtype, int dpad, int br, int rescore,
                                                   int *blocks_per_sm) {
    cudaError_t err = cudaErrorInvalidValue;
    *blocks_per_sm = 0;
    with_instance(dtype, dpad, br, rescore != 0, [&](auto kernel, int smem, int) {
        // The attributes first: without them a block of more than 48 KiB counts as not fitting.
        err = set_attributes(kernel, smem);
        if (err == cudaSuccess)
            err = cudaOccupancyMaxActiveBlocksPerMultiprocessor(blocks_per_sm, kernel,
                                                                32 * FATTN_DECODE_WARPS, smem);
        return true;
    });
    return err;
}

extern "C" cudaError_t fattn_cuda_decode(const fattn_cuda_args *a, const fattn_cuda_decode_args *d,
                                         cudaStream_t stream) {
    if (a->batch <= 0 || a->heads_q <= 0 || a->seq_q <= 0) return cudaSuccess;
    if (d->splits < 1 || d->row_tiles < 1 || a->group < 1 || a->head_dim < 1 ||
        a->head_dim > d->dpad || (d->splits > 1 && (!d->ws_o || !d->ws_lse)))
        return cudaErrorInvalidValue;
    // The rescoring instance reads var (and needs var.on); the plain one
    // reads it only for the window and the sinks.
    if (d->rescore && !a->var.on) return cudaErrorInvalidValue;
    cudaError_t err = cudaErrorInvalidValue;
    with_instance(a->dtype, d->dpad, d->br, d->rescore != 0, [&](auto kernel, int smem, int) {
        err = launch(kernel, smem, a, d, stream);
        return true;
    });
    return err;
}

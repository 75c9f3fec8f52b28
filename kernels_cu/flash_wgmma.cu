// The Hopper kernel (issue 15): FlashAttention-3's design on wgmma
// (sm_90a), f16 and bf16, dense batches, with the variants that act on a
// score in registers: the window, softcap or ALiBi, sinks (WgVar below; the
// planner routes the bias, softcap with ALiBi, head_dim_v and ragged
// batches to flash_mma.cuh).
//
// Design (v3; bench/NOTES.md has each version's numbers):
// - A block is a producer warpgroup and NWG consumer warpgroups of 64
//   query rows each (wgmma's M): BM = 64 NWG rows, three consumers at head
//   dim 64 and two above. The producer brings Q and the K/V tiles (BN =
//   128 keys; 80 at head dim 256) into shared memory and gives most of its
//   registers to the consumers (setmaxnreg).
// - Loads: the tensor copy engine (TMA), one thread issuing a 64-column box
//   per 128-byte column block, completing on an mbarrier with the tile's
//   byte count; an operand whose rows do not start on 16 bytes (or that a
//   tensor map cannot describe) is gathered by the producer's 128 threads
//   with element loads instead, fenced to the async proxy, then arrived.
//   Each of the STAGES stages has a full and an empty barrier for K and for
//   V; the consumers release a stage once their wgmma that read it is done.
// - Shared layout: each tile is DPAD / 64 column blocks of [rows][64]
//   elements (128-byte rows) with the 128-byte swizzle (16-byte chunk c of
//   row r at chunk c ^ (r % 8)), which is TMA's SWIZZLE_128B and the
//   canonical layout wgmma reads: K-major for Q and K, MN-major (B
//   transposed) for V.
// - The consumers take turns (a named barrier each, FlashAttention-3's
//   ping-pong, in a ring): one issues its GEMMs while the others run their
//   softmax.
//   Where WgShape::OVERLAP (head dims 128 and 256), a consumer also issues
//   Q K^T of tile j with P V of tile j - 1 and runs tile j's softmax while
//   that P V runs.
// - Without a causal mask or a window the grid is persistent: a block per
//   SM walks the work tiles (query tile x batch x head), the stage ring
//   runs on across them, and a Q-empty barrier lets the next tile's Q load
//   while the consumers finish this one. Causal tiles differ in cost: plain
//   causal problems
//   with few query tiles at head dims 128 and 256 take a paired walk
//   (units of query tiles m and tiles_q - 1 - m of one pair, which together
//   cost about the same in every unit; the launcher says where); other
//   causal and windowed problems get a block per tile, heaviest first
//   across sections of pairs that fit the L2 (tile_at).
// - At head dim 64 (192-row blocks) a consumer computes only the key tiles
//   its own 64 rows see and passes through the block's others as ghosts.
// - Variants: key tiles outside a block's window are never loaded; a
//   consumer masks per element only the tiles that cut one of its rows'
//   key ranges; softcap and ALiBi rescore every score in log2 units before
//   the softmax; a sink joins each row's denominator in the epilogue.
// - S = Q K^T: DPAD / 16 wgmma m64nBNk16 from shared memory; the online
//   softmax on the accumulators (a row's BN values spread over a lane quad),
//   whose running max moves only when a tile's passes it by more than 8 in
//   log2 units (head dims 64 and 256, no ALiBi), so a warp rarely rescales
//   O; P (terms up to 2^8) rounded to the storage type as wgmma's register
//   A operand; O += P V: BN / 16 wgmma m64nDPADk16.
#include <cuda.h>   // CUtensorMap; the encoder is reached through the runtime
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <limits.h>
#include <string.h>

#include <type_traits>

#include "params.h"
#include "device_util.cuh"
#include "hopper_async.cuh"
#include "mma_sm80.cuh"
#include "variants.cuh"
#include "wgmma_sm90.cuh"

// FATTN_WGMMA_OVERLAP: 1 or 0 overrides each bucket's choice (WgShape::OVERLAP);
// FATTN_WGMMA_NWG64: the consumer warpgroups at head dim 64; FATTN_WGMMA_BN256:
// the key tile at head dim 256 (64 or 80); FATTN_WGMMA_PERSISTENT 0: a block
// per work tile instead of one per SM; FATTN_WGMMA_PAIRED 0: no paired walk
// for causal problems (a block per tile, as elsewhere); FATTN_WGMMA_GHOSTS
// 0: at head dim 64 every consumer computes every key tile of its block;
// FATTN_WGMMA_LPT 0: a block per tile walks a pair's tiles in a row;
// FATTN_WGMMA_RING64 0: no consumer turns at head dim 64 (1-4% slower, call137);
// FATTN_WGMMA_CAP_POLY 0: the accurate softcap always through ex2 and rcp;
// 3 or 4: its polynomials of at least that many terms only (default 2: all);
// FATTN_WGMMA_STALE 0: every tile rescales O (else a row's max may lag the
// true one by up to this many log2 units before it moves).
// For measuring one choice against another.
#ifndef FATTN_WGMMA_OVERLAP
#define FATTN_WGMMA_OVERLAP -1
#endif
#ifndef FATTN_WGMMA_NWG64
#define FATTN_WGMMA_NWG64 3
#endif
#ifndef FATTN_WGMMA_BN256
#define FATTN_WGMMA_BN256 80
#endif
#ifndef FATTN_WGMMA_PAIRED
#define FATTN_WGMMA_PAIRED 1
#endif
#ifndef FATTN_WGMMA_GHOSTS
#define FATTN_WGMMA_GHOSTS 1
#endif
#ifndef FATTN_WGMMA_RING64
#define FATTN_WGMMA_RING64 1
#endif
#ifndef FATTN_WGMMA_LPT
#define FATTN_WGMMA_LPT 1
#endif
#ifndef FATTN_WGMMA_CAP_POLY
#define FATTN_WGMMA_CAP_POLY 2
#endif
#ifndef FATTN_WGMMA_STALE
#define FATTN_WGMMA_STALE 8.f
#endif
#ifndef FATTN_WGMMA_PERSISTENT
#define FATTN_WGMMA_PERSISTENT 1
#endif

namespace fattn_wgmma_shapes {
// kB: the shape of the instances that read a bias tile per stage (kWgAll):
// two stages everywhere, and 64-key tiles at head dim 256, so that Q, two
// stages of K, V and the bias fit 224 KiB (the bias tile is BM x BN
// 16-bit elements: 48 KiB at head dim 64, 32 KiB at 128, 16 KiB at 256).
template <int DPAD, bool kB = false> struct WgShape {
    // Head dim 256 takes 80-key tiles (FATTN_WGMMA_BN256): its O
    // accumulators are 128 registers a thread, and Q plus two stages fill
    // 224 KiB.
    static constexpr int NWG = DPAD == 64 ? FATTN_WGMMA_NWG64 : 2;
    static constexpr int BM = 64 * NWG,
                         BN = DPAD == 256 ? (kB ? 64 : FATTN_WGMMA_BN256) : 128,
                         NT = 128 * (NWG + 1);
    static constexpr int STAGES = DPAD <= 64 && !kB ? 3 : 2;
    // The in-warpgroup overlap paid at head dim 128 and cost 2-6% at 64 (call94).
    static constexpr bool OVERLAP =
        FATTN_WGMMA_OVERLAP >= 0 ? FATTN_WGMMA_OVERLAP != 0 : DPAD >= 128;
    static constexpr int Q_BYTES = BM * DPAD * 2;   // one tile; K and V tiles: KV_BYTES each
    static constexpr int KV_BYTES = BN * DPAD * 2;
    // The bias stages after the K/V stages, B_BYTES each, in 64-column
    // blocks (so BN is a multiple of 64 under kB).
    static constexpr int B_BYTES = kB ? BM * BN * 2 : 0;
    static constexpr int B_OFF = Q_BYTES + STAGES * 2 * KV_BYTES;
    // mbarriers after the tiles: Q full, then per stage K full, V full,
    // K empty, V empty, then Q empty, then (kB) per stage bias full, bias
    // empty.
    static constexpr int BAR_OFF = B_OFF + STAGES * B_BYTES,
                         NBAR = 2 + (kB ? 6 : 4) * STAGES;
    // +1024: the swizzle pattern repeats every 1024 bytes, and the dynamic
    // shared memory base is only promised 16-byte alignment.
    static constexpr int SMEM = BAR_OFF + NBAR * 8 + 1024;
    // Registers per thread after setmaxnreg, within 65536: 128 * 40 +
    // 256 * 232, or 128 * 32 + 384 * 160 with three consumers.
    static constexpr int PRODUCER_REGS = NWG == 2 ? 40 : 32, CONSUMER_REGS = NWG == 2 ? 232 : 160;
    static_assert(!kB || BN % 64 == 0, "the bias tile is whole 64-column blocks");
};
}   // namespace fattn_wgmma_shapes

// The operands' tensor maps (b: the bias, kWgAll), a __grid_constant__
// kernel parameter.
struct WgMaps {
    CUtensorMap q, k, v, b;
};

// The walk over work tiles (tile_at, slot_at in the kernel): `units`
// divides by a pair's units of the paired walk, `sect` by tiles_q << lg,
// the tiles of a section of 2^lg pairs.
struct Walk {
    Divisor units, sect;
    int lg;
};

// The instance families (the kernel's kV; variants.cuh has the rules).
// kWgNone: plain attention. kWgMask: the window and sinks, which change no
// score. kWgCap, kWgAlibi: the softcap or ALiBi on top (as models use them,
// one at a time). kWgCapFixed: kWgCap in bf16 where the cap allows a fixed
// softmax offset instead of the row max (flash_mma.cuh's kFixedCap: capped
// scores lie in [-c2, c2], so terms 2^(s - mu) with mu = c2 - K, K = max(0,
// 2 c2 - 120) <= 30, stay within bf16's range, and O is never rescaled).
// kWgCapApx, kWgCapFixedApx: the same under FATTN_FLAG_FAST_SOFTCAP, with
// tanh.approx.f32 (one MUFU operation where the accurate form's ex2/rcp
// fallback takes two; the accurate form's polynomials, cap_scores, take
// none but more issue slots: 1.09x; 1.07-1.16x and 1.37x the plain time at
// 32k, calls 140 and 150).
// kWgAll: any mix, under block-uniform branches: the bias (in the problem's
// dtype, a tile per stage beside K and V), the softcap (either form) and
// ALiBi together, with the window and sinks; WgShape<DPAD, true>.
enum WgVar { kWgNone, kWgMask, kWgCap, kWgCapFixed, kWgAlibi, kWgCapApx, kWgCapFixedApx, kWgAll };
constexpr bool wg_cap(int kV) {
    return kV == kWgCap || kV == kWgCapFixed || kV == kWgCapApx || kV == kWgCapFixedApx;
}
constexpr bool wg_fixed(int kV) { return kV == kWgCapFixed || kV == kWgCapFixedApx; }
constexpr bool wg_apx(int kV) { return kV == kWgCapApx || kV == kWgCapFixedApx; }

namespace {

using fattn_wgmma_shapes::WgShape;

#if (FATTN_CUDA_DPAD_64 || FATTN_CUDA_DPAD_128 || FATTN_CUDA_DPAD_256)

// Byte offset of 16-byte chunk c (of DPAD / 8) of row r in a tile of R rows
// (the swizzled layout above).
template <int R> __device__ __forceinline__ int tile_off(int r, int c) {
    return (c >> 3) * (R * 128) + r * 128 + (((c & 7) ^ (r & 7)) << 4);
}

using namespace fattn_hopper;

// Rows [0, R) of a tile from global rows g (row stride ss elements) by
// element loads, rows at and past `valid` and elements at and past D zero;
// thread t of NP moves chunks t, t + NP, ... The path for operands TMA
// cannot load.
template <int DPAD, int R, int NP>
__device__ __forceinline__ void gather_tile(unsigned char *dst, const uint16_t *g, int64_t ss,
                                            int valid, int D, int t) {
    constexpr int CPR = DPAD / 8;   // chunks per row
    for (int i = t; i < R * CPR; i += NP) {
        const int r = i / CPR, c = i % CPR;
        const int n = r < valid ? min(max(D - c * 8, 0), 8) : 0;
        *reinterpret_cast<uint4 *>(dst + tile_off<R>(r, c)) =
            gather16<uint16_t>(n ? g + r * ss : g, c * 8, n);
    }
    proxy_fence();
}

// The bias tile of (b, h): rows [m0, m0 + R) by keys [k0, k0 + C), zero
// past seq_q and seq_kv, by element loads with the bias's own strides (a
// row stride of 0, a key stride other than 1, or a layout TMA cannot
// describe), a 16-byte vector where a chunk's 8 keys are contiguous and
// aligned; thread t of 128. Same layout as gather_tile.
template <int R, int C>
__device__ __forceinline__ void gather_bias(unsigned char *dst, const fattn_cuda_args &a,
                                            int64_t b, int64_t h, int m0, int k0, int t) {
    const fattn_cuda_var &v = a.var;
    const uint16_t *base = static_cast<const uint16_t *>(v.bias) + b * v.bias_sb + h * v.bias_sh;
    for (int i = t; i < R * (C / 8); i += 128) {
        const int r = i / (C / 8), c = i % (C / 8), col = k0 + c * 8;
        const int n = m0 + r < a.seq_q ? min(max(a.seq_kv - col, 0), 8) : 0;
        uint4 w = make_uint4(0u, 0u, 0u, 0u);
        if (n) {
            const uint16_t *p = base + (int64_t)(m0 + r) * v.bias_ss + (int64_t)col * v.bias_sd;
            if (n == 8 && v.bias_sd == 1 && (reinterpret_cast<uintptr_t>(p) & 15) == 0) {
                w = *reinterpret_cast<const uint4 *>(p);
            } else {
                uint32_t e[4];
#pragma unroll
                for (int k = 0; k < 4; k++) {
                    const uint32_t lo = 2 * k < n ? p[2 * k * v.bias_sd] : 0u;
                    const uint32_t hi = 2 * k + 1 < n ? p[(2 * k + 1) * v.bias_sd] : 0u;
                    e[k] = lo | hi << 16;
                }
                w = make_uint4(e[0], e[1], e[2], e[3]);
            }
        }
        *reinterpret_cast<uint4 *>(dst + tile_off<R>(r, c)) = w;
    }
}

template <typename T, int DPAD, int kV, bool kPaired>
__global__ void __launch_bounds__(WgShape<DPAD>::NT, 1)
    flash_wgmma_kernel(const __grid_constant__ fattn_cuda_args a,
                       const __grid_constant__ WgMaps maps, Pairs pairs, int tiles_q, int tma,
                       Walk walk) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
    constexpr bool kB = kV == kWgAll;   // a bias stage ring (used when a.var.bias is set)
    using S = WgShape<DPAD, kB>;
    constexpr int BM = S::BM, BN = S::BN, NS = BN / 8, ND = DPAD / 8, ST = S::STAGES;
    constexpr int CB = DPAD / 64;   // 128-byte column blocks of a row
    extern __shared__ unsigned char smem_raw[];
    unsigned char *smem = reinterpret_cast<unsigned char *>(
        (reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~(uintptr_t)1023);
    unsigned char *qs = smem, *kv = smem + S::Q_BYTES;   // stage s: K at kv + 2 s KV, V after it
    const uint32_t bars = smem_u32(smem + S::BAR_OFF);
    const uint32_t q_full = bars;
    auto k_full = [&](int s) { return bars + 8 * (1 + s); };
    auto v_full = [&](int s) { return bars + 8 * (1 + ST + s); };
    auto k_empty = [&](int s) { return bars + 8 * (1 + 2 * ST + s); };
    auto v_empty = [&](int s) { return bars + 8 * (1 + 3 * ST + s); };
    const uint32_t q_empty = bars + 8 * (1 + 4 * ST);
    auto b_full = [&](int s) { return bars + 8 * (2 + 4 * ST + s); };
    auto b_empty = [&](int s) { return bars + 8 * (2 + 5 * ST + s); };
    const bool has_bias = kB && a.var.bias != nullptr;

    const int tid = threadIdx.x, wg = tid >> 7;
    const int D = a.head_dim, seq_q = a.seq_q, seq_kv = a.seq_kv, off = a.causal_offset;
    // The window's sides (-1 unbounded; the host clamps them, so int64 sums
    // of a row, woff and a side cannot overflow) and its offset.
    const int64_t wl = kV != kWgNone ? a.var.window_left : -1;
    const int64_t wr = kV != kWgNone ? a.var.window_right : -1;
    const int64_t woff = (int64_t)seq_kv - seq_q;
    // A work tile (one of tiles_q query tiles of a pair): the walk below says
    // which a block takes; a pair's query tiles run together (they share
    // its K and V in L2), heavy (late, for causal) ones first. Its key
    // tiles [j0, j1): from the first key its first row sees to the last one
    // its last stored row sees.
    struct Tile {
        int64_t b, h, hk;
        int m0, j0, j1;
    };
    const int64_t total = (int64_t)tiles_q * pairs.count;
    // Tile t: sections of 2^lg pairs (tiles_q << lg tiles each) one after
    // another, a section's tiles heavy first across its pairs: rank r of
    // every pair, then r + 1, ... (lg = 0: a pair's tiles in a row).
    auto tile_at = [&](int64_t t) {
        Tile w;
        const int64_t sec = divide(t, walk.sect);
        const int64_t i = t - sec * ((int64_t)tiles_q << walk.lg);
        const int64_t bh = (sec << walk.lg) + (i & (((int64_t)1 << walk.lg) - 1));
        w.m0 = (int)(tiles_q - 1 - (i >> walk.lg)) * BM;
        block_pair_at(a, pairs, bh, w.b, w.h, w.hk);
        const int64_t last = min((int64_t)w.m0 + BM, (int64_t)seq_q) - 1;
        int64_t kv_end = seq_kv, kv_lo = 0;
        if (a.causal) kv_end = min(kv_end, last + 1 + off);
        if (wr >= 0) kv_end = min(kv_end, last + woff + wr + 1);
        if (wl >= 0) kv_lo = max((int64_t)0, (int64_t)w.m0 + woff - wl);
        w.j1 = kv_end > 0 ? (int)((kv_end + BN - 1) / BN) : 0;
        w.j0 = kV == kWgNone ? 0 : (int)min(kv_lo / BN, (int64_t)w.j1);
        return w;
    };
    // The block's walk over the work tiles: t = first_tile(k), then
    // next_tile(k, t), ... while t < total. Plain: t = blockIdx.x, +
    // gridDim.x, ... Paired (kPaired): slot k is half of unit u =
    // blockIdx.x + (k / 2) gridDim.x, the units being a pair's tiles of
    // ranks i (heavy) and tiles_q - 1 - i (light), each about tiles_q + 1
    // key tiles; the middle tile of an odd tiles_q is a unit alone, and its
    // empty second slot is passed over. `units` divides by (tiles_q + 1) / 2.
    auto slot_at = [&](int64_t k) -> int64_t {   // a tile, -1 for none, total at the end
        const int64_t u = (int64_t)blockIdx.x + (k >> 1) * gridDim.x, bh = divide(u, walk.units);
        if (bh >= pairs.count) return total;
        const int i = (int)(u - bh * ((tiles_q + 1) >> 1)), rank = k & 1 ? tiles_q - 1 - i : i;
        return k & 1 && rank == i ? -1 : bh * tiles_q + rank;
    };
    auto first_tile = [&](int64_t &k) -> int64_t {
        if constexpr (kPaired) {
            int64_t t = slot_at(k = 0);
            while (t < 0) t = slot_at(++k);
            return t;
        } else {
            return blockIdx.x;
        }
    };
    auto next_tile = [&](int64_t &k, int64_t t) -> int64_t {
        if constexpr (kPaired) {
            do t = slot_at(++k);
            while (t < 0);
            return t;
        } else {
            return t + gridDim.x;
        }
    };

    if (tid == 0) {
        // A full barrier completes on one arrival and the TMA bytes, or on
        // the 128 producer threads' arrivals for a gathered operand.
        mbar_init(q_full, tma & 1 ? 1 : 128);
        for (int s = 0; s < ST; s++) {
            mbar_init(k_full(s), tma & 2 ? 1 : 128);
            mbar_init(v_full(s), tma & 4 ? 1 : 128);
            mbar_init(k_empty(s), 128 * S::NWG);
            mbar_init(v_empty(s), 128 * S::NWG);
        }
        mbar_init(q_empty, 128 * S::NWG);
        for (int s = 0; s < (kB ? ST : 0); s++) {
            mbar_init(b_full(s), tma & 8 ? 1 : 128);
            mbar_init(b_empty(s), 128 * S::NWG);
        }
        mbar_init_fence();
    }
    __syncthreads();

    if (wg == 0) {
        // ---- producer -------------------------------------------------------
        regs_dec<S::PRODUCER_REGS>();
        if (tma == 15 && tid != 0) return;   // one thread drives the copy engine
        // Tile rows [r0, r0 + R) of an operand (batch b, head hh) into dst,
        // completing on bar.
        auto load = [&](auto rows, unsigned char *dst, int bit, const CUtensorMap *map,
                        const uint16_t *g, int64_t ss, int64_t b, int64_t hh, int r0, int valid,
                        uint32_t bar) {
            constexpr int R = decltype(rows)::value;
            if (tma & bit) {
                if (tid != 0) return;
                mbar_expect_tx(bar, R * DPAD * 2);
#pragma unroll
                for (int cb = 0; cb < CB; cb++)
                    tma_load4(smem_u32(dst + cb * R * 128), map, cb * 64, r0, (int)hh, (int)b, bar);
            } else {
                gather_tile<DPAD, R, 128>(dst, g + (int64_t)r0 * ss, ss, valid, D, tid);
                mbar_arrive(bar);
            }
        };
        using RowsQ = std::integral_constant<int, BM>;
        using RowsKV = std::integral_constant<int, BN>;
        int it = 0, ti = 0;   // K/V tiles (stage it % ST) and work tiles loaded so far
        int64_t k = 0;
        for (int64_t t = first_tile(k); t < total; t = next_tile(k, t), ti++) {
            const Tile w = tile_at(t);
            const uint16_t *qg = static_cast<const uint16_t *>(a.q) + w.b * a.q_sb + w.h * a.q_sh;
            const uint16_t *kg = static_cast<const uint16_t *>(a.k) + w.b * a.k_sb + w.hk * a.k_sh;
            const uint16_t *vg = static_cast<const uint16_t *>(a.v) + w.b * a.v_sb + w.hk * a.v_sh;
            if (ti > 0) mbar_wait(q_empty, (ti - 1) & 1);   // the last tile's Q K^T is done
            load(RowsQ{}, qs, 1, &maps.q, qg, a.q_ss, w.b, w.h, w.m0, seq_q - w.m0, q_full);
            for (int j = w.j0; j < w.j1; j++, it++) {
                const int s = it % ST, k0 = j * BN;
                const uint32_t parity = ((it / ST) & 1) ^ 1;   // the previous use's release
                unsigned char *kst = kv + s * 2 * S::KV_BYTES;
                if (it >= ST) mbar_wait(k_empty(s), parity);
                load(RowsKV{}, kst, 2, &maps.k, kg, a.k_ss, w.b, w.hk, k0, seq_kv - k0, k_full(s));
                if (has_bias) {
                    // Rows m0.. by keys k0.. of the bias; a broadcast
                    // (stride 0) batch or head is coordinate 0 of its map.
                    unsigned char *bst = smem + S::B_OFF + s * S::B_BYTES;
                    if (it >= ST) mbar_wait(b_empty(s), parity);
                    if (tma & 8) {
                        if (tid == 0) {
                            mbar_expect_tx(b_full(s), S::B_BYTES);
                            const int hb = a.var.bias_sh ? (int)w.h : 0;
                            const int bb = a.var.bias_sb ? (int)w.b : 0;
#pragma unroll
                            for (int cb = 0; cb < BN / 64; cb++)
                                tma_load4(smem_u32(bst + cb * BM * 128), &maps.b, k0 + cb * 64,
                                          w.m0, hb, bb, b_full(s));
                        }
                    } else {
                        gather_bias<BM, BN>(bst, a, w.b, w.h, w.m0, k0, tid);
                        mbar_arrive(b_full(s));
                    }
                }
                if (it >= ST) mbar_wait(v_empty(s), parity);
                load(RowsKV{}, kst + S::KV_BYTES, 4, &maps.v, vg, a.v_ss, w.b, w.hk, k0,
                     seq_kv - k0, v_full(s));
            }
        }
    } else {
        // ---- consumers ------------------------------------------------------
        regs_inc<S::CONSUMER_REGS>();
        const int cw = wg - 1, warp = (tid >> 5) & 3, lane = tid & 31;
        // This thread's rows of the block: r_lo and r_lo + 8.
        const int r_lo = cw * 64 + warp * 16 + (lane >> 2);
        // The work tile's batch, head, first row, first key tile jb and
        // count ntiles; relative to jb, tiles in [jfull, jmask) are visible
        // to all of this consumer's rows (the rest are masked per element);
        // `it` K/V tiles were consumed before its first (stage it % ST).
        int64_t b = 0, h = 0;
        int m0 = 0, jb = 0, ntiles = 0, jmask = 0, jfull = 0, it = 0;
        float o[DPAD / 2], mrow[2], lrow[2];
        // The scale the softmax applies: the rescoring families leave
        // scores in log2 units.
        constexpr bool kRescore = wg_cap(kV) || kV == kWgAlibi || kV == kWgAll;
        const float sc = kRescore ? 1.f : a.scale_log2;
        // Softcap in log2 units (c2 = softcap log2 e), the scale folded in:
        // variants.cuh's var_tanh2, x = c2 - 2 c2 / (2^(k1 s) + 1), or
        // c2 tanh.approx(k1 s) (wg_apx); cadd - c2 added: x itself
        // (kWgCap), or its offset from the fixed mu (kWgCapFixed).
        // kWgAll decides at run time (block-uniform), and never takes the
        // fixed offset.
        const bool cap = wg_cap(kV) || (kV == kWgAll && a.var.softcap > 0.f);
        const bool apx = wg_apx(kV) || (kV == kWgAll && a.var.fast_tanh);
        const bool alibi = kV == kWgAlibi || (kV == kWgAll && a.var.alibi != nullptr);
        float k1 = 0.f, c2 = 0.f, cadd = 0.f, mu_fixed = 0.f;
        if (cap) {
            c2 = a.var.softcap * kLog2e;
            const float K = fmaxf(0.f, 2.f * c2 - 120.f);
            k1 = apx ? a.var.scale / a.var.softcap : 2.f * a.scale_log2 / a.var.softcap;
            mu_fixed = c2 - K;
            const float add = wg_fixed(kV) ? K : c2;   // x + add - c2
            cadd = apx ? add - c2 : add;
        }
        // ALiBi: the slope in log2 units, and i + woff - kv0 - c0 of the
        // thread's rows at the tile's column c0 = 2 (lane % 4).
        float slope2 = 0.f;
        int64_t dist_row[2] = {0, 0};
        float s[BN / 2];   // S, then P in float (the first k-step overwrites it)
#pragma unroll
        for (int i = 0; i < BN / 2; i++) s[i] = 0.f;
        uint32_t pa[BN / 16][4];   // P as wgmma's A fragments

        // Named barrier 1 + cw: consumer cw's turn to issue its GEMMs; the
        // consumer before it in the ring (cw - 1, the last before 0) gives it.
        constexpr int NWG = S::NWG;
        const bool last = cw == NWG - 1;
        // FATTN_WGMMA_RING64 0: at head dim 64 no turns (measuring the ring's cost).
        constexpr bool kRing = FATTN_WGMMA_RING64 || DPAD != 64;
        auto my_turn = [&] {
            if constexpr (kRing) bar_sync<256>(1 + cw);
        };
        auto pass_turn = [&] {
            if constexpr (kRing) bar_arrive<256>(1 + (cw + 1) % NWG);
        };
        auto slot = [&](int j) { return (it + j) % ST; };   // key tile j's stage
        auto parity = [&](int j) { return (uint32_t)(((it + j) / ST) & 1); };
        auto stage = [&](int j) { return kv + slot(j) * 2 * S::KV_BYTES; };

        // S = Q K^T over DPAD / 16 k-steps: k-step kk reads bytes 32 (kk % 4)
        // of column block kk / 4.
        auto qk = [&](int j) {
            const unsigned char *ks = stage(j);
            wg_fence();
#pragma unroll
            for (int kk = 0; kk < DPAD / 16; kk++) {
                const uint64_t da = smem_desc(
                    qs + (kk >> 2) * (BM * 128) + cw * 64 * 128 + (kk & 3) * 32, 16, 1024);
                const uint64_t db =
                    smem_desc(ks + (kk >> 2) * (BN * 128) + (kk & 3) * 32, 16, 1024);
                Wgmma<T, BN>::template ss<0>(s, da, db, kk > 0);
            }
            wg_commit();
        };
        // O += P V: BN / 16 k-steps of 16 keys; V is B in MN-major form:
        // LBO = the stride between 64-column blocks, SBO = 8 keys.
        auto pv = [&](int j) {
            const unsigned char *vs = stage(j) + S::KV_BYTES;
            wg_fence();
#pragma unroll
            for (int kb = 0; kb < BN / 16; kb++) {
                const uint64_t db = smem_desc(vs + kb * 16 * 128, BN * 128, 1024);
                Wgmma<T, DPAD>::template rs<1>(o, pa[kb], db, 1);
            }
            wg_commit();
        };
        // The stale-max threshold (FlashAttention-4's conditional rescaling;
        // softmax below): O's rescale is 0.5, 1 and 3.2 multiplies a score
        // at head dims 64, 128 and 256, and skipping it where no row of a
        // warp moved its max made head dim 256 2-16% faster and 64 up to 8%
        // (calls 154-156). Off at 128, where the tensor cores bound the
        // consumer and the vote cost 1-2%, and with ALiBi, whose slopes move
        // the maxima every tile (d256: 3% slower with it, call155).
        constexpr float kStale = DPAD == 128 ? 0.f : FATTN_WGMMA_STALE;
        const float stale = alibi ? 0.f : kStale;
        // Tile j's rescoring (softcap, ALiBi), its mask where it cuts a row's
        // keys (seq_kv, causal, the window), and the online softmax in log2
        // units: s becomes P, alpha the factor O is rescaled by once no P V
        // is in flight.
        // The softcap of every score (fast: tanh.approx).
        // The accurate form through ex2 and rcp takes two MUFU operations a
        // score beside the softmax's ex2, more than the other consumer's
        // GEMMs hide (1.37x the plain time; the FMA pipe's ex2 or rcp cost
        // more issue slots than they freed, calls 106 and 135). Where all of
        // a warp's scores lie in a host polynomial's range (|scale s| <=
        // 0.1, 0.28 or 0.5 softcap for two, three or four terms; params.h's
        // cap_poly) it is s R(s^2) on the FMA pipe: three to five
        // instructions, no MUFU, and one for the range check (32k bf16 d128
        // causal: 1.07x, 1.13x, 1.16x plain, calls 149-150).
        auto cap_scores = [&](auto fast) {
            if constexpr (!decltype(fast)::value && FATTN_WGMMA_CAP_POLY) {
                float am[2] = {0.f, 0.f};   // two chains (four measured the same, call139)
#pragma unroll
                for (int i = 0; i < BN / 2; i++) am[i & 1] = fmaxf(am[i & 1], fabsf(s[i]));
                const float amax = fmaxf(am[0], am[1]);
                // s R(s^2) with tier t's NT = t + 2 terms.
                auto poly = [&](auto tier) {
                    constexpr int NT = decltype(tier)::value + 2;
                    const float *r = a.var.cap_poly[decltype(tier)::value];
#pragma unroll
                    for (int i = 0; i < BN / 2; i++) {
                        const float z = s[i] * s[i];
                        float R = fmaf(r[NT - 1], z, r[NT - 2]);
#pragma unroll
                        for (int k = NT - 3; k >= 0; k--) R = fmaf(R, z, r[k]);
                        // x + add - c2 as cap_scores' other forms: 0, or -mu_fixed.
                        s[i] = wg_fixed(kV) ? fmaf(s[i], R, -mu_fixed) : s[i] * R;
                    }
                };
                // The fewest terms whose range holds all the warp's scores
                // (FATTN_WGMMA_CAP_POLY: the fewest allowed, for measuring).
                // Which tiers an instance has is measured (calls 147-149):
                // the bf16 fixed-offset forms take all three (three terms:
                // 1.13x plain against four's 1.16x at 32k d128); the row-max
                // forms (f16, caps past 52) ran 2-3% slower with the
                // three-term one than with four terms alone, and at head
                // dim 128 any second polynomial spilled 44 bytes and cost
                // 2-3% where it did not apply.
                constexpr bool kTier0 = wg_fixed(kV) || DPAD != 128;
                constexpr bool kTier1 = wg_fixed(kV);
                using T0 = std::integral_constant<int, 0>;
                using T1 = std::integral_constant<int, 1>;
                using T2 = std::integral_constant<int, 2>;
                if (kTier0 && FATTN_WGMMA_CAP_POLY <= 2 &&
                    __all_sync(0xffffffffu, amax <= a.var.cap_poly_smax[0])) {
                    poly(T0{});
                    return;
                }
                if (kTier1 && FATTN_WGMMA_CAP_POLY <= 3 &&
                    __all_sync(0xffffffffu, amax <= a.var.cap_poly_smax[1])) {
                    poly(T1{});
                    return;
                }
                if (__all_sync(0xffffffffu, amax <= a.var.cap_poly_smax[2])) {
                    poly(T2{});
                    return;
                }
            }
#pragma unroll
            for (int i = 0; i < BN / 2; i++) {
                if constexpr (decltype(fast)::value) {
                    float t;
                    asm("tanh.approx.f32 %0, %1;\n" : "=f"(t) : "f"(s[i] * k1));
                    s[i] = fmaf(t, c2, cadd);
                } else {
                    float r;
                    asm("rcp.approx.ftz.f32 %0, %1;\n" : "=f"(r) : "f"(ex2(s[i] * k1) + 1.f));
                    s[i] = fmaf(r, -2.f * c2, cadd);
                }
            }
        };
        // ALiBi on scores scaled by sc2 first.
        auto alibi_scores = [&](int kv0, float sc2) {
#pragma unroll
            for (int hh = 0; hh < 2; hh++) {
                const float d = (float)(dist_row[hh] - kv0);
#pragma unroll
                for (int n = 0; n < NS; n++)
#pragma unroll
                    for (int e = 0; e < 2; e++) {
                        float &x = s[n * 4 + 2 * hh + e];
                        x = fmaf(x, sc2, -slope2 * fabsf(d - (float)(n * 8 + e)));
                    }
            }
        };
        // Tile j's bias (its stage, filled by the producer), in log2 units:
        // one ldmatrix x4 brings a thread the elements of its accumulators
        // of 16 keys by both its rows (matrices 0/1: keys 0-7 of rows r_lo,
        // r_lo + 8; 2/3: keys 8-15); the 128-byte swizzle puts a matrix's 8
        // rows in distinct banks.
        auto bias_scores = [&](int j) {
            const unsigned char *bs = smem + S::B_OFF + slot(j) * S::B_BYTES;
            const int row = cw * 64 + warp * 16 + ((lane >> 3) & 1) * 8 + (lane & 7);
            mbar_wait(b_full(slot(j)), parity(j));
#pragma unroll
            for (int g = 0; g < BN / 16; g++) {
                uint32_t r[4];
                ldsm_x4(r, bs + tile_off<BM>(row, 2 * g + (lane >> 4)));
#pragma unroll
                for (int q = 0; q < 4; q++) {
                    const float2 f = unpack2<T>(r[q]);
                    float *x = &s[(2 * g + (q >> 1)) * 4 + 2 * (q & 1)];
                    x[0] = fmaf(f.x, kLog2e, x[0]);
                    x[1] = fmaf(f.y, kLog2e, x[1]);
                }
            }
            mbar_arrive(b_empty(slot(j)));
        };
        auto softmax = [&](int j, float(&alpha)[2]) {
            const int kv0 = (jb + j) * BN;
            if constexpr (wg_cap(kV)) {
                cap_scores(std::integral_constant<bool, wg_apx(kV)>{});
            } else if constexpr (kV == kWgAlibi) {
                alibi_scores(kv0, a.scale_log2);
            } else if constexpr (kV == kWgAll) {
                // The softcap first, ALiBi, then the bias (fattn.h's order).
                if (cap) {
                    if (apx) cap_scores(std::true_type{});
                    else cap_scores(std::false_type{});
                } else {
#pragma unroll
                    for (int i = 0; i < BN / 2; i++) s[i] *= a.scale_log2;
                }
                if (alibi) alibi_scores(kv0, 1.f);
                if (has_bias) bias_scores(j);
            }
            if constexpr (kV == kWgNone && DPAD == 64) {
                // The plain instances at head dim 64 keep the block's mask
                // form: the per-row bounds below cost them 2-3% (call107),
                // while at 256 this form spilled 116 bytes against 52 and
                // ran 8% slower (call108).
                if (j >= jmask) {
#pragma unroll
                    for (int n = 0; n < NS; n++)
#pragma unroll
                        for (int e = 0; e < 4; e++) {
                            const int col = kv0 + n * 8 + (lane & 3) * 2 + (e & 1);
                            const int64_t row = (int64_t)m0 + r_lo + (e >> 1) * 8;
                            if (col >= seq_kv || (a.causal && col > row + off))
                                s[n * 4 + e] = -INFINITY;
                        }
                }
            } else if (j >= jmask || j < jfull) {
#pragma unroll
                for (int hh = 0; hh < 2; hh++) {
                    // Row i sees keys [lo, hi]: as tile columns past the
                    // thread's first, clamped to where they still cut it.
                    const int64_t i = (int64_t)m0 + r_lo + hh * 8;
                    int64_t hi = (int64_t)seq_kv - 1, lo = 0;
                    if (a.causal) hi = min(hi, i + off);
                    if (wr >= 0) hi = min(hi, i + woff + wr);
                    if (wl >= 0) lo = i + woff - wl;
                    const int c0 = (lane & 3) * 2;
                    const int hr = (int)max((int64_t)-1, min((int64_t)BN, hi - kv0)) - c0;
                    const int lr = (int)max((int64_t)0, min((int64_t)BN, lo - kv0)) - c0;
#pragma unroll
                    for (int n = 0; n < NS; n++)
#pragma unroll
                        for (int e = 0; e < 2; e++)
                            if (n * 8 + e > hr || n * 8 + e < lr) s[n * 4 + 2 * hh + e] = -INFINITY;
                }
            }
#pragma unroll
            for (int hh = 0; hh < 2; hh++) {
                if constexpr (wg_fixed(kV)) {
                    // s is already the exponent: no max, no rescale.
                    float sum = 0.f;
#pragma unroll
                    for (int n = 0; n < NS; n++) {
                        float &p0 = s[n * 4 + 2 * hh], &p1 = s[n * 4 + 2 * hh + 1];
                        p0 = ex2(p0);
                        p1 = ex2(p1);
                        sum += p0 + p1;
                    }
                    lrow[hh] += sum;
                    alpha[hh] = 1.f;
                    continue;
                }
                float mx = -INFINITY;
#pragma unroll
                for (int n = 0; n < NS; n++)
                    mx = fmaxf(mx, fmaxf(s[n * 4 + 2 * hh], s[n * 4 + 2 * hh + 1]));
                mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
                mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
                // The row keeps its max unless the tile's passes it by more
                // than `stale` (log2 units): terms up to 2^stale, and O and
                // l rescaled only when a row of the warp moves its max.
                const float mt = mx * sc;
                const float mnew = stale > 0.f && !(mt > mrow[hh] + stale)
                                       ? mrow[hh]
                                       : fmaxf(mrow[hh], mt);
                const float mu = mnew == -INFINITY ? 0.f : mnew;
                alpha[hh] = ex2(mrow[hh] - mu);
                mrow[hh] = mnew;
                float sum = 0.f;
#pragma unroll
                for (int n = 0; n < NS; n++) {
                    float &p0 = s[n * 4 + 2 * hh], &p1 = s[n * 4 + 2 * hh + 1];
                    p0 = ex2(fmaf(p0, sc, -mu));
                    p1 = ex2(fmaf(p1, sc, -mu));
                    sum += p0 + p1;
                }
                lrow[hh] = lrow[hh] * alpha[hh] + sum;
            }
        };
        // O *= alpha, and P into A fragments: key block n / 2 (16 keys),
        // registers 0/1 from its first 8 columns, 2/3 from its second; hh
        // picks the row half.
        auto rescale_pack = [&](const float(&alpha)[2]) {
            if constexpr (!wg_fixed(kV)) {
                if (stale == 0.f || __any_sync(0xffffffffu, alpha[0] != 1.f || alpha[1] != 1.f)) {
#pragma unroll
                    for (int d = 0; d < ND; d++)
#pragma unroll
                        for (int e = 0; e < 4; e++) o[d * 4 + e] *= alpha[e >> 1];
                }
            }
#pragma unroll
            for (int n = 0; n < NS; n++)
#pragma unroll
                for (int hh = 0; hh < 2; hh++)
                    pa[n >> 1][(n & 1) * 2 + hh] =
                        pack2<T>(s[n * 4 + 2 * hh], s[n * 4 + 2 * hh + 1]);
        };

        float alpha[2];
        int ti = 0;
        int64_t k = 0;
        for (int64_t t = first_tile(k); t < total; t = next_tile(k, t), ti++) {
            const Tile w = tile_at(t);
            b = w.b, h = w.h, m0 = w.m0, jb = w.j0, ntiles = w.j1 - w.j0;
            if constexpr (kV == kWgNone) {
                // Tiles before jmask are visible to every row of the block.
                jmask = seq_kv / BN;
                if (a.causal) jmask = min(jmask, (int)(max((int64_t)0, (int64_t)m0 + off + 1) / BN));
            } else {
                // This consumer's rows [r0, r1]: tiles from jmask on reach
                // past the first one's last key, tiles before jfull start
                // before the last stored one's first key.
                const int64_t r0 = (int64_t)m0 + cw * 64;
                const int64_t r1 = min(r0 + 63, (int64_t)seq_q - 1);
                int64_t hi = (int64_t)seq_kv - 1;
                if (a.causal) hi = min(hi, r0 + off);
                if (wr >= 0) hi = min(hi, r0 + woff + wr);
                jmask = (int)((max((int64_t)-1, hi) + 1) / BN) - jb;
                jfull = wl >= 0 ? (int)min((max((int64_t)0, r1 + woff - wl) + BN - 1) / BN,
                                           (int64_t)w.j1) -
                                      jb
                                : 0;
            }
            if constexpr (kV == kWgAlibi || kV == kWgAll) {
                slope2 = var_slope(a, b, h) * kLog2e;
#pragma unroll
                for (int hh = 0; hh < 2; hh++)
                    dist_row[hh] = (int64_t)m0 + r_lo + hh * 8 + woff - (lane & 3) * 2;
            }
#pragma unroll
            for (int i = 0; i < DPAD / 2; i++) o[i] = 0.f;
            mrow[0] = mrow[1] = -INFINITY;
            lrow[0] = lrow[1] = 0.f;
            mbar_wait(q_full, ti & 1);
            int nt = ntiles;   // the key tiles this consumer computes
            if constexpr (!S::OVERLAP) {
                // Tiles past the last key this consumer's last row sees (the
                // causal diagonal of a 192-row tile, a window's right edge)
                // and all tiles of rows past seq_q are ghosts: the consumer
                // waits for their stages and releases them and takes its
                // turns, so the ring and the stage counts stay in step, but
                // issues no GEMM. A loop of their own: a condition on the
                // GEMMs inside the main loop made ptxas spill (call100).
                const int64_t r0 = (int64_t)m0 + cw * 64, r1 = min(r0 + 63, (int64_t)seq_q - 1);
                int64_t hi = (int64_t)seq_kv - 1;
                if (a.causal) hi = min(hi, r1 + off);
                if (wr >= 0) hi = min(hi, r1 + woff + wr);
                if (FATTN_WGMMA_GHOSTS && (r0 >= seq_q || hi < (int64_t)(jb + ntiles - 1) * BN))
                    nt = r0 >= seq_q ? 0 : (int)max((int64_t)0, (hi + BN) / BN - jb);
                // Turn: P V of tile j - 1 and Q K^T of tile j. The last
                // consumer's first arrival lets consumer 0 start; it gives no
                // turn after its last, which nobody would take.
                if (last) pass_turn();
                my_turn();
                for (int j = 0; j < nt; j++) {
                    mbar_wait(k_full(slot(j)), parity(j));
                    qk(j);
                    pass_turn();
                    wg_wait<0>();
                    mbar_arrive(k_empty(slot(j)));
                    if (j == nt - 1) mbar_arrive(q_empty);   // Q is read for the last time
                    softmax(j, alpha);
                    rescale_pack(alpha);
                    mbar_wait(v_full(slot(j)), parity(j));
                    my_turn();
                    pv(j);
                    wg_wait<0>();
                    mbar_arrive(v_empty(slot(j)));
                }
                for (int j = nt; j < ntiles; j++) {   // ghosts, in the same steps
                    mbar_wait(k_full(slot(j)), parity(j));
                    pass_turn();
                    mbar_arrive(k_empty(slot(j)));
                    if (has_bias) {
                        mbar_wait(b_full(slot(j)), parity(j));
                        mbar_arrive(b_empty(slot(j)));
                    }
                    mbar_wait(v_full(slot(j)), parity(j));
                    my_turn();
                    mbar_arrive(v_empty(slot(j)));
                }
                if (!last) pass_turn();
            } else if (ntiles > 0) {
                // Turn: Q K^T of tile j and P V of tile j - 1; tile j's softmax
                // runs while that P V does.
                if (last) pass_turn();
                mbar_wait(k_full(slot(0)), parity(0));
                my_turn();
                qk(0);
                if (!last || ntiles > 1) pass_turn();
                wg_wait<0>();
                mbar_arrive(k_empty(slot(0)));
                if (ntiles == 1) mbar_arrive(q_empty);
                softmax(0, alpha);
                rescale_pack(alpha);
                for (int j = 1; j < ntiles; j++) {
                    mbar_wait(k_full(slot(j)), parity(j));
                    my_turn();
                    qk(j);
                    mbar_wait(v_full(slot(j - 1)), parity(j - 1));
                    pv(j - 1);
                    if (!last || j + 1 < ntiles) pass_turn();
                    wg_wait<1>();
                    mbar_arrive(k_empty(slot(j)));
                    if (j == ntiles - 1) mbar_arrive(q_empty);
                    softmax(j, alpha);
                    wg_wait<0>();
                    mbar_arrive(v_empty(slot(j - 1)));
                    rescale_pack(alpha);
                }
                mbar_wait(v_full(slot(ntiles - 1)), parity(ntiles - 1));
                pv(ntiles - 1);
                wg_wait<0>();
                mbar_arrive(v_empty(slot(ntiles - 1)));
            }
            if (nt == 0) mbar_arrive(q_empty);

            // Epilogue: O = acc / l, rows below seq_q; lse = m + log2 l in natural units.
            T *og = static_cast<T *>(a.o) + b * a.o_sb + h * a.o_sh;
#pragma unroll
            for (int hh = 0; hh < 2; hh++) {
                float l = lrow[hh];
                l += __shfl_xor_sync(0xffffffffu, l, 1);
                l += __shfl_xor_sync(0xffffffffu, l, 2);
                const int64_t i = (int64_t)m0 + r_lo + hh * 8;
                if (i >= seq_q) continue;
                const float m = wg_fixed(kV) ? mu_fixed : mrow[hh];
                float inv = l == 0.f ? 0.f : 1.f / l, lse = -INFINITY;
                if constexpr (kV != kWgNone) {   // the plain instances take the lse at its store
                    if (l != 0.f) lse = (m + log2f(l)) * kLn2;
                    var_sink_fold(m, l, var_sink_log2(a, h), &inv, &lse);
                }
                T *orow = og + i * a.o_ss;
#pragma unroll
                for (int d8 = 0; d8 < ND; d8++) {
                    const int d = d8 * 8 + (lane & 3) * 2;
                    const float v0 = o[d8 * 4 + 2 * hh] * inv, v1 = o[d8 * 4 + 2 * hh + 1] * inv;
                    const uint32_t w = pack2<T>(v0, v1);
                    if (d + 1 < D && (reinterpret_cast<uintptr_t>(orow + d) & 3) == 0) {
                        *reinterpret_cast<uint32_t *>(orow + d) = w;
                    } else {
                        uint16_t *o16 = reinterpret_cast<uint16_t *>(orow);
                        if (d < D) o16[d] = (uint16_t)(w & 0xFFFFu);
                        if (d + 1 < D) o16[d + 1] = (uint16_t)(w >> 16);
                    }
                }
                if (a.lse && (lane & 3) == 0)
                    a.lse[b * a.l_sb + h * a.l_sh + i * a.l_ss] =
                        kV != kWgNone ? lse : l == 0.f ? -INFINITY : (m + log2f(l)) * kLn2;
            }
            it += ntiles;
        }
    }
#endif
}

// ---- host: tensor maps ------------------------------------------------------

typedef CUresult (*EncodeTiled)(CUtensorMap *, CUtensorMapDataType, cuuint32_t, void *,
                                const cuuint64_t *, const cuuint64_t *, const cuuint32_t *,
                                const cuuint32_t *, CUtensorMapInterleave, CUtensorMapSwizzle,
                                CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

// The driver's cuTensorMapEncodeTiled through the runtime (the module links
// no driver library), looked up once; NULL where the driver lacks it.
EncodeTiled encoder() {
    static const EncodeTiled fn = [] {
        void *p = nullptr;
        cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
        if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault,
                                             &q) != cudaSuccess ||
            q != cudaDriverEntryPointSuccess) {
            cudaGetLastError();   // not sticky; the gather path runs instead
            return (EncodeTiled) nullptr;
        }
        return reinterpret_cast<EncodeTiled>(p);
    }();
    return fn;
}

// A map of one operand, element (b, h, r, c) at p + b sb + h sh + r ss + c,
// whose box is 64 columns by `rows` rows (the 128-byte swizzle). False where
// TMA cannot describe it: an address or a stride not on 16 bytes, a stride
// of 2^40 bytes or more, or a size past its int32 coordinates; the operand
// is gathered then.
bool make_map(CUtensorMap *m, const void *p, fattn_dtype dt, int D, int64_t seq, int64_t heads,
              int64_t batch, int64_t ss, int64_t sh, int64_t sb, int rows) {
    const EncodeTiled enc = encoder();
    if (!enc || (reinterpret_cast<uintptr_t>(p) & 15) || seq > INT_MAX || heads > INT_MAX ||
        batch > INT_MAX)
        return false;
    const cuuint64_t dim[4] = {(cuuint64_t)D, (cuuint64_t)seq, (cuuint64_t)heads,
                               (cuuint64_t)batch};
    const int64_t st[3] = {ss, sh, sb};
    cuuint64_t stride[3];
    cuuint64_t prev = ((cuuint64_t)D * 2 + 15) & ~(cuuint64_t)15;
    for (int i = 0; i < 3; i++) {
        if (dim[i + 1] <= 1) {   // coordinate 0 only: any valid stride
            stride[i] = prev;
            continue;
        }
        if (st[i] <= 0 || st[i] % 8 || st[i] >= ((int64_t)1 << 39)) return false;
        stride[i] = prev = (cuuint64_t)st[i] * 2;
    }
    const cuuint32_t box[4] = {64, (cuuint32_t)rows, 1, 1}, estride[4] = {1, 1, 1, 1};
    return enc(m,
               dt == FATTN_F16 ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16 : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,
               4, const_cast<void *>(p), dim, stride, box, estride, CU_TENSOR_MAP_INTERLEAVE_NONE,
               CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
               CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

// The bias's map (kWgAll), or true where the problem has no bias: element
// (b, h, i, j) with a box of 64 keys by `rows` rows; a batch or head
// broadcast through stride 0 is a dimension of 1 (the kernel asks for its
// coordinate 0). False where the key stride is not 1 or make_map declines:
// the producer gathers the tile then.
bool bias_map(CUtensorMap *m, const fattn_cuda_args *a, int rows) {
    const fattn_cuda_var &v = a->var;
    if (!v.bias) return true;
    return v.bias_sd == 1 && make_map(m, v.bias, a->dtype, a->seq_kv, a->seq_q,
                                      v.bias_sh ? a->heads_q : 1, v.bias_sb ? a->batch : 1,
                                      v.bias_ss, v.bias_sh, v.bias_sb, rows);
}

template <typename T, int DPAD, int kV>
cudaError_t launch(const fattn_cuda_args *a, cudaStream_t stream) {
    using S = WgShape<DPAD, kV == kWgAll>;
    const int64_t hkv = a->heads_q / a->group;
    WgMaps maps;
    memset(&maps, 0, sizeof maps);
    const int tma = (make_map(&maps.q, a->q, a->dtype, a->head_dim, a->seq_q, a->heads_q, a->batch,
                              a->q_ss, a->q_sh, a->q_sb, S::BM)
                         ? 1
                         : 0) |
                    (make_map(&maps.k, a->k, a->dtype, a->head_dim, a->seq_kv, hkv, a->batch,
                              a->k_ss, a->k_sh, a->k_sb, S::BN)
                         ? 2
                         : 0) |
                    (make_map(&maps.v, a->v, a->dtype, a->head_dim, a->seq_kv, hkv, a->batch,
                              a->v_ss, a->v_sh, a->v_sb, S::BN)
                         ? 4
                         : 0) |
                    (bias_map(&maps.b, a, S::BM) ? 8 : 0);
    // Without a window, a persistent grid: a block per SM (one fits an SM)
    // walks the work tiles, so one tile's epilogue overlaps the next one's
    // loads (+1-14%, call97). Causal tiles differ in cost, and a plain
    // static walk left SMs idle (0.59-0.74x at 8k-16k): causal problems get
    // a block per tile, which the hardware hands out as SMs free up, or,
    // where it measured faster, the paired walk (kPaired: each unit two
    // query tiles m and tiles_q - 1 - m of a pair, which together cost about
    // the same): plain attention at head dims 128 and 256 with at most 64
    // query tiles (bench/results/2026-11-24-h200-wgmma-paired, call128: 3-9%
    // faster at 2048-8192; at 16384 2-4% slower; at head dim 64, whose
    // producer has 32 registers, 2-7% slower, and a runtime choice in every
    // instance cost 1-2% elsewhere). Under a window (whose edge tiles cost
    // less) a block per tile.
    cudaError_t e;
    int dev = 0, sms = 0;
    if ((e = cudaGetDevice(&dev)) != cudaSuccess ||
        (e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev)) != cudaSuccess)
        return e;
    const int tiles_q = (int)(((int64_t)a->seq_q + S::BM - 1) / S::BM);
    const Pairs pairs{0, a->batch * a->heads_q, make_divisor((uint64_t)a->heads_q),
                      make_divisor((uint64_t)a->group)};
    const bool window =
        kV != kWgNone && (a->var.window_left >= 0 || a->var.window_right >= 0);
    constexpr bool kCanPair = kV == kWgNone && DPAD >= 128;
    const bool paired = kCanPair && FATTN_WGMMA_PAIRED && a->causal && tiles_q <= 64;
    const bool persistent = FATTN_WGMMA_PERSISTENT && !window && (paired || !a->causal);
    const int64_t halves = ((int64_t)tiles_q + 1) / 2;
    const int64_t work = paired ? halves * pairs.count : (int64_t)tiles_q * pairs.count;
    const int64_t grid = min(work, persistent ? (int64_t)sms : (int64_t)INT_MAX);
    auto kern = paired ? flash_wgmma_kernel<T, DPAD, kV, kCanPair>
                       : flash_wgmma_kernel<T, DPAD, kV, false>;
    if ((e = cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, S::SMEM)) !=
        cudaSuccess)
        return e;
    // A block per tile for a causal problem: tiles heavy first across
    // sections of 2^lg pairs whose K and V fit half the L2 (FlashAttention-3's
    // longest-first order), so the blocks that start last are light ones and
    // the SMs finish together, while a section's pairs share the L2. The
    // paired walk's slots assume lg = 0 (also with FATTN_WGMMA_PERSISTENT=0).
    int lg = 0;
    if (FATTN_WGMMA_LPT && a->causal && !persistent && !paired) {
        int l2 = 0;
        if ((e = cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev)) != cudaSuccess) return e;
        const int64_t kv_pair = (int64_t)4 * a->seq_kv * a->head_dim;   // K and V, 16-bit
        while (lg < 20 && pairs.count % ((int64_t)2 << lg) == 0 &&
               ((int64_t)2 << lg) * kv_pair <= l2 / 2)
            lg++;
    }
    const Walk walk{make_divisor((uint64_t)halves), make_divisor((uint64_t)tiles_q << lg), lg};
    kern<<<(unsigned)grid, S::NT, S::SMEM, stream>>>(*a, maps, pairs, tiles_q, tma, walk);
    return cudaGetLastError();
}

// The family (WgVar) of a problem, -1 for one the kernel does not take: a
// bias in a dtype other than the problem's (the planner's wgmma_check
// routes it to flash_mma.cuh, as it does head_dim_v and ragged batches).
int wg_mode(const fattn_cuda_args *a) {
    const fattn_cuda_var &v = a->var;
    if (!v.on) return kWgNone;
    const bool cap = v.softcap > 0.f, alibi = v.alibi != nullptr;
    if (v.bias && v.bias_dtype != a->dtype) return -1;
    if (v.bias || (cap && alibi)) return kWgAll;
    if (cap) {
        // kWgCapFixed's bound: K = max(0, 2 c2 - 120) <= 30, c2 = cap log2 e.
        const float c2 = v.softcap * 1.4426950408889634f;
        const bool fixed = a->dtype == FATTN_BF16 && 2.f * c2 - 120.f <= 30.f;
        return fixed ? (v.fast_tanh ? kWgCapFixedApx : kWgCapFixed)
                     : (v.fast_tanh ? kWgCapApx : kWgCap);
    }
    return alibi ? kWgAlibi : kWgMask;
}

// Family kV in the problem's dtype.
template <int DPAD, int kV> cudaError_t launch_as(const fattn_cuda_args *a, cudaStream_t stream) {
    return a->dtype == FATTN_F16 ? launch<__half, DPAD, kV>(a, stream)
                                 : launch<__nv_bfloat16, DPAD, kV>(a, stream);
}

template <int DPAD> cudaError_t launch_dtype(const fattn_cuda_args *a, cudaStream_t stream) {
    switch (wg_mode(a)) {
    case kWgNone: return launch_as<DPAD, kWgNone>(a, stream);
    case kWgMask: return launch_as<DPAD, kWgMask>(a, stream);
    case kWgCap: return launch_as<DPAD, kWgCap>(a, stream);
    case kWgCapApx: return launch_as<DPAD, kWgCapApx>(a, stream);
    case kWgAlibi: return launch_as<DPAD, kWgAlibi>(a, stream);
    case kWgAll: return launch_as<DPAD, kWgAll>(a, stream);
    // bf16 only (wg_mode): no f16 instances.
    case kWgCapFixed: return launch<__nv_bfloat16, DPAD, kWgCapFixed>(a, stream);
    case kWgCapFixedApx: return launch<__nv_bfloat16, DPAD, kWgCapFixedApx>(a, stream);
    default: return cudaErrorInvalidValue;
    }
}

#endif   // a bucket the kernel takes

}   // namespace

namespace {
// The tiles of bucket DPAD: the bias shape's under `all` (kWgAll).
template <int DPAD> void tiles(int all, int *block_m, int *block_n, int *smem_bytes) {
    using A = WgShape<DPAD, true>;
    using P = WgShape<DPAD, false>;
    *block_m = all ? A::BM : P::BM;
    *block_n = all ? A::BN : P::BN;
    *smem_bytes = all ? A::SMEM : P::SMEM;
}
}   // namespace

extern "C" void fattn_cuda_flash_wgmma_tiles(int dpad, int all, int *block_m, int *block_n,
                                             int *smem_bytes) {
    *block_m = *block_n = *smem_bytes = 0;
#if FATTN_CUDA_DPAD_64
    if (dpad == 64) tiles<64>(all, block_m, block_n, smem_bytes);
#endif
#if FATTN_CUDA_DPAD_128
    if (dpad == 128) tiles<128>(all, block_m, block_n, smem_bytes);
#endif
#if FATTN_CUDA_DPAD_256
    if (dpad == 256) tiles<256>(all, block_m, block_n, smem_bytes);
#endif
}

extern "C" cudaError_t fattn_cuda_flash_wgmma(const fattn_cuda_args *a, int dpad,
                                              cudaStream_t stream) {
    if (a->batch <= 0 || a->heads_q <= 0 || a->seq_q <= 0) return cudaSuccess;
    if (a->rag.on || a->head_dim_v != a->head_dim || a->head_dim > dpad ||
        (a->dtype != FATTN_F16 && a->dtype != FATTN_BF16))
        return cudaErrorInvalidValue;
#if FATTN_CUDA_DPAD_64
    if (dpad == 64) return launch_dtype<64>(a, stream);
#endif
#if FATTN_CUDA_DPAD_128
    if (dpad == 128) return launch_dtype<128>(a, stream);
#endif
#if FATTN_CUDA_DPAD_256
    if (dpad == 256) return launch_dtype<256>(a, stream);
#endif
    return cudaErrorInvalidValue;
}

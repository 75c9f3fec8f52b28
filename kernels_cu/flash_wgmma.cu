// The Hopper kernel (issue 15), first version: FlashAttention-2's loop with
// both products on wgmma.mma_async (sm_90a), f16 and bf16, dense batches,
// no variants (the planner routes the rest to flash_mma.cuh).
//
// Design (v0; TMA, warp specialisation and the FlashAttention-3 overlaps
// are the next steps, see bench/NOTES.md; issuing Q K^T of tile j with P V
// of tile j - 1 inside this lockstep two-warpgroup loop ran 25% slower,
// call92):
// - A block is two warpgroups (256 threads) over BM = 128 query rows,
//   64 per warpgroup: wgmma's M. Keys come in tiles of BN = 128.
// - Shared memory: Q, then STAGES stages of K and V, each tile stored as
//   DPAD / 64 column blocks of [rows][64 elements] (128-byte rows) with the
//   128-byte swizzle (16-byte chunk c of row r at chunk c ^ (r % 8)): the
//   canonical layout wgmma reads through a descriptor, K-major for Q and K,
//   MN-major (transposed B) for V, filled by 16-byte cp.async from every
//   thread (zero-filled past the head dim, seq_q and seq_kv; element loads
//   for an operand whose rows do not start on 16 bytes).
// - S = Q K^T: DPAD / 16 wgmma m64n128k16 from shared memory; the online
//   softmax on the accumulators (a row's 32 values live in a lane quad);
//   P rounded to the storage type as wgmma's register A operand;
//   O += P V: BN / 16 wgmma m64nDPADk16.
// - Both warpgroups share each K/V tile; tile j + 1 loads while j computes.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <type_traits>

#include "params.h"
#include "device_util.cuh"
#include "mma_sm80.cuh"
#include "wgmma_sm90.cuh"

namespace fattn_wgmma_shapes {
template <int DPAD> struct WgShape {
    static constexpr int BM = 128, BN = 128, NWG = 2, NT = 128 * NWG, STAGES = 2;
    static constexpr int CB = DPAD / 64;            // 128-byte column blocks of a row
    static constexpr int Q_BYTES = BM * DPAD * 2;   // one tile; K and V tiles: KV_BYTES each
    static constexpr int KV_BYTES = BN * DPAD * 2;
    // +1024: the swizzle pattern repeats every 1024 bytes, and the dynamic
    // shared memory base is only promised 16-byte alignment.
    static constexpr int SMEM = Q_BYTES + STAGES * 2 * KV_BYTES + 1024;
};
}   // namespace fattn_wgmma_shapes

namespace {

using fattn_wgmma_shapes::WgShape;

#if (FATTN_CUDA_DPAD_64 || FATTN_CUDA_DPAD_128)

template <int N> __device__ __forceinline__ void cp_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

// Byte offset of 16-byte chunk c (of DPAD / 8) of row r in a tile of R rows
// (the swizzled layout above).
template <int R> __device__ __forceinline__ int tile_off(int r, int c) {
    return (c >> 3) * (R * 128) + r * 128 + (((c & 7) ^ (r & 7)) << 4);
}

}   // namespace

// Device helpers, in a named namespace: in the anonymous one nvcc warns
// (#177) about functions a compilation pass leaves unreferenced.
namespace fattn_wgmma_dev {
// A shared-memory matrix descriptor, 128-byte swizzle: start address,
// leading and stride byte offsets (16-byte units).
__device__ __forceinline__ uint64_t smem_desc(const void *p, uint32_t lbo, uint32_t sbo) {
    const uint64_t a = (smem_u32(p) & 0x3FFFF) >> 4;
    return a | (uint64_t)((lbo >> 4) & 0x3FFF) << 16 | (uint64_t)((sbo >> 4) & 0x3FFF) << 32 |
           (uint64_t)1 << 62;
}

__device__ __forceinline__ void wg_fence() {
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void wg_commit() {
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void wg_wait0() {
    asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
}
// The generic proxy's shared-memory writes (cp.async, stores) made visible
// to the async proxy that wgmma reads through.
__device__ __forceinline__ void proxy_fence() {
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}
}   // namespace fattn_wgmma_dev

namespace {
using namespace fattn_wgmma_dev;

// Rows [0, R) of a tile from global rows g (row stride ss elements), rows
// at and past `valid` and elements at and past D zero-filled; each of the
// NT threads moves chunks tid, tid + NT, ... by 16-byte cp.async where the
// rows start on 16 bytes (vec), else by element loads and a shared store.
template <typename T, int DPAD, int R, int NT>
__device__ __forceinline__ void load_tile(unsigned char *dst, const T *g, int64_t ss, int valid,
                                          int D, int tid, bool vec) {
    constexpr int CPR = DPAD / 8;   // chunks per row
#pragma unroll
    for (int i = tid; i < R * CPR; i += NT) {
        const int r = i / CPR, c = i % CPR;
        const int n = r < valid ? min(max(D - c * 8, 0), 8) : 0;
        if (vec) {
            cp_async16_part(dst + tile_off<R>(r, c), n ? g + r * ss + c * 8 : g, n * 2);
        } else {
            *reinterpret_cast<uint4 *>(dst + tile_off<R>(r, c)) =
                gather16<uint16_t>(n ? g + r * ss : g, c * 8, n);
        }
    }
}

template <typename T, int DPAD>
__global__ void __launch_bounds__(WgShape<DPAD>::NT, 1)
    flash_wgmma_kernel(fattn_cuda_args a, Pairs pairs, int vec) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
    using S = WgShape<DPAD>;
    constexpr int BM = S::BM, BN = S::BN, NT = S::NT, NS = BN / 8, ND = DPAD / 8;
    extern __shared__ unsigned char smem_raw[];
    unsigned char *smem = reinterpret_cast<unsigned char *>(
        (reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~(uintptr_t)1023);
    unsigned char *qs = smem, *kv = smem + S::Q_BYTES;   // stage s: K at kv + 2 s KV, V after it

    const int tid = threadIdx.x, wg = tid >> 7, warp = (tid >> 5) & 3, lane = tid & 31;
    int64_t b, h, hk;
    block_pair(a, pairs, b, h, hk);
    // Heavy (late, for causal) query tiles first.
    const int m0 = (int)(gridDim.x - 1 - blockIdx.x) * BM;
    const int D = a.head_dim, seq_q = a.seq_q, seq_kv = a.seq_kv, off = a.causal_offset;

    const T *qg = static_cast<const T *>(a.q) + b * a.q_sb + h * a.q_sh + (int64_t)m0 * a.q_ss;
    const T *kg = static_cast<const T *>(a.k) + b * a.k_sb + hk * a.k_sh;
    const T *vg = static_cast<const T *>(a.v) + b * a.v_sb + hk * a.v_sh;

    // Keys past the last one the block's last stored row sees are skipped;
    // tiles before jmask are visible to every row of the block.
    int64_t kv_end = seq_kv;
    if (a.causal) kv_end = min(kv_end, min((int64_t)m0 + BM, (int64_t)seq_q) + off);
    const int ntiles = kv_end > 0 ? (int)((kv_end + BN - 1) / BN) : 0;
    int jmask = seq_kv / BN;
    if (a.causal) jmask = min(jmask, (int)(max((int64_t)0, (int64_t)m0 + off + 1) / BN));

    load_tile<T, DPAD, BM, NT>(qs, qg, a.q_ss, seq_q - m0, D, tid, vec & 1);
    auto load_kv = [&](int j) {
        if (j < ntiles) {
            unsigned char *st = kv + (j % S::STAGES) * 2 * S::KV_BYTES;
            const int64_t k0 = (int64_t)j * BN;
            load_tile<T, DPAD, BN, NT>(st, kg + k0 * a.k_ss, a.k_ss, (int)(seq_kv - k0), D, tid,
                                       vec & 2);
            load_tile<T, DPAD, BN, NT>(st + S::KV_BYTES, vg + k0 * a.v_ss, a.v_ss,
                                       (int)(seq_kv - k0), D, tid, vec & 4);
        }
        cp_async_commit();
    };
    load_kv(0);   // with Q: one group

    // This thread's rows of the warpgroup's 64: r_lo and r_lo + 8 of warp's 16.
    const int r_lo = wg * 64 + warp * 16 + (lane >> 2);
    float o[DPAD / 2];
#pragma unroll
    for (int i = 0; i < DPAD / 2; i++) o[i] = 0.f;
    float mrow[2] = {-INFINITY, -INFINITY}, lrow[2] = {0.f, 0.f};
    const float sc = a.scale_log2;
    float s[BN / 2];   // the score tile's accumulators (the first k-step overwrites them)
#pragma unroll
    for (int i = 0; i < BN / 2; i++) s[i] = 0.f;

    for (int j = 0; j < ntiles; j++) {
        load_kv(j + 1);
        cp_wait<1>();   // tile j (and Q) landed for this thread
        proxy_fence();
        __syncthreads();   // and for every thread
        const unsigned char *ks = kv + (j % S::STAGES) * 2 * S::KV_BYTES, *vs = ks + S::KV_BYTES;

        // S = Q K^T over DPAD / 16 k-steps: k-step kk reads bytes 32 (kk % 4)
        // of column block kk / 4.
        wg_fence();
#pragma unroll
        for (int kk = 0; kk < DPAD / 16; kk++) {
            const uint64_t da =
                smem_desc(qs + (kk >> 2) * (BM * 128) + wg * 64 * 128 + (kk & 3) * 32, 16, 1024);
            const uint64_t db = smem_desc(ks + (kk >> 2) * (BN * 128) + (kk & 3) * 32, 16, 1024);
            Wgmma<T, BN>::template ss<0>(s, da, db, kk > 0);
        }
        wg_commit();
        wg_wait0();

        // Mask (keys past seq_kv, causal) where the tile needs it.
        const int kv0 = j * BN;
        if (j >= jmask) {
#pragma unroll
            for (int n = 0; n < NS; n++)
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    const int col = kv0 + n * 8 + (lane & 3) * 2 + (e & 1);
                    const int64_t row = (int64_t)m0 + r_lo + (e >> 1) * 8;
                    if (col >= seq_kv || (a.causal && col > row + off)) s[n * 4 + e] = -INFINITY;
                }
        }
        // Online softmax (log2 units) per row half hh; P into A fragments.
        uint32_t pa[BN / 16][4];
#pragma unroll
        for (int hh = 0; hh < 2; hh++) {
            float mx = -INFINITY;
#pragma unroll
            for (int n = 0; n < NS; n++)
                mx = fmaxf(mx, fmaxf(s[n * 4 + 2 * hh], s[n * 4 + 2 * hh + 1]));
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
            const float mnew = fmaxf(mrow[hh], mx * sc);
            const float mu = mnew == -INFINITY ? 0.f : mnew;
            const float alpha = ex2(mrow[hh] - mu);
            mrow[hh] = mnew;
            float sum = 0.f;
#pragma unroll
            for (int n = 0; n < NS; n++) {
                const float p0 = ex2(fmaf(s[n * 4 + 2 * hh], sc, -mu));
                const float p1 = ex2(fmaf(s[n * 4 + 2 * hh + 1], sc, -mu));
                sum += p0 + p1;
                // Key block n / 2 (16 keys): registers 0/1 from its first 8
                // columns, 2/3 from its second; hh picks the row half.
                pa[n >> 1][(n & 1) * 2 + hh] = pack2<T>(p0, p1);
            }
            lrow[hh] = lrow[hh] * alpha + sum;
#pragma unroll
            for (int d = 0; d < ND; d++) o[d * 4 + 2 * hh] *= alpha, o[d * 4 + 2 * hh + 1] *= alpha;
        }

        // O += P V: BN / 16 k-steps of 16 keys; V is B in MN-major form:
        // LBO = the stride between 64-column blocks, SBO = 8 keys.
        wg_fence();
#pragma unroll
        for (int kb = 0; kb < BN / 16; kb++) {
            const uint64_t db = smem_desc(vs + kb * 16 * 128, BN * 128, 1024);
            Wgmma<T, DPAD>::template rs<1>(o, pa[kb], db, 1);
        }
        wg_commit();
        wg_wait0();
        __syncthreads();   // the stage is read before tile j + 2 overwrites it
    }

    // Epilogue: O = acc / l, rows below seq_q; lse = m + log2 l in natural units.
    T *og = static_cast<T *>(a.o) + b * a.o_sb + h * a.o_sh;
#pragma unroll
    for (int hh = 0; hh < 2; hh++) {
        float l = lrow[hh];
        l += __shfl_xor_sync(0xffffffffu, l, 1);
        l += __shfl_xor_sync(0xffffffffu, l, 2);
        const int64_t i = (int64_t)m0 + r_lo + hh * 8;
        if (i >= seq_q) continue;
        const float inv = l == 0.f ? 0.f : 1.f / l;
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
                l == 0.f ? -INFINITY : (mrow[hh] + log2f(l)) * kLn2;
    }
#endif
}

// Whether an operand's rows start on 16 bytes: its first element and each
// stride whose index can be non-zero.
inline bool rows16(const void *p, int64_t sb, int64_t nb, int64_t sh, int64_t nh, int64_t ss,
                   int64_t ns) {
    return (reinterpret_cast<uintptr_t>(p) & 15) == 0 && (nb <= 1 || sb % 8 == 0) &&
           (nh <= 1 || sh % 8 == 0) && (ns <= 1 || ss % 8 == 0);
}

template <typename T, int DPAD> cudaError_t launch(const fattn_cuda_args *a, cudaStream_t stream) {
    using S = WgShape<DPAD>;
    const int64_t hkv = a->heads_q / a->group;
    const int vec =
        (rows16(a->q, a->q_sb, a->batch, a->q_sh, a->heads_q, a->q_ss, a->seq_q) ? 1 : 0) |
        (rows16(a->k, a->k_sb, a->batch, a->k_sh, hkv, a->k_ss, a->seq_kv) ? 2 : 0) |
        (rows16(a->v, a->v_sb, a->batch, a->v_sh, hkv, a->v_ss, a->seq_kv) ? 4 : 0);
    auto kern = flash_wgmma_kernel<T, DPAD>;
    cudaError_t e =
        cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, S::SMEM);
    if (e != cudaSuccess) return e;
    const unsigned tiles_q = (unsigned)(((int64_t)a->seq_q + S::BM - 1) / S::BM);
    return launch_pairs(*a, tiles_q, [&](const Pairs &pairs, dim3 grid) {
        flash_wgmma_kernel<T, DPAD><<<grid, S::NT, S::SMEM, stream>>>(*a, pairs, vec);
    });
}

template <int DPAD> cudaError_t launch_dtype(const fattn_cuda_args *a, cudaStream_t stream) {
    return a->dtype == FATTN_F16 ? launch<__half, DPAD>(a, stream)
                                 : launch<__nv_bfloat16, DPAD>(a, stream);
}

#endif   // a bucket the kernel takes

}   // namespace

extern "C" void fattn_cuda_flash_wgmma_tiles(int dpad, int *block_m, int *block_n,
                                             int *smem_bytes) {
    *block_m = *block_n = *smem_bytes = 0;
#if FATTN_CUDA_DPAD_64
    if (dpad == 64)
        *block_m = WgShape<64>::BM, *block_n = WgShape<64>::BN, *smem_bytes = WgShape<64>::SMEM;
#endif
#if FATTN_CUDA_DPAD_128
    if (dpad == 128)
        *block_m = WgShape<128>::BM, *block_n = WgShape<128>::BN, *smem_bytes = WgShape<128>::SMEM;
#endif
}

extern "C" cudaError_t fattn_cuda_flash_wgmma(const fattn_cuda_args *a, int dpad,
                                              cudaStream_t stream) {
    if (a->batch <= 0 || a->heads_q <= 0 || a->seq_q <= 0) return cudaSuccess;
    if (a->rag.on || a->var.on || a->head_dim_v != a->head_dim || a->head_dim > dpad ||
        (a->dtype != FATTN_F16 && a->dtype != FATTN_BF16))
        return cudaErrorInvalidValue;
#if FATTN_CUDA_DPAD_64
    if (dpad == 64) return launch_dtype<64>(a, stream);
#endif
#if FATTN_CUDA_DPAD_128
    if (dpad == 128) return launch_dtype<128>(a, stream);
#endif
    return cudaErrorInvalidValue;
}

// Helpers the CUDA kernels share: the (batch, head) grid folding, shared-
// memory addresses, cp.async and the hardware exp2. Every function is inline
// in the including file's anonymous namespace.
#ifndef FATTN_DEVICE_UTIL_CUH
#define FATTN_DEVICE_UTIL_CUH

#include <stdint.h>

#include <cuda_runtime.h>

#include "params.h"

namespace {

// ln(2): the kernels keep the log-sum-exp in base 2 and convert once per row.
constexpr float kLn2 = 0.69314718055994531f;

// n / d for n < 2^63 by multiply and shift (Granlund-Montgomery, as
// CUTLASS's FastDivmod, in 64 bits): the kernels' only divisions by run-time
// sizes. A 64-bit `/` would be a call into a division routine, whose calling
// convention changes the tensor-core kernels' register allocation.
struct Divisor {
    uint64_t mul;
    int shift;
};

// shift = ceil(log2 d), mul = floor(2^64 (2^shift - d) / d) + 1; d >= 1.
inline Divisor make_divisor(uint64_t d) {
    int l = 0;
    while (l < 63 && ((uint64_t)1 << l) < d) ++l;
    const unsigned __int128 num = (unsigned __int128)(((uint64_t)1 << l) - d) << 64;
    return Divisor{(uint64_t)(num / d) + 1, l};
}

// floor(n / d): umulhi(n, mul) + n < 2^64 since n < 2^63.
__host__ __device__ __forceinline__ int64_t divide(int64_t n, Divisor d) {
#ifdef __CUDA_ARCH__
    const uint64_t hi = __umul64hi((uint64_t)n, d.mul);
#else
    const uint64_t hi = (uint64_t)(((unsigned __int128)(uint64_t)n * d.mul) >> 64);
#endif
    return (int64_t)((hi + (uint64_t)n) >> d.shift);
}

// The same for 32-bit numerators (n < 2^31, d >= 1): one IMAD.HI, an add and
// a shift, where the 64-bit form costs a dozen instructions in a hot loop.
// shift = ceil(log2 d), mul = floor(2^32 (2^shift - d) / d) + 1 (< 2^32).
struct Divisor32 {
    uint32_t mul;
    int shift;
};

inline Divisor32 make_divisor32(uint32_t d) {
    int l = 0;
    while (l < 31 && ((uint32_t)1 << l) < d) ++l;
    const uint64_t num = (((uint64_t)1 << l) - d) << 32;
    return Divisor32{(uint32_t)(num / d + 1), l};
}

// floor(n / d): umulhi(n, mul) <= n, so the sum stays below 2^32.
__host__ __device__ __forceinline__ int divide32(int n, Divisor32 d) {
#ifdef __CUDA_ARCH__
    const uint32_t hi = __umulhi((uint32_t)n, d.mul);
#else
    const uint32_t hi = (uint32_t)(((uint64_t)(uint32_t)n * d.mul) >> 32);
#endif
    return (int)((hi + (uint32_t)n) >> d.shift);
}

// A launch's (batch, head) pairs: they fold into grid y (fastest) and z,
// each at most 65535, in the order a (head, batch) grid had, starting at bh0.
struct Pairs {
    int64_t bh0, count;   // count: batch * heads_q, over all launches
    Divisor heads_q, group;
};

// Enqueues launch(pairs, grid) over every pair: whole rows of 65535 pairs in
// one launch, the rest in a second, so that no block lies past the last pair
// (an early exit would change the tensor-core kernels' register allocation);
// repeated per 65535^2 pairs. grid_x is the caller's (query tiles or rows).
// Returns the first launch error.
template <typename Launch>
cudaError_t launch_pairs(const fattn_cuda_args &a, unsigned grid_x, Launch launch) {
    constexpr int64_t yz = 65535;
    const int64_t count = a.batch * a.heads_q;   // validated: no overflow
    Pairs p{0, count, make_divisor((uint64_t)a.heads_q), make_divisor((uint64_t)a.group)};
    while (p.bh0 < count) {
        const int64_t left = count - p.bh0, rows = left / yz < yz ? left / yz : yz;
        const dim3 grid =
            rows ? dim3(grid_x, (unsigned)yz, (unsigned)rows) : dim3(grid_x, (unsigned)left, 1);
        launch(p, grid);
        const cudaError_t e = cudaGetLastError();
        if (e != cudaSuccess) return e;
        p.bh0 += (int64_t)grid.y * grid.z;
    }
    return cudaSuccess;
}

// This block's pair index b * heads_q + h.
__device__ __forceinline__ int64_t block_bh(const Pairs &p) {
    return p.bh0 + (int64_t)blockIdx.z * gridDim.y + blockIdx.y;
}

// This block's batch b, query head h and K/V head hk, in 64 bits. No block
// lies past the last pair (launch_pairs); the guard costs one branch, and
// with it the tensor-core kernels keep the registers and the instruction
// schedule they had with (head, batch) grids, where without it they do not.
__device__ __forceinline__ void block_pair_at(const fattn_cuda_args &a, const Pairs &p, int64_t bh,
                                              int64_t &b, int64_t &h, int64_t &hk) {
    b = h = hk = 0;
    if (bh >= p.count) return;
    b = divide(bh, p.heads_q);
    h = bh - b * a.heads_q;
    hk = divide(h, p.group);
}
__device__ __forceinline__ void block_pair(const fattn_cuda_args &a, const Pairs &p, int64_t &b,
                                           int64_t &h, int64_t &hk) {
    block_pair_at(a, p, block_bh(p), b, h, hk);
}

// The block's grid-x index and pair index bh when the launch's blocks run
// pairs fastest: consecutive blocks are one x index's (query tile's) pairs,
// so blocks that read the same data for every head (a bias plane broadcast
// over heads) run together and share it in L2. One 64-bit division per
// block.
__device__ __forceinline__ void block_x_pair_pairs_first(const Pairs &p, unsigned &x, int64_t &bh) {
    const uint64_t np = (uint64_t)gridDim.y * gridDim.z;
    const uint64_t lin =
        blockIdx.x + (uint64_t)gridDim.x * (blockIdx.y + (uint64_t)gridDim.y * blockIdx.z);
    x = (unsigned)(lin / np);
    bh = p.bh0 + (int64_t)(lin % np);
}

__device__ __forceinline__ unsigned smem_u32(const void *p) {
    return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

// 16 bytes global -> shared, asynchronous from compute capability 8.0 (a plain
// copy below it, where the waits are no-ops). dst and src 16-byte aligned.
__device__ __forceinline__ void cp_async16(void *dst, const void *src) {
#if __CUDA_ARCH__ >= 800
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(smem_u32(dst)), "l"(src)
                 : "memory");
#else
    *static_cast<float4 *>(dst) = *static_cast<const float4 *>(src);
#endif
}
// cp_async16 of the first `bytes` (0..16) of src, the rest of dst zeroed;
// nothing past them is read.
__device__ __forceinline__ void cp_async16_part(void *dst, const void *src, int bytes) {
#if __CUDA_ARCH__ >= 800
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_u32(dst)), "l"(src),
                 "r"(bytes)
                 : "memory");
#else
    unsigned char *d = static_cast<unsigned char *>(dst);
    for (int k = 0; k < 16; ++k) d[k] = k < bytes ? static_cast<const unsigned char *>(src)[k] : 0;
#endif
}
// Elements d0 .. d0+n-1 of a row (B: the storage type's bits, 2 or 4 bytes;
// n at most 16 bytes' worth) as 16 bytes, zeros after them: element loads,
// for rows that are not 16-byte aligned.
template <typename B> __device__ __forceinline__ uint4 gather16(const void *row, int d0, int n) {
    const B *p = static_cast<const B *>(row) + d0;
    uint32_t w[4];
#pragma unroll
    for (int k = 0; k < 4; k++) {
        if constexpr (sizeof(B) == 4) {
            w[k] = k < n ? p[k] : 0u;
        } else {
            const uint32_t lo = 2 * k < n ? p[2 * k] : 0u, hi = 2 * k + 1 < n ? p[2 * k + 1] : 0u;
            w[k] = lo | hi << 16;
        }
    }
    return make_uint4(w[0], w[1], w[2], w[3]);
}

__device__ __forceinline__ void cp_async_commit() {
#if __CUDA_ARCH__ >= 800
    asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void cp_async_wait_all() {
#if __CUDA_ARCH__ >= 800
    asm volatile("cp.async.wait_group 0;\n" ::: "memory");
#endif
}

// exp2f as the hardware does it (what --use_fast_math makes of exp2f):
// ex2(-inf) = 0, relative error ~2^-22, subnormal results flushed to 0, all
// far below what the storage types keep and what float32 accumulation loses.
__device__ __forceinline__ float ex2(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
    return y;
}

}   // namespace

#endif

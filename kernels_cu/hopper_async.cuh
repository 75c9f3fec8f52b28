// Hopper's asynchronous machinery (sm_90a), as kernels_cu/flash_wgmma.cu
// uses it: wgmma's shared-memory descriptors and its fence/commit/wait,
// mbarriers (arrive, expected transaction bytes, parity waits), the tensor
// copy engine (TMA) loading a 4-d box into shared memory, named barriers,
// and setmaxnreg. Each is one PTX instruction or a short loop of them.
// Device-only, in a named namespace: in the anonymous one nvcc warns (#177)
// about helpers a compilation pass leaves unreferenced.
#ifndef FATTN_HOPPER_ASYNC_CUH
#define FATTN_HOPPER_ASYNC_CUH

#include <stdint.h>

#include "device_util.cuh"

namespace fattn_hopper {

// A shared-memory matrix descriptor, 128-byte swizzle: start address,
// leading and stride byte offsets (16-byte units), mode 1 in bits 62-63.
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
// Until at most N of this warpgroup's committed wgmma groups are pending.
template <int N> __device__ __forceinline__ void wg_wait() {
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
// This thread's generic-proxy shared-memory writes (plain stores) made
// visible to the async proxy (wgmma, TMA) before a barrier publishes them.
__device__ __forceinline__ void proxy_fence() {
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

// ---- mbarriers (addresses are shared-window addresses, smem_u32) ----------
__device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
// Makes the initialised barriers visible to the async proxy (TMA's
// complete_tx); a block barrier follows before any thread uses them.
__device__ __forceinline__ void mbar_init_fence() {
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}
__device__ __forceinline__ void mbar_arrive(uint32_t bar) {
    asm volatile("{\n.reg .b64 st;\nmbarrier.arrive.shared::cta.b64 st, [%0];\n}\n" ::"r"(bar)
                 : "memory");
}
// One arrival that also expects `bytes` more of transactions (TMA) before
// the phase completes.
__device__ __forceinline__ void mbar_expect_tx(uint32_t bar, uint32_t bytes) {
    asm volatile(
        "{\n.reg .b64 st;\nmbarrier.arrive.expect_tx.shared::cta.b64 st, [%0], %1;\n}\n" ::"r"(bar),
        "r"(bytes)
        : "memory");
}
// Until the phase of parity `parity` has completed.
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
    asm volatile("{\n.reg .pred p;\nWAIT:\n"
                 "mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n"
                 "@!p bra WAIT;\n}\n" ::"r"(bar),
                 "r"(parity)
                 : "memory");
}

// ---- the tensor copy engine ------------------------------------------------
// The box at coordinates (c0 innermost .. c3) of the tensor map at `map` (a
// __grid_constant__ kernel parameter) into shared memory at dst, completing
// its bytes on the mbarrier at bar. Elements outside the tensor arrive as 0.
__device__ __forceinline__ void tma_load4(uint32_t dst, const void *map, int c0, int c1, int c2,
                                          int c3, uint32_t bar) {
    asm volatile("cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%2, %3, %4, %5}], [%6];\n" ::"r"(dst),
                 "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(bar)
                 : "memory");
}

// ---- named barriers (0 is __syncthreads') ----------------------------------
template <int N> __device__ __forceinline__ void bar_sync(int id) {
    asm volatile("bar.sync %0, %1;\n" ::"r"(id), "n"(N) : "memory");
}
template <int N> __device__ __forceinline__ void bar_arrive(int id) {
    asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "n"(N) : "memory");
}

// ---- registers per thread of a warpgroup -----------------------------------
template <int R> __device__ __forceinline__ void regs_dec() {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(R));
}
template <int R> __device__ __forceinline__ void regs_inc() {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(R));
}

}   // namespace fattn_hopper

#endif

// Device helpers the CUDA kernels share: shared-memory addresses, cp.async
// and the hardware exp2. Every function is inline in the including file's
// anonymous namespace.
#ifndef FATTN_DEVICE_UTIL_CUH
#define FATTN_DEVICE_UTIL_CUH

#include <cuda_runtime.h>

namespace {

__device__ __forceinline__ unsigned smem_u32(const void *p)
{
    return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

// 16 bytes global -> shared, asynchronous from compute capability 8.0 (a plain
// copy below it, where the waits are no-ops). dst and src 16-byte aligned.
__device__ __forceinline__ void cp_async16(void *dst, const void *src)
{
#if __CUDA_ARCH__ >= 800
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(smem_u32(dst)), "l"(src) : "memory");
#else
    *static_cast<float4 *>(dst) = *static_cast<const float4 *>(src);
#endif
}
__device__ __forceinline__ void cp_async_commit()
{
#if __CUDA_ARCH__ >= 800
    asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void cp_async_wait_all()
{
#if __CUDA_ARCH__ >= 800
    asm volatile("cp.async.wait_group 0;\n" ::: "memory");
#endif
}

// exp2f as the hardware does it (what --use_fast_math makes of exp2f):
// ex2(-inf) = 0, relative error ~2^-22, subnormal results flushed to 0, all
// far below what the storage types keep and what float32 accumulation loses.
__device__ __forceinline__ float ex2(float x)
{
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
    return y;
}

}  // namespace

#endif

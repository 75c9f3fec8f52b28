/* The tensor-core kernel's variant families (flash_mma.cuh, MmaVar) for
 * dense problems: a file of their own so that they compile in
 * parallel with the others. */
#include "flash_mma.cuh"

extern "C" cudaError_t fattn_cuda_flash_mma_var(const fattn_cuda_args *a, int dpad, int mode,
                                                cudaStream_t stream) {
#if FATTN_CUDA_DPAD_32 || FATTN_CUDA_DPAD_64 || FATTN_CUDA_DPAD_128 || FATTN_CUDA_DPAD_256
    return for_bucket(
        dpad, [&](auto d) { return launch_var<decltype(d)::value, false>(a, mode, stream); });
#else
    (void)a, (void)dpad, (void)mode, (void)stream;
    return cudaErrorInvalidValue;
#endif
}

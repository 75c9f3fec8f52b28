/* The tensor-core kernel's entry points and its plain instances, dense and
 * ragged (flash_mma.cuh); problems with variants or head_dim_v go to the
 * variant families, built in files of their own (flash_mma_var*.cu). */
#include "flash_mma.cuh"

extern "C" cudaError_t fattn_cuda_flash_mma(const fattn_cuda_args *a, int dpad,
                                            cudaStream_t stream) {
    (void)stream; /* unused only when no bucket is built */
    if (!a || (a->dtype != FATTN_F16 && a->dtype != FATTN_BF16) || a->group < 1 ||
        a->head_dim > dpad || a->head_dim_v < 1 || a->head_dim_v > dpad)
        return cudaErrorInvalidValue;
    if (a->seq_q <= 0 || a->heads_q <= 0 || a->batch <= 0)
        return cudaSuccess; /* nothing to compute */
    if (a->causal && (a->causal_offset < -a->seq_q || a->causal_offset > a->seq_kv - 1))
        return cudaErrorInvalidValue; /* the kernel's int arithmetic relies on the range (params.h) */
#if FATTN_CUDA_DPAD_32 || FATTN_CUDA_DPAD_64 || FATTN_CUDA_DPAD_128 || FATTN_CUDA_DPAD_256
    const int mode = var_mode(a);
    if (mode != kVarNone)
        return a->rag.on ? fattn_cuda_flash_mma_var_ragged(a, dpad, mode, stream)
                         : fattn_cuda_flash_mma_var(a, dpad, mode, stream);
    /* Ragged problems run their own instances: the dense kernel keeps its code. */
    return for_bucket(dpad, [&](auto d) {
        constexpr int DPAD = decltype(d)::value;
        return a->rag.on ? launch_dtype<DPAD, true, kVarNone>(a, stream)
                         : launch_dtype<DPAD, false, kVarNone>(a, stream);
    });
#else
    return cudaErrorInvalidValue;
#endif
}

extern "C" void fattn_cuda_flash_mma_tiles(int dpad, int bias, int *block_m, int *block_n,
                                           int *smem_bytes) {
    int bm = 0, bn = 0, sm = 0;
    (void)dpad, (void)bias;
#if FATTN_CUDA_DPAD_32
    if (dpad == 32) tiles<32>(bias, &bm, &bn, &sm);
#endif
#if FATTN_CUDA_DPAD_64
    if (dpad == 64) tiles<64>(bias, &bm, &bn, &sm);
#endif
#if FATTN_CUDA_DPAD_128
    if (dpad == 128) tiles<128>(bias, &bm, &bn, &sm);
#endif
#if FATTN_CUDA_DPAD_256
    if (dpad == 256) tiles<256>(bias, &bm, &bn, &sm);
#endif
    if (block_m) *block_m = bm;
    if (block_n) *block_n = bn;
    if (smem_bytes) *smem_bytes = sm;
}

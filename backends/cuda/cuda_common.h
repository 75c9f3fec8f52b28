/* The CUDA backend's shared declarations: its per-context state and the
 * error helpers. cuda_backend.c has the vtable, cuda_naive.c the cuBLAS
 * baseline, kernels_cu/ the kernels (through cuda_kernels.h). */
#ifndef FATTN_CUDA_COMMON_H
#define FATTN_CUDA_COMMON_H

#include <cuda_runtime_api.h>

#include "backend.h"
#include "cuda_kernels.h"

/* Fails with the call, cudaGetErrorName and cudaGetErrorString; memory
 * errors become FATTN_ERR_OUT_OF_MEMORY. */
#define CU_TRY(msg, call)                                                                       \
    do {                                                                                        \
        cudaError_t err_ = (call);                                                              \
        if (err_ != cudaSuccess) return cuda_fail((msg), err_, #call);                          \
    } while (0)

fattn_status cuda_fail(fattn_msg *msg, cudaError_t err, const char *what);

typedef struct cuda_state {
    int device;
    struct cudaDeviceProp prop;
    cudaStream_t own_stream;
    cudaStream_t stream;      /* own_stream, or the caller's */
    void *cublas;             /* cublasHandle_t, created on the first naive call */
} cuda_state;

/* A fattn buffer: the device pointer, and whether fattn allocated it (or
 * wraps the caller's). */
typedef struct cuda_buf {
    void *ptr;
    int owned;
} cuda_buf;

static inline void *cuda_ptr(const fattn_operand *op) { return op->mem ? ((const cuda_buf *)op->mem)->ptr : NULL; }

/* Makes the context's device current for this thread. */
fattn_status cuda_use(cuda_state *s, fattn_msg *msg);

/* `bytes` of device memory (1 when 0) for `what` ("a buffer"), by cudaMalloc,
 * or by cudaMallocAsync on the context's stream when async. A size above the
 * device's total memory fails before the driver sees it; every failure names
 * the size and the device's free and total memory. The device must be current. */
fattn_status cuda_alloc(cuda_state *s, const char *what, size_t bytes, int async, void **ptr, fattn_msg *msg);

/* The naive baseline (cuda_naive.c) and its cleanup. */
fattn_status cuda_forward_naive(void *state, const fattn_problem *p, fattn_msg *msg);
void cuda_naive_release(cuda_state *s);

/* The kernels' view of a problem. */
void cuda_args(const fattn_problem *p, fattn_cuda_args *a);

#endif /* FATTN_CUDA_COMMON_H */

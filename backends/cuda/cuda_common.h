/* The CUDA backend's private declarations: its per-context state, its typed
 * plan, and what each file gives the others. The files form layers, each
 * using only those below it:
 *   cuda_device.c  devices, the context state, streams, memory, marks,
 *                  buffers, and the error helpers every layer uses;
 *   cuda_launch.c  the kernels' arguments and the launch of each variant;
 *   cuda_decode.c  the split-KV decode row (kernels_cu/decode.cu), which
 *                  merges its splits with cuda_combine.c's kernel;
 *   cuda_naive.c   the cuBLAS baseline;
 *   cuda_combine.c fattn_combine's row (kernels_cu/combine.cu);
 *   cuda_plan.c    the variant table: which kernel runs, and how;
 *   cuda_cp.c      context parallelism's transfers over NCCL (beside the
 *                  kernels: it uses only the device layer);
 *   cuda_module.c  the vtable, the module's one exported symbol.
 * The kernels (kernels_cu/) are reached through kernels_cu/params.h. */
#ifndef FATTN_CUDA_COMMON_H
#define FATTN_CUDA_COMMON_H

#include <cuda_runtime_api.h>

#include "backend.h"
#include "params.h"

/* ---- cuda_device.c ------------------------------------------------------ */

/* Fails with the call, cudaGetErrorName and cudaGetErrorString; memory
 * errors become FATTN_ERR_OUT_OF_MEMORY. */
#define CU_TRY(msg, call)                                                                          \
    do {                                                                                           \
        cudaError_t err_ = (call);                                                                 \
        if (err_ != cudaSuccess) return cuda_fail((msg), err_, #call);                             \
    } while (0)

fattn_status cuda_fail(fattn_msg *msg, cudaError_t err, const char *what);

/* FATTN_CUDA_KERNEL: the prefill kernel the planner may pick on compute 9.0. */
typedef enum cuda_kernel_pref { CUDA_KERNEL_AUTO, CUDA_KERNEL_WGMMA, CUDA_KERNEL_MMA } cuda_kernel_pref;

typedef struct cuda_state {
    int device;
    /* 1: the caller's context, current on the calling thread, is used as
     * it is: fattn never calls cudaSetDevice. */
    int native_current;
    int small_tiles;         /* settings->cuda_small_tiles, read at open */
    const char *decode_tune; /* settings->decode_tune (lives as long as the context), or NULL */
    cuda_kernel_pref kernel; /* settings->cuda_kernel, read at open */
    struct cudaDeviceProp prop;
    cudaStream_t own_stream;
    cudaStream_t stream; /* own_stream, or the caller's */
    void *cublas;        /* cublasHandle_t, created on the first naive call */
    /* The fault word kernels that read device-resident index tables record
     * bad entries in (FATTN_FAULT_* bits; src/seam/backend.h, fattn_ragged):
     * 4 bytes of device memory, zeroed at open. fault_armed: 0 when no
     * ragged launch was enqueued since the last cuda_take_fault, which then
     * reads nothing; 1 after one; 2 (kept) once one was captured into a CUDA
     * graph, whose replays fattn does not see. */
    unsigned *fault;
    int fault_armed;
    /* Blocks of each decode instance resident per SM, measured on first
     * use (0: not yet): [plain, rescoring][dtype][dpad 64, 128, 256][rows 4, 8, 16]. */
    int decode_occupancy[2][3][3][3];
} cuda_state;

/* A fattn buffer's mem is the device pointer itself (the core keeps whether
 * fattn allocated it); an absent operand is NULL. */
static inline void *cuda_ptr(const fattn_operand *op) { return op->mem; }

/* Makes the context's device current for this thread (nothing to do when
 * the context runs on the caller's current one). */
fattn_status cuda_use(cuda_state *s, fattn_msg *msg);
/* The same for the slots that free and cannot report (close, buffer_free,
 * mark_free): a failure is left to the call that follows. */
void cuda_use_quiet(cuda_state *s);

/* `bytes` of device memory (1 when 0) for `what` ("a buffer"), by cudaMalloc,
 * or by cudaMallocAsync on the context's stream when async. A size above the
 * device's total memory fails before the driver sees it; every failure names
 * the size and the device's free and total memory. The device must be current. */
fattn_status cuda_alloc(cuda_state *s, const char *what, size_t bytes, int async, void **ptr,
                        fattn_msg *msg);

/* The vtable's device and buffer slots (backend.h says what each does). */
void cuda_probe(const fattn_settings *settings, fattn_probe *out);
fattn_status cuda_device_name(const fattn_settings *settings, int device, char *buf, size_t len,
                              fattn_msg *msg);
fattn_status cuda_open(const fattn_open_args *args, void **state, fattn_msg *msg);
/* Frees the state after the layers above released what they hold in it. */
void cuda_close_state(cuda_state *s);
fattn_status cuda_set_stream(void *state, void *native, fattn_msg *msg);
fattn_status cuda_synchronize(void *state, fattn_msg *msg);
fattn_status cuda_buffer_alloc(void *state, size_t bytes, void **mem, fattn_msg *msg);
fattn_status cuda_buffer_wrap(void *state, void *native, size_t bytes, void **mem, fattn_msg *msg);
void cuda_buffer_free(void *state, void *mem, int owned);
fattn_status cuda_buffer_write(void *state, void *mem, size_t offset, const void *src, size_t bytes,
                               fattn_msg *msg);
fattn_status cuda_buffer_read(void *state, void *mem, size_t offset, void *dst, size_t bytes,
                              fattn_msg *msg);
void *cuda_buffer_native(void *state, void *mem);
fattn_status cuda_buffer_region(void *state, void *mem, const void **root, uint64_t *start,
                                fattn_msg *msg);
fattn_status cuda_device_memory(void *state, uint64_t *used, uint64_t *total, fattn_msg *msg);
/* The vtable's take_fault: the context's fault word, read (blocking, on the
 * context's stream) and cleared when a ragged launch may have written it. */
fattn_status cuda_take_fault(void *state, fattn_msg *msg);
fattn_status cuda_mark(void *state, void **mark, fattn_msg *msg);
fattn_status cuda_mark_elapsed(void *state, void *start, void *stop, double *ms, fattn_msg *msg);
void cuda_mark_free(void *state, void *mark);

/* ---- The plan (filled by cuda_plan.c, read by the launchers) ------------- */

/* The rows of the variant table, in the order the planner tries them. */
typedef enum cuda_variant {
    CUDA_VARIANT_DECODE = 0,  /* split-KV decoding with GQA packing: seq_q <= 16 */
    CUDA_VARIANT_WGMMA = 1,   /* Hopper (wgmma, sm_90a): f16/bf16 prefill on compute 9.0 */
    CUDA_VARIANT_MMA = 2,     /* tensor cores (mma.sync): f16/bf16 on compute 8.0+ */
    CUDA_VARIANT_SIMT = 3,    /* CUDA cores: f32 anywhere, f16/bf16 below 8.0 */
    CUDA_VARIANT_NAIVE = 4,   /* cuBLAS, S and P materialised: the baseline */
    CUDA_VARIANT_COMBINE = 5, /* fattn_combine: the log-sum-exp merge of partial results */
    CUDA_VARIANT_COUNT
} cuda_variant;

/* How a variant runs: the typed view of fattn_plan's area. */
typedef struct cuda_plan {
    int dpad;      /* mma, simt, decode: the head-dim bucket whose instance runs (32..256) */
    int small;     /* simt: 1 = the small-shared-memory tile shape */
    int br;        /* decode: packed query rows per block (4, 8, 16) */
    int row_tiles; /* decode: blocks per (sequence, K/V head) along the rows */
    int splits;    /* decode: key splits; 1 = no workspace, no combine */
    int rescore;   /* decode: 1 = the instance for softcap, ALiBi and bias */
} cuda_plan;
FATTN_PLAN_FITS(cuda_plan);

/* ---- cuda_launch.c ------------------------------------------------------- */

/* The kernels' view of a problem with operands; for a ragged one, the
 * tables and the context's fault word, which it arms (cuda_take_fault will
 * read it), so call it only for a launch that follows. */
void cuda_args(cuda_state *s, const fattn_problem *p, fattn_cuda_args *a);

/* O = 0 and lse = -inf: the output when seq_kv = 0 (no key), for every
 * variant. The device must be current. */
fattn_status cuda_run_zero(cuda_state *s, const fattn_cuda_args *a, fattn_msg *msg);

/* The forward variants' run slots: the planned kernel, or the zero output
 * when seq_kv = 0. */
fattn_status cuda_run_wgmma(void *state, const fattn_problem *p, const fattn_plan *plan,
                            fattn_msg *msg);
fattn_status cuda_run_mma(void *state, const fattn_problem *p, const fattn_plan *plan,
                          fattn_msg *msg);
fattn_status cuda_run_simt(void *state, const fattn_problem *p, const fattn_plan *plan,
                           fattn_msg *msg);
/* The vtable's append (desc->append): kernels_cu/append.cu on the context's
 * stream, before the attention; no allocation or synchronisation, so a
 * CUDA graph can capture it. */
fattn_status cuda_append(void *state, const fattn_problem *p, fattn_msg *msg);

/* ---- cuda_decode.c ------------------------------------------------------- */

/* The decode row (FATTN_OP_FORWARD, before the tiled ones): seq_q <= 16,
 * every dtype, head dims 1..256, dense or ragged; see cuda_decode.c. */
fattn_status cuda_decode_accept(void *state, const fattn_problem *p, fattn_plan *plan,
                                fattn_msg *msg);
fattn_status cuda_decode_run(void *state, const fattn_problem *p, const fattn_plan *plan,
                             fattn_msg *msg);

/* ---- cuda_naive.c -------------------------------------------------------- */

/* What the baseline needs of a problem (sequences below 2^31; with
 * operands, row strides that cuBLAS takes as leading dimensions):
 * FATTN_ERR_UNSUPPORTED with the reason if it does not fit. */
fattn_status cuda_naive_check(const fattn_problem *p, fattn_msg *msg);
/* Opens cuBLAS once per process: FATTN_ERR_UNSUPPORTED with the loader's
 * reason when it cannot. */
fattn_status cuda_naive_load(fattn_msg *msg);
fattn_status cuda_run_naive(void *state, const fattn_problem *p, const fattn_plan *plan,
                            fattn_msg *msg);
/* Destroys the context's cuBLAS handle, if it made one. */
void cuda_naive_release(cuda_state *s);

/* ---- cuda_combine.c ------------------------------------------------------ */

/* FATTN_OP_COMBINE: any of f32/f16/bf16 for the parts and the output, head
 * dims 1..FATTN_CUDA_COMBINE_MAX_D; any sizes and strides (64-bit). */
fattn_status cuda_combine_accept(void *state, const fattn_problem *p, fattn_plan *plan,
                                 fattn_msg *msg);
fattn_status cuda_combine_run(void *state, const fattn_problem *p, const fattn_plan *plan,
                              fattn_msg *msg);

/* ---- cuda_cp.c ----------------------------------------------------------- */

/* The vtable's cp_ slots (src/seam/backend.h), where NCCL's header was
 * found at build time (FATTN_CUDA_NCCL). */
#if FATTN_CUDA_NCCL
fattn_status cuda_cp_open(void *state, void *comm, void **link, int *ranks, int *rank,
                          fattn_msg *msg);
void cuda_cp_close(void *state, void *link);
fattn_status cuda_cp_sendrecv(void *state, void *link, int n, const fattn_cp_span *send,
                              const fattn_cp_span *recv, int to, int from, fattn_msg *msg);
fattn_status cuda_cp_allgather(void *state, void *link, int n, const fattn_cp_span *send,
                               const fattn_cp_span *recv, fattn_msg *msg);
fattn_status cuda_cp_wait(void *state, void *link, fattn_msg *msg);
#endif

/* ---- cuda_plan.c --------------------------------------------------------- */

fattn_status cuda_plan_problem(void *state, const fattn_problem *p, fattn_plan *plan,
                               fattn_msg *msg);
fattn_status cuda_run(void *state, const fattn_problem *p, const fattn_plan *plan, fattn_msg *msg);

#endif /* FATTN_CUDA_COMMON_H */

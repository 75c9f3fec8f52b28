/* The CUDA backend's vtable: devices, a stream per context (or the caller's),
 * buffers (device pointers), the planner that picks the kernel, and the
 * launch. The CUDA runtime is linked statically and opens the driver itself,
 * so this module loads on machines without one and reports why it has no
 * device. Nothing here allocates or synchronises inside fattn_forward. */
#include <dlfcn.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_common.h"
#include "env.h"

enum { VARIANT_SIMT = 0, VARIANT_MMA = 1 };

fattn_status cuda_fail(fattn_msg *msg, cudaError_t err, const char *what) {
    const fattn_status st = err == cudaErrorMemoryAllocation ? FATTN_ERR_OUT_OF_MEMORY
                            : err == cudaErrorNoDevice || err == cudaErrorInsufficientDriver ||
                                      err == cudaErrorInvalidDevice
                                ? FATTN_ERR_NO_DEVICE
                                : FATTN_ERR_DEVICE;
    cudaGetLastError();   /* a non-sticky error must not leak into the next call */
    return fattn_fail(msg, st, "%s: %s (%s)", what, cudaGetErrorString(err), cudaGetErrorName(err));
}

fattn_status cuda_use(cuda_state *s, fattn_msg *msg) {
    CU_TRY(msg, cudaSetDevice(s->device));
    return FATTN_OK;
}

static void cuda_probe(fattn_probe *out) {
    int n = 0;
    cudaError_t err = cudaGetDeviceCount(&n);
    out->device_count = err == cudaSuccess ? n : 0;
    out->gpu_count = out->device_count;
    out->reason[0] = '\0';
    void *driver = err == cudaErrorInsufficientDriver ? dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL) : NULL;
    if (err == cudaErrorInsufficientDriver && !driver)   /* the runtime's wording hides the usual cause */
        snprintf(out->reason, sizeof out->reason, "no NVIDIA driver: libcuda.so.1 cannot be loaded");
    else if (err != cudaSuccess)
        snprintf(out->reason, sizeof out->reason, "no CUDA device: %s (%s)", cudaGetErrorString(err),
                 cudaGetErrorName(err));
    else if (n == 0)
        snprintf(out->reason, sizeof out->reason, "the CUDA driver reports no device");
    if (driver) dlclose(driver);
}

static fattn_status cuda_device_name(int device, char *buf, size_t len, fattn_msg *msg) {
    struct cudaDeviceProp prop;
    int runtime = 0, driver = 0;
    CU_TRY(msg, cudaGetDeviceProperties(&prop, device));
    CU_TRY(msg, cudaRuntimeGetVersion(&runtime));
    CU_TRY(msg, cudaDriverGetVersion(&driver));
    snprintf(buf, len, "%s (compute %d.%d, %d SMs, CUDA runtime %d.%d, driver %d.%d)", prop.name, prop.major,
             prop.minor, prop.multiProcessorCount, runtime / 1000, runtime % 1000 / 10, driver / 1000,
             driver % 1000 / 10);
    return FATTN_OK;
}

static void cuda_close(void *state) {
    cuda_state *s = state;
    if (!s) return;
    cudaSetDevice(s->device);
    cuda_naive_release(s);
    if (s->own_stream) cudaStreamDestroy(s->own_stream);
    free(s);
}

static fattn_status cuda_open(int device, void **state, fattn_msg *msg) {
    cuda_state *s = calloc(1, sizeof *s);
    if (!s) return fattn_fail(msg, FATTN_ERR_OUT_OF_MEMORY, "cannot allocate the CUDA backend state");
    s->device = device;
    cudaError_t err = cudaGetDeviceProperties(&s->prop, device);
    if (err == cudaSuccess) err = cudaSetDevice(device);
    if (err == cudaSuccess) err = cudaStreamCreateWithFlags(&s->own_stream, cudaStreamNonBlocking);
    if (err != cudaSuccess) {
        fattn_status st = cuda_fail(msg, err, "opening the CUDA device");
        cuda_close(s);
        return st;
    }
    if (s->prop.major < 7) {
        fattn_status st = fattn_fail(msg, FATTN_ERR_UNSUPPORTED,
                                     "%s has compute capability %d.%d; fattn's CUDA backend needs 7.0",
                                     s->prop.name, s->prop.major, s->prop.minor);
        cuda_close(s);
        return st;
    }
    s->stream = s->own_stream;
    *state = s;
    return FATTN_OK;
}

/* The caller's stream must belong to this context's device. */
static fattn_status cuda_set_stream(void *state, void *native, fattn_msg *msg) {
    cuda_state *s = state;
    if (!native) {
        s->stream = s->own_stream;
        return FATTN_OK;
    }
    int dev = -1;
    CU_TRY(msg, cudaStreamGetDevice((cudaStream_t)native, &dev));
    if (dev != s->device)
        return fattn_fail(msg, FATTN_ERR_INVALID_ARGUMENT, "the stream is on CUDA device %d, the context on %d",
                          dev, s->device);
    s->stream = (cudaStream_t)native;
    return FATTN_OK;
}

static fattn_status cuda_synchronize(void *state, fattn_msg *msg) {
    cuda_state *s = state;
    fattn_status st = cuda_use(s, msg);
    if (st == FATTN_OK) CU_TRY(msg, cudaStreamSynchronize(s->stream));
    return st;
}

static fattn_status new_buf(void *ptr, int owned, void **out, fattn_msg *msg) {
    cuda_buf *b = malloc(sizeof *b);
    if (!b) {
        if (owned) cudaFree(ptr);
        return fattn_fail(msg, FATTN_ERR_OUT_OF_MEMORY, "cannot allocate a buffer record");
    }
    b->ptr = ptr;
    b->owned = owned;
    *out = b;
    return FATTN_OK;
}

/* "139.2 GiB", "512 bytes". */
static void human_bytes(char *buf, size_t len, uint64_t n) {
    static const char *const unit[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    if (n < 1024) {
        snprintf(buf, len, "%" PRIu64 " bytes", n);
        return;
    }
    double x = (double)n / 1024;
    int u = 0;
    while (x >= 1024 && u < 5) x /= 1024, u++;
    snprintf(buf, len, "%.1f %s", x, unit[u]);
}

/* "2^62 bytes (4611686018427387904)" for a power of two, else
 * "1000000 bytes (976.6 KiB)". */
static void size_text(char *buf, size_t len, uint64_t n) {
    char h[32];
    if (n >= 1024 && (n & (n - 1)) == 0) {
        snprintf(buf, len, "2^%d bytes (%" PRIu64 ")", __builtin_ctzll(n), n);
        return;
    }
    human_bytes(h, sizeof h, n);
    if (n < 1024) snprintf(buf, len, "%s", h);
    else snprintf(buf, len, "%" PRIu64 " bytes (%s)", n, h);
}

fattn_status cuda_alloc(cuda_state *s, const char *what, size_t bytes, int async, void **ptr, fattn_msg *msg) {
    char need[80], free_text[32] = "", total_text[32] = "";
    size_t free_b = 0, total_b = 0;
    *ptr = NULL;
    const int info = cudaMemGetInfo(&free_b, &total_b) == cudaSuccess;
    if (!info) cudaGetLastError();   /* the allocation's own error says more */
    size_text(need, sizeof need, bytes);
    human_bytes(free_text, sizeof free_text, free_b);
    human_bytes(total_text, sizeof total_text, total_b);
    /* Some drivers accept an impossible size lazily; none gets the chance. */
    if (info && bytes > total_b)
        return fattn_fail(msg, FATTN_ERR_OUT_OF_MEMORY,
                          "cannot allocate %s of %s on CUDA device %d: more than the device's %s in total "
                          "(%s free)",
                          what, need, s->device, total_text, free_text);
    const size_t n = bytes ? bytes : 1;
    const cudaError_t err = async ? cudaMallocAsync(ptr, n, s->stream) : cudaMalloc(ptr, n);
    if (err == cudaSuccess) return FATTN_OK;
    *ptr = NULL;
    const fattn_status st = cuda_fail(msg, err, what);   /* the status, and clears a non-sticky error */
    if (info)
        return fattn_fail(msg, st, "cannot allocate %s of %s on CUDA device %d: %s; the device has %s free of %s",
                          what, need, s->device, cudaGetErrorName(err), free_text, total_text);
    return fattn_fail(msg, st, "cannot allocate %s of %s on CUDA device %d: %s (%s)", what, need, s->device,
                      cudaGetErrorName(err), cudaGetErrorString(err));
}

static fattn_status cuda_buffer_alloc(void *state, size_t bytes, void **mem, fattn_msg *msg) {
    void *ptr = NULL;
    fattn_status st = cuda_use(state, msg);
    if (st == FATTN_OK) st = cuda_alloc(state, "a buffer", bytes, 0, &ptr, msg);
    return st == FATTN_OK ? new_buf(ptr, 1, mem, msg) : st;
}

/* Any pointer the device can dereference: device memory of this device,
 * managed memory, or mapped host memory. */
static fattn_status cuda_buffer_wrap(void *state, void *native, size_t bytes, void **mem, fattn_msg *msg) {
    cuda_state *s = state;
    struct cudaPointerAttributes attr;
    (void)bytes;   /* CUDA cannot tell an allocation's size from a pointer */
    fattn_status st = cuda_use(s, msg);   /* devicePointer is for the current device */
    if (st != FATTN_OK) return st;
    CU_TRY(msg, cudaPointerGetAttributes(&attr, native));
    if (attr.type == cudaMemoryTypeUnregistered || (attr.type == cudaMemoryTypeHost && !attr.devicePointer))
        return fattn_fail(msg, FATTN_ERR_INVALID_ARGUMENT,
                          "the pointer is host memory the GPU cannot reach; pass a device pointer");
    if (attr.type == cudaMemoryTypeDevice && attr.device != s->device)
        return fattn_fail(msg, FATTN_ERR_INVALID_ARGUMENT, "the pointer is memory of CUDA device %d, the context is on %d",
                          attr.device, s->device);
    /* Registered or mapped host memory: the kernels need its device address. */
    return new_buf(attr.type == cudaMemoryTypeHost ? attr.devicePointer : native, 0, mem, msg);
}

/* Wrapped memory belongs to the caller: only fattn's own is freed. */
static void cuda_buffer_free(void *state, void *mem) {
    cuda_buf *b = mem;
    if (b->owned) {
        cudaSetDevice(((cuda_state *)state)->device);
        cudaFree(b->ptr);
    }
    free(b);
}

static fattn_status cuda_buffer_write(void *state, void *mem, size_t offset, const void *src, size_t bytes,
                                      fattn_msg *msg) {
    cuda_state *s = state;
    fattn_status st = cuda_use(s, msg);
    if (st != FATTN_OK) return st;
    CU_TRY(msg, cudaMemcpyAsync((char *)((cuda_buf *)mem)->ptr + offset, src, bytes, cudaMemcpyHostToDevice, s->stream));
    CU_TRY(msg, cudaStreamSynchronize(s->stream));
    return FATTN_OK;
}

static fattn_status cuda_buffer_read(void *state, void *mem, size_t offset, void *dst, size_t bytes,
                                     fattn_msg *msg) {
    cuda_state *s = state;
    fattn_status st = cuda_use(s, msg);
    if (st != FATTN_OK) return st;
    CU_TRY(msg, cudaMemcpyAsync(dst, (const char *)((cuda_buf *)mem)->ptr + offset, bytes, cudaMemcpyDeviceToHost, s->stream));
    CU_TRY(msg, cudaStreamSynchronize(s->stream));
    return FATTN_OK;
}

static void *cuda_buffer_native(void *state, void *mem) {
    (void)state;
    return ((cuda_buf *)mem)->ptr;
}

/* Device addresses are one space (unified addressing): wrappers of the same
 * memory meet by address. */
static fattn_status cuda_buffer_region(void *state, void *mem, const void **root, uint64_t *start,
                                       fattn_msg *msg) {
    (void)state;
    (void)msg;
    *root = NULL;
    *start = (uint64_t)(uintptr_t)((cuda_buf *)mem)->ptr;
    return FATTN_OK;
}

/* The smallest built head-dim bucket that holds D. */
static int dpad_for(int64_t D) {
    for (int dpad = 32; dpad <= 256; dpad *= 2)
        if (D <= dpad && fattn_cuda_dpad_built(dpad)) return dpad;
    return 0;
}

static fattn_status cuda_plan(void *state, const fattn_problem *p, fattn_plan *plan, fattn_msg *msg) {
    const cuda_state *s = state;
    /* Batch and heads are any size: the launchers fold them into the grid. */
    const int64_t int_max = FATTN_INT32_MAX;
    if (p->seq_q > int_max || p->seq_kv > int_max)
        return fattn_fail(msg, FATTN_ERR_UNSUPPORTED,
                          "seq_q = %lld, seq_kv = %lld: the CUDA kernels take sequences below 2^31",
                          (long long)p->seq_q, (long long)p->seq_kv);
    if (p->tile_q || p->tile_kv)
        return fattn_fail(msg, FATTN_ERR_UNSUPPORTED,
                          "the CUDA kernels have fixed tiles per head dim; leave tile_q and tile_kv 0");
    const int dpad = dpad_for(p->head_dim);
    if (!dpad)
        return fattn_fail(msg, FATTN_ERR_UNSUPPORTED,
                          "head dim %lld: no kernel for it was built (FATTN_CUDA_HEAD_DIMS)", (long long)p->head_dim);
    const int half = p->dtype != FATTN_F32;
    const int mma = half && s->prop.major >= 8;
    if (half && !mma && !fattn_cuda_simt_half_built())
        return fattn_fail(msg, FATTN_ERR_UNSUPPORTED,
                          "%s (compute %d.%d) has no bf16/f16 tensor-core path, and this build has no "
                          "f16/bf16 CUDA-core kernels (FATTN_CUDA_SIMT_HALF=OFF)",
                          s->prop.name, s->prop.major, s->prop.minor);
    int bm, bn, smem, small = 0;
    const size_t smem_max = s->prop.sharedMemPerBlockOptin;
    if (mma) {
        fattn_cuda_flash_mma_tiles(dpad, &bm, &bn, &smem);
    } else {
        /* FATTN_CUDA_SMALL_TILES=1 takes the small shapes anywhere, so that
         * their path is tested on the GPUs that would not need them. */
        small = fattn_env_cuda_small_tiles();
        fattn_cuda_flash_simt_tiles(dpad, small, &bm, &bn, &smem);
        if ((size_t)smem > smem_max && !small) fattn_cuda_flash_simt_tiles(dpad, small = 1, &bm, &bn, &smem);
    }
    if ((size_t)smem > smem_max)
        return fattn_fail(msg, FATTN_ERR_UNSUPPORTED,
                          "head dim %lld: the %s kernel's %dx%d tile needs %d bytes of shared memory per "
                          "block; %s (compute %d.%d) allows %zu",
                          (long long)p->head_dim, mma ? "tensor-core" : "CUDA-core",
                          bm, bn, smem, s->prop.name, s->prop.major, s->prop.minor, smem_max);
    plan->variant = mma ? VARIANT_MMA : VARIANT_SIMT;
    plan->detail[0] = dpad;
    plan->detail[1] = small;
    plan->tiling.tile_q = bm;
    plan->tiling.tile_kv = bn;
    /* Resident blocks: as many as shared memory allows per SM (registers may allow fewer). */
    const size_t per_sm = smem ? s->prop.sharedMemPerMultiprocessor / ((size_t)smem + 1024) : 1;
    plan->tiling.concurrent_groups = (int64_t)s->prop.multiProcessorCount * (int64_t)(per_sm ? per_sm : 1);
    plan->tiling.workspace_bytes = 0;
    return FATTN_OK;
}

void cuda_args(const fattn_problem *p, fattn_cuda_args *a) {
    const size_t es = p->dtype == FATTN_F32 ? 4 : 2;
    memset(a, 0, sizeof *a);
    a->q = (const char *)cuda_ptr(&p->q) + p->q.offset * es;
    a->k = (const char *)cuda_ptr(&p->k) + p->k.offset * es;
    a->v = (const char *)cuda_ptr(&p->v) + p->v.offset * es;
    a->o = (char *)cuda_ptr(&p->o) + p->o.offset * es;
    a->lse = p->has_lse ? (float *)cuda_ptr(&p->lse) + p->lse.offset : NULL;
    a->q_sb = p->q.stride_batch, a->q_sh = p->q.stride_head, a->q_ss = p->q.stride_seq;
    a->k_sb = p->k.stride_batch, a->k_sh = p->k.stride_head, a->k_ss = p->k.stride_seq;
    a->v_sb = p->v.stride_batch, a->v_sh = p->v.stride_head, a->v_ss = p->v.stride_seq;
    a->o_sb = p->o.stride_batch, a->o_sh = p->o.stride_head, a->o_ss = p->o.stride_seq;
    a->l_sb = p->lse.stride_batch, a->l_sh = p->lse.stride_head, a->l_ss = p->lse.stride_seq;
    a->batch = p->batch;
    a->heads_q = p->heads_q;
    a->group = p->heads_q / p->heads_kv;
    a->seq_q = (int)p->seq_q;
    a->seq_kv = (int)p->seq_kv;
    a->head_dim = (int)p->head_dim;
    a->scale_log2 = p->scale * FATTN_LOG2E_F;
    a->causal = p->causal;
    a->dtype = (int)p->dtype;
}

static fattn_status cuda_forward(void *state, const fattn_problem *p, const fattn_plan *plan, fattn_msg *msg) {
    cuda_state *s = state;
    fattn_status st = cuda_use(s, msg);
    if (st != FATTN_OK) return st;
    fattn_cuda_args a;
    cuda_args(p, &a);
    cudaError_t err;
    const char *what;
    if (p->seq_kv == 0) {
        err = fattn_cuda_zero_output(&a, s->stream);
        what = "the zero-output kernel (seq_kv = 0)";
    } else if (plan->variant == VARIANT_MMA) {
        err = fattn_cuda_flash_mma(&a, plan->detail[0], s->stream);
        what = "the tensor-core attention kernel";
    } else {
        err = fattn_cuda_flash_simt(&a, plan->detail[0], plan->detail[1], s->stream);
        what = "the CUDA-core attention kernel";
    }
    return err == cudaSuccess ? FATTN_OK : cuda_fail(msg, err, what);
}

static fattn_status cuda_device_memory(void *state, uint64_t *used, uint64_t *total, fattn_msg *msg) {
    size_t free_b = 0, total_b = 0;
    fattn_status st = cuda_use(state, msg);
    if (st != FATTN_OK) return st;
    CU_TRY(msg, cudaMemGetInfo(&free_b, &total_b));
    *total = total_b;
    *used = total_b - free_b;
    return FATTN_OK;
}

/* Timer marks: CUDA events recorded on the context's stream. */
static fattn_status cuda_mark(void *state, void **mark, fattn_msg *msg) {
    cuda_state *s = state;
    cudaEvent_t ev;
    fattn_status st = cuda_use(s, msg);
    if (st != FATTN_OK) return st;
    CU_TRY(msg, cudaEventCreate(&ev));
    cudaError_t err = cudaEventRecord(ev, s->stream);
    if (err != cudaSuccess) {
        cudaEventDestroy(ev);
        return cuda_fail(msg, err, "cudaEventRecord");
    }
    *mark = ev;
    return FATTN_OK;
}

static fattn_status cuda_mark_elapsed(void *state, void *start, void *stop, double *ms, fattn_msg *msg) {
    float f = 0.0f;
    fattn_status st = cuda_use(state, msg);
    if (st != FATTN_OK) return st;
    CU_TRY(msg, cudaEventSynchronize((cudaEvent_t)start));   /* it may be on another stream */
    CU_TRY(msg, cudaEventSynchronize((cudaEvent_t)stop));
    CU_TRY(msg, cudaEventElapsedTime(&f, (cudaEvent_t)start, (cudaEvent_t)stop));
    *ms = f;
    return FATTN_OK;
}

static void cuda_mark_free(void *state, void *mark) {
    cudaSetDevice(((cuda_state *)state)->device);
    cudaEventDestroy((cudaEvent_t)mark);
}

static const fattn_backend_vtable cuda_vtable = {
    .abi = FATTN_BACKEND_ABI,
    .size = sizeof(fattn_backend_vtable),
    .kind = FATTN_BACKEND_CUDA,
    .name = "cuda",
    .native_is_host = 0,
    .probe = cuda_probe,
    .device_name = cuda_device_name,
    .open = cuda_open,
    .close = cuda_close,
    .set_stream = cuda_set_stream,
    .synchronize = cuda_synchronize,
    .buffer_alloc = cuda_buffer_alloc,
    .buffer_wrap = cuda_buffer_wrap,
    .buffer_free = cuda_buffer_free,
    .buffer_write = cuda_buffer_write,
    .buffer_read = cuda_buffer_read,
    .buffer_native = cuda_buffer_native,
    .buffer_region = cuda_buffer_region,
    .plan = cuda_plan,
    .forward = cuda_forward,
    .forward_naive = cuda_forward_naive,
    .device_memory = cuda_device_memory,
    .mark = cuda_mark,
    .mark_elapsed = cuda_mark_elapsed,
    .mark_free = cuda_mark_free,
};

__attribute__((visibility("default"))) const fattn_backend_vtable *fattn_backend_module_v1(void) {
    return &cuda_vtable;
}

/* The CUDA backend's devices and contexts: probing, opening a device (or
 * the caller's current context), streams, synchronisation, device memory,
 * timer marks and buffers (a buffer is its device pointer), and the error
 * helpers every other file uses. The CUDA runtime is linked statically and
 * opens the driver itself, so this module loads on machines without one
 * and reports why it has no device. */
#include <dlfcn.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_common.h"

/* What FATTN_BACKEND_AUTO gives CUDA where it finds a device: its rank in
 * the registry's table (registry.c), above OpenCL (200) and the CPU (100). */
#define CUDA_AUTO_SCORE 300

fattn_status cuda_fail(fattn_msg *msg, cudaError_t err, const char *what) {
    const fattn_status st = err == cudaErrorMemoryAllocation ? FATTN_ERR_OUT_OF_MEMORY
                            : err == cudaErrorNoDevice || err == cudaErrorInsufficientDriver ||
                                    err == cudaErrorInvalidDevice
                                ? FATTN_ERR_NO_DEVICE
                                : FATTN_ERR_DEVICE;
    cudaGetLastError(); /* a non-sticky error must not leak into the next call */
    return fattn_fail(msg, st, "%s: %s (%s)", what, cudaGetErrorString(err), cudaGetErrorName(err));
}

fattn_status cuda_use(cuda_state *s, fattn_msg *msg) {
    if (s->native_current) return FATTN_OK; /* the caller's context is current: leave it */
    CU_TRY(msg, cudaSetDevice(s->device));
    return FATTN_OK;
}

void cuda_use_quiet(cuda_state *s) {
    if (!s->native_current)
        cudaSetDevice(s->device); /* unchecked: a void slot has no one to tell */
}

void cuda_probe(const fattn_settings *settings, fattn_probe *out) {
    (void)settings; /* CUDA has no device filters */
    int n = 0;
    cudaError_t err = cudaGetDeviceCount(&n);
    out->device_count = err == cudaSuccess ? n : 0;
    out->gpu_count = out->device_count;
    out->auto_score = out->device_count > 0 ? CUDA_AUTO_SCORE : 0;
    out->reason[0] = '\0';
    void *driver =
        err == cudaErrorInsufficientDriver ? dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL) : NULL;
    if (err == cudaErrorInsufficientDriver &&
        !driver) /* the runtime's wording hides the usual cause */
        snprintf(out->reason, sizeof out->reason,
                 "no NVIDIA driver: libcuda.so.1 cannot be loaded");
    else if (err != cudaSuccess)
        snprintf(out->reason, sizeof out->reason, "no CUDA device: %s (%s)",
                 cudaGetErrorString(err), cudaGetErrorName(err));
    else if (n == 0)
        snprintf(out->reason, sizeof out->reason, "the CUDA driver reports no device");
    if (driver) dlclose(driver);
}

fattn_status cuda_device_name(const fattn_settings *settings, int device, char *buf, size_t len,
                              fattn_msg *msg) {
    struct cudaDeviceProp prop;
    int runtime = 0, driver = 0;
    (void)settings;
    CU_TRY(msg, cudaGetDeviceProperties(&prop, device));
    CU_TRY(msg, cudaRuntimeGetVersion(&runtime));
    CU_TRY(msg, cudaDriverGetVersion(&driver));
    snprintf(buf, len, "%s (compute %d.%d, %d SMs, CUDA runtime %d.%d, driver %d.%d)", prop.name,
             prop.major, prop.minor, prop.multiProcessorCount, runtime / 1000, runtime % 1000 / 10,
             driver / 1000, driver % 1000 / 10);
    return FATTN_OK;
}

void cuda_close_state(cuda_state *s) {
    if (!s) return;
    cuda_use_quiet(s);
    if (s->fault) cudaFree(s->fault); /* waits for the kernels that may write it */
    if (s->own_stream) cudaStreamDestroy(s->own_stream); /* never the caller's stream */
    free(s);
}

/* args->native_current: the caller's context, current on this thread, must
 * be on args->device; fattn then never changes the current device. Else the
 * device's primary context is made current on every call that needs it. */
fattn_status cuda_open(const fattn_open_args *args, void **state, fattn_msg *msg) {
    if (args->native_context || args->native_device)
        return fattn_fail(
            msg, FATTN_ERR_INVALID_ARGUMENT,
            "the CUDA backend takes no native context/device object; use cuda_current_context "
            "and native_queue");
    cuda_state *s = calloc(1, sizeof *s);
    if (!s)
        return fattn_fail(msg, FATTN_ERR_OUT_OF_MEMORY, "cannot allocate the CUDA backend state");
    s->device = args->device;
    s->native_current = args->native_current != 0;
    /* FATTN_CUDA_SMALL_TILES=1 (resolved by the core) takes the CUDA-core
     * kernel's small shapes anywhere, so that their path is tested on the
     * GPUs that would not need them. */
    s->small_tiles = args->settings && args->settings->cuda_small_tiles;
    s->decode_tune = args->settings ? args->settings->decode_tune : NULL;
    /* FATTN_CUDA_KERNEL (checked by the core): which kernel takes prefill. */
    const char *ck = args->settings ? args->settings->cuda_kernel : NULL;
    s->kernel = !ck || !strcmp(ck, "auto") ? CUDA_KERNEL_AUTO
                : !strcmp(ck, "wgmma")     ? CUDA_KERNEL_WGMMA
                                           : CUDA_KERNEL_MMA;
    fattn_status st = FATTN_OK;
    cudaError_t err = cudaGetDeviceProperties(&s->prop, s->device);
    if (err == cudaSuccess && !s->native_current) err = cudaSetDevice(s->device);
    if (err == cudaSuccess && s->native_current) {
        int current = -1;
        err = cudaGetDevice(&current);
        if (err == cudaSuccess && current != s->device)
            st = fattn_fail(
                msg, FATTN_ERR_INVALID_ARGUMENT,
                "cuda_current_context: the calling thread's current CUDA device is %d, but the "
                "context is asked for device %d",
                current, s->device);
    }
    if (err == cudaSuccess && st == FATTN_OK)
        err = cudaStreamCreateWithFlags(&s->own_stream, cudaStreamNonBlocking);
    /* The fault word (cuda_common.h), zero before open returns: the
     * context's stream does not wait for the legacy one a plain cudaMemset
     * would go on, so it is cleared there and waited for. */
    if (err == cudaSuccess && st == FATTN_OK)
        err = cudaMalloc((void **)&s->fault, sizeof *s->fault);
    if (err == cudaSuccess && st == FATTN_OK)
        err = cudaMemsetAsync(s->fault, 0, sizeof *s->fault, s->own_stream);
    if (err == cudaSuccess && st == FATTN_OK) err = cudaStreamSynchronize(s->own_stream);
    if (err != cudaSuccess) st = cuda_fail(msg, err, "opening the CUDA device");
    if (st == FATTN_OK && s->prop.major < 7)
        st = fattn_fail(msg, FATTN_ERR_UNSUPPORTED,
                        "%s has compute capability %d.%d; fattn's CUDA backend needs 7.0",
                        s->prop.name, s->prop.major, s->prop.minor);
    s->stream = s->own_stream;
    /* The caller's stream from the start, checked as set_stream checks it. */
    if (st == FATTN_OK && args->native_queue) st = cuda_set_stream(s, args->native_queue, msg);
    if (st != FATTN_OK) {
        cuda_close_state(s);
        return st;
    }
    *state = s;
    return FATTN_OK;
}

/* The caller's stream must belong to this context's device. The caller
 * keeps owning it: fattn never destroys it. */
fattn_status cuda_set_stream(void *state, void *native, fattn_msg *msg) {
    cuda_state *s = state;
    if (!native) {
        s->stream = s->own_stream;
        return FATTN_OK;
    }
    /* The legacy and per-thread default streams (DLPack's stream 1 and 2,
     * PyTorch's default stream) belong to whichever device is current, and
     * fattn makes its own current before each launch. */
    if ((cudaStream_t)native == cudaStreamLegacy || (cudaStream_t)native == cudaStreamPerThread) {
        s->stream = (cudaStream_t)native;
        return FATTN_OK;
    }
    int dev = -1;
    CU_TRY(msg, cudaStreamGetDevice((cudaStream_t)native, &dev));
    if (dev != s->device)
        return fattn_fail(msg, FATTN_ERR_INVALID_ARGUMENT,
                          "the stream is on CUDA device %d, the context on %d", dev, s->device);
    s->stream = (cudaStream_t)native;
    return FATTN_OK;
}

fattn_status cuda_synchronize(void *state, fattn_msg *msg) {
    cuda_state *s = state;
    fattn_status st = cuda_use(s, msg);
    if (st == FATTN_OK) CU_TRY(msg, cudaStreamSynchronize(s->stream));
    return st;
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
    if (n < 1024)
        snprintf(buf, len, "%s", h);
    else
        snprintf(buf, len, "%" PRIu64 " bytes (%s)", n, h);
}

fattn_status cuda_alloc(cuda_state *s, const char *what, size_t bytes, int async, void **ptr,
                        fattn_msg *msg) {
    char need[80], free_text[32] = "", total_text[32] = "";
    size_t free_b = 0, total_b = 0;
    *ptr = NULL;
    const int info = cudaMemGetInfo(&free_b, &total_b) == cudaSuccess;
    if (!info) cudaGetLastError(); /* the allocation's own error says more */
    size_text(need, sizeof need, bytes);
    human_bytes(free_text, sizeof free_text, free_b);
    human_bytes(total_text, sizeof total_text, total_b);
    /* Some drivers accept an impossible size lazily; none gets the chance. */
    if (info && bytes > total_b)
        return fattn_fail(
            msg, FATTN_ERR_OUT_OF_MEMORY,
            "cannot allocate %s of %s on CUDA device %d: more than the device's %s in total "
            "(%s free)",
            what, need, s->device, total_text, free_text);
    const size_t n = bytes ? bytes : 1;
    const cudaError_t err = async ? cudaMallocAsync(ptr, n, s->stream) : cudaMalloc(ptr, n);
    if (err == cudaSuccess) return FATTN_OK;
    *ptr = NULL;
    const fattn_status st =
        cuda_fail(msg, err, what); /* the status, and clears a non-sticky error */
    if (info)
        return fattn_fail(
            msg, st, "cannot allocate %s of %s on CUDA device %d: %s; the device has %s free of %s",
            what, need, s->device, cudaGetErrorName(err), free_text, total_text);
    return fattn_fail(msg, st, "cannot allocate %s of %s on CUDA device %d: %s (%s)", what, need,
                      s->device, cudaGetErrorName(err), cudaGetErrorString(err));
}

/* mem is the device pointer: never NULL, as cuda_alloc takes 1 byte for 0. */
fattn_status cuda_buffer_alloc(void *state, size_t bytes, void **mem, fattn_msg *msg) {
    fattn_status st = cuda_use(state, msg);
    return st == FATTN_OK ? cuda_alloc(state, "a buffer", bytes, 0, mem, msg) : st;
}

/* Any pointer the device can dereference: device memory of this device,
 * managed memory, or mapped host memory (then mem is its device address). */
fattn_status cuda_buffer_wrap(void *state, void *native, size_t bytes, void **mem, fattn_msg *msg) {
    cuda_state *s = state;
    struct cudaPointerAttributes attr;
    (void)bytes;                        /* CUDA cannot tell an allocation's size from a pointer */
    fattn_status st = cuda_use(s, msg); /* devicePointer is for the current device */
    if (st != FATTN_OK) return st;
    CU_TRY(msg, cudaPointerGetAttributes(&attr, native));
    if (attr.type == cudaMemoryTypeUnregistered ||
        (attr.type == cudaMemoryTypeHost && !attr.devicePointer))
        return fattn_fail(msg, FATTN_ERR_INVALID_ARGUMENT,
                          "the pointer is host memory the GPU cannot reach; pass a device pointer");
    if (attr.type == cudaMemoryTypeDevice && attr.device != s->device)
        return fattn_fail(msg, FATTN_ERR_INVALID_ARGUMENT,
                          "the pointer is memory of CUDA device %d, the context is on %d",
                          attr.device, s->device);
    /* Registered or mapped host memory: the kernels need its device address. */
    *mem = attr.type == cudaMemoryTypeHost ? attr.devicePointer : native;
    return FATTN_OK;
}

/* Wrapped memory belongs to the caller: only fattn's own is freed. */
void cuda_buffer_free(void *state, void *mem, int owned) {
    if (!owned) return;
    cuda_use_quiet(state);
    cudaFree(mem); /* a void slot: nothing to report to */
}

fattn_status cuda_buffer_write(void *state, void *mem, size_t offset, const void *src, size_t bytes,
                               fattn_msg *msg) {
    cuda_state *s = state;
    fattn_status st = cuda_use(s, msg);
    if (st != FATTN_OK) return st;
    CU_TRY(msg,
           cudaMemcpyAsync((char *)mem + offset, src, bytes, cudaMemcpyHostToDevice, s->stream));
    CU_TRY(msg, cudaStreamSynchronize(s->stream));
    return FATTN_OK;
}

fattn_status cuda_buffer_read(void *state, void *mem, size_t offset, void *dst, size_t bytes,
                              fattn_msg *msg) {
    cuda_state *s = state;
    fattn_status st = cuda_use(s, msg);
    if (st != FATTN_OK) return st;
    CU_TRY(msg, cudaMemcpyAsync(dst, (const char *)mem + offset, bytes, cudaMemcpyDeviceToHost,
                                s->stream));
    CU_TRY(msg, cudaStreamSynchronize(s->stream));
    return FATTN_OK;
}

void *cuda_buffer_native(void *state, void *mem) {
    (void)state;
    return mem;
}

/* Device addresses are one space (unified addressing): wrappers of the same
 * memory meet by address. */
fattn_status cuda_buffer_region(void *state, void *mem, const void **root, uint64_t *start,
                                fattn_msg *msg) {
    (void)state;
    (void)msg;
    *root = NULL;
    *start = (uint64_t)(uintptr_t)mem;
    return FATTN_OK;
}

/* Reads the word on the context's stream, after the work queued there (the
 * core calls this after synchronising), and clears it for the launches that
 * follow before reporting. A launch enqueued on another stream (the context's
 * stream changed since) is not waited for. */
fattn_status cuda_take_fault(void *state, fattn_msg *msg) {
    cuda_state *s = state;
    if (!s->fault_armed) return FATTN_OK; /* no ragged launch since the last check */
    unsigned bits = 0;
    fattn_status st = cuda_use(s, msg);
    if (st != FATTN_OK) return st;
    CU_TRY(msg, cudaMemcpyAsync(&bits, s->fault, sizeof bits, cudaMemcpyDeviceToHost, s->stream));
    CU_TRY(msg, cudaStreamSynchronize(s->stream));
    if (s->fault_armed == 1) s->fault_armed = 0;
    if (!bits) return FATTN_OK;
    CU_TRY(msg, cudaMemsetAsync(s->fault, 0, sizeof *s->fault, s->stream));
    CU_TRY(msg, cudaStreamSynchronize(s->stream));
    return fattn_fault_fail(bits, msg);
}

fattn_status cuda_device_memory(void *state, uint64_t *used, uint64_t *total, fattn_msg *msg) {
    size_t free_b = 0, total_b = 0;
    fattn_status st = cuda_use(state, msg);
    if (st != FATTN_OK) return st;
    CU_TRY(msg, cudaMemGetInfo(&free_b, &total_b));
    *total = total_b;
    *used = total_b - free_b;
    return FATTN_OK;
}

/* Timer marks: CUDA events recorded on the context's stream. */
fattn_status cuda_mark(void *state, void **mark, fattn_msg *msg) {
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

fattn_status cuda_mark_elapsed(void *state, void *start, void *stop, double *ms, fattn_msg *msg) {
    float f = 0.0f;
    fattn_status st = cuda_use(state, msg);
    if (st != FATTN_OK) return st;
    CU_TRY(msg, cudaEventSynchronize((cudaEvent_t)start)); /* it may be on another stream */
    CU_TRY(msg, cudaEventSynchronize((cudaEvent_t)stop));
    CU_TRY(msg, cudaEventElapsedTime(&f, (cudaEvent_t)start, (cudaEvent_t)stop));
    *ms = f;
    return FATTN_OK;
}

void cuda_mark_free(void *state, void *mark) {
    cuda_use_quiet(state);
    cudaEventDestroy((cudaEvent_t)mark); /* a void slot: nothing to report to */
}

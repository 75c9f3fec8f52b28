/* The OpenCL backend's vtable: contexts (fattn's own, or built around the
 * caller's cl_context) and queues, buffers (cl_mem), device memory and timer
 * marks. Planning and launching live in ocl_forward.c and ocl_naive.c; the
 * fault word behind take_fault in ocl_ragged.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ocl_common.h"

#define OCL_MAX_DEVICES 32

/* How much FATTN_BACKEND_AUTO wants OpenCL where it has a GPU (AUTO takes
 * the highest score; see registry.c). A CPU-only OpenCL (PoCL) scores 0: it
 * is never chosen automatically. */
#define OCL_AUTO_SCORE_GPU 200

static const fattn_settings no_settings;

static void ocl_probe(const fattn_settings *settings, fattn_probe *out) {
    ocl_device_entry devs[OCL_MAX_DEVICES];
    out->device_count = ocl_list_devices(settings ? settings : &no_settings, devs, OCL_MAX_DEVICES,
                                         out->reason, sizeof out->reason);
    out->gpu_count = 0;
    for (int i = 0; i < out->device_count; i++)
        out->gpu_count += (devs[i].type & CL_DEVICE_TYPE_GPU) != 0;
    out->auto_score = out->gpu_count > 0 ? OCL_AUTO_SCORE_GPU : 0;
}

static fattn_status entry_at(const fattn_settings *settings, int device, ocl_device_entry *e,
                             fattn_msg *msg) {
    ocl_device_entry devs[OCL_MAX_DEVICES];
    char reason[256];
    int n = ocl_list_devices(settings, devs, OCL_MAX_DEVICES, reason, sizeof reason);
    if (device < 0 || device >= n)
        return fattn_fail(msg, FATTN_ERR_NO_DEVICE, "OpenCL device %d requested; %d found%s%s",
                          device, n, n ? "" : ": ", n ? "" : reason);
    *e = devs[device];
    return FATTN_OK;
}

static fattn_status ocl_device_name(const fattn_settings *settings, int device, char *buf,
                                    size_t len, fattn_msg *msg) {
    ocl_device_entry e;
    fattn_status st = entry_at(settings ? settings : &no_settings, device, &e, msg);
    if (st == FATTN_OK) ocl_describe(e.device, buf, len);
    return st;
}

/* Releases fattn's own references only: the caller's cl_context and queue
 * (native objects, or a queue given to set_stream) were retained when taken,
 * so the caller's own references stay untouched. */
static void ocl_close(void *state) {
    ocl_state *s = state;
    if (!s) return;
    ocl_fault_close(s);
    ocl_cache_release(&s->cache);
    ocl_disk_cache_close(&s->cache);
    if (s->queue && s->queue != s->own_queue) clReleaseCommandQueue(s->queue);
    if (s->own_queue) clReleaseCommandQueue(s->own_queue);
    if (s->context) clReleaseContext(s->context);
    free(s);
}

/* A context and a profiling queue of fattn's own on device `device` of the
 * filtered list. */
static fattn_status open_own(ocl_state *s, int device, fattn_msg *msg) {
    fattn_status st = entry_at(&s->settings, device, &s->dev, msg);
    if (st != FATTN_OK) return st;
    cl_int err = CL_SUCCESS;
    cl_context_properties props[] = {CL_CONTEXT_PLATFORM, (cl_context_properties)s->dev.platform,
                                     0};
    s->context = clCreateContext(props, 1, &s->dev.device, NULL, NULL, &err);
    if (err == CL_SUCCESS)
        s->own_queue =
            clCreateCommandQueue(s->context, s->dev.device, CL_QUEUE_PROFILING_ENABLE, &err);
    if (err != CL_SUCCESS)
        return fattn_fail(msg, ocl_status_of(err), "creating an OpenCL context and queue: %s (%d)",
                          ocl_error_name(err), (int)err);
    s->queue = s->own_queue;
    return FATTN_OK;
}

/* Whether dev is one of ctx's devices. */
static fattn_status device_in_context(cl_context ctx, cl_device_id dev, int *found,
                                      fattn_msg *msg) {
    size_t bytes = 0;
    OCL_TRY(msg, clGetContextInfo(ctx, CL_CONTEXT_DEVICES, 0, NULL, &bytes));
    cl_device_id *devs = malloc(bytes ? bytes : 1);
    if (!devs)
        return fattn_fail(msg, FATTN_ERR_OUT_OF_MEMORY,
                          "cannot allocate the context's device list");
    const cl_int err = clGetContextInfo(ctx, CL_CONTEXT_DEVICES, bytes, devs, NULL);
    *found = 0;
    for (size_t i = 0; err == CL_SUCCESS && i < bytes / sizeof *devs; i++) *found |= devs[i] == dev;
    free(devs);
    OCL_TRY(msg, err);
    return FATTN_OK;
}

/* A context built around the caller's objects: native_context (cl_context)
 * and native_device (cl_device_id, one of its devices), optionally
 * native_queue (cl_command_queue on both). fattn retains the context and the
 * queue and releases those references at close; the caller's own references
 * are never released here. Without a native queue fattn makes its own
 * profiling queue on the caller's context. With one, that queue is the
 * context's queue, and the one fattn_context_set_stream(NULL) restores: no
 * second queue is made. Timer marks are recorded on the current queue (as
 * after set_stream), so they need CL_QUEUE_PROFILING_ENABLE on the caller's
 * queue, and mark_elapsed says so when it is missing; a queue of fattn's own
 * would not time work enqueued on the caller's. */
static fattn_status open_native(ocl_state *s, const fattn_open_args *a, fattn_msg *msg) {
    cl_context ctx = (cl_context)a->native_context;
    cl_device_id dev = (cl_device_id)a->native_device;
    cl_command_queue q = (cl_command_queue)a->native_queue;
    if (!dev)
        return fattn_fail(
            msg, FATTN_ERR_NULL_POINTER,
            "native_context is set but native_device is NULL: an OpenCL context made "
            "around a cl_context needs the cl_device_id (one of its devices) to run on");
    int found = 0;
    fattn_status st = device_in_context(ctx, dev, &found, msg);
    if (st != FATTN_OK) return st;
    if (!found)
        return fattn_fail(msg, FATTN_ERR_INVALID_ARGUMENT,
                          "native_device is not a device of native_context (clGetContextInfo "
                          "CL_CONTEXT_DEVICES does not list it)");
    if (q) {
        cl_context qctx;
        cl_device_id qdev;
        OCL_TRY(msg, clGetCommandQueueInfo(q, CL_QUEUE_CONTEXT, sizeof qctx, &qctx, NULL));
        OCL_TRY(msg, clGetCommandQueueInfo(q, CL_QUEUE_DEVICE, sizeof qdev, &qdev, NULL));
        if (qctx != ctx)
            return fattn_fail(msg, FATTN_ERR_INVALID_ARGUMENT,
                              "native_queue belongs to another cl_context than native_context");
        if (qdev != dev)
            return fattn_fail(msg, FATTN_ERR_INVALID_ARGUMENT,
                              "native_queue is on another device than native_device");
    }
    if ((st = ocl_native_entry(dev, &s->dev, msg)) != FATTN_OK) return st;
    OCL_TRY(msg, clRetainContext(ctx));
    s->context = ctx;
    if (q) {
        OCL_TRY(msg, clRetainCommandQueue(q));
        s->own_queue = q;
    } else {
        cl_int err;
        s->own_queue = clCreateCommandQueue(ctx, dev, CL_QUEUE_PROFILING_ENABLE, &err);
        if (err != CL_SUCCESS) {
            s->own_queue = NULL;
            return fattn_fail(msg, ocl_status_of(err),
                              "creating an OpenCL queue on native_context: %s (%d)",
                              ocl_error_name(err), (int)err);
        }
    }
    s->queue = s->own_queue;
    return FATTN_OK;
}

static fattn_status ocl_set_stream(void *state, void *native, fattn_msg *msg);

/* args->device indexes the filtered list, unless native_context is set (the
 * caller's objects; see open_native). A native_queue alone is taken as
 * fattn_context_set_stream would take it right after opening.
 * args->native_current is CUDA's. */
static fattn_status ocl_open(const fattn_open_args *args, void **state, fattn_msg *msg) {
    ocl_state *s = calloc(1, sizeof *s);
    if (!s) return fattn_fail(msg, FATTN_ERR_OUT_OF_MEMORY, "cannot allocate the OpenCL state");
    s->cache.disk_fd = -1;
    s->settings = args->settings ? *args->settings : no_settings;
    s->cache.kernel_dir = s->settings.kernel_dir;
    s->cache.extra_options = s->settings.opencl_options;
    fattn_status st;
    if (args->native_context)
        st = open_native(s, args, msg);
    else if (args->native_device)
        st = fattn_fail(
            msg, FATTN_ERR_INVALID_ARGUMENT,
            "native_device is set without native_context: OpenCL takes the caller's device "
            "only with its cl_context");
    else
        st = open_own(s, args->device, msg);
    if (st == FATTN_OK) st = ocl_read_limits(s->dev.device, s->dev.type, &s->limits, msg);
    if (st == FATTN_OK && !args->native_context && args->native_queue)
        st = ocl_set_stream(s, args->native_queue, msg);
    /* In the cl_context the queue settled on. */
    if (st == FATTN_OK) st = ocl_fault_open(s, msg);
    if (st == FATTN_OK) ocl_mma_setup(s);
    /* Last: on success it may leave a note (disk cache off) in msg. */
    if (st == FATTN_OK) st = ocl_disk_cache_open(&s->cache, &s->settings, msg);
    if (st != FATTN_OK) {
        ocl_close(s);
        return st;
    }
    *state = s;
    return FATTN_OK;
}

/* The caller's queue must be on our device. One on another cl_context moves
 * the context there (so the caller's cl_mem can be wrapped), which is only
 * possible while no fattn-allocated buffer lives in the old one. */
static fattn_status ocl_set_stream(void *state, void *native, fattn_msg *msg) {
    ocl_state *s = state;
    cl_command_queue q = native ? (cl_command_queue)native : s->own_queue;
    if (q == s->queue) return FATTN_OK;
    cl_device_id dev;
    cl_context qctx;
    OCL_TRY(msg, clGetCommandQueueInfo(q, CL_QUEUE_DEVICE, sizeof dev, &dev, NULL));
    OCL_TRY(msg, clGetCommandQueueInfo(q, CL_QUEUE_CONTEXT, sizeof qctx, &qctx, NULL));
    if (dev != s->dev.device)
        return fattn_fail(msg, FATTN_ERR_INVALID_ARGUMENT,
                          "the command queue is on another device than this context's");
    fattn_status st;
    if (qctx != s->context) {
        if (s->live_buffers)
            return fattn_fail(msg, FATTN_ERR_INVALID_ARGUMENT,
                              "the command queue belongs to another cl_context while %d buffers "
                              "allocated by fattn live in this one; set the queue first",
                              s->live_buffers);
        OCL_TRY(msg, clRetainContext(qctx));
        /* The fault word moves too (its faults, read first, stay pending). */
        if ((st = ocl_fault_switch(s, qctx, msg)) != FATTN_OK) {
            clReleaseContext(qctx);
            return st;
        }
        ocl_cache_release(&s->cache); /* programs belong to a cl_context */
        clReleaseContext(s->context);
        s->context = qctx;
    } else if ((st = ocl_fault_switch(s, qctx, msg)) != FATTN_OK) {
        return st;
    }
    /* own_queue holds its reference for the whole context (it may be the
     * caller's native_queue, passed here again). */
    if (q != s->own_queue) OCL_TRY(msg, clRetainCommandQueue(q));
    if (s->queue != s->own_queue) clReleaseCommandQueue(s->queue);
    s->queue = q;
    return FATTN_OK;
}

static fattn_status ocl_synchronize(void *state, fattn_msg *msg) {
    OCL_TRY(msg, clFinish(((ocl_state *)state)->queue));
    return FATTN_OK;
}

static fattn_status new_buf(cl_mem mem, cl_mem root, uint64_t start, void **out, fattn_msg *msg) {
    ocl_buf *b = malloc(sizeof *b);
    if (!b) {
        clReleaseMemObject(mem);
        return fattn_fail(msg, FATTN_ERR_OUT_OF_MEMORY, "cannot allocate a buffer record");
    }
    b->mem = mem;
    b->root = root;
    b->start = start;
    *out = b;
    return FATTN_OK;
}

static fattn_status ocl_buffer_alloc(void *state, size_t bytes, void **mem, fattn_msg *msg) {
    ocl_state *s = state;
    /* Drivers may accept any size lazily (NVIDIA's took 2^62 bytes). */
    if ((uint64_t)bytes > s->limits.max_alloc || (uint64_t)bytes > s->limits.global_mem)
        return fattn_fail(
            msg, FATTN_ERR_OUT_OF_MEMORY,
            "cannot allocate %zu bytes: the OpenCL device allows at most %llu bytes in "
            "one buffer and has %llu bytes of global memory",
            bytes, (unsigned long long)s->limits.max_alloc,
            (unsigned long long)s->limits.global_mem);
    cl_int err;
    cl_mem m = clCreateBuffer(s->context, CL_MEM_READ_WRITE, bytes, NULL, &err);
    if (err != CL_SUCCESS)
        return fattn_fail(
            msg, err == CL_INVALID_BUFFER_SIZE ? FATTN_ERR_OUT_OF_MEMORY : ocl_status_of(err),
            "clCreateBuffer(%zu bytes): %s (%d)", bytes, ocl_error_name(err), (int)err);
    fattn_status st = new_buf(m, m, 0, mem, msg);
    s->live_buffers += st == FATTN_OK;
    return st;
}

/* The top cl_mem of a sub-buffer chain and the buffer's byte origin in it:
 * two wrappers of one cl_mem, or a cl_mem and a sub-buffer of it, then meet
 * in the core's overlap check. OpenCL 1.2 allows no sub-buffer of a
 * sub-buffer; the walk is bounded anyway. */
static fattn_status find_root(cl_mem m, cl_mem *root, uint64_t *start, fattn_msg *msg) {
    uint64_t at = 0;
    for (int depth = 0; depth < 16; depth++) {
        cl_mem parent = NULL;
        size_t offset = 0;
        OCL_TRY(msg,
                clGetMemObjectInfo(m, CL_MEM_ASSOCIATED_MEMOBJECT, sizeof parent, &parent, NULL));
        if (!parent) {
            *root = m;
            *start = at;
            return FATTN_OK;
        }
        OCL_TRY(msg, clGetMemObjectInfo(m, CL_MEM_OFFSET, sizeof offset, &offset, NULL));
        at += offset;
        m = parent;
    }
    return fattn_fail(msg, FATTN_ERR_DEVICE,
                      "the cl_mem's chain of parent buffers is longer than 16");
}

static fattn_status ocl_buffer_wrap(void *state, void *native, size_t bytes, void **mem,
                                    fattn_msg *msg) {
    ocl_state *s = state;
    cl_mem m = (cl_mem)native;
    cl_context mctx;
    size_t size;
    OCL_TRY(msg, clGetMemObjectInfo(m, CL_MEM_CONTEXT, sizeof mctx, &mctx, NULL));
    OCL_TRY(msg, clGetMemObjectInfo(m, CL_MEM_SIZE, sizeof size, &size, NULL));
    if (mctx != s->context)
        return fattn_fail(msg, FATTN_ERR_INVALID_ARGUMENT,
                          "the cl_mem belongs to another cl_context; pass a queue of that context "
                          "to fattn_context_set_stream first");
    if (size < bytes)
        return fattn_fail(msg, FATTN_ERR_BUFFER_TOO_SMALL, "the cl_mem has %zu bytes, not %zu",
                          size, bytes);
    cl_mem root = NULL;
    uint64_t start = 0;
    fattn_status st = find_root(m, &root, &start, msg);
    if (st != FATTN_OK) return st;
    OCL_TRY(msg, clRetainMemObject(m)); /* the caller keeps its own reference */
    return new_buf(m, root, start, mem, msg);
}

static fattn_status ocl_buffer_region(void *state, void *mem, const void **root, uint64_t *start,
                                      fattn_msg *msg) {
    (void)state;
    (void)msg;
    *root = ((ocl_buf *)mem)->root;
    *start = ((ocl_buf *)mem)->start;
    return FATTN_OK;
}

/* owned: the core allocated it with ocl_buffer_alloc (else it wraps the
 * caller's cl_mem, of which the record holds one retained reference). */
static void ocl_buffer_free(void *state, void *mem, int owned) {
    ocl_state *s = state;
    ocl_buf *b = mem;
    clReleaseMemObject(b->mem);
    s->live_buffers -= owned != 0;
    free(b);
}

static fattn_status ocl_buffer_write(void *state, void *mem, size_t offset, const void *src,
                                     size_t bytes, fattn_msg *msg) {
    ocl_state *s = state;
    OCL_TRY(msg, clEnqueueWriteBuffer(s->queue, ((ocl_buf *)mem)->mem, CL_TRUE, offset, bytes, src,
                                      0, NULL, NULL));
    return FATTN_OK;
}

static fattn_status ocl_buffer_read(void *state, void *mem, size_t offset, void *dst, size_t bytes,
                                    fattn_msg *msg) {
    ocl_state *s = state;
    OCL_TRY(msg, clEnqueueReadBuffer(s->queue, ((ocl_buf *)mem)->mem, CL_TRUE, offset, bytes, dst,
                                     0, NULL, NULL));
    return FATTN_OK;
}

static void *ocl_buffer_native(void *state, void *mem) {
    (void)state;
    return ((ocl_buf *)mem)->mem;
}

/* Only AMD's cl_amd_device_attribute_query says how much memory is free
 * (CL_DEVICE_GLOBAL_FREE_MEMORY_AMD, in KiB); core OpenCL has no such query. */
static fattn_status ocl_device_memory(void *state, uint64_t *used, uint64_t *total,
                                      fattn_msg *msg) {
    ocl_state *s = state;
    cl_ulong size = 0;
    size_t free_kb[2] = {0, 0}, ext_len = 0;
    OCL_TRY(msg, clGetDeviceInfo(s->dev.device, CL_DEVICE_EXTENSIONS, 0, NULL, &ext_len));
    char *ext = malloc(ext_len + 1);
    if (!ext) return fattn_fail(msg, FATTN_ERR_OUT_OF_MEMORY, "cannot allocate the extension list");
    cl_int err = clGetDeviceInfo(s->dev.device, CL_DEVICE_EXTENSIONS, ext_len, ext, NULL);
    ext[err == CL_SUCCESS ? ext_len : 0] = '\0';
    const int amd = strstr(ext, "cl_amd_device_attribute_query") != NULL;
    free(ext);
    OCL_TRY(msg, err);
    if (!amd)
        return fattn_fail(msg, FATTN_ERR_UNSUPPORTED,
                          "OpenCL cannot report free device memory on this device (only AMD's "
                          "cl_amd_device_attribute_query can)");
    OCL_TRY(msg,
            clGetDeviceInfo(s->dev.device, CL_DEVICE_GLOBAL_MEM_SIZE, sizeof size, &size, NULL));
    OCL_TRY(msg, clGetDeviceInfo(s->dev.device, 0x4039 /* CL_DEVICE_GLOBAL_FREE_MEMORY_AMD */,
                                 sizeof free_kb, free_kb, NULL));
    const uint64_t free_b = (uint64_t)free_kb[0] * 1024;
    *total = (uint64_t)size;
    *used = free_b < *total ? *total - free_b : 0;
    return FATTN_OK;
}

/* Timer marks: an empty one-work-item kernel (kernels_cl/mark.cl) between
 * two barriers, so that on an out-of-order queue too it runs after all
 * earlier work and before all later work. A kernel, not a barrier or marker
 * command: NVIDIA's driver gives those zero or stale profiling times. The
 * interval runs from the end of the start mark to the start of the stop mark. */
static fattn_status ocl_mark(void *state, void **mark, fattn_msg *msg) {
    ocl_state *s = state;
    cl_kernel k;
    fattn_status st = ocl_get_kernel(&s->cache, s->context, s->dev.device, "mark.cl", "fattn_mark",
                                     "-cl-std=CL1.2", &k, msg);
    if (st != FATTN_OK) return st;
    const size_t one = 1;
    cl_event ev;
    OCL_TRY(msg, clEnqueueBarrierWithWaitList(s->queue, 0, NULL, NULL));
    OCL_TRY(msg, clEnqueueNDRangeKernel(s->queue, k, 1, NULL, &one, &one, 0, NULL, &ev));
    cl_int err = clEnqueueBarrierWithWaitList(s->queue, 0, NULL, NULL);
    if (err != CL_SUCCESS) {
        clReleaseEvent(ev);
        OCL_TRY(msg, err);
    }
    *mark = ev;
    return FATTN_OK;
}

static fattn_status ocl_mark_elapsed(void *state, void *start, void *stop, double *ms,
                                     fattn_msg *msg) {
    (void)state;
    cl_event ev[2] = {(cl_event)start, (cl_event)stop};
    const cl_profiling_info which[2] = {CL_PROFILING_COMMAND_END, CL_PROFILING_COMMAND_START};
    cl_ulong t[2];
    for (int i = 0; i < 2; i++) { /* one by one: the marks may be on queues of two contexts */
        OCL_TRY(msg, clWaitForEvents(1, &ev[i]));
        cl_int err = clGetEventProfilingInfo(ev[i], which[i], sizeof t[i], &t[i], NULL);
        if (err == CL_PROFILING_INFO_NOT_AVAILABLE)
            return fattn_fail(msg, FATTN_ERR_UNSUPPORTED,
                              "the command queue was created without CL_QUEUE_PROFILING_ENABLE; "
                              "timers need it (the context's own queue has it)");
        OCL_TRY(msg, err);
    }
    if (t[0] == 0 || t[1] < t[0])
        return fattn_fail(
            msg, FATTN_ERR_UNSUPPORTED,
            "the OpenCL driver gave no usable profiling times for the timer's mark kernels "
            "(start %llu, stop %llu)",
            (unsigned long long)t[0], (unsigned long long)t[1]);
    *ms = (double)(t[1] - t[0]) * 1e-6;
    return FATTN_OK;
}

static void ocl_mark_free(void *state, void *mark) {
    (void)state;
    clReleaseEvent((cl_event)mark);
}

/* The device, and the forward path f16/bf16 prefill takes on it (and f32
 * under FATTN_FLAG_ALLOW_TF32 where the matrix path has TF32). */
static void ocl_describe_state(void *state, char *buf, size_t len) {
    const ocl_state *s = state;
    char dev[200];
    ocl_describe(s->dev.device, dev, sizeof dev);
    const char *path = ocl_mma_path(s);
    char local[240] = "";
    if (strcmp(path, "scalar"))
        snprintf(local, sizeof local, ", %zu KiB of local memory a group%s%s%s",
                 s->mma_local / 1024, s->mma_local_why[0] ? " (" : "", s->mma_local_why,
                 s->mma_local_why[0] ? ")" : "");
    snprintf(buf, len, "%s, matrix units: %s%s%s", dev, path,
             s->mma_prim >= 0 && s->mma_ok[FATTN_F32] ? " (+TF32)" : "", local);
}

static const fattn_backend_vtable ocl_vtable = {
    .abi = FATTN_BACKEND_ABI,
    .size = sizeof(fattn_backend_vtable),
    .kind = FATTN_BACKEND_OPENCL,
    .name = "opencl",
    .native_is_host = 0,
    .probe = ocl_probe,
    .device_name = ocl_device_name,
    .open = ocl_open,
    .close = ocl_close,
    .set_stream = ocl_set_stream,
    .synchronize = ocl_synchronize,
    .buffer_alloc = ocl_buffer_alloc,
    .buffer_wrap = ocl_buffer_wrap,
    .buffer_free = ocl_buffer_free,
    .buffer_write = ocl_buffer_write,
    .buffer_read = ocl_buffer_read,
    .buffer_native = ocl_buffer_native,
    .buffer_region = ocl_buffer_region,
    .plan = ocl_plan,
    .run = ocl_run,
    .device_memory = ocl_device_memory,
    .mark = ocl_mark,
    .mark_elapsed = ocl_mark_elapsed,
    .mark_free = ocl_mark_free,
    .describe = ocl_describe_state,
    .take_fault = ocl_take_fault,
    .append = ocl_append,
};

__attribute__((visibility("default"))) const fattn_backend_vtable *fattn_backend_module_v1(void) {
    return &ocl_vtable;
}

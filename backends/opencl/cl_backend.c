/* The OpenCL backend's vtable: contexts and queues, buffers (cl_mem), the
 * planner (tile choice) and the launch of the tiled kernel. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cl_common.h"

#define CL_MAX_DEVICES 32

static void cl_probe(fattn_probe *out) {
    cl_device_entry devs[CL_MAX_DEVICES];
    out->device_count = cl_list_devices(devs, CL_MAX_DEVICES, out->reason, sizeof out->reason);
    out->gpu_count = 0;
    for (int i = 0; i < out->device_count; i++) out->gpu_count += (devs[i].type & CL_DEVICE_TYPE_GPU) != 0;
}

static fattn_status entry_at(int device, cl_device_entry *e, fattn_msg *msg) {
    cl_device_entry devs[CL_MAX_DEVICES];
    char reason[256];
    int n = cl_list_devices(devs, CL_MAX_DEVICES, reason, sizeof reason);
    if (device < 0 || device >= n)
        return fattn_fail(msg, FATTN_ERR_NO_DEVICE, "OpenCL device %d requested; %d found%s%s", device, n,
                          n ? "" : ": ", n ? "" : reason);
    *e = devs[device];
    return FATTN_OK;
}

static fattn_status cl_device_name(int device, char *buf, size_t len, fattn_msg *msg) {
    cl_device_entry e;
    fattn_status st = entry_at(device, &e, msg);
    if (st == FATTN_OK) cl_describe(e.device, buf, len);
    return st;
}

static void cl_close(void *state) {
    cl_state *s = state;
    if (!s) return;
    cl_cache_release(&s->cache);
    cl_disk_cache_close(&s->cache);
    if (s->queue && s->queue != s->own_queue) clReleaseCommandQueue(s->queue);
    if (s->own_queue) clReleaseCommandQueue(s->own_queue);
    if (s->context) clReleaseContext(s->context);
    free(s);
}

static fattn_status cl_open(int device, void **state, fattn_msg *msg) {
    cl_state *s = calloc(1, sizeof *s);
    if (!s) return fattn_fail(msg, FATTN_ERR_OUT_OF_MEMORY, "cannot allocate the OpenCL state");
    s->cache.disk_fd = -1;
    fattn_status st = entry_at(device, &s->dev, msg);
    cl_int err = CL_SUCCESS;
    if (st == FATTN_OK) {
        cl_context_properties props[] = {CL_CONTEXT_PLATFORM, (cl_context_properties)s->dev.platform, 0};
        s->context = clCreateContext(props, 1, &s->dev.device, NULL, NULL, &err);
        if (err == CL_SUCCESS)
            s->own_queue = clCreateCommandQueue(s->context, s->dev.device, CL_QUEUE_PROFILING_ENABLE, &err);
        if (err != CL_SUCCESS)
            st = fattn_fail(msg, FATTN_ERR_DEVICE, "creating an OpenCL context and queue: %s (%d)",
                            cl_error_name(err), (int)err);
    }
    if (st == FATTN_OK) st = cl_read_limits(s->dev.device, s->dev.type, &s->limits, msg);
    /* Last: on success it may leave a note (disk cache off) in msg. */
    if (st == FATTN_OK) st = cl_disk_cache_open(&s->cache, msg);
    if (st != FATTN_OK) {
        cl_close(s);
        return st;
    }
    s->queue = s->own_queue;
    *state = s;
    return FATTN_OK;
}

/* The caller's queue must be on our device. One on another cl_context moves
 * the context there (so the caller's cl_mem can be wrapped), which is only
 * possible while no fattn-allocated buffer lives in the old one. */
static fattn_status cl_set_stream(void *state, void *native, fattn_msg *msg) {
    cl_state *s = state;
    cl_command_queue q = native ? (cl_command_queue)native : s->own_queue;
    if (q == s->queue) return FATTN_OK;
    cl_device_id dev;
    cl_context qctx;
    CL_TRY(msg, clGetCommandQueueInfo(q, CL_QUEUE_DEVICE, sizeof dev, &dev, NULL));
    CL_TRY(msg, clGetCommandQueueInfo(q, CL_QUEUE_CONTEXT, sizeof qctx, &qctx, NULL));
    if (dev != s->dev.device)
        return fattn_fail(msg, FATTN_ERR_INVALID_ARGUMENT,
                          "the command queue is on another device than this context's");
    if (qctx != s->context) {
        if (s->live_buffers)
            return fattn_fail(msg, FATTN_ERR_INVALID_ARGUMENT,
                              "the command queue belongs to another cl_context while %d buffers "
                              "allocated by fattn live in this one; set the queue first",
                              s->live_buffers);
        CL_TRY(msg, clRetainContext(qctx));
        cl_cache_release(&s->cache);   /* programs belong to a cl_context */
        clReleaseContext(s->context);
        s->context = qctx;
    }
    if (native) CL_TRY(msg, clRetainCommandQueue(q));
    if (s->queue != s->own_queue) clReleaseCommandQueue(s->queue);
    s->queue = q;
    return FATTN_OK;
}

static fattn_status cl_synchronize(void *state, fattn_msg *msg) {
    CL_TRY(msg, clFinish(((cl_state *)state)->queue));
    return FATTN_OK;
}

static fattn_status new_buf(cl_mem mem, int owned, cl_mem root, uint64_t start, void **out,
                            fattn_msg *msg) {
    cl_buf *b = malloc(sizeof *b);
    if (!b) {
        clReleaseMemObject(mem);
        return fattn_fail(msg, FATTN_ERR_OUT_OF_MEMORY, "cannot allocate a buffer record");
    }
    b->mem = mem;
    b->owned = owned;
    b->root = root;
    b->start = start;
    *out = b;
    return FATTN_OK;
}

static fattn_status cl_buffer_alloc(void *state, size_t bytes, void **mem, fattn_msg *msg) {
    cl_state *s = state;
    /* Drivers may accept any size lazily (NVIDIA's took 2^62 bytes). */
    if ((uint64_t)bytes > s->limits.max_alloc || (uint64_t)bytes > s->limits.global_mem)
        return fattn_fail(msg, FATTN_ERR_OUT_OF_MEMORY,
                          "cannot allocate %zu bytes: the OpenCL device allows at most %llu bytes in "
                          "one buffer and has %llu bytes of global memory",
                          bytes, (unsigned long long)s->limits.max_alloc,
                          (unsigned long long)s->limits.global_mem);
    cl_int err;
    cl_mem m = clCreateBuffer(s->context, CL_MEM_READ_WRITE, bytes, NULL, &err);
    if (err != CL_SUCCESS)
        return fattn_fail(msg, FATTN_ERR_OUT_OF_MEMORY, "clCreateBuffer(%zu bytes): %s (%d)", bytes,
                          cl_error_name(err), (int)err);
    fattn_status st = new_buf(m, 1, m, 0, mem, msg);
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
        CL_TRY(msg, clGetMemObjectInfo(m, CL_MEM_ASSOCIATED_MEMOBJECT, sizeof parent, &parent, NULL));
        if (!parent) {
            *root = m;
            *start = at;
            return FATTN_OK;
        }
        CL_TRY(msg, clGetMemObjectInfo(m, CL_MEM_OFFSET, sizeof offset, &offset, NULL));
        at += offset;
        m = parent;
    }
    return fattn_fail(msg, FATTN_ERR_DEVICE, "the cl_mem's chain of parent buffers is longer than 16");
}

static fattn_status cl_buffer_wrap(void *state, void *native, size_t bytes, void **mem, fattn_msg *msg) {
    cl_state *s = state;
    cl_mem m = (cl_mem)native;
    cl_context mctx;
    size_t size;
    CL_TRY(msg, clGetMemObjectInfo(m, CL_MEM_CONTEXT, sizeof mctx, &mctx, NULL));
    CL_TRY(msg, clGetMemObjectInfo(m, CL_MEM_SIZE, sizeof size, &size, NULL));
    if (mctx != s->context)
        return fattn_fail(msg, FATTN_ERR_INVALID_ARGUMENT,
                          "the cl_mem belongs to another cl_context; pass a queue of that context "
                          "to fattn_context_set_stream first");
    if (size < bytes)
        return fattn_fail(msg, FATTN_ERR_BUFFER_TOO_SMALL, "the cl_mem has %zu bytes, not %zu", size, bytes);
    cl_mem root = NULL;
    uint64_t start = 0;
    fattn_status st = find_root(m, &root, &start, msg);
    if (st != FATTN_OK) return st;
    CL_TRY(msg, clRetainMemObject(m));   /* the caller keeps its own reference */
    return new_buf(m, 0, root, start, mem, msg);
}

static fattn_status cl_buffer_root(void *state, void *mem, const void **root, uint64_t *start,
                                   fattn_msg *msg) {
    (void)state;
    (void)msg;
    *root = ((cl_buf *)mem)->root;
    *start = ((cl_buf *)mem)->start;
    return FATTN_OK;
}


static void cl_buffer_free(void *state, void *mem) {
    cl_state *s = state;
    cl_buf *b = mem;
    clReleaseMemObject(b->mem);
    s->live_buffers -= b->owned;
    free(b);
}

static fattn_status cl_buffer_write(void *state, void *mem, size_t offset, const void *src, size_t bytes,
                                    fattn_msg *msg) {
    cl_state *s = state;
    CL_TRY(msg, clEnqueueWriteBuffer(s->queue, ((cl_buf *)mem)->mem, CL_TRUE, offset, bytes, src, 0, NULL, NULL));
    return FATTN_OK;
}

static fattn_status cl_buffer_read(void *state, void *mem, size_t offset, void *dst, size_t bytes,
                                   fattn_msg *msg) {
    cl_state *s = state;
    CL_TRY(msg, clEnqueueReadBuffer(s->queue, ((cl_buf *)mem)->mem, CL_TRUE, offset, bytes, dst, 0, NULL, NULL));
    return FATTN_OK;
}

static void *cl_buffer_native(void *state, void *mem) {
    (void)state;
    return ((cl_buf *)mem)->mem;
}

static fattn_status cl_plan(void *state, const fattn_problem *p, fattn_plan *plan, fattn_msg *msg) {
    cl_state *s = state;
    const int64_t int_max = FATTN_INT32_MAX;
    if (p->seq_q > int_max - 1024 || p->seq_kv > int_max || p->batch * p->heads_q > int_max)
        return fattn_fail(msg, FATTN_ERR_UNSUPPORTED,
                          "the OpenCL kernel indexes rows and heads with 32-bit integers: seq_q, "
                          "seq_kv and batch * heads_q must stay below 2^31");
    cl_tiles t;
    fattn_status st = cl_choose_tiles(&s->limits, (int)p->head_dim, p->tile_q, p->tile_kv, &t, msg);
    if (st != FATTN_OK) return st;
    plan->variant = 0;
    plan->detail[0] = t.dpad;
    plan->detail[1] = t.bq;
    plan->detail[2] = t.bkv;
    plan->detail[3] = t.tq | t.tk << 16;
    plan->tiling.tile_q = t.bq;
    plan->tiling.tile_kv = t.bkv;
    /* Resident groups: as many as local memory allows on each compute unit. */
    const size_t per_cu = s->limits.local_mem / cl_local_bytes(&t);
    plan->tiling.concurrent_groups = (int64_t)s->limits.compute_units * (int64_t)(per_cu ? per_cu : 1);
    plan->tiling.workspace_bytes = 0;
    return FATTN_OK;
}

static fattn_status cl_forward(void *state, const fattn_problem *p, const fattn_plan *plan, fattn_msg *msg) {
    cl_state *s = state;
    const cl_tiles t = {plan->detail[0], plan->detail[1], plan->detail[2], plan->detail[3] & 0xffff,
                         plan->detail[3] >> 16};
    fattn_status st;
    char options[200];
    snprintf(options, sizeof options, "-cl-std=CL1.2 -DDTYPE=%d -DDPAD=%d -DBQ=%d -DBKV=%d -DTQ=%d -DTK=%d",
             (int)p->dtype, t.dpad, t.bq, t.bkv, t.tq, t.tk);
    cl_kernel k;
    if ((st = cl_get_kernel(&s->cache, s->context, s->dev.device, "flash_fwd.cl", "flash_fwd", options,
                            &k, msg)) != FATTN_OK)
        return st;

    const fattn_operand *ops[5] = {&p->q, &p->k, &p->v, &p->o, &p->lse};
    cl_uint a = 0;
    for (int i = 0; i < 5; i++) {
        cl_mem m = i < 4 || p->has_lse ? cl_mem_of(ops[i]) : NULL;
        cl_long f[4] = {ops[i]->offset, ops[i]->stride_batch, ops[i]->stride_head, ops[i]->stride_seq};
        CL_TRY(msg, clSetKernelArg(k, a++, sizeof m, &m));
        for (int j = 0; j < 4; j++) CL_TRY(msg, clSetKernelArg(k, a++, sizeof f[j], &f[j]));
    }
    const cl_int ints[5] = {p->has_lse, (cl_int)p->heads_q, (cl_int)(p->heads_q / p->heads_kv),
                            (cl_int)p->seq_q, (cl_int)p->seq_kv};
    for (int i = 0; i < 5; i++) CL_TRY(msg, clSetKernelArg(k, a++, sizeof(cl_int), &ints[i]));
    const cl_int D = (cl_int)p->head_dim, causal = p->causal;
    const cl_float scale = p->scale * FATTN_LOG2E_F;   /* log2(e): the kernel uses exp2 */
    CL_TRY(msg, clSetKernelArg(k, a++, sizeof D, &D));
    CL_TRY(msg, clSetKernelArg(k, a++, sizeof scale, &scale));
    CL_TRY(msg, clSetKernelArg(k, a++, sizeof causal, &causal));

    /* The kernel's own limit can be below the device's (registers per work-item). */
    const size_t nt = (size_t)t.tq * (size_t)t.tk;
    size_t kernel_wg = 0;
    CL_TRY(msg, clGetKernelWorkGroupInfo(k, s->dev.device, CL_KERNEL_WORK_GROUP_SIZE, sizeof kernel_wg,
                                         &kernel_wg, NULL));
    if (nt > kernel_wg)
        return fattn_fail(msg, FATTN_ERR_UNSUPPORTED,
                          "tiles %dx%d need %zu work-items per group; this kernel build allows %zu on "
                          "this device (try smaller tiles through tile_q / tile_kv or FATTN_OPENCL_TILES)",
                          t.bq, t.bkv, nt, kernel_wg);
    const size_t global[2] = {(size_t)((p->seq_q + t.bq - 1) / t.bq) * nt, (size_t)(p->batch * p->heads_q)};
    const size_t local[2] = {nt, 1};
    CL_TRY(msg, clEnqueueNDRangeKernel(s->queue, k, 2, NULL, global, local, 0, NULL, NULL));
    return FATTN_OK;
}

/* Only AMD's cl_amd_device_attribute_query says how much memory is free
 * (CL_DEVICE_GLOBAL_FREE_MEMORY_AMD, in KiB); core OpenCL has no such query. */
static fattn_status cl_device_memory(void *state, uint64_t *used, uint64_t *total, fattn_msg *msg) {
    cl_state *s = state;
    cl_ulong size = 0;
    size_t free_kb[2] = {0, 0}, ext_len = 0;
    CL_TRY(msg, clGetDeviceInfo(s->dev.device, CL_DEVICE_EXTENSIONS, 0, NULL, &ext_len));
    char *ext = malloc(ext_len + 1);
    if (!ext) return fattn_fail(msg, FATTN_ERR_OUT_OF_MEMORY, "cannot allocate the extension list");
    cl_int err = clGetDeviceInfo(s->dev.device, CL_DEVICE_EXTENSIONS, ext_len, ext, NULL);
    ext[err == CL_SUCCESS ? ext_len : 0] = '\0';
    const int amd = strstr(ext, "cl_amd_device_attribute_query") != NULL;
    free(ext);
    CL_TRY(msg, err);
    if (!amd)
        return fattn_fail(msg, FATTN_ERR_UNSUPPORTED,
                          "OpenCL cannot report free device memory on this device (only AMD's "
                          "cl_amd_device_attribute_query can)");
    CL_TRY(msg, clGetDeviceInfo(s->dev.device, CL_DEVICE_GLOBAL_MEM_SIZE, sizeof size, &size, NULL));
    CL_TRY(msg, clGetDeviceInfo(s->dev.device, 0x4039 /* CL_DEVICE_GLOBAL_FREE_MEMORY_AMD */, sizeof free_kb,
                                free_kb, NULL));
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
static fattn_status cl_mark(void *state, void **mark, fattn_msg *msg) {
    cl_state *s = state;
    cl_kernel k;
    fattn_status st = cl_get_kernel(&s->cache, s->context, s->dev.device, "mark.cl", "fattn_mark",
                                    "-cl-std=CL1.2", &k, msg);
    if (st != FATTN_OK) return st;
    const size_t one = 1;
    cl_event ev;
    CL_TRY(msg, clEnqueueBarrierWithWaitList(s->queue, 0, NULL, NULL));
    CL_TRY(msg, clEnqueueNDRangeKernel(s->queue, k, 1, NULL, &one, &one, 0, NULL, &ev));
    cl_int err = clEnqueueBarrierWithWaitList(s->queue, 0, NULL, NULL);
    if (err != CL_SUCCESS) {
        clReleaseEvent(ev);
        CL_TRY(msg, err);
    }
    *mark = ev;
    return FATTN_OK;
}

static fattn_status cl_mark_elapsed(void *state, void *start, void *stop, double *ms, fattn_msg *msg) {
    (void)state;
    cl_event ev[2] = {(cl_event)start, (cl_event)stop};
    const cl_profiling_info which[2] = {CL_PROFILING_COMMAND_END, CL_PROFILING_COMMAND_START};
    cl_ulong t[2];
    for (int i = 0; i < 2; i++) {   /* one by one: the marks may be on queues of two contexts */
        CL_TRY(msg, clWaitForEvents(1, &ev[i]));
        cl_int err = clGetEventProfilingInfo(ev[i], which[i], sizeof t[i], &t[i], NULL);
        if (err == CL_PROFILING_INFO_NOT_AVAILABLE)
            return fattn_fail(msg, FATTN_ERR_UNSUPPORTED,
                              "the command queue was created without CL_QUEUE_PROFILING_ENABLE; "
                              "timers need it (the context's own queue has it)");
        CL_TRY(msg, err);
    }
    if (t[0] == 0 || t[1] < t[0])
        return fattn_fail(msg, FATTN_ERR_UNSUPPORTED,
                          "the OpenCL driver gave no usable profiling times for the timer's mark kernels "
                          "(start %llu, stop %llu)", (unsigned long long)t[0], (unsigned long long)t[1]);
    *ms = (double)(t[1] - t[0]) * 1e-6;
    return FATTN_OK;
}

static void cl_mark_free(void *state, void *mark) {
    (void)state;
    clReleaseEvent((cl_event)mark);
}

static const fattn_backend_vtable cl_vtable = {
    .abi = FATTN_BACKEND_ABI,
    .size = sizeof(fattn_backend_vtable),
    .kind = FATTN_BACKEND_OPENCL,
    .name = "opencl",
    .native_is_host = 0,
    .probe = cl_probe,
    .device_name = cl_device_name,
    .open = cl_open,
    .close = cl_close,
    .set_stream = cl_set_stream,
    .synchronize = cl_synchronize,
    .buffer_alloc = cl_buffer_alloc,
    .buffer_wrap = cl_buffer_wrap,
    .buffer_free = cl_buffer_free,
    .buffer_write = cl_buffer_write,
    .buffer_read = cl_buffer_read,
    .buffer_native = cl_buffer_native,
    .buffer_region = cl_buffer_root,   /* cl_buffer_region is an OpenCL type */
    .plan = cl_plan,
    .forward = cl_forward,
    .forward_naive = cl_forward_naive,
    .device_memory = cl_device_memory,
    .mark = cl_mark,
    .mark_elapsed = cl_mark_elapsed,
    .mark_free = cl_mark_free,
};

__attribute__((visibility("default"))) const fattn_backend_vtable *fattn_backend_module_v1(void) {
    return &cl_vtable;
}

/* The private contract between the core and a backend: the vtable a backend
 * fills, and the resolved problem it receives. GPU backends are separate
 * modules (dlopen) that include only this header and fattn.h, so everything
 * here is plain data or static inline. */
#ifndef FATTN_BACKEND_H
#define FATTN_BACKEND_H

#include <stdarg.h>
#include <stdio.h>

#include "fattn.h"

/* Bumped whenever this header changes incompatibly; the core refuses a
 * module built against another value. */
#define FATTN_BACKEND_ABI 4
/* The one symbol a backend module exports: const fattn_backend_vtable *f(void). */
#define FATTN_MODULE_SYMBOL "fattn_backend_module_v1"

/* Limits and constants every backend uses, named once. */
#define FATTN_INT32_MAX ((int64_t)0x7fffffff)   /* kernels index rows and keys with 32-bit ints */
#define FATTN_LOG2E_F 1.4426950408889634f        /* kernels fold scale * log2(e) and use exp2 */

/* Backend names, indexed by fattn_backend_kind; inline so that modules,
 * which link none of the core, can parse them too. */
static const char *const fattn_backend_names[FATTN_BACKEND_COUNT] = {"auto", "cpu", "cuda", "opencl"};

static inline int fattn_parse_backend(const char *name, fattn_backend_kind *out) {
    for (int i = 0; i < FATTN_BACKEND_COUNT; i++) {
        const char *a = name, *b = fattn_backend_names[i];
        while (*a && *b && (*a | 0x20) == *b) a++, b++;   /* names are lower-case letters */
        if (!*a && !*b) {
            *out = (fattn_backend_kind)i;
            return 1;
        }
    }
    return 0;
}

/* Where a backend writes the detail of a failure. The core shows it through
 * fattn_error_message(). */
typedef struct fattn_msg {
    char text[4096];
} fattn_msg;

/* Formats the message and returns `status`, so a backend can write
 * `return fattn_fail(msg, FATTN_ERR_DEVICE, "clEnqueue...: %d", err);`. */
static inline fattn_status fattn_fail(fattn_msg *msg, fattn_status status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
static inline fattn_status fattn_fail(fattn_msg *msg, fattn_status status, const char *fmt, ...) {
    if (msg) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg->text, sizeof msg->text, fmt, ap);
        va_end(ap);
    }
    return status;
}

/* One operand after validation: the backend's own buffer handle plus element
 * offsets. Strides are in elements; stride_dim is always 1. */
typedef struct fattn_operand {
    void *mem;
    int64_t offset;
    int64_t stride_batch, stride_head, stride_seq;
} fattn_operand;

/* A validated attention problem (FlashAttention-2's Flash_fwd_params idea):
 * sizes, resolved scale, and operands. has_lse says whether lse is wanted. */
typedef struct fattn_problem {
    int64_t batch, heads_q, heads_kv, seq_q, seq_kv, head_dim;
    fattn_dtype dtype;
    float scale;        /* resolved: never 0 unless the caller asked for it */
    int causal;
    int tile_q, tile_kv;   /* caller's overrides, 0 = backend default */
    unsigned flags;
    fattn_operand q, k, v, o, lse;
    int has_lse;
} fattn_problem;

/* What a backend found on this machine. */
typedef struct fattn_probe {
    int device_count;
    int gpu_count;
    char reason[256];   /* why device_count is 0 */
} fattn_probe;

/* The backend's decision for one problem: the kernel variant and its tiling.
 * plan() is the only place that decides, so "is it supported" and "what
 * runs" cannot disagree. */
typedef struct fattn_plan {
    int variant;          /* backend-defined kernel choice */
    int detail[4];        /* backend-defined launch parameters */
    fattn_tiling tiling;  /* tile sizes, resident groups, workspace */
} fattn_plan;

typedef struct fattn_backend_vtable {
    int abi;                       /* FATTN_BACKEND_ABI */
    /* sizeof(fattn_backend_vtable) where the module was built: the core
     * refuses a module whose table is smaller than its own, or that leaves a
     * required slot NULL, instead of calling through a missing pointer. */
    size_t size;
    fattn_backend_kind kind;
    const char *name;
    /* 1 when the backend's buffers are host memory (the CPU backend): the
     * host convenience call then wraps the caller's arrays instead of copying. */
    int native_is_host;

    /* Counts devices; a missing driver is device_count 0 plus a reason. */
    void (*probe)(fattn_probe *out);
    fattn_status (*device_name)(int device, char *buf, size_t len, fattn_msg *msg);

    /* A per-context state for one device. On success open may leave a note
     * in msg (e.g. "disk cache off: ..."); the core appends it to the
     * context's device description, so a degraded mode is never silent. */
    fattn_status (*open)(int device, void **state, fattn_msg *msg);
    void (*close)(void *state);

    /* Optional: NULL means the backend has no queues, and the core accepts
     * only a NULL stream. */
    fattn_status (*set_stream)(void *state, void *native_stream, fattn_msg *msg);
    /* Optional: NULL means the backend's calls are synchronous. */
    fattn_status (*synchronize)(void *state, fattn_msg *msg);

    /* Buffers. The core checks ranges before calling read/write. */
    fattn_status (*buffer_alloc)(void *state, size_t bytes, void **mem, fattn_msg *msg);
    /* Optional: NULL makes fattn_buffer_wrap return FATTN_ERR_UNSUPPORTED. */
    fattn_status (*buffer_wrap)(void *state, void *native, size_t bytes, void **mem, fattn_msg *msg);
    /* Frees what alloc made, or only the wrapper of what wrap made. */
    void (*buffer_free)(void *state, void *mem);
    fattn_status (*buffer_write)(void *state, void *mem, size_t offset, const void *src,
                                 size_t bytes, fattn_msg *msg);
    fattn_status (*buffer_read)(void *state, void *mem, size_t offset, void *dst, size_t bytes,
                                fattn_msg *msg);
    void *(*buffer_native)(void *state, void *mem);
    /* Where a buffer's memory lies, for the core's overlap and alignment
     * checks: *root names the allocation it is part of and *start is the
     * byte position of the buffer's first byte in that allocation's space.
     * Address backends (CPU, CUDA) give root NULL and start = the address,
     * so wrappers of the same memory meet; OpenCL gives the top cl_mem of a
     * sub-buffer chain and the sub-buffer's origin, so two wrappers of one
     * cl_mem, or a buffer and its sub-buffer, meet too. The core requires
     * start to be a multiple of the element size of each tensor on it. */
    fattn_status (*buffer_region)(void *state, void *mem, const void **root, uint64_t *start,
                                  fattn_msg *msg);

    /* Can this problem run, and how: FATTN_ERR_UNSUPPORTED with a reason if
     * not. forward() receives the plan that this returned. */
    fattn_status (*plan)(void *state, const fattn_problem *p, fattn_plan *plan, fattn_msg *msg);
    fattn_status (*forward)(void *state, const fattn_problem *p, const fattn_plan *plan,
                            fattn_msg *msg);
    /* Optional: NULL makes fattn_forward_naive return FATTN_ERR_UNSUPPORTED. */
    fattn_status (*forward_naive)(void *state, const fattn_problem *p, fattn_msg *msg);
    /* Optional: device memory in use (by anyone) and total, measured now;
     * NULL makes fattn_context_device_memory return FATTN_ERR_UNSUPPORTED. */
    fattn_status (*device_memory)(void *state, uint64_t *used, uint64_t *total, fattn_msg *msg);
    /* Optional, all three or none: a mark recorded on the current queue,
     * the milliseconds between two marks (waiting for the second), and its
     * release. NULL: timers use the host clock when the backend is
     * synchronous (synchronize NULL), else fattn_timer_create is unsupported. */
    fattn_status (*mark)(void *state, void **mark, fattn_msg *msg);
    fattn_status (*mark_elapsed)(void *state, void *start, void *stop, double *ms, fattn_msg *msg);
    void (*mark_free)(void *state, void *mark);
} fattn_backend_vtable;

typedef const fattn_backend_vtable *(*fattn_backend_module_fn)(void);

#endif /* FATTN_BACKEND_H */

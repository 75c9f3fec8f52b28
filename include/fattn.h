/* fattn: exact FlashAttention (tiled attention with an online softmax) behind
 * one plain C API, with CPU, CUDA and OpenCL backends picked at run time.
 * This is the whole public interface; it is C11 and readable by FFI tools. */
#ifndef FATTN_H
#define FATTN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* FATTN_BUILDING: set while fattn itself is compiled; FATTN_STATIC: set by
 * programs that link the static library. */
#if defined(_WIN32) && defined(FATTN_STATIC)
#  define FATTN_API
#elif defined(_WIN32) && defined(FATTN_BUILDING)
#  define FATTN_API __declspec(dllexport)
#elif defined(_WIN32)
#  define FATTN_API __declspec(dllimport)
#elif defined(__GNUC__)
#  define FATTN_API __attribute__((visibility("default")))
#else
#  define FATTN_API
#endif

/* Version. Releases with the same major version are ABI compatible; the
 * shared library's SOVERSION is the major version. */
#define FATTN_VERSION_MAJOR 0
#define FATTN_VERSION_MINOR 1
#define FATTN_VERSION_PATCH 0
#define FATTN_VERSION_NUMBER \
    (FATTN_VERSION_MAJOR * 10000 + FATTN_VERSION_MINOR * 100 + FATTN_VERSION_PATCH)

/* The version of the library loaded at run time (which may differ from the
 * header's macros): FATTN_VERSION_NUMBER form, and "major.minor.patch". */
FATTN_API unsigned fattn_version_number(void);
FATTN_API const char *fattn_version_string(void);

/* Status codes. Values are pinned and never renumbered; 0 is success and
 * every error is negative. fattn_status_string() gives a static sentence per
 * code; fattn_error_message() gives the detail of the last failure. */
#define FATTN_STATUS_MAP(X)                                                          \
    X(OK,                  0, "success")                                             \
    X(ERR_NULL_POINTER,   -1, "a required pointer argument is NULL")                 \
    X(ERR_INVALID_ARGUMENT, -2, "an argument has an invalid value")                  \
    X(ERR_INVALID_SIZE,   -3, "a size is zero, negative or out of range")            \
    X(ERR_HEAD_DIM,       -4, "head dimension is outside 1..256")                    \
    X(ERR_HEADS,          -5, "query heads are not a multiple of key/value heads")   \
    X(ERR_STRIDE,         -6, "a tensor stride is invalid")                          \
    X(ERR_BUFFER_TOO_SMALL, -7, "a buffer is too small for the tensor it holds")     \
    X(ERR_DTYPE,          -8, "a tensor's dtype does not match the attention")       \
    X(ERR_OVERFLOW,       -9, "a size computation overflows 64 bits")                \
    X(ERR_WRONG_CONTEXT, -10, "a buffer belongs to another context")                 \
    X(ERR_UNKNOWN_BACKEND, -11, "unknown backend")                                   \
    X(ERR_BACKEND_UNAVAILABLE, -12, "the requested backend is not available here")   \
    X(ERR_NO_DEVICE,     -13, "no such device")                                      \
    X(ERR_OUT_OF_MEMORY, -14, "out of memory")                                       \
    X(ERR_UNSUPPORTED,   -15, "not supported by this backend")                       \
    X(ERR_DEVICE,        -16, "the device or its driver reported an error")          \
    X(ERR_BUILD,         -17, "a device kernel failed to build")                     \
    X(ERR_ENVIRONMENT,   -18, "an environment variable has an invalid value")        \
    X(ERR_OUT_OF_BOUNDS, -19, "an access reaches outside a buffer")                  \
    X(ERR_INTERNAL,      -20, "internal error in fattn")                           \
    X(ERR_MISALIGNED,    -21, "a tensor's address is not a multiple of its element size")

typedef enum fattn_status {
#define FATTN_STATUS_ENUM_(name, value, text) FATTN_##name = value,
    FATTN_STATUS_MAP(FATTN_STATUS_ENUM_)
#undef FATTN_STATUS_ENUM_
    FATTN_STATUS_MIN_ = -21
} fattn_status;

/* A static, never-NULL sentence for a status ("unknown status" for values
 * outside the table). Thread-safe. */
FATTN_API const char *fattn_status_string(fattn_status status);

typedef enum fattn_backend_kind {
    FATTN_BACKEND_AUTO = 0,   /* FATTN_BACKEND, else CUDA, else an OpenCL GPU, else CPU */
    FATTN_BACKEND_CPU = 1,
    FATTN_BACKEND_CUDA = 2,
    FATTN_BACKEND_OPENCL = 3,
    FATTN_BACKEND_COUNT = 4
} fattn_backend_kind;

/* Storage types. Arithmetic and accumulation are float32 for every dtype. */
typedef enum fattn_dtype {
    FATTN_F32 = 0,
    FATTN_F16 = 1,   /* IEEE binary16 */
    FATTN_BF16 = 2   /* bfloat16 */
} fattn_dtype;

/* Bytes per element of a dtype, 0 for an invalid value. */
FATTN_API size_t fattn_dtype_size(fattn_dtype dtype);
/* "f32", "f16", "bf16", or "invalid": static strings, valid forever. */
FATTN_API const char *fattn_dtype_name(fattn_dtype dtype);

/* Opaque handles. */
typedef struct fattn_context fattn_context;
typedef struct fattn_buffer fattn_buffer;

/* ---- Backends and devices ------------------------------------------------ */

typedef struct fattn_backend_info {
    fattn_backend_kind kind;
    const char *name;       /* "cpu", "cuda", "opencl"; static */
    int available;          /* 1 when a context can be created on it */
    int device_count;       /* devices usable here, 0 when unavailable */
    int gpu_count;          /* how many of those are GPUs (listed first) */
    char reason[256];       /* why it is unavailable; "" when available */
} fattn_backend_info;

/* Describes one backend (not AUTO). Loads the backend's module on first use.
 * Returns FATTN_OK even when the backend is unavailable (see info->reason).
 * Thread-safe. */
FATTN_API fattn_status fattn_backend_get_info(fattn_backend_kind kind, fattn_backend_info *info);

/* Static name of a backend kind ("auto", "cpu", "cuda", "opencl"), or "unknown". */
FATTN_API const char *fattn_backend_name(fattn_backend_kind kind);

/* Parses a case-insensitive backend name. FATTN_ERR_UNKNOWN_BACKEND otherwise. */
FATTN_API fattn_status fattn_backend_from_name(const char *name, fattn_backend_kind *out);

/* Writes the name of device `device` of a backend into buf (always
 * NUL-terminated, truncated to len). Thread-safe. */
FATTN_API fattn_status fattn_device_get_name(fattn_backend_kind kind, int device,
                                             char *buf, size_t len);

/* ---- Contexts -------------------------------------------------------------- */

/* Creates a context bound to one backend and one device.
 * backend: FATTN_BACKEND_AUTO lets the environment variable FATTN_BACKEND
 *   decide, else prefers CUDA, then an OpenCL GPU, then the CPU. A named
 *   backend is used as asked; an unavailable one is an error carrying its
 *   reason, never a silent fallback.
 * device: index within the backend; -1 means FATTN_DEVICE, else 0.
 * On failure *out is NULL and fattn_error_message(NULL) tells why.
 * A context is not thread-safe: use one per thread, or serialise calls. */
FATTN_API fattn_status fattn_context_create(fattn_context **out, fattn_backend_kind backend,
                                            int device);

/* Releases the context. Accepts NULL. Buffers still alive keep the backend
 * alive until they are freed too. */
FATTN_API void fattn_context_free(fattn_context *ctx);

FATTN_API fattn_backend_kind fattn_context_backend(const fattn_context *ctx);
FATTN_API const char *fattn_context_backend_name(const fattn_context *ctx);
FATTN_API const char *fattn_context_device_name(const fattn_context *ctx);
FATTN_API int fattn_context_device(const fattn_context *ctx);

/* Runs later work on the caller's queue: a cudaStream_t (CUDA) or a
 * cl_command_queue on the context's device (OpenCL). NULL restores the
 * context's own. The CPU backend accepts only NULL. */
FATTN_API fattn_status fattn_context_set_stream(fattn_context *ctx, void *native_stream);

/* Waits for all work the context has queued. */
FATTN_API fattn_status fattn_context_synchronize(fattn_context *ctx);

/* The memory of the context's device, measured now: its total and the bytes
 * in use by every process (CUDA: cudaMemGetInfo; CPU: host RAM from
 * /proc/meminfo; OpenCL: AMD devices only, through cl_amd_device_attribute_query).
 * The difference of two readings around an asynchronous call, the second
 * taken before synchronising, shows what that call allocated (the naive
 * baselines' S and P; the tiled kernels allocate nothing), as long as the
 * allocator returns freed memory at synchronisation (CUDA's default pool
 * does, unless the process raised its release threshold) and allocates when
 * asked (some OpenCL drivers allocate lazily). The reading is device-wide:
 * other processes count. FATTN_ERR_UNSUPPORTED where the device cannot tell. */
FATTN_API fattn_status fattn_context_device_memory(fattn_context *ctx, uint64_t *used, uint64_t *total);

/* Device-side timing of the work queued between start and stop on the
 * context's queue: CUDA events, OpenCL profiling of an empty mark kernel (the
 * queue needs CL_QUEUE_PROFILING_ENABLE, which the context's own has), the
 * host clock on the synchronous CPU backend. start and stop only enqueue;
 * elapsed waits for both marks. Keep the same stream between start and stop.
 * A timer keeps its context alive, like a buffer, and its calls count as
 * calls on the context (one thread at a time). */
typedef struct fattn_timer fattn_timer;
FATTN_API fattn_status fattn_timer_create(fattn_context *ctx, fattn_timer **out);
FATTN_API fattn_status fattn_timer_start(fattn_timer *t);
FATTN_API fattn_status fattn_timer_stop(fattn_timer *t);
FATTN_API fattn_status fattn_timer_elapsed_ms(fattn_timer *t, double *ms);
FATTN_API void fattn_timer_free(fattn_timer *t);
/* 1 when the timer reads a device clock, 0 for the host clock (CPU backend). */
FATTN_API int fattn_timer_is_device_clock(const fattn_timer *t);

/* Detail of the last failed call on ctx: which argument, which limit, which
 * native error code, the kernel build log. "" when the last call succeeded.
 * With ctx NULL: the calling thread's last failure of a call that had no
 * context (fattn_context_create, fattn_backend_get_info, ...).
 * Valid until the next call on the same context (or thread). */
FATTN_API const char *fattn_error_message(const fattn_context *ctx);

/* ---- Buffers ---------------------------------------------------------------- */

/* Allocates `bytes` of device memory (host memory for the CPU backend). */
FATTN_API fattn_status fattn_buffer_alloc(fattn_context *ctx, size_t bytes, fattn_buffer **out);

/* Wraps the caller's memory without copying: a CUDA device pointer, an
 * OpenCL cl_mem (a sub-buffer too), or a host pointer for the CPU backend.
 * The caller keeps ownership; fattn_buffer_free releases only the wrapper.
 * Tensors on it need an address aligned to their element size. */
FATTN_API fattn_status fattn_buffer_wrap(fattn_context *ctx, void *native, size_t bytes,
                                         fattn_buffer **out);

/* Releases a buffer (or a wrapper). Accepts NULL. */
FATTN_API void fattn_buffer_free(fattn_buffer *buf);

/* Blocking copies between host memory and [offset, offset + bytes) of buf. */
FATTN_API fattn_status fattn_buffer_write(fattn_buffer *buf, size_t offset, const void *src,
                                          size_t bytes);
FATTN_API fattn_status fattn_buffer_read(fattn_buffer *buf, size_t offset, void *dst,
                                         size_t bytes);

FATTN_API size_t fattn_buffer_size(const fattn_buffer *buf);
/* The native handle: device pointer, cl_mem, or host pointer. */
FATTN_API void *fattn_buffer_native(const fattn_buffer *buf);

/* ---- Attention ------------------------------------------------------------- */

/* What to compute: O = softmax(scale * Q K^T [+ causal mask]) V per (batch,
 * query head). Query head h reads key/value head h / (heads_q / heads_kv).
 * Zero-initialise, then set the sizes and dtype; scale, causal, tile_q,
 * tile_kv and flags left at zero mean the defaults. */
typedef struct fattn_attention_desc {
    int64_t batch;
    int64_t heads_q;
    int64_t heads_kv;    /* heads_q must be a multiple (GQA/MQA) */
    int64_t seq_q;
    int64_t seq_kv;      /* 0 is allowed: output 0, log-sum-exp -inf */
    int64_t head_dim;    /* 1..256 */
    fattn_dtype dtype;   /* of Q, K, V and O */
    float scale;         /* 0 means 1/sqrt(head_dim) */
    int causal;          /* bottom-right aligned: query i sees keys j <= i + seq_kv - seq_q */
    int tile_q;          /* query rows per work-group; 0 = backend default */
    int tile_kv;         /* keys per streamed tile; 0 = backend default */
    unsigned flags;      /* FATTN_FLAG_* */
} fattn_attention_desc;

/* f32 may use TF32 tensor cores (CUDA only; never the default). */
#define FATTN_FLAG_ALLOW_TF32 (1u << 0)
#define FATTN_FLAGS_ALL_ FATTN_FLAG_ALLOW_TF32

/* A 4-d view [batch, head, seq, dim] of a buffer, in elements. The last
 * dimension must be contiguous (stride_dim = 1). Strides may be 0 for inputs
 * (broadcast) but must not make output elements overlap. */
typedef struct fattn_tensor {
    fattn_buffer *buffer;
    fattn_dtype dtype;
    int64_t offset;          /* elements from the start of the buffer */
    int64_t stride_batch;
    int64_t stride_head;
    int64_t stride_seq;
    int64_t stride_dim;
} fattn_tensor;

typedef enum fattn_layout {
    FATTN_LAYOUT_BSHD = 0,   /* [batch, seq, heads, dim] (FlashAttention) */
    FATTN_LAYOUT_BHSD = 1    /* [batch, heads, seq, dim] (PyTorch SDPA) */
} fattn_layout;

/* Fills t with the strides of a contiguous tensor in `layout`. */
FATTN_API fattn_status fattn_tensor_init(fattn_tensor *t, fattn_buffer *buf, fattn_dtype dtype,
                                         fattn_layout layout, int64_t heads, int64_t seq,
                                         int64_t dim);

/* Fills t for a contiguous float32 log-sum-exp [batch, heads, seq]. */
FATTN_API fattn_status fattn_tensor_init_lse(fattn_tensor *t, fattn_buffer *buf, int64_t heads,
                                             int64_t seq);

/* Computes attention with the tiled online-softmax algorithm. Q, K, V are
 * [batch, heads_q|heads_kv, seq_q|seq_kv, head_dim]; O is like Q. lse, if not
 * NULL, receives float32 natural-log log-sum-exp of the scaled scores per
 * (batch, head, query row), -inf for a row that sees no key. O and lse must
 * not overlap Q, K, V or each other (checked across wrappers of the same
 * memory), and every tensor's memory must be aligned to its element size
 * (FATTN_ERR_MISALIGNED otherwise). Asynchronous on GPU backends: the queue
 * is ordered, and fattn_buffer_read or fattn_context_synchronize waits.
 *
 * Special values, the same on every backend and path: a score of -inf
 * (from infinite inputs, or a finite product that overflows float32)
 * weighs 0; a row with no finite score gets O = 0 and lse = -inf; a NaN or
 * +inf score makes its row's O and lse NaN; a NaN or infinity in V at a
 * visible key makes the O elements it reaches NaN or infinite (weights
 * multiply, even 0); the K of a key the causal mask hides never enters a
 * score (its V may still reach the row on GPU paths, which multiply whole
 * tiles by weights of 0: keep V finite). */
FATTN_API fattn_status fattn_forward(fattn_context *ctx, const fattn_attention_desc *desc,
                                     const fattn_tensor *q, const fattn_tensor *k,
                                     const fattn_tensor *v, const fattn_tensor *o,
                                     const fattn_tensor *lse);

/* The naive baseline: materialises the N x N scores and probabilities, for
 * comparison in benchmarks. Same contract as fattn_forward; may return
 * FATTN_ERR_UNSUPPORTED or FATTN_ERR_OUT_OF_MEMORY. Never the default path. */
FATTN_API fattn_status fattn_forward_naive(fattn_context *ctx, const fattn_attention_desc *desc,
                                           const fattn_tensor *q, const fattn_tensor *k,
                                           const fattn_tensor *v, const fattn_tensor *o,
                                           const fattn_tensor *lse);

/* The one-line call: host arrays, contiguous in `layout`, are uploaded, the
 * attention runs, and o (and lse, if not NULL) are downloaded. Blocking. */
FATTN_API fattn_status fattn_attention_host(fattn_context *ctx, const fattn_attention_desc *desc,
                                            fattn_layout layout, const void *q, const void *k,
                                            const void *v, void *o, float *lse);

/* ---- Accounting (pure, backend-neutral) ------------------------------------ */

/* How a backend tiles the problem; zeros mean "not known": tile sizes then
 * default to 64, and concurrent_groups to every work-group at once. */
typedef struct fattn_tiling {
    int tile_q;
    int tile_kv;
    int64_t concurrent_groups;   /* work-groups resident at once */
    uint64_t workspace_bytes;    /* device scratch beyond the tiles */
} fattn_tiling;

typedef struct fattn_memory_report {
    /* Naive: the scores S and probabilities P, float32, B*Hq*Sq*Sk each. */
    uint64_t naive_bytes;
    /* Tiled: tile_bytes * groups + row_stat_bytes + workspace_bytes. */
    uint64_t flash_bytes;
    uint64_t tile_bytes;      /* one work-group: Q, K, V tiles, score tile, accumulator, m and l */
    int64_t groups;           /* work-groups counted */
    uint64_t row_stat_bytes;  /* running max and sum, float32, per query row */
    uint64_t workspace_bytes;
    double reduction;         /* naive_bytes / flash_bytes (0 if flash_bytes is 0) */
    double percent_saved;     /* 100 * (1 - flash/naive); negative if tiling costs more */
    double flops;             /* 4*B*Hq*D * (unmasked query-key pairs) */
} fattn_memory_report;

/* Pure arithmetic on the description; tiling may be NULL. */
FATTN_API fattn_status fattn_memory_estimate(const fattn_attention_desc *desc,
                                             const fattn_tiling *tiling,
                                             fattn_memory_report *out);

/* The same, with the tiling the context's backend would use for desc. */
FATTN_API fattn_status fattn_context_memory_report(fattn_context *ctx,
                                                   const fattn_attention_desc *desc,
                                                   fattn_memory_report *out);

/* FLOP count: 4*B*Hq*Sq*Sk*D, counting only unmasked pairs when causal.
 * Returns 0 for an invalid description. */
FATTN_API double fattn_flops(const fattn_attention_desc *desc);

#ifdef __cplusplus
}
#endif
#endif /* FATTN_H */

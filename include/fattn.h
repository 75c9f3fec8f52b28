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

/* The public header is laid out by hand for its readers (tables, aligned
 * comments, one-line INIT macros): clang-format leaves it alone. */
/* clang-format off */

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
 * shared library's SOVERSION is the major version. While the major version
 * is 0, a minor release may still change the API (0.2 did: see the README). */
#define FATTN_VERSION_MAJOR 0
#define FATTN_VERSION_MINOR 2
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
    X(ERR_MISALIGNED,    -21, "a tensor's address is not a multiple of its element size") \
    X(ERR_INDEX_TABLE,   -22, "a sequence offset, length or page table entry is out of range")

typedef enum fattn_status {
#define FATTN_STATUS_ENUM_(name, value, text) FATTN_##name = value,
    FATTN_STATUS_MAP(FATTN_STATUS_ENUM_)
#undef FATTN_STATUS_ENUM_
    FATTN_STATUS_MIN_ = -22
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
    FATTN_BF16 = 2,  /* bfloat16 */
    FATTN_I32 = 3    /* int32: index tensors only (sequence offsets, page tables) */
} fattn_dtype;

/* Bytes per element of a dtype, 0 for an invalid value. */
FATTN_API size_t fattn_dtype_size(fattn_dtype dtype);
/* "f32", "f16", "bf16", "i32", or "invalid": static strings, valid forever. */
FATTN_API const char *fattn_dtype_name(fattn_dtype dtype);

/* ---- Conventions ------------------------------------------------------------
 *
 * Extensible structs. Every struct the caller fills or receives starts with
 * `size`, which must be sizeof the struct as the caller compiled it: use the
 * struct's ..._INIT macro (or set size before anything else). The library
 * reads only the fields that size covers (later ones take their defaults)
 * and writes only those, so a program built against an older 0.x header
 * keeps working with a newer library. A size smaller than the first
 * version of the struct is FATTN_ERR_INVALID_ARGUMENT; so is, for a struct
 * the caller fills, a larger one whose extra bytes are not zero (it sets
 * fields this library does not know). In a larger struct the library fills,
 * the fields it does not know keep what the caller put there.
 *
 * Units. Tensors count in elements (offsets and strides); buffers, copies
 * and memory reports count in bytes.
 *
 * Out-parameters come last. Strings returned by getters are static (valid
 * forever) unless the function says they live as long as an object.
 *
 * Errors. A failed call returns a negative status and leaves a message: on
 * the context for calls that take one (or a buffer or timer of it), and in
 * the calling thread's slot, read with fattn_error_message(NULL), for calls
 * made without a context, marked [thread slot] below. A call given a NULL
 * context reports through the thread slot too. */

/* Opaque handles. */
typedef struct fattn_context fattn_context;
typedef struct fattn_buffer fattn_buffer;

/* ---- Backends and devices ------------------------------------------------ */

typedef struct fattn_backend_info {
    size_t size;            /* sizeof(fattn_backend_info): FATTN_BACKEND_INFO_INIT */
    fattn_backend_kind kind;
    const char *name;       /* "cpu", "cuda", "opencl"; static */
    int available;          /* 1 when a context can be created on it */
    int device_count;       /* devices usable here, 0 when unavailable */
    int gpu_count;          /* how many of those are GPUs (listed first) */
    char reason[256];       /* why it is unavailable; "" when available */
} fattn_backend_info;
#define FATTN_BACKEND_INFO_INIT {sizeof(fattn_backend_info), FATTN_BACKEND_AUTO, NULL, 0, 0, 0, {0}}

/* Describes one backend (not AUTO), with the environment's device filters.
 * Loads the backend's module on first use. Returns FATTN_OK even when the
 * backend is unavailable (see info->reason). Thread-safe. [thread slot] */
FATTN_API fattn_status fattn_backend_get_info(fattn_backend_kind kind, fattn_backend_info *info);

/* Static name of a backend kind ("auto", "cpu", "cuda", "opencl"), or "unknown". */
FATTN_API const char *fattn_backend_name(fattn_backend_kind kind);

/* Parses a case-insensitive backend name. FATTN_ERR_UNKNOWN_BACKEND otherwise.
 * [thread slot] */
FATTN_API fattn_status fattn_backend_from_name(const char *name, fattn_backend_kind *out);

/* Writes the name of device `device` of a backend into buf (always
 * NUL-terminated, truncated to len). Thread-safe. [thread slot] */
FATTN_API fattn_status fattn_device_get_name(fattn_backend_kind kind, int device,
                                             char *buf, size_t len);

/* Where GPU backend modules (libfattn-cuda.so, libfattn-opencl.so) are
 * looked for first: an absolute directory, or NULL for FATTN_MODULE_DIR
 * (else beside libfattn). Process-wide; it applies to modules not loaded
 * yet (a module that failed to load is looked for again), so call it before
 * the first context or backend query. Thread-safe.
 * [thread slot] */
FATTN_API fattn_status fattn_set_module_dir(const char *dir);

/* ---- Contexts -------------------------------------------------------------- */

/* Creates a context bound to one backend and one device.
 * backend: FATTN_BACKEND_AUTO lets the environment variable FATTN_BACKEND
 *   decide, else takes the backend that ranks best here: CUDA, then an
 *   OpenCL GPU, then the CPU. A named backend is used as asked; an
 *   unavailable one is an error carrying its reason, never a silent fallback.
 * device: index within the backend; -1 means FATTN_DEVICE, else 0.
 * On failure *out is NULL and fattn_error_message(NULL) tells why.
 * A context is not thread-safe: use one per thread, or serialise calls.
 * [thread slot] */
FATTN_API fattn_status fattn_context_create(fattn_backend_kind backend, int device,
                                            fattn_context **out);

/* Everything a context can be created with. Each setting left at its INIT
 * value falls back to its environment variable, then to the default; a
 * value set here wins over the environment.
 *
 * Native objects (optional): a context can run on objects the caller made.
 *   OpenCL: native_context (cl_context) and native_device (cl_device_id, a
 *     device of that context); native_queue (cl_command_queue on them) is
 *     optional, else fattn makes its own queue. fattn retains them while
 *     the context lives and releases its references at fattn_context_free;
 *     the caller keeps its own. Kernels build for that context. device,
 *     FATTN_DEVICE and the OpenCL filters are then ignored.
 *   CUDA: native_queue (cudaStream_t) is used instead of fattn's own stream
 *     (as fattn_context_set_stream would); cuda_current_context = 1 makes
 *     fattn use the context current on the calling thread (which must be on
 *     device `device`) instead of making the device's primary context
 *     current; that context must then be current on every thread that
 *     calls fattn with this fattn context, fattn_context_free included. The
 *     caller owns both and keeps them alive longer than the fattn context.
 *   Native objects need backend = FATTN_BACKEND_OPENCL or _CUDA (AUTO is
 *   FATTN_ERR_INVALID_ARGUMENT); the CPU backend takes none. */
typedef struct fattn_context_params {
    size_t size;                  /* sizeof(fattn_context_params) */
    fattn_backend_kind backend;   /* as fattn_context_create */
    int device;                   /* as fattn_context_create: -1 = FATTN_DEVICE, else 0 */
    int cpu_threads;              /* CPU: worker threads; 0 = FATTN_CPU_THREADS, else every core */
    const char *opencl_platform;  /* NULL = FATTN_OPENCL_PLATFORM; "" = no filter; index or name part */
    const char *opencl_device;    /* NULL = FATTN_OPENCL_DEVICE; "" = no filter */
    const char *cache_dir;        /* OpenCL programs: NULL = FATTN_CACHE_DIR, else the
                                     user cache; an absolute private directory, or "off" */
    void *native_context;         /* see above; NULL = none */
    void *native_device;
    void *native_queue;
    int cuda_current_context;     /* see above; 0 = the device's primary context */
} fattn_context_params;
#define FATTN_CONTEXT_PARAMS_INIT \
    {sizeof(fattn_context_params), FATTN_BACKEND_AUTO, -1, 0, NULL, NULL, NULL, NULL, NULL, NULL, 0}

/* Creates a context from params (see above). Strings are copied. [thread slot] */
FATTN_API fattn_status fattn_context_create_with(const fattn_context_params *params,
                                                 fattn_context **out);

/* Releases the context. Accepts NULL. Buffers still alive keep the backend
 * alive until they are freed too. */
FATTN_API void fattn_context_free(fattn_context *ctx);

FATTN_API fattn_backend_kind fattn_context_backend(const fattn_context *ctx);
/* Static string. */
FATTN_API const char *fattn_context_backend_name(const fattn_context *ctx);
/* The device's description (with a note when a mode is degraded, e.g. no
 * disk cache); lives as long as the context. */
FATTN_API const char *fattn_context_device_name(const fattn_context *ctx);
/* The device index; -1 for a context made around native OpenCL objects. */
FATTN_API int fattn_context_device(const fattn_context *ctx);

/* Context parameters, set and read by name (the way zstd's
 * ZSTD_CCtx_setParameter works); each applies to later calls.
 *   FATTN_PARAM_CPU_THREADS: CPU backend worker threads, 1..1024; 0 = as at
 *     creation (fattn_context_params, FATTN_CPU_THREADS, every core).
 *     Other backends accept only 0.
 * Experimental (tuning; may change between minor versions):
 *   FATTN_PARAM_TILE_Q, FATTN_PARAM_TILE_KV: query rows per work-group and
 *     keys per streamed tile, 1..65536; 0 = the backend's choice. A value the
 *     backend cannot run makes fattn_forward FATTN_ERR_UNSUPPORTED, naming
 *     its limits. FATTN_TILE_Q / FATTN_TILE_KV are not read; the OpenCL
 *     backend's FATTN_OPENCL_TILES still is.
 *   FATTN_PARAM_KV_SPLITS: split the keys of each row into this many parts
 *     computed in parallel and merged by fattn_combine's rule (split-KV
 *     decoding), 1..65536; 0 = the backend's choice, 1 = never split. A
 *     backend without a split path runs unsplit; more splits than key tiles
 *     are capped. For tests and tuning.
 * An unknown parameter or a value out of range is FATTN_ERR_INVALID_ARGUMENT. */
typedef enum fattn_param {
    FATTN_PARAM_CPU_THREADS = 1,
    FATTN_PARAM_TILE_Q = 100,
    FATTN_PARAM_TILE_KV = 101,
    FATTN_PARAM_KV_SPLITS = 102
} fattn_param;
FATTN_API fattn_status fattn_context_set_param(fattn_context *ctx, fattn_param param, int64_t value);
FATTN_API fattn_status fattn_context_get_param(fattn_context *ctx, fattn_param param, int64_t *value);

/* Runs later work on the caller's queue: a cudaStream_t (CUDA; the special
 * handles cudaStreamLegacy and cudaStreamPerThread too) or a
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
 * baselines' S and P; the tiled kernels allocate nothing, and a split-KV plan
 * only the context's workspace, once, when no desc->workspace is given), as long as the
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

/* Detail of the last failed call on ctx (or on a buffer or timer of ctx):
 * which argument, which limit, which native error code, the kernel build
 * log. "" when the last call succeeded. With ctx NULL: the calling thread's
 * slot, which holds the last failure of a call marked [thread slot] and of
 * any call given a NULL context, buffer or timer. Valid until the next call
 * on the same context (or, for the thread slot, the next such call). */
FATTN_API const char *fattn_error_message(const fattn_context *ctx);

/* ---- Buffers ---------------------------------------------------------------- */

/* Buffers count in bytes. */

/* Allocates `bytes` of device memory (host memory for the CPU backend). */
FATTN_API fattn_status fattn_buffer_alloc(fattn_context *ctx, size_t bytes, fattn_buffer **out);

/* Wraps the caller's memory without copying: a CUDA device pointer, an
 * OpenCL cl_mem (a sub-buffer too), or a host pointer for the CPU backend.
 * The caller keeps ownership; fattn_buffer_free releases only the wrapper.
 * Tensors on it need an address aligned to their element size. */
FATTN_API fattn_status fattn_buffer_wrap(fattn_context *ctx, void *native, size_t bytes,
                                         fattn_buffer **out);
/* The same for memory fattn must only read (Q, K, V, index tensors): a
 * tensor on it used as O or lse is FATTN_ERR_INVALID_ARGUMENT, and
 * fattn_buffer_write to it is refused. */
FATTN_API fattn_status fattn_buffer_wrap_const(fattn_context *ctx, const void *native,
                                               size_t bytes, fattn_buffer **out);

/* Releases a buffer (or a wrapper). Accepts NULL. */
FATTN_API void fattn_buffer_free(fattn_buffer *buf);

/* Blocking copies between host memory and [offset, offset + bytes) of buf. */
FATTN_API fattn_status fattn_buffer_write(fattn_buffer *buf, size_t offset, const void *src,
                                          size_t bytes);
FATTN_API fattn_status fattn_buffer_read(fattn_buffer *buf, size_t offset, void *dst,
                                         size_t bytes);

FATTN_API size_t fattn_buffer_size(const fattn_buffer *buf);
/* The native handle: device pointer, cl_mem, or host pointer (for a const
 * wrapper, the pointer it was given; do not write through it). */
FATTN_API void *fattn_buffer_native(const fattn_buffer *buf);

/* ---- Attention ------------------------------------------------------------- */

/* A 4-d view [batch, head, seq, dim] of a buffer. Offset and strides count
 * in elements of dtype. The last dimension must be contiguous (stride_dim =
 * 1). Strides may be 0 for inputs (broadcast) but must not make output
 * elements overlap. No stride (nor a combine's part stride) may exceed
 * 2^57 elements, even along a size of 1 where it is never used
 * (FATTN_ERR_OVERFLOW: pass 0 there). Index tensors (int32) use the same
 * fields, as their descriptions below say. */
typedef struct fattn_tensor {
    size_t size;             /* sizeof(fattn_tensor): FATTN_TENSOR_INIT */
    fattn_buffer *buffer;
    fattn_dtype dtype;
    int64_t offset;          /* elements from the start of the buffer */
    int64_t stride_batch;
    int64_t stride_head;
    int64_t stride_seq;
    int64_t stride_dim;
} fattn_tensor;
#define FATTN_TENSOR_INIT {sizeof(fattn_tensor), NULL, FATTN_F32, 0, 0, 0, 0, 1}

typedef enum fattn_layout {
    FATTN_LAYOUT_BSHD = 0,   /* [batch, seq, heads, dim] (FlashAttention) */
    FATTN_LAYOUT_BHSD = 1    /* [batch, heads, seq, dim] (PyTorch SDPA) */
} fattn_layout;

/* Fills *out for a contiguous [batch, heads, seq, dim] tensor in `layout`
 * that starts `offset` elements into buf (a slice of a cache, a part of a
 * packed QKV buffer, ...); the strides follow from the sizes. batch is
 * only checked (>= 1) and multiplied into nothing: it is here so that the
 * call reads like the shape. Does not check buf's size; fattn_forward does.
 * [thread slot] */
FATTN_API fattn_status fattn_tensor_init(fattn_buffer *buf, fattn_dtype dtype, fattn_layout layout,
                                         int64_t batch, int64_t heads, int64_t seq, int64_t dim,
                                         int64_t offset, fattn_tensor *out);

/* Fills *out for the log-sum-exp: float32, contiguous [batch, heads, seq],
 * `offset` elements into buf. fattn_forward also takes any non-overlapping
 * strides for it (stride_dim is not used), but its dtype is always f32.
 * [thread slot] */
FATTN_API fattn_status fattn_tensor_init_lse(fattn_buffer *buf, int64_t batch, int64_t heads,
                                             int64_t seq, int64_t offset, fattn_tensor *out);

/* Fills *out for a contiguous int32 index tensor: a vector of `count`
 * (element i at offset + i) or, with rows > 1, a [rows, count] table
 * (element (r, i) at offset + r * count + i): stride_seq is 1 and
 * stride_batch is count. [thread slot] */
FATTN_API fattn_status fattn_tensor_init_index(fattn_buffer *buf, int64_t rows, int64_t count,
                                               int64_t offset, fattn_tensor *out);

/* Causal masking. Bottom-right (the default, FlashAttention's): query row i
 * sees keys j <= i + seq_kv - seq_q, so the last query row sees every key
 * (decoding). Top-left (PyTorch SDPA's is_causal): row i sees keys j <= i.
 * The two agree when seq_q == seq_kv. Rows that see no key get O = 0 and
 * lse = -inf. */
typedef enum fattn_causal {
    FATTN_CAUSAL_NONE = 0,
    FATTN_CAUSAL_BOTTOM_RIGHT = 1,
    FATTN_CAUSAL_TOP_LEFT = 2
} fattn_causal;

/* Attention variants beyond causal (FlashAttention-2's conventions; ggml's
 * sinks). A mask equal to FATTN_MASK_DESC_INIT asks for nothing. Per
 * (batch b, query head h), query row i and key j of a sequence with len_q
 * rows and len_kv keys (seq_q and seq_kv for a dense batch; with varlen or
 * a paged cache, sequence b's own lengths, and i, j count within it), with
 * off = len_kv - len_q:
 *
 *   s_ij = scale * q_i . k_j
 *   s_ij = softcap * tanh(s_ij / softcap)            softcap > 0, first
 *   s_ij = s_ij - slope[b, h] * |i + off - j|        ALiBi
 *   s_ij = s_ij + bias[b, h, i, j]                   additive bias
 *   visible(i, j) = causal(i, j)                     as desc->causal says
 *               and i + off - window_left <= j       window_left  >= 0
 *               and j <= i + off + window_right      window_right >= 0
 *   M_i   = max over visible j of s_ij
 *   O_i   = sum_j exp(s_ij - M_i) v_j / (sum_j exp(s_ij - M_i) + exp(sink[h] - M_i))
 *   lse_i = log(sum_j exp(s_ij) + exp(sink[h]))      the sums over visible j
 *
 * (without sinks the exp(sink) terms are absent). The window is aligned
 * bottom-right like causal (whatever desc->causal's alignment); with causal
 * too, both apply. A row that sees no key (window, causal, -inf bias):
 * O = 0 and lse = -inf, or lse = sink[h] with sinks; never NaN. With sinks a
 * row's weights sum to less than 1.
 * Softcap maps a score of -inf to -softcap (a key an overflowing product
 * made -inf still counts, with that score), +inf to +softcap, and NaN stays
 * NaN (the row is NaN, as fattn_forward's special-value rules say).
 * Cost: window, softcap, ALiBi and sinks read nothing per key (the window
 * skips whole key tiles outside it, so its work scales with what is
 * visible); the bias is read per (row, key), memory traffic of
 * seq_q * seq_kv elements per (b, h) not broadcast. */
typedef struct fattn_mask_desc {
    size_t size;              /* sizeof(fattn_mask_desc): FATTN_MASK_DESC_INIT */
    /* Sliding window (above): keys at most window_left before and
     * window_right after row i's diagonal i + off are visible; 0 is the
     * diagonal only on that side; -1 = unbounded (the INIT value); < -1 is
     * FATTN_ERR_INVALID_ARGUMENT. */
    int64_t window_left;
    int64_t window_right;
    /* Logit softcap c: s = c * tanh(s / c) on the scaled score, before
     * everything else; 0 = none; negative or not finite is
     * FATTN_ERR_INVALID_ARGUMENT. */
    float softcap;
    /* ALiBi: float32 slope per (batch, query head), element (b, h) at
     * offset + b * stride_batch + h * stride_head: stride_batch 0 gives one
     * [heads_q] vector for every batch. Adds -slope * |i + off - j|
     * (positive slopes penalise distance). NULL = none. */
    const fattn_tensor *alibi_slopes;
    /* Attention sinks: a float32 logit per query head (element h at offset +
     * h * stride_head) that joins the softmax denominator with no value
     * row. NULL = none. fattn_combine knows nothing of sinks: when merging
     * parts of one attention, give the sink to exactly one part. */
    const fattn_tensor *sinks;
    /* Additive bias [batch, heads_q, seq_q, seq_kv] in f32 or desc->dtype:
     * element (b, h, i, j) at offset + b*stride_batch + h*stride_head +
     * i*stride_seq + j*stride_dim (any stride may be 0 to broadcast, e.g. one
     * mask for every head; -inf hides a key). With varlen, i and j are the
     * row and key within sequence b (seq_q, seq_kv: the longest). NULL = none. */
    const fattn_tensor *bias;
} fattn_mask_desc;
#define FATTN_MASK_DESC_INIT {sizeof(fattn_mask_desc), -1, -1, 0.0f, NULL, NULL, NULL}

/* Variable-length batches. Sequences packed without padding: Q and O are
 * [1, heads_q, total_q, head_dim] tensors (lse [1, heads_q, total_q]) whose
 * rows cu_seqlens_q[b] .. cu_seqlens_q[b+1]-1 belong to sequence b; K and V
 * likewise with cu_seqlens_kv and total_kv. Without cu_seqlens_q, Q, O and
 * lse stay [batch, heads_q, seq_q, ...]; without cu_seqlens_kv, K and V stay
 * [batch, heads_kv, seq_kv, head_dim] (or paged, below). desc->seq_q and
 * desc->seq_kv are then the longest sequence's lengths. With seqused_kv,
 * only the first seqused_kv[b] keys of sequence b are used (a padded
 * cache). All three are int32 vectors on the context's buffers
 * (fattn_tensor_init_index); NULL = not given.
 * Causal masking aligns per sequence: bottom-right, query row i of a
 * sequence with len_q rows and len_kv keys sees keys j <= i + len_kv -
 * len_q; top-left, j <= i. A sequence with no keys gets O = 0 and lse =
 * -inf; rows of packed O and lse past cu_seqlens_q[batch] are not written.
 * The tables are bad when an offset is negative, decreases or passes its
 * total, a sequence is longer than desc->seq_q / desc->seq_kv, or
 * seqused_kv[b] is negative or more than the keys sequence b holds (its
 * cu_seqlens_kv span, else desc->seq_kv). Tables the backend checks on the
 * host (the CPU) make the call return FATTN_ERR_INDEX_TABLE naming the
 * table, before anything runs; GPU backends that read them in their kernels
 * never follow a bad entry (what it names is left out of the result) and
 * report FATTN_ERR_INDEX_TABLE, naming the table, at the next
 * fattn_context_synchronize or fattn_buffer_read on the context. */
typedef struct fattn_varlen_desc {
    size_t size;                        /* FATTN_VARLEN_DESC_INIT */
    const fattn_tensor *cu_seqlens_q;   /* [batch + 1], from 0, non-decreasing */
    const fattn_tensor *cu_seqlens_kv;  /* [batch + 1] */
    const fattn_tensor *seqused_kv;     /* [batch] */
    int64_t total_q;                    /* rows of packed Q and O (with cu_seqlens_q) */
    int64_t total_kv;                   /* rows of packed K and V (with cu_seqlens_kv) */
} fattn_varlen_desc;
#define FATTN_VARLEN_DESC_INIT {sizeof(fattn_varlen_desc), NULL, NULL, NULL, 0, 0}

/* A paged K/V cache: K and V are [num_pages, heads_kv, page_size,
 * head_dim] tensors (the batch dimension indexes pages), and key
 * p * page_size + s of sequence b lies in slot s of page block_table[b][p],
 * an int32 [batch, pages_per_seq] table; any page_size >= 1, and
 * seq_kv <= pages_per_seq * page_size. The keys used per sequence come from
 * the varlen description's seqused_kv (else desc->seq_kv each); Q may be
 * dense or packed (cu_seqlens_q), cu_seqlens_kv is not taken. Only the
 * entries of pages that hold used keys are read: they must lie in
 * 0..num_pages-1, or the table is bad (FATTN_ERR_INDEX_TABLE, reported as
 * for the varlen tables above); entries past them may hold anything. */
typedef struct fattn_paged_kv_desc {
    size_t size;                      /* FATTN_PAGED_KV_DESC_INIT */
    const fattn_tensor *block_table;  /* element (b, p) at offset + b*stride_batch + p*stride_seq */
    int64_t pages_per_seq;
    int64_t page_size;                /* keys per page, >= 1 */
    int64_t num_pages;                /* pages in the K and V tensors */
} fattn_paged_kv_desc;
#define FATTN_PAGED_KV_DESC_INIT {sizeof(fattn_paged_kv_desc), NULL, 0, 0, 0}

/* Appending this step's keys and values to the cache before attending
 * (FlashAttention's flash_attn_with_kvcache k=, v=). K and V passed to
 * fattn_forward are then the cache: contiguous [batch, heads_kv, seq_kv,
 * head_dim] with desc->seq_kv its capacity, or paged (desc->paged_kv).
 * desc->varlen->seqused_kv is required: it holds L_b, the keys sequence b
 * has cached (FlashAttention's cache_seqlens); cu_seqlens_kv is not taken
 * (FATTN_ERR_INVALID_ARGUMENT for either), while packed Q (cu_seqlens_q)
 * is. k_new and v_new are [batch, heads_kv, seq_new, head_dim] tensors in
 * desc->dtype with any strides, one dense batch. For each sequence b,
 * k_new[b, :, t, :] becomes key L_b + t of the cache (t < seq_new; v_new
 * likewise), then attention runs over its L_b + seq_new keys (bottom-right
 * causal aligns the last query rows with the new keys). seqused_kv is not
 * changed: the caller advances it. seq_new 0 appends nothing; seq_new above
 * desc->seq_kv is FATTN_ERR_INVALID_SIZE. A sequence with L_b < 0, with
 * L_b + seq_new over the capacity (desc->seq_kv, and the pages' keys when
 * paged), or with a new key on a page outside 0..num_pages-1 is a bad table:
 * nothing of it is written, and it is reported as the varlen description
 * says (the CPU returns FATTN_ERR_INDEX_TABLE before anything runs; GPU
 * backends leave that sequence out, write the others, and report it at the
 * next fattn_context_synchronize or fattn_buffer_read). K and V must then be
 * writable (no const wrappers), and k_new and v_new must not overlap O,
 * lse, K, V or the workspace, nor K and V the index tables. */
typedef struct fattn_kv_append_desc {
    size_t size;                /* FATTN_KV_APPEND_DESC_INIT */
    const fattn_tensor *k_new;  /* [batch, heads_kv, seq_new, head_dim] */
    const fattn_tensor *v_new;
    int64_t seq_new;            /* keys appended per sequence, >= 0 */
} fattn_kv_append_desc;
#define FATTN_KV_APPEND_DESC_INIT {sizeof(fattn_kv_append_desc), NULL, NULL, 0}

/* What to compute: O = softmax(scale * Q K^T [+ causal mask, variants]) V
 * per (batch, query head). Query head h reads key/value head h / (heads_q /
 * heads_kv). Q and K have head_dim; V and O have head_dim_v.
 * Start from FATTN_ATTENTION_DESC_INIT, then set the sizes and dtype. */
/* The largest batch, head count or sequence length a description may hold
 * (2^48, far past any real cache); a larger one is FATTN_ERR_OVERFLOW even
 * when the products of the sizes fit 64 bits, so that row and tile
 * arithmetic (seq + tile - 1, seq_q + seq_kv) keeps headroom everywhere. */
#define FATTN_MAX_EXTENT (INT64_C(1) << 48)

typedef struct fattn_attention_desc {
    size_t size;         /* sizeof(fattn_attention_desc) */
    int64_t batch;
    int64_t heads_q;
    int64_t heads_kv;    /* heads_q must be a multiple (GQA/MQA) */
    int64_t seq_q;
    int64_t seq_kv;      /* 0 is allowed: output 0, log-sum-exp -inf; K and V
                            may then have NULL buffers */
    int64_t head_dim;    /* 1..256 */
    fattn_dtype dtype;   /* of Q, K, V and O: f32, f16 or bf16 */
    float scale;         /* 0 means 1/sqrt(head_dim) */
    fattn_causal causal; /* FATTN_CAUSAL_NONE (0), _BOTTOM_RIGHT (1) or _TOP_LEFT (2) */
    unsigned flags;      /* FATTN_FLAG_* */
    const fattn_mask_desc *mask;          /* NULL = none */
    const fattn_varlen_desc *varlen;      /* NULL = a dense batch */
    const fattn_paged_kv_desc *paged_kv;  /* NULL = contiguous K and V */
    /* Scratch memory for the call, >= fattn_workspace_size() bytes; NULL =
     * the context allocates what a plan needs once and keeps it. */
    fattn_buffer *workspace;
    /* Keys and values appended to the cache first (fattn_kv_append_desc). */
    const fattn_kv_append_desc *append;   /* NULL = none */
    /* Head dimension of V and O (and of append's v_new), 1..256, when it
     * differs from head_dim (DeepSeek's MLA prefill: 192 for Q and K, 128
     * for V); 0 = head_dim. */
    int64_t head_dim_v;
} fattn_attention_desc;
#define FATTN_ATTENTION_DESC_INIT                                                     \
    {sizeof(fattn_attention_desc), 0, 0, 0, 0, 0, 0, FATTN_F32, 0.0f, FATTN_CAUSAL_NONE, 0u, \
     NULL, NULL, NULL, NULL, NULL, 0}

/* f32 may use TF32 matrix units (Q, K, P and V rounded to a 10-bit
 * mantissa; never the default). OpenCL's matrix path takes it where the
 * device name says "(+TF32)"; elsewhere, CUDA included, it changes nothing
 * yet. */
#define FATTN_FLAG_ALLOW_TF32 (1u << 0)
/* The logit softcap's tanh may be the GPU's approximation (relative error
 * 2^-11, so a capped logit moves by up to softcap * 2^-11 in natural units;
 * FlashAttention-3's and FlashInfer's choice) instead of the accurate form
 * (a few 1e-7 of softcap; never the default). CUDA's Hopper (wgmma) kernel
 * takes it, where the softmax's special-function and issue slots, not the
 * matrix units, set the pace (H200, bf16 d128, 32k causal: 1.09x the plain
 * time; the accurate form, as polynomials where a warp's scores allow,
 * 1.07x with logits within 0.1 softcap, 1.13x within 0.28, 1.16x within
 * 0.5 and 1.37x past that). Elsewhere it changes nothing yet. */
#define FATTN_FLAG_FAST_SOFTCAP (1u << 1)
#define FATTN_FLAGS_ALL_ (FATTN_FLAG_ALLOW_TF32 | FATTN_FLAG_FAST_SOFTCAP)

/* Bytes of workspace fattn_forward needs for desc on this context: 0 for
 * most plans; the split-KV decode plans (every backend) need room for the
 * partial results, splits * batch * heads_q * seq_q * (head_dim_v + 1) floats.
 * With desc->workspace given, fattn_forward allocates nothing and does not
 * synchronise (CUDA graphs can capture it). */
FATTN_API fattn_status fattn_workspace_size(fattn_context *ctx, const fattn_attention_desc *desc,
                                            uint64_t *bytes);

/* Computes attention with the tiled online-softmax algorithm. Q and K are
 * [batch, heads_q|heads_kv, seq_q|seq_kv, head_dim], V is [batch, heads_kv,
 * seq_kv, head_dim_v] and O [batch, heads_q, seq_q, head_dim_v]; desc->mask
 * adds the variants fattn_mask_desc defines. With
 * seq_kv = 0, K and V are not read and their buffers may be NULL. With
 * desc->append, the new keys and values are written into K and V first
 * (fattn_kv_append_desc), in the same call and queue. lse, if not
 * NULL, receives float32 natural-log log-sum-exp of the scaled scores per
 * (batch, head, query row), -inf for a row that sees no key (the sink's
 * logit with desc->mask->sinks). O and lse must
 * not overlap Q, K, V, each other or the sub-descriptions' tensors (index
 * tables, slopes, sinks, bias), nor may desc->workspace overlap any of them
 * (checked across wrappers of the same memory), and every tensor's memory must be aligned to its element size
 * (FATTN_ERR_MISALIGNED otherwise). O and lse must not be on const
 * wrappers. Asynchronous on GPU backends: the queue
 * is ordered, and fattn_buffer_read or fattn_context_synchronize waits.
 *
 * Special values, the same on every backend and path: a score of -inf
 * (from infinite inputs, a finite product that overflows float32, or a -inf
 * bias; after the softcap, which maps +-inf to +-softcap) weighs 0; a row
 * with no finite score gets O = 0 and lse = -inf (lse = the sink's logit
 * with sinks); a NaN or +inf score makes its row's O and lse NaN (a NaN or
 * +inf bias or slope too); a NaN or infinity in V at a visible key makes
 * the O elements it reaches NaN or infinite (weights multiply, even 0); the
 * K (and bias) of a key the causal mask or the window hides never enters a
 * score (its V may still reach the row on GPU paths, which multiply whole
 * tiles by weights of 0: keep V finite). A NaN sink makes every row of its
 * head NaN; a sink of -inf is no sink. */
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
 * attention runs, and o (and lse, if not NULL: float32 [batch, heads_q,
 * seq_q]) are downloaded. Blocking. The varlen and paged descriptions are
 * not taken here (FATTN_ERR_INVALID_ARGUMENT). */
FATTN_API fattn_status fattn_attention_host(fattn_context *ctx, const fattn_attention_desc *desc,
                                            fattn_layout layout, const void *q, const void *k,
                                            const void *v, void *o, float *lse);

/* ---- Combining partial results -------------------------------------------- */

/* Merges `parts` partial results of one attention, each over a disjoint set
 * of keys (split-KV decoding, cascade or shared-prefix attention, a sequence
 * spread over devices), into the result over all of them, with the
 * log-sum-exp rule: per row, lse = log(sum_p exp(lse_p)) and
 * O = sum_p exp(lse_p - lse) * O_p. A part with lse_p = -inf saw no key and
 * is skipped (its O_p is not read); a row whose parts all have -inf gets
 * O = 0 and lse = -inf; a NaN or +inf lse_p makes the row NaN. Arithmetic is
 * float32, as in fattn_forward.
 *
 * The parts lie in one buffer each for O and lse: o_parts describes part 0
 * as a [batch, heads, seq, head_dim] tensor in part_dtype, and part p is the
 * same view moved by p * o_part_stride elements; lse_parts likewise
 * (float32 [batch, heads, seq], lse_part_stride). This is FlashInfer's
 * merge_states layout when the stride is one part's extent, and any other
 * non-negative stride works. O (dtype) and lse (float32, may be NULL)
 * receive the result and must lie outside the span of the parts (from part
 * 0's first element to the last part's last, gaps between parts included). */
typedef struct fattn_combine_desc {
    size_t size;              /* sizeof(fattn_combine_desc): FATTN_COMBINE_DESC_INIT */
    int64_t batch, heads, seq, head_dim;   /* head_dim 1..256 */
    int64_t parts;            /* >= 1 */
    fattn_dtype part_dtype;   /* of the O parts: f32, f16 or bf16 */
    fattn_dtype dtype;        /* of O: f32, f16 or bf16 */
    int64_t o_part_stride;    /* elements from one O part to the next, >= 0 */
    int64_t lse_part_stride;  /* elements from one lse part to the next, >= 0 */
} fattn_combine_desc;
#define FATTN_COMBINE_DESC_INIT \
    {sizeof(fattn_combine_desc), 0, 0, 0, 0, 0, FATTN_F32, FATTN_F32, 0, 0}

/* Asynchronous on GPU backends, like fattn_forward. */
FATTN_API fattn_status fattn_combine(fattn_context *ctx, const fattn_combine_desc *desc,
                                     const fattn_tensor *o_parts, const fattn_tensor *lse_parts,
                                     const fattn_tensor *o, const fattn_tensor *lse);

/* ---- Context parallelism: one sequence over several GPUs ------------------ */

/* Each of R ranks (one per GPU) holds a slice of every batch's sequence:
 * its queries, keys and values for the same positions, L = seq_total / R
 * tokens. fattn_cp_forward computes the exact attention of the rank's queries
 * against the whole sequence: the K/V slices travel around the ring (rank r
 * sends to r + 1 and receives from r - 1, modulo R) while each rank computes
 * against the slice it holds, or are all-gathered first when they are small
 * (GQA with few K/V heads), and the partial results are merged by
 * fattn_combine's log-sum-exp rule.
 *
 * Which positions rank r holds (fattn_cp_slices computes it):
 *   FATTN_CP_CONTIGUOUS  positions [r L, (r + 1) L). With a causal mask the
 *                        last rank does R times the first's work.
 *   FATTN_CP_ZIGZAG      the sequence cut into 2R chunks of C = L / 2: rank r
 *                        holds chunk r (local rows 0..C-1) then chunk 2R-1-r
 *                        (local rows C..L-1), so every rank does the same
 *                        causal work (Megatron's and ring-flash-attention's
 *                        layout). L must be even. */
typedef enum fattn_cp_layout {
    FATTN_CP_CONTIGUOUS = 0,
    FATTN_CP_ZIGZAG = 1
} fattn_cp_layout;

/* How the K/V slices move. AUTO takes the all-gather when all of them, R
 * times a rank's K and V bytes, take no more memory than the rank's Q (GQA
 * with heads_q >= 2 R heads_kv and equal head dims), else the ring;
 * fattn_cp_get_info says which ran. */
typedef enum fattn_cp_transfer {
    FATTN_CP_TRANSFER_AUTO = 0,
    FATTN_CP_TRANSFER_RING = 1,      /* R - 1 steps, each overlapped with the compute */
    FATTN_CP_TRANSFER_ALLGATHER = 2  /* one all-gather, overlapped with the rank's own slice */
} fattn_cp_transfer;

typedef struct fattn_cp_desc {
    size_t size;                  /* sizeof(fattn_cp_desc): FATTN_CP_DESC_INIT */
    fattn_cp_layout layout;
    fattn_cp_transfer transfer;
} fattn_cp_desc;
#define FATTN_CP_DESC_INIT {sizeof(fattn_cp_desc), FATTN_CP_CONTIGUOUS, FATTN_CP_TRANSFER_AUTO}

/* A rank's handle: its fattn context (one device), the communicator, the
 * transfer queue and the workspace, kept between calls. */
typedef struct fattn_cp fattn_cp;

/* Binds ctx (a CUDA context on this rank's GPU) to the caller's NCCL
 * communicator (an ncclComm_t, one rank per GPU, made however the
 * application makes it: MPI, a shared file, PyTorch). fattn finds the NCCL
 * library that made the communicator in the process (libnccl.so.2) at run
 * time; fattn itself does not link NCCL. The work runs on the context's
 * stream (fattn_context_set_stream gives it yours); transfers run on a
 * stream of the handle's own, ordered against it with events.
 * FATTN_ERR_UNSUPPORTED where the backend has no NCCL transport (the CPU and
 * OpenCL backends, or a CUDA module built without NCCL's header) or NCCL
 * cannot be loaded. ctx must outlive the handle. */
FATTN_API fattn_status fattn_cp_create_nccl(fattn_context *ctx, void *nccl_comm, fattn_cp **out);
FATTN_API void fattn_cp_free(fattn_cp *cp);

/* Exact attention of this rank's queries against the whole sequence; every
 * rank calls it with the same descriptions (a collective). desc describes
 * the rank's slices: seq_q = seq_kv = L, the other sizes as for
 * fattn_forward; q, k, v, o and lse are the rank's local tensors, with the
 * same strides on every rank. K and V must each be dense (their elements
 * fill one span of their buffer without gaps: any of the layouts
 * fattn_tensor_init makes), since the span is what travels.
 * Semantics are fattn_forward's over the whole sequence of R L tokens
 * (seq_q = seq_kv there, so both causal alignments agree): causal, the
 * window, softcap, sinks, GQA, head_dim_v, the lse and f32/f16/bf16 work as
 * on one GPU. ALiBi, a bias, varlen, paged caches and append are
 * FATTN_ERR_UNSUPPORTED here. The partial results are kept and merged in
 * desc->dtype (one rounding per merge; a row takes at most 2R - 1).
 * Asynchronous like fattn_forward. */
FATTN_API fattn_status fattn_cp_forward(fattn_cp *cp, const fattn_cp_desc *cp_desc,
                                        const fattn_attention_desc *desc, const fattn_tensor *q,
                                        const fattn_tensor *k, const fattn_tensor *v,
                                        const fattn_tensor *o, const fattn_tensor *lse);

/* What the last fattn_cp_forward on the handle did. */
typedef struct fattn_cp_info {
    size_t size;                  /* sizeof(fattn_cp_info): FATTN_CP_INFO_INIT */
    int ranks, rank;
    fattn_cp_transfer transfer;   /* RING or ALLGATHER: what ran */
    int64_t calls;                /* fattn_forward calls this rank made */
    uint64_t workspace_bytes;     /* the handle's device memory */
    uint64_t bytes_sent;          /* by this rank */
} fattn_cp_info;
#define FATTN_CP_INFO_INIT {sizeof(fattn_cp_info), 0, 0, FATTN_CP_TRANSFER_AUTO, 0, 0, 0}
FATTN_API fattn_status fattn_cp_get_info(const fattn_cp *cp, fattn_cp_info *out);

/* The global positions rank `rank` of `ranks` holds under `layout` in a
 * sequence of seq_total tokens: *count ranges (1 or 2), range i starting at
 * start[i] with len[i] tokens, in local row order. seq_total must be a
 * multiple of ranks (of 2 ranks for ZIGZAG). [thread slot] */
FATTN_API fattn_status fattn_cp_slices(fattn_cp_layout layout, int ranks, int rank,
                                       int64_t seq_total, int64_t start[2], int64_t len[2],
                                       int *count);

/* Copies rank `rank`'s slice between a whole-sequence tensor `whole`
 * ([batch, heads, seq_total, dim]) and the rank's local tensor `local`
 * ([batch, heads, seq_total / ranks, dim]), both on ctx, in one dtype:
 * to_local 1 gathers the slice into local, 0 scatters local back into
 * whole. Asynchronous on GPU backends. */
FATTN_API fattn_status fattn_cp_shard(fattn_context *ctx, fattn_cp_layout layout, int ranks,
                                      int rank, int64_t batch, int64_t heads, int64_t seq_total,
                                      int64_t dim, const fattn_tensor *whole,
                                      const fattn_tensor *local, int to_local);

/* ---- Accounting (pure, backend-neutral) ------------------------------------ */

/* How a backend tiles the problem; zeros mean "not known": tile sizes then
 * default to 64, and concurrent_groups to every work-group at once. */
typedef struct fattn_tiling {
    size_t size;                 /* sizeof(fattn_tiling): FATTN_TILING_INIT */
    int tile_q;
    int tile_kv;
    int64_t concurrent_groups;   /* work-groups resident at once */
    uint64_t workspace_bytes;    /* device scratch beyond the tiles */
} fattn_tiling;
#define FATTN_TILING_INIT {sizeof(fattn_tiling), 0, 0, 0, 0}

/* Bytes, except groups, ratios and flops. The caller sets size (the INIT
 * macro); the library fills the fields that size covers. */
typedef struct fattn_memory_report {
    size_t size;              /* sizeof(fattn_memory_report): FATTN_MEMORY_REPORT_INIT */
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
    double flops;             /* 2*B*Hq*(D+Dv) * (unmasked query-key pairs) */
    /* The kernel the context's backend runs for this problem, by the name of
     * its row in the backend's kernel table (OpenCL: "decode", "matrix" for
     * the matrix-unit kernel, "tiled" for the scalar one; CUDA and the CPU
     * name theirs likewise); "" from fattn_memory_estimate. */
    char kernel[24];
} fattn_memory_report;
#define FATTN_MEMORY_REPORT_INIT \
    {sizeof(fattn_memory_report), 0, 0, 0, 0, 0, 0, 0.0, 0.0, 0.0, {0}}

/* Pure arithmetic on the description; tiling may be NULL. [thread slot] */
FATTN_API fattn_status fattn_memory_estimate(const fattn_attention_desc *desc,
                                             const fattn_tiling *tiling,
                                             fattn_memory_report *out);

/* The same, with the tiling the context's backend would use for desc. */
FATTN_API fattn_status fattn_context_memory_report(fattn_context *ctx,
                                                   const fattn_attention_desc *desc,
                                                   fattn_memory_report *out);

/* FLOP count: 2*B*Hq*Sq*Sk*(head_dim + head_dim_v) (4*B*Hq*Sq*Sk*D when
 * they are equal), counting only unmasked pairs when causal (the window and
 * a bias are not counted: the pairs of the causal mask alone).
 * Returns 0 for an invalid description (no message). */
FATTN_API double fattn_flops(const fattn_attention_desc *desc);

/* clang-format on */

#ifdef __cplusplus
}
#endif
#endif /* FATTN_H */

/* The OpenCL backend's shared declarations: its state, the device list, the
 * program cache, the tuning table and the kernel variants. Split by concern
 * into ocl_device.c (discovery), ocl_program.c (sources, builds, caches),
 * ocl_tuning.c (tiles), ocl_forward.c (the variant table and the tiled
 * kernel's plan and launch), ocl_decode.c (split-KV decoding), ocl_naive.c
 * (the CLBlast baseline), ocl_combine.c (fattn_combine's row), ocl_ragged.c
 * (variable-length and paged problems: kernel arguments, the fault word) and
 * ocl_backend.c (the vtable: contexts, queues, buffers, timer marks).
 * Private names carry ocl_ / OCL_: cl_ and CL_ belong to Khronos. */
#ifndef FATTN_OCL_COMMON_H
#define FATTN_OCL_COMMON_H

#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>

#include "backend.h"

/* A name for an OpenCL error code ("CL_OUT_OF_RESOURCES"). */
const char *ocl_error_name(cl_int err);

/* The one mapping of an OpenCL error to a status: running out of device or
 * host memory (or resources) is FATTN_ERR_OUT_OF_MEMORY, anything else
 * FATTN_ERR_DEVICE. */
static inline fattn_status ocl_status_of(cl_int err) {
    return err == CL_OUT_OF_RESOURCES || err == CL_MEM_OBJECT_ALLOCATION_FAILURE ||
                   err == CL_OUT_OF_HOST_MEMORY
               ? FATTN_ERR_OUT_OF_MEMORY
               : FATTN_ERR_DEVICE;
}

/* Fails with ocl_status_of(err), naming the call and the code, if err != CL_SUCCESS. */
#define OCL_TRY(msg, call)                                                                         \
    do {                                                                                           \
        cl_int err_ = (call);                                                                      \
        if (err_ != CL_SUCCESS)                                                                    \
            return fattn_fail((msg), ocl_status_of(err_), "%s failed: %s (%d)", #call,             \
                              ocl_error_name(err_), (int)err_);                                    \
    } while (0)

/* ---- Devices (ocl_device.c) ---------------------------------------------------- */

typedef struct ocl_device_entry {
    cl_platform_id platform;
    cl_device_id device;
    cl_device_type type;
} ocl_device_entry;

/* The devices fattn offers, GPUs first, after the platform and device
 * filters (settings->opencl_platform and ->opencl_device: an index or a
 * case-insensitive name substring; NULL or "" = any). Returns the count (0
 * with reason on none). */
int ocl_list_devices(const fattn_settings *settings, ocl_device_entry *out, int max, char *reason,
                     size_t reason_len);
/* The entry of a device the caller made a context on: its platform and type,
 * queried under the enumeration lock. */
fattn_status ocl_native_entry(cl_device_id dev, ocl_device_entry *out, fattn_msg *msg);
/* "vendor name (OpenCL x.y, driver z)". */
void ocl_describe(cl_device_id dev, char *buf, size_t len);

/* ---- Tuning (ocl_tuning.c) ------------------------------------------------------ */

typedef struct ocl_tiles {
    int dpad;    /* head dim bucket: 32, 64, 128 or 256 */
    int bq, bkv; /* query rows and keys per tile */
    int tq, tk;  /* work-item grid: rows x keys (and dims) */
    int dvpad;   /* V's head dim bucket (head_dim_v); dpad when they are equal */
} ocl_tiles;

typedef struct ocl_limits {
    size_t local_mem;          /* bytes */
    size_t max_wg;             /* work-items per group */
    size_t preferred_multiple; /* work-items per warp or wavefront; 1 if the driver does not say */
    uint64_t max_alloc;        /* bytes in one buffer */
    uint64_t global_mem;       /* bytes of device memory */
    int vendor_class;          /* OCL_CLASS_* */
    int compute_units;
    int softmax_wg; /* the naive softmax's work-group: a power of two <= 256 */
    /* Local memory a compute unit holds for all its groups, for residency
     * estimates: NVIDIA's per-SM shared memory by compute capability
     * (OpenCL reports only the 48 KiB one group may take), else local_mem. */
    size_t cu_local_mem;
    /* Local memory one group may declare in static arrays: NVIDIA's
     * per-block maximum by compute capability, which its OpenCL compiler and
     * launches honour though the device reports 48 KiB (the matrix path
     * probes it before use, ocl_mma.c), else local_mem. */
    size_t group_local_max;
} ocl_limits;

enum { OCL_CLASS_OTHER, OCL_CLASS_NVIDIA, OCL_CLASS_AMD, OCL_CLASS_INTEL, OCL_CLASS_CPU };

fattn_status ocl_read_limits(cl_device_id dev, cl_device_type type, ocl_limits *out,
                             fattn_msg *msg);
/* Tiles for head dims D (Q, K) and Dv (V, O) with the caller's overrides
 * (0 = table default) and the FATTN_OPENCL_TILES value `forced` (NULL =
 * none; its items are keyed by the larger dim's bucket); fails with
 * FATTN_ERR_UNSUPPORTED when overrides cannot fit the device, and with
 * FATTN_ERR_ENVIRONMENT when `forced` is malformed. */
fattn_status ocl_choose_tiles(const ocl_limits *lim, const char *forced, int D, int Dv, int tile_q,
                              int tile_kv, ocl_tiles *out, fattn_msg *msg);
/* Local memory the kernel uses for these tiles. */
size_t ocl_local_bytes(const ocl_tiles *t);

/* ---- Programs (ocl_program.c) --------------------------------------------------- */

#define OCL_MAX_PROGRAMS 32

typedef struct ocl_cached_program {
    char options[640]; /* file|kernel|options */
    cl_program program;
    cl_kernel kernel;
    uint64_t used; /* the cache's clock at its last fetch */
} ocl_cached_program;

typedef struct ocl_program_cache {
    ocl_cached_program entries[OCL_MAX_PROGRAMS];
    int count;
    uint64_t clock; /* fetches so far: entries' `used` orders them */
    int disk_hits, builds; /* for tests and the benchmark */
    /* The disk cache, resolved and checked once per context by
     * ocl_disk_cache_open: the directory, held open so that it cannot be
     * swapped after the check (-1: no disk cache), and its secret key. */
    int disk_fd;
    uint64_t disk_secret[2];
    /* The kernel-development knobs (settings->kernel_dir, ->opencl_options:
     * FATTN_KERNEL_DIR, FATTN_OPENCL_OPTIONS); NULL when unset. They live as
     * long as the context. */
    const char *kernel_dir;
    const char *extra_options;
} ocl_program_cache;

/* Finds, creates and checks the disk cache directory: settings->cache_dir
 * (FATTN_CACHE_DIR or the API's value; "off" or "0" disables), else
 * $XDG_CACHE_HOME/fattn, else $HOME/.cache/fattn. An explicitly named
 * directory that cannot be used fails, with FATTN_ERR_ENVIRONMENT when the
 * environment variable named it and FATTN_ERR_INVALID_ARGUMENT when the API
 * did (settings->cache_dir_origin); a directory that is not private to the
 * user, or a default one that cannot be used, leaves the disk cache off with
 * a note in msg (status FATTN_OK). */
fattn_status ocl_disk_cache_open(ocl_program_cache *cache, const fattn_settings *settings,
                                 fattn_msg *msg);
void ocl_disk_cache_close(ocl_program_cache *cache);

/* The kernel `name` from kernel file `file` (or files joined by '+', in that
 * order after the shared ones) built with `options`: from the
 * context's cache, else from the disk cache, else compiled (and then written
 * to the disk cache). A build failure returns FATTN_ERR_BUILD with the log. */
fattn_status ocl_get_kernel(ocl_program_cache *cache, cl_context ctx, cl_device_id dev,
                            const char *file, const char *name, const char *options, cl_kernel *out,
                            fattn_msg *msg);
/* Releases the programs (they belong to one cl_context); the disk cache stays. */
void ocl_cache_release(ocl_program_cache *cache);

/* Embedded kernel sources (generated at build time by embed_kernels.cmake). */
typedef struct ocl_embedded_source {
    const char *name;
    const unsigned char *data;
    size_t size;
} ocl_embedded_source;
extern const ocl_embedded_source ocl_embedded_sources[];
extern const size_t ocl_embedded_source_count;
/* The macros the kernels define or test, taken from their sources at build
 * time: fattn sets them, FATTN_OPENCL_OPTIONS may not. */
extern const char *const ocl_kernel_macros[];
extern const size_t ocl_kernel_macro_count;

/* ---- The backend state (ocl_backend.c) ------------------------------------------ */

/* A fattn buffer: the cl_mem (the core knows whether fattn allocated it or
 * wraps the caller's; either way this record holds one reference). */
typedef struct ocl_buf {
    cl_mem mem;
    /* The top-level cl_mem it lies in and its byte origin there: fixed when
     * the cl_mem is made, so found once at wrap time, not per call. */
    cl_mem root;
    uint64_t start;
} ocl_buf;

static inline cl_mem ocl_mem_of(const fattn_operand *op) {
    return op->mem ? ((const ocl_buf *)op->mem)->mem : NULL;
}

typedef struct ocl_state {
    ocl_device_entry dev;
    /* Every handle below holds a reference of its own (created here, or
     * retained from the caller's objects), released at close. */
    cl_context context;
    /* The queue fattn_context_set_stream(NULL) restores: fattn's own
     * (profiling enabled), or the native_queue the context was made with. */
    cl_command_queue own_queue;
    cl_command_queue queue; /* own_queue, or the caller's */
    ocl_limits limits;
    ocl_program_cache cache;
    int live_buffers; /* allocated (not wrapped) by fattn in context */
    /* The settings the context was opened with (their strings live as long
     * as the context). */
    fattn_settings settings;
    /* The fault word (ocl_ragged.c): one cl_int in `context`, where kernels
     * that read device-resident index tables set FATTN_FAULT_* bits.
     * fault_armed: a ragged launch was enqueued since the word was last
     * read; fault_wait: a marker on the queues left (set_stream) since then,
     * which the next read waits for; fault_pending: bits read but not yet
     * reported. Used by one thread at a time, as the rest of the state. */
    cl_mem fault;
    int fault_armed;
    cl_event fault_wait;
    unsigned fault_pending;
    /* The matrix path (ocl_mma.c), chosen at open: the primitive file its
     * probe ran (-1: none), whether it passed per dtype (fattn_dtype: f32
     * is TF32), and why the path is not taken where it is not. */
    int mma_prim;
    int mma_ok[3];
    char mma_why[320];
    /* The local memory the matrix kernel may declare: the device's reported
     * size, or (NVIDIA, where the local probe passed) its block maximum. */
    size_t mma_local;
    char mma_local_why[160]; /* why not the block maximum (the local probe failed), or "" */
} ocl_state;

/* ---- Variable-length and paged problems (ocl_ragged.c) -------------------------- */

/* The build options of a problem's kernels: " -DFATTN_RAGGED=1" when
 * p->rag.on, plus " -DFATTN_PAGED=1" for a paged cache (more builds, cached
 * like the others), else "". */
const char *ocl_ragged_option(const fattn_problem *p);
/* Sets ragged.cl's RAGGED_PARAMS from argument *a on (the tables, totals,
 * pages, flags and the fault word) and arms the fault word. */
fattn_status ocl_ragged_args(ocl_state *s, cl_kernel k, cl_uint *a, const fattn_problem *p,
                             fattn_msg *msg);
/* The vtable's append (desc->append): kernels_cl/append.cl on the
 * context's queue, before the attention; a bad sequence is left unwritten
 * and recorded in the fault word. */
fattn_status ocl_append(void *state, const fattn_problem *p, fattn_msg *msg);
/* The fault word: made zeroed at open, released at close. */
fattn_status ocl_fault_open(ocl_state *s, fattn_msg *msg);
void ocl_fault_close(ocl_state *s);
/* Before the context's queue changes to one on cl_context qctx: keeps the
 * word's pending launches reachable (a marker on the old queue), or, for
 * another cl_context, reads the old word and makes a new one there. On
 * failure nothing has changed. */
fattn_status ocl_fault_switch(ocl_state *s, cl_context qctx, fattn_msg *msg);
/* The vtable's take_fault: FATTN_OK at once when no ragged launch happened
 * since the last check; else a blocking read of the word on the context's
 * queue, reset when set, and fattn_fault_fail with its bits. */
fattn_status ocl_take_fault(void *state, fattn_msg *msg);

/* ---- Attention variants (ocl_variants.c) ---------------------------------------- */

/* The build options of a kernel running the FATTN_VAR_* `bits` of problem p
 * (kernels_cl/variants.cl): " -DFATTN_VAR=<bits>", the bias's dtype with a
 * bias, " -DDVPAD=<dvpad>" with head_dim_v; "" for bits 0, so plain builds
 * keep their options and programs. */
void ocl_variant_options(const fattn_problem *p, unsigned bits, int dvpad, char *buf, size_t len);
/* Sets variants.cl's VAR_PARAMS from argument *a on, for a build with
 * `bits` (nothing for 0). */
fattn_status ocl_variant_args(cl_kernel k, cl_uint *a, const fattn_problem *p, unsigned bits,
                              fattn_msg *msg);

/* ---- Kernel variants (ocl_forward.c, ocl_decode.c, ocl_naive.c, ocl_combine.c) ----
 * Rows of the variant table (fattn_variant): accept decides and fills the
 * typed plan (never touching operands: it also plans memory reports), run
 * launches it. */

fattn_status ocl_tiled_accept(void *state, const fattn_problem *p, fattn_plan *plan,
                              fattn_msg *msg);
fattn_status ocl_tiled_run(void *state, const fattn_problem *p, const fattn_plan *plan,
                           fattn_msg *msg);
/* Split-KV decoding with GQA packing (ocl_decode.c: kernels_cl/decode.cl, then
 * combine.cl over the plan's workspace); tried before the tiled row. */
fattn_status ocl_decode_accept(void *state, const fattn_problem *p, fattn_plan *plan,
                               fattn_msg *msg);
fattn_status ocl_decode_run(void *state, const fattn_problem *p, const fattn_plan *plan,
                            fattn_msg *msg);
/* The same on matrix units (kernels_cl/decode_mma.cl after the device's
 * matrix files): f16 and bf16 where the matrix probe passed; tried before
 * "decode", and run by ocl_decode_run. */
fattn_status ocl_decode_mma_accept(void *state, const fattn_problem *p, fattn_plan *plan,
                                   fattn_msg *msg);
/* The matrix path (ocl_mma.c: kernels_cl/flash_mma.cl after a primitive
 * file); tried before the tiled row, f16 and bf16 only. ocl_mma_setup
 * probes the device at open (FATTN_OPENCL_MATRIX: auto, off, emulate);
 * ocl_mma_path names what it chose, for the device's description. */
void ocl_mma_setup(ocl_state *s);
const char *ocl_mma_path(const ocl_state *s);
fattn_status ocl_mma_accept(void *state, const fattn_problem *p, fattn_plan *plan,
                            fattn_msg *msg);
fattn_status ocl_mma_run(void *state, const fattn_problem *p, const fattn_plan *plan,
                         fattn_msg *msg);
/* The matrix files another kernel builds on (decode_mma.cl): what the host
 * joins before it, their build options, and the warp's width, rows per
 * tile and scratch words; 0 with why where the probe did not pass in dtype. */
typedef struct ocl_mma_files {
    const char *files, *options;
    int warp, tq, xs_words;
} ocl_mma_files;
int ocl_mma_files_for(const ocl_state *s, fattn_dtype dtype, ocl_mma_files *out, fattn_msg *msg);
/* The arguments the tiled kernels share, from argument *a on: Q, K, V, O
 * and lse (buffer, offset, strides), then has_lse, Hq, the GQA group, Sq,
 * Sk, D, scale * log2(e), causal and the causal offset. */
fattn_status ocl_forward_args(cl_kernel k, cl_uint *a, const fattn_problem *p, fattn_msg *msg);
/* The naive baseline: CLBlast GEMMs around a softmax kernel. */
fattn_status ocl_naive_accept(void *state, const fattn_problem *p, fattn_plan *plan,
                              fattn_msg *msg);
fattn_status ocl_naive_run(void *state, const fattn_problem *p, const fattn_plan *plan,
                           fattn_msg *msg);
/* fattn_combine (kernels_cl/combine.cl): f32, f16 and bf16 parts and
 * output in any pairing, head dims 1..256, any sizes and strides. */
fattn_status ocl_combine_accept(void *state, const fattn_problem *p, fattn_plan *plan,
                                fattn_msg *msg);
fattn_status ocl_combine_run(void *state, const fattn_problem *p, const fattn_plan *plan,
                             fattn_msg *msg);
/* The vtable's plan and run: the table walk. */
fattn_status ocl_plan(void *state, const fattn_problem *p, fattn_plan *plan, fattn_msg *msg);
fattn_status ocl_run(void *state, const fattn_problem *p, const fattn_plan *plan, fattn_msg *msg);

/* The causal offset as the kernels take it (a long): p->causal_offset
 * clamped to [-seq_q, seq_kv], which changes no row's key limit (a row i
 * sees min(max(i + offset + 1, 0), seq_kv) keys, and i < seq_q) and keeps
 * i + offset + 1 far inside 64 bits. 0 when not causal (unused then). */
static inline cl_long ocl_causal_offset(const fattn_problem *p) {
    if (!p->causal) return 0;
    const int64_t off = p->causal_offset;
    return (cl_long)(off < -p->seq_q ? -p->seq_q : off > p->seq_kv ? p->seq_kv : off);
}

#endif /* FATTN_OCL_COMMON_H */

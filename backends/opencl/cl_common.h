/* The OpenCL backend's shared declarations: its state, the device list, the
 * program cache and the tuning table. Split by concern into cl_device.c,
 * cl_program.c, cl_tuning.c and cl_backend.c. */
#ifndef FATTN_CL_COMMON_H
#define FATTN_CL_COMMON_H

#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>

#include "backend.h"

/* A name for an OpenCL error code ("CL_OUT_OF_RESOURCES"). */
const char *cl_error_name(cl_int err);

/* The one mapping of an OpenCL error to a status: running out of device or
 * host memory (or resources) is FATTN_ERR_OUT_OF_MEMORY, anything else
 * FATTN_ERR_DEVICE. */
static inline fattn_status cl_status_of(cl_int err) {
    return err == CL_OUT_OF_RESOURCES || err == CL_MEM_OBJECT_ALLOCATION_FAILURE ||
                   err == CL_OUT_OF_HOST_MEMORY
               ? FATTN_ERR_OUT_OF_MEMORY
               : FATTN_ERR_DEVICE;
}

/* Fails with cl_status_of(err), naming the call and the code, if err != CL_SUCCESS. */
#define CL_TRY(msg, call)                                                                   \
    do {                                                                                    \
        cl_int err_ = (call);                                                               \
        if (err_ != CL_SUCCESS)                                                             \
            return fattn_fail((msg), cl_status_of(err_), "%s failed: %s (%d)", #call,       \
                              cl_error_name(err_), (int)err_);                              \
    } while (0)

/* ---- Devices (cl_device.c) ---------------------------------------------------- */

typedef struct cl_device_entry {
    cl_platform_id platform;
    cl_device_id device;
    cl_device_type type;
} cl_device_entry;

/* The devices fattn offers, GPUs first, after FATTN_OPENCL_PLATFORM and
 * FATTN_OPENCL_DEVICE filtering. Returns the count (0 with reason on none). */
int cl_list_devices(cl_device_entry *out, int max, char *reason, size_t reason_len);
/* "vendor name (OpenCL x.y, driver z)". */
void cl_describe(cl_device_id dev, char *buf, size_t len);

/* ---- Tuning (cl_tuning.c) ------------------------------------------------------ */

typedef struct cl_tiles {
    int dpad;   /* head dim bucket: 32, 64, 128 or 256 */
    int bq, bkv;   /* query rows and keys per tile */
    int tq, tk;    /* work-item grid: rows x keys (and dims) */
} cl_tiles;

typedef struct cl_limits {
    size_t local_mem;      /* bytes */
    size_t max_wg;         /* work-items per group */
    size_t preferred_multiple;   /* work-items per warp or wavefront; 1 if the driver does not say */
    uint64_t max_alloc;    /* bytes in one buffer */
    uint64_t global_mem;   /* bytes of device memory */
    int vendor_class;      /* CL_CLASS_* */
    int compute_units;
    int softmax_wg;        /* the naive softmax's work-group: a power of two <= 256 */
} cl_limits;

enum { CL_CLASS_OTHER, CL_CLASS_NVIDIA, CL_CLASS_AMD, CL_CLASS_INTEL, CL_CLASS_CPU };

fattn_status cl_read_limits(cl_device_id dev, cl_device_type type, cl_limits *out, fattn_msg *msg);
/* Tiles for head dim D with the caller's overrides (0 = table default); fails
 * with FATTN_ERR_UNSUPPORTED when overrides cannot fit the device. */
fattn_status cl_choose_tiles(const cl_limits *lim, int D, int tile_q, int tile_kv, cl_tiles *out,
                             fattn_msg *msg);
/* Local memory the kernel uses for these tiles. */
size_t cl_local_bytes(const cl_tiles *t);

/* ---- Programs (cl_program.c) --------------------------------------------------- */

#define CL_MAX_PROGRAMS 32

typedef struct cl_cached_program {
    char options[640];   /* file|kernel|options */
    cl_program program;
    cl_kernel kernel;
} cl_cached_program;

typedef struct cl_program_cache {
    cl_cached_program entries[CL_MAX_PROGRAMS];
    int count;
    int disk_hits, builds;   /* for tests and the benchmark */
    /* The disk cache, resolved and checked once per context by
     * cl_disk_cache_open: the directory, held open so that it cannot be
     * swapped after the check (-1: no disk cache), and its secret key. */
    int disk_fd;
    uint64_t disk_secret[2];
} cl_program_cache;

/* Finds, creates and checks the disk cache directory: FATTN_CACHE_DIR, else
 * $XDG_CACHE_HOME/fattn, else $HOME/.cache/fattn. An explicit FATTN_CACHE_DIR
 * that cannot be used fails with FATTN_ERR_ENVIRONMENT; a directory that is
 * not private to the user, or a default one that cannot be used, leaves the
 * disk cache off with a note in msg (status FATTN_OK). */
fattn_status cl_disk_cache_open(cl_program_cache *cache, fattn_msg *msg);
void cl_disk_cache_close(cl_program_cache *cache);

/* The kernel `name` from kernel file `file` built with `options`: from the
 * context's cache, else from the disk cache, else compiled (and then written
 * to the disk cache). A build failure returns FATTN_ERR_BUILD with the log. */
fattn_status cl_get_kernel(cl_program_cache *cache, cl_context ctx, cl_device_id dev,
                           const char *file, const char *name, const char *options,
                           cl_kernel *out, fattn_msg *msg);
/* Releases the programs (they belong to one cl_context); the disk cache stays. */
void cl_cache_release(cl_program_cache *cache);

/* Embedded kernel sources (generated at build time by embed_kernels.cmake). */
typedef struct cl_embedded_source {
    const char *name;
    const unsigned char *data;
    size_t size;
} cl_embedded_source;
extern const cl_embedded_source cl_embedded_sources[];
extern const size_t cl_embedded_source_count;
/* The macros the kernels define or test, taken from their sources at build
 * time: fattn sets them, FATTN_OPENCL_OPTIONS may not. */
extern const char *const cl_kernel_macros[];
extern const size_t cl_kernel_macro_count;

/* ---- The backend state (cl_backend.c) ------------------------------------------ */

/* A fattn buffer: the cl_mem, and whether fattn allocated it (or wraps the caller's). */
typedef struct cl_buf {
    cl_mem mem;
    int owned;
    /* The top-level cl_mem it lies in and its byte origin there: fixed when
     * the cl_mem is made, so found once at wrap time, not per call. */
    cl_mem root;
    uint64_t start;
} cl_buf;

static inline cl_mem cl_mem_of(const fattn_operand *op) { return op->mem ? ((const cl_buf *)op->mem)->mem : NULL; }

typedef struct cl_state {
    cl_device_entry dev;
    cl_context context;
    cl_command_queue own_queue;
    cl_command_queue queue;   /* own_queue, or the caller's */
    cl_limits limits;
    cl_program_cache cache;
    int live_buffers;         /* allocated (not wrapped) by fattn in context */
} cl_state;

/* The naive baseline (cl_naive.c): CLBlast GEMMs around a softmax kernel. */
fattn_status cl_forward_naive(void *state, const fattn_problem *p, fattn_msg *msg);

#endif /* FATTN_CL_COMMON_H */

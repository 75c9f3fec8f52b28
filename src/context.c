/* Contexts, run-time backend choice and buffers. */
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "env.h"
#include "internal.h"
#include "registry.h"

/* ---- Backends and devices ------------------------------------------------ */

/* Describes a backend under the given settings, with its AUTO score. */
static void describe(fattn_backend_kind kind, const fattn_settings *settings,
                     fattn_backend_info *info, int *score) {
    memset(info, 0, sizeof *info);
    info->size = sizeof *info;
    info->kind = kind;
    info->name = fattn_backend_name(kind);
    *score = 0;
    const fattn_backend_vtable *vt = fattn_registry_get(kind, info->reason, sizeof info->reason);
    if (!vt) return;
    fattn_probe probe;
    memset(&probe, 0, sizeof probe);
    vt->probe(settings, &probe);
    info->device_count = probe.device_count > 0 ? probe.device_count : 0;
    info->gpu_count = probe.gpu_count > 0 ? probe.gpu_count : 0;
    if (info->gpu_count > info->device_count) info->gpu_count = info->device_count;
    info->available = info->device_count > 0;
    if (!info->available)
        snprintf(info->reason, sizeof info->reason, "%s",
                 probe.reason[0] ? probe.reason : "no devices found");
    /* A backend may not rank itself above its row in the registry. */
    const int rank = fattn_registry_auto_rank(kind);
    *score = !info->available || probe.auto_score < 0 ? 0
             : probe.auto_score > rank                ? rank
                                                      : probe.auto_score;
}

static int valid_kind(fattn_backend_kind kind) {
    return (int)kind > FATTN_BACKEND_AUTO && kind < FATTN_BACKEND_COUNT;
}

fattn_status fattn_backend_get_info(fattn_backend_kind kind, fattn_backend_info *info) {
    fattn_msg *tm = fattn_thread_msg();
    fattn_ctx_clear(NULL);
    if (!info) return fattn_ctx_fail(NULL, FATTN_ERR_NULL_POINTER, "info is NULL");
    if (!valid_kind(kind))
        return fattn_ctx_fail(NULL, FATTN_ERR_INVALID_ARGUMENT,
                              "backend kind %d is not cpu (1), cuda (2) or opencl (3)", (int)kind);
    fattn_settings_store env;
    fattn_status st = fattn_settings_resolve(NULL, FATTN_BACKEND_AUTO, &env, tm);
    if (st != FATTN_OK) return st;
    fattn_backend_info full;
    int score;
    describe(kind, &env.s, &full, &score);
    fattn_settings_free(&env);
#define I_(field) offsetof(fattn_backend_info, field)
    return fattn_ext_write(info, &full, sizeof full,
                           FATTN_OLDER(I_(device_count), I_(gpu_count), I_(reason)), "info",
                           "fattn_backend_info", tm);
#undef I_
}

/* The backend's vtable and device count under settings, or a failure
 * naming why. */
static fattn_status usable_backend(fattn_backend_kind kind, const fattn_settings *settings,
                                   const fattn_backend_vtable **vt, int *count) {
    fattn_backend_info info;
    int score;
    describe(kind, settings, &info, &score);
    if (!info.available)
        return fattn_ctx_fail(NULL, FATTN_ERR_BACKEND_UNAVAILABLE,
                              "backend '%s' is not available: %s", info.name, info.reason);
    *vt = fattn_registry_get(kind, NULL, 0);
    *count = info.device_count;
    return FATTN_OK;
}

fattn_status fattn_device_get_name(fattn_backend_kind kind, int device, char *buf, size_t len) {
    const fattn_backend_vtable *vt = NULL;
    int count = 0;
    fattn_ctx_clear(NULL);
    if (!buf || len == 0)
        return fattn_ctx_fail(NULL, FATTN_ERR_NULL_POINTER, "buf is NULL or len is 0");
    buf[0] = '\0';
    if (!valid_kind(kind))
        return fattn_ctx_fail(NULL, FATTN_ERR_INVALID_ARGUMENT,
                              "backend kind %d is not cpu (1), cuda (2) or opencl (3)", (int)kind);
    fattn_settings_store env;
    fattn_status st = fattn_settings_resolve(NULL, FATTN_BACKEND_AUTO, &env, fattn_thread_msg());
    if (st == FATTN_OK) st = usable_backend(kind, &env.s, &vt, &count);
    if (st == FATTN_OK && (device < 0 || device >= count))
        st = fattn_ctx_fail(NULL, FATTN_ERR_NO_DEVICE,
                            "device %d of backend '%s' requested; it has %d (0..%d)", device,
                            fattn_backend_name(kind), count, count - 1);
    if (st == FATTN_OK) st = vt->device_name(&env.s, device, buf, len, fattn_thread_msg());
    fattn_settings_free(&env);
    return st;
}

/* AUTO: the available backend with the highest score. Backends are probed
 * in falling rank, and the search stops once no later one could beat the
 * best score, so a GPU module is not loaded when a better one answered. */
static fattn_backend_kind auto_choice(const fattn_context_params *prm) {
    fattn_backend_kind order[FATTN_BACKEND_COUNT], best = FATTN_BACKEND_CPU;
    int n = 0, best_score = 0;
    for (int k = FATTN_BACKEND_AUTO + 1; k < FATTN_BACKEND_COUNT; k++) {
        int i = n++;
        while (i > 0 && fattn_registry_auto_rank(order[i - 1]) <
                            fattn_registry_auto_rank((fattn_backend_kind)k)) {
            order[i] = order[i - 1];
            i--;
        }
        order[i] = (fattn_backend_kind)k;
    }
    for (int i = 0; i < n; i++) {
        if (best_score > 0 && fattn_registry_auto_rank(order[i]) <= best_score) break;
        fattn_settings_store st;
        if (fattn_settings_resolve(prm, order[i], &st, fattn_thread_msg()) != FATTN_OK) continue;
        fattn_backend_info info;
        int score;
        describe(order[i], &st.s, &info, &score);
        fattn_settings_free(&st);
        if (score > best_score) best = order[i], best_score = score;
    }
    fattn_ctx_clear(NULL);
    return best;
}

fattn_status fattn_set_module_dir(const char *dir) {
    fattn_ctx_clear(NULL);
    return fattn_registry_set_module_dir(dir, fattn_thread_msg());
}

/* ---- Contexts -------------------------------------------------------------- */

static fattn_status create(const fattn_context_params *prm, fattn_context **out) {
    fattn_msg *tm = fattn_thread_msg();
    fattn_status st;
    int is_set = 0;
    fattn_backend_kind backend = prm->backend;
    int device = prm->device;
    if ((int)backend < 0 || backend >= FATTN_BACKEND_COUNT)
        return fattn_ctx_fail(NULL, FATTN_ERR_INVALID_ARGUMENT,
                              "backend kind %d is not auto (0), cpu (1), cuda (2) or opencl (3)",
                              (int)backend);
    if (device < -1)
        return fattn_ctx_fail(NULL, FATTN_ERR_INVALID_ARGUMENT,
                              "device %d is negative (use -1 for the default)", device);
    const int native = prm->native_context || prm->native_device;
    if ((prm->native_context != NULL) != (prm->native_device != NULL))
        return fattn_ctx_fail(NULL, FATTN_ERR_INVALID_ARGUMENT,
                              "params->native_context and params->native_device go together "
                              "(an OpenCL cl_context and one of its cl_device_id)");
    /* Native objects belong to one API: they name the backend, which AUTO
     * (and FATTN_BACKEND) cannot guess, and fix the device. */
    const int any_native = native || prm->native_queue || prm->cuda_current_context;
    if (any_native && backend == FATTN_BACKEND_AUTO)
        return fattn_ctx_fail(
            NULL, FATTN_ERR_INVALID_ARGUMENT,
            "native objects need an explicit backend: FATTN_BACKEND_OPENCL for a "
            "cl_context, cl_device_id or cl_command_queue, FATTN_BACKEND_CUDA for "
            "a cudaStream_t or cuda_current_context");
    if (prm->cuda_current_context && backend != FATTN_BACKEND_CUDA)
        return fattn_ctx_fail(NULL, FATTN_ERR_INVALID_ARGUMENT,
                              "params->cuda_current_context is for FATTN_BACKEND_CUDA, not '%s'",
                              fattn_backend_name(backend));
    if (backend == FATTN_BACKEND_AUTO) {
        fattn_backend_kind env_kind = FATTN_BACKEND_AUTO;
        if ((st = fattn_env_backend(&env_kind, &is_set, tm)) != FATTN_OK) return st;
        backend = is_set ? env_kind : FATTN_BACKEND_AUTO;
    }
    if (device == -1 && !native) {
        int env_dev = 0;
        if ((st = fattn_env_device(&env_dev, &is_set, tm)) != FATTN_OK) return st;
        device = is_set ? env_dev : 0;
    }
    if (backend == FATTN_BACKEND_AUTO) backend = auto_choice(prm);

    fattn_context *ctx = calloc(1, sizeof *ctx);
    if (!ctx) return fattn_ctx_fail(NULL, FATTN_ERR_OUT_OF_MEMORY, "cannot allocate a context");
    if ((st = fattn_settings_resolve(prm, backend, &ctx->settings, tm)) != FATTN_OK) {
        free(ctx);
        return st;
    }
    const fattn_backend_vtable *vt = NULL;
    int count = 0;
    char reason[256];
    if (native) {
        /* The caller's device is used whatever the filters say: only the
         * module must be there. */
        if (!(vt = fattn_registry_get(backend, reason, sizeof reason)))
            st = fattn_ctx_fail(NULL, FATTN_ERR_BACKEND_UNAVAILABLE,
                                "backend '%s' is not available: %s", fattn_backend_name(backend),
                                reason);
    } else if ((st = usable_backend(backend, &ctx->settings.s, &vt, &count)) == FATTN_OK &&
               device >= count)
        st = fattn_ctx_fail(NULL, FATTN_ERR_NO_DEVICE,
                            "device %d of backend '%s' requested; it has %d (0..%d)", device,
                            vt->name, count, count - 1);
    if (st != FATTN_OK) {
        fattn_settings_free(&ctx->settings);
        free(ctx);
        return st;
    }
    ctx->vt = vt;
    ctx->device = native ? -1 : device;
    ctx->refs = 1;
    const fattn_open_args args = {native ? -1 : device, &ctx->settings.s,
                                  prm->native_device,   prm->native_context,
                                  prm->native_queue,    prm->cuda_current_context};
    tm->text[0] = '\0';
    if ((st = vt->open(&args, &ctx->state, tm)) != FATTN_OK) {
        fattn_settings_free(&ctx->settings);
        free(ctx);
        return st;
    }
    /* A note from open (a degraded mode, e.g. no disk cache) stays visible
     * in the device description. */
    char note[sizeof ctx->device_name];
    const size_t note_len = strnlen(tm->text, sizeof note - 1); /* cut to fit */
    memcpy(note, tm->text, note_len);
    note[note_len] = '\0';
    /* The opened state's description where the backend has one (it can say
     * what open chose, e.g. OpenCL's matrix path), else the device's. */
    if (vt->describe)
        vt->describe(ctx->state, ctx->device_name, sizeof ctx->device_name);
    else if (native)
        snprintf(ctx->device_name, sizeof ctx->device_name, "%s device of the caller's context",
                 vt->name);
    else if (vt->device_name(&ctx->settings.s, device, ctx->device_name, sizeof ctx->device_name,
                             tm) != FATTN_OK)
        snprintf(ctx->device_name, sizeof ctx->device_name, "%s device %d", vt->name, device);
    if (note[0]) {
        const size_t n = strlen(ctx->device_name);
        snprintf(ctx->device_name + n, sizeof ctx->device_name - n, " [%s]", note);
    }
    tm->text[0] = '\0';
    *out = ctx;
    return FATTN_OK;
}

fattn_status fattn_context_create_with(const fattn_context_params *params, fattn_context **out) {
    fattn_ctx_clear(NULL);
    if (!out)
        return fattn_ctx_fail(NULL, FATTN_ERR_NULL_POINTER, "out (the context pointer) is NULL");
    *out = NULL;
    if (!params) return fattn_ctx_fail(NULL, FATTN_ERR_NULL_POINTER, "params is NULL");
    fattn_context_params prm = FATTN_CONTEXT_PARAMS_INIT;
#define P_(field) offsetof(fattn_context_params, field)
    fattn_status st =
        fattn_ext_read(&prm, sizeof prm, params,
                       FATTN_OLDER(P_(cpu_threads), P_(opencl_platform), P_(opencl_device),
                                   P_(cache_dir), P_(native_context), P_(native_device),
                                   P_(native_queue), P_(cuda_current_context)),
                       "params", "fattn_context_params", fattn_thread_msg());
#undef P_
    if (st != FATTN_OK) return st;
    return create(&prm, out);
}

fattn_status fattn_context_create(fattn_backend_kind backend, int device, fattn_context **out) {
    fattn_context_params prm = FATTN_CONTEXT_PARAMS_INIT;
    fattn_ctx_clear(NULL);
    if (!out)
        return fattn_ctx_fail(NULL, FATTN_ERR_NULL_POINTER, "out (the context pointer) is NULL");
    *out = NULL;
    prm.backend = backend;
    prm.device = device;
    return create(&prm, out);
}

fattn_status fattn_context_set_param(fattn_context *ctx, fattn_param param, int64_t value) {
    if (!ctx) return fattn_ctx_fail(NULL, FATTN_ERR_NULL_POINTER, "ctx is NULL");
    fattn_ctx_clear(ctx);
    switch (param) {
    case FATTN_PARAM_CPU_THREADS:
        if (value != 0 && ctx->vt->kind != FATTN_BACKEND_CPU)
            return fattn_ctx_fail(ctx, FATTN_ERR_INVALID_ARGUMENT,
                                  "FATTN_PARAM_CPU_THREADS = %lld: backend '%s' takes only 0",
                                  (long long)value, ctx->vt->name);
        if (value < 0 || value > 1024)
            return fattn_ctx_fail(ctx, FATTN_ERR_INVALID_ARGUMENT,
                                  "FATTN_PARAM_CPU_THREADS = %lld is not 0 (as created) or 1..1024",
                                  (long long)value);
        ctx->tune.cpu_threads = (int)value;
        return FATTN_OK;
    case FATTN_PARAM_KV_SPLITS:
        if (value < 0 || value > 65536)
            return fattn_ctx_fail(ctx, FATTN_ERR_INVALID_ARGUMENT,
                                  "FATTN_PARAM_KV_SPLITS = %lld is not 0 (the backend's choice) or "
                                  "1..65536",
                                  (long long)value);
        ctx->tune.kv_splits = (int)value;
        return FATTN_OK;
    case FATTN_PARAM_TILE_Q:
    case FATTN_PARAM_TILE_KV:
        if (value < 0 || value > 65536)
            return fattn_ctx_fail(ctx, FATTN_ERR_INVALID_ARGUMENT,
                                  "%s = %lld is not 0 (the backend's choice) or 1..65536",
                                  param == FATTN_PARAM_TILE_Q ? "FATTN_PARAM_TILE_Q"
                                                              : "FATTN_PARAM_TILE_KV",
                                  (long long)value);
        *(param == FATTN_PARAM_TILE_Q ? &ctx->tune.tile_q : &ctx->tune.tile_kv) = (int)value;
        return FATTN_OK;
    default:
        return fattn_ctx_fail(ctx, FATTN_ERR_INVALID_ARGUMENT, "parameter %d is not a fattn_param",
                              (int)param);
    }
}

fattn_status fattn_context_get_param(fattn_context *ctx, fattn_param param, int64_t *value) {
    if (!ctx) return fattn_ctx_fail(NULL, FATTN_ERR_NULL_POINTER, "ctx is NULL");
    fattn_ctx_clear(ctx);
    if (!value) return fattn_ctx_fail(ctx, FATTN_ERR_NULL_POINTER, "value is NULL");
    switch (param) {
    case FATTN_PARAM_CPU_THREADS: *value = ctx->tune.cpu_threads; return FATTN_OK;
    case FATTN_PARAM_TILE_Q: *value = ctx->tune.tile_q; return FATTN_OK;
    case FATTN_PARAM_TILE_KV: *value = ctx->tune.tile_kv; return FATTN_OK;
    case FATTN_PARAM_KV_SPLITS: *value = ctx->tune.kv_splits; return FATTN_OK;
    default:
        return fattn_ctx_fail(ctx, FATTN_ERR_INVALID_ARGUMENT, "parameter %d is not a fattn_param",
                              (int)param);
    }
}

void fattn_context_release(fattn_context *ctx) {
    if (--ctx->refs > 0) return;
    if (ctx->workspace) ctx->vt->buffer_free(ctx->state, ctx->workspace, 1);
    ctx->vt->close(ctx->state);
    fattn_settings_free(&ctx->settings);
    free(ctx);
}

void fattn_context_free(fattn_context *ctx) {
    if (!ctx || ctx->released) return;
    ctx->released = 1;
    fattn_context_release(ctx);
}

fattn_backend_kind fattn_context_backend(const fattn_context *ctx) {
    return ctx ? ctx->vt->kind : FATTN_BACKEND_AUTO;
}
const char *fattn_context_backend_name(const fattn_context *ctx) {
    return ctx ? ctx->vt->name : "";
}
const char *fattn_context_device_name(const fattn_context *ctx) {
    return ctx ? ctx->device_name : "";
}
int fattn_context_device(const fattn_context *ctx) { return ctx ? ctx->device : -1; }

fattn_status fattn_context_set_stream(fattn_context *ctx, void *native_stream) {
    if (!ctx) return fattn_ctx_fail(NULL, FATTN_ERR_NULL_POINTER, "ctx is NULL");
    fattn_ctx_clear(ctx);
    if (!ctx->vt->set_stream) {
        if (!native_stream) return FATTN_OK;
        return fattn_ctx_fail(ctx, FATTN_ERR_UNSUPPORTED,
                              "backend '%s' has no streams or queues; only NULL is accepted",
                              ctx->vt->name);
    }
    return ctx->vt->set_stream(ctx->state, native_stream, &ctx->msg);
}

/* A fault a kernel recorded in a table it read (src/seam/backend.h,
 * fattn_ragged), reported by the first synchronising call after it. */
static fattn_status take_fault(fattn_context *ctx) {
    return ctx->vt->take_fault ? ctx->vt->take_fault(ctx->state, &ctx->msg) : FATTN_OK;
}

fattn_status fattn_context_synchronize(fattn_context *ctx) {
    if (!ctx) return fattn_ctx_fail(NULL, FATTN_ERR_NULL_POINTER, "ctx is NULL");
    fattn_ctx_clear(ctx);
    fattn_status st = ctx->vt->synchronize ? ctx->vt->synchronize(ctx->state, &ctx->msg) : FATTN_OK;
    return st == FATTN_OK ? take_fault(ctx) : st;
}

fattn_status fattn_context_device_memory(fattn_context *ctx, uint64_t *used, uint64_t *total) {
    if (!ctx) return fattn_ctx_fail(NULL, FATTN_ERR_NULL_POINTER, "ctx is NULL");
    fattn_ctx_clear(ctx);
    if (!used || !total)
        return fattn_ctx_fail(ctx, FATTN_ERR_NULL_POINTER, "used or total is NULL");
    *used = *total = 0;
    if (!ctx->vt->device_memory)
        return fattn_ctx_fail(ctx, FATTN_ERR_UNSUPPORTED,
                              "backend '%s' cannot measure device memory", ctx->vt->name);
    return ctx->vt->device_memory(ctx->state, used, total, &ctx->msg);
}

/* ---- Buffers ---------------------------------------------------------------- */

static fattn_status buffer_new(fattn_context *ctx, void *native, size_t bytes, int read_only,
                               fattn_buffer **out) {
    if (!ctx) return fattn_ctx_fail(NULL, FATTN_ERR_NULL_POINTER, "ctx is NULL");
    fattn_ctx_clear(ctx);
    if (!out)
        return fattn_ctx_fail(ctx, FATTN_ERR_NULL_POINTER, "out (the buffer pointer) is NULL");
    *out = NULL;
    if (bytes == 0) return fattn_ctx_fail(ctx, FATTN_ERR_INVALID_SIZE, "buffer size is 0 bytes");
    fattn_buffer *b = calloc(1, sizeof *b);
    if (!b) return fattn_ctx_fail(ctx, FATTN_ERR_OUT_OF_MEMORY, "cannot allocate a buffer object");
    fattn_status st;
    if (native) {
        st = ctx->vt->buffer_wrap
                 ? ctx->vt->buffer_wrap(ctx->state, native, bytes, &b->mem, &ctx->msg)
                 : fattn_ctx_fail(ctx, FATTN_ERR_UNSUPPORTED, "backend '%s' cannot wrap buffers",
                                  ctx->vt->name);
    } else {
        st = ctx->vt->buffer_alloc(ctx->state, bytes, &b->mem, &ctx->msg);
    }
    if (st != FATTN_OK) {
        free(b);
        return st;
    }
    b->ctx = ctx;
    b->bytes = bytes;
    b->owned = native == NULL;
    b->read_only = read_only;
    ctx->refs++;
    *out = b;
    return FATTN_OK;
}

fattn_status fattn_buffer_alloc(fattn_context *ctx, size_t bytes, fattn_buffer **out) {
    return buffer_new(ctx, NULL, bytes, 0, out);
}

static fattn_status wrap(fattn_context *ctx, const void *native, size_t bytes, int read_only,
                         fattn_buffer **out) {
    if (ctx && !native) {
        fattn_ctx_clear(ctx);
        if (out) *out = NULL;
        return fattn_ctx_fail(ctx, FATTN_ERR_NULL_POINTER, "native (the memory to wrap) is NULL");
    }
    /* The backend never writes through a read-only wrapper: the core refuses
     * it as an output and as a copy target. */
    return buffer_new(ctx, (void *)(uintptr_t)native, bytes, read_only, out);
}

fattn_status fattn_buffer_wrap(fattn_context *ctx, void *native, size_t bytes, fattn_buffer **out) {
    return wrap(ctx, native, bytes, 0, out);
}

fattn_status fattn_buffer_wrap_const(fattn_context *ctx, const void *native, size_t bytes,
                                     fattn_buffer **out) {
    return wrap(ctx, native, bytes, 1, out);
}

void fattn_buffer_free(fattn_buffer *buf) {
    if (!buf) return;
    fattn_context *ctx = buf->ctx;
    ctx->vt->buffer_free(ctx->state, buf->mem, buf->owned);
    free(buf);
    fattn_context_release(ctx);
}

/* Checks [offset, offset + bytes) against the buffer. */
static fattn_status check_range(fattn_buffer *buf, size_t offset, const void *host, size_t bytes,
                                const char *what) {
    if (!host && bytes)
        return fattn_ctx_fail(buf->ctx, FATTN_ERR_NULL_POINTER, "%s host pointer is NULL", what);
    if (offset > buf->bytes || bytes > buf->bytes - offset)
        return fattn_ctx_fail(buf->ctx, FATTN_ERR_OUT_OF_BOUNDS,
                              "%s of %zu bytes at offset %zu reaches past the buffer's %zu bytes",
                              what, bytes, offset, buf->bytes);
    return FATTN_OK;
}

fattn_status fattn_buffer_write(fattn_buffer *buf, size_t offset, const void *src, size_t bytes) {
    if (!buf) return fattn_ctx_fail(NULL, FATTN_ERR_NULL_POINTER, "buf is NULL");
    fattn_ctx_clear(buf->ctx);
    if (buf->read_only)
        return fattn_ctx_fail(
            buf->ctx, FATTN_ERR_INVALID_ARGUMENT,
            "buf wraps read-only memory (fattn_buffer_wrap_const): it cannot be written");
    fattn_status st = check_range(buf, offset, src, bytes, "write");
    if (st != FATTN_OK || bytes == 0) return st;
    return buf->ctx->vt->buffer_write(buf->ctx->state, buf->mem, offset, src, bytes,
                                      &buf->ctx->msg);
}

fattn_status fattn_buffer_read(fattn_buffer *buf, size_t offset, void *dst, size_t bytes) {
    if (!buf) return fattn_ctx_fail(NULL, FATTN_ERR_NULL_POINTER, "buf is NULL");
    fattn_ctx_clear(buf->ctx);
    fattn_status st = check_range(buf, offset, dst, bytes, "read");
    if (st != FATTN_OK || bytes == 0) return st;
    st = buf->ctx->vt->buffer_read(buf->ctx->state, buf->mem, offset, dst, bytes, &buf->ctx->msg);
    return st == FATTN_OK ? take_fault(buf->ctx) : st;
}

size_t fattn_buffer_size(const fattn_buffer *buf) { return buf ? buf->bytes : 0; }

void *fattn_buffer_native(const fattn_buffer *buf) {
    return buf ? buf->ctx->vt->buffer_native(buf->ctx->state, buf->mem) : NULL;
}

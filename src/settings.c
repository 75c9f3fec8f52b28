/* Settings resolution: an explicit API value wins, then the environment
 * variable, then the default. The strings are copied so that a caller may
 * free its own after fattn_context_create_with returns. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "env.h"
#include "settings.h"

/* A copy of v kept by the store, or NULL for NULL; 0 when out of memory. */
static int keep(fattn_settings_store *st, const char *v, const char **out) {
    *out = NULL;
    if (!v) return 1;
    if (st->count == (int)(sizeof st->owned / sizeof st->owned[0])) return 0;
    char *c = strdup(v);
    if (!c) return 0;
    st->owned[st->count++] = c;
    *out = c;
    return 1;
}

/* An API string wins ("" meaning "none"); else the environment's. */
static const char *pick(const char *api, const char *env) {
    if (api) return *api ? api : NULL;
    return env;
}

/* Every FATTN_DECODE_TUNE knob a backend reads (fattn_tune_value): a
 * backend that adds one adds it here, so a misspelt name or value is an
 * error rather than a silent default. */
static const char *const decode_knobs[] = {
    /* CUDA */
    "min_seq_kv", "min_keys", "max_splits", "slack_pm", "blocks_per_sm", "pdl",
    /* OpenCL (min_keys, max_splits and min_seq_kv too) */
    "waves", "nt", "tile", "bkv", "br", "vec", "vr",
    /* OpenCL's matrix decode kernel (vec and waves too) */
    "mma", "nw", "stages", "kw"};
/* FATTN_OPENCL_MATRIX_TUNE's, read by backends/opencl/ocl_mma.c. */
static const char *const matrix_knobs[] = {"bm", "bn", "nw", "qreg", "stages", "fold", "spec", "pad", "local"};

/* The list's syntax: name=integer, comma-separated, known names only, each
 * at most once (a reader takes a name's first value, so a second one would
 * be ignored without a word). */
static fattn_status check_tune(const char *var, const char *list, const char *const *knobs,
                               size_t nknobs, fattn_msg *msg) {
    unsigned long long seen = 0; /* bit i: knobs[i] given (at most 64 knobs) */
    for (const char *p = list; p && *p;) {
        const char *eq = strchr(p, '='), *comma = strchr(p, ',');
        const size_t len = comma ? (size_t)(comma - p) : strlen(p);
        int known = 0;
        if (eq && (!comma || eq < comma))
            for (size_t i = 0; i < nknobs && i < 64; i++)
                if (strlen(knobs[i]) == (size_t)(eq - p) &&
                    !strncmp(p, knobs[i], (size_t)(eq - p))) {
                    if (seen >> i & 1)
                        return fattn_fail(msg, FATTN_ERR_ENVIRONMENT,
                                          "%s names %s twice; give each name once", var,
                                          knobs[i]);
                    seen |= 1ull << i;
                    known = 1;
                }
        char *end = NULL;
        errno = 0;
        if (known) (void)strtol(eq + 1, &end, 10);
        if (!known || end == eq + 1 || errno == ERANGE || (*end != ',' && *end)) {
            char names[160] = "";
            for (size_t i = 0; i < nknobs; i++) {
                if (i) strcat(names, ", ");
                strcat(names, knobs[i]);
            }
            return fattn_fail(msg, FATTN_ERR_ENVIRONMENT,
                              "%s: \"%.*s\" is not name=integer with a known name (%s); unset "
                              "it for the defaults",
                              var, (int)(len > 64 ? 64 : len), p, names);
        }
        p = comma ? comma + 1 : NULL;
    }
    return FATTN_OK;
}

fattn_status fattn_settings_resolve(const fattn_context_params *prm, fattn_backend_kind kind,
                                    fattn_settings_store *out, fattn_msg *msg) {
    memset(out, 0, sizeof *out);
    fattn_settings *s = &out->s;
    if (kind == FATTN_BACKEND_CPU) {
        if (prm && prm->cpu_threads != 0) {
            if (prm->cpu_threads < 1 || prm->cpu_threads > 1024)
                return fattn_fail(msg, FATTN_ERR_INVALID_ARGUMENT,
                                  "params->cpu_threads = %d is not 0 (the default) or 1..1024",
                                  prm->cpu_threads);
            s->cpu_threads = prm->cpu_threads;
        } else {
            fattn_status st = fattn_env_cpu_threads(&s->cpu_threads, msg);
            if (st != FATTN_OK) return st;
        }
    }
    const char *cache = fattn_env_cache_dir(), *origin = cache ? "FATTN_CACHE_DIR" : NULL;
    if (prm && prm->cache_dir) {
        cache = prm->cache_dir;
        origin = "fattn_context_params.cache_dir";
    }
    int ok = keep(out, pick(prm ? prm->opencl_platform : NULL, fattn_env_opencl_platform()),
                  &s->opencl_platform) &&
             keep(out, pick(prm ? prm->opencl_device : NULL, fattn_env_opencl_device()),
                  &s->opencl_device) &&
             keep(out, cache, &s->cache_dir) && keep(out, origin, &s->cache_dir_origin) &&
             keep(out, fattn_env_home(), &s->home) &&
             keep(out, fattn_env_xdg_cache(), &s->xdg_cache) &&
             keep(out, fattn_env_kernel_dir(), &s->kernel_dir) &&
             keep(out, fattn_env_opencl_options(), &s->opencl_options) &&
             keep(out, fattn_env_opencl_tiles(), &s->opencl_tiles) &&
             keep(out, fattn_env_decode_tune(), &s->decode_tune) &&
             keep(out, fattn_env_opencl_matrix(), &s->opencl_matrix) &&
             keep(out, fattn_env_opencl_matrix_tune(), &s->opencl_matrix_tune) &&
             keep(out, fattn_env_cpu_isa(), &s->cpu_isa) &&
             keep(out, fattn_env_cuda_kernel(), &s->cuda_kernel);
    s->cuda_small_tiles = fattn_env_cuda_small_tiles();
    const char *mx = s->opencl_matrix;
    static const char *const matrix_modes[] = {"auto", "off", "emulate", "emulate-nv",
                                               "emulate-rdna", "emulate-cdna", "emulate-xe",
                                               "emulate-xe8"};
    int known = !mx;
    for (size_t i = 0; i < sizeof matrix_modes / sizeof matrix_modes[0] && !known; i++)
        known = !strcmp(mx, matrix_modes[i]);
    if (ok && !known) {
        const fattn_status st = fattn_fail(msg, FATTN_ERR_ENVIRONMENT,
                                           "FATTN_OPENCL_MATRIX='%.64s' is not auto, off, "
                                           "emulate (= emulate-nv), emulate-rdna, "
                                           "emulate-cdna, emulate-xe or emulate-xe8",
                                           mx);
        fattn_settings_free(out);
        return st;
    }
    const char *ck = s->cuda_kernel;
    if (ok && ck && strcmp(ck, "auto") && strcmp(ck, "wgmma") && strcmp(ck, "mma")) {
        const fattn_status st = fattn_fail(msg, FATTN_ERR_ENVIRONMENT,
                                           "FATTN_CUDA_KERNEL='%.64s' is not auto, wgmma (the "
                                           "Hopper kernel) or mma (mma.sync)",
                                           ck);
        fattn_settings_free(out);
        return st;
    }
    if (ok) {
        fattn_status st = check_tune("FATTN_DECODE_TUNE", s->decode_tune, decode_knobs,
                                     sizeof decode_knobs / sizeof decode_knobs[0], msg);
        if (st == FATTN_OK)
            st = check_tune("FATTN_OPENCL_MATRIX_TUNE", s->opencl_matrix_tune, matrix_knobs,
                            sizeof matrix_knobs / sizeof matrix_knobs[0], msg);
        if (st != FATTN_OK) {
            fattn_settings_free(out);
            return st;
        }
    }
    if (!ok) {
        fattn_settings_free(out);
        return fattn_fail(msg, FATTN_ERR_OUT_OF_MEMORY, "cannot copy the context's settings");
    }
    return FATTN_OK;
}

void fattn_settings_free(fattn_settings_store *store) {
    for (int i = 0; i < store->count; i++) free(store->owned[i]);
    memset(store, 0, sizeof *store);
}

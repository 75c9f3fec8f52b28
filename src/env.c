/* The only file that reads the environment; README.md has the table. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "env.h"

static const char *env_value(const char *name) {
    const char *v = getenv(name);
    return (v && *v) ? v : NULL;
}

fattn_status fattn_env_backend(fattn_backend_kind *out, int *is_set, fattn_msg *msg) {
    const char *v = env_value("FATTN_BACKEND");
    *is_set = 0;
    if (!v) return FATTN_OK;
    if (!fattn_parse_backend(v, out))
        return fattn_fail(
            msg, FATTN_ERR_UNKNOWN_BACKEND,
            "FATTN_BACKEND='%s' is not a backend; valid values: auto, cpu, cuda, opencl", v);
    *is_set = 1;
    return FATTN_OK;
}

/* Parses a whole decimal integer in [lo, hi]. */
static int parse_int(const char *s, long lo, long hi, long *out) {
    char *end = NULL;
    errno = 0;
    long x = strtol(s, &end, 10);
    if (errno || end == s || *end != '\0' || x < lo || x > hi) return 0;
    *out = x;
    return 1;
}

fattn_status fattn_env_device(int *out, int *is_set, fattn_msg *msg) {
    const char *v = env_value("FATTN_DEVICE");
    long x;
    *is_set = 0;
    if (!v) return FATTN_OK;
    if (!parse_int(v, 0, 1 << 20, &x))
        return fattn_fail(msg, FATTN_ERR_ENVIRONMENT,
                          "FATTN_DEVICE='%s' is not a device index (a non-negative integer)", v);
    *out = (int)x;
    *is_set = 1;
    return FATTN_OK;
}

fattn_status fattn_env_cpu_threads(int *out, fattn_msg *msg) {
    const char *v = env_value("FATTN_CPU_THREADS");
    long x;
    *out = 0;
    if (!v) return FATTN_OK;
    if (!parse_int(v, 1, 1024, &x))
        return fattn_fail(msg, FATTN_ERR_ENVIRONMENT,
                          "FATTN_CPU_THREADS='%s' is not a thread count in 1..1024", v);
    *out = (int)x;
    return FATTN_OK;
}

const char *fattn_env_module_dir(void) { return env_value("FATTN_MODULE_DIR"); }

int fattn_env_cuda_small_tiles(void) {
    const char *v = env_value("FATTN_CUDA_SMALL_TILES");
    return v && strcmp(v, "1") == 0;
}

const char *fattn_env_cuda_kernel(void) { return env_value("FATTN_CUDA_KERNEL"); }

const char *fattn_env_opencl_platform(void) { return env_value("FATTN_OPENCL_PLATFORM"); }
const char *fattn_env_opencl_device(void) { return env_value("FATTN_OPENCL_DEVICE"); }
const char *fattn_env_cache_dir(void) { return env_value("FATTN_CACHE_DIR"); }
const char *fattn_env_kernel_dir(void) { return env_value("FATTN_KERNEL_DIR"); }
const char *fattn_env_opencl_tiles(void) { return env_value("FATTN_OPENCL_TILES"); }
const char *fattn_env_decode_tune(void) { return env_value("FATTN_DECODE_TUNE"); }
const char *fattn_env_cpu_isa(void) { return env_value("FATTN_CPU_ISA"); }
const char *fattn_env_opencl_options(void) { return env_value("FATTN_OPENCL_OPTIONS"); }
const char *fattn_env_opencl_matrix(void) { return env_value("FATTN_OPENCL_MATRIX"); }
const char *fattn_env_opencl_matrix_tune(void) { return env_value("FATTN_OPENCL_MATRIX_TUNE"); }
const char *fattn_env_home(void) { return env_value("HOME"); }
const char *fattn_env_xdg_cache(void) { return env_value("XDG_CACHE_HOME"); }

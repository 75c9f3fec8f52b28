/* Version, status strings and the small name tables of the public API. */

#include "internal.h"

#define FATTN_STR2_(x) #x
#define FATTN_STR_(x) FATTN_STR2_(x)

unsigned fattn_version_number(void) { return FATTN_VERSION_NUMBER; }

const char *fattn_version_string(void) {
    return FATTN_STR_(FATTN_VERSION_MAJOR) "." FATTN_STR_(FATTN_VERSION_MINOR) "." FATTN_STR_(
        FATTN_VERSION_PATCH);
}

const char *fattn_status_string(fattn_status status) {
    switch (status) {
#define FATTN_STATUS_CASE_(name, value, text)                                                      \
    case FATTN_##name: return text;
        FATTN_STATUS_MAP(FATTN_STATUS_CASE_)
#undef FATTN_STATUS_CASE_
    default: return "unknown status";
    }
}

size_t fattn_dtype_size(fattn_dtype dtype) {
    switch (dtype) {
    case FATTN_F32: return 4;
    case FATTN_F16: return 2;
    case FATTN_BF16: return 2;
    case FATTN_I32: return 4;
    default: return 0;
    }
}

const char *fattn_dtype_name(fattn_dtype dtype) {
    switch (dtype) {
    case FATTN_F32: return "f32";
    case FATTN_F16: return "f16";
    case FATTN_BF16: return "bf16";
    case FATTN_I32: return "i32";
    default: return "invalid";
    }
}

const char *fattn_backend_name(fattn_backend_kind kind) {
    if ((int)kind < 0 || kind >= FATTN_BACKEND_COUNT) return "unknown";
    return fattn_backend_names[kind];
}

fattn_status fattn_backend_from_name(const char *name, fattn_backend_kind *out) {
    fattn_ctx_clear(NULL);
    if (!name || !out) return fattn_ctx_fail(NULL, FATTN_ERR_NULL_POINTER, "name or out is NULL");
    if (fattn_parse_backend(name, out)) return FATTN_OK;
    return fattn_ctx_fail(NULL, FATTN_ERR_UNKNOWN_BACKEND,
                          "'%s' is not a backend; valid names: auto, cpu, cuda, opencl", name);
}

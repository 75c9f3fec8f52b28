/* OpenCL platform and device discovery: every device of every platform, GPUs
 * first (so device 0 is a GPU when there is one), filtered by the platform
 * and device filters the core resolved (fattn_context_params.opencl_platform
 * and .opencl_device, else FATTN_OPENCL_PLATFORM and FATTN_OPENCL_DEVICE: an
 * index or a case-insensitive name substring). */
#define _GNU_SOURCE
#include <ctype.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ocl_common.h"

const char *ocl_error_name(cl_int err) {
    switch (err) {
#define E(x)                                                                                       \
    case x: return #x;
        E(CL_DEVICE_NOT_FOUND)
        E(CL_DEVICE_NOT_AVAILABLE) E(CL_COMPILER_NOT_AVAILABLE) E(CL_MEM_OBJECT_ALLOCATION_FAILURE)
            E(CL_OUT_OF_RESOURCES) E(CL_OUT_OF_HOST_MEMORY) E(CL_BUILD_PROGRAM_FAILURE) E(
                CL_INVALID_VALUE) E(CL_INVALID_DEVICE) E(CL_INVALID_CONTEXT)
                E(CL_INVALID_COMMAND_QUEUE) E(CL_INVALID_MEM_OBJECT) E(CL_INVALID_BINARY) E(
                    CL_INVALID_BUILD_OPTIONS) E(CL_INVALID_PROGRAM) E(CL_INVALID_PROGRAM_EXECUTABLE)
                    E(CL_INVALID_KERNEL_NAME) E(CL_INVALID_KERNEL) E(CL_INVALID_ARG_INDEX)
                        E(CL_INVALID_ARG_VALUE) E(CL_INVALID_ARG_SIZE) E(CL_INVALID_KERNEL_ARGS) E(
                            CL_INVALID_WORK_DIMENSION) E(CL_INVALID_WORK_GROUP_SIZE)
                            E(CL_INVALID_WORK_ITEM_SIZE) E(CL_INVALID_GLOBAL_OFFSET) E(
                                CL_INVALID_EVENT) E(CL_INVALID_OPERATION) E(CL_INVALID_BUFFER_SIZE)
                                E(CL_INVALID_GLOBAL_WORK_SIZE) E(CL_INVALID_PLATFORM)
                                    E(CL_INVALID_DEVICE_TYPE) E(CL_INVALID_PROPERTY)
                                        E(CL_INVALID_QUEUE_PROPERTIES) E(CL_INVALID_HOST_PTR)
                                            E(CL_MISALIGNED_SUB_BUFFER_OFFSET)
                                                E(CL_PROFILING_INFO_NOT_AVAILABLE)
                                                    E(CL_INVALID_COMPILER_OPTIONS)
                                                        E(CL_INVALID_LINKER_OPTIONS)
                                                            E(CL_LINK_PROGRAM_FAILURE) case -1001
            : return "CL_PLATFORM_NOT_FOUND_KHR";
#undef E
    default: return "unknown OpenCL error";
    }
}

/* 1 when `name` matches the filter: the index as a number, or a substring. */
static int matches(const char *filter, int index, const char *name) {
    if (!filter) return 1;
    char *end;
    long n = strtol(filter, &end, 10);
    if (*filter && *end == '\0') return n == index;
    return strcasestr(name, filter) != NULL;
}

static int type_rank(cl_device_type t) {
    if (t & CL_DEVICE_TYPE_GPU) return 0;
    if (t & CL_DEVICE_TYPE_ACCELERATOR) return 1;
    return 2; /* CPUs and anything else last */
}

/* Global queries (probe, device_name, open's device lookup) may run on many
 * threads at once, and the first of them initialises the ICD loader and the
 * drivers: eight threads doing that together crashed inside PoCL, or were
 * told "no OpenCL device found" all but one. Every enumeration and device
 * query made outside a context holds this lock. */
static pthread_mutex_t enum_lock = PTHREAD_MUTEX_INITIALIZER;

/* The first failing call of an enumeration, so that the reason names the
 * driver's code instead of only "no device". A platform's "no device"
 * (CL_DEVICE_NOT_FOUND, also what PoCL says when its devices failed to
 * start) gives way to any other error. */
typedef struct first_error {
    cl_int err;
    char call[64];
    cl_uint platform;
} first_error;

static void keep_error(first_error *e, cl_int err, const char *call, cl_uint platform) {
    const int replaceable =
        e->err == CL_SUCCESS || (e->err == CL_DEVICE_NOT_FOUND && err != CL_DEVICE_NOT_FOUND);
    if (err == CL_SUCCESS || !replaceable) return;
    e->err = err;
    snprintf(e->call, sizeof e->call, "%s", call);
    e->platform = platform;
}

/* A filter, or NULL for none: NULL and "" both mean any. */
static const char *filter_of(const char *f) { return f && *f ? f : NULL; }

static int list_locked(const fattn_settings *settings, ocl_device_entry *out, int max, char *reason,
                       size_t reason_len) {
    cl_platform_id plats[16];
    cl_uint np = 0;
    cl_int err = clGetPlatformIDs(16, plats, &np);
    reason[0] = '\0';
    if (err != CL_SUCCESS || np == 0) {
        snprintf(reason, reason_len, "no OpenCL platform (clGetPlatformIDs: %s, %d)",
                 err == CL_SUCCESS ? "none listed" : ocl_error_name(err), (int)err);
        return 0;
    }
    if (np > 16) np = 16;
    const char *pf = filter_of(settings->opencl_platform), *df = filter_of(settings->opencl_device);
    ocl_device_entry all[64];
    char names[64][256];
    int n = 0, seen = 0;
    first_error first = {CL_SUCCESS, "", 0};
    for (cl_uint p = 0; p < np; p++) {
        char pname[256] = "";
        err = clGetPlatformInfo(plats[p], CL_PLATFORM_NAME, sizeof pname, pname, NULL);
        keep_error(&first, err, "clGetPlatformInfo(CL_PLATFORM_NAME)", p);
        if (err != CL_SUCCESS || !matches(pf, (int)p, pname)) continue;
        cl_device_id devs[16];
        cl_uint nd = 0;
        err = clGetDeviceIDs(plats[p], CL_DEVICE_TYPE_ALL, 16, devs, &nd);
        keep_error(&first, err, "clGetDeviceIDs", p);
        if (err != CL_SUCCESS) continue;
        for (cl_uint d = 0; d < nd && d < 16 && n < 64; d++) {
            all[n].platform = plats[p];
            all[n].device = devs[d];
            names[n][0] = '\0';
            seen++;
            /* A device that cannot say what it is is not offered. */
            err = clGetDeviceInfo(devs[d], CL_DEVICE_TYPE, sizeof all[n].type, &all[n].type, NULL);
            if (err == CL_SUCCESS)
                err = clGetDeviceInfo(devs[d], CL_DEVICE_NAME, sizeof names[n], names[n], NULL);
            keep_error(&first, err, "clGetDeviceInfo", p);
            n += err == CL_SUCCESS;
        }
    }
    /* Stable order: GPUs, accelerators, then CPUs; the device filter then
     * applies to that order's indices and names. */
    int count = 0, listed = 0;
    for (int rank = 0; rank < 3; rank++)
        for (int i = 0; i < n; i++) {
            if (type_rank(all[i].type) != rank) continue;
            if (matches(df, listed++, names[i]) && count < max) out[count++] = all[i];
        }
    if (count == 0) {
        /* The filters come from the API or the environment; the reason
         * names both places. */
        int w = snprintf(
            reason, reason_len, "no OpenCL device %s%s%s%s%s%s%s (%u platform%s, %d device%s seen)",
            pf || df ? "matches" : "found", pf ? " platform filter '" : "", pf ? pf : "",
            pf ? "' (FATTN_OPENCL_PLATFORM or opencl_platform)" : "", df ? " device filter '" : "",
            df ? df : "", df ? "' (FATTN_OPENCL_DEVICE or opencl_device)" : "", np,
            np == 1 ? "" : "s", seen, seen == 1 ? "" : "s");
        if (first.err != CL_SUCCESS && w > 0 && (size_t)w < reason_len)
            snprintf(reason + w, reason_len - (size_t)w, "; %s on platform %u failed: %s (%d)",
                     first.call, first.platform, ocl_error_name(first.err), (int)first.err);
    }
    return count;
}

int ocl_list_devices(const fattn_settings *settings, ocl_device_entry *out, int max, char *reason,
                     size_t reason_len) {
    pthread_mutex_lock(&enum_lock);
    const int n = list_locked(settings, out, max, reason, reason_len);
    pthread_mutex_unlock(&enum_lock);
    return n;
}

fattn_status ocl_native_entry(cl_device_id dev, ocl_device_entry *out, fattn_msg *msg) {
    pthread_mutex_lock(&enum_lock);
    cl_int err =
        clGetDeviceInfo(dev, CL_DEVICE_PLATFORM, sizeof out->platform, &out->platform, NULL);
    const char *call = "clGetDeviceInfo(CL_DEVICE_PLATFORM)";
    if (err == CL_SUCCESS) {
        err = clGetDeviceInfo(dev, CL_DEVICE_TYPE, sizeof out->type, &out->type, NULL);
        call = "clGetDeviceInfo(CL_DEVICE_TYPE)";
    }
    pthread_mutex_unlock(&enum_lock);
    if (err != CL_SUCCESS)
        return fattn_fail(msg, ocl_status_of(err), "native_device: %s failed: %s (%d)", call,
                          ocl_error_name(err), (int)err);
    out->device = dev;
    return FATTN_OK;
}

void ocl_describe(cl_device_id dev, char *buf, size_t len) {
    char name[256] = "", version[128] = "", driver[128] = "";
    pthread_mutex_lock(&enum_lock);
    if (clGetDeviceInfo(dev, CL_DEVICE_NAME, sizeof name, name, NULL) != CL_SUCCESS)
        snprintf(name, sizeof name, "?");
    if (clGetDeviceInfo(dev, CL_DEVICE_VERSION, sizeof version, version, NULL) != CL_SUCCESS)
        snprintf(version, sizeof version, "?");
    if (clGetDeviceInfo(dev, CL_DRIVER_VERSION, sizeof driver, driver, NULL) != CL_SUCCESS)
        snprintf(driver, sizeof driver, "?");
    pthread_mutex_unlock(&enum_lock);
    /* Trim the "OpenCL 3.0 PoCL HSTR: ..." style tails to the version number. */
    char *sp = strchr(version + (strncmp(version, "OpenCL ", 7) == 0 ? 7 : 0), ' ');
    if (sp) *sp = '\0';
    snprintf(buf, len, "%s (%s, driver %s)", name, version, driver);
}

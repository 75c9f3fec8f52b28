/* Kernel programs: sources (embedded, or from FATTN_KERNEL_DIR), and a
 * two-level cache of compiled programs: in memory per context, and on disk
 * keyed by a hash of source + options + device + driver. A disk entry carries
 * its key and a checksum; one that fails either, or fails to load, is rebuilt
 * from source and rewritten, never trusted. Writes go to a temporary file
 * that is then renamed, so readers never see half a file. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cl_common.h"
#include "env.h"

/* ---- Sources ----------------------------------------------------------------- */

/* The source of kernel file `file`: malloc'd, NUL-terminated. From
 * FATTN_KERNEL_DIR when it is set, unless `optional` and the file is not
 * there; else the embedded copy. */
static fattn_status load_source(const char *file, int optional, char **out, size_t *len, fattn_msg *msg) {
    const char *dir = fattn_env_kernel_dir();
    char probe[4096];
    if (dir && optional) {
        snprintf(probe, sizeof probe, "%s/%s", dir, file);
        if (access(probe, R_OK) != 0) dir = NULL;
    }
    if (dir) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, file);
        FILE *f = fopen(path, "rb");
        if (!f) return fattn_fail(msg, FATTN_ERR_BUILD, "FATTN_KERNEL_DIR: cannot open %s: %s", path, strerror(errno));
        fseek(f, 0, SEEK_END);
        long n = ftell(f);
        fseek(f, 0, SEEK_SET);
        char *s = n >= 0 ? malloc((size_t)n + 1) : NULL;
        if (!s || fread(s, 1, (size_t)n, f) != (size_t)n) {
            free(s);
            fclose(f);
            return fattn_fail(msg, FATTN_ERR_BUILD, "FATTN_KERNEL_DIR: cannot read %s", path);
        }
        fclose(f);
        s[n] = '\0';
        *out = s;
        *len = (size_t)n;
        return FATTN_OK;
    }
    for (size_t i = 0; i < cl_embedded_source_count; i++) {
        if (strcmp(cl_embedded_sources[i].name, file) != 0) continue;
        char *s = malloc(cl_embedded_sources[i].size + 1);
        if (!s) return fattn_fail(msg, FATTN_ERR_OUT_OF_MEMORY, "cannot copy kernel source");
        memcpy(s, cl_embedded_sources[i].data, cl_embedded_sources[i].size);
        s[cl_embedded_sources[i].size] = '\0';
        *out = s;
        *len = cl_embedded_sources[i].size;
        return FATTN_OK;
    }
    return fattn_fail(msg, FATTN_ERR_INTERNAL, "kernel file %s is not embedded", file);
}

/* What the compiler gets for `file`: storage.cl (the storage types every
 * kernel shares; a FATTN_KERNEL_DIR without it uses the embedded one), then
 * the file. */
static fattn_status program_source(const char *file, char **out, size_t *len, fattn_msg *msg) {
    char *common = NULL, *own = NULL;
    size_t clen = 0, olen = 0;
    fattn_status st = load_source(file, 0, &own, &olen, msg);
    if (st == FATTN_OK) st = load_source("storage.cl", 1, &common, &clen, msg);
    char *both = st == FATTN_OK ? malloc(clen + 1 + olen + 1) : NULL;
    if (st == FATTN_OK && !both) st = fattn_fail(msg, FATTN_ERR_OUT_OF_MEMORY, "cannot join kernel sources");
    if (both) {
        memcpy(both, common, clen);
        both[clen] = '\n';
        memcpy(both + clen + 1, own, olen + 1);
        *out = both;
        *len = clen + 1 + olen;
    }
    free(common);
    free(own);
    return st;
}

/* ---- Disk cache ---------------------------------------------------------------- */

static uint64_t fnv1a(uint64_t h, const void *data, size_t n) {
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

static uint64_t fnv_str(uint64_t h, const char *s) { return fnv1a(h, s, strlen(s) + 1); }

typedef struct cache_key {
    uint64_t lo, hi;
} cache_key;

/* Everything that changes the binary: the source, the options, the device and
 * its driver. Two differently seeded hashes make a 128-bit key. Returns 0
 * when the driver cannot describe the device: then the disk cache is not used. */
static int make_key(const char *src, size_t len, const char *options, cl_device_id dev, cache_key *out) {
    char name[256] = "", dver[256] = "", drv[256] = "", pver[256] = "";
    cl_platform_id plat = NULL;
    if (clGetDeviceInfo(dev, CL_DEVICE_NAME, sizeof name, name, NULL) != CL_SUCCESS ||
        clGetDeviceInfo(dev, CL_DEVICE_VERSION, sizeof dver, dver, NULL) != CL_SUCCESS ||
        clGetDeviceInfo(dev, CL_DRIVER_VERSION, sizeof drv, drv, NULL) != CL_SUCCESS ||
        clGetDeviceInfo(dev, CL_DEVICE_PLATFORM, sizeof plat, &plat, NULL) != CL_SUCCESS ||
        clGetPlatformInfo(plat, CL_PLATFORM_VERSION, sizeof pver, pver, NULL) != CL_SUCCESS)
        return 0;
    cache_key k = {0xcbf29ce484222325ull, 0x84222325cbf29ce4ull};
    const char *parts[] = {options, name, dver, drv, pver};
    k.lo = fnv1a(k.lo, src, len);
    k.hi = fnv1a(k.hi ^ 0x9e3779b97f4a7c15ull, src, len);
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
        k.lo = fnv_str(k.lo, parts[i]);
        k.hi = fnv_str(k.hi, parts[i]);
    }
    *out = k;
    return 1;
}

/* The cache directory, created if needed; 0 when disabled or unusable. */
static int cache_dir(char *dir, size_t len) {
    const char *env = fattn_env_cache_dir(), *xdg = fattn_env_xdg_cache(), *home = fattn_env_home();
    if (env && (strcmp(env, "off") == 0 || strcmp(env, "0") == 0)) return 0;
    if (env) snprintf(dir, len, "%s", env);
    else if (xdg) snprintf(dir, len, "%s/fattn", xdg);
    else if (home) snprintf(dir, len, "%s/.cache/fattn", home);
    else return 0;
    /* mkdir -p, one component at a time. */
    for (char *p = dir + 1; *p; p++) {
        if (*p != '/') continue;
        *p = '\0';
        mkdir(dir, 0755);
        *p = '/';
    }
    return mkdir(dir, 0755) == 0 || errno == EEXIST;
}

#define CACHE_MAGIC "FATTNCL1"

typedef struct cache_header {
    char magic[8];
    cache_key key;
    uint64_t size, checksum;
} cache_header;

/* 0 if the path does not fit. */
static int cache_path(char *path, size_t len, const char *dir, cache_key k) {
    int n = snprintf(path, len, "%s/%016llx%016llx.clbin", dir, (unsigned long long)k.hi,
                     (unsigned long long)k.lo);
    return n > 0 && (size_t)n < len;
}

/* The cached binary for k, malloc'd, or NULL if absent or damaged. */
static unsigned char *cache_read(const char *dir, cache_key k, size_t *size) {
    char path[4096];
    cache_header h;
    FILE *f = cache_path(path, sizeof path, dir, k) ? fopen(path, "rb") : NULL;
    if (!f) return NULL;
    unsigned char *bin = NULL;
    if (fread(&h, sizeof h, 1, f) == 1 && memcmp(h.magic, CACHE_MAGIC, 8) == 0 && h.key.lo == k.lo &&
        h.key.hi == k.hi && h.size > 0 && h.size < (1u << 30) && (bin = malloc(h.size)) &&
        fread(bin, 1, h.size, f) == h.size && fnv1a(0xcbf29ce484222325ull, bin, h.size) == h.checksum &&
        fgetc(f) == EOF) {
        fclose(f);
        *size = h.size;
        return bin;
    }
    free(bin);
    fclose(f);
    return NULL;
}

/* Best effort: a cache that cannot be written only costs a rebuild later. */
static void cache_write(const char *dir, cache_key k, const unsigned char *bin, size_t size) {
    char path[4096], tmp[4200];
    if (!cache_path(path, sizeof path, dir, k) ||
        snprintf(tmp, sizeof tmp, "%s.tmp.XXXXXX", path) >= (int)sizeof tmp)
        return;
    int fd = mkstemp(tmp);
    if (fd < 0) return;
    cache_header h;
    memcpy(h.magic, CACHE_MAGIC, 8);
    h.key = k;
    h.size = size;
    h.checksum = fnv1a(0xcbf29ce484222325ull, bin, size);
    FILE *f = fdopen(fd, "wb");
    int ok = f && fwrite(&h, sizeof h, 1, f) == 1 && fwrite(bin, 1, size, f) == size;
    if (f) ok = (fclose(f) == 0) && ok;
    else close(fd);
    if (!ok || rename(tmp, path) != 0) unlink(tmp);
}

/* ---- Building ------------------------------------------------------------------ */

static fattn_status build_failed(cl_program prog, cl_device_id dev, const char *file,
                                 const char *options, cl_int err, fattn_msg *msg) {
    char log[3072] = "";
    size_t n = 0;
    if (clGetProgramBuildInfo(prog, dev, CL_PROGRAM_BUILD_LOG, sizeof log - 1, log, &n) != CL_SUCCESS)
        snprintf(log, sizeof log, "(the driver gave no build log)");
    log[sizeof log - 1] = '\0';
    return fattn_fail(msg, FATTN_ERR_BUILD, "building %s with \"%s\" failed: %s (%d); build log:\n%s",
                      file, options, cl_error_name(err), (int)err, log);
}

static cl_program from_binary(cl_context ctx, cl_device_id dev, const unsigned char *bin, size_t size,
                              const char *options) {
    cl_int err, status;
    cl_program p = clCreateProgramWithBinary(ctx, 1, &dev, &size, &bin, &status, &err);
    if (err != CL_SUCCESS || status != CL_SUCCESS) {
        if (p) clReleaseProgram(p);
        return NULL;
    }
    if (clBuildProgram(p, 1, &dev, options, NULL, NULL) != CL_SUCCESS) {
        clReleaseProgram(p);
        return NULL;
    }
    return p;
}

static fattn_status build_program(cl_program_cache *cache, cl_context ctx, cl_device_id dev,
                                  const char *file, const char *options, cl_program *out,
                                  fattn_msg *msg) {
    char *src = NULL;
    size_t len = 0;
    fattn_status st = program_source(file, &src, &len, msg);
    if (st != FATTN_OK) return st;
    char dir[4096];
    cache_key key = {0, 0};
    const int use_disk = cache_dir(dir, sizeof dir) && make_key(src, len, options, dev, &key);
    if (use_disk) {
        size_t size;
        unsigned char *bin = cache_read(dir, key, &size);
        cl_program p = bin ? from_binary(ctx, dev, bin, size, options) : NULL;
        free(bin);
        if (p) {
            free(src);
            cache->disk_hits++;
            *out = p;
            return FATTN_OK;
        }
    }
    cl_int err;
    const char *srcs[1] = {src};
    cl_program p = clCreateProgramWithSource(ctx, 1, srcs, &len, &err);
    free(src);
    if (err != CL_SUCCESS)
        return fattn_fail(msg, FATTN_ERR_DEVICE, "clCreateProgramWithSource: %s (%d)", cl_error_name(err), (int)err);
    cache->builds++;
    if ((err = clBuildProgram(p, 1, &dev, options, NULL, NULL)) != CL_SUCCESS) {
        st = build_failed(p, dev, file, options, err, msg);
        clReleaseProgram(p);
        return st;
    }
    if (use_disk) {
        size_t size = 0;
        if (clGetProgramInfo(p, CL_PROGRAM_BINARY_SIZES, sizeof size, &size, NULL) == CL_SUCCESS && size) {
            unsigned char *bin = malloc(size);
            if (bin && clGetProgramInfo(p, CL_PROGRAM_BINARIES, sizeof bin, &bin, NULL) == CL_SUCCESS)
                cache_write(dir, key, bin, size);
            free(bin);
        }
    }
    *out = p;
    return FATTN_OK;
}

fattn_status cl_get_kernel(cl_program_cache *cache, cl_context ctx, cl_device_id dev,
                           const char *file, const char *name, const char *options,
                           cl_kernel *out, fattn_msg *msg) {
    /* FATTN_OPENCL_OPTIONS joins every build, and so every cache key. */
    char opts[512];
    const char *extra = fattn_env_opencl_options();
    if ((size_t)snprintf(opts, sizeof opts, "%s%s%s", options, extra ? " " : "", extra ? extra : "") >= sizeof opts)
        return fattn_fail(msg, FATTN_ERR_ENVIRONMENT, "FATTN_OPENCL_OPTIONS is too long (%zu characters)",
                          strlen(extra));
    options = opts;
    char full[sizeof opts + 128];
    snprintf(full, sizeof full, "%s|%s|%s", file, name, options);
    for (int i = 0; i < cache->count; i++)
        if (strcmp(cache->entries[i].options, full) == 0) {
            *out = cache->entries[i].kernel;
            return FATTN_OK;
        }
    if (cache->count == CL_MAX_PROGRAMS) {   /* full: drop the oldest */
        clReleaseKernel(cache->entries[0].kernel);
        clReleaseProgram(cache->entries[0].program);
        memmove(cache->entries, cache->entries + 1, sizeof cache->entries[0] * (CL_MAX_PROGRAMS - 1));
        cache->count--;
    }
    cl_program prog;
    fattn_status st = build_program(cache, ctx, dev, file, options, &prog, msg);
    if (st != FATTN_OK) return st;
    cl_int err;
    cl_kernel k = clCreateKernel(prog, name, &err);
    if (err != CL_SUCCESS) {
        clReleaseProgram(prog);
        return fattn_fail(msg, FATTN_ERR_BUILD, "clCreateKernel(%s) in %s: %s (%d)", name, file,
                          cl_error_name(err), (int)err);
    }
    cl_cached_program *e = &cache->entries[cache->count++];
    snprintf(e->options, sizeof e->options, "%s", full);
    e->program = prog;
    e->kernel = k;
    *out = k;
    return FATTN_OK;
}

void cl_cache_release(cl_program_cache *cache) {
    for (int i = 0; i < cache->count; i++) {
        clReleaseKernel(cache->entries[i].kernel);
        clReleaseProgram(cache->entries[i].program);
    }
    cache->count = 0;
}

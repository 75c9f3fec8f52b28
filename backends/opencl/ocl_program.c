/* Kernel programs: sources (embedded, or from FATTN_KERNEL_DIR), the check
 * of FATTN_OPENCL_OPTIONS (both read by the core into fattn_settings), and
 * a two-level cache of compiled programs: in memory per context, and on
 * disk keyed by a hash of source + options + device + driver. A disk entry carries its key and a keyed tag; one that
 * fails either, or fails to load, is rebuilt from source and rewritten,
 * never trusted. Writes go to a temporary file that is then renamed, so
 * readers never see half a file. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ocl_common.h"

/* ---- Sources ----------------------------------------------------------------- */

/* The source of kernel file `file`: malloc'd, NUL-terminated. From
 * kernel_dir (FATTN_KERNEL_DIR) when it is set, unless `optional` and the
 * file is not there; else the embedded copy. */
static fattn_status load_source(const char *kernel_dir, const char *file, int optional, char **out,
                                size_t *len, fattn_msg *msg) {
    const char *dir = kernel_dir && *kernel_dir ? kernel_dir : NULL;
    char probe[4096];
    if (dir && optional) {
        snprintf(probe, sizeof probe, "%s/%s", dir, file);
        if (access(probe, R_OK) != 0) dir = NULL;
    }
    if (dir) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, file);
        FILE *f = fopen(path, "rb");
        if (!f)
            return fattn_fail(msg, FATTN_ERR_BUILD, "FATTN_KERNEL_DIR: cannot open %s: %s", path,
                              strerror(errno));
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
    for (size_t i = 0; i < ocl_embedded_source_count; i++) {
        if (strcmp(ocl_embedded_sources[i].name, file) != 0) continue;
        char *s = malloc(ocl_embedded_sources[i].size + 1);
        if (!s) return fattn_fail(msg, FATTN_ERR_OUT_OF_MEMORY, "cannot copy kernel source");
        memcpy(s, ocl_embedded_sources[i].data, ocl_embedded_sources[i].size);
        s[ocl_embedded_sources[i].size] = '\0';
        *out = s;
        *len = ocl_embedded_sources[i].size;
        return FATTN_OK;
    }
    return fattn_fail(msg, FATTN_ERR_INTERNAL, "kernel file %s is not embedded", file);
}

/* What the compiler gets for `file`: the files every kernel shares, then the
 * file, or the files it joins with '+' (a matrix kernel's primitive file
 * before the kernel), in order. storage.cl holds the storage types;
 * ragged.cl the variable-length and paged helpers, empty unless the build
 * sets FATTN_RAGGED; variants.cl the attention variants' helpers, empty
 * unless it sets FATTN_VAR. A FATTN_KERNEL_DIR without them uses the
 * embedded ones. */
static fattn_status program_source(const char *kernel_dir, const char *file, char **out,
                                   size_t *len, fattn_msg *msg) {
    static const char *const common[] = {"storage.cl", "ragged.cl", "variants.cl"};
    enum { NC = sizeof common / sizeof common[0], MAX_JOINED = 6, N = NC + MAX_JOINED };
    char *part[N] = {NULL};
    size_t plen[N] = {0}, total = 0;
    fattn_status st = FATTN_OK;
    int n = NC;
    for (int i = 0; i < NC && st == FATTN_OK; i++) {
        st = load_source(kernel_dir, common[i], 1, &part[i], &plen[i], msg);
        total += plen[i] + 1;
    }
    for (const char *f = file; st == FATTN_OK && *f;) {
        const size_t flen = strcspn(f, "+");
        char name[128];
        if (n == N || flen == 0 || flen >= sizeof name) {
            st = fattn_fail(msg, FATTN_ERR_INTERNAL, "bad kernel file list '%s'", file);
            break;
        }
        memcpy(name, f, flen);
        name[flen] = '\0';
        st = load_source(kernel_dir, name, 0, &part[n], &plen[n], msg);
        total += plen[n++] + 1;
        f += flen + (f[flen] == '+');
    }
    char *all = st == FATTN_OK ? malloc(total) : NULL;
    if (st == FATTN_OK && !all)
        st = fattn_fail(msg, FATTN_ERR_OUT_OF_MEMORY, "cannot join kernel sources");
    if (all) {
        size_t at = 0;
        for (int i = 0; i < n; i++) {
            memcpy(all + at, part[i], plen[i]);
            at += plen[i];
            all[at++] = i < n - 1 ? '\n' : '\0';
        }
        *out = all;
        *len = total - 1;
    }
    for (int i = 0; i < N; i++) free(part[i]);
    return st;
}

/* ---- Disk cache ----------------------------------------------------------------
 * The cache directory is trusted code, like FATTN_MODULE_DIR: a binary found
 * there runs in this process (natively, on a CPU device). So it is used only
 * when it is the user's own and private: owned by the user, not writable by
 * group or others, not a symbolic link; it is held open from that check on.
 * Entries are read without following links or blocking, must be regular
 * files of the user of the size their header says, and carry a SipHash-2-4
 * tag keyed with a secret kept in the directory (cache.key, mode 0600). The
 * tag refuses what an unkeyed checksum let through: an entry forged by
 * someone who knows the format and the public inputs, a copied or damaged
 * one. It cannot stop whoever can write the directory; the ownership and
 * permission checks do that. */

static uint64_t fnv1a(uint64_t h, const void *data, size_t n) {
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

static uint64_t fnv_str(uint64_t h, const char *s) { return fnv1a(h, s, strlen(s) + 1); }

static uint64_t rotl64(uint64_t x, int b) { return (x << b) | (x >> (64 - b)); }

#define SIPROUND                                                                                   \
    do {                                                                                           \
        v0 += v1, v1 = rotl64(v1, 13), v1 ^= v0, v0 = rotl64(v0, 32);                              \
        v2 += v3, v3 = rotl64(v3, 16), v3 ^= v2;                                                   \
        v0 += v3, v3 = rotl64(v3, 21), v3 ^= v0;                                                   \
        v2 += v1, v1 = rotl64(v1, 17), v1 ^= v2, v2 = rotl64(v2, 32);                              \
    } while (0)

/* SipHash-2-4 (Aumasson and Bernstein). Words are read in host byte order:
 * the cache is never shared between machines. */
static uint64_t siphash(const uint64_t key[2], const unsigned char *in, size_t len) {
    uint64_t v0 = 0x736f6d6570736575ull ^ key[0], v1 = 0x646f72616e646f6dull ^ key[1];
    uint64_t v2 = 0x6c7967656e657261ull ^ key[0], v3 = 0x7465646279746573ull ^ key[1];
    const size_t whole = len & ~(size_t)7;
    for (size_t i = 0; i < whole; i += 8) {
        uint64_t m;
        memcpy(&m, in + i, 8);
        v3 ^= m;
        SIPROUND;
        SIPROUND;
        v0 ^= m;
    }
    uint64_t last = (uint64_t)len << 56;
    for (size_t i = 0; i < (len & 7); i++) last |= (uint64_t)in[whole + i] << (8 * i);
    v3 ^= last;
    SIPROUND;
    SIPROUND;
    v0 ^= last;
    v2 ^= 0xff;
    for (int i = 0; i < 4; i++) SIPROUND;
    return v0 ^ v1 ^ v2 ^ v3;
}

typedef struct cache_key {
    uint64_t lo, hi;
} cache_key;

/* Everything that changes the binary: the source, the options, the device and
 * its driver. Two differently seeded hashes make a 128-bit key, which names
 * the entry (it need not be secret). Returns 0 when the driver cannot
 * describe the device: then the disk cache is not used. */
static int make_key(const char *src, size_t len, const char *options, cl_device_id dev,
                    cache_key *out) {
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

static int read_all(int fd, void *buf, size_t n) {
    for (size_t done = 0; done < n;) {
        const ssize_t r = read(fd, (char *)buf + done, n - done);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return 0;
        done += (size_t)r;
    }
    return 1;
}

static int write_all(int fd, const void *buf, size_t n) {
    for (size_t done = 0; done < n;) {
        const ssize_t r = write(fd, (const char *)buf + done, n - done);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return 0;
        done += (size_t)r;
    }
    return 1;
}

/* A new file `base`.tmp.<pid>.<n> in the directory, for writing; the name
 * goes to tmp. Renamed into place once complete, so readers never see half
 * a file. -1 on failure. */
static int create_temp(int dfd, const char *base, char *tmp, size_t len) {
    static unsigned counter;
    for (int attempt = 0; attempt < 16; attempt++) {
        const unsigned n = __atomic_fetch_add(&counter, 1, __ATOMIC_RELAXED);
        snprintf(tmp, len, "%s.tmp.%ld.%u", base, (long)getpid(), n);
        const int fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd >= 0 || errno != EEXIST) return fd;
    }
    return -1;
}

#define KEY_FILE "cache.key"

/* The directory's secret: 1 read, 0 absent, -1 present but not a private
 * 16-byte regular file of this user. */
static int read_secret(int dfd, uint64_t secret[2]) {
    const int fd = openat(dfd, KEY_FILE, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return errno == ENOENT ? 0 : -1;
    struct stat sb;
    const int ok = fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_uid == geteuid() &&
                   (sb.st_mode & 077) == 0 && sb.st_size == 16 && read_all(fd, secret, 16);
    close(fd);
    return ok ? 1 : -1;
}

/* Reads the secret, making it first if there is none. 0 with *why on failure. */
static int load_secret(int dfd, uint64_t secret[2], const char **why) {
    for (int attempt = 0; attempt < 2; attempt++) {
        const int r = read_secret(dfd, secret);
        if (r > 0) return 1;
        if (r < 0) break;
        uint64_t fresh[2];
        char tmp[64];
        const int rnd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
        const int got = rnd >= 0 && read_all(rnd, fresh, sizeof fresh);
        if (rnd >= 0) close(rnd);
        if (!got) {
            *why = "cannot read /dev/urandom for its key";
            return 0;
        }
        const int fd = create_temp(dfd, KEY_FILE, tmp, sizeof tmp);
        if (fd < 0) {
            *why = "cannot create its key file " KEY_FILE;
            return 0;
        }
        int ok = write_all(fd, fresh, sizeof fresh);
        ok = close(fd) == 0 && ok;
        /* link, not rename: a key that another process made first stays,
         * and so do the entries it keys. */
        if (ok && linkat(dfd, tmp, dfd, KEY_FILE, 0) != 0 && errno != EEXIST)
            ok = renameat(dfd, tmp, dfd, KEY_FILE) == 0; /* file systems without hard links */
        unlinkat(dfd, tmp, 0);
        if (!ok) {
            *why = "cannot write its key file " KEY_FILE;
            return 0;
        }
    }
    *why = "its " KEY_FILE " is not a private (0600) 16-byte file of this user";
    return 0;
}

enum { DIR_OK, DIR_INSECURE, DIR_UNUSABLE };

#define CACHE_DIR_ADVICE                                                                           \
    "set it to the absolute path of a private directory (mode 0700) that this user can write, or " \
    "to off"

/* Creates (mode 0700, parents too) and opens dir, and checks that it is
 * private to the user. DIR_OK with *fd set, else the kind of problem and
 * its description in why. */
static int open_private_dir(char *dir, int *fd, char *why, size_t len) {
    for (char *p = dir + 1; *p; p++) { /* mkdir -p; the last mkdir reports */
        if (*p != '/') continue;
        *p = '\0';
        mkdir(dir, 0700);
        *p = '/';
    }
    if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
        snprintf(why, len, "cannot create %s: %s", dir, strerror(errno));
        return DIR_UNUSABLE;
    }
    struct stat sb;
    if (lstat(dir, &sb) == 0 && S_ISLNK(sb.st_mode)) {
        snprintf(why, len, "%s is a symbolic link", dir);
        return DIR_INSECURE;
    }
    *fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (*fd < 0) {
        snprintf(why, len, "cannot open %s: %s", dir, strerror(errno));
        return DIR_UNUSABLE;
    }
    int kind = DIR_OK;
    if (fstat(*fd, &sb) != 0) {
        snprintf(why, len, "cannot read the attributes of %s: %s", dir, strerror(errno));
        kind = DIR_UNUSABLE;
    } else if (sb.st_uid != geteuid()) {
        snprintf(why, len, "%s is owned by uid %ld, not by this user (uid %ld)", dir,
                 (long)sb.st_uid, (long)geteuid());
        kind = DIR_INSECURE;
    } else if (sb.st_mode & (S_IWGRP | S_IWOTH)) {
        snprintf(why, len, "%s is writable by group or others (mode %04o)", dir,
                 (unsigned)(sb.st_mode & 07777));
        kind = DIR_INSECURE;
    } else if (access(dir, W_OK | X_OK) != 0) {
        snprintf(why, len, "%s is not writable: %s", dir, strerror(errno));
        kind = DIR_UNUSABLE;
    }
    if (kind != DIR_OK) {
        close(*fd);
        *fd = -1;
    }
    return kind;
}

fattn_status ocl_disk_cache_open(ocl_program_cache *cache, const fattn_settings *settings,
                                 fattn_msg *msg) {
    /* `env`: the explicitly named directory, from FATTN_CACHE_DIR or from
     * the API (fattn_context_params.cache_dir); `origin` names which, and a
     * named directory that cannot be used is an error of that origin. */
    const char *env = settings->cache_dir && *settings->cache_dir ? settings->cache_dir : NULL;
    const char *xdg = settings->xdg_cache, *home = settings->home;
    const char *origin =
        settings->cache_dir_origin ? settings->cache_dir_origin : "FATTN_CACHE_DIR";
    const fattn_status refused =
        strcmp(origin, "FATTN_CACHE_DIR") == 0 ? FATTN_ERR_ENVIRONMENT : FATTN_ERR_INVALID_ARGUMENT;
    char dir[4096], why[4096 + 128];
    cache->disk_fd = -1;
    if (env && (strcmp(env, "off") == 0 || strcmp(env, "0") == 0)) return FATTN_OK;
    /* Room for the longest entry name under dir: the path of the directory
     * itself must also stay below PATH_MAX (4096 on Linux). */
    const size_t room = sizeof dir - 64;
    if (env && env[0] != '/')
        return fattn_fail(msg, refused, "%s='%.300s' is a relative path; %s", origin, env,
                          CACHE_DIR_ADVICE);
    if (env && strlen(env) >= room)
        return fattn_fail(msg, refused,
                          "%s='%.100s...' is too long (%zu characters, at most %zu); %s", origin,
                          env, strlen(env), room - 1, CACHE_DIR_ADVICE);
    if (env) snprintf(dir, sizeof dir, "%s", env);
    /* XDG: a relative XDG_CACHE_HOME is invalid and is ignored. */
    else if (xdg && xdg[0] == '/' && strlen(xdg) + 6 < room)
        snprintf(dir, sizeof dir, "%s/fattn", xdg);
    else if (home && home[0] == '/' && strlen(home) + 13 < room)
        snprintf(dir, sizeof dir, "%s/.cache/fattn", home);
    else
        return fattn_fail(
            msg, FATTN_OK,
            "disk program cache off: neither XDG_CACHE_HOME nor HOME is an absolute path; "
            "set FATTN_CACHE_DIR to a private directory (mode 0700), or to off");
    int fd = -1;
    const int kind = open_private_dir(dir, &fd, why, sizeof why);
    if (kind == DIR_UNUSABLE && env)
        return fattn_fail(msg, refused, "%s: %s; %s", origin, why, CACHE_DIR_ADVICE);
    const char *key_why = NULL;
    if (kind == DIR_OK && !load_secret(fd, cache->disk_secret, &key_why)) {
        snprintf(why, sizeof why, "%s: %s", dir, key_why);
        close(fd);
        fd = -1;
    }
    if (fd < 0)
        return fattn_fail(
            msg, FATTN_OK,
            "disk program cache off: %s; use a private directory (mode 0700), or %s=off", why,
            origin);
    cache->disk_fd = fd;
    return FATTN_OK;
}

void ocl_disk_cache_close(ocl_program_cache *cache) {
    if (cache->disk_fd >= 0) close(cache->disk_fd);
    cache->disk_fd = -1;
}

#define CACHE_MAGIC "FATTNCL2"
/* Far above any fattn kernel binary (PoCL's are about 1 MiB). */
#define CACHE_MAX_BINARY ((uint64_t)256 << 20)

typedef struct cache_header {
    char magic[8];
    cache_key key;
    uint64_t size; /* bytes of binary after the header */
    uint64_t tag;  /* siphash of the whole entry with tag = 0, keyed with the secret */
} cache_header;

typedef char cache_header_is_unpadded[sizeof(cache_header) == 40 ? 1 : -1];

static void entry_name(char *name, size_t len, cache_key k) {
    snprintf(name, len, "%016llx%016llx.clbin", (unsigned long long)k.hi, (unsigned long long)k.lo);
}

/* The cached binary for k, malloc'd, or NULL if absent, damaged or not
 * trusted. A FIFO, device or link in its place is never read. */
static unsigned char *cache_read(const ocl_program_cache *c, cache_key k, size_t *size) {
    char name[64];
    entry_name(name, sizeof name, k);
    const int fd = openat(c->disk_fd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return NULL;
    struct stat sb;
    cache_header h;
    unsigned char *buf = NULL;
    uint64_t bytes = 0;
    int ok = fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_uid == geteuid() &&
             sb.st_size > (off_t)sizeof h && (uint64_t)sb.st_size - sizeof h <= CACHE_MAX_BINARY;
    if (ok) {
        bytes = (uint64_t)sb.st_size;
        ok = (buf = malloc((size_t)bytes)) && read_all(fd, buf, (size_t)bytes);
    }
    close(fd);
    if (ok) {
        memcpy(&h, buf, sizeof h);
        memset(buf + offsetof(cache_header, tag), 0, sizeof h.tag);
        ok = memcmp(h.magic, CACHE_MAGIC, 8) == 0 && h.key.lo == k.lo && h.key.hi == k.hi &&
             h.size == bytes - sizeof h && siphash(c->disk_secret, buf, (size_t)bytes) == h.tag;
    }
    if (!ok) {
        free(buf);
        return NULL;
    }
    memmove(buf, buf + sizeof h, (size_t)h.size);
    *size = (size_t)h.size;
    return buf;
}

/* Writes the entry for k; `entry` holds room for the header, then the
 * binary's `size` bytes. Best effort: a cache that cannot be written only
 * costs a rebuild later. */
static void cache_write(const ocl_program_cache *c, cache_key k, unsigned char *entry,
                        size_t size) {
    char name[64], tmp[128];
    cache_header h;
    memcpy(h.magic, CACHE_MAGIC, 8);
    h.key = k;
    h.size = size;
    h.tag = 0;
    memcpy(entry, &h, sizeof h);
    h.tag = siphash(c->disk_secret, entry, sizeof h + size);
    memcpy(entry + offsetof(cache_header, tag), &h.tag, sizeof h.tag);
    entry_name(name, sizeof name, k);
    const int fd = create_temp(c->disk_fd, name, tmp, sizeof tmp);
    if (fd < 0) return;
    int ok = write_all(fd, entry, sizeof h + size);
    ok = close(fd) == 0 && ok;
    if (!ok || renameat(c->disk_fd, tmp, c->disk_fd, name) != 0) unlinkat(c->disk_fd, tmp, 0);
}

/* ---- Building ------------------------------------------------------------------ */

static fattn_status build_failed(cl_program prog, cl_device_id dev, const char *file,
                                 const char *options, cl_int err, fattn_msg *msg) {
    char log[3072] = "";
    size_t n = 0;
    if (clGetProgramBuildInfo(prog, dev, CL_PROGRAM_BUILD_LOG, sizeof log - 1, log, &n) !=
        CL_SUCCESS)
        snprintf(log, sizeof log, "(the driver gave no build log)");
    log[sizeof log - 1] = '\0';
    return fattn_fail(msg, FATTN_ERR_BUILD,
                      "building %s with \"%s\" failed: %s (%d); build log:\n%s", file, options,
                      ocl_error_name(err), (int)err, log);
}

static cl_program from_binary(cl_context ctx, cl_device_id dev, const unsigned char *bin,
                              size_t size, const char *options) {
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

static fattn_status build_program(ocl_program_cache *cache, cl_context ctx, cl_device_id dev,
                                  const char *file, const char *options, cl_program *out,
                                  fattn_msg *msg) {
    char *src = NULL;
    size_t len = 0;
    fattn_status st = program_source(cache->kernel_dir, file, &src, &len, msg);
    if (st != FATTN_OK) return st;
    cache_key key = {0, 0};
    const int use_disk = cache->disk_fd >= 0 && make_key(src, len, options, dev, &key);
    if (use_disk) {
        size_t size;
        unsigned char *bin = cache_read(cache, key, &size);
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
        return fattn_fail(msg, ocl_status_of(err), "clCreateProgramWithSource: %s (%d)",
                          ocl_error_name(err), (int)err);
    cache->builds++;
    if ((err = clBuildProgram(p, 1, &dev, options, NULL, NULL)) != CL_SUCCESS) {
        st = build_failed(p, dev, file, options, err, msg);
        clReleaseProgram(p);
        return st;
    }
    if (use_disk) {
        size_t size = 0;
        if (clGetProgramInfo(p, CL_PROGRAM_BINARY_SIZES, sizeof size, &size, NULL) == CL_SUCCESS &&
            size && size <= CACHE_MAX_BINARY) {
            unsigned char *entry = malloc(sizeof(cache_header) + size);
            unsigned char *bin = entry ? entry + sizeof(cache_header) : NULL;
            if (bin &&
                clGetProgramInfo(p, CL_PROGRAM_BINARIES, sizeof bin, &bin, NULL) == CL_SUCCESS)
                cache_write(cache, key, entry, size);
            free(entry);
        }
    }
    *out = p;
    return FATTN_OK;
}

/* FATTN_OPENCL_OPTIONS goes to the compiler after fattn's own options. A
 * bare -D or -I (PoCL's option parser crashed on one) and a -D or -U of a
 * macro of the kernels (-DDTYPE=7 gave NaN with status OK) are refused;
 * tokens are split at whitespace, as the drivers split them. */
static fattn_status check_options(const char *extra, fattn_msg *msg) {
    static const char space[] = " \t\n\v\f\r";
    for (const char *t = extra + strspn(extra, space); *t; t += strspn(t, space)) {
        const size_t n = strcspn(t, space);
        if (n >= 2 && t[0] == '-' && (t[1] == 'D' || t[1] == 'U' || t[1] == 'I')) {
            const size_t name_len = strcspn(t + 2, "=") < n - 2 ? strcspn(t + 2, "=") : n - 2;
            if (name_len == 0)
                return fattn_fail(
                    msg, FATTN_ERR_ENVIRONMENT,
                    "FATTN_OPENCL_OPTIONS: '%.*s' has no name or path joined to it; write "
                    "-DNAME, -DNAME=VALUE, -UNAME or -IPATH as one word",
                    (int)n, t);
            for (size_t i = 0; t[1] != 'I' && i < ocl_kernel_macro_count; i++)
                if (strlen(ocl_kernel_macros[i]) == name_len &&
                    memcmp(t + 2, ocl_kernel_macros[i], name_len) == 0)
                    return fattn_fail(
                        msg, FATTN_ERR_ENVIRONMENT,
                        "FATTN_OPENCL_OPTIONS: '%.*s' sets %s, a macro of fattn's kernels "
                        "that fattn sets itself; remove it (tile sizes go through "
                        "FATTN_OPENCL_TILES)",
                        (int)n, t, ocl_kernel_macros[i]);
        }
        /* Options that let the compiler assume no inf or NaN would break the
         * special-value rules every backend keeps (include/fattn.h). */
        static const char *const unsafe[] = {"-cl-finite-math-only", "-cl-fast-relaxed-math"};
        for (size_t i = 0; i < sizeof unsafe / sizeof unsafe[0]; i++)
            if (strlen(unsafe[i]) == n && memcmp(t, unsafe[i], n) == 0)
                return fattn_fail(msg, FATTN_ERR_ENVIRONMENT,
                                  "FATTN_OPENCL_OPTIONS: %s lets the compiler assume no inf or "
                                  "NaN, which fattn's -inf and NaN rules need; remove it",
                                  unsafe[i]);
        t += n;
    }
    return FATTN_OK;
}

fattn_status ocl_get_kernel(ocl_program_cache *cache, cl_context ctx, cl_device_id dev,
                            const char *file, const char *name, const char *options, cl_kernel *out,
                            fattn_msg *msg) {
    /* FATTN_OPENCL_OPTIONS joins every build, and so every cache key. */
    char opts[512];
    const char *extra = cache->extra_options && *cache->extra_options ? cache->extra_options : NULL;
    fattn_status st = extra ? check_options(extra, msg) : FATTN_OK;
    if (st != FATTN_OK) return st;
    if ((size_t)snprintf(opts, sizeof opts, "%s%s%s", options, extra ? " " : "",
                         extra ? extra : "") >= sizeof opts)
        return fattn_fail(msg, FATTN_ERR_ENVIRONMENT,
                          "FATTN_OPENCL_OPTIONS is too long (%zu characters)", strlen(extra));
    options = opts;
    char full[sizeof opts + 128];
    snprintf(full, sizeof full, "%s|%s|%s", file, name, options);
    for (int i = 0; i < cache->count; i++)
        if (strcmp(cache->entries[i].options, full) == 0) {
            cache->entries[i].used = ++cache->clock;
            *out = cache->entries[i].kernel;
            return FATTN_OK;
        }
    /* Full: drop the least recently fetched, so a kernel fetched earlier in
     * the same call (a plan's decode kernel, then its combine) is never
     * released under the plan. */
    if (cache->count == OCL_MAX_PROGRAMS) {
        int lru = 0;
        for (int i = 1; i < cache->count; i++)
            if (cache->entries[i].used < cache->entries[lru].used) lru = i;
        clReleaseKernel(cache->entries[lru].kernel);
        clReleaseProgram(cache->entries[lru].program);
        cache->entries[lru] = cache->entries[--cache->count];
    }
    cl_program prog = NULL;
    st = build_program(cache, ctx, dev, file, options, &prog, msg);
    if (st != FATTN_OK) return st;
    cl_int err;
    cl_kernel k = clCreateKernel(prog, name, &err);
    if (err != CL_SUCCESS) {
        clReleaseProgram(prog);
        return fattn_fail(msg, FATTN_ERR_BUILD, "clCreateKernel(%s) in %s: %s (%d)", name, file,
                          ocl_error_name(err), (int)err);
    }
    ocl_cached_program *e = &cache->entries[cache->count++];
    snprintf(e->options, sizeof e->options, "%s", full);
    e->program = prog;
    e->kernel = k;
    e->used = ++cache->clock;
    *out = k;
    return FATTN_OK;
}

void ocl_cache_release(ocl_program_cache *cache) {
    for (int i = 0; i < cache->count; i++) {
        clReleaseKernel(cache->entries[i].kernel);
        clReleaseProgram(cache->entries[i].program);
    }
    cache->count = 0;
}

/* OpenCL backend specifics: the on-disk program cache (reused by a second
 * context, a corrupt entry rebuilt and not trusted, a directory that is not
 * private to the user not used, an unusable FATTN_CACHE_DIR refused), device
 * selection through FATTN_OPENCL_PLATFORM / FATTN_OPENCL_DEVICE, concurrent
 * first use, tile overrides through FATTN_OPENCL_TILES, compiler options
 * through FATTN_OPENCL_OPTIONS, overlap found across wrappers and
 * sub-buffers of one cl_mem, absurd allocations refused, and a kernel that
 * fails to build giving a status whose message carries the compiler's log. */
#define _POSIX_C_SOURCE 200809L
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "harness.h"
#include "reference.h"

#if defined(__has_include)
#if __has_include(<CL/cl.h>)
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#define HAVE_CL_HEADER 1
#endif
#endif

static char cache_dir[256];
static char last_device[600]; /* the device description of run_small's context */

static void require_opencl(void) {
    fattn_backend_info info = FATTN_BACKEND_INFO_INIT;
    assert_int_equal(fattn_backend_get_info(FATTN_BACKEND_OPENCL, &info), FATTN_OK);
    if (!info.available) {
        const char *required = getenv("FATTN_TEST_REQUIRE");
        if (required && strstr(required, "opencl"))
            fail_msg("opencl is required but unavailable: %s", info.reason);
        print_message("[  SKIPPED ] backend opencl: %s\n", info.reason);
        skip();
    }
}

/* Runs a small case on a fresh OpenCL context; checks the result if `check`. */
static fattn_status run_case(const char *case_name, int check, char *msg, size_t len) {
    const fattn_case *c = NULL;
    for (size_t i = 0; i < fattn_case_count; i++)
        if (strcmp(fattn_cases[i].name, case_name) == 0) c = &fattn_cases[i];
    assert_non_null(c);
    fattn_context *ctx;
    fattn_status st = fattn_context_create(FATTN_BACKEND_OPENCL, 0, &ctx);
    if (st != FATTN_OK) {
        snprintf(msg, len, "%s", fattn_error_message(NULL));
        return st;
    }
    snprintf(last_device, sizeof last_device, "%s", fattn_context_device_name(ctx));
    case_result r;
    st = harness_run(ctx, c, FATTN_F32, 99, HARNESS_TILED, &r);
    snprintf(msg, len, "%s", fattn_error_message(ctx));
    fattn_context_free(ctx);
    if (check && st == FATTN_OK && !harness_passed(&r))
        fail_msg("case %s: max err %g, %lld NaN", case_name, r.max_err, (long long)r.nan_count);
    return st;
}

/* Runs a small case on a fresh OpenCL context and checks it. */
static fattn_status run_small(const char *case_name, char *msg, size_t len) {
    return run_case(case_name, 1, msg, len);
}

extern char **environ;

/* Runs this program again as a fresh process with `arg` (and one variable
 * set, if name is not NULL), so that it starts with OpenCL untouched.
 * Returns the wait status. The child only calls execve: other threads (of
 * PoCL) may hold locks at the fork. */
static int run_child(const char *arg, const char *name, const char *value) {
    char self[4096], set[512], asan[1024];
    /* Its real path, as argv[0] too: the core finds the modules next to the
     * program, by the name the loader was given. */
    const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    assert_true(n > 0);
    self[n] = '\0';
    /* PoCL's LLVM gives the thread that first lists its devices a malloc'd
     * alternate signal stack, which ASan then fails to unmap when that
     * thread exits (a CHECK failure, not a finding). */
    const char *old = getenv("ASAN_OPTIONS");
    snprintf(asan, sizeof asan, "ASAN_OPTIONS=%s%suse_sigaltstack=0", old ? old : "",
             old && *old ? ":" : "");
    snprintf(set, sizeof set, "%s=%s", name ? name : "", name ? value : "");
    size_t count = 0, k = 0;
    while (environ[count]) count++;
    char **envp = calloc(count + 3, sizeof *envp);
    assert_non_null(envp);
    for (size_t i = 0; i < count; i++)
        if (strncmp(environ[i], "ASAN_OPTIONS=", 13) != 0 &&
            !(name && strncmp(environ[i], set, strlen(name) + 1) == 0))
            envp[k++] = environ[i];
    envp[k++] = asan;
    if (name) envp[k++] = set;
    char *argv[] = {self, (char *)arg, NULL};
    fflush(NULL);
    const pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        execve(self, argv, envp);
        _exit(127);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    free(envp);
    return status;
}

/* The number of cache entries in dir; the first one's path and inode. */
static int entries_in(const char *dir, char *path, size_t len, ino_t *ino) {
    char cmd[512];
    snprintf(cmd, sizeof cmd, "ls %s/*.clbin 2>/dev/null", dir);
    FILE *p = popen(cmd, "r");
    int n = 0;
    char line[512];
    while (p && fgets(line, sizeof line, p)) {
        line[strcspn(line, "\n")] = '\0';
        if (n++ == 0) snprintf(path, len, "%s", line);
    }
    if (p) pclose(p);
    struct stat sb;
    if (n == 1 && stat(path, &sb) == 0) *ino = sb.st_ino;
    return n;
}

/* The single cache entry in cache_dir: its path and inode. */
static int cache_entry(char *path, size_t len, ino_t *ino) {
    return entries_in(cache_dir, path, len, ino);
}

static void test_disk_cache_reused_and_repaired(void **state) {
    (void)state;
    require_opencl();
    char msg[4096], path[512];
    ino_t first, second, third;
    assert_int_equal(run_small("seq 63 dim 40", msg, sizeof msg), FATTN_OK);
    assert_int_equal(cache_entry(path, sizeof path, &first), 1);

    /* A second context finds the binary: the file is not rewritten. */
    assert_int_equal(run_small("seq 63 dim 40", msg, sizeof msg), FATTN_OK);
    assert_int_equal(cache_entry(path, sizeof path, &second), 1);
    assert_true(first == second);

    /* Damage the payload: the next context must rebuild (new file, renamed
     * into place) and still compute the right answer. */
    FILE *f = fopen(path, "r+b");
    assert_non_null(f);
    fseek(f, 64, SEEK_SET);
    for (int i = 0; i < 256; i++) fputc(0x5a, f);
    fclose(f);
    assert_int_equal(run_small("seq 63 dim 40", msg, sizeof msg), FATTN_OK);
    assert_int_equal(cache_entry(path, sizeof path, &third), 1);
    assert_true(third != second);
}

static void test_build_error_has_log(void **state) {
    (void)state;
    require_opencl();
    char dir[] = "/tmp/fattn-kernels-XXXXXX", path[300], msg[4096];
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/flash_fwd.cl", dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("__kernel void flash_fwd(__global float *x) { x[0] = this_is_not_defined; }\n", f);
    fclose(f);
    setenv("FATTN_KERNEL_DIR", dir, 1);
    fattn_status st = run_small("seq 63 dim 40", msg, sizeof msg);
    unsetenv("FATTN_KERNEL_DIR");
    unlink(path);
    rmdir(dir);
    assert_int_equal(st, FATTN_ERR_BUILD);
    assert_non_null(strstr(msg, "build log"));
    assert_non_null(strstr(msg, "this_is_not_defined")); /* the compiler's own words */

    setenv("FATTN_KERNEL_DIR", "/nonexistent-fattn-dir", 1);
    st = run_small("seq 63 dim 40", msg, sizeof msg);
    unsetenv("FATTN_KERNEL_DIR");
    assert_int_equal(st, FATTN_ERR_BUILD);
    assert_non_null(strstr(msg, "/nonexistent-fattn-dir/flash_fwd.cl"));
}

/* FATTN_OPENCL_TILES: a valid override runs (and is right), a malformed one
 * is an environment error naming the variable, tiles the device cannot hold
 * are unsupported, not shrunk. */
static void test_tile_override(void **state) {
    (void)state;
    require_opencl();
    char msg[4096];
    setenv("FATTN_OPENCL_TILES", "128:24x12/8x4,256:8x8/4x8", 1); /* odd shapes, RPT 3, KPT 3 */
    assert_int_equal(run_small("seq 129 dim 128", msg, sizeof msg), FATTN_OK);
    assert_int_equal(run_small("causal seq 127 dim 256", msg, sizeof msg), FATTN_OK);
    setenv("FATTN_OPENCL_TILES", "128:32x30/8x8", 1); /* 30 keys: not a multiple of 4 */
    assert_int_equal(run_small("seq 129 dim 128", msg, sizeof msg), FATTN_ERR_ENVIRONMENT);
    assert_non_null(strstr(msg, "FATTN_OPENCL_TILES"));
    setenv("FATTN_OPENCL_TILES", "64:64x32/16x8,garbage", 1); /* checked whole, for any bucket */
    assert_int_equal(run_small("seq 129 dim 128", msg, sizeof msg), FATTN_ERR_ENVIRONMENT);
    setenv("FATTN_OPENCL_TILES", "128:4096x64/16x8", 1); /* 256 rows per work-item */
    assert_int_equal(run_small("seq 129 dim 128", msg, sizeof msg), FATTN_ERR_UNSUPPORTED);
    assert_non_null(strstr(msg, "FATTN_OPENCL_TILES"));
    unsetenv("FATTN_OPENCL_TILES");
}

/* A device timer around a forward call: positive, and no longer than the
 * host clock around the whole start .. elapsed sequence, give or take the
 * two clocks' disagreement: NVIDIA's OpenCL driver timed this sequence
 * (~780 ms, mostly host work) 1.1% longer than CLOCK_MONOTONIC did. */
static void test_timer(void **state) {
    (void)state;
    require_opencl();
    const fattn_case *c = NULL;
    for (size_t i = 0; i < fattn_case_count; i++)
        if (strcmp(fattn_cases[i].name, "seq 1000 dim 64") == 0) c = &fattn_cases[i];
    assert_non_null(c);
    fattn_context *ctx;
    assert_int_equal(fattn_context_create(FATTN_BACKEND_OPENCL, 0, &ctx), FATTN_OK);
    fattn_timer *t = NULL;
    assert_int_equal(fattn_timer_create(ctx, &t), FATTN_OK);
    assert_int_equal(fattn_timer_is_device_clock(t), 1);
    case_result r;
    assert_int_equal(harness_run(ctx, c, FATTN_F32, 7, HARNESS_TILED, &r),
                     FATTN_OK); /* builds the kernel */
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    assert_int_equal(fattn_timer_start(t), FATTN_OK);
    assert_int_equal(harness_run(ctx, c, FATTN_F32, 7, HARNESS_TILED, &r), FATTN_OK);
    assert_int_equal(fattn_timer_stop(t), FATTN_OK);
    double ms = 0.0;
    assert_int_equal(fattn_timer_elapsed_ms(t, &ms), FATTN_OK);
    clock_gettime(CLOCK_MONOTONIC, &b);
    const double host_ms =
        (double)(b.tv_sec - a.tv_sec) * 1e3 + (double)(b.tv_nsec - a.tv_nsec) * 1e-6;
    if (!(ms > 0.0 && ms <= host_ms * 1.05 + 1.0))
        fail_msg("device timer %g ms, host clock around it %g ms", ms, host_ms);
    fattn_timer_free(t);
    fattn_context_free(ctx);
}

static void test_device_selection(void **state) {
    (void)state;
    require_opencl();
    char name[256], msg[4096];
    fattn_backend_info info = FATTN_BACKEND_INFO_INIT;
    assert_int_equal(fattn_device_get_name(FATTN_BACKEND_OPENCL, 0, name, sizeof name), FATTN_OK);

    /* By name substring, in another case: the same device 0. */
    char sub[8] = "";
    for (int i = 0; i < 4 && name[i]; i++)
        sub[i] =
            (char)(name[i] ^
                   ((name[i] >= 'a' && name[i] <= 'z') || (name[i] >= 'A' && name[i] <= 'Z') ? 0x20
                                                                                             : 0));
    setenv("FATTN_OPENCL_DEVICE", sub, 1);
    assert_int_equal(fattn_backend_get_info(FATTN_BACKEND_OPENCL, &info), FATTN_OK);
    assert_true(info.available);
    assert_int_equal(run_small("seq 63 dim 40", msg, sizeof msg), FATTN_OK);

    /* By index. */
    setenv("FATTN_OPENCL_DEVICE", "0", 1);
    assert_int_equal(fattn_backend_get_info(FATTN_BACKEND_OPENCL, &info), FATTN_OK);
    assert_int_equal(info.device_count, 1);

    /* Nothing matches: unavailable, and the reason names the variable. */
    setenv("FATTN_OPENCL_DEVICE", "no-such-device-anywhere", 1);
    assert_int_equal(fattn_backend_get_info(FATTN_BACKEND_OPENCL, &info), FATTN_OK);
    assert_false(info.available);
    assert_non_null(strstr(info.reason, "FATTN_OPENCL_DEVICE"));
    fattn_context *ctx;
    assert_int_equal(fattn_context_create(FATTN_BACKEND_OPENCL, 0, &ctx),
                     FATTN_ERR_BACKEND_UNAVAILABLE);
    unsetenv("FATTN_OPENCL_DEVICE");

    setenv("FATTN_OPENCL_PLATFORM", "no-such-platform", 1);
    assert_int_equal(fattn_backend_get_info(FATTN_BACKEND_OPENCL, &info), FATTN_OK);
    assert_false(info.available);
    assert_non_null(strstr(info.reason, "FATTN_OPENCL_PLATFORM"));
    unsetenv("FATTN_OPENCL_PLATFORM");
}

/* ---- Concurrent first use (finding 1) ------------------------------------------ */

enum { FIRST_USE_THREADS = 8, FIRST_USE_RUNS = 20 };

typedef struct first_use {
    pthread_barrier_t *barrier;
    fattn_status info_st, ctx_st;
    fattn_backend_info info;
} first_use;

static void *first_use_thread(void *arg) {
    first_use *u = arg;
    pthread_barrier_wait(u->barrier);
    u->info.size = sizeof u->info;
    u->info_st = fattn_backend_get_info(FATTN_BACKEND_OPENCL, &u->info);
    fattn_context *ctx = NULL;
    u->ctx_st = fattn_context_create(FATTN_BACKEND_OPENCL, 0, &ctx);
    fattn_context_free(ctx);
    return NULL;
}

/* In a fresh process: threads that all make this process's first OpenCL
 * calls together. Exit 0 when all found the same devices and opened a
 * context, 3 when none found any (no device here), else 1. */
static int child_first_use(void) {
    alarm(120);
    pthread_barrier_t barrier;
    pthread_t th[FIRST_USE_THREADS];
    first_use u[FIRST_USE_THREADS];
    pthread_barrier_init(&barrier, NULL, FIRST_USE_THREADS);
    for (int i = 0; i < FIRST_USE_THREADS; i++) {
        u[i].barrier = &barrier;
        if (pthread_create(&th[i], NULL, first_use_thread, &u[i]) != 0) return 1;
    }
    for (int i = 0; i < FIRST_USE_THREADS; i++) pthread_join(th[i], NULL);
    pthread_barrier_destroy(&barrier);
    int available = 0, bad = 0;
    for (int i = 0; i < FIRST_USE_THREADS; i++)
        available += u[i].info_st == FATTN_OK && u[i].info.available;
    if (available == 0 && u[0].info_st == FATTN_OK) return 3;
    for (int i = 0; i < FIRST_USE_THREADS; i++)
        if (u[i].info_st != FATTN_OK || !u[i].info.available || u[i].ctx_st != FATTN_OK ||
            u[i].info.device_count != u[0].info.device_count) {
            fprintf(stderr, "thread %d: info %d, available %d, %d devices (%s), context %d\n", i,
                    (int)u[i].info_st, u[i].info.available, u[i].info.device_count,
                    u[i].info.reason, (int)u[i].ctx_st);
            bad = 1;
        }
    return bad;
}

static void test_concurrent_first_use(void **state) {
    (void)state;
    for (int run = 0; run < FIRST_USE_RUNS; run++) {
        const int status = run_child("--first-use", NULL, NULL);
        if (WIFEXITED(status) && WEXITSTATUS(status) == 3) {
            require_opencl(); /* skips, visibly */
            fail_msg("the threads found no OpenCL device, this process does");
        }
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
            fail_msg("run %d of %d threads' first use: %s %d", run, FIRST_USE_THREADS,
                     WIFSIGNALED(status) ? "killed by signal" : "exit status",
                     WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
    }
}

/* ---- Why no device (finding 8) ------------------------------------------------- */

/* In a fresh process started with POCL_DEVICES naming no device: the reason
 * must say how many platforms were seen and what the driver answered. Exit
 * 0 when it does, 4 when a device of another platform is still there. */
static int child_enumeration(void) {
    fattn_backend_info info = FATTN_BACKEND_INFO_INIT;
    if (fattn_backend_get_info(FATTN_BACKEND_OPENCL, &info) != FATTN_OK) return 1;
    if (info.available) return 4;
    fprintf(stderr, "reason: %s\n", info.reason);
    return !(strstr(info.reason, "platform") && strstr(info.reason, "CL_") &&
             strstr(info.reason, "(-"));
}

static void test_no_device_reason(void **state) {
    (void)state;
    require_opencl();
    const int status = run_child("--enumeration", "POCL_DEVICES", "no-such-pocl-device");
    if (WIFEXITED(status) && WEXITSTATUS(status) == 4) {
        print_message("[  SKIPPED ] a device outside PoCL remains with POCL_DEVICES set\n");
        skip();
    }
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
}

/* ---- The disk cache's trust (findings 3 and 8) ----------------------------------- */

static void remove_tree(const char *dir) {
    char cmd[600];
    snprintf(cmd, sizeof cmd, "chmod -R u+rwx %s 2>/dev/null; rm -rf %s", dir, dir);
    assert_int_not_equal(system(cmd), -1);
}

/* A new private directory under /tmp. */
static void temp_dir(char *dir, size_t len, const char *tag) {
    snprintf(dir, len, "/tmp/fattn-%s-XXXXXX", tag);
    assert_non_null(mkdtemp(dir));
}

static void write_file(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, n, f), n);
    assert_int_equal(fclose(f), 0);
}

/* The whole file, malloc'd. */
static unsigned char *read_file(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    *n = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *data = malloc(*n ? *n : 1);
    assert_non_null(data);
    assert_int_equal(fread(data, 1, *n, f), *n);
    fclose(f);
    return data;
}

/* Writes at `path` what someone who knows the entry format, but not the
 * directory's secret, can make: the binary of entry `from` (its first
 * `keep` bytes if keep > 0) under the key that path's name spells, with
 * the size and the unkeyed FNV-1a checksum that the entries of fattn 0.1
 * carried. The layout: magic[8], key lo, key hi, size, check, binary. */
static void forge_entry(const char *path, const char *from, size_t keep) {
    size_t n;
    unsigned char *e = read_file(from, &n);
    assert_true(n > 40);
    uint64_t size = n - 40, key[2], check = 0xcbf29ce484222325ull;
    if (keep && keep < size) size = keep;
    const char *name = strrchr(path, '/') + 1;
    assert_int_equal(sscanf(name, "%16" SCNx64 "%16" SCNx64, &key[1], &key[0]), 2);
    for (uint64_t i = 0; i < size; i++) check = (check ^ e[40 + i]) * 0x100000001b3ull;
    memcpy(e + 8, key, 16);
    memcpy(e + 24, &size, 8);
    memcpy(e + 32, &check, 8);
    write_file(path, e, 40 + size);
    free(e);
}

/* A flash_fwd with the real one's arguments that writes 42 into O. */
static const char evil_kernel[] =
    "__kernel void flash_fwd(__global const elem_t *q, long q_off, long q_sb, long q_sh, long "
    "q_ss,\n"
    "    __global const elem_t *k, long k_off, long k_sb, long k_sh, long k_ss,\n"
    "    __global const elem_t *v, long v_off, long v_sb, long v_sh, long v_ss,\n"
    "    __global elem_t *o, long o_off, long o_sb, long o_sh, long o_ss,\n"
    "    __global float *lse, long l_off, long l_sb, long l_sh, long l_ss, int has_lse,\n"
    "    int Hq, int group, int Sq, int Sk, int D, float scale_log2e, int causal, long coff) {\n"
    "    if (get_global_id(0) == 0 && get_global_id(1) == 0) STORE(o, o_off, 42.0f);\n"
    "}\n";

/* Builds the case with the evil kernel, cached in dir, and gives the path
 * of its entry, which is the one that is not `good`. */
static void make_evil_entry(const char *dir, const char *good, char *evil, size_t len) {
    char kdir[64], path[128], msg[4096], cmd[300], line[512];
    temp_dir(kdir, sizeof kdir, "evil");
    snprintf(path, sizeof path, "%s/flash_fwd.cl", kdir);
    write_file(path, evil_kernel, sizeof evil_kernel - 1);
    setenv("FATTN_KERNEL_DIR", kdir, 1);
    assert_int_equal(run_case("seq 63 dim 40", 0, msg, sizeof msg), FATTN_OK);
    unsetenv("FATTN_KERNEL_DIR");
    remove_tree(kdir);
    snprintf(cmd, sizeof cmd, "ls %s/*.clbin", dir);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    evil[0] = '\0';
    while (fgets(line, sizeof line, p)) {
        line[strcspn(line, "\n")] = '\0';
        if (strcmp(line, good) != 0) snprintf(evil, len, "%s", line);
    }
    pclose(p);
    assert_true(evil[0] != '\0');
}

/* A directory that others can write (or that is a link, or someone else's)
 * is not used: a planted entry there is not loaded, nothing is written
 * there, and the context's description says that the cache is off. */
static void test_cache_dir_not_private(void **state) {
    (void)state;
    require_opencl();
    char good[64], shared[64], link[80], path[512], evil[512], planted[600], msg[4096];
    ino_t ino;
    temp_dir(good, sizeof good, "good");
    setenv("FATTN_CACHE_DIR", good, 1);
    assert_int_equal(run_small("seq 63 dim 40", msg, sizeof msg), FATTN_OK);
    assert_null(strstr(last_device, "cache off"));
    assert_int_equal(entries_in(good, path, sizeof path, &ino), 1);
    make_evil_entry(good, path, evil, sizeof evil);

    temp_dir(shared, sizeof shared, "shared");
    assert_int_equal(chmod(shared, 01777), 0);
    snprintf(planted, sizeof planted, "%s/%s", shared, strrchr(path, '/') + 1);
    forge_entry(planted, evil, 0);
    setenv("FATTN_CACHE_DIR", shared, 1);
    assert_int_equal(run_small("seq 63 dim 40", msg, sizeof msg), FATTN_OK); /* not 42 */
    if (!strstr(last_device, "disk program cache off") ||
        !strstr(last_device, "writable by group or others"))
        fail_msg("device description: %s", last_device);
    assert_int_equal(entries_in(shared, path, sizeof path, &ino), 1); /* the planted one only */

    /* The last component a symbolic link, even to a private directory. */
    snprintf(link, sizeof link, "%s-link", good);
    assert_int_equal(symlink(good, link), 0);
    setenv("FATTN_CACHE_DIR", link, 1);
    assert_int_equal(run_small("seq 63 dim 40", msg, sizeof msg), FATTN_OK);
    if (!strstr(last_device, "cache off") || !strstr(last_device, "symbolic link"))
        fail_msg("device description: %s", last_device);
    unlink(link);

    /* Owned by another user: only root can make one. */
    if (geteuid() == 0) {
        assert_int_equal(chmod(shared, 0700), 0);
        assert_int_equal(chown(shared, 65534, 65534), 0);
        setenv("FATTN_CACHE_DIR", shared, 1);
        assert_int_equal(run_small("seq 63 dim 40", msg, sizeof msg), FATTN_OK);
        if (!strstr(last_device, "cache off") || !strstr(last_device, "owned by uid 65534"))
            fail_msg("device description: %s", last_device);
    }
    setenv("FATTN_CACHE_DIR", cache_dir, 1);
    remove_tree(good);
    remove_tree(shared);
}

static void on_alarm(int sig) {
    (void)sig;
    static const char text[] = "test_opencl: a cache entry blocked the process (a FIFO read?)\n";
    if (write(2, text, sizeof text - 1) < 0) _exit(2);
    _exit(1);
}

/* Entries are not trusted: a forged truncated binary is rebuilt (PoCL
 * crashed on one), a symbolic link is not followed, a FIFO does not block.
 * Each time the entry is then rewritten as a regular file. */
static void test_cache_entry_not_trusted(void **state) {
    (void)state;
    require_opencl();
    char dir[64], path[512], target[600], msg[4096];
    ino_t ino, again;
    struct stat sb;
    temp_dir(dir, sizeof dir, "entries");
    setenv("FATTN_CACHE_DIR", dir, 1);
    assert_int_equal(run_small("seq 63 dim 40", msg, sizeof msg), FATTN_OK);
    assert_int_equal(entries_in(dir, path, sizeof path, &ino), 1);
    size_t size;
    unsigned char *valid = read_file(path, &size);

    forge_entry(path, path, (size - 40) / 3);
    assert_int_equal(run_small("seq 63 dim 40", msg, sizeof msg), FATTN_OK);
    assert_int_equal(entries_in(dir, path, sizeof path, &again), 1);
    assert_true(again != ino);
    assert_int_equal(stat(path, &sb), 0);
    assert_int_equal((size_t)sb.st_size, size);

    /* A link to a valid entry: were it followed, the entry would be a hit
     * and the link would stay. */
    snprintf(target, sizeof target, "%s-target", dir);
    write_file(target, valid, size);
    assert_int_equal(unlink(path), 0);
    assert_int_equal(symlink(target, path), 0);
    assert_int_equal(run_small("seq 63 dim 40", msg, sizeof msg), FATTN_OK);
    assert_int_equal(lstat(path, &sb), 0);
    assert_true(S_ISREG(sb.st_mode));
    unlink(target);

    assert_int_equal(unlink(path), 0);
    assert_int_equal(mkfifo(path, 0600), 0);
    signal(SIGALRM, on_alarm);
    alarm(300);
    assert_int_equal(run_small("seq 63 dim 40", msg, sizeof msg), FATTN_OK);
    alarm(0);
    signal(SIGALRM, SIG_DFL);
    assert_int_equal(lstat(path, &sb), 0);
    assert_true(S_ISREG(sb.st_mode));
    free(valid);
    setenv("FATTN_CACHE_DIR", cache_dir, 1);
    remove_tree(dir);
}

/* An explicit FATTN_CACHE_DIR that cannot be used fails context creation
 * with a message naming the variable, the path and what to do. */
static void expect_cache_dir_refused(const char *value, const char *says) {
    fattn_context *ctx = NULL;
    setenv("FATTN_CACHE_DIR", value, 1);
    const fattn_status st = fattn_context_create(FATTN_BACKEND_OPENCL, 0, &ctx);
    const char *msg = fattn_error_message(NULL);
    fattn_context_free(ctx);
    if (st != FATTN_ERR_ENVIRONMENT || !strstr(msg, "FATTN_CACHE_DIR") || !strstr(msg, says) ||
        !strstr(msg, "or to off") || strncmp(strstr(msg, "FATTN_CACHE_DIR"), "FATTN_CACHE_DIR", 15))
        fail_msg("FATTN_CACHE_DIR=%.60s: status %d, message: %s", value, (int)st, msg);
    char start[40];
    snprintf(start, sizeof start, "%s", value);
    if (!strstr(msg, start)) fail_msg("the message does not name the path: %s", msg);
}

static void test_cache_dir_unusable(void **state) {
    (void)state;
    require_opencl();
    char dir[64], old_cwd[1024], file[80], path[128], longer[4200];
    assert_non_null(getcwd(old_cwd, sizeof old_cwd));
    temp_dir(dir, sizeof dir, "cwd");
    assert_int_equal(chdir(dir), 0);
    struct stat sb;
    expect_cache_dir_refused("fattn-relative-cache", "relative path");
    assert_int_not_equal(stat("fattn-relative-cache", &sb), 0); /* nothing made in the cwd */
    assert_int_equal(chdir(old_cwd), 0);

    snprintf(file, sizeof file, "%s/a-file", dir);
    write_file(file, "x", 1);
    expect_cache_dir_refused(file, "Not a directory");
    snprintf(path, sizeof path, "%s/a-file/below", dir);
    expect_cache_dir_refused(path, "cannot create");

    snprintf(longer, sizeof longer, "%s/", dir);
    memset(longer + strlen(longer), 'a', 4100);
    longer[sizeof longer - 1] = '\0';
    expect_cache_dir_refused(longer, "too long");

    if (geteuid() != 0) { /* root writes anywhere */
        snprintf(path, sizeof path, "%s/read-only", dir);
        assert_int_equal(mkdir(path, 0500), 0);
        expect_cache_dir_refused(path, "not writable");
    }
    setenv("FATTN_CACHE_DIR", cache_dir, 1);
    remove_tree(dir);
}

static void restore_env(const char *name, const char *saved) {
    if (saved)
        setenv(name, saved, 1);
    else
        unsetenv(name);
}

/* Without FATTN_CACHE_DIR: $HOME/.cache/fattn (a relative XDG_CACHE_HOME is
 * ignored, as the XDG spec says), made private; a default directory that
 * others can write only turns the cache off, with the note. */
static void test_cache_dir_default(void **state) {
    (void)state;
    require_opencl();
    char home[64], cwd[64], old_cwd[1024], dir[128], path[512], msg[4096];
    char *old_home = getenv("HOME") ? strdup(getenv("HOME")) : NULL;
    char *old_xdg = getenv("XDG_CACHE_HOME") ? strdup(getenv("XDG_CACHE_HOME")) : NULL;
    ino_t ino;
    struct stat sb;
    temp_dir(home, sizeof home, "home");
    temp_dir(cwd, sizeof cwd, "cwd");
    assert_non_null(getcwd(old_cwd, sizeof old_cwd));
    assert_int_equal(chdir(cwd), 0);
    setenv("HOME", home, 1);
    setenv("XDG_CACHE_HOME", "fattn-relative-xdg", 1);
    unsetenv("FATTN_CACHE_DIR");
    assert_int_equal(run_small("seq 63 dim 40", msg, sizeof msg), FATTN_OK);
    assert_int_not_equal(stat("fattn-relative-xdg", &sb), 0);
    snprintf(dir, sizeof dir, "%s/.cache/fattn", home);
    assert_int_equal(stat(dir, &sb), 0);
    assert_int_equal(sb.st_mode & 0777, 0700);
    assert_int_equal(entries_in(dir, path, sizeof path, &ino), 1);
    assert_null(strstr(last_device, "cache off"));

    assert_int_equal(chmod(dir, 0777), 0);
    assert_int_equal(run_small("seq 63 dim 40", msg, sizeof msg), FATTN_OK);
    if (!strstr(last_device, "disk program cache off") || !strstr(last_device, dir))
        fail_msg("device description: %s", last_device);

    assert_int_equal(chdir(old_cwd), 0);
    restore_env("HOME", old_home);
    restore_env("XDG_CACHE_HOME", old_xdg);
    free(old_home);
    free(old_xdg);
    setenv("FATTN_CACHE_DIR", cache_dir, 1);
    remove_tree(home);
    remove_tree(cwd);
}

/* ---- FATTN_OPENCL_OPTIONS (finding 5) -------------------------------------------- */

static void test_options_checked(void **state) {
    (void)state;
    require_opencl();
    char msg[4096];
    /* -DDTYPE=7 gave NaN with status OK; a bare -D or -I crashed PoCL. */
    static const char *const refused[][2] = {
        {"-DDTYPE=7", "-DDTYPE=7"},
        {"-cl-mad-enable -UBQ", "-UBQ"},
        {"-DWG=3", "-DWG=3"},
        {"-DKPAD", "-DKPAD"},
        {"-D", "'-D'"},
        {"-D FATTN_X=1", "'-D'"},
        {"-I", "'-I'"},
        {"-I /usr/include", "'-I'"},
        {"-D=1", "-D=1"},
        {"-cl-mad-enable -cl-finite-math-only", "-cl-finite-math-only"},
        {"-cl-fast-relaxed-math", "-cl-fast-relaxed-math"},
    };
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        setenv("FATTN_OPENCL_OPTIONS", refused[i][0], 1);
        const fattn_status st = run_small("seq 63 dim 40", msg, sizeof msg);
        if (st != FATTN_ERR_ENVIRONMENT || !strstr(msg, "FATTN_OPENCL_OPTIONS") ||
            !strstr(msg, refused[i][1]))
            fail_msg("FATTN_OPENCL_OPTIONS='%s': status %d, message: %s", refused[i][0], (int)st,
                     msg);
    }
    setenv("FATTN_OPENCL_OPTIONS", " -DFATTN_TEST_UNUSED=1\t-I/tmp ", 1);
    assert_int_equal(run_small("seq 63 dim 40", msg, sizeof msg), FATTN_OK);
    unsetenv("FATTN_OPENCL_OPTIONS");
}

/* ---- FATTN_OPENCL_TILES parsing (finding 7) --------------------------------------- */

static void test_tile_parsing(void **state) {
    (void)state;
    require_opencl();
    char msg[4096];
    static const char *const refused[] = {
        "64:4294967328x32/8x8", /* %d read this as 32 rows */
        "128: 24x12/8x4",       /* spaces: none anywhere */
        " 128:24x12/8x4",
        "128:24x12/8x4 ",
        "128:24x12/8x4,", /* an empty item */
        "128:+24x12/8x4",
        "128:0x12/8x4",
        "128:67108864x32/67108864x32", /* TQ x TK overflowed int in the message */
    };
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        setenv("FATTN_OPENCL_TILES", refused[i], 1);
        const fattn_status st = run_small("seq 129 dim 128", msg, sizeof msg);
        if (st != FATTN_ERR_ENVIRONMENT || !strstr(msg, "FATTN_OPENCL_TILES") ||
            !strstr(msg, "no spaces") || !strstr(msg, "1..4096"))
            fail_msg("FATTN_OPENCL_TILES='%s': status %d, message: %s", refused[i], (int)st, msg);
    }
    /* In range, but 131072 work-items per group: no device has them. */
    setenv("FATTN_OPENCL_TILES", "128:4096x32/4096x32", 1);
    assert_int_equal(run_small("seq 129 dim 128", msg, sizeof msg), FATTN_ERR_UNSUPPORTED);
    if (!strstr(msg, "131072 work-items")) fail_msg("message: %s", msg);
    unsetenv("FATTN_OPENCL_TILES");
}

/* ---- Allocation limits (finding 11) ---------------------------------------------- */

#ifdef HAVE_CL_HEADER
/* The few OpenCL calls the tests make themselves, from the loader that the
 * OpenCL module opened (the tests do not link OpenCL). */
static struct {
    cl_mem (*create_sub_buffer)(cl_mem, cl_mem_flags, cl_buffer_create_type, const void *,
                                cl_int *);
    cl_int (*release_mem)(cl_mem);
    cl_int (*mem_info)(cl_mem, cl_mem_info, size_t, void *, size_t *);
    cl_int (*context_info)(cl_context, cl_context_info, size_t, void *, size_t *);
    cl_int (*device_info)(cl_device_id, cl_device_info, size_t, void *, size_t *);
} cl;

static int load_cl(void) {
    void *h = dlopen("libOpenCL.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) h = dlopen("libOpenCL.so", RTLD_NOW | RTLD_LOCAL);
    if (!h) return 0;
    *(void **)&cl.create_sub_buffer = dlsym(h, "clCreateSubBuffer");
    *(void **)&cl.release_mem = dlsym(h, "clReleaseMemObject");
    *(void **)&cl.mem_info = dlsym(h, "clGetMemObjectInfo");
    *(void **)&cl.context_info = dlsym(h, "clGetContextInfo");
    *(void **)&cl.device_info = dlsym(h, "clGetDeviceInfo");
    return cl.create_sub_buffer && cl.release_mem && cl.mem_info && cl.context_info &&
           cl.device_info;
}

/* The device of the (one-device) context that m belongs to. */
static cl_device_id device_of(cl_mem m) {
    cl_context c;
    cl_device_id d;
    assert_int_equal(cl.mem_info(m, CL_MEM_CONTEXT, sizeof c, &c, NULL), CL_SUCCESS);
    assert_int_equal(cl.context_info(c, CL_CONTEXT_DEVICES, sizeof d, &d, NULL), CL_SUCCESS);
    return d;
}
#endif

/* NVIDIA's driver accepted 2^62 bytes lazily; the device's limits are
 * checked first, and the message names them. */
static void test_absurd_alloc(void **state) {
    (void)state;
    require_opencl();
    fattn_context *ctx;
    fattn_buffer *b = NULL;
    assert_int_equal(fattn_context_create(FATTN_BACKEND_OPENCL, 0, &ctx), FATTN_OK);
    assert_int_equal(fattn_buffer_alloc(ctx, (size_t)1 << 62, &b), FATTN_ERR_OUT_OF_MEMORY);
    assert_null(b);
    const char *msg = fattn_error_message(ctx);
    if (!strstr(msg, "4611686018427387904") || !strstr(msg, "one buffer") ||
        !strstr(msg, "global memory"))
        fail_msg("message: %s", msg);
#ifdef HAVE_CL_HEADER
    if (load_cl()) {
        assert_int_equal(fattn_buffer_alloc(ctx, 64, &b), FATTN_OK);
        const cl_device_id d = device_of((cl_mem)fattn_buffer_native(b));
        cl_ulong max_alloc = 0, global = 0;
        char text[2][32];
        assert_int_equal(
            cl.device_info(d, CL_DEVICE_MAX_MEM_ALLOC_SIZE, sizeof max_alloc, &max_alloc, NULL),
            CL_SUCCESS);
        assert_int_equal(cl.device_info(d, CL_DEVICE_GLOBAL_MEM_SIZE, sizeof global, &global, NULL),
                         CL_SUCCESS);
        snprintf(text[0], sizeof text[0], "%llu", (unsigned long long)max_alloc);
        snprintf(text[1], sizeof text[1], "%llu", (unsigned long long)global);
        fattn_buffer_free(b);
        /* One byte past the largest buffer: PoCL refused it, with only its own code. */
        assert_int_equal(fattn_buffer_alloc(ctx, (size_t)max_alloc + 1, &b),
                         FATTN_ERR_OUT_OF_MEMORY);
        msg = fattn_error_message(ctx);
        if (!strstr(msg, text[0]) || !strstr(msg, text[1])) fail_msg("message: %s", msg);
    }
#endif
    fattn_context_free(ctx);
}

/* ---- Overlap across wrappers and sub-buffers (finding 4) -------------------------- */

#ifdef HAVE_CL_HEADER
enum { AL_S = 64, AL_D = 16, AL_N = AL_S * AL_D };

typedef struct alias_run {
    fattn_context *ctx;
    fattn_attention_desc desc;
    fattn_buffer *k, *v;
    float q[AL_N], kv[2][AL_N];
    double want[AL_N];
} alias_run;

/* forward with Q at element q_off of qb and O at element o_off of ob. */
static fattn_status alias_forward(alias_run *a, fattn_buffer *qb, int64_t q_off, fattn_buffer *ob,
                                  int64_t o_off) {
    fattn_tensor t[4];
    fattn_buffer *bufs[4] = {qb, a->k, a->v, ob};
    for (int i = 0; i < 4; i++)
        assert_int_equal(fattn_tensor_init(bufs[i], FATTN_F32, FATTN_LAYOUT_BSHD, 1, 1, AL_S, AL_D,
                                           i == 0   ? q_off
                                           : i == 3 ? o_off
                                                    : 0,
                                           &t[i]),
                         FATTN_OK);
    return fattn_forward(a->ctx, &a->desc, &t[0], &t[1], &t[2], &t[3], NULL);
}

static void expect_overlap(alias_run *a, fattn_buffer *qb, fattn_buffer *ob, int64_t o_off) {
    const fattn_status st = alias_forward(a, qb, 0, ob, o_off);
    if (st != FATTN_ERR_INVALID_ARGUMENT || !strstr(fattn_error_message(a->ctx), "overlaps"))
        fail_msg("status %d: %s", (int)st, fattn_error_message(a->ctx));
}

/* Runs with Q at the start of qb (written first) and O at o_off of ob, and
 * checks O against the reference. */
static void expect_right(alias_run *a, fattn_buffer *qb, fattn_buffer *ob, int64_t o_off) {
    float o[AL_N];
    assert_int_equal(fattn_buffer_write(qb, 0, a->q, sizeof a->q), FATTN_OK);
    const fattn_status st = alias_forward(a, qb, 0, ob, o_off);
    if (st != FATTN_OK) fail_msg("status %d: %s", (int)st, fattn_error_message(a->ctx));
    assert_int_equal(fattn_buffer_read(ob, (size_t)o_off * sizeof(float), o, sizeof o), FATTN_OK);
    for (int i = 0; i < AL_N; i++)
        if (!(fabs(o[i] - a->want[i]) < 1e-5)) fail_msg("O[%d] = %g, want %g", i, o[i], a->want[i]);
}
#endif

static void test_aliasing_found(void **state) {
    (void)state;
    require_opencl();
#ifndef HAVE_CL_HEADER
    print_message("[  SKIPPED ] built without <CL/cl.h>: no sub-buffers to make\n");
    skip();
#else
    if (!load_cl()) {
        print_message("[  SKIPPED ] cannot open the OpenCL loader: %s\n", dlerror());
        skip();
    }
    static alias_run a;
    const size_t bytes = sizeof a.q;
    srand(1234);
    for (int i = 0; i < AL_N; i++) {
        a.q[i] = (float)rand() / (float)RAND_MAX - 0.5f;
        a.kv[0][i] = (float)rand() / (float)RAND_MAX - 0.5f;
        a.kv[1][i] = (float)rand() / (float)RAND_MAX - 0.5f;
    }
    a.desc = (fattn_attention_desc){.size = sizeof a.desc,
                                    .batch = 1,
                                    .heads_q = 1,
                                    .heads_kv = 1,
                                    .seq_q = AL_S,
                                    .seq_kv = AL_S,
                                    .head_dim = AL_D,
                                    .dtype = FATTN_F32};
    const ref_view rq = {a.q, FATTN_F32, 0, AL_N, AL_N, AL_D},
                   rk = {a.kv[0], FATTN_F32, 0, AL_N, AL_N, AL_D},
                   rv = {a.kv[1], FATTN_F32, 0, AL_N, AL_N, AL_D};
    double lse[AL_S];
    ref_attention(&a.desc, &rq, &rk, &rv, a.want, lse);
    assert_int_equal(fattn_context_create(FATTN_BACKEND_OPENCL, 0, &a.ctx), FATTN_OK);
    assert_int_equal(fattn_buffer_alloc(a.ctx, bytes, &a.k), FATTN_OK);
    assert_int_equal(fattn_buffer_alloc(a.ctx, bytes, &a.v), FATTN_OK);
    assert_int_equal(fattn_buffer_write(a.k, 0, a.kv[0], bytes), FATTN_OK);
    assert_int_equal(fattn_buffer_write(a.v, 0, a.kv[1], bytes), FATTN_OK);

    /* Two wrappers of one cl_mem, and the fattn buffer behind it. */
    fattn_buffer *big, *w1, *w2;
    assert_int_equal(fattn_buffer_alloc(a.ctx, 2 * bytes, &big), FATTN_OK);
    cl_mem native = (cl_mem)fattn_buffer_native(big);
    assert_int_equal(fattn_buffer_wrap(a.ctx, native, 2 * bytes, &w1), FATTN_OK);
    assert_int_equal(fattn_buffer_wrap(a.ctx, native, 2 * bytes, &w2), FATTN_OK);
    expect_overlap(&a, w1, w2, 0);
    expect_overlap(&a, w1, w2, AL_N - 1);
    expect_overlap(&a, big, w1, 0);
    expect_right(&a, w1, w2, AL_N); /* side by side: allowed */

    /* Sub-buffers, at origins the device allows. */
    cl_uint align_bits = 0;
    assert_int_equal(cl.device_info(device_of(native), CL_DEVICE_MEM_BASE_ADDR_ALIGN,
                                    sizeof align_bits, &align_bits, NULL),
                     CL_SUCCESS);
    const size_t align = align_bits / 8, second = (bytes + align - 1) / align * align;
    fattn_buffer *parent, *wp, *sub_q, *sub_o, *sub_x = NULL;
    assert_int_equal(fattn_buffer_alloc(a.ctx, second + bytes, &parent), FATTN_OK);
    cl_mem pm = (cl_mem)fattn_buffer_native(parent), sm[3] = {NULL, NULL, NULL};
    const cl_buffer_region regions[3] = {{0, bytes}, {second, bytes}, {align, bytes}};
    cl_int err;
    for (int i = 0; i < 3; i++) {
        sm[i] = cl.create_sub_buffer(pm, CL_MEM_READ_WRITE, CL_BUFFER_CREATE_TYPE_REGION,
                                     &regions[i], &err);
        assert_int_equal(err, CL_SUCCESS);
    }
    assert_int_equal(fattn_buffer_wrap(a.ctx, pm, second + bytes, &wp), FATTN_OK);
    assert_int_equal(fattn_buffer_wrap(a.ctx, sm[0], bytes, &sub_q), FATTN_OK);
    assert_int_equal(fattn_buffer_wrap(a.ctx, sm[1], bytes, &sub_o), FATTN_OK);
    expect_right(&a, sub_q, sub_o, 0); /* disjoint sub-buffers */
    expect_overlap(&a, wp, sub_q, 0);  /* the parent and its sub-buffer */
    expect_overlap(&a, parent, sub_q, 0);
    if (align < bytes) { /* a sub-buffer that starts inside Q */
        assert_int_equal(fattn_buffer_wrap(a.ctx, sm[2], bytes, &sub_x), FATTN_OK);
        expect_overlap(&a, wp, sub_x, 0);
        expect_overlap(&a, sub_q, sub_x, 0);
    } else {
        print_message("base address alignment %zu bytes: no sub-buffer starts inside Q\n", align);
    }
    fattn_buffer_free(sub_x);
    fattn_buffer_free(sub_o);
    fattn_buffer_free(sub_q);
    fattn_buffer_free(wp);
    for (int i = 0; i < 3; i++) cl.release_mem(sm[i]);
    fattn_buffer_free(parent);
    fattn_buffer_free(w2);
    fattn_buffer_free(w1);
    fattn_buffer_free(big);
    fattn_buffer_free(a.v);
    fattn_buffer_free(a.k);
    fattn_context_free(a.ctx);
#endif
}

static int setup(void **state) {
    (void)state;
    snprintf(cache_dir, sizeof cache_dir, "/tmp/fattn-cache-test-%d", (int)getpid());
    mkdir(cache_dir, 0755);
    setenv("FATTN_CACHE_DIR", cache_dir, 1);
    return 0;
}

static int teardown(void **state) {
    (void)state;
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", cache_dir);
    return system(cmd) == -1;
}

int main(int argc, char **argv) {
    /* Children of run_child: fresh processes, OpenCL untouched. */
    if (argc > 1 && strcmp(argv[1], "--first-use") == 0) return child_first_use();
    if (argc > 1 && strcmp(argv[1], "--enumeration") == 0) return child_enumeration();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_concurrent_first_use),
        cmocka_unit_test(test_no_device_reason),
        cmocka_unit_test(test_disk_cache_reused_and_repaired),
        cmocka_unit_test(test_cache_dir_not_private),
        cmocka_unit_test(test_cache_entry_not_trusted),
        cmocka_unit_test(test_cache_dir_unusable),
        cmocka_unit_test(test_cache_dir_default),
        cmocka_unit_test(test_build_error_has_log),
        cmocka_unit_test(test_device_selection),
        cmocka_unit_test(test_tile_override),
        cmocka_unit_test(test_tile_parsing),
        cmocka_unit_test(test_options_checked),
        cmocka_unit_test(test_absurd_alloc),
        cmocka_unit_test(test_aliasing_found),
        cmocka_unit_test(test_timer),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}

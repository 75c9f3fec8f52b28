/* OpenCL backend specifics: the on-disk program cache (reused by a second
 * context, a corrupt entry rebuilt and not trusted), device selection through
 * FATTN_OPENCL_PLATFORM / FATTN_OPENCL_DEVICE, tile overrides through
 * FATTN_OPENCL_TILES, and a kernel that fails to build giving a status whose
 * message carries the compiler's log. */
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "harness.h"

static char cache_dir[256];

static void require_opencl(void) {
    fattn_backend_info info;
    assert_int_equal(fattn_backend_get_info(FATTN_BACKEND_OPENCL, &info), FATTN_OK);
    if (!info.available) {
        const char *required = getenv("FATTN_TEST_REQUIRE");
        if (required && strstr(required, "opencl")) fail_msg("opencl is required but unavailable: %s", info.reason);
        print_message("[  SKIPPED ] backend opencl: %s\n", info.reason);
        skip();
    }
}

/* Runs a small case on a fresh OpenCL context and checks it. */
static fattn_status run_small(const char *case_name, char *msg, size_t len) {
    const fattn_case *c = NULL;
    for (size_t i = 0; i < fattn_case_count; i++)
        if (strcmp(fattn_cases[i].name, case_name) == 0) c = &fattn_cases[i];
    assert_non_null(c);
    fattn_context *ctx;
    fattn_status st = fattn_context_create(&ctx, FATTN_BACKEND_OPENCL, 0);
    if (st != FATTN_OK) {
        snprintf(msg, len, "%s", fattn_error_message(NULL));
        return st;
    }
    case_result r;
    st = harness_run(ctx, c, FATTN_F32, 99, HARNESS_TILED, &r);
    snprintf(msg, len, "%s", fattn_error_message(ctx));
    if (st == FATTN_OK && !harness_passed(&r)) fail_msg("case %s: max err %g", case_name, r.max_err);
    fattn_context_free(ctx);
    return st;
}

/* The single cache entry in cache_dir: its path and inode. */
static int cache_entry(char *path, size_t len, ino_t *ino) {
    char cmd[512];
    snprintf(cmd, sizeof cmd, "ls %s/*.clbin 2>/dev/null", cache_dir);
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
    assert_non_null(strstr(msg, "this_is_not_defined"));   /* the compiler's own words */

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
    setenv("FATTN_OPENCL_TILES", "128:24x12/8x4,256:8x8/4x8", 1);   /* odd shapes, RPT 3, KPT 3 */
    assert_int_equal(run_small("seq 129 dim 128", msg, sizeof msg), FATTN_OK);
    assert_int_equal(run_small("causal seq 127 dim 256", msg, sizeof msg), FATTN_OK);
    setenv("FATTN_OPENCL_TILES", "128:32x30/8x8", 1);   /* 30 keys: not a multiple of 4 */
    assert_int_equal(run_small("seq 129 dim 128", msg, sizeof msg), FATTN_ERR_ENVIRONMENT);
    assert_non_null(strstr(msg, "FATTN_OPENCL_TILES"));
    setenv("FATTN_OPENCL_TILES", "64:64x32/16x8,garbage", 1);   /* checked whole, for any bucket */
    assert_int_equal(run_small("seq 129 dim 128", msg, sizeof msg), FATTN_ERR_ENVIRONMENT);
    setenv("FATTN_OPENCL_TILES", "128:4096x64/16x8", 1);   /* 256 rows per work-item */
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
    assert_int_equal(fattn_context_create(&ctx, FATTN_BACKEND_OPENCL, 0), FATTN_OK);
    fattn_timer *t = NULL;
    assert_int_equal(fattn_timer_create(ctx, &t), FATTN_OK);
    assert_int_equal(fattn_timer_is_device_clock(t), 1);
    case_result r;
    assert_int_equal(harness_run(ctx, c, FATTN_F32, 7, HARNESS_TILED, &r), FATTN_OK);   /* builds the kernel */
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    assert_int_equal(fattn_timer_start(t), FATTN_OK);
    assert_int_equal(harness_run(ctx, c, FATTN_F32, 7, HARNESS_TILED, &r), FATTN_OK);
    assert_int_equal(fattn_timer_stop(t), FATTN_OK);
    double ms = 0.0;
    assert_int_equal(fattn_timer_elapsed_ms(t, &ms), FATTN_OK);
    clock_gettime(CLOCK_MONOTONIC, &b);
    const double host_ms = (double)(b.tv_sec - a.tv_sec) * 1e3 + (double)(b.tv_nsec - a.tv_nsec) * 1e-6;
    if (!(ms > 0.0 && ms <= host_ms * 1.05 + 1.0)) fail_msg("device timer %g ms, host clock around it %g ms", ms, host_ms);
    fattn_timer_free(t);
    fattn_context_free(ctx);
}

static void test_device_selection(void **state) {
    (void)state;
    require_opencl();
    char name[256], msg[4096];
    fattn_backend_info info;
    assert_int_equal(fattn_device_get_name(FATTN_BACKEND_OPENCL, 0, name, sizeof name), FATTN_OK);

    /* By name substring, in another case: the same device 0. */
    char sub[8] = "";
    for (int i = 0; i < 4 && name[i]; i++) sub[i] = (char)(name[i] ^ ((name[i] >= 'a' && name[i] <= 'z') || (name[i] >= 'A' && name[i] <= 'Z') ? 0x20 : 0));
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
    assert_int_equal(fattn_context_create(&ctx, FATTN_BACKEND_OPENCL, 0), FATTN_ERR_BACKEND_UNAVAILABLE);
    unsetenv("FATTN_OPENCL_DEVICE");

    setenv("FATTN_OPENCL_PLATFORM", "no-such-platform", 1);
    assert_int_equal(fattn_backend_get_info(FATTN_BACKEND_OPENCL, &info), FATTN_OK);
    assert_false(info.available);
    assert_non_null(strstr(info.reason, "FATTN_OPENCL_PLATFORM"));
    unsetenv("FATTN_OPENCL_PLATFORM");
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

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_disk_cache_reused_and_repaired),
        cmocka_unit_test(test_build_error_has_log),
        cmocka_unit_test(test_device_selection),
        cmocka_unit_test(test_tile_override),
        cmocka_unit_test(test_timer),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}

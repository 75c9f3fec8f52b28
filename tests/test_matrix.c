/* The OpenCL matrix path (backends/opencl/ocl_mma.c, kernels_cl/flash_mma.cl)
 * against the double reference, on the shared case table's prefill shapes
 * (every head-dim bucket, causal both ways, GQA, strided and packed
 * operands, large logits, empty and one-key problems) in f16 and bf16, and
 * its switch (FATTN_OPENCL_MATRIX). Each run checks, through the memory
 * report's kernel name, that the matrix kernel is the one that ran.
 *
 * On an NVIDIA GPU the primitives are the tensor-core instructions; ctest
 * runs this test with FATTN_OPENCL_MATRIX=emulate, so on PoCL the kernel runs
 * with the plain-OpenCL emulation of the same fragment layouts. A device
 * with no matrix path is a visible skip (a failure with
 * FATTN_TEST_REQUIRE=opencl-matrix). */
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "harness.h"
#include "test_backend.h"
#include "test_env.h"

/* The prefill cases of the shared table this test runs (the decoding ones
 * go to the split-KV kernel); FATTN_TEST_CASES narrows them further. */
static const char *const picked[] = {
    "head dim 1",
    "seq 63 dim 40",
    "seq 64 dim 64",
    "seq 65 dim 80",
    "seq 127 dim 96",
    "seq 129 dim 128",
    "seq 129 dim 256",
    "causal seq 65",
    "causal seq 127 dim 256",
    "causal sq>sk 129/63",
    "causal sq<sk 63/129",
    "GQA 8/2 causal bhsd",
    "MQA 4/1 dim 256",
    "kv strides differ dim 40",
    "packed qkv causal dim 96",
    "large logits causal",
    "single key equals v",
    "no keys",
    "causal tl sq>sk 101/37",
    "causal br sq>sk 101/37",
    "custom scale",
};

/* The decoding cases the split-KV matrix kernel runs (test_decode): the
 * head-dim buckets, GQA, MHA, 16 row tiles (GQA 32 x 8 rows), causal both
 * ways, BHSD and strided K/V. */
static const char *const decode_picked[] = {"causal decode 1/1000", "causal tl decode 1/77",
                                            "decode 2/1000 gqa 8 br", "decode 8/777 gqa 32 tl",
                                            "decode 1/7 mha d256"};

/* The few cases each tuned shape runs (test_tune). */
static const char *const tuned_cases[] = {"seq 65 dim 80", "causal seq 127 dim 256",
                                          "GQA 8/2 causal bhsd", "causal br sq>sk 101/37"};

static int listed(const char *const *list, size_t n, const char *name) {
    int in = 0;
    for (size_t i = 0; i < n; i++) in |= !strcmp(list[i], name);
    return in;
}

static int picked_case(const char *name) {
    return listed(picked, sizeof picked / sizeof picked[0], name) && test_case_selected(name);
}

/* FATTN_OPENCL_MATRIX names an emulation (of `layout`, "" for any): it
 * runs on every OpenCL device, so its absence is a failure, not a skip. */
static int emulating(const char *layout) {
    const char *m = getenv("FATTN_OPENCL_MATRIX");
    if (!m || strncmp(m, "emulate", 7) != 0) return 0;
    return !*layout || !strcmp(m, "emulate") || !strcmp(m + 7, layout);
}

/* An OpenCL context on device 0 whose matrix path is on, else a skip. */
static fattn_context *matrix_context(void) {
    fattn_backend_info info;
    test_use_backend(FATTN_BACKEND_OPENCL, &info);
    fattn_context *ctx = NULL;
    if (fattn_context_create(FATTN_BACKEND_OPENCL, 0, &ctx) != FATTN_OK)
        fail_msg("create opencl: %s", fattn_error_message(NULL));
    const char *name = fattn_context_device_name(ctx);
    print_message("opencl device 0: %s\n", name);
    if (!strstr(name, "matrix units: ") || strstr(name, "matrix units: scalar")) {
        char why[700];
        snprintf(why, sizeof why, "no matrix path on %s", name);
        fattn_context_free(ctx);
        if (emulating(""))
            fail_msg("FATTN_OPENCL_MATRIX=%s: %s", getenv("FATTN_OPENCL_MATRIX"), why);
        test_skip_unless_required("opencl-matrix", why);
    }
    return ctx;
}

/* The local memory (KiB) the matrix kernel may take on the device a
 * context describes ("N KiB of local memory a group"), capped by
 * FATTN_OPENCL_MATRIX_TUNE's local; 0 when the name does not say. */
static long matrix_local_kib(const fattn_context *ctx) {
    const char *at = strstr(fattn_context_device_name(ctx), " KiB of local memory a group");
    if (!at) return 0;
    const char *p = at;
    while (p > fattn_context_device_name(ctx) && p[-1] >= '0' && p[-1] <= '9') p--;
    long kib = strtol(p, NULL, 10);
    const char *tune = getenv("FATTN_OPENCL_MATRIX_TUNE");
    const char *cap = tune ? strstr(tune, "local=") : NULL;
    if (cap && atol(cap + 6) > 0 && atol(cap + 6) < kib) kib = atol(cap + 6);
    return kib;
}

/* The kernel a case must run: the matrix kernel, but for TF32 at head dim
 * 256 where a group has less local memory than its smallest tiles take
 * (96 KiB: the scalar kernel); with forced key splits, the split-KV matrix
 * kernel. */
static const char *want_kernel(const fattn_case *c, harness_path path, int splits, long kib) {
    if (splits) return "decode-matrix";
    return path == HARNESS_TF32 && c->head_dim > 128 && kib < 96 ? "tiled" : "matrix";
}

/* The picked cases, or with `only` those it lists; path HARNESS_TF32 runs
 * f32 with FATTN_FLAG_ALLOW_TF32; splits > 0 forces that many key splits
 * (FATTN_PARAM_KV_SPLITS), for the decoding cases. */
static void run_cases_split(fattn_dtype dtype, harness_path path, const char *const *only,
                            size_t nonly, int splits) {
    fattn_context *ctx = matrix_context();
    if (splits)
        assert_int_equal(fattn_context_set_param(ctx, FATTN_PARAM_KV_SPLITS, splits), FATTN_OK);
    int ran = 0, failures = 0;
    for (size_t i = 0; i < fattn_case_count; i++) {
        const fattn_case *c = &fattn_cases[i];
        if (only ? !listed(only, nonly, c->name) : !picked_case(c->name)) continue;
        fattn_attention_desc d = harness_desc(c, dtype);
        if (path == HARNESS_TF32) d.flags |= FATTN_FLAG_ALLOW_TF32;
        fattn_memory_report rep = FATTN_MEMORY_REPORT_INIT;
        assert_int_equal(fattn_context_memory_report(ctx, &d, &rep), FATTN_OK);
        const char *want = want_kernel(c, path, splits, matrix_local_kib(ctx));
        if (strcmp(rep.kernel, want) != 0) {
            print_error("case '%s': the kernel is '%s', not '%s': %s\n", c->name, rep.kernel,
                        want, fattn_error_message(ctx));
            failures++;
            continue;
        }
        case_result r;
        const fattn_status st =
            harness_run(ctx, c, dtype, 0x3a7c0000u + 97u * i + (unsigned)dtype, path, &r);
        if (st != FATTN_OK) {
            print_error("case '%s': %s: %s\n", c->name, fattn_status_string(st),
                        fattn_error_message(ctx));
            failures++;
        } else if (!harness_passed(&r)) {
            print_error("case '%s' seed 0x%llx: max err %.3g (tol %.3g), lse err %.3g (tol %.3g), "
                        "%lld NaN, %lld lse mismatches, %lld guard elements changed\n",
                        c->name, (unsigned long long)r.seed, r.max_err, r.tol, r.lse_err, r.lse_tol,
                        (long long)r.nan_count, (long long)r.lse_mismatch,
                        (long long)r.guard_broken);
            failures++;
        } else {
            ran++;
        }
    }
    fattn_context_free(ctx);
    test_finish_runs("opencl", splits ? "decode-matrix" : "matrix", ran, 0, failures, "");
}

static void run_cases(fattn_dtype dtype, harness_path path, const char *const *only, size_t nonly) {
    run_cases_split(dtype, path, only, nonly, 0);
}

static void test_f16(void **state) {
    (void)state;
    run_cases(FATTN_F16, HARNESS_TILED, NULL, 0);
}

static void test_bf16(void **state) {
    (void)state;
    run_cases(FATTN_BF16, HARNESS_TILED, NULL, 0);
}

/* f32 without FATTN_FLAG_ALLOW_TF32 is not the matrix path's: it runs the
 * scalar kernel. */
static void test_f32_scalar(void **state) {
    (void)state;
    fattn_context *ctx = matrix_context();
    fattn_attention_desc d = harness_desc(&fattn_cases[3], FATTN_F32);
    fattn_memory_report rep = FATTN_MEMORY_REPORT_INIT;
    assert_int_equal(fattn_context_memory_report(ctx, &d, &rep), FATTN_OK);
    assert_string_equal(rep.kernel, "tiled");
    fattn_context_free(ctx);
}

/* f32 with FATTN_FLAG_ALLOW_TF32 on a matrix path that has TF32 (the
 * device description says "+TF32"; else a visible skip): the picked cases
 * within TF32's tolerance, and the same run with a tuned shape. */
static void test_tf32(void **state) {
    (void)state;
    fattn_context *ctx = matrix_context();
    const int has = strstr(fattn_context_device_name(ctx), "(+TF32)") != NULL;
    char why[400];
    snprintf(why, sizeof why, "no TF32 on %s", fattn_context_device_name(ctx));
    fattn_context_free(ctx);
    if (!has && emulating("-nv"))
        fail_msg("FATTN_OPENCL_MATRIX=%s: %s", getenv("FATTN_OPENCL_MATRIX"), why);
    if (!has) test_skip_unless_required("opencl-tf32", why);
    run_cases(FATTN_F32, HARNESS_TF32, NULL, 0);
}

static void with_env(const char *value, fattn_status want, const char *kernel) {
    const char *old = getenv("FATTN_OPENCL_MATRIX");
    char saved[64] = "";
    if (old) snprintf(saved, sizeof saved, "%s", old);
    setenv("FATTN_OPENCL_MATRIX", value, 1);
    fattn_context *ctx = NULL;
    const fattn_status st = fattn_context_create(FATTN_BACKEND_OPENCL, 0, &ctx);
    char msg[600];
    snprintf(msg, sizeof msg, "%s", fattn_error_message(NULL));
    if (old)
        setenv("FATTN_OPENCL_MATRIX", saved, 1);
    else
        unsetenv("FATTN_OPENCL_MATRIX");
    assert_int_equal(st, want);
    if (st != FATTN_OK) {
        assert_non_null(strstr(msg, "FATTN_OPENCL_MATRIX"));
        return;
    }
    assert_non_null(strstr(fattn_context_device_name(ctx), "matrix units: scalar"));
    fattn_attention_desc d = harness_desc(&fattn_cases[3], FATTN_F16);
    fattn_memory_report rep = FATTN_MEMORY_REPORT_INIT;
    assert_int_equal(fattn_context_memory_report(ctx, &d, &rep), FATTN_OK);
    assert_string_equal(rep.kernel, kernel);
    fattn_context_free(ctx);
}

/* FATTN_OPENCL_MATRIX=off gives the scalar kernel; a bad value fails,
 * naming the variable. */
static void test_switch(void **state) {
    (void)state;
    fattn_backend_info info;
    test_use_backend(FATTN_BACKEND_OPENCL, &info);
    with_env("off", FATTN_OK, "tiled");
    with_env("tensor", FATTN_ERR_ENVIRONMENT, NULL);
    with_env("emulate-xe9", FATTN_ERR_ENVIRONMENT, NULL); /* near a layout's name */
}

/* FATTN_OPENCL_MATRIX_TUNE: other tile shapes compute the same results
 * (every shape knob moved off the table's, the scale folded into the
 * exponent; TF32 too where the emulation has it), and a shape the kernel
 * cannot take is FATTN_ERR_ENVIRONMENT naming the variable, not a quiet
 * fallback to the scalar kernel. */
static void test_tune(void **state) {
    (void)state;
    const char *old = getenv("FATTN_OPENCL_MATRIX_TUNE");
    char saved[128] = "";
    if (old) snprintf(saved, sizeof saved, "%s", old);
    /* The first two fit 48 KiB of local memory (what NVIDIA's OpenCL
     * reports) at head dim 256, the first with padded tile rows (PADL), the
     * second swizzled; the third gives the table's shapes within 48
     * KiB, which a device runs where the local probe does not pass (56: an
     * emulation's scratch, up to 5 KiB, comes on top). */
    const char *const shapes[] = {"bm=32,bn=16,nw=2,qreg=0,stages=2,fold=1,pad=1",
                                  "bm=64,bn=16,nw=4,qreg=1,stages=1,fold=1", "local=56"};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        setenv("FATTN_OPENCL_MATRIX_TUNE", shapes[i], 1);
        print_message("FATTN_OPENCL_MATRIX_TUNE=%s\n", shapes[i]);
        run_cases(i % 2 ? FATTN_BF16 : FATTN_F16, HARNESS_TILED, tuned_cases,
                  sizeof tuned_cases / sizeof tuned_cases[0]);
        if (emulating("-nv") && i < 2) /* and TF32, whose tiles are twice the bytes */
            run_cases(FATTN_F32, HARNESS_TF32, tuned_cases,
                      sizeof tuned_cases / sizeof tuned_cases[0]);
    }
    setenv("FATTN_OPENCL_MATRIX_TUNE", "bm=100,nw=4", 1);
    fattn_context *ctx = matrix_context();
    fattn_attention_desc d = harness_desc(&fattn_cases[3], FATTN_F16);
    fattn_memory_report rep = FATTN_MEMORY_REPORT_INIT;
    const fattn_status st = fattn_context_memory_report(ctx, &d, &rep);
    char msg[600];
    snprintf(msg, sizeof msg, "%s", fattn_error_message(ctx));
    fattn_context_free(ctx);
    if (old)
        setenv("FATTN_OPENCL_MATRIX_TUNE", saved, 1);
    else
        unsetenv("FATTN_OPENCL_MATRIX_TUNE");
    assert_int_equal(st, FATTN_ERR_ENVIRONMENT);
    assert_non_null(strstr(msg, "FATTN_OPENCL_MATRIX_TUNE"));
}

/* With FATTN_DECODE_TUNE set to `tune` (NULL: unset) for one context. */
static void decode_tune_env(const char *tune, char *saved, size_t len, int restore) {
    if (!restore) {
        const char *old = getenv("FATTN_DECODE_TUNE");
        snprintf(saved, len, "%s", old ? old : "");
        if (tune)
            setenv("FATTN_DECODE_TUNE", tune, 1);
        else
            unsetenv("FATTN_DECODE_TUNE");
    } else if (*saved) {
        setenv("FATTN_DECODE_TUNE", saved, 1);
    } else {
        unsetenv("FATTN_DECODE_TUNE");
    }
}

/* The split-KV decode kernel on matrix units (kernels_cl/decode_mma.cl):
 * the picked decoding cases in f16 and bf16 at 3 and 7 forced splits, the
 * ring shapes moved off the defaults (one warp of three stages; one warp
 * of 32-key tiles), and the ways it gives way to the scalar decode kernel
 * (f32; FATTN_DECODE_TUNE mma=0). */
static void test_decode(void **state) {
    (void)state;
    const size_t n = sizeof decode_picked / sizeof decode_picked[0];
    char saved[128];
    decode_tune_env(NULL, saved, sizeof saved, 0);
    run_cases_split(FATTN_F16, HARNESS_TILED, decode_picked, n, 3);
    run_cases_split(FATTN_BF16, HARNESS_TILED, decode_picked, n, 7);
    /* Both fit NVIDIA's 48 KiB of local memory at head dim 128. */
    const char *const shapes[] = {"nw=1,stages=3", "nw=1,kw=32,stages=2"};
    for (size_t i = 0; i < 2; i++) {
        decode_tune_env(shapes[i], saved, sizeof saved, 0);
        print_message("FATTN_DECODE_TUNE=%s\n", shapes[i]);
        run_cases_split(i ? FATTN_BF16 : FATTN_F16, HARNESS_TILED, decode_picked, 3, 2);
        decode_tune_env(NULL, saved, sizeof saved, 1);
    }
    const char *const scalar[] = {NULL, "mma=0"};
    for (size_t i = 0; i < 2; i++) {
        decode_tune_env(scalar[i], saved, sizeof saved, 0);
        fattn_context *ctx = matrix_context();
        decode_tune_env(NULL, saved, sizeof saved, 1);
        assert_int_equal(fattn_context_set_param(ctx, FATTN_PARAM_KV_SPLITS, 3), FATTN_OK);
        fattn_attention_desc d = harness_desc(&fattn_cases[0], i ? FATTN_F16 : FATTN_F32);
        for (size_t c = 0; c < fattn_case_count; c++)
            if (!strcmp(fattn_cases[c].name, decode_picked[0]))
                d = harness_desc(&fattn_cases[c], i ? FATTN_F16 : FATTN_F32);
        fattn_memory_report rep = FATTN_MEMORY_REPORT_INIT;
        assert_int_equal(fattn_context_memory_report(ctx, &d, &rep), FATTN_OK);
        assert_string_equal(rep.kernel, "decode");
        fattn_context_free(ctx);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_f16),        cmocka_unit_test(test_bf16),
        cmocka_unit_test(test_f32_scalar), cmocka_unit_test(test_tf32),
        cmocka_unit_test(test_switch),     cmocka_unit_test(test_tune),
        cmocka_unit_test(test_decode),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

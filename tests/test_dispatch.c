/* Run-time dispatch without devices: mock backends put in the registry with
 * fattn_registry_override show which backend and device a context gets from
 * the API, FATTN_BACKEND and FATTN_DEVICE, and that calls reach the backend. */
/* setenv/unsetenv are POSIX, hidden by -std=c11 without this. */
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "backend.h"
#include "fattn.h"
#include "registry.h"

/* ---- The mock backend ---------------------------------------------------------- */

/* What each mock kind reports, and what was done to it. probe and device_name
 * take no state, so the configuration lives here, indexed by kind. */
typedef struct mock_record {
    int device_count, gpu_count;
    char reason[256];
    fattn_status plan_status;   /* FATTN_OK: plan succeeds */
    char plan_message[128];
    int open_calls, close_calls, opened_device;
    int alloc_calls, free_calls;
    int plan_calls, forward_calls;
    int forward_variant;        /* the plan variant forward() received */
    fattn_problem last_problem; /* as forward() received it */
} mock_record;

static mock_record mocks[FATTN_BACKEND_COUNT];
static fattn_backend_vtable mock_vt[FATTN_BACKEND_COUNT];

typedef struct mock_state {
    fattn_backend_kind kind;
    int device;
} mock_state;

enum { MOCK_VARIANT = 7 };

static void mock_probe(fattn_backend_kind k, fattn_probe *out) {
    out->device_count = mocks[k].device_count;
    out->gpu_count = mocks[k].gpu_count;
    snprintf(out->reason, sizeof out->reason, "%s", mocks[k].reason);
}

static fattn_status mock_device_name(fattn_backend_kind k, int device, char *buf, size_t len) {
    snprintf(buf, len, "mock %s device %d", fattn_backend_name(k), device);
    return FATTN_OK;
}

/* probe and device_name have no state argument: one small wrapper per kind. */
#define MOCK_KIND_FNS(K, lower)                                                             \
    static void probe_##lower(fattn_probe *out) { mock_probe(K, out); }                     \
    static fattn_status device_name_##lower(int device, char *buf, size_t len, fattn_msg *m) { \
        (void)m;                                                                            \
        return mock_device_name(K, device, buf, len);                                       \
    }
MOCK_KIND_FNS(FATTN_BACKEND_CPU, cpu)
MOCK_KIND_FNS(FATTN_BACKEND_CUDA, cuda)
MOCK_KIND_FNS(FATTN_BACKEND_OPENCL, opencl)

static fattn_status mock_open_kind(fattn_backend_kind k, int device, void **state, fattn_msg *msg) {
    mock_state *s = malloc(sizeof *s);
    if (!s) return fattn_fail(msg, FATTN_ERR_OUT_OF_MEMORY, "mock: no memory");
    s->kind = k;
    s->device = device;
    mocks[k].open_calls++;
    mocks[k].opened_device = device;
    *state = s;
    return FATTN_OK;
}

#define MOCK_OPEN(K, lower)                                                          \
    static fattn_status open_##lower(int device, void **state, fattn_msg *msg) {     \
        return mock_open_kind(K, device, state, msg);                                \
    }
MOCK_OPEN(FATTN_BACKEND_CPU, cpu)
MOCK_OPEN(FATTN_BACKEND_CUDA, cuda)
MOCK_OPEN(FATTN_BACKEND_OPENCL, opencl)

static void mock_close(void *state) {
    mock_state *s = state;
    mocks[s->kind].close_calls++;
    free(s);
}

static fattn_status mock_alloc(void *state, size_t bytes, void **mem, fattn_msg *msg) {
    mock_state *s = state;
    void *p = calloc(1, bytes);
    if (!p) return fattn_fail(msg, FATTN_ERR_OUT_OF_MEMORY, "mock: no memory");
    mocks[s->kind].alloc_calls++;
    *mem = p;
    return FATTN_OK;
}

static void mock_free(void *state, void *mem) {
    mock_state *s = state;
    mocks[s->kind].free_calls++;
    free(mem);
}

static fattn_status mock_write(void *state, void *mem, size_t offset, const void *src,
                               size_t bytes, fattn_msg *msg) {
    (void)state;
    (void)msg;
    memcpy((char *)mem + offset, src, bytes);
    return FATTN_OK;
}

static fattn_status mock_read(void *state, void *mem, size_t offset, void *dst, size_t bytes,
                              fattn_msg *msg) {
    (void)state;
    (void)msg;
    memcpy(dst, (const char *)mem + offset, bytes);
    return FATTN_OK;
}

static void *mock_native(void *state, void *mem) {
    (void)state;
    return mem;
}

static fattn_status mock_region(void *state, void *mem, const void **root, uint64_t *start,
                                fattn_msg *msg) {
    (void)state;
    (void)msg;
    *root = NULL;
    *start = (uint64_t)(uintptr_t)mem;
    return FATTN_OK;
}

static fattn_status mock_plan(void *state, const fattn_problem *p, fattn_plan *plan,
                              fattn_msg *msg) {
    (void)p;
    mock_record *r = &mocks[((mock_state *)state)->kind];
    r->plan_calls++;
    if (r->plan_status != FATTN_OK) return fattn_fail(msg, r->plan_status, "%s", r->plan_message);
    plan->variant = MOCK_VARIANT;
    plan->tiling.tile_q = 8;
    plan->tiling.tile_kv = 16;
    plan->tiling.concurrent_groups = 3;
    plan->tiling.workspace_bytes = 100;
    return FATTN_OK;
}

static fattn_status mock_forward(void *state, const fattn_problem *p, const fattn_plan *plan,
                                 fattn_msg *msg) {
    (void)msg;
    mock_record *r = &mocks[((mock_state *)state)->kind];
    r->forward_calls++;
    r->forward_variant = plan->variant;
    r->last_problem = *p;
    return FATTN_OK;
}

static void make_mock(fattn_backend_kind k, const char *name, void (*probe)(fattn_probe *),
                      fattn_status (*device_name)(int, char *, size_t, fattn_msg *),
                      fattn_status (*open)(int, void **, fattn_msg *)) {
    fattn_backend_vtable *vt = &mock_vt[k];
    memset(vt, 0, sizeof *vt);
    vt->abi = FATTN_BACKEND_ABI;
    vt->size = sizeof *vt;
    vt->kind = k;
    vt->name = name;
    vt->native_is_host = 0;
    vt->probe = probe;
    vt->device_name = device_name;
    vt->open = open;
    vt->close = mock_close;
    vt->set_stream = NULL;      /* optional: no queues */
    vt->synchronize = NULL;     /* optional: synchronous */
    vt->buffer_alloc = mock_alloc;
    vt->buffer_wrap = NULL;     /* optional: fattn_buffer_wrap is then unsupported */
    vt->buffer_free = mock_free;
    vt->buffer_write = mock_write;
    vt->buffer_read = mock_read;
    vt->buffer_native = mock_native;
    vt->buffer_region = mock_region;
    vt->plan = mock_plan;
    vt->forward = mock_forward;
    vt->forward_naive = NULL;   /* optional: fattn_forward_naive is then unsupported */
}

/* Sets what a mock kind's probe reports. */
static void mock_devices(fattn_backend_kind k, int count, int gpus, const char *reason) {
    mocks[k].device_count = count;
    mocks[k].gpu_count = gpus;
    snprintf(mocks[k].reason, sizeof mocks[k].reason, "%s", reason);
}

static void unset_all_env(void) {
    unsetenv("FATTN_BACKEND");
    unsetenv("FATTN_DEVICE");
    unsetenv("FATTN_CPU_THREADS");
}

/* Every backend replaced by a mock. By default only the CPU mock has a
 * device; each test turns on what it needs. */
static int setup_mocks(void **state) {
    (void)state;
    unset_all_env();
    memset(mocks, 0, sizeof mocks);
    make_mock(FATTN_BACKEND_CPU, "cpu", probe_cpu, device_name_cpu, open_cpu);
    make_mock(FATTN_BACKEND_CUDA, "cuda", probe_cuda, device_name_cuda, open_cuda);
    make_mock(FATTN_BACKEND_OPENCL, "opencl", probe_opencl, device_name_opencl, open_opencl);
    mock_devices(FATTN_BACKEND_CPU, 1, 0, "");
    mock_devices(FATTN_BACKEND_CUDA, 0, 0, "mock cuda: off");
    mock_devices(FATTN_BACKEND_OPENCL, 0, 0, "mock opencl: off");
    for (int k = FATTN_BACKEND_CPU; k < FATTN_BACKEND_COUNT; k++)
        fattn_registry_override((fattn_backend_kind)k, &mock_vt[k]);
    return 0;
}

/* Restores the real registry; also runs after a failed assertion, so no mock
 * or variable leaks into the next test. */
static int teardown_all(void **state) {
    (void)state;
    for (int k = FATTN_BACKEND_CPU; k < FATTN_BACKEND_COUNT; k++)
        fattn_registry_override((fattn_backend_kind)k, NULL);
    unset_all_env();
    return 0;
}

static int setup_real(void **state) {
    (void)state;
    unset_all_env();
    for (int k = FATTN_BACKEND_CPU; k < FATTN_BACKEND_COUNT; k++)
        fattn_registry_override((fattn_backend_kind)k, NULL);
    return 0;
}

/* Creates a context that must succeed; returns its backend kind. */
static fattn_backend_kind create_kind(fattn_backend_kind asked, int device, fattn_context **ctx) {
    const fattn_status st = fattn_context_create(ctx, asked, device);
    if (st != FATTN_OK)
        fail_msg("fattn_context_create(%s, %d): %s: %s", fattn_backend_name(asked), device,
                 fattn_status_string(st), fattn_error_message(NULL));
    assert_non_null(*ctx);
    return fattn_context_backend(*ctx);
}

static int total_opens(void) {
    return mocks[FATTN_BACKEND_CPU].open_calls + mocks[FATTN_BACKEND_CUDA].open_calls +
           mocks[FATTN_BACKEND_OPENCL].open_calls;
}

/* ---- FATTN_BACKEND ---------------------------------------------------------------- */

static void test_env_backend_selects(void **state) {
    (void)state;
    /* Every backend has a device, so without FATTN_BACKEND auto would pick
     * CUDA; the variable must override that preference. */
    mock_devices(FATTN_BACKEND_CUDA, 1, 1, "");
    mock_devices(FATTN_BACKEND_OPENCL, 1, 1, "");
    static const struct {
        const char *value;
        fattn_backend_kind want;
    } cases[] = {
        {"cpu", FATTN_BACKEND_CPU},       {"cuda", FATTN_BACKEND_CUDA},
        {"opencl", FATTN_BACKEND_OPENCL}, {"auto", FATTN_BACKEND_CUDA},
        {"CUDA", FATTN_BACKEND_CUDA},     {"OpenCL", FATTN_BACKEND_OPENCL},
        {"Cpu", FATTN_BACKEND_CPU},       {"", FATTN_BACKEND_CUDA}, /* empty = unset */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        setenv("FATTN_BACKEND", cases[i].value, 1);
        fattn_context *ctx = NULL;
        const fattn_backend_kind got = create_kind(FATTN_BACKEND_AUTO, -1, &ctx);
        if (got != cases[i].want)
            fail_msg("FATTN_BACKEND='%s' gave %s, expected %s", cases[i].value,
                     fattn_backend_name(got), fattn_backend_name(cases[i].want));
        assert_string_equal(fattn_context_backend_name(ctx), fattn_backend_name(cases[i].want));
        assert_int_equal(mocks[cases[i].want].open_calls, 1);
        fattn_context_free(ctx);
        assert_int_equal(mocks[cases[i].want].close_calls, 1);
        mocks[cases[i].want].open_calls = mocks[cases[i].want].close_calls = 0;
    }
    unsetenv("FATTN_BACKEND");
}

static void test_env_backend_unknown(void **state) {
    (void)state;
    mock_devices(FATTN_BACKEND_CUDA, 1, 1, "");
    setenv("FATTN_BACKEND", "vulkan", 1);
    fattn_context *ctx = (fattn_context *)&ctx;   /* must be reset to NULL */
    assert_int_equal(fattn_context_create(&ctx, FATTN_BACKEND_AUTO, -1), FATTN_ERR_UNKNOWN_BACKEND);
    assert_null(ctx);
    const char *msg = fattn_error_message(NULL);
    assert_non_null(strstr(msg, "vulkan"));
    assert_non_null(strstr(msg, "auto, cpu, cuda, opencl"));
    /* No backend was opened instead. */
    assert_int_equal(total_opens(), 0);
    unsetenv("FATTN_BACKEND");
}

static void test_api_kind_beats_env(void **state) {
    (void)state;
    mock_devices(FATTN_BACKEND_CUDA, 1, 1, "");
    mock_devices(FATTN_BACKEND_OPENCL, 1, 1, "");
    setenv("FATTN_BACKEND", "cuda", 1);
    fattn_context *ctx = NULL;
    assert_int_equal(create_kind(FATTN_BACKEND_CPU, -1, &ctx), FATTN_BACKEND_CPU);
    fattn_context_free(ctx);
    assert_int_equal(create_kind(FATTN_BACKEND_OPENCL, -1, &ctx), FATTN_BACKEND_OPENCL);
    fattn_context_free(ctx);
    assert_int_equal(mocks[FATTN_BACKEND_CUDA].open_calls, 0);
    unsetenv("FATTN_BACKEND");
}

/* ---- AUTO preference -------------------------------------------------------------- */

static void test_auto_prefers_cuda(void **state) {
    (void)state;
    mock_devices(FATTN_BACKEND_CUDA, 1, 1, "");
    mock_devices(FATTN_BACKEND_OPENCL, 2, 2, "");
    fattn_context *ctx = NULL;
    assert_int_equal(create_kind(FATTN_BACKEND_AUTO, -1, &ctx), FATTN_BACKEND_CUDA);
    assert_int_equal(fattn_context_device(ctx), 0);
    assert_string_equal(fattn_context_device_name(ctx), "mock cuda device 0");
    fattn_context_free(ctx);
}

static void test_auto_opencl_gpu_next(void **state) {
    (void)state;
    mock_devices(FATTN_BACKEND_CUDA, 0, 0, "no driver");
    mock_devices(FATTN_BACKEND_OPENCL, 2, 1, "");
    fattn_context *ctx = NULL;
    assert_int_equal(create_kind(FATTN_BACKEND_AUTO, -1, &ctx), FATTN_BACKEND_OPENCL);
    assert_int_equal(mocks[FATTN_BACKEND_CUDA].open_calls, 0);
    fattn_context_free(ctx);
}

static void test_auto_skips_opencl_cpu_only(void **state) {
    (void)state;
    /* An OpenCL platform that offers only CPU devices is not worth more than
     * the native CPU backend: auto goes to cpu. */
    mock_devices(FATTN_BACKEND_CUDA, 0, 0, "no driver");
    mock_devices(FATTN_BACKEND_OPENCL, 1, 0, "");
    fattn_context *ctx = NULL;
    assert_int_equal(create_kind(FATTN_BACKEND_AUTO, -1, &ctx), FATTN_BACKEND_CPU);
    assert_int_equal(mocks[FATTN_BACKEND_OPENCL].open_calls, 0);
    fattn_context_free(ctx);

    /* Asked for by name, that same OpenCL backend is used as asked. */
    setenv("FATTN_BACKEND", "opencl", 1);
    assert_int_equal(create_kind(FATTN_BACKEND_AUTO, -1, &ctx), FATTN_BACKEND_OPENCL);
    fattn_context_free(ctx);
    unsetenv("FATTN_BACKEND");

    /* Nothing but the CPU: auto takes it. */
    mock_devices(FATTN_BACKEND_OPENCL, 0, 0, "no platform");
    assert_int_equal(create_kind(FATTN_BACKEND_AUTO, -1, &ctx), FATTN_BACKEND_CPU);
    fattn_context_free(ctx);
}

static void test_named_unavailable_no_fallback(void **state) {
    (void)state;
    mock_devices(FATTN_BACKEND_CUDA, 0, 0, "no driver");
    mock_devices(FATTN_BACKEND_OPENCL, 1, 1, "");
    fattn_context *ctx = (fattn_context *)&ctx;
    /* By the API. */
    assert_int_equal(fattn_context_create(&ctx, FATTN_BACKEND_CUDA, -1),
                     FATTN_ERR_BACKEND_UNAVAILABLE);
    assert_null(ctx);
    assert_non_null(strstr(fattn_error_message(NULL), "no driver"));
    assert_non_null(strstr(fattn_error_message(NULL), "cuda"));
    /* By FATTN_BACKEND: also named, so also no fallback. */
    setenv("FATTN_BACKEND", "cuda", 1);
    assert_int_equal(fattn_context_create(&ctx, FATTN_BACKEND_AUTO, -1),
                     FATTN_ERR_BACKEND_UNAVAILABLE);
    assert_null(ctx);
    assert_non_null(strstr(fattn_error_message(NULL), "no driver"));
    /* A probe with no reason still yields one. */
    mock_devices(FATTN_BACKEND_CUDA, 0, 0, "");
    assert_int_equal(fattn_context_create(&ctx, FATTN_BACKEND_AUTO, -1),
                     FATTN_ERR_BACKEND_UNAVAILABLE);
    assert_non_null(strstr(fattn_error_message(NULL), "no devices found"));
    assert_int_equal(total_opens(), 0);
    unsetenv("FATTN_BACKEND");
}

/* ---- Devices ---------------------------------------------------------------------- */

static void test_env_device(void **state) {
    (void)state;
    mock_devices(FATTN_BACKEND_CUDA, 2, 2, "");
    fattn_context *ctx = NULL;

    setenv("FATTN_DEVICE", "1", 1);
    assert_int_equal(create_kind(FATTN_BACKEND_CUDA, -1, &ctx), FATTN_BACKEND_CUDA);
    assert_int_equal(fattn_context_device(ctx), 1);
    assert_int_equal(mocks[FATTN_BACKEND_CUDA].opened_device, 1);
    assert_string_equal(fattn_context_device_name(ctx), "mock cuda device 1");
    fattn_context_free(ctx);

    /* The explicit argument wins over FATTN_DEVICE. */
    assert_int_equal(create_kind(FATTN_BACKEND_CUDA, 0, &ctx), FATTN_BACKEND_CUDA);
    assert_int_equal(fattn_context_device(ctx), 0);
    assert_int_equal(mocks[FATTN_BACKEND_CUDA].opened_device, 0);
    fattn_context_free(ctx);

    /* Unset: device 0. */
    unsetenv("FATTN_DEVICE");
    assert_int_equal(create_kind(FATTN_BACKEND_CUDA, -1, &ctx), FATTN_BACKEND_CUDA);
    assert_int_equal(fattn_context_device(ctx), 0);
    fattn_context_free(ctx);
    assert_int_equal(mocks[FATTN_BACKEND_CUDA].open_calls, 3);
    assert_int_equal(mocks[FATTN_BACKEND_CUDA].close_calls, 3);
}

static void test_env_device_invalid(void **state) {
    (void)state;
    mock_devices(FATTN_BACKEND_CUDA, 2, 2, "");
    static const char *const bad[] = {"abc", "-3", "1x", " ", "99999999999999999999"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        setenv("FATTN_DEVICE", bad[i], 1);
        fattn_context *ctx = (fattn_context *)&ctx;
        const fattn_status st = fattn_context_create(&ctx, FATTN_BACKEND_CUDA, -1);
        if (st != FATTN_ERR_ENVIRONMENT)
            fail_msg("FATTN_DEVICE='%s': status %d, expected FATTN_ERR_ENVIRONMENT", bad[i], (int)st);
        assert_null(ctx);
        assert_non_null(strstr(fattn_error_message(NULL), "FATTN_DEVICE"));
    }
    assert_int_equal(total_opens(), 0);
    unsetenv("FATTN_DEVICE");
}

static void test_device_out_of_range(void **state) {
    (void)state;
    mock_devices(FATTN_BACKEND_CUDA, 2, 2, "");
    fattn_context *ctx = (fattn_context *)&ctx;
    assert_int_equal(fattn_context_create(&ctx, FATTN_BACKEND_CUDA, 2), FATTN_ERR_NO_DEVICE);
    assert_null(ctx);
    assert_true(strlen(fattn_error_message(NULL)) > 0);
    setenv("FATTN_DEVICE", "5", 1);
    assert_int_equal(fattn_context_create(&ctx, FATTN_BACKEND_CUDA, -1), FATTN_ERR_NO_DEVICE);
    assert_null(ctx);
    unsetenv("FATTN_DEVICE");
    /* Below -1 is an argument error, not "use the default". */
    assert_int_equal(fattn_context_create(&ctx, FATTN_BACKEND_CUDA, -2),
                     FATTN_ERR_INVALID_ARGUMENT);
    assert_int_equal(fattn_context_create(&ctx, (fattn_backend_kind)9, 0),
                     FATTN_ERR_INVALID_ARGUMENT);
    assert_int_equal(fattn_context_create(NULL, FATTN_BACKEND_CUDA, 0), FATTN_ERR_NULL_POINTER);
    assert_int_equal(total_opens(), 0);

    /* fattn_device_get_name goes through the same bounds. */
    char name[64];
    assert_int_equal(fattn_device_get_name(FATTN_BACKEND_CUDA, 1, name, sizeof name), FATTN_OK);
    assert_string_equal(name, "mock cuda device 1");
    assert_int_equal(fattn_device_get_name(FATTN_BACKEND_CUDA, 2, name, sizeof name),
                     FATTN_ERR_NO_DEVICE);
    assert_int_equal(fattn_device_get_name(FATTN_BACKEND_OPENCL, 0, name, sizeof name),
                     FATTN_ERR_BACKEND_UNAVAILABLE);
}

/* ---- fattn_backend_get_info --------------------------------------------------------- */

static void test_info_from_mocks(void **state) {
    (void)state;
    fattn_backend_info info;
    mock_devices(FATTN_BACKEND_CUDA, 3, 2, "");
    assert_int_equal(fattn_backend_get_info(FATTN_BACKEND_CUDA, &info), FATTN_OK);
    assert_int_equal(info.kind, FATTN_BACKEND_CUDA);
    assert_string_equal(info.name, "cuda");
    assert_int_equal(info.available, 1);
    assert_int_equal(info.device_count, 3);
    assert_int_equal(info.gpu_count, 2);
    assert_string_equal(info.reason, "");

    mock_devices(FATTN_BACKEND_CUDA, 0, 0, "no driver");
    assert_int_equal(fattn_backend_get_info(FATTN_BACKEND_CUDA, &info), FATTN_OK);
    assert_int_equal(info.available, 0);
    assert_int_equal(info.device_count, 0);
    assert_int_equal(info.gpu_count, 0);
    assert_string_equal(info.reason, "no driver");

    /* Unavailable without a reason from the probe still says why. */
    mock_devices(FATTN_BACKEND_OPENCL, 0, 0, "");
    assert_int_equal(fattn_backend_get_info(FATTN_BACKEND_OPENCL, &info), FATTN_OK);
    assert_string_equal(info.name, "opencl");
    assert_int_equal(info.available, 0);
    assert_string_equal(info.reason, "no devices found");

    /* A probe's negative counts are clamped to 0. */
    mock_devices(FATTN_BACKEND_OPENCL, -4, -1, "broken");
    assert_int_equal(fattn_backend_get_info(FATTN_BACKEND_OPENCL, &info), FATTN_OK);
    assert_int_equal(info.available, 0);
    assert_int_equal(info.device_count, 0);
    assert_int_equal(info.gpu_count, 0);
    assert_string_equal(info.reason, "broken");

    /* AUTO and out-of-range kinds are not backends. */
    assert_int_equal(fattn_backend_get_info(FATTN_BACKEND_AUTO, &info), FATTN_ERR_INVALID_ARGUMENT);
    assert_int_equal(fattn_backend_get_info(FATTN_BACKEND_COUNT, &info), FATTN_ERR_INVALID_ARGUMENT);
    assert_int_equal(fattn_backend_get_info(FATTN_BACKEND_CPU, NULL), FATTN_ERR_NULL_POINTER);
    /* get_info only probes: nothing opened. */
    assert_int_equal(total_opens(), 0);
}

static void test_info_real_registry(void **state) {
    (void)state;
    /* The built-in CPU backend is always there. This source tree has no GPU
     * backend modules yet, so CUDA and OpenCL are unavailable with a reason;
     * once a module is built (an OpenCL one would find POCL's CPU device on
     * this machine) the same report must at least be consistent. */
    fattn_backend_info info;
    assert_int_equal(fattn_backend_get_info(FATTN_BACKEND_CPU, &info), FATTN_OK);
    assert_int_equal(info.available, 1);
    assert_int_equal(info.device_count, 1);
    assert_int_equal(info.gpu_count, 0);
    assert_string_equal(info.reason, "");
    assert_string_equal(info.name, "cpu");

    const fattn_backend_kind gpus[2] = {FATTN_BACKEND_CUDA, FATTN_BACKEND_OPENCL};
    for (int i = 0; i < 2; i++) {
        assert_int_equal(fattn_backend_get_info(gpus[i], &info), FATTN_OK);
        assert_int_equal(info.kind, gpus[i]);
        assert_string_equal(info.name, fattn_backend_name(gpus[i]));
        fattn_context *ctx = (fattn_context *)&ctx;
        if (info.available) {
            print_message("[   NOTE   ] %s is available here (%d devices): checked for "
                          "consistency only\n", info.name, info.device_count);
            assert_true(info.device_count > 0);
            assert_true(info.gpu_count >= 0 && info.gpu_count <= info.device_count);
            assert_string_equal(info.reason, "");
            continue;
        }
        assert_int_equal(info.device_count, 0);
        assert_int_equal(info.gpu_count, 0);
        assert_true(strlen(info.reason) > 0);
        /* Asking for it by name is an error carrying that reason. */
        assert_int_equal(fattn_context_create(&ctx, gpus[i], -1), FATTN_ERR_BACKEND_UNAVAILABLE);
        assert_null(ctx);
        assert_non_null(strstr(fattn_error_message(NULL), info.reason));
    }

    /* Without a CUDA device or an OpenCL GPU, auto lands on the CPU. */
    fattn_backend_info cuda, ocl;
    assert_int_equal(fattn_backend_get_info(FATTN_BACKEND_CUDA, &cuda), FATTN_OK);
    assert_int_equal(fattn_backend_get_info(FATTN_BACKEND_OPENCL, &ocl), FATTN_OK);
    if (!cuda.available && ocl.gpu_count == 0) {
        fattn_context *ctx = NULL;
        assert_int_equal(create_kind(FATTN_BACKEND_AUTO, -1, &ctx), FATTN_BACKEND_CPU);
        assert_string_equal(fattn_context_backend_name(ctx), "cpu");
        assert_true(strlen(fattn_context_device_name(ctx)) > 0);
        fattn_context_free(ctx);
    }
}

static void test_backend_names(void **state) {
    (void)state;
    static const char *const names[FATTN_BACKEND_COUNT] = {"auto", "cpu", "cuda", "opencl"};
    for (int k = 0; k < FATTN_BACKEND_COUNT; k++) {
        fattn_backend_kind back = FATTN_BACKEND_COUNT;
        assert_string_equal(fattn_backend_name((fattn_backend_kind)k), names[k]);
        assert_int_equal(fattn_backend_from_name(fattn_backend_name((fattn_backend_kind)k), &back),
                         FATTN_OK);
        assert_int_equal(back, k);
    }
    fattn_backend_kind out = FATTN_BACKEND_COUNT;
    assert_int_equal(fattn_backend_from_name("OpenCL", &out), FATTN_OK);
    assert_int_equal(out, FATTN_BACKEND_OPENCL);
    assert_int_equal(fattn_backend_from_name("AUTO", &out), FATTN_OK);
    assert_int_equal(out, FATTN_BACKEND_AUTO);
    assert_int_equal(fattn_backend_from_name("vulkan", &out), FATTN_ERR_UNKNOWN_BACKEND);
    assert_int_equal(fattn_backend_from_name("", &out), FATTN_ERR_UNKNOWN_BACKEND);
    assert_int_equal(fattn_backend_from_name("cuda ", &out), FATTN_ERR_UNKNOWN_BACKEND);
    assert_int_equal(fattn_backend_from_name(NULL, &out), FATTN_ERR_NULL_POINTER);
    assert_int_equal(fattn_backend_from_name("cpu", NULL), FATTN_ERR_NULL_POINTER);
    assert_string_equal(fattn_backend_name(FATTN_BACKEND_COUNT), "unknown");
    assert_string_equal(fattn_backend_name((fattn_backend_kind)-1), "unknown");
}

/* ---- Calls reach the backend -------------------------------------------------------- */

/* Four buffers and BHSD tensors for B=1, H=1, S=2, D=4, f32 (32 bytes each). */
typedef struct mock_io {
    fattn_buffer *buf[4];
    fattn_tensor t[4];
} mock_io;

static void io_make(fattn_context *ctx, mock_io *io) {
    for (int i = 0; i < 4; i++) {
        assert_int_equal(fattn_buffer_alloc(ctx, 32, &io->buf[i]), FATTN_OK);
        assert_int_equal(fattn_tensor_init(&io->t[i], io->buf[i], FATTN_F32, FATTN_LAYOUT_BHSD, 1,
                                           2, 4),
                         FATTN_OK);
    }
}

static void io_free(mock_io *io) {
    for (int i = 0; i < 4; i++) fattn_buffer_free(io->buf[i]);
}

static void test_forward_reaches_mock(void **state) {
    (void)state;
    mock_devices(FATTN_BACKEND_CUDA, 1, 1, "");
    mock_record *m = &mocks[FATTN_BACKEND_CUDA];
    fattn_context *ctx = NULL;
    assert_int_equal(create_kind(FATTN_BACKEND_CUDA, -1, &ctx), FATTN_BACKEND_CUDA);
    mock_io io;
    io_make(ctx, &io);
    assert_int_equal(m->alloc_calls, 4);

    fattn_attention_desc d;
    memset(&d, 0, sizeof d);
    d.batch = d.heads_q = d.heads_kv = 1;
    d.seq_q = d.seq_kv = 2;
    d.head_dim = 4;
    d.dtype = FATTN_F32;
    assert_int_equal(fattn_forward(ctx, &d, &io.t[0], &io.t[1], &io.t[2], &io.t[3], NULL), FATTN_OK);
    assert_int_equal(m->plan_calls, 1);
    assert_int_equal(m->forward_calls, 1);
    /* forward() gets the plan that plan() made, and the resolved problem. */
    assert_int_equal(m->forward_variant, MOCK_VARIANT);
    assert_int_equal(m->last_problem.seq_q, 2);
    assert_int_equal(m->last_problem.head_dim, 4);
    assert_true(m->last_problem.scale == 0.5f);   /* 1/sqrt(4), exact */
    assert_int_equal(m->last_problem.has_lse, 0);
    assert_ptr_equal(m->last_problem.q.mem, fattn_buffer_native(io.buf[0]));
    assert_ptr_equal(m->last_problem.o.mem, fattn_buffer_native(io.buf[3]));

    /* A validation failure never reaches the backend. */
    d.head_dim = 0;
    assert_int_equal(fattn_forward(ctx, &d, &io.t[0], &io.t[1], &io.t[2], &io.t[3], NULL),
                     FATTN_ERR_HEAD_DIM);
    assert_int_equal(m->plan_calls, 1);
    assert_int_equal(m->forward_calls, 1);
    d.head_dim = 4;

    /* The mock has no naive path and no wrap: both are unsupported, and
     * neither reaches plan/forward. */
    assert_int_equal(fattn_forward_naive(ctx, &d, &io.t[0], &io.t[1], &io.t[2], &io.t[3], NULL),
                     FATTN_ERR_UNSUPPORTED);
    fattn_buffer *w = NULL;
    char host[16];
    assert_int_equal(fattn_buffer_wrap(ctx, host, sizeof host, &w), FATTN_ERR_UNSUPPORTED);
    assert_null(w);
    assert_int_equal(m->plan_calls, 1);
    assert_int_equal(m->forward_calls, 1);

    /* The memory report asks the same planner (tiles 8 x 16, 3 resident, 100
     * bytes of workspace) and runs nothing:
     * tile = (8+32)*4*4 + 8*16*4 + 8*4*4 + 8*2*4 = 640 + 512 + 128 + 64 = 1344
     * groups = min(3, ceil(2/8) = 1) = 1; stats = 2*8 = 16; flash = 1344 + 16 + 100 = 1460 */
    fattn_memory_report r;
    assert_int_equal(fattn_context_memory_report(ctx, &d, &r), FATTN_OK);
    assert_int_equal(r.tile_bytes, 1344);
    assert_int_equal(r.groups, 1);
    assert_int_equal(r.flash_bytes, 1460);
    assert_int_equal(m->plan_calls, 2);
    assert_int_equal(m->forward_calls, 1);

    io_free(&io);
    assert_int_equal(m->free_calls, 4);
    fattn_context_free(ctx);
    assert_int_equal(m->close_calls, 1);
}

static void test_plan_refusal(void **state) {
    (void)state;
    mock_devices(FATTN_BACKEND_OPENCL, 1, 1, "");
    mock_record *m = &mocks[FATTN_BACKEND_OPENCL];
    m->plan_status = FATTN_ERR_UNSUPPORTED;
    snprintf(m->plan_message, sizeof m->plan_message, "mock: head_dim 4 is not built");
    fattn_context *ctx = NULL;
    assert_int_equal(create_kind(FATTN_BACKEND_OPENCL, 0, &ctx), FATTN_BACKEND_OPENCL);
    mock_io io;
    io_make(ctx, &io);
    fattn_attention_desc d;
    memset(&d, 0, sizeof d);
    d.batch = d.heads_q = d.heads_kv = 1;
    d.seq_q = d.seq_kv = 2;
    d.head_dim = 4;
    d.dtype = FATTN_F32;
    assert_int_equal(fattn_forward(ctx, &d, &io.t[0], &io.t[1], &io.t[2], &io.t[3], NULL),
                     FATTN_ERR_UNSUPPORTED);
    assert_string_equal(fattn_error_message(ctx), "mock: head_dim 4 is not built");
    assert_int_equal(m->plan_calls, 1);
    assert_int_equal(m->forward_calls, 0);

    /* The memory report gets the same refusal. */
    fattn_memory_report r;
    assert_int_equal(fattn_context_memory_report(ctx, &d, &r), FATTN_ERR_UNSUPPORTED);
    assert_string_equal(fattn_error_message(ctx), "mock: head_dim 4 is not built");
    assert_int_equal(m->forward_calls, 0);
    io_free(&io);
    fattn_context_free(ctx);
}

static void test_buffer_outlives_context(void **state) {
    (void)state;
    mock_devices(FATTN_BACKEND_CUDA, 1, 1, "");
    mock_record *m = &mocks[FATTN_BACKEND_CUDA];
    fattn_context *ctx = NULL;
    assert_int_equal(create_kind(FATTN_BACKEND_CUDA, 0, &ctx), FATTN_BACKEND_CUDA);
    fattn_buffer *a = NULL, *b = NULL;
    assert_int_equal(fattn_buffer_alloc(ctx, 16, &a), FATTN_OK);
    assert_int_equal(fattn_buffer_alloc(ctx, 8, &b), FATTN_OK);

    fattn_context_free(ctx);
    /* The buffers still need the backend state: it stays open. */
    assert_int_equal(m->close_calls, 0);
    const char in[16] = "fifteen chars..";
    char out[16] = {0};
    assert_int_equal(fattn_buffer_write(a, 0, in, sizeof in), FATTN_OK);
    assert_int_equal(fattn_buffer_read(a, 0, out, sizeof out), FATTN_OK);
    assert_memory_equal(in, out, sizeof in);
    assert_int_equal(fattn_buffer_size(a), 16);

    fattn_buffer_free(a);
    assert_int_equal(m->free_calls, 1);
    assert_int_equal(m->close_calls, 0);
    fattn_buffer_free(b);
    /* The last buffer took the backend with it, exactly once. */
    assert_int_equal(m->free_calls, 2);
    assert_int_equal(m->close_calls, 1);
    assert_int_equal(m->open_calls, 1);
}

/* ---- FATTN_CPU_THREADS on the real CPU backend --------------------------------------- */

static void test_cpu_threads_env(void **state) {
    (void)state;
    static const char *const bad[] = {"0", "abc", "-1", "1025", "4 "};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        setenv("FATTN_CPU_THREADS", bad[i], 1);
        fattn_context *ctx = (fattn_context *)&ctx;
        const fattn_status st = fattn_context_create(&ctx, FATTN_BACKEND_CPU, -1);
        if (st != FATTN_ERR_ENVIRONMENT)
            fail_msg("FATTN_CPU_THREADS='%s': status %d, expected FATTN_ERR_ENVIRONMENT", bad[i],
                     (int)st);
        assert_null(ctx);
        assert_non_null(strstr(fattn_error_message(NULL), "FATTN_CPU_THREADS"));
    }
    /* Valid values work, and a success clears the thread's message. */
    setenv("FATTN_CPU_THREADS", "3", 1);
    fattn_context *ctx = NULL;
    assert_int_equal(create_kind(FATTN_BACKEND_CPU, -1, &ctx), FATTN_BACKEND_CPU);
    assert_string_equal(fattn_error_message(NULL), "");
    fattn_context_free(ctx);
    unsetenv("FATTN_CPU_THREADS");
}

/* ---- fattn_context_device_memory ---------------------------------------------------- */

/* A backend without the query says so by name; bad arguments are caught first. */
static void test_device_memory_unsupported(void **state) {
    (void)state;
    fattn_context *ctx = NULL;
    uint64_t used = 1, total = 1;
    assert_int_equal(fattn_context_device_memory(NULL, &used, &total), FATTN_ERR_NULL_POINTER);
    assert_int_equal(create_kind(FATTN_BACKEND_CPU, -1, &ctx), FATTN_BACKEND_CPU);
    assert_int_equal(fattn_context_device_memory(ctx, NULL, &total), FATTN_ERR_NULL_POINTER);
    assert_int_equal(fattn_context_device_memory(ctx, &used, &total), FATTN_ERR_UNSUPPORTED);
    assert_non_null(strstr(fattn_error_message(ctx), "'cpu'"));
    assert_true(used == 0 && total == 0);
    fattn_context_free(ctx);
}

/* The real CPU backend reads host RAM: plausible, and it sees a large
 * allocation that is touched (the reading is system-wide, so only a lower
 * bound on the growth is asserted, with room for other processes). */
static void test_device_memory_cpu(void **state) {
    (void)state;
    fattn_context *ctx = NULL;
    uint64_t used = 0, total = 0, used2 = 0, total2 = 0;
    assert_int_equal(create_kind(FATTN_BACKEND_CPU, -1, &ctx), FATTN_BACKEND_CPU);
    assert_int_equal(fattn_context_device_memory(ctx, &used, &total), FATTN_OK);
    assert_true(total > ((uint64_t)64 << 20));
    assert_true(used > 0 && used < total);
    const size_t big = (size_t)512 << 20;
    unsigned char *p = malloc(big);
    assert_non_null(p);
    memset(p, 1, big);
    assert_int_equal(fattn_context_device_memory(ctx, &used2, &total2), FATTN_OK);
    assert_true(total2 == total);
    if (used2 < used + big / 4)
        fail_msg("512 MiB touched, but used grew from %llu to %llu bytes", (unsigned long long)used,
                 (unsigned long long)used2);
    free(p);
    fattn_context_free(ctx);
}

/* ---- Timers ---------------------------------------------------------------------------- */

static fattn_status mock_sync(void *state, fattn_msg *msg) {
    (void)state, (void)msg;
    return FATTN_OK;
}

/* A synchronous backend without marks times on the host clock; misuse is an
 * argument error; the timer keeps its context open. An asynchronous backend
 * without marks cannot time. */
static void test_timer_host_and_misuse(void **state) {
    (void)state;
    mock_devices(FATTN_BACKEND_CUDA, 1, 1, "");
    mock_record *m = &mocks[FATTN_BACKEND_CUDA];
    fattn_context *ctx = NULL;
    assert_int_equal(create_kind(FATTN_BACKEND_CUDA, 0, &ctx), FATTN_BACKEND_CUDA);
    fattn_timer *t = NULL;
    double ms = -1.0;
    assert_int_equal(fattn_timer_create(NULL, &t), FATTN_ERR_NULL_POINTER);
    assert_int_equal(fattn_timer_create(ctx, NULL), FATTN_ERR_NULL_POINTER);
    assert_int_equal(fattn_timer_create(ctx, &t), FATTN_OK);
    assert_int_equal(fattn_timer_is_device_clock(t), 0);
    assert_int_equal(fattn_timer_stop(t), FATTN_ERR_INVALID_ARGUMENT);
    assert_int_equal(fattn_timer_start(t), FATTN_OK);
    assert_int_equal(fattn_timer_elapsed_ms(t, &ms), FATTN_ERR_INVALID_ARGUMENT);
    const struct timespec pause = {0, 20 * 1000 * 1000};
    nanosleep(&pause, NULL);
    assert_int_equal(fattn_timer_stop(t), FATTN_OK);
    assert_int_equal(fattn_timer_elapsed_ms(t, NULL), FATTN_ERR_NULL_POINTER);
    assert_int_equal(fattn_timer_elapsed_ms(t, &ms), FATTN_OK);
    if (ms < 15.0 || ms > 5000.0) fail_msg("a 20 ms pause timed as %g ms", ms);
    fattn_context_free(ctx);
    assert_int_equal(m->close_calls, 0);   /* the timer holds the context */
    fattn_timer_free(t);
    assert_int_equal(m->close_calls, 1);

    mock_vt[FATTN_BACKEND_CUDA].synchronize = mock_sync;   /* now asynchronous, still no marks */
    assert_int_equal(create_kind(FATTN_BACKEND_CUDA, 0, &ctx), FATTN_BACKEND_CUDA);
    assert_int_equal(fattn_timer_create(ctx, &t), FATTN_ERR_UNSUPPORTED);
    assert_null(t);
    assert_non_null(strstr(fattn_error_message(ctx), "no device timer"));
    fattn_context_free(ctx);
}

#define MOCKED(fn) cmocka_unit_test_setup_teardown(fn, setup_mocks, teardown_all)
#define REAL(fn) cmocka_unit_test_setup_teardown(fn, setup_real, teardown_all)

int main(void) {
    const struct CMUnitTest tests[] = {
        MOCKED(test_env_backend_selects),
        MOCKED(test_env_backend_unknown),
        MOCKED(test_api_kind_beats_env),
        MOCKED(test_auto_prefers_cuda),
        MOCKED(test_auto_opencl_gpu_next),
        MOCKED(test_auto_skips_opencl_cpu_only),
        MOCKED(test_named_unavailable_no_fallback),
        MOCKED(test_env_device),
        MOCKED(test_env_device_invalid),
        MOCKED(test_device_out_of_range),
        MOCKED(test_info_from_mocks),
        REAL(test_info_real_registry),
        REAL(test_backend_names),
        MOCKED(test_forward_reaches_mock),
        MOCKED(test_plan_refusal),
        MOCKED(test_buffer_outlives_context),
        REAL(test_cpu_threads_env),
        MOCKED(test_device_memory_unsupported),
        REAL(test_device_memory_cpu),
        MOCKED(test_timer_host_and_misuse),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* Run-time dispatch without devices: mock backends put in the registry with
 * fattn_registry_override show which backend and device a context gets from
 * the API, FATTN_BACKEND and FATTN_DEVICE, and that calls reach the backend. */
/* setenv/unsetenv are POSIX, hidden by -std=c11 without this. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
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
    int auto_score; /* what probe reports (mock_devices sets the real backends' rule) */
    char reason[256];
    fattn_status plan_status; /* FATTN_OK: plan succeeds */
    char plan_message[128];
    int naive;          /* 1: plan accepts FATTN_OP_FORWARD_NAIVE too */
    uint64_t workspace; /* the scratch bytes plan() asks for */
    int probe_calls;
    int open_calls, close_calls, opened_device;
    int open_cpu_threads;   /* the settings open() received */
    char open_platform[64]; /* settings->opencl_platform, "(null)" when NULL */
    void *open_native_queue;
    int alloc_calls, free_calls, free_owned;
    int plan_calls, run_calls;
    fattn_op plan_op; /* the op plan() was last asked for */
    int plan_has_operands;
    fattn_tuning plan_tune; /* the tuning plan() last saw */
    int run_variant;        /* the plan variant run() received */
    fattn_op run_op;
    uint64_t run_magic;         /* what run() found in the plan's typed area */
    fattn_problem last_problem; /* as run() received it */
} mock_record;

static mock_record mocks[FATTN_BACKEND_COUNT];
static fattn_backend_vtable mock_vt[FATTN_BACKEND_COUNT];

typedef struct mock_state {
    fattn_backend_kind kind;
    int device;
} mock_state;

/* The mock's typed plan: plan() writes it into the plan's area, run() reads it. */
typedef struct mock_plan_area {
    uint64_t magic;
    int64_t rows;
} mock_plan_area;
FATTN_PLAN_FITS(mock_plan_area);

enum { MOCK_VARIANT = 7 };
#define MOCK_MAGIC 0x6d6f636b706c616eull /* "mockplan" */

static void mock_probe(fattn_backend_kind k, const fattn_settings *settings, fattn_probe *out) {
    assert_non_null(settings);
    mocks[k].probe_calls++;
    out->device_count = mocks[k].device_count;
    out->gpu_count = mocks[k].gpu_count;
    out->auto_score = mocks[k].auto_score;
    snprintf(out->reason, sizeof out->reason, "%s", mocks[k].reason);
}

static fattn_status mock_device_name(fattn_backend_kind k, int device, char *buf, size_t len) {
    snprintf(buf, len, "mock %s device %d", fattn_backend_name(k), device);
    return FATTN_OK;
}

/* probe and device_name have no state argument: one small wrapper per kind. */
#define MOCK_KIND_FNS(K, lower)                                                                    \
    static void probe_##lower(const fattn_settings *settings, fattn_probe *out) {                  \
        mock_probe(K, settings, out);                                                              \
    }                                                                                              \
    static fattn_status device_name_##lower(const fattn_settings *settings, int device, char *buf, \
                                            size_t len, fattn_msg *m) {                            \
        (void)m;                                                                                   \
        assert_non_null(settings);                                                                 \
        return mock_device_name(K, device, buf, len);                                              \
    }
MOCK_KIND_FNS(FATTN_BACKEND_CPU, cpu)
MOCK_KIND_FNS(FATTN_BACKEND_CUDA, cuda)
MOCK_KIND_FNS(FATTN_BACKEND_OPENCL, opencl)

static fattn_status mock_open_kind(fattn_backend_kind k, const fattn_open_args *args, void **state,
                                   fattn_msg *msg) {
    mock_state *s = malloc(sizeof *s);
    if (!s) return fattn_fail(msg, FATTN_ERR_OUT_OF_MEMORY, "mock: no memory");
    assert_non_null(args->settings);
    s->kind = k;
    s->device = args->device;
    mocks[k].open_calls++;
    mocks[k].opened_device = args->device;
    mocks[k].open_cpu_threads = args->settings->cpu_threads;
    snprintf(mocks[k].open_platform, sizeof mocks[k].open_platform, "%s",
             args->settings->opencl_platform ? args->settings->opencl_platform : "(null)");
    mocks[k].open_native_queue = args->native_queue;
    *state = s;
    return FATTN_OK;
}

#define MOCK_OPEN(K, lower)                                                                        \
    static fattn_status open_##lower(const fattn_open_args *args, void **state, fattn_msg *msg) {  \
        return mock_open_kind(K, args, state, msg);                                                \
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

static void mock_free(void *state, void *mem, int owned) {
    mock_state *s = state;
    mocks[s->kind].free_calls++;
    mocks[s->kind].free_owned += owned != 0;
    free(mem);
}

static fattn_status mock_write(void *state, void *mem, size_t offset, const void *src, size_t bytes,
                               fattn_msg *msg) {
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
    mock_record *r = &mocks[((mock_state *)state)->kind];
    r->plan_calls++;
    r->plan_op = p->op;
    r->plan_has_operands = p->has_operands;
    r->plan_tune = p->tune;
    if (r->plan_status != FATTN_OK) return fattn_fail(msg, r->plan_status, "%s", r->plan_message);
    if (p->op != FATTN_OP_FORWARD && !(p->op == FATTN_OP_FORWARD_NAIVE && r->naive))
        return fattn_fail(msg, FATTN_ERR_UNSUPPORTED, "mock: no kernel for op %d", (int)p->op);
    plan->op = p->op;
    plan->variant = MOCK_VARIANT;
    plan->variant_name = "mock";
    plan->tiling.tile_q = 8;
    plan->tiling.tile_kv = 16;
    plan->tiling.concurrent_groups = 3;
    plan->tiling.workspace_bytes = r->workspace;
    mock_plan_area *a = FATTN_PLAN_AREA(plan, mock_plan_area);
    a->magic = MOCK_MAGIC;
    a->rows = p->batch * p->heads_q * p->seq_q;
    return FATTN_OK;
}

static fattn_status mock_run(void *state, const fattn_problem *p, const fattn_plan *plan,
                             fattn_msg *msg) {
    (void)msg;
    mock_record *r = &mocks[((mock_state *)state)->kind];
    const mock_plan_area *a = FATTN_PLAN_AREA(plan, const mock_plan_area);
    r->run_calls++;
    r->run_variant = plan->variant;
    r->run_op = p->op;
    r->run_magic =
        a->magic == MOCK_MAGIC && a->rows == p->batch * p->heads_q * p->seq_q ? a->magic : 0;
    r->last_problem = *p;
    return FATTN_OK;
}

static void make_mock(fattn_backend_kind k, const char *name,
                      void (*probe)(const fattn_settings *, fattn_probe *),
                      fattn_status (*device_name)(const fattn_settings *, int, char *, size_t,
                                                  fattn_msg *),
                      fattn_status (*open)(const fattn_open_args *, void **, fattn_msg *)) {
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
    vt->set_stream = NULL;  /* optional: no queues */
    vt->synchronize = NULL; /* optional: synchronous */
    vt->buffer_alloc = mock_alloc;
    vt->buffer_wrap = NULL; /* optional: fattn_buffer_wrap is then unsupported */
    vt->buffer_free = mock_free;
    vt->buffer_write = mock_write;
    vt->buffer_read = mock_read;
    vt->buffer_native = mock_native;
    vt->buffer_region = mock_region;
    vt->plan = mock_plan;
    vt->run = mock_run;
}

/* The registry's ranks (registry.c): what AUTO wants a backend for, at most. */
enum { RANK_CPU = 100, RANK_OPENCL = 200, RANK_CUDA = 300 };

/* Sets what a mock kind's probe reports, with the auto score the real
 * backend would give: CUDA its rank with a device, OpenCL its rank with a
 * GPU (an OpenCL CPU device is worth no more than the native CPU backend),
 * the CPU its rank. */
static void mock_devices(fattn_backend_kind k, int count, int gpus, const char *reason) {
    mocks[k].device_count = count;
    mocks[k].gpu_count = gpus;
    mocks[k].auto_score = k == FATTN_BACKEND_CUDA     ? (count > 0 ? RANK_CUDA : 0)
                          : k == FATTN_BACKEND_OPENCL ? (gpus > 0 ? RANK_OPENCL : 0)
                                                      : (count > 0 ? RANK_CPU : 0);
    snprintf(mocks[k].reason, sizeof mocks[k].reason, "%s", reason);
}

static void unset_all_env(void) {
    unsetenv("FATTN_BACKEND");
    unsetenv("FATTN_DEVICE");
    unsetenv("FATTN_CPU_THREADS");
    unsetenv("FATTN_OPENCL_PLATFORM");
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
    const fattn_status st = fattn_context_create(asked, device, ctx);
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
    fattn_context *ctx = (fattn_context *)&ctx; /* must be reset to NULL */
    assert_int_equal(fattn_context_create(FATTN_BACKEND_AUTO, -1, &ctx), FATTN_ERR_UNKNOWN_BACKEND);
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

/* AUTO takes the highest score the probes report, not a fixed order of
 * kinds: a CUDA probe that scores below an OpenCL GPU loses to it, and one
 * that scores above the CPU wins over it. */
static void test_auto_highest_score_wins(void **state) {
    (void)state;
    fattn_context *ctx = NULL;
    mock_devices(FATTN_BACKEND_CUDA, 1, 1, "");
    mock_devices(FATTN_BACKEND_OPENCL, 1, 1, "");
    mocks[FATTN_BACKEND_CUDA].auto_score = RANK_OPENCL - 50;
    assert_int_equal(create_kind(FATTN_BACKEND_AUTO, -1, &ctx), FATTN_BACKEND_OPENCL);
    fattn_context_free(ctx);

    mock_devices(FATTN_BACKEND_OPENCL, 1, 0, ""); /* scores 0 */
    assert_int_equal(create_kind(FATTN_BACKEND_AUTO, -1, &ctx), FATTN_BACKEND_CUDA);
    fattn_context_free(ctx);

    /* Below the CPU's score: the CPU. */
    mocks[FATTN_BACKEND_CUDA].auto_score = RANK_CPU - 1;
    assert_int_equal(create_kind(FATTN_BACKEND_AUTO, -1, &ctx), FATTN_BACKEND_CPU);
    fattn_context_free(ctx);

    /* A score of 0 is "never automatically", devices or not. */
    mocks[FATTN_BACKEND_CUDA].auto_score = 0;
    assert_int_equal(create_kind(FATTN_BACKEND_AUTO, -1, &ctx), FATTN_BACKEND_CPU);
    fattn_context_free(ctx);
    assert_int_equal(mocks[FATTN_BACKEND_CUDA].open_calls, 1);
    assert_int_equal(mocks[FATTN_BACKEND_OPENCL].open_calls, 1);
}

/* A score is worth at most the backend's rank in the registry's table, and
 * a backend without a device is never chosen, whatever its probe scores. */
static void test_auto_score_bounds(void **state) {
    (void)state;
    fattn_context *ctx = NULL;
    mock_devices(FATTN_BACKEND_CUDA, 1, 1, "");
    mock_devices(FATTN_BACKEND_OPENCL, 1, 1, "");
    mocks[FATTN_BACKEND_OPENCL].auto_score = 100000; /* capped at RANK_OPENCL */
    assert_int_equal(create_kind(FATTN_BACKEND_AUTO, -1, &ctx), FATTN_BACKEND_CUDA);
    fattn_context_free(ctx);
    mock_devices(FATTN_BACKEND_CUDA, 0, 0, "no driver");
    mocks[FATTN_BACKEND_CPU].auto_score = 100000; /* capped at RANK_CPU */
    assert_int_equal(create_kind(FATTN_BACKEND_AUTO, -1, &ctx), FATTN_BACKEND_OPENCL);
    fattn_context_free(ctx);

    mocks[FATTN_BACKEND_CUDA].auto_score = RANK_CUDA; /* no device: not a candidate */
    mock_devices(FATTN_BACKEND_OPENCL, 0, 0, "no platform");
    mocks[FATTN_BACKEND_OPENCL].auto_score = RANK_OPENCL;
    assert_int_equal(create_kind(FATTN_BACKEND_AUTO, -1, &ctx), FATTN_BACKEND_CPU);
    fattn_context_free(ctx);
    assert_int_equal(mocks[FATTN_BACKEND_CUDA].open_calls, 1);
    assert_int_equal(mocks[FATTN_BACKEND_OPENCL].open_calls, 1);
}

/* fattn_context_create_with: the AUTO choice as fattn_context_create's, and
 * the settings reach the backend resolved: the API's value, else the
 * environment's. */
static void test_create_with_settings(void **state) {
    (void)state;
    mock_devices(FATTN_BACKEND_CUDA, 2, 2, "");
    mock_record *m = &mocks[FATTN_BACKEND_CUDA];
    fattn_context_params params = FATTN_CONTEXT_PARAMS_INIT;
    fattn_context *ctx = NULL;
    assert_int_equal(fattn_context_create_with(&params, &ctx), FATTN_OK);
    assert_int_equal(fattn_context_backend(ctx), FATTN_BACKEND_CUDA);
    assert_int_equal(fattn_context_device(ctx), 0);
    assert_string_equal(m->open_platform, "(null)");
    assert_null(m->open_native_queue);
    fattn_context_free(ctx);

    setenv("FATTN_OPENCL_PLATFORM", "from-env", 1);
    setenv("FATTN_DEVICE", "1", 1);
    assert_int_equal(fattn_context_create_with(&params, &ctx), FATTN_OK);
    assert_int_equal(fattn_context_device(ctx), 1);
    assert_int_equal(m->opened_device, 1);
    assert_string_equal(m->open_platform, "from-env");
    fattn_context_free(ctx);

    int queue;
    params.opencl_platform = "from-api";
    params.device = 0;
    params.native_queue = &queue;
    /* A native object names its API: AUTO cannot guess which. */
    assert_int_equal(fattn_context_create_with(&params, &ctx), FATTN_ERR_INVALID_ARGUMENT);
    assert_null(ctx);
    assert_non_null(strstr(fattn_error_message(NULL), "explicit backend"));
    params.backend = FATTN_BACKEND_CUDA;
    assert_int_equal(fattn_context_create_with(&params, &ctx), FATTN_OK);
    assert_int_equal(fattn_context_device(ctx), 0);
    assert_string_equal(m->open_platform, "from-api");
    assert_ptr_equal(m->open_native_queue, &queue);
    fattn_context_free(ctx);
    params.opencl_platform = ""; /* no filter, whatever the environment says */
    params.native_queue = NULL;
    assert_int_equal(fattn_context_create_with(&params, &ctx), FATTN_OK);
    assert_string_equal(m->open_platform, "(null)");
    fattn_context_free(ctx);
    assert_int_equal(m->open_calls, 4);
    assert_int_equal(m->close_calls, 4);

    /* CPU threads, for the CPU backend: the API's count, else FATTN_CPU_THREADS. */
    unsetenv("FATTN_DEVICE");
    mock_record *cpu = &mocks[FATTN_BACKEND_CPU];
    params = (fattn_context_params)FATTN_CONTEXT_PARAMS_INIT;
    params.backend = FATTN_BACKEND_CPU;
    assert_int_equal(fattn_context_create_with(&params, &ctx), FATTN_OK);
    assert_int_equal(cpu->open_cpu_threads, 0); /* every core */
    fattn_context_free(ctx);
    setenv("FATTN_CPU_THREADS", "5", 1);
    assert_int_equal(fattn_context_create_with(&params, &ctx), FATTN_OK);
    assert_int_equal(cpu->open_cpu_threads, 5);
    fattn_context_free(ctx);
    params.cpu_threads = 3;
    assert_int_equal(fattn_context_create_with(&params, &ctx), FATTN_OK);
    assert_int_equal(cpu->open_cpu_threads, 3);
    fattn_context_free(ctx);

    /* Wrong values are refused before any open. */
    params.cpu_threads = 1025;
    assert_int_equal(fattn_context_create_with(&params, &ctx), FATTN_ERR_INVALID_ARGUMENT);
    assert_null(ctx);
    assert_non_null(strstr(fattn_error_message(NULL), "cpu_threads"));
    params.cpu_threads = 0;
    params.device = -2;
    assert_int_equal(fattn_context_create_with(&params, &ctx), FATTN_ERR_INVALID_ARGUMENT);
    params.device = 0;
    params.size = 0;
    assert_int_equal(fattn_context_create_with(&params, &ctx), FATTN_ERR_INVALID_ARGUMENT);
    assert_null(ctx);
    params = (fattn_context_params)FATTN_CONTEXT_PARAMS_INIT;
    params.backend = FATTN_BACKEND_OPENCL; /* no device: no fallback either */
    assert_int_equal(fattn_context_create_with(&params, &ctx), FATTN_ERR_BACKEND_UNAVAILABLE);
    assert_null(ctx);
    assert_int_equal(cpu->open_calls, 3);
    assert_int_equal(mocks[FATTN_BACKEND_OPENCL].open_calls, 0);
}

static void test_named_unavailable_no_fallback(void **state) {
    (void)state;
    mock_devices(FATTN_BACKEND_CUDA, 0, 0, "no driver");
    mock_devices(FATTN_BACKEND_OPENCL, 1, 1, "");
    fattn_context *ctx = (fattn_context *)&ctx;
    /* By the API. */
    assert_int_equal(fattn_context_create(FATTN_BACKEND_CUDA, -1, &ctx),
                     FATTN_ERR_BACKEND_UNAVAILABLE);
    assert_null(ctx);
    assert_non_null(strstr(fattn_error_message(NULL), "no driver"));
    assert_non_null(strstr(fattn_error_message(NULL), "cuda"));
    /* By FATTN_BACKEND: also named, so also no fallback. */
    setenv("FATTN_BACKEND", "cuda", 1);
    assert_int_equal(fattn_context_create(FATTN_BACKEND_AUTO, -1, &ctx),
                     FATTN_ERR_BACKEND_UNAVAILABLE);
    assert_null(ctx);
    assert_non_null(strstr(fattn_error_message(NULL), "no driver"));
    /* A probe with no reason still yields one. */
    mock_devices(FATTN_BACKEND_CUDA, 0, 0, "");
    assert_int_equal(fattn_context_create(FATTN_BACKEND_AUTO, -1, &ctx),
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
        const fattn_status st = fattn_context_create(FATTN_BACKEND_CUDA, -1, &ctx);
        if (st != FATTN_ERR_ENVIRONMENT)
            fail_msg("FATTN_DEVICE='%s': status %d, expected FATTN_ERR_ENVIRONMENT", bad[i],
                     (int)st);
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
    assert_int_equal(fattn_context_create(FATTN_BACKEND_CUDA, 2, &ctx), FATTN_ERR_NO_DEVICE);
    assert_null(ctx);
    assert_true(strlen(fattn_error_message(NULL)) > 0);
    setenv("FATTN_DEVICE", "5", 1);
    assert_int_equal(fattn_context_create(FATTN_BACKEND_CUDA, -1, &ctx), FATTN_ERR_NO_DEVICE);
    assert_null(ctx);
    unsetenv("FATTN_DEVICE");
    /* Below -1 is an argument error, not "use the default". */
    assert_int_equal(fattn_context_create(FATTN_BACKEND_CUDA, -2, &ctx),
                     FATTN_ERR_INVALID_ARGUMENT);
    assert_int_equal(fattn_context_create((fattn_backend_kind)9, 0, &ctx),
                     FATTN_ERR_INVALID_ARGUMENT);
    assert_int_equal(fattn_context_create(FATTN_BACKEND_CUDA, 0, NULL), FATTN_ERR_NULL_POINTER);
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
    fattn_backend_info info = FATTN_BACKEND_INFO_INIT;
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
    assert_int_equal(fattn_backend_get_info(FATTN_BACKEND_COUNT, &info),
                     FATTN_ERR_INVALID_ARGUMENT);
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
    fattn_backend_info info = FATTN_BACKEND_INFO_INIT;
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
                          "consistency only\n",
                          info.name, info.device_count);
            assert_true(info.device_count > 0);
            assert_true(info.gpu_count >= 0 && info.gpu_count <= info.device_count);
            assert_string_equal(info.reason, "");
            continue;
        }
        assert_int_equal(info.device_count, 0);
        assert_int_equal(info.gpu_count, 0);
        assert_true(strlen(info.reason) > 0);
        /* Asking for it by name is an error carrying that reason. */
        assert_int_equal(fattn_context_create(gpus[i], -1, &ctx), FATTN_ERR_BACKEND_UNAVAILABLE);
        assert_null(ctx);
        assert_non_null(strstr(fattn_error_message(NULL), info.reason));
    }

    /* Without a CUDA device or an OpenCL GPU, auto lands on the CPU. */
    fattn_backend_info cuda = FATTN_BACKEND_INFO_INIT, ocl = FATTN_BACKEND_INFO_INIT;
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

/* Four buffers and BHSD tensors for B=1, H=1, D=4, f32: Q and O of seq_q = 2
 * rows, K and V of seq_kv = 4 (32 and 64 bytes). */
typedef struct mock_io {
    fattn_buffer *buf[4];
    fattn_tensor t[4];
} mock_io;

enum { IO_SQ = 2, IO_SKV = 4, IO_D = 4 };

static void io_make(fattn_context *ctx, mock_io *io) {
    for (int i = 0; i < 4; i++) {
        const int64_t seq = i == 1 || i == 2 ? IO_SKV : IO_SQ;
        assert_int_equal(fattn_buffer_alloc(ctx, (size_t)(seq * IO_D) * sizeof(float), &io->buf[i]),
                         FATTN_OK);
        assert_int_equal(fattn_tensor_init(io->buf[i], FATTN_F32, FATTN_LAYOUT_BHSD, 1, 1, seq,
                                           IO_D, 0, &io->t[i]),
                         FATTN_OK);
    }
}

static fattn_attention_desc io_desc(void) {
    fattn_attention_desc d = FATTN_ATTENTION_DESC_INIT;
    d.batch = d.heads_q = d.heads_kv = 1;
    d.seq_q = IO_SQ;
    d.seq_kv = IO_SKV;
    d.head_dim = IO_D;
    d.dtype = FATTN_F32;
    return d;
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

    fattn_attention_desc d = io_desc();
    assert_int_equal(fattn_forward(ctx, &d, &io.t[0], &io.t[1], &io.t[2], &io.t[3], NULL),
                     FATTN_OK);
    assert_int_equal(m->plan_calls, 1);
    assert_int_equal(m->run_calls, 1);
    /* run() gets the plan that plan() made, typed area included, and the
     * resolved problem. */
    assert_int_equal(m->plan_op, FATTN_OP_FORWARD);
    assert_int_equal(m->plan_has_operands, 1);
    assert_int_equal(m->run_variant, MOCK_VARIANT);
    assert_int_equal(m->run_op, FATTN_OP_FORWARD);
    assert_true(m->run_magic == MOCK_MAGIC);
    assert_int_equal(m->last_problem.seq_q, IO_SQ);
    assert_int_equal(m->last_problem.seq_kv, IO_SKV);
    assert_int_equal(m->last_problem.head_dim, IO_D);
    assert_true(m->last_problem.scale == 0.5f); /* 1/sqrt(4), exact */
    assert_true(fabsf(m->last_problem.scale_log2 - 0.5f * FATTN_LOG2E_F) <= 1e-6f);
    assert_int_equal(m->last_problem.causal, 0);
    assert_int_equal(m->last_problem.tune.tile_q, 0);
    assert_int_equal(m->last_problem.tune.tile_kv, 0);
    assert_int_equal(m->last_problem.has_lse, 0);
    assert_int_equal(fattn_key_limit(&m->last_problem, 0), IO_SKV);
    assert_ptr_equal(m->last_problem.q.mem, fattn_buffer_native(io.buf[0]));
    assert_ptr_equal(m->last_problem.k.mem, fattn_buffer_native(io.buf[1]));
    assert_ptr_equal(m->last_problem.o.mem, fattn_buffer_native(io.buf[3]));
    assert_int_equal(m->last_problem.k.stride_seq, IO_D);

    /* The causal diagonal, resolved once: key j is visible to row i iff
     * j <= i + causal_offset. Bottom-right: seq_kv - seq_q = 2; top-left: 0. */
    d.causal = FATTN_CAUSAL_BOTTOM_RIGHT;
    assert_int_equal(fattn_forward(ctx, &d, &io.t[0], &io.t[1], &io.t[2], &io.t[3], NULL),
                     FATTN_OK);
    assert_int_equal(m->last_problem.causal, 1);
    assert_int_equal(m->last_problem.causal_offset, IO_SKV - IO_SQ);
    assert_int_equal(fattn_key_limit(&m->last_problem, 0), 3);
    assert_int_equal(fattn_key_limit(&m->last_problem, 1), 4);
    d.causal = FATTN_CAUSAL_TOP_LEFT;
    assert_int_equal(fattn_forward(ctx, &d, &io.t[0], &io.t[1], &io.t[2], &io.t[3], NULL),
                     FATTN_OK);
    assert_int_equal(m->last_problem.causal, 1);
    assert_int_equal(m->last_problem.causal_offset, 0);
    assert_int_equal(fattn_key_limit(&m->last_problem, 0), 1);
    assert_int_equal(fattn_key_limit(&m->last_problem, 1), 2);
    d.causal = FATTN_CAUSAL_NONE;
    assert_int_equal(m->run_calls, 3);

    /* The context's tile parameters reach the planner, through the tuning. */
    assert_int_equal(fattn_context_set_param(ctx, FATTN_PARAM_TILE_Q, 32), FATTN_OK);
    assert_int_equal(fattn_context_set_param(ctx, FATTN_PARAM_TILE_KV, 48), FATTN_OK);
    assert_int_equal(fattn_forward(ctx, &d, &io.t[0], &io.t[1], &io.t[2], &io.t[3], NULL),
                     FATTN_OK);
    assert_int_equal(m->plan_tune.tile_q, 32);
    assert_int_equal(m->plan_tune.tile_kv, 48);
    assert_int_equal(m->last_problem.tune.tile_q, 32);
    assert_int_equal(fattn_context_set_param(ctx, FATTN_PARAM_TILE_Q, 0), FATTN_OK);
    assert_int_equal(fattn_context_set_param(ctx, FATTN_PARAM_TILE_KV, 0), FATTN_OK);
    assert_int_equal(m->plan_calls, 4);
    assert_int_equal(m->run_calls, 4);

    /* A validation failure never reaches the backend. */
    d.head_dim = 0;
    assert_int_equal(fattn_forward(ctx, &d, &io.t[0], &io.t[1], &io.t[2], &io.t[3], NULL),
                     FATTN_ERR_HEAD_DIM);
    d.head_dim = IO_D;
    d.causal = (fattn_causal)3;
    assert_int_equal(fattn_forward(ctx, &d, &io.t[0], &io.t[1], &io.t[2], &io.t[3], NULL),
                     FATTN_ERR_INVALID_ARGUMENT);
    d.causal = FATTN_CAUSAL_NONE;
    assert_int_equal(m->plan_calls, 4);
    assert_int_equal(m->run_calls, 4);

    /* The naive baseline is the same seam with another op: this mock plans
     * none, so it is unsupported with the planner's reason and runs nothing.
     * The mock has no wrap either, which fails before the backend. */
    assert_int_equal(fattn_forward_naive(ctx, &d, &io.t[0], &io.t[1], &io.t[2], &io.t[3], NULL),
                     FATTN_ERR_UNSUPPORTED);
    assert_non_null(strstr(fattn_error_message(ctx), "mock: no kernel for op 1"));
    assert_int_equal(m->plan_op, FATTN_OP_FORWARD_NAIVE);
    assert_int_equal(m->plan_calls, 5);
    fattn_buffer *w = NULL;
    char host[16];
    assert_int_equal(fattn_buffer_wrap(ctx, host, sizeof host, &w), FATTN_ERR_UNSUPPORTED);
    assert_null(w);
    assert_int_equal(m->plan_calls, 5);
    assert_int_equal(m->run_calls, 4);
    /* With a naive row it runs, as op FATTN_OP_FORWARD_NAIVE. */
    m->naive = 1;
    assert_int_equal(fattn_forward_naive(ctx, &d, &io.t[0], &io.t[1], &io.t[2], &io.t[3], NULL),
                     FATTN_OK);
    assert_int_equal(m->run_calls, 5);
    assert_int_equal(m->run_op, FATTN_OP_FORWARD_NAIVE);
    assert_true(m->run_magic == MOCK_MAGIC);

    /* The memory report asks the same planner (tiles 8 x 16, 3 resident, 100
     * bytes of workspace), for the tiled op without operands, and runs nothing:
     * tile = (8+32)*4*4 + 8*16*4 + 8*4*4 + 8*2*4 = 640 + 512 + 128 + 64 = 1344
     * groups = min(3, ceil(2/8) = 1) = 1; stats = 2*8 = 16; flash = 1344 + 16 + 100 = 1460 */
    m->workspace = 100;
    fattn_memory_report r = FATTN_MEMORY_REPORT_INIT;
    assert_int_equal(fattn_context_memory_report(ctx, &d, &r), FATTN_OK);
    assert_int_equal(r.tile_bytes, 1344);
    assert_int_equal(r.groups, 1);
    assert_int_equal(r.workspace_bytes, 100);
    assert_int_equal(r.flash_bytes, 1460);
    assert_int_equal(m->plan_calls, 7);
    assert_int_equal(m->plan_op, FATTN_OP_FORWARD);
    assert_int_equal(m->plan_has_operands, 0);
    assert_int_equal(m->run_calls, 5);

    io_free(&io);
    assert_int_equal(m->free_calls, 4);
    assert_int_equal(m->free_owned, 4); /* all four were allocated, none wrapped */
    fattn_context_free(ctx);
    assert_int_equal(m->close_calls, 1);
}

/* A plan that asks for scratch memory: fattn_workspace_size says how much,
 * a caller's workspace of that size or more runs it, a smaller one is
 * refused, and without one (desc->workspace NULL) the context provides it
 * (fattn.h: "NULL = the context allocates what a plan needs once and keeps
 * it"), as fattn 0.1 ran such a plan. */
static void test_workspace_plan(void **state) {
    (void)state;
    mock_devices(FATTN_BACKEND_CUDA, 1, 1, "");
    mock_record *m = &mocks[FATTN_BACKEND_CUDA];
    m->workspace = 100;
    fattn_context *ctx = NULL;
    assert_int_equal(create_kind(FATTN_BACKEND_CUDA, 0, &ctx), FATTN_BACKEND_CUDA);
    mock_io io;
    io_make(ctx, &io);
    fattn_attention_desc d = io_desc();
    uint64_t bytes = 0;
    assert_int_equal(fattn_workspace_size(ctx, &d, &bytes), FATTN_OK);
    assert_true(bytes == 100);
    fattn_buffer *small = NULL, *enough = NULL;
    assert_int_equal(fattn_buffer_alloc(ctx, 99, &small), FATTN_OK);
    assert_int_equal(fattn_buffer_alloc(ctx, 100, &enough), FATTN_OK);
    d.workspace = small;
    assert_int_equal(fattn_forward(ctx, &d, &io.t[0], &io.t[1], &io.t[2], &io.t[3], NULL),
                     FATTN_ERR_BUFFER_TOO_SMALL);
    assert_non_null(strstr(fattn_error_message(ctx), "workspace"));
    assert_int_equal(m->run_calls, 0);
    d.workspace = enough;
    assert_int_equal(fattn_forward(ctx, &d, &io.t[0], &io.t[1], &io.t[2], &io.t[3], NULL),
                     FATTN_OK);
    assert_int_equal(m->run_calls, 1);
    d.workspace = NULL;
    const fattn_status st = fattn_forward(ctx, &d, &io.t[0], &io.t[1], &io.t[2], &io.t[3], NULL);
    char msg[512];
    snprintf(msg, sizeof msg, "%s", fattn_error_message(ctx));
    fattn_buffer_free(small);
    fattn_buffer_free(enough);
    io_free(&io);
    fattn_context_free(ctx);
    if (st != FATTN_OK)
        fail_msg("a plan that needs 100 bytes of scratch, desc->workspace NULL: %s: %s",
                 fattn_status_string(st), msg);
    assert_int_equal(m->run_calls, 2);
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
    const fattn_attention_desc d = io_desc();
    assert_int_equal(fattn_forward(ctx, &d, &io.t[0], &io.t[1], &io.t[2], &io.t[3], NULL),
                     FATTN_ERR_UNSUPPORTED);
    assert_string_equal(fattn_error_message(ctx), "mock: head_dim 4 is not built");
    assert_int_equal(m->plan_calls, 1);
    assert_int_equal(m->run_calls, 0);

    /* The memory report gets the same refusal. */
    fattn_memory_report r = FATTN_MEMORY_REPORT_INIT;
    assert_int_equal(fattn_context_memory_report(ctx, &d, &r), FATTN_ERR_UNSUPPORTED);
    assert_string_equal(fattn_error_message(ctx), "mock: head_dim 4 is not built");
    assert_int_equal(m->run_calls, 0);
    io_free(&io);
    fattn_context_free(ctx);
}

/* The shared planner over a variant table (backend.h): the first row for the
 * op that accepts wins, a refusal keeps the last row's reason, an op with no
 * row says so, and running a plan calls the row it names. */
static int rows_run[3];

static fattn_status accept_if_small(void *state, const fattn_problem *p, fattn_plan *plan,
                                    fattn_msg *msg) {
    (void)state;
    if (p->head_dim > 64)
        return fattn_fail(msg, FATTN_ERR_UNSUPPORTED, "small: head_dim %d", (int)p->head_dim);
    plan->tiling.tile_q = 64;
    return FATTN_OK;
}

static fattn_status accept_if_causal(void *state, const fattn_problem *p, fattn_plan *plan,
                                     fattn_msg *msg) {
    (void)state;
    (void)plan;
    return p->causal ? FATTN_OK : fattn_fail(msg, FATTN_ERR_UNSUPPORTED, "causal only");
}

static fattn_status accept_all(void *state, const fattn_problem *p, fattn_plan *plan,
                               fattn_msg *msg) {
    (void)state, (void)p, (void)plan, (void)msg;
    return FATTN_OK;
}

static fattn_status refuse_all(void *state, const fattn_problem *p, fattn_plan *plan,
                               fattn_msg *msg) {
    (void)state, (void)p, (void)plan;
    return fattn_fail(msg, FATTN_ERR_UNSUPPORTED, "last row: too large");
}

#define ROW_RUN(n)                                                                                 \
    static fattn_status run_row##n(void *state, const fattn_problem *p, const fattn_plan *plan,    \
                                   fattn_msg *msg) {                                               \
        (void)state, (void)p, (void)plan, (void)msg;                                               \
        rows_run[n]++;                                                                             \
        return FATTN_OK;                                                                           \
    }
ROW_RUN(0)
ROW_RUN(1)
ROW_RUN(2)

static void test_plan_from_table(void **state) {
    (void)state;
    const fattn_variant rows[] = {
        {"naive", FATTN_OP_FORWARD_NAIVE, accept_all, run_row2},
        {"small", FATTN_OP_FORWARD, accept_if_small, run_row0},
        {"causal", FATTN_OP_FORWARD, accept_if_causal, run_row1},
        {"never", FATTN_OP_FORWARD, refuse_all, run_row2},
    };
    const int n = (int)(sizeof rows / sizeof rows[0]);
    fattn_problem p;
    memset(&p, 0, sizeof p);
    p.op = FATTN_OP_FORWARD;
    p.head_dim = 32;
    fattn_plan plan;
    fattn_msg msg = {{0}};
    memset(rows_run, 0, sizeof rows_run);

    memset(&plan, 0, sizeof plan);
    assert_int_equal(fattn_plan_from_table(rows, n, NULL, &p, &plan, &msg), FATTN_OK);
    assert_int_equal(plan.variant, 1);
    assert_string_equal(plan.variant_name, "small");
    assert_int_equal(plan.op, FATTN_OP_FORWARD);
    assert_int_equal(plan.tiling.tile_q, 64);
    assert_int_equal(fattn_run_from_table(rows, n, NULL, &p, &plan, &msg), FATTN_OK);
    assert_int_equal(rows_run[0], 1);

    p.head_dim = 128;
    p.causal = 1;
    memset(&plan, 0, sizeof plan);
    assert_int_equal(fattn_plan_from_table(rows, n, NULL, &p, &plan, &msg), FATTN_OK);
    assert_string_equal(plan.variant_name, "causal");
    assert_int_equal(fattn_run_from_table(rows, n, NULL, &p, &plan, &msg), FATTN_OK);
    assert_int_equal(rows_run[1], 1);

    p.causal = 0;
    assert_int_equal(fattn_plan_from_table(rows, n, NULL, &p, &plan, &msg), FATTN_ERR_UNSUPPORTED);
    assert_string_equal(msg.text, "last row: too large");

    p.op = FATTN_OP_FORWARD_NAIVE;
    memset(&plan, 0, sizeof plan);
    assert_int_equal(fattn_plan_from_table(rows, n, NULL, &p, &plan, &msg), FATTN_OK);
    assert_int_equal(plan.variant, 0);
    assert_int_equal(fattn_plan_from_table(rows + 1, n - 1, NULL, &p, &plan, &msg),
                     FATTN_ERR_UNSUPPORTED);
    assert_non_null(strstr(msg.text, "no naive baseline kernel"));

    /* A plan that names no row of the table is an internal error, not a call. */
    plan.variant = n;
    assert_int_equal(fattn_run_from_table(rows, n, NULL, &p, &plan, &msg), FATTN_ERR_INTERNAL);
    plan.variant = 1; /* a forward row, for a naive plan */
    plan.op = FATTN_OP_FORWARD_NAIVE;
    assert_int_equal(fattn_run_from_table(rows, n, NULL, &p, &plan, &msg), FATTN_ERR_INTERNAL);
    assert_int_equal(rows_run[0] + rows_run[1] + rows_run[2], 2);
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
        const fattn_status st = fattn_context_create(FATTN_BACKEND_CPU, -1, &ctx);
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
    /* "used" is the machine's: tests running beside this one (ctest -j)
     * free memory too, so one of three tries must see the growth. */
    const size_t big = (size_t)512 << 20;
    int grew = 0;
    for (int attempt = 0; attempt < 3 && !grew; attempt++) {
        assert_int_equal(fattn_context_device_memory(ctx, &used, &total), FATTN_OK);
        unsigned char *p = malloc(big);
        assert_non_null(p);
        memset(p, 1, big);
        assert_int_equal(fattn_context_device_memory(ctx, &used2, &total2), FATTN_OK);
        assert_true(total2 == total);
        grew = used2 >= used + big / 4;
        free(p);
    }
    if (!grew)
        fail_msg("512 MiB touched, three times, but used grew only from %llu to %llu bytes",
                 (unsigned long long)used, (unsigned long long)used2);
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
    assert_int_equal(m->close_calls, 0); /* the timer holds the context */
    fattn_timer_free(t);
    assert_int_equal(m->close_calls, 1);

    mock_vt[FATTN_BACKEND_CUDA].synchronize = mock_sync; /* now asynchronous, still no marks */
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
        MOCKED(test_auto_highest_score_wins),
        MOCKED(test_auto_score_bounds),
        MOCKED(test_create_with_settings),
        MOCKED(test_named_unavailable_no_fallback),
        MOCKED(test_env_device),
        MOCKED(test_env_device_invalid),
        MOCKED(test_device_out_of_range),
        MOCKED(test_info_from_mocks),
        REAL(test_info_real_registry),
        REAL(test_backend_names),
        MOCKED(test_forward_reaches_mock),
        MOCKED(test_plan_refusal),
        MOCKED(test_workspace_plan),
        cmocka_unit_test(test_plan_from_table),
        MOCKED(test_buffer_outlives_context),
        REAL(test_cpu_threads_env),
        MOCKED(test_device_memory_unsupported),
        REAL(test_device_memory_cpu),
        MOCKED(test_timer_host_and_misuse),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

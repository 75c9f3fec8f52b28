/* Concurrency: many threads, each with its own context, run small forwards
 * and check them against the double reference, while other threads make
 * global queries and create and free contexts and buffers in a loop. Every
 * thread starts at one barrier, so first uses (module loading, device
 * enumeration) happen at once. Meant for ThreadSanitizer (scripts/test.sh
 * builds it so); without it, it still catches crashes, wrong answers and
 * threads that see a different set of devices.
 * FATTN_TEST_BACKENDS=cpu,opencl,cuda picks the backends. */
#define _GNU_SOURCE
#include <ftw.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "harness.h"
#include "test_backend.h"

enum {
    WORKERS = 8,  /* threads with their own context running forwards */
    QUERIERS = 2, /* threads making global queries */
    CHURNERS = 2, /* threads creating and freeing contexts and buffers */
    ROUNDS = 3,   /* forwards per worker */
    QUERIES = 20, /* query rounds per querier */
    CHURNS = 4,   /* contexts per churner */
};

static const char *const case_names[] = {"seq 63 dim 40", "GQA 8/2"};
static const fattn_backend_kind all_kinds[] = {FATTN_BACKEND_CPU, FATTN_BACKEND_CUDA,
                                               FATTN_BACKEND_OPENCL};
enum { KINDS = sizeof all_kinds / sizeof all_kinds[0] };

/* What every thread shares: the backend under test, the start barrier, what
 * the main thread saw before the start, and the first failure. */
typedef struct shared {
    fattn_backend_kind kind;
    pthread_barrier_t start;
    fattn_backend_info info[KINDS]; /* as the main thread saw them */
    char device0[KINDS][256];
    fattn_memory_report report; /* of `desc`, as the main thread computed it */
    fattn_attention_desc desc;
    atomic_int failures;
    pthread_mutex_t lock;
    char first[1024];
} shared;

static char cache_dir[64];

#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
static void
failed(shared *s, const char *fmt, ...) {
    va_list ap;
    pthread_mutex_lock(&s->lock);
    if (atomic_fetch_add(&s->failures, 1) == 0) {
        va_start(ap, fmt);
        vsnprintf(s->first, sizeof s->first, fmt, ap);
        va_end(ap);
    }
    pthread_mutex_unlock(&s->lock);
}

static const fattn_case *find_case(const char *name) {
    for (size_t i = 0; i < fattn_case_count; i++)
        if (strcmp(fattn_cases[i].name, name) == 0) return &fattn_cases[i];
    return NULL;
}

typedef struct worker_arg {
    shared *s;
    int id;
} worker_arg;

/* Its own context; a few forwards, each checked. */
static void *worker(void *p) {
    const worker_arg *a = p;
    shared *s = a->s;
    pthread_barrier_wait(&s->start);
    fattn_context *ctx = NULL;
    if (fattn_context_create(s->kind, 0, &ctx) != FATTN_OK) {
        failed(s, "worker %d: create: %s", a->id, fattn_error_message(NULL));
        return NULL;
    }
    for (int r = 0; r < ROUNDS; r++) {
        const fattn_case *c = find_case(case_names[(a->id + r) % 2]);
        const fattn_dtype dt = (a->id + r) % 3 == 0 ? FATTN_F16 : FATTN_F32;
        const uint64_t seed = 0xc0c0u + 97u * (unsigned)a->id + (unsigned)r;
        case_result res;
        const fattn_status st = harness_run(ctx, c, dt, seed, HARNESS_TILED, &res);
        if (st != FATTN_OK)
            failed(s, "worker %d: case '%s' %s: %s: %s", a->id, c->name, harness_dtype_name(dt),
                   fattn_status_string(st), fattn_error_message(ctx));
        else if (!harness_passed(&res))
            failed(s,
                   "worker %d: case '%s' %s seed 0x%llx: max err %.3g (tol %.3g), %lld NaN, "
                   "%lld guard bytes changed",
                   a->id, c->name, harness_dtype_name(dt), (unsigned long long)seed, res.max_err,
                   res.tol, (long long)res.nan_count, (long long)res.guard_broken);
    }
    fattn_context_free(ctx);
    return NULL;
}

/* Global queries agree with what the main thread saw, and each thread's
 * error message stays its own. */
static void *querier(void *p) {
    const worker_arg *a = p;
    shared *s = a->s;
    pthread_barrier_wait(&s->start);
    for (int q = 0; q < QUERIES; q++) {
        for (int i = 0; i < KINDS; i++) {
            fattn_backend_info info = FATTN_BACKEND_INFO_INIT;
            fattn_status st = fattn_backend_get_info(all_kinds[i], &info);
            if (st != FATTN_OK || info.available != s->info[i].available ||
                info.device_count != s->info[i].device_count ||
                strcmp(info.name, s->info[i].name) != 0)
                failed(s,
                       "querier %d: %s: status %d, available %d with %d devices (%s); the main "
                       "thread saw available %d with %d",
                       a->id, fattn_backend_name(all_kinds[i]), (int)st, info.available,
                       info.device_count, info.reason, s->info[i].available,
                       s->info[i].device_count);
            if (!s->info[i].available) continue;
            char name[256];
            st = fattn_device_get_name(all_kinds[i], 0, name, sizeof name);
            if (st != FATTN_OK || strcmp(name, s->device0[i]) != 0)
                failed(s, "querier %d: device 0 of %s is \"%s\" (%d), was \"%s\"", a->id,
                       fattn_backend_name(all_kinds[i]), name, (int)st, s->device0[i]);
        }
        fattn_backend_kind k = FATTN_BACKEND_AUTO;
        if (fattn_backend_from_name("OpenCL", &k) != FATTN_OK || k != FATTN_BACKEND_OPENCL)
            failed(s, "querier %d: fattn_backend_from_name(\"OpenCL\") gave %d", a->id, (int)k);
        char bogus[32];
        snprintf(bogus, sizeof bogus, "nope-%d-%d", a->id, q);
        if (fattn_backend_from_name(bogus, &k) != FATTN_ERR_UNKNOWN_BACKEND ||
            !strstr(fattn_error_message(NULL), bogus))
            failed(s, "querier %d: the message for \"%s\" is \"%s\"", a->id, bogus,
                   fattn_error_message(NULL));
        if (strcmp(fattn_status_string(FATTN_ERR_HEADS),
                   "query heads are not a multiple of key/value heads") != 0)
            failed(s, "querier %d: fattn_status_string(FATTN_ERR_HEADS) changed", a->id);
        fattn_memory_report rep = FATTN_MEMORY_REPORT_INIT;
        if (fattn_memory_estimate(&s->desc, NULL, &rep) != FATTN_OK ||
            rep.naive_bytes != s->report.naive_bytes || rep.flash_bytes != s->report.flash_bytes ||
            rep.flops != s->report.flops)
            failed(s, "querier %d: fattn_memory_estimate differs from the main thread's", a->id);
    }
    return NULL;
}

/* Contexts and buffers made and freed in a loop. */
static void *churner(void *p) {
    const worker_arg *a = p;
    shared *s = a->s;
    pthread_barrier_wait(&s->start);
    for (int n = 0; n < CHURNS; n++) {
        fattn_context *ctx = NULL;
        if (fattn_context_create(s->kind, 0, &ctx) != FATTN_OK) {
            failed(s, "churner %d: create: %s", a->id, fattn_error_message(NULL));
            return NULL;
        }
        unsigned char in[1024], out[1024];
        for (size_t i = 0; i < sizeof in; i++)
            in[i] = (unsigned char)(i * 7 + (size_t)a->id + (size_t)n);
        fattn_buffer *b1 = NULL, *b2 = NULL;
        fattn_memory_report rep = FATTN_MEMORY_REPORT_INIT;
        if (fattn_buffer_alloc(ctx, sizeof in, &b1) != FATTN_OK ||
            fattn_buffer_alloc(ctx, 4096, &b2) != FATTN_OK ||
            fattn_buffer_write(b1, 0, in, sizeof in) != FATTN_OK ||
            fattn_buffer_read(b1, 0, out, sizeof out) != FATTN_OK ||
            memcmp(in, out, sizeof in) != 0)
            failed(s, "churner %d: buffer round trip: %s", a->id, fattn_error_message(ctx));
        if (fattn_context_memory_report(ctx, &s->desc, &rep) != FATTN_OK ||
            rep.naive_bytes != s->report.naive_bytes)
            failed(s, "churner %d: fattn_context_memory_report: %s", a->id,
                   fattn_error_message(ctx));
        fattn_buffer_free(b2);
        fattn_context_free(ctx); /* before b1: the buffer keeps the backend alive */
        fattn_buffer_free(b1);
    }
    return NULL;
}

typedef struct first_use {
    pthread_barrier_t start;
    fattn_backend_info info[WORKERS][KINDS];
    fattn_status st[WORKERS][KINDS];
} first_use;

static void *first_query(void *p) {
    first_use *f = ((void **)p)[0];
    const int id = (int)(intptr_t)((void **)p)[1];
    pthread_barrier_wait(&f->start);
    for (int i = KINDS - 1; i >= 0; i--) { /* the GPU modules first */
        f->info[id][i].size = sizeof f->info[id][i];
        f->st[id][i] = fattn_backend_get_info(all_kinds[i], &f->info[id][i]);
    }
    return NULL;
}

/* Before anything else in the process: threads ask for every backend at
 * once (what fattn_context_create does), which loads the modules and
 * enumerates devices concurrently. All must get the same answer. */
static void concurrent_first_use(void **state) {
    (void)state;
    first_use f;
    pthread_t t[WORKERS];
    void *args[WORKERS][2];
    memset(&f, 0, sizeof f);
    assert_int_equal(pthread_barrier_init(&f.start, NULL, WORKERS), 0);
    for (int i = 0; i < WORKERS; i++) {
        args[i][0] = &f;
        args[i][1] = (void *)(intptr_t)i;
        assert_int_equal(pthread_create(&t[i], NULL, first_query, args[i]), 0);
    }
    for (int i = 0; i < WORKERS; i++) pthread_join(t[i], NULL);
    pthread_barrier_destroy(&f.start);
    for (int k = 0; k < KINDS; k++) {
        for (int i = 0; i < WORKERS; i++) {
            assert_int_equal(f.st[i][k], FATTN_OK);
            if (f.info[i][k].available != f.info[0][k].available ||
                f.info[i][k].device_count != f.info[0][k].device_count)
                fail_msg("%s: thread %d saw available %d with %d devices (%s), thread 0 saw %d "
                         "with %d (%s)",
                         fattn_backend_name(all_kinds[k]), i, f.info[i][k].available,
                         f.info[i][k].device_count, f.info[i][k].reason, f.info[0][k].available,
                         f.info[0][k].device_count, f.info[0][k].reason);
        }
        print_message("%s: %d threads at once all saw %s (%d devices)\n",
                      fattn_backend_name(all_kinds[k]), WORKERS,
                      f.info[0][k].available ? "it available" : "it unavailable",
                      f.info[0][k].device_count);
    }
}

static void run_threads(void **state) {
    static shared s;
    const fattn_backend_kind kind = *(const fattn_backend_kind *)*state;
    memset(&s, 0, sizeof s);
    s.kind = kind;
    const char *name = fattn_backend_name(kind);
    if (!test_backend_selected(name)) {
        print_message("[  SKIPPED ] %s: not in FATTN_TEST_BACKENDS=%s\n", name,
                      getenv("FATTN_TEST_BACKENDS"));
        skip();
    }
    for (int i = 0; i < KINDS; i++) {
        s.info[i].size = sizeof s.info[i];
        assert_int_equal(fattn_backend_get_info(all_kinds[i], &s.info[i]), FATTN_OK);
        if (s.info[i].available)
            assert_int_equal(
                fattn_device_get_name(all_kinds[i], 0, s.device0[i], sizeof s.device0[i]),
                FATTN_OK);
        if (all_kinds[i] == kind && !s.info[i].available)
            test_skip_unless_required(name, s.info[i].reason);
    }
    for (size_t i = 0; i < sizeof case_names / sizeof case_names[0]; i++)
        if (!find_case(case_names[i]))
            fail_msg("case '%s' is not in the shared table", case_names[i]);
    s.desc = (fattn_attention_desc){.size = sizeof s.desc,
                                    .batch = 2,
                                    .heads_q = 8,
                                    .heads_kv = 2,
                                    .seq_q = 100,
                                    .seq_kv = 300,
                                    .head_dim = 64,
                                    .dtype = FATTN_BF16,
                                    .causal = FATTN_CAUSAL_BOTTOM_RIGHT};
    s.report.size = sizeof s.report;
    assert_int_equal(fattn_memory_estimate(&s.desc, NULL, &s.report), FATTN_OK);
    pthread_mutex_init(&s.lock, NULL);

    enum { ALL = WORKERS + QUERIERS + CHURNERS };
    pthread_t t[ALL];
    worker_arg args[ALL];
    assert_int_equal(pthread_barrier_init(&s.start, NULL, ALL), 0);
    for (int i = 0; i < ALL; i++) {
        args[i] = (worker_arg){&s, i};
        void *(*fn)(void *) = i < WORKERS ? worker : i < WORKERS + QUERIERS ? querier : churner;
        assert_int_equal(pthread_create(&t[i], NULL, fn, &args[i]), 0);
    }
    for (int i = 0; i < ALL; i++) pthread_join(t[i], NULL);
    pthread_barrier_destroy(&s.start);
    pthread_mutex_destroy(&s.lock);
    if (atomic_load(&s.failures))
        fail_msg("%d failures; the first: %s", atomic_load(&s.failures), s.first);
    print_message("%s: %d workers x %d checked forwards, %d query threads, %d create/free threads: "
                  "no failure\n",
                  name, WORKERS, ROUNDS, QUERIERS, CHURNERS);
}

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static int setup(void **state) {
    (void)state;
    /* A fresh program cache: the OpenCL workers build and write it at once. */
    snprintf(cache_dir, sizeof cache_dir, "/tmp/fattn-concurrency-XXXXXX");
    if (!mkdtemp(cache_dir)) return -1;
    setenv("FATTN_CACHE_DIR", cache_dir, 1);
    return 0;
}

static int teardown(void **state) {
    (void)state;
    return nftw(cache_dir, remove_entry, 8, FTW_DEPTH | FTW_PHYS);
}

int main(void) {
    static const fattn_backend_kind cpu = FATTN_BACKEND_CPU, opencl = FATTN_BACKEND_OPENCL,
                                    cuda = FATTN_BACKEND_CUDA;
    const struct CMUnitTest tests[] = {
        {"first use", concurrent_first_use, NULL, NULL, NULL},
        {"cpu", run_threads, NULL, NULL, (void *)&cpu},
        {"opencl", run_threads, NULL, NULL, (void *)&opencl},
        {"cuda", run_threads, NULL, NULL, (void *)&cuda},
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}

/* The CPU backend's persistent thread pool, through the public API: its
 * workers outlive a call and end with the context; a context serves one
 * thread after another, with a different thread count each call; a
 * thousand contexts created, used and freed leave no thread behind (and,
 * in the sanitizer build, no memory: LeakSanitizer checks at exit); a child
 * of fork() can still use a context made before the fork. Every forward is
 * checked against the double reference. Linux: threads are counted in
 * /proc/self/task. */
#define _GNU_SOURCE
#include <dirent.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "harness.h"

#if defined(__SANITIZE_THREAD__)
#define UNDER_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define UNDER_TSAN 1
#endif
#endif

static const fattn_case *find_case(const char *name) {
    for (size_t i = 0; i < fattn_case_count; i++)
        if (strcmp(fattn_cases[i].name, name) == 0) return &fattn_cases[i];
    fail_msg("no case named '%s'", name);
    return NULL;
}

/* Threads of this process now. */
static int thread_count(void) {
    DIR *d = opendir("/proc/self/task");
    if (!d) return -1;
    int n = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        if (e->d_name[0] != '.') n++;
    closedir(d);
    return n;
}

/* A CPU context with `threads` threads; NULL (after a failed check) if none. */
static fattn_context *cpu_context(int threads) {
    fattn_context_params params = FATTN_CONTEXT_PARAMS_INIT;
    params.backend = FATTN_BACKEND_CPU;
    params.cpu_threads = threads;
    fattn_context *ctx = NULL;
    const fattn_status st = fattn_context_create_with(&params, &ctx);
    if (st != FATTN_OK) fail_msg("create: %s", fattn_error_message(NULL));
    return ctx;
}

/* Runs case `name` in f32 on ctx; 1 when it matches the reference. */
static int checked(fattn_context *ctx, const char *name, uint64_t seed, char *why, size_t len) {
    case_result r;
    const fattn_status st = harness_run(ctx, find_case(name), FATTN_F32, seed, HARNESS_TILED, &r);
    if (st != FATTN_OK) {
        snprintf(why, len, "'%s': %s: %s", name, fattn_status_string(st),
                 fattn_error_message(ctx));
        return 0;
    }
    if (!harness_passed(&r)) {
        snprintf(why, len, "'%s' seed 0x%llx: max err %.3g (tol %.3g), %lld NaN, %lld guard bytes",
                 name, (unsigned long long)seed, r.max_err, r.tol, (long long)r.nan_count,
                 (long long)r.guard_broken);
        return 0;
    }
    return 1;
}

/* Threads of this process once the runtime's own helper threads (a
 * sanitizer's background thread starts with the first pthread_create) are
 * up: a context run and freed first. */
static int settled_thread_count(void) {
    fattn_context *ctx = cpu_context(2);
    char why[512] = "";
    if (ctx && !checked(ctx, "head dim 1", 0x5e7u, why, sizeof why)) fail_msg("%s", why);
    fattn_context_free(ctx);
    return thread_count();
}

/* Workers start with the first call that wants them, stay between calls,
 * and end with the context. */
static void test_workers_persist(void **state) {
    (void)state;
    const int before = settled_thread_count();
    assert_true(before > 0);
    fattn_context *ctx = cpu_context(4);
    assert_non_null(ctx);
    assert_int_equal(thread_count(), before); /* none before a call */
    char why[512] = "";
    for (int r = 0; r < 3; r++) {
        if (!checked(ctx, "GQA 8/2", 0x900du + (unsigned)r, why, sizeof why)) fail_msg("%s", why);
        assert_int_equal(thread_count(), before + 3); /* the caller is the fourth */
    }
    fattn_context_free(ctx);
    assert_int_equal(thread_count(), before);
}

typedef struct turn {
    fattn_context *ctx;
    int threads, round;
    int ok;
    char why[512];
} turn;

static void *take_turn(void *p) {
    turn *t = p;
    int64_t v = t->threads;
    if (fattn_context_set_param(t->ctx, FATTN_PARAM_CPU_THREADS, v) != FATTN_OK) {
        snprintf(t->why, sizeof t->why, "set_param: %s", fattn_error_message(t->ctx));
        return NULL;
    }
    static const char *const names[] = {"causal seq 1000 dim 128", "decode 1/4099 gqa 4 d128",
                                        "GQA 8/2 causal bhsd", "batch 3"};
    t->ok = 1;
    for (int i = 0; i < 4 && t->ok; i++)
        t->ok = checked(t->ctx, names[(i + t->round) % 4], 0x7000u + 13u * (unsigned)t->round,
                        t->why, sizeof t->why);
    return NULL;
}

/* One context, used by one thread after another (each joined before the
 * next starts), with the thread count changing between them: more, fewer,
 * one, more than ever. */
static void test_threads_one_at_a_time(void **state) {
    (void)state;
    fattn_context *ctx = cpu_context(2);
    assert_non_null(ctx);
    static const int threads[] = {4, 1, 3, 7, 2, 5};
    for (int r = 0; r < (int)(sizeof threads / sizeof threads[0]); r++) {
        turn t = {ctx, threads[r], r, 0, ""};
        pthread_t tid;
        assert_int_equal(pthread_create(&tid, NULL, take_turn, &t), 0);
        assert_int_equal(pthread_join(tid, NULL), 0);
        if (!t.ok) fail_msg("turn %d (%d threads): %s", r, threads[r], t.why);
    }
    fattn_context_free(ctx);
}

/* A thousand contexts, each running a forward on three threads: no thread
 * outlives its context. ThreadSanitizer (which looks for races, not
 * leaks) gets a quarter of them: each costs it 80 ms. */
#ifdef UNDER_TSAN
enum { CYCLES = 250 };
#else
enum { CYCLES = 1000 };
#endif
static void test_create_free_cycles(void **state) {
    (void)state;
    const int before = settled_thread_count();
    char why[512] = "";
    for (int n = 0; n < CYCLES; n++) {
        fattn_context *ctx = cpu_context(3);
        assert_non_null(ctx);
        if (!checked(ctx, "head dim 1", 0x1000u + (unsigned)n, why, sizeof why))
            fail_msg("cycle %d: %s", n, why);
        fattn_context_free(ctx);
        if (n % 100 == 0) assert_int_equal(thread_count(), before);
    }
    assert_int_equal(thread_count(), before);
}

/* A child of fork() gets the calling thread alone: a context made (and
 * used) before the fork starts its workers afresh there. */
static void test_fork(void **state) {
    (void)state;
#ifdef UNDER_TSAN
    skip(); /* ThreadSanitizer ends a child that starts threads after a fork */
#else
    fattn_context *ctx = cpu_context(3);
    assert_non_null(ctx);
    char why[512] = "";
    if (!checked(ctx, "seq 63 dim 40", 0xf0u, why, sizeof why)) fail_msg("parent: %s", why);
    fflush(NULL);
    const pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        const int ok = checked(ctx, "seq 63 dim 40", 0xf1u, why, sizeof why) &&
                       checked(ctx, "GQA 8/2", 0xf2u, why, sizeof why);
        if (!ok) fprintf(stderr, "child: %s\n", why);
        fattn_context_free(ctx);
        _exit(ok ? 0 : 1);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    if (!checked(ctx, "GQA 8/2", 0xf3u, why, sizeof why)) fail_msg("parent after: %s", why);
    fattn_context_free(ctx);
#endif
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_workers_persist),
        cmocka_unit_test(test_threads_one_at_a_time),
        cmocka_unit_test(test_create_free_cycles),
        cmocka_unit_test(test_fork),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

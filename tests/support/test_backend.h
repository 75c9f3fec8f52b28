/* What every cross-backend cmocka test does before it runs on a backend:
 * FATTN_TEST_BACKENDS=cpu,cuda,... keeps only those (a visible skip for the
 * rest), and FATTN_TEST_REQUIRE names backends and parts (e.g. opencl-naive)
 * whose absence fails the test instead of skipping it. Include after
 * cmocka.h; static inline, since the support library does not link cmocka. */
#ifndef FATTN_TEST_BACKEND_H
#define FATTN_TEST_BACKEND_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fattn.h"

/* A visible skip, or a failure when FATTN_TEST_REQUIRE names `what`. */
static inline void test_skip_unless_required(const char *what, const char *reason) {
    const char *required = getenv("FATTN_TEST_REQUIRE");
    if (required && strstr(required, what))
        fail_msg("%s is required (FATTN_TEST_REQUIRE=%s) but unavailable: %s", what, required,
                 reason);
    print_message("[  SKIPPED ] %s: %s\n", what, reason);
    skip();
}

/* The end of a backend's run of cases: its counts, a failure if any case
 * failed, and where some were declined (FATTN_ERR_UNSUPPORTED, reason: the
 * first one's message) a visible skip, or a failure when
 * FATTN_TEST_REQUIRE names "<backend>-<part>". */
static inline void test_finish_runs(const char *backend, const char *part, int ran, int declined,
                                    int failures, const char *reason) {
    print_message("%s: %d runs passed, %d declined, %d failed\n", backend, ran, declined, failures);
    assert_int_equal(failures, 0);
    if (!declined) return;
    char what[64], why[700];
    snprintf(what, sizeof what, "%s-%s", backend, part);
    snprintf(why, sizeof why, "%d of %d runs declined: %s", declined, declined + ran, reason);
    test_skip_unless_required(what, why);
}

/* 1 when FATTN_TEST_BACKENDS is unset or names this backend. */
static inline int test_backend_selected(const char *name) {
    const char *only = getenv("FATTN_TEST_BACKENDS");
    return !only || !*only || strstr(only, name) != NULL;
}

/* Describes backend `kind` into *info (its size set here), or skips (fails
 * where required). */
static inline void test_use_backend(fattn_backend_kind kind, fattn_backend_info *info) {
    const fattn_backend_info init = FATTN_BACKEND_INFO_INIT;
    *info = init;
    assert_int_equal(fattn_backend_get_info(kind, info), FATTN_OK);
    if (!test_backend_selected(info->name)) {
        print_message("[  SKIPPED ] %s: not in FATTN_TEST_BACKENDS=%s\n", info->name,
                      getenv("FATTN_TEST_BACKENDS"));
        skip();
    }
    if (!info->available) test_skip_unless_required(info->name, info->reason);
}

#endif

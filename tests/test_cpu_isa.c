/* FATTN_CPU_ISA, through the public API: every level this CPU runs opens a
 * context and computes right; a level it lacks and an unknown name fail the
 * context's creation with FATTN_ERR_ENVIRONMENT and a message naming the
 * value (and, for a missing level, what the CPU runs at most). */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "harness.h"

static const fattn_case *find_case(const char *name) {
    for (size_t i = 0; i < fattn_case_count; i++)
        if (strcmp(fattn_cases[i].name, name) == 0) return &fattn_cases[i];
    fail_msg("no case named '%s'", name);
    return NULL;
}

/* Opens a CPU context with FATTN_CPU_ISA=isa; its status. */
static fattn_status open_with(const char *isa, fattn_context **ctx) {
    setenv("FATTN_CPU_ISA", isa, 1);
    *ctx = NULL;
    const fattn_status st = fattn_context_create(FATTN_BACKEND_CPU, 0, ctx);
    unsetenv("FATTN_CPU_ISA");
    return st;
}

static void test_levels(void **state) {
    (void)state;
#if defined(__x86_64__) || defined(_M_X64)
    static const char *const levels[] = {"amx", "avx512", "avx2", "portable", "neon"};
#elif defined(__aarch64__)
    static const char *const levels[] = {"neon", "portable", "avx2", "avx512", "amx"};
#else
    static const char *const levels[] = {"portable", "neon", "avx2", "avx512", "amx"};
#endif
    int ran = 0, refused = 0;
    for (size_t i = 0; i < sizeof levels / sizeof levels[0]; i++) {
        fattn_context *ctx;
        const fattn_status st = open_with(levels[i], &ctx);
        if (st != FATTN_OK) {
            /* Refused: for want of the level, said so. */
            assert_int_equal(st, FATTN_ERR_ENVIRONMENT);
            assert_null(ctx);
            const char *msg = fattn_error_message(NULL);
            if (!strstr(msg, levels[i]) || !strstr(msg, "runs at most"))
                fail_msg("FATTN_CPU_ISA=%s: message \"%s\"", levels[i], msg);
            refused++;
            continue;
        }
        ran++;
        case_result r;
        const fattn_case *c = find_case("causal sq<sk 63/129");
        for (int t = 0; t < 3; t++) {
            const fattn_dtype dt = t == 0 ? FATTN_F32 : t == 1 ? FATTN_F16 : FATTN_BF16;
            assert_int_equal(harness_run(ctx, c, dt, 0x15au + (unsigned)i, HARNESS_TILED, &r),
                             FATTN_OK);
            if (!harness_passed(&r))
                fail_msg("FATTN_CPU_ISA=%s %s: max err %.3g (tol %.3g)", levels[i],
                         harness_dtype_name(dt), r.max_err, r.tol);
        }
        fattn_context_free(ctx);
    }
    /* portable runs everywhere; no CPU runs both x86-64's levels and NEON. */
    assert_true(ran >= 1);
    assert_true(refused >= 1);
}

static void test_unknown_name(void **state) {
    (void)state;
    fattn_context *ctx;
    assert_int_equal(open_with("sse9", &ctx), FATTN_ERR_ENVIRONMENT);
    assert_null(ctx);
    const char *msg = fattn_error_message(NULL);
    if (!strstr(msg, "sse9") || !strstr(msg, "auto"))
        fail_msg("FATTN_CPU_ISA=sse9: message \"%s\"", msg);
    assert_int_equal(open_with("auto", &ctx), FATTN_OK);
    fattn_context_free(ctx);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_levels),
        cmocka_unit_test(test_unknown_name),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

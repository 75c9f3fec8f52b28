/* Runs cases of the shared table on one backend in every dtype against the
 * double reference, without cmocka: for builds where the test framework is
 * not at hand, such as a cross build run under an emulator
 * (scripts/neon_check.sh). Usage: fattn_case_table [backend] [substrings]:
 * backend cpu (default), cuda or opencl; substrings a comma-separated list
 * of case-name parts (default: every case). Prints a line per run and
 * exits 1 if any run fails or is declined, 0 otherwise. */
#include <stdio.h>
#include <string.h>

#include "harness.h"

/* 1 when name contains one of list's comma-separated parts (or list is empty). */
static int selected(const char *name, const char *list) {
    if (!list || !*list) return 1;
    char part[128];
    for (const char *p = list; *p;) {
        size_t len = strcspn(p, ",");
        if (len >= sizeof part) len = sizeof part - 1;
        memcpy(part, p, len);
        part[len] = '\0';
        if (len && strstr(name, part)) return 1;
        p += strcspn(p, ",");
        p += *p == ',';
    }
    return 0;
}

int main(int argc, char **argv) {
    fattn_backend_kind kind = FATTN_BACKEND_CPU;
    if (argc > 1 && fattn_backend_from_name(argv[1], &kind) != FATTN_OK) {
        fprintf(stderr, "fattn_case_table: %s\n", fattn_error_message(NULL));
        return 2;
    }
    fattn_context *ctx = NULL;
    if (fattn_context_create(kind, 0, &ctx) != FATTN_OK) {
        fprintf(stderr, "fattn_case_table: %s\n", fattn_error_message(NULL));
        return 1;
    }
    printf("%s: %s\n", fattn_context_backend_name(ctx), fattn_context_device_name(ctx));
    static const fattn_dtype dtypes[] = {FATTN_F32, FATTN_F16, FATTN_BF16};
    int runs = 0, failures = 0;
    for (size_t i = 0; i < fattn_case_count; i++) {
        const fattn_case *c = &fattn_cases[i];
        if (!selected(c->name, argc > 2 ? argv[2] : NULL)) continue;
        for (int t = 0; t < 3; t++) {
            case_result r;
            const fattn_status st =
                harness_run(ctx, c, dtypes[t], 0x5eed0000u + 131u * i, HARNESS_TILED, &r);
            runs++;
            if (st != FATTN_OK) {
                failures++;
                printf("FAIL %-28s %-4s %s: %s\n", c->name, harness_dtype_name(dtypes[t]),
                       fattn_status_string(st), fattn_error_message(ctx));
            } else if (!harness_passed(&r)) {
                failures++;
                printf("FAIL %-28s %-4s max err %.3g (tol %.3g), %lld NaN, %lld guard bytes\n",
                       c->name, harness_dtype_name(dtypes[t]), r.max_err, r.tol,
                       (long long)r.nan_count, (long long)r.guard_broken);
            } else {
                printf("ok   %-28s %-4s max err %.3g (tol %.3g)\n", c->name,
                       harness_dtype_name(dtypes[t]), r.max_err, r.tol);
            }
        }
    }
    fattn_context_free(ctx);
    printf("%d runs, %d failed\n", runs, failures);
    return failures || !runs;
}

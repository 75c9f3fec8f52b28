/* The README's first command ends here: on every backend available on this
 * machine, run a few cases of the shared table, and print the error against
 * the double reference, the time, and the memory the naive method would need
 * against what fattn used. Exits non-zero if any result is wrong. */
#include <stdio.h>
#include <string.h>

#include "harness.h"

static const char *const demo_cases[] = {"seq 1000 dim 64", "causal seq 1000 dim 128", "GQA 8/2",
                                         "causal sq>sk 129/63"};

static const fattn_case *find_case(const char *name) {
    for (size_t i = 0; i < fattn_case_count; i++)
        if (strcmp(fattn_cases[i].name, name) == 0) return &fattn_cases[i];
    return NULL;
}

static void human(double bytes, char *buf, size_t len) {
    const char *unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int u = 0;
    while (bytes >= 1024.0 && u < 4) {
        bytes /= 1024.0;
        u++;
    }
    snprintf(buf, len, "%.1f %s", bytes, unit[u]);
}

/* Runs the demo cases on one context; returns the number of failures. */
static int demo_context(fattn_context *ctx) {
    int failures = 0;
    const fattn_dtype dtypes[] = {FATTN_F32, FATTN_F16, FATTN_BF16};
    printf("\n%s: %s\n", fattn_context_backend_name(ctx), fattn_context_device_name(ctx));
    printf("  %-24s %-5s %11s %9s %9s %11s %11s %7s\n", "case", "dtype", "max error", "tolerance",
           "time ms", "naive mem", "fattn mem", "saved");
    for (size_t i = 0; i < sizeof demo_cases / sizeof demo_cases[0]; i++) {
        const fattn_case *c = find_case(demo_cases[i]);
        for (int t = 0; t < 3 && c; t++) {
            case_result r;
            fattn_attention_desc d = harness_desc(c, dtypes[t]);
            fattn_memory_report m = FATTN_MEMORY_REPORT_INIT;
            fattn_status st = harness_run(ctx, c, dtypes[t], 42 + i, HARNESS_TILED, &r);
            if (st == FATTN_OK) st = fattn_context_memory_report(ctx, &d, &m);
            if (st != FATTN_OK) {
                printf("  %-24s %-5s failed: %s: %s\n", c->name, harness_dtype_name(dtypes[t]),
                       fattn_status_string(st), fattn_error_message(ctx));
                failures++;
                continue;
            }
            char naive[32], flash[32];
            human((double)m.naive_bytes, naive, sizeof naive);
            human((double)m.flash_bytes, flash, sizeof flash);
            int ok = harness_passed(&r);
            failures += !ok;
            printf("  %-24s %-5s %11.3g %9.1g %9.2f %11s %11s %6.1f%%%s\n", c->name,
                   harness_dtype_name(dtypes[t]), r.max_err, r.tol, r.seconds * 1e3, naive, flash,
                   m.percent_saved, ok ? "" : "  WRONG");
        }
    }
    return failures;
}

/* What the accounting says at long sequence lengths, where naive memory
 * grows with the square: batch 1, 16 heads, head dim 128, f16, causal. */
static void long_sequences(fattn_context *ctx) {
    printf("\nmemory at long sequences on %s (batch 1, 16 heads, dim 128, f16):\n",
           fattn_context_backend_name(ctx));
    printf("  %8s %12s %12s %9s\n", "seq", "naive", "fattn", "ratio");
    for (int64_t s = 2048; s <= 131072; s *= 4) {
        fattn_attention_desc d = {.size = sizeof d,
                                  .batch = 1,
                                  .heads_q = 16,
                                  .heads_kv = 16,
                                  .seq_q = s,
                                  .seq_kv = s,
                                  .head_dim = 128,
                                  .dtype = FATTN_F16,
                                  .causal = FATTN_CAUSAL_BOTTOM_RIGHT};
        fattn_memory_report m = FATTN_MEMORY_REPORT_INIT;
        if (fattn_context_memory_report(ctx, &d, &m) != FATTN_OK) continue;
        char naive[32], flash[32];
        human((double)m.naive_bytes, naive, sizeof naive);
        human((double)m.flash_bytes, flash, sizeof flash);
        printf("  %8lld %12s %12s %8.0fx\n", (long long)s, naive, flash, m.reduction);
    }
}

int main(void) {
    int failures = 0, ran = 0;
    printf("fattn %s demo\n", fattn_version_string());
    for (int k = FATTN_BACKEND_CPU; k < FATTN_BACKEND_COUNT; k++) {
        fattn_backend_info info = FATTN_BACKEND_INFO_INIT;
        fattn_backend_get_info((fattn_backend_kind)k, &info);
        if (!info.available) {
            printf("\n%s: skipped: %s\n", info.name, info.reason);
            continue;
        }
        for (int dev = 0; dev < info.device_count; dev++) {
            fattn_context *ctx;
            if (fattn_context_create((fattn_backend_kind)k, dev, &ctx) != FATTN_OK) {
                printf("\n%s device %d: %s\n", info.name, dev, fattn_error_message(NULL));
                failures++;
                continue;
            }
            failures += demo_context(ctx);
            if (ran++ == 0) long_sequences(ctx);
            fattn_context_free(ctx);
        }
    }
    printf("\n%s\n",
           failures ? "demo: SOME RESULTS WERE WRONG" : "demo: all results match the reference");
    return failures != 0;
}

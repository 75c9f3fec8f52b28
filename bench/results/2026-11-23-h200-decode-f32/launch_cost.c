/* Where a decode call's fixed time goes (bench/results/2026-11-23-h200-
 * decode-mma's, plus the plan column): for one backend and seq_kv, bf16 GQA
 * 32/8 d128 batch 1, the host time fattn_forward takes to plan and enqueue
 * (mean of 200, synchronised between calls, not timed), of which planning
 * alone (fattn_workspace_size, mean of 200), the
 * bench's single-call device time (timer marks around one call, median of
 * 50), and back-to-back calls (marks around 100 calls, over 100).
 * Build: cc -O2 -Iinclude launch_cost.c -Lbuild -lfattn -o launch_cost
 * Usage: launch_cost cuda|opencl seq_kv [kv_splits] */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fattn.h"

static double now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec * 1e-3;
}

static int cmp(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

#define CHECK(x)                                                                                   \
    do {                                                                                           \
        fattn_status st_ = (x);                                                                    \
        if (st_ != FATTN_OK) {                                                                     \
            fprintf(stderr, "%s: %s: %s\n", #x, fattn_status_string(st_), fattn_error_message(ctx)); \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)

int main(int argc, char **argv) {
    if (argc < 3) return 2;
    fattn_backend_kind kind;
    fattn_context *ctx = NULL;
    CHECK(fattn_backend_from_name(argv[1], &kind));
    CHECK(fattn_context_create(kind, 0, &ctx));
    const int64_t skv = atoll(argv[2]), hq = 32, hkv = 8, d = 128;
    if (argc > 3) CHECK(fattn_context_set_param(ctx, FATTN_PARAM_KV_SPLITS, atoll(argv[3])));
    fattn_attention_desc desc = FATTN_ATTENTION_DESC_INIT;
    desc.batch = 1, desc.heads_q = hq, desc.heads_kv = hkv, desc.seq_q = 1, desc.seq_kv = skv;
    desc.head_dim = d, desc.dtype = FATTN_BF16;
    fattn_buffer *bq, *bk, *bv, *bo;
    CHECK(fattn_buffer_alloc(ctx, (size_t)(hq * d * 2), &bq));
    CHECK(fattn_buffer_alloc(ctx, (size_t)(skv * hkv * d * 2), &bk));
    CHECK(fattn_buffer_alloc(ctx, (size_t)(skv * hkv * d * 2), &bv));
    CHECK(fattn_buffer_alloc(ctx, (size_t)(hq * d * 2), &bo));
    fattn_tensor q, k, v, o;
    CHECK(fattn_tensor_init(bq, FATTN_BF16, FATTN_LAYOUT_BSHD, 1, hq, 1, d, 0, &q));
    CHECK(fattn_tensor_init(bk, FATTN_BF16, FATTN_LAYOUT_BSHD, 1, hkv, skv, d, 0, &k));
    CHECK(fattn_tensor_init(bv, FATTN_BF16, FATTN_LAYOUT_BSHD, 1, hkv, skv, d, 0, &v));
    CHECK(fattn_tensor_init(bo, FATTN_BF16, FATTN_LAYOUT_BSHD, 1, hq, 1, d, 0, &o));
    fattn_memory_report rep = FATTN_MEMORY_REPORT_INIT;
    CHECK(fattn_context_memory_report(ctx, &desc, &rep));
    for (int i = 0; i < 20; i++) CHECK(fattn_forward(ctx, &desc, &q, &k, &v, &o, NULL));
    CHECK(fattn_context_synchronize(ctx));
    double host = 0.0;
    for (int i = 0; i < 200; i++) {
        const double t0 = now_us();
        CHECK(fattn_forward(ctx, &desc, &q, &k, &v, &o, NULL));
        host += now_us() - t0;
        CHECK(fattn_context_synchronize(ctx));
    }
    double plan = 0.0;
    for (int i = 0; i < 200; i++) {
        uint64_t ws = 0;
        const double t0 = now_us();
        CHECK(fattn_workspace_size(ctx, &desc, &ws));
        plan += now_us() - t0;
    }
    fattn_timer *t;
    CHECK(fattn_timer_create(ctx, &t));
    double one[50], ms;
    for (int i = 0; i < 50; i++) {
        CHECK(fattn_timer_start(t));
        CHECK(fattn_forward(ctx, &desc, &q, &k, &v, &o, NULL));
        CHECK(fattn_timer_stop(t));
        CHECK(fattn_context_synchronize(ctx));
        CHECK(fattn_timer_elapsed_ms(t, &one[i]));
    }
    qsort(one, 50, sizeof one[0], cmp);
    CHECK(fattn_timer_start(t));
    for (int i = 0; i < 100; i++) CHECK(fattn_forward(ctx, &desc, &q, &k, &v, &o, NULL));
    CHECK(fattn_timer_stop(t));
    CHECK(fattn_context_synchronize(ctx));
    CHECK(fattn_timer_elapsed_ms(t, &ms));
    printf("%-6s seq_kv %7lld kernel %-14s host %6.1f us (plan %5.1f)  single %.4f ms  back-to-back %.4f ms\n",
           argv[1], (long long)skv, rep.kernel, host / 200, plan / 200, one[25], ms / 100);
    fattn_timer_free(t);
    fattn_buffer_free(bq), fattn_buffer_free(bk), fattn_buffer_free(bv), fattn_buffer_free(bo);
    fattn_context_free(ctx);
    return 0;
}

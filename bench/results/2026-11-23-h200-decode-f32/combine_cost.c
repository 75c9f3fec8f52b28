/* What the split-KV decode's second launch costs (call75): fattn_combine on
 * the batch-1 decode's workspace shape (32 rows of head dim 128, 66 f32
 * parts, bf16 O, no lse), back to back (marks around 200 calls, over 200)
 * and single (marks around one call, median of 50), per backend. The
 * decode kernel's own time is then the decode's back-to-back time minus
 * this. Parts hold finite lse values, so every part is read.
 * Build: cc -O2 -Iinclude combine_cost.c -Lbuild -lfattn -o combine_cost
 * Usage: combine_cost cuda|opencl [parts] */
#include <stdio.h>
#include <stdlib.h>

#include "fattn.h"

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
    if (argc < 2) return 2;
    fattn_backend_kind kind;
    fattn_context *ctx = NULL;
    CHECK(fattn_backend_from_name(argv[1], &kind));
    CHECK(fattn_context_create(kind, 0, &ctx));
    const int64_t H = 32, D = 128, P = argc > 2 ? atoll(argv[2]) : 66;
    float *po = malloc(sizeof(float) * (size_t)(P * H * D)), *pl = malloc(sizeof(float) * (size_t)(P * H));
    if (!po || !pl) return 1;
    for (int64_t i = 0; i < P * H * D; i++) po[i] = (float)((i * 7919) % 1000) / 1000.0f - 0.5f;
    for (int64_t i = 0; i < P * H; i++) pl[i] = (float)((i * 104729) % 97) / 10.0f;
    fattn_buffer *bo, *bl, *out;
    CHECK(fattn_buffer_alloc(ctx, sizeof(float) * (size_t)(P * H * D), &bo));
    CHECK(fattn_buffer_alloc(ctx, sizeof(float) * (size_t)(P * H), &bl));
    CHECK(fattn_buffer_alloc(ctx, 2 * (size_t)(H * D), &out));
    CHECK(fattn_buffer_write(bo, 0, po, sizeof(float) * (size_t)(P * H * D)));
    CHECK(fattn_buffer_write(bl, 0, pl, sizeof(float) * (size_t)(P * H)));
    fattn_tensor to, tl, tout;
    CHECK(fattn_tensor_init(bo, FATTN_F32, FATTN_LAYOUT_BSHD, 1, H, 1, D, 0, &to));
    CHECK(fattn_tensor_init_lse(bl, 1, H, 1, 0, &tl));
    CHECK(fattn_tensor_init(out, FATTN_BF16, FATTN_LAYOUT_BSHD, 1, H, 1, D, 0, &tout));
    fattn_combine_desc cd = FATTN_COMBINE_DESC_INIT;
    cd.batch = 1, cd.heads = H, cd.seq = 1, cd.head_dim = D, cd.parts = P;
    cd.part_dtype = FATTN_F32, cd.dtype = FATTN_BF16;
    cd.o_part_stride = H * D, cd.lse_part_stride = H;
    for (int i = 0; i < 20; i++) CHECK(fattn_combine(ctx, &cd, &to, &tl, &tout, NULL));
    CHECK(fattn_context_synchronize(ctx));
    fattn_timer *t;
    CHECK(fattn_timer_create(ctx, &t));
    double one[50], ms;
    for (int i = 0; i < 50; i++) {
        CHECK(fattn_timer_start(t));
        CHECK(fattn_combine(ctx, &cd, &to, &tl, &tout, NULL));
        CHECK(fattn_timer_stop(t));
        CHECK(fattn_context_synchronize(ctx));
        CHECK(fattn_timer_elapsed_ms(t, &one[i]));
    }
    qsort(one, 50, sizeof one[0], cmp);
    CHECK(fattn_timer_start(t));
    for (int i = 0; i < 200; i++) CHECK(fattn_combine(ctx, &cd, &to, &tl, &tout, NULL));
    CHECK(fattn_timer_stop(t));
    CHECK(fattn_context_synchronize(ctx));
    CHECK(fattn_timer_elapsed_ms(t, &ms));
    printf("%-6s combine %lld parts x %lld rows x d%lld: single %.4f ms  back-to-back %.4f ms\n",
           argv[1], (long long)P, (long long)H, (long long)D, one[25], ms / 200);
    fattn_timer_free(t);
    fattn_buffer_free(bo), fattn_buffer_free(bl), fattn_buffer_free(out);
    fattn_context_free(ctx);
    free(po), free(pl);
    return 0;
}

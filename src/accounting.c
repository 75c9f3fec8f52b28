/* Memory and FLOP accounting: what the naive method would hold (the N x N
 * scores and probabilities) against what the tiled algorithm holds. Pure
 * arithmetic on the description, the same for every backend. */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "internal.h"

#define R_(field) offsetof(fattn_memory_report, field)
/* The report's older sizes: the first version ends after naive_bytes. */
#define REPORT_OLDER                                                                               \
    FATTN_OLDER(R_(flash_bytes), R_(tile_bytes), R_(groups), R_(row_stat_bytes),                   \
                R_(workspace_bytes), R_(reduction), R_(percent_saved), R_(flops), R_(kernel))
#define TILING_OLDER                                                                               \
    FATTN_OLDER(offsetof(fattn_tiling, concurrent_groups), offsetof(fattn_tiling, workspace_bytes))

double fattn_visible_pairs(int64_t seq_q, int64_t seq_kv, int causal, int64_t off) {
    if (seq_q <= 0 || seq_kv <= 0) return 0.0;
    if (!causal) return (double)seq_q * (double)seq_kv;
    /* Row i sees clamp(i + off + 1, 0, seq_kv) keys: none for i < -off, all
     * from i >= seq_kv - off - 1 on, and one more per row in between. */
    const int64_t lo = off < 0 ? -off : 0; /* first row that sees a key */
    const int64_t full = seq_kv - off - 1 < 0 ? 0 : seq_kv - off - 1; /* first row that sees all */
    const int64_t mid_end = full < seq_q ? full : seq_q;              /* rows [lo, mid_end) ramp */
    double pairs = 0.0;
    if (mid_end > lo) {
        const double first = (double)(lo + off + 1), last = (double)(mid_end - 1 + off + 1);
        pairs += (first + last) * (double)(mid_end - lo) / 2.0;
    }
    const int64_t full_from = full > lo ? full : lo;
    if (seq_q > full_from) pairs += (double)(seq_q - full_from) * (double)seq_kv;
    return pairs;
}

double fattn_flops(const fattn_attention_desc *desc) {
    fattn_msg scratch;
    fattn_request r;
    if (fattn_read_request(desc, &r, &scratch) != FATTN_OK) return 0.0;
    const fattn_attention_desc *d = &r.d;
    return 2.0 * (double)d->batch * (double)d->heads_q * (double)(d->head_dim + d->head_dim_v) *
           fattn_visible_pairs(d->seq_q, d->seq_kv, d->causal != FATTN_CAUSAL_NONE,
                               fattn_causal_offset(d));
}

/* Overflow-checked uint64 a*b accumulated into *acc. */
static int mul_add(uint64_t *acc, uint64_t a, uint64_t b) {
    uint64_t x;
    return !__builtin_mul_overflow(a, b, &x) && !__builtin_add_overflow(*acc, x, acc);
}

/* The report for a read and checked request r and a tiling, into the
 * caller's out (only the fields its size covers). */
/* kernel: the plan's kernel name, NULL for a bare estimate. */
static fattn_status estimate(const fattn_request *r, const fattn_tiling *tiling, const char *kernel,
                             fattn_memory_report *user, fattn_msg *msg) {
    const fattn_attention_desc *d = &r->d;
    const uint64_t tq = tiling->tile_q ? (uint64_t)tiling->tile_q : 64;
    const uint64_t tkv = tiling->tile_kv ? (uint64_t)tiling->tile_kv : 64;
    const uint64_t es = fattn_dtype_size(d->dtype), D = (uint64_t)d->head_dim,
                   Dv = (uint64_t)d->head_dim_v;
    const uint64_t rows = (uint64_t)d->batch * (uint64_t)d->heads_q; /* fits: validated */
    const uint64_t total_groups = rows * (((uint64_t)d->seq_q + tq - 1) / tq);

    fattn_memory_report out = FATTN_MEMORY_REPORT_INIT;
    uint64_t naive = 0, tile = 0, stats = 0, flash = 0;
    uint64_t row_bytes = 0; /* S and P of one query row */
    int ok = mul_add(&row_bytes, (uint64_t)d->seq_kv, 2 * 4) &&
             mul_add(&naive, rows * (uint64_t)d->seq_q, row_bytes) &&
             mul_add(&tile, (tq + tkv) * D, es) && /* Q, K tiles in storage type */
             mul_add(&tile, tkv * Dv, es) &&       /* V tile */
             mul_add(&tile, tq * tkv, 4) &&        /* scores of one tile, float32 */
             mul_add(&tile, tq * Dv, 4) &&         /* output accumulator, float32 */
             mul_add(&tile, tq * 2, 4) &&          /* running max and sum */
             mul_add(&stats, rows * (uint64_t)d->seq_q, 2 * 4);
    out.groups = (int64_t)total_groups;
    if (tiling->concurrent_groups > 0 && (uint64_t)tiling->concurrent_groups < total_groups)
        out.groups = tiling->concurrent_groups;
    ok = ok && mul_add(&flash, tile, (uint64_t)out.groups) &&
         !__builtin_add_overflow(flash, stats, &flash) &&
         !__builtin_add_overflow(flash, tiling->workspace_bytes, &flash);
    if (!ok) return fattn_fail(msg, FATTN_ERR_OVERFLOW, "memory byte counts overflow 64 bits");
    out.naive_bytes = naive;
    out.flash_bytes = flash;
    out.tile_bytes = tile;
    out.row_stat_bytes = stats;
    out.workspace_bytes = tiling->workspace_bytes;
    out.reduction = flash ? (double)naive / (double)flash : 0.0;
    out.percent_saved = naive ? 100.0 * (1.0 - (double)flash / (double)naive) : 0.0;
    if (kernel) snprintf(out.kernel, sizeof out.kernel, "%s", kernel);
    out.flops = 2.0 * (double)d->batch * (double)d->heads_q * (double)(D + Dv) *
                fattn_visible_pairs(d->seq_q, d->seq_kv, d->causal != FATTN_CAUSAL_NONE,
                                    fattn_causal_offset(d));
    return fattn_ext_write(user, &out, sizeof out, REPORT_OLDER, "out", "fattn_memory_report", msg);
}

fattn_status fattn_memory_estimate(const fattn_attention_desc *desc, const fattn_tiling *tiling,
                                   fattn_memory_report *out) {
    fattn_msg *msg = fattn_thread_msg();
    fattn_request r;
    fattn_tiling t = FATTN_TILING_INIT;
    fattn_ctx_clear(NULL);
    fattn_status st = fattn_read_request(desc, &r, msg);
    if (st != FATTN_OK) return st;
    if (!out) return fattn_fail(msg, FATTN_ERR_NULL_POINTER, "out (the report) is NULL");
    if (tiling &&
        (st = fattn_ext_read(&t, sizeof t, tiling, TILING_OLDER, "tiling", "fattn_tiling", msg)))
        return st;
    if (t.tile_q < 0 || t.tile_kv < 0 || t.concurrent_groups < 0)
        return fattn_fail(msg, FATTN_ERR_INVALID_ARGUMENT, "tiling has a negative field");
    return estimate(&r, &t, NULL, out, msg);
}

fattn_status fattn_context_memory_report(fattn_context *ctx, const fattn_attention_desc *desc,
                                         fattn_memory_report *out) {
    if (!ctx) return fattn_ctx_fail(NULL, FATTN_ERR_NULL_POINTER, "ctx is NULL");
    fattn_ctx_clear(ctx);
    /* The same problem builder and planner as fattn_forward, so the report
     * describes what would run. */
    fattn_request r;
    fattn_problem p;
    fattn_plan plan;
    fattn_status st =
        fattn_build_problem(ctx, FATTN_OP_FORWARD, desc, NULL, NULL, NULL, NULL, NULL, &r, &p);
    if (st != FATTN_OK) return st;
    if (!out) return fattn_ctx_fail(ctx, FATTN_ERR_NULL_POINTER, "out (the report) is NULL");
    memset(&plan, 0, sizeof plan);
    if ((st = ctx->vt->plan(ctx->state, &p, &plan, &ctx->msg)) != FATTN_OK) return st;
    return estimate(&r, &plan.tiling, plan.variant_name, out, &ctx->msg);
}

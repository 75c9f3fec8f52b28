/* Memory and FLOP accounting: what the naive method would hold (the N x N
 * scores and probabilities) against what the tiled algorithm holds. Pure
 * arithmetic on the description, the same for every backend. */
#include <string.h>

#include "internal.h"

double fattn_visible_pairs(int64_t seq_q, int64_t seq_kv, int causal) {
    if (seq_q <= 0 || seq_kv <= 0) return 0.0;
    if (!causal) return (double)seq_q * (double)seq_kv;
    /* Row i sees min(seq_kv, max(0, i + off + 1)) keys with off = seq_kv - seq_q;
     * the bound seq_kv is never hit before the last row, so the counts of the
     * rows that see anything run v0, v0 + 1, ..., seq_kv. */
    const int64_t off = seq_kv - seq_q;
    const int64_t first = off < 0 ? -off : 0;
    const int64_t v0 = first + off + 1;
    const double n = (double)(seq_kv - v0 + 1);
    return n > 0 ? ((double)v0 + (double)seq_kv) * n / 2.0 : 0.0;
}

double fattn_flops(const fattn_attention_desc *d) {
    fattn_msg scratch;
    if (fattn_validate_desc(d, &scratch) != FATTN_OK) return 0.0;
    return 4.0 * (double)d->batch * (double)d->heads_q * (double)d->head_dim *
           fattn_visible_pairs(d->seq_q, d->seq_kv, d->causal);
}

/* Overflow-checked uint64 a*b accumulated into *acc. */
static int mul_add(uint64_t *acc, uint64_t a, uint64_t b) {
    uint64_t x;
    return !__builtin_mul_overflow(a, b, &x) && !__builtin_add_overflow(*acc, x, acc);
}

static fattn_status estimate(const fattn_attention_desc *d, const fattn_tiling *tiling,
                             fattn_memory_report *out, fattn_msg *msg) {
    fattn_status st = fattn_validate_desc(d, msg);
    if (st != FATTN_OK) return st;
    if (!out) return fattn_fail(msg, FATTN_ERR_NULL_POINTER, "out (the report) is NULL");
    const fattn_tiling none = {0, 0, 0, 0};
    if (!tiling) tiling = &none;
    if (tiling->tile_q < 0 || tiling->tile_kv < 0 || tiling->concurrent_groups < 0)
        return fattn_fail(msg, FATTN_ERR_INVALID_ARGUMENT, "tiling has a negative field");
    const uint64_t tq = tiling->tile_q ? (uint64_t)tiling->tile_q : 64;
    const uint64_t tkv = tiling->tile_kv ? (uint64_t)tiling->tile_kv : 64;
    const uint64_t es = fattn_dtype_size(d->dtype), D = (uint64_t)d->head_dim;
    const uint64_t rows = (uint64_t)d->batch * (uint64_t)d->heads_q;   /* fits: validated */
    const uint64_t total_groups = rows * (((uint64_t)d->seq_q + tq - 1) / tq);

    memset(out, 0, sizeof *out);
    uint64_t naive = 0, tile = 0, stats = 0, flash = 0;
    uint64_t row_bytes = 0;   /* S and P of one query row */
    int ok = mul_add(&row_bytes, (uint64_t)d->seq_kv, 2 * 4) &&
             mul_add(&naive, rows * (uint64_t)d->seq_q, row_bytes) &&
             mul_add(&tile, (tq + 2 * tkv) * D, es) &&   /* Q, K, V tiles in storage type */
             mul_add(&tile, tq * tkv, 4) &&              /* scores of one tile, float32 */
             mul_add(&tile, tq * D, 4) &&                /* output accumulator, float32 */
             mul_add(&tile, tq * 2, 4) &&                /* running max and sum */
             mul_add(&stats, rows * (uint64_t)d->seq_q, 2 * 4);
    out->groups = (int64_t)total_groups;
    if (tiling->concurrent_groups > 0 && (uint64_t)tiling->concurrent_groups < total_groups)
        out->groups = tiling->concurrent_groups;
    ok = ok && mul_add(&flash, tile, (uint64_t)out->groups) &&
         !__builtin_add_overflow(flash, stats, &flash) &&
         !__builtin_add_overflow(flash, tiling->workspace_bytes, &flash);
    if (!ok) return fattn_fail(msg, FATTN_ERR_OVERFLOW, "memory byte counts overflow 64 bits");
    out->naive_bytes = naive;
    out->flash_bytes = flash;
    out->tile_bytes = tile;
    out->row_stat_bytes = stats;
    out->workspace_bytes = tiling->workspace_bytes;
    out->reduction = flash ? (double)naive / (double)flash : 0.0;
    out->percent_saved = naive ? 100.0 * (1.0 - (double)flash / (double)naive) : 0.0;
    out->flops = fattn_flops(d);
    return FATTN_OK;
}

fattn_status fattn_memory_estimate(const fattn_attention_desc *desc, const fattn_tiling *tiling,
                                   fattn_memory_report *out) {
    fattn_ctx_clear(NULL);
    return estimate(desc, tiling, out, fattn_thread_msg());
}

fattn_status fattn_context_memory_report(fattn_context *ctx, const fattn_attention_desc *desc,
                                         fattn_memory_report *out) {
    if (!ctx) return fattn_ctx_fail(NULL, FATTN_ERR_NULL_POINTER, "ctx is NULL");
    fattn_ctx_clear(ctx);
    fattn_status st = fattn_validate_desc(desc, &ctx->msg);
    if (st != FATTN_OK) return st;
    /* Ask the backend's planner: the same function that picks the kernel. */
    fattn_problem p;
    fattn_plan plan;
    memset(&p, 0, sizeof p);
    memset(&plan, 0, sizeof plan);
    p.batch = desc->batch;
    p.heads_q = desc->heads_q;
    p.heads_kv = desc->heads_kv;
    p.seq_q = desc->seq_q;
    p.seq_kv = desc->seq_kv;
    p.head_dim = desc->head_dim;
    p.dtype = desc->dtype;
    p.causal = desc->causal != 0;
    p.tile_q = desc->tile_q;
    p.tile_kv = desc->tile_kv;
    p.flags = desc->flags;
    if ((st = ctx->vt->plan(ctx->state, &p, &plan, &ctx->msg)) != FATTN_OK) return st;
    return estimate(desc, &plan.tiling, out, &ctx->msg);
}

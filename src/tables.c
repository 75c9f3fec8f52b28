/* The host's check of a ragged problem's index tables (cu_seqlens_q/kv,
 * seqused_kv, the block table) by the rules of src/seam/backend.h, for
 * backends that read them on the host (the CPU) or keep no fault word of
 * their own: a bad entry is FATTN_ERR_INDEX_TABLE naming it, before
 * anything runs. GPU backends with a fault word guard the same rules in
 * their kernels instead, since their tables live in device memory. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* A table read to the host: element (r, i) at e[r * sb + i * ss]. */
typedef struct table_ {
    int32_t *e;
    int64_t sb, ss;
} table_;

/* Reads rows x count elements of t (a validated int32 operand) into *out;
 * an absent table leaves out->e NULL. */
static fattn_status read_table(fattn_context *ctx, const fattn_operand *t, int64_t rows,
                               int64_t count, table_ *out) {
    memset(out, 0, sizeof *out);
    if (!t->mem) return FATTN_OK;
    /* Validation bounded the span by the buffer: it fits in memory's sizes. */
    const int64_t span = (rows - 1) * t->stride_batch + (count - 1) * t->stride_seq + 1;
    out->e = malloc((size_t)span * sizeof(int32_t));
    if (!out->e)
        return fattn_ctx_fail(ctx, FATTN_ERR_OUT_OF_MEMORY,
                              "reading an index table to check it: %" PRId64 " bytes", span * 4);
    out->sb = t->stride_batch, out->ss = t->stride_seq;
    return ctx->vt->buffer_read(ctx->state, t->mem, (size_t)t->offset * sizeof(int32_t), out->e,
                                (size_t)span * sizeof(int32_t), &ctx->msg);
}

static int64_t at(const table_ *t, int64_t r, int64_t i) { return t->e[r * t->sb + i * t->ss]; }

/* Offsets b and b+1 of a cu_seqlens table: in 0..total, not decreasing, at
 * most `longest` apart. */
static fattn_status check_span(fattn_context *ctx, const table_ *t, const char *name, int64_t b,
                               int64_t total, int64_t longest, const char *longest_name) {
    const int64_t lo = at(t, 0, b), hi = at(t, 0, b + 1);
    if (lo < 0 || hi < lo || hi > total)
        return fattn_ctx_fail(ctx, FATTN_ERR_INDEX_TABLE,
                              "desc->varlen->%s[%" PRId64 "] = %" PRId64 ", [%" PRId64
                              "] = %" PRId64 ": offsets must lie in 0..%" PRId64
                              " (the total) and never decrease",
                              name, b, lo, b + 1, hi, total);
    if (hi - lo > longest)
        return fattn_ctx_fail(ctx, FATTN_ERR_INDEX_TABLE,
                              "desc->varlen->%s: sequence %" PRId64 " has %" PRId64
                              " rows, more than desc->%s = %" PRId64
                              " (set it to the longest sequence)",
                              name, b, hi - lo, longest_name, longest);
    return FATTN_OK;
}

static fattn_status check_sequences(fattn_context *ctx, const fattn_problem *p, const table_ t[4]) {
    const fattn_ragged *g = &p->rag;
    fattn_status st;
    for (int64_t b = 0; b < p->batch; b++) {
        if (t[0].e &&
            (st = check_span(ctx, &t[0], "cu_seqlens_q", b, g->total_q, p->seq_q, "seq_q")))
            return st;
        int64_t cap = p->seq_kv, len;
        if (t[1].e) {
            if ((st = check_span(ctx, &t[1], "cu_seqlens_kv", b, g->total_kv, p->seq_kv, "seq_kv")))
                return st;
            cap = at(&t[1], 0, b + 1) - at(&t[1], 0, b);
        }
        len = cap;
        /* An append's new keys follow the used ones, and must fit too. */
        const int64_t added = g->keys_added;
        if (t[2].e && ((len = at(&t[2], 0, b)) < 0 || len > cap - added))
            return fattn_ctx_fail(ctx, FATTN_ERR_INDEX_TABLE,
                                  "desc->varlen->seqused_kv[%" PRId64 "] = %" PRId64
                                  ": it must lie in 0..%" PRId64 " (the keys sequence %" PRId64
                                  " holds%s)",
                                  b, len, cap - added, b,
                                  added ? ", less the desc->append->seq_new keys appended" : "");
        if (t[2].e) len += added;
        if (!g->page_size) continue;
        for (int64_t pg = 0; pg * g->page_size < len; pg++) {
            const int64_t page = at(&t[3], b, pg);
            if (page < 0 || page >= g->num_pages)
                return fattn_ctx_fail(ctx, FATTN_ERR_INDEX_TABLE,
                                      "desc->paged_kv->block_table[%" PRId64 "][%" PRId64
                                      "] = %" PRId64 ": pages are 0..%" PRId64
                                      " (num_pages - 1); sequence %" PRId64
                                      " uses it for keys %" PRId64 "..",
                                      b, pg, page, g->num_pages - 1, b, pg * g->page_size);
        }
    }
    return FATTN_OK;
}

fattn_status fattn_check_tables(fattn_context *ctx, const fattn_problem *p) {
    const fattn_ragged *g = &p->rag;
    const int64_t B = p->batch;
    table_ t[4];
    memset(t, 0, sizeof t);
    fattn_status st = read_table(ctx, &g->cu_seqlens_q, 1, B + 1, &t[0]);
    if (st == FATTN_OK) st = read_table(ctx, &g->cu_seqlens_kv, 1, B + 1, &t[1]);
    if (st == FATTN_OK) st = read_table(ctx, &g->seqused_kv, 1, B, &t[2]);
    if (st == FATTN_OK && g->page_size)
        st = read_table(ctx, &g->block_table, B, g->pages_per_seq, &t[3]);
    if (st == FATTN_OK) st = check_sequences(ctx, p, t);
    for (int i = 0; i < 4; i++) free(t[i].e);
    return st;
}

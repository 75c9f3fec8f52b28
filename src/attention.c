/* The attention entry points: tensor helpers, the tiled forward call, the
 * naive baseline, and the host-pointer convenience call. */
#include <inttypes.h>
#include <string.h>

#include "internal.h"

fattn_status fattn_tensor_init(fattn_tensor *t, fattn_buffer *buf, fattn_dtype dtype,
                               fattn_layout layout, int64_t heads, int64_t seq, int64_t dim) {
    int64_t hd, sd, shd;
    fattn_ctx_clear(NULL);
    if (!t) return fattn_ctx_fail(NULL, FATTN_ERR_NULL_POINTER, "t (the tensor) is NULL");
    if (heads < 1 || seq < 0 || dim < 1)
        return fattn_ctx_fail(NULL, FATTN_ERR_INVALID_SIZE,
                              "heads = %" PRId64 ", seq = %" PRId64 ", dim = %" PRId64
                              ": need heads >= 1, seq >= 0, dim >= 1",
                              heads, seq, dim);
    if (layout != FATTN_LAYOUT_BSHD && layout != FATTN_LAYOUT_BHSD)
        return fattn_ctx_fail(NULL, FATTN_ERR_INVALID_ARGUMENT,
                              "layout %d is not FATTN_LAYOUT_BSHD or FATTN_LAYOUT_BHSD", (int)layout);
    if (__builtin_mul_overflow(heads, dim, &hd) || __builtin_mul_overflow(seq, dim, &sd) ||
        __builtin_mul_overflow(hd, seq, &shd))
        return fattn_ctx_fail(NULL, FATTN_ERR_OVERFLOW, "heads * seq * dim overflows 64 bits");
    memset(t, 0, sizeof *t);
    t->buffer = buf;
    t->dtype = dtype;
    t->stride_dim = 1;
    t->stride_batch = shd;
    switch (layout) {
    case FATTN_LAYOUT_BSHD:
        t->stride_seq = hd;
        t->stride_head = dim;
        return FATTN_OK;
    default:
        t->stride_head = sd;
        t->stride_seq = dim;
        return FATTN_OK;
    }
}

fattn_status fattn_tensor_init_lse(fattn_tensor *t, fattn_buffer *buf, int64_t heads, int64_t seq) {
    fattn_status st = fattn_tensor_init(t, buf, FATTN_F32, FATTN_LAYOUT_BHSD, heads, seq, 1);
    return st;
}

typedef enum { PATH_TILED, PATH_NAIVE } path_;

static fattn_status run(fattn_context *ctx, path_ path, const fattn_attention_desc *desc,
                        const fattn_tensor *q, const fattn_tensor *k, const fattn_tensor *v,
                        const fattn_tensor *o, const fattn_tensor *lse) {
    fattn_problem p;
    fattn_plan plan;
    if (!ctx) return fattn_ctx_fail(NULL, FATTN_ERR_NULL_POINTER, "ctx is NULL");
    fattn_ctx_clear(ctx);
    fattn_status st = fattn_validate(ctx, desc, q, k, v, o, lse, &p);
    if (st != FATTN_OK) return st;
    if (path == PATH_NAIVE) {
        if (!ctx->vt->forward_naive)
            return fattn_ctx_fail(ctx, FATTN_ERR_UNSUPPORTED, "backend '%s' has no naive baseline",
                                  ctx->vt->name);
        return ctx->vt->forward_naive(ctx->state, &p, &ctx->msg);
    }
    memset(&plan, 0, sizeof plan);
    if ((st = ctx->vt->plan(ctx->state, &p, &plan, &ctx->msg)) != FATTN_OK) return st;
    return ctx->vt->forward(ctx->state, &p, &plan, &ctx->msg);
}

fattn_status fattn_forward(fattn_context *ctx, const fattn_attention_desc *desc,
                           const fattn_tensor *q, const fattn_tensor *k, const fattn_tensor *v,
                           const fattn_tensor *o, const fattn_tensor *lse) {
    return run(ctx, PATH_TILED, desc, q, k, v, o, lse);
}

fattn_status fattn_forward_naive(fattn_context *ctx, const fattn_attention_desc *desc,
                                 const fattn_tensor *q, const fattn_tensor *k,
                                 const fattn_tensor *v, const fattn_tensor *o,
                                 const fattn_tensor *lse) {
    return run(ctx, PATH_NAIVE, desc, q, k, v, o, lse);
}

/* ---- Host convenience ------------------------------------------------------ */

enum { HQ, HK, HV, HO, HL, HCOUNT };

fattn_status fattn_attention_host(fattn_context *ctx, const fattn_attention_desc *desc,
                                  fattn_layout layout, const void *q, const void *k, const void *v,
                                  void *o, float *lse) {
    if (!ctx) return fattn_ctx_fail(NULL, FATTN_ERR_NULL_POINTER, "ctx is NULL");
    fattn_ctx_clear(ctx);
    fattn_status st = fattn_validate_desc(desc, &ctx->msg);
    if (st != FATTN_OK) return st;
    if (layout != FATTN_LAYOUT_BSHD && layout != FATTN_LAYOUT_BHSD)
        return fattn_ctx_fail(ctx, FATTN_ERR_INVALID_ARGUMENT,
                              "layout %d is not FATTN_LAYOUT_BSHD or FATTN_LAYOUT_BHSD", (int)layout);
    const void *host[HCOUNT] = {q, k, v, o, lse};
    static const char *const names[HCOUNT] = {"q", "k", "v", "o", "lse"};
    const size_t es = fattn_dtype_size(desc->dtype);
    /* Products fit: validate_desc checked them in int64. */
    const size_t nq = (size_t)(desc->batch * desc->heads_q * desc->seq_q);
    const size_t nk = (size_t)(desc->batch * desc->heads_kv * desc->seq_kv);
    const size_t D = (size_t)desc->head_dim;
    const size_t bytes[HCOUNT] = {nq * D * es, nk * D * es, nk * D * es, nq * D * es, nq * 4};
    for (int i = 0; i < HCOUNT; i++)
        if (!host[i] && bytes[i] && i != HL)
            return fattn_ctx_fail(ctx, FATTN_ERR_NULL_POINTER, "%s (host array) is NULL", names[i]);

    fattn_buffer *buf[HCOUNT] = {0};
    int wrapped[HCOUNT] = {0};
    fattn_tensor t[HCOUNT];
    for (int i = 0; i < HCOUNT && st == FATTN_OK; i++) {
        if (!host[i] || bytes[i] == 0) continue;
        /* The CPU backend computes in place, without copies, on arrays
         * aligned to their element; others (and misaligned arrays, which
         * fattn_forward refuses) are copied, as they are for GPUs. */
        const size_t align = i == HL ? sizeof(float) : es;
        wrapped[i] = ctx->vt->native_is_host && (uintptr_t)host[i] % align == 0;
        if (wrapped[i])
            st = fattn_buffer_wrap(ctx, (void *)host[i], bytes[i], &buf[i]);
        else if ((st = fattn_buffer_alloc(ctx, bytes[i], &buf[i])) == FATTN_OK && i < HO)
            st = fattn_buffer_write(buf[i], 0, host[i], bytes[i]);
    }
    if (st == FATTN_OK) {
        const int64_t hkv = desc->heads_kv, hq = desc->heads_q;
        fattn_tensor_init(&t[HQ], buf[HQ], desc->dtype, layout, hq, desc->seq_q, desc->head_dim);
        fattn_tensor_init(&t[HK], buf[HK], desc->dtype, layout, hkv, desc->seq_kv, desc->head_dim);
        fattn_tensor_init(&t[HV], buf[HV], desc->dtype, layout, hkv, desc->seq_kv, desc->head_dim);
        fattn_tensor_init(&t[HO], buf[HO], desc->dtype, layout, hq, desc->seq_q, desc->head_dim);
        fattn_tensor_init_lse(&t[HL], buf[HL], hq, desc->seq_q);
        st = fattn_forward(ctx, desc, &t[HQ], &t[HK], &t[HV], &t[HO], lse ? &t[HL] : NULL);
    }
    for (int i = HO; i < HCOUNT && st == FATTN_OK; i++)
        if (buf[i] && !wrapped[i]) st = fattn_buffer_read(buf[i], 0, (void *)host[i], bytes[i]);
    if (st == FATTN_OK) st = fattn_context_synchronize(ctx);
    for (int i = 0; i < HCOUNT; i++) fattn_buffer_free(buf[i]);
    return st;
}

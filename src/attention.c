/* The attention entry points: tensor helpers, the tiled forward call, the
 * naive baseline, and the host-pointer convenience call. */
#include <inttypes.h>
#include <string.h>

#include "internal.h"

static fattn_status tensor_args(int64_t batch, int64_t heads, int64_t seq, int64_t dim,
                                int64_t offset, const fattn_tensor *out, int64_t *hd, int64_t *sd,
                                int64_t *shd) {
    int64_t last;
    if (!out) return fattn_ctx_fail(NULL, FATTN_ERR_NULL_POINTER, "out (the tensor) is NULL");
    if (batch < 1 || heads < 1 || seq < 0 || dim < 1)
        return fattn_ctx_fail(NULL, FATTN_ERR_INVALID_SIZE,
                              "batch = %" PRId64 ", heads = %" PRId64 ", seq = %" PRId64
                              ", dim = %" PRId64
                              ": need batch >= 1, heads >= 1, seq >= 0, dim >= 1",
                              batch, heads, seq, dim);
    if (offset < 0)
        return fattn_ctx_fail(NULL, FATTN_ERR_INVALID_ARGUMENT, "offset = %" PRId64 " is negative",
                              offset);
    if (__builtin_mul_overflow(heads, dim, hd) || __builtin_mul_overflow(seq, dim, sd) ||
        __builtin_mul_overflow(*hd, seq, shd) || __builtin_mul_overflow(*shd, batch, &last) ||
        __builtin_add_overflow(last, offset, &last))
        return fattn_ctx_fail(NULL, FATTN_ERR_OVERFLOW,
                              "offset + batch * heads * seq * dim overflows 64 bits");
    return FATTN_OK;
}

fattn_status fattn_tensor_init(fattn_buffer *buf, fattn_dtype dtype, fattn_layout layout,
                               int64_t batch, int64_t heads, int64_t seq, int64_t dim,
                               int64_t offset, fattn_tensor *out) {
    int64_t hd = 0, sd = 0, shd = 0;
    fattn_ctx_clear(NULL);
    fattn_status st = tensor_args(batch, heads, seq, dim, offset, out, &hd, &sd, &shd);
    if (st != FATTN_OK) return st;
    if (layout != FATTN_LAYOUT_BSHD && layout != FATTN_LAYOUT_BHSD)
        return fattn_ctx_fail(NULL, FATTN_ERR_INVALID_ARGUMENT,
                              "layout %d is not FATTN_LAYOUT_BSHD or FATTN_LAYOUT_BHSD",
                              (int)layout);
    if (fattn_dtype_size(dtype) == 0)
        return fattn_ctx_fail(NULL, FATTN_ERR_INVALID_ARGUMENT, "dtype %d is not a fattn_dtype",
                              (int)dtype);
    const fattn_tensor t0 = FATTN_TENSOR_INIT;
    *out = t0;
    out->buffer = buf;
    out->dtype = dtype;
    out->offset = offset;
    out->stride_batch = shd;
    out->stride_head = layout == FATTN_LAYOUT_BSHD ? dim : sd;
    out->stride_seq = layout == FATTN_LAYOUT_BSHD ? hd : dim;
    return FATTN_OK;
}

fattn_status fattn_tensor_init_lse(fattn_buffer *buf, int64_t batch, int64_t heads, int64_t seq,
                                   int64_t offset, fattn_tensor *out) {
    fattn_ctx_clear(NULL);
    if (batch < 1 || heads < 1 || seq < 0)
        return fattn_ctx_fail(NULL, FATTN_ERR_INVALID_SIZE,
                              "batch = %" PRId64 ", heads = %" PRId64 ", seq = %" PRId64
                              ": need batch >= 1, heads >= 1, seq >= 0",
                              batch, heads, seq);
    return fattn_tensor_init(buf, FATTN_F32, FATTN_LAYOUT_BHSD, batch, heads, seq, 1, offset, out);
}

fattn_status fattn_tensor_init_index(fattn_buffer *buf, int64_t rows, int64_t count, int64_t offset,
                                     fattn_tensor *out) {
    fattn_ctx_clear(NULL);
    if (rows < 1 || count < 0)
        return fattn_ctx_fail(NULL, FATTN_ERR_INVALID_SIZE,
                              "rows = %" PRId64 ", count = %" PRId64 ": need rows >= 1, count >= 0",
                              rows, count);
    fattn_status st =
        fattn_tensor_init(buf, FATTN_I32, FATTN_LAYOUT_BHSD, rows, 1, count, 1, offset, out);
    if (st == FATTN_OK) out->stride_head = 0; /* one "head": its stride is never used */
    return st;
}

/* The plan's workspace: the caller's (checked for size), else the
 * context's own, allocated the first time a plan needs more than it has and
 * kept (no plan of this release needs any). */
static fattn_status bind_workspace(fattn_context *ctx, const fattn_request *r,
                                   const fattn_plan *plan, fattn_problem *p) {
    const uint64_t need = plan->tiling.workspace_bytes;
    if (need == 0) return FATTN_OK;
    if (r->d.workspace) {
        if (r->d.workspace->bytes < need)
            return fattn_ctx_fail(ctx, FATTN_ERR_BUFFER_TOO_SMALL,
                                  "desc->workspace has %zu bytes; this problem needs %llu "
                                  "(fattn_workspace_size)",
                                  r->d.workspace->bytes, (unsigned long long)need);
        p->workspace.mem = r->d.workspace->mem;
        return FATTN_OK;
    }
    if (need > (uint64_t)SIZE_MAX)
        return fattn_ctx_fail(ctx, FATTN_ERR_OUT_OF_MEMORY,
                              "a workspace of %llu bytes cannot be addressed",
                              (unsigned long long)need);
    if (ctx->workspace_bytes < need) {
        void *mem = NULL;
        fattn_status st = ctx->vt->buffer_alloc(ctx->state, (size_t)need, &mem, &ctx->msg);
        if (st != FATTN_OK) return st;
        /* Work already queued on the old one keeps it alive: backends free
         * device memory in queue order (cudaFree waits, OpenCL defers). */
        if (ctx->workspace) ctx->vt->buffer_free(ctx->state, ctx->workspace, 1);
        ctx->workspace = mem;
        ctx->workspace_bytes = need;
    }
    p->workspace.mem = ctx->workspace;
    return FATTN_OK;
}

static fattn_status run(fattn_context *ctx, fattn_op op, const fattn_attention_desc *desc,
                        const fattn_tensor *q, const fattn_tensor *k, const fattn_tensor *v,
                        const fattn_tensor *o, const fattn_tensor *lse) {
    fattn_request r;
    fattn_problem p;
    fattn_plan plan;
    if (!ctx) return fattn_ctx_fail(NULL, FATTN_ERR_NULL_POINTER, "ctx is NULL");
    fattn_ctx_clear(ctx);
    if (!q || !k || !v || !o)
        return fattn_ctx_fail(ctx, FATTN_ERR_NULL_POINTER, "%s (the tensor) is NULL",
                              !q   ? "q"
                              : !k ? "k"
                              : !v ? "v"
                                   : "o");
    fattn_status st = fattn_build_problem(ctx, op, desc, q, k, v, o, lse, &r, &p);
    if (st != FATTN_OK) return st;
    memset(&plan, 0, sizeof plan);
    if ((st = ctx->vt->plan(ctx->state, &p, &plan, &ctx->msg)) != FATTN_OK) return st;
    if ((st = bind_workspace(ctx, &r, &plan, &p)) != FATTN_OK) return st;
    /* The new keys go in once the plan is sure to run, on the same queue. */
    if (p.has_append && p.seq_new > 0 &&
        (st = ctx->vt->append(ctx->state, &p, &ctx->msg)) != FATTN_OK)
        return st;
    return ctx->vt->run(ctx->state, &p, &plan, &ctx->msg);
}

fattn_status fattn_forward(fattn_context *ctx, const fattn_attention_desc *desc,
                           const fattn_tensor *q, const fattn_tensor *k, const fattn_tensor *v,
                           const fattn_tensor *o, const fattn_tensor *lse) {
    return run(ctx, FATTN_OP_FORWARD, desc, q, k, v, o, lse);
}

fattn_status fattn_forward_naive(fattn_context *ctx, const fattn_attention_desc *desc,
                                 const fattn_tensor *q, const fattn_tensor *k,
                                 const fattn_tensor *v, const fattn_tensor *o,
                                 const fattn_tensor *lse) {
    return run(ctx, FATTN_OP_FORWARD_NAIVE, desc, q, k, v, o, lse);
}

fattn_status fattn_combine(fattn_context *ctx, const fattn_combine_desc *desc,
                           const fattn_tensor *o_parts, const fattn_tensor *lse_parts,
                           const fattn_tensor *o, const fattn_tensor *lse) {
    fattn_problem p;
    fattn_plan plan;
    if (!ctx) return fattn_ctx_fail(NULL, FATTN_ERR_NULL_POINTER, "ctx is NULL");
    fattn_ctx_clear(ctx);
    fattn_status st = fattn_build_combine(ctx, desc, o_parts, lse_parts, o, lse, &p);
    if (st != FATTN_OK) return st;
    memset(&plan, 0, sizeof plan);
    if ((st = ctx->vt->plan(ctx->state, &p, &plan, &ctx->msg)) != FATTN_OK) return st;
    return ctx->vt->run(ctx->state, &p, &plan, &ctx->msg);
}

fattn_status fattn_workspace_size(fattn_context *ctx, const fattn_attention_desc *desc,
                                  uint64_t *bytes) {
    fattn_request r;
    fattn_problem p;
    fattn_plan plan;
    if (!ctx) return fattn_ctx_fail(NULL, FATTN_ERR_NULL_POINTER, "ctx is NULL");
    fattn_ctx_clear(ctx);
    if (!bytes) return fattn_ctx_fail(ctx, FATTN_ERR_NULL_POINTER, "bytes is NULL");
    *bytes = 0;
    fattn_status st =
        fattn_build_problem(ctx, FATTN_OP_FORWARD, desc, NULL, NULL, NULL, NULL, NULL, &r, &p);
    if (st != FATTN_OK) return st;
    memset(&plan, 0, sizeof plan);
    if ((st = ctx->vt->plan(ctx->state, &p, &plan, &ctx->msg)) != FATTN_OK) return st;
    *bytes = plan.tiling.workspace_bytes;
    return FATTN_OK;
}

/* ---- Host convenience ------------------------------------------------------ */

enum { HQ, HK, HV, HO, HL, HCOUNT };

fattn_status fattn_attention_host(fattn_context *ctx, const fattn_attention_desc *desc,
                                  fattn_layout layout, const void *q, const void *k, const void *v,
                                  void *o, float *lse) {
    if (!ctx) return fattn_ctx_fail(NULL, FATTN_ERR_NULL_POINTER, "ctx is NULL");
    fattn_ctx_clear(ctx);
    fattn_request r;
    fattn_status st = fattn_read_request(desc, &r, &ctx->msg);
    if (st != FATTN_OK) return st;
    if (r.has_varlen || r.has_paged)
        return fattn_ctx_fail(
            ctx, FATTN_ERR_INVALID_ARGUMENT,
            "fattn_attention_host takes dense arrays: desc->%s must be NULL here; "
            "use fattn_forward with tensors",
            r.has_varlen ? "varlen" : "paged_kv");
    desc = &r.d;
    if (layout != FATTN_LAYOUT_BSHD && layout != FATTN_LAYOUT_BHSD)
        return fattn_ctx_fail(ctx, FATTN_ERR_INVALID_ARGUMENT,
                              "layout %d is not FATTN_LAYOUT_BSHD or FATTN_LAYOUT_BHSD",
                              (int)layout);
    const void *host[HCOUNT] = {q, k, v, o, lse};
    static const char *const names[HCOUNT] = {"q", "k", "v", "o", "lse"};
    const size_t es = fattn_dtype_size(desc->dtype);
    /* Products fit: validate_desc checked them in int64. */
    const size_t nq = (size_t)(desc->batch * desc->heads_q * desc->seq_q);
    const size_t nk = (size_t)(desc->batch * desc->heads_kv * desc->seq_kv);
    const size_t D = (size_t)desc->head_dim, Dv = (size_t)desc->head_dim_v; /* resolved */
    const size_t bytes[HCOUNT] = {nq * D * es, nk * D * es, nk * Dv * es, nq * Dv * es, nq * 4};
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
        const int64_t B = desc->batch, hkv = desc->heads_kv, hq = desc->heads_q,
                      hd = desc->head_dim, hv = desc->head_dim_v;
        fattn_tensor_init(buf[HQ], desc->dtype, layout, B, hq, desc->seq_q, hd, 0, &t[HQ]);
        fattn_tensor_init(buf[HK], desc->dtype, layout, B, hkv, desc->seq_kv, hd, 0, &t[HK]);
        fattn_tensor_init(buf[HV], desc->dtype, layout, B, hkv, desc->seq_kv, hv, 0, &t[HV]);
        fattn_tensor_init(buf[HO], desc->dtype, layout, B, hq, desc->seq_q, hv, 0, &t[HO]);
        fattn_tensor_init_lse(buf[HL], B, hq, desc->seq_q, 0, &t[HL]);
        st = fattn_forward(ctx, desc, &t[HQ], &t[HK], &t[HV], &t[HO], lse ? &t[HL] : NULL);
    }
    for (int i = HO; i < HCOUNT && st == FATTN_OK; i++)
        if (buf[i] && !wrapped[i]) st = fattn_buffer_read(buf[i], 0, (void *)host[i], bytes[i]);
    if (st == FATTN_OK) st = fattn_context_synchronize(ctx);
    for (int i = 0; i < HCOUNT; i++) fattn_buffer_free(buf[i]);
    return st;
}

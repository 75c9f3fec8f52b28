/* Validation of every public attention input: each problem gets its own
 * status and a message naming the argument and the limit. Backends receive
 * only problems that passed. */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>

#include "internal.h"

/* a*b*c*d in int64, or 0 on overflow. Inputs are positive. */
static int mul4(int64_t a, int64_t b, int64_t c, int64_t d, int64_t *out) {
    int64_t x;
    if (__builtin_mul_overflow(a, b, &x) || __builtin_mul_overflow(x, c, &x) ||
        __builtin_mul_overflow(x, d, &x))
        return 0;
    *out = x;
    return 1;
}

fattn_status fattn_validate_desc(const fattn_attention_desc *d, fattn_msg *msg) {
    int64_t n;
    if (!d) return fattn_fail(msg, FATTN_ERR_NULL_POINTER, "desc is NULL");
#define FATTN_CHECK_MIN_(field, lo)                                                        \
    if (d->field < (lo))                                                                   \
        return fattn_fail(msg, FATTN_ERR_INVALID_SIZE, "desc->" #field " = %" PRId64       \
                          " but must be at least %d", d->field, (lo));
    FATTN_CHECK_MIN_(batch, 1)
    FATTN_CHECK_MIN_(heads_q, 1)
    FATTN_CHECK_MIN_(heads_kv, 1)
    FATTN_CHECK_MIN_(seq_q, 1)
    FATTN_CHECK_MIN_(seq_kv, 0)
#undef FATTN_CHECK_MIN_
    if (d->head_dim < 1 || d->head_dim > 256)
        return fattn_fail(msg, FATTN_ERR_HEAD_DIM, "desc->head_dim = %" PRId64 " is outside 1..256",
                          d->head_dim);
    if (d->heads_q % d->heads_kv != 0)
        return fattn_fail(msg, FATTN_ERR_HEADS,
                          "desc->heads_q = %" PRId64 " is not a multiple of desc->heads_kv = %" PRId64,
                          d->heads_q, d->heads_kv);
    if (fattn_dtype_size(d->dtype) == 0)
        return fattn_fail(msg, FATTN_ERR_INVALID_ARGUMENT,
                          "desc->dtype = %d is not FATTN_F32, FATTN_F16 or FATTN_BF16", (int)d->dtype);
    if (!isfinite(d->scale))
        return fattn_fail(msg, FATTN_ERR_INVALID_ARGUMENT, "desc->scale is not finite");
    if (d->tile_q < 0 || d->tile_kv < 0)
        return fattn_fail(msg, FATTN_ERR_INVALID_ARGUMENT,
                          "desc->tile_q = %d, desc->tile_kv = %d: tile sizes must be >= 0 (0 = default)",
                          d->tile_q, d->tile_kv);
    if (d->flags & ~(unsigned)FATTN_FLAGS_ALL_)
        return fattn_fail(msg, FATTN_ERR_INVALID_ARGUMENT, "desc->flags has unknown bits 0x%x",
                          d->flags & ~(unsigned)FATTN_FLAGS_ALL_);
    if (!mul4(d->batch, d->heads_q, d->seq_q, d->head_dim, &n))
        return fattn_fail(msg, FATTN_ERR_OVERFLOW,
                          "batch * heads_q * seq_q * head_dim overflows a 64-bit integer");
    if (!mul4(d->batch, d->heads_kv, d->seq_kv, d->head_dim, &n))
        return fattn_fail(msg, FATTN_ERR_OVERFLOW,
                          "batch * heads_kv * seq_kv * head_dim overflows a 64-bit integer");
    if (!mul4(d->batch, d->heads_q, d->seq_q, d->seq_kv, &n))
        return fattn_fail(msg, FATTN_ERR_OVERFLOW,
                          "batch * heads_q * seq_q * seq_kv overflows a 64-bit integer");
    return FATTN_OK;
}

typedef struct dim_ {
    int64_t extent, stride;
} dim_;

static int cmp_stride(const void *a, const void *b) {
    const dim_ *x = a, *y = b;
    return (x->stride > y->stride) - (x->stride < y->stride);
}

/* A sufficient test for distinct output elements: with dims of extent > 1
 * sorted by stride, each stride exceeds the span of all smaller ones. Some
 * exotic interleavings with distinct elements are rejected too. */
static int elements_overlap(const dim_ *dims, int n) {
    dim_ s[4];
    int m = 0;
    for (int i = 0; i < n; i++)
        if (dims[i].extent > 1) s[m++] = dims[i];
    qsort(s, (size_t)m, sizeof s[0], cmp_stride);
    int64_t span = 0;   /* largest offset reachable by the smaller dims */
    for (int i = 0; i < m; i++) {
        if (s[i].stride <= span) return 1;
        span += (s[i].extent - 1) * s[i].stride;   /* fits: the extent was checked */
    }
    return 0;
}

/* Byte range [first, last] a tensor touches, in the space of the allocation
 * `root` its buffer lies in (the backend's buffer_region): wrappers of the
 * same memory, and OpenCL sub-buffers of one cl_mem, share a root, so their
 * overlaps are found. Empty when some extent is 0. */
typedef struct range_ {
    const void *root;
    uint64_t first, last;
    int empty;
} range_;

static fattn_status check_tensor(fattn_context *ctx, const char *name, const fattn_tensor *t,
                                 fattn_dtype want, int64_t B, int64_t H, int64_t S, int64_t D,
                                 int is_output, int is_lse, range_ *r) {
    if (!t) return fattn_ctx_fail(ctx, FATTN_ERR_NULL_POINTER, "%s (the tensor) is NULL", name);
    r->root = NULL;
    r->empty = (S == 0);
    if (t->dtype != want)
        return fattn_ctx_fail(ctx, FATTN_ERR_DTYPE, "%s->dtype is %s but must be %s%s", name,
                              fattn_dtype_name(t->dtype), fattn_dtype_name(want),
                              is_lse ? " (log-sum-exp is float32)" : " (desc->dtype)");
    if (!is_lse && t->stride_dim != 1)
        return fattn_ctx_fail(ctx, FATTN_ERR_STRIDE,
                              "%s->stride_dim = %" PRId64 ": the last dimension must be contiguous (1)",
                              name, t->stride_dim);
    if (t->offset < 0)
        return fattn_ctx_fail(ctx, FATTN_ERR_INVALID_ARGUMENT, "%s->offset = %" PRId64 " is negative",
                              name, t->offset);
    if (t->stride_batch < 0 || t->stride_head < 0 || t->stride_seq < 0)
        return fattn_ctx_fail(ctx, FATTN_ERR_STRIDE,
                              "%s has a negative stride (batch %" PRId64 ", head %" PRId64
                              ", seq %" PRId64 ")",
                              name, t->stride_batch, t->stride_head, t->stride_seq);
    if (t->buffer && t->buffer->ctx != ctx)
        return fattn_ctx_fail(ctx, FATTN_ERR_WRONG_CONTEXT,
                              "%s->buffer was made by another context", name);
    if (r->empty) return FATTN_OK;
    if (!t->buffer) return fattn_ctx_fail(ctx, FATTN_ERR_NULL_POINTER, "%s->buffer is NULL", name);

    /* Last element offset, with every product checked. */
    const dim_ dims[4] = {{B, t->stride_batch}, {H, t->stride_head}, {S, t->stride_seq}, {D, 1}};
    int64_t last = t->offset, term, bytes;
    for (int i = 0; i < 4; i++) {
        if (__builtin_mul_overflow(dims[i].extent - 1, dims[i].stride, &term) ||
            __builtin_add_overflow(last, term, &last))
            return fattn_ctx_fail(ctx, FATTN_ERR_OVERFLOW,
                                  "%s: offset plus strides times sizes overflows 64 bits", name);
    }
    const int64_t esize = (int64_t)fattn_dtype_size(want);
    if (__builtin_add_overflow(last, 1, &bytes) || __builtin_mul_overflow(bytes, esize, &bytes))
        return fattn_ctx_fail(ctx, FATTN_ERR_OVERFLOW, "%s: byte size overflows 64 bits", name);
    if ((uint64_t)bytes > (uint64_t)t->buffer->bytes)
        return fattn_ctx_fail(ctx, FATTN_ERR_BUFFER_TOO_SMALL,
                              "%s needs %" PRId64 " bytes for its offset and strides but its buffer "
                              "has %zu",
                              name, bytes, t->buffer->bytes);
    if (is_output && elements_overlap(dims, is_lse ? 3 : 4))
        return fattn_ctx_fail(ctx, FATTN_ERR_STRIDE,
                              "%s strides make different output elements share memory", name);
    uint64_t start = 0;
    fattn_status st = ctx->vt->buffer_region(ctx->state, t->buffer->mem, &r->root, &start, &ctx->msg);
    if (st != FATTN_OK) return st;
    /* Element offsets keep the alignment of the buffer's start, so that is
     * the one thing to check: kernels and the CPU load whole elements. */
    if (start % (uint64_t)esize != 0)
        return fattn_ctx_fail(ctx, FATTN_ERR_MISALIGNED,
                              "%s: its buffer starts at address 0x%llx, which is not a multiple of "
                              "%d bytes (one %s element); pass memory aligned to the element size "
                              "(fattn_buffer_alloc's is)",
                              name, (unsigned long long)start, (int)esize, fattn_dtype_name(want));
    if (__builtin_add_overflow(start, (uint64_t)t->offset * (uint64_t)esize, &r->first) ||
        __builtin_add_overflow(start, (uint64_t)bytes - 1, &r->last))
        return fattn_ctx_fail(ctx, FATTN_ERR_OVERFLOW, "%s: its byte range overflows 64 bits", name);
    return FATTN_OK;
}

static int ranges_meet(const range_ *a, const range_ *b) {
    return !a->empty && !b->empty && a->root == b->root && a->first <= b->last &&
           b->first <= a->last;
}

static fattn_operand operand(const fattn_tensor *t) {
    fattn_operand o = {t->buffer ? t->buffer->mem : NULL, t->offset, t->stride_batch, t->stride_head,
                       t->stride_seq};
    return o;
}

fattn_status fattn_validate(fattn_context *ctx, const fattn_attention_desc *d,
                            const fattn_tensor *q, const fattn_tensor *k, const fattn_tensor *v,
                            const fattn_tensor *o, const fattn_tensor *lse, fattn_problem *p) {
    fattn_status st = fattn_validate_desc(d, &ctx->msg);
    if (st != FATTN_OK) return st;
    range_ rq, rk, rv, ro, rl;
    const int64_t B = d->batch, Hq = d->heads_q, Hk = d->heads_kv, D = d->head_dim;
    if ((st = check_tensor(ctx, "q", q, d->dtype, B, Hq, d->seq_q, D, 0, 0, &rq)) ||
        (st = check_tensor(ctx, "k", k, d->dtype, B, Hk, d->seq_kv, D, 0, 0, &rk)) ||
        (st = check_tensor(ctx, "v", v, d->dtype, B, Hk, d->seq_kv, D, 0, 0, &rv)) ||
        (st = check_tensor(ctx, "o", o, d->dtype, B, Hq, d->seq_q, D, 1, 0, &ro)))
        return st;
    if (lse && (st = check_tensor(ctx, "lse", lse, FATTN_F32, B, Hq, d->seq_q, 1, 1, 1, &rl)))
        return st;
    const range_ *inputs[3] = {&rq, &rk, &rv};
    static const char *const names[3] = {"q", "k", "v"};
    for (int i = 0; i < 3; i++) {
        if (ranges_meet(&ro, inputs[i]))
            return fattn_ctx_fail(ctx, FATTN_ERR_INVALID_ARGUMENT, "o overlaps %s in the same memory",
                                  names[i]);
        if (lse && ranges_meet(&rl, inputs[i]))
            return fattn_ctx_fail(ctx, FATTN_ERR_INVALID_ARGUMENT,
                                  "lse overlaps %s in the same memory", names[i]);
    }
    if (lse && ranges_meet(&rl, &ro))
        return fattn_ctx_fail(ctx, FATTN_ERR_INVALID_ARGUMENT, "lse overlaps o in the same memory");

    p->batch = B;
    p->heads_q = Hq;
    p->heads_kv = Hk;
    p->seq_q = d->seq_q;
    p->seq_kv = d->seq_kv;
    p->head_dim = D;
    p->dtype = d->dtype;
    p->scale = d->scale != 0.0f ? d->scale : (float)(1.0 / sqrt((double)D));
    p->causal = d->causal != 0;
    p->tile_q = d->tile_q;
    p->tile_kv = d->tile_kv;
    p->flags = d->flags;
    p->q = operand(q);
    p->k = operand(k);
    p->v = operand(v);
    p->o = operand(o);
    p->has_lse = lse != NULL;
    if (lse) p->lse = operand(lse);
    return FATTN_OK;
}

/* Validation of every public attention input: each problem gets its own
 * status and a message naming the argument and the limit. Backends receive
 * only problems that passed. */
#include <inttypes.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

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

/* The sizes a caller built against an older header may pass: the first
 * version's, then one per field added since (0.2.0 counts the fields
 * fattn 0.1 had as its first version of the description and the mask's
 * window as the mask's). */
#define DESC_OLDER                                                                                 \
    FATTN_OLDER(offsetof(fattn_attention_desc, mask), offsetof(fattn_attention_desc, varlen),      \
                offsetof(fattn_attention_desc, paged_kv),                                          \
                offsetof(fattn_attention_desc, workspace), offsetof(fattn_attention_desc, append), \
                offsetof(fattn_attention_desc, head_dim_v))
#define MASK_OLDER                                                                                 \
    FATTN_OLDER(offsetof(fattn_mask_desc, softcap), offsetof(fattn_mask_desc, alibi_slopes),       \
                offsetof(fattn_mask_desc, sinks), offsetof(fattn_mask_desc, bias))
#define VARLEN_OLDER FATTN_OLDER(sizeof(fattn_varlen_desc))
#define PAGED_OLDER FATTN_OLDER(sizeof(fattn_paged_kv_desc))
#define APPEND_OLDER FATTN_OLDER(sizeof(fattn_kv_append_desc))
#define TENSOR_OLDER FATTN_OLDER(sizeof(fattn_tensor))

static fattn_status check_desc(const fattn_attention_desc *d, fattn_msg *msg) {
    int64_t n;
#define FATTN_CHECK_MIN_(field, lo)                                                                \
    if (d->field < (lo))                                                                           \
        return fattn_fail(msg, FATTN_ERR_INVALID_SIZE,                                             \
                          "desc->" #field " = %" PRId64 " but must be at least %d", d->field,      \
                          (lo));
    FATTN_CHECK_MIN_(batch, 1)
    FATTN_CHECK_MIN_(heads_q, 1)
    FATTN_CHECK_MIN_(heads_kv, 1)
    FATTN_CHECK_MIN_(seq_q, 1)
    FATTN_CHECK_MIN_(seq_kv, 0)
#undef FATTN_CHECK_MIN_
    if (d->head_dim < 1 || d->head_dim > 256)
        return fattn_fail(msg, FATTN_ERR_HEAD_DIM, "desc->head_dim = %" PRId64 " is outside 1..256",
                          d->head_dim);
    if (d->head_dim_v < 0 || d->head_dim_v > 256)
        return fattn_fail(msg, FATTN_ERR_HEAD_DIM,
                          "desc->head_dim_v = %" PRId64 " is outside 1..256 (0 = head_dim)",
                          d->head_dim_v);
    if (d->heads_q % d->heads_kv != 0)
        return fattn_fail(msg, FATTN_ERR_HEADS,
                          "desc->heads_q = %" PRId64
                          " is not a multiple of desc->heads_kv = %" PRId64,
                          d->heads_q, d->heads_kv);
    if (d->dtype != FATTN_F32 && d->dtype != FATTN_F16 && d->dtype != FATTN_BF16)
        return fattn_fail(msg, FATTN_ERR_INVALID_ARGUMENT,
                          "desc->dtype = %d is not FATTN_F32, FATTN_F16 or FATTN_BF16",
                          (int)d->dtype);
    if (!isfinite(d->scale))
        return fattn_fail(msg, FATTN_ERR_INVALID_ARGUMENT, "desc->scale is not finite");
    if (d->causal != FATTN_CAUSAL_NONE && d->causal != FATTN_CAUSAL_BOTTOM_RIGHT &&
        d->causal != FATTN_CAUSAL_TOP_LEFT)
        return fattn_fail(msg, FATTN_ERR_INVALID_ARGUMENT,
                          "desc->causal = %d is not FATTN_CAUSAL_NONE (0), _BOTTOM_RIGHT (1) or "
                          "_TOP_LEFT (2)",
                          (int)d->causal);
    if (d->flags & ~(unsigned)FATTN_FLAGS_ALL_)
        return fattn_fail(msg, FATTN_ERR_INVALID_ARGUMENT, "desc->flags has unknown bits 0x%x",
                          d->flags & ~(unsigned)FATTN_FLAGS_ALL_);
    if (!mul4(d->batch, d->heads_q, d->seq_q, d->head_dim, &n))
        return fattn_fail(msg, FATTN_ERR_OVERFLOW,
                          "batch * heads_q * seq_q * head_dim overflows a 64-bit integer");
    if (!mul4(d->batch, d->heads_kv, d->seq_kv, d->head_dim, &n))
        return fattn_fail(msg, FATTN_ERR_OVERFLOW,
                          "batch * heads_kv * seq_kv * head_dim overflows a 64-bit integer");
    const int64_t dv = d->head_dim_v ? d->head_dim_v : d->head_dim;
    if (!mul4(d->batch, d->heads_q, d->seq_q, dv, &n) ||
        !mul4(d->batch, d->heads_kv, d->seq_kv, dv, &n))
        return fattn_fail(msg, FATTN_ERR_OVERFLOW,
                          "the sizes of V or O (head_dim_v) overflow a 64-bit integer");
    if (!mul4(d->batch, d->heads_q, d->seq_q, d->seq_kv, &n))
        return fattn_fail(msg, FATTN_ERR_OVERFLOW,
                          "batch * heads_q * seq_q * seq_kv overflows a 64-bit integer");
    const struct {
        const char *name;
        int64_t value;
    } extents[] = {{"batch", d->batch},
                   {"heads_q", d->heads_q},
                   {"seq_q", d->seq_q},
                   {"seq_kv", d->seq_kv}};
    for (size_t i = 0; i < sizeof extents / sizeof extents[0]; i++)
        if (extents[i].value > FATTN_MAX_EXTENT)
            return fattn_fail(msg, FATTN_ERR_OVERFLOW,
                              "desc->%s = %" PRId64 " is more than FATTN_MAX_EXTENT (2^48)",
                              extents[i].name, extents[i].value);
    return FATTN_OK;
}

static fattn_status check_mask(const fattn_mask_desc *m, fattn_msg *msg) {
    if (m->window_left < -1 || m->window_right < -1)
        return fattn_fail(msg, FATTN_ERR_INVALID_ARGUMENT,
                          "desc->mask->window_left = %" PRId64 ", window_right = %" PRId64
                          ": each is -1 (unbounded) or >= 0",
                          m->window_left, m->window_right);
    if (!isfinite(m->softcap) || m->softcap < 0.0f)
        return fattn_fail(msg, FATTN_ERR_INVALID_ARGUMENT,
                          "desc->mask->softcap = %g: it is 0 (none) or a finite value > 0",
                          (double)m->softcap);
    return FATTN_OK;
}

static fattn_status check_layout(const fattn_request *r, fattn_msg *msg) {
    const fattn_varlen_desc *v = &r->varlen;
    const fattn_paged_kv_desc *pg = &r->paged;
    if (r->has_varlen && (v->total_q < 0 || v->total_kv < 0))
        return fattn_fail(msg, FATTN_ERR_INVALID_SIZE,
                          "desc->varlen->total_q = %" PRId64 ", total_kv = %" PRId64
                          ": must be >= 0",
                          v->total_q, v->total_kv);
    if (r->has_varlen && (v->total_q > FATTN_MAX_EXTENT || v->total_kv > FATTN_MAX_EXTENT))
        return fattn_fail(msg, FATTN_ERR_OVERFLOW,
                          "desc->varlen->total_q = %" PRId64 ", total_kv = %" PRId64
                          ": each is at most FATTN_MAX_EXTENT (2^48)",
                          v->total_q, v->total_kv);
    /* Packed rows come with their offsets, and hold the longest sequence. */
    const struct {
        const char *what, *tensor;
        int64_t total, longest;
        const fattn_tensor *offsets;
    } packed[2] = {{"total_q", "cu_seqlens_q", v->total_q, r->d.seq_q, v->cu_seqlens_q},
                   {"total_kv", "cu_seqlens_kv", v->total_kv, r->d.seq_kv, v->cu_seqlens_kv}};
    for (int i = 0; r->has_varlen && i < 2; i++) {
        if (!packed[i].offsets && packed[i].total != 0)
            return fattn_fail(msg, FATTN_ERR_INVALID_ARGUMENT,
                              "desc->varlen->%s = %" PRId64 " but desc->varlen->%s is NULL: packed "
                              "rows need their offsets",
                              packed[i].what, packed[i].total, packed[i].tensor);
        if (packed[i].offsets && packed[i].total < packed[i].longest)
            return fattn_fail(msg, FATTN_ERR_INVALID_SIZE,
                              "desc->varlen->%s = %" PRId64 " is less than the longest sequence "
                              "(desc->%s = %" PRId64 ")",
                              packed[i].what, packed[i].total, i ? "seq_kv" : "seq_q",
                              packed[i].longest);
    }
    if (!r->has_paged) return FATTN_OK;
    if (pg->page_size < 1 || pg->num_pages < 1 || pg->pages_per_seq < 1)
        return fattn_fail(msg, FATTN_ERR_INVALID_SIZE,
                          "desc->paged_kv: page_size = %" PRId64 ", num_pages = %" PRId64
                          ", pages_per_seq = %" PRId64 ": each must be at least 1",
                          pg->page_size, pg->num_pages, pg->pages_per_seq);
    if (pg->page_size > FATTN_MAX_EXTENT || pg->num_pages > FATTN_MAX_EXTENT ||
        pg->pages_per_seq > FATTN_MAX_EXTENT)
        return fattn_fail(msg, FATTN_ERR_OVERFLOW,
                          "desc->paged_kv: page_size = %" PRId64 ", num_pages = %" PRId64
                          ", pages_per_seq = %" PRId64 ": each is at most FATTN_MAX_EXTENT (2^48)",
                          pg->page_size, pg->num_pages, pg->pages_per_seq);
    int64_t cap;
    if (__builtin_mul_overflow(pg->page_size, pg->pages_per_seq, &cap) || r->d.seq_kv > cap)
        return fattn_fail(msg, FATTN_ERR_INVALID_SIZE,
                          "desc->seq_kv = %" PRId64 " is more than a sequence's pages hold "
                          "(pages_per_seq * page_size)",
                          r->d.seq_kv);
    if (!pg->block_table)
        return fattn_fail(msg, FATTN_ERR_NULL_POINTER, "desc->paged_kv->block_table is NULL");
    if (r->has_varlen && v->cu_seqlens_kv)
        return fattn_fail(
            msg, FATTN_ERR_INVALID_ARGUMENT,
            "desc->varlen->cu_seqlens_kv and desc->paged_kv exclude each other: a paged "
            "cache takes its lengths from varlen->seqused_kv");
    return FATTN_OK;
}

/* The append's own fields, and the cache layout it writes into: rows after
 * seqused_kv[b] of a contiguous or paged cache. */
static fattn_status check_append(const fattn_request *r, fattn_msg *msg) {
    const fattn_kv_append_desc *a = &r->append;
    if (!a->k_new || !a->v_new)
        return fattn_fail(msg, FATTN_ERR_NULL_POINTER, "desc->append->%s is NULL",
                          a->k_new ? "v_new" : "k_new");
    if (a->seq_new < 0 || a->seq_new > r->d.seq_kv)
        return fattn_fail(msg, FATTN_ERR_INVALID_SIZE,
                          "desc->append->seq_new = %" PRId64
                          " must lie in 0..desc->seq_kv = %" PRId64 " (the cache's capacity)",
                          a->seq_new, r->d.seq_kv);
    if (!r->has_varlen || !r->varlen.seqused_kv)
        return fattn_fail(msg, FATTN_ERR_INVALID_ARGUMENT,
                          "desc->append needs desc->varlen->seqused_kv: the keys each sequence "
                          "has cached (FlashAttention's cache_seqlens), after which the new "
                          "ones are written");
    if (r->varlen.cu_seqlens_kv)
        return fattn_fail(msg, FATTN_ERR_INVALID_ARGUMENT,
                          "desc->append writes into a cache of sequences with seq_kv rows each "
                          "(or paged): desc->varlen->cu_seqlens_kv (packed K and V) is not "
                          "taken with it");
    return FATTN_OK;
}

fattn_status fattn_read_request(const fattn_attention_desc *desc, fattn_request *r,
                                fattn_msg *msg) {
    static const fattn_attention_desc d0 = FATTN_ATTENTION_DESC_INIT;
    static const fattn_mask_desc m0 = FATTN_MASK_DESC_INIT;
    static const fattn_varlen_desc v0 = FATTN_VARLEN_DESC_INIT;
    static const fattn_paged_kv_desc p0 = FATTN_PAGED_KV_DESC_INIT;
    static const fattn_kv_append_desc a0 = FATTN_KV_APPEND_DESC_INIT;
    fattn_status st;
    if (!desc) return fattn_fail(msg, FATTN_ERR_NULL_POINTER, "desc is NULL");
    r->d = d0;
    r->mask = m0;
    r->varlen = v0;
    r->paged = p0;
    r->append = a0;
    if ((st = fattn_ext_read(&r->d, sizeof r->d, desc, DESC_OLDER, "desc", "fattn_attention_desc",
                             msg)))
        return st;
    if ((st = check_desc(&r->d, msg))) return st;
    if (!r->d.head_dim_v) r->d.head_dim_v = r->d.head_dim; /* resolved once, for every reader */
    r->has_mask = r->d.mask != NULL;
    r->has_varlen = r->d.varlen != NULL;
    r->has_paged = r->d.paged_kv != NULL;
    r->has_append = r->d.append != NULL;
    if (r->has_mask && ((st = fattn_ext_read(&r->mask, sizeof r->mask, r->d.mask, MASK_OLDER,
                                             "desc->mask", "fattn_mask_desc", msg)) ||
                        (st = check_mask(&r->mask, msg))))
        return st;
    if (r->has_varlen &&
        (st = fattn_ext_read(&r->varlen, sizeof r->varlen, r->d.varlen, VARLEN_OLDER,
                             "desc->varlen", "fattn_varlen_desc", msg)))
        return st;
    if (r->has_paged && (st = fattn_ext_read(&r->paged, sizeof r->paged, r->d.paged_kv, PAGED_OLDER,
                                             "desc->paged_kv", "fattn_paged_kv_desc", msg)))
        return st;
    if (r->has_append &&
        (st = fattn_ext_read(&r->append, sizeof r->append, r->d.append, APPEND_OLDER,
                             "desc->append", "fattn_kv_append_desc", msg)))
        return st;
    if ((st = check_layout(r, msg))) return st;
    return r->has_append ? check_append(r, msg) : FATTN_OK;
}

int64_t fattn_causal_offset(const fattn_attention_desc *d) {
    return d->causal == FATTN_CAUSAL_TOP_LEFT ? 0 : d->seq_kv - d->seq_q;
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
    int64_t span = 0; /* largest offset reachable by the smaller dims */
    for (int i = 0; i < m; i++) {
        if (s[i].stride <= span) return 1;
        span += (s[i].extent - 1) * s[i].stride; /* fits: the extent was checked */
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

/* How a tensor's four strides map onto its extents. */
typedef enum {
    SHAPE_DATA, /* [B, H, S, D], stride_dim must be 1 (Q, K, V, O) */
    SHAPE_ROWS, /* [B, H, S], stride_dim unused (lse, slopes, sinks, index tensors) */
    SHAPE_BIAS  /* [B, H, Sq, Sk], the keys along stride_dim (any >= 0) */
} shape_;

typedef struct want_ {
    const char *name;
    fattn_dtype dtype, alt; /* alt: a second accepted dtype, or the same */
    const char *dtype_why;  /* " (desc->dtype)" */
    shape_ shape;
    int64_t ext[4];
    int output;
} want_;

static fattn_status check_tensor(fattn_context *ctx, const want_ *w, const fattn_tensor *user,
                                 fattn_tensor *t, range_ *r) {
    static const fattn_tensor t0 = FATTN_TENSOR_INIT;
    const char *name = w->name;
    if (!user) return fattn_ctx_fail(ctx, FATTN_ERR_NULL_POINTER, "%s (the tensor) is NULL", name);
    *t = t0;
    fattn_status st =
        fattn_ext_read(t, sizeof *t, user, TENSOR_OLDER, name, "fattn_tensor", &ctx->msg);
    if (st != FATTN_OK) return st;
    r->root = NULL;
    r->empty = 0;
    for (int i = 0; i < 4; i++) r->empty |= w->ext[i] == 0;
    if (t->dtype != w->dtype && t->dtype != w->alt) {
        if (w->alt != w->dtype)
            return fattn_ctx_fail(ctx, FATTN_ERR_DTYPE, "%s->dtype is %s but must be %s or %s%s",
                                  name, fattn_dtype_name(t->dtype), fattn_dtype_name(w->dtype),
                                  fattn_dtype_name(w->alt), w->dtype_why);
        return fattn_ctx_fail(ctx, FATTN_ERR_DTYPE, "%s->dtype is %s but must be %s%s", name,
                              fattn_dtype_name(t->dtype), fattn_dtype_name(w->dtype), w->dtype_why);
    }
    if (w->shape == SHAPE_DATA && t->stride_dim != 1)
        return fattn_ctx_fail(ctx, FATTN_ERR_STRIDE,
                              "%s->stride_dim = %" PRId64
                              ": the last dimension must be contiguous (1)",
                              name, t->stride_dim);
    if (t->offset < 0)
        return fattn_ctx_fail(ctx, FATTN_ERR_INVALID_ARGUMENT,
                              "%s->offset = %" PRId64 " is negative", name, t->offset);
    if (t->stride_batch < 0 || t->stride_head < 0 || t->stride_seq < 0 ||
        (w->shape == SHAPE_BIAS && t->stride_dim < 0))
        return fattn_ctx_fail(ctx, FATTN_ERR_STRIDE,
                              "%s has a negative stride (batch %" PRId64 ", head %" PRId64
                              ", seq %" PRId64 ", dim %" PRId64 ")",
                              name, t->stride_batch, t->stride_head, t->stride_seq, t->stride_dim);
    /* A stride along an extent of 1 never steps, so the span check below
     * does not bound it; backends still scale every stride to bytes (and add
     * a few), so no stride may be larger than any buffer could be. */
    const int64_t huge = INT64_MAX / 64;
    if (t->stride_batch > huge || t->stride_head > huge || t->stride_seq > huge ||
        (w->shape == SHAPE_BIAS && t->stride_dim > huge))
        return fattn_ctx_fail(ctx, FATTN_ERR_OVERFLOW,
                              "%s has a stride above 2^57 elements (batch %" PRId64 ", head %" PRId64
                              ", seq %" PRId64 ", dim %" PRId64
                              "), larger than any buffer; along a size of 1 pass 0",
                              name, t->stride_batch, t->stride_head, t->stride_seq, t->stride_dim);
    if (t->buffer && t->buffer->ctx != ctx)
        return fattn_ctx_fail(ctx, FATTN_ERR_WRONG_CONTEXT,
                              "%s->buffer was made by another context", name);
    if (r->empty) return FATTN_OK;
    if (!t->buffer) return fattn_ctx_fail(ctx, FATTN_ERR_NULL_POINTER, "%s->buffer is NULL", name);
    if (w->output && t->buffer->read_only)
        return fattn_ctx_fail(
            ctx, FATTN_ERR_INVALID_ARGUMENT,
            "%s->buffer wraps read-only memory (fattn_buffer_wrap_const) but %s is "
            "written",
            name, name);

    /* Last element offset, with every product checked. */
    const int n = w->shape == SHAPE_ROWS ? 3 : 4;
    const dim_ dims[4] = {{w->ext[0], t->stride_batch},
                          {w->ext[1], t->stride_head},
                          {w->ext[2], t->stride_seq},
                          {w->ext[3], w->shape == SHAPE_DATA ? 1 : t->stride_dim}};
    int64_t last = t->offset, term, bytes;
    for (int i = 0; i < n; i++) {
        if (__builtin_mul_overflow(dims[i].extent - 1, dims[i].stride, &term) ||
            __builtin_add_overflow(last, term, &last))
            return fattn_ctx_fail(ctx, FATTN_ERR_OVERFLOW,
                                  "%s: offset plus strides times sizes overflows 64 bits", name);
    }
    const int64_t esize = (int64_t)fattn_dtype_size(t->dtype);
    if (__builtin_add_overflow(last, 1, &bytes) || __builtin_mul_overflow(bytes, esize, &bytes))
        return fattn_ctx_fail(ctx, FATTN_ERR_OVERFLOW, "%s: byte size overflows 64 bits", name);
    if ((uint64_t)bytes > (uint64_t)t->buffer->bytes)
        return fattn_ctx_fail(ctx, FATTN_ERR_BUFFER_TOO_SMALL,
                              "%s needs %" PRId64
                              " bytes for its offset and strides but its buffer "
                              "has %zu",
                              name, bytes, t->buffer->bytes);
    if (w->output && elements_overlap(dims, n))
        return fattn_ctx_fail(ctx, FATTN_ERR_STRIDE,
                              "%s strides make different output elements share memory", name);
    uint64_t start = 0;
    st = ctx->vt->buffer_region(ctx->state, t->buffer->mem, &r->root, &start, &ctx->msg);
    if (st != FATTN_OK) return st;
    /* Element offsets keep the alignment of the buffer's start, so that is
     * the one thing to check: kernels and the CPU load whole elements. */
    if (start % (uint64_t)esize != 0)
        return fattn_ctx_fail(ctx, FATTN_ERR_MISALIGNED,
                              "%s: its buffer starts at address 0x%llx, which is not a multiple of "
                              "%d bytes (one %s element); pass memory aligned to the element size "
                              "(fattn_buffer_alloc's is)",
                              name, (unsigned long long)start, (int)esize,
                              fattn_dtype_name(t->dtype));
    if (__builtin_add_overflow(start, (uint64_t)t->offset * (uint64_t)esize, &r->first) ||
        __builtin_add_overflow(start, (uint64_t)bytes - 1, &r->last))
        return fattn_ctx_fail(ctx, FATTN_ERR_OVERFLOW, "%s: its byte range overflows 64 bits",
                              name);
    return FATTN_OK;
}

static int ranges_meet(const range_ *a, const range_ *b) {
    return !a->empty && !b->empty && a->root == b->root && a->first <= b->last &&
           b->first <= a->last;
}

static fattn_operand operand(const fattn_tensor *t) {
    fattn_operand o = {t->buffer ? t->buffer->mem : NULL, t->offset, t->stride_batch,
                       t->stride_head, t->stride_seq};
    return o;
}

/* The tensors of the sub-descriptions: index tables, slopes, sinks, bias.
 * They are inputs; only their shapes, dtypes and bounds can be checked here
 * (their contents live on the device). */
/* What an input tensor of the sub-descriptions must be: float32 or int32
 * rows [b, h, s] (stride_dim unused), or the bias. */
static want_ rows_of(const char *name, fattn_dtype dtype, int64_t b, int64_t h, int64_t s) {
    const want_ w = {.name = name,
                     .dtype = dtype,
                     .alt = dtype,
                     .dtype_why =
                         dtype == FATTN_I32 ? " (index tensors are int32)" : " (it is float32)",
                     .shape = SHAPE_ROWS,
                     .ext = {b, h, s, 1}};
    return w;
}

/* The index tables' operands: cu_seqlens_q, cu_seqlens_kv, seqused_kv,
 * block_table (mem NULL when absent). */
enum { T_CU_Q, T_CU_KV, T_USED, T_TABLE, T_COUNT };
/* The mask's tensors, the first rows of check_extra_tensors' list. */
enum { X_ALIBI, X_SINKS, X_BIAS };

/* The sub-descriptions' tensors, at most. */
enum { X_COUNT = 7 };

/* Checks them, each against the outputs too (outs[i] NULL when absent): a
 * kernel reads an index table while other work-items write O, so a table
 * inside O could change under it after the host checked it. Their ranges
 * and names go to xr / xnames (NULL where absent) for the workspace check. */
static fattn_status check_extra_tensors(fattn_context *ctx, const fattn_request *r,
                                        fattn_operand tables[T_COUNT], const range_ *const *outs,
                                        const char *const *out_names, int nouts, range_ xr[X_COUNT],
                                        const char *xnames[X_COUNT], fattn_tensor xt[X_COUNT]) {
    const fattn_attention_desc *d = &r->d;
    const int64_t B = d->batch, Hq = d->heads_q;
    const fattn_mask_desc *m = r->has_mask ? &r->mask : NULL;
    const fattn_varlen_desc *v = r->has_varlen ? &r->varlen : NULL;
    const fattn_paged_kv_desc *pg = r->has_paged ? &r->paged : NULL;
    const want_ bias = {.name = "desc->mask->bias",
                        .dtype = FATTN_F32,
                        .alt = d->dtype,
                        .dtype_why = " (float32 or desc->dtype)",
                        .shape = SHAPE_BIAS,
                        .ext = {B, Hq, d->seq_q, d->seq_kv}};
    const struct {
        const fattn_tensor *t;
        want_ w;
    } extra[] = {
        {m ? m->alibi_slopes : NULL, rows_of("desc->mask->alibi_slopes", FATTN_F32, B, Hq, 1)},
        {m ? m->sinks : NULL, rows_of("desc->mask->sinks", FATTN_F32, 1, Hq, 1)},
        {m ? m->bias : NULL, bias},
        {v ? v->cu_seqlens_q : NULL, rows_of("desc->varlen->cu_seqlens_q", FATTN_I32, 1, 1, B + 1)},
        {v ? v->cu_seqlens_kv : NULL,
         rows_of("desc->varlen->cu_seqlens_kv", FATTN_I32, 1, 1, B + 1)},
        {v ? v->seqused_kv : NULL, rows_of("desc->varlen->seqused_kv", FATTN_I32, 1, 1, B)},
        {pg ? pg->block_table : NULL,
         rows_of("desc->paged_kv->block_table", FATTN_I32, B, 1, pg ? pg->pages_per_seq : 0)},
    };
    fattn_tensor t;
    range_ rg;
    fattn_status st;
    const size_t n = sizeof extra / sizeof extra[0];
    _Static_assert(sizeof extra / sizeof extra[0] == X_COUNT, "X_COUNT counts the rows above");
    for (size_t i = 0; i < n; i++) {
        xnames[i] = NULL;
        if (extra[i].t) {
            if ((st = check_tensor(ctx, &extra[i].w, extra[i].t, &t, &rg))) return st;
            for (int j = 0; j < nouts; j++)
                if (outs[j] && ranges_meet(&rg, outs[j]))
                    return fattn_ctx_fail(ctx, FATTN_ERR_INVALID_ARGUMENT,
                                          "%s overlaps %s in the same memory (an output must "
                                          "not share memory with an input)",
                                          extra[i].w.name, out_names[j]);
            xr[i] = rg;
            xnames[i] = extra[i].w.name;
            xt[i] = t;
        }
        /* The last T_COUNT rows are the index tables, in enum order. */
        if (i >= n - T_COUNT)
            tables[i - (n - T_COUNT)] = extra[i].t ? operand(&t) : (fattn_operand){0};
    }
    return FATTN_OK;
}

/* desc->append's k_new and v_new: [batch, heads_kv, seq_new, head_dim
 * (head_dim_v)] in desc->dtype, like K (wk) and V (wv) but a dense batch, and sharing no memory with
 * what the call writes (outs: O, lse, K, V). */
static fattn_status check_new_rows(fattn_context *ctx, const fattn_request *r, const want_ *wk,
                                   const want_ *wv, const range_ *const outs[4],
                                   const char *const out_names[4], fattn_tensor tn[2],
                                   range_ rn[2]) {
    const fattn_tensor *user[2] = {r->append.k_new, r->append.v_new};
    fattn_status st;
    for (int i = 0; i < 2; i++) {
        want_ w = i ? *wv : *wk;
        w.name = i ? "desc->append->v_new" : "desc->append->k_new";
        w.ext[0] = r->d.batch;
        w.ext[2] = r->append.seq_new;
        w.output = 0;
        if ((st = check_tensor(ctx, &w, user[i], &tn[i], &rn[i]))) return st;
        for (int j = 0; j < 4; j++)
            if (outs[j] && ranges_meet(&rn[i], outs[j]))
                return fattn_ctx_fail(ctx, FATTN_ERR_INVALID_ARGUMENT,
                                      "%s overlaps %s in the same memory (an output must not "
                                      "share memory with an input)",
                                      w.name, out_names[j]);
    }
    return FATTN_OK;
}

/* Fills p->rag from the request and the tables' operands. */
static void ragged_problem(const fattn_request *r, const fattn_operand tables[T_COUNT],
                           fattn_problem *p) {
    fattn_ragged *g = &p->rag;
    memset(g, 0, sizeof *g);
    const fattn_varlen_desc *v = &r->varlen;
    g->on =
        r->has_paged || (r->has_varlen && (v->cu_seqlens_q || v->cu_seqlens_kv || v->seqused_kv));
    if (!g->on) return;
    g->cu_seqlens_q = tables[T_CU_Q];
    g->cu_seqlens_kv = tables[T_CU_KV];
    g->seqused_kv = tables[T_USED];
    g->block_table = tables[T_TABLE];
    g->total_q = r->has_varlen && v->cu_seqlens_q ? v->total_q : 0;
    g->total_kv = r->has_varlen && v->cu_seqlens_kv ? v->total_kv : 0;
    if (r->has_paged) {
        g->page_size = r->paged.page_size;
        g->num_pages = r->paged.num_pages;
        g->pages_per_seq = r->paged.pages_per_seq;
    }
    g->top_left = r->d.causal == FATTN_CAUSAL_TOP_LEFT;
}

/* Fills p->var from the mask and its tensors' operands (xt, NULL without
 * operands: a given tensor then gets a placeholder mem that says only
 * "given", so that a report plans the problem that would run). */
static void variants_problem(const fattn_request *r, const fattn_tensor xt[X_COUNT],
                             fattn_problem *p) {
    static const char given;
    fattn_variants *v = &p->var;
    memset(v, 0, sizeof *v);
    v->window_left = v->window_right = -1;
    v->bias_dtype = FATTN_F32;
    if (!r->has_mask) return;
    const fattn_mask_desc *m = &r->mask;
    /* A side wider than seq_q + seq_kv hides no key (every sequence is
     * at most that long), so it is clamped there: backends and the host
     * rule (fattn_seq_keys) then add rows, offsets and sides in int64
     * without overflow (the fuzzer found window_left near 2^63). */
    const int64_t widest =
        r->d.seq_q > INT64_MAX - r->d.seq_kv ? INT64_MAX : r->d.seq_q + r->d.seq_kv;
    v->window_left = m->window_left > widest ? widest : m->window_left;
    v->window_right = m->window_right > widest ? widest : m->window_right;
    v->softcap = m->softcap;
    const fattn_tensor *user[3] = {m->alibi_slopes, m->sinks, m->bias};
    fattn_operand *ops[3] = {&v->alibi, &v->sinks, &v->bias};
    for (int i = 0; i < 3; i++) {
        if (!user[i]) continue;
        if (xt) {
            *ops[i] = operand(&xt[i]);
            if (!ops[i]->mem) ops[i]->mem = (void *)&given; /* an empty tensor (seq_kv 0) */
        } else {
            ops[i]->mem = (void *)&given;
        }
    }
    if (m->bias) {
        /* Without operands (a workspace or memory query) the bias is not
         * checked, but its dtype and key stride still pick the kernel that
         * would run (the wgmma kernel reads only a bias in desc->dtype), so
         * they are read here as given; one that would fail the check counts
         * as float32. */
        static const fattn_tensor t0 = FATTN_TENSOR_INIT;
        fattn_tensor b = t0;
        fattn_msg scratch;
        if (xt)
            b = xt[X_BIAS];
        else if (fattn_ext_read(&b, sizeof b, m->bias, TENSOR_OLDER, "desc->mask->bias",
                                "fattn_tensor", &scratch) != FATTN_OK)
            b = t0;
        else if (b.dtype != r->d.dtype)
            b.dtype = FATTN_F32;
        v->bias_stride_dim = b.stride_dim;
        v->bias_dtype = b.dtype;
    }
    v->on = v->window_left >= 0 || v->window_right >= 0 || v->softcap > 0.0f || m->alibi_slopes ||
            m->sinks || m->bias;
}

/* The workspace the caller passed: this context's, writable. Its size is
 * checked against the plan in attention.c. */
static fattn_status check_workspace(fattn_context *ctx, const fattn_buffer *ws,
                                    const range_ *const *tensors, const char *const *names, int n) {
    if (!ws) return FATTN_OK;
    if (ws->ctx != ctx)
        return fattn_ctx_fail(ctx, FATTN_ERR_WRONG_CONTEXT,
                              "desc->workspace was made by another context");
    if (ws->read_only)
        return fattn_ctx_fail(ctx, FATTN_ERR_INVALID_ARGUMENT,
                              "desc->workspace wraps read-only memory (fattn_buffer_wrap_const)");
    /* The whole buffer is scratch: it may share memory with no tensor. */
    range_ w = {NULL, 0, 0, 0};
    fattn_status st = ctx->vt->buffer_region(ctx->state, ws->mem, &w.root, &w.first, &ctx->msg);
    if (st != FATTN_OK) return st;
    if (__builtin_add_overflow(w.first, (uint64_t)ws->bytes - 1, &w.last))
        return fattn_ctx_fail(ctx, FATTN_ERR_OVERFLOW, "desc->workspace: its byte range overflows");
    for (int i = 0; i < n; i++)
        if (tensors[i] && ranges_meet(&w, tensors[i]))
            return fattn_ctx_fail(ctx, FATTN_ERR_INVALID_ARGUMENT,
                                  "desc->workspace overlaps %s in the same memory", names[i]);
    return FATTN_OK;
}

fattn_status fattn_build_problem(fattn_context *ctx, fattn_op op, const fattn_attention_desc *desc,
                                 const fattn_tensor *q, const fattn_tensor *k,
                                 const fattn_tensor *v, const fattn_tensor *o,
                                 const fattn_tensor *lse, fattn_request *r, fattn_problem *p) {
    fattn_status st = fattn_read_request(desc, r, &ctx->msg);
    if (st != FATTN_OK) return st;
    const fattn_attention_desc *d = &r->d;
    memset(p, 0, sizeof *p);
    fattn_operand tables[T_COUNT] = {{0}};
    fattn_tensor xt[X_COUNT];
    p->has_operands = q != NULL || k != NULL || v != NULL || o != NULL;
    if (p->has_operands) {
        const int64_t B = d->batch, Hq = d->heads_q, Hk = d->heads_kv, D = d->head_dim;
        /* Packed variable-length rows and pages change the outer shapes. */
        const int packed_q = r->has_varlen && r->varlen.cu_seqlens_q;
        const int packed_kv = r->has_varlen && r->varlen.cu_seqlens_kv;
        const int64_t qb = packed_q ? 1 : B, qs = packed_q ? r->varlen.total_q : d->seq_q;
        const int64_t kb = r->has_paged ? r->paged.num_pages : packed_kv ? 1 : B;
        const int64_t ks = r->has_paged ? r->paged.page_size
                           : packed_kv  ? r->varlen.total_kv
                                        : d->seq_kv;
        const want_ wq = {"q",        d->dtype,        d->dtype, " (desc->dtype)",
                          SHAPE_DATA, {qb, Hq, qs, D}, 0};
        want_ wk = {"k", d->dtype, d->dtype, " (desc->dtype)", SHAPE_DATA, {kb, Hk, ks, D}, 0};
        wk.output = r->has_append; /* an append writes K and V (the cache) */
        want_ wv = wk, wo = wq;
        wv.ext[3] = wo.ext[3] = d->head_dim_v; /* V and O: [.., head_dim_v] */
        const want_ wl = {"lse",      FATTN_F32,       FATTN_F32, " (log-sum-exp is float32)",
                          SHAPE_ROWS, {qb, Hq, qs, 1}, 1};
        wv.name = "v";
        wo.name = "o";
        wo.output = 1;
        fattn_tensor tq, tk, tv, to, tl;
        range_ rq, rk, rv, ro, rl;
        if ((st = check_tensor(ctx, &wq, q, &tq, &rq)) ||
            (st = check_tensor(ctx, &wk, k, &tk, &rk)) ||
            (st = check_tensor(ctx, &wv, v, &tv, &rv)) ||
            (st = check_tensor(ctx, &wo, o, &to, &ro)))
            return st;
        if (lse && (st = check_tensor(ctx, &wl, lse, &tl, &rl))) return st;
        const range_ *inputs[3] = {&rq, &rk, &rv};
        static const char *const names[3] = {"q", "k", "v"};
        for (int i = 0; i < 3; i++) {
            if (ranges_meet(&ro, inputs[i]))
                return fattn_ctx_fail(ctx, FATTN_ERR_INVALID_ARGUMENT,
                                      "o overlaps %s in the same memory", names[i]);
            if (lse && ranges_meet(&rl, inputs[i]))
                return fattn_ctx_fail(ctx, FATTN_ERR_INVALID_ARGUMENT,
                                      "lse overlaps %s in the same memory", names[i]);
        }
        if (lse && ranges_meet(&rl, &ro))
            return fattn_ctx_fail(ctx, FATTN_ERR_INVALID_ARGUMENT,
                                  "lse overlaps o in the same memory");
        /* What the call writes: O and lse, and K and V with an append. */
        const range_ *outs[4] = {&ro, lse ? &rl : NULL, &rk, &rv};
        static const char *const out_names[4] = {"o", "lse", "k", "v"};
        const int nouts = r->has_append ? 4 : 2;
        fattn_tensor tn[2];
        range_ rn[2];
        if (r->has_append && (st = check_new_rows(ctx, r, &wk, &wv, outs, out_names, tn, rn)))
            return st;
        const range_ *all[7 + X_COUNT] = {&rq, &rk, &rv, &ro, lse ? &rl : NULL};
        const char *all_names[7 + X_COUNT] = {"q", "k", "v", "o", "lse"};
        range_ xr[X_COUNT];
        const char *xnames[X_COUNT];
        if ((st = check_extra_tensors(ctx, r, tables, outs, out_names, nouts, xr, xnames, xt)))
            return st;
        for (int i = 0; i < X_COUNT; i++) {
            all[5 + i] = xnames[i] ? &xr[i] : NULL;
            all_names[5 + i] = xnames[i];
        }
        for (int i = 0; i < 2; i++) {
            all[5 + X_COUNT + i] = r->has_append ? &rn[i] : NULL;
            all_names[5 + X_COUNT + i] = i ? "desc->append->v_new" : "desc->append->k_new";
        }
        if ((st = check_workspace(ctx, d->workspace, all, all_names, 7 + X_COUNT))) return st;
        if (r->has_append) p->k_new = operand(&tn[0]), p->v_new = operand(&tn[1]);
        p->q = operand(&tq);
        p->k = operand(&tk);
        p->v = operand(&tv);
        p->o = operand(&to);
        p->has_lse = lse != NULL;
        if (lse) p->lse = operand(&tl);
    }

    p->op = op;
    p->batch = d->batch;
    p->heads_q = d->heads_q;
    p->heads_kv = d->heads_kv;
    p->seq_q = d->seq_q;
    p->seq_kv = d->seq_kv;
    p->head_dim = d->head_dim;
    p->dtype = d->dtype;
    p->scale = d->scale != 0.0f ? d->scale : (float)(1.0 / sqrt((double)d->head_dim));
    p->scale_log2 = p->scale * FATTN_LOG2E_F;
    p->causal = d->causal != FATTN_CAUSAL_NONE;
    p->causal_offset = fattn_causal_offset(d);
    p->flags = d->flags;
    p->tune = ctx->tune;
    p->head_dim_v = d->head_dim_v;
    ragged_problem(r, tables, p);
    variants_problem(r, p->has_operands ? xt : NULL, p);
    if (r->has_append) {
        if (!ctx->vt->append)
            return fattn_ctx_fail(ctx, FATTN_ERR_UNSUPPORTED,
                                  "the %s backend cannot append keys to a cache (desc->append)",
                                  ctx->vt->name);
        p->has_append = 1;
        p->seq_new = r->append.seq_new;
        p->rag.keys_added = p->seq_new;
    }
    /* Tables a backend without a fault word reads on the host are checked
     * here, before anything runs. */
    if (p->rag.on && p->has_operands && !ctx->vt->take_fault) return fattn_check_tables(ctx, p);
    return FATTN_OK;
}

/* ---- Combine ---------------------------------------------------------------- */

#define COMBINE_OLDER FATTN_OLDER(sizeof(fattn_combine_desc))

static fattn_status check_combine_desc(const fattn_combine_desc *c, fattn_msg *msg) {
    int64_t n;
    if (c->batch < 1 || c->heads < 1 || c->seq < 1 || c->parts < 1)
        return fattn_fail(msg, FATTN_ERR_INVALID_SIZE,
                          "desc->batch = %" PRId64 ", heads = %" PRId64 ", seq = %" PRId64
                          ", parts = %" PRId64 ": each must be at least 1",
                          c->batch, c->heads, c->seq, c->parts);
    if (c->head_dim < 1 || c->head_dim > 256)
        return fattn_fail(msg, FATTN_ERR_HEAD_DIM, "desc->head_dim = %" PRId64 " is outside 1..256",
                          c->head_dim);
    const fattn_dtype dts[2] = {c->part_dtype, c->dtype};
    for (int i = 0; i < 2; i++)
        if (dts[i] != FATTN_F32 && dts[i] != FATTN_F16 && dts[i] != FATTN_BF16)
            return fattn_fail(msg, FATTN_ERR_INVALID_ARGUMENT,
                              "desc->%s = %d is not FATTN_F32, FATTN_F16 or FATTN_BF16",
                              i ? "dtype" : "part_dtype", (int)dts[i]);
    if (c->o_part_stride < 0 || c->lse_part_stride < 0)
        return fattn_fail(msg, FATTN_ERR_STRIDE,
                          "desc->o_part_stride = %" PRId64 ", lse_part_stride = %" PRId64
                          ": part strides must be >= 0",
                          c->o_part_stride, c->lse_part_stride);
    if (c->o_part_stride > INT64_MAX / 64 || c->lse_part_stride > INT64_MAX / 64)
        return fattn_fail(msg, FATTN_ERR_OVERFLOW,
                          "desc->o_part_stride = %" PRId64 ", lse_part_stride = %" PRId64
                          ": a part stride above 2^57 elements is larger than any buffer",
                          c->o_part_stride, c->lse_part_stride);
    if (!mul4(c->batch, c->heads, c->seq, c->head_dim, &n) ||
        !mul4(c->batch, c->heads, c->seq, c->parts, &n))
        return fattn_fail(msg, FATTN_ERR_OVERFLOW, "the combine's sizes overflow a 64-bit integer");
    return FATTN_OK;
}

/* The range of every part together: part 0's tensor and the last part's
 * (the same view moved by (parts - 1) * stride) are both checked, and with
 * non-negative strides every part between lies in [first of 0, last of the
 * last]. */
static fattn_status check_parts(fattn_context *ctx, const want_ *w, const fattn_tensor *user,
                                int64_t parts, int64_t stride, fattn_tensor *t0, range_ *all) {
    fattn_status st = check_tensor(ctx, w, user, t0, all);
    if (st != FATTN_OK || parts == 1 || all->empty) return st;
    fattn_tensor last = *t0;
    int64_t shift;
    range_ rl;
    if (__builtin_mul_overflow(parts - 1, stride, &shift) ||
        __builtin_add_overflow(last.offset, shift, &last.offset))
        return fattn_ctx_fail(ctx, FATTN_ERR_OVERFLOW,
                              "%s: the last part's offset overflows 64 bits", w->name);
    fattn_tensor t;
    if ((st = check_tensor(ctx, w, &last, &t, &rl)) != FATTN_OK) return st;
    all->last = rl.last;
    return FATTN_OK;
}

fattn_status fattn_build_combine(fattn_context *ctx, const fattn_combine_desc *desc,
                                 const fattn_tensor *o_parts, const fattn_tensor *lse_parts,
                                 const fattn_tensor *o, const fattn_tensor *lse, fattn_problem *p) {
    static const fattn_combine_desc c0 = FATTN_COMBINE_DESC_INIT;
    fattn_combine_desc c = c0;
    fattn_status st;
    if (!desc) return fattn_ctx_fail(ctx, FATTN_ERR_NULL_POINTER, "desc is NULL");
    if ((st = fattn_ext_read(&c, sizeof c, desc, COMBINE_OLDER, "desc", "fattn_combine_desc",
                             &ctx->msg)) ||
        (st = check_combine_desc(&c, &ctx->msg)))
        return st;
    const int64_t B = c.batch, H = c.heads, S = c.seq, D = c.head_dim;
    const want_ wpo = {.name = "o_parts",
                       .dtype = c.part_dtype,
                       .alt = c.part_dtype,
                       .dtype_why = " (desc->part_dtype)",
                       .shape = SHAPE_DATA,
                       .ext = {B, H, S, D}};
    const want_ wpl = {.name = "lse_parts",
                       .dtype = FATTN_F32,
                       .alt = FATTN_F32,
                       .dtype_why = " (log-sum-exp is float32)",
                       .shape = SHAPE_ROWS,
                       .ext = {B, H, S, 1}};
    const want_ wo = {.name = "o",
                      .dtype = c.dtype,
                      .alt = c.dtype,
                      .dtype_why = " (desc->dtype)",
                      .shape = SHAPE_DATA,
                      .ext = {B, H, S, D},
                      .output = 1};
    const want_ wl = {.name = "lse",
                      .dtype = FATTN_F32,
                      .alt = FATTN_F32,
                      .dtype_why = " (log-sum-exp is float32)",
                      .shape = SHAPE_ROWS,
                      .ext = {B, H, S, 1},
                      .output = 1};
    fattn_tensor tpo, tpl, to, tl;
    range_ rpo, rpl, ro, rl;
    if ((st = check_parts(ctx, &wpo, o_parts, c.parts, c.o_part_stride, &tpo, &rpo)) ||
        (st = check_parts(ctx, &wpl, lse_parts, c.parts, c.lse_part_stride, &tpl, &rpl)) ||
        (st = check_tensor(ctx, &wo, o, &to, &ro)) ||
        (lse && (st = check_tensor(ctx, &wl, lse, &tl, &rl))))
        return st;
    const range_ *outs[2] = {&ro, lse ? &rl : NULL}, *ins[2] = {&rpo, &rpl};
    static const char *const out_names[2] = {"o", "lse"}, *const in_names[2] = {"o_parts",
                                                                                "lse_parts"};
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 2; j++)
            if (outs[i] && ranges_meet(outs[i], ins[j]))
                return fattn_ctx_fail(ctx, FATTN_ERR_INVALID_ARGUMENT,
                                      "%s overlaps %s in the same memory", out_names[i],
                                      in_names[j]);
    if (lse && ranges_meet(&ro, &rl))
        return fattn_ctx_fail(ctx, FATTN_ERR_INVALID_ARGUMENT, "lse overlaps o in the same memory");
    memset(p, 0, sizeof *p);
    p->op = FATTN_OP_COMBINE;
    p->batch = B;
    p->heads_q = p->heads_kv = H;
    p->seq_q = S;
    p->head_dim = p->head_dim_v = D;
    p->var.window_left = p->var.window_right = -1; /* no variants (var.on 0) */
    p->dtype = c.dtype;
    p->tune = ctx->tune;
    p->has_operands = 1;
    p->o = operand(&to);
    p->has_lse = lse != NULL;
    if (lse) p->lse = operand(&tl);
    p->parts = c.parts;
    p->part_dtype = c.part_dtype;
    p->part_o = operand(&tpo);
    p->part_lse = operand(&tpl);
    p->part_o_stride = c.o_part_stride;
    p->part_lse_stride = c.lse_part_stride;
    return FATTN_OK;
}

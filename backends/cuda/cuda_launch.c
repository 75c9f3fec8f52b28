/* The CUDA backend's launch layer: a problem becomes the kernels' arguments
 * (kernels_cu/params.h), and a plan becomes one launch of its kernel on the
 * context's stream. Nothing here decides (cuda_plan.c did), allocates or
 * synchronises. */
#include <math.h>
#include <string.h>

#include "cuda_common.h"

/* An operand's first element, or NULL for an absent operand (K and V may be
 * absent when seq_kv = 0). */
static const void *at(const fattn_operand *op, size_t es) {
    return op->mem ? (const char *)cuda_ptr(op) + (size_t)op->offset * es : NULL;
}

/* The kernels keep the causal offset in an int. Clamped into [-seq_q,
 * seq_kv - 1] it changes no mask (an offset >= seq_kv - 1 shows every key
 * to every row, one <= -seq_q none; params.h), and with both sequences
 * below 2^31 (the planner's check) that range fits an int. */
static int kernel_offset(const fattn_problem *p) {
    if (!p->causal) return 0;
    int64_t off = p->causal_offset;
    if (off > p->seq_kv - 1) off = p->seq_kv - 1;
    if (off < -p->seq_q) off = -p->seq_q;
    return (int)off;
}

/* An int32 index table's first element, NULL when absent. */
static const int32_t *table(const fattn_operand *t) {
    return t->mem ? (const int32_t *)cuda_ptr(t) + t->offset : NULL;
}

/* Page sizes and counts are int64 in the problem, ints in the kernels,
 * whose keys are below 2^31: clamped to 2^31 - 1, a page still holds every
 * key it held, and a sequence still reaches every key it reached. */
static int clamp_int(int64_t x) { return x > FATTN_INT32_MAX ? (int)FATTN_INT32_MAX : (int)x; }

/* The ragged part of the arguments (src/seam/backend.h, fattn_ragged):
 * tables at their offsets, their strides, and the context's fault word. */
static void ragged_args(cuda_state *s, const fattn_problem *p, fattn_cuda_ragged *r) {
    const fattn_ragged *g = &p->rag;
    r->on = 1;
    r->cu_q = table(&g->cu_seqlens_q);
    r->cu_kv = table(&g->cu_seqlens_kv);
    r->used = table(&g->seqused_kv);
    r->table = table(&g->block_table);
    r->cu_q_s = g->cu_seqlens_q.stride_seq;
    r->cu_kv_s = g->cu_seqlens_kv.stride_seq;
    r->used_s = g->seqused_kv.stride_seq;
    r->table_sb = g->block_table.stride_batch;
    r->table_ss = g->block_table.stride_seq;
    r->total_q = g->total_q;
    r->total_kv = g->total_kv;
    r->num_pages = g->num_pages;
    r->page_size = clamp_int(g->page_size);
    r->pages_per_seq = clamp_int(g->pages_per_seq);
    r->top_left = g->top_left;
    r->added = (int)g->keys_added; /* at most seq_kv, below 2^31 */
    r->fault = s->fault;
    /* The launch that follows may record a fault: the next check reads the
     * word. A launch captured into a CUDA graph may record one at any replay,
     * so from then on every check does. */
    enum cudaStreamCaptureStatus cap = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(s->stream, &cap) != cudaSuccess) cudaGetLastError();
    if (s->fault_armed < 2) s->fault_armed = cap == cudaStreamCaptureStatusActive ? 2 : 1;
}

/* A window side for the kernels: -1 (unbounded) stays; a side wider than
 * seq_q + seq_kv hides no key, so clamping there keeps every mask and
 * bounds the kernels' int64 sums (params.h). */
static int64_t window_side(const fattn_problem *p, int64_t w) {
    return w > p->seq_q + p->seq_kv ? p->seq_q + p->seq_kv : w;
}

/* The accurate softcap's polynomials (params.h, fattn_cuda_var.cap_poly):
 * tanh(x) = x + x^3 (q0 + q1 x^2 + ...) on |x| <= x_max, minimax fits of
 * absolute error at most 1.9e-7 (2.5e-7 evaluated in float, as the ex2/rcp
 * form's few 1e-7), with x = g s, g = scale / softcap, and softcap log2(e)
 * and the powers of g folded into the coefficients. Each tier is the
 * fewest terms that reach that error on its range, so a kernel takes the
 * first whose range holds all of a warp's scores: a model whose logits
 * stay within 0.1 softcap (5 of Gemma 2's 50) pays two terms. Where a
 * folded coefficient would leave float's normal range (an extreme scale
 * or cap), no score takes that tier. */
static void cap_poly(const fattn_problem *p, fattn_cuda_var *v) {
    static const struct {
        double x_max, q[FATTN_CUDA_CAP_POLY_TERMS - 1];
    } fit[FATTN_CUDA_CAP_TIERS] = {
        {0.1, {-3.321666969e-01}},
        {0.28, {-3.331751781e-01, 1.273114335e-01}},
        {0.5, {-3.332645893e-01, 1.318585128e-01, -4.422894120e-02}},
    };
    for (int t = 0; t < FATTN_CUDA_CAP_TIERS; t++) v->cap_poly_smax[t] = -1.0f;
    if (!(v->softcap > 0.0f)) return;
    const double g = (double)p->scale / v->softcap, g2 = g * g;
    for (int t = 0; t < FATTN_CUDA_CAP_TIERS; t++) {
        double c = v->softcap * 1.4426950408889634 * g; /* c2 g^(2k + 1) */
        int ok = 1;
        for (int k = 0; k < t + 2; k++) {
            const double r = k ? c * fit[t].q[k - 1] : c;
            ok = ok && fabs(r) >= 1e-30 && fabs(r) <= 1e30;
            v->cap_poly[t][k] = ok ? (float)r : 0.0f;
            c *= g2;
        }
        const double smax = fit[t].x_max / g; /* < 0 for a negative scale: the ex2/rcp form */
        if (ok && smax < 1e15) v->cap_poly_smax[t] = (float)smax;
    }
}

/* The variants' part of the arguments (params.h, fattn_cuda_var). */
static void variant_args(const fattn_problem *p, fattn_cuda_var *v) {
    const fattn_variants *g = &p->var;
    v->on = 1;
    v->window_left = window_side(p, g->window_left);
    v->window_right = window_side(p, g->window_right);
    v->softcap = g->softcap > 0.0f ? g->softcap : 0.0f;
    v->alibi = (const float *)at(&g->alibi, sizeof(float));
    v->alibi_sb = g->alibi.stride_batch, v->alibi_sh = g->alibi.stride_head;
    v->sinks = (const float *)at(&g->sinks, sizeof(float));
    v->sinks_sh = g->sinks.stride_head;
    v->bias = at(&g->bias, (size_t)fattn_esize(g->bias_dtype));
    v->bias_sb = g->bias.stride_batch, v->bias_sh = g->bias.stride_head;
    v->bias_ss = g->bias.stride_seq, v->bias_sd = g->bias_stride_dim;
    v->bias_dtype = g->bias_dtype;
    v->scale = p->scale;
    v->fast_tanh = (p->flags & FATTN_FLAG_FAST_SOFTCAP) != 0;
    cap_poly(p, v);
}

void cuda_args(cuda_state *s, const fattn_problem *p, fattn_cuda_args *a) {
    const size_t es = (size_t)fattn_esize(p->dtype);
    memset(a, 0, sizeof *a);
    a->q = at(&p->q, es);
    a->k = at(&p->k, es);
    a->v = at(&p->v, es);
    a->o = (void *)at(&p->o, es);
    a->lse = p->has_lse ? (float *)at(&p->lse, sizeof(float)) : NULL;
    a->q_sb = p->q.stride_batch, a->q_sh = p->q.stride_head, a->q_ss = p->q.stride_seq;
    a->k_sb = p->k.stride_batch, a->k_sh = p->k.stride_head, a->k_ss = p->k.stride_seq;
    a->v_sb = p->v.stride_batch, a->v_sh = p->v.stride_head, a->v_ss = p->v.stride_seq;
    a->o_sb = p->o.stride_batch, a->o_sh = p->o.stride_head, a->o_ss = p->o.stride_seq;
    a->l_sb = p->lse.stride_batch, a->l_sh = p->lse.stride_head, a->l_ss = p->lse.stride_seq;
    a->batch = p->batch;
    a->heads_q = p->heads_q;
    a->group = p->heads_q / p->heads_kv;
    a->seq_q = (int)p->seq_q; /* below 2^31: the planner checks */
    a->seq_kv = (int)p->seq_kv;
    a->head_dim = (int)p->head_dim;
    a->scale_log2 = p->scale_log2;
    a->causal = p->causal;
    a->causal_offset = kernel_offset(p);
    a->dtype = p->dtype;
    if (p->rag.on) ragged_args(s, p, &a->rag);
    /* Without variants the window is unbounded for the kernels that read
     * it regardless (head_dim_v runs the tensor-core kernel's variant
     * family). */
    a->var.window_left = a->var.window_right = -1;
    if (p->var.on) variant_args(p, &a->var);
    a->head_dim_v = (int)p->head_dim_v; /* 1..256 */
}

fattn_status cuda_run_zero(cuda_state *s, const fattn_cuda_args *a, fattn_msg *msg) {
    const cudaError_t err = fattn_cuda_zero_output(a, s->stream);
    return err == cudaSuccess ? FATTN_OK
                              : cuda_fail(msg, err, "the zero-output kernel (seq_kv = 0)");
}

/* The device current and the arguments built: what every run starts with. */
static fattn_status begin(cuda_state *s, const fattn_problem *p, fattn_cuda_args *a,
                          fattn_msg *msg) {
    fattn_status st = cuda_use(s, msg);
    if (st == FATTN_OK) cuda_args(s, p, a);
    return st;
}

/* A tiled tensor-core kernel (launch) on the plan's bucket; what: its name
 * for a failure's message. */
static fattn_status run_tiled(void *state, const fattn_problem *p, const fattn_plan *plan,
                              cudaError_t (*launch)(const fattn_cuda_args *, int, cudaStream_t),
                              const char *what, fattn_msg *msg) {
    cuda_state *s = state;
    const cuda_plan *cp = FATTN_PLAN_AREA(plan, const cuda_plan);
    fattn_cuda_args a;
    fattn_status st = begin(s, p, &a, msg);
    if (st != FATTN_OK) return st;
    if (p->seq_kv == 0) return cuda_run_zero(s, &a, msg);
    const cudaError_t err = launch(&a, cp->dpad, s->stream);
    return err == cudaSuccess ? FATTN_OK : cuda_fail(msg, err, what);
}

fattn_status cuda_run_mma(void *state, const fattn_problem *p, const fattn_plan *plan,
                          fattn_msg *msg) {
    return run_tiled(state, p, plan, fattn_cuda_flash_mma, "the tensor-core attention kernel", msg);
}

fattn_status cuda_run_wgmma(void *state, const fattn_problem *p, const fattn_plan *plan,
                            fattn_msg *msg) {
#if FATTN_CUDA_WGMMA
    return run_tiled(state, p, plan, fattn_cuda_flash_wgmma, "the wgmma attention kernel", msg);
#else
    (void)state, (void)p, (void)plan; /* never planned: cuda_plan.c declines it */
    return fattn_fail(msg, FATTN_ERR_UNSUPPORTED,
                      "this build has no wgmma kernel (FATTN_CUDA_WGMMA=OFF)");
#endif
}

fattn_status cuda_run_simt(void *state, const fattn_problem *p, const fattn_plan *plan,
                           fattn_msg *msg) {
    cuda_state *s = state;
    const cuda_plan *cp = FATTN_PLAN_AREA(plan, const cuda_plan);
    fattn_cuda_args a;
    fattn_status st = begin(s, p, &a, msg);
    if (st != FATTN_OK) return st;
    if (p->seq_kv == 0) return cuda_run_zero(s, &a, msg);
    const cudaError_t err = fattn_cuda_flash_simt(&a, cp->dpad, cp->small, s->stream);
    return err == cudaSuccess ? FATTN_OK : cuda_fail(msg, err, "the CUDA-core attention kernel");
}

fattn_status cuda_append(void *state, const fattn_problem *p, fattn_msg *msg) {
    cuda_state *s = state;
    fattn_cuda_args a;
    fattn_status st = begin(s, p, &a, msg);
    if (st != FATTN_OK) return st;
    const size_t es = (size_t)fattn_esize(p->dtype);
    const fattn_cuda_append_args n = {
        .k_new = at(&p->k_new, es),
        .v_new = at(&p->v_new, es),
        .kn_sb = p->k_new.stride_batch,
        .kn_sh = p->k_new.stride_head,
        .kn_ss = p->k_new.stride_seq,
        .vn_sb = p->v_new.stride_batch,
        .vn_sh = p->v_new.stride_head,
        .vn_ss = p->v_new.stride_seq,
        .heads_kv = p->heads_kv,
        .seq_new = (int)p->seq_new, /* at most seq_kv, which the planner kept below 2^31 */
    };
    const cudaError_t err = fattn_cuda_append(&a, &n, s->stream);
    return err == cudaSuccess ? FATTN_OK : cuda_fail(msg, err, "the cache append kernel");
}

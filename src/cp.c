/* Context parallelism (fattn.h, "Context parallelism"): one rank's part of
 * a sequence spread over R ranks. The step machine here runs a rank's
 * forward calls for each slice it holds in turn (cp_plan.c says which) and
 * merges their partial results with fattn_combine; two drivers feed it
 * slices: fattn_cp_forward through the backend's transport (NCCL on CUDA),
 * fattn_cp_forward_local through the host for ranks in one process. Only
 * public operations run on the device, so every backend can stand in for a
 * rank.
 *
 * Partial results live in three slots of the workspace, [batch, heads_q,
 * L, head_dim_v] in the dtype, with their lse: acc (the merged result),
 * part (a call's) and tmp. A call whose rows are all new writes into acc;
 * otherwise into part, then acc and part merge into tmp, and tmp is copied
 * back to acc (a one-part combine, exact). */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "cp.h"

int fattn_cp_skip_transfers = 0;

#define CP_ALIGN 256
#define TENSOR_OLDER FATTN_OLDER(sizeof(fattn_tensor))
#define CP_DESC_OLDER FATTN_OLDER(sizeof(fattn_cp_desc))
#define CP_INFO_OLDER FATTN_OLDER(sizeof(fattn_cp_info))

struct fattn_cp {
    fattn_context *ctx;
    void *link; /* the backend's transport, from cp_open; NULL: solo */
    int ranks, rank;
    fattn_buffer *ws;
    fattn_cp_info info;
};

struct cp_run {
    fattn_context *ctx;
    fattn_cp_desc cd;
    fattn_request r;
    int ranks, rank;
    int64_t L, B, Hq, Hkv, D, Dv;
    fattn_dtype dt;
    size_t es;
    fattn_tensor q, k, v, o, lse;
    int has_lse;
    cp_mask gm;
    /* The workspace: the slots, and where the slices go. */
    fattn_buffer *ws;
    uint64_t o_base, l_base, kv_base, v_base, k_bytes, v_bytes, ws_bytes;
    int64_t slot_o, slot_l; /* elements per slot */
    int kv_slots;           /* 2 (ring) or ranks (all-gather) */
    fattn_cp_transfer transfer;
    int init[2]; /* a chunk's rows hold a result in acc */
    int done[2]; /* a chunk's rows are in the caller's O and lse */
    int64_t calls;
};

static fattn_status check_layout_args(fattn_context *ctx, fattn_cp_layout layout, int ranks,
                                      int rank, int64_t seq_total);

static uint64_t up(uint64_t x) { return (x + CP_ALIGN - 1) / CP_ALIGN * CP_ALIGN; }

static fattn_status read_tensor(fattn_context *ctx, const fattn_tensor *user, const char *name,
                                fattn_tensor *t) {
    static const fattn_tensor t0 = FATTN_TENSOR_INIT;
    *t = t0;
    return fattn_ext_read(t, sizeof *t, user, TENSOR_OLDER, name, "fattn_tensor", &ctx->msg);
}

/* Whether t's elements of shape [b, h, s, d] fill one span without gaps or
 * overlap: its strides, sorted, are the running products of the sizes. */
static int dense(const fattn_tensor *t, int64_t b, int64_t h, int64_t s, int64_t d) {
    int64_t ext[4] = {b, h, s, d}, str[4] = {t->stride_batch, t->stride_head, t->stride_seq, 1};
    int used[4] = {0, 0, 0, 0};
    int64_t want = 1;
    for (int n = 0; n < 4; n++) {
        int best = -1;
        for (int i = 0; i < 4; i++)
            if (!used[i] && ext[i] > 1 && (best < 0 || str[i] < str[best])) best = i;
        if (best < 0) break;
        if (str[best] != want) return 0;
        used[best] = 1;
        want *= ext[best];
    }
    return 1;
}

/* The slot views: O-shaped [B, Hq, L, Dv] and lse [B, Hq, L], contiguous. */
static fattn_tensor slot_o(const cp_run *x, int slot, int64_t row) {
    fattn_tensor t = FATTN_TENSOR_INIT;
    t.buffer = x->ws;
    t.dtype = x->dt;
    t.stride_seq = x->Dv;
    t.stride_head = x->L * x->Dv;
    t.stride_batch = x->Hq * x->L * x->Dv;
    t.offset = (int64_t)(x->o_base / x->es) + slot * x->slot_o + row * x->Dv;
    return t;
}

static fattn_tensor slot_l(const cp_run *x, int slot, int64_t row) {
    fattn_tensor t = FATTN_TENSOR_INIT;
    t.buffer = x->ws;
    t.dtype = FATTN_F32;
    t.stride_seq = 1;
    t.stride_head = x->L;
    t.stride_batch = x->Hq * x->L;
    t.offset = (int64_t)(x->l_base / sizeof(float)) + slot * x->slot_l + row;
    return t;
}

static fattn_tensor rows(fattn_tensor t, int64_t row) {
    t.offset += row * t.stride_seq;
    return t;
}

enum { ACC, PART, TMP };

/* Merges `parts` (1: a copy) slots from `from` on, rows [row, row + n),
 * into O-shaped o and lse (lse may be NULL). */
static fattn_status combine(cp_run *x, int from, int parts, int64_t row, int64_t n,
                            const fattn_tensor *o, const fattn_tensor *lse) {
    fattn_combine_desc c = FATTN_COMBINE_DESC_INIT;
    c.batch = x->B;
    c.heads = x->Hq;
    c.seq = n;
    c.head_dim = x->Dv;
    c.parts = parts;
    c.part_dtype = x->dt;
    c.dtype = x->dt;
    c.o_part_stride = x->slot_o;
    c.lse_part_stride = x->slot_l;
    const fattn_tensor po = slot_o(x, from, row), pl = slot_l(x, from, row);
    return fattn_combine(x->ctx, &c, &po, &pl, o, lse);
}

/* Part's rows [row, row + n) go into acc, merged with what acc holds when
 * `merge`, else copied; with `final`, into the caller's O and lse instead
 * (the rows' last contribution). */
static fattn_status fold(cp_run *x, int64_t row, int64_t n, int merge, int final) {
    const fattn_tensor uo = rows(x->o, row), ul = rows(x->lse, row);
    const fattn_tensor ao = slot_o(x, ACC, row), al = slot_l(x, ACC, row);
    const fattn_tensor *o = final ? &uo : &ao, *l = final ? (x->has_lse ? &ul : NULL) : &al;
    if (!merge) return combine(x, PART, 1, row, n, o, l);
    if (final) return combine(x, ACC, 2, row, n, o, l);
    const fattn_tensor to = slot_o(x, TMP, row), tl = slot_l(x, TMP, row);
    fattn_status st = combine(x, ACC, 2, row, n, &to, &tl);
    return st ? st : combine(x, TMP, 1, row, n, &ao, &al);
}

/* Whether call c's rows hold chunk a's whole. */
static int covers(const cp_call *c, const cp_chunk *a) {
    return c->q_row <= a->local0 && a->local0 + a->len <= c->q_row + c->q_len;
}

/* One step: this rank's queries against the slice of rank src; `last`:
 * the rank's final step, whose last call on a chunk writes the caller's O. */
static fattn_status cp_step(cp_run *x, int src, const cp_kv *kv, int last) {
    cp_call calls[CP_MAX_CALLS];
    cp_chunk qc[2];
    cp_chunks(x->cd.layout, x->ranks, x->rank, x->L, qc);
    const int n = cp_plan_step(x->cd.layout, x->ranks, x->rank, src, x->L, x->gm, calls);
    for (int i = 0; i < n; i++) {
        const cp_call *c = &calls[i];
        fattn_attention_desc d = x->r.d;
        fattn_mask_desc m = x->r.mask;
        d.seq_q = c->q_len;
        d.seq_kv = c->k_len;
        d.causal = c->causal ? FATTN_CAUSAL_BOTTOM_RIGHT : FATTN_CAUSAL_NONE;
        d.workspace = NULL;
        m.window_left = c->causal ? -1 : c->left;
        m.window_right = c->causal ? -1 : c->right;
        if (!c->sinks) m.sinks = NULL;
        d.mask = m.window_left < 0 && m.window_right < 0 && m.softcap == 0.f && !m.sinks ? NULL : &m;
        /* Per chunk: whether its rows held a result, and whether this call
         * is their last (the final step, no later call on the chunk). */
        int fresh = 1, old = 1, all_final = 1, final[2] = {0, 0};
        for (int a = c->q_first; a <= c->q_last; a++) {
            fresh &= !x->init[a], old &= x->init[a];
            final[a] = last && covers(c, &qc[a]);
            for (int j = i + 1; j < n; j++)
                if (calls[j].q_first <= a && a <= calls[j].q_last) final[a] = 0;
            all_final &= final[a];
        }
        const int whole = c->q_len == qc[c->q_last].local0 + qc[c->q_last].len - qc[c->q_first].local0;
        if (!old && !whole)
            return fattn_ctx_fail(x->ctx, FATTN_ERR_INTERNAL,
                                  "context parallelism: a trimmed call reached rows no call began");
        const fattn_tensor qv = rows(x->q, c->q_row), kv_k = rows(kv->k, c->k_row),
                           kv_v = rows(kv->v, c->k_row);
        fattn_tensor ov = slot_o(x, fresh ? ACC : PART, c->q_row),
                     lv = slot_l(x, fresh ? ACC : PART, c->q_row);
        const fattn_tensor *lp = &lv;
        if (fresh && all_final) { /* the rows' only call: straight to the caller */
            ov = rows(x->o, c->q_row), lv = rows(x->lse, c->q_row);
            lp = x->has_lse ? &lv : NULL;
        }
        fattn_status st = fattn_forward(x->ctx, &d, &qv, &kv_k, &kv_v, &ov, lp);
        if (st) return st;
        x->calls++;
        for (int a = c->q_first; a <= c->q_last; a++) {
            if (!fresh) {
                /* Rows that held a result merge, new ones are copied. */
                const int64_t lo = qc[a].local0 > c->q_row ? qc[a].local0 : c->q_row;
                const int64_t e1 = qc[a].local0 + qc[a].len, e2 = c->q_row + c->q_len;
                if ((st = fold(x, lo, (e1 < e2 ? e1 : e2) - lo, x->init[a], final[a]))) return st;
            }
            x->init[a] = 1;
            x->done[a] |= final[a] && (!fresh || all_final);
        }
    }
    return FATTN_OK;
}

/* The slice view at K/V slot `slot` of the workspace: the rank's own
 * strides on the bytes that arrived. The K slots lie back to back, then
 * the V slots, so that an all-gather's R spans are one range each. */
static cp_kv kv_slot(const cp_run *x, int slot) {
    cp_kv s = {x->k, x->v};
    s.k.buffer = x->ws;
    s.k.offset = (int64_t)((x->kv_base + (uint64_t)slot * x->k_bytes) / x->es);
    s.v.buffer = x->ws;
    s.v.offset = (int64_t)((x->v_base + (uint64_t)slot * x->v_bytes) / x->es);
    return s;
}

/* Reads and checks a rank's call, picks the transfer and sizes the
 * workspace (x->ws_bytes); allocates nothing. */
static fattn_status cp_prepare(cp_run *x, fattn_context *ctx, int ranks, int rank,
                               const fattn_cp_desc *cd, const fattn_attention_desc *desc,
                               const fattn_tensor *q, const fattn_tensor *k, const fattn_tensor *v,
                               const fattn_tensor *o, const fattn_tensor *lse) {
    static const fattn_cp_desc cd0 = FATTN_CP_DESC_INIT;
    fattn_status st;
    memset(x, 0, sizeof *x);
    x->ctx = ctx;
    x->ranks = ranks;
    x->rank = rank;
    x->cd = cd0;
    if (!cd) return fattn_ctx_fail(ctx, FATTN_ERR_NULL_POINTER, "cp_desc is NULL");
    if ((st = fattn_ext_read(&x->cd, sizeof x->cd, cd, CP_DESC_OLDER, "cp_desc", "fattn_cp_desc",
                             &ctx->msg)))
        return st;
    if (x->cd.layout != FATTN_CP_CONTIGUOUS && x->cd.layout != FATTN_CP_ZIGZAG)
        return fattn_ctx_fail(ctx, FATTN_ERR_INVALID_ARGUMENT,
                              "cp_desc->layout = %d is not a fattn_cp_layout", (int)x->cd.layout);
    if (x->cd.transfer < FATTN_CP_TRANSFER_AUTO || x->cd.transfer > FATTN_CP_TRANSFER_ALLGATHER)
        return fattn_ctx_fail(ctx, FATTN_ERR_INVALID_ARGUMENT,
                              "cp_desc->transfer = %d is not a fattn_cp_transfer",
                              (int)x->cd.transfer);
    if (!q || !k || !v || !o)
        return fattn_ctx_fail(ctx, FATTN_ERR_NULL_POINTER, "%s (the tensor) is NULL",
                              !q ? "q" : !k ? "k" : !v ? "v" : "o");
    if ((st = fattn_read_request(desc, &x->r, &ctx->msg))) return st;
    const fattn_attention_desc *d = &x->r.d;
    if (x->r.has_varlen || x->r.has_paged || x->r.has_append)
        return fattn_ctx_fail(ctx, FATTN_ERR_UNSUPPORTED,
                              "context parallelism takes dense slices: desc->%s must be NULL",
                              x->r.has_varlen ? "varlen" : x->r.has_paged ? "paged_kv" : "append");
    if (x->r.has_mask && (x->r.mask.alibi_slopes || x->r.mask.bias))
        return fattn_ctx_fail(ctx, FATTN_ERR_UNSUPPORTED,
                              "context parallelism does not take desc->mask->%s (it depends on "
                              "positions across slices); the window, softcap and sinks work",
                              x->r.mask.alibi_slopes ? "alibi_slopes" : "bias");
    if (d->seq_q != d->seq_kv)
        return fattn_ctx_fail(ctx, FATTN_ERR_INVALID_SIZE,
                              "desc->seq_q = %" PRId64 " and seq_kv = %" PRId64
                              ": both are the rank's slice length, so they must be equal",
                              d->seq_q, d->seq_kv);
    if (x->cd.layout == FATTN_CP_ZIGZAG && d->seq_q % 2)
        return fattn_ctx_fail(ctx, FATTN_ERR_INVALID_SIZE,
                              "desc->seq_q = %" PRId64 " is odd: the zigzag layout holds two "
                              "chunks of the same length per rank",
                              d->seq_q);
    if (d->seq_q > FATTN_MAX_EXTENT / ranks)
        return fattn_ctx_fail(ctx, FATTN_ERR_OVERFLOW,
                              "the whole sequence, %d ranks x %" PRId64 " tokens, passes 2^48",
                              ranks, d->seq_q);
    /* Every tensor checked once, against the rank's whole slice. */
    fattn_problem p;
    fattn_request r2;
    if ((st = fattn_build_problem(ctx, FATTN_OP_FORWARD, desc, q, k, v, o, lse, &r2, &p)))
        return st;
    if ((st = read_tensor(ctx, q, "q", &x->q)) || (st = read_tensor(ctx, k, "k", &x->k)) ||
        (st = read_tensor(ctx, v, "v", &x->v)) || (st = read_tensor(ctx, o, "o", &x->o)))
        return st;
    x->has_lse = lse != NULL;
    if (lse && (st = read_tensor(ctx, lse, "lse", &x->lse))) return st;
    x->L = d->seq_q, x->B = d->batch, x->Hq = d->heads_q, x->Hkv = d->heads_kv;
    x->D = d->head_dim, x->Dv = d->head_dim_v, x->dt = d->dtype, x->es = fattn_dtype_size(d->dtype);
    if (!dense(&x->k, x->B, x->Hkv, x->L, x->D) || !dense(&x->v, x->B, x->Hkv, x->L, x->Dv))
        return fattn_ctx_fail(ctx, FATTN_ERR_UNSUPPORTED,
                              "context parallelism sends K and V as one span each: %s must be "
                              "dense (no gaps, as fattn_tensor_init lays it out)",
                              dense(&x->k, x->B, x->Hkv, x->L, x->D) ? "v" : "k");
    x->gm.left = x->r.has_mask ? x->r.mask.window_left : -1;
    x->gm.right = x->r.has_mask ? x->r.mask.window_right : -1;
    if (d->causal != FATTN_CAUSAL_NONE) x->gm.right = 0; /* seq_q == seq_kv: j <= i */

    x->k_bytes = (uint64_t)(x->B * x->Hkv * x->L * x->D) * x->es;
    x->v_bytes = (uint64_t)(x->B * x->Hkv * x->L * x->Dv) * x->es;
    const uint64_t q_bytes = (uint64_t)(x->B * x->Hq * x->L * x->D) * x->es;
    x->transfer = x->cd.transfer;
    if (x->transfer == FATTN_CP_TRANSFER_AUTO)
        x->transfer = (uint64_t)ranks * (x->k_bytes + x->v_bytes) <= q_bytes
                          ? FATTN_CP_TRANSFER_ALLGATHER
                          : FATTN_CP_TRANSFER_RING;
    x->kv_slots = ranks == 1 ? 0 : x->transfer == FATTN_CP_TRANSFER_ALLGATHER ? ranks : 2;
    x->slot_o = x->B * x->Hq * x->L * x->Dv;
    x->slot_l = x->B * x->Hq * x->L;
    x->o_base = 0;
    x->l_base = up(3 * (uint64_t)x->slot_o * x->es);
    x->kv_base = x->l_base + up(3 * (uint64_t)x->slot_l * sizeof(float));
    x->v_base = x->kv_base + up((uint64_t)x->kv_slots * x->k_bytes);
    x->ws_bytes = x->v_base + (uint64_t)x->kv_slots * x->v_bytes;
    return FATTN_OK;
}

/* Copies acc to the caller's O and lse, for the chunks no final call wrote. */
static fattn_status cp_finish(cp_run *x) {
    cp_chunk qc[2];
    const int n = cp_chunks(x->cd.layout, x->ranks, x->rank, x->L, qc);
    for (int a = 0; a < n; a++) {
        if (x->done[a]) continue;
        const fattn_tensor uo = rows(x->o, qc[a].local0), ul = rows(x->lse, qc[a].local0);
        fattn_status st = combine(x, ACC, 1, qc[a].local0, qc[a].len, &uo, x->has_lse ? &ul : NULL);
        if (st) return st;
    }
    return FATTN_OK;
}

/* ---- fattn_cp_forward over the backend's transport ------------------------ */

fattn_status fattn_cp_create_nccl(fattn_context *ctx, void *nccl_comm, fattn_cp **out) {
    if (!ctx) return fattn_ctx_fail(NULL, FATTN_ERR_NULL_POINTER, "ctx is NULL");
    fattn_ctx_clear(ctx);
    if (!out) return fattn_ctx_fail(ctx, FATTN_ERR_NULL_POINTER, "out is NULL");
    *out = NULL;
    if (!nccl_comm) return fattn_ctx_fail(ctx, FATTN_ERR_NULL_POINTER, "nccl_comm is NULL");
    if (!ctx->vt->cp_open)
        return fattn_ctx_fail(ctx, FATTN_ERR_UNSUPPORTED,
                              "the %s backend has no NCCL transport: context parallelism over "
                              "NCCL needs a CUDA context",
                              ctx->vt->name);
    fattn_cp *cp = calloc(1, sizeof *cp);
    if (!cp) return fattn_ctx_fail(ctx, FATTN_ERR_OUT_OF_MEMORY, "the context-parallel handle");
    fattn_status st = ctx->vt->cp_open(ctx->state, nccl_comm, &cp->link, &cp->ranks, &cp->rank,
                                       &ctx->msg);
    if (st == FATTN_OK && (cp->ranks < 1 || cp->ranks > CP_MAX_RANKS || cp->rank < 0 ||
                           cp->rank >= cp->ranks)) {
        ctx->vt->cp_close(ctx->state, cp->link);
        st = fattn_ctx_fail(ctx, FATTN_ERR_UNSUPPORTED,
                            "the communicator has rank %d of %d ranks; fattn takes 1..%d ranks",
                            cp->rank, cp->ranks, CP_MAX_RANKS);
    }
    if (st) {
        free(cp);
        return st;
    }
    cp->ctx = ctx;
    cp->info = (fattn_cp_info)FATTN_CP_INFO_INIT;
    cp->info.ranks = cp->ranks;
    cp->info.rank = cp->rank;
    *out = cp;
    return FATTN_OK;
}

void fattn_cp_free(fattn_cp *cp) {
    if (!cp) return;
    if (cp->ws) fattn_buffer_free(cp->ws);
    if (cp->link) cp->ctx->vt->cp_close(cp->ctx->state, cp->link);
    free(cp);
}

fattn_status fattn_cp_create_solo(fattn_context *ctx, int ranks, int rank, fattn_cp **out) {
    if (!ctx || !out) return fattn_ctx_fail(ctx, FATTN_ERR_NULL_POINTER, "ctx or out is NULL");
    fattn_status st = check_layout_args(ctx, FATTN_CP_CONTIGUOUS, ranks, rank, ranks);
    if (st) return st;
    fattn_cp *cp = calloc(1, sizeof *cp);
    if (!cp) return fattn_ctx_fail(ctx, FATTN_ERR_OUT_OF_MEMORY, "the context-parallel handle");
    cp->ctx = ctx, cp->ranks = ranks, cp->rank = rank;
    cp->info = (fattn_cp_info)FATTN_CP_INFO_INIT;
    cp->info.ranks = ranks, cp->info.rank = rank;
    *out = cp;
    return FATTN_OK;
}

/* A K or V span as the transport sees it. */
static fattn_cp_span span(const fattn_tensor *t, size_t es, uint64_t bytes) {
    return (fattn_cp_span){t->buffer->mem, (uint64_t)t->offset * es, bytes};
}

fattn_status fattn_cp_forward(fattn_cp *cp, const fattn_cp_desc *cp_desc,
                              const fattn_attention_desc *desc, const fattn_tensor *q,
                              const fattn_tensor *k, const fattn_tensor *v, const fattn_tensor *o,
                              const fattn_tensor *lse) {
    if (!cp) return fattn_ctx_fail(NULL, FATTN_ERR_NULL_POINTER, "cp is NULL");
    fattn_context *ctx = cp->ctx;
    const fattn_backend_vtable *vt = ctx->vt;
    fattn_ctx_clear(ctx);
    cp_run x;
    fattn_status st = cp_prepare(&x, ctx, cp->ranks, cp->rank, cp_desc, desc, q, k, v, o, lse);
    if (st) return st;
    if (!cp->ws || fattn_buffer_size(cp->ws) < x.ws_bytes) {
        if (cp->ws) fattn_buffer_free(cp->ws);
        cp->ws = NULL;
        if ((st = fattn_buffer_alloc(ctx, (size_t)x.ws_bytes, &cp->ws))) return st;
    }
    x.ws = cp->ws;
    const int R = cp->ranks, r = cp->rank;
    const int skip = fattn_cp_skip_transfers || !cp->link;
    const cp_kv own = {x.k, x.v};
    uint64_t sent = 0;
    if (R > 1 && x.transfer == FATTN_CP_TRANSFER_ALLGATHER) {
        const cp_kv g0 = kv_slot(&x, 0);
        const fattn_cp_span send[2] = {span(&x.k, x.es, x.k_bytes), span(&x.v, x.es, x.v_bytes)};
        /* Rank i's slice lands in slot i. */
        const fattn_cp_span recv[2] = {span(&g0.k, x.es, x.k_bytes), span(&g0.v, x.es, x.v_bytes)};
        if (!skip && (st = vt->cp_allgather(ctx->state, cp->link, 2, send, recv, &ctx->msg)))
            return st;
        sent = (uint64_t)(R - 1) * (x.k_bytes + x.v_bytes);
        if ((st = cp_step(&x, r, &own, R == 1))) return st;
        if (!skip && (st = vt->cp_wait(ctx->state, cp->link, &ctx->msg))) return st;
        for (int s = 1; s < R && !st; s++) {
            const int src = (r - s + R) % R;
            const cp_kv kv = skip ? own : kv_slot(&x, src);
            st = cp_step(&x, src, &kv, s == R - 1);
        }
    } else {
        cp_kv cur = own;
        for (int s = 0; s < R && !st; s++) {
            const int src = (r - s + R) % R;
            const cp_kv next = R > 1 ? kv_slot(&x, s % 2) : own;
            if (s < R - 1 && !skip) {
                const fattn_cp_span send[2] = {span(&cur.k, x.es, x.k_bytes),
                                               span(&cur.v, x.es, x.v_bytes)};
                const fattn_cp_span recv[2] = {span(&next.k, x.es, x.k_bytes),
                                               span(&next.v, x.es, x.v_bytes)};
                if ((st = vt->cp_sendrecv(ctx->state, cp->link, 2, send, recv, (r + 1) % R,
                                          (r - 1 + R) % R, &ctx->msg)))
                    return st;
                sent += x.k_bytes + x.v_bytes;
            }
            if ((st = cp_step(&x, src, skip ? &own : &cur, s == R - 1))) return st;
            if (s < R - 1 && !skip && (st = vt->cp_wait(ctx->state, cp->link, &ctx->msg)))
                return st;
            cur = next;
        }
    }
    if (st || (st = cp_finish(&x))) return st;
    cp->info.transfer = x.transfer;
    cp->info.calls = x.calls;
    cp->info.workspace_bytes = fattn_buffer_size(cp->ws);
    cp->info.bytes_sent = sent;
    return FATTN_OK;
}

fattn_status fattn_cp_get_info(const fattn_cp *cp, fattn_cp_info *out) {
    if (!cp) return fattn_ctx_fail(NULL, FATTN_ERR_NULL_POINTER, "cp is NULL");
    if (!out) return fattn_ctx_fail(cp->ctx, FATTN_ERR_NULL_POINTER, "out is NULL");
    return fattn_ext_write(out, &cp->info, sizeof cp->info, CP_INFO_OLDER, "out", "fattn_cp_info",
                           &cp->ctx->msg);
}

/* ---- The in-process driver ------------------------------------------------ */

/* Copies `bytes` from one buffer to another through the host. */
static fattn_status host_copy(fattn_buffer *from, uint64_t from_off, fattn_buffer *to,
                              uint64_t to_off, uint64_t bytes, void **tmp, uint64_t *cap) {
    if (bytes > *cap) {
        void *p = realloc(*tmp, (size_t)bytes);
        if (!p) return fattn_ctx_fail(to->ctx, FATTN_ERR_OUT_OF_MEMORY, "the host staging copy");
        *tmp = p, *cap = bytes;
    }
    fattn_status st = fattn_buffer_read(from, (size_t)from_off, *tmp, (size_t)bytes);
    if (st) return st;
    return fattn_buffer_write(to, (size_t)to_off, *tmp, (size_t)bytes);
}

static fattn_status copy_kv(const cp_run *from, const cp_kv *src, const cp_run *to,
                            const cp_kv *dst, void **tmp, uint64_t *cap) {
    fattn_status st = host_copy(src->k.buffer, (uint64_t)src->k.offset * from->es, dst->k.buffer,
                                (uint64_t)dst->k.offset * to->es, from->k_bytes, tmp, cap);
    if (st) return st;
    return host_copy(src->v.buffer, (uint64_t)src->v.offset * from->es, dst->v.buffer,
                     (uint64_t)dst->v.offset * to->es, from->v_bytes, tmp, cap);
}

fattn_status fattn_cp_forward_local(fattn_context *const *ctxs, int ranks,
                                    const fattn_cp_desc *cp_desc,
                                    const fattn_attention_desc *desc,
                                    const fattn_tensor *const *q, const fattn_tensor *const *k,
                                    const fattn_tensor *const *v, const fattn_tensor *const *o,
                                    const fattn_tensor *const *lse, fattn_cp_info *info) {
    if (!ctxs || ranks < 1 || ranks > CP_MAX_RANKS || !q || !k || !v || !o)
        return fattn_ctx_fail(NULL, FATTN_ERR_INVALID_ARGUMENT, "bad in-process ranks");
    cp_run *x = calloc((size_t)ranks, sizeof *x);
    void *tmp = NULL;
    uint64_t cap = 0;
    fattn_status st = x ? FATTN_OK : fattn_ctx_fail(ctxs[0], FATTN_ERR_OUT_OF_MEMORY, "the ranks");
    for (int r = 0; r < ranks && !st; r++) {
        st = cp_prepare(&x[r], ctxs[r], ranks, r, cp_desc, desc, q[r], k[r], v[r], o[r],
                        lse ? lse[r] : NULL);
        if (!st) st = fattn_buffer_alloc(ctxs[r], (size_t)x[r].ws_bytes, &x[r].ws);
    }
    if (!st && x[0].transfer == FATTN_CP_TRANSFER_ALLGATHER && ranks > 1) {
        for (int r = 0; r < ranks && !st; r++)
            for (int i = 0; i < ranks && !st; i++) {
                const cp_kv own = {x[i].k, x[i].v}, dst = kv_slot(&x[r], i);
                st = copy_kv(&x[i], &own, &x[r], &dst, &tmp, &cap);
            }
        for (int s = 0; s < ranks && !st; s++)
            for (int r = 0; r < ranks && !st; r++) {
                const int src = (r - s + ranks) % ranks;
                const cp_kv own = {x[r].k, x[r].v}, g = kv_slot(&x[r], src);
                st = cp_step(&x[r], src, s ? &g : &own, s == ranks - 1);
            }
    } else if (!st) {
        for (int s = 0; s < ranks && !st; s++) {
            for (int r = 0; r < ranks && !st; r++) {
                const cp_kv own = {x[r].k, x[r].v}, cur = kv_slot(&x[r], (s + 1) % 2);
                st = cp_step(&x[r], (r - s + ranks) % ranks, s ? &cur : &own, s == ranks - 1);
            }
            /* Each rank passes what it computed on to the next, which
             * receives into its other slot. */
            for (int r = 0; r < ranks && !st && s < ranks - 1; r++) {
                const int to = (r + 1) % ranks;
                const cp_kv own = {x[r].k, x[r].v}, cur = kv_slot(&x[r], (s + 1) % 2),
                            dst = kv_slot(&x[to], s % 2);
                st = copy_kv(&x[r], s ? &cur : &own, &x[to], &dst, &tmp, &cap);
            }
        }
    }
    for (int r = 0; r < ranks && !st; r++) st = cp_finish(&x[r]);
    for (int r = 0; r < ranks && !st; r++) st = fattn_context_synchronize(ctxs[r]);
    if (!st && info) {
        info->ranks = ranks;
        info->rank = 0;
        info->transfer = x[0].transfer;
        info->calls = x[0].calls;
        info->workspace_bytes = x[0].ws_bytes;
        info->bytes_sent = 0;
    }
    for (int r = 0; x && r < ranks; r++)
        if (x[r].ws) fattn_buffer_free(x[r].ws);
    free(x);
    free(tmp);
    return st;
}

/* ---- The layouts' helpers --------------------------------------------------- */

static fattn_status check_layout_args(fattn_context *ctx, fattn_cp_layout layout, int ranks,
                                      int rank, int64_t seq_total) {
    if (layout != FATTN_CP_CONTIGUOUS && layout != FATTN_CP_ZIGZAG)
        return fattn_ctx_fail(ctx, FATTN_ERR_INVALID_ARGUMENT,
                              "layout = %d is not a fattn_cp_layout", (int)layout);
    if (ranks < 1 || ranks > CP_MAX_RANKS || rank < 0 || rank >= ranks)
        return fattn_ctx_fail(ctx, FATTN_ERR_INVALID_ARGUMENT,
                              "rank %d of %d ranks: ranks must be 1..%d and rank 0..ranks-1",
                              rank, ranks, CP_MAX_RANKS);
    const int64_t per = layout == FATTN_CP_ZIGZAG ? 2 * (int64_t)ranks : ranks;
    if (seq_total < per || seq_total % per || seq_total > FATTN_MAX_EXTENT)
        return fattn_ctx_fail(ctx, FATTN_ERR_INVALID_SIZE,
                              "seq_total = %" PRId64 " must be a positive multiple of %" PRId64
                              " (%s) up to 2^48",
                              seq_total, per,
                              layout == FATTN_CP_ZIGZAG ? "2 x ranks, for the zigzag layout"
                                                        : "the ranks");
    return FATTN_OK;
}

fattn_status fattn_cp_slices(fattn_cp_layout layout, int ranks, int rank, int64_t seq_total,
                             int64_t start[2], int64_t len[2], int *count) {
    fattn_ctx_clear(NULL);
    if (!start || !len || !count)
        return fattn_ctx_fail(NULL, FATTN_ERR_NULL_POINTER, "%s is NULL",
                              !start ? "start" : !len ? "len" : "count");
    fattn_status st = check_layout_args(NULL, layout, ranks, rank, seq_total);
    if (st) return st;
    cp_chunk c[2];
    *count = cp_chunks(layout, ranks, rank, seq_total / ranks, c);
    for (int i = 0; i < 2; i++) {
        start[i] = i < *count ? c[i].global0 : 0;
        len[i] = i < *count ? c[i].len : 0;
    }
    return FATTN_OK;
}

/* A copy as a one-part combine: every row's lse part is 0 (one float,
 * stride 0), so O = 1 * part / 1, exact in every dtype. */
fattn_status fattn_cp_shard(fattn_context *ctx, fattn_cp_layout layout, int ranks, int rank,
                            int64_t batch, int64_t heads, int64_t seq_total, int64_t dim,
                            const fattn_tensor *whole, const fattn_tensor *local, int to_local) {
    if (!ctx) return fattn_ctx_fail(NULL, FATTN_ERR_NULL_POINTER, "ctx is NULL");
    fattn_ctx_clear(ctx);
    if (!whole || !local)
        return fattn_ctx_fail(ctx, FATTN_ERR_NULL_POINTER, "%s is NULL", !whole ? "whole" : "local");
    fattn_status st = check_layout_args(ctx, layout, ranks, rank, seq_total);
    if (st) return st;
    fattn_tensor w, l;
    if ((st = read_tensor(ctx, whole, "whole", &w)) || (st = read_tensor(ctx, local, "local", &l)))
        return st;
    if (w.dtype != l.dtype)
        return fattn_ctx_fail(ctx, FATTN_ERR_DTYPE, "whole is %s but local is %s: one dtype",
                              fattn_dtype_name(w.dtype), fattn_dtype_name(l.dtype));
    fattn_buffer *zero = NULL;
    const float z = 0.f;
    if ((st = fattn_buffer_alloc(ctx, sizeof z, &zero)) ||
        (st = fattn_buffer_write(zero, 0, &z, sizeof z))) {
        if (zero) fattn_buffer_free(zero);
        return st;
    }
    fattn_tensor zl = FATTN_TENSOR_INIT;
    zl.buffer = zero;
    zl.stride_dim = 0;
    cp_chunk c[2];
    const int n = cp_chunks(layout, ranks, rank, seq_total / ranks, c);
    for (int i = 0; i < n && !st; i++) {
        fattn_combine_desc cd = FATTN_COMBINE_DESC_INIT;
        cd.batch = batch, cd.heads = heads, cd.seq = c[i].len, cd.head_dim = dim, cd.parts = 1;
        cd.part_dtype = cd.dtype = w.dtype;
        fattn_tensor ws = w, ls = l;
        ws.offset += c[i].global0 * w.stride_seq;
        ls.offset += c[i].local0 * l.stride_seq;
        st = to_local ? fattn_combine(ctx, &cd, &ws, &zl, &ls, NULL)
                      : fattn_combine(ctx, &cd, &ls, &zl, &ws, NULL);
    }
    fattn_buffer_free(zero);
    return st;
}

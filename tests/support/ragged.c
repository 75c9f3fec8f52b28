/* See ragged.h. Each sequence's Q, K and V are drawn first as small dense
 * arrays (the "logical" sequence the reference reads), then scattered into
 * the layout under test, so the reference never depends on the layout code.
 * What no sequence owns is filled so that reading it shows: Q and K rows
 * outside every sequence are NaN, V rows past a sequence's used keys hold
 * a large finite value (kernels that multiply a whole tile by weights of 0
 * may load them, fattn.h allows that), pages no table entry uses are NaN
 * in K and V, and table entries past a sequence's used pages are garbage. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "half.h"
#include "harness.h"
#include "ragged.h"
#include "reference.h"
#include "test_util.h"

enum {
    GUARD = 16,      /* elements before and after O and lse */
    EXTRA_Q = 3,     /* packed Q rows after the last sequence */
    EXTRA_KV = 3,    /* packed K/V rows after each sequence's used keys (with `used`) */
    ROW_PAD = 3,     /* padding after each row in the BSHD layout */
    SPARE_PAGES = 3, /* pages no sequence uses */
};
#define V_GARBAGE 1000.0f

typedef struct geo {
    int64_t offset, sb, sh, ss;
} geo;

typedef struct hbuf {
    void *data;
    int64_t elems;
    size_t esize;
    fattn_buffer *dev;
} hbuf;

struct rag_problem {
    fattn_context *ctx;
    rag_case c;
    fattn_dtype dt;
    uint64_t seed;
    int64_t B, Hq, Hk, D, seq_q, seq_kv, qb, qs, total_q, total_kv;
    int64_t page_size, pages_per_seq, table_stride, num_pages;
    int packed_q;
    fattn_attention_desc desc;
    fattn_varlen_desc vl;
    fattn_paged_kv_desc pg;
    hbuf q, k, v, o, l, cu_q, cu_kv, used, table;
    geo gq, gk, go, gl;
    fattn_tensor tq, tk, tv, to, tl, tcu_q, tcu_kv, tused, ttable;
    int64_t *len_q, *len_kv, *span, *q_row0, *ref_base;
    double *ref_o, *ref_l;
    unsigned char *owned_o, *owned_l; /* per element of O's and lse's buffers */
    int64_t o_lo, o_hi, l_lo, l_hi;   /* element ranges the views may write */
};

static double get(const void *base, fattn_dtype t, int64_t i) {
    return t == FATTN_F32   ? ((const float *)base)[i]
           : t == FATTN_F16 ? fattn_f16_to_f32(((const uint16_t *)base)[i])
                            : fattn_bf16_to_f32(((const uint16_t *)base)[i]);
}

static void copy_elem(void *dst, int64_t di, const void *src, int64_t si, size_t es) {
    memcpy((char *)dst + (size_t)di * es, (const char *)src + (size_t)si * es, es);
}

/* [batch, H, S, D] in BHSD, or BSHD with ROW_PAD elements after each row. */
static geo data_geo(int bshd, int64_t H, int64_t S, int64_t D, int64_t offset) {
    if (!bshd) return (geo){offset, H * S * D, S * D, D};
    const int64_t row = D + ROW_PAD;
    return (geo){offset, S * H * row, row, H * row};
}

static geo lse_geo(int bshd, int64_t H, int64_t S) {
    return bshd ? (geo){GUARD, S * H, 1, H} : (geo){GUARD, H * S, S, 1};
}

static int64_t at(const geo *g, int64_t b, int64_t h, int64_t s) {
    return g->offset + b * g->sb + h * g->sh + s * g->ss;
}

/* One past the last element of a [B, H, S, D] view. */
static int64_t extent(const geo *g, int64_t B, int64_t H, int64_t S, int64_t D) {
    return S == 0 ? g->offset : at(g, B - 1, H - 1, S - 1) + D;
}

static fattn_tensor tensor_of(const hbuf *h, fattn_dtype t, const geo *g) {
    fattn_tensor x = FATTN_TENSOR_INIT;
    x.buffer = h->dev;
    x.dtype = t;
    x.offset = g->offset;
    x.stride_batch = g->sb;
    x.stride_head = g->sh;
    x.stride_seq = g->ss;
    return x;
}

static int hbuf_alloc(hbuf *h, int64_t elems, size_t esize) {
    h->elems = elems;
    h->esize = esize;
    h->data = calloc((size_t)(elems > 0 ? elems : 1), esize);
    return h->data != NULL;
}

static fattn_status hbuf_upload(fattn_context *ctx, hbuf *h) {
    const size_t bytes = (size_t)h->elems * h->esize;
    if (!bytes) return FATTN_OK;
    fattn_status st = h->dev ? FATTN_OK : fattn_buffer_alloc(ctx, bytes, &h->dev);
    return st != FATTN_OK ? st : fattn_buffer_write(h->dev, 0, h->data, bytes);
}

static fattn_status hbuf_download(hbuf *h) {
    const size_t bytes = (size_t)h->elems * h->esize;
    return bytes ? fattn_buffer_read(h->dev, 0, h->data, bytes) : FATTN_OK;
}

static void hbuf_free(hbuf *h) {
    fattn_buffer_free(h->dev);
    free(h->data);
    memset(h, 0, sizeof *h);
}

static int32_t *ints(hbuf *h) { return h->data; }

/* Where key j of sequence b lies in K and V: (batch or page, row). */
static void key_place(const rag_problem *rp, int64_t b, int64_t j, int64_t *kb, int64_t *row) {
    switch (rp->c.kv) {
    case RAG_KV_PACKED:
        *kb = 0;
        *row = ints((hbuf *)&rp->cu_kv)[b] + j;
        break;
    case RAG_KV_PAGED:
        *kb = ints((hbuf *)&rp->table)[b * rp->table_stride + j / rp->page_size];
        *row = j % rp->page_size;
        break;
    default: *kb = b, *row = j;
    }
}

static int64_t max_of(const int64_t *x, int64_t n) {
    int64_t m = 0;
    for (int64_t i = 0; i < n; i++) m = x[i] > m ? x[i] : m;
    return m;
}

/* Lengths, tables and geometry; no data yet. */
static int layout(rag_problem *rp, uint64_t *rng) {
    const rag_case *c = &rp->c;
    const int64_t B = rp->B;
    rp->len_q = calloc((size_t)B, sizeof(int64_t));
    rp->len_kv = calloc((size_t)B, sizeof(int64_t));
    rp->span = calloc((size_t)B, sizeof(int64_t));
    rp->q_row0 = calloc((size_t)B, sizeof(int64_t));
    rp->ref_base = calloc((size_t)B + 1, sizeof(int64_t));
    if (!rp->len_q || !rp->len_kv || !rp->span || !rp->q_row0 || !rp->ref_base) return 0;
    rp->packed_q = c->len_q != NULL;
    for (int64_t b = 0; b < B; b++) {
        rp->len_q[b] = c->len_q ? c->len_q[b] : c->seq_q;
        rp->len_kv[b] = c->len_kv ? c->len_kv[b] : c->seq_kv;
        rp->span[b] = rp->len_kv[b] + (c->kv == RAG_KV_PACKED && c->used ? EXTRA_KV : 0);
    }
    rp->seq_q = c->len_q && !c->seq_q ? max_of(rp->len_q, B) : c->seq_q;
    if (rp->seq_q < 1) rp->seq_q = 1;
    rp->seq_kv = c->seq_kv ? c->seq_kv : max_of(rp->span, B);

    /* Q and O: packed rows cu_q[b].. at batch 0, or dense. */
    if (rp->packed_q) {
        if (!hbuf_alloc(&rp->cu_q, B + 1, sizeof(int32_t))) return 0;
        for (int64_t b = 0; b < B; b++) ints(&rp->cu_q)[b + 1] = ints(&rp->cu_q)[b] + rp->len_q[b];
        rp->total_q = ints(&rp->cu_q)[B] + EXTRA_Q;
        for (int64_t b = 0; b < B; b++) rp->q_row0[b] = ints(&rp->cu_q)[b];
    }
    rp->qb = rp->packed_q ? 1 : B;
    rp->qs = rp->packed_q ? rp->total_q : rp->seq_q;

    /* K and V. */
    int64_t kb = B, ks = rp->seq_kv;
    if (c->kv == RAG_KV_PACKED) {
        if (!hbuf_alloc(&rp->cu_kv, B + 1, sizeof(int32_t))) return 0;
        for (int64_t b = 0; b < B; b++)
            ints(&rp->cu_kv)[b + 1] = ints(&rp->cu_kv)[b] + (int32_t)rp->span[b];
        rp->total_kv = ints(&rp->cu_kv)[B] + EXTRA_KV;
        kb = 1, ks = rp->total_kv;
    } else if (c->kv == RAG_KV_PAGED) {
        const int64_t ps = rp->page_size = c->page_size;
        rp->pages_per_seq = (rp->seq_kv + ps - 1) / ps + 1; /* a column of garbage entries */
        rp->table_stride = rp->pages_per_seq + 1;           /* and a padded row */
        int64_t used_pages = 0;
        for (int64_t b = 0; b < B; b++) used_pages += (rp->len_kv[b] + ps - 1) / ps;
        rp->num_pages = used_pages + SPARE_PAGES;
        int32_t *perm = malloc((size_t)rp->num_pages * sizeof(int32_t));
        if (!perm || !hbuf_alloc(&rp->table, (B - 1) * rp->table_stride + rp->pages_per_seq,
                                 sizeof(int32_t))) {
            free(perm);
            return 0;
        }
        for (int64_t i = 0; i < rp->num_pages; i++) perm[i] = (int32_t)i;
        for (int64_t i = rp->num_pages - 1; i > 0; i--) { /* Fisher-Yates */
            const int64_t j = (int64_t)(next_u64(rng) % (uint64_t)(i + 1));
            const int32_t t = perm[i];
            perm[i] = perm[j];
            perm[j] = t;
        }
        const int32_t garbage[] = {-1, (int32_t)rp->num_pages, 1 << 30, -7};
        int64_t next = 0, g = 0;
        for (int64_t i = 0; i < rp->table.elems; i++) ints(&rp->table)[i] = garbage[g++ % 4];
        for (int64_t b = 0; b < B; b++)
            for (int64_t p = 0; p * ps < rp->len_kv[b]; p++)
                ints(&rp->table)[b * rp->table_stride + p] = perm[next++];
        free(perm);
        kb = rp->num_pages, ks = ps;
    }
    if (c->used) {
        if (!hbuf_alloc(&rp->used, B, sizeof(int32_t))) return 0;
        for (int64_t b = 0; b < B; b++) ints(&rp->used)[b] = (int32_t)rp->len_kv[b];
    }

    const size_t es = fattn_dtype_size(rp->dt);
    rp->gq = data_geo(c->bshd, rp->Hq, rp->qs, rp->D, 2);
    rp->gk = data_geo(c->bshd, rp->Hk, ks, rp->D, 1);
    rp->go = data_geo(c->bshd, rp->Hq, rp->qs, rp->D, GUARD);
    rp->gl = lse_geo(c->bshd, rp->Hq, rp->qs);
    if (!hbuf_alloc(&rp->q, extent(&rp->gq, rp->qb, rp->Hq, rp->qs, rp->D), es) ||
        !hbuf_alloc(&rp->k, extent(&rp->gk, kb, rp->Hk, ks, rp->D), es) ||
        !hbuf_alloc(&rp->v, rp->k.elems, es))
        return 0;
    rp->o_lo = rp->go.offset;
    rp->o_hi = extent(&rp->go, rp->qb, rp->Hq, rp->qs, rp->D);
    if (!hbuf_alloc(&rp->o, rp->o_hi + GUARD, es)) return 0;
    if (!c->no_lse) {
        rp->l_lo = rp->gl.offset;
        rp->l_hi = extent(&rp->gl, rp->qb, rp->Hq, rp->qs, 1);
        if (!hbuf_alloc(&rp->l, rp->l_hi + GUARD, sizeof(float))) return 0;
    }
    rp->owned_o = calloc((size_t)rp->o.elems, 1);
    rp->owned_l = calloc((size_t)(rp->l.elems ? rp->l.elems : 1), 1);
    for (int64_t b = 0; b < B; b++) rp->ref_base[b + 1] = rp->ref_base[b] + rp->Hq * rp->len_q[b];
    rp->ref_o = malloc((size_t)(rp->ref_base[B] * rp->D + 1) * sizeof(double));
    rp->ref_l = malloc((size_t)(rp->ref_base[B] + 1) * sizeof(double));
    return rp->owned_o && rp->owned_l && rp->ref_o && rp->ref_l;
}

/* Draws the sequences, scatters them and computes the reference. */
static int fill(rag_problem *rp, uint64_t *rng) {
    const rag_case *c = &rp->c;
    const fattn_dtype dt = rp->dt;
    const size_t es = fattn_dtype_size(dt);
    const int64_t D = rp->D, Hq = rp->Hq, Hk = rp->Hk;
    memset(rp->q.data, 0xff, (size_t)rp->q.elems * es); /* NaN in every dtype */
    memset(rp->k.data, 0xff, (size_t)rp->k.elems * es);
    for (int64_t i = 0; i < rp->v.elems; i++) harness_put(rp->v.data, dt, i, V_GARBAGE);
    if (c->kv == RAG_KV_PAGED) { /* pages no entry uses: NaN in V too */
        unsigned char *usedp = calloc((size_t)rp->num_pages, 1);
        if (!usedp) return 0;
        for (int64_t b = 0; b < rp->B; b++)
            for (int64_t p = 0; p * rp->page_size < rp->len_kv[b]; p++)
                usedp[ints(&rp->table)[b * rp->table_stride + p]] = 1;
        for (int64_t pg = 0; pg < rp->num_pages; pg++)
            for (int64_t h = 0; !usedp[pg] && h < Hk; h++)
                for (int64_t s = 0; s < rp->page_size; s++)
                    memset((char *)rp->v.data + (size_t)at(&rp->gk, pg, h, s) * es, 0xff,
                           (size_t)D * es);
        free(usedp);
    }
    const float scale = c->scale;
    for (int64_t b = 0; b < rp->B; b++) {
        const int64_t nq = rp->len_q[b], nk = rp->len_kv[b];
        void *lq = malloc((size_t)(Hq * nq * D + 1) * es);
        void *lk = malloc((size_t)(Hk * nk * D + 1) * es),
             *lv = malloc((size_t)(Hk * nk * D + 1) * es);
        if (!lq || !lk || !lv) {
            free(lq), free(lk), free(lv);
            return 0;
        }
        for (int64_t h = 0; h < Hq; h++)
            for (int64_t i = 0; i < nq; i++)
                for (int64_t x = 0; x < D; x++) {
                    const int64_t li = (h * nq + i) * D + x;
                    harness_put(lq, dt, li, uniform(rng));
                    const int64_t qb = rp->packed_q ? 0 : b;
                    copy_elem(rp->q.data, at(&rp->gq, qb, h, rp->q_row0[b] + i) + x, lq, li, es);
                }
        for (int64_t h = 0; h < Hk; h++)
            for (int64_t j = 0; j < nk; j++) {
                int64_t kb, row;
                key_place(rp, b, j, &kb, &row);
                for (int64_t x = 0; x < D; x++) {
                    const int64_t li = (h * nk + j) * D + x;
                    harness_put(lk, dt, li, uniform(rng));
                    harness_put(lv, dt, li, uniform(rng));
                    copy_elem(rp->k.data, at(&rp->gk, kb, h, row) + x, lk, li, es);
                    copy_elem(rp->v.data, at(&rp->gk, kb, h, row) + x, lv, li, es);
                }
            }
        /* The reference: sequence b as a dense problem of its own. */
        fattn_attention_desc d = FATTN_ATTENTION_DESC_INIT;
        d.batch = 1, d.heads_q = Hq, d.heads_kv = Hk, d.seq_q = nq, d.seq_kv = nk;
        d.head_dim = D, d.dtype = dt, d.scale = scale, d.causal = c->causal;
        const ref_view rq = {lq, dt, 0, 0, nq * D, D}, rk = {lk, dt, 0, 0, nk * D, D},
                       rv = {lv, dt, 0, 0, nk * D, D};
        ref_attention(&d, &rq, &rk, &rv, rp->ref_o + rp->ref_base[b] * D,
                      rp->ref_l + rp->ref_base[b]);
        free(lq), free(lk), free(lv);
        /* The elements this sequence's rows own in O and lse. */
        const int64_t qb = rp->packed_q ? 0 : b;
        for (int64_t h = 0; h < Hq; h++)
            for (int64_t i = 0; i < nq; i++) {
                memset(rp->owned_o + at(&rp->go, qb, h, rp->q_row0[b] + i), 1, (size_t)D);
                if (!c->no_lse) rp->owned_l[at(&rp->gl, qb, h, rp->q_row0[b] + i)] = 1;
            }
    }
    return 1;
}

static fattn_status make_tensors(rag_problem *rp) {
    const rag_case *c = &rp->c;
    fattn_status st = FATTN_OK;
    hbuf *all[] = {&rp->q,    &rp->k,     &rp->v,    &rp->o,    &rp->l,
                   &rp->cu_q, &rp->cu_kv, &rp->used, &rp->table};
    for (size_t i = 0; i < sizeof all / sizeof all[0] && st == FATTN_OK; i++)
        if (all[i]->data) st = hbuf_upload(rp->ctx, all[i]);
    if (st != FATTN_OK) return st;
    rp->tq = tensor_of(&rp->q, rp->dt, &rp->gq);
    rp->tk = tensor_of(&rp->k, rp->dt, &rp->gk);
    rp->tv = tensor_of(&rp->v, rp->dt, &rp->gk);
    rp->to = tensor_of(&rp->o, rp->dt, &rp->go);
    if (!c->no_lse) rp->tl = tensor_of(&rp->l, FATTN_F32, &rp->gl);

    fattn_attention_desc *d = &rp->desc;
    const fattn_attention_desc d0 = FATTN_ATTENTION_DESC_INIT;
    *d = d0;
    d->batch = rp->B, d->heads_q = rp->Hq, d->heads_kv = rp->Hk;
    d->seq_q = rp->seq_q, d->seq_kv = rp->seq_kv, d->head_dim = rp->D;
    d->dtype = rp->dt, d->scale = c->scale, d->causal = c->causal;
    d->flags = harness_tf32_flags(rp->dt);
    const fattn_varlen_desc v0 = FATTN_VARLEN_DESC_INIT;
    rp->vl = v0;
    if (rp->packed_q) {
        if ((st = fattn_tensor_init_index(rp->cu_q.dev, 1, rp->B + 1, 0, &rp->tcu_q))) return st;
        rp->vl.cu_seqlens_q = &rp->tcu_q;
        rp->vl.total_q = rp->total_q;
    }
    if (c->kv == RAG_KV_PACKED) {
        if ((st = fattn_tensor_init_index(rp->cu_kv.dev, 1, rp->B + 1, 0, &rp->tcu_kv))) return st;
        rp->vl.cu_seqlens_kv = &rp->tcu_kv;
        rp->vl.total_kv = rp->total_kv;
    }
    if (c->used) {
        if ((st = fattn_tensor_init_index(rp->used.dev, 1, rp->B, 0, &rp->tused))) return st;
        rp->vl.seqused_kv = &rp->tused;
    }
    if (rp->packed_q || c->kv == RAG_KV_PACKED || c->used) d->varlen = &rp->vl;
    if (c->kv == RAG_KV_PAGED) {
        if ((st = fattn_tensor_init_index(rp->table.dev, rp->B, rp->pages_per_seq, 0, &rp->ttable)))
            return st;
        rp->ttable.stride_batch = rp->table_stride; /* padded rows */
        const fattn_paged_kv_desc p0 = FATTN_PAGED_KV_DESC_INIT;
        rp->pg = p0;
        rp->pg.block_table = &rp->ttable;
        rp->pg.pages_per_seq = rp->pages_per_seq;
        rp->pg.page_size = rp->page_size;
        rp->pg.num_pages = rp->num_pages;
        d->paged_kv = &rp->pg;
    }
    return FATTN_OK;
}

fattn_status rag_build(fattn_context *ctx, const rag_case *c, fattn_dtype dtype, uint64_t seed,
                       rag_problem **out) {
    *out = NULL;
    rag_problem *rp = calloc(1, sizeof *rp);
    if (!rp) return FATTN_ERR_OUT_OF_MEMORY;
    rp->ctx = ctx;
    rp->c = *c;
    rp->dt = dtype;
    rp->seed = seed;
    rp->B = c->batch, rp->Hq = c->heads_q, rp->Hk = c->heads_kv, rp->D = c->head_dim;
    uint64_t rng = seed;
    if (!layout(rp, &rng) || !fill(rp, &rng)) {
        rag_free(rp);
        return FATTN_ERR_OUT_OF_MEMORY;
    }
    const fattn_status st = make_tensors(rp);
    if (st != FATTN_OK) {
        rag_free(rp);
        return st;
    }
    *out = rp;
    return FATTN_OK;
}

void rag_free(rag_problem *rp) {
    if (!rp) return;
    hbuf *all[] = {&rp->q,    &rp->k,     &rp->v,    &rp->o,    &rp->l,
                   &rp->cu_q, &rp->cu_kv, &rp->used, &rp->table};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) hbuf_free(all[i]);
    free(rp->len_q), free(rp->len_kv), free(rp->span), free(rp->q_row0), free(rp->ref_base);
    free(rp->ref_o), free(rp->ref_l), free(rp->owned_o), free(rp->owned_l);
    free(rp);
}

static fattn_status poison_outputs(rag_problem *rp) {
    memset(rp->o.data, 0xff, (size_t)rp->o.elems * rp->o.esize);
    fattn_status st = hbuf_upload(rp->ctx, &rp->o);
    if (st == FATTN_OK && rp->l.data) {
        memset(rp->l.data, 0xff, (size_t)rp->l.elems * sizeof(float));
        st = hbuf_upload(rp->ctx, &rp->l);
    }
    return st;
}

static fattn_status forward(rag_problem *rp) {
    return fattn_forward(rp->ctx, &rp->desc, &rp->tq, &rp->tk, &rp->tv, &rp->to,
                         rp->c.no_lse ? NULL : &rp->tl);
}

static fattn_status read_outputs(rag_problem *rp) {
    fattn_status st = hbuf_download(&rp->o);
    if (st == FATTN_OK && rp->l.data) st = hbuf_download(&rp->l);
    return st;
}

/* Bytes that changed from the poison (all-ones) in [lo, hi) of h, where
 * mask (if not NULL) says the element is not owned. */
static int64_t changed(const hbuf *h, const unsigned char *owned, int64_t lo, int64_t hi) {
    int64_t n = 0;
    const unsigned char *p = h->data;
    for (int64_t i = lo; i < hi; i++) {
        if (owned && owned[i]) continue;
        for (size_t k = 0; k < h->esize; k++) n += p[(size_t)i * h->esize + k] != 0xff;
    }
    return n;
}

fattn_status rag_run(rag_problem *rp, case_result *r) {
    memset(r, 0, sizeof *r);
    r->seed = rp->seed;
    fattn_status st = poison_outputs(rp);
    if (st == FATTN_OK) st = forward(rp);
    if (st == FATTN_OK) st = fattn_context_synchronize(rp->ctx);
    if (st == FATTN_OK) st = read_outputs(rp);
    if (st != FATTN_OK) return st;
    const int64_t D = rp->D;
    const double grow = 1.0;
    r->tol = harness_tol(&rp->desc) * grow;
    r->lse_tol = harness_lse_tol(&rp->desc) * grow;
    for (int64_t b = 0; b < rp->B; b++) {
        const int64_t qb = rp->packed_q ? 0 : b;
        for (int64_t h = 0; h < rp->Hq; h++)
            for (int64_t i = 0; i < rp->len_q[b]; i++) {
                const int64_t ref = rp->ref_base[b] + h * rp->len_q[b] + i;
                const int64_t base = at(&rp->go, qb, h, rp->q_row0[b] + i);
                for (int64_t x = 0; x < D; x++) {
                    const double val = get(rp->o.data, rp->dt, base + x);
                    if (isnan(val)) {
                        r->nan_count++;
                        continue;
                    }
                    const double e = fabs(val - rp->ref_o[ref * D + x]);
                    if (e > r->max_err) r->max_err = e;
                }
                if (rp->c.no_lse) continue;
                const float l = ((const float *)rp->l.data)[at(&rp->gl, qb, h, rp->q_row0[b] + i)];
                const double rl = rp->ref_l[ref];
                if (isnan(l))
                    r->nan_count++;
                else if (isinf(rl) || isinf(l))
                    r->lse_mismatch += !(isinf(rl) && isinf(l) && l < 0);
                else {
                    const double e = fabs(l - rl) / (fabs(rl) > 1.0 ? fabs(rl) : 1.0);
                    if (e > r->lse_err) r->lse_err = e;
                }
            }
    }
    /* Everything no sequence owns, guards included, still holds the poison. */
    r->guard_broken = changed(&rp->o, rp->owned_o, 0, rp->o.elems);
    if (rp->l.data) r->guard_broken += changed(&rp->l, rp->owned_l, 0, rp->l.elems);
    return FATTN_OK;
}

void rag_outputs(const rag_problem *rp, const void **o, size_t *o_bytes, const void **lse,
                 size_t *lse_bytes) {
    *o = rp->o.data;
    *o_bytes = (size_t)rp->o.elems * rp->o.esize;
    *lse = rp->l.data;
    *lse_bytes = rp->l.data ? (size_t)rp->l.elems * rp->l.esize : 0;
}

/* ---- Spoiled tables ----------------------------------------------------------- */

const char *rag_fault_name(rag_fault f) {
    static const char *const names[RAG_FAULT_COUNT] = {
        "cu_seqlens_q decreasing", "cu_seqlens_kv past total_kv", "a sequence over seq_q",
        "a sequence over seq_kv",  "seqused_kv over the cache",   "a page index -1",
        "a page index num_pages"};
    return (unsigned)f < RAG_FAULT_COUNT ? names[f] : "?";
}

const char *rag_fault_table(rag_fault f) {
    switch (f) {
    case RAG_CU_Q_DECREASING:
    case RAG_Q_OVER_SEQ_Q: return "cu_seqlens_q";
    case RAG_CU_KV_PAST_TOTAL:
    case RAG_KV_OVER_SEQ_KV: return "cu_seqlens_kv";
    case RAG_USED_OVER_CACHE: return "seqused_kv";
    default: return "block_table";
    }
}

/* The first sequence (from the last) with at least one used key, else -1. */
static int64_t seq_with_keys(const rag_problem *rp) {
    for (int64_t b = rp->B - 1; b >= 0; b--)
        if (rp->len_kv[b] > 0) return b;
    return -1;
}

/* k >= 1 with cu_q[k] >= 1 and k < batch (so cu_q[k+1] can drop below it). */
static int64_t drop_point(const rag_problem *rp) {
    for (int64_t k = 1; rp->packed_q && k < rp->B; k++)
        if (ints((hbuf *)&rp->cu_q)[k] >= 1) return k;
    return -1;
}

int rag_fault_applies(const rag_problem *rp, rag_fault f) {
    switch (f) {
    case RAG_CU_Q_DECREASING: return drop_point(rp) >= 0;
    case RAG_Q_OVER_SEQ_Q: return rp->packed_q && rp->seq_q >= 2 && !rp->c.seq_q;
    case RAG_CU_KV_PAST_TOTAL: return rp->c.kv == RAG_KV_PACKED;
    case RAG_KV_OVER_SEQ_KV: return rp->c.kv == RAG_KV_PACKED && rp->seq_kv >= 1 && !rp->c.seq_kv;
    case RAG_USED_OVER_CACHE: return rp->c.used;
    case RAG_PAGE_NEGATIVE:
    case RAG_PAGE_PAST_END: return rp->c.kv == RAG_KV_PAGED && seq_with_keys(rp) >= 0;
    default: return 0;
    }
}

fattn_status rag_run_fault(rag_problem *rp, rag_fault f, rag_fault_result *res) {
    memset(res, 0, sizeof *res);
    hbuf *t = NULL;
    int64_t idx = 0;
    int32_t bad = 0;
    const int64_t b = seq_with_keys(rp);
    switch (f) {
    case RAG_CU_Q_DECREASING:
        t = &rp->cu_q, idx = drop_point(rp) + 1, bad = ints(t)[idx - 1] - 1;
        break;
    case RAG_CU_KV_PAST_TOTAL: t = &rp->cu_kv, idx = rp->B, bad = (int32_t)rp->total_kv + 1; break;
    case RAG_USED_OVER_CACHE:
        t = &rp->used, idx = rp->B - 1;
        bad = (int32_t)(rp->c.kv == RAG_KV_PACKED ? rp->span[idx] : rp->seq_kv) + 1;
        break;
    case RAG_PAGE_NEGATIVE: t = &rp->table, idx = b * rp->table_stride, bad = -1; break;
    case RAG_PAGE_PAST_END:
        t = &rp->table, idx = b * rp->table_stride + (rp->len_kv[b] - 1) / rp->page_size;
        bad = (int32_t)rp->num_pages;
        break;
    default: break;
    }
    const int32_t good = t ? ints(t)[idx] : 0;
    fattn_status st = FATTN_OK;
    if (t) {
        ints(t)[idx] = bad;
        st = fattn_buffer_write(t->dev, (size_t)idx * sizeof(int32_t), &bad, sizeof bad);
    }
    if (f == RAG_Q_OVER_SEQ_Q) rp->desc.seq_q--;
    if (f == RAG_KV_OVER_SEQ_KV) rp->desc.seq_kv--;
    if (st == FATTN_OK) st = poison_outputs(rp);
    if (st == FATTN_OK) {
        res->forward = res->reported = forward(rp);
        if (res->forward == FATTN_OK) res->reported = fattn_context_synchronize(rp->ctx);
        snprintf(res->message, sizeof res->message, "%s", fattn_error_message(rp->ctx));
        st = fattn_context_synchronize(rp->ctx); /* a backend's own failure, not the fault */
        if (st == FATTN_OK) st = read_outputs(rp);
    }
    if (st == FATTN_OK) {
        res->guard_broken =
            changed(&rp->o, NULL, 0, rp->o_lo) + changed(&rp->o, NULL, rp->o_hi, rp->o.elems);
        res->untouched_broken = changed(&rp->o, NULL, 0, rp->o.elems);
        if (rp->l.data) {
            res->guard_broken +=
                changed(&rp->l, NULL, 0, rp->l_lo) + changed(&rp->l, NULL, rp->l_hi, rp->l.elems);
            res->untouched_broken += changed(&rp->l, NULL, 0, rp->l.elems);
        }
    }
    if (f == RAG_Q_OVER_SEQ_Q) rp->desc.seq_q++;
    if (f == RAG_KV_OVER_SEQ_KV) rp->desc.seq_kv++;
    if (t) {
        ints(t)[idx] = good;
        const fattn_status w =
            fattn_buffer_write(t->dev, (size_t)idx * sizeof(int32_t), &good, sizeof good);
        if (st == FATTN_OK) st = w;
    }
    return st;
}

/* desc->append (fattn_kv_append_desc) on every backend: this step's keys and
 * values written into a contiguous or paged cache in the fattn_forward call,
 * then attention over seqused_kv[b] + seq_new keys. Against a host copy of
 * the cache and the double reference: the new rows land bit for bit, every
 * other cache byte is unchanged (the cache past the used keys holds a
 * poison that would show in O if read), and O and lse match. Capacities,
 * lengths and page sizes are multiples of no tile; page tables shuffled; new
 * keys cross page boundaries. Bad sequences (over the capacity, a negative
 * length, a bad page for a new key) must be FATTN_ERR_INDEX_TABLE with
 * nothing of them written (CPU: at the call, nothing written at all; GPU: at
 * the next synchronize, the other sequences done). Then the validation of
 * the description (the core's, checked on the CPU). Seeds print on failure. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "fattn.h"
#include "harness.h"
#include "reference.h"
#include "test_backend.h"
#include "test_util.h"

#define F32_ (1u << FATTN_F32)
#define MAXB 4
#define POISON 1000.0f /* cache slots past the used keys: a read shows in O */

typedef struct ap_case {
    const char *name;
    int64_t batch, heads_q, heads_kv, head_dim, seq_q, seq_new;
    int64_t seq_kv;                   /* the capacity */
    int64_t page_size, pages_per_seq; /* page_size 0: contiguous */
    fattn_causal causal;
    int32_t lens[MAXB]; /* L_b: seqused_kv */
    unsigned dtypes;    /* 1 << dtype; 0 = all three */
    int splits;         /* FATTN_PARAM_KV_SPLITS for the call; 0 = the backend's choice */
} ap_case;

#define BR FATTN_CAUSAL_BOTTOM_RIGHT
#define NONE FATTN_CAUSAL_NONE
static const ap_case cases[] = {
    {"contiguous decode", 3, 8, 2, 64, 1, 1, 37, 0, 0, BR, {0, 17, 36}, 0, 0},
    {"contiguous decode, 3 splits", 3, 8, 2, 64, 1, 1, 37, 0, 0, BR, {0, 17, 36}, F32_, 3},
    {"contiguous 5 new, non-causal", 2, 8, 2, 64, 5, 5, 45, 0, 0, NONE, {13, 40}, 0, 0},
    {"contiguous 5 new, 2 query rows", 2, 8, 2, 64, 2, 5, 45, 0, 0, BR, {0, 21}, F32_, 0},
    {"paged 16, 5 new across a page", 3, 8, 2, 64, 5, 5, 61, 16, 4, BR, {14, 0, 56}, 0, 0},
    {"paged 7 decode", 3, 8, 2, 64, 1, 1, 27, 7, 4, BR, {6, 7, 20}, 0, 0},
    {"paged 7 decode, 3 splits", 3, 8, 2, 64, 1, 1, 27, 7, 4, BR, {6, 7, 20}, F32_, 3},
    {"paged 7, 5 new, full", 2, 8, 2, 64, 5, 5, 27, 7, 4, BR, {12, 22}, 0, 0},
    {"paged 1, 5 new, non-causal, d40", 2, 8, 2, 40, 5, 5, 17, 1, 19, NONE, {3, 12}, F32_, 0},
    {"no new keys", 2, 8, 2, 64, 3, 0, 29, 0, 0, BR, {5, 29}, F32_, 0},
};

/* One problem on one context: host copies and device buffers. */
typedef struct ap_prob {
    const ap_case *c;
    fattn_dtype dt;
    size_t es;
    int64_t num_pages, kv_elems, new_elems, q_elems, l_elems;
    int64_t ns_b, ns_h, ns_s, n_off; /* k_new / v_new strides and offset */
    int32_t lens[MAXB];
    int32_t *table;                               /* [batch][pages_per_seq] */
    unsigned char *q, *k, *v, *kn, *vn, *ek, *ev; /* ek, ev: the cache expected after the call */
    fattn_buffer *bq, *bk, *bv, *bkn, *bvn, *bo, *bl, *bused, *btab;
    fattn_tensor tq, tk, tv, tkn, tvn, to, tl, tused, ttab;
    fattn_varlen_desc varlen;
    fattn_paged_kv_desc paged;
    fattn_kv_append_desc append;
    fattn_attention_desc desc;
    uint64_t seed;
} ap_prob;

static int64_t key_at(const ap_prob *p, int64_t b, int64_t h, int64_t j, int64_t d) {
    const ap_case *c = p->c;
    if (!c->page_size) return ((b * c->heads_kv + h) * c->seq_kv + j) * c->head_dim + d;
    const int64_t page = p->table[b * c->pages_per_seq + j / c->page_size];
    return ((page * c->heads_kv + h) * c->page_size + j % c->page_size) * c->head_dim + d;
}

static int64_t new_at(const ap_prob *p, int64_t b, int64_t h, int64_t t, int64_t d) {
    return p->n_off + b * p->ns_b + h * p->ns_h + t * p->ns_s + d;
}

static void fill(unsigned char *x, fattn_dtype dt, int64_t n, uint64_t *s) {
    for (int64_t i = 0; i < n; i++) harness_put(x, dt, i, uniform(s));
}

static fattn_buffer *upload(fattn_context *ctx, const void *host, size_t bytes) {
    fattn_buffer *b = NULL;
    assert_int_equal(fattn_buffer_alloc(ctx, bytes, &b), FATTN_OK);
    assert_int_equal(fattn_buffer_write(b, 0, host, bytes), FATTN_OK);
    return b;
}

/* Builds case c: used keys random, the rest of the cache POISON, new rows
 * random in strided tensors (gaps random too), O and lse NaN. */
static void ap_build(fattn_context *ctx, const ap_case *c, fattn_dtype dt, uint64_t seed,
                     ap_prob *p) {
    memset(p, 0, sizeof *p);
    p->c = c, p->dt = dt, p->es = fattn_dtype_size(dt), p->seed = seed;
    const int64_t B = c->batch, Hq = c->heads_q, Hk = c->heads_kv, D = c->head_dim;
    uint64_t s = seed;
    memcpy(p->lens, c->lens, sizeof p->lens);
    p->num_pages = c->page_size ? B * c->pages_per_seq + 2 : 0;
    p->kv_elems = c->page_size ? p->num_pages * Hk * c->page_size * D : B * Hk * c->seq_kv * D;
    p->q_elems = B * Hq * c->seq_q * D;
    p->l_elems = B * Hq * c->seq_q;
    p->ns_h = D + 2, p->ns_s = Hk * (D + 2), p->ns_b = c->seq_new * Hk * (D + 2) + 5, p->n_off = 7;
    p->new_elems = p->n_off + B * p->ns_b + 8;
    /* A shuffled table over every page (two pages belong to no sequence). */
    const int64_t tn = c->page_size ? B * c->pages_per_seq : 1;
    p->table = malloc((size_t)(p->num_pages > tn ? p->num_pages : tn) * sizeof(int32_t));
    assert_non_null(p->table);
    for (int64_t i = 0; i < p->num_pages; i++) p->table[i] = (int32_t)i;
    for (int64_t i = p->num_pages - 1; i > 0; i--) {
        const int64_t j = (int64_t)(next_u64(&s) % (uint64_t)(i + 1));
        const int32_t x = p->table[i];
        p->table[i] = p->table[j], p->table[j] = x;
    }
    if (!c->page_size) p->table[0] = 0;
    unsigned char **host[7] = {&p->q, &p->k, &p->v, &p->kn, &p->vn, &p->ek, &p->ev};
    const int64_t n[7] = {p->q_elems,   p->kv_elems, p->kv_elems, p->new_elems,
                          p->new_elems, p->kv_elems, p->kv_elems};
    for (int i = 0; i < 7; i++) {
        *host[i] = malloc((size_t)n[i] * p->es);
        assert_non_null(*host[i]);
    }
    fill(p->q, dt, p->q_elems, &s);
    for (int64_t i = 0; i < p->kv_elems; i++)
        harness_put(p->k, dt, i, POISON), harness_put(p->v, dt, i, -POISON);
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < Hk; h++)
            for (int64_t j = 0; j < c->lens[b]; j++)
                for (int64_t d = 0; d < D; d++) {
                    harness_put(p->k, dt, key_at(p, b, h, j, d), uniform(&s));
                    harness_put(p->v, dt, key_at(p, b, h, j, d), uniform(&s));
                }
    fill(p->kn, dt, p->new_elems, &s);
    fill(p->vn, dt, p->new_elems, &s);

    const size_t kvb = (size_t)p->kv_elems * p->es, nb = (size_t)p->new_elems * p->es;
    p->bq = upload(ctx, p->q, (size_t)p->q_elems * p->es);
    p->bk = upload(ctx, p->k, kvb);
    p->bv = upload(ctx, p->v, kvb);
    p->bkn = upload(ctx, p->kn, nb);
    p->bvn = upload(ctx, p->vn, nb);
    assert_int_equal(fattn_buffer_alloc(ctx, (size_t)p->q_elems * p->es, &p->bo), FATTN_OK);
    assert_int_equal(fattn_buffer_alloc(ctx, (size_t)p->l_elems * 4, &p->bl), FATTN_OK);
    p->bused = upload(ctx, p->lens, (size_t)B * 4);
    p->btab = upload(ctx, p->table, (size_t)tn * 4);

    const int64_t kb = c->page_size ? p->num_pages : B,
                  ks = c->page_size ? c->page_size : c->seq_kv;
    assert_int_equal(fattn_tensor_init(p->bq, dt, FATTN_LAYOUT_BHSD, B, Hq, c->seq_q, D, 0, &p->tq),
                     FATTN_OK);
    assert_int_equal(fattn_tensor_init(p->bo, dt, FATTN_LAYOUT_BHSD, B, Hq, c->seq_q, D, 0, &p->to),
                     FATTN_OK);
    assert_int_equal(fattn_tensor_init(p->bk, dt, FATTN_LAYOUT_BHSD, kb, Hk, ks, D, 0, &p->tk),
                     FATTN_OK);
    assert_int_equal(fattn_tensor_init(p->bv, dt, FATTN_LAYOUT_BHSD, kb, Hk, ks, D, 0, &p->tv),
                     FATTN_OK);
    assert_int_equal(fattn_tensor_init_lse(p->bl, B, Hq, c->seq_q, 0, &p->tl), FATTN_OK);
    assert_int_equal(fattn_tensor_init_index(p->bused, 1, B, 0, &p->tused), FATTN_OK);
    assert_int_equal(
        fattn_tensor_init_index(p->btab, B, c->page_size ? c->pages_per_seq : 1, 0, &p->ttab),
        FATTN_OK);
    const fattn_tensor t0 = FATTN_TENSOR_INIT;
    p->tkn = t0;
    p->tkn.buffer = p->bkn, p->tkn.dtype = dt, p->tkn.offset = p->n_off;
    p->tkn.stride_batch = p->ns_b, p->tkn.stride_head = p->ns_h, p->tkn.stride_seq = p->ns_s;
    p->tvn = p->tkn;
    p->tvn.buffer = p->bvn;

    const fattn_varlen_desc v0 = FATTN_VARLEN_DESC_INIT;
    const fattn_paged_kv_desc pg0 = FATTN_PAGED_KV_DESC_INIT;
    const fattn_kv_append_desc a0 = FATTN_KV_APPEND_DESC_INIT;
    const fattn_attention_desc d0 = FATTN_ATTENTION_DESC_INIT;
    p->varlen = v0, p->paged = pg0, p->append = a0, p->desc = d0;
    p->varlen.seqused_kv = &p->tused;
    p->paged.block_table = &p->ttab;
    p->paged.page_size = c->page_size;
    p->paged.pages_per_seq = c->pages_per_seq;
    p->paged.num_pages = p->num_pages;
    p->append.k_new = &p->tkn, p->append.v_new = &p->tvn, p->append.seq_new = c->seq_new;
    p->desc.batch = B, p->desc.heads_q = Hq, p->desc.heads_kv = Hk;
    p->desc.seq_q = c->seq_q, p->desc.seq_kv = c->seq_kv, p->desc.head_dim = D;
    p->desc.dtype = dt, p->desc.causal = c->causal;
    p->desc.varlen = &p->varlen;
    p->desc.paged_kv = c->page_size ? &p->paged : NULL;
    p->desc.append = &p->append;
}

static void ap_free(ap_prob *p) {
    fattn_buffer *bufs[9] = {p->bq, p->bk, p->bv, p->bkn, p->bvn, p->bo, p->bl, p->bused, p->btab};
    for (int i = 0; i < 9; i++) fattn_buffer_free(bufs[i]);
    unsigned char *host[7] = {p->q, p->k, p->v, p->kn, p->vn, p->ek, p->ev};
    for (int i = 0; i < 7; i++) free(host[i]);
    free(p->table);
}

/* The cache expected after the call: the new rows of every sequence not in
 * `bad` (a bitmask) written at L_b + t. */
static void ap_expect(ap_prob *p, unsigned bad) {
    const ap_case *c = p->c;
    memcpy(p->ek, p->k, (size_t)p->kv_elems * p->es);
    memcpy(p->ev, p->v, (size_t)p->kv_elems * p->es);
    for (int64_t b = 0; b < c->batch; b++)
        for (int64_t h = 0; !(bad >> b & 1) && h < c->heads_kv; h++)
            for (int64_t t = 0; t < c->seq_new; t++) {
                const size_t to = (size_t)key_at(p, b, h, p->lens[b] + t, 0) * p->es;
                const size_t from = (size_t)new_at(p, b, h, t, 0) * p->es;
                memcpy(p->ek + to, p->kn + from, (size_t)c->head_dim * p->es);
                memcpy(p->ev + to, p->vn + from, (size_t)c->head_dim * p->es);
            }
}

/* Reads K and V back and compares them with ek, ev byte for byte; the
 * message tells new rows from the rest. */
static void ap_check_cache(const ap_prob *p, const char *what) {
    const size_t bytes = (size_t)p->kv_elems * p->es;
    unsigned char *got = malloc(bytes);
    assert_non_null(got);
    for (int x = 0; x < 2; x++) {
        assert_int_equal(fattn_buffer_read(x ? p->bv : p->bk, 0, got, bytes), FATTN_OK);
        const unsigned char *want = x ? p->ev : p->ek, *before = x ? p->v : p->k;
        int64_t changed_wrong = 0, new_wrong = 0;
        for (size_t i = 0; i < bytes; i++) {
            if (got[i] == want[i]) continue;
            if (want[i] != before[i])
                new_wrong++;
            else
                changed_wrong++;
        }
        if (changed_wrong || new_wrong)
            fail_msg("%s (%s, seed %llu): %s: %lld bytes of the new rows wrong, %lld bytes "
                     "elsewhere in the cache changed",
                     p->c->name, what, (unsigned long long)p->seed, x ? "v" : "k",
                     (long long)new_wrong, (long long)changed_wrong);
    }
    free(got);
}

/* O and lse of every sequence not in `skip` against the double reference
 * over its L_b + seq_new keys, from the expected cache. */
static void ap_check_output(const ap_prob *p, unsigned skip, const char *what) {
    const ap_case *c = p->c;
    const int64_t Hq = c->heads_q, Hk = c->heads_kv, Sq = c->seq_q, D = c->head_dim;
    const size_t ob = (size_t)p->q_elems * p->es;
    unsigned char *o = malloc(ob);
    float *lse = malloc((size_t)p->l_elems * sizeof(float));
    assert_true(o && lse);
    assert_int_equal(fattn_buffer_read(p->bo, 0, o, ob), FATTN_OK);
    assert_int_equal(fattn_buffer_read(p->bl, 0, lse, (size_t)p->l_elems * 4), FATTN_OK);
    const double tol = harness_tolerance(p->dt), lse_tol = 2e-5;
    for (int64_t b = 0; b < c->batch; b++) {
        if (skip >> b & 1) continue;
        const int64_t len = p->lens[b] + c->seq_new;
        /* The sequence's keys as a dense [1, Hk, len, D] cache. */
        unsigned char *kd = malloc((size_t)(Hk * len * D + 1) * p->es);
        unsigned char *vd = malloc((size_t)(Hk * len * D + 1) * p->es);
        double *ro = malloc((size_t)(Hq * Sq * D) * sizeof(double));
        double *rl = malloc((size_t)(Hq * Sq) * sizeof(double));
        assert_true(kd && vd && ro && rl);
        for (int64_t h = 0; h < Hk; h++)
            for (int64_t j = 0; j < len; j++) {
                const size_t to = (size_t)((h * len + j) * D) * p->es;
                const size_t from = (size_t)key_at(p, b, h, j, 0) * p->es;
                memcpy(kd + to, p->ek + from, (size_t)D * p->es);
                memcpy(vd + to, p->ev + from, (size_t)D * p->es);
            }
        fattn_attention_desc d = p->desc;
        d.batch = 1, d.seq_kv = len, d.varlen = NULL, d.paged_kv = NULL, d.append = NULL;
        const ref_view rq = {p->q, p->dt, b * Hq * Sq * D, Hq * Sq * D, Sq * D, D};
        const ref_view rk = {kd, p->dt, 0, Hk * len * D, len * D, D};
        const ref_view rv = {vd, p->dt, 0, Hk * len * D, len * D, D};
        const ref_view rout = {o, p->dt, b * Hq * Sq * D, Hq * Sq * D, Sq * D, D};
        ref_attention(&d, &rq, &rk, &rv, ro, rl);
        for (int64_t h = 0; h < Hq; h++)
            for (int64_t i = 0; i < Sq; i++) {
                for (int64_t x = 0; x < D; x++) {
                    const double got = ref_get(&rout, 0, h, i, x), want = ro[(h * Sq + i) * D + x];
                    if (!(fabs(got - want) <= tol))
                        fail_msg("%s (%s, %s, seed %llu): O[%lld][%lld][%lld][%lld] = %g, "
                                 "reference %g",
                                 c->name, what, fattn_dtype_name(p->dt),
                                 (unsigned long long)p->seed, (long long)b, (long long)h,
                                 (long long)i, (long long)x, got, want);
                }
                const double gl = lse[(b * Hq + h) * Sq + i], wl = rl[h * Sq + i];
                const int ok =
                    isinf(wl) ? gl == wl : fabs(gl - wl) / (fabs(wl) > 1 ? fabs(wl) : 1) <= lse_tol;
                if (!ok)
                    fail_msg("%s (%s, %s, seed %llu): lse[%lld][%lld][%lld] = %g, reference %g",
                             c->name, what, fattn_dtype_name(p->dt), (unsigned long long)p->seed,
                             (long long)b, (long long)h, (long long)i, gl, wl);
            }
        free(kd), free(vd), free(ro), free(rl);
    }
    free(o), free(lse);
}

/* Poisons O and lse (NaN bytes in every dtype). */
static void ap_poison_outputs(const ap_prob *p) {
    const size_t ob = (size_t)p->q_elems * p->es, lb = (size_t)p->l_elems * 4;
    unsigned char *x = malloc(ob > lb ? ob : lb);
    assert_non_null(x);
    memset(x, 0xff, ob > lb ? ob : lb);
    assert_int_equal(fattn_buffer_write(p->bo, 0, x, ob), FATTN_OK);
    assert_int_equal(fattn_buffer_write(p->bl, 0, x, lb), FATTN_OK);
    free(x);
}

static fattn_context *open_backend(fattn_backend_kind kind) {
    fattn_backend_info info;
    test_use_backend(kind, &info);
    fattn_context *ctx = NULL;
    assert_int_equal(fattn_context_create(kind, 0, &ctx), FATTN_OK);
    return ctx;
}

static void run_cases(fattn_backend_kind kind) {
    fattn_context *ctx = open_backend(kind);
    uint64_t seed = 0xa99e7d00u + (uint64_t)kind;
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        const ap_case *c = &cases[ci];
        for (int dt = FATTN_F32; dt <= FATTN_BF16; dt++) {
            if (c->dtypes && !(c->dtypes >> dt & 1)) continue;
            ap_prob p;
            ap_build(ctx, c, (fattn_dtype)dt, ++seed, &p);
            ap_poison_outputs(&p);
            assert_int_equal(fattn_context_set_param(ctx, FATTN_PARAM_KV_SPLITS, c->splits),
                             FATTN_OK);
            const fattn_status st = fattn_forward(ctx, &p.desc, &p.tq, &p.tk, &p.tv, &p.to, &p.tl);
            if (st != FATTN_OK)
                fail_msg("%s (%s) on %s: %s: %s", c->name, fattn_dtype_name(p.dt),
                         fattn_context_backend_name(ctx), fattn_status_string(st),
                         fattn_error_message(ctx));
            assert_int_equal(fattn_context_synchronize(ctx), FATTN_OK);
            ap_expect(&p, 0);
            ap_check_cache(&p, fattn_dtype_name(p.dt));
            ap_check_output(&p, 0, "good tables");
            ap_free(&p);
        }
    }
    fattn_context_free(ctx);
}

/* cmocka entry points: the backend comes as the test's prestate. */
static void cases_on(void **state) { run_cases(*(const fattn_backend_kind *)*state); }

/* Spoils sequence 1 of a paged case whose new keys (5..9) span pages 0 and
 * 1: over the capacity, a negative length, or page 1 out of range. */
typedef enum { SPOIL_OVER, SPOIL_NEGATIVE, SPOIL_PAGE, SPOIL_COUNT } spoil;
static const char *const spoil_names[SPOIL_COUNT] = {"over the capacity", "negative length",
                                                     "bad page"};
static const char *const spoil_tables[SPOIL_COUNT] = {"seqused_kv", "seqused_kv", "block_table"};

static void run_faults(fattn_backend_kind kind) {
    static const ap_case fc[2] = {
        {"faults, paged 7", 3, 8, 2, 64, 5, 5, 26, 7, 4, BR, {3, 5, 10}, 0, 0},
        {"faults, contiguous", 3, 8, 2, 64, 1, 5, 26, 0, 0, BR, {3, 5, 10}, 0, 0},
    };
    fattn_context *ctx = open_backend(kind);
    const int host_checked = kind == FATTN_BACKEND_CPU;
    for (int ci = 0; ci < 2; ci++)
        for (int sp = 0; sp < SPOIL_COUNT; sp++) {
            const ap_case *c = &fc[ci];
            if (sp == SPOIL_PAGE && !c->page_size) continue;
            ap_prob p;
            ap_build(ctx, c, FATTN_F32, 0xfa017u + (uint64_t)(ci * 8 + sp), &p);
            if (sp == SPOIL_OVER) p.lens[1] = (int32_t)(c->seq_kv - c->seq_new + 1);
            if (sp == SPOIL_NEGATIVE) p.lens[1] = -1;
            if (sp == SPOIL_OVER || sp == SPOIL_NEGATIVE)
                assert_int_equal(fattn_buffer_write(p.bused, 0, p.lens, (size_t)c->batch * 4),
                                 FATTN_OK);
            if (sp == SPOIL_PAGE) {
                const int32_t badpage = (int32_t)p.num_pages;
                assert_int_equal(
                    fattn_buffer_write(p.btab, (1 * (size_t)c->pages_per_seq + 1) * 4, &badpage, 4),
                    FATTN_OK);
            }
            ap_poison_outputs(&p);
            fattn_status st = fattn_forward(ctx, &p.desc, &p.tq, &p.tk, &p.tv, &p.to, &p.tl);
            char what[96];
            snprintf(what, sizeof what, "%s, %s", c->name, spoil_names[sp]);
            if (host_checked) {
                /* Refused before anything ran: the cache is as it was. */
                assert_int_equal(st, FATTN_ERR_INDEX_TABLE);
                assert_true(msg_has(fattn_error_message(ctx), spoil_tables[sp]));
                ap_expect(&p, ~0u);
                ap_check_cache(&p, what);
            } else {
                assert_int_equal(st, FATTN_OK);
                st = fattn_context_synchronize(ctx);
                if (st != FATTN_ERR_INDEX_TABLE)
                    fail_msg("%s on %s: synchronize returned %s, not FATTN_ERR_INDEX_TABLE", what,
                             fattn_context_backend_name(ctx), fattn_status_string(st));
                assert_true(msg_has(fattn_error_message(ctx), spoil_tables[sp]));
                assert_int_equal(fattn_context_synchronize(ctx), FATTN_OK); /* reported once */
                /* Sequence 1 untouched, the others appended and attended. The
                 * page spoiled is in the table, so ap_expect leaves it. */
                ap_expect(&p, 1u << 1);
                ap_check_cache(&p, what);
                ap_check_output(&p, 1u << 1, what);
            }
            ap_free(&p);
        }
    fattn_context_free(ctx);
}

static void faults_on(void **state) { run_faults(*(const fattn_backend_kind *)*state); }

/* The description's rules, checked by the core before any backend runs. */
static void expect_fail(fattn_context *ctx, ap_prob *p, fattn_status want, const char *words) {
    const fattn_status st = fattn_forward(ctx, &p->desc, &p->tq, &p->tk, &p->tv, &p->to, &p->tl);
    if (st != want || !msg_has(fattn_error_message(ctx), words))
        fail_msg("expected %s naming \"%s\", got %s: %s", fattn_status_string(want), words,
                 fattn_status_string(st), fattn_error_message(ctx));
}

static void validation(void **state) {
    (void)state;
    static const ap_case c = {"validation", 2, 8, 2, 64, 1, 3, 20, 0, 0, BR, {4, 9}, F32_, 0};
    fattn_context *ctx = open_backend(FATTN_BACKEND_CPU);
    ap_prob p;
    ap_build(ctx, &c, FATTN_F32, 0x7a11du, &p);

    /* seqused_kv is required, cu_seqlens_kv refused. */
    p.desc.varlen = NULL;
    expect_fail(ctx, &p, FATTN_ERR_INVALID_ARGUMENT, "seqused_kv");
    p.desc.varlen = &p.varlen;
    p.varlen.seqused_kv = NULL;
    expect_fail(ctx, &p, FATTN_ERR_INVALID_ARGUMENT, "seqused_kv");
    p.varlen.seqused_kv = &p.tused;
    int32_t cu[3] = {0, 20, 40};
    fattn_buffer *bcu = upload(ctx, cu, sizeof cu);
    fattn_tensor tcu;
    assert_int_equal(fattn_tensor_init_index(bcu, 1, 3, 0, &tcu), FATTN_OK);
    p.varlen.cu_seqlens_kv = &tcu;
    p.varlen.total_kv = 40;
    expect_fail(ctx, &p, FATTN_ERR_INVALID_ARGUMENT, "cu_seqlens_kv");
    p.varlen.cu_seqlens_kv = NULL;
    p.varlen.total_kv = 0;

    /* seq_new within 0..seq_kv; both tensors given, in desc->dtype. */
    p.append.seq_new = c.seq_kv + 1;
    expect_fail(ctx, &p, FATTN_ERR_INVALID_SIZE, "seq_new");
    p.append.seq_new = c.seq_new;
    p.append.v_new = NULL;
    expect_fail(ctx, &p, FATTN_ERR_NULL_POINTER, "v_new");
    p.append.v_new = &p.tvn;
    p.tkn.dtype = FATTN_F16;
    expect_fail(ctx, &p, FATTN_ERR_DTYPE, "k_new");
    p.tkn.dtype = FATTN_F32;

    /* A const cache cannot be appended to. */
    fattn_buffer *ck = NULL;
    assert_int_equal(
        fattn_buffer_wrap_const(ctx, fattn_buffer_native(p.bk), fattn_buffer_size(p.bk), &ck),
        FATTN_OK);
    fattn_tensor tk = p.tk;
    p.tk.buffer = ck;
    expect_fail(ctx, &p, FATTN_ERR_INVALID_ARGUMENT, "read-only");
    p.tk = tk;

    /* New rows may not share memory with what the call writes. */
    fattn_tensor tkn = p.tkn;
    p.tkn.buffer = p.bo, p.tkn.offset = 0, p.tkn.stride_batch = 0;
    p.tkn.stride_head = 0, p.tkn.stride_seq = 0;
    expect_fail(ctx, &p, FATTN_ERR_INVALID_ARGUMENT, "overlaps");
    p.tkn.buffer = p.bv;
    expect_fail(ctx, &p, FATTN_ERR_INVALID_ARGUMENT, "overlaps");
    p.tkn = tkn;
    /* Nor the cache with the index tables an append reads while writing it. */
    fattn_tensor tused = p.tused;
    p.tused.buffer = p.bk;
    expect_fail(ctx, &p, FATTN_ERR_INVALID_ARGUMENT, "overlaps");
    p.tused = tused;

    /* Still nothing written: then the good call works. */
    ap_expect(&p, ~0u);
    ap_check_cache(&p, "after refused calls");
    assert_int_equal(fattn_forward(ctx, &p.desc, &p.tq, &p.tk, &p.tv, &p.to, &p.tl), FATTN_OK);
    ap_expect(&p, 0);
    ap_check_cache(&p, "validation's good call");
    ap_check_output(&p, 0, "validation's good call");

    /* A caller built before desc->append existed: its struct ends there,
     * and whatever lies past it is not read. */
    fattn_attention_desc old = p.desc;
    old.varlen = NULL, old.paged_kv = NULL;
    old.seq_kv = c.seq_kv;
    old.size = offsetof(fattn_attention_desc, append);
    old.append = (const fattn_kv_append_desc *)&p; /* not a description: must be ignored */
    assert_int_equal(fattn_forward(ctx, &old, &p.tq, &p.tk, &p.tv, &p.to, &p.tl), FATTN_OK);
    /* And an append description of another size is refused by name. */
    p.append.size = 3;
    expect_fail(ctx, &p, FATTN_ERR_INVALID_ARGUMENT, "desc->append");
    p.append.size = sizeof p.append;

    fattn_buffer_free(ck);
    fattn_buffer_free(bcu);
    ap_free(&p);
    fattn_context_free(ctx);
}

int main(void) {
    static fattn_backend_kind kinds[3] = {FATTN_BACKEND_CPU, FATTN_BACKEND_OPENCL,
                                          FATTN_BACKEND_CUDA};
    /* Named per backend, so that a skip or failure says which. */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(validation),
        {"cases_cpu", cases_on, NULL, NULL, &kinds[0]},
        {"cases_opencl", cases_on, NULL, NULL, &kinds[1]},
        {"cases_cuda", cases_on, NULL, NULL, &kinds[2]},
        {"faults_cpu", faults_on, NULL, NULL, &kinds[0]},
        {"faults_opencl", faults_on, NULL, NULL, &kinds[1]},
        {"faults_cuda", faults_on, NULL, NULL, &kinds[2]},
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* The 0.2 API's new contracts: size-first (extensible) structs, the
 * sub-descriptions (the reserved mask, varlen and paged K/V, which run), causal alignment, context
 * parameters, fattn_context_create_with, const buffers, tensor initialisers,
 * the workspace and the module directory. Results are compared with a
 * double reference written here; outputs start poisoned so that an element
 * never written shows, and rejected calls must leave them poisoned. */
#define _POSIX_C_SOURCE 200809L /* setenv, mmap, dlopen */
#define _DEFAULT_SOURCE         /* MAP_ANONYMOUS */
#include <dlfcn.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <cmocka.h>

#include "fattn.h"
#include "test_backend.h"
#include "test_util.h"
#include "test_env.h"

/* ---- Data ------------------------------------------------------------------ */

static void fill_random(float *p, size_t n, uint64_t *rng) {
    for (size_t i = 0; i < n; i++) p[i] = uniform(rng);
}

/* A quiet NaN with a payload no arithmetic produces: an output element that
 * keeps these bits was never written. */
#define POISON_BITS 0x7fc0deadu

static float poison(void) {
    const uint32_t u = POISON_BITS;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static int is_poison(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u == POISON_BITS;
}

static void fill_poison(float *p, size_t n) {
    for (size_t i = 0; i < n; i++) p[i] = poison();
}

static float *xmalloc_floats(size_t n) {
    float *p = malloc((n ? n : 1) * sizeof(float));
    assert_non_null(p);
    return p;
}

/* ---- Statuses and messages -------------------------------------------------- */

static void expect_(fattn_status got, fattn_status want, const char *msg, const char *needles,
                    const char *call, const char *file, int line) {
    if (got != want)
        fail_msg("%s:%d: %s returned %s (%d) with \"%s\"; want %s (%d)", file, line, call,
                 fattn_status_string(got), (int)got, msg ? msg : "(null)",
                 fattn_status_string(want), (int)want);
    if (want != FATTN_OK && !msg_has(msg, needles))
        fail_msg("%s:%d: %s returned %s as it should, but its message \"%s\" does not name \"%s\"",
                 file, line, call, fattn_status_string(got), msg ? msg : "(null)", needles);
}

/* Runs call, then reads ctx's message (NULL: the thread slot). */
#define EXPECT(ctx, call, want, needles)                                                           \
    do {                                                                                           \
        const fattn_status st_ = (call);                                                           \
        expect_(st_, (want), fattn_error_message(ctx), (needles), #call, __FILE__, __LINE__);      \
    } while (0)
#define EXPECT_OK(ctx, call) EXPECT(ctx, call, FATTN_OK, "")

/* A successful thread-slot call, so that a later message there is new. */
static void clear_thread_slot(void) {
    fattn_backend_kind k;
    assert_int_equal(fattn_backend_from_name("cpu", &k), FATTN_OK);
    assert_string_equal(fattn_error_message(NULL), "");
}

/* ---- The double reference ----------------------------------------------------- */

/* A host view of a tensor: base plus fattn_tensor's element offset and strides. */
typedef struct hview {
    const float *base;
    int64_t off, sb, sh, ss;
} hview;

static hview hview_of(const float *base, const fattn_tensor *t) {
    const hview v = {base, t->offset, t->stride_batch, t->stride_head, t->stride_seq};
    return v;
}

static double hget(const hview *v, int64_t b, int64_t h, int64_t s, int64_t x) {
    return v->base[v->off + b * v->sb + h * v->sh + s * v->ss + x];
}

/* Whether query row i sees key j, as fattn.h's fattn_causal says. */
static int sees(fattn_causal c, int64_t sq, int64_t sk, int64_t i, int64_t j) {
    if (c == FATTN_CAUSAL_BOTTOM_RIGHT) return j <= i + sk - sq;
    if (c == FATTN_CAUSAL_TOP_LEFT) return j <= i;
    return 1;
}

/* out: [B][Hq][Sq][D], lse: [B][Hq][Sq] (natural log; -inf and O = 0 for a
 * row that sees no key). d must be a full-size description. */
static void reference(const fattn_attention_desc *d, const hview *q, const hview *k, const hview *v,
                      double *out, double *lse) {
    const int64_t D = d->head_dim, group = d->heads_q / d->heads_kv;
    const double scale = d->scale != 0.0f ? (double)d->scale : 1.0 / sqrt((double)D);
    double *s = malloc((size_t)(d->seq_kv ? d->seq_kv : 1) * sizeof(double));
    assert_non_null(s);
    for (int64_t b = 0; b < d->batch; b++)
        for (int64_t h = 0; h < d->heads_q; h++)
            for (int64_t i = 0; i < d->seq_q; i++) {
                const int64_t row = (b * d->heads_q + h) * d->seq_q + i, hk = h / group;
                double m = -INFINITY;
                for (int64_t j = 0; j < d->seq_kv; j++) {
                    s[j] = -INFINITY;
                    if (!sees(d->causal, d->seq_q, d->seq_kv, i, j)) continue;
                    double dot = 0;
                    for (int64_t x = 0; x < D; x++)
                        dot += hget(q, b, h, i, x) * hget(k, b, hk, j, x);
                    s[j] = dot * scale;
                    m = fmax(m, s[j]);
                }
                for (int64_t x = 0; x < D; x++) out[row * D + x] = 0;
                if (m == -INFINITY) {
                    lse[row] = -INFINITY;
                    continue;
                }
                double l = 0;
                for (int64_t j = 0; j < d->seq_kv; j++) {
                    if (s[j] == -INFINITY) continue;
                    const double p = exp(s[j] - m);
                    l += p;
                    for (int64_t x = 0; x < D; x++) out[row * D + x] += p * hget(v, b, hk, j, x);
                }
                for (int64_t x = 0; x < D; x++) out[row * D + x] /= l;
                lse[row] = m + log(l);
            }
    free(s);
}

/* Compares O (and LSE when l->base is set) with the reference; returns the
 * number of rows that see no key, so a test can check it meant to make some. */
static int64_t check_views_(const fattn_attention_desc *d, const hview *q, const hview *k,
                            const hview *v, const hview *o, const hview *l, const char *what,
                            const char *file, int line) {
    const int64_t D = d->head_dim, rows = d->batch * d->heads_q * d->seq_q;
    double *out = malloc((size_t)(rows * D + 1) * sizeof(double));
    double *lse = malloc((size_t)(rows + 1) * sizeof(double));
    assert_non_null(out);
    assert_non_null(lse);
    reference(d, q, k, v, out, lse);
    int64_t bad = 0, empty = 0;
    char first[200] = "";
    for (int64_t b = 0; b < d->batch; b++)
        for (int64_t h = 0; h < d->heads_q; h++)
            for (int64_t i = 0; i < d->seq_q; i++) {
                const int64_t row = (b * d->heads_q + h) * d->seq_q + i;
                const int dead = lse[row] == -INFINITY;
                empty += dead;
                for (int64_t x = 0; x < D; x++) {
                    const double got = hget(o, b, h, i, x), want = out[row * D + x];
                    /* !(<=) so that NaN (and the poison) counts as bad */
                    const int ok = dead ? got == 0.0 : fabs(got - want) <= 1e-4;
                    if (!ok && !bad++)
                        snprintf(first, sizeof first, "O[%lld,%lld,%lld,%lld] = %.9g, want %.9g",
                                 (long long)b, (long long)h, (long long)i, (long long)x, got, want);
                }
                if (!l->base) continue;
                const double got = hget(l, b, h, i, 0), want = lse[row];
                const int ok =
                    dead ? got == -INFINITY : fabs(got - want) <= 5e-5 * fmax(1.0, fabs(want));
                if (!ok && !bad++)
                    snprintf(first, sizeof first, "lse[%lld,%lld,%lld] = %.9g, want %.9g",
                             (long long)b, (long long)h, (long long)i, got, want);
            }
    free(out);
    free(lse);
    if (bad)
        fail_msg("%s:%d: %s: %lld elements differ from the reference, first %s", file, line, what,
                 (long long)bad, first);
    return empty;
}

/* ---- A problem: Q, K, V, O and LSE in separate contiguous BHSD buffers ------- */

enum { TQ, TK, TV, TO, TL, NT };

typedef struct problem {
    fattn_context *ctx;
    fattn_attention_desc d; /* full size; tests pass variants of it */
    fattn_buffer *buf[NT];  /* NULL for K and V when seq_kv = 0 */
    float *host[NT];        /* inputs as written, outputs as last read */
    size_t count[NT];       /* floats in each buffer */
    fattn_tensor t[NT];
} problem;

static fattn_attention_desc make_desc(int64_t B, int64_t Hq, int64_t Hkv, int64_t Sq, int64_t Sk,
                                      int64_t D) {
    fattn_attention_desc d = FATTN_ATTENTION_DESC_INIT;
    d.batch = B;
    d.heads_q = Hq;
    d.heads_kv = Hkv;
    d.seq_q = Sq;
    d.seq_kv = Sk;
    d.head_dim = D;
    d.dtype = FATTN_F32;
    return d;
}

/* B=2, Hq=4, Hkv=2 (GQA), Sq=5, Sk=7, D=8: small, nothing a multiple of 16. */
static fattn_attention_desc small_desc(void) { return make_desc(2, 4, 2, 5, 7, 8); }

static void prob_poison_outputs(problem *p) {
    for (int i = TO; i <= TL; i++) {
        fill_poison(p->host[i], p->count[i]);
        assert_int_equal(fattn_buffer_write(p->buf[i], 0, p->host[i], p->count[i] * sizeof(float)),
                         FATTN_OK);
    }
}

static void prob_init(problem *p, fattn_context *ctx, const fattn_attention_desc *d,
                      uint64_t seed) {
    memset(p, 0, sizeof *p);
    p->ctx = ctx;
    p->d = *d;
    uint64_t rng = seed * 0x9e3779b97f4a7c15ull + (uint64_t)(d->seq_q * 131 + d->seq_kv);
    const int64_t heads[NT] = {d->heads_q, d->heads_kv, d->heads_kv, d->heads_q, d->heads_q};
    const int64_t seq[NT] = {d->seq_q, d->seq_kv, d->seq_kv, d->seq_q, d->seq_q};
    for (int i = 0; i < NT; i++) {
        const int64_t dim = i == TL ? 1 : d->head_dim;
        p->count[i] = (size_t)(d->batch * heads[i] * seq[i] * dim);
        p->host[i] = xmalloc_floats(p->count[i]);
        if (p->count[i])
            assert_int_equal(fattn_buffer_alloc(ctx, p->count[i] * sizeof(float), &p->buf[i]),
                             FATTN_OK);
        if (i == TL)
            EXPECT_OK(NULL,
                      fattn_tensor_init_lse(p->buf[i], d->batch, heads[i], seq[i], 0, &p->t[i]));
        else
            EXPECT_OK(NULL, fattn_tensor_init(p->buf[i], d->dtype, FATTN_LAYOUT_BHSD, d->batch,
                                              heads[i], seq[i], dim, 0, &p->t[i]));
        if (i < TO && p->count[i]) {
            fill_random(p->host[i], p->count[i], &rng);
            assert_int_equal(
                fattn_buffer_write(p->buf[i], 0, p->host[i], p->count[i] * sizeof(float)),
                FATTN_OK);
        }
    }
    prob_poison_outputs(p);
}

static void prob_free(problem *p) {
    for (int i = 0; i < NT; i++) {
        fattn_buffer_free(p->buf[i]);
        free(p->host[i]);
    }
    memset(p, 0, sizeof *p);
}

/* Poisons the outputs, then runs the tiled (naive = 0) or naive path on
 * desc d (which may be an old- or new-sized variant of p->d) and tensors tt
 * (NULL: p->t). */
static fattn_status prob_call_with(problem *p, int naive, const fattn_attention_desc *d,
                                   const fattn_tensor *const *tt) {
    const fattn_tensor *t[NT];
    for (int i = 0; i < NT; i++) t[i] = tt ? tt[i] : &p->t[i];
    prob_poison_outputs(p);
    return naive ? fattn_forward_naive(p->ctx, d, t[TQ], t[TK], t[TV], t[TO], t[TL])
                 : fattn_forward(p->ctx, d, t[TQ], t[TK], t[TV], t[TO], t[TL]);
}
static fattn_status prob_call(problem *p, int naive, const fattn_attention_desc *d) {
    return prob_call_with(p, naive, d, NULL);
}

static void prob_read_outputs(problem *p) {
    for (int i = TO; i <= TL; i++)
        assert_int_equal(fattn_buffer_read(p->buf[i], 0, p->host[i], p->count[i] * sizeof(float)),
                         FATTN_OK);
}

/* Reads O and LSE back and compares them with the reference of p->d. */
static int64_t prob_check_(problem *p, const char *what, const char *file, int line) {
    prob_read_outputs(p);
    hview v[NT];
    for (int i = 0; i < NT; i++) v[i] = hview_of(p->host[i], &p->t[i]);
    return check_views_(&p->d, &v[TQ], &v[TK], &v[TV], &v[TO], &v[TL], what, file, line);
}
#define PROB_CHECK(p, what) prob_check_(p, what, __FILE__, __LINE__)

/* Runs d on path `naive` and checks the answer against p->d's reference. */
#define RUN_OK(p, naive, d, what)                                                                  \
    do {                                                                                           \
        EXPECT_OK((p)->ctx, prob_call(p, naive, d));                                               \
        PROB_CHECK(p, what);                                                                       \
    } while (0)

/* A rejected call writes nothing: O and LSE must still hold the poison. */
static void expect_outputs_untouched_(problem *p, const char *file, int line) {
    prob_read_outputs(p);
    for (int i = TO; i <= TL; i++)
        for (size_t j = 0; j < p->count[i]; j++)
            if (!is_poison(p->host[i][j]))
                fail_msg("%s:%d: a rejected call wrote %s[%zu]", file, line, i == TO ? "o" : "lse",
                         j);
}

enum { PATH_TILED = 1, PATH_NAIVE = 2, PATH_BOTH = 3 };

/* The call is rejected with `want` and a message naming `needles`, on the
 * paths asked for, and writes nothing. */
static void expect_rejected_(problem *p, int paths, const fattn_attention_desc *d,
                             const fattn_tensor *const *tt, fattn_status want, const char *needles,
                             const char *file, int line) {
    for (int naive = 0; naive <= 1; naive++) {
        if (!(paths & (naive ? PATH_NAIVE : PATH_TILED))) continue;
        const fattn_status got = prob_call_with(p, naive, d, tt);
        expect_(got, want, fattn_error_message(p->ctx), needles,
                naive ? "fattn_forward_naive" : "fattn_forward", file, line);
        expect_outputs_untouched_(p, file, line);
    }
}
#define EXPECT_REJECTED(p, d, want, needles)                                                       \
    expect_rejected_(p, PATH_BOTH, d, NULL, want, needles, __FILE__, __LINE__)
#define EXPECT_REJECTED_T(p, d, tt, want, needles)                                                 \
    expect_rejected_(p, PATH_BOTH, d, tt, want, needles, __FILE__, __LINE__)

/* Copies of the outputs, to compare two runs bit for bit. */
typedef struct outputs {
    float *o, *l;
    size_t no, nl;
} outputs;

static outputs outputs_take(problem *p) {
    prob_read_outputs(p);
    outputs s = {xmalloc_floats(p->count[TO]), xmalloc_floats(p->count[TL]), p->count[TO],
                 p->count[TL]};
    memcpy(s.o, p->host[TO], s.no * sizeof(float));
    memcpy(s.l, p->host[TL], s.nl * sizeof(float));
    return s;
}

static void expect_same_outputs_(problem *p, const outputs *s, const char *what, const char *file,
                                 int line) {
    prob_read_outputs(p);
    if (memcmp(s->o, p->host[TO], s->no * sizeof(float)) != 0 ||
        memcmp(s->l, p->host[TL], s->nl * sizeof(float)) != 0)
        fail_msg("%s:%d: %s: the output is not bitwise the same as the baseline's", file, line,
                 what);
}
#define EXPECT_SAME_OUTPUTS(p, s, what) expect_same_outputs_(p, s, what, __FILE__, __LINE__)

static void outputs_free(outputs *s) {
    free(s->o);
    free(s->l);
}

/* ---- Contexts and backends ---------------------------------------------------- */

static fattn_context *cpu_context(void) {
    fattn_context *ctx = NULL;
    EXPECT_OK(NULL, fattn_context_create(FATTN_BACKEND_CPU, 0, &ctx));
    assert_non_null(ctx);
    return ctx;
}

/* A context on device 0 of `kind`, or a visible skip (test_backend.h). */
static fattn_context *open_backend(fattn_backend_kind kind) {
    fattn_backend_info info = FATTN_BACKEND_INFO_INIT;
    test_use_backend(kind, &info);
    fattn_context *ctx = NULL;
    const fattn_status st = fattn_context_create(kind, 0, &ctx);
    if (st != FATTN_OK)
        fail_msg("fattn_context_create(%s): %s: %s", info.name, fattn_status_string(st),
                 fattn_error_message(NULL));
    return ctx;
}

/* One cmocka test per backend for a function body(kind). */
#define PER_BACKEND(body)                                                                          \
    static void body##_cpu(void **state) {                                                         \
        (void)state;                                                                               \
        body(FATTN_BACKEND_CPU);                                                                   \
    }                                                                                              \
    static void body##_cuda(void **state) {                                                        \
        (void)state;                                                                               \
        body(FATTN_BACKEND_CUDA);                                                                  \
    }                                                                                              \
    static void body##_opencl(void **state) {                                                      \
        (void)state;                                                                               \
        body(FATTN_BACKEND_OPENCL);                                                                \
    }
#define PER_BACKEND_TESTS(body)                                                                    \
    cmocka_unit_test(body##_cpu), cmocka_unit_test(body##_cuda), cmocka_unit_test(body##_opencl)

/* The naive path may be missing on a backend (OpenCL without CLBlast). */
static int naive_missing(fattn_status st, const fattn_context *ctx, int *said) {
    if (st != FATTN_ERR_UNSUPPORTED) return 0;
    if (!*said)
        print_message("[     NOTE ] %s: fattn_forward_naive unsupported here: %s\n",
                      fattn_context_backend_name(ctx), fattn_error_message(ctx));
    *said = 1;
    return 1;
}

/* =========================================================================== */
/* 1. Extensible structs                                                         */
/* =========================================================================== */

/* A caller compiled against an older, shorter fattn_attention_desc: the
 * bytes past its size are garbage (0xAB), and the library must read none
 * of them (mask, varlen, paged_kv and workspace are then NULL). Each cut is
 * the end of a version the struct could have had; offsetof(mask) is 0.2.0's
 * smallest. */
static void test_ext_desc_older_sizes(void **state) {
    (void)state;
    fattn_context *ctx = cpu_context();
    problem p;
    const fattn_attention_desc full = small_desc();
    prob_init(&p, ctx, &full, 1);
    const size_t cuts[] = {
        offsetof(fattn_attention_desc, mask), offsetof(fattn_attention_desc, varlen),
        offsetof(fattn_attention_desc, paged_kv), offsetof(fattn_attention_desc, workspace)};
    for (size_t c = 0; c < sizeof cuts / sizeof cuts[0]; c++) {
        union {
            fattn_attention_desc d;
            unsigned char bytes[sizeof(fattn_attention_desc) + 64];
        } u;
        memset(&u, 0xAB, sizeof u);
        memcpy(&u, &full, cuts[c]);
        u.d.size = cuts[c];
        char what[64];
        snprintf(what, sizeof what, "desc->size = %zu", cuts[c]);
        RUN_OK(&p, 0, &u.d, what);
        RUN_OK(&p, 1, &u.d, what);

        /* Everything else that reads a description reads it the same way. */
        assert_true(fattn_flops(&u.d) == fattn_flops(&full));
        uint64_t ws = 99;
        EXPECT_OK(ctx, fattn_workspace_size(ctx, &u.d, &ws));
        assert_int_equal(ws, 0);
        fattn_memory_report r1 = FATTN_MEMORY_REPORT_INIT, r2 = FATTN_MEMORY_REPORT_INIT;
        EXPECT_OK(NULL, fattn_memory_estimate(&u.d, NULL, &r1));
        EXPECT_OK(NULL, fattn_memory_estimate(&full, NULL, &r2));
        assert_memory_equal(&r1, &r2, sizeof r1);
        EXPECT_OK(ctx, fattn_context_memory_report(ctx, &u.d, &r1));

        /* The one-line host call too. */
        float *o = xmalloc_floats(p.count[TO]), *l = xmalloc_floats(p.count[TL]);
        fill_poison(o, p.count[TO]);
        fill_poison(l, p.count[TL]);
        EXPECT_OK(ctx, fattn_attention_host(ctx, &u.d, FATTN_LAYOUT_BHSD, p.host[TQ], p.host[TK],
                                            p.host[TV], o, l));
        const hview q = hview_of(p.host[TQ], &p.t[TQ]), k = hview_of(p.host[TK], &p.t[TK]),
                    v = hview_of(p.host[TV], &p.t[TV]), ho = hview_of(o, &p.t[TO]),
                    hl = hview_of(l, &p.t[TL]);
        check_views_(&full, &q, &k, &v, &ho, &hl, "fattn_attention_host, old desc", __FILE__,
                     __LINE__);
        free(o);
        free(l);
    }
    prob_free(&p);
    fattn_context_free(ctx);
}

/* Size 0 (forgot the INIT macro) and sizes below 0.2.0's smallest. */
static void test_ext_desc_too_small(void **state) {
    (void)state;
    fattn_context *ctx = cpu_context();
    problem p;
    const fattn_attention_desc full = small_desc();
    prob_init(&p, ctx, &full, 2);
    fattn_attention_desc d = full;
    d.size = 0;
    EXPECT_REJECTED(&p, &d, FATTN_ERR_INVALID_ARGUMENT, "INIT|size");
    d.size = offsetof(fattn_attention_desc, flags);
    EXPECT_REJECTED(&p, &d, FATTN_ERR_INVALID_ARGUMENT, "size");
    d.size = sizeof(size_t);
    EXPECT_REJECTED(&p, &d, FATTN_ERR_INVALID_ARGUMENT, "size");

    /* The calls without a context report through the thread slot. */
    fattn_memory_report r = FATTN_MEMORY_REPORT_INIT;
    d.size = 0;
    EXPECT(NULL, fattn_memory_estimate(&d, NULL, &r), FATTN_ERR_INVALID_ARGUMENT, "INIT|size");
    assert_true(fattn_flops(&d) == 0.0);
    uint64_t ws = 0;
    EXPECT(ctx, fattn_workspace_size(ctx, &d, &ws), FATTN_ERR_INVALID_ARGUMENT, "INIT|size");
    EXPECT(ctx,
           fattn_attention_host(ctx, &d, FATTN_LAYOUT_BHSD, p.host[TQ], p.host[TK], p.host[TV],
                                p.host[TO], p.host[TL]),
           FATTN_ERR_INVALID_ARGUMENT, "INIT|size");
    prob_free(&p);
    fattn_context_free(ctx);
}

/* A newer caller's larger struct: extra bytes that are zero are fields at
 * their defaults (works); a non-zero one asks for something unknown. */
static void test_ext_desc_newer_size(void **state) {
    (void)state;
    fattn_context *ctx = cpu_context();
    problem p;
    const fattn_attention_desc full = small_desc();
    prob_init(&p, ctx, &full, 3);
    union {
        fattn_attention_desc d;
        unsigned char bytes[sizeof(fattn_attention_desc) + 40];
    } u;
    memset(&u, 0, sizeof u);
    u.d = full;
    u.d.size = sizeof u;
    RUN_OK(&p, 0, &u.d, "desc->size larger, zero tail");
    assert_true(fattn_flops(&u.d) == fattn_flops(&full));
    u.bytes[sizeof(fattn_attention_desc) + 17] = 1;
    EXPECT_REJECTED(&p, &u.d, FATTN_ERR_INVALID_ARGUMENT, "size|field");
    fattn_memory_report r = FATTN_MEMORY_REPORT_INIT;
    EXPECT(NULL, fattn_memory_estimate(&u.d, NULL, &r), FATTN_ERR_INVALID_ARGUMENT, "size|field");
    assert_true(fattn_flops(&u.d) == 0.0);
    prob_free(&p);
    fattn_context_free(ctx);
}

/* fattn_tensor has no older version: its full size is the minimum. */
static void test_ext_tensor_size(void **state) {
    (void)state;
    static const char *const names[NT] = {"~q", "~k", "~v", "~o", "~lse"};
    fattn_context *ctx = cpu_context();
    problem p;
    const fattn_attention_desc full = small_desc();
    prob_init(&p, ctx, &full, 4);
    for (int i = 0; i < NT; i++) {
        union {
            fattn_tensor t;
            unsigned char bytes[sizeof(fattn_tensor) + 32];
        } u;
        memset(&u, 0, sizeof u);
        u.t = p.t[i];
        const fattn_tensor *tt[NT];
        for (int j = 0; j < NT; j++) tt[j] = j == i ? &u.t : &p.t[j];
        const char *needles = names[i];

        u.t.size = sizeof u; /* newer and zero-tailed: works */
        EXPECT_OK(ctx, prob_call_with(&p, 0, &p.d, tt));
        PROB_CHECK(&p, "a larger tensor size with a zero tail");
        u.bytes[sizeof(fattn_tensor) + 3] = 0x5A;
        EXPECT_REJECTED_T(&p, &p.d, tt, FATTN_ERR_INVALID_ARGUMENT, needles);
        u.bytes[sizeof(fattn_tensor) + 3] = 0;

        u.t.size = sizeof(fattn_tensor) - sizeof(int64_t); /* no such version */
        EXPECT_REJECTED_T(&p, &p.d, tt, FATTN_ERR_INVALID_ARGUMENT, "size");
        u.t.size = 0;
        EXPECT_REJECTED_T(&p, &p.d, tt, FATTN_ERR_INVALID_ARGUMENT, "INIT|size");
        /* and the message says which tensor */
        EXPECT_REJECTED_T(&p, &p.d, tt, FATTN_ERR_INVALID_ARGUMENT, needles);
    }
    prob_free(&p);
    fattn_context_free(ctx);
}

/* An older fattn_memory_report: only the fields its size covers are
 * written, the bytes after it keep their poison. */
static void test_ext_memory_report_older(void **state) {
    (void)state;
    fattn_context *ctx = cpu_context();
    const fattn_attention_desc d = small_desc();
    fattn_memory_report full = FATTN_MEMORY_REPORT_INIT;
    EXPECT_OK(NULL, fattn_memory_estimate(&d, NULL, &full));
    assert_true(full.naive_bytes > 0 && full.flash_bytes > 0 && full.flops > 0);
    const size_t cuts[] = {offsetof(fattn_memory_report, reduction),
                           offsetof(fattn_memory_report, flops)};
    for (size_t c = 0; c < sizeof cuts / sizeof cuts[0]; c++)
        for (int with_ctx = 0; with_ctx <= 1; with_ctx++) {
            union {
                fattn_memory_report r;
                unsigned char bytes[sizeof(fattn_memory_report) + 16];
            } u;
            memset(&u, 0xCD, sizeof u);
            u.r.size = cuts[c];
            if (with_ctx)
                EXPECT_OK(ctx, fattn_context_memory_report(ctx, &d, &u.r));
            else
                EXPECT_OK(NULL, fattn_memory_estimate(&d, NULL, &u.r));
            assert_int_equal(u.r.size, cuts[c]); /* the caller's size is kept */
            if (!with_ctx) {
                assert_int_equal(u.r.naive_bytes, full.naive_bytes);
                assert_int_equal(u.r.flash_bytes, full.flash_bytes);
                assert_int_equal(u.r.tile_bytes, full.tile_bytes);
                assert_int_equal(u.r.groups, full.groups);
                assert_int_equal(u.r.row_stat_bytes, full.row_stat_bytes);
            } else {
                assert_int_equal(u.r.naive_bytes, full.naive_bytes);
            }
            for (size_t i = cuts[c]; i < sizeof u; i++)
                if (u.bytes[i] != 0xCD)
                    fail_msg("report size %zu (%s): byte %zu past it was written", cuts[c],
                             with_ctx ? "fattn_context_memory_report" : "fattn_memory_estimate", i);
        }
    fattn_context_free(ctx);
}

/* Output structs: size 0, and a newer caller's larger report. */
static void test_ext_memory_report_sizes(void **state) {
    (void)state;
    const fattn_attention_desc d = small_desc();
    fattn_memory_report full = FATTN_MEMORY_REPORT_INIT;
    EXPECT_OK(NULL, fattn_memory_estimate(&d, NULL, &full));
    union {
        fattn_memory_report r;
        unsigned char bytes[sizeof(fattn_memory_report) + 24];
    } u;
    memset(&u, 0, sizeof u);
    u.r.size = 0;
    EXPECT(NULL, fattn_memory_estimate(&d, NULL, &u.r), FATTN_ERR_INVALID_ARGUMENT, "INIT|size");
    u.r.size = sizeof u; /* newer, zero tail: filled as far as this library knows */
    EXPECT_OK(NULL, fattn_memory_estimate(&d, NULL, &u.r));
    assert_int_equal(u.r.size, sizeof u);
    full.size = sizeof u;
    assert_memory_equal(&u.r, &full, sizeof full);
    for (size_t i = sizeof(fattn_memory_report); i < sizeof u; i++) assert_int_equal(u.bytes[i], 0);
}

/* fattn.h: "a larger one whose extra bytes are not zero ... is
 * FATTN_ERR_INVALID_ARGUMENT", for every struct, the ones the library
 * fills included. */
static void test_ext_output_structs_newer_nonzero(void **state) {
    (void)state;
    /* A newer caller's larger output struct: the library fills the fields
     * it knows and leaves the rest as the caller initialised them. */
    const fattn_attention_desc d = small_desc();
    union {
        fattn_memory_report r;
        unsigned char bytes[sizeof(fattn_memory_report) + 24];
    } u;
    memset(&u, 0, sizeof u);
    u.r.size = sizeof u;
    u.bytes[sizeof(fattn_memory_report) + 2] = 7;
    EXPECT_OK(NULL, fattn_memory_estimate(&d, NULL, &u.r));
    assert_true(u.r.naive_bytes > 0);
    assert_int_equal(u.r.size, sizeof u);
    for (size_t i = sizeof(fattn_memory_report); i < sizeof u; i++)
        assert_int_equal(u.bytes[i], i == sizeof(fattn_memory_report) + 2 ? 7 : 0);
    union {
        fattn_backend_info i;
        unsigned char bytes[sizeof(fattn_backend_info) + 24];
    } b;
    memset(&b, 0, sizeof b);
    b.i.size = sizeof b;
    b.bytes[sizeof(fattn_backend_info) + 2] = 7;
    EXPECT_OK(NULL, fattn_backend_get_info(FATTN_BACKEND_CPU, &b.i));
    assert_int_equal(b.i.available, 1);
    for (size_t i = sizeof(fattn_backend_info); i < sizeof b; i++)
        assert_int_equal(b.bytes[i], i == sizeof(fattn_backend_info) + 2 ? 7 : 0);
}

/* An older fattn_backend_info without `reason`: it stays untouched, on
 * every backend kind (available or not: an unavailable one has a reason to
 * write, and must not). */
static void test_ext_backend_info(void **state) {
    (void)state;
    for (int kind = FATTN_BACKEND_CPU; kind < FATTN_BACKEND_COUNT; kind++) {
        fattn_backend_info full = FATTN_BACKEND_INFO_INIT;
        EXPECT_OK(NULL, fattn_backend_get_info((fattn_backend_kind)kind, &full));
        union {
            fattn_backend_info i;
            unsigned char bytes[sizeof(fattn_backend_info) + 16];
        } u;
        memset(&u, 0xCD, sizeof u);
        u.i.size = offsetof(fattn_backend_info, reason);
        EXPECT_OK(NULL, fattn_backend_get_info((fattn_backend_kind)kind, &u.i));
        assert_int_equal(u.i.size, offsetof(fattn_backend_info, reason));
        assert_int_equal(u.i.kind, kind);
        assert_string_equal(u.i.name, full.name);
        assert_int_equal(u.i.available, full.available);
        assert_int_equal(u.i.device_count, full.device_count);
        assert_int_equal(u.i.gpu_count, full.gpu_count);
        for (size_t i = offsetof(fattn_backend_info, reason); i < sizeof u; i++)
            if (u.bytes[i] != 0xCD)
                fail_msg("%s: byte %zu past the caller's fattn_backend_info was written", full.name,
                         i);

        /* Newer with a zero tail: all of it filled, the tail left zero. */
        union {
            fattn_backend_info i;
            unsigned char bytes[sizeof(fattn_backend_info) + 16];
        } n;
        memset(&n, 0, sizeof n);
        n.i.size = sizeof n;
        EXPECT_OK(NULL, fattn_backend_get_info((fattn_backend_kind)kind, &n.i));
        assert_string_equal(n.i.reason, full.reason);
        for (size_t i = sizeof(fattn_backend_info); i < sizeof n; i++)
            assert_int_equal(n.bytes[i], 0);
    }
    fattn_backend_info z = FATTN_BACKEND_INFO_INIT;
    z.size = 0;
    EXPECT(NULL, fattn_backend_get_info(FATTN_BACKEND_CPU, &z), FATTN_ERR_INVALID_ARGUMENT,
           "INIT|size");
}

/* An older fattn_tiling without workspace_bytes (garbage after it) counts
 * no workspace. */
static void test_ext_tiling(void **state) {
    (void)state;
    const fattn_attention_desc d = small_desc();
    fattn_tiling full = FATTN_TILING_INIT;
    full.tile_q = 32;
    full.tile_kv = 48;
    full.concurrent_groups = 3;
    fattn_memory_report want = FATTN_MEMORY_REPORT_INIT, got = FATTN_MEMORY_REPORT_INIT;
    EXPECT_OK(NULL, fattn_memory_estimate(&d, &full, &want));
    union {
        fattn_tiling t;
        unsigned char bytes[sizeof(fattn_tiling) + 16];
    } u;
    memset(&u, 0xAB, sizeof u);
    u.t.size = offsetof(fattn_tiling, workspace_bytes);
    u.t.tile_q = 32;
    u.t.tile_kv = 48;
    u.t.concurrent_groups = 3;
    EXPECT_OK(NULL, fattn_memory_estimate(&d, &u.t, &got));
    assert_int_equal(got.workspace_bytes, 0);
    assert_memory_equal(&got, &want, sizeof got);

    memset(&u, 0, sizeof u); /* newer, zero tail */
    u.t = full;
    u.t.size = sizeof u;
    EXPECT_OK(NULL, fattn_memory_estimate(&d, &u.t, &got));
    assert_memory_equal(&got, &want, sizeof got);
    u.bytes[sizeof(fattn_tiling) + 1] = 1;
    EXPECT(NULL, fattn_memory_estimate(&d, &u.t, &got), FATTN_ERR_INVALID_ARGUMENT, "size|field");
    u.t.size = 0;
    EXPECT(NULL, fattn_memory_estimate(&d, &u.t, &got), FATTN_ERR_INVALID_ARGUMENT, "INIT|size");
}

/* An older fattn_context_params: the native-object fields (or the strings
 * too) lie past its size as garbage; a CPU context is made all the same
 * (reading them would either crash or refuse native objects on the CPU). */
static void test_ext_context_params(void **state) {
    (void)state;
    const size_t cuts[] = {offsetof(fattn_context_params, native_context),
                           offsetof(fattn_context_params, opencl_platform)};
    for (size_t c = 0; c < sizeof cuts / sizeof cuts[0]; c++) {
        union {
            fattn_context_params p;
            unsigned char bytes[sizeof(fattn_context_params) + 16];
        } u;
        memset(&u, 0xAB, sizeof u);
        u.p.size = cuts[c];
        u.p.backend = FATTN_BACKEND_CPU;
        u.p.device = 0;
        u.p.cpu_threads = 2;
        if (cuts[c] > offsetof(fattn_context_params, opencl_platform)) {
            u.p.opencl_platform = NULL;
            u.p.opencl_device = NULL;
            u.p.cache_dir = NULL;
        }
        fattn_context *ctx = NULL;
        EXPECT_OK(NULL, fattn_context_create_with(&u.p, &ctx));
        assert_int_equal(fattn_context_backend(ctx), FATTN_BACKEND_CPU);
        fattn_context_free(ctx);
    }
    union {
        fattn_context_params p;
        unsigned char bytes[sizeof(fattn_context_params) + 16];
    } n;
    memset(&n, 0, sizeof n);
    const fattn_context_params init = FATTN_CONTEXT_PARAMS_INIT;
    n.p = init;
    n.p.backend = FATTN_BACKEND_CPU;
    n.p.size = sizeof n;
    fattn_context *ctx = NULL;
    EXPECT_OK(NULL, fattn_context_create_with(&n.p, &ctx));
    fattn_context_free(ctx);
    ctx = NULL;
    n.bytes[sizeof(fattn_context_params) + 9] = 1;
    EXPECT(NULL, fattn_context_create_with(&n.p, &ctx), FATTN_ERR_INVALID_ARGUMENT, "size|field");
    assert_null(ctx);
    n.p.size = 0;
    EXPECT(NULL, fattn_context_create_with(&n.p, &ctx), FATTN_ERR_INVALID_ARGUMENT, "INIT|size");
    assert_null(ctx);
}

/* An older fattn_mask_desc (only the window) with garbage after it asks for
 * nothing: the same output as no mask. */
static void test_ext_mask_desc(void **state) {
    (void)state;
    fattn_context *ctx = cpu_context();
    problem p;
    const fattn_attention_desc full = small_desc();
    prob_init(&p, ctx, &full, 5);
    EXPECT_OK(ctx, prob_call(&p, 0, &p.d));
    outputs base = outputs_take(&p);

    fattn_attention_desc d = full;
    const size_t cuts[] = {offsetof(fattn_mask_desc, softcap),
                           offsetof(fattn_mask_desc, alibi_slopes)};
    for (size_t c = 0; c < sizeof cuts / sizeof cuts[0]; c++) {
        union {
            fattn_mask_desc m;
            unsigned char bytes[sizeof(fattn_mask_desc) + 16];
        } u;
        memset(&u, 0xAB, sizeof u); /* softcap 0xABABABAB is negative: invalid if read */
        u.m.size = cuts[c];
        u.m.window_left = -1;
        u.m.window_right = -1;
        if (cuts[c] > offsetof(fattn_mask_desc, softcap)) u.m.softcap = 0.0f;
        d.mask = &u.m;
        EXPECT_OK(ctx, prob_call(&p, 0, &d));
        EXPECT_SAME_OUTPUTS(&p, &base, "an older mask that asks for nothing");
    }
    union {
        fattn_mask_desc m;
        unsigned char bytes[sizeof(fattn_mask_desc) + 16];
    } n;
    memset(&n, 0, sizeof n);
    const fattn_mask_desc init = FATTN_MASK_DESC_INIT;
    n.m = init;
    n.m.size = sizeof n;
    d.mask = &n.m;
    EXPECT_OK(ctx, prob_call(&p, 0, &d));
    EXPECT_SAME_OUTPUTS(&p, &base, "a newer mask with a zero tail");
    n.bytes[sizeof(fattn_mask_desc) + 4] = 1;
    EXPECT_REJECTED(&p, &d, FATTN_ERR_INVALID_ARGUMENT, "size|field");
    n.m.size = 0;
    EXPECT_REJECTED(&p, &d, FATTN_ERR_INVALID_ARGUMENT, "INIT|size");
    n.m.size = sizeof(size_t); /* smaller than any fattn_mask_desc */
    EXPECT_REJECTED(&p, &d, FATTN_ERR_INVALID_ARGUMENT, "size");
    outputs_free(&base);
    prob_free(&p);
    fattn_context_free(ctx);
}

/* The varlen and paged descriptions are size-first too. */
static void test_ext_varlen_paged_sizes(void **state) {
    (void)state;
    fattn_context *ctx = cpu_context();
    problem p;
    const fattn_attention_desc full = small_desc();
    prob_init(&p, ctx, &full, 6);
    EXPECT_OK(ctx, prob_call(&p, 0, &p.d));
    outputs base = outputs_take(&p);

    fattn_attention_desc d = full;
    fattn_varlen_desc vl = FATTN_VARLEN_DESC_INIT;
    vl.size = 0;
    d.varlen = &vl;
    EXPECT_REJECTED(&p, &d, FATTN_ERR_INVALID_ARGUMENT, "INIT|size");
    union {
        fattn_varlen_desc v;
        unsigned char bytes[sizeof(fattn_varlen_desc) + 16];
    } n;
    memset(&n, 0, sizeof n);
    n.v.size = sizeof n; /* newer, nothing given: a dense batch */
    d.varlen = &n.v;
    EXPECT_OK(ctx, prob_call(&p, 0, &d));
    EXPECT_SAME_OUTPUTS(&p, &base, "a newer empty varlen description");
    n.bytes[sizeof(fattn_varlen_desc) + 8] = 2;
    EXPECT_REJECTED(&p, &d, FATTN_ERR_INVALID_ARGUMENT, "size|field");

    d = full;
    fattn_paged_kv_desc pg = FATTN_PAGED_KV_DESC_INIT;
    pg.size = 0;
    d.paged_kv = &pg;
    EXPECT_REJECTED(&p, &d, FATTN_ERR_INVALID_ARGUMENT, "INIT|size");
    outputs_free(&base);
    prob_free(&p);
    fattn_context_free(ctx);
}

/* =========================================================================== */
/* 2. Sub-descriptions: validated, then UNSUPPORTED naming what was asked for  */
/* =========================================================================== */

/* A float32 per-head tensor (ALiBi slopes, sink logits) of `heads` values. */
static fattn_tensor per_head_tensor(fattn_buffer *buf, fattn_dtype dtype) {
    fattn_tensor t = FATTN_TENSOR_INIT;
    t.buffer = buf;
    t.dtype = dtype;
    t.stride_batch = 0; /* one per head for every batch */
    t.stride_head = 1;
    return t;
}

static fattn_buffer *alloc_floats(fattn_context *ctx, size_t n, uint64_t seed) {
    fattn_buffer *b = NULL;
    assert_int_equal(fattn_buffer_alloc(ctx, n * sizeof(float), &b), FATTN_OK);
    float *tmp = xmalloc_floats(n);
    fill_random(tmp, n, &seed);
    assert_int_equal(fattn_buffer_write(b, 0, tmp, n * sizeof(float)), FATTN_OK);
    free(tmp);
    return b;
}

static fattn_buffer *alloc_ints(fattn_context *ctx, const int32_t *v, size_t n) {
    fattn_buffer *b = NULL;
    assert_int_equal(fattn_buffer_alloc(ctx, n * sizeof(int32_t), &b), FATTN_OK);
    assert_int_equal(fattn_buffer_write(b, 0, v, n * sizeof(int32_t)), FATTN_OK);
    return b;
}

/* With cu_seqlens, Q and O are packed [1, Hq, total_q, D] (K and V [1, Hkv,
 * total_kv, D]) and lse [1, Hq, total_q]: the same buffers as p's dense
 * tensors (total = batch * seq), viewed as varlen asks. */
static void packed_tensors(const problem *p, fattn_tensor t[NT], const fattn_tensor *tt[NT]) {
    const fattn_attention_desc *d = &p->d;
    const int64_t tq = d->batch * d->seq_q, tk = d->batch * d->seq_kv;
    const int64_t heads[NT] = {d->heads_q, d->heads_kv, d->heads_kv, d->heads_q, d->heads_q};
    const int64_t rows[NT] = {tq, tk, tk, tq, tq};
    for (int i = 0; i < NT; i++) {
        if (i == TL)
            EXPECT_OK(NULL, fattn_tensor_init_lse(p->buf[i], 1, heads[i], rows[i], 0, &t[i]));
        else
            EXPECT_OK(NULL, fattn_tensor_init(p->buf[i], d->dtype, FATTN_LAYOUT_BHSD, 1, heads[i],
                                              rows[i], d->head_dim, 0, &t[i]));
        tt[i] = &t[i];
    }
}

static void test_mask_bad_values(void **state) {
    (void)state;
    fattn_context *ctx = cpu_context();
    problem p;
    const fattn_attention_desc full = small_desc();
    prob_init(&p, ctx, &full, 7);
    const int64_t Hq = full.heads_q;
    fattn_attention_desc d = full;
    fattn_mask_desc m = FATTN_MASK_DESC_INIT;
    d.mask = &m;

    m.window_left = -2;
    EXPECT_REJECTED(&p, &d, FATTN_ERR_INVALID_ARGUMENT, "window_left");
    m.window_left = -1;
    m.window_right = -5;
    EXPECT_REJECTED(&p, &d, FATTN_ERR_INVALID_ARGUMENT, "window_right");
    m.window_right = -1;

    const float bad_caps[] = {-1.0f, -0.0001f, NAN, INFINITY, -INFINITY};
    for (size_t i = 0; i < sizeof bad_caps / sizeof bad_caps[0]; i++) {
        m.softcap = bad_caps[i];
        EXPECT_REJECTED(&p, &d, FATTN_ERR_INVALID_ARGUMENT, "softcap");
    }
    m.softcap = 0.0f;

    /* ALiBi slopes and sinks: float32 only, and one value per query head. */
    fattn_buffer *slopes = alloc_floats(ctx, (size_t)Hq, 11);
    fattn_buffer *few = alloc_floats(ctx, (size_t)Hq - 1, 12);
    fattn_tensor t = per_head_tensor(slopes, FATTN_F16);
    m.alibi_slopes = &t;
    EXPECT_REJECTED(&p, &d, FATTN_ERR_DTYPE, "alibi_slopes");
    t.dtype = FATTN_I32;
    EXPECT_REJECTED(&p, &d, FATTN_ERR_DTYPE, "alibi_slopes");
    t = per_head_tensor(few, FATTN_F32);
    EXPECT_REJECTED(&p, &d, FATTN_ERR_BUFFER_TOO_SMALL, "alibi_slopes");
    m.alibi_slopes = NULL;

    t = per_head_tensor(slopes, FATTN_BF16);
    m.sinks = &t;
    EXPECT_REJECTED(&p, &d, FATTN_ERR_DTYPE, "sinks");
    t = per_head_tensor(few, FATTN_F32);
    EXPECT_REJECTED(&p, &d, FATTN_ERR_BUFFER_TOO_SMALL, "sinks");
    m.sinks = NULL;

    /* Bias [B, Hq, Sq, Sk]: f32 or desc->dtype (f32 here), so f16 and i32 are wrong. */
    const size_t nbias = (size_t)(full.batch * Hq * full.seq_q * full.seq_kv);
    fattn_buffer *bias = alloc_floats(ctx, nbias, 13);
    fattn_buffer *short_bias = alloc_floats(ctx, nbias - 1, 14);
    fattn_tensor bt;
    EXPECT_OK(NULL, fattn_tensor_init(bias, FATTN_F16, FATTN_LAYOUT_BHSD, full.batch, Hq,
                                      full.seq_q, full.seq_kv, 0, &bt));
    m.bias = &bt;
    EXPECT_REJECTED(&p, &d, FATTN_ERR_DTYPE, "bias");
    bt.dtype = FATTN_I32;
    EXPECT_REJECTED(&p, &d, FATTN_ERR_DTYPE, "bias");
    EXPECT_OK(NULL, fattn_tensor_init(short_bias, FATTN_F32, FATTN_LAYOUT_BHSD, full.batch, Hq,
                                      full.seq_q, full.seq_kv, 0, &bt));
    EXPECT_REJECTED(&p, &d, FATTN_ERR_BUFFER_TOO_SMALL, "bias");
    m.bias = NULL;

    fattn_buffer_free(slopes);
    fattn_buffer_free(few);
    fattn_buffer_free(bias);
    fattn_buffer_free(short_bias);
    prob_free(&p);
    fattn_context_free(ctx);
}

static void test_varlen_bad_values(void **state) {
    (void)state;
    fattn_context *ctx = cpu_context();
    problem p;
    const fattn_attention_desc full = small_desc();
    prob_init(&p, ctx, &full, 8);
    const int32_t cu_q[] = {0, 5, 10}, cu_kv[] = {0, 7, 14}, used[] = {7, 6};
    fattn_buffer *bq = alloc_ints(ctx, cu_q, 3), *bkv = alloc_ints(ctx, cu_kv, 3);
    fattn_buffer *bused = alloc_ints(ctx, used, 2), *bshort = alloc_ints(ctx, cu_q, 2);
    fattn_tensor tq, tkv, tused, tshort;
    EXPECT_OK(NULL, fattn_tensor_init_index(bq, 1, 3, 0, &tq));
    EXPECT_OK(NULL, fattn_tensor_init_index(bkv, 1, 3, 0, &tkv));
    EXPECT_OK(NULL, fattn_tensor_init_index(bused, 1, 2, 0, &tused));
    EXPECT_OK(NULL, fattn_tensor_init_index(bshort, 1, 3, 0, &tshort)); /* 3 ints on 2 */

    fattn_tensor packed[NT];
    const fattn_tensor *pt[NT];
    packed_tensors(&p, packed, pt);
    fattn_attention_desc d = full;
    fattn_varlen_desc vl = FATTN_VARLEN_DESC_INIT;
    d.varlen = &vl;
    vl.cu_seqlens_q = &tq;
    vl.cu_seqlens_kv = &tkv;
    vl.total_q = full.batch * full.seq_q;
    vl.total_kv = full.batch * full.seq_kv;

    fattn_tensor wrong = tq;
    wrong.dtype = FATTN_F32;
    vl.cu_seqlens_q = &wrong;
    EXPECT_REJECTED_T(&p, &d, pt, FATTN_ERR_DTYPE, "cu_seqlens_q");
    vl.cu_seqlens_q = &tq;
    wrong = tkv;
    wrong.dtype = FATTN_F16;
    vl.cu_seqlens_kv = &wrong;
    EXPECT_REJECTED_T(&p, &d, pt, FATTN_ERR_DTYPE, "cu_seqlens_kv");
    vl.cu_seqlens_kv = &tkv;
    wrong = tused;
    wrong.dtype = FATTN_F32;
    vl.seqused_kv = &wrong;
    EXPECT_REJECTED_T(&p, &d, pt, FATTN_ERR_DTYPE, "seqused_kv");
    vl.seqused_kv = NULL;
    vl.cu_seqlens_q = &tshort;
    EXPECT_REJECTED_T(&p, &d, pt, FATTN_ERR_BUFFER_TOO_SMALL, "cu_seqlens_q");
    vl.cu_seqlens_q = &tq;

    vl.total_q = -1;
    EXPECT_REJECTED_T(&p, &d, pt, FATTN_ERR_INVALID_SIZE, "total_q");
    vl.total_q = full.batch * full.seq_q;
    vl.total_kv = -3;
    EXPECT_REJECTED_T(&p, &d, pt, FATTN_ERR_INVALID_SIZE, "total_kv");
    vl.total_kv = full.batch * full.seq_kv;

    /* Table contents, checked on the host before anything runs: offsets
     * that decrease or pass the total, a sequence longer than seq_q, keys
     * used past what a sequence holds. */
    const int32_t down[] = {0, 5, 4}, past[] = {0, 7, 15}, longer[] = {0, 6, 10}, over[] = {7, 8};
    fattn_buffer *bdown = alloc_ints(ctx, down, 3), *bpast = alloc_ints(ctx, past, 3);
    fattn_buffer *blonger = alloc_ints(ctx, longer, 3), *bover = alloc_ints(ctx, over, 2);
    fattn_tensor tdown, tpast, tlonger, tover;
    EXPECT_OK(NULL, fattn_tensor_init_index(bdown, 1, 3, 0, &tdown));
    EXPECT_OK(NULL, fattn_tensor_init_index(bpast, 1, 3, 0, &tpast));
    EXPECT_OK(NULL, fattn_tensor_init_index(blonger, 1, 3, 0, &tlonger));
    EXPECT_OK(NULL, fattn_tensor_init_index(bover, 1, 2, 0, &tover));
    vl.cu_seqlens_q = &tdown;
    EXPECT_REJECTED_T(&p, &d, pt, FATTN_ERR_INDEX_TABLE, "cu_seqlens_q");
    vl.cu_seqlens_q = &tlonger;
    EXPECT_REJECTED_T(&p, &d, pt, FATTN_ERR_INDEX_TABLE, "cu_seqlens_q");
    vl.cu_seqlens_q = &tq;
    vl.cu_seqlens_kv = &tpast;
    EXPECT_REJECTED_T(&p, &d, pt, FATTN_ERR_INDEX_TABLE, "cu_seqlens_kv");
    vl.cu_seqlens_kv = &tkv;
    vl.seqused_kv = &tover;
    EXPECT_REJECTED_T(&p, &d, pt, FATTN_ERR_INDEX_TABLE, "seqused_kv");
    vl.seqused_kv = &tused; /* the good tables run */
    EXPECT_OK(ctx, prob_call_with(&p, 0, &d, pt));
    fattn_buffer_free(bdown);
    fattn_buffer_free(bpast);
    fattn_buffer_free(blonger);
    fattn_buffer_free(bover);

    fattn_buffer_free(bq);
    fattn_buffer_free(bkv);
    fattn_buffer_free(bused);
    fattn_buffer_free(bshort);
    prob_free(&p);
    fattn_context_free(ctx);
}

/* K and V of the small problem are exactly 2 pages of 7 keys (one per
 * sequence), so the paged description is well-formed for the same tensors. */
static void test_paged_bad_values(void **state) {
    (void)state;
    fattn_context *ctx = cpu_context();
    problem p;
    const fattn_attention_desc full = small_desc();
    prob_init(&p, ctx, &full, 9);
    const int32_t table[] = {0, 1};
    fattn_buffer *bt = alloc_ints(ctx, table, 2), *bshort = alloc_ints(ctx, table, 1);
    fattn_tensor tbl, tshort;
    EXPECT_OK(NULL, fattn_tensor_init_index(bt, 2, 1, 0, &tbl));
    EXPECT_OK(NULL, fattn_tensor_init_index(bshort, 2, 1, 0, &tshort));

    fattn_attention_desc d = full;
    fattn_paged_kv_desc pg = FATTN_PAGED_KV_DESC_INIT;
    d.paged_kv = &pg;
    pg.block_table = &tbl;
    pg.pages_per_seq = 1;
    pg.page_size = full.seq_kv;
    pg.num_pages = full.batch;

    pg.page_size = 0;
    EXPECT_REJECTED(&p, &d, FATTN_ERR_INVALID_SIZE, "page_size");
    pg.page_size = -4;
    EXPECT_REJECTED(&p, &d, FATTN_ERR_INVALID_SIZE, "page_size");
    pg.page_size = full.seq_kv;
    pg.num_pages = 0;
    EXPECT_REJECTED(&p, &d, FATTN_ERR_INVALID_SIZE, "num_pages");
    pg.num_pages = full.batch;
    pg.pages_per_seq = 0;
    EXPECT_REJECTED(&p, &d, FATTN_ERR_INVALID_SIZE, "pages_per_seq");
    pg.pages_per_seq = 1;

    pg.block_table = NULL;
    EXPECT_REJECTED(&p, &d, FATTN_ERR_NULL_POINTER, "block_table");
    fattn_tensor wrong = tbl;
    wrong.dtype = FATTN_F32;
    pg.block_table = &wrong;
    EXPECT_REJECTED(&p, &d, FATTN_ERR_DTYPE, "block_table");
    pg.block_table = &tshort;
    EXPECT_REJECTED(&p, &d, FATTN_ERR_BUFFER_TOO_SMALL, "block_table");

    /* Pages outside 0..num_pages-1 and keys past the cache, checked on the
     * host before anything runs. */
    const int32_t neg[] = {-1, 1}, past[] = {0, 2}, over[] = {7, 8};
    fattn_buffer *bneg = alloc_ints(ctx, neg, 2), *bpast = alloc_ints(ctx, past, 2);
    fattn_buffer *bover = alloc_ints(ctx, over, 2);
    fattn_tensor tneg, tpast, tover;
    EXPECT_OK(NULL, fattn_tensor_init_index(bneg, 2, 1, 0, &tneg));
    EXPECT_OK(NULL, fattn_tensor_init_index(bpast, 2, 1, 0, &tpast));
    EXPECT_OK(NULL, fattn_tensor_init_index(bover, 1, 2, 0, &tover));
    pg.block_table = &tneg;
    EXPECT_REJECTED(&p, &d, FATTN_ERR_INDEX_TABLE, "block_table");
    pg.block_table = &tpast;
    EXPECT_REJECTED(&p, &d, FATTN_ERR_INDEX_TABLE, "block_table");
    pg.block_table = &tbl;
    fattn_varlen_desc vl = FATTN_VARLEN_DESC_INIT;
    vl.seqused_kv = &tover;
    d.varlen = &vl;
    EXPECT_REJECTED(&p, &d, FATTN_ERR_INDEX_TABLE, "seqused_kv");
    d.varlen = NULL;
    EXPECT_OK(ctx, prob_call(&p, 0, &d)); /* the good table runs */
    fattn_buffer_free(bneg);
    fattn_buffer_free(bpast);
    fattn_buffer_free(bover);

    fattn_buffer_free(bt);
    fattn_buffer_free(bshort);
    prob_free(&p);
    fattn_context_free(ctx);
}

/* A ragged request (varlen, paged) on path `naive`: the CPU's tiled path
 * must run it; a backend that does not take ragged problems yet, and the
 * naive baselines, decline it with UNSUPPORTED naming it and write nothing.
 * Returns 1 when it ran. */
static int ragged_ran_(problem *p, fattn_backend_kind kind, int naive,
                       const fattn_attention_desc *d, const fattn_tensor *const *tt,
                       const char *needles, const char *file, int line) {
    const fattn_status st = prob_call_with(p, naive, d, tt);
    const char *call = naive ? "fattn_forward_naive" : "fattn_forward";
    if (st == FATTN_ERR_UNSUPPORTED && (naive || kind != FATTN_BACKEND_CPU)) {
        char why[512];
        snprintf(why, sizeof why, "%s", fattn_error_message(p->ctx));
        expect_(st, FATTN_ERR_UNSUPPORTED, why, needles, call, file, line);
        expect_outputs_untouched_(p, file, line);
        print_message("[     NOTE ] %s: %s declines it: %s\n", fattn_context_backend_name(p->ctx),
                      call, why);
        return 0;
    }
    expect_(st, FATTN_OK, fattn_error_message(p->ctx), "", call, file, line);
    return 1;
}

/* The packed view of p's buffers (packed_tensors) is the dense problem p->d
 * with sequence b at rows b * seq of each head: checks O and lse so. */
static void check_packed_(problem *p, const char *what, const char *file, int line) {
    const fattn_attention_desc *d = &p->d;
    const int64_t B = d->batch, D = d->head_dim, Sq = d->seq_q, Sk = d->seq_kv;
    prob_read_outputs(p);
    const hview q = {p->host[TQ], 0, Sq * D, B * Sq * D, D},
                k = {p->host[TK], 0, Sk * D, B * Sk * D, D},
                v = {p->host[TV], 0, Sk * D, B * Sk * D, D},
                o = {p->host[TO], 0, Sq * D, B * Sq * D, D}, l = {p->host[TL], 0, Sq, B * Sq, 1};
    check_views_(d, &q, &k, &v, &o, &l, what, file, line);
}

/* A variant of the mask runs (on the CPU always: test_variants checks its
 * values) or, on a backend whose kernels do not take it yet, is declined
 * with UNSUPPORTED naming it, before anything is written. */
static void variant_runs_or_declines_(problem *p, int paths, int must_run,
                                      const fattn_attention_desc *d, const char *needle,
                                      const char *file, int line) {
    for (int naive = 0; naive <= 1; naive++) {
        if (!(paths & (naive ? PATH_NAIVE : PATH_TILED))) continue;
        const fattn_status got = prob_call(p, naive, d);
        const char *call = naive ? "fattn_forward_naive" : "fattn_forward";
        expect_(got, must_run || got != FATTN_ERR_UNSUPPORTED ? FATTN_OK : FATTN_ERR_UNSUPPORTED,
                fattn_error_message(p->ctx), needle, call, file, line);
        if (got != FATTN_OK) expect_outputs_untouched_(p, file, line);
    }
}

/* The mask's variants (window, softcap, ALiBi, sinks, bias) each run on the
 * CPU and run or are declined naming them elsewhere, and a mask equal to
 * FATTN_MASK_DESC_INIT or a varlen description with nothing given asks for
 * nothing (bitwise the same output as none). On every backend: a refusal
 * must come before any backend runs anything. Variable-length batches and
 * paged caches: the CPU runs them (checked against the reference), other
 * backends run them or decline them. */
static void reserved_features(fattn_backend_kind kind) {
    fattn_context *ctx = open_backend(kind);
    problem p;
    const fattn_attention_desc full = small_desc();
    prob_init(&p, ctx, &full, 10);
    const int64_t Hq = full.heads_q;
    const int paths = kind == FATTN_BACKEND_CPU ? PATH_BOTH : PATH_TILED;

    fattn_attention_desc d = full;
    d.causal = FATTN_CAUSAL_BOTTOM_RIGHT;
    p.d.causal = d.causal;
    RUN_OK(&p, 0, &d, "no mask");
    outputs base = outputs_take(&p);

    /* Asks for nothing. */
    const fattn_mask_desc none = FATTN_MASK_DESC_INIT;
    fattn_mask_desc m = none;
    d.mask = &m;
    EXPECT_OK(ctx, prob_call(&p, 0, &d));
    EXPECT_SAME_OUTPUTS(&p, &base, "mask = FATTN_MASK_DESC_INIT");
    fattn_varlen_desc vnone = FATTN_VARLEN_DESC_INIT;
    d.varlen = &vnone;
    EXPECT_OK(ctx, prob_call(&p, 0, &d));
    EXPECT_SAME_OUTPUTS(&p, &base, "an INIT mask and an empty varlen description");
    d.mask = NULL;
    EXPECT_OK(ctx, prob_call(&p, 0, &d));
    EXPECT_SAME_OUTPUTS(&p, &base, "an empty varlen description");
    d.varlen = NULL;
    d.mask = &m;

    /* Each feature alone. */
    m.window_left = 3;
    variant_runs_or_declines_(&p, paths, kind == FATTN_BACKEND_CPU, &d, "window", __FILE__,
                              __LINE__);
    m = none;
    m.window_right = 0;
    variant_runs_or_declines_(&p, paths, kind == FATTN_BACKEND_CPU, &d, "window", __FILE__,
                              __LINE__);
    m = none;
    m.softcap = 30.0f;
    variant_runs_or_declines_(&p, paths, kind == FATTN_BACKEND_CPU, &d, "softcap", __FILE__,
                              __LINE__);
    m = none;
    fattn_buffer *slopes = alloc_floats(ctx, (size_t)Hq, 21);
    fattn_tensor ts = per_head_tensor(slopes, FATTN_F32);
    m.alibi_slopes = &ts;
    variant_runs_or_declines_(&p, paths, kind == FATTN_BACKEND_CPU, &d, "alibi", __FILE__,
                              __LINE__);
    m = none;
    m.sinks = &ts;
    variant_runs_or_declines_(&p, paths, kind == FATTN_BACKEND_CPU, &d, "sink", __FILE__, __LINE__);
    m = none;
    fattn_buffer *bias =
        alloc_floats(ctx, (size_t)(full.batch * Hq * full.seq_q * full.seq_kv), 22);
    fattn_tensor tb;
    EXPECT_OK(NULL, fattn_tensor_init(bias, FATTN_F32, FATTN_LAYOUT_BHSD, full.batch, Hq,
                                      full.seq_q, full.seq_kv, 0, &tb));
    m.bias = &tb;
    variant_runs_or_declines_(&p, paths, kind == FATTN_BACKEND_CPU, &d, "bias", __FILE__, __LINE__);
    d.mask = NULL;

    /* Variable-length: packed Q is [1, Hq, B*Sq, D], on the same buffers as
     * the dense tensors here, so each sequence is a dense problem of its own. */
    const int32_t cu_q[] = {0, 5, 10}, cu_kv[] = {0, 7, 14}, used[] = {7, 7}, table[] = {0, 1};
    fattn_buffer *bq = alloc_ints(ctx, cu_q, 3), *bkv = alloc_ints(ctx, cu_kv, 3);
    fattn_buffer *bused = alloc_ints(ctx, used, 2), *btab = alloc_ints(ctx, table, 2);
    fattn_tensor tq, tkv, tused, ttab;
    EXPECT_OK(NULL, fattn_tensor_init_index(bq, 1, 3, 0, &tq));
    EXPECT_OK(NULL, fattn_tensor_init_index(bkv, 1, 3, 0, &tkv));
    EXPECT_OK(NULL, fattn_tensor_init_index(bused, 1, 2, 0, &tused));
    EXPECT_OK(NULL, fattn_tensor_init_index(btab, 2, 1, 0, &ttab));
    fattn_varlen_desc vl = FATTN_VARLEN_DESC_INIT;
    vl.cu_seqlens_q = &tq;
    vl.cu_seqlens_kv = &tkv;
    vl.total_q = full.batch * full.seq_q;
    vl.total_kv = full.batch * full.seq_kv;
    d.varlen = &vl;
    fattn_tensor packed[NT];
    const fattn_tensor *pt[NT];
    packed_tensors(&p, packed, pt);
    for (int naive = 0; naive <= 1; naive++) {
        if (!(paths & (naive ? PATH_NAIVE : PATH_TILED))) continue;
        if (ragged_ran_(&p, kind, naive, &d, pt, "varlen|variable-length", __FILE__, __LINE__))
            check_packed_(&p, "packed variable-length sequences", __FILE__, __LINE__);
    }
    /* A padded cache: seqused_kv alone, every key used, so the dense answer. */
    fattn_varlen_desc padded = FATTN_VARLEN_DESC_INIT;
    padded.seqused_kv = &tused;
    d.varlen = &padded;
    for (int naive = 0; naive <= 1; naive++) {
        if (!(paths & (naive ? PATH_NAIVE : PATH_TILED))) continue;
        if (ragged_ran_(&p, kind, naive, &d, NULL, "varlen|variable-length", __FILE__, __LINE__))
            PROB_CHECK(&p, "seqused_kv with every key used");
    }
    d.varlen = NULL;

    /* Paged: one page of seq_kv keys per sequence, page b for sequence b, so
     * the dense K and V are the cache and the answer is the dense one. */
    fattn_paged_kv_desc pg = FATTN_PAGED_KV_DESC_INIT;
    pg.block_table = &ttab;
    pg.pages_per_seq = 1;
    pg.page_size = full.seq_kv;
    pg.num_pages = full.batch;
    d.paged_kv = &pg;
    for (int naive = 0; naive <= 1; naive++) {
        if (!(paths & (naive ? PATH_NAIVE : PATH_TILED))) continue;
        if (ragged_ran_(&p, kind, naive, &d, NULL, "paged", __FILE__, __LINE__))
            PROB_CHECK(&p, "a paged cache, page b for sequence b");
    }
    d.paged_kv = NULL;

    fattn_buffer *const bufs[] = {slopes, bias, bq, bkv, bused, btab};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) fattn_buffer_free(bufs[i]);
    outputs_free(&base);
    prob_free(&p);
    fattn_context_free(ctx);
}
PER_BACKEND(reserved_features)

/* fattn_attention_host takes no varlen or paged description: host arrays
 * in one layout cannot express them. */
static void test_host_rejects_varlen_paged(void **state) {
    (void)state;
    fattn_context *ctx = cpu_context();
    problem p;
    const fattn_attention_desc full = small_desc();
    prob_init(&p, ctx, &full, 11);
    fattn_attention_desc d = full;
    fattn_varlen_desc vl = FATTN_VARLEN_DESC_INIT;
    /* a well-formed cache (see test_paged_bad_values), so only the call is wrong */
    const int32_t table[] = {0, 1};
    fattn_buffer *btab = alloc_ints(ctx, table, 2);
    fattn_tensor ttab;
    EXPECT_OK(NULL, fattn_tensor_init_index(btab, 2, 1, 0, &ttab));
    fattn_paged_kv_desc pg = FATTN_PAGED_KV_DESC_INIT;
    pg.block_table = &ttab;
    pg.pages_per_seq = 1;
    pg.page_size = full.seq_kv;
    pg.num_pages = full.batch;
    fill_poison(p.host[TO], p.count[TO]);
    d.varlen = &vl;
    EXPECT(ctx,
           fattn_attention_host(ctx, &d, FATTN_LAYOUT_BHSD, p.host[TQ], p.host[TK], p.host[TV],
                                p.host[TO], NULL),
           FATTN_ERR_INVALID_ARGUMENT, "varlen|variable-length");
    d.varlen = NULL;
    d.paged_kv = &pg;
    EXPECT(ctx,
           fattn_attention_host(ctx, &d, FATTN_LAYOUT_BHSD, p.host[TQ], p.host[TK], p.host[TV],
                                p.host[TO], NULL),
           FATTN_ERR_INVALID_ARGUMENT, "paged");
    for (size_t i = 0; i < p.count[TO]; i++) assert_true(is_poison(p.host[TO][i]));
    d.paged_kv = NULL;
    EXPECT_OK(ctx, fattn_attention_host(ctx, &d, FATTN_LAYOUT_BHSD, p.host[TQ], p.host[TK],
                                        p.host[TV], p.host[TO], NULL));
    fattn_buffer_free(btab);
    prob_free(&p);
    fattn_context_free(ctx);
}

/* =========================================================================== */
/* 3. Causal alignment                                                          */
/* =========================================================================== */

/* Both alignments with seq_q < seq_kv, seq_q > seq_kv and equal, on the
 * tiled and (where the backend has it) naive paths. Bottom-right with
 * seq_q > seq_kv leaves the first seq_q - seq_kv rows without a key. */
static void causal_alignment(fattn_backend_kind kind) {
    fattn_context *ctx = open_backend(kind);
    const int64_t shapes[][2] = {{5, 9}, {9, 5}, {6, 1}, {1, 6}, {7, 7}, {37, 21}};
    const fattn_causal modes[] = {FATTN_CAUSAL_BOTTOM_RIGHT, FATTN_CAUSAL_TOP_LEFT};
    int said = 0;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        const int64_t sq = shapes[s][0], sk = shapes[s][1];
        const fattn_attention_desc base = make_desc(2, 4, 2, sq, sk, 8);
        problem p;
        prob_init(&p, ctx, &base, 30 + s);
        outputs first = {0};
        for (size_t m = 0; m < 2; m++) {
            p.d.causal = modes[m];
            char what[96];
            for (int naive = 1; naive >= 0; naive--) {
                snprintf(what, sizeof what, "%s, %s causal, %lldx%lld", naive ? "naive" : "tiled",
                         modes[m] == FATTN_CAUSAL_TOP_LEFT ? "top-left" : "bottom-right",
                         (long long)sq, (long long)sk);
                const fattn_status st = prob_call(&p, naive, &p.d);
                if (naive && naive_missing(st, ctx, &said)) continue;
                expect_(st, FATTN_OK, fattn_error_message(ctx), "", what, __FILE__, __LINE__);
                const int64_t empty = PROB_CHECK(&p, what);
                /* rows without keys: only bottom-right with seq_q > seq_kv */
                const int64_t want = modes[m] == FATTN_CAUSAL_BOTTOM_RIGHT && sq > sk
                                         ? (sq - sk) * p.d.batch * p.d.heads_q
                                         : 0;
                if (empty != want)
                    fail_msg("%s: %lld rows see no key, want %lld", what, (long long)empty,
                             (long long)want);
            }
            if (sq != sk) continue;
            if (m == 0)
                first = outputs_take(&p);
            else
                EXPECT_SAME_OUTPUTS(&p, &first, "top-left vs bottom-right with seq_q == seq_kv");
        }
        if (first.o) outputs_free(&first);
        prob_free(&p);
    }
    fattn_context_free(ctx);
}
PER_BACKEND(causal_alignment)

static void test_causal_invalid(void **state) {
    (void)state;
    fattn_context *ctx = cpu_context();
    problem p;
    const fattn_attention_desc full = small_desc();
    prob_init(&p, ctx, &full, 12);
    const int bad[] = {3, -1, 100};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        fattn_attention_desc d = full;
        d.causal = (fattn_causal)bad[i];
        EXPECT_REJECTED(&p, &d, FATTN_ERR_INVALID_ARGUMENT, "causal");
        fattn_memory_report r = FATTN_MEMORY_REPORT_INIT;
        EXPECT(NULL, fattn_memory_estimate(&d, NULL, &r), FATTN_ERR_INVALID_ARGUMENT, "causal");
        assert_true(fattn_flops(&d) == 0.0);
    }
    prob_free(&p);
    fattn_context_free(ctx);
}

/* fattn_flops (and the report's flops) count exactly the visible pairs. */
static void test_flops_alignment(void **state) {
    (void)state;
    const int64_t shapes[][2] = {{5, 9}, {9, 5}, {6, 1}, {1, 6}, {7, 7}, {100, 3}, {3, 100}};
    const fattn_causal modes[] = {FATTN_CAUSAL_NONE, FATTN_CAUSAL_BOTTOM_RIGHT,
                                  FATTN_CAUSAL_TOP_LEFT};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (size_t m = 0; m < 3; m++) {
            fattn_attention_desc d = make_desc(3, 4, 2, shapes[s][0], shapes[s][1], 24);
            d.causal = modes[m];
            int64_t pairs = 0;
            for (int64_t i = 0; i < d.seq_q; i++)
                for (int64_t j = 0; j < d.seq_kv; j++)
                    pairs += sees(d.causal, d.seq_q, d.seq_kv, i, j);
            const double want = 4.0 * (double)(d.batch * d.heads_q * d.head_dim) * (double)pairs;
            const double got = fattn_flops(&d);
            if (got != want)
                fail_msg("fattn_flops, causal %d, %lldx%lld: %.17g, want %.17g (%lld pairs)",
                         (int)modes[m], (long long)d.seq_q, (long long)d.seq_kv, got, want,
                         (long long)pairs);
            fattn_memory_report r = FATTN_MEMORY_REPORT_INIT;
            EXPECT_OK(NULL, fattn_memory_estimate(&d, NULL, &r));
            assert_true(r.flops == want);
        }
}

/* =========================================================================== */
/* 4. Context parameters                                                        */
/* =========================================================================== */

static void test_param_tiles(void **state) {
    (void)state;
    fattn_context *ctx = cpu_context();
    problem p;
    const fattn_attention_desc full = make_desc(1, 2, 1, 37, 45, 8); /* several 16-tiles, ragged */
    prob_init(&p, ctx, &full, 13);
    const fattn_param tiles[] = {FATTN_PARAM_TILE_Q, FATTN_PARAM_TILE_KV};
    for (int i = 0; i < 2; i++) {
        int64_t v = -7;
        EXPECT_OK(ctx, fattn_context_get_param(ctx, tiles[i], &v));
        assert_int_equal(v, 0); /* the backend's choice */
        EXPECT_OK(ctx, fattn_context_set_param(ctx, tiles[i], 16));
        EXPECT_OK(ctx, fattn_context_get_param(ctx, tiles[i], &v));
        assert_int_equal(v, 16);
        EXPECT(ctx, fattn_context_set_param(ctx, tiles[i], -1), FATTN_ERR_INVALID_ARGUMENT, "TILE");
        EXPECT_OK(ctx, fattn_context_get_param(ctx, tiles[i], &v));
        assert_int_equal(v, 16); /* a refused value changes nothing */
    }
    for (int c = 0; c < 2; c++) {
        p.d.causal = c ? FATTN_CAUSAL_BOTTOM_RIGHT : FATTN_CAUSAL_NONE;
        RUN_OK(&p, 0, &p.d, "tiles 16 x 16");
    }
    p.d.causal = FATTN_CAUSAL_NONE;

    /* Odd tiles: either run correctly or are UNSUPPORTED, never wrong. */
    EXPECT_OK(ctx, fattn_context_set_param(ctx, FATTN_PARAM_TILE_Q, 5));
    EXPECT_OK(ctx, fattn_context_set_param(ctx, FATTN_PARAM_TILE_KV, 3));
    const fattn_status st = prob_call(&p, 0, &p.d);
    if (st == FATTN_OK)
        PROB_CHECK(&p, "tiles 5 x 3");
    else
        expect_(st, FATTN_ERR_UNSUPPORTED, fattn_error_message(ctx), "tile", "tiles 5 x 3",
                __FILE__, __LINE__);

    /* A tile the CPU cannot run: the forward says so, naming the limit. */
    EXPECT_OK(ctx, fattn_context_set_param(ctx, FATTN_PARAM_TILE_Q, 0));
    EXPECT_OK(ctx, fattn_context_set_param(ctx, FATTN_PARAM_TILE_KV, 4096));
    expect_rejected_(&p, PATH_TILED, &p.d, NULL, FATTN_ERR_UNSUPPORTED, "tile", __FILE__, __LINE__);
    /* The naive path has no tiles. */
    RUN_OK(&p, 1, &p.d, "naive with an impossible tile set");
    EXPECT_OK(ctx, fattn_context_set_param(ctx, FATTN_PARAM_TILE_KV, 0));
    RUN_OK(&p, 0, &p.d, "tiles reset to 0");
    prob_free(&p);
    fattn_context_free(ctx);
}

/* The brief's example: 100000 is accepted by set_param and refused by the
 * forward as UNSUPPORTED (the CPU cannot run it). */
static void test_param_tile_100000(void **state) {
    (void)state;
    fattn_context *ctx = cpu_context();
    problem p;
    const fattn_attention_desc full = small_desc();
    prob_init(&p, ctx, &full, 14);
    /* Past the documented range (1..65536) the set itself is refused and
     * the previous value stays. */
    int64_t v = -1;
    EXPECT(ctx, fattn_context_set_param(ctx, FATTN_PARAM_TILE_Q, 100000),
           FATTN_ERR_INVALID_ARGUMENT, "65536");
    EXPECT_OK(ctx, fattn_context_get_param(ctx, FATTN_PARAM_TILE_Q, &v));
    assert_int_equal(v, 0);
    RUN_OK(&p, 0, &p.d, "after a refused tile");
    prob_free(&p);
    fattn_context_free(ctx);
}

/* Threads change the schedule, never the answer: bitwise the same. */
static void test_param_cpu_threads(void **state) {
    (void)state;
    fattn_context *ctx = cpu_context();
    problem p;
    const fattn_attention_desc full = make_desc(2, 4, 2, 37, 29, 8);
    prob_init(&p, ctx, &full, 15);
    RUN_OK(&p, 0, &p.d, "default threads");
    outputs base = outputs_take(&p);
    const int counts[] = {1, 3, 7};
    for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++) {
        int64_t v = 0;
        EXPECT_OK(ctx, fattn_context_set_param(ctx, FATTN_PARAM_CPU_THREADS, counts[i]));
        EXPECT_OK(ctx, fattn_context_get_param(ctx, FATTN_PARAM_CPU_THREADS, &v));
        assert_int_equal(v, counts[i]);
        EXPECT_OK(ctx, prob_call(&p, 0, &p.d));
        EXPECT_SAME_OUTPUTS(&p, &base, "a set thread count");
    }
    int64_t v = 0;
    EXPECT_OK(ctx, fattn_context_set_param(ctx, FATTN_PARAM_CPU_THREADS, 1024));
    EXPECT_OK(ctx, fattn_context_get_param(ctx, FATTN_PARAM_CPU_THREADS, &v));
    assert_int_equal(v, 1024);
    EXPECT_OK(ctx, fattn_context_set_param(ctx, FATTN_PARAM_CPU_THREADS, 0)); /* as created */
    EXPECT_OK(ctx, prob_call(&p, 0, &p.d));
    EXPECT_SAME_OUTPUTS(&p, &base, "threads reset to 0");
    EXPECT(ctx, fattn_context_set_param(ctx, FATTN_PARAM_CPU_THREADS, 2000),
           FATTN_ERR_INVALID_ARGUMENT, "CPU_THREADS|thread");
    EXPECT(ctx, fattn_context_set_param(ctx, FATTN_PARAM_CPU_THREADS, -1),
           FATTN_ERR_INVALID_ARGUMENT, "CPU_THREADS|thread");
    outputs_free(&base);
    prob_free(&p);
    fattn_context_free(ctx);
}

static void test_param_errors(void **state) {
    (void)state;
    fattn_context *ctx = cpu_context();
    int64_t v = 0;
    EXPECT(ctx, fattn_context_set_param(ctx, (fattn_param)7, 1), FATTN_ERR_INVALID_ARGUMENT,
           "param");
    EXPECT(ctx, fattn_context_get_param(ctx, (fattn_param)199, &v), FATTN_ERR_INVALID_ARGUMENT,
           "param");
    EXPECT(ctx, fattn_context_get_param(ctx, FATTN_PARAM_TILE_Q, NULL), FATTN_ERR_NULL_POINTER,
           "value|NULL");
    /* A NULL context reports through the calling thread's slot. */
    clear_thread_slot();
    EXPECT(NULL, fattn_context_set_param(NULL, FATTN_PARAM_TILE_Q, 16), FATTN_ERR_NULL_POINTER,
           "ctx|context");
    clear_thread_slot();
    EXPECT(NULL, fattn_context_get_param(NULL, FATTN_PARAM_TILE_Q, &v), FATTN_ERR_NULL_POINTER,
           "ctx|context");
    fattn_context_free(ctx);
}

/* On every backend: tiles round-trip, an impossible tile is UNSUPPORTED at
 * the forward, 0 restores the backend's choice; CPU_THREADS is the CPU's. */
static void params_on_backend(fattn_backend_kind kind) {
    fattn_context *ctx = open_backend(kind);
    problem p;
    const fattn_attention_desc full = small_desc();
    prob_init(&p, ctx, &full, 16);
    int64_t v = -1;
    EXPECT_OK(ctx, fattn_context_set_param(ctx, FATTN_PARAM_TILE_KV, 32));
    EXPECT_OK(ctx, fattn_context_get_param(ctx, FATTN_PARAM_TILE_KV, &v));
    assert_int_equal(v, 32);
    EXPECT_OK(ctx, fattn_context_set_param(ctx, FATTN_PARAM_TILE_KV, 0));
    EXPECT_OK(ctx, fattn_context_set_param(ctx, FATTN_PARAM_TILE_Q, 50000));
    expect_rejected_(&p, PATH_TILED, &p.d, NULL, FATTN_ERR_UNSUPPORTED, "tile", __FILE__, __LINE__);
    EXPECT_OK(ctx, fattn_context_set_param(ctx, FATTN_PARAM_TILE_Q, 0));
    RUN_OK(&p, 0, &p.d, "tiles back to the backend's choice");
    if (kind != FATTN_BACKEND_CPU) {
        EXPECT(ctx, fattn_context_set_param(ctx, FATTN_PARAM_CPU_THREADS, 2),
               FATTN_ERR_INVALID_ARGUMENT, "CPU_THREADS|thread");
        EXPECT_OK(ctx, fattn_context_set_param(ctx, FATTN_PARAM_CPU_THREADS, 0));
    }
    prob_free(&p);
    fattn_context_free(ctx);
}
PER_BACKEND(params_on_backend)

/* =========================================================================== */
/* 5. fattn_context_create_with                                                 */
/* =========================================================================== */

static void test_create_with_cpu(void **state) {
    (void)state;
    fattn_context_params prm = FATTN_CONTEXT_PARAMS_INIT;
    prm.backend = FATTN_BACKEND_CPU;
    fattn_context *ctx = NULL;
    EXPECT_OK(NULL, fattn_context_create_with(&prm, &ctx));
    assert_int_equal(fattn_context_backend(ctx), FATTN_BACKEND_CPU);
    assert_int_equal(fattn_context_device(ctx), 0);
    fattn_context_free(ctx);

    prm.cpu_threads = 3;
    prm.device = 0;
    EXPECT_OK(NULL, fattn_context_create_with(&prm, &ctx));
    problem p;
    const fattn_attention_desc full = small_desc();
    prob_init(&p, ctx, &full, 17);
    RUN_OK(&p, 0, &p.d, "a context made with cpu_threads = 3");
    prob_free(&p);
    fattn_context_free(ctx);

    ctx = NULL;
    const int bad[] = {-1, 1025, 2000};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        prm.cpu_threads = bad[i];
        EXPECT(NULL, fattn_context_create_with(&prm, &ctx), FATTN_ERR_INVALID_ARGUMENT,
               "cpu_threads");
        assert_null(ctx);
    }
    prm.cpu_threads = 0;
    EXPECT(NULL, fattn_context_create_with(NULL, &ctx), FATTN_ERR_NULL_POINTER, "params|NULL");
    EXPECT(NULL, fattn_context_create_with(&prm, NULL), FATTN_ERR_NULL_POINTER, "out|NULL");
}

/* An explicit API value wins over the environment; 0 falls back to it. */
static void test_create_with_env_precedence(void **state) {
    (void)state;
    test_env saved = env_save("FATTN_CPU_THREADS");
    setenv("FATTN_CPU_THREADS", "abc", 1);
    fattn_context *ctx = NULL;
    const fattn_status plain = fattn_context_create(FATTN_BACKEND_CPU, 0, &ctx);
    const int plain_ok = plain == FATTN_ERR_ENVIRONMENT && ctx == NULL &&
                         msg_has(fattn_error_message(NULL), "FATTN_CPU_THREADS");
    char plain_msg[512];
    snprintf(plain_msg, sizeof plain_msg, "%s", fattn_error_message(NULL));
    fattn_context_free(ctx);
    ctx = NULL;

    fattn_context_params prm = FATTN_CONTEXT_PARAMS_INIT;
    prm.backend = FATTN_BACKEND_CPU;
    prm.cpu_threads = 2;
    const fattn_status with = fattn_context_create_with(&prm, &ctx);
    char with_msg[512];
    snprintf(with_msg, sizeof with_msg, "%s", fattn_error_message(NULL));
    fattn_context_free(ctx);
    ctx = NULL;
    prm.cpu_threads = 0;
    const fattn_status fallback = fattn_context_create_with(&prm, &ctx);
    fattn_context_free(ctx);
    env_restore(&saved); /* before any assertion, so a failure cannot leak it */

    if (!plain_ok)
        fail_msg("FATTN_CPU_THREADS=abc: fattn_context_create gave %s \"%s\"; want "
                 "FATTN_ERR_ENVIRONMENT naming the variable",
                 fattn_status_string(plain), plain_msg);
    if (with != FATTN_OK)
        fail_msg(
            "FATTN_CPU_THREADS=abc, params.cpu_threads = 2: %s \"%s\"; the API value should win",
            fattn_status_string(with), with_msg);
    assert_int_equal(fallback, FATTN_ERR_ENVIRONMENT);
}

/* The CPU backend takes no native objects. */
static void test_create_with_cpu_rejects_native(void **state) {
    (void)state;
    int dummy = 0;
    for (int field = 0; field < 3; field++) {
        fattn_context_params prm = FATTN_CONTEXT_PARAMS_INIT;
        prm.backend = FATTN_BACKEND_CPU;
        if (field == 0) prm.native_context = &dummy;
        if (field == 1) prm.native_device = &dummy;
        if (field == 2) prm.native_queue = &dummy;
        fattn_context *ctx = NULL;
        EXPECT(NULL, fattn_context_create_with(&prm, &ctx), FATTN_ERR_INVALID_ARGUMENT, "native");
        assert_null(ctx);
    }
}

/* OpenCL settings through the API: filters, the program cache directory,
 * and their precedence over FATTN_OPENCL_DEVICE. */
static void test_create_with_opencl_settings(void **state) {
    (void)state;
    fattn_backend_info info = FATTN_BACKEND_INFO_INIT;
    test_use_backend(FATTN_BACKEND_OPENCL, &info);
    fattn_context_params prm = FATTN_CONTEXT_PARAMS_INIT;
    prm.backend = FATTN_BACKEND_OPENCL;
    prm.device = 0;
    fattn_context *ctx = NULL;

    prm.opencl_device = ""; /* no filter */
    prm.opencl_platform = "";
    EXPECT_OK(NULL, fattn_context_create_with(&prm, &ctx));
    fattn_context_free(ctx);
    ctx = NULL;

    prm.opencl_device = "fattn-no-such-device-zq";
    const fattn_status st = fattn_context_create_with(&prm, &ctx);
    if (st != FATTN_ERR_BACKEND_UNAVAILABLE && st != FATTN_ERR_NO_DEVICE)
        fail_msg("a device filter that matches nothing: %s \"%s\"; want BACKEND_UNAVAILABLE or "
                 "NO_DEVICE",
                 fattn_status_string(st), fattn_error_message(NULL));
    assert_true(fattn_error_message(NULL)[0] != '\0');
    assert_null(ctx);
    prm.opencl_device = "";
    prm.opencl_platform = "fattn-no-such-platform-zq";
    const fattn_status st2 = fattn_context_create_with(&prm, &ctx);
    if (st2 != FATTN_ERR_BACKEND_UNAVAILABLE && st2 != FATTN_ERR_NO_DEVICE)
        fail_msg("a platform filter that matches nothing: %s \"%s\"", fattn_status_string(st2),
                 fattn_error_message(NULL));
    assert_null(ctx);
    prm.opencl_platform = NULL;

    /* The API's "" (no filter) wins over an environment filter. */
    test_env saved = env_save("FATTN_OPENCL_DEVICE");
    setenv("FATTN_OPENCL_DEVICE", "fattn-no-such-device-zq", 1);
    const fattn_status env_plain = fattn_context_create(FATTN_BACKEND_OPENCL, 0, &ctx);
    fattn_context_free(ctx);
    ctx = NULL;
    prm.opencl_device = "";
    const fattn_status env_api = fattn_context_create_with(&prm, &ctx);
    char api_msg[512];
    snprintf(api_msg, sizeof api_msg, "%s", fattn_error_message(NULL));
    fattn_context_free(ctx);
    ctx = NULL;
    env_restore(&saved);
    if (env_plain == FATTN_OK)
        fail_msg("FATTN_OPENCL_DEVICE matching nothing did not stop fattn_context_create");
    if (env_api != FATTN_OK)
        fail_msg("params.opencl_device = \"\" should win over FATTN_OPENCL_DEVICE: %s \"%s\"",
                 fattn_status_string(env_api), api_msg);

    /* cache_dir: "off" builds without a disk cache; a relative path is refused. */
    prm.opencl_device = NULL;
    prm.cache_dir = "off";
    EXPECT_OK(NULL, fattn_context_create_with(&prm, &ctx));
    problem p;
    const fattn_attention_desc full = small_desc();
    prob_init(&p, ctx, &full, 18);
    RUN_OK(&p, 0, &p.d, "OpenCL with cache_dir = \"off\"");
    prob_free(&p);
    fattn_context_free(ctx);
    ctx = NULL;
    prm.cache_dir = "relative/cache";
    EXPECT(NULL, fattn_context_create_with(&prm, &ctx), FATTN_ERR_INVALID_ARGUMENT,
           "cache_dir|absolute|relative");
    assert_null(ctx);
}

/* The caller's own cl_context, cl_device_id and cl_command_queue. The test
 * links no OpenCL library, so the few entry points come through dlopen. */
typedef int32_t ocl_int;
typedef uint32_t ocl_uint;
typedef struct ocl_api {
    void *lib;
    ocl_int (*get_platform_ids)(ocl_uint, void **, ocl_uint *);
    ocl_int (*get_device_ids)(void *, uint64_t, ocl_uint, void **, ocl_uint *);
    void *(*create_context)(const intptr_t *, ocl_uint, void *const *,
                            void (*)(const char *, const void *, size_t, void *), void *,
                            ocl_int *);
    void *(*create_command_queue)(void *, void *, uint64_t, ocl_int *);
    ocl_int (*release_context)(void *);
    ocl_int (*release_command_queue)(void *);
} ocl_api;
#define OCL_DEVICE_TYPE_ALL 0xFFFFFFFFull

static int ocl_load(ocl_api *a) {
    memset(a, 0, sizeof *a);
    a->lib = dlopen("libOpenCL.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!a->lib) a->lib = dlopen("libOpenCL.so", RTLD_NOW | RTLD_LOCAL);
    if (!a->lib) return 0;
    struct {
        const char *name;
        void *slot;
    } syms[] = {{"clGetPlatformIDs", &a->get_platform_ids},
                {"clGetDeviceIDs", &a->get_device_ids},
                {"clCreateContext", &a->create_context},
                {"clCreateCommandQueue", &a->create_command_queue},
                {"clReleaseContext", &a->release_context},
                {"clReleaseCommandQueue", &a->release_command_queue}};
    for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++) {
        void *f = dlsym(a->lib, syms[i].name);
        if (!f) return 0;
        memcpy(syms[i].slot, &f, sizeof f); /* object to function pointer, POSIX-style */
    }
    return 1;
}

static void test_create_with_opencl_native(void **state) {
    (void)state;
    fattn_backend_info info = FATTN_BACKEND_INFO_INIT;
    test_use_backend(FATTN_BACKEND_OPENCL, &info);
    ocl_api cl;
    if (!ocl_load(&cl)) {
        if (cl.lib) dlclose(cl.lib);
        test_skip_unless_required("opencl-native", "cannot dlopen libOpenCL");
    }
    void *platforms[8], *dev = NULL;
    ocl_uint np = 0;
    assert_int_equal(cl.get_platform_ids(8, platforms, &np), 0);
    for (ocl_uint i = 0; i < np && i < 8 && !dev; i++) {
        ocl_uint nd = 0;
        if (cl.get_device_ids(platforms[i], OCL_DEVICE_TYPE_ALL, 1, &dev, &nd) != 0 || nd == 0)
            dev = NULL;
    }
    assert_non_null(dev);
    ocl_int err = -1;
    void *clctx = cl.create_context(NULL, 1, &dev, NULL, NULL, &err);
    assert_int_equal(err, 0);
    void *queue = cl.create_command_queue(clctx, dev, 0, &err);
    assert_int_equal(err, 0);

    fattn_context_params prm = FATTN_CONTEXT_PARAMS_INIT;
    prm.backend = FATTN_BACKEND_OPENCL;
    fattn_context *ctx = NULL;
    prm.native_context = clctx; /* a context without its device is not enough */
    EXPECT(NULL, fattn_context_create_with(&prm, &ctx), FATTN_ERR_INVALID_ARGUMENT,
           "native_device");
    assert_null(ctx);

    /* fattn's own queue on the caller's context. */
    prm.native_device = dev;
    EXPECT_OK(NULL, fattn_context_create_with(&prm, &ctx));
    assert_int_equal(fattn_context_device(ctx), -1);
    problem p;
    const fattn_attention_desc full = small_desc();
    prob_init(&p, ctx, &full, 19);
    RUN_OK(&p, 0, &p.d, "OpenCL on the caller's cl_context");
    prob_free(&p);
    fattn_context_free(ctx);
    ctx = NULL;

    /* The caller's queue too; the caller then drops its own references:
     * fattn retained them, so the context keeps working. */
    prm.native_queue = queue;
    EXPECT_OK(NULL, fattn_context_create_with(&prm, &ctx));
    assert_int_equal(cl.release_command_queue(queue), 0);
    assert_int_equal(cl.release_context(clctx), 0);
    prob_init(&p, ctx, &full, 20);
    RUN_OK(&p, 0, &p.d, "OpenCL on the caller's queue, after the caller released its references");
    prob_free(&p);
    fattn_context_free(ctx);
    dlclose(cl.lib);
}

/* The CUDA runtime, opened at run time like libOpenCL above (the test links
 * no GPU library): just enough to make and sync a stream of the caller's. */
typedef struct cuda_api {
    void *lib;
    int (*stream_create)(void **stream);
    int (*stream_destroy)(void *stream);
    int (*stream_synchronize)(void *stream);
} cuda_api;

static int cuda_load(cuda_api *c) {
    static const char *const names[] = {"libcudart.so", "libcudart.so.13", "libcudart.so.12"};
    memset(c, 0, sizeof *c);
    for (size_t i = 0; i < sizeof names / sizeof names[0] && !c->lib; i++)
        c->lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (!c->lib) return 0;
    *(void **)&c->stream_create = dlsym(c->lib, "cudaStreamCreate");
    *(void **)&c->stream_destroy = dlsym(c->lib, "cudaStreamDestroy");
    *(void **)&c->stream_synchronize = dlsym(c->lib, "cudaStreamSynchronize");
    return c->stream_create && c->stream_destroy && c->stream_synchronize;
}

/* A CUDA context on the caller's stream and the caller's current context:
 * the answer is the reference's, the stream is the caller's to destroy
 * after fattn_context_free, and OpenCL-only native objects are refused. */
static void test_create_with_cuda_native(void **state) {
    (void)state;
    fattn_backend_info info = FATTN_BACKEND_INFO_INIT;
    test_use_backend(FATTN_BACKEND_CUDA, &info);
    cuda_api cu;
    if (!cuda_load(&cu)) {
        if (cu.lib) dlclose(cu.lib);
        test_skip_unless_required("cuda-native", "cannot dlopen libcudart");
    }
    void *stream = NULL;
    assert_int_equal(cu.stream_create(&stream), 0);

    fattn_context_params prm = FATTN_CONTEXT_PARAMS_INIT;
    prm.backend = FATTN_BACKEND_CUDA;
    prm.device = 0;
    fattn_context *ctx = NULL;
    int dummy = 0;
    prm.native_context = &dummy;
    prm.native_device = &dummy;
    EXPECT(NULL, fattn_context_create_with(&prm, &ctx), FATTN_ERR_INVALID_ARGUMENT, "native");
    assert_null(ctx);
    prm.native_context = prm.native_device = NULL;

    prm.native_queue = stream;
    prm.cuda_current_context = 1;
    EXPECT_OK(NULL, fattn_context_create_with(&prm, &ctx));
    problem p;
    const fattn_attention_desc full = make_desc(2, 4, 2, 37, 29, 40);
    prob_init(&p, ctx, &full, 23);
    RUN_OK(&p, 0, &p.d, "CUDA on the caller's stream and current context");
    RUN_OK(&p, 1, &p.d, "CUDA naive on the caller's stream and current context");
    assert_int_equal(cu.stream_synchronize(stream), 0);
    prob_free(&p);
    fattn_context_free(ctx);
    assert_int_equal(cu.stream_destroy(stream), 0);
    dlclose(cu.lib);
}

/* =========================================================================== */
/* 6. Const buffers                                                             */
/* =========================================================================== */

/* Q, K and V live in read-only pages (a write would fault) and are wrapped
 * without casts; O or LSE on a const wrapper is refused, as is writing to it. */
static void test_wrap_const(void **state) {
    (void)state;
    fattn_context *ctx = cpu_context();
    const fattn_attention_desc d = small_desc();
    problem p;
    prob_init(&p, ctx, &d, 21); /* the host copies and the tensors' shapes */
    const size_t bytes = (p.count[TQ] + p.count[TK] + p.count[TV]) * sizeof(float);
    float *pages = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    assert_true(pages != MAP_FAILED);
    memcpy(pages, p.host[TQ], p.count[TQ] * sizeof(float));
    memcpy(pages + p.count[TQ], p.host[TK], p.count[TK] * sizeof(float));
    memcpy(pages + p.count[TQ] + p.count[TK], p.host[TV], p.count[TV] * sizeof(float));
    assert_int_equal(mprotect(pages, bytes, PROT_READ), 0);
    const float *ro = pages;

    fattn_buffer *cq = NULL, *ck = NULL, *cv = NULL;
    EXPECT_OK(ctx, fattn_buffer_wrap_const(ctx, ro, p.count[TQ] * sizeof(float), &cq));
    EXPECT_OK(ctx,
              fattn_buffer_wrap_const(ctx, ro + p.count[TQ], p.count[TK] * sizeof(float), &ck));
    EXPECT_OK(ctx, fattn_buffer_wrap_const(ctx, ro + p.count[TQ] + p.count[TK],
                                           p.count[TV] * sizeof(float), &cv));
    assert_ptr_equal(fattn_buffer_native(cq), ro);
    assert_int_equal(fattn_buffer_size(ck), p.count[TK] * sizeof(float));
    fattn_tensor t[NT];
    memcpy(t, p.t, sizeof t);
    t[TQ].buffer = cq;
    t[TK].buffer = ck;
    t[TV].buffer = cv;
    const fattn_tensor *tt[NT] = {&t[TQ], &t[TK], &t[TV], &t[TO], &t[TL]};
    EXPECT_OK(ctx, prob_call_with(&p, 0, &d, tt));
    PROB_CHECK(&p, "Q, K, V on const wrappers");
    EXPECT_OK(ctx, prob_call_with(&p, 1, &d, tt));
    PROB_CHECK(&p, "naive, Q, K, V on const wrappers");

    /* O and LSE must be writable: on a const wrapper of writable memory they
     * are refused all the same, and the memory keeps its poison. */
    float *o_mem = xmalloc_floats(p.count[TO]), *l_mem = xmalloc_floats(p.count[TL]);
    fill_poison(o_mem, p.count[TO]);
    fill_poison(l_mem, p.count[TL]);
    fattn_buffer *co = NULL, *cl = NULL;
    EXPECT_OK(ctx, fattn_buffer_wrap_const(ctx, o_mem, p.count[TO] * sizeof(float), &co));
    EXPECT_OK(ctx, fattn_buffer_wrap_const(ctx, l_mem, p.count[TL] * sizeof(float), &cl));
    t[TO].buffer = co;
    EXPECT_REJECTED_T(&p, &d, tt, FATTN_ERR_INVALID_ARGUMENT, "~o");
    t[TO] = p.t[TO];
    t[TL].buffer = cl;
    EXPECT_REJECTED_T(&p, &d, tt, FATTN_ERR_INVALID_ARGUMENT, "~lse");
    for (size_t i = 0; i < p.count[TO]; i++) assert_true(is_poison(o_mem[i]));
    for (size_t i = 0; i < p.count[TL]; i++) assert_true(is_poison(l_mem[i]));

    /* Writes through the API are refused; reads work. */
    const float one = 1.0f;
    EXPECT(ctx, fattn_buffer_write(co, 0, &one, sizeof one), FATTN_ERR_INVALID_ARGUMENT,
           "const|read-only|read only");
    EXPECT(ctx, fattn_buffer_write(cq, 0, &one, sizeof one), FATTN_ERR_INVALID_ARGUMENT,
           "const|read-only|read only");
    assert_true(is_poison(o_mem[0]));
    float back = 0;
    EXPECT_OK(ctx, fattn_buffer_read(cq, sizeof(float), &back, sizeof back));
    assert_true(back == p.host[TQ][1]);

    clear_thread_slot();
    fattn_buffer *none = NULL;
    EXPECT(NULL, fattn_buffer_wrap_const(NULL, ro, 16, &none), FATTN_ERR_NULL_POINTER,
           "ctx|context");

    fattn_buffer *const bufs[] = {cq, ck, cv, co, cl};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) fattn_buffer_free(bufs[i]);
    munmap(pages, bytes);
    free(o_mem);
    free(l_mem);
    prob_free(&p);
    fattn_context_free(ctx);
}

/* =========================================================================== */
/* 7. Tensor initialisers                                                       */
/* =========================================================================== */

static void test_tensor_init_fields(void **state) {
    (void)state;
    fattn_context *ctx = cpu_context();
    fattn_buffer *buf = NULL;
    assert_int_equal(fattn_buffer_alloc(ctx, 4096, &buf), FATTN_OK);
    const int64_t B = 2, H = 3, S = 5, D = 8;
    fattn_tensor t;

    memset(&t, 0xAB, sizeof t); /* every field must be written */
    EXPECT_OK(NULL, fattn_tensor_init(buf, FATTN_F16, FATTN_LAYOUT_BSHD, B, H, S, D, 11, &t));
    assert_int_equal(t.size, sizeof(fattn_tensor));
    assert_ptr_equal(t.buffer, buf);
    assert_int_equal(t.dtype, FATTN_F16);
    assert_int_equal(t.offset, 11);
    assert_int_equal(t.stride_batch, S * H * D);
    assert_int_equal(t.stride_head, D);
    assert_int_equal(t.stride_seq, H * D);
    assert_int_equal(t.stride_dim, 1);

    memset(&t, 0xAB, sizeof t);
    EXPECT_OK(NULL, fattn_tensor_init(buf, FATTN_BF16, FATTN_LAYOUT_BHSD, B, H, S, D, 0, &t));
    assert_int_equal(t.size, sizeof(fattn_tensor));
    assert_int_equal(t.dtype, FATTN_BF16);
    assert_int_equal(t.offset, 0);
    assert_int_equal(t.stride_batch, H * S * D);
    assert_int_equal(t.stride_head, S * D);
    assert_int_equal(t.stride_seq, D);
    assert_int_equal(t.stride_dim, 1);

    /* LSE: always f32, contiguous [B, H, S]. */
    memset(&t, 0xAB, sizeof t);
    EXPECT_OK(NULL, fattn_tensor_init_lse(buf, B, H, S, 7, &t));
    assert_int_equal(t.size, sizeof(fattn_tensor));
    assert_ptr_equal(t.buffer, buf);
    assert_int_equal(t.dtype, FATTN_F32);
    assert_int_equal(t.offset, 7);
    assert_int_equal(t.stride_batch, H * S);
    assert_int_equal(t.stride_head, S);
    assert_int_equal(t.stride_seq, 1);

    /* Index tensors: int32, a vector or a [rows, count] table. */
    memset(&t, 0xAB, sizeof t);
    EXPECT_OK(NULL, fattn_tensor_init_index(buf, 1, 5, 3, &t));
    assert_int_equal(t.size, sizeof(fattn_tensor));
    assert_ptr_equal(t.buffer, buf);
    assert_int_equal(t.dtype, FATTN_I32);
    assert_int_equal(t.offset, 3);
    assert_int_equal(t.stride_seq, 1);
    assert_int_equal(t.stride_batch, 5);
    memset(&t, 0xAB, sizeof t);
    EXPECT_OK(NULL, fattn_tensor_init_index(buf, 3, 4, 0, &t));
    assert_int_equal(t.dtype, FATTN_I32);
    assert_int_equal(t.stride_batch, 4);
    assert_int_equal(t.stride_seq, 1);
    fattn_buffer_free(buf);
    fattn_context_free(ctx);
}

/* Bad arguments get specific statuses, through the thread slot. */
static void test_tensor_init_errors(void **state) {
    (void)state;
    fattn_context *ctx = cpu_context();
    fattn_buffer *buf = NULL;
    assert_int_equal(fattn_buffer_alloc(ctx, 256, &buf), FATTN_OK);
    fattn_tensor t;
    const int64_t big = INT64_C(1) << 40;
#define INIT_(B, H, S, D, off, out)                                                                \
    fattn_tensor_init(buf, FATTN_F32, FATTN_LAYOUT_BHSD, B, H, S, D, off, out)
    EXPECT(NULL, INIT_(1, 2, 3, 4, 0, NULL), FATTN_ERR_NULL_POINTER, "out|NULL");
    EXPECT(NULL, INIT_(0, 2, 3, 4, 0, &t), FATTN_ERR_INVALID_SIZE, "batch");
    EXPECT(NULL, INIT_(-1, 2, 3, 4, 0, &t), FATTN_ERR_INVALID_SIZE, "batch");
    EXPECT(NULL, INIT_(1, 0, 3, 4, 0, &t), FATTN_ERR_INVALID_SIZE, "heads");
    EXPECT(NULL, INIT_(1, 2, -3, 4, 0, &t), FATTN_ERR_INVALID_SIZE, "seq");
    EXPECT(NULL, INIT_(1, 2, 3, 0, 0, &t), FATTN_ERR_INVALID_SIZE, "dim");
    EXPECT(NULL, INIT_(1, 2, 3, 4, -1, &t), FATTN_ERR_INVALID_ARGUMENT, "offset");
    EXPECT(NULL, INIT_(big, big, big, 4, 0, &t), FATTN_ERR_OVERFLOW, "overflow");
    EXPECT(NULL, INIT_(1, big, big, 256, 0, &t), FATTN_ERR_OVERFLOW, "overflow");
#undef INIT_
    EXPECT(NULL, fattn_tensor_init(buf, FATTN_F32, (fattn_layout)7, 1, 2, 3, 4, 0, &t),
           FATTN_ERR_INVALID_ARGUMENT, "layout");

    EXPECT(NULL, fattn_tensor_init_lse(buf, 1, 2, 3, 0, NULL), FATTN_ERR_NULL_POINTER, "out|NULL");
    EXPECT(NULL, fattn_tensor_init_lse(buf, 0, 2, 3, 0, &t), FATTN_ERR_INVALID_SIZE, "batch");
    EXPECT(NULL, fattn_tensor_init_lse(buf, 1, -2, 3, 0, &t), FATTN_ERR_INVALID_SIZE, "heads");
    EXPECT(NULL, fattn_tensor_init_lse(buf, 1, 2, 3, -5, &t), FATTN_ERR_INVALID_ARGUMENT, "offset");
    EXPECT(NULL, fattn_tensor_init_lse(buf, big, big, big, 0, &t), FATTN_ERR_OVERFLOW, "overflow");

    EXPECT(NULL, fattn_tensor_init_index(buf, 1, 3, 0, NULL), FATTN_ERR_NULL_POINTER, "out|NULL");
    EXPECT(NULL, fattn_tensor_init_index(buf, 0, 3, 0, &t), FATTN_ERR_INVALID_SIZE, "rows");
    EXPECT(NULL, fattn_tensor_init_index(buf, 1, -3, 0, &t), FATTN_ERR_INVALID_SIZE, "count");
    EXPECT(NULL, fattn_tensor_init_index(buf, 1, 3, -1, &t), FATTN_ERR_INVALID_ARGUMENT, "offset");
    EXPECT(NULL, fattn_tensor_init_index(buf, big, big, 0, &t), FATTN_ERR_OVERFLOW, "overflow");

    /* Success clears the slot. */
    EXPECT_OK(NULL, fattn_tensor_init_index(buf, 1, 3, 0, &t));
    assert_string_equal(fattn_error_message(NULL), "");
    fattn_buffer_free(buf);
    fattn_context_free(ctx);
}

/* K and V as slices of one cache buffer at element offsets (K in BSHD, V in
 * BHSD), Q and O at offsets of their own; the memory around O stays poisoned. */
static void test_tensor_cache_slice(void **state) {
    (void)state;
    fattn_context *ctx = cpu_context();
    const fattn_attention_desc d = small_desc();
    const int64_t B = d.batch, Hq = d.heads_q, Hkv = d.heads_kv, Sq = d.seq_q, Sk = d.seq_kv,
                  D = d.head_dim;
    const int64_t kv_n = B * Hkv * Sk * D, q_n = B * Hq * Sq * D;
    const int64_t k_off = 123, v_off = k_off + kv_n + 41, q_off = 5, o_off = 3, l_off = 2;
    const size_t cache_n = (size_t)(v_off + kv_n + 17), q_total = (size_t)(q_off + q_n);
    const size_t o_total = (size_t)(o_off + q_n + 9), l_total = (size_t)(l_off + B * Hq * Sq + 4);
    fattn_buffer *cache = NULL, *qb = NULL, *ob = NULL, *lb = NULL;
    assert_int_equal(fattn_buffer_alloc(ctx, cache_n * sizeof(float), &cache), FATTN_OK);
    assert_int_equal(fattn_buffer_alloc(ctx, q_total * sizeof(float), &qb), FATTN_OK);
    assert_int_equal(fattn_buffer_alloc(ctx, o_total * sizeof(float), &ob), FATTN_OK);
    assert_int_equal(fattn_buffer_alloc(ctx, l_total * sizeof(float), &lb), FATTN_OK);
    uint64_t rng = 77;
    fill_random(fattn_buffer_native(cache), cache_n, &rng);
    fill_random(fattn_buffer_native(qb), q_total, &rng);
    float *o = fattn_buffer_native(ob), *l = fattn_buffer_native(lb);
    fill_poison(o, o_total);
    fill_poison(l, l_total);

    fattn_tensor tq, tk, tv, to, tl;
    EXPECT_OK(NULL, fattn_tensor_init(qb, FATTN_F32, FATTN_LAYOUT_BHSD, B, Hq, Sq, D, q_off, &tq));
    EXPECT_OK(NULL,
              fattn_tensor_init(cache, FATTN_F32, FATTN_LAYOUT_BSHD, B, Hkv, Sk, D, k_off, &tk));
    EXPECT_OK(NULL,
              fattn_tensor_init(cache, FATTN_F32, FATTN_LAYOUT_BHSD, B, Hkv, Sk, D, v_off, &tv));
    EXPECT_OK(NULL, fattn_tensor_init(ob, FATTN_F32, FATTN_LAYOUT_BSHD, B, Hq, Sq, D, o_off, &to));
    EXPECT_OK(NULL, fattn_tensor_init_lse(lb, B, Hq, Sq, l_off, &tl));
    for (int naive = 0; naive <= 1; naive++) {
        fattn_attention_desc dd = d;
        dd.causal = naive ? FATTN_CAUSAL_TOP_LEFT : FATTN_CAUSAL_BOTTOM_RIGHT;
        EXPECT_OK(ctx, naive ? fattn_forward_naive(ctx, &dd, &tq, &tk, &tv, &to, &tl)
                             : fattn_forward(ctx, &dd, &tq, &tk, &tv, &to, &tl));
        const float *cb = fattn_buffer_native(cache), *qh = fattn_buffer_native(qb);
        const hview hq = hview_of(qh, &tq), hk = hview_of(cb, &tk), hv = hview_of(cb, &tv),
                    ho = hview_of(o, &to), hl = hview_of(l, &tl);
        check_views_(&dd, &hq, &hk, &hv, &ho, &hl, "K/V cache slices at offsets", __FILE__,
                     __LINE__);
        for (int64_t i = 0; i < o_off; i++) assert_true(is_poison(o[i]));
        for (size_t i = (size_t)(o_off + q_n); i < o_total; i++) assert_true(is_poison(o[i]));
        for (int64_t i = 0; i < l_off; i++) assert_true(is_poison(l[i]));
        for (size_t i = (size_t)(l_off + B * Hq * Sq); i < l_total; i++)
            assert_true(is_poison(l[i]));
    }
    fattn_buffer_free(cache);
    fattn_buffer_free(qb);
    fattn_buffer_free(ob);
    fattn_buffer_free(lb);
    fattn_context_free(ctx);
}

/* A packed QKV buffer [B, S, 3, H, D] as three BSHD tensors: the initialiser
 * gives the offset, the caller widens stride_seq and stride_batch. */
static void test_tensor_packed_qkv(void **state) {
    (void)state;
    fattn_context *ctx = cpu_context();
    const int64_t B = 2, S = 7, H = 3, D = 8;
    fattn_attention_desc d = make_desc(B, H, H, S, S, D);
    const size_t n = (size_t)(B * S * 3 * H * D), on = (size_t)(B * S * H * D),
                 ln = (size_t)(B * H * S);
    fattn_buffer *qkv = NULL, *ob = NULL, *lb = NULL;
    assert_int_equal(fattn_buffer_alloc(ctx, n * sizeof(float), &qkv), FATTN_OK);
    assert_int_equal(fattn_buffer_alloc(ctx, on * sizeof(float), &ob), FATTN_OK);
    assert_int_equal(fattn_buffer_alloc(ctx, ln * sizeof(float), &lb), FATTN_OK);
    uint64_t rng = 99;
    fill_random(fattn_buffer_native(qkv), n, &rng);
    fattn_tensor t[3], to, tl;
    for (int i = 0; i < 3; i++) {
        EXPECT_OK(NULL, fattn_tensor_init(qkv, FATTN_F32, FATTN_LAYOUT_BSHD, B, H, S, D, i * H * D,
                                          &t[i]));
        t[i].stride_seq = 3 * H * D;
        t[i].stride_batch = S * 3 * H * D;
    }
    EXPECT_OK(NULL, fattn_tensor_init(ob, FATTN_F32, FATTN_LAYOUT_BSHD, B, H, S, D, 0, &to));
    EXPECT_OK(NULL, fattn_tensor_init_lse(lb, B, H, S, 0, &tl));
    const float *base = fattn_buffer_native(qkv);
    float *o = fattn_buffer_native(ob), *l = fattn_buffer_native(lb);
    for (int c = 0; c < 3; c++)
        for (int naive = 0; naive <= 1; naive++) {
            d.causal = (fattn_causal)c;
            fill_poison(o, on);
            fill_poison(l, ln);
            EXPECT_OK(ctx, naive ? fattn_forward_naive(ctx, &d, &t[0], &t[1], &t[2], &to, &tl)
                                 : fattn_forward(ctx, &d, &t[0], &t[1], &t[2], &to, &tl));
            const hview hq = hview_of(base, &t[0]), hk = hview_of(base, &t[1]),
                        hv = hview_of(base, &t[2]), ho = hview_of(o, &to), hl = hview_of(l, &tl);
            check_views_(&d, &hq, &hk, &hv, &ho, &hl, "packed QKV", __FILE__, __LINE__);
        }
    fattn_buffer_free(qkv);
    fattn_buffer_free(ob);
    fattn_buffer_free(lb);
    fattn_context_free(ctx);
}

/* seq_kv = 0 with NULL K and V buffers: O = 0 and LSE = -inf everywhere. */
static void empty_kv(fattn_backend_kind kind) {
    fattn_context *ctx = open_backend(kind);
    problem p;
    const fattn_attention_desc full = make_desc(2, 4, 2, 5, 0, 8);
    prob_init(&p, ctx, &full, 22);
    assert_null(p.t[TK].buffer);
    assert_null(p.t[TV].buffer);
    int said = 0;
    for (int c = 0; c < 3; c++)
        for (int naive = 0; naive <= 1; naive++) {
            p.d.causal = (fattn_causal)c;
            const fattn_status st = prob_call(&p, naive, &p.d);
            if (naive && naive_missing(st, ctx, &said)) continue;
            expect_(st, FATTN_OK, fattn_error_message(ctx), "",
                    naive ? "naive, seq_kv = 0" : "seq_kv = 0", __FILE__, __LINE__);
            prob_read_outputs(&p);
            for (size_t i = 0; i < p.count[TO]; i++)
                if (p.host[TO][i] != 0.0f)
                    fail_msg("seq_kv = 0: O[%zu] = %g, want 0", i, (double)p.host[TO][i]);
            for (size_t i = 0; i < p.count[TL]; i++)
                if (p.host[TL][i] != -INFINITY)
                    fail_msg("seq_kv = 0: lse[%zu] = %g, want -inf", i, (double)p.host[TL][i]);
        }
    prob_free(&p);
    fattn_context_free(ctx);
}
PER_BACKEND(empty_kv)

/* =========================================================================== */
/* 8. Workspace, module directory, names                                        */
/* =========================================================================== */

static void test_workspace(void **state) {
    (void)state;
    fattn_context *ctx = cpu_context(), *other = cpu_context();
    problem p;
    const fattn_attention_desc full = small_desc();
    prob_init(&p, ctx, &full, 23);
    uint64_t bytes = 77;
    EXPECT_OK(ctx, fattn_workspace_size(ctx, &full, &bytes));
    assert_int_equal(bytes, 0);
    EXPECT(ctx, fattn_workspace_size(ctx, &full, NULL), FATTN_ERR_NULL_POINTER, "bytes|NULL");
    EXPECT(ctx, fattn_workspace_size(ctx, NULL, &bytes), FATTN_ERR_NULL_POINTER, "desc|NULL");
    clear_thread_slot();
    EXPECT(NULL, fattn_workspace_size(NULL, &full, &bytes), FATTN_ERR_NULL_POINTER, "ctx|context");

    fattn_attention_desc d = full;
    fattn_buffer *mine = NULL, *theirs = NULL, *ro = NULL;
    static const float scratch[64];
    assert_int_equal(fattn_buffer_alloc(ctx, 256, &mine), FATTN_OK);
    assert_int_equal(fattn_buffer_alloc(other, 256, &theirs), FATTN_OK);
    EXPECT_OK(ctx, fattn_buffer_wrap_const(ctx, scratch, sizeof scratch, &ro));
    d.workspace = mine;
    RUN_OK(&p, 0, &d, "with a workspace of the context's own");
    d.workspace = theirs;
    EXPECT_REJECTED(&p, &d, FATTN_ERR_WRONG_CONTEXT, "workspace");
    d.workspace = ro;
    EXPECT_REJECTED(&p, &d, FATTN_ERR_INVALID_ARGUMENT, "workspace");
    fattn_buffer_free(mine);
    fattn_buffer_free(theirs);
    fattn_buffer_free(ro);
    prob_free(&p);
    fattn_context_free(other);
    fattn_context_free(ctx);
}

/* A split-KV decode plan needs a workspace: its size is reported, a caller's
 * buffer of exactly that size runs (forced splits, every backend that has
 * the path), one byte less is BUFFER_TOO_SMALL, a workspace over an
 * operand's memory is refused, and with 1 split nothing is needed. */
static void decode_workspace(fattn_backend_kind kind) {
    fattn_context *ctx = open_backend(kind);
    problem p;
    const fattn_attention_desc full = make_desc(1, 8, 2, 1, 1000, 64);
    prob_init(&p, ctx, &full, 29);
    EXPECT_OK(ctx, fattn_context_set_param(ctx, FATTN_PARAM_KV_SPLITS, 5));
    uint64_t bytes = 0;
    EXPECT_OK(ctx, fattn_workspace_size(ctx, &full, &bytes));
    if (bytes == 0) { /* no split path on this backend: it runs unsplit */
        RUN_OK(&p, 0, &p.d, "forced splits without a split path");
    } else {
        fattn_buffer *ws = NULL, *small = NULL;
        assert_int_equal(fattn_buffer_alloc(ctx, (size_t)bytes, &ws), FATTN_OK);
        assert_int_equal(fattn_buffer_alloc(ctx, (size_t)bytes - 1, &small), FATTN_OK);
        fattn_attention_desc d = p.d;
        d.workspace = ws;
        RUN_OK(&p, 0, &d, "split-KV with the caller's workspace");
        /* The tiled path only: the naive baseline needs no workspace. */
        d.workspace = small;
        expect_rejected_(&p, PATH_TILED, &d, NULL, FATTN_ERR_BUFFER_TOO_SMALL, "workspace",
                         __FILE__, __LINE__);
        d.workspace = p.buf[TO]; /* scratch over the output */
        expect_rejected_(&p, PATH_TILED, &d, NULL, FATTN_ERR_INVALID_ARGUMENT, "workspace",
                         __FILE__, __LINE__);
        RUN_OK(&p, 0, &p.d, "split-KV with the context's own workspace");
        fattn_buffer_free(ws);
        fattn_buffer_free(small);
    }
    EXPECT_OK(ctx, fattn_context_set_param(ctx, FATTN_PARAM_KV_SPLITS, 1));
    EXPECT_OK(ctx, fattn_workspace_size(ctx, &full, &bytes));
    assert_int_equal(bytes, 0);
    RUN_OK(&p, 0, &p.d, "never split");
    prob_free(&p);
    fattn_context_free(ctx);
}
PER_BACKEND(decode_workspace)

/* With the split count left to the backend, fattn_workspace_size (which
 * sees no tensors, so no layout) must cover what the forward then plans: a
 * caller's workspace of exactly that size runs. On the CPU a context with
 * 16 threads splits a batch-1 GQA decode by a layout-dependent rule (all
 * heads of a key at once when K/V heads are side by side): the query once
 * answered 33 KB for a plan that needed 532 KB. */
static void decode_workspace_chosen(fattn_backend_kind kind) {
    fattn_context *ctx = NULL;
    if (kind == FATTN_BACKEND_CPU) {
        fattn_context_params prm = FATTN_CONTEXT_PARAMS_INIT;
        prm.backend = FATTN_BACKEND_CPU;
        prm.cpu_threads = 16;
        EXPECT_OK(NULL, fattn_context_create_with(&prm, &ctx));
    } else {
        ctx = open_backend(kind);
    }
    problem p;
    const fattn_attention_desc full = make_desc(1, 8, 2, 1, 20000, 64);
    prob_init(&p, ctx, &full, 31);
    /* K/V heads side by side in each key's row (BSHD), the engines' layout. */
    for (int i = TQ; i <= TO; i++) {
        const int kv = i == TK || i == TV;
        EXPECT_OK(NULL, fattn_tensor_init(p.buf[i], full.dtype, FATTN_LAYOUT_BSHD, full.batch,
                                          kv ? full.heads_kv : full.heads_q,
                                          kv ? full.seq_kv : full.seq_q, full.head_dim, 0,
                                          &p.t[i]));
    }
    uint64_t bytes = 0;
    EXPECT_OK(ctx, fattn_workspace_size(ctx, &full, &bytes));
    fattn_buffer *ws = NULL;
    if (bytes) assert_int_equal(fattn_buffer_alloc(ctx, (size_t)bytes, &ws), FATTN_OK);
    fattn_attention_desc d = p.d;
    d.workspace = ws;
    RUN_OK(&p, 0, &d, "chosen splits with a workspace of the reported size");
    fattn_buffer_free(ws);
    prob_free(&p);
    fattn_context_free(ctx);
}
PER_BACKEND(decode_workspace_chosen)

/* An API value is an argument, not the environment: a relative directory is
 * INVALID_ARGUMENT (not ENVIRONMENT); NULL restores the default. */
static void test_module_dir(void **state) {
    (void)state;
    clear_thread_slot();
    EXPECT(NULL, fattn_set_module_dir("relative/modules"), FATTN_ERR_INVALID_ARGUMENT,
           "absolute|relative");
    EXPECT_OK(NULL, fattn_set_module_dir(NULL));
    assert_string_equal(fattn_error_message(NULL), "");
}

static void test_names_and_version(void **state) {
    (void)state;
    assert_string_equal(fattn_dtype_name(FATTN_F32), "f32");
    assert_string_equal(fattn_dtype_name(FATTN_F16), "f16");
    assert_string_equal(fattn_dtype_name(FATTN_BF16), "bf16");
    assert_string_equal(fattn_dtype_name(FATTN_I32), "i32");
    assert_string_equal(fattn_dtype_name((fattn_dtype)9), "invalid");
    assert_string_equal(fattn_dtype_name((fattn_dtype)-1), "invalid");
    assert_int_equal(fattn_dtype_size(FATTN_I32), 4);
    assert_int_equal(fattn_dtype_size(FATTN_BF16), 2);
    assert_int_equal(fattn_dtype_size((fattn_dtype)9), 0);
    assert_int_equal(fattn_version_number(), FATTN_VERSION_NUMBER);
    char v[32];
    snprintf(v, sizeof v, "%d.%d.%d", FATTN_VERSION_MAJOR, FATTN_VERSION_MINOR,
             FATTN_VERSION_PATCH);
    assert_string_equal(fattn_version_string(), v);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        /* 1. extensible structs */
        cmocka_unit_test(test_ext_desc_older_sizes),
        cmocka_unit_test(test_ext_desc_too_small),
        cmocka_unit_test(test_ext_desc_newer_size),
        cmocka_unit_test(test_ext_tensor_size),
        cmocka_unit_test(test_ext_memory_report_older),
        cmocka_unit_test(test_ext_memory_report_sizes),
        cmocka_unit_test(test_ext_output_structs_newer_nonzero),
        cmocka_unit_test(test_ext_backend_info),
        cmocka_unit_test(test_ext_tiling),
        cmocka_unit_test(test_ext_context_params),
        cmocka_unit_test(test_ext_mask_desc),
        cmocka_unit_test(test_ext_varlen_paged_sizes),
        /* 2. sub-descriptions */
        cmocka_unit_test(test_mask_bad_values),
        cmocka_unit_test(test_varlen_bad_values),
        cmocka_unit_test(test_paged_bad_values),
        PER_BACKEND_TESTS(reserved_features),
        cmocka_unit_test(test_host_rejects_varlen_paged),
        /* 3. causal alignment */
        PER_BACKEND_TESTS(causal_alignment),
        cmocka_unit_test(test_causal_invalid),
        cmocka_unit_test(test_flops_alignment),
        /* 4. context parameters */
        cmocka_unit_test(test_param_tiles),
        cmocka_unit_test(test_param_tile_100000),
        cmocka_unit_test(test_param_cpu_threads),
        cmocka_unit_test(test_param_errors),
        PER_BACKEND_TESTS(params_on_backend),
        /* 5. fattn_context_create_with */
        cmocka_unit_test(test_create_with_cpu),
        cmocka_unit_test(test_create_with_env_precedence),
        cmocka_unit_test(test_create_with_cpu_rejects_native),
        cmocka_unit_test(test_create_with_opencl_settings),
        cmocka_unit_test(test_create_with_opencl_native),
        cmocka_unit_test(test_create_with_cuda_native),
        PER_BACKEND_TESTS(decode_workspace),
        PER_BACKEND_TESTS(decode_workspace_chosen),
        /* 6. const buffers */
        cmocka_unit_test(test_wrap_const),
        /* 7. tensor initialisers */
        cmocka_unit_test(test_tensor_init_fields),
        cmocka_unit_test(test_tensor_init_errors),
        cmocka_unit_test(test_tensor_cache_slice),
        cmocka_unit_test(test_tensor_packed_qkv),
        PER_BACKEND_TESTS(empty_kv),
        /* 8. workspace, module directory, names */
        cmocka_unit_test(test_workspace),
        cmocka_unit_test(test_module_dir),
        cmocka_unit_test(test_names_and_version),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

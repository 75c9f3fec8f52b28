/* fattn_combine, on every backend: the log-sum-exp merge of partial results
 * (fattn.h, "Combining partial results").
 *   1. Against the whole attention: the keys of a GQA problem are split at
 *      random points into 1..6 contiguous ranges (empty ones too), each part
 *      is computed by fattn_forward on K/V views of its range into one parts
 *      buffer (with NaN in the gaps between parts, packed, interleaved as
 *      FlashInfer's merge_states lays them out, or one part with stride 0),
 *      the O of every empty part is then overwritten with NaN (it must not be
 *      read), and the combine must match fattn_forward over all keys and the
 *      double reference, in every part dtype / output dtype pair.
 *   2. Special rows: all parts -inf, one part -inf, NaN and +inf lse, lse
 *      values whose exp over- or underflows float32 without the max shift,
 *      lse NULL.
 *   3. Validation: every rejected call names its argument and leaves O and
 *      lse poisoned.
 * Outputs start poisoned with a NaN payload no arithmetic makes, so an
 * element never written shows even where NaN is expected. A backend without
 * a combine kernel (FATTN_ERR_UNSUPPORTED) fails here: it is expected to
 * have one. */
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
#include "half.h"
#include "harness.h"
#include "reference.h"
#include "test_backend.h"
#include "test_util.h"

/* ---- Random data ------------------------------------------------------------ */

static int64_t below(uint64_t *s, int64_t n) { return (int64_t)(next_u64(s) % (uint64_t)n); }

/* ---- Typed host arrays ---------------------------------------------------------- */

/* Poison, in outputs: a quiet NaN with a payload no arithmetic or
 * conversion produces, in f32 and in the 16-bit types (0x7fed is a NaN in
 * f16 and in bf16). Garbage, in inputs the combine must not read (gaps
 * between parts, the O of a part with lse -inf): another such NaN, so that
 * a read of it that reaches O is told apart from O never written. */
#define POISON32 0x7fc0deadu
#define POISON16 0x7fedu
#define GARBAGE32 0x7fc0beefu
#define GARBAGE16 0x7ff1u

typedef struct harr {
    fattn_dtype t;
    size_t n; /* elements */
    void *p;
} harr;

static harr harr_make(fattn_dtype t, size_t n) {
    harr a = {t, n, calloc(n ? n : 1, fattn_dtype_size(t))};
    assert_non_null(a.p);
    return a;
}

static size_t harr_bytes(const harr *a) { return a->n * fattn_dtype_size(a->t); }

static void harr_put(harr *a, size_t i, float x) {
    if (a->t == FATTN_F32)
        ((float *)a->p)[i] = x;
    else if (a->t == FATTN_F16)
        ((uint16_t *)a->p)[i] = fattn_f32_to_f16(x);
    else
        ((uint16_t *)a->p)[i] = fattn_f32_to_bf16(x);
}

static double harr_get(const harr *a, size_t i) {
    if (a->t == FATTN_F32) return ((const float *)a->p)[i];
    if (a->t == FATTN_F16) return fattn_f16_to_f32(((const uint16_t *)a->p)[i]);
    return fattn_bf16_to_f32(((const uint16_t *)a->p)[i]);
}

static void harr_set_bits(harr *a, size_t i, int garbage) {
    if (a->t == FATTN_F32) {
        const uint32_t u = garbage ? GARBAGE32 : POISON32;
        memcpy((float *)a->p + i, &u, sizeof u);
    } else {
        ((uint16_t *)a->p)[i] = garbage ? GARBAGE16 : POISON16;
    }
}

static int harr_has_bits(const harr *a, size_t i, int garbage) {
    if (a->t == FATTN_F32) {
        uint32_t u;
        memcpy(&u, (const float *)a->p + i, sizeof u);
        return u == (garbage ? GARBAGE32 : POISON32);
    }
    return ((const uint16_t *)a->p)[i] == (garbage ? GARBAGE16 : POISON16);
}

static void harr_set_poison(harr *a, size_t i) { harr_set_bits(a, i, 0); }
static void harr_set_garbage(harr *a, size_t i) { harr_set_bits(a, i, 1); }
static int harr_is_poison(const harr *a, size_t i) { return harr_has_bits(a, i, 0); }
static int harr_is_garbage(const harr *a, size_t i) { return harr_has_bits(a, i, 1); }

static void harr_poison_all(harr *a) {
    for (size_t i = 0; i < a->n; i++) harr_set_poison(a, i);
}

static void harr_garbage_all(harr *a) {
    for (size_t i = 0; i < a->n; i++) harr_set_garbage(a, i);
}

/* A host array and the device buffer it is copied to and from. */
typedef struct darr {
    harr h;
    fattn_buffer *b;
} darr;

static darr darr_make(fattn_context *ctx, fattn_dtype t, size_t n) {
    darr a = {harr_make(t, n), NULL};
    const fattn_status st = fattn_buffer_alloc(ctx, harr_bytes(&a.h), &a.b);
    if (st != FATTN_OK)
        fail_msg("fattn_buffer_alloc(%zu bytes): %s: %s", harr_bytes(&a.h), fattn_status_string(st),
                 fattn_error_message(ctx));
    return a;
}

static void darr_upload(darr *a) {
    assert_int_equal(fattn_buffer_write(a->b, 0, a->h.p, harr_bytes(&a->h)), FATTN_OK);
}

static void darr_download(darr *a) {
    assert_int_equal(fattn_buffer_read(a->b, 0, a->h.p, harr_bytes(&a->h)), FATTN_OK);
}

static void darr_poison(darr *a) {
    harr_poison_all(&a->h);
    darr_upload(a);
}

static void darr_garbage(darr *a) {
    harr_garbage_all(&a->h);
    darr_upload(a);
}

static void darr_free(darr *a) {
    fattn_buffer_free(a->b);
    free(a->h.p);
    memset(a, 0, sizeof *a);
}

/* ---- Tensors -------------------------------------------------------------------- */

static fattn_tensor tensor(fattn_buffer *b, fattn_dtype t, int64_t off, int64_t sb, int64_t sh,
                           int64_t ss) {
    fattn_tensor x = FATTN_TENSOR_INIT;
    x.buffer = b;
    x.dtype = t;
    x.offset = off;
    x.stride_batch = sb;
    x.stride_head = sh;
    x.stride_seq = ss;
    return x;
}

/* Element (b, h, s, d) of a tensor, as an index into its buffer. */
static size_t at(const fattn_tensor *t, int64_t b, int64_t h, int64_t s, int64_t d) {
    return (size_t)(t->offset + b * t->stride_batch + h * t->stride_head + s * t->stride_seq + d);
}

static fattn_tensor moved(fattn_tensor t, int64_t by) {
    t.offset += by;
    return t;
}

/* ---- Statuses and messages -------------------------------------------------------- */

static void expect_(fattn_status got, fattn_status want, const char *msg, const char *needles,
                    const char *call, const char *file, int line) {
    if (got != want)
        fail_msg("%s:%d: %s returned %s (%d) with \"%s\"; want %s (%d)", file, line, call,
                 fattn_status_string(got), (int)got, msg ? msg : "(null)",
                 fattn_status_string(want), (int)want);
    if (want != FATTN_OK && !msg_has(msg, needles))
        fail_msg("%s:%d: %s returned %s as it should, but its message \"%s\" does not name \"%s\"",
                 file, line, call, fattn_status_string(got), msg ? msg : "(null)", needles);
    if (want == FATTN_OK && msg && *msg)
        fail_msg("%s:%d: %s succeeded but left the message \"%s\"", file, line, call, msg);
}

#define EXPECT(ctx, call, want, needles)                                                           \
    do {                                                                                           \
        const fattn_status st_ = (call);                                                           \
        expect_(st_, (want), fattn_error_message(ctx), (needles), #call, __FILE__, __LINE__);      \
    } while (0)
#define EXPECT_OK(ctx, call) EXPECT(ctx, call, FATTN_OK, "")

/* ---- Backends ------------------------------------------------------------------------ */

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

/* ---- Tolerances ------------------------------------------------------------------------ */

/* The conformance suite's (harness_tolerance) for the coarser of the part
 * and output dtypes: each part is within its dtype's tolerance and the
 * combine is a convex combination of them, rounded once to the output. */
static int coarseness(fattn_dtype t) { return t == FATTN_F32 ? 0 : t == FATTN_F16 ? 1 : 2; }

static double o_tolerance(fattn_dtype part, fattn_dtype out) {
    return harness_tolerance(coarseness(part) >= coarseness(out) ? part : out);
}

/* LSE: float32 in every dtype, 1e-5 relative to max(1, |ref|), as harness.c. */
static int lse_close(double got, double want) {
    return fabs(got - want) <= 1e-5 * fmax(1.0, fabs(want));
}

/* =========================================================================== */
/* 1. Combine against the whole attention                                        */
/* =========================================================================== */

typedef struct shape {
    int64_t B, Hq, Hkv, Sq, Sk, D;
} shape;

/* GQA (Hq = 4, Hkv = 2), prefill rows (Sq = 5) and decoding (Sq = 1), a head
 * dimension that is no multiple of 16 and the largest common one. */
static const shape shapes[] = {
    {2, 4, 2, 5, 97, 40},
    {2, 4, 2, 1, 97, 40},
    {2, 4, 2, 5, 97, 128},
    {2, 4, 2, 1, 97, 128},
};

enum layout {
    LAYOUT_GAPS,        /* part after part, NaN garbage between and around them */
    LAYOUT_PACKED,      /* part after part, stride = one part (merge_states' [P, ...]) */
    LAYOUT_INTERLEAVED, /* [B, S, P, H, D]: part stride H*D, smaller than a part */
    LAYOUT_SINGLE,      /* one part, part strides 0 */
    LAYOUTS
};
static const char *const layout_name[LAYOUTS] = {"gaps", "packed", "interleaved", "single"};

/* Q, K, V of one shape in one dtype, the whole attention by fattn_forward
 * and by the double reference. K is BSHD and V BHSD, so a key range is an
 * offset of range start * stride_seq in each. */
typedef struct inputs {
    fattn_attention_desc d;
    darr q, k, v, o_full, l_full;
    fattn_tensor tq, tk, tv, to_full, tl_full;
    double *ref_o, *ref_l;
} inputs;

static ref_view ref_of(const darr *a, const fattn_tensor *t) {
    const ref_view r = {a->h.p, a->h.t, t->offset, t->stride_batch, t->stride_head, t->stride_seq};
    return r;
}

static void inputs_init(inputs *in, fattn_context *ctx, const shape *s, fattn_dtype dt,
                        uint64_t seed) {
    memset(in, 0, sizeof *in);
    const int64_t B = s->B, Hq = s->Hq, Hk = s->Hkv, Sq = s->Sq, Sk = s->Sk, D = s->D;
    fattn_attention_desc d = FATTN_ATTENTION_DESC_INIT;
    d.batch = B;
    d.heads_q = Hq;
    d.heads_kv = Hk;
    d.seq_q = Sq;
    d.seq_kv = Sk;
    d.head_dim = D;
    d.dtype = dt;
    in->d = d;
    const size_t nq = (size_t)(B * Hq * Sq * D), nkv = (size_t)(B * Hk * Sk * D);
    in->q = darr_make(ctx, dt, nq);
    in->k = darr_make(ctx, dt, nkv);
    in->v = darr_make(ctx, dt, nkv);
    in->o_full = darr_make(ctx, dt, nq);
    in->l_full = darr_make(ctx, FATTN_F32, (size_t)(B * Hq * Sq));
    in->tq = tensor(in->q.b, dt, 0, Hq * Sq * D, Sq * D, D);
    in->tk = tensor(in->k.b, dt, 0, Sk * Hk * D, D, Hk * D);
    in->tv = tensor(in->v.b, dt, 0, Hk * Sk * D, Sk * D, D);
    in->to_full = tensor(in->o_full.b, dt, 0, Hq * Sq * D, Sq * D, D);
    in->tl_full = tensor(in->l_full.b, FATTN_F32, 0, Hq * Sq, Sq, 1);
    uint64_t rng = seed;
    darr *ins[3] = {&in->q, &in->k, &in->v};
    for (int i = 0; i < 3; i++) {
        for (size_t j = 0; j < ins[i]->h.n; j++) harr_put(&ins[i]->h, j, uniform(&rng));
        darr_upload(ins[i]);
    }
    darr_poison(&in->o_full);
    darr_poison(&in->l_full);
    EXPECT_OK(ctx,
              fattn_forward(ctx, &in->d, &in->tq, &in->tk, &in->tv, &in->to_full, &in->tl_full));
    darr_download(&in->o_full);
    darr_download(&in->l_full);

    in->ref_o = malloc(nq * sizeof(double));
    in->ref_l = malloc((size_t)(B * Hq * Sq) * sizeof(double));
    assert_non_null(in->ref_o);
    assert_non_null(in->ref_l);
    const ref_view rq = ref_of(&in->q, &in->tq), rk = ref_of(&in->k, &in->tk),
                   rv = ref_of(&in->v, &in->tv);
    ref_attention(&in->d, &rq, &rk, &rv, in->ref_o, in->ref_l);
}

static void inputs_free(inputs *in) {
    darr *all[5] = {&in->q, &in->k, &in->v, &in->o_full, &in->l_full};
    for (int i = 0; i < 5; i++) darr_free(all[i]);
    free(in->ref_o);
    free(in->ref_l);
    memset(in, 0, sizeof *in);
}

/* Worst errors seen per part/output dtype pair, for the summary line. */
typedef struct errs {
    double o_ref, o_full, l_ref;
} errs;

/* Checks a combine's O (and lse, when l is not NULL) against the reference
 * and the whole fattn_forward; every element of the buffers outside the
 * views must still hold the poison. */
static void check_combined_(const inputs *in, const darr *o, const fattn_tensor *to, const darr *l,
                            const fattn_tensor *tl, double tol, errs *e, const char *what,
                            const char *file, int line) {
    const int64_t B = in->d.batch, H = in->d.heads_q, S = in->d.seq_q, D = in->d.head_dim;
    char *inside_o = calloc(o->h.n, 1), *inside_l = l ? calloc(l->h.n, 1) : NULL;
    assert_non_null(inside_o);
    int64_t bad = 0;
    char first[256] = "";
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++)
            for (int64_t i = 0; i < S; i++) {
                const int64_t row = (b * H + h) * S + i;
                for (int64_t x = 0; x < D; x++) {
                    const size_t k = at(to, b, h, i, x);
                    inside_o[k] = 1;
                    const double got = harr_get(&o->h, k), want = in->ref_o[row * D + x];
                    const double full = harr_get(&in->o_full.h, at(&in->to_full, b, h, i, x));
                    const double er = fabs(got - want), ef = fabs(got - full);
                    if (harr_is_poison(&o->h, k) || harr_is_garbage(&o->h, k)) {
                        if (!bad++)
                            snprintf(first, sizeof first, "O[%lld,%lld,%lld,%lld] %s", (long long)b,
                                     (long long)h, (long long)i, (long long)x,
                                     harr_is_poison(&o->h, k)
                                         ? "never written"
                                         : "holds the NaN of a gap or of an empty part's O, "
                                           "which must not be read");
                        continue;
                    }
                    /* !(<=) so that NaN counts as bad */
                    if (!(er <= tol && ef <= tol) && !bad++)
                        snprintf(first, sizeof first,
                                 "O[%lld,%lld,%lld,%lld] = %.9g, reference %.9g, fattn_forward "
                                 "over all keys %.9g (tolerance %g)",
                                 (long long)b, (long long)h, (long long)i, (long long)x, got, want,
                                 full, tol);
                    if (er > e->o_ref) e->o_ref = er;
                    if (ef > e->o_full) e->o_full = ef;
                }
                if (!l) continue;
                const size_t k = at(tl, b, h, i, 0);
                inside_l[k] = 1;
                const double got = harr_get(&l->h, k), want = in->ref_l[row];
                const double full = harr_get(&in->l_full.h, at(&in->tl_full, b, h, i, 0));
                if (harr_is_poison(&l->h, k)) {
                    if (!bad++)
                        snprintf(first, sizeof first, "lse[%lld,%lld,%lld] never written",
                                 (long long)b, (long long)h, (long long)i);
                    continue;
                }
                if (!(lse_close(got, want) && lse_close(got, full)) && !bad++)
                    snprintf(first, sizeof first,
                             "lse[%lld,%lld,%lld] = %.9g, reference %.9g, fattn_forward over all "
                             "keys %.9g",
                             (long long)b, (long long)h, (long long)i, got, want, full);
                const double rel = fabs(got - want) / fmax(1.0, fabs(want));
                if (rel > e->l_ref) e->l_ref = rel;
            }
    for (size_t k = 0; k < o->h.n; k++)
        if (!inside_o[k] && !harr_is_poison(&o->h, k) && !bad++)
            snprintf(first, sizeof first, "element %zu of O's buffer, outside O, was written", k);
    for (size_t k = 0; l && k < l->h.n; k++)
        if (!inside_l[k] && !harr_is_poison(&l->h, k) && !bad++)
            snprintf(first, sizeof first, "element %zu of lse's buffer, outside lse, was written",
                     k);
    free(inside_o);
    free(inside_l);
    if (bad)
        fail_msg("%s:%d: %s: %lld elements wrong, first: %s", file, line, what, (long long)bad,
                 first);
}
#define CHECK_COMBINED(in, o, to, l, tl, tol, e, what)                                             \
    check_combined_(in, o, to, l, tl, tol, e, what, __FILE__, __LINE__)

/* One split of in's keys into parts, laid out as `layout`, combined into
 * out_dt. `n` (the running case block) picks the number of parts, so that
 * every count comes up in every layout, and O's layout. */
static void combine_case(fattn_context *ctx, const inputs *in, fattn_dtype out_dt, int layout,
                         int n, uint64_t seed, errs *e) {
    const int64_t B = in->d.batch, H = in->d.heads_q, S = in->d.seq_q, D = in->d.head_dim,
                  Sk = in->d.seq_kv;
    const fattn_dtype pdt = in->d.dtype;
    const int64_t E = B * H * S * D, L = B * H * S;
    uint64_t rng = seed;

    /* The split: cuts[0] = 0 <= cuts[1] <= ... <= cuts[P] = Sk, with an empty
     * range forced first, in the middle or last. Every third case of the
     * other layouts takes 9 to 20 parts: kernels that load several parts at
     * once (combine.cl's COMBINE_UNROLL) meet whole groups and a remainder,
     * empty parts among them. */
    const int P = layout == LAYOUT_SINGLE        ? 1
                  : layout == LAYOUT_PACKED      ? 3 + n % 4
                  : layout == LAYOUT_INTERLEAVED ? 2 + (n + 2) % 5
                  : n % 3 == 1                   ? 9 + n % 12
                                                 : 2 + n % 5;
    int64_t cuts[21];
    cuts[0] = 0;
    cuts[P] = Sk;
    for (int i = 1; i < P; i++) cuts[i] = below(&rng, Sk + 1);
    for (int i = 1; i < P; i++) /* insertion sort */
        for (int j = i; j > 1 && cuts[j - 1] > cuts[j]; j--) {
            const int64_t t = cuts[j];
            cuts[j] = cuts[j - 1];
            cuts[j - 1] = t;
        }
    if (layout == LAYOUT_GAPS) cuts[1] = 0;
    if (layout == LAYOUT_PACKED) cuts[2] = cuts[1];
    if (layout == LAYOUT_INTERLEAVED) cuts[P - 1] = Sk;

    /* Where the parts lie. */
    fattn_tensor tpo, tpl;
    int64_t os = 0, ls = 0;
    size_t npo, npl;
    darr po, pl;
    switch (layout) {
    case LAYOUT_GAPS: {
        const int64_t go = 5 + below(&rng, 29), gl = 3 + below(&rng, 11);
        os = E + go;
        ls = L + gl;
        npo = (size_t)(7 + (P - 1) * os + E + 9);
        npl = (size_t)(2 + (P - 1) * ls + L + 5);
        po = darr_make(ctx, pdt, npo);
        pl = darr_make(ctx, FATTN_F32, npl);
        tpo = tensor(po.b, pdt, 7, S * H * D, D, H * D); /* BSHD within a part */
        tpl = tensor(pl.b, FATTN_F32, 2, H * S, S, 1);
        break;
    }
    case LAYOUT_PACKED:
        os = E;
        ls = L;
        npo = (size_t)(P * E);
        npl = (size_t)(P * L);
        po = darr_make(ctx, pdt, npo);
        pl = darr_make(ctx, FATTN_F32, npl);
        tpo = tensor(po.b, pdt, 0, H * S * D, S * D, D);
        tpl = tensor(pl.b, FATTN_F32, 0, H * S, S, 1);
        break;
    case LAYOUT_INTERLEAVED:
        os = H * D;
        ls = H;
        npo = (size_t)(B * S * P * H * D);
        npl = (size_t)(B * S * P * H);
        po = darr_make(ctx, pdt, npo);
        pl = darr_make(ctx, FATTN_F32, npl);
        tpo = tensor(po.b, pdt, 0, S * P * H * D, D, P * H * D);
        tpl = tensor(pl.b, FATTN_F32, 0, S * P * H, 1, P * H);
        break;
    default:
        npo = (size_t)(3 + E);
        npl = (size_t)(1 + L);
        po = darr_make(ctx, pdt, npo);
        pl = darr_make(ctx, FATTN_F32, npl);
        tpo = tensor(po.b, pdt, 3, H * S * D, S * D, D);
        tpl = tensor(pl.b, FATTN_F32, 1, H * S, S, 1);
        break;
    }

    char what[256];
    int len = snprintf(what, sizeof what, "%s, %s parts -> %s, Sq = %lld, D = %lld, %s, keys",
                       fattn_context_backend_name(ctx), fattn_dtype_name(pdt),
                       fattn_dtype_name(out_dt), (long long)S, (long long)D, layout_name[layout]);
    for (int p = 0; p < P && len > 0 && (size_t)len < sizeof what; p++)
        len += snprintf(what + len, sizeof what - (size_t)len, " [%lld,%lld)", (long long)cuts[p],
                        (long long)cuts[p + 1]);

    /* The parts, each by fattn_forward on K and V views of its keys. */
    darr_garbage(&po);
    darr_garbage(&pl);
    for (int p = 0; p < P; p++) {
        fattn_attention_desc d = in->d;
        d.seq_kv = cuts[p + 1] - cuts[p];
        const fattn_tensor tk = moved(in->tk, cuts[p] * in->tk.stride_seq),
                           tv = moved(in->tv, cuts[p] * in->tv.stride_seq), to = moved(tpo, p * os),
                           tl = moved(tpl, p * ls);
        EXPECT_OK(ctx, fattn_forward(ctx, &d, &in->tq, &tk, &tv, &to, &tl));
    }
    darr_download(&po);
    darr_download(&pl);
    /* An empty part has O = 0 and lse = -inf (fattn_forward's contract); its
     * O is then replaced by NaN, which the combine must not read. */
    int empty = 0;
    for (int p = 0; p < P; p++) {
        if (cuts[p + 1] != cuts[p]) continue;
        empty++;
        const fattn_tensor to = moved(tpo, p * os), tl = moved(tpl, p * ls);
        for (int64_t b = 0; b < B; b++)
            for (int64_t h = 0; h < H; h++)
                for (int64_t i = 0; i < S; i++) {
                    if (harr_get(&pl.h, at(&tl, b, h, i, 0)) != -INFINITY)
                        fail_msg("%s: fattn_forward with seq_kv = 0 (part %d) gave lse %g", what, p,
                                 harr_get(&pl.h, at(&tl, b, h, i, 0)));
                    for (int64_t x = 0; x < D; x++) {
                        const size_t k = at(&to, b, h, i, x);
                        if (harr_get(&po.h, k) != 0.0)
                            fail_msg("%s: fattn_forward with seq_kv = 0 (part %d) gave O %g", what,
                                     p, harr_get(&po.h, k));
                        harr_set_garbage(&po.h, k);
                    }
                }
    }
    if (layout != LAYOUT_SINGLE) assert_true(empty >= 1);
    darr_upload(&po);
    harr saved_po = harr_make(pdt, npo), saved_pl = harr_make(FATTN_F32, npl);
    memcpy(saved_po.p, po.h.p, harr_bytes(&po.h));
    memcpy(saved_pl.p, pl.h.p, harr_bytes(&pl.h));

    /* The outputs: O in BSHD or BHSD at an offset, lse with strides of its
     * own, both inside poisoned guards. */
    darr o = darr_make(ctx, out_dt, (size_t)(5 + E + 6));
    darr l = darr_make(ctx, FATTN_F32, (size_t)(4 + L + 4));
    const fattn_tensor to = (n + layout) % 2 ? tensor(o.b, out_dt, 5, H * S * D, S * D, D)
                                             : tensor(o.b, out_dt, 5, S * H * D, D, H * D);
    const fattn_tensor tl = tensor(l.b, FATTN_F32, 4, H * S, S, 1);
    fattn_combine_desc c = FATTN_COMBINE_DESC_INIT;
    c.batch = B;
    c.heads = H;
    c.seq = S;
    c.head_dim = D;
    c.parts = P;
    c.part_dtype = pdt;
    c.dtype = out_dt;
    c.o_part_stride = os;
    c.lse_part_stride = ls;
    darr_poison(&o);
    darr_poison(&l);
    expect_(fattn_combine(ctx, &c, &tpo, &tpl, &to, &tl), FATTN_OK, fattn_error_message(ctx), "",
            what, __FILE__, __LINE__);
    darr_download(&o);
    darr_download(&l);
    const double tol = o_tolerance(pdt, out_dt);
    CHECK_COMBINED(in, &o, &to, &l, &tl, tol, e, what);

    /* The combine wrote nothing into its inputs (the gaps still hold NaN). */
    darr_download(&po);
    darr_download(&pl);
    if (memcmp(saved_po.p, po.h.p, harr_bytes(&po.h)) != 0 ||
        memcmp(saved_pl.p, pl.h.p, harr_bytes(&pl.h)) != 0)
        fail_msg("%s: fattn_combine changed its o_parts or lse_parts buffer", what);

    /* lse NULL: the same O. */
    darr_poison(&o);
    darr_poison(&l);
    expect_(fattn_combine(ctx, &c, &tpo, &tpl, &to, NULL), FATTN_OK, fattn_error_message(ctx), "",
            what, __FILE__, __LINE__);
    darr_download(&o);
    darr_download(&l);
    CHECK_COMBINED(in, &o, &to, NULL, NULL, tol, e, what);
    for (size_t k = 0; k < l.h.n; k++)
        if (!harr_is_poison(&l.h, k))
            fail_msg("%s: with lse NULL, the buffer of the earlier lse was written", what);

    free(saved_po.p);
    free(saved_pl.p);
    darr_free(&po);
    darr_free(&pl);
    darr_free(&o);
    darr_free(&l);
}

static void against_forward(fattn_backend_kind kind) {
    fattn_context *ctx = open_backend(kind);
    static const fattn_dtype in_dts[3] = {FATTN_F32, FATTN_F16, FATTN_BF16};
    errs e[3][3]; /* [part][out] */
    memset(e, 0, sizeof e);
    int n = 0;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int di = 0; di < 3; di++) {
            const fattn_dtype pdt = in_dts[di];
            inputs in;
            inputs_init(&in, ctx, &shapes[s], pdt, 1000 + 17 * s + (uint64_t)di);
            /* f32 parts into every output dtype; f16 and bf16 parts into their own. */
            for (int oi = 0; oi < 3; oi++) {
                const fattn_dtype odt = in_dts[oi];
                if (pdt != FATTN_F32 && odt != pdt) continue;
                for (int layout = 0; layout < LAYOUTS; layout++)
                    combine_case(ctx, &in, odt, layout, n,
                                 5000 + (uint64_t)(n * LAYOUTS + layout) * 7919, &e[di][oi]);
                n++;
            }
            inputs_free(&in);
        }
    for (int di = 0; di < 3; di++)
        for (int oi = 0; oi < 3; oi++)
            if (di == 0 || di == oi)
                print_message("[     INFO ] %s: %s parts -> %s: max |O - ref| %.3g, |O - forward| "
                              "%.3g (tolerance %g), lse relative %.3g (1e-5)\n",
                              fattn_context_backend_name(ctx), fattn_dtype_name(in_dts[di]),
                              fattn_dtype_name(in_dts[oi]), e[di][oi].o_ref, e[di][oi].o_full,
                              o_tolerance(in_dts[di], in_dts[oi]), e[di][oi].l_ref);
    fattn_context_free(ctx);
}
PER_BACKEND(against_forward)

/* =========================================================================== */
/* 2. Special rows                                                               */
/* =========================================================================== */

/* What parts 0..2 of a row hold (with `rot`, parts rot..rot+2; the others
 * are finite but for ROW_ALL_NEG_INF, ROW_ONLY_ONE and ROW_POS_INF_ALONE);
 * a part with lse -inf has NaN in O. */
enum row_kind {
    ROW_ALL_NEG_INF,   /* every part -inf: O = 0, lse = -inf */
    ROW_ONE_NEG_INF,   /* part 1 -inf, the others finite */
    ROW_ONLY_ONE,      /* parts 0 and 2 -inf: O = O_1, lse = lse_1 */
    ROW_NAN,           /* a NaN lse in part 0: the row is NaN */
    ROW_NAN_NEG_INF,   /* part 0 -inf, part 1 NaN: NaN */
    ROW_POS_INF,       /* +inf lse in part 2: NaN */
    ROW_POS_INF_ALONE, /* +inf in part 0, -inf in the others: NaN */
    ROW_LARGE,         /* lse near 90: exp overflows float32 without the max shift */
    ROW_TINY,          /* lse near -110: exp underflows float32 without the shift */
    ROW_KINDS
};
static const char *const row_kind_name[ROW_KINDS] = {
    "all parts -inf", "one part -inf", "one part finite", "NaN lse", "NaN and -inf lse",
    "+inf lse",       "+inf and -inf", "large lse",       "tiny lse"};

enum { SP_B = 2, SP_H = 3, SP_S = 4, SP_D = 40, SP_MAX_P = 11 };

static float special_lse(int kind, int p, uint64_t *rng) {
    const float r = uniform(rng) * 2.0f;
    switch (kind) {
    case ROW_ALL_NEG_INF: return -INFINITY;
    case ROW_ONE_NEG_INF: return p == 1 ? -INFINITY : r;
    case ROW_ONLY_ONE: return p == 1 ? r : -INFINITY;
    case ROW_NAN: return p == 0 ? NAN : r;
    case ROW_NAN_NEG_INF: return p == 0 ? -INFINITY : p == 1 ? NAN : r;
    case ROW_POS_INF: return p == 2 ? INFINITY : r;
    case ROW_POS_INF_ALONE: return p == 0 ? INFINITY : -INFINITY;
    case ROW_LARGE: return p == 0 ? 88.0f + r : p == 1 ? 95.0f + r : 80.0f;
    default: return p == 0 ? -100.0f + r : p == 1 ? -120.0f : -110.0f + r;
    }
}

/* P parts, the special ones starting at part rot: with 11, parts 0..7 are
 * one group of the GPU kernels' unrolled loads (rot 0) and 8..10 the rest
 * (rot 8), so each special row meets both code paths. */
static void special_case(fattn_context *ctx, fattn_dtype pdt, fattn_dtype odt, int64_t P,
                         int64_t rot, uint64_t seed) {
    const int64_t B = SP_B, H = SP_H, S = SP_S, D = SP_D;
    const int64_t E = B * H * S * D, L = B * H * S, os = E + 11, ls = L + 5;
    darr po = darr_make(ctx, pdt, (size_t)(3 + (P - 1) * os + E + 2));
    darr pl = darr_make(ctx, FATTN_F32, (size_t)(2 + (P - 1) * ls + L + 3));
    const fattn_tensor tpo = tensor(po.b, pdt, 3, H * S * D, S * D, D),
                       tpl = tensor(pl.b, FATTN_F32, 2, H * S, S, 1);
    harr_garbage_all(&po.h); /* gaps and the O of -inf parts stay NaN */
    harr_garbage_all(&pl.h);
    uint64_t rng = seed;
    double *want_o = calloc((size_t)E, sizeof(double)), *want_l = calloc((size_t)L, sizeof(double));
    assert_non_null(want_o);
    assert_non_null(want_l);
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++)
            for (int64_t i = 0; i < S; i++) {
                const int64_t row = (b * H + h) * S + i;
                const int kind = (int)(row % ROW_KINDS);
                double lse[SP_MAX_P], m = -INFINITY;
                int nan_row = 0;
                for (int64_t p = 0; p < P; p++) {
                    const float x = special_lse(kind, (int)((p + P - rot) % P), &rng);
                    harr_put(&pl.h, at(&tpl, b, h, i, 0) + (size_t)(p * ls), x);
                    lse[p] = x;
                    nan_row |= isnan(x) || x == INFINITY;
                    if (x > m) m = x;
                    if (x == -INFINITY) continue;
                    for (int64_t d = 0; d < D; d++)
                        harr_put(&po.h, at(&tpo, b, h, i, d) + (size_t)(p * os), uniform(&rng));
                }
                /* The expected row, in double, from the stored (rounded) parts. */
                if (nan_row) {
                    want_l[row] = NAN;
                    for (int64_t d = 0; d < D; d++) want_o[row * D + d] = NAN;
                    continue;
                }
                if (m == -INFINITY) {
                    want_l[row] = -INFINITY;
                    continue; /* O = 0 */
                }
                double l = 0;
                for (int64_t p = 0; p < P; p++) {
                    if (lse[p] == -INFINITY) continue;
                    const double w = exp(lse[p] - m);
                    l += w;
                    for (int64_t d = 0; d < D; d++)
                        want_o[row * D + d] +=
                            w * harr_get(&po.h, at(&tpo, b, h, i, d) + (size_t)(p * os));
                }
                for (int64_t d = 0; d < D; d++) want_o[row * D + d] /= l;
                want_l[row] = m + log(l);
            }
    darr_upload(&po);
    darr_upload(&pl);

    darr o = darr_make(ctx, odt, (size_t)(E + 4));
    darr l = darr_make(ctx, FATTN_F32, (size_t)(L + 4));
    const fattn_tensor to = tensor(o.b, odt, 2, S * H * D, D, H * D),
                       tl = tensor(l.b, FATTN_F32, 2, H * S, S, 1);
    fattn_combine_desc c = FATTN_COMBINE_DESC_INIT;
    c.batch = B;
    c.heads = H;
    c.seq = S;
    c.head_dim = D;
    c.parts = P;
    c.part_dtype = pdt;
    c.dtype = odt;
    c.o_part_stride = os;
    c.lse_part_stride = ls;
    const double tol = o_tolerance(pdt, odt);
    for (int with_lse = 1; with_lse >= 0; with_lse--) {
        char what[160];
        snprintf(what, sizeof what, "%s, special rows, %lld %s parts from %lld -> %s, lse %s",
                 fattn_context_backend_name(ctx), (long long)P, fattn_dtype_name(pdt),
                 (long long)rot, fattn_dtype_name(odt), with_lse ? "given" : "NULL");
        darr_poison(&o);
        darr_poison(&l);
        expect_(fattn_combine(ctx, &c, &tpo, &tpl, &to, with_lse ? &tl : NULL), FATTN_OK,
                fattn_error_message(ctx), "", what, __FILE__, __LINE__);
        darr_download(&o);
        darr_download(&l);
        for (int64_t b = 0; b < B; b++)
            for (int64_t h = 0; h < H; h++)
                for (int64_t i = 0; i < S; i++) {
                    const int64_t row = (b * H + h) * S + i;
                    const char *kn = row_kind_name[row % ROW_KINDS];
                    for (int64_t d = 0; d < D; d++) {
                        const size_t k = at(&to, b, h, i, d);
                        const double got = harr_get(&o.h, k), want = want_o[row * D + d];
                        if (harr_is_poison(&o.h, k))
                            fail_msg("%s: row %lld (%s): O[%lld] never written", what,
                                     (long long)row, kn, (long long)d);
                        if (harr_is_garbage(&o.h, k))
                            fail_msg("%s: row %lld (%s): O[%lld] holds the NaN of a gap or of a "
                                     "-inf part's O, which must not be read",
                                     what, (long long)row, kn, (long long)d);
                        const int ok = isnan(want)                ? isnan(got)
                                       : want_l[row] == -INFINITY ? got == 0.0
                                                                  : fabs(got - want) <= tol;
                        if (!ok)
                            fail_msg("%s: row %lld (%s): O[%lld] = %.9g, want %.9g", what,
                                     (long long)row, kn, (long long)d, got, want);
                    }
                    if (!with_lse) continue;
                    const size_t k = at(&tl, b, h, i, 0);
                    const double got = harr_get(&l.h, k), want = want_l[row];
                    if (harr_is_poison(&l.h, k))
                        fail_msg("%s: row %lld (%s): lse never written", what, (long long)row, kn);
                    const int ok = isnan(want)         ? isnan(got)
                                   : want == -INFINITY ? got == -INFINITY
                                                       : lse_close(got, want);
                    if (!ok)
                        fail_msg("%s: row %lld (%s): lse = %.9g, want %.9g", what, (long long)row,
                                 kn, got, want);
                }
        /* Nothing outside the views. */
        for (int64_t k = 0; k < 2; k++) assert_true(harr_is_poison(&o.h, (size_t)k));
        for (size_t k = (size_t)(2 + E); k < o.h.n; k++) assert_true(harr_is_poison(&o.h, k));
        for (size_t k = 0; k < l.h.n; k++)
            if (k < 2 || k >= (size_t)(2 + L) || !with_lse)
                if (!harr_is_poison(&l.h, k))
                    fail_msg("%s: lse buffer element %zu was written", what, k);
    }
    free(want_o);
    free(want_l);
    darr_free(&po);
    darr_free(&pl);
    darr_free(&o);
    darr_free(&l);
}

static void special_rows(fattn_backend_kind kind) {
    fattn_context *ctx = open_backend(kind);
    static const fattn_dtype pairs[5][2] = {{FATTN_F32, FATTN_F32},
                                            {FATTN_F32, FATTN_F16},
                                            {FATTN_F32, FATTN_BF16},
                                            {FATTN_F16, FATTN_F16},
                                            {FATTN_BF16, FATTN_BF16}};
    static const int64_t parts_rot[3][2] = {{3, 0}, {SP_MAX_P, 0}, {SP_MAX_P, 8}};
    for (int i = 0; i < 5; i++)
        for (int k = 0; k < 3; k++)
            special_case(ctx, pairs[i][0], pairs[i][1], parts_rot[k][0], parts_rot[k][1],
                         300 + (uint64_t)(3 * i + k));
    fattn_context_free(ctx);
}
PER_BACKEND(special_rows)

/* =========================================================================== */
/* 3. Validation                                                                 */
/* =========================================================================== */

/* B=1, H=2, S=3, D=8, two f32 parts packed, f32 outputs. The parts buffer
 * has room for one more part after the two (for an O placed there). */
enum { V_B = 1, V_H = 2, V_S = 3, V_D = 8, V_P = 2 };
enum { V_E = V_B * V_H * V_S * V_D, V_L = V_B * V_H * V_S };

typedef struct vfix {
    fattn_context *ctx;
    fattn_combine_desc c;
    darr po, pl, o, l;
    fattn_tensor tpo, tpl, to, tl;
} vfix;

static void vfix_init(vfix *f, fattn_context *ctx) {
    memset(f, 0, sizeof *f);
    f->ctx = ctx;
    fattn_combine_desc c = FATTN_COMBINE_DESC_INIT;
    c.batch = V_B;
    c.heads = V_H;
    c.seq = V_S;
    c.head_dim = V_D;
    c.parts = V_P;
    c.part_dtype = FATTN_F32;
    c.dtype = FATTN_F32;
    c.o_part_stride = V_E;
    c.lse_part_stride = V_L;
    f->c = c;
    f->po = darr_make(ctx, FATTN_F32, (size_t)(V_P * V_E + V_E));
    f->pl = darr_make(ctx, FATTN_F32, (size_t)(V_P * V_L));
    f->o = darr_make(ctx, FATTN_F32, (size_t)V_E);
    f->l = darr_make(ctx, FATTN_F32, (size_t)V_L);
    uint64_t rng = 4242;
    for (size_t i = 0; i < f->po.h.n; i++) harr_put(&f->po.h, i, uniform(&rng));
    for (size_t i = 0; i < f->pl.h.n; i++) harr_put(&f->pl.h, i, uniform(&rng));
    darr_upload(&f->po);
    darr_upload(&f->pl);
    darr_poison(&f->o);
    darr_poison(&f->l);
    f->tpo = tensor(f->po.b, FATTN_F32, 0, V_H * V_S * V_D, V_S * V_D, V_D);
    f->tpl = tensor(f->pl.b, FATTN_F32, 0, V_H * V_S, V_S, 1);
    f->to = tensor(f->o.b, FATTN_F32, 0, V_H * V_S * V_D, V_S * V_D, V_D);
    f->tl = tensor(f->l.b, FATTN_F32, 0, V_H * V_S, V_S, 1);
}

static void vfix_free(vfix *f) {
    darr_free(&f->po);
    darr_free(&f->pl);
    darr_free(&f->o);
    darr_free(&f->l);
}

/* The call is rejected with `want`, a message naming `needles`, and O and
 * lse (the fixture's buffers) still poisoned. */
static void reject_(vfix *f, const fattn_combine_desc *c, const fattn_tensor *po,
                    const fattn_tensor *pl, const fattn_tensor *o, const fattn_tensor *l,
                    fattn_status want, const char *needles, const char *what, int line) {
    char call[200];
    snprintf(call, sizeof call, "fattn_combine (%s, %s)", fattn_context_backend_name(f->ctx), what);
    expect_(fattn_combine(f->ctx, c, po, pl, o, l), want, fattn_error_message(f->ctx), needles,
            call, __FILE__, line);
    darr_download(&f->o);
    darr_download(&f->l);
    for (size_t i = 0; i < f->o.h.n; i++)
        if (!harr_is_poison(&f->o.h, i))
            fail_msg("%s:%d: %s: a rejected call wrote O[%zu]", __FILE__, line, call, i);
    for (size_t i = 0; i < f->l.h.n; i++)
        if (!harr_is_poison(&f->l.h, i))
            fail_msg("%s:%d: %s: a rejected call wrote lse[%zu]", __FILE__, line, call, i);
}
/* A changed copy of the description or of one tensor, then the call. */
#define REJECT_DESC(f, field, value, want, needles)                                                \
    do {                                                                                           \
        fattn_combine_desc c_ = (f)->c;                                                            \
        c_.field = value;                                                                          \
        reject_(f, &c_, &(f)->tpo, &(f)->tpl, &(f)->to, &(f)->tl, want, needles,                   \
                "desc->" #field " = " #value, __LINE__);                                           \
    } while (0)
#define REJECT_T(f, which, field, value, want, needles)                                            \
    do {                                                                                           \
        fattn_tensor po_ = (f)->tpo, pl_ = (f)->tpl, o_ = (f)->to, l_ = (f)->tl;                   \
        which##_.field = value;                                                                    \
        reject_(f, &(f)->c, &po_, &pl_, &o_, &l_, want, needles, #which "." #field " = " #value,   \
                __LINE__);                                                                         \
    } while (0)

static void validation(fattn_backend_kind kind) {
    fattn_context *ctx = open_backend(kind);
    vfix fx, *f = &fx;
    vfix_init(f, ctx);

    /* NULL context, description and tensors. */
    EXPECT(NULL, fattn_combine(NULL, &f->c, &f->tpo, &f->tpl, &f->to, &f->tl),
           FATTN_ERR_NULL_POINTER, "ctx|context");
    reject_(f, NULL, &f->tpo, &f->tpl, &f->to, &f->tl, FATTN_ERR_NULL_POINTER, "desc", "desc NULL",
            __LINE__);
    reject_(f, &f->c, NULL, &f->tpl, &f->to, &f->tl, FATTN_ERR_NULL_POINTER, "o_parts",
            "o_parts NULL", __LINE__);
    reject_(f, &f->c, &f->tpo, NULL, &f->to, &f->tl, FATTN_ERR_NULL_POINTER, "lse_parts",
            "lse_parts NULL", __LINE__);
    reject_(f, &f->c, &f->tpo, &f->tpl, NULL, &f->tl, FATTN_ERR_NULL_POINTER, "~o", "o NULL",
            __LINE__);
    REJECT_T(f, o, buffer, NULL, FATTN_ERR_NULL_POINTER, "~o");
    REJECT_T(f, po, buffer, NULL, FATTN_ERR_NULL_POINTER, "o_parts");
    REJECT_T(f, l, buffer, NULL, FATTN_ERR_NULL_POINTER, "~lse");

    /* The description's size. */
    REJECT_DESC(f, size, 0, FATTN_ERR_INVALID_ARGUMENT, "size");
    REJECT_DESC(f, size, sizeof(size_t), FATTN_ERR_INVALID_ARGUMENT, "size");
    REJECT_DESC(f, size, sizeof(fattn_combine_desc) - 8, FATTN_ERR_INVALID_ARGUMENT, "size");
    {
        /* A newer caller's larger struct with a field set this fattn lacks. */
        union {
            fattn_combine_desc c;
            unsigned char bytes[sizeof(fattn_combine_desc) + 16];
        } u;
        memset(&u, 0, sizeof u);
        u.c = f->c;
        u.c.size = sizeof u;
        u.bytes[sizeof(fattn_combine_desc) + 3] = 1;
        reject_(f, &u.c, &f->tpo, &f->tpl, &f->to, &f->tl, FATTN_ERR_INVALID_ARGUMENT, "size",
                "a larger desc with an unknown field set", __LINE__);
    }

    /* Sizes, head_dim, dtypes, part strides. */
    REJECT_DESC(f, batch, 0, FATTN_ERR_INVALID_SIZE, "batch");
    REJECT_DESC(f, batch, -1, FATTN_ERR_INVALID_SIZE, "batch");
    REJECT_DESC(f, heads, 0, FATTN_ERR_INVALID_SIZE, "heads");
    REJECT_DESC(f, seq, 0, FATTN_ERR_INVALID_SIZE, "seq");
    REJECT_DESC(f, seq, -5, FATTN_ERR_INVALID_SIZE, "seq");
    REJECT_DESC(f, parts, 0, FATTN_ERR_INVALID_SIZE, "parts");
    REJECT_DESC(f, parts, -2, FATTN_ERR_INVALID_SIZE, "parts");
    REJECT_DESC(f, head_dim, 0, FATTN_ERR_HEAD_DIM, "head_dim");
    REJECT_DESC(f, head_dim, 257, FATTN_ERR_HEAD_DIM, "head_dim");
    REJECT_DESC(f, head_dim, -8, FATTN_ERR_HEAD_DIM, "head_dim");
    REJECT_DESC(f, part_dtype, FATTN_I32, FATTN_ERR_INVALID_ARGUMENT, "part_dtype");
    REJECT_DESC(f, part_dtype, (fattn_dtype)7, FATTN_ERR_INVALID_ARGUMENT, "part_dtype");
    REJECT_DESC(f, dtype, FATTN_I32, FATTN_ERR_INVALID_ARGUMENT, "~dtype");
    REJECT_DESC(f, dtype, (fattn_dtype)-1, FATTN_ERR_INVALID_ARGUMENT, "~dtype");
    REJECT_DESC(f, o_part_stride, -1, FATTN_ERR_STRIDE, "o_part_stride");
    REJECT_DESC(f, lse_part_stride, -V_L, FATTN_ERR_STRIDE, "lse_part_stride");
    REJECT_DESC(f, parts, INT64_MAX / 4, FATTN_ERR_OVERFLOW, "overflow");
    REJECT_DESC(f, o_part_stride, INT64_MAX / 2, FATTN_ERR_OVERFLOW, "larger than any buffer");

    /* Tensor dtypes. */
    REJECT_T(f, po, dtype, FATTN_F16, FATTN_ERR_DTYPE, "o_parts");
    REJECT_T(f, po, dtype, FATTN_BF16, FATTN_ERR_DTYPE, "o_parts");
    REJECT_T(f, pl, dtype, FATTN_F16, FATTN_ERR_DTYPE, "lse_parts");
    REJECT_T(f, o, dtype, FATTN_BF16, FATTN_ERR_DTYPE, "~o");
    REJECT_T(f, l, dtype, FATTN_F16, FATTN_ERR_DTYPE, "~lse");
    {
        /* f16 parts: lse_parts must still be f32. */
        fattn_combine_desc c = f->c;
        c.part_dtype = FATTN_F16;
        fattn_tensor po = f->tpo, pl = f->tpl;
        po.dtype = FATTN_F16;
        pl.dtype = FATTN_F16;
        reject_(f, &c, &po, &pl, &f->to, &f->tl, FATTN_ERR_DTYPE, "lse_parts",
                "f16 parts with f16 lse_parts", __LINE__);
        /* o_parts in f32 while part_dtype says f16. */
        reject_(f, &c, &f->tpo, &f->tpl, &f->to, &f->tl, FATTN_ERR_DTYPE, "o_parts",
                "part_dtype f16, o_parts f32", __LINE__);
    }

    /* Strides and offsets of the tensors. */
    REJECT_T(f, o, stride_dim, 2, FATTN_ERR_STRIDE, "~o");
    REJECT_T(f, po, stride_dim, 0, FATTN_ERR_STRIDE, "o_parts");
    REJECT_T(f, o, stride_head, -V_S * V_D, FATTN_ERR_STRIDE, "~o");
    REJECT_T(f, pl, stride_seq, -1, FATTN_ERR_STRIDE, "lse_parts");
    REJECT_T(f, o, stride_seq, 0, FATTN_ERR_STRIDE, "~o");    /* rows share memory */
    REJECT_T(f, l, stride_head, 1, FATTN_ERR_STRIDE, "~lse"); /* heads and rows interleave */
    REJECT_T(f, po, offset, -1, FATTN_ERR_INVALID_ARGUMENT, "o_parts");

    /* Buffer sizes: part 0 fits but the last part does not; part 0 does not. */
    REJECT_DESC(f, o_part_stride, 2 * V_E + 1, FATTN_ERR_BUFFER_TOO_SMALL, "o_parts");
    REJECT_DESC(f, lse_part_stride, V_L + 1, FATTN_ERR_BUFFER_TOO_SMALL, "lse_parts");
    REJECT_T(f, pl, offset, V_L + 1, FATTN_ERR_BUFFER_TOO_SMALL, "lse_parts");
    REJECT_T(f, o, offset, 1, FATTN_ERR_BUFFER_TOO_SMALL, "~o");
    REJECT_T(f, l, offset, 1, FATTN_ERR_BUFFER_TOO_SMALL, "~lse");
    {
        /* Three parts in a buffer of two and a half. */
        fattn_combine_desc c = f->c;
        c.parts = 4;
        reject_(f, &c, &f->tpo, &f->tpl, &f->to, &f->tl, FATTN_ERR_BUFFER_TOO_SMALL, "o_parts",
                "4 parts in a buffer of 3", __LINE__);
    }

    /* Outputs overlapping the parts or each other: in the parts' own buffer,
     * through a second wrapper of the same memory, on the last part only. */
    REJECT_T(f, o, buffer, f->po.b, FATTN_ERR_INVALID_ARGUMENT, "overlap");
    {
        fattn_tensor o = f->to;
        o.buffer = f->po.b;
        o.offset = V_E; /* part 1 */
        reject_(f, &f->c, &f->tpo, &f->tpl, &o, &f->tl, FATTN_ERR_INVALID_ARGUMENT, "overlap",
                "o on the last part", __LINE__);
        fattn_buffer *alias = NULL;
        EXPECT_OK(ctx, fattn_buffer_wrap(ctx, fattn_buffer_native(f->po.b), harr_bytes(&f->po.h),
                                         &alias));
        o.buffer = alias;
        o.offset = 0;
        reject_(f, &f->c, &f->tpo, &f->tpl, &o, &f->tl, FATTN_ERR_INVALID_ARGUMENT, "overlap",
                "o on a second wrapper of the parts' memory", __LINE__);
        fattn_buffer_free(alias);
    }
    REJECT_T(f, l, buffer, f->pl.b, FATTN_ERR_INVALID_ARGUMENT, "overlap");
    REJECT_T(f, l, buffer, f->po.b, FATTN_ERR_INVALID_ARGUMENT, "overlap");
    REJECT_T(f, l, buffer, f->o.b, FATTN_ERR_INVALID_ARGUMENT, "overlap");

    /* Buffers of another context (the same backend). */
    {
        fattn_context *other = NULL;
        EXPECT_OK(NULL, fattn_context_create(kind, 0, &other));
        darr big = darr_make(other, FATTN_F32, (size_t)(V_P * V_E + V_E));
        REJECT_T(f, po, buffer, big.b, FATTN_ERR_WRONG_CONTEXT, "o_parts");
        REJECT_T(f, pl, buffer, big.b, FATTN_ERR_WRONG_CONTEXT, "lse_parts");
        REJECT_T(f, o, buffer, big.b, FATTN_ERR_WRONG_CONTEXT, "~o");
        REJECT_T(f, l, buffer, big.b, FATTN_ERR_WRONG_CONTEXT, "~lse");
        darr_free(&big);
        fattn_context_free(other);
    }

    /* Outputs on const wrappers (of the outputs' own, writable memory). */
    {
        fattn_buffer *co = NULL, *cl = NULL;
        EXPECT_OK(ctx, fattn_buffer_wrap_const(ctx, fattn_buffer_native(f->o.b),
                                               harr_bytes(&f->o.h), &co));
        EXPECT_OK(ctx, fattn_buffer_wrap_const(ctx, fattn_buffer_native(f->l.b),
                                               harr_bytes(&f->l.h), &cl));
        REJECT_T(f, o, buffer, co, FATTN_ERR_INVALID_ARGUMENT, "~o");
        REJECT_T(f, l, buffer, cl, FATTN_ERR_INVALID_ARGUMENT, "~lse");
        fattn_buffer_free(co);
        fattn_buffer_free(cl);
    }

    /* And the fixture itself is a valid call: parts on const wrappers, a
     * newer caller's larger description with zeros past this one, O placed
     * after the last part in the parts' buffer, and the plain call. */
    {
        fattn_buffer *cpo = NULL, *cpl = NULL;
        EXPECT_OK(ctx, fattn_buffer_wrap_const(ctx, fattn_buffer_native(f->po.b),
                                               harr_bytes(&f->po.h), &cpo));
        EXPECT_OK(ctx, fattn_buffer_wrap_const(ctx, fattn_buffer_native(f->pl.b),
                                               harr_bytes(&f->pl.h), &cpl));
        fattn_tensor po = f->tpo, pl = f->tpl;
        po.buffer = cpo;
        pl.buffer = cpl;
        EXPECT_OK(ctx, fattn_combine(ctx, &f->c, &po, &pl, &f->to, &f->tl));
        fattn_buffer_free(cpo);
        fattn_buffer_free(cpl);

        union {
            fattn_combine_desc c;
            unsigned char bytes[sizeof(fattn_combine_desc) + 16];
        } u;
        memset(&u, 0, sizeof u);
        u.c = f->c;
        u.c.size = sizeof u;
        EXPECT_OK(ctx, fattn_combine(ctx, &u.c, &f->tpo, &f->tpl, &f->to, &f->tl));

        fattn_tensor o = f->to;
        o.buffer = f->po.b;
        o.offset = V_P * V_E;
        EXPECT_OK(ctx, fattn_combine(ctx, &f->c, &f->tpo, &f->tpl, &o, &f->tl));
        /* ... and its answer is the plain call's. */
        darr_download(&f->po);
        darr_poison(&f->o);
        EXPECT_OK(ctx, fattn_combine(ctx, &f->c, &f->tpo, &f->tpl, &f->to, &f->tl));
        assert_string_equal(fattn_error_message(ctx), "");
        darr_download(&f->o);
        for (size_t i = 0; i < (size_t)V_E; i++)
            if (!(harr_get(&f->o.h, i) == harr_get(&f->po.h, (size_t)(V_P * V_E) + i)))
                fail_msg("O placed after the parts: element %zu = %g, the plain call's %g", i,
                         harr_get(&f->po.h, (size_t)(V_P * V_E) + i), harr_get(&f->o.h, i));
    }

    /* Part stride 0 with three parts: part 0 three times, so O = O_0 and
     * lse = lse_0 + log(3) ("any other non-negative stride works"). */
    {
        fattn_combine_desc c = f->c;
        c.parts = 3;
        c.o_part_stride = 0;
        c.lse_part_stride = 0;
        darr_poison(&f->o);
        darr_poison(&f->l);
        EXPECT_OK(ctx, fattn_combine(ctx, &c, &f->tpo, &f->tpl, &f->to, &f->tl));
        darr_download(&f->o);
        darr_download(&f->l);
        for (size_t i = 0; i < (size_t)V_E; i++)
            if (!(fabs(harr_get(&f->o.h, i) - harr_get(&f->po.h, i)) <= 2e-5))
                fail_msg("three parts at stride 0: O[%zu] = %g, want part 0's %g", i,
                         harr_get(&f->o.h, i), harr_get(&f->po.h, i));
        for (size_t i = 0; i < (size_t)V_L; i++)
            if (!lse_close(harr_get(&f->l.h, i), harr_get(&f->pl.h, i) + log(3.0)))
                fail_msg("three parts at stride 0: lse[%zu] = %.9g, want %.9g", i,
                         harr_get(&f->l.h, i), harr_get(&f->pl.h, i) + log(3.0));
    }
    vfix_free(f);
    fattn_context_free(ctx);
}
PER_BACKEND(validation)

int main(void) {
    const struct CMUnitTest tests[] = {
        PER_BACKEND_TESTS(validation),
        PER_BACKEND_TESTS(special_rows),
        PER_BACKEND_TESTS(against_forward),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* Special values, the same on every backend and path (issue 10, findings 2
 * and 10). The semantics, as the README states them:
 *   - a -inf score weighs 0 wherever it falls (first, middle or last key
 *     tile), and the rest of the row is exact; a score that overflows float32
 *     to -inf is the same;
 *   - a row with no finite score gets O = 0 and LSE = -inf, never NaN;
 *   - NaN propagates: a NaN or +inf score (NaN in Q or K, inf - inf) makes
 *     the row's O and LSE NaN; a NaN in V at a visible key makes that output
 *     element NaN and leaves LSE alone; the K of a key the causal mask hides
 *     (bottom-right or top-left) never enters a score, so a NaN or -inf
 *     there changes nothing. (A NaN in the V of a hidden key is left open:
 *     GPU paths multiply whole tiles.)
 * Each head of one call is one scenario (heads have their own K and V). The
 * expected values come from the double reference, which follows the same
 * rules; NaN must meet NaN, infinities must be equal, finite values within
 * the dtype's tolerance. Outputs start as a finite sentinel, so an unwritten
 * element shows even where NaN is expected. */
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

#include "half.h"
#include "harness.h"
#include "test_backend.h"
#include "reference.h"

enum { N_KEYS = 300, DIM = 16, SENTINEL = 1000 };

/* What each head of the main call holds. */
enum scenario {
    FINITE,      /* control: nothing special */
    NEG_FIRST,   /* -inf scores for keys [0, 70): the first tile(s) on every backend */
    NEG_MIDDLE,  /* -inf for keys [100, 190) */
    NEG_LAST,    /* -inf for keys [N-70, N): the last tile(s) */
    NEG_SCATTER, /* -inf for every third key */
    NEG_ALL_BUT, /* -inf for every key but 137: O = V[137] */
    NEG_ALL,     /* -inf for every key: O = 0, LSE = -inf */
    NAN_Q,       /* a NaN in Q: the row is NaN */
    NAN_K,       /* a NaN in K of key 150: the row is NaN */
    NAN_V,       /* a NaN in V of key 150, dim 3: O[3] is NaN, the rest exact */
    POS_INF,     /* a +inf score at key 42: the row is NaN */
    SCENARIOS
};

static const char *const scenario_name[SCENARIOS] = {
    "finite",         "-inf first tile", "-inf middle tile",
    "-inf last tile", "-inf scattered",  "-inf all but one key",
    "-inf every key", "NaN in Q",        "NaN in K",
    "NaN in V",       "+inf score"};

static int neg_inf_key(int s, int j) {
    switch (s) {
    case NEG_FIRST: return j < 70;
    case NEG_MIDDLE: return j >= 100 && j < 190;
    case NEG_LAST: return j >= N_KEYS - 70;
    case NEG_SCATTER: return j % 3 == 0;
    case NEG_ALL_BUT: return j != 137;
    case NEG_ALL: return 1;
    default: return 0;
    }
}

static uint64_t rng_next(uint64_t *s) { /* splitmix64 */
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* In [lo, hi]: never zero, so a -inf in K times Q stays -inf. */
static float rng_range(uint64_t *s, float lo, float hi) {
    return lo + (hi - lo) * (float)((double)(rng_next(s) >> 11) / 9007199254740992.0);
}

/* One call's host data: BSHD with batch 1, so element (s, h, d) of a tensor
 * with H heads is at (s * H + h) * DIM + d. */
typedef struct problem {
    fattn_attention_desc desc;
    void *q, *k, *v;
} problem;

static void problem_alloc(problem *p, fattn_dtype t, int64_t heads, int64_t sq, int64_t sk) {
    const fattn_attention_desc init = FATTN_ATTENTION_DESC_INIT;
    p->desc = init;
    p->desc.batch = 1;
    p->desc.heads_q = p->desc.heads_kv = heads;
    p->desc.seq_q = sq;
    p->desc.seq_kv = sk;
    p->desc.head_dim = DIM;
    p->desc.dtype = t;
    const size_t es = fattn_dtype_size(t);
    p->q = calloc((size_t)(heads * sq * DIM), es);
    p->k = calloc((size_t)(heads * sk * DIM), es);
    p->v = calloc((size_t)(heads * sk * DIM), es);
    assert_true(p->q && p->k && p->v);
}

static void problem_free(problem *p) {
    free(p->q);
    free(p->k);
    free(p->v);
}

/* Q positive (so Q times a -inf key element is -inf, never NaN), K and V in
 * [-1, 1] without zeros. */
static void fill_random(problem *p, uint64_t seed) {
    const fattn_attention_desc *d = &p->desc;
    const fattn_dtype t = d->dtype;
    for (int64_t i = 0; i < d->heads_q * d->seq_q * DIM; i++)
        harness_put(p->q, t, i, rng_range(&seed, 0.1f, 1.0f));
    for (int64_t i = 0; i < d->heads_kv * d->seq_kv * DIM; i++) {
        float x = rng_range(&seed, 0.1f, 1.0f), y = rng_range(&seed, 0.1f, 1.0f);
        harness_put(p->k, t, i, (rng_next(&seed) & 1) ? x : -x);
        harness_put(p->v, t, i, (rng_next(&seed) & 1) ? y : -y);
    }
}

static int64_t at(const problem *p, int64_t s, int64_t h, int64_t dim) {
    return (s * p->desc.heads_q + h) * DIM + dim;
}

static void build_scenarios(problem *p, fattn_dtype t, uint64_t seed) {
    problem_alloc(p, t, SCENARIOS, 3, N_KEYS);
    fill_random(p, seed);
    for (int h = 0; h < SCENARIOS; h++) {
        for (int j = 0; j < N_KEYS; j++)
            if (neg_inf_key(h, j)) harness_put(p->k, t, at(p, j, h, 0), -INFINITY);
        if (h == NAN_Q) harness_put(p->q, t, at(p, 1, h, 5), NAN); /* row 1 only */
        if (h == NAN_K) harness_put(p->k, t, at(p, 150, h, 7), NAN);
        if (h == NAN_V) harness_put(p->v, t, at(p, 150, h, 3), NAN);
        if (h == POS_INF) harness_put(p->k, t, at(p, 42, h, 0), INFINITY);
    }
}

/* Scores that overflow float32 to -inf from finite inputs: Q = 60000 (f16's
 * range) on dim 0, the set keys -60000 there, scale 1e30, so their scores are
 * -3.6e39 scaled; the other keys are 0 on dim 0 and every other dim is 0 for
 * K: their scores are exactly 0. O is then the mean of V over those keys and
 * LSE the log of their count. */
static void build_overflow(problem *p, fattn_dtype t, uint64_t seed) {
    problem_alloc(p, t, 2, 2, N_KEYS);
    fill_random(p, seed);
    p->desc.scale = 1e30f;
    for (int h = 0; h < 2; h++) {
        for (int i = 0; i < 2; i++) harness_put(p->q, t, at(p, i, h, 0), 60000.0f);
        for (int j = 0; j < N_KEYS; j++) {
            for (int x = 0; x < DIM; x++) harness_put(p->k, t, at(p, j, h, x), 0.0f);
            /* head 0: the first 200 keys overflow; head 1: all but the last. */
            if (h == 0 ? j < 200 : j != N_KEYS - 1) harness_put(p->k, t, at(p, j, h, 0), -60000.0f);
        }
    }
}

/* Causal, seq_q 2: row 0 does not see the last key, whose K is NaN. */
static void build_causal_hidden(problem *p, fattn_dtype t, uint64_t seed) {
    problem_alloc(p, t, 1, 2, N_KEYS);
    fill_random(p, seed);
    p->desc.causal = FATTN_CAUSAL_BOTTOM_RIGHT;
    harness_put(p->k, t, at(p, N_KEYS - 1, 0, 2), NAN);
}

/* Top-left causal, seq_q 3: row i sees keys 0..i only, so the NaN in K of
 * key 3, and the -inf in K of key 150 and beyond, never enter a score. */
static void build_causal_hidden_top_left(problem *p, fattn_dtype t, uint64_t seed) {
    problem_alloc(p, t, 1, 3, N_KEYS);
    fill_random(p, seed);
    p->desc.causal = FATTN_CAUSAL_TOP_LEFT;
    harness_put(p->k, t, at(p, 3, 0, 0), NAN);
    for (int j = 150; j < N_KEYS; j++)
        harness_put(p->k, t, at(p, j, 0, 1), j % 2 ? -INFINITY : NAN);
}

static float get(const void *base, fattn_dtype t, int64_t i) {
    if (t == FATTN_F32) return ((const float *)base)[i];
    if (t == FATTN_F16) return fattn_f16_to_f32(((const uint16_t *)base)[i]);
    return fattn_bf16_to_f32(((const uint16_t *)base)[i]);
}

/* Runs p on ctx (tiled or naive) through device buffers. Returns the
 * status; o and lse hold what came back. */
static fattn_status run_on(fattn_context *ctx, const problem *p, int naive, void *o, float *lse) {
    const fattn_attention_desc *d = &p->desc;
    const size_t es = fattn_dtype_size(d->dtype);
    const size_t nq = (size_t)(d->heads_q * d->seq_q * DIM),
                 nk = (size_t)(d->heads_kv * d->seq_kv * DIM);
    const size_t rows = (size_t)(d->heads_q * d->seq_q);
    const size_t bytes[5] = {nq * es, nk * es, nk * es, nq * es, rows * sizeof(float)};
    const void *src[3] = {p->q, p->k, p->v};
    fattn_buffer *b[5] = {0};
    fattn_tensor t[5];
    fattn_status st = FATTN_OK;
    /* A finite sentinel, far from any answer, in O and LSE. */
    for (size_t i = 0; i < nq; i++) harness_put(o, d->dtype, (int64_t)i, SENTINEL);
    for (size_t i = 0; i < rows; i++) lse[i] = SENTINEL;
    for (int i = 0; i < 5 && st == FATTN_OK; i++) {
        st = fattn_buffer_alloc(ctx, bytes[i], &b[i]);
        if (st == FATTN_OK)
            st = fattn_buffer_write(b[i], 0, i < 3 ? src[i] : i == 3 ? o : (void *)lse, bytes[i]);
    }
    for (int i = 0; i < 4 && st == FATTN_OK; i++)
        st = fattn_tensor_init(b[i], d->dtype, FATTN_LAYOUT_BSHD, 1,
                               i == 1 || i == 2 ? d->heads_kv : d->heads_q,
                               i == 1 || i == 2 ? d->seq_kv : d->seq_q, DIM, 0, &t[i]);
    if (st == FATTN_OK) st = fattn_tensor_init_lse(b[4], 1, d->heads_q, d->seq_q, 0, &t[4]);
    if (st == FATTN_OK)
        st = (naive ? fattn_forward_naive : fattn_forward)(ctx, d, &t[0], &t[1], &t[2], &t[3],
                                                           &t[4]);
    if (st == FATTN_OK) st = fattn_buffer_read(b[3], 0, o, bytes[3]);
    if (st == FATTN_OK) st = fattn_buffer_read(b[4], 0, lse, bytes[4]);
    for (int i = 0; i < 5; i++) fattn_buffer_free(b[i]);
    return st;
}

/* NaN meets NaN, an infinity its equal, a finite value its reference within
 * tol (relative for LSE). */
static int agrees(double got, double want, double tol, int relative) {
    if (isnan(want)) return isnan(got);
    if (isinf(want)) return got == want;
    return fabs(got - want) <= tol * (relative ? fmax(1.0, fabs(want)) : 1.0);
}

/* Checks every row of p's result; prints the first disagreements. Returns
 * how many elements disagree. names: a label per head, or NULL. */
static int check(const problem *p, const void *o, const float *lse, const char *what,
                 const char *const *names) {
    const fattn_attention_desc *d = &p->desc;
    const int64_t H = d->heads_q, S = d->seq_q, Hk = d->heads_kv;
    double *ro = malloc((size_t)(H * S * DIM) * sizeof(double)),
           *rl = malloc((size_t)(H * S) * sizeof(double));
    assert_true(ro && rl);
    const ref_view q = {p->q, d->dtype, 0, H * S * DIM, DIM, H * DIM};
    const ref_view k = {p->k, d->dtype, 0, Hk * d->seq_kv * DIM, DIM, Hk * DIM};
    const ref_view v = {p->v, d->dtype, 0, Hk * d->seq_kv * DIM, DIM, Hk * DIM};
    ref_attention(d, &q, &k, &v, ro, rl);
    const double tol = harness_tolerance(d->dtype);
    int bad = 0;
    for (int64_t h = 0; h < H; h++)
        for (int64_t i = 0; i < S; i++) {
            const int64_t row = h * S + i; /* the reference's [b][h][s] order */
            for (int64_t x = 0; x < DIM; x++) {
                const double got = get(o, d->dtype, at(p, i, h, x)), want = ro[row * DIM + x];
                if (!agrees(got, want, tol, 0) && bad++ < 6)
                    print_error("%s: %s head %lld row %lld: O[%lld] = %g, want %g\n", what,
                                names ? names[h] : "", (long long)h, (long long)i, (long long)x,
                                got, want);
            }
            const double got = lse[h * S + i], want = rl[row]; /* lse is [h][s] */
            if (!agrees(got, want, 1e-5, 1) && bad++ < 6)
                print_error("%s: %s head %lld row %lld: LSE = %g, want %g\n", what,
                            names ? names[h] : "", (long long)h, (long long)i, got, want);
        }
    free(ro);
    free(rl);
    return bad;
}

/* The rules themselves, checked on the reference once (so the reference
 * cannot drift into agreeing with a wrong backend). */
static void test_reference_follows_the_rules(void **state) {
    (void)state;
    problem p;
    build_scenarios(&p, FATTN_F32, 1);
    const int64_t H = SCENARIOS, S = 3;
    double *ro = malloc((size_t)(H * S * DIM) * sizeof(double)),
           *rl = malloc((size_t)(H * S) * sizeof(double));
    assert_true(ro && rl);
    const ref_view q = {p.q, FATTN_F32, 0, 0, DIM, H * DIM},
                   k = {p.k, FATTN_F32, 0, 0, DIM, H * DIM},
                   v = {p.v, FATTN_F32, 0, 0, DIM, H * DIM};
    ref_attention(&p.desc, &q, &k, &v, ro, rl);
    for (int i = 0; i < S; i++) {
        const int64_t r = (int64_t)NEG_ALL * S + i, r1 = (int64_t)NEG_ALL_BUT * S + i;
        assert_true(isinf(rl[r]) && rl[r] < 0);
        for (int x = 0; x < DIM; x++) {
            assert_true(ro[r * DIM + x] == 0.0);
            assert_true(fabs(ro[r1 * DIM + x] - get(p.v, FATTN_F32, at(&p, 137, NEG_ALL_BUT, x))) <
                        1e-12);
            assert_true(isnan(ro[((int64_t)NAN_K * S + i) * DIM + x]));
            assert_true(isnan(ro[((int64_t)POS_INF * S + i) * DIM + x]));
            assert_true(isnan(ro[((int64_t)NAN_V * S + i) * DIM + x]) == (x == 3));
            assert_true(isnan(ro[((int64_t)NAN_Q * S + i) * DIM + x]) == (i == 1));
        }
        assert_true(isnan(rl[(int64_t)NAN_K * S + i]) && isfinite(rl[(int64_t)NAN_V * S + i]));
    }
    free(ro);
    free(rl);
    problem_free(&p);
}

typedef struct special_state {
    fattn_backend_kind kind;
    int naive;
} special_state;

static void test_backend(void **state) {
    const special_state *ss = *state;
    fattn_backend_info info = FATTN_BACKEND_INFO_INIT;
    test_use_backend(ss->kind, &info);
    int bad = 0;
    for (int dev = 0; dev < info.device_count; dev++) {
        fattn_context *ctx = NULL;
        if (fattn_context_create(ss->kind, dev, &ctx) != FATTN_OK)
            fail_msg("create %s device %d: %s", info.name, dev, fattn_error_message(NULL));
        for (int dt = FATTN_F32; dt <= FATTN_BF16; dt++) {
            for (int which = 0; which < 4; which++) {
                problem p;
                if (which == 0)
                    build_scenarios(&p, (fattn_dtype)dt, 0x5eed + (uint64_t)dt);
                else if (which == 1)
                    build_overflow(&p, (fattn_dtype)dt, 0x0f10 + (uint64_t)dt);
                else if (which == 2)
                    build_causal_hidden(&p, (fattn_dtype)dt, 0xca05 + (uint64_t)dt);
                else
                    build_causal_hidden_top_left(&p, (fattn_dtype)dt, 0x7105 + (uint64_t)dt);
                const size_t nq = (size_t)(p.desc.heads_q * p.desc.seq_q);
                void *o = malloc(nq * DIM * 4);
                float *lse = malloc(nq * sizeof(float));
                assert_true(o && lse);
                char what[256];
                snprintf(what, sizeof what, "%s device %d %s%s %s", info.name, dev,
                         harness_dtype_name((fattn_dtype)dt), ss->naive ? " naive" : "",
                         which == 0   ? "scenarios"
                         : which == 1 ? "overflow to -inf"
                         : which == 2 ? "causal-hidden NaN"
                                      : "top-left-hidden NaN and -inf");
                const fattn_status st = run_on(ctx, &p, ss->naive, o, lse);
                if (st == FATTN_ERR_UNSUPPORTED && ss->naive) {
                    char name[64], reason[512];
                    snprintf(name, sizeof name, "%s-naive", info.name);
                    snprintf(reason, sizeof reason, "%s", fattn_error_message(ctx));
                    free(o);
                    free(lse);
                    problem_free(&p);
                    fattn_context_free(ctx);
                    test_skip_unless_required(name, reason);
                }
                if (st != FATTN_OK) {
                    print_error("%s: %s: %s\n", what, fattn_status_string(st),
                                fattn_error_message(ctx));
                    bad++;
                } else {
                    const int n = check(&p, o, lse, what, which == 0 ? scenario_name : NULL);
                    if (n) print_error("%s: %d elements disagree\n", what, n);
                    bad += n;
                }
                free(o);
                free(lse);
                problem_free(&p);
            }
        }
        fattn_context_free(ctx);
    }
    assert_int_equal(bad, 0);
}

/* ---- Split-KV decoding and its merge ---------------------------------------------- */

/* Decode shapes (seq_q 1 and 4, causal for 4) against SPLIT_KEYS keys, GQA
 * SPLIT_GROUP query heads per K/V head, each K/V head one scenario, run with
 * the keys forced into 1, 3 and 7 splits (FATTN_PARAM_KV_SPLITS): the
 * split paths compute a partial softmax per split and merge them with the
 * log-sum-exp rule, so a split whose every score is -inf (lse -inf) must be
 * skipped, not turned into NaN, and a NaN in any split must reach the row.
 * The -inf ranges cover the first, a middle and the last of 3 and of 7
 * splits whole (the splits are key ranges in order). */
enum { SPLIT_KEYS = 2999, SPLIT_GROUP = 4 };

enum split_scenario {
    SP_FINITE,     /* control; query head 1 of the group has a NaN in Q at row 0 */
    SP_NEG_FIRST,  /* -inf for keys [0, 0.4 N): the first split(s) see nothing */
    SP_NEG_MIDDLE, /* -inf for keys [0.4 N, 0.6 N): the middle split of 7, part of 3's */
    SP_NEG_LAST,   /* -inf for keys [0.6 N, N): the last split(s) */
    SP_ONE_KEY,    /* -inf everywhere but key N/2: every other split sees nothing */
    SP_NEG_ALL,    /* -inf for every key: O = 0, LSE = -inf */
    SP_NAN_K,      /* NaN in K of key N - 10 (the last split): the row is NaN */
    SP_NAN_V,      /* NaN in V of key 50 (the first split), dim 3: O[3] NaN */
    SP_POS_INF,    /* +inf score at key N/2 (a middle split): the row is NaN */
    SP_COUNT
};

static const char *const split_name[SP_COUNT] = {
    "finite (NaN Q in head 1)", "-inf first split(s)",   "-inf middle split",
    "-inf last split(s)",       "one finite key",        "-inf every key",
    "NaN in K, last split",     "NaN in V, first split", "+inf score, middle split"};

static int split_neg_inf_key(int s, int j) {
    const int n = SPLIT_KEYS;
    switch (s) {
    case SP_NEG_FIRST: return j < 2 * n / 5;
    case SP_NEG_MIDDLE: return j >= 2 * n / 5 && j < 3 * n / 5;
    case SP_NEG_LAST: return j >= 3 * n / 5;
    case SP_ONE_KEY: return j != n / 2;
    case SP_NEG_ALL: return 1;
    default: return 0;
    }
}

static int64_t at_kv(const problem *p, int64_t s, int64_t h, int64_t dim) {
    return (s * p->desc.heads_kv + h) * DIM + dim;
}

static void build_split(problem *p, fattn_dtype t, int64_t seq_q, uint64_t seed) {
    const fattn_attention_desc init = FATTN_ATTENTION_DESC_INIT;
    const int64_t hk = SP_COUNT, hq = SP_COUNT * SPLIT_GROUP, sk = SPLIT_KEYS;
    p->desc = init;
    p->desc.batch = 1;
    p->desc.heads_q = hq;
    p->desc.heads_kv = hk;
    p->desc.seq_q = seq_q;
    p->desc.seq_kv = sk;
    p->desc.head_dim = DIM;
    p->desc.dtype = t;
    p->desc.causal = seq_q > 1 ? FATTN_CAUSAL_BOTTOM_RIGHT : FATTN_CAUSAL_NONE;
    const size_t es = fattn_dtype_size(t);
    p->q = calloc((size_t)(hq * seq_q * DIM), es);
    p->k = calloc((size_t)(hk * sk * DIM), es);
    p->v = calloc((size_t)(hk * sk * DIM), es);
    assert_true(p->q && p->k && p->v);
    for (int64_t i = 0; i < hq * seq_q * DIM; i++)
        harness_put(p->q, t, i, rng_range(&seed, 0.1f, 1.0f));
    for (int64_t i = 0; i < hk * sk * DIM; i++) {
        const float x = rng_range(&seed, 0.1f, 1.0f), y = rng_range(&seed, 0.1f, 1.0f);
        harness_put(p->k, t, i, (rng_next(&seed) & 1) ? x : -x);
        harness_put(p->v, t, i, (rng_next(&seed) & 1) ? y : -y);
    }
    for (int g = 0; g < SP_COUNT; g++) {
        for (int j = 0; j < sk; j++)
            if (split_neg_inf_key(g, j)) harness_put(p->k, t, at_kv(p, j, g, 0), -INFINITY);
        if (g == SP_FINITE) harness_put(p->q, t, at(p, 0, g * SPLIT_GROUP + 1, 5), NAN);
        if (g == SP_NAN_K) harness_put(p->k, t, at_kv(p, sk - 10, g, 7), NAN);
        if (g == SP_NAN_V) harness_put(p->v, t, at_kv(p, 50, g, 3), NAN);
        if (g == SP_POS_INF) harness_put(p->k, t, at_kv(p, sk / 2, g, 0), INFINITY);
    }
}

static void test_split_backend(void **state) {
    const special_state *ss = *state;
    fattn_backend_info info = FATTN_BACKEND_INFO_INIT;
    test_use_backend(ss->kind, &info);
    static const int64_t splits[] = {1, 3, 7}, seqs[] = {1, 4};
    const char *names[SP_COUNT * SPLIT_GROUP];
    for (int h = 0; h < SP_COUNT * SPLIT_GROUP; h++) names[h] = split_name[h / SPLIT_GROUP];
    int bad = 0;
    for (int dev = 0; dev < info.device_count; dev++) {
        fattn_context *ctx = NULL;
        if (fattn_context_create(ss->kind, dev, &ctx) != FATTN_OK)
            fail_msg("create %s device %d: %s", info.name, dev, fattn_error_message(NULL));
        for (int dt = FATTN_F32; dt <= FATTN_BF16; dt++)
            for (size_t qi = 0; qi < sizeof seqs / sizeof seqs[0]; qi++) {
                problem p;
                build_split(&p, (fattn_dtype)dt, seqs[qi], 0x5b17 + (uint64_t)(dt * 8) + qi);
                const size_t nq = (size_t)(p.desc.heads_q * p.desc.seq_q);
                void *o = malloc(nq * DIM * 4);
                float *lse = malloc(nq * sizeof(float));
                assert_true(o && lse);
                for (size_t si = 0; si < sizeof splits / sizeof splits[0]; si++) {
                    char what[256];
                    snprintf(what, sizeof what,
                             "%s device %d %s decode %lld/%d gqa %d%s, %lld splits", info.name, dev,
                             harness_dtype_name((fattn_dtype)dt), (long long)seqs[qi], SPLIT_KEYS,
                             SPLIT_GROUP, seqs[qi] > 1 ? " causal" : "", (long long)splits[si]);
                    assert_int_equal(
                        fattn_context_set_param(ctx, FATTN_PARAM_KV_SPLITS, splits[si]), FATTN_OK);
                    /* More than one split is a plan with a workspace for the
                     * partial results: the split path is the one that runs. */
                    uint64_t ws = 0;
                    assert_int_equal(fattn_workspace_size(ctx, &p.desc, &ws), FATTN_OK);
                    if ((splits[si] > 1) != (ws > 0)) {
                        print_error("%s: fattn_workspace_size is %llu bytes\n", what,
                                    (unsigned long long)ws);
                        bad++;
                    }
                    fattn_status st = run_on(ctx, &p, 0, o, lse);
                    if (st == FATTN_OK) st = fattn_context_synchronize(ctx);
                    if (st != FATTN_OK) {
                        print_error("%s: %s: %s\n", what, fattn_status_string(st),
                                    fattn_error_message(ctx));
                        bad++;
                        continue;
                    }
                    const int n = check(&p, o, lse, what, names);
                    if (n) print_error("%s: %d elements disagree\n", what, n);
                    bad += n;
                }
                free(o);
                free(lse);
                problem_free(&p);
            }
        assert_int_equal(fattn_context_set_param(ctx, FATTN_PARAM_KV_SPLITS, 0), FATTN_OK);
        fattn_context_free(ctx);
    }
    assert_int_equal(bad, 0);
}

/* A context on device 0 of the state's backend, or a visible skip. */
static fattn_context *open_device0(const special_state *ss, fattn_backend_info *info) {
    test_use_backend(ss->kind, info);
    fattn_context *ctx = NULL;
    if (fattn_context_create(ss->kind, 0, &ctx) != FATTN_OK)
        fail_msg("create %s: %s", info->name, fattn_error_message(NULL));
    return ctx;
}

/* An allocation no device can hold is FATTN_ERR_OUT_OF_MEMORY naming the
 * bytes asked for (OpenCL drivers and CUDA could accept it lazily, or quote
 * source text). */
static void test_absurd_alloc(void **state) {
    fattn_backend_info info = FATTN_BACKEND_INFO_INIT;
    fattn_context *ctx = open_device0(*state, &info);
    fattn_buffer *b = NULL;
    const fattn_status st = fattn_buffer_alloc(ctx, (size_t)1 << 62, &b);
    const char *msg = fattn_error_message(ctx);
    if (st != FATTN_ERR_OUT_OF_MEMORY || !strstr(msg, "4611686018427387904"))
        fail_msg("%s: fattn_buffer_alloc(2^62) returned %s: \"%s\"", info.name,
                 fattn_status_string(st), msg);
    assert_null(b);
    fattn_context_free(ctx);
}

/* A tensor 2 bytes off its f32 alignment, inside memory the backend
 * allocated, is FATTN_ERR_MISALIGNED on backends whose buffers are
 * addresses (CPU, CUDA); a cl_mem cannot be offset that way. */
static void test_misaligned_wrap(void **state) {
    fattn_backend_info info = FATTN_BACKEND_INFO_INIT;
    fattn_context *ctx = open_device0(*state, &info);
    problem p;
    build_causal_hidden(&p, FATTN_F32, 7);
    const size_t qb = (size_t)(p.desc.seq_q * DIM) * 4, kb = (size_t)(p.desc.seq_kv * DIM) * 4;
    fattn_buffer *b[5] = {0}, *odd = NULL;
    const size_t bytes[5] = {qb + 16, kb, kb, qb, (size_t)p.desc.seq_q * 4};
    for (int i = 0; i < 5; i++)
        assert_int_equal(fattn_buffer_alloc(ctx, bytes[i], &b[i]), FATTN_OK);
    assert_int_equal(fattn_buffer_wrap(ctx, (char *)fattn_buffer_native(b[0]) + 2, qb, &odd),
                     FATTN_OK);
    fattn_tensor t[5];
    for (int i = 0; i < 4; i++)
        assert_int_equal(fattn_tensor_init(i == 0 ? odd : b[i], FATTN_F32, FATTN_LAYOUT_BSHD, 1, 1,
                                           i == 1 || i == 2 ? p.desc.seq_kv : p.desc.seq_q, DIM, 0,
                                           &t[i]),
                         FATTN_OK);
    assert_int_equal(fattn_tensor_init_lse(b[4], 1, 1, p.desc.seq_q, 0, &t[4]), FATTN_OK);
    const fattn_status st = fattn_forward(ctx, &p.desc, &t[0], &t[1], &t[2], &t[3], &t[4]);
    if (st != FATTN_ERR_MISALIGNED)
        fail_msg("%s: a misaligned q gave %s: \"%s\"", info.name, fattn_status_string(st),
                 fattn_error_message(ctx));
    fattn_buffer_free(odd);
    for (int i = 0; i < 5; i++) fattn_buffer_free(b[i]);
    problem_free(&p);
    fattn_context_free(ctx);
}

#define BACKEND(kind, naive, label)                                                                \
    {                                                                                              \
        label, test_backend, NULL, NULL, &(special_state) { kind, naive }                          \
    }

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reference_follows_the_rules),
        BACKEND(FATTN_BACKEND_CPU, 0, "cpu"),
        BACKEND(FATTN_BACKEND_CPU, 1, "cpu naive"),
        BACKEND(FATTN_BACKEND_CUDA, 0, "cuda"),
        BACKEND(FATTN_BACKEND_CUDA, 1, "cuda naive"),
        BACKEND(FATTN_BACKEND_OPENCL, 0, "opencl"),
        BACKEND(FATTN_BACKEND_OPENCL, 1, "opencl naive"),
        {"cpu splits", test_split_backend, NULL, NULL, &(special_state){FATTN_BACKEND_CPU, 0}},
        {"cuda splits", test_split_backend, NULL, NULL, &(special_state){FATTN_BACKEND_CUDA, 0}},
        {"opencl splits", test_split_backend, NULL, NULL,
         &(special_state){FATTN_BACKEND_OPENCL, 0}},
        {"cpu 2^62 bytes", test_absurd_alloc, NULL, NULL, &(special_state){FATTN_BACKEND_CPU, 0}},
        {"cuda 2^62 bytes", test_absurd_alloc, NULL, NULL, &(special_state){FATTN_BACKEND_CUDA, 0}},
        {"opencl 2^62 bytes", test_absurd_alloc, NULL, NULL,
         &(special_state){FATTN_BACKEND_OPENCL, 0}},
        {"cpu misaligned", test_misaligned_wrap, NULL, NULL,
         &(special_state){FATTN_BACKEND_CPU, 0}},
        {"cuda misaligned", test_misaligned_wrap, NULL, NULL,
         &(special_state){FATTN_BACKEND_CUDA, 0}},
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* Determinism: on every available backend, dtype and path (tiled, and the
 * naive baseline where the backend has one), a few cases of the shared table
 * run FATTN_TEST_REPEATS times (default 10) on the same inputs, with the
 * outputs poisoned before each run by a pattern that alternates, and O and
 * LSE must be bitwise identical to the first run's. The first run must also
 * have written every element (the poison is NaN in every dtype). On the
 * tiled path, two shapes of the decode/KV-cache work too, with the key
 * split count fixed (FATTN_PARAM_KV_SPLITS): a decode (seq_q 1 against
 * 20000 keys, GQA 32/8, d 64) whose partial results are merged by the
 * log-sum-exp rule, and a ragged batch (packed Q, a paged cache with
 * seqused_kv, causal) that must also match the reference on its first run. */
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
#include "ragged.h"
#include "test_backend.h"

/* Non-causal, causal, GQA (causal, other layout), causal with seq_q > seq_kv
 * and an odd head dim, top-left causal with more queries than keys, and a
 * large one: tile edges everywhere. */
static const char *const case_names[] = {
    "seq 63 dim 40",          "causal seq 65",     "GQA 8/2",
    "GQA 8/2 causal bhsd",    "causal sq>sk 65/7", "causal sq<sk 63/129",
    "causal tl sq>sk 101/37", "seq 129 dim 256",
};
enum { CASES = sizeof case_names / sizeof case_names[0] };

/* The decode shape, run with DECODE_SPLITS key splits. */
static const fattn_case decode_case = {"decode 1/20000 gqa 32/8 d64",
                                       1,
                                       32,
                                       8,
                                       1,
                                       20000,
                                       64,
                                       FATTN_CAUSAL_NONE,
                                       FATTN_LAYOUT_BSHD,
                                       STORE_SEPARATE,
                                       1.0f,
                                       0.0f};
enum { DECODE_SPLITS = 7, RAGGED_SPLITS = 3 };

/* The ragged shape: 4 sequences (one without query rows), packed Q, paged
 * keys (page 16) through a shuffled block table, seqused_kv. */
static const int32_t ragged_len_q[] = {3, 0, 1, 7}, ragged_len_kv[] = {700, 5, 1500, 64};
static const rag_case ragged_case = {.name = "ragged paged gqa 8/2 causal",
                                     .batch = 4,
                                     .heads_q = 8,
                                     .heads_kv = 2,
                                     .head_dim = 64,
                                     .len_q = ragged_len_q,
                                     .len_kv = ragged_len_kv,
                                     .kv = RAG_KV_PAGED,
                                     .used = 1,
                                     .page_size = 16,
                                     .causal = FATTN_CAUSAL_BOTTOM_RIGHT,
                                     .bshd = 1};

typedef struct det_state {
    fattn_backend_kind kind;
    fattn_dtype dtype;
    harness_path path;
} det_state;

static int repeats(void) {
    const char *v = getenv("FATTN_TEST_REPEATS");
    int n = v && *v ? atoi(v) : 10;
    return n < 2 ? 2 : n;
}

static const fattn_case *find_case(const char *name) {
    for (size_t i = 0; i < fattn_case_count; i++)
        if (strcmp(fattn_cases[i].name, name) == 0) return &fattn_cases[i];
    fail_msg("case '%s' is not in the shared table", name);
    return NULL;
}

static uint64_t next_u64(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Random inputs of magnitude mag, stored in dtype t. */
static void *random_array(size_t n, fattn_dtype t, float mag, uint64_t *rng) {
    const size_t es = fattn_dtype_size(t);
    unsigned char *a = malloc(n * es + 1);
    assert_non_null(a);
    for (size_t i = 0; i < n; i++) {
        const float x =
            mag * (float)((double)(next_u64(rng) >> 11) * (2.0 / 9007199254740992.0) - 1.0);
        if (t == FATTN_F32) {
            memcpy(a + i * 4, &x, 4);
        } else {
            const uint16_t h = t == FATTN_F16 ? fattn_f32_to_f16(x) : fattn_f32_to_bf16(x);
            memcpy(a + i * 2, &h, 2);
        }
    }
    return a;
}

/* Index of the first byte where a and b differ, or -1. */
static long first_difference(const unsigned char *a, const unsigned char *b, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (a[i] != b[i]) return (long)i;
    return -1;
}

static int has_nan(const unsigned char *p, size_t n, fattn_dtype t) {
    for (size_t i = 0; i < n; i++) {
        if (t == FATTN_F32) {
            float x;
            memcpy(&x, p + i * 4, 4);
            if (isnan(x)) return 1;
        } else {
            uint16_t h;
            memcpy(&h, p + i * 2, 2);
            const int nan = t == FATTN_F16 ? (h & 0x7c00) == 0x7c00 && (h & 0x3ff)
                                           : (h & 0x7f80) == 0x7f80 && (h & 0x7f);
            if (nan) return 1;
        }
    }
    return 0;
}

/* Runs one case `reps` times; returns FATTN_OK, or the status of a call that
 * failed (UNSUPPORTED for a missing naive path). */
static fattn_status repeat_case(fattn_context *ctx, const fattn_case *c, fattn_dtype dt,
                                harness_path path, int reps, uint64_t seed) {
    const fattn_attention_desc desc = harness_desc(c, dt);
    const size_t es = fattn_dtype_size(dt);
    const size_t nq = (size_t)(c->batch * c->heads_q * c->seq_q * c->head_dim);
    const size_t nkv = (size_t)(c->batch * c->heads_kv * c->seq_kv * c->head_dim);
    const size_t nl = (size_t)(c->batch * c->heads_q * c->seq_q);
    uint64_t rng = seed;
    void *q = random_array(nq, dt, c->q_magnitude, &rng);
    void *k = random_array(nkv ? nkv : 1, dt, 1.0f, &rng);
    void *v = random_array(nkv ? nkv : 1, dt, 1.0f, &rng);
    unsigned char *o = malloc(nq * es), *first_o = malloc(nq * es), *poison_o = malloc(nq * es);
    unsigned char *l = malloc(nl * 4), *first_l = malloc(nl * 4), *poison_l = malloc(nl * 4);
    assert_true(o && first_o && poison_o && l && first_l && poison_l);
    fattn_buffer *bq = NULL, *bk = NULL, *bv = NULL, *bo = NULL, *bl = NULL;
    fattn_tensor tq = FATTN_TENSOR_INIT, tk = FATTN_TENSOR_INIT, tv = FATTN_TENSOR_INIT,
                 to = FATTN_TENSOR_INIT, tl = FATTN_TENSOR_INIT;
    fattn_status st;
    if ((st = fattn_buffer_alloc(ctx, nq * es, &bq)) ||
        (st = fattn_buffer_alloc(ctx, nq * es, &bo)) ||
        (st = fattn_buffer_alloc(ctx, nl * 4, &bl)) || (st = fattn_buffer_write(bq, 0, q, nq * es)))
        goto done;
    if (nkv && ((st = fattn_buffer_alloc(ctx, nkv * es, &bk)) ||
                (st = fattn_buffer_alloc(ctx, nkv * es, &bv)) ||
                (st = fattn_buffer_write(bk, 0, k, nkv * es)) ||
                (st = fattn_buffer_write(bv, 0, v, nkv * es))))
        goto done;
    if ((st = fattn_tensor_init(bq, dt, c->layout, c->batch, c->heads_q, c->seq_q, c->head_dim, 0,
                                &tq)) ||
        (st = fattn_tensor_init(bk, dt, c->layout, c->batch, c->heads_kv, c->seq_kv, c->head_dim, 0,
                                &tk)) ||
        (st = fattn_tensor_init(bv, dt, c->layout, c->batch, c->heads_kv, c->seq_kv, c->head_dim, 0,
                                &tv)) ||
        (st = fattn_tensor_init(bo, dt, c->layout, c->batch, c->heads_q, c->seq_q, c->head_dim, 0,
                                &to)) ||
        (st = fattn_tensor_init_lse(bl, c->batch, c->heads_q, c->seq_q, 0, &tl)))
        fail_msg("case '%s': fattn_tensor_init: %s: %s", c->name, fattn_status_string(st),
                 fattn_error_message(NULL));

    for (int r = 0; r < reps; r++) {
        /* 0xff is NaN in every dtype; 0xa5 is a finite value: an element a run
         * leaves unwritten differs between the two. */
        memset(poison_o, r % 2 ? 0xa5 : 0xff, nq * es);
        memset(poison_l, r % 2 ? 0xa5 : 0xff, nl * 4);
        if ((st = fattn_buffer_write(bo, 0, poison_o, nq * es)) ||
            (st = fattn_buffer_write(bl, 0, poison_l, nl * 4)))
            goto done;
        st = path == HARNESS_NAIVE ? fattn_forward_naive(ctx, &desc, &tq, &tk, &tv, &to, &tl)
                                   : fattn_forward(ctx, &desc, &tq, &tk, &tv, &to, &tl);
        if (st || (st = fattn_context_synchronize(ctx)) ||
            (st = fattn_buffer_read(bo, 0, o, nq * es)) ||
            (st = fattn_buffer_read(bl, 0, l, nl * 4)))
            goto done;
        if (r == 0) {
            if (has_nan(o, nq, dt) || has_nan(l, nl, FATTN_F32))
                fail_msg("case '%s': the first run left NaN in O or LSE (unwritten elements?)",
                         c->name);
            memcpy(first_o, o, nq * es);
            memcpy(first_l, l, nl * 4);
            continue;
        }
        const long d_o = first_difference(first_o, o, nq * es),
                   d_l = first_difference(first_l, l, nl * 4);
        if (d_o >= 0)
            fail_msg("case '%s' %s: run %d differs from run 1 in O at element %ld", c->name,
                     harness_dtype_name(dt), r + 1, d_o / (long)es);
        if (d_l >= 0)
            fail_msg("case '%s' %s: run %d differs from run 1 in LSE at row %ld", c->name,
                     harness_dtype_name(dt), r + 1, d_l / 4);
    }
done:
    fattn_buffer_free(bq);
    fattn_buffer_free(bk);
    fattn_buffer_free(bv);
    fattn_buffer_free(bo);
    fattn_buffer_free(bl);
    free(q);
    free(k);
    free(v);
    free(o);
    free(first_o);
    free(poison_o);
    free(l);
    free(first_l);
    free(poison_l);
    return st;
}

/* The ragged case `reps` times with RAGGED_SPLITS splits: the first run
 * within tolerance of the reference with every row written, the others
 * bitwise equal to it (O and lse buffers whole, guards included). */
static fattn_status repeat_ragged(fattn_context *ctx, fattn_dtype dt, int reps) {
    rag_problem *rp = NULL;
    fattn_status st = rag_build(ctx, &ragged_case, dt, 0xde7e4a66u + (unsigned)dt, &rp);
    if (st != FATTN_OK) return st;
    unsigned char *first_o = NULL, *first_l = NULL;
    size_t no = 0, nl = 0;
    for (int r = 0; r < reps && st == FATTN_OK; r++) {
        case_result res;
        if ((st = rag_run(rp, &res)) != FATTN_OK) break;
        const void *o, *l;
        size_t bo, bl;
        rag_outputs(rp, &o, &bo, &l, &bl);
        if (r == 0) {
            if (!harness_passed(&res))
                fail_msg("case '%s' %s: first run: max err %.3g (tol %.3g), lse err %.3g, %lld "
                         "NaN, %lld bytes changed outside the rows",
                         ragged_case.name, harness_dtype_name(dt), res.max_err, res.tol,
                         res.lse_err, (long long)res.nan_count, (long long)res.guard_broken);
            no = bo, nl = bl;
            first_o = malloc(no), first_l = malloc(nl ? nl : 1);
            assert_true(first_o && first_l);
            memcpy(first_o, o, no);
            if (nl) memcpy(first_l, l, nl);
            continue;
        }
        const long d_o = first_difference(first_o, o, no), d_l = first_difference(first_l, l, nl);
        if (d_o >= 0 || d_l >= 0)
            fail_msg("case '%s' %s: run %d differs from run 1 in %s at byte %ld", ragged_case.name,
                     harness_dtype_name(dt), r + 1, d_o >= 0 ? "O" : "LSE", d_o >= 0 ? d_o : d_l);
    }
    free(first_o);
    free(first_l);
    rag_free(rp);
    return st;
}

static void repeat_all(void **state) {
    const det_state *ds = *state;
    fattn_backend_info info = FATTN_BACKEND_INFO_INIT;
    test_use_backend(ds->kind, &info);
    const int reps = repeats();
    const char *path = ds->path == HARNESS_NAIVE ? "naive" : "tiled";
    for (int dev = 0; dev < info.device_count; dev++) {
        fattn_context *ctx = NULL;
        if (fattn_context_create(ds->kind, dev, &ctx) != FATTN_OK)
            fail_msg("create %s device %d: %s", info.name, dev, fattn_error_message(NULL));
        for (int i = 0; i < CASES; i++) {
            const fattn_case *c = find_case(case_names[i]);
            const fattn_status st =
                repeat_case(ctx, c, ds->dtype, ds->path, reps, 0xde7e0000u + 17u * (unsigned)i);
            if (st == FATTN_ERR_UNSUPPORTED && ds->path == HARNESS_NAIVE && i == 0) {
                char what[64], reason[512];
                snprintf(what, sizeof what, "%s-naive", info.name);
                snprintf(reason, sizeof reason, "%s", fattn_error_message(ctx));
                fattn_context_free(ctx);
                test_skip_unless_required(what, reason);
            }
            if (st != FATTN_OK)
                fail_msg("case '%s': %s: %s", c->name, fattn_status_string(st),
                         fattn_error_message(ctx));
        }
        int extra = 0;
        if (ds->path == HARNESS_TILED) {
            fattn_status st = fattn_context_set_param(ctx, FATTN_PARAM_KV_SPLITS, DECODE_SPLITS);
            if (st == FATTN_OK)
                st = repeat_case(ctx, &decode_case, ds->dtype, ds->path, reps, 0xde7e0dec);
            if (st != FATTN_OK)
                fail_msg("case '%s', %d splits: %s: %s", decode_case.name, DECODE_SPLITS,
                         fattn_status_string(st), fattn_error_message(ctx));
            st = fattn_context_set_param(ctx, FATTN_PARAM_KV_SPLITS, RAGGED_SPLITS);
            if (st == FATTN_OK) st = repeat_ragged(ctx, ds->dtype, reps);
            if (st != FATTN_OK)
                fail_msg("case '%s', %d splits: %s: %s", ragged_case.name, RAGGED_SPLITS,
                         fattn_status_string(st), fattn_error_message(ctx));
            assert_int_equal(fattn_context_set_param(ctx, FATTN_PARAM_KV_SPLITS, 0), FATTN_OK);
            extra = 2;
        }
        print_message(
            "deterministic: %s device %d (%s) %s %s: %d cases x %d runs bitwise identical\n",
            info.name, dev, fattn_context_device_name(ctx), harness_dtype_name(ds->dtype), path,
            (int)CASES + extra, reps);
        fattn_context_free(ctx);
    }
}

#define DET(kind, dt, path, label)                                                                 \
    {                                                                                              \
        label, repeat_all, NULL, NULL, &(det_state) { kind, dt, path }                             \
    }

int main(void) {
    const struct CMUnitTest tests[] = {
        DET(FATTN_BACKEND_CPU, FATTN_F32, HARNESS_TILED, "cpu f32"),
        DET(FATTN_BACKEND_CPU, FATTN_F16, HARNESS_TILED, "cpu f16"),
        DET(FATTN_BACKEND_CPU, FATTN_BF16, HARNESS_TILED, "cpu bf16"),
        DET(FATTN_BACKEND_CPU, FATTN_F32, HARNESS_NAIVE, "cpu naive f32"),
        DET(FATTN_BACKEND_CPU, FATTN_F16, HARNESS_NAIVE, "cpu naive f16"),
        DET(FATTN_BACKEND_CPU, FATTN_BF16, HARNESS_NAIVE, "cpu naive bf16"),
        DET(FATTN_BACKEND_OPENCL, FATTN_F32, HARNESS_TILED, "opencl f32"),
        DET(FATTN_BACKEND_OPENCL, FATTN_F16, HARNESS_TILED, "opencl f16"),
        DET(FATTN_BACKEND_OPENCL, FATTN_BF16, HARNESS_TILED, "opencl bf16"),
        DET(FATTN_BACKEND_OPENCL, FATTN_F32, HARNESS_NAIVE, "opencl naive f32"),
        DET(FATTN_BACKEND_OPENCL, FATTN_F16, HARNESS_NAIVE, "opencl naive f16"),
        DET(FATTN_BACKEND_OPENCL, FATTN_BF16, HARNESS_NAIVE, "opencl naive bf16"),
        DET(FATTN_BACKEND_CUDA, FATTN_F32, HARNESS_TILED, "cuda f32"),
        DET(FATTN_BACKEND_CUDA, FATTN_F16, HARNESS_TILED, "cuda f16"),
        DET(FATTN_BACKEND_CUDA, FATTN_BF16, HARNESS_TILED, "cuda bf16"),
        DET(FATTN_BACKEND_CUDA, FATTN_F32, HARNESS_NAIVE, "cuda naive f32"),
        DET(FATTN_BACKEND_CUDA, FATTN_F16, HARNESS_NAIVE, "cuda naive f16"),
        DET(FATTN_BACKEND_CUDA, FATTN_BF16, HARNESS_NAIVE, "cuda naive bf16"),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

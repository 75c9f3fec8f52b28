/* Variable-length batches and paged K/V caches on every backend and device:
 * packed and padded sequences (lengths 0 and 1 included), paged caches with
 * shuffled page tables, decode shapes under every forced key-split count,
 * each sequence checked against the double reference with outputs poisoned
 * and guarded; and spoiled index tables, which must give
 * FATTN_ERR_INDEX_TABLE naming the table (at the call, or at the next
 * synchronize on a GPU backend) without writing outside O and lse, after
 * which the context runs good calls again. A backend that declines a ragged
 * problem (FATTN_ERR_UNSUPPORTED) is a visible skip, and a failure where
 * FATTN_TEST_REQUIRE names "<backend>-ragged". FATTN_TEST_LONG=1 adds
 * longer sequences. */
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ragged.h"
#include "test_backend.h"
#include "test_util.h"

#define N(a) (int64_t)(sizeof(a) / sizeof((a)[0]))

/* Lengths 0 and 1, none a multiple of a tile or a page. */
static const int32_t mix_q[] = {3, 0, 1, 17, 64}, mix_kv[] = {5, 1, 0, 200, 64};
static const int32_t gqa1_q[] = {1, 9, 4}, gqa1_kv[] = {1, 30, 2};
static const int32_t two_q[] = {5, 2}, two_kv[] = {33, 70};
static const int32_t d1_q[] = {7, 0, 2}, d1_kv[] = {19, 4, 0};
static const int32_t d256_q[] = {2, 5}, d256_kv[] = {40, 9};
static const int32_t pq_q[] = {2, 0, 6}, dq_kv[] = {9, 3, 0};
static const int32_t pad_kv[] = {150, 0, 1, 77}, pad2_kv[] = {40, 17};
static const int32_t p1_q[] = {2, 0, 3}, p1_kv[] = {5, 1, 0};
static const int32_t p7_q[] = {3, 0, 1, 17}, p7_kv[] = {5, 1, 0, 60};
static const int32_t p16_kv[] = {100, 16, 33}, p256_kv[] = {300, 1, 600};
static const int32_t dec_q[] = {1, 1, 1, 1, 1, 1}, dec_kv[] = {1, 2, 3, 129, 1000, 3000};
static const int32_t decpad_kv[] = {2000, 1, 999, 0}, decp16_kv[] = {1, 17, 500, 1023};
static const int32_t decp256_q[] = {1, 4, 2}, decp256_kv[] = {700, 2500, 5};
/* 700 one-key pages: one split spans more pages than the CUDA decode kernel
 * stages in shared memory (256: it reads the table), three splits do not. */
static const int32_t decp1_kv[] = {700, 3, 260};
static const int32_t long_q[] = {1, 300, 1, 2}, long_kv[] = {20000, 700, 9000, 1};

#define VARLEN(nm, Hq, Hk, D, qlen, kvlen, causal_, bshd_)                                         \
    {                                                                                              \
        .name = nm, .batch = N(qlen), .heads_q = Hq, .heads_kv = Hk, .head_dim = D, .len_q = qlen, \
        .len_kv = kvlen, .kv = RAG_KV_PACKED, .causal = causal_, .bshd = bshd_                     \
    }

static const rag_case varlen_cases[] = {
    VARLEN("mixed lengths, no mask", 4, 1, 128, mix_q, mix_kv, FATTN_CAUSAL_NONE, 0),
    VARLEN("mixed lengths, bottom-right", 4, 1, 128, mix_q, mix_kv, FATTN_CAUSAL_BOTTOM_RIGHT, 0),
    VARLEN("mixed lengths, top-left, BSHD", 4, 1, 128, mix_q, mix_kv, FATTN_CAUSAL_TOP_LEFT, 1),
    {.name = "mixed lengths with seqused_kv, no lse",
     .batch = N(mix_q),
     .heads_q = 4,
     .heads_kv = 1,
     .head_dim = 128,
     .len_q = mix_q,
     .len_kv = mix_kv,
     .kv = RAG_KV_PACKED,
     .used = 1,
     .causal = FATTN_CAUSAL_BOTTOM_RIGHT,
     .no_lse = 1},
    VARLEN("GQA 1, d80, BSHD", 3, 3, 80, gqa1_q, gqa1_kv, FATTN_CAUSAL_BOTTOM_RIGHT, 1),
    VARLEN("GQA 8, d128", 8, 1, 128, two_q, two_kv, FATTN_CAUSAL_NONE, 0),
    {.name = "d1",
     .batch = N(d1_q),
     .heads_q = 2,
     .heads_kv = 1,
     .head_dim = 1,
     .len_q = d1_q,
     .len_kv = d1_kv,
     .kv = RAG_KV_PACKED,
     .causal = FATTN_CAUSAL_BOTTOM_RIGHT,
     .dtypes = 1u << FATTN_F16},
    {.name = "d256, top-left, BSHD",
     .batch = N(d256_q),
     .heads_q = 2,
     .heads_kv = 2,
     .head_dim = 256,
     .len_q = d256_q,
     .len_kv = d256_kv,
     .kv = RAG_KV_PACKED,
     .causal = FATTN_CAUSAL_TOP_LEFT,
     .bshd = 1,
     .dtypes = 1u << FATTN_BF16},
    {.name = "packed Q, dense K/V, d64",
     .batch = N(pq_q),
     .heads_q = 4,
     .heads_kv = 2,
     .head_dim = 64,
     .len_q = pq_q,
     .kv = RAG_KV_DENSE,
     .seq_kv = 23,
     .causal = FATTN_CAUSAL_BOTTOM_RIGHT,
     .dtypes = 1u << FATTN_F32},
    {.name = "dense Q, packed K/V",
     .batch = N(dq_kv),
     .heads_q = 8,
     .heads_kv = 2,
     .head_dim = 128,
     .seq_q = 4,
     .len_kv = dq_kv,
     .kv = RAG_KV_PACKED,
     .causal = FATTN_CAUSAL_BOTTOM_RIGHT},
};

static const rag_case padded_cases[] = {
    {.name = "padded cache, bottom-right",
     .batch = N(pad_kv),
     .heads_q = 4,
     .heads_kv = 2,
     .head_dim = 128,
     .seq_q = 5,
     .len_kv = pad_kv,
     .kv = RAG_KV_DENSE,
     .used = 1,
     .seq_kv = 150,
     .causal = FATTN_CAUSAL_BOTTOM_RIGHT},
    {.name = "padded cache, top-left, BSHD",
     .batch = N(pad2_kv),
     .heads_q = 4,
     .heads_kv = 4,
     .head_dim = 128,
     .seq_q = 3,
     .len_kv = pad2_kv,
     .kv = RAG_KV_DENSE,
     .used = 1,
     .seq_kv = 53,
     .causal = FATTN_CAUSAL_TOP_LEFT,
     .bshd = 1},
};

#define PAGED(nm, qlen, sq, kvlen, ps, Hq, Hk, D, causal_, bshd_, nolse)                           \
    {                                                                                              \
        .name = nm, .batch = N(kvlen), .heads_q = Hq, .heads_kv = Hk, .head_dim = D,               \
        .len_q = qlen, .seq_q = sq, .len_kv = kvlen, .kv = RAG_KV_PAGED, .used = 1,                \
        .page_size = ps, .causal = causal_, .no_lse = nolse, .bshd = bshd_                         \
    }

static const rag_case paged_cases[] = {
    PAGED("page 1, packed Q", p1_q, 0, p1_kv, 1, 2, 1, 128, FATTN_CAUSAL_BOTTOM_RIGHT, 0, 0),
    PAGED("page 7, packed Q, BSHD", p7_q, 0, p7_kv, 7, 4, 2, 128, FATTN_CAUSAL_BOTTOM_RIGHT, 1, 0),
    PAGED("page 16, dense Q, top-left", NULL, 4, p16_kv, 16, 4, 1, 128, FATTN_CAUSAL_TOP_LEFT, 0,
          0),
    PAGED("page 256, dense Q, no lse", NULL, 4, p256_kv, 256, 4, 1, 128, FATTN_CAUSAL_NONE, 0, 1),
    {.name = "page 16 without seqused_kv",
     .batch = 3,
     .heads_q = 4,
     .heads_kv = 4,
     .head_dim = 80,
     .seq_q = 2,
     .kv = RAG_KV_PAGED,
     .seq_kv = 45,
     .page_size = 16,
     .causal = FATTN_CAUSAL_BOTTOM_RIGHT},
};

static const rag_case decode_cases[] = {
    {.name = "decode, packed K/V",
     .batch = N(dec_kv),
     .heads_q = 8,
     .heads_kv = 2,
     .head_dim = 128,
     .len_q = dec_q,
     .len_kv = dec_kv,
     .kv = RAG_KV_PACKED,
     .causal = FATTN_CAUSAL_BOTTOM_RIGHT},
    {.name = "decode, padded cache",
     .batch = N(decpad_kv),
     .heads_q = 4,
     .heads_kv = 1,
     .head_dim = 128,
     .seq_q = 1,
     .len_kv = decpad_kv,
     .kv = RAG_KV_DENSE,
     .used = 1,
     .seq_kv = 2000},
    PAGED("decode, page 16", NULL, 1, decp16_kv, 16, 8, 2, 128, FATTN_CAUSAL_BOTTOM_RIGHT, 0, 0),
    PAGED("decode, page 256, packed Q", decp256_q, 0, decp256_kv, 256, 4, 1, 128,
          FATTN_CAUSAL_BOTTOM_RIGHT, 1, 0),
    PAGED("decode, page 1", NULL, 1, decp1_kv, 1, 8, 2, 64, FATTN_CAUSAL_BOTTOM_RIGHT, 0, 0),
};

/* FATTN_TEST_LONG: longer sequences, decode-shaped and not. */
static const rag_case long_cases[] = {
    VARLEN("long, packed", 8, 2, 128, long_q, long_kv, FATTN_CAUSAL_BOTTOM_RIGHT, 0),
    PAGED("long, page 16", long_q, 0, long_kv, 16, 8, 1, 128, FATTN_CAUSAL_TOP_LEFT, 1, 0),
};

/* Problems whose tables are spoiled, and the dtype they run in; the decode
 * cases reach the split-KV decode kernels' own guards. */
static const rag_case *const fault_bases[] = {&varlen_cases[3], &paged_cases[1], &padded_cases[0],
                                              &decode_cases[0], &decode_cases[1], &decode_cases[2]};

static const int64_t kv_splits[] = {0, 1, 2, 3, 7};

typedef enum group { G_VARLEN, G_PADDED, G_PAGED, G_DECODE, G_LONG, G_TABLES } group;

typedef struct rag_state {
    fattn_backend_kind kind;
    group g;
} rag_state;

static const fattn_dtype dtypes[] = {FATTN_F32, FATTN_F16, FATTN_BF16};

/* What one test saw: failures, and cases the backend declined. */
typedef struct tally {
    int failures, declined, ran;
    char reason[512];
} tally;

static void declined(tally *t, const char *backend, const char *what, fattn_context *ctx) {
    print_message("[  SKIPPED ] %s: '%s': %s\n", backend, what, fattn_error_message(ctx));
    if (!t->declined) snprintf(t->reason, sizeof t->reason, "%s", fattn_error_message(ctx));
    t->declined++;
}

/* FATTN_TEST_VERBOSE=1 names each run before it starts. */
static int verbose(void) {
    const char *v = getenv("FATTN_TEST_VERBOSE");
    return v && *v && strcmp(v, "0") != 0;
}

static void run_case(fattn_context *ctx, const char *backend, const rag_case *c, fattn_dtype dt,
                     uint64_t seed, int splits_loop, tally *t) {
    rag_problem *rp = NULL;
    fattn_status st = rag_build(ctx, c, dt, seed, &rp);
    if (st != FATTN_OK) {
        print_error("case '%s' %s: building it: %s: %s\n", c->name, fattn_dtype_name(dt),
                    fattn_status_string(st), fattn_error_message(ctx));
        t->failures++;
        return;
    }
    const int64_t nsplits = splits_loop ? N(kv_splits) : 1;
    for (int64_t s = 0; s < nsplits; s++) {
        char what[256];
        snprintf(what, sizeof what, "%s %s, kv_splits %lld", c->name, fattn_dtype_name(dt),
                 (long long)kv_splits[s]);
        if (splits_loop &&
            (st = fattn_context_set_param(ctx, FATTN_PARAM_KV_SPLITS, kv_splits[s])) != FATTN_OK) {
            print_error("'%s': fattn_context_set_param(KV_SPLITS): %s: %s\n", what,
                        fattn_status_string(st), fattn_error_message(ctx));
            t->failures++;
            continue;
        }
        if (verbose()) print_message("  %s\n", what);
        case_result r;
        st = rag_run(rp, &r);
        if (st == FATTN_ERR_UNSUPPORTED) {
            declined(t, backend, what, ctx);
        } else if (st != FATTN_OK) {
            print_error("'%s': %s: %s\n", what, fattn_status_string(st), fattn_error_message(ctx));
            t->failures++;
        } else if (!harness_passed(&r)) {
            print_error("'%s' seed 0x%llx: max err %.3g (tol %.3g), lse err %.3g (tol %.3g), %lld "
                        "NaN, %lld lse -inf mismatches, %lld bytes changed outside the "
                        "sequences' rows\n",
                        what, (unsigned long long)r.seed, r.max_err, r.tol, r.lse_err, r.lse_tol,
                        (long long)r.nan_count, (long long)r.lse_mismatch,
                        (long long)r.guard_broken);
            t->failures++;
        } else {
            t->ran++;
        }
    }
    if (splits_loop) assert_int_equal(fattn_context_set_param(ctx, FATTN_PARAM_KV_SPLITS, 0), 0);
    rag_free(rp);
}

/* Each applicable fault of case c: INDEX_TABLE naming the table, nothing
 * written outside O and lse (nothing at all when the call itself refused),
 * and a good call afterwards. */
static void run_faults(fattn_context *ctx, const char *backend, const rag_case *c, uint64_t seed,
                       tally *t) {
    rag_problem *rp = NULL;
    fattn_status st = rag_build(ctx, c, FATTN_F32, seed, &rp);
    if (st != FATTN_OK) {
        print_error("case '%s': building it: %s\n", c->name, fattn_status_string(st));
        t->failures++;
        return;
    }
    case_result r;
    st = rag_run(rp, &r);
    if (st == FATTN_ERR_UNSUPPORTED) {
        declined(t, backend, c->name, ctx);
        rag_free(rp);
        return;
    }
    for (int f = 0; f < RAG_FAULT_COUNT && st == FATTN_OK; f++) {
        if (!rag_fault_applies(rp, (rag_fault)f)) continue;
        if (verbose()) print_message("  %s: %s\n", c->name, rag_fault_name((rag_fault)f));
        rag_fault_result fr;
        const char *name = rag_fault_name((rag_fault)f), *table = rag_fault_table((rag_fault)f);
        if ((st = rag_run_fault(rp, (rag_fault)f, &fr)) != FATTN_OK) {
            print_error("'%s', %s: a buffer call failed: %s: %s\n", c->name, name,
                        fattn_status_string(st), fattn_error_message(ctx));
            t->failures++;
            break;
        }
        if (fr.reported != FATTN_ERR_INDEX_TABLE) {
            print_error("'%s', %s: %s returned %s (\"%s\"), want FATTN_ERR_INDEX_TABLE\n", c->name,
                        name,
                        fr.forward == FATTN_OK ? "fattn_context_synchronize" : "fattn_forward",
                        fattn_status_string(fr.reported), fr.message);
            t->failures++;
        } else if (!msg_has(fr.message, table)) {
            print_error("'%s', %s: the message \"%s\" does not name %s\n", c->name, name,
                        fr.message, table);
            t->failures++;
        }
        if (fr.guard_broken || (fr.forward != FATTN_OK && fr.untouched_broken)) {
            print_error("'%s', %s: %lld bytes written outside O and lse, %lld inside after a "
                        "refused call\n",
                        c->name, name, (long long)fr.guard_broken,
                        (long long)(fr.forward != FATTN_OK ? fr.untouched_broken : 0));
            t->failures++;
        }
        /* The fault is cleared: the same context runs the good tables. */
        st = rag_run(rp, &r);
        if (st != FATTN_OK || !harness_passed(&r)) {
            print_error("'%s': the good call after %s: %s (max err %.3g, %lld NaN, %lld bytes "
                        "outside)\n",
                        c->name, name, fattn_status_string(st), r.max_err, (long long)r.nan_count,
                        (long long)r.guard_broken);
            t->failures++;
            st = FATTN_OK;
        }
        t->ran++;
    }
    rag_free(rp);
}

static void run_group(void **state) {
    const rag_state *rs = *state;
    fattn_backend_info info = FATTN_BACKEND_INFO_INIT;
    test_use_backend(rs->kind, &info);
    if (rs->g == G_LONG) {
        const char *on = getenv("FATTN_TEST_LONG");
        if (!on || !*on || !strcmp(on, "0")) {
            print_message("[  SKIPPED ] long cases: set FATTN_TEST_LONG=1\n");
            skip();
        }
    }
    const struct {
        const rag_case *cases;
        int64_t n;
    } table[] = {{varlen_cases, N(varlen_cases)}, {padded_cases, N(padded_cases)},
                 {paged_cases, N(paged_cases)},   {decode_cases, N(decode_cases)},
                 {long_cases, N(long_cases)},     {NULL, 0}};
    tally t = {0, 0, 0, ""};
    for (int dev = 0; dev < info.device_count; dev++) {
        fattn_context *ctx = NULL;
        if (fattn_context_create(rs->kind, dev, &ctx) != FATTN_OK)
            fail_msg("create %s device %d: %s", info.name, dev, fattn_error_message(NULL));
        print_message("%s device %d (%s)\n", info.name, dev, fattn_context_device_name(ctx));
        if (rs->g == G_TABLES) {
            for (int64_t i = 0; i < N(fault_bases); i++)
                run_faults(ctx, info.name, fault_bases[i], 0x7ab1e000u + 17u * (unsigned)i + dev,
                           &t);
        } else {
            for (int64_t i = 0; i < table[rs->g].n; i++)
                for (int64_t k = 0; k < N(dtypes); k++)
                    if (!table[rs->g].cases[i].dtypes ||
                        (table[rs->g].cases[i].dtypes & (1u << dtypes[k])))
                        run_case(ctx, info.name, &table[rs->g].cases[i], dtypes[k],
                                 0x7a600000u + 1000u * (unsigned)rs->g + 131u * (unsigned)i +
                                     7u * (unsigned)dtypes[k] + (unsigned)dev,
                                 rs->g == G_DECODE || rs->g == G_LONG, &t);
        }
        fattn_context_free(ctx);
    }
    test_finish_runs(info.name, "ragged", t.ran, t.declined, t.failures, t.reason);
}

#define RAG(kind, g, label)                                                                        \
    {                                                                                              \
        label, run_group, NULL, NULL, &(rag_state) { kind, g }                                     \
    }
#define RAG_BACKEND(kind, name)                                                                    \
    RAG(kind, G_VARLEN, name " varlen"), RAG(kind, G_PADDED, name " padded cache"),                \
        RAG(kind, G_PAGED, name " paged"), RAG(kind, G_DECODE, name " decode, kv splits"),         \
        RAG(kind, G_LONG, name " long"), RAG(kind, G_TABLES, name " bad tables")

int main(void) {
    const struct CMUnitTest tests[] = {
        RAG_BACKEND(FATTN_BACKEND_CPU, "cpu"),
        RAG_BACKEND(FATTN_BACKEND_CUDA, "cuda"),
        RAG_BACKEND(FATTN_BACKEND_OPENCL, "opencl"),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

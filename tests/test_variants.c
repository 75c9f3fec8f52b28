/* The attention variants of issue 13 on every backend: sliding window,
 * logit softcap, ALiBi, attention sinks, an additive bias and head_dim_v !=
 * head_dim, alone and combined (with causal, GQA, lse, decoding under
 * forced key splits, packed variable-length sequences and paged caches),
 * each checked against this file's own double-precision reference of
 * fattn.h's rules (fattn_mask_desc), with poisoned outputs, random inputs
 * and sizes that are no multiple of a tile. A backend that declines a
 * variant (FATTN_ERR_UNSUPPORTED) is a visible skip, and a failure where
 * FATTN_TEST_REQUIRE names "<backend>-variants" (its naive baseline:
 * "<backend>-naive-variants"). Bad values get their
 * specific statuses (the "validation" test, on the CPU). */
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
#include "test_backend.h"
#include "test_env.h"
#include "test_util.h"

#define N(a) (int64_t)(sizeof(a) / sizeof((a)[0]))

typedef enum kv_layout { KV_DENSE, KV_PACKED, KV_PAGED } kv_layout;
/* BIAS_PLANE: one [seq_q, seq_kv] plane, stride 0 over batch and heads;
 * BIAS_KEYS: a bias per key, [batch, 1, 1, seq_kv] (stride 0 over heads
 * and rows: a padding mask). */
typedef enum bias_kind {
    BIAS_NONE,
    BIAS_FULL,
    BIAS_BCAST_BATCH,
    BIAS_BCAST_HEADS,
    BIAS_PLANE,
    BIAS_KEYS
} bias_kind;

typedef struct vcase {
    const char *name;
    int64_t batch, heads_q, heads_kv, head_dim, head_dim_v; /* head_dim_v 0: head_dim */
    int64_t seq_q, seq_kv; /* dense lengths; with len_q / len_kv, 0 = the longest */
    const int32_t *len_q;  /* packed Q rows per sequence (cu_seqlens_q), NULL: dense */
    const int32_t *len_kv; /* keys per sequence: packed K/V, or paged with seqused_kv */
    kv_layout kv;
    int64_t page_size;
    fattn_causal causal;
    int window;                        /* 0: none (the fields below are not read) */
    int64_t window_left, window_right; /* -1 unbounded */
    float softcap;
    int alibi; /* 0 none, 1: [heads_q] (stride_batch 0), 2: [batch, heads_q] */
    int sinks;
    bias_kind bias;
    int bias_f32;      /* the bias in f32, else in desc->dtype */
    int bias_inf_rows; /* -inf for every key of row 1 (and of some keys elsewhere) */
    int bias_pad;      /* bias rows this many elements longer than seq_kv, NaN there */
    int bias_t;        /* stored key-major: key stride seq_q + bias_pad, row stride 1 */
    float q_mag;       /* Q's magnitude (huge logits); 0 = 1 */
    double tol_mul;    /* 0 = 1 */
    /* FATTN_FLAG_FAST_SOFTCAP: a capped logit may be off by softcap *
     * 2^-11, which the tolerances of O (twice that, V being within 1) and
     * of the lse (once) grow by. */
    int fast_softcap;
    int no_lse;
    int splits;      /* run under every forced kv_splits value */
    unsigned dtypes; /* 1 << FATTN_F32 ...; 0 = all three */
    /* On CUDA, forced kv_splits >= 2 must plan the split-KV decode kernel
     * (the only CUDA plan with a workspace): seq_q <= 16, head_dim_v =
     * head_dim, and at least two key tiles the rows see (64 keys a tile
     * for f16/bf16, 16..32 for f32; with a left window, window_left +
     * seq_q keys). */
    int decode;
} vcase;

#define WIN(l, r) .window = 1, .window_left = l, .window_right = r
#define NOWIN .window = 0

static const int32_t pk_q[] = {5, 0, 1, 23, 9}, pk_kv[] = {9, 3, 0, 40, 70};
static const int32_t pg_kv[] = {300, 1, 0, 77}, pg_q[] = {3, 1, 0, 6};
static const int32_t pg2_kv[] = {40, 17, 90};
static const int32_t pl_q[] = {130, 0, 77}, pl_kv[] = {400, 10, 261};
static const int32_t dec_q[] = {1, 2, 0, 3}, dec_kv[] = {600, 35, 0, 900};

static const vcase cases[] = {
    /* The window alone: sizes, alignments, each side alone. */
    {"window 8/0, no causal", 2, 4, 2, 64, 0, 37, 53, WIN(8, 0)},
    {"window 0/0 (the diagonal), causal", 1, 2, 2, 32, 0, 19, 19,
     .causal = FATTN_CAUSAL_BOTTOM_RIGHT, WIN(0, 0)},
    {"window 1/1", 2, 2, 1, 48, 0, 21, 30, WIN(1, 1)},
    {"window larger than the sequence, top-left causal", 1, 3, 1, 64, 0, 30, 45,
     .causal = FATTN_CAUSAL_TOP_LEFT, WIN(1000, 1000)},
    {"window right only", 2, 2, 2, 40, 0, 17, 29, WIN(-1, 3)},
    {"window left only, causal", 1, 4, 2, 64, 0, 70, 131, .causal = FATTN_CAUSAL_BOTTOM_RIGHT,
     WIN(5, -1)},
    {"window 3/11, seq_q > seq_kv: rows that see no key", 2, 2, 1, 32, 0, 50, 20, WIN(3, 11)},
    /* Softcap. */
    {"softcap 20", 2, 2, 2, 40, 0, 33, 71, NOWIN, .softcap = 20.0f},
    {"softcap 30, huge logits", 1, 4, 2, 64, 0, 9, 66, NOWIN, .softcap = 30.0f, .q_mag = 3e4f,
     .tol_mul = 50.0},
    /* ALiBi. */
    {"alibi [heads_q], causal", 2, 4, 2, 32, 0, 29, 45, .causal = FATTN_CAUSAL_BOTTOM_RIGHT, NOWIN,
     .alibi = 1},
    {"alibi [batch, heads_q]", 3, 2, 1, 24, 0, 13, 40, NOWIN, .alibi = 2},
    /* Sinks. */
    {"sinks", 2, 4, 4, 64, 0, 21, 37, NOWIN, .sinks = 1},
    {"sinks, seq_kv 0", 2, 3, 1, 32, 0, 5, 0, NOWIN, .sinks = 1},
    {"sinks, causal rows that see no key", 1, 4, 2, 32, 0, 30, 11,
     .causal = FATTN_CAUSAL_BOTTOM_RIGHT, NOWIN, .sinks = 1},
    /* Additive bias. */
    {"bias f32", 2, 2, 1, 32, 0, 19, 27, NOWIN, .bias = BIAS_FULL, .bias_f32 = 1},
    {"bias in dtype, broadcast over batch", 3, 2, 2, 48, 0, 11, 35, NOWIN,
     .bias = BIAS_BCAST_BATCH},
    {"bias f32 broadcast over heads, -inf keys and rows", 2, 4, 2, 32, 0, 17, 33, NOWIN,
     .bias = BIAS_BCAST_HEADS, .bias_f32 = 1, .bias_inf_rows = 1},
    {"bias in dtype with -inf rows, sinks, causal", 1, 2, 1, 64, 0, 14, 14,
     .causal = FATTN_CAUSAL_BOTTOM_RIGHT, NOWIN, .sinks = 1, .bias = BIAS_FULL, .bias_inf_rows = 1},
    /* Combined. */
    {"window + softcap + sinks + GQA + causal + lse", 2, 8, 2, 64, 0, 45, 100,
     .causal = FATTN_CAUSAL_BOTTOM_RIGHT, WIN(20, 0), .softcap = 15.0f, .sinks = 1},
    {"bias + alibi", 2, 4, 1, 32, 0, 23, 41, NOWIN, .alibi = 2, .bias = BIAS_BCAST_BATCH,
     .bias_f32 = 1},
    {"everything, top-left, no lse", 2, 4, 2, 40, 24, 26, 58, .causal = FATTN_CAUSAL_TOP_LEFT,
     WIN(9, 2), .softcap = 10.0f, .alibi = 1, .sinks = 1, .bias = BIAS_BCAST_HEADS,
     .bias_inf_rows = 1, .no_lse = 1},
    /* head_dim_v. */
    {"head_dim 192, head_dim_v 128, GQA, causal", 1, 4, 1, 192, 128, 33, 70,
     .causal = FATTN_CAUSAL_BOTTOM_RIGHT, NOWIN},
    {"head_dim 64, head_dim_v 32, GQA, window + sinks", 2, 4, 2, 64, 32, 19, 40, WIN(6, 1),
     .sinks = 1},
    {"head_dim 40, head_dim_v 72, GQA", 2, 6, 2, 40, 72, 15, 29, NOWIN},
    /* Decoding under forced key splits. */
    {"decode, window 100, GQA 8/2", 3, 8, 2, 128, 0, 1, 900, .causal = FATTN_CAUSAL_BOTTOM_RIGHT,
     WIN(100, 0), .splits = 1, .decode = 1},
    {"decode seq_q 4, window 50, softcap, sinks", 2, 4, 1, 64, 0, 4, 777,
     .causal = FATTN_CAUSAL_BOTTOM_RIGHT, WIN(50, 0), .softcap = 25.0f, .sinks = 1, .splits = 1},
    {"decode seq_q 2, head_dim_v 64, alibi", 1, 4, 2, 128, 64, 2, 600, NOWIN, .alibi = 1,
     .splits = 1},
    /* Decoding with the per-score variants, which CUDA's split-KV decode
     * kernel runs in instances of their own: seq_kv >= 512, so kv_splits 0
     * takes it too (1 runs the tiled kernels), single and multiple row
     * tiles (MQA), every head-dim bucket, rows that are not 16-byte aligned. */
    {"decode, softcap 30, GQA 8/2, causal", 2, 8, 2, 128, 0, 1, 1500,
     .causal = FATTN_CAUSAL_BOTTOM_RIGHT, NOWIN, .softcap = 30.0f, .splits = 1, .decode = 1},
    {"decode, softcap 30, huge logits", 1, 4, 2, 64, 0, 1, 520, NOWIN, .softcap = 30.0f,
     .q_mag = 3e4f, .tol_mul = 50.0, .splits = 1, .decode = 1},
    {"decode seq_q 3, alibi [batch, heads_q], GQA 4/1, causal", 3, 4, 1, 64, 0, 3, 700,
     .causal = FATTN_CAUSAL_BOTTOM_RIGHT, NOWIN, .alibi = 2, .splits = 1, .decode = 1},
    {"decode seq_q 2, bias f32, -inf keys and a -inf row", 2, 4, 2, 128, 0, 2, 600, NOWIN,
     .bias = BIAS_FULL, .bias_f32 = 1, .bias_inf_rows = 1, .splits = 1, .decode = 1},
    {"decode seq_q 2, bias in dtype broadcast over heads, sinks, GQA 8/1", 2, 8, 1, 64, 0, 2, 530,
     .causal = FATTN_CAUSAL_BOTTOM_RIGHT, NOWIN, .sinks = 1, .bias = BIAS_BCAST_HEADS, .splits = 1,
     .decode = 1},
    {"decode MQA 16/1, seq_q 4 (4 row tiles), softcap + alibi, causal", 1, 16, 1, 128, 0, 4, 800,
     .causal = FATTN_CAUSAL_BOTTOM_RIGHT, NOWIN, .softcap = 20.0f, .alibi = 1, .splits = 1,
     .decode = 1},
    {"decode head_dim 256, softcap + bias broadcast over batch, GQA 8/1", 2, 8, 1, 256, 0, 1, 600,
     NOWIN, .softcap = 25.0f, .bias = BIAS_BCAST_BATCH, .splits = 1, .decode = 1},
    {"decode head_dim 40 (unaligned rows), window 100/0, alibi + softcap", 2, 4, 1, 40, 0, 2, 650,
     .causal = FATTN_CAUSAL_BOTTOM_RIGHT, WIN(100, 0), .softcap = 10.0f, .alibi = 1, .splits = 1,
     .decode = 1},
    {"decode seq_q 5, window 64/3, alibi + bias f32 (-inf) + sinks", 1, 6, 2, 128, 0, 5, 900,
     WIN(64, 3), .alibi = 2, .sinks = 1, .bias = BIAS_BCAST_HEADS, .bias_f32 = 1,
     .bias_inf_rows = 1, .splits = 1, .decode = 1},
    {"decode seq_q 3, everything, causal, no lse", 2, 4, 2, 64, 0, 3, 560,
     .causal = FATTN_CAUSAL_BOTTOM_RIGHT, WIN(200, 2), .softcap = 15.0f, .alibi = 1, .sinks = 1,
     .bias = BIAS_FULL, .bias_inf_rows = 1, .no_lse = 1, .splits = 1, .decode = 1},
    /* Variable-length and paged. */
    {"packed, window 7/2, causal, sinks", 5, 4, 2, 32, 0, 0, 0, .len_q = pk_q, .len_kv = pk_kv,
     .kv = KV_PACKED, .causal = FATTN_CAUSAL_BOTTOM_RIGHT, WIN(7, 2), .sinks = 1},
    {"packed, bias + alibi + softcap", 5, 2, 1, 48, 0, 0, 0, .len_q = pk_q, .len_kv = pk_kv,
     .kv = KV_PACKED, NOWIN, .softcap = 8.0f, .alibi = 2, .bias = BIAS_FULL},
    {"paged 16, decode, window 64", 4, 8, 2, 128, 0, 1, 0, .len_kv = pg_kv, .kv = KV_PAGED,
     .page_size = 16, .causal = FATTN_CAUSAL_BOTTOM_RIGHT, WIN(64, 0), .splits = 1, .decode = 1},
    {"paged 7, packed Q, window + alibi + bias, head_dim_v 40", 4, 4, 2, 64, 40, 0, 0,
     .len_q = pg_q, .len_kv = pg_kv, .kv = KV_PAGED, .page_size = 7,
     .causal = FATTN_CAUSAL_TOP_LEFT, WIN(30, 4), .alibi = 1, .bias = BIAS_BCAST_HEADS,
     .bias_f32 = 1},
    {"paged 16, dense Q 3, sinks + softcap", 3, 2, 2, 64, 0, 3, 0, .len_kv = pg2_kv, .kv = KV_PAGED,
     .page_size = 16, NOWIN, .softcap = 12.0f, .sinks = 1},
    /* Several key tiles of every kernel: tiles the window wholly covers or
     * skips, rescoring without a mask, bias rows read as pairs (even
     * strides) and one by one (odd). */
    {"long, softcap 30, causal, GQA", 1, 4, 2, 128, 0, 300, 700,
     .causal = FATTN_CAUSAL_BOTTOM_RIGHT, NOWIN, .softcap = 30.0f, .dtypes = 6},
    {"long, alibi, window 200/0", 2, 2, 1, 64, 0, 257, 601, WIN(200, 0), .alibi = 2},
    {"long, bias in dtype (even strides), no causal", 2, 2, 2, 128, 0, 130, 520, NOWIN,
     .bias = BIAS_FULL, .dtypes = 6},
    {"long, bias f32 (odd strides) + softcap, head dim 256", 1, 2, 1, 200, 0, 90, 301, NOWIN,
     .softcap = 20.0f, .bias = BIAS_BCAST_BATCH, .bias_f32 = 1},
    {"long, window 64/64, sinks, head_dim 96, head_dim_v 80", 1, 4, 2, 96, 80, 333, 333,
     WIN(64, 64), .sinks = 1},
    {"long packed, alibi alone", 3, 2, 1, 64, 0, 0, 0, .len_q = pl_q, .len_kv = pl_kv,
     .kv = KV_PACKED, .causal = FATTN_CAUSAL_BOTTOM_RIGHT, NOWIN, .alibi = 1},
    {"long, head_dim_v alone, bf16/f16", 1, 2, 2, 128, 64, 200, 450, NOWIN, .dtypes = 6},
    {"long, softcap 50 (Gemma 2), huge logits, window, sinks", 1, 4, 2, 128, 0, 200, 400,
     .causal = FATTN_CAUSAL_BOTTOM_RIGHT, WIN(150, 0), .softcap = 50.0f, .sinks = 1, .q_mag = 3e4f,
     .tol_mul = 50.0},
    {"long, softcap 51.9 (near the largest fixed offset), causal", 1, 2, 1, 64, 0, 190, 300,
     .causal = FATTN_CAUSAL_BOTTOM_RIGHT, NOWIN, .softcap = 51.9f},
    {"long, softcap 60, causal", 1, 2, 1, 64, 0, 190, 300, .causal = FATTN_CAUSAL_BOTTOM_RIGHT,
     NOWIN, .softcap = 60.0f},
    {"long, bias rows padded to 8 (partial 16-byte chunks), causal, window", 1, 4, 2, 64, 0, 150,
     333, .causal = FATTN_CAUSAL_BOTTOM_RIGHT, WIN(100, 0), .bias = BIAS_BCAST_HEADS, .bias_pad = 3,
     .bias_inf_rows = 1, .dtypes = 6},
    {"long, bias rows padded, no mask, head dim 256", 2, 2, 1, 256, 0, 70, 205, NOWIN,
     .bias = BIAS_FULL, .bias_pad = 3, .dtypes = 6},
    /* Several tiles of the wgmma kernel (128 rows x 128 keys; 192 x 128 at
     * head dims up to 64, 128 x 80 at 256; FATTN_CUDA_KERNEL=wgmma forces
     * it on small problems): key tiles the window skips at both ends, edge
     * tiles masked per consumer, the fixed and the max-based softcap, and
     * a persistent grid (more work tiles than an H200 has SMs) walking
     * variant tiles. */
    {"wgmma tiles, window 300/0, causal, GQA, sinks", 1, 4, 2, 128, 0, 700, 900,
     .causal = FATTN_CAUSAL_BOTTOM_RIGHT, WIN(300, 0), .sinks = 1, .dtypes = 6},
    {"wgmma tiles, window 100/40, no causal, head dim 64", 2, 2, 1, 64, 0, 600, 650, WIN(100, 40),
     .dtypes = 6},
    {"wgmma tiles, softcap 60 (row max), head dim 256, causal", 1, 2, 2, 256, 0, 300, 420,
     .causal = FATTN_CAUSAL_BOTTOM_RIGHT, NOWIN, .softcap = 60.0f, .dtypes = 6},
    {"wgmma tiles, alibi, window 200/0, head dim 256", 1, 2, 1, 256, 0, 330, 500, WIN(200, 0),
     .alibi = 1, .dtypes = 6},
    {"wgmma tiles, alibi [batch, heads_q], window 50/-1, seq_q > seq_kv", 2, 2, 2, 64, 0, 450, 260,
     .causal = FATTN_CAUSAL_BOTTOM_RIGHT, WIN(50, -1), .alibi = 2, .dtypes = 6},
    /* A row's max on the wgmma kernel lags until a tile's passes it by
     * more than 8 (log2 units; head dims 64 and 256, not with ALiBi): Q x20
     * gives a row's logits a standard deviation of about 11 log2 units, so
     * tile maxima jump past the threshold and stay under it, either way. */
    {"wgmma tiles, Q x20 (maxima past the stale threshold and not), head dim 256, sinks", 1, 4,
     2, 256, 0, 150, 900, NOWIN, .sinks = 1, .q_mag = 20.0f, .dtypes = 6},
    {"wgmma tiles, Q x20 (maxima past the stale threshold and not), head dim 64, causal", 1, 2,
     1, 64, 0, 400, 700, .causal = FATTN_CAUSAL_BOTTOM_RIGHT, NOWIN, .q_mag = 20.0f, .dtypes = 6},
    {"wgmma persistent, softcap 30 + sinks, head dim 8, 144 work tiles", 2, 36, 6, 8, 0, 200, 150,
     NOWIN, .softcap = 30.0f, .sinks = 1, .dtypes = 6},
    {"wgmma persistent, alibi, head dim 8, 144 work tiles", 2, 36, 3, 8, 0, 330, 200, NOWIN,
     .alibi = 2, .dtypes = 6},
    /* The accurate softcap takes the polynomial of fewest terms whose
     * range holds all of a warp's scores (two terms to |scale s| <= 0.1
     * softcap, three to 0.28, four to 0.5) and ex2/rcp past that: these
     * caps put about half the warps' tiles on either side of one line
     * (a warp tile's largest |scale s| is 1.0-1.4 here, median 1.19; bf16:
     * the fixed offset; f16: the row max, which has the two- and four-term
     * tiers only, and four alone at head dim 128; and with a bias, the bias
     * family). */
    {"wgmma tiles, softcap 11.9 (scores across the two-term line), causal, GQA", 1, 4, 2, 128, 0,
     300, 420, .causal = FATTN_CAUSAL_BOTTOM_RIGHT, NOWIN, .softcap = 11.9f, .dtypes = 6},
    {"wgmma tiles, softcap 4.25 (across the three-term line), head dim 64", 1, 2, 1, 64, 0, 250,
     300, NOWIN, .softcap = 4.25f, .dtypes = 6},
    {"wgmma tiles, softcap 4.2 (across the three-term line), window 150/20, head dim 256", 1, 2, 1,
     256, 0, 200, 264, WIN(150, 20), .softcap = 4.2f, .dtypes = 6},
    {"wgmma tiles, softcap 2.4 (scores across the polynomial's range), causal, GQA", 1, 4, 2, 128,
     0, 300, 420, .causal = FATTN_CAUSAL_BOTTOM_RIGHT, NOWIN, .softcap = 2.4f, .dtypes = 6},
    {"wgmma tiles, softcap 4.8, Q x2 (across the polynomial's range), head dim 64", 1, 2, 1, 64, 0,
     250, 300, NOWIN, .softcap = 4.8f, .q_mag = 2.0f, .dtypes = 6},
    {"wgmma tiles, softcap 3.5 + bias plane, head dim 256", 1, 2, 1, 256, 0, 200, 264, NOWIN,
     .softcap = 3.5f, .q_mag = 1.5f, .bias = BIAS_PLANE, .dtypes = 6},
    {"wgmma tiles, fast softcap 30, window 200/0, causal, GQA", 1, 4, 2, 128, 0, 300, 420,
     .causal = FATTN_CAUSAL_BOTTOM_RIGHT, WIN(200, 0), .softcap = 30.0f, .fast_softcap = 1,
     .dtypes = 6},
    {"wgmma tiles, fast softcap 60 (row max), huge logits, head dim 64", 1, 2, 1, 64, 0, 250, 300,
     NOWIN, .softcap = 60.0f, .q_mag = 3e4f, .tol_mul = 50.0, .fast_softcap = 1, .dtypes = 6},
    /* The bias on the wgmma kernel (kWgAll; 192 x 128 tiles at head dim 64,
     * 128 x 128 at 128, 128 x 64 at 256): a tile per stage through TMA
     * where rows are 16-byte multiples (seq_kv % 8 == 0 here), gathered
     * by the producer otherwise (odd rows, a per-key bias, key-major
     * storage); softcap with ALiBi in the same family. */
    {"wgmma tiles, bias plane (stride 0 over batch and heads), -inf rows, causal, GQA", 2, 4, 2,
     128, 0, 300, 456, .causal = FATTN_CAUSAL_BOTTOM_RIGHT, NOWIN, .bias = BIAS_PLANE,
     .bias_inf_rows = 1, .dtypes = 6},
    {"wgmma tiles, bias [batch, heads], head dim 64", 2, 2, 1, 64, 0, 400, 520, NOWIN,
     .bias = BIAS_FULL, .dtypes = 6},
    {"wgmma tiles, bias odd rows (gathered), window 150/10, head dim 256", 1, 2, 1, 256, 0, 200,
     333, WIN(150, 10), .bias = BIAS_BCAST_HEADS, .bias_inf_rows = 1, .dtypes = 6},
    {"wgmma tiles, bias per key (padding mask, gathered), sinks, causal", 2, 2, 2, 128, 0, 260, 390,
     .causal = FATTN_CAUSAL_BOTTOM_RIGHT, NOWIN, .sinks = 1, .bias = BIAS_KEYS, .dtypes = 6},
    {"wgmma tiles, bias key-major (gathered) + softcap + alibi, head dim 64", 1, 2, 1, 64, 0, 330,
     270, NOWIN, .softcap = 20.0f, .alibi = 2, .bias = BIAS_FULL, .bias_t = 1, .bias_pad = 5,
     .dtypes = 6},
    {"wgmma tiles, softcap + alibi, window 250/0, causal", 1, 4, 2, 128, 0, 500, 640,
     .causal = FATTN_CAUSAL_BOTTOM_RIGHT, WIN(250, 0), .softcap = 30.0f, .alibi = 1,
     .dtypes = 6},
    {"wgmma tiles, fast softcap + alibi + bias plane + sinks, head dim 256", 1, 2, 2, 256, 0, 300,
     400, NOWIN, .softcap = 25.0f, .fast_softcap = 1, .alibi = 1, .sinks = 1,
     .bias = BIAS_PLANE, .dtypes = 6},
    {"wgmma persistent, bias plane, head dim 8, 144 work tiles", 2, 36, 6, 8, 0, 200, 152, NOWIN,
     .bias = BIAS_PLANE, .bias_inf_rows = 1, .dtypes = 6},
    /* Causal and windowed problems with more work tiles than an H200 has
     * SMs (a block per tile there). */
    {"wgmma many tiles, causal, GQA, head dim 8, 288 work tiles", 2, 36, 6, 8, 0, 600, 700,
     .causal = FATTN_CAUSAL_BOTTOM_RIGHT, NOWIN, .dtypes = 6},
    {"wgmma many tiles, window 100/0 + bias plane + sinks, head dim 8, 216 work tiles", 2, 36, 6, 8, 0,
     400, 504, WIN(100, 0), .sinks = 1, .bias = BIAS_PLANE, .dtypes = 6},
    /* Ghost key tiles at head dim 64 (192-row tiles): a consumer whose rows
     * see none of a block's last tiles, or no key at all (seq_q > seq_kv
     * bottom-right, rows past seq_q), waits for and releases those stages,
     * bias stages included, without computing them. */
    {"wgmma ghosts, causal, seq_q > seq_kv, bias plane, head dim 64", 1, 2, 1, 64, 0, 700, 384,
     .causal = FATTN_CAUSAL_BOTTOM_RIGHT, NOWIN, .bias = BIAS_PLANE, .bias_inf_rows = 1,
     .dtypes = 6},
    {"wgmma ghosts, window -1/20 (right edge), sinks, gathered bias, head dim 64", 2, 2, 1, 64, 0,
     500, 901, WIN(-1, 20), .sinks = 1, .bias = BIAS_BCAST_HEADS, .dtypes = 6},
    /* Ragged decoding with the per-score variants (CUDA: always the decode kernel). */
    {"paged 16, decode, softcap + alibi + bias f32 (-inf keys)",
     4,
     8,
     2,
     128,
     0,
     1,
     0,
     .len_kv = pg_kv,
     .kv = KV_PAGED,
     .page_size = 16,
     .causal = FATTN_CAUSAL_BOTTOM_RIGHT,
     NOWIN,
     .softcap = 30.0f,
     .alibi = 2,
     .bias = BIAS_FULL,
     .bias_f32 = 1,
     .bias_inf_rows = 1,
     .splits = 1,
     .decode = 1},
    {"paged 5, packed Q, decode, window 100/0 + alibi + bias broadcast over heads + sinks", 4, 4, 2,
     64, 0, 0, 0, .len_q = pg_q, .len_kv = pg_kv, .kv = KV_PAGED, .page_size = 5,
     .causal = FATTN_CAUSAL_BOTTOM_RIGHT, WIN(100, 0), .alibi = 1, .sinks = 1,
     .bias = BIAS_BCAST_HEADS, .splits = 1, .decode = 1},
    {"packed, decode, softcap + bias broadcast over batch, GQA 4/1", 4, 4, 1, 128, 0, 0, 0,
     .len_q = dec_q, .len_kv = dec_kv, .kv = KV_PACKED, .causal = FATTN_CAUSAL_BOTTOM_RIGHT, NOWIN,
     .softcap = 20.0f, .bias = BIAS_BCAST_BATCH, .bias_f32 = 1, .splits = 1, .decode = 1},
    {"packed K/V, dense Q, decode, alibi + softcap + sinks, top-left", 4, 4, 2, 64, 0, 2, 0,
     .len_kv = dec_kv, .kv = KV_PACKED, .causal = FATTN_CAUSAL_TOP_LEFT, NOWIN, .softcap = 12.0f,
     .alibi = 2, .sinks = 1, .splits = 1, .decode = 1},
};

static const int64_t kv_splits[] = {0, 1, 2, 3, 7};
static const fattn_dtype dtypes[] = {FATTN_F32, FATTN_F16, FATTN_BF16};

/* ---- Host data --------------------------------------------------------------- */

static void put(void *base, fattn_dtype t, int64_t i, float x) {
    if (t == FATTN_F32)
        ((float *)base)[i] = x;
    else
        ((uint16_t *)base)[i] = t == FATTN_F16 ? fattn_f32_to_f16(x) : fattn_f32_to_bf16(x);
}
static double get(const void *base, fattn_dtype t, int64_t i) {
    if (t == FATTN_F32) return ((const float *)base)[i];
    const uint16_t e = ((const uint16_t *)base)[i];
    return t == FATTN_F16 ? fattn_f16_to_f32(e) : fattn_bf16_to_f32(e);
}

/* One built problem: host copies, device buffers, tensors, descriptions. */
enum { BQ, BK, BV, BO, BL, BSLOPE, BSINK, BBIAS, BCUQ, BCUKV, BUSED, BTAB, NBUF };
typedef struct vprob {
    const vcase *c;
    fattn_dtype dt;
    int64_t B, Hq, Hk, D, Dv, Sq, Skv;
    int32_t lq[16], lkv[16], cuq[17], cukv[17];
    int64_t TQ, TK; /* rows of Q/O and of K/V per head as stored */
    int64_t qb, kb; /* batch extents of Q/O and K/V as stored (pages for K/V) */
    int64_t pps, npages;
    int32_t *table;
    int64_t wl, wr; /* the window, -1 -1 without */
    void *host[NBUF];
    size_t bytes[NBUF];
    fattn_buffer *buf[NBUF];
    fattn_tensor t[NBUF];
    fattn_dtype bias_dt;
    fattn_mask_desc mask;
    fattn_varlen_desc varlen;
    fattn_paged_kv_desc paged;
    fattn_attention_desc desc;
} vprob;

static int64_t q_at(const vprob *p, int64_t b, int64_t h, int64_t i) {
    return p->c->len_q ? h * p->TQ + p->cuq[b] + i : (b * p->Hq + h) * p->Sq + i;
}
static int64_t kv_at(const vprob *p, int64_t b, int64_t h, int64_t j) {
    if (p->c->kv == KV_PAGED) {
        const int64_t ps = p->c->page_size, page = p->table[b * p->pps + j / ps];
        return (page * p->Hk + h) * ps + j % ps;
    }
    return p->c->kv == KV_PACKED ? h * p->TK + p->cukv[b] + j : (b * p->Hk + h) * p->Skv + j;
}
/* Bias element (b, h, i, j) by the tensor's strides. */
static int64_t bias_at(const vprob *p, int64_t b, int64_t h, int64_t i, int64_t j) {
    const fattn_tensor *t = &p->t[BBIAS];
    return t->offset + b * t->stride_batch + h * t->stride_head + i * t->stride_seq +
           j * t->stride_dim;
}

static fattn_status alloc_put(fattn_context *ctx, vprob *p, int i, size_t bytes) {
    p->bytes[i] = bytes;
    p->host[i] = calloc(1, bytes ? bytes : 1);
    if (!p->host[i]) return FATTN_ERR_OUT_OF_MEMORY;
    return fattn_buffer_alloc(ctx, bytes ? bytes : 16, &p->buf[i]); /* seq_kv 0: K, V empty */
}

static void vprob_free(vprob *p) {
    for (int i = 0; i < NBUF; i++) {
        fattn_buffer_free(p->buf[i]);
        free(p->host[i]);
    }
    free(p->table);
}

static fattn_status vprob_build(fattn_context *ctx, const vcase *c, fattn_dtype dt, uint64_t seed,
                                vprob *p) {
    memset(p, 0, sizeof *p);
    p->c = c, p->dt = dt;
    p->B = c->batch, p->Hq = c->heads_q, p->Hk = c->heads_kv, p->D = c->head_dim;
    p->Dv = c->head_dim_v ? c->head_dim_v : c->head_dim;
    p->Sq = c->seq_q, p->Skv = c->seq_kv;
    int64_t tq = 0, tk = 0;
    for (int64_t b = 0; b < p->B; b++) {
        p->lq[b] = c->len_q ? c->len_q[b] : (int32_t)c->seq_q;
        p->lkv[b] = c->len_kv ? c->len_kv[b] : (int32_t)c->seq_kv;
        if (c->len_q && p->lq[b] > p->Sq) p->Sq = p->lq[b];
        if (c->len_kv && p->lkv[b] > p->Skv) p->Skv = p->lkv[b];
        p->cuq[b + 1] = (int32_t)(tq += p->lq[b]);
        p->cukv[b + 1] = (int32_t)(tk += p->lkv[b]);
    }
    p->TQ = c->len_q ? tq + 2 : p->Sq; /* two rows no sequence owns */
    p->qb = c->len_q ? 1 : p->B;
    p->TK = c->kv == KV_PACKED ? tk + 3 : c->kv == KV_PAGED ? c->page_size : p->Skv;
    p->kb = c->kv == KV_PACKED ? 1 : p->B;
    uint64_t s = seed;
    if (c->kv == KV_PAGED) { /* pages shuffled, two more than needed */
        p->pps = (p->Skv + c->page_size - 1) / c->page_size + 1;
        p->npages = p->B * p->pps + 2;
        p->kb = p->npages;
        p->table = malloc((size_t)(p->B * p->pps) * sizeof(int32_t));
        if (!p->table) return FATTN_ERR_OUT_OF_MEMORY;
        for (int64_t i = 0; i < p->B * p->pps; i++) p->table[i] = (int32_t)i;
        for (int64_t i = p->B * p->pps - 1; i > 0; i--) {
            const int64_t j = (int64_t)(next_u64(&s) % (uint64_t)(i + 1));
            const int32_t x = p->table[i];
            p->table[i] = p->table[j], p->table[j] = x;
        }
    }
    const size_t es = fattn_dtype_size(dt);
    const int64_t nq = p->qb * p->Hq * p->TQ, nk = p->kb * p->Hk * p->TK;
    fattn_status st;
    if ((st = alloc_put(ctx, p, BQ, (size_t)(nq * p->D) * es)) ||
        (st = alloc_put(ctx, p, BK, (size_t)(nk * p->D) * es)) ||
        (st = alloc_put(ctx, p, BV, (size_t)(nk * p->Dv) * es)) ||
        (st = alloc_put(ctx, p, BO, (size_t)(nq * p->Dv) * es)) ||
        (st = alloc_put(ctx, p, BL, (size_t)nq * 4)))
        return st;
    const float qm = c->q_mag > 0.0f ? c->q_mag : 1.0f;
    for (int64_t i = 0; i < nq * p->D; i++) put(p->host[BQ], dt, i, qm * uniform(&s));
    for (int64_t i = 0; i < nk * p->D; i++) put(p->host[BK], dt, i, uniform(&s));
    for (int64_t i = 0; i < nk * p->Dv; i++) put(p->host[BV], dt, i, uniform(&s));
    fattn_tensor_init(p->buf[BQ], dt, FATTN_LAYOUT_BHSD, p->qb, p->Hq, p->TQ, p->D, 0, &p->t[BQ]);
    fattn_tensor_init(p->buf[BK], dt, FATTN_LAYOUT_BHSD, p->kb, p->Hk, p->TK, p->D, 0, &p->t[BK]);
    fattn_tensor_init(p->buf[BV], dt, FATTN_LAYOUT_BHSD, p->kb, p->Hk, p->TK, p->Dv, 0, &p->t[BV]);
    fattn_tensor_init(p->buf[BO], dt, FATTN_LAYOUT_BHSD, p->qb, p->Hq, p->TQ, p->Dv, 0, &p->t[BO]);
    fattn_tensor_init_lse(p->buf[BL], p->qb, p->Hq, p->TQ, 0, &p->t[BL]);

    const fattn_mask_desc m0 = FATTN_MASK_DESC_INIT;
    p->mask = m0;
    p->wl = c->window ? c->window_left : -1;
    p->wr = c->window ? c->window_right : -1;
    p->mask.window_left = p->wl;
    p->mask.window_right = p->wr;
    p->mask.softcap = c->softcap;
    const fattn_tensor t0 = FATTN_TENSOR_INIT;
    if (c->alibi) { /* positive slopes, geometric like ALiBi's, jittered */
        const int64_t n = c->alibi == 2 ? p->B * p->Hq : p->Hq;
        if ((st = alloc_put(ctx, p, BSLOPE, (size_t)n * 4))) return st;
        for (int64_t i = 0; i < n; i++)
            ((float *)p->host[BSLOPE])[i] =
                (float)(pow(2.0, -8.0 * (double)(i % p->Hq + 1) / (double)p->Hq) *
                        (1.0 + 0.3 * uniform(&s)));
        p->t[BSLOPE] = t0;
        p->t[BSLOPE].buffer = p->buf[BSLOPE];
        p->t[BSLOPE].stride_head = 1;
        p->t[BSLOPE].stride_batch = c->alibi == 2 ? p->Hq : 0;
        p->mask.alibi_slopes = &p->t[BSLOPE];
    }
    if (c->sinks) {
        if ((st = alloc_put(ctx, p, BSINK, (size_t)p->Hq * 4))) return st;
        for (int64_t h = 0; h < p->Hq; h++)
            ((float *)p->host[BSINK])[h] = 1.0f + 2.0f * uniform(&s);
        p->t[BSINK] = t0;
        p->t[BSINK].buffer = p->buf[BSINK];
        p->t[BSINK].stride_head = 1;
        p->mask.sinks = &p->t[BSINK];
    }
    if (c->bias) {
        p->bias_dt = c->bias_f32 ? FATTN_F32 : dt;
        /* Stored lines of rs elements (rows; keys when bias_t), nl of them
         * a plane, the pad past each NaN. */
        const int64_t len = c->bias_t ? p->Sq : p->Skv, nl = c->bias_t ? p->Skv : p->Sq;
        const int64_t rs = len + c->bias_pad, plane = c->bias == BIAS_KEYS ? rs : nl * rs;
        const int64_t n = c->bias == BIAS_FULL          ? p->B * p->Hq * plane
                          : c->bias == BIAS_BCAST_BATCH ? p->Hq * plane
                          : c->bias == BIAS_PLANE       ? plane
                                                        : p->B * plane;
        if ((st = alloc_put(ctx, p, BBIAS, (size_t)n * fattn_dtype_size(p->bias_dt)))) return st;
        for (int64_t i = 0; i < n; i++) {
            float x = 2.0f * uniform(&s);
            const int64_t line = (i / rs) % nl;
            if (c->bias_inf_rows && (line == 1 || next_u64(&s) % 7 == 0)) x = -INFINITY;
            if (i % rs >= len) x = NAN; /* padding: must not be read */
            put(p->host[BBIAS], p->bias_dt, i, x);
        }
        fattn_tensor *t = &p->t[BBIAS];
        *t = t0;
        t->buffer = p->buf[BBIAS];
        t->dtype = p->bias_dt;
        t->stride_dim = c->bias_t ? rs : 1;
        t->stride_seq = c->bias == BIAS_KEYS ? 0 : c->bias_t ? 1 : rs;
        t->stride_head = c->bias == BIAS_BCAST_HEADS || c->bias >= BIAS_PLANE ? 0 : plane;
        t->stride_batch = c->bias == BIAS_FULL          ? p->Hq * plane
                          : c->bias == BIAS_BCAST_BATCH || c->bias == BIAS_PLANE ? 0
                                                                                 : plane;
        p->mask.bias = t;
    }
    const fattn_varlen_desc v0 = FATTN_VARLEN_DESC_INIT;
    const fattn_paged_kv_desc g0 = FATTN_PAGED_KV_DESC_INIT;
    p->varlen = v0;
    p->paged = g0;
    const int ragged = c->len_q || c->kv != KV_DENSE;
    if (c->len_q) {
        if ((st = alloc_put(ctx, p, BCUQ, (size_t)(p->B + 1) * 4))) return st;
        memcpy(p->host[BCUQ], p->cuq, (size_t)(p->B + 1) * 4);
        fattn_tensor_init_index(p->buf[BCUQ], 1, p->B + 1, 0, &p->t[BCUQ]);
        p->varlen.cu_seqlens_q = &p->t[BCUQ];
        p->varlen.total_q = p->TQ;
    }
    if (c->kv == KV_PACKED) {
        if ((st = alloc_put(ctx, p, BCUKV, (size_t)(p->B + 1) * 4))) return st;
        memcpy(p->host[BCUKV], p->cukv, (size_t)(p->B + 1) * 4);
        fattn_tensor_init_index(p->buf[BCUKV], 1, p->B + 1, 0, &p->t[BCUKV]);
        p->varlen.cu_seqlens_kv = &p->t[BCUKV];
        p->varlen.total_kv = p->TK;
    }
    if (c->kv == KV_PAGED) {
        if ((st = alloc_put(ctx, p, BUSED, (size_t)p->B * 4)) ||
            (st = alloc_put(ctx, p, BTAB, (size_t)(p->B * p->pps) * 4)))
            return st;
        memcpy(p->host[BUSED], p->lkv, (size_t)p->B * 4);
        memcpy(p->host[BTAB], p->table, (size_t)(p->B * p->pps) * 4);
        fattn_tensor_init_index(p->buf[BUSED], 1, p->B, 0, &p->t[BUSED]);
        fattn_tensor_init_index(p->buf[BTAB], p->B, p->pps, 0, &p->t[BTAB]);
        p->varlen.seqused_kv = &p->t[BUSED];
        p->paged.block_table = &p->t[BTAB];
        p->paged.pages_per_seq = p->pps;
        p->paged.page_size = c->page_size;
        p->paged.num_pages = p->npages;
    }
    const fattn_attention_desc d0 = FATTN_ATTENTION_DESC_INIT;
    p->desc = d0;
    p->desc.batch = p->B;
    p->desc.heads_q = p->Hq;
    p->desc.heads_kv = p->Hk;
    p->desc.seq_q = p->Sq;
    p->desc.seq_kv = p->Skv;
    p->desc.head_dim = p->D;
    p->desc.head_dim_v = c->head_dim_v;
    p->desc.dtype = dt;
    p->desc.flags = harness_tf32_flags(dt) | (c->fast_softcap ? FATTN_FLAG_FAST_SOFTCAP : 0u);
    p->desc.causal = c->causal;
    p->desc.mask = &p->mask;
    p->desc.varlen = ragged ? &p->varlen : NULL;
    p->desc.paged_kv = c->kv == KV_PAGED ? &p->paged : NULL;
    for (int i = 0; i < NBUF; i++)
        if (p->buf[i] && p->bytes[i] && i != BO && i != BL &&
            (st = fattn_buffer_write(p->buf[i], 0, p->host[i], p->bytes[i])))
            return st;
    return FATTN_OK;
}

/* ---- The reference -------------------------------------------------------------- */

/* Row i of sequence b, query head h, by fattn.h's rules in double: o[Dv]
 * and *lse. */
static void ref_row(const vprob *p, int64_t b, int64_t h, int64_t i, double *o, double *lse) {
    const vcase *c = p->c;
    const int64_t lq = p->lq[b], lk = p->lkv[b], off = lk - lq;
    const int64_t coff = c->causal == FATTN_CAUSAL_TOP_LEFT ? 0 : off;
    const int64_t hk = h / (p->Hq / p->Hk);
    const double scale = 1.0 / sqrt((double)p->D);
    double *sc = malloc((size_t)(lk + 1) * sizeof(double));
    double mx = -INFINITY;
    for (int64_t j = 0; j < lk; j++) {
        sc[j] = -INFINITY;
        if (c->causal && j > i + coff) continue;
        if (p->wl >= 0 && j < i + off - p->wl) continue;
        if (p->wr >= 0 && j > i + off + p->wr) continue;
        double s = 0.0;
        for (int64_t d = 0; d < p->D; d++)
            s += get(p->host[BQ], p->dt, q_at(p, b, h, i) * p->D + d) *
                 get(p->host[BK], p->dt, kv_at(p, b, hk, j) * p->D + d);
        s *= scale;
        if (c->softcap > 0.0f) s = c->softcap * tanh(s / c->softcap);
        if (c->alibi) {
            const double slope =
                ((const float *)p->host[BSLOPE])[(c->alibi == 2 ? b * p->Hq : 0) + h];
            s -= slope * fabs((double)(i + off - j));
        }
        if (c->bias) s += get(p->host[BBIAS], p->bias_dt, bias_at(p, b, h, i, j));
        sc[j] = s;
        if (s > mx) mx = s;
    }
    const double sink = c->sinks ? ((const float *)p->host[BSINK])[h] : -INFINITY;
    if (sink > mx) mx = sink;
    for (int64_t d = 0; d < p->Dv; d++) o[d] = 0.0;
    if (mx == -INFINITY) { /* no key, no sink */
        *lse = -INFINITY;
        free(sc);
        return;
    }
    double l = c->sinks ? exp(sink - mx) : 0.0;
    for (int64_t j = 0; j < lk; j++) {
        if (sc[j] == -INFINITY) continue;
        const double w = exp(sc[j] - mx);
        l += w;
        for (int64_t d = 0; d < p->Dv; d++)
            o[d] += w * get(p->host[BV], p->dt, kv_at(p, b, hk, j) * p->Dv + d);
    }
    for (int64_t d = 0; d < p->Dv; d++) o[d] /= l;
    *lse = mx + log(l);
    free(sc);
}

typedef struct vresult {
    double max_err, tol, lse_err, lse_tol;
    int64_t nan, lse_mismatch, rows;
} vresult;

/* Poisons O and lse, runs (naive or tiled), reads back and compares every
 * row of every sequence with the reference. */
static fattn_status vprob_run(fattn_context *ctx, vprob *p, int naive, vresult *r) {
    memset(r, 0, sizeof *r);
    fattn_status st;
    memset(p->host[BO], 0xff, p->bytes[BO]); /* NaN in every dtype */
    memset(p->host[BL], 0xff, p->bytes[BL]);
    if ((st = fattn_buffer_write(p->buf[BO], 0, p->host[BO], p->bytes[BO])) ||
        (st = fattn_buffer_write(p->buf[BL], 0, p->host[BL], p->bytes[BL])))
        return st;
    const fattn_tensor *lse = p->c->no_lse ? NULL : &p->t[BL];
    st = naive ? fattn_forward_naive(ctx, &p->desc, &p->t[BQ], &p->t[BK], &p->t[BV], &p->t[BO], lse)
               : fattn_forward(ctx, &p->desc, &p->t[BQ], &p->t[BK], &p->t[BV], &p->t[BO], lse);
    if (st == FATTN_OK) st = fattn_context_synchronize(ctx);
    if (st != FATTN_OK) return st;
    if ((st = fattn_buffer_read(p->buf[BO], 0, p->host[BO], p->bytes[BO])) ||
        (st = fattn_buffer_read(p->buf[BL], 0, p->host[BL], p->bytes[BL])))
        return st;
    const double grow = p->c->tol_mul > 0.0 ? p->c->tol_mul : 1.0;
    r->tol = harness_tol(&p->desc) * grow;
    r->lse_tol = harness_lse_tol(&p->desc) * grow;
    if (p->c->fast_softcap) {
        r->tol += 2.0 * p->c->softcap / 2048.0;
        r->lse_tol += p->c->softcap / 2048.0;
    }
    double *o = malloc((size_t)p->Dv * sizeof(double));
    for (int64_t b = 0; b < p->B; b++)
        for (int64_t h = 0; h < p->Hq; h++)
            for (int64_t i = 0; i < p->lq[b]; i++) {
                double lse_ref;
                ref_row(p, b, h, i, o, &lse_ref);
                r->rows++;
                const int64_t at = q_at(p, b, h, i);
                for (int64_t d = 0; d < p->Dv; d++) {
                    const double x = get(p->host[BO], p->dt, at * p->Dv + d);
                    if (isnan(x)) {
                        r->nan++;
                        continue;
                    }
                    const double e = fabs(x - o[d]);
                    if (e > r->max_err) r->max_err = e;
                }
                if (p->c->no_lse) continue;
                const double l = ((const float *)p->host[BL])[at];
                if (isnan(l)) {
                    r->nan++;
                } else if (isinf(l) || isinf(lse_ref)) {
                    r->lse_mismatch += l != lse_ref;
                } else {
                    const double e =
                        fabs(l - lse_ref) / (fabs(lse_ref) > 1.0 ? fabs(lse_ref) : 1.0);
                    if (e > r->lse_err) r->lse_err = e;
                }
            }
    free(o);
    return FATTN_OK;
}

/* ---- Conformance --------------------------------------------------------------- */

typedef struct tally {
    int failures, declined, ran;
    char reason[512];
} tally;

/* want_decode: the case must plan the split-KV decode kernel (vcase.decode);
 * want_kernel (or NULL): the kernel the memory report must name. */
static void run_one(fattn_context *ctx, const char *backend, vprob *p, int naive, int64_t splits,
                    int want_decode, const char *want_kernel, tally *t) {
    char what[256];
    snprintf(what, sizeof what, "%s %s%s, kv_splits %lld", p->c->name, fattn_dtype_name(p->dt),
             naive ? " (naive)" : "", (long long)splits);
    assert_int_equal(fattn_context_set_param(ctx, FATTN_PARAM_KV_SPLITS, splits), FATTN_OK);
    if (want_kernel) {
        fattn_memory_report rep = FATTN_MEMORY_REPORT_INIT;
        const fattn_status rs = fattn_context_memory_report(ctx, &p->desc, &rep);
        if (rs != FATTN_OK || strcmp(rep.kernel, want_kernel) != 0) {
            print_error("'%s': the kernel is '%s', not '%s': %s\n", what, rep.kernel, want_kernel,
                        fattn_error_message(ctx));
            t->failures++;
            return;
        }
    }
    if (want_decode) {
        uint64_t ws = 0;
        const fattn_status ws_st = fattn_workspace_size(ctx, &p->desc, &ws);
        if (ws_st != FATTN_OK || ws == 0) {
            print_error("'%s': not planned on the split-KV decode kernel (workspace %llu: %s)\n",
                        what, (unsigned long long)ws,
                        ws_st == FATTN_OK ? "no splits" : fattn_error_message(ctx));
            t->failures++;
            return;
        }
    }
    /* The report plans from the description alone (no operands), and must
     * plan what the call runs: it declines exactly where the call does
     * (a bias in desc->dtype once read as float32 there, and so declined
     * by CUDA's forced wgmma kernel while the call ran on it). */
    fattn_memory_report rep = FATTN_MEMORY_REPORT_INIT;
    const fattn_status rep_st = naive ? FATTN_OK : fattn_context_memory_report(ctx, &p->desc, &rep);
    char rep_why[256];
    snprintf(rep_why, sizeof rep_why, "%s", rep_st == FATTN_OK ? "" : fattn_error_message(ctx));
    vresult r;
    const fattn_status st = vprob_run(ctx, p, naive, &r);
    if (!naive && (rep_st == FATTN_ERR_UNSUPPORTED) != (st == FATTN_ERR_UNSUPPORTED)) {
        print_error("'%s': the memory report gives %s (%s), the call %s (%s)\n", what,
                    fattn_status_string(rep_st), rep_why, fattn_status_string(st),
                    st == FATTN_OK ? "" : fattn_error_message(ctx));
        t->failures++;
        return;
    }
    if (st == FATTN_ERR_UNSUPPORTED) {
        print_message("[  SKIPPED ] %s: '%s': %s\n", backend, what, fattn_error_message(ctx));
        if (!t->declined)
            snprintf(t->reason, sizeof t->reason, "'%s': %s", what, fattn_error_message(ctx));
        t->declined++;
    } else if (st != FATTN_OK) {
        print_error("'%s': %s: %s\n", what, fattn_status_string(st), fattn_error_message(ctx));
        t->failures++;
    } else if (r.max_err > r.tol || r.lse_err > r.lse_tol || r.nan || r.lse_mismatch) {
        print_error("'%s': max err %.3g (tol %.3g), lse err %.3g (tol %.3g), %lld NaN, %lld "
                    "lse -inf mismatches, over %lld rows\n",
                    what, r.max_err, r.tol, r.lse_err, r.lse_tol, (long long)r.nan,
                    (long long)r.lse_mismatch, (long long)r.rows);
        t->failures++;
    } else {
        t->ran++;
    }
}

/* Every case on one backend's tiled paths (every split count the case
 * lists), or (naive) on its naive baseline, fattn_forward_naive, which takes
 * dense batches only: two parts, so FATTN_TEST_REQUIRE can ask for
 * <backend>-variants and <backend>-naive-variants apart and a baseline that
 * declines is a skip of its own. */
static void run_cases(void **state, int naive) {
    const fattn_backend_kind kind = *(const fattn_backend_kind *)*state;
    fattn_backend_info info = FATTN_BACKEND_INFO_INIT;
    test_use_backend(kind, &info);
    tally t = {0, 0, 0, ""};
    for (int dev = 0; dev < info.device_count; dev++) {
        fattn_context *ctx = NULL;
        if (fattn_context_create(kind, dev, &ctx) != FATTN_OK)
            fail_msg("create %s device %d: %s", info.name, dev, fattn_error_message(NULL));
        print_message("%s device %d (%s)\n", info.name, dev, fattn_context_device_name(ctx));
        /* An OpenCL device with a matrix path (or its emulation) runs the
         * 16-bit decoding cases under forced splits on the matrix decode. */
        const char *dn = fattn_context_device_name(ctx);
        const int matrix = kind == FATTN_BACKEND_OPENCL && strstr(dn, "matrix units: ") &&
                           !strstr(dn, "matrix units: scalar");
        for (int64_t i = 0; i < N(cases); i++)
            for (int64_t k = 0; k < N(dtypes); k++) {
                const vcase *c = &cases[i];
                if (c->dtypes && !(c->dtypes & (1u << dtypes[k]))) continue;
                if (!test_case_selected(c->name)) continue;
                vprob p;
                const uint64_t seed = 0x7a7a0000u + 97u * (unsigned)i + 7u * (unsigned)k + dev;
                fattn_status st = vprob_build(ctx, c, dtypes[k], seed, &p);
                if (st != FATTN_OK) {
                    print_error("'%s': building it: %s: %s\n", c->name, fattn_status_string(st),
                                fattn_error_message(ctx));
                    t.failures++;
                } else {
                    for (int64_t s = 0; !naive && s < (c->splits ? N(kv_splits) : 1); s++) {
                        const int dec = c->decode && kv_splits[s] >= 2;
                        run_one(
                            ctx, info.name, &p, 0, kv_splits[s], dec && kind == FATTN_BACKEND_CUDA,
                            dec && matrix && dtypes[k] != FATTN_F32 ? "decode-matrix" : NULL, &t);
                    }
                    if (naive && !c->len_q && c->kv == KV_DENSE)
                        run_one(ctx, info.name, &p, 1, 0, 0, NULL, &t);
                }
                vprob_free(&p);
            }
        fattn_context_free(ctx);
    }
    test_finish_runs(info.name, naive ? "naive-variants" : "variants", t.ran, t.declined,
                     t.failures, t.reason);
}

static void conformance(void **state) { run_cases(state, 0); }

static void conformance_naive(void **state) { run_cases(state, 1); }

/* ---- Validation (CPU) -------------------------------------------------------- */

static void expect_status(fattn_context *ctx, fattn_status got, fattn_status want,
                          const char *needles, const char *what) {
    const char *msg = fattn_error_message(ctx);
    if (got != want)
        fail_msg("%s: got %s (\"%s\"), want %s", what, fattn_status_string(got), msg,
                 fattn_status_string(want));
    if (want != FATTN_OK && !msg_has(msg, needles))
        fail_msg("%s: the message \"%s\" does not name %s", what, msg, needles);
}

static void validation(void **state) {
    (void)state;
    fattn_context *ctx = NULL;
    assert_int_equal(fattn_context_create(FATTN_BACKEND_CPU, 0, &ctx), FATTN_OK);
    static const vcase base = {
        "validation", 2, 4, 2, 64, 32, 9, 13, NOWIN, .alibi = 1, .sinks = 1, .bias = BIAS_FULL};
    vprob p;
    assert_int_equal(vprob_build(ctx, &base, FATTN_F16, 0x5eed, &p), FATTN_OK);
    vresult r;
    assert_int_equal(vprob_run(ctx, &p, 0, &r), FATTN_OK);
    assert_true(r.max_err <= r.tol && r.nan == 0);
    const fattn_tensor *q = &p.t[BQ], *k = &p.t[BK], *v = &p.t[BV], *o = &p.t[BO], *l = &p.t[BL];
#define CALL() fattn_forward(ctx, &p.desc, q, k, v, o, l)
    /* Values of the mask. */
    p.mask.softcap = -1.0f;
    expect_status(ctx, CALL(), FATTN_ERR_INVALID_ARGUMENT, "softcap", "negative softcap");
    p.mask.softcap = NAN;
    expect_status(ctx, CALL(), FATTN_ERR_INVALID_ARGUMENT, "softcap", "NaN softcap");
    p.mask.softcap = 0.0f;
    p.mask.window_left = -2;
    expect_status(ctx, CALL(), FATTN_ERR_INVALID_ARGUMENT, "window_left", "window_left -2");
    p.mask.window_left = -1;
    p.mask.window_right = -7;
    expect_status(ctx, CALL(), FATTN_ERR_INVALID_ARGUMENT, "window_right", "window_right -7");
    p.mask.window_right = -1;
    /* Slopes: float32, one per (batch, head). */
    fattn_tensor bad = p.t[BSLOPE];
    p.mask.alibi_slopes = &bad;
    bad.dtype = FATTN_F16;
    expect_status(ctx, CALL(), FATTN_ERR_DTYPE, "alibi_slopes", "f16 slopes");
    bad.dtype = FATTN_F32;
    bad.stride_batch = p.Hq; /* [batch, heads_q] on a buffer of heads_q floats */
    expect_status(ctx, CALL(), FATTN_ERR_BUFFER_TOO_SMALL, "alibi_slopes", "slopes too few");
    p.mask.alibi_slopes = &p.t[BSLOPE];
    /* Sinks: float32, one per query head. */
    bad = p.t[BSINK];
    p.mask.sinks = &bad;
    bad.dtype = FATTN_BF16;
    expect_status(ctx, CALL(), FATTN_ERR_DTYPE, "sinks", "bf16 sinks");
    bad.dtype = FATTN_F32;
    bad.offset = 1;
    expect_status(ctx, CALL(), FATTN_ERR_BUFFER_TOO_SMALL, "sinks", "sinks too few");
    p.mask.sinks = &p.t[BSINK];
    /* Bias: f32 or desc->dtype, [batch, heads_q, seq_q, seq_kv]. */
    bad = p.t[BBIAS];
    p.mask.bias = &bad;
    bad.dtype = FATTN_BF16;
    expect_status(ctx, CALL(), FATTN_ERR_DTYPE, "bias", "bf16 bias with f16 attention");
    bad.dtype = FATTN_I32;
    expect_status(ctx, CALL(), FATTN_ERR_DTYPE, "bias", "int32 bias");
    bad.dtype = p.bias_dt;
    bad.stride_seq = p.Skv + 1; /* rows one key longer than the buffer holds */
    expect_status(ctx, CALL(), FATTN_ERR_BUFFER_TOO_SMALL, "bias", "bias too small");
    bad.stride_seq = p.Skv;
    bad.stride_dim = -1;
    expect_status(ctx, CALL(), FATTN_ERR_STRIDE, "bias", "negative bias stride");
    p.mask.bias = &p.t[BBIAS];
    /* head_dim_v: 0 (= head_dim) or 1..256; V and O shaped by it. */
    p.desc.head_dim_v = 257;
    expect_status(ctx, CALL(), FATTN_ERR_HEAD_DIM, "head_dim_v", "head_dim_v 257");
    p.desc.head_dim_v = -1;
    expect_status(ctx, CALL(), FATTN_ERR_HEAD_DIM, "head_dim_v", "head_dim_v -1");
    p.desc.head_dim_v = 0; /* = head_dim 64: V and O hold only 32 per row */
    expect_status(ctx, CALL(), FATTN_ERR_BUFFER_TOO_SMALL, "v", "head_dim_v 0 with narrow V");
    p.desc.head_dim_v = 32;
    fattn_tensor vw = *v;
    vw.stride_seq = 64;
    v = &vw;
    expect_status(ctx, CALL(), FATTN_ERR_BUFFER_TOO_SMALL, "v", "V rows of 64");
    v = &p.t[BV];
    expect_status(ctx, CALL(), FATTN_OK, "", "the good call again");
#undef CALL
    /* Accounting counts V and O at head_dim_v. */
    fattn_attention_desc d = p.desc;
    d.mask = NULL;
    const double flops = fattn_flops(&d);
    assert_true(fabs(flops - 2.0 * 2 * 4 * 9 * 13 * (64 + 32)) < 1e-6 * flops);
    vprob_free(&p);

    /* fattn_attention_host with head_dim_v: the arrays are shaped by it. */
    const vcase hc = {"host", 1, 2, 1, 24, 40, 5, 7, NOWIN};
    assert_int_equal(vprob_build(ctx, &hc, FATTN_F32, 0x40, &p), FATTN_OK);
    float lse[10], out[2 * 5 * 40];
    fattn_attention_desc hd = p.desc;
    hd.mask = NULL;
    assert_int_equal(fattn_attention_host(ctx, &hd, FATTN_LAYOUT_BHSD, p.host[BQ], p.host[BK],
                                          p.host[BV], out, lse),
                     FATTN_OK);
    double ref[40], lref;
    for (int64_t h = 0; h < 2; h++)
        for (int64_t i = 0; i < 5; i++) {
            ref_row(&p, 0, h, i, ref, &lref);
            for (int d2 = 0; d2 < 40; d2++)
                assert_true(fabs(out[(h * 5 + i) * 40 + d2] - ref[d2]) < 1e-5);
            assert_true(fabs(lse[h * 5 + i] - lref) < 1e-4);
        }
    vprob_free(&p);
    fattn_context_free(ctx);
}

int main(void) {
    static const fattn_backend_kind cpu = FATTN_BACKEND_CPU, cuda = FATTN_BACKEND_CUDA,
                                    ocl = FATTN_BACKEND_OPENCL;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(validation),
        {"cpu", conformance, NULL, NULL, (void *)&cpu},
        {"cpu naive", conformance_naive, NULL, NULL, (void *)&cpu},
        {"cuda", conformance, NULL, NULL, (void *)&cuda},
        {"cuda naive", conformance_naive, NULL, NULL, (void *)&cuda},
        {"opencl", conformance, NULL, NULL, (void *)&ocl},
        {"opencl naive", conformance_naive, NULL, NULL, (void *)&ocl},
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

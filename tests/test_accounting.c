/* Accounting: fattn_memory_estimate, fattn_context_memory_report and
 * fattn_flops against numbers worked out by hand, so a change to the byte or
 * FLOP formulas (which the benchmark and README quote) is caught here. */
/* setenv/unsetenv are POSIX, hidden by -std=c11 without this. */
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "fattn.h"

/* Doubles here are ratios of exact integers; compare relative to the size so
 * huge FLOP counts and small percentages use the same check. */
#define assert_near(actual, expected)                                                              \
    do {                                                                                           \
        const double a_ = (actual), e_ = (expected);                                               \
        const double d_ = a_ > e_ ? a_ - e_ : e_ - a_;                                             \
        const double m_ = (e_ < 0 ? -e_ : e_) > 1.0 ? (e_ < 0 ? -e_ : e_) : 1.0;                   \
        if (d_ > 1e-12 * m_) fail_msg("%s = %.17g, expected %.17g", #actual, a_, e_);              \
    } while (0)

/* A tiling of tile_q x tile_kv with `groups` resident and `ws` workspace bytes. */
#define TILING(tq, tkv, groups, ws)                                                                \
    { sizeof(fattn_tiling), (tq), (tkv), (groups), (ws) }

static fattn_attention_desc make_desc(int64_t b, int64_t hq, int64_t hkv, int64_t sq, int64_t sk,
                                      int64_t d, fattn_dtype t) {
    fattn_attention_desc desc = FATTN_ATTENTION_DESC_INIT;
    desc.batch = b;
    desc.heads_q = hq;
    desc.heads_kv = hkv;
    desc.seq_q = sq;
    desc.seq_kv = sk;
    desc.head_dim = d;
    desc.dtype = t;
    return desc;
}

/* ---- fattn_memory_estimate: every field, by hand ----------------------------- */

static void test_tiny_f32(void **state) {
    (void)state;
    /* B=1, Hq=Hkv=1, Sq=Sk=4, D=2, f32 (4 bytes), tiles 2 x 2, all groups resident. */
    const fattn_attention_desc d = make_desc(1, 1, 1, 4, 4, 2, FATTN_F32);
    const fattn_tiling t = TILING(2, 2, 0, 0);
    fattn_memory_report r = FATTN_MEMORY_REPORT_INIT;
    assert_int_equal(fattn_memory_estimate(&d, &t, &r), FATTN_OK);
    assert_string_equal(fattn_error_message(NULL), "");
    /* naive = B*Hq*Sq*Sk * 4 bytes * 2 (S and P) = 1*1*4*4*4*2 = 128 */
    assert_int_equal(r.naive_bytes, 128);
    /* tile = (tq + 2*tkv)*D*4 + tq*tkv*4 + tq*D*4 + tq*2*4
     *      = (2+4)*2*4 + 2*2*4 + 2*2*4 + 2*2*4 = 48 + 16 + 16 + 16 = 96 */
    assert_int_equal(r.tile_bytes, 96);
    /* groups = B*Hq*ceil(Sq/tq) = 1*1*ceil(4/2) = 2 */
    assert_int_equal(r.groups, 2);
    /* row stats = B*Hq*Sq * (max + sum) * 4 = 1*1*4*8 = 32 */
    assert_int_equal(r.row_stat_bytes, 32);
    assert_int_equal(r.workspace_bytes, 0);
    /* flash = 96*2 + 32 + 0 = 224 */
    assert_int_equal(r.flash_bytes, 224);
    /* reduction = 128/224 = 4/7; saved = 100*(1 - 224/128) = -75 (tiling costs more at N=4) */
    assert_near(r.reduction, 4.0 / 7.0);
    assert_near(r.percent_saved, -75.0);
    /* flops = 4*B*Hq*D*Sq*Sk = 4*1*1*2*16 = 128 */
    assert_near(r.flops, 128.0);
    assert_near(fattn_flops(&d), 128.0);
}

static void test_gqa_f16(void **state) {
    (void)state;
    /* B=2, Hq=4, Hkv=2, Sq=Sk=1024, D=64, f16 (2 bytes), tiles 64 x 64. */
    fattn_attention_desc d = make_desc(2, 4, 2, 1024, 1024, 64, FATTN_F16);
    fattn_tiling t = TILING(64, 64, 0, 0);
    fattn_memory_report r = FATTN_MEMORY_REPORT_INIT;
    assert_int_equal(fattn_memory_estimate(&d, &t, &r), FATTN_OK);
    /* naive = 2*4*1024*1024*8 = 8 * 2^20 * 8 = 2^26 = 67108864 (Hq counts, not Hkv) */
    assert_int_equal(r.naive_bytes, 67108864u);
    /* tile = (64 + 128)*64*2 + 64*64*4 + 64*64*4 + 64*2*4
     *      = 24576 + 16384 + 16384 + 512 = 57856 */
    assert_int_equal(r.tile_bytes, 57856);
    /* groups = 2*4*ceil(1024/64) = 8*16 = 128 */
    assert_int_equal(r.groups, 128);
    /* row stats = 2*4*1024*8 = 65536 */
    assert_int_equal(r.row_stat_bytes, 65536);
    /* flash = 57856*128 + 65536 = 7405568 + 65536 = 7471104 = 114 * 65536 */
    assert_int_equal(r.flash_bytes, 7471104u);
    /* naive = 1024 * 65536, so reduction = 1024/114 and saved = 100*(1 - 114/1024) = 88.8671875 */
    assert_near(r.reduction, 1024.0 / 114.0);
    assert_near(r.percent_saved, 88.8671875);
    /* flops = 4*2*4*64*1024*1024 = 2048 * 2^20 = 2^31 */
    assert_near(r.flops, 2147483648.0);

    /* 10 resident groups (< 128): flash = 57856*10 + 65536 + 1000 workspace = 645096 */
    t.concurrent_groups = 10;
    t.workspace_bytes = 1000;
    assert_int_equal(fattn_memory_estimate(&d, &t, &r), FATTN_OK);
    assert_int_equal(r.groups, 10);
    assert_int_equal(r.workspace_bytes, 1000);
    assert_int_equal(r.flash_bytes, 645096u);
    assert_int_equal(r.tile_bytes, 57856);
    assert_int_equal(r.naive_bytes, 67108864u);
    assert_near(r.reduction, 67108864.0 / 645096.0);
    assert_near(r.percent_saved, 100.0 * (1.0 - 645096.0 / 67108864.0));

    /* More resident groups than exist (1000 > 128): capped at the 128 that exist.
     * flash = 7405568 + 65536 + 1000 = 7472104 */
    t.concurrent_groups = 1000;
    assert_int_equal(fattn_memory_estimate(&d, &t, &r), FATTN_OK);
    assert_int_equal(r.groups, 128);
    assert_int_equal(r.flash_bytes, 7472104u);

    /* bf16 is 2 bytes like f16: same numbers. f32 (4 bytes) changes only the
     * Q/K/V tiles: (64+128)*64*4 = 49152, tile = 49152 + 16384 + 16384 + 512 = 82432 */
    t.concurrent_groups = 0;
    t.workspace_bytes = 0;
    d.dtype = FATTN_BF16;
    assert_int_equal(fattn_memory_estimate(&d, &t, &r), FATTN_OK);
    assert_int_equal(r.tile_bytes, 57856);
    d.dtype = FATTN_F32;
    assert_int_equal(fattn_memory_estimate(&d, &t, &r), FATTN_OK);
    assert_int_equal(r.tile_bytes, 82432);
    /* flash = 82432*128 + 65536 = 10551296 + 65536 = 10616832 */
    assert_int_equal(r.flash_bytes, 10616832u);
}

static void test_partial_last_tile(void **state) {
    (void)state;
    /* Sq=100 with tq=64 needs ceil(100/64) = 2 query tiles per (batch, head):
     * B=3, Hq=2: groups = 3*2*2 = 12. D=8, f32, tkv=32:
     * tile = (64+64)*8*4 + 64*32*4 + 64*8*4 + 64*8 = 4096 + 8192 + 2048 + 512 = 14848
     * naive = 3*2*100*50*8 = 240000; stats = 3*2*100*8 = 4800
     * flash = 14848*12 + 4800 = 178176 + 4800 = 182976 */
    const fattn_attention_desc d = make_desc(3, 2, 1, 100, 50, 8, FATTN_F32);
    const fattn_tiling t = TILING(64, 32, 0, 0);
    fattn_memory_report r = FATTN_MEMORY_REPORT_INIT;
    assert_int_equal(fattn_memory_estimate(&d, &t, &r), FATTN_OK);
    assert_int_equal(r.groups, 12);
    assert_int_equal(r.tile_bytes, 14848);
    assert_int_equal(r.naive_bytes, 240000);
    assert_int_equal(r.row_stat_bytes, 4800);
    assert_int_equal(r.flash_bytes, 182976);
    /* flops = 4*3*2*8*100*50 = 192 * 5000 = 960000 */
    assert_near(r.flops, 960000.0);
}

static void test_null_tiling_defaults_to_64(void **state) {
    (void)state;
    /* NULL tiling and an all-zero tiling both mean tiles of 64, every group
     * resident, no workspace: the same report as {64, 64, 0, 0}. */
    const fattn_attention_desc d = make_desc(2, 4, 2, 1024, 1024, 64, FATTN_F16);
    const fattn_tiling explicit64 = TILING(64, 64, 0, 0), zero = TILING(0, 0, 0, 0);
    fattn_memory_report a = FATTN_MEMORY_REPORT_INIT, b = FATTN_MEMORY_REPORT_INIT,
                        c = FATTN_MEMORY_REPORT_INIT;
    assert_int_equal(fattn_memory_estimate(&d, NULL, &a), FATTN_OK);
    assert_int_equal(fattn_memory_estimate(&d, &explicit64, &b), FATTN_OK);
    assert_int_equal(fattn_memory_estimate(&d, &zero, &c), FATTN_OK);
    /* Same hand numbers as test_gqa_f16. */
    assert_int_equal(a.tile_bytes, 57856);
    assert_int_equal(a.groups, 128);
    assert_int_equal(a.flash_bytes, 7471104u);
    const fattn_memory_report *other[2] = {&b, &c};
    for (int i = 0; i < 2; i++) {
        assert_int_equal(a.naive_bytes, other[i]->naive_bytes);
        assert_int_equal(a.flash_bytes, other[i]->flash_bytes);
        assert_int_equal(a.tile_bytes, other[i]->tile_bytes);
        assert_int_equal(a.groups, other[i]->groups);
        assert_int_equal(a.row_stat_bytes, other[i]->row_stat_bytes);
        assert_int_equal(a.workspace_bytes, other[i]->workspace_bytes);
        assert_near(a.reduction, other[i]->reduction);
        assert_near(a.percent_saved, other[i]->percent_saved);
        assert_near(a.flops, other[i]->flops);
    }
    /* Only one tile size zero: that one alone defaults. tq=0 -> 64, tkv=32:
     * tile = (64+64)*64*2 + 64*32*4 + 64*64*4 + 512 = 16384 + 8192 + 16384 + 512 = 41472 */
    const fattn_tiling half = TILING(0, 32, 0, 0);
    assert_int_equal(fattn_memory_estimate(&d, &half, &a), FATTN_OK);
    assert_int_equal(a.tile_bytes, 41472);
    assert_int_equal(a.groups, 128);
}

/* ---- FLOPs: causal pair counts ------------------------------------------------ */

static void test_causal_flops(void **state) {
    (void)state;
    fattn_attention_desc d = make_desc(1, 1, 1, 4, 4, 2, FATTN_F32);
    d.causal = 1;
    /* Sq=Sk=4: rows see 1,2,3,4 keys = 10 pairs; flops = 4*1*1*2*10 = 80 */
    assert_near(fattn_flops(&d), 80.0);
    fattn_memory_report r = FATTN_MEMORY_REPORT_INIT;
    const fattn_tiling t = TILING(2, 2, 0, 0);
    assert_int_equal(fattn_memory_estimate(&d, &t, &r), FATTN_OK);
    assert_near(r.flops, 80.0);
    /* The naive method holds the full N x N matrices whether masked or not:
     * bytes are the same as non-causal (128, see test_tiny_f32). */
    assert_int_equal(r.naive_bytes, 128);
    assert_int_equal(r.flash_bytes, 224);

    /* Sq=3, Sk=5, bottom-right: row i sees i + 5 - 3 + 1 = i + 3 keys:
     * 3 + 4 + 5 = 12 pairs; flops = 4*2*12 = 96 */
    d.seq_q = 3;
    d.seq_kv = 5;
    assert_near(fattn_flops(&d), 96.0);
    /* Sq=5, Sk=2: row i sees max(0, i + 2 - 5 + 1) = max(0, i - 2): 0,0,0,1,2 = 3
     * pairs; flops = 4*2*3 = 24 */
    d.seq_q = 5;
    d.seq_kv = 2;
    assert_near(fattn_flops(&d), 24.0);
    /* Sq=1, Sk=5: the single row sees all 5 keys; flops = 4*2*5 = 40 */
    d.seq_q = 1;
    d.seq_kv = 5;
    assert_near(fattn_flops(&d), 40.0);
    /* Sq=Sk=1: 1 pair; flops = 4*2 = 8 */
    d.seq_kv = 1;
    assert_near(fattn_flops(&d), 8.0);
    /* Sq=Sk=1024, B=2, Hq=4, D=64: 1024*1025/2 = 524800 pairs;
     * flops = 4*2*4*64*524800 = 2048*524800 = 1074790400 */
    d = make_desc(2, 4, 2, 1024, 1024, 64, FATTN_F16);
    d.causal = 1;
    assert_near(fattn_flops(&d), 1074790400.0);
    /* Non-causal the same shape is 2^31 (test_gqa_f16): causal is a bit over half. */
    d.causal = 0;
    assert_near(fattn_flops(&d), 2147483648.0);
    /* Square, top-left and bottom-right are the same mask. */
    d.causal = FATTN_CAUSAL_TOP_LEFT;
    assert_near(fattn_flops(&d), 1074790400.0);
}

static void test_causal_flops_top_left(void **state) {
    (void)state;
    /* Top-left: row i sees keys 0..i, whatever seq_kv is (clamped to it). */
    fattn_attention_desc d = make_desc(1, 1, 1, 3, 5, 2, FATTN_F32);
    d.causal = FATTN_CAUSAL_TOP_LEFT;
    /* Sq=3, Sk=5: rows see 1, 2, 3 keys = 6 pairs; flops = 4*2*6 = 48
     * (bottom-right: 12 pairs, 96; see test_causal_flops) */
    assert_near(fattn_flops(&d), 48.0);
    fattn_memory_report r = FATTN_MEMORY_REPORT_INIT;
    const fattn_tiling t = TILING(2, 2, 0, 0);
    assert_int_equal(fattn_memory_estimate(&d, &t, &r), FATTN_OK);
    assert_near(r.flops, 48.0);
    /* naive = 1*1*3*5*8 = 120 bytes, masked or not */
    assert_int_equal(r.naive_bytes, 120);
    /* Sq=5, Sk=2: rows see min(i + 1, 2) = 1, 2, 2, 2, 2 = 9 pairs; flops = 72
     * (bottom-right: 3 pairs, the first three rows empty) */
    d.seq_q = 5;
    d.seq_kv = 2;
    assert_near(fattn_flops(&d), 72.0);
    /* Sq=1, Sk=5: the single row sees key 0 only; flops = 8 (bottom-right: 40) */
    d.seq_q = 1;
    d.seq_kv = 5;
    assert_near(fattn_flops(&d), 8.0);
    /* Sq=77, Sk=1: every row sees key 0: 77 pairs; flops = 4*2*77 = 616
     * (bottom-right: only the last row, 8) */
    d.seq_q = 77;
    d.seq_kv = 1;
    assert_near(fattn_flops(&d), 616.0);
    d.causal = FATTN_CAUSAL_BOTTOM_RIGHT;
    assert_near(fattn_flops(&d), 8.0);
    /* Sq=37, Sk=101, B=2, Hq=4, D=64: rows see 1..37 keys = 37*38/2 = 703
     * pairs; flops = 4*2*4*64*703 = 1439744. Bottom-right: rows see 65..101
     * = 37*(65+101)/2 = 3071 pairs; flops = 2048*3071 = 6289408 */
    d = make_desc(2, 4, 2, 37, 101, 64, FATTN_BF16);
    d.causal = FATTN_CAUSAL_TOP_LEFT;
    assert_near(fattn_flops(&d), 1439744.0);
    d.causal = FATTN_CAUSAL_BOTTOM_RIGHT;
    assert_near(fattn_flops(&d), 6289408.0);
    /* No keys: nothing for either alignment. */
    d.seq_kv = 0;
    assert_near(fattn_flops(&d), 0.0);
    d.causal = FATTN_CAUSAL_TOP_LEFT;
    assert_near(fattn_flops(&d), 0.0);
}

static void test_empty_kv(void **state) {
    (void)state;
    /* seq_kv = 0 is valid: no scores at all. B=1, Hq=1, Sq=4, D=2, f32, tiles 2/2. */
    fattn_attention_desc d = make_desc(1, 1, 1, 4, 0, 2, FATTN_F32);
    const fattn_tiling t = TILING(2, 2, 0, 0);
    fattn_memory_report r = FATTN_MEMORY_REPORT_INIT;
    assert_near(fattn_flops(&d), 0.0);
    assert_int_equal(fattn_memory_estimate(&d, &t, &r), FATTN_OK);
    /* naive = 1*1*4*0*8 = 0 */
    assert_int_equal(r.naive_bytes, 0);
    /* The tiled path still holds its tiles and row stats: 96*2 + 32 = 224 (as test_tiny_f32). */
    assert_int_equal(r.tile_bytes, 96);
    assert_int_equal(r.groups, 2);
    assert_int_equal(r.row_stat_bytes, 32);
    assert_int_equal(r.flash_bytes, 224);
    /* reduction = 0/224 = 0; percent_saved is 0 by definition when naive is 0
     * (not -inf or NaN). */
    assert_near(r.reduction, 0.0);
    assert_near(r.percent_saved, 0.0);
    assert_near(r.flops, 0.0);
    d.causal = 1;
    assert_near(fattn_flops(&d), 0.0);
}

/* ---- Trends ---------------------------------------------------------------------- */

static void test_savings_grow_with_length(void **state) {
    (void)state;
    /* With fixed tiles the naive bytes grow as N^2 and the tiled ones as N, so
     * both the reduction and the share saved must rise with every doubling,
     * whether every group is resident or a GPU-like 132 are. */
    const int64_t resident[2] = {0, 132};
    for (int c = 0; c < 2; c++) {
        const fattn_tiling t = TILING(64, 64, resident[c], 0);
        double prev_red = 0.0, prev_pct = -1e300;
        for (int64_t n = 512; n <= 16384; n *= 2) {
            const fattn_attention_desc d = make_desc(1, 8, 8, n, n, 64, FATTN_F16);
            fattn_memory_report r = FATTN_MEMORY_REPORT_INIT;
            assert_int_equal(fattn_memory_estimate(&d, &t, &r), FATTN_OK);
            if (!(r.reduction > prev_red) || !(r.percent_saved > prev_pct))
                fail_msg("resident %lld, N=%lld: reduction %.6g (prev %.6g), saved %.6g%% "
                         "(prev %.6g%%)",
                         (long long)resident[c], (long long)n, r.reduction, prev_red,
                         r.percent_saved, prev_pct);
            assert_true(r.percent_saved < 100.0);
            prev_red = r.reduction;
            prev_pct = r.percent_saved;
        }
        /* At 16K the tiled path is far below the naive one. */
        assert_true(prev_pct > 90.0);
    }
}

/* ---- Errors ---------------------------------------------------------------------- */

static void test_overflow(void **state) {
    (void)state;
    fattn_memory_report r = FATTN_MEMORY_REPORT_INIT;
    /* B*Hq*Sq*D = 2^40 * 2^20 * 2^20 * 64 far exceeds 2^63: rejected by validation. */
    fattn_attention_desc d = make_desc((int64_t)1 << 40, (int64_t)1 << 20, (int64_t)1 << 20,
                                       (int64_t)1 << 20, (int64_t)1 << 20, 64, FATTN_F16);
    assert_int_equal(fattn_memory_estimate(&d, NULL, &r), FATTN_ERR_OVERFLOW);
    assert_true(strlen(fattn_error_message(NULL)) > 0);
    assert_near(fattn_flops(&d), 0.0);

    /* Valid sizes (B*Hq*Sq*Sk = 2^62 fits int64) whose naive bytes do not:
     * 2^62 * 8 = 2^65 > 2^64 - 1. */
    d = make_desc(1, 1, 1, (int64_t)1 << 31, (int64_t)1 << 31, 1, FATTN_F32);
    assert_int_equal(fattn_memory_estimate(&d, NULL, &r), FATTN_ERR_OVERFLOW);
    assert_true(strlen(fattn_error_message(NULL)) > 0);

    /* Valid sizes, but a huge tile times many groups: tq=1, tkv=2^31-1, D=256:
     * tile ~ (1 + 2^32)*256*4 + 2^31*4 ~ 2^42; groups = Sq = 2^30; product ~ 2^72. */
    d = make_desc(1, 1, 1, (int64_t)1 << 30, 1, 256, FATTN_F32);
    const fattn_tiling big = TILING(1, 2147483647, 0, 0);
    assert_int_equal(fattn_memory_estimate(&d, &big, &r), FATTN_ERR_OVERFLOW);
}

static void test_overflow_naive_kv_factor(void **state) {
    (void)state;
    /* Sk = 2^61 with B=Hq=Hkv=Sq=D=1 passes validation (every product is 2^61),
     * but the naive bytes are 2^61 * 8 = 2^64, one past uint64: this must be
     * FATTN_ERR_OVERFLOW, not a wrapped value (2^64 mod 2^64 = 0). */
    fattn_attention_desc d = make_desc(1, 1, 1, 1, (int64_t)1 << 61, 1, FATTN_F32);
    fattn_memory_report r = FATTN_MEMORY_REPORT_INIT;
    const fattn_status st = fattn_memory_estimate(&d, NULL, &r);
    if (st != FATTN_ERR_OVERFLOW)
        fail_msg("status %d (%s), naive_bytes %llu: the 2^64-byte naive size wrapped", (int)st,
                 fattn_status_string(st), (unsigned long long)r.naive_bytes);
}

static void test_invalid_desc(void **state) {
    (void)state;
    fattn_memory_report r = FATTN_MEMORY_REPORT_INIT;
    const fattn_attention_desc good = make_desc(1, 2, 1, 8, 8, 16, FATTN_F32);
    fattn_attention_desc d;

    assert_int_equal(fattn_memory_estimate(NULL, NULL, &r), FATTN_ERR_NULL_POINTER);
    assert_true(strlen(fattn_error_message(NULL)) > 0);
    assert_near(fattn_flops(NULL), 0.0);
    assert_int_equal(fattn_memory_estimate(&good, NULL, NULL), FATTN_ERR_NULL_POINTER);

    /* Each invalid description gives its own validation status, and fattn_flops 0. */
    struct {
        int field;
        int64_t value;
        fattn_status want;
    } const cases[] = {
        {0, 0, FATTN_ERR_INVALID_SIZE},             /* batch 0 */
        {1, 0, FATTN_ERR_INVALID_SIZE},             /* heads_q 0 */
        {2, 0, FATTN_ERR_INVALID_SIZE},             /* heads_kv 0 */
        {3, 0, FATTN_ERR_INVALID_SIZE},             /* seq_q 0 */
        {4, -1, FATTN_ERR_INVALID_SIZE},            /* seq_kv negative */
        {5, 0, FATTN_ERR_HEAD_DIM},                 /* head_dim 0 */
        {5, 257, FATTN_ERR_HEAD_DIM},               /* head_dim 257 */
        {2, 3, FATTN_ERR_HEADS},                    /* heads_q 2 not a multiple of 3 */
        {6, 7, FATTN_ERR_INVALID_ARGUMENT},         /* dtype 7 */
        {6, FATTN_I32, FATTN_ERR_INVALID_ARGUMENT}, /* int32 is for index tensors only */
        {7, 3, FATTN_ERR_INVALID_ARGUMENT},         /* causal 3: no such alignment */
        {7, -1, FATTN_ERR_INVALID_ARGUMENT},        /* causal -1 */
        {8, 1 << 5, FATTN_ERR_INVALID_ARGUMENT},    /* unknown flag bit */
        {9, 0, FATTN_ERR_INVALID_ARGUMENT},         /* size 0: not an INIT'ed struct */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        d = good;
        switch (cases[i].field) {
        case 0: d.batch = cases[i].value; break;
        case 1: d.heads_q = cases[i].value; break;
        case 2: d.heads_kv = cases[i].value; break;
        case 3: d.seq_q = cases[i].value; break;
        case 4: d.seq_kv = cases[i].value; break;
        case 5: d.head_dim = cases[i].value; break;
        case 6: d.dtype = (fattn_dtype)cases[i].value; break;
        case 7: d.causal = (fattn_causal)cases[i].value; break;
        case 8: d.flags = (unsigned)cases[i].value; break;
        default: d.size = (size_t)cases[i].value; break;
        }
        const fattn_status st = fattn_memory_estimate(&d, NULL, &r);
        if (st != cases[i].want)
            fail_msg("case %zu: status %d, expected %d", i, (int)st, (int)cases[i].want);
        assert_true(strlen(fattn_error_message(NULL)) > 0);
        assert_near(fattn_flops(&d), 0.0);
    }

    /* A negative tiling field is an invalid argument; a valid call then clears
     * the message. */
    const fattn_tiling neg[3] = {TILING(-1, 64, 0, 0), TILING(64, -1, 0, 0), TILING(64, 64, -1, 0)};
    for (int i = 0; i < 3; i++) {
        assert_int_equal(fattn_memory_estimate(&good, &neg[i], &r), FATTN_ERR_INVALID_ARGUMENT);
        assert_true(strlen(fattn_error_message(NULL)) > 0);
    }
    assert_int_equal(fattn_memory_estimate(&good, NULL, &r), FATTN_OK);
    assert_string_equal(fattn_error_message(NULL), "");

    /* A tiling or a report without its size is refused too. */
    const fattn_tiling unsized = {0, 64, 64, 0, 0};
    assert_int_equal(fattn_memory_estimate(&good, &unsized, &r), FATTN_ERR_INVALID_ARGUMENT);
    assert_true(strlen(fattn_error_message(NULL)) > 0);
    fattn_memory_report unsized_report;
    memset(&unsized_report, 0, sizeof unsized_report);
    assert_int_equal(fattn_memory_estimate(&good, NULL, &unsized_report),
                     FATTN_ERR_INVALID_ARGUMENT);
    assert_true(strlen(fattn_error_message(NULL)) > 0);
    assert_int_equal(unsized_report.naive_bytes, 0); /* nothing written */
}

/* ---- fattn_context_memory_report on the CPU backend ------------------------------- */

static void test_context_report_cpu(void **state) {
    (void)state;
    /* The CPU backend keeps one tile set per thread; pin the thread count so
     * the resident-group count does not depend on this machine's cores. */
    setenv("FATTN_CPU_THREADS", "2", 1);
    /* and the tiles: AVX-512's lane kernel takes 64 rows, the others 16 */
    setenv("FATTN_CPU_ISA", "portable", 1);
    fattn_context *ctx = NULL;
    assert_int_equal(fattn_context_create(FATTN_BACKEND_CPU, 0, &ctx), FATTN_OK);

    /* B=1, Hq=2, Hkv=1, Sq=Sk=128, D=32, f32, CPU default tiles 16 x 64:
     * tile = (16+128)*32*4 + 16*64*4 + 16*32*4 + 16*2*4 = 18432 + 4096 + 2048 + 128 = 24704
     * groups = min(2 threads, 1*2*ceil(128/16) = 16) = 2
     * stats = 1*2*128*8 = 2048; flash = 24704*2 + 2048 = 51456
     * naive = 1*2*128*128*8 = 262144; flops = 4*1*2*32*128*128 = 4194304 */
    fattn_attention_desc d = make_desc(1, 2, 1, 128, 128, 32, FATTN_F32);
    fattn_memory_report r = FATTN_MEMORY_REPORT_INIT;
    assert_int_equal(fattn_context_memory_report(ctx, &d, &r), FATTN_OK);
    assert_string_equal(fattn_error_message(ctx), "");
    assert_int_equal(r.tile_bytes, 24704);
    assert_int_equal(r.groups, 2);
    assert_int_equal(r.row_stat_bytes, 2048);
    assert_int_equal(r.workspace_bytes, 0);
    assert_int_equal(r.flash_bytes, 51456);
    assert_int_equal(r.naive_bytes, 262144);
    assert_near(r.reduction, 262144.0 / 51456.0);
    assert_near(r.percent_saved, 100.0 * (1.0 - 51456.0 / 262144.0));
    assert_near(r.flops, 4194304.0);

    /* The same as fattn_memory_estimate with the CPU tiling spelled out. */
    const fattn_tiling cpu = TILING(16, 64, 2, 0);
    fattn_memory_report e = FATTN_MEMORY_REPORT_INIT;
    assert_int_equal(fattn_memory_estimate(&d, &cpu, &e), FATTN_OK);
    assert_int_equal(e.flash_bytes, r.flash_bytes);
    assert_int_equal(e.tile_bytes, r.tile_bytes);

    /* The context's tile parameters win over the backend defaults: tiles 32 x 32:
     * tile = (32+64)*32*4 + 32*32*4 + 32*32*4 + 32*2*4 = 12288 + 4096 + 4096 + 256 = 20736
     * groups = min(2, 2*ceil(128/32) = 8) = 2; flash = 20736*2 + 2048 = 43520 */
    assert_int_equal(fattn_context_set_param(ctx, FATTN_PARAM_TILE_Q, 32), FATTN_OK);
    assert_int_equal(fattn_context_set_param(ctx, FATTN_PARAM_TILE_KV, 32), FATTN_OK);
    assert_int_equal(fattn_context_memory_report(ctx, &d, &r), FATTN_OK);
    assert_int_equal(r.tile_bytes, 20736);
    assert_int_equal(r.groups, 2);
    assert_int_equal(r.flash_bytes, 43520);
    /* One of them only: tile_q 32, tile_kv back to the default 64:
     * tile = (32+128)*32*4 + 32*64*4 + 32*32*4 + 32*2*4 = 20480 + 8192 + 4096 + 256 = 33024
     * flash = 33024*2 + 2048 = 68096 */
    assert_int_equal(fattn_context_set_param(ctx, FATTN_PARAM_TILE_KV, 0), FATTN_OK);
    assert_int_equal(fattn_context_memory_report(ctx, &d, &r), FATTN_OK);
    assert_int_equal(r.tile_bytes, 33024);
    assert_int_equal(r.flash_bytes, 68096);
    assert_int_equal(fattn_context_set_param(ctx, FATTN_PARAM_TILE_Q, 0), FATTN_OK);
    assert_int_equal(fattn_context_memory_report(ctx, &d, &r), FATTN_OK);
    assert_int_equal(r.flash_bytes, 51456); /* the defaults again */

    /* Fewer groups than threads: Hq=1, Sq=16 with tq 16 is one group, so only
     * one tile set counts. tile (defaults) = 24704; stats = 16*8 = 128;
     * flash = 24704 + 128 = 24832 */
    d = make_desc(1, 1, 1, 16, 128, 32, FATTN_F32);
    assert_int_equal(fattn_context_memory_report(ctx, &d, &r), FATTN_OK);
    assert_int_equal(r.groups, 1);
    assert_int_equal(r.flash_bytes, 24832);

    /* Tiles the CPU planner refuses (over 1024) are its FATTN_ERR_UNSUPPORTED,
     * from the report as from a forward. */
    assert_int_equal(fattn_context_set_param(ctx, FATTN_PARAM_TILE_Q, 2048), FATTN_OK);
    assert_int_equal(fattn_context_memory_report(ctx, &d, &r), FATTN_ERR_UNSUPPORTED);
    assert_true(strlen(fattn_error_message(ctx)) > 0);
    assert_int_equal(fattn_context_set_param(ctx, FATTN_PARAM_TILE_Q, 0), FATTN_OK);
    assert_int_equal(fattn_context_memory_report(ctx, &d, &r), FATTN_OK);
    assert_int_equal(r.groups, 1);

    /* The report counts the flops of the causal alignment asked for:
     * B=1, Hq=1, D=32, Sq=16, Sk=128. Bottom-right: rows see 113..128 keys =
     * 16*(113+128)/2 = 1928 pairs, flops = 4*32*1928 = 246784. Top-left: rows
     * see 1..16 = 136 pairs, flops = 4*32*136 = 17408. Bytes do not change. */
    d.causal = FATTN_CAUSAL_BOTTOM_RIGHT;
    assert_int_equal(fattn_context_memory_report(ctx, &d, &r), FATTN_OK);
    assert_near(r.flops, 246784.0);
    assert_int_equal(r.flash_bytes, 24832);
    d.causal = FATTN_CAUSAL_TOP_LEFT;
    assert_int_equal(fattn_context_memory_report(ctx, &d, &r), FATTN_OK);
    assert_near(r.flops, 17408.0);
    assert_int_equal(r.flash_bytes, 24832);
    d.causal = (fattn_causal)3;
    assert_int_equal(fattn_context_memory_report(ctx, &d, &r), FATTN_ERR_INVALID_ARGUMENT);

    /* An invalid description is the validation status, with the message on ctx. */
    d = make_desc(1, 3, 2, 16, 16, 32, FATTN_F32);
    assert_int_equal(fattn_context_memory_report(ctx, &d, &r), FATTN_ERR_HEADS);
    assert_true(strlen(fattn_error_message(ctx)) > 0);
    d = make_desc(1, 1, 1, 16, 16, 0, FATTN_F32);
    assert_int_equal(fattn_context_memory_report(ctx, &d, &r), FATTN_ERR_HEAD_DIM);
    assert_int_equal(fattn_context_memory_report(ctx, NULL, &r), FATTN_ERR_NULL_POINTER);
    d = make_desc(1, 1, 1, 16, 16, 32, FATTN_F32);
    assert_int_equal(fattn_context_memory_report(ctx, &d, NULL), FATTN_ERR_NULL_POINTER);
    assert_int_equal(fattn_context_memory_report(NULL, &d, &r), FATTN_ERR_NULL_POINTER);

    fattn_context_free(ctx);
    unsetenv("FATTN_CPU_THREADS");
    unsetenv("FATTN_CPU_ISA");
}

static void test_context_report_thread_count(void **state) {
    (void)state;
    /* The resident-group count follows FATTN_CPU_THREADS: with 5 threads and
     * B=1, Hq=2, Sq=128 (16 groups of 16 rows) five tile sets count.
     * flash = 24704*5 + 2048 = 123520 + 2048 = 125568 */
    setenv("FATTN_CPU_THREADS", "5", 1);
    setenv("FATTN_CPU_ISA", "portable", 1); /* 16-row tiles, as above */
    fattn_context *ctx = NULL;
    assert_int_equal(fattn_context_create(FATTN_BACKEND_CPU, 0, &ctx), FATTN_OK);
    const fattn_attention_desc d = make_desc(1, 2, 1, 128, 128, 32, FATTN_F32);
    fattn_memory_report r = FATTN_MEMORY_REPORT_INIT;
    assert_int_equal(fattn_context_memory_report(ctx, &d, &r), FATTN_OK);
    assert_int_equal(r.groups, 5);
    assert_int_equal(r.flash_bytes, 125568);
    fattn_context_free(ctx);
    unsetenv("FATTN_CPU_THREADS");
    unsetenv("FATTN_CPU_ISA");
}

static int teardown_env(void **state) {
    (void)state;
    /* Also after a failed assertion, so one test cannot leak its setting. */
    unsetenv("FATTN_CPU_THREADS");
    return 0;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tiny_f32),
        cmocka_unit_test(test_gqa_f16),
        cmocka_unit_test(test_partial_last_tile),
        cmocka_unit_test(test_null_tiling_defaults_to_64),
        cmocka_unit_test(test_causal_flops),
        cmocka_unit_test(test_causal_flops_top_left),
        cmocka_unit_test(test_empty_kv),
        cmocka_unit_test(test_savings_grow_with_length),
        cmocka_unit_test(test_overflow),
        cmocka_unit_test(test_overflow_naive_kv_factor),
        cmocka_unit_test(test_invalid_desc),
        cmocka_unit_test_teardown(test_context_report_cpu, teardown_env),
        cmocka_unit_test_teardown(test_context_report_thread_count, teardown_env),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

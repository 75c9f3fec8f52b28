/* Context parallelism (fattn.h, "Context parallelism") without GPUs: the
 * ranks run in this process on the CPU backend (src/cp.c's in-process
 * driver, the same step machine fattn_cp_forward drives over NCCL).
 *   1. The step plan (cp_plan_step) covers every visible (query, key) pair
 *      of the whole sequence exactly once and no hidden one, for R = 1..7,
 *      both layouts, causal or not, and windows of every kind: counted pair
 *      by pair against the global mask.
 *   2. Numbers: a sequence split into R = 1..5 slices (fattn_cp_shard),
 *      computed rank by rank (ring and all-gather) and put back together,
 *      equals the single fattn_forward over the whole sequence and this
 *      file's double reference, causal and not, zigzag and contiguous, with
 *      GQA, windows, softcap, sinks, head_dim_v != head_dim, the lse and
 *      f32/f16/bf16. Outputs start poisoned.
 *      The CPU runs every case; CUDA and OpenCL (several ranks on one
 *      device) run them too where present, a visible skip elsewhere.
 *   3. Bad calls get specific statuses; the NCCL entry point refuses a
 *      CPU context. */
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

#include "cp.h"
#include "fattn.h"
#include "half.h"
#include "test_backend.h"
#include "test_util.h"

/* ---- 1. The plan ---------------------------------------------------------------- */

static int global_visible(int64_t i, int64_t j, cp_mask m) {
    return (m.left < 0 || j >= i - m.left) && (m.right < 0 || j <= i + m.right);
}

/* Whether (i, j) in a call's own rows is visible by fattn.h's rules. */
static int call_visible(const cp_call *c, int64_t i, int64_t j) {
    const int64_t w = c->k_len - c->q_len;
    if (c->causal && j > i + w) return 0;
    if (c->left >= 0 && j < i + w - c->left) return 0;
    if (c->right >= 0 && j > i + w + c->right) return 0;
    return 1;
}

static void plan_case(fattn_cp_layout layout, int R, int64_t L, cp_mask m) {
    const int64_t N = R * L;
    unsigned char *seen = calloc((size_t)(N * N), 1);
    assert_non_null(seen);
    for (int r = 0; r < R; r++) {
        cp_chunk qc[2], kc[2];
        const int nq = cp_chunks(layout, R, r, L, qc);
        int sinks_rows = 0;
        for (int s = 0; s < R; s++) {
            const int src = (r - s + R) % R;
            const int nk = cp_chunks(layout, R, src, L, kc);
            cp_call calls[CP_MAX_CALLS];
            const int n = cp_plan_step(layout, R, r, src, L, m, calls);
            assert_true(n >= 0 && n <= CP_MAX_CALLS);
            for (int c = 0; c < n; c++) {
                const cp_call *x = &calls[c];
                assert_true(x->q_len >= 1 && x->k_len >= 1 && x->q_row >= 0 && x->k_row >= 0);
                assert_true(x->q_row + x->q_len <= L && x->k_row + x->k_len <= L);
                assert_true(x->left >= -1 && x->right >= -1);
                if (x->sinks) sinks_rows += (int)x->q_len;
                for (int64_t i = 0; i < x->q_len; i++)
                    for (int64_t j = 0; j < x->k_len; j++) {
                        if (!call_visible(x, i, j)) continue;
                        /* Local rows to global positions through the chunks. */
                        const int64_t li = x->q_row + i, lj = x->k_row + j;
                        int64_t gi = -1, gj = -1;
                        for (int a = 0; a < nq; a++)
                            if (li >= qc[a].local0 && li < qc[a].local0 + qc[a].len)
                                gi = qc[a].global0 + li - qc[a].local0;
                        for (int b = 0; b < nk; b++)
                            if (lj >= kc[b].local0 && lj < kc[b].local0 + kc[b].len)
                                gj = kc[b].global0 + lj - kc[b].local0;
                        assert_true(gi >= 0 && gj >= 0);
                        seen[gi * N + gj]++;
                    }
            }
        }
        /* The sink joins each of the rank's rows once. */
        assert_int_equal(sinks_rows, (int)L);
    }
    for (int64_t i = 0; i < N; i++)
        for (int64_t j = 0; j < N; j++)
            if (seen[i * N + j] != global_visible(i, j, m)) {
                print_error("layout %d R %d L %lld window (%lld, %lld): pair (%lld, %lld) "
                            "covered %d times\n",
                            (int)layout, R, (long long)L, (long long)m.left, (long long)m.right,
                            (long long)i, (long long)j, seen[i * N + j]);
                free(seen);
                fail();
            }
    free(seen);
}

static void plan_covers_each_pair_once(void **state) {
    (void)state;
    const int64_t sides[] = {-1, 0, 1, 2, 3, 5, 8, 13, 40};
    const int ns = (int)(sizeof sides / sizeof sides[0]);
    for (int lay = 0; lay < 2; lay++)
        for (int R = 1; R <= 7; R++)
            for (int64_t L = 2; L <= 10; L += lay ? 2 : 3)
                for (int a = 0; a < ns; a++)
                    for (int b = 0; b < ns; b++)
                        plan_case(lay ? FATTN_CP_ZIGZAG : FATTN_CP_CONTIGUOUS, R, L,
                                  (cp_mask){sides[a], sides[b]});
}

/* The zigzag causal steps are one call each (the layout's point). */
static void plan_zigzag_causal_is_one_call_per_step(void **state) {
    (void)state;
    for (int R = 2; R <= 8; R++)
        for (int r = 0; r < R; r++)
            for (int s = 0; s < R; s++) {
                cp_call c[CP_MAX_CALLS];
                const int n = cp_plan_step(FATTN_CP_ZIGZAG, R, r, (r - s + R) % R, 64,
                                           (cp_mask){-1, 0}, c);
                assert_int_equal(n, 1);
                assert_int_equal(c[0].causal, s == 0);
                assert_int_equal(c[0].q_len * c[0].k_len, s == 0 ? 64 * 64 : 64 * 32);
            }
}

/* ---- 2. Numbers ------------------------------------------------------------------ */

typedef struct cpcase {
    const char *name;
    int64_t batch, hq, hkv, d, dv, L; /* L: tokens per rank */
    int causal;
    int64_t wl, wr;
    float softcap;
    int sinks;
} cpcase;

static const cpcase cases[] = {
    {"plain", 1, 2, 2, 16, 16, 14, 0, -1, -1, 0.f, 0},
    {"causal", 2, 2, 2, 24, 24, 18, 1, -1, -1, 0.f, 0},
    {"causal GQA 4/1, lse", 1, 4, 1, 32, 32, 22, 1, -1, -1, 0.f, 0},
    {"window 5/2", 1, 2, 1, 16, 16, 16, 0, 5, 2, 0.f, 0},
    {"causal window 9, softcap, sinks", 1, 3, 3, 40, 40, 26, 1, 9, -1, 3.f, 1},
    {"window 0/0", 1, 2, 2, 8, 8, 10, 0, 0, 0, 0.f, 0},
    {"window 1/0 sinks", 1, 2, 1, 8, 8, 12, 0, 1, 0, 0.f, 1},
    {"window wider than the sequence", 1, 2, 2, 16, 16, 10, 1, 500, -1, 0.f, 0},
    {"head_dim_v 24 of 40, causal", 1, 2, 1, 40, 24, 14, 1, -1, -1, 0.f, 0},
    {"softcap 1 non-causal", 2, 2, 2, 16, 16, 8, 0, -1, -1, 1.f, 1},
};

static const fattn_dtype dtypes[] = {FATTN_F32, FATTN_F16, FATTN_BF16};

static void put(void *base, fattn_dtype t, size_t i, float x) {
    if (t == FATTN_F32) ((float *)base)[i] = x;
    else if (t == FATTN_F16) ((uint16_t *)base)[i] = fattn_f32_to_f16(x);
    else ((uint16_t *)base)[i] = fattn_f32_to_bf16(x);
}

static double get(const void *base, fattn_dtype t, size_t i) {
    if (t == FATTN_F32) return ((const float *)base)[i];
    if (t == FATTN_F16) return fattn_f16_to_f32(((const uint16_t *)base)[i]);
    return fattn_bf16_to_f32(((const uint16_t *)base)[i]);
}

/* The double reference over the whole sequence (fattn.h's formula):
 * [B, H, N, d] arrays, row i sees j with i - wl <= j <= i + wr (causal:
 * right 0). */
static void ref(const cpcase *c, fattn_dtype t, int64_t N, const void *q, const void *k,
                const void *v, const float *sinks, double *o, double *lse) {
    const double scale = 1.0 / sqrt((double)c->d);
    const int64_t wr = c->causal ? 0 : c->wr;
    double *s = malloc(sizeof(double) * (size_t)N);
    for (int64_t b = 0; b < c->batch; b++)
        for (int64_t h = 0; h < c->hq; h++) {
            const int64_t hk = h / (c->hq / c->hkv);
            for (int64_t i = 0; i < N; i++) {
                double m = -INFINITY;
                for (int64_t j = 0; j < N; j++) {
                    s[j] = -INFINITY;
                    if ((c->wl >= 0 && j < i - c->wl) || (wr >= 0 && j > i + wr)) continue;
                    double x = 0;
                    for (int64_t e = 0; e < c->d; e++)
                        x += get(q, t, (size_t)(((b * c->hq + h) * N + i) * c->d + e)) *
                             get(k, t, (size_t)(((b * c->hkv + hk) * N + j) * c->d + e));
                    x *= scale;
                    if (c->softcap > 0) x = c->softcap * tanh(x / c->softcap);
                    s[j] = x;
                    if (x > m) m = x;
                }
                const double sink = c->sinks ? sinks[h] : -INFINITY;
                const double mm = m > sink ? m : sink;
                double l = sink == -INFINITY ? 0 : exp(sink - mm);
                double *out = o + ((b * c->hq + h) * N + i) * c->dv;
                for (int64_t e = 0; e < c->dv; e++) out[e] = 0;
                for (int64_t j = 0; j < N; j++) {
                    if (s[j] == -INFINITY) continue;
                    const double p = exp(s[j] - mm);
                    l += p;
                    for (int64_t e = 0; e < c->dv; e++)
                        out[e] += p * get(v, t, (size_t)(((b * c->hkv + hk) * N + j) * c->dv + e));
                }
                for (int64_t e = 0; e < c->dv; e++) out[e] = l > 0 ? out[e] / l : 0;
                lse[(b * c->hq + h) * N + i] = l > 0 ? mm + log(l) : -INFINITY;
            }
        }
    free(s);
}

static fattn_buffer *upload(fattn_context *ctx, const void *p, size_t bytes) {
    fattn_buffer *b = NULL;
    assert_int_equal(fattn_buffer_alloc(ctx, bytes, &b), FATTN_OK);
    if (p) assert_int_equal(fattn_buffer_write(b, 0, p, bytes), FATTN_OK);
    return b;
}

static void poison(fattn_buffer *b, size_t bytes) {
    unsigned char *p = malloc(bytes);
    memset(p, 0xff, bytes); /* NaN in every dtype */
    assert_int_equal(fattn_buffer_write(b, 0, p, bytes), FATTN_OK);
    free(p);
}

static void run_case(fattn_context *ctx, const cpcase *c, fattn_dtype t, int R,
                     fattn_cp_layout layout, fattn_cp_transfer transfer, uint64_t seed) {
    const int64_t N = R * c->L, L = c->L;
    const size_t es = fattn_dtype_size(t);
    const size_t nq = (size_t)(c->batch * c->hq * N * c->d), nk = (size_t)(c->batch * c->hkv * N * c->d),
                 nv = (size_t)(c->batch * c->hkv * N * c->dv), no = (size_t)(c->batch * c->hq * N * c->dv),
                 nl = (size_t)(c->batch * c->hq * N);
    void *hq = malloc(nq * es), *hk = malloc(nk * es), *hv = malloc(nv * es);
    float sinks[8];
    for (size_t i = 0; i < nq; i++) put(hq, t, i, 2.f * uniform(&seed));
    for (size_t i = 0; i < nk; i++) put(hk, t, i, 2.f * uniform(&seed));
    for (size_t i = 0; i < nv; i++) put(hv, t, i, uniform(&seed));
    for (int i = 0; i < 8; i++) sinks[i] = 0.5f * uniform(&seed) + 1.f;
    double *ro = malloc(sizeof(double) * no), *rl = malloc(sizeof(double) * nl);
    ref(c, t, N, hq, hk, hv, sinks, ro, rl);

    fattn_attention_desc d = FATTN_ATTENTION_DESC_INIT;
    d.batch = c->batch, d.heads_q = c->hq, d.heads_kv = c->hkv, d.head_dim = c->d;
    d.head_dim_v = c->dv == c->d ? 0 : c->dv;
    d.dtype = t;
    d.causal = c->causal ? FATTN_CAUSAL_BOTTOM_RIGHT : FATTN_CAUSAL_NONE;
    fattn_mask_desc m = FATTN_MASK_DESC_INIT;
    m.window_left = c->wl, m.window_right = c->wr, m.softcap = c->softcap;
    fattn_buffer *sb = upload(ctx, sinks, sizeof sinks);
    fattn_tensor st = FATTN_TENSOR_INIT;
    st.buffer = sb, st.stride_head = 1;
    if (c->sinks) m.sinks = &st;
    const int has_mask = c->wl >= 0 || c->wr >= 0 || c->softcap > 0 || c->sinks;
    d.mask = has_mask ? &m : NULL;

    /* The single call over the whole sequence. */
    fattn_buffer *bq = upload(ctx, hq, nq * es), *bk = upload(ctx, hk, nk * es),
                 *bv = upload(ctx, hv, nv * es), *bo = upload(ctx, NULL, no * es),
                 *bl = upload(ctx, NULL, nl * 4);
    fattn_tensor tq, tk, tv, to, tl;
    assert_int_equal(fattn_tensor_init(bq, t, FATTN_LAYOUT_BHSD, c->batch, c->hq, N, c->d, 0, &tq), 0);
    assert_int_equal(fattn_tensor_init(bk, t, FATTN_LAYOUT_BHSD, c->batch, c->hkv, N, c->d, 0, &tk), 0);
    assert_int_equal(fattn_tensor_init(bv, t, FATTN_LAYOUT_BHSD, c->batch, c->hkv, N, c->dv, 0, &tv), 0);
    assert_int_equal(fattn_tensor_init(bo, t, FATTN_LAYOUT_BHSD, c->batch, c->hq, N, c->dv, 0, &to), 0);
    assert_int_equal(fattn_tensor_init_lse(bl, c->batch, c->hq, N, 0, &tl), 0);
    d.seq_q = d.seq_kv = N;
    assert_int_equal(fattn_forward(ctx, &d, &tq, &tk, &tv, &to, &tl), FATTN_OK);
    void *one_o = malloc(no * es);
    float *one_l = malloc(nl * 4);
    assert_int_equal(fattn_buffer_read(bo, 0, one_o, no * es), FATTN_OK);
    assert_int_equal(fattn_buffer_read(bl, 0, one_l, nl * 4), FATTN_OK);

    /* The ranks' slices (fattn_cp_shard), in BSHD so the layouts differ. */
    fattn_context *ctxs[8];
    fattn_buffer *lb[8][5];
    fattn_tensor lt[8][5];
    const fattn_tensor *pq[8], *pk[8], *pv[8], *po[8], *pl[8];
    const int64_t heads[5] = {c->hq, c->hkv, c->hkv, c->hq, c->hq},
                  dims[5] = {c->d, c->d, c->dv, c->dv, 1};
    for (int r = 0; r < R; r++) {
        ctxs[r] = ctx;
        for (int x = 0; x < 5; x++) {
            const size_t bytes = (size_t)(c->batch * heads[x] * L * dims[x]) * (x == 4 ? 4 : es);
            lb[r][x] = upload(ctx, NULL, bytes);
            if (x >= 3) poison(lb[r][x], bytes);
            if (x == 4)
                assert_int_equal(fattn_tensor_init_lse(lb[r][x], c->batch, c->hq, L, 0, &lt[r][x]), 0);
            else
                assert_int_equal(fattn_tensor_init(lb[r][x], t, FATTN_LAYOUT_BSHD, c->batch,
                                                   heads[x], L, dims[x], 0, &lt[r][x]), 0);
        }
        const fattn_tensor *whole[3] = {&tq, &tk, &tv};
        for (int x = 0; x < 3; x++)
            assert_int_equal(fattn_cp_shard(ctx, layout, R, r, c->batch, heads[x], N, dims[x],
                                            whole[x], &lt[r][x], 1), FATTN_OK);
        pq[r] = &lt[r][0], pk[r] = &lt[r][1], pv[r] = &lt[r][2], po[r] = &lt[r][3], pl[r] = &lt[r][4];
    }
    fattn_cp_desc cd = FATTN_CP_DESC_INIT;
    cd.layout = layout;
    cd.transfer = transfer;
    fattn_cp_info info = FATTN_CP_INFO_INIT;
    d.seq_q = d.seq_kv = L;
    const fattn_status s = fattn_cp_forward_local(ctxs, R, &cd, &d, pq, pk, pv, po, pl, &info);
    if (s != FATTN_OK) print_error("%s: %s\n", c->name, fattn_error_message(ctx));
    assert_int_equal(s, FATTN_OK);
    if (transfer != FATTN_CP_TRANSFER_AUTO) assert_int_equal(info.transfer, transfer);

    /* Back into the whole sequence: scatter every rank's O into one
     * poisoned tensor (fattn_cp_shard), and the lse through the slices. */
    poison(bo, no * es);
    float *cp_l = malloc(nl * 4), *part = malloc((size_t)(c->batch * c->hq * L) * 4);
    for (size_t i = 0; i < nl; i++) cp_l[i] = NAN;
    for (int r = 0; r < R; r++) {
        assert_int_equal(fattn_cp_shard(ctx, layout, R, r, c->batch, c->hq, N, c->dv, &to,
                                        &lt[r][3], 0), FATTN_OK);
        int64_t start[2], len[2];
        int n = 0;
        assert_int_equal(fattn_cp_slices(layout, R, r, N, start, len, &n), FATTN_OK);
        assert_int_equal(fattn_buffer_read(lb[r][4], 0, part, (size_t)(c->batch * c->hq * L) * 4), 0);
        for (int64_t bh = 0; bh < c->batch * c->hq; bh++)
            for (int64_t row = 0, g = 0; g < n; g++)
                for (int64_t i = 0; i < len[g]; i++, row++)
                    cp_l[bh * N + start[g] + i] = part[bh * L + row];
    }
    void *cp_o = malloc(no * es);
    assert_int_equal(fattn_buffer_read(bo, 0, cp_o, no * es), FATTN_OK);

    /* Tolerances: f32 close to the single call; f16/bf16 within a few
     * roundings of the dtype (the merges round once each). */
    const double tol_one = t == FATTN_F32 ? 2e-5 : t == FATTN_F16 ? 4e-3 : 3e-2;
    const double tol_ref = t == FATTN_F32 ? 1e-4 : t == FATTN_F16 ? 6e-3 : 4e-2;
    double e_one = 0, e_ref = 0, el = 0;
    for (size_t i = 0; i < no; i++) {
        const double x = get(cp_o, t, i);
        if (!(fabs(x - get(one_o, t, i)) <= e_one)) e_one = isnan(x) ? INFINITY : fabs(x - get(one_o, t, i));
        if (!(fabs(x - ro[i]) <= e_ref)) e_ref = isnan(x) ? INFINITY : fabs(x - ro[i]);
    }
    for (size_t i = 0; i < nl; i++) {
        const double dl = isinf(rl[i]) && cp_l[i] == rl[i] ? 0 : fabs(cp_l[i] - rl[i]);
        if (!(dl <= el)) el = isnan(dl) ? INFINITY : dl;
    }
    if (!(e_one <= tol_one && e_ref <= tol_ref && el <= 1e-3))
        print_error("%s %s R %d %s %s: O vs one call %g, vs reference %g, lse %g\n", c->name,
                    fattn_dtype_name(t), R, layout ? "zigzag" : "contiguous",
                    info.transfer == FATTN_CP_TRANSFER_RING ? "ring" : "all-gather", e_one, e_ref, el);
    assert_true(e_one <= tol_one);
    assert_true(e_ref <= tol_ref);
    assert_true(el <= 1e-3);

    for (int r = 0; r < R; r++)
        for (int x = 0; x < 5; x++) fattn_buffer_free(lb[r][x]);
    fattn_buffer_free(bq), fattn_buffer_free(bk), fattn_buffer_free(bv), fattn_buffer_free(bo);
    fattn_buffer_free(bl), fattn_buffer_free(sb);
    free(hq), free(hk), free(hv), free(ro), free(rl), free(one_o), free(one_l), free(cp_l);
    free(part), free(cp_o);
}

/* Every case on `kind`'s first device, for the rank counts in Rs. */
static void run_all(fattn_backend_kind kind, const int *Rs, int nR) {
    fattn_backend_info info;
    test_use_backend(kind, &info);
    fattn_context *ctx = NULL;
    assert_int_equal(fattn_context_create(kind, 0, &ctx), FATTN_OK);
    uint64_t seed = 0x5eed0c9u;
    int runs = 0;
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++)
        for (int ri = 0; ri < nR; ri++)
            for (int lay = 0; lay < 2; lay++) {
                const cpcase *c = &cases[ci];
                const int R = Rs[ri];
                if (lay && c->L % 2) continue;
                /* Every dtype on some ranks, f32 on all; both transfers. */
                const fattn_dtype t = dtypes[(ci + (size_t)R + (size_t)lay) % 3];
                const fattn_cp_transfer tr =
                    (R + lay) % 3 == 0 ? FATTN_CP_TRANSFER_ALLGATHER
                    : (R + lay) % 3 == 1 ? FATTN_CP_TRANSFER_RING : FATTN_CP_TRANSFER_AUTO;
                run_case(ctx, c, t, R, lay ? FATTN_CP_ZIGZAG : FATTN_CP_CONTIGUOUS, tr, seed++);
                if (t != FATTN_F32)
                    run_case(ctx, c, FATTN_F32, R, lay ? FATTN_CP_ZIGZAG : FATTN_CP_CONTIGUOUS, tr,
                             seed++);
                runs++;
            }
    print_message("%s: %d splits checked (%s)\n", info.name, runs, fattn_context_device_name(ctx));
    fattn_context_free(ctx);
}

static void matches_one_call_cpu(void **state) {
    (void)state;
    const int Rs[] = {1, 2, 3, 4, 5};
    run_all(FATTN_BACKEND_CPU, Rs, 5);
}

/* The GPU backends stand in for ranks too (several ranks on one device,
 * slices through the host): their forward, combine and shard kernels under
 * the step machine. */
static void matches_one_call_cuda(void **state) {
    (void)state;
    const int Rs[] = {1, 2, 3, 5};
    run_all(FATTN_BACKEND_CUDA, Rs, 4);
}

static void matches_one_call_opencl(void **state) {
    (void)state;
    const int Rs[] = {2, 3};
    run_all(FATTN_BACKEND_OPENCL, Rs, 2);
}

/* ---- 3. Bad calls ----------------------------------------------------------------- */

static void bad_calls(void **state) {
    (void)state;
    fattn_context *ctx = NULL;
    assert_int_equal(fattn_context_create(FATTN_BACKEND_CPU, 0, &ctx), FATTN_OK);
    fattn_cp *cp = (fattn_cp *)1;
    int dummy = 0;
    assert_int_equal(fattn_cp_create_nccl(ctx, &dummy, &cp), FATTN_ERR_UNSUPPORTED);
    assert_null(cp);
    assert_true(msg_has(fattn_error_message(ctx), "NCCL"));
    assert_int_equal(fattn_cp_create_nccl(ctx, NULL, &cp), FATTN_ERR_NULL_POINTER);
    assert_int_equal(fattn_cp_create_nccl(NULL, &dummy, &cp), FATTN_ERR_NULL_POINTER);
    assert_int_equal(fattn_cp_forward(NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL),
                     FATTN_ERR_NULL_POINTER);
    fattn_cp_free(NULL);

    int64_t st[2], ln[2];
    int n = 0;
    assert_int_equal(fattn_cp_slices(FATTN_CP_ZIGZAG, 3, 1, 12, st, ln, &n), FATTN_OK);
    assert_int_equal(n, 2);
    assert_true(st[0] == 2 && ln[0] == 2 && st[1] == 8 && ln[1] == 2);
    assert_int_equal(fattn_cp_slices(FATTN_CP_CONTIGUOUS, 3, 2, 12, st, ln, &n), FATTN_OK);
    assert_true(n == 1 && st[0] == 8 && ln[0] == 4);
    assert_int_equal(fattn_cp_slices(FATTN_CP_ZIGZAG, 3, 1, 9, st, ln, &n), FATTN_ERR_INVALID_SIZE);
    assert_int_equal(fattn_cp_slices(FATTN_CP_CONTIGUOUS, 3, 3, 12, st, ln, &n),
                     FATTN_ERR_INVALID_ARGUMENT);
    assert_int_equal(fattn_cp_slices(FATTN_CP_CONTIGUOUS, 0, 0, 12, st, ln, &n),
                     FATTN_ERR_INVALID_ARGUMENT);
    assert_int_equal(fattn_cp_slices((fattn_cp_layout)7, 2, 0, 12, st, ln, &n),
                     FATTN_ERR_INVALID_ARGUMENT);
    assert_int_equal(fattn_cp_slices(FATTN_CP_ZIGZAG, 2, 0, 12, NULL, ln, &n),
                     FATTN_ERR_NULL_POINTER);

    /* The in-process driver shares cp_prepare's checks with fattn_cp_forward. */
    const int64_t L = 8;
    fattn_buffer *b = upload(ctx, NULL, 4096 * 4);
    fattn_tensor q, k, v, o, kgap;
    assert_int_equal(fattn_tensor_init(b, FATTN_F32, FATTN_LAYOUT_BHSD, 1, 2, L, 8, 0, &q), 0);
    assert_int_equal(fattn_tensor_init(b, FATTN_F32, FATTN_LAYOUT_BHSD, 1, 2, L, 8, 128, &k), 0);
    assert_int_equal(fattn_tensor_init(b, FATTN_F32, FATTN_LAYOUT_BHSD, 1, 2, L, 8, 256, &v), 0);
    assert_int_equal(fattn_tensor_init(b, FATTN_F32, FATTN_LAYOUT_BHSD, 1, 2, L, 8, 512, &o), 0);
    kgap = k;
    kgap.stride_seq = 16, kgap.stride_head = 16 * L; /* every other row: a gap */
    fattn_context *ctxs[2] = {ctx, ctx};
    const fattn_tensor *pq[2] = {&q, &q}, *pk[2] = {&k, &k}, *pv[2] = {&v, &v}, *po[2] = {&o, &o};
    const fattn_tensor *pkgap[2] = {&kgap, &kgap};
    fattn_attention_desc d = FATTN_ATTENTION_DESC_INIT;
    d.batch = 1, d.heads_q = d.heads_kv = 2, d.head_dim = 8, d.dtype = FATTN_F32;
    d.seq_q = d.seq_kv = L;
    fattn_cp_desc cd = FATTN_CP_DESC_INIT;
    /* o overlaps between the two ranks here, but both ranks are one
     * context: a refused call must fail before it runs. */
    d.seq_kv = L - 1;
    assert_int_equal(fattn_cp_forward_local(ctxs, 2, &cd, &d, pq, pk, pv, po, NULL, NULL),
                     FATTN_ERR_INVALID_SIZE);
    assert_true(msg_has(fattn_error_message(ctx), "equal"));
    d.seq_q = d.seq_kv = L - 1;
    cd.layout = FATTN_CP_ZIGZAG;
    assert_int_equal(fattn_cp_forward_local(ctxs, 2, &cd, &d, pq, pk, pv, po, NULL, NULL),
                     FATTN_ERR_INVALID_SIZE);
    assert_true(msg_has(fattn_error_message(ctx), "zigzag"));
    d.seq_q = d.seq_kv = L;
    cd.layout = (fattn_cp_layout)3;
    assert_int_equal(fattn_cp_forward_local(ctxs, 2, &cd, &d, pq, pk, pv, po, NULL, NULL),
                     FATTN_ERR_INVALID_ARGUMENT);
    assert_true(msg_has(fattn_error_message(ctx), "layout"));
    cd.layout = FATTN_CP_ZIGZAG;
    cd.transfer = (fattn_cp_transfer)9;
    assert_int_equal(fattn_cp_forward_local(ctxs, 2, &cd, &d, pq, pk, pv, po, NULL, NULL),
                     FATTN_ERR_INVALID_ARGUMENT);
    assert_true(msg_has(fattn_error_message(ctx), "transfer"));
    cd.transfer = FATTN_CP_TRANSFER_RING;
    assert_int_equal(fattn_cp_forward_local(ctxs, 2, &cd, &d, pq, pkgap, pv, po, NULL, NULL),
                     FATTN_ERR_UNSUPPORTED);
    assert_true(msg_has(fattn_error_message(ctx), "dense"));
    float slope[2] = {0.5f, 0.25f};
    fattn_buffer *sb = upload(ctx, slope, sizeof slope);
    fattn_tensor ts = FATTN_TENSOR_INIT;
    ts.buffer = sb, ts.stride_head = 1;
    fattn_mask_desc m = FATTN_MASK_DESC_INIT;
    m.alibi_slopes = &ts;
    d.mask = &m;
    assert_int_equal(fattn_cp_forward_local(ctxs, 2, &cd, &d, pq, pk, pv, po, NULL, NULL),
                     FATTN_ERR_UNSUPPORTED);
    assert_true(msg_has(fattn_error_message(ctx), "alibi_slopes"));
    m = (fattn_mask_desc)FATTN_MASK_DESC_INIT;
    m.window_left = -2;
    assert_int_equal(fattn_cp_forward_local(ctxs, 2, &cd, &d, pq, pk, pv, po, NULL, NULL),
                     FATTN_ERR_INVALID_ARGUMENT);
    d.mask = NULL;
    d.head_dim = 300;
    assert_int_equal(fattn_cp_forward_local(ctxs, 2, &cd, &d, pq, pk, pv, po, NULL, NULL),
                     FATTN_ERR_HEAD_DIM);
    d.head_dim = 8;
    /* O too small for the slice: the tensors are checked whole first. */
    fattn_tensor osmall = o;
    osmall.offset = 4096 - 10;
    const fattn_tensor *pos[2] = {&osmall, &osmall};
    assert_int_equal(fattn_cp_forward_local(ctxs, 2, &cd, &d, pq, pk, pv, pos, NULL, NULL),
                     FATTN_ERR_BUFFER_TOO_SMALL);
    /* fattn_cp_shard: a whole tensor of the wrong length is refused. */
    assert_int_equal(fattn_cp_shard(ctx, FATTN_CP_CONTIGUOUS, 2, 0, 1, 2, 7, 8, &q, &k, 1),
                     FATTN_ERR_INVALID_SIZE);
    assert_int_equal(fattn_cp_shard(ctx, FATTN_CP_CONTIGUOUS, 2, 0, 1, 2, 16, 8, NULL, &k, 1),
                     FATTN_ERR_NULL_POINTER);
    fattn_buffer_free(sb);
    fattn_buffer_free(b);
    fattn_context_free(ctx);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(plan_covers_each_pair_once),
        cmocka_unit_test(plan_zigzag_causal_is_one_call_per_step),
        cmocka_unit_test(matches_one_call_cpu),
        cmocka_unit_test(matches_one_call_cuda),
        cmocka_unit_test(matches_one_call_opencl),
        cmocka_unit_test(bad_calls),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* See harness.h. Tolerances: inputs are quantised to the dtype before the
 * reference sees them, so only the backend's own arithmetic is measured.
 *   f32  2e-5: float32 sums of up to ~1000 terms of size <= 1 (sqrt(n)*u ~ 4e-6)
 *              with exp() error, x5 margin.
 *   f16  1e-3: O is rounded to f16 (half-ulp 2.4e-4 below 1) and GPU kernels
 *              round P to f16 before the PV product (relative 2^-11 per term).
 *   bf16 8e-3: the same two roundings at bf16's 2^-8 (half-ulp 2e-3 below 1).
 *   tf32 3e-3 (HARNESS_TF32, f32 data): the matrix units read Q, K, V and P
 *              with 10 mantissa bits, truncated (relative 2^-10 each, biased
 *              toward zero: a single key's O is V off by up to 9.8e-4); LSE
 *              2e-3, as its scores carry Q's and K's truncation (the
 *              emulation's worst on the matrix cases: O 9.4e-4, LSE 6.7e-4).
 * Score errors grow with the logits' size, so cases with large Q scale the
 * tolerance by Q's magnitude. LSE is computed from float32 scores in every
 * dtype: 1e-5 relative, likewise scaled. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "half.h"
#include "harness.h"
#include "reference.h"

/* Guard elements on each side of O and LSE, to catch writes past the view. */
enum { GUARD = 16 };

const char *harness_dtype_name(fattn_dtype t) { return fattn_dtype_name(t); }

double harness_tolerance(fattn_dtype t) {
    return t == FATTN_F32 ? 2e-5 : t == FATTN_F16 ? 1e-3 : 8e-3;
}

unsigned harness_tf32_flags(fattn_dtype t) {
    const char *on = getenv("FATTN_TEST_TF32");
    return t == FATTN_F32 && on && *on && strcmp(on, "0") != 0 ? FATTN_FLAG_ALLOW_TF32 : 0;
}

static int tf32_run(const fattn_attention_desc *d) {
    return d->dtype == FATTN_F32 && (d->flags & FATTN_FLAG_ALLOW_TF32);
}

double harness_tol(const fattn_attention_desc *d) {
    return tf32_run(d) ? HARNESS_TF32_TOL : harness_tolerance(d->dtype);
}

double harness_lse_tol(const fattn_attention_desc *d) {
    return tf32_run(d) ? HARNESS_TF32_LSE_TOL : 1e-5;
}

/* splitmix64: small, seedable, good enough for test data. */
static uint64_t next_u64(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static float uniform(uint64_t *s, float mag) {
    return mag * (float)((double)(next_u64(s) >> 11) * (2.0 / 9007199254740992.0) - 1.0);
}

void harness_put(void *base, fattn_dtype t, int64_t i, float x) {
    if (t == FATTN_F32)
        ((float *)base)[i] = x;
    else if (t == FATTN_F16)
        ((uint16_t *)base)[i] = fattn_f32_to_f16(x);
    else
        ((uint16_t *)base)[i] = fattn_f32_to_bf16(x);
}

fattn_attention_desc harness_desc(const fattn_case *c, fattn_dtype dtype) {
    fattn_attention_desc d = FATTN_ATTENTION_DESC_INIT;
    d.batch = c->batch;
    d.heads_q = c->heads_q;
    d.heads_kv = c->heads_kv;
    d.seq_q = c->seq_q;
    d.seq_kv = c->seq_kv;
    d.head_dim = c->head_dim;
    d.dtype = dtype;
    d.scale = c->scale;
    d.causal = c->causal;
    return d;
}

/* Geometry of one operand inside its host array. */
typedef struct geo {
    int64_t offset, sb, sh, ss;
} geo;

static geo dense(fattn_layout layout, int64_t H, int64_t S, int64_t D, int64_t offset) {
    geo g = {offset, H * S * D, 0, 0};
    if (layout == FATTN_LAYOUT_BSHD) {
        g.sh = D;
        g.ss = H * D;
    } else {
        g.sh = S * D;
        g.ss = D;
    }
    return g;
}

static int64_t extent(geo g, int64_t B, int64_t H, int64_t S, int64_t D) {
    if (S == 0) return 0;
    return g.offset + (B - 1) * g.sb + (H - 1) * g.sh + (S - 1) * g.ss + D;
}

typedef struct host_buf {
    void *data;
    int64_t elems;
    fattn_dtype dtype;
    fattn_buffer *dev;
} host_buf;

static fattn_status upload(fattn_context *ctx, host_buf *h) {
    size_t bytes = (size_t)h->elems * fattn_dtype_size(h->dtype);
    if (bytes == 0) return FATTN_OK;
    fattn_status st = fattn_buffer_alloc(ctx, bytes, &h->dev);
    return st != FATTN_OK ? st : fattn_buffer_write(h->dev, 0, h->data, bytes);
}

static fattn_tensor view(host_buf *h, fattn_dtype t, geo g) {
    fattn_tensor x = FATTN_TENSOR_INIT;
    x.buffer = h->dev;
    x.dtype = t;
    x.offset = g.offset;
    x.stride_batch = g.sb;
    x.stride_head = g.sh;
    x.stride_seq = g.ss;
    return x;
}

static ref_view ref_of(const host_buf *h, fattn_dtype t, geo g) {
    ref_view r = {h->data, t, g.offset, g.sb, g.sh, g.ss};
    return r;
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int is_nan_elem(const void *base, fattn_dtype t, int64_t i, double *val) {
    *val = t == FATTN_F32   ? ((const float *)base)[i]
           : t == FATTN_F16 ? fattn_f16_to_f32(((const uint16_t *)base)[i])
                            : fattn_bf16_to_f32(((const uint16_t *)base)[i]);
    return isnan(*val);
}

fattn_status harness_run(fattn_context *ctx, const fattn_case *c, fattn_dtype dt, uint64_t seed,
                         harness_path path, case_result *r) {
    const int64_t B = c->batch, Hq = c->heads_q, Hk = c->heads_kv, Sq = c->seq_q, Sk = c->seq_kv;
    const int64_t D = c->head_dim;
    const fattn_layout other =
        c->layout == FATTN_LAYOUT_BSHD ? FATTN_LAYOUT_BHSD : FATTN_LAYOUT_BSHD;
    enum { BQ, BK, BV, BO, BL, NBUF };
    host_buf hb[NBUF];
    geo gq, gk, gv, go, gl;
    memset(hb, 0, sizeof hb);
    memset(r, 0, sizeof *r);
    r->seed = seed;

    /* Inputs: where they live depends on the storage variant. */
    if (c->storage == STORE_PACKED_QKV) {
        /* [B, S, 3, H, D]: Q, K, V interleaved per token. */
        gq = (geo){0, Sq * 3 * Hq * D, D, 3 * Hq * D};
        gk = gq;
        gk.offset = Hq * D;
        gv = gq;
        gv.offset = 2 * Hq * D;
        hb[BQ].elems = B * Sq * 3 * Hq * D;
    } else {
        gq = dense(c->layout, Hq, Sq, D, 3);
        hb[BQ].elems = extent(gq, B, Hq, Sq, D);
        if (c->storage == STORE_KV_STRIDED) {
            gk = dense(other, Hk, Sk, D, 0);
            gv = (geo){5, 0, 0, 0}; /* V: layout's order with 7 padding elements per row */
            const int64_t row = D + 7;
            if (c->layout == FATTN_LAYOUT_BSHD) {
                gv.ss = Hk * row;
                gv.sh = row;
                gv.sb = Sk * Hk * row;
            } else {
                gv.ss = row;
                gv.sh = Sk * row;
                gv.sb = Hk * Sk * row;
            }
        } else {
            gk = dense(c->layout, Hk, Sk, D, 0);
            gv = dense(c->layout, Hk, Sk, D, 1);
        }
        hb[BK].elems = extent(gk, B, Hk, Sk, D);
        hb[BV].elems = extent(gv, B, Hk, Sk, D);
    }
    go = dense(c->layout, Hq, Sq, D, GUARD);
    gl = (geo){GUARD, Hq * Sq, Sq, 1};
    hb[BO].elems = extent(go, B, Hq, Sq, D) + GUARD;
    hb[BL].elems = GUARD + B * Hq * Sq + GUARD;
    for (int i = 0; i < NBUF; i++) hb[i].dtype = i == BL ? FATTN_F32 : dt;

    fattn_status st = FATTN_OK;
    double *ref_o = malloc((size_t)(B * Hq * Sq * D) * sizeof(double));
    double *ref_l = malloc((size_t)(B * Hq * Sq) * sizeof(double));
    for (int i = 0; i < NBUF; i++) {
        hb[i].data =
            malloc((size_t)(hb[i].elems ? hb[i].elems : 1) * fattn_dtype_size(hb[i].dtype));
        if (!hb[i].data) st = FATTN_ERR_OUT_OF_MEMORY;
    }
    if (!ref_o || !ref_l) st = FATTN_ERR_OUT_OF_MEMORY;
    if (st != FATTN_OK) goto done;

    /* Random inputs everywhere (padding too); outputs poisoned with all-ones
     * bytes, a NaN in every dtype. */
    uint64_t rng = seed;
    for (int64_t i = 0; i < hb[BQ].elems; i++)
        harness_put(hb[BQ].data, dt, i, uniform(&rng, c->q_magnitude));
    for (int b = BK; b <= BV; b++)
        for (int64_t i = 0; i < hb[b].elems; i++)
            harness_put(hb[b].data, dt, i, uniform(&rng, 1.0f));
    if (c->storage == STORE_PACKED_QKV) /* K and V share Q's array: keep K's magnitude 1 */
        for (int64_t i = 0; i < hb[BQ].elems; i++)
            if ((i / (Hq * D)) % 3 != 0) harness_put(hb[BQ].data, dt, i, uniform(&rng, 1.0f));
    memset(hb[BO].data, 0xff, (size_t)hb[BO].elems * fattn_dtype_size(dt));
    memset(hb[BL].data, 0xff, (size_t)hb[BL].elems * sizeof(float));

    for (int i = 0; i < NBUF && st == FATTN_OK; i++) st = upload(ctx, &hb[i]);
    if (st != FATTN_OK) goto done;

    const host_buf *qkv_host[3] = {&hb[BQ], c->storage == STORE_PACKED_QKV ? &hb[BQ] : &hb[BK],
                                   c->storage == STORE_PACKED_QKV ? &hb[BQ] : &hb[BV]};
    fattn_tensor tq = view(&hb[BQ], dt, gq);
    fattn_tensor tk = view((host_buf *)qkv_host[1], dt, gk);
    fattn_tensor tv = view((host_buf *)qkv_host[2], dt, gv);
    fattn_tensor to = view(&hb[BO], dt, go);
    fattn_tensor tl = view(&hb[BL], FATTN_F32, gl);
    fattn_attention_desc desc = harness_desc(c, dt);
    if (path == HARNESS_TF32) desc.flags |= FATTN_FLAG_ALLOW_TF32;

    double t0 = now();
    st = path == HARNESS_NAIVE ? fattn_forward_naive(ctx, &desc, &tq, &tk, &tv, &to, &tl)
                               : fattn_forward(ctx, &desc, &tq, &tk, &tv, &to, &tl);
    if (st == FATTN_OK) st = fattn_context_synchronize(ctx);
    r->seconds = now() - t0;
    if (st != FATTN_OK) goto done;
    if ((st = fattn_buffer_read(hb[BO].dev, 0, hb[BO].data,
                                (size_t)hb[BO].elems * fattn_dtype_size(dt))) ||
        (st = fattn_buffer_read(hb[BL].dev, 0, hb[BL].data, (size_t)hb[BL].elems * sizeof(float))))
        goto done;

    ref_view rq = ref_of(qkv_host[0], dt, gq), rk = ref_of(qkv_host[1], dt, gk),
             rv = ref_of(qkv_host[2], dt, gv);
    ref_attention(&desc, &rq, &rk, &rv, ref_o, ref_l);

    const double grow = c->q_magnitude > 1.0f ? c->q_magnitude : 1.0;
    r->tol = harness_tol(&desc) * grow;
    r->lse_tol = harness_lse_tol(&desc) * grow;
    int64_t covered = 0;
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < Hq; h++)
            for (int64_t i = 0; i < Sq; i++) {
                const int64_t row = (b * Hq + h) * Sq + i;
                const int64_t base = go.offset + b * go.sb + h * go.sh + i * go.ss;
                for (int64_t x = 0; x < D; x++) {
                    double val;
                    if (is_nan_elem(hb[BO].data, dt, base + x, &val)) {
                        r->nan_count++;
                        continue;
                    }
                    double e = fabs(val - ref_o[row * D + x]);
                    if (e > r->max_err) r->max_err = e;
                }
                const float l = ((const float *)hb[BL].data)[gl.offset + b * gl.sb + h * gl.sh + i];
                const double rl = ref_l[row];
                if (isnan(l))
                    r->nan_count++;
                else if (isinf(rl) || isinf(l))
                    r->lse_mismatch += !(isinf(rl) && isinf(l) && l < 0);
                else {
                    double e = fabs(l - rl) / (fabs(rl) > 1.0 ? fabs(rl) : 1.0);
                    if (e > r->lse_err) r->lse_err = e;
                }
                covered += D;
            }
    /* Guards: everything outside the views must still be poison. O is dense
     * from go.offset, LSE dense from gl.offset. */
    const size_t es = fattn_dtype_size(dt);
    const unsigned char *ob = hb[BO].data, *lb = hb[BL].data;
    for (int64_t i = 0; i < hb[BO].elems; i++)
        if (i < go.offset || i >= go.offset + covered)
            for (size_t k = 0; k < es; k++) r->guard_broken += ob[(size_t)i * es + k] != 0xff;
    for (int64_t i = 0; i < hb[BL].elems; i++)
        if (i < gl.offset || i >= gl.offset + B * Hq * Sq)
            for (size_t k = 0; k < 4; k++) r->guard_broken += lb[(size_t)i * 4 + k] != 0xff;

done:
    for (int i = 0; i < NBUF; i++) {
        fattn_buffer_free(hb[i].dev);
        free(hb[i].data);
    }
    free(ref_o);
    free(ref_l);
    return st;
}

int harness_passed(const case_result *r) {
    return r->max_err <= r->tol && r->lse_err <= r->lse_tol && r->nan_count == 0 &&
           r->lse_mismatch == 0 && r->guard_broken == 0;
}

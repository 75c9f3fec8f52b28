/* Double-precision naive attention; see reference.h. */
#include <math.h>
#include <stdlib.h>

#include "half.h"
#include "reference.h"

double ref_get(const ref_view *v, int64_t b, int64_t h, int64_t s, int64_t d) {
    const int64_t i = v->offset + b * v->stride_batch + h * v->stride_head + s * v->stride_seq + d;
    switch (v->dtype) {
    case FATTN_F32: return ((const float *)v->base)[i];
    case FATTN_F16: return fattn_f16_to_f32(((const uint16_t *)v->base)[i]);
    default: return fattn_bf16_to_f32(((const uint16_t *)v->base)[i]);
    }
}

int64_t ref_key_limit(const fattn_attention_desc *d, int64_t i) {
    const int64_t Sk = d->seq_kv;
    if (d->causal == FATTN_CAUSAL_NONE) return Sk;
    const int64_t off = d->causal == FATTN_CAUSAL_TOP_LEFT ? 0 : Sk - d->seq_q;
    const int64_t lim = i + off + 1;
    return lim < 0 ? 0 : (lim > Sk ? Sk : lim);
}

/* Rows [0, n) of (b, h) of view x, D elements each, as doubles at dst:
 * the triple loops below then read plain arrays (the per-element ref_get
 * was nine tenths of the conformance tests' time). */
static void load_rows(const ref_view *x, int64_t b, int64_t h, int64_t n, int64_t D, double *dst) {
    for (int64_t s = 0; s < n; s++)
        for (int64_t e = 0; e < D; e++) dst[s * D + e] = ref_get(x, b, h, s, e);
}

void ref_attention(const fattn_attention_desc *d, const ref_view *q, const ref_view *k,
                   const ref_view *v, double *out, double *lse) {
    const int64_t D = d->head_dim, Sq = d->seq_q, Sk = d->seq_kv;
    const double scale = d->scale != 0.0f ? (double)d->scale : 1.0 / sqrt((double)D);
    const size_t keys = (size_t)(Sk > 0 ? Sk : 1);
    double *s = malloc(keys * sizeof(double));
    double *qd = malloc((size_t)(Sq > 0 ? Sq : 1) * (size_t)D * sizeof(double));
    double *kd = malloc(keys * (size_t)D * sizeof(double));
    double *vd = malloc(keys * (size_t)D * sizeof(double));
    if (!s || !qd || !kd || !vd) abort(); /* test support: no way to go on */
    for (int64_t b = 0; b < d->batch; b++)
        for (int64_t h = 0; h < d->heads_q; h++) {
            const int64_t hk = h / (d->heads_q / d->heads_kv);
            load_rows(q, b, h, Sq, D, qd);
            load_rows(k, b, hk, Sk, D, kd);
            load_rows(v, b, hk, Sk, D, vd);
            for (int64_t i = 0; i < Sq; i++) {
                const int64_t lim = ref_key_limit(d, i);
                double mx = -INFINITY, sum = 0.0;
                for (int64_t j = 0; j < lim; j++) {
                    double dot = 0.0;
                    for (int64_t x = 0; x < D; x++) dot += qd[i * D + x] * kd[j * D + x];
                    s[j] = dot * scale;
                    if (s[j] > mx) mx = s[j];
                }
                /* fattn's semantics: -inf scores weigh 0, a row without a
                 * finite score gives O = 0 and LSE = -inf, NaN propagates. */
                const double shift = mx == -INFINITY ? 0.0 : mx;
                for (int64_t j = 0; j < lim; j++) {
                    s[j] = exp(s[j] - shift);
                    sum += s[j];
                }
                double *o = out + ((b * d->heads_q + h) * Sq + i) * D;
                for (int64_t x = 0; x < D; x++) {
                    double acc = 0.0;
                    for (int64_t j = 0; j < lim; j++) acc += s[j] * vd[j * D + x];
                    o[x] = sum == 0.0 ? acc * 0.0 : acc / sum;
                }
                lse[(b * d->heads_q + h) * Sq + i] = sum == 0.0 ? -INFINITY : mx + log(sum);
            }
        }
    free(s);
    free(qd);
    free(kd);
    free(vd);
}

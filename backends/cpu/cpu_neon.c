/* The lane kernel (cpu_lane_tile, see cpu.h) for AArch64 with NEON (every
 * AArch64 CPU has it): the AVX-512 kernel's design with each 16-lane
 * vector held as four 4-lane registers. Scores: per key, a sum over d of
 * the key's element times the 16 rows' Q[d]; 4 keys at a time (16
 * accumulators of the 32 registers). Softmax per lane over the keys, no
 * horizontal step, with cpu_exp.h's exp. P.V: 4 dims of O (transposed) at
 * a time, each V element multiplied into the four registers of P. Groups
 * are taken one after the other. */
#include "cpu.h"

#if defined(__aarch64__) && defined(__ARM_NEON)
#include <arm_neon.h>
#include <math.h>

#include "cpu_exp.h"

/* exp(x) for four lanes, as cpu_exp.h says (0 below its limit and for
 * -inf; NaN stays NaN: its rounding is NaN, its exponent bits 0). */
static inline float32x4_t exp4(float32x4_t x) {
    const uint32x4_t under = vcltq_f32(x, vdupq_n_f32(cpu_exp_under));
    const float32x4_t n = vrndnq_f32(vmulq_n_f32(x, 1.44269504088896341f));
    float32x4_t r = vfmsq_f32(x, n, vdupq_n_f32(cpu_exp_ln2_hi));
    r = vfmsq_f32(r, n, vdupq_n_f32(cpu_exp_ln2_lo));
    float32x4_t p = vdupq_n_f32(cpu_exp_poly[0]);
    for (int i = 1; i < 6; i++) p = vfmaq_f32(vdupq_n_f32(cpu_exp_poly[i]), p, r);
    p = vfmaq_f32(vaddq_f32(r, vdupq_n_f32(1.0f)), p, vmulq_f32(r, r));
    const int32x4_t e = vshlq_n_s32(vaddq_s32(vcvtnq_s32_f32(n), vdupq_n_s32(127)), 23);
    const float32x4_t y = vmulq_f32(p, vreinterpretq_f32_s32(e));
    return vreinterpretq_f32_u32(vbicq_u32(vreinterpretq_u32_f32(y), under));
}

enum { NB = 4 }; /* keys per score block */

/* Scores of NB keys (k[0..NB-1], rows of D floats) against qt ([D][16]),
 * to s[u * 16 + lane]; lanes outside [lo, hi) relative to key j: -inf. */
static void scores_nb(const float *qt, const float *const *k, int64_t D, int64_t j,
                      const int32_t *lo, const int32_t *hi, float *s) {
    float32x4_t c[NB][4];
    for (int u = 0; u < NB; u++)
        for (int x = 0; x < 4; x++) c[u][x] = vdupq_n_f32(0.0f);
    for (int64_t d = 0; d < D; d++) {
        const float32x4_t q0 = vld1q_f32(qt + d * 16), q1 = vld1q_f32(qt + d * 16 + 4),
                          q2 = vld1q_f32(qt + d * 16 + 8), q3 = vld1q_f32(qt + d * 16 + 12);
        for (int u = 0; u < NB; u++) {
            const float b = k[u][d];
            c[u][0] = vfmaq_n_f32(c[u][0], q0, b);
            c[u][1] = vfmaq_n_f32(c[u][1], q1, b);
            c[u][2] = vfmaq_n_f32(c[u][2], q2, b);
            c[u][3] = vfmaq_n_f32(c[u][3], q3, b);
        }
    }
    for (int u = 0; u < NB; u++) {
        const int32x4_t ju = vdupq_n_s32((int32_t)(j + u));
        for (int x = 0; x < 4; x++) {
            const uint32x4_t in = vandq_u32(vcgeq_s32(ju, vld1q_s32(lo + 4 * x)),
                                            vcltq_s32(ju, vld1q_s32(hi + 4 * x)));
            vst1q_f32(s + u * 16 + 4 * x, vbslq_f32(in, c[u][x], vdupq_n_f32(-INFINITY)));
        }
    }
}

/* One group of 16 rows against the tile's keys. */
static void lane_group(const float *qt, float *ot, float *m, float *l, const int32_t *lo,
                       const int32_t *hi, const cpu_lane_tile *t) {
    const int64_t D = t->head_dim, Dv = t->head_dim_v, nk = t->keys;
    float *S = t->scores;
    /* The last block repeats the last key (its lanes are past every
     * row's hi: -inf, weight 0). */
    for (int64_t j = 0; j < nk; j += NB) {
        const float *k[NB];
        for (int u = 0; u < NB; u++) k[u] = t->k[j + u < nk ? j + u : nk - 1];
        scores_nb(qt, k, D, j, lo, hi, S + j * 16);
    }
    const int64_t nkb = (nk + NB - 1) / NB * NB;
    float32x4_t alpha[4];
    for (int x = 0; x < 4; x++) {
        /* vmaxnm would take the number over a NaN: a NaN score never
         * becomes the max (it makes its row NaN through the sum). */
        float32x4_t mx = vdupq_n_f32(-INFINITY);
        for (int64_t j = 0; j < nkb; j++) mx = vmaxnmq_f32(mx, vld1q_f32(S + j * 16 + 4 * x));
        const float32x4_t m_old = vld1q_f32(m + 4 * x), m_new = vmaxnmq_f32(mx, m_old);
        /* Never -inf - (-inf): a row that has seen no key shifts by 0. */
        const uint32x4_t none = vceqq_f32(m_new, vdupq_n_f32(-INFINITY));
        const float32x4_t shift = vbslq_f32(none, vdupq_n_f32(0.0f), m_new);
        alpha[x] = exp4(vsubq_f32(m_old, shift)); /* 0 while m_old is -inf */
        float32x4_t sum = vdupq_n_f32(0.0f);
        for (int64_t j = 0; j < nkb; j++) {
            const float32x4_t p = exp4(vsubq_f32(vld1q_f32(S + j * 16 + 4 * x), shift));
            vst1q_f32(S + j * 16 + 4 * x, p);
            sum = vaddq_f32(sum, p);
        }
        vst1q_f32(l + 4 * x, vfmaq_f32(sum, vld1q_f32(l + 4 * x), alpha[x]));
        vst1q_f32(m + 4 * x, m_new);
    }
    for (int64_t d0 = 0; d0 < Dv; d0 += 4) {
        const int n = Dv - d0 < 4 ? (int)(Dv - d0) : 4;
        float32x4_t c[4][4];
        for (int u = 0; u < n; u++)
            for (int x = 0; x < 4; x++)
                c[u][x] = vmulq_f32(vld1q_f32(ot + (d0 + u) * 16 + 4 * x), alpha[x]);
        for (int64_t j = 0; j < nk; j++) {
            const float32x4_t p0 = vld1q_f32(S + j * 16), p1 = vld1q_f32(S + j * 16 + 4),
                              p2 = vld1q_f32(S + j * 16 + 8), p3 = vld1q_f32(S + j * 16 + 12);
            const float *v = t->v[j] + d0;
            for (int u = 0; u < n; u++) {
                c[u][0] = vfmaq_n_f32(c[u][0], p0, v[u]);
                c[u][1] = vfmaq_n_f32(c[u][1], p1, v[u]);
                c[u][2] = vfmaq_n_f32(c[u][2], p2, v[u]);
                c[u][3] = vfmaq_n_f32(c[u][3], p3, v[u]);
            }
        }
        for (int u = 0; u < n; u++)
            for (int x = 0; x < 4; x++) vst1q_f32(ot + (d0 + u) * 16 + 4 * x, c[u][x]);
    }
}

void cpu_lane_tile_neon(const cpu_lane_tile *t) {
    const int G = t->groups == 2 ? 2 : 1;
    for (int g = 0; g < G; g++)
        lane_group(t->qt + 16 * g * t->head_dim, t->ot + 16 * g * t->head_dim_v, t->m + 16 * g,
                   t->l + 16 * g, t->lo + 16 * g, t->hi + 16 * g, t);
}

#endif /* __aarch64__ && __ARM_NEON */

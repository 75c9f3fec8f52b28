/* The tiled loop's key tile for x86-64 with AVX-512F (Skylake-SP, Ice Lake,
 * Sapphire Rapids, Zen 4 and later): 16 query rows held one per lane, so
 * every step is vertical. Scores: for each key, a sum over d of the key's
 * element (broadcast from memory into the FMA) times the 16 rows' Q[d]
 * (Q transposed once per work item); KB keys at a time in KB accumulators,
 * so each FMA does 32 flops and loads one float. Softmax: per lane, over
 * the keys, with no horizontal step. P.V: 16 dims of O (transposed, 16 rows
 * per vector) at a time, each key's V element broadcast. K and V come as
 * float rows the tiled loop packed into its scratch (read in place, a
 * head's rows 4 KiB apart in BSHD thrashed L1's sets). */
#include "cpu_avx512.h" /* TARGET512, exp16 */

#ifdef CPU_X86_KERNELS

/* Scores of KB keys (rows k[0..KB-1] of D floats) against the 16 rows of
 * qt ([D][16]), to s[u * 16 + lane]; lanes outside a row's keys [lo, hi)
 * (relative to key j) get -inf. KB = 8: eight accumulators cover the FMA
 * latency of two pipes, and the eight key pointers stay in registers (16
 * did not: they spilled, and each FMA reloaded one). */
enum { KB = 8 };
INLINE512 void scores_kb(const float *qt, const float *const *k, int64_t D, int64_t j,
                         __m512i lo, __m512i hi, float *s) {
    __m512 c[KB];
    const float *k0 = k[0], *k1 = k[1], *k2 = k[2], *k3 = k[3], *k4 = k[4], *k5 = k[5],
                *k6 = k[6], *k7 = k[7];
    for (int u = 0; u < KB; u++) c[u] = _mm512_setzero_ps();
    for (int64_t d = 0; d < D; d++) {
        const __m512 q = _mm512_loadu_ps(qt + d * 16);
        c[0] = _mm512_fmadd_ps(_mm512_set1_ps(k0[d]), q, c[0]);
        c[1] = _mm512_fmadd_ps(_mm512_set1_ps(k1[d]), q, c[1]);
        c[2] = _mm512_fmadd_ps(_mm512_set1_ps(k2[d]), q, c[2]);
        c[3] = _mm512_fmadd_ps(_mm512_set1_ps(k3[d]), q, c[3]);
        c[4] = _mm512_fmadd_ps(_mm512_set1_ps(k4[d]), q, c[4]);
        c[5] = _mm512_fmadd_ps(_mm512_set1_ps(k5[d]), q, c[5]);
        c[6] = _mm512_fmadd_ps(_mm512_set1_ps(k6[d]), q, c[6]);
        c[7] = _mm512_fmadd_ps(_mm512_set1_ps(k7[d]), q, c[7]);
    }
    const __m512 ninf = _mm512_set1_ps(-INFINITY);
    for (int u = 0; u < KB; u++) {
        const __m512i ju = _mm512_set1_epi32((int)(j + u));
        const __mmask16 in = _mm512_cmp_epi32_mask(ju, lo, _MM_CMPINT_NLT) &
                             _mm512_cmp_epi32_mask(ju, hi, _MM_CMPINT_LT);
        _mm512_storeu_ps(s + u * 16, _mm512_mask_mov_ps(ninf, in, c[u]));
    }
}

/* ot[d0 .. d0 + n) (n <= 16 dims of O, [Dv][16]) = alpha ot + P V over nk
 * keys: v[j] + d0 is key j's V row from dim d0, P is [nk][16]. */
INLINE512 void pv16(float *ot, int64_t d0, int n, __m512 alpha, const float *P,
                    const float *const *v, int64_t nk) {
    __m512 c[16];
    for (int u = 0; u < 16; u++)
        c[u] = u < n ? _mm512_mul_ps(_mm512_loadu_ps(ot + (d0 + u) * 16), alpha) : alpha;
    if (n == 16) {
        for (int64_t j = 0; j < nk; j++) {
            const __m512 p = _mm512_loadu_ps(P + j * 16);
            const float *x = v[j] + d0;
            for (int u = 0; u < 16; u++) c[u] = _mm512_fmadd_ps(_mm512_set1_ps(x[u]), p, c[u]);
        }
    } else {
        for (int64_t j = 0; j < nk; j++) {
            const __m512 p = _mm512_loadu_ps(P + j * 16);
            const float *x = v[j] + d0;
            for (int u = 0; u < n; u++) c[u] = _mm512_fmadd_ps(_mm512_set1_ps(x[u]), p, c[u]);
        }
    }
    for (int u = 0; u < n; u++) _mm512_storeu_ps(ot + (d0 + u) * 16, c[u]);
}

TARGET512 void cpu_lane_tile_avx512(const cpu_lane_tile *t) {
    const int64_t D = t->head_dim, Dv = t->head_dim_v, nk = t->keys;
    float *S = t->scores;
    const __m512i lo = _mm512_loadu_si512(t->lo), hi = _mm512_loadu_si512(t->hi);
    /* Keys in groups of KB; the last group repeats the last key (its lanes
     * are then past every row's hi: -inf, weight 0). */
    for (int64_t j = 0; j < nk; j += KB) {
        const float *k[KB];
        for (int u = 0; u < KB; u++) k[u] = t->k[j + u < nk ? j + u : nk - 1];
        scores_kb(t->qt, k, D, j, lo, hi, S + j * 16);
    }
    const int64_t nk16 = (nk + KB - 1) & ~(int64_t)(KB - 1);

    /* max(S, mx) keeps mx where S is NaN: a NaN score never becomes the
     * max (it makes its row NaN through the sum, as in the scalar loop). */
    __m512 mx = _mm512_set1_ps(-INFINITY);
    for (int64_t j = 0; j < nk16; j++) mx = _mm512_max_ps(_mm512_loadu_ps(S + j * 16), mx);
    const __m512 m_old = _mm512_loadu_ps(t->m);
    const __m512 m_new = _mm512_max_ps(mx, m_old);
    /* Never -inf - (-inf): a row that has seen no key shifts by 0. */
    const __mmask16 none = _mm512_cmp_ps_mask(m_new, _mm512_set1_ps(-INFINITY), _CMP_EQ_OQ);
    const __m512 shift = _mm512_mask_mov_ps(m_new, none, _mm512_setzero_ps());
    const __m512 alpha = exp16(_mm512_sub_ps(m_old, shift)); /* 0 while m_old is -inf */
    __m512 sum = _mm512_setzero_ps();
    for (int64_t j = 0; j < nk16; j++) {
        const __m512 p = exp16(_mm512_sub_ps(_mm512_loadu_ps(S + j * 16), shift));
        _mm512_storeu_ps(S + j * 16, p);
        sum = _mm512_add_ps(sum, p);
    }
    _mm512_storeu_ps(t->l, _mm512_fmadd_ps(_mm512_loadu_ps(t->l), alpha, sum));
    /* NaN rows: m takes the max without NaN, as the scalar loop's. */
    _mm512_storeu_ps(t->m, m_new);

    int64_t d = 0;
    for (; d + 16 <= Dv; d += 16) pv16(t->ot, d, 16, alpha, S, t->v, nk);
    if (d < Dv) pv16(t->ot, d, (int)(Dv - d), alpha, S, t->v, nk);
}

#endif /* CPU_X86_KERNELS */

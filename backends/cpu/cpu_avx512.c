/* The tiled loop's key tile for x86-64 with AVX-512F (Skylake-SP, Ice Lake,
 * Sapphire Rapids, Zen 4 and later): 16 query rows held one per lane, so
 * every step is vertical, in one or two groups. Scores: for each key, a
 * sum over d of the key's element (broadcast) times the 16 rows' Q[d] (Q
 * transposed once per work item); KB keys at a time in KB accumulators per
 * group, each key element loaded once for both groups. Softmax: per lane,
 * over the keys, with no horizontal step. P.V: 16 dims of O (transposed,
 * 16 rows per vector) at a time with one group, 8 with two, each V element
 * broadcast once for both. K and V come as float rows the tiled loop
 * packed into its scratch (read in place, a head's rows 4 KiB apart in
 * BSHD thrashed L1's sets). */
#include "cpu_avx512.h" /* TARGET512, exp16 */

#ifdef CPU_X86_KERNELS

/* Scores of KB keys (rows k[0..KB-1] of D floats) against the 16 rows of
 * each of G groups (qt + g * gq, [D][16] each), to s + g * gs at
 * [u * 16 + lane]; lanes outside a row's keys [lo, hi) (relative to key j)
 * get -inf. KB = 8: eight accumulators a group cover the FMA latency of
 * two pipes, and the eight key pointers stay in registers (16 did not:
 * they spilled, and each FMA reloaded one). With two groups each key
 * element, loaded once, feeds two FMAs (one load per FMA was the limit). */
enum { KB = 8 };
INLINE512 void scores_kb(const float *qt, int64_t gq, int G, const float *const *k, int64_t D,
                         int64_t j, const __m512i *lo, const __m512i *hi, float *s, int64_t gs) {
    __m512 c[2][KB];
    const float *k0 = k[0], *k1 = k[1], *k2 = k[2], *k3 = k[3], *k4 = k[4], *k5 = k[5],
                *k6 = k[6], *k7 = k[7];
    for (int g = 0; g < 2; g++)
        for (int u = 0; u < KB; u++) c[g][u] = _mm512_setzero_ps();
#define SCORE_STEP(u, ku)                                                                  \
    do {                                                                                   \
        const __m512 b_ = _mm512_set1_ps(ku[d]);                                           \
        c[0][u] = _mm512_fmadd_ps(b_, q0, c[0][u]);                                        \
        if (G == 2) c[1][u] = _mm512_fmadd_ps(b_, q1, c[1][u]);                            \
    } while (0)
    for (int64_t d = 0; d < D; d++) {
        const __m512 q0 = _mm512_loadu_ps(qt + d * 16);
        const __m512 q1 = G == 2 ? _mm512_loadu_ps(qt + gq + d * 16) : q0;
        SCORE_STEP(0, k0);
        SCORE_STEP(1, k1);
        SCORE_STEP(2, k2);
        SCORE_STEP(3, k3);
        SCORE_STEP(4, k4);
        SCORE_STEP(5, k5);
        SCORE_STEP(6, k6);
        SCORE_STEP(7, k7);
    }
#undef SCORE_STEP
    const __m512 ninf = _mm512_set1_ps(-INFINITY);
    for (int g = 0; g < G; g++)
        for (int u = 0; u < KB; u++) {
            const __m512i ju = _mm512_set1_epi32((int)(j + u));
            const __mmask16 in = _mm512_cmp_epi32_mask(ju, lo[g], _MM_CMPINT_NLT) &
                                 _mm512_cmp_epi32_mask(ju, hi[g], _MM_CMPINT_LT);
            _mm512_storeu_ps(s + g * gs + u * 16, _mm512_mask_mov_ps(ninf, in, c[g][u]));
        }
}

/* For G groups: ot[d0 .. d0 + n) (n <= N dims of O, [Dv][16]; group g's
 * at ot + g * go) = alpha ot + P V over nk keys: v[j] + d0 is key j's V
 * row from dim d0, group g's P is [nk][16] at P + g * gs. Each V element,
 * loaded once, feeds G FMAs; N = 16 dims with one group, 8 with two (the
 * accumulators fill the registers either way). */
INLINE512 void pv_block(float *ot, int64_t go, int G, int64_t d0, int n, const __m512 *alpha,
                        const float *P, int64_t gs, const float *const *v, int64_t nk) {
    __m512 c[2][16];
    const int N = G == 2 ? 8 : 16;
    for (int g = 0; g < G; g++)
        for (int u = 0; u < N; u++)
            c[g][u] = u < n ? _mm512_mul_ps(_mm512_loadu_ps(ot + g * go + (d0 + u) * 16), alpha[g])
                            : alpha[g];
    if (G == 2 && n == 8) {
        for (int64_t j = 0; j < nk; j++) {
            const __m512 p0 = _mm512_loadu_ps(P + j * 16), p1 = _mm512_loadu_ps(P + gs + j * 16);
            const float *x = v[j] + d0;
            for (int u = 0; u < 8; u++) {
                const __m512 b = _mm512_set1_ps(x[u]);
                c[0][u] = _mm512_fmadd_ps(b, p0, c[0][u]);
                c[1][u] = _mm512_fmadd_ps(b, p1, c[1][u]);
            }
        }
    } else if (G == 1 && n == 16) {
        for (int64_t j = 0; j < nk; j++) {
            const __m512 p = _mm512_loadu_ps(P + j * 16);
            const float *x = v[j] + d0;
            for (int u = 0; u < 16; u++) c[0][u] = _mm512_fmadd_ps(_mm512_set1_ps(x[u]), p, c[0][u]);
        }
    } else {
        for (int64_t j = 0; j < nk; j++) {
            const float *x = v[j] + d0;
            for (int g = 0; g < G; g++) {
                const __m512 p = _mm512_loadu_ps(P + g * gs + j * 16);
                for (int u = 0; u < n; u++)
                    c[g][u] = _mm512_fmadd_ps(_mm512_set1_ps(x[u]), p, c[g][u]);
            }
        }
    }
    for (int g = 0; g < G; g++)
        for (int u = 0; u < n; u++) _mm512_storeu_ps(ot + g * go + (d0 + u) * 16, c[g][u]);
}

/* The online-softmax step of one group over its nk16 scores S ([nk16][16],
 * -inf where hidden): S becomes P; m and l are updated; returns alpha. */
INLINE512 __m512 softmax_group(float *S, int64_t nk16, float *m, float *l) {
    /* max(S, mx) keeps mx where S is NaN: a NaN score never becomes the
     * max (it makes its row NaN through the sum, as in the scalar loop). */
    __m512 mx = _mm512_set1_ps(-INFINITY);
    for (int64_t j = 0; j < nk16; j++) mx = _mm512_max_ps(_mm512_loadu_ps(S + j * 16), mx);
    const __m512 m_old = _mm512_loadu_ps(m);
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
    _mm512_storeu_ps(l, _mm512_fmadd_ps(_mm512_loadu_ps(l), alpha, sum));
    /* NaN rows: m takes the max without NaN, as the scalar loop's. */
    _mm512_storeu_ps(m, m_new);
    return alpha;
}

TARGET512 void cpu_lane_tile_avx512(const cpu_lane_tile *t) {
    const int64_t D = t->head_dim, Dv = t->head_dim_v, nk = t->keys;
    const int G = t->groups == 2 ? 2 : 1;
    const int64_t nk16 = (nk + KB - 1) & ~(int64_t)(KB - 1), gs = 16 * nk16;
    float *S = t->scores;
    __m512i lo[2], hi[2];
    for (int g = 0; g < G; g++)
        lo[g] = _mm512_loadu_si512(t->lo + 16 * g), hi[g] = _mm512_loadu_si512(t->hi + 16 * g);
    /* Keys in groups of KB; the last group repeats the last key (its lanes
     * are then past every row's hi: -inf, weight 0). */
    for (int64_t j = 0; j < nk; j += KB) {
        const float *k[KB];
        for (int u = 0; u < KB; u++) k[u] = t->k[j + u < nk ? j + u : nk - 1];
        if (G == 2)
            scores_kb(t->qt, 16 * D, 2, k, D, j, lo, hi, S + j * 16, gs);
        else
            scores_kb(t->qt, 16 * D, 1, k, D, j, lo, hi, S + j * 16, gs);
    }
    __m512 alpha[2];
    for (int g = 0; g < G; g++) alpha[g] = softmax_group(S + g * gs, nk16, t->m + 16 * g, t->l + 16 * g);

    const int N = G == 2 ? 8 : 16;
    for (int64_t d = 0; d < Dv; d += N) {
        const int n = Dv - d < N ? (int)(Dv - d) : N;
        if (G == 2)
            pv_block(t->ot, 16 * Dv, 2, d, n, alpha, S, gs, t->v, nk);
        else
            pv_block(t->ot, 16 * Dv, 1, d, n, alpha, S, gs, t->v, nk);
    }
}

#endif /* CPU_X86_KERNELS */

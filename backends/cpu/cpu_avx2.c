/* The tiled loop's key tile for x86-64 with AVX2, FMA and F16C (Haswell, Zen
 * and later), for tiles whose rows all see the same keys: every decoding tile,
 * every non-causal tile, causal tiles below the diagonal. K and V are read in
 * their storage type and widened in registers, never copied to float. */
#include "cpu_avx2.h"

#ifdef CPU_X86_KERNELS
/* Scores of four query rows (q, row stride D) against keys k0 and k1, to
 * s[0..3] and s[4..7]: eight independent chains keep both FMA pipes busy,
 * and each key's lanes are widened once for the four rows. */
INLINE void scores2(const float *q, int64_t D, const void *k0, const void *k1, fattn_dtype t,
                    float *s) {
    const int64_t es = fattn_esize(t);
    const unsigned char *x0 = k0, *x1 = k1;
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, b0 = a0, b1 = a0, b2 = a0, b3 = a0;
    for (int64_t d = 0; d < D; d += 8) {
        const __m256 y0 = load8(x0 + d * es, t), y1 = load8(x1 + d * es, t);
        const __m256 q0 = _mm256_loadu_ps(q + d), q1 = _mm256_loadu_ps(q + D + d),
                     q2 = _mm256_loadu_ps(q + 2 * D + d), q3 = _mm256_loadu_ps(q + 3 * D + d);
        a0 = _mm256_fmadd_ps(q0, y0, a0);
        a1 = _mm256_fmadd_ps(q1, y0, a1);
        a2 = _mm256_fmadd_ps(q2, y0, a2);
        a3 = _mm256_fmadd_ps(q3, y0, a3);
        b0 = _mm256_fmadd_ps(q0, y1, b0);
        b1 = _mm256_fmadd_ps(q1, y1, b1);
        b2 = _mm256_fmadd_ps(q2, y1, b2);
        b3 = _mm256_fmadd_ps(q3, y1, b3);
    }
    _mm256_storeu_ps(s, hsum8x8(a0, a1, a2, a3, b0, b1, b2, b3));
}

/* Four rows (from row r0) against the tile's nk keys: scores, then the
 * online-softmax update with one vector exp over the block, then P V. */
INLINE void rows4(const cpu_key_tile *tl, int64_t r0, fattn_dtype t) {
    const int64_t D = tl->head_dim, nk = tl->keys;
    const void *const *K = tl->k, *const *V = tl->v;
    const float *q = tl->q + r0 * D;
    float *P = tl->scores, *acc = tl->acc + r0 * D, *m = tl->m + r0, *l = tl->l + r0;
    int64_t j = 0;
    for (; j + 2 <= nk; j += 2) scores2(q, D, K[j], K[j + 1], t, P + 4 * j);
    if (j < nk) scores2(q, D, K[j], K[j], t, P + 4 * j); /* softmax4 drops the twin */

    float alpha[4];
    softmax4(P, nk, m, l, alpha);
    const __m256 al[4] = {_mm256_set1_ps(alpha[0]), _mm256_set1_ps(alpha[1]),
                          _mm256_set1_ps(alpha[2]), _mm256_set1_ps(alpha[3])};
    int64_t d = 0;
    for (; d + 16 <= D; d += 16) pv_cols(acc, D, d, al, P, V, 0, nk, t, 2);
    if (d < D) pv_cols(acc, D, d, al, P, V, 0, nk, t, 1);
}

INLINE void key_tile(const cpu_key_tile *tl, fattn_dtype t) {
    for (int64_t r0 = 0; r0 < tl->rows; r0 += 4) rows4(tl, r0, t);
}

TARGET void cpu_key_tile_avx2(const cpu_key_tile *tl) {
    /* One build per storage type, so that no branch on it is left inside. */
    if (tl->dtype == FATTN_F32)
        key_tile(tl, FATTN_F32);
    else if (tl->dtype == FATTN_F16)
        key_tile(tl, FATTN_F16);
    else
        key_tile(tl, FATTN_BF16);
}

#endif /* CPU_X86_KERNELS */

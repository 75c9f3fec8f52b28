/* The decoding kernel for x86-64 with AVX2, FMA and F16C: a block of keys
 * against the query rows of every KV head at once, reading each key's K and
 * V rows for all heads in address order. In the usual [batch, seq, heads,
 * dim] caches that is one forward stream, which the hardware prefetchers
 * follow at full bandwidth; one head at a time reads 1/heads of every line
 * pair and page, and ran at a third of it on a 2-core EPYC. */
#include "cpu_avx2.h"

#ifdef CPU_X86_KERNELS

/* Scores of four query rows (q, row stride D) against one key k, to s[0..3];
 * two sets of chains (even and odd groups of eight columns) keep eight FMAs
 * in flight. */
INLINE void scores1(const float *q, int64_t D, const unsigned char *k, fattn_dtype t, float *s) {
    const int64_t es = fattn_esize(t);
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, b0 = a0, b1 = a0, b2 = a0, b3 = a0;
    int64_t d = 0;
    for (; d + 16 <= D; d += 16) {
        const __m256 y0 = load8(k + d * es, t), y1 = load8(k + (d + 8) * es, t);
        a0 = _mm256_fmadd_ps(_mm256_loadu_ps(q + d), y0, a0);
        a1 = _mm256_fmadd_ps(_mm256_loadu_ps(q + D + d), y0, a1);
        a2 = _mm256_fmadd_ps(_mm256_loadu_ps(q + 2 * D + d), y0, a2);
        a3 = _mm256_fmadd_ps(_mm256_loadu_ps(q + 3 * D + d), y0, a3);
        b0 = _mm256_fmadd_ps(_mm256_loadu_ps(q + d + 8), y1, b0);
        b1 = _mm256_fmadd_ps(_mm256_loadu_ps(q + D + d + 8), y1, b1);
        b2 = _mm256_fmadd_ps(_mm256_loadu_ps(q + 2 * D + d + 8), y1, b2);
        b3 = _mm256_fmadd_ps(_mm256_loadu_ps(q + 3 * D + d + 8), y1, b3);
    }
    if (d < D) {
        const __m256 y0 = load8(k + d * es, t);
        a0 = _mm256_fmadd_ps(_mm256_loadu_ps(q + d), y0, a0);
        a1 = _mm256_fmadd_ps(_mm256_loadu_ps(q + D + d), y0, a1);
        a2 = _mm256_fmadd_ps(_mm256_loadu_ps(q + 2 * D + d), y0, a2);
        a3 = _mm256_fmadd_ps(_mm256_loadu_ps(q + 3 * D + d), y0, a3);
    }
    _mm_storeu_ps(s, hsum4x8(_mm256_add_ps(a0, b0), _mm256_add_ps(a1, b1), _mm256_add_ps(a2, b2),
                             _mm256_add_ps(a3, b3)));
}

INLINE void heads_block(const cpu_heads_block *hb, fattn_dtype t) {
    const int64_t D = hb->head_dim, nk = hb->keys, H = hb->heads, R = hb->rows;
    const int64_t sst = 4 * (hb->max_keys + 1); /* scores of four rows */
    const unsigned char *const *K = (const unsigned char *const *)hb->k;
    const unsigned char *const *V = (const unsigned char *const *)hb->v;
    /* Scores, key by key, each key's heads in address order; V's rows of
     * the key are asked for on the way, in the same order, so that P V
     * below finds the block in cache and may take it head by head. */
    const int64_t row_bytes = D * fattn_esize(t);
    for (int64_t j = 0; j < nk; j++)
        for (int64_t h = 0; h < H; h++) {
            for (int64_t off = 0; off < row_bytes; off += 64)
                _mm_prefetch((const char *)V[j] + h * hb->v_head + off, _MM_HINT_T0);
            if (j + CPU_HEADS_AHEAD < nk + hb->ahead)
                for (int64_t off = 0; off < row_bytes; off += 64)
                    _mm_prefetch((const char *)K[j + CPU_HEADS_AHEAD] + h * hb->k_head + off,
                                 _MM_HINT_T0);
            for (int64_t r = 0; r < R; r += 4)
                scores1(hb->q + (h * R + r) * D, D, K[j] + h * hb->k_head, t,
                        hb->scores + (h * R + r) / 4 * sst + 4 * j);
        }
    /* The softmax step and P V of each head's rows in fours. */
    const void *const *Vv = hb->v;
    for (int64_t x = 0; x < H * R; x += 4) {
        float alpha[4], *acc = hb->acc + x * D, *P = hb->scores + x / 4 * sst;
        softmax4(P, nk, hb->m + x, hb->l + x, alpha);
        const __m256 al[4] = {_mm256_set1_ps(alpha[0]), _mm256_set1_ps(alpha[1]),
                              _mm256_set1_ps(alpha[2]), _mm256_set1_ps(alpha[3])};
        const int64_t off = x / R * hb->v_head;
        int64_t d = 0;
        for (; d + 16 <= D; d += 16) pv_cols(acc, D, d, al, P, Vv, off, nk, t, 2);
        if (d < D) pv_cols(acc, D, d, al, P, Vv, off, nk, t, 1);
    }
}

TARGET void cpu_heads_block_avx2(const cpu_heads_block *hb) {
    /* One build per storage type, so that no branch on it is left inside. */
    if (hb->dtype == FATTN_F32)
        heads_block(hb, FATTN_F32);
    else if (hb->dtype == FATTN_F16)
        heads_block(hb, FATTN_F16);
    else
        heads_block(hb, FATTN_BF16);
}

#endif /* CPU_X86_KERNELS */

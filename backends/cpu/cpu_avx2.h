/* Helpers of the AVX2+FMA+F16C kernels (cpu_avx2.c, cpu_avx2_heads.c):
 * widening loads, horizontal sums, a vector exp, and the online-softmax step
 * on four rows' scores. Each function carries the target, so the including
 * file needs no special flags. */
#ifndef FATTN_CPU_AVX2_H
#define FATTN_CPU_AVX2_H

#include <math.h>

#include "cpu.h"
#include "cpu_exp.h"

#ifdef CPU_X86_KERNELS
#include <immintrin.h>

#define TARGET __attribute__((target("avx2,fma,f16c")))
#define INLINE static inline __attribute__((always_inline)) TARGET

/* Eight elements at p as floats: f16 through F16C and bf16 by a shift, both
 * exact (a NaN may come out quieted, still NaN). */
INLINE __m256 load8(const void *p, fattn_dtype t) {
    if (t == FATTN_F32) return _mm256_loadu_ps(p);
    const __m128i h = _mm_loadu_si128(p);
    if (t == FATTN_F16) return _mm256_cvtph_ps(h);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

/* Lane c of the result is the sum of a[c]'s eight lanes. */
INLINE __m256 hsum8x8(__m256 a0, __m256 a1, __m256 a2, __m256 a3, __m256 a4, __m256 a5, __m256 a6,
                      __m256 a7) {
    const __m256 u0 = _mm256_hadd_ps(_mm256_hadd_ps(a0, a1), _mm256_hadd_ps(a2, a3));
    const __m256 u1 = _mm256_hadd_ps(_mm256_hadd_ps(a4, a5), _mm256_hadd_ps(a6, a7));
    return _mm256_add_ps(_mm256_permute2f128_ps(u0, u1, 0x20),
                         _mm256_permute2f128_ps(u0, u1, 0x31));
}

/* exp(x) for x <= 0, eight lanes: cpu_exp.h's method and constants. */

INLINE __m256 exp8(__m256 x) {
    const __m256 under = _mm256_cmp_ps(x, _mm256_set1_ps(cpu_exp_under), _CMP_LT_OQ);
    const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(cpu_exp_ln2_hi), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(cpu_exp_ln2_lo), r);
    __m256 p = _mm256_set1_ps(cpu_exp_poly[0]);
    for (int i = 1; i < 6; i++) p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(cpu_exp_poly[i]));
    p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    const __m256i e =
        _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_andnot_ps(under, _mm256_mul_ps(p, _mm256_castsi256_ps(e)));
}

/* Lane c of the result is the sum of a[c]'s eight lanes (c < 4). */
INLINE __m128 hsum4x8(__m256 a0, __m256 a1, __m256 a2, __m256 a3) {
    const __m256 u = _mm256_hadd_ps(_mm256_hadd_ps(a0, a1), _mm256_hadd_ps(a2, a3));
    return _mm_add_ps(_mm256_castps256_ps128(u), _mm256_extractf128_ps(u, 1));
}

/* acc[0..3] (rows of stride D, columns d..d+8*nv) = alpha acc + P V over
 * nk keys, whose V rows lie `off` bytes past V[j], P read from the scores'
 * [key][row] layout: the accumulators stay in registers for the block. */
INLINE void pv_cols(float *acc, int64_t D, int64_t d, const __m256 al[4], const float *P,
                    const void *const *V, int64_t off, int64_t nk, fattn_dtype t, int nv) {
    const int64_t es = fattn_esize(t);
    __m256 c[4][2];
    for (int r = 0; r < 4; r++)
        for (int v = 0; v < nv; v++)
            c[r][v] = _mm256_mul_ps(_mm256_loadu_ps(acc + r * D + d + 8 * v), al[r]);
    for (int64_t j = 0; j < nk; j++) {
        const unsigned char *x = (const unsigned char *)V[j] + off + d * es;
        __m256 y[2];
        for (int v = 0; v < nv; v++) y[v] = load8(x + 8 * v * es, t);
        for (int r = 0; r < 4; r++) {
            const __m256 pr = _mm256_broadcast_ss(P + 4 * j + r);
            for (int v = 0; v < nv; v++) c[r][v] = _mm256_fmadd_ps(pr, y[v], c[r][v]);
        }
    }
    for (int r = 0; r < 4; r++)
        for (int v = 0; v < nv; v++) _mm256_storeu_ps(acc + r * D + d + 8 * v, c[r][v]);
}

/* The online-softmax step of four rows over nk keys whose scores lie in P
 * as [key][row] (room for nk + 1 keys): the running max m and sum l are
 * updated, P becomes exp(S - shift) in place, and alpha gets each row's
 * rescale of its accumulator, exp(m_old - shift). */
INLINE void softmax4(float *P, int64_t nk, float *m, float *l, float alpha[4]) {
    int64_t j;
    if (nk & 1) _mm_storeu_ps(P + 4 * nk, _mm_set1_ps(-INFINITY)); /* exp pairs keys */
    /* max(S, mx) keeps mx where S is NaN: a NaN score never becomes the max. */
    __m128 mx = _mm_set1_ps(-INFINITY);
    for (j = 0; j < nk; j++) mx = _mm_max_ps(_mm_loadu_ps(P + 4 * j), mx);
    float mxs[4], shift[4];
    _mm_storeu_ps(mxs, mx);
    for (int r = 0; r < 4; r++) {
        const float m_new = mxs[r] > m[r] ? mxs[r] : m[r];
        shift[r] = m_new == -INFINITY ? 0.0f : m_new; /* never -inf - (-inf) */
        alpha[r] = expf(m[r] - shift[r]);             /* 0 while m[r] is -inf */
        m[r] = m_new;
    }
    const __m128 sh4 = _mm_loadu_ps(shift);
    const __m256 sh = _mm256_set_m128(sh4, sh4);
    __m256 sum = _mm256_setzero_ps();
    for (j = 0; j < nk; j += 2) {
        const __m256 p = exp8(_mm256_sub_ps(_mm256_loadu_ps(P + 4 * j), sh));
        _mm256_storeu_ps(P + 4 * j, p);
        sum = _mm256_add_ps(sum, p);
    }
    const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(sum), _mm256_extractf128_ps(sum, 1));
    _mm_storeu_ps(l, _mm_add_ps(_mm_mul_ps(_mm_loadu_ps(l), _mm_loadu_ps(alpha)), s4));
}

#endif /* CPU_X86_KERNELS */
#endif /* FATTN_CPU_AVX2_H */

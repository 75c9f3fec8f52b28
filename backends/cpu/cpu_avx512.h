/* Helpers shared by the AVX-512 kernels (cpu_avx512.c, cpu_amx.c): the
 * target attribute and a 16-lane exp. */
#ifndef FATTN_CPU_AVX512_H
#define FATTN_CPU_AVX512_H

#include "cpu_avx2.h" /* exp8's constants; math.h, immintrin.h */

#ifdef CPU_X86_KERNELS
#define TARGET512 __attribute__((target("avx512f,avx2,fma,f16c")))
#define INLINE512 static inline __attribute__((always_inline)) TARGET512

/* exp(x) as cpu_avx2.h's exp8 (Cephes' expf, 1.18e-7 relative at worst;
 * 0 below ln(FLT_MIN) and for -inf, NaN stays NaN), 16 lanes. */
INLINE512 __m512 exp16(__m512 x) {
    const __mmask16 under = _mm512_cmp_ps_mask(x, _mm512_set1_ps(cpu_exp_under), _CMP_LT_OQ);
    const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(cpu_exp_ln2_hi), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(cpu_exp_ln2_lo), r);
    __m512 p = _mm512_set1_ps(cpu_exp_poly[0]);
    for (int i = 1; i < 6; i++) p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(cpu_exp_poly[i]));
    p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
    const __m512i e =
        _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23);
    return _mm512_maskz_mov_ps((__mmask16)~under, _mm512_mul_ps(p, _mm512_castsi512_ps(e)));
}

#endif /* CPU_X86_KERNELS */
#endif /* FATTN_CPU_AVX512_H */

/* The vector exp every SIMD kernel of the CPU backend uses (AVX2's exp8,
 * AVX-512's exp16, NEON's exp4), portable constants only. */
#ifndef FATTN_CPU_EXP_H
#define FATTN_CPU_EXP_H

/* exp(x) for x <= 0 (valid up to 88), Cephes' expf: x = n ln2 + r with
 * |r| <= ln2/2 (ln2 in two parts, the first exact in products with n), a
 * degree-7 polynomial for e^r, 2^n built in the exponent. Relative error
 * below 1.2e-7 (1 ulp): measured against exp() in double over every float
 * in [ln(FLT_MIN), 0], 1.18e-7 at worst (glibc's expf: 6e-8); far inside
 * the tests' 1e-5 on LSE and 2e-5 on f32 O. Below ln(FLT_MIN) it gives 0
 * where expf gives a subnormal (under 1.2e-38, against a largest term of
 * 1); -inf gives 0 and NaN stays NaN. */
/* Its constants: the underflow limit, ln2 in two parts, and the
 * polynomial's coefficients from the highest. */
static const float cpu_exp_under = -87.33654f, cpu_exp_ln2_hi = 0.693359375f,
                   cpu_exp_ln2_lo = -2.12194440e-4f;
static const float cpu_exp_poly[6] = {1.9875691500e-4f, 1.3981999507e-3f, 8.3334519073e-3f,
                                      4.1665795894e-2f, 1.6666665459e-1f, 5.0000001201e-1f};

#endif /* FATTN_CPU_EXP_H */

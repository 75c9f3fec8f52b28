/* float16 and bfloat16 conversions in portable C, round-to-nearest-even, with
 * infinities, NaNs and subnormals kept. Shared by the CPU backend and tests. */
#ifndef FATTN_HALF_H
#define FATTN_HALF_H

#include <stdint.h>
#include <string.h>

static inline float fattn_bits_to_f32(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static inline uint32_t fattn_f32_to_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static inline float fattn_f16_to_f32(uint16_t h) {
    const uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f, man = h & 0x3ff;
    if (exp == 0x1f) return fattn_bits_to_f32(sign | 0x7f800000u | (man << 13));
    if (exp == 0) {
        if (man == 0) return fattn_bits_to_f32(sign);
        /* Subnormal: value is man * 2^-24, exact in float. */
        float f = (float)man * 5.9604644775390625e-8f;
        return sign ? -f : f;
    }
    return fattn_bits_to_f32(sign | ((exp + 112) << 23) | (man << 13));
}

static inline uint16_t fattn_f32_to_f16(float f) {
    const uint32_t u = fattn_f32_to_bits(f);
    const uint16_t sign = (uint16_t)((u >> 16) & 0x8000);
    const uint32_t a = u & 0x7fffffffu;
    if (a >= 0x7f800000u) return (uint16_t)(sign | 0x7c00 | (a > 0x7f800000u ? 0x200 : 0));
    if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00); /* rounds past 65504 */
    if (a < 0x38800000u) {
        /* Subnormal or zero in f16: scale so the integer part is the mantissa;
         * the float add rounds to nearest even for us. */
        float m = fattn_bits_to_f32(a) * 16777216.0f; /* 2^24 */
        uint32_t r = (uint32_t)m;
        float frac = m - (float)r;
        if (frac > 0.5f || (frac == 0.5f && (r & 1))) r++;
        return (uint16_t)(sign | r);
    }
    uint32_t r = a - 0x38000000u; /* rebias exponent 127 -> 15 */
    r += 0xfff + ((r >> 13) & 1); /* round to nearest even */
    return (uint16_t)(sign | (r >> 13));
}

static inline float fattn_bf16_to_f32(uint16_t h) { return fattn_bits_to_f32((uint32_t)h << 16); }

static inline uint16_t fattn_f32_to_bf16(float f) {
    uint32_t u = fattn_f32_to_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40); /* quiet NaN */
    u += 0x7fffu + ((u >> 16) & 1);
    return (uint16_t)(u >> 16);
}

#endif /* FATTN_HALF_H */

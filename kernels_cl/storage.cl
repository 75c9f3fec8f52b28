/* Storage types, prepended by the host to every kernel file it builds:
 * elem_t, LOAD / LOAD4 / STORE and load_row4 for DTYPE 0 = f32, 1 = f16, 2 = bf16, all
 * with float32 arithmetic. f16 goes through vload_half / vstore_half and
 * bf16 through shifts, so no cl_khr_fp16 is needed. */

#ifndef DTYPE
#define DTYPE 0
#endif

#if DTYPE == 0
typedef float elem_t;
#define LOAD(p, i) ((p)[i])
#define LOAD4(p) vload4(0, (p))
#define STORE(p, i, x) ((p)[i] = (x))
#elif DTYPE == 1
typedef half elem_t;
#define LOAD(p, i) vload_half((i), (p))
#define LOAD4(p) vload_half4(0, (p))
#define STORE(p, i, x) vstore_half_rte((x), (i), (p))
#else
typedef ushort elem_t;
#define LOAD(p, i) as_float((uint)(p)[i] << 16)
#define LOAD4(p) as_float4(convert_uint4(vload4(0, (p))) << 16)
#define STORE(p, i, x) ((p)[i] = bf16_round(x))
/* Round to nearest even; NaN stays a (quiet) NaN. */
inline ushort bf16_round(float x) {
    uint u = as_uint(x);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (ushort)((u >> 16) | 0x40u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (ushort)(u >> 16);
}
#endif

/* Elements d .. d+3 of a row, as floats, zero past the run-time head dim D
 * (every kernel reads rows of Q, K or V this way). */
inline float4 load_row4(__global const elem_t *p, long base, int d, int D) {
    if (d + 4 <= D) return LOAD4(p + base + d);
    float4 x = (float4)(0.0f);
    if (d < D) x.x = LOAD(p, base + d);
    if (d + 1 < D) x.y = LOAD(p, base + d + 1);
    if (d + 2 < D) x.z = LOAD(p, base + d + 2);
    return x;
}

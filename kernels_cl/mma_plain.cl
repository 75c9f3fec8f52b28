/* The matrix kernel's non-matrix primitives in plain OpenCL C, for every
 * instruction file that has no faster ones (the emulations, AMD's WMMA):
 *   mx_cp16(dst, src, bytes): 16 bytes to local memory, the first `bytes`
 *     from src (16-byte aligned when bytes is 16), the rest zero (synchronous: mx_cp_commit and mx_cp_wait(n)
 *     have nothing to wait for).
 *   mx_exp2(x): exp2, 0 at -inf. mx_pack2(lo, hi): two floats to the
 *     storage type (round to nearest even), packed in a uint, lo low.
 *   mx_float(u), mx_store16(x): one storage value to float32 and back.
 *   mx_dot2(a, b): two packed pairs' products summed in float32 (the
 *     emulations' matrix units). */

inline float mx_float(ushort u) {
#if DTYPE == 2
    return as_float((uint)u << 16);
#else
    return vload_half(0, (const __private half *)&u);
#endif
}

inline ushort mx_store16(float x) {
#if DTYPE == 2
    return bf16_round(x); /* storage.cl's */
#else
    ushort h;
    vstore_half_rte(x, 0, (__private half *)&h);
    return h;
#endif
}

inline void mx_cp16(__local ushort *dst, __global const ushort *src, int bytes) {
    if (bytes == 16) /* dst and src are 16-byte aligned then */
        *(__local uint4 *)dst = *(__global const uint4 *)src;
    else
        for (int e = 0; e < 8; e++) dst[e] = 2 * e + 2 <= bytes ? src[e] : (ushort)0;
}

inline void mx_cp_commit(void) {}
#define mx_cp_wait(n) ((void)0)

inline float mx_exp2(float x) { return exp2(x); }

inline uint mx_pack2(float lo, float hi) {
    return (uint)mx_store16(lo) | ((uint)mx_store16(hi) << 16);
}

/* The pair's product summed in float32, as the matrix unit accumulates. */
inline float mx_dot2(uint a, uint b) {
    return mx_float((ushort)(a & 0xffffu)) * mx_float((ushort)(b & 0xffffu)) +
           mx_float((ushort)(a >> 16)) * mx_float((ushort)(b >> 16));
}

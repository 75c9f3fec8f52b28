/* mma_xe.cl's instructions (DPAS, sub-group reductions) in plain OpenCL C,
 * after mma_plain.cl, with the exact operand layouts of mma_xe_tile.cl's
 * interface: lanes exchange through the sub-group's scratch in local
 * memory, with barriers (so, as in mma_nv_emu.cl, every primitive is
 * called by the whole group together). FATTN_OPENCL_MATRIX=emulate-xe (16
 * lanes) or emulate-xe8 (8) selects it; CI runs the kernel with both on
 * PoCL, where no Intel GPU is. */

#ifndef XE_SG
#define XE_SG 16
#endif
/* Scratch per sub-group: XE_SG words for reductions, A as [lane][XE_AW],
 * B as [lane][8]. */
#define MX_XS_WORDS (XE_SG + XE_SG * 8 + XE_SG * 8)
#define MX_WARP XE_SG
#define XE_AW (XE_SG == 16 ? 4 : 8) /* uints of A's operand per lane */
#define MX_UNROLL _Pragma("nounroll") /* see mma_nv_emu.cl */
#define MX_KERNEL_ATTR

inline float mx_sg_max(float x, __local uint *xs) {
    xs[MX_LANE] = as_uint(x);
    barrier(CLK_LOCAL_MEM_FENCE);
    float r = -INFINITY;
    for (int i = 0; i < XE_SG; i++) r = fmax(r, as_float(xs[i]));
    barrier(CLK_LOCAL_MEM_FENCE);
    return r;
}

/* In lane order, as the hardware's tree need not be: the tests allow for it. */
inline float mx_sg_sum(float x, __local uint *xs) {
    xs[MX_LANE] = as_uint(x);
    barrier(CLK_LOCAL_MEM_FENCE);
    float r = 0.0f;
    for (int i = 0; i < XE_SG; i++) r += as_float(xs[i]);
    barrier(CLK_LOCAL_MEM_FENCE);
    return r;
}

/* The 16-bit value A[m][k] from the lanes' a operands in A. */
inline ushort mx_xe_a16(__local const uint *A, int m, int k) {
#if XE_SG == 16
    return (ushort)(A[k * 4 + m / 2] >> (16 * (m & 1)));
#else
    return (ushort)(A[(k / 2) * 8 + m] >> (16 * (k & 1)));
#endif
}

inline void mx_dpas(float c[8], const uint a[XE_AW], const uint b[8], __local uint *xs) {
    const int lane = MX_LANE;
    __local uint *A = xs + XE_SG, *B = xs + XE_SG + XE_SG * 8;
    for (int i = 0; i < XE_AW; i++) A[lane * XE_AW + i] = a[i];
    for (int i = 0; i < 8; i++) B[lane * 8 + i] = b[i];
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int m = 0; m < 8; m++) {
        float s = 0.0f;
        for (int k = 0; k < 16; k++)
            s += mx_float(mx_xe_a16(A, m, k)) * mx_float((ushort)(B[lane * 8 + k / 2] >> (16 * (k & 1))));
        c[m] += s;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
}

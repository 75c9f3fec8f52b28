/* mma_rdna.cl's instructions (WMMA 16x16x16 wave32, the half-wave exchange)
 * in plain OpenCL C, after mma_plain.cl, with the exact operand and
 * accumulator layouts of mma_rdna_tile.cl's interface: lanes exchange
 * through the warp's scratch in local memory, with barriers (so, as in
 * mma_nv_emu.cl, every primitive is called by the whole group together).
 * FATTN_OPENCL_MATRIX=emulate-rdna selects it; CI runs the kernel with it
 * on PoCL, where no AMD GPU is. */

/* Scratch per warp: 32 words for exchanges, A as [16 rows][8 k pairs], B
 * as [16 columns][8 k pairs]. */
#define MX_XS_WORDS (32 + 256)
#define MX_WARP 32 /* lanes per warp (wave) */
#define MX_KERNEL_ATTR /* nothing the kernel must declare */

#define MX_UNROLL _Pragma("nounroll") /* see mma_nv_emu.cl */

inline uint mx_swap16(uint x, __local uint *xs) {
    const int lane = MX_LANE;
    xs[lane] = x;
    barrier(CLK_LOCAL_MEM_FENCE);
    const uint y = xs[lane ^ 16];
    barrier(CLK_LOCAL_MEM_FENCE);
    return y;
}

inline void mx_wmma(float c[8], const uint a[8], const uint b[8], __local uint *xs) {
    const int lane = MX_LANE, col = lane & 15, h = lane >> 4;
    __local uint *A = xs + 32, *B = xs + 32 + 128;
    if (h == 0) /* the half-waves hold the same operands */
        for (int k = 0; k < 8; k++) {
            A[col * 8 + k] = a[k];
            B[col * 8 + k] = b[k];
        }
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int i = 0; i < 8; i++) {
        const int row = 2 * i + h;
        float s = 0.0f;
        for (int k = 0; k < 8; k++) s += mx_dot2(A[row * 8 + k], B[col * 8 + k]);
        c[i] += s;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
}

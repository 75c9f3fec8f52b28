/* mma_cdna.cl's instructions (MFMA 16x16x16 wave64, the cross-lane
 * exchange) in plain OpenCL C, after mma_plain.cl, with the exact operand
 * and accumulator layouts of mma_cdna_tile.cl's interface: lanes exchange
 * through the wave's scratch in local memory, with barriers (so, as in
 * mma_nv_emu.cl, every primitive is called by the whole group together).
 * FATTN_OPENCL_MATRIX=emulate-cdna selects it; CI runs the kernel with it
 * on PoCL, where no AMD GPU is. */

/* Scratch per wave: 64 words for exchanges, A and B as [lane][2]. */
#define MX_XS_WORDS (64 + 128 + 128)
#define MX_WARP 64 /* lanes per wave */
#define MX_KERNEL_ATTR /* nothing the kernel must declare */
#define MX_UNROLL _Pragma("nounroll") /* see mma_nv_emu.cl */

inline uint mx_xchg(uint x, int lane_xor, __local uint *xs) {
    const int lane = MX_LANE;
    xs[lane] = x;
    barrier(CLK_LOCAL_MEM_FENCE);
    const uint y = xs[lane ^ lane_xor];
    barrier(CLK_LOCAL_MEM_FENCE);
    return y;
}

/* Lane l's a holds A[l % 16][4 (l / 16) .. + 3], its b B[4 (l / 16) .. + 3]
 * [l % 16] (pairs, lower k low); c[i] is C[4 (l / 16) + i][l % 16]. */
inline void mx_mfma(float c[4], const uint a[2], const uint b[2], __local uint *xs) {
    const int lane = MX_LANE, col = lane & 15, q = lane >> 4;
    __local uint *A = xs + 64, *B = xs + 64 + 128;
    A[2 * lane] = a[0], A[2 * lane + 1] = a[1];
    B[2 * lane] = b[0], B[2 * lane + 1] = b[1];
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int i = 0; i < 4; i++) {
        const int row = 4 * q + i;
        float s = 0.0f;
        for (int kq = 0; kq < 4; kq++) /* k 4kq .. 4kq + 3: lanes 16 kq + row and + col */
            s += mx_dot2(A[2 * (16 * kq + row)], B[2 * (16 * kq + col)]) +
                 mx_dot2(A[2 * (16 * kq + row) + 1], B[2 * (16 * kq + col) + 1]);
        c[i] += s;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
}

/* mma_nv.cl's matrix-unit instructions (ldmatrix, mma.sync m16n8k16, quad
 * shuffles) in plain OpenCL C, after mma_plain.cl: each instruction's exact
 * fragment layout, with the lanes of a warp exchanging data through the
 * warp's scratch in local memory and barriers. It is slow; it exists so that the matrix kernel's fragment
 * bookkeeping (tiles, swizzle, masks, softmax on fragments) runs and is
 * tested on any OpenCL device, PoCL in CI included, where the instructions
 * themselves are not. FATTN_OPENCL_MATRIX=emulate selects it.
 *
 * Every primitive here holds barriers, so the kernel calls them from
 * control flow that all work-items of the group take together (it does:
 * the tile loops are uniform, and no primitive sits under a per-row test).
 *
 * Layouts (g = lane / 4, t = lane % 4; a pair is two 16-bit values in a
 * uint, the lower column or k in the low half):
 *   A (16 x 16, row-major): a0 = A[g][2t..], a1 = A[g+8][2t..],
 *                           a2 = A[g][2t+8..], a3 = A[g+8][2t+8..]
 *   B (16 x 8, k x n):      b0 = B[2t..][g], b1 = B[2t+8..][g]
 *   C (16 x 8):             c0 = C[g][2t], c1 = C[g][2t+1], c2 = C[g+8][2t], c3 = C[g+8][2t+1]
 *   ldmatrix:   r[i] = M_i[g][2t..];  .trans: r[i] = (M_i[2t][g], M_i[2t+1][g]) */

/* Scratch per warp: 32 words for lane exchanges, A as [16][8] pairs, B as
 * [8 n][8 k-pairs]. */
#define MX_XS_WORDS (32 + 128 + 64)
#define MX_WARP 32 /* lanes per warp (wave) */
#define MX_KERNEL_ATTR /* nothing the kernel must declare */

/* The kernel's fragment loops stay loops here: unrolled, each primitive's
 * barriers would be copied hundreds of times, and PoCL's compile time
 * grows much faster than that. */
#define MX_UNROLL _Pragma("nounroll")

/* mma_nv.cl's pin is for NVIDIA's compiler; here nothing to hide. */
inline int mx_pin(int x) { return x; }

inline uint mx_pair(__local const ushort *p) { return (uint)p[0] | ((uint)p[1] << 16); }

inline void mx_ldsm(uint r[4], __local const ushort *base, int off, __local uint *xs) {
    const int lane = MX_LANE, g = lane >> 2, t = lane & 3;
    xs[lane] = (uint)off;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int i = 0; i < 4; i++) r[i] = mx_pair(base + (int)xs[8 * i + g] + 2 * t);
    barrier(CLK_LOCAL_MEM_FENCE);
}

inline void mx_ldsm_t(uint r[4], __local const ushort *base, int off, __local uint *xs) {
    const int lane = MX_LANE, g = lane >> 2, t = lane & 3;
    xs[lane] = (uint)off;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int i = 0; i < 4; i++)
        r[i] = (uint)base[(int)xs[8 * i + 2 * t] + g] |
               ((uint)base[(int)xs[8 * i + 2 * t + 1] + g] << 16);
    barrier(CLK_LOCAL_MEM_FENCE);
}

/* One k-word of A times B: a pair's products (mx_dot2), or in TF32 (f32
 * storage: m16n8k8, whose fragments hold k = t and t + 4 where k16's hold
 * the pairs 2t and 2t + 8, so the same places) one product of the f32 bits
 * with their low 13 mantissa bits dropped, as the unit reads them. */
#if DTYPE == 0
inline float mx_word_dot(uint a, uint b) {
    return as_float(a & 0xffffe000u) * as_float(b & 0xffffe000u);
}
#else
#define mx_word_dot mx_dot2
#endif

inline void mx_mma(float c[4], const uint a[4], uint b0, uint b1, __local uint *xs) {
    const int lane = MX_LANE, g = lane >> 2, t = lane & 3;
    __local uint *A = xs + 32, *B = xs + 32 + 128;
    A[g * 8 + t] = a[0];
    A[(g + 8) * 8 + t] = a[1];
    A[g * 8 + t + 4] = a[2];
    A[(g + 8) * 8 + t + 4] = a[3];
    B[g * 8 + t] = b0;
    B[g * 8 + t + 4] = b1;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int e = 0; e < 4; e++) {
        const int row = g + (e >> 1) * 8, col = 2 * t + (e & 1);
        float s = 0.0f;
        for (int kp = 0; kp < 8; kp++) s += mx_word_dot(A[row * 8 + kp], B[col * 8 + kp]);
        c[e] += s;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
}

inline float mx_quad(float x, int want_max, __local uint *xs) {
    const int lane = MX_LANE, q = lane & ~3;
    xs[lane] = as_uint(x);
    barrier(CLK_LOCAL_MEM_FENCE);
    const float x0 = as_float(xs[q]), x1 = as_float(xs[q + 1]);
    const float x2 = as_float(xs[q + 2]), x3 = as_float(xs[q + 3]);
    barrier(CLK_LOCAL_MEM_FENCE);
    return want_max ? fmax(fmax(x0, x1), fmax(x2, x3)) : (x0 + x1) + (x2 + x3);
}

inline float mx_quad_max(float x, __local uint *xs) { return mx_quad(x, 1, xs); }
inline float mx_quad_sum(float x, __local uint *xs) { return mx_quad(x, 0, xs); }

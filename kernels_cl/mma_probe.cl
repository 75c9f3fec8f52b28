/* The matrix path's probe (ocl_mma.c), built after a primitive file (mma_nv.cl
 * or mma_emu.cl) in the problem's DTYPE: one warp runs each primitive the
 * kernel uses on known data, and the host checks the numbers, so a driver
 * that builds the instructions but computes something else is caught too.
 * in: A [16][16], K [8][16] and V [16][8] (16-bit storage); out: A K^T
 * (C layout, 4 per lane), A V (4 per lane), the quad sums and maxima of
 * lane numbers, and A K^T packed back to the storage type (2 per lane).
 * Loads go through mx_cp16 (V's second half zero-filled by a 0-byte copy,
 * so the host expects V rows 8..15 to be zero). */

__kernel __attribute__((reqd_work_group_size(32, 1, 1)))
void mma_probe(__global const ushort *in, __global float *out, __global uint *packed) {
    __local uint4 tiles[(256 + 128 + 128) / 8];
#if MX_XS_WORDS
    __local uint xs[MX_XS_WORDS];
#else
    __local uint *xs = 0;
#endif
    __local ushort *sa = (__local ushort *)tiles, *sk = sa + 256, *sv = sk + 128;
    const int lane = get_local_id(0);
    /* A: 32 chunks of 8; K: 16; V: 16 (rows 8..15 zero-filled). */
    mx_cp16(sa + lane * 8, in + lane * 8, 16);
    if (lane < 16) mx_cp16(sk + lane * 8, in + 256 + lane * 8, 16);
    if (lane < 16) mx_cp16(sv + lane * 8, in + 384 + lane * 8, lane < 8 ? 16 : 0);
    mx_cp_commit();
    mx_cp_wait(0);
    barrier(CLK_LOCAL_MEM_FENCE);

    uint a[4], kf[4], vf[4];
    /* A (16 x 16, rows of 16): matrices rows 0-7 / 8-15 x cols 0-7, then 8-15. */
    mx_ldsm(a, sa, ((lane & 7) + ((lane >> 3) & 1) * 8) * 16 + (lane >> 4) * 8, xs);
    /* K (8 keys x 16): x4 over keys 0-7 x cols 0-7 / 8-15, twice. */
    mx_ldsm(kf, sk, (lane & 7) * 16 + ((lane >> 3) & 1) * 8, xs);
    /* V (16 keys x 8 dims), transposed: keys 0-7 / 8-15, twice. */
    mx_ldsm_t(vf, sv, ((lane & 7) + ((lane >> 3) & 1) * 8) * 8, xs);
    float c[4] = {0.0f, 0.0f, 0.0f, 0.0f}, d[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    mx_mma(c, a, kf[0], kf[1], xs);
    mx_mma(d, a, vf[0], vf[1], xs);
    const float qs = mx_quad_sum((float)lane, xs), qm = mx_quad_max((float)lane, xs);
    for (int e = 0; e < 4; e++) {
        out[lane * 10 + e] = c[e];
        out[lane * 10 + 4 + e] = d[e];
    }
    out[lane * 10 + 8] = qs;
    out[lane * 10 + 9] = qm + mx_exp2(-INFINITY); /* exp2(-inf) must be 0 */
    packed[lane * 2] = mx_pack2(c[0], c[1]);
    packed[lane * 2 + 1] = mx_pack2(c[2], c[3]);
}

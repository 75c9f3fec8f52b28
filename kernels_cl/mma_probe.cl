/* The matrix path's probe (ocl_mma.c), built after a vendor's files (see
 * mma_common.cl) with -DDPAD=32 -DBM=16 -DBN=16 -DNW=1 in the dtype asked:
 * one warp runs the tile functions the kernel uses on known data, and the
 * host checks every number, so a driver that builds the instructions but
 * computes something else (or a tile file whose layout bookkeeping is
 * wrong) is caught before the kernel is chosen.
 * in: Q, K, V, each [16][32] (row-major, in the storage type: 16-bit, or
 * f32 for TF32 as EW units an element). out (floats,
 * poisoned by the host, so what no lane writes shows): S = Q K^T [16][16],
 * O = S V [16][32] (S through the storage type, as P is; V's rows 8..15
 * are zero-filled by 0-byte copies), each row's max and sum of S, then
 * exp2(-inf) + exp2(1). */

__kernel __attribute__((reqd_work_group_size(MX_WARP, 1, 1))) MX_KERNEL_ATTR
void mma_probe(__global const ushort *in, __global float *out) {
    __local uint4 tiles[3 * 16 * 32 * EW / 8];
#if MX_XS_WORDS
    __local uint xs[MX_XS_WORDS];
#else
    __local uint *xs = 0;
#endif
    __local ushort *sq = (__local ushort *)tiles, *sk = sq + 512 * EW, *sv = sk + 512 * EW;
    const int lane = MX_LANE;
    for (int c = lane; c < 16 * CHQ; c += MX_WARP) { /* 16 rows x CHQ chunks per operand */
        const int r = c / CHQ, x = c % CHQ, at = (r * 32 + x * 8 / EW) * EW;
        mx_cp16(sq + TILE_OFF(r, x, CHQ), in + at, 16);
        mx_cp16(sk + TILE_OFF(r, x, CHQ), in + 512 * EW + at, 16);
#if MX_VT /* transposed: dims x keys, one element at a time */
        for (int u = 0; u < 8; u += EW) {
            const int d = (x * 8 + u) / EW, ku = r * EW;
            for (int w = 0; w < EW; w++)
                sv[TILE_OFF(d, ku >> 3, CHVT) + (ku & 7) + w] = r < 8 ? in[1024 * EW + at + u + w] : 0;
        }
#else
        mx_cp16(sv + TILE_OFF(r, x, CHQ), in + 1024 * EW + at, r < 8 ? 16 : 0);
#endif
    }
    mx_cp_commit();
    mx_cp_wait(0);
    barrier(CLK_LOCAL_MEM_FENCE);

    /* The 16 rows are MT row tiles (BM = 16, NW = 1). */
    float s[MT][NS][MX_CE], o[MT][ND][MX_CE];
    for (int mt = 0; mt < MT; mt++) {
        for (int nt = 0; nt < NS; nt++)
            for (int e = 0; e < MX_CE; e++) s[mt][nt][e] = 0.0f;
        for (int dt = 0; dt < ND; dt++)
            for (int e = 0; e < MX_CE; e++) o[mt][dt][e] = 0.0f;
    }
    for (int kk = 0; kk < KD; kk++) {
        uint qa[MT][MX_QW];
        for (int mt = 0; mt < MT; mt++) mx_load_q(qa[mt], sq, mt * MX_TQ, kk, xs);
        mx_qk_step(s, qa, sk, kk, xs);
    }
    for (int mt = 0; mt < MT; mt++) {
        for (int nt = 0; nt < NS; nt++)
            for (int e = 0; e < MX_CE; e++)
                out[(mt * MX_TQ + mx_slot_row(mx_el_slot(e))) * 16 + nt * MX_TK + mx_key_col(e)] =
                    s[mt][nt][e];
        for (int hh = 0; hh < MX_RS; hh++) {
            float mx = -INFINITY, sum = 0.0f;
            for (int nt = 0; nt < NS; nt++)
                for (int e = 0; e < MX_CE; e++)
                    if (mx_el_slot(e) == hh) {
                        mx = fmax(mx, s[mt][nt][e]);
                        sum += s[mt][nt][e];
                    }
            mx = mx_row_max(mx, xs);
            sum = mx_row_sum(sum, xs);
            if (mx_row_owner()) {
                out[768 + mt * MX_TQ + mx_slot_row(hh)] = mx;
                out[784 + mt * MX_TQ + mx_slot_row(hh)] = sum;
            }
        }
    }
    mx_pv(o, s, sv, xs);
    for (int mt = 0; mt < MT; mt++)
        for (int dt = 0; dt < ND; dt++)
            for (int e = 0; e < MX_CE; e++)
                out[256 + (mt * MX_TQ + mx_slot_row(mx_el_slot(e))) * 32 + dt * MX_TD + mx_el_col(e)] =
                    o[mt][dt][e];
    if (lane == 0) out[800] = mx_exp2(-INFINITY) + mx_exp2(1.0f);
}

/* Intel XMX (DPAS) tiles for flash_mma.cl, through
 * cl_intel_subgroup_matrix_multiply_accumulate (mma_xe.cl, or its
 * emulation mma_xe_emu.cl), for sub-groups of 16 (Xe-HPC, Xe2) or 8
 * (Xe-HPG) work-items: MX_WARP. DPAS computes 8 rows x MX_WARP columns,
 * k16, and gives lane l column l of all 8 rows; so S = Q K^T puts one key
 * per lane and the row tile's 8 queries in its 8 accumulators, a row's max
 * and sum reduce across the sub-group, and O's tiles hold one dim per lane.
 *
 * The instruction interface (per lane of the sub-group):
 *   mx_dpas(c, a, b, xs): c[m] += sum_k A[m][k] B[k][l], k < 16, f16 or
 *     bf16 (DTYPE 1 or 2), float32 accumulation. a: the lane's share of
 *     A's 8 rows (MX_QW uints: with 16 lanes, A[m][l] in the half m % 2 of
 *     a[m / 2]; with 8, the pair A[m][2l], A[m][2l + 1] in a[m]); b: B's
 *     column l as 8 pairs (k = 2i, 2i + 1 in b[i], lower k low).
 *   mx_sg_max(x, xs), mx_sg_sum(x, xs): over the sub-group.
 *
 * P feeds P V as A straight from S's accumulators: with 16 lanes an S tile
 * is one k16 step (lane l holds key l); with 8, S tiles 2kb and 2kb + 1
 * (keys l and 8 + l of lane l) pack into the pair k = 2l, 2l + 1, and V's
 * B operand is gathered in that key order. */

#if DTYPE == 0
#error "mma_xe_tile.cl: no TF32 tiles for Intel XMX; f32 takes the scalar kernel"
#endif
#define MX_VT 0
#define MX_TQ 8
#define MX_TK MX_WARP
#define MX_TD MX_WARP
#define MX_CE 8
#define MX_RS 8
#define MX_QW XE_AW
#define MX_PAIRS 0 /* a lane's elements are one column of 8 rows */

inline int mx_slot_row(int slot) { return slot; }
inline int mx_el_slot(int e) { return e; }
inline int mx_el_col(int e) { return MX_LANE; }
inline int mx_key_col(int e) { return MX_LANE; }
inline int mx_row_owner(void) { return MX_LANE == 0; }
inline float mx_row_max(float x, __local uint *xs) { return mx_sg_max(x, xs); }
inline float mx_row_sum(float x, __local uint *xs) { return mx_sg_sum(x, xs); }

/* Q's A operand for rows r0 .. r0 + 7, dims 16 kk .. 16 kk + 15. */
inline void mx_load_q(uint qf[MX_QW], __local const ushort *sq, int r0, int kk,
                      __local uint *xs) {
    const int lane = MX_LANE;
#if MX_WARP == 16
    for (int i = 0; i < 4; i++)
        qf[i] = (uint)sq[TILE_EL(r0 + 2 * i, 16 * kk + lane, CHQ)] |
                ((uint)sq[TILE_EL(r0 + 2 * i + 1, 16 * kk + lane, CHQ)] << 16);
#else
    for (int m = 0; m < 8; m++)
        qf[m] = *(__local const uint *)(sq + TILE_EL(r0 + m, 16 * kk + 2 * lane, CHQ));
#endif
}

/* S[mt][nt] += Q K^T over k16 step kk: K's B operand is key row
 * MX_TK nt + l, used by MT instructions. */
inline void mx_qk_step(float s[MT][NS][MX_CE], uint qa[MT][MX_QW], __local const ushort *kt,
                       int kk, __local uint *xs) {
MX_UNROLL
    for (int nt = 0; nt < NS; ++nt) {
        uint kf[8];
        mx_row16(kf, kt, nt * MX_TK + MX_LANE, kk, CHQ);
MX_UNROLL
        for (int mt = 0; mt < MT; ++mt) mx_dpas(s[mt][nt], qa[mt], kf, xs);
    }
}

/* O[mt][*] += P V, 16 keys a step: P's A operand from S's accumulators,
 * V's B operand gathered down the tile's column of dim MX_TD dt + l. */
inline void mx_pv(float o[MT][ND][MX_CE], float s[MT][NS][MX_CE], __local const ushort *vt,
                  __local uint *xs) {
    const int lane = MX_LANE;
MX_UNROLL
    for (int kb = 0; kb < BN / 16; ++kb) {
        uint pa[MT][MX_QW];
MX_UNROLL
        for (int mt = 0; mt < MT; ++mt)
#if MX_WARP == 16
            for (int i = 0; i < 4; i++) pa[mt][i] = mx_pack2(s[mt][kb][2 * i], s[mt][kb][2 * i + 1]);
#else
            for (int m = 0; m < 8; m++) pa[mt][m] = mx_pack2(s[mt][2 * kb][m], s[mt][2 * kb + 1][m]);
#endif
MX_UNROLL
        for (int dt = 0; dt < ND; ++dt) {
            const int d = dt * MX_TD + lane;
            uint vb[8];
            for (int i = 0; i < 8; ++i) {
#if MX_WARP == 16 /* k = 2i, 2i + 1: keys 2i, 2i + 1 */
                const int k0 = kb * 16 + 2 * i, k1 = k0 + 1;
#else /* k = 2i, 2i + 1: keys i, 8 + i */
                const int k0 = kb * 16 + i, k1 = k0 + 8;
#endif
                vb[i] = (uint)vt[TILE_EL(k0, d, CHV)] | ((uint)vt[TILE_EL(k1, d, CHV)] << 16);
            }
MX_UNROLL
            for (int mt = 0; mt < MT; ++mt) mx_dpas(o[mt][dt], pa[mt], vb, xs);
        }
    }
}

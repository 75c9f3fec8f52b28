/* AMD CDNA MFMA tiles for flash_mma.cl: 16x16x16 wave64 (mma_cdna.cl, or
 * its emulation mma_cdna_emu.cl). MFMA's accumulator gives lane l rows
 * 4 (l / 16) .. + 3 of column l % 16, so S is computed transposed, S^T =
 * K Q^T, and O as O^T = V^T P^T: a lane holds one query (l % 16) and 4
 * consecutive keys (or dims) of a 16-wide tile, a row's max and sum take
 * two exchanges (lanes l ^ 16, l ^ 32), and S^T's accumulators are P^T's
 * B operand as they stand.
 *
 * The instruction interface (per lane of a 64-wide wave, q = l / 16):
 *   mx_mfma(c, a, b, xs): c += A B for one 16x16x16 tile, f16 or bf16
 *     (DTYPE 1 or 2), float32 accumulation; a: A[l % 16][4q .. 4q + 3], b:
 *     B[4q .. 4q + 3][l % 16], each as 2 uints of k pairs (lower k in the
 *     low half); c[i]: C[4q + i][l % 16].
 *   mx_xchg(x, m, xs): x of lane l ^ m. */

#if DTYPE == 0
#error "mma_cdna_tile.cl: no TF32 tiles for CDNA; f32 takes the scalar kernel"
#endif
#define MX_VT 0
#define MX_TQ 16
#define MX_TK 16
#define MX_TD 16
#define MX_CE 4
#define MX_RS 1
#define MX_QW 2
#define MX_PAIRS 1 /* elements 2i and 2i + 1 are adjacent keys or dims of one row */

inline int mx_slot_row(int slot) { return MX_LANE & 15; }
inline int mx_el_slot(int e) { return 0; }
inline int mx_el_col(int e) { return 4 * (MX_LANE >> 4) + e; }
inline int mx_key_col(int e) { return mx_el_col(e); }
inline int mx_row_owner(void) { return MX_LANE < 16; }
inline float mx_row_max(float x, __local uint *xs) {
    x = fmax(x, as_float(mx_xchg(as_uint(x), 16, xs)));
    return fmax(x, as_float(mx_xchg(as_uint(x), 32, xs)));
}
inline float mx_row_sum(float x, __local uint *xs) {
    x += as_float(mx_xchg(as_uint(x), 16, xs));
    return x + as_float(mx_xchg(as_uint(x), 32, xs));
}

/* 4 consecutive 16-bit values of row r (dims 16 kk + 4 (l / 16) ..). */
inline void mx_row4(uint f[2], __local const ushort *t, int r, int kk, int ch) {
    const uint2 x = *(__local const uint2 *)(t + TILE_EL(r, 16 * kk + 4 * (MX_LANE >> 4), ch));
    f[0] = x.x, f[1] = x.y;
}

/* Q^T's B operand: query r0 + l % 16. */
inline void mx_load_q(uint qf[MX_QW], __local const ushort *sq, int r0, int kk,
                      __local uint *xs) {
    mx_row4(qf, sq, r0 + (MX_LANE & 15), kk, CHQ);
}

/* S^T[mt][nt] += K Q^T over k16 step kk: K's A operand is key row
 * 16 nt + l % 16, used by MT instructions. */
inline void mx_qk_step(float s[MT][NS][MX_CE], uint qa[MT][MX_QW], __local const ushort *kt,
                       int kk, __local uint *xs) {
MX_UNROLL
    for (int nt = 0; nt < NS; ++nt) {
        uint kf[2];
        mx_row4(kf, kt, nt * 16 + (MX_LANE & 15), kk, CHQ);
MX_UNROLL
        for (int mt = 0; mt < MT; ++mt) mx_mfma(s[mt][nt], kf, qa[mt], xs);
    }
}

/* O^T[mt][*] += V^T P^T, S tile kk being a k16 step: P^T's B operand is
 * the tile's accumulators packed; V^T's A operand, dim 16 dt + l % 16 over
 * keys 16 kk + 4 (l / 16) .. + 3, is read down V's column. */
inline void mx_pv(float o[MT][ND][MX_CE], float s[MT][NS][MX_CE], __local const ushort *vt,
                  __local uint *xs) {
    const int lane = MX_LANE, k4 = 4 * (lane >> 4);
MX_UNROLL
    for (int kk = 0; kk < NS; ++kk) {
        uint pb[MT][2];
MX_UNROLL
        for (int mt = 0; mt < MT; ++mt) {
            pb[mt][0] = mx_pack2(s[mt][kk][0], s[mt][kk][1]);
            pb[mt][1] = mx_pack2(s[mt][kk][2], s[mt][kk][3]);
        }
MX_UNROLL
        for (int dt = 0; dt < ND; ++dt) {
            const int d = dt * 16 + (lane & 15), k0 = kk * 16 + k4;
            uint va[2];
            va[0] = (uint)vt[TILE_EL(k0, d, CHV)] | ((uint)vt[TILE_EL(k0 + 1, d, CHV)] << 16);
            va[1] = (uint)vt[TILE_EL(k0 + 2, d, CHV)] | ((uint)vt[TILE_EL(k0 + 3, d, CHV)] << 16);
MX_UNROLL
            for (int mt = 0; mt < MT; ++mt) mx_mfma(o[mt][dt], va, pb[mt], xs);
        }
    }
}

/* NVIDIA tensor-core tiles for flash_mma.cl: mma.sync m16n8k16 with ldmatrix
 * loads (mma_nv.cl, or its emulation mma_nv_emu.cl). S = Q K^T and O += P V
 * in the usual orientation: a lane holds 2 query rows (g = lane / 4 and
 * g + 8) x 2 adjacent columns (2 (lane % 4) + 0, 1) of each 16 x 8 tile,
 * so a row's values live in a quad, and S's accumulator tiles 2kk and
 * 2kk + 1 are exactly the A fragment of P for k16 step kk: P never leaves
 * registers.
 *
 * TF32 (DTYPE 0, f32 storage): m16n8k8, whose A fragment holds columns t
 * and t + 4 (t = lane % 4) where f16's holds the pair 2t, 2t + 1. An 8x8
 * matrix load of 16-bit units gives a lane one f32 of column t of its
 * chunk, so Q's and K's fragments load as in f16 (a k8 step is two
 * chunks). For P V the keys of an S tile are permuted: S column 2t + i
 * holds key t + 4i (the ldmatrix row addresses of K do it), so the lane's
 * accumulators are P's A fragment as they stand, and V is stored
 * transposed (MX_VT), where a plain matrix load gives V's B fragment. */

#define MX_TQ 16  /* queries per row tile */
#define MX_TK 8   /* keys per S tile */
#define MX_TD 8   /* dims per O tile */
#define MX_CE 4   /* accumulator floats per lane and tile */
#define MX_RS 2   /* query rows per lane and row tile */
#define MX_QW 4   /* uints of Q's fragment (one row tile, one k16 step) */
#define MX_PAIRS 1 /* elements 2i and 2i + 1 are adjacent columns of one row */
#define MX_TF32 (DTYPE == 0)
#define MX_VT MX_TF32

/* The offset of a lane's fragment row r0 + r, chunk c0 + c of a tile:
 * (r0, c0) the lane's own, (r, c) constants of one sweep of loads
 * (MX_SWEEP declares the sweep, MX_AT names a load; the loads take the
 * tile's base and this offset). With padded rows (PADL) that is the lane's
 * offset plus a constant, which the load takes as an immediate; the lane's
 * offset is pinned (mx_pin) at each sweep, or NVIDIA's compiler hoists
 * every (r, c) address out of the key loop into a register of its own
 * (call124: the spills of d128's 64-key shapes). Swizzled, the XOR gives
 * each pair its own address anyway. */
#if PADL
#define MX_SWEEP(r0, c0, ch) const int sw_ = mx_pin(TILE_OFF(r0, c0, ch))
#define MX_AT(r0, c0, ch, r, c) (sw_ + (r) * ROW_UNITS(ch) + (c) * 8)
#else
#define MX_SWEEP(r0, c0, ch)
#define MX_AT(r0, c0, ch, r, c) TILE_OFF((r0) + (r), (c0) + (c), ch)
#endif

inline int mx_slot_row(int slot) { return (MX_LANE >> 2) + 8 * slot; }
inline int mx_el_slot(int e) { return e >> 1; }
inline int mx_el_col(int e) { return 2 * (MX_LANE & 3) + (e & 1); }
#if MX_TF32
inline int mx_key_col(int e) { return (MX_LANE & 3) + 4 * (e & 1); }
#define MX_KEY_ROW(n) (((n) >> 1) + 4 * ((n) & 1)) /* the key S column n holds */
#else
inline int mx_key_col(int e) { return mx_el_col(e); }
#define MX_KEY_ROW(n) (n)
#endif
inline int mx_row_owner(void) { return (MX_LANE & 3) == 0; } /* writes the row's lse */
inline float mx_row_max(float x, __local uint *xs) { return mx_quad_max(x, xs); }
inline float mx_row_sum(float x, __local uint *xs) { return mx_quad_sum(x, xs); }

/* Q's A fragment for the row tile at row r0 of sq, k16 step kk: matrices
 * rows 0-7 / 8-15 x the step's first chunk, then its second. */
inline void mx_load_q(uint qf[MX_QW], __local const ushort *sq, int r0, int kk,
                      __local uint *xs) {
    const int lane = MX_LANE;
    const int qr = (lane & 7) + ((lane >> 3) & 1) * 8, qc = lane >> 4;
    MX_SWEEP(r0 + qr, qc, CHQ);
    mx_ldsm(qf, sq, MX_AT(r0 + qr, qc, CHQ, 0, kk * 2), xs);
}

/* S[mt][*] += Q K^T over k16 step kk of the tile's keys kt. One ldmatrix
 * .x4 gives keys 0-7 x both chunks, then keys 8-15: B fragments of two n8
 * tiles, each feeding MT mma instructions. */
inline void mx_qk_step(float s[MT][NS][MX_CE], uint qa[MT][MX_QW], __local const ushort *kt,
                       int kk, __local uint *xs) {
    const int lane = MX_LANE;
    const int kr = MX_KEY_ROW(lane & 7) + (lane >> 4) * 8, kc = (lane >> 3) & 1;
    MX_SWEEP(kr, kc, CHQ);
MX_UNROLL
    for (int np = 0; np < NS / 2; ++np) {
        uint kf[4];
        mx_ldsm(kf, kt, MX_AT(kr, kc, CHQ, np * 16, kk * 2), xs);
MX_UNROLL
        for (int mt = 0; mt < MT; ++mt) {
            mx_mma(s[mt][2 * np], qa[mt], kf[0], kf[1], xs);
            mx_mma(s[mt][2 * np + 1], qa[mt], kf[2], kf[3], xs);
        }
    }
}

#if MX_TF32
/* O[mt][*] += P V in TF32, k8 step kk being S tile kk (keys permuted, see
 * above): P's A fragment is the tile's accumulators (c0, c2, c1, c3: rows
 * g, g + 8 x keys t, t + 4); V^T's matrices (dims 0-7 / 8-15 x the tile's
 * first 4 keys, then its last 4) are the B fragments of two n8 tiles. */
inline void mx_pv(float o[MT][ND][MX_CE], float s[MT][NS][MX_CE], __local const ushort *vt,
                  __local uint *xs) {
    const int lane = MX_LANE;
    const int vr = (lane & 7) + (lane >> 4) * 8, vc = (lane >> 3) & 1;
    MX_SWEEP(vr, vc, CHVT);
MX_UNROLL
    for (int kk = 0; kk < NS; ++kk) {
        uint pa[MT][4];
MX_UNROLL
        for (int mt = 0; mt < MT; ++mt) {
            pa[mt][0] = as_uint(s[mt][kk][0]);
            pa[mt][1] = as_uint(s[mt][kk][2]);
            pa[mt][2] = as_uint(s[mt][kk][1]);
            pa[mt][3] = as_uint(s[mt][kk][3]);
        }
MX_UNROLL
        for (int dp = 0; dp < ND / 2; ++dp) {
            uint vf[4];
            mx_ldsm(vf, vt, MX_AT(vr, vc, CHVT, dp * 16, kk * 2), xs);
MX_UNROLL
            for (int mt = 0; mt < MT; ++mt) {
                mx_mma(o[mt][2 * dp], pa[mt], vf[0], vf[1], xs);
                mx_mma(o[mt][2 * dp + 1], pa[mt], vf[2], vf[3], xs);
            }
        }
    }
}
#else
/* O[mt][*] += P V, P being S's probabilities: the C fragments of n8 tiles
 * 2kk and 2kk + 1 packed are the A fragment of k16 step kk; V's B
 * fragments come from ldmatrix .trans (keys 0-7 / 8-15 x a chunk, then the
 * next chunk). */
inline void mx_pv(float o[MT][ND][MX_CE], float s[MT][NS][MX_CE], __local const ushort *vt,
                  __local uint *xs) {
    const int lane = MX_LANE;
    const int vr = (lane & 7) + ((lane >> 3) & 1) * 8, vc = lane >> 4;
    MX_SWEEP(vr, vc, CHV);
MX_UNROLL
    for (int kk = 0; kk < BN / 16; ++kk) {
        uint pa[MT][4];
MX_UNROLL
        for (int mt = 0; mt < MT; ++mt) {
            pa[mt][0] = mx_pack2(s[mt][2 * kk][0], s[mt][2 * kk][1]);
            pa[mt][1] = mx_pack2(s[mt][2 * kk][2], s[mt][2 * kk][3]);
            pa[mt][2] = mx_pack2(s[mt][2 * kk + 1][0], s[mt][2 * kk + 1][1]);
            pa[mt][3] = mx_pack2(s[mt][2 * kk + 1][2], s[mt][2 * kk + 1][3]);
        }
MX_UNROLL
        for (int dp = 0; dp < ND / 2; ++dp) {
            uint vf[4];
            mx_ldsm_t(vf, vt, MX_AT(vr, vc, CHV, kk * 16, dp * 2), xs);
MX_UNROLL
            for (int mt = 0; mt < MT; ++mt) {
                mx_mma(o[mt][2 * dp], pa[mt], vf[0], vf[1], xs);
                mx_mma(o[mt][2 * dp + 1], pa[mt], vf[2], vf[3], xs);
            }
        }
    }
}
#endif

/* AMD RDNA3 WMMA tiles for flash_mma.cl: 16x16x16 wave32 (mma_rdna.cl, or
 * its emulation mma_rdna_emu.cl). WMMA's accumulator gives lane l column
 * l % 16 of rows 2i + l / 16, so S is computed transposed, S^T = K Q^T,
 * and O as O^T = V^T P^T: a lane then holds one query (l % 16) and 8 of a
 * 16-key tile's keys (2i + l / 16), the other 8 in lane l ^ 16, so a
 * row's max and sum take one exchange, and P^T's B operand is the lane's
 * own probabilities interleaved with its partner's. A and B operands are
 * replicated in both half-waves (lanes l and l ^ 16 load the same row).
 *
 * The instruction interface (per lane of a 32-wide wave):
 *   mx_wmma(c, a, b, xs): c += A B for one 16x16x16 tile, f16 or bf16
 *     (DTYPE 1 or 2), float32 accumulation; a: row l % 16 of A, b: column
 *     l % 16 of B, as 8 uints of k pairs (lower k in the low half); c[i]:
 *     C[2i + l / 16][l % 16].
 *   mx_swap16(x, xs): x of lane l ^ 16. */

#if DTYPE == 0
#error "mma_rdna_tile.cl: RDNA3's WMMA has no TF32; f32 takes the scalar kernel"
#endif
#define MX_VT 0
#define MX_TQ 16
#define MX_TK 16
#define MX_TD 16
#define MX_CE 8
#define MX_RS 1
#define MX_QW 8
#define MX_PAIRS 0 /* a lane's elements are every other key or dim */

inline int mx_slot_row(int slot) { return MX_LANE & 15; }
inline int mx_el_slot(int e) { return 0; }
inline int mx_el_col(int e) { return 2 * e + (MX_LANE >> 4); }
inline int mx_key_col(int e) { return mx_el_col(e); }
inline int mx_row_owner(void) { return MX_LANE < 16; }
inline float mx_row_max(float x, __local uint *xs) {
    return fmax(x, as_float(mx_swap16(as_uint(x), xs)));
}
inline float mx_row_sum(float x, __local uint *xs) {
    return x + as_float(mx_swap16(as_uint(x), xs));
}

/* Q^T's B operand: query r0 + l % 16, dims 16 kk .. 16 kk + 15. */
inline void mx_load_q(uint qf[MX_QW], __local const ushort *sq, int r0, int kk,
                      __local uint *xs) {
    mx_row16(qf, sq, r0 + (MX_LANE & 15), kk, CHQ);
}

/* S^T[mt][nt] += K Q^T over k16 step kk: K's A operand is key row
 * 16 nt + l % 16, used by MT instructions. */
inline void mx_qk_step(float s[MT][NS][MX_CE], uint qa[MT][MX_QW], __local const ushort *kt,
                       int kk, __local uint *xs) {
MX_UNROLL
    for (int nt = 0; nt < NS; ++nt) {
        uint kf[8];
        mx_row16(kf, kt, nt * 16 + (MX_LANE & 15), kk, CHQ);
MX_UNROLL
        for (int mt = 0; mt < MT; ++mt) mx_wmma(s[mt][nt], kf, qa[mt], xs);
    }
}

/* O^T[mt][*] += V^T P^T. P^T's B operand for key tile kk: the lane's keys
 * 2i + h (h = l / 16) and its partner's 2i + 1 - h, in key order (pairs
 * packed first, so 4 exchanges, not 8). V^T's A operand: dim row
 * 16 dt + l % 16 over the tile's 16 keys, read down V's column. */
inline void mx_pv(float o[MT][ND][MX_CE], float s[MT][NS][MX_CE], __local const ushort *vt,
                  __local uint *xs) {
    const int lane = MX_LANE, h = lane >> 4;
MX_UNROLL
    for (int kk = 0; kk < NS; ++kk) {
        uint pb[MT][8];
MX_UNROLL
        for (int mt = 0; mt < MT; ++mt)
MX_UNROLL
            for (int j = 0; j < 4; ++j) {
                /* mine: keys 4j + h, 4j + 2 + h; theirs: 4j + 1 - h, 4j + 3 - h */
                const uint w = mx_pack2(s[mt][kk][2 * j], s[mt][kk][2 * j + 1]);
                const uint x = mx_swap16(w, xs);
                const uint ev = h ? x : w, od = h ? w : x; /* keys 4j, 4j+2 / 4j+1, 4j+3 */
                pb[mt][2 * j] = (ev & 0xffffu) | (od << 16);
                pb[mt][2 * j + 1] = (ev >> 16) | (od & 0xffff0000u);
            }
MX_UNROLL
        for (int dt = 0; dt < ND; ++dt) {
            const int d = dt * 16 + (lane & 15);
            uint va[8];
MX_UNROLL
            for (int k = 0; k < 8; ++k)
                va[k] = (uint)vt[TILE_EL(kk * 16 + 2 * k, d, CHV)] |
                        ((uint)vt[TILE_EL(kk * 16 + 2 * k + 1, d, CHV)] << 16);
MX_UNROLL
            for (int mt = 0; mt < MT; ++mt) mx_wmma(o[mt][dt], va, pb[mt], xs);
        }
    }
}

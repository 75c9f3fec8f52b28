/* The matrix kernel's shape and local-memory layout, shared by every vendor:
 * the host joins mma_common.cl, a vendor's instruction file (mma_nv.cl,
 * mma_rdna.cl, mma_xe.cl, or their plain-OpenCL emulations), the vendor's
 * tile file (mma_nv_tile.cl, mma_rdna_tile.cl, mma_xe_tile.cl) and
 * flash_mma.cl (or mma_probe.cl).
 *
 * The instruction file says how wide a warp (sub-group, wave) is, MX_WARP
 * lanes, and what the kernels must declare for it (MX_KERNEL_ATTR, e.g.
 * Intel's required sub-group size); the tile file how its instructions lay
 * tiles out across it: an S tile is MX_TQ queries x MX_TK keys and an O
 * tile MX_TQ queries x MX_TD dims, MX_CE floats per lane, which cover
 * MX_RS query rows of the lane (mx_slot_row) and, in slot mx_el_slot(e),
 * key mx_key_col(e) of an S tile and dim mx_el_col(e) of an O tile. MX_VT:
 * V is stored transposed (dims x keys, CHVT chunks a row; flash_mma.cl's
 * load_rows_t). The tile file's functions (mx_load_q, mx_qk_step, mx_pv, mx_row_max/_sum) do the
 * matrix work of one tile; flash_mma.cl does the rest. The derived counts
 * below are macros, so they may name constants defined later. */

#ifndef DPAD
#define DPAD 64 /* Q and K head dim bucket (the run-time D is <= DPAD) */
#endif
#ifndef DVPAD
#define DVPAD DPAD /* V and O */
#endif
#ifndef BM
#define BM 128 /* query rows per group */
#endif
#ifndef BN
#define BN 64 /* keys per tile */
#endif
#ifndef NW
#define NW 4 /* warps per group */
#endif
#ifndef QREG
#define QREG 1 /* Q's fragments in registers (else re-read from local memory per k-step) */
#endif
#ifndef STAGES
#define STAGES 1 /* K/V buffers: 1 (staggered) or 2 (tile j+1 loads while tile j runs) */
#endif
#ifndef FOLD
#define FOLD 0 /* the softmax scale folded into the exponent's FMA (scale > 0, no variants) */
#endif
#if FATTN_VAR
#undef FOLD
#define FOLD 0 /* the variants rescore scaled scores */
#endif

/* Storage units (16-bit) per element: 2 for f32, which the matrix units
 * take as TF32 (DTYPE 0, only with a tile file that says MX_TF32). Tiles
 * in local memory hold units, so an f32 row is twice as many 16-byte
 * chunks and an 8x8 matrix load of units gives a lane one f32. */
#if DTYPE == 0
#define EW 2
#else
#define EW 1
#endif

#define NT (NW * MX_WARP)         /* work-items per group */
#define MT (BM / (MX_TQ * NW))    /* row tiles per warp */
#define CHQ (DPAD * EW / 8)       /* 16-byte chunks per Q or K row */
#define CHV (DVPAD * EW / 8)      /* per V row */
#define CHVT (BN * EW / 8)        /* per row of V^T (the tile files with MX_VT) */
#define KD (CHQ / 2)              /* k-steps of Q K^T: k16 in 16-bit, k8 in TF32 */
#define NS (BN / MX_TK)           /* S tiles per row tile */
#define ND (DVPAD / MX_TD)        /* O tiles per row tile */
#define MX_LANE ((int)get_local_id(0) % MX_WARP)

/* Rows of 16-bit elements are stored in 16-byte chunks, laid out one of
 * two ways so that the 8 rows one 8x8 matrix load reads (same logical
 * chunk) hit 8 different bank groups:
 * - PADL 0: a chunk's index is XORed with the row's place in a run of 8
 *   rows of 128 bytes (no padding: tiles fit the 48 KiB most devices give
 *   a group);
 * - PADL 1: each row is padded by one chunk (an odd number of chunks a
 *   row, as ch is even). A lane's address for chunk c of row r is then its
 *   own base plus a constant, where the XOR makes every (row, chunk) pair a
 *   lane uses its own register: under NVIDIA's OpenCL compiler those
 *   offsets, hoisted out of the key loop, were what pushed d128's
 *   double-buffered shapes past 255 registers.
 * ch: chunks per row (without the pad). */
#ifndef PADL
#define PADL 0
#endif
#define ROW_UNITS(ch) (((ch) + PADL) * 8) /* 16-bit units a tile row takes */
#define SWZ(r, ch) (PADL ? 0 : (ch) >= 8 ? ((r) & 7) : (((r) / (8 / (ch))) & ((ch) - 1)))
/* Element offset of (row r, chunk c) in a tile of ch chunks per row. */
#define TILE_OFF(r, c, ch) ((r) * ROW_UNITS(ch) + (((c) ^ SWZ(r, ch)) << 3))
/* Element offset of (row r, element x). */
#define TILE_EL(r, x, ch) (TILE_OFF(r, (x) >> 3, ch) + ((x) & 7))

/* 16 consecutive 16-bit values of row r (dims 16 kk ..) of a swizzled tile
 * (the tile files whose operands are whole k16 rows of a lane). */
inline void mx_row16(uint f[8], __local const ushort *t, int r, int kk, int ch) {
    const uint4 lo = *(__local const uint4 *)(t + TILE_OFF(r, 2 * kk, ch));
    const uint4 hi = *(__local const uint4 *)(t + TILE_OFF(r, 2 * kk + 1, ch));
    f[0] = lo.x, f[1] = lo.y, f[2] = lo.z, f[3] = lo.w;
    f[4] = hi.x, f[5] = hi.y, f[6] = hi.z, f[7] = hi.w;
}

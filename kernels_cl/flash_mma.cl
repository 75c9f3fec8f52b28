/* Tiled FlashAttention forward on matrix units (f16 / bf16 storage, or f32
 * as TF32; float32
 * accumulation and softmax), OpenCL C 1.2: the design of
 * kernels_cu/flash_mma.cuh, written against a small interface that each
 * vendor's files give (mma_common.cl says which files the host joins
 * before this one): an instruction file (mma_nv.cl: NVIDIA tensor cores
 * through inline PTX; mma_rdna.cl: AMD WMMA; or their emulations in plain
 * OpenCL C) and a tile file that lays S and O out across a warp with them
 * (mma_nv_tile.cl, mma_rdna_tile.cl). The streaming, masking, softmax and
 * epilogue here are the same for every vendor.
 *
 * A work-group of NW warps owns BM query rows of one (batch, head); each warp
 * owns MT = BM / (MX_TQ NW) row tiles, so a K or V fragment read from local
 * memory feeds MT matrix instructions. S = Q K^T and the online softmax stay
 * in registers, and P goes from S's accumulator straight into O += P V
 * (mx_pv). K and V are filled asynchronously (mx_cp16). With
 * STAGES 2 tile j+1 loads into the second buffers while tile j runs (one
 * barrier per tile). With STAGES 1, which keeps the tiles in NVIDIA's 48
 * KiB of local memory per group with Q in local memory too (QREG 0, head
 * dim 128), K and V have one buffer each, staggered: K of tile j+1 loads
 * while tile j's softmax and P V run, V of tile j+1 while tile j+1's Q K^T
 * runs (three barriers per tile). QREG 1 keeps Q in registers: it is staged
 * where K and V go and read into fragments once, before the loop.
 *
 * Tiles in local memory are swizzled or padded (mma_common.cl's TILE_OFF,
 * PADL).
 *
 * f32 runs here only as TF32 (the host asks for it under
 * FATTN_FLAG_ALLOW_TF32, with a tile file that has MX_TF32): tiles hold
 * 16-bit units, EW per element, and V may be stored transposed (MX_VT).
 *
 * Built with FATTN_RAGGED=1 it takes variable-length and paged problems
 * (ragged.cl): a group resolves its sequence, and a paged cache's pages for
 * the group's keys are vetted before the loop (a bad one: its fault is
 * recorded and the group has no keys). With FATTN_VAR (variants.cl): key
 * tiles outside the group's window are skipped, scores go through var_score
 * per element (softcap, ALiBi, bias) and the window's edges are masked;
 * sinks join at the end; V and O may be DVPAD wide. */

#if MT * MX_TQ * NW != BM || BN % 16 != 0 || BN % MX_TK != 0 || DPAD % 32 != 0 || \
    DVPAD % 32 != 0 || DVPAD % MX_TD != 0 || (DTYPE == 0 && !MX_TF32) || (MX_VT && NT % BN != 0)
#error "flash_mma.cl: need BM = MX_TQ NW MT, BN % 16 == 0, DPAD and DVPAD % 32 == 0, f16 or bf16 (f32: TF32 tiles)"
#endif

/* Local memory in 16-bit units (EW per element; rows of ROW_UNITS). */
#define K_HALVES (BN * ROW_UNITS(CHQ))
#if MX_VT
#define V_HALVES (DVPAD * ROW_UNITS(CHVT))
#else
#define V_HALVES (BN * ROW_UNITS(CHV))
#endif
#define KV_HALVES (K_HALVES + V_HALVES) /* one stage: K, then V (or V^T) */
#define Q_HALVES (BM * ROW_UNITS(CHQ))
#if QREG
#define LOCAL_HALVES (Q_HALVES > STAGES * KV_HALVES ? Q_HALVES : STAGES * KV_HALVES)
#else
#define LOCAL_HALVES (Q_HALVES + STAGES * KV_HALVES)
#endif
#define STAGE_K(j) (sk + ((j) & (STAGES - 1)) * KV_HALVES) /* tile j's K */
#define STAGE_V(j) (STAGE_K(j) + K_HALVES)

#if FATTN_RAGGED
#define MMA_RAGGED_PARAMS , RAGGED_PARAMS
#else
#define MMA_RAGGED_PARAMS
#endif

#if FATTN_RAGGED
#define ROW_PARAMS , int paged, long b, long sb, RAGGED_PARAMS
#define ROW_ARGS , paged, b, sb, RAGGED_ARGS
#else
#define ROW_PARAMS
#define ROW_ARGS
#endif

/* The element offset of row `key` (< the operand's rows): `base + key *
 * ss` (dense), or through the page table (paged: page_base[b] + slot). */
inline long row_at(long base, long ss, int key ROW_PARAMS) {
#if FATTN_RAGGED
    if (paged) {
        const long pg = rg_table[rg_tab_off + b * rg_tab_sb + (long)(key / rg_page_size) * rg_tab_ss];
        return base + pg * sb + (long)(key % rg_page_size) * ss;
    }
#endif
    return base + (long)key * ss;
}

/* Rows row0 .. row0 + rows - 1 of one operand (those below nrows; the rest
 * zero) into a tile of ch chunks per row; dims past D are zero. Work-item
 * tid owns chunk tid % ch of rows tid / ch, + NT / ch, ... Chunks are of 8
 * 16-bit units (EW per element). vec: 16-byte copies are allowed (the
 * operand's address and strides are multiples of 16 bytes); a chunk past
 * D is a zero fill, one crossing it a partial copy. With fewer work-items
 * than a row has chunks (8-wide sub-groups can), each takes chunks tid,
 * tid + NT, ... of every row (load_rows_narrow); ch is a constant at every
 * call, so only one of the two remains. */
inline void load_rows_narrow(__local ushort *dst, int ch, int rows, __global const ushort *g,
                             long base, long ss, int row0, int nrows, int D, int vec ROW_PARAMS) {
    for (int r = 0; r < rows; r++)
        for (int c = get_local_id(0); c < ch; c += NT) {
            const int key = row0 + r, u0 = c * 8, left = D * EW - u0;
            __local ushort *d = dst + TILE_OFF(r, c, ch);
            if (key >= nrows || left <= 0) {
                for (int e = 0; e < 8; e++) d[e] = 0;
                continue;
            }
            const long at = row_at(base, ss, key ROW_ARGS) * EW + u0;
            if (vec)
                mx_cp16(d, g + at, left >= 8 ? 16 : 2 * left);
            else
                for (int e = 0; e < 8; e++) d[e] = e < left ? g[at + e] : (ushort)0;
        }
}

inline void load_rows(__local ushort *dst, int ch, int rows, __global const ushort *g, long base,
                      long ss, int row0, int nrows, int D, int vec ROW_PARAMS) {
    if (NT < ch) {
        load_rows_narrow(dst, ch, rows, g, base, ss, row0, nrows, D, vec ROW_ARGS);
        return;
    }
    const int tid = get_local_id(0), c = tid % ch, rs = NT / ch;
    const int u0 = c * 8, left = D * EW - u0;
    const int bytes = left >= 8 ? 16 : left > 0 ? 2 * left : 0;
    for (int r = tid / ch; r < rows; r += rs) {
        const int key = row0 + r;
        __local ushort *d = dst + TILE_OFF(r, c, ch);
        if (key >= nrows || bytes == 0) {
            for (int e = 0; e < 8; e++) d[e] = 0;
            continue;
        }
        const long at = row_at(base, ss, key ROW_ARGS) * EW + u0;
        if (vec)
            mx_cp16(d, g + at, bytes);
        else
            for (int e = 0; e < 8; e++) d[e] = e < left ? g[at + e] : (ushort)0;
    }
}

#if MX_VT
/* Keys row0 .. row0 + BN - 1 of V (f32: EW 2) transposed into a tile of
 * DVPAD dim rows x BN keys (CHVT chunks a row), zero past nrows and D.
 * Consecutive work-items take consecutive keys of one 4-dim chunk, so the
 * stores of a warp fill one tile row (no bank conflicts); each reads 16
 * bytes (vec) or 4 elements. Synchronous: done at the next barrier. */
inline void load_rows_t(__local ushort *dst, __global const ushort *g, long base, long ss,
                        int row0, int nrows, int D, int vec ROW_PARAMS) {
    const int tid = get_local_id(0), r = tid % BN, key = row0 + r;
    const long at = key < nrows ? row_at(base, ss, key ROW_ARGS) : 0;
    __global const uint *gu = (__global const uint *)g;
    for (int c = tid / BN; c < DVPAD / 4; c += NT / BN) {
        const int d0 = 4 * c;
        uint4 x = (uint4)(0u);
        if (key < nrows && d0 < D) {
            if (vec && d0 + 4 <= D) {
                x = *(__global const uint4 *)(gu + at + d0);
            } else {
                x.x = gu[at + d0];
                if (d0 + 1 < D) x.y = gu[at + d0 + 1];
                if (d0 + 2 < D) x.z = gu[at + d0 + 2];
                if (d0 + 3 < D) x.w = gu[at + d0 + 3];
            }
        }
        const int u = (r * EW) & 7, ck = (r * EW) >> 3;
        *(__local uint *)(dst + TILE_OFF(d0, ck, CHVT) + u) = x.x;
        *(__local uint *)(dst + TILE_OFF(d0 + 1, ck, CHVT) + u) = x.y;
        *(__local uint *)(dst + TILE_OFF(d0 + 2, ck, CHVT) + u) = x.z;
        *(__local uint *)(dst + TILE_OFF(d0 + 3, ck, CHVT) + u) = x.w;
    }
}
#endif

/* Key limit of row i: keys < it are visible (causal bottom-right through
 * coff, which the host clamps to [-Sq, Sk]). */
inline int mma_key_limit(long i, int Sk, int causal, long coff) {
    return causal ? (int)clamp(i + coff + 1, 0L, (long)Sk) : Sk;
}

__kernel __attribute__((reqd_work_group_size(NT, 1, 1))) MX_KERNEL_ATTR
void flash_mma(__global const ushort *q, long q_off, long q_sb, long q_sh, long q_ss,
               __global const ushort *k, long k_off, long k_sb, long k_sh, long k_ss,
               __global const ushort *v, long v_off, long v_sb, long v_sh, long v_ss,
               __global ushort *o, long o_off, long o_sb, long o_sh, long o_ss,
               __global float *lse, long l_off, long l_sb, long l_sh, long l_ss, int has_lse,
               int Hq, int group, int Sq, int Sk, int D, float scale_log2e, int causal, long coff,
               int vec VAR_PARAMS MMA_RAGGED_PARAMS) {
#ifdef VEC
    vec = VEC; /* the host builds for the operands' alignment: the unused copies compile away */
#endif
    __local uint4 smem[LOCAL_HALVES / 8];
#if MX_XS_WORDS
    __local uint xs_all[NW * MX_XS_WORDS];
#endif
    __local ushort *sq = (__local ushort *)smem;
#if QREG
    __local ushort *sk = sq; /* Q is staged here before the loop */
#else
    __local ushort *sk = sq + Q_HALVES;
#endif

    const int tid = get_local_id(0), warp = tid / MX_WARP;
#if MX_XS_WORDS
    __local uint *xs = xs_all + warp * MX_XS_WORDS;
#else
    __local uint *xs = 0; /* the primitives need no scratch */
#endif
    const int m0 = (int)(get_num_groups(0) - 1 - get_group_id(0)) * BM; /* late (heavy) tiles first */
    const int bh = get_group_id(1);
    const long b = bh / Hq, h = bh % Hq, hk = h / group;
    const int dv = DV_OF(D); /* V and O dims */

#if FATTN_RAGGED
    const rag_seq sq_ = rag_resolve(b, Sq, Sk, tid == 0 && m0 == 0 && h == 0, RAGGED_ARGS);
    /* A tile past the sequence's rows stores nothing and loads no key (no
     * early return ahead of the barriers: see flash_fwd.cl). */
    Sq = sq_.len_q;
    Sk = m0 < Sq ? sq_.len_kv : 0;
    if (causal) coff = sq_.coff;
    const int paged = rg_flags & RAG_PAGED;
    const long qb = q_off + sq_.q_batch * q_sb + h * q_sh + sq_.q_row0 * q_ss;
    const long ob = o_off + sq_.q_batch * o_sb + h * o_sh + sq_.q_row0 * o_ss;
    const long lb = l_off + sq_.q_batch * l_sb + h * l_sh + sq_.q_row0 * l_ss;
    const long kb = k_off + hk * k_sh + (paged ? 0 : sq_.kv_batch * k_sb + sq_.kv_row0 * k_ss);
    const long vb = v_off + hk * v_sh + (paged ? 0 : sq_.kv_batch * v_sb + sq_.kv_row0 * v_ss);
#define LOAD_K(dst, row0, n) load_rows(dst, CHQ, BN, k, kb, k_ss, row0, n, D, vec & 2, paged, b, k_sb, RAGGED_ARGS)
#if MX_VT
#define LOAD_V(dst, row0, n) load_rows_t(dst, v, vb, v_ss, row0, n, dv, vec & 4, paged, b, v_sb, RAGGED_ARGS)
#else
#define LOAD_V(dst, row0, n) load_rows(dst, CHV, BN, v, vb, v_ss, row0, n, dv, vec & 4, paged, b, v_sb, RAGGED_ARGS)
#endif
#define LOAD_Q(dst) load_rows(dst, CHQ, BM, q, qb, q_ss, m0, Sq, D, vec & 1, 0, b, q_sb, RAGGED_ARGS)
#else
    const long qb = q_off + b * q_sb + h * q_sh;
    const long ob = o_off + b * o_sb + h * o_sh;
    const long lb = l_off + b * l_sb + h * l_sh;
    const long kb = k_off + b * k_sb + hk * k_sh;
    const long vb = v_off + b * v_sb + hk * v_sh;
#define LOAD_K(dst, row0, n) load_rows(dst, CHQ, BN, k, kb, k_ss, row0, n, D, vec & 2)
#if MX_VT
#define LOAD_V(dst, row0, n) load_rows_t(dst, v, vb, v_ss, row0, n, dv, vec & 4)
#else
#define LOAD_V(dst, row0, n) load_rows(dst, CHV, BN, v, vb, v_ss, row0, n, dv, vec & 4)
#endif
#define LOAD_Q(dst) load_rows(dst, CHQ, BM, q, qb, q_ss, m0, Sq, D, vec & 1)
#endif

    /* Keys past what the group's last row sees are not visited; tiles before
     * jmask need no mask (every key < Sk and within the first row's causal
     * limit). */
    const int last = min(m0 + BM, Sq) - 1;
    int kv_end = m0 < Sq ? mma_key_limit(last, Sk, causal, coff) : 0;
    int jmask = Sk / BN;
    if (causal) jmask = min(jmask, (int)(max(0L, (long)m0 + coff + 1) / BN));
    int j0 = 0, jfull = 0;
#if FATTN_VAR
    /* The window: tiles before the first row's left edge are skipped, the
     * right edge limits the keys like causal, and tiles before jfull reach
     * left of the last row's window (they are masked per element). */
    const long woff = (long)Sk - Sq;
    const float slope2 = var_slope(al, al_off, al_sb, al_sh, b, h);
    if (m0 < Sq) {
        int lo_first, lo_last;
        kv_end = var_keys(last, woff, kv_end, win_left, win_right, &lo_last);
        const int hi_first =
            var_keys(m0, woff, mma_key_limit(m0, Sk, causal, coff), win_left, win_right, &lo_first);
        j0 = lo_first / BN;
        jmask = min(jmask, hi_first / BN);
        jfull = (lo_last + BN - 1) / BN;
    }
#endif
    int ntiles = kv_end > 0 ? (kv_end + BN - 1) / BN : 0;
    j0 = min(j0, ntiles);
#if FATTN_RAGGED
    /* K's buffer is free until Q (QREG) or K load into it. */
    if (!pages_ok(j0 * BN, kv_end, b, (__local int *)sk, RAGGED_ARGS)) ntiles = j0;
#endif

    const int wr0 = warp * MT * MX_TQ;
    /* Fold: S stays raw and sc scales it inside the max and the exponent
     * (mrow is in scaled units either way); else S is scaled, sc = 1. */
    const int fold = FOLD && scale_log2e > 0.0f;
    const float sc = fold ? scale_log2e : 1.0f;
    float oacc[MT][ND][MX_CE];
    float mrow[MT][MX_RS], lrow[MT][MX_RS];
MX_UNROLL
    for (int mt = 0; mt < MT; ++mt) {
MX_UNROLL
        for (int dt = 0; dt < ND; ++dt)
MX_UNROLL
            for (int e = 0; e < MX_CE; ++e) oacc[mt][dt][e] = 0.0f;
MX_UNROLL
        for (int hh = 0; hh < MX_RS; ++hh) {
            mrow[mt][hh] = -INFINITY;
            lrow[mt][hh] = 0.0f;
        }
    }

    /* Q: into registers through the K/V area (QREG), else into its own. */
    LOAD_Q(sq);
    mx_cp_commit();
#if QREG
    uint qf[KD][MT][MX_QW];
    mx_cp_wait(0);
    barrier(CLK_LOCAL_MEM_FENCE);
MX_UNROLL
    for (int kk = 0; kk < KD; ++kk)
MX_UNROLL
        for (int mt = 0; mt < MT; ++mt) mx_load_q(qf[kk][mt], sq, wr0 + mt * MX_TQ, kk, xs);
    barrier(CLK_LOCAL_MEM_FENCE); /* the stage becomes K and V */
#endif
    if (j0 < ntiles) LOAD_K(STAGE_K(j0), j0 * BN, kv_end);
    mx_cp_commit();
    if (j0 < ntiles) LOAD_V(STAGE_V(j0), j0 * BN, kv_end);
    mx_cp_commit();

#if FATTN_VAR
    /* The thread's rows' visible keys [lo, hi), window and causal. */
    int rlo[MT][MX_RS], rhi[MT][MX_RS];
MX_UNROLL
    for (int mt = 0; mt < MT; ++mt)
MX_UNROLL
        for (int hh = 0; hh < MX_RS; ++hh) {
            const int i = m0 + wr0 + mt * MX_TQ + mx_slot_row(hh);
            rhi[mt][hh] = i < Sq ? var_keys(i, woff, mma_key_limit(i, Sk, causal, coff), win_left,
                                            win_right, &rlo[mt][hh])
                                 : 0;
            if (i >= Sq) rlo[mt][hh] = 0;
        }
#endif

    for (int j = j0; j < ntiles; ++j) {
        const int kv0 = j * BN;
        __local const ushort *kt = STAGE_K(j), *vt = STAGE_V(j);
#if STAGES == 2
        /* Tile j has landed, and every warp is done with tile j - 1, whose
         * buffers tile j + 1 takes. */
        mx_cp_wait(0);
        barrier(CLK_LOCAL_MEM_FENCE);
        if (j + 1 < ntiles) {
            LOAD_K(STAGE_K(j + 1), kv0 + BN, kv_end);
            LOAD_V(STAGE_V(j + 1), kv0 + BN, kv_end);
        }
        mx_cp_commit();
#else
        mx_cp_wait(1); /* K of tile j (and Q) has landed; V may not have */
        barrier(CLK_LOCAL_MEM_FENCE);
#endif

        float s[MT][NS][MX_CE];
MX_UNROLL
        for (int mt = 0; mt < MT; ++mt)
MX_UNROLL
            for (int nt = 0; nt < NS; ++nt)
MX_UNROLL
                for (int e = 0; e < MX_CE; ++e) s[mt][nt][e] = 0.0f;
MX_UNROLL
        for (int kk = 0; kk < KD; ++kk) {
#if QREG
            mx_qk_step(s, qf[kk], kt, kk, xs);
#else
            uint qa[MT][MX_QW];
MX_UNROLL
            for (int mt = 0; mt < MT; ++mt) mx_load_q(qa[mt], sq, wr0 + mt * MX_TQ, kk, xs);
            mx_qk_step(s, qa, kt, kk, xs);
#endif
        }
#if STAGES == 1
        /* Every warp is done with K of tile j, and V of tile j has landed. */
        mx_cp_wait(0);
        barrier(CLK_LOCAL_MEM_FENCE);
        if (j + 1 < ntiles) LOAD_K(STAGE_K(j + 1), kv0 + BN, kv_end);
        mx_cp_commit();
#endif

        /* Scaled here, or (fold) through the max and the exponent's FMA. */
        if (!fold) {
MX_UNROLL
            for (int mt = 0; mt < MT; ++mt)
MX_UNROLL
                for (int nt = 0; nt < NS; ++nt)
MX_UNROLL
                    for (int e = 0; e < MX_CE; ++e) s[mt][nt][e] *= scale_log2e;
        }

#if FATTN_VAR
        /* Every element: masked where the tile reaches past some row's keys,
         * rescored (softcap, ALiBi, bias) where the build has a rescoring. */
        const int mask_el = j >= jmask || j < jfull;
        if (mask_el || VAR_HAS(VAR_SOFTCAP | VAR_ALIBI | VAR_BIAS)) {
MX_UNROLL
            for (int mt = 0; mt < MT; ++mt) {
                int ri[MX_RS];
                long brow[MX_RS];
MX_UNROLL
                for (int hh = 0; hh < MX_RS; ++hh) {
                    ri[hh] = m0 + wr0 + mt * MX_TQ + mx_slot_row(hh);
                    brow[hh] = bs_off + b * bs_sb + h * bs_sh + (long)min(ri[hh], Sq - 1) * bs_ss;
                }
MX_UNROLL
                for (int nt = 0; nt < NS; ++nt)
MX_UNROLL
                    for (int e = 0; e < MX_CE; ++e) {
                        const int hh = mx_el_slot(e), key = kv0 + nt * MX_TK + mx_key_col(e);
                        float x = s[mt][nt][e];
                        if (key < rlo[mt][hh] || key >= rhi[mt][hh])
                            x = -INFINITY;
                        else
                            x = var_score(x, ri[hh], key, woff, cap2, slope2, bs, brow[hh], bs_sd);
                        s[mt][nt][e] = x;
                    }
            }
        }
#else
        if (j >= jmask) {
MX_UNROLL
            for (int mt = 0; mt < MT; ++mt) {
                int lim[MX_RS];
MX_UNROLL
                for (int hh = 0; hh < MX_RS; ++hh)
                    lim[hh] = mma_key_limit(m0 + wr0 + mt * MX_TQ + mx_slot_row(hh), Sk, causal, coff);
MX_UNROLL
                for (int nt = 0; nt < NS; ++nt)
MX_UNROLL
                    for (int e = 0; e < MX_CE; ++e)
                        if (kv0 + nt * MX_TK + mx_key_col(e) >= lim[mx_el_slot(e)]) s[mt][nt][e] = -INFINITY;
            }
        }
#endif

        /* Online softmax per row (log2 units); a row's values may be spread
         * over lanes (mx_row_max), and l stays a per-lane partial sum until
         * the end.
         * A row with nothing visible yet keeps m = -inf and subtracts 0, so
         * exp2 gives 0, not NaN; fmax drops a NaN score from the max, but its
         * exp2 is NaN, and so are l, O and lse. */
MX_UNROLL
        for (int mt = 0; mt < MT; ++mt)
MX_UNROLL
            for (int hh = 0; hh < MX_RS; ++hh) {
                float mx = -INFINITY;
MX_UNROLL
                for (int nt = 0; nt < NS; ++nt)
MX_UNROLL
                    for (int e = 0; e < MX_CE; ++e)
                        if (mx_el_slot(e) == hh) mx = fmax(mx, s[mt][nt][e]);
                mx = mx_row_max(mx, xs);
                const float mnew = fmax(mrow[mt][hh], mx * sc);
                const float mu = mnew == -INFINITY ? 0.0f : mnew;
                const float alpha = mx_exp2(mrow[mt][hh] - mu);
                mrow[mt][hh] = mnew;
                float sum = 0.0f;
MX_UNROLL
                for (int nt = 0; nt < NS; ++nt)
MX_UNROLL
                    for (int e = 0; e < MX_CE; ++e)
                        if (mx_el_slot(e) == hh) {
                            const float p = mx_exp2(fma(s[mt][nt][e], sc, -mu));
                            s[mt][nt][e] = p;
                            sum += p;
                        }
                lrow[mt][hh] = lrow[mt][hh] * alpha + sum;
MX_UNROLL
                for (int dt = 0; dt < ND; ++dt)
MX_UNROLL
                    for (int e = 0; e < MX_CE; ++e)
                        if (mx_el_slot(e) == hh) oacc[mt][dt][e] *= alpha;
            }

        mx_pv(oacc, s, vt, xs);
#if STAGES == 1
        /* Every warp is done with V of tile j. */
        barrier(CLK_LOCAL_MEM_FENCE);
        if (j + 1 < ntiles) LOAD_V(STAGE_V(j + 1), kv0 + BN, kv_end);
        mx_cp_commit();
#endif
    }

    /* Epilogue: O = acc / l from the fragments. l = 0 (no visible key)
     * gives O = 0 and lse = -inf; a NaN l stays NaN in both. */
#if FATTN_VAR
    const float sink2 = var_sink(snk, snk_off, snk_sh, h);
#endif
MX_UNROLL
    for (int mt = 0; mt < MT; ++mt)
MX_UNROLL
        for (int hh = 0; hh < MX_RS; ++hh) {
            const float l = mx_row_sum(lrow[mt][hh], xs); /* every lane: it may hold a barrier */
            const int i = m0 + wr0 + mt * MX_TQ + mx_slot_row(hh);
            if (i >= Sq) continue;
            float inv;
#if FATTN_VAR
            const float lse2 = var_finish(mrow[mt][hh], l, sink2, &inv);
#else
            inv = l == 0.0f ? 0.0f : 1.0f / l;
            const float lse2 = l == 0.0f ? -INFINITY : mrow[mt][hh] + log2(l);
#endif
            const long orow = ob + (long)i * o_ss;
#if EW == 2
            /* f32: one store per element. */
            __global float *of = (__global float *)o;
MX_UNROLL
            for (int dt = 0; dt < ND; ++dt)
MX_UNROLL
                for (int e = 0; e < MX_CE; ++e) {
                    const int d = dt * MX_TD + mx_el_col(e);
                    if (mx_el_slot(e) == hh && d < dv) of[orow + d] = oacc[mt][dt][e] * inv;
                }
#elif MX_PAIRS
            /* The row's elements, two at a time: e and e + 1 are adjacent
             * dims and go out as one 32-bit store when aligned. */
MX_UNROLL
            for (int dt = 0; dt < ND; ++dt)
MX_UNROLL
                for (int e = 0; e < MX_CE; e += 2) {
                    if (mx_el_slot(e) != hh) continue;
                    const int d0 = dt * MX_TD + mx_el_col(e), d1 = dt * MX_TD + mx_el_col(e + 1);
                    const uint w = mx_pack2(oacc[mt][dt][e] * inv, oacc[mt][dt][e + 1] * inv);
                    if (d0 + 1 < dv && ((orow + d0) & 1) == 0) {
                        *(__global uint *)(o + orow + d0) = w;
                    } else {
                        if (d0 < dv) o[orow + d0] = (ushort)(w & 0xffffu);
                        if (d1 < dv && mx_el_slot(e + 1) == hh) o[orow + d1] = (ushort)(w >> 16);
                    }
                }
#else
            /* One element at a time (a lane's elements may be other rows). */
MX_UNROLL
            for (int dt = 0; dt < ND; ++dt)
MX_UNROLL
                for (int e = 0; e < MX_CE; ++e) {
                    const int d = dt * MX_TD + mx_el_col(e);
                    if (mx_el_slot(e) == hh && d < dv)
                        o[orow + d] = (ushort)(mx_pack2(oacc[mt][dt][e] * inv, 0.0f) & 0xffffu);
                }
#endif
            if (has_lse && mx_row_owner()) lse[lb + (long)i * l_ss] = lse2 * M_LN2_F;
        }
}

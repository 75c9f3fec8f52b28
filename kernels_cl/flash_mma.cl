/* Tiled FlashAttention forward on matrix units (f16 / bf16 storage, float32
 * accumulation and softmax), OpenCL C 1.2: the design of
 * kernels_cu/flash_mma.cuh, written against the small primitive interface
 * of mma_nv.cl (NVIDIA tensor cores through inline PTX) or mma_emu.cl (the
 * same fragment layouts in plain OpenCL C), which the host prepends. The
 * tile, softmax and masking code here is the same for every vendor.
 *
 * A work-group of NW warps owns BM query rows of one (batch, head); each warp
 * owns MT = BM / (16 NW) m16 row tiles, so a K or V fragment read from local
 * memory feeds MT mma instructions. S = Q K^T and the online softmax stay in
 * registers, and P goes from S's accumulator layout straight into the A
 * operand of O += P V. K and V are filled asynchronously (mx_cp16). With
 * STAGES 2 tile j+1 loads into the second buffers while tile j runs (one
 * barrier per tile). With STAGES 1, which keeps the tiles in NVIDIA's 48
 * KiB of local memory per group with Q in local memory too (QREG 0, head
 * dim 128), K and V have one buffer each, staggered: K of tile j+1 loads
 * while tile j's softmax and P V run, V of tile j+1 while tile j+1's Q K^T
 * runs (three barriers per tile). QREG 1 keeps Q in registers: it is staged
 * where K and V go and read into fragments once, before the loop.
 *
 * Rows of 16-bit elements are stored in 16-byte chunks whose index is XORed
 * with the row (SWZ), so the 8 row addresses of one ldmatrix fall in 8
 * distinct 4-bank groups without padding (padding would not fit).
 *
 * Built with FATTN_RAGGED=1 it takes variable-length and paged problems
 * (ragged.cl): a group resolves its sequence, and a paged cache's pages for
 * the group's keys are vetted before the loop (a bad one: its fault is
 * recorded and the group has no keys). With FATTN_VAR (variants.cl): key
 * tiles outside the group's window are skipped, scores go through var_score
 * per element (softcap, ALiBi, bias) and the window's edges are masked;
 * sinks join at the end; V and O may be DVPAD wide. */

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

#define NT (NW * 32)
#define MT (BM / (16 * NW))
#define KD (DPAD / 16)
#define NS (BN / 8)
#define ND (DVPAD / 8)
#define CHQ (DPAD / 8)  /* 16-byte chunks per Q or K row */
#define CHV (DVPAD / 8) /* per V row */

#if MT * 16 * NW != BM || BN % 16 != 0 || DPAD % 32 != 0 || DVPAD % 32 != 0 || DTYPE == 0
#error "flash_mma.cl: need BM = 16 NW MT, BN % 16 == 0, DPAD and DVPAD % 32 == 0, f16 or bf16"
#endif

/* The chunk a row's chunk c is stored at: XOR with the row's place in a
 * run of 8 rows of 128 bytes, so one ldmatrix's rows (8 consecutive rows,
 * same logical chunk) hit 8 different bank groups. ch: chunks per row. */
#define SWZ(r, ch) ((ch) >= 8 ? ((r) & 7) : (((r) / (8 / (ch))) & ((ch) - 1)))
/* Element offset of (row r, chunk c) in a tile of ch chunks per row. */
#define TILE_OFF(r, c, ch) ((r) * (ch) * 8 + (((c) ^ SWZ(r, ch)) << 3))

#define KV_HALVES (BN * (DPAD + DVPAD)) /* one stage: K, then V */
#if QREG
#define LOCAL_HALVES (BM * DPAD > STAGES * KV_HALVES ? BM * DPAD : STAGES * KV_HALVES)
#else
#define LOCAL_HALVES (BM * DPAD + STAGES * KV_HALVES)
#endif
#define STAGE_K(j) (sk + ((j) & (STAGES - 1)) * KV_HALVES) /* tile j's K */
#define STAGE_V(j) (STAGE_K(j) + BN * DPAD)

#if FATTN_RAGGED
#define MMA_RAGGED_PARAMS , RAGGED_PARAMS
#else
#define MMA_RAGGED_PARAMS
#endif

/* Rows row0 .. row0 + rows - 1 of one operand (those below nrows; the rest
 * zero) into a tile of ch chunks per row; dims past D are zero. Work-item
 * tid owns chunk tid % ch of rows tid / ch, + NT / ch, ... Row r's first
 * element is at `base + r * ss` (dense), or through the page table
 * (paged: page_base[b] + slot). vec: 16-byte copies are allowed (the
 * operand's address and strides are multiples of 8 elements); a chunk
 * past D is a zero fill, one crossing it a partial copy. */
inline void load_rows(__local ushort *dst, int ch, int rows, __global const ushort *g, long base,
                      long ss, int row0, int nrows, int D, int vec
#if FATTN_RAGGED
                      ,
                      int paged, long b, long sb, RAGGED_PARAMS
#endif
) {
    const int tid = get_local_id(0), c = tid % ch, rs = NT / ch;
    const int d0 = c * 8, left = D - d0;
    const int bytes = left >= 8 ? 16 : left > 0 ? 2 * left : 0;
    for (int r = tid / ch; r < rows; r += rs) {
        const int key = row0 + r;
        __local ushort *d = dst + TILE_OFF(r, c, ch);
        long at = base + (long)key * ss + d0;
#if FATTN_RAGGED
        if (paged && key < nrows) {
            const long pg =
                rg_table[rg_tab_off + b * rg_tab_sb + (long)(key / rg_page_size) * rg_tab_ss];
            at = base + pg * sb + (long)(key % rg_page_size) * ss + d0;
        }
#endif
        if (key >= nrows || bytes == 0) {
            for (int e = 0; e < 8; e++) d[e] = 0;
        } else if (vec) {
            mx_cp16(d, g + at, bytes);
        } else {
            for (int e = 0; e < 8; e++) d[e] = e < left ? g[at + e] : (ushort)0;
        }
    }
}

#if FATTN_RAGGED
/* Whether the pages of keys k0 .. k1 - 1 of sequence b are all in the cache;
 * records the fault when not. Holds barriers: every work-item calls it;
 * *flag is free again when it returns. */
inline int pages_ok(int k0, int k1, long b, __local int *flag, RAGGED_PARAMS) {
    const int tid = get_local_id(0);
    if (tid == 0) *flag = 0;
    barrier(CLK_LOCAL_MEM_FENCE);
    int bad = 0;
    if ((rg_flags & RAG_PAGED) && k1 > k0) {
        const int p1 = (k1 - 1) / rg_page_size;
        for (int p = k0 / rg_page_size + tid; p <= p1; p += NT) {
            const long e = rg_table[rg_tab_off + b * rg_tab_sb + (long)p * rg_tab_ss];
            bad |= e < 0 || e >= rg_num_pages;
        }
    }
    if (bad) *flag = 1; /* benign race: every writer stores 1 */
    barrier(CLK_LOCAL_MEM_FENCE);
    const int ok = !*flag;
    barrier(CLK_LOCAL_MEM_FENCE);
    if (!ok && tid == 0) rag_fault(rg_fault, RAG_FAULT_TABLE);
    return ok;
}
#endif

/* Key limit of row i: keys < it are visible (causal bottom-right through
 * coff, which the host clamps to [-Sq, Sk]). */
inline int mma_key_limit(long i, int Sk, int causal, long coff) {
    return causal ? (int)clamp(i + coff + 1, 0L, (long)Sk) : Sk;
}

__kernel __attribute__((reqd_work_group_size(NT, 1, 1)))
void flash_mma(__global const ushort *q, long q_off, long q_sb, long q_sh, long q_ss,
               __global const ushort *k, long k_off, long k_sb, long k_sh, long k_ss,
               __global const ushort *v, long v_off, long v_sb, long v_sh, long v_ss,
               __global ushort *o, long o_off, long o_sb, long o_sh, long o_ss,
               __global float *lse, long l_off, long l_sb, long l_sh, long l_ss, int has_lse,
               int Hq, int group, int Sq, int Sk, int D, float scale_log2e, int causal, long coff,
               int vec VAR_PARAMS MMA_RAGGED_PARAMS) {
    __local uint4 smem[LOCAL_HALVES / 8];
#if MX_XS_WORDS
    __local uint xs_all[NW * MX_XS_WORDS];
#endif
    __local ushort *sq = (__local ushort *)smem;
#if QREG
    __local ushort *sk = sq; /* Q is staged here before the loop */
#else
    __local ushort *sk = sq + BM * DPAD;
#endif

    const int tid = get_local_id(0), lane = tid & 31, warp = tid >> 5;
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
#define LOAD_V(dst, row0, n) load_rows(dst, CHV, BN, v, vb, v_ss, row0, n, dv, vec & 4, paged, b, v_sb, RAGGED_ARGS)
#define LOAD_Q(dst) load_rows(dst, CHQ, BM, q, qb, q_ss, m0, Sq, D, vec & 1, 0, b, q_sb, RAGGED_ARGS)
#else
    const long qb = q_off + b * q_sb + h * q_sh;
    const long ob = o_off + b * o_sb + h * o_sh;
    const long lb = l_off + b * l_sb + h * l_sh;
    const long kb = k_off + b * k_sb + hk * k_sh;
    const long vb = v_off + b * v_sb + hk * v_sh;
#define LOAD_K(dst, row0, n) load_rows(dst, CHQ, BN, k, kb, k_ss, row0, n, D, vec & 2)
#define LOAD_V(dst, row0, n) load_rows(dst, CHV, BN, v, vb, v_ss, row0, n, dv, vec & 4)
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

    const int wr0 = warp * MT * 16;
    const int g = lane >> 2, t4 = lane & 3;
    /* Fold: S stays raw and sc scales it inside the max and the exponent
     * (mrow is in scaled units either way); else S is scaled, sc = 1. */
    const int fold = FOLD && scale_log2e > 0.0f;
    const float sc = fold ? scale_log2e : 1.0f;
    /* Per-lane ldmatrix rows and chunks. Q (A): matrices rows 0-7 / 8-15 x
     * chunk 0, then chunk 1 of the k16 step. K (B): keys 0-7 x chunks 0 / 1,
     * then keys 8-15. V (B, transposed): keys 0-7 / 8-15 x chunk 0, then 1. */
    const int qr = (lane & 7) + ((lane >> 3) & 1) * 8, qc = lane >> 4;
    const int kr = (lane & 7) + (lane >> 4) * 8, kc = (lane >> 3) & 1;
    const int vr = qr, vc = qc;

    float oacc[MT][ND][4];
    float mrow[MT][2], lrow[MT][2];
MX_UNROLL
    for (int mt = 0; mt < MT; ++mt) {
MX_UNROLL
        for (int dt = 0; dt < ND; ++dt)
            oacc[mt][dt][0] = oacc[mt][dt][1] = oacc[mt][dt][2] = oacc[mt][dt][3] = 0.0f;
        mrow[mt][0] = mrow[mt][1] = -INFINITY;
        lrow[mt][0] = lrow[mt][1] = 0.0f;
    }

    /* Q: into registers through the K/V area (QREG), else into its own. */
    LOAD_Q(sq);
    mx_cp_commit();
#if QREG
    uint qf[MT][KD][4];
    mx_cp_wait(0);
    barrier(CLK_LOCAL_MEM_FENCE);
MX_UNROLL
    for (int mt = 0; mt < MT; ++mt)
MX_UNROLL
        for (int kk = 0; kk < KD; ++kk)
            mx_ldsm(qf[mt][kk], sq, TILE_OFF(wr0 + mt * 16 + qr, kk * 2 + qc, CHQ), xs);
    barrier(CLK_LOCAL_MEM_FENCE); /* the stage becomes K and V */
#endif
    if (j0 < ntiles) LOAD_K(STAGE_K(j0), j0 * BN, kv_end);
    mx_cp_commit();
    if (j0 < ntiles) LOAD_V(STAGE_V(j0), j0 * BN, kv_end);
    mx_cp_commit();

#if FATTN_VAR
    /* The thread's rows' visible keys [lo, hi), window and causal. */
    int rlo[MT][2], rhi[MT][2];
MX_UNROLL
    for (int mt = 0; mt < MT; ++mt)
MX_UNROLL
        for (int hh = 0; hh < 2; ++hh) {
            const int i = m0 + wr0 + mt * 16 + hh * 8 + g;
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

        float s[MT][NS][4];
MX_UNROLL
        for (int mt = 0; mt < MT; ++mt)
MX_UNROLL
            for (int nt = 0; nt < NS; ++nt) s[mt][nt][0] = s[mt][nt][1] = s[mt][nt][2] = s[mt][nt][3] = 0.0f;
MX_UNROLL
        for (int kk = 0; kk < KD; ++kk) {
#if !QREG
            uint qa[MT][4];
MX_UNROLL
            for (int mt = 0; mt < MT; ++mt)
                mx_ldsm(qa[mt], sq, TILE_OFF(wr0 + mt * 16 + qr, kk * 2 + qc, CHQ), xs);
#endif
MX_UNROLL
            for (int np = 0; np < NS / 2; ++np) {
                uint kf[4];
                mx_ldsm(kf, kt, TILE_OFF(np * 16 + kr, kk * 2 + kc, CHQ), xs);
MX_UNROLL
                for (int mt = 0; mt < MT; ++mt) {
#if QREG
                    mx_mma(s[mt][2 * np], qf[mt][kk], kf[0], kf[1], xs);
                    mx_mma(s[mt][2 * np + 1], qf[mt][kk], kf[2], kf[3], xs);
#else
                    mx_mma(s[mt][2 * np], qa[mt], kf[0], kf[1], xs);
                    mx_mma(s[mt][2 * np + 1], qa[mt], kf[2], kf[3], xs);
#endif
                }
            }
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
                    for (int e = 0; e < 4; ++e) s[mt][nt][e] *= scale_log2e;
        }

#if FATTN_VAR
        /* Every element: masked where the tile reaches past some row's keys,
         * rescored (softcap, ALiBi, bias) where the build has a rescoring. */
        const int mask_el = j >= jmask || j < jfull;
        if (mask_el || VAR_HAS(VAR_SOFTCAP | VAR_ALIBI | VAR_BIAS)) {
MX_UNROLL
            for (int mt = 0; mt < MT; ++mt)
MX_UNROLL
                for (int hh = 0; hh < 2; ++hh) {
                    const int i = m0 + wr0 + mt * 16 + hh * 8 + g;
                    const long brow = bs_off + b * bs_sb + h * bs_sh + (long)min(i, Sq - 1) * bs_ss;
MX_UNROLL
                    for (int nt = 0; nt < NS; ++nt)
MX_UNROLL
                        for (int e = 0; e < 2; ++e) {
                            const int key = kv0 + nt * 8 + 2 * t4 + e;
                            float x = s[mt][nt][2 * hh + e];
                            if (key < rlo[mt][hh] || key >= rhi[mt][hh])
                                x = -INFINITY;
                            else
                                x = var_score(x, i, key, woff, cap2, slope2, bs, brow, bs_sd);
                            s[mt][nt][2 * hh + e] = x;
                        }
                }
        }
#else
        if (j >= jmask) {
MX_UNROLL
            for (int mt = 0; mt < MT; ++mt)
MX_UNROLL
                for (int hh = 0; hh < 2; ++hh) {
                    const int lim = mma_key_limit(m0 + wr0 + mt * 16 + hh * 8 + g, Sk, causal, coff);
MX_UNROLL
                    for (int nt = 0; nt < NS; ++nt)
MX_UNROLL
                        for (int e = 0; e < 2; ++e)
                            if (kv0 + nt * 8 + 2 * t4 + e >= lim) s[mt][nt][2 * hh + e] = -INFINITY;
                }
        }
#endif

        /* Online softmax per row (log2 units); a row's values live in the 4
         * lanes of a quad, and l stays a per-lane partial sum until the end.
         * A row with nothing visible yet keeps m = -inf and subtracts 0, so
         * exp2 gives 0, not NaN; fmax drops a NaN score from the max, but its
         * exp2 is NaN, and so are l, O and lse. */
MX_UNROLL
        for (int mt = 0; mt < MT; ++mt)
MX_UNROLL
            for (int hh = 0; hh < 2; ++hh) {
                float mx = -INFINITY;
MX_UNROLL
                for (int nt = 0; nt < NS; ++nt)
                    mx = fmax(mx, fmax(s[mt][nt][2 * hh], s[mt][nt][2 * hh + 1]));
                mx = mx_quad_max(mx, xs);
                const float mnew = fmax(mrow[mt][hh], mx * sc);
                const float mu = mnew == -INFINITY ? 0.0f : mnew;
                const float alpha = mx_exp2(mrow[mt][hh] - mu);
                mrow[mt][hh] = mnew;
                float sum = 0.0f;
MX_UNROLL
                for (int nt = 0; nt < NS; ++nt) {
                    const float p0 = mx_exp2(fma(s[mt][nt][2 * hh], sc, -mu));
                    const float p1 = mx_exp2(fma(s[mt][nt][2 * hh + 1], sc, -mu));
                    s[mt][nt][2 * hh] = p0;
                    s[mt][nt][2 * hh + 1] = p1;
                    sum += p0 + p1;
                }
                lrow[mt][hh] = lrow[mt][hh] * alpha + sum;
MX_UNROLL
                for (int dt = 0; dt < ND; ++dt) {
                    oacc[mt][dt][2 * hh] *= alpha;
                    oacc[mt][dt][2 * hh + 1] *= alpha;
                }
            }

        /* O += P V: the C fragments of n8 tiles 2kk and 2kk + 1 are the A
         * fragment of k16 step kk. */
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
                mx_ldsm_t(vf, vt, TILE_OFF(kk * 16 + vr, dp * 2 + vc, CHV), xs);
MX_UNROLL
                for (int mt = 0; mt < MT; ++mt) {
                    mx_mma(oacc[mt][2 * dp], pa[mt], vf[0], vf[1], xs);
                    mx_mma(oacc[mt][2 * dp + 1], pa[mt], vf[2], vf[3], xs);
                }
            }
        }
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
        for (int hh = 0; hh < 2; ++hh) {
            const float l = mx_quad_sum(lrow[mt][hh], xs); /* every lane: it may hold a barrier */
            const int i = m0 + wr0 + mt * 16 + hh * 8 + g;
            if (i >= Sq) continue;
            float inv;
#if FATTN_VAR
            const float lse2 = var_finish(mrow[mt][hh], l, sink2, &inv);
#else
            inv = l == 0.0f ? 0.0f : 1.0f / l;
            const float lse2 = l == 0.0f ? -INFINITY : mrow[mt][hh] + log2(l);
#endif
            const long orow = ob + (long)i * o_ss;
MX_UNROLL
            for (int dt = 0; dt < ND; ++dt) {
                const int d = dt * 8 + 2 * t4;
                const float v0 = oacc[mt][dt][2 * hh] * inv, v1 = oacc[mt][dt][2 * hh + 1] * inv;
                if (d + 1 < dv && ((orow + d) & 1) == 0) {
                    *(__global uint *)(o + orow + d) = mx_pack2(v0, v1);
                } else {
                    const uint w = mx_pack2(v0, v1);
                    if (d < dv) o[orow + d] = (ushort)(w & 0xffffu);
                    if (d + 1 < dv) o[orow + d + 1] = (ushort)(w >> 16);
                }
            }
            if (has_lse && t4 == 0) lse[lb + (long)i * l_ss] = lse2 * M_LN2_F;
        }
}

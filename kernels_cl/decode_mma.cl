/* Split-KV decoding with GQA packing on matrix units (f16 / bf16 storage,
 * float32 accumulation and softmax), OpenCL C 1.2: decode.cl's problem,
 * work division and outputs (its header says them: rows packed g * Sq + i
 * per KV head, row tiles, key splits, the float32 workspace and its lse,
 * combine.cl afterwards) with kernels_cu/decode.cu's tensor-core design,
 * written against the matrix path's vendor files (mma_common.cl says which
 * the host joins before this one, then decode_split.cl: the group's place
 * and its split, as decode.cl's), so every layout the probe passes runs it.
 *
 * Why: decode.cl widens each K/V element and multiplies it on the CUDA
 * cores once per row of its tile; on the H200 that made it bound by
 * instructions, not memory (80% of its time with no K/V load at all). Here
 * a row tile is the MX_TQ rows of one matrix tile (rows past the group's
 * are zeros: free in a memory-bound kernel), so K and V cost one fragment
 * load per 8x8 block and a few matrix instructions per 16 keys.
 *
 * - A work-group is NW warps; each is an independent stream: warp w takes
 *   keys w KW .. w KW + KW - 1 of every group tile of BKV = NW KW keys
 *   through its own ring of DSTAGES stages (K rows, then V rows, swizzled
 *   as mma_common.cl's TILE_OFF), filled with mx_cp16 DSTAGES - 1 tiles
 *   ahead; the loop has no group barrier, only mx_warp_sync.
 * - Q: the tile's rows, unscaled in the storage type, as fragments in
 *   registers for the whole loop (staged once through a stage of the ring
 *   while the first tiles load). Scores are
 *   scaled in float32, masked (causal, window, the split's end) and
 *   rescored (FATTN_VAR: softcap, ALiBi, bias) per element, then the online
 *   softmax in base 2 per warp, and P goes from S's accumulators into
 *   O += P V (mx_pv), rounded to the storage type as in flash_mma.cl.
 * - End: the warps' rows are merged by the log-sum-exp rule through local
 *   memory (over the rings) and the split's normalised partial O and lse go
 *   to the workspace as decode.cl writes them.
 * - FATTN_RAGGED: the group resolves its sequence (ragged.cl); a paged
 *   cache's pages for the split's keys are vetted first (pages_ok: a bad
 *   one records its fault and leaves the group no keys), and a warp tile
 *   finds its page once where it lies in one (page sizes that are
 *   multiples of KW), else each lane the pages of the rows it copies
 *   (FATTN_PAGED). The sinks join in the combine.
 *
 * Build options: DTYPE (1 f16, 2 bf16), DPAD, DVPAD, NW, BM = MX_TQ NW
 * (one row tile per warp: MT 1), BN = KW (keys per warp tile, a multiple
 * of 16), DSTAGES (2..4), KV_VEC (16-byte copies: K/V rows 16-byte aligned
 * and D % 8 == 0, as decode.cl's), FATTN_RAGGED / FATTN_PAGED, FATTN_VAR. */

#ifndef DSTAGES
#define DSTAGES 2
#endif
#ifndef KV_VEC
#define KV_VEC 0
#endif
#ifndef FATTN_PAGED
#define FATTN_PAGED 0
#endif
#define KW BN                                  /* keys per warp tile */
#define BKV (NW * KW)                          /* keys per group tile */
#define WSTAGE (KW * (CHQ + CHV) * 8)          /* 16-bit units of one warp stage: K, then V */
#define RING_UNITS (NW * DSTAGES * WSTAGE)
#define QT_UNITS (MX_TQ * CHQ * 8)             /* Q's staging tile */
#define OW_FLOATS (NW * MX_TQ * DVPAD)         /* the merge: each warp's rows */
#define MERGE_FLOATS (OW_FLOATS + 2 * NW * MX_TQ + 2 * MX_TQ) /* ... and the rows' statistics */

#if MT != 1 || KW % 16 != 0 || DSTAGES < 2 || DSTAGES > 4 || DTYPE == 0 || \
    WSTAGE < QT_UNITS || 2 * RING_UNITS < 4 * MERGE_FLOATS || PADL /* the ring's rows are unpadded */
#error "decode_mma.cl: need BM = MX_TQ NW, BN % 16 == 0, 2..4 stages, f16 or bf16, a ring that holds Q and the merge"
#endif

#ifndef MX_WARP_SYNC
/* No warp-level barrier in this vendor's files: the group's (every call
 * below is in control flow the whole group takes). */
inline void mx_warp_sync(void) { barrier(CLK_LOCAL_MEM_FENCE); }
#endif

/* Chunk c of a K or V row at element `row` into dst: 16 bytes (zeros past
 * D, and all zeros for a key past the split's, in == 0). */
inline void copy_chunk(__local ushort *dst, __global const ushort *g, long row, int c, int D,
                       int in) {
    const int left = D - c * 8;
    if (!in || left <= 0) {
        *(__local uint4 *)dst = (uint4)(0u);
        return;
    }
    __global const ushort *src = g + row + c * 8;
    if (KV_VEC)
        mx_cp16(dst, src, left >= 8 ? 16 : 2 * left);
    else
        for (int e = 0; e < 8; e++) dst[e] = e < left ? src[e] : (ushort)0;
}

#define CHX (CHQ > CHV ? CHQ : CHV)

#if FATTN_PAGED
/* The base of a warp tile that lies in one page (pg, the key0's slot sl):
 * key j of the tile is at base + j * stride. */
inline long2 tile_base(int key0, long pg, long sl, long khb, long k_sb, long k_ss, long vhb,
                       long v_sb, long v_ss) {
    return (long2)(khb + pg * k_sb + (sl - key0) * k_ss, vhb + pg * v_sb + (sl - key0) * v_ss);
}

/* Key `key`'s K and V rows (elements) in a paged cache: page key / ps of
 * the sequence's table row (a shift when ps is a power of two, shift >= 0). */
inline long2 paged_rows(int key, int shift, int ps, __global const int *row, long ss, long khb,
                        long k_sb, long k_ss, long vhb, long v_sb, long v_ss) {
    const int lp = shift >= 0 ? key >> shift : key / ps;
    const long pg = row[(long)lp * ss], sl = key - (long)lp * ps;
    return (long2)(khb + pg * k_sb + sl * k_ss, vhb + pg * v_sb + sl * v_ss);
}
#endif

/* global: (groups * NT), groups = B * Hkv * row_tiles * splits; local: (NT).
 * The arguments are decode.cl's. */
__kernel __attribute__((reqd_work_group_size(NT, 1, 1))) MX_KERNEL_ATTR
void decode_mma(__global const ushort *q, long q_off, long q_sb, long q_sh, long q_ss,
                __global const ushort *k, long k_off, long k_sb, long k_sh, long k_ss,
                __global const ushort *v, long v_off, long v_sb, long v_sh, long v_ss,
                __global float *ws, long wl_off, int Hq, int Hkv, int group, int Sq, int Sk,
                int D, float scale_log2e, int causal, long coff, int splits, int row_tiles,
                int tiles VAR_PARAMS DEC_RAGGED_PARAMS) {
    /* The rings are all the local memory but the scratch: the pages'
     * flag, Q's staging tile (in a stage) and, at the end, the merge (the
     * warps' rows, their maxima and sums, the group's) take turns in them.
     * So two warps of three 8 KiB stages fit NVIDIA's 48 KiB at d128. */
    __local uint4 ring4[RING_UNITS / 8];
#if MX_XS_WORDS
    __local uint xs_all[NW * MX_XS_WORDS];
#endif
    __local ushort *ring = (__local ushort *)ring4;

    const int tid = get_local_id(0), warp = tid / MX_WARP;
#if MX_XS_WORDS
    __local uint *xs = xs_all + warp * MX_XS_WORDS;
#else
    __local uint *xs = 0;
#endif
    DECODE_SPLIT(MX_TQ, BKV);
    const int dv = DV_OF(D);
    int nt = j_hi > t0 * BKV ? t1 - t0 : 0;
#if FATTN_RAGGED
    if (!pages_ok(t0 * BKV, j_hi, b, (__local int *)ring4, RAGGED_ARGS)) nt = 0;
#endif

    /* The lane's rows (slot hh): visible keys [klo, lim), the split's end
     * included; 0 for rows that are not the group's. */
    int klo[MX_RS], lim[MX_RS];
#if FATTN_VAR
    int ri[MX_RS];
    float sl2[MX_RS];
    long brow[MX_RS];
#endif
MX_UNROLL
    for (int hh = 0; hh < MX_RS; ++hh) {
        const int r = mx_slot_row(hh), rr = r0 + r, g = rr / Sq, i = rr - g * Sq;
        const int ok = ROW_OK(r);
        int hi = ok ? key_limit(i, Sk, causal, coff) : 0, lo = 0;
#if FATTN_VAR
        const long hq = hk * group + g;
        if (ok) hi = var_keys(i, woff, hi, win_left, win_right, &lo);
        ri[hh] = i;
        sl2[hh] = ok ? var_slope(al, al_off, al_sb, al_sh, b, hq) : 0.0f;
        brow[hh] = bs_off + b * bs_sb + hq * bs_sh + (long)i * bs_ss;
#endif
        klo[hh] = lo;
        lim[hh] = min(hi, j_hi);
    }

    __local ushort *wring = ring + warp * DSTAGES * WSTAGE;
    /* Key `key`'s K and V rows (elements) are tb + key * stride, tb the
     * warp tile's base (TILE_BASE): dense, the operand's; paged with a page
     * size that is a multiple of KW (16 and 256 are), the tile lies in one
     * page (tiles start at multiples of KW), so one table entry, read by the
     * whole warp one tile ahead, gives the base. Other page sizes: each lane
     * finds the pages of the rows it copies (a shift for a power of two).
     * The split's pages were vetted (pages_ok). */
#if FATTN_PAGED
    const int pg_shift = (rg_page_size & (rg_page_size - 1)) == 0 ? 31 - clz(rg_page_size) : -1;
    const int pg_whole = rg_page_size % KW == 0;
#define PAGE_OF(key) (pg_shift >= 0 ? (key) >> pg_shift : (key) / rg_page_size)
    /* pg_whole: the table entry of the warp tile ISSUE takes next, loaded
     * one ISSUE ahead so that no copy waits on it. */
#define PAGE_FETCH(key)                                                                            \
    (pg_whole && (key) < j_hi ? (long)rg_table[tab + (long)PAGE_OF(key) * rg_tab_ss] : 0L)
    long pg_next = PAGE_FETCH(t0 * BKV + warp * KW);
#define PAGE_ROWS(key)                                                                             \
    paged_rows(key, pg_shift, rg_page_size, rg_table + tab, rg_tab_ss, khb, k_sb, k_ss, vhb, v_sb, \
               v_ss)
#define TILE_BASE(key0)                                                                            \
    tile_base(key0, pg_cur, (long)(key0) - (long)PAGE_OF(key0) * rg_page_size, khb, k_sb, k_ss,    \
              vhb, v_sb, v_ss)
#define PAGE_STEP(key0)                                                                            \
    const long pg_cur = pg_next;                                                                   \
    pg_next = PAGE_FETCH((key0) + BKV)
#define KV_ROWS(key)                                                                               \
    (pg_whole ? tb_ + (long2)((long)(key) * k_ss, (long)(key) * v_ss) : PAGE_ROWS(key))
#else
#define PAGE_STEP(key0) ((void)0)
#define TILE_BASE(key0) ((long2)(kb, vb))
#define KV_ROWS(key) (tb_ + (long2)((long)(key) * k_ss, (long)(key) * v_ss))
#endif
    /* Issues warp tile t (keys key0 ..) into stage t % DSTAGES, or nothing
     * past the split; a copy group either way, so the waits count alike.
     * Lanes take consecutive chunks of a row, K's and V's together. */
#define ISSUE(t)                                                                                   \
    do {                                                                                           \
        const int key0 = (t0 + (t)) * BKV + warp * KW;                                             \
        if ((t) < nt) {                                                                            \
            __local ushort *st_ = wring + ((t) % DSTAGES) * WSTAGE;                                \
            PAGE_STEP(key0);                                                                       \
            const long2 tb_ = key0 < j_hi ? TILE_BASE(key0) : (long2)(0);                          \
            for (int idx = MX_LANE; idx < KW * CHX; idx += MX_WARP) {                              \
                const int r_ = idx / CHX, c_ = idx % CHX, key_ = key0 + r_, in_ = key_ < j_hi;     \
                const long2 ro_ = in_ ? KV_ROWS(key_) : (long2)(0);                                \
                if (c_ < CHQ) copy_chunk(st_ + TILE_OFF(r_, c_, CHQ), k, ro_.x, c_, D, in_);       \
                if (c_ < CHV)                                                                      \
                    copy_chunk(st_ + KW * CHQ * 8 + TILE_OFF(r_, c_, CHV), v, ro_.y, c_, dv, in_); \
            }                                                                                      \
        }                                                                                          \
        mx_cp_commit();                                                                            \
    } while (0)

    uint qf[KD][1][MX_QW];
    float oacc[1][ND][MX_CE];
    float mrow[MX_RS], lrow[MX_RS];
MX_UNROLL
    for (int dt = 0; dt < ND; ++dt)
MX_UNROLL
        for (int e = 0; e < MX_CE; ++e) oacc[0][dt][e] = 0.0f;
MX_UNROLL
    for (int hh = 0; hh < MX_RS; ++hh) mrow[hh] = -INFINITY, lrow[hh] = 0.0f;

    for (int t = 0; t < DSTAGES - 1; t++) ISSUE(t);
    /* Q, while the first tiles fly: the tile's rows into warp 0's last
     * stage (free until the loop's first ISSUE), zeros past D and on rows
     * that are not the group's, then into fragments. */
    {
        __local ushort *qs = ring + (DSTAGES - 1) * WSTAGE;
        for (int idx = tid; idx < MX_TQ * CHQ; idx += NT) {
            const int r = idx / CHQ, c = idx % CHQ, rr = r0 + r;
            __local ushort *d = qs + TILE_OFF(r, c, CHQ);
            const int g = rr / Sq, i = rr - g * Sq;
            const long at = ROW_OK(r) ? Q_AT(g, i) + c * 8 : 0;
            for (int e = 0; e < 8; e++) d[e] = ROW_OK(r) && c * 8 + e < D ? q[at + e] : (ushort)0;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
MX_UNROLL
        for (int kk = 0; kk < KD; ++kk) mx_load_q(qf[kk][0], qs, 0, kk, xs);
        barrier(CLK_LOCAL_MEM_FENCE); /* the stage is warp 0's again */
    }
    for (int t = 0; t < nt; t++) {
        ISSUE(t + DSTAGES - 1);
#if DSTAGES == 2
        mx_cp_wait(1);
#elif DSTAGES == 3
        mx_cp_wait(2);
#else
        mx_cp_wait(3);
#endif
        mx_warp_sync(); /* tile t's copies (every lane's) have landed */
        __local const ushort *kt = wring + (t % DSTAGES) * WSTAGE, *vt = kt + KW * CHQ * 8;
        const int kw0 = (t0 + t) * BKV + warp * KW;

        float sc[1][NS][MX_CE];
MX_UNROLL
        for (int n = 0; n < NS; ++n)
MX_UNROLL
            for (int e = 0; e < MX_CE; ++e) sc[0][n][e] = 0.0f;
MX_UNROLL
        for (int kk = 0; kk < KD; ++kk) mx_qk_step(sc, qf[kk], kt, kk, xs);

        /* Scale, mask, rescore; then the online softmax per row (a row with
         * nothing visible yet keeps m = -inf and subtracts 0; a NaN score
         * makes l, O and lse NaN, as in flash_mma.cl). */
MX_UNROLL
        for (int n = 0; n < NS; ++n)
MX_UNROLL
            for (int e = 0; e < MX_CE; ++e) {
                const int hh = mx_el_slot(e), key = kw0 + n * MX_TK + mx_key_col(e);
                float x = sc[0][n][e] * scale_log2e;
#if FATTN_VAR
                x = key < klo[hh] || key >= lim[hh]
                        ? -INFINITY
                        : var_score(x, ri[hh], key, woff, cap2, sl2[hh], bs, brow[hh], bs_sd);
#else
                if (key < klo[hh] || key >= lim[hh]) x = -INFINITY;
#endif
                sc[0][n][e] = x;
            }
MX_UNROLL
        for (int hh = 0; hh < MX_RS; ++hh) {
            float mx = -INFINITY;
MX_UNROLL
            for (int n = 0; n < NS; ++n)
MX_UNROLL
                for (int e = 0; e < MX_CE; ++e)
                    if (mx_el_slot(e) == hh) mx = fmax(mx, sc[0][n][e]);
            mx = mx_row_max(mx, xs);
            const float mnew = fmax(mrow[hh], mx);
            const float mu = mnew == -INFINITY ? 0.0f : mnew;
            const float alpha = mx_exp2(mrow[hh] - mu);
            mrow[hh] = mnew;
            float sum = 0.0f;
MX_UNROLL
            for (int n = 0; n < NS; ++n)
MX_UNROLL
                for (int e = 0; e < MX_CE; ++e)
                    if (mx_el_slot(e) == hh) {
                        const float p = mx_exp2(sc[0][n][e] - mu);
                        sc[0][n][e] = p;
                        sum += p;
                    }
            lrow[hh] = lrow[hh] * alpha + sum;
MX_UNROLL
            for (int dt = 0; dt < ND; ++dt)
MX_UNROLL
                for (int e = 0; e < MX_CE; ++e)
                    if (mx_el_slot(e) == hh) oacc[0][dt][e] *= alpha;
        }
        mx_pv(oacc, sc, vt, xs);
        mx_warp_sync(); /* the stage is read before ISSUE writes it again */
    }

    /* Merge the warps: each row's max and sum per warp, the group's max M
     * and sum L, each warp's accumulators scaled by exp2(m_w - M) over the
     * rings, then summed and divided by L on the way out. */
    mx_cp_wait(0);
    barrier(CLK_LOCAL_MEM_FENCE); /* every warp is done with the rings */
    __local float *Ow = (__local float *)ring4;          /* [NW][MX_TQ][DVPAD] */
    __local float(*wm)[MX_TQ] = (__local float(*)[MX_TQ])(Ow + OW_FLOATS); /* [NW][MX_TQ] */
    __local float(*wl)[MX_TQ] = wm + NW;
    __local float *rowM = (__local float *)(wl + NW), *rowL = rowM + MX_TQ;
MX_UNROLL
    for (int hh = 0; hh < MX_RS; ++hh) {
        const float l = mx_row_sum(lrow[hh], xs);
        if (mx_row_owner()) {
            wm[warp][mx_slot_row(hh)] = mrow[hh];
            wl[warp][mx_slot_row(hh)] = l;
        }
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    if (tid < MX_TQ) {
        float M = -INFINITY, L = 0.0f;
        for (int w = 0; w < NW; w++) M = fmax(M, wm[w][tid]);
        /* A warp that saw no key has l 0 (NaN stays NaN: times 0). */
        for (int w = 0; w < NW; w++)
            L += wm[w][tid] == -INFINITY ? wl[w][tid] * 0.0f : wl[w][tid] * exp2(wm[w][tid] - M);
        rowM[tid] = M;
        rowL[tid] = L;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
MX_UNROLL
    for (int hh = 0; hh < MX_RS; ++hh) {
        const int r = mx_slot_row(hh);
        const float mw = wm[warp][r];
        const float f = mw == -INFINITY ? 0.0f : exp2(mw - rowM[r]);
MX_UNROLL
        for (int dt = 0; dt < ND; ++dt)
MX_UNROLL
            for (int e = 0; e < MX_CE; ++e)
                if (mx_el_slot(e) == hh)
                    Ow[(warp * MX_TQ + r) * DVPAD + dt * MX_TD + mx_el_col(e)] = oacc[0][dt][e] * f;
    }
    barrier(CLK_LOCAL_MEM_FENCE);

    /* L == 0: no visible key in this split, O_s = 0 and lse_s = -inf; a NaN
     * stays NaN in both (a warp's NaN sum went into L). */
    for (int idx = tid; idx < MX_TQ * DVPAD; idx += NT) {
        const int r = idx / DVPAD, d = idx % DVPAD, rr = r0 + r;
        if (!ROW_OK(r) || d >= dv) continue;
        const int g = rr / Sq, i = rr - g * Sq;
        const long row = (b * Hq + hk * group + g) * Sq + i;
        float x = 0.0f;
        for (int w = 0; w < NW; w++) x += Ow[(w * MX_TQ + r) * DVPAD + d];
        const float L = rowL[r];
        ws[(row * splits + s) * dv + d] = L == 0.0f ? 0.0f : x / L;
    }
    if (tid < MX_TQ && ROW_OK(tid)) {
        const int rr = r0 + tid, g = rr / Sq, i = rr - g * Sq;
        const long row = (b * Hq + hk * group + g) * Sq + i;
        const float L = rowL[tid];
        ws[wl_off + row * splits + s] = L == 0.0f ? -INFINITY : (rowM[tid] + log2(L)) * M_LN2_F;
    }
}

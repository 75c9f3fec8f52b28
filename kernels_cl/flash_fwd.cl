/* Tiled FlashAttention forward, OpenCL C 1.2 (FlashAttention-2 work split),
 * register-blocked the SGEMM way.
 * One work-group owns BQ query rows of one (batch, head) and streams BKV-key
 * tiles of K and V through local memory, keeping each row's running max and
 * sum and rescaling its accumulator (online softmax). The group is a TQ x TK
 * grid of work-items. For S = Q K^T a work-item computes RPT rows x KPT keys,
 * reading one float4 of d per row and per key and doing 4*RPT*KPT FMAs with
 * them; for O += P V it owns RPT rows x CPT float4 chunks of output dims and
 * per key reads RPT probabilities and CPT chunks of V. Local-memory traffic
 * is thus a small fraction of an operand per FMA instead of one or two.
 * Rows are owned strided (ty + i*TQ) and keys and dim chunks too (tx + k*TK),
 * so neighbouring work-items touch neighbouring words of local memory.
 * f16 is read with vload_half and bf16 with shifts: no cl_khr_fp16 needed.
 * The host builds it after storage.cl (elem_t, LOAD, LOAD4, STORE) and
 * ragged.cl; every tunable has a default, and the host's ocl_local_bytes
 * mirrors the layout below, pads included.
 *
 * Built with FATTN_RAGGED=1 it takes variable-length sequences and paged
 * caches (ragged.cl): group (tile, b * Hq + h) resolves sequence b, does
 * nothing when its tile starts past the sequence's rows, and reads its rows
 * and keys where the tables put them; Sq, Sk and coff become the sequence's. A paged
 * tile first looks up its keys' pages into local memory (one more barrier
 * per tile); a key on a bad page is not loaded and its score is -inf.
 *
 * Built with FATTN_VAR (variants.cl) it runs the attention variants: each
 * row's visible keys are [lo, lim) (the window cuts both ends), key tiles
 * outside what the group's rows see are not loaded, a tile every row sees
 * whole skips the per-key mask, and visible scores go through var_score
 * (softcap, ALiBi, bias: the bias is read for visible keys only). Sinks join
 * each row's denominator at the end (var_finish). With head_dim_v, V, the
 * accumulators and O have DVPAD padded dims (DV at run time), Q and K DPAD. */

#ifndef DPAD
#define DPAD 64          /* head dim rounded up; the run-time D is <= DPAD */
#endif
#ifndef BQ
#define BQ 64            /* query rows per work-group */
#endif
#ifndef BKV
#define BKV 32           /* keys per streamed tile */
#endif
#ifndef TQ
#define TQ 16            /* work-items along rows; RPT = BQ / TQ rows each */
#endif
#ifndef TK
#define TK 8             /* work-items along keys and dims; KPT = BKV / TK keys each */
#endif
#ifndef QPAD
#define QPAD (TK < 8 ? 1 : 0)  /* float4s after each Q row: rows read together land in other banks */
#endif
#ifndef KPAD
#define KPAD 1           /* float4s after each K/V row: TK work-items read TK different keys */
#endif
#ifndef PPAD
#define PPAD 4           /* floats after each P row (multiple of 4, keeps rows float4-aligned) */
#endif

#define NT (TQ * TK)
#define RPT (BQ / TQ)
#define KPT (BKV / TK)
#define D4 (DPAD / 4)
#ifndef DVPAD
#define DVPAD DPAD       /* V's head dim rounded up (a build with head_dim_v sets it) */
#endif
#define DV4 (DVPAD / 4)
#define KV4 (D4 > DV4 ? D4 : DV4) /* float4s of a K or V row in local memory */
#define CPT (DV4 / TK)    /* float4 chunks of output dims per work-item */

#if FATTN_RAGGED
#define FWD_RAGGED_PARAMS , RAGGED_PARAMS
/* Key `key` (tile entry j) of K or V from base `hb` (offset and head): through
 * the tile's pages when paged, else row `key` from `kb` (offset, head,
 * sequence's batch and first row). A key on a bad page reads as zeros. */
#define KEY_LOAD(x, hb, kb, sb, ss, j, key, c, dim)                                                \
    (paged ? (pg[j] < 0 ? (float4)(0.0f)                                                           \
                        : load_row4(x, hb + pg[j] * sb + sl[j] * ss, 4 * (c), dim))                \
           : load_row4(x, kb + (key) * ss, 4 * (c), dim))
#define KEY_MASKED(key, lim, j) ((key) >= (lim) || (paged && pg[j] < 0))
#define KEY_PAGE_BAD(j) (paged && pg[j] < 0)
#else
#define FWD_RAGGED_PARAMS
#define KEY_LOAD(x, hb, kb, sb, ss, j, key, c, dim) load_row4(x, kb + (key) * ss, 4 * (c), dim)
#define KEY_MASKED(key, lim, j) ((key) >= (lim))
#define KEY_PAGE_BAD(j) 0
#endif

#if BQ % TQ != 0 || BKV % TK != 0 || BKV % 4 != 0 || DPAD % (4 * TK) != 0 || PPAD % 4 != 0 ||   \
    DVPAD % (4 * TK) != 0
#error "need BQ % TQ == 0, BKV % TK == 0, BKV % 4 == 0, DPAD and DVPAD % (4 * TK) == 0, PPAD % 4 == 0"
#endif



/* Keys j < key_limit(i) are visible to query row i: with causal, key j is
 * visible iff j <= i + coff (coff = Sk - Sq bottom-right, 0 top-left). The
 * host clamps coff to [-Sq, Sk] and i < Sq < 2^31, so i + coff + 1 cannot
 * overflow a long, and the clamped result fits an int. */
inline int key_limit(int i, int Sk, int causal, long coff) {
    if (!causal) return Sk;
    return (int)clamp((long)i + coff + 1, 0L, (long)Sk);
}

__kernel __attribute__((reqd_work_group_size(NT, 1, 1)))
void flash_fwd(__global const elem_t *q, long q_off, long q_sb, long q_sh, long q_ss,
               __global const elem_t *k, long k_off, long k_sb, long k_sh, long k_ss,
               __global const elem_t *v, long v_off, long v_sb, long v_sh, long v_ss,
               __global elem_t *o, long o_off, long o_sb, long o_sh, long o_ss,
               __global float *lse, long l_off, long l_sb, long l_sh, long l_ss, int has_lse,
               int Hq, int group, int Sq, int Sk, int D, float scale_log2e, int causal, long coff
               VAR_PARAMS FWD_RAGGED_PARAMS) {
    __local float4 Qs[BQ][D4 + QPAD];
    /* K for the scores, then V for the accumulation: one buffer, because the
     * scores are finished (a barrier) before V is written. */
    __local float4 KVs[BKV][KV4 + KPAD];
    __local float4 Ps[BQ][(BKV + PPAD) / 4];
    __local float red[BQ][TK];
#if FATTN_RAGGED
    __local int pg[BKV], sl[BKV]; /* a paged tile's keys: page (-1: none) and slot */
#endif

    const int tid = get_local_id(0);
    const int ty = tid / TK, tx = tid % TK;
    const int q0 = get_group_id(0) * BQ;
    const int bh = get_group_id(1);
    const int b = bh / Hq, h = bh % Hq, hk = h / group;
#if FATTN_RAGGED
    const rag_seq sq = rag_resolve(b, Sq, Sk, tid == 0 && q0 == 0 && h == 0, RAGGED_ARGS);
    /* A tile past the sequence's rows has no row (row < Sq) and, with Sk 0,
     * no key tile: it writes nothing. Not an early return ahead of the
     * barriers: PoCL 3.1 corrupted memory with one (decode.cl). */
    Sq = sq.len_q, Sk = q0 < sq.len_q ? sq.len_kv : 0;
    if (causal) coff = sq.coff;
    const int paged = rg_flags & RAG_PAGED;
    const long qb = q_off + sq.q_batch * q_sb + h * q_sh + sq.q_row0 * q_ss;
#define O_AT(row) (o_off + sq.q_batch * o_sb + h * o_sh + (sq.q_row0 + (row)) * o_ss)
#define LSE_AT(row) (l_off + sq.q_batch * l_sb + h * l_sh + (sq.q_row0 + (row)) * l_ss)
    const long khb = k_off + hk * k_sh, vhb = v_off + hk * v_sh;
    const long kb = khb + sq.kv_batch * k_sb + sq.kv_row0 * k_ss;
    const long vb = vhb + sq.kv_batch * v_sb + sq.kv_row0 * v_ss;
#else
    const long qb = q_off + b * q_sb + h * q_sh;
    const long kb = k_off + b * k_sb + hk * k_sh;
    const long vb = v_off + b * v_sb + hk * v_sh;
#define O_AT(row) (o_off + b * o_sb + h * o_sh + (row) * o_ss)
#define LSE_AT(row) (l_off + b * l_sb + h * l_sh + (row) * l_ss)
#endif

    /* Q scaled by scale * log2(e), so the softmax runs on exp2. */
    for (int idx = tid; idx < BQ * D4; idx += NT) {
        const int rr = idx / D4, c = idx % D4, row = q0 + rr;
        Qs[rr][c] = row < Sq ? load_row4(q, qb + row * q_ss, 4 * c, D) * scale_log2e : (float4)(0.0f);
    }

    int lim[RPT];
    float m_i[RPT], l_i[RPT];   /* l_i: this work-item's keys only; summed over the row at the end */
    float4 acc[RPT][CPT];
#if FATTN_VAR
    /* The window's offset (bottom-right), the row's slope and bias base. */
    const long woff = (long)Sk - Sq;
    const float slope2 = var_slope(al, al_off, al_sb, al_sh, b, h);
    const long bbase = bs_off + b * bs_sb + h * bs_sh;
    int lo[RPT]; /* the first key each row sees */
#endif
    for (int i = 0; i < RPT; i++) {
        const int row = q0 + ty + i * TQ;
        lim[i] = row < Sq ? key_limit(row, Sk, causal, coff) : 0;
#if FATTN_VAR
        lim[i] = row < Sq ? var_keys(row, woff, lim[i], win_left, win_right, &lo[i]) : 0;
        if (row >= Sq) lo[i] = 0;
#endif
        m_i[i] = -INFINITY;
        l_i[i] = 0.0f;
        for (int c = 0; c < CPT; c++) acc[i][c] = (float4)(0.0f);
    }
    /* Tiles past what the last row sees (key_limit grows with the row) are
     * skipped, not masked. */
    const int kv_end = key_limit(min(q0 + BQ, Sq) - 1, Sk, causal, coff);
#if FATTN_VAR
    /* ... and so are tiles before what the first row sees (the window's left
     * edge grows with the row too); tiles in [full_lo, full_hi) every row
     * of the group sees whole. */
    int kv_lo = 0, kv_hi = 0, full_lo = 0, full_hi = 0;
    const int last = min(q0 + BQ, Sq) - 1;
    if (last >= q0) {
        kv_hi = var_keys(last, woff, kv_end, win_left, win_right, &full_lo);
        full_hi = var_keys(q0, woff, key_limit(q0, Sk, causal, coff), win_left, win_right, &kv_lo);
    }
    for (int j0 = kv_lo / BKV * BKV; j0 < kv_hi; j0 += BKV) {
#else
    for (int j0 = 0; j0 < kv_end; j0 += BKV) {
#endif
        barrier(CLK_LOCAL_MEM_FENCE);   /* the previous tile's readers of V, P (and pages) are done */
#if FATTN_RAGGED
        if (paged) {
            rag_tile_pages(pg, sl, BKV, j0, Sk, b, tid, NT, RAGGED_ARGS);
            barrier(CLK_LOCAL_MEM_FENCE);
        }
#endif
        for (int idx = tid; idx < BKV * D4; idx += NT) {
            const int j = idx / D4, c = idx % D4, key = j0 + j;
            KVs[j][c] = key < Sk ? KEY_LOAD(k, khb, kb, k_sb, k_ss, j, key, c, D) : (float4)(0.0f);
        }
        barrier(CLK_LOCAL_MEM_FENCE);

        float s[RPT][KPT];
        for (int i = 0; i < RPT; i++)
            for (int kk = 0; kk < KPT; kk++) s[i][kk] = 0.0f;
        for (int c = 0; c < D4; c++) {
            float4 qv[RPT], kv[KPT];
            for (int i = 0; i < RPT; i++) qv[i] = Qs[ty + i * TQ][c];
            for (int kk = 0; kk < KPT; kk++) kv[kk] = KVs[tx + kk * TK][c];
            for (int i = 0; i < RPT; i++)
                for (int kk = 0; kk < KPT; kk++) {
                    float a = s[i][kk];
                    a = mad(qv[i].x, kv[kk].x, a);
                    a = mad(qv[i].y, kv[kk].y, a);
                    a = mad(qv[i].z, kv[kk].z, a);
                    a = mad(qv[i].w, kv[kk].w, a);
                    s[i][kk] = a;
                }
        }

#if FATTN_VAR
        /* A tile every row sees whole needs no per-key mask: a row either
         * sees all of it or (a row past Sq, lim 0) none. */
        const int full = j0 >= full_lo && j0 + BKV <= full_hi;
#endif
        for (int i = 0; i < RPT; i++) {
            float mx = -INFINITY;
#if FATTN_VAR
            const int row = q0 + ty + i * TQ;
            const long brow = bbase + row * bs_ss;
            const int rfull = full && lim[i] > j0;
#endif
            for (int kk = 0; kk < KPT; kk++) {
#if FATTN_VAR
                const int key = j0 + tx + kk * TK;
                const int hidden = full ? !rfull || KEY_PAGE_BAD(tx + kk * TK)
                                        : KEY_MASKED(key, lim[i], tx + kk * TK) || key < lo[i];
                s[i][kk] = hidden ? -INFINITY
                                  : var_score(s[i][kk], row, key, woff, cap2, slope2, bs, brow,
                                              bs_sd);
#else
                if (KEY_MASKED(j0 + tx + kk * TK, lim[i], tx + kk * TK)) s[i][kk] = -INFINITY;
#endif
                mx = fmax(mx, s[i][kk]);
            }
            red[ty + i * TQ][tx] = mx;
        }
        barrier(CLK_LOCAL_MEM_FENCE);   /* also: every work-item is done reading K */

        for (int idx = tid; idx < BKV * DV4; idx += NT) {
            const int j = idx / DV4, c = idx % DV4, key = j0 + j;
            KVs[j][c] =
                key < Sk ? KEY_LOAD(v, vhb, vb, v_sb, v_ss, j, key, c, DV_OF(D)) : (float4)(0.0f);
        }
        for (int i = 0; i < RPT; i++) {
            const int r = ty + i * TQ;
            float mx = -INFINITY;
            for (int t = 0; t < TK; t++) mx = fmax(mx, red[r][t]);
            const float m_new = fmax(m_i[i], mx);
            /* A row that has seen no key yet keeps m = -inf: nothing to rescale. */
            const float alpha = m_new == -INFINITY ? 1.0f : exp2(m_i[i] - m_new);
            __local float *prow = (__local float *)Ps[r];
            float psum = 0.0f;
            for (int kk = 0; kk < KPT; kk++) {
                const float p = s[i][kk] == -INFINITY ? 0.0f : exp2(s[i][kk] - m_new);
                prow[tx + kk * TK] = p;
                psum += p;
            }
            l_i[i] = l_i[i] * alpha + psum;
            m_i[i] = m_new;
            for (int c = 0; c < CPT; c++) acc[i][c] *= alpha;
        }
        barrier(CLK_LOCAL_MEM_FENCE);

        for (int j4 = 0; j4 < BKV / 4; j4++) {
            float4 pv[RPT];
            for (int i = 0; i < RPT; i++) pv[i] = Ps[ty + i * TQ][j4];
            for (int c = 0; c < CPT; c++) {
                const float4 v0 = KVs[4 * j4 + 0][tx + c * TK];
                const float4 v1 = KVs[4 * j4 + 1][tx + c * TK];
                const float4 v2 = KVs[4 * j4 + 2][tx + c * TK];
                const float4 v3 = KVs[4 * j4 + 3][tx + c * TK];
                for (int i = 0; i < RPT; i++) {
                    float4 a = acc[i][c];
                    a = mad((float4)(pv[i].x), v0, a);
                    a = mad((float4)(pv[i].y), v1, a);
                    a = mad((float4)(pv[i].z), v2, a);
                    a = mad((float4)(pv[i].w), v3, a);
                    acc[i][c] = a;
                }
            }
        }
    }

    /* The last readers of red passed the loop's final barrier, so it is free. */
    for (int i = 0; i < RPT; i++) red[ty + i * TQ][tx] = l_i[i];
    barrier(CLK_LOCAL_MEM_FENCE);

    for (int i = 0; i < RPT; i++) {
        const int r = ty + i * TQ, row = q0 + r;
        if (row >= Sq) continue;
        float l = 0.0f;
        for (int t = 0; t < TK; t++) l += red[r][t];
        /* l == 0: no finite score, so O = 0 and lse = -inf. A NaN or +inf
         * score made l NaN (fmax skips NaN, but exp2 of it reaches l), and
         * NaN it stays in both. */
#if FATTN_VAR
        float inv;
        const float lse2 = var_finish(m_i[i], l, var_sink(snk, snk_off, snk_sh, h), &inv);
#else
        const float inv = l == 0.0f ? 0.0f : 1.0f / l;
#endif
        const long ob = O_AT(row);
        const int Do = DV_OF(D);
        for (int c = 0; c < CPT; c++) {
            const int d = 4 * (tx + c * TK);
            const float4 x = acc[i][c] * inv;
            if (d < Do) STORE(o, ob + d, x.x);
            if (d + 1 < Do) STORE(o, ob + d + 1, x.y);
            if (d + 2 < Do) STORE(o, ob + d + 2, x.z);
            if (d + 3 < Do) STORE(o, ob + d + 3, x.w);
        }
#if FATTN_VAR
        if (has_lse && tx == 0) lse[LSE_AT(row)] = lse2 * M_LN2_F;
#else
        if (has_lse && tx == 0)
            lse[LSE_AT(row)] =
                l == 0.0f ? -INFINITY : (m_i[i] + log2(l)) * M_LN2_F;
#endif
    }
}

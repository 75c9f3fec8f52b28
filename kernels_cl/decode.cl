/* Split-KV decoding with GQA packing, OpenCL C 1.2 (flash-decoding): the
 * first half of the OpenCL "decode" variant; kernels_cl/combine.cl, run next
 * on the same queue, is the second (backends/opencl/ocl_decode.c).
 *
 * Rows. The query rows that read one KV head, all `group` query heads that
 * share it times all Sq rows, are packed into R = group * Sq rows, row
 * rr = g * Sq + i for query head hk * group + g and query row i. A
 * work-group takes a tile of BR of them (row tile rt: rows rt * BR ..), so
 * each K/V element it streams serves BR rows (every query head of the group
 * when R <= BR) instead of one.
 *
 * Keys. The ceil(Sk / BKV) key tiles are divided among `splits` work-groups
 * per row tile: split s takes tiles [s * tiles / splits, (s + 1) * tiles /
 * splits), none empty while splits <= tiles. Work-group (b, hk, rt, s) is
 * group id ((b * Hkv + hk) * row_tiles + rt) * splits + s.
 *
 * Per key tile the group loads K into local memory in the storage dtype
 * (KVs; f16 and bf16 stay 16-bit there), computes the scores S = Q K^T
 * (Q pre-scaled by scale * log2(e), so the softmax runs on exp2, as in
 * flash_fwd.cl) into Ps, finds each row's new running max, loads V over K,
 * turns Ps into probabilities, and accumulates O += P V, rescaling by
 * exp2(m_old - m_new) first: the online softmax in float32, with the same
 * guards as flash_fwd.cl (while a row's max is -inf nothing is rescaled and
 * a -inf score weighs 0; a NaN or +inf score makes l NaN, and NaN stays).
 * Causal: key j is visible to row i iff j < key_limit(i) (coff as the host
 * clamps it); tiles past what the tile's rows see are not loaded.
 *
 * Output: the split's partial result, normalised, to the float32
 * workspace: O_s = acc / l at ws[(row * splits + s) * D + d] and
 * lse_s = m + log(l) (natural log) at ws[wl_off + row * splits + s], row =
 * (b * Hq + h) * Sq + i. A split in which a row sees no key (l = 0, empty
 * splits included) writes O_s = 0 and lse_s = -inf, which combine.cl skips.
 * combine.cl then merges the splits of each row, parts stride D (lse: 1).
 *
 * Work-item maps (NT work-items; the host picks them, all powers of two):
 *   scores: SR x SK: rows sy + ii * SR, keys sk + kk * SK (SR * SK <= NT;
 *           work-items past SR * SK idle in this phase);
 *   P V:    VK x VR x VC (VC fastest): rows vy + ii * VR, float4 chunks of
 *           dims vc + cc * VC, keys vk + kk * VK; the VK key lanes' partial
 *           sums (same running max) are added once at the end.
 * The host builds it after storage.cl (elem_t, LOAD, LOAD4) and ragged.cl,
 * and its decode_local_bytes mirrors the local arrays below, pads included.
 *
 * Built with FATTN_RAGGED=1 it takes variable-length sequences and paged
 * caches (ragged.cl). The rows stay packed by the longest sequence (row
 * index and workspace layout as above, Sq the longest), and rows past the
 * sequence's len_q are neither computed nor written (combine.cl's ragged
 * build skips them too); a group whose tile has none of its rows does
 * nothing (not an early return: see below). The sequence's own
 * ceil(len_kv / BKV) key tiles are divided among the splits, so a split may
 * get none and then writes lse -inf. A paged tile first looks up its keys'
 * pages into local memory; a key on a bad page is not loaded and its score
 * is -inf. */

#ifndef DPAD
#define DPAD 128 /* head dim rounded up: 32, 64, 128 or 256 */
#endif
#ifndef BR
#define BR 4 /* query rows per work-group */
#endif
#ifndef BKV
#define BKV 64 /* keys per streamed tile */
#endif
#ifndef NT
#define NT 128 /* work-items per group */
#endif
#ifndef SR
#define SR 2 /* scores: row lanes */
#endif
#ifndef SK
#define SK 64 /* scores: key lanes */
#endif
#ifndef VR
#define VR 4 /* P V: row lanes */
#endif
#ifndef VC
#define VC 32 /* P V: dim-chunk lanes */
#endif
#ifndef VK
#define VK 1 /* P V: key lanes */
#endif

#define D4 (DPAD / 4)
#define SRPT (BR / SR)
#define SKPT (BKV / SK)
#define VRPT (BR / VR)
#define VCPT (D4 / VC)
#define VKPT (BKV / VK)

#if BR % SR != 0 || BKV % SK != 0 || SR * SK > NT || BR % VR != 0 || D4 % VC != 0 ||               \
    BKV % VK != 0 || VR * VC * VK != NT || BR > NT
#error "decode.cl: inconsistent work-item maps"
#endif

/* K and V tiles in local memory, 4 elements per entry: float4 for f32, the
 * 16-bit patterns (ushort4) for f16 and bf16; KV_GET widens one entry. */
#if DTYPE == 0
typedef float4 kv_t;
#define KV_GET(j, c) (KVs[j][c])
#else
typedef ushort4 kv_t;
#if DTYPE == 1
#define KV_GET(j, c) vload_half4(0, (__local const half *)&KVs[j][c])
#else
#define KV_GET(j, c) as_float4(convert_uint4(KVs[j][c]) << 16)
#endif
#endif


/* The same elements in the local tiles' form: 16-bit types are copied as
 * bits (zero bits are 0.0 in f16 and bf16). */
inline kv_t load_kv4(__global const elem_t *p, long base, int d, int D) {
#if DTYPE == 0
    return load_row4(p, base, d, D);
#else
    __global const ushort *u = (__global const ushort *)p + base;
    if (d + 4 <= D) return vload4(0, u + d);
    ushort4 x = (ushort4)(0);
    if (d < D) x.x = u[d];
    if (d + 1 < D) x.y = u[d + 1];
    if (d + 2 < D) x.z = u[d + 2];
    return x;
#endif
}

/* Keys j < key_limit(i) are visible to query row i (flash_fwd.cl's rule):
 * with causal, j <= i + coff; coff is clamped to [-Sq, Sk] by the host. */
inline int key_limit(int i, int Sk, int causal, long coff) {
    if (!causal) return Sk;
    return (int)clamp((long)i + coff + 1, 0L, (long)Sk);
}

#if FATTN_RAGGED
#define DEC_RAGGED_PARAMS , RAGGED_PARAMS
/* Key `key` (tile entry j) of K or V, as flash_fwd.cl's KEY_LOAD: through the
 * tile's pages from `hb` (offset and head) when paged, else row `key` from
 * `kb`; a key on a bad page reads as zeros. */
#define KEY_LOAD(x, hb, kb, sb, ss, j, key, c)                                                     \
    (paged ? (pg[j] < 0 ? (kv_t)(0) : load_kv4(x, hb + pg[j] * sb + sl[j] * ss, 4 * (c), D))       \
           : load_kv4(x, kb + (long)(key) * ss, 4 * (c), D))
#define KEY_MASKED(key, lim, j) ((key) >= (lim) || (paged && pg[j] < 0))
#else
#define DEC_RAGGED_PARAMS
#define KEY_LOAD(x, hb, kb, sb, ss, j, key, c) load_kv4(x, kb + (long)(key) * ss, 4 * (c), D)
#define KEY_MASKED(key, lim, j) ((key) >= (lim))
#endif

/* global: (groups * NT), groups = B * Hkv * row_tiles * splits; local: (NT). */
__kernel __attribute__((reqd_work_group_size(NT, 1, 1)))
void decode(__global const elem_t *q, long q_off, long q_sb, long q_sh, long q_ss,
            __global const elem_t *k, long k_off, long k_sb, long k_sh, long k_ss,
            __global const elem_t *v, long v_off, long v_sb, long v_sh, long v_ss,
            __global float *ws, long wl_off, int Hq, int Hkv, int group, int Sq, int Sk, int D,
            float scale_log2e, int causal, long coff, int splits, int row_tiles,
            int tiles DEC_RAGGED_PARAMS) {
    __local float4 Qs[BR][D4 + 1]; /* Q; at the end, the summed accumulators */
    __local kv_t KVs[BKV][D4 + 1]; /* K for the scores, then V */
    __local float Ps[BR][BKV + 1]; /* scores, then probabilities */
    __local float rowm[BR], rowa[BR], rowl[BR];
    __local int rowlim[BR];
#if FATTN_RAGGED
    __local int pg[BKV], sl[BKV]; /* a paged tile's keys: page (-1: none) and slot */
#endif

    const int tid = get_local_id(0);
    const long gid = get_group_id(0);
    const int s = (int)(gid % splits);
    const long rest = gid / splits;
    const int rt = (int)(rest % row_tiles);
    const long bh = rest / row_tiles;
    const int hk = (int)(bh % Hkv);
    const long b = bh / Hkv;
    const int R = group * Sq, r0 = rt * BR;
    const int rows = min(BR, R - r0);
#if FATTN_RAGGED
    /* Sequence b's rows rr are those with rr % Sq < Lq; the rest are skipped. */
    const int first = r0, last = r0 + rows - 1;
    const rag_seq sq = rag_resolve(b, Sq, Sk, tid == 0 && hk == 0 && rt == 0 && s == 0, RAGGED_ARGS);
    const int Lq = sq.len_q, cross = first / Sq != last / Sq;
    /* A group with none of them has no row (ROW_OK) and, with Sk 0, no key
     * tile: it writes nothing. Not an early return ahead of the barriers:
     * with one, PoCL 3.1 corrupted host memory when a split had no key tile. */
    const int live = cross ? Lq > 0 : first % Sq < Lq;
    Sk = live ? sq.len_kv : 0;
    if (causal) coff = sq.coff;
    tiles = (Sk + BKV - 1) / BKV; /* the sequence's own, divided among the splits */
    const int paged = rg_flags & RAG_PAGED;
    const long khb = k_off + hk * k_sh, vhb = v_off + hk * v_sh;
    const long kb = khb + sq.kv_batch * k_sb + sq.kv_row0 * k_ss;
    const long vb = vhb + sq.kv_batch * v_sb + sq.kv_row0 * v_ss;
#define ROW_OK(r) (live && (r) < rows && (r0 + (r)) % Sq < Lq)
#define Q_AT(g, i)                                                                                 \
    (q_off + sq.q_batch * q_sb + (long)(hk * group + (g)) * q_sh + (sq.q_row0 + (i)) * q_ss)
    const int t0 = (int)((long)s * tiles / splits), t1 = (int)((long)(s + 1) * tiles / splits);
    /* The largest query index among the tile's rows that are the sequence's. */
    const int imax = cross ? Lq - 1 : min(last % Sq, Lq - 1);
#else
    const long kb = k_off + b * k_sb + hk * k_sh;
    const long vb = v_off + b * v_sb + hk * v_sh;
#define ROW_OK(r) ((r) < rows)
#define Q_AT(g, i) (q_off + b * q_sb + (long)(hk * group + (g)) * q_sh + (long)(i) * q_ss)

    /* This split's keys: whole tiles, ending where the tile's last-seeing row
     * stops (the largest query index among its rows: Sq - 1 when the rows
     * cross a head boundary). */
    const int t0 = (int)((long)s * tiles / splits), t1 = (int)((long)(s + 1) * tiles / splits);
    const int first = r0, last = r0 + rows - 1;
    const int imax = first / Sq != last / Sq ? Sq - 1 : last % Sq;
#endif
    const int j_hi = min(t1 * BKV, key_limit(imax, Sk, causal, coff));

    for (int idx = tid; idx < BR * D4; idx += NT) {
        const int r = idx / D4, c = idx % D4, rr = r0 + r;
        float4 x = (float4)(0.0f);
        if (ROW_OK(r)) {
            const int g = rr / Sq, i = rr - g * Sq;
            const long qb = Q_AT(g, i);
            x = load_row4(q, qb, 4 * c, D) * scale_log2e;
        }
        Qs[r][c] = x;
    }
    if (tid < BR) {
        rowlim[tid] = ROW_OK(tid) ? key_limit((r0 + tid) % Sq, Sk, causal, coff) : 0;
        rowm[tid] = -INFINITY;
    }

    const int sk = tid % SK, sy = tid / SK;
    const int vc = tid % VC, vy = (tid / VC) % VR, vk = tid / (VC * VR);
    float4 acc[VRPT][VCPT];
    float l_i[VRPT]; /* this work-item's keys only; summed over the key lanes at the end */
    for (int ii = 0; ii < VRPT; ii++) {
        l_i[ii] = 0.0f;
        for (int cc = 0; cc < VCPT; cc++) acc[ii][cc] = (float4)(0.0f);
    }

    for (int j0 = t0 * BKV; j0 < j_hi; j0 += BKV) {
        barrier(CLK_LOCAL_MEM_FENCE); /* the previous tile's readers of V, P (and pages) are done */
#if FATTN_RAGGED
        if (paged) {
            rag_tile_pages(pg, sl, BKV, j0, j_hi, b, tid, NT, RAGGED_ARGS);
            barrier(CLK_LOCAL_MEM_FENCE);
        }
#endif
        for (int idx = tid; idx < BKV * D4; idx += NT) {
            const int j = idx / D4, c = idx % D4, key = j0 + j;
            KVs[j][c] = key < j_hi ? KEY_LOAD(k, khb, kb, k_sb, k_ss, j, key, c) : (kv_t)(0);
        }
        barrier(CLK_LOCAL_MEM_FENCE);

        if (sy < SR) {
            float sc[SRPT][SKPT];
            for (int ii = 0; ii < SRPT; ii++)
                for (int kk = 0; kk < SKPT; kk++) sc[ii][kk] = 0.0f;
            for (int c = 0; c < D4; c++) {
                float4 kv[SKPT];
                for (int kk = 0; kk < SKPT; kk++) kv[kk] = KV_GET(sk + kk * SK, c);
                for (int ii = 0; ii < SRPT; ii++) {
                    const float4 qv = Qs[sy + ii * SR][c];
                    for (int kk = 0; kk < SKPT; kk++) {
                        float a = sc[ii][kk];
                        a = mad(qv.x, kv[kk].x, a);
                        a = mad(qv.y, kv[kk].y, a);
                        a = mad(qv.z, kv[kk].z, a);
                        a = mad(qv.w, kv[kk].w, a);
                        sc[ii][kk] = a;
                    }
                }
            }
            for (int ii = 0; ii < SRPT; ii++) {
                const int r = sy + ii * SR, lim = rowlim[r];
                for (int kk = 0; kk < SKPT; kk++) {
                    const int j = sk + kk * SK;
                    Ps[r][j] = KEY_MASKED(j0 + j, lim, j) ? -INFINITY : sc[ii][kk];
                }
            }
        }
        barrier(CLK_LOCAL_MEM_FENCE); /* scores written; K is no longer read */

        if (tid < BR) {
            float mx = -INFINITY;
            for (int j = 0; j < BKV; j++) mx = fmax(mx, Ps[tid][j]);
            const float m_old = rowm[tid], m_new = fmax(m_old, mx);
            /* A row that has seen no key yet keeps m = -inf: nothing to rescale. */
            rowa[tid] = m_new == -INFINITY ? 1.0f : exp2(m_old - m_new);
            rowm[tid] = m_new;
        }
        for (int idx = tid; idx < BKV * D4; idx += NT) {
            const int j = idx / D4, c = idx % D4, key = j0 + j;
            KVs[j][c] = key < j_hi ? KEY_LOAD(v, vhb, vb, v_sb, v_ss, j, key, c) : (kv_t)(0);
        }
        barrier(CLK_LOCAL_MEM_FENCE);

        for (int idx = tid; idx < BR * BKV; idx += NT) {
            const int r = idx / BKV, j = idx % BKV;
            const float x = Ps[r][j];
            Ps[r][j] = x == -INFINITY ? 0.0f : exp2(x - rowm[r]);
        }
        barrier(CLK_LOCAL_MEM_FENCE);

        for (int ii = 0; ii < VRPT; ii++) {
            const float a = rowa[vy + ii * VR];
            l_i[ii] *= a;
            for (int cc = 0; cc < VCPT; cc++) acc[ii][cc] *= a;
        }
        for (int kk = 0; kk < VKPT; kk++) {
            const int j = vk + kk * VK;
            float4 vv[VCPT];
            for (int cc = 0; cc < VCPT; cc++) vv[cc] = KV_GET(j, vc + cc * VC);
            for (int ii = 0; ii < VRPT; ii++) {
                const float p = Ps[vy + ii * VR][j];
                l_i[ii] += p;
                for (int cc = 0; cc < VCPT; cc++)
                    acc[ii][cc] = mad((float4)(p), vv[cc], acc[ii][cc]);
            }
        }
    }

    /* Sum the key lanes into Qs (Q is no longer read) and rowl, lane by lane
     * (a fixed order: the result is deterministic). */
    for (int w = 0; w < VK; w++) {
        barrier(CLK_LOCAL_MEM_FENCE);
        if (vk == w) {
            for (int ii = 0; ii < VRPT; ii++) {
                const int r = vy + ii * VR;
                for (int cc = 0; cc < VCPT; cc++) {
                    const int c = vc + cc * VC;
                    Qs[r][c] = w == 0 ? acc[ii][cc] : Qs[r][c] + acc[ii][cc];
                }
                if (vc == 0) rowl[r] = w == 0 ? l_i[ii] : rowl[r] + l_i[ii];
            }
        }
    }
    barrier(CLK_LOCAL_MEM_FENCE);

    /* l == 0: no visible key in this split, O_s = 0 and lse_s = -inf. A NaN
     * l stays NaN in both. */
    for (int idx = tid; idx < BR * D4; idx += NT) {
        const int r = idx / D4, c = idx % D4, rr = r0 + r;
        if (!ROW_OK(r)) continue;
        const int g = rr / Sq, i = rr - g * Sq;
        const long row = (b * Hq + hk * group + g) * Sq + i;
        const float l = rowl[r];
        const float4 x = Qs[r][c] * (l == 0.0f ? 0.0f : 1.0f / l);
        const long ob = (row * splits + s) * D;
        const int d = 4 * c;
        if (d < D) ws[ob + d] = x.x;
        if (d + 1 < D) ws[ob + d + 1] = x.y;
        if (d + 2 < D) ws[ob + d + 2] = x.z;
        if (d + 3 < D) ws[ob + d + 3] = x.w;
    }
    if (ROW_OK(tid)) {
        const int rr = r0 + tid, g = rr / Sq, i = rr - g * Sq;
        const long row = (b * Hq + hk * group + g) * Sq + i;
        const float l = rowl[tid];
        ws[wl_off + row * splits + s] = l == 0.0f ? -INFINITY : (rowm[tid] + log2(l)) * M_LN2_F;
    }
}

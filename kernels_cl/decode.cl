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
 * Per key tile (four barriers) the group stores the tile's K and V, which
 * its work-items loaded into registers during the previous tile, into local
 * memory in the storage dtype (16-byte chunks: float4 for f32, eight 16-bit
 * patterns for f16 and bf16), issues the next tile's loads (one 16-byte
 * load per chunk when the host finds the rows aligned, KV_VEC), computes
 * the scores S = Q K^T (Q pre-scaled by scale * log2(e), so the softmax runs
 * on exp2, as in flash_fwd.cl) into Ps, turns them into probabilities Pp
 * (the NL = NT / BR lanes of each row all find the tile's max and keep the
 * running max in a register), and accumulates O += P V, rescaling by
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
 *   loads:  chunk tid % DC of keys tid / DC + n * KSTEP (KSTEP = NT / DC);
 *   scores: SR x SK: rows sy + ii * SR, keys sk + kk * SK (SR * SK <= NT;
 *           work-items past SR * SK idle in this phase);
 *   P V:    VK x VR x VC (VC fastest): rows vy + ii * VR, chunks of dims
 *           vc + cc * VC, keys vk + kk * VK; the VK key lanes' partial sums
 *           (same running max) are added once at the end.
 * The host builds it after storage.cl (elem_t, LOAD, LOAD4), ragged.cl and
 * decode_split.cl (the group's place and its split), and its decode_local_bytes mirrors the local arrays below, pads included.
 *
 * Built with FATTN_RAGGED=1 it takes variable-length sequences and paged
 * caches (ragged.cl). The rows stay packed by the longest sequence (row
 * index and workspace layout as above, Sq the longest), and rows past the
 * sequence's len_q are neither computed nor written (combine.cl's ragged
 * build skips them too); a group whose tile has none of its rows does
 * nothing (not an early return: see below). The sequence's own
 * ceil(len_kv / BKV) key tiles are divided among the splits, so a split may
 * get none and then writes lse -inf. Paged, the group looks up each key's
 * page once, a work-item per key of a tile: the table entries of tile t + 2
 * are loaded while tile t is computed, next to tile t + 1's K/V loads, and
 * stored as row offsets in local memory (kps) before tile t + 1's step, so no
 * K/V load waits on a table load of its own step. A key on a bad page is
 * not loaded and its score is -inf.
 *
 * Built with FATTN_VAR (variants.cl) it runs the attention variants but the
 * sinks, which the combine adds once per row (its SINKS build): the rows'
 * window edges, slopes and bias rows sit in local memory by row, the
 * split's tiles are divided from the ones the tile's rows see (the
 * window's first one on), a tile every row sees whole skips the per-key
 * mask, and visible scores go through var_score. With head_dim_v, V, the
 * accumulators and the partial O have DVPAD padded dims (DVC chunks, loaded
 * by a map of their own), Q and K DPAD. */

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
#define VC 16 /* P V: chunk lanes */
#endif
#ifndef VK
#define VK 2 /* P V: key lanes */
#endif
#ifndef FATTN_PAGED
#define FATTN_PAGED 0 /* 1: the ragged build for a paged cache (the host sets it with FATTN_RAGGED) */
#endif
#ifndef KV_VEC
#define KV_VEC 0 /* 1: K/V rows are 16-byte aligned and D % CE == 0 (the host checks) */
#endif
#ifndef ACC_COPY
#define ACC_COPY 0 /* 1: the key-lane sum reads a copy of the accumulators (CPU devices) */
#endif

/* A K/V chunk is 16 bytes: CE elements, kept in local memory in the storage
 * dtype (chunk_t) and widened to CE floats (kvf_t) where it is used. */
#if DTYPE == 0
#define CE 4
typedef float4 chunk_t;
typedef float4 kvf_t;
#else
#define CE 8
typedef uint4 chunk_t;
typedef float8 kvf_t;
#endif
#ifndef DVPAD
#define DVPAD DPAD /* V's head dim rounded up (a build with head_dim_v sets it) */
#endif
#define DC (DPAD / CE)      /* chunks per row */
#define DVC (DVPAD / CE)    /* chunks per V row */
#define DCX (DC > DVC ? DC : DVC)
#define KSTEP (NT / DC)     /* key stride of one work-item's loads */
#define LPT (BKV / KSTEP)   /* K chunks one work-item loads per tile */
#define KSTEPV (NT / DVC)   /* ... and of V (the same without head_dim_v) */
#define LPTV (BKV / KSTEPV)
#define LPTX (LPT > LPTV ? LPT : LPTV)
#define NL (NT / BR)        /* softmax lanes per row */
#define SRPT (BR / SR)
#define SKPT (BKV / SK)
#define VRPT (BR / VR)
#define VCPT (DVC / VC)
#define VKPT (BKV / VK)

#if BR % SR != 0 || BKV % SK != 0 || SR * SK > NT || BR % VR != 0 || DVC % VC != 0 ||              \
    BKV % VK != 0 || VR * VC * VK != NT || BR > NT || NT % DC != 0 || BKV % KSTEP != 0 ||          \
    LPT > 32 || NT % BR != 0 || BKV % 4 != 0 || NT % DVC != 0 || BKV % KSTEPV != 0 || LPTV > 32
#error "decode.cl: inconsistent work-item maps"
#endif

/* One chunk widened, elements in order. */
#if DTYPE == 0
#define KV_GET(A, j, c) (A[j][c])
#elif DTYPE == 1
#define KV_GET(A, j, c) vload_half8(0, (__local const half *)&A[j][c])
#else
inline float8 bf16x8(uint4 u) {
    const uint4 lo = u << 16, hi = u & (uint4)(0xffff0000u);
    return as_float8((uint8)(lo.x, hi.x, lo.y, hi.y, lo.z, hi.z, lo.w, hi.w));
}
#define KV_GET(A, j, c) bf16x8(A[j][c])
#endif

inline float dotv(kvf_t a, kvf_t b) {
#if DTYPE == 0
    return dot(a, b);
#else
    return dot(a.lo, b.lo) + dot(a.hi, b.hi);
#endif
}

/* Chunk c (elements CE * c ..) of the row at element `base`, zeros past D.
 * KV_VEC: one 16-byte load (the host has checked alignment and D). */
inline chunk_t load_chunk(__global const elem_t *p, long base, int c, int D) {
    const int d = CE * c;
#if KV_VEC
    /* D % CE == 0: a chunk is wholly inside the row or wholly past it, and
     * one past it must not be read (the next row's values, times Q's zero
     * padding, can be inf or NaN; past the last row, outside the buffer). */
    if (d >= D) return (chunk_t)(0);
    return *(__global const chunk_t *)(p + base + d);
#elif DTYPE == 0
    return load_row4(p, base, d, D);
#else
    __global const ushort *u = (__global const ushort *)p + base + d;
    if (d + CE <= D) return as_uint4(vload8(0, u));
    ushort8 x = (ushort8)(0);
    if (d < D) x.s0 = u[0];
    if (d + 1 < D) x.s1 = u[1];
    if (d + 2 < D) x.s2 = u[2];
    if (d + 3 < D) x.s3 = u[3];
    if (d + 4 < D) x.s4 = u[4];
    if (d + 5 < D) x.s5 = u[5];
    if (d + 6 < D) x.s6 = u[6];
    return as_uint4(x);
#endif
}

/* Chunk c of row (element base) of Q, widened and zero past D. */
inline kvf_t load_q(__global const elem_t *q, long base, int c, int D) {
#if DTYPE == 0
    return load_row4(q, base, CE * c, D);
#else
    return (kvf_t)(load_row4(q, base, CE * c, D), load_row4(q, base, CE * c + 4, D));
#endif
}

/* Key `key` (tile position j) is hidden from a row that sees keys < lim;
 * paged, also when it lies on a bad page (its K/V were not loaded). */
#if FATTN_PAGED
#define KEY_MASKED(key, lim, j) ((key) >= (lim) || kps[(j0 / BKV) & 1][j].x < 0)
#define KEY_PAGE_BAD(j) (kps[(j0 / BKV) & 1][j].x < 0)
#else
#define KEY_MASKED(key, lim, j) ((key) >= (lim))
#define KEY_PAGE_BAD(j) 0
#endif

/* global: (groups * NT), groups = B * Hkv * row_tiles * splits; local: (NT). */
__kernel __attribute__((reqd_work_group_size(NT, 1, 1)))
void decode(__global const elem_t *q, long q_off, long q_sb, long q_sh, long q_ss,
            __global const elem_t *k, long k_off, long k_sb, long k_sh, long k_ss,
            __global const elem_t *v, long v_off, long v_sb, long v_sh, long v_ss,
            __global float *ws, long wl_off, int Hq, int Hkv, int group, int Sq, int Sk, int D,
            float scale_log2e, int causal, long coff, int splits, int row_tiles,
            int tiles VAR_PARAMS DEC_RAGGED_PARAMS) {
    __local kvf_t Qs[BR][DCX + 1];   /* Q; at the end, the summed accumulators */
    __local chunk_t Ks[BKV][DC + 1]; /* the tile's K ... */
    __local chunk_t Vs[BKV][DVC + 1]; /* ... and V, stored together from registers */
    __local float4 Ps4[BR][BKV / 4 + 1]; /* scores, float4 so that rows read as float4 */
    __local float Pp[BR][BKV + 4];       /* probabilities */
    __local float rowm[BR], rowa[BR], rowl[BR];
    __local int rowlim[BR];
#define VAR_ROWS VAR_HAS(VAR_WINDOW | VAR_ALIBI | VAR_BIAS)
#if VAR_ROWS
    /* Per row: the first key it sees, its query index, slope and bias row. */
    __local int rowlo[BR], rowi[BR];
    __local float rowsl[BR];
    __local long rowbb[BR];
#endif
#if FATTN_PAGED
    /* A paged tile's keys, by tile parity: the row's offset from K's and V's
     * head base (page * stride + slot * stride), x -1 for a bad page. */
    __local long2 kps[2][BKV];
#endif

    const int tid = get_local_id(0);
    DECODE_SPLIT(BR, BKV);
#define PS(r, j) (((__local float *)Ps4[r])[j])

    for (int idx = tid; idx < BR * DC; idx += NT) {
        const int r = idx / DC, c = idx % DC, rr = r0 + r;
        kvf_t x = (kvf_t)(0.0f);
        if (ROW_OK(r)) {
            const int g = rr / Sq, i = rr - g * Sq;
            x = load_q(q, Q_AT(g, i), c, D) * scale_log2e;
        }
        Qs[r][c] = x;
    }
    if (tid < BR) rowlim[tid] = ROW_OK(tid) ? key_limit((r0 + tid) % Sq, Sk, causal, coff) : 0;
#if VAR_ROWS
    if (tid < BR) {
        const int rr = r0 + tid, g = rr / Sq, i = rr - g * Sq;
        const long hq = hk * group + g;
        int lo = 0;
        if (ROW_OK(tid)) rowlim[tid] = var_keys(i, woff, rowlim[tid], win_left, win_right, &lo);
        rowlo[tid] = lo;
        rowi[tid] = i;
        rowsl[tid] = ROW_OK(tid) ? var_slope(al, al_off, al_sb, al_sh, b, hq) : 0.0f;
        rowbb[tid] = bs_off + b * bs_sb + hq * bs_sh + i * bs_ss;
    }
#endif

    /* Loads: work-item tid moves chunk lc of keys lj + n * KSTEP of every
     * tile, K and V, through registers, one tile ahead of the compute. */
    const int lc = tid % DC, lj = tid / DC;
#if DVC != DC
    const int lvc = tid % DVC, lvj = tid / DVC; /* V's (lc, lj without head_dim_v) */
#endif
    chunk_t kr[LPT], vr[LPTV];
#if FATTN_RAGGED
    /* A bad page seen: recorded in the fault word once, after the key loop,
     * not by an atomic among the loads. */
    int badpg = 0;
#endif

    /* Issues the loads of tile jt (keys jt ..) into kr, vr. */
#if FATTN_PAGED
    /* Paged, the group looks its pages up together: work-item tid < BKV
     * takes key tid of a tile, loads its table entry two tiles ahead of the
     * compute (PAGE_FETCH) and stores it, checked, as the key's row offsets
     * in K and V (page * page stride + slot * row stride; -1: a bad page)
     * into kps[tile parity] one tile ahead (PAGE_PUT, after the scores and
     * the softmax have hidden the table load), where LOAD_TILE and the mask
     * read them. So a work-item keeps no page state per key of its own (an
     * entry per key, run bits, page bases: b8 32k page 16 ran 1.6x the
     * dense time with them, 1.25x without). */
    const int pps = rg_page_size;
    int pf_key = 0, pf_e = 0, pf_sl = 0;
#define PAGE_FETCH(jt)                                                                             \
    do {                                                                                           \
        pf_key = (jt) + tid;                                                                       \
        if (tid < BKV && pf_key < j_hi) {                                                          \
            const int lp = pf_key / pps;                                                           \
            pf_sl = pf_key - lp * pps;                                                             \
            pf_e = rg_table[tab + (long)lp * rg_tab_ss];                                           \
        }                                                                                          \
    } while (0)
#define PAGE_PUT(jt)                                                                               \
    do {                                                                                           \
        if (tid < BKV && pf_key < j_hi) {                                                          \
            const int ok = pf_e >= 0 && pf_e < rg_num_pages;                                       \
            badpg |= !ok;                                                                          \
            kps[((jt) / BKV) & 1][tid] =                                                           \
                ok ? (long2)(pf_e * k_sb + pf_sl * k_ss, pf_e * v_sb + pf_sl * v_ss) : (long2)(-1); \
        }                                                                                          \
    } while (0)
/* Without head_dim_v, LPTV == LPT and the V map is K's: the n < LPT and
 * n < LPTV tests are always true and fold away. */
#if DVC == DC
#define LOAD_TILE(jt)                                                                              \
    do {                                                                                           \
        __local const long2 *kp = kps[((jt) / BKV) & 1];                                           \
        for (int n = 0; n < LPT; n++) {                                                            \
            const int key = (jt) + lj + n * KSTEP;                                                 \
            chunk_t xk = (chunk_t)(0), xv = (chunk_t)(0);                                          \
            if (key < j_hi) {                                                                      \
                const long2 e = kp[lj + n * KSTEP];                                                \
                if (e.x >= 0) {                                                                    \
                    xk = load_chunk(k, khb + e.x, lc, D);                                          \
                    xv = load_chunk(v, vhb + e.y, lc, D);                                          \
                }                                                                                  \
            }                                                                                      \
            kr[n] = xk;                                                                            \
            vr[n] = xv;                                                                            \
        }                                                                                          \
    } while (0)
#else
#define LOAD_TILE(jt)                                                                              \
    do {                                                                                           \
        __local const long2 *kp = kps[((jt) / BKV) & 1];                                           \
        for (int n = 0; n < LPTX; n++) {                                                           \
            if (n < LPT) {                                                                         \
                const int key = (jt) + lj + n * KSTEP;                                             \
                chunk_t xk = (chunk_t)(0);                                                         \
                if (key < j_hi) {                                                                  \
                    const long2 e = kp[lj + n * KSTEP];                                            \
                    if (e.x >= 0) xk = load_chunk(k, khb + e.x, lc, D);                            \
                }                                                                                  \
                kr[n] = xk;                                                                        \
            }                                                                                      \
            if (n < LPTV) {                                                                        \
                const int key = (jt) + lvj + n * KSTEPV;                                           \
                chunk_t xv = (chunk_t)(0);                                                         \
                if (key < j_hi) {                                                                  \
                    const long2 e = kp[lvj + n * KSTEPV];                                          \
                    if (e.x >= 0) xv = load_chunk(v, vhb + e.y, lvc, DV_OF(D));                    \
                }                                                                                  \
                vr[n] = xv;                                                                        \
            }                                                                                      \
        }                                                                                          \
    } while (0)
#endif
#elif DVC == DC
/* V's map is K's (no head_dim_v): one test per key for both loads, the
 * form the plain build had before head_dim_v (the two-map form below made
 * f32 b1 128k 12% slower on the H200). */
#define LOAD_TILE(jt)                                                                              \
    do {                                                                                           \
        for (int n = 0; n < LPT; n++) {                                                            \
            const int key = (jt) + lj + n * KSTEP;                                                 \
            chunk_t xk = (chunk_t)(0), xv = (chunk_t)(0);                                          \
            if (key < j_hi) {                                                                      \
                xk = load_chunk(k, kb + (long)key * k_ss, lc, D);                                  \
                xv = load_chunk(v, vb + (long)key * v_ss, lc, D);                                  \
            }                                                                                      \
            kr[n] = xk;                                                                            \
            vr[n] = xv;                                                                            \
        }                                                                                          \
    } while (0)
#else
#define LOAD_TILE(jt)                                                                              \
    do {                                                                                           \
        for (int n = 0; n < LPTX; n++) {                                                           \
            if (n < LPT) {                                                                         \
                const int key = (jt) + lj + n * KSTEP;                                             \
                kr[n] = key < j_hi ? load_chunk(k, kb + (long)key * k_ss, lc, D) : (chunk_t)(0);   \
            }                                                                                      \
            if (n < LPTV) {                                                                        \
                const int key = (jt) + lvj + n * KSTEPV;                                           \
                vr[n] = key < j_hi ? load_chunk(v, vb + (long)key * v_ss, lvc, DV_OF(D))           \
                                   : (chunk_t)(0);                                                 \
            }                                                                                      \
        }                                                                                          \
    } while (0)
#endif

    const int sk = tid % SK, sy = tid / SK;
    const int vc = tid % VC, vy = (tid / VC) % VR, vk = tid / (VC * VR);
    const int smr = tid / NL, sml = tid % NL; /* softmax: row and lane */
    float m_run = -INFINITY; /* row smr's running max (every lane of the row keeps it) */
    kvf_t acc[VRPT][VCPT];
    float l_i[VRPT]; /* this work-item's keys only; summed over the key lanes at the end */
    for (int ii = 0; ii < VRPT; ii++) {
        l_i[ii] = 0.0f;
        for (int cc = 0; cc < VCPT; cc++) acc[ii][cc] = (kvf_t)(0.0f);
    }

#if FATTN_PAGED
    /* The first two tiles' pages are waited on once, here. */
    PAGE_FETCH(t0 * BKV);
    PAGE_PUT(t0 * BKV);
    PAGE_FETCH(t0 * BKV + BKV);
    PAGE_PUT(t0 * BKV + BKV);
    barrier(CLK_LOCAL_MEM_FENCE);
#endif
    if (t0 * BKV < j_hi) LOAD_TILE(t0 * BKV);
    for (int j0 = t0 * BKV; j0 < j_hi; j0 += BKV) {
        barrier(CLK_LOCAL_MEM_FENCE); /* the previous tile's readers of K, V, P are done */
#if DVC == DC
        for (int n = 0; n < LPT; n++) {
            Ks[lj + n * KSTEP][lc] = kr[n];
            Vs[lj + n * KSTEP][lc] = vr[n];
        }
#else
        for (int n = 0; n < LPTX; n++) {
            if (n < LPT) Ks[lj + n * KSTEP][lc] = kr[n];
            if (n < LPTV) Vs[lvj + n * KSTEPV][lvc] = vr[n];
        }
#endif
        /* The next tile's loads fly while this one is computed, and so do
         * (paged) the table entries of the tile after it. */
        if (j0 + BKV < j_hi) LOAD_TILE(j0 + BKV);
#if FATTN_PAGED
        PAGE_FETCH(j0 + 2 * BKV); /* kps[tile parity] is read until barrier C */
#endif
        barrier(CLK_LOCAL_MEM_FENCE);

        if (sy < SR) {
            float sc[SRPT][SKPT];
            for (int ii = 0; ii < SRPT; ii++)
                for (int kk = 0; kk < SKPT; kk++) sc[ii][kk] = 0.0f;
            for (int c = 0; c < DC; c++) {
                kvf_t kv[SKPT];
                for (int kk = 0; kk < SKPT; kk++) kv[kk] = KV_GET(Ks, sk + kk * SK, c);
                for (int ii = 0; ii < SRPT; ii++) {
                    const kvf_t qv = Qs[sy + ii * SR][c];
                    for (int kk = 0; kk < SKPT; kk++) sc[ii][kk] += dotv(qv, kv[kk]);
                }
            }
#if FATTN_VAR
            /* A tile every row sees whole needs no per-key mask: a row sees
             * all of it or (a row not computed, lim 0) none. */
            const int full = j0 >= vlo_max && j0 + BKV <= vhi_min;
#endif
            for (int ii = 0; ii < SRPT; ii++) {
                const int r = sy + ii * SR, lim = rowlim[r];
#if FATTN_VAR
#if VAR_ROWS
                const int lo = rowlo[r], ri = rowi[r];
                const float slope2 = rowsl[r];
                const long brow = rowbb[r];
#else
                const int lo = 0, ri = 0;
                const float slope2 = 0.0f;
                const long brow = 0;
#endif
                for (int kk = 0; kk < SKPT; kk++) {
                    const int j = sk + kk * SK, key = j0 + j;
                    const int hidden =
                        full ? lim <= j0 || KEY_PAGE_BAD(j) : KEY_MASKED(key, lim, j) || key < lo;
                    PS(r, j) = hidden ? -INFINITY
                                      : var_score(sc[ii][kk], ri, key, woff, cap2, slope2, bs,
                                                  brow, bs_sd);
                }
#else
                for (int kk = 0; kk < SKPT; kk++) {
                    const int j = sk + kk * SK;
                    PS(r, j) = KEY_MASKED(j0 + j, lim, j) ? -INFINITY : sc[ii][kk];
                }
#endif
            }
        }
        barrier(CLK_LOCAL_MEM_FENCE); /* scores written */

        /* Softmax: the NL lanes of row smr each find the tile's max (the same
         * one) and turn their keys' scores into probabilities. */
        {
            float mx = -INFINITY;
            for (int j4 = 0; j4 < BKV / 4; j4++) {
                const float4 x = Ps4[smr][j4];
                mx = fmax(mx, fmax(fmax(x.x, x.y), fmax(x.z, x.w)));
            }
            const float m_new = fmax(m_run, mx);
            /* A row that has seen no key yet keeps m = -inf: nothing to rescale. */
            if (sml == 0) rowa[smr] = m_new == -INFINITY ? 1.0f : exp2(m_run - m_new);
            m_run = m_new;
            for (int j = sml; j < BKV; j += NL) {
                const float x = PS(smr, j);
                Pp[smr][j] = x == -INFINITY ? 0.0f : exp2(x - m_new);
            }
        }
        barrier(CLK_LOCAL_MEM_FENCE); /* C */
#if FATTN_PAGED
        PAGE_PUT(j0 + 2 * BKV); /* for LOAD_TILE in the next step */
#endif

        for (int ii = 0; ii < VRPT; ii++) {
            const float a = rowa[vy + ii * VR];
            l_i[ii] *= a;
            for (int cc = 0; cc < VCPT; cc++) acc[ii][cc] *= a;
        }
        for (int kk = 0; kk < VKPT; kk++) {
            const int j = vk + kk * VK;
            kvf_t vv[VCPT];
            for (int cc = 0; cc < VCPT; cc++) vv[cc] = KV_GET(Vs, j, vc + cc * VC);
            for (int ii = 0; ii < VRPT; ii++) {
                const float p = Pp[vy + ii * VR][j];
                l_i[ii] += p;
                for (int cc = 0; cc < VCPT; cc++)
                    acc[ii][cc] = mad((kvf_t)(p), vv[cc], acc[ii][cc]);
            }
        }
    }
    /* The key loop's exit goes straight into a barrier (the last tile's
     * P V reads are then done before Qs is overwritten). Keep it so: with
     * the rowm store between the exit and the first barrier, PoCL 5.0's
     * default CPU work-group method (loops; cbs was right) got the key-lane
     * sums wrong (O 0 or NaN, lse -inf, in most rows; VK > 1 only) in the
     * ragged build, whose loop bound comes from the sequence tables and so
     * is not provably uniform. */
    barrier(CLK_LOCAL_MEM_FENCE);
    if (sml == 0) rowm[smr] = m_run;
#if FATTN_RAGGED
    if (badpg) rag_fault(rg_fault, RAG_FAULT_TABLE);
#endif

    /* ACC_COPY (the host sets it on CPU devices): the accumulators, copied
     * once into an array of their own that is born after the key loop, for
     * the lane-by-lane sum below, which reads them after one to VK barriers.
     * Read from acc itself (an array live since the kernel's start, across
     * the key loop's barriers), PoCL 5.0's loops method gave the key lanes
     * after the first stale values in the ragged build whenever a
     * work-item holds more than one row (VRPT > 1: O wrong by up to 4-6
     * while l and lse were right; cbs was right, and so was PoCL 3.1). On
     * NVIDIA's OpenCL the copy made f32 head-dim-64 decoding at batch 1
     * 10-16% slower (call101), so GPUs read acc. */
#if ACC_COPY
    kvf_t accr[VRPT][VCPT];
    float lr[VRPT];
    for (int ii = 0; ii < VRPT; ii++) {
        lr[ii] = l_i[ii];
        for (int cc = 0; cc < VCPT; cc++) accr[ii][cc] = acc[ii][cc];
    }
#define ACC_SUM(ii, cc) accr[ii][cc]
#define L_SUM(ii) lr[ii]
#else
#define ACC_SUM(ii, cc) acc[ii][cc]
#define L_SUM(ii) l_i[ii]
#endif

    /* Sum the key lanes into Qs (Q is no longer read) and rowl, lane by lane
     * (a fixed order: the result is deterministic). */
    for (int w = 0; w < VK; w++) {
        if (vk == w) {
            for (int ii = 0; ii < VRPT; ii++) {
                const int r = vy + ii * VR;
                for (int cc = 0; cc < VCPT; cc++) {
                    const int c = vc + cc * VC;
                    Qs[r][c] = w == 0 ? ACC_SUM(ii, cc) : Qs[r][c] + ACC_SUM(ii, cc);
                }
                if (vc == 0) rowl[r] = w == 0 ? L_SUM(ii) : rowl[r] + L_SUM(ii);
            }
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }

    /* l == 0: no visible key in this split, O_s = 0 and lse_s = -inf. A NaN
     * l stays NaN in both. */
    const int Do = DV_OF(D);
    for (int idx = tid; idx < BR * DVC; idx += NT) {
        const int r = idx / DVC, c = idx % DVC, rr = r0 + r;
        if (!ROW_OK(r)) continue;
        const int g = rr / Sq, i = rr - g * Sq;
        const long row = (b * Hq + hk * group + g) * Sq + i;
        const float l = rowl[r];
        const kvf_t x = Qs[r][c] * (l == 0.0f ? 0.0f : 1.0f / l);
        __global float *o = ws + (row * splits + s) * Do + CE * c;
        const int d = CE * c;
        if (d + CE <= Do) {
#if DTYPE == 0
            vstore4(x, 0, o);
#else
            vstore8(x, 0, o);
#endif
        } else {
            float xs[CE];
#if DTYPE == 0
            vstore4(x, 0, xs);
#else
            vstore8(x, 0, xs);
#endif
            for (int e = 0; e < CE && d + e < Do; e++) o[e] = xs[e];
        }
    }
    if (ROW_OK(tid)) {
        const int rr = r0 + tid, g = rr / Sq, i = rr - g * Sq;
        const long row = (b * Hq + hk * group + g) * Sq + i;
        const float l = rowl[tid];
        ws[wl_off + row * splits + s] = l == 0.0f ? -INFINITY : (rowm[tid] + log2(l)) * M_LN2_F;
    }
}

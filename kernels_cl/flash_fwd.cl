/* Tiled FlashAttention forward, OpenCL C 1.2 (FlashAttention-2 work split).
 * One work-group owns BQ query rows of one (batch, head) and streams BKV-key
 * tiles of K and V through local memory, keeping each row's running max and
 * sum and rescaling its accumulator (online softmax). TPR work-items share a
 * row: each scores BKV/TPR keys and owns DPAD/TPR output dims (strided, so
 * neighbouring work-items read neighbouring words of V).
 * f16 is read with vload_half and bf16 with shifts: no cl_khr_fp16 needed.
 * Every tunable has a default so this file compiles on its own. */

#ifndef DTYPE
#define DTYPE 0          /* storage: 0 = f32, 1 = f16, 2 = bf16 */
#endif
#ifndef DPAD
#define DPAD 64          /* head dim rounded up; the run-time D is <= DPAD */
#endif
#ifndef BQ
#define BQ 16            /* query rows per work-group */
#endif
#ifndef BKV
#define BKV 32           /* keys per streamed tile */
#endif
#ifndef TPR
#define TPR 8            /* work-items per query row */
#endif

#define NT (BQ * TPR)
#define DPT (DPAD / TPR)   /* output dims per work-item */
#define KPT (BKV / TPR)    /* keys scored per work-item per tile */

#if DPAD % TPR != 0 || BKV % TPR != 0
#error "DPAD and BKV must be multiples of TPR"
#endif

#if DTYPE == 0
typedef float elem_t;
#define LOAD(p, i) ((p)[i])
#define STORE(p, i, x) ((p)[i] = (x))
#elif DTYPE == 1
typedef half elem_t;
#define LOAD(p, i) vload_half((i), (p))
#define STORE(p, i, x) vstore_half_rte((x), (i), (p))
#else
typedef ushort elem_t;
#define LOAD(p, i) as_float((uint)(p)[i] << 16)
#define STORE(p, i, x) ((p)[i] = bf16_round(x))
/* Round to nearest even; NaN stays a (quiet) NaN. */
inline ushort bf16_round(float x) {
    uint u = as_uint(x);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (ushort)((u >> 16) | 0x40u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (ushort)(u >> 16);
}
#endif

/* Keys j < key_limit(i) are visible to query row i (bottom-right causal). */
inline int key_limit(int i, int Sq, int Sk, int causal) {
    if (!causal) return Sk;
    return clamp(i + Sk - Sq + 1, 0, Sk);
}

__kernel __attribute__((reqd_work_group_size(NT, 1, 1)))
void flash_fwd(__global const elem_t *q, long q_off, long q_sb, long q_sh, long q_ss,
               __global const elem_t *k, long k_off, long k_sb, long k_sh, long k_ss,
               __global const elem_t *v, long v_off, long v_sb, long v_sh, long v_ss,
               __global elem_t *o, long o_off, long o_sb, long o_sh, long o_ss,
               __global float *lse, long l_off, long l_sb, long l_sh, long l_ss, int has_lse,
               int Hq, int group, int Sq, int Sk, int D, float scale_log2e, int causal) {
    __local float Qs[BQ][DPAD];
    __local float Ks[BKV][DPAD + 1];   /* +1: work-items of a row read different keys */
    __local float Vs[BKV][DPAD];
    __local float Ps[BQ][BKV];
    __local float red_max[BQ][TPR];
    __local float red_sum[BQ][TPR];

    const int tid = get_local_id(0);
    const int r = tid / TPR, c = tid % TPR;
    const int q0 = get_group_id(0) * BQ;
    const int bh = get_group_id(1);
    const int b = bh / Hq, h = bh % Hq, hk = h / group;
    const long qb = q_off + b * q_sb + h * q_sh;
    const long kb = k_off + b * k_sb + hk * k_sh;
    const long vb = v_off + b * v_sb + hk * v_sh;

    /* Q scaled by scale * log2(e), so the softmax runs on exp2. */
    for (int idx = tid; idx < BQ * DPAD; idx += NT) {
        const int rr = idx / DPAD, d = idx % DPAD, row = q0 + rr;
        Qs[rr][d] = (row < Sq && d < D) ? LOAD(q, qb + row * q_ss + d) * scale_log2e : 0.0f;
    }

    const int row = q0 + r;
    const int row_lim = row < Sq ? key_limit(row, Sq, Sk, causal) : 0;
    /* Tiles past what the last row sees are skipped, not masked. */
    const int kv_end = key_limit(min(q0 + BQ, Sq) - 1, Sq, Sk, causal);
    float m_i = -INFINITY, l_i = 0.0f;
    float acc[DPT];
    for (int i = 0; i < DPT; i++) acc[i] = 0.0f;

    for (int j0 = 0; j0 < kv_end; j0 += BKV) {
        barrier(CLK_LOCAL_MEM_FENCE);   /* the previous tile's readers are done */
        for (int idx = tid; idx < BKV * DPAD; idx += NT) {
            const int j = idx / DPAD, d = idx % DPAD, key = j0 + j;
            const int in = key < Sk && d < D;
            Ks[j][d] = in ? LOAD(k, kb + key * k_ss + d) : 0.0f;
            Vs[j][d] = in ? LOAD(v, vb + key * v_ss + d) : 0.0f;
        }
        barrier(CLK_LOCAL_MEM_FENCE);

        float s[KPT];
        float mx = -INFINITY;
        for (int kk = 0; kk < KPT; kk++) {
            const int j = c + kk * TPR;
            float dot = 0.0f;
            for (int d = 0; d < DPAD; d++) dot = mad(Qs[r][d], Ks[j][d], dot);
            s[kk] = j0 + j < row_lim ? dot : -INFINITY;
            mx = fmax(mx, s[kk]);
        }
        red_max[r][c] = mx;
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int t = 0; t < TPR; t++) mx = fmax(mx, red_max[r][t]);
        const float m_new = fmax(m_i, mx);
        /* A row that has seen no key yet keeps m = -inf: nothing to rescale. */
        const float alpha = m_new == -INFINITY ? 1.0f : exp2(m_i - m_new);
        float psum = 0.0f;
        for (int kk = 0; kk < KPT; kk++) {
            const float p = s[kk] == -INFINITY ? 0.0f : exp2(s[kk] - m_new);
            Ps[r][c + kk * TPR] = p;
            psum += p;
        }
        red_sum[r][c] = psum;
        barrier(CLK_LOCAL_MEM_FENCE);
        psum = 0.0f;
        for (int t = 0; t < TPR; t++) psum += red_sum[r][t];
        l_i = l_i * alpha + psum;
        m_i = m_new;
        for (int i = 0; i < DPT; i++) acc[i] *= alpha;
        for (int j = 0; j < BKV; j++) {
            const float p = Ps[r][j];
            for (int i = 0; i < DPT; i++) acc[i] = mad(p, Vs[j][c + i * TPR], acc[i]);
        }
    }

    if (row >= Sq) return;
    const float inv = l_i > 0.0f ? 1.0f / l_i : 0.0f;
    const long ob = o_off + b * o_sb + h * o_sh + row * o_ss;
    for (int i = 0; i < DPT; i++) {
        const int d = c + i * TPR;
        if (d < D) STORE(o, ob + d, acc[i] * inv);
    }
    if (has_lse && c == 0)
        lse[l_off + b * l_sb + h * l_sh + row * l_ss] =
            l_i > 0.0f ? (m_i + log2(l_i)) * M_LN2_F : -INFINITY;
}

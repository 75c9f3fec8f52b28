/* fattn_combine (OpenCL C 1.2): the log-sum-exp merge of `parts` partial
 * results, one work-group of WG work-items per output row (b, h, i), float32
 * arithmetic, the semantics of backends/cpu/cpu_combine.c. The host builds
 * it after storage.cl with DTYPE = the output's dtype (elem_t, STORE) and
 * PART_DTYPE = the parts' (part_t, PLOAD below), one program per pair.
 *
 * Per row the group finds m, the largest part lse (fmax drops NaN, as the
 * CPU's `x > m` does), shifts by it (by 0 when m = -inf), then walks the
 * parts in order in chunks of WG: each work-item computes one part's weight
 * exp(lse_p - shift) into local memory (-1 marks a part with lse_p = -inf:
 * it saw no key and its O is not read), and every work-item adds the
 * chunk's weighted O rows to its head-dim elements, in part order (loading
 * COMBINE_UNROLL parts' rows at once), and the weights to l (so l is summed
 * in the CPU's order). A NaN or +inf lse gives
 * a NaN weight (NaN is not < 0, so it is not skipped) and makes the row NaN.
 * O = acc * (l == 0 ? 0 : 1 / l), lse = l == 0 ? -inf : m + log(l). Rows,
 * parts, offsets and strides are longs; groups stride over the rows, so the
 * host may launch fewer groups than rows.
 *
 * Built with FATTN_RAGGED=1 (after ragged.cl) for the split-KV decode of
 * packed query rows (cu_seqlens_q): the parts stay indexed (b, h, i) with i
 * below `seq`, the longest sequence, but row i of sequence b goes to row
 * cu_q[b] + i of O and lse at batch index 0, and rows at or past the
 * sequence's length, or of a bad span (decode.cl recorded the fault), are
 * skipped.
 *
 * Built with SINKS=1 for the split-KV decode of a problem with attention
 * sinks (the public fattn_combine has none): head h's sink logit (natural
 * units) joins each row's denominator once, with no value row, so a row
 * whose parts all saw no key gets O = 0 and lse = the sink. */

#ifndef WG
#define WG 64 /* work-items per row, a power of two */
#endif
#ifndef PART_DTYPE
#define PART_DTYPE 0 /* the parts' storage: 0 = f32, 1 = f16, 2 = bf16 */
#endif
#ifndef SINKS
#define SINKS 0 /* 1: the sink operand (snk) joins each row's denominator */
#endif
#ifndef COMBINE_UNROLL
#define COMBINE_UNROLL 8 /* parts whose O loads are in flight together */
#endif
#define COMBINE_MAX_D 256 /* the host's limit on the head dim */
#define COMBINE_NACC ((COMBINE_MAX_D + WG - 1) / WG)

#if PART_DTYPE == 0
typedef float part_t;
#define PLOAD(p, i) ((p)[i])
#elif PART_DTYPE == 1
typedef half part_t;
#define PLOAD(p, i) vload_half((i), (p))
#else
typedef ushort part_t;
#define PLOAD(p, i) as_float((uint)(p)[i] << 16)
#endif

/* global: (groups * WG), groups <= rows = batch * heads * seq; local: (WG). */
__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
void combine(__global const part_t *po, long po_off, long po_sb, long po_sh, long po_ss,
             long po_ps, __global const float *pl, long pl_off, long pl_sb, long pl_sh,
             long pl_ss, long pl_ps, __global elem_t *o, long o_off, long o_sb, long o_sh,
             long o_ss, __global float *lse, long l_off, long l_sb, long l_sh, long l_ss,
             int has_lse, long heads, long seq, long rows, long parts, int D
#if SINKS
             ,
             __global const float *snk, long snk_off, long snk_sh
#endif
#if FATTN_RAGGED
             ,
             __global const int *rg_cu_q, long rg_cu_q_off, long rg_cu_q_s, long rg_total_q
#endif
) {
    __local float red[WG];
    __local float wts[WG];
    const int tid = get_local_id(0);
    for (long r = get_group_id(0); r < rows; r += get_num_groups(0)) {
        const long bh = r / seq, i = r - bh * seq;
        const long b = bh / heads, h = bh - b * heads;
#if FATTN_RAGGED
        /* A row past the sequence's length reads no part and writes
         * nothing, but runs the barriers: not a `continue` ahead of them
         * (decode.cl says why). */
        long q_row0;
        const int len_q =
            rag_span(rg_cu_q, rg_cu_q_off, rg_cu_q_s, b, rg_total_q, (int)seq, &q_row0);
        const int live = i < len_q;
        const long row_parts = live ? parts : 0, ob = 0, oi = q_row0 + i;
#else
        const long row_parts = parts, ob = b, oi = i;
#endif
        const long lrow = pl_off + b * pl_sb + h * pl_sh + i * pl_ss;
        const long orow = po_off + b * po_sb + h * po_sh + i * po_ss;

        float m = -INFINITY;
        for (long p = tid; p < row_parts; p += WG) m = fmax(m, pl[lrow + p * pl_ps]);
        red[tid] = m;
        for (int w = WG / 2; w > 0; w /= 2) {
            barrier(CLK_LOCAL_MEM_FENCE);
            if (tid < w) red[tid] = fmax(red[tid], red[tid + w]);
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        m = red[0];
#if SINKS
        /* The sink counts in the max (fmax drops a NaN sink, which then
         * makes l NaN below). */
        const float sink = snk[snk_off + h * snk_sh];
        m = fmax(m, sink);
#endif
        const float shift = m == -INFINITY ? 0.0f : m;

        float l = 0.0f, acc[COMBINE_NACC];
        for (int k = 0; k < COMBINE_NACC; k++) acc[k] = 0.0f;
        for (long c = 0; c < row_parts; c += WG) {
            barrier(CLK_LOCAL_MEM_FENCE); /* the previous chunk's weights are read */
            if (c + tid < row_parts) {
                const float x = pl[lrow + (c + tid) * pl_ps];
                wts[tid] = x == -INFINITY ? -1.0f : exp(x - shift);
            }
            barrier(CLK_LOCAL_MEM_FENCE);
            const int n = row_parts - c < WG ? (int)(row_parts - c) : WG;
            int j = 0;
            /* COMBINE_UNROLL parts at a time: their loads are issued together
             * (a part with lse -inf loads nothing), then added in part order.
             * One at a time, each load waited for the last: 66 parts of a
             * batch-1 decode took 16 us on the H200. `!(w < 0)`, not
             * `w >= 0`: a NaN weight is added, as in the loop below. */
            for (; j + COMBINE_UNROLL <= n; j += COMBINE_UNROLL) {
                float w[COMBINE_UNROLL];
                for (int u = 0; u < COMBINE_UNROLL; u++) w[u] = wts[j + u];
                for (int k = 0; k < COMBINE_NACC; k++) {
                    const int d = tid + k * WG;
                    if (d >= D) continue;
                    float x[COMBINE_UNROLL];
                    for (int u = 0; u < COMBINE_UNROLL; u++)
                        x[u] = w[u] < 0.0f ? 0.0f : PLOAD(po, orow + (c + j + u) * po_ps + d);
                    for (int u = 0; u < COMBINE_UNROLL; u++)
                        if (!(w[u] < 0.0f)) acc[k] += w[u] * x[u];
                }
                for (int u = 0; u < COMBINE_UNROLL; u++)
                    if (!(w[u] < 0.0f)) l += w[u];
            }
            for (; j < n; j++) {
                const float w = wts[j];
                if (w < 0.0f) continue; /* lse -inf: no key; O is not read */
                l += w;
                const long src = orow + (c + j) * po_ps;
                for (int k = 0; k < COMBINE_NACC; k++) {
                    const int d = tid + k * WG;
                    if (d < D) acc[k] += w * PLOAD(po, src + d);
                }
            }
        }

#if SINKS
        l += exp(sink - shift);
#endif
        const float inv = l == 0.0f ? 0.0f : 1.0f / l;
        const long dst = o_off + ob * o_sb + h * o_sh + oi * o_ss;
#if FATTN_RAGGED
        if (live) {
#endif
        for (int k = 0; k < COMBINE_NACC; k++) {
            const int d = tid + k * WG;
            if (d < D) STORE(o, dst + d, acc[k] * inv);
        }
        if (has_lse && tid == 0)
            lse[l_off + ob * l_sb + h * l_sh + oi * l_ss] = l == 0.0f ? -INFINITY : m + log(l);
#if FATTN_RAGGED
        }
#endif
        barrier(CLK_LOCAL_MEM_FENCE); /* red and wts are read before the next row writes them */
    }
}

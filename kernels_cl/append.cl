/* desc->append (OpenCL C 1.2): this step's keys and values written into the
 * cache before the attention reads it, the OpenCL side of kernels_cu/append.cu.
 * The host builds it after storage.cl and ragged.cl (FATTN_RAGGED=1, DTYPE)
 * and enqueues it on the attention's queue (backends/opencl/ocl_ragged.c).
 *
 * Row t of k_new and v_new for sequence b becomes key L_b + t, L_b =
 * seqused_kv[b] (rag_resolve gives L_b + seq_new, or 0 for a bad count,
 * recording it). A sequence whose new keys lie on a bad page is checked by
 * the whole group first, so nothing of a bad sequence is written. Copies
 * are of raw bits, exact in every dtype. Work-groups stride over the
 * sequences (dimension 1) and over blocks of AP_ROWS (head, t) rows
 * (dimension 0); no work-item leaves ahead of a barrier (PoCL 3.1 corrupted
 * memory with one: decode.cl). */

#ifndef AP_ROWS
#define AP_ROWS 8 /* (head, new key) rows per group and pass */
#endif

#if DTYPE == 0
typedef uint ap_bits;
#else
typedef ushort ap_bits;
#endif

/* global: (groups0 * local0, groups1); local: (local0, 1). */
__kernel void append(__global ap_bits *k, long k_off, long k_sb, long k_sh, long k_ss,
                     __global ap_bits *v, long v_off, long v_sb, long v_sh, long v_ss,
                     __global const ap_bits *kn, long kn_off, long kn_sb, long kn_sh, long kn_ss,
                     __global const ap_bits *vn, long vn_off, long vn_sb, long vn_sh, long vn_ss,
                     long batch, long heads_kv, int seq_new, int D, int Sq, int Sk,
                     RAGGED_PARAMS) {
    __local int bad;
    const int tid = get_local_id(0), nt = get_local_size(0);
    const long rows = heads_kv * seq_new;
    const int paged = rg_flags & RAG_PAGED;
    for (long b = get_group_id(1); b < batch; b += get_num_groups(1)) {
        const rag_seq s = rag_resolve(b, Sq, Sk, tid == 0 && get_group_id(0) == 0, RAGGED_ARGS);
        const int L = s.len_kv - seq_new; /* negative: a bad count, already recorded */
        if (tid == 0) bad = L < 0;
        barrier(CLK_LOCAL_MEM_FENCE);
        if (L >= 0 && paged)
            for (int p = L / rg_page_size + tid; p <= (s.len_kv - 1) / rg_page_size; p += nt) {
                const long e = rg_table[rg_tab_off + b * rg_tab_sb + (long)p * rg_tab_ss];
                if (e < 0 || e >= rg_num_pages) atomic_or((volatile __local int *)&bad, 1);
            }
        barrier(CLK_LOCAL_MEM_FENCE);
        const int skip = bad;
        barrier(CLK_LOCAL_MEM_FENCE); /* read before the next sequence resets it */
        if (skip && L >= 0 && tid == 0) rag_fault(rg_fault, RAG_FAULT_TABLE);
        if (skip) continue; /* after the last barrier of this pass, by the whole group */
        for (long r0 = get_group_id(0) * AP_ROWS; r0 < rows; r0 += get_num_groups(0) * AP_ROWS) {
            const long n = min(rows - r0, (long)AP_ROWS) * D;
            for (long i = tid; i < n; i += nt) {
                const long r = r0 + i / D, d = i % D;
                const long h = r / seq_new, t = r % seq_new;
                const int j = L + (int)t;
                long kb = b, kj = j; /* the key's batch index (its page) and row */
                if (paged) {
                    kb = rg_table[rg_tab_off + b * rg_tab_sb + (long)(j / rg_page_size) * rg_tab_ss];
                    kj = j % rg_page_size;
                }
                k[k_off + kb * k_sb + h * k_sh + kj * k_ss + d] =
                    kn[kn_off + b * kn_sb + h * kn_sh + t * kn_ss + d];
                v[v_off + kb * v_sb + h * v_sh + kj * v_ss + d] =
                    vn[vn_off + b * vn_sb + h * vn_sh + t * vn_ss + d];
            }
        }
    }
}

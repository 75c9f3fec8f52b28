/* Variable-length sequences and paged K/V caches in the OpenCL kernels: the
 * rules of src/seam/backend.h (fattn_ragged), the OpenCL side of
 * kernels_cu/ragged.cuh. The host prepends it (after storage.cl) to every
 * kernel file; it is empty unless the build sets FATTN_RAGGED=1, a second
 * build of each kernel, so dense builds do not change. A bad table entry is
 * never followed: its FATTN_FAULT_* bit goes into the context's fault word
 * (atomic_or, OpenCL 1.1 global int32 atomics) and what it names is treated
 * as absent: a bad query span writes no row, a bad key count gives no keys,
 * a key on a bad page is skipped. backends/opencl/ocl_ragged.c sets the
 * arguments below and reads the word. */

#ifndef FATTN_RAGGED
#define FATTN_RAGGED 0 /* 1: the kernel takes RAGGED_PARAMS and resolves its sequence */
#endif

#if FATTN_RAGGED

/* Fault bits, as src/seam/backend.h numbers them (kernels do not include it). */
#define RAG_FAULT_CU_Q 1
#define RAG_FAULT_CU_KV 2
#define RAG_FAULT_USED 4
#define RAG_FAULT_TABLE 8

/* rg_flags: which tables are given, and the causal alignment. */
#define RAG_HAS_CU_Q 1
#define RAG_HAS_CU_KV 2
#define RAG_HAS_USED 4
#define RAG_PAGED 8
#define RAG_TOP_LEFT 16

/* The tables as kernel arguments: buffer (NULL when absent), element offset
 * and element strides (the block table's per sequence, then per page); the
 * packed totals; the pages; rg_page_size clamped to 2^31-1 (keys are ints,
 * so no key's page changes); rg_added, the keys an append wrote after
 * seqused_kv[b] (0 without one); the context's fault word. Kernels list
 * RAGGED_PARAMS last and pass RAGGED_ARGS to the helpers below. */
#define RAGGED_PARAMS                                                                              \
    __global const int *rg_cu_q, long rg_cu_q_off, long rg_cu_q_s, __global const int *rg_cu_kv,   \
        long rg_cu_kv_off, long rg_cu_kv_s, __global const int *rg_used, long rg_used_off,         \
        long rg_used_s, __global const int *rg_table, long rg_tab_off, long rg_tab_sb,             \
        long rg_tab_ss, long rg_total_q, long rg_total_kv, long rg_num_pages, int rg_page_size,    \
        int rg_flags, int rg_added, __global int *rg_fault
#define RAGGED_ARGS                                                                                \
    rg_cu_q, rg_cu_q_off, rg_cu_q_s, rg_cu_kv, rg_cu_kv_off, rg_cu_kv_s, rg_used, rg_used_off,     \
        rg_used_s, rg_table, rg_tab_off, rg_tab_sb, rg_tab_ss, rg_total_q, rg_total_kv,            \
        rg_num_pages, rg_page_size, rg_flags, rg_added, rg_fault

/* Sequence b: its rows of Q/O/lse (batch index and first row), its keys
 * (batch index and first row, when not paged), lengths and causal offset.
 * A bad query span has len_q 0, so no row of it is written. */
typedef struct rag_seq {
    long q_batch, q_row0, kv_batch, kv_row0;
    int len_q, len_kv;
    long coff;
} rag_seq;

inline void rag_fault(__global int *fault, int bit) {
    atomic_or((volatile __global int *)fault, bit);
}

/* Offsets b and b + 1 of a cu_seqlens table: *lo, and the length, which is
 * -1 when the span is bad (an offset negative, decreasing or past the total,
 * or more than `longest` rows). */
inline int rag_span(__global const int *cu, long off, long s, long b, long total, int longest,
                    long *lo) {
    const long a = cu[off + b * s], e = cu[off + (b + 1) * s];
    *lo = a;
    return a < 0 || e < a || e > total || e - a > longest ? -1 : (int)(e - a);
}

/* Resolves sequence b for a problem whose longest sequences are Sq and Sk;
 * `record`: this work-item records the faults it finds (one per group is
 * enough; every work-item gets the same answer). */
inline rag_seq rag_resolve(long b, int Sq, int Sk, int record, RAGGED_PARAMS) {
    rag_seq s;
    s.q_batch = b, s.q_row0 = 0, s.len_q = Sq;
    s.kv_batch = b, s.kv_row0 = 0;
    if (rg_flags & RAG_HAS_CU_Q) {
        s.q_batch = 0;
        s.len_q = rag_span(rg_cu_q, rg_cu_q_off, rg_cu_q_s, b, rg_total_q, Sq, &s.q_row0);
        if (s.len_q < 0) {
            if (record) rag_fault(rg_fault, RAG_FAULT_CU_Q);
            s.len_q = 0;
        }
    }
    /* How many keys the sequence holds, before seqused_kv (a paged cache
     * holds Sk: validation keeps Sk <= pages_per_seq * page_size). */
    int cap = Sk;
    if (rg_flags & RAG_HAS_CU_KV) {
        s.kv_batch = 0;
        cap = rag_span(rg_cu_kv, rg_cu_kv_off, rg_cu_kv_s, b, rg_total_kv, Sk, &s.kv_row0);
        if (cap < 0) {
            if (record) rag_fault(rg_fault, RAG_FAULT_CU_KV);
            cap = 0;
        }
    }
    int len = cap;
    if (rg_flags & RAG_HAS_USED) {
        /* The appended keys follow the used ones and must fit too. */
        len = rg_used[rg_used_off + b * rg_used_s];
        if (len < 0 || len > cap - rg_added) {
            if (record) rag_fault(rg_fault, RAG_FAULT_USED);
            len = 0;
        } else {
            len += rg_added;
        }
    }
    s.len_kv = len;
    s.coff = rg_flags & RAG_TOP_LEFT ? 0L : (long)len - (long)s.len_q;
    return s;
}

/* Pages and slots of the n keys j0 .. j0 + n - 1 of sequence b (a tile) in
 * local memory, filled by work-items tid, tid + nt, ...; the caller puts a
 * barrier after. pg[j] is -1 for a key at or past len and for a key on a
 * page outside 0 .. num_pages - 1, whose fault is recorded: such keys are
 * not loaded, and the kernels mask their scores. */
inline void rag_tile_pages(__local int *pg, __local int *sl, int n, int j0, int len, long b,
                           int tid, int nt, RAGGED_PARAMS) {
    for (int j = tid; j < n; j += nt) {
        const int key = j0 + j;
        int page = -1, slot = 0;
        if (key < len) {
            const int p = key / rg_page_size;
            slot = key - p * rg_page_size;
            const long e = rg_table[rg_tab_off + b * rg_tab_sb + (long)p * rg_tab_ss];
            if (e >= 0 && e < rg_num_pages)
                page = (int)e;
            else
                rag_fault(rg_fault, RAG_FAULT_TABLE);
        }
        pg[j] = page;
        sl[j] = slot;
    }
}

/* Whether the pages of keys k0 .. k1 - 1 of sequence b are all in the cache;
 * records the fault when not (the matrix kernels vet a group's pages up
 * front). Holds barriers: every work-item calls it;
 * *flag is free again when it returns. */
inline int pages_ok(int k0, int k1, long b, __local int *flag, RAGGED_PARAMS) {
    const int tid = get_local_id(0);
    if (tid == 0) *flag = 0;
    barrier(CLK_LOCAL_MEM_FENCE);
    int bad = 0;
    if ((rg_flags & RAG_PAGED) && k1 > k0) {
        const int p1 = (k1 - 1) / rg_page_size;
        for (int p = k0 / rg_page_size + tid; p <= p1; p += (int)get_local_size(0)) {
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

#endif /* FATTN_RAGGED */

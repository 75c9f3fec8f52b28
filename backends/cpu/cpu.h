/* The CPU backend's private pieces: its state, host buffers, the thread pool
 * and the two attention paths (tiled and naive). */
#ifndef FATTN_CPU_H
#define FATTN_CPU_H

#include "backend.h"

/* The context's thread pool (cpu_pool.c). */
typedef struct cpu_pool cpu_pool;
enum { CPU_POOL_MAX = 1024 }; /* threads a call may ask for, the caller's included */

typedef struct cpu_state {
    int threads; /* as opened: fattn_context_params, FATTN_CPU_THREADS, or every core */
    int isa;     /* cpu_isa: the machine's best, capped by FATTN_CPU_ISA */
    cpu_pool *pool;
} cpu_state;

/* Threads for one call: the context parameter when set, else as opened. */
static inline int cpu_threads(const cpu_state *s, const fattn_problem *p) {
    return p->tune.cpu_threads > 0 ? p->tune.cpu_threads : s->threads;
}

/* A pool without threads yet (NULL if out of memory), and its end: joins
 * the workers and frees their scratch. */
cpu_pool *cpu_pool_create(void);
void cpu_pool_destroy(cpu_pool *pool);

/* Runs fn(arg, item, scratch) for item in [0, n) on up to `threads` threads
 * of the context's pool (the caller's among them), starting the workers it
 * lacks; each thread gets `scratch_bytes` of its own 64-byte-aligned
 * scratch. Returns FATTN_ERR_OUT_OF_MEMORY (with a message) if no thread
 * can have its scratch; fewer threads than asked run where the system
 * refuses more. In a child of fork() the pool is started afresh. */
typedef void (*cpu_item_fn)(void *arg, int64_t item, float *scratch);
fattn_status cpu_parallel_for(cpu_state *state, int threads, int64_t n, size_t scratch_bytes,
                              cpu_item_fn fn, void *arg, fattn_msg *msg);

/* Element pointer of operand `op` at (b, h, s), as bytes. */
static inline const unsigned char *cpu_elem(const fattn_operand *op, fattn_dtype t, int64_t b,
                                            int64_t h, int64_t s) {
    const int64_t off =
        op->offset + b * op->stride_batch + h * op->stride_head + s * op->stride_seq;
    return (const unsigned char *)op->mem + off * fattn_esize(t); /* a buffer is its address */
}

/* Converts n elements of type t at src to float, multiplied by mul. */
void cpu_load_row(float *dst, const void *src, fattn_dtype t, int64_t n, float mul);
/* Converts n floats to type t at dst. */
void cpu_store_row(void *dst, const float *src, fattn_dtype t, int64_t n);

/* Bytes of RAM plus swap: no single allocation larger can be backed. */
uint64_t cpu_memory_limit(void);

/* Writes a finished row of O (and lse): O = acc / l and lse = m + log(l),
 * or 0 and -inf when l == 0 (no key); a NaN l stays NaN. acc is overwritten. */
void cpu_finish_row(const fattn_problem *p, int64_t b, int64_t h, int64_t i, float *acc, float m,
                    float l);

/* fattn_combine's run function (cpu_combine.c). */
fattn_status cpu_combine(void *state, const fattn_problem *p, const fattn_plan *plan,
                         fattn_msg *msg);

/* The tiled variant's launch parameters (plan->area): the keys of each row
 * are cut into `splits` parts of `chunk` keys (a multiple of tile_kv),
 * computed as separate work items into the workspace and merged by the
 * log-sum-exp rule; splits 1 runs unsplit and needs no workspace. */
typedef enum cpu_tiled_kind {
    CPU_TILED_PER_HEAD,  /* a work item per (sequence, KV head, row tile, split) */
    CPU_TILED_ALL_HEADS, /* per (sequence, split), every KV head: decoding */
} cpu_tiled_kind;
typedef struct cpu_tiled_plan {
    int64_t splits, chunk;
    cpu_tiled_kind kind;
} cpu_tiled_plan;
FATTN_PLAN_FITS(cpu_tiled_plan);

/* The kind of work item the tiled variant takes for p with tiles tq x tkv:
 * every KV head at once where that runs (AVX2), each row sees every key of
 * its sequence (not causal, or one query), one row tile holds a head's rows,
 * heads lie side by side within a key (BSHD, paged) and their state fits in
 * a quarter of L2. The planner keeps the answer in the plan. */
cpu_tiled_kind cpu_tiled_kind_of(const fattn_problem *p, int64_t tq, int64_t tkv, int isa);

/* Workspace bytes of a split plan: m, l and D accumulators per split and
 * output row, plus room to align the start to 64 bytes. */
uint64_t cpu_split_workspace(const fattn_problem *p, int64_t splits);

/* The x86-64 builds of the tiled loop's inner step, picked at run time by
 * CPU features; one binary runs everywhere. */
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define CPU_X86_KERNELS 1
#endif

/* One key tile against rows that all see its `keys` keys (cpu_avx2.c).
 * Rows come in fours: `rows` is a multiple of 4, rows past the real ones
 * have zero Q, m = -inf, l = 0, and their results are not read. k and v
 * point to each key's row in `dtype`; head_dim is a multiple of 8. scores
 * holds 4 (keys + 1) floats. Updates acc, m and l as the tiled loop does. */
typedef struct cpu_key_tile {
    const float *q; /* rows x head_dim, scaled */
    const void *const *k, *const *v;
    float *acc, *m, *l, *scores;
    int64_t rows, keys, head_dim;
    fattn_dtype dtype;
} cpu_key_tile;

/* One block of keys against the rows of every KV head of a sequence
 * (cpu_avx2_heads.c): each head has `rows` rows (a multiple of 4, padded as
 * in cpu_key_tile), stored head after head in q, acc, m and l. k[j] and v[j]
 * point to key j's row of head 0; head h's lies h * k_head (v_head) bytes
 * further. scores holds heads * rows * (max_keys + 1) floats; keys <=
 * max_keys. */
typedef struct cpu_heads_block {
    const float *q;
    const void *const *k, *const *v;
    int64_t k_head, v_head;
    float *acc, *m, *l, *scores;
    int64_t heads, rows, keys, max_keys, head_dim;
    int64_t ahead; /* k[keys .. keys + ahead) are the next keys, to prefetch */
    fattn_dtype dtype;
} cpu_heads_block;
/* Keys K is prefetched ahead of its use in cpu_heads_block. 8: 0, 4, 8
 * and 16 were within the noise on the shared 2-core EPYC (bf16 b1 32k). */
enum { CPU_HEADS_AHEAD = 8 };

/* One key tile against one or two groups of 16 query rows held one per
 * vector lane (cpu_avx512.c): groups of exactly 16 rows (rows past the
 * real ones have zero Q and lo = hi = 0), any head dims, no per-score
 * variants. k[j] and v[j] are key j's float rows (head_dim and head_dim_v
 * floats). Row r sees the tile's keys [lo[r], hi[r]); the others get
 * weight 0. Group g's qt, ot, m, l, lo and hi follow group 0's (qt + 16 g
 * head_dim, ot + 16 g head_dim_v, the others + 16 g). scores holds groups
 * x 16 x (keys rounded up to 16) floats. Updates ot, m and l as the tiled
 * loop updates acc, m and l. */
typedef struct cpu_lane_tile {
    const float *qt;                  /* [head_dim][16]: the rows' scaled Q, transposed */
    const float *const *k, *const *v;
    float *ot, *m, *l, *scores;       /* ot: [head_dim_v][16]; m, l: [16] */
    const int32_t *lo, *hi;           /* [16], relative to the tile's first key */
    int64_t keys, head_dim, head_dim_v;
    int groups;                       /* 1 or 2 */
} cpu_lane_tile;
/* 32 query rows against one key tile on AMX (cpu_amx.c), bf16 only: rows
 * in two blocks of 16, head_dim and head_dim_v multiples of 32, keys
 * padded to keys_pad (a multiple of 32) with zero K and V rows. q holds
 * the rows' bf16 Q unscaled ([32][head_dim], rows past the real ones
 * zero); kt and vp come from cpu_amx_pack_k and _v. Row r sees the tile's
 * keys [lo[r], hi[r]) (0, 0 for padding rows). s and p are scratch:
 * [32][keys_pad] floats and bf16. Updates o ([32][head_dim_v] floats), m
 * and l as the tiled loop does (m in scaled-score units). */
typedef struct cpu_amx_tile {
    const uint16_t *q;
    const uint32_t *kt, *vp;
    float *o, *m, *l, *s;
    uint16_t *p;
    const int32_t *lo, *hi;
    int64_t keys_pad, head_dim, head_dim_v;
    float scale;
} cpu_amx_tile;

/* Where the AMX kernel takes p's tiles of tq rows (with CPU_ISA_AMX):
 * bf16, rows in pairs of 16-row blocks, both head dims in 32-element tile
 * steps, no per-score work (cpu_attention.c). */
int cpu_amx_fits(const fattn_problem *p, int64_t tq);

#ifdef CPU_X86_KERNELS
/* Need AMX-TILE, AMX-BF16 and AVX512-BF16 (cpu_isa() >= CPU_ISA_AMX).
 * pack_k: keys_pad / 16 x head_dim / 32 blocks of 16 x 16 dwords, block
 * (kb, ks) row i = dims (32 ks + 2i, +1) of keys 16 kb .. 16 kb + 15.
 * pack_v: keys_pad / 32 x head_dim_v / 16 blocks of 16 x 16 dwords, block
 * (c, db) row i = dims 16 db .. 16 db + 15 of keys (32 c + 2i, +1). k[j]
 * and v[j] are key j's bf16 rows (j < keys); later keys are zero. */
void cpu_amx_pack_k(const void *const *k, int64_t keys, int64_t keys_pad, int64_t head_dim,
                    uint32_t *kt);
void cpu_amx_pack_v(const void *const *v, int64_t keys, int64_t keys_pad, int64_t head_dim_v,
                    uint32_t *vp);
void cpu_amx_run(const cpu_amx_tile *tile);
/* Asks the OS for the tile state (Linux: arch_prctl, once per process);
 * 1 where it granted it. */
int cpu_amx_enable(void);
/* Both need AVX2, FMA and F16C (cpu_have_avx2). */
void cpu_key_tile_avx2(const cpu_key_tile *tile);
void cpu_heads_block_avx2(const cpu_heads_block *block);
/* Needs AVX-512F (cpu_isa() >= CPU_ISA_AVX512). */
void cpu_lane_tile_avx512(const cpu_lane_tile *tile);
#endif
#if defined(__aarch64__) && defined(__ARM_NEON)
#define CPU_NEON_KERNELS 1
/* The lane kernel on NEON (cpu_neon.c): the same contract. */
void cpu_lane_tile_neon(const cpu_lane_tile *tile);
#endif
/* Query rows of the lane kernel's tiles: one per AVX-512 float lane. */
enum { CPU_LANES = 16 };
/* The instruction sets the kernels are built for, in order. */
typedef enum cpu_isa {
    CPU_ISA_PORTABLE = 0,
    CPU_ISA_AVX2 = 1,
    CPU_ISA_AVX512 = 2,
    CPU_ISA_AMX = 3,
    CPU_ISA_NEON = 4 /* AArch64's only level; not above the x86 ones */
} cpu_isa;
/* isa is an x86-64 level at least `level` (AVX2 < AVX-512 < AMX). */
#define CPU_X86_AT_LEAST(isa, level) ((int)(isa) >= (int)(level) && (int)(isa) <= (int)CPU_ISA_AMX)
/* The lane kernel runs at isa: AVX-512 (with AMX for what AMX leaves) or NEON. */
static inline int cpu_isa_has_lanes(int isa) {
    return CPU_X86_AT_LEAST(isa, CPU_ISA_AVX512) || isa == CPU_ISA_NEON;
}
/* The best of them this CPU runs: x86-64 with AVX2, FMA and F16C; AVX-512F
 * besides, with the OS saving the ZMM state (XGETBV); AMX-TILE, AMX-BF16
 * and AVX512-BF16 besides, with the OS saving the tile state and granting
 * it to this process. */
cpu_isa cpu_isa_of_machine(void);
/* 1 where this CPU runs the AVX2 kernels (x86-64 with AVX2, FMA, F16C). */
int cpu_have_avx2(void);

/* The two variants' run functions (cpu_attention.c). */
fattn_status cpu_forward_tiled(void *state, const fattn_problem *p, const fattn_plan *plan,
                               fattn_msg *msg);
fattn_status cpu_forward_naive(void *state, const fattn_problem *p, const fattn_plan *plan,
                               fattn_msg *msg);

#endif /* FATTN_CPU_H */

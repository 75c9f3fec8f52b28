/* The CPU backend's private pieces: its state, host buffers, the thread pool
 * and the two attention paths (tiled and naive). */
#ifndef FATTN_CPU_H
#define FATTN_CPU_H

#include "backend.h"

typedef struct cpu_state {
    int threads; /* as opened: fattn_context_params, FATTN_CPU_THREADS, or every core */
} cpu_state;

/* Threads for one call: the context parameter when set, else as opened. */
static inline int cpu_threads(const cpu_state *s, const fattn_problem *p) {
    return p->tune.cpu_threads > 0 ? p->tune.cpu_threads : s->threads;
}

/* Runs fn(arg, item, scratch) for item in [0, n) on up to `threads` threads;
 * each thread gets `scratch_bytes` of its own scratch. Returns
 * FATTN_ERR_OUT_OF_MEMORY (with a message) if scratch or threads cannot be had. */
typedef void (*cpu_item_fn)(void *arg, int64_t item, float *scratch);
fattn_status cpu_parallel_for(int threads, int64_t n, size_t scratch_bytes, cpu_item_fn fn,
                              void *arg, fattn_msg *msg);

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
typedef struct cpu_tiled_plan {
    int64_t splits, chunk;
} cpu_tiled_plan;
FATTN_PLAN_FITS(cpu_tiled_plan);

/* Workspace bytes of a split plan: m, l and D accumulators per split and
 * output row, plus room to align the start to 64 bytes. */
uint64_t cpu_split_workspace(const fattn_problem *p, int64_t splits);

/* The two variants' run functions (cpu_attention.c). */
fattn_status cpu_forward_tiled(void *state, const fattn_problem *p, const fattn_plan *plan,
                               fattn_msg *msg);
fattn_status cpu_forward_naive(void *state, const fattn_problem *p, const fattn_plan *plan,
                               fattn_msg *msg);

#endif /* FATTN_CPU_H */

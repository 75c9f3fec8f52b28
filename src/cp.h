/* Context parallelism inside the core: the geometry of the ranks' slices,
 * the calls of one ring step (cp_plan.c, pure), and the step machine that
 * fattn_cp_forward and the in-process driver share (cp.c). */
#ifndef FATTN_CP_H
#define FATTN_CP_H

#include <stdint.h>

#include "internal.h"

#define CP_MAX_RANKS 4096
#define CP_UNBOUNDED INT64_MAX /* an interval side with no limit */

/* A rank's chunk: its first local row, its first global position, its rows. */
typedef struct cp_chunk {
    int64_t local0, global0, len;
} cp_chunk;

/* The chunks of `rank` (1 for CONTIGUOUS, 2 for ZIGZAG) for local length L;
 * returns how many. */
int cp_chunks(fattn_cp_layout layout, int ranks, int rank, int64_t local, cp_chunk out[2]);

/* The global mask: window sides (-1 = unbounded) and causal, over a
 * sequence with seq_q == seq_kv (so key j is visible to row i iff
 * i - left <= j <= i + right, right 0 when causal). */
typedef struct cp_mask {
    int64_t left, right;
} cp_mask;

/* One fattn_forward of a step: the rank's query rows [q_row, q_row + q_len)
 * against the slice's key rows [k_row, k_row + k_len), with a window of
 * (left, right) (-1 unbounded; aligned bottom-right in the call), causal
 * when that window is (unbounded, 0). q_first..q_last are the query
 * chunks it covers, wholly unless q_len was trimmed (a single pair's rows
 * that see nothing). sinks: the call holds the diagonal of every chunk it
 * covers, so the sink joins those rows here and nowhere else. */
typedef struct cp_call {
    int64_t q_row, q_len, k_row, k_len;
    int64_t left, right;
    int q_first, q_last;
    int causal, sinks;
} cp_call;

#define CP_MAX_CALLS 4

/* The calls that cover, exactly once, every visible (query, key) pair
 * between this rank's chunks and those of the slice of rank `src`, fewest
 * first: the whole block in one call where one window describes it, else
 * per key chunk, per query chunk, or per chunk pair. With src == rank
 * (the rank's own slice), calls holding diagonals come first. Returns the
 * count (0: nothing visible). */
int cp_plan_step(fattn_cp_layout layout, int ranks, int rank, int src, int64_t local,
                 cp_mask mask, cp_call out[CP_MAX_CALLS]);

/* ---- The step machine (cp.c) ---------------------------------------------- */

/* A slice of K and V as the step computes on it. */
typedef struct cp_kv {
    fattn_tensor k, v;
} cp_kv;

typedef struct cp_run cp_run;

/* The in-process driver: `ranks` ranks, rank r's context ctxs[r] and
 * tensors q[r] .. lse[r] (lse may be NULL, or an array of NULLs), run in
 * lockstep in this thread, the slices moved through the host
 * (fattn_buffer_read / write). The same step machine as fattn_cp_forward,
 * so tests check the schedule with the CPU backend standing in for GPUs. */
fattn_status fattn_cp_forward_local(fattn_context *const *ctxs, int ranks,
                                    const fattn_cp_desc *cp_desc,
                                    const fattn_attention_desc *desc,
                                    const fattn_tensor *const *q, const fattn_tensor *const *k,
                                    const fattn_tensor *const *v, const fattn_tensor *const *o,
                                    const fattn_tensor *const *lse, fattn_cp_info *info);

/* Measurement only (bench/cp_bench.c): when set, fattn_cp_forward computes
 * every step on the rank's own K/V and transfers nothing, the same work
 * without the waits; its results are wrong. */
extern int fattn_cp_skip_transfers;

/* Measurement only: a handle for rank `rank` of `ranks` with no transport,
 * whose fattn_cp_forward runs that rank's schedule on its own K/V (as with
 * fattn_cp_skip_transfers), so one device can time every rank's compute. */
fattn_status fattn_cp_create_solo(fattn_context *ctx, int ranks, int rank, fattn_cp **out);

#endif /* FATTN_CP_H */

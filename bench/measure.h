/* One benchmark measurement: a problem on one context, timed, checked
 * against a float64 reference on sampled rows, with the naive baseline and
 * the device memory each path was measured to hold. */
#ifndef FATTN_BENCH_MEASURE_H
#define FATTN_BENCH_MEASURE_H

#include <stdint.h>

#include "fattn.h"

/* A problem: batch, query and key/value heads (hq a multiple of hkv: GQA /
 * MQA when hkv < hq), query and key/value sequence lengths, head dim, and
 * the causal mask as a fattn_causal (0 none, 1 bottom-right, 2 top-left;
 * the two alignments agree when sq == skv).
 * How K and V are stored (the fields after causal; all zero: a dense
 * [b, hkv, skv, d] tensor each, every sequence skv keys long):
 *   page > 0: a paged cache (fattn_paged_kv_desc) of pages of `page` keys,
 *     the block table a shuffled permutation of the pages, and seqused_kv
 *     giving each sequence's keys (lens, else skv each);
 *   lens (b entries, skv at least their maximum): sequence i uses lens[i]
 *     keys, given as seqused_kv (K/V padded to skv: a cache longer than
 *     what is used);
 *   packed = 1: K/V (and Q, O) packed without padding through
 *     cu_seqlens_kv (cu_seqlens_q), each sequence lens[i] (else skv) keys.
 * lens points to memory that lives as long as the shape is used.
 * dtype1: 0 runs the shape in every dtype asked for; 1 + a fattn_dtype runs
 * it in that dtype only. */
typedef struct bench_shape {
    int64_t b, hq, hkv, sq, skv, d;
    int causal;
    int64_t page;
    const int64_t *lens;
    int packed;
    int dtype1;
    int bhsd; /* dense Q, K, V, O laid out [b, h, s, d] (--layout bhsd) instead of BSHD */
} bench_shape;

/* A square multi-head shape (the papers' sweep: hq = hkv, sq = skv). */
static inline bench_shape bench_square(int64_t b, int64_t h, int64_t s, int64_t d, int causal) {
    bench_shape sh = {b, h, h, s, s, d, causal, 0, NULL, 0, 0, 0};
    return sh;
}

/* Whether K and V are dense and every sequence skv keys long (no index
 * tables passed). */
static inline int bench_is_dense(bench_shape sh) { return !sh.page && !sh.lens && !sh.packed; }

/* Whether the shape is square multi-head (hq = hkv and sq = skv), dense. */
static inline int bench_is_square(bench_shape sh) {
    return sh.hq == sh.hkv && sh.sq == sh.skv && bench_is_dense(sh);
}

/* Keys sequence i uses. */
static inline int64_t bench_len(bench_shape sh, int64_t i) { return sh.lens ? sh.lens[i] : sh.skv; }

/* "dense", "paged", "padded" (lens with seqused_kv) or "packed" (lens with
 * cu_seqlens). */
static inline const char *bench_kv_layout(bench_shape sh) {
    return sh.page     ? "paged"
           : sh.packed ? "packed"
           : sh.lens   ? "padded"
           : sh.bhsd   ? "dense-bhsd"
                       : "dense";
}

typedef struct bench_opts {
    int iters, warmup;
    int naive; /* also time fattn_forward_naive */
    /* Rows compared with the float64 reference; 0: no check. The rows lie
     * in up to four (batch, query head) pairs, each in a different batch or
     * key/value head where the shape has them; where the K/V of the sampled
     * batches pass CHECK_KV_BYTES (measure.c), only the first and last pairs
     * are checked (the first and the last batch), so a 64 x 128k decode
     * cell reads back and recomputes two sequences, not the batch. */
    int check_rows;
    /* --layout bhsd: dense cells lay Q, K, V and O out [b, h, s, d] (each
     * head's keys contiguous, PyTorch's layout) instead of BSHD. Timing
     * only: the float64 check reads BSHD, so fattn_bench asks for
     * --check-rows 0 with it. */
    int bhsd;
    /* --tf32: f32 cells carry FATTN_FLAG_ALLOW_TF32. */
    int tf32;
    /* --fast-softcap: every cell carries FATTN_FLAG_FAST_SOFTCAP. */
    int fast_softcap;
    /* --variant: the mask every cell's forward gets (timing only, like
     * bhsd: the float64 check knows no variant). window_left, window_right
     * -1 and softcap 0 for none; alibi: a slope per query head; sinks: a
     * logit per query head; bias 1: one [seq_q, seq_kv] plane in the cell's
     * dtype broadcast over batch and heads (stride 0); bias 2: a bias per
     * key, [batch, 1, 1, seq_kv] (a padding mask: stride 0 over heads and
     * rows). */
    struct {
        int on;
        int64_t window_left, window_right;
        float softcap;
        int alibi, sinks, bias;
    } variant;
    /* Wall seconds the warmup + iters calls of one path (tiled, naive) may
     * take; 0: no limit. With a limit, the path first runs once untimed on a
     * small problem of the same dtype, head dim, GQA group and mask (kernel
     * builds and other one-off costs land there), then its own first call
     * sets the estimate: (warmup + iters) x that call. Over the budget, the
     * path stops there and is reported skipped; when the first call took at
     * most half the budget, a second one is timed first and the faster one
     * counts, in case the first still carried a one-off cost. */
    double budget_s;
    /* The device's memory is the host's (the CPU backend, an OpenCL CPU
     * device): where the backend cannot measure the device's memory, the
     * host's RAM bounds the inputs. */
    int host_memory;
} bench_opts;

typedef struct bench_result {
    char backend[16];
    int device;
    char device_name[256];
    fattn_dtype dtype;
    bench_shape shape;
    /* "ok", "error", "skipped", or "unsupported" (a paged or variable-length
     * cell the backend answers FATTN_ERR_UNSUPPORTED: not a failure; a dense
     * cell answered so is an "error") */
    char status[16];
    char note[512];    /* the error, the reason for a skip, the backend's message */
    const char *clock; /* "device" (events / profiling) or "host" */
    double ms, tflops;
    double gbps; /* bench_bytes over the median time, in 1e9 bytes per second */
    /* The bandwidth gbps is read against (set by the caller): "stream" (the
     * host's STREAM copy, for devices whose memory is the host's), "hbm"
     * (--hbm-gbps, for GPUs), or "" (none known); and the STREAM copy of
     * this run, 0 when not measured. */
    const char *bw_ref;
    double bw_ref_gbps, stream_gbps;
    uint64_t workspace_bytes;          /* fattn_workspace_size: allocated by the bench and passed */
    uint64_t flash_bytes, naive_bytes; /* the accounting module's */
    char kernel[32];                   /* the plan's kernel (the memory report's), "" unknown */
    int64_t flash_measured;            /* device memory the call held, measured; -1 unknown */
    double max_err; /* max |O - reference| over the sampled rows; -1 not checked */
    int err_rows;
    int naive_ok;
    double naive_ms, naive_tflops;
    int64_t naive_measured;
    char naive_note[512]; /* why the naive baseline did not run */
    /* Seconds of one call, for the budget's estimates of later cells: the
     * median where the path ran, the call that stopped it where it was
     * skipped over the budget; 0 where none was timed. Not reported. */
    double call_s, naive_call_s;
} bench_result;

/* Fills r (r->backend, device, shape and dtype first set by the caller). */
void bench_measure(fattn_context *ctx, const bench_opts *o, bench_result *r);

/* FLOPs of a shape (fattn_flops of its description: 4·B·Hq·D per visible
 * (query, key) pair). */
double bench_flops(bench_shape sh);

/* Bytes of Q, K, V and O, each moved once: the least memory traffic of one
 * call, what the GB/s column divides by the time. Only the keys each
 * sequence uses count (a paged or padded cache's unused slots do not). */
double bench_bytes(bench_shape sh, fattn_dtype t);

const char *bench_dtype_name(fattn_dtype t);

#endif

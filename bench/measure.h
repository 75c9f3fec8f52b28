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
 * the two alignments agree when sq == skv). */
typedef struct bench_shape {
    int64_t b, hq, hkv, sq, skv, d;
    int causal;
} bench_shape;

/* A square multi-head shape (the papers' sweep: hq = hkv, sq = skv). */
static inline bench_shape bench_square(int64_t b, int64_t h, int64_t s, int64_t d, int causal) {
    bench_shape sh = {b, h, h, s, s, d, causal};
    return sh;
}

/* Whether the shape is square multi-head (hq = hkv and sq = skv). */
static inline int bench_is_square(bench_shape sh) { return sh.hq == sh.hkv && sh.sq == sh.skv; }

typedef struct bench_opts {
    int iters, warmup;
    int naive;      /* also time fattn_forward_naive */
    int check_rows; /* rows compared with the float64 reference; 0: no check */
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
    char status[16];   /* "ok", "error", "skipped" */
    char note[512];    /* the error or the reason for a skip */
    const char *clock; /* "device" (events / profiling) or "host" */
    double ms, tflops;
    double gbps; /* bench_bytes over the median time, in 1e9 bytes per second */
    uint64_t flash_bytes, naive_bytes; /* the accounting module's */
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
 * call, what the GB/s column divides by the time. */
double bench_bytes(bench_shape sh, fattn_dtype t);

const char *bench_dtype_name(fattn_dtype t);

#endif

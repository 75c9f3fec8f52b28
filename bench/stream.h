/* The host's memory bandwidth, measured the way STREAM's Copy kernel measures
 * it: the reference the CPU backend's (and an OpenCL CPU device's) decode
 * GB/s is read against. */
#ifndef FATTN_BENCH_STREAM_H
#define FATTN_BENCH_STREAM_H

#include <stddef.h>

typedef struct bench_stream {
    double gbps;        /* 2 x array_bytes (read + write, as STREAM counts) over the best rep */
    double best_s;      /* the best rep's seconds */
    size_t array_bytes; /* each of the two arrays */
    size_t l3_bytes;    /* last-level cache found (every instance summed); 0: not found */
    int threads, reps;
} bench_stream;

/* The thread count of a CPU backend context made with the defaults:
 * FATTN_CPU_THREADS where it is a valid count, else every online core. */
int bench_stream_default_threads(void);

/* Copies one array of doubles into another, each split into `threads`
 * contiguous slices, one per thread (each thread first touches its own
 * slices, so pages land on its NUMA node), `reps` times after one warm-up
 * copy; the best rep counts. array_bytes 0: the larger of 256 MiB and four
 * times the last-level cache (every L3 instance summed, from sysfs), capped
 * at a quarter of the free RAM for the pair. Returns 0, or -1 when the
 * arrays or threads could not be had (*why says so). */
int bench_stream_copy(int threads, size_t array_bytes, int reps, bench_stream *out, char *why,
                      size_t why_len);

#endif

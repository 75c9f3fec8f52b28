/* Benchmark output: CSV and JSON lines for tools, a side-by-side table for
 * people (one row per shape and dtype, one column per backend and device).
 * CSV columns are read by name (compare.py, peer_table.py); new ones go at
 * the end: heads_kv, seq_kv (heads and seq are the query's), gbps; then
 * workspace_bytes, kv_layout (dense, paged, padded, packed), page_size,
 * kv_lens ("100;4096;32768" for a varied-length batch), stream_gbps (the
 * host's STREAM copy this run), bw_ref ("stream" or "hbm"), bw_ref_gbps and
 * bw_pct (gbps as a percentage of bw_ref_gbps). JSON lines carry the same
 * fields (kv_lens as an array). */
#ifndef FATTN_BENCH_REPORT_H
#define FATTN_BENCH_REPORT_H

#include <stdio.h>

#include "measure.h"

void report_csv_header(FILE *f);
void report_csv(FILE *f, const bench_result *r);
void report_json(FILE *f, const bench_result *r);
/* The n results side by side: TFLOP/s, the largest sampled error, GB/s and
 * the naive baseline's TFLOP/s where it ran, for square multi-head shapes;
 * then decode and other shapes (GQA, seq_q != seq_kv) with the time first,
 * sorted by dtype, batch, seq_kv and heads. */
void report_table(FILE *f, const bench_result *r, int n);

#endif

/* Benchmark output: CSV and JSON lines for tools, a side-by-side table for
 * people (one row per shape and dtype, one column per backend and device). */
#ifndef FATTN_BENCH_REPORT_H
#define FATTN_BENCH_REPORT_H

#include <stdio.h>

#include "measure.h"

void report_csv_header(FILE *f);
void report_csv(FILE *f, const bench_result *r);
void report_json(FILE *f, const bench_result *r);
/* The n results side by side: TFLOP/s, the largest sampled error, and the
 * naive baseline's TFLOP/s where it ran. */
void report_table(FILE *f, const bench_result *r, int n);

#endif

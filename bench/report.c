/* Benchmark output (report.h). */
#include "report.h"

#include <stdlib.h>
#include <string.h>

/* A CSV field: quoted, inner quotes doubled, line breaks (build logs) as spaces. */
static void csv_str(FILE *f, const char *s) {
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"') fputc('"', f);
        fputc(*s == '\n' || *s == '\r' ? ' ' : *s, f);
    }
    fputc('"', f);
}

static void json_str(FILE *f, const char *s) {
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            fprintf(f, "\\%c", *s);
        else if ((unsigned char)*s < 0x20)
            fprintf(f, "\\u%04x", (unsigned char)*s);
        else
            fputc(*s, f);
    }
    fputc('"', f);
}

void report_csv_header(FILE *f) {
    fprintf(f, "backend,device,device_name,dtype,batch,heads,seq,dim,causal,status,ms,tflops,max_"
               "err,err_rows,"
               "flash_bytes,naive_bytes,flash_measured_bytes,naive_ms,naive_tflops,naive_measured_"
               "bytes,clock,note,heads_kv,seq_kv,gbps\n");
}

void report_csv(FILE *f, const bench_result *r) {
    const bench_shape s = r->shape;
    fprintf(f, "%s,%d,", r->backend, r->device);
    csv_str(f, r->device_name);
    fprintf(f, ",%s,%lld,%lld,%lld,%lld,%d,%s,", bench_dtype_name(r->dtype), (long long)s.b,
            (long long)s.hq, (long long)s.sq, (long long)s.d, s.causal, r->status);
    if (strcmp(r->status, "ok") == 0) {
        fprintf(f, "%.4f,%.3f,", r->ms, r->tflops);
        if (r->max_err >= 0)
            fprintf(f, "%.3g,%d,", r->max_err, r->err_rows);
        else
            fprintf(f, ",,");
        fprintf(f, "%llu,%llu,", (unsigned long long)r->flash_bytes,
                (unsigned long long)r->naive_bytes);
        if (r->flash_measured >= 0) fprintf(f, "%lld", (long long)r->flash_measured);
        if (r->naive_ok) {
            fprintf(f, ",%.4f,%.3f,", r->naive_ms, r->naive_tflops);
            if (r->naive_measured >= 0) fprintf(f, "%lld", (long long)r->naive_measured);
        } else {
            fprintf(f, ",,,");
        }
        fprintf(f, ",%s,", r->clock);
        csv_str(f, r->naive_ok ? "" : r->naive_note);
        fprintf(f, ",%lld,%lld,%.3f", (long long)s.hkv, (long long)s.skv, r->gbps);
    } else {
        fprintf(f, ",,,,%llu,%llu,,,,,,", (unsigned long long)r->flash_bytes,
                (unsigned long long)r->naive_bytes);
        csv_str(f, r->note);
        fprintf(f, ",%lld,%lld,", (long long)s.hkv, (long long)s.skv);
    }
    fputc('\n', f);
    fflush(f);
}

void report_json(FILE *f, const bench_result *r) {
    const bench_shape s = r->shape;
    fprintf(f, "{\"backend\": \"%s\", \"device\": %d, \"device_name\": ", r->backend, r->device);
    json_str(f, r->device_name);
    fprintf(f,
            ", \"dtype\": \"%s\", \"batch\": %lld, \"heads\": %lld, \"heads_kv\": %lld, "
            "\"seq\": %lld, \"seq_kv\": %lld, \"dim\": %lld, \"causal\": %d, "
            "\"status\": \"%s\", \"flash_bytes\": %llu, \"naive_bytes\": %llu",
            bench_dtype_name(r->dtype), (long long)s.b, (long long)s.hq, (long long)s.hkv,
            (long long)s.sq, (long long)s.skv, (long long)s.d, s.causal, r->status,
            (unsigned long long)r->flash_bytes, (unsigned long long)r->naive_bytes);
    if (strcmp(r->status, "ok") == 0) {
        fprintf(f, ", \"ms\": %.6g, \"tflops\": %.6g, \"gbps\": %.6g, \"clock\": \"%s\"", r->ms,
                r->tflops, r->gbps, r->clock);
        if (r->max_err >= 0)
            fprintf(f, ", \"max_err\": %.3g, \"err_rows\": %d", r->max_err, r->err_rows);
        if (r->flash_measured >= 0)
            fprintf(f, ", \"flash_measured_bytes\": %lld", (long long)r->flash_measured);
        if (r->naive_ok) {
            fprintf(f, ", \"naive_ms\": %.6g, \"naive_tflops\": %.6g", r->naive_ms,
                    r->naive_tflops);
            if (r->naive_measured >= 0)
                fprintf(f, ", \"naive_measured_bytes\": %lld", (long long)r->naive_measured);
        } else {
            fprintf(f, ", \"naive_note\": ");
            json_str(f, r->naive_note);
        }
    } else {
        fprintf(f, ", \"note\": ");
        json_str(f, r->note);
    }
    fprintf(f, "}\n");
    fflush(f);
}

static int same_shape(bench_shape a, bench_shape b) {
    return a.b == b.b && a.hq == b.hq && a.hkv == b.hkv && a.sq == b.sq && a.skv == b.skv &&
           a.d == b.d && a.causal == b.causal;
}

static int same_row(const bench_result *a, const bench_result *b) {
    return a->dtype == b->dtype && same_shape(a->shape, b->shape);
}

static int same_column(const bench_result *a, const bench_result *b) {
    return strcmp(a->backend, b->backend) == 0 && a->device == b->device;
}

/* One cell: "312.4 (2e-03)" or "skip" / "error". */
static void cell(char *buf, size_t len, const bench_result *r) {
    if (!r)
        snprintf(buf, len, "-");
    else if (strcmp(r->status, "ok") != 0)
        snprintf(buf, len, "%s", r->status);
    else if (r->max_err >= 0)
        snprintf(buf, len, "%.3g (%.0e)", r->tflops, r->max_err);
    else
        snprintf(buf, len, "%.3g", r->tflops);
}

static void naive_cell(char *buf, size_t len, const bench_result *hit) {
    snprintf(buf, len, "-");
    if (hit && hit->naive_ok)
        snprintf(buf, len, "%.3g", hit->naive_tflops);
    else if (hit && strncmp(hit->naive_note, "impossible", 10) == 0)
        snprintf(buf, len, "no room");
    else if (hit && strncmp(hit->naive_note, "skipped", 7) == 0)
        snprintf(buf, len, "skipped");
}

static void gbps_cell(char *buf, size_t len, const bench_result *hit) {
    if (hit && strcmp(hit->status, "ok") == 0)
        snprintf(buf, len, "%.4g", hit->gbps);
    else
        snprintf(buf, len, "-");
}

/* The result of row `row` in column `col`, if any (rows r[from..n)). */
static const bench_result *find(const bench_result *r, int from, int n, const bench_result *row,
                                const bench_result *col) {
    for (int k = from; k < n; k++)
        if (same_row(&r[k], row) && same_column(&r[k], col)) return &r[k];
    return NULL;
}

static int dtype_rank(fattn_dtype t) { return t == FATTN_F32 ? 0 : t == FATTN_F16 ? 1 : 2; }

/* The order of the decode / general table: dtype, batch, seq_kv, heads,
 * seq_q, dim, mask. */
static int cmp_general(const void *pa, const void *pb) {
    const bench_result *a = *(const bench_result *const *)pa, *b = *(const bench_result *const *)pb;
    const int64_t ka[8] = {dtype_rank(a->dtype), a->shape.b,  a->shape.skv, a->shape.hq,
                           a->shape.hkv,         a->shape.sq, a->shape.d,   a->shape.causal},
                  kb[8] = {dtype_rank(b->dtype), b->shape.b,  b->shape.skv, b->shape.hq,
                           b->shape.hkv,         b->shape.sq, b->shape.d,   b->shape.causal};
    for (int i = 0; i < 8; i++)
        if (ka[i] != kb[i]) return ka[i] < kb[i] ? -1 : 1;
    return 0;
}

void report_table(FILE *f, const bench_result *r, int n) {
    enum { MAXCOL = 16 };
    const bench_result *cols[MAXCOL];
    int nc = 0, square = 0, general = 0, general_naive = 0;
    for (int i = 0; i < n; i++) {
        int seen = 0;
        for (int c = 0; c < nc; c++) seen |= same_column(cols[c], &r[i]);
        if (!seen && nc < MAXCOL) cols[nc++] = &r[i];
        if (bench_is_square(r[i].shape))
            square++;
        else {
            general++;
            general_naive |= r[i].naive_ok || strncmp(r[i].naive_note, "impossible", 10) == 0 ||
                             strncmp(r[i].naive_note, "skipped", 7) == 0;
        }
    }
    fprintf(f, "\nTFLOP/s (max |error| against the float64 reference on sampled rows); GB/s: Q, K, "
               "V and O\n"
               "moved once over the median time; naive: the same backend's materialising "
               "baseline. Columns:\n");
    for (int c = 0; c < nc; c++)
        fprintf(f, "  [%d] %s %d: %s\n", c, cols[c]->backend, cols[c]->device,
                cols[c]->device_name);
    if (square || !general) {
        fprintf(f, "%-5s %6s %4s %3s %7s |", "dtype", "seq", "dim", "cau", "b x h");
        for (int c = 0; c < nc; c++)
            fprintf(f, " [%d] tiled %10s %8s %7s |", c, "", "GB/s", "naive");
        fputc('\n', f);
    }
    for (int i = 0; i < n; i++) {
        if (!bench_is_square(r[i].shape)) continue;
        int first = 1;
        for (int k = 0; k < i && first; k++) first = !same_row(&r[k], &r[i]);
        if (!first) continue;
        char bh[24];
        snprintf(bh, sizeof bh, "%lldx%lld", (long long)r[i].shape.b, (long long)r[i].shape.hq);
        fprintf(f, "%-5s %6lld %4lld %3d %7s |", bench_dtype_name(r[i].dtype),
                (long long)r[i].shape.sq, (long long)r[i].shape.d, r[i].shape.causal, bh);
        for (int c = 0; c < nc; c++) {
            const bench_result *hit = find(r, i, n, &r[i], cols[c]);
            char tiled[48], gb[24], naive[24];
            cell(tiled, sizeof tiled, hit);
            gbps_cell(gb, sizeof gb, hit);
            naive_cell(naive, sizeof naive, hit);
            fprintf(f, " %-20s %8s %7s |", tiled, gb, naive);
        }
        fputc('\n', f);
    }
    if (!general) return;
    /* Decode and other general shapes (GQA, seq_q != seq_kv): time and GB/s
     * first, sorted by dtype, batch, seq_kv and heads. */
    const bench_result **rows = malloc((size_t)general * sizeof *rows);
    int nr = 0;
    if (!rows) return;
    for (int i = 0; i < n; i++) {
        if (bench_is_square(r[i].shape)) continue;
        int first = 1;
        for (int k = 0; k < i && first; k++) first = !same_row(&r[k], &r[i]);
        if (first) rows[nr++] = &r[i];
    }
    qsort(rows, (size_t)nr, sizeof *rows, cmp_general);
    fprintf(f, "\nDecode and other shapes (heads: query/key-value; cau: 1 bottom-right, 2 "
               "top-left):\n");
    fprintf(f, "%-5s %5s %7s %6s %7s %4s %3s |", "dtype", "batch", "heads", "seq_q", "seq_kv",
            "dim", "cau");
    for (int c = 0; c < nc; c++)
        fprintf(f, " [%d] %9s %8s %-16s%s |", c, "ms", "GB/s", "TFLOP/s (err)",
                general_naive ? "   naive" : "");
    fputc('\n', f);
    for (int i = 0; i < nr; i++) {
        const bench_shape sh = rows[i]->shape;
        char heads[32];
        snprintf(heads, sizeof heads, "%lld/%lld", (long long)sh.hq, (long long)sh.hkv);
        fprintf(f, "%-5s %5lld %7s %6lld %7lld %4lld %3d |", bench_dtype_name(rows[i]->dtype),
                (long long)sh.b, heads, (long long)sh.sq, (long long)sh.skv, (long long)sh.d,
                sh.causal);
        for (int c = 0; c < nc; c++) {
            const bench_result *hit = find(r, 0, n, rows[i], cols[c]);
            char ms[24], gb[24], tiled[48], naive[24];
            if (hit && strcmp(hit->status, "ok") == 0)
                snprintf(ms, sizeof ms, "%.4g", hit->ms);
            else
                snprintf(ms, sizeof ms, "%s", hit ? hit->status : "-");
            gbps_cell(gb, sizeof gb, hit);
            if (hit && strcmp(hit->status, "ok") == 0)
                cell(tiled, sizeof tiled, hit);
            else
                snprintf(tiled, sizeof tiled, "-");
            naive_cell(naive, sizeof naive, hit);
            fprintf(f, "     %9s %8s %-16s", ms, gb, tiled);
            if (general_naive) fprintf(f, " %7s", naive);
            fprintf(f, " |");
        }
        fputc('\n', f);
    }
    free(rows);
}

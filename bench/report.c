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

/* "100;4096;32768": the keys of each sequence of a varied-length shape,
 * "" otherwise (cut short, ending in "...", past len). */
static const char *lens_str(bench_shape s, char *buf, size_t len) {
    size_t at = 0;
    buf[0] = '\0';
    for (int64_t i = 0; s.lens && i < s.b; i++) {
        const int k = snprintf(buf + at, len - at, "%s%lld", i ? ";" : "", (long long)s.lens[i]);
        if (k < 0 || (size_t)k >= len - at) {
            snprintf(buf + (len > 4 ? len - 4 : 0), len > 4 ? 4 : len, "...");
            break;
        }
        at += (size_t)k;
    }
    return buf;
}

/* The percentage of the reference bandwidth (STREAM or HBM) reached; 0
 * where there is none or the cell did not run. */
static double bw_pct(const bench_result *r) {
    return strcmp(r->status, "ok") == 0 && r->bw_ref_gbps > 0 ? 100.0 * r->gbps / r->bw_ref_gbps
                                                              : 0.0;
}

void report_csv_header(FILE *f) {
    fprintf(f, "backend,device,device_name,dtype,batch,heads,seq,dim,causal,status,ms,tflops,max_"
               "err,err_rows,"
               "flash_bytes,naive_bytes,flash_measured_bytes,naive_ms,naive_tflops,naive_measured_"
               "bytes,clock,note,heads_kv,seq_kv,gbps,"
               "workspace_bytes,kv_layout,page_size,kv_lens,stream_gbps,bw_ref,bw_ref_gbps,bw_"
               "pct\n");
}

/* The columns after gbps (report.h). */
static void csv_tail(FILE *f, const bench_result *r) {
    const bench_shape s = r->shape;
    char lens[1024];
    fprintf(f, ",%llu,%s,%lld,", (unsigned long long)r->workspace_bytes, bench_kv_layout(s),
            (long long)s.page);
    csv_str(f, lens_str(s, lens, sizeof lens));
    fputc(',', f);
    if (r->stream_gbps > 0) fprintf(f, "%.2f", r->stream_gbps);
    fprintf(f, ",%s,", r->bw_ref ? r->bw_ref : "");
    if (r->bw_ref_gbps > 0) fprintf(f, "%.2f", r->bw_ref_gbps);
    fputc(',', f);
    if (bw_pct(r) > 0) fprintf(f, "%.1f", bw_pct(r));
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
    csv_tail(f, r);
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
    fprintf(f, ", \"kv_layout\": \"%s\", \"page_size\": %lld, \"workspace_bytes\": %llu",
            bench_kv_layout(s), (long long)s.page, (unsigned long long)r->workspace_bytes);
    if (r->kernel[0]) fprintf(f, ", \"kernel\": \"%s\"", r->kernel);
    if (s.lens) {
        fprintf(f, ", \"kv_lens\": [");
        for (int64_t i = 0; i < s.b; i++) fprintf(f, "%s%lld", i ? ", " : "", (long long)s.lens[i]);
        fputc(']', f);
    }
    if (r->stream_gbps > 0) fprintf(f, ", \"stream_gbps\": %.6g", r->stream_gbps);
    if (r->bw_ref && r->bw_ref_gbps > 0)
        fprintf(f, ", \"bw_ref\": \"%s\", \"bw_ref_gbps\": %.6g", r->bw_ref, r->bw_ref_gbps);
    if (strcmp(r->status, "ok") == 0) {
        fprintf(f, ", \"ms\": %.6g, \"tflops\": %.6g, \"gbps\": %.6g, \"clock\": \"%s\"", r->ms,
                r->tflops, r->gbps, r->clock);
        if (bw_pct(r) > 0) fprintf(f, ", \"bw_pct\": %.4g", bw_pct(r));
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
    int same = a.b == b.b && a.hq == b.hq && a.hkv == b.hkv && a.sq == b.sq && a.skv == b.skv &&
               a.d == b.d && a.causal == b.causal && a.page == b.page && a.packed == b.packed &&
               !a.lens == !b.lens;
    for (int64_t i = 0; same && a.lens && i < a.b; i++) same = a.lens[i] == b.lens[i];
    return same;
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

/* "312.4" or, where the reference bandwidth is known, "312.4 (45%)": the
 * share of the host's STREAM copy (CPU rows) or of --hbm-gbps (GPU rows). */
static void gbps_cell(char *buf, size_t len, const bench_result *hit) {
    if (hit && strcmp(hit->status, "ok") == 0 && bw_pct(hit) > 0)
        snprintf(buf, len, "%.4g (%.0f%%)", hit->gbps, bw_pct(hit));
    else if (hit && strcmp(hit->status, "ok") == 0)
        snprintf(buf, len, "%.4g", hit->gbps);
    else
        snprintf(buf, len, "-");
}

/* The K/V storage of a general row: "-" (dense), "page 16", "padded 3 seqs",
 * "packed 3 seqs". */
static void kv_cell(char *buf, size_t len, bench_shape s) {
    if (s.page)
        snprintf(buf, len, "page %lld%s", (long long)s.page, s.lens ? " var" : "");
    else if (s.lens)
        snprintf(buf, len, "%s %lld seqs", s.packed ? "packed" : "padded", (long long)s.b);
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
    const int64_t ka[10] = {dtype_rank(a->dtype),
                            a->shape.b,
                            a->shape.skv,
                            a->shape.hq,
                            a->shape.hkv,
                            a->shape.sq,
                            a->shape.d,
                            a->shape.causal,
                            a->shape.lens != NULL,
                            a->shape.page + a->shape.packed},
                  kb[10] = {dtype_rank(b->dtype),
                            b->shape.b,
                            b->shape.skv,
                            b->shape.hq,
                            b->shape.hkv,
                            b->shape.sq,
                            b->shape.d,
                            b->shape.causal,
                            b->shape.lens != NULL,
                            b->shape.page + b->shape.packed};
    for (int i = 0; i < 10; i++)
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
    double stream = 0.0, hbm = 0.0;
    for (int i = 0; i < n; i++) {
        if (r[i].stream_gbps > 0) stream = r[i].stream_gbps;
        if (r[i].bw_ref && !strcmp(r[i].bw_ref, "hbm")) hbm = r[i].bw_ref_gbps;
    }
    if (stream > 0 || hbm > 0) {
        fprintf(f, "GB/s (N%%): N%% of ");
        if (stream > 0)
            fprintf(f, "the host's STREAM copy, %.1f GB/s (host-memory devices)", stream);
        if (hbm > 0) fprintf(f, "%s--hbm-gbps %.0f (GPUs)", stream > 0 ? "; of " : "", hbm);
        fprintf(f, ".\n");
    }
    if (square || !general) {
        fprintf(f, "%-5s %6s %4s %3s %7s |", "dtype", "seq", "dim", "cau", "b x h");
        for (int c = 0; c < nc; c++)
            fprintf(f, " [%d] tiled %10s %14s %7s |", c, "", "GB/s", "naive");
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
            fprintf(f, " %-20s %14s %7s |", tiled, gb, naive);
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
    fprintf(f, "%-5s %5s %7s %6s %7s %4s %3s %-14s |", "dtype", "batch", "heads", "seq_q", "seq_kv",
            "dim", "cau", "kv");
    for (int c = 0; c < nc; c++)
        fprintf(f, " [%d] %9s %14s %-16s%s |", c, "ms", "GB/s", "TFLOP/s (err)",
                general_naive ? "   naive" : "");
    fputc('\n', f);
    for (int i = 0; i < nr; i++) {
        const bench_shape sh = rows[i]->shape;
        char heads[32], kv[32];
        snprintf(heads, sizeof heads, "%lld/%lld", (long long)sh.hq, (long long)sh.hkv);
        kv_cell(kv, sizeof kv, sh);
        fprintf(f, "%-5s %5lld %7s %6lld %7lld %4lld %3d %-14s |", bench_dtype_name(rows[i]->dtype),
                (long long)sh.b, heads, (long long)sh.sq, (long long)sh.skv, (long long)sh.d,
                sh.causal, kv);
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
            fprintf(f, "     %9s %14s %-16s", ms, gb, tiled);
            if (general_naive) fprintf(f, " %7s", naive);
            fprintf(f, " |");
        }
        fputc('\n', f);
    }
    free(rows);
    /* Why the unsupported cells are, once per column and message. */
    for (int c = 0; c < nc; c++)
        for (int i = 0; i < n; i++) {
            if (!same_column(&r[i], cols[c]) || strcmp(r[i].status, "unsupported") != 0) continue;
            int first = 1;
            for (int k = 0; k < i && first; k++)
                first = !(same_column(&r[k], cols[c]) && !strcmp(r[k].status, "unsupported") &&
                          !strcmp(r[k].note, r[i].note));
            if (first) fprintf(f, "[%d] unsupported: %s\n", c, r[i].note);
        }
}
